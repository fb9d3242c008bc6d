/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One GPU timeline record: what the channel carries (schemas/channel.md) and
 * what a trace file stores as SB_REC_GPU. Every GPU source (the CUPTI
 * collector, simtrainer's simulated device) produces exactly these.
 */
#ifndef STEPBLAME_GPU_H
#define STEPBLAME_GPU_H

#include "bpf/events.h"

enum sb_gpu_kind {
	SB_GPU_KERNEL = 1,
	SB_GPU_MEMCPY = 2,
	SB_GPU_MEMSET = 3,
	SB_GPU_API = 4,      /* a CUDA runtime/driver call on a host thread */
	SB_GPU_SYNC = 5,     /* a synchronisation (stream, event, context) */
	SB_GPU_MARKER = 6,   /* step begin/end, NVTX range */
	SB_GPU_OVERHEAD = 7, /* the GPU source's own overhead */
};

enum sb_gpu_api {        /* sub for SB_GPU_API */
	SB_API_LAUNCH = 1, SB_API_SYNC = 2, SB_API_ALLOC = 3, SB_API_FREE = 4,
	SB_API_MEMCPY = 5, SB_API_OTHER = 6,
};

enum sb_gpu_mark {       /* sub for SB_GPU_MARKER */
	SB_MARK_STEP_BEGIN = 1, SB_MARK_STEP_END = 2, SB_MARK_RANGE_PUSH = 3,
	SB_MARK_RANGE_POP = 4, SB_MARK_INSTANT = 5,
};

enum sb_gpu_copy {       /* sub for SB_GPU_MEMCPY */
	SB_COPY_HTOD = 1, SB_COPY_DTOH = 2, SB_COPY_DTOD = 3, SB_COPY_HTOH = 4,
	SB_COPY_PEER = 5, SB_COPY_OTHER = 6,
};

struct sb_gpu {
	struct sb_hdr h;         /* type SB_REC_GPU; flags = enum sb_gpu_kind;
				  * pid = producing process; tid = host thread
				  * (API, marker) or 0; ts = start ns, CLOCK_MONOTONIC */
	__u64 end_ns;            /* == ts for instants */
	__u64 bytes;             /* memcpy/memset bytes; marker: step number */
	__u64 graph_node_id;
	__u32 correlation_id;    /* kernel/memcpy/memset <-> the API call that issued it */
	__u32 device;
	__u32 stream;
	__u32 name_id;           /* SB_REC_STRING id: kernel name, API name, NVTX text; 0 none */
	__u32 sub;               /* sb_gpu_api / sb_gpu_mark / sb_gpu_copy / sync type */
	__u32 graph_id;
	__u32 grid[3];
	__u32 block[3];
};                           /* 96 bytes */

_Static_assert(sizeof(struct sb_gpu) == 96, "sb_gpu is part of two formats: 96 bytes");

#endif
