// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * gentrace: a big, valid trace for the analysis benchmark, made by tiling a
 * real recording in time (bench/analysis.py records the template: simtrainer
 * with several kinds of injected interference, traced by stepblame record).
 *
 *   gentrace TEMPLATE.sbt OUT.sbt --records N
 *   gentrace --read FILE.sbt     read every record with the strict streaming
 *                                reader and count them: the floor under any analysis
 *   gentrace --copy FILE OUT LEVEL   write FILE's records again through the
 *                                trace writer, zstd LEVEL (0: plain), and print the
 *                                writer's CPU time: what compression costs the agent
 *
 * The template's agent records (host, cpus, target, threads, probes, strings,
 * notes) are written once, at the start. Then its event records (kernel events
 * and GPU records) are copied again and again, each copy shifted in time by the
 * template's whole steps (from its first step mark to its last plus one mean
 * step; events outside are left out), with step numbers (USDT steps, GPU step
 * markers) and GPU correlation ids shifted so that every copy is a new run of
 * steps seamlessly following the last, until N event records are written. Thread create/exit records only in the
 * first/last copy; the cumulative alloc_stats and drops records only once, at
 * the end. The result passes the strict reader (trace.o writes it) and looks
 * to the report like one long recording of the same trainer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format/gpu.h"
#include "format/trace.h"

struct rec { uint8_t *p; size_t n; };


static void shift(struct sb_hdr *h, uint64_t dt, uint64_t dstep, uint32_t dcorr)
{
	unsigned off = sb_types[h->type].start_off;

	h->ts += dt;
	/* the start of an interval moves with its end (the start column of SB_RECORD_TYPES) */
	if (off) {
		uint64_t start;

		memcpy(&start, (char *)h + off, sizeof(start));
		start += dt;
		memcpy((char *)h + off, &start, sizeof(start));
	}
	switch (h->type) {
	case SB_EV_STEP: ((struct sb_step *)h)->step += dstep; break;
	case SB_REC_GPU: {
		struct sb_gpu *g = (struct sb_gpu *)h;

		g->end_ns += dt;
		if (g->correlation_id)
			g->correlation_id += dcorr;
		if (h->flags == SB_GPU_MARKER)
			g->bytes += dstep;
		break;
	}
	default: break;
	}
}

/* give up on the output: no partial file left behind */
static int discard(struct sbt_writer *w, const char *why)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s", sbt_partial_path(w));
	sbt_abandon(w);
	unlink(path);
	fprintf(stderr, "gentrace: %s\n", why);
	return 1;
}

static int read_only(const char *path)
{
	const struct sb_hdr *h;
	uint64_t n = 0, bytes = 0;
	enum sbt_status st;
	char err[256];
	struct sbt_reader *r = sbt_open(path, err, sizeof(err));

	if (!r) {
		fprintf(stderr, "gentrace: %s\n", err);
		return 1;
	}
	while ((st = sbt_next(r, &h)) == SBT_OK) {
		n++;
		bytes += h->size;
	}
	if (st != SBT_EOF) {
		fprintf(stderr, "gentrace: %s\n", sbt_error(r));
		return 1;
	}
	sbt_close(r);
	printf("records=%llu bytes=%llu\n", (unsigned long long)n, (unsigned long long)bytes);
	return 0;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int copy(const char *in, const char *out, int level)
{
	const struct sb_hdr *h;
	uint8_t *all = NULL, *more;
	size_t len = 0, cap = 0, at;
	enum sbt_status st;
	struct sbt_writer *w;
	char err[256];
	struct sbt_reader *r = sbt_open(in, err, sizeof(err));
	uint64_t t0, t1;
	struct stat sb;

	if (!r) {
		fprintf(stderr, "gentrace: %s\n", err);
		return 1;
	}
	/* every record in memory first: only the writing is timed */
	while ((st = sbt_next(r, &h)) == SBT_OK) {
		if (len + h->size > cap) {
			cap = cap ? 2 * cap : 1 << 24;
			more = realloc(all, cap);
			if (!more) {
				fprintf(stderr, "gentrace: out of memory\n");
				return 1;
			}
			all = more;
		}
		memcpy(all + len, h, h->size);
		len += h->size;
	}
	sbt_close(r);
	t0 = cpu_ns();
	w = sbt_create_as(out, NULL, level, err, sizeof(err));
	if (!w) {
		fprintf(stderr, "gentrace: %s\n", err);
		return 1;
	}
	for (at = 0; at < len; at += ((const struct sb_hdr *)(all + at))->size)
		if (sbt_write(w, all + at))
			return discard(w, "write failed");
	if (sbt_finish(w, SBT_END_DURATION, 0, 0, 0)) {
		fprintf(stderr, "gentrace: finishing %s failed\n", out);
		return 1;
	}
	t1 = cpu_ns();
	stat(out, &sb);
	printf("bytes_in=%zu bytes_out=%lld cpu_ns=%llu\n", len, (long long)sb.st_size,
	       (unsigned long long)(t1 - t0));
	free(all);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t want = 0, written = 0, t_lo = UINT64_MAX, t_hi = 0, max_step = 0;
	uint32_t max_corr = 0;
	uint64_t step_lo = UINT64_MAX, step_hi = 0, nsteps = 0;
	struct rec *body = NULL, *tail = NULL, *pre = NULL;
	size_t nbody = 0, ntail = 0, npre = 0, cbody = 0, ctail = 0, cpre = 0;
	const struct sb_hdr *h;
	struct sbt_writer *w;
	struct sbt_reader *r;
	enum sbt_status st;
	char err[256];
	uint8_t buf[SBT_MAX_RECORD + 8];

	if (argc == 3 && !strcmp(argv[1], "--read"))
		return read_only(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "--copy"))
		return copy(argv[2], argv[3], atoi(argv[4]));
	if (argc != 5 || strcmp(argv[3], "--records") || !(want = strtoull(argv[4], NULL, 10))) {
		fprintf(stderr, "usage: gentrace TEMPLATE.sbt OUT.sbt --records N | --read FILE.sbt | "
			"--copy FILE OUT LEVEL\n");
		return 2;
	}
	r = sbt_open(argv[1], err, sizeof(err));
	if (!r) {
		fprintf(stderr, "gentrace: %s\n", err);
		return 1;
	}
	/* the whole template in memory: preamble, events, end-of-run records */
	while ((st = sbt_next(r, &h)) == SBT_OK) {
		bool event = sb_type_is_engine_input(h->type);
		bool at_end = h->type == SB_REC_ALLOC_STATS || h->type == SB_REC_DROPS ||
			      h->type == SB_REC_NOTE;
		struct rec **v = event ? &body : at_end ? &tail : &pre;
		size_t *n = event ? &nbody : at_end ? &ntail : &npre;
		size_t *cap = event ? &cbody : at_end ? &ctail : &cpre;

		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 4096;
			*v = realloc(*v, *cap * sizeof(**v));
			if (!*v)
				return 1;
		}
		(*v)[*n].n = h->size;
		(*v)[*n].p = malloc(h->size);
		if (!(*v)[*n].p)
			return 1;
		memcpy((*v)[*n].p, h, h->size);
		(*n)++;
		if (!event)
			continue;
		if (h->ts < t_lo)
			t_lo = h->ts;
		if (h->ts > t_hi)
			t_hi = h->ts;
		if (h->type == SB_EV_STEP) {
			if (((const struct sb_step *)h)->step > max_step)
				max_step = ((const struct sb_step *)h)->step;
			step_lo = h->ts < step_lo ? h->ts : step_lo;
			step_hi = h->ts > step_hi ? h->ts : step_hi;
			nsteps++;
		}
		if (h->type == SB_REC_GPU) {
			const struct sb_gpu *g = (const void *)h;

			if (g->correlation_id > max_corr)
				max_corr = g->correlation_id;
			if (h->flags == SB_GPU_MARKER && g->bytes > max_step)
				max_step = g->bytes;
		}
	}
	if (st != SBT_EOF && st != SBT_TRUNCATED) {
		fprintf(stderr, "gentrace: %s\n", sbt_error(r));
		return 1;
	}
	sbt_close(r);
	if (!nbody) {
		fprintf(stderr, "gentrace: the template has no event records\n");
		return 1;
	}
	uint64_t span = t_hi - t_lo + 1000000, copies = 0, t_end = 0;

	w = sbt_create(argv[2]);
	if (!w) {
		fprintf(stderr, "gentrace: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	for (size_t i = 0; i < npre; i++)
		if (sbt_write(w, pre[i].p))
			return discard(w, "writing the preamble failed");

	/* whole steps only, so that copies follow each other without a gap */
	if (nsteps >= 3) {
		t_lo = step_lo;
		t_hi = step_hi + (step_hi - step_lo) / (nsteps - 1);
		span = t_hi - t_lo;
	}

	while (written < want) {
		uint64_t dt = copies * span, dstep = copies * (max_step + 1);
		uint32_t dcorr = (uint32_t)(copies * (max_corr + 1));

		for (size_t i = 0; i < nbody && written < want; i++) {
			struct sb_hdr *e = (struct sb_hdr *)buf;

			memcpy(buf, body[i].p, body[i].n);
			if (e->ts < t_lo || e->ts >= t_hi)
				continue;
			/* threads are born in the first copy and die in the last one */
			if ((e->type == SB_EV_THREAD_NEW && copies) ||
			    (e->type == SB_EV_THREAD_EXIT && written + (nbody - i) < want))
				continue;
			shift(e, dt, dstep, dcorr);
			if (sbt_write(w, e))
				return discard(w, "a write failed");
			if (e->ts > t_end)
				t_end = e->ts;
			written++;
		}
		copies++;
	}
	for (size_t i = 0; i < ntail; i++) {
		struct sb_hdr *e = (struct sb_hdr *)buf;

		memcpy(buf, tail[i].p, tail[i].n);
		e->ts = t_end;
		if (sbt_write(w, e))
			return discard(w, "a write failed");
	}
	if (sbt_finish(w, SBT_END_TARGET_EXIT, t_lo, t_end + 1, 0)) {
		fprintf(stderr, "gentrace: finishing %s failed\n", argv[2]);
		return 1;
	}
	printf("records=%llu copies=%llu template_events=%zu steps_per_copy=%llu span_ns=%llu\n",
	       (unsigned long long)written, (unsigned long long)copies, nbody,
	       (unsigned long long)(max_step + 1), (unsigned long long)span);
	return 0;
}
