// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The trainer, and whoever hands us a trace, is untrusted. Each case here
 * performs an attack for real and checks what it can make the engine do:
 * GPU records with impossible times (report of a trace, and live as attach
 * feeds the engine), a kernel record far in the future, timestamps spread so
 * that the reorder window has nothing but empty buckets to sweep, two million
 * steps of attach (window mode), a million thread ids and kernel names.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "cmd/cmds.h"
#include "engine_synth.h"

static char dir[64];

static const char *tpath(const char *name)
{
	static char buf[4][256];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, name);
	return buf[i];
}

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int report(const char *in, const char *fmt, const char *out)
{
	char *argv[] = { "report", (char *)in, "--format", (char *)fmt, "-o", (char *)out, NULL };
	int rc;

	fflush(stdout);
	rc = cmd_report(6, argv);
	fflush(stdout);
	return rc;
}

/* what `stepblame report` does with a file, keeping the engine for its counters */
static struct engine *feed_file(const char *path, const struct engine_opts *o0)
{
	struct engine_opts o = o0 ? *o0 : (struct engine_opts){ 0 };
	char err[256];
	struct sbt_reader *r = sbt_open(path, err, sizeof(err));
	const struct sb_hdr *rec;
	enum sbt_status st;
	struct engine *e;

	if (!r)
		return NULL;
	o.start_ns = sbt_header(r)->created_mono_ns;
	e = engine_new(&o, err, sizeof(err));
	if (e) {
		while ((st = sbt_next(r, &rec)) == SBT_OK)
			engine_feed(e, rec);
		if (st == SBT_EOF && sbt_trailer(r))
			engine_feed(e, &sbt_trailer(r)->h);
		else if (st != SBT_EOF)
			engine_set_truncated(e, sbt_error(r));
		engine_finish(e);
	}
	sbt_close(r);
	return e;
}

static void gpu_rec(struct sb_gpu *g, unsigned kind, uint64_t ts, uint64_t end, uint32_t corr)
{
	memset(g, 0, sizeof(*g));
	hdr(&g->h, SB_REC_GPU, sizeof(*g), ts, T_PID, kind == SB_GPU_KERNEL ? 0 : T_LAUNCHER, 0);
	g->h.flags = (uint16_t)kind;
	g->end_ns = end;
	g->correlation_id = corr;
	g->sub = kind == SB_GPU_API ? SB_API_LAUNCH : 0;
	g->stream = 7;
	g->grid[0] = 64;
	g->block[0] = 256;
}

/* steps .. summary of a pretty JSON report: everything but the capture and loss counts */
static char *json_core(char *doc)
{
	char *a = doc ? strstr(doc, "\"steps\": [") : NULL, *b = a ? strstr(a, "\"loss\": {") : NULL;

	if (!b)
		return NULL;
	*b = 0;
	return a;
}

/*
 * A trace from a trainer whose GPU clock is wrong: one kernel at 2^64-1 and
 * one at 0 among the normal records. Before, the first made every later
 * record late (all steps 0 ns, the reorder window holding the rest of the
 * trace); the second closed an idle gap at the wrong time.
 */
static void t_gpu_times_report(void)
{
	struct world w;
	struct sopt pre = { .pre = 5 * MS, .gpu = 80 * MS, .len = 30 * MS, .inj = inj_preempt };
	struct sopt plain = { .pre = 5 * MS, .gpu = 80 * MS };
	struct sb_gpu far, zero;
	const struct sb_hdr *bad[] = { &far.h, &zero.h };
	uint64_t S = now_ns(CLOCK_MONOTONIC) + 1 * SEC, start = S;
	struct engine *ec, *eb;
	struct engine_stats sc, sb;
	struct eng_loss l;
	char *jc, *jb, *cc, *cb, *txt;

	world_init(&w);
	for (unsigned k = 0; k < 200; k++)
		S = std_step(&w, S, k, k % 40 == 20 ? &pre : &plain);
	w_step(&w, S, T_LAUNCHER, 200);
	gpu_rec(&far, SB_GPU_KERNEL, UINT64_MAX - 1, UINT64_MAX - 1, 0);
	gpu_rec(&zero, SB_GPU_KERNEL, 0, 0, 0);
	REQUIRE(world_write(&w, tpath("clean.sbt"), start, NULL, 0, 0), "write: %s", strerror(errno));
	/* early, so that most of the trace comes after them */
	REQUIRE(world_write(&w, tpath("bad.sbt"), start, bad, 2, (w.host.n + w.gpu.n) / 10),
		"write: %s", strerror(errno));
	world_free(&w);

	CHECK(report(tpath("clean.sbt"), "json", tpath("clean.json")) == 0, "report clean");
	CHECK(report(tpath("bad.sbt"), "json", tpath("bad.json")) == 0, "report bad");
	jc = test_slurp(tpath("clean.json"), NULL);
	jb = test_slurp(tpath("bad.json"), NULL);
	REQUIRE(jc && jb, "no report");
	CHECK(strstr(jb, "\"gpu_records_rejected\": 2"), "bad records not counted in the JSON loss");
	CHECK(!strstr(jc, "gpu_records_rejected"), "a clean trace reports rejected GPU records");
	cc = json_core(jc);
	cb = json_core(jb);
	CHECK(cc && cb && !strcmp(cc, cb), "steps or summary differ with the bad records: %.200s",
	      cb ? cb : "(none)");
	free(jc);
	free(jb);
	CHECK(report(tpath("bad.sbt"), "text", tpath("bad.txt")) == 0, "report text");
	txt = test_slurp(tpath("bad.txt"), NULL);
	CHECK(txt && strstr(txt, "2 GPU records rejected"), "text says nothing of them: %s",
	      txt ? txt : "(none)");
	free(txt);

	ec = feed_file(tpath("clean.sbt"), NULL);
	eb = feed_file(tpath("bad.sbt"), NULL);
	REQUIRE(ec && eb, "engine");
	engine_stats(ec, &sc);
	engine_stats(eb, &sb);
	engine_loss(eb, &l);
	CHECK(l.gpu_rejected == 2, "%" PRIu64 " rejected, want 2", l.gpu_rejected);
	CHECK(engine_nsteps(eb) == engine_nsteps(ec) && engine_nsteps(eb) == 201,
	      "%" PRIu64 " steps, clean %" PRIu64, engine_nsteps(eb), engine_nsteps(ec));
	for (uint64_t i = 0; i < engine_nsteps(eb) && i < engine_nsteps(ec); i++)
		CHECK(engine_step(eb, i)->duration_ns == engine_step(ec, i)->duration_ns &&
		      engine_step(eb, i)->gpu_idle_ns == engine_step(ec, i)->gpu_idle_ns,
		      "step %" PRIu64 ": %" PRIu64 " ns, clean %" PRIu64, i,
		      engine_step(eb, i)->duration_ns, engine_step(ec, i)->duration_ns);
	/* the reorder window holds lag_ns of records, not the rest of the trace */
	CHECK(sb.queue_bytes_peak <= sc.queue_bytes_peak + 4096 &&
	      sb.heap_bytes_peak <= sc.heap_bytes_peak + (1 << 20),
	      "window %" PRIu64 " B (clean %" PRIu64 "), heap %" PRIu64 " B (clean %" PRIu64 ")",
	      sb.queue_bytes_peak, sc.queue_bytes_peak, sb.heap_bytes_peak, sc.heap_bytes_peak);
	engine_free(ec);
	engine_free(eb);
}

/* ---- live, as attach feeds the engine: host records at once, GPU records a second late */

struct live {
	struct engine *e;
	struct sb_gpu q[8192];
	uint64_t due[8192];
	unsigned qh, qn;
	uint64_t steps, bad_steps, last_adv;
};

static void live_cb(void *ctx, const struct eng_step *s)
{
	struct live *l = ctx;

	l->steps++;
	if (!s->incomplete && s->duration_ns != 10 * MS)
		l->bad_steps++;
}

static void live_flush(struct live *l, uint64_t upto)
{
	while (l->qn && l->due[l->qh] <= upto) {
		engine_feed(l->e, &l->q[l->qh].h);
		l->qh = (l->qh + 1) % 8192;
		l->qn--;
	}
}

static void live_host(struct live *l, const void *rec)
{
	const struct sb_hdr *h = rec;

	live_flush(l, h->ts);
	engine_feed(l->e, h);
	/* the agent's tick (100 ms): every record before it is in */
	if (h->ts >= l->last_adv + 100 * MS) {
		engine_advance(l->e, h->ts);
		l->last_adv = h->ts;
	}
}

static void live_gpu(struct live *l, const struct sb_gpu *g, uint64_t due)
{
	unsigned i = (l->qh + l->qn) % 8192;

	if (l->qn == 8192)
		abort();
	l->q[i] = *g;
	l->due[i] = due;
	l->qn++;
}

/* 3000 steps of 10 ms from the clock now; bad: GPU records with impossible times after step 100 */
static void live_run(struct live *l, bool bad, struct engine_stats *st)
{
	struct engine_opts o = { .live = true, .keep_steps = 4096 };
	uint64_t S = now_ns(CLOCK_MONOTONIC), corr = 0;

	o.start_ns = S;
	memset(l, 0, sizeof(*l));
	l->e = new_engine(&o);
	if (!l->e)
		return;
	engine_set_step_cb(l->e, live_cb, l);
	l->last_adv = S;
	for (unsigned k = 0; k < 3000; k++, S += 10 * MS) {
		struct sb_step mk = { 0 };
		struct sb_gpu api, ker;
		uint64_t t = S + 1 * MS;

		hdr(&mk.h, SB_EV_STEP, sizeof(mk), S, T_PID, T_LAUNCHER, 0);
		mk.step = k;
		mk.source = SB_STEP_USDT;
		live_host(l, &mk);
		for (int i = 0; i < 4; i++, t += 500 * US) {
			struct sb_switch_out so = { 0 };
			struct sb_switch_in si = { 0 };

			hdr(&so.h, SB_EV_SWITCH_OUT, sizeof(so), t, T_PID, T_LAUNCHER, 0);
			so.state = SB_STATE_RUNNABLE;
			live_host(l, &so);
			hdr(&si.h, SB_EV_SWITCH_IN, sizeof(si), t + 100 * US, T_PID, T_LAUNCHER, 0);
			live_host(l, &si);
		}
		gpu_rec(&api, SB_GPU_API, t, t + 10 * US, (uint32_t)++corr);
		live_gpu(l, &api, t + 1 * SEC);
		gpu_rec(&ker, SB_GPU_KERNEL, t + 20 * US, t + 5 * MS, (uint32_t)corr);
		live_gpu(l, &ker, t + 1 * SEC);
		if (bad && k == 100) {
			struct sb_gpu x;

			gpu_rec(&x, SB_GPU_KERNEL, UINT64_MAX - 1, UINT64_MAX - 1, 0);
			live_gpu(l, &x, t + 1 * SEC);
			gpu_rec(&x, SB_GPU_KERNEL, 0, 0, 0);
			live_gpu(l, &x, t + 1 * SEC);
			/* a duration longer than the capture */
			gpu_rec(&x, SB_GPU_KERNEL, t, t + (1ull << 62), 0);
			live_gpu(l, &x, t + 1 * SEC);
			/* an end before its start */
			gpu_rec(&x, SB_GPU_KERNEL, t, t - 1, 0);
			live_gpu(l, &x, t + 1 * SEC);
		}
	}
	engine_stats(l->e, st);
}

static void t_gpu_times_live(void)
{
	struct live *c = calloc(1, sizeof(*c)), *b = calloc(1, sizeof(*b));
	struct engine_stats sc, sb;
	struct eng_loss lc, lb;

	REQUIRE(c && b, "alloc");
	live_run(c, false, &sc);
	live_run(b, true, &sb);
	REQUIRE(c->e && b->e, "engine");
	engine_loss(b->e, &lb);
	engine_loss(c->e, &lc);
	CHECK(lb.gpu_rejected == 4 && lc.gpu_rejected == 0, "rejected %" PRIu64 " (clean %" PRIu64
	      "), want 4", lb.gpu_rejected, lc.gpu_rejected);
	/* steps go on finishing live, each 10 ms, as without the bad records */
	CHECK(b->steps == c->steps && b->steps > 2600, "%" PRIu64 " steps finished live (clean %"
	      PRIu64 ")", b->steps, c->steps);
	CHECK(!b->bad_steps, "%" PRIu64 " steps not 10 ms", b->bad_steps);
	CHECK(sb.queue_bytes_peak <= sc.queue_bytes_peak + 4096 &&
	      sb.heap_bytes <= sc.heap_bytes + (1 << 20),
	      "window %" PRIu64 " B (clean %" PRIu64 "), heap %" PRIu64 " B (clean %" PRIu64 ")",
	      sb.queue_bytes_peak, sc.queue_bytes_peak, sb.heap_bytes, sc.heap_bytes);
	engine_free(c->e);
	engine_free(b->e);
	free(c);
	free(b);
}

/*
 * A crafted trace: a kernel record far in the future. Every later record is
 * late and joins one bucket, which the clock, stopped, never releases: it
 * held the rest of the input. Now that bucket is swept when it grows large.
 */
static void t_host_time_jump(void)
{
	struct engine *e = new_engine(NULL);
	struct engine_stats st;
	struct eng_limits lim;
	uint64_t t = 10 * SEC;

	REQUIRE(e, "engine");
	for (int i = 0; i < 1000000; i++, t += 20 * US) {
		struct sb_switch_out so = { 0 };

		hdr(&so.h, SB_EV_SWITCH_OUT, sizeof(so), i == 1000 ? UINT64_MAX - 10 : t, T_PID,
		    T_LAUNCHER + i % 8, i % 4);
		so.state = SB_STATE_RUNNABLE;
		engine_feed(e, &so.h);
	}
	engine_stats(e, &st);
	engine_limits(e, &lim);
	engine_finish(e);
	CHECK(st.queued_peak < (1u << 18) + 200000, "the window held %" PRIu64 " records",
	      st.queued_peak);
	CHECK(lim.window_flushes > 0 && eng_limits_any(&lim), "no flush counted");
	engine_free(e);
}

/*
 * Records 4.2 s apart (the window spans ~4.3 s at the default 3 s lag): each
 * one made the sweep walk a second of empty 1 ms buckets. A million-record
 * trace cost minutes; now the sweep jumps to the next bucket with records.
 */
static void t_sparse_times(void)
{
	struct engine *e = new_engine(NULL);
	uint64_t t0 = now_ns(CLOCK_PROCESS_CPUTIME_ID), cpu, ts = 10 * SEC;

	REQUIRE(e, "engine");
	for (int i = 0; i < 400000; i++, ts += 4200 * MS) {
		struct sb_switch_out so = { 0 };

		hdr(&so.h, SB_EV_SWITCH_OUT, sizeof(so), ts, T_PID, T_LAUNCHER, 0);
		so.state = SB_STATE_RUNNABLE;
		engine_feed(e, &so.h);
	}
	engine_finish(e);
	cpu = now_ns(CLOCK_PROCESS_CPUTIME_ID) - t0;
	CHECK(cpu < 2 * SEC, "400k sparse records took %.2f s of CPU", cpu / 1e9);
	engine_free(e);
}

/* ---- window mode: two million steps of attach */

static uint64_t rng_state = 88172645463325252ull;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static bool near(uint64_t got, uint64_t want, double rel)
{
	double d = (double)got - (double)want;

	return (d < 0 ? -d : d) <= rel * (double)want + 1;
}

#define NSTEPS 2000000

static void t_window_two_million_steps(void)
{
	struct engine_opts o = { .keep_steps = 4096 };
	struct engine *e = new_engine(&o);
	uint64_t *dur = calloc(NSTEPS, sizeof(*dur)), t = 10 * SEC, heap_early = 0;
	struct engine_stats st;
	struct eng_summary s;
	uint64_t want[5];

	REQUIRE(e && dur, "alloc");
	for (uint64_t k = 0; k <= NSTEPS; k++) {
		struct sb_step mk = { 0 };
		uint64_t r = rng(), d;

		hdr(&mk.h, SB_EV_STEP, sizeof(mk), t, T_PID, T_LAUNCHER, 0);
		mk.step = k;
		mk.source = SB_STEP_USDT;
		engine_feed(e, &mk.h);
		/* 10 ms give or take 20%, one step in 50 up to 5x longer, one in 5000 up to 40x */
		d = 8 * MS + r % (4 * MS);
		if (r >> 60 == 0 && (r >> 40) % 4 == 0)
			d += (r >> 20) % (40 * MS);
		if ((r >> 32) % 5000 == 0)
			d += (r >> 8) % (400 * MS);
		if (k < NSTEPS)
			dur[k] = d;
		t += d;
		if (k == 200000) {
			engine_stats(e, &st);
			heap_early = st.heap_bytes;
		}
	}
	engine_finish(e);
	engine_stats(e, &st);
	/* the memory of 200k steps is the memory of 2M: bounded by the window, not the run */
	CHECK(st.heap_bytes <= heap_early + (256 << 10) && st.heap_bytes < (16ull << 20),
	      "heap %" PRIu64 " B after 2M steps, %" PRIu64 " B after 200k", st.heap_bytes,
	      heap_early);
	printf("# window: engine heap %.1f MB after 200k steps, %.1f MB after 2M\n",
	       heap_early / 1048576.0, st.heap_bytes / 1048576.0);
	CHECK(engine_nsteps(e) == NSTEPS + 1, "%" PRIu64 " steps", engine_nsteps(e));
	CHECK(engine_first_step(e) >= NSTEPS - 8192 && !engine_step(e, 0) &&
	      engine_step(e, NSTEPS), "kept from %" PRIu64, engine_first_step(e));
	engine_summarise(e, &s);
	qsort(dur, NSTEPS, sizeof(*dur), cmp_u64);
	want[0] = dur[(50ull * NSTEPS + 99) / 100 - 1];
	want[1] = dur[(90ull * NSTEPS + 99) / 100 - 1];
	want[2] = dur[(99ull * NSTEPS + 99) / 100 - 1];
	want[3] = dur[(999ull * NSTEPS + 999) / 1000 - 1];
	want[4] = dur[NSTEPS - 1];
	CHECK(s.windowed && s.nsteps == NSTEPS + 1 && s.ncomplete == NSTEPS,
	      "windowed %d, %" PRIu64 " steps, %" PRIu64 " complete", s.windowed, s.nsteps,
	      s.ncomplete);
	CHECK(near(s.p50, want[0], s.pct_error) && near(s.p90, want[1], s.pct_error) &&
	      near(s.p99, want[2], s.pct_error) && near(s.p999, want[3], s.pct_error) &&
	      s.max == want[4] && s.min == dur[0],
	      "P50 %" PRIu64 "/%" PRIu64 " P90 %" PRIu64 "/%" PRIu64 " P99 %" PRIu64 "/%" PRIu64
	      " P99.9 %" PRIu64 "/%" PRIu64 " max %" PRIu64 "/%" PRIu64, s.p50, want[0], s.p90,
	      want[1], s.p99, want[2], s.p999, want[3], s.max, want[4]);
	CHECK(s.pct_error > 0 && s.pct_error < 0.01, "percentile error %f", s.pct_error);
	{
		/* the MAD and the tail count over all steps, within the bucket width */
		uint64_t *dev = calloc(NSTEPS, sizeof(*dev)), mad, thr, ntail = 0;

		REQUIRE(dev, "alloc");
		for (uint64_t i = 0; i < NSTEPS; i++)
			dev[i] = dur[i] > want[0] ? dur[i] - want[0] : want[0] - dur[i];
		qsort(dev, NSTEPS, sizeof(*dev), cmp_u64);
		mad = dev[(NSTEPS + 1) / 2 - 1];
		thr = want[0] + 3 * (mad > want[0] / 100 ? mad : want[0] / 100);
		for (uint64_t i = 0; i < NSTEPS; i++)
			ntail += dur[i] > thr;
		CHECK(near(s.mad, mad, 0.05) && near(s.tail_threshold_ns, thr, 0.02) &&
		      near(s.ntail, ntail, 0.1), "MAD %" PRIu64 "/%" PRIu64 ", threshold %" PRIu64
		      "/%" PRIu64 ", tail %" PRIu64 "/%" PRIu64, s.mad, mad, s.tail_threshold_ns, thr,
		      s.ntail, ntail);
		free(dev);
	}
	{
		/* the final report says what it covers */
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);

		REQUIRE(f, "memstream");
		report_text(e, f);
		fclose(f);
		CHECK(buf && strstr(buf, "over all 2,000,001 steps") && strstr(buf, "the last "),
		      "the report does not say it is windowed: %.600s", buf ? buf : "");
		free(buf);
	}
	free(dur);
	engine_free(e);
}

/*
 * `stepblame report` of a trace with more steps than it keeps in full: past
 * ENG_EXACT_STEPS_MAX it drops to the same window, and its memory with it.
 */
static void t_report_window(void)
{
	struct engine *e = new_engine(NULL);
	uint64_t t = 10 * SEC, n = ENG_EXACT_STEPS_MAX + 200000, heap_full = 0;
	struct engine_stats st;
	struct eng_summary s;

	REQUIRE(e, "engine");
	for (uint64_t k = 0; k <= n; k++, t += 10 * MS + (k % 7) * 100 * US) {
		struct sb_step mk = { 0 };

		hdr(&mk.h, SB_EV_STEP, sizeof(mk), t, T_PID, T_LAUNCHER, 0);
		mk.step = k;
		mk.source = SB_STEP_USDT;
		engine_feed(e, &mk.h);
		if (k == ENG_EXACT_STEPS_MAX - 1000) {
			engine_stats(e, &st);
			heap_full = st.heap_bytes;
		}
	}
	engine_finish(e);
	engine_stats(e, &st);
	engine_summarise(e, &s);
	CHECK(s.windowed && s.nsteps == n + 1 && s.ncomplete == n &&
	      n + 1 - engine_first_step(e) >= ENG_REPORT_KEEP_STEPS &&
	      n + 1 - engine_first_step(e) <= ENG_REPORT_KEEP_STEPS + 1024,
	      "windowed %d, %" PRIu64 " steps, kept from %" PRIu64, s.windowed, s.nsteps,
	      engine_first_step(e));
	CHECK(near(s.p50, 10 * MS + 300 * US, s.pct_error) &&
	      s.max == 10 * MS + 600 * US && s.min == 10 * MS, "P50 %" PRIu64 " min %" PRIu64
	      " max %" PRIu64, s.p50, s.min, s.max);
	CHECK(st.heap_bytes < heap_full / 8, "heap %" PRIu64 " MB after the switch, %" PRIu64
	      " MB before", st.heap_bytes >> 20, heap_full >> 20);
	engine_free(e);
}

/*
 * A run of days meets many short-lived tasks: 70,000 distinct ones take a
 * little CPU from the launcher, one (pid 777) a lot. The table of interferers
 * folds its smaller half instead of growing; the big one stays on top, whole.
 * And 1,000 probe-not-attached lines are not all kept.
 */
static void t_many_interferers_and_probes(void)
{
	struct engine *e = new_engine(NULL);
	struct eng_interferer top[2];
	struct eng_limits lim;
	struct eng_loss loss;
	uint64_t t = 10 * SEC, pid = 100000;
	char line[64];

	REQUIRE(e, "engine");
	for (int i = 0; i < 1000; i++) {
		uint8_t buf[128] = { 0 };
		struct sb_text *x = (struct sb_text *)buf;
		int n = snprintf(line, sizeof(line), "probe%d not found", i);

		hdr(&x->h, SB_REC_PROBE, (sizeof(*x) + n + 7) & ~7ul, 0, T_PID, 0, 0);
		x->len = (uint32_t)n;
		memcpy(x->text, line, n);
		engine_feed(e, &x->h);
	}
	for (int k = 0; k < 1500; k++) {
		struct sb_step mk = { 0 };
		struct sb_switch_out so = { 0 };
		struct sb_switch_in si = { 0 };
		uint64_t s;

		hdr(&mk.h, SB_EV_STEP, sizeof(mk), t, T_PID, T_LAUNCHER, 0);
		mk.step = (uint64_t)k;
		mk.source = SB_STEP_USDT;
		engine_feed(e, &mk.h);
		hdr(&so.h, SB_EV_SWITCH_OUT, sizeof(so), t + 10 * US, T_PID, T_LAUNCHER, 0);
		so.state = SB_STATE_RUNNABLE;
		engine_feed(e, &so.h);
		s = t + 10 * US;
		for (int i = 0; i < 48; i++, s += 10 * US) {
			struct sb_runslice r = { 0 };
			uint32_t p = i == 0 ? 777 : (uint32_t)pid++;

			hdr(&r.h, SB_EV_RUNSLICE, sizeof(r), s + (i == 0 ? 500 * US : 10 * US), p, p, 0);
			r.start_ns = s;
			memcpy(r.comm, i == 0 ? "hog" : "cron", i == 0 ? 3 : 4);
			engine_feed(e, &r.h);
			if (i == 0)
				s += 490 * US;
		}
		hdr(&si.h, SB_EV_SWITCH_IN, sizeof(si), s, T_PID, T_LAUNCHER, 0);
		engine_feed(e, &si.h);
		t += 2 * MS;
	}
	engine_finish(e);
	engine_limits(e, &lim);
	engine_loss(e, &loss);
	CHECK(lim.interferers_folded > 0 && lim.interferers_other_ns > 0,
	      "no interferer folded (%" PRIu64 " tasks)", pid - 100000);
	CHECK(engine_interferers(e, top, 2) == 2 && top[0].pid == 777 &&
	      top[0].ns == 1500 * 500 * US, "top interferer %u with %" PRIu64 " ns", top[0].pid,
	      top[0].ns);
	CHECK(loss.nprobes_missing == 256 && lim.probes_dropped == 744, "%u probes kept, %" PRIu64
	      " dropped", loss.nprobes_missing, lim.probes_dropped);
	engine_free(e);
}

/* ---- a million thread ids and a million kernel names */

#define NTHR 1000000
#define NSHAPES 300000

/*
 * A crafted trace of 100 s: a step every 100 ms, a new thread every 100 us
 * (every other one exits again at once), a new kernel name with it, and
 * 300,000 kernels of distinct shapes. The thread and name tables never
 * shrank: 15x the file in memory.
 */
static bool write_many(const char *path, uint64_t *fsize)
{
	struct world w;
	struct sbt_writer *wr = sbt_create(path);
	uint64_t t0 = now_ns(CLOCK_MONOTONIC) + 1 * SEC, t = t0;
	bool ok = wr != NULL;
	struct stat sb;
	char name[32];

	if (!wr)
		return false;
	world_init(&w);
	for (size_t off = 0; off < w.meta.len;) {
		const struct sb_hdr *h = (const void *)(w.meta.b + off);

		ok &= sbt_write(wr, h) == 0;
		off += h->size;
	}
	world_free(&w);
	for (uint32_t i = 0; i < NTHR; i++, t += 100 * US) {
		struct sb_thread th = { 0 };
		int len = snprintf(name, sizeof(name), "k%u", i);

		if (i % 1000 == 0) {
			struct sb_step mk = { 0 };

			hdr(&mk.h, SB_EV_STEP, sizeof(mk), t, T_PID, T_LAUNCHER, 0);
			mk.step = i / 1000;
			mk.source = SB_STEP_USDT;
			ok &= sbt_write(wr, &mk) == 0;
		}
		hdr(&th.h, SB_EV_THREAD_NEW, sizeof(th), t, T_PID, 1000000 + i, 0);
		snprintf(th.comm, sizeof(th.comm), "w%u", i);
		ok &= sbt_write(wr, &th) == 0;
		if (i % 2) {
			th.h.type = SB_EV_THREAD_EXIT;
			th.h.ts = t + 1 * US;
			ok &= sbt_write(wr, &th) == 0;
		}
		ok &= sbt_write_text(wr, SB_REC_STRING, 1000 + i, t, T_PID, 0, name, len) == 0;
		if (i < NSHAPES) {
			struct sb_gpu g;

			gpu_rec(&g, SB_GPU_KERNEL, t + 10 * US, t + 60 * US, 0);
			g.name_id = 1000 + i;
			g.grid[1] = i;
			ok &= sbt_write(wr, &g) == 0;
		}
	}
	ok &= sbt_finish(wr, SBT_END_DURATION, t0, t, 0) == 0;
	if (!ok || stat(path, &sb))
		return false;
	*fsize = (uint64_t)sb.st_size;
	return true;
}

/*
 * `stepblame report` in a process of its own, without ASan's quarantine: the
 * peak RSS of its own image (VmHWM after exec: ru_maxrss would count the
 * pages the child shared with this process before it)
 */
static int report_rss(const char *in, const char *fmt, const char *out, long *hwm_kb)
{
	char path[300], *s;
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		setenv("ASAN_OPTIONS", "quarantine_size_mb=0:detect_leaks=0", 1);
		execl("/proc/self/exe", "test_hostile", "--report", in, fmt, out, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	snprintf(path, sizeof(path), "%s.hwm", out);
	s = test_slurp(path, NULL);
	*hwm_kb = s ? atol(s) : -1;
	free(s);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* the child of report_rss(): report, then write VmHWM (kB) to OUT.hwm */
static int report_child(const char *in, const char *fmt, const char *out)
{
	int rc = report(in, fmt, out);
	char line[256], path[300];
	FILE *f = fopen("/proc/self/status", "r"), *o;

	snprintf(path, sizeof(path), "%s.hwm", out);
	o = fopen(path, "w");
	while (f && o && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6))
			fprintf(o, "%ld\n", atol(line + 6));
	if (f)
		fclose(f);
	if (o)
		fclose(o);
	return rc;
}

static void t_many_threads_and_names(void)
{
	uint64_t fsize = 0;
	struct engine *e;
	struct engine_stats st;
	struct eng_limits lim;
	char *txt;
	long rss = 0;
	int rc;

	REQUIRE(write_many(tpath("many.sbt"), &fsize), "write: %s", strerror(errno));
	/* the engine's own count of what it holds */
	e = feed_file(tpath("many.sbt"), NULL);
	REQUIRE(e, "engine");
	engine_stats(e, &st);
	engine_limits(e, &lim);
	CHECK(st.heap_bytes_peak < (128ull << 20) && st.heap_bytes_peak < fsize,
	      "engine held %" PRIu64 " MB for a %" PRIu64 " MB trace", st.heap_bytes_peak >> 20,
	      fsize >> 20);
	CHECK(st.threads <= 65536, "%" PRIu64 " threads followed", st.threads);
	CHECK(lim.thread_records_lost && lim.threads_forgotten && lim.strings_dropped &&
	      lim.kernel_shapes_dropped, "caps not counted: %" PRIu64 " %" PRIu64 " %" PRIu64
	      " %" PRIu64, lim.thread_records_lost, lim.threads_forgotten, lim.strings_dropped,
	      lim.kernel_shapes_dropped);
	CHECK(engine_nsteps(e) == 1000, "%" PRIu64 " steps", engine_nsteps(e));
	engine_free(e);

	rc = report_rss(tpath("many.sbt"), "text", tpath("many.txt"), &rss);
	CHECK(rc == 0, "report exited %d", rc);
	CHECK((uint64_t)rss * 1024 < 3 * fsize, "report's peak RSS %ld MB for a %" PRIu64
	      " MB trace", rss >> 10, fsize >> 20);
	txt = test_slurp(tpath("many.txt"), NULL);
	CHECK(txt && strstr(txt, "Limits ") && strstr(txt, "threads not followed") &&
	      strstr(txt, "names (kernel, NVTX) not kept") && strstr(txt, "kernels of shapes"),
	      "the report does not say what it capped: %s", txt ? txt : "(none)");
	free(txt);
	printf("# many: %" PRIu64 " MB trace, engine peak %" PRIu64 " MB, report peak RSS %ld MB\n",
	       fsize >> 20, st.heap_bytes_peak >> 20, rss >> 10);
}

int main(int argc, char **argv)
{
	/* report_rss(): the child */
	if (argc == 5 && !strcmp(argv[1], "--report"))
		return report_child(argv[2], argv[3], argv[4]);
	snprintf(dir, sizeof(dir), "/var/tmp/sb-hostile-XXXXXX");
	if (!mkdtemp(dir)) {
		printf("FAIL setup: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	RUN(t_gpu_times_report);
	RUN(t_gpu_times_live);
	RUN(t_host_time_jump);
	RUN(t_sparse_times);
	RUN(t_window_two_million_steps);
	RUN(t_report_window);
	RUN(t_many_interferers_and_probes);
	RUN(t_many_threads_and_names);
	test_rm_tree(dir);
	return test_summary();
}
