// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The reorder window (docs/ARCHITECTURE.md, "Reorder window"): timed records
 * wait in a calendar queue of ~1 ms buckets, with a heap for those beyond its
 * span, and are handed on in time order through e->sweep once the newest
 * timestamp is lag_ns past their bucket. It knows records only by type, size
 * and key: what a record means is for the sweep.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"
#include "base/util.h"

#define FRONTIER_MAX (1u << 18)

/* when a timed record starts to matter: intervals at their start */
static uint64_t rec_key(const struct sb_hdr *h)
{
	uint64_t s;

	switch (h->type) {
	case SB_EV_RUNSLICE: s = ((const struct sb_runslice *)h)->start_ns; break;
	case SB_EV_RECLAIM: s = ((const struct sb_reclaim *)h)->start_ns; break;
	case SB_EV_MMSYS: s = ((const struct sb_mmsys *)h)->start_ns; break;
	case SB_EV_ALLOC: s = ((const struct sb_alloc *)h)->start_ns; break;
	case SB_EV_CUDA: s = ((const struct sb_cuda *)h)->start_ns; break;
	case SB_EV_ALLOC_BURST: s = ((const struct sb_alloc_burst *)h)->start_ns; break;
	case SB_EV_IOSYS: s = ((const struct sb_iosys *)h)->start_ns; break;
	case SB_EV_AFFINITY: s = ((const struct sb_affinity *)h)->start_ns; break;
	default: return h->ts;
	}
	return s && s <= h->ts ? s : h->ts;
}

static int qidx_cmp(const void *a, const void *b)
{
	const struct qidx *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void ovf_push(struct engine *e, uint64_t key, uint64_t seq, const void *rec, size_t len)
{
	void *c = xcalloc(e, 1, len);
	size_t i;

	memcpy(c, rec, len);
	if (e->novf == e->capovf) {
		size_t nc = e->capovf ? e->capovf * 2 : 16;
		struct ovf *n = realloc(e->ovf, nc * sizeof(*n));

		if (!n)
			abort();
		heap_add(e, (int64_t)((nc - e->capovf) * sizeof(*n)));
		e->ovf = n;
		e->capovf = nc;
	}
	i = e->novf++;
	e->ovf[i] = (struct ovf){ key, seq, c };
	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (e->ovf[p].key < e->ovf[i].key ||
		    (e->ovf[p].key == e->ovf[i].key && e->ovf[p].seq < e->ovf[i].seq))
			break;
		struct ovf t = e->ovf[p];

		e->ovf[p] = e->ovf[i];
		e->ovf[i] = t;
		i = p;
	}
}

static void ovf_pop(struct engine *e)
{
	size_t i = 0;

	e->ovf[0] = e->ovf[--e->novf];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < e->novf && (e->ovf[l].key < e->ovf[m].key ||
				    (e->ovf[l].key == e->ovf[m].key && e->ovf[l].seq < e->ovf[m].seq)))
			m = l;
		if (r < e->novf && (e->ovf[r].key < e->ovf[m].key ||
				    (e->ovf[r].key == e->ovf[m].key && e->ovf[r].seq < e->ovf[m].seq)))
			m = r;
		if (m == i)
			break;
		struct ovf t = e->ovf[m];

		e->ovf[m] = e->ovf[i];
		e->ovf[i] = t;
		i = m;
	}
}

static void bucket_put(struct engine *e, uint64_t key, uint64_t seq, const void *rec, size_t len)
{
	uint64_t bi = (key >> BK_SHIFT) & (e->nbk - 1);
	struct bucket *b = &e->bk[bi];
	size_t need = sizeof(struct qent) + len;
	struct qent q = { .key = key, .seq = seq, .len = (uint32_t)len };
	struct bchunk *c = b->tail;

	if (need > sizeof(c->data)) {
		/* rec_size() knows no record this big */
		sb_err("a %zu-byte record in the blame engine", len);
		abort();
	}
	if (!c || c->len + need > sizeof(c->data)) {
		c = e->bfree;
		if (c)
			e->bfree = c->next;
		else
			c = xcalloc(e, 1, sizeof(*c));
		c->next = NULL;
		c->len = 0;
		if (b->tail)
			b->tail->next = c;
		else
			b->head = c;
		b->tail = c;
	}
	memcpy(c->data + c->len, &q, sizeof(q));
	memcpy(c->data + c->len + sizeof(q), rec, len);
	c->len += (uint32_t)need;
	if (!b->n++)
		e->bkbits[bi / 64] |= 1ull << (bi % 64);
	e->queued++;
	e->qbytes += sizeof(q) + len;
	if (e->queued > e->queued_peak)
		e->queued_peak = e->queued;
	if (e->qbytes > e->qbytes_peak)
		e->qbytes_peak = e->qbytes;
}

static bool qidx_less(const struct qidx *x, const struct qidx *y)
{
	return x->key < y->key || (x->key == y->key && x->seq < y->seq);
}

/*
 * Sort a bucket's index by (key, seq), which is unique: any sort gives the same
 * order. A bucket is nearly sorted (records arrive nearly in time order), so
 * insertion sort, unless it has to move too much.
 */
static void qidx_sort(struct qidx *v, uint32_t n)
{
	uint64_t moves = 0, budget = 8 * (uint64_t)n + 64;

	for (uint32_t i = 1; i < n; i++) {
		struct qidx x = v[i];
		uint32_t j = i;

		while (j > 0 && qidx_less(&x, &v[j - 1])) {
			v[j] = v[j - 1];
			j--;
		}
		v[j] = x;
		moves += i - j;
		if (moves > budget) {
			qsort(v, n, sizeof(*v), qidx_cmp);
			return;
		}
	}
}

static void sweep_bucket(struct engine *e, struct bucket *b)
{
	uint32_t n = b->n, i = 0;
	bool sorted = true;

	if (!n)
		return;
	if (n > e->idx_cap) {
		size_t nc = e->idx_cap ? e->idx_cap : 256;
		struct qidx *q;

		while (nc < n)
			nc *= 2;
		q = realloc(e->idx, nc * sizeof(*q));
		if (!q)
			abort();
		heap_add(e, (int64_t)((nc - e->idx_cap) * sizeof(*q)));
		e->idx = q;
		e->idx_cap = nc;
	}
	/* written lag_ns ago, long out of the cache: ask for all of it at once */
	for (const struct bchunk *c = b->head; c; c = c->next)
		for (uint32_t o = 0; o < c->len; o += 64)
			__builtin_prefetch(c->data + o);
	for (const struct bchunk *c = b->head; c; c = c->next) {
		for (uint32_t off = 0; off < c->len; i++) {
			const struct qent *q = (const void *)(c->data + off);

			e->idx[i] = (struct qidx){ q->key, q->seq, q };
			if (i && sorted && qidx_less(&e->idx[i], &e->idx[i - 1]))
				sorted = false;
			off += sizeof(*q) + q->len;
		}
	}
	if (!sorted)
		qidx_sort(e->idx, n);
	for (i = 0; i < n; i++) {
		const struct qent *q = e->idx[i].q;

		e->sweep(e, q->key, (const struct sb_hdr *)(q + 1));
		e->queued--;
		e->qbytes -= sizeof(*q) + q->len;
	}
	/* only the buckets still ahead of the sweep hold records: the window, nothing more */
	b->tail->next = e->bfree;
	e->bfree = b->head;
	b->head = b->tail = NULL;
	b->n = 0;
	e->bkbits[(b - e->bk) / 64] &= ~(1ull << ((b - e->bk) % 64));
}

/*
 * The first bucket at or after `from` that holds records, looking no further
 * than `last` or one turn of the calendar: that far the sweep has nothing to
 * do but move on, however far apart the timestamps lie.
 */
static uint64_t next_full(const struct engine *e, uint64_t from, uint64_t last)
{
	uint64_t n = min64(last - from, e->nbk), i = 0;

	while (i < n) {
		uint64_t p = (from + i) & (e->nbk - 1), w = e->bkbits[p / 64] >> (p % 64);

		if (w)
			return from + min64(i + (uint64_t)__builtin_ctzll(w), n);
		i += 64 - p % 64;
	}
	return from + n;
}

/* sweep every bucket that ends at or before `upto` */
void release(struct engine *e, uint64_t upto)
{
	uint64_t last = upto >> BK_SHIFT;

	if (!e->q_init || e->in_release)
		return;
	e->in_release = true;
	while (e->rel < last) {
		if (!e->queued && e->novf && (e->ovf[0].key >> BK_SHIFT) > e->rel) {
			e->rel = min64(e->ovf[0].key >> BK_SHIFT, last);
			continue;
		}
		if (!e->queued && !e->novf) {
			e->rel = last;
			break;
		}
		if (e->queued && !e->bk[e->rel & (e->nbk - 1)].n) {
			/*
			 * Empty buckets: skip to the next that holds records (the overflow
			 * records all lie a turn of the calendar beyond it). Committing and
			 * finalising depend only on the sweep's time, which empty buckets
			 * do not move: once is as good as once per bucket.
			 */
			uint64_t nx = next_full(e, e->rel, last);

			if (nx > e->rel) {
				e->rel = nx;
				e->time_moved(e);
				continue;
			}
		}
		/* overflow records whose bucket has come into the window */
		while (e->novf && (e->ovf[0].key >> BK_SHIFT) < e->rel + e->nbk) {
			struct ovf o = e->ovf[0];
			const struct sb_hdr *h = o.rec;

			size_t len = rec_size(h->type);

			ovf_pop(e);
			bucket_put(e, max64(o.key, e->rel << BK_SHIFT), o.seq, o.rec, len);
			free(o.rec);
			heap_add(e, -(int64_t)len);
		}
		{
			/* the next bucket's first chunk: it is swept next, as cold as this one */
			const struct bchunk *c = e->bk[(e->rel + 1) & (e->nbk - 1)].head;

			if (c)
				for (size_t o = 0; o < sizeof(*c); o += 64)
					__builtin_prefetch((const char *)c + o);
		}
		sweep_bucket(e, &e->bk[e->rel & (e->nbk - 1)]);
		e->rel++;
		e->time_moved(e);
	}
	e->in_release = false;
}

void enqueue(struct engine *e, const struct sb_hdr *h, size_t len)
{
	uint64_t key = rec_key(h);
	bool late = false;

	if (!e->q_init) {
		/* the window starts one lag before the first record */
		e->rel = (h->ts > e->lag ? h->ts - e->lag : 0) >> BK_SHIFT;
		e->q_init = true;
	}
	if (key >> BK_SHIFT < e->rel) {
		/* its time is already final: it still counts, from now on */
		if (h->ts < (e->rel << BK_SHIFT))
			e->late++;
		key = e->rel << BK_SHIFT;
		late = true;
	}
	if ((key >> BK_SHIFT) >= e->rel + e->nbk)
		ovf_push(e, key, e->seq++, h, len);
	else
		bucket_put(e, key, e->seq++, h, len);
	/*
	 * Time stopped moving (one record far ahead of the rest: every later one
	 * is late and joins the first bucket): sweep that bucket rather than let
	 * it hold the whole input.
	 */
	if (late && e->bk[e->rel & (e->nbk - 1)].n >= FRONTIER_MAX && !e->in_release &&
	    e->rel < (UINT64_MAX >> BK_SHIFT)) {
		e->frontier_flushes++;
		release(e, (e->rel + 1) << BK_SHIFT);
	}
}
