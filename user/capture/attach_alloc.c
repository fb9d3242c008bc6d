// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The allocator family: entry and return probes on malloc, free and the
 * like in the target's libc (or --alloc-lib), as uprobe_multi links where
 * the kernel makes them, else perf-event uprobes; the overhead guard's
 * switch that takes them away and puts them back; the per-thread totals of
 * fast calls and the flush of idle bursts.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "capture/probes_internal.h"
#include "base/util.h"
#include "alloc.skel.h"
#include "marks.skel.h"

/* ---- allocator ---- */

static const struct {
	const char *sym;
	const char *prog;
} alloc_syms[] = {
	{ "malloc", "malloc_enter" },
	{ "calloc", "calloc_enter" },
	{ "realloc", "realloc_enter" },
	{ "free", "free_enter" },
	{ "posix_memalign", "posix_memalign_enter" },
	{ "aligned_alloc", "aligned_alloc_enter" },
	{ "memalign", "memalign_enter" },
};

_Static_assert(ARRAY_SIZE(alloc_syms) == ALLOC_NSYMS, "ALLOC_NSYMS is the size of alloc_syms");
_Static_assert(ALLOC_NSYMS <= ELF_FUNCS_MAX, "elf_func_offsets takes them all");

/*
 * uprobe_multi links (Linux 6.6). Taking one away removes its breakpoints at
 * once and then waits out one grace period; a perf-event uprobe waits out its
 * own under a global mutex, one after the other: 1.3 s for the allocator's 14
 * links on a 2-vCPU VM, with breakpoints still in for most of it. The
 * overhead guard takes the allocator probes away and puts them back every
 * second or so. The uapi headers of older systems lack the attribute.
 */
#define SB_TRACE_UPROBE_MULTI 48     /* enum bpf_attach_type */
#define SB_F_UPROBE_MULTI_RETURN 1u

struct sb_uprobe_multi_attr {        /* union bpf_attr, link_create.uprobe_multi */
	__u32 prog_fd, target_fd, attach_type, flags;
	__u64 path, offsets, ref_ctr_offsets, cookies;
	__u32 cnt, uflags, pid;
};

/*
 * Whether the allocator probes are attached, said to the step marks too:
 * while they are, a mark carries its thread's count of fast calls
 * (bpf/marks.bpf.c).
 */
static void alloc_on_set(struct probes *p, bool on)
{
	p->alloc_on = on;
	if (p->marks)
		p->marks->bss->alloc_counting = on;
}

/*
 * uprobes (ret: uretprobes) at the cnt offsets offs in the file at path for
 * process pid, with cookies (NULL: all 0), as one link: fd or -errno
 */
int uprobe_multi_link(int prog_fd, const char *path, const uint64_t *offs, const uint64_t *cookies,
		      unsigned cnt, bool ret, pid_t pid)
{
	struct sb_uprobe_multi_attr a;
	int fd;

	/* padding too: the kernel refuses an attribute with stray bytes past its fields */
	memset(&a, 0, sizeof(a));
	a.prog_fd = prog_fd;
	a.attach_type = SB_TRACE_UPROBE_MULTI;
	a.path = (uintptr_t)path;
	a.offsets = (uintptr_t)offs;
	a.cookies = (uintptr_t)cookies;
	a.cnt = cnt;
	a.uflags = ret ? SB_F_UPROBE_MULTI_RETURN : 0;
	a.pid = (__u32)pid;
	fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));

	return fd < 0 ? -errno : fd;
}

/*
 * Does this kernel make uprobe_multi links? A directory for a file tells
 * without attaching anything: EBADF where it does, EINVAL where the attach
 * type is unknown.
 */
static bool uprobe_multi_works(struct probes *p)
{
	uint64_t off = 0;
	int fd = uprobe_multi_link(bpf_program__fd(p->alloc->progs.alloc_enter), "/", &off, NULL, 1,
				   false, 0);

	if (fd >= 0)
		close(fd);
	return fd == -EBADF;
}

static void alink_destroy(struct alink *a)
{
	if (a->l)
		bpf_link__destroy(a->l);
	else if (a->fd >= 0)
		close(a->fd);
	a->l = NULL;
	a->fd = -1;
}

/*
 * perf-event uprobes (no uprobe_multi links): entry (or return) probe of the
 * allocator's program prog at alloc_syms[i]
 */
static int alloc_link(struct probes *p, struct bpf_program *prog, size_t i, const char *path,
		      bool ret, pid_t pid, struct alink *out)
{
	LIBBPF_OPTS(bpf_uprobe_opts, o, .func_name = alloc_syms[i].sym, .retprobe = ret);

	out->l = NULL;
	out->fd = -1;
	/*
	 * By its offset where our own parse found it: libbpf then opens nothing
	 * (the overhead guard attaches again at any time, without our lease)
	 */
	if (p->alloc_off[i]) {
		o.func_name = NULL;
		out->l = bpf_program__attach_uprobe_opts(prog, pid, path, p->alloc_off[i], &o);
	} else {
		out->l = bpf_program__attach_uprobe_opts(prog, pid, path, 0, &o);
	}
	return out->l ? 0 : errno ? -errno : -EINVAL;
}

/*
 * Entry and return probe of alloc_syms[i] in the library at path, kept in
 * alloc_links; 0 or -errno, with *second telling that the return probe
 * attached and the entry probe did not.
 *
 * The return probe goes first. An entry without its return pushes a frame
 * that is never popped: a thread that called in the moment between the two
 * would have frames piled up past MAX_DEPTH (bpf/alloc.bpf.c), and every
 * later call of it ignored. A return without an entry finds no frame and
 * is ignored.
 */
static int attach_alloc_sym_pid(struct probes *p, size_t i, const char *path, pid_t pid,
				bool *second, struct alink *links, int *nlinks)
{
	struct bpf_object *obj = p->alloc->obj;
	struct bpf_program *prog = bpf_object__find_program_by_name(obj, alloc_syms[i].prog);
	struct alink le, lr;
	int err;

	*second = false;
	err = alloc_link(p, p->alloc->progs.alloc_return, i, path, true, pid, &lr);
	if (err)
		return err;
	err = alloc_link(p, prog, i, path, false, pid, &le);
	if (err) {
		alink_destroy(&lr);
		*second = true;
		return err;
	}
	/*
	 * detach_alloc starts with the entry (it goes from the end); its
	 * threads may finish in any order, which is why re-attaching empties
	 * the frames first
	 */
	links[(*nlinks)++] = lr;
	links[(*nlinks)++] = le;
	return 0;
}

/*
 * uprobe_multi: the functions of mask in one link for their returns, then
 * one for their entries (alloc_enter; the cookie is the function, as
 * alloc_syms[] is in enum sb_alloc_fn's order), kept in links; 0 or -errno,
 * with *second telling that the return link attached and the entry link did not.
 */
static int attach_multi_pid(struct probes *p, uint32_t mask, const char *path, pid_t pid,
			    bool *second, struct alink *links, int *nlinks)
{
	uint64_t offs[ALLOC_NSYMS], cookies[ALLOC_NSYMS];
	struct alink le = { NULL, -1 }, lr = { NULL, -1 };
	unsigned n = 0;

	*second = false;
	for (size_t i = 0; i < ALLOC_NSYMS; i++)
		if ((mask & (1u << i)) && p->alloc_off[i]) {
			offs[n] = p->alloc_off[i];
			cookies[n++] = i;
		}
	if (!n)
		return -ENOENT;
	lr.fd = uprobe_multi_link(bpf_program__fd(p->alloc->progs.alloc_return), path, offs, NULL,
				  n, true, pid);
	if (lr.fd < 0)
		return lr.fd;
	le.fd = uprobe_multi_link(bpf_program__fd(p->alloc->progs.alloc_enter), path, offs, cookies,
				  n, false, pid);
	if (le.fd < 0) {
		int err = le.fd;

		close(lr.fd);
		*second = true;
		return err;
	}
	links[(*nlinks)++] = lr;
	links[(*nlinks)++] = le;
	return 0;
}

_Static_assert(SB_FN_MALLOC == 0 && SB_FN_CALLOC == 1 && SB_FN_REALLOC == 2 && SB_FN_FREE == 3 &&
		       SB_FN_POSIX_MEMALIGN == 4 && SB_FN_ALIGNED_ALLOC == 5 && SB_FN_MEMALIGN == 6,
	       "alloc_syms[i] is function i of enum sb_alloc_fn (the cookie of attach_multi_pid)");

/*
 * The functions of mask (those that attached the first time) in process
 * pid, links kept in links: how many are probed now, or -errno if none.
 */
static int attach_pid(struct probes *p, uint32_t mask, pid_t pid, struct alink *links, int *nlinks)
{
	int ok = 0, err = -ENOENT;
	bool second;

	if (p->alloc_multi) {
		err = attach_multi_pid(p, mask, p->alloc_path, pid, &second, links, nlinks);
		return err ? err : __builtin_popcount(mask);
	}
	for (size_t i = 0; i < ARRAY_SIZE(alloc_syms); i++) {
		int e;

		if (!(mask & (1u << i)))
			continue;
		e = attach_alloc_sym_pid(p, i, p->alloc_path, pid, &second, links, nlinks);
		if (e)
			err = e;
		else
			ok++;
	}
	return ok ? ok : err;
}

static int kid_attach(struct probes *p, struct alloc_kid *k)
{
	return attach_pid(p, p->alloc_mask, k->pid, k->links, &k->nlinks);
}

/* destroy the links of a (ended by one with neither), then a itself */
static void *destroy_links(void *arg)
{
	struct alink *a = arg;

	for (int i = 0; a[i].l || a[i].fd >= 0; i++)
		alink_destroy(&a[i]);
	free(a);
	return NULL;
}

/* run fn(arg) on a detach thread (small stack: it only waits in the kernel); -1 if none */
static int spawn_detach(struct probes *p, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	bool have_attr = !pthread_attr_init(&attr);
	int err = -1;

	if (have_attr)
		pthread_attr_setstacksize(&attr, 256 << 10);
	if (p->ndetach < (int)ARRAY_SIZE(p->detach_threads))
		err = pthread_create(&p->detach_threads[p->ndetach], have_attr ? &attr : NULL, fn, arg);
	if (have_attr)
		pthread_attr_destroy(&attr);
	if (err)
		return -1;
	p->ndetach++;
	return 0;
}

/*
 * Take the links of kids[from, to) away. A link's breakpoints go when its
 * destruction starts, which then waits out a grace period: one after the
 * other, a child's probes would go on firing for that long per link before
 * it. So each link gets a thread of its own while there are threads to
 * spare, the rest shared out among them (else here, the slow way).
 */
static void kids_detach(struct probes *p, int from, int to)
{
	int n = 0, nth, free_th = (int)ARRAY_SIZE(p->detach_threads) - p->ndetach;
	struct alink *all;

	for (int k = from; k < to; k++)
		n += p->kids[k].nlinks;
	if (!n)
		return;
	all = malloc((size_t)n * sizeof(*all));
	if (all) {
		n = 0;
		for (int k = from; k < to; k++) {
			memcpy(all + n, p->kids[k].links, (size_t)p->kids[k].nlinks * sizeof(*all));
			n += p->kids[k].nlinks;
			p->kids[k].nlinks = 0;
		}
		nth = n < free_th ? n : free_th;
		for (int t = 0; t < nth; t++) {
			/* links t, t + nth, ...: every thread starts with a breakpoint-bearing link */
			struct alink *mine = calloc((size_t)(n / nth + 2), sizeof(*mine));
			int m = 0;

			if (!mine)
				break;
			for (int i = t; i < n; i += nth)
				mine[m++] = all[i];
			mine[m].fd = -1;
			if (spawn_detach(p, destroy_links, mine)) {
				free(mine);
				break;
			}
			for (int i = t; i < n; i += nth)
				all[i].l = NULL, all[i].fd = -1;
		}
		for (int i = 0; i < n; i++)
			alink_destroy(&all[i]);
		free(all);
		return;
	}
	for (int k = from; k < to; k++)
		while (p->kids[k].nlinks > 0)
			alink_destroy(&p->kids[k].links[--p->kids[k].nlinks]);
}

int probes_alloc_kid(struct probes *p, pid_t pid)
{
	struct alloc_kid *k;

	if (!p->alloc || pid == p->o.pid)
		return -ENOENT;
	for (int i = 0; i < p->nkids; i++)
		if (p->kids[i].pid == pid)
			return 0;
	if (p->nkids == ALLOC_KIDS_MAX) {
		p->kids_left_out++;
		return -ENOSPC;
	}
	if (!p->kids && !(p->kids = calloc(ALLOC_KIDS_MAX, sizeof(*p->kids))))
		return -ENOMEM;
	k = &p->kids[p->nkids++];
	memset(k, 0, sizeof(*k));
	k->pid = pid;
	/*
	 * not attached now (the guard has them off, or their library is not
	 * found yet): they come with the target's
	 */
	return p->alloc_on ? kid_attach(p, k) : 0;
}

void probes_alloc_kid_gone(struct probes *p, pid_t pid)
{
	for (int i = 0; i < p->nkids; i++)
		if (p->kids[i].pid == pid) {
			kids_detach(p, i, i + 1);
			p->kids[i] = p->kids[--p->nkids];
			return;
		}
}

int probes_alloc_kids(const struct probes *p, uint64_t *left_out)
{
	if (left_out)
		*left_out = p->kids_left_out;
	return p->nkids;
}

/* the status line of alloc_syms[i] in the library shown as shown, attached or err */
static void alloc_sym_status(struct probes *p, size_t i, const char *shown, int err, bool second)
{
	char name[48];

	snprintf(name, sizeof(name), "alloc:%s", alloc_syms[i].sym);
	if (err && second)
		add_status(p, name, false, false, "uretprobe attached, uprobe failed: %s",
			   strerror(-err));
	else if (err == -ENOENT || err == -ESRCH)
		add_status(p, name, false, false, "%s has no %s", shown, alloc_syms[i].sym);
	else if (err)
		add_status(p, name, false, false, "uprobe on %s in %s: %s",
			   alloc_syms[i].sym, shown, uprobe_why(-err));
	else
		add_status(p, name, true, false, "uprobe %s", shown);
}

/*
 * The allocator probes on the library open on fd (verified: the file the
 * target maps), shown as `shown`; a copy of fd is kept open as long as the
 * probes may be attached again (the overhead guard), and they are attached
 * through its /proc/self/fd path. fd < 0: path is the user's --alloc-lib.
 */
void attach_alloc(struct probes *p, int fd, const char *path, const char *shown)
{
	char fpath[64];
	const char *open_path = path;
	int ok = 0, own = -1;
	/*
	 * The safe start (the guard attaches them for its windows) only needs to
	 * know that they attach: on the agent itself, whose calls the programs'
	 * filter turns away (no breakpoint at all where it maps another C library
	 * or none, as the static build). On the target, that check was a few ms
	 * of every allocator call trapped, in no window the guard measured
	 * (docs/ARCHITECTURE.md, "The tracer's budget").
	 */
	pid_t pid = p->o.alloc_start_off ? getpid() : p->o.pid;

	if (fd >= 0) {
		own = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (own < 0) {
			add_status(p, "alloc", false, false, "cannot keep %s open: %s", shown,
				   strerror(errno));
			return;
		}
		fd_path(own, fpath, sizeof(fpath));
		open_path = fpath;
	}
	{
		int efd = own >= 0 ? own : open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

		memset(p->alloc_off, 0, sizeof(p->alloc_off));
		if (efd >= 0) {
			const char *names[ALLOC_NSYMS];

			for (size_t i = 0; i < ALLOC_NSYMS; i++)
				names[i] = alloc_syms[i].sym;
			elf_func_offsets(efd, names, ALLOC_NSYMS, p->alloc_off);
			if (efd != own)
				close(efd);
		}
	}
	if (p->alloc_multi) {
		/* one pair of links for all: each function's status is theirs */
		uint32_t found = 0;
		bool second = false;
		int err;

		for (size_t i = 0; i < ALLOC_NSYMS; i++)
			if (p->alloc_off[i])
				found |= 1u << i;
		err = attach_multi_pid(p, found, open_path, pid, &second, p->alloc_links,
				       &p->nalloc_links);
		for (size_t i = 0; i < ALLOC_NSYMS; i++) {
			int e = found & (1u << i) ? err : -ENOENT;

			alloc_sym_status(p, i, shown, e, second);
			if (!e) {
				p->alloc_mask |= 1u << i;
				ok++;
			}
		}
	} else {
		for (size_t i = 0; i < ARRAY_SIZE(alloc_syms); i++) {
			bool second;
			int err = attach_alloc_sym_pid(p, i, open_path, pid, &second,
						       p->alloc_links, &p->nalloc_links);

			alloc_sym_status(p, i, shown, err, second);
			if (err)
				continue;
			p->alloc_mask |= 1u << i;
			ok++;
		}
	}
	if (ok) {
		struct stat st;

		snprintf(p->alloc_path, sizeof(p->alloc_path), "%s", open_path);
		snprintf(p->alloc_shown, sizeof(p->alloc_shown), "%s", shown);
		if (own >= 0 ? !fstat(own, &st) : !stat(path, &st)) {
			p->alloc_dev = st.st_dev;
			p->alloc_ino = st.st_ino;
		}
		/* kept open for the path, not for the lease: the target's writers need not wait */
		if (own >= 0)
			drop_lease(own);
		p->alloc_fd = own;
		p->alloc_attached = true;
		alloc_on_set(p, true);
		/* the guard attaches them for its first window (capture/guard.h) */
		if (p->o.alloc_start_off)
			detach_alloc(p);
		else
			for (int k = 0; k < p->nkids; k++)
				kid_attach(p, &p->kids[k]);
	} else if (own >= 0) {
		close(own);
	}
}

/*
 * Destroying a link waits for the kernel's grace periods (no handler may
 * still be running): tens of ms a link on a 2-vCPU VM, more for perf-event
 * uprobes. On a thread each, they wait together and the agent not at all:
 * the threads are reaped before the next attach (or at close), normally long
 * done. The breakpoints go at the start (a uprobe_multi link's) or one link
 * after the other (perf-event uprobes, see above).
 */
void destroy_async(struct probes *p, const struct alink *a)
{
	struct alink *copy = calloc(2, sizeof(*copy));

	if (copy) {
		copy[0] = *a;
		copy[1].fd = -1;
		if (!spawn_detach(p, destroy_links, copy))
			return;
	}
	free(copy);
	if (a->l)
		bpf_link__destroy(a->l); /* no thread: the slow way */
	else if (a->fd >= 0)
		close(a->fd);
}

void detach_alloc(struct probes *p)
{
	while (p->nalloc_links > 0)
		destroy_async(p, &p->alloc_links[--p->nalloc_links]);
	kids_detach(p, 0, p->nkids);
	alloc_on_set(p, false);
}

/* wait for the links being destroyed */
void reap_detach(struct probes *p)
{
	while (p->ndetach > 0)
		pthread_join(p->detach_threads[--p->ndetach], NULL);
}

/* empty a hash map (nothing else writes it meanwhile) */
static void clear_map(int fd)
{
	__u32 key;

	/* every pass removes one entry or ends: no endless loop on a failing delete */
	while (bpf_map_get_next_key(fd, NULL, &key) == 0)
		if (bpf_map_delete_elem(fd, &key))
			break;
}

bool probes_has_alloc(const struct probes *p)
{
	return p->alloc && p->alloc_attached;
}

bool probes_alloc_lib(const struct probes *p, uint64_t *dev, uint64_t *ino, const char **shown)
{
	if (!probes_has_alloc(p) || !p->alloc_ino)
		return false;
	*dev = p->alloc_dev;
	*ino = p->alloc_ino;
	*shown = p->alloc_shown;
	return true;
}

int probes_alloc_attach(struct probes *p, bool on)
{
	int ok;

	if (!probes_has_alloc(p))
		return -ENOENT;
	if (on == p->alloc_on)
		return on ? p->nalloc_links / 2 : 0;
	if (!on) {
		detach_alloc(p);
		return 0;
	}
	reap_detach(p);
	/*
	 * Calls that were running when the probes went away never saw their
	 * return: their frames would pair with the returns of later calls.
	 */
	clear_map(bpf_map__fd(p->alloc->maps.alloc_frames));
	ok = attach_pid(p, p->alloc_mask, p->o.pid, p->alloc_links, &p->nalloc_links);
	alloc_on_set(p, ok > 0);
	/* the followed children's, with the target's: the guard covers them the same way */
	for (int k = 0; ok > 0 && k < p->nkids; k++)
		kid_attach(p, &p->kids[k]);
	return ok;
}

static uint64_t or_default(uint64_t v, uint64_t dflt)
{
	return v ? v : dflt;
}

/*
 * with_flush: load flush_burst too, the program the agent runs to end idle
 * bursts (BPF_PROG_TYPE_SYSCALL, Linux 5.14+); multi: the uprobe programs
 * for uprobe_multi links
 */
static int open_alloc_once(struct probes *p, bool with_flush, bool multi)
{
	struct alloc_bpf *a = alloc_bpf__open();
	struct bpf_program *prog;
	int err;

	if (!a)
		return -errno;
	SET_TARGET(p, a);
	a->rodata->alloc_min_ns = p->o.alloc_min_ns;
	a->rodata->stacks_on = !p->o.no_stacks;
	a->rodata->stack_copy_on = !p->o.no_stacks && !p->o.fp_stacks;
	a->rodata->burst_gap_ns = or_default(p->o.burst_gap_ns, BURST_GAP_NS);
	a->rodata->burst_max_ns = or_default(p->o.burst_max_ns, BURST_MAX_NS);
	a->rodata->burst_min_ns = or_default(p->o.burst_min_ns, BURST_MIN_NS);
	a->rodata->burst_min_calls = or_default(p->o.burst_min_calls, BURST_MIN_CALLS);
	bpf_program__set_autoload(a->progs.flush_burst, with_flush);
	bpf_object__for_each_program(prog, a->obj) {
		bool entry = strstr(bpf_program__name(prog), "_enter") != NULL;

		if (prog == a->progs.flush_burst)
			continue;
		/* uprobe_multi: alloc_enter for every entry; else one program each */
		if (entry)
			bpf_program__set_autoload(prog, multi == (prog == a->progs.alloc_enter));
		if (multi)
			bpf_program__set_expected_attach_type(prog, SB_TRACE_UPROBE_MULTI);
	}
	err = reuse_shared(p, a->maps.events, a->maps.drops, a->maps.target_state,
			   a->maps.followed, a->maps.follow_any);
	if (!err) /* the fault run slot (bpf/common.bpf.h) */
		err = reuse_thread_maps(p, a->obj);
	/* the step marks read the totals (bpf/alloc_totals.bpf.h): they made the map */
	if (!err && p->marks)
		err = bpf_map__reuse_fd(a->maps.alloc_totals, bpf_map__fd(p->marks->maps.alloc_totals));
	if (!err)
		err = alloc_bpf__load(a);
	if (err) {
		alloc_bpf__destroy(a);
		return err;
	}
	p->alloc = a;
	p->alloc_flush = with_flush;
	p->alloc_multi = multi;
	return 0;
}

static int open_alloc_flush(struct probes *p, bool multi)
{
	int err = open_alloc_once(p, true, multi);

	return err ? open_alloc_once(p, false, multi) : 0;
}

int open_alloc(struct probes *p)
{
	/* uprobe_multi links where the kernel makes them, else perf-event uprobes */
	int err = p->o.perf_uprobes ? -EOPNOTSUPP : open_alloc_flush(p, true);

	if (!err && !uprobe_multi_works(p)) {
		alloc_bpf__destroy(p->alloc);
		p->alloc = NULL;
		err = -EOPNOTSUPP;
	}
	if (err)
		err = open_alloc_flush(p, false);
	if (!err && !p->alloc_flush)
		add_status(p, "alloc:flush", false, false, "this kernel cannot run the burst "
			   "flush (BPF syscall programs): a burst of fast allocator calls is "
			   "recorded only when its thread calls the allocator again");
	return err;
}

/* struct alloc_totals of bpf/alloc.bpf.c */
struct alloc_totals_v {
	uint64_t calls[SB_FN_MAX];
	uint64_t ns[SB_FN_MAX];
	struct {
		uint64_t first, last, sum_ns, slow_ns, bytes, gap_min;
		uint32_t cpu, tgid;
		uint64_t calls;
	} b;
};

/* struct flush_args of bpf/alloc.bpf.c */
struct flush_args_v {
	uint32_t tid, pad;
	uint64_t min_idle_ns;
};

/*
 * End the thread's burst if it has been idle for longer than the gap plus
 * the longest span: no call of it can still be running then (a call that
 * long is not fast), so the kernel side never sees the burst change under it.
 */
static void flush_burst_of(const struct probes *p, uint32_t tid, const struct alloc_totals_v *v,
			   uint64_t min_idle_ns)
{
	struct flush_args_v a = { .tid = tid, .min_idle_ns = min_idle_ns };
	LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = &a, .ctx_size_in = sizeof(a));

	if (!p->alloc_flush || !v->b.calls)
		return;
	bpf_prog_test_run_opts(bpf_program__fd(p->alloc->progs.flush_burst), &o);
}

static void flush_idle_burst(const struct probes *p, uint32_t tid, const struct alloc_totals_v *v)
{
	flush_burst_of(p, tid, v, or_default(p->o.burst_gap_ns, BURST_GAP_NS) +
			       or_default(p->o.burst_max_ns, BURST_MAX_NS));
}

static int walk_totals(const struct probes *p,
		       void (*cb)(void *ctx, uint32_t pid, uint32_t tid, const uint64_t calls[SB_FN_MAX],
				  const uint64_t ns[SB_FN_MAX]),
		       void *ctx, bool flush)
{
	__u32 key, next;
	struct alloc_totals_v v;
	int fd, n = 0;
	__u32 *prev = NULL;

	if (!p->alloc)
		return 0;
	if (bpf_map__value_size(p->alloc->maps.alloc_totals) != sizeof(v))
		return 0; /* cannot happen: the two layouts are kept in step */
	fd = bpf_map__fd(p->alloc->maps.alloc_totals);
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &v))
			continue;
		/* the thread's process, as its burst says (0 before its first fast call: the target) */
		cb(ctx, v.b.tgid ? v.b.tgid : (uint32_t)p->o.pid, key, v.calls, v.ns);
		if (flush)
			flush_idle_burst(p, key, &v);
		n++;
	}
	return n;
}

int probes_alloc_stats(const struct probes *p,
		       void (*cb)(void *ctx, uint32_t pid, uint32_t tid, const uint64_t calls[SB_FN_MAX],
				  const uint64_t ns[SB_FN_MAX]),
		       void *ctx)
{
	return walk_totals(p, cb, ctx, true);
}

int probes_alloc_forget(const struct probes *p, const uint32_t *tids, size_t n,
			void (*cb)(void *ctx, uint32_t tid, uint64_t calls), void *ctx)
{
	struct alloc_totals_v v;
	int fd, ffd, gone = 0;

	if (!p->alloc || bpf_map__value_size(p->alloc->maps.alloc_totals) != sizeof(v))
		return 0;
	fd = bpf_map__fd(p->alloc->maps.alloc_totals);
	ffd = bpf_map__fd(p->alloc->maps.alloc_frames);
	for (size_t i = 0; i < n; i++) {
		uint32_t tid = tids[i];
		uint64_t calls = 0;

		/* its calls in progress died with it, whatever they were */
		bpf_map_delete_elem(ffd, &tid);
		if (bpf_map_lookup_elem(fd, &tid, &v))
			continue;
		/* no call of it can run any more: its burst is over however recent */
		flush_burst_of(p, tid, &v, 0);
		bpf_map_delete_elem(fd, &tid);
		for (int k = 0; k < SB_FN_MAX; k++)
			calls += v.calls[k];
		if (cb)
			cb(ctx, tid, calls);
		gone++;
	}
	return gone;
}

int probes_alloc_totals(const struct probes *p,
			void (*cb)(void *ctx, uint32_t pid, uint32_t tid, const uint64_t calls[SB_FN_MAX],
				   const uint64_t ns[SB_FN_MAX]),
			void *ctx)
{
	return walk_totals(p, cb, ctx, false);
}
