// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The CPU side of CUDA by uprobes, for trainers started without the
 * collector: a fake libcuda.so.1 (tests/progs/fakecuda.c, built here at run
 * time) called a known number of times by tests/progs/cudauser. Root only.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "test.h"
#include "capture.h"
#include "capture/collect.h"
#include "format/trace.h"
#include "base/util.h"

#define SYNC_NS 20000000ull /* fakecuda's cuStreamSynchronize sleeps this long */






static const char *build_dir(void)
{
	const char *b = getenv("BUILD");

	return b ? b : "build";
}

static char libdir[64];

static void remove_lib(void)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/libcuda.so.1", libdir);
	unlink(path);
	rmdir(libdir);
}

/* build the fake driver as DIR/libcuda.so.1; "" with why on failure */
static const char *fake_lib(char *why, size_t len)
{
	static char path[128];
	static const char *srcs[] = { "tests/progs/fakecuda.c", "../tests/progs/fakecuda.c" };
	const char *src = NULL, *cc = getenv("CC");
	char cmd[512];

	if (path[0])
		return path;
	for (size_t i = 0; i < sizeof(srcs) / sizeof(srcs[0]); i++)
		if (!access(srcs[i], R_OK))
			src = srcs[i];
	if (!src) {
		snprintf(why, len, "tests/progs/fakecuda.c not found (run from the repository root)");
		return "";
	}
	snprintf(libdir, sizeof(libdir), "/tmp/sbcuda.XXXXXX");
	if (!mkdtemp(libdir)) {
		snprintf(why, len, "mkdtemp: %s", strerror(errno));
		return "";
	}
	atexit(remove_lib);
	snprintf(path, sizeof(path), "%s/libcuda.so.1", libdir);
	snprintf(cmd, sizeof(cmd), "%s -shared -fPIC -O1 -DFAKECUDA_LIB %s -o %s 2>&1",
		 cc && *cc ? cc : "cc", src, path);
	if (system(cmd) != 0 || access(path, R_OK)) {
		snprintf(why, len, "cannot build the fake driver: %.300s", cmd);
		path[0] = 0;
		return "";
	}
	chmod(libdir, 0755);
	return path;
}

static struct cap *trace_user(const char *lib, char *const args[], bool no_cuda, char *why,
			      size_t len)
{
	char prog[512], r;
	struct cap *c;
	pthread_t t;
	int go[2], ready[2], status;
	pid_t pid;

	snprintf(prog, sizeof(prog), "%s/tests/progs/cudauser", build_dir());
	if (access(prog, X_OK)) {
		snprintf(why, len, "cannot run %.300s (build it: make test-bin)", prog);
		return NULL;
	}
	if (pipe(go) || pipe(ready))
		return NULL;
	pid = fork();
	if (pid == 0) {
		char *argv[32] = { prog, (char *)lib };
		int i;

		for (i = 0; args[i] && i < 28; i++)
			argv[i + 2] = args[i];
		argv[i + 2] = NULL;
		dup2(go[0], 0);
		dup2(ready[1], 1);
		close(go[0]);
		close(go[1]);
		close(ready[0]);
		close(ready[1]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(go[0]);
	close(ready[1]);
	/* the library is mapped once cudauser says so: the probes find it at attach */
	if (read(ready[0], &r, 1) != 1) {
		close(ready[0]);
		close(go[1]);
		waitpid(pid, &status, 0);
		snprintf(why, len, "cudauser did not start (status 0x%x)", status);
		return NULL;
	}
	close(ready[0]);
	c = calloc(1, sizeof(*c));
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->o.probe.pid = pid;
	c->o.probe.ring_bytes = 4 << 20;
	c->o.probe.wake_bytes = 16 << 10;
	c->o.probe.no_alloc = true;
	c->o.probe.no_cuda = no_cuda;
	c->o.probe.alloc_min_ns = 10000;
	c->o.duration_ns = 30000000000ll;
	c->o.agent_cpu = -2;
	c->o.quiet = true;
	c->o.no_gpu = true;
	cap_start(c, &t);
	if (write(go[1], "g", 1) != 1)
		kill(pid, SIGKILL);
	close(go[1]);
	waitpid(pid, &status, 0);
	pthread_join(t, NULL);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		snprintf(why, len, "cudauser failed (status 0x%x)", status);
		free_cap(c);
		return NULL;
	}
	return c;
}

#define TRACE_OR_SKIP(c, no_cuda, ...) \
	do { \
		char why_[512] = ""; \
		NEED_BPF(); \
		const char *lib_ = fake_lib(why_, sizeof(why_)); \
		if (!lib_[0]) \
			SKIP("%s", why_); \
		char *args_[] = { __VA_ARGS__, NULL }; \
		c = trace_user(lib_, args_, no_cuda, why_, sizeof(why_)); \
		REQUIRE(c, "%s", why_); \
		REQUIRE(c->rc == 0, "capture failed to start"); \
	} while (0)

static const struct {
	const char *sym;
	uint32_t fn;
	size_t want;
} calls[] = {
	{ "cuLaunchKernel", SB_CU_LAUNCH, 7 },
	{ "cuStreamSynchronize", SB_CU_SYNC, 3 },
	{ "cuMemAlloc_v2", SB_CU_ALLOC, 5 },
	{ "cuMemFree_v2", SB_CU_FREE, 4 },
	{ "cuMemcpyHtoD_v2", SB_CU_MEMCPY, 6 },
};

static void t_exact_counts_and_latency(void)
{
	struct cap *c;
	size_t got[5] = {}, other = 0, slow_syncs = 0, slow_other = 0;
	bool probe_ok = false;

	TRACE_OR_SKIP(c, false, "launch", "7", "sync", "3", "alloc", "5", "free", "4", "memcpy", "6");
	uint32_t tid = tid_named(c, "cu-main");

	REQUIRE(tid, "no rename to cu-main seen");
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_cuda *e = (const void *)c->recs[i];
		const struct sb_text *t = (const void *)c->recs[i];

		if (t->h.type == SB_REC_PROBE && t->id == 1 && t->len > 11 &&
		    !strncmp(t->text, "cuda-driver", 11))
			probe_ok = true;
		if (e->h.type != SB_EV_CUDA)
			continue;
		if (e->h.tid != tid || e->h.pid != (uint32_t)c->o.probe.pid) {
			other++;
			continue;
		}
		CHECK(e->start_ns <= e->h.ts, "call returns before it starts");
		size_t k;
		for (k = 0; k < 5; k++)
			if (!strcmp(probes_cuda_symbol(e->sym), calls[k].sym))
				break;
		if (k == 5) {
			CHECK(0, "call of %s, which cudauser never makes", probes_cuda_symbol(e->sym));
			continue;
		}
		CHECK(e->fn == calls[k].fn, "%s recorded as fn %u, want %u", calls[k].sym, e->fn,
		      calls[k].fn);
		got[k]++;
		if (e->fn == SB_CU_SYNC && e->h.ts - e->start_ns >= SYNC_NS)
			slow_syncs++;
		if (e->fn != SB_CU_SYNC && e->h.ts - e->start_ns >= SYNC_NS)
			slow_other++;
	}
	CHECK(probe_ok, "no attached cuda-driver probe status record");
	for (size_t k = 0; k < 5; k++)
		CHECK(got[k] == calls[k].want, "%s: saw %zu calls, want %zu", calls[k].sym, got[k],
		      calls[k].want);
	CHECK(slow_syncs == 3, "%zu of 3 syncs took >= 20 ms", slow_syncs);
	CHECK(slow_other == 0, "%zu non-sync calls took >= 20 ms", slow_other);
	CHECK(other == 0, "%zu CUDA calls attributed to another thread", other);
	CHECK(c->res.end_reason == SBT_END_TARGET_EXIT, "capture ended with %d", c->res.end_reason);
	free_cap(c);
}

/* which thread launches: each launch is attributed to its own thread */
static void t_launching_thread(void)
{
	struct cap *c;
	size_t main_n = 0, side_n = 0;

	TRACE_OR_SKIP(c, false, "launch", "2", "side", "9");
	uint32_t tid = tid_named(c, "cu-main"), side = tid_named(c, "cu-side");

	REQUIRE(tid && side && tid != side, "threads not seen (main %u, side %u)", tid, side);
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_cuda *e = (const void *)c->recs[i];

		if (e->h.type != SB_EV_CUDA || e->fn != SB_CU_LAUNCH)
			continue;
		if (e->h.tid == tid)
			main_n++;
		else if (e->h.tid == side)
			side_n++;
	}
	CHECK(main_n == 2 && side_n == 9, "launches: %zu on cu-main (want 2), %zu on cu-side "
	      "(want 9)", main_n, side_n);
	free_cap(c);
}

/* --no-cuda leaves the driver alone */
static void t_no_cuda(void)
{
	struct cap *c;
	size_t n = 0;

	TRACE_OR_SKIP(c, true, "launch", "3", "sync", "1");
	for (size_t i = 0; i < c->n; i++)
		if (c->recs[i]->type == SB_EV_CUDA)
			n++;
	CHECK(n == 0, "%zu CUDA events with --no-cuda", n);
	free_cap(c);
}

/*
 * `stepblame run` end to end: CMD held until the probes are on, the driver
 * probed once CMD loads it, the trace written, CMD's exit status passed on.
 */
static void t_stepblame_run(void)
{
	char sb[512], prog[512], out[128], why[512] = "", buf[4096];
	const char *env = getenv("STEPBLAME"), *lib;
	int in[2], outp[2], status;
	size_t launches = 0, syncs = 0, report = 0;
	bool comm = false, exited = false;
	struct pollfd pfd;
	ssize_t n;
	pid_t pid;
	char r;

	NEED_BPF();
	lib = fake_lib(why, sizeof(why));
	if (!lib[0])
		SKIP("%s", why);
	snprintf(sb, sizeof(sb), "%s", env && *env ? env : "");
	if (!sb[0])
		snprintf(sb, sizeof(sb), "%s/stepblame", build_dir());
	if (access(sb, X_OK))
		SKIP("no %s (build it: make)", sb);
	snprintf(prog, sizeof(prog), "%s/tests/progs/cudauser", build_dir());
	REQUIRE(!access(prog, X_OK), "cannot run %s (build it: make test-bin)", prog);
	snprintf(out, sizeof(out), "%s/run.sbt", libdir);
	REQUIRE(!pipe(in) && !pipe(outp), "pipe");
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(outp[1], 1);
		close(in[0]);
		close(in[1]);
		close(outp[0]);
		close(outp[1]);
		execl(sb, sb, "run", "-q", "--no-alloc", "-o", out, "--", prog, lib, "launch", "4",
		      "sync", "1", "exit", "3", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(outp[1]);
	pfd = (struct pollfd){ .fd = outp[0], .events = POLLIN };
	if (poll(&pfd, 1, 20000) != 1 || read(outp[0], &r, 1) != 1 || r != 'r') {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		REQUIRE(0, "cudauser did not start under stepblame run (status 0x%x)", status);
	}
	/* the driver was loaded after the start: the once-a-second rescan probes it */
	usleep(2200000);
	if (write(in[1], "g", 1) != 1)
		kill(pid, SIGKILL);
	close(in[1]);
	while ((n = read(outp[0], buf, sizeof(buf))) > 0)
		report += (size_t)n;
	close(outp[0]);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 3, "stepblame run ended with status "
	      "0x%x, want CMD's exit status 3", status);

	char err[256];
	struct sbt_reader *rd = sbt_open(out, err, sizeof(err));
	const struct sb_hdr *h;
	enum sbt_status st;

	REQUIRE(rd, "no trace: %s", err);
	while ((st = sbt_next(rd, &h)) == SBT_OK) {
		if (h->type == SB_REC_TARGET) {
			const struct sb_text *t = (const void *)h;

			comm = memmem(t->text, t->len, "comm=cudauser", 13) != NULL;
		}
		if (h->type == SB_EV_CUDA && h->pid == (uint32_t)pid)
			CHECK(0, "CUDA event of stepblame itself");
		if (h->type == SB_EV_CUDA) {
			const struct sb_cuda *e = (const void *)h;

			launches += e->fn == SB_CU_LAUNCH;
			syncs += e->fn == SB_CU_SYNC;
		}
	}
	CHECK(st == SBT_EOF, "trace not complete: %s", sbt_error(rd));
	exited = st == SBT_EOF && sbt_trailer(rd)->end_reason == SBT_END_TARGET_EXIT;
	sbt_close(rd);
	unlink(out);
	CHECK(comm, "the trace's target is not cudauser: CMD was not held until after its exec");
	CHECK(exited, "capture did not end with the target's exit");
	CHECK(launches == 4 && syncs == 1, "saw %zu launches and %zu syncs, want 4 and 1",
	      launches, syncs);
	CHECK(report > 0, "stepblame run printed no report");
}

int main(void)
{
	RUN(t_exact_counts_and_latency);
	RUN(t_launching_thread);
	RUN(t_no_cuda);
	RUN(t_stepblame_run);
	return test_summary();
}
