// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A process tree whose behaviour the probe tests know: a main thread named
 * "kids-main" that marks a step (USDT stepblame:step) each time it has read
 * a byte from its workers, and worker processes forked from it that feed it
 * through one pipe. It waits for one byte on stdin (the tracer is attached
 * by then) before the rounds begin.
 *
 *   sbkids BEFORE AFTER ROUNDS SPIN_MS SLEEP_MS [ALLOC_MIB]
 *
 * BEFORE workers are forked before the go byte (found by the tracer in
 * /proc), AFTER workers right after it. Each worker, ROUNDS times: spins on
 * the CPU for SPIN_MS milliseconds, sleeps SLEEP_MS milliseconds, writes one
 * byte to the pipe. With ALLOC_MIB, each round also begins with a malloc of
 * ALLOC_MIB MiB, written and freed (a free that unmaps that much memory: a
 * slow allocator call) and 1000 small malloc/free pairs (a burst of fast
 * ones); the main thread calls no allocator in its loop. The main thread
 * reads BEFORE+AFTER times ROUNDS bytes, marking a step after each, then
 * reaps the workers and exits: 3 if one of them did not exit 0 (killed by a
 * stray breakpoint: SIGTRAP). Workers keep the parent's comm and command
 * line, as forked children do.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/sdt.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static volatile uint64_t sink;

static int alloc_mib;

static void worker(int fd, int rounds, int spin_ms, int sleep_ms)
{
	for (int r = 0; r < rounds; r++) {
		if (alloc_mib) {
			size_t len = (size_t)alloc_mib << 20;
			char *big = malloc(len);

			if (!big)
				_exit(1);
			memset(big, r, len);
			sink += (uint64_t)big[len / 2];
			free(big);
			for (int i = 0; i < 1000; i++) {
				char *x = malloc(32 + (i & 63));

				if (!x)
					_exit(1);
				x[0] = (char)i;
				sink += (uint64_t)x[0];
				free(x);
			}
		}
		/* on-CPU time: spin for SPIN_MS of the thread's own CPU time */
		struct timespec ts;
		uint64_t end;

		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
		end = ts.tv_sec * 1000000000ull + ts.tv_nsec + (uint64_t)spin_ms * 1000000;
		do {
			for (int i = 0; i < 1000; i++)
				sink += i;
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
		} while (ts.tv_sec * 1000000000ull + ts.tv_nsec < end);
		if (sleep_ms) {
			struct timespec s = { sleep_ms / 1000, (sleep_ms % 1000) * 1000000L };

			nanosleep(&s, NULL);
		}
		if (write(fd, "x", 1) != 1)
			_exit(1);
	}
	_exit(0);
}

static pid_t start_worker(int p[2], int rounds, int spin_ms, int sleep_ms)
{
	pid_t pid = fork();

	if (pid == 0) {
		close(p[0]);
		worker(p[1], rounds, spin_ms, sleep_ms);
	}
	return pid;
}

int main(int argc, char **argv)
{
	int before, after, rounds, spin_ms, sleep_ms, p[2], n = 0;
	pid_t kids[64];
	char go;

	if (argc != 6 && argc != 7)
		return 2;
	alloc_mib = argc == 7 ? atoi(argv[6]) : 0;
	before = atoi(argv[1]);
	after = atoi(argv[2]);
	rounds = atoi(argv[3]);
	spin_ms = atoi(argv[4]);
	sleep_ms = atoi(argv[5]);
	if (before < 0 || after < 0 || before + after > 64 || rounds <= 0 || pipe(p))
		return 2;
	prctl(PR_SET_NAME, "kids-main");
	/* the workers wait for the go byte too: they read it from a pipe of their own */
	int gate[2];

	if (pipe(gate))
		return 2;
	for (int i = 0; i < before; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			char b;

			close(p[0]);
			close(gate[1]);
			if (read(gate[0], &b, 1) != 1)
				_exit(1);
			worker(p[1], rounds, spin_ms, sleep_ms);
		}
		kids[n++] = pid;
	}
	close(gate[0]);
	if (read(0, &go, 1) != 1)
		return 1;
	for (int i = 0; i < before; i++)
		if (write(gate[1], "g", 1) != 1)
			return 1;
	for (int i = 0; i < after; i++)
		kids[n++] = start_worker(p, rounds, spin_ms, sleep_ms);
	close(p[1]);
	for (uint64_t step = 0; step < (uint64_t)n * rounds; step++) {
		char b;

		if (read(p[0], &b, 1) != 1)
			break;
		STAP_PROBE1(stepblame, step, step);
		sink += now_ns();
	}
	int bad = 0;

	for (int i = 0; i < n; i++) {
		int st = 0;

		if (waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st) || WEXITSTATUS(st))
			bad = 3;
	}
	return bad;
}
