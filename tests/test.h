/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A tiny test harness. Each test binary runs its cases and prints one line per
 * case: "PASS name", "FAIL name: why" or "SKIP name: why"; tests/run counts them.
 *
 *   static void t_roundtrip(void) { CHECK(x == 1, "x is %d", x); }
 *   int main(void) { RUN(t_roundtrip); return test_summary(); }
 */
#ifndef STEPBLAME_TEST_H
#define STEPBLAME_TEST_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int test_failed_now, test_skipped_now, test_fails, test_passes, test_skips;
static char test_msg[512];

static inline void test_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static inline void test_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (test_failed_now)
		return;
	test_failed_now = 1;
	n = snprintf(test_msg, sizeof(test_msg), "%s:%d: ", file, line);
	va_start(ap, fmt);
	vsnprintf(test_msg + n, sizeof(test_msg) - n, fmt, ap);
	va_end(ap);
}

static inline void test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void test_skip(const char *fmt, ...)
{
	va_list ap;

	test_skipped_now = 1;
	va_start(ap, fmt);
	vsnprintf(test_msg, sizeof(test_msg), fmt, ap);
	va_end(ap);
}

/* remove a test's temporary directory and what it holds (a name mkdtemp made) */
static inline void test_rm_tree(const char *dir)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
}

/* a whole file, NUL-terminated (*len bytes, len may be NULL); NULL if unreadable */
static inline char *test_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL, *b;
	size_t n = 0, cap = 0, r;

	if (!f)
		return NULL;
	do {
		if (n + 65536 + 1 > cap) {
			cap = (cap + 65536) * 2;
			b = realloc(buf, cap);
			if (!b) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = b;
		}
		r = fread(buf + n, 1, 65536, f);
		n += r;
	} while (r);
	fclose(f);
	buf[n] = 0;
	if (len)
		*len = n;
	return buf;
}

/* CHECK records the first failure of a case and lets it go on; REQUIRE returns */
#define CHECK(cond, ...) \
	do { if (!(cond)) test_fail(__FILE__, __LINE__, __VA_ARGS__); } while (0)
#define REQUIRE(cond, ...) \
	do { if (!(cond)) { test_fail(__FILE__, __LINE__, __VA_ARGS__); return; } } while (0)
#define SKIP(...) do { test_skip(__VA_ARGS__); return; } while (0)

#define RUN(fn) test_run(#fn, fn)
/* a case that needs root (another user's process, a channel's other owner, ...) */
#define RUN_ROOT(fn) \
	do { \
		if (geteuid()) { \
			printf("SKIP %s: needs root\n", #fn + 2); \
			test_skips++; \
		} else { \
			RUN(fn); \
		} \
	} while (0)

static inline void test_run(const char *name, void (*fn)(void))
{
	if (!strncmp(name, "t_", 2))
		name += 2;
	test_failed_now = test_skipped_now = 0;
	test_msg[0] = 0;
	fn();
	if (test_failed_now) {
		printf("FAIL %s: %s\n", name, test_msg);
		test_fails++;
	} else if (test_skipped_now) {
		printf("SKIP %s: %s\n", name, test_msg);
		test_skips++;
	} else {
		printf("PASS %s\n", name);
		test_passes++;
	}
	fflush(stdout);
}

static inline int test_summary(void)
{
	return test_fails ? 1 : 0;
}

/* BPF tests need root; with STEPBLAME_REQUIRE_BPF set, missing it is a failure */
static inline int test_bpf_unavailable(char *why, size_t len)
{
	if (geteuid() != 0) {
		snprintf(why, len, "needs root for BPF (run: sudo make test)");
		return 1;
	}
	return 0;
}

#define NEED_BPF() \
	do { \
		char why_[128]; \
		if (test_bpf_unavailable(why_, sizeof(why_))) { \
			if (getenv("STEPBLAME_REQUIRE_BPF")) \
				REQUIRE(0, "STEPBLAME_REQUIRE_BPF is set but %s", why_); \
			SKIP("%s", why_); \
		} \
	} while (0)

#endif
