// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A trainer that attacks the agent through its mapped files. It copies an
 * ELF file (SRC) into DIR, maps the copies, prints "ready" on stdout once
 * they are mapped, and runs until -t SEC (60) have passed or SIGTERM comes.
 *
 *   sbhostile [-t SEC] copies DIR SRC N   N distinct copies DIR/c<i>.so
 *   sbhostile [-t SEC] names DIR SRC NAME...
 *                                       copies under the names given (any bytes)
 *   sbhostile [-t SEC] swap DIR SRC N     first runs again from a copy of itself,
 *                                       DIR/c<N>.so; N copies of SRC; then, in a
 *                                       loop, the name of each of these N+1 files
 *                                       is exchanged (renameat2 RENAME_EXCHANGE)
 *                                       with a FIFO DIR/f<i> and with a symlink
 *                                       DIR/l<i> -> /etc/shadow, so that a name
 *                                       read from /proc/PID/maps is a FIFO or a
 *                                       symlink when opened
 *
 * -l: take a write lease (F_SETLEASE F_WRLCK) on every copy and never give it
 * up: an open for reading that blocks waits for the lease break time (45 s).
 *
 * Meanwhile a thread fires the USDT probe stepblame:step (this program
 * carries the note) every 10 ms, steps numbered from 5000: under swap, from
 * the file whose name is being swapped.
 * At exit it prints "fifo_opened=N": how many times someone else had one of
 * its FIFOs open (the agent must never open one).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sdt.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

static volatile int done;
static volatile sig_atomic_t stop;
static int use_lease;
static unsigned long leased, nmapped;

static void die(const char *what, const char *path)
{
	fprintf(stderr, "sbhostile: %s %s: %s\n", what, path, strerror(errno));
	exit(2);
}

static void copy_file(const char *src, const char *dst)
{
	static char buf[1 << 16];
	int in = open(src, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;

	if (in < 0)
		die("open", src);
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	if (out < 0)
		die("create", dst);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n)
			die("write", dst);
	close(in);
	close(out);
}

/* map the file at path */
static void map_file(const char *path)
{
	struct stat st;
	void *m;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st))
		die("open", path);
	/* low, in the order mapped: before every library in the maps, the exe too */
	m = mmap((void *)(0x200000000ul + nmapped++ * 0x100000ul), st.st_size, PROT_READ,
		 MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED)
		die("mmap", path);
	/* kept open with the lease; SIGURG (ignored) tells of a break, not SIGIO (fatal) */
	if (use_lease && !fcntl(fd, F_SETSIG, SIGURG) && !fcntl(fd, F_SETLEASE, F_WRLCK)) {
		leased++;
		return;
	}
	close(fd);
}

static int exchange(const char *a, const char *b)
{
	return (int)syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
}

static void *stepper(void *arg)
{
	(void)arg;
	for (unsigned long long n = 5000; !done; n++) {
		struct timespec ts = { 0, 10000000 };

		STAP_PROBE1(stepblame, step, n);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

/* the time is up, or SIGTERM came (after waiting wait_ms) */
static int should_stop(double end, int wait_ms)
{
	if (wait_ms) {
		struct timespec ts = { 0, wait_ms * 1000000L };

		nanosleep(&ts, NULL);
	}
	return stop || now_s() >= end;
}

int main(int argc, char **argv)
{
	double secs = 60, end;
	const char *dir, *src, *mode;
	char path[4096], a[4096], b[4096];
	unsigned long fifo_opened = 0;
	pthread_t t;
	int i = 1, n;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-t") && i + 1 < argc)
			secs = atof(argv[++i]);
		else if (!strcmp(argv[i], "-l"))
			use_lease = 1;
		else
			break;
	}
	if (argc - i < 4) {
		fprintf(stderr, "usage: sbhostile [-t SEC] [-l] copies|names|swap DIR SRC N|NAME...\n");
		return 2;
	}
	mode = argv[i];
	dir = argv[i + 1];
	src = argv[i + 2];
	end = now_s() + secs;
	if (!strcmp(mode, "names")) {
		for (int k = i + 3; k < argc; k++) {
			snprintf(path, sizeof(path), "%s/%s", dir, argv[k]);
			copy_file(src, path);
			map_file(path);
		}
		n = 0;
	} else {
		n = atoi(argv[i + 3]);
		if (!strcmp(mode, "swap") && !getenv("SBHOSTILE_AGAIN")) {
			/* run from a copy, so that the program's own file is swapped too */
			snprintf(path, sizeof(path), "%s/c%d.so", dir, n);
			copy_file("/proc/self/exe", path);
			setenv("SBHOSTILE_AGAIN", "1", 1);
			execv(path, argv);
			die("exec", path);
		}
		for (int k = 0; k < n; k++) {
			snprintf(path, sizeof(path), "%s/c%d.so", dir, k);
			copy_file(src, path);
			map_file(path);
		}
		if (!strcmp(mode, "swap")) {
			for (int k = 0; k <= n; k++) {
				snprintf(path, sizeof(path), "%s/f%d", dir, k);
				if (mkfifo(path, 0644))
					die("mkfifo", path);
				snprintf(path, sizeof(path), "%s/l%d", dir, k);
				if (symlink("/etc/shadow", path))
					die("symlink", path);
			}
			n++;
		}
	}
	signal(SIGTERM, on_term);
	pthread_create(&t, NULL, stepper, NULL);
	printf("ready leased=%lu\n", leased);
	fflush(stdout);
	if (strcmp(mode, "swap")) {
		while (!should_stop(end, 100))
			;
	} else {
		for (unsigned long round = 0; !should_stop(end, 0); round++) {
			for (int k = 0; k < n; k++) {
				const char *other = round & 1 ? "l" : "f";
				int w;

				snprintf(a, sizeof(a), "%s/c%d.so", dir, k);
				snprintf(b, sizeof(b), "%s/%s%d", dir, other, k);
				if (exchange(a, b))
					die("renameat2", a);
				/*
				 * A writer opens without blocking only if a reader holds
				 * the FIFO open: someone opened it. It lies at a now (even
				 * rounds), else under its own name.
				 */
				snprintf(path, sizeof(path), "%s/f%d", dir, k);
				w = open(round & 1 ? path : a,
					 O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
				if (w >= 0) {
					fifo_opened++;
					close(w);
				}
				if (exchange(a, b))
					die("renameat2", a);
			}
		}
	}
	done = 1;
	pthread_join(t, NULL);
	printf("fifo_opened=%lu\n", fifo_opened);
	return 0;
}
