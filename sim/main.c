// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * simtrainer: a real multi-threaded process shaped like a training loop, with
 * a simulated GPU that feeds the GPU timeline channel, and interference it
 * injects on purpose (inject.c) with ground truth (truth.c).
 *
 * Threads: main ("simtrainer": signals, teardown), "launcher" (the training
 * loop), "gpu-sim" (device.c), "loader-N" (loader.c), "injector" (forks the
 * CPU hog).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sim.h"
#include "stepblame.h"

struct sim_opts opt;
struct sbc_producer *chan;
int g_stop;

/* ---------------------------------------------------------------- helpers */

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void sleep_until(uint64_t t)
{
	struct timespec ts = { .tv_sec = (time_t)(t / 1000000000ull),
			       .tv_nsec = (long)(t % 1000000000ull) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

void spin_ns(uint64_t ns)
{
	uint64_t end = now_ns() + ns;

	while (now_ns() < end)
		;
}

uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

pid_t sim_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

void sim_log(const char *fmt, ...)
{
	va_list ap;

	fputs("simtrainer: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void sim_die(const char *fmt, ...)
{
	va_list ap;

	fputs("simtrainer: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

void sim_emit(struct sb_gpu *g)
{
	if (chan)
		sbc_emit(chan, g);
}

void sim_cond_init(pthread_cond_t *c)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(c, &a);
	pthread_condattr_destroy(&a);
}

int sim_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, uint64_t t)
{
	struct timespec ts = { .tv_sec = (time_t)(t / 1000000000ull),
			       .tv_nsec = (long)(t % 1000000000ull) };

	return pthread_cond_timedwait(c, m, &ts);
}

/* --------------------------------------------------------------- launcher */

static const struct kname {
	const char *name;
	uint32_t grid[3], block[3];
} knames[] = {
	{ "sgemm_128x64_nt", { 64, 32, 1 }, { 256, 1, 1 } },
	{ "layernorm_fwd", { 4096, 1, 1 }, { 128, 1, 1 } },
	{ "softmax_fwd", { 2048, 1, 1 }, { 256, 1, 1 } },
	{ "sgemm_128x64_tn", { 64, 32, 1 }, { 256, 1, 1 } },
	{ "gelu_bwd", { 8192, 1, 1 }, { 256, 1, 1 } },
	{ "layernorm_bwd", { 4096, 1, 1 }, { 128, 1, 1 } },
	{ "adam_update", { 1024, 1, 1 }, { 512, 1, 1 } },
};
static const struct kname kallreduce = { "nccl_allreduce", { 16, 1, 1 }, { 512, 1, 1 } };

static uint32_t kname_id[ARRAY_SIZE(knames)], kallreduce_id;
static uint32_t id_launch, id_sync, id_memcpy, id_range;
static pthread_t main_thr, launch_thr;
static pid_t launcher_tid;
static int launcher_done;
static uint64_t steps_done, first_ns, last_ns;
static uint64_t step_sum_ns, step_max_ns, step_min_ns = UINT64_MAX;

static void intern_names(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(knames); i++)
		kname_id[i] = sbc_intern(chan, knames[i].name);
	kallreduce_id = sbc_intern(chan, kallreduce.name);
	id_launch = sbc_intern(chan, "cudaLaunchKernel");
	id_sync = sbc_intern(chan, "cudaStreamSynchronize");
	id_memcpy = sbc_intern(chan, "cudaMemcpyAsync");
	id_range = sbc_intern(chan, "train_step");
}

static void emit_api(uint32_t sub, uint32_t name_id, uint32_t corr, uint64_t t0, uint64_t t1)
{
	struct sb_gpu g = {
		.h.flags = SB_GPU_API,
		.h.tid = (uint32_t)launcher_tid,
		.h.cpu = (uint16_t)sched_getcpu(),
		.h.ts = t0,
		.end_ns = t1,
		.correlation_id = corr,
		.device = SIM_DEVICE,
		.stream = SIM_STREAM,
		.name_id = name_id,
		.sub = sub,
	};

	sim_emit(&g);
}

static void emit_mark(uint32_t sub, uint32_t name_id, uint64_t step, uint64_t t)
{
	struct sb_gpu g = {
		.h.flags = SB_GPU_MARKER,
		.h.tid = (uint32_t)launcher_tid,
		.h.cpu = (uint16_t)sched_getcpu(),
		.h.ts = t,
		.end_ns = t,
		.bytes = step,
		.name_id = name_id,
		.sub = sub,
	};

	sim_emit(&g);
}

static uint32_t next_corr = 1;

/* one cudaLaunchKernel / cudaMemcpyAsync: CPU cost, then into the queue */
static bool launch(struct op *op, uint32_t api_sub, uint32_t api_name)
{
	uint64_t t0 = now_ns(), t1;

	op->corr = next_corr++;
	spin_ns(opt.launch_ns);
	t1 = device_launch(op);
	if (!t1)
		return false;
	emit_api(api_sub, api_name, op->corr, t0, t1);
	return true;
}

static uint64_t kernel_dur(unsigned k, uint64_t *rng)
{
	double d = (double)opt.kernel_ns[k % opt.nkernel_ns];

	if (opt.jitter_pct > 0) {
		double u = (double)(rng_next(rng) >> 11) / 9007199254740992.0; /* [0,1) */

		d *= 1.0 + opt.jitter_pct / 100.0 * (2.0 * u - 1.0);
	}
	return d < 1000 ? 1000 : (uint64_t)llround(d);
}

static bool sync_device(void)
{
	uint32_t corr = next_corr++;
	uint64_t t0 = now_ns(), t1;
	bool ok = device_sync();

	t1 = now_ns();
	emit_api(SB_API_SYNC, id_sync, corr, t0, t1);
	struct sb_gpu g = {
		.h.flags = SB_GPU_SYNC,
		.h.tid = (uint32_t)launcher_tid,
		.h.cpu = (uint16_t)sched_getcpu(),
		.h.ts = t0,
		.end_ns = t1,
		.correlation_id = corr,
		.device = SIM_DEVICE,
		.stream = SIM_STREAM,
		.sub = 3, /* CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE */
	};
	sim_emit(&g);
	return ok;
}

static void run_step(uint64_t n, uint64_t *rng)
{
	uint64_t t0 = now_ns(), t1;
	pid_t maker = 0;
	bool ok = true;

	if (opt.mark & MARK_USDT)
		stepblame_step(n);
	if (opt.mark & MARK_NVTX) {
		emit_mark(SB_MARK_STEP_BEGIN, 0, n, t0);
		emit_mark(SB_MARK_RANGE_PUSH, id_range, n, t0);
	}
	if (!first_ns)
		first_ns = t0;

	inject_step_begin(n, t0);
	if (!stopping())
		ok = batch_take(&maker);
	if (inject_stall_active())
		inject_stall_done(maker);
	if (ok && !stopping() && opt.h2d_every && n % opt.h2d_every == 0) {
		struct op op = { .kind = OP_H2D, .bytes = opt.h2d_bytes,
				 .dur_ns = opt.h2d_bytes * 1000 / SIM_H2D_BYTES_PER_US };

		ok = launch(&op, SB_API_MEMCPY, id_memcpy);
	}
	for (unsigned k = 0; ok && k < opt.kernels && !stopping(); k++) {
		const struct kname *kn = &knames[k % ARRAY_SIZE(knames)];
		struct op op = { .kind = OP_KERNEL, .dur_ns = kernel_dur(k, rng) };

		busy_work(k, opt.kernels);
		op.name_id = kname_id[k % ARRAY_SIZE(knames)];
		if (k + 1 == opt.kernels && opt.kernels > 1) {
			kn = &kallreduce;
			op.name_id = kallreduce_id;
		}
		memcpy(op.grid, kn->grid, sizeof(op.grid));
		memcpy(op.block, kn->block, sizeof(op.block));
		ok = launch(&op, SB_API_LAUNCH, id_launch);
	}
	if (ok && !stopping())
		ok = sync_device();
	t1 = now_ns();
	inject_step_end(n, t1);
	if (opt.mark & MARK_NVTX) {
		t1 = now_ns();
		emit_mark(SB_MARK_RANGE_POP, id_range, n, t1);
		emit_mark(SB_MARK_STEP_END, 0, n, t1);
	}
	if (ok && !stopping()) {
		uint64_t d = t1 - t0;

		steps_done++;
		last_ns = t1;
		step_sum_ns += d;
		step_max_ns = d > step_max_ns ? d : step_max_ns;
		step_min_ns = d < step_min_ns ? d : step_min_ns;
	}
}

static void *launcher_main(void *arg)
{
	uint64_t rng = opt.seed;

	prctl(PR_SET_NAME, "launcher");
	launcher_tid = sim_gettid();
	truth_watch_thread();
	if (opt.launcher_cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(opt.launcher_cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set)) {
			sim_log("cannot pin the launcher to CPU %d: %s; not pinned", opt.launcher_cpu,
				strerror(errno));
			opt.launcher_cpu = -1;
		}
	}
	truth_config(getpid(), launcher_tid, opt.launcher_cpu, chan ? sbc_path(chan) : NULL);
	if (opt.wait_agent_ns && chan) {
		uint64_t deadline = now_ns() + opt.wait_agent_ns;

		if (!opt.quiet)
			sim_log("pid %d: waiting up to %.1f s for an agent to enable %s", (int)getpid(),
				opt.wait_agent_ns / 1e9, sbc_path(chan));
		while (!sbc_active(chan) && !stopping() && now_ns() < deadline)
			sleep_until(now_ns() + 10000000);
		if (!sbc_active(chan) && !stopping() && !opt.quiet)
			sim_log("no agent came; starting anyway");
	}
	if (opt.start_delay_ns && !stopping())
		sleep_until(now_ns() + opt.start_delay_ns);
	for (uint64_t n = 0; n < opt.steps && !stopping(); n++)
		run_step(n, &rng);
	busy_stop();
	__atomic_store_n(&launcher_done, 1, __ATOMIC_RELEASE);
	pthread_kill(main_thr, SIGUSR1);
	return NULL;
}

/* ---------------------------------------------------------------- options */

static void usage(FILE *f)
{
	fprintf(f,
"usage: simtrainer [OPTIONS]\n"
"\n"
"A stand-in for a deep-learning trainer with a simulated GPU, for trying and\n"
"testing stepblame without one. It runs a real training-loop shape: a\n"
"\"launcher\" thread that takes a batch from the \"loader-N\" threads, launches\n"
"kernels into a bounded queue executed by the \"gpu-sim\" thread, and waits\n"
"for the GPU at the end of every step. GPU times are virtual (start =\n"
"max(launch, previous end), end = start + duration), so a busy host CPU\n"
"delays launches but never stretches kernels, as on a real GPU.\n"
"\n"
"Steps are marked with the USDT probe stepblame:step and/or marker records in\n"
"the GPU timeline channel /dev/shm/stepblame-PID-RANDOM.chan, which also carries\n"
"kernel, copy, API and sync records once an agent (stepblame) enables it.\n"
"\n"
"Shape of the run:\n"
"  --steps N             training steps (200)\n"
"  --kernels N           kernel launches per step; the last is nccl_allreduce (20)\n"
"  --kernel-us LIST      kernel durations in us, one or a comma list used in turn (400)\n"
"  --jitter PCT          spread kernel durations uniformly by +-PCT%% (0)\n"
"  --launch-us US        CPU time of one launch call on the launcher (20)\n"
"  --queue-depth N       launch queue size; the launcher blocks when full (1024)\n"
"  --loaders N           data-loader threads (2)\n"
"  --loader-us US        CPU work per batch in a loader (500)\n"
"  --prefetch N          batches the loaders may prepare ahead (4)\n"
"  --loader-read FILE[:BYTES]  loaders also read BYTES of FILE per batch (1048576)\n"
"  --h2d-every N         a host-to-device copy every N steps, 0 = never (1)\n"
"  --h2d-bytes N         bytes per copy, at ~12 GB/s (8388608)\n"
"  --seed N              seed of the jitter and injection randomness (1)\n"
"  --launcher-cpu CPU    pin the launcher to CPU, or 'none' (the last usable CPU)\n"
"  --busy SW,PF,MA       a busy launcher: each step, SW round trips to a busy-peer\n"
"                        thread (voluntary switches), PF minor page faults and MA\n"
"                        malloc/free pairs, spread over its launches (0,0,0)\n"
"  --mark MODE           step marks: usdt, nvtx (channel records STEP_BEGIN/END and\n"
"                        a 'train_step' range), both, none (both)\n"
"\n"
"Interference, --inject SPEC, repeatable. SPEC is KIND@STEP, KIND@FIRST-LAST or\n"
"KIND/PERIOD (steps PERIOD, 2*PERIOD, ...), optionally followed by :PARAM.\n"
"Each happens inside the injected step, before its launches:\n"
"  hog[:NICE]            a CPU-bound process \"" SIM_HOG_COMM "\" pinned to the\n"
"                        launcher's CPU for the steps (nice 0; below 0 needs root,\n"
"                        e.g. hog@100-120:-10 for a hog that wins the CPU)\n"
"  faults[:MIB]          the launcher maps and touches MIB of fresh memory (64)\n"
"  alloc[:CALLS]         malloc/free storm with big (mmap'd) blocks, malloc_trim (20000)\n"
"  migrate[:MOVES]       the launcher is moved across CPUs MOVES times (20)\n"
"  stall[:MS]            the loaders hold their batches MS ms; the queue runs dry (50)\n"
"  ckpt[:MIB]            the launcher writes MIB to --ckpt-dir and fsyncs (64)\n"
"  e.g. --inject hog@100-120 --inject ckpt/50 --inject faults@30:256\n"
"\n"
"Ground truth and coordination:\n"
"  --truth FILE          JSON lines: a config line; one line per injected step:\n"
"                        step, kind, start_ns, end_ns (CLOCK_MONOTONIC), culprit_pid\n"
"                        and culprit_comm where there is one, device_late_ns (the\n"
"                        launcher waited on the simulated GPU because its thread\n"
"                        woke late), for a hog run_delay_ns (simtrainer's threads\n"
"                        waited for a CPU); an end line with the medians of the\n"
"                        last two over steps without injection. Written to\n"
"                        FILE.partial.XXXXXX as it goes, renamed to FILE at exit\n"
"  --start-delay-ms MS   sleep before the first step (0)\n"
"  --wait-agent SEC      wait up to SEC s for an agent to enable the channel (0)\n"
"  --ckpt-dir DIR        where ckpt writes; pick a disk, not tmpfs (/var/tmp)\n"
"  --channel-slots N     GPU channel ring size in records (16384)\n"
"  --quiet               no messages but errors\n"
"  --help                this text\n"
"\n"
"Example: simtrainer --steps 300 --inject hog@100-120 --inject ckpt/50 --truth t.jsonl\n"
"Exit status: 0 when all steps ran, 128+N when stopped by signal N, 2 on bad usage.\n");
}

static uint64_t num_arg(const char *name, const char *s, uint64_t min, uint64_t max)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < min || v > max)
		sim_die("--%s: '%s' is not a number from %llu to %llu", name, s,
			(unsigned long long)min, (unsigned long long)max);
	return v;
}

static uint64_t us_arg(const char *name, const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= 0) || v > 3.6e9)
		sim_die("--%s: '%s' is not a time in microseconds", name, s);
	return (uint64_t)llround(v * 1000.0);
}

static int last_cpu(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set))
		return -1;
	for (int c = CPU_SETSIZE - 1; c >= 0; c--)
		if (CPU_ISSET(c, &set))
			return c;
	return -1;
}

enum {
	O_STEPS = 256, O_KERNELS, O_KERNEL_US, O_JITTER, O_LAUNCH_US, O_QDEPTH, O_LOADERS,
	O_LOADER_US, O_PREFETCH, O_LOADER_READ, O_H2D_EVERY, O_H2D_BYTES, O_SEED, O_CPU, O_MARK,
	O_TRUTH, O_DELAY, O_WAIT, O_CKPT_DIR, O_SLOTS, O_INJECT, O_QUIET, O_HELP, O_BUSY,
};

static void parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "steps", 1, 0, O_STEPS }, { "kernels", 1, 0, O_KERNELS },
		{ "kernel-us", 1, 0, O_KERNEL_US }, { "jitter", 1, 0, O_JITTER },
		{ "launch-us", 1, 0, O_LAUNCH_US }, { "queue-depth", 1, 0, O_QDEPTH },
		{ "loaders", 1, 0, O_LOADERS }, { "loader-us", 1, 0, O_LOADER_US },
		{ "prefetch", 1, 0, O_PREFETCH }, { "loader-read", 1, 0, O_LOADER_READ },
		{ "h2d-every", 1, 0, O_H2D_EVERY }, { "h2d-bytes", 1, 0, O_H2D_BYTES },
		{ "seed", 1, 0, O_SEED }, { "launcher-cpu", 1, 0, O_CPU }, { "mark", 1, 0, O_MARK },
		{ "truth", 1, 0, O_TRUTH }, { "start-delay-ms", 1, 0, O_DELAY },
		{ "wait-agent", 1, 0, O_WAIT }, { "ckpt-dir", 1, 0, O_CKPT_DIR },
		{ "channel-slots", 1, 0, O_SLOTS }, { "inject", 1, 0, O_INJECT },
		{ "quiet", 0, 0, O_QUIET }, { "help", 0, 0, O_HELP }, { "busy", 1, 0, O_BUSY },
		{ 0 },
	};
	char err[160];
	int c, cpu_set = 0;

	opt.steps = 200;
	opt.kernels = 20;
	opt.kernel_ns[0] = 400000;
	opt.nkernel_ns = 1;
	opt.launch_ns = 20000;
	opt.queue_depth = 1024;
	opt.loaders = 2;
	opt.loader_ns = 500000;
	opt.prefetch = 4;
	opt.loader_read_bytes = 1 << 20;
	opt.h2d_every = 1;
	opt.h2d_bytes = 8 << 20;
	opt.seed = 1;
	opt.mark = MARK_BOTH;
	opt.ckpt_dir = "/var/tmp";
	opt.chan_slots = SBC_DEFAULT_SLOTS;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case O_STEPS: opt.steps = num_arg("steps", optarg, 1, 1ull << 40); break;
		case O_KERNELS: opt.kernels = (unsigned)num_arg("kernels", optarg, 1, 100000); break;
		case O_KERNEL_US: {
			char *copy = strdup(optarg), *tok, *save = NULL;

			if (!copy)
				sim_die("out of memory");
			opt.nkernel_ns = 0;
			for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				if (opt.nkernel_ns == SIM_MAX_DUR)
					sim_die("--kernel-us: at most %d durations", SIM_MAX_DUR);
				opt.kernel_ns[opt.nkernel_ns++] = us_arg("kernel-us", tok);
			}
			free(copy);
			if (!opt.nkernel_ns)
				sim_die("--kernel-us: give at least one duration");
			break;
		}
		case O_JITTER: {
			char *end;

			opt.jitter_pct = strtod(optarg, &end);
			if (end == optarg || *end || !(opt.jitter_pct >= 0) || opt.jitter_pct > 100)
				sim_die("--jitter: '%s' is not a percentage from 0 to 100", optarg);
			break;
		}
		case O_LAUNCH_US: opt.launch_ns = us_arg("launch-us", optarg); break;
		case O_QDEPTH: opt.queue_depth = (unsigned)num_arg("queue-depth", optarg, 1, 1 << 20); break;
		case O_LOADERS: opt.loaders = (unsigned)num_arg("loaders", optarg, 1, 256); break;
		case O_LOADER_US: opt.loader_ns = us_arg("loader-us", optarg); break;
		case O_PREFETCH: opt.prefetch = (unsigned)num_arg("prefetch", optarg, 1, 1 << 16); break;
		case O_LOADER_READ: {
			char *colon = strrchr(optarg, ':');

			opt.loader_read = optarg;
			if (colon) {
				*colon = 0;
				opt.loader_read_bytes = num_arg("loader-read", colon + 1, 1, 1ull << 34);
			}
			break;
		}
		case O_H2D_EVERY: opt.h2d_every = num_arg("h2d-every", optarg, 0, 1ull << 40); break;
		case O_H2D_BYTES: opt.h2d_bytes = num_arg("h2d-bytes", optarg, 1, 1ull << 40); break;
		case O_SEED: opt.seed = num_arg("seed", optarg, 0, UINT64_MAX); break;
		case O_CPU:
			cpu_set = 1;
			opt.launcher_cpu = !strcmp(optarg, "none") ? -1 :
				(int)num_arg("launcher-cpu", optarg, 0, CPU_SETSIZE - 1);
			break;
		case O_MARK:
			if (!strcmp(optarg, "usdt"))
				opt.mark = MARK_USDT;
			else if (!strcmp(optarg, "nvtx"))
				opt.mark = MARK_NVTX;
			else if (!strcmp(optarg, "both"))
				opt.mark = MARK_BOTH;
			else if (!strcmp(optarg, "none"))
				opt.mark = MARK_NONE;
			else
				sim_die("--mark: '%s' is not usdt, nvtx, both or none", optarg);
			break;
		case O_BUSY: {
			unsigned long long a, b, c;
			int n = 0;

			if (sscanf(optarg, "%llu,%llu,%llu%n", &a, &b, &c, &n) != 3 || optarg[n] ||
			    a > 100000 || b > 1000000 || c > 1000000)
				sim_die("--busy: '%s' is not SWITCHES,FAULTS,MALLOCS a step "
					"(e.g. 90,170,160)", optarg);
			opt.busy_switches = a;
			opt.busy_faults = b;
			opt.busy_mallocs = c;
			break;
		}
		case O_TRUTH: opt.truth = optarg; break;
		case O_DELAY: opt.start_delay_ns = num_arg("start-delay-ms", optarg, 0, 3600000) * 1000000; break;
		case O_WAIT: opt.wait_agent_ns = num_arg("wait-agent", optarg, 0, 3600) * 1000000000ull; break;
		case O_CKPT_DIR: opt.ckpt_dir = optarg; break;
		case O_SLOTS: opt.chan_slots = (unsigned)num_arg("channel-slots", optarg, SBC_MIN_SLOTS, SBC_MAX_SLOTS); break;
		case O_INJECT:
			if (opt.ninj == SIM_MAX_INJECT)
				sim_die("--inject: at most %d", SIM_MAX_INJECT);
			if (inject_parse(optarg, &opt.inj[opt.ninj], err, sizeof(err)))
				sim_die("--inject %s: %s", optarg, err);
			opt.ninj++;
			break;
		case O_QUIET: opt.quiet = true; break;
		case 'h':
		case O_HELP: usage(stdout); exit(0);
		case ':':
			sim_die("%s needs a value (try --help)", argv[optind - 1]);
		default:
			sim_die("unknown option '%s' (try --help)", argv[optind - 1]);
		}
	}
	if (optind < argc)
		sim_die("unexpected argument '%s' (try --help)", argv[optind]);
	if (!cpu_set)
		opt.launcher_cpu = last_cpu();
}

/* ------------------------------------------------------------------- main */

int main(int argc, char **argv)
{
	sigset_t sigs;
	siginfo_t si;
	int stop_sig = 0, err;

	parse_args(argc, argv);

	/* every thread inherits these blocked; main takes them with sigwaitinfo */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	main_thr = pthread_self();

	chan = sbc_create("simtrainer", opt.chan_slots);
	if (!chan)
		sim_log("no GPU timeline channel (%s); running without it", strerror(errno));
	intern_names();
	if ((err = truth_open(opt.truth)))
		sim_die("--truth %s: %s", opt.truth, strerror(-err));
	truth_watch_thread();
	if ((err = injector_start()) || (err = device_start(opt.queue_depth)) ||
	    (err = loaders_start()) || (err = busy_start()))
		sim_die("cannot start: %s", strerror(-err));
	if ((err = pthread_create(&launch_thr, NULL, launcher_main, NULL)))
		sim_die("cannot start the launcher: %s", strerror(err));

	while (!__atomic_load_n(&launcher_done, __ATOMIC_ACQUIRE)) {
		int s = sigwaitinfo(&sigs, &si);

		if ((s == SIGINT || s == SIGTERM) && !stop_sig) {
			stop_sig = s;
			__atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
			device_wake();
			loaders_wake();
			injector_wake();
		}
	}
	pthread_join(launch_thr, NULL);
	device_join();
	loaders_join();
	inject_cleanup();
	truth_close(steps_done, stop_sig ? "signal" : "done", first_ns, last_ns);

	if (!opt.quiet && steps_done) {
		uint64_t busy, ops;

		device_stats(&busy, &ops);
		sim_log("%llu steps, step time mean %.2f ms (min %.2f, max %.2f), GPU busy %.1f%%",
			(unsigned long long)steps_done, step_sum_ns / 1e6 / steps_done,
			step_min_ns / 1e6, step_max_ns / 1e6,
			last_ns > first_ns ? 100.0 * busy / (last_ns - first_ns) : 0.0);
	}
	sbc_destroy(chan);
	return stop_sig ? 128 + stop_sig : 0;
}
