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
 * gpu.c (the sweep: host events, the GPU timeline), meta.c (text records,
 * the capture's clock), threads.c (threads, episodes, runslices), classify.c
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

/*
 * How much the window may hold while it waits for the feeder's watermark:
 * past it, the window moves with the newest record again, and what is still
 * to come from the slower source is late and counted. The memory bound of a
 * feeder whose one source races ahead (a GPU channel drained whole while the
 * ring is read seconds behind, or a producer that writes in the future).
 */
#define WATERMARK_HOLD_BYTES (64u << 20)
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
	[ENG_TRACER] = "tracer", [ENG_VM_STEAL] = "vm_steal",
	[ENG_CPU_THROTTLE] = "cpu_throttle", [ENG_IRQ] = "irq",
};

const char *eng_irq_kind_name(int kind)
{
	return kind == ENG_IRQ_HARD ? "hard" : kind == ENG_IRQ_SYSTEM ? "system" : "softirq";
}

static const char *const count_names[ENG_NCOUNT] = {
	[ENG_N_FAULTS] = "faults", [ENG_N_MAJOR_FAULTS] = "major_faults",
	[ENG_N_PREEMPT] = "preemptions", [ENG_N_MIGRATIONS] = "migrations",
	[ENG_N_ALLOCS] = "slow_allocs", [ENG_N_BURST_ALLOCS] = "burst_allocs",
	[ENG_N_MMAP] = "mmap_calls", [ENG_N_IO] = "io_calls",
	[ENG_N_RECLAIMS] = "reclaims", [ENG_N_CUDA] = "cuda_calls", [ENG_N_SLEEPS] = "sleeps",
	[ENG_N_GPU_OPS] = "gpu_ops",
};

const char *eng_act_name(int k)
{
	static const char *const names[ENG_NACT] = { "on_cpu", "preempted", "runnable", "io",
						     "blocked", "faulting", "reclaim", "alloc",
						     "throttled" };

	return k >= 0 && k < ENG_NACT ? names[k] : "unknown";
}

const char *eng_cause_name(int c)
{
	return c >= 0 && c < ENG_NCAUSE ? cause_names[c] : "unknown";
}

const char *eng_region_name(unsigned region)
{
	static const char *const n[] = { "none", "file", "shm", "anon", "heap", "stack", "other" };

	_Static_assert(sizeof(n) / sizeof(n[0]) == ENG_NREGION, "region names");
	return region < ENG_NREGION ? n[region] : "other";
}

const char *eng_move_how_name(int how)
{
	switch (how) {
	case ENG_MOVE_SELF: return "self";
	case ENG_MOVE_THREAD: return "thread";
	case ENG_MOVE_SCHEDULER: return "scheduler";
	}
	return "unknown";
}

const char *eng_count_name(int c)
{
	return c >= 0 && c < ENG_NCOUNT ? count_names[c] : "?";
}

const char *eng_audit_name(int k)
{
	static const char *const names[ENG_NAUDIT] = {
		[ENG_AUD_ALLOC] = "alloc_calls", [ENG_AUD_MMAP] = "mmap_calls",
		[ENG_AUD_FAULTS] = "page_faults", [ENG_AUD_MIGRATIONS] = "migrations",
		[ENG_AUD_SLEEPS] = "sleeps", [ENG_AUD_IO] = "io_calls",
	};

	return k >= 0 && k < ENG_NAUDIT ? names[k] : "?";
}

const char *eng_step_src_name(int s)
{
	switch (s) {
	case ENG_SRC_USDT: return "usdt";
	case ENG_SRC_UPROBE: return "uprobe";
	case ENG_SRC_GPU_MARKER: return "gpu_marker";
	case ENG_SRC_NVTX: return "nvtx";
	case ENG_SRC_KERNEL: return "kernel";
	case ENG_SRC_API: return "api";
	}
	return "none";
}

void heap_account(struct engine *e, int64_t d)
{
	e->heap += d;
	if (e->heap > e->heap_peak)
		e->heap_peak = e->heap;
}

/* grow *p (elements of size sz) to hold at least need; aborts on OOM */
void heap_grow(struct engine *e, void **p, uint32_t *cap, size_t need, size_t sz)
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
	heap_account(e, (int64_t)((nc - *cap) * sz));
	memset((char *)q + *cap * sz, 0, (nc - *cap) * sz);
	*p = q;
	*cap = (uint32_t)nc;
}

void *heap_calloc(struct engine *e, size_t n, size_t sz)
{
	void *p = calloc(n, sz);

	if (!p) {
		sb_err("out of memory in the blame engine");
		abort();
	}
	heap_account(e, (int64_t)(n * sz));
	return p;
}

char *heap_strndup(struct engine *e, const char *s, size_t n)
{
	char *p = heap_calloc(e, n + 1, 1);

	memcpy(p, s, n);
	return p;
}

/*
 * The window moves to lag behind the newest record, and no further than the
 * feeder's watermark where it gave one (docs/ARCHITECTURE.md, "Reorder
 * window").
 */
static void release_due(struct engine *e)
{
	uint64_t t = e->max_ts;

	if (e->watermark && e->watermark < t && e->queued_bytes <= WATERMARK_HOLD_BYTES)
		t = e->watermark;
	if (t > e->lag)
		reorder_release(e, t - e->lag);
}

static void watermark_to(struct engine *e, uint64_t w)
{
	if (w > e->watermark)
		e->watermark = w;
	if (w > e->max_ts)
		e->max_ts = w;
	release_due(e);
}

/*
 * A step mark, CUDA call or GPU record of another process than the one whose
 * steps these are: with engine_opts.rank_pid, any other's; without, once the
 * first mark came, any but the first marking process's (another rank's GPU,
 * or a worker's, is not the steps' timeline; other marks are counted, not
 * used, as they are swept)
 */
static bool other_rank(struct engine *e, const struct sb_hdr *h)
{
	if (e->opts.rank_pid)
		return h->pid != e->opts.rank_pid;
	/* as host.c takes the marks (a restart, the target's own), on the records' order */
	if (h->type == SB_EV_STEP) {
		marks_owner(&e->feed_marks, h->pid, e->target_pid);
		return false;
	}
	return e->feed_marks.pid && h->pid != e->feed_marks.pid;
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
		/* an iosys record that names its file keeps it (sb_iosys_file_of) */
		if (h->type == SB_EV_IOSYS && h->size >= sizeof(struct sb_iosys_ext))
			len = sizeof(struct sb_iosys_ext);
		/* an mmap record that says what it mapped keeps it (sb_mmsys_map_of) */
		if (h->type == SB_EV_MMSYS && h->size >= sizeof(struct sb_mmsys_ext))
			len = sizeof(struct sb_mmsys_ext);
		/* a step mark with its thread's allocator count keeps it (sb_step_alloc_of) */
		if (h->type == SB_EV_STEP && h->size >= sizeof(struct sb_step_ext))
			len = sizeof(struct sb_step_ext);
		if (h->type == SB_EV_THREAD_EXIT && h->tid == h->pid && h->pid == e->feed_marks.pid)
			e->feed_marks.gone = true;
		/* another rank's steps, CUDA calls and GPU: not this report's (engine_opts.rank_pid) */
		if (h->type == SB_EV_STEP || h->type == SB_EV_CUDA || h->type == SB_REC_GPU)
			if (other_rank(e, h))
				return;
		if (h->type == SB_REC_GPU) {
			uint16_t k = h->flags;

			if (!gpu_time_ok(e, (const struct sb_gpu *)h)) {
				e->gpu_rejected++;
				return;
			}
			if (k == SB_GPU_KERNEL || k == SB_GPU_MEMCPY || k == SB_GPU_MEMSET) {
				e->gpu_fed = true;
				if (((const struct sb_gpu *)h)->end_ns > e->gpu_reach)
					e->gpu_reach = ((const struct sb_gpu *)h)->end_ns;
				if (!e->gpu_from || h->ts < e->gpu_from)
					e->gpu_from = h->ts;
			}
			e->lag = e->lag_gpu;
		} else {
			clock_saw(e, h->ts, true);
		}
		if (!e->have_ts) {
			e->first_ts = h->ts;
			e->have_ts = true;
		}
		if (h->type == SB_EV_STEP || h->type == SB_EV_SWITCH_OUT || h->type == SB_EV_SWITCH_IN)
			if (!e->target_pid)
				e->target_pid = h->pid;
		reorder_enqueue(e, h, len);
		if (h->ts > e->max_ts)
			e->max_ts = h->ts;
		release_due(e);
		return;
	}
	len = sb_meta_min(h->type);
	if (!len || h->size < len) {
		e->malformed++;
		return;
	}
	meta_record(e, h);
	if (h->type == SB_REC_DROPS || h->type == SB_REC_TRAILER)
		clock_saw(e, h->ts, false);
	/*
	 * The agent's own periodic records say how far the clock has moved; a
	 * drops record, also that every event before it is in (schemas/trace.md)
	 */
	if (h->type == SB_REC_DROPS) {
		watermark_to(e, h->ts);
	} else if (h->type == SB_REC_TRAILER && h->ts > e->max_ts) {
		e->max_ts = h->ts;
		release_due(e);
	}
}

void engine_gpu_expected(struct engine *e)
{
	if (e)
		e->lag = e->lag_gpu;
}

uint64_t engine_lag(const struct engine *e)
{
	return e->lag;
}

void engine_advance(struct engine *e, uint64_t now)
{
	if (!e || e->finished)
		return;
	clock_saw(e, now, false);
	watermark_to(e, now);
}

void engine_set_truncated(struct engine *e, const char *why)
{
	if (!e)
		return;
	if (e->truncated) {
		heap_account(e, -(int64_t)(strlen(e->truncated) + 1));
		free(e->truncated);
	}
	e->truncated = heap_strndup(e, why ? why : "cut short", strlen(why ? why : "cut short"));
}

void engine_finish(struct engine *e)
{
	uint64_t end;

	if (!e || e->finished)
		return;
	reorder_release(e, UINT64_MAX - (1ull << (BUCKET_SHIFT + 1)));
	end = max64(e->max_ts, e->now);
	if (e->complete && e->trailer_ts > end)
		end = e->trailer_ts;
	if (e->current_step)
		step_end(e, max64(end, e->current_step->start), true);
	account_candidates(e, end);
	if (e->gap_open) {
		if (e->current_piece) {
			e->current_piece->closed = true;
			e->current_piece = NULL;
		}
		pieces_commit_ended(e, 0, true);
	}
	steps_finalize_ready(e);
	steps_gpu_cut(e);
	for (int i = 0; i < e->ncandidates; i++)
		timeline_thread_flush(e, e->candidates[i]);
	summarise_all(e, &e->final_summary);
	mark_tails(e, &e->final_summary);
	e->finished = true;
}

void engine_set_step_cb(struct engine *e, engine_step_cb cb, void *ctx)
{
	e->step_cb = cb;
	e->step_cb_ctx = ctx;
}

/* the sweep has reached e->now: commit what is ready, finalise the steps that are */
static void time_moved(struct engine *e)
{
	pieces_commit_ended(e, e->now, false);
	steps_finalize_ready(e);
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
	heap_account(e, sizeof(*e));
	if (o)
		e->opts = *o;
	e->lag_gpu = e->opts.lag_ns ? e->opts.lag_ns : DEFAULT_LAG_NS;
	e->lag = e->opts.host_lag_ns && e->opts.host_lag_ns < e->lag_gpu ? e->opts.host_lag_ns :
		 e->lag_gpu;
	e->history_ns = max64(e->lag_gpu, MIN_HIST_NS);
	e->sweep = sweep_record;
	e->time_moved = time_moved;
	e->fault_cost = e->opts.fault_cost_ns ? e->opts.fault_cost_ns : DEFAULT_FAULT_NS;
	sb_costs_default(&e->costs);
	/* a trace whose cost model does not price fault runs or folded trips has none (meta.c) */
	e->costs.ns[SB_COST_FAULT_EXT] = 0;
	e->costs.ns[SB_COST_SCHED_FOLD] = 0;
	{
		/* the step sources a regex forces, the first given winning */
		const struct {
			const char *re, *flag;
			regex_t *out;
			bool *has;
			int src;
		} src[] = {
			{ e->opts.step_nvtx, "--step-nvtx", &e->re_nvtx, &e->has_nvtx, ENG_SRC_NVTX },
			{ e->opts.step_kernel, "--step-kernel", &e->re_kernel, &e->has_kernel,
			  ENG_SRC_KERNEL },
			{ e->opts.step_api, "--step-api", &e->re_api, &e->has_api, ENG_SRC_API },
		};

		for (size_t i = 0; i < ARRAY_SIZE(src); i++) {
			if (!src[i].re)
				continue;
			rc = regcomp(src[i].out, src[i].re, REG_EXTENDED | REG_NOSUB);
			if (rc) {
				regerror(rc, src[i].out, msg, sizeof(msg));
				snprintf(err, errlen, "%s '%s': %s", src[i].flag, src[i].re, msg);
				for (size_t k = 0; k < i; k++)
					if (*src[k].has)
						regfree(src[k].out);
				free(e);
				return NULL;
			}
			*src[i].has = true;
			if (!e->forced_source)
				e->forced_source = src[i].src;
		}
	}
	reorder_init(e);
	e->launches = heap_calloc(e, CORR_SLOTS, sizeof(*e->launches));
	e->clock_lo = UINT64_MAX;
	if (e->opts.start_ns)
		clock_saw(e, e->opts.start_ns, true);
	if (e->opts.keep_steps)
		window_begin(e, e->opts.keep_steps);
	/* live: the running summary's last (NULL: each one taken afresh) */
	if (e->opts.live)
		e->running = heap_calloc(e, 1, sizeof(*e->running));
	/* GPU idle until its first operation */
	e->gap_open = true;
	return e;
}

void engine_free(struct engine *e)
{
	if (!e)
		return;
	reorder_free(e);
	stacks_free(e);
	for (uint32_t i = 0; i < e->nthreads; i++) {
		free(e->threads[i]->episodes);
		free(e->threads[i]->acts);
		free(e->threads[i]->nvtx);
		free(e->threads[i]);
	}
	free(e->threads);
	free(e->thread_hash);
	for (uint32_t i = 0; i < e->ncpus; i++)
		free(e->cpus[i].slices);
	free(e->cpus);
	free(e->launches);
	free(e->io_files);
	free(e->act_paths);
	free(e->maps);
	map_seeds_free(e);
	free(e->kernel_shapes);
	free(e->guard_changes);
	free(e->guard_windows);
	for (uint32_t i = 0; i < e->nstrings; i++)
		free(e->strings[i].text);
	free(e->strings);
	free(e->string_hash);
	for (uint32_t i = 0; i < e->npieces; i++) {
		struct piece *p = e->pieces[(e->pieces_head + i) % e->pieces_cap];

		for (int c = 0; c < CANDIDATES_MAX; c++)
			free(p->accum[c].culprits);
		free(p);
	}
	free(e->pieces);
	for (uint32_t i = 0; i < e->nfree_pieces; i++) {
		struct piece *p = e->free_pieces[i];

		for (int c = 0; c < CANDIDATES_MAX; c++)
			free(p->accum[c].culprits);
		free(p);
	}
	free(e->free_pieces);
	for (uint32_t i = 0; i < e->nopen_steps; i++) {
		struct open_step *st = e->open_steps[(e->open_steps_head + i) % e->open_steps_cap];

		free(st->accum.culprits);
		free(st);
	}
	free(e->open_steps);
	for (uint64_t i = 0; i < e->nchunks; i++) {
		result_pools_free(e, e->results[i]);
		free(e->results[i]);
	}
	free(e->results);
	free(e->window_sums);
	free(e->running);
	free(e->interferers);
	free(e->sink);
	free(e->target_cmdline);
	procs_free(e);
	free(e->truncated);
	for (uint32_t i = 0; i < e->nprobes_missing; i++)
		free(e->probes_missing[i]);
	free(e->probes_missing);
	if (e->has_nvtx)
		regfree(&e->re_nvtx);
	if (e->has_kernel)
		regfree(&e->re_kernel);
	if (e->has_api)
		regfree(&e->re_api);
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
	return e ? e->nresults : 0;
}

const struct eng_step *engine_step(const struct engine *e, uint64_t i)
{
	return e && i < e->nresults && i >= first_kept(e) ? RESULT(e, i) : NULL;
}

uint64_t engine_first_step(const struct engine *e)
{
	return e ? first_kept(e) : 0;
}

void engine_target(const struct engine *e, struct eng_target *t)
{
	memset(t, 0, sizeof(*t));
	t->pid = e->target_pid;
	memcpy(t->comm, e->target_comm, sizeof(t->comm));
	if (!t->comm[0] && e->target_pid)
		snprintf(t->comm, sizeof(t->comm), "%s", thread_name_of(e, e->target_pid));
	/* a launcher (taskset, env, nice) exec'd the trainer: the name it has now */
	if (e->target_pid && thread_name_of(e, e->target_pid)[0] &&
	    strcmp(thread_name_of(e, e->target_pid), t->comm))
		snprintf(t->comm_end, sizeof(t->comm_end), "%s", thread_name_of(e, e->target_pid));
	t->cmdline = e->target_cmdline ? e->target_cmdline : "";
}

bool engine_task_realtime(const struct engine *e, uint32_t tid, const char *comm)
{
	for (uint32_t i = 0; i < e->nrt; i++)
		if (e->rt[i].tid == tid && !strncmp(e->rt[i].comm, comm, SB_COMM_LEN))
			return true;
	return false;
}

static void id_take(char *to, const char *from, size_t len, bool over)
{
	if (from[0] && (over || !to[0]))
		memcpy(to, from, len);
}

void engine_identity(const struct engine *e, struct eng_identity *id)
{
	const struct proc *p = e->marks.pid ? proc_find(e, e->marks.pid) : NULL;
	/* one rank of several: its own ids first (engine_opts.rank_pid) */
	bool over = e->opts.rank_pid != 0;

	*id = e->identity;
	/*
	 * The steps are a descendant's (the target a launcher or a shell): its
	 * ids where the target's environment had none (schemas/trace.md, "thread")
	 */
	if (!p || !p->ids)
		return;
	id_take(id->job, p->ids->job, sizeof(id->job), over);
	id_take(id->rank, p->ids->rank, sizeof(id->rank), over);
	id_take(id->local_rank, p->ids->local_rank, sizeof(id->local_rank), over);
	id_take(id->world_size, p->ids->world_size, sizeof(id->world_size), over);
}

void engine_capture(const struct engine *e, struct eng_capture *c)
{
	memset(c, 0, sizeof(*c));
	c->start_ns = e->complete && e->trailer_start ? e->trailer_start : e->first_ts;
	c->end_ns = e->complete && e->trailer_ts ? e->trailer_ts : e->max_ts;
	c->complete = e->complete && !e->truncated;
	c->truncated = e->truncated;
	if (e->complete)
		c->end_reason = sbt_end_name(e->end_reason);
	else
		c->end_reason = "cut_short";
	c->step_source = e->step_source;
	c->mark_pid = e->marks.pid;
	c->marks_ignored = e->marks_ignored;
	c->mark_restarts = e->mark_restarts;
	c->numbers_back = e->numbers_back;
	c->numbers_same = e->numbers_same;
	c->numbers_skips = e->numbers_skips;
	c->numbers_missing = e->numbers_missing;
	c->marks_other = e->marks.others;
	c->nmarks_other = e->marks.nothers;
	c->marks_other_more = e->marks.others_more;
	c->gpu_timeline = e->gpu_fed;
	c->records = e->records;
	if (e->truncated && e->gpu_fed)
		c->gpu_reached_ns = e->gpu_reach;
	c->gpu_cut_steps = e->gpu_cut_steps;
	if (e->gpu_before_steps)
		c->gpu_from_ns = e->gpu_from;
	c->gpu_before_steps = e->gpu_before_steps;
}

void engine_loss(const struct engine *e, struct eng_loss *l)
{
	memset(l, 0, sizeof(*l));
	if (e->have_drops) {
		for (int i = 0; i <= SB_EV_KERNEL_MAX; i++) {
			l->ring[i] = e->drops.ring[i];
			l->total = sat_add(l->total, e->drops.ring[i]);
		}
		l->gpu_channel = e->drops.gpu_channel;
		l->gpu_source = e->drops.gpu_source;
		l->wait_overflow = e->drops.wait_overflow;
		l->total = sat_add(l->total, l->gpu_channel);
		l->total = sat_add(l->total, l->gpu_source);
		l->total = sat_add(l->total, l->wait_overflow);
	}
	l->late = e->late;
	l->malformed = e->malformed;
	l->inferred = e->switch_ins_inferred;
	l->gpu_rejected = e->gpu_rejected;
	l->total = sat_add(l->total, l->late);
	l->total = sat_add(l->total, l->malformed);
	l->total = sat_add(l->total, l->inferred);
	l->total = sat_add(l->total, l->gpu_rejected);
	l->nprobes_missing = e->nprobes_missing;
	l->probes_missing = (const char *const *)e->probes_missing;
}

void engine_limits(const struct engine *e, struct eng_limits *l)
{
	memset(l, 0, sizeof(*l));
	l->threads_forgotten = e->threads_forgotten;
	l->thread_records_lost = e->thread_records_lost;
	l->strings_dropped = e->strings_dropped;
	l->kernel_shapes_dropped = e->kernel_shapes_dropped;
	l->interferers_folded = e->interferers_folded;
	l->interferers_other_ns = e->interferers_other_ns;
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
	m->samples = e->fault_samples;
	m->blocked = e->faults_blocked;
	if (e->opts.fault_cost_ns)
		m->method = ENG_FAULT_GIVEN;
	else if (e->fault_samples >= FAULT_CALIB_MIN)
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
	s->queue_bytes = e->queued_bytes;
	s->queue_bytes_peak = e->queued_bytes_peak;
	s->threads = e->nthreads;
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
	for (uint32_t i = 0; i < e->nthreads; i++) {
		const struct thread *t = e->threads[i];

		/* the target's and its followed processes' (not a waker or runner met on the way) */
		if (!t->sink && (t->candidate >= 0 || t->pid == e->target_pid || proc_find(e, t->pid)))
			fn(ctx, t->tid, t->comm);
	}
}
