// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Host events, swept in time order: scheduler switches, wakeups, migrations,
 * faults (and their cost calibration), the interval records (reclaim, mmap,
 * allocator, I/O, CUDA, affinity) that overlay a thread's time with a cause.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"
#include "format/costs.h"
#include "format/gpu.h"

/*
 * A burst of fast allocator calls whose calls (fast and slow, probe traps
 * included) fill at least STORM_NUM/STORM_DEN of its span is an allocation
 * storm: the pauses between its calls are the loop that drives them (and
 * whatever interrupted it), so all of the span's on-CPU time that nothing
 * else explains is alloc. A sparser burst claims only its calls' time.
 */
#define STORM_NUM 3
#define STORM_DEN 4
/*
 * Page faults: the kernel gives only the entry. A fault followed by another
 * fault of the same thread within FAULT_RUN_NS, nothing in between, is taken to
 * have lasted until it (back-to-back faults: touching fresh memory); those
 * gaps also calibrate the per-fault cost charged to an isolated fault
 * (DEFAULT_FAULT_NS until enough of them are seen: engine.c).
 *
 * A fault_run record (the kernel's aggregate of such faults, bpf/mem.bpf.c)
 * stands for count faults from start_ns to h.ts, nothing of the thread in
 * between: the thread was faulting all along, its count - 1 gaps calibrate as
 * many back-to-back gaps of the run's average, and its last fault is open at
 * h.ts like a single fault (fault_last). Its faults are counted as evenly
 * spread over the run, each in the piece its time falls in (run_count), in
 * the region of its first address.
 */
#define FAULT_RUN_NS 1000000ull

/*
 * The fault still open on t ends because of an own event at `at` of type ev.
 * True when the thread went to sleep inside the fault (it stays open).
 */
static bool fault_decide(struct engine *e, struct thread *t, uint64_t at, int ev, uint8_t out_state)
{
	uint64_t d;

	if (!t->fault_open || t->fault_decided)
		return false;
	d = at > t->fault_last ? at - t->fault_last : 0;
	/*
	 * A fault sleeps uninterruptibly (a page lock, the mmap lock, reading the
	 * page, reclaim); an interruptible sleep right after a fault is the thread's
	 * next wait (a pipe, a socket, a futex), judged by its wakeup like any sleep.
	 */
	if (ev == SB_EV_SWITCH_OUT && out_state == SB_STATE_DISK && d < FAULT_RUN_NS) {
		/* it blocked inside the fault: all of it, and the sleep, are the fault's */
		t->fault_end = at;
		t->fault_decided = true;
		return true;
	}
	if (ev == SB_EV_FAULT && d < FAULT_RUN_NS)
		t->fault_end = at;
	else
		t->fault_end = t->fault_last + min64(d, e->fault_cost);
	t->fault_decided = true;
	return false;
}

static void fault_estimate(struct engine *e)
{
	int b;

	if (e->fault_samples >= FAULT_CALIB_MIN && (e->fault_samples & (e->fault_samples - 1)) == 0) {
		/* re-estimate at powers of two: the median bucket's geometric middle */
		uint64_t half = e->fault_samples / 2, run = 0;

		for (b = 0; b < FAULT_HIST_PER_OCTAVE * FAULT_HIST_OCTAVES; b++) {
			run += e->fault_hist[b];
			if (run > half)
				break;
		}
		e->fault_cost = (uint64_t)exp2(((double)b + 0.5) / FAULT_HIST_PER_OCTAVE);
	}
}

/* k back-to-back gaps of gap ns each: as k calls of one would leave the estimate */
static void fault_calibrate_n(struct engine *e, uint64_t gap, uint64_t k)
{
	int b;

	if (!gap || gap >= FAULT_RUN_NS || e->opts.fault_cost_ns)
		return;
	b = (int)(log2((double)gap) * FAULT_HIST_PER_OCTAVE);
	if (b < 0)
		b = 0;
	if (b >= FAULT_HIST_PER_OCTAVE * FAULT_HIST_OCTAVES)
		b = FAULT_HIST_PER_OCTAVE * FAULT_HIST_OCTAVES - 1;
	while (k) {
		/* up to the next power of two, where the estimate is taken */
		uint64_t s = e->fault_samples, p = 1, add;

		while (p <= s && p < (1ull << 62))
			p <<= 1;
		add = min64(k, p > s ? p - s : k);
		e->fault_hist[b] += (uint32_t)min64(add, UINT32_MAX - e->fault_hist[b]);
		e->fault_samples += add;
		k -= add;
		fault_estimate(e);
	}
}

static void fault_calibrate(struct engine *e, uint64_t gap)
{
	fault_calibrate_n(e, gap, 1);
}

/*
 * An own event of candidate t at `at`: the time up to it is attributed before
 * its state changes. Returns the piece accumulator for counting, or NULL.
 */
static struct accum *own_event(struct engine *e, struct thread *t, uint64_t at, int ev,
			       uint8_t out_state)
{
	bool blocked = false;

	if (t->candidate < 0) {
		if (t->state == TS_UNKNOWN && ev != SB_EV_SWITCH_OUT) {
			t->state = TS_RUNNING;
			t->since = at;
		}
		return NULL;
	}
	if (ev != SB_EV_RECLAIM)
		blocked = fault_decide(e, t, at, ev, out_state);
	thread_account(e, t, at);
	/* it did something itself: it was on a CPU */
	if (t->state == TS_UNKNOWN && ev != SB_EV_SWITCH_OUT) {
		t->state = TS_RUNNING;
		t->since = at;
	}
	if (t->fault_open && t->fault_decided && !blocked && ev != SB_EV_RECLAIM)
		t->fault_open = false;
	if (ev != SB_EV_RECLAIM) {
		t->last_ev = (uint8_t)ev;
		t->last_ev_ts = at;
	}
	return e->gap_open && e->current_piece ? &e->current_piece->accum[t->candidate] : NULL;
}

/* the thread that marks steps exited: its step in progress ends there, unfinished */
static void step_owner_gone(struct engine *e, struct thread *t, uint64_t at)
{
	struct open_step *st = e->current_step;

	if (!t->sink && st && st->marker_tid == t->tid && at >= st->start)
		step_end(e, at, true);
}

static void add_overlay(struct thread *t, uint64_t s, uint64_t end, int cause)
{
	if (end <= s)
		return;
	if (t->noverlays == OVERLAYS_MAX) {
		/* keep the ones that end last */
		uint32_t k = 0;

		for (uint32_t i = 1; i < t->noverlays; i++)
			if (t->overlays[i].e < t->overlays[k].e)
				k = i;
		t->overlays[k] = t->overlays[--t->noverlays];
	}
	t->overlays[t->noverlays++] = (struct overlay){ .s = s, .e = end, .cause = (uint8_t)cause };
}

/* t's runnable wait since t->since ends at ts (a switch-in, a switch-out, a move) */
static void run_episode(struct engine *e, struct thread *t, uint64_t ts)
{
	episode_push(e, t, t->throttled ? EP_THROTTLED : EP_RUN, t->since, ts, t->cpu, 0, 0);
}

static void ev_switch_out(struct engine *e, const struct sb_switch_out *r)
{
	struct thread *t = thread_get(e, r->h.tid, r->h.pid);
	struct accum *a = own_event(e, t, r->h.ts, SB_EV_SWITCH_OUT, r->state);

	/* a timed wait held: a sleep into S now may be its retry (a preemption may come first) */
	timed_check(e, t, r->h.ts, r->state == SB_STATE_SLEEP || r->state == SB_STATE_RUNNABLE);
	if (t->state == TS_RUNNABLE)
		run_episode(e, t, r->h.ts);
	act_switch_out(t, r->state, r->h.ts);
	if (t->fault_open && r->state == SB_STATE_DISK) {
		/*
		 * A fault that sleeps is not thereby major (it may wait on a page
		 * lock, or on reclaim): major is the kernel's word, counted from
		 * its maj_flt counter at the thread's next fault (ev_fault).
		 */
		t->fault_blocked = true;
		e->faults_blocked++;
	}
	t->throttled = r->state == SB_STATE_RUNNABLE && r->throttled;
	switch (r->state) {
	case SB_STATE_RUNNABLE:
		t->state = TS_RUNNABLE;
		if (a)
			a->count[ENG_N_PREEMPT]++;
		break;
	case SB_STATE_SLEEP:
		t->state = TS_SLEEP_S;
		if (a)
			a->count[ENG_N_SLEEPS]++;
		break;
	case SB_STATE_DISK:
		t->state = TS_SLEEP_D;
		if (a)
			a->count[ENG_N_SLEEPS]++;
		break;
	case SB_STATE_DEAD:
		t->state = TS_DEAD;
		step_owner_gone(e, t, r->h.ts);
		break;
	default:
		t->state = TS_UNKNOWN;
		break;
	}
	t->since = r->h.ts;
	t->cpu = r->h.cpu;
	t->migrated = false;
	{
		char nc[SB_COMM_LEN + 1];

		/* set_cpus_allowed on a running thread: it waits while the stopper moves it */
		comm_copy(nc, r->next_comm);
		t->sleep_migrating = t->state != TS_RUNNABLE && is_stopper(nc);
	}
}

static void ev_switch_in(struct engine *e, const struct sb_switch_in *r)
{
	struct thread *t = thread_get(e, r->h.tid, r->h.pid);
	uint8_t prev = t->state;

	if (t->candidate >= 0)
		thread_account(e, t, r->h.ts);
	if (prev == TS_RUNNABLE)
		run_episode(e, t, r->h.ts);
	else if (prev == TS_SLEEP_S || prev == TS_SLEEP_D)
		episode_push(e, t, prev == TS_SLEEP_S ? EP_SLEEP_S : EP_SLEEP_D, t->since, r->h.ts, t->cpu,
			0, 0);
	if (prev == TS_SLEEP_S || prev == TS_SLEEP_D)
		resolve_sleep(e, t, NULL);
	if (t->timed_defer && !t->timed_in)
		t->timed_in = r->h.ts;
	t->sleep_migrating = false;
	if (t->fault_open && t->fault_blocked) {
		/* back from the fault's sleep: what remains is decided at the next event */
		t->fault_blocked = false;
		t->fault_decided = false;
		t->fault_at = t->fault_last = r->h.ts;
		t->fault_tracer = 0;
	}
	t->state = TS_RUNNING;
	t->since = r->h.ts;
	t->cpu = r->h.cpu;
	t->migrated = false;
	t->throttled = false;
	/* it runs after the call without having moved: the call moved nothing */
	if (t->aff_pending && r->h.ts > t->aff_e)
		t->aff_pending = false;
}

static void ev_wakeup(struct engine *e, const struct sb_wakeup *r)
{
	struct thread *t = thread_get(e, r->h.tid, r->h.pid);

	if (t->state != TS_SLEEP_S && t->state != TS_SLEEP_D && t->state != TS_UNKNOWN)
		return; /* woken before it got off the CPU: it never slept */
	if (t->candidate >= 0)
		thread_account(e, t, r->h.ts);
	if (t->state == TS_SLEEP_S)
		timed_handoff(e, t, r->waker_pid, r->waker_tid, t->since, r->h.ts);
	if (t->state == TS_SLEEP_S || t->state == TS_SLEEP_D) {
		episode_push(e, t, t->state == TS_SLEEP_S ? EP_SLEEP_S : EP_SLEEP_D, t->since, r->h.ts,
			t->cpu, r->waker_pid, r->waker_tid);
		resolve_sleep(e, t, r);
	}
	t->state = TS_RUNNABLE;
	t->since = r->h.ts;
	t->cpu = r->h.cpu;
	t->throttled = r->throttled != 0;
	{
		char wc[SB_COMM_LEN + 1];

		comm_copy(wc, r->waker_comm);
		/* woken by the stopper that moved it: the wait on the new CPU is the move's */
		t->migrated = is_stopper(wc) || t->sleep_migrating;
		t->sleep_migrating = false;
	}
}

static void ev_migrate(struct engine *e, const struct sb_migrate *r)
{
	struct thread *t = thread_get(e, r->h.tid, r->h.pid);

	/*
	 * Who moved it: a sched_setaffinity() on it, inside the call or the first
	 * move after it (a sleeping thread is moved when it wakes); else the
	 * scheduler, balancing load.
	 */
	if (t->aff_pending && r->h.ts >= t->aff_s) {
		t->mv_how = t->aff_by == t->tid ? ENG_MOVE_SELF : ENG_MOVE_THREAD;
		t->mv_by = t->aff_by;
		t->aff_pending = false;
	} else {
		t->mv_how = ENG_MOVE_SCHEDULER;
		t->mv_by = 0;
	}
	t->mv_from = (int16_t)r->orig_cpu;
	t->mv_to = (int16_t)r->dest_cpu;

	if (t->state == TS_RUNNABLE) {
		if (t->candidate >= 0)
			thread_account(e, t, r->h.ts);
		run_episode(e, t, r->h.ts);
		t->since = r->h.ts;
		t->migrated = true;
	}
	t->cpu = r->dest_cpu;
	if (t->candidate >= 0 && e->gap_open && e->current_piece)
		e->current_piece->accum[t->candidate].count[ENG_N_MIGRATIONS]++;
}

static uint32_t map_find(struct engine *e, uint32_t pid, uint64_t addr);

/* whether a region mmap()ed during the capture, still there, lies (in part) inside the copy c */
static bool region_inside(const struct engine *e, const struct map_region *c)
{
	for (uint32_t i = 0; i < e->nmaps; i++) {
		const struct map_region *x = &e->maps[i];

		if (!x->gone && !x->region && x->pid == c->pid && x->start < c->end &&
		    x->end > c->start)
			return true;
	}
	return false;
}

/*
 * The probes' cost of the open fault, n faults (a run: one record and n - 1
 * faults that only extended it), drawn as tracer out of its page_fault time
 * (classify.c). Only for traces whose cost model prices runs: older traces'
 * faults stay all page_fault, as they were reported.
 */
static void fault_tracer_set(struct engine *e, struct thread *t, uint64_t n)
{
	uint64_t c = 0;

	if (e->fault_tracer_on && n)
		c = e->costs.ns[SB_COST_FAULT] + (n - 1) * e->costs.ns[SB_COST_FAULT_EXT];
	t->fault_tracer = t->fault_tracer_all = c;
}

/* count n faults of t in a, in region map (1 + index in e->maps, 0 none) */
static void fault_count(struct engine *e, struct accum *a, uint32_t map, uint64_t n)
{
	struct map_use *u = NULL;

	if (!a || !n)
		return;
	a->count[ENG_N_FAULTS] += (uint32_t)min64(n, UINT32_MAX - a->count[ENG_N_FAULTS]);
	if (!map || map > e->nmaps)
		return;
	/* count them with their region's (map_use) */
	u = map_use_of(e, a, map);
	if (u)
		u->faults += (uint32_t)n;
}

/*
 * The region of process pid that holds addr, 1 + its index in e->maps (0:
 * none), where *map (and *gen, the e->map_gen it was found at) says the
 * last fault's was: that one while addr is still in it, else looked up.
 */
uint32_t map_at(struct engine *e, uint32_t pid, uint64_t addr, uint32_t *map, uint32_t *gen)
{
	const struct map_region *m = *map && *map <= e->nmaps ? &e->maps[*map - 1] : NULL;

	if (!m || m->gone || m->pid != pid || addr < m->start || addr >= m->end ||
	    /* a region read from the maps, and one mmap()ed since may lie inside it */
	    (m->region && *gen != e->map_gen)) {
		*map = e->nmaps || e->nseeds ? map_find(e, pid, addr) : 0;
		*gen = e->map_gen;
		m = *map ? &e->maps[*map - 1] : NULL;
		/*
		 * a copy with a region mmap()ed inside it (MAP_FIXED over part of
		 * it, or the kernel merging a new mapping into an old one): the
		 * next fault is looked up again, which region holds it is not this
		 * one's to say
		 */
		if (m && m->region && region_inside(e, m))
			*gen = e->map_gen - 1;
	} else if (m->region) {
		/* a copy in use is not the one to replace */
		e->maps[*map - 1].used = ++e->map_seq;
	}
	return *map;
}

/*
 * t enters a fault at first, the last of n back to back at last (a run; else
 * first == last, n = 1), at addr of process pid: open until its next event
 * decides it (fault_decide), its region and its probes' cost with it.
 */
static void fault_open(struct engine *e, struct thread *t, uint64_t first, uint64_t last, uint64_t n,
		       uint32_t pid, uint64_t addr)
{
	t->fault_open = true;
	t->fault_decided = false;
	t->fault_blocked = false;
	t->fault_at = first;
	t->fault_last = last;
	t->run_n = t->run_counted = 0;
	fault_tracer_set(e, t, n);
	map_at(e, pid, addr, &t->fault_map, &t->fault_map_gen);
}

/* faults 0..k-1 of t's run: the major ones among them, spread evenly over faults 1..n-1 */
static uint64_t run_majors(const struct thread *t, uint64_t k)
{
	if (k <= 1 || t->run_n <= 1)
		return 0;
	return (uint64_t)((unsigned __int128)t->run_major * (k - 1) / (t->run_n - 1));
}

void run_count(struct engine *e, struct thread *t, struct accum *a, uint64_t from, uint64_t to)
{
	uint64_t n = t->run_n, k, j;

	if (t->run_counted >= n || to < t->run_first)
		return;
	/* fault i entered at run_first + i * run_span / (n - 1) */
	k = t->run_span ? (uint64_t)((unsigned __int128)(to - t->run_first) * (n - 1) / t->run_span) + 1
			: n;
	if (k > n)
		k = n;
	if (k <= t->run_counted)
		return;
	j = t->run_counted;
	if (a && from > t->run_first && t->run_span) {
		/* the first fault at or after from */
		uint64_t f = (uint64_t)(((unsigned __int128)(from - t->run_first) * (n - 1) + t->run_span - 1) /
					t->run_span);

		if (f > j)
			j = f;
	}
	if (a && k > j) {
		uint64_t m = run_majors(t, k) - run_majors(t, j);

		fault_count(e, a, t->run_map, k - j);
		a->count[ENG_N_MAJOR_FAULTS] += (uint32_t)min64(m, UINT32_MAX - a->count[ENG_N_MAJOR_FAULTS]);
	}
	t->run_counted = k;
}

/*
 * A fault run, swept at its first fault s: the thread faulted from s to h.ts
 * (the top comment). Its first fault is taken like a fault record; the rest
 * are counted as their time is accounted.
 */
static void ev_fault_run(struct engine *e, const struct sb_fault_run *r, uint64_t s)
{
	struct thread *t = thread_find(e, r->h.tid);
	uint64_t last = r->h.ts > s ? r->h.ts : s, n = r->count ? r->count : 1;
	struct accum *a;

	if (t)
		act_fault_run(e, t, s, last, r->addr);
	if (!t || t->candidate < 0)
		return;
	if (t->last_ev == SB_EV_FAULT && t->fault_open && s > t->last_ev_ts)
		fault_calibrate(e, s - t->last_ev_ts);
	if (n > 1 && last > s) {
		uint64_t gap = (last - s) / (n - 1);

		fault_calibrate_n(e, gap, n - 1);
	}
	a = own_event(e, t, s, SB_EV_FAULT, 0);
	t->last_ev_ts = last;
	fault_open(e, t, s, last, n, r->h.pid, r->addr);
	t->run_map = t->fault_map;
	t->run_first = s;
	t->run_span = last - s;
	t->run_n = n;
	t->run_counted = 1;
	/* the counter moved over the run: that many of faults 1..n-1 were major */
	t->run_major = r->maj_flt > r->first_maj_flt ? min64(r->maj_flt - r->first_maj_flt, n - 1) : 0;
	/* its first fault, as ev_fault counts one */
	if (a) {
		fault_count(e, a, t->fault_map, 1);
		if (t->major_faults_known && r->first_maj_flt > t->last_major_faults)
			a->count[ENG_N_MAJOR_FAULTS]++;
	}
	t->last_major_faults = r->maj_flt;
	t->major_faults_known = true;
}

static void ev_fault(struct engine *e, const struct sb_fault *r)
{
	struct thread *t = thread_find(e, r->h.tid);
	struct accum *a;
	bool back_to_back;

	if (t)
		act_fault(e, t, r->h.ts, r->addr);
	if (!t || t->candidate < 0)
		return;
	back_to_back = t->last_ev == SB_EV_FAULT && t->fault_open;
	if (back_to_back && r->h.ts > t->last_ev_ts)
		fault_calibrate(e, r->h.ts - t->last_ev_ts);
	a = own_event(e, t, r->h.ts, SB_EV_FAULT, 0);
	fault_open(e, t, r->h.ts, r->h.ts, 1, r->h.pid, r->addr);
	if (a) {
		fault_count(e, a, t->fault_map, 1);
		/* the counter moved since the last fault: that many were major */
		if (t->major_faults_known && r->maj_flt > t->last_major_faults && !(r->h.flags & SB_FAULT_MINOR))
			a->count[ENG_N_MAJOR_FAULTS] += (uint32_t)min64(r->maj_flt - t->last_major_faults, 1);
		else if (r->h.flags & SB_FAULT_MAJOR)
			a->count[ENG_N_MAJOR_FAULTS]++;
	}
	t->last_major_faults = r->maj_flt;
	t->major_faults_known = true;
}

/*
 * A slot in e->maps for a new region. The regions mmap()ed during the capture
 * are the last MAPS_MAX met: when there are that many, the least recently
 * met (unmapped ones first) is replaced. The copies of regions read from the
 * maps (copy) are kept apart, the last COPIES_MAX met, so that a process with
 * many mappings its threads fault in does not push out the mmap()ed ones.
 */
static struct map_region *map_slot(struct engine *e, bool copy)
{
	uint32_t k = UINT32_MAX, n = 0;
	struct map_region *x;

	if (!e->maps) {
		e->maps = heap_calloc(e, MAPS_MAX, sizeof(*e->maps));
		e->maps_cap = MAPS_MAX;
	}
	for (uint32_t i = 0; i < e->nmaps; i++)
		n += !e->maps[i].region == !copy;
	if (n >= (copy ? COPIES_MAX : MAPS_MAX)) {
		for (uint32_t i = 0; i < e->nmaps; i++) {
			if (!e->maps[i].region != !copy)
				continue;
			if (k == UINT32_MAX || e->maps[i].gone > e->maps[k].gone ||
			    (e->maps[i].gone == e->maps[k].gone && e->maps[i].used < e->maps[k].used))
				k = i;
		}
	} else {
		if (e->nmaps == e->maps_cap)
			heap_grow(e, (void **)&e->maps, &e->maps_cap, e->nmaps + 1, sizeof(*e->maps));
		k = e->nmaps++;
	}
	x = &e->maps[k];
	memset(x, 0, sizeof(*x));
	x->used = ++e->map_seq;
	return x;
}

/*
 * The accumulator's entry for region map (1 + index in e->maps), made if
 * need be (NULL: none). Full, the region takes the place of an entry whose
 * region can no longer be named, else of the entry with the least time, and
 * starts from that time (err, deducted when the step names it): the regions
 * with the most time are kept however many others the faults touched first.
 */
struct map_use *map_use_of(struct engine *e, struct accum *a, uint32_t map)
{
	struct map_use *u = NULL;
	uint64_t start = e->maps[map - 1].start, least = 0;

	for (uint32_t i = 0; i < a->nmaps; i++)
		if (a->maps[i].map == map && a->maps[i].start == start)
			return &a->maps[i];
	if (a->nmaps < MAP_USES_MAX) {
		u = &a->maps[a->nmaps++];
	} else {
		uint32_t i = map_use_spare(e, a->maps, a->nmaps, UINT64_MAX);

		if (i == UINT32_MAX)
			return NULL;
		u = &a->maps[i];
		if (u->map && u->map <= e->nmaps && e->maps[u->map - 1].start == u->start)
			least = u->ns;
	}
	memset(u, 0, sizeof(*u));
	u->map = map;
	u->start = start;
	u->ns = u->err = least;
	return u;
}

/*
 * Of n full entries, the one a new region may take, or UINT32_MAX: an entry
 * whose region's slot holds another region now (it cannot be named), else
 * the one with the least time if that is less than ns.
 */
uint32_t map_use_spare(const struct engine *e, const struct map_use *m, uint32_t n, uint64_t ns)
{
	uint32_t k = UINT32_MAX;

	for (uint32_t i = 0; i < n; i++) {
		bool live = m[i].map && m[i].map <= e->nmaps && e->maps[m[i].map - 1].start == m[i].start;

		if (!live)
			return i;
		if (m[i].ns < ns && (k == UINT32_MAX || m[i].ns < m[k].ns))
			k = i;
	}
	return k;
}

/* the first seed of pid at or after start (e->nseeds: none) */
static uint32_t seed_lower(const struct engine *e, uint32_t pid, uint64_t start)
{
	uint32_t lo = 0, hi = e->nseeds;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct map_seed *m = &e->seeds[mid];

		if (m->pid < pid || (m->pid == pid && m->start < start))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* the seed of pid that holds addr, or NULL */
static struct map_seed *seed_find(struct engine *e, uint32_t pid, uint64_t addr)
{
	uint32_t i = seed_lower(e, pid, addr);

	if (i < e->nseeds && e->seeds[i].pid == pid && e->seeds[i].start == addr)
		return &e->seeds[i];
	if (i > 0 && e->seeds[i - 1].pid == pid && addr < e->seeds[i - 1].end)
		return &e->seeds[i - 1];
	return NULL;
}

/*
 * The copies of a seed that faults met, when a mapping record replaces it:
 * the same mapping read again (same start, kind and name: the heap grown)
 * keeps them, to its new end, so that a step names it once; anything else
 * there now is another region.
 */
static void seed_copies_replaced(struct engine *e, const struct map_seed *m, uint8_t region,
				 uint64_t start, uint64_t end, const char *name)
{
	bool same = m->start == start && m->region == region && m->name && !strcmp(m->name, name);

	for (uint32_t i = 0; i < e->nmaps; i++)
		if (e->maps[i].region && !e->maps[i].gone && e->maps[i].pid == m->pid &&
		    e->maps[i].start == m->start) {
			if (same)
				e->maps[i].end = end;
			else
				e->maps[i].gone = true;
		}
}

static uint8_t region_of(const char *kind)
{
	for (unsigned r = 1; r < ENG_NREGION; r++)
		if (!strcmp(kind, eng_region_name(r)))
			return (uint8_t)r;
	return ENG_REGION_OTHER;
}

/*
 * A mapping record (schemas/trace.md, "mapping"): a region of its process
 * that faults may hit. It replaces the regions of that process it overlaps
 * (read again: grown, or a new program). Records without `kind` (written
 * before data mappings were) seed nothing: their traces report as before.
 */
void map_seed_record(struct engine *e, const struct sb_hdr *h, const char *s, size_t n)
{
	char kind[16], buf[64], name[ENG_IO_PATH_MAX];
	uint64_t start, end;
	uint32_t i, j;
	struct map_seed *m;

	if (!kv_get(s, n, "kind", kind, sizeof(kind)) || !kv_get(s, n, "start", buf, sizeof(buf)))
		return;
	start = strtoull(buf, NULL, 0);
	end = kv_get(s, n, "end", buf, sizeof(buf)) ? strtoull(buf, NULL, 0) : 0;
	if (end <= start)
		return;
	if (!kv_get(s, n, "name", name, sizeof(name)) && !kv_get(s, n, "path", name, sizeof(name)))
		name[0] = 0;
	/* the overlapped ones of the same process go */
	i = seed_lower(e, h->pid, start);
	if (i > 0 && e->seeds[i - 1].pid == h->pid && e->seeds[i - 1].end > start)
		i--;
	for (j = i; j < e->nseeds && e->seeds[j].pid == h->pid && e->seeds[j].start < end; j++) {
		seed_copies_replaced(e, &e->seeds[j], region_of(kind), start, end, name);
		free(e->seeds[j].name);
	}
	if (j > i) {
		memmove(&e->seeds[i], &e->seeds[j], (e->nseeds - j) * sizeof(*e->seeds));
		e->nseeds -= j - i;
	}
	if (e->nseeds >= SEEDS_MAX)
		return;
	if (e->nseeds == e->seeds_cap)
		heap_grow(e, (void **)&e->seeds, &e->seeds_cap, e->nseeds + 1, sizeof(*e->seeds));
	memmove(&e->seeds[i + 1], &e->seeds[i], (e->nseeds - i) * sizeof(*e->seeds));
	e->nseeds++;
	m = &e->seeds[i];
	*m = (struct map_seed){
		.pid = h->pid,
		.start = start,
		.end = end,
		.region = region_of(kind),
		.attach = kv_get(s, n, "attach", buf, sizeof(buf)) && buf[0] == '1',
		.name = heap_strndup(e, name, strlen(name)),
	};
}

void map_seeds_free(struct engine *e)
{
	for (uint32_t i = 0; i < e->nseeds; i++)
		free(e->seeds[i].name);
	free(e->seeds);
	e->seeds = NULL;
	e->nseeds = e->seeds_cap = 0;
}

/*
 * The region of process pid that holds addr: 1 + its index in e->maps, 0
 * none. One mmap()ed during the capture first; else a seed, copied in.
 */
static uint32_t map_find(struct engine *e, uint32_t pid, uint64_t addr)
{
	struct map_seed *m;
	struct map_region *x;
	uint32_t k = UINT32_MAX;

	/* slots are reused once full: the newest made, not the last slot, is what is there */
	for (uint32_t i = 0; i < e->nmaps; i++)
		if (!e->maps[i].gone && !e->maps[i].region && e->maps[i].pid == pid &&
		    addr >= e->maps[i].start && addr < e->maps[i].end &&
		    (k == UINT32_MAX || e->maps[i].born > e->maps[k].born))
			k = i;
	if (k != UINT32_MAX) {
		e->maps[k].used = ++e->map_seq;
		return k + 1;
	}
	m = e->nseeds ? seed_find(e, pid, addr) : NULL;
	if (!m)
		return 0;
	/* copied already */
	for (uint32_t i = 0; i < e->nmaps; i++)
		if (!e->maps[i].gone && e->maps[i].region && e->maps[i].pid == pid &&
		    e->maps[i].start == m->start) {
			e->maps[i].end = m->end;
			e->maps[i].used = ++e->map_seq;
			return i + 1;
		}
	x = map_slot(e, true);
	x->start = m->start;
	x->end = m->end;
	x->pid = pid;
	x->region = m->region;
	x->before = m->attach;
	x->anon = m->region == ENG_REGION_ANON || m->region == ENG_REGION_HEAP ||
		  m->region == ENG_REGION_STACK || m->region == ENG_REGION_OTHER;
	x->kind = x->anon ? SB_FILE_NONE : SB_FILE_REGULAR;
	snprintf(x->path, sizeof(x->path), "%s", m->name);
	return (uint32_t)(x - e->maps) + 1;
}

/* brk moved pid's break to brk: its [heap] ends there */
static void heap_moved(struct engine *e, uint32_t pid, uint64_t brk)
{
	uint32_t i = seed_lower(e, pid, 0);
	uint64_t end = (brk + 4095) & ~4095ull;

	for (; i < e->nseeds && e->seeds[i].pid == pid; i++) {
		struct map_seed *m = &e->seeds[i];

		if (m->region != ENG_REGION_HEAP || brk <= m->start)
			continue;
		/* not over the next region */
		if (i + 1 < e->nseeds && e->seeds[i + 1].pid == pid && end > e->seeds[i + 1].start)
			end = e->seeds[i + 1].start;
		m->end = end;
		for (uint32_t k = 0; k < e->nmaps; k++)
			if (e->maps[k].region == ENG_REGION_HEAP && e->maps[k].pid == pid &&
			    e->maps[k].start == m->start)
				e->maps[k].end = end;
		return;
	}
}

/* pid's regions wholly inside [lo, hi) are gone; copies: those read from the maps too */
static void regions_gone_inside(struct engine *e, uint32_t pid, uint64_t lo, uint64_t hi,
				bool copies)
{
	for (uint32_t k = 0; k < e->nmaps; k++)
		if ((copies || !e->maps[k].region) && e->maps[k].pid == pid &&
		    e->maps[k].start >= lo && e->maps[k].end <= hi)
			e->maps[k].gone = true;
}

/*
 * An mmap family record: mappings made (with what they map, when the record
 * says) and unmapped, and the heap moved, for the fault blame (eng_map); the
 * call itself is alloc.
 */
static void ev_mmsys(struct engine *e, const struct sb_hdr *h, uint64_t s)
{
	const struct sb_mmsys *r = (const void *)h;
	const struct sb_mmsys_map *m = sb_mmsys_map_of(h);
	struct map_region *x;
	/* the range it acted on: an mmap's is what it returned */
	uint64_t lo = r->call == SB_SYS_MMAP ? (uint64_t)r->ret : r->addr, hi = lo + r->len;

	ev_interval(e, h->tid, s, h->ts, SB_EV_MMSYS, ENG_ALLOC, ENG_N_MMAP);
	if ((r->call == SB_SYS_MMAP || r->call == SB_SYS_MPROTECT) && (r->arg & 0x4) && r->ret >= 0)
		stacks_code_mapped(e, h->pid, lo, hi);
	if (r->call == SB_SYS_MUNMAP && r->ret == 0 && (e->nmaps || e->nseeds)) {
		uint32_t i = seed_lower(e, h->pid, lo), j;

		regions_gone_inside(e, h->pid, lo, hi, true);
		/* the seeds wholly inside go; a part unmapped keeps its name */
		for (j = i; j < e->nseeds && e->seeds[j].pid == h->pid && e->seeds[j].end <= hi; j++)
			free(e->seeds[j].name);
		if (j > i) {
			memmove(&e->seeds[i], &e->seeds[j], (e->nseeds - j) * sizeof(*e->seeds));
			e->nseeds -= j - i;
		}
		return;
	}
	if (r->call == SB_SYS_BRK && r->ret > 0 && e->nseeds) {
		heap_moved(e, h->pid, (uint64_t)r->ret);
		return;
	}
	if (!m || r->ret <= 0 || !r->len)
		return;
	hi = lo + ((r->len + 4095) & ~4095ull);
	/* the regions it mapped over (MAP_FIXED) are gone */
	regions_gone_inside(e, h->pid, lo, hi, false);
	x = map_slot(e, false);
	e->map_gen++;
	x->born = x->used;
	x->start = lo;
	x->end = hi;
	x->pid = h->pid;
	x->anon = (m->flags & 0x20) != 0; /* MAP_ANONYMOUS */
	x->kind = m->file.kind;
	if (e->current_step) {
		x->step_known = true;
		x->step_number = e->current_step->number;
	}
	if (!x->anon) {
		sb_iosys_file_path(&m->file, x->path, sizeof(x->path));
		proc_shm_note(e, h->pid, x->path);
	}
}

void ev_interval(struct engine *e, uint32_t tid, uint64_t s, uint64_t end, int ev,
		 int cause, int count)
{
	struct thread *t = thread_find(e, tid);
	struct accum *a;

	/* what it did, should it wake a candidate (a waker's activity, classify.c) */
	if (t && (cause == ENG_MEM_RECLAIM || cause == ENG_ALLOC || cause == ENG_IO_WAIT))
		act_push(e, t, cause == ENG_MEM_RECLAIM ? ENG_ACT_RECLAIM :
			 cause == ENG_ALLOC ? ENG_ACT_ALLOC : ENG_ACT_IO, s, end);
	if (!t || t->candidate < 0)
		return;
	a = own_event(e, t, s, ev, 0);
	add_overlay(t, s, end, cause);
	if (a && count >= 0)
		a->count[count]++;
}

/*
 * The file of an iosys record in e->io_files: 1 + its index (the least
 * recently met is replaced). Its inode and its path: a file deleted and
 * another created gets the same inode back, and must not take the first's name.
 */
static uint32_t io_file_of(struct engine *e, const struct sb_iosys_file *f)
{
	char path[ENG_IO_PATH_MAX];
	uint32_t k = 0;
	struct io_file *x;

	sb_iosys_file_path(f, path, sizeof(path));
	if (!e->io_files)
		e->io_files = heap_calloc(e, IO_FILES_MAX, sizeof(*e->io_files));
	for (uint32_t i = 0; i < e->nio_files; i++) {
		x = &e->io_files[i];
		if (x->ino == f->ino && x->dev == f->dev && x->kind == f->kind &&
		    (!path[0] || !strcmp(x->path, path))) {
			x->used = e->io_seq;
			return i + 1;
		}
		if (x->used < e->io_files[k].used)
			k = i;
	}
	if (e->nio_files < IO_FILES_MAX)
		k = e->nio_files++;
	x = &e->io_files[k];
	memset(x, 0, sizeof(*x));
	x->ino = f->ino;
	x->dev = f->dev;
	x->kind = f->kind;
	x->used = e->io_seq;
	x->made = ++e->io_files_made;
	x->step_seq = UINT64_MAX;
	memcpy(x->path, path, sizeof(x->path));
	return k + 1;
}

/*
 * An I/O call, swept at its start s: on a CPU inside it, or asleep in it
 * uninterruptibly, the time is the I/O's. When the record names its file,
 * the overlay carries it, so that the blamed time can say which file.
 */
static void ev_iosys(struct engine *e, const struct sb_hdr *h, uint64_t s)
{
	const struct sb_iosys_file *f = sb_iosys_file_of(h);
	const struct sb_iosys *r = (const void *)h;
	struct thread *t;
	struct io_file *x;
	uint64_t seq = e->current_step ? e->current_step->seq : UINT64_MAX - 1;
	uint32_t id;

	ev_interval(e, h->tid, s, h->ts, SB_EV_IOSYS, ENG_IO_WAIT, ENG_N_IO);
	/* a call with no file is told by its name only where it has none to have: sync */
	if (!f || (f->kind == SB_FILE_NONE && r->call != SB_IO_SYNC))
		return;
	e->io_seq++;
	id = io_file_of(e, f);
	x = &e->io_files[id - 1];
	/* the counter's value before this step: the file's last record in an earlier one */
	if (x->step_seq != seq) {
		x->base_written = x->last_written;
		x->step_seq = seq;
	}
	if (f->written < x->base_written)
		x->base_written = 0; /* a new open file with that inode: counted afresh */
	x->last_written = f->written;
	t = thread_find(e, h->tid);
	if (t)
		act_io_name(e, t, s, (uint8_t)r->call, id);
	if (!t || t->candidate < 0 || !t->noverlays)
		return;
	/* the overlay ev_interval() just added */
	struct overlay *o = &t->overlays[t->noverlays - 1];

	if (o->s != s || o->cause != ENG_IO_WAIT)
		return;
	o->io_call = (uint8_t)r->call;
	o->io_file = id;
	o->io_seq = e->io_seq;
	o->io_bytes = r->ret > 0 ? (uint64_t)r->ret : 0;
	o->io_written = f->written - x->base_written;
}

/*
 * A sched_setaffinity() call, swept at its start s. Being moved is done inside
 * the call: on a CPU, asleep while the stopper moves the thread, runnable on
 * the new CPU (the moves themselves are counted by their migrate records). A
 * thread that calls it back to back is busy moving itself: the few
 * microseconds between the calls (the system call's entry and exit, the loop)
 * are the moves' too.
 */
#define AFF_JOIN_NS 20000

static void ev_affinity(struct engine *e, const struct sb_affinity *r, uint64_t s)
{
	struct thread *t = thread_find(e, r->h.tid);
	struct thread *m = thread_find(e, r->pid ? r->pid : r->h.tid);

	/* the thread it may move: its next move is this call's */
	if (m && r->ret == 0) {
		m->aff_pending = true;
		m->aff_s = s;
		m->aff_e = r->h.ts;
		m->aff_by = r->h.tid;
	}
	/* the caller's time in the call is its own moving */
	if (t) {
		t->mv_how = ENG_MOVE_SELF;
		t->mv_by = r->h.tid;
		t->mv_from = (int16_t)t->cpu;
		t->mv_to = -1;
	}

	if (!t || t->candidate < 0)
		return;
	if (t->affinity_end && s > t->affinity_end && s - t->affinity_end <= AFF_JOIN_NS)
		add_overlay(t, t->affinity_end, s, ENG_MIGRATION);
	ev_interval(e, r->h.tid, s, r->h.ts, SB_EV_AFFINITY, ENG_MIGRATION, -1);
	t->affinity_end = r->h.ts;
}

/*
 * What one allocator call's probes cost the target. The cost model's figure is
 * measured at capture start on the agent's own function; in the target the
 * same traps cost more (its caches, a busy machine: bench/RESULTS.md,
 * section 12). A burst's calls are fast ones (each under the recorder's
 * threshold) and mostly a few nanoseconds of real work, so the least time per
 * call over the bursts seen is the traps' cost in place; it raises the model's
 * figure by at most half, so that a run of genuinely slower calls can never
 * turn into the tracer's time.
 */
static uint64_t alloc_call_cost(const struct engine *e)
{
	uint64_t c = e->costs.ns[SB_COST_ALLOC_CALL], f = e->burst_call_floor;

	return f > c ? min64(f, c + c / 2) : c;
}

static void burst_floor_see(struct engine *e, const struct sb_alloc_burst *r)
{
	uint64_t per;

	if (r->calls < 64)
		return;
	per = r->sum_ns / r->calls;
	if (!e->burst_call_floor || per < e->burst_call_floor)
		e->burst_call_floor = per;
}

/*
 * An allocator call recorded on its own, [s, end]: of it, the cost of its
 * uprobe and uretprobe (the cost model) is the tracer's, drawn at its start,
 * where the entry trap is; the rest stays alloc.
 */
static void ev_alloc_tracer(struct engine *e, uint32_t tid, uint64_t s, uint64_t end)
{
	struct thread *t = thread_find(e, tid);
	uint64_t c = alloc_call_cost(e);

	if (!t || t->candidate < 0 || end <= s)
		return;
	add_overlay(t, s, s + min64(c, end - s), ENG_TRACER);
}

static void add_burst(struct thread *t, uint64_t s, uint64_t end, uint64_t budget,
		      uint64_t calls_ns, uint64_t tracer)
{
	if (end <= s || !budget)
		return;
	if (t->nbursts == BURSTS_MAX) {
		uint32_t k = 0;

		for (uint32_t i = 1; i < t->nbursts; i++)
			if (t->bursts[i].e < t->bursts[k].e)
				k = i;
		t->bursts[k] = t->bursts[--t->nbursts];
	}
	budget = min64(budget, end - s);
	calls_ns = min64(calls_ns, budget);
	tracer = min64(tracer, calls_ns);
	t->bursts[t->nbursts++] = (struct burst){ .s = s, .e = end, .left = budget,
						  .tracer = tracer, .tracer_all = tracer,
						  .calls_ns = calls_ns };
}

/* a burst of fast allocator calls, swept at its start s */
static void ev_alloc_burst(struct engine *e, const struct sb_alloc_burst *r, uint64_t s)
{
	struct thread *t = thread_find(e, r->h.tid);
	uint64_t span = r->h.ts > r->start_ns ? r->h.ts - r->start_ns : 0, budget = r->sum_ns, c;
	struct accum *a;

	burst_floor_see(e, r);
	if (!t || t->candidate < 0)
		return;
	c = alloc_call_cost(e);
	a = own_event(e, t, s, SB_EV_ALLOC_BURST, 0);
	if (span && (r->sum_ns + r->slow_ns) / STORM_NUM >= span / STORM_DEN)
		budget = span; /* a storm */
	/* its calls' probes: one call's cost in place, the calls the probes counted */
	add_burst(t, s, r->h.ts, budget, r->sum_ns,
		  r->calls > UINT64_MAX / (c + 1) ? UINT64_MAX : r->calls * c);
	if (a)
		a->count[ENG_N_BURST_ALLOCS] += (uint32_t)min64(r->calls,
							      UINT32_MAX - a->count[ENG_N_BURST_ALLOCS]);
}

/* a source of an interrupt run: budget ns of t's on-CPU time in [s, end] is irq */
static void add_irq_burst(struct engine *e, struct thread *t, uint64_t s, uint64_t end, uint64_t ns, uint64_t tracer,
			  uint16_t cpu, uint8_t src, uint32_t irq, const char *name)
{
	struct irq_burst *q = e->irqb[t->candidate], *b;

	if (end <= s || !ns)
		return;
	if (t->nirqb == IRQ_BURSTS_MAX) {
		uint32_t k = 0;

		for (uint32_t i = 1; i < t->nirqb; i++)
			if (q[i].e < q[k].e)
				k = i;
		q[k] = q[--t->nirqb];
	}
	b = &q[t->nirqb++];
	memset(b, 0, sizeof(*b));
	b->s = s;
	b->e = end;
	/*
	 * Of a probe pair's time, the part after the entry's clock reading and
	 * before the exit's is inside the timed handler; the rest, about as
	 * much, is on the thread's time around it (docs/ARCHITECTURE.md,
	 * "Interrupts"): the budget takes that half too, the tracer all of it
	 */
	b->left = min64(ns + tracer / 2, end - s);
	b->tracer = b->tracer_all = min64(tracer, b->left);
	b->calls_ns = b->left;
	b->src = src;
	b->cpu = cpu;
	b->irq = irq;
	if (name)
		memcpy(b->name, name, SB_COMM_LEN);
}

/*
 * Interrupt handlers on a thread's time, [s, ts] (docs/ARCHITECTURE.md,
 * "Interrupts"): each source's time there is irq, out of what would be its
 * own code
 */
static void ev_irq_run(struct engine *e, const struct sb_irq_run *r, uint64_t s)
{
	struct thread *t = thread_find(e, r->h.tid);
	uint64_t c = e->costs.ns[SB_COST_IRQ], soft = 0, sys = 0;
	char name[SB_COMM_LEN];

	if (!t || t->candidate < 0 || r->h.ts <= s)
		return;
	for (unsigned v = 0; v < SB_NSOFTIRQ; v++)
		soft += r->vec_ns[v];
	for (unsigned v = 0; v < SB_NSOFTIRQ; v++)
		if (r->vec_ns[v])
			add_irq_burst(e, t, s, r->h.ts, r->vec_ns[v],
				      share(r->soft_count * c, r->vec_ns[v], soft), r->h.cpu, (uint8_t)v,
				      0, NULL);
	for (unsigned k = 0; k < SB_NSYSIRQ; k++)
		sys += r->sys_ns[k];
	for (unsigned k = 0; k < SB_NSYSIRQ; k++)
		if (r->sys_ns[k])
			add_irq_burst(e, t, s, r->h.ts, r->sys_ns[k],
				      share(r->sys_count * c, r->sys_ns[k], sys), r->h.cpu,
				      (uint8_t)(SB_NSOFTIRQ + 1 + k), 0, NULL);
	memcpy(name, r->hard_name, SB_COMM_LEN);
	name[SB_COMM_LEN - 1] = 0;
	add_irq_burst(e, t, s, r->h.ts, r->hard_ns, r->hard_count * c, r->h.cpu, SB_NSOFTIRQ,
		      r->hard_irq, name);
}

/* a task seen running in a real-time class: the first ENG_RT_MAX kept (engine_task_realtime) */
static void realtime_seen(struct engine *e, uint32_t tid, const char *comm)
{
	if (e->nrt < ENG_RT_MAX && !engine_task_realtime(e, tid, comm)) {
		e->rt[e->nrt].tid = tid;
		memcpy(e->rt[e->nrt++].comm, comm, SB_COMM_LEN);
	}
}

static void ev_runslice(struct engine *e, const struct sb_runslice *r, uint64_t start)
{
	struct runslice x = { .s = start, .e = r->h.ts, .pid = r->h.pid, .tid = r->h.tid };
	struct thread *t;

	if (x.e <= x.s)
		return;
	x.steal_ns = min64((uint64_t)r->steal_us * 1000, x.e - x.s);
	/*
	 * A slice of a followed thread (the target's or a followed child's: the
	 * engine keeps no other thread) proves it was on a CPU from its start:
	 * if its switch-in never arrived, this stands in for it, on whichever
	 * CPU the thread was last seen. Besides ring drops, the kernel itself
	 * sometimes puts a thread on a CPU with no sched_switch event (seen on a
	 * 2-vCPU VM, perf's own record of the tracepoint showing the same gap).
	 */
	if ((t = thread_find(e, r->h.tid)) && !t->sink && t->pid == r->h.pid &&
	    (t->state == TS_RUNNABLE || t->state == TS_SLEEP_S || t->state == TS_SLEEP_D ||
	     t->state == TS_UNKNOWN)) {
		struct sb_switch_in in = { .h = r->h };

		in.h.type = SB_EV_SWITCH_IN;
		in.h.ts = start;
		ev_switch_in(e, &in);
		e->switch_ins_inferred++;
	}
	memcpy(x.comm, r->comm, SB_COMM_LEN);
	runslice_push(e, r->h.cpu, &x);
	if (r->h.flags & SB_RUNSLICE_REALTIME)
		realtime_seen(e, r->h.tid, x.comm);
}

/*
 * A scheduler run (bpf/events.h, struct sb_sched_run), swept at its start s:
 * the thread was on a CPU at s and again at h.ts, and off it for the run's
 * sleeps and waits in between, which are not placed in time: a piece of the
 * span takes its share of them (classify.c, account_srun). Only candidates
 * keep it; any other thread was running at both ends.
 */
static void ev_sched_run(struct engine *e, const struct sb_sched_run *r, uint64_t s)
{
	struct thread *t = thread_get(e, r->h.tid, r->h.pid);
	uint64_t end = r->h.ts > s ? r->h.ts : s, off;

	if ((r->h.flags & SB_SCHED_RUN_RUNNER_REALTIME) && r->runner_tid)
		realtime_seen(e, r->runner_tid, r->runner_comm);

	if (r->sleeps)
		timed_handoff(e, t, r->waker_pid, r->waker_tid, s, end);
	if (t->candidate < 0) {
		if (t->state != TS_DEAD) {
			t->state = TS_RUNNING;
			t->since = end;
			t->cpu = r->h.cpu;
		}
		return;
	}
	own_event(e, t, s, SB_EV_SCHED_RUN, 0);
	timed_retry_run(e, t, r, s);
	chain_run(t, r, end);
	if (t->state != TS_RUNNING) {
		/* a switch-in lost, or never traced: on a CPU from the run's start */
		t->state = TS_RUNNING;
		t->since = s;
	}
	t->cpu = r->h.cpu;
	t->migrated = false;
	off = r->sleep_ns + r->wait_ns;
	if (off > end - s) {
		/* never more than the span: the sums are the kernel's, the span too */
		double k = (double)(end - s) / (double)off;

		t->srun_sleep = (uint64_t)(r->sleep_ns * k);
		t->srun_wait = (uint64_t)(r->wait_ns * k);
	} else {
		t->srun_sleep = r->sleep_ns;
		t->srun_wait = r->wait_ns;
	}
	t->srun_idle = min64(r->idle_wait_ns, t->srun_wait);
	t->srun_steal = min64(r->steal_ns, t->srun_wait - t->srun_idle);
	t->srun_sleeps = r->sleeps;
	t->srun_preempts = r->preempts;
	t->srun_waker_pid = r->waker_pid;
	t->srun_waker_tid = r->waker_tid;
	memcpy(t->srun_waker_comm, r->waker_comm, SB_COMM_LEN);
	t->srun_runner_pid = r->runner_pid;
	t->srun_runner_tid = r->runner_tid;
	memcpy(t->srun_runner_comm, r->runner_comm, SB_COMM_LEN);
	t->srun_s = s;
	t->srun_e = end;
	if (end == s) {
		/* nothing to spread: all of it now */
		t->srun_e = 0;
	}
}

static void ev_thread(struct engine *e, const struct sb_thread *r, bool exiting)
{
	struct thread *t = thread_get(e, r->h.tid, r->h.pid);

	comm_copy(t->comm, r->comm);
	if (!exiting && r->parent_tid && r->parent_tid != r->h.tid) {
		t->new_ns = r->h.ts;
		t->new_by_pid = r->parent_pid ? r->parent_pid : r->h.pid;
		t->new_by_tid = r->parent_tid;
	}
	/* a new process forked by a followed one */
	if (!exiting && r->parent_pid && r->parent_pid != r->h.pid)
		proc_note(e, r->h.pid, r->parent_pid, NULL, 0, r->h.ts);
	if (exiting && r->h.tid == r->h.pid)
		proc_gone(e, r->h.pid, r->h.ts);
	if (exiting) {
		if (t->candidate >= 0)
			thread_account(e, t, r->h.ts);
		t->state = TS_DEAD;
		t->since = r->h.ts;
		step_owner_gone(e, t, r->h.ts);
		launcher_gone(e, r->h.tid);
	}
}

static int cuda_cause(uint32_t fn)
{
	switch (fn) {
	case SB_CU_SYNC: return ENG_CUDA_SYNC;
	case SB_CU_ALLOC:
	case SB_CU_FREE: return ENG_CUDA_ALLOC;
	}
	return ENG_CUDA_API;
}

/* one record, in time order; key = the time it takes effect */
void sweep_record(struct engine *e, uint64_t key, const struct sb_hdr *h)
{
	if (key < e->now)
		key = e->now;
	/* the GPU went idle somewhere before this instant */
	if (e->gpu_started && !e->gap_open && key > e->busy_until)
		gpu_gap_open(e, e->busy_until);
	e->now = key;
	/* the probes' cost on the process whose marks are the steps (a launcher's child) */
	if (e->current_step && h->pid == (e->marks.pid ? e->marks.pid : e->target_pid) &&
	    h->type <= SB_EV_KERNEL_LAST)
		sb_cost_count(h, e->current_step->events_by_cost);
	if (e->current_step && e->current_step->naudit && h->type <= SB_EV_KERNEL_LAST)
		audit_count(e, h);

	switch (h->type) {
	case SB_EV_SWITCH_OUT:
		ev_switch_out(e, (const struct sb_switch_out *)h);
		break;
	case SB_EV_SWITCH_IN:
		ev_switch_in(e, (const struct sb_switch_in *)h);
		break;
	case SB_EV_RUNSLICE:
		ev_runslice(e, (const struct sb_runslice *)h, key);
		break;
	case SB_EV_WAKEUP:
		ev_wakeup(e, (const struct sb_wakeup *)h);
		break;
	case SB_EV_MIGRATE:
		ev_migrate(e, (const struct sb_migrate *)h);
		break;
	case SB_EV_FAULT:
		ev_fault(e, (const struct sb_fault *)h);
		break;
	case SB_EV_FAULT_RUN:
		ev_fault_run(e, (const struct sb_fault_run *)h, key);
		break;
	case SB_EV_SCHED_RUN:
		ev_sched_run(e, (const struct sb_sched_run *)h, key);
		break;
	case SB_EV_RECLAIM: {
		const struct sb_reclaim *r = (const void *)h;

		ev_interval(e, h->tid, key, r->h.ts, SB_EV_RECLAIM, ENG_MEM_RECLAIM,
			    ENG_N_RECLAIMS);
		break;
	}
	case SB_EV_MMSYS:
		ev_mmsys(e, h, key);
		break;
	case SB_EV_ALLOC:
		ev_interval(e, h->tid, key, h->ts, SB_EV_ALLOC, ENG_ALLOC, ENG_N_ALLOCS);
		ev_alloc_tracer(e, h->tid, key, h->ts);
		break;
	case SB_EV_ALLOC_BURST:
		ev_alloc_burst(e, (const struct sb_alloc_burst *)h, key);
		break;
	case SB_EV_IRQ_RUN:
		ev_irq_run(e, (const struct sb_irq_run *)h, key);
		break;
	case SB_EV_IOSYS:
		ev_iosys(e, h, key);
		break;
	case SB_EV_STACK:
		stacks_record(e, h);
		break;
	case SB_EV_AFFINITY:
		ev_affinity(e, (const struct sb_affinity *)h, key);
		break;
	case SB_EV_CUDA: {
		const struct sb_cuda *c = (const void *)h;
		struct thread *t = thread_get(e, h->tid, h->pid);

		if (c->fn == SB_CU_LAUNCH || c->fn == SB_CU_MEMCPY) {
			candidate_add(e, t);
			launcher_add(e, h->tid);
			e->last_launch_tid = h->tid;
		}
		ev_interval(e, h->tid, key, h->ts, SB_EV_CUDA, cuda_cause(c->fn), ENG_N_CUDA);
		break;
	}
	case SB_EV_STEP: {
		const struct sb_step *s = (const void *)h;
		struct thread *t = thread_get(e, h->tid, h->pid);

		const struct sb_step_alloc *a = sb_step_alloc_of(h);

		own_event(e, t, key, SB_EV_STEP, 0);
		if (e->marks.pid && h->pid != e->marks.pid) {
			const struct proc *mp = proc_find(e, e->marks.pid);

			/* gone by this mark's time (the records are in time order here) */
			e->marks.gone = mp && mp->gone_ns && mp->gone_ns <= h->ts;
		}
		int owner = marks_owner(&e->marks, h->pid, e->target_pid);

		if (owner == MARK_OTHER) {
			e->marks_ignored++;
			break;
		}
		/* a restart's or the target's steps go on from here, their numbers anew */
		if (owner == MARK_RESTART || owner == MARK_TAKEN) {
			if (e->current_step)
				step_end(e, h->ts, true);
			e->number_seen = false;
			e->numbers_by_one = 0;
			e->mark_restarts += owner == MARK_RESTART;
		}
		e->mark_fast_ok = a != NULL;
		e->mark_fast = a ? a->fast_calls : 0;
		e->mark_fast_tid = h->tid;
		step_mark(e, s->source == SB_STEP_UPROBE ? ENG_SRC_UPROBE : ENG_SRC_USDT, MARK_ONE,
			s->step, key, h->tid);
		e->mark_fast_ok = false;
		break;
	}
	case SB_EV_THREAD_NEW:
		ev_thread(e, (const struct sb_thread *)h, false);
		break;
	case SB_EV_THREAD_EXIT:
		ev_thread(e, (const struct sb_thread *)h, true);
		break;
	case SB_EV_RENAME: {
		const struct sb_rename *r = (const void *)h;

		comm_copy(thread_get(e, h->tid, h->pid)->comm, r->newcomm);
		break;
	}
	case SB_REC_GPU:
		gpu_record(e, (const struct sb_gpu *)h);
		break;
	}
}
