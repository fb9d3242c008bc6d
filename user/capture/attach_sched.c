// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The scheduler family: tp_btf where tracing programs load, else raw_tp. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "capture/probes_internal.h"
#include "capture/target.h"
#include "sched.skel.h"

/* ---- scheduler family: tp_btf, else raw_tp ---- */

bool tp_exists(const struct btf *vmlinux, const char *tp)
{
	char name[128];

	if (!vmlinux)
		return true; /* cannot tell: let the load decide */
	snprintf(name, sizeof(name), "btf_trace_%s", tp);
	return btf__find_by_name_kind(vmlinux, name, BTF_KIND_TYPEDEF) > 0;
}

int open_sched(struct probes *p, bool use_btf, const struct btf *vmlinux)
{
	struct bpf_program *prog;
	struct sched_bpf *s = sched_bpf__open();
	int err;

	if (!s)
		return -errno;
	SET_TARGET(p, s);
	bpf_map__set_max_entries(s->maps.events, p->o.ring_bytes);
	bpf_map__set_max_entries(s->maps.nwait, p->ncpus);
	bpf_map__set_max_entries(s->maps.cpu_node, p->ncpus);
	bpf_map__set_max_entries(s->maps.steal_seen, p->ncpus);
	s->rodata->stacks_on = !p->o.no_stacks;
	bpf_object__for_each_program(prog, s->obj) {
		const char *sec = bpf_program__section_name(prog);
		const char *tp = strchr(sec, '/');
		bool btf = !strncmp(sec, "tp_btf/", 7);

		bpf_program__set_autoload(prog, btf == use_btf && tp && tp_exists(vmlinux, tp + 1));
	}
	err = sched_bpf__load(s);
	if (err) {
		sched_bpf__destroy(s);
		return err;
	}
	p->sched = s;
	return 0;
}

int attach_sched(struct probes *p)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, p->sched->obj) {
		const char *sec = bpf_program__section_name(prog);
		const char *tp = strchr(sec, '/') + 1;
		bool essential = !strcmp(tp, "sched_switch");
		char name[48];
		int err;

		snprintf(name, sizeof(name), "sched:%s", tp);
		if (!bpf_program__autoload(prog)) {
			/* the other variant of a pair; report only if neither loaded */
			continue;
		}
		err = keep_link(p, bpf_program__attach(prog));
		add_status(p, name, !err, essential, err ? "%s: %s" : "%s", p->sched_variant,
			   err ? strerror(-err) : "");
		if (err && essential)
			return err;
	}
	return 0;
}

void fill_cpu_nodes(struct probes *p)
{
	int fd = bpf_map__fd(p->sched->maps.cpu_node);

	for (int cpu = 0; cpu < p->ncpus; cpu++) {
		__u32 key = cpu;
		__u16 node = cpu_node(cpu);

		bpf_map_update_elem(fd, &key, &node, BPF_ANY);
	}
}

