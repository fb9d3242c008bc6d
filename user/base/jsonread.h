/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A small JSON reader (RFC 8259), safe on files from hosts we do not trust.
 * jr_parse() reads a whole document into a tree that one jr_doc owns; the
 * accessors below walk it and never fail: a NULL node, a node of the wrong
 * type or an index out of range gives NULL, 0, "" or false, so a caller can
 * chain them (jr_u64(jr_get(jr_at(steps, i), "ts"), &ts)) and check once.
 *
 * Strict: one value, whitespace around it and nothing else; no comments, no
 * trailing commas, no byte order mark, no NaN/Infinity, no leading zeros.
 * Containers nest at most JR_MAX_DEPTH deep. Strings: escapes are decoded to
 * UTF-8, \u0000 and lone surrogates become U+FFFD (so a string never holds a
 * NUL), raw bytes >= 0x80 are kept as they are (not checked to be UTF-8),
 * raw control characters are an error. Numbers: an integer literal that fits
 * in 64 bits keeps its exact value (jr_u64/jr_i64); every number also has
 * the correctly rounded double (jr_num); one beyond the range of a double
 * (1e400) is an error.
 */
#ifndef STEPBLAME_JSONREAD_H
#define STEPBLAME_JSONREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JR_MAX_DEPTH 64

enum jr_type { JR_NULL, JR_BOOL, JR_NUM, JR_STR, JR_ARR, JR_OBJ };

struct jr_val;	/* a node, owned by its document */
struct jr_doc;	/* owns every node and string */

/*
 * Parse buf[0..len) (need not be NUL-terminated). NULL on error, with a
 * one-line reason in err ("line 3: expected ':' (byte 41)"); err may be NULL.
 */
struct jr_doc *jr_parse(const char *buf, size_t len, char *err, size_t errlen);
/* the document and everything got from it; NULL is fine */
void jr_free(struct jr_doc *d);
const struct jr_val *jr_root(const struct jr_doc *d);

/* v NULL -> JR_NULL */
enum jr_type jr_type(const struct jr_val *v);
/* NULL if absent or obj not an object; the last of duplicate keys wins */
const struct jr_val *jr_get(const struct jr_val *obj, const char *key);
/* elements of an array, members of an object, else 0 */
size_t jr_len(const struct jr_val *v);
/* NULL if out of range or not an array */
const struct jr_val *jr_at(const struct jr_val *arr, size_t i);
/* member i of an object (in document order): key and value; NULL if out of range */
const char *jr_key_at(const struct jr_val *obj, size_t i);
const struct jr_val *jr_val_at(const struct jr_val *obj, size_t i);
/* NUL-terminated UTF-8 (raw bytes as in the input); "" if not a string */
const char *jr_str(const struct jr_val *v);
/* true only for an integer literal (no fraction, no exponent) that fits; -0 is 0 */
bool jr_u64(const struct jr_val *v, uint64_t *out);
bool jr_i64(const struct jr_val *v, int64_t *out);
/* the number as a double; 0 if not a number */
double jr_num(const struct jr_val *v);
/* false if not a bool */
bool jr_bool(const struct jr_val *v);

#endif
