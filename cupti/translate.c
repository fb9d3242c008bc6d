// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * CUPTI activity records -> struct sb_gpu. Runs on CUPTI's worker thread (or
 * whoever calls cuptiActivityFlushAll), possibly on two threads at once: all
 * shared state is atomics, nothing allocates.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "collector.h"

#define ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

/* ---- which API calls we collect, and their names ---- */

static uint8_t rt_class[CUPTI_RUNTIME_TRACE_CBID_SIZE];
static uint8_t drv_class[CUPTI_DRIVER_TRACE_CBID_SIZE];
static uint32_t rt_name[CUPTI_RUNTIME_TRACE_CBID_SIZE];   /* channel string ids, 0 = not yet */
static uint32_t drv_name[CUPTI_DRIVER_TRACE_CBID_SIZE];
static struct sbc_producer *names_of;                      /* the channel those ids belong to */
static pthread_once_t classes_once = PTHREAD_ONCE_INIT;

static bool starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

static bool ends(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

const char *sbcupti_api_name(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, char *buf,
			     size_t len)
{
	const char *name = NULL;
	char *p;

	if (!len)
		return buf;
	buf[0] = 0;
	if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name)
		return buf;
	snprintf(buf, len, "%s", name);
	/* runtime names carry the version that introduced them: cudaLaunchKernel_v7000 */
	p = strrchr(buf, '_');
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && p && p[1] == 'v' && strlen(p + 2) >= 4 &&
	    strspn(p + 2, "0123456789") == strlen(p + 2))
		*p = 0;
	/* per-thread default stream variants are the same call for the user */
	if (ends(buf, "_ptsz") || ends(buf, "_ptds"))
		buf[strlen(buf) - 5] = 0;
	return buf;
}

/* by name, so that new callback ids of the same families are collected too */
static unsigned classify(const char *n)
{
	if (!n[0] || !strcmp(n, "INVALID"))
		return 0;
	if (starts(n, "cudaLaunch") || starts(n, "cudaGraphLaunch") || starts(n, "cuLaunch") ||
	    starts(n, "cuGraphLaunch"))
		return SB_API_LAUNCH;
	if ((starts(n, "cuda") || starts(n, "cu")) && ends(n, "Synchronize"))
		return SB_API_SYNC;
	if (starts(n, "cudaMalloc") || starts(n, "cudaHostAlloc") || starts(n, "cuMemAlloc") ||
	    starts(n, "cuMemHostAlloc"))
		return SB_API_ALLOC;
	if (starts(n, "cudaFree") || starts(n, "cuMemFree"))
		return SB_API_FREE;
	if (starts(n, "cudaMemcpy") || starts(n, "cuMemcpy"))
		return SB_API_MEMCPY;
	/* a memset issues GPU work like a launch; its API record names the thread */
	if (starts(n, "cudaMemset") || starts(n, "cuMemset"))
		return SB_API_OTHER;
	return 0;
}

static void build_classes(void)
{
	char name[128];

	for (unsigned i = 1; i < CUPTI_RUNTIME_TRACE_CBID_SIZE; i++)
		rt_class[i] = classify(sbcupti_api_name(CUPTI_CB_DOMAIN_RUNTIME_API, i, name,
							sizeof(name)));
	for (unsigned i = 1; i < CUPTI_DRIVER_TRACE_CBID_SIZE; i++)
		drv_class[i] = classify(sbcupti_api_name(CUPTI_CB_DOMAIN_DRIVER_API, i, name,
							 sizeof(name)));
}

unsigned sbcupti_api_class(CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
	pthread_once(&classes_once, build_classes);
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE)
		return rt_class[cbid];
	if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE)
		return drv_class[cbid];
	return 0;
}

static uint32_t api_name_id(struct sbcupti_xlate *x, CUpti_CallbackDomain domain,
			    CUpti_CallbackId cbid)
{
	uint32_t *cache = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? rt_name : drv_name;
	char name[128];
	uint32_t id;

	if (!x->chan)
		return 0;
	/* the cache belongs to one channel; a new one (tests) starts it afresh */
	if (__atomic_load_n(&names_of, __ATOMIC_ACQUIRE) != x->chan) {
		memset(rt_name, 0, sizeof(rt_name));
		memset(drv_name, 0, sizeof(drv_name));
		__atomic_store_n(&names_of, x->chan, __ATOMIC_RELEASE);
	}
	id = LOAD(&cache[cbid]);
	if (id)
		return id;
	id = sbc_intern(x->chan, sbcupti_api_name(domain, cbid, name, sizeof(name)));
	STORE(&cache[cbid], id);
	return id;
}

unsigned sbcupti_copy_kind(unsigned k)
{
	switch (k) {
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
		return SB_COPY_HTOD;
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
	case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
		return SB_COPY_DTOH;
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
	case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
	case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
		return SB_COPY_DTOD;
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
		return SB_COPY_HTOH;
	case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
		return SB_COPY_PEER;
	}
	return SB_COPY_OTHER;
}

static const char *overhead_name(unsigned k)
{
	switch (k) {
	case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: return "driver compiler";
	case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: return "cupti buffer flush";
	case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: return "cupti instrumentation";
	case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: return "cupti resource";
	case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING: return "module loading";
	case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: return "lazy function loading";
	case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL: return "command buffer full";
	case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: return "activity buffer request";
	case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT: return "uvm activity init";
	}
	return "cupti overhead";
}

/*
 * CUPTI leaves 0 in start or end of records it could not time (a forced
 * flush before a kernel finished, a context torn down). Both 0: nothing to
 * place on a timeline; the record is skipped and counted as a source drop by
 * the caller. One 0 (or an end before the start): the interval collapses to
 * the known instant, end = start.
 */
static bool times(struct sbcupti_xlate *x, uint64_t start, uint64_t end, struct sb_gpu *out)
{
	if (!start && !end) {
		ADD(&x->zero_skipped, 1);
		return false;
	}
	if (!start || !end || end < start) {
		ADD(&x->zero_fixed, 1);
		if (!start)
			start = end;
		end = start;
	}
	out->h.ts = start;
	out->end_ns = end;
	return true;
}

static uint32_t mark_name(struct sbcupti_xlate *x, uint32_t id)
{
	uint64_t v = __atomic_load_n(&x->marks[id % SBCUPTI_MARKS], __ATOMIC_RELAXED);

	return (uint32_t)(v >> 32) == id ? (uint32_t)v : 0;
}

static int marker(struct sbcupti_xlate *x, const CUpti_ActivityMarker2 *m, struct sb_gpu *out)
{
	if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START)
		out->sub = SB_MARK_RANGE_PUSH;
	else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END)
		out->sub = SB_MARK_RANGE_POP;
	else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS)
		out->sub = SB_MARK_INSTANT;
	else {
		ADD(&x->filtered, 1); /* sync-object markers */
		return 0;
	}
	if (!times(x, m->timestamp, m->timestamp, out))
		return -1;
	if (m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ||
	    m->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS)
		out->h.tid = x->tids_are_os ? m->objectId.pt.threadId : 0;
	out->correlation_id = m->id;
	if (m->name && x->chan)
		out->name_id = sbc_intern(x->chan, m->name);
	/* a range's end record carries no name: give the pop the push's */
	if (out->sub == SB_MARK_RANGE_PUSH && out->name_id)
		__atomic_store_n(&x->marks[m->id % SBCUPTI_MARKS],
				 (uint64_t)m->id << 32 | out->name_id, __ATOMIC_RELAXED);
	else if (out->sub == SB_MARK_RANGE_POP && !out->name_id)
		out->name_id = mark_name(x, m->id);
	return 1;
}

int sbcupti_translate(struct sbcupti_xlate *x, const CUpti_Activity *rec, struct sb_gpu *out)
{
	memset(out, 0, sizeof(*out));
	switch (rec->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const void *)rec;

		if (!times(x, k->start, k->end, out))
			return -1;
		out->h.flags = SB_GPU_KERNEL;
		out->device = k->deviceId;
		out->stream = k->streamId;
		out->correlation_id = k->correlationId;
		out->graph_id = k->graphId;
		out->graph_node_id = k->graphNodeId;
		out->grid[0] = (uint32_t)k->gridX;
		out->grid[1] = (uint32_t)k->gridY;
		out->grid[2] = (uint32_t)k->gridZ;
		out->block[0] = (uint32_t)k->blockX;
		out->block[1] = (uint32_t)k->blockY;
		out->block[2] = (uint32_t)k->blockZ;
		if (k->name && x->chan)
			out->name_id = sbc_intern(x->chan, k->name);
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const void *)rec;

		if (!times(x, m->start, m->end, out))
			return -1;
		out->h.flags = SB_GPU_MEMCPY;
		out->sub = sbcupti_copy_kind(m->copyKind);
		out->bytes = m->bytes;
		out->device = m->deviceId;
		out->stream = m->streamId;
		out->correlation_id = m->correlationId;
		out->graph_id = m->graphId;
		out->graph_node_id = m->graphNodeId;
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY2: {
		const CUpti_ActivityMemcpyPtoP4 *m = (const void *)rec;

		if (!times(x, m->start, m->end, out))
			return -1;
		out->h.flags = SB_GPU_MEMCPY;
		out->sub = SB_COPY_PEER;
		out->bytes = m->bytes;
		out->device = m->deviceId;
		out->stream = m->streamId;
		out->correlation_id = m->correlationId;
		out->graph_id = m->graphId;
		out->graph_node_id = m->graphNodeId;
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const void *)rec;

		if (!times(x, m->start, m->end, out))
			return -1;
		out->h.flags = SB_GPU_MEMSET;
		out->bytes = m->bytes;
		out->device = m->deviceId;
		out->stream = m->streamId;
		out->correlation_id = m->correlationId;
		out->graph_id = m->graphId;
		out->graph_node_id = m->graphNodeId;
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER: {
		const CUpti_ActivityAPI *a = (const void *)rec;
		CUpti_CallbackDomain d = rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME ?
					 CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
		unsigned cls = sbcupti_api_class(d, a->cbid);

		/* when a whole API kind had to be enabled, the filter is here */
		if (!cls) {
			ADD(&x->filtered, 1);
			return 0;
		}
		if (!times(x, a->start, a->end, out))
			return -1;
		out->h.flags = SB_GPU_API;
		out->h.tid = x->tids_are_os ? a->threadId : 0;
		out->sub = cls;
		out->correlation_id = a->correlationId;
		out->name_id = api_name_id(x, d, a->cbid);
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
		const CUpti_ActivitySynchronization2 *s = (const void *)rec;

		if (!times(x, s->start, s->end, out))
			return -1;
		out->h.flags = SB_GPU_SYNC;
		out->sub = s->type; /* CUpti_ActivitySynchronizationType, 1..4 */
		out->stream = s->streamId;
		out->correlation_id = s->correlationId;
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_MARKER:
		out->h.flags = SB_GPU_MARKER;
		return marker(x, (const CUpti_ActivityMarker2 *)rec, out);
	case CUPTI_ACTIVITY_KIND_OVERHEAD: {
		const CUpti_ActivityOverhead3 *o = (const void *)rec;

		if (!times(x, o->start, o->end, out))
			return -1;
		out->h.flags = SB_GPU_OVERHEAD;
		out->sub = o->overheadKind;
		out->correlation_id = o->correlationId;
		if (o->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ||
		    o->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS)
			out->h.tid = x->tids_are_os ? o->objectId.pt.threadId : 0;
		else if (o->objectKind == CUPTI_ACTIVITY_OBJECT_DEVICE ||
			 o->objectKind == CUPTI_ACTIVITY_OBJECT_CONTEXT ||
			 o->objectKind == CUPTI_ACTIVITY_OBJECT_STREAM)
			out->device = o->objectId.dcs.deviceId;
		if (x->chan)
			out->name_id = sbc_intern(x->chan, overhead_name(o->overheadKind));
		return 1;
	}
	default:
		ADD(&x->filtered, 1);
		return 0;
	}
}
