// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Load and attach the probe families. Portability comes from probing what
 * this kernel accepts, not from its version: tp_btf where it loads, raw_tp
 * otherwise, each program attached on its own so one missing tracepoint costs
 * one probe, not the capture. Nothing here needs tracefs.
 *
 * This file holds the entry points and the pass over the target's mappings;
 * each family, the file parsing and the calibration have files of their own
 * (capture/probes_internal.h lists them).
 */
#include <errno.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "capture/probes_internal.h"
#include "capture/target.h"
#include "base/util.h"
#include "sched.skel.h"
#include "mem.skel.h"
#include "sample.skel.h"
#include "alloc.skel.h"
#include "marks.skel.h"

static bool verbose_libbpf;

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (!verbose_libbpf && level != LIBBPF_WARN)
		return 0;
	if (!verbose_libbpf)
		return 0; /* failures come back as return codes; we say them in one line */
	return vfprintf(stderr, fmt, ap);
}

/*
 * One probe's status. The detail often names a file the target mapped, under
 * a name it chose: it is escaped (target.h sb_escape) before it can reach a
 * terminal or a note.
 */
void add_status(struct probes *p, const char *name, bool ok, bool essential,
		const char *fmt, ...)
{
	struct probe_status *s;
	char raw[PATH_MAX + 256];
	va_list ap;

	if (p->nst >= PROBES_MAX_STATUS)
		return;
	s = &p->st[p->nst++];
	sb_escape(s->name, sizeof(s->name), name, strlen(name));
	s->attached = ok;
	s->essential = essential;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	sb_escape(s->detail, sizeof(s->detail), raw, sizeof(raw));
}

int keep_link(struct probes *p, struct bpf_link *l)
{
	if (!l)
		return -errno ? -errno : -EINVAL;
	if (p->nlinks >= MAX_LINKS) {
		bpf_link__destroy(l);
		return -E2BIG;
	}
	p->links[p->nlinks++] = l;
	return 0;
}

/* ---- privileges ---- */

static bool has_cap(const struct __user_cap_data_struct d[2], int cap)
{
	return d[cap / 32].effective & (1u << (cap % 32));
}

int probes_check_privileges(pid_t pid, char *err, size_t errlen)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = {};
	char missing[128] = "";

	if (syscall(SYS_capget, &hdr, d)) {
		snprintf(err, errlen, "cannot read this process's capabilities: %s", strerror(errno));
		return -1;
	}
	if (has_cap(d, CAP_SYS_ADMIN))
		return 0;
	if (!has_cap(d, 39 /* CAP_BPF */))
		strcat(missing, " CAP_BPF");
	if (!has_cap(d, 38 /* CAP_PERFMON */))
		strcat(missing, " CAP_PERFMON");
	if (missing[0]) {
		snprintf(err, errlen,
			 "not allowed: loading BPF probes needs root or CAP_BPF and CAP_PERFMON "
			 "(missing:%s); run with sudo", missing);
		return -1;
	}
	if (pid > 0) {
		char path[64];
		struct stat st;

		snprintf(path, sizeof(path), "/proc/%d", (int)pid);
		if (!stat(path, &st) && st.st_uid != geteuid() && !has_cap(d, CAP_SYS_PTRACE)) {
			snprintf(err, errlen,
				 "not allowed: PID %d belongs to uid %u; reading another user's "
				 "process needs root or CAP_SYS_PTRACE", (int)pid, (unsigned)st.st_uid);
			return -1;
		}
	}
	return 0;
}

/* why a uprobe did not attach, in words a user can act on */
const char *uprobe_why(int err)
{
	if (err == EACCES || err == EPERM)
		return "not allowed: uprobes need CAP_SYS_ADMIN on this kernel";
	return strerror(err);
}

/* ---- what looking at the target's mapped files cost ---- */

static uint64_t n_scans, last_scan_ns, max_scan_ns, n_deferred;

void probes_scan_counters(struct probes_scan_counters *out)
{
	out->elf_parses = elf_parse_count();
	out->scans = __atomic_load_n(&n_scans, __ATOMIC_RELAXED);
	out->last_scan_ns = __atomic_load_n(&last_scan_ns, __ATOMIC_RELAXED);
	out->max_scan_ns = __atomic_load_n(&max_scan_ns, __ATOMIC_RELAXED);
	out->deferred = __atomic_load_n(&n_deferred, __ATOMIC_RELAXED);
}

/*
 * the maps every family shares: the ring buffer, the drop counters, the target's state,
 * the descendants followed
 */
int reuse_shared(struct probes *p, struct bpf_map *events, struct bpf_map *drops,
			struct bpf_map *state, struct bpf_map *followed, struct bpf_map *follow_any)
{
	int err = bpf_map__reuse_fd(events, bpf_map__fd(p->sched->maps.events));

	if (!err)
		err = bpf_map__reuse_fd(drops, bpf_map__fd(p->sched->maps.drops));
	if (!err)
		err = bpf_map__reuse_fd(state, bpf_map__fd(p->sched->maps.target_state));
	if (!err)
		err = bpf_map__reuse_fd(followed, bpf_map__fd(p->sched->maps.followed));
	if (!err)
		err = bpf_map__reuse_fd(follow_any, bpf_map__fd(p->sched->maps.follow_any));
	return err;
}

/*
 * The per-thread maps of bpf/common.bpf.h, shared like the maps above: the
 * per-CPU slot of fault runs, the threads' storage, and the stack maps (one
 * rate limit per thread whichever family takes its stack, docs/ARCHITECTURE.md,
 * "Stacks"; without sharing, every object would allocate its own copy).
 */
int reuse_thread_maps(struct probes *p, struct bpf_object *obj)
{
	static const char *const names[] = { "fault_slot", "tstate", "stack_rate", "sleep_stacks" };
	int err = 0;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !err; i++) {
		struct bpf_map *m = bpf_object__find_map_by_name(obj, names[i]);
		struct bpf_map *s = bpf_object__find_map_by_name(p->sched->obj, names[i]);

		err = m && s ? bpf_map__reuse_fd(m, bpf_map__fd(s)) : -ENOENT;
	}
	return err;
}

/* ---- scanning the mappings ---- */

struct scan {
	struct probes *p;
	uint64_t deadline;           /* mono ns: no new file looked at after */
	uint64_t usdt_left_out;      /* this pass */
	uint64_t files_left_out;
	uint64_t fuse;
	uint64_t deferred;
};

/* the probes a mapped file calls for, its descriptor fd verified */
static void probe_file(struct probes *p, struct scan *sc, const struct mapping *m, int fd,
		       struct file_key *k)
{
	const char *b = base_name(m->path);
	char fpath[64];

	fd_path(fd, fpath, sizeof(fpath));
	if (usdt_file(p, k, fd, m->path))
		sc->usdt_left_out++;
	if (!p->o.no_cuda && !strncmp(b, "libcuda.so", 10))
		attach_cuda(p, fpath, m->path);
	if (p->alloc && !p->alloc_attached && !p->o.alloc_lib && is_libc(m->path))
		attach_alloc(p, fd, NULL, m->path);
}

static int scan_one(void *ctx, const struct mapping *m)
{
	struct scan *sc = ctx;
	struct probes *p = sc->p;
	struct file_key *k = file_get(&p->files, m->dev, m->ino);
	int fd;

	/* known already: no system call at all */
	if (k && k->done)
		return 0;
	if (!k) {
		sc->files_left_out++;
		return 0;
	}
	if (mono_ns() >= sc->deadline) {
		sc->deferred++;
		return 0;
	}
	if (on_fuse(p, m->dev)) {
		sc->fuse++;
		k->done = 1;
		return 0;
	}
	fd = open_mapped(p, m);
	if (fd < 0) {
		/*
		 * Gone (unmapped since the line was read), or not the file the
		 * line names (renamed, replaced): a few more tries, then never.
		 */
		if (++k->tries >= 3 || fd == -EISDIR)
			k->done = 1;
		return 0;
	}
	k->done = 1;
	probe_file(p, sc, m, fd, k);
	close(fd);
	return 0;
}

/* one pass over the maps, looking at new files until deadline */
static int scan(struct probes *p, uint64_t deadline)
{
	struct scan sc = { .p = p, .deadline = deadline };
	uint64_t t0 = mono_ns(), dt;
	int n;

	/* the FUSE mounts are read again, when a new file calls for it */
	p->fuse_read = false;
	n = for_each_mapping(p->o.pid, scan_one, &sc);
	dt = mono_ns() - t0;
	if (__atomic_add_fetch(&n_scans, 1, __ATOMIC_RELAXED) > 1 && dt > max_scan_ns)
		__atomic_store_n(&max_scan_ns, dt, __ATOMIC_RELAXED);
	__atomic_store_n(&last_scan_ns, dt, __ATOMIC_RELAXED);
	__atomic_add_fetch(&n_deferred, sc.deferred, __ATOMIC_RELAXED);
	if (sc.usdt_left_out) {
		p->usdt_left_out += sc.usdt_left_out;
		add_status(p, "usdt:stepblame:step", false, false,
			   "%llu more mapped files carry the step note (%llu in all so far): "
			   "at most %d get probes, the first ones mapped",
			   (unsigned long long)sc.usdt_left_out,
			   (unsigned long long)p->usdt_left_out, USDT_MAX);
	}
	p->files_left_out = sc.files_left_out;
	if (sc.files_left_out && !p->files_full_said) {
		p->files_full_said = true;
		add_status(p, "mapped-files", false, false,
			   "the target maps more than %d files: %llu mappings of further ones were "
			   "not looked at", FILES_MAX, (unsigned long long)sc.files_left_out);
	}
	if (sc.fuse) {
		p->fuse_skipped += sc.fuse;
		if (!p->fuse_said) {
			p->fuse_said = true;
			add_status(p, "mapped-files", false, false,
				   "%llu mapped files on FUSE mounts not looked at (their "
				   "server, maybe the target, could keep the agent waiting): "
				   "no probes in them",
				   (unsigned long long)sc.fuse);
		}
	}
	return n;
}

static bool target_stopped_now(const struct probes *p);

int probes_rescan_now(struct probes *p)
{
	p->next_scan = 0;
	return probes_rescan(p);
}

bool probes_rescan_due(const struct probes *p)
{
	return mono_ns() >= p->next_scan;
}

int probes_rescan(struct probes *p)
{
	uint64_t now = mono_ns();
	int n;

	/* a program that now runs as another user is not looked at */
	if (now < p->next_scan || target_stopped_now(p))
		return 0;
	n = scan(p, now + RESCAN_BUDGET_NS);
	p->next_scan = now + (mono_ns() - now) * RESCAN_SPACING;
	return n;
}

/* ---- the target's credentials ---- */

/*
 * uid, gid, suid, sgid, euid, egid, fsuid, fsgid (struct cred's order) and
 * the permitted capabilities of pid, from /proc/PID/status (which lists
 * real, effective, saved, filesystem); false if they cannot be read.
 */
/* 0, -ENOENT for a process gone (its status no longer readable), -EPERM for one not understood */
static int read_creds(pid_t pid, uint32_t ids[8], uint64_t *cap)
{
	char path[64], buf[4096];
	unsigned long u[4], g[4];
	unsigned long long c;
	const char *l;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	n = read_small_file(path, buf, sizeof(buf));
	if (n == -ENOENT || n == -ESRCH)
		return -ENOENT;
	if (n <= 0)
		return -EPERM;
	if (!(l = strstr(buf, "\nUid:")) ||
	    sscanf(l + 5, "%lu %lu %lu %lu", &u[0], &u[1], &u[2], &u[3]) != 4 ||
	    !(l = strstr(buf, "\nGid:")) ||
	    sscanf(l + 5, "%lu %lu %lu %lu", &g[0], &g[1], &g[2], &g[3]) != 4 ||
	    !(l = strstr(buf, "\nCapPrm:")) || sscanf(l + 8, "%llx", &c) != 1)
		return -EPERM;
	ids[0] = u[0], ids[1] = g[0], ids[2] = u[2], ids[3] = g[2];
	ids[4] = u[1], ids[5] = g[1], ids[6] = u[3], ids[7] = g[3];
	*cap = c;
	return 0;
}

static bool read_state(const struct probes *p, struct target_state_v *v)
{
	__u32 zero = 0;

	return p->sched && bpf_map__value_size(p->sched->maps.target_state) == sizeof(*v) &&
	       !bpf_map_lookup_elem(bpf_map__fd(p->sched->maps.target_state), &zero, v);
}

static void write_state(const struct probes *p, const struct target_state_v *v)
{
	__u32 zero = 0;

	bpf_map_update_elem(bpf_map__fd(p->sched->maps.target_state), &zero, v, BPF_ANY);
}

static bool target_stopped_now(const struct probes *p)
{
	struct target_state_v v;

	return read_state(p, &v) && v.stopped;
}

/*
 * The credentials were read before the probes were in: a change meanwhile
 * (an exec of a setuid program while we loaded) was seen by no probe. Said
 * to the kernel side as if a probe had seen it.
 */
static void check_creds_again(struct probes *p)
{
	struct target_state_v v;
	uint32_t ids[8];
	uint64_t cap;

	if (!p->creds_known || read_creds(p->o.pid, ids, &cap) ||
	    (!memcmp(ids, p->ids, sizeof(ids)) && !(cap & ~p->cap_prm)) || !read_state(p, &v) ||
	    v.stopped)
		return;
	memset(&v, 0, sizeof(v));
	v.stopped = 1;
	v.tid = p->o.pid;
	v.how = 0;
	memcpy(v.ids, ids, sizeof(ids));
	v.cap_prm = cap;
	v.stop_ns = mono_ns();
	write_state(p, &v);
}

/* the programs still attached return at their filter from here on */
static void stop_for_close(struct probes *p)
{
	struct target_state_v v;

	if (!read_state(p, &v) || v.stopped)
		return;
	v.stopped = 1;
	write_state(p, &v);
}

int probes_follow(struct probes *p, pid_t pid, pid_t ppid)
{
	struct followed_v f = { .parent = (__u32)ppid };
	uint32_t ids[8];
	uint64_t cap, one = 1;
	__u32 key = (__u32)pid, zero = 0;
	int err;

	if (p->o.no_children)
		return -ENOENT;
	/* a descendant with other credentials than the target's is not followed (SECURITY.md) */
	if (!p->creds_known)
		return -EPERM;
	/* one that exited since it was seen is no other credentials' */
	if ((err = read_creds(pid, ids, &cap)))
		return err;
	if (memcmp(ids, p->ids, sizeof(ids)) || (cap & ~p->cap_prm))
		return -EPERM;
	if (bpf_map_update_elem(bpf_map__fd(p->sched->maps.followed), &key, &f, BPF_NOEXIST))
		return errno == EEXIST ? 0 : -errno;
	bpf_map_update_elem(bpf_map__fd(p->sched->maps.follow_any), &zero, &one, BPF_ANY);
	return 0;
}

bool probes_followed(const struct probes *p, pid_t pid, pid_t *parent)
{
	struct followed_v f;
	__u32 key = (__u32)pid;

	if (pid <= 0 || bpf_map_lookup_elem(bpf_map__fd(p->sched->maps.followed), &key, &f))
		return false;
	if (parent)
		*parent = (pid_t)f.parent;
	return true;
}

bool probes_stopped(const struct probes *p, struct probes_stop *s)
{
	struct target_state_v v;

	if (!read_state(p, &v) || !v.stopped || !v.stop_ns)
		return false;
	memset(s, 0, sizeof(*s));
	s->ns = v.stop_ns;
	s->tid = v.tid;
	s->at_exec = v.how == SB_STOP_EXEC;
	memcpy(s->ids_before, p->ids, sizeof(p->ids));
	memcpy(s->ids_after, v.ids, sizeof(v.ids));
	s->cap_before = p->cap_prm;
	s->cap_after = v.cap_prm;
	return true;
}

struct probes *probes_open(const struct probe_opts *o, char *err, size_t errlen)
{
	struct probes *p;
	struct btf *vmlinux;
	int e;

	if (probes_check_privileges(o->pid, err, errlen))
		return NULL;
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		snprintf(err, errlen, "this kernel has no BTF (/sys/kernel/btf/vmlinux): "
			 "stepblame needs CONFIG_DEBUG_INFO_BTF=y");
		return NULL;
	}
	verbose_libbpf = o->verbose;
	libbpf_set_print(libbpf_print);

	p = calloc(1, sizeof(*p));
	if (!p) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	p->o = *o;
	p->alloc_fd = -1;
	/* before anything is loaded: the credentials the target is recorded under */
	p->creds_known = !read_creds(o->pid, p->ids, &p->cap_prm);
	p->ncpus = libbpf_num_possible_cpus();
	if (p->ncpus <= 0)
		p->ncpus = 1;
	vmlinux = btf__load_vmlinux_btf();
	if (!vmlinux)
		vmlinux = NULL;

	/*
	 * tp_btf first, folding short trips where task storage takes them (5.11);
	 * raw_tp where tracing programs do not load
	 */
	p->fold_ns = o->sched_fold_ns == PROBE_FOLD_OFF ? 0 :
		     o->sched_fold_ns ? o->sched_fold_ns : PROBE_FOLD_DEFAULT_NS;
	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) <= 0)
		p->fold_ns = 0;
	e = open_sched(p, true, vmlinux);
	p->sched_variant = "tp_btf";
	if (e && p->fold_ns) {
		p->fold_ns = 0;
		e = open_sched(p, true, vmlinux);
	}
	if (e) {
		e = open_sched(p, false, vmlinux);
		p->sched_variant = "raw_tp";
	}
	if (e) {
		snprintf(err, errlen, "cannot load the scheduler probes: %s%s", strerror(-e),
			 e == -EPERM ? " (not allowed: need root or CAP_BPF+CAP_PERFMON)" : "");
		goto fail;
	}
	fill_cpu_nodes(p);
	e = attach_sched(p);
	if (e) {
		snprintf(err, errlen, "cannot attach sched_switch (%s): %s", p->sched_variant,
			 strerror(-e));
		goto fail;
	}
	if (o->on_ring)
		o->on_ring(o->on_ring_ctx, bpf_map__fd(p->sched->maps.events));
	open_mem(p, vmlinux);
	open_sample(p);
	btf__free(vmlinux);
	vmlinux = NULL;

	e = open_marks(p);
	if (e) {
		snprintf(err, errlen, "cannot load the step-mark probes: %s", strerror(-e));
		goto fail;
	}
	if (!o->no_alloc) {
		e = open_alloc(p);
		if (e) {
			add_status(p, "alloc", false, false, "load failed: %s", strerror(-e));
		} else if (o->alloc_lib) {
			if (access(o->alloc_lib, R_OK)) {
				snprintf(err, errlen, "--alloc-lib %s: %s", o->alloc_lib, strerror(errno));
				goto fail;
			}
			attach_alloc(p, -1, o->alloc_lib, o->alloc_lib);
			if (!p->alloc_attached) {
				snprintf(err, errlen, "--alloc-lib %s: none of malloc, free, ... found in it",
					 o->alloc_lib);
				goto fail;
			}
		}
	}
	if (o->step_uprobe) {
		attach_step_uprobe(p);
		if (!p->step_uprobe_attached) {
			snprintf(err, errlen, "--step-uprobe %s: %s", o->step_uprobe,
				 p->st[p->nst - 1].detail);
			goto fail;
		}
	}
	e = scan(p, mono_ns() + FIRST_SCAN_BUDGET_NS);
	p->next_scan = mono_ns();
	if (e < 0) {
		snprintf(err, errlen, "cannot read the mappings of PID %d: %s", (int)o->pid,
			 strerror(-e));
		goto fail;
	}
	if (!o->no_alloc && p->alloc && !p->alloc_attached && !o->alloc_lib)
		add_status(p, "alloc", false, false, "the target maps no libc (static binary?): "
			   "use --alloc-lib");
	check_creds_again(p);
	return p;
fail:
	btf__free(vmlinux);
	probes_close(p);
	return NULL;
}

int probes_ring_fd(const struct probes *p)
{
	return bpf_map__fd(p->sched->maps.events);
}

int probes_status(const struct probes *p, const struct probe_status **out)
{
	*out = p->st;
	return p->nst;
}

const char *probes_sched_variant(const struct probes *p)
{
	return p->sched_variant;
}

void probes_drops(const struct probes *p, __u64 ring[SB_EV_KERNEL_MAX + 1], __u64 *mapfull)
{
	int fd = bpf_map__fd(p->sched->maps.drops);
	uint64_t vals[p->ncpus];

	for (__u32 k = 0; k <= SB_EV_KERNEL_MAX + 1; k++) {
		uint64_t sum = 0;

		if (bpf_map_lookup_elem(fd, &k, vals) == 0)
			for (int c = 0; c < p->ncpus; c++)
				sum += vals[c];
		if (k <= SB_EV_KERNEL_MAX)
			ring[k] = sum;
		else
			*mapfull = sum;
	}
}

void probes_close(struct probes *p)
{
	int behind;

	if (!p)
		return;
	stop_for_close(p);
	behind = mem_release_behind(p);
	for (int i = p->nlinks - 1; i >= 0; i--)
		bpf_link__destroy(p->links[i]);
	bpf_link__destroy(p->flush_sched);
	detach_alloc(p);
	reap_detach(p);
	marks_bpf__destroy(p->marks);
	alloc_bpf__destroy(p->alloc);
	mem_bpf__destroy(p->mem);
	sample_bpf__destroy(p->sample);
	sched_bpf__destroy(p->sched);
	if (p->alloc_fd >= 0)
		close(p->alloc_fd);
	free(p->kids);
	free(p->files.t);
	free(p->fuse_devs);
	free(p);
	if (behind >= 0)
		close(behind);
}
