/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Shared by every probe family: the ring buffer, the drop counters, the target
 * filter and the submit policy. Each family is its own skeleton; the agent
 * creates these maps once (in the sched skeleton) and hands the same fds to
 * the others with bpf_map__reuse_fd, so all events land in one ring buffer.
 */
#ifndef STEPBLAME_COMMON_BPF_H
#define STEPBLAME_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "events.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* set by the agent between open and load */
const volatile __u32 targ_tgid = 0;
/* wake the reader when this many bytes are waiting (0: when the first one arrives) */
const volatile __u64 wake_bytes = 0;
/* no stack copies while more than this is waiting (the ring's eighth; 0: none) */
const volatile __u64 copy_backlog_bytes = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20); /* resized by the agent */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SB_EV_KERNEL_MAX + 2);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

/*
 * last index of drops: a state map (hash) was full. Index SB_RING_STACK (a
 * type only the ring carries) counts the stack copies not taken because the
 * ring was backed up; the agent takes it out of the drops record.
 */
#define SB_DROP_MAPFULL (SB_EV_KERNEL_MAX + 1)

static __always_inline void count_drop(__u32 type)
{
	__u64 *c = bpf_map_lookup_elem(&drops, &type);

	if (c)
		(*c)++;
}

/*
 * The target's credentials when the agent attached, in struct cred's order:
 * uid, gid, suid, sgid, euid, egid, fsuid, fsgid; and its permitted
 * capabilities. targ_creds_known false: the agent could not read them and
 * nothing is compared.
 */
const volatile __u32 targ_ids[8] = {};
const volatile __u64 targ_cap_prm = 0;
const volatile bool targ_creds_known = false;

/*
 * Recording stops for good once a target thread runs with other credentials
 * (a setuid or setgid program exec'd, setuid() called): nothing of the
 * privileged program may reach the trace. One entry, shared by every family
 * like events and drops; the agent reads it every tick. Mirrored in
 * user/capture/probes_internal.h (struct target_state_v).
 */
struct target_state {
	__u64 stopped;      /* non-zero: the filter turns every target event away */
	__u64 stop_ns;      /* when; written last, after the fields below */
	__u32 tid;          /* the thread seen with other credentials */
	__u32 how;          /* SB_STOP_* */
	__u32 ids[8];       /* its credentials then, in targ_ids' order */
	__u64 cap_prm;
};

#define SB_STOP_EXEC 1      /* seen when the thread exec'd */
#define SB_STOP_CRED 2      /* seen on an event of the thread (setuid() and the like) */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct target_state);
} target_state SEC(".maps");

/*
 * The target's descendants (SECURITY.md, "Child processes"): with
 * follow_children set, every process forked by a followed one is followed
 * too, from its fork to the exit of its last thread. The agent adds the
 * descendants it finds at attach. Shared by every family like events.
 */
const volatile bool follow_children = false;

struct followed_proc {
	__u32 parent;       /* the tgid it was forked by */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096); /* descendants at once; a fork past it is counted in drops */
	__type(key, __u32);
	__type(value, struct followed_proc);
} followed SEC(".maps");

/*
 * Non-zero once any descendant was followed: until then the filter never
 * looks in followed (an array lookup is a load, a hash lookup hashes).
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} follow_any SEC(".maps");

static __always_inline bool target_stopped(void)
{
	__u32 zero = 0;
	struct target_state *s = bpf_map_lookup_elem(&target_state, &zero);

	return s && s->stopped;
}

/* cap_permitted before Linux 6.3: two 32-bit words */
struct kernel_cap_struct___old {
	__u32 cap[2];
} __attribute__((preserve_access_index));

struct cred___old {
	struct kernel_cap_struct___old cap_permitted;
} __attribute__((preserve_access_index));

/* the 8 ids of cred c into ids; 0 or a negative error */
static __always_inline long cred_ids(const struct cred *c, __u32 ids[8])
{
	__u32 first = bpf_core_field_offset(struct cred, uid);

	/* one read where they lie together, as they have since Linux 2.6.29 */
	if (bpf_core_field_offset(struct cred, fsgid) == first + 28 &&
	    bpf_core_field_offset(struct cred, euid) == first + 16)
		return bpf_probe_read_kernel(ids, 8 * sizeof(__u32), (const void *)c + first);
	ids[0] = BPF_CORE_READ(c, uid.val);
	ids[1] = BPF_CORE_READ(c, gid.val);
	ids[2] = BPF_CORE_READ(c, suid.val);
	ids[3] = BPF_CORE_READ(c, sgid.val);
	ids[4] = BPF_CORE_READ(c, euid.val);
	ids[5] = BPF_CORE_READ(c, egid.val);
	ids[6] = BPF_CORE_READ(c, fsuid.val);
	ids[7] = BPF_CORE_READ(c, fsgid.val);
	return 0;
}

static __always_inline __u64 cred_cap_prm(const struct cred *c)
{
	if (bpf_core_field_exists(c->cap_permitted.val))
		return BPF_CORE_READ(c, cap_permitted.val);
	const struct cred___old *o = (const void *)c;

	return BPF_CORE_READ(o, cap_permitted.cap[0]) |
	       (__u64)BPF_CORE_READ(o, cap_permitted.cap[1]) << 32;
}

/* stop recording the target: the first caller says why */
static __always_inline void stop_target(__u32 how, const __u32 ids[8], __u64 cap)
{
	__u32 zero = 0;
	struct target_state *s = bpf_map_lookup_elem(&target_state, &zero);

	if (!s || __sync_val_compare_and_swap(&s->stopped, 0, 1) != 0)
		return;
	s->tid = (__u32)bpf_get_current_pid_tgid();
	s->how = how;
	for (int i = 0; i < 8; i++)
		s->ids[i] = ids[i];
	s->cap_prm = cap;
	__sync_fetch_and_add(&s->stop_ns, bpf_ktime_get_ns());
}

/*
 * Does the current task (a thread of the target) still run with the
 * credentials the target had at attach? Its objective credentials
 * (real_cred): those another task acts upon it with; the subjective ones
 * may be overridden for a moment (access(2), kernel threads' work). with_caps:
 * also that it gained no permitted capability (which only an exec does).
 * False, and recording stopped, when they differ.
 */
static __always_inline bool current_creds_same(__u32 how, bool with_caps)
{
	__u32 ids[8];
	__u64 cap = 0;
	bool same = true;

	if (!targ_creds_known)
		return true;
	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_current_task_btf)) {
		/*
		 * Linux 5.11+: plain loads through the task's BTF pointer, a few
		 * nanoseconds, where two bpf_probe_read_kernel calls cost tens:
		 * this runs on every event of the target
		 */
		const struct cred *c = bpf_get_current_task_btf()->real_cred;

		ids[0] = c->uid.val;
		ids[1] = c->gid.val;
		ids[2] = c->suid.val;
		ids[3] = c->sgid.val;
		ids[4] = c->euid.val;
		ids[5] = c->egid.val;
		ids[6] = c->fsuid.val;
		ids[7] = c->fsgid.val;
		if (with_caps)
			cap = cred_cap_prm(c);
	} else {
		struct task_struct *t = (struct task_struct *)bpf_get_current_task();
		const struct cred *c = BPF_CORE_READ(t, real_cred);

		/* an unreadable cred tells nothing: the target's events go on */
		if (!c || cred_ids(c, ids))
			return true;
		if (with_caps)
			cap = cred_cap_prm(c);
	}
	for (int i = 0; i < 8; i++)
		if (ids[i] != targ_ids[i])
			same = false;
	if (with_caps && (cap & ~targ_cap_prm))
		same = false;
	if (!same) {
		__u32 tgid = bpf_get_current_pid_tgid() >> 32;

		/*
		 * A descendant is no longer followed; the target itself stops
		 * the recording (SECURITY.md, "Child processes")
		 */
		/*
		 * A setuid exec commits the new credentials before its exec
		 * tracepoint: an event of the thread in between (preempted, a
		 * fault) is still that exec
		 */
		if (how == SB_STOP_CRED &&
		    bpf_core_field_exists(struct task_struct, in_execve)) {
			struct task_struct *t = (struct task_struct *)bpf_get_current_task();

			if (BPF_CORE_READ_BITFIELD_PROBED(t, in_execve))
				how = SB_STOP_EXEC;
		}
		if (tgid != targ_tgid)
			bpf_map_delete_elem(&followed, &tgid);
		else
			stop_target(how, ids, cap);
	}
	return same;
}

static __always_inline bool is_followed_child(__u32 tgid)
{
	__u32 zero = 0;
	__u64 *any;

	if (!follow_children)
		return false;
	any = bpf_map_lookup_elem(&follow_any, &zero);
	if (!any || !*any)
		return false;
	return bpf_map_lookup_elem(&followed, &tgid) != NULL;
}

/*
 * The target filter. The tgid comes first: other processes' events pay for
 * nothing else but, when children are followed and one ever was, a lookup
 * in followed (bench/RESULTS.md). A target whose recording stopped is no
 * target, and none of its descendants are.
 */
static __always_inline bool is_target_tgid(__u32 tgid)
{
#ifdef SB_BENCH_HOLLOW
	/*
	 * A measuring build (make BPF_EXTRA=-DSB_BENCH_HOLLOW, bench/floor.py):
	 * every program returns at the filter, so what such a capture costs a
	 * target is the hooks themselves, the same for any tracer of these events
	 */
	return false;
#endif
	if (tgid == targ_tgid)
		return !target_stopped();
	return is_followed_child(tgid) && !target_stopped();
}

/*
 * For programs that run in the context of the task they record: also checks
 * that its credentials did not change (at most two reads of kernel memory).
 */
static __always_inline bool current_is_target(void)
{
	return is_target_tgid(bpf_get_current_pid_tgid() >> 32) &&
	       current_creds_same(SB_STOP_CRED, false);
}

/*
 * Submit, waking the reader only when this record makes the backlog cross the
 * threshold: once across, the reader is already awake (or its 100 ms timer
 * is due), and waking it for every further record would raise an interrupt
 * per event on the traced CPU.
 */
static __always_inline void submit(void *rec)
{
	__u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	/* what the record takes in the ring: its size plus the ring's 8-byte header */
	__u64 size = ((struct sb_hdr *)rec)->size + 8;
	__u64 flags = BPF_RB_NO_WAKEUP;

	/* avail already counts this record: it was reserved */
	if (avail >= wake_bytes && avail < wake_bytes + size)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(rec, flags);
}

/*
 * Page-fault runs (docs/ARCHITECTURE.md, "Page-fault runs"). The fault probe
 * (bpf/mem.bpf.c) keeps a thread's back-to-back faults in a slot of its CPU
 * and writes them as one record when the run ends: at the next fault that
 * does not extend it, before any other record of that thread (reserve()
 * below: the record's subject is the current thread, and a faulting thread
 * is on that CPU until it leaves it, which writes a switch-out record), and
 * from the CPU sample once the last fault is over fault_idle_ns old.
 * Shared by every family like events.
 */
const volatile __u64 fault_run_gap_ns = 1000000;   /* the engine's FAULT_RUN_NS */
const volatile __u64 fault_run_max_ns = 100000000; /* a run older than this ends */
const volatile __u64 fault_idle_ns = 1000000;      /* the sample ends a run idle this long */
/*
 * A dense run (its faults under fault_dense_ns apart, measured between timed
 * faults) reads the clock at one fault in FAULT_UNTIMED + 1 only: the others
 * extend it without a time (the clock read is most of a fault's probe time).
 * The timed fault checks the stretch as one gap (fault_run_gap_ns, no looser
 * than a gap per fault); the run's end after untimed faults is estimated from
 * its average gap (fault_run_end).
 */
const volatile __u64 fault_dense_ns = 50000;
#define FAULT_UNTIMED 7

struct fault_slot {
	__u32 tid, pid;
	__u64 first, last, count;  /* last: the last timed fault */
	__u64 addr, last_addr, lo, hi, ip, error_code;
	__u64 maj0, min0, maj, min;
	__u32 busy;            /* being written: a nested program leaves it alone */
	__u16 untimed;         /* faults since the last timed one */
	__u8 dense;            /* the last timed stretch was dense: the next faults may go untimed */
	__u8 stacked;          /* the run has its stack */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fault_slot);
} fault_slot SEC(".maps");

/*
 * reserve a record of type t about the current task at now on cpu (both
 * already read: no second clock read); NULL (and counted) when full
 */
static __always_inline void *reserve_at(__u32 type, __u32 size, __u32 cpu, __u64 now)
{
	struct sb_hdr *h = bpf_ringbuf_reserve(&events, size, 0);

	if (!h) {
		count_drop(type);
		return NULL;
	}
	__u64 id = bpf_get_current_pid_tgid();

	h->type = type;
	h->size = size;
	h->cpu = cpu;
	h->flags = 0;
	h->pid = id >> 32;
	h->tid = (__u32)id;
	h->ts = now;
	return h;
}

/*
 * reserve a record, its header naming the current task now, with no fault run
 * written first: its subject is another thread, or a run being written itself
 * (the caller sets pid, tid and ts)
 */
static __always_inline void *reserve_other(__u32 type, __u32 size)
{
	return reserve_at(type, size, bpf_get_smp_processor_id(), bpf_ktime_get_ns());
}

/*
 * The run's last fault: its last timed one, or after untimed faults, that
 * many of the run's average gaps later, never after now (the record being
 * written: the faults came before it).
 */
static __always_inline __u64 fault_run_end(const struct fault_slot *s, __u64 n, __u64 now)
{
	__u64 end = s->last, timed = n - s->untimed;

	if (s->untimed && timed >= 2 && s->last > s->first) {
		end += (s->last - s->first) / (timed - 1) * s->untimed;
		if (end > now)
			end = now > s->last ? now : s->last;
	}
	return end;
}

/*
 * Write the run in slot s (one fault: a fault record, else a fault_run
 * record) and empty it. Dropped when its process is no longer recorded: the
 * faults after the probe stopped checking its credentials are not written.
 */
static __always_inline void fault_flush(struct fault_slot *s)
{
	if (!s->count || s->busy)
		return;
	s->busy = 1;
	asm volatile("" ::: "memory");
	__u64 n = s->count;

	s->count = 0;
	if (!n || !is_target_tgid(s->pid))
		goto out;
	if (n == 1) {
		struct sb_fault *e = reserve_other(SB_EV_FAULT, sizeof(*e));

		if (!e)
			goto out;
		e->h.pid = s->pid;
		e->h.tid = s->tid;
		e->h.ts = s->first;
		e->addr = s->addr;
		e->ip = s->ip;
		e->error_code = s->error_code;
		e->maj_flt = s->maj0;
		e->min_flt = s->min0;
		submit(e);
	} else {
		struct sb_fault_run *e = reserve_other(SB_EV_FAULT_RUN, sizeof(*e));

		if (!e)
			goto out;
		e->h.pid = s->pid;
		e->h.tid = s->tid;
		e->h.ts = fault_run_end(s, n, e->h.ts);
		e->start_ns = s->first;
		e->count = n;
		e->addr = s->addr;
		e->last_addr = s->last_addr;
		e->lo_addr = s->lo;
		e->hi_addr = s->hi;
		e->ip = s->ip;
		e->error_code = s->error_code;
		e->first_maj_flt = s->maj0;
		e->first_min_flt = s->min0;
		e->maj_flt = s->maj;
		e->min_flt = s->min;
		submit(e);
	}
out:
	asm volatile("" ::: "memory");
	s->busy = 0;
}

/* the run of thread tid, if its CPU's slot holds one, is written */
static __always_inline void fault_flush_tid(__u32 tid)
{
	__u32 zero = 0;
	struct fault_slot *s = bpf_map_lookup_elem(&fault_slot, &zero);

	if (s && s->count && s->tid == tid)
		fault_flush(s);
}

/*
 * Scheduler runs (docs/ARCHITECTURE.md, "Scheduler runs"). A target thread's
 * trip off its CPU (a switch-out asleep or preempted, a wakeup, the switch-in)
 * shorter than sched_fold_ns writes no record: bpf/sched.bpf.c holds its
 * switch-out and wakeup records in the thread's storage until its switch-in
 * says how long it was, and sums a short one into the thread's run, written
 * as one sched_run record: before any other record of the thread (reserve()
 * below), when a trip does not fit the run, and from the agent's tick once
 * the run is idle. 0: off (the raw_tp variant, kernels without task storage,
 * --no-fold), every trip written as before. Shared by every family like
 * events.
 */
const volatile __u64 sched_fold_ns = 0;
const volatile __u64 sched_run_max_ns = 1000000;  /* a run's first trip starts at most this before its last */

/* a thread's user stack at its last sleep, for a long one (sleep_stack_out below) */
struct sleep_stash {
	__u64 last_out;        /* the thread's last switch-out */
	__u64 cap_out;         /* the switch-out the stack was taken at, 0: none pending */
	__u64 next_cap;        /* no capture before this time */
	__u32 nframes;
	__u32 last_long;       /* its last trip off the CPU lasted offcpu_min_ns or more */
	__u32 asleep;          /* it left the CPU at last_out to sleep (S or D) */
	__u32 pad;
	__u64 ip[SB_STACK_MAX];
};

/* a call in progress: mmap family (call = enum sb_mm_call) or I/O (IO_CALL | enum sb_io_call) */
struct mm_call {
	__u64 start;           /* 0: none (in tstate) */
	__u64 addr;            /* I/O: the fd */
	__u64 len;
	__u32 call;
	__u32 arg;
	__u32 flags;           /* mmap: its flags and fd */
	__s32 fd;
};

struct tstate {
	__u64 held;            /* the switch-out of the trip held back (0: none); taken by exchange */
	__u64 wake_ts;         /* its wakeup, held in wk (0: none); taken by exchange */
	__u64 wait_since;      /* runnable, not running, since (0: not waiting) */
	__u32 wait_cpu;
	__u32 wait_reason;     /* enum sb_wait_reason */
	__u32 waker_pid;       /* the last sched_waking of the thread, when waker_set */
	__u32 waker_tid;
	__u32 waker_cpu;
	__u32 waker_set;
	char waker_comm[SB_COMM_LEN];
	__u64 run_busy;        /* the run is being written (64-bit: exchanged on every BPF ISA) */
	struct sb_switch_out out;  /* the held switch-out */
	struct sb_wakeup wk;       /* the held wakeup */
	struct sb_sched_run run;   /* the run so far; run.start_ns 0: none */
	struct sleep_stash ss;     /* its sleep stack (the sleep_stacks map's entry, here) */
	struct mm_call mm;         /* its system call in progress (mem.bpf.c, mm_in_task) */
	struct sb_irq_run irq;     /* its interrupt run so far (sched.bpf.c); irq.start_ns 0: none */
	__u64 irq_busy;            /* the interrupt run is being changed or written (exchanged) */
	__u64 irq_hard_max;        /* the longest hard interrupt of the run, whose name irq holds */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tstate);
} tstate SEC(".maps");

/* copy a held record of size bytes (a constant) into the ring */
static __always_inline void emit_copy(const void *src, __u32 size, __u32 type)
{
	void *r = bpf_ringbuf_reserve(&events, size, 0);

	if (!r) {
		count_drop(type);
		return;
	}
	__builtin_memcpy(r, src, size);
	submit(r);
}

/*
 * Write s's run, if it has one and nobody else is writing it. Dropped when its
 * process is no longer recorded (a change of credentials stopped it).
 */
static __always_inline void run_flush(struct tstate *s)
{
	if (!s->run.start_ns || __sync_val_compare_and_swap(&s->run_busy, 0, 1))
		return;
	if (s->run.start_ns && is_target_tgid(s->run.h.pid))
		emit_copy(&s->run, sizeof(s->run), SB_EV_SCHED_RUN);
	s->run.start_ns = 0;
	asm volatile("" ::: "memory");
	s->run_busy = 0;
}

/*
 * reserve a record of type t for the current task; NULL (and counted) when
 * full. The current thread's fault run and scheduler run, if any, are
 * written first.
 */
static __always_inline void flush_current(void)
{
	fault_flush_tid((__u32)bpf_get_current_pid_tgid());
	if (sched_fold_ns) {
		struct tstate *s = bpf_task_storage_get(&tstate, bpf_get_current_task_btf(), 0, 0);

		if (s && s->run.start_ns)
			run_flush(s);
	}
}

static __always_inline void *reserve(__u32 type, __u32 size)
{
	flush_current();
	return reserve_other(type, size);
}

/*
 * User stacks at the events that make tail steps (docs/ARCHITECTURE.md,
 * "Stacks"). One per thread per stack_gap_ns at most (stack_fault_gap_ns for
 * page faults, which come in bursts), so a burst costs one capture, not one
 * per event. The table is per probe family; an entry is a few bytes per
 * thread and the LRU forgets threads that stopped.
 *
 * A fault run gets its stack once it has lasted stack_fault_run_ns (at a
 * timed fault, inside the burst); at its first fault only where the thread
 * had no fault stack for stack_fault_start_gap_ns: a thread faulting all the
 * time starts hundreds of short runs a second, and a capture costs more than
 * many faults (bench/RESULTS.md, section 28).
 *
 * A slow call that repeats (the same event type and call as the thread's
 * last stack of a non-fault event, less than stack_repeat_ns after it, and
 * not twice as slow) is a repeat: it has no stack of its own. A thread whose
 * every madvise() or read() is slow pays one capture per stack_repeat_ns for
 * them; an isolated slow call, or one far slower than the last, has its own.
 */
const volatile bool stacks_on = false;
const volatile __u64 stack_gap_ns = 100000;
const volatile __u64 stack_fault_gap_ns = 1000000;
const volatile __u64 stack_fault_run_ns = 2000000;
const volatile __u64 stack_fault_start_gap_ns = 100000000;
const volatile __u64 stack_repeat_ns = 16000000;

struct stack_next {
	__u64 other;           /* no stack of a non-fault event before this time */
	__u64 fault;           /* no fault stack before this time */
	__u64 repeat_until;    /* a repeat of the last non-fault stack's call before this time, */
	__u64 repeat_ns;       /* lasting less than this (twice that call), has no stack */
	__u32 repeat_type;     /* that call: its event type */
	__u32 repeat_what;     /* and its call (enum sb_mm_call, sb_io_call, sb_alloc_fn) */
	__u64 copy;            /* stack copies of events: when the last one's turn ends (below) */
	__u64 sample_copy;     /* the same for CPU samples' */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct stack_next);
} stack_rate SEC(".maps");

/* how far above the stack pointer a frame may lie: the default thread stack */
#define USER_STACK_SPAN (8ULL << 20)

/* a 32-bit task's user mode (x86-64: its code segment; arm64: AArch32 state) */
static __always_inline bool user_mode_32(struct pt_regs *r)
{
#if defined(__TARGET_ARCH_x86)
	return BPF_CORE_READ(r, cs) == 0x23; /* __USER32_CS */
#elif defined(__TARGET_ARCH_arm64)
	return BPF_CORE_READ((struct user_pt_regs *)r, pstate) & 0x10; /* PSR_MODE32_BIT */
#else
	return false;
#endif
}

/*
 * The frame-pointer walk of a 64-bit thread's user stack from r, the user
 * registers it entered the kernel with, through the current task's address
 * space (the thread's own, or one it shares): ip[0] is r's instruction
 * pointer, then the return address of each frame (user_stack below).
 */
static __always_inline __u32 user_walk(struct pt_regs *r, __u64 *ip)
{
	__u64 sp = PT_REGS_SP_CORE(r), fp = PT_REGS_FP_CORE(r);
	__u32 n = 1;

	ip[0] = PT_REGS_IP_CORE(r);
	for (__u32 i = 1; i < SB_STACK_MAX; i++) {
		__u64 frame[2]; /* the caller's frame pointer, the return address */

		if (!fp || (fp & 7) || fp < sp || fp - sp > USER_STACK_SPAN)
			break;
		if (bpf_probe_read_user(frame, sizeof(frame), (void *)fp) || !frame[1])
			break;
		ip[i] = frame[1];
		n = i + 1;
		if (frame[0] <= fp)
			break;
		fp = frame[0];
	}
	return n;
}

/*
 * The current thread's user stack into ip[0..SB_STACK_MAX), innermost first:
 * the instruction pointer it entered the kernel with, then the return address
 * of each frame on its frame-pointer chain. Returns the frames written.
 *
 * The walk of bpf_get_stack reads the frame at every frame pointer it meets:
 * the 0 that ends every chain, and whatever a function built without frame
 * pointers left in the register. Each such read faults, and a fault taken in
 * the kernel costs microseconds on a guest whose page tables the hypervisor
 * keeps (docs/ARCHITECTURE.md, "Stacks"). This walk reads only what can be a
 * frame of this stack: 8-byte aligned, at or above the stack pointer and
 * within USER_STACK_SPAN of it, each frame above the one before. Before
 * Linux 5.15 (no bpf_task_pt_regs), and for a 32-bit task, the kernel's walk.
 */
static __always_inline __u32 user_stack(void *ctx, __u64 *ip)
{
	struct pt_regs *r = NULL;

	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs))
		r = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (!r || user_mode_32(r)) {
		/* before Linux 5.15, or 4-byte frames: the kernel's walk */
		long got = bpf_get_stack(ctx, ip, SB_STACK_MAX * sizeof(__u64), BPF_F_USER_STACK);

		return got > 0 ? (__u32)got / 8 : 0;
	}
	return user_walk(r, ip);
}

/*
 * Stack copies (docs/ARCHITECTURE.md, "Stacks"). Where frame pointers are
 * missing (a distribution's Python, libtorch) the chain ends after a frame or
 * two. With stack_copy_on, a stack record also carries the thread's user
 * registers and the pages of its stack from the stack pointer's up, at most
 * SB_STACK_COPY_PAGES (SB_RING_STACK); the agent walks them by the code's
 * call-frame information. Copies are rationed per thread, a turn of gap_ns
 * each with a burst of stack_copy_burst (a generic cell rate: next is when
 * the turns taken so far end): the write before a slow fsync does not leave
 * the fsync without one, and a thread takes 1 s / gap_ns a second at most.
 * Events' stacks and CPU samples' have a ration each (a sample every 10 ms
 * would take all of one). The stacks without a copy have the frame-pointer
 * chain only. x86-64 only.
 */
#ifndef SB_STACK_COPY_GAP_NS /* a measuring build sets it (bench/stackcost.py) */
#define SB_STACK_COPY_GAP_NS 20000000
#endif
const volatile bool stack_copy_on = false;
const volatile __u64 stack_copy_gap_ns = SB_STACK_COPY_GAP_NS; /* events': 50 a second */
const volatile __u64 sample_copy_gap_ns = 100000000;      /* samples': 10 a second */
const volatile __u64 stack_copy_burst = 4;

/*
 * An event of stack_copy_slow_ns or more has a copy outside the ration: it
 * costs under 1% of the event, and a thread has at most 1000 such a second.
 */
const volatile __u64 stack_copy_slow_ns = 1000000;

/*
 * a copy is due at now for an event that took dur, whose ration's turns end
 * at next (0: none taken)
 */
static __always_inline bool stack_copy_due(__u64 next, __u64 gap_ns, __u64 now, __u64 dur)
{
#if defined(__TARGET_ARCH_x86)
	return stack_copy_on &&
	       (dur >= stack_copy_slow_ns || next <= now + (stack_copy_burst - 1) * gap_ns);
#else
	return false;
#endif
}

/* the ration's end after a copy at now */
static __always_inline __u64 stack_copy_taken(__u64 next, __u64 gap_ns, __u64 now)
{
	return (next > now ? next : now) + gap_ns;
}

/*
 * The user registers and the stack pages of the current thread into c: whole
 * pages from the one holding the stack pointer up, until one cannot be read
 * (the top of the stack). False where there is nothing to walk.
 */
static __always_inline bool stack_copy_fill(struct sb_stack_copy *c)
{
#if defined(__TARGET_ARCH_x86)
	struct pt_regs *r = NULL;

	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs))
		r = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (!r || user_mode_32(r))
		return false;
	/* r is a trusted pointer (bpf_task_pt_regs): plain loads, no helper call each */
	c->regs[0] = r->ax;
	c->regs[1] = r->dx;
	c->regs[2] = r->cx;
	c->regs[3] = r->bx;
	c->regs[4] = r->si;
	c->regs[5] = r->di;
	c->regs[6] = r->bp;
	c->regs[7] = r->sp;
	c->regs[8] = r->r8;
	c->regs[9] = r->r9;
	c->regs[10] = r->r10;
	c->regs[11] = r->r11;
	c->regs[12] = r->r12;
	c->regs[13] = r->r13;
	c->regs[14] = r->r14;
	c->regs[15] = r->r15;
	c->regs[16] = r->ip;
	c->base = c->regs[7] & ~4095ULL;
	c->pages = 0;
	/*
	 * A main thread's frames all lie below the stack pointer it started with
	 * (mm->start_stack): the pages from there up hold its arguments and
	 * environment, then the end of the stack, where a read would fault (a
	 * fault taken in the kernel costs microseconds on a guest:
	 * bench/RESULTS.md, section 29). Other threads' reads stop at the first
	 * page that cannot be read.
	 */
	__u64 id = bpf_get_current_pid_tgid(), top = ~0ULL;

	if ((__u32)id == (__u32)(id >> 32)) {
		struct task_struct *t = bpf_get_current_task_btf();
		__u64 ss = BPF_CORE_READ(t, mm, start_stack);

		if (ss > c->base)
			top = ss;
	}
	for (__u32 i = 0; i < SB_STACK_COPY_PAGES; i++) {
		if (c->base + i * 4096 >= top ||
		    bpf_probe_read_user(c->data + i * 4096, 4096, (void *)(c->base + i * 4096)))
			break;
		c->pages = i + 1;
	}
	return c->pages > 0;
#else
	return false;
#endif
}

/*
 * Fill stack record st with the current thread's user stack, for the event
 * of type ev_type at ev_ts (start: its start, or ev_ts).
 */
static __always_inline void stack_fill(void *ctx, struct sb_stack *st, __u32 ev_type, __u64 start,
				       __u64 ev_ts)
{
	st->h.ts = ev_ts;
	st->ev_start_ns = start;
	st->ev_type = ev_type;
	st->nframes = user_stack(ctx, st->ip);
	if (st->nframes >= SB_STACK_MAX)
		st->h.flags = SB_STACK_TRUNCATED;
	/* frames past nframes are uninitialised ring memory: clear them */
	for (__u32 i = 0; i < SB_STACK_MAX; i++)
		if (i >= st->nframes)
			st->ip[i] = 0;
}

/*
 * A stack record of the current thread with a copy of its stack
 * (SB_RING_STACK), for the event of type ev_type at ev_ts (start: its start).
 * False if the ring had no room for it.
 */
static __always_inline bool write_stack_copy(void *ctx, __u32 ev_type, __u64 start, __u64 ev_ts)
{
	struct sb_stack_copy *c;
	__u64 id = bpf_get_current_pid_tgid();

	/*
	 * The agent behind (stopped, starved): no copy once the backlog passes an
	 * eighth of the ring, whose room is then the other records' (a 12.8 KiB
	 * copy is forty of them)
	 */
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > copy_backlog_bytes) {
		/* not a drop (the plain record goes out): counted for the agent's note */
		count_drop(SB_RING_STACK);
		return false;
	}
	c = bpf_ringbuf_reserve(&events, sizeof(*c), 0);
	if (!c)
		return false;
	c->st.h.type = SB_EV_STACK;
	c->st.h.size = sizeof(c->st);
	c->st.h.cpu = bpf_get_smp_processor_id();
	c->st.h.flags = 0;
	c->st.h.pid = id >> 32;
	c->st.h.tid = (__u32)id;
	stack_fill(ctx, &c->st, ev_type, start, ev_ts);
	c->h = c->st.h;
	c->h.type = SB_RING_STACK;
	c->h.size = sizeof(*c);
	if (!stack_copy_fill(c))
		c->pages = 0;
	c->pad = 0;
	submit(c);
	return true;
}

/*
 * Write the current thread's user stack for the event of type ev_type at
 * ev_ts (start: its start, or ev_ts): with a copy of its stack where copy
 * (and the ring has room for one), else the frame-pointer chain alone.
 * other: the record's subject is not the current thread's next event (a CPU
 * sample: no fault run is written first). 2 if a copy went out, 1 the chain
 * alone, 0 nothing (the ring full).
 */
static __always_inline int write_stack(void *ctx, __u32 ev_type, __u64 start, __u64 ev_ts,
					bool copy, bool other)
{
	struct sb_stack *st;

	if (copy) {
		if (!other)
			flush_current();
		/* a copy that finds no room is not a drop: the plain record below tries */
		if (write_stack_copy(ctx, ev_type, start, ev_ts))
			return 2;
	}
	st = other ? reserve_other(SB_EV_STACK, sizeof(*st)) : reserve(SB_EV_STACK, sizeof(*st));
	if (!st)
		return 0;
	stack_fill(ctx, st, ev_type, start, ev_ts);
	submit(st);
	return 1;
}

/*
 * Emit the current thread's user stack for the event of type ev_type (its
 * call: what) that was just submitted with timestamp ev_ts (start: its start,
 * or ev_ts). The walk follows frame pointers only (docs/ARCHITECTURE.md,
 * "Stacks").
 */
static __always_inline void emit_stack(void *ctx, __u32 ev_type, __u32 what, __u64 start,
				       __u64 ev_ts)
{
	if (!stacks_on)
		return;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct stack_next *n = bpf_map_lookup_elem(&stack_rate, &tid);
	bool fault = ev_type == SB_EV_FAULT;
	__u64 dur = ev_ts - start;

	if (n && ev_ts < (fault ? n->fault : n->other))
		return;
	if (n && !fault && ev_ts < n->repeat_until && dur < n->repeat_ns &&
	    ev_type == n->repeat_type && what == n->repeat_what)
		return;
	int wrote = write_stack(ctx, ev_type, start, ev_ts,
				stack_copy_due(n ? n->copy : 0, stack_copy_gap_ns, ev_ts, dur), false);

	if (!wrote)
		return;
	struct stack_next v = {};

	if (n)
		v = *n;
	if (wrote == 2 && dur < stack_copy_slow_ns)
		v.copy = stack_copy_taken(v.copy, stack_copy_gap_ns, ev_ts);
	if (fault) {
		v.fault = ev_ts + stack_fault_gap_ns;
	} else {
		v.other = ev_ts + stack_gap_ns;
		v.repeat_until = ev_ts + stack_repeat_ns;
		v.repeat_ns = 2 * dur;
		v.repeat_type = ev_type;
		v.repeat_what = what;
	}
	if (n)
		*n = v;
	else
		bpf_map_update_elem(&stack_rate, &tid, &v, BPF_ANY);
}

/* no fault stack of the current thread in the gap_ns before now */
static __always_inline bool fault_stack_due(__u64 now, __u64 gap_ns)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct stack_next *n;

	if (!stacks_on)
		return false;
	n = bpf_map_lookup_elem(&stack_rate, &tid);
	/* n->fault: the last fault stack's time + stack_fault_gap_ns */
	return !n || !n->fault || now + stack_fault_gap_ns >= n->fault + gap_ns;
}

/*
 * Long off-CPU waits. Whether a wait is long is known only at switch-in, when
 * the thread is not the current task and its user stack cannot be read; so
 * the stack is taken at the switch-out into sleep (the current task then),
 * kept per thread, and emitted at the switch-in if the wait lasted
 * offcpu_min_ns or more. A capture costs whether or not it is emitted: at
 * most one per thread per sleep_stack_gap_ns after a long trip off the CPU,
 * one per 16 of them after a short one (docs/ARCHITECTURE.md, "Stacks").
 */
const volatile __u64 offcpu_min_ns = 1000000;
const volatile __u64 sleep_stack_gap_ns = 1000000;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct sleep_stash);
} sleep_stacks SEC(".maps");

/*
 * a target thread (the current task) leaves its CPU at now; sleeping: in S or
 * D; ts: its storage where trips are folded (the stash is there), else NULL
 */
static __always_inline void sleep_stack_out(void *ctx, struct tstate *ts, __u32 tid, __u64 now,
					    bool sleeping)
{
	if (!stacks_on)
		return;
	struct sleep_stash *v = ts ? &ts->ss : bpf_map_lookup_elem(&sleep_stacks, &tid);

	if (!v) {
		static const struct sleep_stash empty = {};

		if (!sleeping)
			return;
		bpf_map_update_elem(&sleep_stacks, &tid, &empty, BPF_ANY);
		v = bpf_map_lookup_elem(&sleep_stacks, &tid);
		if (!v)
			return;
	}
	v->last_out = now;
	v->cap_out = 0;
	v->asleep = sleeping;
	if (!sleeping || now < v->next_cap)
		return;
	v->nframes = user_stack(ctx, v->ip);
	v->cap_out = now;
	/* a thread whose trips are short (a ping-pong) is sampled sixteen times less */
	v->next_cap = now + (v->last_long ? sleep_stack_gap_ns : 16 * sleep_stack_gap_ns);
	/*
	 * A copy of its stack too, on the events' ration: the agent holds it
	 * until the sleep turns out long (the off-CPU stack record below,
	 * ev_start_ns = now) and walks it then; its ev_type SB_EV_SWITCH_OUT says
	 * so. Whether this sleep will be long is not known here: a thread's
	 * long waits (a DataLoader's queue) come between short ones (the GIL).
	 */
	struct stack_next *n = bpf_map_lookup_elem(&stack_rate, &tid);

	if (!stack_copy_due(n ? n->copy : 0, stack_copy_gap_ns, now, 0) ||
	    !write_stack_copy(ctx, SB_EV_SWITCH_OUT, now, now))
		return;
	if (n) {
		n->copy = stack_copy_taken(n->copy, stack_copy_gap_ns, now);
	} else {
		struct stack_next w = { .copy = stack_copy_taken(0, stack_copy_gap_ns, now) };

		bpf_map_update_elem(&stack_rate, &tid, &w, BPF_NOEXIST);
	}
}

/*
 * Target thread p, asleep in S or D since a switch-out whose capture the rate
 * limit skipped, is woken at now after offcpu_min_ns or more: by a thread that
 * shares its address space (another thread of its process), its user stack
 * is read now, as sleep_stack_out would have. A sleeping thread's user
 * registers and stack do not change until it runs again, and the current
 * task's address space is the sleeper's: the walk reads the same memory it
 * would have read at the switch-out. A waker in another process (a
 * DataLoader worker writing to a pipe) cannot read it; the switch-out's
 * capture is all there is then (docs/ARCHITECTURE.md, "Stacks"). tp_btf only:
 * p must be a trusted pointer.
 */
static __always_inline void sleep_stack_wake(struct tstate *ts, struct task_struct *p, __u64 now)
{
	struct sleep_stash *v = &ts->ss;

	if (!stacks_on || !v->asleep || !v->last_out || v->cap_out ||
	    now - v->last_out < offcpu_min_ns)
		return;
	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs))
		return;
	struct task_struct *cur = bpf_get_current_task_btf();

	if (cur == p || !p->mm || cur->mm != p->mm)
		return;
	struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(p);

	if (!r || user_mode_32(r))
		return;
	v->nframes = user_walk(r, v->ip);
	v->cap_out = v->last_out;
}

/* a target thread gets a CPU at now: its stack if the wait since a captured sleep was long */
static __always_inline void sleep_stack_in(struct tstate *ts, __u32 pid, __u32 tid, __u64 now)
{
	if (!stacks_on)
		return;
	struct sleep_stash *v = ts ? &ts->ss : bpf_map_lookup_elem(&sleep_stacks, &tid);

	if (!v)
		return;
	v->last_long = v->last_out && now - v->last_out >= offcpu_min_ns;
	if (!v->cap_out || v->cap_out != v->last_out || now - v->cap_out < offcpu_min_ns)
		return;
	__u64 out = v->cap_out;

	v->cap_out = 0;
	struct sb_stack *st = reserve(SB_EV_STACK, sizeof(*st));

	if (!st)
		return;
	st->h.pid = pid;
	st->h.tid = tid;
	st->h.ts = now;
	st->ev_start_ns = out;
	st->ev_type = SB_EV_SWITCH_IN;
	st->nframes = v->nframes < SB_STACK_MAX ? v->nframes : SB_STACK_MAX;
	if (st->nframes >= SB_STACK_MAX)
		st->h.flags = SB_STACK_TRUNCATED;
	for (__u32 i = 0; i < SB_STACK_MAX; i++)
		st->ip[i] = i < st->nframes ? v->ip[i] : 0;
	submit(st);
}

#endif /* STEPBLAME_COMMON_BPF_H */
