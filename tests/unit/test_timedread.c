/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * base/timedread: a read that another process holds up is abandoned; with
 * too many of them still held nothing more is read that way, until one returns. A FIFO with no writer stands in
 * for a /proc/PID/cmdline held up by its process: opening it waits forever.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/timedread.h"
#include "test.h"

static char dir[] = "/tmp/sb-timedread.XXXXXX";

static void t_reads_a_file(void)
{
	char path[256], buf[64];
	FILE *f;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/plain", dir);
	f = fopen(path, "w");
	REQUIRE(f, "create %s", path);
	fputs("python3 -c from multiprocessing.spawn import spawn_main", f);
	fclose(f);
	n = read_small_file_timed(path, buf, sizeof(buf), 5000);
	CHECK(n == 55 && strcmp(buf, "python3 -c from multiprocessing.spawn import spawn_main") == 0,
	      "read %zd: '%s'", n, n > 0 ? buf : "");
	n = read_small_file_timed(path, buf, 8, 5000);
	CHECK(n == 7 && strcmp(buf, "python3") == 0, "short buffer: %zd '%s'", n, n > 0 ? buf : "");
	snprintf(path, sizeof(path), "%s/missing", dir);
	n = read_small_file_timed(path, buf, sizeof(buf), 5000);
	CHECK(n == -ENOENT, "missing file: %zd", n);
	CHECK(!timed_read_stalled(), "stalled after plain reads");
}

static void t_held_read_abandoned(void)
{
	char path[256], plain[256], buf[64] = "untouched";
	ssize_t n;
	int w;

	snprintf(path, sizeof(path), "%s/fifo", dir);
	snprintf(plain, sizeof(plain), "%s/plain", dir);
	REQUIRE(mkfifo(path, 0600) == 0, "mkfifo: %s", strerror(errno));
	n = read_small_file_timed(path, buf, sizeof(buf), 100);
	CHECK(n == -ETIMEDOUT, "held read returned %zd", n);
	CHECK(strcmp(buf, "untouched") == 0, "buffer written by an abandoned read");
	CHECK(!timed_read_stalled(), "one held read stops every later one");
	n = read_small_file_timed(plain, buf, sizeof(buf), 5000);
	CHECK(n == 55, "a plain read after one held read returned %zd", n);
	/* up to the most left behind: then nothing is read this way */
	for (int i = 1; i < TIMED_READ_STUCK_MAX; i++) {
		n = read_small_file_timed(path, buf, sizeof(buf), 50);
		CHECK(n == -ETIMEDOUT, "held read %d returned %zd", i, n);
	}
	CHECK(timed_read_stalled(), "not marked stalled with %d readers left behind",
	      TIMED_READ_STUCK_MAX);
	n = read_small_file_timed(plain, buf, sizeof(buf), 5000);
	CHECK(n == -EDEADLK, "read with %d held returned %zd", TIMED_READ_STUCK_MAX, n);
	/* the holder lets go (a writer comes and goes): reads go on */
	w = open(path, O_WRONLY);
	REQUIRE(w >= 0, "open the fifo for writing: %s", strerror(errno));
	close(w);
	for (int i = 0; i < 200 && timed_read_stalled(); i++)
		usleep(10000);
	n = read_small_file_timed(plain, buf, sizeof(buf), 5000);
	CHECK(n == 55, "a plain read once the holder let go returned %zd", n);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		printf("FAIL timedread_setup: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	RUN(t_reads_a_file);
	RUN(t_held_read_abandoned);
	test_rm_tree(dir);
	return test_summary();
}
