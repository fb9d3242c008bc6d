// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Interference injected on purpose, at chosen steps, with ground truth.
 * Everything runs on the launcher thread inside the injected step (after its
 * step mark, before its launches), except the CPU hog: a separate process,
 * forked by a dedicated injector thread so that the launcher never forks.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim.h"

static const struct {
	const char *name;
	long def, min, max;
	const char *unit;
} kinds[INJ_NKINDS] = {
	[INJ_HOG] = { "hog", 0, -20, 19, "nice" },
	[INJ_FAULTS] = { "faults", 64, 1, 1 << 16, "MiB" },
	[INJ_ALLOC] = { "alloc", 20000, 1, 100000000, "calls" },
	[INJ_MIGRATE] = { "migrate", 20, 1, 100000, "moves" },
	[INJ_STALL] = { "stall", 50, 1, 3600000, "ms" },
	[INJ_CKPT] = { "ckpt", 64, 1, 1 << 16, "MiB" },
};

const char *inject_kind_name(enum inj_kind k)
{
	return k < INJ_NKINDS ? kinds[k].name : "?";
}

static bool parse_num(const char *s, size_t len, long long *out)
{
	char buf[32], *end;

	if (!len || len >= sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = 0;
	errno = 0;
	*out = strtoll(buf, &end, 10);
	return !errno && *end == 0;
}

/* KIND@A-B, KIND@N or KIND/P, then optionally :PARAM */
int inject_parse(const char *spec, struct inject *out, char *err, size_t errlen)
{
	const char *sep = spec + strcspn(spec, "@/:"), *colon, *end;
	long long a, b;
	int k;

	memset(out, 0, sizeof(*out));
	snprintf(out->spec, sizeof(out->spec), "%s", spec);
	for (k = 0; k < INJ_NKINDS; k++)
		if ((size_t)(sep - spec) == strlen(kinds[k].name) &&
		    !strncmp(spec, kinds[k].name, sep - spec))
			break;
	if (k == INJ_NKINDS) {
		snprintf(err, errlen, "unknown kind '%.*s' (hog, faults, alloc, migrate, stall, ckpt)",
			 (int)(sep - spec), spec);
		return -1;
	}
	out->kind = k;
	out->param = kinds[k].def;
	if (*sep != '@' && *sep != '/') {
		snprintf(err, errlen, "say when: %s@STEP, %s@FIRST-LAST or %s/PERIOD", kinds[k].name,
			 kinds[k].name, kinds[k].name);
		return -1;
	}
	colon = strchr(sep, ':');
	end = colon ? colon : sep + strlen(sep);
	if (*sep == '/') {
		if (!parse_num(sep + 1, end - sep - 1, &a) || a < 1) {
			snprintf(err, errlen, "the period after '/' must be a number >= 1");
			return -1;
		}
		out->period = (uint64_t)a;
	} else {
		const char *dash = memchr(sep + 1, '-', end - sep - 1);

		if (dash) {
			if (!parse_num(sep + 1, dash - sep - 1, &a) || !parse_num(dash + 1, end - dash - 1, &b) ||
			    a < 0 || b < a) {
				snprintf(err, errlen, "the range after '@' must be FIRST-LAST, FIRST <= LAST");
				return -1;
			}
		} else {
			if (!parse_num(sep + 1, end - sep - 1, &a) || a < 0) {
				snprintf(err, errlen, "the step after '@' must be a number >= 0");
				return -1;
			}
			b = a;
		}
		out->first = (uint64_t)a;
		out->last = (uint64_t)b;
	}
	if (colon) {
		if (!parse_num(colon + 1, strlen(colon + 1), &a) || a < kinds[k].min || a > kinds[k].max) {
			snprintf(err, errlen, "%s's parameter is %s, from %ld to %ld", kinds[k].name,
				 kinds[k].unit, kinds[k].min, kinds[k].max);
			return -1;
		}
		out->param = (long)a;
	}
	return 0;
}

bool inject_hits(const struct inject *in, uint64_t step)
{
	if (in->period)
		return step && step % in->period == 0;
	return step >= in->first && step <= in->last;
}

/* ---- the hog: a separate CPU-bound process ---- */

enum { REQ_NONE, REQ_START, REQ_STOP };

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv, done;
	int req;
	int cpu, nice;
	pid_t pid;
	uint64_t ready_ns, stopped_ns;
	bool quit, started;
	pthread_t thr;
} hog = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
	  .done = PTHREAD_COND_INITIALIZER };

static void hog_fork(void)
{
	pid_t parent = getpid();
	int fds[2];
	cpu_set_t set;
	char c = 0;
	int cpu = hog.cpu, nice = hog.nice;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (pipe2(fds, O_CLOEXEC)) {
		sim_log("cannot start the hog: pipe: %s", strerror(errno));
		return;
	}
	pid_t pid = fork();

	if (pid < 0) {
		sim_log("cannot start the hog: fork: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return;
	}
	if (pid == 0) {
		/* a copy of a threaded process: system calls only, no malloc, no stdio */
		volatile uint64_t spin = 0;

		close(fds[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		sched_setaffinity(0, sizeof(set), &set);
		/* a lower nice needs CAP_SYS_NICE; say so rather than lie in the truth */
		c = setpriority(PRIO_PROCESS, 0, nice) ? 1 : 0;
		/* named last: whoever sees the name sees it pinned */
		prctl(PR_SET_NAME, SIM_HOG_COMM);
		if (write(fds[1], &c, 1) != 1)
			_exit(1);
		close(fds[1]);
		for (;;)
			spin++;
	}
	close(fds[1]);
	/* wait until it is named, pinned and about to spin */
	ssize_t got;

	while ((got = read(fds[0], &c, 1)) < 0 && errno == EINTR)
		;
	close(fds[0]);
	if (got != 1) {
		sim_log("the hog died before it started");
		waitpid(pid, NULL, 0);
		return;
	}
	if (c) {
		sim_log("cannot give the hog nice %d (needs CAP_SYS_NICE); it runs at nice 0", nice);
		nice = 0;
	}
	pthread_mutex_lock(&hog.mu);
	hog.nice = nice;
	hog.pid = pid;
	hog.ready_ns = now_ns();
	pthread_mutex_unlock(&hog.mu);
}

static void hog_kill(void)
{
	pid_t pid = hog.pid;

	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&hog.mu);
	hog.pid = 0;
	hog.stopped_ns = now_ns();
	pthread_mutex_unlock(&hog.mu);
}

static void *injector_main(void *arg)
{
	prctl(PR_SET_NAME, "injector");
	truth_watch_thread();
	pthread_mutex_lock(&hog.mu);
	for (;;) {
		while (hog.req == REQ_NONE && !hog.quit)
			pthread_cond_wait(&hog.cv, &hog.mu);
		if (hog.quit)
			break;
		int req = hog.req;

		pthread_mutex_unlock(&hog.mu);
		if (req == REQ_START && hog.pid <= 0)
			hog_fork();
		else if (req == REQ_STOP)
			hog_kill();
		pthread_mutex_lock(&hog.mu);
		hog.req = REQ_NONE;
		pthread_cond_broadcast(&hog.done);
	}
	pthread_mutex_unlock(&hog.mu);
	hog_kill();
	return NULL;
}

static bool any_kind(enum inj_kind k)
{
	for (unsigned i = 0; i < opt.ninj; i++)
		if (opt.inj[i].kind == k)
			return true;
	return false;
}

static int *cpus;       /* CPUs this process may use */
static int ncpus;
static void **slots;    /* alloc storm */
#define ALLOC_SLOTS 512
static char *ckpt_buf;  /* 1 MiB of incompressible bytes */
#define CKPT_CHUNK (1u << 20)
static char ckpt_dir[PATH_MAX];
static uint64_t inj_rng;

int injector_start(void)
{
	cpu_set_t set;

	inj_rng = opt.seed ^ 0x5eedf00dull;
	if (!sched_getaffinity(0, sizeof(set), &set)) {
		cpus = calloc(CPU_SETSIZE, sizeof(*cpus));
		if (!cpus)
			return -ENOMEM;
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &set))
				cpus[ncpus++] = c;
	}
	if (any_kind(INJ_ALLOC) && !(slots = calloc(ALLOC_SLOTS, sizeof(*slots))))
		return -ENOMEM;
	if (any_kind(INJ_CKPT)) {
		ckpt_buf = malloc(CKPT_CHUNK);
		if (!ckpt_buf)
			return -ENOMEM;
		for (size_t i = 0; i < CKPT_CHUNK; i += 8) {
			uint64_t v = rng_next(&inj_rng);

			memcpy(ckpt_buf + i, &v, 8);
		}
		snprintf(ckpt_dir, sizeof(ckpt_dir), "%s/simtrainer-ckpt.XXXXXX", opt.ckpt_dir);
		if (!mkdtemp(ckpt_dir)) {
			int e = errno;

			sim_log("cannot make a checkpoint directory in %s: %s", opt.ckpt_dir, strerror(e));
			ckpt_dir[0] = 0;
			return -e;
		}
	}
	if (any_kind(INJ_HOG)) {
		int err = pthread_create(&hog.thr, NULL, injector_main, NULL);

		if (err)
			return -err;
		hog.started = true;
	}
	return 0;
}

static void hog_request(int req)
{
	pthread_mutex_lock(&hog.mu);
	hog.req = req;
	pthread_cond_signal(&hog.cv);
	while (hog.req != REQ_NONE && !hog.quit)
		pthread_cond_wait(&hog.done, &hog.mu);
	pthread_mutex_unlock(&hog.mu);
}

void injector_wake(void)
{
	pthread_mutex_lock(&hog.mu);
	pthread_cond_broadcast(&hog.done);
	pthread_mutex_unlock(&hog.mu);
}

void injector_join(void)
{
	if (!hog.started)
		return;
	pthread_mutex_lock(&hog.mu);
	hog.quit = true;
	pthread_cond_broadcast(&hog.cv);
	pthread_cond_broadcast(&hog.done);
	pthread_mutex_unlock(&hog.mu);
	pthread_join(hog.thr, NULL);
	hog.started = false;
}

/* ---- the launcher's side ---- */

struct pending {
	enum inj_kind kind;
	uint64_t start, end;
	long param;
	char extra[256];
};

/* run delay when the step began (truth_run_delay), the device's lateness */
static uint64_t step_delay0, step_self0, step_late0;
static bool step_delay_ok;

static struct pending pend[SIM_MAX_INJECT];
static unsigned npend;
static struct pending *stall_pend;
static pid_t stall_tid;

static void do_faults(struct pending *p)
{
	size_t len = (size_t)p->param << 20;
	long page = sysconf(_SC_PAGESIZE);
	uint64_t pages = 0;
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED) {
		snprintf(p->extra, sizeof(p->extra), ",\"mib\":%ld,\"error\":\"mmap failed\"", p->param);
		return;
	}
	/* one fault per 4 KiB page, not one per 2 MiB */
	madvise(m, len, MADV_NOHUGEPAGE);
	for (size_t off = 0; off < len; off += (size_t)page, pages++)
		((volatile char *)m)[off] = 1;
	munmap(m, len);
	snprintf(p->extra, sizeof(p->extra), ",\"mib\":%ld,\"pages\":%llu", p->param,
		 (unsigned long long)pages);
}

static void do_alloc(struct pending *p)
{
	uint64_t big = 0, calls = 0;

	for (long i = 0; i < p->param && !stopping(); i++) {
		uint64_t r = rng_next(&inj_rng);
		unsigned at = r % ALLOC_SLOTS;
		size_t size;

		if (slots[at]) {
			free(slots[at]);
			slots[at] = NULL;
			calls++;
			continue;
		}
		switch ((r >> 16) % 100) {
		case 0 ... 69: size = 16 + (r >> 24) % 4096; break;
		case 70 ... 94: size = 4096 + (r >> 24) % (128 << 10); break;
		default: size = (256 << 10) + (r >> 24) % (8 << 20); big++; break; /* mmap'd */
		}
		slots[at] = malloc(size);
		calls++;
		if (slots[at])
			((volatile char *)slots[at])[0] = 1;
	}
	for (unsigned i = 0; i < ALLOC_SLOTS; i++) {
		if (slots[i])
			calls++;
		free(slots[i]);
		slots[i] = NULL;
	}
	malloc_trim(0);
	snprintf(p->extra, sizeof(p->extra), ",\"calls\":%llu,\"big\":%llu",
		 (unsigned long long)calls, (unsigned long long)big);
}

static void pin_launcher(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	if (opt.launcher_cpu >= 0)
		CPU_SET(opt.launcher_cpu, &set);
	else
		for (int i = 0; i < ncpus; i++)
			CPU_SET(cpus[i], &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void do_migrate(struct pending *p)
{
	int moves = 0, from = sched_getcpu();

	if (ncpus < 2) {
		snprintf(p->extra, sizeof(p->extra), ",\"moves\":0,\"error\":\"only one CPU\"");
		return;
	}
	for (long i = 0; i < p->param && !stopping(); i++) {
		cpu_set_t set;
		int to = cpus[(i + 1) % ncpus];

		if (to == from)
			to = cpus[(i + 2) % ncpus];
		CPU_ZERO(&set);
		CPU_SET(to, &set);
		/* returns once the kernel has moved us: the injection is the moves alone */
		sched_setaffinity(0, sizeof(set), &set);
		int now = sched_getcpu();

		if (now != from)
			moves++;
		from = now;
	}
	pin_launcher();
	snprintf(p->extra, sizeof(p->extra), ",\"moves\":%d,\"cpus\":%d", moves, ncpus);
}

static void do_ckpt(struct pending *p, uint64_t step)
{
	char path[PATH_MAX + 32];
	uint64_t t_fsync = 0, written = 0;
	int fd;

	if (!ckpt_dir[0])
		return;
	snprintf(path, sizeof(path), "%s/ckpt-%llu", ckpt_dir, (unsigned long long)step);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(p->extra, sizeof(p->extra), ",\"mib\":%ld,\"error\":\"open failed\"", p->param);
		return;
	}
	for (long i = 0; i < p->param && !stopping(); i++) {
		size_t off = 0;

		while (off < CKPT_CHUNK) {
			ssize_t n = write(fd, ckpt_buf + off, CKPT_CHUNK - off);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				goto out;
			off += (size_t)n;
			written += (uint64_t)n;
		}
	}
out:
	t_fsync = now_ns();
	fsync(fd);
	t_fsync = now_ns() - t_fsync;
	close(fd);
	unlink(path);
	snprintf(p->extra, sizeof(p->extra), ",\"mib\":%ld,\"bytes\":%llu,\"fsync_ns\":%llu",
		 p->param, (unsigned long long)written, (unsigned long long)t_fsync);
}

static long hog_param(uint64_t step, bool *hit)
{
	*hit = false;
	for (unsigned i = 0; i < opt.ninj; i++) {
		if (opt.inj[i].kind == INJ_HOG && inject_hits(&opt.inj[i], step)) {
			*hit = true;
			return opt.inj[i].param;
		}
	}
	return 0;
}

void inject_step_begin(uint64_t step, uint64_t step_start)
{
	bool hit;
	long nice = hog_param(step, &hit);

	npend = 0;
	stall_pend = NULL;
	step_delay_ok = truth_run_delay(&step_delay0, &step_self0);
	step_late0 = device_late();
	if (hit) {
		struct pending *p = &pend[npend++];

		if (hog.pid <= 0) {
			hog.cpu = opt.launcher_cpu >= 0 ? opt.launcher_cpu : sched_getcpu();
			hog.nice = (int)nice;
			hog_request(REQ_START);
		}
		p->kind = INJ_HOG;
		p->param = hog.nice;
		p->start = hog.ready_ns > step_start ? hog.ready_ns : step_start;
		snprintf(p->extra, sizeof(p->extra),
			 ",\"culprit_pid\":%d,\"culprit_comm\":\"" SIM_HOG_COMM "\",\"cpu\":%d,\"nice\":%d",
			 (int)hog.pid, hog.cpu, hog.nice);
		if (hog.pid <= 0)
			npend--; /* could not start it: nothing to claim */
	}
	for (unsigned i = 0; i < opt.ninj && !stopping(); i++) {
		const struct inject *in = &opt.inj[i];

		if (in->kind == INJ_HOG || !inject_hits(in, step) || npend == SIM_MAX_INJECT)
			continue;
		struct pending *p = &pend[npend++];

		p->kind = in->kind;
		p->param = in->param;
		p->extra[0] = 0;
		p->start = now_ns();
		switch (in->kind) {
		case INJ_FAULTS: do_faults(p); break;
		case INJ_ALLOC: do_alloc(p); break;
		case INJ_MIGRATE: do_migrate(p); break;
		case INJ_CKPT: do_ckpt(p, step); break;
		case INJ_STALL:
			if (stall_pend) {
				npend--; /* one stall per step */
				continue;
			}
			loaders_stall((uint64_t)in->param * 1000000ull);
			stall_pend = p;
			stall_tid = 0;
			continue; /* ends when the launcher gets its batch */
		default: break;
		}
		p->end = now_ns();
	}
}

bool inject_stall_active(void)
{
	return stall_pend != NULL;
}

void inject_stall_done(pid_t loader_tid)
{
	if (!stall_pend)
		return;
	stall_pend->end = now_ns();
	stall_tid = loader_tid;
}

void inject_step_end(uint64_t step, uint64_t step_end)
{
	bool next_hit = false;
	uint64_t all = 0, self = 0;

	if (!step_delay_ok || !truth_run_delay(&all, &self))
		step_delay_ok = false;
	else if (!npend)
		/* the baselines an injected step is judged against */
		truth_plain_step(all - step_delay0, device_late() - step_late0);
	if (step + 1 < opt.steps && !stopping())
		hog_param(step + 1, &next_hit);
	for (unsigned i = 0; i < npend; i++) {
		struct pending *p = &pend[i];

		if (p->kind == INJ_HOG) {
			/* how long the kernel kept the trainer's threads from running in this
			 * step: all the CPU the hog can have taken from it (docs/ARCHITECTURE.md) */
			if (step_delay_ok) {
				size_t n = strlen(p->extra);

				snprintf(p->extra + n, sizeof(p->extra) - n,
					 ",\"run_delay_ns\":%llu,\"launcher_run_delay_ns\":%llu",
					 (unsigned long long)(all - step_delay0),
					 (unsigned long long)(self - step_self0));
			}
			p->end = step_end;
			if (!next_hit) {
				hog_request(REQ_STOP);
				p->end = hog.stopped_ns;
			}
		} else if (p == stall_pend) {
			char comm[16] = "", path[64];
			FILE *f;

			if (!p->end)
				p->end = step_end; /* interrupted */
			snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)stall_tid);
			if (stall_tid > 0 && (f = fopen(path, "re"))) {
				if (!fgets(comm, sizeof(comm), f))
					comm[0] = 0;
				comm[strcspn(comm, "\n")] = 0;
				fclose(f);
			}
			snprintf(p->extra, sizeof(p->extra),
				 ",\"ms\":%ld,\"culprit_pid\":%d,\"culprit_tid\":%d,\"culprit_comm\":\"%s\"",
				 p->param, (int)getpid(), (int)stall_tid, comm);
		}
		/* the device thread's late wake-ups in the step: the machine's, not the
		 * injection's (docs/ARCHITECTURE.md) */
		if (step_delay_ok) {
			size_t n = strlen(p->extra);

			snprintf(p->extra + n, sizeof(p->extra) - n, ",\"device_late_ns\":%llu",
				 (unsigned long long)(device_late() - step_late0));
		}
		truth_event(step, inject_kind_name(p->kind), p->start, p->end, p->extra);
	}
	npend = 0;
	stall_pend = NULL;
}

void inject_cleanup(void)
{
	if (hog.started)
		injector_join();
	else
		hog_kill();
	if (ckpt_dir[0]) {
		rmdir(ckpt_dir);
		ckpt_dir[0] = 0;
	}
	free(ckpt_buf);
	free(slots);
	free(cpus);
	ckpt_buf = NULL;
	slots = NULL;
	cpus = NULL;
}
