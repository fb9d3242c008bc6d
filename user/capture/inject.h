/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Loading a library into a process that is already running (docs/ARCHITECTURE.md,
 * "Late injection"): one thread of the target is seized with ptrace and
 * interrupted, and made to call, one after the other, mmap (a private stack
 * for what follows), memfd_create, dlopen("/proc/self/fd/N"), dlsym, the
 * library's entry point, close and munmap; its registers, extended state and
 * interrupted system call are then put back as they were and it is let go.
 * Only that thread pauses; nothing is delivered to the target.
 */
#ifndef STEPBLAME_INJECT_H
#define STEPBLAME_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define INJECT_MEMFD_NAME "stepblame-cupti"  /* what the target's maps show: /memfd:NAME */
#define INJECT_COLLECTOR_SO "libstepblame-cupti.so"
#define INJECT_ENTRY "InitializeInjection"   /* the collector's entry, as CUDA calls it */

/*
 * The collector library: $STEPBLAME_COLLECTOR, else beside the stepblame
 * binary, ../lib/ or ../lib/stepblame/. 0 and its absolute path, or -1 (where
 * it was looked for in *looked).
 */
int inject_find_collector(char *out, size_t len, char *looked, size_t looked_len);

/* what the target's mappings say: libcuda, our collector, a GPU channel file */
struct inject_maps {
	bool libcuda;
	bool collector;
	bool channel;
};
int inject_scan(pid_t pid, struct inject_maps *m);

struct inject_opts {
	const char *lib;        /* the library to load (a file the agent reads) */
	const char *memfd_name; /* NULL: INJECT_MEMFD_NAME */
	const char *entry;      /* the function to call once it is loaded: int entry(void) */
	bool unload;            /* dlclose it afterwards (tests: repeated injection) */
	pid_t tid;              /* 0: pick a thread that sleeps in a system call */
	int timeout_ms;         /* for the whole remote sequence; 0: 10 s */
};

struct inject_result {
	pid_t tid;              /* the thread that made the calls */
	long interrupted_nr;    /* the system call it was interrupted in */
	int entry_ret;          /* what the entry point returned */
	uint64_t pause_ns;      /* how long that thread was held */
};

/*
 * What stands in the way of loading a library into pid, before anything is
 * touched: 0, or -errno with one line in err. Checks the architecture, YAMA's
 * ptrace_scope, an existing tracer, seccomp strict mode and a target without a
 * dynamic loader (statically linked). Filters of seccomp mode 2 are checked
 * later, on the seized thread (inject_library).
 */
int inject_check(pid_t pid, char *err, size_t errlen);

/*
 * Load o->lib into pid and call o->entry there. 0 on success; -errno with one
 * line in err otherwise. On every path that returns, the thread that was used
 * is running again with its own registers (or gone with its process).
 */
int inject_library(pid_t pid, const struct inject_opts *o, struct inject_result *res,
		   char *err, size_t errlen);

/* the decision on YAMA's ptrace_scope value (-1: no YAMA): 0, or -EPERM with why */
int inject_yama_allows(int scope, char *err, size_t errlen);

/*
 * Run a classic BPF seccomp filter (len instructions) on a system call of the
 * x86-64 ABI with these arguments: the filter's return value (SECCOMP_RET_*).
 * A filter that cannot be run (a bad jump, an unknown instruction) returns
 * SECCOMP_RET_KILL_PROCESS: the caller then refuses.
 */
struct sock_filter;
uint32_t inject_seccomp_run(const struct sock_filter *f, unsigned len, int nr,
			    const uint64_t args[6]);

#endif
