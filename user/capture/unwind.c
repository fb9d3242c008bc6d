// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Stack copies walked by call-frame information (capture/unwind.h;
 * docs/ARCHITECTURE.md, "Stacks").
 *
 * One libdwfl session per process, whose modules are the executable file
 * mappings of its /proc/PID/maps. Each file is opened as the probe loader
 * opens the target's files (open_mapped_pid: the mapped inode, never a name
 * the target controls; SECURITY.md) and read with pread (ELF_C_READ), never
 * mapped: the target may cut its file short, which in a mapping would be
 * SIGBUS. Before libdw may use a file, its call-frame information is checked
 * (capture/cficheck.h): every CFI program libdw could run in it within
 * bounds, no .eh_frame read to the end of the file. One ELF handle per file,
 * shared by the processes that map it; the call-frame information libdw
 * reads from it (.eh_frame and .eh_frame_hdr: 12 MiB for libtorch_cpu, read
 * once, by the check) stays in memory, at most UNW_CFI_BYTES in all.
 * The walk reads memory from the copy only; debuginfo files are never looked
 * for.
 */
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/elfsafe.h"
#include "base/util.h"
#include "capture/cficheck.h"
#include "capture/probes_internal.h"
#include "capture/unwind.h"

#define UNW_PROCS 16                   /* processes with a session */
#define UNW_FILES 64                   /* files open at once */
#define UNW_CFI_BYTES (256ull << 20)   /* their call-frame information, in all */
#define UNW_FILE_CFI_MAX (64ull << 20) /* a file with more (DWARF sections included) is not used */
#define UNW_BUDGET_NS 50000000ull      /* the walks' time a second: 5% of a CPU */
#define UNW_SLICE_NS 2000000ull        /* and in one read of the ring */
#define UNW_REBUILD_NS 1000000000ull   /* a session is built again at most once a second */
#define UNW_MODS_MAX 4096              /* modules of one process */
#define UNW_HELD 32                    /* threads with a copy held for their sleep */
#define UNW_REFUSED 64                 /* refused files remembered across resets */

struct ufile {
	dev_t dev;
	uint64_t ino;
	int fd;
	Elf *elf;          /* our reference; each module that uses it holds another */
	uint64_t cfi_bytes;
};

/* a file mapped executable by a process: a module of its session */
struct umod {
	struct unwinder *u;
	pid_t pid;
	unsigned long start, end, offset; /* one of its mappings, to open it by */
	dev_t dev;
	uint64_t ino;
	bool deleted;
	char *path;
};

struct uproc {
	pid_t pid;
	Dwfl *dwfl;        /* NULL: none could be built */
	uint64_t built_ns;
	uint64_t used;
	struct umod *mods;
	size_t nmods;
};

struct unwinder {
	struct probes *p;
	struct uproc procs[UNW_PROCS];
	struct ufile files[UNW_FILES];
	size_t nfiles;
	uint64_t cfi_bytes;
	bool want_reset;
	uint64_t clock;                   /* uses, for the least recently used */
	const struct sb_stack_copy *cur;  /* the copy being walked */
	uint64_t sec_start, sec_spent;    /* this second's walks */
	uint64_t slice_spent;             /* this read's (unwinder_slice) */
	struct held {
		uint32_t tid;             /* 0: free */
		uint64_t used;
		struct sb_stack_copy c;
	} *held;                          /* UNW_HELD, once the first comes */
	/*
	 * Files refused by the check, by identity: kept across resets, so that
	 * a refused file is neither checked nor counted again (a crafted one
	 * costs the check up to 0.3 s). Past UNW_REFUSED, a refused file is
	 * checked again after each reset, and counted again.
	 */
	struct file_id {
		dev_t dev;
		uint64_t ino;
	} refused[UNW_REFUSED];
	size_t nrefused;
	struct unwind_stats st;
};

/* ---- the target's files ---- */

static void refused(struct unwinder *u, const struct umod *um, const char *why)
{
	if (u->nrefused < UNW_REFUSED)
		u->refused[u->nrefused++] = (struct file_id){ um->dev, um->ino };
	if (!u->st.refused++)
		snprintf(u->st.refused_first, sizeof(u->st.refused_first), "%s: %s", um->path, why);
}

static bool was_refused(const struct unwinder *u, const struct umod *um)
{
	for (size_t i = 0; i < u->nrefused; i++)
		if (u->refused[i].dev == um->dev && u->refused[i].ino == um->ino)
			return true;
	return false;
}

static struct ufile *file_of(struct unwinder *u, const struct umod *um)
{
	struct cfi_check ck;
	struct mapping *m;
	struct ufile *f;
	uint64_t n;
	Elf *elf = NULL;
	int fd;

	for (size_t i = 0; i < u->nfiles; i++)
		if (u->files[i].dev == um->dev && u->files[i].ino == um->ino)
			return u->files[i].elf ? &u->files[i] : NULL;
	if (was_refused(u, um))
		return NULL;
	if (u->nfiles == UNW_FILES) {
		u->want_reset = true;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->start = um->start;
	m->end = um->end;
	m->offset = um->offset;
	m->dev = um->dev;
	m->ino = um->ino;
	m->deleted = um->deleted;
	snprintf(m->path, sizeof(m->path), "%s", um->path);
	fd = open_mapped_pid(u->p, um->pid, m);
	free(m);
	f = &u->files[u->nfiles++];
	*f = (struct ufile){ .dev = um->dev, .ino = um->ino, .fd = -1 };
	if (fd < 0)
		return NULL;
	/* read with pread from here on: no lease is needed, and none is held on the target's file */
	drop_lease(fd);
	if (!(elf = elf_read_fd(fd))) {
		close(fd);
		return NULL;
	}
	/* what libdw would do with the file's call-frame information is checked first (cficheck.h) */
	if (cfi_check(elf, &ck) || ck.bytes > UNW_FILE_CFI_MAX) {
		refused(u, um, ck.why ? ck.why : "call-frame and DWARF sections over 64 MiB");
		elf_end(elf);
		close(fd);
		return NULL;
	}
	n = ck.bytes;
	if (u->cfi_bytes + n > UNW_CFI_BYTES) {
		/* let everything go before the next copy's walk, not inside this one */
		u->want_reset = true;
		elf_end(elf);
		close(fd);
		u->nfiles--;
		return NULL;
	}
	f->fd = fd;
	f->elf = elf;
	f->cfi_bytes = n;
	u->cfi_bytes += n;
	return f;
}

/* libdwfl asks for a module's ELF: its file's shared handle */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
		    char **file_name, Elf **elfp)
{
	struct umod *um = *userdata;
	struct ufile *f = um ? file_of(um->u, um) : NULL;

	(void)mod;
	(void)name;
	(void)base;
	return elf_dwfl_answer(f ? f->elf : NULL, file_name, elfp);
}

static int find_no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			     Dwarf_Addr base, const char *file_name, const char *debuglink_file,
			     GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	(void)mod;
	(void)userdata;
	(void)modname;
	(void)base;
	(void)file_name;
	(void)debuglink_file;
	(void)debuglink_crc;
	*debuginfo_file_name = NULL;
	return -1;
}

static const Dwfl_Callbacks dwfl_cbs = {
	.find_elf = find_elf,
	.find_debuginfo = find_no_debuginfo,
	.section_address = dwfl_offline_section_address,
};

/* ---- the thread: registers and memory from the copy ---- */

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	struct unwinder *u = arg;

	(void)dwfl;
	if (*thread_argp)
		return 0;
	*thread_argp = u;
	return (pid_t)u->cur->st.h.tid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	(void)dwfl;
	(void)tid;
	*thread_argp = arg;
	return true;
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	const struct unwinder *u = arg;
	const struct sb_stack_copy *c = u->cur;
	uint64_t len = (uint64_t)c->pages * 4096;

	(void)dwfl;
	if (addr < c->base || addr - c->base > len || len - (addr - c->base) < sizeof(*result))
		return false;
	memcpy(result, c->data + (addr - c->base), sizeof(*result));
	return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	const struct unwinder *u = arg;
	Dwarf_Word regs[SB_STACK_REGS];

	for (int i = 0; i < SB_STACK_REGS; i++)
		regs[i] = u->cur->regs[i];
	return dwfl_thread_state_registers(thread, 0, SB_STACK_REGS, regs);
}

static const Dwfl_Thread_Callbacks thread_cbs = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

/* ---- sessions ---- */

static void proc_drop(struct uproc *pr)
{
	if (pr->dwfl)
		dwfl_end(pr->dwfl);
	for (size_t i = 0; i < pr->nmods; i++)
		free(pr->mods[i].path);
	free(pr->mods);
	*pr = (struct uproc){ 0 };
}

/* every session and file let go: the bound on what is held */
static void reset(struct unwinder *u)
{
	for (int i = 0; i < UNW_PROCS; i++)
		if (u->procs[i].pid)
			proc_drop(&u->procs[i]);
	for (size_t i = 0; i < u->nfiles; i++) {
		if (u->files[i].elf)
			elf_end(u->files[i].elf);
		if (u->files[i].fd >= 0)
			close(u->files[i].fd);
	}
	u->nfiles = 0;
	u->cfi_bytes = 0;
	u->want_reset = false;
	u->st.resets++;
}

struct collect_maps {
	struct uproc *pr;
	size_t cap;
};

static int collect_mapping(void *ctx, const struct mapping *m)
{
	struct collect_maps *cm = ctx;
	struct uproc *pr = cm->pr;

	if (pr->nmods == UNW_MODS_MAX)
		return 1;
	if (pr->nmods == cm->cap) {
		size_t cap = cm->cap ? 2 * cm->cap : 64;
		struct umod *n = realloc(pr->mods, cap * sizeof(*n));

		if (!n)
			return 1;
		pr->mods = n;
		cm->cap = cap;
	}
	pr->mods[pr->nmods] = (struct umod){ .pid = pr->pid, .start = m->start, .end = m->end,
					     .offset = m->offset, .dev = m->dev, .ino = m->ino,
					     .deleted = m->deleted,
					     /* the exec flag rides in the path's absence below */
					     .path = m->exec ? strdup(m->path) : NULL };
	pr->nmods++;
	return 0;
}

/* a module of a session: a file mapped executable, and where */
struct span {
	dev_t dev;
	uint64_t ino;
	size_t first;      /* its first executable mapping in pr->mods (SIZE_MAX: none) */
	unsigned long lo, hi;
	bool zero;         /* lo is the start of one of its mappings at offset 0 */
};

/*
 * The modules of pr's mappings into *out (to free), in the order of their
 * first executable mappings, which stand for them: their number, or -1 (no
 * memory). A module spans from the start of its file's mapping at offset 0
 * (libdwfl takes the load bias from there and the file's first segment) to
 * the end of its last mapping. Linear in the mappings (a hash by device
 * and inode): a trainer maps thousands of files, read again once a second.
 */
static ssize_t mod_spans(const struct uproc *pr, struct span **out)
{
	size_t cap = 16, n = 0, k = 0;
	struct span *sp;
	uint32_t *slot;

	*out = NULL;
	while (cap < 2 * pr->nmods)
		cap *= 2;
	slot = calloc(cap, sizeof(*slot)); /* 1 + the index in sp of a file's span */
	sp = calloc(pr->nmods + 1, sizeof(*sp));
	if (!slot || !sp) {
		free(slot);
		free(sp);
		return -1;
	}
	for (size_t i = 0; i < pr->nmods; i++) {
		const struct umod *y = &pr->mods[i];
		uint64_t h = ((uint64_t)y->dev * 0x9e3779b97f4a7c15ull) ^ (y->ino * 0xc2b2ae3d27d4eb4full);
		size_t j = (size_t)(h >> 20) & (cap - 1);
		struct span *x;

		while (slot[j] && (sp[slot[j] - 1].dev != y->dev || sp[slot[j] - 1].ino != y->ino))
			j = (j + 1) & (cap - 1);
		if (!slot[j]) {
			sp[n] = (struct span){ .dev = y->dev, .ino = y->ino, .first = SIZE_MAX };
			slot[j] = (uint32_t)++n;
		}
		x = &sp[slot[j] - 1];
		if (y->path && x->first == SIZE_MAX)
			x->first = i;
		if (y->offset == 0 && (!x->zero || y->start < x->lo)) {
			x->lo = y->start;
			x->zero = true;
		}
		if (y->end > x->hi)
			x->hi = y->end;
	}
	free(slot);
	for (size_t i = 0; i < n; i++)
		if (sp[i].first != SIZE_MAX && sp[i].zero && sp[i].hi > sp[i].lo)
			sp[k++] = sp[i];
	/* by first executable mapping: the maps list a file's mappings together, so nearly in order */
	for (size_t i = 1; i < k; i++)
		for (size_t j = i; j > 0 && sp[j - 1].first > sp[j].first; j--) {
			struct span t = sp[j];

			sp[j] = sp[j - 1];
			sp[j - 1] = t;
		}
	*out = sp;
	return (ssize_t)k;
}

/* would a session of b hold the modules a's holds, at the same addresses? */
static bool same_modules(const struct uproc *a, const struct uproc *b)
{
	struct span *x, *y;
	ssize_t n = mod_spans(a, &x), m = mod_spans(b, &y);
	bool same = n >= 0 && n == m;

	for (ssize_t i = 0; same && i < n; i++)
		same = x[i].dev == y[i].dev && x[i].ino == y[i].ino && x[i].lo == y[i].lo &&
		       x[i].hi == y[i].hi;
	free(x);
	free(y);
	return same;
}

/* pr->pid's file mappings into pr->mods: false if none could be read */
static bool proc_collect(struct uproc *pr)
{
	struct collect_maps cm = { .pr = pr };

	return for_each_mapping(pr->pid, collect_mapping, &cm) > 0;
}

/* the session of pr->pid, from its mappings (proc_collect): a module for each file it maps executable */
static void proc_session(struct unwinder *u, struct uproc *pr)
{
	struct span *sp;
	ssize_t n = mod_spans(pr, &sp);
	size_t keep = 0;

	if (n <= 0 || !(pr->dwfl = dwfl_begin(&dwfl_cbs))) {
		free(sp);
		return;
	}
	dwfl_report_begin(pr->dwfl);
	for (ssize_t i = 0; i < n; i++) {
		struct umod *x = &pr->mods[sp[i].first];
		Dwfl_Module *mod = dwfl_report_module(pr->dwfl, base_name(x->path), sp[i].lo, sp[i].hi);
		void **ud;

		if (!mod)
			continue;
		dwfl_module_info(mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
		x->u = u;
		*ud = x;
		keep++;
	}
	free(sp);
	dwfl_report_end(pr->dwfl, NULL, NULL);
	if (!keep || !dwfl_attach_state(pr->dwfl, NULL, pr->pid, &thread_cbs, u)) {
		dwfl_end(pr->dwfl);
		pr->dwfl = NULL;
	}
}

static void proc_build(struct unwinder *u, struct uproc *pr, uint64_t now)
{
	pr->built_ns = now;
	if (proc_collect(pr))
		proc_session(u, pr);
}

/*
 * A walk of pr's stopped at code in no module: its session built again if
 * the process maps other code since (a dlopen). Where it maps the same
 * files at the same places (the code is anonymous: a JIT, a trampoline),
 * the session is kept, with what libdw has read of the files' call-frame
 * information. True if there is a new session.
 */
static bool proc_rebuild(struct unwinder *u, struct uproc *pr, uint64_t now)
{
	struct uproc fresh = { .pid = pr->pid };

	pr->built_ns = now;
	/* maps that could not be read (the process exiting, a read held up) leave it as it was */
	if (!proc_collect(&fresh) || (pr->dwfl && same_modules(pr, &fresh))) {
		if (fresh.nmods && pr->dwfl)
			u->st.rebuilds_kept++;
		proc_drop(&fresh);
		return false;
	}
	fresh.built_ns = now;
	fresh.used = pr->used;
	proc_drop(pr);
	*pr = fresh;
	proc_session(u, pr);
	u->st.rebuilds++;
	return true;
}

static struct uproc *proc_get(struct unwinder *u, pid_t pid, uint64_t now)
{
	struct uproc *pr = NULL, *old = &u->procs[0];

	for (int i = 0; i < UNW_PROCS; i++) {
		if (u->procs[i].pid == pid) {
			pr = &u->procs[i];
			break;
		}
		if (u->procs[i].used < old->used)
			old = &u->procs[i];
	}
	if (!pr) {
		if (old->pid)
			proc_drop(old);
		pr = old;
		pr->pid = pid;
		proc_build(u, pr, now);
	}
	pr->used = ++u->clock;
	return pr;
}

/* ---- the walk ---- */

struct walk {
	Dwfl *dwfl;
	uint64_t ip[SB_STACK_MAX];
	uint32_t n;
	bool truncated;
	bool unknown;      /* it stopped at code in no module: a library mapped since? */
};

static int on_frame(Dwfl_Frame *frame, void *arg)
{
	struct walk *w = arg;
	Dwarf_Addr pc;
	bool activation;

	if (!dwfl_frame_pc(frame, &pc, &activation))
		return DWARF_CB_ABORT;
	if (w->n == SB_STACK_MAX) {
		w->truncated = true;
		return DWARF_CB_ABORT;
	}
	w->ip[w->n++] = pc;
	if (!dwfl_addrmodule(w->dwfl, activation ? pc : pc - 1))
		w->unknown = true;
	return DWARF_CB_OK;
}

static void walk(struct unwinder *u, struct uproc *pr, const struct sb_stack_copy *c, struct walk *w)
{
	*w = (struct walk){ .dwfl = pr->dwfl };
	u->cur = c;
	dwfl_getthread_frames(pr->dwfl, (pid_t)c->st.h.tid, on_frame, w);
	u->cur = NULL;
}

struct unwinder *unwinder_new(struct probes *p)
{
	struct unwinder *u = calloc(1, sizeof(*u));

	if (u)
		u->p = p;
	return u;
}

void unwinder_free(struct unwinder *u)
{
	if (!u)
		return;
	reset(u);
	free(u->held);
	free(u);
}

struct prep {
	struct prep_mod {
		Dwfl_Module *mod;
		uint64_t size;   /* of its mappings' span */
	} m[UNW_MODS_MAX];
	size_t n;
};

static int list_module(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start,
		       void *arg)
{
	struct prep *pp = arg;
	Dwarf_Addr lo, hi;

	(void)userdata;
	(void)name;
	(void)start;
	if (pp->n < UNW_MODS_MAX && dwfl_module_info(mod, NULL, &lo, &hi, NULL, NULL, NULL, NULL)) {
		pp->m[pp->n].mod = mod;
		pp->m[pp->n++].size = hi - lo;
	}
	return DWARF_CB_OK;
}

static int larger_first(const void *a, const void *b)
{
	const struct prep_mod *ma = a, *mb = b;

	return ma->size < mb->size ? 1 : ma->size > mb->size ? -1 : 0;
}

void unwinder_prepare(struct unwinder *u, pid_t pid)
{
	uint64_t t0 = mono_ns();
	struct uproc *pr;
	struct prep *pp;

	if (!u)
		return;
	pr = proc_get(u, pid, t0);
	/*
	 * The largest files first (libtorch_cpu: 12 MiB of call-frame
	 * information), half of UNW_FILES at most: a process may map hundreds
	 * (a PyTorch trainer 300), and opening more than UNW_FILES here would
	 * only let everything go again before the first walk.
	 */
	if (pr->dwfl && (pp = calloc(1, sizeof(*pp)))) {
		dwfl_getmodules(pr->dwfl, list_module, pp, 0);
		qsort(pp->m, pp->n, sizeof(pp->m[0]), larger_first);
		for (size_t i = 0; i < pp->n && u->nfiles < UNW_FILES / 2 && !u->want_reset; i++) {
			Dwarf_Addr bias;

			dwfl_module_eh_cfi(pp->m[i].mod, &bias);
		}
		free(pp);
	}
	u->st.walk_ns += mono_ns() - t0;
}

void unwinder_slice(struct unwinder *u)
{
	if (u)
		u->slice_spent = 0;
}

void unwinder_forget(struct unwinder *u, pid_t pid)
{
	if (!u)
		return;
	for (int i = 0; i < UNW_PROCS; i++)
		if (u->procs[i].pid == pid)
			proc_drop(&u->procs[i]);
}

void unwinder_stats(const struct unwinder *u, struct unwind_stats *st)
{
	*st = u ? u->st : (struct unwind_stats){ 0 };
}

/* out (its frames the frame-pointer chain's): the frames of copy c's walk, if that went further */
static void unwind_into(struct unwinder *u, const struct sb_stack_copy *c, struct sb_stack *out)
{
	uint64_t t0 = mono_ns(), t1;
	struct uproc *pr;
	struct walk w;

	out->h.flags |= SB_STACK_COPIED;
	if (out->nframes > SB_STACK_MAX)
		out->nframes = SB_STACK_MAX;
	if (!u)
		return;
	u->st.copies++;
	if (c->pages == 0 || c->pages > SB_STACK_COPY_PAGES || !c->st.h.pid)
		return;
	if (t0 - u->sec_start >= 1000000000ull) {
		u->sec_start = t0;
		u->sec_spent = 0;
	}
	if (u->sec_spent >= UNW_BUDGET_NS || u->slice_spent >= UNW_SLICE_NS) {
		u->st.over_budget++;
		return;
	}
	if (u->want_reset)
		reset(u);
	pr = proc_get(u, (pid_t)c->st.h.pid, t0);
	if (pr->dwfl)
		walk(u, pr, c, &w);
	/* code mapped since the session was built (a dlopen): build it again, once a second at most */
	if ((!pr->dwfl || w.unknown) && t0 - pr->built_ns >= UNW_REBUILD_NS &&
	    proc_rebuild(u, pr, t0) && pr->dwfl)
		walk(u, pr, c, &w);
	t1 = mono_ns();
	u->sec_spent += t1 - t0;
	u->slice_spent += t1 - t0;
	u->st.walk_ns += t1 - t0;
	if (!pr->dwfl || w.n <= out->nframes)
		return;
	u->st.walked++;
	memcpy(out->ip, w.ip, sizeof(w.ip[0]) * w.n);
	for (uint32_t i = w.n; i < SB_STACK_MAX; i++)
		out->ip[i] = 0;
	out->nframes = w.n;
	out->h.flags = (uint16_t)((out->h.flags & ~SB_STACK_TRUNCATED) | SB_STACK_CFI |
				  (w.truncated ? SB_STACK_TRUNCATED : 0));
}

void unwinder_stack(struct unwinder *u, const struct sb_stack_copy *c, struct sb_stack *out)
{
	*out = c->st;
	unwind_into(u, c, out);
}

void unwinder_hold(struct unwinder *u, const struct sb_stack_copy *c)
{
	struct held *h = NULL;

	if (!u)
		return;
	if (!u->held && !(u->held = calloc(UNW_HELD, sizeof(*u->held))))
		return;
	for (int i = 0; i < UNW_HELD && !h; i++)
		if (u->held[i].tid == c->st.h.tid)
			h = &u->held[i];
	for (int i = 0; i < UNW_HELD && !h; i++)
		if (!u->held[i].tid)
			h = &u->held[i];
	if (!h) {
		h = &u->held[0];
		for (int i = 1; i < UNW_HELD; i++)
			if (u->held[i].used < h->used)
				h = &u->held[i];
	}
	h->tid = c->st.h.tid;
	h->used = ++u->clock;
	h->c = *c;
}

bool unwinder_off_cpu(struct unwinder *u, const struct sb_stack *st, struct sb_stack *out)
{
	if (!u || !u->held || st->ev_type != SB_EV_SWITCH_IN)
		return false;
	for (int i = 0; i < UNW_HELD; i++) {
		struct held *h = &u->held[i];

		if (h->tid != st->h.tid || h->c.st.h.ts != st->ev_start_ns ||
		    h->c.st.h.pid != st->h.pid)
			continue;
		*out = *st;
		unwind_into(u, &h->c, out);
		h->tid = 0;
		return true;
	}
	return false;
}
