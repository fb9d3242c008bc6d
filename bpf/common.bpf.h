/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Shared by every probe family: the ring buffer, the drop counters, the target
 * filter and the submit policy. Each family is its own skeleton; the agent
 * creates these maps once (in the sched skeleton) and hands the same fds to
 * the others with bpf_map__reuse_fd, so all events land in one ring buffer.
 */
#ifndef STEPBLAME_COMMON_BPF_H
#define STEPBLAME_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "events.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* set by the agent between open and load */
const volatile __u32 targ_tgid = 0;
/* wake the reader when this many bytes are waiting (0: when the first one arrives) */
const volatile __u64 wake_bytes = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20); /* resized by the agent */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SB_EV_KERNEL_MAX + 2);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

/* last index of drops: a state map (hash) was full */
#define SB_DROP_MAPFULL (SB_EV_KERNEL_MAX + 1)

static __always_inline void count_drop(__u32 type)
{
	__u64 *c = bpf_map_lookup_elem(&drops, &type);

	if (c)
		(*c)++;
}

static __always_inline bool is_target_tgid(__u32 tgid)
{
	return tgid == targ_tgid;
}

static __always_inline bool current_is_target(void)
{
	return (bpf_get_current_pid_tgid() >> 32) == targ_tgid;
}

/* reserve a record of type t for the current task; NULL (and counted) when full */
static __always_inline void *reserve(__u32 type, __u32 size)
{
	struct sb_hdr *h = bpf_ringbuf_reserve(&events, size, 0);

	if (!h) {
		count_drop(type);
		return NULL;
	}
	__u64 id = bpf_get_current_pid_tgid();

	h->type = type;
	h->size = size;
	h->cpu = bpf_get_smp_processor_id();
	h->flags = 0;
	h->pid = id >> 32;
	h->tid = (__u32)id;
	h->ts = bpf_ktime_get_ns();
	return h;
}

/*
 * Submit, waking the reader only when this record makes the backlog cross the
 * threshold: once across, the reader is already awake (or its 100 ms timer
 * is due), and waking it for every further record would raise an interrupt
 * per event on the traced CPU.
 */
static __always_inline void submit(void *rec)
{
	__u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	/* what the record takes in the ring: its size plus the ring's 8-byte header */
	__u64 size = ((struct sb_hdr *)rec)->size + 8;
	__u64 flags = BPF_RB_NO_WAKEUP;

	/* avail already counts this record: it was reserved */
	if (avail >= wake_bytes && avail < wake_bytes + size)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(rec, flags);
}

#endif /* STEPBLAME_COMMON_BPF_H */
