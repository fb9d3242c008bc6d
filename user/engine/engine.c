// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The attribution engine (engine.h). How it works, in order:
 *
 * 1. Reorder. Records arrive in drain order: kernel events nearly in time
 *    order, GPU records in batches up to lag_ns late, and records with a
 *    duration (runslice, reclaim, mmsys, alloc, alloc_burst, iosys, cuda) at
 *    their end (an alloc_burst even later: when the next call, a maximum span
 *    or the agent's once-a-second flush ends it). Each timed
 *    record is keyed by the time it starts to matter (its start for intervals)
 *    and parked in a calendar queue of ~1 ms buckets; a bucket is swept once
 *    the newest timestamp seen is lag_ns past it. Text records take effect at
 *    once. The queue holds lag_ns worth of records: that is the memory bound.
 *
 * 2. Sweep. In time order the engine keeps every target thread's state
 *    (running, runnable on CPU c, sleeping S/D), the tasks that ran on each
 *    CPU while a target thread waited (runslices), a short history of every
 *    thread's off-CPU episodes (for wakeup chains), and the GPU's busy union.
 *    A gap opens when the sweep passes the end of the busy union and closes at
 *    the next GPU operation's start.
 *
 * 3. Accumulate. Only candidate threads (those that mark steps or launch GPU
 *    work) can be critical. While a gap is open, each candidate's time is
 *    classified (cause, culprit) into an accumulator per (gap, step) piece.
 *    When the gap closes, the accumulator of the thread that launched the
 *    closing operation is committed to its step; the others are dropped. So
 *    nothing per event is kept past the window. Why a thread slept is known
 *    only when it is woken: until then its sleep waits in the accumulator as
 *    a few pending intervals.
 *
 * 4. Finalise. A step is final when its end mark has been swept and every
 *    piece of it committed (a gap still open lag_ns after the step ended is
 *    committed to the step's marking thread).
 *
 * The rooms, in that order: reorder.c (the window; it hands records to the
 * sweep through e->sweep and knows nothing of what they mean), host.c and
 * gpu.c (the sweep: host events, the GPU timeline), meta.c (text records, the
 * capture's clock), threads.c (threads, episodes, runslices), classify.c
 * (accumulators, classification, wakeup chains, the thread tracks of the
 * timeline), steps.c (steps, pieces, candidates, interferers, result slots),
 * summary.c (summaries: reading results only). This file: the lifecycle,
 * feeding, finishing, the memory accounting and the accessors. Shared types
 * and the functions the rooms call in each other: internal.h.
 */
#include <errno.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"
#include "base/util.h"

#define DEFAULT_LAG_NS 3000000000ull
#define MIN_HIST_NS 2000000000ull
/*
 * The per-fault cost charged to a fault that did not block, until the trace
 * calibrates it: the cost measured on this project's machines, 3.06 us
 * untraced plus 0.45 us traced (docs/ARCHITECTURE.md, "Fault cost
 * calibration").
 */
#define DEFAULT_FAULT_NS 3500ull

static const char *const cause_names[ENG_NCAUSE] = {
	[ENG_CPU_WAIT] = "cpu_wait", [ENG_MIGRATION] = "migration",
	[ENG_PAGE_FAULT] = "page_fault", [ENG_MEM_RECLAIM] = "mem_reclaim",
	[ENG_ALLOC] = "alloc", [ENG_IO_WAIT] = "io_wait", [ENG_BLOCKED] = "blocked",
	[ENG_CUDA_SYNC] = "cuda_sync", [ENG_CUDA_ALLOC] = "cuda_alloc",
	[ENG_CUDA_API] = "cuda_api", [ENG_HOST_COMPUTE] = "host_compute",
	[ENG_GPU_SLOW] = "gpu_slow", [ENG_UNKNOWN] = "unknown",
};

static const char *const count_names[ENG_NCOUNT] = {
	[ENG_N_FAULTS] = "faults", [ENG_N_MAJOR_FAULTS] = "major_faults",
	[ENG_N_PREEMPT] = "preemptions", [ENG_N_MIGRATIONS] = "migrations",
	[ENG_N_ALLOCS] = "slow_allocs", [ENG_N_BURST_ALLOCS] = "burst_allocs",
	[ENG_N_MMAP] = "mmap_calls", [ENG_N_IO] = "io_calls",
	[ENG_N_RECLAIMS] = "reclaims", [ENG_N_CUDA] = "cuda_calls", [ENG_N_SLEEPS] = "sleeps",
	[ENG_N_GPU_OPS] = "gpu_ops",
};

const char *eng_cause_name(int c)
{
	return c >= 0 && c < ENG_NCAUSE ? cause_names[c] : "unknown";
}

const char *eng_count_name(int c)
{
	return c >= 0 && c < ENG_NCOUNT ? count_names[c] : "?";
}

const char *eng_step_src_name(int s)
{
	switch (s) {
	case ENG_SRC_USDT: return "usdt";
	case ENG_SRC_UPROBE: return "uprobe";
	case ENG_SRC_GPU_MARKER: return "gpu_marker";
	case ENG_SRC_NVTX: return "nvtx";
	case ENG_SRC_KERNEL: return "kernel";
	}
	return "none";
}

void heap_add(struct engine *e, int64_t d)
{
	e->heap += d;
	if (e->heap > e->heap_peak)
		e->heap_peak = e->heap;
}

/* grow *p (elements of size sz) to hold at least need; aborts on OOM */
void grow(struct engine *e, void **p, uint32_t *cap, size_t need, size_t sz)
{
	size_t nc;
	void *q;

	if (need <= *cap)
		return;
	nc = *cap ? *cap : 8;
	while (nc < need)
		nc *= 2;
	q = realloc(*p, nc * sz);
	if (!q) {
		sb_err("out of memory in the blame engine");
		abort();
	}
	heap_add(e, (int64_t)((nc - *cap) * sz));
	memset((char *)q + *cap * sz, 0, (nc - *cap) * sz);
	*p = q;
	*cap = (uint32_t)nc;
}

void *xcalloc(struct engine *e, size_t n, size_t sz)
{
	void *p = calloc(n, sz);

	if (!p) {
		sb_err("out of memory in the blame engine");
		abort();
	}
	heap_add(e, (int64_t)(n * sz));
	return p;
}

char *xstrndup(struct engine *e, const char *s, size_t n)
{
	char *p = xcalloc(e, n + 1, 1);

	memcpy(p, s, n);
	return p;
}

static size_t meta_min(unsigned type)
{
	switch (type) {
	case SB_REC_HOST:
	case SB_REC_TARGET:
	case SB_REC_THREAD:
	case SB_REC_PROBE:
	case SB_REC_STRING:
	case SB_REC_NOTE:
	case SB_REC_COSTS:
	case SB_REC_GUARD: return sizeof(struct sb_text);
	case SB_REC_CPU: return sizeof(struct sb_cpu);
	case SB_REC_ALLOC_STATS: return sizeof(struct sb_alloc_stats);
	case SB_REC_DROPS: return sizeof(struct sb_drops);
	case SB_REC_TRAILER: return sizeof(struct sb_trailer);
	}
	return 0;
}

void engine_feed(struct engine *e, const struct sb_hdr *h)
{
	size_t len;

	if (!e || !h || e->finished)
		return;
	e->records++;
	len = rec_size(h->type);
	if (len) {
		if (h->size < len) {
			e->malformed++;
			return;
		}
		if (h->type == SB_REC_GPU) {
			uint16_t k = h->flags;

			if (!gpu_time_ok(e, (const struct sb_gpu *)h)) {
				e->gpu_rejected++;
				return;
			}
			if (k == SB_GPU_KERNEL || k == SB_GPU_MEMCPY || k == SB_GPU_MEMSET)
				e->gpu_fed = true;
		} else {
			clock_saw(e, h->ts, true);
		}
		if (!e->have_ts) {
			e->first_ts = h->ts;
			e->have_ts = true;
		}
		if (h->type == SB_EV_STEP || h->type == SB_EV_SWITCH_OUT || h->type == SB_EV_SWITCH_IN)
			if (!e->tpid)
				e->tpid = h->pid;
		enqueue(e, h, len);
		if (h->ts > e->max_ts)
			e->max_ts = h->ts;
		if (e->max_ts > e->lag)
			release(e, e->max_ts - e->lag);
		return;
	}
	len = meta_min(h->type);
	if (!len || h->size < len) {
		e->malformed++;
		return;
	}
	meta(e, h);
	if (h->type == SB_REC_DROPS || h->type == SB_REC_TRAILER)
		clock_saw(e, h->ts, false);
	/* the agent's own periodic records say how far the clock has moved */
	if ((h->type == SB_REC_DROPS || h->type == SB_REC_TRAILER) && h->ts > e->max_ts) {
		e->max_ts = h->ts;
		if (e->max_ts > e->lag)
			release(e, e->max_ts - e->lag);
	}
}

void engine_advance(struct engine *e, uint64_t now)
{
	if (!e || e->finished)
		return;
	clock_saw(e, now, false);
	if (now > e->max_ts)
		e->max_ts = now;
	if (e->max_ts > e->lag)
		release(e, e->max_ts - e->lag);
}

void engine_set_truncated(struct engine *e, const char *why)
{
	if (!e)
		return;
	if (e->truncated) {
		heap_add(e, -(int64_t)(strlen(e->truncated) + 1));
		free(e->truncated);
	}
	e->truncated = xstrndup(e, why ? why : "cut short", strlen(why ? why : "cut short"));
}

void engine_finish(struct engine *e)
{
	uint64_t end;

	if (!e || e->finished)
		return;
	release(e, UINT64_MAX - (1ull << (BK_SHIFT + 1)));
	end = max64(e->max_ts, e->now);
	if (e->complete && e->trailer_ts > end)
		end = e->trailer_ts;
	if (e->cur_step)
		end_step(e, max64(end, e->cur_step->start), true);
	cut_all(e, end);
	if (e->gap_open) {
		if (e->cur_piece) {
			e->cur_piece->closed = true;
			e->cur_piece = NULL;
		}
		commit_ended(e, 0, true);
	}
	finalize_ready(e);
	for (int i = 0; i < e->ncand; i++)
		timeline_thread_flush(e, e->cand[i]);
	summarise_all(e, &e->final_summary);
	mark_tails(e, &e->final_summary);
	e->finished = true;
}

void engine_set_step_cb(struct engine *e, engine_step_cb cb, void *ctx)
{
	e->cb = cb;
	e->cb_ctx = ctx;
}

/* the sweep has reached e->now: commit what is ready, finalise the steps that are */
static void time_moved(struct engine *e)
{
	commit_ended(e, e->now, false);
	finalize_ready(e);
}

struct engine *engine_new(const struct engine_opts *o, char *err, size_t errlen)
{
	struct engine *e = calloc(1, sizeof(*e));
	char msg[256];
	int rc;

	if (!e) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	heap_add(e, sizeof(*e));
	if (o)
		e->o = *o;
	e->lag = e->o.lag_ns ? e->o.lag_ns : DEFAULT_LAG_NS;
	e->hist = max64(e->lag, MIN_HIST_NS);
	e->sweep = sweep_rec;
	e->time_moved = time_moved;
	e->fault_cost = e->o.fault_cost_ns ? e->o.fault_cost_ns : DEFAULT_FAULT_NS;
	sb_costs_default(&e->costs);
	if (e->o.step_nvtx) {
		rc = regcomp(&e->re_nvtx, e->o.step_nvtx, REG_EXTENDED | REG_NOSUB);
		if (rc) {
			regerror(rc, &e->re_nvtx, msg, sizeof(msg));
			snprintf(err, errlen, "--step-nvtx '%s': %s", e->o.step_nvtx, msg);
			free(e);
			return NULL;
		}
		e->has_nvtx = true;
		e->forced_src = ENG_SRC_NVTX;
	}
	if (e->o.step_kernel) {
		rc = regcomp(&e->re_kernel, e->o.step_kernel, REG_EXTENDED | REG_NOSUB);
		if (rc) {
			regerror(rc, &e->re_kernel, msg, sizeof(msg));
			snprintf(err, errlen, "--step-kernel '%s': %s", e->o.step_kernel, msg);
			if (e->has_nvtx)
				regfree(&e->re_nvtx);
			free(e);
			return NULL;
		}
		e->has_kernel = true;
		if (!e->forced_src)
			e->forced_src = ENG_SRC_KERNEL;
	}
	/* the span of the calendar comfortably exceeds the lag */
	e->nbk = 1024;
	while (((uint64_t)e->nbk << BK_SHIFT) < e->lag + (1ull << 30))
		e->nbk *= 2;
	e->bk = xcalloc(e, e->nbk, sizeof(*e->bk));
	e->bkbits = xcalloc(e, e->nbk / 64, sizeof(*e->bkbits));
	e->corr = xcalloc(e, CORR_SLOTS, sizeof(*e->corr));
	e->clk_lo = UINT64_MAX;
	if (e->o.start_ns)
		clock_saw(e, e->o.start_ns, true);
	if (e->o.keep_steps)
		window_begin(e, e->o.keep_steps);
	/* GPU idle until its first operation */
	e->gap_open = true;
	return e;
}

void engine_free(struct engine *e)
{
	if (!e)
		return;
	for (uint32_t i = 0; i <= e->nbk; i++) {
		struct bchunk *c = i < e->nbk ? e->bk[i].head : e->bfree;

		while (c) {
			struct bchunk *next = c->next;

			free(c);
			c = next;
		}
	}
	free(e->bk);
	free(e->idx);
	for (size_t i = 0; i < e->novf; i++)
		free(e->ovf[i].rec);
	free(e->ovf);
	for (uint32_t i = 0; i < e->nthr; i++) {
		free(e->thr[i]->ep);
		free(e->thr[i]->nvtx);
		free(e->thr[i]);
	}
	free(e->thr);
	free(e->thash);
	for (uint32_t i = 0; i < e->ncpu; i++)
		free(e->cpu[i].v);
	free(e->cpu);
	free(e->corr);
	free(e->ks);
	free(e->gch);
	for (uint32_t i = 0; i < e->nstr; i++)
		free(e->strs[i].text);
	free(e->strs);
	free(e->shash);
	for (uint32_t i = 0; i < e->pq_n; i++) {
		struct piece *p = e->pq[(e->pq_head + i) % e->pq_cap];

		for (int c = 0; c < MAX_CAND; c++)
			free(p->acc[c].cul);
		free(p);
	}
	free(e->pq);
	for (uint32_t i = 0; i < e->npfree; i++) {
		struct piece *p = e->pfree[i];

		for (int c = 0; c < MAX_CAND; c++)
			free(p->acc[c].cul);
		free(p);
	}
	free(e->pfree);
	for (uint32_t i = 0; i < e->sq_n; i++) {
		struct swip *st = e->sq[(e->sq_head + i) % e->sq_cap];

		free(st->sacc.cul);
		free(st);
	}
	free(e->sq);
	for (uint64_t i = 0; i < e->nchunks; i++) {
		pools_free(e, e->res[i]);
		free(e->res[i]);
	}
	free(e->res);
	free(e->ws);
	free(e->itf);
	free(e->sink);
	free(e->bkbits);
	free(e->tcmdline);
	free(e->truncated);
	for (uint32_t i = 0; i < e->nprobes_missing; i++)
		free(e->probes_missing[i]);
	free(e->probes_missing);
	if (e->has_nvtx)
		regfree(&e->re_nvtx);
	if (e->has_kernel)
		regfree(&e->re_kernel);
	free(e);
}

bool engine_costs(const struct engine *e, struct sb_costs *c)
{
	*c = e->costs;
	return e->costs_given;
}

void engine_guard(const struct engine *e, struct eng_guard *g)
{
	*g = e->guard;
}

uint64_t engine_nsteps(const struct engine *e)
{
	return e ? e->nres : 0;
}

const struct eng_step *engine_step(const struct engine *e, uint64_t i)
{
	return e && i < e->nres && i >= first_kept(e) ? RES(e, i) : NULL;
}

uint64_t engine_first_step(const struct engine *e)
{
	return e ? first_kept(e) : 0;
}

void engine_target(const struct engine *e, struct eng_target *t)
{
	memset(t, 0, sizeof(*t));
	t->pid = e->tpid;
	memcpy(t->comm, e->tcomm, sizeof(t->comm));
	if (!t->comm[0] && e->tpid)
		snprintf(t->comm, sizeof(t->comm), "%s", thr_comm(e, e->tpid));
	t->cmdline = e->tcmdline ? e->tcmdline : "";
}

void engine_capture(const struct engine *e, struct eng_capture *c)
{
	static const char *const reasons[] = { "unknown", "duration", "signal", "target_exit",
					       "error", "target_credentials" };

	memset(c, 0, sizeof(*c));
	c->start_ns = e->complete && e->trailer_start ? e->trailer_start : e->first_ts;
	c->end_ns = e->complete && e->trailer_ts ? e->trailer_ts : e->max_ts;
	c->complete = e->complete && !e->truncated;
	c->truncated = e->truncated;
	if (e->complete)
		c->end_reason = e->end_reason < ARRAY_LEN(reasons) ? reasons[e->end_reason] : "unknown";
	else
		c->end_reason = "cut_short";
	c->step_source = e->src;
	c->gpu_timeline = e->gpu_fed;
	c->records = e->records;
}

void engine_loss(const struct engine *e, struct eng_loss *l)
{
	memset(l, 0, sizeof(*l));
	if (e->have_drops) {
		for (int i = 0; i <= SB_EV_KERNEL_MAX; i++) {
			l->ring[i] = e->drops.ring[i];
			l->total += e->drops.ring[i];
		}
		l->gpu_channel = e->drops.gpu_channel;
		l->gpu_source = e->drops.gpu_source;
		l->wait_overflow = e->drops.wait_overflow;
		l->total += l->gpu_channel + l->gpu_source + l->wait_overflow;
	}
	l->late = e->late;
	l->malformed = e->malformed;
	l->inferred = e->repaired;
	l->gpu_rejected = e->gpu_rejected;
	l->total += l->late + l->malformed + l->inferred + l->gpu_rejected;
	l->nprobes_missing = e->nprobes_missing;
	l->probes_missing = (const char *const *)e->probes_missing;
}

void engine_limits(const struct engine *e, struct eng_limits *l)
{
	memset(l, 0, sizeof(*l));
	l->threads_forgotten = e->thr_forgotten;
	l->thread_records_lost = e->thr_lost;
	l->strings_dropped = e->str_dropped;
	l->kernel_shapes_dropped = e->ks_dropped;
	l->interferers_folded = e->itf_folded;
	l->interferers_other_ns = e->itf_other_ns;
	l->probes_dropped = e->probes_dropped;
	l->window_flushes = e->frontier_flushes;
}

bool eng_limits_any(const struct eng_limits *l)
{
	return l->threads_forgotten || l->thread_records_lost || l->strings_dropped ||
	       l->kernel_shapes_dropped || l->interferers_folded || l->probes_dropped ||
	       l->window_flushes;
}

void engine_fault_model(const struct engine *e, struct eng_fault_model *m)
{
	memset(m, 0, sizeof(*m));
	m->per_fault_ns = e->fault_cost;
	m->samples = e->fh_n;
	m->blocked = e->faults_blocked;
	if (e->o.fault_cost_ns)
		m->method = ENG_FAULT_GIVEN;
	else if (e->fh_n >= FAULT_CALIB_MIN)
		m->method = ENG_FAULT_CALIBRATED;
	else
		m->method = ENG_FAULT_DEFAULT;
}

void engine_stats(const struct engine *e, struct engine_stats *s)
{
	memset(s, 0, sizeof(*s));
	s->records = e->records;
	s->queued = e->queued;
	s->queued_peak = e->queued_peak;
	s->queue_bytes = e->qbytes;
	s->queue_bytes_peak = e->qbytes_peak;
	s->threads = e->nthr;
	s->runslices = e->runslices;
	s->runslices_peak = e->runslices_peak;
	s->episodes = e->episodes;
	s->episodes_peak = e->episodes_peak;
	s->pieces_peak = e->pieces_peak;
	s->steps_in_flight_peak = e->steps_flight_peak;
	s->heap_bytes = e->heap;
	s->heap_bytes_peak = e->heap_peak;
}

void engine_each_thread(const struct engine *e,
			void (*fn)(void *ctx, uint32_t tid, const char *comm), void *ctx)
{
	for (uint32_t i = 0; i < e->nthr; i++)
		fn(ctx, e->thr[i]->tid, e->thr[i]->comm);
}
