// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Allocator probes: the malloc family of whatever library the target maps
 * (glibc by default, jemalloc or tcmalloc with --alloc-lib), entry and return.
 * Latency is computed here; calls faster than alloc_min_ns are only counted
 * and summed per thread, slower ones become events.
 */
#include "common.bpf.h"

const volatile __u64 alloc_min_ns = 10000;

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

/* per-thread totals of fast calls, read by the agent (struct sb_alloc_stats body) */
struct alloc_totals {
	__u64 calls[SB_FN_MAX];
	__u64 ns[SB_FN_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct alloc_totals);
} alloc_totals SEC(".maps");

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

static __always_inline int leave(__u64 ret)
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

	if (fl && (floor == 0 || lat < floor)) {
		*fl = lat;
		floor = lat;
	}
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
		return 0;
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

/* one return program serves every function: the frame says which it was */
SEC("uretprobe")
int BPF_KRETPROBE(alloc_return, __u64 ret)
{
	return leave(ret);
}
