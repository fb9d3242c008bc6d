// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `stepblame watch`: always on (docs/ARCHITECTURE.md, "Watch"). A live
 * capture of the trainer, found by PID, command line or cgroup and found
 * again when it restarts, that writes one JSON line per step to a rotated
 * stream, keeps the last seconds of full detail in memory (capture/flight.h)
 * and writes the detail around each slow step as a trace file, the number
 * and size of those files capped, the oldest removed first.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/timedread.h"
#include "base/util.h"
#include "capture/collect.h"
#include "capture/flight.h"
#include "capture/target.h"
#include "cmd/cmds.h"
#include "cmd/metrics.h"
#include "engine/engine.h"
#include "format/trace.h"
#include "report/report.h"
#include "report/symbols.h"
#include "base/outfile.h"

static const char watch_usage[] =
"usage: stepblame watch (-p PID | -n REGEX | --cgroup PATH) [--dir DIR] [options]\n"
"\n"
"Always on: trace the trainer for as long as it runs (days), in bounded memory\n"
"and disk, and keep full detail only around the steps that went wrong.\n"
"  DIR/steps.jsonl        one line per step (the objects of `stepblame report\n"
"                         --format jsonl`, with the tracer's cost and the loss so\n"
"                         far), rotated to steps.jsonl.1 .. .4 at --rotate-mb\n"
"  DIR/tail-PID-stepN.sbtrace\n"
"                         the detail from --around before a slow step (longer\n"
"                         than the median + --tail-k MAD of the last 1024) to\n"
"                         --around after it, as a trace: `stepblame report FILE`\n"
"                         reads it; idle-PID-stepN.sbtrace for --idle-pct;\n"
"                         .sbtrace.zst, zstd-compressed, with -z (the .sbt\n"
"                         snippets of older versions count against the limits)\n"
"  DIR/report.html        the HTML report of the last trainer watched, written\n"
"                         when it exits or watch stops (its last 4096 steps)\n"
"With -n or --cgroup, a trainer that exits is waited for and watched again when\n"
"it restarts. A line on standard output for each slow step and each snippet.\n"
"Takes the options of `stepblame record` but -o (see stepblame record --help).\n"
"\n";

static const char watch_example[] =
"\n"
"example: sudo stepblame watch -n 'train\\.py' --dir /var/log/stepblame \\\n"
"             --metrics-addr 127.0.0.1:9464\n";

#define HELP_COLUMN 26
/* steps kept in detail by the engine; the summaries cover all (as attach) */
#define WATCH_KEEP_STEPS 4096
/* complete steps before the live tail judgement is trusted with a snippet */
#define WATCH_WARMUP_STEPS 20
/* the rolling window of step times the snippets' judgement looks at */
#define WATCH_WINDOW 1024
/* and how often its median and MAD are worked out again */
#define WATCH_REJUDGE 16
/* how long after a snippet's end its records are taken to have arrived */
#define WATCH_SETTLE_NS 1500000000ull
/* rotated copies of the step stream kept */
#define WATCH_STREAM_KEEP 4
#define WATCH_PENDING 8
#define WATCH_POLL_NS 500000000ull
/* the agent's nice value: below the trainer's (0) */
#define WATCH_NICE 10

struct snip {
	char name[96];
	uint64_t bytes;
};

struct pending {
	uint64_t from, until;
	uint64_t step, steps;
	uint64_t dur, med;
	bool idle;
};

struct watch {
	const struct live_args *la;
	int nice0;                  /* the agent's nice value when it started */
	bool nice_warned;
	struct collect_opts *o;
	const char *dir;
	int dirfd;
	/* the step stream */
	FILE *stream;
	uint64_t stream_bytes;
	bool stream_failed;
	/* the snippets in DIR, oldest first */
	struct snip *snips;
	size_t nsnips, snipcap;
	uint64_t snip_bytes;
	/* this trainer's capture */
	pid_t pid;
	struct engine *eng;
	struct symbols *sym;         /* the stacks' names in steps.jsonl, kept from step to step */
	struct flight *fl;
	struct metrics *metrics;
	struct pending pend[WATCH_PENDING];
	int npend;
	uint64_t last_until;           /* the end of the last snippet written */
	uint64_t steps, tails, slow, written, covered, skipped;
	uint64_t keep_ns;
	bool out_closed;
	/* the last WATCH_WINDOW complete steps' times less the tracer's, and their threshold */
	uint64_t win[WATCH_WINDOW];
	uint64_t nwin, since_judged, med, threshold;
};

/* ---- the directory ---- */

static bool snip_name(const char *n)
{
	static regex_t re;
	static bool compiled;

	if (!compiled) {
		if (regcomp(&re, "^(tail|idle)-[0-9]+-step[0-9]+(-[0-9]+)?\\.(sbt|sbtrace)(\\.zst)?$",
			    REG_EXTENDED | REG_NOSUB))
			return false;
		compiled = true;
	}
	return !regexec(&re, n, 0, NULL, 0);
}

struct snip_scan {
	struct snip s;
	struct timespec mtime;
};

static int scan_cmp(const void *a, const void *b)
{
	const struct snip_scan *x = a, *y = b;

	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
	return strcmp(x->s.name, y->s.name);
}

static void snip_add(struct watch *w, const char *name, uint64_t bytes)
{
	if (w->nsnips == w->snipcap) {
		size_t nc = w->snipcap ? 2 * w->snipcap : 64;
		struct snip *n = realloc(w->snips, nc * sizeof(*n));

		if (!n)
			abort();
		w->snips = n;
		w->snipcap = nc;
	}
	snprintf(w->snips[w->nsnips].name, sizeof(w->snips[0].name), "%s", name);
	w->snips[w->nsnips++].bytes = bytes;
	w->snip_bytes += bytes;
}

/* the snippets an earlier watch left in DIR count against the caps too */
static int snips_scan(struct watch *w)
{
	struct snip_scan *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	int fd = dup(w->dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while ((de = readdir(d))) {
		struct stat st;

		if (!snip_name(de->d_name) || strlen(de->d_name) >= sizeof(v->s.name) ||
		    fstatat(w->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			v = realloc(v, cap * sizeof(*v));
			if (!v)
				abort();
		}
		snprintf(v[n].s.name, sizeof(v[n].s.name), "%s", de->d_name);
		v[n].s.bytes = (uint64_t)st.st_size;
		v[n].mtime = st.st_mtim;
		n++;
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), scan_cmp);
	for (size_t i = 0; i < n; i++)
		snip_add(w, v[i].s.name, v[i].s.bytes);
	free(v);
	return 0;
}

/* the oldest snippets go while there are too many or they take too much */
static void snips_trim(struct watch *w)
{
	size_t drop = 0;

	while (drop < w->nsnips && (w->nsnips - drop > w->la->max_snippets ||
				    w->snip_bytes > w->la->max_disk_bytes)) {
		if (unlinkat(w->dirfd, w->snips[drop].name, 0) && errno != ENOENT)
			sb_warn("watch: cannot remove %s/%s: %s", w->dir, w->snips[drop].name,
				strerror(errno));
		w->snip_bytes -= w->snips[drop].bytes;
		drop++;
	}
	if (drop) {
		memmove(w->snips, w->snips + drop, (w->nsnips - drop) * sizeof(*w->snips));
		w->nsnips -= drop;
	}
}

static int dir_open(struct watch *w, char *err, size_t errlen)
{
	struct stat st;

	if (mkdir(w->dir, 0755) && errno != EEXIST) {
		snprintf(err, errlen, "cannot create %s: %s", w->dir, strerror(errno));
		return -1;
	}
	/* pinned once: every name below is relative to this descriptor */
	w->dirfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (w->dirfd < 0) {
		snprintf(err, errlen, "cannot use %s as the directory: %s", w->dir,
			 errno == ELOOP ? "it is a symbolic link" : strerror(errno));
		return -1;
	}
	/*
	 * watch removes and rotates files in it for days: a directory another
	 * user may write in (/tmp) would let them choose what it appends to or
	 * removes (SECURITY.md)
	 */
	if (fstat(w->dirfd, &st) || (st.st_mode & S_IWOTH) ||
	    (st.st_uid != geteuid() && st.st_uid != 0)) {
		snprintf(err, errlen, "refusing %s: %s (give a directory of its own, e.g. "
			 "/var/log/stepblame)", w->dir,
			 (st.st_mode & S_IWOTH) ? "anyone may write in it" : "another user owns it");
		return -1;
	}
	return 0;
}

/* ---- the step stream ---- */

static int stream_open(struct watch *w)
{
	struct stat st;
	int fd = openat(w->dirfd, "steps.jsonl",
			O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);

	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		sb_err("watch: cannot write %s/steps.jsonl: %s", w->dir,
		       fd < 0 ? strerror(errno) : "not a regular file");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	w->stream = fdopen(fd, "a");
	if (!w->stream) {
		close(fd);
		return -1;
	}
	w->stream_bytes = (uint64_t)st.st_size;
	return 0;
}

/* steps.jsonl -> steps.jsonl.1 -> ... -> .WATCH_STREAM_KEEP (gone) */
static void stream_rotate(struct watch *w)
{
	char a[32], b[32];

	if (fclose(w->stream))
		sb_warn("watch: writing %s/steps.jsonl failed: %s", w->dir, strerror(errno));
	w->stream = NULL;
	for (int i = WATCH_STREAM_KEEP; i >= 1; i--) {
		snprintf(a, sizeof(a), i > 1 ? "steps.jsonl.%d" : "steps.jsonl", i - 1);
		snprintf(b, sizeof(b), "steps.jsonl.%d", i);
		if (renameat(w->dirfd, a, w->dirfd, b) && errno != ENOENT)
			sb_warn("watch: cannot rotate %s/%s: %s", w->dir, a, strerror(errno));
	}
	if (stream_open(w))
		w->stream_failed = true;
}

static void stream_step(struct watch *w, const struct eng_step *s, const struct eng_summary *sum)
{
	off_t at;

	if (!w->stream || w->stream_failed)
		return;
	report_step_json(w->eng, s, sum, &w->sym, w->stream);
	at = ftello(w->stream);
	w->stream_bytes = at > 0 ? (uint64_t)at : w->stream_bytes;
	if (w->stream_bytes >= w->la->rotate_bytes)
		stream_rotate(w);
}

/* the lines reach the file once a second (and at a rotation): one write, not one a step */
static void stream_flush(struct watch *w)
{
	if (!w->stream || w->stream_failed)
		return;
	if (fflush(w->stream) || ferror(w->stream)) {
		sb_warn("watch: writing %s/steps.jsonl failed: %s; steps go on in the snippets "
			"and metrics only", w->dir, strerror(errno));
		w->stream_failed = true;
	}
}

/* ---- output ---- */

static void out_flush(struct watch *w)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return;
	if (!w->out_closed)
		collect_stop = 1;
	w->out_closed = true;
}

static void mib(char *b, size_t n, uint64_t bytes)
{
	if (bytes < (1u << 20))
		snprintf(b, n, "%.1f KiB", bytes / 1024.0);
	else
		snprintf(b, n, "%.1f MiB", bytes / 1048576.0);
}

/* DIR/report.html: the capture that ended, as one page (the steps kept in detail) */
static void html_write(struct watch *w)
{
	struct sb_stream out = { 0 };
	char path[PATH_MAX + 64];
	int wr;

	/* through the pinned directory, renamed into place: never through a planted link */
	snprintf(path, sizeof(path), "/proc/self/fd/%d/report.html", w->dirfd);
	if (sb_stream_open(&out, path))
		return;
	wr = report_html(w->eng, out.f);
	if (sb_stream_close(&out, wr == 0, "the HTML report"))
		return;
	if (!w->out_closed) {
		printf("HTML report of PID %d in %s/report.html\n", (int)w->pid, w->dir);
		out_flush(w);
	}
}

/* ---- snippets ---- */

static void snippet_write(struct watch *w, const struct pending *p)
{
	char name[96], path[PATH_MAX + 64], note[512], err[PATH_MAX + 256], sz[32], tot[32];
	struct flight_snippet sn = { .from_ns = p->from, .to_ns = p->until + WATCH_SETTLE_NS };
	struct stat st;

	const char *ext = w->o->zstd_level ? SBT_EXT ".zst" : SBT_EXT;

	snprintf(name, sizeof(name), "%s-%d-step%" PRIu64 "%s", p->idle ? "idle" : "tail",
		 (int)w->pid, p->step, ext);
	for (int k = 2; !fstatat(w->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) && k < 1000; k++)
		snprintf(name, sizeof(name), "%s-%d-step%" PRIu64 "-%d%s", p->idle ? "idle" : "tail",
			 (int)w->pid, p->step, k, ext);
	/* through the pinned directory: /proc/self/fd/N is that directory, whatever DIR is now */
	snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", w->dirfd, name);
	snprintf(note, sizeof(note),
		 "stepblame watch: the detail around step %" PRIu64 " of PID %d (%s: %.3f ms "
		 "against a median of %.3f ms%s), from %.1f s before it to %.1f s after",
		 p->step, (int)w->pid, p->idle ? "GPU idle" : "slow step", p->dur / 1e6, p->med / 1e6,
		 p->steps > 1 ? ", with the slow steps after it" : "", w->la->around_ns / 1e9,
		 w->la->around_ns / 1e9);
	sn.note = note;
	sn.zstd_level = w->o->zstd_level;
	if (flight_write(w->fl, path, &sn, err, sizeof(err))) {
		sb_warn("watch: snippet of step %" PRIu64 " not written: %s", p->step, err);
		return;
	}
	w->written++;
	w->last_until = p->until;
	snip_add(w, name, sn.bytes);
	snips_trim(w);
	mib(sz, sizeof(sz), sn.bytes);
	mib(tot, sizeof(tot), w->snip_bytes);
	if (!w->out_closed) {
		printf("wrote %s/%s: step %" PRIu64 "%s, %.1f s of detail%s, %s, %" PRIu64
		       " records (%zu snippets, %s in %s)\n", w->dir, name, p->step,
		       p->steps > 1 ? " and the slow steps after it" : "",
		       (sn.end_ns - sn.start_ns) / 1e9,
		       sn.start_ns > p->from ? " (from the oldest kept)" : "", sz,
		       sn.records, w->nsnips, tot, w->dir);
		out_flush(w);
	}
}

/*
 * Write the snippets whose records have all arrived (force: all of them,
 * now): the drain has reached WATCH_SETTLE_NS past their end in the
 * capture's time (the once-a-second flushes of folded records come that
 * late), however far behind the trainer it runs.
 */
static void pending_flush(struct watch *w, uint64_t now, bool force)
{
	uint64_t reached = flight_reached(w->fl, now);
	int i = 0;

	while (i < w->npend) {
		if (!force && reached < w->pend[i].until + WATCH_SETTLE_NS) {
			i++;
			continue;
		}
		snippet_write(w, &w->pend[i]);
		memmove(&w->pend[i], &w->pend[i + 1], (size_t)(w->npend - i - 1) * sizeof(w->pend[0]));
		w->npend--;
	}
}

static void schedule(struct watch *w, const struct eng_step *s, uint64_t med, bool idle)
{
	uint64_t a = w->la->around_ns;
	uint64_t from = s->start_ns > a ? s->start_ns - a : 0, until = s->end_ns + a;
	struct pending *p;

	/* inside a snippet written or to be written: it is there already */
	if ((w->written && s->end_ns <= w->last_until) ||
	    (w->npend && s->end_ns <= w->pend[w->npend - 1].until)) {
		if (w->npend && s->end_ns <= w->pend[w->npend - 1].until)
			w->pend[w->npend - 1].steps++;
		w->covered++;
		return;
	}
	if (w->npend == WATCH_PENDING) {
		w->skipped++;
		return;
	}
	/* start where the last one ended when that does not cut the step */
	if (w->npend && w->pend[w->npend - 1].until > from &&
	    w->pend[w->npend - 1].until <= s->start_ns)
		from = w->pend[w->npend - 1].until;
	else if (w->last_until > from && w->last_until <= s->start_ns)
		from = w->last_until;
	p = &w->pend[w->npend++];
	*p = (struct pending){ .from = from, .until = until, .step = s->step, .steps = 1,
			       .dur = s->duration_ns, .med = med, .idle = idle };
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Is this step slow enough for a snippet: its time less the tracer's (the
 * probes' and the agent's) over the median + K MAD of the last WATCH_WINDOW
 * (the MAD at least 5% of the median: a steady trainer's wobble, or a
 * loader thread that takes the launcher's CPU for a tenth of every other
 * step, is not a snippet every second). The window takes the step after it is
 * judged.
 */
static bool slow_step(struct watch *w, const struct eng_step *s)
{
	uint64_t t = s->duration_ns > s->tracer_ns ? s->duration_ns - s->tracer_ns : 0;
	uint32_t self = (uint32_t)getpid();
	bool slow = false;

	/*
	 * Time the agent itself took from the step (its CPU, directly or from
	 * the thread the step waited for) is the tracer's, never a snippet's
	 * reason (docs/ARCHITECTURE.md, "Blame model")
	 */
	for (uint32_t i = 0; i < s->nblame; i++) {
		const struct eng_blame *b = &s->blame[i];
		uint64_t x = 0;

		if (!b->has_who)
			continue;
		if (b->who.pid == self)
			x = b->ns;
		else if (b->cause == ENG_BLOCKED && b->who.act.by_pid == self)
			x = b->ns < b->who.act.ns[ENG_ACT_PREEMPTED] ? b->ns :
			    b->who.act.ns[ENG_ACT_PREEMPTED];
		t = t > x ? t - x : 0;
	}

	if (w->nwin >= WATCH_WARMUP_STEPS) {
		if (!w->threshold || ++w->since_judged >= WATCH_REJUDGE) {
			uint64_t n = w->nwin < WATCH_WINDOW ? w->nwin : WATCH_WINDOW;
			uint64_t v[WATCH_WINDOW], mad, floor;

			memcpy(v, w->win, n * sizeof(v[0]));
			qsort(v, n, sizeof(v[0]), u64_cmp);
			w->med = v[n / 2];
			for (uint64_t i = 0; i < n; i++)
				v[i] = v[i] > w->med ? v[i] - w->med : w->med - v[i];
			qsort(v, n, sizeof(v[0]), u64_cmp);
			mad = v[n / 2];
			floor = w->med / 20;
			w->threshold = w->med + (w->la->tail_k_milli * (mad > floor ? mad : floor)) / 1000;
			w->since_judged = 0;
		}
		slow = t > w->threshold;
	}
	w->win[w->nwin++ % WATCH_WINDOW] = t;
	return slow;
}

/* ---- the capture of one trainer ---- */

static void watch_step(void *ctx, const struct eng_step *s)
{
	struct watch *w = ctx;
	struct eng_summary sum;
	bool idle, slow;

	engine_running_summary(w->eng, &sum);
	stream_step(w, s, &sum);
	if (w->metrics) {
		struct eng_identity id;

		/* a launcher's child marks the steps: its ids label them */
		engine_identity(w->eng, &id);
		metrics_identity(w->metrics, &id);
	}
	metrics_step(w->metrics, s);
	if (s->incomplete)
		return;
	w->steps++;
	if (s->tail)
		w->tails++;
	slow = slow_step(w, s);
	idle = w->la->idle_ppm && s->gpu_timeline && s->duration_ns &&
	       s->gpu_idle_ns * 1000000ull / s->duration_ns > w->la->idle_ppm &&
	       w->steps > WATCH_WARMUP_STEPS;
	if (!slow && !idle)
		return;
	w->slow++;
	if (!w->out_closed) {
		report_step_line(w->eng, s, &sum, NULL, stdout);
		out_flush(w);
	}
	schedule(w, s, w->med, idle && !slow);
}

static int watch_sink(void *ctx, const struct sb_hdr *rec)
{
	struct watch *w = ctx;

	flight_put(w->fl, rec, mono_ns());
	if (rec->type == SB_REC_DROPS) {
		metrics_drops(w->metrics, sb_drops_total((const void *)rec));
	}
	engine_feed(w->eng, rec);
	return 0;
}

/*
 * The probes are attached: the agent yields to the trainer from here on. At
 * nice 10 its batches no longer preempt the launch thread for milliseconds
 * (bench/RESULTS.md, "Watch"); what it cannot keep up with is counted as loss,
 * on every line. Not before: under a loaded CPU, loading the probes at nice 10
 * took longer than a minute.
 */
static void agent_nice(struct watch *w, int n)
{
	int err = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	pid_t server = metrics_server_tid(w->metrics);

	/*
	 * a nice value is a thread's: every thread of the agent, those the attach
	 * started too, but the metrics server's, which stays at the agent's first
	 * value: a scrape that waits behind the trainer's threads times out (a
	 * second), and the rank drops out of the job's rates
	 */
	if (setpriority(PRIO_PROCESS, 0, n))
		err = errno;
	while (d && (de = readdir(d)))
		if (de->d_name[0] >= '1' && de->d_name[0] <= '9' && atoi(de->d_name) != server &&
		    setpriority(PRIO_PROCESS, (id_t)atoi(de->d_name), n) && errno != ESRCH)
			err = errno;
	if (d)
		closedir(d);
	if (err && !w->nice_warned && !w->o->quiet) {
		sb_warn("watch: cannot set the agent's priority: %s", strerror(err));
		w->nice_warned = true;
	}
}

static void watch_ready(void *ctx)
{
	struct watch *w = ctx;

	agent_nice(w, w->nice0 > WATCH_NICE ? w->nice0 : WATCH_NICE);
}

/* each tick, how far the ring has been read: every record before drained_to is in (steps finalise during silence) */
static void watch_tick(void *ctx, uint64_t drained_to)
{
	struct watch *w = ctx;

	engine_advance(w->eng, drained_to);
}

static void watch_second(void *ctx, uint64_t now)
{
	struct watch *w = ctx;

	stream_flush(w);
	pending_flush(w, now, false);
}

static const char *end_text(enum sbt_end r)
{
	switch (r) {
	case SBT_END_DURATION: return "duration reached";
	case SBT_END_SIGNAL: return "interrupted";
	case SBT_END_TARGET_EXIT: return "exited";
	case SBT_END_ERROR: return "stopped on an error";
	case SBT_END_CREDENTIALS: return "took another user's credentials";
	}
	return "?";
}

/*
 * A process that matched and exited before it was watched (a short run, a
 * `--help`): said, and the watch goes on to the next (0, as for an exit)
 */
static int watch_missed(struct watch *w, pid_t pid, struct collect_result *res)
{
	memset(res, 0, sizeof(*res));
	res->end_reason = SBT_END_TARGET_EXIT;
	if (!w->out_closed) {
		printf("PID %d exited before it could be watched\n", (int)pid);
		out_flush(w);
	}
	return 0;
}

/* one target watched until it exits, or until deadline (mono_ns; 0: none) */
static int watch_one(struct watch *w, pid_t pid, uint64_t deadline, struct collect_result *res)
{
	struct engine_opts eo = { .live = true, .keep_steps = WATCH_KEEP_STEPS };
	char err[PATH_MAX + 256];
	struct collect_opts o = *w->o;
	int rc;

	if (target_check(pid, err, sizeof(err)) || probes_check_privileges(pid, err, sizeof(err))) {
		if (!w->o->probe.pid && !target_alive(pid))
			return watch_missed(w, pid, res);
		sb_err("watch: %s", err);
		return 1;
	}
	eo.start_ns = mono_ns();
	w->eng = engine_new(&eo, err, sizeof(err));
	w->fl = flight_new(w->keep_ns, w->la->buffer_bytes);
	if (!w->eng || !w->fl) {
		sb_err("watch: %s", w->eng ? "out of memory" : err);
		engine_free(w->eng);
		flight_free(w->fl);
		w->eng = NULL;
		w->fl = NULL;
		return 1;
	}
	w->pid = pid;
	w->steps = w->tails = w->slow = w->written = w->covered = w->skipped = 0;
	w->npend = 0;
	w->last_until = 0;
	w->nwin = w->since_judged = w->med = w->threshold = 0;
	if (w->la->metrics_addr) {
		struct metrics_labels lb;
		char comm[SB_COMM_LEN + 1] = "", path[64];

		metrics_labels_fill(&lb, pid, w->la->job, w->la->rank, w->la->local_rank);
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		if (read_small_file(path, comm, sizeof(comm)) > 0)
			comm[strcspn(comm, "\n")] = 0;
		w->metrics = metrics_new(&lb, (uint32_t)pid, comm);
		if (!w->metrics || metrics_serve(w->metrics, w->la->metrics_addr, err, sizeof(err)))
			sb_warn("watch: no metrics for PID %d: %s", (int)pid,
				w->metrics ? err : "out of memory");
	}
	engine_set_step_cb(w->eng, watch_step, w);
	o.probe.pid = pid;
	/* -d is the command's whole run: its attaches count (each can take seconds when starved) */
	o.duration_ns = 0;
	o.deadline_ns = deadline;
	/* what is read while the probes attach stays inside the memory it was given too */
	o.early_max_bytes = w->la->buffer_bytes;
	o.on_second = watch_second;
	o.on_tick = watch_tick;
	o.on_second_ctx = w;
	o.on_ready = watch_ready;
	o.on_ready_ctx = w;
	/* attach at the priority it was started with: loading the probes is CPU work */
	agent_nice(w, w->nice0);
	if (!w->out_closed) {
		printf("watching PID %d: steps to %s/steps.jsonl, the detail around slow steps to "
		       "%s/\n", (int)pid, w->dir, w->dir);
		out_flush(w);
	}
	rc = collect_run(&o, watch_sink, w, res);
	if (!rc) {
		struct sb_trailer end = {
			.h = { .type = SB_REC_TRAILER, .size = sizeof(end), .ts = res->end_ns },
			.drops_total = res->drops_total,
			.start_ns = res->start_ns,
			.end_reason = res->end_reason,
		};
		struct eng_summary sum;

		engine_feed(w->eng, &end.h);
		engine_finish(w->eng);
		stream_flush(w);
		pending_flush(w, mono_ns(), true);
		html_write(w);
		engine_summarise(w->eng, &sum);
		if (!w->out_closed) {
			printf("PID %d %s after %.1f s: %" PRIu64 " steps, P50 %.3f ms, P99 %.3f ms, %"
			       PRIu64 " tail steps, %" PRIu64 " slow ones in %" PRIu64 " snippets%s, %"
			       PRIu64 " events dropped\n", (int)pid, end_text(res->end_reason),
			       (res->end_ns - res->start_ns) / 1e9, sum.ncomplete, sum.p50 / 1e6,
			       sum.p99 / 1e6, w->tails, w->slow - w->skipped, w->written,
			       w->skipped ? " (more came than could be written)" : "",
			       res->drops_total);
			out_flush(w);
		}
	}
	metrics_free(w->metrics);
	w->metrics = NULL;
	symbols_free(w->sym);
	w->sym = NULL;
	engine_free(w->eng);
	w->eng = NULL;
	flight_free(w->fl);
	w->fl = NULL;
	/* by name: one that ended while the probes were being attached is not the end of the watch */
	if (rc && !w->o->probe.pid && !target_alive(pid))
		return watch_missed(w, pid, res);
	return rc;
}

/* ---- finding the trainer ---- */

struct cand {
	pid_t pid, ppid;
	uint64_t start;
};

/* ppid, start time; false for a kernel thread, a zombie, or one gone */
static bool proc_facts(pid_t pid, pid_t *ppid, uint64_t *start)
{
	char path[64], buf[1024], state = 0, *p;
	unsigned long flags = 0;
	unsigned long long st = 0;
	int pp = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_small_file(path, buf, sizeof(buf)) < 0 || !(p = strrchr(buf, ')')))
		return false;
	if (sscanf(p + 1, " %c %d %*d %*d %*d %*d %lu %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
		   "%*d %*d %llu", &state, &pp, &flags, &st) != 4)
		return false;
	if ((flags & 0x00200000 /* PF_KTHREAD */) || state == 'Z' || state == 'X')
		return false;
	*ppid = pp;
	*start = st;
	return true;
}

/* stepblame itself and the processes that started it (sudo, a shell) never match */
static bool is_self_or_ancestor(pid_t pid)
{
	pid_t p = getpid();
	uint64_t st;

	for (int depth = 0; p > 1 && depth < 64; depth++) {
		if (p == pid)
			return true;
		if (!proc_facts(p, &p, &st))
			break;
	}
	return false;
}

static bool matches(pid_t pid, const regex_t *re)
{
	char path[64], buf[4096];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	n = read_small_file(path, buf, sizeof(buf));
	if (n > 0) {
		buf[strcspn(buf, "\n")] = 0;
		if (!regexec(re, buf, 0, NULL, 0))
			return true;
	}
	/* the command line is the process's memory: read with a timeout (SECURITY.md) */
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	n = read_small_file_timed(path, buf, sizeof(buf), 200);
	if (n <= 0)
		return false;
	for (ssize_t i = 0; i < n - 1; i++)
		if (!buf[i])
			buf[i] = ' ';
	buf[n < (ssize_t)sizeof(buf) ? n : (ssize_t)sizeof(buf) - 1] = 0;
	return !regexec(re, buf, 0, NULL, 0);
}

static void cand_add(struct cand **v, size_t *n, size_t *cap, pid_t pid, pid_t ppid, uint64_t st)
{
	for (size_t i = 0; i < *n; i++)
		if ((*v)[i].pid == pid)
			return;
	if (*n == *cap) {
		*cap = *cap ? 2 * *cap : 64;
		*v = realloc(*v, *cap * sizeof(**v));
		if (!*v)
			abort();
	}
	(*v)[(*n)++] = (struct cand){ pid, ppid, st };
}

/* the processes of a cgroup directory (v2, or a v1 hierarchy's) and its sub-cgroups */
static void cgroup_walk(int dfd, int depth, struct cand **v, size_t *n, size_t *cap)
{
	char buf[65536], *line, *save = NULL;
	int fd = openat(dfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
	ssize_t len = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	struct dirent *de;
	DIR *d;

	if (fd >= 0)
		close(fd);
	if (len > 0) {
		buf[len] = 0;
		for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			uint64_t pid, st;
			pid_t pp;

			if (parse_u64(line, &pid) && pid > 1 && pid < 0x40000000 &&
			    proc_facts((pid_t)pid, &pp, &st) && !is_self_or_ancestor((pid_t)pid))
				cand_add(v, n, cap, (pid_t)pid, pp, st);
		}
	}
	if (depth >= 16 || (fd = dup(dfd)) < 0)
		return;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return;
	}
	while ((de = readdir(d))) {
		int sub;

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		sub = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0) {
			cgroup_walk(sub, depth + 1, v, n, cap);
			close(sub);
		}
	}
	closedir(d);
}

/*
 * The trainer: of the matching processes (by name or in the cgroup), the
 * roots (whose parent is not one of them), the oldest; skip is the one just
 * watched. 0: none now; -1: the cgroup cannot be read (err).
 */
static pid_t find_target(const struct live_args *la, const regex_t *re, pid_t skip, char *err,
			 size_t errlen)
{
	struct cand *v = NULL;
	size_t n = 0, cap = 0;
	pid_t best = 0;
	uint64_t best_st = UINT64_MAX;

	if (la->cgroup) {
		char path[PATH_MAX];
		int dfd;

		snprintf(path, sizeof(path), "%s%s", la->cgroup[0] == '/' ? "" : "/sys/fs/cgroup/",
			 la->cgroup);
		dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0) {
			snprintf(err, errlen, "cannot read cgroup %s: %s", path, strerror(errno));
			return -1;
		}
		if (faccessat(dfd, "cgroup.procs", R_OK, 0)) {
			snprintf(err, errlen, "%s is not a cgroup directory (no cgroup.procs)", path);
			close(dfd);
			return -1;
		}
		cgroup_walk(dfd, 0, &v, &n, &cap);
		close(dfd);
	} else {
		DIR *d = opendir("/proc");
		struct dirent *de;

		if (!d) {
			snprintf(err, errlen, "cannot read /proc: %s", strerror(errno));
			return -1;
		}
		while ((de = readdir(d))) {
			uint64_t pid, st;
			pid_t pp;

			if (!parse_u64(de->d_name, &pid) || pid <= 1 || pid >= 0x40000000 ||
			    !proc_facts((pid_t)pid, &pp, &st) || is_self_or_ancestor((pid_t)pid) ||
			    !matches((pid_t)pid, re))
				continue;
			cand_add(&v, &n, &cap, (pid_t)pid, pp, st);
		}
		closedir(d);
	}
	for (size_t i = 0; i < n; i++) {
		bool root = true;

		if (v[i].pid == skip)
			continue;
		for (size_t j = 0; j < n && root; j++)
			if (v[j].pid == v[i].ppid)
				root = false;
		if (root && (v[i].start < best_st || (v[i].start == best_st && v[i].pid < best))) {
			best = v[i].pid;
			best_st = v[i].start;
		}
	}
	free(v);
	return best;
}

/* ---- the command ---- */

int cmd_watch(int argc, char **argv)
{
	struct live_args la = { .watch = true };
	struct collect_opts o;
	struct collect_result res;
	struct watch w = { .dirfd = -1 };
	regex_t re;
	bool have_re = false, waiting_said = false;
	char err[PATH_MAX + 256];
	uint64_t t0, deadline;
	pid_t last = 0;
	int i, rc = 0, sessions = 0;

	i = collect_parse_common(argc, argv, &o, NULL, &la, "watch");
	if (i == -2) {
		fputs(watch_usage, stdout);
		opts_help(stdout, collect_options, HELP_COLUMN, COLLECT_WATCH);
		fputs(watch_example, stdout);
		return 0;
	}
	if (i < 0)
		return 2;
	if (i < argc) {
		sb_err("watch: unexpected argument '%s'", argv[i]);
		return 2;
	}
	if (!!o.probe.pid + !!la.name + !!la.cgroup != 1) {
		sb_err("watch: needs one of -p PID, -n REGEX or --cgroup PATH (see stepblame watch "
		       "--help)");
		return 2;
	}
	if (!la.metrics_addr && (la.job || la.rank || la.local_rank)) {
		sb_err("watch: --job, --rank and --local-rank label the metrics: give --metrics-addr "
		       "HOST:PORT too");
		return 2;
	}
	if (la.name) {
		int e = regcomp(&re, la.name, REG_EXTENDED | REG_NOSUB);

		if (e) {
			regerror(e, &re, err, sizeof(err));
			sb_err("watch: -n '%s': %s", la.name, err);
			return 2;
		}
		have_re = true;
	}
	if (!la.dir)
		la.dir = "stepblame-watch";
	if (!la.around_ns)
		la.around_ns = 5000000000ull;
	if (!la.max_snippets)
		la.max_snippets = 100;
	if (!la.max_disk_bytes)
		la.max_disk_bytes = 2048ull << 20;
	if (!la.rotate_bytes)
		la.rotate_bytes = 64ull << 20;
	if (!la.tail_k_milli)
		la.tail_k_milli = 5000;
	if (!la.buffer_bytes)
		la.buffer_bytes = 256ull << 20;
	w.la = &la;
	w.o = &o;
	w.dir = la.dir;
	/* the detail a snippet needs, and the reorder window and the agent's flushes after it */
	w.keep_ns = 2 * la.around_ns + 20000000000ull;
	if (o.probe.pid && (rc = target_check(o.probe.pid, err, sizeof(err)))) {
		sb_err("watch: %s", err);
		rc = 1;
		goto out;
	}
	if (la.cgroup && find_target(&la, NULL, 0, err, sizeof(err)) < 0) {
		/* a cgroup that cannot be read: said before anything is created */
		sb_err("watch: %s", err);
		rc = 1;
		goto out;
	}
	if (dir_open(&w, err, sizeof(err))) {
		sb_err("watch: %s", err);
		rc = 1;
		goto out;
	}
	if (snips_scan(&w) || stream_open(&w)) {
		rc = 1;
		goto out;
	}
	snips_trim(&w);
	errno = 0;
	w.nice0 = getpriority(PRIO_PROCESS, 0);
	if (errno)
		w.nice0 = 0;
	collect_signals();
	t0 = mono_ns();
	deadline = o.duration_ns ? t0 + (uint64_t)o.duration_ns : 0;
	while (!collect_stop) {
		uint64_t now = mono_ns();
		pid_t pid = o.probe.pid;

		if (deadline && now >= deadline)
			break;
		if (!pid) {
			pid = find_target(&la, have_re ? &re : NULL, last, err, sizeof(err));
			if (pid < 0) {
				sb_err("watch: %s", err);
				rc = 1;
				break;
			}
		}
		if (!pid) {
			if (!waiting_said && !w.out_closed) {
				printf("waiting for a process %s %s\n",
				       la.name ? "whose command line matches" : "in cgroup",
				       la.name ? la.name : la.cgroup);
				out_flush(&w);
			}
			waiting_said = true;
			{
				struct timespec ts = { 0, WATCH_POLL_NS };

				nanosleep(&ts, NULL);
			}
			continue;
		}
		waiting_said = false;
		rc = watch_one(&w, pid, deadline, &res);
		sessions++;
		last = pid;
		if (rc || o.probe.pid || res.end_reason != SBT_END_TARGET_EXIT)
			break;
	}
	if (!rc && !sessions && !w.out_closed)
		printf("no process to watch came (%s)\n", collect_stop ? "interrupted" :
		       "duration reached");
out:
	if (w.stream && fclose(w.stream))
		rc = rc ? rc : 1;
	if (w.dirfd >= 0)
		close(w.dirfd);
	free(w.snips);
	if (have_re)
		regfree(&re);
	return rc;
}
