// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The collector and the real agent, end to end: a child process runs the
 * collector (its watcher thread, on fake CUPTI entry points) and feeds it
 * activity records once enabled; the capture loop (collect_run, as `record`
 * and `attach` use it) must turn it on, receive the records on one clock with
 * host thread ids, and leave it dormant again when it stops. Root (BPF).
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "test.h"
#include "capture/collect.h"
#include "collector.h"
#include "format/trace.h"

static bool kinds[64];

static CUptiResult ok_sub(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud)
{
	(void)cb, (void)ud;
	*s = NULL;
	return CUPTI_SUCCESS;
}
static CUptiResult ok_unsub(CUpti_SubscriberHandle s) { (void)s; return CUPTI_SUCCESS; }
static CUptiResult ok_tid(CUpti_ActivityThreadIdType t) { (void)t; return CUPTI_SUCCESS; }
static CUptiResult ok_cbs(CUpti_BuffersCallbackRequestFunc a, CUpti_BuffersCallbackCompleteFunc b)
{
	(void)a, (void)b;
	return CUPTI_SUCCESS;
}
static CUptiResult ok_ts(CUpti_TimestampCallbackFunc f) { (void)f; return CUPTI_SUCCESS; }
static CUptiResult ok_get(uint64_t *t) { *t = sbcupti_timestamp(); return CUPTI_SUCCESS; }
static CUptiResult on(CUpti_ActivityKind k) { kinds[k] = true; return CUPTI_SUCCESS; }
static CUptiResult off(CUpti_ActivityKind k) { kinds[k] = false; return CUPTI_SUCCESS; }
static CUptiResult api(CUpti_CallbackId id, uint8_t e) { (void)id, (void)e; return CUPTI_SUCCESS; }
static CUptiResult period(uint32_t ms) { (void)ms; return CUPTI_SUCCESS; }
static CUptiResult flush(uint32_t f) { (void)f; return CUPTI_SUCCESS; }
static CUptiResult dropped(CUcontext c, uint32_t s, size_t *n)
{
	(void)c, (void)s;
	*n = 0;
	return CUPTI_SUCCESS;
}

static const struct sbcupti_ops ops = {
	.subscribe = ok_sub, .unsubscribe = ok_unsub, .set_thread_id_type = ok_tid,
	.register_callbacks = ok_cbs, .register_timestamp_callback = ok_ts, .get_timestamp = ok_get,
	.enable = on, .disable = off, .enable_runtime_api = api, .enable_driver_api = api,
	.flush_period = period, .flush_all = flush, .dropped = dropped,
};

static enum sbcupti_state state(void)
{
	struct sbcupti_stats st;

	sbcupti_stats(&st);
	return st.state;
}

static bool wait_state(enum sbcupti_state want, int ms)
{
	for (int i = 0; i < ms / 5; i++) {
		if (state() == want)
			return true;
		usleep(5000);
	}
	return state() == want;
}

/* the trainer: exit 0 = enabled, fed, and dormant again after the agent left */
static int child_main(int ready)
{
	struct sbcupti_config cfg = { .ops = &ops, .nbufs = 2, .buf_bytes = 1 << 20, .poll_ms = 20 };
	uint32_t me = (uint32_t)syscall(SYS_gettid);
	uint8_t *buf;
	size_t size, max, off = 0;

	if (sbcupti_start(&cfg))
		return 10;
	if (write(ready, "r", 1) != 1)
		return 11;
	close(ready);
	if (!wait_state(SBCUPTI_ENABLED, 10000))
		return 12;
	if (!kinds[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL])
		return 13;
	sbcupti_buffer_requested(&buf, &size, &max);
	if (!buf)
		return 14;
	uint64_t now = sbcupti_timestamp();
	CUpti_ActivityMarker2 mk;
	memset(&mk, 0, sizeof(mk));
	mk.kind = CUPTI_ACTIVITY_KIND_MARKER;
	mk.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
	mk.timestamp = now;
	mk.id = 1;
	mk.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
	mk.objectId.pt.threadId = me;
	mk.name = "step 1";
	memcpy(buf + off, &mk, sizeof(mk));
	off += sizeof(mk);
	for (uint32_t i = 0; i < 3; i++) {
		CUpti_ActivityAPI a;
		CUpti_ActivityKernel10 k;

		memset(&a, 0, sizeof(a));
		a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
		a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
		a.start = now + 1000 + i * 10000;
		a.end = a.start + 3000;
		a.threadId = me;
		a.correlationId = 500 + i;
		memcpy(buf + off, &a, sizeof(a));
		off += sizeof(a);
		memset(&k, 0, sizeof(k));
		k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
		k.start = a.end + 500;
		k.end = k.start + 5000;
		k.correlationId = 500 + i;
		k.name = "agent_test_kernel";
		memcpy(buf + off, &k, sizeof(k));
		off += sizeof(k);
	}
	mk.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
	mk.timestamp = now + 40000;
	mk.name = NULL;
	memcpy(buf + off, &mk, sizeof(mk));
	off += sizeof(mk);
	sbcupti_buffer_completed(NULL, 0, buf, size, off);
	/* the agent stops after its -d: collection must go off again */
	if (!wait_state(SBCUPTI_DORMANT, 15000))
		return 15;
	for (int i = 0; i < 64; i++)
		if (kinds[i])
			return 16;
	return 0;
}

struct cap {
	struct sb_hdr **recs;
	size_t n, cap;
};

static int mem_sink(void *ctx, const struct sb_hdr *r)
{
	struct cap *c = ctx;

	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 4096;
		c->recs = realloc(c->recs, c->cap * sizeof(*c->recs));
		if (!c->recs)
			abort();
	}
	c->recs[c->n] = malloc(r->size);
	memcpy(c->recs[c->n], r, r->size);
	c->n++;
	return 0;
}

static void t_agent_turns_collector_on_and_off(void)
{
	struct collect_opts o = { .agent_cpu = -2, .quiet = true };
	struct collect_result res;
	struct cap c = {};
	int p[2], status, rc;
	uint64_t t0;
	char r;
	pid_t pid;

	NEED_BPF();
	REQUIRE(!pipe(p), "pipe");
	pid = fork();
	if (pid == 0) {
		int rc;

		close(p[0]);
		rc = child_main(p[1]);
		sbcupti_stop(); /* _exit runs no atexit hook: take the channel file away */
		_exit(rc);
	}
	close(p[1]);
	REQUIRE(read(p[0], &r, 1) == 1, "collector child did not start");
	close(p[0]);
	o.probe.pid = pid;
	o.probe.ring_bytes = 4 << 20;
	o.probe.wake_bytes = 16 << 10;
	o.probe.no_alloc = true;
	o.probe.alloc_min_ns = 10000;
	o.duration_ns = 2000000000ll;
	collect_stop = 0;
	t0 = sbcupti_timestamp();
	rc = collect_run(&o, mem_sink, &c, &res);
	waitpid(pid, &status, 0);
	REQUIRE(rc == 0, "capture failed to start");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "collector child: status 0x%x "
	      "(12 never enabled, 15 not dormant after the agent left, 16 kinds left on)", status);
	CHECK(res.gpu, "the capture did not read the GPU channel");

	size_t kernels = 0, apis = 0, push = 0, pop = 0;
	uint32_t kname = 0, step_name = 0;
	bool note = false;

	for (size_t i = 0; i < c.n; i++) {
		const struct sb_hdr *h = c.recs[i];

		if (h->type == SB_REC_NOTE) {
			const struct sb_text *t = (const void *)h;

			if (memmem(t->text, t->len, "reading the cupti channel", 25))
				note = true;
		}
		if (h->type == SB_REC_STRING) {
			const struct sb_text *t = (const void *)h;

			if (t->len == 17 && !memcmp(t->text, "agent_test_kernel", 17))
				kname = t->id;
			if (t->len == 6 && !memcmp(t->text, "step 1", 6))
				step_name = t->id;
		}
		if (h->type != SB_REC_GPU)
			continue;
		const struct sb_gpu *g = (const void *)h;

		CHECK(g->h.pid == (uint32_t)pid, "GPU record of pid %u", g->h.pid);
		CHECK(g->h.ts >= t0 && g->h.ts < t0 + 10000000000ull, "timestamp %llu not on this "
		      "machine's CLOCK_MONOTONIC (capture began %llu)", (unsigned long long)g->h.ts,
		      (unsigned long long)t0);
		if (g->h.flags == SB_GPU_KERNEL) {
			kernels++;
			CHECK(kname && g->name_id == kname, "kernel name id %u before its string %u",
			      g->name_id, kname);
		}
		if (g->h.flags == SB_GPU_API) {
			apis++;
			/* the child is single-threaded here: its main thread made the calls */
			CHECK(g->h.tid == (uint32_t)pid, "API record on tid %u, want %d", g->h.tid,
			      (int)pid);
			CHECK(g->sub == SB_API_LAUNCH, "API sub %u", g->sub);
		}
		if (g->h.flags == SB_GPU_MARKER && g->sub == SB_MARK_RANGE_PUSH)
			push += g->name_id == step_name && step_name;
		if (g->h.flags == SB_GPU_MARKER && g->sub == SB_MARK_RANGE_POP)
			pop += g->name_id == step_name && step_name;
	}
	CHECK(note, "no note that the cupti channel is read");
	CHECK(kernels == 3 && apis == 3, "got %zu kernels and %zu API records, want 3 and 3",
	      kernels, apis);
	CHECK(push == 1 && pop == 1, "NVTX range: %zu push, %zu pop named 'step 1'", push, pop);
	for (size_t i = 0; i < c.n; i++)
		free(c.recs[i]);
	free(c.recs);
}

int main(void)
{
	RUN(t_agent_turns_collector_on_and_off);
	return test_summary();
}
