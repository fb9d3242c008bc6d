// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Threads and CPUs: the table of the threads followed (bounded: exited ones
 * are forgotten to make room), each thread's history of off-CPU episodes, and
 * the runslices of the tasks that ran on each CPU while a target thread waited.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"

/*
 * Bounds on what a trace (or a trainer, live) can make the engine hold: the
 * threads followed at once, names, kernel shapes, interferers, probe lines,
 * and the records one reorder bucket may pile up when time stops moving.
 */
#define THREADS_MAX 65536
#define THREADS_RECLAIM_EVERY 4096   /* misses of a full table between two reclaims */
#define THREADS_SOFT 4096            /* past it, exited threads are forgotten as they age */
#define THREADS_SOFT_EVERY 1024      /* new threads between two such passes */

struct thread *thread_find(const struct engine *e, uint32_t tid)
{
	uint32_t mask = e->thread_hash_cap - 1;

	if (!e->thread_hash_cap)
		return NULL;
	for (uint32_t i = hash32(tid) & mask;; i = (i + 1) & mask) {
		uint32_t v = e->thread_hash[i];

		if (!v)
			return NULL;
		if (e->threads[v - 1]->tid == tid)
			return e->threads[v - 1];
	}
}

static void thread_hash_put(struct engine *e, uint32_t tid, uint32_t idx1)
{
	uint32_t mask = e->thread_hash_cap - 1;

	for (uint32_t i = hash32(tid) & mask;; i = (i + 1) & mask) {
		if (!e->thread_hash[i]) {
			e->thread_hash[i] = idx1;
			return;
		}
	}
}

static void thread_hash_rebuild(struct engine *e)
{
	memset(e->thread_hash, 0, e->thread_hash_cap * sizeof(uint32_t));
	for (uint32_t i = 0; i < e->nthreads; i++)
		thread_hash_put(e, e->threads[i]->tid, i + 1);
}

/* exited longer ago than any wait still to be told reaches back */
static bool thread_dead_long(const struct engine *e, const struct thread *t)
{
	return t->state == TS_DEAD && e->now > t->since && e->now - t->since > e->history_ns + e->lag;
}

/* nothing of it is needed any more: dead long enough, not critical, not the process */
static bool thread_forgettable(const struct engine *e, const struct thread *t)
{
	return thread_dead_long(e, t) && t->candidate < 0 && t->tid != e->target_pid;
}

static void act_ring_free(struct engine *e, struct thread *t)
{
	if (!t->acts)
		return;
	free(t->acts);
	heap_account(e, -(int64_t)(ACTS_MAX * sizeof(*t->acts)));
	e->nact_rings--;
	t->acts = NULL;
	t->nacts = 0;
	t->acts_head = 0;
}

static void thread_release(struct engine *e, struct thread *t)
{
	act_ring_free(e, t);
	free(t->episodes);
	heap_account(e, -(int64_t)(t->episodes_cap * sizeof(*t->episodes)));
	e->episodes -= t->nepisodes;
	free(t->nvtx);
	heap_account(e, -(int64_t)(t->nvtx_cap * sizeof(*t->nvtx)));
	free(t);
	heap_account(e, -(int64_t)sizeof(*t));
}

/*
 * Forget the threads that exited long ago (the timeline is told their names;
 * a process's keeps its main thread's, for the report to name it by); full:
 * counted as forgotten to make room. The threads kept keep their order.
 */
static void threads_forget(struct engine *e, bool full)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < e->nthreads; i++) {
		struct thread *t = e->threads[i];
		struct proc *p;

		if (!thread_forgettable(e, t)) {
			e->threads[k++] = t;
			continue;
		}
		if (e->opts.timeline.thread_forgotten && t->comm[0])
			e->opts.timeline.thread_forgotten(e->opts.timeline.ctx, t->tid, t->comm);
		if (t->tid == t->pid && (p = proc_find(e, t->pid)))
			memcpy(p->comm, t->comm, sizeof(p->comm));
		thread_release(e, t);
		e->threads_forgotten += full;
	}
	if (k < e->nthreads) {
		e->nthreads = k;
		thread_hash_rebuild(e);
	}
}

/*
 * The table is full: forget the threads that exited long ago. Tried again
 * only after THREADS_RECLAIM_EVERY more new threads found it full, so a table
 * of live threads costs nothing per record. False if there is still no room.
 */
static bool thread_table_room(struct engine *e)
{
	if (e->table_reclaimed && ++e->table_misses < THREADS_RECLAIM_EVERY)
		return false;
	e->table_misses = 0;
	e->table_reclaimed = true;
	threads_forget(e, true);
	return e->nthreads < THREADS_MAX;
}

/* what a thread the table cannot hold is given: followed by nobody, never critical */
static struct thread *thread_sink(struct engine *e)
{
	if (!e->sink) {
		e->sink = heap_calloc(e, 1, sizeof(*e->sink));
		e->sink->sink = true;
		e->sink->candidate = -1;
		e->sink->tid = UINT32_MAX;
	}
	e->sink->state = TS_UNKNOWN;
	e->thread_records_lost++;
	return e->sink;
}

/* a thread not seen before (kept out of line: thread_get is on every record's path) */
static __attribute__((noinline)) struct thread *thread_new(struct engine *e, uint32_t tid,
							   uint32_t pid)
{
	struct thread *t;

	/*
	 * A trainer that starts processes or threads all along (a fork a step,
	 * DataLoader workers every epoch) leaves exited ones: forgotten as they
	 * age past THREADS_SOFT, not only when the table is full, so that a
	 * days-long watch holds a few MB of them rather than ~100
	 */
	if (e->nthreads >= THREADS_SOFT && ++e->threads_new_since >= THREADS_SOFT_EVERY) {
		e->threads_new_since = 0;
		threads_forget(e, false);
	}
	if (e->nthreads >= THREADS_MAX && !thread_table_room(e))
		return thread_sink(e);
	if ((e->nthreads + 1) * 2 > e->thread_hash_cap) {
		uint32_t nc = e->thread_hash_cap ? e->thread_hash_cap * 2 : 256;

		free(e->thread_hash);
		heap_account(e, -(int64_t)(e->thread_hash_cap * sizeof(uint32_t)));
		e->thread_hash = heap_calloc(e, nc, sizeof(uint32_t));
		e->thread_hash_cap = nc;
		for (uint32_t i = 0; i < e->nthreads; i++)
			thread_hash_put(e, e->threads[i]->tid, i + 1);
	}
	heap_grow(e, (void **)&e->threads, &e->threads_cap, e->nthreads + 1, sizeof(*e->threads));
	t = heap_calloc(e, 1, sizeof(*t));
	t->tid = tid;
	t->pid = pid ? pid : e->target_pid;
	t->candidate = -1;
	t->state = TS_UNKNOWN;
	e->threads[e->nthreads++] = t;
	thread_hash_put(e, tid, e->nthreads);
	return t;
}

struct thread *thread_get(struct engine *e, uint32_t tid, uint32_t pid)
{
	struct thread *t = thread_find(e, tid);

	return t ? t : thread_new(e, tid, pid);
}

const char *thread_name_of(const struct engine *e, uint32_t tid)
{
	struct thread *t = thread_find(e, tid);
	const struct proc *p;

	if (t)
		return t->comm;
	/* a process's main thread forgotten: its name stayed with the process */
	p = proc_find(e, tid);
	return p ? p->comm : "";
}

/* back-to-back faults of a waker: as host.c's FAULT_RUN_NS */
#define ACT_FAULT_RUN_NS 1000000ull
#define ACT_RINGS_RECLAIM_NS 100000000ull

static struct act_iv *act_last(struct thread *t)
{
	return t->nacts ? &t->acts[(t->acts_head + t->nacts - 1) % ACTS_MAX] : NULL;
}

/*
 * All ACT_RINGS_MAX rings are held: take back those of threads that exited
 * long ago (what they did is behind every wait still to be told), as a
 * trainer that starts its DataLoader workers again every epoch leaves them.
 * Tried at most once every ACT_RINGS_RECLAIM_NS of the trace (a thread
 * becomes one to take back only seconds after its exit). False if there is
 * still none free.
 */
static bool act_rings_room(struct engine *e)
{
	if (e->now < e->act_rings_next)
		return false;
	e->act_rings_next = e->now + ACT_RINGS_RECLAIM_NS;
	for (uint32_t i = 0; i < e->nthreads; i++)
		if (e->threads[i]->acts && thread_dead_long(e, e->threads[i]))
			act_ring_free(e, e->threads[i]);
	return e->nact_rings < ACT_RINGS_MAX;
}

static struct act_iv *act_new(struct engine *e, struct thread *t)
{
	struct act_iv *a;

	if (!t->acts) {
		/* past ACT_RINGS_MAX threads alive or lately gone, what a new one does is not kept */
		if (e->nact_rings >= ACT_RINGS_MAX && !act_rings_room(e))
			return NULL;
		t->acts = heap_calloc(e, ACTS_MAX, sizeof(*t->acts));
		e->nact_rings++;
	}
	if (t->nacts == ACTS_MAX) {
		/* the ring is full: the oldest goes (its time counts as on a CPU) */
		t->acts_head = (t->acts_head + 1) % ACTS_MAX;
		t->nacts--;
	}
	a = &t->acts[(t->acts_head + t->nacts++) % ACTS_MAX];
	memset(a, 0, sizeof(*a));
	return a;
}

/* an interval [s, end] of t in reclaim, an allocator or mmap call, a recorded I/O call */
void act_push(struct engine *e, struct thread *t, int kind, uint64_t s, uint64_t end)
{
	struct act_iv *a;

	if (t->sink || end <= s || !(a = act_new(e, t)))
		return;
	a->s = s;
	a->e = end;
	a->kind = (uint8_t)kind;
}

/*
 * A page fault of t at `at`, at address addr:
 * its cost is the calibrated one, and a fault that follows the last one
 * within ACT_FAULT_RUN_NS with t on a CPU all along lasted until it
 * (docs/ARCHITECTURE.md, "Fault cost calibration").
 */
void act_fault(struct engine *e, struct thread *t, uint64_t at, uint64_t addr)
{
	struct act_iv *a = act_last(t);
	const struct map_region *m;
	uint32_t map;

	if (t->sink)
		return;
	/* its region, in its own process (a followed child's too) */
	map = map_at(e, t->pid, addr, &t->act_map, &t->act_map_gen);
	m = map ? &e->maps[map - 1] : NULL;
	/*
	 * back to back: within ACT_FAULT_RUN_NS of the last one on its CPU (a
	 * preemption between them is no gap: the chain counts it apart), with no
	 * sleep between them
	 */
	if (a && a->kind == ENG_ACT_FAULTING && at >= a->last && t->act_slept <= a->last &&
	    t->act_wait >= a->wait && at - a->last - min64(t->act_wait - a->wait, at - a->last) <
	    ACT_FAULT_RUN_NS && !a->region == !m) {
		a->e = max64(a->e, at + e->fault_cost);
		a->last = at;
		a->wait = t->act_wait;
		return;
	}
	if (!(a = act_new(e, t)))
		return;
	a->s = a->last = at;
	a->e = at + e->fault_cost;
	a->kind = ENG_ACT_FAULTING;
	a->wait = t->act_wait;
	if (m) {
		a->region = m->anon ? 1 : 2;
		a->maplen = m->end - m->start;
		a->ref = map;
		a->key = m->start;
	}
}

/*
 * A run of back-to-back faults (a fault_run record) from first to last: the
 * thread faulted throughout, as if each fault were recorded on its own.
 */
void act_fault_run(struct engine *e, struct thread *t, uint64_t first, uint64_t last, uint64_t addr)
{
	struct act_iv *a;

	act_fault(e, t, first, addr);
	a = act_last(t);
	if (t->sink || !a || a->kind != ENG_ACT_FAULTING || a->last != first || last <= first)
		return;
	a->e = max64(a->e, last + e->fault_cost);
	a->last = last;
}

/* t leaves its CPU in state out_state at ts: asleep (D) inside the fault it was in? */
void act_switch_out(struct thread *t, uint8_t out_state, uint64_t ts)
{
	struct act_iv *a = act_last(t);

	t->act_fault_sleep = out_state == SB_STATE_DISK && a && a->kind == ENG_ACT_FAULTING &&
			     t->state == TS_RUNNING && t->since <= a->last && a->last <= ts &&
			     ts - a->last < ACT_FAULT_RUN_NS;
}

/* the I/O call act_push() just added at s: its call and file */
void act_io_name(struct engine *e, struct thread *t, uint64_t s, uint8_t call, uint32_t file)
{
	struct act_iv *a = act_last(t);
	const struct io_file *f = &e->io_files[file - 1];

	if (!a || a->kind != ENG_ACT_IO || a->s != s)
		return;
	a->io_call = call;
	a->io_kind = f->kind;
	a->ref = file;
	a->key = f->made;
	a->dev = f->dev;
}

/*
 * The engine_act_path() id of what v names (its I/O call's file, its
 * faults' file mapping), 0 when none or its slot in e->io_files or e->maps
 * was reused since. Asked only for the longest pieces of a told wait.
 */
uint32_t act_name_of(struct engine *e, const struct act_iv *v)
{
	if (v->kind == ENG_ACT_IO && v->ref && v->ref <= e->nio_files) {
		struct io_file *f = &e->io_files[v->ref - 1];

		if (f->made != v->key || f->dev != v->dev || !f->path[0])
			return 0;
		if (!f->act_path)
			f->act_path = act_path_id(e, f->path);
		return f->act_path;
	}
	if (v->kind == ENG_ACT_FAULTING && v->region == 2 && v->ref && v->ref <= e->nmaps) {
		struct map_region *m = &e->maps[v->ref - 1];

		if (m->start != v->key || m->anon || !m->path[0])
			return 0;
		if (!m->act_path)
			m->act_path = act_path_id(e, m->path);
		return m->act_path;
	}
	return 0;
}

/* the id of a path in the table of named files (the first ENG_ACT_PATHS_MAX), 0 when full */
uint32_t act_path_id(struct engine *e, const char *path)
{
	if (!path[0])
		return 0;
	for (uint32_t i = 0; i < e->nact_paths; i++)
		if (!strcmp(e->act_paths[i], path))
			return i + 1;
	if (e->nact_paths == ENG_ACT_PATHS_MAX)
		return 0;
	if (!e->act_paths)
		e->act_paths = heap_calloc(e, ENG_ACT_PATHS_MAX, sizeof(*e->act_paths));
	snprintf(e->act_paths[e->nact_paths], sizeof(e->act_paths[0]), "%s", path);
	return ++e->nact_paths;
}

void episode_push(struct engine *e, struct thread *t, uint8_t kind, uint64_t s, uint64_t end,
		  uint16_t cpu, uint32_t wpid, uint32_t wtid)
{
	struct episode *p;

	if (end <= s || t->sink)
		return;
	/* asleep inside its last fault: the fault lasted the sleep */
	if (t->act_fault_sleep && kind == EP_SLEEP_D) {
		struct act_iv *a = act_last(t);

		if (a && a->kind == ENG_ACT_FAULTING)
			a->e = max64(a->e, end);
	}
	t->act_fault_sleep = false;
	if (kind == EP_RUN || kind == EP_THROTTLED)
		t->act_wait += end - s;
	else
		t->act_slept = max64(t->act_slept, end);
	/* the history only needs to reach back as far as a wakeup chain looks */
	while (t->nepisodes && t->episodes[t->episodes_head].e + e->history_ns < e->now) {
		t->episodes_head = (t->episodes_head + 1) % t->episodes_cap;
		t->nepisodes--;
		e->episodes--;
	}
	if (t->nepisodes == t->episodes_cap) {
		uint32_t nc = t->episodes_cap ? t->episodes_cap * 2 : 8;
		struct episode *n = heap_calloc(e, nc, sizeof(*n));

		for (uint32_t i = 0; i < t->nepisodes; i++)
			n[i] = t->episodes[(t->episodes_head + i) % t->episodes_cap];
		free(t->episodes);
		heap_account(e, -(int64_t)(t->episodes_cap * sizeof(*n)));
		t->episodes = n;
		t->episodes_cap = nc;
		t->episodes_head = 0;
	}
	p = &t->episodes[(t->episodes_head + t->nepisodes++) % t->episodes_cap];
	p->s = s;
	p->e = end;
	t->episodes_end_max = max64(t->episodes_end_max, end);
	p->emax = t->episodes_end_max;
	p->kind = kind;
	p->cpu = cpu;
	p->wpid = wpid;
	p->wtid = wtid;
	if (++e->episodes > e->episodes_peak)
		e->episodes_peak = e->episodes;
}

static struct cpu_queue *cpu_queue_get(struct engine *e, uint32_t cpu)
{
	if (cpu >= e->ncpus) {
		uint32_t nc = e->ncpus ? e->ncpus : 8;
		struct cpu_queue *n;

		while (nc <= cpu)
			nc *= 2;
		n = heap_calloc(e, nc, sizeof(*n));
		if (e->ncpus)
			memcpy(n, e->cpus, e->ncpus * sizeof(*n));
		free(e->cpus);
		heap_account(e, -(int64_t)(e->ncpus * sizeof(*n)));
		e->cpus = n;
		e->ncpus = nc;
	}
	return &e->cpus[cpu];
}

static struct runslice *cpu_queue_at(struct cpu_queue *q, uint32_t i)
{
	return &q->slices[(q->head + i) % q->cap];
}

void runslice_push(struct engine *e, uint32_t cpu, const struct runslice *r)
{
	struct cpu_queue *q = cpu_queue_get(e, cpu);

	while (q->n && q->slices[q->head].e + e->history_ns < e->now) {
		q->head = (q->head + 1) % q->cap;
		q->n--;
		e->runslices--;
	}
	if (q->n == q->cap) {
		uint32_t nc = q->cap ? q->cap * 2 : 16;
		struct runslice *n = heap_calloc(e, nc, sizeof(*n));

		for (uint32_t i = 0; i < q->n; i++)
			n[i] = *cpu_queue_at(q, i);
		free(q->slices);
		heap_account(e, -(int64_t)(q->cap * sizeof(*n)));
		q->slices = n;
		q->cap = nc;
		q->head = 0;
	}
	*cpu_queue_at(q, q->n++) = *r;
	if (++e->runslices > e->runslices_peak)
		e->runslices_peak = e->runslices;
}

/*
 * Call fn for the part of every runslice on cpu inside [a, b], without
 * counting any instant twice; returns the time covered.
 */
uint64_t runslice_cover(struct engine *e, uint16_t cpu, uint64_t a, uint64_t b, runslice_fn fn,
			void *ctx)
{
	struct cpu_queue *q;
	uint32_t lo, hi;
	uint64_t covered = 0, upto = a;

	if (cpu >= e->ncpus || b <= a)
		return 0;
	q = &e->cpus[cpu];
	/* slices on one CPU follow each other: find the first starting at or after a */
	lo = 0;
	hi = q->n;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (cpu_queue_at(q, mid)->s < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	while (lo > 0 && cpu_queue_at(q, lo - 1)->e > a)
		lo--;
	for (uint32_t i = lo; i < q->n; i++) {
		const struct runslice *r = cpu_queue_at(q, i);
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

/* ---- the followed processes other than the target ---- */

#define PROCS_MAX 4096  /* as many as the kernel side follows at once */

struct proc *proc_find(const struct engine *e, uint32_t pid)
{
	for (uint32_t i = 0; i < e->nprocs; i++)
		if (e->procs[i].pid == pid)
			return &e->procs[i];
	return NULL;
}

/* p's command line and launcher ids freed, its slot emptied (for another process, or at the end) */
static void proc_clear(struct engine *e, struct proc *p)
{
	if (p->cmdline)
		heap_account(e, -(int64_t)(strlen(p->cmdline) + 1));
	if (p->ids)
		heap_account(e, -(int64_t)sizeof(*p->ids));
	free(p->cmdline);
	free(p->ids);
	memset(p, 0, sizeof(*p));
}

/*
 * A slot for a new process: a new one while fewer than PROCS_MAX are kept,
 * else the one that exited longest ago (a trainer whose DataLoader workers
 * start again every epoch makes thousands over a days-long watch); NULL when
 * all of them still run.
 */
static struct proc *proc_slot(struct engine *e)
{
	struct proc *old = NULL;

	if (e->nprocs < PROCS_MAX) {
		heap_grow(e, (void **)&e->procs, &e->procs_cap, e->nprocs + 1, sizeof(*e->procs));
		old = &e->procs[e->nprocs++];
		memset(old, 0, sizeof(*old));
		return old;
	}
	for (uint32_t i = 0; i < e->nprocs; i++)
		if (e->procs[i].gone_ns && (!old || e->procs[i].gone_ns < old->gone_ns))
			old = &e->procs[i];
	if (old)
		proc_clear(e, old);
	return old;
}

/*
 * A process other than the target was described (a thread record of its
 * main thread, or its thread_new): its parent, and its command line when
 * cmd is not NULL. The first description fixes its place among its
 * parent's children; a later one with another parent is a reused PID.
 */
void proc_note(struct engine *e, uint32_t pid, uint32_t ppid, const char *cmd, size_t n,
	       uint64_t ts)
{
	struct proc *p;

	if (!pid || pid == e->target_pid || !ppid)
		return;
	p = proc_find(e, pid);
	if (p && p->ppid != ppid) {
		p->ppid = 0; /* a reused PID: noted anew below */
		p->torch_feeder = false;
		p->comm[0] = 0;
	} else if (!p) {
		if (!(p = proc_slot(e)))
			return;
		p->pid = pid;
	}
	if (!p->ppid) {
		const char *pc = thread_name_of(e, ppid);

		if (!pc[0] && ppid == e->target_pid)
			pc = e->target_comm;
		p->ppid = ppid;
		p->order = ++e->procs_noted;
		p->born_ns = ts;
		p->gone_ns = 0;
		/* named after its parent as it was then: a parent that exec'd since is another program */
		snprintf(p->parent_comm, sizeof(p->parent_comm), "%.*s", SB_COMM_LEN - 1, pc);
	}
	if (cmd) {
		if (p->cmdline) {
			heap_account(e, -(int64_t)(strlen(p->cmdline) + 1));
			free(p->cmdline);
		}
		p->cmdline = heap_strndup(e, cmd, n);
	}
}

void proc_gone(struct engine *e, uint32_t pid, uint64_t ts)
{
	struct proc *p = pid != e->target_pid ? proc_find(e, pid) : NULL;

	if (p && !p->gone_ns)
		p->gone_ns = ts ? ts : 1;
}

void proc_ids_note(struct engine *e, uint32_t pid, const struct proc_ids *ids)
{
	struct proc *p = pid != e->target_pid ? proc_find(e, pid) : NULL;

	if (!p)
		return;
	if (!ids) {
		if (p->ids)
			heap_account(e, -(int64_t)sizeof(*p->ids));
		free(p->ids);
		p->ids = NULL;
		return;
	}
	if (!p->ids) {
		if (!(p->ids = malloc(sizeof(*p->ids))))
			return;
		heap_account(e, (int64_t)sizeof(*p->ids));
	}
	*p->ids = *ids;
}

static const char *proc_cmdline(const struct engine *e, uint32_t pid);
static bool same_cmdline(const char *a, const char *b);

/*
 * A multiprocessing forkserver: what Python puts on its command line, which
 * its forks keep (they are the children it starts, not forkservers)
 */
static bool is_forkserver(const struct engine *e, const struct proc *p)
{
	return p && p->cmdline && strstr(p->cmdline, "from multiprocessing.forkserver import main") &&
	       !same_cmdline(proc_cmdline(e, p->ppid), p->cmdline);
}

/*
 * The process a child works for: its parent, or for a child that a
 * multiprocessing forkserver started, the forkserver's parent (a DataLoader
 * with multiprocessing_context="forkserver": its workers are the
 * forkserver's children, the trainer maps their tensors)
 */
static uint32_t proc_owner(const struct engine *e, const struct proc *p)
{
	const struct proc *q = proc_find(e, p->ppid);

	return q && q->ppid && is_forkserver(e, q) ? q->ppid : p->ppid;
}

/*
 * PyTorch shares a tensor between processes through shared memory named
 * torch_<creator's pid>_... (/dev/shm): a parent that maps one its child made
 * is being handed tensors by it, as a DataLoader's main process by a worker
 * (schemas/report.md, "Child processes and what a waker did").
 */
void proc_shm_note(struct engine *e, uint32_t pid, const char *path)
{
	const char *b = strrchr(path, '/');
	char *end;
	unsigned long creator;
	struct proc *p;

	b = b ? b + 1 : path;
	if (strncmp(b, "torch_", 6) || b[6] < '0' || b[6] > '9')
		return;
	creator = strtoul(b + 6, &end, 10);
	if (*end != '_' || !creator || creator > UINT32_MAX || creator == pid)
		return;
	p = proc_find(e, (uint32_t)creator);
	if (p && proc_owner(e, p) == pid)
		p->torch_feeder = true;
}

void procs_free(struct engine *e)
{
	for (uint32_t i = 0; i < e->nprocs; i++)
		proc_clear(e, &e->procs[i]);
	free(e->procs);
	e->procs = NULL;
	e->nprocs = e->procs_cap = 0;
}

uint32_t engine_process_parent(const struct engine *e, uint32_t pid)
{
	const struct proc *p = proc_find(e, pid);

	return p ? p->ppid : 0;
}

const char *engine_act_path(const struct engine *e, uint32_t id)
{
	return id && id <= e->nact_paths ? e->act_paths[id - 1] : "";
}

/* the comm of a process: its main thread's, the target's */
static const char *proc_comm(const struct engine *e, uint32_t pid)
{
	const char *c = thread_name_of(e, pid);

	if (!c[0] && pid == e->target_pid)
		c = e->target_comm;
	return c[0] ? c : "process";
}

/* the name of p's parent as it was when p came (its program then), else as it is */
static const char *parent_name(const struct engine *e, const struct proc *p)
{
	return p->parent_comm[0] ? p->parent_comm : proc_comm(e, p->ppid);
}

/*
 * What PyTorch (2.3 on) names a DataLoader worker process's main thread
 * (torch.multiprocessing._set_thread_name in the worker loop)
 */
#define DATALOADER_WORKER_COMM "pt_data_worker"

enum proc_role { ROLE_CHILD, ROLE_LOADER, ROLE_RANK, ROLE_MP_CHILD, ROLE_FORKSERVER, ROLE_TRACKER };

static const char *const role_names[] = {
	[ROLE_CHILD] = "child process",
	[ROLE_LOADER] = "DataLoader worker",
	[ROLE_RANK] = "rank",
	[ROLE_MP_CHILD] = "multiprocessing child",
	[ROLE_FORKSERVER] = "multiprocessing forkserver",
	[ROLE_TRACKER] = "multiprocessing resource tracker",
};

/* the rank its environment sets ("" if none): the target's from its own record */
static const char *proc_rank(const struct engine *e, uint32_t pid)
{
	const struct proc *p;

	if (pid == e->target_pid)
		return e->identity.rank;
	p = proc_find(e, pid);
	return p && p->ids ? p->ids->rank : "";
}

/* the command line of a followed process (NULL: not said) */
static const char *proc_cmdline(const struct engine *e, uint32_t pid)
{
	const struct proc *p;

	if (pid == e->target_pid)
		return e->target_cmdline;
	p = proc_find(e, pid);
	return p ? p->cmdline : NULL;
}

/* the same command line: the target's record keeps its first 1023 bytes */
static bool same_cmdline(const char *a, const char *b)
{
	size_t la, lb;

	if (!a || !b)
		return false;
	la = strlen(a);
	lb = strlen(b);
	if (la >= 1023 && lb >= 1023)
		return !strncmp(a, b, 1023);
	return la == lb && !strcmp(a, b);
}

/* what a followed descendant is, as far as the trace says (schemas/report.md) */
static enum proc_role proc_role(const struct engine *e, const struct proc *p)
{
	const char *cmd = p->cmdline ? p->cmdline : "";
	const char *rank = p->ids ? p->ids->rank : "";

	/* a DataLoader names its workers so from PyTorch 2.3; they hand their parent tensors */
	if (!strcmp(thread_name_of(e, p->pid), DATALOADER_WORKER_COMM) || p->torch_feeder)
		return ROLE_LOADER;
	/* a launcher's child that its environment gives a rank of its own (a fork keeps its parent's) */
	if (rank[0] && strcmp(rank, proc_rank(e, p->ppid)))
		return ROLE_RANK;
	/*
	 * a fork keeps its parent's command line: whatever that says, it says of
	 * the parent; a forkserver's forks are the children it starts
	 */
	if (same_cmdline(proc_cmdline(e, p->ppid), p->cmdline))
		return strstr(cmd, "from multiprocessing.forkserver import main") ? ROLE_MP_CHILD
										   : ROLE_CHILD;
	/* what Python's multiprocessing puts on the command line of the processes it starts */
	if (strstr(cmd, "from multiprocessing.spawn import spawn_main") ||
	    strstr(cmd, "--multiprocessing-fork"))
		return ROLE_MP_CHILD;
	if (is_forkserver(e, p))
		return ROLE_FORKSERVER;
	if (strstr(cmd, "from multiprocessing.resource_tracker import main"))
		return ROLE_TRACKER;
	return ROLE_CHILD;
}

bool proc_named_apart(const struct engine *e, uint32_t pid)
{
	const struct proc *p = pid != e->target_pid ? proc_find(e, pid) : NULL;

	if (!p || !p->ppid)
		return false;
	switch (proc_role(e, p)) {
	case ROLE_LOADER:
	case ROLE_RANK:
	case ROLE_FORKSERVER:
	case ROLE_TRACKER:
		return true;
	default:
		return false;
	}
}

bool engine_process_name(const struct engine *e, uint32_t pid, char *buf, size_t len)
{
	const struct proc *p = pid != e->target_pid ? proc_find(e, pid) : NULL;
	const char *own;
	enum proc_role role;
	uint32_t n = 1;

	if (len)
		buf[0] = 0;
	if (!p || !p->ppid)
		return false;
	role = proc_role(e, p);
	own = thread_name_of(e, pid);
	/* a child that named itself, or whose program is not its parent's, says what it is: its name first */
	if (!own[0] || !strcmp(own, parent_name(e, p)))
		own = NULL;
	if (role == ROLE_RANK) {
		snprintf(buf, len, "%s%srank %s of %s[%u]", own ? own : "", own ? ", " : "",
			 p->ids->rank, parent_name(e, p), p->ppid);
		return true;
	}
	if (role == ROLE_FORKSERVER || role == ROLE_TRACKER) {
		snprintf(buf, len, "%s of %s[%u]", role_names[role], parent_name(e, p), p->ppid);
		return true;
	}
	/*
	 * N among the parent's children of the same role that were still there
	 * when it came, in the order they were seen: a DataLoader's workers of
	 * one epoch are 1 and 2 again when the last epoch's exited before them
	 */
	/* a DataLoader's workers are its, also where a forkserver started them */
	uint32_t of = role == ROLE_LOADER ? proc_owner(e, p) : p->ppid;
	const char *of_name = of == p->ppid ? parent_name(e, p) : proc_comm(e, of);

	for (uint32_t i = 0; i < e->nprocs; i++) {
		const struct proc *q = &e->procs[i];

		/* the cheap tests first: a parent's and a role's look-ups go through every process */
		if (q->order < p->order && !(q->gone_ns && q->gone_ns <= p->born_ns) &&
		    (role == ROLE_LOADER ? proc_owner(e, q) : q->ppid) == of &&
		    proc_role(e, q) == role)
			n++;
	}
	if (role == ROLE_CHILD && own)
		snprintf(buf, len, "%s, %s %u of %s[%u]", own, role_names[role], n,
			 of_name, of);
	else
		snprintf(buf, len, "%s %u of %s[%u]", role_names[role], n, of_name, of);
	return true;
}

const char *engine_thread_name(const struct engine *e, uint32_t tid)
{
	return thread_name_of(e, tid);
}
