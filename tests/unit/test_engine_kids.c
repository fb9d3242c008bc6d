// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Child processes in the engine, on synthetic record streams whose answer
 * is known by construction (engine_synth.h describes the standard step):
 * the naming of followed processes by role, and the wakeup chain that says
 * what a followed waker, in the trainer or in a child, did while the
 * launcher waited for it, through timed waits that a timer ended too.
 */
#include <inttypes.h>
#include <stdio.h>

#include "test.h"
#include "engine_synth.h"

#define PRE (5 * MS)
#define GPU (80 * MS)
#define KID 200       /* a worker process forked by the trainer (T_PID) */
#define KID2 300      /* another, spawned */

static uint64_t run_steps(struct world *w, unsigned n, unsigned at, const struct sopt *inj)
{
	struct sopt plain = { .pre = PRE, .gpu = GPU };
	uint64_t S = 10 * SEC;

	for (unsigned k = 0; k < n; k++)
		S = std_step(w, S, k, k == at && inj ? inj : &plain);
	w_step(w, S, T_LAUNCHER, n);
	return S;
}

static struct engine *run_world(struct world *w)
{
	struct engine *e = new_engine(NULL);

	if (!e)
		return NULL;
	world_feed(e, w, 0);
	engine_finish(e);
	return e;
}

/* records of a thread of another process than the target */
static void k_switch_out(struct world *w, uint64_t ts, uint32_t pid, uint32_t tid, unsigned cpu,
			 unsigned state)
{
	struct sb_switch_out r = { 0 };

	hdr(&r.h, SB_EV_SWITCH_OUT, sizeof(r), ts, pid, tid, cpu);
	r.state = (uint8_t)state;
	w_comm(r.next_comm, "swapper");
	st_put(&w->host, &r);
}

static void k_switch_in(struct world *w, uint64_t ts, uint32_t pid, uint32_t tid, unsigned cpu)
{
	struct sb_switch_in r = { 0 };

	hdr(&r.h, SB_EV_SWITCH_IN, sizeof(r), ts, pid, tid, cpu);
	st_put(&w->host, &r);
}

static void k_wakeup(struct world *w, uint64_t ts, uint32_t pid, uint32_t tid, unsigned cpu,
		     uint32_t wpid, uint32_t wtid, const char *wcomm)
{
	struct sb_wakeup r = { 0 };

	hdr(&r.h, SB_EV_WAKEUP, sizeof(r), ts, pid, tid, cpu);
	r.waker_pid = wpid;
	r.waker_tid = wtid;
	w_comm(r.waker_comm, wcomm);
	st_put(&w->host, &r);
}

static void k_fork(struct world *w, uint64_t ts, uint32_t pid, uint32_t ppid, const char *comm)
{
	struct sb_thread r = { 0 };

	hdr(&r.h, SB_EV_THREAD_NEW, sizeof(r), ts, pid, pid, 0);
	r.parent_tid = ppid;
	r.parent_pid = ppid;
	w_comm(r.comm, comm);
	st_put(&w->host, &r);
}

static void k_exit(struct world *w, uint64_t ts, uint32_t pid, const char *comm)
{
	struct sb_thread r = { 0 };

	hdr(&r.h, SB_EV_THREAD_EXIT, sizeof(r), ts, pid, pid, 0);
	w_comm(r.comm, comm);
	st_put(&w->host, &r);
}

/* the launcher's blocked culprit entry for thread tid itself (not via it); NULL if none */
static const struct eng_blame *waker_entry(const struct eng_step *s, uint32_t tid)
{
	for (uint32_t i = 0; i < s->nblame; i++)
		if (s->blame[i].cause == ENG_BLOCKED && s->blame[i].has_who &&
		    s->blame[i].who.tid == tid && !s->blame[i].who.via_tid)
			return &s->blame[i];
	return NULL;
}

/*
 * The launcher's blocked entry in step 1 of e for thread tid, its step in *sp.
 * NULL when the engine, the step or the entry is missing: the case has failed,
 * and e and w are freed.
 */
static const struct eng_blame *step1_waker(struct engine *e, struct world *w, uint32_t tid,
					   const struct eng_step **sp)
{
	const struct eng_step *s = e ? step_no(e, 1) : NULL;
	const struct eng_blame *b = s ? waker_entry(s, tid) : NULL;

	*sp = s;
	if (!b) {
		if (!e)
			test_fail(__FILE__, __LINE__, "no engine");
		else if (!s)
			test_fail(__FILE__, __LINE__, "no step 1");
		else
			test_fail(__FILE__, __LINE__, "no blocked entry for thread %u", tid);
		engine_free(e);
		world_free(w);
	}
	return b;
}

/*
 * The launcher sleeps len; the worker (process KID, on CPU 2 since before)
 * computes 20 ms, is preempted 5 ms by hogZ, computes 2 ms, sleeps 3 ms
 * (a timer: woken by the idle task), computes 1 ms, is in D 2 ms, computes
 * the rest and writes the pipe, waking the launcher 5 us before the end.
 */
static void inj_kid(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	(void)arg;
	k_switch_in(w, at - 1 * MS, KID, KID, 2);
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_SLEEP);
	k_switch_out(w, at + 20 * MS, KID, KID, 2, SB_STATE_RUNNABLE);
	w_runslice(w, at + 20 * MS, at + 25 * MS, 2, 888, 889, "hogZ");
	k_switch_in(w, at + 25 * MS, KID, KID, 2);
	k_switch_out(w, at + 27 * MS, KID, KID, 2, SB_STATE_SLEEP);
	k_wakeup(w, at + 30 * MS, KID, KID, 2, 0, 0, "swapper/2");
	k_switch_in(w, at + 30 * MS, KID, KID, 2);
	k_switch_out(w, at + 31 * MS, KID, KID, 2, SB_STATE_DISK);
	k_wakeup(w, at + 33 * MS, KID, KID, 2, 0, 0, "swapper/2");
	k_switch_in(w, at + 33 * MS, KID, KID, 2);
	w_wakeup(w, at + len - 5 * US, T_LAUNCHER, T_CPU, KID, KID, "worker");
	w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
}

/* four steps, step 1 with inj, the trainer's forked worker KID followed */
static struct engine *kid_world(struct world *w, const struct sopt *inj)
{
	world_init(w);
	w_thread_of(w, KID, KID, "worker\nppid=100\ncmdline=python train.py\n");
	k_fork(w, 9 * SEC, KID, T_PID, "trainer");
	run_steps(w, 4, 1, inj);
	return run_world(w);
}

/* the same with a second child, KID2 (spawned by multiprocessing), and its thread KID2 + 1 */
static struct engine *two_kids_world(struct world *w, const struct sopt *inj)
{
	world_init(w);
	w_thread_of(w, KID, KID, "worker\nppid=100\ncmdline=python train.py\n");
	w_thread_of(w, KID2, KID2, "python3\nppid=100\ncmdline=/usr/bin/python3 -c from "
		    "multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, "
		    "pipe_handle=7) --multiprocessing-fork\n");
	w_thread_of(w, KID2, KID2 + 1, "pt_loader");
	run_steps(w, 4, 1, inj);
	return run_world(w);
}

/* a child is named after its parent as it was when it came: the parent exec'd another program since */
static void t_child_of_renamed_parent(void)
{
	struct world w;
	struct engine *e;
	char name[128];

	world_init(&w);
	w_thread_of(&w, KID, KID, "helper\nppid=100\ncmdline=./helper\n");
	run_steps(&w, 4, 1, NULL);
	/* the trainer's main thread renamed (an exec into ./phase2) during the capture */
	w_text_at(&w, SB_REC_THREAD, 0, T_PID, 10 * SEC + 200 * MS, "phase2");
	e = run_world(&w);
	REQUIRE(e, "engine");
	CHECK(!strcmp(engine_thread_name(e, T_PID), "phase2"), "the trainer is '%s' at the end",
	      engine_thread_name(e, T_PID));
	CHECK(engine_process_name(e, KID, name, sizeof(name)) &&
	      !strcmp(name, "helper, child process 1 of trainer[100]"), "the child named '%s'", name);
	engine_free(e);
	world_free(&w);
}

static void t_chain_into_child(void)
{
	struct world w;
	struct sopt inj = { .pre = PRE, .gpu = GPU, .len = 40 * MS, .inj = inj_kid };
	const struct eng_blame *b;
	const struct eng_step *s;
	struct engine *e;
	char name[128];

	e = kid_world(&w, &inj);
	if (!(b = step1_waker(e, &w, KID, &s)))
		return;
	CHECK(engine_process_name(e, KID, name, sizeof(name)) &&
	      !strcmp(name, "child process 1 of trainer[100]"), "the worker named '%s'", name);
	CHECK(engine_process_parent(e, KID) == T_PID, "parent %u", engine_process_parent(e, KID));
	/* hogZ took 5 ms from the worker: blamed through it, as before */
	CHECK(blame_of(s, ENG_BLOCKED, 888) == 5 * MS, "blocked by hogZ %" PRIu64,
	      blame_of(s, ENG_BLOCKED, 888));
	CHECK(b->who.pid == KID, "the worker's pid %u", b->who.pid);
	CHECK(b->ns == 35 * MS - 5 * US, "blocked on the worker %" PRIu64, b->ns);
	/* what it did over the 40 ms - 5 us of the launcher's sleep */
	CHECK(b->who.act.ns[ENG_ACT_ON_CPU] == 30 * MS - 5 * US, "on CPU %" PRIu64,
	      b->who.act.ns[ENG_ACT_ON_CPU]);
	CHECK(b->who.act.ns[ENG_ACT_PREEMPTED] == 5 * MS, "preempted %" PRIu64,
	      b->who.act.ns[ENG_ACT_PREEMPTED]);
	CHECK(b->who.act.by_pid == 888 && !strcmp(b->who.act.by_comm, "hogZ"),
	      "preempted by %u %s", b->who.act.by_pid, b->who.act.by_comm);
	CHECK(b->who.act.ns[ENG_ACT_BLOCKED] == 3 * MS, "asleep %" PRIu64,
	      b->who.act.ns[ENG_ACT_BLOCKED]);
	/* a timer woke it: nobody to name */
	CHECK(!b->who.act.on_tid, "blocked on %u", b->who.act.on_tid);
	CHECK(b->who.act.ns[ENG_ACT_IO] == 2 * MS, "in I/O %" PRIu64, b->who.act.ns[ENG_ACT_IO]);
	CHECK(b->who.act.ns[ENG_ACT_RUNNABLE] == 0, "runnable %" PRIu64,
	      b->who.act.ns[ENG_ACT_RUNNABLE]);
	engine_free(e);
	world_free(&w);
}

/*
 * The worker (KID) computes on CPU 2, is preempted 1 ms by hogZ, and goes on
 * computing on CPU 3, where the kernel moved it and switched it in with no
 * event: its next record is the slice of its own that its exit wrote
 * (schemas/trace.md, runslice), after the launcher's wakeup.
 */
static void inj_kid_untraced_in(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	(void)arg;
	k_switch_in(w, at - 1 * MS, KID, KID, 2);
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_SLEEP);
	k_switch_out(w, at + 5 * MS, KID, KID, 2, SB_STATE_RUNNABLE);
	w_runslice(w, at + 5 * MS, at + 6 * MS, 2, 888, 889, "hogZ");
	w_wakeup(w, at + len - 5 * US, T_LAUNCHER, T_CPU, KID, KID, "worker");
	w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
	w_runslice(w, at + 6 * MS, at + len + 1 * MS, 3, KID, KID, "worker");
	k_exit(w, at + len + 1 * MS, KID, "worker");
}

/* a slice of a followed child's own stands for its switch-in, as one of the target's does */
static void t_chain_child_untraced_switch_in(void)
{
	struct world w;
	struct sopt inj = { .pre = PRE, .gpu = GPU, .len = 40 * MS, .inj = inj_kid_untraced_in };
	const struct eng_blame *b;
	const struct eng_step *s;
	struct engine *e;

	e = kid_world(&w, &inj);
	if (!(b = step1_waker(e, &w, KID, &s)))
		return;
	CHECK(b->who.act.ns[ENG_ACT_RUNNABLE] == 0, "runnable %" PRIu64 " ns",
	      b->who.act.ns[ENG_ACT_RUNNABLE]);
	CHECK(b->who.act.ns[ENG_ACT_PREEMPTED] == 1 * MS, "preempted %" PRIu64 " ns",
	      b->who.act.ns[ENG_ACT_PREEMPTED]);
	CHECK(b->who.act.ns[ENG_ACT_ON_CPU] == 39 * MS - 5 * US, "on CPU %" PRIu64 " ns",
	      b->who.act.ns[ENG_ACT_ON_CPU]);
	{
		struct eng_loss l;

		engine_loss(e, &l);
		CHECK(l.inferred == 1, "%" PRIu64 " switch-ins inferred, want 1", (uint64_t)l.inferred);
	}
	engine_free(e);
	world_free(&w);
}

/*
 * The launcher forks KID and waits for it (wait4): KID runs on CPU 2 from
 * its first switch-in, faults 101 times 10 us apart, exits (its exit record)
 * 1 ms before its exit path wakes the launcher, and its last slice is
 * written when it leaves the CPU (schemas/trace.md, thread_exit: the record
 * comes before the end of the exit). What it did while the launcher waited:
 * on a CPU throughout, faulting, up to the wakeup.
 */
static void inj_kid_exits(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	(void)arg;
	k_fork(w, at - 100 * US, KID, T_PID, "trainer");
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_SLEEP);
	k_wakeup(w, at - 90 * US, KID, KID, 2, T_PID, T_LAUNCHER, "trainer");
	k_switch_in(w, at + 1 * MS, KID, KID, 2);
	for (int i = 0; i <= 100; i++) {
		w->fault_addr = ACT_MAP + (uint64_t)(i + 1) * 4096;
		w_fault_pid(w, at + 2 * MS + (uint64_t)i * 10 * US, KID, KID, 0, (uint64_t)i);
	}
	w->fault_addr = 0;
	k_exit(w, at + len - 1 * MS, KID, "trainer");
	w_wakeup(w, at + len - 5 * US, T_LAUNCHER, T_CPU, KID, KID, "trainer");
	w_runslice(w, at + 1 * MS, at + len, 2, KID, KID, "trainer");
	w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
}

/*
 * The same after `before` other children of the trainer, each of which
 * faulted once and exited within a second of the capture's start, seconds
 * before step 1: what they did is kept no longer than any wait can reach
 * back, and KID's faults are kept like the first child's.
 */
static void chain_child_exits(uint32_t before)
{
	struct world w;
	struct sopt inj = { .pre = PRE, .gpu = GPU, .len = 20 * MS, .inj = inj_kid_exits };
	const struct eng_blame *b;
	const struct eng_step *s;
	struct engine *e;
	uint64_t fc = 3500; /* the default fault cost: nothing calibrates it here */

	world_init(&w);
	for (uint32_t i = 0; i < before; i++) {
		uint64_t t = 1 * SEC + (uint64_t)i * 500 * US;

		k_fork(&w, t, 1000 + i, T_PID, "trainer");
		w_fault_pid(&w, t + 100 * US, 1000 + i, 1000 + i, 0, 1);
		k_exit(&w, t + 200 * US, 1000 + i, "trainer");
	}
	run_steps(&w, 4, 1, &inj);
	e = run_world(&w);
	if (!(b = step1_waker(e, &w, KID, &s)))
		return;
	CHECK(b->ns == 20 * MS - 5 * US, "blocked on the child %" PRIu64, b->ns);
	CHECK(b->who.act.ns[ENG_ACT_FAULTING] == 1 * MS + fc, "faulting %" PRIu64,
	      b->who.act.ns[ENG_ACT_FAULTING]);
	CHECK(b->who.act.ns[ENG_ACT_ON_CPU] == 18 * MS - 5 * US - fc, "on CPU %" PRIu64,
	      b->who.act.ns[ENG_ACT_ON_CPU]);
	CHECK(b->who.act.ns[ENG_ACT_RUNNABLE] == 1 * MS, "runnable %" PRIu64,
	      b->who.act.ns[ENG_ACT_RUNNABLE]);
	engine_free(e);
	world_free(&w);
}

static void t_chain_child_exits(void)
{
	chain_child_exits(0);
}

/* more children gone than the engine keeps what they did at once (ACT_RINGS_MAX, 1024) */
static void t_chain_child_exits_after_many(void)
{
	chain_child_exits(1500);
}

/*
 * The worker (KID, on CPU 2) faults 101 times 10 us apart in a 16 MiB file
 * mapping of its own; the trainer has a 64 MiB anonymous one at the same
 * address. The chain names the worker's region, not the trainer's.
 */
static void inj_kid_faults(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	(void)arg;
	w_mmap_map(w, at - 4 * MS, at - 4 * MS + 50 * US, T_LAUNCHER, ACT_MAP, 64 << 20, "");
	w_mmap_map_pid(w, at - 3 * MS, at - 3 * MS + 50 * US, KID, KID, ACT_MAP, 16 << 20,
		       "/data/shard.bin");
	k_switch_in(w, at - 1 * MS, KID, KID, 2);
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_SLEEP);
	for (int i = 0; i <= 100; i++) {
		w->fault_addr = ACT_MAP + (uint64_t)(i + 1) * 4096;
		w_fault_pid(w, at + 2 * MS + (uint64_t)i * 10 * US, KID, KID, 0, (uint64_t)i);
	}
	w->fault_addr = 0;
	w_wakeup(w, at + len - 5 * US, T_LAUNCHER, T_CPU, KID, KID, "worker");
	w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
}

static void t_chain_child_fault_region(void)
{
	struct world w;
	struct sopt inj = { .pre = PRE, .gpu = GPU, .len = 40 * MS, .inj = inj_kid_faults };
	const struct eng_blame *b;
	const struct eng_step *s;
	struct engine *e;
	uint64_t fc = 3500; /* the default fault cost: nothing calibrates it here */

	e = kid_world(&w, &inj);
	if (!(b = step1_waker(e, &w, KID, &s)))
		return;
	CHECK(b->who.act.ns[ENG_ACT_FAULTING] == 1 * MS + fc, "faulting %" PRIu64,
	      b->who.act.ns[ENG_ACT_FAULTING]);
	CHECK(b->who.act.fault_region && !b->who.act.fault_anon && b->who.act.fault_len == 16 << 20,
	      "fault region %d anon %d len %" PRIu64 " (the worker's file mapping: 16 MiB)",
	      b->who.act.fault_region, b->who.act.fault_anon, b->who.act.fault_len);
	engine_free(e);
	world_free(&w);
}

/*
 * The worker (KID) waits 10 ms for another child's thread (KID2), which runs
 * all along and falls asleep 1 ms after waking it; the worker falls asleep
 * 3 us after waking the launcher. Both were on their CPUs up to their
 * wakeups, though neither is running when the launcher's wait is resolved.
 */
static void inj_wakers_asleep_after(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	(void)arg;
	k_switch_in(w, at - 1 * MS, KID, KID, 2);
	k_switch_in(w, at - 1 * MS, KID2, KID2 + 1, 3);
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_SLEEP);
	k_switch_out(w, at + 10 * MS, KID, KID, 2, SB_STATE_SLEEP);
	k_wakeup(w, at + 20 * MS, KID, KID, 2, KID2, KID2 + 1, "pt_loader");
	k_switch_in(w, at + 20 * MS, KID, KID, 2);
	k_switch_out(w, at + 21 * MS, KID2, KID2 + 1, 3, SB_STATE_SLEEP);
	w_wakeup(w, at + len - 5 * US, T_LAUNCHER, T_CPU, KID, KID, "worker");
	k_switch_out(w, at + len - 2 * US, KID, KID, 2, SB_STATE_SLEEP);
	w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
}

static void t_chain_wakers_asleep_after(void)
{
	struct world w;
	struct sopt inj = { .pre = PRE, .gpu = GPU, .len = 40 * MS, .inj = inj_wakers_asleep_after };
	const struct eng_blame *b;
	const struct eng_step *s;
	struct engine *e;

	e = two_kids_world(&w, &inj);
	if (!(b = step1_waker(e, &w, KID, &s)))
		return;
	CHECK(b->who.act.ns[ENG_ACT_ON_CPU] == 30 * MS - 5 * US, "on CPU %" PRIu64,
	      b->who.act.ns[ENG_ACT_ON_CPU]);
	CHECK(b->who.act.ns[ENG_ACT_BLOCKED] == 10 * MS && b->who.act.on_tid == KID2 + 1,
	      "blocked %" PRIu64 " on %u", b->who.act.ns[ENG_ACT_BLOCKED], b->who.act.on_tid);
	CHECK(b->who.act.on_ns[ENG_ACT_ON_CPU] == 10 * MS && b->who.act.on_ns[ENG_ACT_BLOCKED] == 0,
	      "blocked on KID2, which was on CPU %" PRIu64 ", asleep %" PRIu64,
	      b->who.act.on_ns[ENG_ACT_ON_CPU], b->who.act.on_ns[ENG_ACT_BLOCKED]);
	engine_free(e);
	world_free(&w);
}

/*
 * The worker (KID) itself waits 10 ms for another child (KID2), preempted
 * there 4 ms by hogQ: the chain goes on into KID2, and the worker was
 * "itself blocked on" KID2.
 */
static void inj_two_kids(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	(void)arg;
	k_switch_in(w, at - 1 * MS, KID, KID, 2);
	k_switch_in(w, at - 1 * MS, KID2, KID2 + 1, 3);
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_SLEEP);
	k_switch_out(w, at + 10 * MS, KID, KID, 2, SB_STATE_SLEEP);
	k_switch_out(w, at + 12 * MS, KID2, KID2 + 1, 3, SB_STATE_RUNNABLE);
	w_runslice(w, at + 12 * MS, at + 16 * MS, 3, 777, 779, "hogQ");
	k_switch_in(w, at + 16 * MS, KID2, KID2 + 1, 3);
	k_wakeup(w, at + 20 * MS, KID, KID, 2, KID2, KID2 + 1, "pt_loader");
	k_switch_in(w, at + 20 * MS, KID, KID, 2);
	w_wakeup(w, at + len - 5 * US, T_LAUNCHER, T_CPU, KID, KID, "worker");
	w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
}

static void t_chain_through_two_children(void)
{
	struct world w;
	struct sopt inj = { .pre = PRE, .gpu = GPU, .len = 40 * MS, .inj = inj_two_kids };
	const struct eng_blame *b;
	const struct eng_step *s;
	struct engine *e;
	bool via = false;

	e = two_kids_world(&w, &inj);
	if (!(b = step1_waker(e, &w, KID, &s)))
		return;
	/* the chain: KID asleep on KID2, KID2 preempted by hogQ 4 ms */
	CHECK(blame_of(s, ENG_BLOCKED, 777) == 4 * MS, "blocked by hogQ %" PRIu64,
	      blame_of(s, ENG_BLOCKED, 777));
	for (uint32_t i = 0; i < s->nblame; i++)
		if (s->blame[i].has_who && s->blame[i].who.pid == 777)
			via = s->blame[i].who.via_pid == KID2 && s->blame[i].who.via_tid == KID2 + 1;
	CHECK(via, "hogQ reached through the second child's thread");
	CHECK(b->who.act.ns[ENG_ACT_ON_CPU] == 30 * MS - 5 * US, "on CPU %" PRIu64,
	      b->who.act.ns[ENG_ACT_ON_CPU]);
	CHECK(b->who.act.ns[ENG_ACT_BLOCKED] == 10 * MS, "blocked %" PRIu64,
	      b->who.act.ns[ENG_ACT_BLOCKED]);
	CHECK(b->who.act.on_pid == KID2 && b->who.act.on_tid == KID2 + 1 &&
	      !strcmp(b->who.act.on_comm, "pt_loader"), "blocked on %u/%u %s", b->who.act.on_pid,
	      b->who.act.on_tid, b->who.act.on_comm);
	/* what KID2's thread did while the worker slept on it: 6 ms on a CPU, 4 ms preempted */
	CHECK(b->who.act.on_ns[ENG_ACT_ON_CPU] == 6 * MS && b->who.act.on_ns[ENG_ACT_PREEMPTED] == 4 * MS,
	      "blocked on KID2, which was on CPU %" PRIu64 ", preempted %" PRIu64,
	      b->who.act.on_ns[ENG_ACT_ON_CPU], b->who.act.on_ns[ENG_ACT_PREEMPTED]);
	{
		char name[128];

		/* the first of the trainer's multiprocessing children (KID is a plain fork) */
		CHECK(engine_process_name(e, KID2, name, sizeof(name)) &&
		      !strcmp(name, "multiprocessing child 1 of trainer[100]"), "KID2 named '%s'",
		      name);
	}
	engine_free(e);
	world_free(&w);
}

/* a waker in the trainer itself gets the same account (the loader of test_engine's chain) */
static void inj_loader(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	(void)arg;
	w_switch_in(w, at - 1 * MS, T_LOADER, 2);
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_SLEEP);
	w_switch_out(w, at + 5 * MS, T_LOADER, 2, SB_STATE_RUNNABLE);
	w_runslice(w, at + 5 * MS, at + 35 * MS, 2, 777, 778, "hogY");
	w_switch_in(w, at + 35 * MS, T_LOADER, 2);
	w_wakeup(w, at + len - 5 * US, T_LAUNCHER, T_CPU, T_PID, T_LOADER, "loader");
	w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
}

static void t_same_process_waker(void)
{
	struct world w;
	struct sopt inj = { .pre = PRE, .gpu = GPU, .len = 40 * MS, .inj = inj_loader };
	const struct eng_blame *b;
	const struct eng_step *s;
	struct engine *e;
	char name[128];

	world_init(&w);
	run_steps(&w, 4, 1, &inj);
	e = run_world(&w);
	if (!(b = step1_waker(e, &w, T_LOADER, &s)))
		return;
	CHECK(b->who.act.ns[ENG_ACT_ON_CPU] == 10 * MS - 5 * US, "on CPU %" PRIu64,
	      b->who.act.ns[ENG_ACT_ON_CPU]);
	CHECK(b->who.act.ns[ENG_ACT_PREEMPTED] == 30 * MS && b->who.act.by_pid == 777,
	      "preempted %" PRIu64 " by %u", b->who.act.ns[ENG_ACT_PREEMPTED], b->who.act.by_pid);
	/* the trainer is no child of anybody */
	CHECK(!engine_process_name(e, T_PID, name, sizeof(name)) && !name[0], "target named '%s'",
	      name);
	engine_free(e);
	world_free(&w);
}

/*
 * Timed waits (docs/ARCHITECTURE.md, "Timed waits"). The launcher waits for
 * the loader (on CPU 2, computing throughout) the way CPython waits for its
 * GIL: a timed wait of TW that a timer ends, a run of GAP, then a wait that
 * the loader ends (its COND_SIGNAL), back at at + len. How the retry looks
 * and who ends it varies by the test (tw_*).
 */
static uint64_t tw_timeout = 5 * MS, tw_gap = 40 * US;
static uint32_t tw_waker_pid = T_PID, tw_waker_tid = T_LOADER;
static bool tw_folded;

static void inj_timed_wait(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	uint64_t woke = at + tw_timeout, retry = woke + 10 * US + tw_gap;

	(void)arg;
	w_switch_in(w, at - 1 * MS, T_LOADER, 2);
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_SLEEP);
	w_wakeup(w, woke, T_LAUNCHER, T_CPU, 0, 0, "swapper/0");
	w_switch_in(w, woke + 10 * US, T_LAUNCHER, T_CPU);
	if (!tw_folded) {
		w_switch_out(w, retry, T_LAUNCHER, T_CPU, SB_STATE_SLEEP);
		w_wakeup(w, at + len - 5 * US, T_LAUNCHER, T_CPU, tw_waker_pid, tw_waker_tid, "loader");
		w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
		return;
	}
	/* the retry short enough to fold: a run of one sleep, as the kernel sums it */
	struct sb_sched_run r = { 0 };

	hdr(&r.h, SB_EV_SCHED_RUN, sizeof(r), at + len, T_PID, T_LAUNCHER, T_CPU);
	r.start_ns = retry;
	r.sleeps = 1;
	r.sleep_ns = at + len - 5 * US - retry;
	r.wait_ns = 5 * US;
	r.max_ns = at + len - retry;
	r.waker_pid = tw_waker_pid;
	r.waker_tid = tw_waker_tid;
	w_comm(r.waker_comm, "loader");
	st_put(&w->host, &r);
}

/* step 1's blocked time with injection fn: culprit-less (asleep) and on waker tw_waker_tid */
static void timed_wait_with(void (*fn)(struct world *, uint64_t, uint64_t, void *), uint64_t len,
			    uint64_t *asleep, uint64_t *on_waker, uint64_t *waker_cpu)
{
	struct world w;
	struct sopt inj = { .pre = PRE, .gpu = GPU, .len = len, .inj = fn };
	const struct eng_blame *b;
	const struct eng_step *s;
	struct engine *e;

	*asleep = *on_waker = *waker_cpu = 0;
	world_init(&w);
	w_thread_of(&w, KID, KID, "worker\nppid=100\ncmdline=python train.py\n");
	run_steps(&w, 4, 1, &inj);
	e = run_world(&w);
	REQUIRE(e, "engine");
	s = step_no(e, 1);
	REQUIRE(s, "step 1");
	for (uint32_t i = 0; i < s->nblame; i++)
		if (s->blame[i].cause == ENG_BLOCKED && !s->blame[i].has_who)
			*asleep += s->blame[i].ns;
	b = waker_entry(s, tw_waker_tid);
	if (b) {
		*on_waker = b->ns;
		*waker_cpu = b->who.act.ns[ENG_ACT_ON_CPU];
	}
	engine_free(e);
	world_free(&w);
}

static void timed_wait_run(uint64_t len, uint64_t *asleep, uint64_t *on_waker, uint64_t *waker_cpu)
{
	timed_wait_with(inj_timed_wait, len, asleep, on_waker, waker_cpu);
}

static void t_timed_wait_retried(void)
{
	uint64_t asleep, on, cpu;

	/* the timeout and its retry, both on the loader: the loader's compute is why */
	timed_wait_run(10 * MS, &asleep, &on, &cpu);
	CHECK(asleep == 0, "asleep %" PRIu64 " (the timeout not joined to its retry)", asleep);
	CHECK(on >= 10 * MS - 100 * US, "on the loader %" PRIu64, on);
	CHECK(cpu >= 10 * MS - 100 * US, "the loader on CPU %" PRIu64, cpu);
	/* the same with the retry folded into a run of trips */
	tw_folded = true;
	timed_wait_run(10 * MS, &asleep, &on, &cpu);
	tw_folded = false;
	CHECK(asleep == 0 && on >= 10 * MS - 100 * US, "folded retry: asleep %" PRIu64 ", on %" PRIu64,
	      asleep, on);
}

/*
 * The last timeout of a wait for the GIL: a wait the loader ended (at + 5 ms),
 * 40 us on the CPU, then a 5 ms timed wait that a timer ends, after which the
 * GIL was free and the launcher runs to at + len without sleeping again. The
 * timeout continues the wait on the loader; with 2 ms of running before it
 * (tw_gap), it is a sleep of its own.
 */
static void inj_last_timeout(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	uint64_t out2 = at + 5 * MS + 10 * US + tw_gap;

	(void)arg;
	(void)len;
	w_switch_in(w, at - 1 * MS, T_LOADER, 2);
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_SLEEP);
	w_wakeup(w, at + 5 * MS, T_LAUNCHER, T_CPU, T_PID, T_LOADER, "loader");
	w_switch_in(w, at + 5 * MS + 10 * US, T_LAUNCHER, T_CPU);
	w_switch_out(w, out2, T_LAUNCHER, T_CPU, SB_STATE_SLEEP);
	w_wakeup(w, out2 + 5 * MS, T_LAUNCHER, T_CPU, 0, 0, "swapper/0");
	w_switch_in(w, out2 + 5 * MS + 10 * US, T_LAUNCHER, T_CPU);
}

static void t_timed_wait_last_timeout(void)
{
	uint64_t asleep[2], on, cpu;

	for (int k = 0; k < 2; k++) {
		tw_gap = k ? 2 * MS : 40 * US;
		timed_wait_with(inj_last_timeout, 15 * MS, &asleep[k], &on, &cpu);
	}
	tw_gap = 40 * US;
	CHECK(asleep[0] == 0, "the last timeout right after the wait: asleep %" PRIu64, asleep[0]);
	CHECK(asleep[1] == 5 * MS, "2 ms of running between: asleep %" PRIu64, asleep[1]);
}

static void t_timed_wait_not_retried(void)
{
	uint64_t asleep, on, cpu;

	/* the thread ran 2 ms before it slept again: the timeout was a sleep of its own */
	tw_gap = 2 * MS;
	timed_wait_run(10 * MS, &asleep, &on, &cpu);
	CHECK(asleep == 5 * MS, "ran between: asleep %" PRIu64 ", on %" PRIu64, asleep, on);
	tw_folded = true;
	timed_wait_run(10 * MS, &asleep, &on, &cpu);
	tw_folded = false;
	CHECK(asleep == 5 * MS, "ran between, folded: asleep %" PRIu64, asleep);
	tw_gap = 40 * US;
	/* a timeout longer than a timed wait's: a sleep (time.sleep(0.03)) */
	tw_timeout = 30 * MS;
	timed_wait_run(40 * MS, &asleep, &on, &cpu);
	CHECK(asleep == 30 * MS, "long timeout: asleep %" PRIu64, asleep);
	tw_timeout = 5 * MS;
	/* the retry ended by another process: nothing ties the timeout to it */
	tw_waker_pid = KID;
	tw_waker_tid = KID;
	timed_wait_run(10 * MS, &asleep, &on, &cpu);
	CHECK(asleep == 5 * MS && on > 0 && on < 5 * MS, "other process: asleep %" PRIu64
	      ", on it %" PRIu64, asleep, on);
	tw_waker_pid = T_PID;
	tw_waker_tid = T_LOADER;
}

/*
 * A hand-off: the launcher's 5 ms timed wait ends by a timer, and tw_gap after
 * its switch-in it wakes the loader, which went to sleep ho_slept after the
 * timeout fired (it dropped what the launcher waited for at the timeout's
 * request and waits to hear it was taken). The launcher runs on to at + len
 * without a retry. ho_folded: the loader's sleep folded into a run of trips.
 */
static int64_t ho_slept = 20 * US;
static bool ho_folded;

static void inj_handoff(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	uint64_t in = at + tw_timeout + 10 * US, down = at + tw_timeout + ho_slept, wake = in + tw_gap;

	(void)arg;
	(void)len;
	w_switch_in(w, at - 1 * MS, T_LOADER, 2);
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_SLEEP);
	w_wakeup(w, at + tw_timeout, T_LAUNCHER, T_CPU, 0, 0, "swapper/0");
	w_switch_in(w, in, T_LAUNCHER, T_CPU);
	if (!ho_folded) {
		w_switch_out(w, down, T_LOADER, 2, SB_STATE_SLEEP);
		w_wakeup(w, wake, T_LOADER, 2, T_PID, T_LAUNCHER, "launcher");
		w_switch_in(w, wake + 5 * US, T_LOADER, 2);
		return;
	}
	struct sb_sched_run r = { 0 };

	hdr(&r.h, SB_EV_SCHED_RUN, sizeof(r), wake + 5 * US, T_PID, T_LOADER, 2);
	r.start_ns = down - 5 * US;
	r.sleeps = 1;
	r.sleep_ns = wake - down;
	r.wait_ns = 5 * US;
	r.max_ns = wake + 5 * US - down;
	r.waker_pid = T_PID;
	r.waker_tid = T_LAUNCHER;
	w_comm(r.waker_comm, "launcher");
	st_put(&w->host, &r);
}

static void t_timed_wait_handoff(void)
{
	uint64_t asleep, on, cpu;

	for (int f = 0; f < 2; f++) {
		ho_folded = f;
		timed_wait_with(inj_handoff, 7 * MS, &asleep, &on, &cpu);
		CHECK(asleep == 0 && on == 5 * MS, "%s: asleep %" PRIu64 ", on the loader %" PRIu64,
		      f ? "folded" : "hand-off", asleep, on);
	}
	ho_folded = false;
	/* the loader was asleep before the timeout: waking it says nothing of the wait */
	ho_slept = -1 * (int64_t)MS;
	timed_wait_with(inj_handoff, 7 * MS, &asleep, &on, &cpu);
	CHECK(asleep == 5 * MS, "loader asleep before the timeout: asleep %" PRIu64, asleep);
	ho_slept = 20 * US;
	/* woken after 2 ms of running: the timeout was a sleep of its own */
	tw_gap = 2 * MS;
	timed_wait_with(inj_handoff, 7 * MS, &asleep, &on, &cpu);
	CHECK(asleep == 5 * MS, "woken after 2 ms: asleep %" PRIu64, asleep);
	tw_gap = 40 * US;
}

static void t_waker_io_and_faults(void)
{
	struct world w;
	struct sopt inj = { .pre = PRE, .gpu = GPU, .len = 60 * MS, .inj = inj_busy_loader };
	const struct eng_blame *b;
	const struct eng_step *s;
	const struct eng_act *a;
	struct engine *e;
	uint64_t fc = 3500, sum = 0; /* the default fault cost: nothing calibrates it here */

	world_init(&w);
	w.fault_addr = ACT_MAP + 4096;
	run_steps(&w, 4, 1, &inj);
	e = run_world(&w);
	if (!(b = step1_waker(e, &w, T_LOADER, &s)))
		return;
	a = &b->who.act;
	CHECK(a->ns[ENG_ACT_FAULTING] == 9 * MS + 2 * fc, "faulting %" PRIu64,
	      a->ns[ENG_ACT_FAULTING]);
	CHECK(a->ns[ENG_ACT_IO] == 10 * MS, "in I/O %" PRIu64, a->ns[ENG_ACT_IO]);
	CHECK(a->io_call == SB_IO_FSYNC && !strcmp(engine_act_path(e, a->io_path), "/data/shard3.bin"),
	      "I/O named %u '%s'", a->io_call, engine_act_path(e, a->io_path));
	CHECK(a->ns[ENG_ACT_RECLAIM] == 2 * MS, "reclaim %" PRIu64, a->ns[ENG_ACT_RECLAIM]);
	CHECK(a->ns[ENG_ACT_ALLOC] == 4 * MS - fc, "alloc %" PRIu64, a->ns[ENG_ACT_ALLOC]);
	CHECK(a->ns[ENG_ACT_ON_CPU] == 35 * MS - 5 * US - fc, "on CPU %" PRIu64,
	      a->ns[ENG_ACT_ON_CPU]);
	/* the longest faulting piece: the fault that slept, in the anon region */
	CHECK(a->fault_region && a->fault_anon && a->fault_len == 64 << 20,
	      "fault region %d anon %d len %" PRIu64, a->fault_region, a->fault_anon, a->fault_len);
	for (int k = 0; k < ENG_NACT; k++)
		sum += a->ns[k];
	CHECK(sum == 60 * MS - 5 * US, "the parts sum to %" PRIu64, sum);
	CHECK(!engine_act_path(e, 0)[0] && !engine_act_path(e, 99)[0], "ids never given name nothing");
	engine_free(e);
	world_free(&w);
}

/*
 * A fault run of the loader preempted in the middle (2 ms by hogP): one run,
 * the faults on both sides back to back; the preemption is preempted time.
 */
static void inj_preempted_faults(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	bool run = arg != NULL; /* as the kernel writes them: a fault_run record each side */

	w_switch_in(w, at - 1 * MS, T_LOADER, 2);
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_SLEEP);
	w_faults(w, at + 2 * MS, 10 * US, 101, T_LOADER, 0x10000, 0, NULL, run);
	w_switch_out(w, at + 3 * MS + 5 * US, T_LOADER, 2, SB_STATE_RUNNABLE);
	w_runslice(w, at + 3 * MS + 5 * US, at + 5 * MS + 5 * US, 2, 555, 556, "hogP");
	w_switch_in(w, at + 5 * MS + 5 * US, T_LOADER, 2);
	w_faults(w, at + 5 * MS + 10 * US, 10 * US, 101, T_LOADER, 0x10000, 0, NULL, run);
	w_wakeup(w, at + len - 5 * US, T_LAUNCHER, T_CPU, T_PID, T_LOADER, "loader");
	w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
}

static void waker_faults_across_preemption(bool run)
{
	struct world w;
	struct sopt inj = { .pre = PRE, .gpu = GPU, .len = 20 * MS, .inj = inj_preempted_faults,
			    .arg = run ? &w : NULL };
	const struct eng_blame *b;
	const struct eng_step *s;
	struct engine *e;

	world_init(&w);
	run_steps(&w, 4, 1, &inj);
	e = run_world(&w);
	if (!(b = step1_waker(e, &w, T_LOADER, &s)))
		return;
	/* 3.005 - 2 ms, then 6.01 ms + one fault's cost (3.5 us) - 5.005 ms */
	CHECK(b->who.act.ns[ENG_ACT_FAULTING] == 2 * MS + 13500, "faulting %" PRIu64,
	      b->who.act.ns[ENG_ACT_FAULTING]);
	CHECK(b->who.act.ns[ENG_ACT_PREEMPTED] == 2 * MS && b->who.act.by_pid == 555,
	      "preempted %" PRIu64 " by %u", b->who.act.ns[ENG_ACT_PREEMPTED], b->who.act.by_pid);
	engine_free(e);
	world_free(&w);
}

static void t_waker_faults_across_preemption(void)
{
	waker_faults_across_preemption(false);
}

/* the same faults as two fault_run records (one each side of the preemption) */
static void t_waker_fault_runs_across_preemption(void)
{
	waker_faults_across_preemption(true);
}

/* a waker that is no followed thread: no account of what it did (nothing is known) */
static void inj_stranger(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	(void)arg;
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_SLEEP);
	w_wakeup(w, at + len - 5 * US, T_LAUNCHER, T_CPU, 4242, 4242, "sshd");
	w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
}

static void t_stranger_waker(void)
{
	struct world w;
	struct sopt inj = { .pre = PRE, .gpu = GPU, .len = 40 * MS, .inj = inj_stranger };
	const struct eng_blame *b;
	const struct eng_step *s;
	struct engine *e;

	world_init(&w);
	run_steps(&w, 4, 1, &inj);
	e = run_world(&w);
	if (!(b = step1_waker(e, &w, 4242, &s)))
		return;
	for (int k = 0; k < ENG_NACT; k++)
		CHECK(!b->who.act.ns[k], "%s %" PRIu64 " for a waker not followed", eng_act_name(k),
		      b->who.act.ns[k]);
	engine_free(e);
	world_free(&w);
}

/*
 * Names: from the rank the environment gives, the command line, by order
 * among the parent's children of the same role; a reused PID with another
 * parent counts anew; a comm that looks like a key is a comm.
 */
static void t_process_names(void)
{
	struct world w;
	struct engine *e;
	char name[128];

	world_init(&w);
	w_thread_of(&w, 201, 201, "python3\nppid=100\ncmdline=python3 -c from multiprocessing."
		    "forkserver import main; main(8, 9, ['__main__'])\n");
	w_thread_of(&w, 202, 202, "python3\nppid=201\ncmdline=python3 -c from multiprocessing."
		    "forkserver import main; main(8, 9, ['__main__'])\n");
	w_thread_of(&w, 203, 203, "python3\nppid=100\ncmdline=python3 -c from multiprocessing."
		    "resource_tracker import main;main(5)\n");
	w_thread_of(&w, 204, 204, "ppid=100");
	w_thread_of(&w, 205, 205, "worker\nppid=100\n");
	/* 205 exits; its PID comes back as a child of 203, under a name of its own */
	w_thread_of(&w, 205, 205, "worker2\nppid=203\ncmdline=/bin/sh -c true\n");
	/* DataLoader workers as PyTorch 2.3 on names them: counted among themselves */
	w_thread_of(&w, 206, 206, "pt_data_worker\nppid=100\ncmdline=python3 train.py\n");
	w_thread_of(&w, 207, 207, "python3\nppid=100\ncmdline=python3 train.py\n");
	w_thread_of(&w, 208, 208, "pt_data_worker\nppid=100\ncmdline=python3 train.py\n");
	/*
	 * ranks a launcher started with RANK in their environment; their forks
	 * inherit it, and the spawn command line too
	 */
	w_thread_of(&w, 209, 209, "python3\nppid=100\ncmdline=python3 train.py\nrank=1\n");
	w_thread_of(&w, 210, 210, "python3\nppid=209\ncmdline=python3 train.py\nrank=1\n");
	w_thread_of(&w, 211, 211, "python3\nppid=209\ncmdline=python3 -c from multiprocessing.spawn "
		    "import spawn_main; spawn_main(tracker_fd=6, pipe_handle=8) --multiprocessing-fork\n"
		    "rank=1\n");
	w_thread_of(&w, 212, 212, "python3\nppid=211\ncmdline=python3 -c from multiprocessing.spawn "
		    "import spawn_main; spawn_main(tracker_fd=6, pipe_handle=8) --multiprocessing-fork\n"
		    "rank=1\n");
	w_thread_of(&w, 213, 213, "python3\nppid=100\ncmdline=python3 train.py\nrank=0\n");
	/* a fork of the target itself: its command line is the target's record's */
	w_thread_of(&w, 214, 214, "trainer\nppid=100\ncmdline=python train.py\n");
	/*
	 * forks that PyTorch before 2.3 leaves unnamed: the one whose shared
	 * tensor its parent maps is a DataLoader worker; one whose tensor another
	 * process maps is not
	 */
	w_thread_of(&w, 215, 215, "trainer\nppid=100\ncmdline=python train.py\n");
	w_thread_of(&w, 216, 216, "python3\nppid=203\ncmdline=python3 x.py\n");
	w_mmap_map(&w, 5 * MS, 5 * MS + 10 * US, T_LAUNCHER, 0x7f0000000000ull, 192 << 10,
		   "/dev/shm/torch_215_2887684879_54");
	w_mmap_map(&w, 6 * MS, 6 * MS + 10 * US, T_LAUNCHER, 0x7f0000100000ull, 192 << 10,
		   "/dev/shm/torch_216_2887684879_55");
	/* names that only look like it: no pid, no separator, a pid past 32 bits */
	w_thread_of(&w, 217, 217, "trainer\nppid=100\ncmdline=python train.py\n");
	w_mmap_map(&w, 7 * MS, 7 * MS + 10 * US, T_LAUNCHER, 0x7f0000200000ull, 4096, "/torch_217");
	w_mmap_map(&w, 7 * MS + 20 * US, 7 * MS + 30 * US, T_LAUNCHER, 0x7f0000201000ull, 4096,
		   "/torch_217x_1");
	w_mmap_map(&w, 7 * MS + 40 * US, 7 * MS + 50 * US, T_LAUNCHER, 0x7f0000202000ull, 4096,
		   "/torch_4294967513_1");
	w_mmap_map(&w, 7 * MS + 60 * US, 7 * MS + 70 * US, T_LAUNCHER, 0x7f0000203000ull, 4096,
		   "/torch__217_1");
	/*
	 * a DataLoader with the forkserver context: its workers are the
	 * forkserver's children, and the trainer maps their tensors
	 */
	w_thread_of(&w, 218, 218, "python3\nppid=201\ncmdline=python3 -c from multiprocessing."
		    "forkserver import main; main(8, 9, ['__main__'])\n");
	w_thread_of(&w, 219, 219, "python3\nppid=201\ncmdline=python3 -c from multiprocessing."
		    "forkserver import main; main(8, 9, ['__main__'])\n");
	w_mmap_map(&w, 8 * MS, 8 * MS + 10 * US, T_LAUNCHER, 0x7f0000300000ull, 192 << 10,
		   "/dev/shm/torch_218_2887684879_56");
	run_steps(&w, 3, 0, NULL);
	e = run_world(&w);
	REQUIRE(e, "engine");
	{
		/* NULL: not named (no parent known) */
		static const struct { uint32_t pid; const char *name; } want[] = {
			{ 201, "multiprocessing forkserver of trainer[100]" },
			/* the forkserver's fork: a child it started */
			{ 202, "multiprocessing child 1 of python3[201]" },
			{ 203, "multiprocessing resource tracker of trainer[100]" },
			{ 204, NULL },
			{ 205, "worker2, child process 1 of python3[203]" },
			{ 206, "DataLoader worker 1 of trainer[100]" },
			/* the first plain child of 100 still its child (205 was, then its PID came back under 203) */
			{ 207, "python3, child process 1 of trainer[100]" },
			{ 208, "DataLoader worker 2 of trainer[100]" },
			{ 209, "python3, rank 1 of trainer[100]" },
			/* a fork of a rank: its rank is its parent's */
			{ 210, "child process 1 of python3[209]" },
			{ 211, "multiprocessing child 1 of python3[209]" },
			/* a fork of a spawned child has its command line: a fork */
			{ 212, "child process 1 of python3[211]" },
			{ 213, "python3, rank 0 of trainer[100]" },
			{ 214, "child process 2 of trainer[100]" },
			{ 215, "DataLoader worker 3 of trainer[100]" },
			{ 216, "child process 2 of python3[203]" },
			{ 217, "child process 3 of trainer[100]" },
			{ 218, "DataLoader worker 4 of trainer[100]" },
			{ 219, "multiprocessing child 2 of python3[201]" },
		};

		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
			bool named = engine_process_name(e, want[i].pid, name, sizeof(name));

			CHECK(want[i].name ? named && !strcmp(name, want[i].name) : !named && !name[0],
			      "%u '%s', want '%s'", want[i].pid, name, want[i].name ? want[i].name : "");
		}
	}
	engine_free(e);
	world_free(&w);
}

/*
 * A DataLoader without persistent workers starts two again every epoch (as
 * PyTorch's default): each epoch's are workers 1 and 2, counted among those
 * not gone when they came; one of the next epoch that came while one of the
 * last was still exiting comes after it. Over a long watch, thousands of
 * them: the ones that exited longest ago make room for new ones.
 */
/*
 * n DataLoader workers of trainer[100], pids from 1000, in pairs 10 us
 * apart; both of a pair exit as its second starts, but for pair 7, whose
 * second lives on until pair 8 has started
 */
static void worker_epochs(struct world *w, uint32_t n)
{
	world_init(w);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t at = 1 * MS + i * 10 * US;
		uint32_t pid = 1000 + i;

		k_fork(w, at, pid, 100, "pt_data_worker");
		if (i % 2 == 1)
			k_exit(w, at + 5 * US, pid - 1, "pt_data_worker");
		if (i % 2 == 1 && i != 15)
			k_exit(w, at + 6 * US, pid, "pt_data_worker");
		if (i == 17)
			k_exit(w, at + 5 * US, 1000 + 15, "pt_data_worker");
	}
	run_steps(w, 3, 0, NULL);
}

/* engine_each_thread: counts tid 1000 in *ctx */
static void thread_held(void *ctx, uint32_t tid, const char *comm)
{
	(void)comm;
	*(int *)ctx += tid == 1000;
}

/*
 * 2,000 DataLoader workers of trainer[100], pids from 1000, 5 ms apart, each
 * with three threads besides its main one, each gone 1 ms after it came:
 * 8,000 threads, those gone long ago forgotten as the table grows (not only
 * when it holds 65,536), the workers still named by role
 */
static void t_threads_forgotten_as_they_age(void)
{
	struct world w;
	struct engine *e;
	struct engine_stats st;
	char name[128];
	const uint32_t n = 2000;
	int held;

	world_init(&w);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t at = 200 * MS + (uint64_t)i * 5 * MS;
		uint32_t pid = 1000 + i;

		k_fork(&w, at, pid, 100, "pt_data_worker");
		for (uint32_t j = 1; j < 4; j++) {
			struct sb_thread r = { 0 };

			hdr(&r.h, SB_EV_THREAD_NEW, sizeof(r), at + j * 10 * US, pid, 100000 + 4 * i + j, 0);
			r.parent_tid = pid;
			r.parent_pid = pid;
			w_comm(r.comm, "pt_data_worker");
			st_put(&w.host, &r);
			hdr(&r.h, SB_EV_THREAD_EXIT, sizeof(r), at + 500 * US + j * 10 * US, pid,
			    100000 + 4 * i + j, 0);
			st_put(&w.host, &r);
		}
		k_exit(&w, at + 1 * MS, pid, "pt_data_worker");
	}
	run_steps(&w, 3, 0, NULL);
	e = run_world(&w);
	REQUIRE(e, "engine");
	engine_stats(e, &st);
	CHECK(st.threads < 6000, "%" PRIu64 " threads held of the %u met", st.threads, 4 * n);
	held = 0;
	engine_each_thread(e, thread_held, &held);
	REQUIRE(!held, "the first worker's thread is still held");
	CHECK(engine_process_name(e, 1000, name, sizeof(name)) &&
	      !strcmp(name, "DataLoader worker 1 of trainer[100]"), "the first worker: '%s'", name);
	engine_free(e);
	world_free(&w);
}

static void t_process_names_epochs(void)
{
	struct world w;
	struct engine *e;
	char name[128];
	const uint32_t n = 5000;

	worker_epochs(&w, n);
	e = run_world(&w);
	REQUIRE(e, "engine");
	{
		static const struct { uint32_t pid; const char *name; } want[] = {
			{ 1000, NULL }, /* exited long ago: its place went to a later worker */
			{ 1000 + 4990, "DataLoader worker 1 of trainer[100]" },
			{ 1000 + 4991, "DataLoader worker 2 of trainer[100]" },
			{ 1000 + 4998, "DataLoader worker 1 of trainer[100]" },
			{ 1000 + 4999, "DataLoader worker 2 of trainer[100]" },
		};

		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
			bool named = engine_process_name(e, want[i].pid, name, sizeof(name));

			CHECK(want[i].name ? named && !strcmp(name, want[i].name) : !named,
			      "%u '%s', want '%s'", want[i].pid, name, want[i].name ? want[i].name : "");
		}
	}
	engine_free(e);
	world_free(&w);

	/* the same, few enough to keep every one: the pair that overlapped */
	worker_epochs(&w, 20);
	e = run_world(&w);
	REQUIRE(e, "engine");
	{
		static const struct { uint32_t pid; const char *name; } want[] = {
			{ 1000, "DataLoader worker 1 of trainer[100]" },
			{ 1001, "DataLoader worker 2 of trainer[100]" },
			{ 1002, "DataLoader worker 1 of trainer[100]" },
			{ 1014, "DataLoader worker 1 of trainer[100]" },
			{ 1015, "DataLoader worker 2 of trainer[100]" },
			/* 1015 still there: the next pair after it */
			{ 1016, "DataLoader worker 2 of trainer[100]" },
			{ 1017, "DataLoader worker 3 of trainer[100]" },
			{ 1018, "DataLoader worker 1 of trainer[100]" },
			{ 1019, "DataLoader worker 2 of trainer[100]" },
		};

		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
			bool named = engine_process_name(e, want[i].pid, name, sizeof(name));

			CHECK(named && !strcmp(name, want[i].name), "%u '%s', want '%s'", want[i].pid,
			      name, want[i].name);
		}
	}
	engine_free(e);
	world_free(&w);
}

/*
 * The target is itself a child that multiprocessing spawned (a rank of
 * mp.spawn): the DataLoader workers it forks keep its command line and are
 * forks, the processes it spawns are not.
 */
#define SPAWNED_CMD "python3 -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=6, "

static void t_process_names_spawned_target(void)
{
	struct world w;
	struct engine *e;
	char name[128];

	world_init(&w);
	w_text(&w, SB_REC_TARGET, 0, T_PID, "pid=100\ncomm=python3\ncmdline=" SPAWNED_CMD
	       "pipe_handle=13) --multiprocessing-fork\n");
	w_thread_of(&w, 301, 301, "python3\nppid=100\ncmdline=" SPAWNED_CMD
		    "pipe_handle=13) --multiprocessing-fork\n");
	w_thread_of(&w, 302, 302, "python3\nppid=100\ncmdline=" SPAWNED_CMD
		    "pipe_handle=21) --multiprocessing-fork\n");
	w_thread_of(&w, 303, 303, "python3\nppid=100\ncmdline=" SPAWNED_CMD
		    "pipe_handle=13) --multiprocessing-fork\n");
	run_steps(&w, 3, 0, NULL);
	e = run_world(&w);
	REQUIRE(e, "engine");
	CHECK(engine_process_name(e, 301, name, sizeof(name)) &&
	      !strcmp(name, "child process 1 of python3[100]"), "301 '%s'", name);
	CHECK(engine_process_name(e, 302, name, sizeof(name)) &&
	      !strcmp(name, "multiprocessing child 1 of python3[100]"), "302 '%s'", name);
	CHECK(engine_process_name(e, 303, name, sizeof(name)) &&
	      !strcmp(name, "child process 2 of python3[100]"), "303 '%s'", name);
	engine_free(e);
	world_free(&w);
}

/* a USDT mark of another process (a rank started by the same launcher) */
static void w_mark_of(struct world *w, uint64_t ts, uint32_t pid, uint32_t tid, uint64_t n)
{
	struct sb_step r = { 0 };

	hdr(&r.h, SB_EV_STEP, sizeof(r), ts, pid, tid, 0);
	r.step = n;
	r.source = SB_STEP_USDT;
	st_put(&w->host, &r);
}

/* thread tid of process pid made by thread by at ts (a thread_new record) */
static void k_thread_new(struct world *w, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t by,
			 const char *comm)
{
	struct sb_thread r = { 0 };

	hdr(&r.h, SB_EV_THREAD_NEW, sizeof(r), ts, pid, tid, 0);
	r.parent_tid = by;
	r.parent_pid = pid;
	w_comm(r.comm, comm);
	st_put(&w->host, &r);
}

/*
 * The launcher sleeps 40 ms; the worker (KID) sleeps 20 ms on a timer, then
 * computes 10 ms, then makes a thread (KID + 7) that computes 10 ms more and
 * wakes the launcher: the thread existed for the last 10 ms only.
 */
static void inj_kid_new_waker(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	(void)arg;
	(void)len;
	k_switch_in(w, at - 1 * MS, KID, KID, 2);
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_SLEEP);
	k_switch_out(w, at + 1 * US, KID, KID, 2, SB_STATE_SLEEP);
	k_wakeup(w, at + 20 * MS, KID, KID, 2, 0, 0, "swapper/2");
	k_switch_in(w, at + 20 * MS, KID, KID, 2);
	k_thread_new(w, at + 30 * MS, KID, KID + 7, KID, "feeder");
	k_wakeup(w, at + 30 * MS, KID, KID + 7, 3, KID, KID, "worker");
	k_switch_in(w, at + 30 * MS, KID, KID + 7, 3);
	w_wakeup(w, at + 40 * MS - 5 * US, T_LAUNCHER, T_CPU, KID, KID + 7, "feeder");
	w_switch_in(w, at + 40 * MS, T_LAUNCHER, T_CPU);
}

/* before its waker was made, what the waker's maker did: asleep 20 ms, on CPU 20 ms */
static void t_chain_waker_made_meanwhile(void)
{
	struct world w;
	struct sopt inj = { .pre = PRE, .gpu = GPU, .len = 40 * MS, .inj = inj_kid_new_waker };
	const struct eng_blame *b;
	const struct eng_step *s;
	struct engine *e;

	e = kid_world(&w, &inj);
	if (!(b = step1_waker(e, &w, KID + 7, &s)))
		return;
	CHECK(b->who.act.ns[ENG_ACT_BLOCKED] == 20 * MS - 1 * US, "asleep %" PRIu64 " (20 ms)",
	      b->who.act.ns[ENG_ACT_BLOCKED]);
	CHECK(b->who.act.ns[ENG_ACT_ON_CPU] == 20 * MS - 5 * US + 1 * US, "on CPU %" PRIu64 " (20 ms)",
	      b->who.act.ns[ENG_ACT_ON_CPU]);
	CHECK(blame_of(s, ENG_BLOCKED, KID) == 40 * MS - 5 * US, "blocked on the worker %" PRIu64,
	      blame_of(s, ENG_BLOCKED, KID));
	engine_free(e);
	world_free(&w);
}

/*
 * Marks of two processes: the steps are one process's, never a mix; the
 * other's marks are counted and named. The trainer's marks (T_PID) come
 * first here, KID's interleave; then a world where the child marks first.
 */
static void t_marks_of_one_process(void)
{
	struct world w;
	struct engine *e;
	struct eng_capture c;

	world_init(&w);
	w_thread_of(&w, KID, KID, "rank1\nppid=100\n");
	for (unsigned k = 0; k < 6; k++)
		w_mark_of(&w, 10 * SEC + k * (PRE + GPU) + 3 * MS, KID, KID + 1, 100 + k);
	run_steps(&w, 6, 0, NULL);
	e = run_world(&w);
	REQUIRE(e, "engine");
	engine_capture(e, &c);
	CHECK(engine_nsteps(e) == 7 && step_no(e, 0) && step_no(e, 5) && !step_no(e, 100),
	      "%llu steps", (unsigned long long)engine_nsteps(e));
	CHECK(c.mark_pid == T_PID && c.marks_ignored == 6 && c.nmarks_other == 1 &&
	      c.marks_other[0] == KID && !c.marks_other_more,
	      "mark_pid %u, %llu ignored of %u processes (first %u)", c.mark_pid,
	      (unsigned long long)c.marks_ignored, c.nmarks_other, c.marks_other[0]);
	engine_free(e);
	world_free(&w);

	/*
	 * the child marks first, then the target: the target's marks are the
	 * steps from its first on, the child's are left out (a worker, or a
	 * hostile one, cannot take the steps)
	 */
	world_init(&w);
	w_thread_of(&w, KID, KID, "rank1\nppid=100\n");
	for (unsigned k = 0; k < 8; k++)
		w_mark_of(&w, 10 * SEC - 1 * MS + k * 40 * MS, KID, KID + 1, 500 + k);
	run_steps(&w, 6, 0, NULL);
	e = run_world(&w);
	REQUIRE(e, "engine");
	engine_capture(e, &c);
	CHECK(c.mark_pid == T_PID && c.marks_ignored == 7 && c.nmarks_other == 1 &&
	      c.marks_other[0] == KID && !c.mark_restarts, "mark_pid %u, %llu ignored, first other %u",
	      c.mark_pid, (unsigned long long)c.marks_ignored, c.marks_other[0]);
	CHECK(engine_nsteps(e) == 8 && step_no(e, 0) && step_no(e, 5) && !step_no(e, 500) &&
	      !step_no(e, 501), "%llu steps", (unsigned long long)engine_nsteps(e));
	engine_free(e);
	world_free(&w);
}

/*
 * The launcher in uninterruptible sleep for len (a vfork parent until its
 * child execs): the child KID, on CPU 2 throughout, ends it (vf_by_kid), or
 * an interrupt does (no waker: disk I/O).
 */
static bool vf_by_kid;

static void inj_vfork(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	(void)arg;
	k_switch_in(w, at - 1 * MS, KID, KID, 2);
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_DISK);
	if (vf_by_kid)
		w_wakeup(w, at + len - 5 * US, T_LAUNCHER, T_CPU, KID, KID, "sh");
	else
		w_wakeup(w, at + len - 5 * US, T_LAUNCHER, T_CPU, 0, 0, "swapper/0");
	w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
}

/* a wait in D that a followed thread ended is a wait on it; one an interrupt ended, I/O */
static void t_uninterruptible_wait_on_child(void)
{
	struct sopt inj = { .pre = PRE, .gpu = GPU, .len = 30 * MS, .inj = inj_vfork };
	const struct eng_blame *b;
	const struct eng_step *s;
	struct engine *e;
	struct world w;

	vf_by_kid = true;
	e = kid_world(&w, &inj);
	if (!(b = step1_waker(e, &w, KID, &s)))
		return;
	CHECK(b->ns >= 30 * MS - 10 * US && b->who.act.ns[ENG_ACT_ON_CPU] >= 30 * MS - 10 * US &&
	      !blame_of(s, ENG_IO_WAIT, 0), "blocked on the child %" PRIu64 " (on CPU %" PRIu64
	      "), io_wait %" PRIu64, b->ns, b->who.act.ns[ENG_ACT_ON_CPU], blame_of(s, ENG_IO_WAIT, 0));
	engine_free(e);
	world_free(&w);

	vf_by_kid = false;
	e = kid_world(&w, &inj);
	REQUIRE(e && (s = step_no(e, 1)), "no step 1");
	CHECK(blame_of(s, ENG_IO_WAIT, 0) >= 30 * MS - 10 * US && !waker_entry(s, KID),
	      "io_wait %" PRIu64 " (30 ms)", blame_of(s, ENG_IO_WAIT, 0));
	engine_free(e);
	world_free(&w);
}

/*
 * A launcher (the target, marking nothing) whose trainer exits and is
 * started again: KID marks steps 0..9 and exits, KID2 (forked after) marks
 * 0..9. A third process marks alongside KID from the start and goes on after
 * it exits: another rank, never the steps. The steps are KID's then KID2's,
 * the one the exit cut short incomplete, the numbers anew.
 */
static void t_marks_restart(void)
{
	const uint32_t rank_b = KID + 50;
	uint64_t S = 10 * SEC, S2 = 11 * SEC;
	struct eng_capture c;
	struct engine *e;
	struct world w;
	uint32_t incomplete = 0, n = 0;

	world_init(&w);
	k_fork(&w, S - 10 * MS, KID, T_PID, "trainer");
	k_fork(&w, S - 9 * MS, rank_b, T_PID, "trainer");
	for (unsigned k = 0; k < 13; k++) {
		if (k < 10)
			w_mark_of(&w, S + k * 40 * MS, KID, KID, k);
		w_mark_of(&w, S + k * 40 * MS + 5 * MS, rank_b, rank_b, k);
	}
	k_exit(&w, S + 10 * 40 * MS, KID, "trainer");
	k_fork(&w, S2 - 10 * MS, KID2, T_PID, "trainer");
	for (unsigned k = 0; k < 10; k++)
		w_mark_of(&w, S2 + k * 40 * MS + 1 * MS, KID2, KID2, k);
	w_mark_of(&w, S2 + 10 * 40 * MS + 1 * MS, KID2, KID2, 10);
	e = run_world(&w);
	REQUIRE(e, "engine");
	engine_capture(e, &c);
	CHECK(c.mark_restarts == 1 && c.mark_pid == KID2 && !c.numbers_back,
	      "restarts %u, mark_pid %u (%u), numbers back %" PRIu64, c.mark_restarts, c.mark_pid,
	      KID2, c.numbers_back);
	CHECK(c.marks_ignored == 13 && c.nmarks_other == 1 && c.marks_other[0] == rank_b,
	      "%" PRIu64 " ignored of %u processes (first %u)", c.marks_ignored, c.nmarks_other,
	      c.nmarks_other ? c.marks_other[0] : 0);
	for (uint64_t i = engine_first_step(e); i < engine_nsteps(e); i++) {
		const struct eng_step *st = engine_step(e, i);

		n++;
		incomplete += st->incomplete;
		/* KID's last, ended by its exit; KID2's last, by the capture's end */
		if (st->incomplete)
			CHECK((st->step == 9 && st->start_ns == S + 9 * 40 * MS &&
			       st->duration_ns == 40 * MS) ||
			      (st->step == 10 && st->start_ns == S2 + 10 * 40 * MS + 1 * MS),
			      "an incomplete step: %" PRIu64 " at %" PRIu64, st->step, st->start_ns);
		else
			CHECK(st->duration_ns == 40 * MS, "step %" PRIu64 ": %" PRIu64 " ns", st->step,
			      st->duration_ns);
	}
	CHECK(n == 21 && incomplete == 2, "%u steps, %u incomplete (21, 2)", n, incomplete);
	engine_free(e);
	world_free(&w);
}

int main(void)
{
	RUN(t_chain_into_child);
	RUN(t_marks_restart);
	RUN(t_uninterruptible_wait_on_child);
	RUN(t_child_of_renamed_parent);
	RUN(t_chain_waker_made_meanwhile);
	RUN(t_chain_child_untraced_switch_in);
	RUN(t_chain_child_exits);
	RUN(t_chain_child_exits_after_many);
	RUN(t_chain_through_two_children);
	RUN(t_chain_wakers_asleep_after);
	RUN(t_same_process_waker);
	RUN(t_timed_wait_retried);
	RUN(t_timed_wait_not_retried);
	RUN(t_timed_wait_last_timeout);
	RUN(t_timed_wait_handoff);
	RUN(t_waker_io_and_faults);
	RUN(t_chain_child_fault_region);
	RUN(t_waker_faults_across_preemption);
	RUN(t_waker_fault_runs_across_preemption);
	RUN(t_stranger_waker);
	RUN(t_process_names);
	RUN(t_process_names_epochs);
	RUN(t_threads_forgotten_as_they_age);
	RUN(t_process_names_spawned_target);
	RUN(t_marks_of_one_process);
	return test_summary();
}
