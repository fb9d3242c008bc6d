/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Command-line options described once: each row of a table names an option,
 * its value and its help text. The same table drives getopt_long and writes
 * the options part of --help, so the two cannot drift apart.
 */
#ifndef STEPBLAME_OPTS_H
#define STEPBLAME_OPTS_H

#include <getopt.h>
#include <stdio.h>

struct opt {
	const char *name;   /* long name, without the dashes */
	int key;            /* what getopt_long returns: a letter is also the short option
	                       (-x), a value from 256 up is long-only */
	const char *arg;    /* the value's name in the help; NULL: takes no value */
	const char *help;   /* NULL: not listed; '\n' starts another line of it */
	unsigned list;      /* listed only by an opts_help whose which has one of these bits
	                       (0: by every one) */
};

#define OPTS_MAX 64

/* getopt_long's view of a table (which ends with a row without a name) */
struct opts_getopt {
	struct option longopts[OPTS_MAX + 1];
	char optstring[3 * OPTS_MAX + 4];
};

/* flags: what optstring starts with ("+" stop at the first non-option, ":" ...) */
void opts_getopt_init(struct opts_getopt *g, const struct opt *table, const char *flags);

static inline int opts_next(const struct opts_getopt *g, int argc, char **argv)
{
	return getopt_long(argc, argv, g->optstring, g->longopts, NULL);
}

/* the row for --name (exactly), or for -c; NULL if the table has none */
const struct opt *opts_find_long(const struct opt *table, const char *name);
const struct opt *opts_find_short(const struct opt *table, int c);

/*
 * The options part of --help: one row per listed option, "  -x, --name ARG"
 * (long-only options indented to match when any listed row has a letter),
 * its help from column on (two spaces further when the option is longer),
 * further lines of it at the same column.
 */
void opts_help(FILE *f, const struct opt *table, int column, unsigned which);

#endif
