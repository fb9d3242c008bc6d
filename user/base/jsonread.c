/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The parser is one loop over the input with an explicit stack of the open
 * containers (at most JR_MAX_DEPTH), no recursion. Values are pushed on one
 * vector that grows by doubling; when a container closes, its children (an
 * object's are key, value, key, value, ...) are copied off the top of that
 * vector into the document's arena as one contiguous block, and the
 * container itself takes their place. Strings are decoded straight into the
 * arena. Every byte is looked at a bounded number of times: linear time.
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonread.h"

/* what a JR_NUM node holds */
enum { NUM_U64, NUM_NEG, NUM_DBL };

struct jr_val {
	uint8_t type;			/* enum jr_type */
	uint8_t sub;			/* JR_BOOL: the value; JR_NUM: NUM_* */
	uint32_t n;			/* JR_ARR: elements; JR_OBJ: members */
	union {
		uint64_t u;		/* NUM_U64: a non-negative integer literal */
		int64_t i;		/* NUM_NEG: a negative one ("-0" is 0) */
		double d;		/* NUM_DBL: any other number */
		const char *s;		/* JR_STR */
		const struct jr_val *kids; /* JR_ARR: n values; JR_OBJ: 2n, key then value */
	} v;
};

/*
 * The arena: chunks of 4 KiB doubling up to 1 MiB, a block bigger than a
 * quarter of the next chunk in one of its own. The first chunk of the list is
 * the one being filled.
 */
struct jr_chunk {
	struct jr_chunk *next;
	size_t cap, used;
};

#define CHUNK_HDR	((sizeof(struct jr_chunk) + 15) & ~(size_t)15)
#define CHUNK_MIN	4096
#define CHUNK_MAX	(1024 * 1024)

struct jr_doc {
	struct jr_val root;
	struct jr_chunk *chunks;
	size_t next_cap;
	/* the last block handed out of the first chunk, for arena_trim() */
	char *last;
	size_t last_off;
};

static char *chunk_data(struct jr_chunk *c)
{
	return (char *)c + CHUNK_HDR;
}

/* size > 0 bytes aligned to align (a power of two <= 16); NULL if out of memory */
static void *arena_alloc(struct jr_doc *d, size_t size, size_t align)
{
	struct jr_chunk *c = d->chunks;
	size_t off, cap;

	if (c) {
		off = (c->used + align - 1) & ~(align - 1);
		if (off <= c->cap && size <= c->cap - off) {
			c->used = off + size;
			d->last = chunk_data(c) + off;
			d->last_off = off;
			return d->last;
		}
	}
	if (size > d->next_cap / 4) {
		if (size > SIZE_MAX - CHUNK_HDR)
			return NULL;
		c = malloc(CHUNK_HDR + size);
		if (!c)
			return NULL;
		c->cap = c->used = size;
		/* behind the chunk being filled, which stays first */
		if (d->chunks) {
			c->next = d->chunks->next;
			d->chunks->next = c;
		} else {
			c->next = NULL;
			d->chunks = c;
			d->last = NULL;
		}
		return chunk_data(c);
	}
	cap = d->next_cap;
	c = malloc(CHUNK_HDR + cap);
	if (!c)
		return NULL;
	if (d->next_cap < CHUNK_MAX)
		d->next_cap *= 2;
	c->cap = cap;
	c->used = size;
	c->next = d->chunks;
	d->chunks = c;
	d->last = chunk_data(c);
	d->last_off = 0;
	return d->last;
}

/* the block p just got from arena_alloc() needs only size bytes */
static void arena_trim(struct jr_doc *d, char *p, size_t size)
{
	if (p == d->last)
		d->chunks->used = d->last_off + size;
}

struct open {
	size_t start;		/* its first child in parser.vs */
	uint8_t type;		/* JR_ARR or JR_OBJ */
};

struct parser {
	const char *buf;
	size_t len, pos;
	struct jr_doc *d;
	struct jr_val *vs;	/* the children of the open containers, innermost last */
	size_t vn, vcap;
	struct open open[JR_MAX_DEPTH];
	int depth;
	size_t err_pos;
	char msg[96];
};

static bool fail(struct parser *p, size_t pos, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static bool fail(struct parser *p, size_t pos, const char *fmt, ...)
{
	va_list ap;

	p->err_pos = pos;
	va_start(ap, fmt);
	vsnprintf(p->msg, sizeof(p->msg), fmt, ap);
	va_end(ap);
	return false;
}

/* the byte at pos, for a message: "'x'", "byte 0x0a" or "end of input" */
static const char *what(const struct parser *p, size_t pos, char *b, size_t len)
{
	unsigned char c;

	if (pos >= p->len)
		return "end of input";
	c = (unsigned char)p->buf[pos];
	if (c > 0x20 && c < 0x7f)
		snprintf(b, len, "'%c'", c);
	else
		snprintf(b, len, "byte 0x%02x", c);
	return b;
}

static bool push(struct parser *p, const struct jr_val *v)
{
	struct jr_val *vs;
	size_t cap;

	if (p->vn == p->vcap) {
		if (p->vcap > SIZE_MAX / 2 / sizeof(*vs))
			return fail(p, p->pos, "out of memory");
		cap = p->vcap ? p->vcap * 2 : 64;
		vs = realloc(p->vs, cap * sizeof(*vs));
		if (!vs)
			return fail(p, p->pos, "out of memory");
		p->vs = vs;
		p->vcap = cap;
	}
	p->vs[p->vn++] = *v;
	return true;
}

static void skip_ws(struct parser *p)
{
	while (p->pos < p->len) {
		char c = p->buf[p->pos];

		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		p->pos++;
	}
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* four hex digits; -1 if they are not */
static int32_t hex4(const char *s)
{
	int32_t v = 0;

	for (int i = 0; i < 4; i++) {
		char c = s[i];
		int x;

		if (c >= '0' && c <= '9')
			x = c - '0';
		else if (c >= 'a' && c <= 'f')
			x = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			x = c - 'A' + 10;
		else
			return -1;
		v = v << 4 | x;
	}
	return v;
}

static size_t put_utf8(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * The string whose opening quote is at p->pos, decoded into the arena; p->pos
 * ends after its closing quote. No escape is longer decoded than written
 * (\uXXXX: 6 bytes for at most 3, a surrogate pair: 12 for 4), so the raw
 * length is room enough.
 */
static bool parse_string(struct parser *p, const char **out)
{
	const char *b = p->buf;
	size_t start = p->pos + 1, end, i, o = 0;
	char *dst, wb[16];

	for (i = start;; i++) {
		unsigned char c;

		if (i >= p->len)
			return fail(p, p->pos, "unterminated string");
		c = (unsigned char)b[i];
		if (c == '"')
			break;
		if (c < 0x20)
			return fail(p, i, "control character 0x%02x in a string", c);
		if (c == '\\')
			i++;	/* what it escapes is checked below */
	}
	end = i;
	dst = arena_alloc(p->d, end - start + 1, 1);
	if (!dst)
		return fail(p, start, "out of memory");
	for (i = start; i < end;) {
		int32_t cp, lo;
		char c = b[i];

		if (c != '\\') {
			dst[o++] = c;
			i++;
			continue;
		}
		/* the scan above skipped what follows a backslash: i + 1 < end */
		switch (b[i + 1]) {
		case '"':
		case '\\':
		case '/':
			dst[o++] = b[i + 1];
			break;
		case 'b':
			dst[o++] = '\b';
			break;
		case 'f':
			dst[o++] = '\f';
			break;
		case 'n':
			dst[o++] = '\n';
			break;
		case 'r':
			dst[o++] = '\r';
			break;
		case 't':
			dst[o++] = '\t';
			break;
		case 'u':
			if (end - i < 6 || (cp = hex4(b + i + 2)) < 0)
				return fail(p, i, "invalid \\u escape");
			i += 6;
			if (cp >= 0xd800 && cp <= 0xdbff && end - i >= 6 &&
			    b[i] == '\\' && b[i + 1] == 'u' &&
			    (lo = hex4(b + i + 2)) >= 0xdc00 && lo <= 0xdfff) {
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				i += 6;
			} else if ((cp >= 0xd800 && cp <= 0xdfff) || cp == 0) {
				/* a lone surrogate, or a NUL the C string cannot hold */
				cp = 0xfffd;
			}
			o += put_utf8(dst + o, (uint32_t)cp);
			continue;
		default:
			return fail(p, i, "invalid escape \\ followed by %s",
				    what(p, i + 1, wb, sizeof(wb)));
		}
		i += 2;
	}
	dst[o] = 0;
	arena_trim(p->d, dst, o + 1);
	p->pos = end + 1;
	*out = dst;
	return true;
}

/*
 * A number literal's double, correctly rounded: by the exact fast path when
 * the digits and the power of ten are both exact doubles, else by strtod()
 * on "DIGITSeEXP". Only the first SIG_DIGITS significant digits are handed
 * on, with a 1 after them if any of the rest is not 0: a double or a point
 * halfway between two has at most 767 significant digits, so this rounds the
 * same way as the whole literal, and a hostile 10 MB literal costs linear
 * time. No '.' is written, so the locale's decimal point does not matter.
 */
#define SIG_DIGITS	780
#define EXP_CAP		100000000000000000LL	/* 1e17: more than any input has bytes */

static bool literal_double(const char *s, size_t n, double *out)
{
	static const double p10[] = {
		1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
		1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
	};
	char buf[1 + SIG_DIGITS + 1 + 16];
	size_t i = 0, nd = 0, frac = 0, dropped = 0;
	bool neg = false, in_frac = false, sticky = false, xneg = false;
	int64_t x = 0, e;
	double d;

	if (s[i] == '-') {
		neg = true;
		i++;
	}
	for (; i < n; i++) {
		char c = s[i];

		if (c == '.') {
			in_frac = true;
			continue;
		}
		if (c == 'e' || c == 'E')
			break;
		if (in_frac)
			frac++;
		if (nd == 0 && c == '0')
			continue;
		if (nd < SIG_DIGITS) {
			buf[1 + nd++] = c;
		} else {
			dropped++;
			if (c != '0')
				sticky = true;
		}
	}
	if (i < n) {
		i++;
		if (s[i] == '+') {
			i++;
		} else if (s[i] == '-') {
			xneg = true;
			i++;
		}
		for (; i < n; i++)
			if (x < EXP_CAP)
				x = x * 10 + (s[i] - '0');
	}
	if (nd == 0) {
		*out = neg ? -0.0 : 0.0;
		return true;
	}
	if (frac > EXP_CAP)
		frac = EXP_CAP;
	if (dropped > EXP_CAP)
		dropped = EXP_CAP;
	e = (xneg ? -x : x) - (int64_t)frac + (int64_t)dropped;
	if (sticky) {
		buf[1 + nd++] = '1';
		e--;
	}
#if FLT_EVAL_METHOD == 0
	/* below 10^15 < 2^53 and 10^22 both exact: one rounding, the right one */
	if (nd <= 15 && e >= -22 && e <= 22) {
		uint64_t m = 0;

		for (size_t k = 0; k < nd; k++)
			m = m * 10 + (uint64_t)(buf[1 + k] - '0');
		d = (double)m;
		d = e < 0 ? d / p10[-e] : d * p10[e];
		*out = neg ? -d : d;
		return true;
	}
#else
	(void)p10;
#endif
	/* at most 781 digits: beyond these the result is 0 or infinite anyway */
	if (e > 100000)
		e = 100000;
	if (e < -100000)
		e = -100000;
	buf[0] = neg ? '-' : '+';
	snprintf(buf + 1 + nd, sizeof(buf) - 1 - nd, "e%d", (int)e);
	d = strtod(buf, NULL);
	if (isinf(d))
		return false;
	*out = d;
	return true;
}

static bool parse_number(struct parser *p, struct jr_val *v)
{
	const char *b = p->buf;
	size_t i = p->pos, n = p->len;
	bool neg = false, integer = true, big = false;
	uint64_t mag = 0;
	char wb[16];

	if (b[i] == '-') {
		neg = true;
		i++;
	}
	if (i >= n || !is_digit(b[i]))
		return fail(p, i, "expected a digit after '-', not %s", what(p, i, wb, sizeof(wb)));
	if (b[i] == '0') {
		i++;
		if (i < n && is_digit(b[i]))
			return fail(p, i - 1, "leading zero in a number");
	} else {
		for (; i < n && is_digit(b[i]); i++) {
			unsigned int dg = (unsigned int)(b[i] - '0');

			if (big || mag > (UINT64_MAX - dg) / 10)
				big = true;
			else
				mag = mag * 10 + dg;
		}
	}
	if (i < n && b[i] == '.') {
		integer = false;
		i++;
		if (i >= n || !is_digit(b[i]))
			return fail(p, i, "expected a digit after '.', not %s", what(p, i, wb, sizeof(wb)));
		while (i < n && is_digit(b[i]))
			i++;
	}
	if (i < n && (b[i] == 'e' || b[i] == 'E')) {
		integer = false;
		i++;
		if (i < n && (b[i] == '+' || b[i] == '-'))
			i++;
		if (i >= n || !is_digit(b[i]))
			return fail(p, i, "expected a digit in the exponent, not %s",
				    what(p, i, wb, sizeof(wb)));
		while (i < n && is_digit(b[i]))
			i++;
	}
	v->type = JR_NUM;
	if (integer && !big && !neg) {
		v->sub = NUM_U64;
		v->v.u = mag;
	} else if (integer && !big && mag <= (uint64_t)INT64_MAX + 1) {
		v->sub = NUM_NEG;
		v->v.i = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
	} else {
		v->sub = NUM_DBL;
		if (!literal_double(b + p->pos, i - p->pos, &v->v.d))
			return fail(p, p->pos, "number out of the range of a double");
	}
	p->pos = i;
	return true;
}

/* the innermost container ends here: its children off the vector, itself on */
static bool close_container(struct parser *p)
{
	struct open *o = &p->open[--p->depth];
	size_t n = p->vn - o->start, count = o->type == JR_OBJ ? n / 2 : n;
	struct jr_val v = { .type = o->type };
	struct jr_val *kids = NULL;

	if (count > UINT32_MAX)
		return fail(p, p->pos, "more than %u elements in a container", UINT32_MAX);
	if (n) {
		kids = arena_alloc(p->d, n * sizeof(*kids), _Alignof(struct jr_val));
		if (!kids)
			return fail(p, p->pos, "out of memory");
		memcpy(kids, p->vs + o->start, n * sizeof(*kids));
	}
	v.n = (uint32_t)count;
	v.v.kids = kids;
	p->vn = o->start;
	p->pos++;
	return push(p, &v);
}

static bool literal(struct parser *p, const char *word, struct jr_val *v, enum jr_type t, int sub)
{
	size_t n = strlen(word);

	if (p->len - p->pos < n || memcmp(p->buf + p->pos, word, n))
		return fail(p, p->pos, "invalid literal (not %s)", word);
	p->pos += n;
	v->type = (uint8_t)t;
	v->sub = (uint8_t)sub;
	return true;
}

enum { ST_VALUE, ST_KEY, ST_AFTER };

static bool parse(struct parser *p)
{
	int st = ST_VALUE, c;
	struct jr_val v;
	struct open *top;
	char wb[16];

	if (p->len >= 3 && !memcmp(p->buf, "\xef\xbb\xbf", 3))
		return fail(p, 0, "a byte order mark is not JSON");
	for (;;) {
		skip_ws(p);
		c = p->pos < p->len ? (unsigned char)p->buf[p->pos] : -1;
		switch (st) {
		case ST_VALUE:
			memset(&v, 0, sizeof(v));
			switch (c) {
			case '{':
			case '[':
				if (p->depth == JR_MAX_DEPTH)
					return fail(p, p->pos, "nested deeper than %d", JR_MAX_DEPTH);
				p->open[p->depth].start = p->vn;
				p->open[p->depth].type = c == '{' ? JR_OBJ : JR_ARR;
				p->depth++;
				p->pos++;
				skip_ws(p);
				if (p->pos < p->len && p->buf[p->pos] == (c == '{' ? '}' : ']')) {
					if (!close_container(p))
						return false;
					st = ST_AFTER;
				} else {
					st = c == '{' ? ST_KEY : ST_VALUE;
				}
				continue;
			case '"':
				if (!parse_string(p, &v.v.s))
					return false;
				v.type = JR_STR;
				break;
			case 't':
				if (!literal(p, "true", &v, JR_BOOL, 1))
					return false;
				break;
			case 'f':
				if (!literal(p, "false", &v, JR_BOOL, 0))
					return false;
				break;
			case 'n':
				if (!literal(p, "null", &v, JR_NULL, 0))
					return false;
				break;
			case '-':
			case '0': case '1': case '2': case '3': case '4':
			case '5': case '6': case '7': case '8': case '9':
				if (!parse_number(p, &v))
					return false;
				break;
			case -1:
				if (p->depth == 0)
					return fail(p, p->pos, "empty input");
				return fail(p, p->pos, "unexpected end of input");
			default:
				return fail(p, p->pos, "expected a value, not %s",
					    what(p, p->pos, wb, sizeof(wb)));
			}
			if (!push(p, &v))
				return false;
			st = ST_AFTER;
			continue;
		case ST_KEY:
			if (c != '"')
				return fail(p, p->pos, "expected a string key, not %s",
					    what(p, p->pos, wb, sizeof(wb)));
			memset(&v, 0, sizeof(v));
			if (!parse_string(p, &v.v.s))
				return false;
			v.type = JR_STR;
			if (!push(p, &v))
				return false;
			skip_ws(p);
			if (p->pos >= p->len || p->buf[p->pos] != ':')
				return fail(p, p->pos, "expected ':', not %s",
					    what(p, p->pos, wb, sizeof(wb)));
			p->pos++;
			st = ST_VALUE;
			continue;
		default: /* ST_AFTER */
			if (p->depth == 0) {
				if (c != -1)
					return fail(p, p->pos, "trailing garbage after the document: %s",
						    what(p, p->pos, wb, sizeof(wb)));
				return true;
			}
			top = &p->open[p->depth - 1];
			if (c == ',') {
				p->pos++;
				st = top->type == JR_OBJ ? ST_KEY : ST_VALUE;
			} else if (c == (top->type == JR_OBJ ? '}' : ']')) {
				if (!close_container(p))
					return false;
			} else {
				return fail(p, p->pos, "expected ',' or '%c', not %s",
					    top->type == JR_OBJ ? '}' : ']',
					    what(p, p->pos, wb, sizeof(wb)));
			}
			continue;
		}
	}
}

struct jr_doc *jr_parse(const char *buf, size_t len, char *err, size_t errlen)
{
	struct parser *p;
	struct jr_doc *d;
	size_t line = 1;
	bool ok;

	if (err && errlen)
		err[0] = 0;
	if (!buf) {
		buf = "";
		len = 0;
	}
	p = calloc(1, sizeof(*p));
	d = calloc(1, sizeof(*d));
	if (!p || !d) {
		free(p);
		free(d);
		if (err && errlen)
			snprintf(err, errlen, "out of memory");
		return NULL;
	}
	d->next_cap = CHUNK_MIN;
	p->buf = buf;
	p->len = len;
	p->d = d;
	ok = parse(p);
	if (ok)
		d->root = p->vs[0];
	if (!ok && err && errlen) {
		for (const char *s = buf, *e = buf + p->err_pos;
		     (s = memchr(s, '\n', (size_t)(e - s))); s++)
			line++;
		snprintf(err, errlen, "line %zu: %s (byte %zu)", line, p->msg, p->err_pos);
	}
	free(p->vs);
	free(p);
	if (!ok) {
		jr_free(d);
		return NULL;
	}
	return d;
}

void jr_free(struct jr_doc *d)
{
	struct jr_chunk *c, *next;

	if (!d)
		return;
	for (c = d->chunks; c; c = next) {
		next = c->next;
		free(c);
	}
	free(d);
}

const struct jr_val *jr_root(const struct jr_doc *d)
{
	return d ? &d->root : NULL;
}

enum jr_type jr_type(const struct jr_val *v)
{
	return v ? (enum jr_type)v->type : JR_NULL;
}

const struct jr_val *jr_get(const struct jr_val *obj, const char *key)
{
	if (!obj || obj->type != JR_OBJ || !key)
		return NULL;
	for (size_t i = obj->n; i-- > 0;)
		if (!strcmp(obj->v.kids[2 * i].v.s, key))
			return &obj->v.kids[2 * i + 1];
	return NULL;
}

size_t jr_len(const struct jr_val *v)
{
	return v && (v->type == JR_ARR || v->type == JR_OBJ) ? v->n : 0;
}

const struct jr_val *jr_at(const struct jr_val *arr, size_t i)
{
	if (!arr || arr->type != JR_ARR || i >= arr->n)
		return NULL;
	return &arr->v.kids[i];
}

const char *jr_key_at(const struct jr_val *obj, size_t i)
{
	if (!obj || obj->type != JR_OBJ || i >= obj->n)
		return NULL;
	return obj->v.kids[2 * i].v.s;
}

const struct jr_val *jr_val_at(const struct jr_val *obj, size_t i)
{
	if (!obj || obj->type != JR_OBJ || i >= obj->n)
		return NULL;
	return &obj->v.kids[2 * i + 1];
}

const char *jr_str(const struct jr_val *v)
{
	return v && v->type == JR_STR ? v->v.s : "";
}

bool jr_u64(const struct jr_val *v, uint64_t *out)
{
	uint64_t u;

	if (!v || v->type != JR_NUM)
		return false;
	if (v->sub == NUM_U64)
		u = v->v.u;
	else if (v->sub == NUM_NEG && v->v.i == 0)
		u = 0;
	else
		return false;
	if (out)
		*out = u;
	return true;
}

bool jr_i64(const struct jr_val *v, int64_t *out)
{
	int64_t i;

	if (!v || v->type != JR_NUM)
		return false;
	if (v->sub == NUM_U64 && v->v.u <= INT64_MAX)
		i = (int64_t)v->v.u;
	else if (v->sub == NUM_NEG)
		i = v->v.i;
	else
		return false;
	if (out)
		*out = i;
	return true;
}

double jr_num(const struct jr_val *v)
{
	if (!v || v->type != JR_NUM)
		return 0;
	switch (v->sub) {
	case NUM_U64:
		return (double)v->v.u;
	case NUM_NEG:
		return v->v.i ? (double)v->v.i : -0.0;
	default:
		return v->v.d;
	}
}

bool jr_bool(const struct jr_val *v)
{
	return v && v->type == JR_BOOL && v->sub;
}
