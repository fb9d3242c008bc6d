/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The engine's insides, shared by its rooms (engine.c says how it works, in
 * order). Not for use outside user/engine/: engine.h is the interface.
 */
#ifndef STEPBLAME_ENGINE_INTERNAL_H
#define STEPBLAME_ENGINE_INTERNAL_H

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "engine/engine.h"
#include "format/costs.h"
#include "format/gpu.h"
#include "format/trace.h"

#define BK_SHIFT 20                     /* ~1.05 ms buckets */
#define MAX_CAND 16
#define CUL_MAX 48
#define PEND_MAX 8
#define OV_MAX 16
#define BOV_MAX 4
#define FAULT_CALIB_MIN 64
#define FH_PER_OCT 16
#define FH_OCT 21
#define CORR_SLOTS 65536
#define RES_CHUNK 1024
#define BLAME_CHUNK 4096
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

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

	/*
	 * The reorder window hands each record on, in time order, to sweep, and
	 * calls time_moved after each bucket (or run of empty ones) it has swept.
	 */
	void (*sweep)(struct engine *e, uint64_t key, const struct sb_hdr *rec);
	void (*time_moved)(struct engine *e);

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

typedef void (*rs_fn)(struct engine *e, void *ctx, const struct rs *r, uint16_t cpu, uint64_t a,
		      uint64_t b);

enum { MK_MARK, MK_BEGIN, MK_END };

_Static_assert(ENG_MAX_BLAME >= ENG_NCAUSE, "a step must hold one entry per cause");

static inline void comm_copy(char *dst, const char *src)
{
	memcpy(dst, src, SB_COMM_LEN);
	dst[SB_COMM_LEN] = 0;
}

#define RES(e, i) (&(e)->res[(i) / RES_CHUNK - (e)->chunk0]->s[(i) % RES_CHUNK])

/* the first step still held (window mode drops the oldest) */
static inline uint64_t first_kept(const struct engine *e)
{
	return e->chunk0 * RES_CHUNK;
}

static inline uint64_t min64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static inline uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static inline uint32_t hash32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352dU;
	x ^= x >> 15;
	x *= 0x846ca68bU;
	x ^= x >> 16;
	return x;
}

/* the records the engine takes in: kernel events and the GPU timeline; 0 for others */
static inline size_t rec_size(unsigned type)
{
	return (type > SB_EV_NONE && type <= SB_EV_KERNEL_LAST) || type == SB_REC_GPU ?
		       sb_type_size(type) : 0;
}

/* ---- memory (engine.c) */

void heap_add(struct engine *e, int64_t d);
void grow(struct engine *e, void **p, uint32_t *cap, size_t need, size_t sz);
void *xcalloc(struct engine *e, size_t n, size_t sz);
char *xstrndup(struct engine *e, const char *s, size_t n);

/* ---- the reorder window (reorder.c) */

void release(struct engine *e, uint64_t upto);
void enqueue(struct engine *e, const struct sb_hdr *h, size_t len);

/* ---- threads and CPUs (threads.c) */

struct thr *thr_find(const struct engine *e, uint32_t tid);
struct thr *thr_get(struct engine *e, uint32_t tid, uint32_t pid);
const char *thr_comm(const struct engine *e, uint32_t tid);
void ep_push(struct engine *e, struct thr *t, uint8_t kind, uint64_t s, uint64_t end,
		    uint16_t cpu, uint32_t wpid, uint32_t wtid);
void rs_push(struct engine *e, uint32_t cpu, const struct rs *r);
uint64_t rs_cover(struct engine *e, uint16_t cpu, uint64_t a, uint64_t b, rs_fn fn,
			 void *ctx);

/* ---- classification (classify.c) */

void acc_reset(struct acc *a);
void acc_free(struct engine *e, struct acc *a);
void acc_merge(struct engine *e, struct acc *dst, const struct acc *src);
void timeline_thread_flush(struct engine *e, struct thr *t);
bool is_stopper(const char *comm);
void thr_account(struct engine *e, struct thr *t, uint64_t to);
void cut_all(struct engine *e, uint64_t t);
void resolve_sleep_acc(struct engine *e, struct thr *t, struct acc *a,
			      const struct sb_wakeup *wk);
void resolve_sleep(struct engine *e, struct thr *t, const struct sb_wakeup *wk);

/* ---- steps (steps.c) */

void pools_free(struct engine *e, struct rchunk *c);
struct piece *piece_new(struct engine *e, uint64_t step_seq, uint64_t start);
void commit_piece(struct engine *e, struct piece *p, uint32_t crit_tid);
uint32_t fallback_crit(struct engine *e, uint64_t step_seq);
void pq_pop(struct engine *e);
void commit_ended(struct engine *e, uint64_t older_than, bool all);
void finalize_ready(struct engine *e);
void end_step(struct engine *e, uint64_t t, bool incomplete);
void on_mark(struct engine *e, int src, int kind, uint64_t number, uint64_t t, uint32_t tid);
void cand_add(struct engine *e, struct thr *t);

/* ---- the GPU (gpu.c) */

void open_gap(struct engine *e, uint64_t t);
void gpu_rec(struct engine *e, const struct sb_gpu *g);

/* ---- host events (host.c) */

void ev_interval(struct engine *e, uint32_t tid, uint64_t s, uint64_t end, int ev,
			int cause, int count);
void sweep_rec(struct engine *e, uint64_t key, const struct sb_hdr *h);

/* ---- text records and the clock (meta.c) */

bool guard_sampled_in(struct engine *e, uint64_t s, uint64_t end);
const struct str *str_find(struct engine *e, uint32_t id);
void meta(struct engine *e, const struct sb_hdr *h);
void clock_saw(struct engine *e, uint64_t ts, bool start_too);
bool gpu_time_ok(struct engine *e, const struct sb_gpu *g);

/* ---- summaries (summary.c) */

void allsum_add(struct allsum *w, const struct eng_step *r);
void window_begin(struct engine *e, uint64_t keep);
void running_tail(struct engine *e, struct eng_step *r);
void summarise_all(const struct engine *e, struct eng_summary *s);
void mark_tails(struct engine *e, const struct eng_summary *s);

#endif
