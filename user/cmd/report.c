// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* stepblame report: a trace file in, per-step blame out. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cmds.h"
#include "report/report.h"
#include "base/outfile.h"
#include "format/trace.h"
#include "base/util.h"

static const char usage[] =
"usage: stepblame report FILE [--format text|json|jsonl|perfetto] [-o OUT]\n"
"                        [--step-nvtx REGEX] [--step-kernel REGEX]\n"
"\n"
"Per-step blame from a trace written by `stepblame record`: each step's time, how\n"
"long the GPU sat idle in it, and what on the host kept it idle (cpu_wait with the\n"
"task that took the CPU, page_fault, mem_reclaim, alloc, io_wait, blocked with the\n"
"thread that woke it, cuda_sync, host_compute, ...). Tail steps (longer than the\n"
"median + 3 MAD) are explained by each cause's excess over the median step.\n"
"\n"
"  -f, --format FMT      text (default, for people), json (one document),\n"
"                        jsonl (one object per step), perfetto (open in\n"
"                        ui.perfetto.dev: GPU streams, thread states, interferers,\n"
"                        steps and blame)\n"
"  -o, --output OUT      write there (atomically: a temporary name, then renamed)\n"
"                        instead of standard output\n"
"      --step-nvtx RE    steps are NVTX ranges whose text matches the POSIX\n"
"                        extended regex RE (e.g. '^step')\n"
"      --step-kernel RE  a step starts with each kernel whose name matches RE\n"
"      --lag SEC         how late GPU records may arrive in the trace (default 3)\n"
"  -h, --help            this help\n"
"\n"
"Without --step-nvtx/--step-kernel the steps come from the stepblame:step USDT\n"
"marks (or --step-uprobe) if the trace has them, else from the GPU step markers.\n"
"The JSON fields are documented in schemas/report.md. A trace cut short is\n"
"reported as far as it goes, and the report says so.\n"
"\n"
"  stepblame report run.sbt\n"
"  stepblame report run.sbt --format json -o report.json\n"
"  stepblame report run.sbt --format perfetto -o run.perfetto.json\n";

enum fmt { FMT_TEXT, FMT_JSON, FMT_JSONL, FMT_PERFETTO };

/* stdout, or a file that only appears, complete, when it is renamed into place */
struct out {
	FILE *f;
	struct sb_out file;
	bool to_file;
};

static int out_open(struct out *o, const char *path)
{
	char err[PATH_MAX + 128];

	memset(o, 0, sizeof(*o));
	o->file.fd = o->file.dirfd = -1;
	if (!path || !strcmp(path, "-")) {
		o->f = stdout;
		return 0;
	}
	if (sb_out_open(&o->file, path, NULL, err, sizeof(err))) {
		sb_err("%s", err);
		return -1;
	}
	o->f = fdopen(o->file.fd, "w");
	if (!o->f) {
		sb_err("cannot write %s: %s", o->file.tmp_path, strerror(errno));
		sb_out_abandon(&o->file, false);
		return -1;
	}
	o->file.fd = -1; /* fclose closes it */
	o->to_file = true;
	return 0;
}

static int out_close(struct out *o, bool ok)
{
	char tmp[PATH_MAX + 32];
	int err = 0;

	if (!o->f)
		return -1;
	if (fflush(o->f) || ferror(o->f))
		err = errno ? errno : EIO;
	if (!o->to_file) {
		o->f = NULL;
		if (err)
			sb_err("writing the report: %s", strerror(err));
		return err ? -1 : 0;
	}
	if (!err && fsync(fileno(o->f)))
		err = errno;
	if (fclose(o->f) && !err)
		err = errno;
	o->f = NULL;
	o->to_file = false;
	if (err || !ok) {
		if (err)
			sb_err("writing %s: %s", o->file.tmp_path, strerror(err));
		sb_out_abandon(&o->file, false);
		return -1;
	}
	snprintf(tmp, sizeof(tmp), "%s", o->file.tmp_path);
	err = sb_out_commit(&o->file, true);
	if (err) {
		sb_err("cannot rename %s to %s: %s", tmp, o->file.path ? o->file.path : "", strerror(-err));
		return -1;
	}
	return 0;
}

int cmd_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "step-nvtx", required_argument, NULL, 'N' },
		{ "step-kernel", required_argument, NULL, 'K' },
		{ "lag", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct engine_opts eo = { 0 };
	enum fmt fmt = FMT_TEXT;
	const char *path = NULL, *outp = NULL;
	struct sbt_reader *r = NULL;
	struct engine *e = NULL;
	struct perfetto_stream *pf = NULL;
	struct out out = { 0 };
	const struct sb_hdr *rec;
	enum sbt_status st;
	char err[512];
	int c, rc = 1, wr;
	bool bad_input = false;

	optind = 0; /* a full restart: report may run more than once in a process (tests) */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":f:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (!strcmp(optarg, "text"))
				fmt = FMT_TEXT;
			else if (!strcmp(optarg, "json"))
				fmt = FMT_JSON;
			else if (!strcmp(optarg, "jsonl"))
				fmt = FMT_JSONL;
			else if (!strcmp(optarg, "perfetto"))
				fmt = FMT_PERFETTO;
			else {
				sb_err("report: unknown format '%s' (text, json, jsonl, perfetto)", optarg);
				return 2;
			}
			break;
		case 'o':
			outp = optarg;
			break;
		case 'N':
			eo.step_nvtx = optarg;
			break;
		case 'K':
			eo.step_kernel = optarg;
			break;
		case 'L': {
			int64_t ns = parse_duration_ns(optarg);

			if (ns <= 0) {
				sb_err("report: --lag wants a duration such as 3 or 1500ms, not '%s'",
				       optarg);
				return 2;
			}
			eo.lag_ns = (uint64_t)ns;
			break;
		}
		case 'h':
			fputs(usage, stdout);
			return 0;
		case ':':
			sb_err("report: %s needs a value (see stepblame report --help)",
			       argv[optind - 1]);
			return 2;
		default:
			sb_err("report: unknown option '%s' (see stepblame report --help)",
			       argv[optind - 1]);
			return 2;
		}
	}
	if (optind >= argc) {
		sb_err("report: which trace? usage: stepblame report FILE [--format ...] [-o OUT]");
		return 2;
	}
	if (optind + 1 < argc) {
		sb_err("report: one trace at a time ('%s' is extra)", argv[optind + 1]);
		return 2;
	}
	path = argv[optind];

	r = sbt_open(path, err, sizeof(err));
	if (!r) {
		sb_err("%s", err);
		return 1;
	}
	if (out_open(&out, outp))
		goto done;
	if (fmt == FMT_PERFETTO && !(pf = perfetto_stream_new(out.f, &eo.timeline))) {
		sb_err("report: out of memory");
		goto done;
	}
	/* GPU records are judged against the capture's clock, which starts here */
	eo.start_ns = sbt_header(r)->created_mono_ns;
	e = engine_new(&eo, err, sizeof(err));
	if (!e) {
		sb_err("report: %s", err);
		goto done;
	}
	while ((st = sbt_next(r, &rec)) == SBT_OK)
		engine_feed(e, rec);
	if (st == SBT_EOF) {
		const struct sb_trailer *t = sbt_trailer(r);

		if (t)
			engine_feed(e, &t->h);
	} else if (st == SBT_TRUNCATED) {
		engine_set_truncated(e, sbt_error(r));
	} else {
		/* what came before the damage is still worth reporting */
		snprintf(err, sizeof(err), "%s: %s", path, sbt_error(r));
		engine_set_truncated(e, err);
		bad_input = true;
	}
	engine_finish(e);
	switch (fmt) {
	case FMT_TEXT: wr = report_text(e, out.f); break;
	case FMT_JSON: wr = report_json(e, out.f); break;
	case FMT_JSONL: wr = report_jsonl(e, out.f); break;
	default: wr = report_perfetto(e, pf, out.f); break;
	}
	if (out_close(&out, wr == 0))
		goto done;
	if (bad_input) {
		sb_err("%s: %s; the report covers the records before it", path, sbt_error(r));
		goto done;
	}
	rc = 0;
done:
	if (out.f)
		out_close(&out, false);
	engine_free(e);
	perfetto_stream_free(pf);
	sbt_close(r);
	return rc;
}
