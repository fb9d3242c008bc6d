/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * User stack addresses to function names at report time, from the trace's
 * mapping and perfmap records and the mapped files as they are now (elfutils'
 * libdwfl: symbol tables, separate debug files found by build id). A file
 * whose build id differs from the one recorded is not used.
 * docs/ARCHITECTURE.md, "Stacks"; schemas/report.md, "stacks".
 */
#ifndef STEPBLAME_SYMBOLS_H
#define STEPBLAME_SYMBOLS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/engine.h"

struct symbols;

struct sym_frame {
	uint64_t addr;
	const char *module;      /* the mapped file's path, "[jit]", or NULL: no mapping known */
	const char *func;        /* the function, NULL if not known */
	uint64_t off;            /* addr - the function's start (func), or the file offset (module only) */
};

/* NULL only when out of memory; symbolises nothing when the trace has no stacks */
struct symbols *symbols_new(const struct engine *e);
void symbols_free(struct symbols *s);
/*
 * Frame i of stack st. Return addresses (every frame but a fault's first) are
 * looked up one byte back, inside the call. The strings live as long as s.
 */
void symbols_frame(struct symbols *s, const struct eng_stack *st, uint32_t i,
		   struct sym_frame *f);
/* "func+0x12 (module)", "[module+0xoff]" or "0xaddr" into buf */
const char *sym_frame_text(const struct sym_frame *f, char *buf, size_t len);
/* the event a stack belongs to: its record type's name, "off_cpu" for a wait ending at a switch_in */
const char *sym_event_name(unsigned ev_type);
/* the base name of a path */
const char *sym_base(const char *path);

#endif

/* ---- which stacks a report shows ---- */

#define SYM_STEP_STACKS 3    /* per step: the critical thread's longest events */
#define SYM_HOT_STACKS 5     /* per capture and event kind: the distinct stacks with most event time */

/* the stacks of step st's critical thread, longest event first; how many (<= max) */
int sym_step_stacks(const struct engine *e, const struct eng_step *st, struct eng_stack *out,
		    int max);

struct sym_hot {
	struct eng_stack s;      /* one of them (the longest) */
	uint64_t count, total_ns;
};

/*
 * The distinct stacks (event type and frames) of events of type ev_type (0:
 * any) by summed event time, then by count; how many (<= max)
 */
int sym_hot_stacks(const struct engine *e, unsigned ev_type, struct sym_hot *out, int max);
/* the event types stacks are taken at, in the order the outputs list them */
#define SYM_NKINDS 5
extern const unsigned sym_kinds[SYM_NKINDS];
/*
 * The CPU samples (stack records of ev_type SB_EV_STACK) of step st's critical
 * thread: how many, and in *top the innermost frame most of them share, *ntop
 * of them (compared by function, else by address). 0 when none.
 */
int sym_step_samples(const struct engine *e, struct symbols *sym, const struct eng_step *st,
		     struct sym_frame *top, int *ntop);
/* does the trace hold any stack? (the outputs add their stack fields only then) */
bool sym_any(const struct engine *e);
