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
	struct sb_stack *st = reserve(SB_EV_STACK, sizeof(*st));

	if (!st)
		return 0;
	submit_stack(ctx, st, SB_EV_STACK, st->h.ts, st->h.ts);
	return 0;
}
