// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <langinfo.h>
#include <locale.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "base/util.h"

void sb_err(const char *fmt, ...)
{
	va_list ap;

	fputs("stepblame: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void sb_warn(const char *fmt, ...)
{
	va_list ap;

	fputs("stepblame: warning: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

ssize_t read_small_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n, got = 0;

	if (fd < 0)
		return -errno;
	while ((size_t)got + 1 < len) {
		n = read(fd, buf + got, len - 1 - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			n = -errno;
			close(fd);
			return n;
		}
		if (n == 0)
			break;
		got += n;
	}
	buf[got] = 0;
	close(fd);
	return got;
}

bool parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

int64_t parse_duration_ns(const char *s)
{
	char *end;
	double v;

	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	v = strtod(s, &end);
	/* !(v >= 0) also refuses "nan", whose conversion to an integer is undefined */
	if (errno || end == s || !(v >= 0))
		return -1;
	if (!*end || !strcmp(end, "s"))
		v *= 1e9;
	else if (!strcmp(end, "ms"))
		v *= 1e6;
	else if (!strcmp(end, "us"))
		v *= 1e3;
	else if (!strcmp(end, "ns"))
		;
	else if (!strcmp(end, "m"))
		v *= 60e9;
	else if (!strcmp(end, "h"))
		v *= 3600e9;
	else
		return -1;
	if (!(v <= 9e18))
		return -1;
	return (int64_t)v;
}

void thread_comm(pid_t pid, pid_t tid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	n = read_small_file(path, buf, len);
	if (n < 0) {
		buf[0] = 0;
		return;
	}
	buf[strcspn(buf, "\n")] = 0;
}

bool sb_locale_utf8(void)
{
	locale_t l = newlocale(LC_CTYPE_MASK, "", (locale_t)0);
	bool utf8;

	if (!l)
		return false; /* a locale that is not installed: the safe answer */
	utf8 = !strcmp(nl_langinfo_l(CODESET, l), "UTF-8");
	freelocale(l);
	return utf8;
}

/*
 * The ASCII stream: what the text output spells in UTF-8 (µs, an em dash, the
 * middle dot, ≈, →), for a terminal whose locale cannot show it. A sequence
 * cut between two writes waits for its rest; one not in the table is "?".
 */
struct ascii_cookie {
	FILE *under;
	unsigned char pend[4];
	int npend;
};

static const struct {
	const char *utf8, *ascii;
} ascii_table[] = {
	{ "\xc2\xb5", "u" },       /* µ */
	{ "\xe2\x80\x94", "-" },   /* — */
	{ "\xc2\xb7", "*" },       /* · */
	{ "\xe2\x89\x88", "~" },   /* ≈ */
	{ "\xe2\x86\x92", "->" },  /* → */
	{ "\xc3\x97", "x" },       /* × */
};

static int utf8_len(unsigned char c)
{
	return c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
}

static ssize_t ascii_write(void *cookie, const char *buf, size_t n)
{
	struct ascii_cookie *c = cookie;
	char out[512];
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char b = (unsigned char)buf[i];

		if (o + 4 > sizeof(out)) {
			if (fwrite(out, 1, o, c->under) != o)
				return -1;
			o = 0;
		}
		if (!c->npend && b < 0x80) {
			out[o++] = (char)b;
			continue;
		}
		if (c->npend && (b & 0xc0) != 0x80)
			c->npend = 0; /* a broken sequence: dropped */
		if (!c->npend && (b & 0xc0) == 0x80) {
			out[o++] = '?';
			continue;
		}
		c->pend[c->npend++] = b;
		if (c->npend < utf8_len(c->pend[0]))
			continue;
		const char *a = "?";

		for (size_t k = 0; k < sizeof(ascii_table) / sizeof(ascii_table[0]); k++)
			if (strlen(ascii_table[k].utf8) == (size_t)c->npend &&
			    !memcmp(ascii_table[k].utf8, c->pend, c->npend))
				a = ascii_table[k].ascii;
		while (*a)
			out[o++] = *a++;
		c->npend = 0;
	}
	/* the stream above is buffered already: its writes reach the file now (EPIPE included) */
	if ((o && fwrite(out, 1, o, c->under) != o) || fflush(c->under))
		return -1;
	return (ssize_t)n;
}

static int ascii_close(void *cookie)
{
	struct ascii_cookie *c = cookie;
	int rc = fflush(c->under) ? -1 : 0;

	free(c);
	return rc;
}

FILE *sb_ascii_stream(FILE *under)
{
	struct ascii_cookie *c = calloc(1, sizeof(*c));
	cookie_io_functions_t io = { .write = ascii_write, .close = ascii_close };
	FILE *f;

	if (!c)
		return NULL;
	c->under = under;
	f = fopencookie(c, "w", io);
	if (!f)
		free(c);
	return f;
}

bool str_ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (!n)
		return 0;
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates, past U+10FFFF */
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

bool utf8_seq_refused(const unsigned char *s, size_t k)
{
	if (k == 1 && (s[0] < 0x20 || s[0] == 0x7f))
		return true;
	if (k == 2 && s[0] == 0xc2 && s[1] < 0xa0)
		return true;
	return k == 3 && s[0] == 0xe2 && ((s[1] == 0x80 && s[2] >= 0xaa && s[2] <= 0xae) ||
					  (s[1] == 0x81 && s[2] >= 0xa6 && s[2] <= 0xa9));
}

size_t utf8_printable(const unsigned char *s, size_t n)
{
	size_t k = utf8_seq_len(s, n);

	return k && !utf8_seq_refused(s, k) ? k : 0;
}

const char *sb_printable(char *buf, size_t len, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t o = 0, i = 0, k;

	if (!len)
		return buf;
	while (i < n && u[i] && o + 1 < len) {
		k = utf8_printable(u + i, n - i);
		if (!k) {
			buf[o++] = '?';
			i++;
			continue;
		}
		if (o + k >= len)
			break;
		memcpy(buf + o, u + i, k);
		o += k;
		i += k;
	}
	buf[o] = 0;
	return buf;
}

bool sb_is_file(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISREG(st.st_mode);
}

/*
 * The kernel's own files: "regular" to stat, but a read of one can act
 * (/proc/kmsg and tracefs's trace_pipe take what they return from their
 * readers) or block
 */
static bool kernel_fs(int fd)
{
	static const unsigned long magic[] = {
		PROC_SUPER_MAGIC, SYSFS_MAGIC, DEBUGFS_MAGIC, TRACEFS_MAGIC, SECURITYFS_MAGIC,
		CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, BPF_FS_MAGIC, PSTOREFS_MAGIC,
		EFIVARFS_MAGIC, 0x62656570 /* configfs */,
	};
	struct statfs sf;

	if (fstatfs(fd, &sf))
		return true;
	for (size_t i = 0; i < sizeof(magic) / sizeof(magic[0]); i++)
		if ((unsigned long)sf.f_type == magic[i])
			return true;
	return false;
}

int sb_open_regular(const char *path, bool nofollow, struct stat *st)
{
	char self[64];
	int pfd = open(path, O_PATH | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0)), fd = -1;

	if (pfd < 0)
		return -1;
	if (!fstat(pfd, st) && S_ISREG(st->st_mode) && !kernel_fs(pfd)) {
		snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
		/* O_NONBLOCK: a write lease held on it fails the open, never stalls it */
		fd = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	}
	close(pfd);
	return fd;
}

void sb_dir_of(const char *path, char *dir, size_t len)
{
	char *slash;

	snprintf(dir, len, "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir)
		*slash = 0;
	else if (slash)
		slash[1] = 0;
	else
		snprintf(dir, len, ".");
}

int sb_find_beside(const char *const *rel, size_t nrel, const char *probe, char *out,
		   size_t len, char *looked, size_t looked_len)
{
	char exe[PATH_MAX], dir[PATH_MAX], cand[PATH_MAX + 64], in[PATH_MAX + 128];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return -1;
	exe[n] = 0;
	sb_dir_of(exe, dir, sizeof(dir));
	snprintf(looked, looked_len, "%s/", dir);
	for (size_t i = 0; i < nrel; i++) {
		snprintf(cand, sizeof(cand), "%s%s", dir, rel[i]);
		snprintf(in, sizeof(in), "%s/%s", cand, probe ? probe : "");
		if (sb_is_file(probe ? in : cand) && realpath(cand, out) && strlen(out) < len)
			return 0;
	}
	return -1;
}
