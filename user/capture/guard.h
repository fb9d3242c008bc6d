/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The overhead guard (--max-overhead): keeps what the tracer costs the
 * target under a share of its time, by shedding the allocator probes. Every
 * allocator call of a target thread pays an uprobe and a uretprobe (15 us on
 * a slow VM): a thread that calls malloc 60000 times a second would spend
 * most of its time in them. The other probes are always on: their cost is
 * estimated every second from the records as they pass (events x costs,
 * guard_record), and the allocator probes are held to what that leaves of
 * the limit, at least a quarter of it, and a quarter until the first second
 * is measured (alloc_limit_ppm; "the limit" below).
 *
 * Safe start: with a limit, the allocator probes are not left attached by
 * the capture (probe_opts.alloc_start_off); the guard starts them sampled
 * (below), at duty = the limit, what fits it even were the busiest thread
 * to spend all its time in them, and widens them to full only once windows
 * measure them under half the limit. No window runs them unmeasured above
 * the limit. With the guard off (limit 0) they are attached throughout.
 *
 * While the allocator probes are attached throughout (mode full), the guard
 * counts each thread's calls every 200 ms: the fast ones from the kernel's
 * per-thread totals, the slow ones as their records pass. Its estimate is the
 * busiest thread's calls x the calibrated cost of a call / the window. Over
 * the limit three windows in a row (600 ms: a one-off storm shorter than
 * that is traced in full), it duty-cycles them (mode sampled): attached for duty = limit /
 * estimate of each period (0.1% to 50%; the period 1 s, longer where the
 * window would be under 20 ms), detached for the rest, re-estimated at the
 * end of every attached window; under half the limit three windows in a
 * row (each twice as long as the one before), back to full. The calls seen
 * in the windows are extrapolated over the detached time (calls_estimated).
 *
 * The guard only decides and counts; the capture loop calls it when it is due
 * and writes the records it asks for (collect.c).
 */
#ifndef STEPBLAME_GUARD_H
#define STEPBLAME_GUARD_H

#include <stdbool.h>
#include <stdint.h>

#include "format/costs.h"

struct guard;
struct probes;

/* what guard_run/guard_finish ask the caller to do, or-ed */
enum {
	GUARD_RECORD = 1,  /* write guard_state() as a guard record */
	GUARD_CHANGED = 2, /* the mode changed: say so (a note, and on stderr) */
	GUARD_FAILED = 4,  /* the allocator probes could not be attached again: guard_error();
			    * the guard does nothing more (guard_finish still counts) */
	GUARD_START = 8,   /* the safe start: the probes go on sampled (say so: a note) */
};

/*
 * limit_ppm: the limit in parts per million of the target's time; 0: the
 * guard only measures (its estimate still goes into the records) and never
 * detaches anything. costs: what an event of each class costs (kept: it
 * must outlive the guard), an allocator call's probes among them.
 * cpus: how many CPUs the target's threads may run on (0: not known).
 */
struct guard *guard_new(struct probes *p, uint64_t limit_ppm, const struct sb_costs *costs,
		       unsigned cpus);
void guard_free(struct guard *g);
/* an allocator call of thread tid that was recorded on its own (SB_EV_ALLOC) */
void guard_slow_call(struct guard *g, uint32_t tid);
/*
 * Thread tid exited: calls is its final count of fast calls (probes_alloc_forget).
 * Its entry goes once nothing of it is left to count. Idle threads' entries
 * go too: the table holds the threads alive and busy, not every thread seen.
 */
void guard_forget(struct guard *g, uint32_t tid, uint64_t calls);
/* a record as it passes: what the always-on probes cost its thread (the records' events x costs) */
void guard_record(struct guard *g, const struct sb_hdr *h);
/* CLOCK_MONOTONIC ns when guard_run wants to be called next */
uint64_t guard_due(const struct guard *g);
/*
 * A sampled window is attached: it is looked at every 20 ms, and cut where
 * it costs too much, only as long as guard_run is called on time.
 */
bool guard_window_open(const struct guard *g);
/*
 * Do what is due at now: start once the allocator probes are attached, end
 * a window, detach or re-attach. drain(ctx) must consume the ring buffer:
 * the slow calls of a window that just ended are counted from it first.
 * Returns GUARD_* flags.
 */
int guard_run(struct guard *g, uint64_t now, void (*drain)(void *ctx), void *ctx);
/* the capture ends at now: count the calls since the last window (GUARD_RECORD if started) */
int guard_finish(struct guard *g, uint64_t now, void (*drain)(void *ctx), void *ctx);
const struct sb_guard *guard_state(const struct guard *g);
/* the thread behind the last estimate */
uint32_t guard_worst_tid(const struct guard *g);
/* why the allocator probes could not be attached again (GUARD_FAILED) */
const char *guard_error(const struct guard *g);

#endif
