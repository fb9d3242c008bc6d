// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * simtrainer, driven for real: this test is the agent. It starts $SIMTRAINER,
 * attaches to its GPU channel, drains everything and checks the simulated
 * device against its invariants and the ground truth against what it saw.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "format/channel.h"
#include "test.h"
#include "format/trace.h"
#include "base/util.h"

#define MAXREC 200000
#define MAXHOG 16

struct run {
	pid_t pid;
	int status;
	bool exited;
	struct sb_gpu *recs;
	size_t n;
	char names[SBC_STRINGS + 1][SBC_STRING_SIZE];
	unsigned nstrings, unresolved;
	uint64_t ring_drops;
	char producer[64];
	/* seen while it ran */
	bool comm_ok;
	unsigned threads_seen; /* bit 0 launcher, 1 gpu-sim, 2 loader-0, 3 loader-1, 4 injector */
	pid_t hogs[MAXHOG];
	int hog_cpu[MAXHOG];
	unsigned nhogs;
	bool hog_bad_comm;
	char truth[300];
	char dir[256];
	char chan[64];
	char err[256];
};

static int collect(void *ctx, const struct sb_hdr *h)
{
	struct run *r = ctx;

	if (h->type == SB_REC_STRING) {
		const struct sb_text *t = (const void *)h;

		if (t->id && t->id <= SBC_STRINGS && t->len < SBC_STRING_SIZE) {
			memcpy(r->names[t->id], t->text, t->len);
			r->names[t->id][t->len] = 0;
			r->nstrings++;
		}
		return 0;
	}
	const struct sb_gpu *g = (const void *)h;

	if (g->name_id && !r->names[g->name_id][0])
		r->unresolved++;
	if (r->n < MAXREC)
		r->recs[r->n++] = *g;
	return 0;
}

static void note_hog(struct run *r, long child)
{
	char comm[64], cpath[64];
	cpu_set_t set;
	int cpu = -1, ncpu = 0;

	for (unsigned i = 0; i < r->nhogs; i++)
		if (r->hogs[i] == child)
			return;
	snprintf(cpath, sizeof(cpath), "/proc/%ld/comm", child);
	/* just forked and not renamed yet: look again next time */
	if (r->nhogs == MAXHOG || read_small_file(cpath, comm, sizeof(comm)) <= 0 ||
	    strcmp(comm, "noisy-neighbor\n"))
		return;
	if (!sched_getaffinity((pid_t)child, sizeof(set), &set))
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &set)) {
				cpu = c;
				ncpu++;
			}
	r->hogs[r->nhogs] = (pid_t)child;
	r->hog_cpu[r->nhogs++] = ncpu == 1 ? cpu : -1;
}

/* without /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN): every process's PPid */
static void scan_all_for_hog(struct run *r)
{
	char path[64], buf[1024];
	struct dirent *d;
	DIR *dir = opendir("/proc");

	while (dir && (d = readdir(dir))) {
		long ppid;
		char *p;

		if (d->d_name[0] < '1' || d->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%.20s/status", d->d_name);
		if (read_small_file(path, buf, sizeof(buf)) <= 0 || !(p = strstr(buf, "\nPPid:")))
			continue;
		ppid = strtol(p + 6, NULL, 10);
		if (ppid == r->pid)
			note_hog(r, strtol(d->d_name, NULL, 10));
	}
	if (dir)
		closedir(dir);
}

static void look_at_threads(struct run *r)
{
	bool have_children = false;

	static const char *want[] = { "launcher", "gpu-sim", "loader-0", "loader-1", "injector" };
	char path[128], buf[4096];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)r->pid);
	if (read_small_file(path, buf, sizeof(buf)) > 0 && !strcmp(buf, "simtrainer\n"))
		r->comm_ok = true;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)r->pid);
	dir = opendir(path);
	if (!dir)
		return;
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.20s/comm", (int)r->pid, d->d_name);
		if (read_small_file(path, buf, sizeof(buf)) > 0) {
			buf[strcspn(buf, "\n")] = 0;
			for (unsigned i = 0; i < ARRAY_SIZE(want); i++)
				if (!strcmp(buf, want[i]))
					r->threads_seen |= 1u << i;
		}
		/* the hog: a child process of simtrainer, seen while it runs */
		snprintf(path, sizeof(path), "/proc/%d/task/%.20s/children", (int)r->pid, d->d_name);
		if (read_small_file(path, buf, sizeof(buf)) < 0)
			continue;
		have_children = true;
		for (char *p = buf, *end; *p; p = end) {
			long child = strtol(p, &end, 10);

			if (end == p)
				break;
			note_hog(r, child);
		}
	}
	if (!have_children)
		scan_all_for_hog(r);
	closedir(dir);
}

static uint64_t mono(void)
{
	return mono_ns();
}

/* start simtrainer with args (NULL-terminated), attach, drain until it exits */
static int run_sim(struct run *r, const char *const *args, int stop_after_ms)
{
	const char *sim = getenv("SIMTRAINER");
	char *argv[64];
	int n = 0;
	struct sbc_reader *rd = NULL;
	uint64_t t0, last_hb = 0, stop_at = 0;

	memset(r, 0, sizeof(*r));
	r->recs = calloc(MAXREC, sizeof(*r->recs));
	snprintf(r->dir, sizeof(r->dir), "/var/tmp/test_sim.XXXXXX");
	if (!r->recs || !mkdtemp(r->dir)) {
		snprintf(r->err, sizeof(r->err), "setup: %s", strerror(errno));
		return -1;
	}
	snprintf(r->truth, sizeof(r->truth), "%s/truth.jsonl", r->dir);
	argv[n++] = (char *)sim;
	for (; *args && n < 56; args++)
		argv[n++] = (char *)*args;
	argv[n++] = "--truth";
	argv[n++] = r->truth;
	argv[n++] = "--ckpt-dir";
	argv[n++] = r->dir;
	argv[n++] = "--quiet";
	argv[n] = NULL;

	r->pid = fork();
	if (r->pid == 0) {
		execv(sim, argv);
		_exit(127);
	}
	if (r->pid < 0) {
		snprintf(r->err, sizeof(r->err), "fork: %s", strerror(errno));
		return -1;
	}
	t0 = mono();
	if (stop_after_ms)
		stop_at = t0 + (uint64_t)stop_after_ms * 1000000;
	while (!r->exited) {
		int st;

		if (waitpid(r->pid, &st, WNOHANG) == r->pid) {
			r->exited = true;
			r->status = st;
		}
		if (!rd && !r->exited) {
			rd = sbc_attach(r->pid, r->err, sizeof(r->err));
			if (rd) {
				snprintf(r->producer, sizeof(r->producer), "%s", sbc_producer_name(rd));
				snprintf(r->chan, sizeof(r->chan), "%s", sbc_reader_path(rd));
				sbc_set_enabled(rd, true);
			} else if (mono() - t0 > 10000000000ull) {
				kill(r->pid, SIGKILL);
			}
		}
		if (rd) {
			if (mono() - last_hb > SBC_HEARTBEAT_PERIOD_NS) {
				sbc_heartbeat(rd);
				last_hb = mono();
			}
			while (sbc_drain(rd, collect, r) > 0)
				;
		}
		if (!r->exited)
			look_at_threads(r);
		if (stop_at && mono() > stop_at && !r->exited) {
			kill(r->pid, SIGTERM);
			stop_at = 0;
		}
		if (mono() - t0 > 120000000000ull && !r->exited)
			kill(r->pid, SIGKILL);
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	if (rd) {
		while (sbc_drain(rd, collect, r) > 0)
			;
		sbc_counters(rd, &r->ring_drops, NULL, NULL);
		sbc_detach(rd);
		r->err[0] = 0;
	}
	return rd ? 0 : -1;
}

static void run_cleanup(struct run *r)
{
	char path[600];
	struct dirent *d;
	DIR *dir = opendir(r->dir);

	while (dir && (d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", r->dir, d->d_name);
		if (unlink(path) && errno == EISDIR)
			rmdir(path); /* a checkpoint dir simtrainer failed to remove */
	}
	if (dir)
		closedir(dir);
	rmdir(r->dir);
	free(r->recs);
}

/* ---- tiny JSON-lines reading: numbers and strings by key ---- */

static bool jnum(const char *line, const char *key, uint64_t *out)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(line, pat);
	if (!p)
		return false;
	*out = strtoull(p + strlen(pat), NULL, 10);
	return true;
}

static bool jstr(const char *line, const char *key, char *out, size_t len)
{
	char pat[64];
	const char *p, *e;

	snprintf(pat, sizeof(pat), "\"%s\":\"", key);
	p = strstr(line, pat);
	if (!p)
		return false;
	p += strlen(pat);
	e = strchr(p, '"');
	if (!e || (size_t)(e - p) >= len)
		return false;
	memcpy(out, p, e - p);
	out[e - p] = 0;
	return true;
}

struct truth_line {
	uint64_t step, start, end, culprit_pid, param;
	char kind[16], comm[32], line[512];
};

static int read_truth(const char *path, char *config, size_t clen, char *end, size_t elen,
		      struct truth_line *out, int max)
{
	FILE *f = fopen(path, "re");
	char line[2048];
	int n = 0;

	if (!f)
		return -1;
	config[0] = end[0] = 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "{\"config\":", 10)) {
			snprintf(config, clen, "%s", line);
		} else if (!strncmp(line, "{\"end\":", 7)) {
			snprintf(end, elen, "%.*s", (int)elen - 1, line);
		} else if (n < max) {
			struct truth_line *t = &out[n++];

			memset(t, 0, sizeof(*t));
			snprintf(t->line, sizeof(t->line), "%.*s", (int)sizeof(t->line) - 1, line);
			jnum(line, "step", &t->step);
			jnum(line, "start_ns", &t->start);
			jnum(line, "end_ns", &t->end);
			jnum(line, "culprit_pid", &t->culprit_pid);
			jstr(line, "kind", t->kind, sizeof(t->kind));
			jstr(line, "culprit_comm", t->comm, sizeof(t->comm));
		}
	}
	fclose(f);
	return n;
}

static const char *sim_or_skip(void)
{
	const char *sim = getenv("SIMTRAINER");

	if (!sim || access(sim, X_OK))
		return NULL;
	return sim;
}

/* ---------------------------------------------------------------- cases */

enum { STEPS = 30, K = 6, KUS = 500, H2D_EVERY = 4, H2D_BYTES = 1200000 };

static int cmp_ts(const void *a, const void *b)
{
	const struct sb_gpu *x = *(const struct sb_gpu *const *)a, *y = *(const struct sb_gpu *const *)b;

	return x->h.ts < y->h.ts ? -1 : x->h.ts > y->h.ts;
}

static struct run R; /* big: the string table */

static void t_full_run(void)
{
	static const char *args[] = {
		"--steps", "30", "--kernels", "6", "--kernel-us", "500", "--launch-us", "10",
		"--h2d-every", "4", "--h2d-bytes", "1200000", "--loaders", "2", "--loader-us", "200",
		"--wait-agent", "20", "--channel-slots", "4096",
		"--inject", "hog@5-14", "--inject", "faults@16:16", "--inject", "alloc@18:5000",
		"--inject", "migrate@20:10", "--inject", "stall@22:30", "--inject", "ckpt@24:8",
		"--inject", "faults/13:4",
		NULL,
	};
	struct run *r = &R;
	uint64_t begin[STEPS] = { 0 }, end[STEPS] = { 0 }, launcher_tid = 0, launcher_cpu = 0;
	unsigned nbegin = 0, nend = 0, npush = 0, npop = 0, nsync[STEPS] = { 0 };
	unsigned launches[STEPS] = { 0 }, nkern = 0, ncopy = 0;
	static struct sb_gpu *api_by_corr[1 << 16];
	static struct sb_gpu *ops[MAXREC];
	size_t nops = 0;

	if (!sim_or_skip())
		SKIP("SIMTRAINER is not set to an executable (run through tests/run)");
	if (run_sim(r, args, 0)) {
		run_cleanup(r);
		REQUIRE(0, "could not attach to simtrainer: %s", r->err);
	}
	CHECK(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0, "simtrainer status %#x",
	      r->status);
	CHECK(!strcmp(r->producer, "simtrainer"), "producer '%s'", r->producer);
	CHECK(r->ring_drops == 0, "%llu ring drops", (unsigned long long)r->ring_drops);
	CHECK(r->unresolved == 0, "%u records with unresolved names", r->unresolved);
	CHECK(r->comm_ok, "process comm was not 'simtrainer'");
	CHECK((r->threads_seen & 0x1f) == 0x1f, "threads seen %#x (launcher, gpu-sim, loader-0, "
	      "loader-1, injector)", r->threads_seen);
	CHECK(access(r->chan, F_OK) && errno == ENOENT, "channel %s left behind", r->chan);

	char config[2048], endl[512];
	struct truth_line tl[64];
	int nt = read_truth(r->truth, config, sizeof(config), endl, sizeof(endl), tl, 64);

	REQUIRE(nt >= 0, "no truth file %s", r->truth);
	uint64_t cfg_pid = 0;
	CHECK(jnum(config, "pid", &cfg_pid) && cfg_pid == (uint64_t)r->pid, "config pid %llu",
	      (unsigned long long)cfg_pid);
	CHECK(jnum(config, "launcher_tid", &launcher_tid) && launcher_tid,
	      "config has no launcher_tid");
	CHECK(jnum(config, "launcher_cpu", &launcher_cpu), "config has no launcher_cpu");

	/* markers: both step sources */
	for (size_t i = 0; i < r->n; i++) {
		struct sb_gpu *g = &r->recs[i];

		if (g->h.flags == SB_GPU_MARKER) {
			CHECK(g->h.tid == launcher_tid, "marker on tid %u", g->h.tid);
			if (g->sub == SB_MARK_STEP_BEGIN) {
				CHECK(g->bytes == nbegin && nbegin < STEPS, "step begin %llu, want %u",
				      (unsigned long long)g->bytes, nbegin);
				if (nbegin < STEPS)
					begin[nbegin] = g->h.ts;
				nbegin++;
			} else if (g->sub == SB_MARK_STEP_END) {
				CHECK(g->bytes == nend && nend < STEPS, "step end %llu, want %u",
				      (unsigned long long)g->bytes, nend);
				if (nend < STEPS)
					end[nend] = g->h.ts;
				nend++;
			} else if (g->sub == SB_MARK_RANGE_PUSH || g->sub == SB_MARK_RANGE_POP) {
				CHECK(!strcmp(r->names[g->name_id], "train_step"), "range name '%s'",
				      r->names[g->name_id]);
				g->sub == SB_MARK_RANGE_PUSH ? npush++ : npop++;
			}
		} else if (g->h.flags == SB_GPU_API) {
			CHECK(g->h.tid == launcher_tid, "API call on tid %u", g->h.tid);
			if (g->correlation_id < ARRAY_SIZE(api_by_corr))
				api_by_corr[g->correlation_id] = g;
		} else if (g->h.flags == SB_GPU_KERNEL || g->h.flags == SB_GPU_MEMCPY) {
			CHECK(g->stream == 7 && g->device == 0, "op on stream %u device %u", g->stream,
			      g->device);
			ops[nops++] = g;
		}
	}
	CHECK(nbegin == STEPS && nend == STEPS && npush == STEPS && npop == STEPS,
	      "steps: %u begin, %u end, %u push, %u pop; want %d", nbegin, nend, npush, npop, STEPS);

	/* every op: issued by a matching API call, started no earlier than its launch */
	for (size_t i = 0; i < nops; i++) {
		struct sb_gpu *g = ops[i], *api = g->correlation_id < ARRAY_SIZE(api_by_corr) ?
			api_by_corr[g->correlation_id] : NULL;

		if (!api) {
			CHECK(0, "op with correlation %u has no API record", g->correlation_id);
			break;
		}
		CHECK(api->sub == (g->h.flags == SB_GPU_KERNEL ? SB_API_LAUNCH : SB_API_MEMCPY),
		      "op %u issued by API sub %u", g->correlation_id, api->sub);
		CHECK(g->h.ts >= api->end_ns, "op %u starts %lld ns before its launch",
		      g->correlation_id, (long long)(api->end_ns - g->h.ts));
		int step = -1;
		for (int s = 0; s < STEPS; s++)
			if (api->h.ts >= begin[s] && api->end_ns <= end[s])
				step = s;
		CHECK(step >= 0, "launch %u outside every step", g->correlation_id);
		if (g->h.flags == SB_GPU_KERNEL) {
			nkern++;
			CHECK(g->end_ns - g->h.ts == KUS * 1000ull, "kernel %s lasted %llu ns, want %d",
			      r->names[g->name_id], (unsigned long long)(g->end_ns - g->h.ts), KUS * 1000);
			if (step >= 0 && ++launches[step] == K)
				CHECK(!strcmp(r->names[g->name_id], "nccl_allreduce"),
				      "step %d's last kernel is %s", step, r->names[g->name_id]);
		} else {
			ncopy++;
			CHECK(g->sub == SB_COPY_HTOD && g->bytes == H2D_BYTES &&
			      g->end_ns - g->h.ts == H2D_BYTES * 1000ull / 12000,
			      "copy: sub %u bytes %llu took %llu ns", g->sub, (unsigned long long)g->bytes,
			      (unsigned long long)(g->end_ns - g->h.ts));
			CHECK(step % H2D_EVERY == 0, "copy in step %d", step);
		}
	}
	CHECK(nkern == STEPS * K, "%u kernels, want %d", nkern, STEPS * K);
	CHECK(ncopy == (STEPS + H2D_EVERY - 1) / H2D_EVERY, "%u copies", ncopy);
	for (int s = 0; s < STEPS; s++)
		CHECK(launches[s] == K, "step %d has %u launches, want %d", s, launches[s], K);

	/* one stream: no overlap, in issue order */
	qsort(ops, nops, sizeof(ops[0]), cmp_ts);
	for (size_t i = 1; i < nops; i++) {
		CHECK(ops[i]->h.ts >= ops[i - 1]->end_ns, "ops %u and %u overlap by %llu ns",
		      ops[i - 1]->correlation_id, ops[i]->correlation_id,
		      (unsigned long long)(ops[i - 1]->end_ns - ops[i]->h.ts));
		CHECK(ops[i]->correlation_id > ops[i - 1]->correlation_id, "ops out of issue order");
	}
	/* the sync of each step returns only after its last op ended */
	for (size_t i = 0; i < r->n; i++) {
		struct sb_gpu *g = &r->recs[i];

		if (g->h.flags != SB_GPU_SYNC)
			continue;
		for (int s = 0; s < STEPS; s++) {
			if (g->h.ts < begin[s] || g->end_ns > end[s])
				continue;
			nsync[s]++;
			for (size_t k = 0; k < nops; k++)
				if (ops[k]->h.ts < end[s] && ops[k]->h.ts >= begin[s])
					CHECK(ops[k]->end_ns <= g->end_ns, "step %d synced before op %u ended",
					      s, ops[k]->correlation_id);
		}
	}
	for (int s = 0; s < STEPS; s++)
		CHECK(nsync[s] == 1, "step %d has %u syncs", s, nsync[s]);

	/* ground truth */
	unsigned seen[8] = { 0 };
	static const char *kinds[] = { "hog", "faults", "alloc", "migrate", "stall", "ckpt" };
	pid_t hog_pid = 0;
	uint64_t hog_waited = 0;
	for (int i = 0; i < nt; i++) {
		struct truth_line *t = &tl[i];
		uint64_t late = 0, all = 0, self = 0;
		int k = -1;

		for (int j = 0; j < 6; j++)
			if (!strcmp(t->kind, kinds[j]))
				k = j;
		CHECK(k >= 0, "unknown kind in %s", t->line);
		if (k < 0 || t->step >= STEPS)
			continue;
		seen[k]++;
		CHECK(t->start && t->start <= t->end, "bad times in %s", t->line);
		CHECK(t->start >= begin[t->step] && t->end <= end[t->step],
		      "injection outside its step %llu: %s", (unsigned long long)t->step, t->line);
		/* the device thread's lateness is part of the step's wait on it */
		CHECK(jnum(t->line, "device_late_ns", &late) && late <= end[t->step] - begin[t->step],
		      "device_late_ns: %s", t->line);
		switch (k) {
		case 0:
			CHECK(t->step >= 5 && t->step <= 14, "hog in step %llu", (unsigned long long)t->step);
			CHECK(!strcmp(t->comm, "noisy-neighbor") && t->culprit_pid, "hog culprit: %s",
			      t->line);
			if (!hog_pid)
				hog_pid = (pid_t)t->culprit_pid;
			CHECK(t->culprit_pid == (uint64_t)hog_pid, "the hog changed pid within its range");
			/* schedstat run delay: the launcher's share of all the threads' */
			CHECK(jnum(t->line, "run_delay_ns", &all) &&
			      jnum(t->line, "launcher_run_delay_ns", &self) && self <= all &&
			      self <= end[t->step] - begin[t->step], "run delay: %s", t->line);
			hog_waited += self;
			break;
		case 1: {
			uint64_t pages = 0, mib = 0;

			CHECK(t->step == 16 || t->step == 13 || t->step == 26, "faults in step %llu",
			      (unsigned long long)t->step);
			CHECK(jnum(t->line, "mib", &mib) && jnum(t->line, "pages", &pages) &&
			      pages == mib * 256, "faults: %s", t->line);
			break;
		}
		case 2: CHECK(t->step == 18, "alloc in step %llu", (unsigned long long)t->step); break;
		case 3: {
			uint64_t moves = 0;

			CHECK(t->step == 20, "migrate in step %llu", (unsigned long long)t->step);
			CHECK(jnum(t->line, "moves", &moves) &&
			      (moves >= 5 || strstr(t->line, "only one CPU")), "migrate: %s", t->line);
			break;
		}
		case 4:
			CHECK(t->step == 22, "stall in step %llu", (unsigned long long)t->step);
			CHECK(t->end - t->start >= 30000000ull, "stall lasted %llu ns",
			      (unsigned long long)(t->end - t->start));
			CHECK(t->culprit_pid == (uint64_t)r->pid && !strncmp(t->comm, "loader-", 7),
			      "stall culprit: %s", t->line);
			break;
		case 5: {
			uint64_t bytes = 0;

			CHECK(t->step == 24, "ckpt in step %llu", (unsigned long long)t->step);
			CHECK(jnum(t->line, "bytes", &bytes) && bytes == 8ull << 20, "ckpt: %s", t->line);
			break;
		}
		}
	}
	CHECK(seen[0] == 10 && seen[1] == 3 && seen[2] == 1 && seen[3] == 1 && seen[4] == 1 &&
	      seen[5] == 1, "truth lines: hog %u faults %u alloc %u migrate %u stall %u ckpt %u",
	      seen[0], seen[1], seen[2], seen[3], seen[4], seen[5]);
	/* the hog was real: a child of simtrainer named noisy-neighbor, on the launcher's CPU */
	bool found = false;
	for (unsigned i = 0; i < r->nhogs; i++) {
		if (r->hogs[i] == hog_pid) {
			found = true;
			CHECK(r->hog_cpu[i] == (int)launcher_cpu, "hog pinned to %d, launcher on %llu",
			      r->hog_cpu[i], (unsigned long long)launcher_cpu);
		}
	}
	CHECK(found, "truth hog pid %d was never seen running as noisy-neighbor (%u seen)",
	      (int)hog_pid, r->nhogs);
	/* a hog pinned to the launcher's CPU keeps it waiting in some of ten steps */
	CHECK(hog_waited > 0, "the truth says the hog never kept the launcher waiting");
	CHECK(hog_pid && kill(hog_pid, 0) && errno == ESRCH, "the hog %d outlived its steps",
	      (int)hog_pid);
	uint64_t esteps = 0;
	CHECK(jnum(endl, "steps", &esteps) && esteps == STEPS && strstr(endl, "\"done\""),
	      "end line: %s", endl);
	uint64_t med = 0;
	CHECK(jnum(endl, "run_delay_median_ns", &med) && jnum(endl, "device_late_median_ns", &med),
	      "end line without the plain steps' medians: %s", endl);
	run_cleanup(r);
}

static void t_jitter_stays_in_bounds(void)
{
	static const char *args[] = {
		"--steps", "10", "--kernels", "8", "--kernel-us", "200,400", "--jitter", "25",
		"--launch-us", "5", "--wait-agent", "20", "--seed", "7", "--mark", "nvtx", NULL,
	};
	struct run *r = &R;
	unsigned nk = 0, distinct = 0;
	uint64_t prev_end = 0, prev = 0;

	if (!sim_or_skip())
		SKIP("SIMTRAINER is not set to an executable (run through tests/run)");
	if (run_sim(r, args, 0)) {
		run_cleanup(r);
		REQUIRE(0, "could not attach to simtrainer: %s", r->err);
	}
	for (size_t i = 0; i < r->n; i++) {
		struct sb_gpu *g = &r->recs[i];
		uint64_t d = g->end_ns - g->h.ts;

		if (g->h.flags != SB_GPU_KERNEL)
			continue;
		/* kernels alternate 200 and 400 us within a step: bounds of either */
		CHECK((d >= 150000 && d <= 250000) || (d >= 300000 && d <= 500000),
		      "kernel lasted %llu ns", (unsigned long long)d);
		CHECK(g->h.ts >= prev_end, "kernels overlap");
		distinct += d != prev;
		prev = d;
		prev_end = g->end_ns;
		nk++;
	}
	CHECK(nk == 80, "%u kernels", nk);
	CHECK(distinct > 40, "jitter made only %u distinct durations", distinct);
	run_cleanup(r);
}

static void t_sigterm_cleans_up(void)
{
	static const char *args[] = {
		"--steps", "1000000", "--kernels", "4", "--kernel-us", "300",
		"--inject", "hog@0-1000000", NULL,
	};
	struct run *r = &R;
	char config[2048], endl[512];
	struct truth_line tl[4];

	if (!sim_or_skip())
		SKIP("SIMTRAINER is not set to an executable (run through tests/run)");
	run_sim(r, args, 700);
	CHECK(r->exited && WIFEXITED(r->status) && WEXITSTATUS(r->status) == 128 + SIGTERM,
	      "status %#x, want exit %d", r->status, 128 + SIGTERM);
	CHECK(r->nhogs == 1, "%u hogs seen", r->nhogs);
	for (unsigned i = 0; i < r->nhogs; i++)
		CHECK(kill(r->hogs[i], 0) && errno == ESRCH, "hog %d still alive", (int)r->hogs[i]);
	CHECK(access(r->chan, F_OK) && errno == ENOENT, "channel left behind");
	CHECK(read_truth(r->truth, config, sizeof(config), endl, sizeof(endl), tl, 4) >= 1,
	      "no truth file after SIGTERM");
	CHECK(strstr(endl, "\"signal\""), "end line: '%s'", endl);
	run_cleanup(r);
}

static void t_usage(void)
{
	const char *sim = sim_or_skip();
	char cmd[PATH_MAX + 128], out[512];
	FILE *f;
	int st;

	if (!sim)
		SKIP("SIMTRAINER is not set to an executable (run through tests/run)");
	snprintf(cmd, sizeof(cmd), "'%s' --help", sim);
	f = popen(cmd, "r");
	REQUIRE(f, "popen");
	size_t n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	/* read the rest: closing the pipe early would kill it with SIGPIPE */
	for (char sink[4096]; fread(sink, 1, sizeof(sink), f) > 0;)
		;
	st = pclose(f);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, "usage: simtrainer"),
	      "--help: status %#x", st);
	static const char *bad[] = { "--inject bogus@3", "--inject hog", "--inject hog@5-2",
				     "--inject ckpt/0", "--inject faults@1:0", "--steps x",
				     "--mark maybe", "--jitter 200", "--bogus", "--steps" };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		snprintf(cmd, sizeof(cmd), "'%s' %s 2>&1", sim, bad[i]);
		f = popen(cmd, "r");
		REQUIRE(f, "popen");
		n = fread(out, 1, sizeof(out) - 1, f);
		out[n] = 0;
		st = pclose(f);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "'%s': status %#x", bad[i], st);
		CHECK(!strncmp(out, "simtrainer: ", 12) && strchr(out, '\n') == out + n - 1,
		      "'%s' did not give one error line: %s", bad[i], out);
	}
}

/* does this ELF carry the USDT probe stepblame:step? */
static int has_usdt(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), found = 0;
	Elf *e;
	Elf_Scn *scn = NULL;

	if (fd < 0)
		return -1;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	while (e && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		size_t off = 0, noff, nameoff, doff;
		GElf_Nhdr nh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE || !(data = elf_getdata(scn, NULL)))
			continue;
		while ((noff = gelf_getnote(data, off, &nh, &nameoff, &doff)) > 0) {
			const char *d = (const char *)data->d_buf + doff;
			size_t addrs = 3 * (gelf_getclass(e) == ELFCLASS64 ? 8 : 4);

			if (nh.n_type == 3 && nh.n_descsz > addrs &&
			    !memcmp(d + addrs, "stepblame\0step\0", 15))
				found = 1;
			off = noff;
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	return found;
}

static void t_usdt_probe_present(void)
{
	const char *sim = sim_or_skip();
	char lib[PATH_MAX];

	if (!sim)
		SKIP("SIMTRAINER is not set to an executable (run through tests/run)");
	CHECK(has_usdt(sim) == 1, "%s has no stepblame:step probe", sim);
	snprintf(lib, sizeof(lib), "%s", sim);
	char *slash = strrchr(lib, '/');
	snprintf(slash ? slash + 1 : lib, sizeof(lib) - (slash ? (size_t)(slash + 1 - lib) : 0),
		 "libstepblame.so");
	int l = has_usdt(lib);
	CHECK(l != 0, "%s has no stepblame:step probe", lib);
	if (l < 0)
		SKIP("no %s to check", lib);
}


/* one run of simtrainer: its page faults and context switches (all threads), 0 or -1 */
static int sim_rusage(const char *sim, const char *busy, struct rusage *ru)
{
	pid_t p = fork();
	int st;

	if (p == 0) {
		int nul = open("/dev/null", O_WRONLY);

		dup2(nul, 1);
		dup2(nul, 2);
		if (busy)
			execl(sim, sim, "--steps", "40", "--kernels", "4", "--kernel-us", "300",
			      "--h2d-every", "0", "--busy", busy, "--quiet", (char *)NULL);
		else
			execl(sim, sim, "--steps", "40", "--kernels", "4", "--kernel-us", "300",
			      "--h2d-every", "0", "--quiet", (char *)NULL);
		_exit(127);
	}
	if (p < 0 || wait4(p, &st, 0, ru) != p || !WIFEXITED(st) || WEXITSTATUS(st))
		return -1;
	return 0;
}

/*
 * --busy SW,PF,MA adds, each step, SW round trips of the launcher to its peer
 * (a switch each, and one of the peer) and PF fresh-page faults: over 40
 * steps, against the same run without it
 */
static void t_busy(void)
{
	const char *sim = sim_or_skip();
	struct rusage a, b;
	long faults, switches;

	if (!sim)
		SKIP("SIMTRAINER is not set to an executable (run through tests/run)");
	REQUIRE(!sim_rusage(sim, NULL, &a), "plain run failed");
	REQUIRE(!sim_rusage(sim, "50,200,100", &b), "--busy run failed");
	faults = b.ru_minflt - a.ru_minflt;
	switches = (b.ru_nvcsw + b.ru_nivcsw) - (a.ru_nvcsw + a.ru_nivcsw);
	CHECK(faults >= 40 * 200 * 9 / 10 && faults <= 40 * 200 * 2,
	      "%ld more minor faults with --busy 50,200,100 over 40 steps, want about 8000", faults);
	CHECK(switches >= 40 * 50 * 2 * 9 / 10,
	      "%ld more context switches with --busy 50,... over 40 steps, want 4000 or more",
	      switches);
}

int main(void)
{
	RUN(t_usage);
	RUN(t_usdt_probe_present);
	RUN(t_busy);
	RUN_ROOT(t_full_run);
	RUN_ROOT(t_jitter_stays_in_bounds);
	RUN_ROOT(t_sigterm_cleans_up);
	return test_summary();
}
