// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* stepblame report: a trace file in, per-step blame out. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cmds.h"
#include "base/opts.h"
#include "engine/engine.h"
#include "report/report.h"
#include "base/outfile.h"
#include "format/gpu.h"
#include "format/trace.h"
#include "base/util.h"

static const char usage[] =
"usage: stepblame report FILE [--format text|json|jsonl|perfetto|html] [-o OUT]\n"
"                        [--step-nvtx REGEX] [--step-kernel REGEX] [--step-api REGEX]\n"
"       stepblame report RANK0.sbtrace RANK1.sbtrace ... [--format text|json|perfetto|html]\n"
"                        [-o OUT]\n"
"\n"
"Per-step blame from a trace written by `stepblame record`: each step's time, how\n"
"long the GPU sat idle in it, and what on the host kept it idle (cpu_wait with the\n"
"task that took the CPU, page_fault, mem_reclaim, alloc, io_wait, blocked with the\n"
"thread that woke it, cuda_sync, host_compute, ...). Tail steps (longer than the\n"
"median + 3 MAD) are explained by each cause's excess over the median step.\n"
"FILE - reads the trace from standard input (ssh gpu7 cat run.sbtrace | stepblame\n"
"report -). A trace compressed with zstd (record -z, or the zstd tool) reads as is.\n"
"\n";

enum { OPT_STEP_NVTX = 256, OPT_STEP_KERNEL, OPT_STEP_API, OPT_LAG };

static const struct opt options[] = {
	{ "format", 'f', "FMT",
	  "text (for people), json (one document),\n"
	  "jsonl (one object per step), perfetto (open in\n"
	  "ui.perfetto.dev: GPU streams, thread states, interferers,\n"
	  "steps and blame), html (one page for a browser, offline:\n"
	  "step timeline by cause, distribution, tail episodes).\n"
	  "Default: from OUT's name (.html, .perfetto.json, .jsonl,\n"
	  ".json; each also .gz), else text" },
	{ "output", 'o', "OUT",
	  "write there (atomically: a temporary name, then renamed)\n"
	  "instead of standard output; OUT ending in .gz: gzip-compressed" },
	{ "step-nvtx", OPT_STEP_NVTX, "RE",
	  "steps are NVTX ranges whose text matches the POSIX\n"
	  "extended regex RE (e.g. '^step')" },
	{ "step-kernel", OPT_STEP_KERNEL, "RE", "a step starts with each kernel whose name matches RE" },
	{ "step-api", OPT_STEP_API, "RE",
	  "a step starts at each CUDA API call whose name matches RE\n"
	  "(e.g. '^cudaStreamSynchronize$'; needs the GPU channel)" },
	{ "lag", OPT_LAG, "SEC", "how late GPU records may arrive in the trace (default 3)" },
	{ "help", 'h', NULL, "this help" },
	{ 0 }
};

static const char usage_tail[] =
"\n"
"Without --step-nvtx/--step-kernel/--step-api the steps come from the stepblame:step USDT\n"
"marks (or --step-uprobe) if the trace has them, else from the GPU step markers.\n"
"The JSON fields are documented in schemas/report.md. A trace cut short is\n"
"reported as far as it goes, and the report says so.\n"
"\n"
"Several traces are the ranks of one job, from one host or many, ordered by the\n"
"RANK their launcher gave each where each has a different one, else rank N is the\n"
"N-th file (then list them in rank order: a shell glob puts rank10 before rank2).\n"
"Steps are aligned by their number, not by clock; for each step the report names\n"
"the rank that finished its part last (the most time outside collective NCCL\n"
"kernels), by how much, and why; then which ranks straggle most, and the causes.\n"
"Perfetto shows a process per rank with its steps and straggles. The JSON is\n"
"documented in schemas/report.md (\"Ranks\"). One trace in which several processes\n"
"marked steps (the ranks torchrun started, recorded with -p on it or with run) is\n"
"reported the same way, a rank per process, ordered the same way. Step numbers\n"
"that restart each epoch align epoch by epoch.\n"
"\n"
"  stepblame report run.sbtrace\n"
"  stepblame report run.sbtrace --format json -o report.json\n"
"  stepblame report run.sbtrace -o run.perfetto.json.gz   # for ui.perfetto.dev\n"
"  stepblame report run.sbtrace -o run.html    # open it in any browser, offline\n"
"  stepblame report r0.sbtrace r1.sbtrace r2.sbtrace   # which rank straggles, and why\n";

/* the format a name asks for (NAME.html, NAME.perfetto.json, ..., each also .gz): text if none */
static enum report_fmt fmt_of_name(const char *name)
{
	static const struct { const char *ext; enum report_fmt fmt; } ext[] = {
		{ ".html", FMT_HTML }, { ".perfetto.json", FMT_PERFETTO }, { ".jsonl", FMT_JSONL },
		{ ".json", FMT_JSON },
	};
	char buf[64];

	for (size_t i = 0; i < ARRAY_SIZE(ext); i++) {
		snprintf(buf, sizeof(buf), "%s.gz", ext[i].ext);
		if (str_ends_with(name, ext[i].ext) || str_ends_with(name, buf))
			return ext[i].fmt;
	}
	return FMT_TEXT;
}

int report_parse_lag(const char *cmd, const char *arg, struct engine_opts *eo)
{
	int64_t ns = parse_duration_ns(arg);

	if (ns <= 0) {
		sb_err("%s: --lag wants a duration such as 3 or 1500ms, not '%s'", cmd, arg);
		return -1;
	}
	eo->lag_ns = (uint64_t)ns;
	return 0;
}

int cmd_report(int argc, char **argv)
{
	struct engine_opts eo = { 0 };
	enum report_fmt fmt = FMT_TEXT;
	bool fmt_given = false;
	const char *outp = NULL;
	struct opts_getopt g;
	int c;

	opts_getopt_init(&g, options, ":");
	optind = 0; /* a full restart: report may run more than once in a process (tests) */
	opterr = 0;
	while ((c = opts_next(&g, argc, argv)) != -1) {
		switch (c) {
		case 'f':
			fmt_given = true;
			if (!strcmp(optarg, "text"))
				fmt = FMT_TEXT;
			else if (!strcmp(optarg, "json"))
				fmt = FMT_JSON;
			else if (!strcmp(optarg, "jsonl"))
				fmt = FMT_JSONL;
			else if (!strcmp(optarg, "perfetto"))
				fmt = FMT_PERFETTO;
			else if (!strcmp(optarg, "html"))
				fmt = FMT_HTML;
			else {
				sb_err("report: unknown format '%s' (text, json, jsonl, perfetto, html)",
				       optarg);
				return 2;
			}
			break;
		case 'o':
			outp = optarg;
			break;
		case OPT_STEP_NVTX:
			eo.step_nvtx = optarg;
			break;
		case OPT_STEP_KERNEL:
			eo.step_kernel = optarg;
			break;
		case OPT_STEP_API:
			eo.step_api = optarg;
			break;
		case OPT_LAG:
			if (report_parse_lag("report", optarg, &eo))
				return 2;
			break;
		case 'h':
			fputs(usage, stdout);
			opts_help(stdout, options, 24, 0);
			fputs(usage_tail, stdout);
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
	if (!fmt_given && outp)
		fmt = fmt_of_name(outp);
	if (optind >= argc) {
		sb_err("report: which trace? usage: stepblame report FILE [--format ...] [-o OUT]");
		return 2;
	}
	if (optind + 1 < argc) {
		if (fmt == FMT_JSONL) {
			sb_err("report: several traces (the ranks of one job) come out as text, json, "
			       "perfetto or html, not jsonl");
			return 2;
		}
		return report_rank_files(argv + optind, argc - optind, fmt, outp, &eo);
	}
	return report_trace_file(argv[optind], fmt, outp, &eo);
}

/*
 * Feeds a whole trace to a new engine and finishes it. *bad_input: the
 * trace is damaged, and the engine has what came before the damage.
 */
struct engine *report_engine_of_file(const char *path, const struct engine_opts *opts,
				     struct sbt_reader **rp, bool *bad_input)
{
	struct engine_opts eo = *opts;
	struct sbt_reader *r;
	struct engine *e;
	const struct sb_hdr *rec;
	enum sbt_status st;
	char err[512];

	*bad_input = false;
	r = sbt_open(path, err, sizeof(err));
	if (!r) {
		sb_err("%s", err);
		return NULL;
	}
	/* GPU records are judged against the capture's clock, which starts here */
	eo.start_ns = sbt_header(r)->created_mono_ns;
	e = engine_new(&eo, err, sizeof(err));
	if (!e) {
		sb_err("report: %s", err);
		sbt_close(r);
		return NULL;
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
		*bad_input = true;
	}
	engine_finish(e);
	*rp = r;
	return e;
}

/* one rank's collective kernels (NCCL's, by name), as the engine sweeps them */
struct collectives {
	struct { uint64_t start, end; } *iv;
	size_t n, cap;
	bool oom;
};

static void collective_op(void *ctx, const struct eng_gpu_op *op)
{
	struct collectives *c = ctx;

	if (op->kind != SB_GPU_KERNEL || !op->name || !strcasestr(op->name, "nccl") ||
	    op->end_ns <= op->start_ns)
		return;
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 1024;
		void *p = realloc(c->iv, cap * sizeof(*c->iv));

		if (!p) {
			c->oom = true;
			return;
		}
		c->iv = p;
		c->cap = cap;
	}
	c->iv[c->n].start = op->start_ns;
	c->iv[c->n].end = op->end_ns;
	c->n++;
}

static int iv_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* time in collective kernels per step (by engine_step index), their union on any stream */
static uint64_t *collective_time(const struct engine *e, struct collectives *c)
{
	uint64_t n = engine_nsteps(e), first = engine_first_step(e);
	uint64_t *out;
	size_t m = 0;

	if (!c->n)
		return NULL;
	out = calloc(n + 1, sizeof(*out));
	if (!out)
		return NULL;
	qsort(c->iv, c->n, sizeof(*c->iv), iv_cmp);
	for (size_t i = 0; i < c->n; i++) {
		if (m && c->iv[i].start <= c->iv[m - 1].end) {
			if (c->iv[i].end > c->iv[m - 1].end)
				c->iv[m - 1].end = c->iv[i].end;
		} else {
			c->iv[m++] = c->iv[i];
		}
	}
	for (uint64_t i = first; i < n; i++) {
		const struct eng_step *s = engine_step(e, i);

		if (!s)
			continue;
		for (size_t k = 0; k < m; k++) {
			uint64_t lo = c->iv[k].start > s->start_ns ? c->iv[k].start : s->start_ns;
			uint64_t hi = c->iv[k].end < s->end_ns ? c->iv[k].end : s->end_ns;

			if (c->iv[k].start >= s->end_ns)
				break;
			if (hi > lo)
				out[i] += hi - lo;
		}
	}
	return out;
}

/* the most ranks one trace's report shows */
#define RANKS_IN_TRACE_MAX 64

static int rank_cmp(const void *a, const void *b)
{
	const struct rank_trace *x = a, *y = b;

	return x->order < y->order ? -1 : x->order > y->order;
}

/*
 * The ranks, files or processes of one trace, in the order of their RANK
 * where each has a different one (from its environment); else as they are:
 * by file, or by first mark (schemas/report.md, "Ranks")
 */
static void rank_order(struct rank_trace *rt, int n)
{
	for (int i = 0; i < n; i++) {
		struct eng_identity id;
		char *end;
		long v;

		engine_identity(rt[i].e, &id);
		errno = 0;
		v = strtol(id.rank, &end, 10);
		if (!id.rank[0] || *end || v < 0 || errno)
			return;
		for (int j = 0; j < i; j++)
			if (rt[j].order == v)
				return;
		rt[i].order = v;
	}
	qsort(rt, (size_t)n, sizeof(*rt), rank_cmp);
}

/*
 * Traces given as the ranks of one job that say otherwise: copies of one
 * capture, other jobs' ids, one RANK twice. Said on stderr; the report is
 * still made (the ids are the launcher's to set, and may be missing)
 */
static void ranks_of_one_job(const struct rank_trace *rt, int n)
{
	for (int i = 0; i < n; i++) {
		struct eng_identity a;
		struct eng_capture ca;

		engine_identity(rt[i].e, &a);
		engine_capture(rt[i].e, &ca);
		for (int j = 0; j < i; j++) {
			struct eng_identity b;
			struct eng_capture cb;
			char ja[3 * ENG_ID_MAX + 1], jb[3 * ENG_ID_MAX + 1];

			engine_identity(rt[j].e, &b);
			engine_capture(rt[j].e, &cb);
			if (a.boot_id[0] && !strcmp(a.boot_id, b.boot_id) && a.agent_pid &&
			    a.agent_pid == b.agent_pid && ca.start_ns == cb.start_ns)
				sb_warn("report: %s and %s are copies of one capture: that rank is "
					"compared with itself", rt[j].path, rt[i].path);
			else if (a.job[0] && b.job[0] && strcmp(a.job, b.job))
				sb_warn("report: %s is of job %s, %s of job %s: their steps are "
					"compared by number as if of one job", rt[j].path,
					report_clean(jb, sizeof(jb), b.job), rt[i].path,
					report_clean(ja, sizeof(ja), a.job));
			else if (a.rank[0] && !strcmp(a.rank, b.rank))
				sb_warn("report: %s and %s both say RANK=%s: two captures of one "
					"rank?", rt[j].path, rt[i].path,
					report_clean(ja, sizeof(ja), a.rank));
		}
	}
}

/*
 * The ranks' report: ranks i reads paths[i], and where pids[i] is set, the
 * steps that process marked in it (several ranks in one trace).
 */
static int report_ranks(const char *const *paths, const uint32_t *pids, int n,
			enum report_fmt fmt, const char *outp, const struct engine_opts *opts)
{
	struct rank_trace *rt = calloc((size_t)n, sizeof(*rt));
	struct engine **eng = calloc((size_t)n, sizeof(*eng));
	struct sbt_reader **rd = calloc((size_t)n, sizeof(*rd));
	uint64_t **coll = calloc((size_t)n, sizeof(*coll));
	struct sb_stream out = { 0 };
	int rc = 1, wr;
	bool bad = false;

	if (!rt || !eng || !rd || !coll) {
		sb_err("report: out of memory");
		goto done;
	}
	for (int i = 0; i < n; i++) {
		struct engine_opts eo = *opts;
		struct collectives c = { 0 };
		bool bad_input;

		eo.timeline = (struct eng_timeline_hooks){ .ctx = &c, .gpu_op = collective_op };
		eo.rank_pid = pids ? pids[i] : 0;
		eng[i] = report_engine_of_file(paths[i], &eo, &rd[i], &bad_input);
		if (!eng[i]) {
			free(c.iv);
			goto done;
		}
		coll[i] = c.oom ? NULL : collective_time(eng[i], &c);
		free(c.iv);
		rt[i] = (struct rank_trace){ .path = paths[i], .e = eng[i], .coll_ns = coll[i],
					     .pid = eo.rank_pid, .corrupt = bad_input,
					     .error = bad_input ? sbt_error(rd[i]) : NULL };
	}
	rank_order(rt, n);
	if (!pids)
		ranks_of_one_job(rt, n);
	for (int i = 0; i < n; i++) {
		struct eng_capture cap;
		char who[32];

		/* one trace read again for each of its ranks: its damage said once */
		if (pids && i)
			break;
		engine_capture(rt[i].e, &cap);
		snprintf(who, sizeof(who), pids ? "each rank covers" : "rank %d covers", i);
		if (rt[i].corrupt)
			sb_err("%s: %s; %s the records before it", rt[i].path, rt[i].error, who);
		else if (!cap.complete)
			sb_err("%s: cut short (%s); %s the records before it", rt[i].path,
			       cap.truncated ? cap.truncated : "no trailer", who);
		bad |= rt[i].corrupt;
	}
	if (sb_stream_open(&out, outp))
		goto done;
	wr = fmt == FMT_JSON ? report_ranks_json(rt, n, out.f) :
	     fmt == FMT_PERFETTO ? report_ranks_perfetto(rt, n, out.f) :
	     fmt == FMT_HTML ? report_ranks_html(rt, n, out.f) : report_ranks_text(rt, n, out.f);
	if (sb_stream_close(&out, wr == 0, "the report"))
		goto done;
	rc = bad;
done:
	if (out.f)
		sb_stream_close(&out, false, "the report");
	for (int i = 0; eng && i < n; i++) {
		engine_free(eng[i]);
		if (rd)
			sbt_close(rd[i]);
		if (coll)
			free(coll[i]);
	}
	free(rt);
	free(eng);
	free(rd);
	free(coll);
	return rc;
}

int report_rank_files(char **paths, int n, enum report_fmt fmt, const char *outp,
		      const struct engine_opts *opts)
{
	struct stat *st = calloc((size_t)n, sizeof(*st));

	if (!st) {
		sb_err("report: out of memory");
		return 1;
	}
	/* a file given twice would be a rank compared with itself */
	for (int i = 0; i < n; i++) {
		if (stat(paths[i], &st[i]))
			continue;       /* said when it is opened */
		for (int j = 0; j < i; j++)
			if (st[j].st_dev == st[i].st_dev && st[j].st_ino == st[i].st_ino) {
				sb_err("report: %s and %s are one file: give each rank's trace once",
				       paths[j], paths[i]);
				free(st);
				return 2;
			}
	}
	free(st);
	return report_ranks((const char *const *)paths, NULL, n, fmt, outp, opts);
}

/* a process that marked steps in a trace: when, and how often */
struct marker {
	uint32_t pid;
	uint64_t first_ns, last_ns, marks;
};

/*
 * The ranks in one trace (schemas/report.md, "Ranks"): the processes whose
 * step marks overlap in time those of the first process that marked, each
 * with at least a tenth of the most marks any of them made (a stray mark in a
 * worker is no rank); a process that marked only before or after them (a
 * trainer restarted) is none. In the order of their first marks; how many
 * (0 or 1: not a trace of several ranks), the processes left out in
 * *left_out.
 */
static int trace_ranks(const char *path, uint32_t *pids, int max, int *left_out)
{
	int cap = 4 * max, nm = 0, n = 0;
	struct marker *m = calloc((size_t)cap, sizeof(*m));
	uint64_t most = 0;
	struct sbt_reader *r;
	const struct sb_hdr *h;
	char err[512];

	*left_out = 0;
	if (!m || !(r = sbt_open(path, err, sizeof(err)))) {
		free(m);
		return 0;
	}
	while (sbt_next(r, &h) == SBT_OK) {
		int i;

		if (h->type != SB_EV_STEP || h->size < sizeof(struct sb_step))
			continue;
		for (i = 0; i < nm && m[i].pid != h->pid; i++)
			;
		if (i == nm) {
			if (nm == cap) {
				(*left_out)++;
				continue;
			}
			m[nm++] = (struct marker){ .pid = h->pid, .first_ns = h->ts, .last_ns = h->ts };
		}
		m[i].marks++;
		if (h->ts > m[i].last_ns)
			m[i].last_ns = h->ts;
		if (h->ts < m[i].first_ns)
			m[i].first_ns = h->ts;
	}
	sbt_close(r);
	for (int i = 0; i < nm; i++)
		if (m[i].marks > most)
			most = m[i].marks;
	for (int i = 0; i < nm; i++) {
		bool overlaps = m[i].first_ns <= m[0].last_ns && m[0].first_ns <= m[i].last_ns;

		if (overlaps && m[i].marks >= 2 && m[i].marks * 10 >= most && n < max)
			pids[n++] = m[i].pid;
		else
			(*left_out)++;
	}
	free(m);
	return n;
}

/* the ranks of one trace, if it has several: their report; -1 if it has not */
static int report_trace_ranks(const char *path, enum report_fmt fmt, const char *outp,
			      const struct engine_opts *opts)
{
	uint32_t pids[RANKS_IN_TRACE_MAX];
	const char *paths[RANKS_IN_TRACE_MAX];
	int left_out, n = trace_ranks(path, pids, RANKS_IN_TRACE_MAX, &left_out);

	if (n < 2)
		return -1;
	for (int i = 0; i < n; i++)
		paths[i] = path;
	if (left_out)
		sb_err("report: %s: %d process%s that marked steps left out (%s)", path, left_out,
		       left_out == 1 ? "" : "es",
		       n == RANKS_IN_TRACE_MAX ? "over the most ranks one trace's report shows, or "
		       "too few marks, or all before or after the first rank's" :
		       "too few marks, or all before or after the first rank's: a restart");
	return report_ranks(paths, pids, n, fmt, outp, opts);
}

int report_trace_file(const char *path, enum report_fmt fmt, const char *outp,
		      const struct engine_opts *opts)
{
	struct engine_opts eo = *opts;
	struct sbt_reader *r = NULL;
	struct engine *e = NULL;
	struct perfetto_stream *pf = NULL;
	struct sb_stream out = { 0 };
	int rc = 1, wr;
	bool bad_input = false;
	struct eng_capture cap;

	/* Perfetto is written as the engine sweeps: whether the trace has ranks, first */
	if (fmt == FMT_PERFETTO && !opts->rank_pid && strcmp(path, "-") &&
	    (rc = report_trace_ranks(path, fmt, outp, opts)) >= 0)
		return rc;
	rc = 1;
	if (sb_stream_open(&out, outp))
		goto done;
	if (fmt == FMT_PERFETTO && !(pf = perfetto_stream_new(out.f, &eo.timeline))) {
		sb_err("report: out of memory");
		goto done;
	}
	e = report_engine_of_file(path, &eo, &r, &bad_input);
	if (!e)
		goto done;
	engine_capture(e, &cap);
	/*
	 * Several processes marked steps (ranks a launcher started): the ranks'
	 * report, if they are ranks. Nothing is written yet: the file is theirs.
	 */
	if (cap.nmarks_other && !opts->rank_pid && fmt != FMT_PERFETTO && strcmp(path, "-") &&
	    fmt != FMT_JSONL) {
		sb_stream_close(&out, false, "the report");
		if ((rc = report_trace_ranks(path, fmt, outp, opts)) >= 0)
			goto done;
		rc = 1;
		if (sb_stream_open(&out, outp))
			goto done;
	}
	switch (fmt) {
	case FMT_TEXT: wr = report_text(e, out.f); break;
	case FMT_JSON: wr = report_json(e, out.f); break;
	case FMT_JSONL: wr = report_jsonl(e, out.f); break;
	case FMT_HTML: wr = report_html(e, out.f); break;
	default: wr = report_perfetto(e, pf, out.f); break;
	}
	if (sb_stream_close(&out, wr == 0, "the report"))
		goto done;
	if (bad_input) {
		sb_err("%s: %s; the report covers the records before it", path, sbt_error(r));
		goto done;
	}
	rc = 0;
done:
	if (out.f)
		sb_stream_close(&out, false, "the report");
	engine_free(e);
	perfetto_stream_free(pf);
	sbt_close(r);
	return rc;
}
