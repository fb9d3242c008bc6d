// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Ground truth, JSON lines. Written to FILE.partial.XXXXXX with a flush per
 * line (a crashed run leaves what it did readable there) and renamed to FILE
 * when simtrainer exits, so FILE only ever appears complete.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim.h"

static FILE *tf;

/* every thread's /proc/thread-self/schedstat, opened by the thread itself */
#define WATCH_MAX 64
static struct {
	int fd;
	pid_t tid;
} watched[WATCH_MAX];
static unsigned nwatched;
static pthread_mutex_t watch_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *plain[2];  /* truth_plain_step: run delay, device lateness */
static size_t nplain, plain_cap;
static char final_path[PATH_MAX];
static char tmp_path[PATH_MAX + 32];

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

int truth_open(const char *path)
{
	int fd;

	if (!path)
		return 0;
	if (snprintf(final_path, sizeof(final_path), "%s", path) >= (int)sizeof(final_path))
		return -ENAMETOOLONG;
	snprintf(tmp_path, sizeof(tmp_path), "%s.partial.XXXXXX", path);
	fd = mkostemp(tmp_path, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	fchmod(fd, 0644);
	tf = fdopen(fd, "w");
	if (!tf) {
		int e = errno;

		close(fd);
		unlink(tmp_path);
		return -e;
	}
	return 0;
}

void truth_config(pid_t pid, pid_t launcher_tid, int launcher_cpu, const char *chan_path)
{
	static const char *marks[] = { "none", "usdt", "nvtx", "both" };

	if (!tf)
		return;
	fprintf(tf, "{\"config\":{\"steps\":%llu,\"kernels\":%u,\"kernel_ns\":[",
		(unsigned long long)opt.steps, opt.kernels);
	for (unsigned i = 0; i < opt.nkernel_ns; i++)
		fprintf(tf, "%s%llu", i ? "," : "", (unsigned long long)opt.kernel_ns[i]);
	fprintf(tf, "],\"jitter_pct\":%g,\"launch_ns\":%llu,\"queue_depth\":%u,\"loaders\":%u,"
		"\"loader_ns\":%llu,\"prefetch\":%u,\"h2d_every\":%llu,\"h2d_bytes\":%llu,"
		"\"seed\":%llu,\"mark\":\"%s\",\"stream\":%d,\"device\":%d,\"pid\":%d,"
		"\"launcher_tid\":%d,\"launcher_cpu\":%d,\"channel\":",
		opt.jitter_pct, (unsigned long long)opt.launch_ns, opt.queue_depth, opt.loaders,
		(unsigned long long)opt.loader_ns, opt.prefetch, (unsigned long long)opt.h2d_every,
		(unsigned long long)opt.h2d_bytes, (unsigned long long)opt.seed, marks[opt.mark & 3],
		SIM_STREAM, SIM_DEVICE, (int)pid, (int)launcher_tid, launcher_cpu);
	json_str(tf, chan_path ? chan_path : "");
	fprintf(tf, ",\"inject\":[");
	for (unsigned i = 0; i < opt.ninj; i++) {
		if (i)
			fputc(',', tf);
		json_str(tf, opt.inj[i].spec);
	}
	fprintf(tf, "]}}\n");
	fflush(tf);
}

void truth_event(uint64_t step, const char *kind, uint64_t start, uint64_t end, const char *extra)
{
	if (!tf)
		return;
	fprintf(tf, "{\"step\":%llu,\"kind\":\"%s\",\"start_ns\":%llu,\"end_ns\":%llu%s}\n",
		(unsigned long long)step, kind, (unsigned long long)start, (unsigned long long)end,
		extra ? extra : "");
	fflush(tf);
}

void truth_watch_thread(void)
{
	int fd;

	if (!tf)
		return;
	fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return; /* no CONFIG_SCHED_INFO: the truth goes without run delay */
	pthread_mutex_lock(&watch_mu);
	if (nwatched < WATCH_MAX) {
		watched[nwatched].fd = fd;
		watched[nwatched].tid = sim_gettid();
		nwatched++;
		fd = -1;
	}
	pthread_mutex_unlock(&watch_mu);
	if (fd >= 0)
		close(fd);
}

/* schedstat is "on-cpu-ns run-delay-ns timeslices"; a thread that has exited
 * reads as an error and keeps what it was last seen at */
static bool read_delay(int fd, uint64_t *ns)
{
	char buf[96];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	unsigned long long cpu, delay;

	if (n <= 0)
		return false;
	buf[n] = 0;
	if (sscanf(buf, "%llu %llu", &cpu, &delay) != 2)
		return false;
	*ns = delay;
	return true;
}

bool truth_run_delay(uint64_t *all_ns, uint64_t *self_ns)
{
	static uint64_t last[WATCH_MAX];
	pid_t me;
	bool mine = false;

	*all_ns = *self_ns = 0;
	if (!tf)
		return false;
	me = sim_gettid();
	pthread_mutex_lock(&watch_mu);
	for (unsigned i = 0; i < nwatched; i++) {
		uint64_t ns;

		if (read_delay(watched[i].fd, &ns))
			last[i] = ns;
		*all_ns += last[i];
		if (watched[i].tid == me) {
			*self_ns = last[i];
			mine = true;
		}
	}
	pthread_mutex_unlock(&watch_mu);
	return mine;
}

bool truth_self_run_delay(uint64_t *ns)
{
	static __thread int fd = -2;

	if (!tf)
		return false;
	if (fd == -2) {
		pid_t me = sim_gettid();

		fd = -1;
		pthread_mutex_lock(&watch_mu);
		for (unsigned i = 0; i < nwatched; i++)
			if (watched[i].tid == me)
				fd = watched[i].fd;
		pthread_mutex_unlock(&watch_mu);
	}
	return fd >= 0 && read_delay(fd, ns);
}

void truth_plain_step(uint64_t run_delay_ns, uint64_t device_late_ns)
{
	if (!tf)
		return;
	if (nplain == plain_cap) {
		size_t cap = plain_cap ? 2 * plain_cap : 256;

		for (int i = 0; i < 2; i++) {
			uint64_t *p = realloc(plain[i], cap * sizeof(*p));

			if (!p)
				return;
			plain[i] = p;
		}
		plain_cap = cap;
	}
	plain[0][nplain] = run_delay_ns;
	plain[1][nplain] = device_late_ns;
	nplain++;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void truth_close(uint64_t steps_done, const char *reason, uint64_t first_ns, uint64_t last_ns)
{
	if (!tf)
		return;
	fprintf(tf, "{\"end\":{\"steps\":%llu,\"reason\":\"%s\",\"start_ns\":%llu,\"end_ns\":%llu",
		(unsigned long long)steps_done, reason, (unsigned long long)first_ns,
		(unsigned long long)last_ns);
	if (nplain) {
		static const char *name[2] = { "run_delay_median_ns", "device_late_median_ns" };

		for (int i = 0; i < 2; i++) {
			qsort(plain[i], nplain, sizeof(*plain[i]), cmp_u64);
			fprintf(tf, ",\"%s\":%llu", name[i], (unsigned long long)plain[i][nplain / 2]);
		}
	}
	fprintf(tf, "}}\n");
	for (int i = 0; i < 2; i++) {
		free(plain[i]);
		plain[i] = NULL;
	}
	nplain = plain_cap = 0;
	if (fflush(tf) || fsync(fileno(tf)))
		sim_log("writing %s: %s", tmp_path, strerror(errno));
	fclose(tf);
	tf = NULL;
	pthread_mutex_lock(&watch_mu);
	for (unsigned i = 0; i < nwatched; i++)
		close(watched[i].fd);
	nwatched = 0;
	pthread_mutex_unlock(&watch_mu);
	if (rename(tmp_path, final_path))
		sim_log("cannot rename %s to %s: %s", tmp_path, final_path, strerror(errno));
}
