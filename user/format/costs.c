// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The tracer's own cost: the cost model and the guard's state (format/costs.h). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/costs.h"

const char *const sb_cost_key[SB_NCOST] = {
	[SB_COST_SCHED] = "sched_ns", [SB_COST_FAULT] = "fault_ns",
	[SB_COST_SYSCALL] = "syscall_ns", [SB_COST_ALLOC_CALL] = "alloc_call_ns",
	[SB_COST_UPROBE] = "uprobe_ns", [SB_COST_CUDA_CALL] = "cuda_call_ns",
	[SB_COST_STACK] = "stack_ns", [SB_COST_FAULT_EXT] = "fault_ext_ns",
	[SB_COST_SCHED_FOLD] = "sched_fold_ns", [SB_COST_STACK_COPY] = "stack_copy_ns",
	[SB_COST_IRQ] = "irq_ns",
};

const char *const sb_cost_name[SB_NCOST] = {
	[SB_COST_SCHED] = "sched", [SB_COST_FAULT] = "fault", [SB_COST_SYSCALL] = "syscall",
	[SB_COST_ALLOC_CALL] = "alloc_call", [SB_COST_UPROBE] = "uprobe",
	[SB_COST_CUDA_CALL] = "cuda_call", [SB_COST_STACK] = "stack",
	[SB_COST_FAULT_EXT] = "fault_ext", [SB_COST_SCHED_FOLD] = "sched_fold",
	[SB_COST_STACK_COPY] = "stack_copy", [SB_COST_IRQ] = "irq",
};

/*
 * bench/RESULTS.md, "per-event costs" (a 2-vCPU PVM guest, where traps are
 * slow): a context switch's records 874 ns each, a page fault 460 ns, a timed
 * mmap-family call 1132 ns, a malloc+free pair 29.7 us (two calls, each an
 * uprobe and a uretprobe: about 7.4 us a trap). Upper bounds on faster
 * machines; the uprobe figures are what calibration replaces.
 */
void sb_costs_default(struct sb_costs *c)
{
	memset(c, 0, sizeof(*c));
	c->ns[SB_COST_SCHED] = 874;
	c->ns[SB_COST_FAULT] = 460;
	c->ns[SB_COST_SYSCALL] = 1132;
	c->ns[SB_COST_ALLOC_CALL] = 14850;
	c->ns[SB_COST_UPROBE] = 7400;
	c->ns[SB_COST_CUDA_CALL] = 14850;
	/* bench/RESULTS.md, "Stack capture" */
	c->ns[SB_COST_STACK] = 2900;
	/*
	 * bench/RESULTS.md, sections 14 and 28: the fault probe's time for a
	 * fault that only extends its run (kernel BPF statistics: 190-270 ns, then
	 * 188-204 ns since a dense run reads the clock at one fault in eight); a
	 * run's record costs what a fault record did (fault_ns)
	 */
	c->ns[SB_COST_FAULT_EXT] = 190;
	/*
	 * bench/RESULTS.md, section 21: the scheduler probes' time for an event
	 * of a folded trip, 0.52 of a recorded one's on the same busy trainer
	 * (kernel BPF statistics): 874 x 0.52
	 */
	c->ns[SB_COST_SCHED_FOLD] = 450;
	/*
	 * bench/RESULTS.md, section 48: a stack with a copy of its top (12 KiB
	 * read, 17 registers, a 12.8 KiB ring record); the fault program's
	 * statistics put the copy within +-3 us of the stack alone, so twice a
	 * stack, where the bytes moved put it
	 */
	c->ns[SB_COST_STACK_COPY] = 5800;
	/*
	 * bench/RESULTS.md, section 61: an interrupt's entry and exit probes on a
	 * target thread (kernel BPF statistics, plus the two hooks' floor of
	 * section 46)
	 */
	c->ns[SB_COST_IRQ] = 600;
}

size_t sb_costs_format(const struct sb_costs *c, char *buf, size_t cap)
{
	size_t n = 0;
	bool first = true;

	for (int i = 0; i < SB_NCOST; i++) {
		int k = snprintf(buf + n, n < cap ? cap - n : 0, "%s=%" PRIu64 "\n", sb_cost_key[i],
				 c->ns[i]);

		n += k > 0 ? (size_t)k : 0;
	}
	n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "calibrated=");
	for (int i = 0; i < SB_NCOST; i++) {
		if (!(c->calibrated & (1u << i)))
			continue;
		n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s", first ? "" : ",",
				      sb_cost_key[i]);
		first = false;
	}
	n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "\ncalibration_samples=%u\n",
			      c->samples);
	return n;
}

void sb_costs_parse(struct sb_costs *c, const char *s, size_t n)
{
	char buf[256];

	sb_costs_default(c);
	for (int i = 0; i < SB_NCOST; i++)
		if (kv_get(s, n, sb_cost_key[i], buf, sizeof(buf)))
			c->ns[i] = strtoull(buf, NULL, 10);
	if (kv_get(s, n, "calibrated", buf, sizeof(buf))) {
		for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save))
			for (int i = 0; i < SB_NCOST; i++)
				if (!strcmp(tok, sb_cost_key[i]))
					c->calibrated |= 1u << i;
	}
	if (kv_get(s, n, "calibration_samples", buf, sizeof(buf)))
		c->samples = (uint32_t)strtoul(buf, NULL, 10);
}

/*
 * The cost column of SB_RECORD_TYPES (bpf/events.h), plus one: 0 is NONE, and
 * every type not defined. Runslices are other tasks' time; reclaim probes
 * cost little next to reclaim; agent records cost the target nothing.
 */
#define COST_ROW(e, id, name, st, start, cost, kind) [id] = SB_COST_##cost + 1,
static const signed char cost_class[SB_TYPE_MAX] = { SB_RECORD_TYPES(COST_ROW) };

uint64_t sb_cost_of(const struct sb_hdr *h, int *cls)
{
	int c = h->type < SB_TYPE_MAX ? cost_class[h->type] - 1 : SB_COST_NONE;

	if (c == SB_COST_NONE)
		return 0;
	*cls = c;
	/* an allocator burst stands for its calls */
	if (h->type == SB_EV_ALLOC_BURST)
		return ((const struct sb_alloc_burst *)h)->calls;
	/* a scheduler run for its trips: a switch each way, and a sleep's wakeup */
	if (h->type == SB_EV_SCHED_RUN && h->size >= sizeof(struct sb_sched_run)) {
		const struct sb_sched_run *r = (const void *)h;

		return 3ull * r->sleeps + 2ull * r->preempts;
	}
	/* an interrupt run for its handlers */
	if (h->type == SB_EV_IRQ_RUN && h->size >= sizeof(struct sb_irq_run)) {
		const struct sb_irq_run *r = (const void *)h;

		return (uint64_t)r->hard_count + r->soft_count + r->sys_count;
	}
	/* a stack whose probe copied the top of the stack too */
	if (h->type == SB_EV_STACK && (h->flags & SB_STACK_COPIED))
		*cls = SB_COST_STACK_COPY;
	return 1;
}

void sb_cost_count(const struct sb_hdr *h, uint64_t counts[SB_NCOST])
{
	int cls;
	uint64_t n = sb_cost_of(h, &cls);

	if (n)
		counts[cls] += n;
	/* a fault run: one record, and its other faults each extended it */
	if (h->type == SB_EV_FAULT_RUN && h->size >= sizeof(struct sb_fault_run) &&
	    ((const struct sb_fault_run *)h)->count > 1)
		counts[SB_COST_FAULT_EXT] += ((const struct sb_fault_run *)h)->count - 1;
}

const char *sb_guard_mode_name(int mode)
{
	return mode == SB_GUARD_SAMPLED ? "sampled" : "full";
}

static const char *const guard_reason_names[SB_GUARD_NREASON] = {
	[SB_GUARD_R_NONE] = "", [SB_GUARD_R_START] = "start", [SB_GUARD_R_WINDOW] = "window",
	[SB_GUARD_R_OVER] = "over_limit", [SB_GUARD_R_UNDER] = "under_limit",
	[SB_GUARD_R_END] = "end", [SB_GUARD_R_FAILED] = "failed", [SB_GUARD_R_OTHERS] = "others",
};

const char *sb_guard_reason_name(int reason)
{
	return reason > 0 && reason < SB_GUARD_NREASON ? guard_reason_names[reason] : "";
}

/* append to buf[*n..cap) as snprintf would; *n stays put once the text no longer fits */
__attribute__((format(printf, 4, 5)))
static void append(char *buf, size_t cap, int *n, const char *fmt, ...)
{
	va_list ap;
	int m;

	if (*n < 0 || (size_t)*n >= cap)
		return;
	va_start(ap, fmt);
	m = vsnprintf(buf + *n, cap - (size_t)*n, fmt, ap);
	va_end(ap);
	if (m > 0)
		*n += m;
}

size_t sb_guard_format(const struct sb_guard *g, char *buf, size_t cap)
{
	int n = 0;

	append(buf, cap, &n,
	       "mode=%s\nlimit_ppm=%" PRIu64 "\nestimate_ppm=%" PRIu64 "\nduty_ppm=%" PRIu64
	       "\nperiod_ns=%" PRIu64 "\ncalls_seen=%" PRIu64 "\ncalls_estimated=%" PRIu64 "\n",
	       sb_guard_mode_name(g->mode), g->limit_ppm, g->estimate_ppm, g->duty_ppm,
	       g->period_ns, g->calls_seen, g->calls_estimated);
	if (g->reason > 0 && g->reason < SB_GUARD_NREASON)
		append(buf, cap, &n, "reason=%s\n", guard_reason_names[g->reason]);
	if (g->alloc_limit_ppm)
		append(buf, cap, &n, "others_ppm=%" PRIu64 "\nalloc_limit_ppm=%" PRIu64 "\n",
		       g->others_ppm, g->alloc_limit_ppm);
	if (g->window_start_ns)
		append(buf, cap, &n, "window_start_ns=%" PRIu64 "\nwindow_end_ns=%" PRIu64 "\n",
		       g->window_start_ns, g->window_end_ns);
	return n > 0 ? (size_t)n : 0;
}

bool sb_guard_parse(struct sb_guard *g, const char *s, size_t n)
{
	char buf[64];

	memset(g, 0, sizeof(*g));
	if (!kv_get(s, n, "mode", buf, sizeof(buf)))
		return false;
	g->mode = !strcmp(buf, "sampled") ? SB_GUARD_SAMPLED : SB_GUARD_FULL;
#define U(k) \
	if (kv_get(s, n, #k, buf, sizeof(buf))) \
		g->k = strtoull(buf, NULL, 10);
	U(limit_ppm) U(estimate_ppm) U(duty_ppm) U(period_ns) U(calls_seen) U(calls_estimated)
	U(window_start_ns) U(window_end_ns) U(others_ppm) U(alloc_limit_ppm)
#undef U
	if (!g->alloc_limit_ppm)
		g->alloc_limit_ppm = g->limit_ppm;
	if (kv_get(s, n, "reason", buf, sizeof(buf)))
		for (int r = 1; r < SB_GUARD_NREASON; r++)
			if (!strcmp(buf, guard_reason_names[r]))
				g->reason = r;
	return true;
}

bool kv_get(const char *s, size_t n, const char *key, char *buf, size_t len)
{
	size_t kl = strlen(key);

	for (size_t i = 0; i < n;) {
		size_t j = i;

		while (j < n && s[j] != '\n')
			j++;
		if (j - i > kl && !memcmp(s + i, key, kl) && s[i + kl] == '=') {
			size_t vl = j - i - kl - 1;

			if (vl >= len)
				vl = len - 1;
			memcpy(buf, s + i + kl + 1, vl);
			buf[vl] = 0;
			return true;
		}
		i = j + 1;
	}
	return false;
}
