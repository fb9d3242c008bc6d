/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Every file stepblame writes (trace, report, live JSON lines) goes through
 * here: written under a temporary name NAME.partial.XXXXXX created with
 * O_CREAT|O_EXCL|O_NOFOLLOW in a directory pinned by a descriptor at open,
 * then renamed onto NAME inside that same directory. No name is followed
 * or changed in ownership after the open: a file handed to another user is
 * fchown'ed on its descriptor before anything is written into it. SECURITY.md
 * says why.
 */
#ifndef STEPBLAME_OUTFILE_H
#define STEPBLAME_OUTFILE_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

/* the user a root stepblame writes for (sudo stepblame run): the output is theirs */
struct sb_owner {
	uid_t uid;
	gid_t gid;
	int ngroups;
	gid_t groups[64];
};

struct sb_out {
	int dirfd;       /* the directory of the output, pinned at open */
	int fd;          /* the temporary file, open for writing */
	char *name;      /* final name inside dirfd */
	char *tmp;       /* temporary name inside dirfd */
	char *path;      /* the output as given, for messages */
	char *tmp_path;  /* the temporary as a path, for messages */
	bool keep_old;   /* commit: a regular file already at the final name becomes NAME.old */
};

/*
 * Create the temporary for path. Refuses (one line in err, errno set) an
 * empty path, a name that is a directory, device, FIFO or socket, and, when
 * owner is given, a path that owner could not create or replace with their
 * own credentials (checked in a child that has become owner, on the pinned
 * directory). The temporary gets mode 0644 less the umask and, with owner,
 * belongs to owner. 0 or -1.
 */
int sb_out_open(struct sb_out *o, const char *path, const struct sb_owner *owner, char *err,
		size_t errlen);
/*
 * fsync, rename onto the final name (with keep_old, an existing regular file
 * there is first renamed NAME.old, replacing an older one: never lost
 * silently), fsync the directory; closes. 0 or -errno
 */
int sb_out_commit(struct sb_out *o, bool sync);
/* close; unlink the temporary unless keep (then it is left for the user) */
void sb_out_abandon(struct sb_out *o, bool keep);


/*
 * A stdio stream onto an output: standard output for NULL or "-", else a
 * file opened with sb_out_open (no owner) and renamed into place by
 * sb_stream_close. A file name ending in ".gz" is written gzip-compressed
 * (zlib, level 6, no time or name in its header: the same input gives the
 * same bytes).
 */
struct sb_stream {
	FILE *f;
	struct sb_out file;
	bool to_file;
	bool gz;
};

/* 0, or -1 after one line on stderr */
int sb_stream_open(struct sb_stream *s, const char *path);
/*
 * Flush and close. Standard output: 0, or -1 after "writing WHAT: why".
 * A file: fsync, close and, when ok, rename it into place; else (or when
 * writing failed, said on stderr) remove the temporary. 0 or -1; -1 also
 * when s was not open.
 */
int sb_stream_close(struct sb_stream *s, bool ok, const char *what);

#endif
