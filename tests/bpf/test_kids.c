// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The target's process tree, for real: tests/progs/sbkids forks workers that
 * feed its main thread through a pipe, some before the tracer attaches and
 * some after; Python's multiprocessing spawns children. Root only.
 *
 *  - children_followed: the workers' own scheduler records are there (those
 *    found at attach and those forked after), each with a thread record
 *    naming its parent; their wakeups of the main thread name them.
 *  - no_children: with --no-children nothing of the workers is recorded as a
 *    followed thread.
 *  - chain_into_child: one worker spins on its CPU before each write: the
 *    main thread's blocked time is blamed on "child process 1 of
 *    kids-main[PID]", which was on a CPU for most of it (what a CPU hog
 *    beside the test takes is preemption, counted apart).
 *  - spawn_named: the children of multiprocessing's spawn method are named
 *    "multiprocessing child N" from their command line.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "test.h"
#include "capture.h"
#include "capture/collect.h"
#include "engine/engine.h"
#include "report/report.h"
#include "base/util.h"

/* start argv with stdin on a pipe (*go); the child waits for a byte there */
static pid_t spawn_go(char *const argv[], int *go)
{
	int p[2];
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(p[0], 0);
		close(p[0]);
		close(p[1]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[0]);
	*go = p[1];
	return pid;
}

/* trace_tree: with the allocator probes; how the target exited */
static bool tree_alloc;
static int tree_status;

/* capture argv from before its go byte until it exits; NULL if it could not run */
static struct cap *trace_tree(char *const argv[], bool no_children, pid_t *target)
{
	struct cap *c = calloc(1, sizeof(*c));
	pthread_t t;
	int go, status;
	pid_t pid;

	if (!c)
		abort();
	pid = spawn_go(argv, &go);
	if (pid < 0) {
		free(c);
		return NULL;
	}
	/* the workers forked before the go byte are there when the capture starts */
	usleep(200000);
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->o.probe.pid = pid;
	c->o.probe.ring_bytes = 16 << 20;
	c->o.probe.wake_bytes = 64 << 10;
	c->o.probe.no_children = no_children;
	c->o.probe.no_alloc = !tree_alloc;
	c->o.probe.alloc_min_ns = 10000; /* the command line's default */
	c->o.duration_ns = 60000000000ll;
	c->o.agent_cpu = -2;
	c->o.quiet = true;
	c->o.no_gpu = true;
	cap_start(c, &t);
	if (write(go, "g", 1) != 1)
		kill(pid, SIGKILL);
	close(go);
	waitpid(pid, &status, 0);
	tree_status = status;
	pthread_join(t, NULL);
	*target = pid;
	return c;
}

/* the thread record of process pid's main thread holding needle; NULL if none */
static const struct sb_text *thread_text(struct cap *c, uint32_t pid, const char *needle)
{
	const struct sb_text *found = NULL;

	for (size_t i = 0; i < c->n; i++) {
		const struct sb_text *t = (const void *)c->recs[i];

		if (t->h.type == SB_REC_THREAD && t->h.pid == pid && t->h.tid == pid &&
		    memmem(t->text, t->len, needle, strlen(needle)))
			found = t;
	}
	return found;
}

/* the processes other than target whose own scheduler records were captured */
static int recorded_procs(struct cap *c, uint32_t target, uint32_t *out, int max)
{
	int n = 0;

	for (size_t i = 0; i < c->n; i++) {
		const struct sb_hdr *h = c->recs[i];
		bool own = h->type == SB_EV_SWITCH_IN || h->type == SB_EV_SWITCH_OUT ||
			   h->type == SB_EV_THREAD_NEW || h->type == SB_EV_THREAD_EXIT ||
			   h->type == SB_EV_WAKEUP || h->type == SB_EV_FAULT ||
			   h->type == SB_EV_FAULT_RUN;
		int k;

		if (!own || h->pid == target)
			continue;
		for (k = 0; k < n && out[k] != h->pid; k++)
			;
		if (k == n && n < max)
			out[n++] = h->pid;
	}
	return n;
}

static struct engine *feed(struct cap *c)
{
	struct engine_opts o = { 0 };
	char err[256];
	struct engine *e = engine_new(&o, err, sizeof(err));

	if (!e)
		return NULL;
	for (size_t i = 0; i < c->n; i++)
		engine_feed(e, c->recs[i]);
	engine_finish(e);
	return e;
}

#define KIDS_OR_SKIP() \
	do { \
		NEED_BPF(); \
		REQUIRE(!access(prog_path("sbkids"), X_OK), "no %s (make test-bin)", \
			prog_path("sbkids")); \
	} while (0)

static void t_children_followed(void)
{
	/* workers that live about 240 ms: the agent reads their command line while they do */
	char *argv[] = { (char *)prog_path("sbkids"), "1", "2", "4", "30", "30", NULL };
	uint32_t procs[16], wakers[16];
	int np, nw = 0, news = 0;
	struct cap *c;
	pid_t pid;

	KIDS_OR_SKIP();
	c = trace_tree(argv, false, &pid);
	REQUIRE(c && c->rc == 0, "capture failed to start");
	np = recorded_procs(c, (uint32_t)pid, procs, 16);
	CHECK(np == 3, "%d worker processes recorded, 3 forked", np);
	for (int i = 0; i < np; i++) {
		char needle[32];

		snprintf(needle, sizeof(needle), "ppid=%d\n", (int)pid);
		CHECK(thread_text(c, procs[i], needle), "no thread record of process %u with %s",
		      procs[i], needle);
		CHECK(thread_text(c, procs[i], "cmdline=") &&
		      thread_text(c, procs[i], "sbkids 1 2 4 30 30"),
		      "no command line in the thread record of process %u", procs[i]);
	}
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_hdr *h = c->recs[i];

		if (h->type == SB_EV_THREAD_NEW) {
			const struct sb_thread *t = (const void *)h;

			if (t->parent_pid == (uint32_t)pid && h->pid != (uint32_t)pid) {
				news++;
				CHECK(h->tid == h->pid, "a new process's first thread %u of %u", h->tid,
				      h->pid);
			}
		}
		if (h->type == SB_EV_WAKEUP && h->pid == (uint32_t)pid) {
			const struct sb_wakeup *w = (const void *)h;
			int k;

			for (k = 0; k < nw && wakers[k] != w->waker_pid; k++)
				;
			if (k == nw && nw < 16 && w->waker_pid != (uint32_t)pid)
				wakers[nw++] = w->waker_pid;
		}
	}
	/* one worker was there at attach: found in /proc, not forked under the probes */
	CHECK(news == 2, "%d thread_new records of new processes, 2 forked after attach", news);
	{
		int named = 0;

		for (int k = 0; k < nw; k++)
			for (int i = 0; i < np; i++)
				named += wakers[k] == procs[i];
		CHECK(named >= 2, "wakeups of kids-main name %d of the workers as wakers", named);
	}
	free_cap(c);
}

static void t_no_children(void)
{
	char *argv[] = { (char *)prog_path("sbkids"), "1", "2", "4", "5", "5", NULL };
	uint32_t procs[16];
	struct cap *c;
	pid_t pid;
	size_t own = 0, threads = 0;

	KIDS_OR_SKIP();
	c = trace_tree(argv, true, &pid);
	REQUIRE(c && c->rc == 0, "capture failed to start");
	CHECK(recorded_procs(c, (uint32_t)pid, procs, 16) == 0,
	      "scheduler records of process %u under --no-children", procs[0]);
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_hdr *h = c->recs[i];

		own += h->pid == (uint32_t)pid && h->type == SB_EV_SWITCH_IN;
		threads += h->type == SB_REC_THREAD && h->pid != (uint32_t)pid;
	}
	/* the target itself still is */
	CHECK(own > 0, "no switch_in of the target");
	CHECK(threads == 0, "%zu thread records of other processes", threads);
	free_cap(c);
}

/*
 * The allocator probes in the children: two workers (one there at attach,
 * one forked after) free 64 MiB each round (a slow call) and make 1000
 * small calls (a burst); the main thread marks steps and calls no allocator
 * in its loop. Each worker's calls are recorded with its own pid, each once
 * (its 64 MiB mallocs: at most one a round); no worker dies of a breakpoint
 * it inherited.
 */
#define ALLOC_ROUNDS 10

static void t_alloc_in_children(void)
{
	/* workers that live over a second: the agent reads their fast calls' totals meanwhile */
	char *argv[] = { (char *)prog_path("sbkids"), "1", "1", "10", "5", "150", "64", NULL };
	uint32_t procs[16];
	int np, slow[16] = { 0 }, bursts[16] = { 0 }, stats[16] = { 0 };
	bool dup = false, mislabeled = false;
	struct cap *c;
	pid_t pid;

	KIDS_OR_SKIP();
	tree_alloc = true;
	c = trace_tree(argv, false, &pid);
	tree_alloc = false;
	REQUIRE(c && c->rc == 0, "capture failed to start");
	CHECK(WIFEXITED(tree_status) && WEXITSTATUS(tree_status) == 0,
	      "sbkids exited with status %#x (a worker killed?)", tree_status);
	np = recorded_procs(c, (uint32_t)pid, procs, 16);
	REQUIRE(np == 2, "%d worker processes recorded, 2 forked", np);
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_hdr *h = c->recs[i];

		if (h->type != SB_EV_ALLOC && h->type != SB_EV_ALLOC_BURST &&
		    h->type != SB_REC_ALLOC_STATS)
			continue;
		for (int k = 0; k < np; k++) {
			/* a worker is single-threaded: its tid is its pid */
			if (h->tid != procs[k])
				continue;
			mislabeled |= h->pid != procs[k];
			stats[k] += h->type == SB_REC_ALLOC_STATS;
			if (h->type == SB_REC_ALLOC_STATS)
				continue;
			if (h->type == SB_EV_ALLOC_BURST) {
				bursts[k]++;
				continue;
			}
			const struct sb_alloc *a = (const void *)h;

			/* one malloc of 64 MiB a round */
			if (a->fn == SB_FN_MALLOC && a->size == 64 << 20)
				slow[k]++;

			for (size_t j = i + 1; j < c->n; j++) {
				const struct sb_alloc *b = (const void *)c->recs[j];

				if (b->h.type == SB_EV_ALLOC && b->h.tid == a->h.tid &&
				    b->start_ns == a->start_ns)
					dup = true;
			}
		}
	}
	CHECK(!mislabeled, "a worker's allocator record (or alloc_stats) carries another pid");
	{
		int st = 0;

		for (int k = 0; k < np; k++)
			st += stats[k];
		/* read once a second: a worker that lived past one reading has its own */
		CHECK(st > 0, "no alloc_stats record of a worker");
	}
	CHECK(!dup, "a worker's allocator call recorded twice");
	for (int k = 0; k < np; k++) {
		CHECK(slow[k] + bursts[k] > 0, "worker %u: no allocator records (%d slow, %d bursts)",
		      procs[k], slow[k], bursts[k]);
		CHECK(slow[k] <= ALLOC_ROUNDS, "worker %u: %d mallocs of 64 MiB recorded, %d made",
		      procs[k], slow[k], ALLOC_ROUNDS);
	}
	free_cap(c);
}

/* under --no-children the forked worker inherits the breakpoints, not the probes: it runs on */
static void t_alloc_no_children(void)
{
	char *argv[] = { (char *)prog_path("sbkids"), "0", "1", "4", "5", "5", "64", NULL };
	size_t theirs = 0;
	struct cap *c;
	pid_t pid;

	KIDS_OR_SKIP();
	tree_alloc = true;
	c = trace_tree(argv, true, &pid);
	tree_alloc = false;
	REQUIRE(c && c->rc == 0, "capture failed to start");
	CHECK(WIFEXITED(tree_status) && WEXITSTATUS(tree_status) == 0,
	      "sbkids exited with status %#x (the worker killed?)", tree_status);
	for (size_t i = 0; i < c->n; i++)
		theirs += (c->recs[i]->type == SB_EV_ALLOC || c->recs[i]->type == SB_EV_ALLOC_BURST) &&
			  c->recs[i]->tid != (uint32_t)pid;
	CHECK(theirs == 0, "%zu allocator records of the worker under --no-children", theirs);
	free_cap(c);
}

struct keyed {
	uint64_t key;
	size_t i;
};

static int keyed_cmp(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/*
 * In time order (a runslice and a scheduler run at their start), every
 * switch-out of a followed thread ends in its switch-in, a scheduler run, or
 * a slice of its own (a switch-in the kernel did not trace: schemas/trace.md,
 * runslice), never in another switch-out or its exit. The number that did
 * not; the first into what.
 */
static int unended_trips(struct cap *c, char *what, size_t n)
{
	struct keyed *k = calloc(c->n ? c->n : 1, sizeof(*k));
	struct { uint32_t tid; uint64_t out; } open[256];
	int nopen = 0, bad = 0;

	if (!k)
		abort();
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_hdr *h = c->recs[i];

		k[i].i = i;
		k[i].key = h->type == SB_EV_RUNSLICE ? ((const struct sb_runslice *)h)->start_ns :
			   h->type == SB_EV_SCHED_RUN ? ((const struct sb_sched_run *)h)->start_ns :
			   h->ts;
	}
	qsort(k, c->n, sizeof(*k), keyed_cmp);
	for (size_t j = 0; j < c->n; j++) {
		const struct sb_hdr *h = c->recs[k[j].i];
		int o = -1;

		if (h->type != SB_EV_SWITCH_OUT && h->type != SB_EV_SWITCH_IN &&
		    h->type != SB_EV_SCHED_RUN && h->type != SB_EV_RUNSLICE &&
		    h->type != SB_EV_THREAD_EXIT)
			continue;
		for (int q = 0; q < nopen; q++)
			if (open[q].tid == h->tid)
				o = q;
		if (o >= 0 && (h->type == SB_EV_SWITCH_OUT || h->type == SB_EV_THREAD_EXIT)) {
			if (!bad++)
				snprintf(what, n, "thread %u switched out at %llu, then %s at %llu with no "
					 "switch-in", h->tid, (unsigned long long)open[o].out,
					 h->type == SB_EV_THREAD_EXIT ? "exited" : "switched out",
					 (unsigned long long)h->ts);
		}
		if (o >= 0)
			open[o] = open[--nopen];
		if (h->type == SB_EV_SWITCH_OUT && nopen < 256)
			open[nopen++] = (typeof(open[0])){ .tid = h->tid, .out = h->ts };
	}
	free(k);
	return bad;
}

/*
 * On a failure: the worker's own scheduler records, and the runslices of
 * its CPUs, in order (what the engine had to go on), the first 400 lines
 */
static void worker_records(struct cap *c, uint32_t worker)
{
	uint64_t t0 = 0;
	int lines = 0;

	for (size_t i = 0; i < c->n && lines < 400; i++) {
		const struct sb_hdr *h = c->recs[i];

		if (!t0)
			t0 = h->ts;
		if (h->type == SB_EV_RUNSLICE) {
			const struct sb_runslice *r = (const void *)h;

			printf("#   %9.3f ms cpu %u runslice %u %.16s from %.3f\n", (int64_t)(h->ts - t0) / 1e6,
			       h->cpu, h->tid, r->comm, ((int64_t)r->start_ns - (int64_t)t0) / 1e6);
		} else if (h->tid != worker) {
			continue;
		} else if (h->type == SB_EV_SWITCH_OUT) {
			printf("#   %9.3f ms cpu %u switch_out state %u\n", (int64_t)(h->ts - t0) / 1e6, h->cpu,
			       ((const struct sb_switch_out *)h)->state);
		} else if (h->type == SB_EV_SWITCH_IN) {
			printf("#   %9.3f ms cpu %u switch_in\n", (int64_t)(h->ts - t0) / 1e6, h->cpu);
		} else if (h->type == SB_EV_MIGRATE) {
			const struct sb_migrate *m = (const void *)h;

			printf("#   %9.3f ms migrate %u -> %u\n", (int64_t)(h->ts - t0) / 1e6, m->orig_cpu,
			       m->dest_cpu);
		} else if (h->type == SB_EV_SCHED_RUN) {
			const struct sb_sched_run *r = (const void *)h;

			printf("#   %9.3f ms cpu %u sched_run from %.3f, %u preempts, %u sleeps\n",
			       (int64_t)(h->ts - t0) / 1e6, h->cpu, ((int64_t)r->start_ns - (int64_t)t0) / 1e6,
			       r->preempts, r->sleeps);
		} else if (h->type == SB_EV_WAKEUP) {
			printf("#   %9.3f ms cpu %u wakeup\n", (int64_t)(h->ts - t0) / 1e6, h->cpu);
		} else {
			continue;
		}
		lines++;
	}
}

static void t_chain_into_child(void)
{
	/* one worker forked after attach: 6 rounds of 60 ms on its CPU, then a byte */
	char *argv[] = { (char *)prog_path("sbkids"), "0", "1", "6", "60", "0", NULL };
	struct eng_act sum = { 0 };
	struct engine *e;
	struct cap *c;
	char name[128], want[64], *text = NULL;
	size_t textlen = 0;
	uint32_t worker = 0;
	pid_t pid;

	KIDS_OR_SKIP();
	c = trace_tree(argv, false, &pid);
	REQUIRE(c && c->rc == 0, "capture failed to start");
	{
		uint32_t procs[4];

		REQUIRE(recorded_procs(c, (uint32_t)pid, procs, 4) == 1, "the worker not recorded");
		worker = procs[0];
	}
	e = feed(c);
	REQUIRE(e, "engine_new failed");
	snprintf(want, sizeof(want), "child process 1 of kids-main[%d]", (int)pid);
	CHECK(engine_process_name(e, worker, name, sizeof(name)) && !strcmp(name, want),
	      "worker %u named '%s', want '%s'", worker, name, want);
	for (uint64_t i = engine_first_step(e); i < engine_nsteps(e); i++) {
		const struct eng_step *s = engine_step(e, i);

		for (uint32_t b = 0; b < s->nblame; b++) {
			const struct eng_blame *x = &s->blame[b];

			if (x->cause != ENG_BLOCKED || !x->has_who || x->who.pid != worker ||
			    x->who.via_tid)
				continue;
			for (int k = 0; k < ENG_NACT; k++)
				sum.ns[k] += x->who.act.ns[k];
		}
	}
	/*
	 * 5 complete steps, each a wait for 60 ms of the worker's CPU time: what
	 * it did then was being on a CPU, or preempted (the machine is busy);
	 * never asleep or in I/O for more than a sliver.
	 */
	uint64_t cpu = sum.ns[ENG_ACT_ON_CPU], other = sum.ns[ENG_ACT_BLOCKED] + sum.ns[ENG_ACT_IO];

	CHECK(cpu >= 5 * 30000000ull, "the worker on CPU %llu ns during the waits, want most of "
	      "5 x 60 ms (preempted %llu, runnable %llu, asleep %llu, io %llu)",
	      (unsigned long long)cpu, (unsigned long long)sum.ns[ENG_ACT_PREEMPTED],
	      (unsigned long long)sum.ns[ENG_ACT_RUNNABLE],
	      (unsigned long long)sum.ns[ENG_ACT_BLOCKED], (unsigned long long)sum.ns[ENG_ACT_IO]);
	CHECK(other * 10 < cpu, "the worker asleep or in I/O %llu ns, on CPU %llu ns",
	      (unsigned long long)other, (unsigned long long)cpu);
	if (cpu < 5 * 30000000ull || other * 10 >= cpu)
		worker_records(c, worker);
	{
		char what[160] = "";
		int bad = unended_trips(c, what, sizeof(what));

		CHECK(!bad, "%d switch-outs ended in no switch-in, run or slice of the thread's "
		      "own: %s", bad, what);
	}
	/*
	 * The text report says it on a tail line whose top culprit is the
	 * worker itself (under a CPU hog, the hog that preempted the worker
	 * may be the top culprit instead: "itself preempted by")
	 */
	{
		FILE *f = open_memstream(&text, &textlen);
		char pidpart[160];

		report_text(e, f);
		fclose(f);
		/* its share of the wait may come between, where others had a part: "(59.6 ms of 163 ms ...)" */
		snprintf(pidpart, sizeof(pidpart), "waited for %s (pid %u)", want, worker);
		for (char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
			size_t len = strcspn(l, "\n");
			char *w = memmem(l, len, "waited for ", 11);
			char *p = memmem(l, len, pidpart, strlen(pidpart));

			if (!w || !memmem(l, len, "blocked +", 9) ||
			    memmem(l, len, "itself preempted by", 19))
				continue;
			CHECK(p && memmem(p, len - (size_t)(p - l), ", which was ", 12) &&
			      memmem(l, len, "on CPU", 6), "a blocked tail line: %.*s", (int)len, l);
		}
	}
	free(text);
	engine_free(e);
	free_cap(c);
}

static void t_spawn_named(void)
{
	static const char script[] =
		"import multiprocessing as mp, sys, time\n"
		"if __name__ == '__main__':\n"
		"    sys.stdin.read(1)\n"
		"    ctx = mp.get_context('spawn')\n"
		"    ps = [ctx.Process(target=time.sleep, args=(0.3,)) for i in range(2)]\n"
		"    [p.start() for p in ps]\n"
		"    [p.join() for p in ps]\n";
	char *argv[] = { "/usr/bin/python3", "-c", (char *)script, NULL };
	struct engine *e;
	struct cap *c;
	pid_t pid;
	int spawned = 0, named = 0;

	NEED_BPF();
	if (access(argv[0], X_OK))
		SKIP("no %s", argv[0]);
	c = trace_tree(argv, false, &pid);
	REQUIRE(c && c->rc == 0, "capture failed to start");
	e = feed(c);
	REQUIRE(e, "engine_new failed");
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_text *t = (const void *)c->recs[i];
		char name[128];

		if (t->h.type != SB_REC_THREAD || t->h.pid == (uint32_t)pid || t->h.pid != t->h.tid ||
		    !memmem(t->text, t->len, "spawn_main", 10))
			continue;
		spawned++;
		if (engine_process_name(e, t->h.pid, name, sizeof(name)) &&
		    !strncmp(name, "multiprocessing child ", 22))
			named++;
		else
			CHECK(0, "spawned process %u named '%s'", t->h.pid, name);
	}
	/* a thread record per exec of each child; both children seen */
	CHECK(spawned >= 2, "%d thread records with a spawn_main command line", spawned);
	CHECK(named == spawned, "%d of %d named as multiprocessing children", named, spawned);
	engine_free(e);
	free_cap(c);
}

/*
 * Spawned children (fork and exec of python3): the allocator probes attached
 * by pid at the fork stay through the exec; each child's bytearray of 64 MiB
 * is a malloc recorded with its pid. The child allocates a second after its
 * start: the agent attaches a child's probes when it reads its fork record, and
 * a busy machine's python starts fast enough to allocate before that
 * (docs/ARCHITECTURE.md, "Followed processes").
 */
static void t_alloc_in_spawned(void)
{
	static const char script[] =
		"import multiprocessing as mp, sys\n"
		"if __name__ == '__main__':\n"
		"    sys.stdin.read(1)\n"
		"    ctx = mp.get_context('spawn')\n"
		"    ps = [ctx.Process(target=exec, args=('import time; time.sleep(1); b = bytearray(64 << 20)',))\n"
		"          for i in range(2)]\n"
		"    [p.start() for p in ps]\n"
		"    [p.join() for p in ps]\n"
		"    sys.exit(any(p.exitcode for p in ps))\n";
	char *argv[] = { "/usr/bin/python3", "-c", (char *)script, NULL };
	uint32_t kids[8];
	int nk = 0, big = 0;
	struct cap *c;
	pid_t pid;

	NEED_BPF();
	if (access(argv[0], X_OK))
		SKIP("no %s", argv[0]);
	tree_alloc = true;
	c = trace_tree(argv, false, &pid);
	tree_alloc = false;
	REQUIRE(c && c->rc == 0, "capture failed to start");
	CHECK(WIFEXITED(tree_status) && WEXITSTATUS(tree_status) == 0, "python3 exited %#x",
	      tree_status);
	/* the children (the workers, and multiprocessing's resource tracker) by their fork */
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_thread *t = (const void *)c->recs[i];
		int k;

		if (t->h.type != SB_EV_THREAD_NEW || t->h.pid == (uint32_t)pid ||
		    t->parent_pid != (uint32_t)pid || t->h.tid != t->h.pid)
			continue;
		for (k = 0; k < nk && kids[k] != t->h.pid; k++)
			;
		if (k == nk && nk < 8)
			kids[nk++] = t->h.pid;
	}
	REQUIRE(nk >= 2, "%d children forked", nk);
	for (int k = 0; k < nk; k++) {
		bool found = false;

		for (size_t i = 0; i < c->n && !found; i++) {
			const struct sb_alloc *a = (const void *)c->recs[i];

			found = a->h.type == SB_EV_ALLOC && a->h.pid == kids[k] &&
				a->fn == SB_FN_MALLOC && a->size >= 64 << 20;
		}
		big += found;
	}
	/* both workers, after their exec (the tracker allocates no 64 MiB) */
	CHECK(big == 2, "%d of the %d children made a malloc of 64 MiB that was recorded", big, nk);
	free_cap(c);
}

/*
 * A child that execs a static program (tests/progs/sbstatic, run as prog)
 * maps no C library: the allocator probes on the target's never see its
 * calls, and the capture says so, once, naming it as want ("NAME["). A
 * dynamic child (sleep) is not named. No note holds a control character.
 */
static void lib_missing_said(const char *prog, const char *want)
{
	char script[PATH_MAX + 64];
	char *argv[] = { "/bin/sh", "-c", script, NULL };
	int said = 0, other = 0, raw = 0;
	struct cap *c;
	pid_t pid;

	snprintf(script, sizeof(script), "read x; \"%s\" 4000 & /bin/sleep 4; wait", prog);
	tree_alloc = true;
	c = trace_tree(argv, false, &pid);
	tree_alloc = false;
	REQUIRE(c && c->rc == 0, "capture failed to start");
	CHECK(WIFEXITED(tree_status) && WEXITSTATUS(tree_status) == 0, "sh exited %#x", tree_status);
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_text *t = (const void *)c->recs[i];

		if (t->h.type != SB_REC_NOTE)
			continue;
		for (uint32_t k = 0; k < t->len; k++)
			raw += (unsigned char)t->text[k] < 0x20 || t->text[k] == 0x7f;
		if (!memmem(t->text, t->len, "does not map", 12))
			continue;
		if (memmem(t->text, t->len, want, strlen(want)))
			said++;
		else
			other++;
		printf("# %.*s\n", (int)t->len, t->text);
	}
	CHECK(said == 1, "%d notes name the static child as %s", said, want);
	CHECK(other == 0, "%d notes name another process", other);
	CHECK(raw == 0, "%d control characters in the notes", raw);
	free_cap(c);
}

static void t_alloc_lib_missing_said(void)
{
	NEED_BPF();
	REQUIRE(!access(prog_path("sbstatic"), X_OK), "no %s (make test-bin)", prog_path("sbstatic"));
	lib_missing_said(prog_path("sbstatic"), "process sbstatic[");
}

/* the same program under a name with an escape sequence (its comm): the note shows '?' */
static void t_alloc_lib_missing_hostile_name(void)
{
	char dir[] = "/tmp/sbkids.XXXXXX", link[64], target[PATH_MAX];

	NEED_BPF();
	REQUIRE(realpath(prog_path("sbstatic"), target), "no %s (make test-bin)", prog_path("sbstatic"));
	REQUIRE(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	snprintf(link, sizeof(link), "%s/sb\033[1mx", dir);
	REQUIRE(!symlink(target, link), "symlink: %s", strerror(errno));
	lib_missing_said(link, "process sb?[1mx[");
	unlink(link);
	rmdir(dir);
}

int main(void)
{
	RUN(t_children_followed);
	RUN(t_no_children);
	RUN(t_alloc_in_children);
	RUN(t_alloc_lib_missing_said);
	RUN(t_alloc_lib_missing_hostile_name);
	RUN(t_alloc_no_children);
	RUN(t_alloc_in_spawned);
	RUN(t_chain_into_child);
	RUN(t_spawn_named);
	return test_summary();
}
