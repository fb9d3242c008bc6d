// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What the report needs to symbolise the user stacks of a capture: the
 * target's executable mappings (a mapping record each, schemas/trace.md) at
 * attach and again when a stack names an address outside every mapping known,
 * and at the end the lines of the target's /tmp/perf-PID.map (JIT code) that
 * cover addresses seen in stacks (perfmap records). docs/ARCHITECTURE.md,
 * "Stacks".
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gelf.h>

#include "base/clock.h"
#include "base/elfsafe.h"
#include "base/util.h"
#include "capture/probes_internal.h"
#include "capture/stackmaps.h"
#include "format/maps.h"

#define PROCS_MAX 64         /* processes whose mappings are followed */
#define RANGES_MAX 65536     /* mappings remembered per process (of its maps, in order) */
#define DATA_MAX 2048        /* data mappings recorded per process and scan, the largest first */
#define RECENT_MAX 256       /* regions mmap()ed since the last scan, remembered */
/*
 * a process found without the watched library is looked at again this much
 * later: a scan right after an exec can come before the dynamic loader maps it
 */
#define LIB_SETTLE_NS 1000000000ull
#define JIT_ADDRS_MAX 4096   /* distinct stack addresses in anonymous code kept for the perf map */
#define PERFMAP_MAX_BYTES (64u << 20)
/* a perf map line longer than this is dropped */
#define PERFMAP_LINE_MAX 4096u
/* the time the perf map's read may take at the capture's end */
#define PERFMAP_BUDGET_NS (500ull * 1000000)
#define RESCAN_SPACING_NS 1000000000ull
#define ATTACH_BUDGET_NS 2000000000ull /* the scans at attach, all processes */
#define TICK_BUDGET_NS 100000000ull    /* the scans of one later call */
#define FRESH_BUDGET_NS 10000000ull    /* those of processes new or exec'd, at a 100 ms tick */
#define BIDS_MAX 4096        /* files whose build id is known (a power of two) */

enum {
	R_FILE = 1,              /* executable file mapping with a record: symbolised */
	R_REC = 2,               /* a record was written for it */
	R_ATTACH = 4,            /* there when the capture started */
	R_HEAP = 8,              /* [heap]: brk moves its end */
};

struct range {
	uint64_t start, end;
	uint8_t flags;
};

struct proc {
	pid_t pid;               /* 0: a free slot */
	bool scanned;            /* read at least once */
	bool stale;              /* an address outside every range: read again */
	bool attach;             /* followed from the start: its mappings were there before */
	uint64_t next_scan;
	struct range *r;         /* sorted by start */
	size_t n;
	size_t maps_bytes;       /* its maps text when last read */
	struct range recent[RECENT_MAX]; /* mmap()ed since the last scan (no record) */
	size_t nrecent;
	uint64_t lib_missing_at; /* the scan that found no code of the watched library (0: found) */
	bool lib_said;           /* and stackmaps_lib_missing said so */
};

/* a file's build id, read once for every process that maps it */
struct bid {
	uint64_t dev, ino;       /* ino 0: a free slot */
	uint64_t name;           /* a hash of the path: btrfs subvolumes share the maps' dev */
	char hex[96];            /* "" where the file has none or could not be read */
};

struct stackmaps {
	pid_t pid;               /* the target: procs[0] */
	struct bid *bids;        /* open addressing on (dev, ino) */
	size_t nbids;
	struct proc procs[PROCS_MAX];
	uint64_t *jit;           /* open addressing, 0 = empty */
	size_t njit;
	/* the library every followed process should map (stackmaps_watch_lib); ino 0: none */
	uint64_t lib_dev, lib_ino;
	char lib_path[256];
};

struct stackmaps *stackmaps_new(pid_t pid)
{
	struct stackmaps *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->pid = pid;
	s->procs[0].pid = pid;
	s->procs[0].attach = true;
	s->jit = calloc(JIT_ADDRS_MAX, sizeof(*s->jit));
	s->bids = calloc(BIDS_MAX, sizeof(*s->bids));
	if (!s->jit || !s->bids) {
		stackmaps_free(s);
		return NULL;
	}
	return s;
}

void stackmaps_free(struct stackmaps *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < PROCS_MAX; i++)
		free(s->procs[i].r);
	free(s->jit);
	free(s->bids);
	free(s);
}

static struct proc *proc_of(struct stackmaps *s, pid_t pid)
{
	for (size_t i = 0; i < PROCS_MAX; i++)
		if (s->procs[i].pid == pid)
			return &s->procs[i];
	return NULL;
}

/* a process whose mappings to follow from now: at_attach, it was there at the start */
static struct proc *proc_add(struct stackmaps *s, pid_t pid, bool at_attach)
{
	struct proc *p = proc_of(s, pid);

	if (p || pid <= 0)
		return p;
	for (size_t i = 1; i < PROCS_MAX; i++)
		if (!s->procs[i].pid) {
			p = &s->procs[i];
			memset(p, 0, sizeof(*p));
			p->pid = pid;
			p->attach = at_attach;
			return p;
		}
	return NULL; /* full: its stacks stay unsymbolised, its faults unnamed */
}

void stackmaps_follow(struct stackmaps *s, pid_t pid, bool at_attach)
{
	if (s)
		proc_add(s, pid, at_attach);
}

void stackmaps_exec(struct stackmaps *s, pid_t pid)
{
	struct proc *p = s ? proc_of(s, pid) : NULL;

	/*
	 * An exec (or a rename: the same event): read at the next tick. What the
	 * new program maps is new; what a rename left in place keeps its records.
	 */
	if (p) {
		p->stale = true;
		p->next_scan = 0;
	}
}

static const struct range *find_in(const struct range *r, size_t n, uint64_t a)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (r[mid].end <= a)
			lo = mid + 1;
		else if (r[mid].start > a)
			hi = mid;
		else
			return &r[mid];
	}
	return NULL;
}

static const struct range *find(const struct proc *p, uint64_t a)
{
	const struct range *r = find_in(p->r, p->n, a);

	for (size_t i = 0; !r && i < p->nrecent; i++)
		if (a >= p->recent[i].start && a < p->recent[i].end)
			r = &p->recent[i];
	return r;
}

static void jit_add(struct stackmaps *s, uint64_t a)
{
	size_t h;

	if (!a || s->njit >= JIT_ADDRS_MAX / 2)
		return;
	h = (size_t)((a * 0x9e3779b97f4a7c15ull) >> 52) % JIT_ADDRS_MAX;
	while (s->jit[h] && s->jit[h] != a)
		h = (h + 1) % JIT_ADDRS_MAX;
	if (!s->jit[h]) {
		s->jit[h] = a;
		s->njit++;
	}
}

void stackmaps_saw(struct stackmaps *s, const struct sb_hdr *h)
{
	struct proc *p;

	if (!s)
		return;
	p = proc_of(s, (pid_t)h->pid);
	/* a child's main thread exited: its slot is free for the next child */
	if (h->type == SB_EV_THREAD_EXIT) {
		if (p && h->tid == h->pid && p != &s->procs[0]) {
			free(p->r);
			memset(p, 0, sizeof(*p));
		}
		return;
	}
	/* a followed process not heard of yet (forked before its parent's record passed) */
	if (!p && (h->type == SB_EV_STACK || h->type == SB_EV_FAULT || h->type == SB_EV_FAULT_RUN))
		p = proc_add(s, (pid_t)h->pid, false);
	if (!p)
		return;
	if (h->type == SB_EV_STACK && h->size >= sizeof(struct sb_stack)) {
		const struct sb_stack *st = (const void *)h;
		uint32_t n = st->nframes < SB_STACK_MAX ? st->nframes : SB_STACK_MAX;

		for (uint32_t i = 0; i < n; i++) {
			const struct range *r = find(p, st->ip[i]);

			/* outside every mapping known: new code, perhaps a JIT's */
			if (!r)
				p->stale = true;
			if ((!r || !(r->flags & R_FILE)) && p->pid == s->pid)
				jit_add(s, st->ip[i]);
		}
	} else if (h->type == SB_EV_FAULT && h->size >= sizeof(struct sb_fault)) {
		const struct sb_fault *f = (const void *)h;

		/* memory the maps did not hold when last read (a stack grown, say) */
		if (p->scanned && !find(p, f->addr))
			p->stale = true;
	} else if (h->type == SB_EV_FAULT_RUN && h->size >= sizeof(struct sb_fault_run)) {
		const struct sb_fault_run *f = (const void *)h;

		/* a run stays within 2 MiB of its addresses: its ends name its memory */
		if (p->scanned && (!find(p, f->lo_addr) || !find(p, f->hi_addr)))
			p->stale = true;
	} else if (h->type == SB_EV_MMSYS && h->size >= sizeof(struct sb_mmsys)) {
		const struct sb_mmsys *m = (const void *)h;

		/* new code: mmap or mprotect with PROT_EXEC */
		if ((m->call == SB_SYS_MMAP || m->call == SB_SYS_MPROTECT) && (m->arg & 0x4) &&
		    m->ret >= 0)
			p->stale = true;
		/* the mmsys record names it in the trace: known, no rescan for its faults */
		if (m->call == SB_SYS_MMAP && m->ret > 0 && m->len && p->nrecent < RECENT_MAX)
			p->recent[p->nrecent++] = (struct range){
				.start = (uint64_t)m->ret,
				.end = (uint64_t)m->ret + ((m->len + 4095) & ~4095ull),
			};
		/* the heap grown or shrunk */
		if (m->call == SB_SYS_BRK && m->ret > 0)
			for (size_t i = 0; i < p->n; i++)
				if ((p->r[i].flags & R_HEAP) && (uint64_t)m->ret > p->r[i].start) {
					p->r[i].end = ((uint64_t)m->ret + 4095) & ~4095ull;
					if (i + 1 < p->n && p->r[i].end > p->r[i + 1].start)
						p->r[i].end = p->r[i + 1].start;
				}
	}
}

/*
 * The GNU build id of the file open on fd, as hex, or "". Read, not mapped:
 * a library of hundreds of MiB mapped and unmapped for its 20 bytes is page
 * table work that, on a guest with shadow page tables, the trainer's own
 * page faults wait behind (docs/ARCHITECTURE.md, "Stacks").
 */
static void build_id_hex(int fd, char *out, size_t len)
{
	/* its headers and notes within bounds: the file is the target's (base/elfsafe.h) */
	Elf *elf = elf_read_fd(fd);

	out[0] = 0;
	if (!elf)
		return;
	elf_build_id_hex(elf, out, len);
	elf_end(elf);
}

/* the slot of (dev, ino) in the build id cache: its entry, or the free slot for it; NULL when full */
static struct bid *bid_slot(struct stackmaps *s, uint64_t dev, uint64_t ino, uint64_t name)
{
	uint64_t h = (dev * 0x9e3779b97f4a7c15ull) ^ (ino * 0xc2b2ae3d27d4eb4full) ^ name;

	for (size_t i = 0, j = (h >> 17) & (BIDS_MAX - 1); i < BIDS_MAX;
	     i++, j = (j + 1) & (BIDS_MAX - 1)) {
		struct bid *b = &s->bids[j];

		if (!b->ino || (b->ino == ino && b->dev == dev && b->name == name))
			return b;
	}
	return NULL;
}

/* one line of /proc/PID/maps, parsed; name points into the line */
struct line {
	uint64_t start, end, off, ino;
	unsigned maj, min;
	char perms[8];
	const char *name;
	size_t name_len;
	const char *kind;        /* schemas/trace.md, "mapping" */
	uint8_t flags;
	bool deleted;
};

static bool parse_line(char *text, struct line *l)
{
	struct maps_line ml;

	memset(l, 0, sizeof(*l));
	if (!maps_line_parse(text, &ml) || ml.end <= ml.start)
		return false;
	l->start = ml.start;
	l->end = ml.end;
	l->off = ml.off;
	l->ino = ml.ino;
	l->maj = ml.maj;
	l->min = ml.min;
	memcpy(l->perms, ml.perms, sizeof(ml.perms));
	l->name = ml.name;
	l->name_len = strlen(l->name);
	l->deleted = l->name_len > 10 && !strcmp(l->name + l->name_len - 10, " (deleted)");
	if (l->deleted)
		l->name_len -= 10;
	if (!l->name_len)
		l->kind = "anon";
	else if (l->name_len == 6 && !strncmp(l->name, "[heap]", 6))
		l->kind = "heap";
	else if (l->name_len == 7 && !strncmp(l->name, "[stack]", 7))
		l->kind = "stack";
	else if (l->name_len == 6 && !strncmp(l->name, "[vdso]", 6))
		l->kind = "vdso";
	else if (!strncmp(l->name, "[anon:", 6) || !strncmp(l->name, "[anon_shmem:", 12))
		l->kind = "anon";
	else if (*l->name == '/' && (!strncmp(l->name, "/dev/shm/", 9) ||
				     !strncmp(l->name, "/memfd:", 7) || !strncmp(l->name, "/SYSV", 5)))
		l->kind = "shm";
	else if (*l->name == '/' && ml.ino)
		l->kind = "file";
	else
		l->kind = "other";
	return true;
}

struct scan_ctx {
	struct stackmaps *s;
	struct proc *pr;
	struct probes *p;
	stackmaps_put_fn put;
	void *put_ctx;
	int written;
	uint64_t deadline;
	uint64_t now;            /* the tick's time (its caller's clock) */
	bool out_of_time;
};

/* the name as the record holds it: a control character (the target names its files) as '?' */
static size_t safe_name(char *out, size_t cap, const char *name, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < len && o + 1 < cap; i++) {
		unsigned char ch = (unsigned char)name[i];

		out[o++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
	}
	out[o] = 0;
	return o;
}

/*
 * The vDSO's functions, as a mapping record's `funcs` value ("OFF+SIZE NAME"
 * entries, hex, separated by ','; schemas/trace.md): read from this process's
 * own vDSO, the image the kernel maps into every 64-bit process. "" when it
 * has none or cannot be read. Computed once.
 */
static const char *vdso_funcs(void)
{
	static char out[2048];
	static bool done;
	const unsigned char *img = (const unsigned char *)getauxval(AT_SYSINFO_EHDR);
	const GElf_Ehdr *eh = (const GElf_Ehdr *)img;
	size_t o = 0, size;
	Elf_Scn *scn = NULL;
	GElf_Addr base = 0;
	Elf *elf;

	if (done)
		return out;
	done = true;
	if (!img || memcmp(img, ELFMAG, SELFMAG) || img[EI_CLASS] != ELFCLASS64 ||
	    !eh->e_shoff || eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shnum > 256)
		return out;
	/* the section headers come last in the image */
	size = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
	if (size > (1u << 20) || elf_version(EV_CURRENT) == EV_NONE)
		return out;
	elf = elf_memory((char *)img, size);
	if (!elf)
		return out;
	/* offsets in the mapping: addresses less the first loadable segment's */
	for (size_t i = 0, n = 0; elf_getphdrnum(elf, &n) == 0 && i < n; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD) {
			base = ph.p_vaddr - ph.p_offset;
			break;
		}
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t k = 0; d && k < sh.sh_size / sh.sh_entsize; k++) {
			GElf_Sym sym;
			const char *nm;
			int w;

			if (!gelf_getsym(d, (int)k, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
			    !sym.st_value || !(nm = elf_strptr(elf, sh.sh_link, sym.st_name)) || !nm[0] ||
			    strpbrk(nm, " ,\n"))
				continue;
			w = snprintf(out + o, sizeof(out) - o, "%s%" PRIx64 "+%" PRIx64 " %s", o ? "," : "",
				     (uint64_t)(sym.st_value - base), (uint64_t)sym.st_size, nm);
			if (w < 0 || (size_t)w >= sizeof(out) - o) {
				out[o] = 0;
				break;
			}
			o += (size_t)w;
		}
		break;
	}
	elf_end(elf);
	return out;
}

/*
 * A mapping record (schemas/trace.md, "mapping"). The target's executable
 * file mappings keep the form readers before the data mappings read (the file
 * in `path`); every other mapping names its file or kind in `name`, which
 * those readers do not look for.
 */
static void put_line(struct scan_ctx *c, const struct line *l, bool attach)
{
	char text[PATH_MAX + 512], bid[96], name[PATH_MAX];
	bool exec_file = l->perms[2] == 'x' && !strcmp(l->kind, "file");
	bool old_form = exec_file && c->pr->pid == c->s->pid;
	int n;

	safe_name(name, sizeof(name), l->name, l->name_len);
	bid[0] = 0;
	if (exec_file) {
		uint64_t dev = makedev(l->maj, l->min);
		uint64_t hname = 1469598103934665603ull; /* FNV-1a */
		struct mapping *m = NULL;
		struct bid *b;
		int fd;

		for (size_t i = 0; i < l->name_len; i++)
			hname = (hname ^ (unsigned char)l->name[i]) * 1099511628211ull;
		b = l->ino ? bid_slot(c->s, dev, l->ino, hname) : NULL;

		/*
		 * A file another followed process maps (a forked child maps its
		 * parent's libraries): its build id is known, and once looked at
		 * for the step note it is not opened again.
		 */
		if (b && b->ino && (c->pr->pid == c->s->pid ||
				    probes_child_file_seen(c->p, dev, l->ino)))
			snprintf(bid, sizeof(bid), "%s", b->hex);
		else
			m = malloc(sizeof(*m));
		if (m) {
			/* the file opened through map_files, never by a name the target controls */
			memset(m, 0, sizeof(*m));
			snprintf(m->path, sizeof(m->path), "%s", name);
			m->start = l->start;
			m->end = l->end;
			m->dev = makedev(l->maj, l->min);
			m->ino = l->ino;
			m->deleted = l->deleted;
			fd = open_mapped_pid(c->p, c->pr->pid, m);
			if (fd >= 0) {
				if (b && b->ino)
					snprintf(bid, sizeof(bid), "%s", b->hex);
				else
					build_id_hex(fd, bid, sizeof(bid));
				/* cached only from the file itself: a mapping gone (fd < 0) says nothing */
				if (b && !b->ino && c->s->nbids < BIDS_MAX / 2) {
					b->dev = dev;
					b->ino = l->ino;
					b->name = hname;
					snprintf(b->hex, sizeof(b->hex), "%s", bid);
					c->s->nbids++;
				}
				if (c->pr->pid != c->s->pid)
					probes_child_file(c->p, fd, m);
				drop_lease(fd);
				close(fd);
			}
			free(m);
		}
	}
	bool vdso = !strcmp(l->kind, "vdso");

	n = snprintf(text, sizeof(text),
		     "start=0x%" PRIx64 "\nend=0x%" PRIx64 "\noffset=0x%" PRIx64 "\ndev=%u:%u\n"
		     "inode=%" PRIu64 "\nperms=%s\nkind=%s\nattach=%d\n%s%s%sdeleted=%d\n%s%s%s%s=%s\n",
		     l->start, l->end, l->off, l->maj, l->min, l->ino, l->perms, l->kind, attach,
		     exec_file ? "build_id=" : "", exec_file ? bid : "", exec_file ? "\n" : "",
		     l->deleted, vdso ? "funcs=" : "", vdso ? vdso_funcs() : "", vdso ? "\n" : "",
		     old_form ? "path" : "name", name);
	if (n > 0 && (size_t)n < sizeof(text)) {
		c->put(c->put_ctx, SB_REC_MAPPING, (uint32_t)c->pr->pid, text, (size_t)n);
		c->written++;
	}
}

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

struct cand {
	size_t line;             /* index in lines */
	uint64_t size;
};

static int cmp_cand(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	if (x->size != y->size)
		return x->size > y->size ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

/* a mapping of the watched library's code: by device and inode, or by its path */
static bool lib_line(const struct stackmaps *s, const struct line *l)
{
	if (l->perms[2] != 'x' || strcmp(l->kind, "file"))
		return false;
	if (l->ino == s->lib_ino && makedev(l->maj, l->min) == s->lib_dev)
		return true;
	return s->lib_path[0] && l->name_len == strlen(s->lib_path) &&
	       !strncmp(l->name, s->lib_path, l->name_len);
}

/*
 * Read one process's maps and rebuild its ranges from them. A mapping
 * already recorded with the same bounds is not written again; an executable
 * file mapping gets a record (with its build id, for the symbols), anonymous
 * code is remembered for the perf map, and of the data mappings (anonymous
 * memory, [heap], [stack], files mapped for data, shared memory) the
 * DATA_MAX largest not yet recorded get one. A mapping that replaces one that
 * was there at the start with the same start (the heap grown) or end (the
 * stack grown) was there at the start too.
 */
static int scan_proc(struct scan_ctx *c, struct proc *pr)
{
	char *text = NULL, *line, *nl;
	struct line *lines = NULL;
	struct range *r = NULL;
	struct cand *cand = NULL;
	size_t nl_count = 0, n = 0, nc = 0;
	bool first = !pr->scanned;
	ssize_t len;

	c->pr = pr;
	pr->stale = false;
	len = read_maps(pr->pid, &text, pr->maps_bytes);
	if (len < 0) {
		/* gone: the slot is free for another process */
		if ((len == -ENOENT || len == -ESRCH) && pr != &c->s->procs[0]) {
			free(pr->r);
			memset(pr, 0, sizeof(*pr));
		}
		return (int)len;
	}
	pr->maps_bytes = (size_t)len;
	for (char *q = text; (q = strchr(q, '\n')); q++)
		nl_count++;
	if (nl_count > RANGES_MAX)
		nl_count = RANGES_MAX;
	lines = malloc((nl_count + 1) * sizeof(*lines));
	r = malloc((nl_count + 1) * sizeof(*r));
	cand = malloc((nl_count + 1) * sizeof(*cand));
	if (!lines || !r || !cand)
		goto out;
	for (line = text; n < nl_count && (nl = strchr(line, '\n')); line = nl + 1) {
		const struct range *old;
		struct line *l = &lines[n];

		*nl = 0;
		if (!parse_line(line, l))
			continue;
		old = find_in(pr->r, pr->n, l->start);
		if (old && old->start == l->start && old->end == l->end) {
			l->flags = old->flags;
		} else {
			const struct range *o2 = find_in(pr->r, pr->n, l->end - 1);
			/*
			 * the heap grown by brk, the main stack grown down: still the
			 * region the capture began with. Any other area grown is one
			 * the kernel merged a new mapping into (an mmap placed just
			 * below an old one): not "mapped before the capture"
			 */
			bool grows = !strcmp(l->kind, "heap") || !strcmp(l->kind, "stack");

			if ((grows && old && (old->flags & R_ATTACH) && old->start == l->start) ||
			    (grows && o2 && (o2->flags & R_ATTACH) && o2->end == l->end) ||
			    (first && pr->attach))
				l->flags |= R_ATTACH;
		}
		if (!strcmp(l->kind, "heap"))
			l->flags |= R_HEAP;
		n++;
	}
	if (pr != &c->s->procs[0] && c->s->lib_ino) {
		bool has = false;

		for (size_t i = 0; i < n && !has; i++)
			has = lib_line(c->s, &lines[i]);
		if (has)
			pr->lib_missing_at = 0;
		else if (!pr->lib_missing_at)
			pr->lib_missing_at = c->now;
	}
	/* what to write: the executable files in order, then the largest data mappings */
	for (size_t i = 0; i < n; i++) {
		struct line *l = &lines[i];

		if (l->flags & R_REC)
			continue;
		if (l->perms[2] == 'x') {
			/* anonymous code: its addresses go to the perf map; the vDSO is named */
			if (strcmp(l->kind, "file") && strcmp(l->kind, "vdso"))
				continue;
			if (c->out_of_time || mono_ns() > c->deadline) {
				c->out_of_time = true;
				continue;
			}
			put_line(c, l, l->flags & R_ATTACH);
			l->flags |= R_REC | R_FILE;
		} else if (strcmp(l->kind, "other")) {
			cand[nc++] = (struct cand){ .line = i, .size = l->end - l->start };
		}
	}
	qsort(cand, nc, sizeof(*cand), cmp_cand);
	for (size_t k = 0; k < nc && k < DATA_MAX; k++) {
		struct line *l = &lines[cand[k].line];

		if ((k % 64 == 0 && mono_ns() > c->deadline) || c->out_of_time) {
			c->out_of_time = true;
			break;
		}
		put_line(c, l, l->flags & R_ATTACH);
		l->flags |= R_REC;
	}
	for (size_t i = 0; i < n; i++)
		r[i] = (struct range){ .start = lines[i].start, .end = lines[i].end,
				       .flags = lines[i].flags };
	/* maps is in address order already; sorted all the same */
	qsort(r, n, sizeof(*r), cmp_range);
	free(pr->r);
	pr->r = r;
	pr->n = n;
	r = NULL;
	pr->nrecent = 0;
	pr->scanned = true;
	/* cut short by the budget: the rest at the next chance */
	if (c->out_of_time)
		pr->stale = true;
out:
	free(cand);
	free(r);
	free(lines);
	free(text);
	return c->written;
}

/* all: every process; else those due; fresh: only those new or exec'd since their last read */
static int scan_some(struct stackmaps *s, struct probes *p, uint64_t now, uint64_t budget,
		     bool all, bool fresh, stackmaps_put_fn put, void *ctx)
{
	struct scan_ctx c = { .s = s, .p = p, .put = put, .put_ctx = ctx,
			      .deadline = mono_ns() + budget,
			      .now = now == UINT64_MAX ? mono_ns() : now };

	for (size_t i = 0; i < PROCS_MAX && !c.out_of_time; i++) {
		struct proc *pr = &s->procs[i];

		if (!pr->pid)
			continue;
		if (!all && pr->scanned && !(pr->stale && now >= pr->next_scan))
			continue;
		if (fresh && pr->scanned && pr->next_scan)
			continue;
		pr->next_scan = now + RESCAN_SPACING_NS;
		scan_proc(&c, pr);
	}
	return c.written;
}

int stackmaps_scan(struct stackmaps *s, struct probes *p, uint64_t now, stackmaps_put_fn put,
		   void *ctx)
{
	if (!s)
		return 0;
	return scan_some(s, p, now, ATTACH_BUDGET_NS, true, false, put, ctx);
}

int stackmaps_maybe_scan(struct stackmaps *s, struct probes *p, uint64_t now,
			 stackmaps_put_fn put, void *ctx)
{
	if (!s)
		return 0;
	return scan_some(s, p, now, TICK_BUDGET_NS, false, false, put, ctx);
}

int stackmaps_scan_fresh(struct stackmaps *s, struct probes *p, uint64_t now,
			 stackmaps_put_fn put, void *ctx)
{
	if (!s)
		return 0;
	return scan_some(s, p, now, FRESH_BUDGET_NS, false, true, put, ctx);
}

void stackmaps_watch_lib(struct stackmaps *s, uint64_t dev, uint64_t ino, const char *path)
{
	if (!s)
		return;
	s->lib_dev = dev;
	s->lib_ino = ino;
	snprintf(s->lib_path, sizeof(s->lib_path), "%s", path ? path : "");
	/* the children read before: read again at the next tick, to look for it */
	for (size_t i = 1; i < PROCS_MAX; i++)
		if (s->procs[i].pid && s->procs[i].scanned) {
			s->procs[i].stale = true;
			s->procs[i].next_scan = 0;
		}
}

/* does pid map the watched library's code now? (its maps read again); true when not known */
static bool maps_have_lib(const struct stackmaps *s, pid_t pid)
{
	char *text = NULL, *line, *nl;
	bool has = false;
	ssize_t len = read_maps(pid, &text, 0);

	if (len < 0)
		return true; /* gone, or not to be read: nothing to say */
	for (line = text; !has && (nl = strchr(line, '\n')); line = nl + 1) {
		struct line l;

		*nl = 0;
		has = parse_line(line, &l) && lib_line(s, &l);
	}
	free(text);
	return has;
}

int stackmaps_lib_missing(struct stackmaps *s, uint64_t now, void (*cb)(void *ctx, pid_t pid),
			  void *ctx)
{
	int n = 0;

	if (!s || !s->lib_ino)
		return 0;
	for (size_t i = 1; i < PROCS_MAX; i++) {
		struct proc *pr = &s->procs[i];

		if (!pr->pid || pr->lib_said || !pr->lib_missing_at ||
		    (now != UINT64_MAX && now - pr->lib_missing_at < LIB_SETTLE_NS))
			continue;
		/* the dynamic loader had time to map it: is it there now? */
		if (maps_have_lib(s, pr->pid)) {
			pr->lib_missing_at = 0;
			continue;
		}
		pr->lib_said = true;
		cb(ctx, pr->pid);
		n++;
	}
	return n;
}

static bool jit_any_in(const struct stackmaps *s, uint64_t lo, uint64_t hi)
{
	for (size_t i = 0; i < JIT_ADDRS_MAX; i++)
		if (s->jit[i] >= lo && s->jit[i] < hi)
			return true;
	return false;
}

/* one "START SIZE name" line of the perf map (no newline): into buf when it names a JIT region */
static void perfmap_line(struct stackmaps *s, const char *line, size_t n, char *buf, size_t bufcap,
			 size_t *used, int *lines, stackmaps_put_fn put, void *ctx)
{
	char text[600];
	unsigned long long start, size;
	int k = 0;
	size_t len;

	/* the two numbers and a name cut to 512 bytes: what is kept of a line */
	len = n < sizeof(text) - 1 ? n : sizeof(text) - 1;
	memcpy(text, line, len);
	text[len] = 0;
	if (sscanf(text, "%llx %llx %n", &start, &size, &k) < 2 || !k || !size ||
	    start + size < start || !jit_any_in(s, start, start + size))
		return;
	len = strlen(text + k);
	if (len > 512)
		len = 512;
	if (*used + len + 64 > bufcap) {
		put(ctx, SB_REC_PERFMAP, (uint32_t)s->pid, buf, *used);
		*used = 0;
	}
	*used += (size_t)snprintf(buf + *used, bufcap - *used, "%llx %llx %.*s\n", start, size,
				  (int)len, text + k);
	(*lines)++;
}

/*
 * /tmp/perf-PID.map: "START SIZE name" a line, hex without 0x (the format
 * perf reads, written by Python's -X perf, the JVM and other JITs). Opened
 * without following links, only as a regular file owned by the target's user
 * or root (SECURITY.md): anyone can create a file in /tmp. Read through a
 * fixed buffer, at most the size it had when opened and PERFMAP_MAX_BYTES,
 * within PERFMAP_BUDGET_NS: the target may grow it, or make it a sparse hole
 * of gigabytes with no line end, while it is read.
 */
int stackmaps_perfmap(struct stackmaps *s, uid_t target_uid, stackmaps_put_fn put, void *ctx)
{
	char path[64], *in, *buf;
	size_t bufcap = 16384, used = 0, have = 0;
	uint64_t left, t0 = mono_ns();
	struct stat st;
	int fd, lines = 0;
	bool skipping = false;

	if (!s || !s->njit)
		return 0;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)s->pid);
	fd = sb_open_regular(path, true, &st);
	if (fd < 0)
		return 0;
	if ((st.st_uid != target_uid && st.st_uid != 0) || st.st_size > PERFMAP_MAX_BYTES) {
		close(fd);
		return 0;
	}
	left = (uint64_t)st.st_size;
	in = malloc(PERFMAP_LINE_MAX);
	buf = malloc(bufcap);
	if (!in || !buf) {
		close(fd);
		free(in);
		free(buf);
		return -ENOMEM;
	}
	while (left && mono_ns() - t0 < PERFMAP_BUDGET_NS) {
		size_t want = PERFMAP_LINE_MAX - have, off = 0;
		ssize_t got;
		char *nl;

		if (want > left)
			want = (size_t)left;
		got = read(fd, in + have, want);
		if (got <= 0)
			break;
		left -= (uint64_t)got;
		have += (size_t)got;
		while ((nl = memchr(in + off, '\n', have - off))) {
			if (!skipping)
				perfmap_line(s, in + off, (size_t)(nl - (in + off)), buf, bufcap, &used,
					     &lines, put, ctx);
			skipping = false;
			off = (size_t)(nl - in) + 1;
		}
		memmove(in, in + off, have - off);
		have -= off;
		if (have == PERFMAP_LINE_MAX) {
			/* a line longer than any a JIT writes: dropped to its end */
			skipping = true;
			have = 0;
		}
	}
	if (have && !skipping)
		perfmap_line(s, in, have, buf, bufcap, &used, &lines, put, ctx);
	if (used)
		put(ctx, SB_REC_PERFMAP, (uint32_t)s->pid, buf, used);
	free(in);
	free(buf);
	close(fd);
	return lines;
}
