// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Real attach to a child whose behaviour is known exactly (tests/progs/sbwork),
 * asserting on the counts the probes record. Root only.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>

#include "test.h"
#include "capture.h"
#include "capture/collect.h"
#include "base/util.h"





static bool no_tracefs; /* raw tracepoints only */

static bool has_probe_record(struct cap *c, const char *text)
{
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_text *t = (const void *)c->recs[i];

		if (t->h.type == SB_REC_PROBE && t->id == 1 && t->len == strlen(text) &&
		    !memcmp(t->text, text, t->len))
			return true;
	}
	return false;
}


/*
 * Trace sbwork running args until it exits. before_go runs after attach and
 * before the go byte (to start a competitor).
 */
static struct cap *trace_work(char *const args[], uint64_t alloc_min_ns, pid_t *child)
{
	struct cap *c = calloc(1, sizeof(*c));

	if (!c)
		abort();
	c->o.probe.alloc_min_ns = alloc_min_ns;
	c->o.probe.no_tracefs = no_tracefs;
	if (cap_run_sbwork(c, args, child)) {
		free(c);
		return NULL;
	}
	return c;
}

static size_t count_type(struct cap *c, unsigned type, uint32_t tid)
{
	size_t n = 0;

	for (size_t i = 0; i < c->n; i++)
		if (c->recs[i]->type == type && (!tid || c->recs[i]->tid == tid))
			n++;
	return n;
}

/* page faults: fault records, and the faults of fault_run records */
static size_t count_faults(struct cap *c)
{
	size_t n = 0;

	for (size_t i = 0; i < c->n; i++)
		if (c->recs[i]->type == SB_EV_FAULT)
			n++;
		else if (c->recs[i]->type == SB_EV_FAULT_RUN)
			n += ((const struct sb_fault_run *)c->recs[i])->count;
	return n;
}

#define TRACE_OR_SKIP(c, ...) \
	do { \
		NEED_BPF(); \
		char *args_[] = { __VA_ARGS__, NULL }; \
		c = trace_work(args_, alloc_min, NULL); \
		REQUIRE(c, "cannot run %s (build it: make test-bin)", prog_path("sbwork")); \
		REQUIRE(c->rc == 0, "capture failed to start"); \
	} while (0)

static void t_malloc_exact(void)
{
	uint64_t alloc_min = 0; /* every call becomes an event */
	struct cap *c;
	size_t mallocs = 0, frees = 0;
	bool seen[50] = {};

	TRACE_OR_SKIP(c, "malloc", "50");
	uint32_t tid = tid_named(c, "sbw-main");

	REQUIRE(tid, "no rename to sbw-main seen");
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_alloc *a = (const void *)c->recs[i];

		if (a->h.type != SB_EV_ALLOC || a->h.tid != tid)
			continue;
		if (a->fn == SB_FN_MALLOC && a->size >= 100000 && a->size < 100050) {
			CHECK(!seen[a->size - 100000], "size %llu seen twice", a->size);
			seen[a->size - 100000] = true;
			CHECK(a->start_ns <= a->h.ts, "latency negative");
			CHECK(a->ptr != 0, "malloc returned NULL?");
			mallocs++;
		}
		if (a->fn == SB_FN_FREE)
			frees++;
	}
	CHECK(mallocs == 50, "saw %zu of 50 mallocs", mallocs);
	CHECK(frees >= 50, "saw %zu frees, want >= 50", frees);
	CHECK(c->res.end_reason == SBT_END_TARGET_EXIT, "capture ended with %d, not target exit",
	      c->res.end_reason);
	free_cap(c);
}

static void t_malloc_fast_counted(void)
{
	uint64_t alloc_min = 1000000000; /* nothing is slow: everything is only counted */
	struct cap *c;
	uint64_t calls = 0, frees = 0;

	TRACE_OR_SKIP(c, "malloc", "40");
	uint32_t tid = tid_named(c, "sbw-main");

	REQUIRE(tid, "no rename to sbw-main seen");
	CHECK(count_type(c, SB_EV_ALLOC, tid) == 0, "slow events despite a 1 s threshold");
	/* stats are cumulative snapshots: the last one of the thread counts */
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_alloc_stats *s = (const void *)c->recs[i];

		if (s->h.type == SB_REC_ALLOC_STATS && s->h.tid == tid) {
			calls = s->calls[SB_FN_MALLOC];
			frees = s->calls[SB_FN_FREE];
		}
	}
	CHECK(calls == 40, "thread counted %llu mallocs, want 40", (unsigned long long)calls);
	/* glibc frees a few of its own blocks (tcache, dtv) when the thread exits */
	CHECK(frees >= 40 && frees <= 48, "thread counted %llu frees, want 40..48",
	      (unsigned long long)frees);
	free_cap(c);
}

static void t_migrations(void)
{
	uint64_t alloc_min = 10000;
	struct cap *c;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP("needs two CPUs");
	TRACE_OR_SKIP(c, "migrate", "20");
	uint32_t tid = tid_named(c, "sbw-main");
	size_t n = 0, naff = 0;

	REQUIRE(tid, "no rename to sbw-main seen");
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_migrate *m = (const void *)c->recs[i];
		const struct sb_affinity *a = (const void *)c->recs[i];

		if (m->h.type == SB_EV_MIGRATE && m->h.tid == tid) {
			CHECK(m->orig_cpu != m->dest_cpu, "migration to the same CPU");
			n++;
		}
		if (a->h.type == SB_EV_AFFINITY && a->h.tid == tid) {
			CHECK(a->pid == 0 && a->ret == 0, "sched_setaffinity(%u) returned %lld", a->pid,
			      (long long)a->ret);
			CHECK(a->start_ns && a->start_ns <= a->h.ts, "call from %llu to %llu",
			      (unsigned long long)a->start_ns, (unsigned long long)a->h.ts);
			naff++;
		}
	}
	/* 20 forced moves; the first pin and the load balancer may add a few */
	CHECK(n >= 20 && n <= 24, "saw %zu migrations, want 20..24", n);
	/* every sched_setaffinity() call: the first pin, the 20 moves, the last unpin */
	CHECK(naff == 22, "saw %zu sched_setaffinity calls, want 22", naff);
	free_cap(c);
}

static void t_faults_and_mmap(void)
{
	uint64_t alloc_min = 10000;
	long pg = sysconf(_SC_PAGESIZE);
	struct cap *c;
	uint64_t base = 0;
	size_t faults = 0, maps = 0, unmaps = 0, runs = 0;

	TRACE_OR_SKIP(c, "faults", "200", "mmap", "30");
	uint32_t tid = tid_named(c, "sbw-main");

	REQUIRE(tid, "no rename to sbw-main seen");
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_mmsys *m = (const void *)c->recs[i];

		if (m->h.type != SB_EV_MMSYS || m->h.tid != tid)
			continue;
		CHECK(m->start_ns <= m->h.ts, "mm call ends before it starts");
		if (m->call == SB_SYS_MMAP && m->len == (uint64_t)(200 * pg))
			base = m->ret;
		if (m->call == SB_SYS_MMAP && m->len == (uint64_t)(3 * pg))
			maps++;
		if (m->call == SB_SYS_MUNMAP && m->len == (uint64_t)(3 * pg))
			unmaps++;
	}
	REQUIRE(base, "the 200-page mmap was not seen");
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_fault *f = (const void *)c->recs[i];
		const struct sb_fault_run *r = (const void *)c->recs[i];

		if (f->h.type == SB_EV_FAULT && f->h.tid == tid && f->addr >= base &&
		    f->addr < base + 200 * pg)
			faults++;
		/* back-to-back faults come as runs (bpf/mem.bpf.c): each stands for its count */
		if (r->h.type == SB_EV_FAULT_RUN && r->h.tid == tid && r->lo_addr >= base &&
		    r->hi_addr < base + 200 * pg) {
			CHECK(r->count >= 2 && r->start_ns < r->h.ts && r->lo_addr <= r->addr &&
			      r->addr <= r->hi_addr && r->lo_addr <= r->last_addr &&
			      r->last_addr <= r->hi_addr && r->min_flt - r->first_min_flt <= r->count,
			      "fault run: %llu faults [%llu, %llu], addr %llx in [%llx, %llx]",
			      (unsigned long long)r->count, (unsigned long long)r->start_ns,
			      (unsigned long long)r->h.ts, (unsigned long long)r->addr,
			      (unsigned long long)r->lo_addr, (unsigned long long)r->hi_addr);
			faults += r->count;
			runs++;
		}
	}
	CHECK(faults == 200, "saw %zu faults in the fresh mapping, want 200", faults);
	/* touching the pages one after the other: a few runs, not a record per fault */
	CHECK(runs >= 1 && runs <= 20, "the 200 faults came in %zu runs", runs);
	CHECK(maps == 30 && unmaps == 30, "saw %zu mmap / %zu munmap, want 30 / 30", maps, unmaps);
	CHECK(has_probe_record(c, "mem:sys_enter_mmap tracepoint") ||
	      has_probe_record(c, "mem:sys_enter raw_tp"), "no mmap-family probe attached");
	free_cap(c);
}

static void t_sleep_steps_thread(void)
{
	uint64_t alloc_min = 0;
	struct cap *c;
	uint64_t want_step = 1000;
	size_t steps = 0, late_allocs = 0;
	bool slept = false, created = false, exited = false;

	TRACE_OR_SKIP(c, "steps", "5", "sleep", "50", "thread", "1");
	uint32_t tid = tid_named(c, "sbw-main"), late = tid_named(c, "sbw-late");

	REQUIRE(tid && late, "renames not seen (main %u, late %u)", tid, late);
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_hdr *h = c->recs[i];

		if (h->type == SB_EV_STEP && h->tid == tid) {
			const struct sb_step *s = (const void *)h;

			CHECK(s->step == want_step, "step %llu, want %llu", s->step,
			      (unsigned long long)want_step);
			CHECK(s->source == SB_STEP_USDT, "step source %u", s->source);
			want_step++;
			steps++;
		}
		if (h->type == SB_EV_SWITCH_OUT && h->tid == tid &&
		    ((const struct sb_switch_out *)h)->state == SB_STATE_SLEEP) {
			/* the 50 ms sleep: the next switch-in of the thread is >= 50 ms later */
			for (size_t j = i + 1; j < c->n; j++)
				if (c->recs[j]->type == SB_EV_SWITCH_IN && c->recs[j]->tid == tid) {
					if (c->recs[j]->ts - h->ts >= 50000000)
						slept = true;
					break;
				}
		}
		if (h->type == SB_EV_THREAD_NEW && h->tid == late)
			created = ((const struct sb_thread *)h)->parent_tid == tid;
		if (h->type == SB_EV_THREAD_EXIT && h->tid == late)
			exited = true;
		if (h->type == SB_EV_ALLOC && h->tid == late &&
		    ((const struct sb_alloc *)h)->size == 77777)
			late_allocs++;
	}
	CHECK(steps == 5, "saw %zu of 5 steps", steps);
	CHECK(slept, "no interruptible sleep of >= 50 ms on sbw-main");
	CHECK(created, "thread creation of sbw-late (parent sbw-main) not seen");
	CHECK(exited, "exit of sbw-late not seen");
	CHECK(late_allocs == 7, "thread created after attach: %zu of 7 mallocs seen", late_allocs);
	free_cap(c);
}

/* the recorder's default (user/capture/probes.c): a burst is cut at this span */
#define BURST_MAX_NS 10000000ull

/* the last allocator burst of tid in c, NULL if none; *flushed: how many the agent flushed */
static const struct sb_alloc_burst *last_burst(struct cap *c, uint32_t tid, uint64_t *flushed)
{
	const struct sb_alloc_burst *last = NULL;

	*flushed = 0;
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_alloc_burst *b = (const void *)c->recs[i];

		if (b->h.type != SB_EV_ALLOC_BURST || b->h.tid != tid)
			continue;
		if (b->h.flags & SB_ALLOC_BURST_FLUSHED)
			(*flushed)++;
		last = b;
	}
	return last;
}

/*
 * b was emitted after a totals record of tid read more than a second after b
 * ended: not by the thread's next call in the storm, nor by the agent's
 * flush, but when the thread ended it on exit after the pause.
 */
static bool emitted_late(struct cap *c, uint32_t tid, const struct sb_alloc_burst *b)
{
	for (size_t i = 0; i < c->n && c->recs[i] != &b->h; i++)
		if (c->recs[i]->type == SB_REC_ALLOC_STATS && c->recs[i]->tid == tid &&
		    c->recs[i]->ts > b->h.ts + 1000000000ull)
			return true;
	return false;
}

/*
 * Fast allocator calls in bursts: 2000 malloc(64)+free, a 5 ms pause, then
 * 3001 more and a 2.5 s pause. The first burst is ended by the thread's next
 * call after the pause, the last by the agent's periodic flush (the thread
 * makes no further call). Bursts are cut every burst_max_ns, so each shows up
 * as a few records; their calls add up.
 *
 * On a busy machine the thread may be preempted for longer than the flush's
 * idle time in the middle of a storm: the agent then flushes that burst too,
 * and the thread's next call comes after the pause. And the last cut may fall
 * so near the end of the storm that what is left is under the thresholds and
 * never recorded (after a cut at burst_max_ns, or a pause that a preemption
 * made): then the agent has nothing to flush, and the trace is taken again
 * (up to three times) so that the flush is seen at work.
 */
static void t_alloc_burst(void)
{
	uint64_t alloc_min = 10000; /* the default: with uprobe traps every call is fast */
	struct cap *c = NULL;
	uint64_t calls = 0, flushed = 0, prev_end = 0;
	const struct sb_alloc_burst *last = NULL, *prev = NULL;
	size_t n = 0;
	bool gap_ended = false;
	uint32_t tid = 0;

	for (int attempt = 0; attempt < 3; attempt++) {
		free_cap(c);
		TRACE_OR_SKIP(c, "burst", "2000", "sleep", "5", "burst", "1", "burst", "3000", "sleep",
			      "2500");
		tid = tid_named(c, "sbw-main");
		REQUIRE(tid, "no rename to sbw-main seen");
		last = last_burst(c, tid, &flushed);
		if (flushed || !last || emitted_late(c, tid, last))
			break;
	}
	/* records come in emission order, which is time order for one thread */
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_alloc_burst *b = (const void *)c->recs[i];

		if (b->h.type != SB_EV_ALLOC_BURST || b->h.tid != tid)
			continue;
		CHECK(b->h.size == sizeof(*b) && b->h.pid == (uint32_t)c->o.probe.pid, "bad header");
		CHECK(b->start_ns < b->h.ts, "burst ends before it starts");
		CHECK(b->calls > 0 && b->sum_ns > 0 && b->sum_ns <= b->h.ts - b->start_ns,
		      "burst: %llu calls, %llu ns summed over a %llu ns span", b->calls, b->sum_ns,
		      b->h.ts - b->start_ns);
		CHECK(b->calls >= 256 || b->sum_ns >= 100000, "a burst too small to matter was "
		      "recorded: %llu calls, %llu ns", b->calls, b->sum_ns);
		/* every fast malloc adds 64, a free nothing; a burst holds one of each at least */
		CHECK(b->bytes >= 64 && b->bytes % 64 == 0 && b->bytes <= 64 * b->calls,
		      "bytes %llu in %llu calls", b->bytes, b->calls);
		CHECK(b->slow_ns <= b->h.ts - b->start_ns, "slow calls take %llu ns of a %llu ns span",
		      b->slow_ns, b->h.ts - b->start_ns);
		CHECK(b->start_ns >= prev_end, "bursts overlap");
		if (prev_end && b->start_ns - prev_end >= 4000000)
			gap_ended = true; /* the one before ended at the 5 ms pause */
		/* the agent flushes only a burst idle for burst_gap_ns + burst_max_ns */
		if (prev && (prev->h.flags & SB_ALLOC_BURST_FLUSHED))
			CHECK(b->start_ns - prev->h.ts >= BURST_MAX_NS, "a burst flushed by the agent "
			      "was followed %llu ns later: it was not idle",
			      (unsigned long long)(b->start_ns - prev->h.ts));
		prev_end = b->h.ts;
		prev = b;
		calls += b->calls;
		n++;
	}
	REQUIRE(n, "no alloc_burst record of sbw-main");
	/* 10002 calls were made; a remnant under the thresholds may be left out */
	CHECK(calls >= 5000 && calls <= 10100, "bursts hold %llu calls, want 5000..10100 of 10002",
	      (unsigned long long)calls);
	CHECK(gap_ended, "no burst ended at the 5 ms pause");
	CHECK(flushed, "no burst flushed by the agent in three traces (each time the storm's "
	      "end was too small to record)");
	/*
	 * The last: flushed, or ended by the thread's own next call in the storm
	 * (cut at burst_max_ns, or after a pause) with nothing that mattered left
	 * after it. Either comes at once, before the totals the agent reads a
	 * second later; one the thread ended only on exit, after the pause, comes
	 * after them: the agent failed to flush it.
	 */
	CHECK((last->h.flags & SB_ALLOC_BURST_FLUSHED) || !emitted_late(c, tid, last),
	      "the last burst (%llu ns, %llu calls) was not flushed by the agent in the 2.5 s "
	      "pause: the thread ended it on exit", (unsigned long long)(last->h.ts - last->start_ns),
	      (unsigned long long)last->calls);
	if (test_failed_now || getenv("SB_DEBUG_BURSTS"))
		for (size_t i = 0; i < c->n; i++) {
			const struct sb_alloc_burst *b = (const void *)c->recs[i];

			if (b->h.type == SB_EV_ALLOC_BURST && b->h.tid == tid)
				fprintf(stderr, "  burst %llu..%llu calls %llu sum %llu bytes %llu flags %u\n",
					(unsigned long long)b->start_ns, (unsigned long long)b->h.ts,
					(unsigned long long)b->calls, (unsigned long long)b->sum_ns,
					(unsigned long long)b->bytes, b->h.flags);
		}
	free_cap(c);
}

/*
 * The first free of the capture unmaps 4 MiB of touched pages: a slow call.
 * With no faster free seen before it, it is judged against alloc_min_ns
 * alone, and recorded as a slow call of its own, not as a "burst" of one
 * call that its latency alone makes big enough to keep.
 */
static void t_first_call_slow(void)
{
	uint64_t alloc_min = 10000, free_lo = 0, free_hi = 0;
	struct cap *c;
	size_t slow_frees = 0, bursts = 0;

	TRACE_OR_SKIP(c, "bigfree", "4096", "sleep", "1500");
	uint32_t tid = tid_named(c, "sbw-main");

	REQUIRE(tid, "no rename to sbw-main seen");
	/*
	 * The first slow free is the unmapping one. A later free of the thread's
	 * (stdio's, at exit) preempted on a busy machine is slow too, and judged
	 * against the floor the faster calls set by then: it may follow.
	 */
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_alloc *a = (const void *)c->recs[i];

		if (a->h.type == SB_EV_ALLOC && a->h.tid == tid && a->fn == SB_FN_FREE) {
			if (slow_frees++)
				continue;
			CHECK(a->floor_ns == 0, "the first free has a floor of %u ns", a->floor_ns);
			CHECK(a->h.ts - a->start_ns >= alloc_min, "a free of %llu ns recorded as slow",
			      (unsigned long long)(a->h.ts - a->start_ns));
			free_lo = a->start_ns;
			free_hi = a->h.ts;
		}
	}
	/*
	 * No burst holds the unmapping free, nor is any a burst of one call. Its
	 * other calls (stdio's, at exit) can make a burst of their own when a
	 * busy machine preempts them: that is what a burst is for.
	 */
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_alloc_burst *b = (const void *)c->recs[i];

		if (b->h.type != SB_EV_ALLOC_BURST || b->h.tid != tid)
			continue;
		fprintf(stderr, "  burst %llu..%llu calls %llu sum %llu bytes %llu\n",
			(unsigned long long)b->start_ns, (unsigned long long)b->h.ts,
			(unsigned long long)b->calls, (unsigned long long)b->sum_ns,
			(unsigned long long)b->bytes);
		if (b->calls == 1 || (free_hi && b->start_ns <= free_hi && b->h.ts >= free_lo))
			bursts++;
	}
	CHECK(slow_frees >= 1, "no slow free of sbw-main (the unmapping one)");
	CHECK(bursts == 0, "%zu allocator bursts of sbw-main hold the unmapping free or one call",
	      bursts);
	free_cap(c);
}

static bool var_tmp_on_tmpfs(void)
{
	struct statfs s;

	return !statfs("/var/tmp", &s) && s.f_type == 0x01021994; /* TMPFS_MAGIC */
}

/*
 * a 4 MiB write() and its fsync() on fd 77 become iosys records; so may the
 * unlink that frees the file's page cache, if it takes over 50 us
 */
static void t_iosys(void)
{
	uint64_t alloc_min = 10000;
	struct cap *c;
	size_t writes = 0, fsyncs = 0, other = 0, unlinks = 0;

	TRACE_OR_SKIP(c, "write", "4096");
	uint32_t tid = tid_named(c, "sbw-main");

	REQUIRE(tid, "no rename to sbw-main seen");
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_iosys *e = (const void *)c->recs[i];

		if (e->h.type != SB_EV_IOSYS)
			continue;
		CHECK(e->h.size == sizeof(struct sb_iosys_ext), "size %u", e->h.size);
		CHECK(e->start_ns <= e->h.ts && e->h.ts - e->start_ns >= 50000,
		      "an iosys record under the 50 us threshold: %llu ns", e->h.ts - e->start_ns);
		if (e->h.tid == tid && (e->call == SB_IO_UNLINK || e->call == SB_IO_UNLINKAT)) {
			CHECK(e->fd == -100 && e->ret == 0, "unlink fd %d ret %lld", e->fd, e->ret);
			unlinks++;
			continue;
		}
		if (e->h.tid != tid || e->fd != 77) {
			other++;
			continue;
		}
		if (e->call == SB_IO_WRITE) {
			CHECK(e->len == 4096 << 10 && e->ret == 4096 << 10,
			      "write of len %llu returned %lld", e->len, e->ret);
			writes++;
		} else if (e->call == SB_IO_FSYNC) {
			CHECK(e->len == 0 && e->ret == 0, "fsync len %llu ret %lld", e->len, e->ret);
			fsyncs++;
		} else {
			CHECK(0, "call %u on fd 77", e->call);
		}
	}
	CHECK(writes == 1, "saw %zu writes of 4 MiB on fd 77, want 1", writes);
	if (!var_tmp_on_tmpfs())
		CHECK(fsyncs == 1, "saw %zu fsyncs of fd 77, want 1", fsyncs);
	CHECK(unlinks <= 1, "saw %zu unlinks", unlinks);
	CHECK(has_probe_record(c, "mem:sys_enter_write tracepoint") ||
	      has_probe_record(c, "mem:sys_enter raw_tp"), "no I/O syscall probe attached");
	free_cap(c);
}

/*
 * the calls that copy or sync through the kernel are I/O calls too: a 4 MiB
 * sendfile() names the file it copied from (fd 79), pwritev() its file
 * (fd 80) and what it wrote, sync() no file
 */
static void t_iosys_copy(void)
{
	uint64_t alloc_min = 10000;
	struct cap *c;
	size_t sendfiles = 0, pwritevs = 0, syncs = 0;
	uint64_t pwritten = 0;

	TRACE_OR_SKIP(c, "copy", "4096");
	uint32_t tid = tid_named(c, "sbw-main");

	REQUIRE(tid, "no rename to sbw-main seen");
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_iosys *e = (const void *)c->recs[i];
		const struct sb_iosys_file *f = sb_iosys_file_of(&e->h);

		if (e->h.type != SB_EV_IOSYS || e->h.tid != tid)
			continue;
		if (e->call == SB_IO_SENDFILE) {
			CHECK(e->fd == 79 && e->len == 4096 << 10 && e->ret == 4096 << 10 && f &&
			      f->kind == SB_FILE_REGULAR, "sendfile fd %d len %llu ret %lld",
			      e->fd, e->len, e->ret);
			sendfiles++;
		} else if (e->call == SB_IO_PWRITEV) {
			CHECK(e->fd == 80 && e->ret == 1 << 20 && f && f->written >= (1u << 20),
			      "pwritev fd %d ret %lld written %llu", e->fd, e->ret,
			      f ? (unsigned long long)f->written : 0ull);
			pwritevs++;
			pwritten = f ? f->written : 0;
		} else if (e->call == SB_IO_SYNC) {
			CHECK(e->fd == -100 && e->ret == 0 && f && f->kind == SB_FILE_NONE,
			      "sync fd %d ret %lld", e->fd, e->ret);
			syncs++;
		}
	}
	CHECK(sendfiles == 1, "saw %zu sendfiles of 4 MiB from fd 79, want 1", sendfiles);
	CHECK(pwritevs >= 1, "saw no pwritev of fd 80");
	/* the counter of fd 80 holds the pwritev calls' bytes (sendfile is not a write) */
	CHECK(pwritten <= 4096u << 10, "fd 80 written %llu", (unsigned long long)pwritten);
	if (!var_tmp_on_tmpfs())
		CHECK(syncs == 1, "saw %zu syncs, want 1", syncs);
	free_cap(c);
}

/* a CPU-bound competitor pinned to the same CPU shows up as the task that ran */
static void t_preemption_culprit(void)
{
	uint64_t alloc_min = 10000;
	struct cap *c = NULL;
	pid_t hog;
	bool slice = false, out = false, in = false;

	NEED_BPF();
	hog = fork();
	if (hog == 0) {
		cpu_set_t one;
		/* until killed after the capture: the probes' start can take seconds on a loaded machine */
		uint64_t end = mono_ns() + 60000000000ull;

		prctl(PR_SET_NAME, "sbw-hog");
		CPU_ZERO(&one);
		CPU_SET(0, &one);
		sched_setaffinity(0, sizeof(one), &one);
		while (mono_ns() < end)
			;
		_exit(0);
	}
	{
		char *args[] = { "pin", "0", "spin", "400", NULL };

		c = trace_work(args, alloc_min, NULL);
	}
	kill(hog, SIGKILL);
	waitpid(hog, NULL, 0);
	REQUIRE(c && c->rc == 0, "capture failed");
	uint32_t tid = tid_named(c, "sbw-main");

	REQUIRE(tid, "no rename to sbw-main seen");
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_hdr *h = c->recs[i];

		if (h->type == SB_EV_RUNSLICE && h->pid == (uint32_t)hog) {
			const struct sb_runslice *r = (const void *)h;

			CHECK(!strcmp(r->comm, "sbw-hog"), "hog slice with comm '%s'", r->comm);
			CHECK(r->h.cpu == 0, "hog slice on CPU %u", r->h.cpu);
			CHECK(r->start_ns < r->h.ts, "empty slice");
			slice = true;
		}
		if (h->type == SB_EV_SWITCH_OUT && h->tid == tid) {
			const struct sb_switch_out *o = (const void *)h;

			if (o->state == SB_STATE_RUNNABLE && o->next_pid == (uint32_t)hog)
				out = true;
		}
		if (h->type == SB_EV_SWITCH_IN && h->tid == tid) {
			const struct sb_switch_in *s = (const void *)h;

			if (s->prev_pid == (uint32_t)hog && s->wait_ns > 0 &&
			    s->wait_reason == SB_WAIT_PREEMPTED)
				in = true;
		}
	}
	CHECK(slice, "no runslice of the hog (pid %d) while sbw-main waited", (int)hog);
	CHECK(out, "sbw-main never preempted by the hog");
	CHECK(in, "no switch-in after waiting behind the hog");
	free_cap(c);
}

/* tracefs is not needed: capture in a mount namespace where it is not mounted */
static void t_without_tracefs(void)
{
	int status;
	pid_t pid;

	NEED_BPF();
	pid = fork();
	if (pid == 0) {
		uint64_t alloc_min = 10000;
		char *args[] = { "steps", "3", "faults", "10", "mmap", "5", "write", "1024", NULL };
		struct cap *c;
		struct stat st;

		if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
			_exit(10);
		umount2("/sys/kernel/debug/tracing", MNT_DETACH);
		umount2("/sys/kernel/tracing", MNT_DETACH);
		if (!stat("/sys/kernel/tracing/events", &st))
			_exit(11);
		no_tracefs = true;
		c = trace_work(args, alloc_min, NULL);
		if (!c || c->rc)
			_exit(12);
		if (!has_probe_record(c, "mem:sys_enter raw_tp"))
			_exit(15);
		if (count_type(c, SB_EV_MMSYS, 0) < 10)
			_exit(16);
		if (count_type(c, SB_EV_STEP, 0) != 3)
			_exit(13);
		if (count_faults(c) < 10)
			_exit(14);
		if (count_type(c, SB_EV_IOSYS, 0) < 1)
			_exit(17);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status), "child died");
	switch (WEXITSTATUS(status)) {
	case 0: break;
	case 10: CHECK(0, "cannot make a private mount namespace"); break;
	case 11: CHECK(0, "tracefs still mounted after umount"); break;
	case 12: CHECK(0, "capture failed without tracefs"); break;
	case 13: CHECK(0, "steps missing without tracefs"); break;
	case 14: CHECK(0, "faults missing without tracefs"); break;
	case 15: CHECK(0, "the raw sys_enter fallback was not used"); break;
	case 16: CHECK(0, "mmap/munmap missing without tracefs"); break;
	case 17: CHECK(0, "the 1 MiB write missing without tracefs"); break;
	default: CHECK(0, "child exit %d", WEXITSTATUS(status));
	}
}

static void t_errors(void)
{
	struct collect_opts o = { .agent_cpu = -2, .quiet = true };
	struct collect_result res;
	int rc;

	NEED_BPF();
	o.probe.pid = 0x3ffffff0; /* no such PID */
	o.probe.ring_bytes = 1 << 20;
	collect_stop = 0;
	rc = collect_run(&o, mem_sink, NULL, &res);
	CHECK(rc != 0, "capture of a missing PID did not fail");
	o.probe.pid = 2; /* kthreadd */
	rc = collect_run(&o, mem_sink, NULL, &res);
	CHECK(rc != 0, "capture of a kernel thread did not fail");
}

int main(void)
{
	/* the probes are the subject: keep test output free of libbpf chatter */
	RUN(t_malloc_exact);
	RUN(t_malloc_fast_counted);
	RUN(t_migrations);
	RUN(t_faults_and_mmap);
	RUN(t_alloc_burst);
	RUN(t_first_call_slow);
	RUN(t_iosys);
	RUN(t_iosys_copy);
	RUN(t_sleep_steps_thread);
	RUN(t_preemption_culprit);
	RUN(t_without_tracefs);
	RUN(t_errors);
	return test_summary();
}
