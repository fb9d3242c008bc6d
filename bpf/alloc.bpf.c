// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Allocator probes: the malloc family of whatever library the target maps
 * (glibc by default, jemalloc or tcmalloc with --alloc-lib), entry and return.
 * Latency is computed here; calls slower than alloc_min_ns (above the
 * per-function floor) become events of their own. Faster ones are counted and
 * summed per thread (alloc_totals, read by the agent once a second) and also
 * gathered into bursts, so that a storm of fast calls still has a place in
 * time:
 *
 *   a burst is a thread's run of fast calls, each starting at most
 *   burst_gap_ns after the previous one ended (slow calls may come between
 *   them). It is emitted as one SB_EV_ALLOC_BURST {first start, last end,
 *   calls, time in calls, bytes, time in the slow calls inside} when it
 *   ends, if it is big enough to matter
 *   (burst_min_ns in calls or burst_min_calls calls; smaller ones are
 *   dropped and stay only in the totals). The time in calls is the fast
 *   calls' latency plus, per pause between two calls, the probes' own cost
 *   that no latency covers (trap_gap). It ends
 *     - at the thread's next fast call after the gap (flushed by that call),
 *     - when it has spanned burst_max_ns (a thread that never pauses still
 *       gets records that are not too late for the agent's reorder window),
 *     - or when the agent finds it idle for longer than the gap plus
 *       burst_max_ns (flush_burst below, run once a second): a thread may make
 *       no call for a long time after a storm.
 *   A burst still pending when the thread exits is emitted by the agent's
 *   first flush after it took the exit, which then removes the thread's
 *   entries here (probes_alloc_forget); one pending when the capture ends is
 *   lost (it is still in the alloc_stats totals).
 *
 * The fast path adds no map lookup and no ring-buffer reserve: the burst lives
 * in the thread's alloc_totals value; only a flush reserves a record. (The
 * slow path adds one lookup of alloc_totals, to carry a burst across it.)
 */
#include "common.bpf.h"

const volatile __u64 alloc_min_ns = 10000;
/* bursts: see above; set by the agent */
const volatile __u64 burst_gap_ns = 200000;
const volatile __u64 burst_max_ns = 10000000;
const volatile __u64 burst_min_ns = 100000;
const volatile __u64 burst_min_calls = 256;

#define MAX_DEPTH 4

/* glibc calls its own malloc from realloc(NULL, n) and friends: keep a small stack */
struct frames {
	__u32 depth;
	__u32 pad;
	struct {
		__u64 start;
		__u64 size;
		__u64 ptr;
		__u32 fn;
		__u32 pad;
	} f[MAX_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct frames);
} alloc_frames SEC(".maps");

#include "alloc_totals.bpf.h"

/*
 * Fastest call seen per function. The latency measured here includes the
 * uprobe and uretprobe traps themselves (1 us on bare metal, 15 us on some
 * VMs), so "slow" means slower than this floor by more than alloc_min_ns.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SB_FN_MAX);
	__type(key, __u32);
	__type(value, __u64);
} alloc_floor SEC(".maps");

static const struct frames empty_frames;
static const struct alloc_totals empty_totals;

static __always_inline bool burst_matters(__u64 calls, __u64 sum_ns)
{
	return sum_ns >= burst_min_ns || calls >= burst_min_calls;
}

/*
 * Claim the burst b, seen with n calls (its other fields already copied by
 * the caller, before the claim). False when someone else claimed it first.
 */
static __always_inline bool burst_claim(struct burst *b, __u64 n)
{
	return __sync_val_compare_and_swap(&b->calls, n, 0) == n;
}

/* emit the copy c of a burst of thread tid with n calls */
static __always_inline void burst_emit(__u32 tid, const struct burst *c, __u64 n, __u16 flags)
{
	struct sb_alloc_burst *e = reserve(SB_EV_ALLOC_BURST, sizeof(*e));

	if (!e)
		return;
	/* reserve() names the current task: the agent's, when it flushes */
	e->h.pid = c->tgid ? c->tgid : targ_tgid;
	e->h.tid = tid;
	e->h.cpu = c->cpu;
	e->h.flags = flags;
	e->h.ts = c->last;
	e->start_ns = c->first;
	e->calls = n;
	e->sum_ns = c->sum_ns;
	e->bytes = c->bytes;
	e->slow_ns = c->slow_ns;
	submit(e);
}

/*
 * How much of the pause `gap` between two calls of a burst is the calls'
 * time. Part of every pause is the probes' own cost that no latency covers
 * (the end of the uretprobe trap after the return is timed, the start of the
 * uprobe trap before the entry is): at least the shortest pause ever seen on
 * the thread (calls back to back), gap_min. A pause up to twice that is taken
 * as back-to-back calls whose trap cost varied, and counted whole; a longer
 * one has the thread's own code in it, and only gap_min of it counts.
 */
static __always_inline __u64 trap_gap(struct burst *b, __u64 gap)
{
	__u64 m = b->gap_min;

	if (!m || gap < m) {
		b->gap_min = gap;
		return gap;
	}
	return gap <= 2 * m ? gap : m;
}

/* the thread ends its own burst (seen with n calls) */
static __always_inline void burst_end(struct burst *b, __u32 tid, __u64 n)
{
	struct burst c = *b;

	if (burst_claim(b, n) && burst_matters(n, c.sum_ns))
		burst_emit(tid, &c, n, 0);
}

static __always_inline int enter(__u32 fn, __u64 size, __u64 ptr)
{
	if (!current_is_target())
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct frames *fr = bpf_map_lookup_elem(&alloc_frames, &tid);

	if (!fr) {
		if (bpf_map_update_elem(&alloc_frames, &tid, &empty_frames, BPF_NOEXIST) &&
		    !bpf_map_lookup_elem(&alloc_frames, &tid)) {
			count_drop(SB_DROP_MAPFULL);
			return 0;
		}
		fr = bpf_map_lookup_elem(&alloc_frames, &tid);
		if (!fr)
			return 0;
	}
	__u32 d = fr->depth;

	fr->depth = d + 1;
	if (d >= MAX_DEPTH)
		return 0;
	fr->f[d].start = bpf_ktime_get_ns();
	fr->f[d].size = size;
	fr->f[d].ptr = ptr;
	fr->f[d].fn = fn;
	return 0;
}

static __always_inline int leave(void *ctx, __u64 ret)
{
	if (!current_is_target())
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct frames *fr = bpf_map_lookup_elem(&alloc_frames, &tid);

	if (!fr || fr->depth == 0)
		return 0;
	__u32 d = --fr->depth;

	if (d >= MAX_DEPTH)
		return 0;
	__u64 start = fr->f[d].start, lat = now - start;
	__u32 fn = fr->f[d].fn;

	if (fn >= SB_FN_MAX)
		return 0;
	__u32 key = fn; /* fn itself must stay in a register: the verifier bounds it there */
	__u64 *fl = bpf_map_lookup_elem(&alloc_floor, &key), floor = fl ? *fl : 0;

	/*
	 * Judged against the fastest call seen before this one: the first call
	 * of a function has no floor yet (0), and is fast only under
	 * alloc_min_ns. Taking its own latency as the floor would make it fast
	 * however long it took (a preempted call, a new thread's first malloc
	 * setting up its arena, a free that unmaps), and such a call alone
	 * passes burst_min_ns: a "burst" of one slow call. A later call that
	 * sets a new floor is faster than the old one, and fast either way.
	 */
	if (fl && (floor == 0 || lat < floor))
		*fl = lat;
	/* alloc_min_ns == 0: every call is an event */
	if (alloc_min_ns && lat < alloc_min_ns + floor) {
		struct alloc_totals *t = bpf_map_lookup_elem(&alloc_totals, &tid);

		if (!t) {
			bpf_map_update_elem(&alloc_totals, &tid, &empty_totals, BPF_NOEXIST);
			t = bpf_map_lookup_elem(&alloc_totals, &tid);
			if (!t) {
				count_drop(SB_DROP_MAPFULL);
				return 0;
			}
		}
		t->calls[fn]++;
		t->ns[fn] += lat;

		struct burst *b = &t->b;
		__u64 n = b->calls;

		/* a pause longer than the gap ends the burst in progress */
		if (n && start > b->last + burst_gap_ns) {
			burst_end(b, tid, n);
			n = 0;
		}
		if (!n) {
			b->first = start;
			b->sum_ns = 0;
			b->slow_ns = 0;
			b->bytes = 0;
			b->cpu = bpf_get_smp_processor_id();
			b->tgid = bpf_get_current_pid_tgid() >> 32;
		} else if (start > b->last) {
			b->sum_ns += trap_gap(b, start - b->last);
		}
		b->sum_ns += lat;
		b->bytes += fr->f[d].size;
		b->last = now;
		b->calls = ++n;
		/* long enough: emit it now, the next call starts another */
		if (now - b->first >= burst_max_ns)
			burst_end(b, tid, n);
		return 0;
	}
	/* slow: an event of its own; a burst in progress goes on across it */
	struct alloc_totals *t = bpf_map_lookup_elem(&alloc_totals, &tid);

	if (t && t->b.calls && start > t->b.last && start <= t->b.last + burst_gap_ns) {
		t->b.sum_ns += trap_gap(&t->b, start - t->b.last);
		t->b.slow_ns += lat;
		t->b.last = now;
	}
	struct sb_alloc *e = reserve(SB_EV_ALLOC, sizeof(*e));

	if (!e)
		return 0;
	e->h.ts = now;
	e->start_ns = start;
	e->size = fr->f[d].size;
	e->ptr = fn == SB_FN_FREE ? fr->f[d].ptr : ret;
	e->fn = fn;
	e->floor_ns = floor > 0xffffffff ? 0xffffffff : floor;
	submit(e);
	emit_stack(ctx, SB_EV_ALLOC, fn, start, now);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(malloc_enter, __u64 size)
{
	return enter(SB_FN_MALLOC, size, 0);
}

SEC("uprobe")
int BPF_KPROBE(calloc_enter, __u64 n, __u64 size)
{
	return enter(SB_FN_CALLOC, n * size, 0);
}

SEC("uprobe")
int BPF_KPROBE(realloc_enter, __u64 ptr, __u64 size)
{
	return enter(SB_FN_REALLOC, size, ptr);
}

SEC("uprobe")
int BPF_KPROBE(free_enter, __u64 ptr)
{
	return enter(SB_FN_FREE, 0, ptr);
}

SEC("uprobe")
int BPF_KPROBE(posix_memalign_enter, __u64 memptr, __u64 align, __u64 size)
{
	return enter(SB_FN_POSIX_MEMALIGN, size, 0);
}

SEC("uprobe")
int BPF_KPROBE(aligned_alloc_enter, __u64 align, __u64 size)
{
	return enter(SB_FN_ALIGNED_ALLOC, size, 0);
}

SEC("uprobe")
int BPF_KPROBE(memalign_enter, __u64 align, __u64 size)
{
	return enter(SB_FN_MEMALIGN, size, 0);
}

/*
 * Where the kernel makes uprobe_multi links: one program for every
 * function's entry, the link's cookie saying which (enum sb_alloc_fn), so
 * that a process takes two links (entries, returns) rather than one per
 * probe. Taking a link away waits out a grace period (tens of ms on a small
 * VM); the overhead guard does it every second for the target and each
 * followed child (schemas/trace.md, guard record).
 */
SEC("uprobe")
int alloc_enter(struct pt_regs *ctx)
{
	__u64 fn = bpf_get_attach_cookie(ctx);
	__u64 a1 = PT_REGS_PARM1(ctx), a2 = PT_REGS_PARM2(ctx), size = 0, ptr = 0;

	switch (fn) {
	case SB_FN_MALLOC:
		size = a1;
		break;
	case SB_FN_CALLOC:
		size = a1 * a2;
		break;
	case SB_FN_REALLOC:
		size = a2;
		ptr = a1;
		break;
	case SB_FN_FREE:
		ptr = a1;
		break;
	case SB_FN_POSIX_MEMALIGN:
		size = PT_REGS_PARM3(ctx);
		break;
	case SB_FN_ALIGNED_ALLOC:
	case SB_FN_MEMALIGN:
		size = a2;
		break;
	default:
		return 0;
	}
	return enter((__u32)fn, size, ptr);
}

/* one return program serves every function: the frame says which it was */
SEC("uretprobe")
int BPF_KRETPROBE(alloc_return, __u64 ret)
{
	return leave(ctx, ret);
}

/*
 * Run by the agent (BPF_PROG_TEST_RUN, once a second) for a thread whose
 * burst has been idle for longer than min_idle_ns: emits it with
 * SB_ALLOC_BURST_FLUSHED in h.flags. Returns 1 if it emitted one.
 */
struct flush_args {
	__u32 tid;
	__u32 pad;
	__u64 min_idle_ns;
};

SEC("syscall")
int flush_burst(struct flush_args *a)
{
	__u32 tid = a->tid;
	struct alloc_totals *t = bpf_map_lookup_elem(&alloc_totals, &tid);

	if (!t)
		return 0;
	struct burst *b = &t->b;
	__u64 n = b->calls;

	if (!n)
		return 0;
	struct burst c = *b;

	if (bpf_ktime_get_ns() - c.last < a->min_idle_ns || !burst_matters(n, c.sum_ns))
		return 0;
	if (!burst_claim(b, n))
		return 0;
	burst_emit(tid, &c, n, SB_ALLOC_BURST_FLUSHED);
	return 1;
}
