// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * CPU samples of the target's threads: a CPU-clock perf event per CPU at a
 * low rate (the agent opens them, 99 Hz), and at each one that lands on a
 * target thread its user stack, as a stack record whose event is the sample
 * itself (ev_type SB_EV_STACK). The report reads them to say which function a
 * host_compute step spent its time in (docs/ARCHITECTURE.md, "Stacks").
 */
#include "common.bpf.h"

SEC("perf_event")
int cpu_sample(struct bpf_perf_event_data *ctx)
{
	if (!current_is_target())
		return 0;
	/*
	 * A fault run left idle is written here (common.bpf.h): the slot holds
	 * only the current thread's (a thread leaving the CPU writes its run), so
	 * a run whose thread went on computing without another record is late by
	 * at most a sample period. A run still growing is left alone: the stack
	 * is no event of the thread's.
	 */
	__u32 zero = 0;
	struct fault_slot *fs = bpf_map_lookup_elem(&fault_slot, &zero);

	if (fs && fs->count && bpf_ktime_get_ns() - fs->last > fault_idle_ns)
		fault_flush(fs);
	/* a copy of the stack on the samples' ration (common.bpf.h, "Stack copies") */
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns();
	struct stack_next *n = bpf_map_lookup_elem(&stack_rate, &tid);
	__u64 next = n ? n->sample_copy : 0;

	if (write_stack(ctx, SB_EV_STACK, now, now, stack_copy_due(next, sample_copy_gap_ns, now, 0),
			true) == 2) {
		next = stack_copy_taken(next, sample_copy_gap_ns, now);
		if (n) {
			n->sample_copy = next;
		} else {
			struct stack_next v = { .sample_copy = next };

			bpf_map_update_elem(&stack_rate, &tid, &v, BPF_NOEXIST);
		}
	}
	return 0;
}
