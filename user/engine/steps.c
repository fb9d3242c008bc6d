// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Steps: marks from the step sources (docs/ARCHITECTURE.md, "Step sources")
 * begin and end them; the pieces of GPU idle in each are committed to the
 * thread that ended the gap, and a step is finalised into a result slot once
 * all of its pieces are. Also the candidates and the interferer table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"
#include "base/util.h"

#define ITF_MAX 65536

/*
 * A step's blame entries, kept with those of the other steps of its chunk: a
 * step holds only as many as it has, and they go when the chunk goes.
 */
static const struct eng_blame *blame_store(struct engine *e, struct rchunk *c,
					   const struct eng_blame *b, uint32_t n)
{
	struct eng_blame *p;

	if (!c->pool || c->pool->used + n > BLAME_CHUNK) {
		struct bpool *q = xcalloc(e, 1, sizeof(*q));

		q->next = c->pool;
		c->pool = q;
	}
	p = &c->pool->b[c->pool->used];
	memcpy(p, b, n * sizeof(*b));
	c->pool->used += n;
	return p;
}

void pools_free(struct engine *e, struct rchunk *c)
{
	while (c->pool) {
		struct bpool *q = c->pool;

		c->pool = q->next;
		free(q);
		heap_add(e, -(int64_t)sizeof(*q));
	}
}

static struct swip *step_by_seq(struct engine *e, uint64_t seq)
{
	struct swip *f;

	if (!e->sq_n)
		return NULL;
	f = e->sq[e->sq_head];
	if (seq < f->seq || seq - f->seq >= e->sq_n)
		return NULL;
	return e->sq[(e->sq_head + (seq - f->seq)) % e->sq_cap];
}

struct piece *piece_new(struct engine *e, uint64_t step_seq, uint64_t start)
{
	struct piece *p;

	if (e->npfree) {
		p = e->pfree[--e->npfree];
	} else {
		p = xcalloc(e, 1, sizeof(*p));
	}
	p->step_seq = step_seq;
	p->start = p->end = start;
	p->closed = false;
	for (int i = 0; i < e->ncand; i++)
		acc_reset(&p->acc[i]);
	if (e->pq_n == e->pq_cap) {
		uint32_t nc = e->pq_cap ? e->pq_cap * 2 : 8;
		struct piece **n = xcalloc(e, nc, sizeof(*n));

		for (uint32_t i = 0; i < e->pq_n; i++)
			n[i] = e->pq[(e->pq_head + i) % e->pq_cap];
		free(e->pq);
		heap_add(e, -(int64_t)(e->pq_cap * sizeof(*n)));
		e->pq = n;
		e->pq_cap = nc;
		e->pq_head = 0;
	}
	e->pq[(e->pq_head + e->pq_n++) % e->pq_cap] = p;
	if (++e->pieces_live > e->pieces_peak)
		e->pieces_peak = e->pieces_live;
	return p;
}

static void piece_release(struct engine *e, struct piece *p)
{
	grow(e, (void **)&e->pfree, &e->cappfree, e->npfree + 1, sizeof(*e->pfree));
	e->pfree[e->npfree++] = p;
	e->pieces_live--;
}

static struct interf *itf_slot(struct engine *e, uint32_t pid, const char *comm)
{
	uint32_t h = hash32(pid * 31u + (unsigned char)comm[0] * 7u + (unsigned)strlen(comm));

	for (uint32_t i = h & (e->itf_cap - 1);; i = (i + 1) & (e->itf_cap - 1)) {
		struct interf *x = &e->itf[i];

		if (!x->used || (x->pid == pid && !strcmp(x->comm, comm)))
			return x;
	}
}

/* a table of nc slots holding the entries of old[oc] */
static void itf_rehash(struct engine *e, struct interf *old, uint32_t oc, uint32_t nc)
{
	e->itf = xcalloc(e, nc, sizeof(*e->itf));
	e->itf_cap = nc;
	for (uint32_t i = 0; i < oc; i++)
		if (old[i].used)
			*itf_slot(e, old[i].pid, old[i].comm) = old[i];
	free(old);
	heap_add(e, -(int64_t)(oc * sizeof(*old)));
}

static int itf_ns_cmp(const void *a, const void *b)
{
	const struct interf *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns > y->ns ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return strcmp(x->comm, y->comm);
}

/*
 * ITF_MAX tasks have taken time: the smaller half are folded into one
 * remainder (a run of days meets many short-lived tasks); a task folded that
 * takes time again starts from 0.
 */
static void itf_fold(struct engine *e)
{
	struct interf *all = xcalloc(e, e->itf_n, sizeof(*all));
	uint32_t n = 0, keep = ITF_MAX / 2;

	for (uint32_t i = 0; i < e->itf_cap; i++)
		if (e->itf[i].used)
			all[n++] = e->itf[i];
	qsort(all, n, sizeof(*all), itf_ns_cmp);
	for (uint32_t i = keep; i < n; i++) {
		e->itf_other_ns += all[i].ns;
		e->itf_folded++;
	}
	memset(e->itf, 0, e->itf_cap * sizeof(*e->itf));
	e->itf_n = n < keep ? n : keep;
	for (uint32_t i = 0; i < e->itf_n; i++)
		*itf_slot(e, all[i].pid, all[i].comm) = all[i];
	free(all);
	heap_add(e, -(int64_t)(n * sizeof(*all)));
}

static void interferer_add(struct engine *e, const struct eng_who *w, uint64_t ns)
{
	struct interf *x;

	if (e->itf_cap) {
		x = itf_slot(e, w->pid, w->comm);
		if (x->used) {
			x->ns += ns;
			return;
		}
	}
	if (e->itf_n >= ITF_MAX)
		itf_fold(e);
	if ((e->itf_n + 1) * 2 > e->itf_cap)
		itf_rehash(e, e->itf, e->itf_cap, e->itf_cap ? e->itf_cap * 2 : 64);
	x = itf_slot(e, w->pid, w->comm);
	x->used = true;
	x->pid = w->pid;
	memcpy(x->comm, w->comm, sizeof(x->comm));
	x->ns = ns;
	e->itf_n++;
}

static bool cand_tid(struct engine *e, uint32_t tid, int *ci)
{
	struct thr *t = tid ? thr_find(e, tid) : NULL;

	*ci = t ? t->cand : -1;
	return *ci >= 0;
}

/* piece p is over: its time goes to the step as crit_tid's */
void commit_piece(struct engine *e, struct piece *p, uint32_t crit_tid)
{
	struct swip *st = step_by_seq(e, p->step_seq);
	uint64_t idle = p->end > p->start ? p->end - p->start : 0, sum = 0;
	int ci;
	struct acc *a = NULL;

	if (!st)
		return;
	if (cand_tid(e, crit_tid, &ci)) {
		a = &p->acc[ci];
		if (a->npend || a->pend_extra)
			resolve_sleep_acc(e, e->cand[ci], a, NULL);
		for (int c = 0; c < ENG_NCAUSE; c++)
			sum += a->ns[c];
	}
	if (a) {
		/* the live set of culprits is what stole the time: count it before merging */
		for (uint32_t i = 0; i < a->ncul; i++) {
			const struct cul *c = &a->cul[i];

			if (c->cause == ENG_CPU_WAIT || c->cause == ENG_MIGRATION ||
			    (c->cause == ENG_BLOCKED && c->who.via_tid))
				interferer_add(e, &c->who, c->ns);
		}
		acc_merge(e, &st->sacc, a);
	}
	if (idle > sum)
		st->sacc.ns[ENG_UNKNOWN] += idle - sum;
	st->idle_ns += idle;
	if (idle && crit_tid) {
		uint32_t i;

		for (i = 0; i < st->ncrit && st->crit[i].tid != crit_tid; i++)
			;
		if (i < st->ncrit) {
			st->crit[i].ns += idle;
		} else if (st->ncrit < ARRAY_LEN(st->crit)) {
			st->crit[st->ncrit].tid = crit_tid;
			st->crit[st->ncrit++].ns = idle;
		}
	}
	if (e->o.timeline.gap && idle) {
		struct eng_gap g = { .step = st->number, .critical_tid = crit_tid,
				     .start_ns = p->start, .end_ns = p->end };

		for (int c = 0; c < ENG_NCAUSE; c++)
			g.cause_ns[c] = a ? a->ns[c] : 0;
		g.cause_ns[ENG_UNKNOWN] += idle > sum ? idle - sum : 0;
		e->o.timeline.gap(e->o.timeline.ctx, &g);
	}
	st->open_pieces--;
}

uint32_t fallback_crit(struct engine *e, uint64_t step_seq)
{
	struct swip *st = step_by_seq(e, step_seq);
	int ci;

	if (st && cand_tid(e, st->marker_tid, &ci))
		return st->marker_tid;
	return e->last_launch_tid ? e->last_launch_tid : (st ? st->marker_tid : 0);
}

void pq_pop(struct engine *e)
{
	struct piece *p = e->pq[e->pq_head];

	e->pq_head = (e->pq_head + 1) % e->pq_cap;
	e->pq_n--;
	if (p == e->cur_piece)
		e->cur_piece = NULL;
	piece_release(e, p);
}

/* commit the oldest closed pieces whose step has ended, with the fallback thread */
void commit_ended(struct engine *e, uint64_t older_than, bool all)
{
	while (e->pq_n) {
		struct piece *p = e->pq[e->pq_head];
		struct swip *st = step_by_seq(e, p->step_seq);

		if (!p->closed || !st || !st->ended)
			break;
		if (!all && st->end + e->lag > older_than)
			break;
		commit_piece(e, p, fallback_crit(e, p->step_seq));
		pq_pop(e);
	}
}

static void sort_blame(struct eng_blame *b, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++) {
		for (uint32_t j = i; j > 0; j--) {
			struct eng_blame *x = &b[j - 1], *y = &b[j];
			bool swap;

			if (x->ns != y->ns)
				swap = x->ns < y->ns;
			else if (x->cause != y->cause)
				swap = x->cause > y->cause;
			else if (x->has_who != y->has_who)
				swap = !x->has_who;
			else
				swap = x->who.pid > y->who.pid ||
				       (x->who.pid == y->who.pid && x->who.tid > y->who.tid);
			if (!swap)
				break;
			struct eng_blame t = *x;

			*x = *y;
			*y = t;
		}
	}
}

/*
 * Room for step nres: a new chunk when the last is full. In window mode the
 * chunks past the window go first, and the last of them takes the new steps.
 */
static struct eng_step *res_slot(struct engine *e)
{
	struct rchunk *c = NULL;

	if (e->nres < (e->chunk0 + e->nchunks) * RES_CHUNK)
		return RES(e, e->nres);
	while (e->keep && e->nchunks && (e->nchunks - 1) * RES_CHUNK >= e->keep) {
		if (c) {
			free(c);
			heap_add(e, -(int64_t)sizeof(*c));
		}
		c = e->res[0];
		pools_free(e, c);
		memmove(e->res, e->res + 1, (e->nchunks - 1) * sizeof(*e->res));
		e->nchunks--;
		e->chunk0++;
	}
	if (!c) {
		c = xcalloc(e, 1, sizeof(*c));
		if (e->nchunks == e->res_cap) {
			uint64_t nc = e->res_cap ? 2 * e->res_cap : 16;
			struct rchunk **q = realloc(e->res, nc * sizeof(*q));

			if (!q) {
				sb_err("out of memory in the blame engine");
				abort();
			}
			heap_add(e, (int64_t)((nc - e->res_cap) * sizeof(*q)));
			e->res = q;
			e->res_cap = nc;
		}
	}
	e->res[e->nchunks++] = c;
	return RES(e, e->nres);
}

static void finalize_step(struct engine *e, struct swip *st)
{
	struct eng_step *r;
	struct eng_blame tmp[CUL_MAX + ENG_NCAUSE];
	uint32_t n = 0;
	uint64_t per_cause_named[ENG_NCAUSE] = { 0 };

	r = res_slot(e);
	memset(r, 0, sizeof(*r));
	r->index = e->nres;
	r->step = st->number;
	r->start_ns = st->start;
	r->end_ns = st->end;
	r->duration_ns = st->end - st->start;
	r->incomplete = st->incomplete;
	r->gpu_timeline = e->gpu_fed;
	for (int c = 0; c < ENG_NCAUSE; c++)
		r->cause_ns[c] = st->sacc.ns[c];
	if (r->gpu_timeline) {
		r->gpu_idle_ns = min64(st->idle_ns, r->duration_ns);
		r->gpu_busy_ns = r->duration_ns - r->gpu_idle_ns;
		r->cause_ns[ENG_GPU_SLOW] = min64(st->gpu_slow_ns, r->gpu_busy_ns);
	}
	memcpy(r->count, st->sacc.cnt, sizeof(r->count));
	r->count[ENG_N_GPU_OPS] = st->gpu_ops;
	for (int c = 0; c < SB_NCOST; c++) {
		r->tracer_events += st->tev[c];
		r->tracer_ns += st->tev[c] * e->costs.ns[c];
	}
	r->alloc_sampled = guard_sampled_in(e, st->start, st->end);
	for (uint32_t i = 0, best = 0; i < st->ncrit; i++)
		if (!i || st->crit[i].ns > st->crit[best].ns) {
			best = i;
			r->crit_tid = st->crit[i].tid;
		}
	if (!r->crit_tid)
		r->crit_tid = st->marker_tid;
	snprintf(r->crit_comm, sizeof(r->crit_comm), "%s", thr_comm(e, r->crit_tid));

	for (uint32_t i = 0; i < st->sacc.ncul; i++) {
		const struct cul *c = &st->sacc.cul[i];

		if (!c->ns)
			continue;
		tmp[n].cause = c->cause;
		tmp[n].has_who = true;
		tmp[n].who = c->who;
		tmp[n].ns = c->ns;
		per_cause_named[c->cause] += c->ns;
		n++;
	}
	for (int c = 0; c < ENG_NCAUSE; c++) {
		if (r->cause_ns[c] > per_cause_named[c]) {
			memset(&tmp[n], 0, sizeof(tmp[n]));
			tmp[n].cause = (uint8_t)c;
			tmp[n].ns = r->cause_ns[c] - per_cause_named[c];
			n++;
		}
	}
	sort_blame(tmp, n);
	/* too many: fold the smallest named entries into their cause's unnamed one */
	while (n > ENG_MAX_BLAME) {
		int k = -1;

		for (int i = (int)n - 1; i >= 0; i--)
			if (tmp[i].has_who) {
				k = i;
				break;
			}
		if (k < 0)
			break;
		uint8_t cause = tmp[k].cause;
		uint64_t ns = tmp[k].ns;
		uint32_t j;

		memmove(&tmp[k], &tmp[k + 1], (n - k - 1) * sizeof(tmp[0]));
		n--;
		for (j = 0; j < n && (tmp[j].cause != cause || tmp[j].has_who); j++)
			;
		if (j < n) {
			tmp[j].ns += ns;
		} else {
			memset(&tmp[n], 0, sizeof(tmp[n]));
			tmp[n].cause = cause;
			tmp[n].ns = ns;
			n++;
		}
		sort_blame(tmp, n);
	}
	r->blame = blame_store(e, e->res[e->nres / RES_CHUNK - e->chunk0], tmp, n);
	r->nblame = n;
	e->nres++;
	if (e->ws)
		allsum_add(e->ws, r);
	else if (e->nres > ENG_EXACT_STEPS_MAX)
		window_begin(e, ENG_REPORT_KEEP_STEPS);
	running_tail(e, r);
	if (e->o.timeline.step)
		e->o.timeline.step(e->o.timeline.ctx, r);
	if (e->cb)
		e->cb(e->cb_ctx, r);
}

static void swip_free(struct engine *e, struct swip *st)
{
	acc_free(e, &st->sacc);
	free(st);
	heap_add(e, -(int64_t)sizeof(*st));
}

void finalize_ready(struct engine *e)
{
	while (e->sq_n) {
		struct swip *st = e->sq[e->sq_head];

		if (!st->ended || st->open_pieces)
			break;
		finalize_step(e, st);
		e->sq_head = (e->sq_head + 1) % e->sq_cap;
		e->sq_n--;
		swip_free(e, st);
	}
}

void end_step(struct engine *e, uint64_t t, bool incomplete)
{
	struct swip *st = e->cur_step;

	if (!st)
		return;
	cut_all(e, t);
	if (e->cur_piece) {
		e->cur_piece->end = t;
		e->cur_piece->closed = true;
		e->cur_piece = NULL;
	}
	st->end = t;
	st->ended = true;
	st->incomplete = incomplete;
	e->cur_step = NULL;
	/* host-only: no GPU record has come, the marking thread is critical throughout */
	if (!e->gpu_fed)
		commit_ended(e, 0, true);
	finalize_ready(e);
}

static void begin_step(struct engine *e, uint64_t t, uint64_t number, uint32_t tid)
{
	struct swip *st;

	if (e->cur_step)
		end_step(e, t, false);
	cut_all(e, t);
	st = xcalloc(e, 1, sizeof(*st));
	st->seq = e->next_seq++;
	st->number = number;
	st->start = t;
	st->marker_tid = tid;
	if (e->sq_n == e->sq_cap) {
		uint32_t nc = e->sq_cap ? e->sq_cap * 2 : 16;
		struct swip **n = xcalloc(e, nc, sizeof(*n));

		for (uint32_t i = 0; i < e->sq_n; i++)
			n[i] = e->sq[(e->sq_head + i) % e->sq_cap];
		free(e->sq);
		heap_add(e, -(int64_t)(e->sq_cap * sizeof(*n)));
		e->sq = n;
		e->sq_cap = nc;
		e->sq_head = 0;
	}
	e->sq[(e->sq_head + e->sq_n++) % e->sq_cap] = st;
	if (e->sq_n > e->steps_flight_peak)
		e->steps_flight_peak = e->sq_n;
	e->cur_step = st;
	if (tid)
		cand_add(e, thr_get(e, tid, e->tpid));
	if (e->gap_open) {
		e->cur_piece = piece_new(e, st->seq, t);
		st->open_pieces++;
	}
}

static int src_pref(int src)
{
	switch (src) {
	case ENG_SRC_USDT:
	case ENG_SRC_UPROBE: return 0;
	case ENG_SRC_GPU_MARKER: return 1;
	case ENG_SRC_NVTX: return 2;
	case ENG_SRC_KERNEL: return 3;
	}
	return 9;
}

void on_mark(struct engine *e, int src, int kind, uint64_t number, uint64_t t, uint32_t tid)
{
	e->src_count[src]++;
	if (e->forced_src && src != e->forced_src)
		return;
	if (e->src && src != e->src) {
		if (src_pref(src) >= src_pref(e->src))
			return;
		/* a better source turned up: the step in progress was cut by the change */
		if (e->cur_step)
			end_step(e, t, true);
	}
	e->src = src;
	if (kind == MK_END) {
		/* begin/end sources: the time between an end and the next begin is no step's */
		end_step(e, t, false);
		return;
	}
	begin_step(e, t, number, tid);
}

void cand_add(struct engine *e, struct thr *t)
{
	if (t->cand >= 0 || e->ncand >= MAX_CAND || t->sink)
		return;
	t->cand = e->ncand;
	e->cand[e->ncand++] = t;
	for (uint32_t i = 0; i < e->pq_n; i++)
		acc_reset(&e->pq[(e->pq_head + i) % e->pq_cap]->acc[t->cand]);
	/* what it has been doing since its last state change counts from now on */
	t->last_cut = e->now;
	if (e->gap_open && e->cur_piece && t->state != TS_UNKNOWN)
		t->last_cut = max64(e->cur_piece->start, min64(t->since, e->now));
	t->nov = 0;
	t->nbov = 0;
	t->f_open = false;
}
