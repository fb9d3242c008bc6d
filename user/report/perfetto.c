// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The Perfetto output: a Chrome JSON trace (ui.perfetto.dev) written as the
 * engine sweeps, through its timeline hooks (engine_opts.timeline), and closed
 * by report_perfetto() with the names of the processes and threads. Tracks:
 * the steps and their GPU idle blame, each GPU stream, the target's candidate
 * threads (state or cause), and the tasks that took their CPUs.
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
#define PF_GPU_PID (PF_STEPS_PID + 16)
#define GONE_MAX (1u << 20)        /* names of forgotten threads kept */

struct gone_thread {
	uint32_t tid;
	char comm[SB_COMM_LEN + 1];
};

struct perfetto_stream {
	FILE *f;
	bool started;            /* the document is open: events follow with a comma */
	/* threads the engine forgot to make room: their names, for the metadata */
	struct gone_thread *gone;
	uint32_t ngone, capgone;
};

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

static void on_thread_state(void *ctx, uint32_t pid, uint32_t tid, const char *state,
			    uint64_t s, uint64_t end)
{
	pf_slice(ctx, pid, tid, state, "thread", s, end, NULL);
}

static void on_interferer(void *ctx, const struct eng_who *w, uint32_t victim_tid, uint64_t s,
			  uint64_t end)
{
	char args[160];

	snprintf(args, sizeof(args), ",\"args\":{\"victim_tid\":%" PRIu32 ",\"cpu\":%u}",
		 victim_tid, (unsigned)w->cpu);
	pf_slice(ctx, w->pid, w->tid, w->comm, "interferer", s, end, args);
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
		for (const char *c = x->path[0] ? x->path : sb_file_kind_name(x->kind);
		     *c && o + 8 < sizeof(args); c++) {
			if (*c == '"' || *c == '\\')
				args[o++] = '\\';
			args[o++] = *c;
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
}

static void on_gpu_op(void *ctx, const struct eng_gpu_op *op)
{
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
	pf_slice(ctx, PF_GPU_PID + op->device, op->stream, nm, "gpu", op->start_ns, op->end_ns,
		 args);
}

static void on_thread_forgotten(void *ctx, uint32_t tid, const char *comm)
{
	struct perfetto_stream *p = ctx;

	if (p->ngone >= GONE_MAX)
		return;
	if (p->ngone == p->capgone) {
		uint32_t nc = p->capgone ? 2 * p->capgone : 64;
		struct gone_thread *q = realloc(p->gone, nc * sizeof(*q));

		if (!q)
			return;
		p->gone = q;
		p->capgone = nc;
	}
	p->gone[p->ngone].tid = tid;
	snprintf(p->gone[p->ngone].comm, sizeof(p->gone[p->ngone].comm), "%s", comm);
	p->ngone++;
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
	free(p->gone);
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
	st = malloc(ENG_STACKS_MAX * sizeof(*st));
	sym = symbols_new(e);
	n = st && sym ? engine_stacks(e, 0, 0, UINT64_MAX, st, ENG_STACKS_MAX) : 0;
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
	engine_capture(e, &cap);
	if (cap.gpu_timeline) {
		pf_meta(f, &first, "process_name", PF_GPU_PID, -1, "GPU 0");
	}
	engine_target(e, &t);
	if (t.pid) {
		struct thread_names tn = { .f = f, .first = &first, .pid = t.pid };

		snprintf(name, sizeof(name), "%s (target)", t.comm[0] ? t.comm : "trainer");
		pf_meta(f, &first, "process_name", t.pid, -1, name);
		/* threads forgotten to make room (a trace of more threads than the engine follows) */
		for (uint32_t i = 0; p && i < p->ngone; i++)
			pf_meta(f, &first, "thread_name", t.pid, p->gone[i].tid, p->gone[i].comm);
		engine_each_thread(e, thread_name, &tn);
	}
	ni = engine_interferers(e, itf, ARRAY_SIZE(itf));
	for (int i = 0; i < ni; i++)
		if (!itf[i].own)
			pf_meta(f, &first, "process_name", itf[i].pid, -1, itf[i].comm);
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
