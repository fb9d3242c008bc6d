// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ELF files the target controls (base/elfsafe.h; SECURITY.md, "The
 * target's files, names and credentials"): every size a header claims is checked against the file and
 * a bound before libelf allocates for it.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/elfsafe.h"

#define ELF_SECTIONS_MAX 65536u
#define ELF_SEGMENTS_MAX 65535u
/* the section names (a few KiB in any real file): every lookup of a name reads them whole */
#define ELF_NAMES_MAX (1u << 20)

/* an unsigned field of n bytes at p, in the file's byte order */
static uint64_t field(const unsigned char *p, unsigned n, bool big)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[big ? n - 1 - i : i] << (8 * i);
	return v;
}

static bool read_at(int fd, void *buf, size_t n, uint64_t off)
{
	return pread(fd, buf, n, (off_t)off) == (ssize_t)n;
}

/* the header table [off, off + n * ent) lies inside the file */
static bool table_in(uint64_t off, uint64_t n, uint64_t ent, uint64_t fsize)
{
	return !n || (ent && off <= fsize && n <= (fsize - off) / ent);
}

static bool header_ok(int fd)
{
	unsigned char h[64], s0[64];
	struct stat st;
	bool big, c64;
	uint64_t phoff, shoff, phent, shent, phnum, shnum;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || !read_at(fd, h, 52, 0) ||
	    memcmp(h, ELFMAG, SELFMAG) || (h[EI_CLASS] != ELFCLASS32 && h[EI_CLASS] != ELFCLASS64) ||
	    (h[EI_DATA] != ELFDATA2LSB && h[EI_DATA] != ELFDATA2MSB))
		return false;
	c64 = h[EI_CLASS] == ELFCLASS64;
	big = h[EI_DATA] == ELFDATA2MSB;
	if (c64 && !read_at(fd, h, 64, 0))
		return false;
	/* Elf64_Ehdr: phoff 32, shoff 40, phentsize 54, phnum 56, shentsize 58, shnum 60 */
	phoff = field(h + (c64 ? 32 : 28), c64 ? 8 : 4, big);
	shoff = field(h + (c64 ? 40 : 32), c64 ? 8 : 4, big);
	phent = field(h + (c64 ? 54 : 42), 2, big);
	phnum = field(h + (c64 ? 56 : 44), 2, big);
	shent = field(h + (c64 ? 58 : 46), 2, big);
	shnum = field(h + (c64 ? 60 : 48), 2, big);
	if (shoff && (shnum == 0 || phnum == PN_XNUM)) {
		/* extended numbering: the counts are in section header 0 (sh_size, sh_info) */
		if (!read_at(fd, s0, c64 ? 64 : 40, shoff))
			return false;
		if (shnum == 0)
			shnum = field(s0 + (c64 ? 32 : 20), c64 ? 8 : 4, big);
		if (phnum == PN_XNUM)
			phnum = field(s0 + (c64 ? 44 : 28), 4, big);
	}
	if (!shoff)
		shnum = 0;
	if (!phoff)
		phnum = 0;
	return shnum <= ELF_SECTIONS_MAX && phnum <= ELF_SEGMENTS_MAX &&
	       table_in(shoff, shnum, shent, (uint64_t)st.st_size) &&
	       table_in(phoff, phnum, phent, (uint64_t)st.st_size);
}

/* the section names' section, if any, is small, whole and not compressed */
static bool names_ok(Elf *e)
{
	size_t ndx;
	Elf_Scn *scn;
	GElf_Shdr sh;

	if (elf_getshdrstrndx(e, &ndx) || !ndx)
		return true;
	scn = elf_getscn(e, ndx);
	return scn && gelf_getshdr(scn, &sh) && !(sh.sh_flags & SHF_COMPRESSED) &&
	       sh.sh_size <= ELF_NAMES_MAX;
}

Elf *elf_read_fd(int fd)
{
	Elf *e;

	if (elf_version(EV_CURRENT) == EV_NONE || !header_ok(fd))
		return NULL;
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (e && (elf_kind(e) != ELF_K_ELF || !names_ok(e))) {
		elf_end(e);
		e = NULL;
	}
	return e;
}

/* a GNU build id note in d: its length into id (0: none) */
static size_t note_build_id(Elf *elf, Elf_Data *d, unsigned char *id, size_t cap)
{
	size_t off = 0, noff, doff;
	GElf_Nhdr nh;

	(void)elf;
	while (d && off < d->d_size && (off = gelf_getnote(d, off, &nh, &noff, &doff)) > 0) {
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    !memcmp((const char *)d->d_buf + noff, "GNU", 4) && nh.n_descsz &&
		    nh.n_descsz <= cap) {
			memcpy(id, (const char *)d->d_buf + doff, nh.n_descsz);
			return nh.n_descsz;
		}
	}
	return 0;
}

size_t elf_build_id(Elf *elf, unsigned char *id, size_t cap)
{
	Elf_Scn *scn = NULL;
	size_t nsec = 0, nph = 0, n;

	if (elf_getshdrnum(elf, &nsec))
		nsec = 0;
	while (nsec && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE || sh.sh_size > ELF_NOTE_MAX ||
		    (sh.sh_flags & SHF_COMPRESSED))
			continue;
		if ((n = note_build_id(elf, elf_getdata(scn, NULL), id, cap)))
			return n;
	}
	if (nsec || elf_getphdrnum(elf, &nph))
		return 0;
	/* no section headers: the note segments */
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE ||
		    ph.p_filesz > ELF_NOTE_MAX)
			continue;
		if ((n = note_build_id(elf, elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz,
								 ELF_T_NHDR), id, cap)))
			return n;
	}
	return 0;
}

void elf_build_id_hex(Elf *elf, char *out, size_t len)
{
	unsigned char id[64];
	size_t n = elf_build_id(elf, id, sizeof(id));

	out[0] = 0;
	if (2 * n + 1 > len)
		return;
	for (size_t i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
}

/* section scn: its size if it fits the file uncompressed; else sets *why */
static uint64_t table_size(Elf *elf, size_t ndx, uint64_t fsize, const char **why)
{
	Elf_Scn *scn = elf_getscn(elf, ndx);
	GElf_Shdr sh;

	if (!scn || !gelf_getshdr(scn, &sh)) {
		*why = "a symbol table's strings are not a section";
		return 0;
	}
	if (sh.sh_flags & SHF_COMPRESSED) {
		*why = "a compressed symbol table or string table";
		return 0;
	}
	if (sh.sh_type != SHT_NOBITS && (sh.sh_offset > fsize || sh.sh_size > fsize - sh.sh_offset)) {
		*why = "a symbol table or string table past the file's end";
		return 0;
	}
	return sh.sh_type == SHT_NOBITS ? 0 : sh.sh_size;
}

const char *elf_symbols_refusal(Elf *elf, uint64_t fsize, uint64_t *bytes)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	bool symtab = false, debugdata = false;
	const char *why = NULL;

	*bytes = 0;
	if (elf_getshdrstrndx(elf, &shstrndx))
		shstrndx = 0;
	while (!why && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = shstrndx ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
		if (name && !strcmp(name, ".gnu_debugdata"))
			debugdata = true;
		if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB_SHNDX)
			continue;
		symtab |= sh.sh_type == SHT_SYMTAB;
		*bytes += table_size(elf, elf_ndxscn(scn), fsize, &why);
		if (sh.sh_type != SHT_SYMTAB_SHNDX && !why)
			*bytes += table_size(elf, sh.sh_link, fsize, &why);
	}
	if (why)
		return why;
	if (debugdata && !symtab)
		return "MiniDebugInfo (.gnu_debugdata, an xz stream) in place of a symbol table";
	if (*bytes > ELF_SYMBOLS_MAX)
		return "symbol tables and their strings over 256 MiB";
	return NULL;
}

int elf_dwfl_answer(Elf *shared, char **file_name, Elf **elfp)
{
	*file_name = NULL;
	*elfp = shared ? elf_begin(-1, ELF_C_READ, shared) : NULL;
	return -1;
}
