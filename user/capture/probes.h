/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Loading and attaching the BPF probe families for one target process, with
 * feature probing and fallbacks, and reading the counters the kernel keeps.
 */
#ifndef STEPBLAME_PROBES_H
#define STEPBLAME_PROBES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "bpf/events.h"

struct probe_opts {
	pid_t pid;
	uint64_t ring_bytes;        /* ring buffer size (power of two) */
	uint64_t wake_bytes;        /* wake the reader once this much is waiting */
	bool no_alloc;              /* --no-alloc */
	const char *alloc_lib;      /* --alloc-lib PATH, NULL: the libc the target maps */
	uint64_t alloc_min_ns;      /* --alloc-min-ns */
	/*
	 * Bursts of fast allocator calls (bpf/alloc.bpf.c), 0: the default.
	 * burst_gap_ns: the longest pause inside a burst (200 us);
	 * burst_max_ns: a burst is cut after this span (10 ms);
	 * burst_min_ns / burst_min_calls: smaller bursts are not recorded
	 * (100 us of summed latency / 256 calls).
	 */
	uint64_t burst_gap_ns, burst_max_ns, burst_min_ns, burst_min_calls;
	uint64_t io_min_ns;         /* I/O syscalls faster than this are not recorded (50 us); 0: default */
	const char *step_uprobe;    /* --step-uprobe LIB:SYM */
	bool no_cuda;               /* do not probe the CUDA driver */
	bool no_tracefs;            /* never use (or mount) tracefs: raw tracepoints only */
	bool no_stacks;             /* --no-stacks: no user stacks at events */
	bool no_irq;                /* --no-irq: interrupt handlers on the target's time not timed */
	bool fp_stacks;             /* --fp-stacks: no stack copies, frame pointers only */
	bool verbose;               /* libbpf's own messages */
	bool no_children;           /* --no-children: the target process alone, not its descendants */
	/*
	 * The allocator probes are detached again as soon as they are found to
	 * attach: the overhead guard attaches them (capture/guard.h, safe start).
	 */
	bool alloc_start_off;
	/*
	 * The allocator on perf-event uprobes, one link per function and probe,
	 * even where the kernel makes uprobe_multi links: the path of kernels
	 * before 6.6, for the tests (no command-line option).
	 */
	bool perf_uprobes;
	/*
	 * --fold US: a target thread's trips off its CPU shorter than this are
	 * summed in the kernel, one sched_run record a run (bpf/common.bpf.h);
	 * 0: PROBE_FOLD_DEFAULT_NS; PROBE_FOLD_OFF (--fold 0): every switch
	 * recorded (docs/ARCHITECTURE.md, "Scheduler runs")
	 */
	uint64_t sched_fold_ns;
	/*
	 * Called once the scheduler probes are attached, with the ring
	 * buffer's fd: the records they write while the other families attach
	 * can be read from then on (NULL: not called)
	 */
	void (*on_ring)(void *ctx, int ring_fd);
	void *on_ring_ctx;
};

#define PROBE_FOLD_OFF UINT64_MAX
#define PROBE_FOLD_DEFAULT_NS 100000ull

/* one line per probe, for the trace file and the user */
struct probe_status {
	char name[48];
	bool attached;
	bool essential;
	char detail[160];           /* variant used, or why it did not attach */
};

#define PROBES_MAX_STATUS 256

struct probes;

/*
 * Check privileges and kernel support, open, load and attach everything.
 * NULL with a one-line reason in err when the capture cannot go on; probes
 * that merely failed to attach are reported through probes_status().
 */
struct probes *probes_open(const struct probe_opts *o, char *err, size_t errlen);
/* the ring buffer's map fd */
int probes_ring_fd(const struct probes *p);
/*
 * Look again at the target's mappings: attach USDT/CUDA/allocator probes to
 * libraries loaded since. Each file (device and inode) is looked at once; a
 * pass has a time budget (what is left waits for the next) and passes are
 * spaced so that they take at most a few percent of the agent's time: a call
 * too soon after the last does nothing. Count of mapped files, or -errno.
 */
int probes_rescan(struct probes *p);
/* the same, now, whenever the last pass was (once, as the capture begins) */
int probes_rescan_now(struct probes *p);
/* a call of probes_rescan would look now (the last pass was long enough ago) */
bool probes_rescan_due(const struct probes *p);

/*
 * Recording of the target stopped in the kernel: one of its threads ran with
 * other credentials than it had at attach (it exec'd a setuid or setgid
 * program, or one with file capabilities, or called setuid() and the like).
 * Nothing of it is recorded from then on. ids: uid, gid, suid, sgid, euid,
 * egid, fsuid, fsgid; cap: permitted capabilities.
 */
struct probes_stop {
	uint64_t ns;                /* when, CLOCK_MONOTONIC */
	uint32_t tid;               /* the thread seen with other credentials */
	bool at_exec;               /* seen when it exec'd */
	uint32_t ids_before[8], ids_after[8];
	uint64_t cap_before, cap_after;
};
/* has it stopped? then *s says how (once the kernel has written it all: else false until then) */
bool probes_stopped(const struct probes *p, struct probes_stop *s);
/*
 * Follow pid, a descendant of the target found in /proc, forked by ppid: 0,
 * -ENOENT under --no-children, -EPERM when its credentials are not the
 * target's (SECURITY.md), or another -errno (the kernel's table full).
 */
int probes_follow(struct probes *p, pid_t pid, pid_t ppid);
/* is pid (a process) a followed descendant of the target now? parent (if not NULL): its parent as followed */
bool probes_followed(const struct probes *p, pid_t pid, pid_t *parent);

/* what looking at the target's mapped files cost this process so far (tests, -v) */
struct probes_scan_counters {
	uint64_t elf_parses;        /* mapped files parsed for ELF notes or symbols */
	uint64_t scans;             /* passes over the maps */
	uint64_t last_scan_ns, max_scan_ns; /* time of one pass (the first excluded from max) */
	uint64_t deferred;          /* files left for a later pass: the pass ran out of time */
};
void probes_scan_counters(struct probes_scan_counters *out);
int probes_status(const struct probes *p, const struct probe_status **out);
/*
 * Write into the ring the page-fault runs held in the kernel (bpf/common.bpf.h):
 * those idle for over a millisecond, or all (the capture ends).
 */
void probes_flush_faults(const struct probes *p, bool all);
/*
 * Write the target's held scheduler trips and idle scheduler runs
 * (bpf/common.bpf.h, "Scheduler runs"); all: every one, at the end.
 */
void probes_flush_sched(const struct probes *p, bool all);
/* cumulative ring-buffer drops per event type, summed over CPUs; and state-map overflows */
void probes_drops(const struct probes *p, __u64 ring[SB_EV_KERNEL_MAX + 1], __u64 *mapfull);
/*
 * Per-thread totals of fast allocator calls: cb once per thread. Also emits,
 * into the ring buffer, the bursts of fast calls that have been idle long
 * enough (a thread may make no further call to end its burst).
 */
int probes_alloc_stats(const struct probes *p,
		       void (*cb)(void *ctx, uint32_t pid, uint32_t tid, const uint64_t calls[SB_FN_MAX],
				  const uint64_t ns[SB_FN_MAX]),
		       void *ctx);
/*
 * The threads tids[0..n) have exited (their thread_exit records were taken):
 * their burst still pending is emitted, and their allocator state is removed
 * from the kernel's per-thread maps, which would otherwise fill with the dead
 * threads of a long capture. Call it after probes_alloc_stats, which reported
 * their final totals. cb (may be NULL) gets each one removed with its total of
 * fast calls. Returns how many were removed.
 */
int probes_alloc_forget(const struct probes *p, const uint32_t *tids, size_t n,
			void (*cb)(void *ctx, uint32_t tid, uint64_t calls), void *ctx);
/*
 * The same totals, read only: no burst is flushed, nothing enters the ring
 * (the overhead guard's reading).
 */
int probes_alloc_totals(const struct probes *p,
			void (*cb)(void *ctx, uint32_t pid, uint32_t tid, const uint64_t calls[SB_FN_MAX],
				   const uint64_t ns[SB_FN_MAX]),
			void *ctx);
/* the allocator probes found their library and attached (the guard may have them off now) */
bool probes_has_alloc(const struct probes *p);
/* the library the allocator probes are on: its device, inode and name; false if none */
bool probes_alloc_lib(const struct probes *p, uint64_t *dev, uint64_t *ino, const char **shown);
/*
 * The overhead guard's switch. Off takes the allocator's links alone away
 * and returns at once (0): their breakpoints go within a millisecond or so,
 * the kernel's grace periods are waited out on threads of their own. On
 * empties the per-thread frames of calls that were running when they went
 * away and attaches them again, to the same library and the functions that
 * attached at first, without new probe statuses: how many functions, or
 * -errno if none attached. -ENOENT without allocator probes.
 */
int probes_alloc_attach(struct probes *p, bool on);
/*
 * The allocator probes in a followed child process too (found at attach,
 * forked, spawned), to the same library and functions, switched by the
 * guard with the target's: 0 or how many functions attached, -ENOENT
 * without allocator probes, -ENOSPC past ALLOC_KIDS_MAX children at a time
 * (counted: probes_alloc_kids). _gone: its process exited, its links go.
 */
#define PROBES_KIDS_MAX 64
int probes_alloc_kid(struct probes *p, pid_t pid);
void probes_alloc_kid_gone(struct probes *p, pid_t pid);
/* children with allocator probes now; *left_out: those refused, the table full */
int probes_alloc_kids(const struct probes *p, uint64_t *left_out);
/*
 * What an allocator call's probes (uprobe + uretprobe) and a single uprobe
 * cost the calling thread on this machine: the allocator's own programs are
 * attached to functions of this binary for a few hundred timed calls (about
 * 10 ms here, under 50 ms where a trap costs 30 us) and detached. Sets
 * alloc_call, cuda_call and uprobe in c (their bits in c->calibrated, and
 * c->samples); c is left alone on failure: -ENOENT without the allocator
 * programs (--no-alloc, load failed), or the attach's -errno (EPERM where
 * uprobes need CAP_SYS_ADMIN).
 */
struct sb_costs;
int probes_calibrate(struct probes *p, struct sb_costs *c);
/* name of the CUDA driver symbol behind sb_cuda.sym */
const char *probes_cuda_symbol(unsigned idx);
/* which tracepoint flavour the scheduler probes use: "tp_btf" or "raw_tp" */
const char *probes_sched_variant(const struct probes *p);
void probes_close(struct probes *p);

/*
 * Privilege check alone: 0 if we may load BPF and read the target, else -1
 * with a one-line reason (which capabilities are missing).
 */
int probes_check_privileges(pid_t pid, char *err, size_t errlen);

#endif
