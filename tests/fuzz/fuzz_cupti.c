// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer target: the CUPTI record translation (cupti/translate.c,
 * sbcupti_translate) on activity records made of fuzz bytes, and the path the
 * result takes: the channel (sbc_emit) and the agent (sbc_drain), whose output
 * must be a valid trace record.
 *
 * CUPTI hands out whole records of the size their kind implies, with name
 * pointers into its own memory, so the harness does the same: byte 0 picks the
 * kind (the ones the translator knows, or a raw 32-bit kind from the record
 * itself), the record is the following bytes zero-padded to the largest record
 * struct, and the name pointers (kernel, marker) point at a NUL-terminated copy
 * of the input's tail or are NULL. Everything else is the fuzzer's.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iuser -Ibpf -Icupti \
 *       -I/usr/local/cuda/include tests/fuzz/fuzz_cupti.c cupti/translate.c user/channel.c \
 *       user/trace.c user/util.c -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 \
 *       -lcupti -lpthread -o fuzz_cupti
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector.h"
#include "format/trace.h"

static struct sbc_producer *chan;
static struct sbc_reader *agent;
static struct sbcupti_xlate xl;

static void cleanup(void)
{
	sbc_detach(agent);
	sbc_destroy(chan);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[256];

	(void)argc;
	(void)argv;
	chan = sbc_create("fuzz-cupti", 64);
	if (chan) {
		agent = sbc_attach(getpid(), err, sizeof(err));
		if (agent)
			sbc_set_enabled(agent, true);
	}
	xl.chan = chan;
	atexit(cleanup);
	return 0;
}

static int check_cb(void *ctx, const struct sb_hdr *h)
{
	(void)ctx;
	if ((h->type != SB_REC_GPU && h->type != SB_REC_STRING) || sbt_check_record(h, h->size))
		__builtin_trap();
	return 0;
}

static const uint32_t kinds[] = {
	CUPTI_ACTIVITY_KIND_KERNEL, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET,
	CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
	CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_MARKER,
	CUPTI_ACTIVITY_KIND_OVERHEAD,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	union {
		CUpti_Activity a;
		CUpti_ActivityKernel10 k;
		CUpti_ActivityMemcpy6 m;
		CUpti_ActivityMemcpyPtoP4 p;
		CUpti_ActivityMemset4 s;
		CUpti_ActivityAPI api;
		CUpti_ActivitySynchronization2 sy;
		CUpti_ActivityMarker2 mk;
		CUpti_ActivityOverhead3 o;
		unsigned char bytes[2048];
	} rec;
	char name[160];
	struct sb_gpu out;
	size_t n, tail;
	uint8_t sel;
	int rc;

	if (size < 2)
		return 0;
	sel = data[0];
	data++;
	size--;
	memset(&rec, 0, sizeof(rec));
	n = size < sizeof(rec.bytes) ? size : sizeof(rec.bytes);
	memcpy(rec.bytes, data, n);
	if (sel < 0xf0)
		rec.a.kind = (CUpti_ActivityKind)kinds[sel % (sizeof(kinds) / sizeof(kinds[0]))];
	/* the name: the last up to 150 bytes of the input, or NULL */
	tail = size > 150 ? 150 : size;
	memcpy(name, data + size - tail, tail);
	name[tail] = 0;
	const char *np = (sel & 0x10) ? NULL : name;

	if (rec.a.kind == CUPTI_ACTIVITY_KIND_KERNEL ||
	    rec.a.kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
		rec.k.name = np;
	else if (rec.a.kind == CUPTI_ACTIVITY_KIND_MARKER) {
		rec.mk.name = np;
		rec.mk.domain = NULL;
	}
	xl.tids_are_os = sel & 0x20;
	rc = sbcupti_translate(&xl, &rec.a, &out);
	if (rc < -1 || rc > 1)
		__builtin_trap();
	if (rc == 1) {
		if (out.h.flags < SB_GPU_KERNEL || out.h.flags > SB_GPU_OVERHEAD)
			__builtin_trap();
		if (out.end_ns < out.h.ts || !out.h.ts)
			__builtin_trap(); /* the translator promises a placed interval */
		if (chan && agent) {
			sbc_heartbeat(agent);
			if (sbc_emit(chan, &out) == -ENOSPC)
				sbc_drain(agent, check_cb, NULL);
			sbc_drain(agent, check_cb, NULL);
		}
	}
	(void)sbcupti_api_class(CUPTI_CB_DOMAIN_RUNTIME_API, (CUpti_CallbackId)rec.api.cbid);
	(void)sbcupti_api_class(CUPTI_CB_DOMAIN_DRIVER_API, (CUpti_CallbackId)rec.api.cbid);
	(void)sbcupti_copy_kind(rec.bytes[8]);
	return 0;
}
