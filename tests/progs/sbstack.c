// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A target whose slow events come from functions with known names, built
 * with frame pointers (Makefile), for the user-stack tests: waits for a byte
 * on stdin, then
 *   checkpoint_save: writes 8 MiB to a file in DIR and fsyncs it (a slow iosys);
 *   arena_reserve:   maps 256 MiB, touches every page (a fault burst), unmaps
 *                    it (a slow munmap);
 *   buffer_grow:     mallocs 64 MiB a few times (slow allocator calls);
 *   wait_for_loader: sleeps 30 ms three times (long off-CPU waits);
 *   jit_region_run:  copies a function's code into an anonymous executable
 *                    mapping, writes /tmp/perf-PID.map naming it
 *                    "jit_hot_loop", and runs it doing fsyncs: a slow iosys
 *                    whose stack passes through JIT code;
 *   decoy_spin:      (x86-64) computes for 400 ms of CPU time with its frame
 *                    pointer on a fake frame in the heap whose return address
 *                    is inside decoy_frame, which nothing calls: a CPU sample
 *                    that reads the heap as a frame names decoy_frame. Prints
 *                    "decoy LOOP RET": the spin loop's address and the fake
 *                    return address.
 *   fsync_repeat:    40 times, rewrites a 4 KiB block of the file and
 *                    fsyncs it: slow calls that repeat, a few ms apart.
 *   wait_for_worker: three times, 100 short futex round trips with a thread
 *                    of its own on the same CPU, then a 30 ms wait on a futex
 *                    that the thread wakes: long waits that come right after
 *                    short ones, woken by a thread of the same process.
 * Usage: sbstack DIR
 */
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

static char path[4096];

/* no frame of its own is needed: a frame-pointer unwinder may skip it (docs/ARCHITECTURE.md) */
static __attribute__((noinline)) void flush_to_disk(int fd)
{
	if (fsync(fd))
		perror("fsync");
}

__attribute__((noinline)) void checkpoint_save(void)
{
	static char block[1 << 20];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0) {
		perror(path);
		exit(1);
	}
	memset(block, 'x', sizeof(block));
	for (int k = 0; k < 3; k++) {
		for (int i = 0; i < 8; i++)
			if (write(fd, block, sizeof(block)) != (ssize_t)sizeof(block))
				exit(1);
		flush_to_disk(fd);
	}
	close(fd);
}

__attribute__((noinline)) void arena_reserve(void)
{
	size_t len = 256u << 20;
	volatile char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);

	if (p == MAP_FAILED)
		exit(1);
	for (size_t i = 0; i < len; i += 4096)
		p[i] = 1;
	munmap((void *)p, len);
}

__attribute__((noinline)) void buffer_grow(void)
{
	for (int i = 0; i < 8; i++) {
		volatile char *p = malloc(64u << 20);

		if (!p)
			exit(1);
		p[0] = 1;
		free((void *)p);
	}
}

static __attribute__((noinline)) void nap(void)
{
	usleep(30000);
}

__attribute__((noinline)) void wait_for_loader(void)
{
	for (int i = 0; i < 3; i++)
		nap();
}

/* the code copied into the JIT region: calls back through a pointer (no relocations) */
typedef void (*cb_fn)(int);

static __attribute__((noinline)) void jit_template(cb_fn cb, int fd)
{
	cb(fd);
	cb(fd);
	__asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void jit_template_end(void)
{
}

static __attribute__((noinline)) void sync_cb(int fd)
{
	if (fsync(fd))
		perror("fsync");
}

__attribute__((noinline)) void jit_region_run(void)
{
	size_t n = (size_t)((uintptr_t)jit_template_end - (uintptr_t)jit_template);
	char map[64];
	FILE *f;
	int fd;

	if (n == 0 || n > 4096)
		n = 256;
	unsigned char *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (code == MAP_FAILED)
		return;
	memcpy(code, (void *)jit_template, n);
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)getpid());
	f = fopen(map, "w");
	if (f) {
		fprintf(f, "%lx %zx jit_hot_loop\n", (unsigned long)(uintptr_t)code, n);
		fclose(f);
	}
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
	if (fd < 0)
		return;
	for (int i = 0; i < 4; i++) {
		static char block[1 << 20];

		memset(block, 'y', sizeof(block));
		if (write(fd, block, sizeof(block)) < 0)
			break;
		((void (*)(cb_fn, int))code)(sync_cb, fd);
	}
	close(fd);
}

/* never called: only a fake frame in the heap points into it */
__attribute__((noinline)) void decoy_frame(void)
{
	__asm__ volatile("nop\n nop\n nop\n nop\n nop\n nop\n nop\n nop");
}

static volatile sig_atomic_t decoy_done;

static void decoy_stop(int sig)
{
	(void)sig;
	decoy_done = 1;
}

__attribute__((noinline)) void decoy_spin(void)
{
#if defined(__x86_64__)
	extern char decoy_loop[];
	uint64_t *fake = malloc(2 * sizeof(*fake));
	struct itimerval cpu = { .it_value = { .tv_usec = 400000 } };

	if (!fake)
		return;
	fake[0] = 0;                                   /* no caller's frame */
	fake[1] = (uint64_t)(uintptr_t)decoy_frame + 4; /* its "return address" */
	printf("decoy %#lx %#lx\n", (unsigned long)(uintptr_t)decoy_loop,
	       (unsigned long)fake[1]);
	fflush(stdout);
	signal(SIGPROF, decoy_stop);
	setitimer(ITIMER_PROF, &cpu, NULL);
	/* below the red zone, the frame pointer saved, then pointed at the heap */
	__asm__ volatile("sub $128, %%rsp\n\t"
			 "push %%rbp\n\t"
			 "mov %0, %%rbp\n"
			 "decoy_loop:\n\t"
			 "pause\n\t"
			 "cmpl $0, %1\n\t"
			 "je decoy_loop\n\t"
			 "pop %%rbp\n\t"
			 "add $128, %%rsp"
			 :: "r"(fake), "m"(decoy_done) : "memory", "cc");
	free(fake);
#else
	printf("decoy none\n");
#endif
}

__attribute__((noinline)) void fsync_repeat(void)
{
	static char block[4096];
	int fd = open(path, O_WRONLY | O_CREAT, 0600);

	if (fd < 0) {
		perror(path);
		exit(1);
	}
	for (int i = 0; i < 40; i++) {
		memset(block, 'a' + i % 26, sizeof(block));
		if (pwrite(fd, block, sizeof(block), 0) != (ssize_t)sizeof(block))
			exit(1);
		flush_to_disk(fd);
	}
	close(fd);
}

/* the futex word of wait_for_worker's round trips: odd from the main thread, even from the worker */
static int seq;

static void fx_wait_while(int v)
{
	while (__atomic_load_n(&seq, __ATOMIC_ACQUIRE) == v)
		syscall(SYS_futex, &seq, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

static void fx_set(int v)
{
	__atomic_store_n(&seq, v, __ATOMIC_RELEASE);
	syscall(SYS_futex, &seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

#define PINGS 100

static void *worker_loop(void *arg)
{
	(void)arg;
	for (int k = 0; k < PINGS; k++) {
		fx_wait_while(2 * k);
		fx_set(2 * k + 2);
	}
	fx_wait_while(2 * PINGS);
	usleep(30000);
	fx_set(2 * PINGS + 2);
	return NULL;
}

static __attribute__((noinline)) void worker_wait(void)
{
	fx_wait_while(2 * PINGS + 1);
}

__attribute__((noinline)) void wait_for_worker(void)
{
	cpu_set_t one;

	/* both threads on one CPU: each round trip is a real sleep */
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	sched_setaffinity(0, sizeof(one), &one);
	for (int r = 0; r < 3; r++) {
		pthread_t t;

		seq = 0;
		if (pthread_create(&t, NULL, worker_loop, NULL))
			exit(1);
		pthread_setaffinity_np(t, sizeof(one), &one);
		for (int k = 0; k < PINGS; k++) {
			fx_set(2 * k + 1);
			fx_wait_while(2 * k + 1);
		}
		fx_set(2 * PINGS + 1);
		worker_wait();
		pthread_join(t, NULL);
	}
}

int main(int argc, char **argv)
{
	char c;

	if (argc < 2)
		return 2;
	snprintf(path, sizeof(path), "%s/sbstack.dat", argv[1]);
	if (read(0, &c, 1) != 1)
		return 1;
	checkpoint_save();
	arena_reserve();
	buffer_grow();
	wait_for_loader();
	jit_region_run();
	decoy_spin();
	fsync_repeat();
	wait_for_worker();
	unlink(path);
	printf("done\n");
	return 0;
}
