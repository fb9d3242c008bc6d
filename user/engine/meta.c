// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Text records, which take effect when they arrive: the target, thread
 * names, strings (kernel and NVTX names), the tracer's costs, the overhead
 * guard's mode changes, probes that did not attach, drops, the trailer. And
 * the capture's clock that GPU records are judged against.
 */
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"
#include "base/util.h"
#include "format/gpu.h"

#define STR_MAX (1u << 17)
#define STR_BYTES_MAX (64ull << 20)
#define PROBES_MAX 256

/*
 * Guard records arrive with the agent's records, ahead of the sweep: their
 * mode changes are kept with their times and read back as steps finalise, in
 * order.
 */
#define GCH_MAX 4096

static void guard_record(struct engine *e, uint64_t ts, const char *s, size_t n)
{
	struct sb_guard g;
	int prev = e->guard.known ? e->guard.mode : SB_GUARD_FULL;

	if (!sb_guard_parse(&g, s, n))
		return;
	e->guard.known = true;
	e->guard.mode = g.mode;
	e->guard.limit_ppm = g.limit_ppm;
	e->guard.estimate_ppm = g.estimate_ppm;
	e->guard.duty_ppm = g.duty_ppm;
	e->guard.calls_seen = g.calls_seen;
	e->guard.calls_estimated = g.calls_estimated;
	if (g.estimate_ppm > e->guard.max_estimate_ppm)
		e->guard.max_estimate_ppm = g.estimate_ppm;
	if (g.mode == prev)
		return;
	e->guard.changes++;
	if (g.mode == SB_GUARD_SAMPLED && !e->guard.first_sampled_ns)
		e->guard.first_sampled_ns = ts;
	if (e->gch_n == GCH_MAX)
		return; /* the last mode then stands for the rest of the capture */
	if (e->gch_n == e->gch_cap) {
		uint32_t nc = e->gch_cap ? 2 * e->gch_cap : 16;
		void *q = realloc(e->gch, nc * sizeof(*e->gch));

		if (!q)
			return;
		heap_add(e, (int64_t)((nc - e->gch_cap) * sizeof(*e->gch)));
		e->gch = q;
		e->gch_cap = nc;
	}
	e->gch[e->gch_n].ts = ts;
	e->gch[e->gch_n].mode = g.mode;
	e->gch_n++;
}

/* was the guard sampling at any time in [s, end]? steps come in order */
bool guard_sampled_in(struct engine *e, uint64_t s, uint64_t end)
{
	bool any;

	while (e->gch_next < e->gch_n && e->gch[e->gch_next].ts <= s)
		e->gch_mode = e->gch[e->gch_next++].mode;
	any = e->gch_mode == SB_GUARD_SAMPLED;
	for (uint32_t i = e->gch_next; !any && i < e->gch_n && e->gch[i].ts <= end; i++)
		any = e->gch[i].mode == SB_GUARD_SAMPLED;
	return any;
}

const struct str *str_find(struct engine *e, uint32_t id)
{
	if (!id || !e->shash_cap)
		return NULL;
	for (uint32_t i = hash32(id) & (e->shash_cap - 1);; i = (i + 1) & (e->shash_cap - 1)) {
		uint32_t v = e->shash[i];

		if (!v)
			return NULL;
		if (e->strs[v - 1].id == id)
			return &e->strs[v - 1];
	}
}

static void text_of(const struct sb_hdr *h, const char **s, size_t *n, uint32_t *id)
{
	const struct sb_text *t = (const void *)h;
	size_t max = h->size - sizeof(*t);

	*s = t->text;
	*n = t->len < max ? t->len : max;
	*id = t->id;
}

static void str_put(struct engine *e, uint32_t id, const char *s, size_t n)
{
	struct str *x = (struct str *)str_find(e, id);
	uint64_t had = x ? x->alloc : 0;

	/* names a trace may hold: STR_MAX of them, STR_BYTES_MAX in all; the rest are counted */
	if ((!x && e->nstr >= STR_MAX) || e->str_bytes - had + n + 1 > STR_BYTES_MAX) {
		e->str_dropped++;
		return;
	}
	e->str_bytes += n + 1 - had;
	if (!x) {
		if ((e->nstr + 1) * 2 > e->shash_cap) {
			uint32_t nc = e->shash_cap ? e->shash_cap * 2 : 256;

			free(e->shash);
			heap_add(e, -(int64_t)(e->shash_cap * sizeof(uint32_t)));
			e->shash = xcalloc(e, nc, sizeof(uint32_t));
			e->shash_cap = nc;
			for (uint32_t i = 0; i < e->nstr; i++)
				for (uint32_t k = hash32(e->strs[i].id) & (nc - 1);; k = (k + 1) & (nc - 1))
					if (!e->shash[k]) {
						e->shash[k] = i + 1;
						break;
					}
		}
		grow(e, (void **)&e->strs, &e->capstr, e->nstr + 1, sizeof(*e->strs));
		x = &e->strs[e->nstr++];
		x->id = id;
		for (uint32_t k = hash32(id) & (e->shash_cap - 1);; k = (k + 1) & (e->shash_cap - 1))
			if (!e->shash[k]) {
				e->shash[k] = e->nstr;
				break;
			}
	} else {
		heap_add(e, -(int64_t)x->alloc);
		free(x->text);
	}
	x->text = xstrndup(e, s, n);
	x->alloc = (uint32_t)(n + 1);
	x->nvtx = e->has_nvtx && !regexec(&e->re_nvtx, x->text, 0, NULL, 0);
	x->kernel = e->has_kernel && !regexec(&e->re_kernel, x->text, 0, NULL, 0);
}

void meta(struct engine *e, const struct sb_hdr *h)
{
	const char *s;
	size_t n;
	uint32_t id;
	char buf[64];

	switch (h->type) {
	case SB_REC_TARGET:
		text_of(h, &s, &n, &id);
		if (kv_get(s, n, "pid", buf, sizeof(buf)))
			e->tpid = (uint32_t)strtoul(buf, NULL, 10);
		else
			e->tpid = h->pid;
		if (kv_get(s, n, "comm", buf, sizeof(buf))) {
			memset(e->tcomm, 0, sizeof(e->tcomm));
			memcpy(e->tcomm, buf, min64(strlen(buf), SB_COMM_LEN));
		}
		{
			char cmd[1024];

			if (kv_get(s, n, "cmdline", cmd, sizeof(cmd))) {
				if (e->tcmdline) {
					heap_add(e, -(int64_t)(strlen(e->tcmdline) + 1));
					free(e->tcmdline);
				}
				e->tcmdline = xstrndup(e, cmd, strlen(cmd));
			}
		}
		break;
	case SB_REC_THREAD: {
		struct thr *t;

		text_of(h, &s, &n, &id);
		t = thr_get(e, h->tid, h->pid);
		memset(t->comm, 0, sizeof(t->comm));
		memcpy(t->comm, s, n < SB_COMM_LEN ? n : SB_COMM_LEN);
		t->comm[strcspn(t->comm, "\n")] = 0;
		break;
	}
	case SB_REC_COSTS:
		text_of(h, &s, &n, &id);
		sb_costs_parse(&e->costs, s, n);
		e->costs_given = true;
		break;
	case SB_REC_GUARD:
		text_of(h, &s, &n, &id);
		guard_record(e, h->ts, s, n);
		break;
	case SB_REC_HOST:
		text_of(h, &s, &n, &id);
		/* a recorder that measured the per-fault cost says so */
		if (!e->o.fault_cost_ns && kv_get(s, n, "fault_ns", buf, sizeof(buf))) {
			uint64_t v = strtoull(buf, NULL, 10);

			if (v) {
				e->o.fault_cost_ns = v;
				e->fault_cost = v;
			}
		}
		break;
	case SB_REC_STRING:
		text_of(h, &s, &n, &id);
		if (id)
			str_put(e, id, s, n);
		break;
	case SB_REC_PROBE:
		text_of(h, &s, &n, &id);
		if (!id && e->nprobes_missing >= PROBES_MAX) {
			e->probes_dropped++;
		} else if (!id) {
			char **p = realloc(e->probes_missing, (e->nprobes_missing + 1) * sizeof(*p));

			if (!p)
				abort();
			e->probes_missing = p;
			heap_add(e, sizeof(*p));
			p[e->nprobes_missing++] = xstrndup(e, s, n);
		}
		break;
	case SB_REC_DROPS:
		memcpy(&e->drops, h, sizeof(e->drops));
		e->have_drops = true;
		break;
	case SB_REC_TRAILER: {
		const struct sb_trailer *t = (const void *)h;

		e->complete = true;
		e->end_reason = t->end_reason;
		e->trailer_ts = t->h.ts;
		e->trailer_start = t->start_ns;
		break;
	}
	}
}

/*
 * A time the capture's own clock vouches for: a kernel record (its start, too,
 * when it is the first), an agent record, the live clock.
 */
void clock_saw(struct engine *e, uint64_t ts, bool start_too)
{
	if (start_too)
		e->clk_lo = min64(e->clk_lo, ts);
	else if (e->clk_lo > e->clk_hi)
		e->clk_lo = ts;
	e->clk_hi = max64(e->clk_hi, ts);
}

/*
 * A GPU record comes from the trainer (the channel, CUPTI's clock, the
 * producer's clock offset): its times are believed only inside the capture,
 * give or take ENG_GPU_MARGIN_NS. One at 2^64 would otherwise hold the
 * reorder window open for ever (every later record late, the window growing
 * with the input), one at 0 would close gaps that never closed.
 */
bool gpu_time_ok(struct engine *e, const struct sb_gpu *g)
{
	uint64_t lo, hi;

	if (g->end_ns < g->h.ts)
		return false;
	if (e->clk_lo > e->clk_hi)
		return true;
	lo = e->clk_lo > ENG_GPU_MARGIN_NS ? e->clk_lo - ENG_GPU_MARGIN_NS : 0;
	if (g->h.ts < lo)
		return false;
	hi = e->clk_hi < UINT64_MAX - ENG_GPU_MARGIN_NS ? e->clk_hi + ENG_GPU_MARGIN_NS : UINT64_MAX;
	if (g->end_ns <= hi)
		return true;
	if (!e->o.live)
		return false;
	/* live: the records are drained after they happened, so the clock now bounds them */
	clock_saw(e, mono_ns(), false);
	hi = e->clk_hi + ENG_GPU_MARGIN_NS;
	return g->end_ns <= hi;
}
