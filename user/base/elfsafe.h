/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * ELF files the target controls, read within bounds before libelf or libdw
 * is let at them (SECURITY.md, "The target's files, names and
 * credentials").
 */
#ifndef SB_BASE_ELFSAFE_H
#define SB_BASE_ELFSAFE_H

#include <gelf.h>
#include <libelf.h>
#include <stdint.h>
#include <sys/types.h>

/* a note section or segment larger than this is not read (a build id note is 36 bytes) */
#define ELF_NOTE_MAX (64u << 10)
/* the symbol tables and their strings of one file, at most */
#define ELF_SYMBOLS_MAX (256ull << 20)

/*
 * An ELF handle on fd, read with pread, never mapped (the target may truncate
 * a file it owns: SIGBUS in a mapping, a short read here), after its header
 * was checked: at most 65,536 section headers and 65,535 program headers, all
 * inside the file (libelf allocates for every header the file claims), and
 * section names of 1 MiB at most, not compressed. NULL: not an ELF file, or
 * one refused.
 */
Elf *elf_read_fd(int fd);

/* the GNU build id of elf into id (at most cap bytes): its length, 0 if none; notes over ELF_NOTE_MAX skipped */
size_t elf_build_id(Elf *elf, unsigned char *id, size_t cap);
/* the same as hex into out ("" if none or it does not fit) */
void elf_build_id_hex(Elf *elf, char *out, size_t len);

/*
 * NULL if libdwfl may look up symbols in elf, a file of fsize bytes; else
 * why not: a symbol table or its strings compressed (libdwfl would inflate
 * them, 1,000 to 1 at most) or past the file's end, the tables together over
 * ELF_SYMBOLS_MAX, or MiniDebugInfo (.gnu_debugdata, an xz stream libdwfl
 * inflates when the file has no .symtab). *bytes: the tables' size.
 */
const char *elf_symbols_refusal(Elf *elf, uint64_t fsize, uint64_t *bytes);

/*
 * The answer of a libdwfl find_elf callback: a new reference to shared, a
 * handle already checked (NULL: none), and no file name, which libdwfl would
 * open itself. Returns the callback's -1 (no descriptor).
 */
int elf_dwfl_answer(Elf *shared, char **file_name, Elf **elfp);

#endif
