// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The JSON report (one document) and JSONL (one step object per line, the
 * objects `attach --json` streams). schemas/report.schema.json describes both;
 * keep them in step.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"
#include "base/json.h"
#include "format/costs.h"
#include "format/trace.h"
#include "report/symbols.h"

static void comm_val(struct jw *w, const char *comm)
{
	jw_strn(w, comm, strnlen(comm, SB_COMM_LEN));
}

/* a followed process other than the target: its role and parent (schemas/report.md) */
static void process_keys(struct jw *w, const struct engine *e, uint32_t pid)
{
	char name[128];

	if (!engine_process_name(e, pid, name, sizeof(name)))
		return;
	jw_key(w, "process");
	jw_str(w, name);
	jw_key(w, "ppid");
	jw_u64(w, engine_process_parent(e, pid));
}

/* blocked, on a followed waker: what it did meanwhile */
static void waker_activity(struct jw *w, const struct engine *e, const struct eng_act *a)
{
	uint64_t total = 0;

	for (int k = 0; k < ENG_NACT; k++)
		total += a->ns[k];
	if (!total)
		return;
	jw_key(w, "waker_activity");
	jw_obj(w);
	for (int k = 0; k < ENG_NACT; k++) {
		char key[32];

		/* the kinds after blocked are written only when there is some */
		if (k > ENG_ACT_BLOCKED && !a->ns[k])
			continue;
		snprintf(key, sizeof(key), "%s_ns", eng_act_name(k));
		jw_key(w, key);
		jw_u64(w, a->ns[k]);
	}
	if ((a->ns[ENG_ACT_IO] || a->on_ns[ENG_ACT_IO]) && a->io_call) {
		/* the recorded I/O call the longest piece of io_ns was in */
		jw_key(w, "io_call");
		jw_str(w, sb_io_name(a->io_call));
		jw_key(w, "io_file_kind");
		jw_str(w, sb_file_kind_name(a->io_kind));
		jw_key(w, "io_file");
		jw_str(w, engine_act_path(e, a->io_path));
	}
	if ((a->ns[ENG_ACT_FAULTING] || a->on_ns[ENG_ACT_FAULTING]) && a->fault_region) {
		/* the region mmap()ed during the capture the longest piece of faulting_ns was in */
		jw_key(w, "fault_region");
		jw_obj(w);
		jw_key(w, "anon");
		jw_bool(w, a->fault_anon);
		jw_key(w, "len");
		jw_u64(w, a->fault_len);
		if (!a->fault_anon && a->fault_path) {
			jw_key(w, "path");
			jw_str(w, engine_act_path(e, a->fault_path));
		}
		jw_obj_end(w);
	}
	if (a->by_max) {
		jw_key(w, "preempted_by");
		jw_obj(w);
		jw_key(w, "pid");
		jw_u64(w, a->by_pid);
		jw_key(w, "tid");
		jw_u64(w, a->by_tid);
		jw_key(w, "comm");
		comm_val(w, a->by_comm);
		process_keys(w, e, a->by_pid);
		jw_obj_end(w);
	}
	{
		uint64_t on = 0;

		for (int k = 0; k < ENG_NACT; k++)
			on += a->on_ns[k];
		if (on) {
			/* of blocked_ns, the sleeps followed threads ended: what they did */
			jw_key(w, "blocked_on_activity");
			jw_obj(w);
			for (int k = 0; k < ENG_NACT; k++) {
				char key[32];

				if (k > ENG_ACT_BLOCKED && !a->on_ns[k])
					continue;
				snprintf(key, sizeof(key), "%s_ns", eng_act_name(k));
				jw_key(w, key);
				jw_u64(w, a->on_ns[k]);
			}
			jw_obj_end(w);
		}
	}
	if (a->on_max && a->on_tid) {
		jw_key(w, "blocked_on");
		jw_obj(w);
		jw_key(w, "pid");
		jw_u64(w, a->on_pid);
		jw_key(w, "tid");
		jw_u64(w, a->on_tid);
		jw_key(w, "comm");
		comm_val(w, a->on_comm);
		process_keys(w, e, a->on_pid);
		jw_obj_end(w);
	}
	jw_obj_end(w);
}

void report_json_culprit(struct jw *w, const struct engine *e, const struct eng_who *c)
{
	jw_key(w, "culprit");
	jw_obj(w);
	jw_key(w, "pid");
	jw_u64(w, c->pid);
	jw_key(w, "tid");
	jw_u64(w, c->tid);
	jw_key(w, "comm");
	comm_val(w, c->comm);
	process_keys(w, e, c->pid);
	if (engine_task_realtime(e, c->tid, c->comm)) {
		jw_key(w, "realtime");
		jw_bool(w, true);
	}
	waker_activity(w, e, &c->act);
	if (c->cpu >= 0) {
		jw_key(w, "cpu");
		jw_u64(w, (uint64_t)c->cpu);
	}
	if (c->via_tid) {
		jw_key(w, "via");
		jw_obj(w);
		jw_key(w, "pid");
		jw_u64(w, c->via_pid);
		jw_key(w, "tid");
		jw_u64(w, c->via_tid);
		jw_key(w, "comm");
		comm_val(w, c->via_comm);
		process_keys(w, e, c->via_pid);
		jw_obj_end(w);
	}
	jw_obj_end(w);
}

void report_json_excess(struct jw *w, const struct engine *e, const struct eng_excess *ex, int n)
{
	jw_arr(w);
	for (int i = 0; i < n; i++) {
		jw_obj(w);
		jw_key(w, "cause");
		jw_str(w, eng_cause_name(ex[i].cause));
		jw_key(w, "ns");
		jw_u64(w, ex[i].ns);
		if (ex[i].has_who)
			report_json_culprit(w, e, &ex[i].who);
		if (ex[i].has_who && ex[i].processes > 1) {
			jw_key(w, "culprit_processes");
			jw_u64(w, ex[i].processes);
		}
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

static void excess_list(struct jw *w, const struct engine *e, const struct eng_step *s,
			const struct eng_summary *sum)
{
	struct eng_excess ex[ENG_NCAUSE];
	int n = sum ? engine_step_excess(e, s, sum, ex, ENG_NCAUSE) : 0;

	report_json_excess(w, e, ex, n);
}

/* one stack: its event and its frames, symbolised (schemas/report.md, "Stacks") */
static void stack_obj(struct jw *w, struct symbols *sym, const struct eng_stack *st)
{
	char hex[24];

	jw_key(w, "event");
	jw_str(w, sym_event_name(st->ev_type));
	jw_key(w, "tid");
	jw_u64(w, st->tid);
	jw_key(w, "start_ns");
	jw_u64(w, st->start_ns);
	jw_key(w, "end_ns");
	jw_u64(w, st->ts);
	jw_key(w, "truncated");
	jw_bool(w, st->truncated);
	jw_key(w, "frames");
	jw_arr(w);
	for (uint32_t i = 0; i < st->nframes; i++) {
		struct sym_frame f;

		symbols_frame(sym, st, i, &f);
		jw_obj(w);
		jw_key(w, "addr");
		snprintf(hex, sizeof(hex), "0x%" PRIx64, f.addr);
		jw_str(w, hex);
		jw_key(w, "module");
		if (f.module)
			jw_str(w, f.module);
		else
			jw_null(w);
		jw_key(w, "function");
		if (f.func)
			jw_str(w, f.func);
		else
			jw_null(w);
		jw_key(w, "offset");
		jw_u64(w, f.module ? f.off : 0);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

static void step_stacks(struct jw *w, const struct engine *e, const struct eng_step *s,
			struct symbols *sym)
{
	struct eng_stack st[SYM_STEP_STACKS];
	int n = sym_step_stacks(e, s, st, SYM_STEP_STACKS);

	struct sym_frame top = { 0 };
	int ns, ntop;
	char hex[24];

	jw_key(w, "stacks");
	jw_arr(w);
	for (int i = 0; i < n; i++) {
		jw_obj(w);
		stack_obj(w, sym, &st[i]);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	ns = sym_step_samples(e, sym, s, &top, &ntop);
	jw_key(w, "cpu_samples");
	jw_obj(w);
	jw_key(w, "count");
	jw_u64(w, (uint64_t)ns);
	jw_key(w, "top");
	if (!ns) {
		jw_null(w);
	} else {
		jw_obj(w);
		jw_key(w, "samples");
		jw_u64(w, (uint64_t)ntop);
		jw_key(w, "addr");
		snprintf(hex, sizeof(hex), "0x%" PRIx64, top.addr);
		jw_str(w, hex);
		jw_key(w, "module");
		if (top.module)
			jw_str(w, top.module);
		else
			jw_null(w);
		jw_key(w, "function");
		if (top.func)
			jw_str(w, top.func);
		else
			jw_null(w);
		jw_obj_end(w);
	}
	jw_obj_end(w);
}

static void hot_stacks(struct jw *w, const struct engine *e, struct symbols *sym)
{
	struct sym_hot h[SYM_HOT_STACKS];

	jw_key(w, "stacks");
	jw_obj(w);
	jw_key(w, "hot");
	jw_arr(w);
	for (int k = 0; k < SYM_NKINDS; k++)
	for (int i = 0, n = sym_hot_stacks(e, sym_kinds[k], h, SYM_HOT_STACKS); i < n; i++) {
		jw_obj(w);
		jw_key(w, "count");
		jw_u64(w, h[i].count);
		jw_key(w, "total_ns");
		jw_u64(w, h[i].total_ns);
		jw_key(w, "stack");
		jw_obj(w);
		stack_obj(w, sym, &h[i].s);
		jw_obj_end(w);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
}

/* one interrupt source: a step's irqs and the run's */
static void irq_obj(struct jw *w, const struct eng_irq *q)
{
	jw_obj(w);
	jw_key(w, "kind");
	jw_str(w, eng_irq_kind_name(q->kind));
	jw_key(w, "name");
	comm_val(w, q->name);
	if (q->kind == ENG_IRQ_HARD) {
		jw_key(w, "irq");
		jw_u64(w, q->irq);
	}
	jw_key(w, "cpu");
	jw_u64(w, q->cpu);
	jw_key(w, "ns");
	jw_u64(w, q->ns);
	jw_obj_end(w);
}

static void step_obj_sym(struct jw *w, const struct engine *e, const struct eng_step *s,
			 const struct eng_summary *sum, struct symbols *sym, bool identity);

/*
 * A step on a line of its own: it says whose it is (schemas/report.md,
 * "Identity"). Its stacks are named through *sym, opened at the first step
 * with stacks and kept by the caller: opening the mapped files again for
 * every line cost a watch agent most of its time.
 */
static void step_line_obj(struct jw *w, const struct engine *e, const struct eng_step *s,
			  const struct eng_summary *sum, struct symbols **sym)
{
	if (!*sym && sym_any(e))
		*sym = symbols_new(e);
	step_obj_sym(w, e, s, sum, *sym, true);
}

/* key: v, unless v is empty (a value the trace does not have) */
static void opt_str(struct jw *w, const char *key, const char *v)
{
	if (!v[0])
		return;
	jw_key(w, key);
	jw_str(w, v);
}

void report_json_identity(struct jw *w, const struct engine *e)
{
	struct eng_identity id;
	struct eng_capture c;
	struct eng_target t;

	engine_identity(e, &id);
	engine_capture(e, &c);
	engine_target(e, &t);
	jw_obj(w);
	jw_key(w, "host");
	jw_str(w, id.host);
	jw_key(w, "boot_id");
	jw_str(w, id.boot_id);
	if (id.have_realtime && (int64_t)c.start_ns + id.realtime_offset_ns > 0) {
		jw_key(w, "start_realtime_ns");
		jw_u64(w, (uint64_t)((int64_t)c.start_ns + id.realtime_offset_ns));
	}
	jw_key(w, "pid");
	jw_u64(w, t.pid);
	opt_str(w, "job", id.job);
	opt_str(w, "rank", id.rank);
	opt_str(w, "local_rank", id.local_rank);
	opt_str(w, "world_size", id.world_size);
	opt_str(w, "stepblame_version", id.version);
	if (id.agent_pid) {
		jw_key(w, "agent_pid");
		jw_u64(w, id.agent_pid);
	}
	jw_obj_end(w);
}

/* sym: NULL when the trace holds no stacks (then no "stacks" key) */
static void step_obj_sym(struct jw *w, const struct engine *e, const struct eng_step *s,
			 const struct eng_summary *sum, struct symbols *sym, bool identity)
{
	jw_obj(w);
	jw_key(w, "step");
	jw_u64(w, s->step);
	jw_key(w, "index");
	jw_u64(w, s->index);
	jw_key(w, "start_ns");
	jw_u64(w, s->start_ns);
	jw_key(w, "end_ns");
	jw_u64(w, s->end_ns);
	jw_key(w, "duration_ns");
	jw_u64(w, s->duration_ns);
	jw_key(w, "gpu_busy_ns");
	jw_u64(w, s->gpu_busy_ns);
	jw_key(w, "gpu_idle_ns");
	jw_u64(w, s->gpu_idle_ns);
	jw_key(w, "gpu_timeline");
	jw_bool(w, s->gpu_timeline);
	jw_key(w, "incomplete");
	jw_bool(w, s->incomplete);
	jw_key(w, "tail");
	jw_bool(w, s->tail);
	jw_key(w, "critical_thread");
	jw_obj(w);
	jw_key(w, "tid");
	jw_u64(w, s->crit_tid);
	jw_key(w, "comm");
	comm_val(w, s->crit_comm);
	jw_obj_end(w);
	jw_key(w, "blame");
	jw_arr(w);
	for (uint32_t i = 0; i < s->nblame; i++) {
		jw_obj(w);
		jw_key(w, "cause");
		jw_str(w, eng_cause_name(s->blame[i].cause));
		jw_key(w, "ns");
		jw_u64(w, s->blame[i].ns);
		if (s->blame[i].has_who)
			report_json_culprit(w, e, &s->blame[i].who);
		if (s->blame[i].has_who && s->blame[i].processes > 1) {
			jw_key(w, "culprit_processes");
			jw_u64(w, s->blame[i].processes);
		}
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_key(w, "excess");
	if (s->tail)
		excess_list(w, e, s, sum);
	else {
		jw_arr(w);
		jw_arr_end(w);
	}
	jw_key(w, "tracer_ns");
	jw_u64(w, s->tracer_ns);
	jw_key(w, "tracer_events");
	jw_u64(w, s->tracer_events);
	jw_key(w, "alloc_sampled");
	jw_bool(w, s->alloc_sampled);
	jw_key(w, "alloc_observed");
	jw_bool(w, s->alloc_observed);
	if (s->nio) {
		/* the files behind io_wait (iosys records that name them) */
		jw_key(w, "io");
		jw_arr(w);
		for (uint32_t i = 0; i < s->nio; i++) {
			const struct eng_io *x = &s->io[i];

			jw_obj(w);
			jw_key(w, "call");
			jw_str(w, sb_io_name(x->call));
			jw_key(w, "file_kind");
			jw_str(w, sb_file_kind_name(x->kind));
			jw_key(w, "path");
			jw_str(w, x->path);
			jw_key(w, "ns");
			jw_u64(w, x->ns);
			jw_key(w, "calls");
			jw_u64(w, x->calls);
			jw_key(w, "bytes");
			jw_u64(w, x->bytes);
			jw_key(w, "written_bytes");
			jw_u64(w, x->written);
			jw_obj_end(w);
		}
		jw_arr_end(w);
	}
	if (s->nmaps) {
		/* the regions the faults were in: mmap()ed during the capture, or read from maps */
		jw_key(w, "maps");
		jw_arr(w);
		for (uint32_t i = 0; i < s->nmaps; i++) {
			const struct eng_map *m = &s->maps[i];

			jw_obj(w);
			jw_key(w, "addr");
			jw_u64(w, m->addr);
			jw_key(w, "len");
			jw_u64(w, m->len);
			jw_key(w, "anon");
			jw_bool(w, m->anon);
			if (!m->anon) {
				jw_key(w, "file_kind");
				jw_str(w, sb_file_kind_name(m->kind));
				jw_key(w, "path");
				jw_str(w, m->path);
			}
			if (m->step_known) {
				jw_key(w, "mapped_in_step");
				jw_u64(w, m->step_number);
			}
			if (m->region) {
				/* read from /proc/PID/maps, not mmap()ed during the capture */
				jw_key(w, "region");
				jw_str(w, eng_region_name(m->region));
				if (m->anon && m->path[0]) {
					jw_key(w, "name");
					jw_str(w, m->path);
				}
				jw_key(w, "before_capture");
				jw_bool(w, m->before_capture);
				jw_key(w, "pid");
				jw_u64(w, m->pid);
			}
			jw_key(w, "faults");
			jw_u64(w, m->faults);
			jw_key(w, "ns");
			jw_u64(w, m->ns);
			jw_obj_end(w);
		}
		jw_arr_end(w);
	}
	if (s->nirqs) {
		/* the interrupts on the critical thread's time, for its irq time */
		jw_key(w, "irqs");
		jw_arr(w);
		for (uint32_t i = 0; i < s->nirqs; i++)
			irq_obj(w, &s->irqs[i]);
		jw_arr_end(w);
	}
	if (s->nmoves) {
		/* who moved the critical thread, for its migration time */
		jw_key(w, "moves");
		jw_arr(w);
		for (uint32_t i = 0; i < s->nmoves; i++) {
			const struct eng_move *m = &s->moves[i];

			jw_obj(w);
			jw_key(w, "by");
			jw_str(w, eng_move_how_name(m->how));
			if (m->by_tid) {
				jw_key(w, "tid");
				jw_u64(w, m->by_tid);
				jw_key(w, "comm");
				comm_val(w, m->by_comm);
			}
			if (m->from_cpu >= 0) {
				jw_key(w, "from_cpu");
				jw_u64(w, (uint64_t)m->from_cpu);
			}
			if (m->to_cpu >= 0) {
				jw_key(w, "to_cpu");
				jw_u64(w, (uint64_t)m->to_cpu);
			}
			jw_key(w, "ns");
			jw_u64(w, m->ns);
			jw_obj_end(w);
		}
		jw_arr_end(w);
	}
	jw_key(w, "counts");
	jw_obj(w);
	for (int c = 0; c < ENG_NCOUNT; c++) {
		jw_key(w, eng_count_name(c));
		jw_u64(w, s->count[c]);
	}
	jw_obj_end(w);
	jw_key(w, "hot_path");
	report_audit_step_json(w, s);
	if (sym)
		step_stacks(w, e, s, sym);
	if (identity) {
		/* a line read alone: what the capture had lost by then (summary.loss.total) */
		struct eng_loss l;

		engine_loss(e, &l);
		jw_key(w, "loss_total");
		jw_u64(w, l.total);
		jw_key(w, "identity");
		report_json_identity(w, e);
	}
	jw_obj_end(w);
}

int report_step_json(const struct engine *e, const struct eng_step *s, const struct eng_summary *sum,
		     struct symbols **sym, FILE *f)
{
	struct jw w;

	jw_init(&w, f, false);
	step_line_obj(&w, e, s, sum, sym);
	fputc('\n', f);
	return ferror(f) ? -EIO : 0;
}

int report_jsonl(const struct engine *e, FILE *f)
{
	struct eng_summary sum;
	struct symbols *sym = NULL;

	engine_summarise(e, &sum);
	for (uint64_t i = engine_first_step(e); i < engine_nsteps(e); i++)
		report_step_json(e, engine_step(e, i), &sum, &sym, f);
	symbols_free(sym);
	return ferror(f) ? -EIO : 0;
}

static const char *dip_kind(int d)
{
	switch (d) {
	case ENG_DIP_PERIODIC: return "periodic";
	case ENG_DIP_SPORADIC: return "sporadic";
	case ENG_DIP_LOW: return "uniformly_low";
	case ENG_DIP_NONE: return "none";
	}
	return "unknown";
}

static int tail_cmp(const void *a, const void *b)
{
	const struct eng_step *x = *(const struct eng_step *const *)a;
	const struct eng_step *y = *(const struct eng_step *const *)b;

	if (x->duration_ns != y->duration_ns)
		return x->duration_ns > y->duration_ns ? -1 : 1;
	return x->index < y->index ? -1 : 1;
}

/* the tracer's own cost and the overhead guard (summary.tracer) */
static void tracer(struct jw *w, const struct engine *e, const struct eng_summary *s)
{
	struct sb_costs c;
	struct eng_guard g;
	bool given = engine_costs(e, &c);

	engine_guard(e, &g);
	jw_key(w, "tracer");
	jw_obj(w);
	jw_key(w, "median_ns");
	jw_u64(w, s->tracer_median_ns);
	jw_key(w, "p50_share");
	jw_fixed(w, (double)s->tracer_p50_ppm / 1e6, 6);
	jw_key(w, "p99_share");
	jw_fixed(w, (double)s->tracer_p99_ppm / 1e6, 6);
	jw_key(w, "max_share");
	jw_fixed(w, (double)s->tracer_max_ppm / 1e6, 6);
	jw_key(w, "total_ns");
	jw_u64(w, s->tracer_total_ns);
	jw_key(w, "cost_per_event_ns");
	jw_obj(w);
	for (int i = 0; i < SB_NCOST; i++) {
		/* fault_ext, sched_fold: only where the trace prices them (schemas/report.md) */
		if ((i == SB_COST_FAULT_EXT || i == SB_COST_SCHED_FOLD) && !c.ns[i])
			continue;
		jw_key(w, sb_cost_name[i]);
		jw_u64(w, c.ns[i]);
	}
	jw_obj_end(w);
	jw_key(w, "cost_source");
	jw_str(w, given ? "trace" : "default");
	jw_key(w, "calibrated");
	jw_arr(w);
	for (int i = 0; i < SB_NCOST; i++)
		if (c.calibrated & (1u << i))
			jw_str(w, sb_cost_name[i]);
	jw_arr_end(w);
	jw_key(w, "guard");
	if (!g.known) {
		jw_null(w);
	} else {
		jw_obj(w);
		jw_key(w, "mode");
		jw_str(w, sb_guard_mode_name(g.mode));
		jw_key(w, "limit");
		jw_fixed(w, (double)g.limit_ppm / 1e6, 6);
		jw_key(w, "max_estimate");
		jw_fixed(w, (double)g.max_estimate_ppm / 1e6, 6);
		jw_key(w, "duty");
		jw_fixed(w, (double)g.duty_ppm / 1e6, 6);
		jw_key(w, "mode_changes");
		jw_u64(w, g.changes);
		jw_key(w, "first_sampled_ns");
		if (g.first_sampled_ns)
			jw_u64(w, g.first_sampled_ns);
		else
			jw_null(w);
		jw_key(w, "sampled_steps");
		jw_u64(w, s->sampled_steps);
		jw_key(w, "alloc_calls_seen");
		jw_u64(w, g.calls_seen);
		jw_key(w, "alloc_calls_estimated");
		jw_u64(w, g.calls_estimated);
		jw_obj_end(w);
	}
	jw_obj_end(w);
}

/* an interferer's keys present only when true: the recorder itself, a real-time task */
static void task_flags(struct jw *w, bool tracer, bool realtime)
{
	if (tracer) {
		jw_key(w, "tracer");
		jw_bool(w, true);
	}
	if (realtime) {
		jw_key(w, "realtime");
		jw_bool(w, true);
	}
}

/* the run's interrupt sources (schemas/report.md, "Which interrupt") */
static void irq_totals(struct jw *w, const struct engine *e)
{
	struct eng_irq q[ENG_IRQ_TOTALS_MAX];
	int n = engine_irq_totals(e, q, ENG_IRQ_TOTALS_MAX);

	jw_key(w, "irqs");
	jw_arr(w);
	for (int i = 0; i < n; i++)
		irq_obj(w, &q[i]);
	jw_arr_end(w);
}

/* the interferers by process, and by name where processes are not told apart (schemas/report.md) */
static void interferer_groups(struct jw *w, const struct engine *e)
{
	struct eng_interferer_group *g = calloc(256, sizeof(*g));
	int n = g ? engine_interferer_groups(e, g, 256) : 0;

	jw_key(w, "interferer_groups");
	jw_arr(w);
	for (int i = 0; i < n; i++) {
		jw_obj(w);
		jw_key(w, "comm");
		comm_val(w, g[i].comm);
		jw_key(w, "processes");
		jw_u64(w, g[i].processes);
		if (g[i].processes == 1) {
			jw_key(w, "pid");
			jw_u64(w, g[i].pid);
		}
		jw_key(w, "ns");
		jw_u64(w, g[i].ns);
		jw_key(w, "own");
		jw_bool(w, g[i].own);
		if (g[i].nnames) {
			jw_key(w, "also_named");
			jw_arr(w);
			for (uint32_t k = 0; k < g[i].nnames && k < ENG_GROUP_NAMES; k++)
				comm_val(w, g[i].names[k]);
			jw_arr_end(w);
			jw_key(w, "names");
			jw_u64(w, g[i].nnames + 1);
		}
		task_flags(w, g[i].tracer, g[i].realtime);
		jw_obj_end(w);
	}
	free(g);
	jw_arr_end(w);
}

static void summary(struct jw *w, const struct engine *e, const struct eng_summary *s)
{
	struct eng_capture c;
	struct eng_fault_model fm;
	struct eng_interferer *itf;
	int ni;

	engine_capture(e, &c);
	engine_fault_model(e, &fm);
	jw_key(w, "summary");
	jw_obj(w);
	jw_key(w, "steps");
	jw_u64(w, s->nsteps);
	jw_key(w, "complete_steps");
	jw_u64(w, s->ncomplete);
	jw_key(w, "step_source");
	jw_str(w, eng_step_src_name(c.step_source));
	jw_key(w, "p50_ns");
	jw_u64(w, s->p50);
	jw_key(w, "p90_ns");
	jw_u64(w, s->p90);
	jw_key(w, "p99_ns");
	jw_u64(w, s->p99);
	jw_key(w, "p999_ns");
	jw_u64(w, s->p999);
	jw_key(w, "max_ns");
	jw_u64(w, s->max);
	jw_key(w, "min_ns");
	jw_u64(w, s->min);
	jw_key(w, "mad_ns");
	jw_u64(w, s->mad);
	jw_key(w, "p99_over_p50");
	jw_fixed(w, s->p99_over_p50, 4);
	jw_key(w, "jitter");
	jw_bool(w, s->p99_over_p50 >= 1.5);
	jw_key(w, "tail_threshold_ns");
	jw_u64(w, s->tail_threshold_ns);
	if (s->windowed) {
		/* only steps first_index.. are in `steps`; the figures here are over all */
		jw_key(w, "window");
		jw_obj(w);
		jw_key(w, "steps_kept");
		jw_u64(w, s->nsteps - s->first_kept);
		jw_key(w, "first_index");
		jw_u64(w, s->first_kept);
		jw_key(w, "percentile_error");
		jw_fixed(w, s->pct_error, 4);
		jw_obj_end(w);
	}

	jw_key(w, "tail_steps");
	jw_arr(w);
	if (s->ntail) {
		const struct eng_step **tl = calloc(s->ntail, sizeof(*tl));
		uint64_t k = 0;

		for (uint64_t i = engine_first_step(e); tl && i < engine_nsteps(e); i++)
			if (engine_step(e, i)->tail && k < s->ntail)
				tl[k++] = engine_step(e, i);
		if (tl)
			qsort(tl, k, sizeof(*tl), tail_cmp);
		for (uint64_t i = 0; i < k; i++) {
			jw_obj(w);
			jw_key(w, "step");
			jw_u64(w, tl[i]->step);
			jw_key(w, "index");
			jw_u64(w, tl[i]->index);
			jw_key(w, "duration_ns");
			jw_u64(w, tl[i]->duration_ns);
			jw_key(w, "over_median_ns");
			jw_u64(w, tl[i]->duration_ns - s->p50);
			jw_key(w, "excess");
			excess_list(w, e, tl[i], s);
			jw_obj_end(w);
		}
		free(tl);
	}
	jw_arr_end(w);

	jw_key(w, "gpu_busy_share");
	if (s->gpu_busy_share >= 0)
		jw_fixed(w, s->gpu_busy_share, 4);
	else
		jw_null(w);
	jw_key(w, "by_cause");
	jw_obj(w);
	for (int i = 0; i < ENG_NCAUSE; i++) {
		jw_key(w, eng_cause_name(i));
		jw_u64(w, s->cause_total[i]);
	}
	jw_obj_end(w);
	jw_key(w, "median_by_cause");
	jw_obj(w);
	for (int i = 0; i < ENG_NCAUSE; i++) {
		jw_key(w, eng_cause_name(i));
		jw_u64(w, s->cause_median[i]);
	}
	jw_obj_end(w);

	jw_key(w, "interferers");
	jw_arr(w);
	itf = calloc(256, sizeof(*itf));
	ni = itf ? engine_interferers(e, itf, 256) : 0;
	for (int i = 0; i < ni; i++) {
		jw_obj(w);
		jw_key(w, "pid");
		jw_u64(w, itf[i].pid);
		jw_key(w, "comm");
		comm_val(w, itf[i].comm);
		jw_key(w, "ns");
		jw_u64(w, itf[i].ns);
		jw_key(w, "own");
		jw_bool(w, itf[i].own);
		process_keys(w, e, itf[i].pid);
		task_flags(w, itf[i].tracer, itf[i].realtime);
		jw_obj_end(w);
	}
	free(itf);
	jw_arr_end(w);
	interferer_groups(w, e);
	irq_totals(w, e);

	jw_key(w, "dip_pattern");
	jw_obj(w);
	jw_key(w, "kind");
	jw_str(w, dip_kind(s->dip));
	jw_key(w, "period_steps");
	if (s->dip == ENG_DIP_PERIODIC)
		jw_u64(w, s->dip_period);
	else
		jw_null(w);
	jw_key(w, "dip_steps");
	jw_u64(w, s->ndips);
	jw_key(w, "median_gpu_busy_share");
	if (s->dip_busy_median >= 0)
		jw_fixed(w, s->dip_busy_median, 4);
	else
		jw_null(w);
	jw_obj_end(w);

	jw_key(w, "page_fault_time");
	jw_obj(w);
	jw_key(w, "method");
	jw_str(w, "estimated");
	jw_key(w, "per_fault_ns");
	jw_u64(w, fm.per_fault_ns);
	jw_key(w, "calibration");
	jw_str(w, fm.method == ENG_FAULT_CALIBRATED ? "trace" :
		  fm.method == ENG_FAULT_GIVEN ? "given" : "default");
	jw_key(w, "calibration_samples");
	jw_u64(w, fm.samples);
	jw_key(w, "blocked_faults");
	jw_u64(w, fm.blocked);
	jw_obj_end(w);
	tracer(w, e, s);
	jw_obj_end(w);
}

/* what the engine's bounds left out: only when something was */
static void limits(struct jw *w, const struct engine *e)
{
	struct eng_limits l;

	engine_limits(e, &l);
	if (!eng_limits_any(&l))
		return;
	jw_key(w, "limits");
	jw_obj(w);
	jw_key(w, "threads_forgotten");
	jw_u64(w, l.threads_forgotten);
	jw_key(w, "thread_records_lost");
	jw_u64(w, l.thread_records_lost);
	jw_key(w, "strings_dropped");
	jw_u64(w, l.strings_dropped);
	jw_key(w, "kernel_shapes_dropped");
	jw_u64(w, l.kernel_shapes_dropped);
	jw_key(w, "interferers_folded");
	jw_u64(w, l.interferers_folded);
	jw_key(w, "interferers_other_ns");
	jw_u64(w, l.interferers_other_ns);
	jw_key(w, "probes_dropped");
	jw_u64(w, l.probes_dropped);
	jw_key(w, "window_flushes");
	jw_u64(w, l.window_flushes);
	jw_obj_end(w);
}

static void loss(struct jw *w, const struct engine *e)
{
	struct eng_loss l;
	struct eng_capture c;

	engine_loss(e, &l);
	engine_capture(e, &c);
	jw_key(w, "loss");
	jw_obj(w);
	jw_key(w, "total");
	jw_u64(w, l.total);
	jw_key(w, "ring");
	jw_obj(w);
	for (int i = 1; i <= SB_EV_KERNEL_MAX; i++) {
		char name[32];

		if (i > SB_EV_KERNEL_LAST && !l.ring[i])
			continue;
		if (i <= SB_EV_KERNEL_LAST)
			snprintf(name, sizeof(name), "%s", sb_type_name(i));
		else
			snprintf(name, sizeof(name), "type_%d", i);
		jw_key(w, name);
		jw_u64(w, l.ring[i]);
	}
	jw_obj_end(w);
	jw_key(w, "gpu_channel");
	jw_u64(w, l.gpu_channel);
	jw_key(w, "gpu_source");
	jw_u64(w, l.gpu_source);
	jw_key(w, "wait_overflow");
	jw_u64(w, l.wait_overflow);
	jw_key(w, "late_records");
	jw_u64(w, l.late);
	jw_key(w, "malformed_records");
	jw_u64(w, l.malformed);
	jw_key(w, "switches_inferred");
	jw_u64(w, l.inferred);
	if (l.gpu_rejected) {
		jw_key(w, "gpu_records_rejected");
		jw_u64(w, l.gpu_rejected);
	}
	jw_key(w, "probes_missing");
	jw_arr(w);
	for (uint32_t i = 0; i < l.nprobes_missing; i++)
		jw_str(w, l.probes_missing[i]);
	jw_arr_end(w);
	jw_key(w, "cut_short");
	jw_bool(w, !c.complete);
	jw_key(w, "cut_short_reason");
	if (c.truncated)
		jw_str(w, c.truncated);
	else if (!c.complete)
		jw_str(w, "no trailer");
	else
		jw_null(w);
	jw_obj_end(w);
}

int report_json(const struct engine *e, FILE *f)
{
	struct eng_summary s;
	struct eng_target t;
	struct eng_capture c;
	struct jw w;
	struct symbols *sym;

	engine_summarise(e, &s);
	engine_target(e, &t);
	engine_capture(e, &c);
	jw_init(&w, f, true);
	jw_obj(&w);
	jw_key(&w, "schema");
	jw_obj(&w);
	jw_key(&w, "name");
	jw_str(&w, REPORT_SCHEMA_NAME);
	jw_key(&w, "version");
	jw_u64(&w, REPORT_SCHEMA_VERSION);
	jw_obj_end(&w);
	jw_key(&w, "target");
	jw_obj(&w);
	jw_key(&w, "pid");
	jw_u64(&w, t.pid);
	jw_key(&w, "comm");
	comm_val(&w, t.comm);
	if (t.comm_end[0]) {
		jw_key(&w, "comm_end");
		comm_val(&w, t.comm_end);
	}
	jw_key(&w, "cmdline");
	jw_str(&w, t.cmdline);
	jw_obj_end(&w);
	jw_key(&w, "identity");
	report_json_identity(&w, e);
	jw_key(&w, "capture");
	jw_obj(&w);
	jw_key(&w, "start_ns");
	jw_u64(&w, c.start_ns);
	jw_key(&w, "end_ns");
	jw_u64(&w, c.end_ns);
	jw_key(&w, "complete");
	jw_bool(&w, c.complete);
	jw_key(&w, "end_reason");
	jw_str(&w, c.end_reason);
	jw_key(&w, "gpu_timeline");
	jw_bool(&w, c.gpu_timeline);
	jw_key(&w, "records");
	jw_u64(&w, c.records);
	if (c.gpu_reached_ns) {
		jw_key(&w, "gpu_reached_ns");
		jw_u64(&w, c.gpu_reached_ns);
		jw_key(&w, "gpu_cut_steps");
		jw_u64(&w, c.gpu_cut_steps);
	}
	if (c.gpu_before_steps) {
		jw_key(&w, "gpu_from_ns");
		jw_u64(&w, c.gpu_from_ns);
		jw_key(&w, "gpu_before_steps");
		jw_u64(&w, c.gpu_before_steps);
	}
	if (c.mark_pid) {
		jw_key(&w, "mark_pid");
		jw_u64(&w, c.mark_pid);
	}
	if (c.mark_restarts) {
		jw_key(&w, "mark_restarts");
		jw_u64(&w, c.mark_restarts);
	}
	if (c.marks_ignored) {
		jw_key(&w, "marks_ignored");
		jw_obj(&w);
		jw_key(&w, "marks");
		jw_u64(&w, c.marks_ignored);
		jw_key(&w, "pids");
		jw_arr(&w);
		for (uint32_t i = 0; i < c.nmarks_other; i++)
			jw_u64(&w, c.marks_other[i]);
		jw_arr_end(&w);
		jw_key(&w, "more_pids");
		jw_bool(&w, c.marks_other_more);
		jw_obj_end(&w);
	}
	jw_obj_end(&w);
	jw_key(&w, "steps");
	jw_arr(&w);
	sym = sym_any(e) ? symbols_new(e) : NULL;
	for (uint64_t i = engine_first_step(e); i < engine_nsteps(e); i++)
		step_obj_sym(&w, e, engine_step(e, i), &s, sym, false);
	jw_arr_end(&w);
	summary(&w, e, &s);
	{
		struct audit a;

		if (report_audit(e, &s, &a) == 0) {
			jw_key(&w, "hot_path");
			report_audit_json(&w, &a);
		}
	}
	loss(&w, e);
	limits(&w, e);
	if (sym)
		hot_stacks(&w, e, sym);
	symbols_free(sym);
	jw_obj_end(&w);
	return ferror(f) ? -EIO : 0;
}
