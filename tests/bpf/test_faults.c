// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Faults and load around a capture, root only, asserting on exact counts from
 * a target that says what it did (tests/progs/sbthreads):
 *  - thousands of threads alive at once, and threads created and destroyed at
 *    a high rate: every thread_new / thread_exit is there, nothing dropped, no
 *    state map overflowed;
 *  - a target that forks: nothing about the children is recorded;
 *  - the target's PID reused by another process while the agent is not looking
 *    (no pidfd: an old kernel, simulated with seccomp): the capture stops and
 *    says why. The PID is reused on purpose through ns_last_pid.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "test.h"
#include "capture.h"
#include "format/channel.h"
#include "format/costs.h"
#include "capture/collect.h"
#include "base/util.h"

/* ---- an in-process capture of a child that waits for a go byte (as test_probes) ---- */



static int mem_sink_count(void *ctx, const struct sb_hdr *r)
{
	(void)r;
	++*(int *)ctx;
	return 0;
}




/* run sbthreads MODE N under a capture until it exits; NULL if it cannot run */
/* --no-children for the next trace_threads */
static bool no_children;

static struct cap *trace_threads(const char *mode, const char *n, pid_t *child)
{
	struct cap *c = calloc(1, sizeof(*c));
	int in[2], out[2], status;
	pthread_t t;
	pid_t pid;
	ssize_t k;
	size_t got = 0;

	if (access(prog_path("sbthreads"), X_OK) || pipe(in) || pipe(out)) {
		free(c);
		return NULL;
	}
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		execl(prog_path("sbthreads"), "sbthreads", mode, n, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->o.probe.pid = pid;
	c->o.probe.no_children = no_children;
	c->o.probe.ring_bytes = 64 << 20;
	c->o.probe.wake_bytes = 256 << 10;
	c->o.probe.alloc_min_ns = 10000;
	c->o.duration_ns = 60000000000ll;
	c->o.agent_cpu = -2;
	c->o.quiet = true;
	c->o.no_gpu = true;
	cap_start(c, &t);
	if (write(in[1], "g", 1) != 1)
		kill(pid, SIGKILL);
	close(in[1]);
	while (got + 1 < sizeof(c->out) && (k = read(out[0], c->out + got, sizeof(c->out) - 1 - got)) > 0)
		got += (size_t)k;
	c->out[got] = 0;
	close(out[0]);
	waitpid(pid, &status, 0);
	pthread_join(t, NULL);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		snprintf(c->out, sizeof(c->out), "sbthreads exited with status 0x%x", status);
	if (child)
		*child = pid;
	return c;
}

static long out_num(const struct cap *c, const char *key)
{
	const char *p = strstr(c->out, key);

	return p ? atol(p + strlen(key)) : -1;
}

static const struct sb_drops *last_drops(const struct cap *c)
{
	const struct sb_drops *d = NULL;

	for (size_t i = 0; i < c->n; i++)
		if (c->recs[i]->type == SB_REC_DROPS)
			d = (const void *)c->recs[i];
	return d;
}

/* thread_new / thread_exit of threads other than the main one; exact */
static void check_threads(struct cap *c, pid_t pid, long want)
{
	const struct sb_drops *d = last_drops(c);
	size_t news = 0, exits = 0;
	uint64_t ring = 0;

	for (size_t i = 0; i < c->n; i++) {
		const struct sb_thread *t = (const void *)c->recs[i];

		if (t->h.pid != (uint32_t)pid || t->h.tid == (uint32_t)pid)
			continue;
		if (t->h.type == SB_EV_THREAD_NEW)
			news++;
		else if (t->h.type == SB_EV_THREAD_EXIT)
			exits++;
	}
	REQUIRE(d, "no drops record");
	for (int i = 0; i <= SB_EV_KERNEL_MAX; i++)
		ring += d->ring[i];
	CHECK(c->res.end_reason == SBT_END_TARGET_EXIT, "capture ended with %d", c->res.end_reason);
	CHECK(d->ring[SB_EV_THREAD_NEW] == 0 && d->ring[SB_EV_THREAD_EXIT] == 0,
	      "thread records dropped: %llu new, %llu exit", (unsigned long long)d->ring[SB_EV_THREAD_NEW],
	      (unsigned long long)d->ring[SB_EV_THREAD_EXIT]);
	CHECK(news == (size_t)want, "%zu thread_new records, the target made %ld threads", news, want);
	CHECK(exits == (size_t)want, "%zu thread_exit records (main thread aside), want %ld", exits, want);
	CHECK(d->wait_overflow == 0, "%llu state-map overflows (16384 entries; %ld threads)",
	      (unsigned long long)d->wait_overflow, want);
	CHECK(ring == 0, "%llu ring drops", (unsigned long long)ring);
}

static void t_thousands_of_threads(void)
{
	struct cap *c;
	pid_t pid;
	long made;

	NEED_BPF();
	c = trace_threads("hold", "2000", &pid);
	REQUIRE(c, "cannot run %s (build it: make test-bin)", prog_path("sbthreads"));
	REQUIRE(c->rc == 0, "capture failed to start");
	made = out_num(c, "threads=");
	REQUIRE(made == 2000, "sbthreads: %s", c->out);
	check_threads(c, pid, made);
	free_cap(c);
}

static struct cap *churn;
static pid_t churn_pid;

static void t_thread_churn(void)
{
	struct cap *c;
	long made;

	NEED_BPF();
	c = churn = trace_threads("churn", "3000", &churn_pid);
	REQUIRE(c, "cannot run %s (build it: make test-bin)", prog_path("sbthreads"));
	REQUIRE(c->rc == 0, "capture failed to start");
	made = out_num(c, "threads=");
	REQUIRE(made == 3000, "sbthreads: %s", c->out);
	check_threads(c, churn_pid, made);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The kernel keeps per-thread allocator state (alloc_totals, alloc_frames:
 * 16384 entries each) and the guard a table by thread: a dead thread's go
 * once its last totals are out, or a long capture of a trainer whose threads
 * come and go would fill the maps (the allocator calls of new threads lost)
 * and report every dead thread again each second. Its calls are not lost on
 * the way: each churned thread's malloc is in the trace, as a fast call in
 * its alloc_stats or as an alloc record of its own.
 */
struct tid_calls {
	uint32_t tid;
	uint64_t calls;
};

static int cmp_tid(const void *a, const void *b)
{
	const struct tid_calls *x = a, *y = b;

	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int cmp_tid_calls(const void *a, const void *b)
{
	const struct tid_calls *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->calls < y->calls ? -1 : x->calls > y->calls;
}

/*
 * Every allocator call of the capture as the trace has it: each thread's last
 * (cumulative) count of fast calls, and the calls recorded on their own
 */
static uint64_t calls_in_trace(const struct cap *c)
{
	struct tid_calls *t = calloc(c->n + 1, sizeof(*t));
	size_t n = 0;
	uint64_t sum = 0;

	if (!t)
		return 0;
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_hdr *h = c->recs[i];

		if (h->type == SB_EV_ALLOC)
			sum++;
		if (h->type == SB_REC_ALLOC_STATS) {
			const struct sb_alloc_stats *a = (const void *)h;

			t[n].tid = h->tid;
			for (int k = 0; k < SB_FN_MAX; k++)
				t[n].calls += a->calls[k];
			n++;
		}
	}
	qsort(t, n, sizeof(*t), cmp_tid_calls);
	for (size_t i = 0; i < n; i++)
		if (i + 1 == n || t[i + 1].tid != t[i].tid)
			sum += t[i].calls;
	free(t);
	return sum;
}

/* the calls the overhead guard counted in its windows: its last record's */
static uint64_t guard_calls_seen(const struct cap *c)
{
	struct sb_guard g;
	uint64_t seen = 0;

	for (size_t i = 0; i < c->n; i++) {
		const struct sb_text *t = (const void *)c->recs[i];

		if (c->recs[i]->type == SB_REC_GUARD && sb_guard_parse(&g, t->text, t->len))
			seen = g.calls_seen;
	}
	return seen;
}

static void t_dead_threads_alloc_state(void)
{
	struct cap *c = churn;
	uint64_t stale = 0;
	uint32_t *kids = NULL, *seen = NULL;
	size_t nkids = 0, nseen = 0, found = 0;

	NEED_BPF();
	REQUIRE(c && c->rc == 0, "the churn capture did not run");
	kids = calloc(c->n + 1, sizeof(*kids));
	seen = calloc(c->n + 1, sizeof(*seen));
	REQUIRE(kids && seen, "out of memory");
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_hdr *h = c->recs[i];

		if (h->type == SB_EV_THREAD_NEW && h->tid != (uint32_t)churn_pid)
			kids[nkids++] = h->tid;
		if (h->type == SB_EV_ALLOC)
			seen[nseen++] = h->tid;
		if (h->type == SB_REC_ALLOC_STATS) {
			const struct sb_alloc_stats *a = (const void *)h;
			uint64_t calls = 0;

			for (int k = 0; k < SB_FN_MAX; k++)
				calls += a->calls[k];
			if (calls)
				seen[nseen++] = h->tid;
		}
	}
	/*
	 * The trace is in the order the agent took its records: a thread's last
	 * totals come at the first reading after its exit was taken, and never
	 * again (the program sleeps through two more readings before it exits)
	 */
	{
		struct tid_calls *dead = calloc(c->n + 1, sizeof(*dead));
		size_t ndead = 0;

		REQUIRE(dead, "out of memory");
		for (size_t i = 0; i < c->n; i++) {
			const struct sb_hdr *h = c->recs[i];
			struct tid_calls key = { .tid = h->tid }, *at;

			if (h->type == SB_EV_THREAD_EXIT && h->tid != (uint32_t)churn_pid) {
				size_t k = ndead++;

				/* insertion keeps it sorted by tid: the reports look it up */
				while (k > 0 && dead[k - 1].tid > h->tid) {
					dead[k] = dead[k - 1];
					k--;
				}
				dead[k] = key;
				continue;
			}
			if (h->type != SB_REC_ALLOC_STATS || h->tid == (uint32_t)churn_pid)
				continue;
			at = bsearch(&key, dead, ndead, sizeof(*dead), cmp_tid);
			/* calls: how many readings reported it after its exit */
			if (at && ++at->calls == 2)
				stale++;
		}
		free(dead);
	}
	CHECK(!stale, "allocator state of %llu exited threads reported by two readings after "
	      "their exit (never freed)", (unsigned long long)stale);
	qsort(seen, nseen, sizeof(*seen), cmp_u32);
	for (size_t i = 0; i < nkids; i++)
		found += bsearch(&kids[i], seen, nseen, sizeof(*seen), cmp_u32) != NULL;
	CHECK(nkids == 3000 && found == nkids, "the allocator calls of %zu of %zu churned threads "
	      "are in the trace (each made one malloc)", found, nkids);
	/*
	 * The guard (measuring only, as this capture's limit is 0) counted the
	 * calls of the threads that exited inside its windows too: every call,
	 * as the program lets it start first (1% spared for a loaded machine).
	 */
	{
		uint64_t all = calls_in_trace(c), seen = guard_calls_seen(c);

		CHECK(all >= 3000 && seen <= all && seen >= all - all / 100, "the guard counted %llu "
		      "allocator calls, the trace has %llu", (unsigned long long)seen,
		      (unsigned long long)all);
	}
	free(kids);
	free(seen);
}

/*
 * With --no-children, nothing about the forked children: their own events,
 * threads, steps, allocations (test_kids: what is recorded of them by default)
 */
static void t_fork_children_untraced(void)
{
	struct cap *c;
	pid_t pid, kids[16];
	int nkids = 0;
	size_t about_kid = 0, kid_steps = 0, own_steps = 0, kid_threads = 0, kid_allocs = 0;
	const char *p;

	NEED_BPF();
	no_children = true;
	c = trace_threads("fork", "3", &pid);
	no_children = false;
	REQUIRE(c, "cannot run %s (build it: make test-bin)", prog_path("sbthreads"));
	REQUIRE(c->rc == 0, "capture failed to start");
	p = strstr(c->out, "child_pids=");
	REQUIRE(p, "sbthreads: %s", c->out);
	for (p += strlen("child_pids="); *p && nkids < 16; p++) {
		kids[nkids++] = (pid_t)strtol(p, (char **)&p, 10);
		if (*p != ',')
			break;
	}
	REQUIRE(nkids == 3, "sbthreads forked %d children: %s", nkids, c->out);
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_hdr *h = c->recs[i];
		bool kid = false;

		for (int k = 0; k < nkids; k++)
			kid |= h->pid == (uint32_t)kids[k];
		/* a runslice is about any task that ran while a target thread waited: a child may */
		if (kid && h->type != SB_EV_RUNSLICE && h->type <= SB_EV_KERNEL_MAX)
			about_kid++;
		if (h->type == SB_EV_STEP) {
			uint64_t s = ((const struct sb_step *)h)->step;

			if (s >= 7000 && s < 7003)
				kid_steps++;
			if (s >= 1000 && s < 1003 && h->pid == (uint32_t)pid)
				own_steps++;
		}
		if (h->type == SB_EV_THREAD_NEW) {
			const struct sb_thread *t = (const void *)h;

			for (int k = 0; k < nkids; k++)
				if (t->h.tid == (uint32_t)kids[k] || !strcmp(t->comm, "sbt-child-thr"))
					kid_threads++;
		}
		if (h->type == SB_EV_ALLOC && ((const struct sb_alloc *)h)->size == 66666)
			kid_allocs++;
		if (h->type == SB_EV_RENAME && !strncmp(((const struct sb_rename *)h)->newcomm, "sbt-child", 9))
			about_kid++;
	}
	CHECK(own_steps == 3, "the parent's 3 steps: saw %zu (is the capture working?)", own_steps);
	CHECK(about_kid == 0, "%zu records about the children", about_kid);
	CHECK(kid_steps == 0, "%zu step marks of the children", kid_steps);
	CHECK(kid_threads == 0, "%zu thread_new records for the children or their threads", kid_threads);
	CHECK(kid_allocs == 0, "%zu allocator events of the children", kid_allocs);
	free_cap(c);
}

/* ---- PID reuse ---- */

static const char *stepblame_path(void)
{
	static char path[512];
	const char *s = getenv("STEPBLAME"), *b = getenv("BUILD");

	if (s)
		return s;
	snprintf(path, sizeof(path), "%s/stepblame", b ? b : "build");
	return path;
}

/* make pidfd_open fail with ENOSYS, as on kernels before 5.3 */
static int deny_pidfd_open(void)
{
#ifdef SYS_pidfd_open
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pidfd_open, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
#else
	return 0;
#endif
}

static pid_t sleeper(void)
{
	pid_t p = fork();

	if (p == 0) {
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	return p;
}

/*
 * A new sleeper with PID want: clone3 with set_tid (Linux 5.5, CAP_SYS_ADMIN)
 * asks for exactly that PID; else ns_last_pid, racing every other fork on the
 * machine. -1 if neither worked.
 */
static pid_t sleeper_at(pid_t want)
{
#ifdef SYS_clone3
	for (int tries = 0; tries < 50; tries++) {
		struct {
			uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size,
				tls, set_tid, set_tid_size, cgroup;
		} args = { .exit_signal = SIGCHLD, .set_tid = (uintptr_t)&want, .set_tid_size = 1 };
		pid_t p = (pid_t)syscall(SYS_clone3, &args, sizeof(args));

		if (p == 0) {
			execl("/bin/sleep", "sleep", "30", (char *)NULL);
			_exit(127);
		}
		if (p == want)
			return p;
		if (p > 0) {
			kill(p, SIGKILL);
			waitpid(p, NULL, 0);
		}
		if (p < 0 && errno != EEXIST)
			break; /* no clone3 or no set_tid here: ns_last_pid below */
		usleep(1000);
	}
#endif
	for (int tries = 0; tries < 50; tries++) {
		char buf[32];
		int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
		pid_t p;

		if (fd < 0)
			return -1;
		snprintf(buf, sizeof(buf), "%d", (int)want - 1);
		if (write(fd, buf, strlen(buf)) < 0) {
			close(fd);
			return -1;
		}
		close(fd);
		p = sleeper();
		if (p == want)
			return p;
		kill(p, SIGKILL);
		waitpid(p, NULL, 0);
	}
	return -1;
}

static void t_pid_reused(void)
{
	char tmpl[] = "/tmp/sbfaults.XXXXXX", out[512], err_path[600], buf[8192];
	int errfd, status, n;
	pid_t target, agent, again = -1;
	uint64_t t0;
	struct stat st;

	NEED_BPF();
	if (access(stepblame_path(), X_OK))
		SKIP("no stepblame binary at %s", stepblame_path());
	if (access("/proc/sys/kernel/ns_last_pid", W_OK))
		SKIP("cannot choose the next PID (/proc/sys/kernel/ns_last_pid not writable)");
	REQUIRE(mkdtemp(tmpl), "mkdtemp");
	snprintf(out, sizeof(out), "%s/t.sbt", tmpl);
	snprintf(err_path, sizeof(err_path), "%s/err", tmpl);
	errfd = open(err_path, O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0600);
	REQUIRE(errfd >= 0, "open %s", err_path);
	target = sleeper();
	agent = fork();
	if (agent == 0) {
		char pid[16];

		snprintf(pid, sizeof(pid), "%d", (int)target);
		dup2(errfd, 2);
		if (deny_pidfd_open())
			_exit(120);
		execl(stepblame_path(), "stepblame", "record", "-p", pid, "-d", "30", "--no-gpu",
		      "-o", out, (char *)NULL);
		_exit(127);
	}
	/* attached: the agent says so */
	t0 = mono_ns();
	for (;;) {
		n = pread(errfd, buf, sizeof(buf) - 1, 0);
		buf[n > 0 ? n : 0] = 0;
		if (strstr(buf, "attached") || mono_ns() - t0 > 15000000000ull ||
		    waitpid(agent, &status, WNOHANG) == agent)
			break;
		usleep(50000);
	}
	if (!strstr(buf, "attached")) {
		kill(agent, SIGKILL);
		kill(target, SIGKILL);
		waitpid(agent, NULL, 0);
		waitpid(target, NULL, 0);
		close(errfd);
		unlink(err_path);
		rmdir(tmpl);
		REQUIRE(0, "the capture did not start: %s", buf);
	}
	/* while the agent does not look: the target goes, another process takes its PID */
	kill(agent, SIGSTOP);
	kill(target, SIGKILL);
	waitpid(target, NULL, 0);
	again = sleeper_at(target);
	kill(agent, SIGCONT);
	if (again < 0) {
		char partial[600];

		kill(agent, SIGTERM);
		waitpid(agent, NULL, 0);
		close(errfd);
		unlink(out);
		unlink(err_path);
		snprintf(partial, sizeof(partial), "rm -f %s/t.sbt.partial.*", tmpl);
		(void)!system(partial);
		rmdir(tmpl);
		SKIP("could not give PID %d to a new process (other forks won the race)", (int)target);
	}
	t0 = mono_ns();
	while (waitpid(agent, &status, WNOHANG) == 0 && mono_ns() - t0 < 5000000000ull)
		usleep(20000);
	if (mono_ns() - t0 >= 5000000000ull) {
		kill(agent, SIGKILL);
		waitpid(agent, &status, 0);
		CHECK(0, "the capture went on 5 s after PID %d was reused", (int)target);
	} else {
		n = pread(errfd, buf, sizeof(buf) - 1, 0);
		buf[n > 0 ? n : 0] = 0;
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "record exited 0x%x: %s", status, buf);
		CHECK(strstr(buf, "belongs to another process"), "no note on the reused PID: %s", buf);
		CHECK(!stat(out, &st) && st.st_size > 0, "no complete trace %s", out);
	}
	kill(again, SIGKILL);
	waitpid(again, NULL, 0);
	close(errfd);
	unlink(out);
	unlink(err_path);
	rmdir(tmpl);
}

/* ---- a hostile trainer shrinks its GPU channel under the agent ---- */

/*
 * The channel is a file the trainer's user owns: it may truncate it while the
 * agent (root) has it mapped. Touching a mapped page past the end of a file is
 * SIGBUS; the agent must take that as a broken channel, not die of it.
 */
static void t_channel_truncated_by_trainer(void)
{
	int up[2], down[2], status;
	pid_t producer, agent;
	char c = 0;

	if (pipe(up) || pipe(down))
		SKIP("pipe");
	producer = fork();
	if (producer == 0) {
		struct sbc_producer *p = sbc_create("hostile", 64);
		struct sb_gpu g = { .h.ts = 1, .end_ns = 2 };

		if (!p)
			_exit(1);
		if (write(up[1], "c", 1) != 1)
			_exit(1);
		while (!sbc_active(p))
			usleep(1000);
		for (int i = 0; i < 20; i++)
			sbc_emit(p, &g);
		/* let the agent drain those, then pull the rug */
		usleep(100000);
		if (truncate(sbc_path(p), 0))
			_exit(2);
		if (write(up[1], "t", 1) != 1)
			_exit(1);
		(void)!read(down[0], &c, 1); /* until the test is done */
		_exit(0);
	}
	REQUIRE(read(up[0], &c, 1) == 1 && c == 'c', "producer did not start");
	agent = fork();
	if (agent == 0) {
		char err[256];
		struct sbc_reader *r = sbc_attach(producer, err, sizeof(err));
		uint64_t t0 = mono_ns();
		int n = 0, rc = 0, got = 0;

		if (!r || sbc_set_enabled(r, true))
			_exit(10);
		/* drain every 10 ms for a second: across the truncation */
		while (mono_ns() - t0 < 1000000000ull) {
			sbc_heartbeat(r);
			rc = sbc_drain(r, mem_sink_count, &n);
			if (rc > 0)
				got += rc;
			if (rc < 0)
				break;
			usleep(10000);
		}
		uint64_t a, b, d;

		sbc_counters(r, &a, &b, &d);
		sbc_detach(r);
		_exit(got == 20 && rc < 0 ? 0 : got == 20 ? 11 : 12);
	}
	waitpid(agent, &status, 0);
	kill(producer, SIGKILL);
	waitpid(producer, NULL, 0);
	{
		char pat[64];
		glob_t g;

		/* killed, it could not unlink its channel */
		snprintf(pat, sizeof(pat), SBC_DIR "/" SBC_NAME_PREFIX "%d-*" SBC_NAME_SUFFIX,
			 (int)producer);
		if (!glob(pat, 0, NULL, &g)) {
			for (size_t i = 0; i < g.gl_pathc; i++)
				unlink(g.gl_pathv[i]);
			globfree(&g);
		}
	}
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
	CHECK(!WIFSIGNALED(status), "the agent died of signal %d (%s) when the trainer truncated "
	      "its channel", WIFSIGNALED(status) ? WTERMSIG(status) : 0,
	      WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "");
	CHECK(!WIFEXITED(status) || WEXITSTATUS(status) != 10, "agent could not attach");
	CHECK(!WIFEXITED(status) || WEXITSTATUS(status) != 12, "the 20 records before the truncation were not all drained");
	CHECK(!WIFEXITED(status) || WEXITSTATUS(status) != 11, "sbc_drain did not report the broken channel");
}

int main(void)
{
	RUN(t_thousands_of_threads);
	RUN(t_thread_churn);
	RUN(t_dead_threads_alloc_state);
	if (churn)
		free_cap(churn);
	RUN(t_fork_children_untraced);
	RUN(t_pid_reused);
	RUN(t_channel_truncated_by_trainer);
	return test_summary();
}
