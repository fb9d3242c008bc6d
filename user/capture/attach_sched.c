// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The scheduler family: tp_btf where tracing programs load, else raw_tp. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

/* the interrupt probes (docs/ARCHITECTURE.md, "Interrupts"): tp_btf only */
static bool is_irq_prog(const struct sched_bpf *s, const struct bpf_program *prog)
{
	const struct bpf_program *irq[] = {
		s->progs.btf_softirq_entry, s->progs.btf_softirq_exit, s->progs.btf_irq_entry,
		s->progs.btf_irq_exit,      s->progs.btf_timer_entry,  s->progs.btf_timer_exit,
		s->progs.btf_call_entry,    s->progs.btf_call_exit,    s->progs.btf_call1_entry,
		s->progs.btf_call1_exit,    s->progs.btf_resched_entry, s->progs.btf_resched_exit,
		s->progs.btf_work_entry,    s->progs.btf_work_exit,
	};

	for (size_t i = 0; i < sizeof(irq) / sizeof(irq[0]); i++)
		if (prog == irq[i])
			return true;
	return false;
}

int open_sched(struct probes *p, bool use_btf, const struct btf *vmlinux)
{
	struct bpf_program *prog;
	struct sched_bpf *s = sched_bpf__open();
	/* they keep their runs in task storage */
	bool irq_on = use_btf && !p->o.no_irq &&
		      libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) > 0;
	int err;

	if (!s)
		return -errno;
	SET_TARGET(p, s);
	/*
	 * Kernels before 5.11 have no task storage: the map is then a hash
	 * nothing uses (folding is off there), so that the programs still load
	 */
	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) <= 0) {
		bpf_map__set_type(s->maps.tstate, BPF_MAP_TYPE_HASH);
		bpf_map__set_max_entries(s->maps.tstate, 1);
	}
	/*
	 * Folding keeps a thread's wait, waker and sleep stack in its task
	 * storage: the hash maps that hold them for the raw_tp variant are
	 * then only a fallback for a thread whose storage could not be made,
	 * and kept at a few entries (each a preallocated 16384 otherwise)
	 */
	if (use_btf && p->fold_ns) {
		bpf_map__set_max_entries(s->maps.waiting, 64);
		bpf_map__set_max_entries(s->maps.wakers, 64);
		bpf_map__set_max_entries(s->maps.sleep_stacks, 64);
	}
	bpf_map__set_max_entries(s->maps.events, p->o.ring_bytes);
	bpf_map__set_max_entries(s->maps.nwait, p->ncpus);
	bpf_map__set_max_entries(s->maps.cpu_node, p->ncpus);
	bpf_map__set_max_entries(s->maps.steal_seen, p->ncpus);
	s->rodata->stacks_on = !p->o.no_stacks;
	s->rodata->stack_copy_on = !p->o.no_stacks && !p->o.fp_stacks;
	bpf_object__for_each_program(prog, s->obj) {
		const char *sec = bpf_program__section_name(prog);
		const char *tp = strchr(sec, '/');
		bool btf = !strncmp(sec, "tp_btf/", 7);

		if (prog == s->progs.flush_sched)
			bpf_program__set_autoload(prog, p->fold_ns != 0 || irq_on);
		else if (is_irq_prog(s, prog))
			bpf_program__set_autoload(prog, irq_on && tp_exists(vmlinux, tp + 1));
		else
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

	if (bpf_program__autoload(p->sched->progs.flush_sched)) {
		/*
		 * the tick's flush of held trips and idle scheduler and
		 * interrupt runs: without it nothing may be held
		 */
		p->flush_sched = bpf_program__attach_iter(p->sched->progs.flush_sched, NULL);
		if (!p->flush_sched)
			return -errno;
	}
	bpf_object__for_each_program(prog, p->sched->obj) {
		const char *sec = bpf_program__section_name(prog);
		const char *tp = strchr(sec, '/') + 1;
		bool essential = !strcmp(tp, "sched_switch");
		char name[48];
		int err;

		snprintf(name, sizeof(name), "%s:%s", is_irq_prog(p->sched, prog) ? "irq" : "sched", tp);
		if (prog == p->sched->progs.flush_sched)
			continue;
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


/*
 * Write the held trips too long to fold and the idle runs of the target's
 * threads (bpf/common.bpf.h, "Scheduler runs"), or all of them: one pass of
 * the task iterator.
 */
void probes_flush_sched(const struct probes *p, bool all)
{
	char buf[64];
	int fd;

	if (!p->flush_sched)
		return;
	p->sched->bss->flush_all = all;
	fd = bpf_iter_create(bpf_link__fd(p->flush_sched));
	if (fd < 0)
		return;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
}
