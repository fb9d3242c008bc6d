/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Synthetic record streams with known answers, for the blame engine's tests
 * (test_engine.c, test_report.c). A "world" collects host and GPU records;
 * world_feed() hands them to an engine in the order a recorder would drain
 * them: host records when they end, GPU records optionally late.
 *
 * A standard training step (std_step) on the launcher thread:
 *
 *   S            mark; host work (1 ms, the injection, the rest of `pre`)
 *   Tl           cudaLaunchKernel [Tl, Tl+10us]; kernel [Tl+20us, Tl+20us+gpu]
 *   Tl+10us      cudaStreamSynchronize until kend+10us; asleep from Tl+12us,
 *                woken by the GPU thread at kend+2us, on CPU at kend+10us
 *   kend+1ms     next step
 *
 * so a step without injection has, inside GPU idle: host_compute pre+990us,
 * cuda_api 10us, cuda_sync 10us (in the sync before the kernel started),
 * blocked 2us (asleep in the sync after the GPU finished: waiting for the GPU
 * thread that wakes it, no longer for the GPU) and cpu_wait 8us (the wakeup
 * latency).
 */
#ifndef STEPBLAME_ENGINE_SYNTH_H
#define STEPBLAME_ENGINE_SYNTH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "report/report.h"
#include "format/gpu.h"
#include "format/trace.h"

#define T_PID 100
#define T_LAUNCHER 101
#define T_GPUTHR 102
#define T_LOADER 103
#define T_CPU 0
#define US 1000ull
#define MS 1000000ull
#define SEC 1000000000ull

static inline uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

struct stream {
	uint8_t *b;
	size_t len, cap, n;
};

enum w_mark { W_USDT, W_NVTX, W_GPU_MARKER, W_NONE };

struct world {
	struct stream meta, host, gpu;
	uint32_t corr;
	uint32_t kname;          /* string id of the kernel name */
	bool no_gpu;             /* host-only: no API or kernel records */
	int mark;                /* enum w_mark: how steps are marked */
	uint64_t kernel_extra;   /* added to the next kernel's duration */
	uint64_t fault_addr;     /* the address w_fault() records */
	bool fast_marks;         /* step marks carry fast_calls (struct sb_step_alloc) */
	uint64_t fast_calls;     /* the marking thread's fast allocator calls so far */
};

static inline void st_put(struct stream *s, const void *rec)
{
	const struct sb_hdr *h = rec;

	if (s->len + h->size > s->cap) {
		s->cap = (s->cap + h->size) * 2;
		s->b = realloc(s->b, s->cap);
		if (!s->b)
			abort();
	}
	memcpy(s->b + s->len, rec, h->size);
	s->len += h->size;
	s->n++;
}

static inline void hdr(struct sb_hdr *h, unsigned type, size_t size, uint64_t ts, uint32_t pid,
		       uint32_t tid, unsigned cpu)
{
	h->type = (uint16_t)type;
	h->size = (uint16_t)size;
	h->ts = ts;
	h->pid = pid;
	h->tid = tid;
	h->cpu = (uint16_t)cpu;
}

static inline void w_text_at(struct world *w, unsigned type, uint32_t id, uint32_t tid,
			     uint64_t ts, const char *text)
{
	uint8_t buf[512] = { 0 };
	struct sb_text *t = (struct sb_text *)buf;
	size_t len = strlen(text);

	hdr(&t->h, type, (sizeof(*t) + len + 7) & ~7ul, ts, T_PID, tid, 0);
	t->len = (uint32_t)len;
	t->id = id;
	memcpy(t->text, text, len);
	st_put(&w->meta, t);
}

static inline void w_text(struct world *w, unsigned type, uint32_t id, uint32_t tid,
			  const char *text)
{
	w_text_at(w, type, id, tid, 0, text);
}

/* a thread record of process pid (its thread tid), as the recorder writes one */
static inline void w_thread_of(struct world *w, uint32_t pid, uint32_t tid, const char *text)
{
	uint8_t buf[512] = { 0 };
	struct sb_text *t = (struct sb_text *)buf;
	size_t len = strlen(text);

	hdr(&t->h, SB_REC_THREAD, (sizeof(*t) + len + 7) & ~7ul, 0, pid, tid, 0);
	t->len = (uint32_t)len;
	memcpy(t->text, text, len);
	st_put(&w->meta, t);
}

static inline void world_init(struct world *w)
{
	memset(w, 0, sizeof(*w));
	w_text(w, SB_REC_TARGET, 0, T_PID, "pid=100\ncomm=trainer\ncmdline=python train.py\n");
	w_text(w, SB_REC_THREAD, 0, T_LAUNCHER, "launcher");
	w_text(w, SB_REC_THREAD, 0, T_GPUTHR, "gpu");
	w_text(w, SB_REC_THREAD, 0, T_LOADER, "loader");
	w_text(w, SB_REC_STRING, 7, 0, "sgemm_128x64");
	w_text(w, SB_REC_STRING, 8, 0, "train_step");
	w_text(w, SB_REC_STRING, 9, 0, "cudaLaunchKernel");
	w->kname = 7;
}

static inline void world_free(struct world *w)
{
	free(w->meta.b);
	free(w->host.b);
	free(w->gpu.b);
}

static inline void w_comm(char *dst, const char *src)
{
	size_t n = strlen(src);

	memset(dst, 0, SB_COMM_LEN);
	memcpy(dst, src, n < SB_COMM_LEN ? n : SB_COMM_LEN);
}

static inline void w_comm(char *dst, const char *src);

/* a target thread leaves its CPU to `next` (NULL: the idle task) */
static inline void w_switch_to(struct world *w, uint64_t ts, uint32_t tid, unsigned cpu,
			       unsigned state, const char *next)
{
	struct sb_switch_out r = { 0 };

	hdr(&r.h, SB_EV_SWITCH_OUT, sizeof(r), ts, T_PID, tid, cpu);
	r.state = (uint8_t)state;
	w_comm(r.next_comm, next ? next : "swapper");
	st_put(&w->host, &r);
}

static inline void w_switch_out(struct world *w, uint64_t ts, uint32_t tid, unsigned cpu,
				unsigned state)
{
	w_switch_to(w, ts, tid, cpu, state, NULL);
}

static inline void w_switch_in(struct world *w, uint64_t ts, uint32_t tid, unsigned cpu)
{
	struct sb_switch_in r = { 0 };

	hdr(&r.h, SB_EV_SWITCH_IN, sizeof(r), ts, T_PID, tid, cpu);
	st_put(&w->host, &r);
}

static inline void w_wakeup(struct world *w, uint64_t ts, uint32_t tid, unsigned cpu,
			    uint32_t wpid, uint32_t wtid, const char *wcomm)
{
	struct sb_wakeup r = { 0 };

	hdr(&r.h, SB_EV_WAKEUP, sizeof(r), ts, T_PID, tid, cpu);
	r.waker_pid = wpid;
	r.waker_tid = wtid;
	w_comm(r.waker_comm, wcomm);
	st_put(&w->host, &r);
}

/* another task's slice on cpu, steal_us of it the hypervisor's */
static inline void w_runslice_steal(struct world *w, uint64_t s, uint64_t end, unsigned cpu,
				    uint32_t pid, uint32_t tid, const char *comm, uint32_t steal_us)
{
	struct sb_runslice r = { 0 };

	hdr(&r.h, SB_EV_RUNSLICE, sizeof(r), end, pid, tid, cpu);
	r.start_ns = s;
	r.nwaiting = 1;
	r.steal_us = steal_us;
	w_comm(r.comm, comm);
	st_put(&w->host, &r);
}

static inline void w_runslice(struct world *w, uint64_t s, uint64_t end, unsigned cpu,
			      uint32_t pid, uint32_t tid, const char *comm)
{
	w_runslice_steal(w, s, end, cpu, pid, tid, comm, 0);
}

static inline void w_migrate(struct world *w, uint64_t ts, uint32_t tid, unsigned from,
			     unsigned to)
{
	struct sb_migrate r = { 0 };

	hdr(&r.h, SB_EV_MIGRATE, sizeof(r), ts, T_PID, tid, from);
	r.orig_cpu = (uint16_t)from;
	r.dest_cpu = (uint16_t)to;
	st_put(&w->host, &r);
}

/* a fault of thread tid of process pid at w->fault_addr */
static inline void w_fault_pid(struct world *w, uint64_t ts, uint32_t pid, uint32_t tid,
			       uint64_t maj, uint64_t min)
{
	struct sb_fault r = { 0 };

	r.addr = w->fault_addr;
	hdr(&r.h, SB_EV_FAULT, sizeof(r), ts, pid, tid, T_CPU);
	r.maj_flt = maj;
	r.min_flt = min;
	st_put(&w->host, &r);
}

static inline void w_fault(struct world *w, uint64_t ts, uint32_t tid, uint64_t maj,
			   uint64_t min)
{
	w_fault_pid(w, ts, T_PID, tid, maj, min);
}

/*
 * n back-to-back faults of tid at ts, ts + gap, ..., at addresses from addr
 * one page apart, fault i major when major(i) (NULL: none); maj0 majors
 * before the first. As a fault_run record (run), else n fault records.
 */
static inline void w_faults(struct world *w, uint64_t ts, uint64_t gap, uint64_t n, uint32_t tid,
			    uint64_t addr, uint64_t maj0, bool (*major)(uint64_t i), bool run)
{
	uint64_t maj = maj0, maj_last = maj0;

	for (uint64_t i = 0; i < n; i++) {
		if (!run) {
			w->fault_addr = addr + i * 4096;
			w_fault(w, ts + i * gap, tid, maj, 1000 + i - (maj - maj0));
		}
		if (i == n - 1)
			maj_last = maj;
		if (major && major(i))
			maj++;
	}
	if (run) {
		struct sb_fault_run r = { 0 };

		hdr(&r.h, SB_EV_FAULT_RUN, sizeof(r), ts + (n - 1) * gap, T_PID, tid, T_CPU);
		r.start_ns = ts;
		r.count = n;
		r.addr = r.lo_addr = addr;
		r.last_addr = r.hi_addr = addr + (n - 1) * 4096;
		r.first_maj_flt = maj0;
		r.first_min_flt = 1000;
		r.maj_flt = maj_last;
		r.min_flt = 1000 + (n - 1) - (maj_last - maj0);
		st_put(&w->host, &r);
	}
	w->fault_addr = 0;
}

/*
 * An iosys record that names its file (struct sb_iosys_file): path is given
 * root first ("/ckpt/model.pt") and stored leaf first, as the probe does.
 */
static inline void w_iofile(struct world *w, uint64_t s, uint64_t end, uint32_t tid,
			    uint32_t call, int64_t ret, uint64_t ino, uint8_t kind,
			    const char *path, uint64_t written)
{
	struct sb_iosys_ext r;
	size_t n = strlen(path), o = 0;

	memset(&r, 0, sizeof(r));
	hdr(&r.io.h, SB_EV_IOSYS, sizeof(r), end, T_PID, tid, T_CPU);
	r.io.start_ns = s;
	r.io.call = call;
	r.io.fd = 9;
	r.io.ret = ret;
	r.file.ino = ino;
	r.file.dev = 0x800001;
	r.file.kind = kind;
	r.file.written = written;
	r.file.flags = SB_IO_PATH_TOP;
	while (n > 0) {
		size_t e = n, b;

		while (e > 0 && path[e - 1] == '/')
			e--;
		b = e;
		while (b > 0 && path[b - 1] != '/')
			b--;
		if (e == b)
			break;
		memcpy(r.file.path + o, path + b, e - b);
		o += e - b + 1;
		n = b;
	}
	r.file.path_len = (uint16_t)o;
	st_put(&w->host, &r);
}

/*
 * an mmap record of thread tid of process pid that says what it mapped
 * (struct sb_mmsys_map); path "" : anonymous
 */
static inline void w_mmap_map_pid(struct world *w, uint64_t s, uint64_t end, uint32_t pid,
				  uint32_t tid, uint64_t addr, uint64_t len, const char *path)
{
	struct sb_mmsys_ext r;

	memset(&r, 0, sizeof(r));
	hdr(&r.mm.h, SB_EV_MMSYS, sizeof(r), end, pid, tid, T_CPU);
	r.mm.start_ns = s;
	r.mm.call = SB_SYS_MMAP;
	r.mm.len = len;
	r.mm.ret = (int64_t)addr;
	r.mm.arg = 3; /* PROT_READ | PROT_WRITE */
	r.map.flags = path[0] ? 0x02 : 0x22; /* MAP_PRIVATE, | MAP_ANONYMOUS */
	r.map.fd = path[0] ? 5 : -1;
	if (path[0]) {
		size_t n = strlen(path), b = n;

		while (b > 0 && path[b - 1] != '/')
			b--;
		/* one component is enough for the test: "/name" */
		memcpy(r.map.file.path, path + b, n - b);
		r.map.file.path_len = (uint16_t)(n - b + 1);
		r.map.file.flags = SB_IO_PATH_TOP;
		r.map.file.kind = SB_FILE_REGULAR;
		r.map.file.ino = 99;
	}
	st_put(&w->host, &r);
}

static inline void w_mmap_map(struct world *w, uint64_t s, uint64_t end, uint32_t tid,
			      uint64_t addr, uint64_t len, const char *path)
{
	w_mmap_map_pid(w, s, end, T_PID, tid, addr, len, path);
}

/* alloc / mmsys / reclaim / iosys / cuda intervals */
static inline void w_interval(struct world *w, unsigned type, uint64_t s, uint64_t end,
			      uint32_t tid, uint32_t fn)
{
	uint8_t buf[64] = { 0 };
	struct sb_hdr *h = (struct sb_hdr *)buf;

	switch (type) {
	case SB_EV_ALLOC: {
		struct sb_alloc *r = (void *)buf;

		hdr(h, type, sizeof(*r), end, T_PID, tid, T_CPU);
		r->start_ns = s;
		r->fn = fn;
		r->size = 1 << 20;
		break;
	}
	case SB_EV_MMSYS: {
		struct sb_mmsys *r = (void *)buf;

		hdr(h, type, sizeof(*r), end, T_PID, tid, T_CPU);
		r->start_ns = s;
		r->call = fn ? fn : SB_SYS_MMAP;
		break;
	}
	case SB_EV_RECLAIM: {
		struct sb_reclaim *r = (void *)buf;

		hdr(h, type, sizeof(*r), end, T_PID, tid, T_CPU);
		r->start_ns = s;
		r->kind = SB_RECLAIM_DIRECT;
		break;
	}
	case SB_EV_IOSYS: {
		struct sb_iosys *r = (void *)buf;

		hdr(h, type, sizeof(*r), end, T_PID, tid, T_CPU);
		r->start_ns = s;
		r->call = fn ? fn : SB_IO_WRITE;
		r->fd = 9;
		r->len = r->ret = 1 << 20;
		break;
	}
	case SB_EV_AFFINITY: {
		struct sb_affinity *r = (void *)buf;

		hdr(h, type, sizeof(*r), end, T_PID, tid, T_CPU);
		r->start_ns = s;
		r->pid = fn; /* the thread it moves; 0: the caller */
		break;
	}
	case SB_EV_CUDA: {
		struct sb_cuda *r = (void *)buf;

		hdr(h, type, sizeof(*r), end, T_PID, tid, T_CPU);
		r->start_ns = s;
		r->fn = fn;
		break;
	}
	default:
		abort();
	}
	st_put(&w->host, h);
}

/*
 * a burst of `calls` fast allocator calls over [s, end] that took sum_ns
 * together, with slow calls taking slow_ns inside it
 */
static inline void w_burst(struct world *w, uint64_t s, uint64_t end, uint32_t tid,
			   uint64_t calls, uint64_t sum_ns, uint64_t slow_ns)
{
	struct sb_alloc_burst r = { 0 };

	hdr(&r.h, SB_EV_ALLOC_BURST, sizeof(r), end, T_PID, tid, T_CPU);
	r.start_ns = s;
	r.calls = calls;
	r.sum_ns = sum_ns;
	r.bytes = calls * 64;
	r.slow_ns = slow_ns;
	st_put(&w->host, &r);
}

/*
 * interrupt handlers on tid's time over [s, end]: soft_ns of NET_RX softirqs
 * (soft_count of them), hard_ns of hard interrupt 11 ("virtio0-input.0"),
 * call_ns of function-call IPIs
 */
static inline void w_irq_run(struct world *w, uint64_t s, uint64_t end, uint32_t tid,
			     uint64_t soft_ns, uint32_t soft_count, uint64_t hard_ns, uint32_t hard_count,
			     uint64_t call_ns, uint32_t call_count)
{
	struct sb_irq_run r = { 0 };

	hdr(&r.h, SB_EV_IRQ_RUN, sizeof(r), end, T_PID, tid, T_CPU);
	r.start_ns = s;
	r.soft_ns = soft_ns;
	r.soft_count = soft_count;
	r.vec_ns[3] = (uint32_t)soft_ns;
	r.hard_ns = hard_ns;
	r.hard_count = hard_count;
	r.hard_irq = hard_count ? 11 : 0;
	if (hard_count)
		memcpy(r.hard_name, "virtio0-input.0", 16);
	r.sys_ns[SB_SYSIRQ_CALL] = (uint32_t)call_ns;
	r.sys_count = call_count;
	st_put(&w->host, &r);
}

static inline void w_step(struct world *w, uint64_t ts, uint32_t tid, uint64_t n)
{
	struct sb_step_ext r = { 0 };

	hdr(&r.s.h, SB_EV_STEP, w->fast_marks ? sizeof(r) : sizeof(r.s), ts, T_PID, tid, T_CPU);
	r.s.step = n;
	r.s.source = SB_STEP_USDT;
	r.alloc.fast_calls = w->fast_calls;
	st_put(&w->host, &r);
}

static inline void w_gpu(struct world *w, unsigned kind, unsigned sub, uint64_t s, uint64_t end,
			 uint32_t tid, uint32_t corr, uint32_t name_id, uint64_t bytes)
{
	struct sb_gpu g = { 0 };

	hdr(&g.h, SB_REC_GPU, sizeof(g), s, T_PID, tid, 0);
	g.h.flags = (uint16_t)kind;
	g.end_ns = end;
	g.sub = sub;
	g.correlation_id = corr;
	g.name_id = name_id;
	g.bytes = bytes;
	g.stream = 7;
	g.grid[0] = 64;
	g.block[0] = 256;
	st_put(&w->gpu, &g);
}

typedef void (*inject_fn)(struct world *w, uint64_t at, uint64_t len, void *arg);

struct sopt {
	uint64_t pre;            /* host work before the launch, injection excluded */
	uint64_t gpu;            /* kernel time */
	uint64_t len;            /* injection length */
	inject_fn inj;
	void *arg;
	bool busy;               /* inject while the kernel runs, not before the launch */
};

/* one standard step from S (see the top); returns the next step's start */
static inline uint64_t std_step(struct world *w, uint64_t S, uint64_t n, const struct sopt *o)
{
	uint64_t tl, ks, ke, busy_inj = 0;

	if (w->mark == W_USDT)
		w_step(w, S, T_LAUNCHER, n);
	else if (w->mark == W_NVTX)
		w_gpu(w, SB_GPU_MARKER, SB_MARK_RANGE_PUSH, S, S, T_LAUNCHER, 0, 8, n);
	else if (w->mark == W_GPU_MARKER)
		w_gpu(w, SB_GPU_MARKER, SB_MARK_STEP_BEGIN, S, S, T_LAUNCHER, 0, 0, n);
	if (o->inj && !o->busy)
		o->inj(w, S + 1 * MS, o->len, o->arg);
	tl = S + o->pre + (o->inj && !o->busy ? o->len : 0);
	ks = tl + 20 * US;
	ke = ks + o->gpu + w->kernel_extra;
	w->kernel_extra = 0;
	if (!w->no_gpu) {
		uint32_t c = ++w->corr;

		w_gpu(w, SB_GPU_API, SB_API_LAUNCH, tl, tl + 10 * US, T_LAUNCHER, c, 9, 0);
		w_gpu(w, SB_GPU_KERNEL, 0, ks, ke, 0, c, w->kname, 0);
	}
	if (o->inj && o->busy) {
		/* the launcher keeps computing while the GPU is busy, then syncs */
		o->inj(w, tl + 1 * MS, o->len, o->arg);
		busy_inj = 1 * MS + o->len;
	}
	{
		uint64_t sy = tl + 10 * US + busy_inj, sleep = sy + 2 * US;

		if (!w->no_gpu)
			w_gpu(w, SB_GPU_API, SB_API_SYNC, sy, max_u64(ke, sleep) + 10 * US, T_LAUNCHER,
			      ++w->corr, 0, 0);
		uint64_t next = max_u64(ke, sleep) + 1 * MS;

		if (sleep < ke) {
			w_switch_out(w, sleep, T_LAUNCHER, T_CPU, SB_STATE_SLEEP);
			w_wakeup(w, ke + 2 * US, T_LAUNCHER, T_CPU, T_PID, T_GPUTHR, "gpu");
			w_switch_in(w, ke + 10 * US, T_LAUNCHER, T_CPU);
		}
		if (w->mark == W_NVTX)
			w_gpu(w, SB_GPU_MARKER, SB_MARK_RANGE_POP, next - 1 * US, next - 1 * US,
			      T_LAUNCHER, 0, 0, n);
		else if (w->mark == W_GPU_MARKER)
			w_gpu(w, SB_GPU_MARKER, SB_MARK_STEP_END, next - 1 * US, next - 1 * US,
			      T_LAUNCHER, 0, 0, n);
		return next;
	}
}

/* preempted for len by pid 900 "noisy" on the launcher's CPU */
static inline void inj_preempt(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_RUNNABLE);
	w_runslice(w, at, at + len, T_CPU, 900, 900, "noisy");
	w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
}

struct feed_item {
	uint64_t ts, seq;
	const struct sb_hdr *h;
};

static inline int feed_cmp(const void *a, const void *b)
{
	const struct feed_item *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * The order the recorder delivers a world in, after its metadata: host records
 * by time, GPU records merged in as if they arrived gpu_delay after they end.
 * n items, to free.
 */
static inline struct feed_item *world_order(const struct world *w, uint64_t gpu_delay, size_t *n)
{
	size_t k = 0, off;
	struct feed_item *it;

	*n = w->host.n + w->gpu.n;
	it = calloc(*n ? *n : 1, sizeof(*it));
	if (!it)
		abort();
	for (off = 0; off < w->host.len; k++) {
		const struct sb_hdr *h = (const void *)(w->host.b + off);

		it[k] = (struct feed_item){ h->ts, k, h };
		off += h->size;
	}
	for (off = 0; off < w->gpu.len; k++) {
		const struct sb_hdr *h = (const void *)(w->gpu.b + off);
		const struct sb_gpu *g = (const void *)h;

		/* a GPU record is written when its activity ends */
		it[k] = (struct feed_item){ (g->end_ns > h->ts ? g->end_ns : h->ts) + gpu_delay, k, h };
		off += h->size;
	}
	qsort(it, *n, sizeof(*it), feed_cmp);
	return it;
}

/* Feed: metadata first, then the records in world_order */
static inline void world_feed(struct engine *e, const struct world *w, uint64_t gpu_delay)
{
	size_t n, off;
	struct feed_item *it;

	for (off = 0; off < w->meta.len;) {
		const struct sb_hdr *h = (const void *)(w->meta.b + off);

		engine_feed(e, h);
		off += h->size;
	}
	it = world_order(w, gpu_delay, &n);
	for (size_t i = 0; i < n; i++)
		engine_feed(e, it[i].h);
	free(it);
}

/*
 * The world as `stepblame record` writes it (GPU records 500 ms late), with
 * the n_extra records of extra put in after the at-th record (none: at past
 * the end). The trailer says the capture ran from start to the last record.
 */
static inline bool world_write(const struct world *w, const char *path, uint64_t start,
			       const struct sb_hdr *const *extra, int n_extra, size_t at)
{
	struct sbt_writer *wr = sbt_create(path);
	uint64_t last = start;
	struct feed_item *it;
	bool ok = true;
	size_t n, off;

	if (!wr)
		return false;
	for (off = 0; off < w->meta.len;) {
		const struct sb_hdr *h = (const void *)(w->meta.b + off);

		ok &= sbt_write(wr, h) == 0;
		off += h->size;
	}
	it = world_order(w, 500000000ull, &n);
	for (size_t i = 0; i < n; i++) {
		if (i == at)
			for (int j = 0; j < n_extra; j++)
				ok &= sbt_write(wr, extra[j]) == 0;
		ok &= sbt_write(wr, it[i].h) == 0;
		last = it[i].h->ts > last ? it[i].h->ts : last;
	}
	free(it);
	return sbt_finish(wr, SBT_END_DURATION, start, last + 1, 0) == 0 && ok;
}

static inline struct engine *new_engine(const struct engine_opts *o)
{
	char err[256];
	struct engine_opts d = { 0 };

	return engine_new(o ? o : &d, err, sizeof(err));
}

/* sum of a step's blame for cause; pid: 0 any, else only that culprit's */
static inline uint64_t blame_of(const struct eng_step *s, int cause, uint32_t pid)
{
	uint64_t ns = 0;

	for (uint32_t i = 0; i < s->nblame; i++)
		if (s->blame[i].cause == cause && (!pid || (s->blame[i].has_who &&
							     s->blame[i].who.pid == pid)))
			ns += s->blame[i].ns;
	return ns;
}

static inline const struct eng_step *step_no(const struct engine *e, uint64_t n)
{
	for (uint64_t i = engine_first_step(e); i < engine_nsteps(e); i++)
		if (engine_step(e, i)->step == n && !engine_step(e, i)->incomplete)
			return engine_step(e, i);
	return NULL;
}

/*
 * What the waker did besides its own code (the loader T_LOADER, on CPU 2):
 * 101 faults 10 us apart in a region mmap()ed before (back to back: 1 ms and
 * one fault's cost), an fsync of /data/shard3.bin of 10 ms with 8 ms of it in
 * D, 2 ms of direct reclaim, an allocator call of 4 ms with one fault in it,
 * and a fault that sleeps 8 ms in D.
 */
#define ACT_MAP 0x7f0000000000ull

static inline void inj_busy_loader(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	(void)arg;
	w_mmap_map(w, at - 3 * MS, at - 3 * MS + 50 * US, T_LOADER, ACT_MAP, 64 << 20, "");
	w_switch_in(w, at - 1 * MS, T_LOADER, 2);
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_SLEEP);
	for (int i = 0; i <= 100; i++)
		w_fault(w, at + 2 * MS + (uint64_t)i * 10 * US, T_LOADER, 0, (uint64_t)i);
	w_iofile(w, at + 5 * MS, at + 15 * MS, T_LOADER, SB_IO_FSYNC, 0, 77, SB_FILE_REGULAR,
		 "/data/shard3.bin", 0);
	w_switch_out(w, at + 6 * MS, T_LOADER, 2, SB_STATE_DISK);
	w_wakeup(w, at + 14 * MS, T_LOADER, 2, 0, 0, "swapper/2");
	w_switch_in(w, at + 14 * MS, T_LOADER, 2);
	w_interval(w, SB_EV_RECLAIM, at + 20 * MS, at + 22 * MS, T_LOADER, 0);
	w_interval(w, SB_EV_ALLOC, at + 25 * MS, at + 29 * MS, T_LOADER, SB_FN_MALLOC);
	w_fault(w, at + 26 * MS, T_LOADER, 0, 200);
	w_fault(w, at + 32 * MS, T_LOADER, 0, 201);
	w_switch_out(w, at + 32 * MS + 1 * US, T_LOADER, 2, SB_STATE_DISK);
	w_wakeup(w, at + 40 * MS, T_LOADER, 2, 0, 0, "swapper/2");
	w_switch_in(w, at + 40 * MS, T_LOADER, 2);
	w_wakeup(w, at + len - 5 * US, T_LAUNCHER, T_CPU, T_PID, T_LOADER, "loader");
	w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
}

#endif
