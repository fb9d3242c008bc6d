// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The target's binaries and mappings, as the probe loader reads them: ELF
 * files (the USDT step note, function offsets), /proc/PID/maps, opening a
 * mapped file without trusting a name the target controls (SECURITY.md),
 * the FUSE mounts never touched, and the set of files already looked at.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/elfsafe.h"
#include "base/timedread.h"
#include "format/maps.h"
#include "capture/probes_internal.h"

/* an ELF section larger than this is not read (a note or symbol table never is) */
#define ELF_SECTION_MAX (256u << 20)

/* ---- ELF: USDT notes, function offsets ---- */

static uint64_t n_elf_parses;

uint64_t elf_parse_count(void)
{
	return __atomic_load_n(&n_elf_parses, __ATOMIC_RELAXED);
}

/*
 * An ELF handle on fd, its headers checked (base/elfsafe.h). Read with pread,
 * not mapped: the target may truncate a file it owns under us, which would be
 * SIGBUS in a mapping; a read just comes back short.
 */
static Elf *elf_open_fd(int fd)
{
	__atomic_add_fetch(&n_elf_parses, 1, __ATOMIC_RELAXED);
	return elf_read_fd(fd);
}

/* the section's data, if it is not unreasonably large */
static Elf_Data *elf_section_data(Elf_Scn *scn, const GElf_Shdr *sh)
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
		data = elf_section_data(scn, &sh);
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

/*
 * Where each of names[] starts in the ELF file open on fd, as a file offset
 * (what a uprobe takes); 0 for those it does not define. A global
 * definition is preferred to a weak one.
 */
void elf_func_offsets(int fd, const char *const *names, size_t n, uint64_t *off)
{
	bool global[ELF_FUNCS_MAX] = { false };
	Elf_Scn *scn = NULL;
	Elf *e;

	memset(off, 0, n * sizeof(*off));
	if (n > ELF_FUNCS_MAX)
		return;
	e = elf_open_fd(fd);
	if (!e)
		return;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    !sh.sh_entsize || !(data = elf_section_data(scn, &sh)))
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
			for (size_t i = 0; i < n; i++) {
				bool g = GELF_ST_BIND(sym.st_info) == STB_GLOBAL;

				if (strcmp(name, names[i]) || (off[i] && (global[i] || !g)))
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

/* ---- the target's mappings ---- */

/*
 * One line of /proc/PID/maps: "START-END PERMS OFFSET MAJ:MIN INODE   PATH".
 * The path is the rest of the line: it may hold spaces, and the kernel
 * writes a newline in it as \012 (nothing else is escaped, so a name that
 * holds "\012" itself reads back wrong: the inode check catches that).
 * False for anything but a file (anonymous memory, [stack], anon_inode:...).
 */
static bool parse_maps_line(const char *line, struct mapping *m)
{
	struct maps_line l;
	const char *p;
	size_t o = 0, len;

	if (!maps_line_parse(line, &l) || !l.ino)
		return false;
	p = l.name;
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
	m->start = l.start;
	m->end = l.end;
	m->offset = l.off;
	m->exec = l.perms[2] == 'x';
	m->dev = makedev(l.maj, l.min);
	m->ino = l.ino;
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

void drop_lease(int fd)
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
int open_mapped(struct probes *p, const struct mapping *m)
{
	return open_mapped_pid(p, p->o.pid, m);
}

int open_mapped_pid(struct probes *p, pid_t pid, const struct mapping *m)
{
	char path[PATH_MAX + 64];
	struct stat st;
	bool by_map_files = !p->no_map_files;
	int pfd = -1, fd, err;

	if (by_map_files) {
		snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", (int)pid, m->start,
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
		snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, m->path);
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
void fd_path(int fd, char *buf, size_t len)
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

bool on_fuse(struct probes *p, dev_t dev)
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
struct file_key *file_get(struct file_set *s, uint64_t dev, uint64_t ino)
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
int for_each_mapping(pid_t pid, int (*cb)(void *ctx, const struct mapping *m), void *ctx)
{
	struct mapping *m = malloc(sizeof(*m));
	char *text = NULL, *line, *nl;
	ssize_t len;
	int n = 0;

	if (!m)
		return -ENOMEM;
	len = read_maps(pid, &text, 0);
	if (len < 0) {
		free(m);
		return (int)len;
	}
	for (line = text; line < text + len; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			break; /* a line cut short at the size limit */
		*nl = 0;
		if (!parse_maps_line(line, m))
			continue;
		n++;
		if (cb(ctx, m))
			break;
	}
	free(text);
	free(m);
	return n;
}

/*
 * The whole of /proc/PID/maps. The kernel builds that text under the
 * process's mmap lock, which the process can hold for as long as it likes:
 * the read goes through timedread (SECURITY.md, "What the trainer can do to
 * the agent"). A buffer that fills is made four times larger and the file
 * read again (the kernel writes the whole text again: bench/RESULTS.md,
 * section 15), up to MAPS_TEXT_MAX; past that the text ends at the last
 * whole line. hint: the size of this process's maps when last read, or 0.
 */
/*
 * The texts kept between maps_reuse(true) and maps_reuse(false), a few
 * processes', 8 MiB in all (a PyTorch process's are 200 KB; a target can
 * make its own 16 MiB: those are read each time, as without reuse)
 */
#define MAPS_REUSE_MAX 8
#define MAPS_REUSE_BYTES (8u << 20)
static struct {
	bool on;
	int n;
	size_t bytes;
	struct {
		pid_t pid;
		char *text;
		ssize_t len;
	} kept[MAPS_REUSE_MAX];
} reuse;
static pthread_mutex_t reuse_lock = PTHREAD_MUTEX_INITIALIZER;

void maps_reuse(bool on)
{
	pthread_mutex_lock(&reuse_lock);
	if (!on) {
		for (int i = 0; i < reuse.n; i++)
			free(reuse.kept[i].text);
		reuse.n = 0;
		reuse.bytes = 0;
	}
	reuse.on = on;
	pthread_mutex_unlock(&reuse_lock);
}

/* a copy of pid's kept text into *out: its length, or -ENOENT (none kept) or -ENOMEM */
static ssize_t reused(pid_t pid, char **out)
{
	ssize_t n = -ENOENT;

	pthread_mutex_lock(&reuse_lock);
	for (int i = 0; reuse.on && i < reuse.n && n == -ENOENT; i++)
		if (reuse.kept[i].pid == pid) {
			n = reuse.kept[i].len;
			*out = malloc((size_t)n + 1);
			if (*out)
				memcpy(*out, reuse.kept[i].text, (size_t)n + 1);
			else
				n = -ENOMEM;
		}
	pthread_mutex_unlock(&reuse_lock);
	return n;
}

/* text (len bytes and a NUL) kept for pid, while reuse is on and there is room */
static void keep(pid_t pid, const char *text, ssize_t len)
{
	pthread_mutex_lock(&reuse_lock);
	if (reuse.on && reuse.n < MAPS_REUSE_MAX && (size_t)len <= MAPS_REUSE_BYTES - reuse.bytes) {
		char *t = malloc((size_t)len + 1);

		if (t) {
			reuse.bytes += (size_t)len;
			memcpy(t, text, (size_t)len + 1);
			reuse.kept[reuse.n].pid = pid;
			reuse.kept[reuse.n].text = t;
			reuse.kept[reuse.n].len = len;
			reuse.n++;
		}
	}
	pthread_mutex_unlock(&reuse_lock);
}

static ssize_t read_maps_now(pid_t pid, char **out, size_t hint);

ssize_t read_maps(pid_t pid, char **out, size_t hint)
{
	ssize_t n = reused(pid, out);

	if (n != -ENOENT)
		return n;
	n = read_maps_now(pid, out, hint);
	if (n >= 0)
		keep(pid, *out, n);
	return n;
}

static ssize_t read_maps_now(pid_t pid, char **out, size_t hint)
{
	char path[64];
	size_t cap = 1u << 20;
	ssize_t n;

	*out = NULL;
	while (cap < hint + hint / 2 && cap < MAPS_TEXT_MAX)
		cap *= 2;
	if (cap > MAPS_TEXT_MAX)
		cap = MAPS_TEXT_MAX;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	for (;;) {
		char *buf = malloc(cap);

		if (!buf)
			return -ENOMEM;
		n = read_small_file_timed(path, buf, cap, MAPS_TIMEOUT_MS);
		if (n < 0) {
			free(buf);
			return n;
		}
		if ((size_t)n + 1 < cap || cap >= MAPS_TEXT_MAX) {
			*out = buf;
			return n;
		}
		free(buf);
		cap *= 4;
	}
}

const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

bool is_libc(const char *path)
{
	const char *b = base_name(path);

	return !strncmp(b, "libc.so", 7) || !strncmp(b, "libc-2.", 7) || !strncmp(b, "libc-", 5);
}
