/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The records the BPF programs emit and the agent stores: the contract between
 * the kernel side and userspace, and the body of every record in a trace file
 * (schemas/trace.md). Fixed-width types only; no libc or vmlinux includes, so
 * both sides can include it. Every record starts with struct sb_hdr and its
 * size is a multiple of 8.
 */
#ifndef STEPBLAME_EVENTS_H
#define STEPBLAME_EVENTS_H

#ifdef __BPF__
/* vmlinux.h already provides the __u* types */
#else
#include <linux/types.h>
#endif

#define SB_COMM_LEN 16

/*
 * Every record type, one row each: the one list that the trace reader and
 * writer, the engine, dump, the cost model and the benchmark scripts read
 * (schemas/trace.md, "Record types"). A type added here and nowhere else is
 * checked, sized, named and dumped; a type missing here fails the build (the
 * assertions below). Columns:
 *
 *   X(ENUM, id, name, struct, start, cost, kind)
 *
 *   ENUM    the enum sb_type constant, defined from this row
 *   id      its number in sb_hdr.type
 *   name    what dump, reports and error messages call it
 *   struct  its struct, without "struct" (sb_text, sb_cpu, sb_trailer: format/trace.h;
 *           sb_gpu: format/gpu.h); its size is the smallest valid record
 *   start   the u64 field holding the start of the interval that ends at h.ts
 *           (the record stands for [start, ts]), or none: an instant at h.ts
 *   cost    what the event costs its thread: enum sb_cost without the SB_COST_
 *           prefix (format/costs.h), NONE when nothing the cost model counts
 *   kind    KERNEL (emitted by the BPF programs), TEXT (an sb_text record),
 *           META (an agent record with a fixed struct), GPU, TRAILER
 *
 * Only the agent's C expands struct and cost; on the BPF side the table
 * merely defines the enum.
 */
#define SB_RECORD_TYPES(X) \
	/* from the kernel (BPF) */ \
	X(SB_EV_SWITCH_OUT,   1,  "switch_out",  sb_switch_out,  none,     SCHED,      KERNEL)  /* a target thread leaves its CPU */ \
	X(SB_EV_SWITCH_IN,    2,  "switch_in",   sb_switch_in,   none,     SCHED,      KERNEL)  /* a target thread gets a CPU */ \
	X(SB_EV_RUNSLICE,     3,  "runslice",    sb_runslice,    start_ns, NONE,       KERNEL)  /* another task ran on a CPU where a target thread waited */ \
	X(SB_EV_WAKEUP,       4,  "wakeup",      sb_wakeup,      none,     SCHED,      KERNEL)  /* a target thread was woken */ \
	X(SB_EV_MIGRATE,      5,  "migrate",     sb_migrate,     none,     SCHED,      KERNEL)  /* a target thread moved to another CPU */ \
	X(SB_EV_FAULT,        6,  "fault",       sb_fault,       none,     FAULT,      KERNEL)  /* user page fault of a target thread */ \
	X(SB_EV_RECLAIM,      7,  "reclaim",     sb_reclaim,     start_ns, NONE,       KERNEL)  /* direct reclaim / compaction stall, with duration */ \
	X(SB_EV_MMSYS,        8,  "mmsys",       sb_mmsys,       start_ns, SYSCALL,    KERNEL)  /* mmap family syscall, with latency */ \
	X(SB_EV_ALLOC,        9,  "alloc",       sb_alloc,       start_ns, ALLOC_CALL, KERNEL)  /* allocator call slower than alloc_min_ns */ \
	X(SB_EV_STEP,         10, "step",        sb_step,        none,     UPROBE,     KERNEL)  /* step mark (USDT stepblame:step or --step-uprobe) */ \
	X(SB_EV_THREAD_NEW,   11, "thread_new",  sb_thread,      none,     SCHED,      KERNEL)  /* thread created in the target */ \
	X(SB_EV_THREAD_EXIT,  12, "thread_exit", sb_thread,      none,     SCHED,      KERNEL)  /* thread of the target exited */ \
	X(SB_EV_RENAME,       13, "rename",      sb_rename,      none,     SCHED,      KERNEL)  /* thread renamed (prctl PR_SET_NAME, pthread_setname_np) */ \
	X(SB_EV_CUDA,         14, "cuda",        sb_cuda,        start_ns, CUDA_CALL,  KERNEL)  /* CUDA driver call seen by uprobe */ \
	X(SB_EV_ALLOC_BURST,  15, "alloc_burst", sb_alloc_burst, start_ns, ALLOC_CALL, KERNEL)  /* a run of fast allocator calls on one thread: costs its calls */ \
	X(SB_EV_IOSYS,        16, "iosys",       sb_iosys,       start_ns, SYSCALL,    KERNEL)  /* blocking I/O syscall slower than io_min_ns, with latency */ \
	X(SB_EV_AFFINITY,     17, "affinity",    sb_affinity,    start_ns, SYSCALL,    KERNEL)  /* sched_setaffinity call of a target thread, with latency */ \
	X(SB_EV_STACK,        18, "stack",       sb_stack,       none,     STACK,      KERNEL)  /* user stack of the thread at one event of it (ts = that event's) */ \
	X(SB_EV_FAULT_RUN,    19, "fault_run",   sb_fault_run,   start_ns, FAULT,      KERNEL)  /* back-to-back user page faults of a target thread (ts = the last) */ \
	X(SB_EV_SCHED_RUN,    20, "sched_run",   sb_sched_run,   start_ns, SCHED_FOLD, KERNEL)  /* short trips off the CPU of a target thread, summed (ts = the last one's end) */ \
	X(SB_EV_IRQ_RUN,      21, "irq_run",     sb_irq_run,     start_ns, IRQ,        KERNEL)  /* interrupts that ran on a target thread's time, summed (ts = the last one's end) */ \
	/* written by the agent into trace files */ \
	X(SB_REC_HOST,        32, "host",        sb_text,        none,     NONE,       TEXT)    /* host facts */ \
	X(SB_REC_CPU,         33, "cpu",         sb_cpu,         none,     NONE,       META)    /* one CPU: number and NUMA node */ \
	X(SB_REC_TARGET,      34, "target",      sb_text,        none,     NONE,       TEXT)    /* the traced process */ \
	X(SB_REC_THREAD,      35, "thread",      sb_text,        none,     NONE,       TEXT)    /* one thread of the target at start */ \
	X(SB_REC_ALLOC_STATS, 36, "alloc_stats", sb_alloc_stats, none,     NONE,       META)    /* per-thread cumulative counts of fast allocator calls */ \
	X(SB_REC_DROPS,       37, "drops",       sb_drops,       none,     NONE,       META)    /* drop counters, cumulative */ \
	X(SB_REC_PROBE,       38, "probe",       sb_text,        none,     NONE,       TEXT)    /* a probe's attach status */ \
	X(SB_REC_GPU,         39, "gpu",         sb_gpu,         none,     NONE,       GPU)     /* a GPU timeline channel record (schemas/channel.md); ts = its start */ \
	X(SB_REC_STRING,      40, "string",      sb_text,        none,     NONE,       TEXT)    /* an interned string (kernel names) */ \
	X(SB_REC_NOTE,        41, "note",        sb_text,        none,     NONE,       TEXT)    /* free text: what happened during capture */ \
	X(SB_REC_COSTS,       42, "costs",       sb_text,        none,     NONE,       TEXT)    /* the tracer's per-event costs, key=value (user/format/costs.h) */ \
	X(SB_REC_GUARD,       43, "guard",       sb_text,        none,     NONE,       TEXT)    /* the overhead guard's state, key=value, at each change */ \
	X(SB_REC_MAPPING,     44, "mapping",     sb_text,        none,     NONE,       TEXT)    /* a mapping of the target or a followed child, key=value */ \
	X(SB_REC_PERFMAP,     45, "perfmap",     sb_text,        none,     NONE,       TEXT)    /* symbols of JIT code from the target's /tmp/perf-PID.map */ \
	X(SB_REC_TRAILER,     63, "trailer",     sb_trailer,     none,     NONE,       TRAILER) /* last record of a complete file */

/* the kind column */
enum sb_rec_kind {
	SB_KIND_NONE = 0,       /* not a defined type */
	SB_KIND_KERNEL = 1,     /* emitted by the BPF programs (ids 1..SB_EV_KERNEL_MAX) */
	SB_KIND_TEXT = 2,       /* struct sb_text and its text */
	SB_KIND_META = 3,       /* an agent record with a fixed struct */
	SB_KIND_GPU = 4,        /* a GPU timeline record */
	SB_KIND_TRAILER = 5,    /* last record of a complete file */
};

#define SB_TYPE_ENUM_(e, id, ...) e = id,

enum sb_type {
	SB_EV_NONE = 0,
	SB_RECORD_TYPES(SB_TYPE_ENUM_)
	SB_EV_KERNEL_LAST = SB_EV_IRQ_RUN, /* the highest kernel type defined */
	SB_EV_KERNEL_MAX = 31,
	SB_REC_FIRST = SB_REC_HOST,         /* the agent's types: SB_REC_FIRST..SB_REC_LAST, */
	SB_REC_LAST = SB_REC_PERFMAP,        /* and the trailer */
	SB_TYPE_MAX = 64,
};

/*
 * The table holds exactly the types 1..SB_EV_KERNEL_LAST, SB_REC_FIRST..SB_REC_LAST
 * and SB_REC_TRAILER, each once, and the kernel's types are the KERNEL rows.
 */
#define SB_TYPE_BIT_(e, id, ...) | (1ULL << (id))
#define SB_TYPE_ONE_(e, id, ...) + 1
#define SB_TYPE_KIND_OK_(e, id, name, st, start, cost, kind) \
	&& ((SB_KIND_##kind == SB_KIND_KERNEL) == ((id) >= 1 && (id) <= SB_EV_KERNEL_MAX))
#define SB_TYPE_IDS_ \
	(((1ULL << (SB_EV_KERNEL_LAST + 1)) - 2) | \
	 ((1ULL << (SB_REC_LAST + 1)) - (1ULL << SB_REC_FIRST)) | (1ULL << SB_REC_TRAILER))
_Static_assert((0 SB_RECORD_TYPES(SB_TYPE_BIT_)) == SB_TYPE_IDS_,
	       "SB_RECORD_TYPES: a type in 1..SB_EV_KERNEL_LAST, SB_REC_FIRST..SB_REC_LAST "
	       "or the trailer has no row, or a row lies outside them");
_Static_assert((0 SB_RECORD_TYPES(SB_TYPE_ONE_)) ==
		       SB_EV_KERNEL_LAST + (SB_REC_LAST - SB_REC_FIRST + 1) + 1,
	       "SB_RECORD_TYPES: a row for each type, once (two rows share an id?)");
_Static_assert(1 SB_RECORD_TYPES(SB_TYPE_KIND_OK_),
	       "SB_RECORD_TYPES: kind KERNEL is exactly the ids 1..SB_EV_KERNEL_MAX");
_Static_assert(SB_EV_KERNEL_LAST <= SB_EV_KERNEL_MAX && SB_REC_FIRST > SB_EV_KERNEL_MAX &&
		       SB_REC_LAST < SB_REC_TRAILER && SB_REC_TRAILER < SB_TYPE_MAX,
	       "type ranges");

struct sb_hdr {
	__u16 type;  /* enum sb_type */
	__u16 size;  /* whole record, header included, multiple of 8 */
	__u16 cpu;   /* CPU the event happened on */
	__u16 flags; /* per type */
	__u32 pid;   /* tgid of the task the record is about */
	__u32 tid;   /* thread id of the task the record is about */
	__u64 ts;    /* CLOCK_MONOTONIC ns (bpf_ktime_get_ns) */
};

/* state a thread left its CPU in */
enum sb_state {
	SB_STATE_RUNNABLE = 0, /* preempted: still runnable */
	SB_STATE_SLEEP = 1,    /* interruptible sleep (S) */
	SB_STATE_DISK = 2,     /* uninterruptible sleep (D) */
	SB_STATE_STOPPED = 3,  /* stopped or traced */
	SB_STATE_DEAD = 4,     /* exiting */
	SB_STATE_OTHER = 5,
};

struct sb_switch_out {
	struct sb_hdr h;       /* the target thread; ts = switch time */
	__u32 prev_state;      /* raw task state, TASK_FREEZABLE masked */
	__u8 state;            /* enum sb_state */
	__u8 throttled;        /* runnable: its cgroup's CPU quota is used up (CFS bandwidth) */
	__u8 pad[2];
	__u32 next_pid;        /* task that got the CPU */
	__u32 next_tid;
	char next_comm[SB_COMM_LEN];
};

enum sb_wait_reason {
	SB_WAIT_NONE = 0,
	SB_WAIT_PREEMPTED = 1,
	SB_WAIT_WOKEN = 2,
	SB_WAIT_THROTTLED = 3, /* preempted or woken while its cgroup's CPU quota was used up */
};

struct sb_switch_in {
	struct sb_hdr h;       /* the target thread; ts = switch time */
	__u64 wait_ns;         /* runnable-but-waiting time just ended, 0 if unknown */
	__u32 prev_pid;        /* task that left the CPU */
	__u32 prev_tid;
	char prev_comm[SB_COMM_LEN];
	__u8 wait_reason;      /* enum sb_wait_reason */
	__u8 pad[7];
};

/* runslice h.flags: the task ran in a real-time class (SCHED_FIFO, SCHED_RR, SCHED_DEADLINE) */
#define SB_RUNSLICE_REALTIME 0x1

struct sb_runslice {
	struct sb_hdr h;       /* the task that ran (schemas/trace.md); ts = end; flags SB_RUNSLICE_* */
	__u64 start_ns;        /* when it got the CPU */
	char comm[SB_COMM_LEN];
	__u32 nwaiting;        /* target threads waiting on this CPU at the end */
	__u32 steal_us;        /* of the slice, the hypervisor's steal (saturates) */
};

struct sb_wakeup {
	struct sb_hdr h;       /* the woken target thread; cpu = CPU it will run on */
	__u32 waker_pid;
	__u32 waker_tid;
	char waker_comm[SB_COMM_LEN];
	__u16 waker_cpu;
	__u8 is_new;           /* wakeup of a newly created thread */
	__u8 throttled;        /* woken into a cgroup whose CPU quota is used up (CFS bandwidth) */
	__u8 pad[4];
};

/*
 * Ring only, never in a trace file: a trip too long to fold, written at its
 * switch-in as one ring record instead of three (docs/ARCHITECTURE.md,
 * "Scheduler runs"). The agent puts its parts into the trace as the records
 * they are, in this order: out, wk (where wk.h.type is SB_EV_WAKEUP: a sleep
 * whose wakeup was seen), in. h: type SB_RING_TRIP, the switch-in's cpu, pid,
 * tid and ts.
 */
#define SB_RING_TRIP 30

struct sb_trip {
	struct sb_hdr h;
	struct sb_switch_out out;
	struct sb_wakeup wk;
	struct sb_switch_in in;
};

struct sb_migrate {
	struct sb_hdr h;
	__u16 orig_cpu;
	__u16 dest_cpu;
	__u16 orig_node;
	__u16 dest_node;
};

#define SB_FAULT_MAJOR 0x1 /* h.flags: known major (set by the reader) */
#define SB_FAULT_MINOR 0x2 /* h.flags: known minor (set by the reader) */

struct sb_fault {
	struct sb_hdr h;
	__u64 addr;
	__u64 ip;
	__u64 error_code;
	__u64 maj_flt;         /* task's cumulative major faults before this one */
	__u64 min_flt;         /* task's cumulative minor faults before this one */
};

/*
 * Back-to-back user page faults of one thread (bpf/mem.bpf.c): count faults,
 * each entered within 1 ms of the one before, nothing else of the
 * thread recorded in between. The first was entered at start_ns, the last at
 * h.ts. A run of one fault is written as a struct sb_fault record.
 */
struct sb_fault_run {
	struct sb_hdr h;       /* ts = entry of the last fault */
	__u64 start_ns;        /* entry of the first fault */
	__u64 count;           /* faults, at least 2 */
	__u64 addr;            /* the first fault's address */
	__u64 last_addr;       /* the last fault's address */
	__u64 lo_addr;         /* the lowest and highest fault address of the run */
	__u64 hi_addr;
	__u64 ip;              /* the first fault's instruction */
	__u64 error_code;      /* the first fault's error code */
	__u64 first_maj_flt;   /* task's cumulative major faults before the first */
	__u64 first_min_flt;   /* task's cumulative minor faults before the first */
	__u64 maj_flt;         /* task's cumulative major faults before the last */
	__u64 min_flt;         /* task's cumulative minor faults before the last */
};

/*
 * Short trips of one thread off its CPU, summed in the kernel
 * (docs/ARCHITECTURE.md, "Scheduler runs"): episodes (a switch-out asleep or
 * preempted, for a sleep its wakeup, the switch-in that ends it) each shorter
 * than the recorder's fold limit, one after the other within the run's span,
 * nothing else of the thread recorded in between. Every sleep of a run was
 * ended by the same waker, and every wait before a switch-in from a task by
 * the same runner: a thread woken or kept waiting by another task starts a
 * new run. The thread was on a CPU at start_ns and again at h.ts.
 */
/* sched_run h.flags: its runner ran in a real-time class (as SB_RUNSLICE_REALTIME) */
#define SB_SCHED_RUN_RUNNER_REALTIME 0x1

struct sb_sched_run {
	struct sb_hdr h;       /* the thread; ts = the switch-in ending its last episode; cpu = that CPU;
	                          flags SB_SCHED_RUN_* */
	__u64 start_ns;        /* the switch-out beginning its first episode */
	__u32 sleeps;          /* episodes asleep (S): switch-out, wakeup, switch-in */
	__u32 preempts;        /* episodes preempted: switch-out runnable, switch-in */
	__u64 sleep_ns;        /* asleep, summed: switch-out to wakeup */
	__u64 wait_ns;         /* runnable, summed: wakeup or preemption to switch-in */
	__u64 idle_wait_ns;    /* of wait_ns, the waits that ended in a switch-in from the idle task */
	__u64 steal_ns;        /* of wait_ns, the hypervisor's steal in the runner's slices */
	__u64 max_ns;          /* the longest episode, switch-out to switch-in */
	__u32 waker_pid;       /* who woke it, every sleep of the run (0: no sleep, or not seen) */
	__u32 waker_tid;
	char waker_comm[SB_COMM_LEN];
	__u32 runner_pid;      /* who had the CPU before each switch-in from a task (0: none) */
	__u32 runner_tid;
	char runner_comm[SB_COMM_LEN];
};

/*
 * Interrupt handlers that ran on a target thread's CPU time: hard interrupts
 * and the softirqs run on their way out, with the thread as the current task
 * (docs/ARCHITECTURE.md, "Interrupts"). Summed per thread in the kernel: each
 * interrupt entered within SB_IRQ_RUN_GAP_NS of the last one's end, on the
 * same CPU, and the run under SB_IRQ_RUN_SPAN_NS old. Softirqs run by
 * ksoftirqd are a task of their own, seen as any other preemptor.
 */
#define SB_IRQ_RUN_GAP_NS 1000000ull
#define SB_IRQ_RUN_SPAN_NS 10000000ull
#define SB_NSOFTIRQ 10 /* the kernel's softirq vectors: HI, TIMER, ... RCU */
/* the system interrupts timed (x86's irq_vectors tracepoints) */
enum sb_sysirq { SB_SYSIRQ_TIMER, SB_SYSIRQ_CALL, SB_SYSIRQ_RESCHED, SB_SYSIRQ_WORK, SB_NSYSIRQ };

struct sb_irq_run {
	struct sb_hdr h;       /* the thread; ts = the exit of the last interrupt; cpu = theirs */
	__u64 start_ns;        /* entry of the first */
	__u64 hard_ns;         /* in hard interrupt handlers */
	__u64 soft_ns;         /* in softirqs, less the hard interrupts inside them */
	__u32 hard_count;      /* hard interrupt handlers run */
	__u32 soft_count;      /* softirq vectors run */
	__u32 vec_ns[SB_NSOFTIRQ]; /* soft_ns by vector (saturating) */
	__u32 hard_irq;        /* the longest hard interrupt's number */
	__u32 sys_count;       /* system interrupts run: the local timer, IPIs, irq work */
	char hard_name[SB_COMM_LEN]; /* its handler's name ("" if none ran) */
	__u32 sys_ns[SB_NSYSIRQ]; /* in system interrupts, by enum sb_sysirq (saturating) */
};

enum sb_reclaim_kind { SB_RECLAIM_DIRECT = 1, SB_RECLAIM_MEMCG = 2, SB_RECLAIM_COMPACT = 3 };

struct sb_reclaim {
	struct sb_hdr h;       /* ts = end */
	__u64 start_ns;
	__u64 result;          /* pages reclaimed, or compaction status */
	__u32 kind;            /* enum sb_reclaim_kind */
	__u32 pad;
};

enum sb_mm_call { SB_SYS_MMAP = 1, SB_SYS_MUNMAP = 2, SB_SYS_BRK = 3, SB_SYS_MADVISE = 4,
		SB_SYS_MPROTECT = 5, SB_SYS_MREMAP = 6 };

struct sb_mmsys {
	struct sb_hdr h;       /* ts = return */
	__u64 start_ns;
	__u64 addr;            /* first argument */
	__u64 len;             /* length argument (brk: new break) */
	__s64 ret;
	__u32 call;            /* enum sb_mm_call */
	__u32 arg;             /* prot / advice / flags */
};

enum sb_alloc_fn { SB_FN_MALLOC = 0, SB_FN_CALLOC = 1, SB_FN_REALLOC = 2, SB_FN_FREE = 3,
		   SB_FN_POSIX_MEMALIGN = 4, SB_FN_ALIGNED_ALLOC = 5, SB_FN_MEMALIGN = 6,
		   SB_FN_MAX = 7 };

struct sb_alloc {
	struct sb_hdr h;       /* ts = return */
	__u64 start_ns;
	__u64 size;            /* bytes asked for (free: 0) */
	__u64 ptr;             /* result, or the pointer freed */
	__u32 fn;              /* enum sb_alloc_fn */
	__u32 floor_ns;        /* fastest call of fn seen so far: mostly the probes' own cost */
};

#define SB_ALLOC_BURST_FLUSHED 0x1 /* h.flags: emitted by the agent's periodic flush */

/*
 * Allocator calls faster than alloc_min_ns (above the floor), one after the
 * other with pauses no longer than the recorder's burst gap (slow calls,
 * recorded on their own, may come between them): the thread spent sum_ns of
 * [start_ns, h.ts] inside them. Emitted when the burst ends (the next call
 * after the gap, a maximum span, or the agent's flush), so it arrives late;
 * only bursts big enough to matter are emitted.
 */
struct sb_alloc_burst {
	struct sb_hdr h;       /* ts = end of its last call; cpu = CPU of its first */
	__u64 start_ns;        /* start of its first call */
	__u64 calls;           /* fast calls */
	__u64 sum_ns;          /* time in the calls: their latencies, plus the probes'
				  own cost in the pauses between calls (bpf/alloc.bpf.c) */
	__u64 bytes;           /* bytes asked for, summed (free: 0) */
	__u64 slow_ns;         /* latency of the slow calls inside [start_ns, ts] */
};

enum sb_io_call { SB_IO_READ = 1, SB_IO_WRITE = 2, SB_IO_PREAD = 3, SB_IO_PWRITE = 4,
		  SB_IO_READV = 5, SB_IO_WRITEV = 6, SB_IO_FSYNC = 7, SB_IO_FDATASYNC = 8,
		  SB_IO_SYNC_FILE_RANGE = 9, SB_IO_UNLINK = 10, SB_IO_UNLINKAT = 11,
		  SB_IO_SYNC = 12, SB_IO_SYNCFS = 13, SB_IO_SENDFILE = 14,
		  SB_IO_COPY_FILE_RANGE = 15, SB_IO_SPLICE = 16, SB_IO_PREADV = 17,
		  SB_IO_PWRITEV = 18, SB_IO_PREADV2 = 19, SB_IO_PWRITEV2 = 20 };

struct sb_iosys {
	struct sb_hdr h;       /* ts = return */
	__u64 start_ns;        /* entry */
	__s64 ret;             /* return value: bytes done, or negative errno */
	__u64 len;             /* bytes asked for (read/write/pread64/pwrite64: count;
				  sync_file_range: nbytes; readv/writev, fsync, fdatasync: 0) */
	__u32 call;            /* enum sb_io_call */
	__s32 fd;              /* unlinkat: the directory fd; unlink: AT_FDCWD (-100) */
};

/* what a file descriptor refers to (struct sb_iosys_file) */
enum sb_file_kind { SB_FILE_NONE = 0, SB_FILE_REGULAR = 1, SB_FILE_SOCKET = 2, SB_FILE_PIPE = 3,
		    SB_FILE_CHAR = 4, SB_FILE_BLOCK = 5, SB_FILE_DIR = 6, SB_FILE_OTHER = 7 };

#define SB_IO_PATH_LEN 256
#define SB_IO_PATH_CUT 0x1 /* sb_iosys_file.flags: components past the buffer or depth left out */
#define SB_IO_PATH_TOP 0x2 /* sb_iosys_file.flags: the walk reached the root (an absolute path) */

/*
 * The file an I/O call worked on: an iosys record whose h.size is at least
 * sizeof(struct sb_iosys) + sizeof(struct sb_iosys_file) carries it right after
 * the struct sb_iosys (schemas/trace.md); older traces' iosys records do not.
 */
struct sb_iosys_file {
	__u64 ino;             /* inode number; 0: no file (unlink, a closed fd) */
	__u64 written;         /* bytes the target wrote through this open file since the
				  probes attached: every write, fast ones included */
	__u32 dev;             /* the inode's superblock s_dev (kernel encoding) */
	__u8 kind;             /* enum sb_file_kind */
	__u8 flags;            /* SB_IO_PATH_* */
	__u16 path_len;        /* bytes used in path */
	char path[SB_IO_PATH_LEN]; /* the name's components, leaf first, each ending in NUL */
};

struct sb_iosys_ext {
	struct sb_iosys io;
	struct sb_iosys_file file;
};

/*
 * What an mmap() mapped: an mmsys record of call SB_SYS_MMAP whose h.size is
 * at least sizeof(struct sb_mmsys) + sizeof(struct sb_mmsys_map) carries it
 * right after the struct sb_mmsys (schemas/trace.md); older traces' do not.
 */
struct sb_mmsys_map {
	__u32 flags;           /* mmap's flags argument (MAP_ANONYMOUS 0x20, MAP_SHARED 0x01, ...) */
	__s32 fd;              /* its fd argument */
	struct sb_iosys_file file; /* the file mapped (kind 0: anonymous, or the fd named none) */
};

struct sb_mmsys_ext {
	struct sb_mmsys mm;
	struct sb_mmsys_map map;
};

/* a sched_setaffinity() call: moving a thread is done inside it (the migration stopper) */
struct sb_affinity {
	struct sb_hdr h;       /* ts = return */
	__u64 start_ns;        /* entry */
	__s64 ret;             /* 0, or negative errno */
	__u32 pid;             /* the thread it asked to move (0: the caller) */
	__u32 pad;
};

enum sb_step_src { SB_STEP_USDT = 1, SB_STEP_UPROBE = 2, SB_STEP_GPU_MARKER = 3 };

struct sb_step {
	struct sb_hdr h;
	__u64 step;            /* USDT: its argument; uprobe: running count from 0 */
	__u32 source;          /* enum sb_step_src */
	__u32 pad;
};

/*
 * A step record of at least sizeof(struct sb_step_ext) says how many fast
 * allocator calls the marking thread had made by the mark (the allocator
 * probes were attached): the difference between two marks of one thread is
 * its exact count in between. Shorter ones (no allocator probes, older
 * traces) do not.
 */
struct sb_step_alloc {
	__u64 fast_calls;      /* the thread's fast allocator calls since the probes attached */
};

struct sb_step_ext {
	struct sb_step s;
	struct sb_step_alloc alloc;
};

struct sb_thread {
	struct sb_hdr h;       /* THREAD_NEW / THREAD_EXIT: the thread */
	__u32 parent_tid;      /* THREAD_NEW: creating thread */
	__u32 parent_pid;      /* THREAD_NEW: the creating thread's process (0 in older traces) */
	char comm[SB_COMM_LEN];
};

struct sb_rename {
	struct sb_hdr h;
	char oldcomm[SB_COMM_LEN];
	char newcomm[SB_COMM_LEN];
};

enum sb_cuda_fn { SB_CU_LAUNCH = 1, SB_CU_SYNC = 2, SB_CU_ALLOC = 3, SB_CU_FREE = 4,
		  SB_CU_MEMCPY = 5 };

struct sb_cuda {
	struct sb_hdr h;       /* ts = return */
	__u64 start_ns;
	__u32 fn;              /* enum sb_cuda_fn */
	__u32 sym;             /* index of the probed symbol (agent's table) */
};

/* deepest user stack a stack record holds */
#define SB_STACK_MAX 32

#define SB_STACK_TRUNCATED 0x1 /* h.flags: the stack was SB_STACK_MAX frames or deeper */
#define SB_STACK_COPIED    0x2 /* h.flags: the probe copied the top of the stack (SB_RING_STACK) */
#define SB_STACK_CFI       0x4 /* h.flags: the frames come from the call-frame information */

/*
 * The user-space stack of a thread at an event of it (bpf/common.bpf.h,
 * emit_stack): emitted right after that event's record, with the same tid and
 * h.ts, so (tid, ev_type, h.ts) names the event. ip[0] is the innermost frame:
 * the faulting instruction, the system call's return address, or the
 * allocator's caller. Frames come from the frame-pointer chain, or, where the
 * probe copied the stack (SB_STACK_COPIED), from the agent's walk of that copy
 * by the call-frame information of the code (SB_STACK_CFI) when that walk went
 * further.
 */
struct sb_stack {
	struct sb_hdr h;       /* the thread; ts = the event's h.ts */
	__u64 ev_start_ns;     /* the event's start (an interval), or its ts */
	__u32 ev_type;         /* enum sb_type of the event */
	__u32 nframes;         /* ip[0..nframes) are valid, at most SB_STACK_MAX */
	__u64 ip[SB_STACK_MAX];
};

/*
 * Ring only, never in a trace file: a stack record with a copy of the top of
 * the thread's user stack and its user registers, for the agent to walk by
 * call-frame information (docs/ARCHITECTURE.md, "Stacks"). The agent puts
 * st into the trace, with the frames of that walk where it went further than
 * the frame-pointer chain. h: type SB_RING_STACK, otherwise st.h's.
 */
#define SB_RING_STACK 31
#define SB_STACK_COPY_PAGES 3
#define SB_STACK_REGS 17   /* x86-64 DWARF registers 0-16 */

struct sb_stack_copy {
	struct sb_hdr h;
	struct sb_stack st;    /* the record, frames from the frame-pointer chain */
	/*
	 * the user registers, in DWARF order: rax rdx rcx rbx rsi rdi rbp rsp
	 * r8-r15 rip
	 */
	__u64 regs[SB_STACK_REGS];
	__u64 base;            /* the page holding regs[7] (the stack pointer) */
	__u32 pages;           /* data holds pages whole pages from base: 0 if none was read */
	__u32 pad;
	__u8 data[SB_STACK_COPY_PAGES * 4096];
};

/* ---- records only the agent writes ---- */

struct sb_alloc_stats {
	struct sb_hdr h;       /* tid = thread; ts = time read */
	__u64 calls[SB_FN_MAX];
	__u64 ns[SB_FN_MAX];   /* summed latency of calls below alloc_min_ns */
};

/* drop counters: index = enum sb_type of what was lost */
struct sb_drops {
	struct sb_hdr h;       /* ts = time read */
	__u64 ring[SB_EV_KERNEL_MAX + 1]; /* ring buffer full, per event type */
	__u64 gpu_channel;     /* GPU channel producer drops */
	__u64 gpu_source;      /* drops reported by the GPU source (CUPTI) */
	__u64 wait_overflow;   /* state maps full in the kernel */
};

#endif /* STEPBLAME_EVENTS_H */
