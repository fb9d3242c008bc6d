// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Option tables (opts.h). */
#include <string.h>

#include "base/opts.h"

void opts_getopt_init(struct opts_getopt *g, const struct opt *table, const char *flags)
{
	size_t n = 0, k;

	memset(g, 0, sizeof(*g));
	k = strlen(flags);
	memcpy(g->optstring, flags, k);
	for (const struct opt *o = table; o->name && n < OPTS_MAX; o++, n++) {
		g->longopts[n].name = o->name;
		g->longopts[n].has_arg = o->arg ? required_argument : no_argument;
		g->longopts[n].val = o->key;
		if (o->key > 0 && o->key < 256) {
			g->optstring[k++] = (char)o->key;
			if (o->arg)
				g->optstring[k++] = ':';
		}
	}
}

const struct opt *opts_find_long(const struct opt *table, const char *name)
{
	for (const struct opt *o = table; o->name; o++)
		if (!strcmp(o->name, name))
			return o;
	return NULL;
}

const struct opt *opts_find_short(const struct opt *table, int c)
{
	for (const struct opt *o = table; o->name; o++)
		if (o->key == c && c > 0 && c < 256)
			return o;
	return NULL;
}

static int listed(const struct opt *o, unsigned which)
{
	return o->help && (!o->list || (o->list & which));
}

void opts_help(FILE *f, const struct opt *table, int column, unsigned which)
{
	int shorts = 0;

	for (const struct opt *o = table; o->name; o++)
		if (listed(o, which) && o->key > 0 && o->key < 256)
			shorts = 1;
	for (const struct opt *o = table; o->name; o++) {
		const char *h, *nl;
		int n, at;

		if (!listed(o, which))
			continue;
		if (o->key > 0 && o->key < 256)
			n = fprintf(f, "  -%c, --%s", o->key, o->name);
		else
			n = fprintf(f, "  %s--%s", shorts ? "    " : "", o->name);
		if (o->arg)
			n += fprintf(f, " %s", o->arg);
		at = n + 2 > column ? n + 2 : column;
		for (h = o->help; h; h = nl ? nl + 1 : NULL) {
			nl = strchr(h, '\n');
			fprintf(f, "%*s%.*s\n", h == o->help ? at - n : at, "",
				nl ? (int)(nl - h) : (int)strlen(h), h);
		}
	}
}
