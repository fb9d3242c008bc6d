// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * stepblame compare BASE NEW: what got slower between two runs of one
 * trainer, and why (schemas/report.md, "Compare"). Each side is a trace or a
 * JSON report; both are read into the same few columns, the warm-up is left
 * out, the steps are aligned by number, and the change of each percentile is
 * given with a bootstrap confidence interval, so that noise is not called a
 * regression. --fail-over makes it a CI gate.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/json.h"
#include "base/jsonread.h"
#include "base/opts.h"
#include "base/outfile.h"
#include "base/util.h"
#include "cmd/cmds.h"
#include "engine/engine.h"
#include "format/trace.h"
#include "report/report.h"

#define COMPARE_SCHEMA_NAME "stepblame-compare"
#define COMPARE_SCHEMA_VERSION 1
#define ITF_MAX 64
#define JSON_MAX_BYTES (1ull << 31)
#define EXIT_REGRESSION 3

/* one step as compare needs it */
struct cstep {
	uint64_t step, dur, tracer;
	uint64_t cause[ENG_NCAUSE];
	bool tail;
	int8_t top;              /* the largest excess's cause, -1 none */
	char culprit[SB_COMM_LEN + 1]; /* its culprit's name, "" none */
};

struct citf {
	char comm[SB_COMM_LEN + 1];
	uint64_t ns;
};

struct run {
	const char *path;
	const char *kind;        /* "trace" or "report" */
	struct cstep *s;         /* complete steps, in order */
	size_t n;
	uint64_t tail_threshold;
	uint64_t warmup;         /* leading steps left out */
	struct citf itf[ITF_MAX];
	int nitf;
	/* the steps compared: indexes into s */
	size_t *use;
	size_t nuse;
};

static int cause_of_name(const char *s)
{
	for (int c = 0; c < ENG_NCAUSE; c++)
		if (!strcmp(s, eng_cause_name(c)))
			return c;
	return -1;
}

/* ---- reading a side ---- */

static int run_from_engine(struct run *r, const struct engine *e)
{
	struct eng_summary s;
	struct eng_interferer itf[ITF_MAX];
	uint64_t n = engine_nsteps(e);

	engine_summarise(e, &s);
	r->tail_threshold = s.tail_threshold_ns;
	r->s = calloc(n ? n : 1, sizeof(*r->s));
	if (!r->s)
		return -ENOMEM;
	for (uint64_t i = engine_first_step(e); i < n; i++) {
		const struct eng_step *st = engine_step(e, i);
		struct cstep *c;
		struct eng_excess ex;

		if (!st || st->incomplete)
			continue;
		c = &r->s[r->n++];
		c->step = st->step;
		c->dur = st->duration_ns;
		c->tracer = st->tracer_ns;
		c->tail = st->tail;
		memcpy(c->cause, st->cause_ns, sizeof(c->cause));
		c->top = -1;
		if (st->tail && engine_step_excess(e, st, &s, &ex, 1) == 1) {
			c->top = (int8_t)ex.cause;
			if (ex.has_who)
				snprintf(c->culprit, sizeof(c->culprit), "%s", ex.who.comm);
		}
	}
	r->nitf = engine_interferers(e, itf, ITF_MAX);
	for (int i = 0; i < r->nitf; i++) {
		snprintf(r->itf[i].comm, sizeof(r->itf[i].comm), "%s", itf[i].comm);
		r->itf[i].ns = itf[i].ns;
	}
	return 0;
}

static uint64_t num(const struct jr_val *v)
{
	uint64_t x = 0;

	return jr_u64(v, &x) ? x : 0;
}

/* a JSON report (schemas/report.md) as written by report --format json */
static int run_from_json(struct run *r, const struct jr_val *root, char *err, size_t errlen)
{
	const struct jr_val *schema = jr_get(jr_get(root, "schema"), "name");
	const struct jr_val *steps = jr_get(root, "steps");
	const struct jr_val *sum = jr_get(root, "summary");
	const struct jr_val *itf = jr_get(sum, "interferers");
	size_t n = jr_len(steps);

	if (strcmp(jr_str(schema), REPORT_SCHEMA_NAME) || jr_type(steps) != JR_ARR) {
		snprintf(err, errlen, "not a stepblame JSON report (no schema \"%s\" and steps)",
			 REPORT_SCHEMA_NAME);
		return -EINVAL;
	}
	r->tail_threshold = num(jr_get(sum, "tail_threshold_ns"));
	r->s = calloc(n ? n : 1, sizeof(*r->s));
	if (!r->s)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct jr_val *st = jr_at(steps, i), *bl = jr_get(st, "blame");
		const struct jr_val *ex = jr_at(jr_get(st, "excess"), 0);
		struct cstep *c;

		if (jr_bool(jr_get(st, "incomplete")) || jr_type(jr_get(st, "duration_ns")) != JR_NUM)
			continue;
		c = &r->s[r->n++];
		c->step = num(jr_get(st, "step"));
		c->dur = num(jr_get(st, "duration_ns"));
		c->tracer = num(jr_get(st, "tracer_ns"));
		c->tail = jr_bool(jr_get(st, "tail"));
		for (size_t j = 0; j < jr_len(bl); j++) {
			const struct jr_val *b = jr_at(bl, j);
			int k = cause_of_name(jr_str(jr_get(b, "cause")));

			if (k >= 0)
				c->cause[k] += num(jr_get(b, "ns"));
		}
		c->top = -1;
		if (c->tail && ex) {
			int k = cause_of_name(jr_str(jr_get(ex, "cause")));

			c->top = (int8_t)k;
			snprintf(c->culprit, sizeof(c->culprit), "%s",
				 jr_str(jr_get(jr_get(ex, "culprit"), "comm")));
		}
	}
	for (size_t i = 0; i < jr_len(itf) && r->nitf < ITF_MAX; i++) {
		const struct jr_val *x = jr_at(itf, i);

		snprintf(r->itf[r->nitf].comm, sizeof(r->itf[0].comm), "%s",
			 jr_str(jr_get(x, "comm")));
		r->itf[r->nitf++].ns = num(jr_get(x, "ns"));
	}
	return 0;
}

/* a whole file (gzip or not) into memory; NULL after err */
static char *slurp(const char *path, size_t *len, char *err, size_t errlen)
{
	gzFile g = gzopen(path, "rb");
	size_t cap = 1 << 20, n = 0;
	char *buf = NULL;

	if (!g) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno ? errno : ENOMEM));
		return NULL;
	}
	for (;;) {
		int k;

		if (n == cap || !buf) {
			char *q;

			if (buf)
				cap *= 2;
			if (cap > JSON_MAX_BYTES) {
				snprintf(err, errlen, "%s: larger than %llu bytes", path, JSON_MAX_BYTES);
				break;
			}
			q = realloc(buf, cap);
			if (!q) {
				snprintf(err, errlen, "%s: out of memory", path);
				break;
			}
			buf = q;
		}
		k = gzread(g, buf + n, (unsigned)(cap - n));
		if (k < 0) {
			int e;

			snprintf(err, errlen, "%s: %s", path, gzerror(g, &e));
			break;
		}
		if (!k) {
			gzclose(g);
			*len = n;
			return buf;
		}
		n += (size_t)k;
	}
	gzclose(g);
	free(buf);
	return NULL;
}

/* a JSON report starts with '{' (after white space, maybe gzip-compressed) */
static int looks_json(const char *path)
{
	gzFile g = gzopen(path, "rb");
	int c;

	if (!g)
		return -errno;
	do
		c = gzgetc(g);
	while (c == ' ' || c == '\t' || c == '\n' || c == '\r');
	gzclose(g);
	return c == '{';
}

static int run_load(struct run *r, const char *path, const struct engine_opts *eo)
{
	char err[512];
	int j = looks_json(path);

	r->path = path;
	if (j < 0) {
		sb_err("compare: %s: %s", path, strerror(-j));
		return -1;
	}
	if (j) {
		size_t len = 0;
		char *buf = slurp(path, &len, err, sizeof(err));
		struct jr_doc *d;
		int rc;

		if (!buf) {
			sb_err("compare: %s", err);
			return -1;
		}
		d = jr_parse(buf, len, err, sizeof(err));
		free(buf);
		if (!d) {
			sb_err("compare: %s: not valid JSON: %s", path, err);
			return -1;
		}
		r->kind = "report";
		rc = run_from_json(r, jr_root(d), err, sizeof(err));
		jr_free(d);
		if (rc) {
			sb_err("compare: %s: %s", path, rc == -ENOMEM ? "out of memory" : err);
			return -1;
		}
	} else {
		struct sbt_reader *rd = NULL;
		bool bad = false;
		struct engine *e = report_engine_of_file(path, eo, &rd, &bad);

		if (!e) {
			sbt_close(rd);
			return -1;
		}
		if (bad)
			sb_err("compare: %s: %s; compared as far as it is readable", path,
			       sbt_error(rd));
		r->kind = "trace";
		j = run_from_engine(r, e);
		engine_free(e);
		sbt_close(rd);
		if (j) {
			sb_err("compare: out of memory");
			return -1;
		}
	}
	return 0;
}

/* ---- statistics ---- */

/* the p-th percentile (nearest rank) of v[0..n), which it reorders */
static uint64_t select_pct(uint64_t *v, size_t n, double p)
{
	size_t k = (size_t)ceil(p / 100.0 * (double)n);
	size_t lo = 0, hi = n - 1;

	k = k ? k - 1 : 0;
	if (k >= n)
		k = n - 1;
	/* quickselect, median-of-three pivots */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2, i = lo, j = hi;
		uint64_t a = v[lo], b = v[mid], c = v[hi];
		uint64_t piv = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);

		while (i <= j) {
			while (v[i] < piv)
				i++;
			while (v[j] > piv)
				j--;
			if (i <= j) {
				uint64_t t = v[i];

				v[i] = v[j];
				v[j] = t;
				i++;
				if (!j)
					break;
				j--;
			}
		}
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			break;
	}
	return v[k];
}

/* xorshift64*: the same intervals for the same inputs */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

/* the statistics compared; the last, max, is one step: no interval */
enum { S_P50, S_P90, S_P99, S_MEAN, S_MAX, NPCT };
static const double pcts[NPCT] = { 50, 90, 99, 0, 100 };
static const char *const pct_names[NPCT] = { "p50", "p90", "p99", "mean", "max" };

/* statistic k of v[0..n), which it may reorder */
static uint64_t stat_of(uint64_t *v, size_t n, int k)
{
	if (k == S_MEAN) {
		double sum = 0;

		for (size_t i = 0; i < n; i++)
			sum += (double)v[i];
		return n ? (uint64_t)(sum / (double)n + 0.5) : 0;
	}
	return select_pct(v, n, pcts[k]);
}

struct pct_cmp {
	uint64_t base, new;
	double ratio, lo, hi;    /* new/base and its 95% interval (max: no interval) */
	int verdict;             /* 1 slower, -1 faster, 0 within noise */
};

struct cmp {
	struct pct_cmp p[NPCT];
	double base_ratio_p99_p50, new_ratio_p99_p50;
	uint64_t resamples;
	bool aligned;            /* compared on the step numbers both have */
	uint64_t ntail_base, ntail_new;
};

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0;
}

/* step times less the tracer's estimated cost: the trainer's own time */
static void durations(const struct run *r, uint64_t *v)
{
	for (size_t i = 0; i < r->nuse; i++) {
		const struct cstep *st = &r->s[r->use[i]];

		v[i] = st->dur > st->tracer ? st->dur - st->tracer : 0;
	}
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* the bootstrap: resample each side's steps, the ratio of each percentile */
static int bootstrap(const struct run *b, const struct run *n, struct cmp *c, double min_change)
{
	uint64_t *vb = malloc(b->nuse * sizeof(*vb)), *vn = malloc(n->nuse * sizeof(*vn));
	uint64_t *rb = malloc(b->nuse * sizeof(*rb)), *rn = malloc(n->nuse * sizeof(*rn));
	double *rat[NPCT] = { 0 };
	uint64_t seed = 0x9e3779b97f4a7c15ull, big = b->nuse > n->nuse ? b->nuse : n->nuse;
	uint64_t B = big <= 20000 ? 2000 : big <= 200000 ? 400 : 100;
	int rc = -ENOMEM;

	for (int k = 0; k < NPCT; k++)
		if (!(rat[k] = malloc(B * sizeof(double))))
			goto out;
	if (!vb || !vn || !rb || !rn)
		goto out;
	c->resamples = B;
	durations(b, vb);
	durations(n, vn);
	for (int k = 0; k < NPCT; k++) {
		memcpy(rb, vb, b->nuse * sizeof(*rb));
		memcpy(rn, vn, n->nuse * sizeof(*rn));
		c->p[k].base = stat_of(rb, b->nuse, k);
		c->p[k].new = stat_of(rn, n->nuse, k);
		c->p[k].ratio = ratio(c->p[k].new, c->p[k].base);
	}
	for (uint64_t it = 0; it < B; it++) {
		for (size_t i = 0; i < b->nuse; i++)
			rb[i] = vb[rng_next(&seed) % b->nuse];
		for (size_t i = 0; i < n->nuse; i++)
			rn[i] = vn[rng_next(&seed) % n->nuse];
		for (int k = 0; k < NPCT - 1; k++)
			rat[k][it] = ratio(stat_of(rn, n->nuse, k), stat_of(rb, b->nuse, k));
	}
	for (int k = 0; k < NPCT - 1; k++) {
		struct pct_cmp *p = &c->p[k];
		double *r = rat[k];

		/* the 2.5th and 97.5th of the sorted ratios bound the interval */
		qsort(r, B, sizeof(*r), dbl_cmp);
		p->lo = r[(uint64_t)(0.025 * (double)(B - 1))];
		p->hi = r[(uint64_t)ceil(0.975 * (double)(B - 1))];
		p->verdict = p->lo > 1 + min_change ? 1 : p->hi < 1 - min_change ? -1 : 0;
	}
	c->p[NPCT - 1].lo = c->p[NPCT - 1].hi = c->p[NPCT - 1].ratio;
	rc = 0;
out:
	for (int k = 0; k < NPCT; k++)
		free(rat[k]);
	free(vb);
	free(vn);
	free(rb);
	free(rn);
	return rc;
}

/* leading steps at or over the side's tail threshold: the warm-up */
static uint64_t warmup_of(const struct run *r)
{
	uint64_t i = 1;

	if (!r->n)
		return 0;
	while (i < r->n && r->tail_threshold && r->s[i].dur > r->tail_threshold)
		i++;
	return i < r->n ? i : 1;
}

static int step_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* after the warm-up, the steps both have by number (else all of each) */
static int align(struct run *b, struct run *n, bool *aligned)
{
	uint64_t *nb = NULL;
	size_t common = 0;

	b->use = malloc((b->n ? b->n : 1) * sizeof(*b->use));
	n->use = malloc((n->n ? n->n : 1) * sizeof(*n->use));
	nb = malloc((b->n ? b->n : 1) * sizeof(*nb));
	if (!b->use || !n->use || !nb) {
		free(nb);
		return -ENOMEM;
	}
	for (size_t i = b->warmup; i < b->n; i++)
		nb[common++] = b->s[i].step;
	qsort(nb, common, sizeof(*nb), step_cmp);
	b->nuse = n->nuse = 0;
	for (size_t i = n->warmup; i < n->n; i++)
		if (bsearch(&n->s[i].step, nb, common, sizeof(*nb), step_cmp))
			n->use[n->nuse++] = i;
	free(nb);
	*aligned = n->nuse >= 20;
	if (*aligned) {
		/* the same numbers in BASE */
		uint64_t *nn = malloc(n->nuse * sizeof(*nn));

		if (!nn)
			return -ENOMEM;
		for (size_t i = 0; i < n->nuse; i++)
			nn[i] = n->s[n->use[i]].step;
		qsort(nn, n->nuse, sizeof(*nn), step_cmp);
		for (size_t i = b->warmup; i < b->n; i++)
			if (bsearch(&b->s[i].step, nn, n->nuse, sizeof(*nn), step_cmp))
				b->use[b->nuse++] = i;
		free(nn);
		return 0;
	}
	n->nuse = 0;
	for (size_t i = b->warmup; i < b->n; i++)
		b->use[b->nuse++] = i;
	for (size_t i = n->warmup; i < n->n; i++)
		n->use[n->nuse++] = i;
	return 0;
}

/* per cause: median per step, and mean per step in tail steps and over all */
struct cause_cmp {
	uint64_t med[2];
	double mean[2];          /* ns per step, over the steps compared */
	double tail_mean[2];     /* ns per step, of the time in tail steps */
};

static uint64_t median_of(uint64_t *v, size_t n)
{
	return n ? select_pct(v, n, 50) : 0;
}

static int causes(const struct run *side[2], struct cause_cmp *cc, uint64_t tracer_med[2])
{
	size_t big = side[0]->nuse > side[1]->nuse ? side[0]->nuse : side[1]->nuse;
	uint64_t *v = malloc((big ? big : 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (int s = 0; s < 2; s++) {
		const struct run *r = side[s];

		for (int c = 0; c < ENG_NCAUSE; c++) {
			double sum = 0, tsum = 0;

			for (size_t i = 0; i < r->nuse; i++) {
				const struct cstep *st = &r->s[r->use[i]];

				v[i] = st->cause[c];
				sum += (double)st->cause[c];
				if (st->tail)
					tsum += (double)st->cause[c];
			}
			cc[c].med[s] = median_of(v, r->nuse);
			cc[c].mean[s] = r->nuse ? sum / (double)r->nuse : 0;
			cc[c].tail_mean[s] = r->nuse ? tsum / (double)r->nuse : 0;
		}
		for (size_t i = 0; i < r->nuse; i++)
			v[i] = r->s[r->use[i]].tracer;
		tracer_med[s] = median_of(v, r->nuse);
	}
	free(v);
	return 0;
}

/* ---- episodes: consecutive tail steps with one top cause and culprit ---- */

struct episode {
	uint64_t first, last, nsteps, over_ns;
	int cause;
	char culprit[SB_COMM_LEN + 1];
};

static size_t episodes(const struct run *r, struct episode *out, size_t max, uint64_t median)
{
	size_t n = 0;

	for (size_t i = 0; i < r->nuse; i++) {
		const struct cstep *st = &r->s[r->use[i]];
		struct episode *p = n ? &out[n - 1] : NULL;

		if (!st->tail)
			continue;
		if (p && st->step == p->last + 1 && st->top == p->cause &&
		    !strcmp(st->culprit, p->culprit)) {
			p->last = st->step;
			p->nsteps++;
			p->over_ns += st->dur > median ? st->dur - median : 0;
			continue;
		}
		if (n == max)
			break;
		out[n] = (struct episode){ .first = st->step, .last = st->step, .nsteps = 1,
					   .over_ns = st->dur > median ? st->dur - median : 0,
					   .cause = st->top };
		memcpy(out[n].culprit, st->culprit, sizeof(out[n].culprit));
		n++;
	}
	return n;
}

/* an episode of NEW that BASE has not: no BASE episode of its cause and culprit near
 * its steps (a hog's cpu_wait beside another process's cpu_wait is new) */
static bool episode_new(const struct episode *x, const struct episode *base, size_t nb)
{
	for (size_t i = 0; i < nb; i++)
		if (base[i].cause == x->cause && !strcmp(base[i].culprit, x->culprit) &&
		    base[i].first <= x->last + 2 && x->first <= base[i].last + 2)
			return false;
	return true;
}

static int ep_over_cmp(const void *a, const void *b)
{
	const struct episode *x = a, *y = b;

	return x->over_ns < y->over_ns ? 1 : x->over_ns > y->over_ns ? -1 :
	       x->first < y->first ? -1 : x->first > y->first;
}

/* ---- output ---- */

struct result {
	struct run *side[2];
	struct cmp c;
	struct cause_cmp cc[ENG_NCAUSE];
	uint64_t tracer_med[2];
	struct episode *ep_new;
	size_t nep_new, nep_total;
	/* interferers: in NEW not in BASE (appeared), the other way (vanished) */
	struct citf appeared[ITF_MAX], vanished[ITF_MAX];
	int nappeared, nvanished;
	int worst;               /* the cause whose mean per step grew most, -1 none */
	double fail_pct[NPCT];   /* --fail-over, -1 not asked */
	double min_change;       /* --min-change, a fraction */
	bool failed[NPCT];
};

static uint64_t itf_ns(const struct run *r, const char *comm)
{
	for (int i = 0; i < r->nitf; i++)
		if (!strcmp(r->itf[i].comm, comm))
			return r->itf[i].ns;
	return 0;
}

/* an interferer matters from 1 ms, or 0.1% of the side's step time */
static uint64_t itf_floor(const struct run *r)
{
	uint64_t t = 0;

	for (size_t i = 0; i < r->nuse; i++)
		t += r->s[r->use[i]].dur;
	return t / 1000 > 1000000 ? t / 1000 : 1000000;
}

static void interferers(struct result *res)
{
	for (int s = 0; s < 2; s++) {
		const struct run *me = res->side[s], *other = res->side[!s];
		uint64_t floor = itf_floor(me);

		for (int i = 0; i < me->nitf; i++) {
			struct citf *out = s ? res->appeared : res->vanished;
			int *n = s ? &res->nappeared : &res->nvanished;

			/* present in one, at most a tenth of that in the other */
			if (me->itf[i].ns < floor || itf_ns(other, me->itf[i].comm) * 10 > me->itf[i].ns)
				continue;
			out[(*n)++] = me->itf[i];
		}
	}
}

static const char *ms(char *buf, size_t len, double ns)
{
	return report_fmt_ns(buf, len, ns < 0 ? 0 : (uint64_t)(ns + 0.5));
}

static const char *signed_ms(char *buf, size_t len, double ns)
{
	char t[32];

	snprintf(buf, len, "%s%s", ns < 0 ? "-" : "+", ms(t, sizeof(t), fabs(ns)));
	return buf;
}

/* slower at P50, the mean or P99 (the others are shown, not judged) */
static bool slower(const struct result *r)
{
	return r->c.p[S_P50].verdict > 0 || r->c.p[S_MEAN].verdict > 0 || r->c.p[S_P99].verdict > 0;
}

static const char *signed_ms(char *buf, size_t len, double ns);

/* "NEW is slower (p50, mean): mostly io_wait, +4.66 ms per step on average" */
static void slower_phrase(const struct result *r, FILE *f)
{
	const char *sep = "";
	char a[32];

	fputs("NEW is slower (", f);
	for (int k = S_P50; k <= S_MEAN; k++)
		if (k != S_P90 && r->c.p[k].verdict > 0) {
			fprintf(f, "%s%s", sep, pct_names[k]);
			sep = ", ";
		}
	fputc(')', f);
	if (r->worst >= 0)
		fprintf(f, ": mostly %s, %s per step on average", eng_cause_name(r->worst),
			signed_ms(a, sizeof(a), r->cc[r->worst].mean[1] - r->cc[r->worst].mean[0]));
}

static bool gate_failed(const struct result *r)
{
	for (int k = 0; k < NPCT - 1; k++)
		if (r->failed[k])
			return true;
	return false;
}

static void text_out(const struct result *r, FILE *f)
{
	const struct run *b = r->side[0], *n = r->side[1];
	char a1[32], a2[32], a3[32];

	fprintf(f, "stepblame compare: BASE %s (%s), NEW %s (%s)\n", b->path, b->kind, n->path,
		n->kind);
	fprintf(f, "Steps       %zu in BASE, %zu in NEW compared (%s; warm-up left out: %" PRIu64
		" and %" PRIu64 " steps)\n", b->nuse, n->nuse,
		r->c.aligned ? "the step numbers both have" : "all steady steps of each: too few "
		"step numbers in common to align", b->warmup, n->warmup);
	fprintf(f, "Step time   less the tracer's cost: BASE -> NEW, NEW/BASE [95%% interval, %" PRIu64
		" resamples]\n            (a change under %.3g%% is none):\n", r->c.resamples,
		100 * r->min_change);
	for (int k = 0; k < NPCT; k++) {
		const struct pct_cmp *p = &r->c.p[k];

		fprintf(f, "  %-4s %10s -> %-10s x%.3f", pct_names[k], ms(a1, sizeof(a1), (double)p->base),
			ms(a2, sizeof(a2), (double)p->new), p->ratio);
		if (k < NPCT - 1)
			fprintf(f, " [%.3f, %.3f]  %s", p->lo, p->hi,
				p->verdict > 0 ? "SLOWER" : p->verdict < 0 ? "faster" :
				"no change beyond noise");
		else
			fputs("  (one step: no interval)", f);
		if (r->fail_pct[k] >= 0)
			fprintf(f, "%s", r->failed[k] ? "  FAILS --fail-over" : "  passes --fail-over");
		fputc('\n', f);
	}
	fprintf(f, "  P99/P50 %.2f -> %.2f\n", r->c.base_ratio_p99_p50, r->c.new_ratio_p99_p50);
	fprintf(f, "Tracer      median cost per step %s -> %s", ms(a1, sizeof(a1), (double)r->tracer_med[0]),
		ms(a2, sizeof(a2), (double)r->tracer_med[1]));
	fputs(": taken out of the step times above, so that it is not read as the trainer's", f);
	fputc('\n', f);
	fputs("Causes      per step compared, BASE -> NEW: median, mean, and the change of the mean's "
	      "part in tail steps:\n", f);
	for (int c = 0; c < ENG_NCAUSE; c++) {
		const struct cause_cmp *x = &r->cc[c];
		char d[32];

		if (!x->mean[0] && !x->mean[1])
			continue;
		fprintf(f, "  %-13s median %9s -> %-9s  mean %9s -> %-9s  tail %s%s\n",
			eng_cause_name(c), ms(a1, sizeof(a1), (double)x->med[0]),
			ms(a2, sizeof(a2), (double)x->med[1]), ms(a3, sizeof(a3), x->mean[0]),
			ms(d, sizeof(d), x->mean[1]),
			signed_ms((char[32]){ 0 }, 32, x->tail_mean[1] - x->tail_mean[0]),
			c == r->worst ? "   <- grew most" : "");
	}
	if (r->nappeared || r->nvanished) {
		fputs("Interferers", f);
		for (int i = 0; i < r->nappeared; i++)
			fprintf(f, "%s appeared: %s (%s in NEW)", i ? ";" : "",
				report_clean(a1, sizeof(a1), r->appeared[i].comm),
				ms(a2, sizeof(a2), (double)r->appeared[i].ns));
		for (int i = 0; i < r->nvanished; i++)
			fprintf(f, "%s vanished: %s (%s in BASE)", i || r->nappeared ? ";" : "",
				report_clean(a1, sizeof(a1), r->vanished[i].comm),
				ms(a2, sizeof(a2), (double)r->vanished[i].ns));
		fputc('\n', f);
	} else {
		fputs("Interferers the same in both (none appeared or vanished)\n", f);
	}
	if (r->nep_new) {
		fprintf(f, "Tail        %zu episode%s in NEW that BASE has not (longest first):\n",
			r->nep_new, r->nep_new == 1 ? "" : "s");
		for (size_t i = 0; i < r->nep_new && i < 10; i++) {
			const struct episode *e = &r->ep_new[i];

			if (e->nsteps == 1)
				fprintf(f, "  step %" PRIu64, e->first);
			else
				fprintf(f, "  steps %" PRIu64 "-%" PRIu64 " (%" PRIu64 " steps)", e->first,
					e->last, e->nsteps);
			fprintf(f, ": +%s over the median, top cause %s", ms(a1, sizeof(a1), (double)e->over_ns),
				e->cause >= 0 ? eng_cause_name(e->cause) : "none");
			if (e->culprit[0])
				fprintf(f, " (%s)", report_clean(a2, sizeof(a2), e->culprit));
			fputc('\n', f);
		}
		if (r->nep_new > 10)
			fprintf(f, "  ... and %zu more (--format json lists them)\n", r->nep_new - 10);
	} else {
		fputs("Tail        no episode in NEW that BASE has not\n", f);
	}
	fputs("Verdict     ", f);
	if (slower(r)) {
		slower_phrase(r, f);
		fputc('\n', f);
	} else if (r->c.p[S_P50].verdict < 0 || r->c.p[S_MEAN].verdict < 0 ||
		   r->c.p[S_P99].verdict < 0) {
		fputs("NEW is faster, not slower, beyond noise\n", f);
	} else {
		fputs("no regression beyond noise at P50, the mean or P99\n", f);
	}
}

static void json_out(const struct result *r, FILE *f)
{
	struct jw w;

	jw_init(&w, f, true);
	jw_obj(&w);
	jw_key(&w, "schema");
	jw_obj(&w);
	jw_key(&w, "name");
	jw_str(&w, COMPARE_SCHEMA_NAME);
	jw_key(&w, "version");
	jw_u64(&w, COMPARE_SCHEMA_VERSION);
	jw_obj_end(&w);
	for (int s = 0; s < 2; s++) {
		const struct run *x = r->side[s];

		jw_key(&w, s ? "new" : "base");
		jw_obj(&w);
		jw_key(&w, "path");
		jw_str(&w, x->path);
		jw_key(&w, "input");
		jw_str(&w, x->kind);
		jw_key(&w, "complete_steps");
		jw_u64(&w, x->n);
		jw_key(&w, "warmup_steps");
		jw_u64(&w, x->warmup);
		jw_key(&w, "steps_compared");
		jw_u64(&w, x->nuse);
		jw_key(&w, "tracer_median_ns");
		jw_u64(&w, r->tracer_med[s]);
		jw_key(&w, "p99_over_p50");
		jw_fixed(&w, s ? r->c.new_ratio_p99_p50 : r->c.base_ratio_p99_p50, 3);
		jw_obj_end(&w);
	}
	jw_key(&w, "aligned");
	jw_bool(&w, r->c.aligned);
	jw_key(&w, "resamples");
	jw_u64(&w, r->c.resamples);
	jw_key(&w, "min_change_pct");
	jw_fixed(&w, 100 * r->min_change, 2);
	jw_key(&w, "percentiles");
	jw_obj(&w);
	for (int k = 0; k < NPCT; k++) {
		const struct pct_cmp *p = &r->c.p[k];

		jw_key(&w, pct_names[k]);
		jw_obj(&w);
		jw_key(&w, "base_ns");
		jw_u64(&w, p->base);
		jw_key(&w, "new_ns");
		jw_u64(&w, p->new);
		jw_key(&w, "ratio");
		jw_fixed(&w, p->ratio, 4);
		if (k < NPCT - 1) {
			jw_key(&w, "ci_low");
			jw_fixed(&w, p->lo, 4);
			jw_key(&w, "ci_high");
			jw_fixed(&w, p->hi, 4);
			jw_key(&w, "verdict");
			jw_str(&w, p->verdict > 0 ? "slower" : p->verdict < 0 ? "faster" : "same");
		}
		if (r->fail_pct[k] >= 0) {
			jw_key(&w, "fail_over_pct");
			jw_fixed(&w, r->fail_pct[k], 2);
			jw_key(&w, "failed");
			jw_bool(&w, r->failed[k]);
		}
		jw_obj_end(&w);
	}
	jw_obj_end(&w);
	jw_key(&w, "causes");
	jw_obj(&w);
	for (int c = 0; c < ENG_NCAUSE; c++) {
		const struct cause_cmp *x = &r->cc[c];

		if (!x->mean[0] && !x->mean[1])
			continue;
		jw_key(&w, eng_cause_name(c));
		jw_obj(&w);
		jw_key(&w, "base_median_ns");
		jw_u64(&w, x->med[0]);
		jw_key(&w, "new_median_ns");
		jw_u64(&w, x->med[1]);
		jw_key(&w, "base_mean_ns");
		jw_u64(&w, (uint64_t)(x->mean[0] + 0.5));
		jw_key(&w, "new_mean_ns");
		jw_u64(&w, (uint64_t)(x->mean[1] + 0.5));
		jw_key(&w, "base_tail_mean_ns");
		jw_u64(&w, (uint64_t)(x->tail_mean[0] + 0.5));
		jw_key(&w, "new_tail_mean_ns");
		jw_u64(&w, (uint64_t)(x->tail_mean[1] + 0.5));
		jw_obj_end(&w);
	}
	jw_obj_end(&w);
	jw_key(&w, "grew_most");
	if (r->worst >= 0)
		jw_str(&w, eng_cause_name(r->worst));
	else
		jw_null(&w);
	for (int s = 0; s < 2; s++) {
		const struct citf *x = s ? r->vanished : r->appeared;
		int nx = s ? r->nvanished : r->nappeared;

		jw_key(&w, s ? "interferers_vanished" : "interferers_appeared");
		jw_arr(&w);
		for (int i = 0; i < nx; i++) {
			jw_obj(&w);
			jw_key(&w, "comm");
			jw_str(&w, x[i].comm);
			jw_key(&w, "ns");
			jw_u64(&w, x[i].ns);
			jw_obj_end(&w);
		}
		jw_arr_end(&w);
	}
	jw_key(&w, "new_episodes");
	jw_arr(&w);
	for (size_t i = 0; i < r->nep_new; i++) {
		const struct episode *e = &r->ep_new[i];

		jw_obj(&w);
		jw_key(&w, "first_step");
		jw_u64(&w, e->first);
		jw_key(&w, "last_step");
		jw_u64(&w, e->last);
		jw_key(&w, "steps");
		jw_u64(&w, e->nsteps);
		jw_key(&w, "over_median_ns");
		jw_u64(&w, e->over_ns);
		jw_key(&w, "cause");
		if (e->cause >= 0)
			jw_str(&w, eng_cause_name(e->cause));
		else
			jw_null(&w);
		jw_key(&w, "culprit");
		jw_str(&w, e->culprit);
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	jw_key(&w, "regression");
	jw_bool(&w, slower(r));
	jw_key(&w, "gate_failed");
	jw_bool(&w, gate_failed(r));
	jw_obj_end(&w);
	fputc('\n', f);
}

/* ---- a page for a browser: tables and the two step-time distributions ---- */

static void h_esc(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '<')
			fputs("&lt;", f);
		else if (c == '>')
			fputs("&gt;", f);
		else if (c == '&')
			fputs("&amp;", f);
		else if (c == '"')
			fputs("&quot;", f);
		else if (c < 0x20 || c == 0x7f)
			fputs("\xef\xbf\xbd", f); /* U+FFFD */
		else
			fputc(c, f);
	}
}

/* one run's step times (less the tracer) as a distribution curve, x on a log scale */
static void h_curve(FILE *f, const struct run *r, double lx0, double lx1, const char *cls)
{
	uint64_t *v = malloc((r->nuse ? r->nuse : 1) * sizeof(*v));
	size_t stride;

	if (!v)
		return;
	durations(r, v);
	qsort(v, r->nuse, sizeof(*v), step_cmp);
	stride = r->nuse > 1000 ? r->nuse / 1000 : 1;
	fprintf(f, "<polyline class=\"%s\" points=\"", cls);
	for (size_t i = 0; i < r->nuse; i += stride) {
		size_t j = i + stride - 1 < r->nuse ? i + stride - 1 : r->nuse - 1;
		double x = log10((double)(v[j] ? v[j] : 1));
		double px = 60 + 700 * (x - lx0) / (lx1 > lx0 ? lx1 - lx0 : 1);
		double py = 260 - 240 * (double)(j + 1) / (double)r->nuse;

		fprintf(f, "%.1f,%.1f ", px, py);
	}
	fputs("\"/>\n", f);
	free(v);
}

static void h_dist(FILE *f, const struct result *r)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	double lx0, lx1;
	char a[32];

	for (int s = 0; s < 2; s++)
		for (size_t i = 0; i < r->side[s]->nuse; i++) {
			const struct cstep *st = &r->side[s]->s[r->side[s]->use[i]];
			uint64_t d = st->dur > st->tracer ? st->dur - st->tracer : 1;

			lo = d < lo ? d : lo;
			hi = d > hi ? d : hi;
		}
	if (!hi)
		return;
	lx0 = log10((double)(lo ? lo : 1)) - 0.02;
	lx1 = log10((double)hi) + 0.02;
	fputs("<h2>Step time distribution</h2>\n<svg id=\"dist\" width=\"800\" height=\"300\" "
	      "viewBox=\"0 0 800 300\" role=\"img\" aria-label=\"share of steps at or under each "
	      "step time\">\n<rect x=\"60\" y=\"20\" width=\"700\" height=\"240\" class=\"frame\"/>\n", f);
	for (int k = 0; k <= 4; k++) {
		double x = lx0 + (lx1 - lx0) * k / 4;

		fprintf(f, "<text x=\"%.1f\" y=\"280\" class=\"tick\">%s</text>\n", 60 + 700.0 * k / 4,
			ms(a, sizeof(a), pow(10, x)));
	}
	fputs("<text x=\"55\" y=\"24\" class=\"tick r\">100%</text><text x=\"55\" y=\"264\" "
	      "class=\"tick r\">0%</text>\n", f);
	h_curve(f, r->side[0], lx0, lx1, "base");
	h_curve(f, r->side[1], lx0, lx1, "new");
	fputs("<text x=\"70\" y=\"40\" class=\"lg base\">BASE</text><text x=\"70\" y=\"56\" "
	      "class=\"lg new\">NEW</text>\n</svg>\n<p class=\"note\">Share of the steps compared at "
	      "or under each step time (less the tracer's cost), log scale: a curve to the right "
	      "is slower.</p>\n", f);
}

static void html_out(const struct result *r, FILE *f)
{
	char a[32], b[32], c[32];

	fputs("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	      "<meta name=\"viewport\" content=\"width=device-width\">\n<title>stepblame compare"
	      "</title>\n<style>\nbody{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}"
	      "table{border-collapse:collapse;margin:8px 0 16px}td,th{padding:3px 10px;text-align:"
	      "right;border-bottom:1px solid #ddd}th{background:#f3f3f3}td.l,th.l{text-align:left}"
	      ".slower{color:#b00020;font-weight:600}.faster{color:#137333}.verdict{font-size:16px;"
	      "padding:8px 12px;background:#f6f6f6;border-left:4px solid #888}.verdict.slower{"
	      "border-color:#b00020}.frame{fill:none;stroke:#bbb}.tick{font-size:11px;fill:#555}"
	      ".tick.r{text-anchor:end}polyline{fill:none;stroke-width:2}polyline.base,.lg.base{"
	      "stroke:#4a6fa5;fill:#4a6fa5}polyline.new,.lg.new{stroke:#e07b00;fill:#e07b00}"
	      "polyline.base,polyline.new{fill:none}.note{color:#666;font-size:12px}code{font-size:"
	      "13px}\n</style></head><body>\n<h1>stepblame compare</h1>\n<p>BASE <code>", f);
	h_esc(f, r->side[0]->path);
	fprintf(f, "</code> (%s), NEW <code>", r->side[0]->kind);
	h_esc(f, r->side[1]->path);
	fprintf(f, "</code> (%s): %zu and %zu steps compared (%s; warm-up left out: %" PRIu64
		" and %" PRIu64 ").</p>\n", r->side[1]->kind, r->side[0]->nuse, r->side[1]->nuse,
		r->c.aligned ? "the step numbers both have" : "all steady steps of each",
		r->side[0]->warmup, r->side[1]->warmup);
	fprintf(f, "<p id=\"verdict\" class=\"verdict%s\">", slower(r) ? " slower" : "");
	if (slower(r)) {
		slower_phrase(r, f);
	} else {
		fputs("No regression beyond noise at P50, the mean or P99", f);
	}
	if (gate_failed(r))
		fputs(" &mdash; the --fail-over gate fails", f);
	fputs("</p>\n<h2>Step time, less the tracer's cost</h2>\n<table id=\"stats\"><tr><th class=\"l\">"
	      "</th><th>BASE</th><th>NEW</th><th>NEW/BASE</th><th>95% interval</th><th class=\"l\">"
	      "verdict</th><th class=\"l\">--fail-over</th></tr>\n", f);
	for (int k = 0; k < NPCT; k++) {
		const struct pct_cmp *p = &r->c.p[k];
		const char *v = k == NPCT - 1 ? "one step: no interval" : p->verdict > 0 ? "slower" :
				p->verdict < 0 ? "faster" : "no change beyond noise";

		fprintf(f, "<tr><td class=\"l\">%s</td><td>%s</td><td>%s</td><td>%.3f</td><td>",
			pct_names[k], ms(a, sizeof(a), (double)p->base), ms(b, sizeof(b), (double)p->new),
			p->ratio);
		if (k < NPCT - 1)
			fprintf(f, "%.3f &ndash; %.3f", p->lo, p->hi);
		fprintf(f, "</td><td class=\"l%s\">%s</td><td class=\"l\">%s</td></tr>\n",
			p->verdict > 0 && k < NPCT - 1 ? " slower" : p->verdict < 0 && k < NPCT - 1 ?
			" faster" : "", v, r->fail_pct[k] < 0 ? "" : r->failed[k] ? "fails" : "passes");
	}
	fprintf(f, "</table>\n<p class=\"note\">Bootstrap of %" PRIu64 " resamples; a change under "
		"%.3g%% is none. Tracer's median cost per step: %s in BASE, %s in NEW.</p>\n",
		r->c.resamples, 100 * r->min_change, ms(a, sizeof(a), (double)r->tracer_med[0]),
		ms(b, sizeof(b), (double)r->tracer_med[1]));
	h_dist(f, r);
	fputs("<h2>Causes, per step compared</h2>\n<table id=\"causes\"><tr><th class=\"l\">cause"
	      "</th><th>median BASE</th><th>median NEW</th><th>mean BASE</th><th>mean NEW</th>"
	      "<th>change in tail steps</th></tr>\n", f);
	for (int k = 0; k < ENG_NCAUSE; k++) {
		const struct cause_cmp *x = &r->cc[k];

		if (!x->mean[0] && !x->mean[1])
			continue;
		fprintf(f, "<tr%s><td class=\"l\">%s</td><td>%s</td><td>%s</td><td>%s</td>",
			k == r->worst ? " class=\"slower\"" : "", eng_cause_name(k),
			ms(a, sizeof(a), (double)x->med[0]), ms(b, sizeof(b), (double)x->med[1]),
			ms(c, sizeof(c), x->mean[0]));
		fprintf(f, "<td>%s</td>", ms(a, sizeof(a), x->mean[1]));
		fprintf(f, "<td>%s</td></tr>\n", signed_ms(b, sizeof(b), x->tail_mean[1] - x->tail_mean[0]));
	}
	fputs("</table>\n<h2>Interferers</h2>\n<ul id=\"interferers\">\n", f);
	for (int s = 0; s < 2; s++) {
		const struct citf *x = s ? r->vanished : r->appeared;
		int nx = s ? r->nvanished : r->nappeared;

		for (int i = 0; i < nx; i++) {
			fprintf(f, "<li>%s: <code>", s ? "vanished" : "appeared");
			h_esc(f, x[i].comm);
			fprintf(f, "</code> (%s in %s)</li>\n", ms(a, sizeof(a), (double)x[i].ns),
				s ? "BASE" : "NEW");
		}
	}
	if (!r->nappeared && !r->nvanished)
		fputs("<li>the same in both: none appeared or vanished</li>\n", f);
	fputs("</ul>\n<h2>Tail episodes in NEW that BASE has not</h2>\n<table id=\"episodes\"><tr>"
	      "<th class=\"l\">steps</th><th>over the median</th><th class=\"l\">top cause</th>"
	      "<th class=\"l\">culprit</th></tr>\n", f);
	for (size_t i = 0; i < r->nep_new && i < 200; i++) {
		const struct episode *e = &r->ep_new[i];

		if (e->nsteps == 1)
			fprintf(f, "<tr><td class=\"l\">%" PRIu64 "</td>", e->first);
		else
			fprintf(f, "<tr><td class=\"l\">%" PRIu64 "&ndash;%" PRIu64 "</td>", e->first,
				e->last);
		fprintf(f, "<td>%s</td><td class=\"l\">%s</td><td class=\"l\">",
			ms(a, sizeof(a), (double)e->over_ns),
			e->cause >= 0 ? eng_cause_name(e->cause) : "none");
		h_esc(f, e->culprit);
		fputs("</td></tr>\n", f);
	}
	fputs("</table>\n", f);
	if (r->nep_new > 200)
		fprintf(f, "<p class=\"note\">... and %zu more (--format json lists them)</p>\n",
			r->nep_new - 200);
	fputs("</body></html>\n", f);
}

/* ---- the command ---- */

static const char usage[] =
"usage: stepblame compare BASE NEW [--skip N] [--fail-over PCT] [--min-change PCT]\n"
"                         [--format text|json|html] [-o OUT]\n"
"\n"
"What got slower between two runs of one trainer, and why. BASE and NEW are each a\n"
"trace (stepblame record/run) or a JSON report (stepblame report --format json, maybe\n"
".gz). The warm-up is left out, the steps are aligned by number, and P50, P90, P99,\n"
"the mean and the max of each run, less the tracer's own estimated cost in each\n"
"step, are given with the ratio NEW/BASE and its 95% confidence interval (a\n"
"bootstrap over the steps): a change inside the interval is noise, not a regression.\n"
"Then, per cause, the median and mean time per step in each run; the interferers\n"
"that appeared or vanished; the tail episodes new in NEW; the tracer's own cost in\n"
"each, so that a change of tracer cost is not read as the trainer's.\n"
"\n";

enum { OPT_SKIP = 256, OPT_FAIL, OPT_MIN, OPT_LAG };

static const struct opt options[] = {
	{ "skip", OPT_SKIP, "N", "leave out the first N complete steps of each run (default:\n"
	  "the first, and those after it over the run's tail threshold)" },
	{ "fail-over", OPT_FAIL, "PCT",
	  "a CI gate: exit 3 when NEW is slower than BASE by more than\n"
	  "PCT percent at P50, the mean or P99 beyond the interval (its\n"
	  "lower bound over 1 + PCT/100): the mean catches a slow step\n"
	  "that became more frequent, which P99 over few steps may not. p50=PCT, p90=PCT, p99=PCT, mean=PCT\n"
	  "gate one statistic; comma-separated, several" },
	{ "min-change", OPT_MIN, "PCT", "a change smaller than PCT percent is not called slower or\n"
	  "faster even when its interval excludes none (default 3:\n"
	  "two runs of one configuration on a shared machine differ by\n"
	  "up to 2% at P50, with intervals that exclude 1)" },
	{ "format", 'f', "FMT", "text (default), json (schemas/report.md, \"Compare\") or html\n"
	  "(one page: the tables and both step-time distributions;\n"
	  "the default when OUT ends in .html)" },
	{ "output", 'o', "OUT", "write there (atomically) instead of standard output" },
	{ "lag", OPT_LAG, "SEC", "for traces: how late GPU records may arrive (default 3)" },
	{ "help", 'h', NULL, "this help" },
	{ 0 }
};

static const char usage_tail[] =
"\n"
"Exit status: 0, 3 when --fail-over is passed, 1 on an error, 2 on bad usage.\n"
"\n"
"  stepblame compare yesterday.json today.sbtrace\n"
"  stepblame compare base.json new.json --fail-over 5   # CI: P50, mean or P99 +5%\n"
"  stepblame compare base.json new.json --fail-over p99=10 -f json -o cmp.json\n"
"  stepblame compare base.json new.json -o cmp.html       # a page for a browser\n"
"\n"
"A CI job, step by step: docs/CI.md.\n";

static int parse_fail(const char *s, double pct[NPCT])
{
	char buf[128], *save = NULL, *tok;

	if (strlen(s) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '='), *end;
		const char *val = eq ? eq + 1 : tok;
		double v = strtod(val, &end);

		if (end == val || *end || !(v >= 0) || v > 1000)
			return -1;
		if (!eq) {
			pct[S_P50] = pct[S_MEAN] = pct[S_P99] = v;
			continue;
		}
		*eq = 0;
		int k;

		for (k = 0; k < NPCT - 1 && strcmp(tok, pct_names[k]); k++)
			;
		if (k == NPCT - 1)
			return -1;
		pct[k] = v;
	}
	return 0;
}

int cmd_compare(int argc, char **argv)
{
	struct engine_opts eo = { 0 };
	struct run side[2] = { 0 };
	struct result res = { .side = { &side[0], &side[1] }, .worst = -1 };
	struct episode *epb = NULL, *epn = NULL;
	struct sb_stream out = { 0 };
	const char *outp = NULL;
	int fmt = 0; /* 0 text, 1 json, 2 html */
	bool fmt_given = false;
	int64_t skip = -1;
	double min_change = 3;
	struct opts_getopt g;
	int c, rc = 1;

	for (int k = 0; k < NPCT; k++)
		res.fail_pct[k] = -1;
	opts_getopt_init(&g, options, ":");
	optind = 0;
	opterr = 0;
	while ((c = opts_next(&g, argc, argv)) != -1) {
		switch (c) {
		case OPT_SKIP: {
			char *end;
			long long v = strtoll(optarg, &end, 10);

			if (end == optarg || *end || v < 0) {
				sb_err("compare: --skip wants a number of steps, not '%s'", optarg);
				return 2;
			}
			skip = v;
			break;
		}
		case OPT_MIN: {
			char *end;

			min_change = strtod(optarg, &end);
			if (end == optarg || *end || !(min_change >= 0) || min_change > 100) {
				sb_err("compare: --min-change wants a percentage (0-100), not '%s'", optarg);
				return 2;
			}
			break;
		}
		case OPT_FAIL:
			if (parse_fail(optarg, res.fail_pct)) {
				sb_err("compare: --fail-over wants PCT or p50=PCT,p99=PCT (0-1000), not '%s'",
				       optarg);
				return 2;
			}
			break;
		case 'f':
			fmt_given = true;
			if (!strcmp(optarg, "json"))
				fmt = 1;
			else if (!strcmp(optarg, "html"))
				fmt = 2;
			else if (!strcmp(optarg, "text"))
				fmt = 0;
			else {
				sb_err("compare: unknown format '%s' (text, json, html)", optarg);
				return 2;
			}
			break;
		case 'o':
			outp = optarg;
			break;
		case OPT_LAG:
			if (report_parse_lag("compare", optarg, &eo))
				return 2;
			break;
		case 'h':
			fputs(usage, stdout);
			opts_help(stdout, options, 24, 0);
			fputs(usage_tail, stdout);
			return 0;
		case ':':
			sb_err("compare: %s needs a value (see stepblame compare --help)",
			       argv[optind - 1]);
			return 2;
		default:
			sb_err("compare: unknown option '%s' (see stepblame compare --help)",
			       argv[optind - 1]);
			return 2;
		}
	}
	if (!fmt_given && outp && str_ends_with(outp, ".html"))
		fmt = 2;
	if (argc - optind != 2) {
		sb_err("compare: two runs, BASE and NEW: stepblame compare BASE NEW (see --help)");
		return 2;
	}
	for (int s = 0; s < 2; s++) {
		if (run_load(&side[s], argv[optind + s], &eo))
			goto done;
		side[s].warmup = skip >= 0 ? (uint64_t)skip : warmup_of(&side[s]);
		if (side[s].warmup >= side[s].n) {
			sb_err("compare: %s: %zu complete steps, none left after %" PRIu64
			       " of warm-up", side[s].path, side[s].n, side[s].warmup);
			goto done;
		}
	}
	if (align(&side[0], &side[1], &res.c.aligned) || bootstrap(&side[0], &side[1], &res.c, min_change / 100) ||
	    causes((const struct run *[2]){ &side[0], &side[1] }, res.cc, res.tracer_med)) {
		sb_err("compare: out of memory");
		goto done;
	}
	res.min_change = min_change / 100;
	res.c.base_ratio_p99_p50 = ratio(res.c.p[S_P99].base, res.c.p[S_P50].base);
	res.c.new_ratio_p99_p50 = ratio(res.c.p[S_P99].new, res.c.p[S_P50].new);
	{
		double most = 0;

		for (int k = 0; k < ENG_NCAUSE; k++) {
			double d = res.cc[k].mean[1] - res.cc[k].mean[0];

			if (k != ENG_TRACER && d > most) {
				most = d;
				res.worst = k;
			}
		}
	}
	interferers(&res);
	epb = calloc(side[0].nuse + 1, sizeof(*epb));
	epn = calloc(side[1].nuse + 1, sizeof(*epn));
	if (!epb || !epn) {
		sb_err("compare: out of memory");
		goto done;
	}
	{
		size_t nb = episodes(&side[0], epb, side[0].nuse + 1, res.c.p[0].base);
		size_t nn = episodes(&side[1], epn, side[1].nuse + 1, res.c.p[0].new);

		res.nep_total = nn;
		for (size_t i = 0; i < nn; i++)
			if (episode_new(&epn[i], epb, nb))
				epn[res.nep_new++] = epn[i];
		qsort(epn, res.nep_new, sizeof(*epn), ep_over_cmp);
		res.ep_new = epn;
	}
	for (int k = 0; k < NPCT - 1; k++)
		res.failed[k] = res.fail_pct[k] >= 0 && res.c.p[k].lo > 1 + res.fail_pct[k] / 100;
	if (sb_stream_open(&out, outp))
		goto done;
	if (fmt == 1)
		json_out(&res, out.f);
	else if (fmt == 2)
		html_out(&res, out.f);
	else
		text_out(&res, out.f);
	if (sb_stream_close(&out, !ferror(out.f), "the comparison"))
		goto done;
	rc = gate_failed(&res) ? EXIT_REGRESSION : 0;
done:
	if (out.f)
		sb_stream_close(&out, false, "the comparison");
	for (int s = 0; s < 2; s++) {
		free(side[s].s);
		free(side[s].use);
	}
	free(epb);
	free(epn);
	return rc;
}
