// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The memory and I/O family: per-syscall tracepoints where they attach
 * (tracefs), else the raw sys_enter/sys_exit pair; raw_tp for the rest.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "capture/probes_internal.h"
#include "base/util.h"
#include "mem.skel.h"

/* ---- memory ---- */

#define TRACEFS "/sys/kernel/tracing"

/*
 * Per-syscall tracepoints need tracefs to attach; mount it when we may. If we
 * may not (or --no-tracefs), the raw sys_enter/sys_exit tracepoints serve.
 */
static bool syscall_tracepoints(struct probes *p)
{
	static const char *ids[] = {
		TRACEFS "/events/syscalls/sys_enter_mmap/id",
		"/sys/kernel/debug/tracing/events/syscalls/sys_enter_mmap/id",
	};

	if (p->o.no_tracefs)
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(ids); i++)
		if (!access(ids[i], R_OK))
			return true;
	if (access(TRACEFS "/trace", F_OK) && !access(TRACEFS, F_OK) &&
	    !mount("tracefs", TRACEFS, "tracefs", 0, NULL)) {
		add_status(p, "tracefs", true, false, "mounted at " TRACEFS);
		return !access(ids[0], R_OK);
	}
	return false;
}

/* "raw_tp/sys_enter" -> "mem:sys_enter", "raw_tp/page_fault_user" -> "mem:page_fault_user" */
static void mem_probe_name(const struct bpf_program *prog, char *out, size_t len)
{
	const char *sec = bpf_program__section_name(prog);
	const char *last = strrchr(sec, '/');

	snprintf(out, len, "mem:%s", last ? last + 1 : sec);
}

/* drop the links and statuses made since first and st: a group is attached whole or not at all */
static void mem_group_undo(struct probes *p, int first, int st)
{
	while (p->nlinks > first)
		bpf_link__destroy(p->links[--p->nlinks]);
	p->nst = st;
}

/* the raw sys_enter/sys_exit pair, which sees every call of every process */
static void attach_raw_syscalls(struct probes *p)
{
	struct bpf_program *progs[] = { p->mem->progs.raw_sys_enter, p->mem->progs.raw_sys_exit };
	int first = p->nlinks, st = p->nst;
	char name[48];

	for (size_t i = 0; i < ARRAY_SIZE(progs); i++) {
		mem_probe_name(progs[i], name, sizeof(name));
		if (keep_link(p, bpf_program__attach(progs[i]))) {
			int err = errno;

			mem_group_undo(p, first, st);
			add_status(p, name, false, false, "raw_tp refused (%s)", strerror(err));
			return;
		}
		add_status(p, name, true, false, "raw_tp");
	}
}

/*
 * The calls the per-syscall tracepoints watch (the names of the tracepoints:
 * sendfile's is sendfile64), and how many of their arguments the entry
 * program reads (bpf/mem.bpf.c, tp_enter_N; at most 5)
 */
static const struct {
	const char *call;
	int nargs;
} syscall_tps[] = {
	{ "mmap", 5 },	   { "munmap", 2 },   { "brk", 1 },	  { "madvise", 3 },
	{ "mprotect", 3 }, { "mremap", 5 },   { "read", 3 },	  { "write", 3 },
	{ "pread64", 4 },  { "pwrite64", 4 }, { "readv", 3 },	  { "writev", 3 },
	{ "fsync", 1 },	   { "fdatasync", 1 }, { "sync_file_range", 4 }, { "unlinkat", 3 },
	{ "sched_setaffinity", 3 }, { "unlink", 1 }, { "sync", 0 }, { "syncfs", 1 },
	{ "sendfile64", 4 }, { "copy_file_range", 5 }, { "splice", 5 }, { "preadv", 3 },
	{ "pwritev", 3 }, { "preadv2", 3 }, { "pwritev2", 3 },
};

/* has the kernel a tracepoint syscalls/EVENT (unlink has none on arm64) */
static bool syscall_tp_exists(const char *event)
{
	char path[160];

	snprintf(path, sizeof(path), TRACEFS "/events/syscalls/%s", event);
	if (!access(path, F_OK))
		return true;
	snprintf(path, sizeof(path), "/sys/kernel/debug/tracing/events/syscalls/%s", event);
	return !access(path, F_OK);
}

/* every call's two tracepoints; false (and none kept) on a failure */
static bool attach_syscall_tps(struct probes *p)
{
	struct mem_bpf *m = p->mem;
	struct bpf_program *enter[] = { m->progs.tp_enter_0, m->progs.tp_enter_1,
					m->progs.tp_enter_2, m->progs.tp_enter_3,
					m->progs.tp_enter_4, m->progs.tp_enter_5 };
	int first = p->nlinks, st = p->nst;
	char event[48], name[64];

	for (size_t i = 0; i < ARRAY_SIZE(syscall_tps); i++) {
		for (int ex = 0; ex < 2; ex++) {
			struct bpf_program *prog = ex ? m->progs.tp_exit : enter[syscall_tps[i].nargs];

			snprintf(event, sizeof(event), "sys_%s_%s", ex ? "exit" : "enter",
				 syscall_tps[i].call);
			if (!syscall_tp_exists(event))
				continue;
			snprintf(name, sizeof(name), "mem:%s", event);
			if (keep_link(p, bpf_program__attach_tracepoint(prog, "syscalls", event))) {
				int err = errno;

				mem_group_undo(p, first, st);
				add_status(p, name, false, false, "tracepoint refused (%s): the raw "
					   "sys_enter/sys_exit pair serves instead", strerror(err));
				return false;
			}
			add_status(p, name, true, false, "tracepoint");
		}
	}
	p->sys_first = first;
	p->sys_end = p->nlinks;
	return true;
}

/* close descriptors lo..hi (those below max where close_range is missing) */
static void close_span(int lo, int hi, long max)
{
#ifdef SYS_close_range
	if (!syscall(SYS_close_range, (unsigned)lo, (unsigned)hi, 0u))
		return;
#endif
	for (long fd = lo; fd <= hi && fd < max; fd++)
		close((int)fd);
}

/* close every descriptor but keep[0..n), sorted ascending */
static void close_all_but(const int *keep, int n, long max)
{
	int lo = 0;

	for (int i = 0; i < n; i++) {
		if (keep[i] > lo)
			close_span(lo, keep[i] - 1, max);
		lo = keep[i] + 1;
	}
	close_span(lo, INT_MAX, max);
}

static int int_cmp(const void *a, const void *b)
{
	return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/*
 * Closing the last reference to a system-call tracepoint's perf event
 * unregisters it under one kernel mutex and waits out a grace period, one
 * event after the other: about 2 s for the 36 on a 2-vCPU VM
 * (docs/ARCHITECTURE.md, "System-call probes"). A grandchild holding only
 * the links' descriptors (a link holds its perf event) takes that wait
 * instead of the capture: it waits until the write end returned here is
 * closed, which the caller does once its own references are gone, then
 * exits, and the kernel releases the events behind it. The programs return
 * at their filter meanwhile (the target is marked stopped first). Returns
 * the write end, or -1 where the links are to be destroyed the slow way.
 */
int mem_release_behind(struct probes *p)
{
	int n = p->sys_end - p->sys_first, keep[MAX_LINKS + 1], go[2];
	long max = sysconf(_SC_OPEN_MAX);
	pid_t pid;

	if (n <= 0 || pipe2(go, O_CLOEXEC))
		return -1;
	for (int i = 0; i < n; i++)
		keep[i] = bpf_link__fd(p->links[p->sys_first + i]);
	keep[n] = go[0];
	qsort(keep, (size_t)n + 1, sizeof(keep[0]), int_cmp);
	pid = fork();
	if (pid < 0) {
		close(go[0]);
		close(go[1]);
		return -1;
	}
	if (pid == 0) {
		char c;

		/* a grandchild, reparented: nobody has to reap it */
		if (fork() != 0)
			_exit(0);
		close_all_but(keep, n + 1, max);
		while (read(go[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(go[0]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return go[1];
}

/*
 * Whether the syscall programs (tracepoint and raw tracepoint: both variants
 * load) may keep a thread's call in progress in its task storage
 * (bpf/mem.bpf.c, mm_in_task): the map type and the helpers, which tracing
 * programs got after the map itself
 */
static bool mm_task_storage(void)
{
	static const enum bpf_prog_type types[] = { BPF_PROG_TYPE_TRACEPOINT,
						    BPF_PROG_TYPE_RAW_TRACEPOINT };

	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) <= 0)
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(types); i++)
		if (libbpf_probe_bpf_helper(types[i], BPF_FUNC_task_storage_get, NULL) <= 0 ||
		    libbpf_probe_bpf_helper(types[i], BPF_FUNC_get_current_task_btf, NULL) <= 0)
			return false;
	return true;
}

void open_mem(struct probes *p, const struct btf *vmlinux)
{
	struct bpf_program *prog;
	struct mem_bpf *m = mem_bpf__open();
	bool tp = syscall_tracepoints(p);
	char name[48];
	int err;

	if (!m) {
		add_status(p, "mem", false, false, "open failed: %s", strerror(errno));
		return;
	}
	SET_TARGET(p, m);
	m->rodata->io_min_ns = p->o.io_min_ns ? p->o.io_min_ns : IO_MIN_NS;
	m->rodata->stacks_on = !p->o.no_stacks;
	m->rodata->stack_copy_on = !p->o.no_stacks && !p->o.fp_stacks;
	m->rodata->mm_in_task = mm_task_storage();
	/* calls in progress live in task storage then, and the hash goes unused */
	if (m->rodata->mm_in_task)
		bpf_map__set_max_entries(m->maps.mm_calls, 1);
	/* both syscall variants load; one is attached */
	bpf_object__for_each_program(prog, m->obj) {
		const char *sec = bpf_program__section_name(prog);

		if (!strcmp(sec, "tracepoint")) {
			bpf_program__set_autoload(prog, tp);
		} else if (strncmp(sec, "raw_tp/sys_e", 12) && strchr(sec, '/') &&
			   !tp_exists(vmlinux, strchr(sec, '/') + 1)) {
			bpf_program__set_autoload(prog, false);
			mem_probe_name(prog, name, sizeof(name));
			add_status(p, name, false, false, "no such tracepoint on this kernel");
		}
	}
	err = reuse_shared(p, m->maps.events, m->maps.drops, m->maps.target_state,
			   m->maps.followed, m->maps.follow_any);
	if (!err) /* the fault run slot (bpf/common.bpf.h) */
		err = reuse_thread_maps(p, m->obj);
	if (!err)
		err = mem_bpf__load(m);
	if (err) {
		add_status(p, "mem", false, false, "load failed: %s", strerror(-err));
		mem_bpf__destroy(m);
		return;
	}
	p->mem = m;
	bpf_object__for_each_program(prog, m->obj) {
		const char *sec = bpf_program__section_name(prog);

		if (!bpf_program__autoload(prog) || !strcmp(sec, "tracepoint") ||
		    !strncmp(sec, "raw_tp/sys_e", 12) || prog == m->progs.flush_faults)
			continue;
		mem_probe_name(prog, name, sizeof(name));
		err = keep_link(p, bpf_program__attach(prog));
		add_status(p, name, !err, false, "%s", err ? strerror(-err) : "raw_tp");
	}
	/* per-syscall tracepoints where they attach, else the raw sys_enter/sys_exit pair */
	if (!tp || !attach_syscall_tps(p))
		attach_raw_syscalls(p);
}

/*
 * Write the fault runs the CPUs' slots hold (bpf/common.bpf.h): those idle
 * for a millisecond, or all of them. Runs the flush program on each CPU.
 */
void probes_flush_faults(const struct probes *p, bool all)
{
	__u64 arg = all;
	int ncpu = libbpf_num_possible_cpus();

	if (!p->mem)
		return;
	for (int cpu = 0; cpu < ncpu; cpu++) {
		LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = &arg, .ctx_size_in = sizeof(arg),
			    .flags = BPF_F_TEST_RUN_ON_CPU, .cpu = (__u32)cpu);

		bpf_prog_test_run_opts(bpf_program__fd(p->mem->progs.flush_faults), &o);
	}
}
