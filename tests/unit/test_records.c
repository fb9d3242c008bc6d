// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The table of record types (SB_RECORD_TYPES in bpf/events.h) as the rest of
 * the code reads it: name, size, kind, interval start, cost class of every
 * type, checked against expectations written out here by hand from the
 * structs (schemas/trace.md, "Record types"), not derived from the table.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>

#include "test.h"
#include "format/costs.h"
#include "format/gpu.h"
#include "format/trace.h"

#define NO_START ((size_t)-1)

static const struct want {
	unsigned type;
	const char *name;
	size_t size;
	size_t start;   /* offsetof the interval start, NO_START: an instant */
	unsigned kind;
	int cost;       /* enum sb_cost, SB_COST_NONE */
} want[] = {
	{ SB_EV_SWITCH_OUT, "switch_out", sizeof(struct sb_switch_out), NO_START, SB_KIND_KERNEL,
	  SB_COST_SCHED },
	{ SB_EV_SWITCH_IN, "switch_in", sizeof(struct sb_switch_in), NO_START, SB_KIND_KERNEL,
	  SB_COST_SCHED },
	{ SB_EV_RUNSLICE, "runslice", sizeof(struct sb_runslice),
	  offsetof(struct sb_runslice, start_ns), SB_KIND_KERNEL, SB_COST_NONE },
	{ SB_EV_WAKEUP, "wakeup", sizeof(struct sb_wakeup), NO_START, SB_KIND_KERNEL,
	  SB_COST_SCHED },
	{ SB_EV_MIGRATE, "migrate", sizeof(struct sb_migrate), NO_START, SB_KIND_KERNEL,
	  SB_COST_SCHED },
	{ SB_EV_FAULT, "fault", sizeof(struct sb_fault), NO_START, SB_KIND_KERNEL, SB_COST_FAULT },
	{ SB_EV_RECLAIM, "reclaim", sizeof(struct sb_reclaim),
	  offsetof(struct sb_reclaim, start_ns), SB_KIND_KERNEL, SB_COST_NONE },
	{ SB_EV_MMSYS, "mmsys", sizeof(struct sb_mmsys), offsetof(struct sb_mmsys, start_ns),
	  SB_KIND_KERNEL, SB_COST_SYSCALL },
	{ SB_EV_ALLOC, "alloc", sizeof(struct sb_alloc), offsetof(struct sb_alloc, start_ns),
	  SB_KIND_KERNEL, SB_COST_ALLOC_CALL },
	{ SB_EV_STEP, "step", sizeof(struct sb_step), NO_START, SB_KIND_KERNEL, SB_COST_UPROBE },
	{ SB_EV_THREAD_NEW, "thread_new", sizeof(struct sb_thread), NO_START, SB_KIND_KERNEL,
	  SB_COST_SCHED },
	{ SB_EV_THREAD_EXIT, "thread_exit", sizeof(struct sb_thread), NO_START, SB_KIND_KERNEL,
	  SB_COST_SCHED },
	{ SB_EV_RENAME, "rename", sizeof(struct sb_rename), NO_START, SB_KIND_KERNEL,
	  SB_COST_SCHED },
	{ SB_EV_CUDA, "cuda", sizeof(struct sb_cuda), offsetof(struct sb_cuda, start_ns),
	  SB_KIND_KERNEL, SB_COST_CUDA_CALL },
	{ SB_EV_ALLOC_BURST, "alloc_burst", sizeof(struct sb_alloc_burst),
	  offsetof(struct sb_alloc_burst, start_ns), SB_KIND_KERNEL, SB_COST_ALLOC_CALL },
	{ SB_EV_IOSYS, "iosys", sizeof(struct sb_iosys), offsetof(struct sb_iosys, start_ns),
	  SB_KIND_KERNEL, SB_COST_SYSCALL },
	{ SB_EV_AFFINITY, "affinity", sizeof(struct sb_affinity),
	  offsetof(struct sb_affinity, start_ns), SB_KIND_KERNEL, SB_COST_SYSCALL },
	{ SB_EV_STACK, "stack", sizeof(struct sb_stack), NO_START, SB_KIND_KERNEL, SB_COST_STACK },
	{ SB_EV_FAULT_RUN, "fault_run", sizeof(struct sb_fault_run),
	  offsetof(struct sb_fault_run, start_ns), SB_KIND_KERNEL, SB_COST_FAULT },
	{ SB_EV_SCHED_RUN, "sched_run", sizeof(struct sb_sched_run),
	  offsetof(struct sb_sched_run, start_ns), SB_KIND_KERNEL, SB_COST_SCHED_FOLD },
	{ SB_EV_IRQ_RUN, "irq_run", sizeof(struct sb_irq_run),
	  offsetof(struct sb_irq_run, start_ns), SB_KIND_KERNEL, SB_COST_IRQ },
	{ SB_REC_HOST, "host", sizeof(struct sb_text), NO_START, SB_KIND_TEXT, SB_COST_NONE },
	{ SB_REC_CPU, "cpu", sizeof(struct sb_cpu), NO_START, SB_KIND_META, SB_COST_NONE },
	{ SB_REC_TARGET, "target", sizeof(struct sb_text), NO_START, SB_KIND_TEXT, SB_COST_NONE },
	{ SB_REC_THREAD, "thread", sizeof(struct sb_text), NO_START, SB_KIND_TEXT, SB_COST_NONE },
	{ SB_REC_ALLOC_STATS, "alloc_stats", sizeof(struct sb_alloc_stats), NO_START,
	  SB_KIND_META, SB_COST_NONE },
	{ SB_REC_DROPS, "drops", sizeof(struct sb_drops), NO_START, SB_KIND_META, SB_COST_NONE },
	{ SB_REC_PROBE, "probe", sizeof(struct sb_text), NO_START, SB_KIND_TEXT, SB_COST_NONE },
	{ SB_REC_GPU, "gpu", sizeof(struct sb_gpu), NO_START, SB_KIND_GPU, SB_COST_NONE },
	{ SB_REC_STRING, "string", sizeof(struct sb_text), NO_START, SB_KIND_TEXT, SB_COST_NONE },
	{ SB_REC_NOTE, "note", sizeof(struct sb_text), NO_START, SB_KIND_TEXT, SB_COST_NONE },
	{ SB_REC_COSTS, "costs", sizeof(struct sb_text), NO_START, SB_KIND_TEXT, SB_COST_NONE },
	{ SB_REC_MAPPING, "mapping", sizeof(struct sb_text), NO_START, SB_KIND_TEXT, SB_COST_NONE },
	{ SB_REC_PERFMAP, "perfmap", sizeof(struct sb_text), NO_START, SB_KIND_TEXT, SB_COST_NONE },
	{ SB_REC_GUARD, "guard", sizeof(struct sb_text), NO_START, SB_KIND_TEXT, SB_COST_NONE },
	{ SB_REC_TRAILER, "trailer", sizeof(struct sb_trailer), NO_START, SB_KIND_TRAILER,
	  SB_COST_NONE },
};

#define NWANT (sizeof(want) / sizeof(want[0]))

static const struct want *find(unsigned type)
{
	for (size_t i = 0; i < NWANT; i++)
		if (want[i].type == type)
			return &want[i];
	return NULL;
}

/* a record of the type: every u64 of its body set to body, then h.ts = ts */
static struct sb_hdr *fill(uint64_t *buf, unsigned type, size_t size, uint64_t body, uint64_t ts)
{
	struct sb_hdr *h = (struct sb_hdr *)buf;

	for (size_t i = 0; i < size / 8; i++)
		buf[i] = body;
	memset(h, 0, sizeof(*h));
	h->type = (uint16_t)type;
	h->size = (uint16_t)size;
	h->ts = ts;
	return h;
}

static void set_u64(struct sb_hdr *h, size_t off, uint64_t v)
{
	memcpy((char *)h + off, &v, sizeof(v));
}

/* every id the enum defines is in the table and only those; the ranges hold */
static void t_ids(void)
{
	size_t kernel = 0, rec = 0;

	for (size_t i = 0; i < NWANT; i++) {
		CHECK(want[i].type < SB_TYPE_MAX, "type %u", want[i].type);
		if (want[i].kind == SB_KIND_KERNEL) {
			CHECK(want[i].type >= 1 && want[i].type <= SB_EV_KERNEL_LAST, "type %u",
			      want[i].type);
			kernel++;
		} else {
			CHECK(want[i].type == SB_REC_TRAILER || (want[i].type >= SB_REC_FIRST &&
								 want[i].type <= SB_REC_LAST),
			      "type %u", want[i].type);
			rec++;
		}
	}
	CHECK(kernel == SB_EV_KERNEL_LAST, "%zu kernel types expected, the enum has %d", kernel,
	      SB_EV_KERNEL_LAST);
	CHECK(rec == SB_REC_LAST - SB_REC_FIRST + 2, "%zu agent types expected, the enum has %d",
	      rec, SB_REC_LAST - SB_REC_FIRST + 2);
}

/* name, size, kind and the predicates built on them, for every possible type */
static void t_names_sizes_kinds(void)
{
	for (unsigned t = 0; t <= 0xffff; t++) {
		const struct want *w = find(t);

		if (!w) {
			CHECK(sb_type_size(t) == 0, "type %u: size %zu", t, sb_type_size(t));
			CHECK(!strcmp(sb_type_name(t), "unknown"), "type %u: %s", t, sb_type_name(t));
			CHECK(sb_type_kind(t) == SB_KIND_NONE, "type %u: kind %u", t, sb_type_kind(t));
			CHECK(!sb_type_is_text(t) && !sb_type_is_engine_input(t) && !sb_meta_min(t),
			      "type %u", t);
			continue;
		}
		CHECK(!strcmp(sb_type_name(t), w->name), "type %u: %s, not %s", t, sb_type_name(t),
		      w->name);
		CHECK(sb_type_size(t) == w->size, "%s: size %zu, not %zu", w->name, sb_type_size(t),
		      w->size);
		CHECK(sb_type_kind(t) == w->kind, "%s: kind %u, not %u", w->name, sb_type_kind(t),
		      w->kind);
		CHECK(sb_type_is_text(t) == (w->kind == SB_KIND_TEXT), "%s: text", w->name);
		/* the engine: kernel events and GPU records into its window ... */
		CHECK(sb_type_is_engine_input(t) == (w->kind == SB_KIND_KERNEL ||
						     w->kind == SB_KIND_GPU),
		      "%s: engine input", w->name);
		/* ... every other defined record read as it comes, at least its struct */
		CHECK(sb_meta_min(t) == (sb_type_is_engine_input(t) ? 0 : w->size),
		      "%s: meta_min %zu", w->name, sb_meta_min(t));
	}
}

/* the interval start: read from its field, else ts; a zero or later start is ignored */
static void t_rec_start(void)
{
	uint64_t buf[SBT_MAX_RECORD / 8];

	for (unsigned t = 0; t < SB_TYPE_MAX + 8; t++) {
		const struct want *w = find(t);
		size_t size = w ? w->size : 64;
		struct sb_hdr *h;

		/* no other field of the body is taken for the start */
		h = fill(buf, t, size, 400, 1000);
		CHECK(sb_rec_start(h) == (w && w->start != NO_START ? 400 : 1000),
		      "type %u: start %" PRIu64, t, sb_rec_start(h));
		h = fill(buf, t, size, 0, 1000);
		CHECK(sb_rec_start(h) == 1000, "type %u: zero start", t);
		if (!w || w->start == NO_START)
			continue;
		h = fill(buf, t, size, 0, 1000);
		set_u64(h, w->start, 999);
		CHECK(sb_rec_start(h) == 999, "%s: start %" PRIu64, w->name, sb_rec_start(h));
		set_u64(h, w->start, 1000);
		CHECK(sb_rec_start(h) == 1000, "%s: start = ts", w->name);
		set_u64(h, w->start, 1001);
		CHECK(sb_rec_start(h) == 1000, "%s: start after ts gives ts, not %" PRIu64, w->name,
		      sb_rec_start(h));
		set_u64(h, w->start, 1);
		CHECK(sb_rec_start(h) == 1, "%s: start 1", w->name);
	}
}

/* the cost class and count of every type; a burst counts its calls */
static void t_cost_of(void)
{
	uint64_t buf[SBT_MAX_RECORD / 8];

	for (unsigned t = 0; t < SB_TYPE_MAX + 8; t++) {
		const struct want *w = find(t);
		struct sb_hdr *h = fill(buf, t, w ? w->size : 64, 0, 1000);
		int cls = -7;
		uint64_t n;

		if (t == SB_EV_ALLOC_BURST)
			((struct sb_alloc_burst *)h)->calls = 37;
		if (t == SB_EV_SCHED_RUN) {
			((struct sb_sched_run *)h)->sleeps = 5;
			((struct sb_sched_run *)h)->preempts = 4;
		}
		if (t == SB_EV_IRQ_RUN) {
			((struct sb_irq_run *)h)->hard_count = 3;
			((struct sb_irq_run *)h)->soft_count = 8;
			((struct sb_irq_run *)h)->sys_count = 5;
		}
		n = sb_cost_of(h, &cls);
		if (!w || w->cost == SB_COST_NONE) {
			CHECK(n == 0 && cls == -7, "type %u: %" PRIu64 " of class %d", t, n, cls);
			continue;
		}
		CHECK(cls == w->cost, "%s: class %d, not %d", w->name, cls, w->cost);
		/* a run: a switch each way per trip, and a wakeup per sleep */
		/* an interrupt run: each handler's pair of probes */
		CHECK(n == (t == SB_EV_ALLOC_BURST ? 37 : t == SB_EV_SCHED_RUN ? 3 * 5 + 2 * 4 :
			    t == SB_EV_IRQ_RUN ? 3 + 8 + 5 : 1),
		      "%s: %" PRIu64 " events", w->name, n);
	}
}

int main(void)
{
	RUN(t_ids);
	RUN(t_names_sizes_kinds);
	RUN(t_rec_start);
	RUN(t_cost_of);
	return test_summary();
}
