/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reading a file that another process can stall. /proc/PID/cmdline reads
 * that process's memory: a page of it backed by a FUSE file the process
 * serves itself, say, holds the read for as long as it likes. The capture
 * loop must not wait on it (SECURITY.md, "What the trainer can do to the
 * agent"): the read runs on a thread of its own and the caller waits at most
 * timeout_ms. At most TIMED_READ_STUCK_MAX abandoned reads are left
 * blocked at once; while that many are, every read fails at once, and once
 * one returns reads go on: a process that stalls a read (any user's, as for
 * `watch -n`, which reads every process's command line) holds back no later
 * one for good.
 */
#ifndef STEPBLAME_TIMEDREAD_H
#define STEPBLAME_TIMEDREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define TIMED_READ_STUCK_MAX 4

/*
 * Like read_small_file (util.h): up to len-1 bytes of path into buf, NUL
 * terminated; the bytes read, or a negative errno; -ETIMEDOUT when the read
 * took longer than timeout_ms (it is abandoned), -EDEADLK while
 * TIMED_READ_STUCK_MAX abandoned ones are still blocked.
 */
ssize_t read_small_file_timed(const char *path, char *buf, size_t len, unsigned timeout_ms);
/* TIMED_READ_STUCK_MAX abandoned reads are still blocked: reads fail at once */
bool timed_read_stalled(void);

#endif
