/* SPDX-License-Identifier: MIT */
/*
 * One line of /proc/PID/maps, its fixed fields read by hand: the agent
 * reads the maps of a large trainer (thousands of lines) several times a
 * second, and sscanf took as long per read as the kernel took to write the
 * text (docs/ARCHITECTURE.md, "Stacks"). Header-only: the
 * collector library uses it too.
 *
 * The kernel writes "START-END PERMS OFFSET MAJ:MIN INODE", the numbers in
 * hex but the inode (decimal), each field followed by one space, then
 * spaces up to the name's column and the name, if any, to the end of the
 * line. Nothing else is accepted: no sign, no 0x, no number past 64 bits,
 * exactly four characters of permissions.
 */
#ifndef SB_FORMAT_MAPS_H
#define SB_FORMAT_MAPS_H

#include <stdbool.h>
#include <stdint.h>

struct maps_line {
	uint64_t start, end, off, ino;
	unsigned maj, min;
	char perms[5];     /* "r-xp" */
	const char *name;  /* the rest of the line, after the spaces: "" for none */
};

/* the digits at *s in base 16 or 10 into *v, *s past them; false if none, or more than fit */
static inline bool maps_num(const char **s, unsigned base, uint64_t *v)
{
	const char *p = *s;
	uint64_t x = 0;
	unsigned n = 0;

	for (;; p++, n++) {
		unsigned d;

		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (base == 16 && *p >= 'a' && *p <= 'f')
			d = (unsigned)(*p - 'a' + 10);
		else if (base == 16 && *p >= 'A' && *p <= 'F')
			d = (unsigned)(*p - 'A' + 10);
		else
			break;
		if (x > (UINT64_MAX - d) / base)
			return false;
		x = x * base + d;
	}
	if (!n)
		return false;
	*s = p;
	*v = x;
	return true;
}

/* the field at *s followed by c: *s past both */
static inline bool maps_field(const char **s, unsigned base, char c, uint64_t *v)
{
	if (!maps_num(s, base, v) || **s != c)
		return false;
	(*s)++;
	return true;
}

/* line (up to its NUL) parsed into l; false if it is not a maps line */
static inline bool maps_line_parse(const char *line, struct maps_line *l)
{
	const char *s = line;
	uint64_t maj, min;

	if (!maps_field(&s, 16, '-', &l->start) || !maps_field(&s, 16, ' ', &l->end))
		return false;
	for (int i = 0; i < 4; i++, s++) {
		if (*s == ' ' || !*s)
			return false;
		l->perms[i] = *s;
	}
	l->perms[4] = 0;
	if (*s++ != ' ' || !maps_field(&s, 16, ' ', &l->off) || !maps_field(&s, 16, ':', &maj) ||
	    !maps_field(&s, 16, ' ', &min) || maj > 0xffffffffu || min > 0xffffffffu ||
	    !maps_num(&s, 10, &l->ino) || (*s && *s != ' ' && *s != '\n'))
		return false;
	while (*s == ' ' || *s == '\n')
		s++;
	l->maj = (unsigned)maj;
	l->min = (unsigned)min;
	l->name = s;
	return true;
}

#endif
