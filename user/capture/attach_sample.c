// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * CPU samples (bpf/sample.bpf.c): a CPU-clock perf event per online CPU at
 * SAMPLE_HZ, the program attached to each. Without them (no perf events, or
 * --no-stacks) nothing else changes.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "capture/probes_internal.h"
#include "sample.skel.h"

#define SAMPLE_HZ 99

void open_sample(struct probes *p)
{
	struct sample_bpf *s;
	int err, ok = 0;

	if (p->o.no_stacks)
		return;
	s = sample_bpf__open();
	if (!s) {
		add_status(p, "cpu_sample", false, false, "open failed: %s", strerror(errno));
		return;
	}
	SET_TARGET(p, s);
	s->rodata->stacks_on = true;
	s->rodata->stack_copy_on = !p->o.fp_stacks;
	err = reuse_shared(p, s->maps.events, s->maps.drops, s->maps.target_state,
			   s->maps.followed, s->maps.follow_any);
	if (!err) /* the fault run slot (bpf/common.bpf.h) */
		err = reuse_thread_maps(p, s->obj);
	if (!err)
		err = sample_bpf__load(s);
	if (err) {
		add_status(p, "cpu_sample", false, false, "load failed: %s", strerror(-err));
		sample_bpf__destroy(s);
		return;
	}
	p->sample = s;
	err = 0;
	for (int cpu = 0; cpu < p->ncpus; cpu++) {
		struct perf_event_attr a = {
			.type = PERF_TYPE_SOFTWARE,
			.size = sizeof(a),
			.config = PERF_COUNT_SW_CPU_CLOCK,
			.sample_freq = SAMPLE_HZ,
			.freq = 1,
		};
		int fd = (int)syscall(__NR_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

		if (fd < 0) {
			if (errno != ENODEV) /* an offline CPU */
				err = -errno;
			continue;
		}
		struct bpf_link *l = bpf_program__attach_perf_event(s->progs.cpu_sample, fd);

		if (!l) {
			err = -errno;
			close(fd);
			continue;
		}
		/* the link closes fd when destroyed */
		if (!keep_link(p, l))
			ok++;
	}
	if (ok)
		add_status(p, "cpu_sample", true, false, "%d Hz on %d CPUs", SAMPLE_HZ, ok);
	else
		add_status(p, "cpu_sample", false, false, "%s",
			   strerror(err ? -err : ENODEV));
}
