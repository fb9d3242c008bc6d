/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef STEPBLAME_UTIL_H
#define STEPBLAME_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "base/clock.h"         /* mono_ns, real_ns */

#define STEPBLAME_VERSION "0.1.0"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* one line on stderr, prefixed "stepblame: " */
void sb_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* and "stepblame: warning: " */
void sb_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* whole small file into buf (NUL-terminated, trailing newline kept); bytes or -errno */
ssize_t read_small_file(const char *path, char *buf, size_t len);

/* "30", "30s", "500ms", "2m" -> ns; -1 if malformed */
int64_t parse_duration_ns(const char *s);
/* strictly parse an unsigned number; false if s is not one */
bool parse_u64(const char *s, uint64_t *out);
/* s ends with suffix */
bool str_ends_with(const char *s, const char *suffix);

/* the length of the valid UTF-8 character at s (at most n bytes there; 1 for ASCII), 0 if none */
size_t utf8_seq_len(const unsigned char *s, size_t n);
/*
 * Bytes of the printable UTF-8 character at s (n bytes there), 0 if it is not
 * one: a control (C0, DEL, C1 such as CSI U+009B), a bidirectional override
 * or isolate (U+202A..U+202E, U+2066..U+2069: text shown in another order
 * than it reads), or bytes that are not UTF-8
 */
size_t utf8_printable(const unsigned char *s, size_t n);
/* the valid UTF-8 character of k bytes at s is one that utf8_printable() refuses */
bool utf8_seq_refused(const unsigned char *s, size_t k);
/*
 * The first n bytes of s (up to a NUL) made safe for a terminal into buf:
 * controls (C0, DEL, C1), bidirectional overrides and bytes that are not
 * UTF-8 become '?'. Returns buf.
 */
const char *sb_printable(char *buf, size_t len, const char *s, size_t n);

/* the comm of a thread (/proc/PID/task/TID/comm), "" if gone */
void thread_comm(pid_t pid, pid_t tid, char *buf, size_t len);

/* whether the user's locale (LC_ALL, LC_CTYPE, LANG) writes UTF-8; the process's own is left alone */
bool sb_locale_utf8(void);

/* a stream that writes to under, with the UTF-8 of the text output spelled in ASCII */
FILE *sb_ascii_stream(FILE *under);

/* a regular file (after symlinks) */
bool sb_is_file(const char *path);
/*
 * The file at path opened for reading if it is a regular file (*st its
 * status), else -1; nofollow: not through a symlink at path. Looked at through
 * an O_PATH descriptor first, which opens nothing: a FIFO or a device there is
 * never opened, nor a file of the kernel's own file systems (proc, sysfs,
 * debugfs, tracefs, ...: a read of /proc/kmsg takes the message it returns),
 * and a write lease on it fails the open rather than stall it (SECURITY.md).
 */
int sb_open_regular(const char *path, bool nofollow, struct stat *st);
/* the directory part of path ("." if none) */
void sb_dir_of(const char *path, char *dir, size_t len);
/*
 * A file of the installation, at one of rel[] (each "/..." from the directory
 * of the stepblame binary; with `probe`, the path that must be a file under
 * the candidate): 0 and its absolute path, -1 (where looked in *looked).
 */
int sb_find_beside(const char *const *rel, size_t nrel, const char *probe, char *out,
		   size_t len, char *looked, size_t looked_len);

#endif
