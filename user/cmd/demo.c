// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `stepblame demo`: start simtrainer with a scenario of injected
 * interference, attach to it by PID like a user would, record until it exits,
 * print the report, then what was really injected (its ground truth).
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd/cmds.h"
#include "base/opts.h"
#include "capture/capture_file.h"
#include "capture/collect.h"
#include "capture/target.h"
#include "engine/engine.h"
#include "format/trace.h"
#include "base/util.h"

static const struct scenario {
	const char *name;
	const char *what;
	const char *args[8];
	bool guard_off;          /* record with --max-overhead 0 */
} scenarios[] = {
	{ "default", "a CPU hog for 16 steps, a page-fault storm, a checkpoint every 75 steps",
	  { "--steps", "300", "--inject", "hog@100-115:-5", "--inject", "faults@180:256",
	    "--inject", "ckpt/75:32" } },
	{ "clean", "no interference at all: what noise looks like",
	  { "--steps", "200" } },
	{ "hog", "a CPU-bound process pinned to the launcher's CPU, steps 60-69",
	  { "--steps", "150", "--inject", "hog@60-69:-5" } },
	{ "faults", "the launcher touches 256 MiB of fresh memory at steps 60-62",
	  { "--steps", "150", "--inject", "faults@60-62:256" } },
	{ "alloc", "an allocator storm on the launcher at steps 60-62 (overhead guard off:\n"
	  "            every call is seen)",
	  { "--steps", "150", "--inject", "alloc@60-62" }, true },
	{ "guard", "an allocator storm every 5th step: the overhead guard (--max-overhead 1%)\n"
	  "            duty-cycles the allocator probes, and the report says so",
	  { "--steps", "300", "--inject", "alloc/5:2000" } },
	{ "migrate", "the launcher is moved across CPUs at steps 60-69",
	  { "--steps", "150", "--inject", "migrate@60-69:200" } },
	{ "stall", "the data loaders stall 50 ms at steps 60-64",
	  { "--steps", "150", "--inject", "stall@60-64" } },
	{ "ckpt", "a synchronous 64 MiB checkpoint every 50 steps",
	  { "--steps", "150", "--inject", "ckpt/50" } },
};

static const char demo_usage[] =
"usage: stepblame demo [--scenario NAME] [--keep DIR]\n"
"\n"
"Start simtrainer (a real multi-threaded trainer with a simulated GPU), inject\n"
"interference into chosen steps, attach to it by PID, record until it ends, and\n"
"print the blame report followed by what was really injected. Needs root (BPF).\n"
"\n";

enum { OPT_SCENARIO = 256, OPT_KEEP };

static const struct opt options[] = {
	{ "scenario", OPT_SCENARIO, "NAME", "one of the scenarios below (default)" },
	{ "keep", OPT_KEEP, "DIR",
	  "write the trace and ground truth into DIR (default: a new\n"
	  "directory under $TMPDIR or /tmp, printed at the end)" },
	{ "help", 'h', NULL, NULL },
	{ 0 }
};

/*
 * simtrainer next to this binary (the build tree), in ../lib/stepblame/ (where
 * make install puts it), or $STEPBLAME_SIMTRAINER
 */
static int find_sim(char *out, size_t len)
{
	const char *env = getenv("STEPBLAME_SIMTRAINER");
	char self[PATH_MAX - 32];
	ssize_t n;
	char *slash;

	if (env) {
		snprintf(out, len, "%s", env);
		return access(out, X_OK) ? -1 : 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -1;
	self[n] = 0;
	slash = strrchr(self, '/');
	if (!slash)
		return -1;
	*slash = 0;
	snprintf(out, len, "%s/simtrainer", self);
	if (!access(out, X_OK))
		return 0;
	snprintf(out, len, "%s/../lib/stepblame/simtrainer", self);
	return access(out, X_OK) ? -1 : 0;
}

static void print_truth(const char *path)
{
	char line[1024];
	FILE *f = fopen(path, "re");
	int shown = 0;

	if (!f)
		return;
	printf("\nWhat simtrainer really injected (ground truth, %s):\n", path);
	while (fgets(line, sizeof(line), f)) {
		char kind[32] = "", comm[32] = "";
		unsigned long step = 0, cpid = 0;
		char *k = strstr(line, "\"kind\":\""), *s = strstr(line, "\"step\":");
		char *c = strstr(line, "\"culprit_comm\":\""), *p = strstr(line, "\"culprit_pid\":");

		if (!k || !s)
			continue;
		sscanf(k + 8, "%31[^\"]", kind);
		sscanf(s + 7, "%lu", &step);
		if (c)
			sscanf(c + 16, "%31[^\"]", comm);
		if (p)
			sscanf(p + 14, "%lu", &cpid);
		if (shown < 40) {
			if (comm[0])
				printf("  step %lu: %s (%s[%lu])\n", step, kind, comm, cpid);
			else
				printf("  step %lu: %s\n", step, kind);
		}
		shown++;
	}
	if (shown > 40)
		printf("  ... %d injected steps in all\n", shown);
	if (!shown)
		printf("  nothing\n");
	fclose(f);
}

/* simtrainer's exit status, once it is reaped */
struct demo_capture {
	pid_t child;
	int status;
};

static void demo_started(struct capture_file *cf, const struct collect_opts *o)
{
	/* let simtrainer create its channel and threads: it waits for us to enable it */
	usleep(200000);
	collect_signals();
	printf("attached to simtrainer (PID %d), recording to %s ...\n", (int)o->probe.pid,
	       cf->path);
	fflush(stdout);
}

static void demo_stopped(struct capture_file *cf, const struct collect_opts *o)
{
	struct demo_capture *d = cf->ctx;

	if (cf->res.end_reason != SBT_END_TARGET_EXIT)
		kill(d->child, SIGTERM);
	waitpid(d->child, &d->status, 0);
}

int cmd_demo(int argc, char **argv)
{
	const struct scenario *sc = &scenarios[0];
	char sim[PATH_MAX], dir[PATH_MAX] = "", trace[PATH_MAX + 16], truth[PATH_MAX + 16],
	     html[PATH_MAX + 16];
	char err[512];
	const char *keep = NULL;
	struct collect_opts o;
	struct demo_capture dc = { 0 };
	struct capture_file cf = { .on_created = demo_started, .on_stopped = demo_stopped,
				   .ctx = &dc };
	const struct collect_result *res = &cf.res;
	struct opts_getopt g;
	pid_t child;
	int ch, rc, status;

	opts_getopt_init(&g, options, "+");
	optind = 1;
	opterr = 0;
	while ((ch = opts_next(&g, argc, argv)) != -1) {
		switch (ch) {
		case OPT_SCENARIO:
			sc = NULL;
			for (size_t i = 0; i < ARRAY_SIZE(scenarios); i++)
				if (!strcmp(optarg, scenarios[i].name))
					sc = &scenarios[i];
			if (!sc) {
				sb_err("demo: no scenario '%s' (see stepblame demo --help)", optarg);
				return 2;
			}
			break;
		case OPT_KEEP:
			keep = optarg;
			break;
		case 'h':
			fputs(demo_usage, stdout);
			opts_help(stdout, options, 20, 0);
			printf("\nscenarios:\n");
			for (size_t i = 0; i < ARRAY_SIZE(scenarios); i++)
				printf("  %-9s %s\n", scenarios[i].name, scenarios[i].what);
			return 0;
		default:
			sb_err("demo: bad option '%s' (see stepblame demo --help)", argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc) {
		sb_err("demo: unexpected argument '%s'", argv[optind]);
		return 2;
	}
	if (find_sim(sim, sizeof(sim))) {
		sb_err("demo: simtrainer not found next to stepblame nor in ../lib/stepblame/ (build it: make)");
		return 1;
	}
	if (probes_check_privileges(0, err, sizeof(err))) {
		sb_err("demo: %s (try: sudo make demo)", err);
		return 1;
	}
	if (keep) {
		snprintf(dir, sizeof(dir), "%s", keep);
		if (mkdir(dir, 0755) && errno != EEXIST) {
			sb_err("demo: cannot create %s: %s", dir, strerror(errno));
			return 1;
		}
	} else {
		const char *tmp = getenv("TMPDIR");

		snprintf(dir, sizeof(dir), "%s/stepblame-demo.XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(dir)) {
			sb_err("demo: cannot create a directory under %s: %s", tmp ? tmp : "/tmp",
			       strerror(errno));
			return 1;
		}
	}
	snprintf(trace, sizeof(trace), "%s/demo" SBT_EXT, dir);
	snprintf(truth, sizeof(truth), "%s/truth.jsonl", dir);

	printf("stepblame demo, scenario '%s': %s\n", sc->name, sc->what);
	fflush(stdout);
	child = fork();
	if (child < 0) {
		sb_err("demo: fork: %s", strerror(errno));
		return 1;
	}
	if (child == 0) {
		const char *av[32] = { sim, "--quiet", "--wait-agent", "15", "--truth", truth,
				       "--ckpt-dir", dir };
		int n = 8;

		for (int i = 0; i < 8 && sc->args[i]; i++)
			av[n++] = sc->args[i];
		av[n] = NULL;
		execv(sim, (char **)av);
		fprintf(stderr, "stepblame: demo: cannot run %s: %s\n", sim, strerror(errno));
		_exit(127);
	}

	collect_opts_init(&o);
	o.probe.pid = child;
	o.quiet = true;
	if (sc->guard_off)
		o.max_overhead_ppm = 0;
	o.duration_ns = 120000000000ll;
	dc.child = child;
	cf.path = trace;
	switch (capture_to_file(&o, &cf)) {
	case CAPTURE_NO_FILE:
		sb_err("demo: %s", cf.err);
		kill(child, SIGTERM);
		waitpid(child, NULL, 0);
		return 1;
	case CAPTURE_NOT_RUN:
		kill(child, SIGTERM);
		waitpid(child, NULL, 0);
		return cf.status;
	case CAPTURE_CUT_SHORT:
	case CAPTURE_NOT_FINISHED:
		sb_err("demo: cannot finish %s", trace);
		return 1;
	case CAPTURE_DONE:
		break;
	}
	status = dc.status;
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		sb_err("demo: simtrainer did not finish cleanly (status %d)", status);
		return 1;
	}
	printf("recorded %llu records in %.1f s%s\n\n", (unsigned long long)res->records,
	       (res->end_ns - res->start_ns) / 1e9, res->gpu ? " with the simulated GPU timeline" : "");
	fflush(stdout);
	{
		struct engine_opts eo = { 0 };

		rc = report_trace_file(trace, FMT_TEXT, NULL, &eo);
		snprintf(html, sizeof(html), "%s/report.html", dir);
		if (!rc && report_trace_file(trace, FMT_HTML, html, &eo))
			html[0] = 0;
	}
	fflush(stdout);
	print_truth(truth);
	printf("\nThe trace and ground truth are in %s:\n", dir);
	if (html[0])
		printf("  %s   the same report as a page: open it in a browser\n", html);
	printf("  stepblame report %s --format json\n"
	       "  stepblame dump %s | less\n", trace, trace);
	return rc;
}
