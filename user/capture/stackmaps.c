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
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <elfutils/libdwelf.h>
#include <gelf.h>

#include "capture/probes_internal.h"
#include "capture/stackmaps.h"

#define RANGES_MAX 8192      /* executable mappings remembered */
#define JIT_ADDRS_MAX 4096   /* distinct stack addresses in anonymous code kept for the perf map */
#define PERFMAP_MAX_BYTES (64u << 20)
#define RESCAN_SPACING_NS 1000000000ull

struct range {
	uint64_t start, end;
	bool file;               /* file-backed (a mapping record was written) */
};

struct stackmaps {
	pid_t pid;
	struct range *r;         /* sorted by start */
	size_t n;
	bool stale;              /* a stack named an address outside every range */
	uint64_t next_scan;
	uint64_t *jit;           /* open addressing, 0 = empty */
	size_t njit;
};

struct stackmaps *stackmaps_new(pid_t pid)
{
	struct stackmaps *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->pid = pid;
	s->r = calloc(RANGES_MAX, sizeof(*s->r));
	s->jit = calloc(JIT_ADDRS_MAX, sizeof(*s->jit));
	if (!s->r || !s->jit) {
		stackmaps_free(s);
		return NULL;
	}
	return s;
}

void stackmaps_free(struct stackmaps *s)
{
	if (!s)
		return;
	free(s->r);
	free(s->jit);
	free(s);
}

static const struct range *find(const struct stackmaps *s, uint64_t a)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (s->r[mid].end <= a)
			lo = mid + 1;
		else if (s->r[mid].start > a)
			hi = mid;
		else
			return &s->r[mid];
	}
	return NULL;
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
	if (!s)
		return;
	if (h->type == SB_EV_STACK && h->size >= sizeof(struct sb_stack)) {
		const struct sb_stack *st = (const void *)h;
		uint32_t n = st->nframes < SB_STACK_MAX ? st->nframes : SB_STACK_MAX;

		for (uint32_t i = 0; i < n; i++) {
			const struct range *r = find(s, st->ip[i]);

			/* outside every mapping known: new code, perhaps a JIT's */
			if (!r)
				s->stale = true;
			if (!r || !r->file)
				jit_add(s, st->ip[i]);
		}
	} else if (h->type == SB_EV_MMSYS && h->size >= sizeof(struct sb_mmsys)) {
		const struct sb_mmsys *m = (const void *)h;

		/* new code: mmap or mprotect with PROT_EXEC */
		if ((m->call == SB_SYS_MMAP || m->call == SB_SYS_MPROTECT) && (m->arg & 0x4) &&
		    m->ret >= 0)
			s->stale = true;
	}
}

/* the GNU build id of the file open on fd, as hex, or "" */
static void build_id_hex(int fd, char *out, size_t len)
{
	Elf *elf;
	const void *id = NULL;
	ssize_t n;

	out[0] = 0;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return;
	n = dwelf_elf_gnu_build_id(elf, &id);
	for (ssize_t i = 0; i < n && (size_t)(2 * i + 2) < len; i++)
		snprintf(out + 2 * i, 3, "%02x", ((const unsigned char *)id)[i]);
	elf_end(elf);
}

struct scan_ctx {
	struct stackmaps *s;
	struct probes *p;
	stackmaps_put_fn put;
	void *put_ctx;
	int written;
};

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static bool known(const struct stackmaps *s, uint64_t start, uint64_t end)
{
	const struct range *r = find(s, start);

	return r && r->start == start && r->end == end;
}

static void add_range(struct stackmaps *s, uint64_t start, uint64_t end, bool file)
{
	struct range *r;

	if (s->n >= RANGES_MAX || known(s, start, end))
		return;
	/* a new mapping over an old one replaces it */
	for (size_t i = 0; i < s->n;) {
		if (s->r[i].start < end && start < s->r[i].end) {
			s->r[i] = s->r[--s->n];
			continue;
		}
		i++;
	}
	r = &s->r[s->n++];
	*r = (struct range){ .start = start, .end = end, .file = file };
	qsort(s->r, s->n, sizeof(*s->r), cmp_range);
}

/*
 * One line of /proc/PID/maps: executable mappings only. File-backed ones get
 * a mapping record (their file opened through open_mapped, never by a name the
 * target controls, to read its build id); anonymous ones are remembered so
 * that their addresses go to the perf map.
 */
static void scan_line(struct scan_ctx *c, const char *line)
{
	unsigned long start, end, off, ino;
	unsigned int maj, min;
	char perms[8], text[PATH_MAX + 256], bid[96];
	struct mapping *m;
	int n = 0, fd;
	size_t len;
	const char *p;

	if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %n", &start, &end, perms, &off, &maj, &min,
		   &ino, &n) < 7 || !n || perms[2] != 'x')
		return;
	/* full: a target mapping more than RANGES_MAX pieces of code gets no more records */
	if (known(c->s, start, end) || c->s->n >= RANGES_MAX)
		return;
	p = line + n;
	while (*p == ' ')
		p++;
	if (!ino || *p != '/') {
		add_range(c->s, start, end, false);
		return;
	}
	m = malloc(sizeof(*m));
	if (!m)
		return;
	len = strcspn(p, "\n");
	if (len >= sizeof(m->path))
		len = sizeof(m->path) - 1;
	memcpy(m->path, p, len);
	m->path[len] = 0;
	m->deleted = len > 10 && !strcmp(m->path + len - 10, " (deleted)");
	if (m->deleted)
		m->path[len - 10] = 0;
	m->start = start;
	m->end = end;
	m->dev = makedev(maj, min);
	m->ino = ino;
	bid[0] = 0;
	fd = open_mapped(c->p, m);
	if (fd >= 0) {
		build_id_hex(fd, bid, sizeof(bid));
		drop_lease(fd);
		close(fd);
	}
	n = snprintf(text, sizeof(text),
		     "start=0x%lx\nend=0x%lx\noffset=0x%lx\ndev=%u:%u\ninode=%lu\nbuild_id=%s\n"
		     "deleted=%d\npath=%s\n",
		     start, end, off, maj, min, ino, bid, m->deleted, m->path);
	free(m);
	if (n > 0 && (size_t)n < sizeof(text)) {
		c->put(c->put_ctx, SB_REC_MAPPING, text, (size_t)n);
		c->written++;
	}
	add_range(c->s, start, end, true);
}

int stackmaps_scan(struct stackmaps *s, struct probes *p, uint64_t now, stackmaps_put_fn put,
		   void *ctx)
{
	struct scan_ctx c = { .s = s, .p = p, .put = put, .put_ctx = ctx };
	char path[64], *line = NULL;
	size_t cap = 0;
	FILE *f;

	if (!s)
		return 0;
	s->stale = false;
	s->next_scan = now + RESCAN_SPACING_NS;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)s->pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0)
		scan_line(&c, line);
	free(line);
	fclose(f);
	return c.written;
}

int stackmaps_maybe_scan(struct stackmaps *s, struct probes *p, uint64_t now,
			 stackmaps_put_fn put, void *ctx)
{
	if (!s || !s->stale || now < s->next_scan)
		return 0;
	return stackmaps_scan(s, p, now, put, ctx);
}

static bool jit_any_in(const struct stackmaps *s, uint64_t lo, uint64_t hi)
{
	for (size_t i = 0; i < JIT_ADDRS_MAX; i++)
		if (s->jit[i] >= lo && s->jit[i] < hi)
			return true;
	return false;
}

/*
 * /tmp/perf-PID.map: "START SIZE name" a line, hex without 0x (the format
 * perf reads, written by Python's -X perf, the JVM and other JITs). Opened
 * without following links, only as a regular file owned by the target's user
 * or root (SECURITY.md): anyone can create a file in /tmp.
 */
int stackmaps_perfmap(struct stackmaps *s, uid_t target_uid, stackmaps_put_fn put, void *ctx)
{
	char path[64], *line = NULL, *buf;
	size_t cap = 0, used = 0, bufcap = 16384;
	struct stat st;
	int fd, lines = 0;
	FILE *f;

	if (!s || !s->njit)
		return 0;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)s->pid);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    (st.st_uid != target_uid && st.st_uid != 0) || st.st_size > PERFMAP_MAX_BYTES) {
		close(fd);
		return 0;
	}
	f = fdopen(fd, "re");
	buf = malloc(bufcap);
	if (!f || !buf) {
		if (f)
			fclose(f);
		else
			close(fd);
		free(buf);
		return -ENOMEM;
	}
	while (getline(&line, &cap, f) > 0) {
		unsigned long long start, size;
		int n = 0;
		size_t len;

		if (sscanf(line, "%llx %llx %n", &start, &size, &n) < 2 || !n || !size ||
		    start + size < start || !jit_any_in(s, start, start + size))
			continue;
		len = strcspn(line + n, "\n");
		if (len > 512)
			len = 512;
		if (used + len + 64 > bufcap) {
			put(ctx, SB_REC_PERFMAP, buf, used);
			used = 0;
		}
		used += (size_t)snprintf(buf + used, bufcap - used, "%llx %llx %.*s\n", start, size,
					 (int)len, line + n);
		lines++;
	}
	if (used)
		put(ctx, SB_REC_PERFMAP, buf, used);
	free(line);
	free(buf);
	fclose(f);
	return lines;
}
