/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The clocks, in ns. Header-only, with nothing but libc behind it: format/
 * code uses it too, and that code is also linked without base/ (into the
 * injected CUPTI collector, simtrainer and the fuzz targets).
 */
#ifndef STEPBLAME_CLOCK_H
#define STEPBLAME_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC: the clock of every timestamp in a trace and a channel */
static inline uint64_t mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

/* CLOCK_REALTIME */
static inline uint64_t real_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

#endif
