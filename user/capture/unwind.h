/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Stack copies walked by call-frame information (docs/ARCHITECTURE.md,
 * "Stacks"): the probes copy the top of a thread's user stack and its
 * registers (bpf/events.h, SB_RING_STACK); the agent walks the copy with
 * elfutils' libdwfl, by the .eh_frame of the code the target maps, and puts
 * a plain stack record into the trace.
 */
#ifndef STEPBLAME_UNWIND_H
#define STEPBLAME_UNWIND_H

#include <stdint.h>
#include <sys/types.h>

#include "bpf/events.h"

struct probes;
struct unwinder;

struct unwind_stats {
	uint64_t copies;        /* stack copies taken */
	uint64_t walked;        /* whose walk went further than the frame-pointer chain */
	uint64_t over_budget;   /* not walked: the agent's time for walks this second, or this
	                           read of the ring, was spent */
	uint64_t resets;        /* the files' call-frame information let go to stay in its bound */
	uint64_t rebuilds;      /* sessions built again: a walk met code in no module, and the
	                           process maps other code since */
	uint64_t rebuilds_kept; /* ... and kept: it maps the same code (the code met is anonymous) */
	uint64_t walk_ns;       /* the agent's time in walks (sessions built included) */
	uint64_t refused;       /* files whose call-frame information was not used (cficheck.h) */
	char refused_first[256]; /* the first of them: its path and why */
};

/* p: how the target's files are opened (open_mapped_pid) */
struct unwinder *unwinder_new(struct probes *p);
void unwinder_free(struct unwinder *u);
/*
 * out: the stack record of copy c. Its frames are those of the walk by
 * call-frame information where that walk found more than the frame-pointer
 * chain (SB_STACK_CFI), else the chain's; SB_STACK_COPIED either way.
 */
void unwinder_stack(struct unwinder *u, const struct sb_stack_copy *c, struct sb_stack *out);
/*
 * The copy c of a thread's stack at its switch-out into sleep (st.ev_type
 * SB_EV_SWITCH_OUT): held until that sleep's off-CPU stack comes, one per
 * thread, UNW_HELD threads at most (the oldest let go).
 */
void unwinder_hold(struct unwinder *u, const struct sb_stack_copy *c);
/*
 * An off-CPU stack record st (ev_type SB_EV_SWITCH_IN): if a copy held for
 * its thread was taken at the sleep's start, out is st with the frames of
 * that copy's walk (as unwinder_stack) and true; else false.
 */
bool unwinder_off_cpu(struct unwinder *u, const struct sb_stack *st, struct sb_stack *out);
/*
 * Build pid's session now, its files' call-frame information read: at the
 * start, before the capture's timed work (the overhead guard's first window)
 * waits on the loop that walks the copies.
 */
void unwinder_prepare(struct unwinder *u, pid_t pid);
/*
 * A read of the ring begins: the walks inside it take UNW_SLICE_NS in all at
 * most (past that a copy keeps the frame-pointer chain), so that the loop's
 * other work (the guard's windows, the tick) is not late by more.
 */
void unwinder_slice(struct unwinder *u);
/* process pid exited or exec'd: what was known of its mappings goes */
void unwinder_forget(struct unwinder *u, pid_t pid);
void unwinder_stats(const struct unwinder *u, struct unwind_stats *st);

#endif
