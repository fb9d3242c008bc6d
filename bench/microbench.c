// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * microbench: one workload whose per-operation cost is known, run in its own
 * process so that `stepblame record -p PID` can trace it (bench/run drives it).
 *
 *   microbench switch|fault|malloc|mmap [--batches N] [--ops N]
 *   microbench rate [--kind fault|mmap|switch|malloc] [--rate OPS_PER_S] [--seconds S]
 *   common: [--cpu N] [--wait-stdin] [--delay-ms N]
 *   [--perf-uprobe FN[,FN...]]  before the timed part, put bare kernel uprobes
 *       (perf_event_open, uprobe PMU, counting only: no BPF program) on these
 *       libc functions of this process; FN-ret is a uretprobe. This measures
 *       the kernel's own trap cost, the floor under any uprobe-based tracer.
 *
 * --wait-stdin blocks on one byte of stdin before the timed part, so the tracer
 * can attach first. The result is one line on stdout, key=value pairs:
 * ns_op (median of the batches), ns_min, ns_max, ops (total timed operations),
 * t0/t1 (CLOCK_MONOTONIC ns around all timed batches, to count the trace's
 * records in that window).
 *
 * Built without sanitizers: ASan replaces malloc and hides it from uprobes.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <linux/futex.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096ul

static int opt_cpu = -1;
static int opt_batches = 9;
static long opt_ops;
static double opt_rate = 200000;
static double opt_seconds = 4;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "microbench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("sched_setaffinity");
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* ---- switch: two threads on one CPU hand a futex word back and forth ---- */

static _Atomic int turn;     /* 0: main's turn, 1: partner's turn, 2: stop */

static long futex(_Atomic int *uaddr, int op, int val)
{
	return syscall(SYS_futex, uaddr, op, val, NULL, NULL, 0);
}

static void wait_for(int want)
{
	for (;;) {
		int v = atomic_load(&turn);

		if (v == want || v == 2)
			return;
		futex(&turn, FUTEX_WAIT_PRIVATE, v);
	}
}

static void give(int to)
{
	atomic_store(&turn, to);
	futex(&turn, FUTEX_WAKE_PRIVATE, 1);
}

static void *partner(void *arg)
{
	(void)arg;
	pin(opt_cpu);
	for (;;) {
		wait_for(1);
		if (atomic_load(&turn) == 2)
			return NULL;
		give(0);
	}
}

static void stop_partner(pthread_t th)
{
	atomic_store(&turn, 2);
	futex(&turn, FUTEX_WAKE_PRIVATE, 1);
	pthread_join(th, NULL);
}

/* one op = one context switch; a round trip is two */
static double batch_switch(long ops)
{
	long trips = ops / 2;
	uint64_t t = now_ns();

	for (long i = 0; i < trips; i++) {
		give(1);
		wait_for(0);
	}
	return (double)(now_ns() - t) / (double)(trips * 2);
}

/* ---- fault: touch fresh anonymous 4 KiB pages, mmap/munmap outside the timing ---- */

static char *fresh_region(long pages)
{
	char *p = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	if (p == MAP_FAILED)
		die("mmap");
	if (madvise(p, pages * PAGE, MADV_NOHUGEPAGE))
		die("madvise(MADV_NOHUGEPAGE)");
	return p;
}

static double batch_fault(long ops)
{
	char *p = fresh_region(ops);
	uint64_t t = now_ns();

	for (long i = 0; i < ops; i++)
		((volatile char *)p)[i * PAGE] = 1;
	t = now_ns() - t;
	munmap(p, ops * PAGE);
	return (double)t / (double)ops;
}

/* ---- malloc: malloc(64) + free pairs ---- */

static void *volatile sink;

static double batch_malloc(long ops)
{
	uint64_t t = now_ns();

	for (long i = 0; i < ops; i++) {
		void *q = malloc(64);

		sink = q;
		free(q);
	}
	return (double)(now_ns() - t) / (double)ops;
}

/* ---- mmap: mmap + munmap of one page, never touched ---- */

static double batch_mmap(long ops)
{
	uint64_t t = now_ns();

	for (long i = 0; i < ops; i++) {
		void *q = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);

		if (q == MAP_FAILED)
			die("mmap");
		munmap(q, PAGE);
	}
	return (double)(now_ns() - t) / (double)ops;
}

/*
 * ---- rate: operations paced at opt_rate per second for opt_seconds ----
 * --kind fault: touch one fresh page (a 1024-page chunk is returned with
 *   MADV_DONTNEED when used up: one syscall per 1024 faults);
 * --kind mmap: one mmap+munmap pair of one page;
 * --kind switch: one ping-pong round trip (two context switches);
 * --kind malloc: one malloc(64)+free pair.
 * The schedule is absolute: late operations are caught up, so the rate holds as
 * long as the CPU can go that fast at all; achieved_rate says what it did.
 */
static char *rate_chunk;
static long rate_idx;
#define RATE_CHUNK 1024l

static void op_fault(void)
{
	if (rate_idx == RATE_CHUNK) {
		madvise(rate_chunk, RATE_CHUNK * PAGE, MADV_DONTNEED);
		rate_idx = 0;
	}
	((volatile char *)rate_chunk)[rate_idx++ * PAGE] = 1;
}

static void op_mmap(void)
{
	batch_mmap(1);
}

static void op_malloc(void)
{
	void *q = malloc(64);

	sink = q;
	free(q);
}

static void op_switch(void)
{
	give(1);
	wait_for(0);
}

static void run_rate(const char *kind)
{
	void (*op)(void) = !strcmp(kind, "mmap")     ? op_mmap
			   : !strcmp(kind, "switch") ? op_switch
			   : !strcmp(kind, "malloc") ? op_malloc
						     : op_fault;
	long done = 0;
	uint64_t t0, end, t;

	rate_chunk = fresh_region(RATE_CHUNK);
	t0 = now_ns();
	end = t0 + (uint64_t)(opt_seconds * 1e9);
	while ((t = now_ns()) < end) {
		long due = (long)((double)(t - t0) * opt_rate / 1e9) + 1;

		while (done < due && (done & 63 || now_ns() < end)) {
			op();
			done++;
		}
		/* spin until the next operation is due (no syscalls, no switches) */
		while ((t = now_ns()) < t0 + (uint64_t)((double)done * 1e9 / opt_rate) && t < end)
			;
	}
	t = now_ns();
	printf("workload=rate kind=%s target_rate=%.0f achieved_rate=%.0f ops=%ld seconds=%.3f "
	       "t0=%llu t1=%llu pid=%d\n", kind, opt_rate, (double)done * 1e9 / (double)(t - t0),
	       done, (double)(t - t0) / 1e9, (unsigned long long)t0, (unsigned long long)t,
	       (int)getpid());
	munmap(rate_chunk, RATE_CHUNK * PAGE);
}

/* ---- bare kernel uprobes on libc functions of this process (perf_event_open) ---- */

static int read_int_file(const char *path, int *v)
{
	FILE *f = fopen(path, "r");
	int ok;

	if (!f)
		return -1;
	ok = fscanf(f, "%d", v) == 1;
	fclose(f);
	return ok ? 0 : -1;
}

/* file path and offset of the code at addr, from /proc/self/maps */
static int addr_to_file(unsigned long addr, char *path, size_t len, unsigned long *off)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[1024];
	int ret = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, o;
		char perm[8];
		int n = 0;

		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &lo, &hi, perm, &o, &n) < 4 || !n)
			continue;
		if (addr < lo || addr >= hi)
			continue;
		line[strcspn(line, "\n")] = 0;
		snprintf(path, len, "%s", line + n);
		*off = addr - lo + o;
		ret = path[0] == '/' ? 0 : -1;
		break;
	}
	fclose(f);
	return ret;
}

static void perf_uprobes(char *spec)
{
	int type, retbit = 0;

	if (read_int_file("/sys/bus/event_source/devices/uprobe/type", &type))
		die("no uprobe PMU (/sys/bus/event_source/devices/uprobe/type)");
	{
		FILE *f = fopen("/sys/bus/event_source/devices/uprobe/format/retprobe", "r");

		if (f) {
			if (fscanf(f, "config:%d", &retbit) != 1)
				retbit = 0;
			fclose(f);
		}
	}
	for (char *fn = strtok(spec, ","); fn; fn = strtok(NULL, ",")) {
		static char path[512];
		struct perf_event_attr a;
		unsigned long off;
		char name[64];
		int ret = 0;
		void *sym;
		size_t l;

		snprintf(name, sizeof(name), "%s", fn);
		l = strlen(name);
		if (l > 4 && !strcmp(name + l - 4, "-ret")) {
			name[l - 4] = 0;
			ret = 1;
		}
		sym = dlsym(RTLD_DEFAULT, name);
		if (!sym || addr_to_file((unsigned long)sym, path, sizeof(path), &off)) {
			fprintf(stderr, "microbench: cannot locate %s in a file mapping\n", name);
			exit(1);
		}
		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.type = type;
		a.config = ret ? 1ull << retbit : 0;
		a.config1 = (unsigned long)path; /* uprobe_path */
		a.config2 = off;                 /* probe_offset */
		if (syscall(SYS_perf_event_open, &a, 0, -1, -1, 0) < 0)
			die("perf_event_open(uprobe)");
		/* the fd stays open until exit: the probe stays in */
	}
}

static void usage(void)
{
	fprintf(stderr,
		"usage: microbench switch|fault|malloc|mmap|rate [--cpu N] [--wait-stdin]\n"
		"                  [--delay-ms N] [--batches N] [--ops N]\n"
		"                  [--kind fault|mmap|switch|malloc] [--rate OPS_PER_S] [--seconds S]\n"
		"                  [--perf-uprobe malloc,free,malloc-ret,free-ret]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "cpu", required_argument, NULL, 'c' },
		{ "wait-stdin", no_argument, NULL, 'w' },
		{ "delay-ms", required_argument, NULL, 'd' },
		{ "batches", required_argument, NULL, 'b' },
		{ "ops", required_argument, NULL, 'n' },
		{ "rate", required_argument, NULL, 'r' },
		{ "seconds", required_argument, NULL, 's' },
		{ "kind", required_argument, NULL, 'k' },
		{ "perf-uprobe", required_argument, NULL, 'u' },
		{ 0 },
	};
	double (*batch)(long) = NULL;
	const char *w, *kind = "fault";
	char *uprobes = NULL;
	int wait_stdin = 0, delay_ms = 0, c;
	pthread_t th;

	if (argc < 2)
		usage();
	w = argv[1];
	optind = 2;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'c': opt_cpu = atoi(optarg); break;
		case 'w': wait_stdin = 1; break;
		case 'd': delay_ms = atoi(optarg); break;
		case 'b': opt_batches = atoi(optarg); break;
		case 'n': opt_ops = atol(optarg); break;
		case 'r': opt_rate = atof(optarg); break;
		case 's': opt_seconds = atof(optarg); break;
		case 'k': kind = optarg; break;
		case 'u': uprobes = optarg; break;
		default: usage();
		}
	}
	if (!strcmp(w, "switch")) {
		batch = batch_switch;
		if (!opt_ops)
			opt_ops = 20000;
	} else if (!strcmp(w, "fault")) {
		batch = batch_fault;
		if (!opt_ops)
			opt_ops = 16384;
	} else if (!strcmp(w, "malloc")) {
		batch = batch_malloc;
		if (!opt_ops)
			opt_ops = 30000;
	} else if (!strcmp(w, "mmap")) {
		batch = batch_mmap;
		if (!opt_ops)
			opt_ops = 30000;
	} else if (strcmp(w, "rate") || (strcmp(kind, "fault") && strcmp(kind, "mmap") &&
					 strcmp(kind, "switch") && strcmp(kind, "malloc"))) {
		usage();
	}
	if (opt_batches < 1 || opt_batches > 1000 || (batch && opt_ops < 2) || opt_rate <= 0)
		usage();
	pin(opt_cpu);
	if (uprobes)
		perf_uprobes(uprobes);
	if (batch == batch_switch || (!batch && !strcmp(kind, "switch")))
		if (pthread_create(&th, NULL, partner, NULL))
			die("pthread_create");
	/* warm the allocator, the code and the page tables of the stack before waiting */
	free(malloc(64));
	if (wait_stdin) {
		char b;

		if (read(0, &b, 1) < 0)
			die("read stdin");
	}
	if (delay_ms)
		usleep((useconds_t)delay_ms * 1000);
	if (!batch) {
		run_rate(kind);
		if (!strcmp(kind, "switch"))
			stop_partner(th);
		return 0;
	}

	double *ns = calloc(opt_batches, sizeof(*ns));
	uint64_t t0, t1;

	batch(opt_ops / 10 > 1 ? opt_ops / 10 : 2); /* warm-up, not counted */
	t0 = now_ns();
	for (int i = 0; i < opt_batches; i++)
		ns[i] = batch(opt_ops);
	t1 = now_ns();
	if (batch == batch_switch)
		stop_partner(th);
	qsort(ns, opt_batches, sizeof(*ns), cmp_d);
	/* ops: operations actually timed (switch rounds down to whole round trips) */
	long per = batch == batch_switch ? opt_ops / 2 * 2 : opt_ops;
	printf("workload=%s ns_op=%.1f ns_min=%.1f ns_max=%.1f ops=%ld batches=%d t0=%llu t1=%llu "
	       "pid=%d\n", w, ns[opt_batches / 2], ns[0], ns[opt_batches - 1], per * opt_batches,
	       opt_batches, (unsigned long long)t0, (unsigned long long)t1, (int)getpid());
	free(ns);
	return 0;
}
