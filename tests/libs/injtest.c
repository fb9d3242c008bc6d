// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A stand-in for the CUPTI collector, for the late-injection tests on machines
 * without a GPU: the same entry point (InitializeInjection), the same channel
 * (schemas/channel.md), a producer named "injtest". While an agent has the
 * channel on, a thread puts there every 20 ms a kernel that ran from 6 ms to
 * 1 ms before, named "injtest_kernel". sbinject_entry() is the entry of the
 * bare injection tests: it tells the host program (sbinject_note) and returns
 * 42.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "format/channel.h"

#define EXPORT __attribute__((visibility("default")))

static struct sbc_producer *chan;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *emitter(void *arg)
{
	uint32_t name = sbc_intern(chan, "injtest_kernel");
	uint32_t corr = 0;

	(void)arg;
	for (;;) {
		struct timespec ts = { 0, 20000000 };

		nanosleep(&ts, NULL);
		if (sbc_active(chan)) {
			struct sb_gpu g = { 0 };
			uint64_t t = now_ns();

			g.h.flags = SB_GPU_KERNEL;
			g.h.ts = t - 6000000;
			g.end_ns = t - 1000000;
			g.name_id = name;
			g.correlation_id = ++corr;
			g.stream = 7;
			sbc_emit(chan, &g);
		}
	}
	return NULL;
}

EXPORT int InitializeInjection(void)
{
	pthread_t t;

	if (chan)
		return 1;
	chan = sbc_create("injtest", 0);
	if (!chan) {
		perror("injtest: sbc_create");
		return 1;
	}
	if (pthread_create(&t, NULL, emitter, NULL) == 0)
		pthread_detach(t);
	return 1;
}

/* an entry that never returns in time: the agent must give up and put the thread back */
EXPORT int sbinject_hang(void)
{
	struct timespec ts = { 60, 0 };

	nanosleep(&ts, NULL);
	return 0;
}

EXPORT int sbinject_entry(void)
{
	void (*note)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, "sbinject_note");

	if (note)
		note("injtest");
	return 42;
}
