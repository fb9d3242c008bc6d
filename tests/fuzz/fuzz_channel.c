// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer target: the agent's side of the GPU timeline channel
 * (user/channel.c: sbc_attach's validation, sbc_set_enabled, sbc_drain) on a
 * channel file made of fuzz bytes. The channel is shared memory written by the
 * traced process, so every byte of it is hostile input to the agent (root).
 *
 * The harness plays the producer: it writes the file with a channel's name
 * (/dev/shm/stepblame-<our pid>-fuzz.chan, 0600, ours) and maps it shared, so
 * that the agent finds it among this process's mappings, lets the real
 * sbc_attach map and check it, enables it, then scribbles the ring again with
 * fuzz bytes (a producer publishing after the enable) and drains.
 * Every record handed to the callback must be one a trace file accepts.
 *
 * Input: byte 0 = flags, byte 1 = ring size (16 << (b & 3) slots), byte 2 =
 * string entries (1 + b % 8), byte 3 = header patch selector, then the image.
 *   flags bit 0: repair the header (magic, version, layout, producer pid) so the
 *                fuzzer spends its time past the header checks
 *   flags bit 1: make the slot sequences consistent for attach (find_tail)
 *   flags bit 2: after the enable, stamp the session's epoch on every slot
 *   flags bit 3: after the enable, copy the ring again from the input (with bit 1:
 *                slots whose byte 8 is odd are published at the positions the
 *                agent expects next; without it the sequences are as given)
 *   flags bit 4: a second drain after corrupting header counters/offset
 *   flags bit 5: (without bit 0) keep the producer pid as given, not ours
 *   flags bit 6: then the producer truncates the file to (byte 3 * 64) bytes and
 *                the agent drains again: a SIGBUS inside the mapping must turn
 *                into -EIO, never kill the agent
 * FUZZ_DEBUG=1 in the environment: a line per run on what attach and drain did.
 * Without bit 0 the image is the whole file as given (any size from 512), but
 * for the producer pid.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iuser -Ibpf \
 *       tests/fuzz/fuzz_channel.c user/channel.c user/trace.c user/outfile.c user/util.c \
 *       -o fuzz_channel
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/channel.h"
#include "format/trace.h"

static char path[64];
static int debug;
static unsigned char *image;
static size_t image_cap;

static void cleanup(void)
{
	unlink(path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(path, sizeof(path), SBC_DIR "/" SBC_NAME_PREFIX "%d-fuzz" SBC_NAME_SUFFIX,
		 (int)getpid());
	debug = getenv("FUZZ_DEBUG") != NULL;
	atexit(cleanup);
	image_cap = 1u << 20;
	image = malloc(image_cap);
	return 0;
}

/* a record the agent passes on must be a valid trace record of the two types it makes */
static int check_cb(void *ctx, const struct sb_hdr *h)
{
	const char *why;

	(void)ctx;
	if (h->type != SB_REC_GPU && h->type != SB_REC_STRING)
		__builtin_trap();
	why = sbt_check_record(h, h->size);
	if (why) {
		fprintf(stderr, "channel handed out a bad record: %s\n", why);
		__builtin_trap();
	}
	if (h->pid != (uint32_t)getpid())
		__builtin_trap(); /* the agent sets the pid itself: never the producer's word */
	if (h->type == SB_REC_STRING) {
		const struct sb_text *t = (const void *)h;

		/* len 0: the producer's name began with a NUL; passed on as an empty name */
		if (t->id == 0 || t->len > SBC_STRING_MAX)
			__builtin_trap();
		if (memchr(t->text, 0, t->len))
			__builtin_trap(); /* a name is cut at its NUL */
	}
	return 0;
}

static int write_file(const unsigned char *p, size_t n)
{
	int fd;
	size_t off = 0;

	unlink(path);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	while (off < n) {
		ssize_t k = write(fd, p + off, n - off);

		if (k <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)k;
	}
	close(fd);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t flags, slots_b, strings_b, patch;
	const uint8_t *img;
	size_t img_len, file_len, ring_bytes = 0;
	uint32_t cap = 16, scap = 1;
	struct sbc_reader *r;
	char err[256];

	if (size < 4 || !image)
		return 0;
	flags = data[0];
	slots_b = data[1];
	strings_b = data[2];
	patch = data[3];
	img = data + 4;
	img_len = size - 4;

	if (flags & 1) {
		struct sbc_header *h = (struct sbc_header *)image;

		cap = 16u << (slots_b & 3);
		scap = 1 + strings_b % 8;
		ring_bytes = (size_t)cap * SBC_SLOT_SIZE;
		file_len = SBC_HEADER_SIZE + ring_bytes + (size_t)scap * SBC_STRING_SIZE;
		memset(image, 0, file_len);
		memcpy(image, img, img_len < file_len ? img_len : file_len);
		memcpy(h->magic, SBC_MAGIC, sizeof(h->magic));
		h->version = SBC_VERSION;
		h->header_size = SBC_HEADER_SIZE;
		h->total_size = file_len;
		h->producer_pid = (uint32_t)getpid();
		h->slot_size = SBC_SLOT_SIZE;
		h->ring_capacity = cap;
		h->ring_offset = SBC_HEADER_SIZE;
		h->string_size = SBC_STRING_SIZE;
		h->string_capacity = scap;
		h->strings_offset = SBC_HEADER_SIZE + ring_bytes;
		/* one field left as the fuzzer says, to reach each layout check alone */
		switch (patch % 16) {
		case 1: h->version = patch >> 4; break;
		case 2: h->ring_capacity = cap + (patch >> 4); break;
		case 3: h->string_capacity = scap + (patch >> 4); break;
		case 4: h->producer_pid += patch >> 4; break;
		case 5: h->total_size += patch >> 4; break;
		}
		if (flags & 2) {
			/* every slot free or ready for one position of a window at base */
			uint64_t base = 0;

			if (img_len >= 8)
				memcpy(&base, img, sizeof(base));
			base &= 0xffffffffffull;
			for (uint32_t i = 0; i < cap; i++) {
				struct sbc_slot *s = (struct sbc_slot *)(image + SBC_HEADER_SIZE) +
						     ((base + i) & (cap - 1));
				s->seq = base + i + (s->bytes[8] & 1);
			}
		}
	} else {
		if (img_len < SBC_HEADER_SIZE || img_len > image_cap)
			return 0;
		file_len = img_len;
		memcpy(image, img, img_len);
		/* our pid changes from run to run: put it in unless bit 5 says not to */
		if (!(flags & 32))
			((struct sbc_header *)image)->producer_pid = (uint32_t)getpid();
	}
	if (write_file(image, file_len))
		return 0;
	/* the producer's own mapping: where the agent finds the channel */
	int fd = open(path, O_RDWR | O_CLOEXEC);
	unsigned char *m = fd >= 0 ? mmap(NULL, file_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) :
				     MAP_FAILED;

	if (fd >= 0)
		close(fd);
	if (m == MAP_FAILED)
		return 0;

	r = sbc_attach(getpid(), err, sizeof(err));
	if (debug)
		fprintf(stderr, "attach: %s\n", r ? "ok" : err);
	if (!r) {
		if (!err[0] || strchr(err, '\n'))
			__builtin_trap(); /* every refusal is one line */
		munmap(m, file_len);
		return 0;
	}
	if (sbc_set_enabled(r, true) == 0) {
		{
			struct sbc_header *h = (struct sbc_header *)m;
			uint32_t epoch = __atomic_load_n(&h->epoch, __ATOMIC_RELAXED);
			uint32_t rcap = h->ring_capacity;

			/* the producer publishes after the enable: anything at all */
			if ((flags & 8) && ring_bytes) {
				struct sbc_slot *now = (struct sbc_slot *)(m + SBC_HEADER_SIZE);
				const struct sbc_slot *in = (const struct sbc_slot *)(image +
										      SBC_HEADER_SIZE);

				for (uint32_t i = 0; i < cap; i++) {
					uint64_t seq = now[i].seq;

					memcpy(&now[i], &in[i], sizeof(now[i]));
					/* bit 1: at the positions the agent waits for next */
					if (flags & 2)
						now[i].seq = seq + (in[i].bytes[8] & 1);
				}
			}
			if ((flags & 4) && rcap && (size_t)rcap * SBC_SLOT_SIZE + SBC_HEADER_SIZE <=
						   file_len)
				for (uint32_t i = 0; i < rcap; i++)
					((struct sbc_slot *)(m + SBC_HEADER_SIZE))[i].epoch = epoch;
			int got = sbc_drain(r, check_cb, NULL);

			if (debug)
				fprintf(stderr, "drained %d (epoch %u, slot0 seq %llu epoch %u)\n", got,
					epoch, (unsigned long long)((struct sbc_slot *)(m + SBC_HEADER_SIZE))->seq,
					((struct sbc_slot *)(m + SBC_HEADER_SIZE))->epoch);
			if (flags & 16) {
				/* the producer rewrites what the agent read once */
				memcpy(&h->clock_offset_ns, image + 64, sizeof(h->clock_offset_ns));
				h->ring_capacity = 0xffffffffu;
				h->string_capacity = 0xffffffffu;
				h->ring_drops = ~0ull;
				if (img_len > 16)
					memcpy(m + SBC_HEADER_SIZE, img, img_len < file_len - SBC_HEADER_SIZE ?
					       img_len : file_len - SBC_HEADER_SIZE);
				sbc_heartbeat(r);
				sbc_drain(r, check_cb, NULL);
			}
			if (flags & 64) {
				int rc;

				if (truncate(path, (off_t)patch * 64))
					__builtin_trap();
				/* the ring again, past the new end: ready slots everywhere */
				sbc_heartbeat(r);
				rc = sbc_drain(r, check_cb, NULL);
				if (rc < 0 && rc != -EIO)
					__builtin_trap();
				if (debug)
					fprintf(stderr, "after truncating to %u: drain %d\n", patch * 64, rc);
			}
		}
		uint64_t a, b, c;

		sbc_counters(r, &a, &b, &c);
		(void)sbc_producer_name(r);
		sbc_set_enabled(r, false);
	}
	sbc_detach(r);
	munmap(m, file_len);
	return 0;
}
