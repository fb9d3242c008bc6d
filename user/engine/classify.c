// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Classification (docs/ARCHITECTURE.md, "Blame model"): a candidate thread's
 * time inside a GPU idle gap becomes (cause, culprit) in the accumulator of
 * the gap's piece; sleeps wait until the wakeup says who ended them, then
 * follow the wakeup chain. The thread tracks of the timeline are drawn here.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"

#define CHAIN_DEPTH 3

/* overlay priority while on CPU or asleep: the innermost explanation wins */
static const uint8_t ov_prio[ENG_NCAUSE] = {
	[ENG_MEM_RECLAIM] = 7, [ENG_PAGE_FAULT] = 6, [ENG_IO_WAIT] = 5, [ENG_CUDA_SYNC] = 4,
	[ENG_CUDA_ALLOC] = 4, [ENG_CUDA_API] = 3, [ENG_ALLOC] = 2, [ENG_MIGRATION] = 1,
};

void acc_reset(struct acc *a)
{
	memset(a->ns, 0, sizeof(a->ns));
	memset(a->cnt, 0, sizeof(a->cnt));
	a->ncul = 0;
	a->npend = 0;
	a->pend_extra = 0;
}

void acc_free(struct engine *e, struct acc *a)
{
	free(a->cul);
	heap_add(e, -(int64_t)(a->capcul * sizeof(*a->cul)));
	a->cul = NULL;
	a->capcul = a->ncul = 0;
}

static bool who_same(const struct eng_who *a, const struct eng_who *b)
{
	return a->pid == b->pid && a->tid == b->tid && a->via_tid == b->via_tid &&
	       !strcmp(a->comm, b->comm);
}

static void acc_cul(struct engine *e, struct acc *a, int cause, const struct eng_who *w,
		    uint64_t ns)
{
	for (uint32_t i = 0; i < a->ncul; i++) {
		if (a->cul[i].cause == cause && who_same(&a->cul[i].who, w)) {
			a->cul[i].ns += ns;
			return;
		}
	}
	if (a->ncul >= CUL_MAX)
		return; /* the time stays in ns[cause], without a name */
	grow(e, (void **)&a->cul, &a->capcul, a->ncul + 1, sizeof(*a->cul));
	a->cul[a->ncul].cause = (uint8_t)cause;
	a->cul[a->ncul].who = *w;
	a->cul[a->ncul].ns = ns;
	a->ncul++;
}

static void acc_add(struct engine *e, struct acc *a, int cause, uint64_t ns,
		    const struct eng_who *w)
{
	if (!ns)
		return;
	a->ns[cause] += ns;
	if (w)
		acc_cul(e, a, cause, w, ns);
}

void acc_merge(struct engine *e, struct acc *dst, const struct acc *src)
{
	for (int c = 0; c < ENG_NCAUSE; c++)
		dst->ns[c] += src->ns[c];
	for (int c = 0; c < ENG_NCOUNT; c++)
		dst->cnt[c] += src->cnt[c];
	for (uint32_t i = 0; i < src->ncul; i++)
		acc_cul(e, dst, src->cul[i].cause, &src->cul[i].who, src->cul[i].ns);
}

/* t's track: its slice in one state is extended while the next one follows on */
void timeline_thread_flush(struct engine *e, struct thr *t)
{
	if (t->track_state && t->track_end > t->track_start)
		e->o.timeline.thread_state(e->o.timeline.ctx, e->tpid ? e->tpid : t->pid, t->tid,
					   t->track_state, t->track_start, t->track_end);
	t->track_state = NULL;
}

static void timeline_thread(struct engine *e, struct thr *t, const char *name, uint64_t s,
			    uint64_t end)
{
	if (!e->o.timeline.thread_state || end <= s)
		return;
	if (t->track_state == name && t->track_end == s) {
		t->track_end = end;
		return;
	}
	timeline_thread_flush(e, t);
	t->track_state = name;
	t->track_start = s;
	t->track_end = end;
}

static const char *state_name(uint8_t s)
{
	switch (s) {
	case TS_RUNNING: return "running";
	case TS_RUNNABLE: return "runnable";
	case TS_SLEEP_S: return "sleeping";
	case TS_SLEEP_D: return "disk sleep";
	case TS_DEAD: return "exited";
	}
	return "unknown";
}

struct clsctx {
	struct thr *t;
	struct acc *a;
	uint64_t upto;           /* timeline: how far the thread's track is drawn */
	const struct thr *via;   /* chain: the waker that was preempted */
	const struct eng_who *dflt;
};

/* comm: at least SB_COMM_LEN bytes (a NUL in the first 10 differs from the prefix anyway) */
bool is_stopper(const char *comm)
{
	return !memcmp(comm, "migration/", 10);
}

static void who_of_rs(struct eng_who *w, const struct rs *r, uint16_t cpu)
{
	memset(w, 0, sizeof(*w));
	w->pid = r->pid;
	w->tid = r->tid;
	comm_copy(w->comm, r->comm);
	w->cpu = cpu;
}

static void on_preemptor(struct engine *e, void *ctx, const struct rs *r, uint16_t cpu,
			 uint64_t a, uint64_t b)
{
	struct clsctx *c = ctx;
	struct eng_who w;
	int cause;

	who_of_rs(&w, r, cpu);
	/* the wait right after a move is the move's, whoever holds the new CPU */
	cause = is_stopper(w.comm) || c->t->migrated ? ENG_MIGRATION : ENG_CPU_WAIT;
	acc_add(e, c->a, cause, b - a, is_stopper(w.comm) ? NULL : &w);
	if (e->o.timeline.thread_state || e->o.timeline.interferer) {
		int gap = c->t->migrated ? ENG_MIGRATION : ENG_CPU_WAIT;

		if (a > c->upto)
			timeline_thread(e, c->t, eng_cause_name(gap), c->upto, a);
		c->upto = b;
		if (e->o.timeline.interferer)
			e->o.timeline.interferer(e->o.timeline.ctx, &w, c->t->tid, a, b);
		timeline_thread(e, c->t, eng_cause_name(cause), a, b);
	}
}

static void cls_runnable(struct engine *e, struct thr *t, struct acc *a, uint64_t s, uint64_t end)
{
	struct clsctx c = { .t = t, .a = a, .upto = s };
	uint64_t cov = rs_cover(e, t->cpu, s, end, on_preemptor, &c);
	int cause = t->migrated ? ENG_MIGRATION : ENG_CPU_WAIT;

	acc_add(e, a, cause, end - s - cov, NULL);
	if (c.upto < end)
		timeline_thread(e, t, eng_cause_name(cause), c.upto, end);
}

/* of t's unexplained on-CPU time [x, y], how much its bursts claim as alloc (used up) */
static uint64_t burst_take(struct thr *t, uint64_t x, uint64_t y)
{
	uint64_t got = 0;

	for (uint32_t i = 0; i < t->nbov && got < y - x; i++) {
		struct bov *b = &t->bov[i];
		uint64_t lo = max64(x, b->s), hi = min64(y, b->e), take;

		if (hi <= lo || !b->left)
			continue;
		take = min64(min64(hi - lo, b->left), y - x - got);
		b->left -= take;
		got += take;
	}
	return got;
}

/*
 * The overlays in force on t over [s, end], fault included; top priority per
 * sub-interval. a == NULL: outside any gap, only use up the bursts' budgets
 * (on-CPU time there is their time as much as inside a gap).
 */
static void cls_overlays(struct engine *e, struct thr *t, struct acc *a, uint64_t s, uint64_t end,
			 bool asleep)
{
	uint64_t pts[2 * OV_MAX + 2 * BOV_MAX + 6];
	struct ovl ov[OV_MAX + 1];
	int nov = 0, np = 0;

	for (uint32_t i = 0; i < t->nov; i++)
		if (t->ov[i].e > s && t->ov[i].s < end)
			ov[nov++] = t->ov[i];
	if (t->f_open) {
		uint64_t fe = asleep ? end : t->f_decided ? t->f_e : t->f_r + e->fault_cost;

		if (asleep || (fe > s && t->f_r < end))
			ov[nov++] = (struct ovl){ .s = asleep ? s : t->f_r, .e = fe,
						  .cause = ENG_PAGE_FAULT };
	}
	pts[np++] = s;
	pts[np++] = end;
	for (int i = 0; i < nov; i++) {
		if (ov[i].s > s && ov[i].s < end)
			pts[np++] = ov[i].s;
		if (ov[i].e > s && ov[i].e < end)
			pts[np++] = ov[i].e;
	}
	for (uint32_t i = 0; !asleep && i < t->nbov; i++) {
		if (t->bov[i].s > s && t->bov[i].s < end)
			pts[np++] = t->bov[i].s;
		if (t->bov[i].e > s && t->bov[i].e < end)
			pts[np++] = t->bov[i].e;
	}
	for (int i = 1; i < np; i++)
		for (int j = i; j > 0 && pts[j - 1] > pts[j]; j--) {
			uint64_t x = pts[j];

			pts[j] = pts[j - 1];
			pts[j - 1] = x;
		}
	for (int i = 0; i + 1 < np; i++) {
		uint64_t x = pts[i], y = pts[i + 1];
		int best = -1;

		if (y <= x)
			continue;
		for (int k = 0; k < nov; k++)
			if (ov[k].s <= x && ov[k].e >= y &&
			    (best < 0 || ov_prio[ov[k].cause] > ov_prio[best]))
				best = ov[k].cause;
		/*
		 * Asleep in a synchronisation while the GPU is idle with nothing
		 * queued: it is no longer waiting for the GPU but for whoever wakes
		 * it, so the wakeup decides. Without a GPU timeline the sync is all
		 * we know.
		 */
		if (asleep && best == ENG_CUDA_SYNC && e->gpu_fed && !e->gpu_queued)
			best = -1;
		/*
		 * An interruptible sleep inside read/write waits for another task (a
		 * pipe, a socket: a data loader): the wakeup names it, as for any
		 * sleep. Disk I/O sleeps uninterruptibly, and stays io_wait.
		 */
		if (asleep && best == ENG_IO_WAIT && t->state == TS_SLEEP_S)
			best = -1;
		if (!a) {
			if (best < 0 && !asleep)
				burst_take(t, x, y);
			continue;
		}
		if (best >= 0) {
			acc_add(e, a, best, y - x, NULL);
			timeline_thread(e, t, eng_cause_name(best), x, y);
		} else if (!asleep) {
			/* in a burst of fast allocator calls: as much as its calls took is alloc */
			uint64_t al = burst_take(t, x, y);

			acc_add(e, a, ENG_ALLOC, al, NULL);
			acc_add(e, a, ENG_HOST_COMPUTE, y - x - al, NULL);
			if (al)
				timeline_thread(e, t, eng_cause_name(ENG_ALLOC), x, x + al);
			if (x + al < y)
				timeline_thread(e, t, eng_cause_name(ENG_HOST_COMPUTE), x + al, y);
		} else {
			/* a plain sleep: why is known at the wakeup */
			timeline_thread(e, t, state_name(t->state), x, y);
			if (a->npend && a->pend[a->npend - 1].b == x)
				a->pend[a->npend - 1].b = y;
			else if (a->npend < PEND_MAX)
				a->pend[a->npend++] = (struct pend){ x, y };
			else
				a->pend_extra += y - x;
			a->pend_state = t->state;
		}
	}
}

static struct acc *piece_acc(struct piece *p, int cand)
{
	return cand >= 0 ? &p->acc[cand] : NULL;
}

/* attribute t's time from its last cut up to `to` */
void thr_account(struct engine *e, struct thr *t, uint64_t to)
{
	uint64_t s = t->last_cut;
	struct piece *p = e->gap_open ? e->cur_piece : NULL;
	struct acc *a;

	if (to <= s)
		return;
	t->last_cut = to;
	/* overlays that ended before now are of no further use */
	for (uint32_t i = 0; i < t->nov;) {
		if (t->ov[i].e <= s)
			t->ov[i] = t->ov[--t->nov];
		else
			i++;
	}
	for (uint32_t i = 0; i < t->nbov;) {
		if (t->bov[i].e <= s || !t->bov[i].left)
			t->bov[i] = t->bov[--t->nbov];
		else
			i++;
	}
	if (!p) {
		if (t->state == TS_RUNNING && t->nbov)
			cls_overlays(e, t, NULL, s, to, false);
		timeline_thread(e, t, state_name(t->state), s, to);
		return;
	}
	if (s < p->start) {
		if (t->state == TS_RUNNING && t->nbov)
			cls_overlays(e, t, NULL, s, min64(p->start, to), false);
		s = p->start;
	}
	if (to <= s)
		return;
	a = piece_acc(p, t->cand);
	switch (t->state) {
	case TS_RUNNING:
		cls_overlays(e, t, a, s, to, false);
		break;
	case TS_RUNNABLE:
		cls_runnable(e, t, a, s, to);
		break;
	case TS_SLEEP_S:
	case TS_SLEEP_D:
		cls_overlays(e, t, a, s, to, true);
		break;
	default:
		acc_add(e, a, ENG_UNKNOWN, to - s, NULL);
		timeline_thread(e, t, eng_cause_name(ENG_UNKNOWN), s, to);
		break;
	}
}

void cut_all(struct engine *e, uint64_t t)
{
	for (int i = 0; i < e->ncand; i++)
		thr_account(e, e->cand[i], t);
}

static void on_chain_preemptor(struct engine *e, void *ctx, const struct rs *r, uint16_t cpu,
			       uint64_t a, uint64_t b)
{
	struct clsctx *c = ctx;
	struct eng_who w;

	who_of_rs(&w, r, cpu);
	if (is_stopper(w.comm)) {
		acc_add(e, c->a, ENG_BLOCKED, b - a, c->dflt);
		return;
	}
	w.via_pid = c->via->pid;
	w.via_tid = c->via->tid;
	memcpy(w.via_comm, c->via->comm, sizeof(w.via_comm));
	acc_add(e, c->a, ENG_BLOCKED, b - a, &w);
}

/*
 * [s, end] of a sleep that `w` ended. Where w (or, a few hops on, the target
 * thread that woke w) sat runnable and preempted, the preemptor is to blame;
 * everywhere else the waker itself. Only preemptions travel down the chain: a
 * waker's own sleeps were often ended from interrupt context, whose "waker" is
 * whatever happened to run.
 */
static void chain(struct engine *e, struct acc *a, uint64_t s, uint64_t end, struct thr *w,
		  const struct eng_who *dflt, const struct thr *victim, int depth)
{
	uint64_t cur = s;

	uint32_t lo = 0, hi;

	if (!w || depth >= CHAIN_DEPTH) {
		acc_add(e, a, ENG_BLOCKED, end - s, dflt);
		return;
	}
	/* episodes that all ended by s cover none of [s, end]: skip them */
	hi = w->ep_n;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (w->ep[(w->ep_head + mid) % w->ep_cap].emax <= s)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (uint32_t i = lo; i <= w->ep_n && cur < end; i++) {
		struct episode ep;
		uint64_t x, y;

		if (i < w->ep_n) {
			ep = w->ep[(w->ep_head + i) % w->ep_cap];
		} else if (w->state == TS_RUNNABLE || w->state == TS_SLEEP_S) {
			/* the episode still open */
			ep = (struct episode){ .s = w->since, .e = end, .cpu = w->cpu,
					       .kind = w->state == TS_RUNNABLE ? EP_RUN : EP_SLEEP_S };
		} else {
			break;
		}
		x = max64(ep.s, cur);
		y = min64(ep.e, end);
		if (y <= x)
			continue;
		if (x > cur)
			acc_add(e, a, ENG_BLOCKED, x - cur, dflt);
		if (ep.kind == EP_RUN) {
			struct clsctx c = { .a = a, .via = w, .dflt = dflt };
			uint64_t cov = rs_cover(e, ep.cpu, x, y, on_chain_preemptor, &c);

			acc_add(e, a, ENG_BLOCKED, y - x - cov, dflt);
		} else if (ep.kind == EP_SLEEP_S && ep.wpid == e->tpid && ep.wtid != w->tid &&
			   ep.wtid != victim->tid) {
			chain(e, a, x, y, thr_find(e, ep.wtid), dflt, victim, depth + 1);
		} else {
			acc_add(e, a, ENG_BLOCKED, y - x, dflt);
		}
		cur = y;
	}
	if (cur < end)
		acc_add(e, a, ENG_BLOCKED, end - cur, dflt);
}

/* a plain sleep of candidate t ended; wk: the wakeup record, NULL if none seen */
void resolve_sleep_acc(struct engine *e, struct thr *t, struct acc *a,
			      const struct sb_wakeup *wk)
{
	struct eng_who dflt;
	struct thr *w = NULL;
	bool named = false;
	int cause;

	if (!a->npend && !a->pend_extra)
		return;
	if (wk) {
		memset(&dflt, 0, sizeof(dflt));
		dflt.pid = wk->waker_pid;
		dflt.tid = wk->waker_tid;
		comm_copy(dflt.comm, wk->waker_comm);
		dflt.cpu = -1;
		named = wk->waker_pid != 0;
		if (wk->waker_pid == e->tpid && wk->waker_tid != t->tid)
			w = thr_find(e, wk->waker_tid);
	}
	if ((wk && is_stopper(dflt.comm)) || t->sleep_migr)
		cause = ENG_MIGRATION;
	else
		cause = a->pend_state == TS_SLEEP_D ? ENG_IO_WAIT : ENG_BLOCKED;
	for (uint32_t i = 0; i < a->npend; i++) {
		uint64_t x = a->pend[i].a, y = a->pend[i].b;

		if (cause == ENG_BLOCKED && named)
			chain(e, a, x, y, w, &dflt, t, 0);
		else
			acc_add(e, a, cause, y - x, cause == ENG_IO_WAIT || !named ? NULL : &dflt);
	}
	if (a->pend_extra)
		acc_add(e, a, cause, a->pend_extra, cause == ENG_BLOCKED && named ? &dflt : NULL);
	a->npend = 0;
	a->pend_extra = 0;
}

void resolve_sleep(struct engine *e, struct thr *t, const struct sb_wakeup *wk)
{
	if (t->cand < 0)
		return;
	for (uint32_t i = 0; i < e->pq_n; i++) {
		struct piece *p = e->pq[(e->pq_head + i) % e->pq_cap];

		resolve_sleep_acc(e, t, &p->acc[t->cand], wk);
	}
}
