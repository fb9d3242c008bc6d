// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <math.h>
#include <string.h>

#include "base/json.h"
#include "base/util.h"

void jw_init(struct jw *w, FILE *f, bool pretty)
{
	memset(w, 0, sizeof(*w));
	w->f = f;
	w->pretty = pretty;
}

static void newline(struct jw *w)
{
	if (!w->pretty)
		return;
	fputc('\n', w->f);
	for (int i = 0; i < w->depth; i++)
		fputs("  ", w->f);
}

/* before any value or key: the comma and the line break it needs */
static void pre(struct jw *w)
{
	if (w->after_key) {
		w->after_key = false;
		return;
	}
	if (w->depth > 0) {
		if (w->nonempty[w->depth])
			fputc(',', w->f);
		w->nonempty[w->depth] = true;
		newline(w);
	}
}

/*
 * The fast path: what one call writes (comma, line break, indentation, the
 * token) is put together in a buffer and handed to stdio in one call. TOK_MAX
 * holds the most pre_into() writes and a plain string of PLAIN_MAX bytes.
 */
#define PLAIN_MAX 64
#define TOK_MAX (2 + 2 * JW_MAX_DEPTH + PLAIN_MAX + 8)

/* what pre() writes, into b; returns its length */
static size_t pre_into(struct jw *w, char *b)
{
	size_t n = 0;

	if (w->after_key) {
		w->after_key = false;
		return 0;
	}
	if (w->depth > 0) {
		if (w->nonempty[w->depth])
			b[n++] = ',';
		w->nonempty[w->depth] = true;
		if (w->pretty) {
			b[n++] = '\n';
			memset(b + n, ' ', 2 * (size_t)w->depth);
			n += 2 * (size_t)w->depth;
		}
	}
	return n;
}

/* a string json_escape() writes as it is, short enough for the fast path */
static bool plain(const char *s, size_t n)
{
	if (n > PLAIN_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
			return false;
	}
	return true;
}

static void open(struct jw *w, char c)
{
	char b[TOK_MAX];
	size_t n = pre_into(w, b);

	b[n++] = c;
	fwrite(b, 1, n, w->f);
	if (w->depth + 1 < JW_MAX_DEPTH)
		w->depth++;
	w->nonempty[w->depth] = false;
}

static void close_(struct jw *w, char c)
{
	bool had = w->nonempty[w->depth];

	char b[TOK_MAX];
	size_t n = 0;

	if (w->depth > 0)
		w->depth--;
	if (had && w->pretty) {
		/* as newline() */
		b[n++] = '\n';
		memset(b + n, ' ', 2 * (size_t)w->depth);
		n += 2 * (size_t)w->depth;
	}
	b[n++] = c;
	if (w->depth == 0 && w->pretty)
		b[n++] = '\n';
	fwrite(b, 1, n, w->f);
}

void jw_obj(struct jw *w) { open(w, '{'); }
void jw_obj_end(struct jw *w) { close_(w, '}'); }
void jw_arr(struct jw *w) { open(w, '['); }
void jw_arr_end(struct jw *w) { close_(w, ']'); }

void jw_key(struct jw *w, const char *k)
{
	size_t kl = strlen(k);

	if (plain(k, kl)) {
		char b[TOK_MAX];
		size_t n = pre_into(w, b);

		b[n++] = '"';
		memcpy(b + n, k, kl);
		n += kl;
		b[n++] = '"';
		b[n++] = ':';
		if (w->pretty)
			b[n++] = ' ';
		fwrite(b, 1, n, w->f);
		w->after_key = true;
		return;
	}
	pre(w);
	fputc('"', w->f);
	json_escape(w->f, k, strlen(k));
	fputs(w->pretty ? "\": " : "\":", w->f);
	w->after_key = true;
}

/*
 * The one escaping policy of every JSON stepblame writes: '"' and '\' with a
 * backslash, \n \r \t as such, other controls and DEL as \u00XX, C1 controls and
 * bidirectional overrides and isolates as \uXXXX (what utf8_printable() refuses:
 * raw, they would drive a terminal or reorder a line where the JSON is shown),
 * other valid UTF-8 as it is, a byte that is not part of valid UTF-8 as \ufffd.
 */
size_t json_escape_one(char out[JSON_ESC_MAX], const char *str, size_t n, size_t *used)
{
	const unsigned char *s = (const unsigned char *)str;
	unsigned char c = s[0];
	size_t l;

	*used = 1;
	if (c == '"' || c == '\\') {
		out[0] = '\\';
		out[1] = (char)c;
		return 2;
	}
	if (c == '\n' || c == '\r' || c == '\t') {
		out[0] = '\\';
		out[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
		return 2;
	}
	if (c < 0x20 || c == 0x7f) {
		memcpy(out, "\\u00", 4);
		out[4] = "0123456789abcdef"[c >> 4];
		out[5] = "0123456789abcdef"[c & 15];
		return 6;
	}
	if (c < 0x80) {
		out[0] = (char)c;
		return 1;
	}
	if ((l = utf8_seq_len(s, n)) && !utf8_seq_refused(s, l)) {
		memcpy(out, s, l);
		*used = l;
		return l;
	}
	if (l == 2 || l == 3) {
		/* a C1 control, a bidirectional override or isolate: as \uXXXX */
		unsigned cp = l == 2 ? (s[0] & 0x1fu) << 6 | (s[1] & 0x3fu) :
				       (s[0] & 0x0fu) << 12 | (s[1] & 0x3fu) << 6 | (s[2] & 0x3fu);

		out[0] = '\\';
		out[1] = 'u';
		for (int i = 0; i < 4; i++)
			out[2 + i] = "0123456789abcdef"[(cp >> (12 - 4 * i)) & 15];
		*used = l;
		return 6;
	}
	memcpy(out, "\\ufffd", 6);
	return 6;
}

void json_escape(FILE *f, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;

	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		char e[JSON_ESC_MAX];
		size_t l, k;

		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			/* a run of characters that stand for themselves: one write */
			for (l = i + 1; l < n && s[l] >= 0x20 && s[l] < 0x7f && s[l] != '"' &&
					s[l] != '\\'; l++)
				;
			fwrite(s + i, 1, l - i, f);
			i = l;
			continue;
		}
		k = json_escape_one(e, str + i, n - i, &l);
		fwrite(e, 1, k, f);
		i += l;
	}
}

void jw_strn(struct jw *w, const char *s, size_t n)
{
	if (plain(s, n)) {
		char b[TOK_MAX];
		size_t k = pre_into(w, b);

		b[k++] = '"';
		memcpy(b + k, s, n);
		k += n;
		b[k++] = '"';
		fwrite(b, 1, k, w->f);
		return;
	}
	pre(w);
	fputc('"', w->f);
	json_escape(w->f, s, n);
	fputc('"', w->f);
}

void jw_str(struct jw *w, const char *s)
{
	jw_strn(w, s ? s : "", s ? strlen(s) : 0);
}

void jw_u64(struct jw *w, uint64_t v)
{
	char b[TOK_MAX], d[20];
	size_t n = pre_into(w, b), k = sizeof(d);

	/* as printf's %llu */
	do {
		d[--k] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	memcpy(b + n, d + k, sizeof(d) - k);
	fwrite(b, 1, n + sizeof(d) - k, w->f);
}

void jw_bool(struct jw *w, bool v)
{
	char b[TOK_MAX];
	size_t n = pre_into(w, b);

	memcpy(b + n, v ? "true" : "false", v ? 4 : 5);
	fwrite(b, 1, n + (v ? 4 : 5), w->f);
}

void jw_null(struct jw *w)
{
	pre(w);
	fputs("null", w->f);
}

void jw_fixed(struct jw *w, double v, int decimals)
{
	pre(w);
	if (!isfinite(v))
		v = 0;
	fprintf(w->f, "%.*f", decimals, v);
}
