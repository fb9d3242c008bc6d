// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Load and attach the probe families. Portability comes from probing what
 * this kernel accepts, not from its version: tp_btf where it loads, raw_tp
 * otherwise, each program attached on its own so one missing tracepoint costs
 * one probe, not the capture. Nothing here needs tracefs.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <linux/capability.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "format/costs.h"
#include "capture/probes.h"
#include "capture/target.h"
#include "base/util.h"
#include "sched.skel.h"
#include "mem.skel.h"
#include "alloc.skel.h"
#include "marks.skel.h"

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
/* an ELF section larger than this is not read (a note or symbol table never is) */
#define ELF_SECTION_MAX (256u << 20)

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
};

struct file_set {
	struct file_key *t;
	uint32_t cap, n;            /* slots (a power of two), entries */
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

struct probes {
	struct probe_opts o;
	struct sched_bpf *sched;
	struct mem_bpf *mem;
	struct alloc_bpf *alloc;
	struct marks_bpf *marks;
	struct bpf_link *links[MAX_LINKS];
	int nlinks;
	struct probe_status st[PROBES_MAX_STATUS];
	int nst;
	const char *sched_variant;
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
	pthread_t detach_threads[2 * ALLOC_NSYMS + 8];
	int ndetach;
	uint32_t alloc_mask;         /* alloc_syms[] that attached the first time */
	char alloc_path[PATH_MAX];   /* the path they were attached through */
	int alloc_fd;                /* the library, verified, kept open for alloc_path; -1: none */
	uint64_t alloc_off[ALLOC_NSYMS]; /* uprobe_multi: their offsets in that file */
	bool alloc_multi;            /* the allocator's programs take uprobe_multi links */
	bool alloc_attached;
	bool alloc_on;
	bool step_uprobe_attached;
	bool alloc_flush;            /* flush_burst loaded: the agent ends idle bursts */
};

/*
 * What every family's target filter needs (bpf/common.bpf.h), set between
 * open and load: the target, the wakeup threshold, its credentials at attach.
 */
#define SET_TARGET(p, skel) \
	do { \
		(skel)->rodata->targ_tgid = (p)->o.pid; \
		(skel)->rodata->wake_bytes = (p)->o.wake_bytes; \
		memcpy((void *)(skel)->rodata->targ_ids, (p)->ids, sizeof((p)->ids)); \
		(skel)->rodata->targ_cap_prm = (p)->cap_prm; \
		(skel)->rodata->targ_creds_known = (p)->creds_known; \
	} while (0)

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

static void status(struct probes *p, const char *name, bool ok, bool essential,
		   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/*
 * One probe's status. The detail often names a file the target mapped, under
 * a name it chose: it is escaped (target.h sb_escape) before it can reach a
 * terminal or a note.
 */
static void status(struct probes *p, const char *name, bool ok, bool essential,
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

static int keep_link(struct probes *p, struct bpf_link *l)
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
static const char *uprobe_why(int err)
{
	if (err == EACCES || err == EPERM)
		return "not allowed: uprobes need CAP_SYS_ADMIN on this kernel";
	return strerror(err);
}

/* ---- ELF: USDT notes ---- */

static uint64_t n_elf_parses, n_scans, last_scan_ns, max_scan_ns, n_deferred;

void probes_scan_counters(struct probes_scan_counters *out)
{
	out->elf_parses = __atomic_load_n(&n_elf_parses, __ATOMIC_RELAXED);
	out->scans = __atomic_load_n(&n_scans, __ATOMIC_RELAXED);
	out->last_scan_ns = __atomic_load_n(&last_scan_ns, __ATOMIC_RELAXED);
	out->max_scan_ns = __atomic_load_n(&max_scan_ns, __ATOMIC_RELAXED);
	out->deferred = __atomic_load_n(&n_deferred, __ATOMIC_RELAXED);
}

/*
 * An ELF handle on fd. Read with pread, not mapped: the target may truncate
 * a file it owns under us, which would be SIGBUS in a mapping; a read just
 * comes back short. libelf checks every section against the file's size.
 */
static Elf *elf_open_fd(int fd)
{
	Elf *e;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return NULL;
	__atomic_add_fetch(&n_elf_parses, 1, __ATOMIC_RELAXED);
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (e && elf_kind(e) != ELF_K_ELF) {
		elf_end(e);
		e = NULL;
	}
	return e;
}

/* the section's data, if it is not unreasonably large */
static Elf_Data *section_data(Elf_Scn *scn, const GElf_Shdr *sh)
{
	if (sh->sh_type == SHT_NOBITS || sh->sh_size > ELF_SECTION_MAX)
		return NULL;
	return elf_getdata(scn, NULL);
}

bool elf_has_usdt(int fd, const char *provider, const char *name)
{
	bool found = false;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	Elf *e = elf_open_fd(fd);

	if (!e || elf_getshdrstrndx(e, &shstrndx))
		goto out;
	while (!found && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *sname;
		Elf_Data *data;
		GElf_Nhdr nh;
		size_t off = 0, noff, doff;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		sname = elf_strptr(e, shstrndx, sh.sh_name);
		if (!sname || strcmp(sname, ".note.stapsdt"))
			continue;
		data = section_data(scn, &sh);
		if (!data)
			continue;
		while (!found && (off = gelf_getnote(data, off, &nh, &noff, &doff)) > 0) {
			const char *desc = (const char *)data->d_buf + doff;
			size_t addrs = gelf_getclass(e) == ELFCLASS32 ? 12 : 24;
			const char *prov, *pname;

			if (nh.n_type != 3 || nh.n_descsz <= addrs)
				continue;
			prov = desc + addrs;
			if (!memchr(prov, 0, nh.n_descsz - addrs))
				continue;
			pname = prov + strlen(prov) + 1;
			if (pname >= desc + nh.n_descsz ||
			    !memchr(pname, 0, desc + nh.n_descsz - pname))
				continue;
			found = !strcmp(prov, provider) && !strcmp(pname, name);
		}
	}
out:
	if (e)
		elf_end(e);
	return found;
}

/* ---- the target's mappings ---- */

struct mapping {
	unsigned long start, end;   /* the range, as /proc/PID/map_files names it */
	dev_t dev;                  /* of the mapped inode, from the maps line */
	uint64_t ino;
	bool deleted;               /* " (deleted)": no name leads to it any more */
	char path[PATH_MAX];        /* as the target sees it (unescaped, " (deleted)" cut) */
};

/*
 * One line of /proc/PID/maps: "START-END PERMS OFFSET MAJ:MIN INODE   PATH".
 * The path is the rest of the line: it may hold spaces, and the kernel
 * writes a newline in it as \012 (nothing else is escaped, so a name that
 * holds "\012" itself reads back wrong: the inode check catches that).
 * False for anything but a file (anonymous memory, [stack], anon_inode:...).
 */
static bool parse_maps_line(const char *line, struct mapping *m)
{
	unsigned long start, end, ino;
	unsigned int maj, min;
	const char *p;
	size_t o = 0, len;
	int n = 0;

	if (sscanf(line, "%lx-%lx %*s %*x %x:%x %lu %n", &start, &end, &maj, &min, &ino, &n) < 5 ||
	    !n || !ino)
		return false;
	p = line + n;
	while (*p == ' ')
		p++;
	if (*p != '/')
		return false;
	len = strcspn(p, "\n");
	for (size_t i = 0; i < len && o + 1 < sizeof(m->path); i++) {
		if (p[i] == '\\' && i + 4 <= len && !strncmp(p + i, "\\012", 4)) {
			m->path[o++] = '\n';
			i += 3;
		} else {
			m->path[o++] = p[i];
		}
	}
	m->path[o] = 0;
	m->deleted = o > 10 && !strcmp(m->path + o - 10, " (deleted)");
	if (m->deleted)
		m->path[o - 10] = 0;
	m->start = start;
	m->end = end;
	m->dev = makedev(maj, min);
	m->ino = ino;
	return true;
}

/* is st the inode the maps line names? */
static bool same_inode(const struct stat *st, const struct mapping *m, int fd, bool by_map_files)
{
	struct statfs fs;

	if (!S_ISREG(st->st_mode) || (uint64_t)st->st_ino != m->ino)
		return false;
	if (st->st_dev == m->dev)
		return true;
	/*
	 * btrfs gives each subvolume a device number of its own in stat, the
	 * maps line the file system's. Through map_files the inode is the
	 * mapped one anyway; by a name it could be another subvolume's file
	 * with the same inode number.
	 */
	return by_map_files && !fstatfs(fd, &fs) && fs.f_type == 0x9123683E /* BTRFS_SUPER_MAGIC */;
}

/*
 * A read lease on the file open on fd, held until fd is closed. libbpf opens
 * the file again, blocking (and maps it to parse it): a write lease the
 * target took on its file would keep that open waiting for the lease break
 * time (45 s), and a truncation would be SIGBUS in that mapping. Neither can
 * happen while we hold a read lease: no write lease is granted beside it,
 * and an open for writing or a truncation waits for us. It cannot be taken
 * if the file is open for writing somewhere (-ETXTBSY: the file is left
 * alone). Where leases cannot be taken (disabled, a file system without
 * them) the target cannot take one either; without CAP_LEASE (an agent with
 * CAP_BPF and CAP_PERFMON alone) the file goes on unprotected. Should a
 * writer break the lease, the kernel tells us with SIGURG, which is ignored,
 * not SIGIO, which would end the agent.
 */
static int hold_read_lease(int fd)
{
	if (fcntl(fd, F_SETSIG, SIGURG))
		return -errno;
	if (!fcntl(fd, F_SETLEASE, F_RDLCK))
		return 0;
	return errno == EAGAIN ? -ETXTBSY : 0;
}

static void drop_lease(int fd)
{
	fcntl(fd, F_SETLEASE, F_UNLCK);
}

/*
 * Open the file of mapping m for reading, never by a name the target
 * controls. Through /proc/PID/map_files/START-END, the kernel's own
 * reference to the mapped file (needs CAP_SYS_ADMIN); without it, through
 * /proc/PID/root/PATH, following no symlink at the end. Either way the path
 * is first opened O_PATH, which opens nothing (no FIFO, no device's open),
 * and only a regular file with the device and inode of the maps line is
 * then opened, through that descriptor, and O_NONBLOCK (a lease the target
 * holds would make a plain open wait). fd, or -errno (-ESTALE: not the
 * mapped file, or not a regular one; -ENOENT: the mapping is gone).
 */
static int open_mapped(struct probes *p, const struct mapping *m)
{
	char path[PATH_MAX + 64];
	struct stat st;
	bool by_map_files = !p->no_map_files;
	int pfd = -1, fd, err;

	if (by_map_files) {
		snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", (int)p->o.pid, m->start,
			 m->end);
		pfd = open(path, O_PATH | O_CLOEXEC);
		if (pfd < 0 && (errno == EPERM || errno == EACCES)) {
			p->no_map_files = true;
			by_map_files = false;
		} else if (pfd < 0) {
			return -errno;
		}
	}
	if (!by_map_files) {
		if (m->deleted)
			return -ENOENT;
		snprintf(path, sizeof(path), "/proc/%d/root%s", (int)p->o.pid, m->path);
		pfd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (pfd < 0)
			return -errno;
	}
	if (fstat(pfd, &st) || !same_inode(&st, m, pfd, by_map_files)) {
		close(pfd);
		return -ESTALE;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", pfd);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	err = -errno;
	close(pfd);
	if (fd < 0)
		return err;
	if (fstat(fd, &st) || !same_inode(&st, m, fd, by_map_files)) {
		close(fd);
		return -ESTALE;
	}
	err = hold_read_lease(fd);
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

/* the path that names the file open on fd, for libbpf and the kernel */
static void fd_path(int fd, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/self/fd/%d", fd);
}

/*
 * The FUSE mounts of the target's mount namespace. A FUSE file system is
 * served by a process, the target's own if it mounted one: an open or a read
 * of a file there (even a stat) waits for that process, forever if it wants.
 * Such files are never touched.
 */
static void read_fuse_devs(struct probes *p)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	int lines = 0;
	FILE *f;

	p->fuse_read = true;
	p->nfuse_devs = 0;
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)p->o.pid);
	f = fopen(path, "re");
	if (!f)
		return;
	/* a mount namespace of the target's may hold as many mounts as it likes */
	while (getline(&line, &cap, f) > 0 && lines++ < 200000) {
		unsigned int maj, min;
		const char *sep = strstr(line, " - ");
		dev_t *d;

		if (!sep || sscanf(line, "%*d %*d %u:%u", &maj, &min) != 2 ||
		    (strncmp(sep + 3, "fuse ", 5) && strncmp(sep + 3, "fuse.", 5) &&
		     strncmp(sep + 3, "fuseblk ", 8)))
			continue;
		d = realloc(p->fuse_devs, (p->nfuse_devs + 1) * sizeof(*d));
		if (!d)
			break;
		p->fuse_devs = d;
		p->fuse_devs[p->nfuse_devs++] = makedev(maj, min);
	}
	free(line);
	fclose(f);
}

static bool on_fuse(struct probes *p, dev_t dev)
{
	if (!p->fuse_read)
		read_fuse_devs(p);
	for (int i = 0; i < p->nfuse_devs; i++)
		if (p->fuse_devs[i] == dev)
			return true;
	return false;
}

/* ---- the set of mapped files looked at ---- */

static uint32_t file_hash(uint64_t dev, uint64_t ino)
{
	uint64_t h = ino * 0x9e3779b97f4a7c15ull ^ (dev + 0x632be59bd9b4e019ull) * 0xc2b2ae3d27d4eb4full;

	return (uint32_t)(h ^ h >> 32);
}

static struct file_key *file_slot(struct file_key *t, uint32_t cap, uint64_t dev, uint64_t ino)
{
	uint32_t i = file_hash(dev, ino) & (cap - 1);

	while (t[i].used && (t[i].dev != dev || t[i].ino != ino))
		i = (i + 1) & (cap - 1);
	return &t[i];
}

/*
 * The entry of file dev:ino, added if new; NULL when the set is full (or
 * memory is short): such a file is not looked at.
 */
static struct file_key *file_get(struct file_set *s, uint64_t dev, uint64_t ino)
{
	struct file_key *k;

	if (s->cap) {
		k = file_slot(s->t, s->cap, dev, ino);
		if (k->used)
			return k;
	}
	if (s->n >= FILES_MAX)
		return NULL;
	/* at most half full */
	if ((s->n + 1) * 2 > s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 1024;
		struct file_key *t = calloc(cap, sizeof(*t));

		if (!t)
			return NULL;
		for (uint32_t i = 0; i < s->cap; i++)
			if (s->t[i].used)
				*file_slot(t, cap, s->t[i].dev, s->t[i].ino) = s->t[i];
		free(s->t);
		s->t = t;
		s->cap = cap;
	}
	k = file_slot(s->t, s->cap, dev, ino);
	k->used = 1;
	k->dev = dev;
	k->ino = ino;
	s->n++;
	return k;
}

/*
 * cb once per mapping of a file in pid's maps, with the line parsed; it
 * returns non-zero to stop. The number of file mappings, or -errno.
 */
static int for_each_mapping(pid_t pid, int (*cb)(void *ctx, const struct mapping *m), void *ctx)
{
	char path[64], *line = NULL;
	struct mapping *m = malloc(sizeof(*m));
	size_t cap = 0;
	FILE *f;
	int n = 0;

	if (!m)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f) {
		free(m);
		return -errno;
	}
	/* fewer, larger reads: the kernel builds the text as it is read */
	setvbuf(f, NULL, _IOFBF, 1 << 16);
	while (getline(&line, &cap, f) > 0) {
		if (!parse_maps_line(line, m))
			continue;
		n++;
		if (cb(ctx, m))
			break;
	}
	free(line);
	fclose(f);
	free(m);
	return n;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

static bool is_libc(const char *path)
{
	const char *b = base_name(path);

	return !strncmp(b, "libc.so", 7) || !strncmp(b, "libc-2.", 7) || !strncmp(b, "libc-", 5);
}

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

/* a uprobe (ret: uretprobe) at off in the file at path for process pid: fd or -errno */
static int uprobe_multi_link(int prog_fd, const char *path, uint64_t off, bool ret, pid_t pid)
{
	struct sb_uprobe_multi_attr a;
	int fd;

	/* padding too: the kernel refuses an attribute with stray bytes past its fields */
	memset(&a, 0, sizeof(a));
	a.prog_fd = prog_fd;
	a.attach_type = SB_TRACE_UPROBE_MULTI;
	a.path = (uintptr_t)path;
	a.offsets = (uintptr_t)&off;
	a.cnt = 1;
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
	int fd = uprobe_multi_link(bpf_program__fd(p->alloc->progs.malloc_enter), "/", 0, false, 0);

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

/* entry (or return) probe of the allocator's program prog at alloc_syms[i] */
static int alloc_link(struct probes *p, struct bpf_program *prog, size_t i, const char *path,
		      bool ret, struct alink *out)
{
	LIBBPF_OPTS(bpf_uprobe_opts, o, .func_name = alloc_syms[i].sym, .retprobe = ret);

	out->l = NULL;
	out->fd = -1;
	if (p->alloc_multi) {
		if (!p->alloc_off[i])
			return -ENOENT;
		out->fd = uprobe_multi_link(bpf_program__fd(prog), path, p->alloc_off[i], ret,
					    p->o.pid);
		return out->fd < 0 ? out->fd : 0;
	}
	/*
	 * By its offset where our own parse found it: libbpf then opens nothing
	 * (the overhead guard attaches again at any time, without our lease)
	 */
	if (p->alloc_off[i]) {
		o.func_name = NULL;
		out->l = bpf_program__attach_uprobe_opts(prog, p->o.pid, path, p->alloc_off[i], &o);
	} else {
		out->l = bpf_program__attach_uprobe_opts(prog, p->o.pid, path, 0, &o);
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
static int attach_alloc_sym(struct probes *p, size_t i, const char *path, bool *second)
{
	struct bpf_object *obj = p->alloc->obj;
	struct bpf_program *prog = bpf_object__find_program_by_name(obj, alloc_syms[i].prog);
	struct alink le, lr;
	int err;

	*second = false;
	err = alloc_link(p, p->alloc->progs.alloc_return, i, path, true, &lr);
	if (err)
		return err;
	err = alloc_link(p, prog, i, path, false, &le);
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
	p->alloc_links[p->nalloc_links++] = lr;
	p->alloc_links[p->nalloc_links++] = le;
	return 0;
}

/*
 * Where each function of alloc_syms[] starts in the ELF file open on fd, as
 * a file offset (what a uprobe takes); 0 for those it does not define. A
 * global definition is preferred to a weak one.
 */
static void elf_alloc_offsets(int fd, uint64_t off[ALLOC_NSYMS])
{
	bool global[ALLOC_NSYMS] = { false };
	Elf_Scn *scn = NULL;
	Elf *e;

	memset(off, 0, ALLOC_NSYMS * sizeof(*off));
	e = elf_open_fd(fd);
	if (!e)
		return;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    !sh.sh_entsize || !(data = section_data(scn, &sh)))
			continue;
		for (size_t k = 0; k < sh.sh_size / sh.sh_entsize; k++) {
			GElf_Sym sym;
			GElf_Shdr ts;
			const char *name;
			Elf_Scn *text;

			if (!gelf_getsym(data, (int)k, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
			    sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE ||
			    !sym.st_value)
				continue;
			name = elf_strptr(e, sh.sh_link, sym.st_name);
			if (!name)
				continue;
			for (size_t i = 0; i < ALLOC_NSYMS; i++) {
				bool g = GELF_ST_BIND(sym.st_info) == STB_GLOBAL;

				if (strcmp(name, alloc_syms[i].sym) || (off[i] && (global[i] || !g)))
					continue;
				text = elf_getscn(e, sym.st_shndx);
				if (!text || !gelf_getshdr(text, &ts) || sym.st_value < ts.sh_addr)
					continue;
				off[i] = sym.st_value - ts.sh_addr + ts.sh_offset;
				global[i] = g;
			}
		}
	}
	elf_end(e);
}

/*
 * The allocator probes on the library open on fd (verified: the file the
 * target maps), shown as `shown`; a copy of fd is kept open as long as the
 * probes may be attached again (the overhead guard), and they are attached
 * through its /proc/self/fd path. fd < 0: path is the user's --alloc-lib.
 */
static void attach_alloc(struct probes *p, int fd, const char *path, const char *shown)
{
	char fpath[64];
	const char *open_path = path;
	int ok = 0, own = -1;

	if (fd >= 0) {
		own = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (own < 0) {
			status(p, "alloc", false, false, "cannot keep %s open: %s", shown,
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
			elf_alloc_offsets(efd, p->alloc_off);
			if (efd != own)
				close(efd);
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(alloc_syms); i++) {
		char name[48];
		bool second;
		int err = attach_alloc_sym(p, i, open_path, &second);

		snprintf(name, sizeof(name), "alloc:%s", alloc_syms[i].sym);
		if (err && second)
			status(p, name, false, false, "uretprobe attached, uprobe failed: %s",
			       strerror(-err));
		else if (err == -ENOENT || err == -ESRCH)
			status(p, name, false, false, "%s has no %s", shown, alloc_syms[i].sym);
		else if (err)
			status(p, name, false, false, "uprobe on %s in %s: %s", alloc_syms[i].sym,
			       shown, uprobe_why(-err));
		if (err)
			continue;
		status(p, name, true, false, "uprobe %s", shown);
		p->alloc_mask |= 1u << i;
		ok++;
	}
	if (ok) {
		snprintf(p->alloc_path, sizeof(p->alloc_path), "%s", open_path);
		/* kept open for the path, not for the lease: the target's writers need not wait */
		if (own >= 0)
			drop_lease(own);
		p->alloc_fd = own;
		p->alloc_attached = true;
		p->alloc_on = true;
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
static void *destroy_link(void *arg)
{
	struct alink *a = arg;

	alink_destroy(a);
	free(a);
	return NULL;
}

/* destroy a link on a thread of its own; a (copied) is done with either way */
static void destroy_async(struct probes *p, const struct alink *a)
{
	struct alink *copy = malloc(sizeof(*copy));
	pthread_attr_t attr;
	bool have_attr = !pthread_attr_init(&attr);
	int err = -1;

	/* the thread only waits in the kernel: a small stack will do */
	if (have_attr)
		pthread_attr_setstacksize(&attr, 256 << 10);
	if (copy && p->ndetach < (int)ARRAY_SIZE(p->detach_threads)) {
		*copy = *a;
		err = pthread_create(&p->detach_threads[p->ndetach], have_attr ? &attr : NULL,
				     destroy_link, copy);
	}
	if (have_attr)
		pthread_attr_destroy(&attr);
	if (!err) {
		p->ndetach++;
		return;
	}
	free(copy);
	if (a->l)
		bpf_link__destroy(a->l); /* no thread: the slow way */
	else if (a->fd >= 0)
		close(a->fd);
}

static void detach_alloc(struct probes *p)
{
	while (p->nalloc_links > 0)
		destroy_async(p, &p->alloc_links[--p->nalloc_links]);
	p->alloc_on = false;
}

/* wait for the links being destroyed */
static void reap_detach(struct probes *p)
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

int probes_alloc_attach(struct probes *p, bool on)
{
	int ok = 0, err = -ENOENT;

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
	for (size_t i = 0; i < ARRAY_SIZE(alloc_syms); i++) {
		bool second;
		int e;

		if (!(p->alloc_mask & (1u << i)))
			continue;
		e = attach_alloc_sym(p, i, p->alloc_path, &second);
		if (e)
			err = e;
		else
			ok++;
	}
	p->alloc_on = ok > 0;
	return ok ? ok : err;
}

/* ---- CUDA driver ---- */

static const struct {
	const char *sym;
	__u32 fn;
} cuda_syms[] = {
	{ "cuLaunchKernel", SB_CU_LAUNCH },
	{ "cuLaunchKernelEx", SB_CU_LAUNCH },
	{ "cuStreamSynchronize", SB_CU_SYNC },
	{ "cuCtxSynchronize", SB_CU_SYNC },
	{ "cuEventSynchronize", SB_CU_SYNC },
	{ "cuMemAlloc_v2", SB_CU_ALLOC },
	{ "cuMemAllocAsync", SB_CU_ALLOC },
	{ "cuMemAllocManaged", SB_CU_ALLOC },
	{ "cuMemAllocHost_v2", SB_CU_ALLOC },
	{ "cuMemAllocPitch_v2", SB_CU_ALLOC },
	{ "cuMemFree_v2", SB_CU_FREE },
	{ "cuMemFreeAsync", SB_CU_FREE },
	{ "cuMemFreeHost", SB_CU_FREE },
	{ "cuMemcpy", SB_CU_MEMCPY },
	{ "cuMemcpyAsync", SB_CU_MEMCPY },
	{ "cuMemcpyHtoD_v2", SB_CU_MEMCPY },
	{ "cuMemcpyDtoH_v2", SB_CU_MEMCPY },
	{ "cuMemcpyHtoDAsync_v2", SB_CU_MEMCPY },
	{ "cuMemcpyDtoHAsync_v2", SB_CU_MEMCPY },
};

const char *probes_cuda_symbol(unsigned idx)
{
	return idx < ARRAY_SIZE(cuda_syms) ? cuda_syms[idx].sym : "?";
}

static void attach_cuda(struct probes *p, const char *open_path, const char *shown)
{
	int ok = 0;

	for (size_t i = 0; i < ARRAY_SIZE(cuda_syms); i++) {
		__u64 cookie = ((__u64)cuda_syms[i].fn << 16) | i;
		LIBBPF_OPTS(bpf_uprobe_opts, eo, .func_name = cuda_syms[i].sym, .bpf_cookie = cookie);
		LIBBPF_OPTS(bpf_uprobe_opts, ro, .func_name = cuda_syms[i].sym, .retprobe = true);
		struct bpf_link *le, *lr;

		le = bpf_program__attach_uprobe_opts(p->marks->progs.cuda_enter, p->o.pid,
						     open_path, 0, &eo);
		if (!le)
			continue;
		lr = bpf_program__attach_uprobe_opts(p->marks->progs.cuda_return, p->o.pid,
						     open_path, 0, &ro);
		if (!lr) {
			bpf_link__destroy(le);
			continue;
		}
		keep_link(p, le);
		keep_link(p, lr);
		ok++;
	}
	if (ok)
		status(p, "cuda-driver", true, false, "%d symbols of %s", ok, shown);
	else
		status(p, "cuda-driver", false, false, "no symbols in %s", shown);
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
static void probe_file(struct probes *p, struct scan *sc, const struct mapping *m, int fd)
{
	const char *b = base_name(m->path);
	char fpath[64];

	fd_path(fd, fpath, sizeof(fpath));
	if (elf_has_usdt(fd, "stepblame", "step")) {
		if (p->nusdt >= USDT_MAX) {
			sc->usdt_left_out++;
		} else {
			struct bpf_link *l = bpf_program__attach_usdt(p->marks->progs.step_usdt,
								      p->o.pid, fpath, "stepblame",
								      "step", NULL);
			int err = keep_link(p, l);

			p->nusdt++;
			status(p, "usdt:stepblame:step", !err, false, err ? "%s: %s" : "%s%s",
			       m->path, err ? uprobe_why(-err) : "");
		}
	}
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
	probe_file(p, sc, m, fd);
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
		status(p, "usdt:stepblame:step", false, false,
		       "%llu more mapped files carry the step note (%llu in all so far): at most %d "
		       "get probes, the first ones mapped", (unsigned long long)sc.usdt_left_out,
		       (unsigned long long)p->usdt_left_out, USDT_MAX);
	}
	p->files_left_out = sc.files_left_out;
	if (sc.files_left_out && !p->files_full_said) {
		p->files_full_said = true;
		status(p, "mapped-files", false, false,
		       "the target maps more than %d files: %llu mappings of further ones were "
		       "not looked at", FILES_MAX, (unsigned long long)sc.files_left_out);
	}
	if (sc.fuse) {
		p->fuse_skipped += sc.fuse;
		if (!p->fuse_said) {
			p->fuse_said = true;
			status(p, "mapped-files", false, false,
			       "%llu mapped files on FUSE mounts not looked at (their server, maybe "
			       "the target, could keep the agent waiting): no probes in them",
			       (unsigned long long)sc.fuse);
		}
	}
	return n;
}

static bool target_stopped_now(const struct probes *p);

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

struct find_lib {
	struct probes *p;
	const char *want;
	struct mapping m;
	bool found;
};

static int find_lib_cb(void *ctx, const struct mapping *m)
{
	struct find_lib *f = ctx;
	const char *b = base_name(m->path);

	if (!strcmp(m->path, f->want) || !strncmp(b, f->want, strlen(f->want))) {
		f->m = *m;
		f->found = true;
		return 1;
	}
	return 0;
}

static void attach_step_uprobe(struct probes *p)
{
	char spec[PATH_MAX], *colon, fpath[64];
	struct find_lib *f = calloc(1, sizeof(*f));
	const char *path;
	int fd = -1, err;

	if (!f) {
		status(p, "step-uprobe", false, true, "out of memory");
		return;
	}
	snprintf(spec, sizeof(spec), "%s", p->o.step_uprobe);
	colon = strrchr(spec, ':');
	if (!colon || colon == spec || !colon[1]) {
		status(p, "step-uprobe", false, true, "expected LIB:SYM, got '%s'", spec);
		free(f);
		return;
	}
	*colon = 0;
	f->p = p;
	f->want = spec;
	for_each_mapping(p->o.pid, find_lib_cb, f);
	/* the library the target maps, opened safely; else LIB as the user gave it */
	path = spec;
	if (f->found) {
		fd = open_mapped(p, &f->m);
		if (fd < 0) {
			status(p, "step-uprobe", false, true, "%s:%s: cannot open %s as mapped: %s",
			       spec, colon + 1, f->m.path, strerror(-fd));
			free(f);
			return;
		}
		fd_path(fd, fpath, sizeof(fpath));
		path = fpath;
	}
	LIBBPF_OPTS(bpf_uprobe_opts, o, .func_name = colon + 1);
	struct bpf_link *l = bpf_program__attach_uprobe_opts(p->marks->progs.step_uprobe,
							     p->o.pid, path, 0, &o);
	err = keep_link(p, l);
	if (fd >= 0)
		close(fd);
	status(p, "step-uprobe", !err, true, err ? "%s:%s: %s" : "%s:%s%s", spec, colon + 1,
	       err ? uprobe_why(-err) : "");
	p->step_uprobe_attached = !err;
	free(f);
}

/* ---- scheduler family: tp_btf, else raw_tp ---- */

static bool tp_exists(const struct btf *vmlinux, const char *tp)
{
	char name[128];

	if (!vmlinux)
		return true; /* cannot tell: let the load decide */
	snprintf(name, sizeof(name), "btf_trace_%s", tp);
	return btf__find_by_name_kind(vmlinux, name, BTF_KIND_TYPEDEF) > 0;
}

static int open_sched(struct probes *p, bool use_btf, const struct btf *vmlinux)
{
	struct bpf_program *prog;
	struct sched_bpf *s = sched_bpf__open();
	int err;

	if (!s)
		return -errno;
	SET_TARGET(p, s);
	bpf_map__set_max_entries(s->maps.events, p->o.ring_bytes);
	bpf_map__set_max_entries(s->maps.nwait, p->ncpus);
	bpf_map__set_max_entries(s->maps.cpu_node, p->ncpus);
	bpf_object__for_each_program(prog, s->obj) {
		const char *sec = bpf_program__section_name(prog);
		const char *tp = strchr(sec, '/');
		bool btf = !strncmp(sec, "tp_btf/", 7);

		bpf_program__set_autoload(prog, btf == use_btf && tp && tp_exists(vmlinux, tp + 1));
	}
	err = sched_bpf__load(s);
	if (err) {
		sched_bpf__destroy(s);
		return err;
	}
	p->sched = s;
	return 0;
}

static int attach_sched(struct probes *p)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, p->sched->obj) {
		const char *sec = bpf_program__section_name(prog);
		const char *tp = strchr(sec, '/') + 1;
		bool essential = !strcmp(tp, "sched_switch");
		char name[48];
		int err;

		snprintf(name, sizeof(name), "sched:%s", tp);
		if (!bpf_program__autoload(prog)) {
			/* the other variant of a pair; report only if neither loaded */
			continue;
		}
		err = keep_link(p, bpf_program__attach(prog));
		status(p, name, !err, essential, err ? "%s: %s" : "%s", p->sched_variant,
		       err ? strerror(-err) : "");
		if (err && essential)
			return err;
	}
	return 0;
}

static void fill_cpu_nodes(struct probes *p)
{
	int fd = bpf_map__fd(p->sched->maps.cpu_node);

	for (int cpu = 0; cpu < p->ncpus; cpu++) {
		__u32 key = cpu;
		__u16 node = cpu_node(cpu);

		bpf_map_update_elem(fd, &key, &node, BPF_ANY);
	}
}

/* ---- memory ---- */

#define TRACEFS "/sys/kernel/tracing"

/*
 * Per-syscall tracepoints need tracefs to attach; mount it when we may. If we
 * may not (or --no-tracefs), the raw sys_enter/sys_exit tracepoints serve.
 */
static bool syscall_tracepoints(struct probes *p)
{
	static const char *ids[] = {
		TRACEFS "/events/syscalls/sys_enter_mmap/id",
		"/sys/kernel/debug/tracing/events/syscalls/sys_enter_mmap/id",
	};

	if (p->o.no_tracefs)
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(ids); i++)
		if (!access(ids[i], R_OK))
			return true;
	if (access(TRACEFS "/trace", F_OK) && !access(TRACEFS, F_OK) &&
	    !mount("tracefs", TRACEFS, "tracefs", 0, NULL)) {
		status(p, "tracefs", true, false, "mounted at " TRACEFS);
		return !access(ids[0], R_OK);
	}
	return false;
}

/* "tracepoint/syscalls/sys_enter_mmap" -> "mem:sys_enter_mmap" and so on */
static void mem_probe_name(const struct bpf_program *prog, char *out, size_t len)
{
	const char *sec = bpf_program__section_name(prog);
	const char *last = strrchr(sec, '/');

	snprintf(out, len, "mem:%s", last ? last + 1 : sec);
}

/* the maps every family shares: the ring buffer, the drop counters, the target's state */
static int reuse_shared(struct probes *p, struct bpf_map *events, struct bpf_map *drops,
			struct bpf_map *state)
{
	int err = bpf_map__reuse_fd(events, bpf_map__fd(p->sched->maps.events));

	if (!err)
		err = bpf_map__reuse_fd(drops, bpf_map__fd(p->sched->maps.drops));
	if (!err)
		err = bpf_map__reuse_fd(state, bpf_map__fd(p->sched->maps.target_state));
	return err;
}


/* attach the programs whose section starts with prefix; false (and none kept) on a failure */
static bool attach_mem_group(struct probes *p, const char *prefix, const char *variant)
{
	struct bpf_program *prog;
	int first = p->nlinks, st = p->nst;
	char name[48];

	bpf_object__for_each_program(prog, p->mem->obj) {
		if (strncmp(bpf_program__section_name(prog), prefix, strlen(prefix)))
			continue;
		mem_probe_name(prog, name, sizeof(name));
		if (keep_link(p, bpf_program__attach(prog))) {
			int err = errno;

			while (p->nlinks > first)
				bpf_link__destroy(p->links[--p->nlinks]);
			p->nst = st;
			status(p, name, false, false, "%s refused (%s): the raw sys_enter/sys_exit "
			       "pair serves instead", variant, strerror(err));
			return false;
		}
		status(p, name, true, false, "%s", variant);
	}
	return true;
}

static void open_mem(struct probes *p, const struct btf *vmlinux)
{
	struct bpf_program *prog;
	struct mem_bpf *m = mem_bpf__open();
	bool tp = syscall_tracepoints(p);
	char name[48];
	int err;

	if (!m) {
		status(p, "mem", false, false, "open failed: %s", strerror(errno));
		return;
	}
	SET_TARGET(p, m);
	m->rodata->io_min_ns = p->o.io_min_ns ? p->o.io_min_ns : IO_MIN_NS;
	/* both syscall variants load; one is attached */
	bpf_object__for_each_program(prog, m->obj) {
		const char *sec = bpf_program__section_name(prog);

		if (!strncmp(sec, "tracepoint/syscalls/", 20)) {
			bpf_program__set_autoload(prog, tp);
		} else if (strncmp(sec, "raw_tp/sys_e", 12) &&
			   !tp_exists(vmlinux, strchr(sec, '/') + 1)) {
			bpf_program__set_autoload(prog, false);
			mem_probe_name(prog, name, sizeof(name));
			status(p, name, false, false, "no such tracepoint on this kernel");
		}
	}
	err = reuse_shared(p, m->maps.events, m->maps.drops, m->maps.target_state);
	if (!err)
		err = mem_bpf__load(m);
	if (err) {
		status(p, "mem", false, false, "load failed: %s", strerror(-err));
		mem_bpf__destroy(m);
		return;
	}
	p->mem = m;
	bpf_object__for_each_program(prog, m->obj) {
		const char *sec = bpf_program__section_name(prog);

		if (!bpf_program__autoload(prog) || !strncmp(sec, "tracepoint/syscalls/", 20) ||
		    !strncmp(sec, "raw_tp/sys_e", 12))
			continue;
		mem_probe_name(prog, name, sizeof(name));
		err = keep_link(p, bpf_program__attach(prog));
		status(p, name, !err, false, "%s", err ? strerror(-err) : "raw_tp");
	}
	/* per-syscall tracepoints where they attach, else the raw sys_enter/sys_exit pair */
	if (!tp || !attach_mem_group(p, "tracepoint/syscalls/", "tracepoint"))
		attach_mem_group(p, "raw_tp/sys_e", "raw_tp");
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
	a->rodata->burst_gap_ns = or_default(p->o.burst_gap_ns, BURST_GAP_NS);
	a->rodata->burst_max_ns = or_default(p->o.burst_max_ns, BURST_MAX_NS);
	a->rodata->burst_min_ns = or_default(p->o.burst_min_ns, BURST_MIN_NS);
	a->rodata->burst_min_calls = or_default(p->o.burst_min_calls, BURST_MIN_CALLS);
	bpf_program__set_autoload(a->progs.flush_burst, with_flush);
	bpf_object__for_each_program(prog, a->obj)
		if (multi && prog != a->progs.flush_burst)
			bpf_program__set_expected_attach_type(prog, SB_TRACE_UPROBE_MULTI);
	err = reuse_shared(p, a->maps.events, a->maps.drops, a->maps.target_state);
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

static int open_alloc(struct probes *p)
{
	/* uprobe_multi links where the kernel makes them, else perf-event uprobes */
	int err = open_alloc_flush(p, true);

	if (!err && !uprobe_multi_works(p)) {
		alloc_bpf__destroy(p->alloc);
		p->alloc = NULL;
		err = -EOPNOTSUPP;
	}
	if (err)
		err = open_alloc_flush(p, false);
	if (!err && !p->alloc_flush)
		status(p, "alloc:flush", false, false, "this kernel cannot run the burst flush "
		       "(BPF syscall programs): a burst of fast allocator calls is recorded only "
		       "when its thread calls the allocator again");
	return err;
}

static int open_marks(struct probes *p)
{
	struct marks_bpf *m = marks_bpf__open();
	int err;

	if (!m)
		return -errno;
	SET_TARGET(p, m);
	err = reuse_shared(p, m->maps.events, m->maps.drops, m->maps.target_state);
	if (!err)
		err = marks_bpf__load(m);
	if (err) {
		marks_bpf__destroy(m);
		return err;
	}
	p->marks = m;
	return 0;
}

/* ---- the target's credentials ---- */

/*
 * uid, gid, suid, sgid, euid, egid, fsuid, fsgid (struct cred's order) and
 * the permitted capabilities of pid, from /proc/PID/status (which lists
 * real, effective, saved, filesystem); false if they cannot be read.
 */
static bool read_creds(pid_t pid, uint32_t ids[8], uint64_t *cap)
{
	char path[64], buf[4096];
	unsigned long u[4], g[4];
	unsigned long long c;
	const char *l;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (read_small_file(path, buf, sizeof(buf)) <= 0)
		return false;
	if (!(l = strstr(buf, "\nUid:")) ||
	    sscanf(l + 5, "%lu %lu %lu %lu", &u[0], &u[1], &u[2], &u[3]) != 4 ||
	    !(l = strstr(buf, "\nGid:")) ||
	    sscanf(l + 5, "%lu %lu %lu %lu", &g[0], &g[1], &g[2], &g[3]) != 4 ||
	    !(l = strstr(buf, "\nCapPrm:")) || sscanf(l + 8, "%llx", &c) != 1)
		return false;
	ids[0] = u[0], ids[1] = g[0], ids[2] = u[2], ids[3] = g[2];
	ids[4] = u[1], ids[5] = g[1], ids[6] = u[3], ids[7] = g[3];
	*cap = c;
	return true;
}

static bool read_state(const struct probes *p, struct target_state_v *v)
{
	__u32 zero = 0;

	return p->sched && bpf_map__value_size(p->sched->maps.target_state) == sizeof(*v) &&
	       !bpf_map_lookup_elem(bpf_map__fd(p->sched->maps.target_state), &zero, v);
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
	__u32 zero = 0;

	if (!p->creds_known || !read_creds(p->o.pid, ids, &cap) ||
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
	bpf_map_update_elem(bpf_map__fd(p->sched->maps.target_state), &zero, &v, BPF_ANY);
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
	p->creds_known = read_creds(o->pid, p->ids, &p->cap_prm);
	p->ncpus = libbpf_num_possible_cpus();
	if (p->ncpus <= 0)
		p->ncpus = 1;
	vmlinux = btf__load_vmlinux_btf();
	if (!vmlinux)
		vmlinux = NULL;

	/* tp_btf first; raw_tp where tracing programs do not load */
	e = open_sched(p, true, vmlinux);
	p->sched_variant = "tp_btf";
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
	open_mem(p, vmlinux);
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
			status(p, "alloc", false, false, "load failed: %s", strerror(-e));
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
		status(p, "alloc", false, false, "the target maps no libc (static binary?): "
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

/* struct alloc_totals of bpf/alloc.bpf.c */
struct alloc_totals_v {
	uint64_t calls[SB_FN_MAX];
	uint64_t ns[SB_FN_MAX];
	struct {
		uint64_t first, last, sum_ns, slow_ns, bytes, gap_min;
		uint32_t cpu, pad;
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
static void flush_idle_burst(const struct probes *p, uint32_t tid, const struct alloc_totals_v *v)
{
	struct flush_args_v a = {
		.tid = tid,
		.min_idle_ns = or_default(p->o.burst_gap_ns, BURST_GAP_NS) +
			       or_default(p->o.burst_max_ns, BURST_MAX_NS),
	};
	LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = &a, .ctx_size_in = sizeof(a));

	if (!p->alloc_flush || !v->b.calls)
		return;
	bpf_prog_test_run_opts(bpf_program__fd(p->alloc->progs.flush_burst), &o);
}

static int walk_totals(const struct probes *p,
		       void (*cb)(void *ctx, uint32_t tid, const uint64_t calls[SB_FN_MAX],
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
		cb(ctx, key, v.calls, v.ns);
		if (flush)
			flush_idle_burst(p, key, &v);
		n++;
	}
	return n;
}

int probes_alloc_stats(const struct probes *p,
		       void (*cb)(void *ctx, uint32_t tid, const uint64_t calls[SB_FN_MAX],
				  const uint64_t ns[SB_FN_MAX]),
		       void *ctx)
{
	return walk_totals(p, cb, ctx, true);
}

int probes_alloc_totals(const struct probes *p,
			void (*cb)(void *ctx, uint32_t tid, const uint64_t calls[SB_FN_MAX],
				   const uint64_t ns[SB_FN_MAX]),
			void *ctx)
{
	return walk_totals(p, cb, ctx, false);
}

/* ---- calibration: what the allocator probes cost a thread on this machine ---- */

/*
 * Functions for the calibration to trap in, in this binary. What a uprobe
 * costs depends above all on the probed instruction: the kernel emulates a
 * few (nop; push on recent kernels) and single-steps the others out of
 * line, a second trap that can make a probe three times as dear (7 us
 * against 22 us on a 2-vCPU PVM guest with Linux 6.18). On x86-64 glibc's
 * malloc starts with a push and its free with a test, so one function starts
 * like each and an allocator call is taken as their mean (a malloc/free pair
 * is the common case). A single uprobe is mostly a USDT step mark: a nop.
 * Elsewhere the compiler chooses; the bodies differ so that no two are merged.
 */
#if defined(__x86_64__)
__asm__(".pushsection .text\n"
	".p2align 4\n"
	".globl sb_calib_plain\n.hidden sb_calib_plain\n.type sb_calib_plain, @function\n"
	"sb_calib_plain:\n\tnop\n\tret\n.size sb_calib_plain, .-sb_calib_plain\n"
	".p2align 4\n"
	".globl sb_calib_single\n.hidden sb_calib_single\n.type sb_calib_single, @function\n"
	"sb_calib_single:\n\tnop\n\tret\n.size sb_calib_single, .-sb_calib_single\n"
	".p2align 4\n"
	".globl sb_calib_emul\n.hidden sb_calib_emul\n.type sb_calib_emul, @function\n"
	"sb_calib_emul:\n\tpush %r12\n\tpop %r12\n\tret\n.size sb_calib_emul, .-sb_calib_emul\n"
	".p2align 4\n"
	".globl sb_calib_step\n.hidden sb_calib_step\n.type sb_calib_step, @function\n"
	"sb_calib_step:\n\ttest %rdi, %rdi\n\tret\n.size sb_calib_step, .-sb_calib_step\n"
	".popsection\n");
__attribute__((visibility("hidden"))) void sb_calib_plain(void);
__attribute__((visibility("hidden"))) void sb_calib_single(void);
__attribute__((visibility("hidden"))) void sb_calib_emul(void);
__attribute__((visibility("hidden"))) void sb_calib_step(void);
#else
static volatile unsigned calib_sink;

__attribute__((noinline)) static void sb_calib_plain(void) { calib_sink += 1; }
__attribute__((noinline)) static void sb_calib_single(void) { calib_sink += 2; }
__attribute__((noinline)) static void sb_calib_emul(void) { calib_sink += 3; }
__attribute__((noinline)) static void sb_calib_step(void) { calib_sink += 4; }
#endif

#define CALIB_CALLS 16              /* calls per function per round, timed together */
#define CALIB_ROUNDS 9              /* at most; the fastest round counts */
#define CALIB_BUDGET_NS 40000000ull /* no further round once this much time is spent */

/*
 * Where fn lies in the file it was mapped from: the mapping's file offset
 * plus fn's distance from the mapping's start. That is what a uprobe wants,
 * for a PIE or a static binary alike, with or without a symbol table.
 * path: /proc/self/exe when fn is in the executable (it reaches the file
 * even if it was replaced on disk since), else the mapped file's name.
 */
static int self_offset(void (*fn)(void), char *path, size_t len, uint64_t *off)
{
	uintptr_t addr = (uintptr_t)fn;
	char line[PATH_MAX + 128];
	struct stat exe;
	int err = -ENOENT;
	FILE *f;

	if (stat("/proc/self/exe", &exe))
		return -errno;
	f = fopen("/proc/self/maps", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end, foff, ino;
		char perms[8], *name;
		int n = 0;

		if (sscanf(line, "%lx-%lx %7s %lx %*x:%*x %lu %n", &start, &end, perms, &foff,
			   &ino, &n) < 5 || addr < start || addr >= end)
			continue;
		name = line + n;
		name[strcspn(name, "\n")] = 0;
		if (perms[2] != 'x' || !ino || name[0] != '/') {
			err = -EFAULT;
			break;
		}
		*off = addr - start + foff;
		snprintf(path, len, "%s", ino == exe.st_ino ? "/proc/self/exe" : name);
		err = 0;
		break;
	}
	fclose(f);
	return err;
}

/* per call of fn, ns: CALIB_CALLS calls timed together */
static uint64_t time_calls(void (*fn)(void))
{
	uint64_t t = mono_ns();

	for (int i = 0; i < CALIB_CALLS; i++)
		fn();
	return (mono_ns() - t) / CALIB_CALLS;
}

/*
 * The fastest round: whatever else happens on the CPU (an interrupt, a thread
 * of the target preempting the agent) only adds time, and enough of it to
 * spoil half the rounds is common at capture start.
 */
static uint64_t fastest(const uint64_t *v, int n)
{
	uint64_t m = v[0];

	for (int i = 1; i < n; i++)
		if (v[i] < m)
			m = v[i];
	return m;
}

static uint64_t minus(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 1;
}

/*
 * The calibration's links: entry (and return, for a pair) probe on fn, with
 * the allocator's own programs and links of the kind the allocator gets.
 * They run for this process, which their target filter turns away first
 * thing: the trap, the program's start and the filter are timed, all but
 * the little work that follows for a target's call.
 */
static int calib_attach(struct probes *p, void (*fn)(void), bool pair, struct alink *l, int *n)
{
	struct bpf_program *progs[2] = { p->alloc->progs.malloc_enter, p->alloc->progs.alloc_return };
	char path[PATH_MAX];
	uint64_t off = 0;
	int err = self_offset(fn, path, sizeof(path), &off);

	for (int k = 0; !err && k < (pair ? 2 : 1); k++) {
		LIBBPF_OPTS(bpf_uprobe_opts, o, .retprobe = k == 1);
		struct alink *a = &l[*n];

		a->l = NULL;
		a->fd = -1;
		if (p->alloc_multi) {
			a->fd = uprobe_multi_link(bpf_program__fd(progs[k]), path, off, k == 1,
						  getpid());
			err = a->fd < 0 ? a->fd : 0;
		} else {
			a->l = bpf_program__attach_uprobe_opts(progs[k], getpid(), path, off, &o);
			err = a->l ? 0 : errno ? -errno : -EINVAL;
		}
		if (!err)
			++*n;
	}
	return err;
}

/* did the programs keep state for thread tid in the allocator's maps? removes it */
static bool calib_left_state(struct probes *p, __u32 tid)
{
	int fds[2] = { bpf_map__fd(p->alloc->maps.alloc_frames),
		       bpf_map__fd(p->alloc->maps.alloc_totals) };
	bool left = false;

	for (int i = 0; i < 2; i++)
		left |= bpf_map_delete_elem(fds[i], &tid) == 0;
	return left;
}

int probes_calibrate(struct probes *p, struct sb_costs *c)
{
	uint64_t plain[CALIB_ROUNDS], single[CALIB_ROUNDS], emul[CALIB_ROUNDS];
	uint64_t step[CALIB_ROUNDS], t0, pl, one = 0, pair = 0;
	struct alink l[6];
	int n = 0, rounds = 0, err;

	if (!p->alloc)
		return -ENOENT;
	/* the programs would take the calibration's calls for the target's */
	if (p->o.pid == getpid())
		return -EINVAL;
	err = calib_attach(p, sb_calib_single, false, l, &n);
	if (!err)
		err = calib_attach(p, sb_calib_emul, true, l, &n);
	if (!err)
		err = calib_attach(p, sb_calib_step, true, l, &n);
	if (!err) {
		/* the first hits set up the process's out-of-line area and return stack */
		for (int i = 0; i < 2; i++) {
			sb_calib_single();
			sb_calib_emul();
			sb_calib_step();
		}
		t0 = mono_ns();
		/* interleaved: a burst of noise hits one round of each, not all of one kind */
		while (rounds < CALIB_ROUNDS && (rounds < 3 || mono_ns() - t0 < CALIB_BUDGET_NS)) {
			plain[rounds] = time_calls(sb_calib_plain);
			single[rounds] = time_calls(sb_calib_single);
			emul[rounds] = time_calls(sb_calib_emul);
			step[rounds] = time_calls(sb_calib_step);
			rounds++;
		}
		pl = fastest(plain, rounds);
		one = minus(fastest(single, rounds), pl);
		pair = (minus(fastest(emul, rounds), pl) + minus(fastest(step, rounds), pl)) / 2;
	}
	while (n > 0)
		destroy_async(p, &l[--n]);
	/*
	 * The filter turns this process away before the programs touch a map.
	 * Should that ever change, the figures are not the probes' cost for a
	 * target's call, and this thread must not stay behind in the maps.
	 */
	if (calib_left_state(p, (__u32)syscall(SYS_gettid)) && !err)
		err = -EPROTO;
	if (err)
		return err;
	c->ns[SB_COST_UPROBE] = one;
	c->ns[SB_COST_ALLOC_CALL] = pair;
	/* the CUDA driver's entry points are no better known: the same mean */
	c->ns[SB_COST_CUDA_CALL] = pair;
	c->calibrated |= 1u << SB_COST_UPROBE | 1u << SB_COST_ALLOC_CALL | 1u << SB_COST_CUDA_CALL;
	c->samples = rounds * CALIB_CALLS * 3;
	return 0;
}

void probes_close(struct probes *p)
{
	if (!p)
		return;
	for (int i = p->nlinks - 1; i >= 0; i--)
		bpf_link__destroy(p->links[i]);
	detach_alloc(p);
	reap_detach(p);
	marks_bpf__destroy(p->marks);
	alloc_bpf__destroy(p->alloc);
	mem_bpf__destroy(p->mem);
	sched_bpf__destroy(p->sched);
	if (p->alloc_fd >= 0)
		close(p->alloc_fd);
	free(p->files.t);
	free(p->fuse_devs);
	free(p);
}
