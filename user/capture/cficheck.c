// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The gate in front of libdw for a target's call-frame information
 * (capture/cficheck.h; SECURITY.md, "User stacks").
 *
 * What libdw would do with a crafted file, and what is checked here:
 *  - no section headers: it takes .eh_frame from PT_GNU_EH_FRAME and reads
 *    from there to the end of the file (a sparse file of gigabytes): the
 *    file must name its .eh_frame in section headers, once;
 *  - a CFI program (the CIE's initial instructions, an FDE's instructions)
 *    is run for every lookup; each DW_CFA_remember_state allocates a copy of
 *    the register rules, kept until its restore or the program's end, and a
 *    rule for register N grows the rules to N + 1 entries: the remembered
 *    states held at once, the register numbers and a program's length are
 *    bounded here, every program libdw could reach decoded once: the entries
 *    in order, and those .eh_frame_hdr's table points at, with their CIEs;
 *  - without a search table it interns every entry it reads through: their
 *    number is bounded;
 *  - a main file with DWARF sections has them all read (and decompressed)
 *    when a lookup falls back to .debug_frame: their size counts in
 *    ck->bytes, and compressed ones are refused.
 * A file that would make libdw fail (a bad entry, an unknown opcode) is not
 * refused for that: libdw stops there itself.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "capture/cficheck.h"

struct cie_info {
	Dwarf_Off off;
	uint8_t fde_enc;
	bool sized;
	bool ok;               /* libdw could use it: its FDEs are checked */
};

struct scan {
	const unsigned char *ident;
	Elf_Data *data;
	bool eh;
	uint8_t *seen;         /* a bit per byte offset: entries already checked */
	struct cie_info *cies;
	uint32_t ncies;
	struct cfi_check *ck;
};

static int refuse(struct cfi_check *ck, const char *why)
{
	if (!ck->why)
		ck->why = why;
	return -1;
}

/* a ULEB128 or SLEB128 at *p: false if it runs past end or past 10 bytes */
static bool leb(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;

	for (unsigned shift = 0; *p < end && shift < 70; shift += 7) {
		uint8_t b = *(*p)++;

		if (shift < 64)
			x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return true;
		}
	}
	return false;
}

/* bytes of the personality pointer a CIE's augmentation skips, as libdw sizes it; 0: refused here */
static unsigned skip_size(uint8_t enc)
{
	switch (enc & 0x07) {
	case DW_EH_PE_udata2:
		return 2;
	case DW_EH_PE_udata4:
		return 4;
	case DW_EH_PE_absptr: case DW_EH_PE_udata8:
		return 8;
	default:
		return 0;
	}
}

/* bytes of a value in pointer encoding enc as libdw reads it; 0: an encoding refused here */
static unsigned enc_size(uint8_t enc)
{
	if (enc & DW_EH_PE_indirect)
		return 0;
	switch (enc & 0x70) {
	case DW_EH_PE_absptr: case DW_EH_PE_pcrel: case DW_EH_PE_datarel:
		break;
	default:
		return 0;
	}
	switch (enc & 0x0f) {
	case DW_EH_PE_udata2: case DW_EH_PE_sdata2:
		return 2;
	case DW_EH_PE_udata4: case DW_EH_PE_sdata4:
		return 4;
	case DW_EH_PE_absptr: case DW_EH_PE_udata8: case DW_EH_PE_sdata8:
		return 8;
	default:
		return 0;
	}
}

static const char past_end[] = "a CFI operand past its program's end";

static int reg_ok(struct cfi_check *ck, uint64_t reg)
{
	if (reg > CFI_REG_MAX)
		return refuse(ck, "a register number over the limit");
	if (reg > ck->max_reg)
		ck->max_reg = (uint32_t)reg;
	return 0;
}

/*
 * Decode one CFI program as libdw's execute_cfi runs it. 0: within the
 * limits up to its end or to where libdw would stop; -1: refused.
 */
static int check_program(struct cfi_check *ck, const uint8_t *p, const uint8_t *end, uint8_t fde_enc)
{
	uint32_t depth = 0;
	uint64_t a, b;

	if (end - p > CFI_PROGRAM_MAX)
		return refuse(ck, "a CFI program over the length limit");
	if ((uint32_t)(end - p) > ck->max_program)
		ck->max_program = (uint32_t)(end - p);
	while (p < end) {
		uint8_t op = *p++;

		switch (op & 0xc0) {
		case DW_CFA_advance_loc:
			continue;
		case DW_CFA_offset:
			if (!leb(&p, end, &a))
				return refuse(ck, past_end);
			continue;
		case DW_CFA_restore:
			continue;
		}
		switch (op) {
		case DW_CFA_nop:
		case DW_CFA_GNU_window_save:   /* rules up to register 31 */
			break;
		case DW_CFA_set_loc:
		case DW_CFA_advance_loc1:
		case DW_CFA_advance_loc2:
		case DW_CFA_advance_loc4:
		case DW_CFA_MIPS_advance_loc8:
			/* an operand of fixed size: the address encoding's, or 1, 2, 4, 8 bytes */
			a = op == DW_CFA_set_loc ? enc_size(fde_enc) : op == DW_CFA_advance_loc1 ? 1 :
			    op == DW_CFA_advance_loc2 ? 2 : op == DW_CFA_advance_loc4 ? 4 : 8;
			if (!a)
				return refuse(ck, "an address encoding not checked here");
			if ((uint64_t)(end - p) < a)
				return refuse(ck, past_end);
			p += a;
			break;
		case DW_CFA_offset_extended:
		case DW_CFA_offset_extended_sf:
		case DW_CFA_val_offset:
		case DW_CFA_val_offset_sf:
		case DW_CFA_register:
		case DW_CFA_GNU_negative_offset_extended:
		case DW_CFA_def_cfa:
		case DW_CFA_def_cfa_sf:
			if (!leb(&p, end, &a) || !leb(&p, end, &b))
				return refuse(ck, past_end);
			if (reg_ok(ck, a) || (op == DW_CFA_register && reg_ok(ck, b)))
				return -1;
			break;
		case DW_CFA_restore_extended:
		case DW_CFA_undefined:
		case DW_CFA_same_value:
		case DW_CFA_def_cfa_register:
			if (!leb(&p, end, &a))
				return refuse(ck, past_end);
			if (reg_ok(ck, a))
				return -1;
			break;
		case DW_CFA_def_cfa_offset:
		case DW_CFA_def_cfa_offset_sf:
		case DW_CFA_GNU_args_size:
			if (!leb(&p, end, &a))
				return refuse(ck, past_end);
			break;
		case DW_CFA_def_cfa_expression:
		case DW_CFA_expression:
		case DW_CFA_val_expression:
			if (op != DW_CFA_def_cfa_expression) {
				if (!leb(&p, end, &a))
					return refuse(ck, past_end);
				if (reg_ok(ck, a))
					return -1;
			}
			/* the expression runs with libdw's own bound on its steps */
			if (!leb(&p, end, &b) || b > (uint64_t)(end - p))
				return refuse(ck, past_end);
			p += b;
			break;
		case DW_CFA_remember_state:
			if (++depth > CFI_DEPTH_MAX)
				return refuse(ck, "CFI remembered states over the limit");
			if (depth > ck->max_depth)
				ck->max_depth = depth;
			break;
		case DW_CFA_restore_state:
			if (!depth)
				return 0;      /* libdw stops here: nothing to restore */
			depth--;
			break;
		default:
			return 0;              /* an opcode libdw stops at */
		}
	}
	return 0;
}

static bool seen(struct scan *s, Dwarf_Off off)
{
	bool was = s->seen[off / 8] & (1u << (off % 8));

	s->seen[off / 8] |= (uint8_t)(1u << (off % 8));
	return was;
}

/* the CIE at off as libdw interns it; NULL: libdw could not use it, or it was refused (ck->why) */
static const struct cie_info *cie_at(struct scan *s, Dwarf_Off off)
{
	Dwarf_CFI_Entry e;
	Dwarf_Off next;
	struct cie_info ci = { .off = off, .fde_enc = DW_EH_PE_absptr };
	const uint8_t *d, *lim;

	for (uint32_t i = 0; i < s->ncies; i++)
		if (s->cies[i].off == off)
			return s->cies[i].ok ? &s->cies[i] : NULL;
	if (s->ncies == CFI_CIES_MAX) {
		refuse(s->ck, "CIEs over the limit");
		return NULL;
	}
	if (dwarf_next_cfi(s->ident, s->data, s->eh, off, &next, &e) == 0 && e.cie.CIE_id == DW_CIE_ID_64) {
		const char *ap = e.cie.augmentation;

		ci.ok = true;
		d = e.cie.augmentation_data;
		lim = d + e.cie.augmentation_data_size;
		if (*ap == 'z') {
			ci.sized = true;
			ap++;
		}
		/* the augmentations compilers write; another one is refused, not guessed at */
		for (; *ap && ci.ok; ap++) {
			unsigned n;

			switch (*ap) {
			case 'S':
				break;
			case 'L':
			case 'R':
				if (ci.sized) {
					if (d >= lim)
						ci.ok = false;
					else if (*ap == 'R')
						ci.fde_enc = *d++;
					else
						d++;
				}
				break;
			case 'P':
				if (ci.sized) {
					if (d >= lim || *d == DW_EH_PE_omit || !(n = skip_size(*d))) {
						refuse(s->ck, "a CIE augmentation not checked here");
						ci.ok = false;
					} else {
						d += 1 + n;
					}
				}
				break;
			default:
				refuse(s->ck, "a CIE augmentation not checked here");
				ci.ok = false;
			}
		}
		if ((ci.fde_enc & 0x0f) == DW_EH_PE_absptr)
			ci.fde_enc |= DW_EH_PE_udata8;
		if (ci.ok && !enc_size(ci.fde_enc)) {
			refuse(s->ck, "an address encoding not checked here");
			ci.ok = false;
		}
		if (ci.ok && check_program(s->ck, e.cie.initial_instructions,
					   e.cie.initial_instructions_end, ci.fde_enc))
			ci.ok = false;
	}
	s->cies[s->ncies++] = ci;
	s->ck->cies = s->ncies;
	return ci.ok ? &s->cies[s->ncies - 1] : NULL;
}

/*
 * The entry at off and what it refers to; 1: the end (or where libdw stops
 * reading in order). in_order: *next is wanted, else an entry checked
 * before is not read again.
 */
static int check_entry(struct scan *s, Dwarf_Off off, Dwarf_Off *next, bool in_order)
{
	Dwarf_CFI_Entry e;
	const struct cie_info *ci;
	const uint8_t *p, *end;
	uint64_t len;
	unsigned n;
	int r;

	*next = (Dwarf_Off)-1;
	if (off >= s->data->d_size)
		return 1;
	if (!in_order && (s->seen[off / 8] & (1u << (off % 8))))
		return 0;
	r = dwarf_next_cfi(s->ident, s->data, s->eh, off, next, &e);
	if (r)
		return 1;
	if (seen(s, off))
		return 0;
	if (++s->ck->entries > CFI_ENTRIES_MAX)
		return refuse(s->ck, "CFI entries over the limit");
	if (e.cie.CIE_id == DW_CIE_ID_64) {
		cie_at(s, off);
		return s->ck->why ? -1 : 0;
	}
	ci = cie_at(s, e.fde.CIE_pointer);
	if (s->ck->why)
		return -1;
	if (!ci)
		return 0;
	/* initial location, address range, then the augmentation's block: as libdw's intern_fde */
	p = e.fde.start;
	end = e.fde.end;
	n = enc_size(ci->fde_enc) + enc_size(ci->fde_enc & 0x0f);
	if ((uint64_t)(end - p) < n)
		return 0;
	p += n;
	if (ci->sized) {
		if (!leb(&p, end, &len) || len > (uint64_t)(end - p))
			return 0;
		p += len;
	}
	return check_program(s->ck, p, end, ci->fde_enc);
}

/* the entries in order, as libdw reads through them; limit: how many it may read that way */
static int scan_in_order(struct scan *s, uint32_t limit)
{
	Dwarf_Off off = 0, next;
	uint32_t n = 0;
	int r;

	while ((r = check_entry(s, off, &next, true)) == 0) {
		if (++n > limit)
			return refuse(s->ck, "CFI entries over the limit for a section without a search table");
		off = next;
	}
	return r < 0 ? -1 : 0;
}

static int scan_section(struct scan *s, Elf_Data *data, bool eh)
{
	s->data = data;
	s->eh = eh;
	s->ncies = 0;
	free(s->seen);
	s->seen = calloc(data->d_size / 8 + 1, 1);
	if (!s->cies)
		s->cies = calloc(CFI_CIES_MAX, sizeof(*s->cies));
	return s->seen && s->cies ? 0 : refuse(s->ck, "out of memory");
}

/*
 * .eh_frame_hdr as libdw reads it (version 1; the encodings every linker
 * writes, others refused); *table NULL when libdw would read .eh_frame in
 * order instead.
 */
static int read_hdr(struct cfi_check *ck, Elf_Data *hd, uint64_t hdr_vaddr, uint64_t eh_vaddr,
		    const uint8_t **table, uint32_t *count)
{
	const uint8_t *h = hd->d_buf;
	int32_t ptr;
	uint32_t n;

	*table = NULL;
	*count = 0;
	if (hd->d_size < 4 || h[0] != 1 || h[1] == DW_EH_PE_omit)
		return 0;                    /* libdw takes no call-frame information from the file */
	if (h[1] != (DW_EH_PE_pcrel | DW_EH_PE_sdata4) || hd->d_size < 12 ||
	    (h[2] != DW_EH_PE_omit && h[2] != DW_EH_PE_udata4) ||
	    (h[3] != DW_EH_PE_omit && h[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4)))
		return refuse(ck, "an .eh_frame_hdr encoding not checked here");
	memcpy(&ptr, h + 4, 4);
	if (h[2] == DW_EH_PE_omit || h[3] == DW_EH_PE_omit)
		return 0;
	memcpy(&n, h + 8, 4);
	if (!n)
		return 0;
	if (n > (hd->d_size - 12) / 8)
		return 0;                    /* libdw takes no call-frame information from the file */
	if (hdr_vaddr + 4 + (int64_t)ptr != eh_vaddr)
		return 0;                    /* libdw ignores the table */
	*table = h + 12;
	*count = n;
	return 0;
}

/* .eh_frame: its entries in order, and those .eh_frame_hdr's table points at */
static int check_eh(struct scan *s, Elf_Scn *eh, Elf_Scn *hdr, uint64_t eh_vaddr, uint64_t hdr_vaddr)
{
	const uint8_t *table = NULL;
	uint32_t count = 0;
	Elf_Data *d = elf_rawdata(eh, NULL);

	if (!d || !d->d_buf)
		return 0;                    /* nothing libdw could read */
	if (hdr) {
		Elf_Data *hd = elf_rawdata(hdr, NULL);

		if (hd && hd->d_buf && read_hdr(s->ck, hd, hdr_vaddr, eh_vaddr, &table, &count))
			return -1;
	}
	if (scan_section(s, d, true) || scan_in_order(s, table ? UINT32_MAX : CFI_SCAN_MAX))
		return -1;
	for (uint32_t i = 0; i < count; i++) {
		int32_t rel;
		uint64_t addr;
		Dwarf_Off next;

		memcpy(&rel, table + 8 * (size_t)i + 4, 4);
		addr = hdr_vaddr + (uint64_t)(int64_t)rel;
		if (addr < eh_vaddr)
			continue;            /* no entry there: libdw's lookup fails */
		if (check_entry(s, addr - eh_vaddr, &next, false) < 0)
			return -1;
	}
	return 0;
}

static bool name_is(const char *name, const char *prefix)
{
	return !strncmp(name, prefix, strlen(prefix));
}

int cfi_check(Elf *elf, struct cfi_check *ck)
{
	size_t shstrndx, phnum;
	Elf_Scn *scn = NULL, *eh = NULL, *hdr = NULL, *dbg = NULL;
	uint64_t eh_vaddr = 0, hdr_vaddr = 0;
	bool ehphdr = false;
	struct scan s = { .ck = ck };
	GElf_Ehdr eh_mem;
	Elf_Data *d;
	int rc = 0;

	*ck = (struct cfi_check){ 0 };
	if (elf_kind(elf) != ELF_K_ELF || !(s.ident = (const unsigned char *)elf_getident(elf, NULL)))
		return refuse(ck, "not an ELF file");
	if (s.ident[EI_CLASS] != ELFCLASS64 || s.ident[EI_DATA] != ELFDATA2LSB)
		return refuse(ck, "not a 64-bit little-endian ELF file");
	/* a relocatable file would have libdwfl apply its relocations */
	if (!gelf_getehdr(elf, &eh_mem) || (eh_mem.e_type != ET_DYN && eh_mem.e_type != ET_EXEC))
		return refuse(ck, "not an executable or shared object");
	if (!elf_getphdrnum(elf, &phnum))
		for (size_t i = 0; i < phnum; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME)
				ehphdr = true;
		}
	if (elf_getshdrstrndx(elf, &shstrndx))
		shstrndx = 0;
	while (shstrndx && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
			continue;
		if (name_is(name, ".zdebug") ||
		    (name_is(name, ".debug_") && (sh.sh_flags & SHF_COMPRESSED)))
			return refuse(ck, "compressed DWARF sections");
		if (sh.sh_type == SHT_NOBITS)
			continue;
		if (!strcmp(name, ".eh_frame") || !strcmp(name, ".eh_frame_hdr") ||
		    !strcmp(name, ".debug_frame")) {
			Elf_Scn **slot = name[1] == 'd' ? &dbg : name[9] ? &hdr : &eh;

			if (*slot)
				return refuse(ck, "a call-frame section named twice");
			*slot = scn;
			if (slot == &eh)
				eh_vaddr = sh.sh_addr;
			else if (slot == &hdr)
				hdr_vaddr = sh.sh_addr;
		}
		if (!strcmp(name, ".eh_frame") || !strcmp(name, ".eh_frame_hdr") || name_is(name, ".debug_"))
			ck->bytes += sh.sh_size;
	}
	if (!eh && ehphdr)
		return refuse(ck, "no .eh_frame section header (libdw would read to the end of the file)");
	if (eh && check_eh(&s, eh, hdr, eh_vaddr, hdr_vaddr))
		goto out;
	if (dbg && (d = elf_rawdata(dbg, NULL)) && d->d_buf &&
	    (scan_section(&s, d, false) || scan_in_order(&s, CFI_SCAN_MAX)))
		goto out;
out:
	if (ck->why)
		rc = -1;
	free(s.seen);
	free(s.cies);
	return rc;
}
