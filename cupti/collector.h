/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The CUPTI collector: runs inside the trainer (CUDA_INJECTION64_PATH), turns
 * CUPTI activity records into struct sb_gpu records on the GPU timeline
 * channel (schemas/channel.md, "The CUPTI producer").
 *
 * Everything CUPTI is reached through struct sbcupti_ops so that the tests can
 * drive the state machine without a GPU; the library itself always uses the
 * real CUPTI. The translation walks buffers with the real
 * cuptiActivityGetNextRecord, which works on a synthesized buffer without a GPU.
 */
#ifndef STEPBLAME_CUPTI_COLLECTOR_H
#define STEPBLAME_CUPTI_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cupti.h>

#include "format/channel.h"

#define SBCUPTI_PREFIX "stepblame collector: "
#define SBCUPTI_DEFAULT_BUFS 16
#define SBCUPTI_DEFAULT_BUF_BYTES (4u << 20)
#define SBCUPTI_MAX_BUFS 64
#define SBCUPTI_POLL_MS 100          /* how often the watcher looks at the control word */
#define SBCUPTI_FLUSH_PERIOD_MS 100  /* CUPTI delivers buffers at least this often */
#define SBCUPTI_MARKS 1024           /* NVTX range id -> name, for the pop records */
#define SBCUPTI_BUSY_RETRY_POLLS 50  /* another subscriber: try again after this many polls */

/* the channel producer names an agent can read (struct sbc_header.producer) */
#define SBCUPTI_PRODUCER "cupti"
#define SBCUPTI_PRODUCER_INERT "cupti-inert:"  /* + reason below */
#define SBCUPTI_INERT_SUBSCRIBER "other-subscriber"
#define SBCUPTI_INERT_ERROR "cupti-error"

enum sbcupti_state {
	SBCUPTI_OFF = 0,     /* not started (or stopped) */
	SBCUPTI_INERT,       /* gave up: an error, or another CUPTI subscriber */
	SBCUPTI_DORMANT,     /* ready; not subscribed, no activity kind enabled */
	SBCUPTI_ENABLED,     /* an agent is reading: subscribed, kinds enabled */
};

struct sbcupti_ops {
	CUptiResult (*subscribe)(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *ud);
	CUptiResult (*unsubscribe)(CUpti_SubscriberHandle sub);
	CUptiResult (*set_thread_id_type)(CUpti_ActivityThreadIdType type);
	CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc req,
					  CUpti_BuffersCallbackCompleteFunc done);
	CUptiResult (*register_timestamp_callback)(CUpti_TimestampCallbackFunc fn);
	CUptiResult (*get_timestamp)(uint64_t *ts);
	CUptiResult (*enable)(CUpti_ActivityKind kind);
	CUptiResult (*disable)(CUpti_ActivityKind kind);
	CUptiResult (*enable_runtime_api)(CUpti_CallbackId cbid, uint8_t on);
	CUptiResult (*enable_driver_api)(CUpti_CallbackId cbid, uint8_t on);
	CUptiResult (*flush_period)(uint32_t ms);
	CUptiResult (*flush_all)(uint32_t flag);
	CUptiResult (*dropped)(CUcontext ctx, uint32_t stream, size_t *n);
};

extern const struct sbcupti_ops sbcupti_real_ops;

struct sbcupti_config {
	const struct sbcupti_ops *ops; /* NULL: the real CUPTI */
	unsigned nbufs;                /* activity buffers in the pool; 0: default */
	unsigned buf_bytes;            /* bytes each; 0: default */
	unsigned poll_ms;              /* watcher period; 0: SBCUPTI_POLL_MS */
	unsigned nslots;               /* channel ring slots; 0: the channel's default */
	bool no_watcher;               /* no thread: the caller runs sbcupti_poll() */
	bool no_atexit;                /* do not register the exit hook (tests) */
};

struct sbcupti_stats {
	enum sbcupti_state state;
	char inert_reason[160];
	uint32_t kinds_on;             /* activity kinds enabled right now */
	uint32_t apis_on;              /* runtime + driver callback ids enabled right now */
	bool subscribed;               /* holding the process's one CUPTI subscription */
	uint64_t enables, disables;    /* transitions into / out of ENABLED */
	uint64_t flushes;              /* cuptiActivityFlushAll calls */
	uint64_t buffers;              /* buffers completed */
	uint64_t records;              /* activity records walked */
	uint64_t emitted;              /* put in the channel */
	uint64_t inactive;             /* translated while no agent listened: discarded */
	uint64_t ring_full;            /* the channel refused: counted there as ring drops */
	uint64_t filtered;             /* kinds/APIs we do not collect */
	uint64_t zero_skipped;         /* start and end both 0: dropped, counted as source drops */
	uint64_t zero_fixed;           /* one of start/end 0 (or end < start): end = start */
	uint64_t pool_empty;           /* CUPTI asked for a buffer and the pool had none */
	uint64_t source_drops;         /* cuptiActivityGetNumDroppedRecords, summed */
	unsigned bufs_free, bufs_total;
	bool clock_callback;           /* timestamps come from our CLOCK_MONOTONIC callback */
	int64_t clock_offset_ns;       /* else: this offset turns CUPTI's clock into monotonic */
};

/* ---- translation (translate.c) ---- */

struct sbcupti_xlate {
	struct sbc_producer *chan;     /* names are interned here; NULL: no names */
	bool tids_are_os;              /* CUPTI threadId is gettid() (else reported as 0) */
	uint64_t filtered, zero_skipped, zero_fixed;  /* atomically updated */
	uint64_t marks[SBCUPTI_MARKS]; /* range id << 32 | name id, last writer wins */
};

/*
 * Translate one activity record. 1: *out is filled (h.type/size/pid are left
 * for sbc_emit); 0: a kind or API we do not collect; -1: CUPTI left both
 * timestamps 0, nothing to place (the caller counts it as a source drop).
 */
int sbcupti_translate(struct sbcupti_xlate *x, const CUpti_Activity *rec, struct sb_gpu *out);
/* enum sb_gpu_api of a runtime/driver callback id, 0 if it is not collected */
unsigned sbcupti_api_class(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
/* the API's name without CUPTI's version/stream suffixes: "cudaLaunchKernel" */
const char *sbcupti_api_name(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, char *buf,
			     size_t len);
/* enum sb_gpu_copy of a CUpti_ActivityMemcpyKind */
unsigned sbcupti_copy_kind(unsigned cupti_kind);

/* ---- the collector (collector.c) ---- */

/* start: what InitializeInjection does, with the CUPTI calls taken from cfg */
int sbcupti_start(const struct sbcupti_config *cfg);
/* one look at the control word: enable or disable the activity kinds */
void sbcupti_poll(void);
/* disable, flush, destroy the channel; safe to call more than once */
void sbcupti_stop(void);
void sbcupti_stats(struct sbcupti_stats *st);

/* the CUPTI buffer callbacks (exported for tests) */
void CUPTIAPI sbcupti_buffer_requested(uint8_t **buf, size_t *size, size_t *max_records);
void CUPTIAPI sbcupti_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf,
				       size_t size, size_t valid);
/* the timestamp callback: CLOCK_MONOTONIC ns */
uint64_t CUPTIAPI sbcupti_timestamp(void);

/* the entry point the CUDA driver calls; returns 1 (never fails the host) */
int InitializeInjection(void) __attribute__((visibility("default")));

#endif
