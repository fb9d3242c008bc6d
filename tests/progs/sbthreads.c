// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A target for the fault tests (tests/bpf/test_faults.c) whose thread and
 * process counts are known exactly. Like sbwork it waits for one byte on stdin
 * (the tracer is attached by then), does what its arguments say, prints what
 * it did as key=value on stdout, and exits 0.
 *
 *   sbthreads hold N      N threads alive at once: each one malloc(55555), then
 *                         all wait on a barrier for 200 ms together, and exit
 *   sbthreads churn N     after 300 ms (the tracer's overhead guard starts
 *                         meanwhile), N threads created and joined 8 at a time, 6 ms apart
 *                         (threads exit across several of the tracer's
 *                         per-second readings); each does one malloc(55555);
 *                         then 2.5 s of sleep (two readings after every one of
 *                         them is gone)
 *   sbthreads fork K      K child processes, each: a thread, 20 malloc(66666),
 *                         10 page faults, 3 USDT steps (numbered 7000..), 50 ms
 *                         of sleep; the parent does 3 steps (1000..) and waits
 * Output: threads=N (threads created), children=K, child_pids=a,b,...
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/sdt.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile uintptr_t sink;
static pthread_barrier_t bar;

static void one_malloc(size_t n)
{
	void *p = malloc(n);

	sink += (uintptr_t)p;
	free(p);
}

static void *holder(void *arg)
{
	(void)arg;
	one_malloc(55555);
	pthread_barrier_wait(&bar);
	usleep(200000);
	return NULL;
}

static void *quick(void *arg)
{
	(void)arg;
	one_malloc(55555);
	return NULL;
}

static int spawn(pthread_t *t, void *(*fn)(void *))
{
	pthread_attr_t a;
	int rc;

	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 << 10);
	rc = pthread_create(t, &a, fn, NULL);
	pthread_attr_destroy(&a);
	return rc;
}

static void *child_thread(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "sbt-child-thr");
	for (int i = 0; i < 20; i++)
		one_malloc(66666);
	return NULL;
}

static void child_work(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	pthread_t t;
	char *m;

	prctl(PR_SET_NAME, "sbt-child");
	pthread_create(&t, NULL, child_thread, NULL);
	pthread_join(t, NULL);
	m = mmap(NULL, 10 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m != MAP_FAILED)
		for (int i = 0; i < 10; i++)
			m[i * pg] = 1;
	for (uint64_t s = 7000; s < 7003; s++)
		STAP_PROBE1(stepblame, step, s);
	usleep(50000);
}

int main(int argc, char **argv)
{
	char go;
	long n;

	if (argc != 3) {
		fprintf(stderr, "usage: sbthreads hold|churn|fork N\n");
		return 2;
	}
	n = atol(argv[2]);
	if (read(0, &go, 1) != 1)
		return 1;
	if (!strcmp(argv[1], "hold")) {
		pthread_t *t = calloc(n, sizeof(*t));
		long made = 0;

		pthread_barrier_init(&bar, NULL, (unsigned)n + 1);
		for (long i = 0; i < n; i++) {
			if (spawn(&t[i], holder)) {
				fprintf(stderr, "sbthreads: thread %ld: %s\n", i, strerror(errno));
				return 3;
			}
			made++;
		}
		pthread_barrier_wait(&bar);
		for (long i = 0; i < made; i++)
			pthread_join(t[i], NULL);
		printf("threads=%ld\n", made);
	} else if (!strcmp(argv[1], "churn")) {
		pthread_t t[8];
		long made = 0;

		usleep(300000);
		while (made < n) {
			int k = n - made < 8 ? (int)(n - made) : 8;

			for (int i = 0; i < k; i++)
				if (spawn(&t[i], quick)) {
					fprintf(stderr, "sbthreads: thread: %s\n", strerror(errno));
					return 3;
				}
			for (int i = 0; i < k; i++)
				pthread_join(t[i], NULL);
			made += k;
			usleep(6000);
		}
		printf("threads=%ld\n", made);
		fflush(stdout);
		usleep(2500000);
	} else if (!strcmp(argv[1], "fork")) {
		printf("children=%ld child_pids=", n);
		for (long i = 0; i < n; i++) {
			fflush(stdout);
			pid_t c = fork();

			if (c == 0) {
				child_work();
				_exit(0);
			}
			printf("%s%d", i ? "," : "", (int)c);
		}
		printf("\n");
		for (uint64_t s = 1000; s < 1003; s++)
			STAP_PROBE1(stepblame, step, s);
		while (wait(NULL) > 0)
			;
	} else {
		fprintf(stderr, "sbthreads: unknown mode %s\n", argv[1]);
		return 2;
	}
	fflush(stdout);
	return 0;
}
