// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Memory probes: user page faults, direct reclaim and compaction stalls with
 * their duration, and the mmap family of system calls with their latency.
 * All raw tracepoints: they need neither tracefs nor a BTF-typed context
 * (struct trace_event_raw_x86_exceptions is missing from some kernels' BTF).
 *
 * The same system-call probes time the I/O calls that can block a thread
 * (read, write, pread64, pwrite64, readv, writev, fsync, fdatasync,
 * sync_file_range, and unlink/unlinkat: removing a file frees its page cache
 * and waits for the journal): those slower than io_min_ns become
 * SB_EV_IOSYS records.
 * A trainer makes many tiny reads and writes; the fast ones are not worth an
 * event.
 * And they time sched_setaffinity(): a thread moved by it is moved inside the
 * call, on a CPU and waiting for the migration stopper (SB_EV_AFFINITY).
 *
 * A recorded I/O call names its file (struct sb_iosys_file): the fd's struct
 * file, its inode and kind, and its name walked up the dentries (across
 * mounts) at the call's return. bpf_d_path() would do the walk, but only
 * fentry/LSM programs on a short list of kernel functions may call it, not
 * the syscall tracepoints these are; the walk reads at most PATH_DEPTH names.
 * Every write of the target (fast ones too) adds its bytes to a counter per
 * open file, so a slow call says how much had been written through it.
 */
#include "common.bpf.h"
#include "task.bpf.h"

/* I/O calls faster than this are not recorded; set by the agent */
const volatile __u64 io_min_ns = 50000;
/* mmap-family calls at least this slow get a user stack (when stacks are on) */
const volatile __u64 stack_mm_min_ns = 50000;

/*
 * When a target thread's reclaim or compaction began, by thread id: one entry
 * for each of its threads inside one at once (a full map counts a drop). The
 * hashes are preallocated: 1,024 entries are 80 KiB each, 16,384 were 1.3 MiB.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} reclaim_start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} compact_start SEC(".maps");

/* bytes written through an open file (keyed by its struct file), with the inode it was for */
struct file_written {
	__u64 ino;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct file_written);
} written_by_file SEC(".maps");

#define IO_CALL 0x100
#define AFF_CALL 0x200 /* sched_setaffinity */

/*
 * The calls in progress: in the thread's task storage (tstate.mm) where the
 * kernel lets these programs use it (mm_in_task, set by the agent), else in
 * this hash by tid. A hash update at the entry and a delete at the exit cost
 * more than the task storage, whose entry hangs off the task itself
 * (docs/ARCHITECTURE.md, "System-call probes").
 */
const volatile bool mm_in_task = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct mm_call);
} mm_calls SEC(".maps");

/* the current thread's call in progress, NULL if none */
static __always_inline struct mm_call *mm_call_get(__u32 tid)
{
	if (mm_in_task) {
		struct tstate *s = bpf_task_storage_get(&tstate, bpf_get_current_task_btf(), 0, 0);

		return s && s->mm.start ? &s->mm : NULL;
	}
	return bpf_map_lookup_elem(&mm_calls, &tid);
}

/* the current thread's call c (from mm_call_get) is over */
static __always_inline void mm_call_done(__u32 tid, struct mm_call *c)
{
	if (mm_in_task)
		c->start = 0;
	else
		bpf_map_delete_elem(&mm_calls, &tid);
}

#if defined(__TARGET_ARCH_arm64)
#define NR_BRK 214
#define NR_MUNMAP 215
#define NR_MREMAP 216
#define NR_MMAP 222
#define NR_MPROTECT 226
#define NR_MADVISE 233
#define NR_READ 63
#define NR_WRITE 64
#define NR_READV 65
#define NR_WRITEV 66
#define NR_PREAD64 67
#define NR_PWRITE64 68
#define NR_FSYNC 82
#define NR_FDATASYNC 83
#define NR_SYNC_FILE_RANGE 84
#define NR_UNLINKAT 35
#define NR_SCHED_SETAFFINITY 122
#define NR_SYNC 81
#define NR_SYNCFS 267
#define NR_SENDFILE 71
#define NR_COPY_FILE_RANGE 285
#define NR_SPLICE 76
#define NR_PREADV 69
#define NR_PWRITEV 70
#define NR_PREADV2 286
#define NR_PWRITEV2 287
/* no unlink: arm64 has only unlinkat */
#else /* x86_64 */
#define NR_MMAP 9
#define NR_MPROTECT 10
#define NR_MUNMAP 11
#define NR_BRK 12
#define NR_MREMAP 25
#define NR_MADVISE 28
#define NR_READ 0
#define NR_WRITE 1
#define NR_PREAD64 17
#define NR_PWRITE64 18
#define NR_READV 19
#define NR_WRITEV 20
#define NR_FSYNC 74
#define NR_FDATASYNC 75
#define NR_SYNC_FILE_RANGE 277
#define NR_UNLINK 87
#define NR_UNLINKAT 263
#define NR_SCHED_SETAFFINITY 203
#define NR_SYNC 162
#define NR_SYNCFS 306
#define NR_SENDFILE 40
#define NR_COPY_FILE_RANGE 326
#define NR_SPLICE 275
#define NR_PREADV 295
#define NR_PWRITEV 296
#define NR_PREADV2 327
#define NR_PWRITEV2 328
#endif

/* a fault this far from a run's addresses starts another run (it stays in one region in practice) */
#define FAULT_RUN_NEAR (2ull << 20)

/* the task's fault counters (before this fault: the tracepoint fires at entry) */
static __always_inline void fault_counters(__u64 *maj, __u64 *min)
{
	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_current_task_btf)) {
		struct task_struct *t = bpf_get_current_task_btf();

		*maj = t->maj_flt;
		*min = t->min_flt;
	} else {
		struct task_struct *t = (struct task_struct *)bpf_get_current_task();

		*maj = BPF_CORE_READ(t, maj_flt);
		*min = BPF_CORE_READ(t, min_flt);
	}
}

/* the fault written on its own, as before runs: the slot is being written by an interrupted program */
static __always_inline void fault_alone(void *ctx, unsigned long address, struct pt_regs *regs,
					unsigned long error_code)
{
	struct sb_fault *e = reserve_other(SB_EV_FAULT, sizeof(*e));

	if (!e)
		return;
	e->addr = address;
	e->ip = BPF_CORE_READ(regs, ip);
	e->error_code = error_code;
	fault_counters(&e->maj_flt, &e->min_flt);
	submit(e);
}

/*
 * A user page fault. A fault of the thread whose run the CPU's slot holds,
 * within fault_run_gap_ns of its last one and near its addresses, only
 * extends the run: no record, and no target filter (the thread passed it at
 * the run's first fault; a run is dropped if its process stopped being
 * recorded meanwhile: fault_flush). Otherwise the run is written and this
 * fault starts the next one, with its user stack (rate-limited as before).
 */
SEC("raw_tp/page_fault_user")
int BPF_PROG(raw_fault, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	__u32 zero = 0;
	struct fault_slot *s = bpf_map_lookup_elem(&fault_slot, &zero);
	__u64 id = bpf_get_current_pid_tgid();
	__u64 now;

	if (!s)
		return 0;
	if (s->count && s->tid == (__u32)id && !s->busy &&
	    address + FAULT_RUN_NEAR >= s->lo && address <= s->hi + FAULT_RUN_NEAR) {
		bool timed = !s->dense || s->untimed >= FAULT_UNTIMED;

		if (timed) {
			now = bpf_ktime_get_ns();
			if (now - s->last >= fault_run_gap_ns || now - s->first >= fault_run_max_ns)
				goto new_run;
		}
		s->busy = 1;
		asm volatile("" ::: "memory");
		if (timed) {
			/* the stretch since the last timed fault, per fault */
			s->dense = (now - s->last) / (s->untimed + 1) < fault_dense_ns;
			s->untimed = 0;
			s->last = now;
			/*
			 * a long run: its stack, from inside it (the slot is busy:
			 * reserve() leaves the run alone), if its process is still
			 * recorded: the extension skipped the filter
			 */
			if (!s->stacked && now - s->first >= stack_fault_run_ns) {
				s->stacked = 1;
				if (current_is_target())
					emit_stack(ctx, SB_EV_FAULT, 0, s->first, now);
			}
		} else {
			s->untimed++;
		}
		s->count++;
		s->last_addr = address;
		if (address < s->lo)
			s->lo = address;
		if (address > s->hi)
			s->hi = address;
		fault_counters(&s->maj, &s->min);
		asm volatile("" ::: "memory");
		s->busy = 0;
		return 0;
	}
new_run:
	if (!current_is_target())
		return 0;
	if (s->busy) {
		fault_alone(ctx, address, regs, error_code);
		return 0;
	}
	fault_flush(s);
	now = bpf_ktime_get_ns();
	/* its stack first: the slot is empty, so that reserve() writes nothing */
	bool stacked = fault_stack_due(now, stack_fault_start_gap_ns);

	if (stacked)
		emit_stack(ctx, SB_EV_FAULT, 0, now, now);
	s->busy = 1;
	asm volatile("" ::: "memory");
	s->tid = (__u32)id;
	s->pid = id >> 32;
	s->first = s->last = now;
	s->addr = s->last_addr = s->lo = s->hi = address;
	s->ip = BPF_CORE_READ(regs, ip);
	s->error_code = error_code;
	fault_counters(&s->maj0, &s->min0);
	s->maj = s->maj0;
	s->min = s->min0;
	s->count = 1;
	s->untimed = 0;
	s->dense = 0;
	s->stacked = stacked;
	asm volatile("" ::: "memory");
	s->busy = 0;
	return 0;
}

/*
 * Run by the agent on each CPU in turn (BPF_F_TEST_RUN_ON_CPU): writes the
 * CPU's fault run if its last fault is over fault_idle_ns old (all: in any
 * case, at the end of the capture). Bounds how late a run can be without CPU
 * samples (--no-stacks): the agent's second.
 */
SEC("raw_tp")
int BPF_PROG(flush_faults, __u64 all)
{
	__u32 zero = 0;
	struct fault_slot *s = bpf_map_lookup_elem(&fault_slot, &zero);

	if (!s || !s->count || (!all && bpf_ktime_get_ns() - s->last < fault_idle_ns))
		return 0;
	/*
	 * The run's thread may be the task this interrupted, its credentials not
	 * checked since the run began: checked now (a change stops the recording,
	 * and the run is dropped)
	 */
	if (s->tid == (__u32)bpf_get_current_pid_tgid())
		current_creds_same(SB_STOP_CRED, false);
	fault_flush(s);
	return 0;
}

static __always_inline int begin(void *map)
{
	if (!current_is_target())
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns();

	if (bpf_map_update_elem(map, &tid, &now, BPF_ANY))
		count_drop(SB_DROP_MAPFULL);
	return 0;
}

static __always_inline int end(void *map, __u32 kind, __u64 result)
{
	if (!current_is_target())
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 *start = bpf_map_lookup_elem(map, &tid);

	if (!start)
		return 0;
	__u64 s = *start;

	bpf_map_delete_elem(map, &tid);
	struct sb_reclaim *e = reserve(SB_EV_RECLAIM, sizeof(*e));

	if (!e)
		return 0;
	e->start_ns = s;
	e->result = result;
	e->kind = kind;
	e->pad = 0;
	submit(e);
	return 0;
}

SEC("raw_tp/mm_vmscan_direct_reclaim_begin")
int BPF_PROG(raw_reclaim_begin)
{
	return begin(&reclaim_start);
}

SEC("raw_tp/mm_vmscan_direct_reclaim_end")
int BPF_PROG(raw_reclaim_end, unsigned long nr_reclaimed)
{
	return end(&reclaim_start, SB_RECLAIM_DIRECT, nr_reclaimed);
}

SEC("raw_tp/mm_vmscan_memcg_reclaim_begin")
int BPF_PROG(raw_memcg_begin)
{
	return begin(&reclaim_start);
}

SEC("raw_tp/mm_vmscan_memcg_reclaim_end")
int BPF_PROG(raw_memcg_end, unsigned long nr_reclaimed)
{
	return end(&reclaim_start, SB_RECLAIM_MEMCG, nr_reclaimed);
}

/* compaction on the target's own thread is direct compaction (kcompactd is a kthread) */
SEC("raw_tp/mm_compaction_begin")
int BPF_PROG(raw_compact_begin)
{
	return begin(&compact_start);
}

SEC("raw_tp/mm_compaction_end")
int BPF_PROG(raw_compact_end, void *cc, unsigned long zs, unsigned long fs, bool sync,
	     int status)
{
	return end(&compact_start, SB_RECLAIM_COMPACT, (__u64)(__s64)status);
}

/* the system calls followed, both families: 0 for any other */
static __always_inline __u32 mm_call_of(long id)
{
	switch (id) {
	case NR_MMAP: return SB_SYS_MMAP;
	case NR_MUNMAP: return SB_SYS_MUNMAP;
	case NR_BRK: return SB_SYS_BRK;
	case NR_MADVISE: return SB_SYS_MADVISE;
	case NR_MPROTECT: return SB_SYS_MPROTECT;
	case NR_MREMAP: return SB_SYS_MREMAP;
	case NR_READ: return IO_CALL | SB_IO_READ;
	case NR_WRITE: return IO_CALL | SB_IO_WRITE;
	case NR_PREAD64: return IO_CALL | SB_IO_PREAD;
	case NR_PWRITE64: return IO_CALL | SB_IO_PWRITE;
	case NR_READV: return IO_CALL | SB_IO_READV;
	case NR_WRITEV: return IO_CALL | SB_IO_WRITEV;
	case NR_FSYNC: return IO_CALL | SB_IO_FSYNC;
	case NR_FDATASYNC: return IO_CALL | SB_IO_FDATASYNC;
	case NR_SYNC_FILE_RANGE: return IO_CALL | SB_IO_SYNC_FILE_RANGE;
#ifdef NR_UNLINK
	case NR_UNLINK: return IO_CALL | SB_IO_UNLINK;
#endif
	case NR_UNLINKAT: return IO_CALL | SB_IO_UNLINKAT;
	case NR_SYNC: return IO_CALL | SB_IO_SYNC;
	case NR_SYNCFS: return IO_CALL | SB_IO_SYNCFS;
	case NR_SENDFILE: return IO_CALL | SB_IO_SENDFILE;
	case NR_COPY_FILE_RANGE: return IO_CALL | SB_IO_COPY_FILE_RANGE;
	case NR_SPLICE: return IO_CALL | SB_IO_SPLICE;
	case NR_PREADV: return IO_CALL | SB_IO_PREADV;
	case NR_PWRITEV: return IO_CALL | SB_IO_PWRITEV;
	case NR_PREADV2: return IO_CALL | SB_IO_PREADV2;
	case NR_PWRITEV2: return IO_CALL | SB_IO_PWRITEV2;
	case NR_SCHED_SETAFFINITY: return AFF_CALL;
	}
	return 0;
}

/* the length argument of an I/O call, for those that have one */
static __always_inline __u64 io_len(__u32 call, __u64 a3, __u64 a4, __u64 a5)
{
	switch (call) {
	case IO_CALL | SB_IO_READ:
	case IO_CALL | SB_IO_WRITE:
	case IO_CALL | SB_IO_PREAD:
	case IO_CALL | SB_IO_PWRITE:
	case IO_CALL | SB_IO_SYNC_FILE_RANGE:
		return a3;
	case IO_CALL | SB_IO_SENDFILE:
		return a4;
	case IO_CALL | SB_IO_COPY_FILE_RANGE:
	case IO_CALL | SB_IO_SPLICE:
		return a5;
	}
	/* the vector calls (the iovec is not read), the syncs, unlink(at) */
	return 0;
}

/*
 * The descriptor whose file an I/O call names: its first argument, but for
 * sendfile the file copied from (its second; copy_file_range and splice
 * have theirs first); unlink has none, sync none
 */
static __always_inline __u64 io_fd(__u32 call, __u64 a1, __u64 a2)
{
	if (call == (IO_CALL | SB_IO_SENDFILE))
		return a2;
	if (call == (IO_CALL | SB_IO_UNLINK) || call == (IO_CALL | SB_IO_SYNC))
		return (__u64)(__s64)-100; /* AT_FDCWD: unlink's first argument is the path */
	return a1;
}

static __always_inline int mm_enter(__u32 call, __u64 a1, __u64 a2, __u64 a3, __u64 a4,
				    __u64 a5)
{
	if (!current_is_target())
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct mm_call c = {
		.start = bpf_ktime_get_ns(),
		.addr = a1,
		.call = call,
		.flags = call == SB_SYS_MMAP ? (__u32)a4 : 0,
		.fd = call == SB_SYS_MMAP ? (__s32)a5 : -1,
	};

	if (call == AFF_CALL) {
		c.len = 0;
	} else if (call & IO_CALL) {
		c.len = io_len(call, a3, a4, a5);
		c.addr = io_fd(call, a1, a2);
	} else {
		c.len = call == SB_SYS_BRK ? 0 : a2;
		c.arg = call == SB_SYS_MUNMAP || call == SB_SYS_BRK ? 0 : (__u32)a3;
	}
	if (mm_in_task) {
		struct tstate *s = bpf_task_storage_get(&tstate, bpf_get_current_task_btf(), 0,
							 BPF_LOCAL_STORAGE_GET_F_CREATE);

		if (s)
			s->mm = c;
		else
			count_drop(SB_DROP_MAPFULL);
	} else if (bpf_map_update_elem(&mm_calls, &tid, &c, BPF_ANY)) {
		count_drop(SB_DROP_MAPFULL);
	}
	return 0;
}

static __always_inline bool io_writes(__u32 call)
{
	return call == (IO_CALL | SB_IO_WRITE) || call == (IO_CALL | SB_IO_PWRITE) ||
	       call == (IO_CALL | SB_IO_WRITEV) || call == (IO_CALL | SB_IO_PWRITEV) ||
	       call == (IO_CALL | SB_IO_PWRITEV2);
}

/* a write of n bytes through f: its counter; returns the bytes written through f so far */
static __always_inline __u64 count_written(struct file *f, __u64 n)
{
	__u64 key = (__u64)f, ino = BPF_CORE_READ(f, f_inode, i_ino);
	struct file_written *w = bpf_map_lookup_elem(&written_by_file, &key);

	if (w && w->ino == ino) {
		if (n)
			__sync_fetch_and_add(&w->bytes, n);
		return w->bytes;
	}
	/* first write seen through it, or a struct file reused for another inode */
	struct file_written nw = { .ino = ino, .bytes = n };

	if (n)
		bpf_map_update_elem(&written_by_file, &key, &nw, BPF_ANY);
	return n;
}

#define PATH_DEPTH 24
#define PATH_PART 128 /* the most one name takes: any start below PATH_MAX_OFF leaves room for it */
#define PATH_MAX_OFF (SB_IO_PATH_LEN - PATH_PART)

static __always_inline __u8 file_kind(__u16 mode)
{
	switch (mode & 0170000) {
	case 0100000: return SB_FILE_REGULAR;
	case 0140000: return SB_FILE_SOCKET;
	case 0010000: return SB_FILE_PIPE;
	case 0020000: return SB_FILE_CHAR;
	case 0060000: return SB_FILE_BLOCK;
	case 0040000: return SB_FILE_DIR;
	}
	return SB_FILE_OTHER;
}

/* the name being walked: a per-CPU buffer, since the walk's steps are a bpf_loop() callback */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, char[SB_IO_PATH_LEN]);
} path_scratch SEC(".maps");

struct path_walk {
	struct dentry *d;
	struct mount *m;
	__u32 off;
	__u8 flags;
};

/* one step up the name: a component, or over the top of a mount; 1 ends the walk */
static long walk_one(__u64 i, void *ctx)
{
	struct path_walk *w = ctx;
	__u32 zero = 0, off = w->off;
	char *buf = bpf_map_lookup_elem(&path_scratch, &zero);
	struct dentry *d = w->d, *parent, *root;
	struct mount *m = w->m;
	long n;

	if (!buf)
		return 1;
	parent = BPF_CORE_READ(d, d_parent);
	root = BPF_CORE_READ(m, mnt.mnt_root);
	if (d == root || d == parent) {
		/* the top of this mount: on to where it is mounted */
		struct mount *up = BPF_CORE_READ(m, mnt_parent);

		if (!up || up == m) {
			w->flags |= SB_IO_PATH_TOP;
			return 1;
		}
		w->d = BPF_CORE_READ(m, mnt_mountpoint);
		w->m = up;
		return 0;
	}
	if (off >= PATH_MAX_OFF) {
		w->flags |= SB_IO_PATH_CUT;
		return 1;
	}
	n = bpf_probe_read_kernel_str(buf + (off & (PATH_PART - 1)), PATH_PART,
				      BPF_CORE_READ(d, d_name.name));
	if (n <= 0)
		return 1;
	w->off = off + (__u32)n;
	w->d = parent;
	return 0;
}

/*
 * f's identity and name, leaf first (struct sb_iosys_file). A global function,
 * and its walk a bpf_loop(): the verifier checks one step once, where an
 * unrolled walk inlined into every exit program made loading take seconds.
 */
__noinline int file_identity(struct sb_iosys_file *o, __u64 fp)
{
	struct file *f = (struct file *)fp;
	struct path_walk w = {};
	struct inode *ino;
	__u32 zero = 0;
	char *buf;

	if (!o || !f)
		return 0;
	ino = BPF_CORE_READ(f, f_inode);
	o->ino = BPF_CORE_READ(ino, i_ino);
	o->dev = BPF_CORE_READ(ino, i_sb, s_dev);
	o->kind = file_kind(BPF_CORE_READ(ino, i_mode));
	if (o->kind == SB_FILE_SOCKET || o->kind == SB_FILE_PIPE)
		return 0; /* no name worth walking */
	buf = bpf_map_lookup_elem(&path_scratch, &zero);
	if (!buf)
		return 0;
	__builtin_memset(buf, 0, SB_IO_PATH_LEN);
	w.d = BPF_CORE_READ(f, f_path.dentry);
	w.m = container_of(BPF_CORE_READ(f, f_path.mnt), struct mount, mnt);
	bpf_loop(PATH_DEPTH, walk_one, &w, 0);
	if (!(w.flags & (SB_IO_PATH_TOP | SB_IO_PATH_CUT)))
		w.flags |= SB_IO_PATH_CUT;
	o->flags = w.flags;
	o->path_len = w.off < SB_IO_PATH_LEN ? w.off : SB_IO_PATH_LEN;
	bpf_probe_read_kernel(o->path, SB_IO_PATH_LEN, buf);
	return 0;
}

static __always_inline void io_exit(void *ctx, const struct mm_call *c, long ret, struct file *f,
				    __u64 written)
{
	__u64 now = bpf_ktime_get_ns();

	if (now - c->start < io_min_ns)
		return;
	struct sb_iosys_ext *e = reserve(SB_EV_IOSYS, sizeof(*e));

	if (!e)
		return;
	e->io.h.ts = now;
	e->io.start_ns = c->start;
	e->io.ret = ret;
	e->io.len = c->len;
	e->io.call = c->call & ~IO_CALL;
	e->io.fd = (__s32)c->addr;
	e->file.ino = 0;
	e->file.written = 0;
	e->file.dev = 0;
	e->file.kind = SB_FILE_NONE;
	e->file.flags = 0;
	e->file.path_len = 0;
	__builtin_memset(e->file.path, 0, sizeof(e->file.path));
	if (f) {
		e->file.written = written ? written : count_written(f, 0);
		file_identity(&e->file, (__u64)f);
	}
	submit(e);
	emit_stack(ctx, SB_EV_IOSYS, c->call, c->start, now);
}

/* every call is recorded: they are rare, and each may move a thread */
static __always_inline void aff_exit(const struct mm_call *c, long ret)
{
	struct sb_affinity *e = reserve(SB_EV_AFFINITY, sizeof(*e));

	if (!e)
		return;
	e->h.ts = bpf_ktime_get_ns();
	e->start_ns = c->start;
	e->ret = ret;
	e->pid = (__u32)c->addr;
	e->pad = 0;
	submit(e);
}

static __always_inline int mm_exit(void *ctx, long ret)
{
	if (!current_is_target())
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct mm_call *c = mm_call_get(tid);

	if (!c)
		return 0;
	if (c->call == AFF_CALL) {
		aff_exit(c, ret);
		mm_call_done(tid, c);
		return 0;
	}
	if (c->call & IO_CALL) {
		bool named = c->call != (IO_CALL | SB_IO_UNLINK) &&
			     c->call != (IO_CALL | SB_IO_UNLINKAT) &&
			     c->call != (IO_CALL | SB_IO_SYNC);
		struct file *f = named ? fd_file((__s32)c->addr) : NULL;
		__u64 written = 0;

		if (f && io_writes(c->call) && ret > 0)
			written = count_written(f, (__u64)ret);
		io_exit(ctx, c, ret, f, written);
		mm_call_done(tid, c);
		return 0;
	}
	if (c->call == SB_SYS_MMAP) {
		/* what it mapped: anonymous memory, or which file */
		struct sb_mmsys_ext *x = reserve(SB_EV_MMSYS, sizeof(*x));
		struct file *f;

		if (x) {
			x->mm.start_ns = c->start;
			x->mm.addr = c->addr;
			x->mm.len = c->len;
			x->mm.ret = ret;
			x->mm.call = c->call;
			x->mm.arg = c->arg;
			x->map.flags = c->flags;
			x->map.fd = c->fd;
			__builtin_memset(&x->map.file, 0, sizeof(x->map.file));
			f = (c->flags & 0x20) || ret < 0 ? NULL : fd_file(c->fd);
			if (f)
				file_identity(&x->map.file, (__u64)f);
			__u64 ts = x->mm.h.ts;

			submit(x);
			/* only the slow ones: every mmap-family call is recorded */
			if (ts - c->start >= stack_mm_min_ns)
				emit_stack(ctx, SB_EV_MMSYS, c->call, c->start, ts);
		}
		mm_call_done(tid, c);
		return 0;
	}
	struct sb_mmsys *e = reserve(SB_EV_MMSYS, sizeof(*e));

	if (e) {
		e->start_ns = c->start;
		e->addr = c->addr;
		e->len = c->len;
		e->ret = ret;
		e->call = c->call;
		e->arg = c->arg;
		__u64 ts = e->h.ts;

		submit(e);
		/* only the slow ones: every mmap-family call is recorded */
		if (ts - c->start >= stack_mm_min_ns)
			emit_stack(ctx, SB_EV_MMSYS, c->call, c->start, ts);
	}
	mm_call_done(tid, c);
	return 0;
}

/*
 * Fallback when the per-syscall tracepoints cannot be used (no tracefs): the
 * raw tracepoints fire on every system call of every process, so they cost
 * the whole machine a little more.
 */
SEC("raw_tp/sys_enter")
int BPF_PROG(raw_sys_enter, struct pt_regs *regs, long id)
{
	__u32 call;

	if (!current_is_target())
		return 0;
	call = mm_call_of(id);
	if (!call)
		return 0;
	bool more = call == SB_SYS_MMAP || call == (IO_CALL | SB_IO_SENDFILE) ||
		    call == (IO_CALL | SB_IO_COPY_FILE_RANGE) || call == (IO_CALL | SB_IO_SPLICE);

	return mm_enter(call, PT_REGS_PARM1_CORE_SYSCALL(regs), PT_REGS_PARM2_CORE_SYSCALL(regs),
			PT_REGS_PARM3_CORE_SYSCALL(regs), more ? PT_REGS_PARM4_CORE_SYSCALL(regs) : 0,
			more ? PT_REGS_PARM5_CORE_SYSCALL(regs) : 0);
}

SEC("raw_tp/sys_exit")
int BPF_PROG(raw_sys_exit, struct pt_regs *regs, long ret)
{
	return mm_exit(ctx, ret);
}

/*
 * Per-syscall tracepoints: only these calls pay (need tracefs to attach); the
 * loader attaches all or none. The record of syscalls/sys_enter_NAME (its
 * tracefs format file): the common fields, int __syscall_nr at offset 8, then
 * each of the call's arguments as an unsigned long from offset 16; that of
 * sys_exit_NAME: __syscall_nr, then long ret at offset 16. The kernel refuses
 * to attach a program that may read past its tracepoint's record, so there is
 * one entry program for each number of arguments read (none for sync; at most five: mmap's
 * sixth, its offset, is not used), which names its call by the record's
 * number, and one exit program for all. One program for several tracepoints:
 * a verification each, not one for each call (user/capture/attach_mem.c
 * lists which call takes which).
 */
struct sys_enter_rec {
	__u64 common;
	int nr;
	int pad;
	unsigned long args[6];
};

struct sys_exit_rec {
	__u64 common;
	int nr;
	int pad;
	long ret;
};

static __always_inline int tp_enter(struct sys_enter_rec *ctx, int nargs)
{
	__u32 call = mm_call_of(ctx->nr);

	if (!call)
		return 0;
	return mm_enter(call, nargs > 0 ? ctx->args[0] : 0, nargs > 1 ? ctx->args[1] : 0,
			nargs > 2 ? ctx->args[2] : 0, nargs > 3 ? ctx->args[3] : 0,
			nargs > 4 ? ctx->args[4] : 0);
}

#define TP_ENTER(n) \
SEC("tracepoint") \
int tp_enter_##n(struct sys_enter_rec *ctx) \
{ \
	return tp_enter(ctx, n); \
}

TP_ENTER(0)
TP_ENTER(1)
TP_ENTER(2)
TP_ENTER(3)
TP_ENTER(4)
TP_ENTER(5)

SEC("tracepoint")
int tp_exit(struct sys_exit_rec *ctx)
{
	return mm_exit(ctx, ctx->ret);
}
