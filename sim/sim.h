/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* simtrainer: a multi-threaded stand-in for a trainer with a simulated GPU. */
#ifndef STEPBLAME_SIM_H
#define STEPBLAME_SIM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "format/channel.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define SIM_MAX_DUR 16
#define SIM_MAX_INJECT 64
#define SIM_STREAM 7   /* CUPTI's usual id for a context's default stream */
#define SIM_DEVICE 0
#define SIM_HOG_COMM "noisy-neighbor"
#define SIM_H2D_BYTES_PER_US 12000ull /* PCIe 4 x16, roughly */

enum sim_mark { MARK_USDT = 1, MARK_NVTX = 2, MARK_BOTH = 3, MARK_NONE = 0 };

enum inj_kind { INJ_HOG, INJ_FAULTS, INJ_ALLOC, INJ_MIGRATE, INJ_STALL, INJ_CKPT, INJ_NKINDS };

struct inject {
	enum inj_kind kind;
	uint64_t first, last;   /* steps first..last; period 0 */
	uint64_t period;        /* every period steps (n % period == 0, n > 0) */
	long param;
	char spec[64];
};

struct sim_opts {
	uint64_t steps;
	unsigned kernels;
	uint64_t kernel_ns[SIM_MAX_DUR];
	unsigned nkernel_ns;
	double jitter_pct;
	uint64_t launch_ns;
	unsigned queue_depth;
	unsigned loaders;
	uint64_t loader_ns;
	unsigned prefetch;
	const char *loader_read;
	uint64_t loader_read_bytes;
	uint64_t h2d_every;
	uint64_t h2d_bytes;
	uint64_t seed;
	int launcher_cpu;       /* -1: not pinned */
	int mark;               /* enum sim_mark bits */
	const char *truth;
	uint64_t start_delay_ns;
	uint64_t wait_agent_ns;
	const char *ckpt_dir;
	unsigned chan_slots;
	bool quiet;
	struct inject inj[SIM_MAX_INJECT];
	unsigned ninj;
	uint64_t busy_switches, busy_faults, busy_mallocs; /* --busy, per step */
};

/* ---- shared state ---- */
extern struct sim_opts opt;
extern struct sbc_producer *chan;
extern int g_stop;            /* set on SIGINT/SIGTERM; read with __atomic */

static inline bool stopping(void)
{
	return __atomic_load_n(&g_stop, __ATOMIC_RELAXED);
}

uint64_t now_ns(void);
void sleep_until(uint64_t t_ns);
void spin_ns(uint64_t ns);      /* burn CPU for ns of wall time */
uint64_t rng_next(uint64_t *state);
pid_t sim_gettid(void);
void sim_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sim_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* emit a record if an agent listens */
void sim_emit(struct sb_gpu *g);
/* condition variables that time out on CLOCK_MONOTONIC */
void sim_cond_init(pthread_cond_t *c);
int sim_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, uint64_t t_ns);

/* ---- busy.c: --busy, the launcher's steady host load ---- */
int busy_start(void);
void busy_stop(void);
void busy_work(unsigned part, unsigned parts);

/* ---- device.c: launch queue and the simulated GPU ---- */
enum op_kind { OP_KERNEL = 1, OP_H2D = 2 };

struct op {
	uint8_t kind;
	uint32_t corr;
	uint32_t name_id;
	uint32_t grid[3], block[3];
	uint64_t launch_ns;     /* set when enqueued */
	uint64_t dur_ns;
	uint64_t bytes;
};

int device_start(unsigned depth);
/* enqueue (blocks while the queue is full); returns the launch time, 0 if stopping */
uint64_t device_launch(struct op *op);
/* wait until the device has finished everything launched; false if stopping */
bool device_sync(void);
void device_wake(void);     /* on stop */
void device_join(void);
/* how long the launcher has waited on the device past a virtual end because the
 * device thread woke up late (not counting its own run delay); needs --truth */
uint64_t device_late(void);
/* totals for the summary */
void device_stats(uint64_t *busy_ns, uint64_t *ops);

/* ---- loader.c: data loaders and the batch queue ---- */
int loaders_start(void);
/* take a batch (blocks while the queue is empty); *tid = the loader that made it */
bool batch_take(pid_t *tid);
/* the queue runs dry: flush it, loaders hold their batches for ns */
void loaders_stall(uint64_t ns);
void loaders_wake(void);
void loaders_join(void);

/* ---- inject.c ---- */
int inject_parse(const char *spec, struct inject *out, char *err, size_t errlen);
bool inject_hits(const struct inject *in, uint64_t step);
const char *inject_kind_name(enum inj_kind k);
int injector_start(void);
void injector_wake(void);
void injector_join(void);
/* the launcher's hooks around one step */
void inject_step_begin(uint64_t step, uint64_t step_start);
bool inject_stall_active(void);
void inject_stall_done(pid_t loader_tid);
void inject_step_end(uint64_t step, uint64_t step_end);
void inject_cleanup(void);

/* ---- truth.c: ground truth JSONL ---- */
int truth_open(const char *path);
void truth_config(pid_t pid, pid_t launcher_tid, int launcher_cpu, const char *chan_path);
/* one line; extra is ",\"k\":v..." or "" */
void truth_event(uint64_t step, const char *kind, uint64_t start, uint64_t end, const char *extra);
void truth_close(uint64_t steps_done, const char *reason, uint64_t first_ns, uint64_t last_ns);
/* each of simtrainer's threads registers itself, so that an injection's truth can
 * say how long the kernel kept them waiting to run (schedstat run delay) */
void truth_watch_thread(void);
/* run delay so far, ns: summed over the registered threads and the caller's own;
 * false when there is no truth or the kernel keeps no schedstat */
bool truth_run_delay(uint64_t *all_ns, uint64_t *self_ns);
/* the caller's own run delay so far */
bool truth_self_run_delay(uint64_t *ns);
/* a step without injection: its run delay and device lateness, whose medians
 * go in the end line */
void truth_plain_step(uint64_t run_delay_ns, uint64_t device_late_ns);

#endif
