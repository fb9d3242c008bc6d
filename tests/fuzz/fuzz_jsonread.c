/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libFuzzer target: the JSON reader (user/base/jsonread.c) on arbitrary bytes.
 *
 *   clang -g -O1 -std=gnu11 -fsanitize=fuzzer,address,undefined \
 *       -fno-sanitize-recover=undefined -D_GNU_SOURCE -I. -Iuser \
 *       tests/fuzz/fuzz_jsonread.c user/base/jsonread.c -lm -o build/fuzz/fuzz_jsonread
 *   build/fuzz/fuzz_jsonread -max_len=65536 corpus/
 *
 * Besides "no crash, no sanitizer report", it asserts:
 *  - a refusal has a one-line reason "line N: ...";
 *  - a document nests at most JR_MAX_DEPTH deep, and every accessor agrees
 *    with jr_len and jr_type (in range: a node; past the end: NULL), the last
 *    of duplicate keys is the one jr_get finds, an integer read both ways is
 *    the same integer, no number is infinite or NaN;
 *  - the document written back out as JSON (strings with only '"', '\\' and
 *    control characters escaped, integers exactly, other numbers in %.17g)
 *    parses again into the same tree: same types, strings, keys in order,
 *    the same exact integers, bit for bit the same doubles.
 * The input is copied into a buffer of exactly its size, which is poisoned
 * and freed before the tree is read: a node that points into the input is
 * a use-after-free.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonread.h"

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

struct out {
	char *b;
	size_t n, cap;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->n + n > o->cap) {
		size_t cap = o->cap ? o->cap : 256;

		while (cap < o->n + n)
			cap *= 2;
		o->b = realloc(o->b, cap);
		CHECK(o->b);
		o->cap = cap;
	}
	memcpy(o->b + o->n, s, n);
	o->n += n;
}

static void puts_(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

static void put_str(struct out *o, const char *s)
{
	char e[8];

	put(o, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			e[0] = '\\';
			e[1] = (char)c;
			put(o, e, 2);
		} else if (c < 0x20) {
			snprintf(e, sizeof(e), "\\u%04x", c);
			put(o, e, 6);
		} else {
			put(o, s, 1);
		}
	}
	put(o, "\"", 1);
}

/* the value as JSON; checks the accessors on the way */
static void write_val(struct out *o, const struct jr_val *v, int depth)
{
	char b[64];
	uint64_t u;
	int64_t i;
	double d;
	size_t n = jr_len(v);

	CHECK(v);
	CHECK(depth <= JR_MAX_DEPTH);
	switch (jr_type(v)) {
	case JR_NULL:
		CHECK(n == 0);
		puts_(o, "null");
		break;
	case JR_BOOL:
		CHECK(n == 0);
		puts_(o, jr_bool(v) ? "true" : "false");
		break;
	case JR_NUM: {
		bool gu = jr_u64(v, &u), gi = jr_i64(v, &i);

		CHECK(n == 0);
		d = jr_num(v);
		CHECK(isfinite(d));
		if (gu && gi)
			CHECK((uint64_t)i == u);
		if (gu)
			CHECK(d == (double)u);
		if (gi)
			CHECK(d == (double)i);
		if (gi && i == 0 && signbit(d))
			snprintf(b, sizeof(b), "-0");
		else if (gu)
			snprintf(b, sizeof(b), "%" PRIu64, u);
		else if (gi)
			snprintf(b, sizeof(b), "%" PRId64, i);
		else
			snprintf(b, sizeof(b), "%.17g", d);
		puts_(o, b);
		break;
	}
	case JR_STR:
		CHECK(n == 0);
		put_str(o, jr_str(v));
		break;
	case JR_ARR:
		CHECK(jr_at(v, n) == NULL && jr_key_at(v, 0) == NULL && jr_get(v, "") == NULL);
		put(o, "[", 1);
		for (size_t k = 0; k < n; k++) {
			if (k)
				put(o, ",", 1);
			write_val(o, jr_at(v, k), depth + 1);
		}
		put(o, "]", 1);
		break;
	case JR_OBJ:
		CHECK(jr_key_at(v, n) == NULL && jr_val_at(v, n) == NULL && jr_at(v, 0) == NULL);
		put(o, "{", 1);
		for (size_t k = 0; k < n; k++) {
			const char *key = jr_key_at(v, k);

			CHECK(key);
			/* the last of equal keys wins (quadratic: only in small objects) */
			if (n <= 64) {
				size_t last = k;

				for (size_t j = k + 1; j < n; j++)
					if (!strcmp(jr_key_at(v, j), key))
						last = j;
				CHECK(jr_get(v, key) == jr_val_at(v, last));
			}
			if (k)
				put(o, ",", 1);
			put_str(o, key);
			put(o, ":", 1);
			write_val(o, jr_val_at(v, k), depth + 1);
		}
		put(o, "}", 1);
		break;
	default:
		CHECK(0);
	}
}

/* b is a's JSON written out and read back: the same tree */
static void same(const struct jr_val *a, const struct jr_val *b)
{
	uint64_t ua, ub;
	int64_t ia, ib;
	double da, db;

	CHECK(jr_type(a) == jr_type(b) && jr_len(a) == jr_len(b));
	switch (jr_type(a)) {
	case JR_BOOL:
		CHECK(jr_bool(a) == jr_bool(b));
		break;
	case JR_NUM:
		if (jr_u64(a, &ua))
			CHECK(jr_u64(b, &ub) && ua == ub);
		if (jr_i64(a, &ia))
			CHECK(jr_i64(b, &ib) && ia == ib);
		da = jr_num(a);
		db = jr_num(b);
		CHECK(!memcmp(&da, &db, sizeof(da)));
		break;
	case JR_STR:
		CHECK(!strcmp(jr_str(a), jr_str(b)));
		break;
	case JR_ARR:
		for (size_t k = 0; k < jr_len(a); k++)
			same(jr_at(a, k), jr_at(b, k));
		break;
	case JR_OBJ:
		for (size_t k = 0; k < jr_len(a); k++) {
			CHECK(!strcmp(jr_key_at(a, k), jr_key_at(b, k)));
			same(jr_val_at(a, k), jr_val_at(b, k));
		}
		break;
	default:
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256], *copy = malloc(size ? size : 1);
	struct jr_doc *d, *d2;
	struct out o = { 0 };

	CHECK(copy);
	memcpy(copy, data, size);
	d = jr_parse(copy, size, err, sizeof(err));
	memset(copy, 0xa5, size);
	free(copy);
	if (!d) {
		CHECK(!strncmp(err, "line ", 5) && !strchr(err, '\n'));
		return 0;
	}
	write_val(&o, jr_root(d), 0);
	d2 = jr_parse(o.b, o.n, err, sizeof(err));
	if (!d2) {
		fprintf(stderr, "written back, not read: %s\n%.*s\n", err, (int)(o.n < 2000 ? o.n : 2000),
			o.b);
		CHECK(0);
	}
	same(jr_root(d), jr_root(d2));
	jr_free(d2);
	jr_free(d);
	free(o.b);
	return 0;
}
