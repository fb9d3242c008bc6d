/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A gate in front of libdw for the call-frame information of a file the
 * target maps (SECURITY.md, "User stacks"): libdw runs a CFI program with no
 * bound on its remembered states or on its register numbers, and without
 * section headers it reads a file's whole tail as .eh_frame. The target
 * writes those files, so before a walk may use one, every entry libdw could
 * reach in it is decoded here once, on the same bytes libdw will read (the
 * ELF handle caches them), and a file past the limits is not walked.
 */
#ifndef STEPBLAME_CFICHECK_H
#define STEPBLAME_CFICHECK_H

#include <libelf.h>
#include <stdint.h>

#define CFI_REG_MAX 127          /* largest register number a rule may name */
#define CFI_DEPTH_MAX 16         /* remembered states held at once */
#define CFI_PROGRAM_MAX 65536    /* bytes of one entry's instructions */
#define CFI_CIES_MAX 4096        /* distinct CIEs of a section */
#define CFI_SCAN_MAX 262144      /* entries of a section libdw reads through in order */
#define CFI_ENTRIES_MAX 1048576  /* entries of a file: libdw keeps each one it has looked up */

struct cfi_check {
	uint64_t bytes;     /* what libdw may read from the file: call-frame and DWARF sections */
	uint32_t entries;   /* CIEs and FDEs decoded */
	uint32_t cies;
	uint32_t max_program, max_depth, max_reg;
	const char *why;    /* a refusal's reason, a static string */
};

/*
 * 0: libdw may read elf's call-frame information (ck->bytes of it, which
 * the caller bounds); -1: it may not, ck->why says why. elf is read through
 * its handle only, which keeps what was read for libdw.
 */
int cfi_check(Elf *elf, struct cfi_check *ck);

#endif
