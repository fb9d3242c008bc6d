// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The text report: what a person reads in a terminal. Every figure comes from
 * the engine's results; nothing here decides blame.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "report/report.h"
#include "format/costs.h"
#include "format/trace.h"
#include "report/symbols.h"

#define MAX_TAIL_LINES 10
#define MAX_INTERFERERS 8

/* 182 ms, 1.23 s, 812 µs, 950 ns: three significant digits */
static const char *fmt_ns(char *buf, size_t len, uint64_t ns)
{
	static const struct { uint64_t div; const char *unit; } u[] = {
		{ 1000000000ull, "s" }, { 1000000ull, "ms" }, { 1000ull, "µs" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(u); i++) {
		if (ns >= u[i].div) {
			double v = (double)ns / (double)u[i].div;

			snprintf(buf, len, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v,
				 u[i].unit);
			return buf;
		}
	}
	snprintf(buf, len, "%" PRIu64 " ns", ns);
	return buf;
}

/* 3,411 */
const char *report_fmt_count(char *buf, size_t len, uint64_t v)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof(tmp), "%" PRIu64, v), o = 0;

	for (int i = 0; i < n && (size_t)o + 2 < len; i++) {
		if (i && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = tmp[i];
	}
	buf[o] = 0;
	return buf;
}

/*
 * A name another process chose (its comm), made safe for a terminal: control
 * characters (C0, DEL, C1), bidirectional overrides and bytes that are not
 * UTF-8 become '?'.
 */
static const char *clean(char *buf, size_t len, const char *s)
{
	sb_printable(buf, len, s, strlen(s));
	if (!buf[0])
		snprintf(buf, len, "?");
	return buf;
}

/* bytes, decimal units: "512 B", "3.4 kB", "200 MB", "1.2 GB" */
static const char *fmt_bytes(char *buf, size_t len, uint64_t b)
{
	static const char *const unit[] = { "kB", "MB", "GB", "TB" };
	double v = (double)b;
	int u = -1;

	if (b < 1000) {
		snprintf(buf, len, "%" PRIu64 " B", b);
		return buf;
	}
	while (v >= 1000 && u < 3) {
		v /= 1000;
		u++;
	}
	snprintf(buf, len, v < 10 ? "%.1f %s" : "%.0f %s", v, unit[u]);
	return buf;
}

/* the file behind io_wait: "fsync /ckpt/model.pt (1 call, 812 ms; 200 MB written to it in this step)" */
static void io_phrase(FILE *f, const struct eng_io *x)
{
	char n1[32], t[32], b[32];

	fprintf(f, " %s", sb_io_name(x->call));
	/* sync names no file */
	if (x->path[0] || x->kind != SB_FILE_NONE)
		fprintf(f, " %s", x->path[0] ? x->path : sb_file_kind_name(x->kind));
	if (x->path[0] && x->kind != SB_FILE_REGULAR)
		fprintf(f, " (%s)", sb_file_kind_name(x->kind));
	fprintf(f, " (%s call%s, %s", report_fmt_count(n1, sizeof(n1), x->calls), x->calls == 1 ? "" : "s",
		fmt_ns(t, sizeof(t), x->ns));
	if (x->bytes)
		fprintf(f, ", %s done", fmt_bytes(b, sizeof(b), x->bytes));
	if (x->written)
		fprintf(f, "; %s written to it in this step", fmt_bytes(b, sizeof(b), x->written));
	fputs(")", f);
}

/* a mapping's size, binary units: "384 MiB" */
static const char *fmt_size(char *buf, size_t len, uint64_t b)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, u && v < 10 ? "%.1f %s" : "%.0f %s", v, unit[u]);
	return buf;
}

/* a region the faults were in: "30,000 faults in anon mapping 384 MiB (mmap in step 41)" */
/*
 * The process whose threads are "own": named by tid, other tasks by pid. The
 * one that marks the steps (a launcher's trainer, a rank of several), else
 * the traced process.
 */
static uint32_t target_pid;

/* the report's engine: names the followed processes other than the target */
static const struct engine *cur_engine;

static void set_home(const struct engine *e)
{
	struct eng_target tg;
	struct eng_capture c;

	engine_target(e, &tg);
	engine_capture(e, &c);
	target_pid = c.mark_pid ? c.mark_pid : tg.pid;
	cur_engine = e;
}

/*
 * " softirq NET_RX 20.1 ms on CPU 1", " hard interrupt 45 (virtio0-input.0) 1.20 ms on CPU 3",
 * " call_function interrupt 310 µs on CPU 1"
 */
static void irq_phrase(FILE *f, const struct eng_irq *x)
{
	char b[32], n[64];

	if (x->kind == ENG_IRQ_HARD)
		fprintf(f, " hard interrupt %u%s%s%s", x->irq, x->name[0] ? " (" : "",
			x->name[0] ? clean(n, sizeof(n), x->name) : "", x->name[0] ? ")" : "");
	else if (x->kind == ENG_IRQ_SYSTEM)
		fprintf(f, " %s interrupt", x->name);
	else
		fprintf(f, " softirq %s", x->name);
	fprintf(f, " %s on CPU %u", fmt_ns(b, sizeof(b), x->ns), (unsigned)x->cpu);
}

/* the run's interrupt sources, after the interferers: who else took a critical thread's CPU */
static void irq_totals_text(FILE *f, const struct engine *e)
{
	struct eng_irq q[ENG_IRQ_TOTALS_MAX];
	int n = engine_irq_totals(e, q, 5);

	if (!n)
		return;
	fputs("Interrupts  handlers run on the critical threads' time (irq), over all steps:\n", f);
	for (int i = 0; i < n; i++) {
		fputs(" ", f);
		irq_phrase(f, &q[i]);
		fputs("\n", f);
	}
}

static void map_phrase(FILE *f, const struct eng_map *m)
{
	static const char *const what[ENG_NREGION] = { "", "file", "shared memory", "anon",
							"[heap]", "[stack]", "anon" };
	char n1[32], sz[32], t[32], p[ENG_IO_PATH_MAX];

	if (m->region) {
		/* read from /proc/PID/maps (schemas/report.md, "Which mapping") */
		fprintf(f, " %s fault%s (%s) in %s mapping %s", report_fmt_count(n1, sizeof(n1), m->faults),
			m->faults == 1 ? "" : "s", fmt_ns(t, sizeof(t), m->ns), what[m->region < ENG_NREGION ? m->region : 0],
			fmt_size(sz, sizeof(sz), m->len));
		if (m->path[0] && m->region != ENG_REGION_HEAP && m->region != ENG_REGION_STACK)
			fprintf(f, " %s%s", m->anon ? "" : "of ", clean(p, sizeof(p), m->path));
		if (target_pid && m->pid != target_pid)
			fprintf(f, " of pid %" PRIu32, m->pid);
		fputs(m->before_capture ? " (mapped before the capture)"
					: " (found in the maps during the capture)", f);
		return;
	}
	fprintf(f, " %s fault%s (%s) in %s mapping %s", report_fmt_count(n1, sizeof(n1), m->faults),
		m->faults == 1 ? "" : "s", fmt_ns(t, sizeof(t), m->ns), m->anon ? "anon" : "file", fmt_size(sz, sizeof(sz), m->len));
	if (!m->anon && m->path[0])
		fprintf(f, " of %s", clean(p, sizeof(p), m->path));
	if (m->step_known)
		fprintf(f, " (mmap in step %" PRIu64 ")", m->step_number);
	else
		fputs(" (mmap before the first step)", f);
}

static void who_str(char *buf, size_t len, const char *comm, uint32_t id)
{
	char c[40];

	snprintf(buf, len, "%s[%" PRIu32 "]", clean(c, sizeof(c), comm), id);
}

/*
 * the main thread of one of the trainer's child processes, by its role:
 * "child process 2 of python3[29216] (pid 29242)"; false for other tasks
 */
static bool proc_str(char *buf, size_t len, uint32_t pid, uint32_t tid)
{
	char pn[128], c[128];

	if (!cur_engine || pid == target_pid || tid != pid ||
	    !engine_process_name(cur_engine, pid, pn, sizeof(pn)))
		return false;
	snprintf(buf, len, "%s (pid %" PRIu32 ")", clean(c, sizeof(c), pn), pid);
	return true;
}

/*
 * blocked on a followed waker: what it did during the waits, its parts of at
 * least 1% (", which was on CPU 70 ms, preempted by stress-ng-cpu[812] 5 ms")
 */
static void act_parts(FILE *f, const struct eng_act *a, const uint64_t *vec, bool inner)
{
	uint64_t total = 0, on = 0;
	int shown = 0;

	for (int k = 0; k < ENG_NACT; k++) {
		total += vec[k];
		on += a->on_ns[k];
	}
	if (!total)
		return;
	for (int k = 0; k < ENG_NACT; k++) {
		char d[32], n[160];

		if (!vec[k] || vec[k] * 100 < total)
			continue;
		fputs(shown++ ? ", " : inner ? "which was " : ", which was ", f);
		switch (k) {
		case ENG_ACT_ON_CPU:
			fputs("on CPU", f);
			break;
		case ENG_ACT_PREEMPTED:
			fputs("preempted", f);
			if (inner)
				break; /* by_* names the waker's own preemptor */
			if (a->by_max && proc_str(n, sizeof(n), a->by_pid, a->by_tid))
				fprintf(f, " by %s", n);
			else if (a->by_max)
				fprintf(f, " by %s", (who_str(n, sizeof(n), a->by_comm,
							       a->by_pid == target_pid ? a->by_tid : a->by_pid), n));
			break;
		case ENG_ACT_RUNNABLE:
			fputs("waiting for a CPU", f);
			break;
		case ENG_ACT_IO:
			fputs("in I/O", f);
			break;
		case ENG_ACT_FAULTING:
			fputs("faulting", f);
			break;
		case ENG_ACT_RECLAIM:
			fputs("reclaiming memory", f);
			break;
		case ENG_ACT_ALLOC:
			fputs("in the allocator", f);
			break;
		case ENG_ACT_THROTTLED:
			fputs("throttled by its cgroup's CPU quota", f);
			break;
		case ENG_ACT_BLOCKED:
			if (inner)
				fputs("asleep", f);
			else if (a->on_max && a->on_tid && proc_str(n, sizeof(n), a->on_pid, a->on_tid))
				fprintf(f, "itself blocked on %s", n);
			else if (a->on_max && a->on_tid)
				fprintf(f, "itself blocked on %s", (who_str(n, sizeof(n), a->on_comm[0] ?
									 a->on_comm : "thread", a->on_tid), n));
			else
				fputs("asleep", f);
			break;
		}
		fprintf(f, " %s", fmt_ns(d, sizeof(d), vec[k]));
		/* what the threads it was blocked on did: "(which was faulting 90 ms)" */
		if (k == ENG_ACT_BLOCKED && !inner && on) {
			fputs(" (", f);
			act_parts(f, a, a->on_ns, true);
			fputs(")", f);
		}
		/* "in I/O 80 ms (fsync /data/shard3.bin)" */
		if (k == ENG_ACT_IO && a->io_call && cur_engine) {
			const char *p = engine_act_path(cur_engine, a->io_path);
			char pb[ENG_IO_PATH_MAX];

			if (!p[0] && a->io_kind == SB_FILE_NONE)
				fprintf(f, " (%s)", sb_io_name(a->io_call));
			else
				fprintf(f, " (%s %s)", sb_io_name(a->io_call),
					clean(pb, sizeof(pb), p[0] ? p : sb_file_kind_name(a->io_kind)));
		}
		/* "faulting 40 ms (in anon mapping 384 MiB)" */
		if (k == ENG_ACT_FAULTING && a->fault_region) {
			char sz[32];

			fprintf(f, " (in %s mapping %s", a->fault_anon ? "anon" : "file",
				fmt_size(sz, sizeof(sz), a->fault_len));
			if (!a->fault_anon && a->fault_path && cur_engine) {
				char pb[ENG_IO_PATH_MAX];

				fprintf(f, " of %s", clean(pb, sizeof(pb),
							   engine_act_path(cur_engine, a->fault_path)));
			}
			fputs(")", f);
		}
	}
}

static void act_phrase(FILE *f, const struct eng_act *a)
{
	act_parts(f, a, a->ns, false);
}

/* " (real-time)" after a culprit that ran in a real-time class */
static const char *realtime_tag(const struct eng_who *w)
{
	return cur_engine && engine_task_realtime(cur_engine, w->tid, w->comm) ? " (real-time)" : "";
}

/* what a cause with its culprit looks like after the "+x ms" */
/* w by name, a thread of one of the trainer's child processes by its process's role */
static const char *task_role(char *buf, size_t len, const struct eng_who *w)
{
	char pn[128], c2[128];

	who_str(buf, len, w->comm, w->pid == target_pid ? w->tid : w->pid);
	if (cur_engine && w->pid != target_pid &&
	    engine_process_name(cur_engine, w->pid, pn, sizeof(pn)))
		snprintf(buf, len, "%s (pid %" PRIu32 ")", clean(c2, sizeof(c2), pn), w->pid);
	return buf;
}

static void culprit_share(FILE *f, const struct eng_step *s, int cause, const struct eng_who *w);

/*
 * "stormer (10 processes)": a crowd of one name (eng_excess.processes);
 * CROWD_UNCOUNTED: "stormer (several processes)", an episode's
 */
#define CROWD_UNCOUNTED UINT32_MAX
const char *report_crowd_name(char *buf, size_t len, const char *comm, uint32_t procs)
{
	char c[40];

	if (procs == CROWD_UNCOUNTED)
		snprintf(buf, len, "%s (several processes)", clean(c, sizeof(c), comm));
	else
		snprintf(buf, len, "%s (%" PRIu32 " processes)", clean(c, sizeof(c), comm), procs);
	return buf;
}

static void cause_phrase(FILE *f, const struct eng_step *s, int cause, const struct eng_who *w,
			 bool has_who, uint32_t procs)
{
	char crit[64], a[160], b[160], n1[32], n2[32];

	who_str(crit, sizeof(crit), s->crit_comm[0] ? s->crit_comm : "thread", s->crit_tid);
	switch (cause) {
	case ENG_CPU_WAIT:
		if (has_who) {
			if (procs > 1)
				report_crowd_name(a, sizeof(a), w->comm, procs);
			else
				task_role(a, sizeof(a), w);
			fprintf(f, " — %s preempted by %s%s", crit, a, realtime_tag(w));
			if (w->cpu >= 0)
				fprintf(f, " on CPU %d", w->cpu);
		} else {
			fprintf(f, " — %s runnable, waiting for a CPU", crit);
		}
		break;
	case ENG_BLOCKED:
		if (has_who && w->via_tid) {
			char pn[128], c2[128];

			who_str(a, sizeof(a), w->via_comm, w->via_tid);
			if (cur_engine && w->via_pid != target_pid &&
			    engine_process_name(cur_engine, w->via_pid, pn, sizeof(pn)))
				snprintf(a, sizeof(a), "%s (pid %" PRIu32 ")", clean(c2, sizeof(c2), pn),
					 w->via_pid);
			if (procs > 1)
				report_crowd_name(b, sizeof(b), w->comm, procs);
			else
				who_str(b, sizeof(b), w->comm, w->pid == target_pid ? w->tid : w->pid);
			fprintf(f, " — %s waited for %s, itself preempted by %s%s", crit, a, b,
				realtime_tag(w));
			if (w->cpu >= 0)
				fprintf(f, " on CPU %d", w->cpu);
		} else if (has_who) {
			char pn[128];
			uint64_t alone = 0, named = 0;

			/*
			 * Sleeps that nobody traced ended (a timer, a timeout) may
			 * outweigh the waits the culprit ended: say both, the
			 * larger first, so the culprit is not read as the whole
			 */
			for (uint32_t i = 0; i < s->nblame; i++)
				if (s->blame[i].cause == ENG_BLOCKED && !s->blame[i].has_who)
					alone += s->blame[i].ns;
				else if (s->blame[i].cause == ENG_BLOCKED && eng_who_same(&s->blame[i].who, w))
					named += s->blame[i].ns;
			if (alone > named)
				fprintf(f, " — %s asleep %s, woken by a timer or by nobody traced; for %s",
					crit, fmt_ns(n1, sizeof(n1), alone), fmt_ns(n2, sizeof(n2), named));
			who_str(a, sizeof(a), w->comm, w->tid ? w->tid : w->pid);
			if (cur_engine && w->pid != target_pid &&
			    engine_process_name(cur_engine, w->pid, pn, sizeof(pn))) {
				if (alone > named)
					fprintf(f, " it waited for %s (pid %" PRIu32 ")",
						clean(b, sizeof(b), pn), w->pid);
				else
					fprintf(f, " — %s waited for %s (pid %" PRIu32 ")", crit,
						clean(b, sizeof(b), pn), w->pid);
				if (w->tid && w->tid != w->pid)
					fprintf(f, " thread %s", a);
			} else if (alone > named) {
				fprintf(f, " it waited for %s", a);
			} else {
				fprintf(f, " — %s waited for %s", crit, a);
			}
			/* its share before what it did: after that it would read as part of the last activity */
			culprit_share(f, s, ENG_BLOCKED, w);
			act_phrase(f, &w->act);
		} else {
			fprintf(f, " — %s asleep", crit);
		}
		break;
	case ENG_MIGRATION:
		fprintf(f, " (%s migrations)", report_fmt_count(n1, sizeof(n1), s->count[ENG_N_MIGRATIONS]));
		if (s->nmoves) {
			/* who moved it first, then whom it waited behind and how long */
			const struct eng_move *m = &s->moves[0];

			fprintf(f, " — %s moved by ", crit);
			if (m->how == ENG_MOVE_SELF) {
				fputs("its own sched_setaffinity", f);
			} else if (m->how == ENG_MOVE_THREAD) {
				who_str(a, sizeof(a), m->by_comm, m->by_tid);
				fprintf(f, "sched_setaffinity of %s", a);
			} else {
				fputs("the scheduler (load balancing)", f);
			}
			if (m->from_cpu >= 0 && m->to_cpu >= 0)
				fprintf(f, " (%sCPU %d→%d)", s->count[ENG_N_MIGRATIONS] > 1 ? "last: " : "",
					(int)m->from_cpu, (int)m->to_cpu);
			if (has_who) {
				uint64_t behind = 0;

				for (uint32_t i = 0; i < s->nblame; i++)
					if (s->blame[i].cause == ENG_MIGRATION && s->blame[i].has_who &&
					    s->blame[i].who.pid == w->pid && s->blame[i].who.tid == w->tid)
						behind += s->blame[i].ns;
				who_str(a, sizeof(a), w->comm, w->pid == target_pid ? w->tid : w->pid);
				fprintf(f, ", then waited behind %s", a);
				if (behind)
					fprintf(f, " %s", fmt_ns(b, sizeof(b), behind));
				if (w->cpu >= 0)
					fprintf(f, " on CPU %d", w->cpu);
			}
		} else if (has_who) {
			who_str(a, sizeof(a), w->comm, w->pid == target_pid ? w->tid : w->pid);
			fprintf(f, " — %s moved, then waited behind %s", crit, a);
			if (w->cpu >= 0)
				fprintf(f, " on CPU %d", w->cpu);
		}
		break;
	case ENG_PAGE_FAULT:
		fprintf(f, " (%s faults", report_fmt_count(n1, sizeof(n1), s->count[ENG_N_FAULTS]));
		if (s->count[ENG_N_MAJOR_FAULTS])
			fprintf(f, ", %s major", report_fmt_count(n2, sizeof(n2), s->count[ENG_N_MAJOR_FAULTS]));
		fputs(")", f);
		for (uint32_t i = 0; i < s->nmaps; i++) {
			fputs(i ? ";" : " —", f);
			map_phrase(f, &s->maps[i]);
		}
		break;
	case ENG_ALLOC:
		fprintf(f, " (%s slow allocator calls, ", report_fmt_count(n1, sizeof(n1), s->count[ENG_N_ALLOCS]));
		if (s->count[ENG_N_BURST_ALLOCS])
			fprintf(f, "%s fast ones in bursts, ",
				report_fmt_count(n1, sizeof(n1), s->count[ENG_N_BURST_ALLOCS]));
		fprintf(f, "%s mmap-family calls)", report_fmt_count(n2, sizeof(n2), s->count[ENG_N_MMAP]));
		break;
	case ENG_MEM_RECLAIM:
		fprintf(f, " (%s reclaim/compaction stalls)",
			report_fmt_count(n1, sizeof(n1), s->count[ENG_N_RECLAIMS]));
		break;
	case ENG_IO_WAIT:
		if (s->nio) {
			fprintf(f, " (%s slow I/O calls) — %s", report_fmt_count(n1, sizeof(n1), s->count[ENG_N_IO]),
				crit);
			io_phrase(f, &s->io[0]);
			for (uint32_t i = 1; i < s->nio; i++) {
				fputs(";", f);
				io_phrase(f, &s->io[i]);
			}
		} else if (s->count[ENG_N_IO])
			fprintf(f, " (%s slow I/O calls) — %s in I/O system calls or uninterruptible "
				"sleep", report_fmt_count(n1, sizeof(n1), s->count[ENG_N_IO]), crit);
		else
			fprintf(f, " — %s in uninterruptible sleep (I/O)", crit);
		break;
	case ENG_CUDA_SYNC:
	case ENG_CUDA_ALLOC:
	case ENG_CUDA_API:
		fprintf(f, " (%s CUDA calls)", report_fmt_count(n1, sizeof(n1), s->count[ENG_N_CUDA]));
		break;
	case ENG_HOST_COMPUTE:
		fprintf(f, " — %s on CPU in its own code", crit);
		break;
	case ENG_IRQ:
		fprintf(f, " — interrupt handlers on %s's time:", crit);
		for (uint32_t i = 0; i < s->nirqs; i++) {
			if (i)
				fputs(";", f);
			irq_phrase(f, &s->irqs[i]);
		}
		if (!s->nirqs)
			fputs(" (sources not kept)", f);
		break;
	case ENG_GPU_SLOW:
		fputs(" — kernels slower than their median", f);
		break;
	case ENG_TRACER:
		fputs(" — stepblame's own probes", f);
		break;
	case ENG_VM_STEAL:
		fprintf(f, " — the hypervisor held the CPU %s waited for (steal)", crit);
		break;
	case ENG_CPU_THROTTLE:
		if (has_who) {
			/* a thread it waited for sat throttled (a wakeup chain) */
			fprintf(f, " — %s waited for %s, runnable, throttled", crit,
				task_role(a, sizeof(a), w));
		} else {
			fprintf(f, " — %s runnable, throttled", crit);
		}
		fputs(": its cgroup's CPU quota for the period was used up (cpu.max, cpu.cfs_quota_us)",
		      f);
		break;
	}
}

const char *report_fmt_ns(char *buf, size_t len, uint64_t ns)
{
	return fmt_ns(buf, len, ns);
}

const char *report_clean(char *buf, size_t len, const char *s)
{
	return clean(buf, len, s);
}

const char *report_group_name(char *buf, size_t len, const struct eng_interferer_group *g)
{
	if (g->processes > 1)
		return report_crowd_name(buf, len, g->comm, g->processes);
	who_str(buf, len, g->comm, g->pid);
	return buf;
}

/*
 * After a step's culprit for a cause: how much of the cause was its, where
 * others had a good part of it (a crowd of tasks preempting the thread), so
 * that the one named is not read as the whole: " (224 ms of 884 ms in the
 * step; 9 other tasks and the rest 660 ms)"
 */
/* the cause's time in step s, of it w's, and how many other named tasks had some */
static void share_add(const struct eng_step *s, int cause, const struct eng_who *w, uint64_t *mine,
		      uint64_t *all, uint32_t *others)
{
	for (uint32_t i = 0; i < s->nblame; i++) {
		const struct eng_blame *x = &s->blame[i];

		if (x->cause != cause)
			continue;
		*all += x->ns;
		/* processes of one name (eng_blame.processes): their time together */
		if (x->has_who && engine_who_grouped(cur_engine, cause, &x->who, w))
			*mine += x->ns;
		else if (x->has_who)
			(*others)++;
	}
}

/*
 * " (X of Y in the step; ...)" where the culprit had less than 80% of the
 * cause's time: where (one step, or an episode's steps: others is then
 * not a count of distinct tasks, and is not given)
 */
static void share_print(FILE *f, uint64_t mine, uint64_t all, uint32_t others, const char *where,
			bool count_others)
{
	char a[32], b[32], c[32];

	if (!mine || mine * 10 >= all * 8)
		return;
	/* of the cause's whole time: the figure before the dash is its excess over the median */
	fprintf(f, " (%s of %s in %s; ", fmt_ns(a, sizeof(a), mine), fmt_ns(c, sizeof(c), all), where);
	if (others && count_others)
		fprintf(f, "%" PRIu32 " other task%s and the rest %s)", others, others == 1 ? "" : "s",
			fmt_ns(b, sizeof(b), all - mine));
	else if (others)
		fprintf(f, "other tasks and the rest %s)", fmt_ns(b, sizeof(b), all - mine));
	else
		fprintf(f, "the rest %s)", fmt_ns(b, sizeof(b), all - mine));
}

static void culprit_share(FILE *f, const struct eng_step *s, int cause, const struct eng_who *w)
{
	uint64_t mine = 0, all = 0;
	uint32_t others = 0;

	share_add(s, cause, w, &mine, &all, &others);
	share_print(f, mine, all, others, "the step", true);
}

void report_cause_phrase(const struct engine *e, const struct eng_step *s, int cause,
			 const struct eng_who *w, bool has_who, uint32_t procs, FILE *f)
{

	set_home(e);
	cause_phrase(f, s, cause, w, has_who, procs);
}

/*
 * "step 5", or where step numbers came again in the trace (numbers that
 * restart each epoch) "step 5 (index 25)": the number alone would not say
 * which step 5
 */
static const char *step_name(char *buf, size_t len, const struct engine *e, const struct eng_step *s)
{
	struct eng_capture c;

	engine_capture(e, &c);
	if (c.numbers_back)
		snprintf(buf, len, "step %" PRIu64 " (index %" PRIu64 ")", s->step, s->index);
	else
		snprintf(buf, len, "step %" PRIu64, s->step);
	return buf;
}

int report_step_line(const struct engine *e, const struct eng_step *s, const struct eng_summary *sum,
		     const char *note, FILE *f)
{
	char d[32], x[32], nm[64];
	struct eng_excess ex[ENG_NCAUSE];
	int n;

	set_home(e);

	fprintf(f, "%s: %s", step_name(nm, sizeof(nm), e, s), fmt_ns(d, sizeof(d), s->duration_ns));
	/* next to the step time: how much of it the tracer may have taken */
	if (s->tracer_events)
		fprintf(f, " (tracer ≈ %s%s)", fmt_ns(x, sizeof(x), s->tracer_ns),
			s->alloc_sampled ? ", allocator sampled" : "");
	if (s->incomplete) {
		fputs(s->gpu_cut ? " (incomplete: the trace was cut short before its GPU records)\n" :
		      s->gpu_before ? " (incomplete: it ended before the GPU records began)\n" :
		      " (incomplete: the capture ended inside it)\n", f);
		return ferror(f) ? -EIO : 0;
	}
	if (sum && sum->p50 && s->duration_ns > sum->p50)
		fprintf(f, ", +%s over median", fmt_ns(x, sizeof(x), s->duration_ns - sum->p50));
	if (s->gpu_timeline) {
		if (sum && s->tail && s->gpu_idle_ns > sum->idle_median)
			fprintf(f, "; GPU idle +%s",
				fmt_ns(x, sizeof(x), s->gpu_idle_ns - sum->idle_median));
		else
			fprintf(f, "; GPU idle %s", fmt_ns(x, sizeof(x), s->gpu_idle_ns));
	}
	if (sum && s->tail) {
		n = engine_step_excess(e, s, sum, ex, ENG_NCAUSE);
		for (int i = 0, shown = 0; i < n && shown < 3; i++) {
			/* a few percent of the step is noise, not a cause worth a line */
			if (ex[i].ns * 50 < s->duration_ns && shown)
				break;
			fprintf(f, "%s%s +%s", shown ? "; " : ": ", eng_cause_name(ex[i].cause),
				fmt_ns(x, sizeof(x), ex[i].ns));
			cause_phrase(f, s, ex[i].cause, &ex[i].who, ex[i].has_who, ex[i].processes);
			/* a waker's share is said inside its phrase, before what it did */
			if (ex[i].has_who && !(ex[i].cause == ENG_BLOCKED && !ex[i].who.via_tid))
				culprit_share(f, s, ex[i].cause, &ex[i].who);
			shown++;
		}
		/* the marker stays last on the line (what a reader greps for) */
		fprintf(f, "%s  [tail]", note ? note : "");
	} else {
		if (s->nblame)
			fprintf(f, "; top: %s %s", eng_cause_name(s->blame[0].cause),
				fmt_ns(x, sizeof(x), s->blame[0].ns));
		if (note)
			fputs(note, f);
	}
	fputc('\n', f);
	return ferror(f) ? -EIO : 0;
}

static bool same_top(const struct engine *e, const struct eng_excess *a, const struct eng_excess *b)
{
	if (a->cause != b->cause || a->has_who != b->has_who)
		return false;
	/* processes of one name are the same from step to step whichever of them led */
	if (a->has_who && engine_who_grouped(e, a->cause, &a->who, &b->who))
		return true;
	return !a->has_who || (a->who.pid == b->who.pid && a->who.tid == b->who.tid &&
			       a->who.via_tid == b->who.via_tid);
}

static int episode_cmp(const void *a, const void *b)
{
	const struct report_episode *x = a, *y = b;

	if (x->over_ns != y->over_ns)
		return x->over_ns > y->over_ns ? -1 : 1;
	return x->first->index < y->first->index ? -1 : 1;
}

uint64_t report_episodes(const struct engine *e, const struct eng_summary *s,
			 struct report_episode **out)
{
	struct report_episode *ep;
	uint64_t n = 0, prev = UINT64_MAX;

	*out = NULL;
	if (!s->ntail || !(ep = calloc(s->ntail, sizeof(*ep))))
		return 0;
	for (uint64_t i = engine_first_step(e); i < engine_nsteps(e); i++) {
		const struct eng_step *st = engine_step(e, i);
		struct eng_excess ex[ENG_NCAUSE];
		uint64_t over;
		int k;

		if (!st->tail)
			continue;
		k = engine_step_excess(e, st, s, ex, ENG_NCAUSE);
		if (k <= 0)
			ex[0] = (struct eng_excess){ .cause = ENG_UNKNOWN };
		over = st->duration_ns > s->p50 ? st->duration_ns - s->p50 : 0;
		if (n && prev + 1 == i && same_top(e, &ep[n - 1].top, &ex[0])) {
			struct report_episode *p = &ep[n - 1];

			p->last = st;
			p->nsteps++;
			p->over_ns += over;
			p->cause_ns += k > 0 ? ex[0].ns : 0;
			/* the same culprit: what it did is told of the longest step */
			if (st->duration_ns > p->longest->duration_ns) {
				p->longest = st;
				p->top = ex[0];
			}
		} else if (n < s->ntail) {
			ep[n++] = (struct report_episode){ .first = st, .last = st, .longest = st,
							   .nsteps = 1, .over_ns = over,
							   .cause_ns = k > 0 ? ex[0].ns : 0,
							   .top = ex[0] };
		}
		prev = i;
	}
	if (n)
		qsort(ep, n, sizeof(*ep), episode_cmp);
	*out = ep;
	return n;
}

/* whether cause_phrase gives figures of its step for the excess x */
static bool phrase_has_figures(const struct eng_excess *x)
{
	if (x->cause == ENG_BLOCKED)
		return x->has_who && !x->who.via_tid; /* what the culprit did */
	switch (x->cause) {
	case ENG_UNKNOWN:
	case ENG_CPU_WAIT:
	case ENG_HOST_COMPUTE:
	case ENG_GPU_SLOW:
	case ENG_TRACER:
	case ENG_VM_STEAL:
	case ENG_CPU_THROTTLE:
		return false;
	}
	return true;
}

/*
 * An episode's culprit: its longest step's, or CROWD_UNCOUNTED where its
 * steps' culprits were processes of one name (each step's counted apart, the
 * same process in two steps or not)
 */
static uint32_t episode_crowd(const struct engine *e, const struct report_episode *p)
{
	if (!p->top.has_who || p->nsteps == 1)
		return p->top.processes;
	for (uint64_t i = p->first->index; i <= p->last->index; i++) {
		const struct eng_step *st = engine_step(e, i);

		for (uint32_t k = 0; st && k < st->nblame; k++) {
			const struct eng_blame *x = &st->blame[k];

			if (x->has_who && x->cause == p->top.cause && x->who.pid != p->top.who.pid &&
			    engine_who_grouped(e, x->cause, &x->who, &p->top.who))
				return CROWD_UNCOUNTED;
		}
	}
	return p->top.processes;
}

void report_episode_line(const struct engine *e, const struct report_episode *p, FILE *f)
{
	char a[32], b[32], nm[64];
	struct eng_capture c;

	set_home(e);
	engine_capture(e, &c);
	/* numbers that restart: "steps 9-1" would read as nothing; the indexes too */
	if (c.numbers_back)
		fprintf(f, "steps %" PRIu64 " to %" PRIu64 " (index %" PRIu64 "-%" PRIu64 ", ",
			p->first->step, p->last->step, p->first->index, p->last->index);
	else
		fprintf(f, "steps %" PRIu64 "-%" PRIu64 " (", p->first->step, p->last->step);
	fprintf(f, "%" PRIu64 " steps, +%s over median in all): %s +%s in all", p->nsteps,
		fmt_ns(a, sizeof(a), p->over_ns), eng_cause_name(p->top.cause),
		fmt_ns(b, sizeof(b), p->cause_ns));
	cause_phrase(f, p->longest, p->top.cause, &p->top.who, p->top.has_who, episode_crowd(e, p));
	/* the culprit's share over the episode's steps (a waker's is said inside its phrase, of the longest) */
	if (p->top.has_who && !(p->top.cause == ENG_BLOCKED && !p->top.who.via_tid)) {
		uint64_t mine = 0, all = 0;
		uint32_t others = 0;

		for (uint64_t i = p->first->index; i <= p->last->index; i++) {
			const struct eng_step *st = engine_step(e, i);

			if (st)
				share_add(st, p->top.cause, &p->top.who, &mine, &all, &others);
		}
		share_print(f, mine, all, others, p->nsteps > 1 ? "these steps" : "the step",
			    p->nsteps == 1);
	}
	/* the phrase's figures (calls, faults, what the culprit did) are one step's */
	if (p->nsteps > 1 && phrase_has_figures(&p->top))
		fprintf(f, " (in %s, the longest)", step_name(nm, sizeof(nm), e, p->longest));
	fputs("  [tail]\n", f);
}

static const char *dip_name(int d)
{
	switch (d) {
	case ENG_DIP_PERIODIC: return "periodic";
	case ENG_DIP_SPORADIC: return "sporadic";
	case ENG_DIP_LOW: return "uniformly low";
	case ENG_DIP_NONE: return "none";
	}
	return "unknown";
}

/* "Capture     the GPU records stop 61 ms before ...: the 7 steps ending after them are left out" */
static void gpu_gap_line(FILE *f, const char *verb, uint64_t ns, const char *when, uint64_t steps,
			 const char *which)
{
	char a[32], b[32];

	fprintf(f, "Capture     the GPU records %s %s %s: the %s step%s %s %s left out as "
		"incomplete\n", verb, fmt_ns(a, sizeof(a), ns), when,
		report_fmt_count(b, sizeof(b), steps), steps == 1 ? "" : "s", which,
		steps == 1 ? "is" : "are");
}

static void loss_line(const struct engine *e, FILE *f)
{
	struct eng_loss l;
	char n[32];
	bool any = false;

	engine_loss(e, &l);
	fputs("Loss        ", f);
	/* switch-ins put in from runslices are not lost: said on a line of their own, below */
	if (l.total != UINT64_MAX)
		l.total -= l.inferred;
	if (!l.total) {
		fputs("none: 0 ring-buffer drops, 0 GPU channel drops, 0 GPU source (CUPTI) drops, "
		      "0 late records\n", f);
	} else {
		fprintf(f, "%s record%s lost:", report_fmt_count(n, sizeof(n), l.total), l.total == 1 ? "" : "s");
		for (int i = 0; i <= SB_EV_KERNEL_MAX; i++) {
			if (!l.ring[i])
				continue;
			fprintf(f, "%s %s %s", any ? "," : "", report_fmt_count(n, sizeof(n), l.ring[i]),
				sb_type_name(i));
			any = true;
		}
		if (l.gpu_channel)
			fprintf(f, "%s %s GPU channel", any ? "," : "",
				report_fmt_count(n, sizeof(n), l.gpu_channel)), any = true;
		if (l.gpu_source)
			fprintf(f, "%s %s GPU source (CUPTI)", any ? "," : "",
				report_fmt_count(n, sizeof(n), l.gpu_source)), any = true;
		if (l.wait_overflow)
			fprintf(f, "%s %s waits not measured (kernel map full)", any ? "," : "",
				report_fmt_count(n, sizeof(n), l.wait_overflow)), any = true;
		if (l.late)
			fprintf(f, "%s %s arrived too late to be placed in time", any ? "," : "",
				report_fmt_count(n, sizeof(n), l.late)), any = true;
		if (l.malformed)
			fprintf(f, "%s %s malformed", any ? "," : "", report_fmt_count(n, sizeof(n), l.malformed)),
				any = true;
		if (l.gpu_rejected)
			fprintf(f, "%s %s GPU record%s rejected (times outside the capture: the "
				"trainer's clock or channel is wrong)", any ? "," : "",
				report_fmt_count(n, sizeof(n), l.gpu_rejected), l.gpu_rejected == 1 ? "" : "s"),
				any = true;
		fputs("; blame around them may be low\n", f);
	}
	if (l.inferred)
		fprintf(f, "            %s switch-in%s inferred from runslices: a slice proved the thread "
			"on its CPU with no switch onto it in the trace (%s); it is counted on the CPU "
			"from the slice's start\n", report_fmt_count(n, sizeof(n), l.inferred),
			l.inferred == 1 ? "" : "s",
			l.ring[SB_EV_SWITCH_IN] ? "switch-ins dropped above" :
			"the kernel's sched_switch events skipped it");
	for (uint32_t i = 0; i < l.nprobes_missing; i++) {
		char line[600];

		fprintf(f, "            probe not attached: %s\n",
			clean(line, sizeof(line), l.probes_missing[i]));
	}
}

/* what the engine's own bounds left out (only on input far from ordinary) */
static void limits_lines(const struct engine *e, FILE *f)
{
	struct eng_limits l;
	char n[32], t[32];
	const char *lead = "Limits      ";

	engine_limits(e, &l);
	if (!eng_limits_any(&l))
		return;
	if (l.thread_records_lost || l.threads_forgotten) {
		fprintf(f, "%s%s records of threads not followed (the thread table was full); "
			"%s exited threads forgotten to make room\n", lead,
			report_fmt_count(n, sizeof(n), l.thread_records_lost),
			report_fmt_count(t, sizeof(t), l.threads_forgotten));
		lead = "            ";
	}
	if (l.strings_dropped) {
		fprintf(f, "%s%s names (kernel, NVTX) not kept: too many; their records are "
			"unnamed\n", lead, report_fmt_count(n, sizeof(n), l.strings_dropped));
		lead = "            ";
	}
	if (l.kernel_shapes_dropped) {
		fprintf(f, "%s%s kernels of shapes past the cap: no usual time, no gpu_slow\n", lead,
			report_fmt_count(n, sizeof(n), l.kernel_shapes_dropped));
		lead = "            ";
	}
	if (l.interferers_folded) {
		fprintf(f, "%s%s small interferers folded together (%s)\n", lead,
			report_fmt_count(n, sizeof(n), l.interferers_folded),
			fmt_ns(t, sizeof(t), l.interferers_other_ns));
		lead = "            ";
	}
	if (l.probes_dropped) {
		fprintf(f, "%s%s more probe-not-attached records not listed\n", lead,
			report_fmt_count(n, sizeof(n), l.probes_dropped));
		lead = "            ";
	}
	if (l.window_flushes)
		fprintf(f, "%s%s times the reorder window was swept early: a record far ahead "
			"in time stopped the clock\n", lead, report_fmt_count(n, sizeof(n), l.window_flushes));
}

/* parts per million as a percentage: 0.31% */
static const char *fmt_ppm(char *buf, size_t len, uint64_t ppm)
{
	snprintf(buf, len, ppm < 100000 ? "%.2f%%" : "%.1f%%", (double)ppm / 10000.0);
	return buf;
}

/* the tracer's own cost, and what the overhead guard did */
static void tracer_lines(const struct engine *e, const struct eng_summary *s, FILE *f)
{
	struct sb_costs c;
	struct eng_guard g;
	struct eng_capture cap;
	bool given = engine_costs(e, &c);
	char a[32], b[32], d[32], h[32], t[32];
	bool first = true;

	engine_guard(e, &g);
	engine_capture(e, &cap);
	if (s->ncomplete)
		fprintf(f, "Tracer      its own cost, estimated: %s per step at the median (%s of step "
			"time), P99 %s, max %s; %s in all\n",
			fmt_ns(a, sizeof(a), s->tracer_median_ns), fmt_ppm(b, sizeof(b), s->tracer_p50_ppm),
			fmt_ppm(d, sizeof(d), s->tracer_p99_ppm), fmt_ppm(h, sizeof(h), s->tracer_max_ppm),
			fmt_ns(t, sizeof(t), s->tracer_total_ns));
	else
		fprintf(f, "Tracer      its own cost, estimated: %s in all\n",
			fmt_ns(a, sizeof(a), s->tracer_total_ns));
	fputs("            (the target's events x per event:", f);
	for (int i = 0; i < SB_NCOST; i++) {
		if ((i == SB_COST_FAULT_EXT || i == SB_COST_SCHED_FOLD) && !c.ns[i])
			continue;
		fprintf(f, "%s %s %s", first ? "" : ",", sb_cost_name[i],
			fmt_ns(a, sizeof(a), c.ns[i]));
		first = false;
	}
	if (!given)
		fputs("; the benchmark's figures: the trace does not say)\n", f);
	else if (c.calibrated)
		fputs("; uprobe costs measured at capture start, the others the benchmark's)\n", f);
	else
		fputs("; the benchmark's figures)\n", f);
	if (!g.known)
		return;
	if (!g.limit_ppm) {
		fputs("Guard       off (--max-overhead 0): allocator probes on throughout; the tracer "
		      "line and each step's estimate say what they cost\n", f);
		return;
	}
	if (!g.changes) {
		fprintf(f, "Guard       allocator probes on throughout: their estimated cost stayed "
			"under the limit (%s of step time; highest %s)\n",
			fmt_ppm(a, sizeof(a), g.limit_ppm), fmt_ppm(b, sizeof(b), g.max_estimate_ppm));
		return;
	}
	fprintf(f, "Guard       allocator probes estimated at up to %s of step time (limit %s): "
		"duty-cycled from %s into the capture",
		fmt_ppm(a, sizeof(a), g.max_estimate_ppm), fmt_ppm(b, sizeof(b), g.limit_ppm),
		fmt_ns(d, sizeof(d), g.first_sampled_ns > cap.start_ns ?
				     g.first_sampled_ns - cap.start_ns : 0));
	if (g.mode == SB_GUARD_SAMPLED)
		fprintf(f, ", on %s of the time at the end", fmt_ppm(a, sizeof(a), g.duty_ppm));
	else
		fputs(", back on in full at the end", f);
	fprintf(f, "; %" PRIu64 " step%s had them sampled: their alloc blame is from a sample "
		"(%" PRIu64 " allocator calls counted, about %" PRIu64 " made)\n", s->sampled_steps,
		s->sampled_steps == 1 ? "" : "s", g.calls_seen, g.calls_estimated);
}

static int report_text_sym(const struct engine *e, struct symbols *sym, FILE *f);

#define STACK_TEXT_FRAMES 6

/* "iosys 12.3 ms, tid 7: fsync (libc.so.6) < save (train) < ..." */
/* the frames of st, innermost first, and a newline */
static void stack_frames(struct symbols *sym, const struct eng_stack *st, FILE *f)
{
	char fr[512];
	uint32_t n = st->nframes < STACK_TEXT_FRAMES ? st->nframes : STACK_TEXT_FRAMES;

	if (!st->nframes)
		fputs("(no user frames)", f);
	for (uint32_t i = 0; i < n; i++) {
		struct sym_frame sf;

		symbols_frame(sym, st, i, &sf);
		fprintf(f, "%s%s", i ? " < " : "", sym_frame_text(&sf, fr, sizeof(fr)));
	}
	if (st->nframes > n || st->truncated)
		fputs(" < ...", f);
	fputc('\n', f);
}

static void stack_text(struct symbols *sym, const struct eng_stack *st, FILE *f)
{
	char d[32];

	if (st->ev_type == SB_EV_FAULT && st->ts <= st->start_ns)
		/* an instant: the first fault of a run, whose time is in the blame */
		fprintf(f, "%s (the first of a run), tid %u: ", sym_event_name(st->ev_type),
			st->tid);
	else
		fprintf(f, "%s %s, tid %u: ", sym_event_name(st->ev_type),
			fmt_ns(d, sizeof(d), st->ts - st->start_ns), st->tid);
	stack_frames(sym, st, f);
}

/* does stacked event k of step st show where time of cause c went? */
static bool stack_of_cause(const struct eng_stack *k, int c, const struct eng_step *st)
{
	switch (c) {
	case ENG_PAGE_FAULT:
		return k->ev_type == SB_EV_FAULT;
	case ENG_IO_WAIT:
		return k->ev_type == SB_EV_IOSYS;
	case ENG_ALLOC:
		return k->ev_type == SB_EV_MMSYS || k->ev_type == SB_EV_ALLOC;
	case ENG_BLOCKED:
		/*
		 * a wait off the CPU; or a slow I/O call longer than all of the
		 * step's io_wait, which slept interruptibly for most of it (a read
		 * of a pipe or a socket: its wait is blocked on the writer, and its
		 * call's stack is the one the wait has)
		 */
		return k->ev_type == SB_EV_SWITCH_IN ||
		       (k->ev_type == SB_EV_IOSYS && k->ts - k->start_ns > st->cause_ns[ENG_IO_WAIT]);
	default:
		return false;
	}
}

#define WHERE_CANDIDATES 32

/*
 * under a tail line: where the step's critical thread was in its longest
 * stacked event of the kind its largest cause is made of (a fault storm's
 * fault, not a wait beside it), else in its longest stacked event
 */
static void step_stack_line(const struct engine *e, struct symbols *sym,
			    const struct eng_step *st, FILE *f)
{
	struct eng_stack cand[WHERE_CANDIDATES];
	struct sym_frame top;
	char fr[512];
	int n, ntop, big = -1, pick = 0;

	if (!sym)
		return;
	for (int c = 0; c < ENG_NCAUSE; c++)
		if (c != ENG_TRACER && st->cause_ns[c] && (big < 0 || st->cause_ns[c] > st->cause_ns[big]))
			big = c;
	n = sym_step_stacks(e, st, cand, WHERE_CANDIDATES);
	for (int i = 0; i < n; i++)
		if (big >= 0 && stack_of_cause(&cand[i], big, st)) {
			pick = i;
			break;
		}
	if (n > 0) {
		fputs("      where ", f);
		stack_text(sym, &cand[pick], f);
	}
	/* on CPU in its own code: where the samples of the step found it */
	if (st->cause_ns[ENG_HOST_COMPUTE] && (n = sym_step_samples(e, sym, st, &top, &ntop)) > 0)
		fprintf(f, "      on CPU  %d of %d samples of tid %u in %s\n", ntop, n, st->crit_tid,
			sym_frame_text(&top, fr, sizeof(fr)));
}

void report_step_stacks(const struct engine *e, struct symbols *sym, const struct eng_step *st,
			FILE *f)
{
	step_stack_line(e, sym, st, f);
}

/* for each kind of event, the stack with most event time over the capture */
static void stacks_lines(const struct engine *e, struct symbols *sym, FILE *f)
{
	struct sym_hot h[1];
	char t[32];

	if (!sym)
		return;
	fputs("Stacks      where the target's slow calls, faults and long waits were: the stack "
	      "with most time of each (--format json lists more):\n", f);
	for (int k = 0; k < SYM_NKINDS; k++)
	for (int i = 0, n = sym_hot_stacks(e, sym_kinds[k], h, 1); i < n; i++) {
		if (!h[i].total_ns) {
			/* instants: the first fault of each run; the runs' time is in the blame */
			fprintf(f, "  %" PRIu64 " x %s (where a run of them began), tid %u: ",
				h[i].count, sym_event_name(h[i].s.ev_type), h[i].s.tid);
			stack_frames(sym, &h[i].s, f);
			continue;
		}
		fprintf(f, "  %" PRIu64 " x, %s in all, longest ", h[i].count,
			fmt_ns(t, sizeof(t), h[i].total_ns));
		stack_text(sym, &h[i].s, f);
	}
}

int report_text(const struct engine *e, FILE *f)
{
	struct symbols *sym = sym_any(e) ? symbols_new(e) : NULL;
	int ret = report_text_sym(e, sym, f);

	symbols_free(sym);
	return ret;
}

/* "   (also named X, Y and 2 more)": a group's other names, "" if none */
static void group_names(char *buf, size_t len, const struct eng_interferer_group *g)
{
	size_t o;

	buf[0] = 0;
	if (!g->nnames)
		return;
	o = (size_t)snprintf(buf, len, "   (also named ");
	for (uint32_t k = 0; k < g->nnames && k < ENG_GROUP_NAMES && o < len; k++) {
		char c[64];

		o += (size_t)snprintf(buf + o, len - o, "%s%s", k ? ", " : "",
				      clean(c, sizeof(c), g->names[k]));
	}
	if (g->nnames > ENG_GROUP_NAMES && o < len)
		o += (size_t)snprintf(buf + o, len - o, " and %" PRIu32 " more",
				      g->nnames - ENG_GROUP_NAMES);
	if (o < len)
		snprintf(buf + o, len - o, ")");
}

static int report_text_sym(const struct engine *e, struct symbols *sym, FILE *f)
{
	struct eng_summary s;
	struct eng_target t;
	struct eng_capture c;
	struct eng_fault_model fm;
	struct eng_interferer_group itf[MAX_INTERFERERS];
	char a[32], b[32], d[32], g[32], h[32], nm[64];
	uint64_t nsteps;
	int ni;

	engine_summarise(e, &s);
	engine_target(e, &t);
	cur_engine = e;
	engine_capture(e, &c);
	engine_fault_model(e, &fm);
	nsteps = engine_nsteps(e);

	fprintf(f, "stepblame report: %s[%" PRIu32 "]", clean(nm, sizeof(nm), eng_target_name(&t)), t.pid);
	if (t.comm_end[0])
		fprintf(f, " (%s when attached)", clean(nm, sizeof(nm), t.comm));
	if (c.end_ns > c.start_ns)
		fprintf(f, ", %s captured", fmt_ns(a, sizeof(a), c.end_ns - c.start_ns));
	fprintf(f, ", %s steps", report_fmt_count(b, sizeof(b), nsteps));
	if (c.step_source)
		fprintf(f, " marked by %s", eng_step_src_name(c.step_source));
	if (c.mark_pid && c.mark_pid != t.pid) {
		char who[256];

		/* a launcher's or a script's child marks them */
		if (!engine_process_name(e, c.mark_pid, who, sizeof(who)))
			snprintf(who, sizeof(who), "process %" PRIu32, c.mark_pid);
		fprintf(f, " in %s (pid %" PRIu32 ")", clean(nm, sizeof(nm), who), c.mark_pid);
	}
	fputc('\n', f);
	if (c.marks_ignored) {
		fprintf(f, "Marks       %s marks of %s%" PRIu32 " other process%s (pid",
			report_fmt_count(a, sizeof(a), c.marks_ignored),
			c.marks_other_more ? "more than " : "", c.nmarks_other,
			c.nmarks_other == 1 && !c.marks_other_more ? "" : "es");
		for (uint32_t i = 0; i < c.nmarks_other; i++)
			fprintf(f, "%s %" PRIu32, i ? "," : "", c.marks_other[i]);
		fprintf(f, "%s) left out: the steps are those of one process "
			"(pid %" PRIu32 ": the target if it marks, else the first that marked). `stepblame report FILE` of a recorded trace reports each "
			"rank (schemas/report.md, \"Ranks\")\n", c.marks_other_more ? ", ..." : "",
			c.mark_pid);
	}
	if (c.mark_restarts)
		fprintf(f, "Marks       the marking process exited and another began to mark %" PRIu32
			" time%s (a restart under the launcher): the steps go on with its marks (pid %"
			PRIu32 " last), the step each cut short incomplete\n", c.mark_restarts,
			c.mark_restarts == 1 ? "" : "s", c.mark_pid);
	if (c.numbers_same * 10 > nsteps && nsteps >= 10)
		fprintf(f, "Marks       %s of %s steps have the number of the step before: each "
			"iteration is marked twice (stepblame.step and mark_optimizer_steps both, or "
			"two threads)? Then a step is half an iteration: mark in one place\n",
			report_fmt_count(a, sizeof(a), c.numbers_same),
			report_fmt_count(b, sizeof(b), nsteps));
	else if (c.numbers_back)
		fprintf(f, "Marks       the step numbers went back %s time%s (numbers that restart "
			"each epoch?): steps are also named by their index in the trace\n",
			report_fmt_count(a, sizeof(a), c.numbers_back), c.numbers_back == 1 ? "" : "s");
	if (c.numbers_skips)
		fprintf(f, "Marks       the step numbers skipped forward %s time%s, %s number%s never "
			"marked (marks lost: a program exec'd and not yet probed?): the step before "
			"each holds the unmarked steps and is left out as incomplete\n",
			report_fmt_count(a, sizeof(a), c.numbers_skips), c.numbers_skips == 1 ? "" : "s",
			report_fmt_count(b, sizeof(b), c.numbers_missing),
			c.numbers_missing == 1 ? "" : "s");
	if (c.truncated)
		fprintf(f, "Capture     CUT SHORT: %s; the report covers what was recorded\n",
			c.truncated);
	else if (!c.complete)
		fputs("Capture     CUT SHORT: no trailer; the report covers what was recorded\n", f);
	else
		fprintf(f, "Capture     complete (ended by %s)\n", c.end_reason);
	if (c.gpu_cut_steps)
		gpu_gap_line(f, "stop", c.end_ns > c.gpu_reached_ns ? c.end_ns - c.gpu_reached_ns : 0,
			     "before the last record (they come late, in batches)", c.gpu_cut_steps,
			     "ending after them");
	if (c.gpu_before_steps)
		gpu_gap_line(f, "begin", c.gpu_from_ns > c.start_ns ? c.gpu_from_ns - c.start_ns : 0,
			     "after the capture (the GPU channel was read from then on)",
			     c.gpu_before_steps, "that ended before them");
	if (c.gpu_timeline)
		fputs("GPU         timeline present: blame covers GPU-idle time, on the thread that "
		      "issued the operation ending each idle gap\n", f);
	else
		fputs("GPU         no timeline (host-only): blame covers whole steps, on the thread "
		      "that marks them\n", f);
	if (!nsteps) {
		fputs("Steps       none found: mark steps with the stepblame:step USDT probe, "
		      "--step-uprobe LIB:SYM when recording, or --step-nvtx/--step-kernel REGEX here\n",
		      f);
		stacks_lines(e, sym, f);
		loss_line(e, f);
		limits_lines(e, f);
		return ferror(f) ? -EIO : 0;
	}
	if (!s.ncomplete) {
		fputs("Step time   no complete step (the capture ended inside the first one)\n", f);
	} else {
		fprintf(f, "Step time   P50 %s   P90 %s   P99 %s   P99.9 %s   max %s   (%s complete)\n",
			fmt_ns(a, sizeof(a), s.p50), fmt_ns(b, sizeof(b), s.p90),
			fmt_ns(d, sizeof(d), s.p99), fmt_ns(g, sizeof(g), s.p999),
			fmt_ns(h, sizeof(h), s.max), report_fmt_count(nm, sizeof(nm), s.ncomplete));
		fprintf(f, "            P99/P50 = %.2f", s.p99_over_p50);
		if (s.p99_over_p50 >= 1.5)
			fputs(": a jitter source exists (>= 1.5); the tail steps below show where it "
			      "comes from\n", f);
		else
			fputs(" (under 1.5: no strong jitter source)\n", f);
	}
	if (s.windowed)
		fprintf(f, "Window      percentiles, medians and totals over all %s steps (within "
			"%.1f%%); the detail below covers the last %s (from step index %" PRIu64 ")\n",
			report_fmt_count(a, sizeof(a), nsteps), 100 * s.pct_error,
			report_fmt_count(b, sizeof(b), nsteps - s.first_kept), s.first_kept);
	if (s.gpu_busy_share >= 0)
		fprintf(f, "GPU busy    %.1f%% of step time\n", 100 * s.gpu_busy_share);

	if (s.ntail) {
		struct report_episode *ep;
		uint64_t k = report_episodes(e, &s, &ep), single = 0, hidden = 0;

		fprintf(f, "Tail        %s%s step%s over median + 3·MAD (%s)%s, longest first%s%s:\n",
			s.windowed ? "about " : "", report_fmt_count(a, sizeof(a), s.ntail),
			s.ntail == 1 ? "" : "s", fmt_ns(b, sizeof(b), s.tail_threshold_ns),
			s.cause_total[ENG_TRACER] ? " less the tracer's own time" : "",
			s.windowed ? " among the steps kept" : "",
			s.ntail > 1 ? "; consecutive steps with the same top cause and culprit "
				      "as one episode" : "");
		/* every episode; single steps up to MAX_TAIL_LINES */
		for (uint64_t i = 0; i < k; i++) {
			if (ep[i].nsteps == 1 && single++ >= MAX_TAIL_LINES) {
				hidden++;
				continue;
			}
			fputs("  ", f);
			if (ep[i].nsteps == 1)
				report_step_line(e, ep[i].first, &s, NULL, f);
			else
				report_episode_line(e, &ep[i], f);
			step_stack_line(e, sym, ep[i].longest, f);
		}
		if (hidden)
			fprintf(f, "  ... and %" PRIu64 " more single steps (--format json lists %s)\n",
				hidden, s.windowed ? "those of the steps kept" : "them all");
		free(ep);
	} else if (s.ncomplete) {
		fprintf(f, "Tail        no step over median + 3·MAD (%s)%s\n",
			fmt_ns(b, sizeof(b), s.tail_threshold_ns),
			s.cause_total[ENG_TRACER] ? " less the tracer's own time" : "");
	}

	{
		uint64_t total = 0;

		for (int i = 0; i < ENG_NCAUSE; i++)
			total += s.cause_total[i];
		fprintf(f, "Causes      %s, over all steps (median step in brackets):\n",
			c.gpu_timeline ? "GPU idle time and slow kernels" : "step time");
		int order[ENG_NCAUSE], n = 0;

		for (int i = 0; i < ENG_NCAUSE; i++)
			if (s.cause_total[i])
				order[n++] = i;
		/* largest first, ties in vocabulary order */
		for (int i = 1; i < n; i++)
			for (int k = i; k > 0 && s.cause_total[order[k - 1]] < s.cause_total[order[k]]; k--) {
				int x = order[k];

				order[k] = order[k - 1];
				order[k - 1] = x;
			}
		for (int i = 0; i < n; i++)
			fprintf(f, "  %-13s %10s  %5.1f%%   (%s)\n", eng_cause_name(order[i]),
				fmt_ns(a, sizeof(a), s.cause_total[order[i]]),
				total ? 100.0 * (double)s.cause_total[order[i]] / (double)total : 0.0,
				fmt_ns(b, sizeof(b), s.cause_median[order[i]]));
	}

	ni = engine_interferer_groups(e, itf, MAX_INTERFERERS);
	if (ni) {
		fputs("Interferers time taken from the critical threads while the GPU idled:\n", f);
		for (int i = 0; i < ni; i++) {
			char pn[160], pc[160], role[176] = "", also[128] = "";

			report_group_name(nm, sizeof(nm), &itf[i]);
			/* a followed process: what it is (a DataLoader worker takes the CPU it feeds) */
			if (itf[i].processes == 1 && !itf[i].own && !itf[i].tracer &&
			    engine_process_name(e, itf[i].pid, pn, sizeof(pn)))
				snprintf(role, sizeof(role), "   (%s)", clean(pc, sizeof(pc), pn));
			group_names(also, sizeof(also), &itf[i]);
			fprintf(f, "  %-28s %10s%s%s%s\n", nm, fmt_ns(a, sizeof(a), itf[i].ns),
				itf[i].own ? "   (a thread of the trainer itself)" :
				itf[i].tracer ? "   (stepblame's own agent)" : role, also,
				itf[i].realtime ? "   (real-time: runs before any normal task)" : "");
		}
	} else {
		fputs("Interferers none: no other task ran while a critical thread waited\n", f);
	}
	irq_totals_text(f, e);

	fputs(s.windowed ? "GPU dips    (steps kept) " : "GPU dips    ", f);
	if (s.dip == ENG_DIP_UNKNOWN)
		fputs("unknown without a GPU timeline\n", f);
	else if (s.dip == ENG_DIP_PERIODIC)
		fprintf(f, "periodic: every %" PRIu64 " steps (%" PRIu64 " dips; data loading or "
			"checkpoints?)\n", s.dip_period, s.ndips);
	else if (s.dip == ENG_DIP_LOW)
		fprintf(f, "uniformly low: the median step keeps the GPU %.0f%% busy (host-bound or "
			"pipeline bubbles)\n", 100 * s.dip_busy_median);
	else if (s.dip == ENG_DIP_SPORADIC)
		fprintf(f, "sporadic: %" PRIu64 " of %" PRIu64 " steps (interference, stragglers)\n",
			s.ndips, s.windowed ? nsteps - s.first_kept : s.ncomplete);
	else
		fprintf(f, "%s: GPU idle time is steady from step to step\n", dip_name(s.dip));
	{
		struct audit au;

		if (report_audit(e, &s, &au) == 0)
			report_audit_text(&au, f);
	}

	stacks_lines(e, sym, f);
	tracer_lines(e, &s, f);
	fprintf(f, "Page faults time estimated (no fault-handler exit probe on this kernel): a fault "
		"that blocked is charged its sleep (%s did); one that did not, %s each (%s)\n",
		report_fmt_count(a, sizeof(a), fm.blocked), fmt_ns(b, sizeof(b), fm.per_fault_ns),
		fm.method == ENG_FAULT_CALIBRATED ? "calibrated on back-to-back faults in this trace" :
		fm.method == ENG_FAULT_GIVEN ? "as given" : "the default measured on our machines");
	loss_line(e, f);
	limits_lines(e, f);
	return ferror(f) ? -EIO : 0;
}
