// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A trainer whose main thread exits (pthread_exit) while a worker thread
 * trains on: the process is a zombie leader with a live thread.
 *
 *   sbleaderexit STEPS    the main thread waits 300 ms (the tracer attaches),
 *                         starts the worker and exits; the worker marks STEPS
 *                         steps of 5 ms on CPU each (USDT stepblame:step),
 *                         step 25 with 40 ms of sleep, then a last mark
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "stepblame.h"

static long steps;

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void *worker(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "trainer");
	for (long n = 0; n < steps; n++) {
		volatile unsigned x = 0;
		uint64_t end = now_ns() + 5000000ull;

		stepblame_step((unsigned long long)n);
		while (now_ns() < end)
			x++;
		if (n == 25)
			usleep(40000);
	}
	stepblame_step((unsigned long long)steps);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;

	steps = argc > 1 ? atol(argv[1]) : 60;
	usleep(300000);
	if (pthread_create(&t, NULL, worker, NULL))
		return 1;
	pthread_exit(NULL);
}
