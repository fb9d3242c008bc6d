// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Scheduler probes: switches of target threads, the tasks that run on a CPU
 * while a target thread waits there, wakeups (with the waker), migrations,
 * and thread creation, exit and renames; and the target's execs, where a
 * change of credentials stops the recording (common.bpf.h).
 *
 * Each tracepoint has a tp_btf and a raw_tp variant with the same body; the
 * agent keeps the tp_btf one where it loads and falls back to raw_tp.
 */
#include "common.bpf.h"
#include "task.bpf.h"
#include <bpf/bpf_endian.h>

/* when the task now running on each CPU got it */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} cpu_start SEC(".maps");

/* each CPU's steal count (below) when it was last read */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096); /* resized by the agent to the possible CPUs */
	__type(key, __u32);
	__type(value, __u64);
} steal_seen SEC(".maps");

/*
 * Steal: time the hypervisor gave this virtual CPU's host CPU to something
 * else. The runqueue keeps the paravirtual steal clock's count as of its last
 * clock update (rq->prev_steal_time_rq, CONFIG_PARAVIRT_TIME_ACCOUNTING;
 * zero and never moving on bare metal or where the hypervisor does not
 * report it); the scheduler updates that clock right before a switch and when
 * it queues a woken task. The count is read only where a target thread waits
 * for the CPU: when one is preempted or woken onto it, and at each switch
 * while one waits there; the change since the last reading is the steal
 * inside the slice that just ended, or the part of it since the wait began
 * (docs/ARCHITECTURE.md, "Steal").
 */
struct rq___steal {
	__u64 prev_steal_time_rq;
} __attribute__((preserve_access_index));

struct cfs_rq___steal {
	struct rq___steal *rq;
} __attribute__((preserve_access_index));

struct sched_entity___steal {
	struct cfs_rq___steal *cfs_rq;
} __attribute__((preserve_access_index));

struct task_struct___steal {
	struct sched_entity___steal se;
} __attribute__((preserve_access_index));

/*
 * The runqueue is reached through the task leaving the CPU: its scheduling
 * entity's cfs_rq points back to it (CONFIG_FAIR_GROUP_SCHED). The per-CPU
 * runqueues variable itself is not addressable where the kernel lists no data
 * symbols. 0 where the kernel has neither path nor steal accounting.
 */
/* direct: task is a trusted pointer (tp_btf), read with plain loads */
static __always_inline __u64 task_rq_steal(struct task_struct *task, bool direct)
{
	struct task_struct___steal *p = (void *)task;

	if (!bpf_core_field_exists(struct rq___steal, prev_steal_time_rq) ||
	    !bpf_core_field_exists(struct cfs_rq___steal, rq) ||
	    !bpf_core_field_exists(struct sched_entity___steal, cfs_rq))
		return 0;
	if (direct) {
		struct cfs_rq___steal *c = p->se.cfs_rq;
		struct rq___steal *rq = c ? c->rq : 0;

		return rq ? rq->prev_steal_time_rq : 0;
	}
	return BPF_CORE_READ(p, se.cfs_rq, rq, prev_steal_time_rq);
}

/* the steal on cpu since its last reading (0 at the first), read through task on it */
static __always_inline __u64 steal_take(__u32 cpu, struct task_struct *task, bool direct)
{
	__u64 *seen = bpf_map_lookup_elem(&steal_seen, &cpu), st, d = 0;

	if (!seen)
		return 0;
	st = task_rq_steal(task, direct);
	if (*seen && st > *seen)
		d = st - *seen;
	*seen = st;
	return d;
}

/*
 * CPU bandwidth (CONFIG_CFS_BANDWIDTH): a task whose cgroup, or an ancestor,
 * used up its CPU quota for the period is throttled: runnable, it does not run
 * until the next period, whoever runs on its CPU meanwhile. The scheduler marks
 * the throttled group and its descendants (cfs_rq->throttle_count) before the
 * switch away from it and while a wakeup queues a task there
 * (docs/ARCHITECTURE.md, "CPU quota").
 */
struct cfs_rq___thr {
	int throttle_count;
} __attribute__((preserve_access_index));

struct sched_entity___thr {
	struct cfs_rq___thr *cfs_rq;
} __attribute__((preserve_access_index));

struct task_struct___thr {
	struct sched_entity___thr se;
	unsigned int policy;
} __attribute__((preserve_access_index));

/* SCHED_NORMAL, SCHED_BATCH, SCHED_IDLE: the fair class, the one a quota throttles */
#define FAIR_POLICY(p) ((p) == 0 || (p) == 3 || (p) == 5)

static __always_inline __u8 task_throttled(struct task_struct *task, bool direct)
{
	struct task_struct___thr *p = (void *)task;

	if (!bpf_core_field_exists(struct cfs_rq___thr, throttle_count) ||
	    !bpf_core_field_exists(struct sched_entity___thr, cfs_rq))
		return 0;
	/* a real-time task is not throttled with its group's fair tasks */
	if (!FAIR_POLICY(direct ? p->policy : BPF_CORE_READ(p, policy)))
		return 0;
	if (direct) {
		struct cfs_rq___thr *c = p->se.cfs_rq;

		return c && c->throttle_count > 0;
	}
	return BPF_CORE_READ(p, se.cfs_rq, throttle_count) > 0;
}

/*
 * A real-time policy (SCHED_FIFO 1, SCHED_RR 2, SCHED_DEADLINE 6): such a task
 * preempts every task of the fair class whatever its nice value, so where it
 * is what a target thread waited behind, the report says so
 */
static __always_inline bool task_realtime(struct task_struct *task, bool direct)
{
	struct task_struct___thr *p = (void *)task;
	unsigned int pol = direct ? p->policy : BPF_CORE_READ(p, policy);

	return pol == 1 || pol == 2 || pol == 6;
}

/* how many target threads wait (runnable, not running) on each CPU */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096); /* resized by the agent to the possible CPUs */
	__type(key, __u32);
	__type(value, __s64); /* 64-bit: plain atomic add works on every BPF ISA */
} nwait SEC(".maps");

/* NUMA node of each CPU, filled by the agent */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u16);
} cpu_node SEC(".maps");

struct waiting {
	__u64 since;
	__u32 cpu;
	__u32 reason; /* enum sb_wait_reason */
};

/* target threads that are runnable but not running, by tid */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384); /* threads of the target; overflow is counted */
	__type(key, __u32);
	__type(value, struct waiting);
} waiting SEC(".maps");

/*
 * Who woke a target thread. sched_waking runs in the waker's context;
 * sched_wakeup may run on the target CPU from an IPI (queued remote wakeups),
 * where "current" is whoever happened to be running there.
 */
struct waker {
	__u32 pid;
	__u32 tid;
	char comm[SB_COMM_LEN];
	__u32 cpu;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384); /* threads of the target; overflow is counted */
	__type(key, __u32);
	__type(value, struct waker);
} wakers SEC(".maps");

static __always_inline void nwait_add(__u32 cpu, int d)
{
	__s64 *n = bpf_map_lookup_elem(&nwait, &cpu);

	if (!n)
		return;
	if (d > 0)
		__sync_fetch_and_add(n, 1);
	else if (*n > 0)
		__sync_fetch_and_add(n, -1);
}

/*
 * The thread starts to wait for a CPU. Where trips are folded its state is in
 * ts, its task storage (cheaper than a hash: no hashing, nothing inserted or
 * deleted); else in the waiting map.
 */
static __always_inline void start_waiting(struct tstate *ts, __u32 tid, __u32 cpu, __u64 now,
					  __u32 reason)
{
	struct waiting w = { .since = now, .cpu = cpu, .reason = reason };

	if (ts) {
		if (ts->wait_since)
			return;
		ts->wait_cpu = cpu;
		ts->wait_reason = reason;
		ts->wait_since = now;
		nwait_add(cpu, 1);
		return;
	}
	if (bpf_map_lookup_elem(&waiting, &tid))
		return;
	if (bpf_map_update_elem(&waiting, &tid, &w, BPF_NOEXIST)) {
		count_drop(SB_DROP_MAPFULL);
		return;
	}
	nwait_add(cpu, 1);
}

/* the thread got a CPU, left, or exited: the wait it was in (true) is over */
static __always_inline bool end_waiting(struct tstate *ts, __u32 tid, struct waiting *out)
{
	if (ts) {
		if (!ts->wait_since)
			return false;
		out->since = ts->wait_since;
		out->cpu = ts->wait_cpu;
		out->reason = ts->wait_reason;
		ts->wait_since = 0;
		nwait_add(out->cpu, -1);
		return true;
	}
	struct waiting *w = bpf_map_lookup_elem(&waiting, &tid);

	if (!w)
		return false;
	*out = *w;
	nwait_add(w->cpu, -1);
	bpf_map_delete_elem(&waiting, &tid);
	return true;
}

/*
 * Trips folded (common.bpf.h): only the tp_btf variant (direct), whose task
 * pointers are trusted and take task storage
 */
#define FOLD(direct) ((direct) && sched_fold_ns)

/* task t's comm into dst: plain loads through a trusted pointer (direct), else a probe read */
#define TASK_COMM(dst, t, direct) \
	do { \
		if (direct) \
			__builtin_memcpy((dst), (t)->comm, SB_COMM_LEN); \
		else \
			BPF_CORE_READ_STR_INTO((dst), (t), comm); \
	} while (0)

static __always_inline struct tstate *tstate_of(struct task_struct *t, bool create)
{
	return bpf_task_storage_get(&tstate, t, 0, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

/* the held trip of ts, taken (h: its switch-out), written: switch-out, and its wakeup if held */
static __always_inline void held_write(struct tstate *ts)
{
	if (is_target_tgid(ts->out.h.pid))
		emit_copy(&ts->out, sizeof(ts->out), SB_EV_SWITCH_OUT);
	if (__sync_lock_test_and_set(&ts->wake_ts, 0) && is_target_tgid(ts->wk.h.pid))
		emit_copy(&ts->wk, sizeof(ts->wk), SB_EV_WAKEUP);
}

/*
 * The held trip of ts, taken, into a ring record with the switch-in that ends
 * it at now on cpu (its body filled in by the caller): its switch-out, and its
 * wakeup if held; a part not written has h.type 0. Both headers name the
 * thread switched in, pid and tid.
 */
static __always_inline void trip_fill(struct sb_trip *t, struct tstate *ts, __u32 cpu, __u64 now,
				      __u32 pid, __u32 tid)
{
	struct sb_hdr h = { .type = SB_RING_TRIP, .size = sizeof(*t), .cpu = cpu, .pid = pid,
			    .tid = tid, .ts = now };

	t->h = h;
	h.type = SB_EV_SWITCH_IN;
	h.size = sizeof(t->in);
	t->in.h = h;
	if (is_target_tgid(ts->out.h.pid))
		__builtin_memcpy(&t->out, &ts->out, sizeof(t->out));
	else
		t->out.h.type = 0;
	if (__sync_lock_test_and_set(&ts->wake_ts, 0) && is_target_tgid(ts->wk.h.pid))
		__builtin_memcpy(&t->wk, &ts->wk, sizeof(t->wk));
	else
		t->wk.h.type = 0;
}

/*
 * Sum the trip of ts that just ended at now (switch-out at out; woke: its
 * wakeup, 0 when preempted) into its run; prev had the CPU before the
 * switch-in (tid 0: the idle task). False when the run was busy: the trip is
 * then written as records.
 */
static __always_inline bool fold(struct tstate *ts, __u32 pid, __u32 tid, __u32 cpu, __u64 out,
				 __u64 woke, __u64 now, struct task_struct *prev, __u32 prev_pid,
				 __u32 prev_tid, __u64 steal)
{
	struct sb_sched_run *r = &ts->run;
	bool slept = ts->out.state == SB_STATE_SLEEP;
	__u32 waker = slept && woke ? ts->wk.waker_tid : 0;
	__u64 wait = slept ? (woke && now > woke ? now - woke : 0) : now - out;

	if (__sync_val_compare_and_swap(&ts->run_busy, 0, 1))
		return false;
	if (r->start_ns && (out - r->start_ns >= sched_run_max_ns ||
			    (slept && r->sleeps && r->waker_tid != waker) ||
			    (prev_tid && r->runner_tid && r->runner_tid != prev_tid))) {
		if (is_target_tgid(r->h.pid))
			emit_copy(r, sizeof(*r), SB_EV_SCHED_RUN);
		r->start_ns = 0;
	}
	if (!r->start_ns) {
		__builtin_memset(r, 0, sizeof(*r));
		r->h.type = SB_EV_SCHED_RUN;
		r->h.size = sizeof(*r);
		r->h.pid = pid;
		r->h.tid = tid;
		r->start_ns = out;
	}
	r->h.ts = now;
	r->h.cpu = cpu;
	if (slept) {
		r->sleeps++;
		r->sleep_ns += woke > out ? woke - out : now - out;
		if (waker && !r->waker_tid) {
			r->waker_pid = ts->wk.waker_pid;
			r->waker_tid = waker;
			__builtin_memcpy(r->waker_comm, ts->wk.waker_comm, SB_COMM_LEN);
		}
	} else {
		r->preempts++;
	}
	r->wait_ns += wait;
	if (!prev_tid) {
		r->idle_wait_ns += wait;
	} else if (!r->runner_tid) {
		r->runner_pid = prev_pid;
		r->runner_tid = prev_tid;
		TASK_COMM(r->runner_comm, prev, true);
		/* once a run: every trip of it waited behind this one runner */
		if (task_realtime(prev, true))
			r->h.flags = SB_SCHED_RUN_RUNNER_REALTIME;
	}
	r->steal_ns += steal < wait ? steal : wait;
	if (now - out > r->max_ns)
		r->max_ns = now - out;
	asm volatile("" ::: "memory");
	ts->run_busy = 0;
	return true;
}

static __always_inline __u8 classify(bool preempt, __u32 st)
{
	if (preempt || st == 0)
		return SB_STATE_RUNNABLE;
	if (st & (0x10 | 0x20)) /* EXIT_DEAD, EXIT_ZOMBIE */
		return SB_STATE_DEAD;
	if (st & 0x0002) /* TASK_UNINTERRUPTIBLE (incl. TASK_IDLE = D|NOLOAD) */
		return SB_STATE_DISK;
	if (st & 0x0001) /* TASK_INTERRUPTIBLE */
		return SB_STATE_SLEEP;
	if (st & (0x0004 | 0x0008)) /* __TASK_STOPPED, __TASK_TRACED */
		return SB_STATE_STOPPED;
	/*
	 * TASK_WAKING: it blocked, and a wakeup already under way on another CPU
	 * changed its state before the switch was traced; the wakeup follows
	 */
	if (st & 0x0200)
		return SB_STATE_SLEEP;
	return SB_STATE_OTHER;
}

/* a switch-out record's body and ids (its header's type, size, cpu and flags aside) */
static __always_inline void out_fill(struct sb_switch_out *o, __u32 pid, __u32 tid, __u64 now,
				     __u32 st, __u8 s, __u8 thr, struct task_struct *next,
				     __u32 next_pid, __u32 next_tid, bool direct)
{
	o->h.pid = pid;
	o->h.tid = tid;
	o->h.ts = now;
	o->prev_state = st;
	o->state = s;
	o->throttled = thr;
	o->pad[0] = o->pad[1] = 0;
	o->next_pid = next_pid;
	o->next_tid = next_tid;
	TASK_COMM(o->next_comm, next, direct);
}

/* task t (pid, tid) ran on this CPU over [start, now]: a runslice record (schemas/trace.md) */
static __always_inline void runslice_write(struct task_struct *t, bool direct, __u32 pid, __u32 tid,
					   __u64 start, __u64 now, __u32 nwaiting, __u64 steal)
{
	struct sb_runslice *r = reserve_other(SB_EV_RUNSLICE, sizeof(*r));

	if (!r)
		return;
	r->h.pid = pid;
	r->h.tid = tid;
	r->h.ts = now;
	r->start_ns = start;
	TASK_COMM(r->comm, t, direct);
	r->nwaiting = nwaiting;
	r->steal_us = steal / 1000 > 0xffffffffULL ? 0xffffffff : steal / 1000;
	if (task_realtime(t, direct))
		r->h.flags = SB_RUNSLICE_REALTIME;
	submit(r);
}

/*
 * Runs on every context switch of the machine, so the ids come in already
 * read: tp_btf reads them directly, raw_tp through bpf_probe_read (direct:
 * prev and next are trusted pointers, read with plain loads).
 */
/*
 * Interrupts on a target thread's time (docs/ARCHITECTURE.md, "Interrupts").
 * A hard interrupt's handler, and the softirqs the kernel runs on its way out
 * of one, run on whatever task was on the CPU, and the scheduler sees none of
 * it: to the thread's switches it is time on its CPU, its own code. The entry
 * and exit of each are timed where the interrupted task is a target thread,
 * and summed into the thread's interrupt run (struct sb_irq_run), written
 * when the next interrupt does not extend it, or by the agent's tick once it
 * is SB_IRQ_RUN_GAP_NS old. Only tp_btf variants: they keep the run in task
 * storage. A hard interrupt inside a softirq is the hard interrupt's time,
 * not the softirq's.
 */
struct irq_nest {
	__u64 soft_start;    /* the softirq running on this CPU began (0: none timed) */
	__u64 hard_start;    /* the hard interrupt handler running began (0: none timed) */
	__u64 hard_in_soft;  /* hard interrupt time inside the softirq running */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct irq_nest);
} irq_nest SEC(".maps");

#define SB_IRQ_SRC_HARD SB_NSOFTIRQ
#define SB_IRQ_SRC_SYS (SB_NSOFTIRQ + 1) /* + enum sb_sysirq */

/* write ts's interrupt run (the caller holds irq_busy) */
static __always_inline void irq_emit(struct tstate *ts)
{
	if (ts->irq.start_ns && is_target_tgid(ts->irq.h.pid))
		emit_copy(&ts->irq, sizeof(ts->irq), SB_EV_IRQ_RUN);
	ts->irq.start_ns = 0;
	ts->irq_hard_max = 0;
}

/*
 * Write ts's interrupt run from outside an interrupt (its switch-out, the
 * tick), unless an interrupt is changing it: all, whatever its age; else once
 * no interrupt can extend it at now
 */
static __always_inline void irq_flush(struct tstate *ts, __u64 now, bool all)
{
	if (!ts->irq.start_ns || (!all && now <= ts->irq.h.ts + SB_IRQ_RUN_GAP_NS) ||
	    __sync_val_compare_and_swap(&ts->irq_busy, 0, 1))
		return;
	if (all || now > ts->irq.h.ts + SB_IRQ_RUN_GAP_NS)
		irq_emit(ts);
	asm volatile("" ::: "memory");
	ts->irq_busy = 0;
}

static __always_inline int on_switch(void *ctx, bool direct, bool preempt,
				     struct task_struct *prev, struct task_struct *next,
				     __u32 prev_tgid, __u32 prev_tid, __u32 next_tgid, __u32 next_tid)
{
	__u32 zero = 0, cpu = bpf_get_smp_processor_id();
	__u64 now = bpf_ktime_get_ns(), start = 0, steal = 0;
	__u64 *cs = bpf_map_lookup_elem(&cpu_start, &zero);
	struct tstate *nts = NULL;
	__u64 nheld = 0;
	bool next_target = is_target_tgid(next_tgid), fold_next = false, sliced = false;

	if (cs) {
		start = *cs;
		*cs = now;
	}
	/* next's trip off the CPU ends: short, it is folded (common.bpf.h) */
	if (FOLD(direct) && next_target) {
		nts = tstate_of(next, false);
		if (nts && nts->held) {
			nheld = __sync_lock_test_and_set(&nts->held, 0);
			/* a throttled wait is the quota's, not its runner's: never folded */
			fold_next = nheld && now - nheld < sched_fold_ns && !nts->out.throttled &&
				    !nts->wk.throttled;
		}
	}

	/*
	 * Someone ran here while a target thread waited: that is who to blame. The
	 * trainer's own threads count too (a loader preempting the launcher).
	 */
	__s64 *n = bpf_map_lookup_elem(&nwait, &cpu);

	/* a target no longer recorded leaves its waiters counted: nobody waits */
	if (n && *n > 0 && !target_stopped()) {
		steal = steal_take(cpu, prev, direct);
		/*
		 * The runqueue's count moves only at its clock updates: the
		 * reading at the start of a wait can be a tick old, and the
		 * change then holds steal from before this slice. None of it
		 * can be more than the slice lasted.
		 */
		if (start && now > start && steal > now - start)
			steal = now - start;
		/* the only waiter is next, whose trip is folded: prev is its run's runner */
		/* about prev, not its own event: its run is written below, once it passed the filter */
		if (prev_tid != 0 && !(fold_next && *n == 1)) {
			runslice_write(prev, direct, prev_tgid, prev_tid, start, now, *n, steal);
			sliced = true;
		}
	}

	/* prev is the current task: its credentials can be checked */
	if (is_target_tgid(prev_tgid) && current_creds_same(SB_STOP_CRED, false)) {
		__u32 st = task_state(prev);
		__u8 s = classify(preempt, st);
		__u8 thr = s == SB_STATE_RUNNABLE ? task_throttled(prev, direct) : 0;
		struct tstate *pts = NULL;
		struct waiting stale;

		if (FOLD(direct))
			pts = tstate_of(prev, true);
		/*
		 * prev is running: a wait or a held trip of its own still open
		 * ended on a switch-in the kernel did not trace. The wait is over.
		 * A held preemption is dropped, not written late behind the slice
		 * that shows prev ran. A held sleep is written, as the tick writes
		 * one (it slept), and a slice of its own, from its CPU's last
		 * traced switch or its wakeup, stands for the switch-in where this
		 * switch wrote none (docs/ARCHITECTURE.md, "Scheduler runs").
		 */
		bool was_waiting = end_waiting(pts, prev_tid, &stale);

		/* its interrupt run: none can extend it while it is off its CPU */
		if (pts)
			irq_flush(pts, now, true);

		if (pts && __sync_lock_test_and_set(&pts->held, 0)) {
			if (pts->out.state == SB_STATE_SLEEP) {
				__u64 from = was_waiting ? stale.since : pts->out.h.ts;

				run_flush(pts);
				held_write(pts);
				if (start > from)
					from = start;
				if (!sliced && from < now)
					runslice_write(prev, direct, prev_tgid, prev_tid, from, now, 0, 0);
			} else {
				pts->wake_ts = 0;
			}
		}
		if (pts && (s == SB_STATE_RUNNABLE || s == SB_STATE_SLEEP)) {
			/* held until its switch-in says how long the trip was */
			struct sb_switch_out *o = &pts->out;

			fault_flush_tid(prev_tid);
			o->h.type = SB_EV_SWITCH_OUT;
			o->h.size = sizeof(*o);
			o->h.cpu = cpu;
			o->h.flags = 0;
			out_fill(o, prev_tgid, prev_tid, now, st, s, thr, next, next_tgid, next_tid, true);
			pts->wake_ts = 0;
			asm volatile("" ::: "memory");
			pts->held = now;
		} else {
			struct sb_switch_out *o = reserve(SB_EV_SWITCH_OUT, sizeof(*o));

			if (o) {
				out_fill(o, prev_tgid, prev_tid, now, st, s, thr, next, next_tgid, next_tid,
					 direct);
				submit(o);
			}
		}
		if (s == SB_STATE_RUNNABLE) {
			/* the first to wait here: the steal count from now */
			if (!n || *n <= 0)
				steal_take(cpu, prev, direct);
			start_waiting(pts, prev_tid, cpu, now, thr ? SB_WAIT_THROTTLED : SB_WAIT_PREEMPTED);
		}
		sleep_stack_out(ctx, pts, prev_tid, now, s == SB_STATE_SLEEP || s == SB_STATE_DISK);
	}

	if (next_target) {
		struct sb_trip *trip = NULL;
		struct waiting w = {};
		__u64 wait_ns = 0;
		__u8 reason = SB_WAIT_NONE;

		if (end_waiting(FOLD(direct) ? nts : NULL, next_tid, &w)) {
			wait_ns = now - w.since;
			reason = w.reason;
		}
		if (nts) {
			if (fold_next) {
				__u64 woke = __sync_lock_test_and_set(&nts->wake_ts, 0);

				if (fold(nts, next_tgid, next_tid, cpu, nheld, woke, now, prev, prev_tgid,
					 prev_tid, steal)) {
					/* short: the next sleep stack is sampled as after one */
					nts->ss.last_long = 0;
					return 0;
				}
				/* its run was being written: the trip goes as records */
				if (woke)
					nts->wake_ts = woke;
			}
			if (nheld) {
				/*
				 * too long to fold: the trip's records, after the run
				 * before it, as one ring record with the switch-in
				 */
				run_flush(nts);
				trip = bpf_ringbuf_reserve(&events, sizeof(*trip), 0);
				if (trip)
					trip_fill(trip, nts, cpu, now, next_tgid, next_tid);
				else
					held_write(nts);
			} else if (nts->wake_ts) {
				/* a wakeup held while the tick wrote the switch-out */
				if (__sync_lock_test_and_set(&nts->wake_ts, 0) && is_target_tgid(nts->wk.h.pid))
					emit_copy(&nts->wk, sizeof(nts->wk), SB_EV_WAKEUP);
			}
		}
		/* about next: prev's (the current task's) runs were written above */
		struct sb_switch_in *in = trip ? &trip->in : reserve_at(SB_EV_SWITCH_IN, sizeof(*in), cpu, now);

		if (in) {
			in->h.pid = next_tgid;
			in->h.tid = next_tid;
			in->wait_ns = wait_ns;
			in->prev_pid = prev_tgid;
			in->prev_tid = prev_tid;
			TASK_COMM(in->prev_comm, prev, direct);
			in->wait_reason = reason;
			__builtin_memset(in->pad, 0, sizeof(in->pad));
			if (trip)
				submit(trip);
			else
				submit(in);
		}
		sleep_stack_in(FOLD(direct) ? nts : NULL, next_tgid, next_tid, now);
	}
	return 0;
}

/*
 * The largest kernel stack of a task (THREAD_SIZE: 16 KiB on x86-64, 32 KiB
 * with KASAN): a frame further from the task's stack base is on another stack.
 */
#define TASK_STACK_SPAN 32768

/*
 * Are we in interrupt context? A hard interrupt, and the softirqs run at its
 * end, run on the CPU's interrupt stack, not on the stack of the task they
 * interrupted. The tracepoint's arguments (ctx) are an array on the stack the
 * tracepoint fired on (this program's own frame may be a private stack), so
 * where they lie says which. (The preempt count would say it directly, but it
 * is a per-CPU variable that kallsyms lists only with CONFIG_KALLSYMS_ALL.)
 *
 * One exception on x86-64: an interrupt that arrives while the task runs in
 * user mode is handled on the task's own kernel stack (it is empty then).
 * There the frame the entry code saved at the top of that stack tells: a
 * system call's orig_ax is its number, an interrupt's or exception's is -1.
 * (A wakeup from a page fault the task took in user mode, rare, is then
 * taken for an interrupt's too: no waker rather than a wrong one. Kernels
 * without tp_btf or bpf_task_pt_regs go without this check.)
 */
#ifndef PF_KTHREAD
#define PF_KTHREAD 0x00200000 /* include/linux/sched.h */
#endif

static __always_inline bool in_interrupt_ctx(void *ctx, bool direct)
{
	__u64 sp = 0, base;
	void *at = ctx;

	/* the address as a number: read back from where it was spilled */
	bpf_probe_read_kernel(&sp, sizeof(sp), &at);
	if (direct)
		base = (__u64)bpf_get_current_task_btf()->stack;
	else
		base = (__u64)BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), stack);
	if (!base || !sp)
		return false;
	if (sp < base || sp - base >= TASK_STACK_SPAN)
		return true;
#if defined(__TARGET_ARCH_x86)
	/* the frame at the top of the stack (bpf_task_pt_regs: 5.15 on; tp_btf kernels only) */
	if (direct && bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs)) {
		struct task_struct *cur = bpf_get_current_task_btf();
		struct pt_regs *regs;
		long orig_ax = 0;

		/* a kernel thread never entered from user mode: its frame means nothing */
		if (cur->flags & PF_KTHREAD)
			return false;
		regs = (struct pt_regs *)bpf_task_pt_regs(cur);
		if (regs && !bpf_probe_read_kernel(&orig_ax, sizeof(orig_ax), &regs->orig_ax))
			return orig_ax < 0;
	}
#endif
	return false;
}

/*
 * The one interrupt-context wakeup whose waker is known: a packet sent to an
 * address of this host. The loopback device queues it for the receive softirq,
 * which runs on the sender's CPU when its transmit re-enables bottom halves,
 * inside its system call; that delivery wakes the receiver. So in interrupt
 * context, a current task that is in a send on a socket (write, writev,
 * sendto, sendmsg, sendmmsg, sendfile) whose peer is a local address (IPv4
 * 127/8 or its own address; IPv6 ::1, its own address, or a mapped 127/8) is
 * the waker. A device's receive interrupt that happens to be handled in the
 * same softirq run is taken for the send's (docs/ARCHITECTURE.md, "Wakers").
 * x86-64 with tp_btf only: elsewhere no waker, as for any interrupt.
 */
#define AF_INET_ 2
#define AF_INET6_ 10

static __always_inline bool loopback_sender(bool direct)
{
#if defined(__TARGET_ARCH_x86)
	struct task_struct *cur;
	struct pt_regs *regs;
	long nr = -1;
	__u64 fd = 0;

	if (!direct || !bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs))
		return false;
	cur = bpf_get_current_task_btf();
	if (cur->flags & PF_KTHREAD)
		return false;
	regs = (struct pt_regs *)bpf_task_pt_regs(cur);
	if (!regs || bpf_probe_read_kernel(&nr, sizeof(nr), &regs->orig_ax) ||
	    bpf_probe_read_kernel(&fd, sizeof(fd), &regs->di))
		return false;
	/* write, writev, sendfile (its first argument is the out fd), sendto, sendmsg, sendmmsg */
	if (nr != 1 && nr != 20 && nr != 40 && nr != 44 && nr != 46 && nr != 307)
		return false;
	struct file *f = fd_file((__s64)(__s32)fd);

	if (!f || (BPF_CORE_READ(f, f_inode, i_mode) & 0170000) != 0140000)
		return false;
	struct socket *so = BPF_CORE_READ(f, private_data);
	struct sock *sk = so ? BPF_CORE_READ(so, sk) : NULL;

	if (!sk)
		return false;
	__u16 fam = BPF_CORE_READ(sk, __sk_common.skc_family);

	if (fam == AF_INET_) {
		__u32 d = BPF_CORE_READ(sk, __sk_common.skc_daddr);

		/* network order: the first octet is the low byte */
		return (d & 0xff) == 127 || (d && d == BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr));
	}
	if (fam == AF_INET6_) {
		struct in6_addr d = BPF_CORE_READ(sk, __sk_common.skc_v6_daddr);
		struct in6_addr s = BPF_CORE_READ(sk, __sk_common.skc_v6_rcv_saddr);
		__u32 *a = d.in6_u.u6_addr32, *b = s.in6_u.u6_addr32;

		if (!a[0] && !a[1] && !a[2] && a[3] == bpf_htonl(1))
			return true;
		if (!a[0] && !a[1] && a[2] == bpf_htonl(0xffff) && (a[3] & 0xff) == 127)
			return true;
		return (a[0] | a[1] | a[2] | a[3]) && a[0] == b[0] && a[1] == b[1] && a[2] == b[2] &&
		       a[3] == b[3];
	}
#endif
	return false;
}

static __always_inline int on_waking(void *ctx, struct task_struct *p, bool direct)
{
	if (!is_target_tgid(direct ? p->tgid : BPF_CORE_READ(p, tgid)))
		return 0;
	__u32 tid = direct ? p->pid : BPF_CORE_READ(p, pid);
	__u64 id = bpf_get_current_pid_tgid();
	struct waker w = { .pid = id >> 32, .tid = (__u32)id, .cpu = bpf_get_smp_processor_id() };

	/*
	 * an interrupt (a timer, a device) woke it, not the task it interrupted:
	 * no waker, unless that task's own send to this host did
	 */
	if (in_interrupt_ctx(ctx, direct) && !loopback_sender(direct))
		w.pid = w.tid = 0;

	if (FOLD(direct)) {
		struct tstate *ts = tstate_of(p, true);

		if (!ts)
			return 0;
		ts->waker_pid = w.pid;
		ts->waker_tid = w.tid;
		ts->waker_cpu = w.cpu;
		if (w.tid)
			bpf_get_current_comm(&ts->waker_comm, sizeof(ts->waker_comm));
		else
			__builtin_memset(ts->waker_comm, 0, sizeof(ts->waker_comm));
		ts->waker_set = 1;
		return 0;
	}
	if (w.tid)
		bpf_get_current_comm(&w.comm, sizeof(w.comm));
	if (bpf_map_update_elem(&wakers, &tid, &w, BPF_ANY))
		count_drop(SB_DROP_MAPFULL);
	return 0;
}

/* fill wakeup record e of p (tgid, tid) woken at now onto cpu, its waker as waking saw it */
static __always_inline void wakeup_fill(struct sb_wakeup *e, struct tstate *ts, __u32 tgid, __u32 tid,
					__u32 cpu, __u64 now, __u8 is_new, __u8 thr)
{
	struct waker *w = ts ? NULL : bpf_map_lookup_elem(&wakers, &tid);

	if (ts && ts->waker_set) {
		e->waker_pid = ts->waker_pid;
		e->waker_tid = ts->waker_tid;
		e->waker_cpu = ts->waker_cpu;
		__builtin_memcpy(e->waker_comm, ts->waker_comm, SB_COMM_LEN);
		ts->waker_set = 0;
	} else if (w) {
		e->waker_pid = w->pid;
		e->waker_tid = w->tid;
		e->waker_cpu = w->cpu;
		__builtin_memcpy(e->waker_comm, w->comm, SB_COMM_LEN);
		bpf_map_delete_elem(&wakers, &tid);
	} else {
		/* attached between waking and wakeup, or a new thread: current is the best guess */
		__u64 id = bpf_get_current_pid_tgid();

		e->waker_pid = id >> 32;
		e->waker_tid = (__u32)id;
		e->waker_cpu = bpf_get_smp_processor_id();
		bpf_get_current_comm(&e->waker_comm, sizeof(e->waker_comm));
	}
	e->h.pid = tgid;
	e->h.tid = tid;
	e->h.cpu = cpu;
	e->h.ts = now;
	e->is_new = is_new;
	e->throttled = thr;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
}

static __always_inline int on_wakeup(struct task_struct *p, bool direct, __u8 is_new)
{
	__u32 tgid = direct ? p->tgid : BPF_CORE_READ(p, tgid);

	if (!is_target_tgid(tgid))
		return 0;
	__u32 tid = direct ? p->pid : BPF_CORE_READ(p, pid);
	__u32 cpu = task_cpu_of(p, direct);
	__u64 now = bpf_ktime_get_ns();
	__s64 *n = bpf_map_lookup_elem(&nwait, &cpu);
	struct tstate *ts = FOLD(direct) ? tstate_of(p, true) : NULL;
	__u8 thr = task_throttled(p, direct);

	/* the first to wait there: the steal count from now (p is queued on cpu) */
	if (n && *n <= 0)
		steal_take(cpu, p, direct);
	start_waiting(ts, tid, cpu, now, thr ? SB_WAIT_THROTTLED : SB_WAIT_WOKEN);
	/* a long sleep whose switch-out took no stack: read it now if the waker can */
	if (ts)
		sleep_stack_wake(ts, p, now);

	if (ts && ts->held && ts->out.state == SB_STATE_SLEEP && !ts->wake_ts) {
		/* the wakeup of a held sleep: held with it */
		struct sb_wakeup *e = &ts->wk;

		e->h.type = SB_EV_WAKEUP;
		e->h.size = sizeof(*e);
		e->h.flags = 0;
		wakeup_fill(e, ts, tgid, tid, cpu, now, is_new, thr);
		asm volatile("" ::: "memory");
		ts->wake_ts = now;
		asm volatile("" ::: "memory");
		/*
		 * held with the switch-out, however long the sleep: the switch-in
		 * writes the trip as one record (or the tick, if it waits long).
		 * Where the tick took the switch-out meanwhile, this goes now.
		 */
		if (!ts->held && __sync_lock_test_and_set(&ts->wake_ts, 0) && is_target_tgid(tgid))
			emit_copy(e, sizeof(*e), SB_EV_WAKEUP);
		return 0;
	}

	struct sb_wakeup *e = reserve_other(SB_EV_WAKEUP, sizeof(*e));

	if (!e)
		return 0;
	wakeup_fill(e, ts, tgid, tid, cpu, now, is_new, thr);
	submit(e);
	return 0;
}

static __always_inline int on_migrate(struct task_struct *p, int dest, bool direct)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);

	if (!is_target_tgid(tgid))
		return 0;
	__u32 tid = BPF_CORE_READ(p, pid);
	__u32 orig = task_cpu(p), dcpu = dest;

	if (FOLD(direct)) {
		struct tstate *ts = tstate_of(p, false);

		if (ts && ts->wait_since && ts->wait_cpu != dcpu) {
			nwait_add(ts->wait_cpu, -1);
			nwait_add(dcpu, 1);
			ts->wait_cpu = dcpu;
		}
		/* the run before this record */
		if (ts)
			run_flush(ts);
	} else {
		struct waiting *w = bpf_map_lookup_elem(&waiting, &tid);

		if (w && w->cpu != dcpu) {
			nwait_add(w->cpu, -1);
			nwait_add(dcpu, 1);
			w->cpu = dcpu;
		}
	}

	struct sb_migrate *e = reserve(SB_EV_MIGRATE, sizeof(*e));

	if (!e)
		return 0;
	__u16 *on = bpf_map_lookup_elem(&cpu_node, &orig);
	__u16 *dn = bpf_map_lookup_elem(&cpu_node, &dcpu);

	e->h.pid = tgid;
	e->h.tid = tid;
	e->orig_cpu = orig;
	e->dest_cpu = dcpu;
	e->orig_node = on ? *on : 0;
	e->dest_node = dn ? *dn : 0;
	submit(e);
	return 0;
}

/*
 * A new thread of a followed process, or a new process forked by one (then
 * followed too when follow_children is set). Runs in the parent's context.
 */
static __always_inline int on_fork(struct task_struct *parent, struct task_struct *child)
{
	__u32 ctgid = BPF_CORE_READ(child, tgid), ptgid = BPF_CORE_READ(parent, tgid);

	if (ctgid != ptgid) {
		struct followed_proc f = { .parent = ptgid };
		__u32 zero = 0;
		__u64 *any;

		if (!follow_children || !is_target_tgid(ptgid) ||
		    !current_creds_same(SB_STOP_CRED, false))
			return 0;
		if (bpf_map_update_elem(&followed, &ctgid, &f, BPF_NOEXIST)) {
			count_drop(SB_DROP_MAPFULL);
			return 0;
		}
		any = bpf_map_lookup_elem(&follow_any, &zero);
		if (any && !*any)
			*any = 1;
	} else if (!is_target_tgid(ctgid)) {
		return 0;
	}
	struct sb_thread *e = reserve(SB_EV_THREAD_NEW, sizeof(*e));

	if (!e)
		return 0;
	e->h.pid = ctgid;
	e->h.tid = BPF_CORE_READ(child, pid);
	e->parent_tid = BPF_CORE_READ(parent, pid);
	e->parent_pid = ptgid;
	BPF_CORE_READ_STR_INTO(&e->comm, child, comm);
	submit(e);
	return 0;
}

/*
 * p, exiting, was still counted as waiting for a CPU since `since`: it is
 * running, so its switch-in was not traced. The runslice that its next
 * switch-out would have written while it was counted (a slice of its own:
 * it ran here since the CPU's last traced switch, and not before its wait
 * began) is written now, before its wait stops counting and its last switch
 * writes none (docs/ARCHITECTURE.md, "Scheduler runs").
 */
static __always_inline void exit_slice(struct task_struct *p, __u32 tgid, __u32 tid, bool direct,
				       __u64 since)
{
	__u32 zero = 0;
	__u64 *cs = bpf_map_lookup_elem(&cpu_start, &zero), now = bpf_ktime_get_ns(), start;

	if (!cs)
		return;
	start = *cs > since ? *cs : since;
	if (start && start < now)
		runslice_write(p, direct, tgid, tid, start, now, 0, 0);
}

static __always_inline int on_exit(struct task_struct *p, bool direct)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);

	if (!is_target_tgid(tgid))
		return 0;
	__u32 tid = BPF_CORE_READ(p, pid);
	/* the process's last thread (signal->live is counted down before this tracepoint) */
	bool last = BPF_CORE_READ(p, signal, live.counter) == 0;
	struct waiting w;
	bool stale = false;

	if (FOLD(direct)) {
		struct tstate *ts = tstate_of(p, false);

		if (ts) {
			stale = end_waiting(ts, tid, &w);
			run_flush(ts);
			/* before the slice below: the trip it ends (a held trip of p's is one) */
			if (__sync_lock_test_and_set(&ts->held, 0))
				held_write(ts);
		}
	} else {
		stale = end_waiting(NULL, tid, &w);
		bpf_map_delete_elem(&wakers, &tid);
	}
	if (stale)
		exit_slice(p, tgid, tid, direct, w.since);
	/* a descendant whose last thread exits is followed no more (its tgid may be reused) */
	if (last && tgid != targ_tgid)
		bpf_map_delete_elem(&followed, &tgid);
	struct sb_thread *e = reserve(SB_EV_THREAD_EXIT, sizeof(*e));

	if (!e)
		return 0;
	e->h.pid = tgid;
	e->h.tid = tid;
	e->parent_tid = 0;
	e->parent_pid = 0;
	BPF_CORE_READ_STR_INTO(&e->comm, p, comm);
	submit(e);
	return 0;
}

static __always_inline int on_rename(struct task_struct *p, const char *comm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);

	if (!is_target_tgid(tgid))
		return 0;
	struct sb_rename *e = reserve(SB_EV_RENAME, sizeof(*e));

	if (!e)
		return 0;
	e->h.pid = tgid;
	e->h.tid = BPF_CORE_READ(p, pid);
	BPF_CORE_READ_STR_INTO(&e->oldcomm, p, comm);
	bpf_probe_read_kernel_str(&e->newcomm, sizeof(e->newcomm), comm);
	submit(e);
	return 0;
}

/*
 * The target exec'd: current is p, with the credentials of the new program.
 * A setuid or setgid program (or one with file capabilities) stops the
 * recording here, before any of its instructions runs; in a followed
 * descendant it ends the following of that process (common.bpf.h).
 */
static __always_inline int on_exec(struct task_struct *p)
{
	if (!is_target_tgid(BPF_CORE_READ(p, tgid)))
		return 0;
	current_creds_same(SB_STOP_EXEC, true);
	return 0;
}

/* tp_btf variants */
SEC("tp_btf/sched_switch")
int BPF_PROG(btf_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch(ctx, true, preempt, prev, next, prev->tgid, prev->pid, next->tgid, next->pid);
}

SEC("tp_btf/sched_waking")
int BPF_PROG(btf_waking, struct task_struct *p)
{
	return on_waking(ctx, p, true);
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(btf_wakeup, struct task_struct *p)
{
	return on_wakeup(p, true, 0);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(btf_wakeup_new, struct task_struct *p)
{
	return on_wakeup(p, true, 1);
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(btf_migrate, struct task_struct *p, int dest_cpu)
{
	return on_migrate(p, dest_cpu, true);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(btf_fork, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(btf_exit, struct task_struct *p)
{
	return on_exit(p, true);
}

SEC("tp_btf/task_rename")
int BPF_PROG(btf_rename, struct task_struct *p, const char *comm)
{
	return on_rename(p, comm);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(btf_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	return on_exec(p);
}

static __always_inline void irq_add(struct task_struct *t, __u64 from, __u64 now, __u64 d,
				    __u32 src, __u32 irq, struct irqaction *action)
{
	struct tstate *ts = tstate_of(t, true);
	__u32 cpu = bpf_get_smp_processor_id();
	struct sb_irq_run *r;

	if (!ts || __sync_val_compare_and_swap(&ts->irq_busy, 0, 1))
		return;
	r = &ts->irq;
	if (r->start_ns && (from > r->h.ts + SB_IRQ_RUN_GAP_NS || now > r->start_ns + SB_IRQ_RUN_SPAN_NS ||
			    r->h.cpu != cpu))
		irq_emit(ts);
	if (!r->start_ns) {
		r->h.type = SB_EV_IRQ_RUN;
		r->h.size = sizeof(*r);
		r->h.cpu = cpu;
		r->h.flags = 0;
		r->h.pid = t->tgid;
		r->h.tid = t->pid;
		r->start_ns = from;
		r->hard_ns = 0;
		r->soft_ns = 0;
		r->hard_count = 0;
		r->soft_count = 0;
		for (int i = 0; i < SB_NSOFTIRQ; i++)
			r->vec_ns[i] = 0;
		r->hard_irq = 0;
		r->sys_count = 0;
		r->hard_name[0] = 0;
		for (int i = 0; i < SB_NSYSIRQ; i++)
			r->sys_ns[i] = 0;
	}
	r->h.ts = now;
	if (src == SB_IRQ_SRC_HARD) {
		r->hard_ns += d;
		r->hard_count++;
		if (d > ts->irq_hard_max && action) {
			ts->irq_hard_max = d;
			r->hard_irq = irq;
			if (bpf_probe_read_kernel_str(r->hard_name, sizeof(r->hard_name), action->name) < 0)
				r->hard_name[0] = 0;
		}
	} else if (src >= SB_IRQ_SRC_SYS) {
		__u32 k = src - SB_IRQ_SRC_SYS;
		__u64 v;

		r->sys_count++;
		if (k < SB_NSYSIRQ) {
			v = r->sys_ns[k] + d;
			r->sys_ns[k] = v > 0xffffffffull ? 0xffffffffu : (__u32)v;
		}
	} else {
		__u64 v;

		r->soft_ns += d;
		r->soft_count++;
		if (src < SB_NSOFTIRQ) {
			v = r->vec_ns[src] + d;
			r->vec_ns[src] = v > 0xffffffffull ? 0xffffffffu : (__u32)v;
		}
	}
	asm volatile("" ::: "memory");
	ts->irq_busy = 0;
}

static __always_inline bool irq_on_target(void)
{
	return is_target_tgid(bpf_get_current_pid_tgid() >> 32);
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(btf_softirq_entry, unsigned int vec)
{
	__u32 zero = 0;
	struct irq_nest *n;

	if (!irq_on_target() || !(n = bpf_map_lookup_elem(&irq_nest, &zero)))
		return 0;
	n->soft_start = bpf_ktime_get_ns();
	n->hard_in_soft = 0;
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(btf_softirq_exit, unsigned int vec)
{
	__u32 zero = 0;
	struct irq_nest *n;
	__u64 now, start, d;

	if (!irq_on_target() || !(n = bpf_map_lookup_elem(&irq_nest, &zero)) || !n->soft_start)
		return 0;
	now = bpf_ktime_get_ns();
	start = n->soft_start;
	n->soft_start = 0;
	if (now <= start)
		return 0;
	d = now - start;
	d = d > n->hard_in_soft ? d - n->hard_in_soft : 0;
	irq_add(bpf_get_current_task_btf(), start, now, d, vec, 0, NULL);
	return 0;
}

/* a hard interrupt (a device's handler, or a system vector) begins on this CPU */
static __always_inline int hard_entry(void)
{
	__u32 zero = 0;
	struct irq_nest *n;

	if (!irq_on_target() || !(n = bpf_map_lookup_elem(&irq_nest, &zero)))
		return 0;
	n->hard_start = bpf_ktime_get_ns();
	return 0;
}

/* ... and ends: its time is src's, not that of a softirq it interrupted */
static __always_inline int hard_exit(__u32 src, __u32 irq, struct irqaction *action)
{
	__u32 zero = 0;
	struct irq_nest *n;
	__u64 now, start;

	if (!irq_on_target() || !(n = bpf_map_lookup_elem(&irq_nest, &zero)) || !n->hard_start)
		return 0;
	now = bpf_ktime_get_ns();
	start = n->hard_start;
	n->hard_start = 0;
	if (now <= start)
		return 0;
	if (n->soft_start)
		n->hard_in_soft += now - start;
	irq_add(bpf_get_current_task_btf(), start, now, now - start, src, irq, action);
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(btf_irq_entry, int irq, struct irqaction *action)
{
	return hard_entry();
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(btf_irq_exit, int irq, struct irqaction *action, int ret)
{
	return hard_exit(SB_IRQ_SRC_HARD, (__u32)irq, action);
}

/*
 * The system interrupts that bypass the handlers above (x86's irq_vectors
 * tracepoints, absent elsewhere): the local timer, the function-call and
 * reschedule IPIs (RPS's kicks, TLB shootdowns, remote wakeups), irq work
 */
SEC("tp_btf/local_timer_entry")
int BPF_PROG(btf_timer_entry, int vector)
{
	return hard_entry();
}

SEC("tp_btf/local_timer_exit")
int BPF_PROG(btf_timer_exit, int vector)
{
	return hard_exit(SB_IRQ_SRC_SYS + SB_SYSIRQ_TIMER, 0, NULL);
}

SEC("tp_btf/call_function_entry")
int BPF_PROG(btf_call_entry, int vector)
{
	return hard_entry();
}

SEC("tp_btf/call_function_exit")
int BPF_PROG(btf_call_exit, int vector)
{
	return hard_exit(SB_IRQ_SRC_SYS + SB_SYSIRQ_CALL, 0, NULL);
}

SEC("tp_btf/call_function_single_entry")
int BPF_PROG(btf_call1_entry, int vector)
{
	return hard_entry();
}

SEC("tp_btf/call_function_single_exit")
int BPF_PROG(btf_call1_exit, int vector)
{
	return hard_exit(SB_IRQ_SRC_SYS + SB_SYSIRQ_CALL, 0, NULL);
}

SEC("tp_btf/reschedule_entry")
int BPF_PROG(btf_resched_entry, int vector)
{
	return hard_entry();
}

SEC("tp_btf/reschedule_exit")
int BPF_PROG(btf_resched_exit, int vector)
{
	return hard_exit(SB_IRQ_SRC_SYS + SB_SYSIRQ_RESCHED, 0, NULL);
}

SEC("tp_btf/irq_work_entry")
int BPF_PROG(btf_work_entry, int vector)
{
	return hard_entry();
}

SEC("tp_btf/irq_work_exit")
int BPF_PROG(btf_work_exit, int vector)
{
	return hard_exit(SB_IRQ_SRC_SYS + SB_SYSIRQ_WORK, 0, NULL);
}

/* raw_tp variants: same bodies, loaded where tp_btf does not */
SEC("raw_tp/sched_switch")
int BPF_PROG(raw_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch(ctx, false, preempt, prev, next, BPF_CORE_READ(prev, tgid), BPF_CORE_READ(prev, pid),
			 BPF_CORE_READ(next, tgid), BPF_CORE_READ(next, pid));
}

SEC("raw_tp/sched_waking")
int BPF_PROG(raw_waking, struct task_struct *p)
{
	return on_waking(ctx, p, false);
}

SEC("raw_tp/sched_wakeup")
int BPF_PROG(raw_wakeup, struct task_struct *p)
{
	return on_wakeup(p, false, 0);
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(raw_wakeup_new, struct task_struct *p)
{
	return on_wakeup(p, false, 1);
}

SEC("raw_tp/sched_migrate_task")
int BPF_PROG(raw_migrate, struct task_struct *p, int dest_cpu)
{
	return on_migrate(p, dest_cpu, false);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(raw_fork, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child);
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(raw_exit, struct task_struct *p)
{
	return on_exit(p, false);
}

SEC("raw_tp/task_rename")
int BPF_PROG(raw_rename, struct task_struct *p, const char *comm)
{
	return on_rename(p, comm);
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(raw_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	return on_exec(p);
}

/*
 * The agent's tick (docs/ARCHITECTURE.md, "Scheduler runs"): every target
 * thread's held trip once it is too long to fold (a thread asleep for long
 * has no switch-in to write it), and its run once idle for sched_run_max_ns;
 * with flush_all set, all of them (the end of the capture).
 */
volatile bool flush_all = false;

/*
 * A task is on its CPU from the switch onto it (after the sched_switch event)
 * until the switch away from it has finished (microseconds after the event
 * that held its trip): a task on a CPU this long after the switch-out that
 * began a held trip was switched in with no event.
 */
#define STALE_HELD_NS 200000ull

struct task_struct___oncpu {
	int on_cpu;
} __attribute__((preserve_access_index));

static __always_inline bool task_on_cpu(struct task_struct *t)
{
	if (!bpf_core_field_exists(struct task_struct___oncpu, on_cpu))
		return false;
	return ((struct task_struct___oncpu *)t)->on_cpu != 0;
}

SEC("iter/task")
int flush_sched(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	struct tstate *ts;
	__u64 now, h;

	if (!t || !is_target_tgid(t->tgid))
		return 0;
	ts = bpf_task_storage_get(&tstate, t, 0, 0);
	if (!ts)
		return 0;
	now = bpf_ktime_get_ns();
	/* its interrupt run, once no interrupt can extend it */
	irq_flush(ts, now, flush_all);
	if (!sched_fold_ns)
		return 0;
	h = ts->held;
	if (h && (flush_all || now - h >= sched_fold_ns) && __sync_lock_test_and_set(&ts->held, 0)) {
		if (ts->out.state == SB_STATE_RUNNABLE && now - h >= STALE_HELD_NS &&
		    task_on_cpu(t)) {
			/*
			 * A preemption, and on a CPU again long after it: its
			 * switch-in was not traced. Dropped, as its next
			 * switch-out would (docs/ARCHITECTURE.md, "Scheduler
			 * runs"); its wait ends there or at its exit. A sleep
			 * is written: it slept.
			 */
			ts->wake_ts = 0;
		} else {
			run_flush(ts);
			held_write(ts);
		}
	}
	if (ts->run.start_ns && (flush_all || now - ts->run.h.ts >= sched_run_max_ns))
		run_flush(ts);
	return 0;
}
