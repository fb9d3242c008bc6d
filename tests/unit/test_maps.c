/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The /proc/PID/maps line parser (user/format/maps.h) against the kernel's
 * own text: every line of real maps files read as sscanf reads it, names
 * with spaces and escaped newlines, and the lines it must refuse.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "test.h"
#include "format/maps.h"
#include "capture/target.h"

static char *slurp(const char *path, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t k;

	if (fd < 0 || !buf) {
		if (fd >= 0)
			close(fd);
		free(buf);
		return NULL;
	}
	while ((k = read(fd, buf + n, cap - n - 1)) > 0) {
		n += (size_t)k;
		if (n + 1 == cap) {
			char *nb = realloc(buf, cap *= 2);

			if (!nb)
				break;
			buf = nb;
		}
	}
	close(fd);
	buf[n] = 0;
	*len = n;
	return buf;
}

/* every line of path parsed both ways; the number of lines, or -1 on a difference (reported) */
static int same_as_sscanf(const char *path)
{
	size_t len;
	char *text = slurp(path, &len), *line, *nl;
	int lines = 0;

	CHECK(text && len > 0, "cannot read %s", path);
	if (!text)
		return -1;
	for (line = text; (nl = strchr(line, '\n')); line = nl + 1) {
		unsigned long start, end, off, ino;
		unsigned maj, min;
		char perms[8];
		struct maps_line l;
		int n = 0;
		const char *name;

		*nl = 0;
		CHECK(sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %n", &start, &end, perms, &off, &maj,
			     &min, &ino, &n) == 7 && n > 0,
		      "sscanf refused a line of %s: %s", path, line);
		CHECK(maps_line_parse(line, &l), "refused a line of %s: %s", path, line);
		if (test_failed_now)
			break;
		name = line + n;
		CHECK(l.start == start && l.end == end && l.off == off && l.maj == maj &&
			      l.min == min && l.ino == ino && !strcmp(l.perms, perms) &&
			      !strcmp(l.name, name),
		      "%s: %s read as %" PRIx64 "-%" PRIx64 " %s %" PRIx64 " %x:%x %" PRIu64 " '%s'",
		      path, line, l.start, l.end, l.perms, l.off, l.maj, l.min, l.ino, l.name);
		if (test_failed_now)
			break;
		lines++;
	}
	free(text);
	return test_failed_now ? -1 : lines;
}

static void t_real_maps(void)
{
	char dir[] = "/tmp/sbmapsXXXXXX", path[256];
	void *a[3] = { 0 };
	int fd = -1, lines;

	CHECK(mkdtemp(dir), "mkdtemp");
	if (test_failed_now)
		return;
	/* a file whose name holds spaces and a newline (written as \012), mapped three ways */
	snprintf(path, sizeof(path), "%s/a name  with\nnewline (deleted)", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	CHECK(fd >= 0 && ftruncate(fd, 3 * 4096) == 0, "create %s", path);
	if (!test_failed_now) {
		a[0] = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
		a[1] = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 4096);
		a[2] = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 8192);
		CHECK(a[0] != MAP_FAILED && a[1] != MAP_FAILED && a[2] != MAP_FAILED, "mmap");
		unlink(path); /* and " (deleted)" after it */
	}
	lines = test_failed_now ? -1 : same_as_sscanf("/proc/self/maps");
	CHECK(lines > 10, "/proc/self/maps: %d lines", lines);
	if (!test_failed_now) {
		/* the mapped file's lines: the name as the kernel wrote it */
		size_t len;
		char *text = slurp("/proc/self/maps", &len), *line, *nl;
		int found = 0;

		for (line = text; text && (nl = strchr(line, '\n')); line = nl + 1) {
			struct maps_line l;

			*nl = 0;
			if (maps_line_parse(line, &l) && strstr(l.name, "a name  with\\012newline (deleted) (deleted)")) {
				found++;
				CHECK(l.name[0] == '/' && l.ino && !strncmp(l.name, dir, strlen(dir)),
				      "name '%s'", l.name);
				CHECK((uintptr_t)l.start == (uintptr_t)a[0] ? !strcmp(l.perms, "r--s") && l.off == 0
				      : (uintptr_t)l.start == (uintptr_t)a[1] ? !strcmp(l.perms, "rw-p") && l.off == 4096
				      : (uintptr_t)l.start == (uintptr_t)a[2] && !strcmp(l.perms, "r--s") && l.off == 8192,
				      "line %s", line);
			}
		}
		free(text);
		CHECK(found == 3, "%d lines of the mapped file found", found);
	}
	/* another process's maps, as the agent reads them: a child's, after its exec */
	if (!test_failed_now) {
		int ready[2];
		pid_t kid = -1;
		char b;

		CHECK(pipe(ready) == 0, "pipe");
		if (!test_failed_now && (kid = fork()) == 0) {
			dup2(ready[1], 1);
			execl("/bin/sh", "sh", "-c", "echo; exec sleep 30", (char *)NULL);
			_exit(127);
		}
		close(ready[1]);
		CHECK(kid > 0 && read(ready[0], &b, 1) == 1, "child");
		close(ready[0]);
		if (!test_failed_now) {
			usleep(100000); /* its exec of sleep */
			snprintf(path, sizeof(path), "/proc/%d/maps", (int)kid);
			lines = same_as_sscanf(path);
			CHECK(lines > 5, "%s: %d lines", path, lines);
		}
		if (kid > 0) {
			kill(kid, SIGKILL);
			waitpid(kid, NULL, 0);
		}
	}
	for (int i = 0; i < 3; i++)
		if (a[i] && a[i] != MAP_FAILED)
			munmap(a[i], 4096);
	if (fd >= 0)
		close(fd);
	rmdir(dir);
}

static void t_edges(void)
{
	struct maps_line l;

	CHECK(maps_line_parse("ffffffffffff0000-ffffffffffffffff r-xp ffffffffffffffff fff:fffff "
			      "18446744073709551615    /x y",
			      &l) &&
		      l.start == 0xffffffffffff0000ull && l.end == UINT64_MAX && l.off == UINT64_MAX &&
		      l.maj == 0xfff && l.min == 0xfffff && l.ino == UINT64_MAX && !strcmp(l.name, "/x y"),
	      "the largest values");
	CHECK(maps_line_parse("00400000-00452000 r-xp 00000000 08:02 173521", &l) && !*l.name,
	      "no name and no trailing space");
	CHECK(maps_line_parse("7ffd0000-7ffd1000 rw-p 00000000 00:00 0 ", &l) && !*l.name &&
		      l.ino == 0,
	      "anonymous");
	CHECK(maps_line_parse("7ffd0000-7ffd1000 rw-p 00000000 00:00 0    [stack]", &l) &&
		      !strcmp(l.name, "[stack]"),
	      "[stack]: '%s'", l.name);
	CHECK(maps_line_parse("7ffd0000-7ffd1000 rw-p 00000000 00:00 0 \n", &l) && !*l.name,
	      "anonymous, the newline left at the end: '%s'", l.name);
	static const char *bad[] = {
		"",
		"00400000",
		"00400000-",
		"00400000-00452000",
		"00400000-00452000 r-xp",
		"00400000-00452000 r-x 00000000 08:02 1",
		"00400000-00452000 r-xpp 00000000 08:02 1",
		"00400000-00452000 r-xp 00000000 0802 1",
		"00400000-00452000 r-xp 00000000 08: 1",
		"00400000-00452000 r-xp 00000000 08:02 x",
		"00400000-00452000 r-xp 00000000 08:02 12x /a",
		"0x400000-00452000 r-xp 00000000 08:02 1",
		"-0400000-00452000 r-xp 00000000 08:02 1",
		" 0400000-00452000 r-xp 00000000 08:02 1",
		"00400000 00452000 r-xp 00000000 08:02 1",
		"10000000000000000-1 r-xp 0 00:00 0",
		"1-2 r-xp 10000000000000000 00:00 0",
		"1-2 r-xp 0 100000000:00 0",
		"1-2 r-xp 0 00:00 18446744073709551616",
		"1-2 r-xp 0 00:00 99999999999999999999",
		"1-2 g-xp\t0 00:00 0",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(!maps_line_parse(bad[i], &l), "accepted '%s'", bad[i]);
}

/* does pid's maps text hold a mapping that starts at a? */
static bool maps_has(const char *text, void *a)
{
	char start[32];

	snprintf(start, sizeof(start), "\n%lx-", (unsigned long)(uintptr_t)a);
	return strstr(text, start) != NULL;
}

/* maps_reuse: in a pass, a process's maps as first read; after it, read again */
static void t_reuse(void)
{
	char *t1 = NULL, *t2 = NULL, *t3 = NULL, *t4 = NULL;
	ssize_t n1, n2, n3, n4;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	void *a;

	maps_reuse(true);
	n1 = read_maps(getpid(), &t1, 0);
	/* a file's page: a line of its own (anonymous memory could merge with a neighbour) */
	a = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	if (fd >= 0)
		close(fd);
	CHECK(a != MAP_FAILED, "mmap");
	n2 = read_maps(getpid(), &t2, 0);
	n3 = read_maps(getppid(), &t3, 0); /* another process's: read, not mixed up */
	maps_reuse(false);
	n4 = read_maps(getpid(), &t4, 0);
	CHECK(n1 > 0 && n2 == n1 && t1 && t2 && t2 != t1 && !memcmp(t1, t2, (size_t)n1 + 1),
	      "a second read in the pass gave other text (%zd, %zd bytes)", n1, n2);
	CHECK(n3 > 0 && t3 && (n3 != n1 || memcmp(t3, t1, (size_t)n1)), "the parent's maps were ours");
	CHECK(n4 > 0 && t4 && a != MAP_FAILED && maps_has(t4, a) && !maps_has(t2, a),
	      "after the pass: the new mapping %s; in the pass: %s",
	      t4 && maps_has(t4, a) ? "seen" : "not seen", t2 && maps_has(t2, a) ? "seen" : "not seen");
	free(t1);
	free(t2);
	free(t3);
	free(t4);
	if (a != MAP_FAILED)
		munmap(a, 4096);
}

int main(void)
{
	RUN(t_real_maps);
	RUN(t_edges);
	RUN(t_reuse);
	return test_summary();
}
