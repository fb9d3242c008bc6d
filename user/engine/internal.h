/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The engine's insides, shared by its rooms (engine.c says how it works, in
 * order). Not for use outside user/engine/: engine.h is the interface.
 */
#ifndef STEPBLAME_ENGINE_INTERNAL_H
#define STEPBLAME_ENGINE_INTERNAL_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/util.h"
#include "engine/engine.h"
#include "format/costs.h"
#include "format/gpu.h"
#include "format/trace.h"

/* part * num / den, without overflow; part where den is 0 */
static inline uint64_t share(uint64_t part, uint64_t num, uint64_t den)
{
	return den ? (uint64_t)((unsigned __int128)part * num / den) : part;
}

/* a + b, at most UINT64_MAX: a trace's counters and times are the input's to set */
static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

#define BUCKET_SHIFT 20                     /* ~1.05 ms buckets */
#define CANDIDATES_MAX 16
/* culprits an accumulator names, at most (a busy machine preempts a long step with hundreds) */
#define CULPRITS_MAX 256
#define PENDING_MAX 8
#define OVERLAYS_MAX 16
#define BURSTS_MAX 4
#define IRQ_BURSTS_MAX 8 /* an interrupt run's sources (sb_irq_run) */
#define FAULT_CALIB_MIN 64
#define FAULT_HIST_PER_OCTAVE 16
#define FAULT_HIST_OCTAVES 21
#define CORR_SLOTS 65536
#define RESULTS_PER_CHUNK 1024
#define BLAME_CHUNK 4096

enum thread_state { TS_UNKNOWN, TS_RUNNING, TS_RUNNABLE, TS_SLEEP_S, TS_SLEEP_D, TS_DEAD };
/* EP_THROTTLED: runnable, as EP_RUN, while its cgroup's CPU quota was used up */
enum { EP_RUN = 1, EP_SLEEP_S, EP_SLEEP_D, EP_THROTTLED };

struct episode {
	uint64_t s, e;
	uint64_t emax;           /* the largest e pushed up to this one (lets wakeup_chain() skip) */
	uint32_t wpid, wtid;     /* sleeps: the waker */
	uint16_t cpu;
	uint8_t kind;
};

struct overlay {
	uint64_t s, e;
	uint8_t cause;
	uint8_t io_call;         /* an I/O call naming its file: enum sb_io_call, else 0 */
	uint32_t io_file;        /* 1 + its index in e->io_files */
	uint32_t io_seq;         /* the call's number (counted once per accumulator) */
	uint64_t io_bytes, io_written; /* its ret; the file's bytes written in the step so far */
};

/* a file met in iosys records (its counter of bytes written, for eng_io.written) */
struct io_file {
	uint64_t ino;
	uint32_t dev;
	uint8_t kind;
	uint64_t last_written;   /* the counter in its last record */
	uint64_t base_written;   /* ...in its last record before step step_seq */
	uint64_t step_seq;
	uint64_t used;           /* when last met (e->io_seq): the least recent is replaced */
	uint64_t made;           /* e->io_files_made when it took its slot: who names it checks */
	char path[ENG_IO_PATH_MAX];
	uint32_t act_path;       /* its engine_act_path() id, 0: not asked yet */
};

/* migration time by who moved the thread, in an accumulator */
#define MOVES_MAX 4
struct move_use {
	uint8_t how;             /* enum eng_move_how */
	uint32_t by;
	int16_t from, to;
	uint64_t ns;
};

/* a region mmap()ed during the capture (struct sb_mmsys_map) */
#define MAPS_MAX 256
#define COPIES_MAX 768           /* regions read from the maps that faults met (map_slot) */
struct map_region {
	uint64_t start, end;
	bool anon;
	uint8_t kind;
	bool step_known;
	uint64_t step_number;
	uint64_t used;           /* when last met: the least recent is replaced when full */
	uint64_t born;           /* e->map_seq when made: of overlapping ones the newest is there */
	bool gone;               /* unmapped: kept for the steps whose faults were in it */
	char path[ENG_IO_PATH_MAX];
	uint32_t pid;            /* the process it is a mapping of */
	uint8_t region;          /* from a mapping record (a seed): enum eng_region; 0: from mmap */
	bool before;             /* a seed there when the capture started */
	uint32_t act_path;       /* its engine_act_path() id, 0: not asked yet */
};

/*
 * A mapping read from /proc/PID/maps (trace record "mapping"): the regions
 * faults may hit that no mmap record of the capture made. Sorted by (pid,
 * start), apart per process; one that faults hit is copied into the regions
 * above (region != 0) for the steps to name.
 */
#define SEEDS_MAX 65536
struct map_seed {
	uint32_t pid;
	uint64_t start, end;
	uint8_t region;          /* enum eng_region */
	bool attach;             /* there when the capture started */
	char *name;
};

/* page_fault time by mapping in an accumulator */
#define MAP_USES_MAX 8
struct map_use {
	uint32_t map;            /* 1 + index in e->maps */
	uint64_t start;          /* the region's start, to tell a reused slot */
	uint32_t faults;
	uint64_t ns;
	uint64_t err;            /* of ns, taken over from the entry it replaced (map_use_of) */
};

#define IO_FILES_MAX 64
#define IO_USES_MAX 4

/* io_wait time by (file, call) in an accumulator */
struct io_use {
	uint32_t file;           /* 1 + index in e->io_files */
	uint8_t call;
	uint32_t calls, first_seq, last_seq;
	uint64_t ns, bytes, first_bytes, written;
};

/*
 * A burst of fast allocator calls (sb_alloc_burst): of the thread's on-CPU
 * time in [s, e] that nothing else explains, up to `left` ns is alloc (the
 * time the calls took together; for a storm, all of it), taken in time
 * order, whether a gap is open or not; the rest is host_compute.
 */
struct burst {
	uint64_t s, e, left;
	uint64_t tracer;         /* of left, the probes' own cost: its calls x the cost of one */
	uint64_t tracer_all, calls_ns; /* tracer at first, and the calls' own time (sum_ns) */
};

/*
 * A source of an interrupt run (sb_irq_run, docs/ARCHITECTURE.md,
 * "Interrupts"): of the thread's on-CPU time in [s, e] that nothing else
 * explains, up to `left` ns is irq, taken as a burst's (before the bursts)
 */
struct irq_burst {
	uint64_t s, e, left;
	uint64_t tracer, tracer_all, calls_ns; /* as struct burst; calls_ns: left at first */
	/* softirq vector; SB_NSOFTIRQ: a device's hard interrupt; SB_NSOFTIRQ + 1 + enum sb_sysirq */
	uint8_t src;
	uint16_t cpu;
	uint32_t irq;            /* hard: the longest one's number */
	char name[SB_COMM_LEN];  /* hard: its handler's name */
};

/* irq time by interrupt source, in an accumulator */
#define IRQ_USES_MAX 4
struct irq_use {
	uint8_t src;             /* as struct irq_burst */
	uint16_t cpu;
	uint32_t irq;
	char name[SB_COMM_LEN];
	uint64_t ns;
};

/*
 * What a followed thread did on a CPU (or asleep inside) besides its own code,
 * kept for the wakeup chains (waker_act_*, classify.c): a ring of the last
 * ACTS_MAX such intervals of every followed thread, back-to-back faults
 * merged into one.
 */
#define ACTS_MAX 64
#define ACT_RINGS_MAX 1024       /* threads that hold such a ring at one time */
struct act_iv {
	uint64_t s, e;
	uint64_t last;           /* faulting: the start of the last fault merged in */
	uint64_t maplen;         /* faulting in a known region: its length */
	uint64_t wait;           /* faulting: the thread's act_wait at `last` */
	/*
	 * io: 1 + its file's index in e->io_files, with its inode and device;
	 * faulting: 1 + its region's index in e->maps, with its start (a slot
	 * reused since names nothing). Named only when a wait is told.
	 */
	uint32_t ref, dev;
	uint64_t key;
	uint8_t kind;            /* ENG_ACT_FAULTING, _RECLAIM, _ALLOC, _IO */
	uint8_t io_call, io_kind; /* io: the call and its file's kind, 0 not named */
	uint8_t region;          /* faulting: 0 none known, 1 anon, 2 a file's */
};

struct thread {
	uint32_t tid, pid;
	char comm[SB_COMM_LEN + 1];
	bool sink;               /* stands for every thread the full table cannot follow */
	uint8_t state;
	bool migrated;           /* moved while runnable: the wait that follows is the move's */
	bool sleep_migrating;    /* the sleep began by handing the CPU to the migration stopper */
	/*
	 * Timed waits (docs/ARCHITECTURE.md, "Timed waits"): a sleep that a
	 * timer ended is held unresolved until the retry that follows it says
	 * who it waited for
	 */
	bool throttled;          /* runnable since a switch-out or wakeup into a used-up CPU quota */
	bool timed_defer;        /* such a sleep is held in the pending intervals */
	uint64_t timed_wake;     /* its wakeup: the held intervals end by then */
	uint64_t timed_in;       /* its switch-in after that wakeup (0: not yet) */
	uint64_t timed_start;    /* the switch-out that began the first sleep held */
	/* the last wait that a thread of its process ended: who, and when it ended */
	uint32_t chain_pid, chain_tid;
	char chain_comm[SB_COMM_LEN];
	uint64_t chain_at;
	uint16_t cpu;
	uint64_t since;
	/* made during the capture (a thread_new record): when, and by which thread */
	uint64_t new_ns;
	uint32_t new_by_pid, new_by_tid;
	/* history of off-CPU episodes, a ring */
	struct episode *episodes;
	uint32_t episodes_head, nepisodes, episodes_cap;
	uint64_t episodes_end_max; /* the largest episode end ever pushed */
	int candidate;           /* its index in e->candidates; -1: not a candidate */
	/* every followed thread: what it did besides its own code (struct act_iv) */
	struct act_iv *acts;
	uint32_t acts_head, nacts;
	bool act_fault_sleep;    /* asleep (D) inside its last fault: the fault lasts the sleep */
	uint64_t act_wait;       /* its time runnable, off its CPU, so far (EP_RUN episodes) */
	uint64_t act_slept;      /* the end of its last sleep */
	uint32_t act_map;        /* its last fault's region: 1 + index in e->maps, 0 none */
	uint32_t act_map_gen;    /* e->map_gen when act_map was found */
	/* candidates only */
	uint64_t last_cut;       /* its time is accounted up to here */
	struct overlay overlays[OVERLAYS_MAX];
	uint32_t noverlays;
	struct burst bursts[BURSTS_MAX];
	uint32_t nbursts;
	/* the page fault it is in: entered at fault_at, ends at fault_end once decided */
	bool fault_open, fault_decided, fault_blocked;
	uint8_t nirqb;           /* its interrupt runs' sources, in e->irqb[candidate] */
	uint64_t fault_at, fault_end;
	uint64_t last_major_faults; /* the thread's major fault counter at its last fault */
	bool major_faults_known;
	uint64_t affinity_end;   /* return of its last sched_setaffinity() */
	uint32_t fault_map;      /* its open fault's region: 1 + index in e->maps, 0 none */
	/* a fault run (host.c, ev_fault_run): the open fault's last entry (else fault_at) */
	uint64_t fault_last;
	/* its run's faults, counted as the time they fell in is accounted (run_count) */
	uint64_t run_first, run_span, run_n, run_counted, run_major;
	uint32_t run_map;
	/* the open fault's probes' cost not yet drawn as tracer, and all of it */
	uint64_t fault_tracer, fault_tracer_all;
	uint32_t fault_map_gen;  /* e->map_gen when fault_map was found */
	/* its last move, and who made it (eng_move) */
	uint8_t mv_how;
	uint32_t mv_by;
	int16_t mv_from, mv_to;
	/* a sched_setaffinity() on it, [aff_s, aff_e] by aff_by, whose move is not yet seen */
	bool aff_pending;
	uint64_t aff_s, aff_e;
	uint32_t aff_by;
	uint8_t last_ev;         /* type of the previous own event */
	uint64_t last_ev_ts;
	/* NVTX ranges pushed on this thread */
	uint32_t *nvtx;
	uint32_t nvtx_n, nvtx_cap;
	/* timeline: its slice in one state, being extended */
	const char *track_state;
	uint64_t track_start, track_end;
	/*
	 * A scheduler run (host.c, ev_sched_run) over [srun_s, srun_e]: what of
	 * its off-CPU time is not yet accounted, drawn in proportion as its span
	 * is (classify.c, account_srun); srun_e 0: none
	 */
	uint64_t srun_s, srun_e;
	uint64_t srun_sleep, srun_wait, srun_idle, srun_steal, srun_sleeps, srun_preempts;
	/* its waker and its runner (tid 0: none) */
	uint32_t srun_waker_pid, srun_waker_tid, srun_runner_pid, srun_runner_tid;
	char srun_waker_comm[SB_COMM_LEN], srun_runner_comm[SB_COMM_LEN];
};

/* a followed process other than the target (engine_process_name) */
struct proc_ids {
	char job[ENG_ID_MAX + 1], rank[ENG_ID_MAX + 1];
	char local_rank[ENG_ID_MAX + 1], world_size[ENG_ID_MAX + 1];
};

/* whose step marks are the steps, as they come (marks_owner) */
struct mark_owner {
	uint32_t pid;            /* the marking process; 0 before the first mark */
	bool gone;               /* its main thread has exited (as its user knows it) */
	uint32_t others[ENG_MARK_OTHERS_MAX]; /* processes that marked while it lived, the first */
	uint32_t nothers;
	bool others_more;        /* and more than those */
};

struct proc {
	uint32_t pid, ppid;
	uint32_t order;          /* its place among the processes noted (proc_note), from 1 */
	uint64_t born_ns;        /* the time of the record that first noted it */
	uint64_t gone_ns;        /* its main thread's exit (0: not seen) */
	char *cmdline;           /* NULL: not said */
	struct proc_ids *ids;    /* its launcher's ids, where its record said them (NULL: none) */
	bool torch_feeder;       /* its parent mapped a tensor it shared (proc_shm_note) */
	char comm[SB_COMM_LEN];  /* its main thread's name, once that thread is forgotten */
	char parent_comm[SB_COMM_LEN]; /* its parent's name when it came ("" not known) */
};

struct culprit {
	uint8_t cause;
	struct eng_who who;
	uint64_t ns;
};

struct pending_sleep {
	uint64_t a, b;
};

struct accum {
	uint64_t ns[ENG_NCAUSE];
	uint32_t count[ENG_NCOUNT];
	struct culprit *culprits;
	uint32_t nculprits, culprits_cap;
	/* a sleep not yet explained: its intervals, until the wakeup says why */
	struct pending_sleep pending[PENDING_MAX];
	uint32_t npending;
	uint8_t pending_state;   /* the thread's state in it (TS_SLEEP_S or TS_SLEEP_D) */
	uint64_t pending_extra;  /* time past the PENDING_MAX intervals */
	struct io_use io[IO_USES_MAX];
	uint32_t nio;
	struct move_use moves[MOVES_MAX];
	uint32_t nmoves;
	struct map_use maps[MAP_USES_MAX];
	uint32_t nmaps;
	struct irq_use irqs[IRQ_USES_MAX];
	uint32_t nirqs;
};

struct piece {
	uint64_t step_seq;
	uint64_t start, end;
	bool closed;
	struct accum accum[CANDIDATES_MAX]; /* one per candidate */
};

struct critical_time {
	uint32_t tid;
	uint64_t ns;
};

struct open_step {
	uint64_t seq, number;
	uint64_t start, end;
	bool ended, incomplete;
	uint32_t marker_tid;
	uint32_t open_pieces;
	uint64_t idle_ns, gpu_slow_ns;
	struct accum accum;      /* what its committed pieces hold */
	struct critical_time critical[8];
	uint32_t ncritical;
	uint32_t gpu_ops;
	uint64_t events_by_cost[SB_NCOST]; /* the target's events in it, by cost class */
	bool sampled;            /* the guard had the allocator probes duty-cycled in it */
	struct eng_audit audit[ENG_MAX_AUDIT]; /* its launching threads' counts (eng_step.audit) */
	uint32_t naudit;
	uint32_t burst_calls[ENG_MAX_AUDIT]; /* of audit[i].n[ENG_AUD_ALLOC], from bursts */
	/* the marking thread's fast allocator calls at its start mark, and in the step */
	uint64_t fast_at_start, fast_calls;
	bool fast_at_start_ok, fast_exact;
};

/* real-time tasks the engine remembers (engine_task_realtime): a machine has few */
#define ENG_RT_MAX 64

struct runslice {
	uint64_t s, e;
	uint64_t steal_ns;       /* of [s, e], the hypervisor's (trace record runslice) */
	uint32_t pid, tid;
	char comm[SB_COMM_LEN];
};

struct cpu_queue {
	struct runslice *slices; /* a ring, in time order */
	uint32_t head, n, cap;
};

struct queued {
	uint64_t key, seq;
	uint32_t len, pad;
};

/*
 * A bucket's records, in chunks of one size: a swept bucket's chunks go on a
 * free list for the next buckets (no allocation, and they are still in the
 * cache), so the memory is what the window held at most.
 */
#define BUCKET_CHUNK_BYTES 2048
struct bucket_chunk {
	struct bucket_chunk *next;
	uint32_t len, pad;
	uint8_t data[BUCKET_CHUNK_BYTES - 16];
};

struct bucket {
	struct bucket_chunk *head, *tail;
	uint32_t n;
};

struct queued_ref {
	uint64_t key, seq;
	const struct queued *q;
};

struct overflow_rec {
	uint64_t key, seq;
	void *rec;
	size_t len;                 /* of rec: the record's kept length (engine_feed) */
};

struct p2_quantile {
	int n;
	double q[5], np[5], dn[5];
	int pos[5];
};

struct kernel_shape {
	uint32_t name_id, grid[3], block[3];
	bool used;
	struct p2_quantile median; /* of its duration */
};

struct string {
	uint32_t id;
	uint32_t alloc;          /* bytes of text */
	char *text;
	bool nvtx, kernel, api;
};

struct interferer {
	uint32_t pid;
	char comm[SB_COMM_LEN + 1];
	uint64_t ns;
	bool used;
	bool realtime; /* one of its threads that took time ran in a real-time class */
};

/*
 * A chunk of results, with the variable-length detail of its steps (freed
 * together): for each kind, blocks of elements, newest first, made only once
 * a step has that detail; a step's detail is one run inside one block
 * (pool_store).
 */
enum { POOL_BLAME, POOL_IO, POOL_MAP, POOL_AUDIT, POOL_IRQ, POOL_KINDS };

struct pool_block {
	struct pool_block *next;
	size_t bytes;                 /* the block, header included (heap_account) */
	uint32_t used, cap;           /* elements */
	_Alignas(max_align_t) unsigned char b[];
};

struct result_chunk {
	struct eng_step s[RESULTS_PER_CHUNK];
	struct pool_block *pool[POOL_KINDS];
};

/*
 * Log histogram: values below HIST_SUB exact, above that HIST_SUB buckets per
 * octave, so a bucket is at most 1/HIST_SUB of its lower bound wide and its
 * middle within 1/(2 HIST_SUB) of any value in it.
 */
#define HIST_SUB 64
#define HIST_SHIFT 6               /* log2(HIST_SUB) */
#define HIST_N (HIST_SUB + (64 - HIST_SHIFT) * HIST_SUB)

struct hist {
	uint64_t n;
	uint64_t b[HIST_N];
};

/* window mode: summaries over every step, the detail of the last ones */
struct window_sums {
	uint64_t nsteps, ncomplete;
	uint64_t min, max;
	struct hist dur, idle, tracer, tracer_ppm, cause[ENG_NCAUSE];
	struct hist judged;       /* duration less the tracer time blamed: the tail judgement */
	uint64_t cause_total[ENG_NCAUSE];
	uint64_t busy_total, dur_total, tracer_total, sampled, tracer_ppm_max;
};

/* engine_running_summary's last summary (live engines; summary.c) */
struct running_cache {
	struct eng_summary sum;
	uint64_t at;             /* nresults when it was taken; 0: none yet */
};

struct engine {
	struct engine_opts opts;
	regex_t re_nvtx, re_kernel, re_api;
	bool has_nvtx, has_kernel, has_api;
	/*
	 * How late a record may arrive: lag now, lag_gpu once a GPU timeline is
	 * expected (engine_gpu_expected, or its first record), host_lag_ns before
	 */
	uint64_t lag, lag_gpu;
	uint64_t history_ns;      /* how far back thread and CPU histories reach */

	uint64_t records, seq;
	uint64_t max_ts;
	/*
	 * Every record before it has been fed (engine_advance, a drops record):
	 * the window releases no further while it holds WATERMARK_HOLD_BYTES or less
	 */
	uint64_t watermark;
	uint64_t first_ts;
	bool have_ts;

	/* the reorder window (reorder.c) */
	struct bucket *buckets;  /* a calendar: bucket i holds keys i, i + nbuckets, ... */
	uint32_t nbuckets;
	uint64_t next_bucket;    /* next bucket index (key >> BUCKET_SHIFT) to sweep */
	bool window_started;
	uint64_t queued, queued_peak, queued_bytes, queued_bytes_peak;
	struct queued_ref *order; /* the bucket being swept, sorted */
	size_t order_cap;
	uint64_t *bucket_bits;   /* buckets that hold records */
	uint64_t frontier_flushes;
	struct bucket_chunk *free_chunks;
	struct overflow_rec *overflow; /* records beyond the calendar's span: a heap */
	size_t noverflow, overflow_cap;

	/*
	 * The reorder window hands each record on, in time order, to sweep, and
	 * calls time_moved after each bucket (or run of empty ones) it has swept.
	 */
	void (*sweep)(struct engine *e, uint64_t key, const struct sb_hdr *rec);
	void (*time_moved)(struct engine *e);

	/* sweep */
	uint64_t now;
	bool in_release;

	/* threads */
	struct thread **threads;
	uint32_t nthreads, threads_cap;
	uint32_t *thread_hash;   /* index + 1, open addressing */
	uint32_t thread_hash_cap;
	struct thread *sink;     /* the table is full: what thread_get gives for a new thread */
	uint64_t table_misses;   /* since the last reclaim */
	bool table_reclaimed;    /* any reclaim tried */
	uint32_t threads_new_since; /* new threads since the last pass past THREADS_SOFT */
	uint64_t threads_forgotten, thread_records_lost;
	struct thread *candidates[CANDIDATES_MAX]; /* the threads that can be critical */
	/* each candidate's interrupt runs' sources (its thread's nirqb of them) */
	struct irq_burst irqb[CANDIDATES_MAX][IRQ_BURSTS_MAX];
	int ncandidates;
	uint64_t episodes, episodes_peak;

	/* CPUs */
	struct cpu_queue *cpus;  /* by CPU number */
	uint32_t ncpus;
	uint64_t runslices, runslices_peak;

	/* GPU */
	bool gpu_fed, gpu_started;
	uint64_t busy_until;
	bool gap_open;
	/* launches by correlation id (mod CORR_SLOTS): who issued it and when, not started yet */
	struct { uint32_t corr, tid; uint64_t ts; bool queued; } *launches;
	uint64_t gpu_queued;     /* operations launched that have not started on the GPU */
	uint32_t last_launch_tid;
	/* the step mark being handled: its thread's fast allocator calls (sb_step_alloc) */
	uint64_t mark_fast;
	uint32_t mark_fast_tid;
	/*
	 * The process whose marks (USDT, uprobe) are the steps (marks_owner): the
	 * target once it marks, else the first that marked, else one that began
	 * after it exited. Marks of other followed processes (ranks started by
	 * one launcher) are counted, not used.
	 */
	struct mark_owner marks;
	/*
	 * Times the marking process exited and one that had not marked while
	 * it lived began to (a trainer restarted under its launcher): its
	 * marks are the steps from then on (docs/ARCHITECTURE.md, "Step marks")
	 */
	uint32_t mark_restarts;
	uint64_t last_number;                      /* the number of the last step begun */
	bool number_seen;                          /* of this source (a better one starts anew) */
	uint64_t numbers_back, numbers_same;       /* eng_capture */
	uint64_t numbers_skips, numbers_missing;   /* eng_capture */
	uint32_t numbers_by_one;                   /* marks in a row one above the one before */
	/*
	 * The same, as records are fed (gone: its main thread's exit was fed):
	 * GPU and CUDA records of others are not the steps' (engine_feed,
	 * other_rank)
	 */
	struct mark_owner feed_marks;
	uint64_t marks_ignored;
	bool mark_fast_ok;
	/* the threads that launch work, alive, in the order they became such (hot-path audit) */
	uint32_t launchers[ENG_MAX_AUDIT];
	uint32_t nlaunchers;
	struct kernel_shape *kernel_shapes; /* (name, grid, block): usual duration */
	uint32_t kernel_shapes_cap, nkernel_shapes;
	uint64_t kernel_shapes_dropped;
	uint64_t gpu_max_end;
	/* the capture's clock: GPU records outside [clock_lo, clock_hi] +- margin are rejected */
	uint64_t clock_lo, clock_hi; /* clock_lo > clock_hi: nothing known yet */
	uint64_t gpu_rejected;

	/* strings */
	struct string *strings;
	uint32_t nstrings, strings_cap;
	uint32_t *string_hash;   /* index + 1, open addressing */
	uint32_t string_hash_cap;
	uint64_t string_bytes, strings_dropped;

	/* pieces of the open gap, oldest first */
	struct piece **pieces;   /* a ring */
	uint32_t pieces_head, npieces, pieces_cap;
	struct piece *current_piece;
	struct piece **free_pieces;
	uint32_t nfree_pieces, free_pieces_cap;
	uint64_t pieces_live, pieces_peak;

	/* steps */
	int step_source;         /* the source chosen (enum eng_step_src) */
	int forced_source;
	struct open_step **open_steps; /* in flight, oldest first: a ring */
	uint32_t open_steps_head, nopen_steps, open_steps_cap;
	struct open_step *current_step;
	uint64_t next_seq;
	uint64_t source_marks[ENG_SRC_API + 1]; /* marks seen, by source */
	uint64_t steps_flight_peak;
	struct result_chunk **results; /* in chunks of RESULTS_PER_CHUNK: never moved, no slack */
	uint64_t nresults, nchunks; /* steps finalised; chunks held */
	uint64_t results_cap;    /* room in results */
	uint64_t first_chunk;    /* absolute number of results[0] (window mode drops old chunks) */
	uint64_t keep_steps;     /* window mode: steps kept in detail at least; 0 all */
	struct window_sums *window_sums; /* window mode: summaries over all steps */
	engine_step_cb step_cb;
	void *step_cb_ctx;

	/* fault model */
	uint32_t fault_hist[FAULT_HIST_PER_OCTAVE * FAULT_HIST_OCTAVES]; /* back-to-back gaps */
	uint64_t fault_samples;
	uint64_t fault_cost;     /* current estimate */
	uint64_t faults_blocked;

	/* interferers */
	struct interferer *interferers; /* open addressing by (pid, comm) */
	uint32_t interferers_cap, ninterferers;
	/* the run's interrupt sources (engine_irq_totals), as steps name them */
	struct eng_irq irq_totals[ENG_IRQ_TOTALS_MAX];
	uint32_t nirq_totals;
	uint64_t interferers_folded, interferers_other_ns;

	/* target, capture, loss */
	uint32_t target_pid;
	char target_comm[SB_COMM_LEN + 1];
	char *target_cmdline;
	struct eng_identity identity;
	/* the followed processes other than the target, as thread records described them */
	struct proc *procs;
	uint32_t nprocs, procs_cap;
	uint32_t procs_noted;    /* processes noted so far (struct proc.order) */
	bool complete;
	uint32_t end_reason;
	uint64_t trailer_ts, trailer_start;
	char *truncated;
	uint64_t gpu_reach;      /* the newest end of a GPU operation fed */
	uint64_t gpu_cut_steps;  /* steps left incomplete for it (steps_gpu_cut) */
	uint64_t gpu_from;       /* the oldest start of a GPU operation fed */
	uint64_t gpu_before_steps; /* steps that ended before it, left incomplete (steps_gpu_cut) */
	struct sb_drops drops;
	bool have_drops;
	uint64_t late, malformed;
	uint64_t switch_ins_inferred; /* from runslices */
	/*
	 * tasks seen running in a real-time class in a runslice
	 * (SB_RUNSLICE_REALTIME), the first ENG_RT_MAX; by id and name, so a
	 * thread id reused in a days-long watch is not taken for the one before
	 */
	struct {
		uint32_t tid;
		char comm[SB_COMM_LEN];
	} rt[ENG_RT_MAX];
	uint32_t nrt;
	char **probes_missing;
	uint32_t nprobes_missing;
	uint64_t probes_dropped;
	bool finished;
	struct eng_summary final_summary; /* engine_finish: over all steps, final */
	struct running_cache *running;    /* engine_running_summary's last (summary.c) */

	/* the tracer's own cost: the model, the guard's mode changes (ts, mode) */
	struct sb_costs costs;
	uint64_t burst_call_floor; /* least time per call over the bursts of 64+ calls seen (host.c) */
	bool costs_given;
	bool fault_tracer_on;    /* the costs record prices fault runs: faults' probes are tracer */
	struct eng_guard guard;
	struct { uint64_t ts; int mode; } *guard_changes;
	uint32_t nguard_changes, guard_changes_cap, guard_change_next;
	int guard_mode_before;   /* the mode before guard_changes[guard_change_next] */
	/* sampled: the attached windows, [s, e] (guard records of reason window), in order */
	struct { uint64_t s, e; } *guard_windows;
	uint32_t nguard_windows, guard_windows_cap, guard_window_next;

	uint64_t heap, heap_peak;

	struct stack_store *stacks; /* user stacks, mappings, JIT symbols (stacks.c); NULL: none */
	/* the files of iosys records (allocated at the first that names one) */
	struct io_file *io_files;
	uint32_t nio_files;
	uint64_t io_files_made;
	/* the files the wakers' activities name (engine_act_path) */
	char (*act_paths)[ENG_IO_PATH_MAX];
	uint32_t nact_paths;
	uint32_t nact_rings;     /* threads holding a ring of struct act_iv */
	uint64_t act_rings_next;  /* when (e->now) rings may be taken back again */
	uint32_t io_seq;
	/* regions mmap()ed during the capture (allocated at the first such record) */
	struct map_region *maps;
	uint32_t nmaps, maps_cap;
	uint64_t map_seq;
	/* the mappings the trace's mapping records name (host.c, map_seed) */
	struct map_seed *seeds;
	uint32_t nseeds, seeds_cap;
	uint32_t map_gen;        /* regions mmap()ed so far: a seed found before one may be hidden by it */
};

typedef void (*runslice_fn)(struct engine *e, void *ctx, const struct runslice *r, uint16_t cpu,
			    uint64_t a, uint64_t b);

enum { MARK_ONE, MARK_BEGIN, MARK_END };

_Static_assert(ENG_MAX_BLAME >= ENG_NCAUSE, "a step must hold one entry per cause");

static inline void comm_copy(char *dst, const char *src)
{
	memcpy(dst, src, SB_COMM_LEN);
	dst[SB_COMM_LEN] = 0;
}

/* step i (absolute), which must still be held */
#define RESULT(e, i) \
	(&(e)->results[(i) / RESULTS_PER_CHUNK - (e)->first_chunk]->s[(i) % RESULTS_PER_CHUNK])

/* the first step still held (window mode drops the oldest) */
static inline uint64_t first_kept(const struct engine *e)
{
	return e->first_chunk * RESULTS_PER_CHUNK;
}

static inline uint64_t min64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static inline uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static inline uint32_t hash32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352dU;
	x ^= x >> 15;
	x *= 0x846ca68bU;
	x ^= x >> 16;
	return x;
}

/* the records the engine takes in: kernel events and the GPU timeline; 0 for others */
static inline size_t rec_size(unsigned type)
{
	return sb_type_is_engine_input(type) ? sb_type_size(type) : 0;
}

/* ---- memory (engine.c) */

void heap_account(struct engine *e, int64_t d);
/* the region of pid's memory at addr; map and gen cache the last one found (host.c) */
uint32_t map_at(struct engine *e, uint32_t pid, uint64_t addr, uint32_t *map, uint32_t *gen);
/* a mapping record: its region for the fault blame (host.c) */
void map_seed_record(struct engine *e, const struct sb_hdr *h, const char *s, size_t n);
void map_seeds_free(struct engine *e);
struct map_use *map_use_of(struct engine *e, struct accum *a, uint32_t map);
uint32_t map_use_spare(const struct engine *e, const struct map_use *m, uint32_t n, uint64_t ns);
void heap_grow(struct engine *e, void **p, uint32_t *cap, size_t need, size_t sz);
void *heap_calloc(struct engine *e, size_t n, size_t sz);
char *heap_strndup(struct engine *e, const char *s, size_t n);

/* ---- user stacks and what symbolises them (stacks.c) */

void stacks_record(struct engine *e, const struct sb_hdr *h);
void stacks_meta(struct engine *e, const struct sb_hdr *h, const char *s, size_t n);
/* pid made [lo, hi) code: a return address there may be real (stacks.c) */
void stacks_code_mapped(struct engine *e, uint32_t pid, uint64_t lo, uint64_t hi);
void stacks_free(struct engine *e);

/* ---- the reorder window (reorder.c) */

void reorder_init(struct engine *e);
void reorder_free(struct engine *e);
void reorder_release(struct engine *e, uint64_t upto);
void reorder_enqueue(struct engine *e, const struct sb_hdr *h, size_t len);

/* ---- threads and CPUs (threads.c) */

struct thread *thread_find(const struct engine *e, uint32_t tid);
/* the hot-path audit (steps.c): a thread launches work; it exited; a record counted */
void launcher_add(struct engine *e, uint32_t tid);
void launcher_gone(struct engine *e, uint32_t tid);
void audit_count(struct engine *e, const struct sb_hdr *h);
struct thread *thread_get(struct engine *e, uint32_t tid, uint32_t pid);
void proc_note(struct engine *e, uint32_t pid, uint32_t ppid, const char *cmd, size_t n,
	       uint64_t ts);
/* a followed process's main thread exited at ts */
void proc_gone(struct engine *e, uint32_t pid, uint64_t ts);
/* the job and rank ids a descendant's record said (its environment's); ids NULL: none */
void proc_ids_note(struct engine *e, uint32_t pid, const struct proc_ids *ids);
/* process pid mapped the file at path: a tensor shared by a child of it? */
void proc_shm_note(struct engine *e, uint32_t pid, const char *path);
void procs_free(struct engine *e);
const char *thread_name_of(const struct engine *e, uint32_t tid);
/* a followed process other than the target; NULL if pid is not one (threads.c) */
struct proc *proc_find(const struct engine *e, uint32_t pid);
/* a followed process whose role names it one by one (a DataLoader worker, a rank; threads.c) */
bool proc_named_apart(const struct engine *e, uint32_t pid);
/*
 * may process pid be one of a crowd of its name (not the target, the
 * recorder, or one named apart; steps.c, schemas/report.md "interferer_groups")
 */
bool proc_groups_by_name(const struct engine *e, uint32_t pid);
/* what a followed thread did besides its own code (struct act_iv, threads.c) */
void act_push(struct engine *e, struct thread *t, int kind, uint64_t s, uint64_t end);
void act_fault(struct engine *e, struct thread *t, uint64_t at, uint64_t addr);
void act_fault_run(struct engine *e, struct thread *t, uint64_t first, uint64_t last, uint64_t addr);
void act_switch_out(struct thread *t, uint8_t out_state, uint64_t ts);
void act_io_name(struct engine *e, struct thread *t, uint64_t s, uint8_t call, uint32_t file);
uint32_t act_name_of(struct engine *e, const struct act_iv *v);
uint32_t act_path_id(struct engine *e, const char *path);
void episode_push(struct engine *e, struct thread *t, uint8_t kind, uint64_t s, uint64_t end,
		  uint16_t cpu, uint32_t wpid, uint32_t wtid);
void runslice_push(struct engine *e, uint32_t cpu, const struct runslice *r);
uint64_t runslice_cover(struct engine *e, uint16_t cpu, uint64_t a, uint64_t b, runslice_fn fn,
			void *ctx);

/* ---- classification (classify.c) */

void accum_reset(struct accum *a);
void accum_free(struct engine *e, struct accum *a);
void accum_merge(struct engine *e, struct accum *dst, const struct accum *src);
void timeline_thread_flush(struct engine *e, struct thread *t);
bool is_stopper(const char *comm);
void thread_account(struct engine *e, struct thread *t, uint64_t to);
void account_candidates(struct engine *e, uint64_t t);
void resolve_sleep_accum(struct engine *e, struct thread *t, struct accum *a,
			 const struct sb_wakeup *wk);
void resolve_sleep(struct engine *e, struct thread *t, const struct sb_wakeup *wk);
/*
 * Timed waits: a held timeout is resolved as a plain sleep unless what follows
 * is its retry (a sleep into S starting within TIMED_RETRY_NS of the thread's
 * switch-in after it; retry false: t did something else)
 */
#define TIMED_WAIT_MAX_NS 20000000ULL
#define TIMED_RETRY_NS 500000ULL
void timed_check(struct engine *e, struct thread *t, uint64_t now, bool retry);
/* a run of folded trips of t from s: its sleeps may be the held timeout's retry */
void timed_retry_run(struct engine *e, struct thread *t, const struct sb_sched_run *r, uint64_t s);
/* h, asleep from slept_from, woken at `at` by waker: the hand-off that may end the waker's held timeout */
void timed_handoff(struct engine *e, const struct thread *h, uint32_t waker_pid, uint32_t waker_tid,
		   uint64_t slept_from, uint64_t at);
/* a run of folded trips of t that ended at end: its sleeps' waker, for the timeouts after it */
void chain_run(struct thread *t, const struct sb_sched_run *r, uint64_t end);

/* ---- steps (steps.c) */

void result_pools_free(struct engine *e, struct result_chunk *c);
struct piece *piece_new(struct engine *e, uint64_t step_seq, uint64_t start);
void piece_commit(struct engine *e, struct piece *p, uint32_t crit_tid);
uint32_t step_fallback_critical(struct engine *e, uint64_t step_seq);
void piece_pop(struct engine *e);
void pieces_commit_ended(struct engine *e, uint64_t older_than, bool all);
void steps_finalize_ready(struct engine *e);
void step_end(struct engine *e, uint64_t t, bool incomplete);
/*
 * Steps the GPU records do not cover are incomplete: in a trace cut short,
 * those that end after the GPU records stop; in any, those that ended before
 * the first GPU operation read (the GPU channel read from later on)
 */
void steps_gpu_cut(struct engine *e);
void step_mark(struct engine *e, int src, int kind, uint64_t number, uint64_t t, uint32_t tid);
/* a list of up to ENG_MARK_OTHERS_MAX pids, more noted when full: pid put in it */
void pid_list_note(uint32_t *v, uint32_t *n, bool *more, uint32_t pid);
/* pid is in the list, or may be (it overflowed) */
bool pid_list_may_hold(const uint32_t *v, uint32_t n, bool more, uint32_t pid);
enum { MARK_OWN, MARK_OTHER, MARK_RESTART, MARK_TAKEN };
/*
 * A step mark of pid comes (m->gone says whether m's marker has exited by
 * then): MARK_OWN, the marker's, or the first; MARK_OTHER, another's that
 * marked alongside (another rank: counted, not used); MARK_RESTART, the
 * marker is gone and pid did not mark while it lived; MARK_TAKEN, the
 * target's own over a descendant's that marked first. The last two make pid
 * the marker (docs/ARCHITECTURE.md, "Step marks").
 */
int marks_owner(struct mark_owner *m, uint32_t pid, uint32_t target_pid);
void candidate_add(struct engine *e, struct thread *t);

/* ---- the GPU (gpu.c) */

void gpu_gap_open(struct engine *e, uint64_t t);
void gpu_record(struct engine *e, const struct sb_gpu *g);

/* ---- host events (host.c) */

void ev_interval(struct engine *e, uint32_t tid, uint64_t s, uint64_t end, int ev,
		 int cause, int count);
void sweep_record(struct engine *e, uint64_t key, const struct sb_hdr *h);
/* count the faults of t's run that fell up to `to`; those at or after `from` into a (if any) */
void run_count(struct engine *e, struct thread *t, struct accum *a, uint64_t from, uint64_t to);

/* ---- text records and the clock (meta.c) */

/* the allocator probes were attached throughout [s, end] (steps come in order) */
bool guard_attached_in(struct engine *e, uint64_t s, uint64_t end);
bool guard_sampled_in(struct engine *e, uint64_t s, uint64_t end);
const struct string *string_find(struct engine *e, uint32_t id);
void meta_record(struct engine *e, const struct sb_hdr *h);
void clock_saw(struct engine *e, uint64_t ts, bool start_too);
bool gpu_time_ok(struct engine *e, const struct sb_gpu *g);

/* ---- summaries (summary.c) */

void window_sums_add(struct window_sums *w, const struct eng_step *r);
/* take back a step window_sums_add() added (before its figures change) */
void window_sums_sub(struct window_sums *w, const struct eng_step *r);
void window_begin(struct engine *e, uint64_t keep);
void running_tail(struct engine *e, struct eng_step *r);
void summarise_all(const struct engine *e, struct eng_summary *s);
void mark_tails(struct engine *e, const struct eng_summary *s);

#endif
