/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* task_struct fields that were renamed or moved across kernels */
#ifndef STEPBLAME_TASK_BPF_H
#define STEPBLAME_TASK_BPF_H

/* before 5.14 the state was a long named "state" */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

/* since 5.16 x86 keeps the CPU in task_struct, older kernels in thread_info */
struct task_struct___cpu {
	unsigned int cpu;
} __attribute__((preserve_access_index));

#define SB_TASK_FREEZABLE 0x2000

static __always_inline __u32 task_state(struct task_struct *t)
{
	__u32 st;

	if (bpf_core_field_exists(t->__state))
		st = BPF_CORE_READ(t, __state);
	else
		st = BPF_CORE_READ((struct task_struct___pre514 *)t, state);
	/* TASK_FREEZABLE rides along with sleeping states; it says nothing of them */
	return st & ~SB_TASK_FREEZABLE;
}

static __always_inline __u32 task_cpu(struct task_struct *t)
{
	struct task_struct___cpu *tc = (void *)t;

	if (bpf_core_field_exists(tc->cpu))
		return BPF_CORE_READ(tc, cpu);
	return BPF_CORE_READ(t, thread_info.cpu);
}

/* the same; direct: t is a trusted pointer (tp_btf), read with plain loads */
static __always_inline __u32 task_cpu_of(struct task_struct *t, bool direct)
{
	struct task_struct___cpu *tc = (void *)t;

	if (!direct)
		return task_cpu(t);
	if (bpf_core_field_exists(tc->cpu))
		return tc->cpu;
	return t->thread_info.cpu;
}

/* the current task's open file fd, NULL if none */
static __always_inline struct file *fd_file(__s64 fd)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
	struct file **fds, *f = NULL;

	if (!fdt || fd < 0 || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	fds = BPF_CORE_READ(fdt, fd);
	if (!fds || bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]))
		return NULL;
	return f;
}

#endif
