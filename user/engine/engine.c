// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The attribution engine (engine.h). How it works, in order:
 *
 * 1. Reorder. Records arrive in drain order: kernel events nearly in time
 *    order, GPU records in batches up to lag_ns late, and records with a
 *    duration (runslice, reclaim, mmsys, alloc, alloc_burst, iosys, cuda) at
 *    their end (an alloc_burst even later: when the next call, a maximum span
 *    or the agent's once-a-second flush ends it). Each timed
 *    record is keyed by the time it starts to matter (its start for intervals)
 *    and parked in a calendar queue of ~1 ms buckets; a bucket is swept once
 *    the newest timestamp seen is lag_ns past it. Text records take effect at
 *    once. The queue holds lag_ns worth of records: that is the memory bound.
 *
 * 2. Sweep. In time order the engine keeps every target thread's state
 *    (running, runnable on CPU c, sleeping S/D), the tasks that ran on each
 *    CPU while a target thread waited (runslices), a short history of every
 *    thread's off-CPU episodes (for wakeup chains), and the GPU's busy union.
 *    A gap opens when the sweep passes the end of the busy union and closes at
 *    the next GPU operation's start.
 *
 * 3. Accumulate. Only candidate threads (those that mark steps or launch GPU
 *    work) can be critical. While a gap is open, each candidate's time is
 *    classified (cause, culprit) into an accumulator per (gap, step) piece.
 *    When the gap closes, the accumulator of the thread that launched the
 *    closing operation is committed to its step; the others are dropped. So
 *    nothing per event is kept past the window. Why a thread slept is known
 *    only when it is woken: until then its sleep waits in the accumulator as
 *    a few pending intervals.
 *
 * 4. Finalise. A step is final when its end mark has been swept and every
 *    piece of it committed (a gap still open lag_ns after the step ended is
 *    committed to the step's marking thread).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "format/gpu.h"
#include "base/util.h"
#include "format/costs.h"
#include "format/trace.h"

#define DEFAULT_LAG_NS 3000000000ull
#define MIN_HIST_NS 2000000000ull
#define BK_SHIFT 20                     /* ~1.05 ms buckets */
#define MAX_CAND 16
#define CUL_MAX 48
#define PEND_MAX 8
#define OV_MAX 16
#define BOV_MAX 4
/*
 * A burst of fast allocator calls whose calls (fast and slow, probe traps
 * included) fill at least STORM_NUM/STORM_DEN of its span is an allocation
 * storm: the pauses between its calls are the loop that drives them (and
 * whatever interrupted it), so all of the span's on-CPU time that nothing
 * else explains is alloc. A sparser burst claims only its calls' time.
 */
#define STORM_NUM 3
#define STORM_DEN 4
#define CHAIN_DEPTH 3
/*
 * Page faults: the kernel gives only the entry. A fault followed by another
 * fault of the same thread within FAULT_RUN_NS, nothing in between, is taken to
 * have lasted until it (back-to-back faults: touching fresh memory); those
 * gaps also calibrate the per-fault cost charged to an isolated fault. The
 * default is the cost measured on this project's machines (FIELD-NOTES: 3.06
 * us untraced + 0.45 us traced).
 */
#define FAULT_RUN_NS 1000000ull
#define DEFAULT_FAULT_NS 3500ull
#define FAULT_CALIB_MIN 64
#define FH_PER_OCT 16
#define FH_OCT 21
#define LIVE_WINDOW 1024
#define CORR_SLOTS 65536
#define RES_CHUNK 1024
#define BLAME_CHUNK 4096
/*
 * Bounds on what a trace (or a trainer, live) can make the engine hold: the
 * threads followed at once, names, kernel shapes, interferers, probe lines,
 * and the records one reorder bucket may pile up when time stops moving.
 */
#define THR_MAX 65536
#define THR_RECLAIM_EVERY 4096   /* misses of a full table between two reclaims */
#define STR_MAX (1u << 17)
#define STR_BYTES_MAX (64ull << 20)
#define KS_MAX 32768
#define ITF_MAX 65536
#define PROBES_MAX 256
#define FRONTIER_MAX (1u << 18)
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

_Static_assert(ENG_MAX_BLAME >= ENG_NCAUSE, "a step must hold one entry per cause");

static const char *const cause_names[ENG_NCAUSE] = {
	[ENG_CPU_WAIT] = "cpu_wait", [ENG_MIGRATION] = "migration",
	[ENG_PAGE_FAULT] = "page_fault", [ENG_MEM_RECLAIM] = "mem_reclaim",
	[ENG_ALLOC] = "alloc", [ENG_IO_WAIT] = "io_wait", [ENG_BLOCKED] = "blocked",
	[ENG_CUDA_SYNC] = "cuda_sync", [ENG_CUDA_ALLOC] = "cuda_alloc",
	[ENG_CUDA_API] = "cuda_api", [ENG_HOST_COMPUTE] = "host_compute",
	[ENG_GPU_SLOW] = "gpu_slow", [ENG_UNKNOWN] = "unknown",
};

static const char *const count_names[ENG_NCOUNT] = {
	[ENG_N_FAULTS] = "faults", [ENG_N_MAJOR_FAULTS] = "major_faults",
	[ENG_N_PREEMPT] = "preemptions", [ENG_N_MIGRATIONS] = "migrations",
	[ENG_N_ALLOCS] = "slow_allocs", [ENG_N_BURST_ALLOCS] = "burst_allocs",
	[ENG_N_MMAP] = "mmap_calls", [ENG_N_IO] = "io_calls",
	[ENG_N_RECLAIMS] = "reclaims", [ENG_N_CUDA] = "cuda_calls", [ENG_N_SLEEPS] = "sleeps",
	[ENG_N_GPU_OPS] = "gpu_ops",
};

/* overlay priority while on CPU or asleep: the innermost explanation wins */
static const uint8_t ov_prio[ENG_NCAUSE] = {
	[ENG_MEM_RECLAIM] = 7, [ENG_PAGE_FAULT] = 6, [ENG_IO_WAIT] = 5, [ENG_CUDA_SYNC] = 4,
	[ENG_CUDA_ALLOC] = 4, [ENG_CUDA_API] = 3, [ENG_ALLOC] = 2, [ENG_MIGRATION] = 1,
};

const char *eng_cause_name(int c)
{
	return c >= 0 && c < ENG_NCAUSE ? cause_names[c] : "unknown";
}

const char *eng_count_name(int c)
{
	return c >= 0 && c < ENG_NCOUNT ? count_names[c] : "?";
}

const char *eng_step_src_name(int s)
{
	switch (s) {
	case ENG_SRC_USDT: return "usdt";
	case ENG_SRC_UPROBE: return "uprobe";
	case ENG_SRC_GPU_MARKER: return "gpu_marker";
	case ENG_SRC_NVTX: return "nvtx";
	case ENG_SRC_KERNEL: return "kernel";
	}
	return "none";
}

/* ------------------------------------------------------------ structures */

enum tstate { TS_UNKNOWN, TS_RUNNING, TS_RUNNABLE, TS_SLEEP_S, TS_SLEEP_D, TS_DEAD };
enum { EP_RUN = 1, EP_SLEEP_S, EP_SLEEP_D };

struct episode {
	uint64_t s, e;
	uint64_t emax;           /* the largest e pushed up to this one (lets chain() skip) */
	uint32_t wpid, wtid;     /* sleeps: the waker */
	uint16_t cpu;
	uint8_t kind;
};

struct ovl {
	uint64_t s, e;
	uint8_t cause;
};

/*
 * A burst of fast allocator calls (sb_alloc_burst): of the thread's on-CPU
 * time in [s, e] that nothing else explains, up to `left` ns is alloc (the
 * time the calls took together; for a storm, all of it), taken in time
 * order, whether a gap is open or not; the rest is host_compute.
 */
struct bov {
	uint64_t s, e, left;
};

struct thr {
	uint32_t tid, pid;
	char comm[SB_COMM_LEN + 1];
	bool sink;               /* stands for every thread the full table cannot follow */
	uint8_t state;
	bool migrated;           /* moved while runnable: the wait that follows is the move's */
	bool sleep_migr;         /* the sleep began by handing the CPU to the migration stopper */
	uint16_t cpu;
	uint64_t since;
	/* history of off-CPU episodes, a ring */
	struct episode *ep;
	uint32_t ep_head, ep_n, ep_cap;
	uint64_t ep_emax;        /* the largest episode end ever pushed */
	/* candidates only */
	int cand;
	uint64_t last_cut;
	struct ovl ov[OV_MAX];
	uint32_t nov;
	struct bov bov[BOV_MAX];
	uint32_t nbov;
	bool f_open, f_decided, f_blocked;
	uint64_t f_r, f_e;
	uint64_t last_maj;
	bool maj_known;
	uint64_t aff_end;        /* return of its last sched_setaffinity() */
	uint8_t last_ev;         /* type of the previous own event */
	uint64_t last_ev_ts;
	/* NVTX ranges pushed on this thread */
	uint32_t *nvtx;
	uint32_t nvtx_n, nvtx_cap;
	/* timeline: its slice in one state, being extended */
	const char *track_state;
	uint64_t track_start, track_end;
};

struct cul {
	uint8_t cause;
	struct eng_who who;
	uint64_t ns;
};

struct pend {
	uint64_t a, b;
};

struct acc {
	uint64_t ns[ENG_NCAUSE];
	uint32_t cnt[ENG_NCOUNT];
	struct cul *cul;
	uint32_t ncul, capcul;
	struct pend pend[PEND_MAX];
	uint32_t npend;
	uint8_t pend_state;
	uint64_t pend_extra;
};

struct piece {
	uint64_t step_seq;
	uint64_t start, end;
	bool closed;
	struct acc acc[MAX_CAND];
};

struct crit_ns {
	uint32_t tid;
	uint64_t ns;
};

struct swip {
	uint64_t seq, number;
	uint64_t start, end;
	bool ended, incomplete;
	uint32_t marker_tid;
	uint32_t open_pieces;
	uint64_t idle_ns, gpu_slow_ns;
	struct acc sacc;
	struct crit_ns crit[8];
	uint32_t ncrit;
	uint32_t gpu_ops;
	uint64_t tev[SB_NCOST];  /* the target's events in it, by cost class */
	bool sampled;            /* the guard had the allocator probes duty-cycled in it */
};

struct rs {
	uint64_t s, e;
	uint32_t pid, tid;
	char comm[SB_COMM_LEN];
};

struct cpuq {
	struct rs *v;
	uint32_t head, n, cap;
};

struct qent {
	uint64_t key, seq;
	uint32_t len, pad;
};

/*
 * A bucket's records, in chunks of one size: a swept bucket's chunks go on a
 * free list for the next buckets (no allocation, and they are still in the
 * cache), so the memory is what the window held at most.
 */
#define BCHUNK_BYTES 2048
struct bchunk {
	struct bchunk *next;
	uint32_t len, pad;
	uint8_t data[BCHUNK_BYTES - 16];
};

struct bucket {
	struct bchunk *head, *tail;
	uint32_t n;
};

struct qidx {
	uint64_t key, seq;
	const struct qent *q;
};

struct ovf {
	uint64_t key, seq;
	void *rec;
};

struct p2 {
	int n;
	double q[5], np[5], dn[5];
	int pos[5];
};

struct kstat {
	uint32_t name_id, grid[3], block[3];
	bool used;
	struct p2 med;
};

struct str {
	uint32_t id;
	uint32_t alloc;          /* bytes of text */
	char *text;
	bool nvtx, kernel;
};

struct interf {
	uint32_t pid;
	char comm[SB_COMM_LEN + 1];
	uint64_t ns;
	bool used;
};

/* a chunk of results, with the blame entries of its steps (freed together) */
struct bpool {
	struct bpool *next;
	uint32_t used, pad;
	struct eng_blame b[BLAME_CHUNK];
};

struct rchunk {
	struct eng_step s[RES_CHUNK];
	struct bpool *pool;      /* newest first */
};

/*
 * Log histogram: values below HG_SUB exact, above that HG_SUB buckets per
 * octave, so a bucket is at most 1/HG_SUB of its lower bound wide and its
 * middle within 1/(2 HG_SUB) of any value in it.
 */
#define HG_SUB 64
#define HG_SHIFT 6               /* log2(HG_SUB) */
#define HG_N (HG_SUB + (64 - HG_SHIFT) * HG_SUB)

struct hist {
	uint64_t n;
	uint64_t b[HG_N];
};

/* window mode: summaries over every step, the detail of the last ones */
struct allsum {
	uint64_t nsteps, ncomplete;
	uint64_t min, max;
	struct hist dur, idle, tracer, tracer_ppm, cause[ENG_NCAUSE];
	uint64_t cause_total[ENG_NCAUSE];
	uint64_t busy_total, dur_total, tracer_total, sampled, tracer_ppm_max;
};

struct engine {
	struct engine_opts o;
	regex_t re_nvtx, re_kernel;
	bool has_nvtx, has_kernel;
	uint64_t lag, hist;

	uint64_t records, seq;
	uint64_t max_ts;
	uint64_t first_ts;
	bool have_ts;

	/* reorder window */
	struct bucket *bk;
	uint32_t nbk;
	uint64_t rel;            /* next bucket index (key >> BK_SHIFT) to sweep */
	bool q_init;
	uint64_t queued, queued_peak, qbytes, qbytes_peak;
	struct qidx *idx;
	size_t idx_cap;
	uint64_t *bkbits;        /* buckets that hold records */
	uint64_t frontier_flushes;
	struct bchunk *bfree;
	struct ovf *ovf;
	size_t novf, capovf;

	/* sweep */
	uint64_t now;
	bool in_release;

	/* threads */
	struct thr **thr;
	uint32_t nthr, capthr;
	uint32_t *thash;         /* index + 1, open addressing */
	uint32_t thash_cap;
	struct thr *sink;        /* the table is full: what thr_get gives for a new thread */
	uint64_t thr_misses;     /* since the last reclaim */
	bool thr_reclaimed;      /* any reclaim tried */
	uint64_t thr_forgotten, thr_lost;
	struct thr *cand[MAX_CAND];
	int ncand;
	uint64_t episodes, episodes_peak;

	/* CPUs */
	struct cpuq *cpu;
	uint32_t ncpu;
	uint64_t runslices, runslices_peak;

	/* GPU */
	bool gpu_fed, gpu_started;
	uint64_t busy_until;
	bool gap_open;
	struct { uint32_t corr, tid; bool queued; } *corr;
	uint64_t gpu_queued;     /* operations launched that have not started on the GPU */
	uint32_t last_launch_tid;
	struct kstat *ks;
	uint32_t ks_cap, ks_n;
	uint64_t ks_dropped;
	uint64_t gpu_max_end;
	/* the capture's clock: GPU records outside [clk_lo, clk_hi] +- margin are rejected */
	uint64_t clk_lo, clk_hi;  /* clk_lo > clk_hi: nothing known yet */
	uint64_t gpu_rejected;

	/* strings */
	struct str *strs;
	uint32_t nstr, capstr;
	uint32_t *shash;
	uint32_t shash_cap;
	uint64_t str_bytes, str_dropped;

	/* pieces of the open gap, oldest first */
	struct piece **pq;
	uint32_t pq_head, pq_n, pq_cap;
	struct piece *cur_piece;
	struct piece **pfree;
	uint32_t npfree, cappfree;
	uint64_t pieces_live, pieces_peak;

	/* steps */
	int src;                 /* chosen source */
	int forced_src;
	struct swip **sq;        /* in flight, oldest first */
	uint32_t sq_head, sq_n, sq_cap;
	struct swip *cur_step;
	uint64_t next_seq;
	uint64_t src_count[ENG_SRC_KERNEL + 1];
	uint64_t steps_flight_peak;
	struct rchunk **res;      /* results in chunks of RES_CHUNK: never moved, no slack */
	uint64_t nres, nchunks;   /* steps finalised; chunks held */
	uint64_t res_cap;         /* room in res */
	uint64_t chunk0;          /* absolute number of res[0] (window mode drops old chunks) */
	uint64_t keep;            /* window mode: steps kept in detail at least; 0 all */
	struct allsum *ws;        /* window mode: summaries over all steps */
	engine_step_cb cb;
	void *cb_ctx;

	/* fault model */
	uint32_t fh[FH_PER_OCT * FH_OCT];
	uint64_t fh_n;
	uint64_t fault_cost;     /* current estimate */
	uint64_t faults_blocked;

	/* interferers */
	struct interf *itf;
	uint32_t itf_cap, itf_n;
	uint64_t itf_folded, itf_other_ns;

	/* target, capture, loss */
	uint32_t tpid;
	char tcomm[SB_COMM_LEN + 1];
	char *tcmdline;
	bool complete;
	uint32_t end_reason;
	uint64_t trailer_ts, trailer_start;
	char *truncated;
	struct sb_drops drops;
	bool have_drops;
	uint64_t late, malformed;
	uint64_t repaired;       /* switch-ins inferred from runslices */
	char **probes_missing;
	uint32_t nprobes_missing;
	uint64_t probes_dropped;
	bool finished;
	struct eng_summary final_summary; /* engine_finish: over all steps, final */

	/* the tracer's own cost: the model, the guard's mode changes (ts, mode) */
	struct sb_costs costs;
	bool costs_given;
	struct eng_guard guard;
	struct { uint64_t ts; int mode; } *gch;
	uint32_t gch_n, gch_cap, gch_next;
	int gch_mode;            /* the mode before gch[gch_next] */

	uint64_t heap, heap_peak;
};

/* ---------------------------------------------------------------- memory */

static void heap_add(struct engine *e, int64_t d)
{
	e->heap += d;
	if (e->heap > e->heap_peak)
		e->heap_peak = e->heap;
}

/* grow *p (elements of size sz) to hold at least need; aborts on OOM */
static void grow(struct engine *e, void **p, uint32_t *cap, size_t need, size_t sz)
{
	size_t nc;
	void *q;

	if (need <= *cap)
		return;
	nc = *cap ? *cap : 8;
	while (nc < need)
		nc *= 2;
	q = realloc(*p, nc * sz);
	if (!q) {
		sb_err("out of memory in the blame engine");
		abort();
	}
	heap_add(e, (int64_t)((nc - *cap) * sz));
	memset((char *)q + *cap * sz, 0, (nc - *cap) * sz);
	*p = q;
	*cap = (uint32_t)nc;
}

static void *xcalloc(struct engine *e, size_t n, size_t sz)
{
	void *p = calloc(n, sz);

	if (!p) {
		sb_err("out of memory in the blame engine");
		abort();
	}
	heap_add(e, (int64_t)(n * sz));
	return p;
}

static char *xstrndup(struct engine *e, const char *s, size_t n)
{
	char *p = xcalloc(e, n + 1, 1);

	memcpy(p, s, n);
	return p;
}

static void comm_copy(char *dst, const char *src)
{
	memcpy(dst, src, SB_COMM_LEN);
	dst[SB_COMM_LEN] = 0;
}

#define RES(e, i) (&(e)->res[(i) / RES_CHUNK - (e)->chunk0]->s[(i) % RES_CHUNK])

/* the first step still held (window mode drops the oldest) */
static uint64_t first_kept(const struct engine *e)
{
	return e->chunk0 * RES_CHUNK;
}

/*
 * A step's blame entries, kept with those of the other steps of its chunk: a
 * step holds only as many as it has, and they go when the chunk goes.
 */
static const struct eng_blame *blame_store(struct engine *e, struct rchunk *c,
					   const struct eng_blame *b, uint32_t n)
{
	struct eng_blame *p;

	if (!c->pool || c->pool->used + n > BLAME_CHUNK) {
		struct bpool *q = xcalloc(e, 1, sizeof(*q));

		q->next = c->pool;
		c->pool = q;
	}
	p = &c->pool->b[c->pool->used];
	memcpy(p, b, n * sizeof(*b));
	c->pool->used += n;
	return p;
}

static void pools_free(struct engine *e, struct rchunk *c)
{
	while (c->pool) {
		struct bpool *q = c->pool;

		c->pool = q->next;
		free(q);
		heap_add(e, -(int64_t)sizeof(*q));
	}
}

static uint64_t min64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* -------------------------------------------------------- P2 quantile */

static void p2_add(struct p2 *p, double x, double quant)
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

static double p2_median(const struct p2 *p)
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

/* ------------------------------------------------------------- threads */

static uint32_t hash32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352dU;
	x ^= x >> 15;
	x *= 0x846ca68bU;
	x ^= x >> 16;
	return x;
}

static struct thr *thr_find(const struct engine *e, uint32_t tid)
{
	if (!e->thash_cap)
		return NULL;
	for (uint32_t i = hash32(tid) & (e->thash_cap - 1);; i = (i + 1) & (e->thash_cap - 1)) {
		uint32_t v = e->thash[i];

		if (!v)
			return NULL;
		if (e->thr[v - 1]->tid == tid)
			return e->thr[v - 1];
	}
}

static void thash_put(struct engine *e, uint32_t tid, uint32_t idx1)
{
	for (uint32_t i = hash32(tid) & (e->thash_cap - 1);; i = (i + 1) & (e->thash_cap - 1)) {
		if (!e->thash[i]) {
			e->thash[i] = idx1;
			return;
		}
	}
}

static void thash_rebuild(struct engine *e)
{
	memset(e->thash, 0, e->thash_cap * sizeof(uint32_t));
	for (uint32_t i = 0; i < e->nthr; i++)
		thash_put(e, e->thr[i]->tid, i + 1);
}

/* nothing of it is needed any more: dead long enough, not critical, not the process */
static bool thr_forgettable(const struct engine *e, const struct thr *t)
{
	return t->state == TS_DEAD && t->cand < 0 && t->tid != e->tpid && e->now > t->since &&
	       e->now - t->since > e->hist + e->lag;
}

static void thr_release(struct engine *e, struct thr *t)
{
	free(t->ep);
	heap_add(e, -(int64_t)(t->ep_cap * sizeof(*t->ep)));
	e->episodes -= t->ep_n;
	free(t->nvtx);
	heap_add(e, -(int64_t)(t->nvtx_cap * sizeof(*t->nvtx)));
	free(t);
	heap_add(e, -(int64_t)sizeof(*t));
}

/*
 * The table is full: forget the threads that exited long ago (the timeline
 * is told their names). Tried again only after THR_RECLAIM_EVERY more
 * new threads found it full, so a table of live threads costs nothing per
 * record. False if there is still no room.
 */
static bool thr_room(struct engine *e)
{
	uint32_t k = 0;

	if (e->thr_reclaimed && ++e->thr_misses < THR_RECLAIM_EVERY)
		return false;
	e->thr_misses = 0;
	e->thr_reclaimed = true;
	for (uint32_t i = 0; i < e->nthr; i++) {
		struct thr *t = e->thr[i];

		if (!thr_forgettable(e, t)) {
			e->thr[k++] = t;
			continue;
		}
		if (e->o.timeline.thread_forgotten && t->comm[0])
			e->o.timeline.thread_forgotten(e->o.timeline.ctx, t->tid, t->comm);
		thr_release(e, t);
		e->thr_forgotten++;
	}
	if (k < e->nthr) {
		e->nthr = k;
		thash_rebuild(e);
	}
	return e->nthr < THR_MAX;
}

/* what a thread the table cannot hold is given: followed by nobody, never critical */
static struct thr *thr_sink(struct engine *e)
{
	if (!e->sink) {
		e->sink = xcalloc(e, 1, sizeof(*e->sink));
		e->sink->sink = true;
		e->sink->cand = -1;
		e->sink->tid = UINT32_MAX;
	}
	e->sink->state = TS_UNKNOWN;
	e->thr_lost++;
	return e->sink;
}

/* a thread not seen before (kept out of line: thr_get is on every record's path) */
static __attribute__((noinline)) struct thr *thr_new(struct engine *e, uint32_t tid, uint32_t pid)
{
	struct thr *t;

	if (e->nthr >= THR_MAX && !thr_room(e))
		return thr_sink(e);
	if ((e->nthr + 1) * 2 > e->thash_cap) {
		uint32_t nc = e->thash_cap ? e->thash_cap * 2 : 256;

		free(e->thash);
		heap_add(e, -(int64_t)(e->thash_cap * sizeof(uint32_t)));
		e->thash = xcalloc(e, nc, sizeof(uint32_t));
		e->thash_cap = nc;
		for (uint32_t i = 0; i < e->nthr; i++)
			thash_put(e, e->thr[i]->tid, i + 1);
	}
	grow(e, (void **)&e->thr, &e->capthr, e->nthr + 1, sizeof(*e->thr));
	t = xcalloc(e, 1, sizeof(*t));
	t->tid = tid;
	t->pid = pid ? pid : e->tpid;
	t->cand = -1;
	t->state = TS_UNKNOWN;
	e->thr[e->nthr++] = t;
	thash_put(e, tid, e->nthr);
	return t;
}

static struct thr *thr_get(struct engine *e, uint32_t tid, uint32_t pid)
{
	struct thr *t = thr_find(e, tid);

	return t ? t : thr_new(e, tid, pid);
}

static const char *thr_comm(const struct engine *e, uint32_t tid)
{
	struct thr *t = thr_find(e, tid);

	return t && t->comm[0] ? t->comm : "";
}

static void ep_push(struct engine *e, struct thr *t, uint8_t kind, uint64_t s, uint64_t end,
		    uint16_t cpu, uint32_t wpid, uint32_t wtid)
{
	struct episode *p;

	if (end <= s || t->sink)
		return;
	/* the history only needs to reach back as far as a wakeup chain looks */
	while (t->ep_n && t->ep[t->ep_head].e + e->hist < e->now) {
		t->ep_head = (t->ep_head + 1) % t->ep_cap;
		t->ep_n--;
		e->episodes--;
	}
	if (t->ep_n == t->ep_cap) {
		uint32_t nc = t->ep_cap ? t->ep_cap * 2 : 8;
		struct episode *n = xcalloc(e, nc, sizeof(*n));

		for (uint32_t i = 0; i < t->ep_n; i++)
			n[i] = t->ep[(t->ep_head + i) % t->ep_cap];
		free(t->ep);
		heap_add(e, -(int64_t)(t->ep_cap * sizeof(*n)));
		t->ep = n;
		t->ep_cap = nc;
		t->ep_head = 0;
	}
	p = &t->ep[(t->ep_head + t->ep_n++) % t->ep_cap];
	p->s = s;
	p->e = end;
	t->ep_emax = max64(t->ep_emax, end);
	p->emax = t->ep_emax;
	p->kind = kind;
	p->cpu = cpu;
	p->wpid = wpid;
	p->wtid = wtid;
	if (++e->episodes > e->episodes_peak)
		e->episodes_peak = e->episodes;
}

/* ------------------------------------------------------------ runslices */

static struct cpuq *cpuq_get(struct engine *e, uint32_t cpu)
{
	if (cpu >= e->ncpu) {
		uint32_t nc = e->ncpu ? e->ncpu : 8;
		struct cpuq *n;

		while (nc <= cpu)
			nc *= 2;
		n = xcalloc(e, nc, sizeof(*n));
		if (e->ncpu)
			memcpy(n, e->cpu, e->ncpu * sizeof(*n));
		free(e->cpu);
		heap_add(e, -(int64_t)(e->ncpu * sizeof(*n)));
		e->cpu = n;
		e->ncpu = nc;
	}
	return &e->cpu[cpu];
}

static struct rs *cpuq_at(struct cpuq *q, uint32_t i)
{
	return &q->v[(q->head + i) % q->cap];
}

static void rs_push(struct engine *e, uint32_t cpu, const struct rs *r)
{
	struct cpuq *q = cpuq_get(e, cpu);

	while (q->n && q->v[q->head].e + e->hist < e->now) {
		q->head = (q->head + 1) % q->cap;
		q->n--;
		e->runslices--;
	}
	if (q->n == q->cap) {
		uint32_t nc = q->cap ? q->cap * 2 : 16;
		struct rs *n = xcalloc(e, nc, sizeof(*n));

		for (uint32_t i = 0; i < q->n; i++)
			n[i] = *cpuq_at(q, i);
		free(q->v);
		heap_add(e, -(int64_t)(q->cap * sizeof(*n)));
		q->v = n;
		q->cap = nc;
		q->head = 0;
	}
	*cpuq_at(q, q->n++) = *r;
	if (++e->runslices > e->runslices_peak)
		e->runslices_peak = e->runslices;
}

typedef void (*rs_fn)(struct engine *e, void *ctx, const struct rs *r, uint16_t cpu, uint64_t a,
		      uint64_t b);

/*
 * Call fn for the part of every runslice on cpu inside [a, b], without
 * counting any instant twice; returns the time covered.
 */
static uint64_t rs_cover(struct engine *e, uint16_t cpu, uint64_t a, uint64_t b, rs_fn fn,
			 void *ctx)
{
	struct cpuq *q;
	uint32_t lo, hi;
	uint64_t covered = 0, upto = a;

	if (cpu >= e->ncpu || b <= a)
		return 0;
	q = &e->cpu[cpu];
	/* slices on one CPU follow each other: find the first starting at or after a */
	lo = 0;
	hi = q->n;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (cpuq_at(q, mid)->s < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	while (lo > 0 && cpuq_at(q, lo - 1)->e > a)
		lo--;
	for (uint32_t i = lo; i < q->n; i++) {
		const struct rs *r = cpuq_at(q, i);
		uint64_t s = max64(r->s, upto), t = min64(r->e, b);

		if (r->s >= b)
			break;
		if (t <= s)
			continue;
		fn(e, ctx, r, cpu, s, t);
		covered += t - s;
		upto = t;
	}
	return covered;
}

/* ---------------------------------------------------------- accumulators */

static void acc_reset(struct acc *a)
{
	memset(a->ns, 0, sizeof(a->ns));
	memset(a->cnt, 0, sizeof(a->cnt));
	a->ncul = 0;
	a->npend = 0;
	a->pend_extra = 0;
}

static void acc_free(struct engine *e, struct acc *a)
{
	free(a->cul);
	heap_add(e, -(int64_t)(a->capcul * sizeof(*a->cul)));
	a->cul = NULL;
	a->capcul = a->ncul = 0;
}

static bool who_same(const struct eng_who *a, const struct eng_who *b)
{
	return a->pid == b->pid && a->tid == b->tid && a->via_tid == b->via_tid &&
	       !strcmp(a->comm, b->comm);
}

static void acc_cul(struct engine *e, struct acc *a, int cause, const struct eng_who *w,
		    uint64_t ns)
{
	for (uint32_t i = 0; i < a->ncul; i++) {
		if (a->cul[i].cause == cause && who_same(&a->cul[i].who, w)) {
			a->cul[i].ns += ns;
			return;
		}
	}
	if (a->ncul >= CUL_MAX)
		return; /* the time stays in ns[cause], without a name */
	grow(e, (void **)&a->cul, &a->capcul, a->ncul + 1, sizeof(*a->cul));
	a->cul[a->ncul].cause = (uint8_t)cause;
	a->cul[a->ncul].who = *w;
	a->cul[a->ncul].ns = ns;
	a->ncul++;
}

static void acc_add(struct engine *e, struct acc *a, int cause, uint64_t ns,
		    const struct eng_who *w)
{
	if (!ns)
		return;
	a->ns[cause] += ns;
	if (w)
		acc_cul(e, a, cause, w, ns);
}

static void acc_merge(struct engine *e, struct acc *dst, const struct acc *src)
{
	for (int c = 0; c < ENG_NCAUSE; c++)
		dst->ns[c] += src->ns[c];
	for (int c = 0; c < ENG_NCOUNT; c++)
		dst->cnt[c] += src->cnt[c];
	for (uint32_t i = 0; i < src->ncul; i++)
		acc_cul(e, dst, src->cul[i].cause, &src->cul[i].who, src->cul[i].ns);
}

/* ------------------------------------------------------------ timeline */

/* t's track: its slice in one state is extended while the next one follows on */
static void timeline_thread_flush(struct engine *e, struct thr *t)
{
	if (t->track_state && t->track_end > t->track_start)
		e->o.timeline.thread_state(e->o.timeline.ctx, e->tpid ? e->tpid : t->pid, t->tid,
					   t->track_state, t->track_start, t->track_end);
	t->track_state = NULL;
}

static void timeline_thread(struct engine *e, struct thr *t, const char *name, uint64_t s,
			    uint64_t end)
{
	if (!e->o.timeline.thread_state || end <= s)
		return;
	if (t->track_state == name && t->track_end == s) {
		t->track_end = end;
		return;
	}
	timeline_thread_flush(e, t);
	t->track_state = name;
	t->track_start = s;
	t->track_end = end;
}

static const char *state_name(uint8_t s)
{
	switch (s) {
	case TS_RUNNING: return "running";
	case TS_RUNNABLE: return "runnable";
	case TS_SLEEP_S: return "sleeping";
	case TS_SLEEP_D: return "disk sleep";
	case TS_DEAD: return "exited";
	}
	return "unknown";
}

/* --------------------------------------------------------- classification */

struct clsctx {
	struct thr *t;
	struct acc *a;
	uint64_t upto;           /* timeline: how far the thread's track is drawn */
	const struct thr *via;   /* chain: the waker that was preempted */
	const struct eng_who *dflt;
};

/* comm: at least SB_COMM_LEN bytes (a NUL in the first 10 differs from the prefix anyway) */
static bool is_stopper(const char *comm)
{
	return !memcmp(comm, "migration/", 10);
}

static void who_of_rs(struct eng_who *w, const struct rs *r, uint16_t cpu)
{
	memset(w, 0, sizeof(*w));
	w->pid = r->pid;
	w->tid = r->tid;
	comm_copy(w->comm, r->comm);
	w->cpu = cpu;
}

static void on_preemptor(struct engine *e, void *ctx, const struct rs *r, uint16_t cpu,
			 uint64_t a, uint64_t b)
{
	struct clsctx *c = ctx;
	struct eng_who w;
	int cause;

	who_of_rs(&w, r, cpu);
	/* the wait right after a move is the move's, whoever holds the new CPU */
	cause = is_stopper(w.comm) || c->t->migrated ? ENG_MIGRATION : ENG_CPU_WAIT;
	acc_add(e, c->a, cause, b - a, is_stopper(w.comm) ? NULL : &w);
	if (e->o.timeline.thread_state || e->o.timeline.interferer) {
		int gap = c->t->migrated ? ENG_MIGRATION : ENG_CPU_WAIT;

		if (a > c->upto)
			timeline_thread(e, c->t, cause_names[gap], c->upto, a);
		c->upto = b;
		if (e->o.timeline.interferer)
			e->o.timeline.interferer(e->o.timeline.ctx, &w, c->t->tid, a, b);
		timeline_thread(e, c->t, cause_names[cause], a, b);
	}
}

static void cls_runnable(struct engine *e, struct thr *t, struct acc *a, uint64_t s, uint64_t end)
{
	struct clsctx c = { .t = t, .a = a, .upto = s };
	uint64_t cov = rs_cover(e, t->cpu, s, end, on_preemptor, &c);
	int cause = t->migrated ? ENG_MIGRATION : ENG_CPU_WAIT;

	acc_add(e, a, cause, end - s - cov, NULL);
	if (c.upto < end)
		timeline_thread(e, t, cause_names[cause], c.upto, end);
}

/* of t's unexplained on-CPU time [x, y], how much its bursts claim as alloc (used up) */
static uint64_t burst_take(struct thr *t, uint64_t x, uint64_t y)
{
	uint64_t got = 0;

	for (uint32_t i = 0; i < t->nbov && got < y - x; i++) {
		struct bov *b = &t->bov[i];
		uint64_t lo = max64(x, b->s), hi = min64(y, b->e), take;

		if (hi <= lo || !b->left)
			continue;
		take = min64(min64(hi - lo, b->left), y - x - got);
		b->left -= take;
		got += take;
	}
	return got;
}

/*
 * The overlays in force on t over [s, end], fault included; top priority per
 * sub-interval. a == NULL: outside any gap, only use up the bursts' budgets
 * (on-CPU time there is their time as much as inside a gap).
 */
static void cls_overlays(struct engine *e, struct thr *t, struct acc *a, uint64_t s, uint64_t end,
			 bool asleep)
{
	uint64_t pts[2 * OV_MAX + 2 * BOV_MAX + 6];
	struct ovl ov[OV_MAX + 1];
	int nov = 0, np = 0;

	for (uint32_t i = 0; i < t->nov; i++)
		if (t->ov[i].e > s && t->ov[i].s < end)
			ov[nov++] = t->ov[i];
	if (t->f_open) {
		uint64_t fe = asleep ? end : t->f_decided ? t->f_e : t->f_r + e->fault_cost;

		if (asleep || (fe > s && t->f_r < end))
			ov[nov++] = (struct ovl){ .s = asleep ? s : t->f_r, .e = fe,
						  .cause = ENG_PAGE_FAULT };
	}
	pts[np++] = s;
	pts[np++] = end;
	for (int i = 0; i < nov; i++) {
		if (ov[i].s > s && ov[i].s < end)
			pts[np++] = ov[i].s;
		if (ov[i].e > s && ov[i].e < end)
			pts[np++] = ov[i].e;
	}
	for (uint32_t i = 0; !asleep && i < t->nbov; i++) {
		if (t->bov[i].s > s && t->bov[i].s < end)
			pts[np++] = t->bov[i].s;
		if (t->bov[i].e > s && t->bov[i].e < end)
			pts[np++] = t->bov[i].e;
	}
	for (int i = 1; i < np; i++)
		for (int j = i; j > 0 && pts[j - 1] > pts[j]; j--) {
			uint64_t x = pts[j];

			pts[j] = pts[j - 1];
			pts[j - 1] = x;
		}
	for (int i = 0; i + 1 < np; i++) {
		uint64_t x = pts[i], y = pts[i + 1];
		int best = -1;

		if (y <= x)
			continue;
		for (int k = 0; k < nov; k++)
			if (ov[k].s <= x && ov[k].e >= y &&
			    (best < 0 || ov_prio[ov[k].cause] > ov_prio[best]))
				best = ov[k].cause;
		/*
		 * Asleep in a synchronisation while the GPU is idle with nothing
		 * queued: it is no longer waiting for the GPU but for whoever wakes
		 * it, so the wakeup decides. Without a GPU timeline the sync is all
		 * we know.
		 */
		if (asleep && best == ENG_CUDA_SYNC && e->gpu_fed && !e->gpu_queued)
			best = -1;
		/*
		 * An interruptible sleep inside read/write waits for another task (a
		 * pipe, a socket: a data loader): the wakeup names it, as for any
		 * sleep. Disk I/O sleeps uninterruptibly, and stays io_wait.
		 */
		if (asleep && best == ENG_IO_WAIT && t->state == TS_SLEEP_S)
			best = -1;
		if (!a) {
			if (best < 0 && !asleep)
				burst_take(t, x, y);
			continue;
		}
		if (best >= 0) {
			acc_add(e, a, best, y - x, NULL);
			timeline_thread(e, t, cause_names[best], x, y);
		} else if (!asleep) {
			/* in a burst of fast allocator calls: as much as its calls took is alloc */
			uint64_t al = burst_take(t, x, y);

			acc_add(e, a, ENG_ALLOC, al, NULL);
			acc_add(e, a, ENG_HOST_COMPUTE, y - x - al, NULL);
			if (al)
				timeline_thread(e, t, cause_names[ENG_ALLOC], x, x + al);
			if (x + al < y)
				timeline_thread(e, t, cause_names[ENG_HOST_COMPUTE], x + al, y);
		} else {
			/* a plain sleep: why is known at the wakeup */
			timeline_thread(e, t, state_name(t->state), x, y);
			if (a->npend && a->pend[a->npend - 1].b == x)
				a->pend[a->npend - 1].b = y;
			else if (a->npend < PEND_MAX)
				a->pend[a->npend++] = (struct pend){ x, y };
			else
				a->pend_extra += y - x;
			a->pend_state = t->state;
		}
	}
}

static struct acc *piece_acc(struct piece *p, int cand)
{
	return cand >= 0 ? &p->acc[cand] : NULL;
}

/* attribute t's time from its last cut up to `to` */
static void thr_account(struct engine *e, struct thr *t, uint64_t to)
{
	uint64_t s = t->last_cut;
	struct piece *p = e->gap_open ? e->cur_piece : NULL;
	struct acc *a;

	if (to <= s)
		return;
	t->last_cut = to;
	/* overlays that ended before now are of no further use */
	for (uint32_t i = 0; i < t->nov;) {
		if (t->ov[i].e <= s)
			t->ov[i] = t->ov[--t->nov];
		else
			i++;
	}
	for (uint32_t i = 0; i < t->nbov;) {
		if (t->bov[i].e <= s || !t->bov[i].left)
			t->bov[i] = t->bov[--t->nbov];
		else
			i++;
	}
	if (!p) {
		if (t->state == TS_RUNNING && t->nbov)
			cls_overlays(e, t, NULL, s, to, false);
		timeline_thread(e, t, state_name(t->state), s, to);
		return;
	}
	if (s < p->start) {
		if (t->state == TS_RUNNING && t->nbov)
			cls_overlays(e, t, NULL, s, min64(p->start, to), false);
		s = p->start;
	}
	if (to <= s)
		return;
	a = piece_acc(p, t->cand);
	switch (t->state) {
	case TS_RUNNING:
		cls_overlays(e, t, a, s, to, false);
		break;
	case TS_RUNNABLE:
		cls_runnable(e, t, a, s, to);
		break;
	case TS_SLEEP_S:
	case TS_SLEEP_D:
		cls_overlays(e, t, a, s, to, true);
		break;
	default:
		acc_add(e, a, ENG_UNKNOWN, to - s, NULL);
		timeline_thread(e, t, cause_names[ENG_UNKNOWN], s, to);
		break;
	}
}

static void cut_all(struct engine *e, uint64_t t)
{
	for (int i = 0; i < e->ncand; i++)
		thr_account(e, e->cand[i], t);
}

/* ---------------------------------------------------------- wakeup chains */

static void on_chain_preemptor(struct engine *e, void *ctx, const struct rs *r, uint16_t cpu,
			       uint64_t a, uint64_t b)
{
	struct clsctx *c = ctx;
	struct eng_who w;

	who_of_rs(&w, r, cpu);
	if (is_stopper(w.comm)) {
		acc_add(e, c->a, ENG_BLOCKED, b - a, c->dflt);
		return;
	}
	w.via_pid = c->via->pid;
	w.via_tid = c->via->tid;
	memcpy(w.via_comm, c->via->comm, sizeof(w.via_comm));
	acc_add(e, c->a, ENG_BLOCKED, b - a, &w);
}

/*
 * [s, end] of a sleep that `w` ended. Where w (or, a few hops on, the target
 * thread that woke w) sat runnable and preempted, the preemptor is to blame;
 * everywhere else the waker itself. Only preemptions travel down the chain: a
 * waker's own sleeps were often ended from interrupt context, whose "waker" is
 * whatever happened to run.
 */
static void chain(struct engine *e, struct acc *a, uint64_t s, uint64_t end, struct thr *w,
		  const struct eng_who *dflt, const struct thr *victim, int depth)
{
	uint64_t cur = s;

	uint32_t lo = 0, hi;

	if (!w || depth >= CHAIN_DEPTH) {
		acc_add(e, a, ENG_BLOCKED, end - s, dflt);
		return;
	}
	/* episodes that all ended by s cover none of [s, end]: skip them */
	hi = w->ep_n;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (w->ep[(w->ep_head + mid) % w->ep_cap].emax <= s)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (uint32_t i = lo; i <= w->ep_n && cur < end; i++) {
		struct episode ep;
		uint64_t x, y;

		if (i < w->ep_n) {
			ep = w->ep[(w->ep_head + i) % w->ep_cap];
		} else if (w->state == TS_RUNNABLE || w->state == TS_SLEEP_S) {
			/* the episode still open */
			ep = (struct episode){ .s = w->since, .e = end, .cpu = w->cpu,
					       .kind = w->state == TS_RUNNABLE ? EP_RUN : EP_SLEEP_S };
		} else {
			break;
		}
		x = max64(ep.s, cur);
		y = min64(ep.e, end);
		if (y <= x)
			continue;
		if (x > cur)
			acc_add(e, a, ENG_BLOCKED, x - cur, dflt);
		if (ep.kind == EP_RUN) {
			struct clsctx c = { .a = a, .via = w, .dflt = dflt };
			uint64_t cov = rs_cover(e, ep.cpu, x, y, on_chain_preemptor, &c);

			acc_add(e, a, ENG_BLOCKED, y - x - cov, dflt);
		} else if (ep.kind == EP_SLEEP_S && ep.wpid == e->tpid && ep.wtid != w->tid &&
			   ep.wtid != victim->tid) {
			chain(e, a, x, y, thr_find(e, ep.wtid), dflt, victim, depth + 1);
		} else {
			acc_add(e, a, ENG_BLOCKED, y - x, dflt);
		}
		cur = y;
	}
	if (cur < end)
		acc_add(e, a, ENG_BLOCKED, end - cur, dflt);
}

/* a plain sleep of candidate t ended; wk: the wakeup record, NULL if none seen */
static void resolve_sleep_acc(struct engine *e, struct thr *t, struct acc *a,
			      const struct sb_wakeup *wk)
{
	struct eng_who dflt;
	struct thr *w = NULL;
	bool named = false;
	int cause;

	if (!a->npend && !a->pend_extra)
		return;
	if (wk) {
		memset(&dflt, 0, sizeof(dflt));
		dflt.pid = wk->waker_pid;
		dflt.tid = wk->waker_tid;
		comm_copy(dflt.comm, wk->waker_comm);
		dflt.cpu = -1;
		named = wk->waker_pid != 0;
		if (wk->waker_pid == e->tpid && wk->waker_tid != t->tid)
			w = thr_find(e, wk->waker_tid);
	}
	if ((wk && is_stopper(dflt.comm)) || t->sleep_migr)
		cause = ENG_MIGRATION;
	else
		cause = a->pend_state == TS_SLEEP_D ? ENG_IO_WAIT : ENG_BLOCKED;
	for (uint32_t i = 0; i < a->npend; i++) {
		uint64_t x = a->pend[i].a, y = a->pend[i].b;

		if (cause == ENG_BLOCKED && named)
			chain(e, a, x, y, w, &dflt, t, 0);
		else
			acc_add(e, a, cause, y - x, cause == ENG_IO_WAIT || !named ? NULL : &dflt);
	}
	if (a->pend_extra)
		acc_add(e, a, cause, a->pend_extra, cause == ENG_BLOCKED && named ? &dflt : NULL);
	a->npend = 0;
	a->pend_extra = 0;
}

static void resolve_sleep(struct engine *e, struct thr *t, const struct sb_wakeup *wk)
{
	if (t->cand < 0)
		return;
	for (uint32_t i = 0; i < e->pq_n; i++) {
		struct piece *p = e->pq[(e->pq_head + i) % e->pq_cap];

		resolve_sleep_acc(e, t, &p->acc[t->cand], wk);
	}
}

/* ----------------------------------------------------------------- steps */

static struct swip *step_by_seq(struct engine *e, uint64_t seq)
{
	struct swip *f;

	if (!e->sq_n)
		return NULL;
	f = e->sq[e->sq_head];
	if (seq < f->seq || seq - f->seq >= e->sq_n)
		return NULL;
	return e->sq[(e->sq_head + (seq - f->seq)) % e->sq_cap];
}

static struct piece *piece_new(struct engine *e, uint64_t step_seq, uint64_t start)
{
	struct piece *p;

	if (e->npfree) {
		p = e->pfree[--e->npfree];
	} else {
		p = xcalloc(e, 1, sizeof(*p));
	}
	p->step_seq = step_seq;
	p->start = p->end = start;
	p->closed = false;
	for (int i = 0; i < e->ncand; i++)
		acc_reset(&p->acc[i]);
	if (e->pq_n == e->pq_cap) {
		uint32_t nc = e->pq_cap ? e->pq_cap * 2 : 8;
		struct piece **n = xcalloc(e, nc, sizeof(*n));

		for (uint32_t i = 0; i < e->pq_n; i++)
			n[i] = e->pq[(e->pq_head + i) % e->pq_cap];
		free(e->pq);
		heap_add(e, -(int64_t)(e->pq_cap * sizeof(*n)));
		e->pq = n;
		e->pq_cap = nc;
		e->pq_head = 0;
	}
	e->pq[(e->pq_head + e->pq_n++) % e->pq_cap] = p;
	if (++e->pieces_live > e->pieces_peak)
		e->pieces_peak = e->pieces_live;
	return p;
}

static void piece_release(struct engine *e, struct piece *p)
{
	grow(e, (void **)&e->pfree, &e->cappfree, e->npfree + 1, sizeof(*e->pfree));
	e->pfree[e->npfree++] = p;
	e->pieces_live--;
}

static struct interf *itf_slot(struct engine *e, uint32_t pid, const char *comm)
{
	uint32_t h = hash32(pid * 31u + (unsigned char)comm[0] * 7u + (unsigned)strlen(comm));

	for (uint32_t i = h & (e->itf_cap - 1);; i = (i + 1) & (e->itf_cap - 1)) {
		struct interf *x = &e->itf[i];

		if (!x->used || (x->pid == pid && !strcmp(x->comm, comm)))
			return x;
	}
}

/* a table of nc slots holding the entries of old[oc] */
static void itf_rehash(struct engine *e, struct interf *old, uint32_t oc, uint32_t nc)
{
	e->itf = xcalloc(e, nc, sizeof(*e->itf));
	e->itf_cap = nc;
	for (uint32_t i = 0; i < oc; i++)
		if (old[i].used)
			*itf_slot(e, old[i].pid, old[i].comm) = old[i];
	free(old);
	heap_add(e, -(int64_t)(oc * sizeof(*old)));
}

static int itf_ns_cmp(const void *a, const void *b)
{
	const struct interf *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns > y->ns ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return strcmp(x->comm, y->comm);
}

/*
 * ITF_MAX tasks have taken time: the smaller half are folded into one
 * remainder (a run of days meets many short-lived tasks); a task folded that
 * takes time again starts from 0.
 */
static void itf_fold(struct engine *e)
{
	struct interf *all = xcalloc(e, e->itf_n, sizeof(*all));
	uint32_t n = 0, keep = ITF_MAX / 2;

	for (uint32_t i = 0; i < e->itf_cap; i++)
		if (e->itf[i].used)
			all[n++] = e->itf[i];
	qsort(all, n, sizeof(*all), itf_ns_cmp);
	for (uint32_t i = keep; i < n; i++) {
		e->itf_other_ns += all[i].ns;
		e->itf_folded++;
	}
	memset(e->itf, 0, e->itf_cap * sizeof(*e->itf));
	e->itf_n = n < keep ? n : keep;
	for (uint32_t i = 0; i < e->itf_n; i++)
		*itf_slot(e, all[i].pid, all[i].comm) = all[i];
	free(all);
	heap_add(e, -(int64_t)(n * sizeof(*all)));
}

static void interferer_add(struct engine *e, const struct eng_who *w, uint64_t ns)
{
	struct interf *x;

	if (e->itf_cap) {
		x = itf_slot(e, w->pid, w->comm);
		if (x->used) {
			x->ns += ns;
			return;
		}
	}
	if (e->itf_n >= ITF_MAX)
		itf_fold(e);
	if ((e->itf_n + 1) * 2 > e->itf_cap)
		itf_rehash(e, e->itf, e->itf_cap, e->itf_cap ? e->itf_cap * 2 : 64);
	x = itf_slot(e, w->pid, w->comm);
	x->used = true;
	x->pid = w->pid;
	memcpy(x->comm, w->comm, sizeof(x->comm));
	x->ns = ns;
	e->itf_n++;
}

static bool cand_tid(struct engine *e, uint32_t tid, int *ci)
{
	struct thr *t = tid ? thr_find(e, tid) : NULL;

	*ci = t ? t->cand : -1;
	return *ci >= 0;
}

/* piece p is over: its time goes to the step as crit_tid's */
static void commit_piece(struct engine *e, struct piece *p, uint32_t crit_tid)
{
	struct swip *st = step_by_seq(e, p->step_seq);
	uint64_t idle = p->end > p->start ? p->end - p->start : 0, sum = 0;
	int ci;
	struct acc *a = NULL;

	if (!st)
		return;
	if (cand_tid(e, crit_tid, &ci)) {
		a = &p->acc[ci];
		if (a->npend || a->pend_extra)
			resolve_sleep_acc(e, e->cand[ci], a, NULL);
		for (int c = 0; c < ENG_NCAUSE; c++)
			sum += a->ns[c];
	}
	if (a) {
		/* the live set of culprits is what stole the time: count it before merging */
		for (uint32_t i = 0; i < a->ncul; i++) {
			const struct cul *c = &a->cul[i];

			if (c->cause == ENG_CPU_WAIT || c->cause == ENG_MIGRATION ||
			    (c->cause == ENG_BLOCKED && c->who.via_tid))
				interferer_add(e, &c->who, c->ns);
		}
		acc_merge(e, &st->sacc, a);
	}
	if (idle > sum)
		st->sacc.ns[ENG_UNKNOWN] += idle - sum;
	st->idle_ns += idle;
	if (idle && crit_tid) {
		uint32_t i;

		for (i = 0; i < st->ncrit && st->crit[i].tid != crit_tid; i++)
			;
		if (i < st->ncrit) {
			st->crit[i].ns += idle;
		} else if (st->ncrit < ARRAY_LEN(st->crit)) {
			st->crit[st->ncrit].tid = crit_tid;
			st->crit[st->ncrit++].ns = idle;
		}
	}
	if (e->o.timeline.gap && idle) {
		struct eng_gap g = { .step = st->number, .critical_tid = crit_tid,
				     .start_ns = p->start, .end_ns = p->end };

		for (int c = 0; c < ENG_NCAUSE; c++)
			g.cause_ns[c] = a ? a->ns[c] : 0;
		g.cause_ns[ENG_UNKNOWN] += idle > sum ? idle - sum : 0;
		e->o.timeline.gap(e->o.timeline.ctx, &g);
	}
	st->open_pieces--;
}

static uint32_t fallback_crit(struct engine *e, uint64_t step_seq)
{
	struct swip *st = step_by_seq(e, step_seq);
	int ci;

	if (st && cand_tid(e, st->marker_tid, &ci))
		return st->marker_tid;
	return e->last_launch_tid ? e->last_launch_tid : (st ? st->marker_tid : 0);
}

static void pq_pop(struct engine *e)
{
	struct piece *p = e->pq[e->pq_head];

	e->pq_head = (e->pq_head + 1) % e->pq_cap;
	e->pq_n--;
	if (p == e->cur_piece)
		e->cur_piece = NULL;
	piece_release(e, p);
}

static void finalize_ready(struct engine *e);

/* commit the oldest closed pieces whose step has ended, with the fallback thread */
static void commit_ended(struct engine *e, uint64_t older_than, bool all)
{
	while (e->pq_n) {
		struct piece *p = e->pq[e->pq_head];
		struct swip *st = step_by_seq(e, p->step_seq);

		if (!p->closed || !st || !st->ended)
			break;
		if (!all && st->end + e->lag > older_than)
			break;
		commit_piece(e, p, fallback_crit(e, p->step_seq));
		pq_pop(e);
	}
}

static void sort_blame(struct eng_blame *b, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++) {
		for (uint32_t j = i; j > 0; j--) {
			struct eng_blame *x = &b[j - 1], *y = &b[j];
			bool swap;

			if (x->ns != y->ns)
				swap = x->ns < y->ns;
			else if (x->cause != y->cause)
				swap = x->cause > y->cause;
			else if (x->has_who != y->has_who)
				swap = !x->has_who;
			else
				swap = x->who.pid > y->who.pid ||
				       (x->who.pid == y->who.pid && x->who.tid > y->who.tid);
			if (!swap)
				break;
			struct eng_blame t = *x;

			*x = *y;
			*y = t;
		}
	}
}

static void running_tail(struct engine *e, struct eng_step *s);
static void summarise_all(const struct engine *e, struct eng_summary *s);
static void mark_tails(struct engine *e, const struct eng_summary *s);

/*
 * Guard records arrive with the agent's records, ahead of the sweep: their
 * mode changes are kept with their times and read back as steps finalise, in
 * order.
 */
#define GCH_MAX 4096

static void guard_record(struct engine *e, uint64_t ts, const char *s, size_t n)
{
	struct sb_guard g;
	int prev = e->guard.known ? e->guard.mode : SB_GUARD_FULL;

	if (!sb_guard_parse(&g, s, n))
		return;
	e->guard.known = true;
	e->guard.mode = g.mode;
	e->guard.limit_ppm = g.limit_ppm;
	e->guard.estimate_ppm = g.estimate_ppm;
	e->guard.duty_ppm = g.duty_ppm;
	e->guard.calls_seen = g.calls_seen;
	e->guard.calls_estimated = g.calls_estimated;
	if (g.estimate_ppm > e->guard.max_estimate_ppm)
		e->guard.max_estimate_ppm = g.estimate_ppm;
	if (g.mode == prev)
		return;
	e->guard.changes++;
	if (g.mode == SB_GUARD_SAMPLED && !e->guard.first_sampled_ns)
		e->guard.first_sampled_ns = ts;
	if (e->gch_n == GCH_MAX)
		return; /* the last mode then stands for the rest of the capture */
	if (e->gch_n == e->gch_cap) {
		uint32_t nc = e->gch_cap ? 2 * e->gch_cap : 16;
		void *q = realloc(e->gch, nc * sizeof(*e->gch));

		if (!q)
			return;
		heap_add(e, (int64_t)((nc - e->gch_cap) * sizeof(*e->gch)));
		e->gch = q;
		e->gch_cap = nc;
	}
	e->gch[e->gch_n].ts = ts;
	e->gch[e->gch_n].mode = g.mode;
	e->gch_n++;
}

/* was the guard sampling at any time in [s, end]? steps come in order */
static bool guard_sampled_in(struct engine *e, uint64_t s, uint64_t end)
{
	bool any;

	while (e->gch_next < e->gch_n && e->gch[e->gch_next].ts <= s)
		e->gch_mode = e->gch[e->gch_next++].mode;
	any = e->gch_mode == SB_GUARD_SAMPLED;
	for (uint32_t i = e->gch_next; !any && i < e->gch_n && e->gch[i].ts <= end; i++)
		any = e->gch[i].mode == SB_GUARD_SAMPLED;
	return any;
}

/* ------------------------------------------------------ window mode */

static uint32_t hg_idx(uint64_t v)
{
	int x;

	if (v < HG_SUB)
		return (uint32_t)v;
	x = 63 - __builtin_clzll(v);
	return (uint32_t)(HG_SUB + (x - HG_SHIFT) * HG_SUB + ((v >> (x - HG_SHIFT)) & (HG_SUB - 1)));
}

/* the middle of bucket i */
static uint64_t hg_mid(uint32_t i)
{
	uint32_t oct, m;

	if (i < HG_SUB)
		return i;
	oct = (i - HG_SUB) / HG_SUB;
	m = (i - HG_SUB) % HG_SUB;
	return ((uint64_t)(HG_SUB + m) << oct) + ((1ull << oct) >> 1);
}

static void hg_add(struct hist *h, uint64_t v)
{
	h->b[hg_idx(v)]++;
	h->n++;
}

/* nearest rank num/den, as rank_pct() over the values */
static uint64_t hg_pct(const struct hist *h, uint64_t num, uint64_t den)
{
	uint64_t k, run = 0;

	if (!h->n)
		return 0;
	k = (num * h->n + den - 1) / den;
	k = k < 1 ? 1 : k > h->n ? h->n : k;
	for (uint32_t i = 0; i < HG_N; i++) {
		run += h->b[i];
		if (run >= k)
			return hg_mid(i);
	}
	return hg_mid(HG_N - 1);
}

struct hg_dev {
	uint64_t dev, n;
};

static int hg_dev_cmp(const void *a, const void *b)
{
	const struct hg_dev *x = a, *y = b;

	return x->dev < y->dev ? -1 : x->dev > y->dev;
}

/* median absolute deviation from med, as mad_of() over the values */
static uint64_t hg_mad(const struct hist *h, uint64_t med)
{
	struct hg_dev *d = calloc(HG_N, sizeof(*d));
	uint64_t n = 0, k, run = 0, r = 0;

	if (!d || !h->n) {
		free(d);
		return 0;
	}
	for (uint32_t i = 0; i < HG_N; i++) {
		uint64_t m = hg_mid(i);

		if (h->b[i])
			d[n++] = (struct hg_dev){ m > med ? m - med : med - m, h->b[i] };
	}
	qsort(d, n, sizeof(*d), hg_dev_cmp);
	k = (h->n + 1) / 2;
	for (uint64_t i = 0; i < n; i++) {
		run += d[i].n;
		if (run >= k) {
			r = d[i].dev;
			break;
		}
	}
	free(d);
	return r;
}

/* values over thr */
static uint64_t hg_above(const struct hist *h, uint64_t thr)
{
	uint64_t n = 0;

	for (uint32_t i = hg_idx(thr); i < HG_N; i++)
		if (hg_mid(i) > thr)
			n += h->b[i];
	return n;
}

static uint64_t step_ppm(const struct eng_step *r)
{
	return r->duration_ns ? r->tracer_ns * 1000000 / r->duration_ns : 0;
}

/* a step into the summaries over all steps (the same figures summarise_range() takes) */
static void allsum_add(struct allsum *w, const struct eng_step *r)
{
	w->nsteps++;
	for (int c = 0; c < ENG_NCAUSE; c++)
		w->cause_total[c] += r->cause_ns[c];
	if (r->gpu_timeline) {
		w->busy_total += r->gpu_busy_ns;
		w->dur_total += r->duration_ns;
	}
	w->tracer_total += r->tracer_ns;
	w->sampled += r->alloc_sampled;
	if (r->incomplete)
		return;
	if (!w->ncomplete++ || r->duration_ns < w->min)
		w->min = r->duration_ns;
	w->max = max64(w->max, r->duration_ns);
	hg_add(&w->dur, r->duration_ns);
	hg_add(&w->idle, r->gpu_idle_ns);
	hg_add(&w->tracer, r->tracer_ns);
	hg_add(&w->tracer_ppm, step_ppm(r));
	w->tracer_ppm_max = max64(w->tracer_ppm_max, step_ppm(r));
	for (int c = 0; c < ENG_NCAUSE; c++)
		hg_add(&w->cause[c], r->cause_ns[c]);
}

/* from now on keep the last `keep` steps in detail, summaries over all of them */
static void window_begin(struct engine *e, uint64_t keep)
{
	e->keep = max64(keep, LIVE_WINDOW);
	e->ws = xcalloc(e, 1, sizeof(*e->ws));
	for (uint64_t i = first_kept(e); i < e->nres; i++)
		allsum_add(e->ws, RES(e, i));
}

/*
 * Room for step nres: a new chunk when the last is full. In window mode the
 * chunks past the window go first, and the last of them takes the new steps.
 */
static struct eng_step *res_slot(struct engine *e)
{
	struct rchunk *c = NULL;

	if (e->nres < (e->chunk0 + e->nchunks) * RES_CHUNK)
		return RES(e, e->nres);
	while (e->keep && e->nchunks && (e->nchunks - 1) * RES_CHUNK >= e->keep) {
		if (c) {
			free(c);
			heap_add(e, -(int64_t)sizeof(*c));
		}
		c = e->res[0];
		pools_free(e, c);
		memmove(e->res, e->res + 1, (e->nchunks - 1) * sizeof(*e->res));
		e->nchunks--;
		e->chunk0++;
	}
	if (!c) {
		c = xcalloc(e, 1, sizeof(*c));
		if (e->nchunks == e->res_cap) {
			uint64_t nc = e->res_cap ? 2 * e->res_cap : 16;
			struct rchunk **q = realloc(e->res, nc * sizeof(*q));

			if (!q) {
				sb_err("out of memory in the blame engine");
				abort();
			}
			heap_add(e, (int64_t)((nc - e->res_cap) * sizeof(*q)));
			e->res = q;
			e->res_cap = nc;
		}
	}
	e->res[e->nchunks++] = c;
	return RES(e, e->nres);
}

static void finalize_step(struct engine *e, struct swip *st)
{
	struct eng_step *r;
	struct eng_blame tmp[CUL_MAX + ENG_NCAUSE];
	uint32_t n = 0;
	uint64_t per_cause_named[ENG_NCAUSE] = { 0 };

	r = res_slot(e);
	memset(r, 0, sizeof(*r));
	r->index = e->nres;
	r->step = st->number;
	r->start_ns = st->start;
	r->end_ns = st->end;
	r->duration_ns = st->end - st->start;
	r->incomplete = st->incomplete;
	r->gpu_timeline = e->gpu_fed;
	for (int c = 0; c < ENG_NCAUSE; c++)
		r->cause_ns[c] = st->sacc.ns[c];
	if (r->gpu_timeline) {
		r->gpu_idle_ns = min64(st->idle_ns, r->duration_ns);
		r->gpu_busy_ns = r->duration_ns - r->gpu_idle_ns;
		r->cause_ns[ENG_GPU_SLOW] = min64(st->gpu_slow_ns, r->gpu_busy_ns);
	}
	memcpy(r->count, st->sacc.cnt, sizeof(r->count));
	r->count[ENG_N_GPU_OPS] = st->gpu_ops;
	for (int c = 0; c < SB_NCOST; c++) {
		r->tracer_events += st->tev[c];
		r->tracer_ns += st->tev[c] * e->costs.ns[c];
	}
	r->alloc_sampled = guard_sampled_in(e, st->start, st->end);
	for (uint32_t i = 0, best = 0; i < st->ncrit; i++)
		if (!i || st->crit[i].ns > st->crit[best].ns) {
			best = i;
			r->crit_tid = st->crit[i].tid;
		}
	if (!r->crit_tid)
		r->crit_tid = st->marker_tid;
	snprintf(r->crit_comm, sizeof(r->crit_comm), "%s", thr_comm(e, r->crit_tid));

	for (uint32_t i = 0; i < st->sacc.ncul; i++) {
		const struct cul *c = &st->sacc.cul[i];

		if (!c->ns)
			continue;
		tmp[n].cause = c->cause;
		tmp[n].has_who = true;
		tmp[n].who = c->who;
		tmp[n].ns = c->ns;
		per_cause_named[c->cause] += c->ns;
		n++;
	}
	for (int c = 0; c < ENG_NCAUSE; c++) {
		if (r->cause_ns[c] > per_cause_named[c]) {
			memset(&tmp[n], 0, sizeof(tmp[n]));
			tmp[n].cause = (uint8_t)c;
			tmp[n].ns = r->cause_ns[c] - per_cause_named[c];
			n++;
		}
	}
	sort_blame(tmp, n);
	/* too many: fold the smallest named entries into their cause's unnamed one */
	while (n > ENG_MAX_BLAME) {
		int k = -1;

		for (int i = (int)n - 1; i >= 0; i--)
			if (tmp[i].has_who) {
				k = i;
				break;
			}
		if (k < 0)
			break;
		uint8_t cause = tmp[k].cause;
		uint64_t ns = tmp[k].ns;
		uint32_t j;

		memmove(&tmp[k], &tmp[k + 1], (n - k - 1) * sizeof(tmp[0]));
		n--;
		for (j = 0; j < n && (tmp[j].cause != cause || tmp[j].has_who); j++)
			;
		if (j < n) {
			tmp[j].ns += ns;
		} else {
			memset(&tmp[n], 0, sizeof(tmp[n]));
			tmp[n].cause = cause;
			tmp[n].ns = ns;
			n++;
		}
		sort_blame(tmp, n);
	}
	r->blame = blame_store(e, e->res[e->nres / RES_CHUNK - e->chunk0], tmp, n);
	r->nblame = n;
	e->nres++;
	if (e->ws)
		allsum_add(e->ws, r);
	else if (e->nres > ENG_EXACT_STEPS_MAX)
		window_begin(e, ENG_REPORT_KEEP_STEPS);
	running_tail(e, r);
	if (e->o.timeline.step)
		e->o.timeline.step(e->o.timeline.ctx, r);
	if (e->cb)
		e->cb(e->cb_ctx, r);
}

static void swip_free(struct engine *e, struct swip *st)
{
	acc_free(e, &st->sacc);
	free(st);
	heap_add(e, -(int64_t)sizeof(*st));
}

static void finalize_ready(struct engine *e)
{
	while (e->sq_n) {
		struct swip *st = e->sq[e->sq_head];

		if (!st->ended || st->open_pieces)
			break;
		finalize_step(e, st);
		e->sq_head = (e->sq_head + 1) % e->sq_cap;
		e->sq_n--;
		swip_free(e, st);
	}
}

static void cand_add(struct engine *e, struct thr *t);

static void end_step(struct engine *e, uint64_t t, bool incomplete)
{
	struct swip *st = e->cur_step;

	if (!st)
		return;
	cut_all(e, t);
	if (e->cur_piece) {
		e->cur_piece->end = t;
		e->cur_piece->closed = true;
		e->cur_piece = NULL;
	}
	st->end = t;
	st->ended = true;
	st->incomplete = incomplete;
	e->cur_step = NULL;
	/* host-only: no GPU record has come, the marking thread is critical throughout */
	if (!e->gpu_fed)
		commit_ended(e, 0, true);
	finalize_ready(e);
}

static void begin_step(struct engine *e, uint64_t t, uint64_t number, uint32_t tid)
{
	struct swip *st;

	if (e->cur_step)
		end_step(e, t, false);
	cut_all(e, t);
	st = xcalloc(e, 1, sizeof(*st));
	st->seq = e->next_seq++;
	st->number = number;
	st->start = t;
	st->marker_tid = tid;
	if (e->sq_n == e->sq_cap) {
		uint32_t nc = e->sq_cap ? e->sq_cap * 2 : 16;
		struct swip **n = xcalloc(e, nc, sizeof(*n));

		for (uint32_t i = 0; i < e->sq_n; i++)
			n[i] = e->sq[(e->sq_head + i) % e->sq_cap];
		free(e->sq);
		heap_add(e, -(int64_t)(e->sq_cap * sizeof(*n)));
		e->sq = n;
		e->sq_cap = nc;
		e->sq_head = 0;
	}
	e->sq[(e->sq_head + e->sq_n++) % e->sq_cap] = st;
	if (e->sq_n > e->steps_flight_peak)
		e->steps_flight_peak = e->sq_n;
	e->cur_step = st;
	if (tid)
		cand_add(e, thr_get(e, tid, e->tpid));
	if (e->gap_open) {
		e->cur_piece = piece_new(e, st->seq, t);
		st->open_pieces++;
	}
}

static int src_pref(int src)
{
	switch (src) {
	case ENG_SRC_USDT:
	case ENG_SRC_UPROBE: return 0;
	case ENG_SRC_GPU_MARKER: return 1;
	case ENG_SRC_NVTX: return 2;
	case ENG_SRC_KERNEL: return 3;
	}
	return 9;
}

enum { MK_MARK, MK_BEGIN, MK_END };

static void on_mark(struct engine *e, int src, int kind, uint64_t number, uint64_t t, uint32_t tid)
{
	e->src_count[src]++;
	if (e->forced_src && src != e->forced_src)
		return;
	if (e->src && src != e->src) {
		if (src_pref(src) >= src_pref(e->src))
			return;
		/* a better source turned up: the step in progress was cut by the change */
		if (e->cur_step)
			end_step(e, t, true);
	}
	e->src = src;
	if (kind == MK_END) {
		/* begin/end sources: the time between an end and the next begin is no step's */
		end_step(e, t, false);
		return;
	}
	begin_step(e, t, number, tid);
}

/* ------------------------------------------------------------ candidates */

static void cand_add(struct engine *e, struct thr *t)
{
	if (t->cand >= 0 || e->ncand >= MAX_CAND || t->sink)
		return;
	t->cand = e->ncand;
	e->cand[e->ncand++] = t;
	for (uint32_t i = 0; i < e->pq_n; i++)
		acc_reset(&e->pq[(e->pq_head + i) % e->pq_cap]->acc[t->cand]);
	/* what it has been doing since its last state change counts from now on */
	t->last_cut = e->now;
	if (e->gap_open && e->cur_piece && t->state != TS_UNKNOWN)
		t->last_cut = max64(e->cur_piece->start, min64(t->since, e->now));
	t->nov = 0;
	t->nbov = 0;
	t->f_open = false;
}

/* ------------------------------------------------------------ the GPU */

static void open_gap(struct engine *e, uint64_t t)
{
	cut_all(e, t);
	e->gap_open = true;
	if (e->cur_step) {
		e->cur_piece = piece_new(e, e->cur_step->seq, t);
		e->cur_step->open_pieces++;
	}
}

static void close_gap(struct engine *e, uint64_t t, uint32_t crit)
{
	cut_all(e, t);
	if (e->cur_piece) {
		e->cur_piece->end = t;
		e->cur_piece->closed = true;
	}
	while (e->pq_n) {
		struct piece *p = e->pq[e->pq_head];

		commit_piece(e, p, crit ? crit : fallback_crit(e, p->step_seq));
		pq_pop(e);
	}
	e->cur_piece = NULL;
	e->gap_open = false;
	finalize_ready(e);
}

/* the operation issued as corr has started: it is no longer queued */
static void corr_started(struct engine *e, uint32_t corr)
{
	if (corr && e->corr[corr % CORR_SLOTS].corr == corr && e->corr[corr % CORR_SLOTS].queued) {
		e->corr[corr % CORR_SLOTS].queued = false;
		if (e->gpu_queued)
			e->gpu_queued--;
	}
}

static uint32_t corr_tid(struct engine *e, uint32_t corr)
{
	if (!corr || !e->corr)
		return 0;
	if (e->corr[corr % CORR_SLOTS].corr == corr)
		return e->corr[corr % CORR_SLOTS].tid;
	return 0;
}

static const struct str *str_find(struct engine *e, uint32_t id)
{
	if (!id || !e->shash_cap)
		return NULL;
	for (uint32_t i = hash32(id) & (e->shash_cap - 1);; i = (i + 1) & (e->shash_cap - 1)) {
		uint32_t v = e->shash[i];

		if (!v)
			return NULL;
		if (e->strs[v - 1].id == id)
			return &e->strs[v - 1];
	}
}

/* the slot of (name, grid, block): its entry, or the empty slot where it would go */
static struct kstat *ks_slot(struct engine *e, uint32_t name_id, const uint32_t grid[3],
			     const uint32_t block[3])
{
	uint32_t h = hash32(name_id ^ hash32(grid[0] * 31 + grid[1] * 17 + grid[2]) ^
			    hash32(block[0] * 13 + block[1] * 7 + block[2] + 1));

	for (uint32_t i = h & (e->ks_cap - 1);; i = (i + 1) & (e->ks_cap - 1)) {
		struct kstat *k = &e->ks[i];

		if (!k->used || (k->name_id == name_id && !memcmp(k->grid, grid, sizeof(k->grid)) &&
				 !memcmp(k->block, block, sizeof(k->block))))
			return k;
	}
}

/* the running median of this kernel shape; NULL past KS_MAX shapes (counted) */
static struct kstat *kstat_get(struct engine *e, const struct sb_gpu *g)
{
	struct kstat *k;

	if ((e->ks_n + 1) * 2 > e->ks_cap && e->ks_n < KS_MAX) {
		uint32_t oc = e->ks_cap, nc = oc ? oc * 2 : 256;
		struct kstat *old = e->ks;

		e->ks = xcalloc(e, nc, sizeof(*e->ks));
		e->ks_cap = nc;
		for (uint32_t i = 0; i < oc; i++)
			if (old[i].used)
				*ks_slot(e, old[i].name_id, old[i].grid, old[i].block) = old[i];
		free(old);
		heap_add(e, -(int64_t)(oc * sizeof(*old)));
	}
	k = ks_slot(e, g->name_id, g->grid, g->block);
	if (k->used)
		return k;
	if (e->ks_n >= KS_MAX) {
		e->ks_dropped++;
		return NULL;
	}
	k->used = true;
	k->name_id = g->name_id;
	memcpy(k->grid, g->grid, sizeof(k->grid));
	memcpy(k->block, g->block, sizeof(k->block));
	e->ks_n++;
	return k;
}

static uint64_t marker_number(struct engine *e, const struct str *s, uint64_t bytes, int src)
{
	if (s && s->text) {
		for (const char *p = s->text; *p; p++)
			if (*p >= '0' && *p <= '9')
				return strtoull(p, NULL, 10);
	}
	return bytes ? bytes : e->src_count[src];
}

static void gpu_op(struct engine *e, const struct sb_gpu *g)
{
	uint64_t s = max64(g->h.ts, e->now), end = max64(g->end_ns, s);
	uint32_t crit = corr_tid(e, g->correlation_id);

	if (g->h.flags == SB_GPU_KERNEL && e->has_kernel) {
		const struct str *n = str_find(e, g->name_id);

		if (n && n->kernel)
			on_mark(e, ENG_SRC_KERNEL, MK_MARK, e->src_count[ENG_SRC_KERNEL], s,
				crit ? crit : e->last_launch_tid);
	}
	if (e->gap_open && s >= e->busy_until)
		close_gap(e, s, crit);
	corr_started(e, g->correlation_id);
	e->gpu_started = true;
	if (end > e->busy_until)
		e->busy_until = end;
	if (end > e->gpu_max_end)
		e->gpu_max_end = end;
	if (e->cur_step)
		e->cur_step->gpu_ops++;
	if (g->h.flags == SB_GPU_KERNEL) {
		struct kstat *k = kstat_get(e, g);

		if (k) {
			double d = (double)(end - s), med = p2_median(&k->med);

			/* slower than this kernel's usual (median) time: the excess is gpu_slow */
			if (k->med.n >= 5 && d > med && e->cur_step)
				e->cur_step->gpu_slow_ns += (uint64_t)(d - med);
			p2_add(&k->med, d, 0.5);
		}
	}
	if (e->o.timeline.gpu_op) {
		const struct str *n = str_find(e, g->name_id);
		struct eng_gpu_op op = { .device = g->device, .stream = g->stream,
					 .kind = g->h.flags, .name = n && n->text ? n->text : NULL,
					 .correlation_id = g->correlation_id, .launcher_tid = crit,
					 .start_ns = s, .end_ns = end };

		e->o.timeline.gpu_op(e->o.timeline.ctx, &op);
	}
}

/* --------------------------------------------------------- host events */

/*
 * The fault still open on t ends because of an own event at `at` of type ev.
 * True when the thread went to sleep inside the fault (it stays open).
 */
static bool fault_decide(struct engine *e, struct thr *t, uint64_t at, int ev, uint8_t out_state)
{
	uint64_t d;

	if (!t->f_open || t->f_decided)
		return false;
	d = at > t->f_r ? at - t->f_r : 0;
	if (ev == SB_EV_SWITCH_OUT && (out_state == SB_STATE_SLEEP || out_state == SB_STATE_DISK) &&
	    d < FAULT_RUN_NS) {
		/* it blocked inside the fault: all of it, and the sleep, are the fault's */
		t->f_e = at;
		t->f_decided = true;
		return true;
	}
	if (ev == SB_EV_FAULT && d < FAULT_RUN_NS)
		t->f_e = at;
	else
		t->f_e = t->f_r + min64(d, e->fault_cost);
	t->f_decided = true;
	return false;
}

static void fault_calibrate(struct engine *e, uint64_t gap)
{
	int b;

	if (!gap || gap >= FAULT_RUN_NS || e->o.fault_cost_ns)
		return;
	b = (int)(log2((double)gap) * FH_PER_OCT);
	if (b < 0)
		b = 0;
	if (b >= FH_PER_OCT * FH_OCT)
		b = FH_PER_OCT * FH_OCT - 1;
	e->fh[b]++;
	e->fh_n++;
	if (e->fh_n >= FAULT_CALIB_MIN && (e->fh_n & (e->fh_n - 1)) == 0) {
		/* re-estimate at powers of two: the median bucket's geometric middle */
		uint64_t half = e->fh_n / 2, run = 0;

		for (b = 0; b < FH_PER_OCT * FH_OCT; b++) {
			run += e->fh[b];
			if (run > half)
				break;
		}
		e->fault_cost = (uint64_t)exp2(((double)b + 0.5) / FH_PER_OCT);
	}
}

/*
 * An own event of candidate t at `at`: the time up to it is attributed before
 * its state changes. Returns the piece accumulator for counting, or NULL.
 */
static struct acc *own_event(struct engine *e, struct thr *t, uint64_t at, int ev,
			     uint8_t out_state)
{
	bool blocked = false;

	if (t->cand < 0) {
		if (t->state == TS_UNKNOWN && ev != SB_EV_SWITCH_OUT) {
			t->state = TS_RUNNING;
			t->since = at;
		}
		return NULL;
	}
	if (ev != SB_EV_RECLAIM)
		blocked = fault_decide(e, t, at, ev, out_state);
	thr_account(e, t, at);
	/* it did something itself: it was on a CPU */
	if (t->state == TS_UNKNOWN && ev != SB_EV_SWITCH_OUT) {
		t->state = TS_RUNNING;
		t->since = at;
	}
	if (t->f_open && t->f_decided && !blocked && ev != SB_EV_RECLAIM)
		t->f_open = false;
	if (ev != SB_EV_RECLAIM) {
		t->last_ev = (uint8_t)ev;
		t->last_ev_ts = at;
	}
	return e->gap_open && e->cur_piece ? &e->cur_piece->acc[t->cand] : NULL;
}

/* the thread that marks steps exited: its step in progress ends there, unfinished */
static void step_owner_gone(struct engine *e, struct thr *t, uint64_t at)
{
	if (!t->sink && e->cur_step && e->cur_step->marker_tid == t->tid && at >= e->cur_step->start)
		end_step(e, at, true);
}

static void add_overlay(struct thr *t, uint64_t s, uint64_t end, int cause)
{
	if (end <= s)
		return;
	if (t->nov == OV_MAX) {
		/* keep the ones that end last */
		uint32_t k = 0;

		for (uint32_t i = 1; i < t->nov; i++)
			if (t->ov[i].e < t->ov[k].e)
				k = i;
		t->ov[k] = t->ov[--t->nov];
	}
	t->ov[t->nov++] = (struct ovl){ .s = s, .e = end, .cause = (uint8_t)cause };
}

static void ev_switch_out(struct engine *e, const struct sb_switch_out *r)
{
	struct thr *t = thr_get(e, r->h.tid, r->h.pid);
	struct acc *a = own_event(e, t, r->h.ts, SB_EV_SWITCH_OUT, r->state);

	if (t->state == TS_RUNNABLE)
		ep_push(e, t, EP_RUN, t->since, r->h.ts, t->cpu, 0, 0);
	if (t->f_open && (r->state == SB_STATE_SLEEP || r->state == SB_STATE_DISK)) {
		t->f_blocked = true;
		e->faults_blocked++;
		if (a && r->state == SB_STATE_DISK)
			a->cnt[ENG_N_MAJOR_FAULTS]++;
	}
	switch (r->state) {
	case SB_STATE_RUNNABLE:
		t->state = TS_RUNNABLE;
		if (a)
			a->cnt[ENG_N_PREEMPT]++;
		break;
	case SB_STATE_SLEEP:
		t->state = TS_SLEEP_S;
		if (a)
			a->cnt[ENG_N_SLEEPS]++;
		break;
	case SB_STATE_DISK:
		t->state = TS_SLEEP_D;
		if (a)
			a->cnt[ENG_N_SLEEPS]++;
		break;
	case SB_STATE_DEAD:
		t->state = TS_DEAD;
		step_owner_gone(e, t, r->h.ts);
		break;
	default:
		t->state = TS_UNKNOWN;
		break;
	}
	t->since = r->h.ts;
	t->cpu = r->h.cpu;
	t->migrated = false;
	{
		char nc[SB_COMM_LEN + 1];

		/* set_cpus_allowed on a running thread: it waits while the stopper moves it */
		comm_copy(nc, r->next_comm);
		t->sleep_migr = t->state != TS_RUNNABLE && is_stopper(nc);
	}
}

static void ev_switch_in(struct engine *e, const struct sb_switch_in *r)
{
	struct thr *t = thr_get(e, r->h.tid, r->h.pid);
	uint8_t prev = t->state;

	if (t->cand >= 0)
		thr_account(e, t, r->h.ts);
	if (prev == TS_RUNNABLE)
		ep_push(e, t, EP_RUN, t->since, r->h.ts, t->cpu, 0, 0);
	else if (prev == TS_SLEEP_S || prev == TS_SLEEP_D)
		ep_push(e, t, prev == TS_SLEEP_S ? EP_SLEEP_S : EP_SLEEP_D, t->since, r->h.ts, t->cpu,
			0, 0);
	if (prev == TS_SLEEP_S || prev == TS_SLEEP_D)
		resolve_sleep(e, t, NULL);
	t->sleep_migr = false;
	if (t->f_open && t->f_blocked) {
		/* back from the fault's sleep: what remains is decided at the next event */
		t->f_blocked = false;
		t->f_decided = false;
		t->f_r = r->h.ts;
	}
	t->state = TS_RUNNING;
	t->since = r->h.ts;
	t->cpu = r->h.cpu;
	t->migrated = false;
}

static void ev_wakeup(struct engine *e, const struct sb_wakeup *r)
{
	struct thr *t = thr_get(e, r->h.tid, r->h.pid);

	if (t->state != TS_SLEEP_S && t->state != TS_SLEEP_D && t->state != TS_UNKNOWN)
		return; /* woken before it got off the CPU: it never slept */
	if (t->cand >= 0)
		thr_account(e, t, r->h.ts);
	if (t->state == TS_SLEEP_S || t->state == TS_SLEEP_D) {
		ep_push(e, t, t->state == TS_SLEEP_S ? EP_SLEEP_S : EP_SLEEP_D, t->since, r->h.ts,
			t->cpu, r->waker_pid, r->waker_tid);
		resolve_sleep(e, t, r);
	}
	t->state = TS_RUNNABLE;
	t->since = r->h.ts;
	t->cpu = r->h.cpu;
	{
		char wc[SB_COMM_LEN + 1];

		comm_copy(wc, r->waker_comm);
		/* woken by the stopper that moved it: the wait on the new CPU is the move's */
		t->migrated = is_stopper(wc) || t->sleep_migr;
		t->sleep_migr = false;
	}
}

static void ev_migrate(struct engine *e, const struct sb_migrate *r)
{
	struct thr *t = thr_get(e, r->h.tid, r->h.pid);

	if (t->state == TS_RUNNABLE) {
		if (t->cand >= 0)
			thr_account(e, t, r->h.ts);
		ep_push(e, t, EP_RUN, t->since, r->h.ts, t->cpu, 0, 0);
		t->since = r->h.ts;
		t->migrated = true;
	}
	t->cpu = r->dest_cpu;
	if (t->cand >= 0 && e->gap_open && e->cur_piece)
		e->cur_piece->acc[t->cand].cnt[ENG_N_MIGRATIONS]++;
}

static void ev_fault(struct engine *e, const struct sb_fault *r)
{
	struct thr *t = thr_find(e, r->h.tid);
	struct acc *a;
	bool back_to_back;

	if (!t || t->cand < 0)
		return;
	back_to_back = t->last_ev == SB_EV_FAULT && t->f_open;
	if (back_to_back && r->h.ts > t->last_ev_ts)
		fault_calibrate(e, r->h.ts - t->last_ev_ts);
	a = own_event(e, t, r->h.ts, SB_EV_FAULT, 0);
	t->f_open = true;
	t->f_decided = false;
	t->f_blocked = false;
	t->f_r = r->h.ts;
	if (a) {
		a->cnt[ENG_N_FAULTS]++;
		/* the counter moved since the last fault: that many were major */
		if (t->maj_known && r->maj_flt > t->last_maj && !(r->h.flags & SB_FAULT_MINOR))
			a->cnt[ENG_N_MAJOR_FAULTS] += (uint32_t)min64(r->maj_flt - t->last_maj, 1);
		else if (r->h.flags & SB_FAULT_MAJOR)
			a->cnt[ENG_N_MAJOR_FAULTS]++;
	}
	t->last_maj = r->maj_flt;
	t->maj_known = true;
}

static void ev_interval(struct engine *e, uint32_t tid, uint64_t s, uint64_t end, int ev,
			int cause, int count)
{
	struct thr *t = thr_find(e, tid);
	struct acc *a;

	if (!t || t->cand < 0)
		return;
	a = own_event(e, t, s, ev, 0);
	add_overlay(t, s, end, cause);
	if (a && count >= 0)
		a->cnt[count]++;
}

/*
 * A sched_setaffinity() call, swept at its start s. Being moved is done inside
 * the call: on a CPU, asleep while the stopper moves the thread, runnable on
 * the new CPU (the moves themselves are counted by their migrate records). A
 * thread that calls it back to back is busy moving itself: the few
 * microseconds between the calls (the system call's entry and exit, the loop)
 * are the moves' too.
 */
#define AFF_JOIN_NS 20000

static void ev_affinity(struct engine *e, const struct sb_affinity *r, uint64_t s)
{
	struct thr *t = thr_find(e, r->h.tid);

	if (!t || t->cand < 0)
		return;
	if (t->aff_end && s > t->aff_end && s - t->aff_end <= AFF_JOIN_NS)
		add_overlay(t, t->aff_end, s, ENG_MIGRATION);
	ev_interval(e, r->h.tid, s, r->h.ts, SB_EV_AFFINITY, ENG_MIGRATION, -1);
	t->aff_end = r->h.ts;
}

static void add_burst(struct thr *t, uint64_t s, uint64_t end, uint64_t budget)
{
	if (end <= s || !budget)
		return;
	if (t->nbov == BOV_MAX) {
		uint32_t k = 0;

		for (uint32_t i = 1; i < t->nbov; i++)
			if (t->bov[i].e < t->bov[k].e)
				k = i;
		t->bov[k] = t->bov[--t->nbov];
	}
	t->bov[t->nbov++] = (struct bov){ .s = s, .e = end, .left = min64(budget, end - s) };
}

/* a burst of fast allocator calls, swept at its start s */
static void ev_alloc_burst(struct engine *e, const struct sb_alloc_burst *r, uint64_t s)
{
	struct thr *t = thr_find(e, r->h.tid);
	uint64_t span = r->h.ts > r->start_ns ? r->h.ts - r->start_ns : 0, budget = r->sum_ns;
	struct acc *a;

	if (!t || t->cand < 0)
		return;
	a = own_event(e, t, s, SB_EV_ALLOC_BURST, 0);
	if (span && (r->sum_ns + r->slow_ns) / STORM_NUM >= span / STORM_DEN)
		budget = span; /* a storm */
	add_burst(t, s, r->h.ts, budget);
	if (a)
		a->cnt[ENG_N_BURST_ALLOCS] += (uint32_t)min64(r->calls,
							      UINT32_MAX - a->cnt[ENG_N_BURST_ALLOCS]);
}

static void ev_runslice(struct engine *e, const struct sb_runslice *r, uint64_t start)
{
	struct rs x = { .s = start, .e = r->h.ts, .pid = r->h.pid, .tid = r->h.tid };
	struct thr *t;

	if (x.e <= x.s)
		return;
	/*
	 * A slice of one of the target's threads proves it was on a CPU from its
	 * start: if its switch-in never arrived, this stands in for it.
	 */
	if (e->tpid && r->h.pid == e->tpid && (t = thr_find(e, r->h.tid)) &&
	    (t->state == TS_RUNNABLE || t->state == TS_SLEEP_S || t->state == TS_SLEEP_D ||
	     t->state == TS_UNKNOWN)) {
		struct sb_switch_in in = { .h = r->h };

		in.h.type = SB_EV_SWITCH_IN;
		in.h.ts = start;
		ev_switch_in(e, &in);
		e->repaired++;
	}
	memcpy(x.comm, r->comm, SB_COMM_LEN);
	rs_push(e, r->h.cpu, &x);
}

static void ev_thread(struct engine *e, const struct sb_thread *r, bool exiting)
{
	struct thr *t = thr_get(e, r->h.tid, r->h.pid);

	comm_copy(t->comm, r->comm);
	if (exiting) {
		if (t->cand >= 0)
			thr_account(e, t, r->h.ts);
		t->state = TS_DEAD;
		t->since = r->h.ts;
		step_owner_gone(e, t, r->h.ts);
	}
}

static int cuda_cause(uint32_t fn)
{
	switch (fn) {
	case SB_CU_SYNC: return ENG_CUDA_SYNC;
	case SB_CU_ALLOC:
	case SB_CU_FREE: return ENG_CUDA_ALLOC;
	}
	return ENG_CUDA_API;
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
	struct thr *t;
	const struct str *n;

	switch (g->sub) {
	case SB_MARK_STEP_BEGIN:
		on_mark(e, ENG_SRC_GPU_MARKER, MK_BEGIN, g->bytes, g->h.ts, g->h.tid);
		break;
	case SB_MARK_STEP_END:
		on_mark(e, ENG_SRC_GPU_MARKER, MK_END, g->bytes, g->h.ts, g->h.tid);
		break;
	case SB_MARK_RANGE_PUSH:
		t = thr_get(e, g->h.tid, e->tpid);
		if (t->sink)
			break;
		if (t->nvtx_n < 64) {
			grow(e, (void **)&t->nvtx, &t->nvtx_cap, t->nvtx_n + 1, sizeof(*t->nvtx));
			t->nvtx[t->nvtx_n++] = g->name_id;
		}
		n = str_find(e, g->name_id);
		if (n && n->nvtx)
			on_mark(e, ENG_SRC_NVTX, MK_BEGIN,
				marker_number(e, n, g->bytes, ENG_SRC_NVTX), g->h.ts, g->h.tid);
		break;
	case SB_MARK_RANGE_POP:
		t = thr_get(e, g->h.tid, e->tpid);
		if (!t->sink && t->nvtx_n) {
			n = str_find(e, t->nvtx[--t->nvtx_n]);
			if (n && n->nvtx)
				on_mark(e, ENG_SRC_NVTX, MK_END, 0, g->h.ts, g->h.tid);
		}
		break;
	}
}

static void gpu_rec(struct engine *e, const struct sb_gpu *g)
{
	struct thr *t;
	uint32_t tid;

	switch (g->h.flags) {
	case SB_GPU_KERNEL:
	case SB_GPU_MEMCPY:
	case SB_GPU_MEMSET:
		gpu_op(e, g);
		break;
	case SB_GPU_API:
		if (g->correlation_id && e->corr) {
			typeof(e->corr) c = &e->corr[g->correlation_id % CORR_SLOTS];

			/* a slot reused before its operation started: that one is lost */
			if (c->queued && e->gpu_queued)
				e->gpu_queued--;
			c->corr = g->correlation_id;
			c->tid = g->h.tid;
			c->queued = g->sub == SB_API_LAUNCH || g->sub == SB_API_MEMCPY;
			e->gpu_queued += c->queued;
		}
		if (!g->h.tid)
			break;
		t = thr_get(e, g->h.tid, e->tpid);
		if (g->sub == SB_API_LAUNCH || g->sub == SB_API_MEMCPY) {
			cand_add(e, t);
			e->last_launch_tid = g->h.tid;
		}
		ev_interval(e, g->h.tid, g->h.ts, g->end_ns, SB_EV_CUDA, api_cause(g->sub),
			    ENG_N_CUDA);
		break;
	case SB_GPU_SYNC:
		tid = g->h.tid ? g->h.tid : corr_tid(e, g->correlation_id);
		if (tid)
			ev_interval(e, tid, g->h.ts, g->end_ns, SB_EV_CUDA, ENG_CUDA_SYNC, -1);
		break;
	case SB_GPU_MARKER:
		gpu_marker(e, g);
		break;
	}
}

/* one record, in time order; key = the time it takes effect */
static void sweep_rec(struct engine *e, uint64_t key, const struct sb_hdr *h)
{
	if (key < e->now)
		key = e->now;
	/* the GPU went idle somewhere before this instant */
	if (e->gpu_started && !e->gap_open && key > e->busy_until)
		open_gap(e, e->busy_until);
	e->now = key;
	if (e->cur_step && h->pid == e->tpid && h->type <= SB_EV_KERNEL_LAST) {
		int cls;
		uint64_t n = sb_cost_of(h, &cls);

		if (n)
			e->cur_step->tev[cls] += n;
	}

	switch (h->type) {
	case SB_EV_SWITCH_OUT:
		ev_switch_out(e, (const struct sb_switch_out *)h);
		break;
	case SB_EV_SWITCH_IN:
		ev_switch_in(e, (const struct sb_switch_in *)h);
		break;
	case SB_EV_RUNSLICE:
		ev_runslice(e, (const struct sb_runslice *)h, key);
		break;
	case SB_EV_WAKEUP:
		ev_wakeup(e, (const struct sb_wakeup *)h);
		break;
	case SB_EV_MIGRATE:
		ev_migrate(e, (const struct sb_migrate *)h);
		break;
	case SB_EV_FAULT:
		ev_fault(e, (const struct sb_fault *)h);
		break;
	case SB_EV_RECLAIM: {
		const struct sb_reclaim *r = (const void *)h;

		ev_interval(e, h->tid, key, r->h.ts, SB_EV_RECLAIM, ENG_MEM_RECLAIM,
			    ENG_N_RECLAIMS);
		break;
	}
	case SB_EV_MMSYS:
		ev_interval(e, h->tid, key, h->ts, SB_EV_MMSYS, ENG_ALLOC, ENG_N_MMAP);
		break;
	case SB_EV_ALLOC:
		ev_interval(e, h->tid, key, h->ts, SB_EV_ALLOC, ENG_ALLOC, ENG_N_ALLOCS);
		break;
	case SB_EV_ALLOC_BURST:
		ev_alloc_burst(e, (const struct sb_alloc_burst *)h, key);
		break;
	case SB_EV_IOSYS:
		/* on a CPU inside it, or asleep in it uninterruptibly: the I/O's */
		ev_interval(e, h->tid, key, h->ts, SB_EV_IOSYS, ENG_IO_WAIT, ENG_N_IO);
		break;
	case SB_EV_AFFINITY:
		ev_affinity(e, (const struct sb_affinity *)h, key);
		break;
	case SB_EV_CUDA: {
		const struct sb_cuda *c = (const void *)h;
		struct thr *t = thr_get(e, h->tid, h->pid);

		if (c->fn == SB_CU_LAUNCH || c->fn == SB_CU_MEMCPY) {
			cand_add(e, t);
			e->last_launch_tid = h->tid;
		}
		ev_interval(e, h->tid, key, h->ts, SB_EV_CUDA, cuda_cause(c->fn), ENG_N_CUDA);
		break;
	}
	case SB_EV_STEP: {
		const struct sb_step *s = (const void *)h;
		struct thr *t = thr_get(e, h->tid, h->pid);

		own_event(e, t, key, SB_EV_STEP, 0);
		on_mark(e, s->source == SB_STEP_UPROBE ? ENG_SRC_UPROBE : ENG_SRC_USDT, MK_MARK,
			s->step, key, h->tid);
		break;
	}
	case SB_EV_THREAD_NEW:
		ev_thread(e, (const struct sb_thread *)h, false);
		break;
	case SB_EV_THREAD_EXIT:
		ev_thread(e, (const struct sb_thread *)h, true);
		break;
	case SB_EV_RENAME: {
		const struct sb_rename *r = (const void *)h;

		comm_copy(thr_get(e, h->tid, h->pid)->comm, r->newcomm);
		break;
	}
	case SB_REC_GPU:
		gpu_rec(e, (const struct sb_gpu *)h);
		break;
	}
}

/* -------------------------------------------------------- reorder window */

/* the records the engine takes in: kernel events and the GPU timeline; 0 for others */
static size_t rec_size(unsigned type)
{
	return (type > SB_EV_NONE && type <= SB_EV_KERNEL_LAST) || type == SB_REC_GPU ?
		       sb_type_size(type) : 0;
}

/* when a timed record starts to matter: intervals at their start */
static uint64_t rec_key(const struct sb_hdr *h)
{
	uint64_t s;

	switch (h->type) {
	case SB_EV_RUNSLICE: s = ((const struct sb_runslice *)h)->start_ns; break;
	case SB_EV_RECLAIM: s = ((const struct sb_reclaim *)h)->start_ns; break;
	case SB_EV_MMSYS: s = ((const struct sb_mmsys *)h)->start_ns; break;
	case SB_EV_ALLOC: s = ((const struct sb_alloc *)h)->start_ns; break;
	case SB_EV_CUDA: s = ((const struct sb_cuda *)h)->start_ns; break;
	case SB_EV_ALLOC_BURST: s = ((const struct sb_alloc_burst *)h)->start_ns; break;
	case SB_EV_IOSYS: s = ((const struct sb_iosys *)h)->start_ns; break;
	case SB_EV_AFFINITY: s = ((const struct sb_affinity *)h)->start_ns; break;
	default: return h->ts;
	}
	return s && s <= h->ts ? s : h->ts;
}

static int qidx_cmp(const void *a, const void *b)
{
	const struct qidx *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void ovf_push(struct engine *e, uint64_t key, uint64_t seq, const void *rec, size_t len)
{
	void *c = xcalloc(e, 1, len);
	size_t i;

	memcpy(c, rec, len);
	if (e->novf == e->capovf) {
		size_t nc = e->capovf ? e->capovf * 2 : 16;
		struct ovf *n = realloc(e->ovf, nc * sizeof(*n));

		if (!n)
			abort();
		heap_add(e, (int64_t)((nc - e->capovf) * sizeof(*n)));
		e->ovf = n;
		e->capovf = nc;
	}
	i = e->novf++;
	e->ovf[i] = (struct ovf){ key, seq, c };
	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (e->ovf[p].key < e->ovf[i].key ||
		    (e->ovf[p].key == e->ovf[i].key && e->ovf[p].seq < e->ovf[i].seq))
			break;
		struct ovf t = e->ovf[p];

		e->ovf[p] = e->ovf[i];
		e->ovf[i] = t;
		i = p;
	}
}

static void ovf_pop(struct engine *e)
{
	size_t i = 0;

	e->ovf[0] = e->ovf[--e->novf];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < e->novf && (e->ovf[l].key < e->ovf[m].key ||
				    (e->ovf[l].key == e->ovf[m].key && e->ovf[l].seq < e->ovf[m].seq)))
			m = l;
		if (r < e->novf && (e->ovf[r].key < e->ovf[m].key ||
				    (e->ovf[r].key == e->ovf[m].key && e->ovf[r].seq < e->ovf[m].seq)))
			m = r;
		if (m == i)
			break;
		struct ovf t = e->ovf[m];

		e->ovf[m] = e->ovf[i];
		e->ovf[i] = t;
		i = m;
	}
}

static void bucket_put(struct engine *e, uint64_t key, uint64_t seq, const void *rec, size_t len)
{
	uint64_t bi = (key >> BK_SHIFT) & (e->nbk - 1);
	struct bucket *b = &e->bk[bi];
	size_t need = sizeof(struct qent) + len;
	struct qent q = { .key = key, .seq = seq, .len = (uint32_t)len };
	struct bchunk *c = b->tail;

	if (need > sizeof(c->data)) {
		/* rec_size() knows no record this big */
		sb_err("a %zu-byte record in the blame engine", len);
		abort();
	}
	if (!c || c->len + need > sizeof(c->data)) {
		c = e->bfree;
		if (c)
			e->bfree = c->next;
		else
			c = xcalloc(e, 1, sizeof(*c));
		c->next = NULL;
		c->len = 0;
		if (b->tail)
			b->tail->next = c;
		else
			b->head = c;
		b->tail = c;
	}
	memcpy(c->data + c->len, &q, sizeof(q));
	memcpy(c->data + c->len + sizeof(q), rec, len);
	c->len += (uint32_t)need;
	if (!b->n++)
		e->bkbits[bi / 64] |= 1ull << (bi % 64);
	e->queued++;
	e->qbytes += sizeof(q) + len;
	if (e->queued > e->queued_peak)
		e->queued_peak = e->queued;
	if (e->qbytes > e->qbytes_peak)
		e->qbytes_peak = e->qbytes;
}

static bool qidx_less(const struct qidx *x, const struct qidx *y)
{
	return x->key < y->key || (x->key == y->key && x->seq < y->seq);
}

/*
 * Sort a bucket's index by (key, seq), which is unique: any sort gives the same
 * order. A bucket is nearly sorted (records arrive nearly in time order), so
 * insertion sort, unless it has to move too much.
 */
static void qidx_sort(struct qidx *v, uint32_t n)
{
	uint64_t moves = 0, budget = 8 * (uint64_t)n + 64;

	for (uint32_t i = 1; i < n; i++) {
		struct qidx x = v[i];
		uint32_t j = i;

		while (j > 0 && qidx_less(&x, &v[j - 1])) {
			v[j] = v[j - 1];
			j--;
		}
		v[j] = x;
		moves += i - j;
		if (moves > budget) {
			qsort(v, n, sizeof(*v), qidx_cmp);
			return;
		}
	}
}

static void sweep_bucket(struct engine *e, struct bucket *b)
{
	uint32_t n = b->n, i = 0;
	bool sorted = true;

	if (!n)
		return;
	if (n > e->idx_cap) {
		size_t nc = e->idx_cap ? e->idx_cap : 256;
		struct qidx *q;

		while (nc < n)
			nc *= 2;
		q = realloc(e->idx, nc * sizeof(*q));
		if (!q)
			abort();
		heap_add(e, (int64_t)((nc - e->idx_cap) * sizeof(*q)));
		e->idx = q;
		e->idx_cap = nc;
	}
	/* written lag_ns ago, long out of the cache: ask for all of it at once */
	for (const struct bchunk *c = b->head; c; c = c->next)
		for (uint32_t o = 0; o < c->len; o += 64)
			__builtin_prefetch(c->data + o);
	for (const struct bchunk *c = b->head; c; c = c->next) {
		for (uint32_t off = 0; off < c->len; i++) {
			const struct qent *q = (const void *)(c->data + off);

			e->idx[i] = (struct qidx){ q->key, q->seq, q };
			if (i && sorted && qidx_less(&e->idx[i], &e->idx[i - 1]))
				sorted = false;
			off += sizeof(*q) + q->len;
		}
	}
	if (!sorted)
		qidx_sort(e->idx, n);
	for (i = 0; i < n; i++) {
		const struct qent *q = e->idx[i].q;

		sweep_rec(e, q->key, (const struct sb_hdr *)(q + 1));
		e->queued--;
		e->qbytes -= sizeof(*q) + q->len;
	}
	/* only the buckets still ahead of the sweep hold records: the window, nothing more */
	b->tail->next = e->bfree;
	e->bfree = b->head;
	b->head = b->tail = NULL;
	b->n = 0;
	e->bkbits[(b - e->bk) / 64] &= ~(1ull << ((b - e->bk) % 64));
}

/*
 * The first bucket at or after `from` that holds records, looking no further
 * than `last` or one turn of the calendar: that far the sweep has nothing to
 * do but move on, however far apart the timestamps lie.
 */
static uint64_t next_full(const struct engine *e, uint64_t from, uint64_t last)
{
	uint64_t n = min64(last - from, e->nbk), i = 0;

	while (i < n) {
		uint64_t p = (from + i) & (e->nbk - 1), w = e->bkbits[p / 64] >> (p % 64);

		if (w)
			return from + min64(i + (uint64_t)__builtin_ctzll(w), n);
		i += 64 - p % 64;
	}
	return from + n;
}

/* sweep every bucket that ends at or before `upto` */
static void release(struct engine *e, uint64_t upto)
{
	uint64_t last = upto >> BK_SHIFT;

	if (!e->q_init || e->in_release)
		return;
	e->in_release = true;
	while (e->rel < last) {
		if (!e->queued && e->novf && (e->ovf[0].key >> BK_SHIFT) > e->rel) {
			e->rel = min64(e->ovf[0].key >> BK_SHIFT, last);
			continue;
		}
		if (!e->queued && !e->novf) {
			e->rel = last;
			break;
		}
		if (e->queued && !e->bk[e->rel & (e->nbk - 1)].n) {
			/*
			 * Empty buckets: skip to the next that holds records (the overflow
			 * records all lie a turn of the calendar beyond it). Committing and
			 * finalising depend only on the sweep's time, which empty buckets
			 * do not move: once is as good as once per bucket.
			 */
			uint64_t nx = next_full(e, e->rel, last);

			if (nx > e->rel) {
				e->rel = nx;
				commit_ended(e, e->now, false);
				finalize_ready(e);
				continue;
			}
		}
		/* overflow records whose bucket has come into the window */
		while (e->novf && (e->ovf[0].key >> BK_SHIFT) < e->rel + e->nbk) {
			struct ovf o = e->ovf[0];
			const struct sb_hdr *h = o.rec;

			size_t len = rec_size(h->type);

			ovf_pop(e);
			bucket_put(e, max64(o.key, e->rel << BK_SHIFT), o.seq, o.rec, len);
			free(o.rec);
			heap_add(e, -(int64_t)len);
		}
		{
			/* the next bucket's first chunk: it is swept next, as cold as this one */
			const struct bchunk *c = e->bk[(e->rel + 1) & (e->nbk - 1)].head;

			if (c)
				for (size_t o = 0; o < sizeof(*c); o += 64)
					__builtin_prefetch((const char *)c + o);
		}
		sweep_bucket(e, &e->bk[e->rel & (e->nbk - 1)]);
		e->rel++;
		commit_ended(e, e->now, false);
		finalize_ready(e);
	}
	e->in_release = false;
}

static void enqueue(struct engine *e, const struct sb_hdr *h, size_t len)
{
	uint64_t key = rec_key(h);
	bool late = false;

	if (!e->q_init) {
		/* the window starts one lag before the first record */
		e->rel = (h->ts > e->lag ? h->ts - e->lag : 0) >> BK_SHIFT;
		e->q_init = true;
	}
	if (key >> BK_SHIFT < e->rel) {
		/* its time is already final: it still counts, from now on */
		if (h->ts < (e->rel << BK_SHIFT))
			e->late++;
		key = e->rel << BK_SHIFT;
		late = true;
	}
	if ((key >> BK_SHIFT) >= e->rel + e->nbk)
		ovf_push(e, key, e->seq++, h, len);
	else
		bucket_put(e, key, e->seq++, h, len);
	/*
	 * Time stopped moving (one record far ahead of the rest: every later one
	 * is late and joins the first bucket): sweep that bucket rather than let
	 * it hold the whole input.
	 */
	if (late && e->bk[e->rel & (e->nbk - 1)].n >= FRONTIER_MAX && !e->in_release &&
	    e->rel < (UINT64_MAX >> BK_SHIFT)) {
		e->frontier_flushes++;
		release(e, (e->rel + 1) << BK_SHIFT);
	}
}

/* ------------------------------------------------------------ text records */

static void text_of(const struct sb_hdr *h, const char **s, size_t *n, uint32_t *id)
{
	const struct sb_text *t = (const void *)h;
	size_t max = h->size - sizeof(*t);

	*s = t->text;
	*n = t->len < max ? t->len : max;
	*id = t->id;
}

static void str_put(struct engine *e, uint32_t id, const char *s, size_t n)
{
	struct str *x = (struct str *)str_find(e, id);
	uint64_t had = x ? x->alloc : 0;

	/* names a trace may hold: STR_MAX of them, STR_BYTES_MAX in all; the rest are counted */
	if ((!x && e->nstr >= STR_MAX) || e->str_bytes - had + n + 1 > STR_BYTES_MAX) {
		e->str_dropped++;
		return;
	}
	e->str_bytes += n + 1 - had;
	if (!x) {
		if ((e->nstr + 1) * 2 > e->shash_cap) {
			uint32_t nc = e->shash_cap ? e->shash_cap * 2 : 256;

			free(e->shash);
			heap_add(e, -(int64_t)(e->shash_cap * sizeof(uint32_t)));
			e->shash = xcalloc(e, nc, sizeof(uint32_t));
			e->shash_cap = nc;
			for (uint32_t i = 0; i < e->nstr; i++)
				for (uint32_t k = hash32(e->strs[i].id) & (nc - 1);; k = (k + 1) & (nc - 1))
					if (!e->shash[k]) {
						e->shash[k] = i + 1;
						break;
					}
		}
		grow(e, (void **)&e->strs, &e->capstr, e->nstr + 1, sizeof(*e->strs));
		x = &e->strs[e->nstr++];
		x->id = id;
		for (uint32_t k = hash32(id) & (e->shash_cap - 1);; k = (k + 1) & (e->shash_cap - 1))
			if (!e->shash[k]) {
				e->shash[k] = e->nstr;
				break;
			}
	} else {
		heap_add(e, -(int64_t)x->alloc);
		free(x->text);
	}
	x->text = xstrndup(e, s, n);
	x->alloc = (uint32_t)(n + 1);
	x->nvtx = e->has_nvtx && !regexec(&e->re_nvtx, x->text, 0, NULL, 0);
	x->kernel = e->has_kernel && !regexec(&e->re_kernel, x->text, 0, NULL, 0);
}

static void meta(struct engine *e, const struct sb_hdr *h)
{
	const char *s;
	size_t n;
	uint32_t id;
	char buf[64];

	switch (h->type) {
	case SB_REC_TARGET:
		text_of(h, &s, &n, &id);
		if (kv_get(s, n, "pid", buf, sizeof(buf)))
			e->tpid = (uint32_t)strtoul(buf, NULL, 10);
		else
			e->tpid = h->pid;
		if (kv_get(s, n, "comm", buf, sizeof(buf))) {
			memset(e->tcomm, 0, sizeof(e->tcomm));
			memcpy(e->tcomm, buf, min64(strlen(buf), SB_COMM_LEN));
		}
		{
			char cmd[1024];

			if (kv_get(s, n, "cmdline", cmd, sizeof(cmd))) {
				if (e->tcmdline) {
					heap_add(e, -(int64_t)(strlen(e->tcmdline) + 1));
					free(e->tcmdline);
				}
				e->tcmdline = xstrndup(e, cmd, strlen(cmd));
			}
		}
		break;
	case SB_REC_THREAD: {
		struct thr *t;

		text_of(h, &s, &n, &id);
		t = thr_get(e, h->tid, h->pid);
		memset(t->comm, 0, sizeof(t->comm));
		memcpy(t->comm, s, n < SB_COMM_LEN ? n : SB_COMM_LEN);
		t->comm[strcspn(t->comm, "\n")] = 0;
		break;
	}
	case SB_REC_COSTS:
		text_of(h, &s, &n, &id);
		sb_costs_parse(&e->costs, s, n);
		e->costs_given = true;
		break;
	case SB_REC_GUARD:
		text_of(h, &s, &n, &id);
		guard_record(e, h->ts, s, n);
		break;
	case SB_REC_HOST:
		text_of(h, &s, &n, &id);
		/* a recorder that measured the per-fault cost says so */
		if (!e->o.fault_cost_ns && kv_get(s, n, "fault_ns", buf, sizeof(buf))) {
			uint64_t v = strtoull(buf, NULL, 10);

			if (v) {
				e->o.fault_cost_ns = v;
				e->fault_cost = v;
			}
		}
		break;
	case SB_REC_STRING:
		text_of(h, &s, &n, &id);
		if (id)
			str_put(e, id, s, n);
		break;
	case SB_REC_PROBE:
		text_of(h, &s, &n, &id);
		if (!id && e->nprobes_missing >= PROBES_MAX) {
			e->probes_dropped++;
		} else if (!id) {
			char **p = realloc(e->probes_missing, (e->nprobes_missing + 1) * sizeof(*p));

			if (!p)
				abort();
			e->probes_missing = p;
			heap_add(e, sizeof(*p));
			p[e->nprobes_missing++] = xstrndup(e, s, n);
		}
		break;
	case SB_REC_DROPS:
		memcpy(&e->drops, h, sizeof(e->drops));
		e->have_drops = true;
		break;
	case SB_REC_TRAILER: {
		const struct sb_trailer *t = (const void *)h;

		e->complete = true;
		e->end_reason = t->end_reason;
		e->trailer_ts = t->h.ts;
		e->trailer_start = t->start_ns;
		break;
	}
	}
}

/* ------------------------------------------------------------ the clock */

/*
 * A time the capture's own clock vouches for: a kernel record (its start, too,
 * when it is the first), an agent record, the live clock.
 */
static void clock_saw(struct engine *e, uint64_t ts, bool start_too)
{
	if (start_too)
		e->clk_lo = min64(e->clk_lo, ts);
	else if (e->clk_lo > e->clk_hi)
		e->clk_lo = ts;
	e->clk_hi = max64(e->clk_hi, ts);
}

/*
 * A GPU record comes from the trainer (the channel, CUPTI's clock, the
 * producer's clock offset): its times are believed only inside the capture,
 * give or take ENG_GPU_MARGIN_NS. One at 2^64 would otherwise hold the
 * reorder window open for ever (every later record late, the window growing
 * with the input), one at 0 would close gaps that never closed.
 */
static bool gpu_time_ok(struct engine *e, const struct sb_gpu *g)
{
	uint64_t lo, hi;

	if (g->end_ns < g->h.ts)
		return false;
	if (e->clk_lo > e->clk_hi)
		return true;
	lo = e->clk_lo > ENG_GPU_MARGIN_NS ? e->clk_lo - ENG_GPU_MARGIN_NS : 0;
	if (g->h.ts < lo)
		return false;
	hi = e->clk_hi < UINT64_MAX - ENG_GPU_MARGIN_NS ? e->clk_hi + ENG_GPU_MARGIN_NS : UINT64_MAX;
	if (g->end_ns <= hi)
		return true;
	if (!e->o.live)
		return false;
	/* live: the records are drained after they happened, so the clock now bounds them */
	clock_saw(e, mono_ns(), false);
	hi = e->clk_hi + ENG_GPU_MARGIN_NS;
	return g->end_ns <= hi;
}

static size_t meta_min(unsigned type)
{
	switch (type) {
	case SB_REC_HOST:
	case SB_REC_TARGET:
	case SB_REC_THREAD:
	case SB_REC_PROBE:
	case SB_REC_STRING:
	case SB_REC_NOTE:
	case SB_REC_COSTS:
	case SB_REC_GUARD: return sizeof(struct sb_text);
	case SB_REC_CPU: return sizeof(struct sb_cpu);
	case SB_REC_ALLOC_STATS: return sizeof(struct sb_alloc_stats);
	case SB_REC_DROPS: return sizeof(struct sb_drops);
	case SB_REC_TRAILER: return sizeof(struct sb_trailer);
	}
	return 0;
}

void engine_feed(struct engine *e, const struct sb_hdr *h)
{
	size_t len;

	if (!e || !h || e->finished)
		return;
	e->records++;
	len = rec_size(h->type);
	if (len) {
		if (h->size < len) {
			e->malformed++;
			return;
		}
		if (h->type == SB_REC_GPU) {
			uint16_t k = h->flags;

			if (!gpu_time_ok(e, (const struct sb_gpu *)h)) {
				e->gpu_rejected++;
				return;
			}
			if (k == SB_GPU_KERNEL || k == SB_GPU_MEMCPY || k == SB_GPU_MEMSET)
				e->gpu_fed = true;
		} else {
			clock_saw(e, h->ts, true);
		}
		if (!e->have_ts) {
			e->first_ts = h->ts;
			e->have_ts = true;
		}
		if (h->type == SB_EV_STEP || h->type == SB_EV_SWITCH_OUT || h->type == SB_EV_SWITCH_IN)
			if (!e->tpid)
				e->tpid = h->pid;
		enqueue(e, h, len);
		if (h->ts > e->max_ts)
			e->max_ts = h->ts;
		if (e->max_ts > e->lag)
			release(e, e->max_ts - e->lag);
		return;
	}
	len = meta_min(h->type);
	if (!len || h->size < len) {
		e->malformed++;
		return;
	}
	meta(e, h);
	if (h->type == SB_REC_DROPS || h->type == SB_REC_TRAILER)
		clock_saw(e, h->ts, false);
	/* the agent's own periodic records say how far the clock has moved */
	if ((h->type == SB_REC_DROPS || h->type == SB_REC_TRAILER) && h->ts > e->max_ts) {
		e->max_ts = h->ts;
		if (e->max_ts > e->lag)
			release(e, e->max_ts - e->lag);
	}
}

void engine_advance(struct engine *e, uint64_t now)
{
	if (!e || e->finished)
		return;
	clock_saw(e, now, false);
	if (now > e->max_ts)
		e->max_ts = now;
	if (e->max_ts > e->lag)
		release(e, e->max_ts - e->lag);
}

void engine_set_truncated(struct engine *e, const char *why)
{
	if (!e)
		return;
	if (e->truncated) {
		heap_add(e, -(int64_t)(strlen(e->truncated) + 1));
		free(e->truncated);
	}
	e->truncated = xstrndup(e, why ? why : "cut short", strlen(why ? why : "cut short"));
}

void engine_finish(struct engine *e)
{
	uint64_t end;

	if (!e || e->finished)
		return;
	release(e, UINT64_MAX - (1ull << (BK_SHIFT + 1)));
	end = max64(e->max_ts, e->now);
	if (e->complete && e->trailer_ts > end)
		end = e->trailer_ts;
	if (e->cur_step)
		end_step(e, max64(end, e->cur_step->start), true);
	cut_all(e, end);
	if (e->gap_open) {
		if (e->cur_piece) {
			e->cur_piece->closed = true;
			e->cur_piece = NULL;
		}
		commit_ended(e, 0, true);
	}
	finalize_ready(e);
	for (int i = 0; i < e->ncand; i++)
		timeline_thread_flush(e, e->cand[i]);
	summarise_all(e, &e->final_summary);
	mark_tails(e, &e->final_summary);
	e->finished = true;
}

void engine_set_step_cb(struct engine *e, engine_step_cb cb, void *ctx)
{
	e->cb = cb;
	e->cb_ctx = ctx;
}

/* ----------------------------------------------------------- lifecycle */

struct engine *engine_new(const struct engine_opts *o, char *err, size_t errlen)
{
	struct engine *e = calloc(1, sizeof(*e));
	char msg[256];
	int rc;

	if (!e) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	heap_add(e, sizeof(*e));
	if (o)
		e->o = *o;
	e->lag = e->o.lag_ns ? e->o.lag_ns : DEFAULT_LAG_NS;
	e->hist = max64(e->lag, MIN_HIST_NS);
	e->fault_cost = e->o.fault_cost_ns ? e->o.fault_cost_ns : DEFAULT_FAULT_NS;
	sb_costs_default(&e->costs);
	if (e->o.step_nvtx) {
		rc = regcomp(&e->re_nvtx, e->o.step_nvtx, REG_EXTENDED | REG_NOSUB);
		if (rc) {
			regerror(rc, &e->re_nvtx, msg, sizeof(msg));
			snprintf(err, errlen, "--step-nvtx '%s': %s", e->o.step_nvtx, msg);
			free(e);
			return NULL;
		}
		e->has_nvtx = true;
		e->forced_src = ENG_SRC_NVTX;
	}
	if (e->o.step_kernel) {
		rc = regcomp(&e->re_kernel, e->o.step_kernel, REG_EXTENDED | REG_NOSUB);
		if (rc) {
			regerror(rc, &e->re_kernel, msg, sizeof(msg));
			snprintf(err, errlen, "--step-kernel '%s': %s", e->o.step_kernel, msg);
			if (e->has_nvtx)
				regfree(&e->re_nvtx);
			free(e);
			return NULL;
		}
		e->has_kernel = true;
		if (!e->forced_src)
			e->forced_src = ENG_SRC_KERNEL;
	}
	/* the span of the calendar comfortably exceeds the lag */
	e->nbk = 1024;
	while (((uint64_t)e->nbk << BK_SHIFT) < e->lag + (1ull << 30))
		e->nbk *= 2;
	e->bk = xcalloc(e, e->nbk, sizeof(*e->bk));
	e->bkbits = xcalloc(e, e->nbk / 64, sizeof(*e->bkbits));
	e->corr = xcalloc(e, CORR_SLOTS, sizeof(*e->corr));
	e->clk_lo = UINT64_MAX;
	if (e->o.start_ns)
		clock_saw(e, e->o.start_ns, true);
	if (e->o.keep_steps)
		window_begin(e, e->o.keep_steps);
	/* GPU idle until its first operation */
	e->gap_open = true;
	return e;
}

void engine_free(struct engine *e)
{
	if (!e)
		return;
	for (uint32_t i = 0; i <= e->nbk; i++) {
		struct bchunk *c = i < e->nbk ? e->bk[i].head : e->bfree;

		while (c) {
			struct bchunk *next = c->next;

			free(c);
			c = next;
		}
	}
	free(e->bk);
	free(e->idx);
	for (size_t i = 0; i < e->novf; i++)
		free(e->ovf[i].rec);
	free(e->ovf);
	for (uint32_t i = 0; i < e->nthr; i++) {
		free(e->thr[i]->ep);
		free(e->thr[i]->nvtx);
		free(e->thr[i]);
	}
	free(e->thr);
	free(e->thash);
	for (uint32_t i = 0; i < e->ncpu; i++)
		free(e->cpu[i].v);
	free(e->cpu);
	free(e->corr);
	free(e->ks);
	free(e->gch);
	for (uint32_t i = 0; i < e->nstr; i++)
		free(e->strs[i].text);
	free(e->strs);
	free(e->shash);
	for (uint32_t i = 0; i < e->pq_n; i++) {
		struct piece *p = e->pq[(e->pq_head + i) % e->pq_cap];

		for (int c = 0; c < MAX_CAND; c++)
			free(p->acc[c].cul);
		free(p);
	}
	free(e->pq);
	for (uint32_t i = 0; i < e->npfree; i++) {
		struct piece *p = e->pfree[i];

		for (int c = 0; c < MAX_CAND; c++)
			free(p->acc[c].cul);
		free(p);
	}
	free(e->pfree);
	for (uint32_t i = 0; i < e->sq_n; i++) {
		struct swip *st = e->sq[(e->sq_head + i) % e->sq_cap];

		free(st->sacc.cul);
		free(st);
	}
	free(e->sq);
	for (uint64_t i = 0; i < e->nchunks; i++) {
		pools_free(e, e->res[i]);
		free(e->res[i]);
	}
	free(e->res);
	free(e->ws);
	free(e->itf);
	free(e->sink);
	free(e->bkbits);
	free(e->tcmdline);
	free(e->truncated);
	for (uint32_t i = 0; i < e->nprobes_missing; i++)
		free(e->probes_missing[i]);
	free(e->probes_missing);
	if (e->has_nvtx)
		regfree(&e->re_nvtx);
	if (e->has_kernel)
		regfree(&e->re_kernel);
	free(e);
}

/* ------------------------------------------------------------- summaries */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* nearest-rank percentile num/den of sorted v[n] */
static uint64_t rank_pct(const uint64_t *v, uint64_t n, uint64_t num, uint64_t den)
{
	uint64_t k;

	if (!n)
		return 0;
	k = (num * n + den - 1) / den;
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

/* the k-th smallest of v[0..n), k < n: the value a sort would put at v[k] (v is reordered) */
static uint64_t kth_u64(uint64_t *v, uint64_t n, uint64_t k)
{
	uint64_t lo = 0, hi = n, rounds = 0;

	while (hi - lo > 16) {
		uint64_t a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi - 1], p, lt = lo, i = lo, gt = hi;

		/* median of three */
		p = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
		/* three ways: [lo, lt) < p, [lt, gt) == p, [gt, hi) > p */
		while (i < gt) {
			uint64_t x = v[i];

			if (x < p) {
				v[i++] = v[lt];
				v[lt++] = x;
			} else if (x > p) {
				v[i] = v[--gt];
				v[gt] = x;
			} else {
				i++;
			}
		}
		if (k < lt)
			hi = lt;
		else if (k >= gt)
			lo = gt;
		else
			return p;
		if (++rounds > 64) {
			/* an input that defeats the pivot: sort what is left */
			qsort(v + lo, hi - lo, sizeof(*v), cmp_u64);
			return v[k];
		}
	}
	for (uint64_t i = lo + 1; i < hi; i++)
		for (uint64_t j = i; j > lo && v[j - 1] > v[j]; j--) {
			uint64_t t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return v[k];
}

/* nearest rank, as rank_pct(sorted v, n, 1, 2); v is reordered */
static uint64_t median_of(uint64_t *v, uint64_t n)
{
	return n ? kth_u64(v, n, (n + 1) / 2 - 1) : 0;
}

static uint64_t mad_of(uint64_t *v, uint64_t n, uint64_t med)
{
	for (uint64_t i = 0; i < n; i++)
		v[i] = v[i] > med ? v[i] - med : med - v[i];
	return median_of(v, n);
}

/*
 * A run of identical steps has MAD 0, which would call every step 1 ns over
 * the median a tail: MAD is floored at 1% of the median.
 */
static uint64_t tail_threshold(uint64_t med, uint64_t mad)
{
	uint64_t floor = med / 100;

	return med + 3 * (mad > floor ? mad : floor);
}

static bool complete_step(const struct eng_step *s)
{
	return !s->incomplete;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void dips(const struct engine *e, uint64_t first, uint64_t last, struct eng_summary *s,
		 uint64_t *tmp)
{
	uint64_t n = 0, nd = 0, med_idle, mad_idle, med_dur, thr;
	uint64_t *idx;
	double *share;

	s->dip = ENG_DIP_UNKNOWN;
	s->dip_period = 0;
	s->ndips = 0;
	s->dip_busy_median = -1;
	for (uint64_t i = first; i < last; i++)
		if (complete_step(RES(e, i)) && RES(e, i)->gpu_timeline)
			tmp[n++] = RES(e, i)->gpu_idle_ns;
	if (!n)
		return;
	med_idle = median_of(tmp, n);
	mad_idle = mad_of(tmp, n, med_idle);
	n = 0;
	for (uint64_t i = first; i < last; i++)
		if (complete_step(RES(e, i)) && RES(e, i)->gpu_timeline)
			tmp[n++] = RES(e, i)->duration_ns;
	med_dur = median_of(tmp, n);
	thr = med_idle + 3 * (mad_idle > med_dur / 100 ? mad_idle : med_dur / 100);

	share = calloc(n, sizeof(*share));
	idx = calloc(n, sizeof(*idx));
	if (!share || !idx) {
		free(share);
		free(idx);
		return;
	}
	n = 0;
	for (uint64_t i = first; i < last; i++) {
		const struct eng_step *r = RES(e, i);

		if (!complete_step(r) || !r->gpu_timeline)
			continue;
		share[n++] = r->duration_ns ? (double)r->gpu_busy_ns / (double)r->duration_ns : 0;
		if (r->gpu_idle_ns > thr)
			idx[nd++] = r->index;
	}
	qsort(share, n, sizeof(*share), cmp_double);
	s->dip_busy_median = share[(n - 1) / 2];
	s->ndips = nd;
	if (nd >= 3) {
		/* the spacing K that pairs the most dips with a dip K steps away */
		uint64_t best_k = 0, best = 0, lim = nd < 1024 ? nd : 1024; /* quadratic below */

		for (uint64_t i = 1; i < lim; i++) {
			uint64_t k = idx[i] - idx[i - 1], score = 0;

			if (k < 2 || k == best_k)
				continue;
			for (uint64_t a = 0; a < lim; a++) {
				uint64_t want = idx[a] + k, lo = a + 1, hi = lim;

				while (lo < hi) {
					uint64_t m = (lo + hi) / 2;

					if (idx[m] < want)
						lo = m + 1;
					else
						hi = m;
				}
				bool fwd = lo < lim && idx[lo] == want;
				bool back = false;

				if (idx[a] >= k) {
					uint64_t w2 = idx[a] - k, l2 = 0, h2 = a;

					while (l2 < h2) {
						uint64_t m = (l2 + h2) / 2;

						if (idx[m] < w2)
							l2 = m + 1;
						else
							h2 = m;
					}
					back = l2 < a && idx[l2] == w2;
				}
				score += fwd || back;
			}
			if (score > best || (score == best && k < best_k)) {
				best = score;
				best_k = k;
			}
		}
		/* at least three dips paired, and two thirds of them */
		if (best >= 3 && best * 3 >= lim * 2) {
			s->dip = ENG_DIP_PERIODIC;
			s->dip_period = best_k;
		}
	}
	if (s->dip != ENG_DIP_PERIODIC) {
		/* under half busy in the median step: the host cannot feed the GPU */
		if (s->dip_busy_median < 0.5)
			s->dip = ENG_DIP_LOW;
		else
			s->dip = nd ? ENG_DIP_SPORADIC : ENG_DIP_NONE;
	}
	free(share);
	free(idx);
}

static void summarise_range(const struct engine *e, uint64_t first, uint64_t last,
			    struct eng_summary *s)
{
	uint64_t n = 0, *v;

	memset(s, 0, sizeof(*s));
	s->gpu_busy_share = -1;
	s->nsteps = last - first;
	v = calloc(s->nsteps ? s->nsteps : 1, sizeof(*v));
	if (!v)
		return;
	for (uint64_t i = first; i < last; i++) {
		const struct eng_step *r = RES(e, i);

		for (int c = 0; c < ENG_NCAUSE; c++)
			s->cause_total[c] += r->cause_ns[c];
		if (r->gpu_timeline) {
			s->busy_total += r->gpu_busy_ns;
			s->dur_total += r->duration_ns;
		}
		if (complete_step(r))
			v[n++] = r->duration_ns;
	}
	if (s->dur_total)
		s->gpu_busy_share = (double)s->busy_total / (double)s->dur_total;
	s->ncomplete = n;
	if (n) {
		qsort(v, n, sizeof(*v), cmp_u64);
		s->min = v[0];
		s->max = v[n - 1];
		s->p50 = rank_pct(v, n, 50, 100);
		s->p90 = rank_pct(v, n, 90, 100);
		s->p99 = rank_pct(v, n, 99, 100);
		s->p999 = rank_pct(v, n, 999, 1000);
		s->p99_over_p50 = s->p50 ? (double)s->p99 / (double)s->p50 : 0;
		s->mad = mad_of(v, n, s->p50);
		s->tail_threshold_ns = tail_threshold(s->p50, s->mad);
		for (int c = 0; c < ENG_NCAUSE; c++) {
			uint64_t k = 0;

			for (uint64_t i = first; i < last; i++)
				if (complete_step(RES(e, i)))
					v[k++] = RES(e, i)->cause_ns[c];
			s->cause_median[c] = median_of(v, k);
		}
		uint64_t k = 0;

		for (uint64_t i = first; i < last; i++)
			if (complete_step(RES(e, i)))
				v[k++] = RES(e, i)->gpu_idle_ns;
		s->idle_median = median_of(v, k);
	}
	if (n) {
		uint64_t k = 0;

		for (uint64_t i = first; i < last; i++)
			if (complete_step(RES(e, i)))
				v[k++] = RES(e, i)->tracer_ns;
		s->tracer_median_ns = median_of(v, k);
		k = 0;
		for (uint64_t i = first; i < last; i++) {
			const struct eng_step *r = RES(e, i);

			if (complete_step(r))
				v[k++] = r->duration_ns ? r->tracer_ns * 1000000 / r->duration_ns : 0;
		}
		qsort(v, k, sizeof(*v), cmp_u64);
		s->tracer_p50_ppm = rank_pct(v, k, 50, 100);
		s->tracer_p99_ppm = rank_pct(v, k, 99, 100);
		s->tracer_max_ppm = v[k - 1];
	}
	for (uint64_t i = first; i < last; i++) {
		const struct eng_step *r = RES(e, i);

		s->tracer_total_ns += r->tracer_ns;
		s->sampled_steps += r->alloc_sampled;
		s->ntail += n && complete_step(r) && r->duration_ns > s->tail_threshold_ns;
	}
	dips(e, first, last, s, v);
	free(v);
}

/* live only: judge a step against the last LIVE_WINDOW steps */
static void running_tail(struct engine *e, struct eng_step *r)
{
	uint64_t first = e->nres > LIVE_WINDOW ? e->nres - LIVE_WINDOW : 0, n = 0, med, mad;
	uint64_t v[LIVE_WINDOW];

	r->tail = false;
	if (r->incomplete || !e->cb)
		return;
	for (uint64_t i = first; i < e->nres; i++)
		if (complete_step(RES(e, i)))
			v[n++] = RES(e, i)->duration_ns;
	if (n < 3)
		return;
	med = median_of(v, n);
	mad = mad_of(v, n, med);
	r->tail = r->duration_ns > tail_threshold(med, mad);
}

bool engine_costs(const struct engine *e, struct sb_costs *c)
{
	*c = e->costs;
	return e->costs_given;
}

void engine_guard(const struct engine *e, struct eng_guard *g)
{
	*g = e->guard;
}

/*
 * Window mode, once steps have been dropped: the figures over all steps from
 * the running summaries, the tail flags and dips over the steps kept.
 */
static void summarise_window(const struct engine *e, struct eng_summary *s)
{
	const struct allsum *w = e->ws;
	uint64_t first = first_kept(e), *v;

	memset(s, 0, sizeof(*s));
	s->gpu_busy_share = -1;
	s->nsteps = w->nsteps;
	s->ncomplete = w->ncomplete;
	memcpy(s->cause_total, w->cause_total, sizeof(s->cause_total));
	s->busy_total = w->busy_total;
	s->dur_total = w->dur_total;
	if (s->dur_total)
		s->gpu_busy_share = (double)s->busy_total / (double)s->dur_total;
	s->tracer_total_ns = w->tracer_total;
	s->sampled_steps = w->sampled;
	if (w->ncomplete) {
		uint64_t *p[] = { &s->p50, &s->p90, &s->p99, &s->p999 };
		const uint64_t num[] = { 50, 90, 99, 999 }, den[] = { 100, 100, 100, 1000 };

		s->min = w->min;
		s->max = w->max;
		for (int i = 0; i < 4; i++)
			*p[i] = min64(max64(hg_pct(&w->dur, num[i], den[i]), w->min), w->max);
		s->p99_over_p50 = s->p50 ? (double)s->p99 / (double)s->p50 : 0;
		s->mad = hg_mad(&w->dur, s->p50);
		s->tail_threshold_ns = tail_threshold(s->p50, s->mad);
		s->ntail = hg_above(&w->dur, s->tail_threshold_ns);
		for (int c = 0; c < ENG_NCAUSE; c++)
			s->cause_median[c] = hg_pct(&w->cause[c], 50, 100);
		s->idle_median = hg_pct(&w->idle, 50, 100);
		s->tracer_median_ns = hg_pct(&w->tracer, 50, 100);
		s->tracer_p50_ppm = hg_pct(&w->tracer_ppm, 50, 100);
		s->tracer_p99_ppm = hg_pct(&w->tracer_ppm, 99, 100);
		s->tracer_max_ppm = w->tracer_ppm_max;
	}
	v = calloc(e->nres - first + 1, sizeof(*v));
	if (v)
		dips(e, first, e->nres, s, v);
	free(v);
	s->windowed = true;
	s->first_kept = first;
	s->pct_error = 1.0 / (2 * HG_SUB);
}

/*
 * The summary over all steps: in window mode, once steps have been dropped,
 * from the running summaries (the tail flags and dips over the steps kept).
 */
static void summarise_all(const struct engine *e, struct eng_summary *s)
{
	if (e->ws && e->chunk0)
		summarise_window(e, s);
	else
		summarise_range(e, 0, e->nres, s);
}

/* the final judgement, into the steps kept (engine_finish) */
static void mark_tails(struct engine *e, const struct eng_summary *s)
{
	for (uint64_t i = first_kept(e); i < e->nres; i++) {
		struct eng_step *r = RES(e, i);

		r->tail = s->ncomplete && complete_step(r) && r->duration_ns > s->tail_threshold_ns;
	}
}

void engine_summarise(const struct engine *e, struct eng_summary *s)
{
	if (e->finished)
		*s = e->final_summary;
	else
		summarise_all(e, s);
}

void engine_running_summary(const struct engine *e, struct eng_summary *s)
{
	summarise_range(e, e->nres > LIVE_WINDOW ? e->nres - LIVE_WINDOW : 0, e->nres, s);
}

int engine_step_excess(const struct engine *e, const struct eng_step *st,
		       const struct eng_summary *s, struct eng_excess *out, int max)
{
	int n = 0;

	(void)e;
	for (int c = 0; c < ENG_NCAUSE && n < max; c++) {
		uint64_t med = s->cause_median[c];

		if (st->cause_ns[c] <= med)
			continue;
		memset(&out[n], 0, sizeof(out[n]));
		out[n].cause = (uint8_t)c;
		out[n].ns = st->cause_ns[c] - med;
		for (uint32_t i = 0; i < st->nblame; i++)
			if (st->blame[i].cause == c && st->blame[i].has_who) {
				out[n].has_who = true;
				out[n].who = st->blame[i].who;
				break;
			}
		n++;
	}
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && (out[j - 1].ns < out[j].ns ||
					  (out[j - 1].ns == out[j].ns && out[j - 1].cause > out[j].cause));
		     j--) {
			struct eng_excess t = out[j];

			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	return n;
}

static int itf_cmp(const void *a, const void *b)
{
	const struct eng_interferer *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns > y->ns ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return strcmp(x->comm, y->comm);
}

int engine_interferers(const struct engine *e, struct eng_interferer *out, int max)
{
	struct eng_interferer *all;
	uint32_t n = 0;
	int k;

	if (!e->itf_n || max <= 0)
		return 0;
	all = calloc(e->itf_n, sizeof(*all));
	if (!all)
		return 0;
	for (uint32_t i = 0; i < e->itf_cap; i++) {
		const struct interf *x = &e->itf[i];

		if (!x->used || !x->ns)
			continue;
		all[n].pid = x->pid;
		memcpy(all[n].comm, x->comm, sizeof(all[n].comm));
		all[n].ns = x->ns;
		all[n].own = e->tpid && x->pid == e->tpid;
		n++;
	}
	qsort(all, n, sizeof(*all), itf_cmp);
	k = (int)n < max ? (int)n : max;
	memcpy(out, all, k * sizeof(*all));
	free(all);
	return k;
}

uint64_t engine_nsteps(const struct engine *e)
{
	return e ? e->nres : 0;
}

const struct eng_step *engine_step(const struct engine *e, uint64_t i)
{
	return e && i < e->nres && i >= first_kept(e) ? RES(e, i) : NULL;
}

uint64_t engine_first_step(const struct engine *e)
{
	return e ? first_kept(e) : 0;
}

void engine_target(const struct engine *e, struct eng_target *t)
{
	memset(t, 0, sizeof(*t));
	t->pid = e->tpid;
	memcpy(t->comm, e->tcomm, sizeof(t->comm));
	if (!t->comm[0] && e->tpid)
		snprintf(t->comm, sizeof(t->comm), "%s", thr_comm(e, e->tpid));
	t->cmdline = e->tcmdline ? e->tcmdline : "";
}

void engine_capture(const struct engine *e, struct eng_capture *c)
{
	static const char *const reasons[] = { "unknown", "duration", "signal", "target_exit",
					       "error", "target_credentials" };

	memset(c, 0, sizeof(*c));
	c->start_ns = e->complete && e->trailer_start ? e->trailer_start : e->first_ts;
	c->end_ns = e->complete && e->trailer_ts ? e->trailer_ts : e->max_ts;
	c->complete = e->complete && !e->truncated;
	c->truncated = e->truncated;
	if (e->complete)
		c->end_reason = e->end_reason < ARRAY_LEN(reasons) ? reasons[e->end_reason] : "unknown";
	else
		c->end_reason = "cut_short";
	c->step_source = e->src;
	c->gpu_timeline = e->gpu_fed;
	c->records = e->records;
}

void engine_loss(const struct engine *e, struct eng_loss *l)
{
	memset(l, 0, sizeof(*l));
	if (e->have_drops) {
		for (int i = 0; i <= SB_EV_KERNEL_MAX; i++) {
			l->ring[i] = e->drops.ring[i];
			l->total += e->drops.ring[i];
		}
		l->gpu_channel = e->drops.gpu_channel;
		l->gpu_source = e->drops.gpu_source;
		l->wait_overflow = e->drops.wait_overflow;
		l->total += l->gpu_channel + l->gpu_source + l->wait_overflow;
	}
	l->late = e->late;
	l->malformed = e->malformed;
	l->inferred = e->repaired;
	l->gpu_rejected = e->gpu_rejected;
	l->total += l->late + l->malformed + l->inferred + l->gpu_rejected;
	l->nprobes_missing = e->nprobes_missing;
	l->probes_missing = (const char *const *)e->probes_missing;
}

void engine_limits(const struct engine *e, struct eng_limits *l)
{
	memset(l, 0, sizeof(*l));
	l->threads_forgotten = e->thr_forgotten;
	l->thread_records_lost = e->thr_lost;
	l->strings_dropped = e->str_dropped;
	l->kernel_shapes_dropped = e->ks_dropped;
	l->interferers_folded = e->itf_folded;
	l->interferers_other_ns = e->itf_other_ns;
	l->probes_dropped = e->probes_dropped;
	l->window_flushes = e->frontier_flushes;
}

bool eng_limits_any(const struct eng_limits *l)
{
	return l->threads_forgotten || l->thread_records_lost || l->strings_dropped ||
	       l->kernel_shapes_dropped || l->interferers_folded || l->probes_dropped ||
	       l->window_flushes;
}

void engine_fault_model(const struct engine *e, struct eng_fault_model *m)
{
	memset(m, 0, sizeof(*m));
	m->per_fault_ns = e->fault_cost;
	m->samples = e->fh_n;
	m->blocked = e->faults_blocked;
	if (e->o.fault_cost_ns)
		m->method = ENG_FAULT_GIVEN;
	else if (e->fh_n >= FAULT_CALIB_MIN)
		m->method = ENG_FAULT_CALIBRATED;
	else
		m->method = ENG_FAULT_DEFAULT;
}

void engine_stats(const struct engine *e, struct engine_stats *s)
{
	memset(s, 0, sizeof(*s));
	s->records = e->records;
	s->queued = e->queued;
	s->queued_peak = e->queued_peak;
	s->queue_bytes = e->qbytes;
	s->queue_bytes_peak = e->qbytes_peak;
	s->threads = e->nthr;
	s->runslices = e->runslices;
	s->runslices_peak = e->runslices_peak;
	s->episodes = e->episodes;
	s->episodes_peak = e->episodes_peak;
	s->pieces_peak = e->pieces_peak;
	s->steps_in_flight_peak = e->steps_flight_peak;
	s->heap_bytes = e->heap;
	s->heap_bytes_peak = e->heap_peak;
}

void engine_each_thread(const struct engine *e,
			void (*fn)(void *ctx, uint32_t tid, const char *comm), void *ctx)
{
	for (uint32_t i = 0; i < e->nthr; i++)
		fn(ctx, e->thr[i]->tid, e->thr[i]->comm);
}
