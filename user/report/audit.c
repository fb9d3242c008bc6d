// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The hot-path audit (docs/ARCHITECTURE.md, "Hot-path audit"): for the
 * steady-state steps of every thread that launches work, how many allocator
 * calls, mmap-family calls, page faults, migrations, voluntary sleeps and slow
 * I/O calls it made per step, and what that says. These are the seeds of tail
 * latency even in a run whose tail was short, so they are told whether or not
 * any step was slow.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "report/report.h"

uint64_t report_warmup(const struct engine *e, const struct eng_summary *s)
{
	uint64_t n = engine_nsteps(e), i = engine_first_step(e);

	/* a window kept only the last steps: the start is long gone */
	if (i > 0 || !n)
		return 0;
	for (i = 1; i < n; i++) {
		const struct eng_step *st = engine_step(e, i);

		if (!st || st->incomplete || st->duration_ns <= s->tail_threshold_ns)
			break;
	}
	return i;
}

/* what each kind says when it is in most steps; NULL: not a finding (sleeps) */
static const char *const finding_text[ENG_NAUDIT] = {
	[ENG_AUD_ALLOC] = "allocates",
	[ENG_AUD_MMAP] = "maps or unmaps memory",
	[ENG_AUD_FAULTS] = "page-faults",
	[ENG_AUD_MIGRATIONS] = "migrates between CPUs",
	[ENG_AUD_IO] = "waits on blocking I/O",
};

static const char *const unit_text[ENG_NAUDIT] = {
	[ENG_AUD_ALLOC] = "allocator calls", [ENG_AUD_MMAP] = "mmap-family calls",
	[ENG_AUD_FAULTS] = "page faults", [ENG_AUD_MIGRATIONS] = "migrations",
	[ENG_AUD_SLEEPS] = "sleeps", [ENG_AUD_IO] = "slow I/O calls",
};

/* the least count a jump has, by kind: a few moves or slow calls already matter */
static const uint32_t jump_min[ENG_NAUDIT] = {
	[ENG_AUD_ALLOC] = 16, [ENG_AUD_MMAP] = 8, [ENG_AUD_FAULTS] = 16,
	[ENG_AUD_MIGRATIONS] = 4, [ENG_AUD_SLEEPS] = 16, [ENG_AUD_IO] = 4,
};

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static struct audit_thread *thread_slot(struct audit *a, uint32_t tid)
{
	for (uint32_t i = 0; i < a->nthreads; i++)
		if (a->t[i].tid == tid)
			return &a->t[i];
	if (a->nthreads == AUDIT_THREADS_MAX) {
		a->threads_left++;
		return NULL;
	}
	a->t[a->nthreads].tid = tid;
	return &a->t[a->nthreads++];
}

static bool steady(const struct eng_step *st)
{
	return st && !st->incomplete;
}

/* does step st count for kind k of thread tid? its count in *v, and whether exact */
static bool counted(const struct eng_step *st, uint32_t tid, int k, uint32_t *v, bool *exact)
{
	if (!steady(st) || (k == ENG_AUD_ALLOC && !st->alloc_observed))
		return false;
	for (uint32_t j = 0; j < st->naudit; j++)
		if (st->audit[j].tid == tid) {
			*v = st->audit[j].n[k];
			*exact = k != ENG_AUD_ALLOC || st->audit[j].alloc_exact;
			return true;
		}
	return false;
}

static void kind_judge(const struct engine *e, uint64_t first, struct audit_thread *t, int k,
		       uint32_t *vals)
{
	struct audit_kind *ak = &t->k[k];
	uint64_t n = engine_nsteps(e), nv = 0, bar;
	uint32_t v;
	bool exact;

	for (uint64_t i = first; i < n; i++)
		if (counted(engine_step(e, i), t->tid, k, &v, &exact)) {
			vals[nv++] = v;
			ak->total += v;
			ak->nonzero += v > 0;
			if (k == ENG_AUD_ALLOC)
				t->alloc_exact += exact;
		}
	ak->steps = nv;
	if (!nv)
		return;
	qsort(vals, nv, sizeof(*vals), u32_cmp);
	ak->min = vals[0];
	ak->max = vals[nv - 1];
	ak->median = vals[nv / 2];
	ak->finding = finding_text[k] && 2 * ak->nonzero > nv;
	bar = (uint64_t)ak->median * AUDIT_JUMP_FACTOR;
	if (bar < jump_min[k])
		bar = jump_min[k];
	for (uint64_t i = first; i < n; i++) {
		const struct eng_step *st = engine_step(e, i);
		struct audit_jump *j = t->jumps[k];
		uint32_t m;

		if (!counted(st, t->tid, k, &v, &exact) || v <= bar)
			continue;
		t->jumps_total[k]++;
		/* keep the largest, by count descending */
		for (m = t->njumps[k]; m > 0 && j[m - 1].n < v; m--)
			if (m < AUDIT_JUMPS_MAX)
				j[m] = j[m - 1];
		if (m < AUDIT_JUMPS_MAX) {
			j[m] = (struct audit_jump){ .step = st->step, .n = v };
			if (t->njumps[k] < AUDIT_JUMPS_MAX)
				t->njumps[k]++;
		}
	}
}

int report_audit(const struct engine *e, const struct eng_summary *s, struct audit *a)
{
	uint64_t first = engine_first_step(e), n = engine_nsteps(e);
	uint32_t *vals;

	memset(a, 0, sizeof(*a));
	a->warmup = report_warmup(e, s);
	if (first < a->warmup)
		first = a->warmup;
	/* the threads, in the order they first launched work */
	for (uint64_t i = first; i < n; i++) {
		const struct eng_step *st = engine_step(e, i);

		if (!steady(st))
			continue;
		a->steps++;
		for (uint32_t j = 0; j < st->naudit; j++) {
			struct audit_thread *t = thread_slot(a, st->audit[j].tid);

			if (t)
				t->steps++;
		}
	}
	if (!a->steps)
		return 0;
	vals = malloc(a->steps * sizeof(*vals));
	if (!vals)
		return -ENOMEM;
	for (uint32_t ti = 0; ti < a->nthreads; ti++) {
		snprintf(a->t[ti].comm, sizeof(a->t[ti].comm), "%s",
			 engine_thread_name(e, a->t[ti].tid));
		for (int k = 0; k < ENG_NAUDIT; k++)
			kind_judge(e, first, &a->t[ti], k, vals);
	}
	free(vals);
	return 0;
}

static const char *who(char *buf, size_t len, const struct audit_thread *t)
{
	char c[4 * SB_COMM_LEN + 1];

	snprintf(buf, len, "%s[%" PRIu32 "]", report_clean(c, sizeof(c), t->comm[0] ? t->comm : "?"),
		 t->tid);
	return buf;
}

void report_audit_text(const struct audit *a, FILE *f)
{
	char b1[32], b2[32], nm[96];
	bool any = false;

	if (!a->steps || !a->nthreads) {
		fputs("Hot path    no thread that launches work was seen in a complete step: nothing "
		      "to audit\n", f);
		return;
	}
	fprintf(f, "Hot path    per steady-state step (%s steps after %" PRIu64 " of warm-up), for "
		"each thread that launches work; median / max:\n",
		report_fmt_count(b1, sizeof(b1), a->steps), a->warmup);
	for (uint32_t i = 0; i < a->nthreads; i++) {
		const struct audit_thread *t = &a->t[i];

		fprintf(f, "  %s, %s steps:", who(nm, sizeof(nm), t),
			report_fmt_count(b1, sizeof(b1), t->steps));
		for (int k = 0; k < ENG_NAUDIT; k++) {
			if (!t->k[k].steps) {
				fprintf(f, "%s %s not seen", k ? "," : "", eng_audit_name(k));
				continue;
			}
			fprintf(f, "%s %s %s/%s", k ? "," : "", eng_audit_name(k),
				report_fmt_count(b1, sizeof(b1), t->k[k].median),
				report_fmt_count(b2, sizeof(b2), t->k[k].max));
		}
		fputc('\n', f);
		if (!t->k[ENG_AUD_ALLOC].steps)
			fputs("    allocator calls: no step was seen whole (the overhead guard duty-cycled "
			      "the probes; record --max-overhead raises its limit)\n", f);
		else if (t->k[ENG_AUD_ALLOC].steps < t->steps)
			fprintf(f, "    allocator calls over the %s steps the probes saw whole (the "
				"overhead guard duty-cycled them in the others)\n",
				report_fmt_count(b1, sizeof(b1), t->k[ENG_AUD_ALLOC].steps));
		if (t->k[ENG_AUD_ALLOC].steps && t->alloc_exact < t->k[ENG_AUD_ALLOC].steps)
			fprintf(f, "    allocator calls exact in %s of those steps (marked by this "
				"thread at both ends); in the others, its slow calls and the runs of "
				"fast ones that reached the trace: at least that many\n",
				report_fmt_count(b1, sizeof(b1), t->alloc_exact));
		for (int k = 0; k < ENG_NAUDIT; k++) {
			const struct audit_kind *ak = &t->k[k];

			if (!ak->finding)
				continue;
			any = true;
			if (ak->nonzero == ak->steps)
				fprintf(f, "    %s in every step: %s %s a step (median)", finding_text[k],
					report_fmt_count(b1, sizeof(b1), ak->median), unit_text[k]);
			else
				fprintf(f, "    %s in %.0f%% of steps: %s %s a step (median)",
					finding_text[k], 100.0 * (double)ak->nonzero / (double)ak->steps,
					report_fmt_count(b1, sizeof(b1), ak->median), unit_text[k]);
			fputc('\n', f);
		}
		for (int k = 0; k < ENG_NAUDIT; k++) {
			for (uint32_t j = 0; j < t->njumps[k]; j++) {
				any = true;
				fprintf(f, "    step %" PRIu64 ": %s %s vs median %s\n",
					t->jumps[k][j].step,
					report_fmt_count(b1, sizeof(b1), t->jumps[k][j].n), unit_text[k],
					report_fmt_count(b2, sizeof(b2), t->k[k].median));
			}
			if (t->jumps_total[k] > t->njumps[k])
				fprintf(f, "    ... and %" PRIu64 " more steps with a jump in %s "
					"(--format json has every step's counts)\n",
					t->jumps_total[k] - t->njumps[k], unit_text[k]);
		}
	}
	if (a->threads_left)
		fprintf(f, "  ... and %" PRIu32 " more launching threads (not audited)\n",
			a->threads_left);
	if (!any)
		fputs("  clean: no allocation, mapping, fault, migration or slow I/O in most steps, "
		      "and no step whose counts jump\n", f);
}

static uint64_t jumps_sum(const struct audit_thread *t)
{
	uint64_t n = 0;

	for (int k = 0; k < ENG_NAUDIT; k++)
		n += t->jumps_total[k];
	return n;
}

static void kind_json(struct jw *w, const struct audit_kind *k)
{
	jw_obj(w);
	jw_key(w, "steps");
	jw_u64(w, k->steps);
	jw_key(w, "median");
	jw_u64(w, k->median);
	jw_key(w, "min");
	jw_u64(w, k->min);
	jw_key(w, "max");
	jw_u64(w, k->max);
	jw_key(w, "total");
	jw_u64(w, k->total);
	jw_key(w, "nonzero_steps");
	jw_u64(w, k->nonzero);
	jw_key(w, "zero");
	jw_bool(w, k->max == 0);
	jw_obj_end(w);
}

void report_audit_json(struct jw *w, const struct audit *a)
{
	jw_obj(w);
	jw_key(w, "warmup_steps");
	jw_u64(w, a->warmup);
	jw_key(w, "steps");
	jw_u64(w, a->steps);
	jw_key(w, "jump_min");
	jw_obj(w);
	for (int k = 0; k < ENG_NAUDIT; k++) {
		jw_key(w, eng_audit_name(k));
		jw_u64(w, jump_min[k]);
	}
	jw_obj_end(w);
	jw_key(w, "jump_factor");
	jw_u64(w, AUDIT_JUMP_FACTOR);
	jw_key(w, "threads_not_audited");
	jw_u64(w, a->threads_left);
	jw_key(w, "threads");
	jw_arr(w);
	for (uint32_t i = 0; i < a->nthreads; i++) {
		const struct audit_thread *t = &a->t[i];

		jw_obj(w);
		jw_key(w, "tid");
		jw_u64(w, t->tid);
		jw_key(w, "comm");
		jw_str(w, t->comm);
		jw_key(w, "steps");
		jw_u64(w, t->steps);
		jw_key(w, "alloc_exact_steps");
		jw_u64(w, t->alloc_exact);
		jw_key(w, "counts");
		jw_obj(w);
		for (int k = 0; k < ENG_NAUDIT; k++) {
			jw_key(w, eng_audit_name(k));
			kind_json(w, &t->k[k]);
		}
		jw_obj_end(w);
		jw_key(w, "findings");
		jw_arr(w);
		for (int k = 0; k < ENG_NAUDIT; k++)
			if (t->k[k].finding) {
				jw_obj(w);
				jw_key(w, "kind");
				jw_str(w, eng_audit_name(k));
				jw_key(w, "every_step");
				jw_bool(w, t->k[k].nonzero == t->k[k].steps);
				jw_key(w, "steps");
				jw_u64(w, t->k[k].nonzero);
				jw_key(w, "median");
				jw_u64(w, t->k[k].median);
				jw_obj_end(w);
			}
		jw_arr_end(w);
		jw_key(w, "jumps");
		jw_arr(w);
		for (int k = 0; k < ENG_NAUDIT; k++)
			for (uint32_t j = 0; j < t->njumps[k]; j++) {
				jw_obj(w);
				jw_key(w, "step");
				jw_u64(w, t->jumps[k][j].step);
				jw_key(w, "kind");
				jw_str(w, eng_audit_name(k));
				jw_key(w, "count");
				jw_u64(w, t->jumps[k][j].n);
				jw_key(w, "median");
				jw_u64(w, t->k[k].median);
				jw_obj_end(w);
			}
		jw_arr_end(w);
		jw_key(w, "jumps_total");
		jw_u64(w, jumps_sum(t));
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
}

void report_audit_step_json(struct jw *w, const struct eng_step *st)
{
	jw_arr(w);
	for (uint32_t j = 0; j < st->naudit; j++) {
		jw_obj(w);
		jw_key(w, "tid");
		jw_u64(w, st->audit[j].tid);
		for (int k = 0; k < ENG_NAUDIT; k++) {
			jw_key(w, eng_audit_name(k));
			jw_u64(w, st->audit[j].n[k]);
		}
		jw_key(w, "alloc_exact");
		jw_bool(w, st->audit[j].alloc_exact);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}
