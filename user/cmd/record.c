// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* `stepblame record` and `stepblame attach`. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cmds.h"
#include "cmd/top.h"
#include "cmd/metrics.h"
#include "capture/capture_file.h"
#include "capture/collect.h"
#include "report/report.h"
#include "report/symbols.h"
#include "base/outfile.h"
#include "capture/target.h"
#include "format/trace.h"
#include "base/util.h"

static const char record_usage[] =
"usage: stepblame record -p PID [-d SEC] [-o FILE] [options]\n"
"\n"
"Capture every host event that can stall a training step of process PID (all its\n"
"threads, including threads created later) and its GPU timeline, into a trace\n"
"file. Stop with -d, Ctrl-C, or when PID exits. Read the file with\n"
"`stepblame report FILE` or `stepblame dump FILE`.\n"
"\n"
"The GPU timeline comes from the CUPTI collector in the trainer. A trainer that\n"
"runs CUDA without it gets it now: one of its sleeping threads is held with\n"
"ptrace for the few ms it takes to load (--no-inject: host-only instead).\n"
"\n";

static const char record_example[] =
"\n"
"example: sudo stepblame record -p 4242 -d 30 -o run.sbtrace && stepblame report run.sbtrace\n";

static const char attach_usage[] =
"usage: stepblame attach -p PID [-d SEC] [--jsonl OUT] [--html OUT] [options]\n"
"\n"
"Trace process PID live: one line per finished step (time, GPU idle, the top cause\n"
"and culprit; tail steps marked), a line per second while no step finishes, and\n"
"the full report when it stops (-d, Ctrl-C, PID exits, or the reader of its output\n"
"goes away: `attach -p PID | head` stops with head). On a terminal, a screen\n"
"redrawn as top does instead of the lines (--lines for lines). Host-only, a\n"
"step's line follows its end by about 200 ms; with a GPU timeline, by the time\n"
"its records take to come (3 s: the lines say so). If the trainer runs the\n"
"GPU collector (stepblame run --dormant), collection is turned on while attached.\n"
"Takes the options of `stepblame record` but -o (see stepblame record --help).\n"
"\n";

/* the column where the help of each option starts */
#define HELP_COLUMN 26

static const char *end_reason_text(enum sbt_end r)
{
	switch (r) {
	case SBT_END_DURATION: return "duration reached";
	case SBT_END_SIGNAL: return "interrupted";
	case SBT_END_TARGET_EXIT: return "target exited";
	case SBT_END_ERROR: return "stopped on an error";
	case SBT_END_CREDENTIALS: return "the target took another user's credentials";
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

/*
 * The trace is renamed onto OUT at the end: a directory there would fail only
 * then, after the whole capture, and a device or FIFO (/dev/null) would be
 * replaced by a regular file. Refuse both before anything starts.
 */
static int check_output(const char *out)
{
	struct stat st;

	if (!*out) {
		sb_err("record: -o wants a file name");
		return 2;
	}
	if (stat(out, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			sb_err("cannot write %s: it is a directory (give a file name in it)", out);
			return 1;
		}
		if (!S_ISREG(st.st_mode)) {
			sb_err("refusing to write %s: it exists and is not a regular file", out);
			return 1;
		}
	}
	return 0;
}

/* the trace file exists: from here on Ctrl-C stops the capture */
static void record_started(struct capture_file *cf, const struct collect_opts *o)
{
	collect_signals();
	if (!o->quiet)
		fprintf(stderr, "stepblame: recording PID %d to %s%s\n", (int)o->probe.pid, cf->path,
			o->duration_ns ? "" : " (Ctrl-C to stop)");
}

int cmd_record(int argc, char **argv)
{
	struct collect_opts o;
	struct capture_file cf = { .on_created = record_started };
	const struct collect_result *res = &cf.res;
	const char *out = NULL;
	char defout[64];
	struct stat st;
	bool existed;
	int i, rc;

	i = collect_parse_common(argc, argv, &o, &out, NULL, "record");
	if (i == -2) {
		fputs(record_usage, stdout);
		opts_help(stdout, collect_options, HELP_COLUMN, COLLECT_RECORD);
		fputs(record_example, stdout);
		return 0;
	}
	if (i < 0)
		return 2;
	if (i < argc) {
		sb_err("record: unexpected argument '%s'", argv[i]);
		return 2;
	}
	if (!o.probe.pid) {
		sb_err("record: needs -p PID (see stepblame record --help)");
		return 2;
	}
	if (!out) {
		snprintf(defout, sizeof(defout), "stepblame-%d" SBT_EXT "%s", (int)o.probe.pid,
			 o.zstd_level ? ".zst" : "");
		out = defout;
	}
	rc = check_output(out);
	if (rc)
		return rc;
	existed = !lstat(out, &st) && S_ISREG(st.st_mode);
	if (preflight(o.probe.pid))
		return 1;
	cf.path = out;
	switch (capture_to_file(&o, &cf)) {
	case CAPTURE_NO_FILE:
		sb_err("%s", cf.err);
		return 1;
	case CAPTURE_NOT_RUN:
		return cf.status;
	case CAPTURE_CUT_SHORT:
		sb_err("capture stopped: writing %s: %s; the trace is readable up to its last "
		       "whole record", cf.where, strerror(cf.error));
		return 1;
	case CAPTURE_NOT_FINISHED:
		sb_err("cannot finish %s: %s", out, strerror(cf.error));
		return 1;
	case CAPTURE_DONE:
		break;
	}
	if (!o.quiet)
		fprintf(stderr, "stepblame: wrote %" PRIu64 " records in %.1f s to %s (%s); "
			"%" PRIu64 " events dropped%s\n",
			res->records, (res->end_ns - res->start_ns) / 1e9, out,
			end_reason_text(res->end_reason), res->drops_total,
			res->gpu ? "" : "; host-only (no GPU timeline)");
	if (existed && !o.quiet)
		fprintf(stderr, "stepblame: the %s that was there is kept as %s.old\n", out, out);
	return 0;
}

/* ---- attach: the engine, live ---- */

/*
 * Steps attach keeps in detail: the live tail judgement looks at the last 1024,
 * the final report lists the tail among these; the summaries cover all steps.
 */
#define ATTACH_KEEP_STEPS 4096
/*
 * Host-only, how late a record may reach attach's engine: the ring is drained
 * every tick (100 ms) and a step's own records come before its end mark, so a
 * step line follows the step by about this and a tick
 */
#define ATTACH_HOST_LAG_NS 100000000ull

struct live {
	struct engine *eng;
	struct symbols *sym;         /* the stacks' names in the JSON lines, kept from step to step */
	FILE *json;
	struct metrics *metrics;     /* --metrics-addr */
	pid_t pid;
	uint64_t start;
	uint64_t steps_this_second;
	uint64_t n[SB_TYPE_MAX];     /* records this second, for the no-steps-yet line */
	uint64_t drops;
	uint64_t gpu_rejected;       /* said so far */
	bool out_closed;             /* standard output went away (a pipe's reader left) */
	bool json_stdout;            /* --json -: standard output has the JSON lines only */
	bool tail_only;              /* --tail-only */
	struct top *top;             /* the view on a terminal; NULL: lines */
	char note[256];              /* the top view's line about the capture */
};

/*
 * After writing to standard output: where its reader is gone (EPIPE: SIGPIPE
 * is ignored while probes are attached, so that they are always detached),
 * stop the capture as a signal would, and write nothing more there.
 */
static void live_flush(struct live *l)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return;
	if (!l->out_closed)
		collect_stop = 1;
	l->out_closed = true;
}

/* attach --html: the report of the capture as one page; 0 or 1 after a line on stderr */
static int write_html(const struct engine *e, const char *path, bool quiet)
{
	struct sb_stream out = { 0 };
	int wr;

	if (sb_stream_open(&out, path))
		return 1;
	wr = report_html(e, out.f);
	if (sb_stream_close(&out, wr == 0, "the HTML report"))
		return 1;
	if (!quiet)
		fprintf(stderr, "stepblame: HTML report in %s\n", path);
	return 0;
}

static int live_sink(void *ctx, const struct sb_hdr *rec)
{
	struct live *l = ctx;

	if (rec->type < SB_TYPE_MAX)
		l->n[rec->type]++;
	/* a scheduler run: its trips were switches, its sleeps' ends wakeups */
	if (rec->type == SB_EV_SCHED_RUN && rec->size >= sizeof(struct sb_sched_run)) {
		const struct sb_sched_run *r = (const void *)rec;

		l->n[SB_EV_SWITCH_OUT] += r->sleeps + r->preempts;
		l->n[SB_EV_WAKEUP] += r->sleeps;
	}
	if (rec->type == SB_REC_DROPS) {
		l->drops = sb_drops_total((const void *)rec);
		metrics_drops(l->metrics, l->drops);
	}
	engine_feed(l->eng, rec);
	return 0;
}

static void live_step(void *ctx, const struct eng_step *s)
{
	struct live *l = ctx;
	struct eng_summary sum;

	engine_running_summary(l->eng, &sum);
	if (l->top) {
		top_step(l->top, l->eng, s, &sum);
		if (!l->out_closed && top_draw(l->top, l->eng, mono_ns(), false, stdout))
			live_flush(l);
	} else if (!l->out_closed && !l->json_stdout && (!l->tail_only || s->tail)) {
		char note[48] = "";

		/* with a GPU timeline the lines wait for its batches: say how long */
		if (s->gpu_timeline)
			snprintf(note, sizeof(note), "  (+%.1f s: GPU batches)", engine_lag(l->eng) / 1e9);
		report_step_line(l->eng, s, &sum, note, stdout);
		live_flush(l);
	}
	if (l->json && !(l->json_stdout && l->out_closed)) {
		report_step_json(l->eng, s, &sum, &l->sym, l->json);
		if (l->json_stdout)
			live_flush(l);
		else
			fflush(l->json);
	}
	if (l->metrics) {
		struct eng_identity id;

		/* a launcher's child marks the steps: its ids label them */
		engine_identity(l->eng, &id);
		metrics_identity(l->metrics, &id);
	}
	metrics_step(l->metrics, s);
	l->steps_this_second++;
}

/* each tick, how far the ring has been read: time has moved on to there (steps finalise during silence) */
static void live_tick(void *ctx, uint64_t drained_to)
{
	struct live *l = ctx;

	engine_advance(l->eng, drained_to);
}

/* the GPU channel is read from now on: its records come in batches, held for the lag */
static void live_gpu(void *ctx)
{
	struct live *l = ctx;

	engine_gpu_expected(l->eng);
	if (!l->out_closed && !l->json_stdout && !l->top) {
		printf("GPU timeline: step lines now come %.1f s after the step ends (the GPU's records "
		       "arrive in batches)\n", engine_lag(l->eng) / 1e9);
		live_flush(l);
	}
}

/*
 * The capture ended as a file's would: say how, as its trailer does, and
 * finish the last steps now, not after the probes are taken down
 */
static void live_end(void *ctx, const struct collect_result *res)
{
	struct live *l = ctx;
	struct sb_trailer end = {
		.h = { .type = SB_REC_TRAILER, .size = sizeof(end), .ts = res->end_ns },
		.drops_total = res->drops_total,
		.start_ns = res->start_ns,
		.end_reason = res->end_reason,
	};

	engine_feed(l->eng, &end.h);
	engine_finish(l->eng);
}

/* a second without a finished step: say what is happening instead */
static void live_second(void *ctx, uint64_t now)
{
	struct live *l = ctx;

	if (l->top) {
		if (l->steps_this_second)
			l->note[0] = 0;
		else
			snprintf(l->note, sizeof(l->note), "no step finished in the last second: %" PRIu64
				 " step marks, %" PRIu64 " switches, %" PRIu64 " GPU records, %" PRIu64
				 " dropped", l->n[SB_EV_STEP], l->n[SB_EV_SWITCH_OUT], l->n[SB_REC_GPU],
				 l->drops);
		top_note(l->top, l->note[0] ? l->note : NULL);
		if (!l->out_closed && top_draw(l->top, l->eng, now, true, stdout))
			live_flush(l);
	} else if (!l->steps_this_second && !l->out_closed && !l->json_stdout)
		printf("%6.1fs  no step finished: %" PRIu64 " switches, %" PRIu64 " wakeups, %" PRIu64
		       " faults, %" PRIu64 " allocator/mmap calls, %" PRIu64 " step marks, %" PRIu64
		       " GPU records, %" PRIu64 " dropped\n",
		       (now - l->start) / 1e9, l->n[SB_EV_SWITCH_OUT], l->n[SB_EV_WAKEUP],
		       l->n[SB_EV_FAULT], l->n[SB_EV_ALLOC] + l->n[SB_EV_MMSYS], l->n[SB_EV_STEP],
		       l->n[SB_REC_GPU], l->drops);
	{
		struct eng_loss loss;

		/* GPU records with impossible times: the trainer's clock or channel is wrong */
		engine_loss(l->eng, &loss);
		if (loss.gpu_rejected > l->gpu_rejected && !l->out_closed && !l->json_stdout &&
		    !l->top) {
			printf("%6.1fs  %" PRIu64 " GPU records rejected: their times lie outside the "
			       "capture (%" PRIu64 " in all)\n", (now - l->start) / 1e9,
			       loss.gpu_rejected - l->gpu_rejected, loss.gpu_rejected);
			l->gpu_rejected = loss.gpu_rejected;
		}
	}
	if (!l->out_closed)
		live_flush(l);
	memset(l->n, 0, sizeof(l->n));
	l->steps_this_second = 0;
}

int cmd_attach(int argc, char **argv)
{
	struct engine_opts eo = { 0 };
	struct collect_opts o;
	struct collect_result res;
	struct live_args la = { 0 };
	struct sb_out jout = { .fd = -1, .dirfd = -1 };
	char err[PATH_MAX + 256];
	struct live *l;
	int i, rc;

	i = collect_parse_common(argc, argv, &o, NULL, &la, "attach");
	if (i == -2) {
		fputs(attach_usage, stdout);
		opts_help(stdout, collect_options, HELP_COLUMN, COLLECT_ATTACH);
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
	if (la.html && !*la.html) {
		sb_err("attach: --html wants a file name");
		return 2;
	}
	if (la.html && strcmp(la.html, "-") && (rc = check_output(la.html)))
		return rc;
	if (!la.metrics_addr && (la.job || la.rank || la.local_rank)) {
		sb_err("attach: --job, --rank and --local-rank label the metrics: give --metrics-addr "
		       "HOST:PORT too");
		return 2;
	}
	if (preflight(o.probe.pid))
		return 1;
	l = calloc(1, sizeof(*l));
	if (!l)
		return 1;
	l->pid = o.probe.pid;
	l->tail_only = la.tail_only;
	/* on a terminal, a screen redrawn as top does; lines where asked or piped */
	if (!la.lines && !la.tail_only && !(la.json && !strcmp(la.json, "-")) &&
	    isatty(STDOUT_FILENO) && !(l->top = top_new(mono_ns()))) {
		top_free(l->top);
		free(l);
		return 1;
	}
	/* live: GPU records must fall inside the capture; days of steps in bounded memory */
	eo.live = true;
	eo.host_lag_ns = ATTACH_HOST_LAG_NS;
	eo.start_ns = mono_ns();
	eo.keep_steps = ATTACH_KEEP_STEPS;
	l->eng = engine_new(&eo, err, sizeof(err));
	if (!l->eng) {
		sb_err("attach: %s", err);
		top_free(l->top);
		free(l);
		return 1;
	}
	if (la.metrics_addr) {
		struct metrics_labels lb;
		char comm[SB_COMM_LEN + 1] = "", path[64];
		FILE *cf;

		metrics_labels_fill(&lb, o.probe.pid, la.job, la.rank, la.local_rank);
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)o.probe.pid);
		if ((cf = fopen(path, "re"))) {
			if (fgets(comm, sizeof(comm), cf))
				comm[strcspn(comm, "\n")] = 0;
			fclose(cf);
		}
		l->metrics = metrics_new(&lb, (uint32_t)o.probe.pid, comm);
		if (!l->metrics || metrics_serve(l->metrics, la.metrics_addr, err, sizeof(err))) {
			sb_err("attach: %s", l->metrics ? err : "out of memory");
			metrics_free(l->metrics);
			engine_free(l->eng);
			top_free(l->top);
			free(l);
			return 1;
		}
		if (!o.quiet)
			fprintf(stderr, "stepblame: metrics at http://%s/metrics (job=\"%s\" rank=\"%s\" "
				"local_rank=\"%s\" host=\"%s\")\n", la.metrics_addr, lb.job, lb.rank,
				lb.local_rank, lb.host);
	}
	if (la.json && !strcmp(la.json, "-")) {
		/* the JSON lines on standard output, alone: the closing report goes to stderr */
		l->json = stdout;
		l->json_stdout = true;
	} else if (la.json) {
		const char *json = la.json;
		/* a temporary name, renamed at the end: never through a planted symlink */
		bool opened = !sb_out_open(&jout, json, NULL, err, sizeof(err));

		if (opened && !(l->json = fdopen(jout.fd, "w"))) {
			snprintf(err, sizeof(err), "cannot write %s: %s", jout.tmp_path,
				 strerror(errno));
			sb_out_abandon(&jout, false);
		}
		if (!l->json) {
			sb_err("attach: %s", err);
			metrics_free(l->metrics);
			engine_free(l->eng);
			top_free(l->top);
			free(l);
			return 1;
		}
		jout.fd = -1; /* closed by fclose */
	}
	engine_set_step_cb(l->eng, live_step, l);
	l->start = mono_ns();
	o.on_second = live_second;
	o.on_tick = live_tick;
	o.on_gpu = live_gpu;
	o.on_end = live_end;
	o.on_second_ctx = l;
	o.live = true;
	collect_signals();
	if (l->top)
		top_begin(stdout);
	rc = collect_run(&o, live_sink, l, &res);
	if (l->top && !l->out_closed) {
		/* the last screen stays, the report below it */
		top_note(l->top, NULL);
		top_draw(l->top, l->eng, mono_ns(), true, stdout);
	}
	if (!rc) {
		if (!o.quiet)
			fprintf(stderr, "stepblame: detached after %.1f s (%s); %" PRIu64
				" events dropped\n", (res.end_ns - res.start_ns) / 1e9,
				l->out_closed ? "standard output closed" : end_reason_text(res.end_reason),
				res.drops_total);
		if (l->json_stdout) {
			fputc('\n', stderr);
			report_text(l->eng, stderr);
		} else if (!l->out_closed) {
			printf("\n");
			report_text(l->eng, stdout);
			live_flush(l);
		}
		if (la.html && write_html(l->eng, la.html, o.quiet))
			rc = 1;
	}
	if (l->json && !l->json_stdout) {
		const char *json = la.json;
		bool ok = !ferror(l->json) && fflush(l->json) == 0 && fsync(fileno(l->json)) == 0;

		if (fclose(l->json))
			ok = false;
		if (!ok) {
			sb_err("attach: writing %s failed; partial lines left in %s", json,
			       jout.tmp_path);
			sb_out_abandon(&jout, true);
			rc = rc ? rc : 1;
		} else {
			char tmp[PATH_MAX + 32];
			int crc;

			snprintf(tmp, sizeof(tmp), "%s", jout.tmp_path);
			crc = sb_out_commit(&jout, true);
			if (crc) {
				sb_err("attach: cannot rename %s to %s: %s", tmp, json, strerror(-crc));
				rc = rc ? rc : 1;
			}
		}
	}
	metrics_free(l->metrics);
	symbols_free(l->sym);
	engine_free(l->eng);
	top_free(l->top);
	free(l);
	return rc;
}
