// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Threads and CPUs: the table of the threads followed (bounded: exited ones
 * are forgotten to make room), each thread's history of off-CPU episodes, and
 * the runslices of the tasks that ran on each CPU while a target thread waited.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"

/*
 * Bounds on what a trace (or a trainer, live) can make the engine hold: the
 * threads followed at once, names, kernel shapes, interferers, probe lines,
 * and the records one reorder bucket may pile up when time stops moving.
 */
#define THR_MAX 65536
#define THR_RECLAIM_EVERY 4096   /* misses of a full table between two reclaims */

struct thr *thr_find(const struct engine *e, uint32_t tid)
{
	if (!e->thash_cap)
		return NULL;
	for (uint32_t i = hash32(tid) & (e->thash_cap - 1);; i = (i + 1) & (e->thash_cap - 1)) {
		uint32_t v = e->thash[i];

		if (!v)
			return NULL;
		if (e->thr[v - 1]->tid == tid)
			return e->thr[v - 1];
	}
}

static void thash_put(struct engine *e, uint32_t tid, uint32_t idx1)
{
	for (uint32_t i = hash32(tid) & (e->thash_cap - 1);; i = (i + 1) & (e->thash_cap - 1)) {
		if (!e->thash[i]) {
			e->thash[i] = idx1;
			return;
		}
	}
}

static void thash_rebuild(struct engine *e)
{
	memset(e->thash, 0, e->thash_cap * sizeof(uint32_t));
	for (uint32_t i = 0; i < e->nthr; i++)
		thash_put(e, e->thr[i]->tid, i + 1);
}

/* nothing of it is needed any more: dead long enough, not critical, not the process */
static bool thr_forgettable(const struct engine *e, const struct thr *t)
{
	return t->state == TS_DEAD && t->cand < 0 && t->tid != e->tpid && e->now > t->since &&
	       e->now - t->since > e->hist + e->lag;
}

static void thr_release(struct engine *e, struct thr *t)
{
	free(t->ep);
	heap_add(e, -(int64_t)(t->ep_cap * sizeof(*t->ep)));
	e->episodes -= t->ep_n;
	free(t->nvtx);
	heap_add(e, -(int64_t)(t->nvtx_cap * sizeof(*t->nvtx)));
	free(t);
	heap_add(e, -(int64_t)sizeof(*t));
}

/*
 * The table is full: forget the threads that exited long ago (the timeline
 * is told their names). Tried again only after THR_RECLAIM_EVERY more
 * new threads found it full, so a table of live threads costs nothing per
 * record. False if there is still no room.
 */
static bool thr_room(struct engine *e)
{
	uint32_t k = 0;

	if (e->thr_reclaimed && ++e->thr_misses < THR_RECLAIM_EVERY)
		return false;
	e->thr_misses = 0;
	e->thr_reclaimed = true;
	for (uint32_t i = 0; i < e->nthr; i++) {
		struct thr *t = e->thr[i];

		if (!thr_forgettable(e, t)) {
			e->thr[k++] = t;
			continue;
		}
		if (e->o.timeline.thread_forgotten && t->comm[0])
			e->o.timeline.thread_forgotten(e->o.timeline.ctx, t->tid, t->comm);
		thr_release(e, t);
		e->thr_forgotten++;
	}
	if (k < e->nthr) {
		e->nthr = k;
		thash_rebuild(e);
	}
	return e->nthr < THR_MAX;
}

/* what a thread the table cannot hold is given: followed by nobody, never critical */
static struct thr *thr_sink(struct engine *e)
{
	if (!e->sink) {
		e->sink = xcalloc(e, 1, sizeof(*e->sink));
		e->sink->sink = true;
		e->sink->cand = -1;
		e->sink->tid = UINT32_MAX;
	}
	e->sink->state = TS_UNKNOWN;
	e->thr_lost++;
	return e->sink;
}

/* a thread not seen before (kept out of line: thr_get is on every record's path) */
static __attribute__((noinline)) struct thr *thr_new(struct engine *e, uint32_t tid, uint32_t pid)
{
	struct thr *t;

	if (e->nthr >= THR_MAX && !thr_room(e))
		return thr_sink(e);
	if ((e->nthr + 1) * 2 > e->thash_cap) {
		uint32_t nc = e->thash_cap ? e->thash_cap * 2 : 256;

		free(e->thash);
		heap_add(e, -(int64_t)(e->thash_cap * sizeof(uint32_t)));
		e->thash = xcalloc(e, nc, sizeof(uint32_t));
		e->thash_cap = nc;
		for (uint32_t i = 0; i < e->nthr; i++)
			thash_put(e, e->thr[i]->tid, i + 1);
	}
	grow(e, (void **)&e->thr, &e->capthr, e->nthr + 1, sizeof(*e->thr));
	t = xcalloc(e, 1, sizeof(*t));
	t->tid = tid;
	t->pid = pid ? pid : e->tpid;
	t->cand = -1;
	t->state = TS_UNKNOWN;
	e->thr[e->nthr++] = t;
	thash_put(e, tid, e->nthr);
	return t;
}

struct thr *thr_get(struct engine *e, uint32_t tid, uint32_t pid)
{
	struct thr *t = thr_find(e, tid);

	return t ? t : thr_new(e, tid, pid);
}

const char *thr_comm(const struct engine *e, uint32_t tid)
{
	struct thr *t = thr_find(e, tid);

	return t && t->comm[0] ? t->comm : "";
}

void ep_push(struct engine *e, struct thr *t, uint8_t kind, uint64_t s, uint64_t end,
		    uint16_t cpu, uint32_t wpid, uint32_t wtid)
{
	struct episode *p;

	if (end <= s || t->sink)
		return;
	/* the history only needs to reach back as far as a wakeup chain looks */
	while (t->ep_n && t->ep[t->ep_head].e + e->hist < e->now) {
		t->ep_head = (t->ep_head + 1) % t->ep_cap;
		t->ep_n--;
		e->episodes--;
	}
	if (t->ep_n == t->ep_cap) {
		uint32_t nc = t->ep_cap ? t->ep_cap * 2 : 8;
		struct episode *n = xcalloc(e, nc, sizeof(*n));

		for (uint32_t i = 0; i < t->ep_n; i++)
			n[i] = t->ep[(t->ep_head + i) % t->ep_cap];
		free(t->ep);
		heap_add(e, -(int64_t)(t->ep_cap * sizeof(*n)));
		t->ep = n;
		t->ep_cap = nc;
		t->ep_head = 0;
	}
	p = &t->ep[(t->ep_head + t->ep_n++) % t->ep_cap];
	p->s = s;
	p->e = end;
	t->ep_emax = max64(t->ep_emax, end);
	p->emax = t->ep_emax;
	p->kind = kind;
	p->cpu = cpu;
	p->wpid = wpid;
	p->wtid = wtid;
	if (++e->episodes > e->episodes_peak)
		e->episodes_peak = e->episodes;
}

static struct cpuq *cpuq_get(struct engine *e, uint32_t cpu)
{
	if (cpu >= e->ncpu) {
		uint32_t nc = e->ncpu ? e->ncpu : 8;
		struct cpuq *n;

		while (nc <= cpu)
			nc *= 2;
		n = xcalloc(e, nc, sizeof(*n));
		if (e->ncpu)
			memcpy(n, e->cpu, e->ncpu * sizeof(*n));
		free(e->cpu);
		heap_add(e, -(int64_t)(e->ncpu * sizeof(*n)));
		e->cpu = n;
		e->ncpu = nc;
	}
	return &e->cpu[cpu];
}

static struct rs *cpuq_at(struct cpuq *q, uint32_t i)
{
	return &q->v[(q->head + i) % q->cap];
}

void rs_push(struct engine *e, uint32_t cpu, const struct rs *r)
{
	struct cpuq *q = cpuq_get(e, cpu);

	while (q->n && q->v[q->head].e + e->hist < e->now) {
		q->head = (q->head + 1) % q->cap;
		q->n--;
		e->runslices--;
	}
	if (q->n == q->cap) {
		uint32_t nc = q->cap ? q->cap * 2 : 16;
		struct rs *n = xcalloc(e, nc, sizeof(*n));

		for (uint32_t i = 0; i < q->n; i++)
			n[i] = *cpuq_at(q, i);
		free(q->v);
		heap_add(e, -(int64_t)(q->cap * sizeof(*n)));
		q->v = n;
		q->cap = nc;
		q->head = 0;
	}
	*cpuq_at(q, q->n++) = *r;
	if (++e->runslices > e->runslices_peak)
		e->runslices_peak = e->runslices;
}

/*
 * Call fn for the part of every runslice on cpu inside [a, b], without
 * counting any instant twice; returns the time covered.
 */
uint64_t rs_cover(struct engine *e, uint16_t cpu, uint64_t a, uint64_t b, rs_fn fn,
			 void *ctx)
{
	struct cpuq *q;
	uint32_t lo, hi;
	uint64_t covered = 0, upto = a;

	if (cpu >= e->ncpu || b <= a)
		return 0;
	q = &e->cpu[cpu];
	/* slices on one CPU follow each other: find the first starting at or after a */
	lo = 0;
	hi = q->n;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (cpuq_at(q, mid)->s < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	while (lo > 0 && cpuq_at(q, lo - 1)->e > a)
		lo--;
	for (uint32_t i = lo; i < q->n; i++) {
		const struct rs *r = cpuq_at(q, i);
		uint64_t s = max64(r->s, upto), t = min64(r->e, b);

		if (r->s >= b)
			break;
		if (t <= s)
			continue;
		fn(e, ctx, r, cpu, s, t);
		covered += t - s;
		upto = t;
	}
	return covered;
}
