/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * base/jsonread: the values of a document as a caller reads them, exact
 * 64-bit integers and correctly rounded doubles, string escapes, the depth
 * limit, every kind of malformed input refused with a line number, and a
 * large array in linear time. Every input is parsed from a copy of exactly
 * its length, freed before the document is read: under ASan a read past the
 * end or a node pointing into the input is caught.
 */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "base/json.h"
#include "base/jsonread.h"
#include "test.h"

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif

static struct jr_doc *parse_n(const char *s, size_t n, char *err, size_t errlen)
{
	char *copy = malloc(n ? n : 1);
	struct jr_doc *d;

	if (!copy)
		return NULL;
	memcpy(copy, s, n);
	d = jr_parse(copy, n, err, errlen);
	memset(copy, 'X', n);	/* the document must not point into its input */
	free(copy);
	return d;
}

static struct jr_doc *parse(const char *s, char *err, size_t errlen)
{
	return parse_n(s, strlen(s), err, errlen);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char doc_text[] =
	"{\n"
	"  \"version\": 3,\n"
	"  \"tool\": \"stepblame\",\n"
	"  \"host\": {\"name\": \"gpu-node-07\", \"cpus\": 96, \"gpu\": null},\n"
	"  \"steps\": [\n"
	"    {\"step\": 1, \"ts_ns\": 1700000000123456789, \"dur_ms\": 12.5,\n"
	"     \"blame\": [\"dataloader\", \"gc\"], \"ok\": true},\n"
	"    {\"step\": 2, \"ts_ns\": 1700000000223456789, \"dur_ms\": 1.25e1,\n"
	"     \"blame\": [], \"ok\": false}\n"
	"  ],\n"
	"  \"empty\": {},\n"
	"  \"ratio\": -0.75\n"
	"}\n";

static void t_document(void)
{
	char err[128];
	struct jr_doc *d = parse(doc_text, err, sizeof(err));
	const struct jr_val *r, *host, *steps, *s0, *s1, *blame;
	static const char *keys[] = { "version", "tool", "host", "steps", "empty", "ratio" };
	uint64_t u = 0;
	int64_t i = 0;

	REQUIRE(d, "parse failed: %s", err);
	REQUIRE(err[0] == 0, "err not cleared on success: %s", err);
	r = jr_root(d);
	REQUIRE(jr_type(r) == JR_OBJ, "root type %d", jr_type(r));
	CHECK(jr_len(r) == 6, "root has %zu members", jr_len(r));
	for (size_t k = 0; k < 6; k++)
		CHECK(jr_key_at(r, k) && !strcmp(jr_key_at(r, k), keys[k]),
		      "key %zu is %s", k, jr_key_at(r, k) ? jr_key_at(r, k) : "(null)");
	CHECK(jr_key_at(r, 6) == NULL, "key past the end");
	CHECK(jr_val_at(r, 6) == NULL, "value past the end");
	CHECK(jr_val_at(r, 3) == jr_get(r, "steps"), "jr_val_at(3) is not \"steps\"");

	CHECK(jr_u64(jr_get(r, "version"), &u) && u == 3, "version %" PRIu64, u);
	CHECK(!strcmp(jr_str(jr_get(r, "tool")), "stepblame"), "tool '%s'", jr_str(jr_get(r, "tool")));
	host = jr_get(r, "host");
	CHECK(jr_type(host) == JR_OBJ && jr_len(host) == 3, "host: type %d len %zu",
	      jr_type(host), jr_len(host));
	CHECK(!strcmp(jr_str(jr_get(host, "name")), "gpu-node-07"), "host name");
	CHECK(jr_i64(jr_get(host, "cpus"), &i) && i == 96, "cpus %" PRId64, i);
	CHECK(jr_get(host, "gpu") != NULL && jr_type(jr_get(host, "gpu")) == JR_NULL,
	      "gpu: a null member must be present and JR_NULL");
	CHECK(jr_get(host, "missing") == NULL, "missing key found");
	CHECK(jr_get(host, "nam") == NULL && jr_get(host, "name ") == NULL, "prefix key matched");

	steps = jr_get(r, "steps");
	REQUIRE(jr_type(steps) == JR_ARR && jr_len(steps) == 2, "steps: type %d len %zu",
		jr_type(steps), jr_len(steps));
	s0 = jr_at(steps, 0);
	s1 = jr_at(steps, 1);
	CHECK(jr_at(steps, 2) == NULL, "element past the end");
	CHECK(jr_u64(jr_get(s0, "ts_ns"), &u) && u == 1700000000123456789ULL,
	      "ts_ns %" PRIu64 " (not exact: went through a double?)", u);
	CHECK(jr_u64(jr_get(s1, "ts_ns"), &u) && u == 1700000000223456789ULL, "ts_ns %" PRIu64, u);
	CHECK(jr_num(jr_get(s0, "dur_ms")) == 12.5, "dur_ms %g", jr_num(jr_get(s0, "dur_ms")));
	CHECK(jr_num(jr_get(s1, "dur_ms")) == 12.5, "dur_ms %g", jr_num(jr_get(s1, "dur_ms")));
	CHECK(!jr_u64(jr_get(s0, "dur_ms"), &u), "12.5 read as an integer");
	CHECK(jr_type(jr_get(s0, "ok")) == JR_BOOL && jr_bool(jr_get(s0, "ok")), "step 1 ok");
	CHECK(jr_type(jr_get(s1, "ok")) == JR_BOOL && !jr_bool(jr_get(s1, "ok")), "step 2 ok");
	blame = jr_get(s0, "blame");
	CHECK(jr_len(blame) == 2 && !strcmp(jr_str(jr_at(blame, 0)), "dataloader") &&
	      !strcmp(jr_str(jr_at(blame, 1)), "gc"), "blame of step 1");
	CHECK(jr_type(jr_get(s1, "blame")) == JR_ARR && jr_len(jr_get(s1, "blame")) == 0,
	      "empty blame");
	CHECK(jr_type(jr_get(r, "empty")) == JR_OBJ && jr_len(jr_get(r, "empty")) == 0, "empty {}");
	CHECK(jr_key_at(jr_get(r, "empty"), 0) == NULL, "key of an empty object");
	CHECK(jr_num(jr_get(r, "ratio")) == -0.75, "ratio %g", jr_num(jr_get(r, "ratio")));

	/* the wrong type or no node at all: the neutral answer, never a crash */
	CHECK(jr_get(steps, "step") == NULL, "jr_get on an array");
	CHECK(jr_at(r, 0) == NULL, "jr_at on an object");
	CHECK(jr_key_at(steps, 0) == NULL && jr_val_at(steps, 0) == NULL, "member of an array");
	CHECK(jr_len(jr_get(r, "tool")) == 0, "jr_len of a string");
	CHECK(!strcmp(jr_str(jr_get(r, "version")), ""), "jr_str of a number");
	CHECK(jr_num(jr_get(r, "tool")) == 0 && !jr_u64(jr_get(r, "tool"), &u) &&
	      !jr_i64(jr_get(r, "tool"), &i), "a string read as a number");
	CHECK(!jr_bool(jr_get(r, "version")), "jr_bool of 3");
	CHECK(jr_type(NULL) == JR_NULL && jr_len(NULL) == 0 && jr_at(NULL, 0) == NULL &&
	      jr_get(NULL, "a") == NULL && jr_get(r, NULL) == NULL && jr_key_at(NULL, 0) == NULL &&
	      jr_val_at(NULL, 0) == NULL && !strcmp(jr_str(NULL), "") && jr_num(NULL) == 0 &&
	      !jr_bool(NULL) && !jr_u64(NULL, &u) && !jr_i64(NULL, &i) && jr_root(NULL) == NULL,
	      "accessors on NULL");
	jr_free(d);
	jr_free(NULL);
}

/* scalar documents: a number as each accessor sees it */
struct num_case {
	const char *text;
	bool is_u64, is_i64;
	uint64_t u;
	int64_t i;
	double d;
};

static void check_nums(const struct num_case *c, size_t n)
{
	char err[128];

	for (size_t k = 0; k < n; k++) {
		struct jr_doc *d = parse(c[k].text, err, sizeof(err));
		const struct jr_val *v = jr_root(d);
		uint64_t u = 12345;
		int64_t i = 12345;
		bool gu, gi;
		double x;

		if (!d) {
			CHECK(0, "%s: %s", c[k].text, err);
			continue;
		}
		CHECK(jr_type(v) == JR_NUM, "%s: type %d", c[k].text, jr_type(v));
		gu = jr_u64(v, &u);
		gi = jr_i64(v, &i);
		x = jr_num(v);
		CHECK(gu == c[k].is_u64, "%s: jr_u64 says %d", c[k].text, gu);
		CHECK(gi == c[k].is_i64, "%s: jr_i64 says %d", c[k].text, gi);
		CHECK(gu ? u == c[k].u : u == 12345, "%s: u64 %" PRIu64, c[k].text, u);
		CHECK(gi ? i == c[k].i : i == 12345, "%s: i64 %" PRId64, c[k].text, i);
		CHECK(x == c[k].d && signbit(x) == signbit(c[k].d), "%s: double %.17g, want %.17g",
		      c[k].text, x, c[k].d);
		jr_free(d);
	}
}

static void t_big_integers(void)
{
	static const struct num_case c[] = {
		{ "0", true, true, 0, 0, 0.0 },
		{ "18446744073709551615", true, false, UINT64_MAX, 0, 18446744073709551615.0 },
		{ "18446744073709551616", false, false, 0, 0, 18446744073709551616.0 },
		{ "99999999999999999999999", false, false, 0, 0, 1e23 },
		{ "9223372036854775807", true, true, INT64_MAX, INT64_MAX, 9223372036854775807.0 },
		{ "9223372036854775808", true, false, 9223372036854775808ULL, 0, 9223372036854775808.0 },
		/* 2^53 + 1: exact as an integer, a tie that rounds to even as a double */
		{ "9007199254740993", true, true, 9007199254740993ULL, 9007199254740993LL,
		  9007199254740992.0 },
		{ "1700000000123456789", true, true, 1700000000123456789ULL, 1700000000123456789LL,
		  1700000000123456789.0 },
	};

	check_nums(c, ARRAY_SIZE(c));
}

static void t_negative(void)
{
	static const struct num_case c[] = {
		{ "-5", false, true, 0, -5, -5.0 },
		{ "-1", false, true, 0, -1, -1.0 },
		{ "-0", true, true, 0, 0, -0.0 },
		{ "-9223372036854775807", false, true, 0, -INT64_MAX, -9223372036854775807.0 },
		{ "-9223372036854775808", false, true, 0, INT64_MIN, -9223372036854775808.0 },
		{ "-9223372036854775809", false, false, 0, 0, -9223372036854775809.0 },
		{ "-18446744073709551616", false, false, 0, 0, -18446744073709551616.0 },
		{ "-0.0", false, false, 0, 0, -0.0 },
		{ "-2.5E-3", false, false, 0, 0, -2.5e-3 },
	};

	check_nums(c, ARRAY_SIZE(c));
}

static void t_fractions_exponents(void)
{
	static const struct num_case c[] = {
		{ "1.5", false, false, 0, 0, 1.5 },
		{ "0.1", false, false, 0, 0, 0.1 },
		{ "1e3", false, false, 0, 0, 1000.0 },
		{ "1E+2", false, false, 0, 0, 100.0 },
		{ "10.0", false, false, 0, 0, 10.0 },
		{ "123.456e-2", false, false, 0, 0, 1.23456 },
		{ "0e10", false, false, 0, 0, 0.0 },
		{ "0.0000000000000000000000000000001", false, false, 0, 0, 1e-31 },
		{ "3.14159265358979323846264338327950288", false, false, 0, 0,
		  3.14159265358979323846264338327950288 },
		/* the exact decimal of the double nearest 0.1 */
		{ "0.1000000000000000055511151231257827021181583404541015625", false, false, 0, 0, 0.1 },
		{ "1.7976931348623157e308", false, false, 0, 0, DBL_MAX },
		{ "2.2250738585072014e-308", false, false, 0, 0, DBL_MIN },
		{ "4.9406564584124654e-324", false, false, 0, 0, 4.9406564584124654e-324 },
		{ "1e-400", false, false, 0, 0, 0.0 },
		{ "-1e-400", false, false, 0, 0, -0.0 },
		{ "1e00000000000000000000000000001", false, false, 0, 0, 10.0 },
		{ "9007199254740993.0", false, false, 0, 0, 9007199254740992.0 },
	};
	char err[128];
	struct jr_doc *d;
	char *big;
	size_t n, z = 2000000;
	double t0;

	check_nums(c, ARRAY_SIZE(c));

	/* out of the range of a double: refused, not infinity */
	d = parse("1e400", err, sizeof(err));
	CHECK(!d && strstr(err, "out of the range"), "1e400: %s", d ? "parsed" : err);
	jr_free(d);
	d = parse("[-1.7976931348623159e308]", err, sizeof(err));
	CHECK(!d && strstr(err, "out of the range"), "-1.7976931348623159e308: %s",
	      d ? "parsed" : err);
	jr_free(d);

	/*
	 * 2^53 + 1 with a 1 two million digits down: above the tie, so up to
	 * 2^53 + 2; with only zeros there, the tie goes to even. And in linear time.
	 */
	big = malloc(z + 64);
	REQUIRE(big, "malloc");
	n = (size_t)sprintf(big, "9007199254740993.");
	memset(big + n, '0', z);
	n += z;
	big[n] = '1';
	t0 = now_s();
	d = parse_n(big, n + 1, err, sizeof(err));
	CHECK(d && jr_num(jr_root(d)) == 9007199254740994.0, "long literal above the tie: %.17g %s",
	      jr_num(jr_root(d)), d ? "" : err);
	jr_free(d);
	d = parse_n(big, n, err, sizeof(err));
	CHECK(d && jr_num(jr_root(d)) == 9007199254740992.0, "long literal on the tie: %.17g %s",
	      jr_num(jr_root(d)), d ? "" : err);
	jr_free(d);
	/* 0.000...1e2000000 with 2000000 zeros: the exponent and the fraction cancel */
	n = (size_t)sprintf(big, "0.");
	memset(big + n, '0', z);
	n += z;
	n += (size_t)sprintf(big + n, "1e%zu", z);
	d = parse_n(big, n, err, sizeof(err));
	CHECK(d && jr_num(jr_root(d)) == 0.1, "0.(2000000 zeros)1e2000000: %.17g %s",
	      jr_num(jr_root(d)), d ? "" : err);
	jr_free(d);
	/* and a 2000001-digit integer is beyond a double */
	big[0] = '1';
	memset(big + 1, '0', z);
	d = parse_n(big, z + 1, err, sizeof(err));
	CHECK(!d && strstr(err, "out of the range"), "10^2000000: %s", d ? "parsed" : err);
	jr_free(d);
	CHECK(now_s() - t0 < 5, "long literals took %.1f s", now_s() - t0);
	free(big);
}

static void t_escapes(void)
{
	static const struct {
		const char *text, *want;
	} c[] = {
		{ "\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"", "\" \\ / \b \f \n \r \t" },
		{ "\"plain\"", "plain" },
		{ "\"\"", "" },
		{ "\"\\u0041\\u00e9\\u20AC\"", "A\xc3\xa9\xe2\x82\xac" },
		{ "\"\\u007f\\u0080\\u07ff\\u0800\\uffff\"",
		  "\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf" },
		/* surrogate pairs: U+1F600, U+10000, U+10FFFF */
		{ "\"\\uD83D\\uDE00\"", "\xf0\x9f\x98\x80" },
		{ "\"\\ud800\\udc00|\\udbff\\udfff\"", "\xf0\x90\x80\x80|\xf4\x8f\xbf\xbf" },
		/* lone surrogates and NUL: U+FFFD */
		{ "\"a\\uD800b\"", "a\xef\xbf\xbd" "b" },
		{ "\"a\\uDC00b\"", "a\xef\xbf\xbd" "b" },
		{ "\"\\uD800\\u0041\"", "\xef\xbf\xbd" "A" },
		{ "\"\\uD800\\uD800\\uDC00\"", "\xef\xbf\xbd\xf0\x90\x80\x80" },
		{ "\"\\uDC00\\uD800\"", "\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\"\\uD800\"", "\xef\xbf\xbd" },
		{ "\"x\\u0000y\"", "x\xef\xbf\xbdy" },
		/* raw bytes as they are, valid UTF-8 or not; DEL is no control character */
		{ "\"caf\xc3\xa9 \xe2\x82\xac \xff\xfe \x7f\"", "caf\xc3\xa9 \xe2\x82\xac \xff\xfe \x7f" },
	};
	char err[128];

	for (size_t k = 0; k < ARRAY_SIZE(c); k++) {
		struct jr_doc *d = parse(c[k].text, err, sizeof(err));

		if (!d) {
			CHECK(0, "%s: %s", c[k].text, err);
			continue;
		}
		CHECK(jr_type(jr_root(d)) == JR_STR, "%s: type %d", c[k].text, jr_type(jr_root(d)));
		CHECK(!strcmp(jr_str(jr_root(d)), c[k].want), "%s: got '%s'", c[k].text,
		      jr_str(jr_root(d)));
		jr_free(d);
	}
}

/*
 * The writer's one escaping policy (base/json.c json_escape_one, used by the
 * reports, dump --jsonl and Perfetto): exact bytes out, and read back by the
 * reader as the same text, with U+FFFD for each byte not part of valid UTF-8.
 */
static void t_writer_escapes(void)
{
	static const struct {
		const char *in;
		size_t n;
		const char *out, *back;
	} c[] = {
		{ "plain", 5, "plain", "plain" },
		{ "\"\\", 2, "\\\"\\\\", "\"\\" },
		{ "\n\r\t", 3, "\\n\\r\\t", "\n\r\t" },
		{ "\x01\x1b[31m\x7f", 7, "\\u0001\\u001b[31m\\u007f", "\x01\x1b[31m\x7f" },
		{ "a\0b", 3, "a\\u0000b", "a\xef\xbf\xbd" "b" },
		/* valid UTF-8 as it is: 2, 3 and 4 bytes */
		{ "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
		  "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80" },
		/* not UTF-8: a lone byte, overlong forms, a surrogate, past U+10FFFF, cut short */
		{ "\xe9t\xe9", 3, "\\ufffdt\\ufffd", "\xef\xbf\xbdt\xef\xbf\xbd" },
		{ "\xc0\xaf", 2, "\\ufffd\\ufffd", "\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xe0\x80\xaf", 3, "\\ufffd\\ufffd\\ufffd", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xed\xa0\x80", 3, "\\ufffd\\ufffd\\ufffd", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xf4\x90\x80\x80", 4, "\\ufffd\\ufffd\\ufffd\\ufffd",
		  "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "x\xe2\x82", 3, "x\\ufffd\\ufffd", "x\xef\xbf\xbd\xef\xbf\xbd" },
	};
	char err[128];

	for (size_t k = 0; k < ARRAY_SIZE(c); k++) {
		char *buf = NULL, *doc;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		struct jr_doc *d;

		REQUIRE(f, "memstream");
		json_escape(f, c[k].in, c[k].n);
		fclose(f);
		CHECK(len == strlen(c[k].out) && !memcmp(buf, c[k].out, len),
		      "case %zu: wrote '%s', want '%s'", k, buf, c[k].out);
		doc = malloc(len + 3);
		REQUIRE(doc, "malloc");
		doc[0] = '"';
		memcpy(doc + 1, buf, len);
		doc[len + 1] = '"';
		doc[len + 2] = 0;
		d = parse(doc, err, sizeof(err));
		CHECK(d && !strcmp(jr_str(jr_root(d)), c[k].back), "case %zu: read back %s",
		      k, d ? jr_str(jr_root(d)) : err);
		jr_free(d);
		free(doc);
		free(buf);
	}
}

static void t_keys_escaped_and_duplicate(void)
{
	char err[128];
	struct jr_doc *d = parse("{\"a\":1, \"b\":[true], \"a\":2, \"\\u0061\":3, \"a\\u0000\":4,"
				 " \"\":5}", err, sizeof(err));
	const struct jr_val *r = jr_root(d);
	uint64_t u = 0;

	REQUIRE(d, "%s", err);
	CHECK(jr_len(r) == 6, "every member is kept: %zu", jr_len(r));
	CHECK(jr_u64(jr_get(r, "a"), &u) && u == 3, "the last \"a\" wins: %" PRIu64, u);
	CHECK(jr_u64(jr_val_at(r, 0), &u) && u == 1, "member 0 is %" PRIu64, u);
	CHECK(!strcmp(jr_key_at(r, 2), "a") && jr_u64(jr_val_at(r, 2), &u) && u == 2,
	      "member 2: %s %" PRIu64, jr_key_at(r, 2), u);
	/* a key with an escaped NUL is not cut short into another key */
	CHECK(jr_u64(jr_get(r, "a\xef\xbf\xbd"), &u) && u == 4, "\"a\\u0000\": %" PRIu64, u);
	CHECK(jr_u64(jr_get(r, ""), &u) && u == 5, "empty key: %" PRIu64, u);
	CHECK(jr_bool(jr_at(jr_get(r, "b"), 0)), "b[0]");
	jr_free(d);
}

/* n nested arrays (or objects {"k": ...}) around a 7 */
static char *nested(int n, bool obj, size_t *len)
{
	char *s = malloc((size_t)n * 6 + 2), *o = s;

	if (!s)
		return NULL;
	for (int i = 0; i < n; i++)
		o += obj ? sprintf(o, "{\"k\":") : sprintf(o, "[");
	*o++ = '7';
	for (int i = 0; i < n; i++)
		*o++ = obj ? '}' : ']';
	*len = (size_t)(o - s);
	return s;
}

static void t_depth(void)
{
	char err[128];
	size_t len;

	for (int obj = 0; obj < 2; obj++) {
		char *s = nested(JR_MAX_DEPTH, obj, &len);
		struct jr_doc *d;
		const struct jr_val *v;
		uint64_t u = 0;
		int depth = 0;

		REQUIRE(s, "malloc");
		d = parse_n(s, len, err, sizeof(err));
		CHECK(d, "%d nested %s: %s", JR_MAX_DEPTH, obj ? "objects" : "arrays", err);
		for (v = jr_root(d); jr_type(v) == (obj ? JR_OBJ : JR_ARR); depth++)
			v = obj ? jr_get(v, "k") : jr_at(v, 0);
		CHECK(depth == 64 && jr_u64(v, &u) && u == 7, "depth %d, innermost %" PRIu64, depth, u);
		jr_free(d);
		free(s);

		s = nested(JR_MAX_DEPTH + 1, obj, &len);
		REQUIRE(s, "malloc");
		d = parse_n(s, len, err, sizeof(err));
		CHECK(!d && strstr(err, "nested deeper than 64"), "%d nested %s: %s", JR_MAX_DEPTH + 1,
		      obj ? "objects" : "arrays", d ? "parsed" : err);
		jr_free(d);
		free(s);
	}
	/* a million, unclosed: refused at the 65th, no stack overflow */
	{
		size_t n = 1000000;
		char *s = malloc(n);

		REQUIRE(s, "malloc");
		memset(s, '[', n);
		CHECK(!parse_n(s, n, err, sizeof(err)) && strstr(err, "(byte 64)"),
		      "a million '[': %s", err);
		free(s);
	}
	/* 64 deep, then back up and down again many times */
	{
		char *a = nested(JR_MAX_DEPTH, false, &len), *s;
		size_t reps = 1000, n = 0;
		struct jr_doc *d;

		REQUIRE(a, "malloc");
		s = malloc(reps * (len + 1) + 2);
		REQUIRE(s, "malloc");
		s[n++] = '[';
		for (size_t k = 0; k < reps; k++) {
			memcpy(s + n, a, len);
			n += len;
			s[n++] = ',';
		}
		s[n - 1] = ']';
		d = parse_n(s, n, err, sizeof(err));
		CHECK(!d && strstr(err, "nested deeper than 64"), "65 deep inside a list: %s",
		      d ? "parsed" : err);
		jr_free(d);
		/* one level less inside: 64 in all, fine */
		free(a);
		a = nested(JR_MAX_DEPTH - 1, false, &len);
		REQUIRE(a, "malloc");
		n = 0;
		s[n++] = '[';
		for (size_t k = 0; k < reps; k++) {
			memcpy(s + n, a, len);
			n += len;
			s[n++] = ',';
		}
		s[n - 1] = ']';
		d = parse_n(s, n, err, sizeof(err));
		CHECK(d && jr_len(jr_root(d)) == reps, "1000 x 63 deep inside a list: %s",
		      d ? "" : err);
		jr_free(d);
		free(a);
		free(s);
	}
}

static void t_malformed(void)
{
	static const struct {
		const char *text, *why;
	} c[] = {
		/* empty, truncated */
		{ "", "line 1: empty input" },
		{ " \n\t\r ", "line 2: empty input" },
		{ "{", "expected a string key, not end of input" },
		{ "[", "unexpected end of input" },
		{ "[1", "expected ',' or ']', not end of input" },
		{ "[1,", "unexpected end of input" },
		{ "{\"a\"", "expected ':', not end of input" },
		{ "{\"a\":", "unexpected end of input" },
		{ "{\"a\":1", "expected ',' or '}', not end of input" },
		{ "{\"a\":1,", "expected a string key, not end of input" },
		{ "\"abc", "unterminated string" },
		{ "\"abc\\", "unterminated string" },
		{ "\"abc\\\"", "unterminated string" },
		{ "tru", "invalid literal (not true)" },
		{ "fals", "invalid literal (not false)" },
		{ "nul", "invalid literal (not null)" },
		{ "\"\\u12", "unterminated string" },
		{ "\"\\u12\"", "invalid \\u escape" },
		/* trailing commas */
		{ "[1,2,]", "expected a value, not ']'" },
		{ "{\"a\":1,}", "expected a string key, not '}'" },
		{ "[,]", "expected a value, not ','" },
		{ "[1,,2]", "expected a value, not ','" },
		/* trailing garbage */
		{ "1 2", "trailing garbage after the document: '2'" },
		{ "{} x", "trailing garbage after the document: 'x'" },
		{ "[]]", "trailing garbage after the document: ']'" },
		{ "{}{}", "trailing garbage" },
		{ "truex", "trailing garbage after the document: 'x'" },
		{ "nulll", "trailing garbage" },
		{ "1.5.3", "trailing garbage after the document: '.'" },
		{ "0x10", "trailing garbage after the document: 'x'" },
		{ "\"a\"\"b\"", "trailing garbage" },
		{ "1 // comment", "trailing garbage" },
		/* bad escapes */
		{ "\"\\x\"", "invalid escape \\ followed by 'x'" },
		{ "\"\\a\"", "invalid escape" },
		{ "\"\\U0041\"", "invalid escape" },
		{ "\"\\'\"", "invalid escape" },
		{ "\"\\u12G4\"", "invalid \\u escape" },
		{ "\"\\u-123\"", "invalid \\u escape" },
		{ "\"\\uD800\\u12G4\"", "invalid \\u escape" },
		{ "\"\\\n\"", "invalid escape \\ followed by byte 0x0a" },
		/* control characters in strings */
		{ "\"a\nb\"", "control character 0x0a in a string" },
		{ "\"a\tb\"", "control character 0x09" },
		{ "\"\x1f\"", "control character 0x1f" },
		/* numbers */
		{ "01", "leading zero in a number" },
		{ "-01", "leading zero" },
		{ "00", "leading zero" },
		{ "[1, 007]", "leading zero" },
		{ "-", "expected a digit after '-', not end of input" },
		{ "[-]", "expected a digit after '-', not ']'" },
		{ "- 1", "expected a digit after '-'" },
		{ "-a", "expected a digit after '-'" },
		{ "--1", "expected a digit after '-'" },
		{ ".5", "expected a value, not '.'" },
		{ "+1", "expected a value, not '+'" },
		{ "1.", "expected a digit after '.', not end of input" },
		{ "1.e3", "expected a digit after '.', not 'e'" },
		{ "1e", "expected a digit in the exponent" },
		{ "1e+", "expected a digit in the exponent" },
		{ "1E-x", "expected a digit in the exponent" },
		{ "NaN", "expected a value, not 'N'" },
		{ "Infinity", "expected a value" },
		{ "-Infinity", "expected a digit after '-'" },
		/* not JSON in other ways */
		{ "{a:1}", "expected a string key, not 'a'" },
		{ "{'a':1}", "expected a string key, not '''" },
		{ "['a']", "expected a value, not '''" },
		{ "{\"a\" 1}", "expected ':', not '1'" },
		{ "{\"a\":1 \"b\":2}", "expected ',' or '}', not '\"'" },
		{ "[1 2]", "expected ',' or ']', not '2'" },
		{ "{\"a\":1]", "expected ',' or '}', not ']'" },
		{ "[1}", "expected ',' or ']', not '}'" },
		{ "{1:2}", "expected a string key" },
		{ "True", "expected a value, not 'T'" },
		{ "\xef\xbb\xbf{}", "byte order mark" },
		{ "\x0c[]", "expected a value, not byte 0x0c" },
		{ "[\xc2\xa0]", "expected a value, not byte 0xc2" },
	};
	char err[128];

	for (size_t k = 0; k < ARRAY_SIZE(c); k++) {
		struct jr_doc *d;

		strcpy(err, "not touched");
		d = parse(c[k].text, err, sizeof(err));
		CHECK(!d, "'%s' parsed", c[k].text);
		jr_free(d);
		CHECK(!strncmp(err, "line ", 5) && strstr(err, c[k].why) && !strchr(err, '\n'),
		      "'%s': error '%s', want '%s'", c[k].text, err, c[k].why);
	}
}

/* bytes a C string cannot show: NULs, and input that is not NUL-terminated */
static void t_lengths_and_nuls(void)
{
	char err[128];
	struct jr_doc *d;
	uint64_t u = 0;

	d = parse_n("123", 2, err, sizeof(err));
	CHECK(d && jr_u64(jr_root(d), &u) && u == 12, "'123' cut to 2: %" PRIu64, u);
	jr_free(d);
	d = parse_n("[1,2]xyz", 5, err, sizeof(err));
	CHECK(d && jr_len(jr_root(d)) == 2, "'[1,2]' followed by bytes past len: %s", d ? "" : err);
	jr_free(d);
	d = parse_n("truex", 4, err, sizeof(err));
	CHECK(d && jr_bool(jr_root(d)), "'true' cut from 'truex': %s", d ? "" : err);
	jr_free(d);
	d = parse_n("\"ab\"", 3, err, sizeof(err));
	CHECK(!d && strstr(err, "unterminated string"), "'\"ab' : %s", d ? "parsed" : err);
	jr_free(d);
	d = parse_n("1.5e3", 4, err, sizeof(err));
	CHECK(!d && strstr(err, "expected a digit in the exponent"), "'1.5e' : %s",
	      d ? "parsed" : err);
	jr_free(d);
	d = parse_n("[1]\0", 4, err, sizeof(err));
	CHECK(!d && strstr(err, "trailing garbage after the document: byte 0x00"), "NUL after: %s",
	      d ? "parsed" : err);
	jr_free(d);
	d = parse_n("\"a\0b\"", 5, err, sizeof(err));
	CHECK(!d && strstr(err, "control character 0x00"), "raw NUL in a string: %s",
	      d ? "parsed" : err);
	jr_free(d);
	d = parse_n("\0", 1, err, sizeof(err));
	CHECK(!d && strstr(err, "expected a value, not byte 0x00"), "a NUL: %s", d ? "parsed" : err);
	jr_free(d);
	d = jr_parse(NULL, 0, err, sizeof(err));
	CHECK(!d && strstr(err, "empty input"), "NULL input: %s", d ? "parsed" : err);
	jr_free(d);
}

static void t_error_messages(void)
{
	char err[128], small[12];
	struct jr_doc *d;

	d = parse("{\n  \"a\" 1\n}", err, sizeof(err));
	CHECK(!d && !strcmp(err, "line 2: expected ':', not '1' (byte 8)"), "got '%s'", err);
	d = parse("[\n1,\n2,\n\n\"x\ny\"]", err, sizeof(err));
	CHECK(!d && !strncmp(err, "line 5: control character 0x0a", 30), "got '%s'", err);
	d = parse("\n\n\"never closed\n", err, sizeof(err));
	CHECK(!d && !strncmp(err, "line 3: control character", 25), "got '%s'", err);
	d = parse("\n\n\"never closed", err, sizeof(err));
	CHECK(!d && !strcmp(err, "line 3: unterminated string (byte 2)"), "got '%s'", err);
	/* a short buffer: cut, still terminated */
	memset(small, 'Z', sizeof(small));
	d = parse("[1,]", small, sizeof(small));
	CHECK(!d && strlen(small) == sizeof(small) - 1 && !strncmp(small, "line 1: exp", 11),
	      "short buffer: '%.*s'", (int)sizeof(small), small);
	/* no buffer, or one of length 0: nothing written */
	small[0] = 'Z';
	d = parse("[1,]", small, 0);
	CHECK(!d && small[0] == 'Z', "errlen 0 wrote into err");
	d = parse("[1,]", NULL, 100);
	CHECK(!d, "parsed without an err buffer");
}

/* a report of 200k steps: parsed in well under a second (ASan: a few) */
static void t_big_array(void)
{
	size_t n = 200000, cap = n * 128 + 16, len = 0;
	char *s = malloc(cap), err[128];
	struct jr_doc *d;
	const struct jr_val *r;
	size_t bad = 0;
	double t0, took;

	REQUIRE(s, "malloc");
	s[len++] = '[';
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(s + len, cap - len,
					"%s{\"step\":%zu,\"ts\":%" PRIu64 ",\"dur\":%zu.25,"
					"\"name\":\"step \\u00e9 %zu\",\"ok\":%s}",
					i ? "," : "", i, (uint64_t)1700000000000000000ULL + i * 1000003,
					i, i, i & 1 ? "true" : "false");
	s[len++] = ']';
	t0 = now_s();
	d = jr_parse(s, len, err, sizeof(err));
	took = now_s() - t0;
	REQUIRE(d, "%s", err);
	r = jr_root(d);
	CHECK(jr_len(r) == n, "%zu elements", jr_len(r));
	for (size_t i = 0; i < n; i++) {
		const struct jr_val *e = jr_at(r, i);
		char want[64];
		uint64_t step = 0, ts = 0;

		snprintf(want, sizeof(want), "step \xc3\xa9 %zu", i);
		if (!jr_u64(jr_get(e, "step"), &step) || step != i ||
		    !jr_u64(jr_get(e, "ts"), &ts) || ts != 1700000000000000000ULL + i * 1000003 ||
		    jr_num(jr_get(e, "dur")) != (double)i + 0.25 ||
		    strcmp(jr_str(jr_get(e, "name")), want) ||
		    jr_bool(jr_get(e, "ok")) != (bool)(i & 1) || jr_len(e) != 5)
			bad++;
	}
	CHECK(bad == 0, "%zu of %zu elements read wrong", bad, n);
	CHECK(took < 5.0, "%zu bytes took %.2f s", len, took);
	printf("# 200k steps, %.1f MB: parsed in %.3f s\n", (double)len / 1e6, took);
	jr_free(d);

	/* 200k plain numbers, and a 4 MB string of escapes */
	len = 0;
	s[len++] = '[';
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(s + len, cap - len, "%s%zu", i ? "," : "", i);
	s[len++] = ']';
	d = jr_parse(s, len, err, sizeof(err));
	REQUIRE(d, "%s", err);
	bad = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t v = -1;

		if (!jr_i64(jr_at(jr_root(d), i), &v) || v != (int64_t)i)
			bad++;
	}
	CHECK(jr_len(jr_root(d)) == n && bad == 0, "plain array: %zu elements, %zu wrong",
	      jr_len(jr_root(d)), bad);
	jr_free(d);
	len = 0;
	s[len++] = '"';
	for (size_t i = 0; i < 1000000; i++) {
		memcpy(s + len, i & 1 ? "\\n" : "\\u00e9", i & 1 ? 2 : 6);
		len += i & 1 ? 2 : 6;
	}
	s[len++] = '"';
	d = jr_parse(s, len, err, sizeof(err));
	REQUIRE(d, "%s", err);
	CHECK(strlen(jr_str(jr_root(d))) == 1500000 && !memcmp(jr_str(jr_root(d)), "\xc3\xa9\n", 3),
	      "long string: %zu bytes", strlen(jr_str(jr_root(d))));
	jr_free(d);
	free(s);
}

int main(void)
{
	RUN(t_document);
	RUN(t_big_integers);
	RUN(t_negative);
	RUN(t_fractions_exponents);
	RUN(t_escapes);
	RUN(t_writer_escapes);
	RUN(t_keys_escaped_and_duplicate);
	RUN(t_depth);
	RUN(t_malformed);
	RUN(t_lengths_and_nuls);
	RUN(t_error_messages);
	RUN(t_big_array);
	return test_summary();
}
