// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A target whose page faults land in memory mapped before the tracer
 * attached, and whose child process runs a function with a known name, for
 * the mapping tests. Built with frame pointers (Makefile). Before it reads
 * the go byte on stdin it
 *   - maps PRE_MIB MiB of anonymous memory (pre_region), untouched;
 *   - grows its brk heap by HEAP_MIB MiB (sbrk), untouched;
 *   - maps 4 MiB of a file in /dev/shm whose name holds an escape sequence
 *     and a newline ("sbmaps-ESC[31m-NEWLINE-PID"), shared, untouched;
 *   - forks a child that execs this program again ("child"): a new address
 *     layout, whose loop child_work_loop spins a little and naps 3 ms
 *     (off-CPU stacks, CPU samples) until it is killed.
 * Then 16 steps (USDT stepblame:step at each start), each sleeping 10 ms,
 * and in step 4 it touches every page of pre_region, in step 8 every page of
 * the heap grown before the attach, in step 6 every page of the shared file
 * (removed at the end), in step 12 it grows the heap by HEAP_MIB
 * MiB more (brk during the capture) and touches that. It prints the
 * addresses (pre_region, heap_start, heap2_start) on stdout and kills the
 * child at the end.
 *
 *   sbmaps PRE_MIB HEAP_MIB
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/sdt.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

static void sleep_ms(int ms)
{
	struct timespec s = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&s, NULL);
}

static __attribute__((noinline)) void child_nap(void)
{
	sleep_ms(3);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void child_work_loop(void)
{
	for (;;) {
		for (int i = 0; i < 200000; i++)
			sink += (uint64_t)i * 7;
		child_nap();
	}
}

static __attribute__((noinline)) void touch(volatile char *p, size_t len)
{
	for (size_t i = 0; i < len; i += 4096)
		p[i] = 1;
}

int main(int argc, char **argv)
{
	size_t pre, heap;
	char *region, *h1, *h2, *shm, c, shm_path[128];
	pid_t kid;
	int fd;

	if (argc == 2 && !strcmp(argv[1], "child")) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		child_work_loop();
		return 0;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: sbmaps PRE_MIB HEAP_MIB\n");
		return 2;
	}
	pre = (size_t)atoi(argv[1]) << 20;
	heap = (size_t)atoi(argv[2]) << 20;
	region = mmap(NULL, pre, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	h1 = sbrk((intptr_t)heap);
	/* a name the target chose to be hostile to whoever prints it */
	snprintf(shm_path, sizeof(shm_path), "/dev/shm/sbmaps-\x1b[31m-\n-%d", (int)getpid());
	fd = open(shm_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, 4 << 20)) {
		perror(shm_path);
		return 1;
	}
	shm = mmap(NULL, 4 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (region == MAP_FAILED || h1 == (void *)-1 || shm == MAP_FAILED) {
		perror("sbmaps");
		return 1;
	}
	kid = fork();
	if (kid == 0) {
		execl("/proc/self/exe", argv[0], "child", (char *)NULL);
		_exit(127);
	}
	printf("pre_region=%p\nheap_start=%p\nshm_start=%p\n", (void *)region, (void *)h1,
	       (void *)shm);
	fflush(stdout);
	if (read(0, &c, 1) != 1)
		return 1;
	for (int step = 0; step < 16; step++) {
		STAP_PROBE1(stepblame, step, step);
		if (step == 4)
			touch(region, pre);
		if (step == 6)
			touch(shm, 4 << 20);
		if (step == 8)
			touch(h1, heap);
		if (step == 12) {
			h2 = sbrk((intptr_t)heap);
			if (h2 == (void *)-1)
				return 1;
			printf("heap2_start=%p\n", (void *)h2);
			fflush(stdout);
			touch(h2, heap);
		}
		sleep_ms(10);
	}
	STAP_PROBE1(stepblame, step, 16);
	unlink(shm_path);
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	return 0;
}
