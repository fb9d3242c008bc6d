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

static __always_inline void start_waiting(__u32 tid, __u32 cpu, __u64 now, __u32 reason)
{
	struct waiting w = { .since = now, .cpu = cpu, .reason = reason };

	if (bpf_map_lookup_elem(&waiting, &tid))
		return;
	if (bpf_map_update_elem(&waiting, &tid, &w, BPF_NOEXIST)) {
		count_drop(SB_DROP_MAPFULL);
		return;
	}
	nwait_add(cpu, 1);
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

/*
 * Runs on every context switch of the machine, so the ids come in already
 * read: tp_btf reads them directly, raw_tp through bpf_probe_read (direct:
 * prev and next are trusted pointers, read with plain loads).
 */
static __always_inline int on_switch(void *ctx, bool direct, bool preempt,
				     struct task_struct *prev, struct task_struct *next,
				     __u32 prev_tgid, __u32 prev_tid, __u32 next_tgid, __u32 next_tid)
{
	__u32 zero = 0, cpu = bpf_get_smp_processor_id();
	__u64 now = bpf_ktime_get_ns(), start = 0;
	__u64 *cs = bpf_map_lookup_elem(&cpu_start, &zero);

	if (cs) {
		start = *cs;
		*cs = now;
	}

	/*
	 * Someone ran here while a target thread waited: that is who to blame. The
	 * trainer's own threads count too (a loader preempting the launcher).
	 */
	__s64 *n = bpf_map_lookup_elem(&nwait, &cpu);

	/* a target no longer recorded leaves its waiters counted: nobody waits */
	if (n && *n > 0 && !target_stopped()) {
		__u64 steal = steal_take(cpu, prev, direct);

		if (prev_tid != 0) {
			/* about prev, not its own event: its run is written below, once it passed the filter */
			struct sb_runslice *r = reserve_other(SB_EV_RUNSLICE, sizeof(*r));

			if (r) {
				r->h.pid = prev_tgid;
				r->h.tid = prev_tid;
				r->h.ts = now;
				r->start_ns = start;
				BPF_CORE_READ_STR_INTO(&r->comm, prev, comm);
				r->nwaiting = *n;
				/*
				 * The runqueue's count moves only at its clock updates: the
				 * reading at the start of a wait can be a tick old, and the
				 * change then holds steal from before this slice. None of it
				 * can be more than the slice lasted.
				 */
				if (start && now > start && steal > now - start)
					steal = now - start;
				r->steal_us = steal / 1000 > 0xffffffffULL ? 0xffffffff : steal / 1000;
				submit(r);
			}
		}
	}

	/* prev is the current task: its credentials can be checked */
	if (is_target_tgid(prev_tgid) && current_creds_same(SB_STOP_CRED, false)) {
		__u32 st = task_state(prev);
		__u8 s = classify(preempt, st);
		struct sb_switch_out *o = reserve(SB_EV_SWITCH_OUT, sizeof(*o));

		if (o) {
			o->h.pid = prev_tgid;
			o->h.tid = prev_tid;
			o->h.ts = now;
			o->prev_state = st;
			o->state = s;
			o->pad[0] = o->pad[1] = o->pad[2] = 0;
			o->next_pid = next_tgid;
			o->next_tid = next_tid;
			BPF_CORE_READ_STR_INTO(&o->next_comm, next, comm);
			submit(o);
		}
		if (s == SB_STATE_RUNNABLE) {
			/* the first to wait here: the steal count from now */
			if (!n || *n <= 0)
				steal_take(cpu, prev, direct);
			start_waiting(prev_tid, cpu, now, SB_WAIT_PREEMPTED);
		}
		sleep_stack_out(ctx, prev_tid, now, s == SB_STATE_SLEEP || s == SB_STATE_DISK);
	}

	if (is_target_tgid(next_tgid)) {
		struct waiting *w = bpf_map_lookup_elem(&waiting, &next_tid);
		__u64 wait_ns = 0;
		__u8 reason = SB_WAIT_NONE;

		if (w) {
			wait_ns = now - w->since;
			reason = w->reason;
			nwait_add(w->cpu, -1);
			bpf_map_delete_elem(&waiting, &next_tid);
		}
		struct sb_switch_in *in = reserve(SB_EV_SWITCH_IN, sizeof(*in));

		if (in) {
			in->h.pid = next_tgid;
			in->h.tid = next_tid;
			in->h.ts = now;
			in->wait_ns = wait_ns;
			in->prev_pid = prev_tgid;
			in->prev_tid = prev_tid;
			BPF_CORE_READ_STR_INTO(&in->prev_comm, prev, comm);
			in->wait_reason = reason;
			__builtin_memset(in->pad, 0, sizeof(in->pad));
			submit(in);
		}
		sleep_stack_in(next_tgid, next_tid, now);
	}
	return 0;
}

static __always_inline int on_waking(struct task_struct *p)
{
	if (!is_target_tgid(BPF_CORE_READ(p, tgid)))
		return 0;
	__u32 tid = BPF_CORE_READ(p, pid);
	__u64 id = bpf_get_current_pid_tgid();
	struct waker w = { .pid = id >> 32, .tid = (__u32)id, .cpu = bpf_get_smp_processor_id() };

	bpf_get_current_comm(&w.comm, sizeof(w.comm));
	if (bpf_map_update_elem(&wakers, &tid, &w, BPF_ANY))
		count_drop(SB_DROP_MAPFULL);
	return 0;
}

static __always_inline int on_wakeup(struct task_struct *p, bool direct, __u8 is_new)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);

	if (!is_target_tgid(tgid))
		return 0;
	__u32 tid = BPF_CORE_READ(p, pid);
	__u32 cpu = task_cpu(p);
	__u64 now = bpf_ktime_get_ns();
	__s64 *n = bpf_map_lookup_elem(&nwait, &cpu);

	/* the first to wait there: the steal count from now (p is queued on cpu) */
	if (n && *n <= 0)
		steal_take(cpu, p, direct);
	start_waiting(tid, cpu, now, SB_WAIT_WOKEN);

	struct sb_wakeup *e = reserve(SB_EV_WAKEUP, sizeof(*e));
	struct waker *w = bpf_map_lookup_elem(&wakers, &tid);

	if (!e)
		return 0;
	if (w) {
		e->waker_pid = w->pid;
		e->waker_tid = w->tid;
		e->waker_cpu = w->cpu;
		__builtin_memcpy(e->waker_comm, w->comm, SB_COMM_LEN);
		bpf_map_delete_elem(&wakers, &tid);
	} else {
		/* attached between waking and wakeup, or a new thread: current is the best guess */
		e->waker_pid = e->h.pid;
		e->waker_tid = e->h.tid;
		e->waker_cpu = e->h.cpu;
		bpf_get_current_comm(&e->waker_comm, sizeof(e->waker_comm));
	}
	e->h.pid = tgid;
	e->h.tid = tid;
	e->h.cpu = cpu;
	e->h.ts = now;
	e->is_new = is_new;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	submit(e);
	return 0;
}

static __always_inline int on_migrate(struct task_struct *p, int dest)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);

	if (!is_target_tgid(tgid))
		return 0;
	__u32 tid = BPF_CORE_READ(p, pid);
	__u32 orig = task_cpu(p), dcpu = dest;
	struct waiting *w = bpf_map_lookup_elem(&waiting, &tid);

	if (w && w->cpu != dcpu) {
		nwait_add(w->cpu, -1);
		nwait_add(dcpu, 1);
		w->cpu = dcpu;
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

static __always_inline int on_exit(struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);

	if (!is_target_tgid(tgid))
		return 0;
	__u32 tid = BPF_CORE_READ(p, pid);
	/* the process's last thread (signal->live is counted down before this tracepoint) */
	bool last = BPF_CORE_READ(p, signal, live.counter) == 0;
	struct waiting *w = bpf_map_lookup_elem(&waiting, &tid);

	if (w) {
		nwait_add(w->cpu, -1);
		bpf_map_delete_elem(&waiting, &tid);
	}
	bpf_map_delete_elem(&wakers, &tid);
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
	return on_waking(p);
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
	return on_migrate(p, dest_cpu);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(btf_fork, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(btf_exit, struct task_struct *p)
{
	return on_exit(p);
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
	return on_waking(p);
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
	return on_migrate(p, dest_cpu);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(raw_fork, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child);
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(raw_exit, struct task_struct *p)
{
	return on_exit(p);
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
