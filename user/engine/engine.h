/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The attribution engine: records in (live from the ring buffer and the GPU
 * channel, or from a trace file), per-step blame out. One streaming pass:
 * records are reordered in a bounded window (the GPU timeline lags the host
 * events by up to lag_ns), swept in time order, and each step is finalised as
 * soon as every idle gap in it has been given its critical thread. Memory
 * grows with the threads alive, the steps (bounded in window mode: keep_steps)
 * and the window, never with the number of events or the ids a trace names
 * (struct eng_limits).
 *
 * Same records in the same order and the same options give the same bytes out.
 */
#ifndef STEPBLAME_ENGINE_H
#define STEPBLAME_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/events.h"

/* the fixed cause vocabulary (docs/ARCHITECTURE.md); eng_cause_name() gives the JSON string */
enum eng_cause {
	ENG_CPU_WAIT,
	ENG_MIGRATION,
	ENG_PAGE_FAULT,
	ENG_MEM_RECLAIM,
	ENG_ALLOC,
	ENG_IO_WAIT,
	ENG_BLOCKED,
	ENG_CUDA_SYNC,
	ENG_CUDA_ALLOC,
	ENG_CUDA_API,
	ENG_HOST_COMPUTE,
	ENG_GPU_SLOW,
	ENG_UNKNOWN,
	/*
	 * The tracer's own probes (docs/ARCHITECTURE.md, "Blame model"): never
	 * a user's problem, left out of the tail judgement and its causes.
	 */
	ENG_TRACER,
	/*
	 * The hypervisor ran something else on the CPU of the task that held it
	 * (docs/ARCHITECTURE.md, "Steal"): the wait behind a task is the
	 * machine's, not that task's.
	 */
	ENG_VM_STEAL,
	/*
	 * Runnable while its cgroup's CPU quota was used up (CFS bandwidth,
	 * docs/ARCHITECTURE.md, "CPU quota"): the quota's, not the tasks' that
	 * ran on its CPU meanwhile.
	 */
	ENG_CPU_THROTTLE,
	/*
	 * On its CPU, but in interrupt handlers run on its time: hard
	 * interrupts and the softirqs run on their way out (docs/ARCHITECTURE.md,
	 * "Interrupts"); the source is the step's irqs.
	 */
	ENG_IRQ,
	ENG_NCAUSE,
};

const char *eng_cause_name(int cause);

enum eng_step_src {
	ENG_SRC_NONE = 0,
	ENG_SRC_USDT,       /* SB_EV_STEP from the USDT probe stepblame:step */
	ENG_SRC_UPROBE,     /* SB_EV_STEP from --step-uprobe */
	ENG_SRC_GPU_MARKER, /* SB_GPU_MARKER step begin/end */
	ENG_SRC_NVTX,       /* NVTX range matching step_nvtx */
	ENG_SRC_KERNEL,     /* kernel matching step_kernel */
	ENG_SRC_API,        /* CUDA API call matching step_api */
};

const char *eng_step_src_name(int src);

struct eng_who;
struct eng_step;
struct eng_gap;
struct eng_gpu_op;

/*
 * The timeline, as the sweep draws it, for a writer (a Perfetto document:
 * report/perfetto.c). Every hook may be NULL; each is given ctx back. Times
 * are ns, CLOCK_MONOTONIC; the calls come in the order the sweep makes them.
 */
struct eng_timeline_hooks {
	void *ctx;
	/*
	 * A candidate thread of process pid in one state over [start, end]: a
	 * cause name (eng_cause_name) inside GPU idle, else "running",
	 * "runnable", "sleeping", "disk sleep", "exited" or "unknown". Back to
	 * back intervals in one state come as one.
	 */
	void (*thread_state)(void *ctx, uint32_t pid, uint32_t tid, const char *state,
			     uint64_t start_ns, uint64_t end_ns);
	/* who (cpu set) ran on the CPU that thread victim_tid waited for */
	void (*interferer)(void *ctx, const struct eng_who *who, uint32_t victim_tid,
			   uint64_t start_ns, uint64_t end_ns);
	/* a GPU idle gap (or the part of it in one step) committed to its step */
	void (*gap)(void *ctx, const struct eng_gap *g);
	/* a step is final (tail as judged so far: the live judgement) */
	void (*step)(void *ctx, const struct eng_step *s);
	/* a kernel, copy or memset ran on the GPU */
	void (*gpu_op)(void *ctx, const struct eng_gpu_op *op);
	/* an exited thread's state was dropped to make room (eng_limits.threads_forgotten) */
	void (*thread_forgotten)(void *ctx, uint32_t tid, const char *comm);
};

struct engine_opts {
	const char *step_nvtx;   /* POSIX extended regex: NVTX ranges that are steps */
	const char *step_kernel; /* POSIX extended regex: kernels whose start marks a step */
	const char *step_api;    /* POSIX extended regex: CUDA API calls whose entry marks a step */
	uint64_t lag_ns;         /* how late a record may arrive (GPU batches); 0: 3 s */
	/*
	 * Until a GPU timeline is expected (engine_gpu_expected) or fed: how late
	 * a host record may arrive (live: the agent's drain interval and some);
	 * 0: lag_ns from the start
	 */
	uint64_t host_lag_ns;
	uint64_t fault_cost_ns;  /* per-fault on-CPU cost; 0: calibrate from the trace */
	struct eng_timeline_hooks timeline; /* the timeline as it is swept (all NULL: none) */
	/*
	 * The capture's clock, against which GPU records (producer data) are
	 * judged: one whose start or end lies more than ENG_GPU_MARGIN_NS before
	 * start_ns (or the first kernel record), or after the newest kernel or
	 * agent record (live: the clock now), or ends before it starts, is
	 * rejected and counted (eng_loss.gpu_rejected). start_ns 0: the first
	 * kernel record; until there is one, GPU records are taken as they are.
	 */
	uint64_t start_ns;
	bool live;               /* the capture runs now: CLOCK_MONOTONIC bounds the records */
	/*
	 * Keep the detail (eng_step, blame) of the last keep_steps steps only,
	 * and summaries over all of them (engine_window): memory bounded for a run
	 * of any length. 0: keep every step, unless a trace holds more than
	 * ENG_EXACT_STEPS_MAX of them (then the last ENG_REPORT_KEEP_STEPS).
	 */
	uint64_t keep_steps;
	/*
	 * One rank of a trace in which several processes mark steps (the ranks
	 * a launcher started): only this process's step marks, CUDA calls and
	 * GPU records count; every process's threads are still watched, and may
	 * be culprits (schemas/report.md, "Ranks"). 0: the first process that
	 * marks.
	 */
	uint32_t rank_pid;
};

/* how far outside the capture a GPU record may lie */
#define ENG_GPU_MARGIN_NS 10000000000ull
/* steps a report keeps in full before it keeps a window (and when it does, how many) */
#define ENG_EXACT_STEPS_MAX (1ull << 20)
#define ENG_REPORT_KEEP_STEPS 65536

/* who a blame entry points at */
/*
 * blocked, on a waker that is a followed thread (of the target or of one of
 * its descendants): what the waker was doing during the waits blamed on it
 * (docs/ARCHITECTURE.md, "Blame model"). The times cover every wait it
 * ended, the parts blamed on its preemptors included.
 */
enum eng_act_kind {
	ENG_ACT_ON_CPU,          /* running its own code */
	ENG_ACT_PREEMPTED,       /* runnable, another task on its CPU */
	ENG_ACT_RUNNABLE,        /* runnable, nothing seen on its CPU (wakeup latency) */
	ENG_ACT_IO,              /* in uninterruptible sleep (disk, page cache) */
	ENG_ACT_BLOCKED,         /* itself asleep, waiting for another task */
	ENG_ACT_FAULTING,        /* in page faults (on a CPU, or asleep inside one) */
	ENG_ACT_RECLAIM,         /* reclaiming memory (direct reclaim) */
	ENG_ACT_ALLOC,           /* in slow allocator calls or mmap family calls */
	ENG_ACT_THROTTLED,       /* runnable, its cgroup's CPU quota used up (cpu_throttle) */
	ENG_NACT,
};
/* "on_cpu", "preempted", "runnable", "io", "blocked", "faulting", "reclaim", "alloc", "throttled" */
const char *eng_act_name(int k);

struct eng_act {
	uint64_t ns[ENG_NACT];
	uint64_t by_max, on_max; /* the longest single piece behind by_* / on_* */
	uint32_t by_pid, by_tid; /* preempted: by whom (the longest piece) */
	char by_comm[SB_COMM_LEN + 1];
	uint32_t on_pid, on_tid; /* blocked: on whom (the longest wait), 0: not known */
	char on_comm[SB_COMM_LEN + 1];
	/*
	 * io: the recorded I/O call the longest piece of it was in (iosys
	 * records that name their file), io_call 0: none named
	 */
	uint64_t io_max;
	uint8_t io_call;         /* enum sb_io_call */
	uint8_t io_kind;         /* enum sb_file_kind */
	uint32_t io_path;        /* engine_act_path(); 0: no path (a socket, a pipe) */
	/* faulting: the region mmap()ed during the capture the longest piece was in */
	uint64_t fault_max;
	bool fault_region;       /* false: not in a known region */
	bool fault_anon;
	uint64_t fault_len;
	uint32_t fault_path;     /* a file's mapping: engine_act_path(), 0: none */
	/*
	 * Of ns[ENG_ACT_BLOCKED], the sleeps a followed thread ended: what those
	 * threads did meanwhile (a queue's feeder thread asleep on the thread
	 * that fills the queue). The io and faulting names above cover them too.
	 */
	uint64_t on_ns[ENG_NACT];
};

struct eng_who {
	uint32_t pid, tid;
	char comm[SB_COMM_LEN + 1];
	int32_t cpu;             /* where it ran (cpu_wait), -1 if not known */
	uint32_t via_pid, via_tid; /* blocked: the waker through which it was reached, 0 none */
	char via_comm[SB_COMM_LEN + 1];
	struct eng_act act;      /* blocked, the waker itself: what it did meanwhile; all 0: not known */
};

/* the same culprit: the same task, named alike, reached through the same thread */
bool eng_who_same(const struct eng_who *a, const struct eng_who *b);

struct eng_blame {
	uint8_t cause;
	bool has_who;
	struct eng_who who;
	uint64_t ns;
	/*
	 * >1: processes of one name that nothing else tells apart took the
	 * time together (a fork storm: engine_who_grouped); who is the biggest
	 */
	uint32_t processes;
};

enum eng_count {
	ENG_N_FAULTS,       /* page faults of the critical thread inside GPU idle */
	ENG_N_MAJOR_FAULTS,
	ENG_N_PREEMPT,      /* runnable waits (preemptions, wakeup latency) */
	ENG_N_MIGRATIONS,
	ENG_N_ALLOCS,       /* slow allocator calls */
	ENG_N_BURST_ALLOCS, /* fast allocator calls, in bursts (counted where a burst starts) */
	ENG_N_MMAP,         /* mmap family syscalls */
	ENG_N_IO,           /* I/O syscalls slower than the recorder's threshold */
	ENG_N_RECLAIMS,
	ENG_N_CUDA,         /* CUDA API calls (channel or uprobe) */
	ENG_N_SLEEPS,
	ENG_N_GPU_OPS,      /* kernels, copies, memsets that started in the step */
	ENG_NCOUNT,
};

const char *eng_count_name(int c);

/*
 * The file behind a step's io_wait: one kind of call (enum sb_io_call) on one
 * file by the step's critical thread, from iosys records that name their file
 * (schemas/trace.md). Older traces have none.
 */
#define ENG_MAX_IO 3
#define ENG_IO_PATH_MAX (2 * SB_IO_PATH_LEN)
struct eng_io {
	uint8_t call;            /* enum sb_io_call */
	uint8_t kind;            /* enum sb_file_kind */
	uint32_t calls;          /* calls that took some of the blamed time */
	uint64_t ns;             /* io_wait blamed to those calls */
	uint64_t bytes;          /* bytes they returned (read, write: done; fsync: 0) */
	/*
	 * Bytes the target wrote to the file (every write, fast ones included)
	 * between the last recorded call on it before the step and the last one
	 * in it: for a checkpoint, what this step wrote.
	 */
	uint64_t written;
	char path[ENG_IO_PATH_MAX]; /* "/ckpt/model.pt"; "" when it has none (socket, pipe) */
};

/*
 * Who moved the critical thread, for the step's migration time: its own
 * sched_setaffinity() call, another thread's of the target (a sched_setaffinity
 * on it), or the scheduler (load balancing, the stopper without any such call).
 */
enum eng_move_how { ENG_MOVE_NONE, ENG_MOVE_SELF, ENG_MOVE_THREAD, ENG_MOVE_SCHEDULER };
const char *eng_move_how_name(int how); /* "self", "thread", "scheduler" */
#define ENG_MAX_MOVES 2
struct eng_move {
	uint8_t how;             /* enum eng_move_how */
	uint32_t by_tid;         /* self, thread: the caller of sched_setaffinity */
	char by_comm[SB_COMM_LEN + 1];
	int32_t from_cpu, to_cpu; /* the last such move in the step; -1 not seen */
	uint64_t ns;             /* migration time after moves of this kind (and in the calls) */
};

/*
 * The interrupts behind a step's irq time: a softirq vector ("NET_RX",
 * "TIMER", ...) or a hard interrupt's handler, on the critical thread's time.
 */
#define ENG_MAX_IRQS 3
enum eng_irq_kind { ENG_IRQ_SOFTIRQ, ENG_IRQ_HARD, ENG_IRQ_SYSTEM };
const char *eng_irq_kind_name(int kind); /* "softirq", "hard", "system" */
struct eng_irq {
	uint8_t kind;            /* enum eng_irq_kind */
	uint32_t irq;            /* hard: its number */
	/*
	 * softirq: the vector's name ("NET_RX"); hard: the handler's ("" unknown);
	 * system: "local_timer", "call_function", "reschedule", "irq_work"
	 */
	char name[SB_COMM_LEN + 1];
	uint16_t cpu;            /* the CPU it ran on (the last, where several) */
	uint64_t ns;             /* irq time blamed to it */
};

/*
 * The mapping behind a step's page_fault time: one mmap()ed region of the
 * capture (mmsys records that say what they mapped), by the critical thread's
 * faults in it. Faults elsewhere (memory mapped before the capture, brk) have none.
 */
#define ENG_MAX_MAPS 3
struct eng_map {
	uint64_t addr, len;      /* the region mmap returned */
	bool anon;               /* MAP_ANONYMOUS; else the file in path/kind */
	uint8_t kind;            /* file: enum sb_file_kind */
	bool step_known;         /* mapped inside a step (step_number): else before the first */
	uint64_t step_number;    /* the step it was mapped in (eng_step.step) */
	uint32_t faults;
	uint64_t ns;             /* page_fault time of those faults */
	char path[ENG_IO_PATH_MAX];
	uint32_t pid;            /* the process whose mapping it is */
	uint8_t region;          /* enum eng_region: read from /proc/PID/maps; 0: mmap()ed in the capture */
	bool before_capture;     /* region: there when the capture started (else found during it) */
};

/* what a region read from /proc/PID/maps is (schemas/trace.md, "mapping" kind) */
enum eng_region {
	ENG_REGION_NONE = 0,     /* not read from maps: mmap()ed during the capture */
	ENG_REGION_FILE,
	ENG_REGION_SHM,
	ENG_REGION_ANON,
	ENG_REGION_HEAP,
	ENG_REGION_STACK,
	ENG_REGION_OTHER,
	ENG_NREGION
};
const char *eng_region_name(unsigned region);

/*
 * The hot-path audit (docs/ARCHITECTURE.md, "Hot-path audit"): what a thread
 * that launches work (it marks steps, or launches kernels and copies) did in
 * a step, over the whole step, GPU busy or not.
 */
enum eng_audit_kind {
	ENG_AUD_ALLOC,      /* allocator calls seen: slow ones, and fast ones in recorded bursts */
	ENG_AUD_MMAP,       /* mmap family syscalls (every one is recorded) */
	ENG_AUD_FAULTS,     /* user page faults */
	ENG_AUD_MIGRATIONS, /* moves to another CPU */
	ENG_AUD_SLEEPS,     /* voluntary sleeps: off its CPU asleep (S or D) */
	ENG_AUD_IO,         /* I/O syscalls slower than the recorder's threshold */
	ENG_NAUDIT,
};
/* "alloc_calls", "mmap_calls", "page_faults", "migrations", "sleeps", "io_calls" */
const char *eng_audit_name(int k);
#define ENG_MAX_AUDIT 4
struct eng_audit {
	uint32_t tid;
	uint32_t n[ENG_NAUDIT];
	/*
	 * n[ENG_AUD_ALLOC] is exact: the thread marked the step at both ends with
	 * its count of fast calls (the difference, plus its slow calls). Else
	 * the fast calls are those of its bursts that reached the trace, a
	 * lower bound.
	 */
	bool alloc_exact;
};

/* room for every cause without a culprit, and a few culprits */
#define ENG_MAX_BLAME 24

struct eng_step {
	uint64_t index;          /* 0, 1, 2 ... in order */
	uint64_t step;           /* the step number from the mark */
	uint64_t start_ns, end_ns, duration_ns;
	uint64_t gpu_busy_ns, gpu_idle_ns;
	bool gpu_timeline;       /* false: host-only, blame covers the whole step */
	bool incomplete;         /* the capture ended inside it */
	/*
	 * The trace was cut short before the GPU records of its end were in
	 * (eng_capture.gpu_cut_steps): incomplete too; its GPU busy time and
	 * blame are not known, and count in no total
	 */
	bool gpu_cut;
	/*
	 * It ended before the first GPU operation read (eng_capture.gpu_before_steps):
	 * incomplete too, counted in no total, as a gpu_cut step
	 */
	bool gpu_before;
	bool tail;               /* > median + 3 MAD (of the steps so far; after engine_finish: all) */
	uint32_t crit_tid;       /* the thread that carried most of the blamed time */
	char crit_comm[SB_COMM_LEN + 1];
	uint64_t cause_ns[ENG_NCAUSE];
	uint32_t count[ENG_NCOUNT];
	uint32_t nblame;
	const struct eng_blame *blame; /* nblame (<= ENG_MAX_BLAME), by ns, descending; sums to cause_ns */
	/*
	 * The tracer's own cost in the step, estimated: the target's events in it,
	 * each class times its cost per event (the trace's costs record). CPU time
	 * taken from the target's threads: the step is longer by at most this.
	 */
	uint64_t tracer_ns;
	uint64_t tracer_events;
	bool alloc_sampled;      /* the overhead guard had the allocator probes duty-cycled */
	/* ...and yet they were attached throughout the step: its allocator counts are whole */
	bool alloc_observed;
	uint32_t nio;
	const struct eng_io *io; /* nio (<= ENG_MAX_IO), by ns, descending */
	uint32_t nmoves;
	struct eng_move moves[ENG_MAX_MOVES]; /* by ns, descending */
	uint32_t nmaps;
	const struct eng_map *maps; /* nmaps (<= ENG_MAX_MAPS), by ns, descending */
	uint32_t nirqs;
	const struct eng_irq *irqs; /* nirqs (<= ENG_MAX_IRQS), by ns, descending */
	/* the launching threads alive in the step, in the order they became such */
	uint32_t naudit;
	const struct eng_audit *audit; /* naudit (<= ENG_MAX_AUDIT) */
};

/*
 * Who and where a trace is (the recorder's host and target records): so that
 * reports from many nodes line up with each other and with other tools'
 * traces. Strings as the trace holds them ("" where it does not), bounded.
 */
#define ENG_ID_MAX 64
struct eng_identity {
	char host[ENG_ID_MAX + 1];
	char boot_id[ENG_ID_MAX + 1];
	char version[ENG_ID_MAX + 1];       /* the recorder's stepblame */
	bool have_realtime;
	int64_t realtime_offset_ns;         /* CLOCK_REALTIME - CLOCK_MONOTONIC at capture start */
	uint32_t agent_pid;                 /* the recorder's own pid (0: not known) */
	char job[ENG_ID_MAX + 1];           /* the trainer's launcher's ids (capture/target.h) */
	char rank[ENG_ID_MAX + 1];
	char local_rank[ENG_ID_MAX + 1];
	char world_size[ENG_ID_MAX + 1];
};

/* a cause's excess over the median step */
struct eng_excess {
	uint8_t cause;
	uint64_t ns;
	bool has_who;
	struct eng_who who;      /* the step's biggest culprit for that cause */
	uint32_t processes;      /* the culprit's eng_blame.processes */
};


/* a committed gap (eng_timeline_hooks.gap) */
struct eng_gap {
	uint64_t step;           /* the step's number (eng_step.step) */
	uint32_t critical_tid;   /* 0: none */
	uint64_t start_ns, end_ns;
	uint64_t cause_ns[ENG_NCAUSE]; /* the critical thread's time by cause; unknown: the rest */
};

/* a GPU operation (eng_timeline_hooks.gpu_op) */
struct eng_gpu_op {
	uint32_t device, stream;
	uint16_t kind;           /* enum sb_gpu_kind: SB_GPU_KERNEL, SB_GPU_MEMCPY or SB_GPU_MEMSET */
	const char *name;        /* the kernel's name; NULL if not known */
	uint32_t correlation_id;
	uint32_t launcher_tid;   /* the thread that issued it, 0 if not known */
	uint32_t launcher_pid;   /* its process (its track's: the target's), with launcher_tid */
	uint64_t launch_ns;      /* when it was issued (the API call's start), with launcher_tid */
	uint64_t start_ns, end_ns;
};

struct engine;

/*
 * A user stack captured at an event (trace record "stack"): the event is
 * (tid, ev_type, ts); ip[0] is the innermost frame.
 */
struct eng_stack {
	uint32_t tid;
	uint16_t ev_type;        /* enum sb_type */
	bool truncated;          /* deeper than it holds */
	uint64_t start_ns, ts;   /* the event's interval (start_ns == ts: an instant) */
	uint32_t nframes;
	const uint64_t *ip;
	uint32_t pid;            /* the thread's process */
};

/* the trace's host and target ids (struct eng_identity) */
void engine_identity(const struct engine *e, struct eng_identity *id);

/*
 * The stacks of thread tid (0: every thread) whose event ends in [lo, hi], in
 * the order they were fed; at most max into out, returns how many. The
 * engine keeps the last ENG_STACKS_MAX stacks of a capture.
 */
#define ENG_STACKS_MAX 65536
int engine_stacks(const struct engine *e, uint32_t tid, uint64_t lo, uint64_t hi,
		  struct eng_stack *out, int max);
/*
 * The same stacks in an array of their own, sized to them (free() it); NULL
 * and *n = 0 when there are none, or no memory. A step's few stacks cost a
 * step's few entries, not a capture's worth.
 */
struct eng_stack *engine_stacks_copy(const struct engine *e, uint32_t tid, uint64_t lo,
				     uint64_t hi, int *n);

/* an executable file mapping of the target or a followed child (trace record "mapping") */
struct eng_mapping {
	uint64_t ts;             /* when it was read */
	uint64_t start, end, offset;
	const char *path;
	const char *build_id;    /* hex, "" if not known */
	bool deleted;
	uint64_t dev, ino;       /* the mapped file (dev_t; 0, 0: not recorded) */
	uint32_t pid;            /* the process it is a mapping of */
	/* the vDSO ("[vdso]" in path): its functions, "OFF+SIZE NAME,..." (schemas/trace.md); else NULL */
	const char *funcs;
};

uint32_t engine_nmappings(const struct engine *e);
const struct eng_mapping *engine_mapping(const struct engine *e, uint32_t i);

/* a JIT symbol (trace record "perfmap"): [start, start + size) is name */
struct eng_jitsym {
	uint64_t start, size;
	const char *name;
};

uint32_t engine_njitsyms(const struct engine *e);
const struct eng_jitsym *engine_jitsym(const struct engine *e, uint32_t i);

struct engine *engine_new(const struct engine_opts *o, char *err, size_t errlen);
void engine_free(struct engine *e);

/* any record: kernel events, GPU records, text records, trailer */
void engine_feed(struct engine *e, const struct sb_hdr *rec);
/*
 * Live: every record of an event before now_ns has been fed. The clock moves
 * on with no record (steps finalise during silence), and the reorder window
 * is released no further than now_ns less the lag, whatever newer records
 * came from another source (docs/ARCHITECTURE.md, "Reorder window").
 */
void engine_advance(struct engine *e, uint64_t now_ns);
/* a GPU timeline will come (its channel is read from now on): hold records for lag_ns */
void engine_gpu_expected(struct engine *e);
/* how late a record may arrive now, ns (engine_opts.host_lag_ns, lag_ns) */
uint64_t engine_lag(const struct engine *e);
/* the trace was cut short (no trailer): why, in one line */
void engine_set_truncated(struct engine *e, const char *why);
/*
 * End of input: flush every step (the last one may be incomplete) and judge
 * them all (engine_summarise). Results are final: the outputs only read them.
 */
void engine_finish(struct engine *e);

/*
 * Called once per step when it is final, in step order. tail and the excess
 * are judged against the steps seen so far (the report judges against all).
 */
typedef void (*engine_step_cb)(void *ctx, const struct eng_step *s);
void engine_set_step_cb(struct engine *e, engine_step_cb cb, void *ctx);

/* ---- results, after engine_finish (or so far, live) ---- */

/* steps finalised so far (all of them, also in window mode) */
uint64_t engine_nsteps(const struct engine *e);
/* step i, NULL if i >= engine_nsteps() or it is no longer kept (i < engine_first_step()) */
const struct eng_step *engine_step(const struct engine *e, uint64_t i);
/* the oldest step still kept in detail: 0 unless window mode has dropped some */
uint64_t engine_first_step(const struct engine *e);

struct eng_interferer {
	uint32_t pid;
	char comm[SB_COMM_LEN + 1];
	uint64_t ns;
	bool own;                /* a thread of the target itself */
	bool tracer;             /* the recorder itself (eng_identity.agent_pid) */
	bool realtime;           /* ran in a real-time class (engine_task_realtime) */
};

enum eng_dip { ENG_DIP_NONE, ENG_DIP_PERIODIC, ENG_DIP_SPORADIC, ENG_DIP_LOW, ENG_DIP_UNKNOWN };

struct eng_summary {
	uint64_t nsteps, ncomplete;
	uint64_t p50, p90, p99, p999, max, min, mad;
	double p99_over_p50;
	uint64_t tail_threshold_ns;
	uint64_t ntail;
	uint64_t cause_median[ENG_NCAUSE]; /* per cause, over complete steps */
	uint64_t cause_total[ENG_NCAUSE];  /* over all steps */
	uint64_t idle_median;
	uint64_t busy_total, dur_total;    /* GPU-timeline steps only */
	double gpu_busy_share;             /* busy_total / dur_total, -1 without a timeline */
	int dip;                           /* enum eng_dip */
	uint64_t dip_period;               /* steps, when periodic */
	uint64_t ndips;
	double dip_busy_median;            /* median busy share of the steps, -1 if none */
	/* the tracer's estimated cost, over complete steps; shares in parts per million */
	uint64_t tracer_median_ns, tracer_total_ns;
	uint64_t tracer_p50_ppm, tracer_p99_ppm, tracer_max_ppm;
	uint64_t sampled_steps;            /* steps with the allocator probes duty-cycled */
	/*
	 * Window mode (engine_opts.keep_steps, or a trace of more than
	 * ENG_EXACT_STEPS_MAX steps): only steps first_kept.. are kept in
	 * detail. The counts, totals, percentiles, MAD, medians, tracer shares
	 * and ntail are then over all nsteps steps, the percentiles and medians
	 * from a log histogram (within pct_error of the exact value, relative);
	 * the tail flags, dips and the step list cover the kept steps.
	 */
	bool windowed;
	uint64_t first_kept;
	double pct_error;
};

/*
 * Percentiles, tail flags, dips over all steps. After engine_finish (which
 * judges the tail and sets eng_step.tail): the final summary; before it, the
 * steps so far, their tail flags left as they are.
 */
void engine_summarise(const struct engine *e, struct eng_summary *s);
/*
 * Are a and b, culprits of cause, the same task, or tasks of one name that
 * nothing else tells apart (a fork storm)? The target's threads, the
 * recorder's and the followed processes named by role stay apart; cpu_wait,
 * and blocked through one waker, group (schemas/report.md,
 * "interferer_groups").
 */
bool engine_who_grouped(const struct engine *e, int cause, const struct eng_who *a,
			const struct eng_who *b);
/* the step's causes over the medians in s, largest first; returns how many */
int engine_step_excess(const struct engine *e, const struct eng_step *st,
		       const struct eng_summary *s, struct eng_excess *out, int max);
/* interferers by time stolen, largest first; returns how many (at most max) */
int engine_interferers(const struct engine *e, struct eng_interferer *out, int max);

/*
 * The interferers as a user asks "who": the entries of one process (threads
 * named apart, or a task that renamed itself) as one, and the processes of one
 * name that nothing else tells apart (a fork storm: a short-lived process per
 * command) as one. The target's threads, the recorder's and the followed
 * processes whose role names them one by one (DataLoader workers, ranks) stay
 * apart (schemas/report.md, "interferer_groups").
 */
#define ENG_GROUP_NAMES 3
struct eng_interferer_group {
	uint32_t pid;            /* its process; 0 where the group has several */
	uint32_t processes;      /* processes in it, at least 1 */
	char comm[SB_COMM_LEN + 1]; /* the name that took the most */
	/* its other names, most time first: nnames in all, the first ENG_GROUP_NAMES here */
	char names[ENG_GROUP_NAMES][SB_COMM_LEN + 1];
	uint32_t nnames;
	uint64_t ns;
	bool own, tracer, realtime;
};
int engine_interferer_groups(const struct engine *e, struct eng_interferer_group *out, int max);

/*
 * The interrupt sources of the run (docs/ARCHITECTURE.md, "Interrupts"): each
 * (kind, name, CPU)'s irq time over the steps, the first ENG_IRQ_TOTALS_MAX
 * met; most time first. Returns how many were written to out.
 */
#define ENG_IRQ_TOTALS_MAX 16
int engine_irq_totals(const struct engine *e, struct eng_irq *out, int max);

struct eng_target {
	uint32_t pid;
	char comm[SB_COMM_LEN + 1];     /* at attach (the trace's target record) */
	/* its main thread's at the end, where an exec or a rename changed it; "" if not */
	char comm_end[SB_COMM_LEN + 1];
	const char *cmdline;     /* "" if unknown */
};
void engine_target(const struct engine *e, struct eng_target *t);

/*
 * Was task tid, named comm, seen running in a real-time class (SCHED_FIFO,
 * SCHED_RR, SCHED_DEADLINE) where a target thread waited behind it (trace
 * record runslice, SB_RUNSLICE_REALTIME)? Such a task preempts the fair
 * class whatever the nice values.
 */
bool engine_task_realtime(const struct engine *e, uint32_t tid, const char *comm);

/* the name to show it by: the one it has now, where that changed */
static inline const char *eng_target_name(const struct eng_target *t)
{
	return t->comm_end[0] ? t->comm_end : t->comm;
}

/*
 * A followed process other than the target, named by its role where the
 * trace says it (schemas/report.md, "Child processes and what a waker did"):
 * "DataLoader worker 1 of python3[29216]" (its main thread is PyTorch's
 * pt_data_worker), "rank 3 of torchrun[29100]" (its environment gives it a
 * rank its parent's does not), "multiprocessing child 2 of python3[29216]"
 * (its command line is a multiprocessing spawn child's, not its parent's),
 * "child process 1 of python3[29216]" (forked, nothing better known; the
 * number counts the children of that parent with the same role in the order
 * they were seen).
 * False (buf "") for the target and processes the trace does not describe.
 */
bool engine_process_name(const struct engine *e, uint32_t pid, char *buf, size_t len);
/* the parent of a followed process; 0 if not known */
uint32_t engine_process_parent(const struct engine *e, uint32_t pid);
/*
 * A file a waker's activity names (eng_act.io_path, fault_path): "" for 0 or
 * an id it never gave. The engine keeps the first ENG_ACT_PATHS_MAX such
 * names; past them a waker's I/O is told without its file.
 */
#define ENG_ACT_PATHS_MAX 64
const char *engine_act_path(const struct engine *e, uint32_t id);

#define ENG_MARK_OTHERS_MAX 8
struct eng_capture {
	uint64_t start_ns, end_ns;
	bool complete;           /* a trailer was seen */
	const char *end_reason;  /* "duration", "signal", "target_exit", "error", "cut_short" */
	const char *truncated;   /* why it was cut short, NULL if not */
	int step_source;         /* enum eng_step_src */
	/*
	 * The process whose USDT/uprobe marks are the steps (the target once
	 * it marks, else the first that marked; 0 for none): the target, or a
	 * followed descendant (a launcher's trainer). Marks of other processes are not steps:
	 * marks_ignored of them, from marks_other (nmarks_other; more besides
	 * when marks_other_more).
	 */
	uint32_t mark_pid;
	uint64_t marks_ignored;
	/*
	 * Times the marking process exited and another, that had not marked
	 * while it lived, began to (a restart under a launcher): mark_pid is
	 * the last; each one's last step is incomplete
	 */
	uint32_t mark_restarts;
	/*
	 * Steps whose number was not above the step's before: numbers_back of
	 * them (numbers that restart each epoch), numbers_same of those with the
	 * very same number (marked twice in an iteration?)
	 */
	uint64_t numbers_back, numbers_same;
	/*
	 * Marks whose number skipped forward where the numbers had gone up by
	 * one (numbers_skips of them, numbers_missing numbers never marked: the
	 * marks of a new program not yet probed after an exec, marks lost): the
	 * step before each holds the unmarked steps' time and is incomplete
	 */
	uint64_t numbers_skips, numbers_missing;
	const uint32_t *marks_other;
	uint32_t nmarks_other;
	bool marks_other_more;
	bool gpu_timeline;       /* any GPU operation seen */
	uint64_t records;        /* records fed */
	/*
	 * A trace cut short (engine_set_truncated) with a GPU timeline: the
	 * newest end of a GPU operation fed, how far its GPU records are known
	 * to reach; the steps that end after it are gpu_cut_steps, incomplete
	 * (eng_step.gpu_cut). 0 and 0 otherwise.
	 */
	uint64_t gpu_reached_ns;
	uint64_t gpu_cut_steps;
	/*
	 * With a GPU timeline: steps that ended before the oldest GPU operation
	 * fed began (gpu_from_ns; the GPU channel was read from later on than
	 * the steps were), incomplete (eng_step.gpu_before). 0 and 0 otherwise.
	 */
	uint64_t gpu_from_ns;
	uint64_t gpu_before_steps;
};
void engine_capture(const struct engine *e, struct eng_capture *c);

struct eng_loss {
	uint64_t ring[SB_EV_KERNEL_MAX + 1]; /* ring buffer full, by event type */
	uint64_t gpu_channel, gpu_source, wait_overflow;
	uint64_t late;           /* records that arrived after their time was final */
	uint64_t inferred;       /* switch-ins missing from the trace, inferred from runslices */
	uint64_t malformed;      /* records too short for their type */
	uint64_t gpu_rejected;   /* GPU records with times outside the capture (engine_opts) */
	uint64_t total;          /* all of the above */
	uint32_t nprobes_missing;
	const char *const *probes_missing; /* "NAME DETAIL" of probes that did not attach */
};
void engine_loss(const struct engine *e, struct eng_loss *l);

enum eng_fault_method { ENG_FAULT_DEFAULT, ENG_FAULT_CALIBRATED, ENG_FAULT_GIVEN };
struct eng_fault_model {
	int method;              /* enum eng_fault_method */
	uint64_t per_fault_ns;   /* the cost charged to a fault that did not block */
	uint64_t samples;        /* back-to-back faults it was calibrated on */
	uint64_t blocked;        /* faults that blocked: their sleep was measured */
};
void engine_fault_model(const struct engine *e, struct eng_fault_model *m);

/* the per-event costs the estimate uses; true if the trace gave them (else defaults) */
struct sb_costs;
bool engine_costs(const struct engine *e, struct sb_costs *c);

/* the overhead guard as the trace tells it */
struct eng_guard {
	bool known;              /* the trace has guard records */
	int mode;                /* enum sb_guard_mode: the last state */
	uint64_t limit_ppm, estimate_ppm, duty_ppm;
	uint64_t calls_seen, calls_estimated;
	uint64_t changes;        /* mode changes */
	uint64_t first_sampled_ns; /* when it first duty-cycled the probes; 0 never */
	uint64_t max_estimate_ppm; /* the highest estimate it saw */
};
void engine_guard(const struct engine *e, struct eng_guard *g);

/*
 * What the engine's own bounds left out: memory is bounded by the threads
 * alive, the reorder window and these caps, not by the ids a trace names.
 * All 0 on ordinary input.
 */
struct eng_limits {
	uint64_t threads_forgotten;     /* exited threads whose state was dropped to make room */
	uint64_t thread_records_lost;   /* records of threads not followed: the table was full */
	uint64_t strings_dropped;       /* string records (kernel, NVTX names) not kept */
	uint64_t kernel_shapes_dropped; /* kernels of a (name, grid, block) past the cap: no usual time */
	uint64_t interferers_folded;    /* small interferers folded into interferers_other_ns */
	uint64_t interferers_other_ns;
	uint64_t probes_dropped;        /* probe-not-attached records past the cap */
	uint64_t window_flushes;        /* reorder buckets swept early: records piled up at one time */
};
void engine_limits(const struct engine *e, struct eng_limits *l);
/* true when any of the above is set (the report then says what was capped) */
bool eng_limits_any(const struct eng_limits *l);

/* how much the engine holds now and at most (the streaming bound) */
struct engine_stats {
	uint64_t records;
	uint64_t queued, queued_peak;          /* records waiting in the reorder window */
	uint64_t queue_bytes, queue_bytes_peak;
	uint64_t threads, runslices, runslices_peak, episodes, episodes_peak;
	uint64_t pieces_peak, steps_in_flight_peak;
	uint64_t heap_bytes;                    /* bytes the engine owns now */
	uint64_t heap_bytes_peak;
};
void engine_stats(const struct engine *e, struct engine_stats *s);

/* a thread's name as last seen ("" if not known, or its state was dropped) */
const char *engine_thread_name(const struct engine *e, uint32_t tid);

/*
 * The threads followed now (the target's and its followed processes'), in the
 * order they were met, with their names ("" if none).
 */
void engine_each_thread(const struct engine *e,
			void (*fn)(void *ctx, uint32_t tid, const char *comm), void *ctx);

/*
 * A summary of the last 1,024 steps (live: tail judged on them), cheap enough
 * per step: taken again once a sixteenth of them are new, without dips.
 */
void engine_running_summary(const struct engine *e, struct eng_summary *s);

#endif
