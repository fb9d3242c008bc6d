// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The GPU: its busy union opens and closes the idle gaps; launches are matched
 * to their operations by correlation id; kernels slower than their shape's
 * running median add gpu_slow; markers and NVTX ranges mark steps.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"
#include "format/gpu.h"

#define KERNEL_SHAPES_MAX 32768

static void p2_add(struct p2_quantile *p, double x, double quant)
{
	int k;

	if (p->n < 5) {
		p->q[p->n++] = x;
		if (p->n == 5) {
			for (int i = 1; i < 5; i++)
				for (int j = i; j > 0 && p->q[j - 1] > p->q[j]; j--) {
					double t = p->q[j];

					p->q[j] = p->q[j - 1];
					p->q[j - 1] = t;
				}
			for (int i = 0; i < 5; i++)
				p->pos[i] = i + 1;
			p->np[0] = 1;
			p->np[1] = 1 + 2 * quant;
			p->np[2] = 1 + 4 * quant;
			p->np[3] = 3 + 2 * quant;
			p->np[4] = 5;
			p->dn[0] = 0;
			p->dn[1] = quant / 2;
			p->dn[2] = quant;
			p->dn[3] = (1 + quant) / 2;
			p->dn[4] = 1;
		}
		return;
	}
	p->n++;
	if (x < p->q[0]) {
		p->q[0] = x;
		k = 0;
	} else if (x >= p->q[4]) {
		p->q[4] = x;
		k = 3;
	} else {
		for (k = 0; k < 3 && x >= p->q[k + 1]; k++)
			;
	}
	for (int i = k + 1; i < 5; i++)
		p->pos[i]++;
	for (int i = 0; i < 5; i++)
		p->np[i] += p->dn[i];
	for (int i = 1; i < 4; i++) {
		double d = p->np[i] - p->pos[i];

		if ((d >= 1 && p->pos[i + 1] - p->pos[i] > 1) ||
		    (d <= -1 && p->pos[i - 1] - p->pos[i] < -1)) {
			int sg = d >= 0 ? 1 : -1;
			double qp = p->q[i] + (double)sg / (p->pos[i + 1] - p->pos[i - 1]) *
				    ((p->pos[i] - p->pos[i - 1] + sg) * (p->q[i + 1] - p->q[i]) /
					     (p->pos[i + 1] - p->pos[i]) +
				     (p->pos[i + 1] - p->pos[i] - sg) * (p->q[i] - p->q[i - 1]) /
					     (p->pos[i] - p->pos[i - 1]));

			if (p->q[i - 1] < qp && qp < p->q[i + 1])
				p->q[i] = qp;
			else
				p->q[i] += sg * (p->q[i + sg] - p->q[i]) / (p->pos[i + sg] - p->pos[i]);
			p->pos[i] += sg;
		}
	}
}

static double p2_median(const struct p2_quantile *p)
{
	double v[5];

	if (p->n >= 5)
		return p->q[2];
	memcpy(v, p->q, sizeof(v));
	for (int i = 1; i < p->n; i++)
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return p->n ? v[(p->n - 1) / 2] : 0;
}

void gpu_gap_open(struct engine *e, uint64_t t)
{
	account_candidates(e, t);
	e->gap_open = true;
	if (e->current_step) {
		e->current_piece = piece_new(e, e->current_step->seq, t);
		e->current_step->open_pieces++;
	}
}

static void gpu_gap_close(struct engine *e, uint64_t t, uint32_t crit)
{
	account_candidates(e, t);
	if (e->current_piece) {
		e->current_piece->end = t;
		e->current_piece->closed = true;
	}
	while (e->npieces) {
		struct piece *p = e->pieces[e->pieces_head];

		piece_commit(e, p, crit ? crit : step_fallback_critical(e, p->step_seq));
		piece_pop(e);
	}
	e->current_piece = NULL;
	e->gap_open = false;
	steps_finalize_ready(e);
}

/* the operation issued as corr has started: it is no longer queued */
static void launch_started(struct engine *e, uint32_t corr)
{
	if (corr && e->launches[corr % CORR_SLOTS].corr == corr && e->launches[corr % CORR_SLOTS].queued) {
		e->launches[corr % CORR_SLOTS].queued = false;
		if (e->gpu_queued)
			e->gpu_queued--;
	}
}

static uint32_t launcher_of(struct engine *e, uint32_t corr)
{
	if (!corr || !e->launches)
		return 0;
	if (e->launches[corr % CORR_SLOTS].corr == corr)
		return e->launches[corr % CORR_SLOTS].tid;
	return 0;
}

/* the slot of (name, grid, block): its entry, or the empty slot where it would go */
static struct kernel_shape *kernel_shape_slot(struct engine *e, uint32_t name_id,
					      const uint32_t grid[3], const uint32_t block[3])
{
	uint32_t h = hash32(name_id ^ hash32(grid[0] * 31 + grid[1] * 17 + grid[2]) ^
			    hash32(block[0] * 13 + block[1] * 7 + block[2] + 1));

	for (uint32_t i = h & (e->kernel_shapes_cap - 1);; i = (i + 1) & (e->kernel_shapes_cap - 1)) {
		struct kernel_shape *k = &e->kernel_shapes[i];

		if (!k->used || (k->name_id == name_id && !memcmp(k->grid, grid, sizeof(k->grid)) &&
				 !memcmp(k->block, block, sizeof(k->block))))
			return k;
	}
}

/* the running median of this kernel shape; NULL past KERNEL_SHAPES_MAX shapes (counted) */
static struct kernel_shape *kernel_shape_get(struct engine *e, const struct sb_gpu *g)
{
	struct kernel_shape *k;

	if ((e->nkernel_shapes + 1) * 2 > e->kernel_shapes_cap && e->nkernel_shapes < KERNEL_SHAPES_MAX) {
		uint32_t oc = e->kernel_shapes_cap, nc = oc ? oc * 2 : 256;
		struct kernel_shape *old = e->kernel_shapes;

		e->kernel_shapes = heap_calloc(e, nc, sizeof(*e->kernel_shapes));
		e->kernel_shapes_cap = nc;
		for (uint32_t i = 0; i < oc; i++)
			if (old[i].used)
				*kernel_shape_slot(e, old[i].name_id, old[i].grid, old[i].block) = old[i];
		free(old);
		heap_account(e, -(int64_t)(oc * sizeof(*old)));
	}
	k = kernel_shape_slot(e, g->name_id, g->grid, g->block);
	if (k->used)
		return k;
	if (e->nkernel_shapes >= KERNEL_SHAPES_MAX) {
		e->kernel_shapes_dropped++;
		return NULL;
	}
	k->used = true;
	k->name_id = g->name_id;
	memcpy(k->grid, g->grid, sizeof(k->grid));
	memcpy(k->block, g->block, sizeof(k->block));
	e->nkernel_shapes++;
	return k;
}

static uint64_t marker_number(struct engine *e, const struct string *s, uint64_t bytes, int src)
{
	if (s && s->text) {
		for (const char *p = s->text; *p; p++)
			if (*p >= '0' && *p <= '9')
				return strtoull(p, NULL, 10);
	}
	return bytes ? bytes : e->source_marks[src];
}

static void gpu_op(struct engine *e, const struct sb_gpu *g)
{
	uint64_t s = max64(g->h.ts, e->now), end = max64(g->end_ns, s);
	uint32_t crit = launcher_of(e, g->correlation_id);

	if (g->h.flags == SB_GPU_KERNEL && e->has_kernel) {
		const struct string *n = string_find(e, g->name_id);

		if (n && n->kernel)
			step_mark(e, ENG_SRC_KERNEL, MARK_ONE, e->source_marks[ENG_SRC_KERNEL], s,
				crit ? crit : e->last_launch_tid);
	}
	if (e->gap_open && s >= e->busy_until)
		gpu_gap_close(e, s, crit);
	launch_started(e, g->correlation_id);
	e->gpu_started = true;
	if (end > e->busy_until)
		e->busy_until = end;
	if (end > e->gpu_max_end)
		e->gpu_max_end = end;
	if (e->current_step)
		e->current_step->gpu_ops++;
	if (g->h.flags == SB_GPU_KERNEL) {
		struct kernel_shape *k = kernel_shape_get(e, g);

		if (k) {
			double d = (double)(end - s), med = p2_median(&k->median);

			/* slower than this kernel's usual (median) time: the excess is gpu_slow */
			if (k->median.n >= 5 && d > med && e->current_step)
				e->current_step->gpu_slow_ns += (uint64_t)(d - med);
			p2_add(&k->median, d, 0.5);
		}
	}
	if (e->opts.timeline.gpu_op) {
		const struct string *n = string_find(e, g->name_id);
		struct eng_gpu_op op = { .device = g->device, .stream = g->stream,
					 .kind = g->h.flags, .name = n && n->text ? n->text : NULL,
					 .correlation_id = g->correlation_id, .launcher_tid = crit,
					 .start_ns = s, .end_ns = end };

		if (crit) {
			op.launcher_pid = e->target_pid ? e->target_pid : g->h.pid;
			op.launch_ns = e->launches[g->correlation_id % CORR_SLOTS].ts;
		}

		e->opts.timeline.gpu_op(e->opts.timeline.ctx, &op);
	}
}

static int api_cause(uint32_t sub)
{
	switch (sub) {
	case SB_API_SYNC: return ENG_CUDA_SYNC;
	case SB_API_ALLOC:
	case SB_API_FREE: return ENG_CUDA_ALLOC;
	}
	return ENG_CUDA_API;
}

static void gpu_marker(struct engine *e, const struct sb_gpu *g)
{
	struct thread *t;
	const struct string *n;

	switch (g->sub) {
	case SB_MARK_STEP_BEGIN:
		step_mark(e, ENG_SRC_GPU_MARKER, MARK_BEGIN, g->bytes, g->h.ts, g->h.tid);
		break;
	case SB_MARK_STEP_END:
		step_mark(e, ENG_SRC_GPU_MARKER, MARK_END, g->bytes, g->h.ts, g->h.tid);
		break;
	case SB_MARK_RANGE_PUSH:
		t = thread_get(e, g->h.tid, e->target_pid);
		if (t->sink)
			break;
		if (t->nvtx_n < 64) {
			heap_grow(e, (void **)&t->nvtx, &t->nvtx_cap, t->nvtx_n + 1, sizeof(*t->nvtx));
			t->nvtx[t->nvtx_n++] = g->name_id;
		}
		n = string_find(e, g->name_id);
		if (n && n->nvtx)
			step_mark(e, ENG_SRC_NVTX, MARK_BEGIN,
				marker_number(e, n, g->bytes, ENG_SRC_NVTX), g->h.ts, g->h.tid);
		break;
	case SB_MARK_RANGE_POP:
		t = thread_get(e, g->h.tid, e->target_pid);
		if (!t->sink && t->nvtx_n) {
			n = string_find(e, t->nvtx[--t->nvtx_n]);
			if (n && n->nvtx)
				step_mark(e, ENG_SRC_NVTX, MARK_END, 0, g->h.ts, g->h.tid);
		}
		break;
	}
}

void gpu_record(struct engine *e, const struct sb_gpu *g)
{
	struct thread *t;
	uint32_t tid;

	switch (g->h.flags) {
	case SB_GPU_KERNEL:
	case SB_GPU_MEMCPY:
	case SB_GPU_MEMSET:
		gpu_op(e, g);
		break;
	case SB_GPU_API:
		if (e->has_api) {
			const struct string *n = string_find(e, g->name_id);

			if (n && n->api)
				step_mark(e, ENG_SRC_API, MARK_ONE, e->source_marks[ENG_SRC_API],
					  g->h.ts, g->h.tid);
		}
		if (g->correlation_id && e->launches) {
			typeof(e->launches) c = &e->launches[g->correlation_id % CORR_SLOTS];

			/* a slot reused before its operation started: that one is lost */
			if (c->queued && e->gpu_queued)
				e->gpu_queued--;
			c->corr = g->correlation_id;
			c->tid = g->h.tid;
			c->ts = g->h.ts;
			c->queued = g->sub == SB_API_LAUNCH || g->sub == SB_API_MEMCPY;
			e->gpu_queued += c->queued;
		}
		if (!g->h.tid)
			break;
		t = thread_get(e, g->h.tid, e->target_pid);
		if (g->sub == SB_API_LAUNCH || g->sub == SB_API_MEMCPY) {
			candidate_add(e, t);
			launcher_add(e, g->h.tid);
			e->last_launch_tid = g->h.tid;
		}
		ev_interval(e, g->h.tid, g->h.ts, g->end_ns, SB_EV_CUDA, api_cause(g->sub),
			    ENG_N_CUDA);
		break;
	case SB_GPU_SYNC:
		tid = g->h.tid ? g->h.tid : launcher_of(e, g->correlation_id);
		if (tid)
			ev_interval(e, tid, g->h.ts, g->end_ns, SB_EV_CUDA, ENG_CUDA_SYNC, -1);
		break;
	case SB_GPU_MARKER:
		gpu_marker(e, g);
		break;
	}
}
