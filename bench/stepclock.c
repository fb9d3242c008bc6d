// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * stepclock: the trainer's own step times, read from its GPU timeline channel,
 * for the observer-effect benchmark (bench/observer.py).
 *
 *   stepclock -p PID [-o FILE] [--tick-ms N] [--wait S]
 *
 * Attaches to the GPU channel of PID as the agent (user/channel.h; found in
 * the process's own mappings), enables it, keeps the heartbeat fresh and
 * drains it every tick (100 ms, as stepblame's own capture loop does) until
 * PID exits. simtrainer started with
 * --wait-agent begins its steps once the channel is enabled. Each step's time
 * is STEP_END.ts - STEP_BEGIN.ts of the SB_GPU_MARKER records, timestamps that
 * simtrainer takes itself (CLOCK_MONOTONIC): the same clock whatever tracer
 * runs beside it, and the same reader cost in every variant (a tracer under
 * test must then leave the channel alone: stepblame record --no-gpu).
 *
 * stdout: one key=value line (steps, p50_ns, p99_ns, mean_ns, max_ns,
 * records, ring_drops, t0, t1); -o FILE: one "step dur_ns begin_ns" line per step.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "format/channel.h"

#define MAX_STEPS (1u << 20)

static uint64_t *begin_ns, *end_ns;
static uint64_t max_step, records;
static int have_any;

static uint64_t mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int on_record(void *ctx, const struct sb_hdr *h)
{
	const struct sb_gpu *g = (const void *)h;

	(void)ctx;
	if (h->type != SB_REC_GPU)
		return 0;
	records++;
	if (h->flags != SB_GPU_MARKER || g->bytes >= MAX_STEPS)
		return 0;
	if (g->sub == SB_MARK_STEP_BEGIN)
		begin_ns[g->bytes] = h->ts;
	else if (g->sub == SB_MARK_STEP_END)
		end_ns[g->bytes] = h->ts;
	else
		return 0;
	if (!have_any || g->bytes > max_step)
		max_step = g->bytes;
	have_any = 1;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* nearest-rank percentile of sorted v[0..n) */
static uint64_t pct(const uint64_t *v, size_t n, double p)
{
	size_t k = (size_t)(p / 100.0 * (double)n + 0.999999);

	if (k < 1)
		k = 1;
	return v[(k > n ? n : k) - 1];
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "pid", required_argument, NULL, 'p' }, { "output", required_argument, NULL, 'o' },
		{ "tick-ms", required_argument, NULL, 't' }, { "wait", required_argument, NULL, 'w' },
		{ 0 },
	};
	const char *out = NULL;
	double wait_s = 10;
	int pid = 0, tick_ms = 100, c, pidfd;
	struct sbc_reader *r = NULL;
	uint64_t deadline, t0, t1, ring = 0, strs = 0, src = 0;
	char err[256] = "";

	while ((c = getopt_long(argc, argv, "p:o:", lo, NULL)) != -1) {
		switch (c) {
		case 'p': pid = atoi(optarg); break;
		case 'o': out = optarg; break;
		case 't': tick_ms = atoi(optarg); break;
		case 'w': wait_s = atof(optarg); break;
		default:
			fprintf(stderr, "usage: stepclock -p PID [-o FILE] [--tick-ms N] [--wait S]\n");
			return 2;
		}
	}
	if (pid <= 0 || tick_ms <= 0) {
		fprintf(stderr, "usage: stepclock -p PID [-o FILE] [--tick-ms N] [--wait S]\n");
		return 2;
	}
	begin_ns = calloc(MAX_STEPS, sizeof(*begin_ns));
	end_ns = calloc(MAX_STEPS, sizeof(*end_ns));
	if (!begin_ns || !end_ns)
		return 1;
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		fprintf(stderr, "stepclock: pidfd_open(%d): %s\n", pid, strerror(errno));
		return 1;
	}
	/* the producer creates its channel at start: wait for it */
	deadline = mono() + (uint64_t)(wait_s * 1e9);
	while (!(r = sbc_attach(pid, err, sizeof(err)))) {
		/* ENOENT: not yet; EPERM "still being created": the producer is mid-setup */
		if ((errno != ENOENT && errno != EPERM && errno != EAGAIN) || mono() > deadline) {
			fprintf(stderr, "stepclock: %s\n", err);
			return 1;
		}
		usleep(5000);
	}
	if (sbc_set_enabled(r, true)) {
		fprintf(stderr, "stepclock: cannot enable the channel of %d\n", pid);
		return 1;
	}
	t0 = mono();
	for (;;) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		int gone = poll(&p, 1, tick_ms) == 1;

		sbc_heartbeat(r);
		while (sbc_drain(r, on_record, NULL) > 0)
			;
		if (gone)
			break;
	}
	t1 = mono();
	sbc_counters(r, &ring, &strs, &src);
	sbc_detach(r);

	uint64_t *d = calloc(max_step + 1, sizeof(*d)), sum = 0;
	size_t n = 0;
	FILE *f = out ? fopen(out, "w") : NULL;

	if (out && !f) {
		fprintf(stderr, "stepclock: %s: %s\n", out, strerror(errno));
		return 1;
	}
	for (uint64_t s = 0; have_any && s <= max_step; s++) {
		if (!begin_ns[s] || !end_ns[s] || end_ns[s] < begin_ns[s])
			continue;
		d[n++] = end_ns[s] - begin_ns[s];
		sum += end_ns[s] - begin_ns[s];
		if (f)
			fprintf(f, "%llu %llu %llu\n", (unsigned long long)s,
				(unsigned long long)(end_ns[s] - begin_ns[s]),
				(unsigned long long)begin_ns[s]);
	}
	if (f)
		fclose(f);
	qsort(d, n, sizeof(*d), cmp_u64);
	printf("steps=%zu p50_ns=%llu p99_ns=%llu mean_ns=%llu max_ns=%llu records=%llu "
	       "ring_drops=%llu t0=%llu t1=%llu\n", n,
	       (unsigned long long)(n ? pct(d, n, 50) : 0), (unsigned long long)(n ? pct(d, n, 99) : 0),
	       (unsigned long long)(n ? sum / n : 0), (unsigned long long)(n ? d[n - 1] : 0),
	       (unsigned long long)records, (unsigned long long)ring, (unsigned long long)t0,
	       (unsigned long long)t1);
	return n ? 0 : 1;
}
