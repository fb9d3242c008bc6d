// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Summaries: percentiles, MAD and the tail, dips, per-step excess over the
 * medians, interferers. Exact over the steps kept; in window mode over all
 * steps from log histograms. They read results only; engine_finish stores the
 * final judgement.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"

#define LIVE_WINDOW 1024

static uint32_t hist_index(uint64_t v)
{
	int x;

	if (v < HIST_SUB)
		return (uint32_t)v;
	x = 63 - __builtin_clzll(v);
	return (uint32_t)(HIST_SUB + (x - HIST_SHIFT) * HIST_SUB +
			  ((v >> (x - HIST_SHIFT)) & (HIST_SUB - 1)));
}

/* the middle of bucket i */
static uint64_t hist_middle(uint32_t i)
{
	uint32_t oct, m;

	if (i < HIST_SUB)
		return i;
	oct = (i - HIST_SUB) / HIST_SUB;
	m = (i - HIST_SUB) % HIST_SUB;
	return ((uint64_t)(HIST_SUB + m) << oct) + ((1ull << oct) >> 1);
}

static void hist_add(struct hist *h, uint64_t v)
{
	h->b[hist_index(v)]++;
	h->n++;
}

/* nearest rank num/den, as rank_pct() over the values */
static uint64_t hist_percentile(const struct hist *h, uint64_t num, uint64_t den)
{
	uint64_t k, run = 0;

	if (!h->n)
		return 0;
	k = (num * h->n + den - 1) / den;
	k = k < 1 ? 1 : k > h->n ? h->n : k;
	for (uint32_t i = 0; i < HIST_N; i++) {
		run += h->b[i];
		if (run >= k)
			return hist_middle(i);
	}
	return hist_middle(HIST_N - 1);
}

struct hist_deviation {
	uint64_t dev, n;
};

static int hist_deviation_cmp(const void *a, const void *b)
{
	const struct hist_deviation *x = a, *y = b;

	return x->dev < y->dev ? -1 : x->dev > y->dev;
}

/* median absolute deviation from med, as mad_of() over the values */
static uint64_t hist_mad(const struct hist *h, uint64_t med)
{
	struct hist_deviation *d = calloc(HIST_N, sizeof(*d));
	uint64_t n = 0, k, run = 0, r = 0;

	if (!d || !h->n) {
		free(d);
		return 0;
	}
	for (uint32_t i = 0; i < HIST_N; i++) {
		uint64_t m = hist_middle(i);

		if (h->b[i])
			d[n++] = (struct hist_deviation){ m > med ? m - med : med - m, h->b[i] };
	}
	qsort(d, n, sizeof(*d), hist_deviation_cmp);
	k = (h->n + 1) / 2;
	for (uint64_t i = 0; i < n; i++) {
		run += d[i].n;
		if (run >= k) {
			r = d[i].dev;
			break;
		}
	}
	free(d);
	return r;
}

/* values over thr */
static uint64_t hist_above(const struct hist *h, uint64_t thr)
{
	uint64_t n = 0;

	for (uint32_t i = hist_index(thr); i < HIST_N; i++)
		if (hist_middle(i) > thr)
			n += h->b[i];
	return n;
}

/*
 * What the tail judgement weighs (docs/ARCHITECTURE.md, "Blame model"): the
 * step's duration less the tracer time blamed in it, so that a step slow only
 * because of the probes is never a tail step; and less as much again of its
 * alloc time: in the target the traps cost up to twice what the cost model
 * measured on the agent's own function, and that rest sits in the calls'
 * measured time (alloc), where it cannot be told from the calls' own.
 */
static uint64_t judged_ns(const struct eng_step *r)
{
	uint64_t tr = r->cause_ns[ENG_TRACER];

	tr += min64(tr, r->cause_ns[ENG_ALLOC]);
	return r->duration_ns > tr ? r->duration_ns - tr : 0;
}

static uint64_t step_ppm(const struct eng_step *r)
{
	return r->duration_ns ? r->tracer_ns * 1000000 / r->duration_ns : 0;
}

static void hist_sub(struct hist *h, uint64_t v)
{
	uint32_t i = hist_index(v);

	if (h->b[i]) {
		h->b[i]--;
		h->n--;
	}
}

/* the lowest (hi false) or highest value bucket of h holds, as its middle */
static uint64_t hist_edge(const struct hist *h, bool hi)
{
	for (uint32_t k = 0; k < HIST_N; k++) {
		uint32_t i = hi ? HIST_N - 1 - k : k;

		if (h->b[i])
			return hist_middle(i);
	}
	return 0;
}

/*
 * A step whose GPU records were cut from the trace (eng_step.gpu_cut), or that
 * ended before the GPU records began (gpu_before), counts in no total: its GPU
 * busy time and blame are not known
 */
static bool in_totals(const struct eng_step *r)
{
	return !r->gpu_cut && !r->gpu_before;
}

/* a step into (d 1) or out of (d -1) the summaries over all steps (the figures summarise_range() takes) */
static void window_sums_apply(struct window_sums *w, const struct eng_step *r, int d)
{
	uint64_t m = (uint64_t)(int64_t)d;

	w->nsteps += m;
	if (in_totals(r)) {
		for (int c = 0; c < ENG_NCAUSE; c++)
			w->cause_total[c] += m * r->cause_ns[c];
		if (r->gpu_timeline) {
			w->busy_total += m * r->gpu_busy_ns;
			w->dur_total += m * r->duration_ns;
		}
	}
	w->tracer_total += m * r->tracer_ns;
	w->sampled += m * r->alloc_sampled;
	if (r->incomplete)
		return;
	if (d < 0) {
		/* the bounds as the histogram has them, where this step was one */
		w->ncomplete--;
		hist_sub(&w->dur, r->duration_ns);
		hist_sub(&w->judged, judged_ns(r));
		hist_sub(&w->idle, r->gpu_idle_ns);
		hist_sub(&w->tracer, r->tracer_ns);
		hist_sub(&w->tracer_ppm, step_ppm(r));
		for (int c = 0; c < ENG_NCAUSE; c++)
			hist_sub(&w->cause[c], r->cause_ns[c]);
		if (r->duration_ns == w->min)
			w->min = hist_edge(&w->dur, false);
		if (r->duration_ns == w->max)
			w->max = hist_edge(&w->dur, true);
		return;
	}
	if (!w->ncomplete++ || r->duration_ns < w->min)
		w->min = r->duration_ns;
	w->max = max64(w->max, r->duration_ns);
	hist_add(&w->dur, r->duration_ns);
	hist_add(&w->judged, judged_ns(r));
	hist_add(&w->idle, r->gpu_idle_ns);
	hist_add(&w->tracer, r->tracer_ns);
	hist_add(&w->tracer_ppm, step_ppm(r));
	w->tracer_ppm_max = max64(w->tracer_ppm_max, step_ppm(r));
	for (int c = 0; c < ENG_NCAUSE; c++)
		hist_add(&w->cause[c], r->cause_ns[c]);
}

void window_sums_add(struct window_sums *w, const struct eng_step *r)
{
	window_sums_apply(w, r, 1);
}

void window_sums_sub(struct window_sums *w, const struct eng_step *r)
{
	window_sums_apply(w, r, -1);
}

/* from now on keep the last `keep` steps in detail, summaries over all of them */
void window_begin(struct engine *e, uint64_t keep)
{
	e->keep_steps = max64(keep, LIVE_WINDOW);
	e->window_sums = heap_calloc(e, 1, sizeof(*e->window_sums));
	for (uint64_t i = first_kept(e); i < e->nresults; i++)
		window_sums_add(e->window_sums, RESULT(e, i));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* nearest-rank percentile num/den of sorted v[n] */
static uint64_t rank_pct(const uint64_t *v, uint64_t n, uint64_t num, uint64_t den)
{
	uint64_t k;

	if (!n)
		return 0;
	k = (num * n + den - 1) / den;
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

/* the k-th smallest of v[0..n), k < n: the value a sort would put at v[k] (v is reordered) */
static uint64_t kth_u64(uint64_t *v, uint64_t n, uint64_t k)
{
	uint64_t lo = 0, hi = n, rounds = 0;

	while (hi - lo > 16) {
		uint64_t a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi - 1], p, lt = lo, i = lo, gt = hi;

		/* median of three */
		p = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
		/* three ways: [lo, lt) < p, [lt, gt) == p, [gt, hi) > p */
		while (i < gt) {
			uint64_t x = v[i];

			if (x < p) {
				v[i++] = v[lt];
				v[lt++] = x;
			} else if (x > p) {
				v[i] = v[--gt];
				v[gt] = x;
			} else {
				i++;
			}
		}
		if (k < lt)
			hi = lt;
		else if (k >= gt)
			lo = gt;
		else
			return p;
		if (++rounds > 64) {
			/* an input that defeats the pivot: sort what is left */
			qsort(v + lo, hi - lo, sizeof(*v), cmp_u64);
			return v[k];
		}
	}
	for (uint64_t i = lo + 1; i < hi; i++)
		for (uint64_t j = i; j > lo && v[j - 1] > v[j]; j--) {
			uint64_t t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return v[k];
}

/* nearest rank, as rank_pct(sorted v, n, 1, 2); v is reordered */
static uint64_t median_of(uint64_t *v, uint64_t n)
{
	return n ? kth_u64(v, n, (n + 1) / 2 - 1) : 0;
}

static uint64_t mad_of(uint64_t *v, uint64_t n, uint64_t med)
{
	for (uint64_t i = 0; i < n; i++)
		v[i] = v[i] > med ? v[i] - med : med - v[i];
	return median_of(v, n);
}

/*
 * A run of identical steps has MAD 0, which would call every step 1 ns over
 * the median a tail: MAD is floored at 1% of the median.
 */
static uint64_t tail_threshold(uint64_t med, uint64_t mad)
{
	uint64_t floor = med / 100;

	return med + 3 * (mad > floor ? mad : floor);
}

static bool complete_step(const struct eng_step *s)
{
	return !s->incomplete;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void dips(const struct engine *e, uint64_t first, uint64_t last, struct eng_summary *s,
		 uint64_t *tmp)
{
	uint64_t n = 0, nd = 0, med_idle, mad_idle, med_dur, thr;
	uint64_t *idx;
	double *share;

	s->dip = ENG_DIP_UNKNOWN;
	s->dip_period = 0;
	s->ndips = 0;
	s->dip_busy_median = -1;
	for (uint64_t i = first; i < last; i++)
		if (complete_step(RESULT(e, i)) && RESULT(e, i)->gpu_timeline)
			tmp[n++] = RESULT(e, i)->gpu_idle_ns;
	if (!n)
		return;
	med_idle = median_of(tmp, n);
	mad_idle = mad_of(tmp, n, med_idle);
	n = 0;
	for (uint64_t i = first; i < last; i++)
		if (complete_step(RESULT(e, i)) && RESULT(e, i)->gpu_timeline)
			tmp[n++] = RESULT(e, i)->duration_ns;
	med_dur = median_of(tmp, n);
	thr = med_idle + 3 * (mad_idle > med_dur / 100 ? mad_idle : med_dur / 100);

	share = calloc(n, sizeof(*share));
	idx = calloc(n, sizeof(*idx));
	if (!share || !idx) {
		free(share);
		free(idx);
		return;
	}
	n = 0;
	for (uint64_t i = first; i < last; i++) {
		const struct eng_step *r = RESULT(e, i);

		if (!complete_step(r) || !r->gpu_timeline)
			continue;
		share[n++] = r->duration_ns ? (double)r->gpu_busy_ns / (double)r->duration_ns : 0;
		if (r->gpu_idle_ns > thr)
			idx[nd++] = r->index;
	}
	qsort(share, n, sizeof(*share), cmp_double);
	s->dip_busy_median = share[(n - 1) / 2];
	s->ndips = nd;
	if (nd >= 3) {
		/* the spacing K that pairs the most dips with a dip K steps away */
		uint64_t best_k = 0, best = 0, lim = nd < 1024 ? nd : 1024; /* quadratic below */

		for (uint64_t i = 1; i < lim; i++) {
			uint64_t k = idx[i] - idx[i - 1], score = 0;

			if (k < 2 || k == best_k)
				continue;
			for (uint64_t a = 0; a < lim; a++) {
				uint64_t want = idx[a] + k, lo = a + 1, hi = lim;

				while (lo < hi) {
					uint64_t m = (lo + hi) / 2;

					if (idx[m] < want)
						lo = m + 1;
					else
						hi = m;
				}
				bool fwd = lo < lim && idx[lo] == want;
				bool back = false;

				if (idx[a] >= k) {
					uint64_t w2 = idx[a] - k, l2 = 0, h2 = a;

					while (l2 < h2) {
						uint64_t m = (l2 + h2) / 2;

						if (idx[m] < w2)
							l2 = m + 1;
						else
							h2 = m;
					}
					back = l2 < a && idx[l2] == w2;
				}
				score += fwd || back;
			}
			if (score > best || (score == best && k < best_k)) {
				best = score;
				best_k = k;
			}
		}
		/* at least three dips paired, and two thirds of them */
		if (best >= 3 && best * 3 >= lim * 2) {
			s->dip = ENG_DIP_PERIODIC;
			s->dip_period = best_k;
		}
	}
	if (s->dip != ENG_DIP_PERIODIC) {
		/* under half busy in the median step: the host cannot feed the GPU */
		if (s->dip_busy_median < 0.5)
			s->dip = ENG_DIP_LOW;
		else
			s->dip = nd ? ENG_DIP_SPORADIC : ENG_DIP_NONE;
	}
	free(share);
	free(idx);
}

static void summarise_range(const struct engine *e, uint64_t first, uint64_t last,
			    struct eng_summary *s, bool with_dips)
{
	uint64_t n = 0, *v;

	memset(s, 0, sizeof(*s));
	s->gpu_busy_share = -1;
	s->nsteps = last - first;
	v = calloc(s->nsteps ? s->nsteps : 1, sizeof(*v));
	if (!v)
		return;
	for (uint64_t i = first; i < last; i++) {
		const struct eng_step *r = RESULT(e, i);

		if (in_totals(r)) {
			for (int c = 0; c < ENG_NCAUSE; c++)
				s->cause_total[c] += r->cause_ns[c];
			if (r->gpu_timeline) {
				s->busy_total += r->gpu_busy_ns;
				s->dur_total += r->duration_ns;
			}
		}
		if (complete_step(r))
			v[n++] = r->duration_ns;
	}
	if (s->dur_total)
		s->gpu_busy_share = (double)s->busy_total / (double)s->dur_total;
	s->ncomplete = n;
	if (n) {
		qsort(v, n, sizeof(*v), cmp_u64);
		s->min = v[0];
		s->max = v[n - 1];
		s->p50 = rank_pct(v, n, 50, 100);
		s->p90 = rank_pct(v, n, 90, 100);
		s->p99 = rank_pct(v, n, 99, 100);
		s->p999 = rank_pct(v, n, 999, 1000);
		s->p99_over_p50 = s->p50 ? (double)s->p99 / (double)s->p50 : 0;
		s->mad = mad_of(v, n, s->p50);
		s->tail_threshold_ns = tail_threshold(s->p50, s->mad);
		for (int c = 0; c < ENG_NCAUSE; c++) {
			uint64_t k = 0;

			for (uint64_t i = first; i < last; i++)
				if (complete_step(RESULT(e, i)))
					v[k++] = RESULT(e, i)->cause_ns[c];
			s->cause_median[c] = median_of(v, k);
		}
		uint64_t k = 0;

		for (uint64_t i = first; i < last; i++)
			if (complete_step(RESULT(e, i)))
				v[k++] = RESULT(e, i)->gpu_idle_ns;
		s->idle_median = median_of(v, k);
	}
	if (n) {
		uint64_t k = 0;

		for (uint64_t i = first; i < last; i++)
			if (complete_step(RESULT(e, i)))
				v[k++] = RESULT(e, i)->tracer_ns;
		s->tracer_median_ns = median_of(v, k);
		k = 0;
		for (uint64_t i = first; i < last; i++) {
			const struct eng_step *r = RESULT(e, i);

			if (complete_step(r))
				v[k++] = r->duration_ns ? r->tracer_ns * 1000000 / r->duration_ns : 0;
		}
		qsort(v, k, sizeof(*v), cmp_u64);
		s->tracer_p50_ppm = rank_pct(v, k, 50, 100);
		s->tracer_p99_ppm = rank_pct(v, k, 99, 100);
		s->tracer_max_ppm = v[k - 1];
	}
	for (uint64_t i = first; i < last; i++) {
		const struct eng_step *r = RESULT(e, i);

		s->tracer_total_ns += r->tracer_ns;
		s->sampled_steps += r->alloc_sampled;
		s->ntail += n && complete_step(r) && judged_ns(r) > s->tail_threshold_ns;
	}
	if (with_dips)
		dips(e, first, last, s, v);
	else
		s->dip = ENG_DIP_UNKNOWN, s->dip_busy_median = -1;
	free(v);
}

/* live only: judge a step against the last LIVE_WINDOW steps */
void running_tail(struct engine *e, struct eng_step *r)
{
	uint64_t first = e->nresults > LIVE_WINDOW ? e->nresults - LIVE_WINDOW : 0, n = 0, med, mad;
	uint64_t v[LIVE_WINDOW];

	r->tail = false;
	if (r->incomplete || !e->step_cb)
		return;
	for (uint64_t i = first; i < e->nresults; i++)
		if (complete_step(RESULT(e, i)))
			v[n++] = RESULT(e, i)->duration_ns;
	if (n < 3)
		return;
	med = median_of(v, n);
	mad = mad_of(v, n, med);
	r->tail = judged_ns(r) > tail_threshold(med, mad);
}

/*
 * Window mode, once steps have been dropped: the figures over all steps from
 * the running summaries, the tail flags and dips over the steps kept.
 */
static void summarise_window(const struct engine *e, struct eng_summary *s)
{
	const struct window_sums *w = e->window_sums;
	uint64_t first = first_kept(e), *v;

	memset(s, 0, sizeof(*s));
	s->gpu_busy_share = -1;
	s->nsteps = w->nsteps;
	s->ncomplete = w->ncomplete;
	memcpy(s->cause_total, w->cause_total, sizeof(s->cause_total));
	s->busy_total = w->busy_total;
	s->dur_total = w->dur_total;
	if (s->dur_total)
		s->gpu_busy_share = (double)s->busy_total / (double)s->dur_total;
	s->tracer_total_ns = w->tracer_total;
	s->sampled_steps = w->sampled;
	if (w->ncomplete) {
		uint64_t *p[] = { &s->p50, &s->p90, &s->p99, &s->p999 };
		const uint64_t num[] = { 50, 90, 99, 999 }, den[] = { 100, 100, 100, 1000 };

		s->min = w->min;
		s->max = w->max;
		for (int i = 0; i < 4; i++)
			*p[i] = min64(max64(hist_percentile(&w->dur, num[i], den[i]), w->min), w->max);
		s->p99_over_p50 = s->p50 ? (double)s->p99 / (double)s->p50 : 0;
		s->mad = hist_mad(&w->dur, s->p50);
		s->tail_threshold_ns = tail_threshold(s->p50, s->mad);
		s->ntail = hist_above(&w->judged, s->tail_threshold_ns);
		for (int c = 0; c < ENG_NCAUSE; c++)
			s->cause_median[c] = hist_percentile(&w->cause[c], 50, 100);
		s->idle_median = hist_percentile(&w->idle, 50, 100);
		s->tracer_median_ns = hist_percentile(&w->tracer, 50, 100);
		s->tracer_p50_ppm = hist_percentile(&w->tracer_ppm, 50, 100);
		s->tracer_p99_ppm = hist_percentile(&w->tracer_ppm, 99, 100);
		s->tracer_max_ppm = w->tracer_ppm_max;
	}
	v = calloc(e->nresults - first + 1, sizeof(*v));
	if (v)
		dips(e, first, e->nresults, s, v);
	free(v);
	s->windowed = true;
	s->first_kept = first;
	s->pct_error = 1.0 / (2 * HIST_SUB);
}

/*
 * The summary over all steps: in window mode, once steps have been dropped,
 * from the running summaries (the tail flags and dips over the steps kept).
 */
void summarise_all(const struct engine *e, struct eng_summary *s)
{
	if (e->window_sums && e->first_chunk)
		summarise_window(e, s);
	else
		summarise_range(e, 0, e->nresults, s, true);
}

/* the final judgement, into the steps kept (engine_finish) */
void mark_tails(struct engine *e, const struct eng_summary *s)
{
	for (uint64_t i = first_kept(e); i < e->nresults; i++) {
		struct eng_step *r = RESULT(e, i);

		r->tail = s->ncomplete && complete_step(r) && judged_ns(r) > s->tail_threshold_ns;
	}
}

void engine_summarise(const struct engine *e, struct eng_summary *s)
{
	if (e->finished)
		*s = e->final_summary;
	else
		summarise_all(e, s);
}

/*
 * Over the last LIVE_WINDOW steps, taken again once 1/16 of them are new (at
 * most every 16 steps): the medians of a thousand steps move little from one
 * step to the next, and sorting them for every step was most of a watch
 * agent's time. No dips: the per-step lines and top do not show them.
 */
void engine_running_summary(const struct engine *e, struct eng_summary *s)
{
	struct running_cache *c = e->running;
	uint64_t n = e->nresults, every = n < LIVE_WINDOW ? n / 16 : LIVE_WINDOW / 16;

	if (c && c->at && n >= c->at && n - c->at < (every ? every : 1)) {
		*s = c->sum;
		return;
	}
	summarise_range(e, n > LIVE_WINDOW ? n - LIVE_WINDOW : 0, n, s, false);
	if (!c)
		return;
	c->sum = *s;
	c->at = n;
}

/* x's culprit: the step's biggest for the cause (a crowd of one name is one entry: eng_blame.processes) */
static void excess_culprit(const struct eng_step *st, struct eng_excess *x)
{
	for (uint32_t i = 0; i < st->nblame; i++)
		if (st->blame[i].cause == x->cause && st->blame[i].has_who) {
			x->has_who = true;
			x->who = st->blame[i].who;
			x->processes = st->blame[i].processes;
			return;
		}
}

int engine_step_excess(const struct engine *e, const struct eng_step *st,
		       const struct eng_summary *s, struct eng_excess *out, int max)
{
	int n = 0;

	(void)e;
	for (int c = 0; c < ENG_NCAUSE && n < max; c++) {
		uint64_t med = s->cause_median[c], v = st->cause_ns[c];

		/* the probes' cost in place, as the tail judgement weighs it (judged_ns) */
		if (c == ENG_ALLOC)
			v -= min64(v, st->cause_ns[ENG_TRACER]);
		/* the tracer's own time explains no step (docs/ARCHITECTURE.md, "Blame model") */
		if (c == ENG_TRACER || v <= med)
			continue;
		memset(&out[n], 0, sizeof(out[n]));
		out[n].cause = (uint8_t)c;
		out[n].ns = v - med;
		excess_culprit(st, &out[n]);
		n++;
	}
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && (out[j - 1].ns < out[j].ns ||
					  (out[j - 1].ns == out[j].ns && out[j - 1].cause > out[j].cause));
		     j--) {
			struct eng_excess t = out[j];

			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	return n;
}

static int interferer_cmp(const void *a, const void *b)
{
	const struct eng_interferer *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns > y->ns ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return strcmp(x->comm, y->comm);
}

static int irq_cmp(const void *a, const void *b)
{
	const struct eng_irq *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns > y->ns ? -1 : 1;
	if (x->cpu != y->cpu)
		return x->cpu < y->cpu ? -1 : 1;
	return strcmp(x->name, y->name);
}

int engine_irq_totals(const struct engine *e, struct eng_irq *out, int max)
{
	struct eng_irq all[ENG_IRQ_TOTALS_MAX];
	int n = 0;

	for (uint32_t i = 0; i < e->nirq_totals; i++)
		if (e->irq_totals[i].ns)
			all[n++] = e->irq_totals[i];
	qsort(all, (size_t)n, sizeof(all[0]), irq_cmp);
	if (n > max)
		n = max > 0 ? max : 0;
	memcpy(out, all, (size_t)n * sizeof(all[0]));
	return n;
}

int engine_interferers(const struct engine *e, struct eng_interferer *out, int max)
{
	struct eng_interferer *all;
	uint32_t n = 0;
	int k;

	if (!e->ninterferers || max <= 0)
		return 0;
	all = calloc(e->ninterferers, sizeof(*all));
	if (!all)
		return 0;
	for (uint32_t i = 0; i < e->interferers_cap; i++) {
		const struct interferer *x = &e->interferers[i];

		if (!x->used || !x->ns)
			continue;
		all[n].pid = x->pid;
		memcpy(all[n].comm, x->comm, sizeof(all[n].comm));
		all[n].ns = x->ns;
		all[n].own = e->target_pid && x->pid == e->target_pid;
		all[n].tracer = e->identity.agent_pid && x->pid == e->identity.agent_pid;
		all[n].realtime = x->realtime;
		n++;
	}
	qsort(all, n, sizeof(*all), interferer_cmp);
	k = (int)n < max ? (int)n : max;
	memcpy(out, all, k * sizeof(*all));
	free(all);
	return k;
}

static int itf_pid_cmp(const void *a, const void *b)
{
	const struct eng_interferer *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->ns != y->ns)
		return x->ns > y->ns ? -1 : 1;
	return strcmp(x->comm, y->comm);
}

static int group_name_cmp(const void *a, const void *b)
{
	const struct eng_interferer_group *x = a, *y = b;
	int c = strcmp(x->comm, y->comm);

	if (c)
		return c;
	if (x->ns != y->ns)
		return x->ns > y->ns ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static int group_ns_cmp(const void *a, const void *b)
{
	const struct eng_interferer_group *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns > y->ns ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return strcmp(x->comm, y->comm);
}

/* name, one of g's other names (after its own), where not already one */
static void group_name_add(struct eng_interferer_group *g, const char *name)
{
	if (!strcmp(g->comm, name))
		return;
	for (uint32_t k = 0; k < g->nnames && k < ENG_GROUP_NAMES; k++)
		if (!strcmp(g->names[k], name))
			return;
	if (g->nnames < ENG_GROUP_NAMES)
		memcpy(g->names[g->nnames], name, sizeof(g->names[0]));
	g->nnames++;
}

/* may g be merged with the other processes of its name? */
static bool group_by_name(const struct engine *e, const struct eng_interferer_group *g)
{
	return g->processes == 1 && proc_groups_by_name(e, g->pid);
}

int engine_interferer_groups(const struct engine *e, struct eng_interferer_group *out, int max)
{
	struct eng_interferer *all;
	struct eng_interferer_group *g;
	int n, ng = 0, m = 0, k;

	if (!e->ninterferers || max <= 0)
		return 0;
	all = calloc(e->ninterferers, sizeof(*all));
	g = calloc(e->ninterferers, sizeof(*g));
	if (!all || !g) {
		free(all);
		free(g);
		return 0;
	}
	n = engine_interferers(e, all, (int)e->ninterferers);
	/* the entries of one process, its names most time first */
	qsort(all, n, sizeof(*all), itf_pid_cmp);
	for (int i = 0; i < n; i++) {
		const struct eng_interferer *x = &all[i];
		struct eng_interferer_group *last = ng ? &g[ng - 1] : NULL;

		/* the target's threads and the recorder's stay as they are: which thread is the news */
		if (last && x->pid && last->pid == x->pid && !x->own && !x->tracer && !last->own &&
		    !last->tracer) {
			last->ns = sat_add(last->ns, x->ns);
			last->realtime = last->realtime || x->realtime;
			group_name_add(last, x->comm);
			continue;
		}
		g[ng] = (struct eng_interferer_group){ .pid = x->pid, .processes = 1, .ns = x->ns,
						       .own = x->own, .tracer = x->tracer,
						       .realtime = x->realtime };
		memcpy(g[ng].comm, x->comm, sizeof(g[ng].comm));
		ng++;
	}
	/* the processes of one name that nothing tells apart */
	qsort(g, ng, sizeof(*g), group_name_cmp);
	for (int i = 0; i < ng; i++) {
		struct eng_interferer_group *last = m ? &g[m - 1] : NULL;

		if (last && !strcmp(last->comm, g[i].comm) && group_by_name(e, &g[i]) &&
		    (last->processes > 1 || group_by_name(e, last))) {
			last->ns = sat_add(last->ns, g[i].ns);
			last->realtime = last->realtime || g[i].realtime;
			last->processes++;
			last->pid = 0;
			for (uint32_t j = 0; j < g[i].nnames && j < ENG_GROUP_NAMES; j++)
				group_name_add(last, g[i].names[j]);
			continue;
		}
		g[m++] = g[i];
	}
	qsort(g, m, sizeof(*g), group_ns_cmp);
	k = m < max ? m : max;
	memcpy(out, g, k * sizeof(*g));
	free(all);
	free(g);
	return k;
}
