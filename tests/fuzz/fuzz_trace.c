// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer target: the trace reader and `stepblame dump` on arbitrary bytes.
 * Not built by default:
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iuser -Ibpf \
 *       tests/fuzz/fuzz_trace.c user/trace.c user/dump.c user/util.c -o build/fuzz_trace
 *   ./build/fuzz_trace -max_len=200000 corpus/
 *
 * Inputs are taken as the bytes after a valid file header, so the fuzzer spends
 * its time in the record parser rather than on the magic. An input whose
 * length is a multiple of 3 follows the header compressed as a zstd frame
 * instead: the bytes of a compressed trace after its first frame (the frame
 * decoder, the zero-filled tail and what follows a frame).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include "cmd/cmds.h"
#include "format/trace.h"

static int fd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int null = open("/dev/null", O_WRONLY);

	dup2(null, STDOUT_FILENO);
	close(null);
	fd = memfd_create("fuzz_trace", 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbt_file_hdr fh = { .magic = SBT_MAGIC, .version = SBT_VERSION,
				   .hdr_size = sizeof(fh), .endian = SBT_ENDIAN_TAG, .clock = 1 };
	char err[512], *argv[] = { "dump", "--jsonl", path, NULL };
	const struct sb_hdr *h;
	struct sbt_reader *r;

	unsigned char zh[128];
	const void *head = &fh;
	size_t hlen = sizeof(fh);

	if (fd < 0)
		return 0;
	if (size % 3 == 0) {
		hlen = ZSTD_compress(zh, sizeof(zh), &fh, sizeof(fh), 1);
		if (ZSTD_isError(hlen))
			return 0;
		head = zh;
	}
	if (ftruncate(fd, 0) || pwrite(fd, head, hlen, 0) != (ssize_t)hlen ||
	    pwrite(fd, data, size, hlen) != (ssize_t)size)
		return 0;
	r = sbt_open(path, err, sizeof(err));
	if (r) {
		while (sbt_next(r, &h) == SBT_OK)
			if (sbt_check_record(h, h->size))
				__builtin_trap(); /* handed out a record it should have refused */
		sbt_close(r);
	}
	/* one dump per input (each open maps a 1 MiB buffer: the cost of a run); the
	 * input's length picks the output, so both are exercised on every shape */
	if (size & 1)
		argv[1] = "--abs";
	cmd_dump(3, argv);
	return 0;
}
