// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A target that changes its credentials under the tracer. It waits for one
 * byte on stdin, touches 64 fresh pages and makes 8 malloc(123456) calls
 * (recorded: it is still the process the tracer attached to), prints
 * "T <CLOCK_MONOTONIC ns>\n" on stdout and then, with nothing of its own
 * between (every function it calls from then on ran once before):
 *
 *   sbexec exec PATH [ARGS...]   execv(PATH, ARGS): a setuid program, or a plain one
 *   sbexec setuid UID            setresuid(UID, UID, UID), then touches 256 fresh
 *                                pages and makes 16 malloc(654321) calls
 *   sbexec fork-exec PATH [ARGS...]  a child process does exec's part (it prints the
 *                                time, then execs); the parent prints "C <child pid>\n",
 *                                waits for it, then touches 256 fresh pages and makes
 *                                16 malloc(654321) calls
 */
#include <sys/wait.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static volatile uintptr_t sink;

static uint64_t mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void work(long pages, int mallocs, size_t size)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, pages * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		exit(4);
	madvise(m, pages * pg, MADV_NOHUGEPAGE);
	for (long k = 0; k < pages; k++)
		m[k * pg] = 1;
	for (int i = 0; i < mallocs; i++) {
		void *p = malloc(size + i);

		sink += (uintptr_t)p;
		free(p);
	}
}

int main(int argc, char **argv)
{
	char line[64], go;
	uid_t uid = 0;
	int n;

	if (argc < 3 || (strcmp(argv[1], "exec") && strcmp(argv[1], "setuid") &&
			 strcmp(argv[1], "fork-exec"))) {
		fprintf(stderr, "usage: sbexec exec PATH [ARGS...] | sbexec setuid UID | "
			"sbexec fork-exec PATH [ARGS...]\n");
		return 2;
	}
	if (read(0, &go, 1) != 1)
		return 1;
	work(64, 8, 123456);
	if (!strcmp(argv[1], "fork-exec")) {
		pid_t child = fork();

		if (child < 0)
			return 3;
		if (child == 0) {
			argv[1] = "exec";
			goto child;
		}
		n = snprintf(line, sizeof(line), "C %d\n", (int)child);
		if (write(1, line, n) != n)
			return 3;
		waitpid(child, NULL, 0);
		work(256, 16, 654321);
		return 0;
	}
child:
	/* everything used after the time is taken runs once before: no fault, no lazy binding */
	if (!strcmp(argv[1], "exec")) {
		char *none[] = { "/nonexistent/sbexec", NULL };

		execv(none[0], none);
	} else {
		uid = (uid_t)atol(argv[2]);
		if (setresuid(-1, -1, -1))
			return 3;
	}
	/* the first line warms what the second, the time the tests read, uses */
	n = snprintf(line, sizeof(line), "T %llu\n", (unsigned long long)mono());
	if (write(1, line, n) != n)
		return 3;
	/*
	 * a sleep: the faults of the warm-up (a forked child faults on every
	 * page of code it touches first) end a while before the time, and their
	 * run is written at the switch-out (its end, estimated from the run's
	 * average gap, could otherwise land a few microseconds past the time)
	 */
	{
		struct timespec nap = { 0, 2000000 };

		nanosleep(&nap, NULL);
		nanosleep(&nap, NULL);
	}
	n = snprintf(line, sizeof(line), "T %llu\n", (unsigned long long)mono());
	if (write(1, line, n) != n)
		return 3;
	if (!strcmp(argv[1], "exec")) {
		execv(argv[2], argv + 2);
		fprintf(stderr, "sbexec: exec %s: %s\n", argv[2], strerror(errno));
		return 127;
	}
	if (setresuid(uid, uid, uid))
		return 3;
	work(256, 16, 654321);
	return 0;
}
