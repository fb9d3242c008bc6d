/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The flight recorder of `stepblame watch` (docs/ARCHITECTURE.md, "Watch"):
 * every record of a live capture, as drained, is kept in memory for the last
 * keep_ns of arrival time and at most max_bytes, the oldest dropped first.
 * On demand, the records of a span of the capture's time are written as a
 * normal trace file (schemas/trace.md) that `stepblame report` reads: first
 * what the capture said before that time and still holds (host, CPUs,
 * target, probes, costs, interned strings, mappings, the guard's state, the
 * threads alive then, as thread records), then the records themselves in
 * drain order, with the drop counters counted from that time.
 */
#ifndef STEPBLAME_FLIGHT_H
#define STEPBLAME_FLIGHT_H

#include <stddef.h>
#include <stdint.h>

#include "bpf/events.h"

struct flight;

/* the state kept for every snippet (host facts, strings, mappings, ...) is capped here */
#define FLIGHT_META_MAX (16u << 20)

struct flight *flight_new(uint64_t keep_ns, uint64_t max_bytes);
void flight_free(struct flight *f);

/* one record of the capture, as drained, at CLOCK_MONOTONIC now */
void flight_put(struct flight *f, const struct sb_hdr *rec, uint64_t now);

struct flight_stats {
	uint64_t bytes;           /* records held */
	uint64_t records;
	uint64_t oldest_ns;       /* arrival of the oldest held (0: none) */
	uint64_t meta_bytes;      /* the state kept for snippets */
	uint64_t meta_dropped;    /* records of that state not kept past FLIGHT_META_MAX */
	uint64_t evicted_early;   /* records dropped by max_bytes before keep_ns */
};
void flight_stats(const struct flight *f, struct flight_stats *s);

/*
 * How far the capture's time (CLOCK_MONOTONIC, the probes' clock) has been
 * drained at now: the newest probe record's time, or, when none has come for
 * FLIGHT_QUIET_NS, now less that. An agent that falls behind a busy trainer
 * drains seconds late: a snippet's records have all arrived only when this
 * has passed its end, whatever the wall clock says.
 */
#define FLIGHT_QUIET_NS 1000000000ull
uint64_t flight_reached(const struct flight *f, uint64_t now);

/*
 * A snippet is a span of the capture's time, not of arrival: it starts at the
 * first probe record (in drain order) timed from_ns or later, and ends before
 * the first one timed after to_ns; the records drained between, of every
 * kind, are in it.
 */
struct flight_snippet {
	uint64_t from_ns;         /* in: the capture's time it starts at */
	uint64_t to_ns;           /* in: and ends at (0: all held) */
	const char *note;         /* in: a note record put first (why it was written), or NULL */
	int zstd_level;           /* in: written zstd-compressed at this level; 0: plain */
	/* out */
	uint64_t start_ns;        /* the trace's start: from_ns, or the oldest probe record held */
	uint64_t end_ns;
	uint64_t records;
	uint64_t drops;           /* records lost in the capture inside the snippet */
	uint64_t bytes;           /* the file's size */
};

/*
 * Write the snippet to path (outfile.h: a temporary name renamed at the
 * end, never through a planted link). 0, or -1 with one line in err.
 */
int flight_write(struct flight *f, const char *path, struct flight_snippet *sn, char *err,
		 size_t errlen);

#endif
