// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Ground truth, JSON lines. Written to FILE.partial.XXXXXX with a flush per
 * line (a crashed run leaves what it did readable there) and renamed to FILE
 * when simtrainer exits, so FILE only ever appears complete.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim.h"

static FILE *tf;
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

void truth_close(uint64_t steps_done, const char *reason, uint64_t first_ns, uint64_t last_ns)
{
	if (!tf)
		return;
	fprintf(tf, "{\"end\":{\"steps\":%llu,\"reason\":\"%s\",\"start_ns\":%llu,\"end_ns\":%llu}}\n",
		(unsigned long long)steps_done, reason, (unsigned long long)first_ns,
		(unsigned long long)last_ns);
	if (fflush(tf) || fsync(fileno(tf)))
		sim_log("writing %s: %s", tmp_path, strerror(errno));
	fclose(tf);
	tf = NULL;
	if (rename(tmp_path, final_path))
		sim_log("cannot rename %s to %s: %s", tmp_path, final_path, strerror(errno));
}
