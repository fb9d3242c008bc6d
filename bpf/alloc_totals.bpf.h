/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The per-thread totals of fast allocator calls, and the thread's burst in
 * progress (bpf/alloc.bpf.c). The step marks (bpf/marks.bpf.c) read them
 * too: one map, created with the marks and reused by the allocator probes,
 * so both objects define it from here.
 */
#ifndef STEPBLAME_ALLOC_TOTALS_BPF_H
#define STEPBLAME_ALLOC_TOTALS_BPF_H

/*
 * The burst in progress. Only the thread itself writes it, except that
 * `calls` is claimed (set to 0 with a compare-and-swap) by whoever emits the
 * burst: the thread or the agent's flush_burst, never both.
 */
struct burst {
	__u64 first;   /* start of its first call */
	__u64 last;    /* end of its last call (slow calls inside included) */
	__u64 sum_ns;  /* time in its fast calls, uprobe traps included (see trap_gap) */
	__u64 slow_ns; /* latency of the slow calls inside it */
	__u64 bytes;   /* bytes asked for */
	__u64 gap_min; /* shortest pause between two calls of the thread, ever */
	__u32 cpu;     /* CPU of its first call */
	__u32 tgid;    /* the thread's process (the target or a followed child) */
	__u64 calls;   /* fast calls in it; 0: no burst. Written last */
};

/*
 * Per-thread totals of fast calls, read by the agent (struct sb_alloc_stats
 * body), and the thread's burst. user/capture/attach_alloc.c has the same layout.
 */
struct alloc_totals {
	__u64 calls[SB_FN_MAX];
	__u64 ns[SB_FN_MAX];
	struct burst b;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct alloc_totals);
} alloc_totals SEC(".maps");

#endif
