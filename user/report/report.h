/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The outputs: they read an engine's results (after engine_finish) and never
 * drive it. Each returns 0 or -errno.
 */
#ifndef STEPBLAME_REPORT_H
#define STEPBLAME_REPORT_H

#include <stdio.h>

#include "engine/engine.h"

/* the JSON report's "schema" and "schema_version" (schemas/report.md) */
#define REPORT_SCHEMA_NAME "stepblame-report"
#define REPORT_SCHEMA_VERSION 1

int report_text(const struct engine *e, FILE *f);
int report_json(const struct engine *e, FILE *f);
int report_jsonl(const struct engine *e, FILE *f);
/* one self-contained HTML page (html.c; docs/ARCHITECTURE.md, "The HTML report") */
int report_html(const struct engine *e, FILE *f);

/*
 * One step as a compact JSON object plus newline (the JSONL line; attach
 * --json). *sym: the symbols session of e's steps, NULL until a step has
 * stacks; kept by the caller from step to step, freed (symbols_free) before e.
 */
struct symbols;
int report_step_json(const struct engine *e, const struct eng_step *s, const struct eng_summary *sum,
		     struct symbols **sym, FILE *f);
/* one step as a line of text (attach), note (NULL: none) at its end */
int report_step_line(const struct engine *e, const struct eng_step *s, const struct eng_summary *sum,
		     const char *note, FILE *f);

/*
 * A Perfetto (Chrome JSON) document streamed to f while the engine sweeps:
 * perfetto_stream_new() fills *hooks (for engine_opts.timeline); NULL if out
 * of memory. report_perfetto() closes the document; with no stream (p NULL,
 * or nothing streamed to f) it writes one of the steps alone.
 */
/* pieces the multi-trace report shares with the single one (text.c, json.c) */
struct jw;
void report_json_culprit(struct jw *w, const struct engine *e, const struct eng_who *c);
/* an array of {cause, ns, culprit} */
void report_json_excess(struct jw *w, const struct engine *e, const struct eng_excess *ex, int n);
/* the trace's identity object (schemas/report.md, "Identity") */
void report_json_identity(struct jw *w, const struct engine *e);
/*
 * " — launcher[12] preempted by stress-ng-cpu[99] on CPU 3": what follows a
 * cause's time; procs > 1: w stands for that many processes of its name
 * (eng_excess.processes)
 */
void report_cause_phrase(const struct engine *e, const struct eng_step *s, int cause,
			 const struct eng_who *w, bool has_who, uint32_t procs, FILE *f);
const char *report_fmt_ns(char *buf, size_t len, uint64_t ns);   /* "1.25 ms" */
const char *report_fmt_count(char *buf, size_t len, uint64_t v);  /* "3,411" */

/*
 * The leading steps that are warm-up: the first step, and the steps after it
 * up to the first one at or under the tail threshold (CUDA and allocator
 * start-up, first batches). The audit and compare leave them out.
 */
uint64_t report_warmup(const struct engine *e, const struct eng_summary *s);

/*
 * The hot-path audit (audit.c; docs/ARCHITECTURE.md, "Hot-path audit"): per
 * launching thread, its counts per steady-state step, what they say.
 */
#define AUDIT_THREADS_MAX 8
#define AUDIT_JUMPS_MAX 3  /* per kind */
/* a jump: over AUDIT_JUMP_FACTOR x the median, and over the kind's minimum (audit.c) */
#define AUDIT_JUMP_FACTOR 4
struct audit_kind {
	uint64_t steps;          /* steps counted (allocator calls: those the probes saw whole) */
	uint32_t median, min, max;
	uint64_t nonzero;        /* steps with a count above 0 */
	uint64_t total;
	bool finding;            /* in most steady-state steps, where it should be in none */
};
struct audit_jump {
	uint64_t step;           /* eng_step.step */
	uint32_t n;
};
struct audit_thread {
	uint32_t tid;
	char comm[SB_COMM_LEN + 1];
	uint64_t steps;          /* steady-state steps it was a launching thread in */
	struct audit_kind k[ENG_NAUDIT];
	uint64_t alloc_exact;    /* of k[ENG_AUD_ALLOC].steps, those counted exactly (eng_audit) */
	/* steps whose count jumps: the largest of each kind, and how many in all */
	uint32_t njumps[ENG_NAUDIT];
	uint64_t jumps_total[ENG_NAUDIT];
	struct audit_jump jumps[ENG_NAUDIT][AUDIT_JUMPS_MAX];
};
struct audit {
	uint64_t warmup;         /* steps left out at the start */
	uint64_t steps;          /* complete steady-state steps looked at */
	uint32_t nthreads;
	uint32_t threads_left;   /* more launching threads than AUDIT_THREADS_MAX */
	struct audit_thread t[AUDIT_THREADS_MAX];
};
/* 0, or -ENOMEM */
int report_audit(const struct engine *e, const struct eng_summary *s, struct audit *a);
void report_audit_text(const struct audit *a, FILE *f);
void report_audit_json(struct jw *w, const struct audit *a);
/* a step's "hot_path" array (schemas/report.md) */
void report_audit_step_json(struct jw *w, const struct eng_step *st);

/*
 * An episode: consecutive tail steps whose largest excess has the same cause
 * and culprit (a ten-step loader stall, a hog that stayed), so that it is not
 * lost behind a single longer step.
 */
struct report_episode {
	const struct eng_step *first, *last, *longest;
	uint64_t nsteps;
	uint64_t over_ns;        /* the steps' time over the median, summed */
	uint64_t cause_ns;       /* the top cause's excess, summed */
	struct eng_excess top;   /* the top cause (of the longest step: the same in each) */
};
/* the tail steps of s grouped, longest first, in *out (free() it); how many (0: none or no memory) */
uint64_t report_episodes(const struct engine *e, const struct eng_summary *s,
			 struct report_episode **out);
/*
 * "steps 80-89 (10 steps, +383 ms over median in all): blocked +380 ms in all — ...
 * (in step 84, the longest)  [tail]\n": the figures in the phrase are the longest step's
 */
void report_episode_line(const struct engine *e, const struct report_episode *p, FILE *f);
/* under a tail step's line: where its critical thread was (stacks, CPU samples); sym may be NULL */
struct symbols;
void report_step_stacks(const struct engine *e, struct symbols *sym, const struct eng_step *st,
			FILE *f);
const char *report_clean(char *buf, size_t len, const char *s); /* printable, for a terminal */
/* an interferer group's name: "comm[pid]", or "comm (N processes)"; printable */
const char *report_group_name(char *buf, size_t len, const struct eng_interferer_group *g);
/* processes of one name as one: "stormer (10 processes)" (eng_blame.processes) */
const char *report_crowd_name(char *buf, size_t len, const char *comm, uint32_t procs);

/*
 * Several traces as the ranks of one job (ranks.c, schemas/report.md "Ranks"):
 * rank i is traces[i], its engine finished, its collective kernels' time per
 * step given (NULL: none known).
 */
#define RANKS_SCHEMA_NAME "stepblame-ranks"
#define RANKS_SCHEMA_VERSION 1
struct rank_trace {
	const char *path;
	const struct engine *e;
	const uint64_t *coll_ns;  /* by step index (engine_step), time in collective kernels */
	uint32_t pid;             /* the process whose marks are its steps, in a trace of several ranks; 0: one rank a trace */
	long order;               /* where it goes among the ranks (its RANK) */
	bool corrupt;             /* its trace is damaged: it covers the records before (error says how) */
	const char *error;
};
int report_ranks_text(const struct rank_trace *r, int n, FILE *f);
int report_ranks_json(const struct rank_trace *r, int n, FILE *f);
int report_ranks_perfetto(const struct rank_trace *r, int n, FILE *f);
int report_ranks_html(const struct rank_trace *r, int n, FILE *f);

struct perfetto_stream;
struct perfetto_stream *perfetto_stream_new(FILE *f, struct eng_timeline_hooks *hooks);
void perfetto_stream_free(struct perfetto_stream *p);
int report_perfetto(const struct engine *e, const struct perfetto_stream *p, FILE *f);

#endif
