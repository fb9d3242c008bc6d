/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The mappings of the target and its followed children and the target's JIT
 * symbols, written into the trace so that the report can symbolise user
 * stacks and name the memory faults hit (schemas/trace.md, "mapping" and
 * "perfmap"; docs/ARCHITECTURE.md, "Stacks").
 */
#ifndef STEPBLAME_STACKMAPS_H
#define STEPBLAME_STACKMAPS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "bpf/events.h"

struct probes;
struct stackmaps;

/* write one text record of type (SB_REC_MAPPING, SB_REC_PERFMAP) for process pid */
typedef void (*stackmaps_put_fn)(void *ctx, uint16_t type, uint32_t pid, const char *text,
				 size_t len);

struct stackmaps *stackmaps_new(pid_t pid);
void stackmaps_free(struct stackmaps *s);
/* a followed process (at_attach: there when the capture started): its mappings too */
void stackmaps_follow(struct stackmaps *s, pid_t pid, bool at_attach);
/* pid exec'd: its mappings are read again, all new */
void stackmaps_exec(struct stackmaps *s, pid_t pid);
/* a record on its way to the trace: stacks outside the known mappings, new code mapped */
void stackmaps_saw(struct stackmaps *s, const struct sb_hdr *h);
/*
 * read /proc/PID/maps of every process followed, a record for each
 * executable file mapping and each of the largest data mappings not written
 * yet (through timedread, within a time budget)
 */
int stackmaps_scan(struct stackmaps *s, struct probes *p, uint64_t now, stackmaps_put_fn put,
		   void *ctx);
/* the same for the processes new since, or whose records asked for it (at most once a second each) */
int stackmaps_maybe_scan(struct stackmaps *s, struct probes *p, uint64_t now,
			 stackmaps_put_fn put, void *ctx);
/*
 * Only the processes new or exec'd since their last read, soon after (their
 * code's step marks get probes: probes_child_file), within a smaller budget
 */
int stackmaps_scan_fresh(struct stackmaps *s, struct probes *p, uint64_t now,
			 stackmaps_put_fn put, void *ctx);
/*
 * The library (device, inode, path) that every followed process should map:
 * the one the allocator probes are on. Each scan of a followed child notes
 * whether it maps its code.
 */
void stackmaps_watch_lib(struct stackmaps *s, uint64_t dev, uint64_t ino, const char *path);
/*
 * The followed children (not the target) found without the watched library
 * over a second ago (now: UINT64_MAX at the end, any time ago) and still
 * without it when their maps are read again: cb(ctx, pid) once each. How many.
 */
int stackmaps_lib_missing(struct stackmaps *s, uint64_t now, void (*cb)(void *ctx, pid_t pid),
			  void *ctx);
/* at the end: the perf map's lines that cover stack addresses in anonymous code */
int stackmaps_perfmap(struct stackmaps *s, uid_t target_uid, stackmaps_put_fn put, void *ctx);

#endif
