// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Symbolising user stacks (symbols.h). One libdwfl session per mapped file
 * and load address, opened on first use: mappings recorded at different
 * times may overlap (a library unloaded and another loaded in its place),
 * which one session could not hold. The trace names the files; they are
 * opened read-only, regular files only, and used only when they are the file
 * the trace recorded (its device and inode, or its build id); read with
 * pread, never mapped, and their symbol tables checked before libdwfl reads
 * them (base/elfsafe.h; SECURITY.md, "The target's files, names and
 * credentials").
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <elfutils/libdwfl.h>
#include <gelf.h>

#include "base/elfsafe.h"
#include "base/util.h"
#include "format/trace.h"
#include "report/symbols.h"

/* a function of the vDSO: [off, off + size) of its mapping */
struct vfunc {
	uint64_t off, size;
	char *name;
};

struct module {
	const struct eng_mapping *m;
	bool tried;
	int fd;                  /* the file, while dwfl is open */
	Elf *elf;                /* its handle: libdwfl gets references to it (find_elf) */
	Dwfl *dwfl;              /* NULL: the file could not be used */
	Dwfl_Module *mod;
	struct vfunc *vf;        /* the vDSO's functions (m->funcs), read at its first frame */
	uint32_t nvf;
};

/*
 * Addresses already looked up, direct-mapped by module and address: the same
 * stacks come back step after step, and libdwfl's lookup scans the module's
 * symbols (a live report names the stacks of every step)
 */
#define HITS 16384
struct hit {
	uint32_t mod;            /* index into mods, plus one; 0: empty */
	uint64_t look;
	const char *func;        /* NULL: not known */
	uint64_t off;
};

/* the symbol tables of all the files opened, at most (a target maps what it likes) */
#define SYMBOLS_BYTES_MAX (1ull << 30)

/*
 * Address ranges by start, for the look-up of every frame: a target may
 * record 65,536 mappings and a million JIT symbols, and a look at each for
 * each of a Perfetto file's million frames took minutes. The first n items
 * are in it (a live capture adds more: looked at one by one until they are
 * a quarter more, then all sorted again).
 */
struct span_index {
	uint32_t n;
	uint32_t *item;          /* by start */
	uint64_t *start, *end;   /* item k's */
	uint64_t *reach;         /* the largest end of items 0..k */
};

static void span_index_free(struct span_index *x)
{
	free(x->item);
	free(x->start);
	free(x->end);
	free(x->reach);
	memset(x, 0, sizeof(*x));
}

struct symbols {
	const struct engine *e;
	uint64_t bytes;          /* the symbol tables of the files opened so far */
	uint32_t n;
	struct module *mods;     /* one per mapping record */
	struct hit *hits;        /* HITS of them, on first use */
	struct span_index mod_ix, jit_ix;
	uint32_t *mod_pids;      /* the processes of the indexed mappings, sorted */
	uint32_t nmod_pids;
};

/* libdwfl asks for a module's ELF: the handle open_module() checked */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
		    char **file_name, Elf **elfp)
{
	(void)mod;
	(void)name;
	(void)base;
	return elf_dwfl_answer(*userdata, file_name, elfp);
}

/*
 * Separate debugging symbols: only the distribution's, by build id
 * (/usr/lib/debug/.build-id/NN/REST.debug, root's files). Never beside the
 * file or where its .gnu_debuglink points: those are the target's names, and
 * a FIFO or a device there would stall or flood the report.
 */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			  Dwarf_Addr base, const char *file_name, const char *debuglink_file,
			  GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	const unsigned char *id;
	GElf_Addr vaddr;
	int n = dwfl_module_build_id(mod, &id, &vaddr);
	char path[64 + 2 * 64];
	size_t len;
	struct stat st;
	int fd;

	(void)userdata;
	(void)modname;
	(void)base;
	(void)file_name;
	(void)debuglink_file;
	(void)debuglink_crc;
	*debuginfo_file_name = NULL;
	if (n < 2 || n > 64)
		return -1;
	len = (size_t)snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%02x/", id[0]);
	for (int i = 1; i < n; i++)
		len += (size_t)snprintf(path + len, sizeof(path) - len, "%02x", id[i]);
	snprintf(path + len, sizeof(path) - len, ".debug");
	fd = sb_open_regular(path, false, &st);
	if (fd >= 0 && st.st_uid != 0) {
		close(fd);
		return -1;
	}
	if (fd >= 0)
		*debuginfo_file_name = strdup(path);
	return fd;
}

static const Dwfl_Callbacks callbacks = {
	.find_elf = find_elf,
	.find_debuginfo = find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

struct symbols *symbols_new(const struct engine *e)
{
	struct symbols *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->e = e;
	s->n = engine_nmappings(e);
	if (s->n) {
		s->mods = calloc(s->n, sizeof(*s->mods));
		if (!s->mods) {
			free(s);
			return NULL;
		}
		for (uint32_t i = 0; i < s->n; i++)
			s->mods[i].m = engine_mapping(e, i);
	}
	return s;
}

void symbols_free(struct symbols *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->n; i++) {
		if (s->mods[i].dwfl)
			dwfl_end(s->mods[i].dwfl);
		if (s->mods[i].elf)
			elf_end(s->mods[i].elf);
		if (s->mods[i].dwfl || s->mods[i].elf)
			close(s->mods[i].fd);
		for (uint32_t k = 0; k < s->mods[i].nvf; k++)
			free(s->mods[i].vf[k].name);
		free(s->mods[i].vf);
	}
	free(s->mods);
	free(s->hits);
	span_index_free(&s->mod_ix);
	span_index_free(&s->jit_ix);
	free(s->mod_pids);
	free(s);
}

const char *sym_event_name(unsigned ev_type)
{
	if (ev_type == SB_EV_STACK)
		return "cpu_sample";
	return ev_type == SB_EV_SWITCH_IN ? "off_cpu" : sb_type_name(ev_type);
}

const char *sym_base(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

/*
 * The file open is the one the trace recorded: the same device and inode (a
 * live capture's, or a report on the machine that recorded), or the same
 * build id, which the recorder read from the mapped file itself. A name
 * alone is not enough: the target may have put a link to another file there,
 * or mapped it in a mount namespace of its own.
 */
static bool same_file(Elf *elf, const struct stat *st, const struct eng_mapping *m)
{
	char hex[2 * 64 + 1];

	if (m->ino && (uint64_t)st->st_ino == m->ino && (uint64_t)st->st_dev == m->dev)
		return true;
	if (!m->build_id[0])
		return false;
	elf_build_id_hex(elf, hex, sizeof(hex));
	return !strcmp(hex, m->build_id);
}

/*
 * The load bias of mapping m of the ELF file: the segment that holds the
 * mapping's file offset says which virtual address its start stands for.
 */
static bool load_bias(Elf *elf, const struct eng_mapping *m, uint64_t *bias)
{
	size_t nph;
	GElf_Ehdr eh;

	if (!gelf_getehdr(elf, &eh) || elf_getphdrnum(elf, &nph))
		return false;
	if (eh.e_type == ET_EXEC) {
		*bias = 0;
		return true;
	}
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		uint64_t align;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		align = ph.p_align > 1 ? ph.p_align : 1;
		if (m->offset >= (ph.p_offset & ~(align - 1)) && m->offset < ph.p_offset + ph.p_filesz) {
			*bias = m->start - m->offset + ph.p_offset - ph.p_vaddr;
			return true;
		}
	}
	return false;
}

/* the vDSO's functions from its record's list ("OFF+SIZE NAME,...", hex) */
static void vdso_read(struct module *md)
{
	const char *p = md->m->funcs;
	uint32_t cap = 0;

	while (p && *p) {
		char *q;
		uint64_t o = strtoull(p, &q, 16), sz = 0;
		const char *nm, *end;

		if (*q == '+')
			sz = strtoull(q + 1, &q, 16);
		if (*q != ' ')
			return;
		nm = q + 1;
		end = strchr(nm, ',');
		if (!end)
			end = nm + strlen(nm);
		if (md->nvf == cap) {
			struct vfunc *v = realloc(md->vf, (cap ? 2 * cap : 8) * sizeof(*v));

			if (!v)
				return;
			md->vf = v;
			cap = cap ? 2 * cap : 8;
		}
		md->vf[md->nvf] = (struct vfunc){ .off = o, .size = sz ? sz : 1,
						  .name = strndup(nm, (size_t)(end - nm)) };
		if (md->vf[md->nvf].name)
			md->nvf++;
		p = *end ? end + 1 : NULL;
	}
}

/* the module's address range as mapped at bias: its loadable segments, pages whole */
static bool module_span(Elf *elf, uint64_t bias, uint64_t *lo, uint64_t *hi)
{
	size_t nph;

	*lo = UINT64_MAX;
	*hi = 0;
	if (elf_getphdrnum(elf, &nph))
		return false;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		uint64_t align;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		align = ph.p_align > 1 ? ph.p_align : 1;
		if ((ph.p_vaddr & ~(align - 1)) < *lo)
			*lo = ph.p_vaddr & ~(align - 1);
		if (ph.p_vaddr + ph.p_memsz > *hi)
			*hi = ph.p_vaddr + ph.p_memsz;
	}
	if (*hi <= *lo)
		return false;
	*lo += bias;
	*hi = (*hi + bias + 4095) & ~4095ull;
	return *hi > *lo;
}

static void open_module(struct symbols *s, struct module *md)
{
	const struct eng_mapping *m = md->m;
	struct stat st;
	uint64_t bias, lo, hi, bytes;
	Elf *elf;
	int fd;

	md->tried = true;
	/* the vDSO: no file, its functions came with its record */
	if (m->funcs) {
		vdso_read(md);
		return;
	}
	fd = sb_open_regular(m->path, false, &st);
	if (fd < 0)
		return;
	elf = elf_read_fd(fd);
	if (!elf || !same_file(elf, &st, m) || !load_bias(elf, m, &bias) ||
	    !module_span(elf, bias, &lo, &hi) ||
	    elf_symbols_refusal(elf, (uint64_t)st.st_size, &bytes) ||
	    s->bytes + bytes > SYMBOLS_BYTES_MAX) {
		if (elf)
			elf_end(elf);
		close(fd);
		return;
	}
	s->bytes += bytes;
	md->fd = fd;
	md->elf = elf;
	md->dwfl = dwfl_begin(&callbacks);
	if (md->dwfl) {
		dwfl_report_begin(md->dwfl);
		md->mod = dwfl_report_module(md->dwfl, sym_base(m->path), lo, hi);
		if (md->mod) {
			void **arg = NULL;

			/* the handle, not md: the modules' table moves as a live capture grows it */
			dwfl_module_info(md->mod, &arg, NULL, NULL, NULL, NULL, NULL, NULL);
			*arg = elf;
		}
		dwfl_report_end(md->dwfl, NULL, NULL);
	}
	if (md->mod)
		return;
	if (md->dwfl)
		dwfl_end(md->dwfl);
	md->dwfl = NULL;
	elf_end(elf);
	md->elf = NULL;
	close(fd);
}

/* items added since the index was built, looked at one by one: at most this many, or a quarter more */
#define SPAN_UNINDEXED_MAX 64
/* items that start below an address and may cover it, looked at: overlaps are few (a reused JIT region, a mapping read again) */
#define SPAN_OVERLAP_MAX 1024
/* ...and of those over it, at most this many are told */
#define SPAN_FOUND_MAX 256

struct span_sort {
	uint64_t start;
	uint32_t item;
};

static int span_cmp(const void *a, const void *b)
{
	const struct span_sort *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->item < y->item ? -1 : x->item > y->item;
}

static bool span_index_stale(const struct span_index *x, uint32_t n)
{
	return n - x->n > SPAN_UNINDEXED_MAX && n - x->n > x->n / 4;
}

/* items [0, n), item i over [start[i], end[i]): false (the index as it was) when out of memory */
static bool span_index_build(struct span_index *x, uint32_t n, const uint64_t *start,
			     const uint64_t *end)
{
	struct span_sort *t = malloc((size_t)n * sizeof(*t));
	struct span_index y = {
		.n = n,
		.item = malloc((size_t)n * sizeof(*y.item)),
		.start = malloc((size_t)n * sizeof(*y.start)),
		.end = malloc((size_t)n * sizeof(*y.end)),
		.reach = malloc((size_t)n * sizeof(*y.reach)),
	};

	if (!t || !y.item || !y.start || !y.end || !y.reach) {
		free(t);
		span_index_free(&y);
		return false;
	}
	for (uint32_t i = 0; i < n; i++)
		t[i] = (struct span_sort){ .start = start[i], .item = i };
	qsort(t, n, sizeof(*t), span_cmp);
	for (uint32_t k = 0; k < n; k++) {
		y.item[k] = t[k].item;
		y.start[k] = t[k].start;
		y.end[k] = end[t[k].item];
		y.reach[k] = k && y.reach[k - 1] > y.end[k] ? y.reach[k - 1] : y.end[k];
	}
	free(t);
	span_index_free(x);
	*x = y;
	return true;
}

/*
 * The indexed items over addr into out (at most max), the number found:
 * the last to start at or below addr, then back while one may reach it
 */
static uint32_t span_index_at(const struct span_index *x, uint64_t addr, uint32_t *out,
			      uint32_t max)
{
	uint32_t lo = 0, hi = x->n, n = 0;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (x->start[mid] <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (uint32_t k = lo, seen = 0; k-- > 0 && x->reach[k] > addr && seen < SPAN_OVERLAP_MAX &&
	     n < max; seen++)
		if (addr < x->end[k])
			out[n++] = x->item[k];
	return n;
}

static int pid_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* the mappings indexed again, with the processes they are of */
static void mod_index(struct symbols *s)
{
	uint64_t *st = malloc((size_t)s->n * sizeof(*st)), *en = malloc((size_t)s->n * sizeof(*en));
	uint32_t *pids = malloc((size_t)s->n * sizeof(*pids)), np = 0;

	for (uint32_t i = 0; st && en && pids && i < s->n; i++) {
		st[i] = s->mods[i].m->start;
		en[i] = s->mods[i].m->end;
		pids[i] = s->mods[i].m->pid;
	}
	if (st && en && pids && span_index_build(&s->mod_ix, s->n, st, en)) {
		qsort(pids, s->n, sizeof(*pids), pid_cmp);
		for (uint32_t i = 0; i < s->n; i++)
			if (!np || pids[np - 1] != pids[i])
				pids[np++] = pids[i];
		free(s->mod_pids);
		s->mod_pids = pids;
		s->nmod_pids = np;
		pids = NULL;
	}
	free(st);
	free(en);
	free(pids);
}

/*
 * The mapping of process pid covering addr: the latest recorded at or before
 * ts, else the first after. A process none of whose mappings the trace holds
 * (a trace from before children's mappings were recorded) is looked up in
 * all of them, as then.
 */
static struct module *find_module(struct symbols *s, uint64_t addr, uint64_t ts, uint32_t pid)
{
	uint32_t before[2] = { UINT32_MAX, UINT32_MAX }, after[2] = { UINT32_MAX, UINT32_MAX };
	uint32_t cand[SPAN_FOUND_MAX], nc;
	bool pid_seen;

	if (span_index_stale(&s->mod_ix, s->n))
		mod_index(s);
	pid_seen = s->nmod_pids &&
		   bsearch(&pid, s->mod_pids, s->nmod_pids, sizeof(pid), pid_cmp) != NULL;
	nc = span_index_at(&s->mod_ix, addr, cand, SPAN_FOUND_MAX);
	for (uint32_t i = s->mod_ix.n; i < s->n; i++) {
		const struct eng_mapping *m = s->mods[i].m;

		pid_seen |= m->pid == pid;
		if (addr >= m->start && addr < m->end && nc < SPAN_FOUND_MAX)
			cand[nc++] = i;
	}
	for (uint32_t c = 0; c < nc; c++) {
		uint32_t i = cand[c];
		const struct eng_mapping *m = s->mods[i].m;
		int own = m->pid == pid;

		/* in record order: the last at or before ts, the first after */
		for (int k = 0; k <= own; k++) {
			if (m->ts <= ts) {
				if (before[k] == UINT32_MAX || i > before[k])
					before[k] = i;
			} else if (after[k] == UINT32_MAX || i < after[k]) {
				after[k] = i;
			}
		}
	}
	{
		int k = pid_seen ? 1 : 0;
		uint32_t i = before[k] != UINT32_MAX ? before[k] : after[k];

		return i == UINT32_MAX ? NULL : &s->mods[i];
	}
}

static bool jit_has(const struct eng_jitsym *j, uint64_t addr)
{
	return addr >= j->start && addr - j->start < j->size;
}

/* the JIT symbol over addr: of several, the last one written (a JIT may reuse its code memory) */
static const struct eng_jitsym *find_jit(struct symbols *s, uint64_t addr)
{
	uint32_t n = engine_njitsyms(s->e), best = UINT32_MAX, cand[SPAN_FOUND_MAX], nc;

	if (span_index_stale(&s->jit_ix, n)) {
		uint64_t *st = malloc((size_t)n * sizeof(*st)), *en = malloc((size_t)n * sizeof(*en));

		if (st && en) {
			for (uint32_t i = 0; i < n; i++) {
				const struct eng_jitsym *j = engine_jitsym(s->e, i);

				st[i] = j->start;
				en[i] = j->start + j->size < j->start ? UINT64_MAX : j->start + j->size;
			}
			span_index_build(&s->jit_ix, n, st, en);
		}
		free(st);
		free(en);
	}
	for (uint32_t i = s->jit_ix.n; i < n; i++)
		if (jit_has(engine_jitsym(s->e, i), addr))
			best = i;
	if (best != UINT32_MAX)
		return engine_jitsym(s->e, best);
	nc = span_index_at(&s->jit_ix, addr, cand, SPAN_FOUND_MAX);
	for (uint32_t c = 0; c < nc; c++)
		if (best == UINT32_MAX || cand[c] > best)
			best = cand[c];
	return best == UINT32_MAX ? NULL : engine_jitsym(s->e, best);
}

void symbols_frame(struct symbols *s, const struct eng_stack *st, uint32_t i,
		   struct sym_frame *f)
{
	uint64_t addr = st->ip[i];
	/* a return address: the call lies just before it */
	uint64_t look = (i > 0 || st->ev_type != SB_EV_FAULT) && addr ? addr - 1 : addr;
	const struct eng_jitsym *j;
	struct module *md;

	*f = (struct sym_frame){ .addr = addr };
	if (s && engine_nmappings(s->e) > s->n) {
		/* mappings recorded since (a live capture): add them */
		uint32_t n = engine_nmappings(s->e);
		struct module *m = realloc(s->mods, n * sizeof(*m));

		if (m) {
			memset(m + s->n, 0, (n - s->n) * sizeof(*m));
			/* the engine's table may have moved as it grew */
			for (uint32_t k = 0; k < n; k++)
				m[k].m = engine_mapping(s->e, k);
			s->mods = m;
			s->n = n;
		}
	}
	md = s ? find_module(s, look, st->ts, st->pid) : NULL;
	if (!md) {
		j = s ? find_jit(s, look) : NULL;
		if (j) {
			f->module = "[jit]";
			f->func = j->name;
			f->off = addr - j->start;
		}
		return;
	}
	f->module = md->m->path;
	f->off = addr - md->m->start + md->m->offset;
	if (!md->tried)
		open_module(s, md);
	if (md->m->funcs) {
		uint64_t o = look - md->m->start;

		/* a global name and its alias cover the same bytes: the first listed wins */
		for (uint32_t k = 0; k < md->nvf; k++)
			if (o >= md->vf[k].off && o - md->vf[k].off < md->vf[k].size) {
				f->func = md->vf[k].name;
				f->off = addr - md->m->start - md->vf[k].off;
				break;
			}
		return;
	}
	if (md->mod) {
		uint32_t key = (uint32_t)(md - s->mods) + 1;
		struct hit *h;
		GElf_Off off = 0;
		GElf_Sym sym;
		const char *name;

		if (!s->hits)
			s->hits = calloc(HITS, sizeof(*s->hits));
		h = s->hits ? &s->hits[((look * 0x9e3779b97f4a7c15ull) >> 40 ^ key) & (HITS - 1)] : NULL;
		if (h && h->mod == key && h->look == look) {
			name = h->func;
			off = h->off;
		} else {
			name = dwfl_module_addrinfo(md->mod, look, &off, &sym, NULL, NULL, NULL);
			if (h)
				*h = (struct hit){ .mod = key, .look = look, .func = name, .off = off };
		}
		if (name) {
			f->func = name;
			f->off = off + (addr - look);
		}
	}
}

static void sym_frame_raw(const struct sym_frame *f, char *buf, size_t len)
{
	if (f->func && f->module)
		snprintf(buf, len, "%s+0x%" PRIx64 " (%s)", f->func, f->off, sym_base(f->module));
	else if (f->module && f->module[0] == '[')
		/* a region the kernel names ("[vdso]") */
		snprintf(buf, len, "%s+0x%" PRIx64, f->module, f->off);
	else if (f->module)
		snprintf(buf, len, "[%s+0x%" PRIx64 "]", sym_base(f->module), f->off);
	else
		snprintf(buf, len, "0x%" PRIx64, f->addr);
}

const char *sym_frame_text(const struct sym_frame *f, char *buf, size_t len)
{
	char raw[512];

	/* names from the target's files and perf map: nothing in them may drive a terminal */
	if (len > sizeof(raw))
		len = sizeof(raw);
	sym_frame_raw(f, raw, len);
	return sb_printable(buf, len, raw, strlen(raw));
}

static uint64_t dur(const struct eng_stack *s)
{
	return s->ts - s->start_ns;
}

bool sym_any(const struct engine *e)
{
	struct eng_stack one;

	return engine_stacks(e, 0, 0, UINT64_MAX, &one, 1) > 0;
}

int sym_step_stacks(const struct engine *e, const struct eng_step *st, struct eng_stack *out,
		    int max)
{
	struct eng_stack *all;
	int n, k = 0;

	if (!st->crit_tid || max <= 0)
		return 0;
	all = engine_stacks_copy(e, st->crit_tid, st->start_ns, st->end_ns, &n);
	if (!all)
		return 0;
	/* CPU samples are not events: sym_step_samples reads them */
	{
		int m = 0;

		for (int i = 0; i < n; i++)
			if (all[i].ev_type != SB_EV_STACK)
				all[m++] = all[i];
		n = m;
	}
	/* the max longest, kept sorted; the earlier one first among equals */
	for (int i = 0; i < n; i++) {
		int j;

		if (k == max && dur(&all[i]) <= dur(&out[max - 1]))
			continue;
		j = k < max ? k++ : max - 1;
		while (j > 0 && dur(&out[j - 1]) < dur(&all[i])) {
			out[j] = out[j - 1];
			j--;
		}
		out[j] = all[i];
	}
	free(all);
	return k;
}

#define SAMPLES_MAX 2048

int sym_step_samples(const struct engine *e, struct symbols *sym, const struct eng_step *st,
		     struct sym_frame *top, int *ntop)
{
	struct eng_stack *all;
	struct sym_frame *leaf;
	int n, k = 0;

	*ntop = 0;
	if (!st->crit_tid || !sym)
		return 0;
	all = engine_stacks_copy(e, st->crit_tid, st->start_ns, st->end_ns, &n);
	leaf = n ? malloc((size_t)(n < SAMPLES_MAX ? n : SAMPLES_MAX) * sizeof(*leaf)) : NULL;
	if (!leaf)
		n = 0;
	/* the first SAMPLES_MAX of the step: the comparison below is quadratic */
	for (int i = 0; i < n && k < SAMPLES_MAX; i++)
		if (all[i].ev_type == SB_EV_STACK && all[i].nframes)
			symbols_frame(sym, &all[i], 0, &leaf[k++]);
	/* the most frequent; the first seen among equals */
	for (int i = 0; i < k; i++) {
		int c = 0;

		for (int j = 0; j < k; j++)
			c += leaf[i].func && leaf[j].func ? !strcmp(leaf[i].func, leaf[j].func) &&
							     leaf[i].module == leaf[j].module
							   : !leaf[i].func && !leaf[j].func &&
							     leaf[i].addr == leaf[j].addr;
		if (c > *ntop) {
			*ntop = c;
			*top = leaf[i];
		}
	}
	free(all);
	free(leaf);
	return k;
}

static bool same_stack(const struct eng_stack *a, const struct eng_stack *b)
{
	return a->ev_type == b->ev_type && a->nframes == b->nframes &&
	       !memcmp(a->ip, b->ip, a->nframes * sizeof(a->ip[0]));
}

static int hot_cmp(const void *a, const void *b)
{
	const struct sym_hot *x = a, *y = b;

	if (x->total_ns != y->total_ns)
		return x->total_ns > y->total_ns ? -1 : 1;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return x->s.ts < y->s.ts ? -1 : x->s.ts > y->s.ts;
}

static uint64_t stack_hash(const struct eng_stack *s)
{
	uint64_t h = 1469598103934665603ull ^ s->ev_type;

	for (uint32_t i = 0; i < s->nframes; i++)
		h = (h ^ s->ip[i]) * 1099511628211ull;
	return h;
}

const unsigned sym_kinds[SYM_NKINDS] = { SB_EV_IOSYS, SB_EV_MMSYS, SB_EV_ALLOC, SB_EV_FAULT,
					   SB_EV_SWITCH_IN };

int sym_hot_stacks(const struct engine *e, unsigned ev_type, struct sym_hot *out, int max)
{
	int n, nh = 0;
	struct eng_stack *all = engine_stacks_copy(e, 0, 0, UINT64_MAX, &n);
	size_t tcap = 2 * (size_t)n;
	int32_t *table = all ? malloc(tcap * sizeof(*table)) : NULL;
	struct sym_hot *h = all ? calloc((size_t)n, sizeof(*h)) : NULL;

	if (!all || !table || !h) {
		free(all);
		free(table);
		free(h);
		return 0;
	}
	memset(table, 0xff, tcap * sizeof(*table));
	for (int i = 0; i < n; i++) {
		size_t slot = stack_hash(&all[i]) % tcap;
		int j;

		if (ev_type && all[i].ev_type != ev_type)
			continue;
		while ((j = table[slot]) >= 0 && !same_stack(&h[j].s, &all[i]))
			slot = (slot + 1) % tcap;
		if (j < 0) {
			j = nh++;
			table[slot] = j;
			h[j] = (struct sym_hot){ .s = all[i] };
		} else if (dur(&all[i]) > dur(&h[j].s)) {
			h[j].s = all[i];
		}
		h[j].count++;
		h[j].total_ns += dur(&all[i]);
	}
	qsort(h, (size_t)nh, sizeof(*h), hot_cmp);
	if (nh > max)
		nh = max;
	memcpy(out, h, (size_t)nh * sizeof(*h));
	free(h);
	free(table);
	free(all);
	return nh;
}
