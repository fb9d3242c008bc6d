// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What the check of a file's call-frame information costs the agent
 * (user/capture/cficheck.c; bench/RESULTS.md section 49): for each FILE,
 * ROUNDS times, a fresh ELF handle read with pread (as the agent opens it)
 * and cfi_check on it; the first round's time (the process's first pages for
 * the bytes read: page faults, which this VM makes dear; the agent checks a
 * file once), the median and the smallest, with the bytes read
 * and what the check found (entries, CIEs, the longest program, remembered
 * states, the largest register), or why it refused the file.
 *
 *   cc -O2 -std=gnu11 -D_GNU_SOURCE -I. -Iuser bench/cfi_check.c user/capture/cficheck.c \
 *       -ldw -lelf -o build/bench/cfi_check
 *   build/bench/cfi_check [-n ROUNDS] FILE...
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "capture/cficheck.h"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int rounds = 5, i = 1;

	if (argc > 2 && !strcmp(argv[1], "-n")) {
		rounds = atoi(argv[2]);
		i = 3;
	}
	if (i >= argc || rounds < 1 || rounds > 1000) {
		fprintf(stderr, "usage: cfi_check [-n ROUNDS] FILE...\n");
		return 2;
	}
	elf_version(EV_CURRENT);
	printf("%-48s %9s %9s %9s %10s %8s %5s %7s %5s %4s  %s\n", "file", "first_ms", "median_ms", "min_ms",
	       "bytes", "entries", "cies", "max_prog", "depth", "reg", "refused");
	for (; i < argc; i++) {
		double t[1000], first;
		struct cfi_check ck = { 0 };
		int rc = 0;

		for (int r = 0; r < rounds; r++) {
			int fd = open(argv[i], O_RDONLY);
			Elf *elf;
			double t0;

			if (fd < 0) {
				perror(argv[i]);
				return 1;
			}
			t0 = now_ms();
			elf = elf_begin(fd, ELF_C_READ, NULL);
			rc = elf ? cfi_check(elf, &ck) : -1;
			t[r] = now_ms() - t0;
			elf_end(elf);
			close(fd);
		}
		first = t[0];
		qsort(t, rounds, sizeof(t[0]), by_value);
		printf("%-48s %9.2f %9.2f %9.2f %10llu %8u %5u %7u %5u %4u  %s\n", argv[i], first, t[rounds / 2], t[0],
		       (unsigned long long)ck.bytes, ck.entries, ck.cies, ck.max_program, ck.max_depth,
		       ck.max_reg, rc ? (ck.why ? ck.why : "not ELF") : "");
	}
	return 0;
}
