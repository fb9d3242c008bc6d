// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The capture loop. The hot path is the ring-buffer callback: it hands each
 * record to the sink as it lies in the ring (no copy, no allocation). The
 * kernel wakes us only past a fill threshold; the loop also polls on a tick,
 * which is when the GPU channel is drained, the collector's heartbeat is
 * refreshed, and counters are read.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "format/channel.h"
#include "capture/collect.h"
#include "capture/inject.h"
#include "capture/guard.h"
#include "format/costs.h"
#include "capture/stackmaps.h"
#include "capture/target.h"
#include "capture/unwind.h"
#include "base/util.h"

volatile sig_atomic_t collect_stop;

static void on_signal(int sig)
{
	(void)sig;
	collect_stop = 1;
}

void collect_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* the other marking processes whose GPU channels are read, at most */
#define RANK_CHANS_MAX 63

struct capture {
	const struct collect_opts *o;
	sink_fn sink;
	void *ctx;
	int sink_err;
	uint64_t records;
	struct probes *probes;
	struct ring_buffer *rb;
	struct guard *guard;         /* NULL until the probes are attached */
	uint64_t opened_ns;          /* when the probes began to be opened */
	uint32_t guard_records;      /* guard records written */
	struct sb_costs costs;       /* what the costs record said */
	struct sbc_reader *chan;
	pid_t chan_pid;              /* whose it is */
	uint64_t last_drops_total;
	uint64_t copies_skipped;     /* stack copies not taken, the ring backed up (put_drops) */
	int probes_written;          /* probe statuses already in the trace */
	bool chan_inert;             /* the collector said it cannot work: stop looking */
	size_t chan_maps_hint;       /* the size of the target's maps when try_channel last read them */
	bool lib_watched;            /* the followed children are checked for the allocator's library */
	bool target_stopped;         /* the capture ended because the kernel stopped recording the
	                                target (its credentials changed) */
	bool chan_broken;            /* its producer cut the channel file short under us */
	bool inject_later;           /* no libcuda at the start: load the collector once it maps one */
	bool inject_now;             /* it does now (seen by try_channel) */
	pid_t mark_pid;              /* the first process whose step mark came (the report's steps) */
	bool mark_ids_put;           /* that process's record again: an exec that kept its comm said nothing */
	unsigned chan_tries;         /* try_channel calls */
	bool chan_mark_tried;        /* the marking child's channel looked for as soon as it marked */
	/*
	 * Other processes that mark steps (ranks a launcher started): each one's
	 * GPU channel is read too, its records carrying its pid, so that a report
	 * gives each rank its own GPU timeline (schemas/report.md, "Ranks")
	 */
	struct rank_chan {
		pid_t pid;
		struct sbc_reader *chan;
		uint64_t tried_ns;   /* the last look for its channel */
		uint8_t tries;
		bool done;           /* found, inert, or looked for long enough */
		bool broken;
	} ranks[RANK_CHANS_MAX];
	int nranks;
	uint64_t ranks_looked_ns;    /* the last look for their channel files */
	int children_followed;       /* descendants found at attach and followed */
	bool kids_full_said;         /* the note that the allocator probes' child table is full */
	struct stackmaps *maps;      /* the mappings of the followed processes (fault regions, stacks) */
	struct unwinder *unw;        /* walks the probes' stack copies (capture/unwind.h) */
	uid_t target_uid;
	uint32_t read_n;             /* records taken by the ring read in progress (read_ring) */
	uint64_t read_t0;            /* when it took its first */
	uint64_t drained_ns;         /* a read that began then left the ring empty: older records are in */
	uint64_t ring_ts;            /* the newest record taken from the ring: those still in it are
	                                newer (it is first in, first out; CPUs differ by microseconds) */
	uint64_t ticked_ns;          /* the time the last tick advanced the sink to */
	bool exec_mapped;            /* the target mapped code since the last look at its mappings */
	uint32_t *exited;            /* threads whose exit was taken since the last allocator reading */
	size_t nexited, exited_cap;
	/* one buffer for every record the agent builds itself */
	union {
		struct sb_hdr h;
		char bytes[SBT_MAX_RECORD + 8];
	} buf;
};

static int put(struct capture *c, const struct sb_hdr *rec)
{
	int err;

	if (c->sink_err)
		return c->sink_err;
	/* the guard counts the slow allocator calls as they pass (the fast ones in the kernel) */
	if (rec->type == SB_EV_ALLOC && c->guard)
		guard_slow_call(c->guard, rec->tid);
	if (c->guard)
		guard_record(c->guard, rec);
	if (c->maps && (rec->type == SB_EV_STACK || rec->type == SB_EV_MMSYS ||
			rec->type == SB_EV_FAULT || rec->type == SB_EV_FAULT_RUN ||
			rec->type == SB_EV_THREAD_EXIT))
		stackmaps_saw(c->maps, rec);
	err = c->sink(c->ctx, rec);
	if (err)
		c->sink_err = err;
	else
		c->records++;
	return err;
}

static void alloc_kid(struct capture *c, pid_t pid);

/* its allocator state goes at the next reading (alloc_readings), once its last totals are out */
static void thread_exited(struct capture *c, uint32_t tid)
{
	if (c->nexited == c->exited_cap) {
		size_t cap = c->exited_cap ? 2 * c->exited_cap : 64;
		uint32_t *t = realloc(c->exited, cap * sizeof(*t));

		if (!t)
			return; /* its entries stay: the kernel maps count a full map as a drop */
		c->exited = t;
		c->exited_cap = cap;
	}
	c->exited[c->nexited++] = tid;
}

static int put_text_at(struct capture *c, uint16_t type, uint32_t id, uint32_t pid, uint32_t tid,
		       const char *text, size_t len, uint64_t ts)
{
	sb_text_build(c->buf.bytes, sizeof(c->buf.bytes), type, id, ts, pid, tid, text, len);
	return put(c, &c->buf.h);
}

static int put_text(struct capture *c, uint16_t type, uint32_t id, uint32_t pid, uint32_t tid,
		    const char *text, size_t len)
{
	return put_text_at(c, type, id, pid, tid, text, len, mono_ns());
}

/*
 * A followed descendant's main thread: what /proc says of it (its command
 * line: a multiprocessing child says so there), as a thread record.
 */
static int put_process(struct capture *c, pid_t pid, pid_t ppid, const char *comm_seen)
{
	static char text[8192];
	/*
	 * its job and rank ids: the marking child's are the capture's where a
	 * launcher's own environment has none, and a child that a launcher gave a
	 * rank is named by it
	 */
	size_t n = process_facts(pid, ppid, comm_seen, true, text, sizeof(text));

	return put_text(c, SB_REC_THREAD, 0, pid, pid, text, n);
}

/* the parent process of pid, from /proc; 0 if gone */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512], *p;
	int ppid = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_small_file(path, buf, sizeof(buf)) < 0)
		return 0;
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1)
		return 0;
	return ppid;
}

static void put_map_text(void *ctx, uint16_t type, uint32_t pid, const char *text, size_t len)
{
	struct capture *c = ctx;

	put_text(c, type, 0, pid, 0, text, len);
}

static bool late_inject(const struct collect_opts *o, pid_t pid, char *msg, size_t len);

/* another process marked a step: a rank, whose channel the next tick looks for */
static void rank_seen(struct capture *c, pid_t pid)
{
	for (int i = 0; i < c->nranks; i++)
		if (c->ranks[i].pid == pid)
			return;
	if (c->nranks < RANK_CHANS_MAX)
		c->ranks[c->nranks++] = (struct rank_chan){ .pid = pid };
}

static int take_record(struct capture *c, void *data, size_t size)
{
	const struct sb_hdr *h = data;

	if (size < sizeof(*h) || h->size > size)
		return 0;
	/* a trip too long to fold, in one ring record: its parts into the trace (bpf/events.h) */
	/* a stack with a copy of the stack's top: walked here, a plain stack record on (bpf/events.h) */
	if (h->type == SB_RING_STACK) {
		struct sb_stack st;

		const struct sb_stack_copy *sc = data;

		if (size < sizeof(*sc) || h->size < sizeof(*sc))
			return 0;
		/* taken at a switch-out into sleep: kept until the sleep turns out long */
		if (sc->st.ev_type == SB_EV_SWITCH_OUT) {
			unwinder_hold(c->unw, sc);
			return 0;
		}
		unwinder_stack(c->unw, sc, &st);
		return take_record(c, &st, sizeof(st));
	}
	/* a long sleep's stack whose start has a copy held: that copy's walk */
	if (h->type == SB_EV_STACK && size >= sizeof(struct sb_stack) &&
	    h->size >= sizeof(struct sb_stack)) {
		struct sb_stack st;

		if (unwinder_off_cpu(c->unw, data, &st))
			return take_record(c, &st, sizeof(st));
	}
	if (h->type == SB_RING_TRIP) {
		struct sb_trip *t = data;
		int err;

		if (size < sizeof(*t))
			return 0;
		if (t->out.h.type == SB_EV_SWITCH_OUT &&
		    (err = take_record(c, &t->out, sizeof(t->out))))
			return err;
		if (t->wk.h.type == SB_EV_WAKEUP && (err = take_record(c, &t->wk, sizeof(t->wk))))
			return err;
		return t->in.h.type == SB_EV_SWITCH_IN ? take_record(c, &t->in, sizeof(t->in)) : 0;
	}
	if (put(c, h))
		return -ECANCELED;
	if (h->ts > c->ring_ts)
		c->ring_ts = h->ts;
	if (h->type == SB_EV_STEP && !c->mark_pid)
		c->mark_pid = (pid_t)h->pid;
	else if (h->type == SB_EV_STEP && h->pid != (uint32_t)c->mark_pid)
		rank_seen(c, (pid_t)h->pid);
	/* a descendant forked, or its main thread renamed (an exec): its command line */
	if (h->type == SB_EV_THREAD_NEW && h->size >= sizeof(struct sb_thread)) {
		const struct sb_thread *t = data;

		if (t->parent_pid && t->parent_pid != h->pid && h->tid == h->pid) {
			/* its mappings are read at the next second's tick */
			stackmaps_follow(c->maps, (pid_t)h->pid, false);
			alloc_kid(c, (pid_t)h->pid);
			return put_process(c, (pid_t)h->pid, (pid_t)t->parent_pid, t->comm) ?
			       -ECANCELED : 0;
		}
	} else if (h->type == SB_EV_MMSYS && h->pid == (uint32_t)c->o->probe.pid &&
		   h->size >= sizeof(struct sb_mmsys)) {
		const struct sb_mmsys *m = data;

		/* a library loaded (dlopen): its step marks want probes before its first call */
		if ((m->call == SB_SYS_MMAP || m->call == SB_SYS_MPROTECT) && (m->arg & PROT_EXEC) &&
		    m->ret >= 0)
			c->exec_mapped = true;
	} else if (h->type == SB_EV_THREAD_EXIT) {
		thread_exited(c, h->tid);
		/* a followed child's main thread: its process is gone, and its allocator links */
		if (h->tid == h->pid && h->pid != (uint32_t)c->o->probe.pid) {
			probes_alloc_kid_gone(c->probes, (pid_t)h->pid);
			unwinder_forget(c->unw, (pid_t)h->pid);
		}
	} else if (h->type == SB_EV_RENAME && h->tid == h->pid && h->size >= sizeof(struct sb_rename)) {
		const struct sb_rename *r = data;
		pid_t ppid;

		/* an exec (the target's own too): new mappings, read at the next tick */
		stackmaps_exec(c->maps, (pid_t)h->pid);
		unwinder_forget(c->unw, (pid_t)h->pid);
		if (h->pid == (uint32_t)c->o->probe.pid)
			return 0;
		ppid = parent_of((pid_t)h->pid);
		if (ppid)
			return put_process(c, (pid_t)h->pid, ppid, r->newcomm) ? -ECANCELED : 0;
	}
	return 0;
}

/* how long one read of the ring may take records before it hands control back */
#define READ_BUDGET_NS 50000000ull

static int ring_cb(void *ctx, void *data, size_t size)
{
	struct capture *c = ctx;
	int err = take_record(c, data, size);

	if (err)
		return err;
	/* the record is consumed (libbpf moved past it before the call): a stop loses nothing */
	if (c->read_n++ == 0)
		c->read_t0 = mono_ns();
	else if (!(c->read_n & 255) && mono_ns() - c->read_t0 >= READ_BUDGET_NS)
		return -EAGAIN;
	return 0;
}

/*
 * One read of the ring (timeout_ms < 0: what is there, no wait), bounded:
 * libbpf's loop stays inside a ring for as long as it finds records, and
 * probes that write faster than the agent takes them would keep it there for
 * good (the capture's duration, its tick and a signal unheeded). After
 * READ_BUDGET_NS of records ring_cb stops it: -EAGAIN, more to read, and the
 * loop reads on at once (docs/ARCHITECTURE.md, "Data flow").
 */
static int read_ring(struct capture *c, int timeout_ms)
{
	uint64_t t = mono_ns();
	int rc;

	c->read_n = 0;
	unwinder_slice(c->unw);
	rc = timeout_ms < 0 ? ring_buffer__consume(c->rb) : ring_buffer__poll(c->rb, timeout_ms);
	if (rc != -EAGAIN)
		c->drained_ns = t;
	return rc;
}

/*
 * How far the capture is complete: every kernel record before it has reached
 * the sink. The ring was read empty from drained_ns on; an agent behind on a
 * ring that never empties has still taken every record up to ring_ts.
 */
static uint64_t ring_watermark(const struct capture *c)
{
	return c->drained_ns > c->ring_ts ? c->drained_ns : c->ring_ts;
}

static int chan_cb(void *ctx, const struct sb_hdr *rec)
{
	return put(ctx, rec) ? -ECANCELED : 0;
}

static void alloc_stats_cb(void *ctx, uint32_t pid, uint32_t tid, const uint64_t calls[SB_FN_MAX],
			   const uint64_t ns[SB_FN_MAX])
{
	struct capture *c = ctx;
	struct sb_alloc_stats *s = (struct sb_alloc_stats *)c->buf.bytes;

	memset(s, 0, sizeof(*s));
	s->h.type = SB_REC_ALLOC_STATS;
	s->h.size = sizeof(*s);
	s->h.pid = pid;
	s->h.tid = tid;
	s->h.ts = mono_ns();
	memcpy(s->calls, calls, sizeof(s->calls));
	memcpy(s->ns, ns, sizeof(s->ns));
	put(c, &s->h);
}

static void forget_cb(void *ctx, uint32_t tid, uint64_t calls)
{
	struct capture *c = ctx;

	if (c->guard)
		guard_forget(c->guard, tid, calls);
}

/*
 * Every thread's allocator totals into the trace (alloc_stats), the idle
 * bursts flushed; then the state of the threads that exited since the last
 * reading, whose totals just went out for the last time, removed from the
 * kernel's maps and the guard (schemas/trace.md, "alloc_stats").
 */
static void alloc_readings(struct capture *c)
{
	probes_alloc_stats(c->probes, alloc_stats_cb, c);
	probes_alloc_forget(c->probes, c->exited, c->nexited, forget_cb, c);
	c->nexited = 0;
}

static uint64_t put_drops(struct capture *c)
{
	struct sb_drops *d = (struct sb_drops *)c->buf.bytes;
	uint64_t total = 0, ring = 0, strings = 0, source = 0;

	memset(d, 0, sizeof(*d));
	d->h.type = SB_REC_DROPS;
	d->h.size = sizeof(*d);
	d->h.pid = c->o->probe.pid;
	/* a reader's window moves with it: no further than the ring is read (schemas/trace.md) */
	d->h.ts = ring_watermark(c);
	if (!d->h.ts)
		d->h.ts = mono_ns();
	probes_drops(c->probes, d->ring, &d->wait_overflow);
	/* not a loss: stack copies the probes did not take while the ring was backed up */
	c->copies_skipped = d->ring[SB_RING_STACK];
	d->ring[SB_RING_STACK] = 0;
	if (c->chan)
		sbc_counters(c->chan, &ring, &strings, &source);
	for (int i = 0; i < c->nranks; i++) {
		uint64_t r = 0, st = 0, so = 0;

		if (c->ranks[i].chan)
			sbc_counters(c->ranks[i].chan, &r, &st, &so);
		ring += r;
		strings += st;
		source += so;
	}
	d->gpu_channel = ring + strings;
	d->gpu_source = source;
	total = sb_drops_total(d);
	put(c, &d->h);
	c->last_drops_total = total;
	return total;
}

static int put_thread(void *ctx, pid_t tid)
{
	struct capture *c = ctx;
	char comm[64];

	thread_comm(c->o->probe.pid, tid, comm, sizeof(comm));
	put_text(c, SB_REC_THREAD, 0, c->o->probe.pid, tid, comm, strlen(comm));
	return 0;
}

struct put_child {
	struct capture *c;
	pid_t pid;
};

/* the threads of a descendant other than its main one: their comm, like the target's */
static int put_child_thread(void *ctx, pid_t tid)
{
	struct put_child *k = ctx;
	char comm[64], esc[4 * sizeof(comm)];

	if (tid == k->pid)
		return 0;
	thread_comm(k->pid, tid, comm, sizeof(comm));
	sb_escape(esc, sizeof(esc), comm, sizeof(comm));
	put_text(k->c, SB_REC_THREAD, 0, k->pid, tid, esc, strlen(esc));
	return 0;
}

static void note(struct capture *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* a followed child process: the allocator probes in it too (probes_alloc_kid), bounded */
static void alloc_kid(struct capture *c, pid_t pid)
{
	if (probes_alloc_kid(c->probes, pid) == -ENOSPC && !c->kids_full_said) {
		c->kids_full_said = true;
		note(c, "allocator probes: %d child processes have them; process %d and any "
		     "later ones have none while that many live", PROBES_KIDS_MAX, (int)pid);
	}
}

/* a descendant found at attach: followed unless its credentials differ (then not its children) */
static int follow_existing(void *ctx, pid_t pid, pid_t ppid)
{
	struct capture *c = ctx;
	struct put_child k = { c, pid };
	int err = probes_follow(c->probes, pid, ppid);

	if (err) {
		if (err == -EPERM)
			note(c, "process %d (a descendant of the target) runs with other credentials: "
			     "not followed, nor its children", (int)pid);
		else if (err != -ENOENT)
			note(c, "process %d (a descendant of the target) not followed: %s", (int)pid,
			     strerror(-err));
		return 1;
	}
	c->children_followed++;
	stackmaps_follow(c->maps, pid, true);
	alloc_kid(c, pid);
	put_process(c, pid, ppid, NULL);
	target_threads(pid, put_child_thread, &k);
	return 0;
}

static void put_preamble(struct capture *c)
{
	static char text[8192];
	uid_t uid;
	size_t n;
	int ncpus = libbpf_num_possible_cpus();

	n = host_facts(text, sizeof(text));
	put_text(c, SB_REC_HOST, 0, 0, 0, text, n);
	for (int cpu = 0; cpu < ncpus; cpu++) {
		struct sb_cpu r = {
			.h = { .type = SB_REC_CPU, .size = sizeof(r), .cpu = cpu, .ts = mono_ns() },
			.node = cpu_node(cpu),
			.online = cpu_online(cpu),
		};
		put(c, &r.h);
	}
	n = target_facts(c->o->probe.pid, text, sizeof(text), &uid);
	if (n + 32 < sizeof(text))
		n += snprintf(text + n, sizeof(text) - n, "ppid=%d\nfollow_children=%d\n",
			      (int)parent_of(c->o->probe.pid), !c->o->probe.no_children);
	c->target_uid = uid;
	put_text(c, SB_REC_TARGET, 0, c->o->probe.pid, c->o->probe.pid, text, n);
	target_threads(c->o->probe.pid, put_thread, c);
	if (!c->o->probe.no_children)
		target_descendants(c->o->probe.pid, follow_existing, c);
	if (c->maps)
		stackmaps_scan(c->maps, c->probes, mono_ns(), put_map_text, c);
}

/* the statuses not written yet: at start, and those of libraries attached later */
static void put_probe_status(struct capture *c)
{
	const struct probe_status *st;
	int n = probes_status(c->probes, &st);
	char line[256];

	for (int i = c->probes_written; i < n; i++) {
		int len = snprintf(line, sizeof(line), "%s %s", st[i].name, st[i].detail);

		put_text(c, SB_REC_PROBE, st[i].attached, c->o->probe.pid, 0, line,
			 len < (int)sizeof(line) ? (size_t)len : sizeof(line) - 1);
	}
	c->probes_written = n;
}

static void note(struct capture *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(struct capture *c, const char *fmt, ...)
{
	char raw[512], line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(raw))
		n = sizeof(raw) - 1;
	/*
	 * Notes carry names the target chose (its comm, its files' paths, what
	 * its loader said): a control character or a C1 escape among them
	 * reaches the user's terminal as '?' (SECURITY.md, "Output to the terminal")
	 */
	sb_printable(line, sizeof(line), raw, (size_t)(n > 0 ? n : 0));
	n = (int)strlen(line);
	put_text(c, SB_REC_NOTE, 0, c->o->probe.pid, 0, line, n);
	if (!c->o->quiet)
		fprintf(stderr, "stepblame: %s\n", line);
}

/* stack copies left to their frame-pointer chain because walking them took too long; files not walked */
static void put_unwind_note(struct capture *c)
{
	struct unwind_stats st;

	unwinder_stats(c->unw, &st);
	if (c->o->probe.verbose && st.copies)
		fprintf(stderr, "stepblame: user stacks: %llu stack copies walked, %llu further than "
			"the frame-pointer chain, in %.1f ms of the agent's time; %llu resets; "
			"sessions built again %llu times, kept %llu times\n",
			(unsigned long long)st.copies, (unsigned long long)st.walked,
			(double)st.walk_ns / 1e6, (unsigned long long)st.resets,
			(unsigned long long)st.rebuilds, (unsigned long long)st.rebuilds_kept);
	if (st.over_budget)
		note(c, "user stacks: %llu of %llu stack copies were not walked by call-frame "
		     "information (the agent's time for walks, 50 ms a second and 2 ms a read of "
		     "the ring, was spent): their "
		     "frames come from frame pointers only", (unsigned long long)st.over_budget,
		     (unsigned long long)st.copies);
	if (c->copies_skipped)
		note(c, "user stacks: %llu stack copies were not taken while the ring was backed up "
		     "(the agent behind): their frames come from frame pointers only",
		     (unsigned long long)c->copies_skipped);
	if (st.refused)
		note(c, "user stacks: the call-frame information of %llu mapped file%s was not used "
		     "(%s): a walk by call-frame information stops at %s code",
		     (unsigned long long)st.refused, st.refused == 1 ? "" : "s", st.refused_first,
		     st.refused == 1 ? "its" : "their");
}

/* a followed child without the allocator probes' library (stackmaps_lib_missing) */
static void lib_missing_cb(void *ctx, pid_t pid)
{
	struct capture *c = ctx;
	char path[64], comm[32] = "";
	uint64_t dev, ino;
	const char *lib = "";

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if (read_small_file(path, comm, sizeof(comm)) > 0)
		comm[strcspn(comm, "\n")] = 0;
	probes_alloc_lib(c->probes, &dev, &ino, &lib);
	note(c, "allocator probes: followed process %s[%d] does not map %s (a static program, "
	     "or another C library): its allocator calls are not traced", comm[0] ? comm : "?",
	     (int)pid, lib);
}

/* the children to check for the allocator probes' library, once the probes are on it */
static void watch_alloc_lib(struct capture *c, uint64_t now)
{
	uint64_t dev, ino;
	const char *lib;

	if (!c->maps || c->o->probe.no_children)
		return;
	if (!c->lib_watched && probes_alloc_lib(c->probes, &dev, &ino, &lib)) {
		stackmaps_watch_lib(c->maps, dev, ino, lib);
		c->lib_watched = true;
	}
	if (c->lib_watched)
		stackmaps_lib_missing(c->maps, now, lib_missing_cb, c);
}

/*
 * The followed processes other than the target with a channel file in SBC_DIR
 * (its name carries the pid, in the agent's namespace), to cb until it
 * returns false; at most 4096 names looked at
 */
static void channel_files(struct capture *c, bool (*cb)(struct capture *c, pid_t pid, void *arg),
			  void *arg)
{
	size_t pl = strlen(SBC_NAME_PREFIX);
	struct dirent *de;
	int looked = 0;
	DIR *d = opendir(SBC_DIR);

	if (!d)
		return;
	while (looked < 4096 && (de = readdir(d))) {
		char *end;
		long pid;

		looked++;
		if (strncmp(de->d_name, SBC_NAME_PREFIX, pl))
			continue;
		pid = strtol(de->d_name + pl, &end, 10);
		if (*end == '-' && pid > 0 && pid != c->o->probe.pid && pid <= INT32_MAX &&
		    probes_followed(c->probes, (pid_t)pid, NULL) && !cb(c, (pid_t)pid, arg))
			break;
	}
	closedir(d);
}

static bool first_found(struct capture *c, pid_t pid, void *arg)
{
	(void)c;
	*(pid_t *)arg = pid;
	return false;
}

/*
 * A followed descendant that may have a channel of its own (the trainer a
 * launcher or a shell script started): the process whose marks are the
 * steps; without marks, after a few tries, the first file in SBC_DIR whose
 * name carries the pid of a followed process (pids of the agent's namespace).
 * 0 if none. The file is then found and checked through that process's
 * mappings, like the target's.
 */
static pid_t channel_child(struct capture *c)
{
	pid_t found = 0;

	if (c->o->probe.no_children)
		return 0;
	/* the steps are the first marking process's (schemas/report.md): its GPU timeline */
	if (c->mark_pid && c->mark_pid != c->o->probe.pid)
		return probes_followed(c->probes, c->mark_pid, NULL) ? c->mark_pid : 0;
	/* no marks (GPU-marked steps): a child's channel once marks had time to come */
	if (c->mark_pid || c->chan_tries < 3)
		return 0;
	channel_files(c, first_found, &found);
	return found;
}

/* the channel of pid, its maps read with a time limit (the process can stall that read: SECURITY.md) */
static struct sbc_reader *channel_of(struct capture *c, pid_t pid, bool target, char *err,
				     size_t errlen)
{
	char *maps = NULL;
	ssize_t len = read_maps(pid, &maps, target ? c->chan_maps_hint : 0);
	struct sbc_reader *r;
	int e;

	if (len > 0 && target)
		c->chan_maps_hint = (size_t)len;
	r = sbc_attach_maps(pid, maps, len, err, errlen);
	e = errno;
	/* the trainer started CUDA after the attach: late_inject's turn (collect_run) */
	if (!r && target && c->inject_later && len > 0 && memmem(maps, (size_t)len, "/libcuda.so", 11))
		c->inject_now = true;
	free(maps);
	errno = e;
	return r;
}

static const char *enable_why(int e)
{
	return e == -EBUSY ? "another live agent enabled it first" :
	       e == -EIO ? "its owner cut the file short" : strerror(-e);
}

/*
 * A channel found for pid, enabled for this agent: 0, *ch kept; a collector
 * that could not start leaves a channel saying why: 0, *ch detached and
 * *inert; the enable failed (another agent has it, the file broke): the
 * error, *ch detached.
 */
static int channel_take(struct capture *c, struct sbc_reader **ch, pid_t pid, bool *inert)
{
	int e;

	if (!strncmp(sbc_producer_name(*ch), "cupti-inert:", 12)) {
		note(c, "GPU timeline unavailable: the collector in PID %d is inert (%s); host-only mode",
		     (int)pid, sbc_producer_name(*ch) + 12);
		sbc_detach(*ch);
		*ch = NULL;
		*inert = true;
		return 0;
	}
	e = sbc_set_enabled(*ch, true);
	if (e) {
		sbc_detach(*ch);
		*ch = NULL;
		return e;
	}
	note(c, "GPU timeline: reading the %s channel of PID %d%s", sbc_producer_name(*ch),
	     (int)pid, pid != c->o->probe.pid ? " (a descendant of the target)" : "");
	return 0;
}

static void try_channel(struct capture *c, bool first)
{
	static pid_t enable_failed; /* the process whose failed enable was noted */
	char err[256];
	pid_t pid = c->o->probe.pid;
	int e;

	if (c->chan || c->chan_inert || c->o->no_gpu)
		return;
	c->chan_tries++;
	c->chan = channel_of(c, pid, true, err, sizeof(err));
	if (!c->chan && errno == ENOENT) {
		pid_t kid = channel_child(c);
		char kerr[256];

		if (kid && (c->chan = channel_of(c, kid, false, kerr, sizeof(kerr))))
			pid = kid;
		else if (kid && errno != ENOENT) {
			snprintf(err, sizeof(err), "%s", kerr);
			errno = EPERM;
		}
	}
	if (!c->chan) {
		if (first && errno != ENOENT)
			note(c, "GPU channel refused: %s", err);
		return;
	}
	e = channel_take(c, &c->chan, pid, &c->chan_inert);
	if (e) {
		/* lost the enable to another agent (or the file broke): try again later */
		if (first || enable_failed != pid)
			note(c, "GPU channel of PID %d not enabled (%s): retrying every second",
			     (int)pid, enable_why(e));
		enable_failed = pid;
		return;
	}
	if (c->chan)
		c->chan_pid = pid;
	if (c->chan && c->o->on_gpu)
		c->o->on_gpu(c->o->on_second_ctx);
}

/*
 * The ranks' channels (rank_seen): looked for at once, then once a second
 * for 10 s (a collector loaded late makes its channel then); one that runs
 * CUDA without the collector gets it, as the target does.
 */
static bool rank_file(struct capture *c, pid_t pid, void *arg)
{
	(void)arg;
	if (pid != c->mark_pid && !(c->chan && pid == c->chan_pid))
		rank_seen(c, pid);
	return true;
}

static void rank_channels(struct capture *c, uint64_t now)
{
	char err[256], msg[1024];

	if (c->o->no_gpu || c->o->probe.no_children)
		return;
	/*
	 * Where steps are marked, every followed process with a channel is
	 * another rank's GPU (one may wait for its GPU to be read before it
	 * marks): once a second
	 */
	if (c->mark_pid && now - c->ranks_looked_ns >= 1000000000ull) {
		c->ranks_looked_ns = now;
		channel_files(c, rank_file, NULL);
	}
	for (int i = 0; i < c->nranks; i++) {
		struct rank_chan *r = &c->ranks[i];
		bool inert = false;
		int e;

		if (r->done || (r->tries && now - r->tried_ns < 1000000000ull))
			continue;
		/* the first channel found may be its (it is the target's) */
		if (c->chan && c->chan_pid == r->pid) {
			r->done = true;
			continue;
		}
		r->tried_ns = now;
		if (!probes_followed(c->probes, r->pid, NULL)) {
			r->done = true;
			continue;
		}
		r->chan = channel_of(c, r->pid, false, err, sizeof(err));
		if (!r->chan && !r->tries) {
			late_inject(c->o, r->pid, msg, sizeof(msg));
			if (msg[0]) {
				note(c, "%s", msg);
				r->chan = channel_of(c, r->pid, false, err, sizeof(err));
			}
		}
		r->done = ++r->tries >= 10;
		if (!r->chan)
			continue;
		e = channel_take(c, &r->chan, r->pid, &inert);
		r->done = r->done || r->chan || inert;
		if (e && r->done)
			note(c, "GPU channel of PID %d not enabled (%s): no GPU timeline for its steps",
			     (int)r->pid, enable_why(e));
	}
}

/* every rank's channel drained; false if the sink failed */
static void rank_drain(struct capture *c, bool heartbeat)
{
	for (int i = 0; i < c->nranks && !c->sink_err; i++) {
		struct rank_chan *r = &c->ranks[i];

		if (!r->chan)
			continue;
		if (heartbeat)
			sbc_heartbeat(r->chan);
		if (sbc_drain(r->chan, chan_cb, c) == -EIO && !r->broken) {
			r->broken = true;
			note(c, "the GPU channel of PID %d was cut short by its owner while mapped: "
			     "no GPU timeline for its steps from here on", (int)r->pid);
		}
	}
}

/*
 * The target now runs with other credentials (a setuid program exec'd): the
 * probes stopped recording it in the kernel at s->ns, and the capture ends.
 * The note carries that time.
 */
static void put_stop_note(struct capture *c, const struct probes_stop *s)
{
	static const char *names[8] = { "uid", "gid", "suid", "sgid", "euid", "egid", "fsuid",
					 "fsgid" };
	char what[384] = "", line[512];
	size_t o = 0;
	bool user = false, group = false;
	int n;

	for (int i = 0; i < 8 && o < sizeof(what); i++) {
		if (s->ids_before[i] == s->ids_after[i])
			continue;
		user |= !(i & 1);
		group |= i & 1;
		o += snprintf(what + o, sizeof(what) - o, "%s%s %u -> %u", o ? ", " : "", names[i],
			      s->ids_before[i], s->ids_after[i]);
	}
	if (!user && !group && o < sizeof(what))
		snprintf(what + o, sizeof(what) - o, "permitted capabilities %#llx -> %#llx",
			 (unsigned long long)s->cap_before, (unsigned long long)s->cap_after);
	n = snprintf(line, sizeof(line), "PID %d now runs as %s (%s) %s: recording stopped",
		     (int)c->o->probe.pid,
		     user ? "another user" : group ? "another group" : "a more privileged program",
		     what, s->at_exec ? "after exec" : "after a change of credentials");
	if (n >= (int)sizeof(line))
		n = sizeof(line) - 1;
	sb_text_build(c->buf.bytes, sizeof(c->buf.bytes), SB_REC_NOTE, 0, s->ns, c->o->probe.pid,
		      s->tid, line, n);
	put(c, &c->buf.h);
	if (!c->o->quiet)
		fprintf(stderr, "stepblame: %s\n", line);
}

/* ---- the tracer's own cost: calibration and the overhead guard ---- */

/*
 * Measure what the uprobes cost here and write the costs record (the
 * defaults where the measurement cannot be made: it never stops a capture).
 */
static void put_costs(struct capture *c)
{
	char text[512];
	size_t n;
	int err;

	sb_costs_default(&c->costs);
	err = probes_calibrate(c->probes, &c->costs);
	n = sb_costs_format(&c->costs, text, sizeof(text));
	put_text(c, SB_REC_COSTS, 0, c->o->probe.pid, 0, text,
		 n < sizeof(text) ? n : sizeof(text) - 1);
	if (c->o->quiet)
		return;
	if (!err)
		fprintf(stderr, "stepblame: uprobe cost measured: %.1f us per allocator call, "
			"%.1f us per step mark\n", c->costs.ns[SB_COST_ALLOC_CALL] / 1e3,
			c->costs.ns[SB_COST_UPROBE] / 1e3);
	else if (err != -ENOENT)
		fprintf(stderr, "stepblame: uprobe cost not measured (%s): assuming %.1f us per "
			"allocator call\n", err == -EPERM || err == -EACCES ?
			"uprobes not allowed" : strerror(-err),
			c->costs.ns[SB_COST_ALLOC_CALL] / 1e3);
}

static void put_guard(struct capture *c)
{
	char text[512];
	size_t n = sb_guard_format(guard_state(c->guard), text, sizeof(text));

	/*
	 * The first says how the allocator probes stood since they were opened
	 * (the safe start: off until the guard's first window), so it bears that
	 * time: steps recorded before the guard ran are not taken for observed.
	 */
	put_text_at(c, SB_REC_GUARD, 0, c->o->probe.pid, 0, text,
		    n < sizeof(text) ? n : sizeof(text) - 1,
		    c->guard_records++ ? mono_ns() : c->opened_ns);
}

/* ppm as a percentage: 412000 "41.2%", 10000 "1%", 240 "0.024%" */
static const char *pct(char *buf, size_t len, uint64_t ppm)
{
	snprintf(buf, len, "%.3g%%", ppm / 1e4);
	return buf;
}

static void drain_ring(void *ctx)
{
	struct capture *c = ctx;

	if (!c->sink_err)
		read_ring(c, -1);
}

/* write what the guard asks for (flags: GUARD_*) */
static void guard_did(struct capture *c, int flags)
{
	const struct sb_guard *g = guard_state(c->guard);
	char est[32], lim[32], duty[32], share[32], others[32];

	if (flags & GUARD_RECORD)
		put_guard(c);
	pct(est, sizeof(est), g->estimate_ppm);
	pct(lim, sizeof(lim), g->limit_ppm);
	if (flags & GUARD_START)
		note(c, "overhead guard: allocator probes start duty-cycled to %s of the time (their "
		     "share of the %s limit until the other probes are measured: what fits it "
		     "whatever the target's rate of calls), attached throughout once measured under "
		     "half their share; allocator events are a sample until then",
		     pct(duty, sizeof(duty), g->duty_ppm), lim);
	if ((flags & GUARD_CHANGED) && g->mode == SB_GUARD_SAMPLED)
		note(c, "overhead guard: allocator probes estimated at %s of step time on thread %u "
		     "(their share of the %s limit: %s, the other probes taking %s): duty-cycled to "
		     "%s of the time, allocator events are a sample from here on", est,
		     guard_worst_tid(c->guard), lim, pct(share, sizeof(share), g->alloc_limit_ppm),
		     pct(others, sizeof(others), g->others_ppm), pct(duty, sizeof(duty), g->duty_ppm));
	else if (flags & GUARD_CHANGED)
		note(c, "overhead guard: allocator probes estimated under half their share of the "
		     "limit (%s of %s) in the last windows (the last: %s of step time): attached "
		     "throughout again, allocator events are complete from here on",
		     pct(share, sizeof(share), g->alloc_limit_ppm), lim, est);
	/* a target that exited meanwhile is said so by the capture's end */
	if ((flags & GUARD_FAILED) && target_alive(c->o->probe.pid)) {
		if (!(flags & GUARD_RECORD))
			put_guard(c);
		note(c, "overhead guard: cannot attach the allocator probes again (%s): no allocator "
		     "events from here on", guard_error(c->guard));
	}
}

static void start_guard(struct capture *c)
{
	c->guard = guard_new(c->probes, c->o->max_overhead_ppm, &c->costs,
			     (unsigned)target_cpus(c->o->probe.pid));
	if (!c->guard) {
		sb_warn("out of memory: no overhead guard");
		return;
	}
	/* the first record, if the allocator probes are attached already */
	guard_did(c, guard_run(c->guard, mono_ns(), drain_ring, c));
}

/* how long the loop may wait: a tick, less when the guard is due sooner */
static int poll_ms(struct capture *c, uint64_t tick)
{
	uint64_t wait = tick, due, now;

	if (c->guard) {
		due = guard_due(c->guard);
		now = mono_ns();
		if (due <= now)
			wait = 0;
		else if (due - now < wait)
			wait = due - now;
	}
	/* rounded up: a wait that ends a little before the guard is due would only spin */
	return (int)((wait + 999999) / 1000000);
}

static void pin_agent(const struct collect_opts *o, bool quiet)
{
	int cpu = o->agent_cpu;
	cpu_set_t set;

	if (cpu == -2)
		return;
	if (cpu == -1)
		cpu = target_free_cpu(o->probe.pid);
	if (cpu < 0) {
		if (!quiet)
			fprintf(stderr, "stepblame: agent not pinned: the target may run on every CPU "
				"(choose one with --agent-cpu)\n");
		return;
	}
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		sb_warn("cannot pin the agent to CPU %d: %s", cpu, strerror(errno));
		return;
	}
	if (!quiet)
		fprintf(stderr, "stepblame: agent runs on CPU %d%s\n", cpu,
			o->agent_cpu == -1 ? " (one the target's threads may not use)" : "");
}

static int pidfd_open_(pid_t pid)
{
#ifdef SYS_pidfd_open
	return syscall(SYS_pidfd_open, pid, 0);
#else
	errno = ENOSYS;
	return -1;
#endif
}

enum { TARGET_HERE, TARGET_EXITED, TARGET_REUSED };

static int target_gone(pid_t pid, int pidfd, uint64_t start_ticks)
{
	uint64_t st;

	if (pidfd >= 0) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };

		/* (a main thread that exited alone is no process's end: target_alive) */
		if (poll(&p, 1, 0) == 1 && !target_alive(pid))
			return TARGET_EXITED;
	}
	/* without pidfd: gone, a zombie, or the PID reused by another process */
	if (!target_alive(pid))
		return TARGET_EXITED;
	st = target_start_time(pid);
	if (st != start_ticks)
		return st ? TARGET_REUSED : TARGET_EXITED;
	return TARGET_HERE;
}

/*
 * A trainer that runs CUDA without the collector: load it now (inject.h), at the
 * start before the probes, so that they do not see the pause. What happened goes
 * in *msg for the trace's notes ("" when there was nothing to do). True when it
 * maps no libcuda yet and may later: try_channel watches its maps for one, and
 * this runs again then.
 */
static bool late_inject(const struct collect_opts *o, pid_t pid, char *msg, size_t len)
{
	struct inject_maps m;
	struct inject_opts io = { .entry = INJECT_ENTRY };
	struct inject_result r;
	char lib[PATH_MAX], looked[PATH_MAX + 32], err[512];

	msg[0] = 0;
	/* `run`, or a collector that CUDA loads itself at its init: nothing to do */
	if (o->no_gpu || o->no_inject || o->gpu_expected || inject_scan(pid, &m))
		return false;
	/* no CUDA yet: true, try again if it comes (try_channel sees it in the maps) */
	if (!m.libcuda)
		return !m.collector && !m.channel;
	if (m.collector || m.channel)
		return false;
	if (target_env_has(pid, "CUDA_INJECTION64_PATH")) {
		snprintf(msg, len, "PID %d names a CUDA injection library (CUDA_INJECTION64_PATH): "
			 "the GPU collector is not loaded into it a second time", (int)pid);
		return false;
	}
	if (inject_find_collector(lib, sizeof(lib), looked, sizeof(looked))) {
		snprintf(msg, len, "PID %d runs CUDA, and the GPU collector (" INJECT_COLLECTOR_SO
			 ") was not found (looked in %s; it is built where a CUDA toolkit with "
			 "CUPTI is found): no GPU timeline, host-only mode", (int)pid, looked);
		return false;
	}
	io.lib = lib;
	if (inject_library(pid, &io, &r, err, sizeof(err))) {
		snprintf(msg, len, "GPU collector not loaded into PID %d: %s; host-only mode "
			 "(--no-inject skips this)", (int)pid, err);
		return false;
	}
	snprintf(msg, len, "GPU collector loaded into running PID %d (thread %d held %.1f ms)",
		 (int)pid, (int)r.tid, r.pause_ns / 1e6);
	return false;
}

/*
 * The records written while the probes attach. The scheduler's attach first;
 * the other families take a second or two more on a large trainer (the ELF
 * scans for step marks and allocator functions), and a busy trainer's
 * scheduler writes megabytes meanwhile: more than a small ring holds. A
 * thread reads them from the moment the scheduler probes are attached into
 * memory, and they go into the trace after its preamble
 * (docs/ARCHITECTURE.md, "Data flow").
 */
#define EARLY_MAX (512ull << 20) /* beyond this the ring holds them, or counts them dropped */

struct early {
	struct ring_buffer *rb;
	pthread_t th;
	bool running;
	bool stop;                   /* __atomic */
	char *buf;
	size_t len, cap;
	uint64_t lost;               /* read but not kept: out of memory */
	uint64_t max;                /* bytes: collect_opts.early_max_bytes, at most EARLY_MAX */
};

/* one entry: its size as a u64, then the record, padded to 8 bytes */
static int early_cb(void *ctx, void *data, size_t size)
{
	struct early *e = ctx;
	size_t need = 8 + ((size + 7) & ~(size_t)7);

	if (e->len + need > e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 1 << 20;
		char *b;

		while (cap < e->len + need)
			cap *= 2;
		if (cap > e->max && e->len + need <= e->max)
			cap = e->max;
		if (cap > e->max || !(b = realloc(e->buf, cap))) {
			/* consumed already: counted, and the rest left in the ring */
			e->lost++;
			return -ENOSPC;
		}
		e->buf = b;
		e->cap = cap;
	}
	uint64_t n = size;

	memcpy(e->buf + e->len, &n, 8);
	memcpy(e->buf + e->len + 8, data, size);
	e->len += need;
	return 0;
}

static void *early_run(void *arg)
{
	struct early *e = arg;

	while (!__atomic_load_n(&e->stop, __ATOMIC_ACQUIRE))
		if (ring_buffer__poll(e->rb, 10) == -ENOSPC)
			break;
	return NULL;
}

static void early_start(void *ctx, int ring_fd)
{
	struct early *e = ctx;

	e->rb = ring_buffer__new(ring_fd, early_cb, e, NULL);
	if (!e->rb)
		return;
	if (pthread_create(&e->th, NULL, early_run, e)) {
		ring_buffer__free(e->rb);
		e->rb = NULL;
		return;
	}
	e->running = true;
}

/* the thread stopped and its reader closed: what is left in the ring is the capture's to read */
static void early_stop(struct early *e)
{
	if (!e->running)
		return;
	__atomic_store_n(&e->stop, true, __ATOMIC_RELEASE);
	pthread_join(e->th, NULL);
	ring_buffer__free(e->rb);
	e->rb = NULL;
	e->running = false;
}

/* the records kept, into the trace in the order they were read */
static void early_put(struct capture *c, struct early *e)
{
	for (size_t off = 0; off + 8 <= e->len && !c->sink_err;) {
		uint64_t n;

		memcpy(&n, e->buf + off, 8);
		if (take_record(c, e->buf + off + 8, n))
			break;
		off += 8 + ((n + 7) & ~(uint64_t)7);
	}
	if (e->lost)
		note(c, "%llu records written while the probes attached were lost: over %llu MiB "
		     "of them in memory", (unsigned long long)e->lost,
		     (unsigned long long)(e->max >> 20));
	free(e->buf);
	e->buf = NULL;
	e->len = e->cap = 0;
}

int collect_run(const struct collect_opts *o, sink_fn sink, void *ctx,
		struct collect_result *res)
{
	struct early early = { .max = o->early_max_bytes && o->early_max_bytes < EARLY_MAX ?
					      o->early_max_bytes : EARLY_MAX };
	char inject_msg[PATH_MAX + 1024];
	struct capture *c = calloc(1, sizeof(*c));
	struct ring_buffer *rb = NULL;
	struct probes_stop stop;
	char err[512];
	uint64_t start, now, last_tick = 0, last_sec, last_maps, start_ticks;
	uint64_t tick = o->tick_ns ? o->tick_ns : 100000000ull;
	int pidfd = -1, ret = 1, gone = TARGET_HERE;
	pid_t pid = o->probe.pid;

	memset(res, 0, sizeof(*res));
	if (!c) {
		sb_err("out of memory");
		return 1;
	}
	c->o = o;
	c->sink = sink;
	c->ctx = ctx;
	if (target_check(pid, err, sizeof(err))) {
		sb_err("%s", err);
		goto out;
	}
	start_ticks = target_start_time(pid);
	c->inject_later = late_inject(o, pid, inject_msg, sizeof(inject_msg));
	pin_agent(o, o->quiet);
	{
		struct probe_opts po = o->probe;

		/* with a limit, the allocator probes start off: the guard's safe start */
		po.alloc_start_off = o->max_overhead_ppm > 0;
		po.on_ring = early_start;
		po.on_ring_ctx = &early;
		c->opened_ns = mono_ns();
		c->probes = probes_open(&po, err, sizeof(err));
		early_stop(&early);
	}
	if (!c->probes) {
		sb_err("%s", err);
		goto out;
	}
	if (!o->quiet) {
		const struct probe_status *st;
		int n = probes_status(c->probes, &st);

		for (int i = 0; i < n; i++)
			if (!st[i].attached)
				fprintf(stderr, "stepblame: probe %s not attached: %s\n", st[i].name,
					st[i].detail);
	}
	rb = ring_buffer__new(probes_ring_fd(c->probes), ring_cb, c, NULL);
	if (!rb) {
		sb_err("cannot open the ring buffer: %s", strerror(errno));
		goto out;
	}
	c->rb = rb;
	/* with or without stacks: the regions that faults hit are named from them */
	c->maps = stackmaps_new(pid);
	if (!o->probe.no_stacks && !o->probe.fp_stacks) {
		c->unw = unwinder_new(c->probes);
		unwinder_prepare(c->unw, pid);
	}
	pidfd = pidfd_open_(pid);
	start = mono_ns();
	res->start_ns = start;
	put_preamble(c);
	put_probe_status(c);
	early_put(c, &early);
	if (inject_msg[0])
		note(c, "%s", inject_msg);
	try_channel(c, true);
	if (!c->chan && !c->chan_inert && !o->no_gpu && !o->gpu_expected && !inject_msg[0])
		note(c, "no GPU timeline from PID %d (host-only mode): start the trainer with "
		     "`stepblame run` to load the CUPTI collector", (int)pid);
	/*
	 * What the target mapped while the probes attached (a trainer that had
	 * just exec'd loads its libraries meanwhile): its step marks get probes
	 * before the capture says it is attached, not at the first rescan a
	 * second later. Only once: reading a big process's mappings holds its
	 * mmap lock, which its page faults wait for.
	 */
	probes_rescan_now(c->probes);
	if (!o->quiet) {
		const struct probe_status *st;
		int n = probes_status(c->probes, &st), ok = 0;

		for (int i = 0; i < n; i++)
			ok += st[i].attached;
		fprintf(stderr, "stepblame: attached %d probes to PID %d (scheduler via %s)%s\n", ok,
			(int)pid, probes_sched_variant(c->probes), c->chan ? " and its GPU channel" : "");
	}
	put_costs(c);
	start_guard(c);
	if (o->on_ready)
		o->on_ready(o->on_ready_ctx);
	last_sec = last_maps = start;
	for (;;) {
		int n = read_ring(c, poll_ms(c, tick));

		if (n < 0 && n != -EINTR && n != -EAGAIN && !c->sink_err) {
			sb_err("reading the ring buffer: %s", strerror(-n));
			res->end_reason = SBT_END_ERROR;
			break;
		}
		if (c->sink_err) {
			res->end_reason = SBT_END_ERROR;
			break;
		}
		now = mono_ns();
		if (now - last_tick >= tick) {
			last_tick = now;
			/*
			 * The probes wake us only when the backlog crosses wake_bytes, and
			 * two CPUs reserving at once can step over that window: no wakeup
			 * then, ever, and the ring fills and drops for the rest of the
			 * capture. ring_buffer__poll consumes nothing on a timeout, so the
			 * tick reads the ring itself.
			 */
			if (!c->sink_err) {
				probes_flush_sched(c->probes, false);
				if (o->live)
					probes_flush_faults(c->probes, false);
				read_ring(c, -1);
				/*
				 * The target mapped code since: its mappings now, not at
				 * the second's pass, if the spacing of passes allows
				 * (docs/ARCHITECTURE.md, "Step marks")
				 */
				if (c->exec_mapped && probes_rescan_due(c->probes)) {
					c->exec_mapped = false;
					probes_rescan(c->probes);
				}
				/* a child forked or exec'd since: its code's step marks get probes now */
				stackmaps_scan_fresh(c->maps, c->probes, now, put_map_text, c);
				if (c->mark_pid && c->mark_pid != pid && !c->mark_ids_put) {
					pid_t pp = 0;

					/* the parent it was followed from, as its first record said */
					c->mark_ids_put = true;
					if (probes_followed(c->probes, c->mark_pid, &pp) && pp > 0)
						put_process(c, c->mark_pid, pp, NULL);
				}
				/* a child's marks are the steps: its channel, if any, now */
				if (!c->chan && c->mark_pid && c->mark_pid != pid && !c->chan_mark_tried) {
					c->chan_mark_tried = true;
					try_channel(c, false);
					/* one that runs CUDA without the collector: loaded into it, as into a target */
					if (!c->chan && probes_followed(c->probes, c->mark_pid, NULL)) {
						late_inject(o, c->mark_pid, inject_msg, sizeof(inject_msg));
						if (inject_msg[0]) {
							note(c, "%s", inject_msg);
							try_channel(c, false);
						}
					}
				}
			}
			/* the ring is drained: what it held came before the stop */
			if (probes_stopped(c->probes, &stop)) {
				put_stop_note(c, &stop);
				c->target_stopped = true;
				res->end_reason = SBT_END_CREDENTIALS;
				break;
			}
			/*
			 * A trainer started with the collector makes its channel at
			 * CUDA init: looked for each tick until then (5 s at most),
			 * not once a second, since the collector writes it only once
			 * it is read and the steps before are not covered
			 */
			if (!c->chan && o->gpu_expected && c->chan_tries < 50)
				try_channel(c, false);
			if (c->chan) {
				sbc_heartbeat(c->chan);
				if (sbc_drain(c->chan, chan_cb, c) == -EIO && !c->chan_broken) {
					c->chan_broken = true;
					note(c, "the GPU channel of PID %d was cut short by its owner "
					     "while mapped: no GPU timeline from here on", (int)pid);
				}
			}
			if (!c->sink_err) {
				rank_channels(c, now);
				rank_drain(c, true);
			}
			/*
			 * How far the ring has been read (ring_watermark): every
			 * record before it is in, and the channel was drained just
			 * now. Never the wall clock: a starved agent's reads stop
			 * short of empty, and its engine waits for them.
			 */
			if (o->on_tick && !c->sink_err && ring_watermark(c) > c->ticked_ns) {
				c->ticked_ns = ring_watermark(c);
				o->on_tick(o->on_second_ctx, c->ticked_ns);
			}
		}
		if (now - last_sec >= 1000000000ull) {
			last_sec = now;
			alloc_readings(c);
			if (!o->live)
				probes_flush_faults(c->probes, false);
			put_drops(c);
			if (o->on_second)
				o->on_second(o->on_second_ctx, now);
		}
		/*
		 * The maps' pass, once a second, not while a sampled window of the
		 * guard is attached (up to a second more): a maps read waits on the
		 * target's mmap lock and for a CPU, tens of milliseconds on a
		 * loaded machine, and the guard's looks at the window, which cut it
		 * where it costs too much, would wait that long
		 * (docs/ARCHITECTURE.md, "The tracer's budget").
		 */
		if (now - last_maps >= 1000000000ull &&
		    (!c->guard || !guard_window_open(c->guard) || now - last_maps >= 2000000000ull)) {
			last_maps = now;
			/*
			 * The probes' rescan, the mappings' and the channel's look
			 * read the same processes' maps: once in this pass (a
			 * trainer's take milliseconds of the kernel's time to write)
			 */
			maps_reuse(true);
			probes_rescan(c->probes);
			put_probe_status(c);
			if (!c->sink_err) {
				/* first: this tick's scan looks for the library in new children too */
				watch_alloc_lib(c, now);
				stackmaps_maybe_scan(c->maps, c->probes, now, put_map_text, c);
			}
			try_channel(c, false);
			/* a load of the collector maps more: read again after it */
			maps_reuse(false);
			if (c->inject_now) {
				/* CUDA started after the attach: the probes see this hold */
				c->inject_now = c->inject_later = false;
				late_inject(o, pid, inject_msg, sizeof(inject_msg));
				if (inject_msg[0])
					note(c, "%s", inject_msg);
				try_channel(c, false);
			}
		}
		/* the guard's windows are shorter than a second: it keeps its own time */
		if (c->guard && !c->sink_err)
			guard_did(c, guard_run(c->guard, mono_ns(), drain_ring, c));
		if (collect_stop) {
			res->end_reason = SBT_END_SIGNAL;
			break;
		}
		if ((o->duration_ns && now - start >= (uint64_t)o->duration_ns) ||
		    (o->deadline_ns && now >= o->deadline_ns)) {
			res->end_reason = SBT_END_DURATION;
			break;
		}
		/* /proc is read once per tick, not per wakeup: it was most of the agent's CPU */
		if (now == last_tick)
			gone = target_gone(pid, pidfd, start_ticks);
		if (gone != TARGET_HERE) {
			res->end_reason = SBT_END_TARGET_EXIT;
			break;
		}
	}
	/* what is already in the ring and the channel still belongs to the capture */
	if (!c->sink_err) {
		probes_flush_faults(c->probes, true);
		probes_flush_sched(c->probes, true);
		/* a ring's worth at most, while the probes still write: not for ever */
		uint64_t t0 = mono_ns();

		while (read_ring(c, -1) == -EAGAIN && mono_ns() - t0 < 2000000000ull)
			;
	}
	if (c->chan && !c->sink_err)
		sbc_drain(c->chan, chan_cb, c);
	rank_drain(c, false);
	if (!c->sink_err) {
		/* stopped in the kernel since the last tick: said, though it did not end the capture */
		if (!c->target_stopped && probes_stopped(c->probes, &stop))
			put_stop_note(c, &stop);
		alloc_readings(c);
		/* mappings the last stacks need, and the JIT symbols they name */
		if (c->maps && !probes_stopped(c->probes, &stop)) {
			stackmaps_maybe_scan(c->maps, c->probes, UINT64_MAX, put_map_text, c);
			stackmaps_perfmap(c->maps, c->target_uid, put_map_text, c);
			watch_alloc_lib(c, UINT64_MAX);
		}
		/* where the guard stood at the end, with the calls since its last window */
		if (c->guard)
			guard_did(c, guard_finish(c->guard, mono_ns(), drain_ring, c));
		if (gone == TARGET_REUSED)
			note(c, "the target (PID %d) exited during the capture and its PID now belongs "
			     "to another process (the capture stopped when that was seen; the last "
			     "events may be that process's)", (int)pid);
		else if (res->end_reason == SBT_END_TARGET_EXIT && !c->target_stopped)
			note(c, "the target (PID %d) exited during the capture", (int)pid);
		put_drops(c);           /* before the note, which says how many copies it counted */
		put_unwind_note(c);
	}
	res->end_ns = mono_ns();
	res->records = c->records;
	res->drops_total = c->last_drops_total;
	res->gpu = c->chan != NULL;
	res->sink_error = c->sink_err;
	if (o->on_end)
		o->on_end(o->on_second_ctx, res);
	ret = 0;
out:
	early_stop(&early);
	free(early.buf);
	if (c->chan)
		sbc_detach(c->chan);
	for (int i = 0; i < c->nranks; i++)
		if (c->ranks[i].chan)
			sbc_detach(c->ranks[i].chan);
	ring_buffer__free(rb);
	guard_free(c->guard);
	free(c->exited);
	stackmaps_free(c->maps);
	unwinder_free(c->unw);
	probes_close(c->probes);
	if (pidfd >= 0)
		close(pidfd);
	free(c);
	return ret;
}

/* ---- option parsing shared by record, attach, run ---- */

enum { OPT_ALLOC_LIB = 256, OPT_ALLOC_MIN, OPT_NO_ALLOC, OPT_STEP_UPROBE, OPT_AGENT_CPU,
       OPT_RING, OPT_NO_GPU, OPT_JSON, OPT_NO_CUDA, OPT_NO_TRACEFS, OPT_MAX_OVERHEAD,
       OPT_NO_CHILDREN, OPT_NO_STACKS, OPT_NO_IRQ, OPT_FP_STACKS, OPT_METRICS_ADDR, OPT_JOB, OPT_RANK, OPT_LOCAL_RANK,
       OPT_TAIL_ONLY, OPT_LINES, OPT_HTML, OPT_CGROUP, OPT_DIR, OPT_AROUND, OPT_BUFFER, OPT_MAX_SNIPPETS,
       OPT_MAX_DISK, OPT_ROTATE, OPT_IDLE, OPT_TAIL_K, OPT_FOLD, OPT_COMPRESS_LEVEL,
       OPT_NO_INJECT };

/* "1", "0.5", "2%" -> ppm; false unless a plain number from 0 to 100 */
static bool parse_pct_ppm(const char *s, uint64_t *ppm)
{
	char *end;
	double v;

	if (!s || *s < '0' || *s > '9')
		return false; /* no sign, space, "nan", "inf" or empty string */
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || (*end && strcmp(end, "%")) || !(v >= 0 && v <= 100))
		return false;
	*ppm = (uint64_t)(v * 1e4 + 0.5);
	/* a limit too small to tell from 0 would silently turn the guard off */
	return *ppm || v == 0;
}

/*
 * The capture options of record, attach and run, in the order record's help
 * lists them; attach's help lists only --json (it takes the others too).
 */
const struct opt collect_options[] = {
	{ "pid", 'p', "PID", "process to trace (root, or CAP_BPF + CAP_PERFMON)",
	  COLLECT_RECORD | COLLECT_WATCH },
	{ "name", 'n', "REGEX",
	  "watch the process whose command line (or comm) matches REGEX\n"
	  "(extended regex): the oldest, the root of a matching tree;\n"
	  "when it exits, the next one that starts", COLLECT_WATCH },
	{ "cgroup", OPT_CGROUP, "PATH",
	  "watch the oldest root process of cgroup PATH (a cgroup directory,\n"
	  "v2 or v1, absolute or under /sys/fs/cgroup) and its sub-cgroups;\n"
	  "when it exits, the next one", COLLECT_WATCH },
	{ "duration", 'd', "SEC",
	  "stop after this long (30, 30s, 500ms, 2m); default: until Ctrl-C",
	  COLLECT_RECORD | COLLECT_WATCH },
	{ "dir", OPT_DIR, "DIR",
	  "where steps.jsonl, the snippets and report.html go\n"
	  "(default: stepblame-watch)", COLLECT_WATCH },
	{ "around", OPT_AROUND, "SEC",
	  "a snippet holds SEC before its step and SEC after (default 5)", COLLECT_WATCH },
	{ "tail-k", OPT_TAIL_K, "K",
	  "a snippet for a step longer than the median + K MAD of the last\n"
	  "1024 steps (the MAD at least 5% of the median; default 5)", COLLECT_WATCH },
	{ "idle-pct", OPT_IDLE, "PCT",
	  "also a snippet for a step whose GPU sat idle more than PCT%\n"
	  "of it (default: off; steps with a GPU timeline)", COLLECT_WATCH },
	{ "max-snippets", OPT_MAX_SNIPPETS, "N",
	  "keep at most N snippets in DIR, the oldest removed (default 100)", COLLECT_WATCH },
	{ "max-disk-mb", OPT_MAX_DISK, "N",
	  "keep the snippets under N MiB in all (default 2048)", COLLECT_WATCH },
	{ "rotate-mb", OPT_ROTATE, "N",
	  "rotate steps.jsonl at N MiB, keeping 4 old ones (default 64)", COLLECT_WATCH },
	{ "buffer-mb", OPT_BUFFER, "N",
	  "memory for the detail kept (default 256; the oldest goes first)", COLLECT_WATCH },
	{ "output", 'o', "FILE",
	  "trace file (default: stepblame-PID.sbtrace); written as FILE.partial.XXXXXX\n"
	  "and renamed at the end, a file already there kept as FILE.old;\n"
	  "a name ending in .zst is written compressed (-z)", COLLECT_RECORD },
	{ "compress", 'z', NULL,
	  "zstd-compressed trace (schemas/trace.md), a frame per MiB of\n"
	  "records: about 9 times smaller, readable when cut short (default\n"
	  "name: stepblame-PID.sbtrace.zst; watch: snippets .sbtrace.zst)",
	  COLLECT_RECORD | COLLECT_WATCH },
	{ "compress-level", OPT_COMPRESS_LEVEL, "N",
	  "zstd level, 1 (fastest) to 19 (smallest); implies -z (default 3)",
	  COLLECT_RECORD | COLLECT_WATCH },
	{ "jsonl", OPT_JSON, "OUT",
	  "also write each step as a JSON line to OUT (the objects of\n"
	  "`stepblame report --format jsonl`, schemas/report.schema.json);\n"
	  "-: to standard output instead of the step lines (the report at\n"
	  "the end goes to stderr)", COLLECT_ATTACH },
	{ "json", OPT_JSON, "OUT", "the same as --jsonl (its first name)", COLLECT_ATTACH },
	{ "html", OPT_HTML, "OUT",
	  "also write the HTML report (as `stepblame report --format html`)\n"
	  "to OUT when it stops", COLLECT_ATTACH },
	{ "tail-only", OPT_TAIL_ONLY, NULL,
	  "a line only for tail steps (and the line a second while none\n"
	  "finishes); --jsonl and the metrics still get every step", COLLECT_ATTACH },
	{ "lines", OPT_LINES, NULL,
	  "a line per step on a terminal too (the default there is a\n"
	  "screen redrawn as top does: percentiles, the tail episode, causes,\n"
	  "who took the CPUs, the tracer's cost, the last tail steps)", COLLECT_ATTACH },
	{ "metrics-addr", OPT_METRICS_ADDR, "HOST:PORT",
	  "serve Prometheus metrics at http://HOST:PORT/metrics\n"
	  "(schemas/metrics.md; 127.0.0.1:9464 for this host only)",
	  COLLECT_ATTACH | COLLECT_WATCH },
	{ "job", OPT_JOB, "NAME",
	  "the metrics' job label (default: the trainer's\n"
	  "TORCHELASTIC_RUN_ID or SLURM_JOB_ID)", COLLECT_ATTACH | COLLECT_WATCH },
	{ "rank", OPT_RANK, "N", "the rank label (default: its RANK, SLURM_PROCID, ...)",
	  COLLECT_ATTACH | COLLECT_WATCH },
	{ "local-rank", OPT_LOCAL_RANK, "N", "the local_rank label (default: its LOCAL_RANK, ...)",
	  COLLECT_ATTACH | COLLECT_WATCH },
	{ "no-alloc", OPT_NO_ALLOC, NULL, "do not probe malloc and friends", COLLECT_RECORD },
	{ "alloc-lib", OPT_ALLOC_LIB, "PATH",
	  "probe this allocator (jemalloc, tcmalloc) instead of the libc", COLLECT_RECORD },
	{ "alloc-min-ns", OPT_ALLOC_MIN, "N",
	  "allocator calls faster than N ns (above the fastest call seen,\n"
	  "which is mostly the probes' own cost) are only counted (10000;\n"
	  "0: every call is an event)", COLLECT_RECORD },
	{ "max-overhead", OPT_MAX_OVERHEAD, "PCT",
	  "keep the tracer's estimated cost under PCT% of step time (1; 0: off):\n"
	  "the allocator probes get what the always-on probes leave of it (at least\n"
	  "a quarter); above that they are attached part of the time and sampled",
	  COLLECT_RECORD },
	{ "step-uprobe", OPT_STEP_UPROBE, "LIB:SYM",
	  "each call of SYM in LIB marks a step (besides USDT stepblame:step)", COLLECT_RECORD },
	{ "no-cuda", OPT_NO_CUDA, NULL, "do not probe the CUDA driver library", COLLECT_RECORD },
	{ "fold", OPT_FOLD, "US",
	  "a thread's trips off its CPU (asleep or preempted) shorter than\n"
	  "US microseconds are summed in the kernel, one record a run of\n"
	  "them, the same causes and culprits (100, the default; at most\n"
	  "1000; 0: every switch is recorded, as perf would)", COLLECT_RECORD | COLLECT_ATTACH | COLLECT_WATCH },
	{ "no-stacks", OPT_NO_STACKS, NULL,
	  "no user stacks at slow I/O, mmap-family and allocator calls and faults", COLLECT_RECORD },
	{ "no-irq", OPT_NO_IRQ, NULL,
	  "do not time the interrupt handlers that run on the target's threads\n"
	  "(the cause irq: probes on every CPU's interrupts, which return at\n"
	  "once where the task interrupted is not the target's)",
	  COLLECT_RECORD | COLLECT_ATTACH | COLLECT_WATCH },
	{ "fp-stacks", OPT_FP_STACKS, NULL,
	  "user stacks from frame pointers only. By default (x86-64) the probes\n"
	  "also copy the top of the stack, at every event of 1 ms or more and\n"
	  "50 times a second per thread at most besides, and the agent walks the\n"
	  "copy by the code's call-frame information (.eh_frame): whole stacks\n"
	  "of code built without frame pointers (a distribution's Python)",
	  COLLECT_RECORD | COLLECT_ATTACH | COLLECT_WATCH },
	{ "no-gpu", OPT_NO_GPU, NULL, "do not read the trainer's GPU timeline channel",
	  COLLECT_RECORD },
	{ "no-inject", OPT_NO_INJECT, NULL,
	  "do not load the GPU collector into a trainer that runs CUDA\n"
	  "without it (by default it is loaded at attach: ptrace holds one\n"
	  "sleeping thread for the few ms a dlopen takes; host-only without)",
	  COLLECT_RECORD | COLLECT_ATTACH | COLLECT_WATCH },
	{ "no-tracefs", OPT_NO_TRACEFS, NULL,
	  "raw tracepoints only; by default tracefs is mounted if needed\n"
	  "so the mmap-family probes fire only on those system calls", COLLECT_RECORD },
	{ "no-children", OPT_NO_CHILDREN, NULL,
	  "trace the target process alone; by default the processes it\n"
	  "forks or spawns (DataLoader workers) are followed too, with\n"
	  "their descendants, including those started after attach; a\n"
	  "child's step marks are the steps when it marks first, so -p\n"
	  "may name the shell script or launcher that started the trainer",
	  COLLECT_RECORD | COLLECT_ATTACH | COLLECT_WATCH },
	{ "agent-cpu", OPT_AGENT_CPU, "N|none",
	  "pin the agent (default: a CPU the target may not use, if any)", COLLECT_RECORD },
	{ "ring-mb", OPT_RING, "N", "ring buffer size in MiB, power of two (default 8)",
	  COLLECT_RECORD },
	{ "quiet", 'q', NULL, "no progress lines", COLLECT_RECORD },
	{ "verbose", 'v', NULL, "libbpf's own messages, and what walking the stack copies took",
	  COLLECT_RECORD },
	{ "help", 'h', NULL, NULL },
	{ 0 }
};

void collect_opts_init(struct collect_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->agent_cpu = -1;
	o->probe.ring_bytes = 8ull << 20;
	o->probe.wake_bytes = 256 << 10;
	o->probe.alloc_min_ns = 10000;
	o->max_overhead_ppm = 10000;
}

int collect_parse_common(int argc, char **argv, struct collect_opts *o, const char **out,
			 struct live_args *live, const char *cmd)
{
	struct opts_getopt g;
	uint64_t v;
	int64_t d;
	int ch;

	collect_opts_init(o);
	opts_getopt_init(&g, collect_options, "+:");
	optind = 1;
	opterr = 0;
	while ((ch = opts_next(&g, argc, argv)) != -1) {
		switch (ch) {
		case 'p':
			if (!parse_u64(optarg, &v) || v == 0 || v > 0x3fffffff) {
				sb_err("%s: -p wants a process ID, got '%s'", cmd, optarg);
				return -1;
			}
			o->probe.pid = (pid_t)v;
			break;
		case 'd':
			d = parse_duration_ns(optarg);
			if (d <= 0) {
				sb_err("%s: -d wants a duration like 30, 30s, 500ms or 2m, got '%s'",
				       cmd, optarg);
				return -1;
			}
			o->duration_ns = d;
			break;
		case 'o':
			if (!out) {
				sb_err("%s: -o is not an option of this command", cmd);
				return -1;
			}
			*out = optarg;
			break;
		case 'n':
		case OPT_CGROUP:
		case OPT_DIR:
			if (!live || !live->watch) {
				sb_err("%s: %s is not an option of this command (see stepblame watch)",
				       cmd, argv[optind - 1]);
				return -1;
			}
			if (!*optarg) {
				sb_err("%s: %s wants a value", cmd, argv[optind - 1]);
				return -1;
			}
			*(ch == 'n' ? &live->name : ch == OPT_CGROUP ? &live->cgroup : &live->dir) = optarg;
			break;
		case OPT_AROUND:
		case OPT_TAIL_K:
		case OPT_BUFFER:
		case OPT_MAX_SNIPPETS:
		case OPT_MAX_DISK:
		case OPT_ROTATE:
		case OPT_IDLE:
			if (!live || !live->watch) {
				sb_err("%s: %s is not an option of this command (see stepblame watch)",
				       cmd, argv[optind - 1]);
				return -1;
			}
			if (ch == OPT_AROUND) {
				d = parse_duration_ns(optarg);
				if (d <= 0 || d > 600000000000ll) {
					sb_err("%s: --around wants a duration up to 10m (5, 500ms, 1m), "
					       "got '%s'", cmd, optarg);
					return -1;
				}
				live->around_ns = (uint64_t)d;
			} else if (ch == OPT_TAIL_K) {
				char *end;
				double k;

				errno = 0;
				k = strtod(optarg, &end);
				if (errno || end == optarg || *end || !(k >= 1 && k <= 1000)) {
					sb_err("%s: --tail-k wants a number from 1 to 1000, got '%s'", cmd,
					       optarg);
					return -1;
				}
				live->tail_k_milli = (uint64_t)(k * 1000 + 0.5);
			} else if (ch == OPT_IDLE) {
				if (!parse_pct_ppm(optarg, &live->idle_ppm)) {
					sb_err("%s: --idle-pct wants a percentage from 0 to 100, got '%s'",
					       cmd, optarg);
					return -1;
				}
			} else if (!parse_u64(optarg, &v) || v < 1 || v > (1u << 20)) {
				sb_err("%s: %s wants a number from 1 to 1048576, got '%s'", cmd,
				       argv[optind - 1], optarg);
				return -1;
			} else if (ch == OPT_MAX_SNIPPETS) {
				live->max_snippets = v;
			} else {
				*(ch == OPT_BUFFER ? &live->buffer_bytes : ch == OPT_MAX_DISK ?
				  &live->max_disk_bytes : &live->rotate_bytes) = v << 20;
			}
			break;
		case OPT_TAIL_ONLY:
			if (!live || live->watch) {
				sb_err("%s: --tail-only is not an option of this command", cmd);
				return -1;
			}
			live->tail_only = true;
			break;
		case OPT_LINES:
			if (!live || live->watch) {
				sb_err("%s: --lines is not an option of this command", cmd);
				return -1;
			}
			live->lines = true;
			break;
		case OPT_HTML:
			if (!live || live->watch) {
				sb_err("%s: --html is not an option of this command (watch writes "
				       "DIR/report.html)", cmd);
				return -1;
			}
			live->html = optarg;
			break;
		case OPT_JSON:
		case OPT_METRICS_ADDR:
		case OPT_JOB:
		case OPT_RANK:
		case OPT_LOCAL_RANK:
			if (!live || (live->watch && ch == OPT_JSON)) {
				sb_err("%s: --%s is not an option of this command", cmd,
				       ch == OPT_JSON ? "jsonl" : ch == OPT_METRICS_ADDR ? "metrics-addr" :
				       ch == OPT_JOB ? "job" : ch == OPT_RANK ? "rank" : "local-rank");
				return -1;
			}
			*(ch == OPT_JSON ? &live->json : ch == OPT_METRICS_ADDR ? &live->metrics_addr :
			  ch == OPT_JOB ? &live->job : ch == OPT_RANK ? &live->rank : &live->local_rank) =
				optarg;
			break;
		case OPT_ALLOC_LIB:
			o->probe.alloc_lib = optarg;
			break;
		case OPT_ALLOC_MIN:
			d = parse_duration_ns(optarg);
			if (!parse_u64(optarg, &v) && d < 0) {
				sb_err("%s: --alloc-min-ns wants nanoseconds, got '%s'", cmd, optarg);
				return -1;
			}
			o->probe.alloc_min_ns = parse_u64(optarg, &v) ? v : (uint64_t)d;
			break;
		case OPT_NO_ALLOC:
			o->probe.no_alloc = true;
			break;
		case OPT_NO_CUDA:
			o->probe.no_cuda = true;
			break;
		case OPT_NO_TRACEFS:
			o->probe.no_tracefs = true;
			break;
		case OPT_NO_STACKS:
			o->probe.no_stacks = true;
			break;
		case OPT_NO_IRQ:
			o->probe.no_irq = true;
			break;
		case OPT_FP_STACKS:
			o->probe.fp_stacks = true;
			break;
		case OPT_FOLD:
			d = parse_duration_ns(optarg);
			/*
			 * at most 1 ms: a trip of 1 ms or more keeps its records and its
			 * off-CPU stack (docs/ARCHITECTURE.md, "Scheduler runs")
			 */
			if (parse_u64(optarg, &v) && v <= 1000)
				o->probe.sched_fold_ns = v ? v * 1000 : PROBE_FOLD_OFF;
			else if (!parse_u64(optarg, &v) && d >= 0 && (uint64_t)d <= 1000000ull)
				o->probe.sched_fold_ns = d ? (uint64_t)d : PROBE_FOLD_OFF;
			else {
				sb_err("%s: --fold wants microseconds from 0 to 1000 (or with a unit: "
				       "50us, 1ms), got '%s'", cmd, optarg);
				return -1;
			}
			break;
		case OPT_STEP_UPROBE:
			if (!strchr(optarg, ':')) {
				sb_err("%s: --step-uprobe wants LIB:SYM (e.g. libtrain.so:train_step), "
				       "got '%s'", cmd, optarg);
				return -1;
			}
			o->probe.step_uprobe = optarg;
			break;
		case OPT_AGENT_CPU:
			if (!strcmp(optarg, "none")) {
				o->agent_cpu = -2;
			} else if (!parse_u64(optarg, &v) || v >= CPU_SETSIZE) {
				sb_err("%s: --agent-cpu wants a CPU number or 'none', got '%s'", cmd,
				       optarg);
				return -1;
			} else if (v >= (uint64_t)sysconf(_SC_NPROCESSORS_CONF)) {
				sb_err("%s: --agent-cpu %s: this machine has CPUs 0 to %ld", cmd, optarg,
				       sysconf(_SC_NPROCESSORS_CONF) - 1);
				return -1;
			} else {
				o->agent_cpu = (int)v;
			}
			break;
		case OPT_RING:
			if (!parse_u64(optarg, &v) || v < 1 || v > 4096 || (v & (v - 1))) {
				sb_err("%s: --ring-mb wants a power of two from 1 to 4096, got '%s'", cmd,
				       optarg);
				return -1;
			}
			o->probe.ring_bytes = v << 20;
			if (o->probe.wake_bytes > o->probe.ring_bytes / 4)
				o->probe.wake_bytes = o->probe.ring_bytes / 4;
			break;
		case 'z':
		case OPT_COMPRESS_LEVEL:
			/* a trace file's: record's and run's -o, watch's snippets */
			if (!out && !(live && live->watch)) {
				sb_err("%s: %s is not an option of this command (it writes no trace "
				       "file)", cmd, argv[optind - 1]);
				return -1;
			}
			if (ch == 'z') {
				if (!o->zstd_level)
					o->zstd_level = SBT_ZSTD_LEVEL;
			} else if (!parse_u64(optarg, &v) || v < 1 || v > SBT_ZSTD_LEVEL_MAX) {
				sb_err("%s: --compress-level wants a zstd level from 1 to %d, got '%s'",
				       cmd, SBT_ZSTD_LEVEL_MAX, optarg);
				return -1;
			} else {
				o->zstd_level = (int)v;
			}
			break;
		case OPT_NO_GPU:
			o->no_gpu = true;
			break;
		case OPT_NO_INJECT:
			o->no_inject = true;
			break;
		case OPT_NO_CHILDREN:
			o->probe.no_children = true;
			break;
		case OPT_MAX_OVERHEAD:
			if (!parse_pct_ppm(optarg, &o->max_overhead_ppm)) {
				sb_err("%s: --max-overhead wants a percentage of step time from 0 to 100 "
				       "(like 1 or 0.5; 0: no guard), got '%s'", cmd, optarg);
				return -1;
			}
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'v':
			o->probe.verbose = true;
			break;
		case 'h':
			return -2;
		case ':':
			sb_err("%s: option '%s' needs a value", cmd, argv[optind - 1]);
			return -1;
		case '?':
		default:
			if (optopt && optopt < 256)
				sb_err("%s: unknown option '-%c' (see stepblame %s --help)", cmd, optopt,
				       cmd);
			else
				sb_err("%s: unknown option '%s' (see stepblame %s --help)", cmd,
				       argv[optind - 1], cmd);
			return -1;
		}
	}
	return optind;
}
