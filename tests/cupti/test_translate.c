// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The CUPTI collector without a GPU: activity records built in memory go
 * through the same buffer-completed path CUPTI calls, and come out of the
 * channel (read back in-process with the agent API) field by field. The
 * state machine runs on fake CUPTI entry points that count what is enabled;
 * the real CUPTI is used where it works without a driver (walking buffers,
 * callback names) and for the failed initialisation.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "test.h"
#include "collector.h"
#include "format/trace.h"

/* ---- fake CUPTI ---- */

static struct fake {
	CUptiResult subscribe_rc, tid_rc, ts_cb_rc, rt_api_rc;
	CUpti_ActivityKind fail_kind;     /* enable of this kind fails (0: none) */
	CUptiResult fail_rc;
	bool on[64];                      /* kinds on now */
	int enable_calls, disable_calls, flush_calls;
	uint32_t last_flush_flag;
	int rt_on, rt_off, drv_on, drv_off;
	int subscribed, unsubscribed;
	size_t dropped_next;
	int64_t clock_behind;             /* fake CUPTI clock = monotonic - this */
	uint8_t *pending;                 /* delivered by the next flush */
	size_t pending_valid;
} fk;

static CUptiResult f_subscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud)
{
	(void)cb, (void)ud;
	*s = (CUpti_SubscriberHandle)(uintptr_t)0x5b;
	if (fk.subscribe_rc == CUPTI_SUCCESS)
		fk.subscribed++;
	return fk.subscribe_rc;
}

static CUptiResult f_unsubscribe(CUpti_SubscriberHandle s)
{
	(void)s;
	fk.unsubscribed++;
	return CUPTI_SUCCESS;
}

/* is the collector holding the subscription now? */
static bool held(void)
{
	return fk.subscribed > fk.unsubscribed;
}

static CUptiResult f_tid(CUpti_ActivityThreadIdType t)
{
	return t == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM ? fk.tid_rc : CUPTI_ERROR_INVALID_PARAMETER;
}

static CUptiResult f_callbacks(CUpti_BuffersCallbackRequestFunc a, CUpti_BuffersCallbackCompleteFunc b)
{
	return a && b ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

static CUptiResult f_ts_cb(CUpti_TimestampCallbackFunc f)
{
	return f ? fk.ts_cb_rc : CUPTI_ERROR_INVALID_PARAMETER;
}

static uint64_t mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static CUptiResult f_get_ts(uint64_t *t)
{
	*t = mono() - fk.clock_behind;
	return CUPTI_SUCCESS;
}

static CUptiResult f_enable(CUpti_ActivityKind k)
{
	fk.enable_calls++;
	if (fk.fail_kind && k == fk.fail_kind)
		return fk.fail_rc;
	fk.on[k] = true;
	return CUPTI_SUCCESS;
}

static CUptiResult f_disable(CUpti_ActivityKind k)
{
	fk.disable_calls++;
	fk.on[k] = false;
	return CUPTI_SUCCESS;
}

static CUptiResult f_rt_api(CUpti_CallbackId id, uint8_t on)
{
	(void)id;
	if (fk.rt_api_rc != CUPTI_SUCCESS)
		return fk.rt_api_rc;
	if (on)
		fk.rt_on++;
	else
		fk.rt_off++;
	return CUPTI_SUCCESS;
}

static CUptiResult f_drv_api(CUpti_CallbackId id, uint8_t on)
{
	(void)id;
	if (on)
		fk.drv_on++;
	else
		fk.drv_off++;
	return CUPTI_SUCCESS;
}

static CUptiResult f_period(uint32_t ms)
{
	return ms ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

static CUptiResult f_flush(uint32_t flag)
{
	fk.flush_calls++;
	fk.last_flush_flag = flag;
	if (fk.pending) {
		uint8_t *b = fk.pending;

		fk.pending = NULL;
		sbcupti_buffer_completed(NULL, 0, b, SBCUPTI_DEFAULT_BUF_BYTES, fk.pending_valid);
	}
	return CUPTI_SUCCESS;
}

static CUptiResult f_dropped(CUcontext c, uint32_t s, size_t *n)
{
	(void)c, (void)s;
	*n = fk.dropped_next;
	fk.dropped_next = 0;
	return CUPTI_SUCCESS;
}

static const struct sbcupti_ops fake_ops = {
	.subscribe = f_subscribe, .unsubscribe = f_unsubscribe, .set_thread_id_type = f_tid,
	.register_callbacks = f_callbacks, .register_timestamp_callback = f_ts_cb,
	.get_timestamp = f_get_ts, .enable = f_enable, .disable = f_disable,
	.enable_runtime_api = f_rt_api, .enable_driver_api = f_drv_api, .flush_period = f_period,
	.flush_all = f_flush, .dropped = f_dropped,
};

static int kinds_on(void)
{
	int n = 0;

	for (int i = 0; i < 64; i++)
		n += fk.on[i];
	return n;
}

/* ---- stderr capture ---- */

static int saved_err = -1;
static char err_path[64];

static void capture_stderr(void)
{
	int fd;

	snprintf(err_path, sizeof(err_path), "/tmp/sbcupti-err.XXXXXX");
	fd = mkstemp(err_path);
	fflush(stderr);
	saved_err = dup(2);
	dup2(fd, 2);
	close(fd);
}

/* what was written to stderr since capture_stderr() */
static char *captured_stderr(void)
{
	static char buf[4096];
	int fd;
	ssize_t n;

	fflush(stderr);
	dup2(saved_err, 2);
	close(saved_err);
	fd = open(err_path, O_RDONLY);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : 0;
	buf[n > 0 ? n : 0] = 0;
	if (fd >= 0)
		close(fd);
	unlink(err_path);
	return buf;
}

static int count_lines(const char *s, const char *prefix)
{
	int n = 0;

	for (const char *p = s; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, prefix, strlen(prefix)))
			n++;
	return n;
}

/* ---- the agent side, in-process ---- */

#define MAXR 256

struct got {
	struct sb_gpu g[MAXR];
	int n;
	char names[SBC_STRINGS + 1][SBC_STRING_SIZE];
};

static int got_cb(void *ctx, const struct sb_hdr *h)
{
	struct got *o = ctx;

	if (h->type == SB_REC_STRING) {
		const struct sb_text *t = (const void *)h;

		if (t->id && t->id <= SBC_STRINGS)
			snprintf(o->names[t->id], SBC_STRING_SIZE, "%.*s", (int)t->len, t->text);
		return 0;
	}
	if (h->type == SB_REC_GPU && o->n < MAXR)
		memcpy(&o->g[o->n++], h, sizeof(struct sb_gpu));
	return 0;
}

static const char *name_of(struct got *o, uint32_t id)
{
	return id && id <= SBC_STRINGS ? o->names[id] : "";
}

static struct got *drain(struct sbc_reader *r)
{
	struct got *o = calloc(1, sizeof(*o));

	sbc_drain(r, got_cb, o);
	return o;
}

static int start_fake(unsigned nslots, bool watcher)
{
	struct sbcupti_config cfg = {
		.ops = &fake_ops, .nbufs = 4, .buf_bytes = 1 << 20, .no_watcher = !watcher,
		.no_atexit = true, .poll_ms = 10, .nslots = nslots,
	};

	return sbcupti_start(&cfg);
}

static void reset_fake(void)
{
	memset(&fk, 0, sizeof(fk));
}

static struct sbc_reader *agent(void)
{
	char err[256];
	struct sbc_reader *r = sbc_attach(getpid(), err, sizeof(err));

	if (r && sbc_set_enabled(r, true)) {
		sbc_detach(r);
		return NULL;
	}
	return r;
}

/* ---- building activity buffers ---- */

struct abuf {
	uint8_t *p;
	size_t off, cap;
};

static void put(struct abuf *b, const void *rec, size_t size)
{
	if (b->off + size <= b->cap) {
		memcpy(b->p + b->off, rec, size);
		b->off += size;
	}
}

#define PUT(b, r) put((b), &(r), sizeof(r))

static struct abuf pool_buffer(void)
{
	struct abuf b = {};
	size_t max;

	sbcupti_buffer_requested(&b.p, &b.cap, &max);
	return b;
}

static CUpti_ActivityKernel10 kernel(uint64_t start, uint64_t end, uint32_t corr, const char *name)
{
	CUpti_ActivityKernel10 k;

	memset(&k, 0, sizeof(k));
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k.start = start;
	k.end = end;
	k.correlationId = corr;
	k.name = name;
	return k;
}

/* ---- cases ---- */

static void t_struct_sizes(void)
{
	/* the record layouts of CUPTI 13.0, the version the collector is built against */
	CHECK(sizeof(CUpti_ActivityKernel10) == 216, "Kernel10 is %zu bytes",
	      sizeof(CUpti_ActivityKernel10));
	CHECK(sizeof(CUpti_ActivityMemcpy6) == 96, "Memcpy6 is %zu bytes",
	      sizeof(CUpti_ActivityMemcpy6));
}

static void t_api_classes(void)
{
	static const struct {
		CUpti_CallbackDomain d;
		CUpti_CallbackId id;
		unsigned cls;
		const char *name;
	} want[] = {
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
		  SB_API_LAUNCH, "cudaLaunchKernel" },
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
		  SB_API_LAUNCH, "cudaLaunchKernel" },
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
		  SB_API_LAUNCH, "cudaGraphLaunch" },
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
		  SB_API_SYNC, "cudaStreamSynchronize" },
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
		  SB_API_SYNC, "cudaDeviceSynchronize" },
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
		  SB_API_ALLOC, "cudaMalloc" },
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
		  SB_API_ALLOC, "cudaMallocAsync" },
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020,
		  SB_API_FREE, "cudaFree" },
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
		  SB_API_MEMCPY, "cudaMemcpyAsync" },
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
		  SB_API_OTHER, "cudaMemsetAsync" },
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 0,
		  "cudaGetDevice" },
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020, 0,
		  "cudaStreamWaitEvent" },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
		  SB_API_LAUNCH, "cuLaunchKernel" },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
		  SB_API_LAUNCH, "cuLaunchKernelEx" },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
		  SB_API_SYNC, "cuCtxSynchronize" },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
		  SB_API_ALLOC, "cuMemAlloc_v2" },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
		  SB_API_FREE, "cuMemFree_v2" },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2,
		  SB_API_MEMCPY, "cuMemcpyHtoD_v2" },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice, 0,
		  "cuCtxGetDevice" },
	};
	char buf[128];

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		CHECK(sbcupti_api_class(want[i].d, want[i].id) == want[i].cls,
		      "%s: class %u, want %u", want[i].name, sbcupti_api_class(want[i].d, want[i].id),
		      want[i].cls);
		CHECK(!strcmp(sbcupti_api_name(want[i].d, want[i].id, buf, sizeof(buf)), want[i].name),
		      "cbid %u named '%s', want '%s'", want[i].id, buf, want[i].name);
	}
	CHECK(sbcupti_api_class(CUPTI_CB_DOMAIN_RUNTIME_API, 0) == 0, "cbid 0 collected");
	CHECK(sbcupti_api_class(CUPTI_CB_DOMAIN_RUNTIME_API, 100000) == 0, "huge cbid collected");
	CHECK(sbcupti_copy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD) == SB_COPY_HTOD &&
	      sbcupti_copy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH) == SB_COPY_DTOH &&
	      sbcupti_copy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD) == SB_COPY_DTOD &&
	      sbcupti_copy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_HTOH) == SB_COPY_HTOH &&
	      sbcupti_copy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_PTOP) == SB_COPY_PEER &&
	      sbcupti_copy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_HTOA) == SB_COPY_HTOD &&
	      sbcupti_copy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN) == SB_COPY_OTHER,
	      "copy kind mapping");
}

static const struct sb_gpu *find(struct got *o, unsigned kind, uint32_t corr)
{
	for (int i = 0; i < o->n; i++)
		if (o->g[i].h.flags == kind && o->g[i].correlation_id == corr)
			return &o->g[i];
	return NULL;
}

static void t_records_field_by_field(void)
{
	struct sbcupti_stats st;
	struct sbc_reader *r;
	struct abuf b;
	struct got *o;
	uint64_t ring, strings, source;
	const uint64_t T = 5000000000ull;
	const uint32_t me = (uint32_t)syscall(SYS_gettid);

	reset_fake();
	REQUIRE(start_fake(0, false) == 0, "start failed");
	r = agent();
	REQUIRE(r, "cannot attach to our own channel");
	sbcupti_poll();
	sbcupti_stats(&st);
	REQUIRE(st.state == SBCUPTI_ENABLED, "state %d after the agent enabled", st.state);
	b = pool_buffer();
	REQUIRE(b.p && b.cap == 1 << 20, "no pool buffer");

	CUpti_ActivityKernel10 k = kernel(T + 100, T + 900, 101, "sgemm_128x64_nn");
	k.deviceId = 1;
	k.streamId = 7;
	k.gridX = 120, k.gridY = 2, k.gridZ = 1;
	k.blockX = 256, k.blockY = 1, k.blockZ = 1;
	k.graphId = 33;
	k.graphNodeId = 0x123456789ull;
	PUT(&b, k);

	CUpti_ActivityMemcpy6 mc;
	memset(&mc, 0, sizeof(mc));
	mc.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	mc.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
	mc.bytes = 1 << 22;
	mc.start = T + 1000;
	mc.end = T + 3000;
	mc.deviceId = 1;
	mc.streamId = 8;
	mc.correlationId = 102;
	mc.graphId = 4;
	mc.graphNodeId = 5;
	PUT(&b, mc);

	CUpti_ActivityMemcpyPtoP4 p2p;
	memset(&p2p, 0, sizeof(p2p));
	p2p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
	p2p.bytes = 777;
	p2p.start = T + 3100;
	p2p.end = T + 3200;
	p2p.deviceId = 2;
	p2p.streamId = 9;
	p2p.correlationId = 103;
	PUT(&b, p2p);

	CUpti_ActivityMemset4 ms;
	memset(&ms, 0, sizeof(ms));
	ms.kind = CUPTI_ACTIVITY_KIND_MEMSET;
	ms.bytes = 4096;
	ms.start = T + 4000;
	ms.end = T + 4100;
	ms.deviceId = 1;
	ms.streamId = 7;
	ms.correlationId = 104;
	PUT(&b, ms);

	CUpti_ActivityAPI api;
	memset(&api, 0, sizeof(api));
	api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
	api.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
	api.start = T + 10;
	api.end = T + 40;
	api.processId = (uint32_t)getpid();
	api.threadId = me;
	api.correlationId = 101;
	PUT(&b, api);
	api.kind = CUPTI_ACTIVITY_KIND_DRIVER;
	api.cbid = CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2;
	api.start = T + 50;
	api.end = T + 60;
	api.correlationId = 105;
	PUT(&b, api);
	/* not collected: filtered even when the whole API kind is on */
	api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
	api.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020;
	api.correlationId = 106;
	PUT(&b, api);

	CUpti_ActivitySynchronization2 sy;
	memset(&sy, 0, sizeof(sy));
	sy.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
	sy.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
	sy.start = T + 5000;
	sy.end = T + 9000;
	sy.correlationId = 107;
	sy.streamId = 7;
	PUT(&b, sy);

	CUpti_ActivityMarker2 mk;
	memset(&mk, 0, sizeof(mk));
	mk.kind = CUPTI_ACTIVITY_KIND_MARKER;
	mk.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
	mk.timestamp = T + 1;
	mk.id = 9;
	mk.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
	mk.objectId.pt.processId = (uint32_t)getpid();
	mk.objectId.pt.threadId = me;
	mk.name = "step 3";
	PUT(&b, mk);
	mk.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
	mk.timestamp = T + 9500;
	mk.name = NULL;           /* what CUPTI leaves on a range's end */
	PUT(&b, mk);
	mk.flags = CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS;
	mk.timestamp = T + 9600;
	mk.id = 10;
	mk.name = "checkpoint";
	PUT(&b, mk);

	CUpti_ActivityOverhead3 ov;
	memset(&ov, 0, sizeof(ov));
	ov.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
	ov.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
	ov.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
	ov.objectId.pt.threadId = me;
	ov.start = T + 9700;
	ov.end = T + 9800;
	ov.correlationId = 108;
	PUT(&b, ov);

	/* zero timestamps: both (skipped, counted as lost), end only, start only */
	CUpti_ActivityKernel10 z = kernel(0, 0, 201, "lost_kernel");
	PUT(&b, z);
	z = kernel(T + 20000, 0, 202, "unfinished_kernel");
	PUT(&b, z);
	mc.start = 0;
	mc.end = T + 21000;
	mc.correlationId = 203;
	PUT(&b, mc);
	z = kernel(T + 30000, T + 29000, 204, "backwards_kernel");
	PUT(&b, z);

	/* a kind we do not collect */
	CUpti_ActivityContext3 cx;
	memset(&cx, 0, sizeof(cx));
	cx.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
	PUT(&b, cx);

	fk.dropped_next = 5;
	sbcupti_buffer_completed(NULL, 0, b.p, b.cap, b.off);
	o = drain(r);

	const struct sb_gpu *g;

	CHECK(o->n == 14, "drained %d records, want 14", o->n);
	g = find(o, SB_GPU_KERNEL, 101);
	REQUIRE(g, "kernel 101 missing");
	CHECK(g->h.type == SB_REC_GPU && g->h.size == sizeof(struct sb_gpu), "kernel header");
	CHECK(g->h.pid == (uint32_t)getpid(), "kernel pid %u", g->h.pid);
	CHECK(g->h.tid == 0, "kernel tid %u", g->h.tid);
	CHECK(g->h.ts == T + 100 && g->end_ns == T + 900, "kernel times %llu..%llu",
	      (unsigned long long)g->h.ts, (unsigned long long)g->end_ns);
	CHECK(g->device == 1 && g->stream == 7, "kernel device %u stream %u", g->device, g->stream);
	CHECK(g->grid[0] == 120 && g->grid[1] == 2 && g->grid[2] == 1, "kernel grid");
	CHECK(g->block[0] == 256 && g->block[1] == 1 && g->block[2] == 1, "kernel block");
	CHECK(g->graph_id == 33 && g->graph_node_id == 0x123456789ull, "kernel graph ids");
	CHECK(!strcmp(name_of(o, g->name_id), "sgemm_128x64_nn"), "kernel name '%s'",
	      name_of(o, g->name_id));
	CHECK(g->bytes == 0 && g->sub == 0, "kernel bytes/sub");

	g = find(o, SB_GPU_MEMCPY, 102);
	REQUIRE(g, "memcpy 102 missing");
	CHECK(g->sub == SB_COPY_DTOH && g->bytes == 1 << 22, "memcpy sub %u bytes %llu", g->sub,
	      (unsigned long long)g->bytes);
	CHECK(g->h.ts == T + 1000 && g->end_ns == T + 3000, "memcpy times");
	CHECK(g->device == 1 && g->stream == 8 && g->graph_id == 4 && g->graph_node_id == 5,
	      "memcpy ids");
	CHECK(g->name_id == 0, "memcpy has a name");

	g = find(o, SB_GPU_MEMCPY, 103);
	REQUIRE(g, "peer memcpy 103 missing");
	CHECK(g->sub == SB_COPY_PEER && g->bytes == 777 && g->device == 2 && g->stream == 9,
	      "peer memcpy fields");

	g = find(o, SB_GPU_MEMSET, 104);
	REQUIRE(g, "memset 104 missing");
	CHECK(g->bytes == 4096 && g->h.ts == T + 4000 && g->end_ns == T + 4100 &&
	      g->device == 1 && g->stream == 7, "memset fields");

	g = find(o, SB_GPU_API, 101);
	REQUIRE(g, "runtime API 101 missing");
	CHECK(g->sub == SB_API_LAUNCH, "launch sub %u", g->sub);
	CHECK(g->h.tid == me, "API tid %u, want %u", g->h.tid, me);
	CHECK(g->h.ts == T + 10 && g->end_ns == T + 40, "API times");
	CHECK(!strcmp(name_of(o, g->name_id), "cudaLaunchKernel"), "API name '%s'",
	      name_of(o, g->name_id));

	g = find(o, SB_GPU_API, 105);
	REQUIRE(g, "driver API 105 missing");
	CHECK(g->sub == SB_API_ALLOC && !strcmp(name_of(o, g->name_id), "cuMemAlloc_v2"),
	      "driver API sub %u name '%s'", g->sub, name_of(o, g->name_id));
	CHECK(!find(o, SB_GPU_API, 106), "cudaGetDevice was not filtered");

	g = find(o, SB_GPU_SYNC, 107);
	REQUIRE(g, "sync 107 missing");
	CHECK(g->sub == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE && g->stream == 7 &&
	      g->h.ts == T + 5000 && g->end_ns == T + 9000, "sync fields");

	g = find(o, SB_GPU_MARKER, 9);
	REQUIRE(g, "range push missing");
	CHECK(g->sub == SB_MARK_RANGE_PUSH && g->h.ts == T + 1 && g->end_ns == T + 1 &&
	      g->h.tid == me, "push sub %u tid %u", g->sub, g->h.tid);
	CHECK(!strcmp(name_of(o, g->name_id), "step 3"), "push name '%s'", name_of(o, g->name_id));
	{
		const struct sb_gpu *pop = NULL;

		for (int i = 0; i < o->n; i++)
			if (o->g[i].h.flags == SB_GPU_MARKER && o->g[i].sub == SB_MARK_RANGE_POP)
				pop = &o->g[i];
		REQUIRE(pop, "range pop missing");
		CHECK(pop->correlation_id == 9 && pop->h.ts == T + 9500 && pop->h.tid == me,
		      "pop fields");
		CHECK(pop->name_id == g->name_id, "pop did not get the push's name");
	}
	g = find(o, SB_GPU_MARKER, 10);
	REQUIRE(g, "instant marker missing");
	CHECK(g->sub == SB_MARK_INSTANT && !strcmp(name_of(o, g->name_id), "checkpoint"),
	      "instant fields");

	g = find(o, SB_GPU_OVERHEAD, 108);
	REQUIRE(g, "overhead missing");
	CHECK(g->sub == CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH && g->h.tid == me &&
	      g->h.ts == T + 9700 && g->end_ns == T + 9800, "overhead fields");
	CHECK(!strcmp(name_of(o, g->name_id), "cupti buffer flush"), "overhead name '%s'",
	      name_of(o, g->name_id));

	CHECK(!find(o, SB_GPU_KERNEL, 201), "kernel with no timestamps was emitted");
	g = find(o, SB_GPU_KERNEL, 202);
	REQUIRE(g, "kernel with end 0 missing");
	CHECK(g->h.ts == T + 20000 && g->end_ns == T + 20000, "end 0: %llu..%llu",
	      (unsigned long long)g->h.ts, (unsigned long long)g->end_ns);
	g = find(o, SB_GPU_MEMCPY, 203);
	REQUIRE(g, "memcpy with start 0 missing");
	CHECK(g->h.ts == T + 21000 && g->end_ns == T + 21000, "start 0: %llu..%llu",
	      (unsigned long long)g->h.ts, (unsigned long long)g->end_ns);
	g = find(o, SB_GPU_KERNEL, 204);
	REQUIRE(g, "backwards kernel missing");
	CHECK(g->h.ts == T + 30000 && g->end_ns == T + 30000, "end before start kept");

	sbc_counters(r, &ring, &strings, &source);
	CHECK(source == 6, "source drops %llu, want 5 from CUPTI + 1 untimed",
	      (unsigned long long)source);
	CHECK(ring == 0 && strings == 0, "channel drops %llu/%llu", (unsigned long long)ring,
	      (unsigned long long)strings);
	sbcupti_stats(&st);
	CHECK(st.records == 17, "walked %llu records, want 17", (unsigned long long)st.records);
	CHECK(st.emitted == 14, "emitted %llu", (unsigned long long)st.emitted);
	CHECK(st.zero_skipped == 1 && st.zero_fixed == 3, "zero timestamps: %llu skipped, "
	      "%llu fixed", (unsigned long long)st.zero_skipped, (unsigned long long)st.zero_fixed);
	CHECK(st.filtered == 2, "filtered %llu, want 2", (unsigned long long)st.filtered);
	CHECK(st.source_drops == 6, "stats source drops %llu", (unsigned long long)st.source_drops);
	CHECK(st.bufs_free == st.bufs_total && st.bufs_total == 4, "buffer not back in the pool "
	      "(%u of %u free)", st.bufs_free, st.bufs_total);
	free(o);
	sbc_detach(r);
	sbcupti_stop();
}

/* an empty buffer, and a buffer walked while no agent listens */
static void t_empty_and_inactive(void)
{
	struct sbcupti_stats st;
	struct abuf b;

	reset_fake();
	REQUIRE(start_fake(0, false) == 0, "start failed");
	b = pool_buffer();
	sbcupti_buffer_completed(NULL, 0, b.p, b.cap, 0);
	b = pool_buffer();
	CUpti_ActivityKernel10 k = kernel(1000, 2000, 1, "k");
	PUT(&b, k);
	sbcupti_buffer_completed(NULL, 0, b.p, b.cap, b.off);
	sbcupti_stats(&st);
	CHECK(st.records == 1 && st.emitted == 0 && st.inactive == 1,
	      "records %llu emitted %llu inactive %llu", (unsigned long long)st.records,
	      (unsigned long long)st.emitted, (unsigned long long)st.inactive);
	CHECK(st.bufs_free == 4, "%u buffers free", st.bufs_free);
	sbcupti_stop();
}

static void t_ring_full_counted(void)
{
	struct sbc_reader *r;
	struct abuf b;
	struct got *o;
	uint64_t ring;

	reset_fake();
	REQUIRE(start_fake(16, false) == 0, "start failed");
	r = agent();
	REQUIRE(r, "no agent");
	sbcupti_poll();
	b = pool_buffer();
	for (uint32_t i = 0; i < 20; i++) {
		CUpti_ActivityKernel10 k = kernel(1000 + i, 2000 + i, i + 1, NULL);

		PUT(&b, k);
	}
	sbcupti_buffer_completed(NULL, 0, b.p, b.cap, b.off);
	o = drain(r);
	sbc_counters(r, &ring, NULL, NULL);
	CHECK(o->n == 16 && ring == 4, "16-slot ring: %d delivered, %llu dropped", o->n,
	      (unsigned long long)ring);
	free(o);
	sbc_detach(r);
	sbcupti_stop();
}

static void t_pool_exhaustion(void)
{
	struct sbcupti_stats st;
	uint8_t *bufs[5];
	size_t size, max;

	reset_fake();
	REQUIRE(start_fake(0, false) == 0, "start failed");
	for (int i = 0; i < 5; i++)
		sbcupti_buffer_requested(&bufs[i], &size, &max);
	CHECK(bufs[0] && bufs[3] && !bufs[4], "pool of 4 handed out a 5th buffer");
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < i; j++)
			CHECK(bufs[i] != bufs[j], "buffer handed out twice");
	sbcupti_stats(&st);
	CHECK(st.pool_empty == 1 && st.bufs_free == 0, "pool_empty %llu free %u",
	      (unsigned long long)st.pool_empty, st.bufs_free);
	for (int i = 0; i < 4; i++)
		sbcupti_buffer_completed(NULL, 0, bufs[i], size, 0);
	sbcupti_stats(&st);
	CHECK(st.bufs_free == 4, "%u buffers back", st.bufs_free);
	sbcupti_stop();
}

/* the path of this process's channel file in /dev/shm; "" if there is none */
static void own_channel(char *path, size_t len)
{
	char pat[64];
	glob_t g;

	path[0] = 0;
	snprintf(pat, sizeof(pat), SBC_DIR "/" SBC_NAME_PREFIX "%d-*" SBC_NAME_SUFFIX, (int)getpid());
	if (!glob(pat, 0, NULL, &g)) {
		if (g.gl_pathc)
			snprintf(path, len, "%s", g.gl_pathv[0]);
		globfree(&g);
	}
}

/* the heartbeat field, written directly as a dead agent would leave it */
static void stale_heartbeat(void)
{
	char path[SBC_PATH_MAX];
	int fd;
	void *m;

	own_channel(path, sizeof(path));
	fd = open(path, O_RDWR);
	if (fd < 0)
		return;
	m = mmap(NULL, SBC_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return;
	__atomic_store_n(&((struct sbc_header *)m)->heartbeat_ns, 1, __ATOMIC_RELAXED);
	munmap(m, SBC_HEADER_SIZE);
}

static void t_dormant_enabled_disabled(void)
{
	struct sbcupti_stats st;
	struct sbc_reader *r;
	int rt_on, drv_on;

	reset_fake();
	REQUIRE(start_fake(0, false) == 0, "start failed");
	sbcupti_poll();
	sbcupti_stats(&st);
	CHECK(st.state == SBCUPTI_DORMANT, "state %d without an agent", st.state);
	CHECK(fk.enable_calls == 0 && fk.rt_on == 0 && fk.drv_on == 0 && kinds_on() == 0,
	      "dormant collector enabled something (%d kinds)", kinds_on());
	CHECK(fk.subscribed == 1 && !held() && !st.subscribed,
	      "dormant collector holds the CUPTI subscription (%d subscribes, %d unsubscribes)",
	      fk.subscribed, fk.unsubscribed);
	CHECK(st.clock_callback, "timestamp callback not in use");

	r = agent();
	REQUIRE(r, "no agent");
	sbcupti_poll();
	sbcupti_stats(&st);
	CHECK(st.state == SBCUPTI_ENABLED, "state %d after enable", st.state);
	CHECK(held() && st.subscribed, "enabled without a subscription");
	CHECK(kinds_on() == 7 && st.kinds_on == 7, "%d kinds on, want 7", kinds_on());
	CHECK(fk.on[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] && !fk.on[CUPTI_ACTIVITY_KIND_KERNEL],
	      "CONCURRENT_KERNEL must be used, not KERNEL");
	CHECK(fk.on[CUPTI_ACTIVITY_KIND_MARKER] && fk.on[CUPTI_ACTIVITY_KIND_SYNCHRONIZATION] &&
	      fk.on[CUPTI_ACTIVITY_KIND_OVERHEAD] && fk.on[CUPTI_ACTIVITY_KIND_MEMCPY] &&
	      fk.on[CUPTI_ACTIVITY_KIND_MEMSET], "a kind is missing");
	CHECK(!fk.on[CUPTI_ACTIVITY_KIND_RUNTIME] && !fk.on[CUPTI_ACTIVITY_KIND_DRIVER],
	      "whole API kinds enabled although per-call control works");
	CHECK(fk.rt_on > 20 && fk.rt_on < 200, "%d runtime calls enabled", fk.rt_on);
	CHECK(fk.drv_on > 20 && fk.drv_on < 200, "%d driver calls enabled", fk.drv_on);
	rt_on = fk.rt_on;
	drv_on = fk.drv_on;
	sbcupti_poll(); /* steady: nothing changes */
	CHECK(fk.rt_on == rt_on && fk.enable_calls == 7, "steady poll re-enabled");

	sbc_set_enabled(r, false);
	sbcupti_poll();
	sbcupti_stats(&st);
	CHECK(st.state == SBCUPTI_DORMANT, "state %d after disable", st.state);
	CHECK(kinds_on() == 0 && st.kinds_on == 0, "%d kinds still on", kinds_on());
	CHECK(fk.rt_off == rt_on && fk.drv_off == drv_on, "APIs left on: %d/%d runtime, %d/%d "
	      "driver off", fk.rt_off, rt_on, fk.drv_off, drv_on);
	CHECK(fk.flush_calls == 1 && fk.last_flush_flag == CUPTI_ACTIVITY_FLAG_FLUSH_FORCED,
	      "flushes %d flag %u", fk.flush_calls, fk.last_flush_flag);
	CHECK(!held(), "still subscribed after the agent left");

	/* a second session, then the agent dies: a stale heartbeat turns it off */
	REQUIRE(sbc_set_enabled(r, true) == 0, "re-enable failed");
	sbcupti_poll();
	sbcupti_stats(&st);
	CHECK(st.state == SBCUPTI_ENABLED && st.enables == 2, "second session: state %d "
	      "enables %llu", st.state, (unsigned long long)st.enables);
	stale_heartbeat();
	sbcupti_poll();
	sbcupti_stats(&st);
	CHECK(st.state == SBCUPTI_DORMANT && kinds_on() == 0, "stale heartbeat: state %d, %d "
	      "kinds on", st.state, kinds_on());
	CHECK(st.disables == 2 && fk.flush_calls == 2, "disables %llu flushes %d",
	      (unsigned long long)st.disables, fk.flush_calls);
	CHECK(!held(), "still subscribed after the heartbeat went stale");
	sbc_detach(r);
	sbcupti_stop();
	CHECK(fk.subscribed == 3 && !held(), "subscriptions: %d, released %d", fk.subscribed,
	      fk.unsubscribed);
}

/* torch.profiler takes CUPTI while the collector is dormant: it stays out, and
 * comes in once the other subscriber is gone */
static void t_subscriber_arrives_later(void)
{
	struct sbcupti_stats st;
	struct sbc_reader *r;
	char *err;
	int i;

	reset_fake();
	REQUIRE(start_fake(0, false) == 0, "start failed");
	fk.subscribe_rc = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	r = agent();
	REQUIRE(r, "no agent");
	capture_stderr();
	for (i = 0; i < 2 * SBCUPTI_BUSY_RETRY_POLLS; i++)
		sbcupti_poll();
	err = captured_stderr();
	sbcupti_stats(&st);
	CHECK(st.state == SBCUPTI_DORMANT, "state %d beside another subscriber", st.state);
	CHECK(fk.enable_calls == 0 && kinds_on() == 0, "enabled kinds beside another subscriber");
	CHECK(count_lines(err, SBCUPTI_PREFIX "another CUPTI subscriber is active") == 1 &&
	      count_lines(err, SBCUPTI_PREFIX) == 1, "want one line: %s", err);
	fk.subscribe_rc = CUPTI_SUCCESS;
	for (i = 0; i < SBCUPTI_BUSY_RETRY_POLLS && st.state != SBCUPTI_ENABLED; i++) {
		sbcupti_poll();
		sbcupti_stats(&st);
	}
	CHECK(st.state == SBCUPTI_ENABLED && kinds_on() == 7 && held(),
	      "not enabled once the other subscriber left (state %d)", st.state);
	sbc_detach(r);
	sbcupti_stop();
	CHECK(!held(), "subscription kept after stop");
}

/* the real thread, not sbcupti_poll() by hand */
static void t_watcher_thread(void)
{
	struct sbcupti_stats st;
	struct sbc_reader *r;
	int i;

	reset_fake();
	REQUIRE(start_fake(0, true) == 0, "start failed");
	r = agent();
	REQUIRE(r, "no agent");
	for (i = 0; i < 200; i++) {
		sbcupti_stats(&st);
		if (st.state == SBCUPTI_ENABLED)
			break;
		usleep(5000);
	}
	CHECK(st.state == SBCUPTI_ENABLED, "watcher did not enable within 1 s");
	sbc_detach(r);
	for (i = 0; i < 200; i++) {
		sbcupti_stats(&st);
		if (st.state == SBCUPTI_DORMANT)
			break;
		usleep(5000);
	}
	CHECK(st.state == SBCUPTI_DORMANT && kinds_on() == 0, "watcher did not disable within "
	      "1 s after detach (state %d)", st.state);
	sbcupti_stop();
}

/* what the trainer's exit does while an agent still listens: the tail arrives */
static void t_stop_flushes_into_channel(void)
{
	struct sbcupti_stats st;
	struct sbc_reader *r;
	struct abuf b;
	struct got *o;
	char path[SBC_PATH_MAX];

	reset_fake();
	REQUIRE(start_fake(0, false) == 0, "start failed");
	r = agent();
	REQUIRE(r, "no agent");
	sbcupti_poll();
	b = pool_buffer();
	CUpti_ActivityKernel10 k = kernel(7000, 8000, 77, "last_kernel");
	PUT(&b, k);
	fk.pending = b.p;
	fk.pending_valid = b.off;
	own_channel(path, sizeof(path));
	CHECK(path[0], "no channel file before the stop");
	sbcupti_stop();
	sbcupti_stats(&st);
	CHECK(st.state == SBCUPTI_OFF, "state %d after stop", st.state);
	CHECK(kinds_on() == 0 && fk.flush_calls == 1, "stop: %d kinds on, %d flushes", kinds_on(),
	      fk.flush_calls);
	CHECK(!path[0] || access(path, F_OK) != 0, "channel file left behind");
	o = drain(r);
	CHECK(o->n == 1 && o->g[0].correlation_id == 77, "flushed kernel not delivered (%d)", o->n);
	free(o);
	sbc_detach(r);
}

static void t_timestamp_fallback(void)
{
	struct sbcupti_stats st;
	struct sbc_reader *r;
	struct abuf b;
	struct got *o;
	char *err;
	int64_t want = 3600ll * 1000000000ll;

	reset_fake();
	fk.ts_cb_rc = CUPTI_ERROR_NOT_SUPPORTED;
	fk.clock_behind = want;
	capture_stderr();
	int rc = start_fake(0, false);
	err = captured_stderr();
	REQUIRE(rc == 0, "start failed without the timestamp callback");
	CHECK(count_lines(err, SBCUPTI_PREFIX) == 1 && strstr(err, "offset"), "stderr: %s", err);
	sbcupti_stats(&st);
	CHECK(!st.clock_callback, "claims the timestamp callback");
	CHECK(st.clock_offset_ns >= want - 1000000 && st.clock_offset_ns <= want + 1000000,
	      "offset %lld, want ~%lld", (long long)st.clock_offset_ns, (long long)want);
	r = agent();
	REQUIRE(r, "no agent");
	sbcupti_poll();
	b = pool_buffer();
	CUpti_ActivityKernel10 k = kernel(1000, 2000, 1, NULL);
	PUT(&b, k);
	sbcupti_buffer_completed(NULL, 0, b.p, b.cap, b.off);
	o = drain(r);
	REQUIRE(o->n == 1, "%d records", o->n);
	sbcupti_stats(&st);
	CHECK(o->g[0].h.ts == 1000 + (uint64_t)st.clock_offset_ns &&
	      o->g[0].end_ns == 2000 + (uint64_t)st.clock_offset_ns,
	      "agent did not get monotonic times: %llu", (unsigned long long)o->g[0].h.ts);
	free(o);
	sbc_detach(r);
	sbcupti_stop();
}

static void t_multiple_subscribers(void)
{
	struct sbcupti_stats st;
	struct sbc_reader *r;
	char *err;
	int rc;

	reset_fake();
	fk.subscribe_rc = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	capture_stderr();
	rc = start_fake(0, false);
	sbcupti_poll();
	err = captured_stderr();
	CHECK(rc != 0, "start succeeded beside another subscriber");
	sbcupti_stats(&st);
	CHECK(st.state == SBCUPTI_INERT, "state %d", st.state);
	CHECK(count_lines(err, SBCUPTI_PREFIX "another CUPTI subscriber is active") == 1 &&
	      strstr(err, "host-only") && count_lines(err, SBCUPTI_PREFIX) == 1,
	      "stderr: %s", err);
	r = agent();
	REQUIRE(r, "no channel to tell the agent why");
	CHECK(!strcmp(sbc_producer_name(r), SBCUPTI_PRODUCER_INERT SBCUPTI_INERT_SUBSCRIBER),
	      "producer '%s'", sbc_producer_name(r));
	sbcupti_poll();
	CHECK(fk.enable_calls == 0 && kinds_on() == 0, "inert collector enabled kinds");
	sbc_detach(r);
	sbcupti_stop();
}

static void t_essential_enable_fails(void)
{
	struct sbcupti_stats st;
	struct sbc_reader *r;
	char *err;

	reset_fake();
	fk.fail_kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	fk.fail_rc = CUPTI_ERROR_NOT_INITIALIZED;
	REQUIRE(start_fake(0, false) == 0, "start failed");
	r = agent();
	REQUIRE(r, "no agent");
	capture_stderr();
	sbcupti_poll();
	sbcupti_poll();
	err = captured_stderr();
	sbcupti_stats(&st);
	CHECK(st.state == SBCUPTI_INERT, "state %d", st.state);
	CHECK(kinds_on() == 0 && fk.rt_on == 0, "left %d kinds on", kinds_on());
	CHECK(count_lines(err, SBCUPTI_PREFIX) == 1 && strstr(err, "concurrent kernels"),
	      "stderr: %s", err);
	CHECK(fk.enable_calls == 1, "kept trying after going inert (%d enables)", fk.enable_calls);
	sbc_detach(r);
	sbcupti_stop();
}

static void t_optional_enable_fails(void)
{
	struct sbcupti_stats st;
	struct sbc_reader *r;
	char *err;

	reset_fake();
	fk.fail_kind = CUPTI_ACTIVITY_KIND_MARKER;
	fk.fail_rc = CUPTI_ERROR_NOT_SUPPORTED;
	fk.rt_api_rc = CUPTI_ERROR_NOT_SUPPORTED; /* per-call control missing too */
	REQUIRE(start_fake(0, false) == 0, "start failed");
	r = agent();
	REQUIRE(r, "no agent");
	capture_stderr();
	sbcupti_poll();
	sbc_set_enabled(r, false);
	sbcupti_poll();
	REQUIRE(sbc_set_enabled(r, true) == 0, "re-enable");
	sbcupti_poll();
	err = captured_stderr();
	sbcupti_stats(&st);
	CHECK(st.state == SBCUPTI_ENABLED, "state %d", st.state);
	CHECK(kinds_on() == 7 && !fk.on[CUPTI_ACTIVITY_KIND_MARKER] &&
	      fk.on[CUPTI_ACTIVITY_KIND_RUNTIME], "markers off, whole RUNTIME kind on: %d kinds",
	      kinds_on());
	CHECK(count_lines(err, SBCUPTI_PREFIX) == 1 && strstr(err, "NVTX"),
	      "want the marker failure reported once: %s", err);
	sbc_set_enabled(r, false);
	sbcupti_poll();
	CHECK(kinds_on() == 0, "%d kinds left on", kinds_on());
	sbc_detach(r);
	sbcupti_stop();
}

/* ---- the real CUPTI: without a driver, initialisation fails and the host lives on ---- */

static bool have_driver(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

	if (!h)
		h = dlopen("libcuda.so.1", RTLD_NOW);
	if (h)
		dlclose(h);
	return h != NULL;
}

/* in a child: init through fn, keep working, exit 0; returns the child's stderr */
static int run_child(int (*init)(void *), void *arg, char *err, size_t len, int *status)
{
	int p[2];
	pid_t pid;
	ssize_t n, got = 0;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		volatile uint64_t sum = 0;

		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		if (init(arg) != 1)
			_exit(3);
		if (init(arg) != 1) /* the driver may call it again: harmless */
			_exit(4);
		for (int i = 0; i < 1000; i++) {
			void *m = malloc(4096 + i);

			sum += (uintptr_t)m;
			free(m);
		}
		usleep(200000); /* a watcher, if any, polls meanwhile */
		exit(sum ? 0 : 5); /* exit(), not _exit(): the atexit hook runs */
	}
	close(p[1]);
	while (got + 1 < (ssize_t)len && (n = read(p[0], err + got, len - 1 - got)) > 0)
		got += n;
	err[got] = 0;
	close(p[0]);
	waitpid(pid, status, 0);
	return 0;
}

static int init_direct(void *arg)
{
	(void)arg;
	return InitializeInjection();
}

static void check_failed_init(const char *how, const char *err, int status)
{
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: host process ended with "
	      "status 0x%x", how, status);
	if (!have_driver()) {
		CHECK(count_lines(err, SBCUPTI_PREFIX) == 1, "%s: want one line on stderr, got: %s",
		      how, err);
		CHECK(strstr(err, "host-only") != NULL, "%s: stderr does not say host-only: %s", how,
		      err);
	} else {
		CHECK(count_lines(err, SBCUPTI_PREFIX) <= 2, "%s: noisy stderr: %s", how, err);
	}
}

static void t_failed_init_leaves_host_running(void)
{
	char err[2048];
	int status;

	REQUIRE(run_child(init_direct, NULL, err, sizeof(err), &status) == 0, "fork failed");
	check_failed_init("InitializeInjection", err, status);
}

static int init_dlopen(void *arg)
{
	void *h = dlopen(arg, RTLD_NOW | RTLD_LOCAL);
	int (*fn)(void);

	if (!h)
		_exit(6);
	fn = (int (*)(void))dlsym(h, "InitializeInjection");
	if (!fn)
		_exit(7);
	return fn();
}

static void t_failed_init_through_the_library(void)
{
	char path[512], err[2048];
	const char *b = getenv("BUILD");
	int status;

	snprintf(path, sizeof(path), "%s/libstepblame-cupti.so", b ? b : "build");
	if (access(path, R_OK))
		SKIP("%s not built", path);
	if (path[0] != '/') {
		char cwd[256];

		if (getcwd(cwd, sizeof(cwd))) {
			char rel[512];

			snprintf(rel, sizeof(rel), "%s", path);
			snprintf(path, sizeof(path), "%.255s/%.250s", cwd, rel);
		}
	}
	REQUIRE(run_child(init_dlopen, path, err, sizeof(err), &status) == 0, "fork failed");
	CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 6), "dlopen %s failed", path);
	CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 7), "%s exports no InitializeInjection",
	      path);
	check_failed_init("dlopen + InitializeInjection", err, status);
}

int main(void)
{
	RUN(t_struct_sizes);
	RUN(t_api_classes);
	RUN(t_records_field_by_field);
	RUN(t_empty_and_inactive);
	RUN(t_ring_full_counted);
	RUN(t_pool_exhaustion);
	RUN(t_dormant_enabled_disabled);
	RUN(t_subscriber_arrives_later);
	RUN(t_watcher_thread);
	RUN(t_stop_flushes_into_channel);
	RUN(t_timestamp_fallback);
	RUN(t_multiple_subscribers);
	RUN(t_essential_enable_fails);
	RUN(t_optional_enable_fails);
	RUN(t_failed_init_leaves_host_running);
	RUN(t_failed_init_through_the_library);
	return test_summary();
}
