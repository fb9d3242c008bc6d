// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* `stepblame record` and `stepblame attach`. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmds.h"
#include "collect.h"
#include "target.h"
#include "trace.h"
#include "util.h"

static const char record_usage[] =
"usage: stepblame record -p PID [-d SEC] -o FILE [options]\n"
"\n"
"Capture every host event that can stall a training step of process PID (all its\n"
"threads, including threads created later) and its GPU timeline when the trainer\n"
"runs the collector, into a trace file. Stop with -d, Ctrl-C, or when PID exits.\n"
"Read the file with `stepblame report FILE` or `stepblame dump FILE`.\n"
"\n"
"  -p, --pid PID           process to trace (root, or CAP_BPF + CAP_PERFMON)\n"
"  -d, --duration SEC      stop after this long (30, 30s, 500ms, 2m); default: until Ctrl-C\n"
"  -o, --output FILE       trace file; written as FILE.partial.XXXXXX and renamed at the end\n"
"      --no-alloc          do not probe malloc and friends\n"
"      --alloc-lib PATH    probe this allocator (jemalloc, tcmalloc) instead of the libc\n"
"      --alloc-min-ns N    allocator calls faster than N ns (above the fastest call seen,\n"
"                          which is mostly the probes' own cost) are only counted (10000;\n"
"                          0: every call is an event)\n"
"      --step-uprobe LIB:SYM  each call of SYM in LIB marks a step (besides USDT stepblame:step)\n"
"      --no-cuda           do not probe the CUDA driver library\n"
"      --no-gpu            do not read the trainer's GPU timeline channel\n"
"      --no-tracefs        raw tracepoints only; by default tracefs is mounted if needed\n"
"                          so the mmap-family probes fire only on those system calls\n"
"      --agent-cpu N|none  pin the agent (default: a CPU the target may not use, if any)\n"
"      --ring-mb N         ring buffer size in MiB, power of two (default 64)\n"
"  -q, --quiet             no progress lines\n"
"  -v, --verbose           libbpf's own messages\n"
"\n"
"example: sudo stepblame record -p 4242 -d 30 -o run.sbt && stepblame report run.sbt\n";

static const char attach_usage[] =
"usage: stepblame attach -p PID [-d SEC] [--json OUT] [options]\n"
"\n"
"Trace process PID live. Prints a summary line every second: events by kind, the\n"
"tasks that ran while the trainer's threads waited for a CPU, steps, drops.\n"
"Stops with -d, Ctrl-C, or when PID exits. Takes the options of `stepblame record`\n"
"(see stepblame record --help) but -o.\n"
"\n"
"  --json OUT              also write the per-second summaries as JSON lines to OUT\n";

static int write_sink(void *ctx, const struct sb_hdr *rec)
{
	return sbt_write(ctx, rec);
}

static const char *end_reason_text(enum sbt_end r)
{
	switch (r) {
	case SBT_END_DURATION: return "duration reached";
	case SBT_END_SIGNAL: return "interrupted";
	case SBT_END_TARGET_EXIT: return "target exited";
	case SBT_END_ERROR: return "stopped on an error";
	}
	return "?";
}

/* checks that must pass before any file is created */
static int preflight(pid_t pid)
{
	char err[512];

	if (target_check(pid, err, sizeof(err))) {
		sb_err("%s", err);
		return -1;
	}
	if (probes_check_privileges(pid, err, sizeof(err))) {
		sb_err("%s", err);
		return -1;
	}
	return 0;
}

int cmd_record(int argc, char **argv)
{
	struct collect_opts o;
	struct collect_result res;
	const char *out = NULL;
	struct sbt_writer *w;
	int i, rc, err;

	i = collect_parse_common(argc, argv, &o, &out, NULL, "record");
	if (i == -2) {
		fputs(record_usage, stdout);
		return 0;
	}
	if (i < 0)
		return 2;
	if (i < argc) {
		sb_err("record: unexpected argument '%s'", argv[i]);
		return 2;
	}
	if (!o.probe.pid || !out) {
		sb_err("record: needs -p PID and -o FILE (see stepblame record --help)");
		return 2;
	}
	if (preflight(o.probe.pid))
		return 1;
	w = sbt_create(out);
	if (!w) {
		sb_err("cannot write %s: %s", out, strerror(errno));
		return 1;
	}
	collect_signals();
	if (!o.quiet)
		fprintf(stderr, "stepblame: recording PID %d to %s%s\n", (int)o.probe.pid, out,
			o.duration_ns ? "" : " (Ctrl-C to stop)");
	rc = collect_run(&o, write_sink, w, &res);
	if (rc) {
		/* nothing captured: leave nothing behind */
		unlink(sbt_partial_path(w));
		sbt_abandon(w);
		return rc;
	}
	if (res.sink_error) {
		/* disk full or similar: keep what reached the disk under the asked-for name */
		int e = -res.sink_error;

		if (rename(sbt_partial_path(w), out))
			out = sbt_partial_path(w);
		sb_err("capture stopped: writing %s: %s; the trace is readable up to its last "
		       "whole record", out, strerror(e));
		sbt_abandon(w);
		return 1;
	}
	err = sbt_finish(w, res.end_reason, res.start_ns, res.end_ns, res.drops_total);
	if (err) {
		sb_err("cannot finish %s: %s", out, strerror(-err));
		return 1;
	}
	if (!o.quiet)
		fprintf(stderr, "stepblame: wrote %" PRIu64 " records in %.1f s to %s (%s); "
			"%" PRIu64 " events dropped%s\n",
			res.records, (res.end_ns - res.start_ns) / 1e9, out,
			end_reason_text(res.end_reason), res.drops_total,
			res.gpu ? "" : "; host-only (no GPU timeline)");
	return 0;
}

/* ---- attach: rolling per-second summary ---- */

#define TOP 4

struct live {
	FILE *json;
	pid_t pid;
	uint64_t start;
	uint64_t n[SB_TYPE_MAX];
	uint64_t wait_ns;           /* runnable-but-waiting time of target threads */
	uint64_t drops;
	uint64_t last_step;
	bool have_step;
	struct {
		uint32_t pid;
		char comm[SB_COMM_LEN];
		uint64_t ns;
	} top[32];
	int ntop;
};

static void live_add_runslice(struct live *l, const struct sb_runslice *r)
{
	uint64_t ns = r->h.ts > r->start_ns ? r->h.ts - r->start_ns : 0;
	int i;

	if (r->h.pid == (uint32_t)l->pid)
		return;
	for (i = 0; i < l->ntop; i++)
		if (l->top[i].pid == r->h.pid)
			break;
	if (i == l->ntop) {
		if (l->ntop == (int)ARRAY_SIZE(l->top))
			return;
		l->ntop++;
		l->top[i].pid = r->h.pid;
		l->top[i].ns = 0;
		memcpy(l->top[i].comm, r->comm, SB_COMM_LEN);
		l->top[i].comm[SB_COMM_LEN - 1] = 0;
	}
	l->top[i].ns += ns;
}

static int live_sink(void *ctx, const struct sb_hdr *rec)
{
	struct live *l = ctx;

	if (rec->type < SB_TYPE_MAX)
		l->n[rec->type]++;
	switch (rec->type) {
	case SB_EV_RUNSLICE:
		live_add_runslice(l, (const struct sb_runslice *)rec);
		break;
	case SB_EV_SWITCH_IN:
		l->wait_ns += ((const struct sb_switch_in *)rec)->wait_ns;
		break;
	case SB_EV_STEP:
		l->last_step = ((const struct sb_step *)rec)->step;
		l->have_step = true;
		break;
	case SB_REC_DROPS: {
		const struct sb_drops *d = (const void *)rec;
		uint64_t t = d->gpu_channel + d->gpu_source + d->wait_overflow;

		for (int i = 0; i <= SB_EV_KERNEL_MAX; i++)
			t += d->ring[i];
		l->drops = t;
		break;
	}
	}
	return 0;
}

static int cmp_top(const void *a, const void *b)
{
	const typeof(((struct live *)0)->top[0]) *x = a, *y = b;

	return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

static void live_second(void *ctx, uint64_t now)
{
	struct live *l = ctx;
	uint64_t sw = l->n[SB_EV_SWITCH_OUT], wk = l->n[SB_EV_WAKEUP];
	char who[256] = "";
	size_t off = 0;

	qsort(l->top, l->ntop, sizeof(l->top[0]), cmp_top);
	for (int i = 0; i < l->ntop && i < TOP; i++)
		off += snprintf(who + off, sizeof(who) - off, "%s%s[%u] %.1fms", i ? ", " : "",
				l->top[i].comm, l->top[i].pid, l->top[i].ns / 1e6);
	printf("%6.1fs  steps %-5" PRIu64 " switches %-6" PRIu64 " wakeups %-6" PRIu64
	       " waited %.1fms  faults %-6" PRIu64 " mm %-4" PRIu64 " alloc %-4" PRIu64
	       " migr %-3" PRIu64 " gpu %-6" PRIu64 " drops %" PRIu64 "%s%s\n",
	       (now - l->start) / 1e9, l->n[SB_EV_STEP], sw, wk, l->wait_ns / 1e6,
	       l->n[SB_EV_FAULT], l->n[SB_EV_MMSYS], l->n[SB_EV_ALLOC], l->n[SB_EV_MIGRATE],
	       l->n[SB_REC_GPU], l->drops, l->ntop ? "  stolen by: " : "", who);
	fflush(stdout);
	if (l->json) {
		fprintf(l->json, "{\"t_ns\":%" PRIu64 ",\"steps\":%" PRIu64 ",\"switches\":%" PRIu64
			",\"wakeups\":%" PRIu64 ",\"wait_ns\":%" PRIu64 ",\"faults\":%" PRIu64
			",\"mmsys\":%" PRIu64 ",\"alloc\":%" PRIu64 ",\"migrations\":%" PRIu64
			",\"gpu\":%" PRIu64 ",\"drops\":%" PRIu64 "}\n",
			now, l->n[SB_EV_STEP], sw, wk, l->wait_ns, l->n[SB_EV_FAULT],
			l->n[SB_EV_MMSYS], l->n[SB_EV_ALLOC], l->n[SB_EV_MIGRATE], l->n[SB_REC_GPU],
			l->drops);
		fflush(l->json);
	}
	memset(l->n, 0, sizeof(l->n));
	l->wait_ns = 0;
	l->ntop = 0;
}

int cmd_attach(int argc, char **argv)
{
	struct collect_opts o;
	struct collect_result res;
	const char *json = NULL;
	struct live *l;
	int i, rc;

	i = collect_parse_common(argc, argv, &o, NULL, &json, "attach");
	if (i == -2) {
		fputs(attach_usage, stdout);
		return 0;
	}
	if (i < 0)
		return 2;
	if (i < argc) {
		sb_err("attach: unexpected argument '%s'", argv[i]);
		return 2;
	}
	if (!o.probe.pid) {
		sb_err("attach: needs -p PID (see stepblame attach --help)");
		return 2;
	}
	if (preflight(o.probe.pid))
		return 1;
	l = calloc(1, sizeof(*l));
	if (!l)
		return 1;
	l->pid = o.probe.pid;
	if (json) {
		l->json = fopen(json, "we");
		if (!l->json) {
			sb_err("cannot write %s: %s", json, strerror(errno));
			free(l);
			return 1;
		}
	}
	l->start = mono_ns();
	o.on_second = live_second;
	o.on_second_ctx = l;
	collect_signals();
	rc = collect_run(&o, live_sink, l, &res);
	if (!rc && !o.quiet)
		fprintf(stderr, "stepblame: detached after %.1f s (%s); %" PRIu64 " events dropped\n",
			(res.end_ns - res.start_ns) / 1e9, end_reason_text(res.end_reason),
			res.drops_total);
	if (l->json)
		fclose(l->json);
	free(l);
	return rc;
}
