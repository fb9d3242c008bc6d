// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A target for loading a library into a running process: threads that sleep
 * in read (a pipe), nanosleep, futex and epoll_wait, fed by the main thread,
 * each checking that its calls return what they must (no EINTR, no lost or
 * repeated data, full sleeps, registers kept across the call), and that no
 * signal reached a handler and no thread's signal mask changed.
 *
 *   sbinject [OPTIONS] MS
 *     --seccomp-kill-memfd   a seccomp filter (all threads) that kills the process on memfd_create
 *     --seccomp-docker       one that fails clone3 with ENOSYS and kills on kexec_load
 *     --block-segv           every thread blocks SIGSEGV
 *     --lib PATH             dlopen PATH (RTLD_GLOBAL) first, e.g. a stand-in libcuda.so.1
 *     --late-lib PATH        the same, 1.5 s after "ready" (CUDA started late)
 *     --memfd-decoy PATH     a hostile target: memfd_create is answered (a seccomp user
 *                            notification, all threads) with a descriptor of PATH, a file
 *                            it creates empty; the loader must write nothing into it
 *     --memfd-decoy-unlinked PATH   the same, the file removed from its directory first
 *     --marks                the main thread marks a step (stepblame:step) every 10 ms
 *
 * Prints "ready" once its threads run, and at the end one line:
 *   sbinject: ok reads=N sleeps=N futex=N epoll=N notes=N
 * or "sbinject: FAIL why" (exit 1). sbinject_note() is for the injected library.
 */
#include <dlfcn.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "stepblame.h"

#define SLEEP_NS 30000000ll
#define EPOLL_MAGIC 0x5b1a7e5b1a7eull

static atomic_int stop, failed, notes, signals_seen;
static char why[256];
static int pipefd[2], efd, epfd;
static atomic_uint futex_word;
static atomic_uint posted, seen_futex;
static unsigned long reads, sleeps, epolls;

__attribute__((visibility("default"))) void sbinject_note(const char *what)
{
	(void)what;
	atomic_fetch_add(&notes, 1);
}

static void failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void failf(const char *fmt, ...)
{
	va_list ap;

	if (atomic_exchange(&failed, 1))
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_signal(int sig)
{
	(void)sig;
	atomic_fetch_add(&signals_seen, 1);
}

static bool mask_same(const sigset_t *a)
{
	sigset_t now;

	pthread_sigmask(SIG_BLOCK, NULL, &now);
	for (int s = 1; s < 64; s++)
		if (sigismember(a, s) != sigismember(&now, s))
			return false;
	return true;
}

static void *reader(void *arg)
{
	sigset_t m0;
	uint64_t expect = 1, v;

	(void)arg;
	pthread_sigmask(SIG_BLOCK, NULL, &m0);
	for (;;) {
		ssize_t n = read(pipefd[0], &v, sizeof(v));

		if (n == 0)
			break;
		if (n != sizeof(v)) {
			failf("read returned %zd (%s)", n, n < 0 ? strerror(errno) : "short");
			break;
		}
		if (v != expect) {
			failf("read message %llu, expected %llu", (unsigned long long)v,
			      (unsigned long long)expect);
			break;
		}
		expect++;
		reads++;
	}
	if (!mask_same(&m0))
		failf("the reader's signal mask changed");
	return NULL;
}

static void *sleeper(void *arg)
{
	sigset_t m0;
	/* a value the compiler keeps in a callee-saved register across the call */
	register uint64_t h = 0x9e3779b97f4a7c15ull, check = h;

	(void)arg;
	pthread_sigmask(SIG_BLOCK, NULL, &m0);
	while (!atomic_load(&stop)) {
		struct timespec ts = { 0, SLEEP_NS };
		uint64_t t0 = now_ns(), dt;
		int r = nanosleep(&ts, NULL);

		dt = now_ns() - t0;
		if (r) {
			failf("nanosleep returned %d (%s)", r, strerror(errno));
			break;
		}
		if (dt < (uint64_t)SLEEP_NS) {
			failf("nanosleep of %lld ns returned after %llu ns", SLEEP_NS,
			      (unsigned long long)dt);
			break;
		}
		h = h * 6364136223846793005ull + 1442695040888963407ull;
		check = check * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ volatile("" : "+r"(check));
		if (h != check) {
			failf("a register changed across nanosleep");
			break;
		}
		sleeps++;
	}
	if (!mask_same(&m0))
		failf("the sleeper's signal mask changed");
	return NULL;
}

static void *futexer(void *arg)
{
	sigset_t m0;

	(void)arg;
	pthread_sigmask(SIG_BLOCK, NULL, &m0);
	while (!atomic_load(&stop)) {
		unsigned v = atomic_load(&futex_word);

		if (v == 0) {
			long r = syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);

			if (r && errno != EAGAIN) {
				failf("futex wait returned %ld (%s)", r, strerror(errno));
				break;
			}
			continue;
		}
		atomic_store(&futex_word, 0);
		atomic_fetch_add(&seen_futex, 1);
	}
	if (!mask_same(&m0))
		failf("the futex waiter's signal mask changed");
	return NULL;
}

static void *epoller(void *arg)
{
	sigset_t m0;

	(void)arg;
	pthread_sigmask(SIG_BLOCK, NULL, &m0);
	while (!atomic_load(&stop)) {
		struct epoll_event ev;
		int n = epoll_wait(epfd, &ev, 1, -1);
		uint64_t c;

		if (n != 1) {
			failf("epoll_wait returned %d (%s)", n, n < 0 ? strerror(errno) : "no event");
			break;
		}
		if (ev.data.u64 != EPOLL_MAGIC) {
			failf("epoll_wait returned data %llx", (unsigned long long)ev.data.u64);
			break;
		}
		if (read(efd, &c, sizeof(c)) != sizeof(c)) {
			failf("eventfd read failed: %s", strerror(errno));
			break;
		}
		epolls += c;
	}
	if (!mask_same(&m0))
		failf("the epoll waiter's signal mask changed");
	return NULL;
}

static void seccomp_filter(bool docker)
{
	struct sock_filter kill_memfd[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_memfd_create, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	/* what container runtimes do: some calls fail, a few kill, clone's flags are looked at */
	struct sock_filter dock[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_kexec_load, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x10000000 /* CLONE_NEWUSER */, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { docker ? sizeof(dock) / sizeof(dock[0])
				   : sizeof(kill_memfd) / sizeof(kill_memfd[0]),
				   docker ? dock : kill_memfd };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog)) {
		fprintf(stderr, "sbinject: seccomp: %s\n", strerror(errno));
		exit(2);
	}
}

static int decoy_fd = -1, listener = -1;

/* answers every memfd_create of the process with a new descriptor of the decoy file */
static void *supervisor(void *arg)
{
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;

	(void)arg;
	for (;;) {
		memset(&req, 0, sizeof(req));
		if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req)) {
			if (errno == EINTR || errno == ENOENT)
				continue;
			return NULL;
		}
		memset(&resp, 0, sizeof(resp));
		resp.id = req.id;
		resp.val = fcntl(decoy_fd, F_DUPFD_CLOEXEC, 0);
		if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) && resp.val >= 0)
			close((int)resp.val);
	}
}

static void memfd_decoy(const char *path, bool unlinked)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_memfd_create, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };
	pthread_t th;

	decoy_fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (decoy_fd < 0 || (unlinked && unlink(path))) {
		fprintf(stderr, "sbinject: %s: %s\n", path, strerror(errno));
		exit(2);
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    (listener = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
				     SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog)) < 0) {
		fprintf(stderr, "sbinject: seccomp listener: %s\n", strerror(errno));
		exit(2);
	}
	pthread_create(&th, NULL, supervisor, NULL);
	pthread_detach(th);
}

/* --exec-in-mmap: what the C library's mmap now does (the agent's first remote call) */
static const char *exec_prog;

static void exec_instead(void)
{
	execl(exec_prog, exec_prog, "1500", (char *)NULL);
	_exit(126);
}

/*
 * A hostile target: its mmap jumps to code that runs exec, so a remote call
 * of the agent's makes the held thread another program (movabs rax, fn; jmp rax)
 */
static void mmap_execs(const char *prog)
{
	uint8_t *m = dlsym(RTLD_DEFAULT, "mmap");
	uint64_t fn = (uint64_t)(uintptr_t)exec_instead;
	uintptr_t page = (uintptr_t)m & ~(uintptr_t)4095;

	exec_prog = prog;
	if (!m || mprotect((void *)page, 8192, PROT_READ | PROT_WRITE | PROT_EXEC)) {
		fprintf(stderr, "sbinject: mmap not patched: %s\n", strerror(errno));
		exit(2);
	}
	m[0] = 0x48;
	m[1] = 0xb8;
	memcpy(m + 2, &fn, sizeof(fn));
	m[10] = 0xff;
	m[11] = 0xe0;
}

int main(int argc, char **argv)
{
	const char *decoy = NULL;
	bool decoy_unlinked = false, marks = false;
	bool kill_memfd = false, docker = false, block_segv = false;
	const char *late_lib = NULL, *exec_in_mmap = NULL;
	long ms = 3000;
	pthread_t th[4];
	sigset_t m0;
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = EPOLL_MAGIC };
	unsigned long writes = 0, efd_posts = 0;
	int sigs[] = { SIGSEGV, SIGTRAP, SIGUSR1, SIGUSR2, SIGCHLD, SIGURG, SIGALRM, SIGPIPE,
		       SIGCONT, SIGWINCH, SIGIO };

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seccomp-kill-memfd"))
			kill_memfd = true;
		else if (!strcmp(argv[i], "--seccomp-docker"))
			docker = true;
		else if (!strcmp(argv[i], "--block-segv"))
			block_segv = true;
		else if (!strcmp(argv[i], "--marks"))
			marks = true;
		else if (!strcmp(argv[i], "--lib") && i + 1 < argc) {
			if (!dlopen(argv[++i], RTLD_NOW | RTLD_GLOBAL)) {
				fprintf(stderr, "sbinject: %s\n", dlerror());
				return 2;
			}
		} else if (!strncmp(argv[i], "--memfd-decoy", 13) && i + 1 < argc) {
			decoy_unlinked = !strcmp(argv[i], "--memfd-decoy-unlinked");
			decoy = argv[++i];
		} else if (!strcmp(argv[i], "--late-lib") && i + 1 < argc) {
			late_lib = argv[++i];
		} else if (!strcmp(argv[i], "--exec-in-mmap") && i + 1 < argc) {
			exec_in_mmap = argv[++i];
		} else
			ms = atol(argv[i]);
	}
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction sa = { .sa_handler = on_signal };

		sigaction(sigs[i], &sa, NULL);
	}
	if (block_segv) {
		sigset_t s;

		sigemptyset(&s);
		sigaddset(&s, SIGSEGV);
		pthread_sigmask(SIG_BLOCK, &s, NULL); /* the threads inherit it */
	}
	if (pipe(pipefd) || (efd = eventfd(0, 0)) < 0 || (epfd = epoll_create1(0)) < 0 ||
	    epoll_ctl(epfd, EPOLL_CTL_ADD, efd, &ev)) {
		perror("sbinject");
		return 2;
	}
	if (kill_memfd || docker)
		seccomp_filter(docker);
	if (decoy)
		memfd_decoy(decoy, decoy_unlinked); /* before the threads: they inherit the filter */
	pthread_sigmask(SIG_BLOCK, NULL, &m0);
	pthread_create(&th[0], NULL, reader, NULL);
	pthread_create(&th[1], NULL, sleeper, NULL);
	pthread_create(&th[2], NULL, futexer, NULL);
	pthread_create(&th[3], NULL, epoller, NULL);
	if (exec_in_mmap)
		mmap_execs(exec_in_mmap);
	printf("ready\n");
	fflush(stdout);
	for (uint64_t t0 = now_ns(); now_ns() - t0 < (uint64_t)ms * 1000000ull;) {
		struct timespec ts = { 0, 10000000 };
		uint64_t one = 1, v = ++writes;

		if (marks)
			stepblame_step(writes);

		if (write(pipefd[1], &v, sizeof(v)) != sizeof(v))
			failf("pipe write: %s", strerror(errno));
		if (writes % 3 == 0) {
			atomic_store(&futex_word, 1);
			atomic_fetch_add(&posted, 1);
			syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		}
		if (writes % 5 == 0 && write(efd, &one, sizeof(one)) == sizeof(one))
			efd_posts++;
		if (late_lib && now_ns() - t0 >= 1500000000ull) {
			if (!dlopen(late_lib, RTLD_NOW | RTLD_GLOBAL))
				failf("%s", dlerror());
			late_lib = NULL;
		}
		while (nanosleep(&ts, &ts))
			;
	}
	atomic_store(&stop, 1);
	close(pipefd[1]);
	atomic_store(&futex_word, 1);
	syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	{
		uint64_t one = 1;

		if (write(efd, &one, sizeof(one)) == sizeof(one))
			efd_posts++;
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	if (reads != writes)
		failf("%lu messages written, %lu read", writes, reads);
	if (epolls != efd_posts)
		failf("%lu eventfd posts, %lu seen", efd_posts, epolls);
	if (!atomic_load(&seen_futex))
		failf("the futex waiter never woke");
	if (atomic_load(&signals_seen))
		failf("%d signals reached a handler", atomic_load(&signals_seen));
	if (!mask_same(&m0))
		failf("the main thread's signal mask changed");
	if (atomic_load(&failed)) {
		printf("sbinject: FAIL %s\n", why);
		return 1;
	}
	printf("sbinject: ok reads=%lu sleeps=%lu futex=%u epoll=%lu notes=%d\n", reads, sleeps,
	       atomic_load(&seen_futex), epolls, atomic_load(&notes));
	return 0;
}
