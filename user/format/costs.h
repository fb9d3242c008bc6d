/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The tracer's own cost: what each kind of event costs the traced thread that
 * pays for it (the cost model, trace record type 42 "costs"), and the state of
 * the overhead guard that keeps the allocator probes within --max-overhead
 * (trace record type 43 "guard"). Both records are key=value text
 * (schemas/trace.md); the recorder writes them, the engine reads them to put an
 * estimate of the tracer's cost next to every step.
 */
#ifndef STEPBLAME_OVERHEAD_H
#define STEPBLAME_OVERHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/events.h"

enum sb_cost {
	SB_COST_NONE = -1,  /* nothing the model counts (the cost column of SB_RECORD_TYPES) */
	SB_COST_SCHED = 0,      /* a scheduler event of a target thread: switch, wakeup, migration */
	SB_COST_FAULT,      /* a user page fault of a target thread */
	SB_COST_SYSCALL,    /* a timed system call (mmap family, I/O, sched_setaffinity) */
	SB_COST_ALLOC_CALL, /* an allocator call: its uprobe and uretprobe */
	SB_COST_UPROBE,     /* a single uprobe hit: USDT step mark, step uprobe */
	SB_COST_CUDA_CALL,  /* a CUDA driver call: its uprobe and uretprobe */
	SB_COST_STACK,      /* a user stack captured at an event (on top of the event's own cost) */
	SB_COST_FAULT_EXT,  /* a user page fault that only extended its thread's fault run (no record);
			       SB_COST_FAULT is then what a run's record costs */
	SB_COST_SCHED_FOLD, /* a scheduler event of a trip folded into a sched_run record (no record) */
	SB_COST_STACK_COPY, /* a user stack with a copy of the stack's top (SB_STACK_COPIED), in place
			       of SB_COST_STACK */
	SB_COST_IRQ,        /* an interrupt handler run on a target thread's time: its two probes */
	SB_NCOST,
};

struct sb_costs {
	uint64_t ns[SB_NCOST];   /* per event */
	uint32_t calibrated;     /* bit (1 << cost) set: measured on this machine at start */
	uint32_t samples;        /* calls the calibration timed */
};

/* "sched_ns", "fault_ns", ... (the record's keys) */
extern const char *const sb_cost_key[SB_NCOST];
/*
 * "sched", "fault", "syscall", "alloc_call", "uprobe", "cuda_call", "stack", "fault_ext",
 * "sched_fold", "stack_copy", "irq" (report names)
 */
extern const char *const sb_cost_name[SB_NCOST];

/* the benchmark's figures (bench/RESULTS.md), for what is not calibrated */
void sb_costs_default(struct sb_costs *c);
/* key=value lines; returns the length written (snprintf rules) */
size_t sb_costs_format(const struct sb_costs *c, char *buf, size_t cap);
/* from key=value lines: keys present override the defaults */
void sb_costs_parse(struct sb_costs *c, const char *s, size_t n);
/*
 * What a kernel record costs its thread: sets *cls and returns how many events
 * of that class it stands for (an allocator burst: its calls); 0 if none
 * (records about other tasks, agent records).
 */
uint64_t sb_cost_of(const struct sb_hdr *h, int *cls);

enum sb_guard_mode { SB_GUARD_FULL = 0, SB_GUARD_SAMPLED = 1 };
/* why a guard record was written (its key `reason`, schemas/trace.md) */
enum sb_guard_reason {
	SB_GUARD_R_NONE = 0,   /* not said (traces from before the key) */
	SB_GUARD_R_START,      /* the capture starts: the allocator probes are found */
	SB_GUARD_R_WINDOW,     /* sampled: an attached window ended, the mode stays */
	SB_GUARD_R_OVER,       /* full -> sampled: over the limit */
	SB_GUARD_R_UNDER,      /* sampled -> full: under half the limit */
	SB_GUARD_R_END,        /* the capture ends */
	SB_GUARD_R_FAILED,     /* the probes would not attach again */
	SB_GUARD_R_OTHERS,     /* the always-on probes measured again (others_ppm), the mode stays */
	SB_GUARD_NREASON,
};

struct sb_guard {
	int mode;                /* enum sb_guard_mode */
	uint64_t limit_ppm;      /* --max-overhead, parts per million of step time */
	/*
	 * the always-on probes' estimated cost (every probe but the allocator's,
	 * from the records of the last second), and what that leaves the
	 * allocator probes: limit_ppm less it, at least a quarter of limit_ppm.
	 * 0 in traces from before the keys (alloc_limit_ppm: limit_ppm then).
	 */
	uint64_t others_ppm, alloc_limit_ppm;
	uint64_t estimate_ppm;   /* the allocator probes' estimated cost while attached */
	uint64_t duty_ppm;       /* share of time they are attached (1000000: always) */
	uint64_t period_ns;      /* one attach/detach cycle while sampled */
	uint64_t calls_seen;     /* allocator calls counted while attached, cumulative */
	uint64_t calls_estimated;/* the same extrapolated over the detached time, cumulative */
	int reason;              /* enum sb_guard_reason */
	/*
	 * reason window (or end, while sampled and attached): the attached
	 * window that just ended, [window_start_ns, window_end_ns]: the
	 * allocator probes saw every call in it. 0 for the other reasons, and in
	 * traces from before the keys.
	 */
	uint64_t window_start_ns, window_end_ns;
};

/*
 * The events record h stands for, by cost class, added to counts: its own
 * (sb_cost_of), and a fault run's faults after its first as SB_COST_FAULT_EXT.
 */
void sb_cost_count(const struct sb_hdr *h, uint64_t counts[SB_NCOST]);

size_t sb_guard_format(const struct sb_guard *g, char *buf, size_t cap);
/* false if the text has no mode */
bool sb_guard_parse(struct sb_guard *g, const char *s, size_t n);
const char *sb_guard_mode_name(int mode);
/* "start", "window", ...; "" for SB_GUARD_R_NONE */
const char *sb_guard_reason_name(int reason);

/* value of key in key=value lines, copied into buf (NUL-terminated) */
bool kv_get(const char *s, size_t n, const char *key, char *buf, size_t len);

#endif
