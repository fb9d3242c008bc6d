/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libFuzzer target: the check of a target's call-frame information
 * (user/capture/cficheck.c) on an ELF image made of the input, then, where
 * the check lets the file through, what the walk does with it: libdw's
 * lookups of frames in .eh_frame (dwarf_getcfi_elf) and in .debug_frame
 * (dwarf_begin_elf, dwarf_getcfi, as libdwfl falls back), at addresses over
 * its executable sections.
 *
 *   clang -g -O1 -std=gnu11 -fsanitize=fuzzer,address,undefined \
 *       -fno-sanitize-recover=undefined -D_GNU_SOURCE -I. -Iuser \
 *       tests/fuzz/fuzz_cfi.c user/capture/cficheck.c -ldw -lelf -o build/fuzz/fuzz_cfi
 *   build/fuzz/fuzz_cfi -malloc_limit_mb=64 corpus/
 *
 * Besides "no crash, no sanitizer report" (the check reads bytes the target
 * wrote), it asserts that a refusal has a reason and a pass none. run.sh
 * gives it -malloc_limit_mb=64: a file the check lets through on which libdw
 * then mallocs 64 MB at once is a finding, as is a lookup past -timeout.
 * libdw grows a frame's rules by realloc, which that limit does not see: the
 * register bound is tested on the real agent's memory instead
 * (tests/scenarios/robust_hostile_cfi.sh).
 */
#include <assert.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <libelf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capture/cficheck.h"

/* frames looked up over the code of elf: every byte of a small section, 256 spread over a larger one */
static void lookups(Elf *elf, Dwarf_CFI *cfi)
{
	Elf_Scn *scn = NULL;

	if (!cfi)
		return;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR))
			continue;
		for (uint64_t off = 0, step = sh.sh_size / 256 + 1; off < sh.sh_size && off < (1u << 20);
		     off += step) {
			Dwarf_Frame *f;
			Dwarf_Op *ops;
			size_t nops;

			if (dwarf_cfi_addrframe(cfi, sh.sh_addr + off, &f) == 0) {
				dwarf_frame_cfa(f, &ops, &nops);
				free(f);
			}
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int init;
	struct cfi_check ck;
	char *buf;
	Elf *elf;
	int rc;

	if (!init) {
		elf_version(EV_CURRENT);
		init = 1;
	}
	if (!(buf = malloc(size ? size : 1)))
		return 0;
	memcpy(buf, data, size);
	if ((elf = elf_memory(buf, size))) {
		rc = cfi_check(elf, &ck);
		assert(rc == 0 || rc == -1);
		assert((rc == 0) == (ck.why == NULL));
		if (rc == 0 && ck.bytes <= (64u << 20)) {
			Dwarf_CFI *cfi = dwarf_getcfi_elf(elf);
			Dwarf *dw;

			lookups(elf, cfi);
			if (cfi)
				dwarf_cfi_end(cfi);
			if ((dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL))) {
				lookups(elf, dwarf_getcfi(dw));
				dwarf_end(dw);
			}
		}
		elf_end(elf);
	}
	free(buf);
	return 0;
}
