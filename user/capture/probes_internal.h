/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the pieces of the probe loader share (probes.c and the files it
 * calls on): struct probes, the bounds on the target's mapped files, and the
 * helpers one piece offers the others. Not for use outside user/capture/
 * probes*.c, binfile.c, attach_*.c and calibrate.c.
 *
 *   probes.c        public entry points: open, rescan (the pass over the
 *                   target's mappings), status, drops, credentials, close
 *   binfile.c       ELF files (USDT notes, symbols), /proc/PID/maps, opening
 *                   a mapped file safely, the FUSE mounts, the set of files seen
 *   attach_sched.c  scheduler family (tp_btf, else raw_tp)
 *   attach_mem.c    memory and I/O family (syscall tracepoints, raw_tp)
 *   attach_alloc.c  allocator family: uprobes and uprobe_multi links, the
 *                   overhead guard's switch, per-thread totals
 *   attach_marks.c  step marks: USDT note, --step-uprobe
 *   attach_cuda.c   CUDA driver entry points
 *   calibrate.c     what the allocator probes cost a thread on this machine
 */
#ifndef STEPBLAME_PROBES_INTERNAL_H
#define STEPBLAME_PROBES_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "capture/probes.h"
#include "capture/target.h"

struct bpf_link;
struct bpf_map;
struct btf;
struct sched_bpf;
struct mem_bpf;
struct sample_bpf;
struct alloc_bpf;
struct marks_bpf;

#define MAX_LINKS 256
#define ALLOC_NSYMS 7 /* entries of alloc_syms[] */

/*
 * Bounds on what the target's mapped files may cost. Every file (device and
 * inode) is looked at once, and remembered in a set of at most FILES_MAX;
 * USDT_MAX files with the step note get probes: each is a perf-event uprobe
 * link, and taking one away at the end waits out grace periods under a
 * kernel-wide mutex, one after the other (145 ms each on a 2-vCPU VM with
 * Linux 6.18: 64 of them kept the agent 9 s past its capture). A pass over
 * the maps stops looking at new files after its budget (the rest waits for
 * the next pass), and the next pass comes no sooner than RESCAN_SPACING
 * times the last one's cost.
 */
#define FILES_MAX 65536
#define USDT_MAX 16
#define FIRST_SCAN_BUDGET_NS 1000000000ull
#define RESCAN_BUDGET_NS 200000000ull
#define RESCAN_SPACING 20

/* defaults for the probe_opts fields where 0 means "the default" */
#define BURST_GAP_NS 200000ull
#define BURST_MAX_NS 10000000ull
#define BURST_MIN_NS 100000ull
#define BURST_MIN_CALLS 256ull
#define IO_MIN_NS 50000ull

/* a mapped file, by the device and inode its maps line gives */
struct file_key {
	uint64_t dev, ino;
	uint8_t used, done, tries;
	uint8_t usdt_seen;          /* looked at for the step note (attach_marks.c) */
};

struct file_set {
	struct file_key *t;
	uint32_t cap, n;            /* slots (a power of two), entries */
};

/* struct followed_proc of bpf/common.bpf.h: the value of the followed table */
struct followed_v {
	uint32_t parent, pad;
};

/* struct target_state of bpf/common.bpf.h */
struct target_state_v {
	uint64_t stopped, stop_ns;
	uint32_t tid, how;
	uint32_t ids[8];
	uint64_t cap_prm;
};
#define SB_STOP_EXEC 1

/* an allocator link: libbpf's (a perf-event uprobe) or a uprobe_multi link's fd */
struct alink {
	struct bpf_link *l;
	int fd;
};

/*
 * The allocator's links in a followed child process (probes_alloc_kid): by
 * its pid, to the target's library (a forked child maps it; a spawned one
 * maps it after its exec, and the links follow the process through it).
 */
#define ALLOC_KIDS_MAX PROBES_KIDS_MAX
struct alloc_kid {
	pid_t pid;
	struct alink links[2 * ALLOC_NSYMS];
	int nlinks;
};

struct probes {
	struct probe_opts o;
	struct sched_bpf *sched;
	struct mem_bpf *mem;
	struct sample_bpf *sample;  /* CPU samples (attach_sample.c); NULL: none */
	struct alloc_bpf *alloc;
	struct marks_bpf *marks;
	struct bpf_link *links[MAX_LINKS];
	int nlinks;
	int sys_first, sys_end;     /* links[sys_first, sys_end): the system-call tracepoints' */
	struct probe_status st[PROBES_MAX_STATUS];
	int nst;
	const char *sched_variant;
	uint64_t fold_ns;           /* trips off the CPU shorter than this are folded (bpf/common.bpf.h); 0: off */
	struct bpf_link *flush_sched; /* the iterator that writes held trips and idle runs */
	int ncpus;
	/* the target's mapped files already looked at, and what they led to */
	struct file_set files;
	int nusdt;                   /* files with the step note given probes (or tried) */
	uint64_t usdt_left_out;      /* files with the note past USDT_MAX */
	uint64_t files_left_out;     /* mappings of files past FILES_MAX, last pass */
	uint64_t fuse_skipped;       /* files on FUSE mounts, never opened */
	bool files_full_said, fuse_said;
	bool no_map_files;           /* /proc/PID/map_files refused us (no CAP_SYS_ADMIN) */
	uint64_t next_scan;          /* mono ns: no pass before */
	/* the FUSE mounts of the target's mount namespace, read once per pass */
	dev_t *fuse_devs;
	int nfuse_devs;
	bool fuse_read;
	/* the target's credentials at attach (bpf/common.bpf.h targ_ids) */
	uint32_t ids[8];
	uint64_t cap_prm;
	bool creds_known;
	/*
	 * The allocator's links, apart from the others: the overhead guard
	 * detaches and re-attaches them (probes_alloc_attach). alloc_attached
	 * says they were attached once (their library found: no rescan looks for
	 * another), alloc_on whether they are attached now.
	 */
	struct alink alloc_links[2 * ALLOC_NSYMS];
	int nalloc_links;
	/* destroying allocator and calibration links (destroy_async) */
	pthread_t detach_threads[2 * ALLOC_NSYMS + 8 + 4];
	int ndetach;
	uint32_t alloc_mask;         /* alloc_syms[] that attached the first time */
	char alloc_path[PATH_MAX];   /* the path they were attached through */
	char alloc_shown[256];       /* the library as the user knows it */
	uint64_t alloc_dev, alloc_ino; /* and its identity (probes_alloc_lib) */
	int alloc_fd;                /* the library, verified, kept open for alloc_path; -1: none */
	uint64_t alloc_off[ALLOC_NSYMS]; /* uprobe_multi: their offsets in that file */
	bool alloc_multi;            /* the allocator's programs take uprobe_multi links */
	bool alloc_attached;
	bool alloc_on;
	bool step_uprobe_attached;
	bool alloc_flush;            /* flush_burst loaded: the agent ends idle bursts */
	/* followed children with allocator links (ALLOC_KIDS_MAX, allocated at the first) */
	struct alloc_kid *kids;
	int nkids;
	uint64_t kids_left_out;      /* children not given them: the table was full */
};

/*
 * What every family's target filter needs (bpf/common.bpf.h), set between
 * open and load: the target, the wakeup threshold, its credentials at attach.
 */
#define SET_TARGET(p, skel) \
	do { \
		(skel)->rodata->targ_tgid = (p)->o.pid; \
		(skel)->rodata->wake_bytes = (p)->o.wake_bytes; \
		(skel)->rodata->copy_backlog_bytes = (p)->o.ring_bytes / 8; \
		memcpy((void *)(skel)->rodata->targ_ids, (p)->ids, sizeof((p)->ids)); \
		(skel)->rodata->targ_cap_prm = (p)->cap_prm; \
		(skel)->rodata->targ_creds_known = (p)->creds_known; \
		(skel)->rodata->follow_children = !(p)->o.no_children; \
		(skel)->rodata->sched_fold_ns = (p)->fold_ns; \
	} while (0)
/* a mapping of a file in the target, from one line of /proc/PID/maps */
struct mapping {
	unsigned long start, end;   /* the range, as /proc/PID/map_files names it */
	unsigned long offset;       /* the file offset of start */
	bool exec;                  /* mapped executable */
	dev_t dev;                  /* of the mapped inode, from the maps line */
	uint64_t ino;
	bool deleted;               /* " (deleted)": no name leads to it any more */
	char path[PATH_MAX];        /* as the target sees it (unescaped, " (deleted)" cut) */
};

/* ---- probes.c ---- */

/* one probe's status line (its detail escaped: it may name a file the target chose) */
void add_status(struct probes *p, const char *name, bool ok, bool essential,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* keep l among the links probes_close destroys: 0, or -errno (l NULL: its attach failed) */
int keep_link(struct probes *p, struct bpf_link *l);
int mem_release_behind(struct probes *p);
/* why a uprobe did not attach, in words a user can act on */
const char *uprobe_why(int err);
/*
 * the maps every family shares with the scheduler's: ring buffer, drop counters, target
 * state, the descendants followed
 */
int reuse_shared(struct probes *p, struct bpf_map *events, struct bpf_map *drops,
		 struct bpf_map *state, struct bpf_map *followed, struct bpf_map *follow_any);
/* the per-thread maps of bpf/common.bpf.h (fault run slot, storage, stack maps), shared the same way */
struct bpf_object;
int reuse_thread_maps(struct probes *p, struct bpf_object *obj);

/* ---- binfile.c ---- */

/* does the ELF file open on fd carry the USDT note provider:name? (read with pread, no mmap) */
bool elf_has_usdt(int fd, const char *provider, const char *name);
/*
 * Where each function names[i] starts in the ELF file open on fd, as a file
 * offset (what a uprobe takes): off[i], 0 for those it does not define. A
 * global definition is preferred to a weak one. Read with pread, not mapped.
 * At most ELF_FUNCS_MAX names.
 */
#define ELF_FUNCS_MAX 32
void elf_func_offsets(int fd, const char *const *names, size_t n, uint64_t *off);
/* mapped files parsed for ELF notes or symbols so far (probes_scan_counters) */
uint64_t elf_parse_count(void);
/*
 * Open the file of mapping m for reading, never by a name the target
 * controls, with a read lease held until it is closed: fd, or -errno.
 */
int open_mapped(struct probes *p, const struct mapping *m);
/* the same for a mapping of process pid (a followed child) */
int open_mapped_pid(struct probes *p, pid_t pid, const struct mapping *m);
/* give up the read lease open_mapped took on fd */
void drop_lease(int fd);
/* the path that names the file open on fd, for libbpf and the kernel */
void fd_path(int fd, char *buf, size_t len);
/* is dev a FUSE mount of the target's mount namespace? (read when p->fuse_read is false) */
bool on_fuse(struct probes *p, dev_t dev);
/* the entry of file dev:ino in s, added if new; NULL when the set is full */
struct file_key *file_get(struct file_set *s, uint64_t dev, uint64_t ino);
/* cb once per file mapping in pid's maps (non-zero stops): how many, or -errno */
int for_each_mapping(pid_t pid, int (*cb)(void *ctx, const struct mapping *m), void *ctx);
const char *base_name(const char *path);
bool is_libc(const char *path);

/* ---- attach_sched.c ---- */

/* does tracepoint tp exist on this kernel? (true when vmlinux is NULL: the load decides) */
bool tp_exists(const struct btf *vmlinux, const char *tp);
/* open and load the scheduler family, tp_btf programs (use_btf) or raw_tp: 0 or -errno */
int open_sched(struct probes *p, bool use_btf, const struct btf *vmlinux);
int attach_sched(struct probes *p);
/* the NUMA node of each CPU, for the programs */
void fill_cpu_nodes(struct probes *p);

/* ---- attach_sample.c ---- */

/* CPU samples of the target's threads with their user stacks (not with --no-stacks) */
void open_sample(struct probes *p);

/* ---- attach_mem.c ---- */

/* load and attach the memory family; its failures are probe statuses */
void open_mem(struct probes *p, const struct btf *vmlinux);

/* ---- attach_alloc.c ---- */

/* load the allocator family (uprobe_multi programs where the kernel has them): 0 or -errno */
int open_alloc(struct probes *p);
/* the allocator probes on the library open on fd (verified), or at path (fd < 0: --alloc-lib) */
void attach_alloc(struct probes *p, int fd, const char *path, const char *shown);
/* a uprobe_multi link of one uprobe (ret: uretprobe) at off in path for pid: fd or -errno */
int uprobe_multi_link(int prog_fd, const char *path, const uint64_t *offs, const uint64_t *cookies,
		      unsigned cnt, bool ret, pid_t pid);
/* destroy a link on a thread of its own (reap_detach waits for them) */
void destroy_async(struct probes *p, const struct alink *a);
/* take the allocator's links away (destroy_async) */
void detach_alloc(struct probes *p);
void reap_detach(struct probes *p);

/* ---- attach_marks.c ---- */

/* load the step-mark and CUDA driver programs: 0 or -errno */
int open_marks(struct probes *p);
/* the step note's probe on the file at fpath (shown as shown); false: past USDT_MAX, left out */
bool attach_usdt_step(struct probes *p, const char *fpath, const char *shown);
/*
 * The step note of a mapped file (fd verified), looked at once per file (k):
 * true when the file has the note and was left out (USDT_MAX files probed)
 */
bool usdt_file(struct probes *p, struct file_key *k, int fd, const char *shown);
/*
 * An executable file that a followed child maps (stackmaps.c, the first time
 * it sees the mapping; fd opened as mapped): its step note gets the probes
 * too, once per file.
 */
void probes_child_file(struct probes *p, int fd, const struct mapping *m);
/* has probes_child_file looked at that file already (or are there no step probes)? */
bool probes_child_file_seen(struct probes *p, uint64_t dev, uint64_t ino);
/* --step-uprobe LIB:SYM (p->step_uprobe_attached says whether it did) */
void attach_step_uprobe(struct probes *p);

/* ---- attach_cuda.c ---- */

/* the CUDA driver's entry points in the library at open_path, shown as shown */
void attach_cuda(struct probes *p, const char *open_path, const char *shown);

#endif
