// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The Perfetto output: a Chrome JSON trace (ui.perfetto.dev) written as the
 * engine sweeps, through its timeline hooks (engine_opts.timeline), and closed
 * by report_perfetto() with the names of the processes and threads. Tracks:
 * the steps and their GPU idle blame, counters of each step's GPU busy share
 * and tracer cost, each GPU stream (under its device), the target's candidate
 * threads (state or cause) with a flow from each launch to its GPU operation,
 * the tasks that took their CPUs (under their own process, and on a track per
 * CPU). schemas/report.md, "Perfetto", says what a consumer may rely on.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "report/report.h"
#include "base/json.h"
#include "format/gpu.h"
#include "format/trace.h"
#include "report/symbols.h"

#define PF_STEPS_PID 1073741824u   /* beyond any Linux pid */
#define PF_CPU_PID (PF_STEPS_PID + 1)
#define PF_GPU_PID (PF_STEPS_PID + 16) /* + the device */
#define GONE_MAX (1u << 20)        /* names of forgotten threads kept */
#define STREAMS_MAX 4096           /* GPU streams named */
#define NAMED_MAX (1u << 16)       /* interferer threads named */
#define CPUS_MAX 8192              /* CPU tracks */

/* a thread (or GPU stream) to name in the metadata */
struct named_thread {
	uint32_t pid, tid;
	char comm[SB_COMM_LEN + 1];
};

struct named_list {
	struct named_thread *v;
	uint32_t n, cap;
	uint32_t *slot;          /* open addressing over (pid, tid): index + 1, 0 empty */
	uint32_t nslot;
};

struct perfetto_stream {
	FILE *f;
	bool started;            /* the document is open: events follow with a comma */
	/* threads the engine forgot to make room: their names, for the metadata */
	struct named_list gone;
	struct named_list streams;     /* (GPU_PID + device, stream) seen */
	struct named_list interferers; /* interferer threads seen */
	uint64_t *cpu_end;       /* each CPU track's last slice end (slices never overlap) */
	uint64_t flows;          /* flow ids given */
};

/* the slot of pid:tid in l's index: its entry's, or the empty one where it would go */
static uint32_t *named_slot(const struct named_list *l, uint32_t pid, uint32_t tid)
{
	uint32_t h = (uint32_t)((((uint64_t)pid << 32) | tid) * 0x9E3779B97F4A7C15ull >> 32);

	for (uint32_t i = h & (l->nslot - 1);; i = (i + 1) & (l->nslot - 1)) {
		const struct named_thread *x = l->slot[i] ? &l->v[l->slot[i] - 1] : NULL;

		if (!x || (x->pid == pid && x->tid == tid))
			return &l->slot[i];
	}
}

/*
 * pid:tid named comm in the list, up to max of them; unique: only the first
 * time (an index is kept). False where it is not (full, or out of memory).
 */
static bool named_add(struct named_list *l, uint32_t pid, uint32_t tid, const char *comm,
		      uint32_t max, bool unique)
{
	if (unique && l->nslot && *named_slot(l, pid, tid))
		return true;
	if (l->n >= max)
		return false;
	if (l->n == l->cap) {
		uint32_t nc = l->cap ? 2 * l->cap : 64;
		struct named_thread *q = realloc(l->v, nc * sizeof(*q));

		if (!q)
			return false;
		l->v = q;
		l->cap = nc;
	}
	if (unique && 2 * (l->n + 1) > l->nslot) {
		uint32_t ns = l->nslot ? 2 * l->nslot : 128;
		uint32_t *q = calloc(ns, sizeof(*q));

		if (!q)
			return false;
		free(l->slot);
		l->slot = q;
		l->nslot = ns;
		for (uint32_t k = 0; k < l->n; k++)
			*named_slot(l, l->v[k].pid, l->v[k].tid) = k + 1;
	}
	if (unique)
		*named_slot(l, pid, tid) = l->n + 1;
	l->v[l->n].pid = pid;
	l->v[l->n].tid = tid;
	snprintf(l->v[l->n].comm, sizeof(l->v[l->n].comm), "%s", comm);
	l->n++;
	return true;
}

static void named_free(struct named_list *l)
{
	free(l->v);
	free(l->slot);
}

static void pf_us(FILE *f, uint64_t ns)
{
	fprintf(f, "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
}

static FILE *pf_begin(struct perfetto_stream *p)
{
	FILE *f = p->f;

	if (!p->started) {
		fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
		p->started = true;
	} else {
		fputs(",\n", f);
	}
	return f;
}

/* a complete slice; args_json is "" or ",\"args\":{...}" */
static void pf_slice(struct perfetto_stream *p, uint32_t pid, uint32_t tid, const char *name,
		     const char *cat, uint64_t s, uint64_t end, const char *args_json)
{
	FILE *f;

	if (end < s)
		return;
	f = pf_begin(p);
	fprintf(f, "{\"ph\":\"X\",\"pid\":%" PRIu32 ",\"tid\":%" PRIu32 ",\"name\":\"", pid, tid);
	json_escape(f, name, strlen(name));
	fprintf(f, "\",\"cat\":\"%s\",\"ts\":", cat);
	pf_us(f, s);
	fputs(",\"dur\":", f);
	pf_us(f, end - s);
	fprintf(f, "%s}", args_json ? args_json : "");
}

/* a counter's value (percent) from ns on, on the stepblame process */
static void pf_counter(struct perfetto_stream *p, const char *name, uint64_t ns, double pct)
{
	FILE *f = pf_begin(p);

	fprintf(f, "{\"ph\":\"C\",\"pid\":%u,\"name\":\"%s\",\"cat\":\"counter\",\"ts\":",
		PF_STEPS_PID, name);
	pf_us(f, ns);
	fprintf(f, ",\"args\":{\"percent\":%.2f}}", pct);
}

/* a flow event (cat gpu): ph "s" (start) or "f" (finish, bound to the enclosing slice) */
static void pf_flow(struct perfetto_stream *p, char ph, uint64_t id, uint32_t pid, uint32_t tid,
		    uint64_t ns)
{
	FILE *f = pf_begin(p);

	fprintf(f, "{\"ph\":\"%c\",%s\"id\":%" PRIu64 ",\"pid\":%" PRIu32 ",\"tid\":%" PRIu32
		",\"name\":\"launch\",\"cat\":\"gpu\",\"ts\":", ph, ph == 'f' ? "\"bp\":\"e\"," : "",
		id, pid, tid);
	pf_us(f, ns);
	fputc('}', f);
}

static void on_thread_state(void *ctx, uint32_t pid, uint32_t tid, const char *state,
			    uint64_t s, uint64_t end)
{
	pf_slice(ctx, pid, tid, state, "thread", s, end, NULL);
}

static void on_interferer(void *ctx, const struct eng_who *w, uint32_t victim_tid, uint64_t s,
			  uint64_t end)
{
	struct perfetto_stream *p = ctx;
	char args[160];

	snprintf(args, sizeof(args), ",\"args\":{\"victim_tid\":%" PRIu32 ",\"cpu\":%d}",
		 victim_tid, (int)w->cpu);
	pf_slice(p, w->pid, w->tid, w->comm, "interferer", s, end, args);
	named_add(&p->interferers, w->pid, w->tid, w->comm, NAMED_MAX, true);
	if (w->cpu < 0 || w->cpu >= CPUS_MAX)
		return;
	/* the CPU's track: who held it; two victims waiting on one CPU see one holder once */
	if (!p->cpu_end && !(p->cpu_end = calloc(CPUS_MAX, sizeof(*p->cpu_end))))
		return;
	if (s < p->cpu_end[w->cpu])
		s = p->cpu_end[w->cpu];
	if (end <= s)
		return;
	p->cpu_end[w->cpu] = end;
	snprintf(args, sizeof(args), ",\"args\":{\"pid\":%" PRIu32 ",\"tid\":%" PRIu32
		 ",\"victim_tid\":%" PRIu32 "}", w->pid, w->tid, victim_tid);
	pf_slice(p, PF_CPU_PID, (uint32_t)w->cpu + 1, w->comm, "cpu", s, end, args);
}

static void on_gap(void *ctx, const struct eng_gap *g)
{
	char args[512];
	int n = snprintf(args, sizeof(args), ",\"args\":{\"step\":%" PRIu64
			 ",\"critical_tid\":%" PRIu32, g->step, g->critical_tid);
	int top = ENG_UNKNOWN;
	uint64_t topns = 0;

	for (int c = 0; c < ENG_NCAUSE; c++) {
		uint64_t v = g->cause_ns[c];

		if (!v)
			continue;
		if (v > topns) {
			topns = v;
			top = c;
		}
		if (n > 0 && (size_t)n < sizeof(args))
			n += snprintf(args + n, sizeof(args) - n, ",\"%s_ns\":%" PRIu64,
				      eng_cause_name(c), v);
	}
	if (n > 0 && (size_t)n < sizeof(args) - 2)
		snprintf(args + n, sizeof(args) - n, "}");
	else
		snprintf(args, sizeof(args), ",\"args\":{}");
	pf_slice(ctx, PF_STEPS_PID, 2, eng_cause_name(top), "blame", g->start_ns, g->end_ns, args);
}

static void on_step(void *ctx, const struct eng_step *r)
{
	char args[384 + 2 * ENG_IO_PATH_MAX], name[48];
	int n = snprintf(args, sizeof(args),
			 ",\"args\":{\"step\":%" PRIu64 ",\"duration_ns\":%" PRIu64
			 ",\"gpu_idle_ns\":%" PRIu64 ",\"tracer_ns\":%" PRIu64
			 ",\"tail\":%s,\"incomplete\":%s}",
			 r->step, r->duration_ns, r->gpu_idle_ns, r->tracer_ns, r->tail ? "true" : "false",
			 r->incomplete ? "true" : "false");

	if (r->nio && n > 0 && (size_t)n < sizeof(args)) {
		/* the file behind most of its io_wait (schemas/report.md, "Perfetto") */
		const struct eng_io *x = &r->io[0];
		size_t o = (size_t)n - 1; /* over the closing brace */

		o += (size_t)snprintf(args + o, sizeof(args) - o, ",\"io_call\":\"%s\",\"io_path\":\"",
				      sb_io_name(x->call));
		const char *c = x->path[0] ? x->path : sb_file_kind_name(x->kind), *end = c + strlen(c);

		/* room kept for the fields after it */
		while (c < end && o + JSON_ESC_MAX + 80 < sizeof(args)) {
			size_t used;

			o += json_escape_one(args + o, c, (size_t)(end - c), &used);
			c += used;
		}
		snprintf(args + o, sizeof(args) - o, "\",\"io_ns\":%" PRIu64 ",\"io_written_bytes\":%" PRIu64 "}",
			 x->ns, x->written);
	}
	n = (int)strlen(args);
	if (r->nmoves && n > 0 && args[n - 1] == '}' && (size_t)n + 96 < sizeof(args))
		/* who moved the critical thread (schemas/report.md, "Perfetto") */
		snprintf(args + n - 1, sizeof(args) - (size_t)n + 1,
			 ",\"moved_by\":\"%s\",\"moved_by_tid\":%" PRIu32 ",\"move_ns\":%" PRIu64 "}",
			 eng_move_how_name(r->moves[0].how), r->moves[0].by_tid, r->moves[0].ns);
	n = (int)strlen(args);
	if (r->nmaps && n > 0 && args[n - 1] == '}' && (size_t)n + 128 < sizeof(args))
		/* the mapping most of its page_fault time was in */
		snprintf(args + n - 1, sizeof(args) - (size_t)n + 1,
			 ",\"fault_map_len\":%" PRIu64 ",\"fault_map_anon\":%s,\"fault_map_faults\":%"
			 PRIu32 ",\"fault_map_ns\":%" PRIu64 "}",
			 r->maps[0].len, r->maps[0].anon ? "true" : "false", r->maps[0].faults,
			 r->maps[0].ns);
	snprintf(name, sizeof(name), "step %" PRIu64 "%s", r->step, r->tail ? " (tail)" : "");
	pf_slice(ctx, PF_STEPS_PID, 1, name, "step", r->start_ns, r->end_ns, args);
	if (r->duration_ns) {
		/* counters, from the step's start: its GPU busy share and the tracer's */
		double d = (double)r->duration_ns;
		uint64_t idle = r->gpu_idle_ns < r->duration_ns ? r->gpu_idle_ns : r->duration_ns;
		uint64_t tr = r->tracer_ns < r->duration_ns ? r->tracer_ns : r->duration_ns;

		pf_counter(ctx, "GPU busy", r->start_ns, 100.0 * (double)(r->duration_ns - idle) / d);
		pf_counter(ctx, "tracer cost", r->start_ns, 100.0 * (double)tr / d);
	}
}

static void on_gpu_op(void *ctx, const struct eng_gpu_op *op)
{
	struct perfetto_stream *p = ctx;
	char name[80], args[96];
	const char *nm = op->name;

	if (!nm) {
		snprintf(name, sizeof(name), "%s",
			 op->kind == SB_GPU_KERNEL ? "kernel" :
			 op->kind == SB_GPU_MEMCPY ? "memcpy" : "memset");
		nm = name;
	}
	snprintf(args, sizeof(args), ",\"args\":{\"correlation_id\":%" PRIu32
		 ",\"launcher_tid\":%" PRIu32 "}", op->correlation_id, op->launcher_tid);
	pf_slice(p, PF_GPU_PID + op->device, op->stream, nm, "gpu", op->start_ns, op->end_ns,
		 args);
	named_add(&p->streams, op->device, op->stream, "", STREAMS_MAX, true);
	if (op->launcher_tid && op->launch_ns && op->launch_ns <= op->start_ns &&
	    op->end_ns > op->start_ns) {
		/*
		 * From the launching thread, at the launch, to the operation: a flow
		 * binds to the slice of its category that starts where it does, so
		 * the launch is an instant slice of the operation's category.
		 */
		pf_slice(p, op->launcher_pid, op->launcher_tid, "launch", "gpu", op->launch_ns,
			 op->launch_ns, args);
		p->flows++;
		pf_flow(p, 's', p->flows, op->launcher_pid, op->launcher_tid, op->launch_ns);
		pf_flow(p, 'f', p->flows, PF_GPU_PID + op->device, op->stream, op->start_ns);
	}
}

static void on_thread_forgotten(void *ctx, uint32_t tid, const char *comm)
{
	struct perfetto_stream *p = ctx;

	named_add(&p->gone, 0, tid, comm, GONE_MAX, false);
}

struct perfetto_stream *perfetto_stream_new(FILE *f, struct eng_timeline_hooks *h)
{
	struct perfetto_stream *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->f = f;
	*h = (struct eng_timeline_hooks){
		.ctx = p,
		.thread_state = on_thread_state,
		.interferer = on_interferer,
		.gap = on_gap,
		.step = on_step,
		.gpu_op = on_gpu_op,
		.thread_forgotten = on_thread_forgotten,
	};
	return p;
}

void perfetto_stream_free(struct perfetto_stream *p)
{
	if (!p)
		return;
	named_free(&p->gone);
	named_free(&p->streams);
	named_free(&p->interferers);
	free(p->cpu_end);
	free(p);
}

/*
 * A slice per stacked event on its thread's track (cat "stack"), the stack in
 * its args: "stack" one line, innermost first; "frames" the same as a list.
 */
static void pf_stacks(const struct engine *e, FILE *f, bool *first)
{
	struct eng_stack *st;
	struct symbols *sym;
	struct eng_target t;
	char fr[512];
	int n;

	if (!sym_any(e))
		return;
	engine_target(e, &t);
	st = engine_stacks_copy(e, 0, 0, UINT64_MAX, &n);
	sym = symbols_new(e);
	if (!sym)
		n = 0;
	for (int i = 0; i < n; i++) {
		const char *ev = sym_event_name(st[i].ev_type);

		fputs(*first ? "" : ",\n", f);
		*first = false;
		fprintf(f, "{\"ph\":\"X\",\"pid\":%" PRIu32 ",\"tid\":%" PRIu32
			",\"name\":\"%s\",\"cat\":\"stack\",\"ts\":", t.pid, st[i].tid, ev);
		pf_us(f, st[i].start_ns);
		fputs(",\"dur\":", f);
		pf_us(f, st[i].ts - st[i].start_ns);
		fputs(",\"args\":{\"stack\":\"", f);
		for (uint32_t k = 0; k < st[i].nframes; k++) {
			struct sym_frame sf;

			symbols_frame(sym, &st[i], k, &sf);
			sym_frame_text(&sf, fr, sizeof(fr));
			if (k)
				fputs(" < ", f);
			json_escape(f, fr, strlen(fr));
		}
		fputs("\",\"frames\":[", f);
		for (uint32_t k = 0; k < st[i].nframes; k++) {
			struct sym_frame sf;

			symbols_frame(sym, &st[i], k, &sf);
			sym_frame_text(&sf, fr, sizeof(fr));
			fputs(k ? ",\"" : "\"", f);
			json_escape(f, fr, strlen(fr));
			fputc('"', f);
		}
		fputs("]}}", f);
	}
	symbols_free(sym);
	free(st);
}

static void pf_meta(FILE *f, bool *first, const char *what, uint32_t pid, int64_t tid,
		    const char *name)
{
	fputs(*first ? "" : ",\n", f);
	*first = false;
	fprintf(f, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%" PRIu32, what, pid);
	if (tid >= 0)
		fprintf(f, ",\"tid\":%" PRId64, tid);
	fputs(",\"args\":{\"name\":\"", f);
	json_escape(f, name, strlen(name));
	fputs("\"}}", f);
}

/* a track's place in the list (process_sort_index, or thread_sort_index with tid) */
static void pf_meta_sort(FILE *f, bool *first, uint32_t pid, int64_t tid, int64_t index)
{
	fputs(*first ? "" : ",\n", f);
	*first = false;
	fprintf(f, "{\"ph\":\"M\",\"name\":\"%s_sort_index\",\"pid\":%" PRIu32,
		tid >= 0 ? "thread" : "process", pid);
	if (tid >= 0)
		fprintf(f, ",\"tid\":%" PRId64, tid);
	fprintf(f, ",\"args\":{\"sort_index\":%" PRId64 "}}", index);
}

/* streams[i]'s device named by an earlier stream of it */
static bool device_named(const struct named_list *streams, uint32_t i)
{
	for (uint32_t k = 0; k < i; k++)
		if (streams->v[k].pid == streams->v[i].pid)
			return true;
	return false;
}

/* pid order, then the order seen */
static int by_pid_seen(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return *x < *y ? -1 : *x > *y;
}

/*
 * Every process of an interferer thread gets a name: those in the report's
 * list of interferers have theirs; the others (a kernel thread that took a
 * CPU once) are named after the first of their threads seen.
 */
static void name_other_processes(FILE *f, bool *first, const struct perfetto_stream *p,
				 pid_t target, const struct eng_interferer *itf, int ni)
{
	uint32_t n = 0;
	uint64_t *k = malloc((p->interferers.n + 1) * sizeof(*k));

	if (!k)
		return;
	for (uint32_t i = 0; i < p->interferers.n; i++) {
		uint32_t pid = p->interferers.v[i].pid;
		bool named = pid == (uint32_t)target;

		for (int j = 0; j < ni && !named; j++)
			named = !itf[j].own && (uint32_t)itf[j].pid == pid;
		if (!named)
			k[n++] = (uint64_t)pid << 32 | i;
	}
	qsort(k, n, sizeof(*k), by_pid_seen);
	for (uint32_t i = 0; i < n; i++)
		if (!i || k[i] >> 32 != k[i - 1] >> 32)
			pf_meta(f, first, "process_name", (int)(k[i] >> 32), -1,
				p->interferers.v[(uint32_t)k[i]].comm);
	free(k);
}

struct thread_names {
	FILE *f;
	bool *first;
	uint32_t pid;
};

static void thread_name(void *ctx, uint32_t tid, const char *comm)
{
	struct thread_names *tn = ctx;

	if (comm[0])
		pf_meta(tn->f, tn->first, "thread_name", tn->pid, tid, comm);
}

int report_perfetto(const struct engine *e, const struct perfetto_stream *p, FILE *f)
{
	bool first;
	struct eng_interferer itf[256];
	struct eng_target t;
	struct eng_capture cap;
	int ni;
	char name[64];

	if (!(p && p->started && f == p->f)) {
		/* no stream: the steps and their blame from the results */
		fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
		first = true;
		for (uint64_t i = engine_first_step(e); i < engine_nsteps(e); i++) {
			const struct eng_step *r = engine_step(e, i);

			fputs(first ? "" : ",\n", f);
			first = false;
			fprintf(f, "{\"ph\":\"X\",\"pid\":%u,\"tid\":1,\"name\":\"step %" PRIu64
				"\",\"cat\":\"step\",\"ts\":", PF_STEPS_PID, r->step);
			pf_us(f, r->start_ns);
			fputs(",\"dur\":", f);
			pf_us(f, r->duration_ns);
			fprintf(f, ",\"args\":{\"gpu_idle_ns\":%" PRIu64 ",\"tail\":%s}}",
				r->gpu_idle_ns, r->tail ? "true" : "false");
		}
	} else {
		first = false;
	}
	pf_stacks(e, f, &first);
	pf_meta(f, &first, "process_name", PF_STEPS_PID, -1, "stepblame");
	pf_meta(f, &first, "thread_name", PF_STEPS_PID, 1, "steps");
	pf_meta(f, &first, "thread_name", PF_STEPS_PID, 2, "GPU idle: blame");
	pf_meta_sort(f, &first, PF_STEPS_PID, -1, 0);
	pf_meta_sort(f, &first, PF_STEPS_PID, 1, 0);
	pf_meta_sort(f, &first, PF_STEPS_PID, 2, 1);
	engine_capture(e, &cap);
	if (p) {
		/* every device and stream that ran an operation; device 0 where none did */
		uint32_t named_dev = UINT32_MAX;

		for (uint32_t i = 0; i < p->streams.n; i++) {
			const struct named_thread *x = &p->streams.v[i];

			if (x->pid != named_dev && !device_named(&p->streams, i)) {
				snprintf(name, sizeof(name), "GPU %" PRIu32, x->pid);
				pf_meta(f, &first, "process_name", PF_GPU_PID + x->pid, -1, name);
				pf_meta_sort(f, &first, PF_GPU_PID + x->pid, -1, 1 + (int64_t)x->pid);
			}
			named_dev = x->pid;
			snprintf(name, sizeof(name), "stream %" PRIu32, x->tid);
			pf_meta(f, &first, "thread_name", PF_GPU_PID + x->pid, x->tid, name);
		}
		if (cap.gpu_timeline && !p->streams.n)
			pf_meta(f, &first, "process_name", PF_GPU_PID, -1, "GPU 0");
		if (p->cpu_end) {
			pf_meta(f, &first, "process_name", PF_CPU_PID, -1, "CPUs (who took them)");
			for (uint32_t c = 0; c < CPUS_MAX; c++)
				if (p->cpu_end[c]) {
					snprintf(name, sizeof(name), "CPU %" PRIu32, c);
					pf_meta(f, &first, "thread_name", PF_CPU_PID, c + 1, name);
					pf_meta_sort(f, &first, PF_CPU_PID, c + 1, c);
				}
		}
	} else if (cap.gpu_timeline) {
		pf_meta(f, &first, "process_name", PF_GPU_PID, -1, "GPU 0");
	}
	engine_target(e, &t);
	if (t.pid) {
		struct thread_names tn = { .f = f, .first = &first, .pid = t.pid };

		snprintf(name, sizeof(name), "%s (target)",
			 eng_target_name(&t)[0] ? eng_target_name(&t) : "trainer");
		pf_meta(f, &first, "process_name", t.pid, -1, name);
		/* threads forgotten to make room (a trace of more threads than the engine follows) */
		for (uint32_t i = 0; p && i < p->gone.n; i++)
			pf_meta(f, &first, "thread_name", t.pid, p->gone.v[i].tid, p->gone.v[i].comm);
		engine_each_thread(e, thread_name, &tn);
	}
	ni = engine_interferers(e, itf, ARRAY_SIZE(itf));
	for (int i = 0; i < ni; i++)
		if (!itf[i].own) {
			snprintf(name, sizeof(name), "%s%s", itf[i].comm,
				 itf[i].tracer ? " (stepblame's own agent)" : "");
			pf_meta(f, &first, "process_name", itf[i].pid, -1, name);
		}
	for (uint32_t i = 0; p && i < p->interferers.n; i++)
		if (p->interferers.v[i].pid != (uint32_t)t.pid)
			pf_meta(f, &first, "thread_name", p->interferers.v[i].pid,
				p->interferers.v[i].tid, p->interferers.v[i].comm);
	if (p)
		name_other_processes(f, &first, p, t.pid, itf, ni);
	/* the trace's identity, as the JSON report's (schemas/report.md, "Identity") */
	{
		struct jw w;

		fputs("\n],\n\"metadata\": {\"stepblame\": ", f);
		jw_init(&w, f, false);
		report_json_identity(&w, e);
		fputs("}}\n", f);
	}
	return ferror(f) ? -EIO : 0;
}
