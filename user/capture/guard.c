// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The overhead guard (guard.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/guard.h"
#include "capture/probes.h"
#include "base/util.h"

/*
 * full: the estimate is redone this often. Short, so that a storm of calls is
 * caught within a fraction of a second rather than after a whole one (the
 * steps traced in full before the guard acts are the ones that make the P99);
 * long enough to hold a step or two of a trainer's allocation phase.
 */
#define WINDOW_NS 200000000ull
/*
 * full: the limit must be passed this many windows in a row (600 ms) before
 * the probes are duty-cycled. A one-off storm of allocator calls is what a
 * user hunts, and is traced in full; a rate that goes on is what the guard
 * limits. Repeated storms a few steps apart fill every window.
 */
#define OVER_WINDOWS 3
#define PERIOD_NS 1000000000ull       /* sampled: the shortest attach/detach cycle */
#define MIN_ATTACHED_NS 20000000ull   /* sampled: the shortest attached window */
/*
 * The safe start's first window, planned with nothing to weigh it. A window
 * slows the thread that pays most by up to its whole length (a PyTorch
 * loop's main thread and its DataLoader workers, on one CPU, spent most of
 * it in the probes), all of it in the one or two steps it covers: a first
 * window of MIN_ATTACHED_NS made the loop's second step after an attach
 * about 40% slower, a tail step of the tracer's making (docs/ARCHITECTURE.md,
 * "The tracer's budget"). The windows planned from its estimate are the
 * usual ones.
 */
#define FIRST_WINDOW_NS 2000000ull
/* back to full only once the quiet windows in a row were attached this long together */
#define LOW_MIN_NS 60000000ull
#define DUTY_MIN 1000ull              /* ppm of the time attached, at least (0.1%) */
#define DUTY_MAX 500000ull            /* and at most (50%) */
#define PPM 1000000ull
/*
 * A window slows the steps it covers by the whole estimate. Where that is
 * more than twice the limit, the windows stay under half the limit's share of
 * the time (0.5% at 1%), so that the steps they slow stay out of the P99
 * (docs/ARCHITECTURE.md, "The tracer's budget"); the allocator probes then
 * take less than their share.
 */
/*
 * Sampled: back to full after this many windows in a row under half the
 * limit, each twice as long as the one before (up to half the period).
 * Allocation comes in storms, a phase of the step: a window of 20 ms that
 * falls between two finds no call, and one such window alone would put the
 * probes back on for a whole second of the storms. The duty stays what the
 * last estimate over the limit made it, but for the longer windows.
 */
#define LOW_WINDOWS 3
/* at the end, a window cut shorter than this gives no estimate of its own */
#define MIN_FINAL_NS 100000000ull
/* the always-on probes' cost is measured over this long */
#define OTHERS_NS 1000000000ull

struct gthread {
	uint32_t tid;      /* 0: a free slot */
	uint64_t fast;     /* the kernel's count of its fast calls when its window began */
	uint64_t fast_now; /* the same, at the reading that ends the window */
	uint64_t slow;     /* its calls recorded on their own since its window began */
	uint64_t probe_ns; /* the always-on probes' estimated time on it since others_since */
	bool gone;         /* it exited: fast_now is final, the entry goes after the window's count */
};

struct guard {
	struct probes *p;
	struct sb_guard st;
	const struct sb_costs *costs; /* what an event of each class costs */
	uint64_t alloc_ns;       /* what one call's probes cost */
	uint64_t others_since;   /* the always-on probes' time is counted from here */
	uint64_t others_total;   /* and all threads' together */
	bool others_known;       /* others_ppm has been measured */
	unsigned cpus;           /* the CPUs the target's threads may run on, at least 1 */
	bool started;            /* the allocator probes were found: the guard runs */
	bool dead;               /* they could not be attached again: nothing more to do */
	bool on;                 /* they are attached now */
	uint64_t due;
	uint64_t win_start;      /* the attached window being counted began */
	uint64_t cycle_start;    /* sampled: the cycle began (the previous window ended) */
	uint64_t attach_ns;      /* sampled: how long a window stays attached */
	int low;                 /* sampled: windows in a row under half the limit */
	uint64_t low_ns;         /* and how long they were attached, together */
	int over;                /* full: windows in a row over the limit */
	uint64_t recent[LOW_WINDOWS]; /* sampled: the estimates of the last windows */
	double last_free_rate;   /* the last window's free_rate (struct wsum) */
	uint32_t worst_tid;
	struct gthread *t;       /* open addressing on tid, a power of two slots */
	uint32_t cap, n;
	uint32_t ngone;          /* entries marked gone, not yet removed */
	char err[128];
};

/* what one window counted */
struct wsum {
	uint64_t sum;            /* calls of all threads */
	uint64_t max;            /* of the busiest thread */
	uint32_t tid;            /* which */
	uint64_t end, len;       /* when it was counted, and how long it was */
	double free_rate;        /* calls per ns the threads would make without the probes */
};

static uint32_t slot_of(uint32_t tid, uint32_t cap)
{
	uint32_t h = tid;

	h ^= h >> 16;
	h *= 0x45d9f3bu;
	h ^= h >> 16;
	return h & (cap - 1);
}

/* the table again at cap slots, without the entries keep() refuses */
static int rehash(struct guard *g, uint32_t cap, bool (*keep)(const struct gthread *t))
{
	struct gthread *t = calloc(cap, sizeof(*t));
	uint32_t n = 0, ngone = 0;

	if (!t)
		return -ENOMEM;
	for (uint32_t i = 0; i < g->cap; i++) {
		uint32_t j;

		if (!g->t[i].tid || (keep && !keep(&g->t[i])))
			continue;
		for (j = slot_of(g->t[i].tid, cap); t[j].tid; j = (j + 1) & (cap - 1))
			;
		t[j] = g->t[i];
		n++;
		ngone += t[j].gone;
	}
	free(g->t);
	g->t = t;
	g->cap = cap;
	g->n = n;
	g->ngone = ngone;
	return 0;
}

static int grow(struct guard *g)
{
	return rehash(g, g->cap ? 2 * g->cap : 64, NULL);
}

static bool not_gone(const struct gthread *t)
{
	return !t->gone;
}

/*
 * Idle: a thread that never called the allocator and whose records cost
 * nothing over the last second. Its entry may go: its next record makes it
 * again, and loses nothing (probe_ns counts from the last second).
 */
static bool busy(const struct gthread *t)
{
	return t->probe_ns || t->fast || t->fast_now || t->slow;
}

/* a window is open: the gone stay until it has counted them */
static bool idle_off(const struct gthread *t)
{
	return t->gone || busy(t);
}

static bool idle_dead_off(const struct gthread *t)
{
	return !t->gone && busy(t);
}

/*
 * Without the threads that keep() refuses, in a table sized for the rest (a
 * quarter full at most, 64 slots at least): a trainer whose DataLoader
 * workers come and go every epoch would otherwise grow it, and every
 * window's walk over it, without end.
 */
static void prune(struct guard *g, bool (*keep)(const struct gthread *t))
{
	uint32_t n = 0, cap = 64;

	for (uint32_t i = 0; i < g->cap; i++)
		n += g->t[i].tid && keep(&g->t[i]);
	while (cap < 4 * n)
		cap *= 2;
	if (n == g->n && cap >= g->cap)
		return;
	rehash(g, cap, keep);
}

/* tid's entry, NULL if it has none */
static struct gthread *thread_find(struct guard *g, uint32_t tid)
{
	if (!tid || !g->cap)
		return NULL;
	for (uint32_t i = slot_of(tid, g->cap); g->t[i].tid; i = (i + 1) & (g->cap - 1))
		if (g->t[i].tid == tid)
			return &g->t[i];
	return NULL;
}

/* tid's entry, made if new; NULL when out of memory */
static struct gthread *thread_get(struct guard *g, uint32_t tid)
{
	uint32_t i;

	if (!tid)
		return NULL;
	if (2 * (g->n + 1) > g->cap && grow(g))
		return NULL;
	for (i = slot_of(tid, g->cap); g->t[i].tid; i = (i + 1) & (g->cap - 1))
		if (g->t[i].tid == tid)
			return &g->t[i];
	g->t[i].tid = tid;
	g->n++;
	return &g->t[i];
}

struct guard *guard_new(struct probes *p, uint64_t limit_ppm, const struct sb_costs *costs,
		       unsigned cpus)
{
	struct guard *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->p = p;
	g->costs = costs;
	g->alloc_ns = costs->ns[SB_COST_ALLOC_CALL];
	g->cpus = cpus ? cpus : 1;
	g->st.mode = SB_GUARD_FULL;
	g->st.limit_ppm = limit_ppm;
	g->st.alloc_limit_ppm = limit_ppm / 4; /* until the others are measured: alloc_limit() */
	g->st.duty_ppm = PPM;
	return g;
}

void guard_free(struct guard *g)
{
	if (!g)
		return;
	free(g->t);
	free(g);
}

void guard_slow_call(struct guard *g, uint32_t tid)
{
	struct gthread *t;

	if (!g->started)
		return;
	t = thread_get(g, tid);
	if (t)
		t->slow++;
}

/*
 * The entry goes at the next window's count (windows open), or at the next
 * reading of the other probes (detached): by then nothing of it is left to count.
 */
void guard_forget(struct guard *g, uint32_t tid, uint64_t calls)
{
	struct gthread *t = thread_find(g, tid);

	if (!t || t->gone)
		return;
	t->fast_now = calls;
	t->gone = true;
	g->ngone++;
}

void guard_record(struct guard *g, const struct sb_hdr *h)
{
	uint64_t counts[SB_NCOST] = { 0 }, ns = 0;
	struct gthread *t;

	if (h->type > SB_EV_KERNEL_LAST)
		return;
	sb_cost_count(h, counts);
	/* the allocator probes are what the guard weighs against the rest */
	counts[SB_COST_ALLOC_CALL] = 0;
	for (int c = 0; c < SB_NCOST; c++)
		ns += counts[c] * g->costs->ns[c];
	if (!ns || !(t = thread_get(g, h->tid)))
		return;
	t->probe_ns += ns;
	g->others_total += ns;
}

/*
 * The allocator probes' share of the limit: what the always-on probes leave
 * of it, at least a quarter (their storms stay sampled however busy the
 * rest); the quarter too until the first measurement (guard_new): the
 * others may already take the rest.
 */
static uint64_t alloc_limit(const struct guard *g)
{
	uint64_t lim = g->st.limit_ppm, floor = lim / 4;

	return g->st.others_ppm + floor < lim ? lim - g->st.others_ppm : floor;
}

/*
 * Every OTHERS_NS: the always-on probes' estimated time over it, the
 * busiest thread's share or all threads' over the CPUs, whichever is more
 * (as estimate_ppm weighs the allocator's); averaged with the last reading,
 * so that one quiet or busy second moves the allocator's share by half.
 */
static bool others_update(struct guard *g, uint64_t now)
{
	uint64_t len, max = 0, ppm;

	if (!g->others_since) {
		g->others_since = now;
		return false;
	}
	if (now - g->others_since < OTHERS_NS)
		return false;
	len = now - g->others_since;
	/* before probe_ns is read and cleared: it says which threads were idle */
	prune(g, g->on ? idle_off : idle_dead_off);
	for (uint32_t i = 0; i < g->cap; i++) {
		if (g->t[i].probe_ns > max)
			max = g->t[i].probe_ns;
		g->t[i].probe_ns = 0;
	}
	if (g->others_total / g->cpus > max)
		max = g->others_total / g->cpus;
	ppm = (uint64_t)((double)max * PPM / (double)len);
	g->st.others_ppm = g->others_known ? (g->st.others_ppm + ppm) / 2 : ppm;
	g->others_known = true;
	g->st.alloc_limit_ppm = alloc_limit(g);
	g->others_total = 0;
	g->others_since = now;
	return true;
}

uint64_t guard_due(const struct guard *g)
{
	uint64_t others = g->others_since ? g->others_since + OTHERS_NS : 0;

	if (g->dead)
		return UINT64_MAX;
	return others && others < g->due ? others : g->due;
}

const struct sb_guard *guard_state(const struct guard *g)
{
	return &g->st;
}

uint32_t guard_worst_tid(const struct guard *g)
{
	return g->worst_tid;
}

const char *guard_error(const struct guard *g)
{
	return g->err;
}

static void totals_cb(void *ctx, uint32_t pid, uint32_t tid, const uint64_t calls[SB_FN_MAX],
		      const uint64_t ns[SB_FN_MAX])
{
	struct guard *g = ctx;
	struct gthread *t = thread_get(g, tid);
	uint64_t sum = 0;

	/* the target's threads and its followed children's alike */
	(void)pid;
	(void)ns;
	for (int i = 0; i < SB_FN_MAX; i++)
		sum += calls[i];
	if (t)
		t->fast_now = sum;
}

/* a window begins after a detached time: every thread's count as it stands */
static void window_begin(struct guard *g)
{
	probes_alloc_totals(g->p, totals_cb, g);
	for (uint32_t i = 0; i < g->cap; i++) {
		g->t[i].fast = g->t[i].fast_now;
		g->t[i].slow = 0;
	}
}

/*
 * A window ends: the calls of each thread since it began, the next window
 * beginning here. Counted while the probes are still on (detaching is
 * asynchronous: calls go on being counted a little while after, see
 * probes_alloc_attach); the few made between this count and the last
 * breakpoint going are left out, window_begin starts afresh. The ring is
 * drained first, so that the slow calls recorded so far are in; drained
 * before the table is walked, as what the drain counts may grow it.
 */
static void window_count(struct guard *g, struct wsum *w, void (*drain)(void *ctx), void *ctx)
{
	memset(w, 0, sizeof(*w));
	drain(ctx);
	probes_alloc_totals(g->p, totals_cb, g);
	w->end = mono_ns();
	w->len = w->end > g->win_start ? w->end - g->win_start : 0;
	for (uint32_t i = 0; i < g->cap; i++) {
		struct gthread *t = &g->t[i];
		/* a count never goes back; if it did, what it says now is all new */
		uint64_t calls = (t->fast_now >= t->fast ? t->fast_now - t->fast : t->fast_now) +
				 t->slow;
		double own;

		if (!t->tid)
			continue;
		t->fast = t->fast_now;
		t->slow = 0;
		w->sum += calls;
		if (calls > w->max) {
			w->max = calls;
			w->tid = t->tid;
		}
		/*
		 * Without the probes a thread calls faster: the time it spent in
		 * them goes to its own work. Its rate over the window less that
		 * time (at least a tenth of it: the cost may be overestimated).
		 */
		own = (double)w->len - (double)calls * (double)g->alloc_ns;
		if (own < w->len / 10.0)
			own = w->len / 10.0;
		if (calls && own > 0)
			w->free_rate += calls / own;
	}
	/* counted: the threads that exited during the window can go */
	if (g->ngone)
		prune(g, not_gone);
}

/*
 * The busiest thread's calls x their cost, per million of the window; or, if
 * more, all the threads' calls (child processes' too: DataLoader workers) x
 * their cost over the CPUs the target may use: threads that share the
 * critical thread's CPUs slow it down by the time their probes take there.
 */
static uint64_t estimate_ppm(const struct guard *g, const struct wsum *w)
{
	double one, all;

	if (!w->len)
		return 0;
	one = (double)w->max * (double)g->alloc_ns * 1e6 / (double)w->len;
	all = (double)w->sum * (double)g->alloc_ns * 1e6 / (double)w->len / g->cpus;
	return (uint64_t)(all > one ? all : one);
}

/*
 * A long window so far (a lull's, or one planned before any estimate): its
 * busiest thread's calls x their cost, as estimate_ppm, without ending it.
 * The slow calls still in the ring are not in yet: it can only say too little.
 */
static uint64_t window_peek_ppm(struct guard *g, uint64_t now)
{
	struct wsum w = { .len = now > g->win_start ? now - g->win_start : 0 };

	probes_alloc_totals(g->p, totals_cb, g);
	for (uint32_t i = 0; i < g->cap; i++) {
		const struct gthread *t = &g->t[i];
		uint64_t calls = (t->fast_now >= t->fast ? t->fast_now - t->fast : t->fast_now) +
				 t->slow;

		if (!t->tid)
			continue;
		w.sum += calls;
		if (calls > w.max)
			w.max = calls;
	}
	return estimate_ppm(g, &w);
}

static void took(struct guard *g, const struct wsum *w)
{
	g->st.estimate_ppm = estimate_ppm(g, w);
	g->worst_tid = w->tid;
	g->last_free_rate = w->free_rate;
}

/*
 * The calls of a cycle: those seen in its window, and those made in the
 * detached time before it (detached_ns), at the rate the window shows
 * without the probes' cost. At the rate with it, a thread that spent 60% of
 * the window in the probes would be taken to call 2.5 times too slowly.
 */
static uint64_t extrapolate(const struct wsum *w, uint64_t detached_ns)
{
	return w->sum + (uint64_t)(w->free_rate * (double)detached_ns + 0.5);
}

/*
 * The share of time to leave the probes on: what brings the estimate down to
 * the limit. From the highest estimate of the last few windows that were not
 * lulls (under half the limit, which keep the duty): one a little over half
 * the limit that caught the tail of a storm would otherwise leave them on for
 * most of the next storm. A window is at least MIN_ATTACHED_NS, enough calls to
 * estimate from; the period stretches to keep the share.
 */
static void set_duty(struct guard *g, uint64_t est)
{
	uint64_t duty = est ? (uint64_t)((double)g->st.alloc_limit_ppm * PPM / est) : DUTY_MAX;

	if (est > 2 * g->st.limit_ppm && duty > g->st.limit_ppm / 2)
		duty = g->st.limit_ppm / 2;
	if (duty < DUTY_MIN)
		duty = DUTY_MIN;
	if (duty > DUTY_MAX)
		duty = DUTY_MAX;
	g->attach_ns = PERIOD_NS / PPM * duty;
	if (g->attach_ns < MIN_ATTACHED_NS)
		g->attach_ns = MIN_ATTACHED_NS;
	g->st.duty_ppm = duty;
	g->st.period_ns = g->attach_ns / duty * PPM;
}

static void plan(struct guard *g)
{
	uint64_t est = 0;

	memmove(g->recent + 1, g->recent, sizeof(g->recent) - sizeof(g->recent[0]));
	g->recent[0] = g->st.estimate_ppm;
	for (int i = 0; i < LOW_WINDOWS; i++)
		if (g->recent[i] > est)
			est = g->recent[i];
	set_duty(g, est);
}

static int sampled_attach(struct guard *g);

/*
 * Sampled and detached, the allocator probes' share just changed (a reading
 * of the others): the duty for it from the same estimates (the last window's
 * among them), the next window no later than the new period puts it. Without
 * this, a share that grew from the start's quarter would keep the quarter's
 * long period (8 s at 1%) for a cycle, and low rates would wait three such
 * periods to go back to full.
 */
static void replan(struct guard *g)
{
	uint64_t est = g->st.estimate_ppm, next;

	for (int i = 0; i < LOW_WINDOWS; i++)
		if (g->recent[i] > est)
			est = g->recent[i];
	set_duty(g, est);
	next = g->cycle_start + g->st.period_ns - g->attach_ns;
	if (next < g->due)
		g->due = next;
}

/*
 * The probes would not attach again: off for good. Mostly the target has
 * just exited (the capture ends with it); the caller tells.
 */
static int failed(struct guard *g, int err)
{
	snprintf(g->err, sizeof(g->err), "%s", strerror(-err));
	g->dead = true;
	g->on = false;
	g->st.reason = SB_GUARD_R_FAILED;
	g->st.window_start_ns = 0;
	return GUARD_FAILED;
}

/*
 * The allocator probes are found. Guard off (limit 0): they are on already
 * (the capture leaves them on), the guard measures them throughout. Else the
 * safe start: they are off (probe_opts.alloc_start_off) and go on sampled,
 * at the duty that fits the limit should the busiest thread spend all its
 * time in them, the first window now; they widen to full as any sampled
 * probes do, once windows measure them under half the limit.
 */
static int start(struct guard *g, uint64_t now)
{
	int err;

	g->started = true;
	g->st.reason = SB_GUARD_R_START;
	g->st.window_start_ns = 0;
	if (!g->st.limit_ppm) {
		g->on = true;
		window_begin(g);
		g->win_start = now;
		g->due = now + WINDOW_NS;
		return GUARD_RECORD;
	}
	g->st.mode = SB_GUARD_SAMPLED;
	set_duty(g, PPM);
	g->attach_ns = FIRST_WINDOW_NS;
	g->cycle_start = now;
	err = sampled_attach(g);
	if (err)
		return err | GUARD_RECORD;
	return GUARD_RECORD | GUARD_START;
}

/* full: a second is over */
static int full_window_end(struct guard *g, void (*drain)(void *ctx), void *ctx)
{
	struct wsum w;

	window_count(g, &w, drain, ctx);
	took(g, &w);
	g->st.calls_seen += w.sum;
	g->st.calls_estimated += w.sum;
	g->over = g->st.limit_ppm && g->st.estimate_ppm > g->st.alloc_limit_ppm ? g->over + 1 : 0;
	if (g->over < OVER_WINDOWS) {
		g->win_start = w.end;
		g->due = w.end + WINDOW_NS;
		return 0;
	}
	g->over = 0;
	probes_alloc_attach(g->p, false);
	g->on = false;
	g->st.mode = SB_GUARD_SAMPLED;
	g->st.reason = SB_GUARD_R_OVER;
	g->st.window_start_ns = 0;
	plan(g);
	g->cycle_start = w.end;
	g->due = w.end + g->st.period_ns - g->attach_ns;
	return GUARD_RECORD | GUARD_CHANGED;
}

/* sampled: the detached part of a cycle is over */
static int sampled_attach(struct guard *g)
{
	int err = probes_alloc_attach(g->p, true);

	if (err < 0)
		return failed(g, err);
	g->on = true;
	window_begin(g);
	g->win_start = mono_ns();
	/* a long window is looked at every MIN_ATTACHED_NS (guard_run) */
	g->due = g->win_start + (g->attach_ns < MIN_ATTACHED_NS ? g->attach_ns : MIN_ATTACHED_NS);
	return 0;
}

/* sampled: an attached window is over */
static int sampled_window_end(struct guard *g, void (*drain)(void *ctx), void *ctx)
{
	struct wsum w;

	window_count(g, &w, drain, ctx);
	took(g, &w);
	g->st.calls_seen += w.sum;
	g->st.calls_estimated += extrapolate(&w, g->win_start - g->cycle_start);
	if (2 * g->st.estimate_ppm < g->st.alloc_limit_ppm) {
		g->low++;
		g->low_ns += w.len;
	} else {
		g->low = 0;
		g->low_ns = 0;
	}
	if (g->low >= LOW_WINDOWS && g->low_ns >= LOW_MIN_NS) {
		/* well under the limit for a while: they stay on, throughout again */
		g->low = 0;
		g->low_ns = 0;
		memset(g->recent, 0, sizeof(g->recent));
		g->st.mode = SB_GUARD_FULL;
		g->st.reason = SB_GUARD_R_UNDER;
		g->st.window_start_ns = 0;
		g->st.duty_ppm = PPM;
		g->st.period_ns = 0;
		g->win_start = w.end;
		g->due = w.end + WINDOW_NS;
		return GUARD_RECORD | GUARD_CHANGED;
	}
	probes_alloc_attach(g->p, false);
	g->on = false;
	g->st.reason = SB_GUARD_R_WINDOW;
	g->st.window_start_ns = g->win_start;
	g->st.window_end_ns = w.end;
	if (!g->low) {
		plan(g);
	} else {
		/*
		 * maybe a lull: look twice as long in the same period. After the
		 * safe start's short first window (FIRST_WINDOW_NS), from a planned
		 * window's length: its double would be a look shorter than any
		 * planned one, at a duty under DUTY_MIN
		 */
		if (g->attach_ns < MIN_ATTACHED_NS)
			g->attach_ns = MIN_ATTACHED_NS;
		if (2 * g->attach_ns <= g->st.period_ns / 2)
			g->attach_ns *= 2;
		g->st.duty_ppm = g->attach_ns * PPM / g->st.period_ns;
	}
	g->cycle_start = w.end;
	g->due = w.end + g->st.period_ns - g->attach_ns;
	return GUARD_RECORD;
}

static int guard_step(struct guard *g, uint64_t now, void (*drain)(void *ctx), void *ctx)
{
	if (now < g->due)
		return 0;
	if (!g->started) {
		/* no allocator probes yet: a rescan may find the library later */
		if (!probes_has_alloc(g->p)) {
			g->due = now + WINDOW_NS;
			return 0;
		}
		return start(g, now);
	}
	if (g->st.mode == SB_GUARD_FULL)
		return full_window_end(g, drain, ctx);
	if (!g->on)
		return sampled_attach(g);
	/*
	 * A window longer than MIN_ATTACHED_NS (a lull's, or planned before any
	 * estimate: up to half a second) ends at once where what it has cost so
	 * far is over twice the limit: it slows every step it covers by that,
	 * and a trainer may start its allocator storm inside it.
	 */
	if (now < g->win_start + g->attach_ns && window_peek_ppm(g, now) <= 2 * g->st.limit_ppm) {
		g->due = now + MIN_ATTACHED_NS < g->win_start + g->attach_ns ? now + MIN_ATTACHED_NS :
			 g->win_start + g->attach_ns;
		return 0;
	}
	return sampled_window_end(g, drain, ctx);
}

bool guard_window_open(const struct guard *g)
{
	return !g->dead && g->started && g->st.mode == SB_GUARD_SAMPLED && g->on;
}

int guard_run(struct guard *g, uint64_t now, void (*drain)(void *ctx), void *ctx)
{
	bool second;
	int r;

	if (g->dead)
		return 0;
	/* every second, the guard started or not: a record says what was measured */
	second = others_update(g, now) && g->started;
	if (second && g->st.mode == SB_GUARD_SAMPLED && !g->on)
		replan(g);
	r = guard_step(g, now, drain, ctx);
	/*
	 * a window due as well (a late call) that wrote no record of its own:
	 * the second's record all the same
	 */
	if (second && !(r & GUARD_RECORD) && !g->dead) {
		g->st.reason = SB_GUARD_R_OTHERS;
		g->st.window_start_ns = 0;
		r |= GUARD_RECORD;
	}
	return r;
}

int guard_finish(struct guard *g, uint64_t now, void (*drain)(void *ctx), void *ctx)
{
	struct wsum w;

	if (!g->started)
		return 0;
	g->st.reason = SB_GUARD_R_END;
	g->st.window_start_ns = 0;
	if (!g->on) {
		/* cut in a detached part (or off for good): its calls at the last window's rate */
		if (now > g->cycle_start)
			g->st.calls_estimated += (uint64_t)(g->last_free_rate *
							    (double)(now - g->cycle_start) + 0.5);
		return GUARD_RECORD;
	}
	window_count(g, &w, drain, ctx);
	g->st.calls_seen += w.sum;
	if (g->st.mode == SB_GUARD_FULL)
		g->st.calls_estimated += w.sum;
	else {
		g->st.calls_estimated += extrapolate(&w, g->win_start - g->cycle_start);
		g->st.window_start_ns = g->win_start;
		g->st.window_end_ns = w.end;
	}
	/* a window cut short says too little to replace the last estimate */
	if (w.len >= (g->st.mode == SB_GUARD_FULL ? MIN_FINAL_NS : MIN_ATTACHED_NS / 2))
		took(g, &w);
	return GUARD_RECORD;
}
