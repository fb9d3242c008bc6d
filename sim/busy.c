// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --busy SW,PF,MA: the steady host load of a busy trainer's launch thread,
 * spread over each step's launches: SW round trips to a "busy-peer" thread
 * (each one a voluntary context switch of the launcher), PF minor page faults
 * (fresh pages of a region, given back with one MADV_DONTNEED a launch) and
 * MA small malloc/free pairs, the same sizes in every step (the first step
 * grows the thread's malloc arena as far as they take it, and no later one
 * faults in it). No injection: every step has it.
 */
#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "sim.h"

static sem_t ping, pong;
static pthread_t peer;
static unsigned char *region;
static size_t page, region_pages, next_page;
#define BUSY_SEED 0x9e3779b97f4a7c15ull
static uint64_t rng = BUSY_SEED;
static int started, quit;

static void *peer_main(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "busy-peer");
	/* on the launcher's CPU: each round trip is a switch of the launcher, never a spin */
	if (opt.launcher_cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(opt.launcher_cpu, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	for (;;) {
		while (sem_wait(&ping) && errno == EINTR)
			;
		if (__atomic_load_n(&quit, __ATOMIC_ACQUIRE))
			return NULL;
		sem_post(&pong);
	}
}

int busy_start(void)
{
	int err;

	if (!opt.busy_switches && !opt.busy_faults && !opt.busy_mallocs)
		return 0;
	page = (size_t)sysconf(_SC_PAGESIZE);
	if (opt.busy_faults) {
		region_pages = opt.busy_faults;
		region = mmap(NULL, region_pages * page, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (region == MAP_FAILED)
			return -errno;
		/* small pages, whatever the machine's THP setting: one fault a page */
		madvise(region, region_pages * page, MADV_NOHUGEPAGE);
	}
	if (opt.busy_switches) {
		sem_init(&ping, 0, 0);
		sem_init(&pong, 0, 0);
		if ((err = pthread_create(&peer, NULL, peer_main, NULL)))
			return -err;
		started = 1;
	}
	return 0;
}

void busy_stop(void)
{
	if (!started)
		return;
	__atomic_store_n(&quit, 1, __ATOMIC_RELEASE);
	sem_post(&ping);
	pthread_join(peer, NULL);
	started = 0;
}

/* the share of launch part of parts (0..parts-1) of this step's load */
void busy_work(unsigned part, unsigned parts)
{
	uint64_t sw = opt.busy_switches * (part + 1) / parts - opt.busy_switches * part / parts;
	uint64_t pf = opt.busy_faults * (part + 1) / parts - opt.busy_faults * part / parts;
	uint64_t ma = opt.busy_mallocs * (part + 1) / parts - opt.busy_mallocs * part / parts;

	if (part == 0)
		rng = BUSY_SEED;

	for (uint64_t i = 0; i < sw && !stopping() && started; i++) {
		sem_post(&ping);
		while (sem_wait(&pong) && errno == EINTR)
			;
	}
	if (pf) {
		/*
		 * pf pages given back in one call (as an allocator trims), then
		 * touched: one minor fault a page
		 */
		size_t first = next_page % region_pages, n = pf;

		if (first + n > region_pages)
			first = 0;
		if (n > region_pages)
			n = region_pages;
		madvise(region + first * page, n * page, MADV_DONTNEED);
		for (size_t i = 0; i < n; i++)
			region[(first + i) * page] = (unsigned char)i;
		next_page = first + n;
	}
	for (uint64_t i = 0; i < ma; i++) {
		size_t sz = 64 + (size_t)(rng_next(&rng) % 4032);
		volatile unsigned char *p = malloc(sz);

		if (p)
			p[0] = 1;
		free((void *)p);
	}
}
