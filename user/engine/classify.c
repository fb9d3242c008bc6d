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
static const uint8_t overlay_priority[ENG_NCAUSE] = {
	[ENG_MEM_RECLAIM] = 7, [ENG_PAGE_FAULT] = 6, [ENG_IO_WAIT] = 5, [ENG_CUDA_SYNC] = 4,
	[ENG_CUDA_ALLOC] = 4, [ENG_CUDA_API] = 3, [ENG_ALLOC] = 2, [ENG_MIGRATION] = 1,
};

void accum_reset(struct accum *a)
{
	memset(a->ns, 0, sizeof(a->ns));
	memset(a->count, 0, sizeof(a->count));
	a->nculprits = 0;
	a->npending = 0;
	a->pending_extra = 0;
	a->nio = 0;
	a->nmoves = 0;
	a->nmaps = 0;
	a->nirqs = 0;
}

void accum_free(struct engine *e, struct accum *a)
{
	free(a->culprits);
	heap_account(e, -(int64_t)(a->culprits_cap * sizeof(*a->culprits)));
	a->culprits = NULL;
	a->culprits_cap = a->nculprits = 0;
}

bool eng_who_same(const struct eng_who *a, const struct eng_who *b)
{
	return a->pid == b->pid && a->tid == b->tid && a->via_tid == b->via_tid &&
	       !strcmp(a->comm, b->comm);
}

/* what a waker did, added up: the named preemptor and sleep are those of the longest piece */
static void act_merge(struct eng_act *d, const struct eng_act *s)
{
	for (int k = 0; k < ENG_NACT; k++) {
		d->ns[k] += s->ns[k];
		d->on_ns[k] += s->on_ns[k];
	}
	if (s->by_max > d->by_max) {
		d->by_max = s->by_max;
		d->by_pid = s->by_pid;
		d->by_tid = s->by_tid;
		memcpy(d->by_comm, s->by_comm, sizeof(d->by_comm));
	}
	if (s->on_max > d->on_max) {
		d->on_max = s->on_max;
		d->on_pid = s->on_pid;
		d->on_tid = s->on_tid;
		memcpy(d->on_comm, s->on_comm, sizeof(d->on_comm));
	}
	if (s->io_max > d->io_max) {
		d->io_max = s->io_max;
		d->io_call = s->io_call;
		d->io_kind = s->io_kind;
		d->io_path = s->io_path;
	}
	if (s->fault_max > d->fault_max) {
		d->fault_max = s->fault_max;
		d->fault_region = s->fault_region;
		d->fault_anon = s->fault_anon;
		d->fault_len = s->fault_len;
		d->fault_path = s->fault_path;
	}
}

/*
 * The recorder's own threads taking the CPU from a critical thread, or keeping
 * it asleep (the waker, or what preempted the waker), cost the step what the
 * tracer adds: `tracer`, with the agent as its culprit, never a host cause
 * (schemas/report.md, the cause table)
 */
static int tracer_or(const struct engine *e, int cause, const struct eng_who *w)
{
	if (w && e->identity.agent_pid && w->pid == e->identity.agent_pid &&
	    (cause == ENG_CPU_WAIT || cause == ENG_MIGRATION || cause == ENG_BLOCKED))
		return ENG_TRACER;
	return cause;
}

/* ns of cause on culprit w in a (the cause as it stands: already the tracer's where it is) */
static void culprit_put(struct engine *e, struct accum *a, int cause, const struct eng_who *w,
			uint64_t ns)
{
	for (uint32_t i = 0; i < a->nculprits; i++) {
		if (a->culprits[i].cause == cause && eng_who_same(&a->culprits[i].who, w)) {
			a->culprits[i].ns += ns;
			act_merge(&a->culprits[i].who.act, &w->act);
			return;
		}
	}
	if (a->nculprits >= CULPRITS_MAX)
		return; /* the time stays in ns[cause], without a name */
	heap_grow(e, (void **)&a->culprits, &a->culprits_cap, a->nculprits + 1, sizeof(*a->culprits));
	a->culprits[a->nculprits].cause = (uint8_t)cause;
	a->culprits[a->nculprits].who = *w;
	a->culprits[a->nculprits].ns = ns;
	a->nculprits++;
}

static void accum_culprit(struct engine *e, struct accum *a, int cause, const struct eng_who *w,
			  uint64_t ns)
{
	culprit_put(e, a, tracer_or(e, cause, w), w, ns);
}

static int accum_add(struct engine *e, struct accum *a, int cause, uint64_t ns,
		     const struct eng_who *w)
{
	cause = tracer_or(e, cause, w);
	if (!ns)
		return cause;
	a->ns[cause] += ns;
	if (w)
		culprit_put(e, a, cause, w, ns);
	return cause;
}

/*
 * A slot for a new (file, call) of ns in a's table: a free one, else the one
 * with the least time if ns is more (the report keeps the longest: a
 * checkpoint's fsync that comes after the loader's pipe reads of the step
 * must not find the table full of them); NULL if none.
 */
static struct io_use *io_slot(struct accum *a, uint64_t ns)
{
	struct io_use *least = NULL;

	if (a->nio < IO_USES_MAX)
		return &a->io[a->nio++];
	for (uint32_t i = 0; i < a->nio; i++)
		if (!least || a->io[i].ns < least->ns)
			least = &a->io[i];
	return least && least->ns < ns ? least : NULL;
}

/* io_wait time ns of the I/O call of overlay o, with its file */
static void accum_io(struct accum *a, const struct overlay *o, uint64_t ns)
{
	struct io_use *u = NULL;

	for (uint32_t i = 0; i < a->nio && !u; i++)
		if (a->io[i].file == o->io_file && a->io[i].call == o->io_call)
			u = &a->io[i];
	if (!u) {
		if (!(u = io_slot(a, ns)))
			return;
		memset(u, 0, sizeof(*u));
		u->file = o->io_file;
		u->call = o->io_call;
		u->first_seq = o->io_seq;
		u->first_bytes = o->io_bytes;
	}
	if (u->last_seq != o->io_seq) {
		u->calls++;
		u->bytes += o->io_bytes;
		u->last_seq = o->io_seq;
	}
	u->ns += ns;
	if (o->io_written > u->written)
		u->written = o->io_written;
}

/* migration time ns of t: who made its last move */
static void accum_move(struct accum *a, const struct thread *t, uint64_t ns)
{
	struct move_use *u = NULL;

	if (!ns || t->mv_how == ENG_MOVE_NONE)
		return;
	for (uint32_t i = 0; i < a->nmoves && !u; i++)
		if (a->moves[i].how == t->mv_how && a->moves[i].by == t->mv_by)
			u = &a->moves[i];
	if (!u) {
		if (a->nmoves == MOVES_MAX)
			return;
		u = &a->moves[a->nmoves++];
		memset(u, 0, sizeof(*u));
		u->how = t->mv_how;
		u->by = t->mv_by;
		u->from = u->to = -1;
	}
	u->ns += ns;
	/* the last move whose both ends are known */
	if (t->mv_from >= 0 && t->mv_to >= 0) {
		u->from = t->mv_from;
		u->to = t->mv_to;
	}
}

/* page_fault time ns of t's fault, with its region */
static void accum_map(struct engine *e, struct accum *a, const struct thread *t, uint64_t ns)
{
	struct map_use *u;

	if (ns && t->fault_map && t->fault_map <= e->nmaps && (u = map_use_of(e, a, t->fault_map)))
		u->ns += ns;
}

static void maps_merge(struct engine *e, struct accum *dst, const struct accum *src)
{
	for (uint32_t k = 0; k < src->nmaps; k++) {
		const struct map_use *s = &src->maps[k];
		struct map_use *u = NULL;

		for (uint32_t i = 0; i < dst->nmaps && !u; i++)
			if (dst->maps[i].map == s->map && dst->maps[i].start == s->start)
				u = &dst->maps[i];
		if (!u) {
			if (dst->nmaps < MAP_USES_MAX) {
				dst->maps[dst->nmaps++] = *s;
				continue;
			}
			/* full: in place of an entry that cannot be named, or of one with less time */
			uint32_t i = map_use_spare(e, dst->maps, dst->nmaps, s->ns);

			if (i != UINT32_MAX)
				dst->maps[i] = *s;
			continue;
		}
		u->ns += s->ns;
		u->err += s->err;
		u->faults += s->faults;
	}
}

static void moves_merge(struct accum *dst, const struct accum *src)
{
	for (uint32_t k = 0; k < src->nmoves; k++) {
		const struct move_use *s = &src->moves[k];
		struct move_use *u = NULL;

		for (uint32_t i = 0; i < dst->nmoves && !u; i++)
			if (dst->moves[i].how == s->how && dst->moves[i].by == s->by)
				u = &dst->moves[i];
		if (!u) {
			if (dst->nmoves < MOVES_MAX)
				dst->moves[dst->nmoves++] = *s;
			continue;
		}
		u->ns += s->ns;
		if (s->from >= 0 && s->to >= 0) {
			u->from = s->from;
			u->to = s->to;
		}
	}
}

/* irq time ns of source b (an interrupt run's part) in a */
static void accum_irq(struct accum *a, const struct irq_burst *b, uint64_t ns)
{
	struct irq_use *u = NULL;

	for (uint32_t i = 0; i < a->nirqs && !u; i++)
		if (a->irqs[i].src == b->src &&
		    (b->src != SB_NSOFTIRQ || !strncmp(a->irqs[i].name, b->name, SB_COMM_LEN)))
			u = &a->irqs[i];
	if (!u && a->nirqs < IRQ_USES_MAX) {
		u = &a->irqs[a->nirqs++];
		u->src = b->src;
		u->irq = b->irq;
		memcpy(u->name, b->name, SB_COMM_LEN);
		u->ns = 0;
	}
	if (u) {
		u->ns += ns;
		u->cpu = b->cpu;
	}
}

static void irqs_merge(struct accum *dst, const struct accum *src)
{
	for (uint32_t k = 0; k < src->nirqs; k++) {
		struct irq_burst b = { .src = src->irqs[k].src, .irq = src->irqs[k].irq,
				       .cpu = src->irqs[k].cpu };

		memcpy(b.name, src->irqs[k].name, SB_COMM_LEN);
		accum_irq(dst, &b, src->irqs[k].ns);
	}
}

static void io_merge(struct accum *dst, const struct accum *src)
{
	for (uint32_t k = 0; k < src->nio; k++) {
		const struct io_use *s = &src->io[k];
		struct io_use *u = NULL;

		for (uint32_t i = 0; i < dst->nio && !u; i++)
			if (dst->io[i].file == s->file && dst->io[i].call == s->call)
				u = &dst->io[i];
		if (!u) {
			if ((u = io_slot(dst, s->ns)))
				*u = *s;
			continue;
		}
		u->calls += s->calls;
		u->bytes += s->bytes;
		if (s->first_seq == u->last_seq && u->calls > 1) {
			/* one call spanning two gaps: counted once */
			u->calls--;
			u->bytes -= min64(u->bytes, s->first_bytes);
		}
		u->last_seq = s->last_seq;
		u->ns += s->ns;
		u->written = max64(u->written, s->written);
	}
}

void accum_merge(struct engine *e, struct accum *dst, const struct accum *src)
{
	io_merge(dst, src);
	moves_merge(dst, src);
	irqs_merge(dst, src);
	maps_merge(e, dst, src);
	for (int c = 0; c < ENG_NCAUSE; c++)
		dst->ns[c] += src->ns[c];
	for (int c = 0; c < ENG_NCOUNT; c++)
		dst->count[c] += src->count[c];
	for (uint32_t i = 0; i < src->nculprits; i++)
		culprit_put(e, dst, src->culprits[i].cause, &src->culprits[i].who, src->culprits[i].ns);
}

/* t's track: its slice in one state is extended while the next one follows on */
void timeline_thread_flush(struct engine *e, struct thread *t)
{
	if (t->track_state && t->track_end > t->track_start)
		e->opts.timeline.thread_state(e->opts.timeline.ctx,
					      e->target_pid ? e->target_pid : t->pid, t->tid,
					      t->track_state, t->track_start, t->track_end);
	t->track_state = NULL;
}

static void timeline_thread(struct engine *e, struct thread *t, const char *name, uint64_t s,
			    uint64_t end)
{
	if (!e->opts.timeline.thread_state || end <= s)
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

struct classify_ctx {
	struct thread *t;
	struct accum *a;
	uint64_t upto;           /* timeline: how far the thread's track is drawn */
	const struct thread *via;   /* chain: the waker that was preempted */
	const struct eng_who *dflt;
	struct eng_act *act;        /* chain: what the first waker did, NULL past it */
};

/* comm: at least SB_COMM_LEN bytes (a NUL in the first 10 differs from the prefix anyway) */
bool is_stopper(const char *comm)
{
	return !memcmp(comm, "migration/", 10);
}

static void who_of_runslice(struct eng_who *w, const struct runslice *r, uint16_t cpu)
{
	memset(w, 0, sizeof(*w));
	w->pid = r->pid;
	w->tid = r->tid;
	comm_copy(w->comm, r->comm);
	w->cpu = cpu;
}

/*
 * Of a runslice's part [a, b], the hypervisor's steal: the slice's steal in
 * proportion (the count says how much, not when)
 */
static uint64_t slice_steal(const struct runslice *r, uint64_t a, uint64_t b)
{
	/* never more than the slice lasted (a reading of the count can lag: bpf/sched.bpf.c) */
	uint64_t st;

	if (!r->steal_ns || r->e <= r->s)
		return 0;
	st = min64(r->steal_ns, r->e - r->s);
	return min64((uint64_t)((unsigned __int128)st * (b - a) / (r->e - r->s)), b - a);
}

/*
 * A slice of t itself: the last switch traced on its CPU before it was not
 * t's switch-in (one the kernel did not trace: host.c, ev_runslice), and t
 * ran there however long the sweep had it waiting, preempted elsewhere
 */
static bool own_slice(const struct runslice *r, const struct thread *t)
{
	return r->tid == t->tid && r->pid == t->pid;
}

static void classify_overlays(struct engine *e, struct thread *t, struct accum *a, uint64_t s,
			      uint64_t end, bool asleep);

/* the waiting thread's track drawn as its wait up to a, from where it was drawn to */
static void draw_wait_to(struct engine *e, struct classify_ctx *c, uint64_t a)
{
	if (a > c->upto)
		timeline_thread(e, c->t, eng_cause_name(c->t->migrated ? ENG_MIGRATION : ENG_CPU_WAIT),
				c->upto, a);
}

static void on_preemptor(struct engine *e, void *ctx, const struct runslice *r, uint16_t cpu,
			 uint64_t a, uint64_t b)
{
	struct classify_ctx *c = ctx;
	struct eng_who w;
	int cause;
	uint64_t st = slice_steal(r, a, b);

	if (st) {
		accum_add(e, c->a, ENG_VM_STEAL, st, NULL);
		if (e->opts.timeline.thread_state || e->opts.timeline.interferer) {
			draw_wait_to(e, c, a);
			timeline_thread(e, c->t, eng_cause_name(ENG_VM_STEAL), a, a + st);
			c->upto = a + st;
		}
		a += st;
		if (b <= a)
			return;
	}
	if (own_slice(r, c->t)) {
		/*
		 * Its own slice: it ran here while the sweep had it waiting, on
		 * a switch-in the trace lacks: running time, classified as such
		 */
		e->switch_ins_inferred++;
		if (e->opts.timeline.thread_state || e->opts.timeline.interferer)
			draw_wait_to(e, c, a);
		c->upto = b;
		classify_overlays(e, c->t, c->a, a, b, false);
		return;
	}
	who_of_runslice(&w, r, cpu);
	/* the wait right after a move is the move's, whoever holds the new CPU */
	cause = is_stopper(w.comm) || c->t->migrated ? ENG_MIGRATION : ENG_CPU_WAIT;
	/* the move's own time only: the agent's slice after a move is the tracer's */
	cause = accum_add(e, c->a, cause, b - a, is_stopper(w.comm) ? NULL : &w);
	if (cause == ENG_MIGRATION)
		accum_move(c->a, c->t, b - a);
	if (e->opts.timeline.thread_state || e->opts.timeline.interferer) {
		draw_wait_to(e, c, a);
		c->upto = b;
		if (e->opts.timeline.interferer)
			e->opts.timeline.interferer(e->opts.timeline.ctx, &w, c->t->tid, a, b);
		timeline_thread(e, c->t, eng_cause_name(cause), a, b);
	}
}

static void classify_runnable(struct engine *e, struct thread *t, struct accum *a, uint64_t s,
			      uint64_t end)
{
	struct classify_ctx c = { .t = t, .a = a, .upto = s };
	uint64_t cov;
	int cause = t->migrated ? ENG_MIGRATION : ENG_CPU_WAIT;

	if (t->throttled) {
		/* its cgroup's CPU quota: whoever ran on the CPU meanwhile took nothing from it */
		accum_add(e, a, ENG_CPU_THROTTLE, end - s, NULL);
		timeline_thread(e, t, eng_cause_name(ENG_CPU_THROTTLE), s, end);
		return;
	}
	cov = runslice_cover(e, t->cpu, s, end, on_preemptor, &c);

	accum_add(e, a, cause, end - s - cov, NULL);
	if (cause == ENG_MIGRATION)
		accum_move(a, t, end - s - cov);
	if (c.upto < end)
		timeline_thread(e, t, eng_cause_name(cause), c.upto, end);
}

/*
 * Of t's unexplained on-CPU time [x, y], how much its bursts claim as alloc
 * (used up); *tracer: how much of that is the probes' own cost, at the share
 * they have of the calls' own time (a storm's pauses are alloc too: its
 * tracer time is used up before the rest of its span).
 */
static uint64_t burst_take(struct thread *t, uint64_t x, uint64_t y, uint64_t *tracer)
{
	uint64_t got = 0;

	*tracer = 0;
	for (uint32_t i = 0; i < t->nbursts && got < y - x; i++) {
		struct burst *b = &t->bursts[i];
		uint64_t lo = max64(x, b->s), hi = min64(y, b->e), take, tr;

		if (hi <= lo || !b->left)
			continue;
		take = min64(min64(hi - lo, b->left), y - x - got);
		if (take == b->left || !b->calls_ns)
			tr = b->tracer;
		else
			tr = min64(b->tracer, (uint64_t)((unsigned __int128)b->tracer_all * take /
							 b->calls_ns));
		b->tracer -= tr;
		b->left -= take;
		got += take;
		*tracer += tr;
	}
	return got;
}

/*
 * Of t's unexplained on-CPU time [x, y], how much its interrupt runs' sources
 * claim as irq (used up), by source into a (NULL: outside a gap); *tracer:
 * how much of that is the interrupt probes' own cost, as burst_take.
 */
static uint64_t irq_take(struct engine *e, struct thread *t, struct accum *a, uint64_t x, uint64_t y,
			 uint64_t *tracer)
{
	uint64_t got = 0;

	*tracer = 0;
	if (t->candidate < 0)
		return 0;
	for (uint32_t i = 0; i < t->nirqb && got < y - x; i++) {
		struct irq_burst *b = &e->irqb[t->candidate][i];
		uint64_t lo = max64(x, b->s), hi = min64(y, b->e), take, tr;

		if (hi <= lo || !b->left)
			continue;
		take = min64(min64(hi - lo, b->left), y - x - got);
		tr = take == b->left ? b->tracer :
		     min64(b->tracer, share(b->tracer_all, take, b->calls_ns ? b->calls_ns : take));
		b->tracer -= tr;
		b->left -= take;
		got += take;
		*tracer += tr;
		if (a && take > tr)
			accum_irq(a, b, take - tr);
	}
	return got;
}

/* the cut points of a piece of time, in order (a few dozen: insertion sort) */
static void sort_points(uint64_t *pts, int np)
{
	for (int i = 1; i < np; i++)
		for (int j = i; j > 0 && pts[j - 1] > pts[j]; j--) {
			uint64_t x = pts[j];

			pts[j] = pts[j - 1];
			pts[j - 1] = x;
		}
}

/*
 * The overlays in force on t over [s, end], fault included; top priority per
 * sub-interval. a == NULL: outside any gap, only use up the bursts' budgets
 * (on-CPU time there is their time as much as inside a gap).
 */
static void classify_overlays(struct engine *e, struct thread *t, struct accum *a, uint64_t s,
			      uint64_t end, bool asleep)
{
	uint64_t pts[2 * OVERLAYS_MAX + 2 * BURSTS_MAX + 2 * IRQ_BURSTS_MAX + 6];
	struct overlay ov[OVERLAYS_MAX + 1];
	int nov = 0, np = 0;

	for (uint32_t i = 0; i < t->noverlays; i++)
		if (t->overlays[i].e > s && t->overlays[i].s < end)
			ov[nov++] = t->overlays[i];
	if (t->fault_open) {
		uint64_t fe = asleep ? end : t->fault_decided ? t->fault_end : t->fault_last + e->fault_cost;

		if (asleep || (fe > s && t->fault_at < end))
			ov[nov++] = (struct overlay){ .s = asleep ? s : t->fault_at, .e = fe,
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
	for (uint32_t i = 0; !asleep && i < t->nbursts; i++) {
		if (t->bursts[i].s > s && t->bursts[i].s < end)
			pts[np++] = t->bursts[i].s;
		if (t->bursts[i].e > s && t->bursts[i].e < end)
			pts[np++] = t->bursts[i].e;
	}
	for (uint32_t i = 0; !asleep && t->candidate >= 0 && i < t->nirqb; i++) {
		const struct irq_burst *q = &e->irqb[t->candidate][i];

		if (q->s > s && q->s < end)
			pts[np++] = q->s;
		if (q->e > s && q->e < end)
			pts[np++] = q->e;
	}
	sort_points(pts, np);
	for (int i = 0; i + 1 < np; i++) {
		uint64_t x = pts[i], y = pts[i + 1], tr;
		int best = -1, bestk = -1;

		if (y <= x)
			continue;
		bool trap = false;

		for (int k = 0; k < nov; k++) {
			if (ov[k].s > x || ov[k].e < y)
				continue;
			if (ov[k].cause == ENG_TRACER)
				trap = true;
			else if (best < 0 || overlay_priority[ov[k].cause] > overlay_priority[best] ||
				 (ov[k].cause == best && ov[k].io_file && bestk >= 0 && !ov[bestk].io_file)) {
				best = ov[k].cause;
				bestk = k;
			}
		}
		/*
		 * The probes of an allocator call (host.c): their time is taken
		 * out of the call's, not out of a fault or reclaim inside it.
		 */
		if (trap && !asleep && (best < 0 || best == ENG_ALLOC || best == ENG_MIGRATION))
			best = ENG_TRACER;
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
			if (best < 0 && !asleep) {
				uint64_t iq = irq_take(e, t, NULL, x, y, &tr);

				burst_take(t, x + iq, y, &tr);
			}
			continue;
		}
		if (best == ENG_PAGE_FAULT && !asleep && t->fault_tracer) {
			/*
			 * The fault probes' own cost (host.c, fault_tracer_set), drawn
			 * as the fault's time is: its share of this piece of it
			 */
			uint64_t len = t->fault_last - t->fault_at + e->fault_cost;

			tr = (uint64_t)((unsigned __int128)t->fault_tracer_all * (y - x) / (len ? len : 1));
			tr = min64(min64(tr ? tr : 1, t->fault_tracer), y - x);
			t->fault_tracer -= tr;
			accum_add(e, a, ENG_TRACER, tr, NULL);
			timeline_thread(e, t, eng_cause_name(ENG_TRACER), x, x + tr);
			x += tr;
			if (y <= x)
				continue;
		}
		if (best >= 0) {
			accum_add(e, a, best, y - x, NULL);
			if (best == ENG_IO_WAIT && ov[bestk].io_file)
				accum_io(a, &ov[bestk], y - x);
			if (best == ENG_MIGRATION)
				accum_move(a, t, y - x);
			if (best == ENG_PAGE_FAULT)
				accum_map(e, a, t, y - x);
			timeline_thread(e, t, eng_cause_name(best), x, y);
		} else if (!asleep) {
			/*
			 * Interrupt handlers on its time (an interrupt run): irq,
			 * less their probes' own cost. In a burst of fast
			 * allocator calls: as much as its calls took is alloc,
			 * less the probes' own cost, which is tracer.
			 */
			uint64_t itr, iq = irq_take(e, t, a, x, y, &itr);
			uint64_t al = burst_take(t, x + iq, y, &tr), u = x;

			accum_add(e, a, ENG_TRACER, itr + tr, NULL);
			accum_add(e, a, ENG_IRQ, iq - itr, NULL);
			accum_add(e, a, ENG_ALLOC, al - tr, NULL);
			accum_add(e, a, ENG_HOST_COMPUTE, y - x - iq - al, NULL);
			if (itr + tr)
				timeline_thread(e, t, eng_cause_name(ENG_TRACER), u, u + itr + tr);
			u += itr + tr;
			if (iq > itr)
				timeline_thread(e, t, eng_cause_name(ENG_IRQ), u, u + iq - itr);
			u += iq - itr;
			if (al > tr)
				timeline_thread(e, t, eng_cause_name(ENG_ALLOC), u, u + al - tr);
			u += al - tr;
			if (u < y)
				timeline_thread(e, t, eng_cause_name(ENG_HOST_COMPUTE), u, y);
		} else {
			/* a plain sleep: why is known at the wakeup */
			timeline_thread(e, t, state_name(t->state), x, y);
			if (a->npending && a->pending[a->npending - 1].b == x)
				a->pending[a->npending - 1].b = y;
			else if (a->npending < PENDING_MAX)
				a->pending[a->npending++] = (struct pending_sleep){ x, y };
			else
				a->pending_extra += y - x;
			a->pending_state = t->state;
		}
	}
}

static struct accum *piece_accum(struct piece *p, int cand)
{
	return cand >= 0 ? &p->accum[cand] : NULL;
}

static struct thread *followed_waker(struct engine *e, uint32_t pid, uint32_t tid,
				     const struct thread *sleeper);
static void wakeup_chain(struct engine *e, struct accum *a, uint64_t s, uint64_t end,
			 struct thread *w, const struct eng_who *dflt, const struct thread *victim,
			 int depth, struct eng_act *act);

/*
 * [x, y] inside t's scheduler run (host.c, ev_sched_run): its share of what
 * is left of the run's sleeps and waits, as much as its length is of what is
 * left of the span. In a piece: the on-CPU rest classified like any running
 * time, the sleeps blocked on the run's waker (followed through its wakeup
 * chain over their share of the span, as a sleep of records is), the waits
 * steal, then cpu_wait on its runner (none where the CPU was idle: the
 * wakeup's latency).
 */
static void account_srun(struct engine *e, struct thread *t, struct piece *p, uint64_t x, uint64_t y)
{
	uint64_t left = t->srun_e - x, len = y - x, sl, wt, idle, st, on, c;
	struct eng_who w;
	struct accum *a;
	int cause;

	if (y <= x || !left)
		return;
	if (p && x < p->start && y > p->start) {
		account_srun(e, t, NULL, x, p->start);
		x = p->start;
		left = t->srun_e - x;
		len = y - x;
	}
	sl = share(t->srun_sleep, len, left);
	wt = share(t->srun_wait, len, left);
	idle = min64(share(t->srun_idle, len, left), wt);
	st = min64(share(t->srun_steal, len, left), wt - idle);
	if (sl + wt > len) {
		sl = min64(sl, len);
		wt = len - sl;
		idle = min64(idle, wt);
		st = min64(st, wt - idle);
	}
	t->srun_sleep -= sl;
	t->srun_wait -= wt;
	t->srun_idle -= idle;
	t->srun_steal -= st;
	on = len - sl - wt;
	a = p && x >= p->start ? piece_accum(p, t->candidate) : NULL;
	if (a) {
		c = share(t->srun_sleeps, len, left);
		a->count[ENG_N_SLEEPS] += (uint32_t)min64(c, UINT32_MAX - a->count[ENG_N_SLEEPS]);
		t->srun_sleeps -= c;
		c = share(t->srun_preempts, len, left);
		a->count[ENG_N_PREEMPT] += (uint32_t)min64(c, UINT32_MAX - a->count[ENG_N_PREEMPT]);
		t->srun_preempts -= c;
	}
	if (!a) {
		if (t->nbursts || t->nirqb)
			classify_overlays(e, t, NULL, x, x + on, false);
		timeline_thread(e, t, state_name(TS_RUNNING), x, y);
		return;
	}
	if (on)
		classify_overlays(e, t, a, x, x + on, false);
	x += on;
	memset(&w, 0, sizeof(w));
	w.pid = t->srun_waker_pid;
	w.tid = t->srun_waker_tid;
	comm_copy(w.comm, t->srun_waker_comm);
	w.cpu = -1;
	if (sl) {
		cause = w.tid && is_stopper(w.comm) ? ENG_MIGRATION : ENG_BLOCKED;
		if (cause == ENG_BLOCKED && w.tid) {
			/* what the waker did meanwhile decides, as for a sleep of records (resolve_sleep_accum) */
			struct thread *wt = followed_waker(e, w.pid, w.tid, t);
			struct eng_act act;

			memset(&act, 0, sizeof(act));
			wakeup_chain(e, a, x, x + sl, wt, &w, t, 0, wt ? &act : NULL);
			if (wt) {
				w.act = act;
				accum_culprit(e, a, ENG_BLOCKED, &w, 0);
				memset(&w.act, 0, sizeof(w.act));
			}
		} else {
			accum_add(e, a, cause, sl, NULL);
			if (cause == ENG_MIGRATION)
				accum_move(a, t, sl);
		}
		timeline_thread(e, t, eng_cause_name(cause), x, x + sl);
		x += sl;
	}
	if (st) {
		accum_add(e, a, ENG_VM_STEAL, st, NULL);
		timeline_thread(e, t, eng_cause_name(ENG_VM_STEAL), x, x + st);
		x += st;
	}
	if (idle) {
		accum_add(e, a, ENG_CPU_WAIT, idle, NULL);
		timeline_thread(e, t, eng_cause_name(ENG_CPU_WAIT), x, x + idle);
		x += idle;
	}
	if (wt > idle + st) {
		uint64_t n = wt - idle - st;

		memset(&w, 0, sizeof(w));
		w.pid = t->srun_runner_pid;
		w.tid = t->srun_runner_tid;
		comm_copy(w.comm, t->srun_runner_comm);
		w.cpu = t->cpu;
		cause = w.tid && is_stopper(w.comm) ? ENG_MIGRATION : ENG_CPU_WAIT;
		accum_add(e, a, cause, n, w.tid && cause == ENG_CPU_WAIT ? &w : NULL);
		if (cause == ENG_MIGRATION)
			accum_move(a, t, n);
		if (cause == ENG_CPU_WAIT && w.tid && e->opts.timeline.interferer)
			e->opts.timeline.interferer(e->opts.timeline.ctx, &w, t->tid, x, x + n);
		timeline_thread(e, t, eng_cause_name(cause), x, x + n);
	}
}

static void account_range(struct engine *e, struct thread *t, struct piece *p, uint64_t s, uint64_t to);

/* attribute t's time from its last cut up to `to` */
void thread_account(struct engine *e, struct thread *t, uint64_t to)
{
	uint64_t s = t->last_cut;
	struct piece *p = e->gap_open ? e->current_piece : NULL;

	if (to <= s)
		return;
	t->last_cut = to;
	/* the faults of its run up to now: counted in the piece they fell in */
	if (t->run_counted < t->run_n)
		run_count(e, t, p ? piece_accum(p, t->candidate) : NULL, p ? max64(s, p->start) : s, to);
	/* overlays that ended before now are of no further use */
	for (uint32_t i = 0; i < t->noverlays;) {
		if (t->overlays[i].e <= s)
			t->overlays[i] = t->overlays[--t->noverlays];
		else
			i++;
	}
	for (uint32_t i = 0; i < t->nbursts;) {
		if (t->bursts[i].e <= s || !t->bursts[i].left)
			t->bursts[i] = t->bursts[--t->nbursts];
		else
			i++;
	}
	for (uint32_t i = 0; t->candidate >= 0 && i < t->nirqb;) {
		struct irq_burst *q = e->irqb[t->candidate];

		if (q[i].e <= s || !q[i].left)
			q[i] = q[--t->nirqb];
		else
			i++;
	}
	if (t->srun_e > s && t->srun_s < to && t->state == TS_RUNNING) {
		/* a scheduler run: its span takes its share of the run's off-CPU time */
		uint64_t x = max64(s, t->srun_s), y = min64(to, t->srun_e);

		if (s < x)
			account_range(e, t, p, s, x);
		account_srun(e, t, p, x, y);
		if (y >= t->srun_e)
			t->srun_e = 0;
		if (y < to)
			account_range(e, t, p, y, to);
		return;
	}
	account_range(e, t, p, s, to);
}

/* t's time [s, to] in its state (no scheduler run over it); p: the open piece, or NULL */
static void account_range(struct engine *e, struct thread *t, struct piece *p, uint64_t s, uint64_t to)
{
	struct accum *a;

	if (!p) {
		if (t->state == TS_RUNNING && (t->nbursts || t->nirqb))
			classify_overlays(e, t, NULL, s, to, false);
		timeline_thread(e, t, state_name(t->state), s, to);
		return;
	}
	if (s < p->start) {
		if (t->state == TS_RUNNING && (t->nbursts || t->nirqb))
			classify_overlays(e, t, NULL, s, min64(p->start, to), false);
		s = p->start;
	}
	if (to <= s)
		return;
	a = piece_accum(p, t->candidate);
	switch (t->state) {
	case TS_RUNNING:
		classify_overlays(e, t, a, s, to, false);
		break;
	case TS_RUNNABLE:
		classify_runnable(e, t, a, s, to);
		break;
	case TS_SLEEP_S:
	case TS_SLEEP_D:
		classify_overlays(e, t, a, s, to, true);
		break;
	default:
		accum_add(e, a, ENG_UNKNOWN, to - s, NULL);
		timeline_thread(e, t, eng_cause_name(ENG_UNKNOWN), s, to);
		break;
	}
}

void account_candidates(struct engine *e, uint64_t t)
{
	for (int i = 0; i < e->ncandidates; i++)
		thread_account(e, e->candidates[i], t);
}

static void on_chain_preemptor(struct engine *e, void *ctx, const struct runslice *r, uint16_t cpu,
			       uint64_t a, uint64_t b)
{
	struct classify_ctx *c = ctx;
	struct eng_who w;
	uint64_t st = slice_steal(r, a, b);

	if (own_slice(r, c->via)) {
		/* the waker's own slice: it ran (on_preemptor), and is what the sleeper waited on */
		if (c->act)
			c->act->ns[ENG_ACT_ON_CPU] += b - a;
		accum_add(e, c->a, ENG_BLOCKED, b - a, c->dflt);
		return;
	}
	who_of_runslice(&w, r, cpu);
	if (st) {
		/* the waker waited for a CPU the hypervisor held */
		if (c->act)
			c->act->ns[ENG_ACT_PREEMPTED] += st;
		accum_add(e, c->a, ENG_VM_STEAL, st, NULL);
		a += st;
		if (b <= a)
			return;
	}
	if (c->act) {
		c->act->ns[ENG_ACT_PREEMPTED] += b - a;
		if (b - a > c->act->by_max) {
			c->act->by_max = b - a;
			c->act->by_pid = w.pid;
			c->act->by_tid = w.tid;
			memcpy(c->act->by_comm, w.comm, sizeof(c->act->by_comm));
		}
	}
	if (is_stopper(w.comm)) {
		accum_add(e, c->a, ENG_BLOCKED, b - a, c->dflt);
		return;
	}
	w.via_pid = c->via->pid;
	w.via_tid = c->via->tid;
	memcpy(w.via_comm, c->via->comm, sizeof(w.via_comm));
	accum_add(e, c->a, ENG_BLOCKED, b - a, &w);
}

/*
 * The thread that woke a sleep, when it is followed (a thread of the target
 * or of one of its descendants, seen in the trace) and not the sleeper.
 */
static struct thread *followed_waker(struct engine *e, uint32_t pid, uint32_t tid,
				     const struct thread *sleeper)
{
	struct thread *w;

	if (!pid || tid == sleeper->tid)
		return NULL;
	w = thread_find(e, tid);
	return w && !w->sink && w->pid == pid ? w : NULL;
}

/*
 * The followed thread that made w, when w was made after s: before it
 * existed, what its waker did was its maker's (a DataLoader worker starts the
 * thread that hands over its first batch only once the batch is ready). Only
 * a maker made before w: a trace cannot make the walk go round. victim: the
 * sleeper, never its own waker's maker (NULL: no sleeper to leave out).
 */
static struct thread *maker_before(struct engine *e, const struct thread *w, uint64_t s,
				   const struct thread *victim)
{
	struct thread *c;

	if (!w->new_ns || w->new_ns <= s || (victim && w->new_by_tid == victim->tid))
		return NULL;
	c = followed_waker(e, w->new_by_pid, w->new_by_tid, w);
	return c && c->new_ns < w->new_ns ? c : NULL;
}

/* a waker's activity, inside what else it did: the innermost wins (as overlay_priority) */
static const uint8_t act_priority[ENG_NACT] = {
	[ENG_ACT_RECLAIM] = 4, [ENG_ACT_FAULTING] = 3, [ENG_ACT_IO] = 2, [ENG_ACT_ALLOC] = 1,
};

static void act_piece(struct engine *e, struct eng_act *act, uint64_t *vec, int kind,
		      const struct act_iv *v, uint64_t ns)
{
	vec[kind] += ns;
	if (!v)
		return;
	if (kind == ENG_ACT_IO && v->io_call && ns > act->io_max) {
		act->io_max = ns;
		act->io_call = v->io_call;
		act->io_kind = v->io_kind;
		act->io_path = act_name_of(e, v);
	}
	if (kind == ENG_ACT_FAULTING && v->region && ns > act->fault_max) {
		act->fault_max = ns;
		act->fault_region = true;
		act->fault_anon = v->region == 1;
		act->fault_len = v->maplen;
		act->fault_path = act_name_of(e, v);
	}
}

/*
 * Waker w over [a, b], on a CPU (dflt ENG_ACT_ON_CPU) or in uninterruptible
 * sleep (ENG_ACT_IO): the parts its faults, reclaim, recorded I/O and
 * allocator calls (struct act_iv) cover are theirs, the innermost first.
 * Bounded: w keeps at most ACTS_MAX of them.
 */
static void act_split(struct engine *e, const struct thread *w, struct eng_act *act, uint64_t *vec,
		      uint64_t a, uint64_t b, int dflt)
{
	uint64_t pts[2 * ACTS_MAX + 2];
	int np = 0;

	pts[np++] = a;
	pts[np++] = b;
	for (uint32_t i = 0; i < w->nacts; i++) {
		const struct act_iv *v = &w->acts[(w->acts_head + i) % ACTS_MAX];

		if (v->s > a && v->s < b)
			pts[np++] = v->s;
		if (v->e > a && v->e < b)
			pts[np++] = v->e;
	}
	sort_points(pts, np);
	for (int i = 0; i + 1 < np; i++) {
		uint64_t x = pts[i], y = pts[i + 1];
		const struct act_iv *best = NULL;

		if (y <= x)
			continue;
		for (uint32_t k = 0; k < w->nacts; k++) {
			const struct act_iv *v = &w->acts[(w->acts_head + k) % ACTS_MAX];

			if (v->s > x || v->e < y)
				continue;
			if (!best || act_priority[v->kind] > act_priority[best->kind] ||
			    (v->kind == best->kind && v->io_call && !best->io_call))
				best = v;
		}
		act_piece(e, act, vec, best ? best->kind : dflt, best, y - x);
	}
}

struct own_ctx {
	const struct thread *w;
	uint64_t own;   /* of what was covered, w's own slices (on_preemptor) */
};

static void runslice_own(struct engine *e, void *ctx, const struct runslice *r, uint16_t cpu,
			 uint64_t a, uint64_t b)
{
	struct own_ctx *c = ctx;

	(void)e, (void)cpu;
	if (own_slice(r, c->w))
		c->own += b - a;
}

/* the first of w's episodes that may reach past s (they are kept in order of start) */
static uint32_t episode_first(const struct thread *w, uint64_t s)
{
	uint32_t lo = 0, hi = w->nepisodes;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (w->episodes[(w->episodes_head + mid) % w->episodes_cap].emax <= s)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Waker w (it ended a sleep at end or later) was on a CPU from its last
 * off-CPU episode up to end: it runs now, or the state it is in now began at
 * end or later (every time off its CPU before that is an episode; a scheduler
 * run leaves a thread running at its end), or it has exited: its exit record
 * comes before the rest of its exit, which wakes its parent's wait and ends
 * its time on a CPU (schemas/trace.md, thread_exit).
 */
static bool ran_to(const struct thread *w, uint64_t end)
{
	return w->state == TS_RUNNING || w->state == TS_DEAD ||
	       (w->state != TS_UNKNOWN && w->since >= end);
}

/* the kind of the episode w is in now, off its CPU (runnable or asleep) */
static uint8_t open_episode(const struct thread *w)
{
	if (w->state == TS_RUNNABLE)
		return w->throttled ? EP_THROTTLED : EP_RUN;
	return w->state == TS_SLEEP_S ? EP_SLEEP_S : EP_SLEEP_D;
}

/*
 * What followed thread w did over [s, end], into act->on_ns (a sleep of the
 * first waker that w ended): as the first waker's own account, without
 * naming preemptors or going further down the chain.
 */
static void act_walk(struct engine *e, const struct thread *w, uint64_t s, uint64_t end,
		     struct eng_act *act)
{
	uint64_t cur = s;

	if (w->new_ns > s) {
		/* before it was made: its maker's doing, or nothing known */
		uint64_t b = min64(w->new_ns, end);
		const struct thread *c = maker_before(e, w, s, NULL);

		if (c)
			act_walk(e, c, s, b, act);
		if (b >= end)
			return;
		cur = s = b;
	}

	for (uint32_t i = episode_first(w, s); i <= w->nepisodes && cur < end; i++) {
		struct episode ep;
		uint64_t x, y;

		if (i < w->nepisodes)
			ep = w->episodes[(w->episodes_head + i) % w->episodes_cap];
		else if (w->state == TS_RUNNABLE || w->state == TS_SLEEP_S || w->state == TS_SLEEP_D)
			ep = (struct episode){ .s = w->since, .e = end, .cpu = w->cpu,
					       .kind = open_episode(w) };
		else
			break;
		x = max64(ep.s, cur);
		y = min64(ep.e, end);
		if (y <= x)
			continue;
		if (x > cur)
			act_split(e, w, act, act->on_ns, cur, x, ENG_ACT_ON_CPU);
		if (ep.kind == EP_RUN) {
			struct own_ctx oc = { .w = w };
			uint64_t cov = runslice_cover(e, ep.cpu, x, y, runslice_own, &oc);

			act->on_ns[ENG_ACT_ON_CPU] += oc.own;
			act->on_ns[ENG_ACT_PREEMPTED] += cov - oc.own;
			act->on_ns[ENG_ACT_RUNNABLE] += y - x - cov;
		} else if (ep.kind == EP_THROTTLED) {
			act->on_ns[ENG_ACT_THROTTLED] += y - x;
		} else if (ep.kind == EP_SLEEP_S) {
			act->on_ns[ENG_ACT_BLOCKED] += y - x;
		} else if (i == w->nepisodes && w->act_fault_sleep && w->nacts) {
			act_piece(e, act, act->on_ns, ENG_ACT_FAULTING,
				  &w->acts[(w->acts_head + w->nacts - 1) % ACTS_MAX], y - x);
		} else {
			act_split(e, w, act, act->on_ns, x, y, ENG_ACT_IO);
		}
		cur = y;
	}
	if (cur < end && ran_to(w, end))
		act_split(e, w, act, act->on_ns, cur, end, ENG_ACT_ON_CPU);
	else if (cur < end)
		act->on_ns[ENG_ACT_BLOCKED] += end - cur;
}

static void act_blocked_on(struct engine *e, struct eng_act *act, const struct episode *ep,
			   uint64_t ns)
{
	const struct thread *by;

	act->ns[ENG_ACT_BLOCKED] += ns;
	if (ns <= act->on_max)
		return;
	act->on_max = ns;
	act->on_pid = ep->wpid;
	act->on_tid = ep->wtid;
	memset(act->on_comm, 0, sizeof(act->on_comm));
	by = ep->wtid ? thread_find(e, ep->wtid) : NULL;
	if (by && by->pid == ep->wpid)
		memcpy(act->on_comm, by->comm, sizeof(act->on_comm));
}

/*
 * [s, end] of a sleep that `w` ended. Where w (or, a few hops on, the
 * followed thread that woke w) sat runnable and preempted, the preemptor is
 * to blame; everywhere else the waker itself. Only preemptions travel down
 * the chain: a waker's own sleeps were often ended from interrupt context,
 * whose "waker" is whatever happened to run. act (the first hop only): what
 * w did meanwhile, from its off-CPU episodes; the time between them it was
 * on a CPU.
 */
static void wakeup_chain(struct engine *e, struct accum *a, uint64_t s, uint64_t end,
			 struct thread *w, const struct eng_who *dflt, const struct thread *victim,
			 int depth, struct eng_act *act)
{
	uint64_t cur = s;

	uint32_t lo = 0, hi;

	if (!w || depth >= CHAIN_DEPTH) {
		accum_add(e, a, ENG_BLOCKED, end - s, dflt);
		return;
	}
	if (w->new_ns > s) {
		/* w did not exist yet: its maker's doing (the same hop), else the waker's, no more known */
		uint64_t b = min64(w->new_ns, end);
		struct thread *c = maker_before(e, w, s, victim);

		if (c)
			wakeup_chain(e, a, s, b, c, dflt, victim, depth + 1, act);
		else
			accum_add(e, a, ENG_BLOCKED, b - s, dflt);
		if (b >= end)
			return;
		cur = s = b;
	}
	/* episodes that all ended by s cover none of [s, end]: skip them */
	hi = w->nepisodes;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (w->episodes[(w->episodes_head + mid) % w->episodes_cap].emax <= s)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (uint32_t i = lo; i <= w->nepisodes && cur < end; i++) {
		struct episode ep;
		uint64_t x, y;

		if (i < w->nepisodes) {
			ep = w->episodes[(w->episodes_head + i) % w->episodes_cap];
		} else if (w->state == TS_RUNNABLE || w->state == TS_SLEEP_S ||
			   (act && w->state == TS_SLEEP_D)) {
			/* the episode still open */
			ep = (struct episode){ .s = w->since, .e = end, .cpu = w->cpu,
					       .kind = open_episode(w) };
		} else {
			break;
		}
		x = max64(ep.s, cur);
		y = min64(ep.e, end);
		if (y <= x)
			continue;
		if (x > cur) {
			accum_add(e, a, ENG_BLOCKED, x - cur, dflt);
			if (act)
				act_split(e, w, act, act->ns, cur, x, ENG_ACT_ON_CPU);
		}
		if (ep.kind == EP_RUN) {
			struct classify_ctx c = { .a = a, .via = w, .dflt = dflt, .act = act };
			uint64_t cov = runslice_cover(e, ep.cpu, x, y, on_chain_preemptor, &c);

			accum_add(e, a, ENG_BLOCKED, y - x - cov, dflt);
			if (act)
				act->ns[ENG_ACT_RUNNABLE] += y - x - cov;
		} else if (ep.kind == EP_THROTTLED) {
			/*
			 * w sat runnable in a group out of CPU quota: the quota's,
			 * whoever ran on its CPU meanwhile; w, the thread it held
			 */
			struct eng_who q = { .pid = w->pid, .tid = w->tid, .cpu = -1 };

			comm_copy(q.comm, w->comm);
			accum_add(e, a, ENG_CPU_THROTTLE, y - x, &q);
			if (act)
				act->ns[ENG_ACT_THROTTLED] += y - x;
		} else if (ep.kind == EP_SLEEP_S &&
			   followed_waker(e, ep.wpid, ep.wtid, w) && ep.wtid != victim->tid) {
			if (act) {
				act_blocked_on(e, act, &ep, y - x);
				act_walk(e, thread_find(e, ep.wtid), x, y, act);
			}
			wakeup_chain(e, a, x, y, thread_find(e, ep.wtid), dflt, victim, depth + 1, NULL);
		} else {
			accum_add(e, a, ENG_BLOCKED, y - x, dflt);
			/*
			 * a sleep that no followed thread ended: a timer, a socket,
			 * the interrupt's "waker" is whoever ran: asleep, on nobody named
			 */
			if (act && ep.kind == EP_SLEEP_D && i == w->nepisodes && w->act_fault_sleep &&
			    w->nacts)
				/* asleep inside a fault now: the fault is not over yet */
				act_piece(e, act, act->ns, ENG_ACT_FAULTING,
					  &w->acts[(w->acts_head + w->nacts - 1) % ACTS_MAX], y - x);
			else if (act && ep.kind == EP_SLEEP_D)
				act_split(e, w, act, act->ns, x, y, ENG_ACT_IO);
			else if (act && ep.kind == EP_SLEEP_S)
				act->ns[ENG_ACT_BLOCKED] += y - x;
		}
		cur = y;
	}
	if (cur < end) {
		accum_add(e, a, ENG_BLOCKED, end - cur, dflt);
		/* past its last episode: on a CPU since, if it ran up to end */
		if (act && ran_to(w, end))
			act_split(e, w, act, act->ns, cur, end, ENG_ACT_ON_CPU);
	}
}

/* a plain sleep of candidate t ended; wk: the wakeup record, NULL if none seen */
void resolve_sleep_accum(struct engine *e, struct thread *t, struct accum *a,
			 const struct sb_wakeup *wk)
{
	struct eng_who dflt;
	struct thread *w = NULL;
	bool named = false;
	int cause;

	if (!a->npending && !a->pending_extra)
		return;
	if (wk) {
		memset(&dflt, 0, sizeof(dflt));
		dflt.pid = wk->waker_pid;
		dflt.tid = wk->waker_tid;
		comm_copy(dflt.comm, wk->waker_comm);
		dflt.cpu = -1;
		named = wk->waker_pid != 0;
		w = followed_waker(e, wk->waker_pid, wk->waker_tid, t);
	}
	/*
	 * An uninterruptible sleep is I/O, unless a followed thread ended it
	 * in task context (an interrupt's wakeup has no waker): a vfork
	 * parent held until its child execs, a kernel lock a sibling held.
	 * That is a wait on the waker, judged as an interruptible one is.
	 */
	if ((wk && is_stopper(dflt.comm)) || t->sleep_migrating)
		cause = ENG_MIGRATION;
	else
		cause = a->pending_state == TS_SLEEP_D && !w ? ENG_IO_WAIT : ENG_BLOCKED;
	for (uint32_t i = 0; i < a->npending; i++) {
		uint64_t x = a->pending[i].a, y = a->pending[i].b;
		int got = cause;

		if (cause == ENG_BLOCKED && named) {
			struct eng_act act;

			memset(&act, 0, sizeof(act));
			wakeup_chain(e, a, x, y, w, &dflt, t, 0, w ? &act : NULL);
			/* what the waker did rides on its own culprit entry */
			if (w) {
				dflt.act = act;
				accum_culprit(e, a, ENG_BLOCKED, &dflt, 0);
				memset(&dflt.act, 0, sizeof(dflt.act));
			}
		} else {
			got = accum_add(e, a, cause, y - x, cause == ENG_IO_WAIT || !named ? NULL : &dflt);
		}
		if (got == ENG_MIGRATION)
			accum_move(a, t, y - x);
	}
	if (a->pending_extra)
		accum_add(e, a, cause, a->pending_extra, cause == ENG_BLOCKED && named ? &dflt : NULL);
	if (a->pending_extra && cause == ENG_MIGRATION)
		accum_move(a, t, a->pending_extra);
	a->npending = 0;
	a->pending_extra = 0;
}

/* resolve t's pending sleeps that ended by upto with wk, keeping the later ones pending */
static void resolve_sleep_upto(struct engine *e, struct thread *t, uint64_t upto,
			       const struct sb_wakeup *wk)
{
	for (uint32_t i = 0; i < e->npieces; i++) {
		struct accum *a = &e->pieces[(e->pieces_head + i) % e->pieces_cap]->accum[t->candidate];
		struct pending_sleep later[PENDING_MAX];
		uint32_t n = 0, k = 0;
		uint64_t extra = a->pending_extra;

		for (uint32_t j = 0; j < a->npending; j++)
			if (a->pending[j].b <= upto)
				a->pending[k++] = a->pending[j];
			else
				later[n++] = a->pending[j];
		a->npending = k;
		/* time past the intervals kept is the latest's */
		a->pending_extra = n ? 0 : extra;
		resolve_sleep_accum(e, t, a, wk);
		memcpy(a->pending, later, n * sizeof(later[0]));
		a->npending = n;
		a->pending_extra = n ? extra : 0;
	}
}

/* a wakeup record by waker pid/tid/comm at ts, for a wait whose end a run or a chain says */
static void wakeup_of(struct sb_wakeup *wk, uint32_t pid, uint32_t tid, const char *comm, uint64_t ts)
{
	memset(wk, 0, sizeof(*wk));
	wk->h.ts = ts;
	wk->waker_pid = pid;
	wk->waker_tid = tid;
	memcpy(wk->waker_comm, comm, SB_COMM_LEN);
}

/* a wait of t that a thread of its own process ended at `at`: a timeout right after it continues it */
static void chain_note(struct thread *t, uint32_t pid, uint32_t tid, const char *comm, uint64_t at)
{
	if (pid != t->pid || !tid || tid == t->tid)
		return;
	t->chain_pid = pid;
	t->chain_tid = tid;
	memcpy(t->chain_comm, comm, SB_COMM_LEN);
	t->chain_at = at;
}

/*
 * the timed wait held (timed_defer) is resolved with wk; NULL: no retry said
 * who ended it, but one that began right after a wait another thread of the
 * process ended goes on waiting for that thread (the last timeout of a wait
 * for the GIL, after which the GIL was free)
 */
static void timed_resolve(struct engine *e, struct thread *t, const struct sb_wakeup *wk)
{
	struct sb_wakeup c;

	t->timed_defer = false;
	if (!wk && t->chain_tid && t->timed_start >= t->chain_at &&
	    t->timed_start - t->chain_at <= TIMED_RETRY_NS) {
		wakeup_of(&c, t->chain_pid, t->chain_tid, t->chain_comm, t->timed_wake);
		wk = &c;
	}
	resolve_sleep_upto(e, t, t->timed_wake, wk);
}

void timed_check(struct engine *e, struct thread *t, uint64_t now, bool retry)
{
	if (!t->timed_defer || t->candidate < 0)
		return;
	/* not a retry, or one too long after: the held sleep was a plain timeout */
	if (!retry || (t->timed_in && now > t->timed_in + TIMED_RETRY_NS))
		timed_resolve(e, t, NULL);
}

void timed_retry_run(struct engine *e, struct thread *t, const struct sb_sched_run *r, uint64_t s)
{
	struct sb_wakeup wk;

	if (!t->timed_defer || t->candidate < 0)
		return;
	if (t->timed_in && s > t->timed_in + TIMED_RETRY_NS) {
		timed_resolve(e, t, NULL);
		return;
	}
	/* short preemptions only: the retry is still to come (timed_check) */
	if (!r->sleeps)
		return;
	if (!r->waker_tid || r->waker_pid != t->pid || r->waker_tid == t->tid) {
		timed_resolve(e, t, NULL);
		return;
	}
	/* the retry's sleeps were folded into this run: its waker ended them */
	wakeup_of(&wk, r->waker_pid, r->waker_tid, r->waker_comm, s);
	timed_resolve(e, t, &wk);
}

/*
 * A held timed wait of the thread that woke h ends in a hand-off: soon after
 * its switch-in it woke h, a thread of its process that went to sleep only
 * after the timeout fired. h gave up what the waiter waited for when the
 * timeout asked it to, and waited to be told the waiter took it (CPython's
 * GIL: the holder drops it at the waiter's request, then waits for the
 * switch), so the waiter's retry need not sleep: the held wait was on h.
 */
void timed_handoff(struct engine *e, const struct thread *h, uint32_t waker_pid, uint32_t waker_tid,
		   uint64_t slept_from, uint64_t at)
{
	struct thread *t = waker_pid == h->pid ? thread_find(e, waker_tid) : NULL;
	struct sb_wakeup wk;

	if (!t || t == h || t->pid != h->pid || t->candidate < 0 || !t->timed_defer || !t->timed_in)
		return;
	if (slept_from < t->timed_wake || at < t->timed_in || at - t->timed_in > TIMED_RETRY_NS)
		return;
	wakeup_of(&wk, h->pid, h->tid, h->comm, at);
	chain_note(t, h->pid, h->tid, h->comm, at);
	timed_resolve(e, t, &wk);
}

void chain_run(struct thread *t, const struct sb_sched_run *r, uint64_t end)
{
	if (r->sleeps)
		chain_note(t, r->waker_pid, r->waker_tid, r->waker_comm, end);
}

void resolve_sleep(struct engine *e, struct thread *t, const struct sb_wakeup *wk)
{
	bool timeout = wk && !wk->waker_pid && t->state == TS_SLEEP_S && wk->h.ts >= t->since &&
		       wk->h.ts - t->since <= TIMED_WAIT_MAX_NS;

	if (t->candidate < 0)
		return;
	if (timeout) {
		/*
		 * A timer ended it: a timed wait that may be retried at once.
		 * Held (with any held before it) until the retry says who ended
		 * the wait (docs/ARCHITECTURE.md, "Timed waits")
		 */
		if (!t->timed_defer)
			t->timed_start = t->since;
		t->timed_defer = true;
		t->timed_wake = wk->h.ts;
		t->timed_in = 0;
		return;
	}
	if (wk)
		chain_note(t, wk->waker_pid, wk->waker_tid, wk->waker_comm, wk->h.ts);
	/* the retry of a held timed wait, ended by a thread of the same process: the whole wait was on it */
	if (t->timed_defer && !(wk && wk->waker_pid == t->pid && wk->waker_tid &&
				wk->waker_tid != t->tid))
		timed_resolve(e, t, NULL);
	t->timed_defer = false;
	for (uint32_t i = 0; i < e->npieces; i++) {
		struct piece *p = e->pieces[(e->pieces_head + i) % e->pieces_cap];

		resolve_sleep_accum(e, t, &p->accum[t->candidate], wk);
	}
}
