/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One capture into a trace file, for record, run and demo: the file is
 * created (its temporary name, O_CREAT|O_EXCL|O_NOFOLLOW in a pinned
 * directory, given to owner before a byte is written: outfile.h, SECURITY.md)
 * before anything is attached, the capture drains into it, and at the end it
 * is finished and renamed onto its name, removed when the capture did not
 * run, or kept as far as it got when writing failed. What each outcome means
 * to the user is the command's to say.
 */
#ifndef STEPBLAME_CAPTURE_FILE_H
#define STEPBLAME_CAPTURE_FILE_H

#include <limits.h>
#include <stdbool.h>

#include "capture/collect.h"

struct sb_owner;

enum capture_end {
	CAPTURE_DONE,          /* finished under path; res says how it ended */
	CAPTURE_NO_FILE,       /* path could not be created (err); nothing ran */
	CAPTURE_NOT_RUN,       /* collect_run failed and said why; exit status in status;
	                          the file is removed */
	CAPTURE_CUT_SHORT,     /* writing failed (errno in error): the trace, readable up to its
	                          last whole record, is at where (path, or the temporary name
	                          when it could not be renamed) */
	CAPTURE_NOT_FINISHED,  /* the trailer, fsync or rename failed (errno in error); the file
	                          is left under its temporary name */
};

struct capture_file {
	/* in */
	const char *path;
	const struct sb_owner *owner;  /* NULL, or the user the file is created for */
	bool keep_fd;                  /* CAPTURE_DONE: fd reads the finished trace */
	/* called once the file exists, just before the capture starts; may be NULL */
	void (*on_created)(struct capture_file *cf, const struct collect_opts *o);
	/* called when the capture ran, before the trace is finished or kept; may be NULL */
	void (*on_stopped)(struct capture_file *cf, const struct collect_opts *o);
	void *ctx;                     /* the command's, for the two above */
	/* out */
	struct collect_result res;
	int status;
	int error;
	int fd;                        /* -1 unless keep_fd and CAPTURE_DONE */
	const char *where;
	char err[PATH_MAX + 256];
};

enum capture_end capture_to_file(const struct collect_opts *o, struct capture_file *cf);

#endif
