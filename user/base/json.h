/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A tiny streaming JSON writer: commas and indentation are its business, the
 * caller only says what comes next. Strings are written as valid JSON whatever
 * their bytes (thread names are arbitrary bytes): invalid UTF-8 becomes \u00XX.
 */
#ifndef STEPBLAME_JSON_H
#define STEPBLAME_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JW_MAX_DEPTH 32

struct jw {
	FILE *f;
	bool pretty;
	int depth;
	bool after_key;
	bool nonempty[JW_MAX_DEPTH];
};

void jw_init(struct jw *w, FILE *f, bool pretty);
void jw_obj(struct jw *w);
void jw_obj_end(struct jw *w);
void jw_arr(struct jw *w);
void jw_arr_end(struct jw *w);
void jw_key(struct jw *w, const char *k);
void jw_str(struct jw *w, const char *s);
void jw_strn(struct jw *w, const char *s, size_t n);
void jw_u64(struct jw *w, uint64_t v);
void jw_bool(struct jw *w, bool v);
void jw_null(struct jw *w);
/* fixed decimals, so the bytes do not depend on the libc's shortest-repr choice */
void jw_fixed(struct jw *w, double v, int decimals);

/* the escaped body of a JSON string (no quotes) */
void json_escape(FILE *f, const char *s, size_t n);

/*
 * The same, for one character at s (n bytes there): its escaped form into out,
 * its length returned, the bytes of s it stands for in *used.
 */
#define JSON_ESC_MAX 6
size_t json_escape_one(char out[JSON_ESC_MAX], const char *s, size_t n, size_t *used);

#endif
