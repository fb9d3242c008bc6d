// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Output files written atomically and without following names that others
 * control (SECURITY.md, "Files stepblame writes").
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "base/outfile.h"
#include "base/util.h"

static mode_t current_umask(void)
{
	char buf[4096], *p;
	unsigned long m;

	/* umask() can only be read by setting it, which races with other threads */
	if (read_small_file("/proc/self/status", buf, sizeof(buf)) > 0 &&
	    (p = strstr(buf, "\nUmask:")) && sscanf(p + 7, "%lo", &m) == 1)
		return (mode_t)(m & 0777);
	return 022;
}

/* six characters of [A-Za-z0-9] from the kernel's random source */
static void random_suffix(char out[7])
{
	static const char set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char b[6];

	if (getrandom(b, sizeof(b), GRND_NONBLOCK) != (ssize_t)sizeof(b)) {
		uint64_t x = mono_ns() ^ ((uint64_t)getpid() << 32);

		for (int i = 0; i < 6; i++, x >>= 8)
			b[i] = (unsigned char)(x * 2654435761u >> 7);
	}
	for (int i = 0; i < 6; i++)
		out[i] = set[b[i] % (sizeof(set) - 1)];
	out[6] = 0;
}

/*
 * Could owner create or replace name in the directory dirfd (and write
 * it)? Decided in a child process that takes owner's uid, gid and groups,
 * and must reach dirfd's directory itself by dirpath.
 * 0, or an errno (EACCES, EPERM, ...) saying why not.
 */
static int sb_owner_may_write(const struct sb_owner *u, int dirfd, const char *dirpath,
			      const char *name)
{
	pid_t pid;
	int status;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return errno;
	if (pid == 0) {
		struct stat d, mine, st;
		int fd;

		if (setgroups((size_t)u->ngroups, u->groups) || setgid(u->gid) || setuid(u->uid))
			_exit(EPERM);
		if (fstat(dirfd, &d))
			_exit(errno);
		/* the user must reach the directory by its path, as they would */
		fd = open(dirpath, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			_exit(errno);
		if (fstat(fd, &mine) || mine.st_dev != d.st_dev || mine.st_ino != d.st_ino)
			_exit(EXDEV); /* it was swapped meanwhile */
		close(fd);
		if (faccessat(dirfd, ".", W_OK | X_OK, 0))
			_exit(errno);
		if (!fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
			/* sticky directory (/tmp): only the owner of a name may replace it */
			if ((d.st_mode & S_ISVTX) && st.st_uid != u->uid && d.st_uid != u->uid)
				_exit(EPERM);
			if (S_ISLNK(st.st_mode) ? st.st_uid != u->uid
						: faccessat(dirfd, name, W_OK, AT_SYMLINK_NOFOLLOW))
				_exit(S_ISLNK(st.st_mode) ? EPERM : errno);
		} else if (errno != ENOENT) {
			_exit(errno);
		}
		_exit(0);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return errno;
	if (!WIFEXITED(status))
		return EPERM;
	return WEXITSTATUS(status);
}

static void out_free(struct sb_out *o)
{
	if (o->dirfd >= 0)
		close(o->dirfd);
	free(o->name);
	free(o->tmp);
	free(o->path);
	free(o->tmp_path);
	o->dirfd = o->fd = -1;
	o->name = o->tmp = o->path = o->tmp_path = NULL;
}

int sb_out_open(struct sb_out *o, const char *path, const struct sb_owner *owner, char *err,
		size_t errlen)
{
	const char *slash, *base;
	char *dir = NULL;
	struct stat st;
	int e = 0;

	memset(o, 0, sizeof(*o));
	o->dirfd = o->fd = -1;
	if (!path || !*path) {
		snprintf(err, errlen, "no output file name");
		errno = EINVAL;
		return -1;
	}
	slash = strrchr(path, '/');
	base = slash ? slash + 1 : path;
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
		snprintf(err, errlen, "cannot write %s: is a directory", path);
		errno = EISDIR;
		return -1;
	}
	dir = !slash ? strdup(".") : slash == path ? strdup("/") : strndup(path, slash - path);
	o->path = strdup(path);
	o->name = strdup(base);
	o->tmp = malloc(strlen(base) + sizeof(".partial.XXXXXX"));
	o->tmp_path = malloc(strlen(path) + sizeof(".partial.XXXXXX"));
	if (!dir || !o->path || !o->name || !o->tmp || !o->tmp_path) {
		e = ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	o->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (o->dirfd < 0) {
		e = errno;
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
		goto fail;
	}
	if (!fstatat(o->dirfd, o->name, &st, AT_SYMLINK_NOFOLLOW)) {
		if (S_ISDIR(st.st_mode)) {
			e = EISDIR;
			snprintf(err, errlen, "cannot write %s: is a directory", path);
			goto fail;
		}
		/* renaming over a device or FIFO (as root: /dev/null) would replace it */
		if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
			e = EINVAL;
			snprintf(err, errlen,
				 "cannot write %s: not a regular file (use -o - or a file name)", path);
			goto fail;
		}
	}
	if (owner) {
		e = sb_owner_may_write(owner, o->dirfd, dir, o->name);
		if (e) {
			snprintf(err, errlen,
				 "refusing to write %s: uid %u could not create or replace it there "
				 "(%s)", path, (unsigned)owner->uid, strerror(e));
			goto fail;
		}
	}
	for (int tries = 0; tries < 100; tries++) {
		char sfx[7];

		random_suffix(sfx);
		sprintf(o->tmp, "%s.partial.%s", o->name, sfx);
		sprintf(o->tmp_path, "%s.partial.%s", path, sfx);
		o->fd = openat(o->dirfd, o->tmp,
			       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
		if (o->fd >= 0 || errno != EEXIST)
			break;
	}
	if (o->fd < 0) {
		e = errno;
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
		goto fail;
	}
	/* given away before a byte is written: never a chown by name */
	if ((owner && fchown(o->fd, owner->uid, owner->gid)) ||
	    fchmod(o->fd, 0644 & ~current_umask())) {
		e = errno;
		snprintf(err, errlen, "cannot set the owner or mode of %s: %s", o->tmp_path,
			 strerror(e));
		goto fail;
	}
	free(dir);
	return 0;
fail:
	if (o->fd >= 0) {
		close(o->fd);
		unlinkat(o->dirfd, o->tmp, 0);
	}
	free(dir);
	out_free(o);
	errno = e;
	return -1;
}

int sb_out_commit(struct sb_out *o, bool sync)
{
	int rc = 0;

	if (o->fd < 0 && !o->name)
		return -EINVAL;
	if (o->fd >= 0) {
		if (sync && fsync(o->fd) < 0)
			rc = -errno;
		if (close(o->fd) < 0 && !rc)
			rc = -errno;
		o->fd = -1;
	}
	if (!rc && o->keep_old) {
		struct stat st;
		size_t n = strlen(o->name) + 5;
		char *old = malloc(n);

		/* names in the pinned directory: a symlink there is renamed, never followed */
		if (!old)
			rc = -ENOMEM;
		else if (snprintf(old, n, "%s.old", o->name) > 0 &&
			 !fstatat(o->dirfd, o->name, &st, AT_SYMLINK_NOFOLLOW) && S_ISREG(st.st_mode) &&
			 renameat(o->dirfd, o->name, o->dirfd, old) < 0)
			rc = -errno;
		free(old);
	}
	if (!rc && renameat(o->dirfd, o->tmp, o->dirfd, o->name) < 0)
		rc = -errno;
	/* some filesystems cannot fsync a directory; the rename is done either way */
	if (!rc && sync && fsync(o->dirfd) < 0 && errno != EINVAL)
		rc = -errno;
	out_free(o);
	return rc;
}

void sb_out_abandon(struct sb_out *o, bool keep)
{
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	if (!keep && o->tmp)
		unlinkat(o->dirfd, o->tmp, 0);
	out_free(o);
}

/* a stdio stream whose bytes go through gzwrite */
static ssize_t gz_cookie_write(void *c, const char *buf, size_t n)
{
	int w = n ? gzwrite(c, buf, (unsigned)(n > (1u << 30) ? 1u << 30 : n)) : 0;

	if (n && w <= 0) {
		errno = EIO;
		return -1;
	}
	return w;
}

static int gz_cookie_close(void *c)
{
	if (gzclose(c) != Z_OK) {
		errno = EIO;
		return -1;
	}
	return 0;
}

static bool gz_name(const char *path)
{
	return str_ends_with(path, ".gz");
}

int sb_stream_open(struct sb_stream *s, const char *path)
{
	char err[PATH_MAX + 128];

	memset(s, 0, sizeof(*s));
	s->file.fd = s->file.dirfd = -1;
	if (!path || !strcmp(path, "-")) {
		s->f = stdout;
		return 0;
	}
	if (sb_out_open(&s->file, path, NULL, err, sizeof(err))) {
		sb_err("%s", err);
		return -1;
	}
	if (gz_name(path)) {
		/* the descriptor stays the writer's (sb_out_commit syncs and closes it) */
		static const cookie_io_functions_t io = { .write = gz_cookie_write,
							  .close = gz_cookie_close };
		int fd = fcntl(s->file.fd, F_DUPFD_CLOEXEC, 3);
		gzFile z = fd >= 0 ? gzdopen(fd, "wb6") : NULL;

		s->f = z ? fopencookie(z, "w", io) : NULL;
		if (!s->f) {
			if (z)
				gzclose(z);
			else if (fd >= 0)
				close(fd);
			sb_err("cannot write %s: %s", s->file.tmp_path,
			       z ? strerror(errno) : "cannot start gzip");
			sb_out_abandon(&s->file, false);
			return -1;
		}
		s->gz = true;
		s->to_file = true;
		return 0;
	}
	s->f = fdopen(s->file.fd, "w");
	if (!s->f) {
		sb_err("cannot write %s: %s", s->file.tmp_path, strerror(errno));
		sb_out_abandon(&s->file, false);
		return -1;
	}
	s->file.fd = -1; /* fclose closes it */
	s->to_file = true;
	return 0;
}

int sb_stream_close(struct sb_stream *s, bool ok, const char *what)
{
	char tmp[PATH_MAX + 32], path[PATH_MAX + 32];
	int err = 0;

	if (!s->f)
		return -1;
	if (fflush(s->f) || ferror(s->f))
		err = errno ? errno : EIO;
	if (!s->to_file) {
		s->f = NULL;
		if (err)
			sb_err("writing %s: %s", what, strerror(err));
		return err ? -1 : 0;
	}
	/* gzip: closing writes the stream's end; sb_out_commit syncs the file */
	if (!err && !s->gz && fsync(fileno(s->f)))
		err = errno;
	if (fclose(s->f) && !err)
		err = errno ? errno : EIO;
	s->f = NULL;
	s->to_file = false;
	s->gz = false;
	if (err || !ok) {
		if (err)
			sb_err("writing %s: %s", s->file.tmp_path, strerror(err));
		sb_out_abandon(&s->file, false);
		return -1;
	}
	snprintf(tmp, sizeof(tmp), "%s", s->file.tmp_path);
	snprintf(path, sizeof(path), "%s", s->file.path);
	err = sb_out_commit(&s->file, true);
	if (err) {
		sb_err("cannot rename %s to %s: %s", tmp, path, strerror(-err));
		return -1;
	}
	return 0;
}
