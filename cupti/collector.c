// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The collector's life: InitializeInjection (the CUDA driver calls it at CUDA
 * init when CUDA_INJECTION64_PATH names this library) checks that no other
 * CUPTI subscriber is there, registers the CLOCK_MONOTONIC timestamp callback
 * and the buffer callbacks, creates the channel and starts a watcher thread.
 * The watcher subscribes and enables the activity kinds while an agent has the
 * channel on, and disables, flushes and unsubscribes when the agent turns it
 * off or its heartbeat goes stale. While dormant the collector holds nothing
 * in CUPTI: no kind enabled, no subscription (torch.profiler can run).
 *
 * It must never harm the trainer: every CUPTI error is reported once on
 * stderr and the collector goes inert; nothing here exits, aborts, or blocks
 * a CUDA call.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "collector.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)

static const struct {
	CUpti_ActivityKind kind;
	const char *name;
	bool essential;     /* without it the collector is pointless: go inert */
} kinds[] = {
	{ CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "concurrent kernels", true },
	{ CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy", false },
	{ CUPTI_ACTIVITY_KIND_MEMCPY2, "peer memcpy", false },
	{ CUPTI_ACTIVITY_KIND_MEMSET, "memset", false },
	{ CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "synchronization", false },
	{ CUPTI_ACTIVITY_KIND_MARKER, "NVTX markers", false },
	{ CUPTI_ACTIVITY_KIND_OVERHEAD, "overhead", false },
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

/* the sites an error can come from; each is reported at most once */
enum site {
	E_SUBSCRIBE, E_BUSY, E_THREAD_ID, E_CALLBACKS, E_TIMESTAMP, E_CLOCK, E_POOL, E_CHANNEL,
	E_WATCHER, E_FLUSH_PERIOD, E_ENABLE, E_ENABLE_API, E_DISABLE, E_FLUSH, E_DROPPED,
	E_MAX
};

static struct {
	const struct sbcupti_ops *ops;
	int state;                      /* enum sbcupti_state, atomic */
	char inert_reason[160];
	pid_t owner;
	pthread_mutex_t mu;             /* transitions: poll, stop */
	struct sbc_producer *chan;
	struct sbcupti_xlate x;
	CUpti_SubscriberHandle sub;
	bool subscribed;
	unsigned busy_polls;            /* another subscriber: polls left before trying again */
	/* the buffer pool: one bit per free buffer */
	uint8_t *pool;
	size_t pool_len, buf_bytes;
	unsigned nbufs;
	uint64_t free_mask;
	bool pool_touched;
	/* what is on */
	bool kind_on[NKINDS];
	bool rt_whole, drv_whole;       /* per-callback enabling failed: the whole API kind is on */
	uint32_t kinds_on, apis_on;
	/* clock */
	bool clock_cb;
	int64_t clock_offset;
	/* watcher */
	pthread_t watcher;
	bool watcher_running;
	bool watcher_stop;
	pthread_cond_t wake;
	unsigned poll_ms;
	/* callbacks in flight, so that stop never unmaps under them */
	int inflight;
	int closing;
	uint32_t reported;
	/* counters */
	uint64_t enables, disables, flushes, buffers, records, emitted, inactive, ring_full;
	uint64_t pool_empty, source_drops;
} g = { .mu = PTHREAD_MUTEX_INITIALIZER };

const struct sbcupti_ops sbcupti_real_ops = {
	.subscribe = cuptiSubscribe,
	.unsubscribe = cuptiUnsubscribe,
	.set_thread_id_type = cuptiSetThreadIdType,
	.register_callbacks = cuptiActivityRegisterCallbacks,
	.register_timestamp_callback = cuptiActivityRegisterTimestampCallback,
	.get_timestamp = cuptiGetTimestamp,
	.enable = cuptiActivityEnable,
	.disable = cuptiActivityDisable,
	.enable_runtime_api = cuptiActivityEnableRuntimeApi,
	.enable_driver_api = cuptiActivityEnableDriverApi,
	.flush_period = cuptiActivityFlushPeriod,
	.flush_all = cuptiActivityFlushAll,
	.dropped = cuptiActivityGetNumDroppedRecords,
};

/* ---- reporting ---- */

static const char *cupti_err(CUptiResult r)
{
	const char *s = NULL;

	if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
		return "unknown CUPTI error";
	return s;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* one write(2): no stdio state of the host is touched */
static void say(const char *fmt, ...)
{
	char line[512];
	size_t pre = strlen(SBCUPTI_PREFIX);
	va_list ap;
	int n;

	memcpy(line, SBCUPTI_PREFIX, pre);
	va_start(ap, fmt);
	n = vsnprintf(line + pre, sizeof(line) - pre - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	n = (size_t)n + pre < sizeof(line) - 1 ? n + (int)pre : (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}

static bool first_time(enum site s)
{
	uint32_t bit = 1u << s;

	return !(__atomic_fetch_or(&g.reported, bit, __ATOMIC_RELAXED) & bit);
}

#define REPORT(site, ...) do { if (first_time(site)) say(__VA_ARGS__); } while (0)

/* ---- clock ---- */

uint64_t CUPTIAPI sbcupti_timestamp(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* offset that turns CUPTI's own clock (CLOCK_REALTIME on Linux) into monotonic */
static int calibrate(void)
{
	uint64_t best = UINT64_MAX;
	int64_t offset = 0;

	for (int i = 0; i < 5; i++) {
		uint64_t c, m0 = sbcupti_timestamp(), m1;
		CUptiResult r = g.ops->get_timestamp(&c);

		m1 = sbcupti_timestamp();
		if (r != CUPTI_SUCCESS) {
			REPORT(E_CLOCK, "cuptiGetTimestamp failed: %s", cupti_err(r));
			return -1;
		}
		if (m1 - m0 < best) {
			best = m1 - m0;
			offset = (int64_t)(m0 + (m1 - m0) / 2) - (int64_t)c;
		}
	}
	g.clock_offset = offset;
	sbc_set_clock(g.chan, CLOCK_REALTIME, offset);
	return 0;
}

/* ---- buffer pool: preallocated, handed out lock-free ---- */

static int pool_create(unsigned nbufs, size_t bytes)
{
	g.nbufs = nbufs;
	g.buf_bytes = bytes;
	g.pool_len = (size_t)nbufs * bytes;
	/* pages are touched by the watcher at the first enable, not by CUPTI's threads */
	g.pool = mmap(NULL, g.pool_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g.pool == MAP_FAILED) {
		g.pool = NULL;
		return -errno;
	}
	g.free_mask = nbufs == 64 ? ~0ull : (1ull << nbufs) - 1;
	g.pool_touched = false;
	return 0;
}

static void pool_destroy(void)
{
	uint64_t all = g.nbufs == 64 ? ~0ull : (1ull << g.nbufs) - 1;

	/* a buffer still held by CUPTI stays mapped: it may yet write to it */
	if (g.pool && LOAD(&g.free_mask) == all)
		munmap(g.pool, g.pool_len);
	g.pool = NULL;
	g.free_mask = 0;
}

void CUPTIAPI sbcupti_buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
	uint64_t m = LOAD(&g.free_mask);

	*max_records = 0;
	while (m) {
		unsigned i = (unsigned)__builtin_ctzll(m);

		if (__atomic_compare_exchange_n(&g.free_mask, &m, m & ~(1ull << i), false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			*buf = g.pool + (size_t)i * g.buf_bytes;
			*size = g.buf_bytes;
			return;
		}
	}
	/* CUPTI drops records and counts them: they show up as source drops */
	ADD(&g.pool_empty, 1);
	*buf = NULL;
	*size = 0;
}

static void pool_put(uint8_t *buf)
{
	size_t off;

	if (!buf || !g.pool || buf < g.pool || buf >= g.pool + g.pool_len)
		return;
	off = (size_t)(buf - g.pool);
	if (off % g.buf_bytes)
		return;
	__atomic_fetch_or(&g.free_mask, 1ull << (off / g.buf_bytes), __ATOMIC_RELEASE);
}

void CUPTIAPI sbcupti_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf,
				       size_t size, size_t valid)
{
	CUpti_Activity *rec = NULL;
	struct sb_gpu out;
	uint64_t untimed = 0;
	size_t dropped = 0;

	(void)size;
	/* seq_cst pairs with sbcupti_stop: it sees us in flight, or we see it closing */
	__atomic_fetch_add(&g.inflight, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&g.closing, __ATOMIC_SEQ_CST) && g.chan) {
		ADD(&g.buffers, 1);
		while (valid && buf && cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
			int t = sbcupti_translate(&g.x, rec, &out);
			int err;

			ADD(&g.records, 1);
			if (t < 0)
				untimed++;
			if (t <= 0)
				continue;
			err = sbc_emit(g.chan, &out);
			if (!err)
				ADD(&g.emitted, 1);
			else if (err == -EAGAIN)
				ADD(&g.inactive, 1);
			else
				ADD(&g.ring_full, 1);
		}
		if (g.ops->dropped) {
			CUptiResult r = g.ops->dropped(ctx, stream, &dropped);

			if (r != CUPTI_SUCCESS) {
				REPORT(E_DROPPED, "cuptiActivityGetNumDroppedRecords failed: %s; "
				       "CUPTI's own losses are not counted", cupti_err(r));
				dropped = 0;
			}
		}
		if (dropped + untimed) {
			ADD(&g.source_drops, dropped + untimed);
			sbc_add_source_drops(g.chan, dropped + untimed);
		}
	}
	pool_put(buf);
	__atomic_fetch_sub(&g.inflight, 1, __ATOMIC_SEQ_CST);
}

/* ---- enabling and disabling ---- */

static void CUPTIAPI no_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
				 const void *data)
{
	(void)ud, (void)d, (void)id, (void)data;
}

static void set_apis(bool on)
{
	static const struct {
		CUpti_CallbackDomain domain;
		CUpti_ActivityKind kind;
		unsigned n;
		const char *what;
	} dom[2] = {
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_ACTIVITY_KIND_RUNTIME,
		  CUPTI_RUNTIME_TRACE_CBID_SIZE, "runtime" },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_ACTIVITY_KIND_DRIVER,
		  CUPTI_DRIVER_TRACE_CBID_SIZE, "driver" },
	};

	for (int d = 0; d < 2; d++) {
		bool *whole = d ? &g.drv_whole : &g.rt_whole;
		CUptiResult (*one)(CUpti_CallbackId, uint8_t) =
			d ? g.ops->enable_driver_api : g.ops->enable_runtime_api;
		CUptiResult r = CUPTI_SUCCESS;

		if (!on && *whole) {
			r = g.ops->disable(dom[d].kind);
			if (r != CUPTI_SUCCESS)
				REPORT(E_DISABLE, "cannot disable %s API records: %s", dom[d].what,
				       cupti_err(r));
			*whole = false;
			g.apis_on = 0;
			continue;
		}
		for (unsigned cbid = 1; cbid < dom[d].n; cbid++) {
			if (!sbcupti_api_class(dom[d].domain, cbid))
				continue;
			r = one(cbid, on);
			if (r != CUPTI_SUCCESS) {
				if (!on)
					REPORT(E_DISABLE, "cannot disable %s API records: %s",
					       dom[d].what, cupti_err(r));
				break;
			}
			if (on)
				g.apis_on++;
			else if (g.apis_on)
				g.apis_on--;
		}
		if (r == CUPTI_SUCCESS || !on)
			continue;
		/* no per-call control: take the whole kind, translation filters it */
		r = g.ops->enable(dom[d].kind);
		if (r == CUPTI_SUCCESS) {
			*whole = true;
			continue;
		}
		REPORT(E_ENABLE_API, "cannot enable %s API records: %s; kernels will lack the "
		       "thread that launched them", dom[d].what, cupti_err(r));
	}
}

static void unsubscribe(void)
{
	if (g.subscribed)
		g.ops->unsubscribe(g.sub);
	g.subscribed = false;
}

static void disable_all(void)
{
	CUptiResult r;

	for (size_t i = 0; i < NKINDS; i++) {
		if (!g.kind_on[i])
			continue;
		r = g.ops->disable(kinds[i].kind);
		if (r != CUPTI_SUCCESS)
			REPORT(E_DISABLE, "cannot disable %s records: %s", kinds[i].name, cupti_err(r));
		g.kind_on[i] = false;
		g.kinds_on--;
	}
	set_apis(false);
	/* forced: records of work still running come out now, with end = 0 where unknown */
	r = g.ops->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	ADD(&g.flushes, 1);
	if (r != CUPTI_SUCCESS)
		REPORT(E_FLUSH, "cuptiActivityFlushAll failed: %s", cupti_err(r));
	unsubscribe();
}

static void go_inert(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void go_inert(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g.inert_reason, sizeof(g.inert_reason), fmt, ap);
	va_end(ap);
	if (LOAD(&g.state) == SBCUPTI_ENABLED)
		disable_all();
	unsubscribe();
	STORE(&g.state, SBCUPTI_INERT);
	say("%s; GPU timeline unavailable, stepblame falls back to host-only", g.inert_reason);
}

static void touch_pool(void)
{
	if (g.pool_touched)
		return;
	/* fault the pages in here rather than in CUPTI's thread while it records */
	for (size_t off = 0; off < g.pool_len; off += 4096)
		((volatile uint8_t *)g.pool)[off] = 0;
	g.pool_touched = true;
}

static void enable_all(void)
{
	CUptiResult r;

	r = g.ops->subscribe(&g.sub, no_callback, NULL);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		/* torch.profiler or nsys came after us: stay out, look again later */
		REPORT(E_BUSY, "another CUPTI subscriber is active (torch.profiler/nsys?); GPU "
		       "timeline unavailable while it is, stepblame falls back to host-only");
		g.busy_polls = SBCUPTI_BUSY_RETRY_POLLS;
		return;
	}
	if (r != CUPTI_SUCCESS) {
		go_inert("cuptiSubscribe failed: %s", cupti_err(r));
		return;
	}
	g.subscribed = true;
	/* someone else may have taken the buffer callbacks while we were dormant */
	r = g.ops->register_callbacks(sbcupti_buffer_requested, sbcupti_buffer_completed);
	if (r != CUPTI_SUCCESS) {
		go_inert("cuptiActivityRegisterCallbacks failed: %s", cupti_err(r));
		return;
	}
	touch_pool();
	if (!g.clock_cb && calibrate()) {
		go_inert("no usable clock");
		return;
	}
	for (size_t i = 0; i < NKINDS; i++) {
		r = g.ops->enable(kinds[i].kind);
		if (r == CUPTI_SUCCESS) {
			g.kind_on[i] = true;
			g.kinds_on++;
			continue;
		}
		if (kinds[i].essential) {
			/* state is ENABLED only after this loop: undo what is on by hand */
			for (size_t j = 0; j < i; j++) {
				if (g.kind_on[j]) {
					g.ops->disable(kinds[j].kind);
					g.kind_on[j] = false;
				}
			}
			g.kinds_on = 0;
			go_inert("cannot enable %s records: %s", kinds[i].name, cupti_err(r));
			return;
		}
		REPORT(E_ENABLE, "cannot enable %s records: %s; going on without them",
		       kinds[i].name, cupti_err(r));
	}
	set_apis(true);
	r = g.ops->flush_period(SBCUPTI_FLUSH_PERIOD_MS);
	if (r != CUPTI_SUCCESS)
		REPORT(E_FLUSH_PERIOD, "cuptiActivityFlushPeriod failed: %s; records may arrive "
		       "late", cupti_err(r));
	STORE(&g.state, SBCUPTI_ENABLED);
	ADD(&g.enables, 1);
}

void sbcupti_poll(void)
{
	pthread_mutex_lock(&g.mu);
	int st = LOAD(&g.state);
	bool active = sbc_active(g.chan);

	if (st == SBCUPTI_DORMANT && active) {
		if (!g.busy_polls || !--g.busy_polls)
			enable_all();
	} else if (st == SBCUPTI_ENABLED && !active) {
		disable_all();
		STORE(&g.state, SBCUPTI_DORMANT);
		ADD(&g.disables, 1);
	}
	pthread_mutex_unlock(&g.mu);
}

/* ---- the watcher thread ---- */

static void *watcher_main(void *arg)
{
	struct timespec ts;

	(void)arg;
	pthread_setname_np(pthread_self(), "sb-cupti");
	pthread_mutex_lock(&g.mu);
	while (!g.watcher_stop) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += (long)g.poll_ms * 1000000l;
		ts.tv_sec += ts.tv_nsec / 1000000000l;
		ts.tv_nsec %= 1000000000l;
		pthread_cond_timedwait(&g.wake, &g.mu, &ts);
		if (g.watcher_stop)
			break;
		pthread_mutex_unlock(&g.mu);
		sbcupti_poll();
		pthread_mutex_lock(&g.mu);
		if (LOAD(&g.state) == SBCUPTI_INERT)
			break;
	}
	pthread_mutex_unlock(&g.mu);
	return NULL;
}

static int start_watcher(void)
{
	pthread_condattr_t ca;
	sigset_t all, old;
	int err;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g.wake, &ca);
	pthread_condattr_destroy(&ca);
	g.watcher_stop = false;
	/* the host's signals must never be delivered to our thread */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&g.watcher, NULL, watcher_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return -err;
	g.watcher_running = true;
	return 0;
}

static void stop_watcher(void)
{
	struct timespec ts;

	if (!g.watcher_running)
		return;
	pthread_mutex_lock(&g.mu);
	g.watcher_stop = true;
	pthread_cond_signal(&g.wake);
	pthread_mutex_unlock(&g.mu);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 2;
	/* a watcher stuck inside CUPTI must not hang the host's exit */
	if (pthread_timedjoin_np(g.watcher, NULL, &ts))
		pthread_detach(g.watcher);
	g.watcher_running = false;
}

/* ---- start and stop ---- */

static void in_child(void)
{
	/* a fork of the trainer has no CUPTI of its own: stay out of its way */
	g.watcher_running = false;
	if (LOAD(&g.state) != SBCUPTI_OFF)
		STORE(&g.state, SBCUPTI_INERT);
}

static void at_exit(void)
{
	sbcupti_stop();
}

static void inert_at_start(const char *code)
{
	char producer[32];

	unsubscribe();
	/* an agent that attaches can read why there is no timeline */
	snprintf(producer, sizeof(producer), SBCUPTI_PRODUCER_INERT "%s", code);
	if (!g.chan)
		g.chan = sbc_create(producer, SBC_MIN_SLOTS);
	STORE(&g.state, SBCUPTI_INERT);
}

static unsigned env_uint(const char *name, unsigned dflt, unsigned min, unsigned max)
{
	const char *s = getenv(name);
	char *end;
	unsigned long v;

	if (!s || !*s)
		return dflt;
	v = strtoul(s, &end, 10);
	if (*end || v < min || v > max)
		return dflt;
	return (unsigned)v;
}

int sbcupti_start(const struct sbcupti_config *cfg)
{
	static bool atfork_done, atexit_done;
	unsigned nbufs = cfg->nbufs ? cfg->nbufs : SBCUPTI_DEFAULT_BUFS;
	size_t bytes = cfg->buf_bytes ? cfg->buf_bytes : SBCUPTI_DEFAULT_BUF_BYTES;
	CUptiResult r;
	int err;

	if (LOAD(&g.state) != SBCUPTI_OFF)
		return -EBUSY;
	pthread_mutex_lock(&g.mu);
	g.ops = cfg->ops ? cfg->ops : &sbcupti_real_ops;
	g.owner = getpid();
	g.inert_reason[0] = 0;
	g.reported = 0;
	g.chan = NULL;
	g.closing = 0;
	g.enables = g.disables = g.flushes = g.buffers = g.records = g.emitted = 0;
	g.inactive = g.ring_full = g.pool_empty = g.source_drops = 0;
	memset(&g.x, 0, sizeof(g.x));
	memset(g.kind_on, 0, sizeof(g.kind_on));
	g.kinds_on = g.apis_on = 0;
	g.rt_whole = g.drv_whole = false;
	g.subscribed = false;
	g.busy_polls = 0;
	g.poll_ms = cfg->poll_ms ? cfg->poll_ms : SBCUPTI_POLL_MS;
	if (nbufs > SBCUPTI_MAX_BUFS)
		nbufs = SBCUPTI_MAX_BUFS;
	if (bytes < 64 * 1024)
		bytes = 64 * 1024;
	bytes &= ~(size_t)7;

	r = g.ops->subscribe(&g.sub, no_callback, NULL);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		snprintf(g.inert_reason, sizeof(g.inert_reason),
			 "another CUPTI subscriber is active (torch.profiler/nsys?)");
		say("%s; GPU timeline unavailable, stepblame falls back to host-only",
		    g.inert_reason);
		inert_at_start(SBCUPTI_INERT_SUBSCRIBER);
		err = -EBUSY;
		goto out;
	}
	if (r != CUPTI_SUCCESS) {
		snprintf(g.inert_reason, sizeof(g.inert_reason), "cuptiSubscribe failed: %s",
			 cupti_err(r));
		goto fail;
	}
	g.subscribed = true;
	/* CUPTI's default thread id on Linux is pthread_self(); the agent needs gettid() */
	r = g.ops->set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	g.x.tids_are_os = r == CUPTI_SUCCESS;
	if (r != CUPTI_SUCCESS)
		REPORT(E_THREAD_ID, "cuptiSetThreadIdType(SYSTEM) failed: %s; API records will "
		       "not name their thread", cupti_err(r));
	r = g.ops->register_callbacks(sbcupti_buffer_requested, sbcupti_buffer_completed);
	if (r != CUPTI_SUCCESS) {
		snprintf(g.inert_reason, sizeof(g.inert_reason),
			 "cuptiActivityRegisterCallbacks failed: %s", cupti_err(r));
		goto fail;
	}
	/* once per process, before any kind is enabled */
	r = g.ops->register_timestamp_callback(sbcupti_timestamp);
	g.clock_cb = r == CUPTI_SUCCESS;
	g.clock_offset = 0;
	if (!g.clock_cb)
		REPORT(E_TIMESTAMP, "cuptiActivityRegisterTimestampCallback failed: %s; using "
		       "CUPTI's clock with a measured offset", cupti_err(r));
	err = pool_create(nbufs, bytes);
	if (err) {
		snprintf(g.inert_reason, sizeof(g.inert_reason),
			 "cannot allocate %u activity buffers of %zu KiB: %s", nbufs, bytes >> 10,
			 strerror(-err));
		goto fail;
	}
	g.chan = sbc_create(SBCUPTI_PRODUCER, cfg->nslots);
	if (!g.chan) {
		snprintf(g.inert_reason, sizeof(g.inert_reason),
			 "cannot create the GPU channel in " SBC_DIR " for PID %d: %s",
			 (int)getpid(), strerror(errno));
		pool_destroy();
		goto fail;
	}
	g.x.chan = g.chan;
	if (!g.clock_cb && calibrate()) {
		snprintf(g.inert_reason, sizeof(g.inert_reason), "no usable clock");
		sbc_destroy(g.chan);
		g.chan = NULL;
		pool_destroy();
		goto fail;
	}
	sbcupti_api_class(CUPTI_CB_DOMAIN_RUNTIME_API, 0); /* build the tables now */
	/* the subscription only proved nobody else is there: dormant, hold nothing */
	unsubscribe();
	STORE(&g.state, SBCUPTI_DORMANT);
	if (!cfg->no_watcher) {
		err = start_watcher();
		if (err) {
			REPORT(E_WATCHER, "cannot start the watcher thread: %s", strerror(-err));
			STORE(&g.state, SBCUPTI_OFF);
			snprintf(g.inert_reason, sizeof(g.inert_reason), "no watcher thread");
			sbc_destroy(g.chan);
			g.chan = NULL;
			pool_destroy();
			goto fail;
		}
	}
	err = 0;
	goto out;
fail:
	say("%s; GPU timeline unavailable, stepblame falls back to host-only", g.inert_reason);
	inert_at_start(SBCUPTI_INERT_ERROR);
	err = -EIO;
out:
	if (!atfork_done) {
		atfork_done = true;
		pthread_atfork(NULL, NULL, in_child);
	}
	if (!atexit_done && !cfg->no_atexit) {
		atexit_done = true;
		atexit(at_exit);
	}
	pthread_mutex_unlock(&g.mu);
	return err;
}

void sbcupti_stop(void)
{
	struct timespec ts;

	if (LOAD(&g.state) == SBCUPTI_OFF || g.owner != getpid())
		return;
	stop_watcher();
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 2;
	/* held by a watcher stuck in CUPTI: leave everything as it is, the host is exiting */
	if (pthread_mutex_timedlock(&g.mu, &ts))
		return;
	if (LOAD(&g.state) == SBCUPTI_ENABLED) {
		disable_all();
		ADD(&g.disables, 1);
	}
	__atomic_store_n(&g.closing, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < 1000 && __atomic_load_n(&g.inflight, __ATOMIC_SEQ_CST); i++)
		usleep(1000);
	unsubscribe();
	if (!LOAD(&g.inflight)) {
		g.x.chan = NULL;
		sbc_destroy(g.chan);
		g.chan = NULL;
		pool_destroy();
	}
	STORE(&g.state, SBCUPTI_OFF);
	pthread_mutex_unlock(&g.mu);
}

void sbcupti_stats(struct sbcupti_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->state = LOAD(&g.state);
	snprintf(st->inert_reason, sizeof(st->inert_reason), "%s", g.inert_reason);
	st->kinds_on = g.kinds_on;
	st->subscribed = g.subscribed;
	st->apis_on = g.apis_on + (g.rt_whole ? 1 : 0) + (g.drv_whole ? 1 : 0);
	st->enables = LOAD(&g.enables);
	st->disables = LOAD(&g.disables);
	st->flushes = LOAD(&g.flushes);
	st->buffers = LOAD(&g.buffers);
	st->records = LOAD(&g.records);
	st->emitted = LOAD(&g.emitted);
	st->inactive = LOAD(&g.inactive);
	st->ring_full = LOAD(&g.ring_full);
	st->filtered = LOAD(&g.x.filtered);
	st->zero_skipped = LOAD(&g.x.zero_skipped);
	st->zero_fixed = LOAD(&g.x.zero_fixed);
	st->pool_empty = LOAD(&g.pool_empty);
	st->source_drops = LOAD(&g.source_drops);
	st->bufs_total = g.pool ? g.nbufs : 0;
	st->bufs_free = (unsigned)__builtin_popcountll(LOAD(&g.free_mask));
	st->clock_callback = g.clock_cb;
	st->clock_offset_ns = g.clock_offset;
}

/* ---- the entry point ---- */

int InitializeInjection(void)
{
	static int once;
	struct sbcupti_config cfg = { 0 };

	if (__atomic_exchange_n(&once, 1, __ATOMIC_ACQ_REL))
		return 1;
	/* STEPBLAME_CUPTI_BUFFERS / STEPBLAME_CUPTI_BUFFER_MB size the pool */
	cfg.nbufs = env_uint("STEPBLAME_CUPTI_BUFFERS", SBCUPTI_DEFAULT_BUFS, 2, SBCUPTI_MAX_BUFS);
	cfg.buf_bytes = env_uint("STEPBLAME_CUPTI_BUFFER_MB", SBCUPTI_DEFAULT_BUF_BYTES >> 20, 1,
				 64) << 20;
	sbcupti_start(&cfg);
	return 1;
}
