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

static int queued_cmp(const void *a, const void *b)
{
	const struct queued_ref *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void overflow_push(struct engine *e, uint64_t key, uint64_t seq, const void *rec, size_t len)
{
	void *c = heap_calloc(e, 1, len);
	size_t i;

	memcpy(c, rec, len);
	if (e->noverflow == e->overflow_cap) {
		size_t nc = e->overflow_cap ? e->overflow_cap * 2 : 16;
		struct overflow_rec *n = realloc(e->overflow, nc * sizeof(*n));

		if (!n)
			abort();
		heap_account(e, (int64_t)((nc - e->overflow_cap) * sizeof(*n)));
		e->overflow = n;
		e->overflow_cap = nc;
	}
	i = e->noverflow++;
	e->overflow[i] = (struct overflow_rec){ key, seq, c, len };
	/* held like the calendar's records: the window's bound counts them (engine.c) */
	e->queued_bytes += sizeof(struct overflow_rec) + len;
	if (e->queued_bytes > e->queued_bytes_peak)
		e->queued_bytes_peak = e->queued_bytes;
	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (e->overflow[p].key < e->overflow[i].key ||
		    (e->overflow[p].key == e->overflow[i].key && e->overflow[p].seq < e->overflow[i].seq))
			break;
		struct overflow_rec t = e->overflow[p];

		e->overflow[p] = e->overflow[i];
		e->overflow[i] = t;
		i = p;
	}
}

static void overflow_pop(struct engine *e)
{
	size_t i = 0;

	e->overflow[0] = e->overflow[--e->noverflow];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < e->noverflow && (e->overflow[l].key < e->overflow[m].key ||
				    (e->overflow[l].key == e->overflow[m].key && e->overflow[l].seq < e->overflow[m].seq)))
			m = l;
		if (r < e->noverflow && (e->overflow[r].key < e->overflow[m].key ||
				    (e->overflow[r].key == e->overflow[m].key && e->overflow[r].seq < e->overflow[m].seq)))
			m = r;
		if (m == i)
			break;
		struct overflow_rec t = e->overflow[m];

		e->overflow[m] = e->overflow[i];
		e->overflow[i] = t;
		i = m;
	}
}

static void bucket_put(struct engine *e, uint64_t key, uint64_t seq, const void *rec, size_t len)
{
	uint64_t bi = (key >> BUCKET_SHIFT) & (e->nbuckets - 1);
	struct bucket *b = &e->buckets[bi];
	size_t need = sizeof(struct queued) + len;
	struct queued q = { .key = key, .seq = seq, .len = (uint32_t)len };
	struct bucket_chunk *c = b->tail;

	if (need > sizeof(c->data)) {
		/* rec_size() knows no record this big */
		sb_err("a %zu-byte record in the blame engine", len);
		abort();
	}
	if (!c || c->len + need > sizeof(c->data)) {
		c = e->free_chunks;
		if (c)
			e->free_chunks = c->next;
		else
			c = heap_calloc(e, 1, sizeof(*c));
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
		e->bucket_bits[bi / 64] |= 1ull << (bi % 64);
	e->queued++;
	e->queued_bytes += sizeof(q) + len;
	if (e->queued > e->queued_peak)
		e->queued_peak = e->queued;
	if (e->queued_bytes > e->queued_bytes_peak)
		e->queued_bytes_peak = e->queued_bytes;
}

static bool queued_less(const struct queued_ref *x, const struct queued_ref *y)
{
	return x->key < y->key || (x->key == y->key && x->seq < y->seq);
}

/*
 * Sort a bucket's index by (key, seq), which is unique: any sort gives the same
 * order. A bucket is nearly sorted (records arrive nearly in time order), so
 * insertion sort, unless it has to move too much.
 */
static void queued_sort(struct queued_ref *v, uint32_t n)
{
	uint64_t moves = 0, budget = 8 * (uint64_t)n + 64;

	for (uint32_t i = 1; i < n; i++) {
		struct queued_ref x = v[i];
		uint32_t j = i;

		while (j > 0 && queued_less(&x, &v[j - 1])) {
			v[j] = v[j - 1];
			j--;
		}
		v[j] = x;
		moves += i - j;
		if (moves > budget) {
			qsort(v, n, sizeof(*v), queued_cmp);
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
	if (n > e->order_cap) {
		size_t nc = e->order_cap ? e->order_cap : 256;
		struct queued_ref *q;

		while (nc < n)
			nc *= 2;
		q = realloc(e->order, nc * sizeof(*q));
		if (!q)
			abort();
		heap_account(e, (int64_t)((nc - e->order_cap) * sizeof(*q)));
		e->order = q;
		e->order_cap = nc;
	}
	/* written lag_ns ago, long out of the cache: ask for all of it at once */
	for (const struct bucket_chunk *c = b->head; c; c = c->next)
		for (uint32_t o = 0; o < c->len; o += 64)
			__builtin_prefetch(c->data + o);
	for (const struct bucket_chunk *c = b->head; c; c = c->next) {
		for (uint32_t off = 0; off < c->len; i++) {
			const struct queued *q = (const void *)(c->data + off);

			e->order[i] = (struct queued_ref){ q->key, q->seq, q };
			if (i && sorted && queued_less(&e->order[i], &e->order[i - 1]))
				sorted = false;
			off += sizeof(*q) + q->len;
		}
	}
	if (!sorted)
		queued_sort(e->order, n);
	for (i = 0; i < n; i++) {
		const struct queued *q = e->order[i].q;

		e->sweep(e, q->key, (const struct sb_hdr *)(q + 1));
		e->queued--;
		e->queued_bytes -= sizeof(*q) + q->len;
	}
	/* only the buckets still ahead of the sweep hold records: the window, nothing more */
	b->tail->next = e->free_chunks;
	e->free_chunks = b->head;
	b->head = b->tail = NULL;
	b->n = 0;
	e->bucket_bits[(b - e->buckets) / 64] &= ~(1ull << ((b - e->buckets) % 64));
}

/*
 * The first bucket at or after `from` that holds records, looking no further
 * than `last` or one turn of the calendar: that far the sweep has nothing to
 * do but move on, however far apart the timestamps lie.
 */
static uint64_t next_full_bucket(const struct engine *e, uint64_t from, uint64_t last)
{
	uint64_t n = min64(last - from, e->nbuckets), i = 0;

	while (i < n) {
		uint64_t p = (from + i) & (e->nbuckets - 1), w = e->bucket_bits[p / 64] >> (p % 64);

		if (w)
			return from + min64(i + (uint64_t)__builtin_ctzll(w), n);
		i += 64 - p % 64;
	}
	return from + n;
}

/* sweep every bucket that ends at or before `upto` */
void reorder_release(struct engine *e, uint64_t upto)
{
	uint64_t last = upto >> BUCKET_SHIFT;

	if (!e->window_started || e->in_release)
		return;
	e->in_release = true;
	while (e->next_bucket < last) {
		if (!e->queued && e->noverflow && (e->overflow[0].key >> BUCKET_SHIFT) > e->next_bucket) {
			e->next_bucket = min64(e->overflow[0].key >> BUCKET_SHIFT, last);
			continue;
		}
		if (!e->queued && !e->noverflow) {
			e->next_bucket = last;
			break;
		}
		if (e->queued && !e->buckets[e->next_bucket & (e->nbuckets - 1)].n) {
			/*
			 * Empty buckets: skip to the next that holds records (the overflow
			 * records all lie a turn of the calendar beyond it). Committing and
			 * finalising depend only on the sweep's time, which empty buckets
			 * do not move: once is as good as once per bucket.
			 */
			uint64_t nx = next_full_bucket(e, e->next_bucket, last);

			if (nx > e->next_bucket) {
				e->next_bucket = nx;
				e->time_moved(e);
				continue;
			}
		}
		/* overflow records whose bucket has come into the window */
		while (e->noverflow && (e->overflow[0].key >> BUCKET_SHIFT) < e->next_bucket + e->nbuckets) {
			struct overflow_rec o = e->overflow[0];

			overflow_pop(e);
			e->queued_bytes -= sizeof(struct overflow_rec) + o.len;
			bucket_put(e, max64(o.key, e->next_bucket << BUCKET_SHIFT), o.seq, o.rec, o.len);
			free(o.rec);
			heap_account(e, -(int64_t)o.len);
		}
		{
			/* the next bucket's first chunk: it is swept next, as cold as this one */
			const struct bucket_chunk *c = e->buckets[(e->next_bucket + 1) & (e->nbuckets - 1)].head;

			if (c)
				for (size_t o = 0; o < sizeof(*c); o += 64)
					__builtin_prefetch((const char *)c + o);
		}
		sweep_bucket(e, &e->buckets[e->next_bucket & (e->nbuckets - 1)]);
		e->next_bucket++;
		e->time_moved(e);
	}
	e->in_release = false;
}

void reorder_enqueue(struct engine *e, const struct sb_hdr *h, size_t len)
{
	uint64_t key = sb_rec_start(h); /* intervals matter from their start */
	bool late = false;

	if (!e->window_started) {
		/* the window starts one lag before the first record, or the feeder's watermark if earlier */
		uint64_t first = e->watermark && e->watermark < h->ts ? e->watermark : h->ts;

		e->next_bucket = (first > e->lag ? first - e->lag : 0) >> BUCKET_SHIFT;
		e->window_started = true;
	}
	if (key >> BUCKET_SHIFT < e->next_bucket) {
		/* its time is already final: it still counts, from now on */
		if (h->ts < (e->next_bucket << BUCKET_SHIFT))
			e->late++;
		key = e->next_bucket << BUCKET_SHIFT;
		late = true;
	}
	if ((key >> BUCKET_SHIFT) >= e->next_bucket + e->nbuckets)
		overflow_push(e, key, e->seq++, h, len);
	else
		bucket_put(e, key, e->seq++, h, len);
	/*
	 * Time stopped moving (one record far ahead of the rest: every later one
	 * is late and joins the first bucket): sweep that bucket rather than let
	 * it hold the whole input.
	 */
	if (late && e->buckets[e->next_bucket & (e->nbuckets - 1)].n >= FRONTIER_MAX && !e->in_release &&
	    e->next_bucket < (UINT64_MAX >> BUCKET_SHIFT)) {
		e->frontier_flushes++;
		reorder_release(e, (e->next_bucket + 1) << BUCKET_SHIFT);
	}
}

/* the calendar for e->lag_gpu, the longest lag (e->sweep and e->time_moved set) */
void reorder_init(struct engine *e)
{
	/* the span of the calendar comfortably exceeds the lag */
	e->nbuckets = 1024;
	while (((uint64_t)e->nbuckets << BUCKET_SHIFT) < e->lag_gpu + (1ull << 30))
		e->nbuckets *= 2;
	e->buckets = heap_calloc(e, e->nbuckets, sizeof(*e->buckets));
	e->bucket_bits = heap_calloc(e, e->nbuckets / 64, sizeof(*e->bucket_bits));
}

/* the records still waiting are dropped */
void reorder_free(struct engine *e)
{
	for (uint32_t i = 0; i <= e->nbuckets; i++) {
		struct bucket_chunk *c = i < e->nbuckets ? e->buckets[i].head : e->free_chunks;

		while (c) {
			struct bucket_chunk *next = c->next;

			free(c);
			c = next;
		}
	}
	free(e->buckets);
	free(e->bucket_bits);
	free(e->order);
	for (size_t i = 0; i < e->noverflow; i++)
		free(e->overflow[i].rec);
	free(e->overflow);
}
