/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reading a file that another process can stall. /proc/PID/cmdline reads
 * that process's memory: a page of it backed by a FUSE file the process
 * serves itself, say, holds the read for as long as it likes. The capture
 * loop must not wait on it (SECURITY.md, "What the trainer can do to the
 * agent"): the read runs on a thread of its own and the caller waits at most
 * timeout_ms. Once one read has been abandoned, every later one fails at once
 * (a target that stalls one will stall the next), so at most one thread is
 * ever left behind.
 */
#ifndef STEPBLAME_TIMEDREAD_H
#define STEPBLAME_TIMEDREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * Like read_small_file (util.h): up to len-1 bytes of path into buf, NUL
 * terminated; the bytes read, or a negative errno; -ETIMEDOUT when the read
 * took longer than timeout_ms (it is abandoned), -EDEADLK once one was.
 */
ssize_t read_small_file_timed(const char *path, char *buf, size_t len, unsigned timeout_ms);
/* a read was abandoned: nothing more is read this way */
bool timed_read_stalled(void);

#endif
