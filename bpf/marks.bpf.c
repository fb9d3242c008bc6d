// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Step marks: the USDT probe stepblame:step (argument: step number) and any
 * native function named with --step-uprobe (each call is the next step).
 * CUDA driver calls seen by uprobe, for processes without the collector.
 */
#include "common.bpf.h"
#include "alloc_totals.bpf.h"
#include <bpf/usdt.bpf.h>

__u64 uprobe_steps = 0;
/* set by the agent while the allocator probes are attached: alloc_totals counts then */
__u32 alloc_counting = 0;

static __always_inline void fill(struct sb_step *e, __u64 step, __u32 src)
{
	e->step = step;
	e->source = src;
	e->pad = 0;
}

/*
 * With the allocator probes on, a mark carries the marking thread's count of
 * fast calls so far (schemas/trace.md, "step"): no entry yet is none made.
 */
static __always_inline int mark(__u64 step, __u32 src)
{
	if (!current_is_target())
		return 0;
	if (alloc_counting) {
		__u32 tid = (__u32)bpf_get_current_pid_tgid();
		struct alloc_totals *t = bpf_map_lookup_elem(&alloc_totals, &tid);
		struct sb_step_ext *x = reserve(SB_EV_STEP, sizeof(*x));
		__u64 n = 0;

		if (!x)
			return 0;
		if (t)
			for (int i = 0; i < SB_FN_MAX; i++)
				n += t->calls[i];
		fill(&x->s, step, src);
		x->alloc.fast_calls = n;
		submit(x);
		return 0;
	}
	struct sb_step *e = reserve(SB_EV_STEP, sizeof(*e));

	if (!e)
		return 0;
	fill(e, step, src);
	submit(e);
	return 0;
}

SEC("usdt")
int BPF_USDT(step_usdt, long step)
{
	return mark(step, SB_STEP_USDT);
}

SEC("uprobe")
int BPF_KPROBE(step_uprobe)
{
	return mark(__sync_fetch_and_add(&uprobe_steps, 1), SB_STEP_UPROBE);
}

/*
 * CUDA driver API: the cookie carries (fn << 16 | symbol index). A frame for
 * each target thread inside a probed call (a full map counts a drop).
 */
struct cu_frame {
	__u64 start;
	__u64 cookie;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct cu_frame);
} cu_frames SEC(".maps");

SEC("uprobe")
int cuda_enter(struct pt_regs *ctx)
{
	if (!current_is_target())
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct cu_frame f = { .start = bpf_ktime_get_ns(), .cookie = bpf_get_attach_cookie(ctx) };

	if (bpf_map_update_elem(&cu_frames, &tid, &f, BPF_ANY))
		count_drop(SB_DROP_MAPFULL);
	return 0;
}

SEC("uretprobe")
int cuda_return(struct pt_regs *ctx)
{
	if (!current_is_target())
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct cu_frame *f = bpf_map_lookup_elem(&cu_frames, &tid);

	if (!f)
		return 0;
	struct sb_cuda *e = reserve(SB_EV_CUDA, sizeof(*e));

	if (e) {
		e->start_ns = f->start;
		e->fn = f->cookie >> 16;
		e->sym = f->cookie & 0xffff;
		submit(e);
	}
	bpf_map_delete_elem(&cu_frames, &tid);
	return 0;
}
