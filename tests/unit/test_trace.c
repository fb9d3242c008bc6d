// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The trace file: writer, reader, their failure modes, and `stepblame dump`.
 * No root needed; the tmpfs disk-full case runs only where a private mount
 * namespace can be made.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <zstd.h>

#include "test.h"
#include "cmd/cmds.h"
#include "format/gpu.h"
#include "format/trace.h"
#include "base/util.h"

static char dir[64];

/* ---- helpers ---- */

static char *tpath(const char *name)
{
	static char p[8][256];
	static int i;

	i = (i + 1) % 8;
	snprintf(p[i], sizeof(p[i]), "%s/%s", dir, name);
	return p[i];
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(p);
}

static bool exists(const char *p)
{
	struct stat st;

	return lstat(p, &st) == 0;
}

static long fsize(const char *p)
{
	struct stat st;

	return stat(p, &st) ? -1 : (long)st.st_size;
}

static unsigned char *slurp(const char *p, size_t *len)
{
	long n = fsize(p);
	unsigned char *b;
	int fd;

	if (n < 0)
		return NULL;
	b = malloc(n + 1);
	fd = open(p, O_RDONLY);
	if (fd < 0 || read(fd, b, n) != n) {
		if (fd >= 0)
			close(fd);
		free(b);
		return NULL;
	}
	close(fd);
	*len = n;
	return b;
}

static bool spit(const char *p, const void *b, size_t n)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	bool ok;

	if (fd < 0)
		return false;
	ok = write(fd, b, n) == (ssize_t)n;
	close(fd);
	return ok;
}

static bool all_of_zero(const char *p, size_t n)
{
	while (n--)
		if (*p++)
			return false;
	return true;
}

static bool is_text(unsigned t)
{
	return t == SB_REC_HOST || t == SB_REC_TARGET || t == SB_REC_THREAD ||
	       t == SB_REC_PROBE || t == SB_REC_STRING || t == SB_REC_NOTE ||
	       t == SB_REC_COSTS || t == SB_REC_GUARD;
}

/* the structs, spelled out here again so a mistake in trace.c shows */
static size_t struct_size(unsigned t)
{
	switch (t) {
	case SB_EV_SWITCH_OUT: return sizeof(struct sb_switch_out);
	case SB_EV_SWITCH_IN: return sizeof(struct sb_switch_in);
	case SB_EV_RUNSLICE: return sizeof(struct sb_runslice);
	case SB_EV_WAKEUP: return sizeof(struct sb_wakeup);
	case SB_EV_MIGRATE: return sizeof(struct sb_migrate);
	case SB_EV_FAULT: return sizeof(struct sb_fault);
	case SB_EV_RECLAIM: return sizeof(struct sb_reclaim);
	case SB_EV_MMSYS: return sizeof(struct sb_mmsys);
	case SB_EV_ALLOC: return sizeof(struct sb_alloc);
	case SB_EV_STEP: return sizeof(struct sb_step);
	case SB_EV_THREAD_NEW: case SB_EV_THREAD_EXIT: return sizeof(struct sb_thread);
	case SB_EV_RENAME: return sizeof(struct sb_rename);
	case SB_EV_CUDA: return sizeof(struct sb_cuda);
	case SB_EV_ALLOC_BURST: return sizeof(struct sb_alloc_burst);
	case SB_EV_IOSYS: return sizeof(struct sb_iosys);
	case SB_EV_AFFINITY: return sizeof(struct sb_affinity);
	case SB_EV_FAULT_RUN: return sizeof(struct sb_fault_run);
	case SB_EV_SCHED_RUN: return sizeof(struct sb_sched_run);
	case SB_REC_CPU: return sizeof(struct sb_cpu);
	case SB_REC_ALLOC_STATS: return sizeof(struct sb_alloc_stats);
	case SB_REC_DROPS: return sizeof(struct sb_drops);
	case SB_REC_GPU: return sizeof(struct sb_gpu);
	case SB_REC_TRAILER: return sizeof(struct sb_trailer);
	}
	return is_text(t) ? sizeof(struct sb_text) : 0;
}

static const unsigned all_types[] = {
	SB_EV_SWITCH_OUT, SB_EV_SWITCH_IN, SB_EV_RUNSLICE, SB_EV_WAKEUP, SB_EV_MIGRATE,
	SB_EV_FAULT, SB_EV_RECLAIM, SB_EV_MMSYS, SB_EV_ALLOC, SB_EV_STEP, SB_EV_THREAD_NEW,
	SB_EV_THREAD_EXIT, SB_EV_RENAME, SB_EV_CUDA, SB_REC_HOST, SB_REC_CPU, SB_REC_TARGET,
	SB_REC_THREAD, SB_REC_ALLOC_STATS, SB_REC_DROPS, SB_REC_PROBE, SB_REC_GPU,
	SB_REC_STRING, SB_REC_NOTE,
	/* added later: at the end, so the records the cases above pick keep their types */
	SB_EV_ALLOC_BURST, SB_EV_IOSYS, SB_EV_AFFINITY, SB_REC_COSTS, SB_REC_GUARD,
};

static _Alignas(8) unsigned char genbuf[65536];

/*
 * Record number seq of a test stream, as bytes: every type in turn, bodies
 * filled with a pattern that differs per record, some records longer than
 * their struct. Text records are what sbt_write_text makes of
 * (id, text, len) for the same seq.
 */
static const struct sb_hdr *gen(unsigned seq, const char **text, size_t *tlen, uint32_t *id)
{
	static char tbuf[64];
	unsigned t = all_types[seq % ARRAY_SIZE(all_types)];
	struct sb_hdr *h = (struct sb_hdr *)genbuf;
	size_t size = struct_size(t), i;

	memset(genbuf, 0, sizeof(genbuf));
	h->type = t;
	h->pid = 1000 + seq;
	h->tid = 2000 + seq;
	h->ts = 1000000000000ull + seq * 1000ull;
	if (is_text(t)) {
		struct sb_text *x = (struct sb_text *)h;

		*tlen = (seq * 13) % 41;
		for (i = 0; i < *tlen; i++)
			tbuf[i] = (char)(seq + i * 37); /* NULs and high bytes too */
		*text = tbuf;
		*id = seq * 3;
		x->len = *tlen;
		x->id = *id;
		memcpy(x->text, tbuf, *tlen);
		h->size = (sizeof(*x) + *tlen + 7) & ~7u;
		return h;
	}
	*text = NULL;
	if (seq % 11 == 0)
		size += 16; /* longer than the struct: allowed */
	h->size = size;
	h->cpu = seq % 300;
	h->flags = seq & 0xffff;
	for (i = sizeof(*h); i < size; i++)
		genbuf[i] = (unsigned char)(seq * 7 + i * 13 + t);
	return h;
}

static int put(struct sbt_writer *w, unsigned seq)
{
	const char *text;
	size_t tlen;
	uint32_t id;
	const struct sb_hdr *h = gen(seq, &text, &tlen, &id);

	if (text)
		return sbt_write_text(w, h->type, id, h->ts, h->pid, h->tid, text, tlen);
	return sbt_write(w, h);
}

/* the writers' zstd level: 0 plain (the cases run again compressed set it) */
static int wlevel;

static struct sbt_writer *create(const char *path)
{
	char err[256];

	return sbt_create_as(path, NULL, wlevel, err, sizeof(err));
}

/* a finished file of n generated records */
static bool write_file(const char *path, unsigned n)
{
	struct sbt_writer *w = create(path);
	unsigned i;

	if (!w)
		return false;
	for (i = 0; i < n; i++)
		if (put(w, i)) {
			sbt_abandon(w);
			return false;
		}
	return sbt_finish(w, SBT_END_DURATION, 5, 1000000000000ull + n * 1000ull, 7) == 0;
}

/*
 * Read path: records must be gen(0..), exactly. Returns the final status and
 * sets *n to records read; *why to the first mismatch, if any.
 */
static enum sbt_status read_back(const char *path, uint64_t *n, char *why, size_t whylen,
				 char *err, size_t errlen)
{
	char oerr[512];
	struct sbt_reader *r = sbt_open(path, oerr, sizeof(oerr));
	const struct sb_hdr *h, *want;
	const char *text;
	size_t tlen;
	uint32_t id;
	enum sbt_status s;

	*n = 0;
	why[0] = 0;
	if (!r) {
		snprintf(err, errlen, "%s", oerr);
		return SBT_IO;
	}
	while ((s = sbt_next(r, &h)) == SBT_OK) {
		want = gen(*n, &text, &tlen, &id);
		if (!why[0] && ((uintptr_t)h % 8 || h->size != want->size ||
				memcmp(h, want, want->size)))
			snprintf(why, whylen, "record %" PRIu64 " (%s, %u bytes) differs",
				 *n, sb_type_name(want->type), want->size);
		if (sbt_offset(r) % 8 && !why[0])
			snprintf(why, whylen, "offset %" PRIu64 " not 8-aligned", sbt_offset(r));
		(*n)++;
	}
	snprintf(err, errlen, "%s", sbt_error(r));
	sbt_close(r);
	return s;
}

static const char *status_name(enum sbt_status s)
{
	static const char *const n[] = { "OK", "EOF", "TRUNCATED", "CORRUPT", "IO" };

	return s < ARRAY_SIZE(n) ? n[s] : "?";
}

static void run_child(void (*fn)(void *), void *arg);

/* ---- cases ---- */

static void t_roundtrip_every_type(void)
{
	const char *p = tpath("rt.sbt");
	/* several MiB: crosses the writer's and the reader's buffer many times */
	const unsigned n = 60000;
	struct sbt_writer *w = sbt_create(p);
	struct sbt_reader *r;
	uint64_t want[SB_TYPE_MAX] = { 0 }, got;
	const struct sb_trailer *tr;
	const struct sb_hdr *h;
	char err[512], why[256];
	unsigned i, t;
	enum sbt_status s;

	REQUIRE(w, "sbt_create: %s", strerror(errno));
	for (i = 0; i < n; i++) {
		const char *text;
		size_t tlen;
		uint32_t id;

		want[gen(i, &text, &tlen, &id)->type]++;
		REQUIRE(put(w, i) == 0, "writing record %u failed", i);
	}
	for (t = 0; t < SB_TYPE_MAX; t++)
		CHECK(sbt_count(w, t) == want[t], "sbt_count(%s) %" PRIu64 " != %" PRIu64,
		      sb_type_name(t), sbt_count(w, t), want[t]);
	REQUIRE(sbt_finish(w, SBT_END_SIGNAL, 111, 222, 333) == 0, "sbt_finish failed");

	s = read_back(p, &got, why, sizeof(why), err, sizeof(err));
	CHECK(s == SBT_EOF, "status %s: %s", status_name(s), err);
	CHECK(got == n, "read %" PRIu64 " of %u records", got, n);
	CHECK(!why[0], "%s", why);

	r = sbt_open(p, err, sizeof(err));
	REQUIRE(r, "%s", err);
	CHECK(!strcmp(sbt_header(r)->magic, "SBTRACE") && sbt_header(r)->version == 1 &&
	      sbt_header(r)->hdr_size == 40 && sbt_header(r)->clock == 1 &&
	      sbt_header(r)->endian == SBT_ENDIAN_TAG && sbt_header(r)->created_mono_ns,
	      "file header fields");
	CHECK(sbt_trailer(r) == NULL, "trailer before the end");
	while ((s = sbt_next(r, &h)) == SBT_OK)
		CHECK(h->type != SB_REC_TRAILER, "the trailer was handed out as a record");
	tr = sbt_trailer(r);
	REQUIRE(s == SBT_EOF && tr, "no trailer: %s", sbt_error(r));
	CHECK(tr->end_reason == SBT_END_SIGNAL && tr->start_ns == 111 && tr->h.ts == 222 &&
	      tr->drops_total == 333 && tr->h.size == sizeof(*tr), "trailer fields");
	for (t = 0; t < SB_TYPE_MAX; t++)
		CHECK(tr->records[t] == want[t], "trailer counts %" PRIu64 " %s, wrote %" PRIu64,
		      (uint64_t)tr->records[t], sb_type_name(t), want[t]);
	CHECK(sbt_next(r, &h) == SBT_EOF && h == NULL, "EOF does not stick");
	sbt_close(r);
}

static void t_typed_fields(void)
{
	const char *p = tpath("typed.sbt");
	struct sbt_writer *w = sbt_create(p);
	struct sb_switch_out so = { .h = { SB_EV_SWITCH_OUT, sizeof(so), 3, 0, 10, 11, 12345 },
				    .prev_state = 0x402, .state = SB_STATE_DISK,
				    .next_pid = 4412, .next_tid = 4413, .next_comm = "hog" };
	struct sb_gpu g = { .h = { SB_REC_GPU, sizeof(g), 0, SB_GPU_KERNEL, 10, 0, 500 },
			    .end_ns = 900, .bytes = 0, .graph_node_id = 0xfeedface12345678ull,
			    .correlation_id = 77, .device = 1, .stream = 7, .name_id = 5,
			    .grid = { 1, 2, 3 }, .block = { 128, 1, 1 } };
	struct sb_drops d = { .h = { SB_REC_DROPS, sizeof(d) }, .gpu_channel = 9,
			      .wait_overflow = UINT64_MAX };
	struct sbt_reader *r;
	const struct sb_hdr *h;
	char err[512];

	REQUIRE(w, "sbt_create: %s", strerror(errno));
	d.ring[SB_EV_FAULT] = 42;
	CHECK(sbt_write(w, &so) == 0 && sbt_write(w, &g) == 0 && sbt_write(w, &d) == 0, "write");
	REQUIRE(sbt_finish(w, SBT_END_DURATION, 1, 2, 0) == 0, "finish");
	r = sbt_open(p, err, sizeof(err));
	REQUIRE(r, "%s", err);
	REQUIRE(sbt_next(r, &h) == SBT_OK, "%s", sbt_error(r));
	{
		const struct sb_switch_out *e = (const void *)h;

		CHECK(e->h.cpu == 3 && e->h.pid == 10 && e->h.tid == 11 && e->h.ts == 12345 &&
		      e->prev_state == 0x402 && e->state == SB_STATE_DISK && e->next_pid == 4412 &&
		      e->next_tid == 4413 && !strcmp(e->next_comm, "hog"), "switch_out fields");
	}
	REQUIRE(sbt_next(r, &h) == SBT_OK, "%s", sbt_error(r));
	{
		const struct sb_gpu *e = (const void *)h;

		CHECK(e->h.flags == SB_GPU_KERNEL && e->end_ns == 900 &&
		      e->graph_node_id == 0xfeedface12345678ull && e->correlation_id == 77 &&
		      e->stream == 7 && e->name_id == 5 && e->grid[2] == 3 && e->block[0] == 128,
		      "gpu fields");
	}
	REQUIRE(sbt_next(r, &h) == SBT_OK, "%s", sbt_error(r));
	{
		const struct sb_drops *e = (const void *)h;

		CHECK(e->ring[SB_EV_FAULT] == 42 && e->gpu_channel == 9 &&
		      e->wait_overflow == UINT64_MAX, "drops fields");
	}
	CHECK(sbt_next(r, &h) == SBT_EOF, "%s", sbt_error(r));
	sbt_close(r);
}

static void t_text_records(void)
{
	const char *p = tpath("text.sbt");
	struct sbt_writer *w = sbt_create(p);
	static char big[70000];
	static const char odd[] = "a\0b\xff\n\"\\\x01 caf\xc3\xa9";
	static const size_t lens[] = { 0, 1, 7, 8, 9, 15, 16, 17, 65495, 65496, 65497, 70000 };
	struct sbt_reader *r;
	const struct sb_hdr *h;
	char err[512];
	size_t i, want;

	REQUIRE(w, "sbt_create: %s", strerror(errno));
	for (i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 31 + 7);
	for (i = 0; i < ARRAY_SIZE(lens); i++)
		CHECK(sbt_write_text(w, SB_REC_NOTE, i, 100 + i, 1, 2, big, lens[i]) == 0,
		      "write_text len %zu", lens[i]);
	CHECK(sbt_write_text(w, SB_REC_HOST, 0, 0, 0, 0, odd, sizeof(odd) - 1) == 0, "odd");
	CHECK(sbt_write_text(w, SB_EV_SWITCH_OUT, 0, 0, 0, 0, "x", 1) == -EINVAL,
	      "a text record of a non-text type was accepted");
	CHECK(sbt_write_text(w, SB_REC_TRAILER, 0, 0, 0, 0, "x", 1) == -EINVAL,
	      "a text trailer was accepted");
	CHECK(sbt_count(w, SB_REC_NOTE) == ARRAY_SIZE(lens), "note count");
	REQUIRE(sbt_finish(w, SBT_END_DURATION, 0, 0, 0) == 0, "finish");

	r = sbt_open(p, err, sizeof(err));
	REQUIRE(r, "%s", err);
	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		const struct sb_text *t;

		REQUIRE(sbt_next(r, &h) == SBT_OK, "record %zu: %s", i, sbt_error(r));
		t = (const void *)h;
		want = lens[i] > 65496 ? 65496 : lens[i];
		CHECK(h->type == SB_REC_NOTE && t->id == i && h->ts == 100 + i && h->pid == 1 &&
		      h->tid == 2, "note %zu header", i);
		CHECK(t->len == want, "len %zu: read %u, want %zu", lens[i], t->len, want);
		CHECK(h->size == ((32 + want + 7) & ~7ul) && h->size <= SBT_MAX_RECORD,
		      "len %zu: size %u", lens[i], h->size);
		CHECK(!memcmp(t->text, big, want), "len %zu: text differs", lens[i]);
		CHECK(all_of_zero((const char *)t->text + want, h->size - 32 - want),
		      "len %zu: padding not zero", lens[i]);
	}
	REQUIRE(sbt_next(r, &h) == SBT_OK, "%s", sbt_error(r));
	{
		const struct sb_text *t = (const void *)h;

		CHECK(h->type == SB_REC_HOST && t->len == sizeof(odd) - 1 &&
		      !memcmp(t->text, odd, sizeof(odd) - 1), "odd bytes did not survive");
	}
	CHECK(sbt_next(r, &h) == SBT_EOF, "%s", sbt_error(r));
	sbt_close(r);
}

static void t_write_rejects_bad_records(void)
{
	struct sbt_writer *w = sbt_create(tpath("rej.sbt"));
	_Alignas(8) unsigned char b[SBT_MAX_RECORD + 8];
	struct sb_hdr *h = (struct sb_hdr *)b;
	static const struct { uint16_t type, size; } bad[] = {
		{ SB_EV_SWITCH_OUT, 0 }, { SB_EV_SWITCH_OUT, 60 }, { SB_EV_SWITCH_OUT, 48 },
		{ 21, 64 }, { 0, 64 }, { 200, 64 }, { SB_REC_TRAILER, sizeof(struct sb_trailer) },
		{ SB_EV_FAULT, 65535 }, { SB_REC_NOTE, 32 + 16 }, /* len 0 but padded 16 */
	};
	size_t i;

	REQUIRE(w, "sbt_create: %s", strerror(errno));
	memset(b, 0, sizeof(b));
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		h->type = bad[i].type;
		h->size = bad[i].size;
		CHECK(sbt_write(w, h) == -EINVAL, "type %u size %u accepted", bad[i].type,
		      bad[i].size);
		CHECK(sbt_count(w, bad[i].type) == 0, "a rejected record was counted");
	}
	h->type = SB_EV_STEP;
	h->size = sizeof(struct sb_step);
	CHECK(sbt_write(w, h) == 0, "a good record after bad ones was refused");
	sbt_abandon(w);
}

static void t_partial_then_rename(void)
{
	const char *p = tpath("atomic.sbt");
	struct sbt_writer *w;
	const char *part;
	char saved[300];
	struct stat st;
	mode_t um = umask(022);

	umask(um);
	REQUIRE(spit(p, "old", 3), "cannot make the old file");
	w = sbt_create(p);
	REQUIRE(w, "sbt_create: %s", strerror(errno));
	part = sbt_partial_path(w);
	REQUIRE(part, "no partial path");
	snprintf(saved, sizeof(saved), "%s", part);
	CHECK(!strncmp(part, p, strlen(p)) && !strncmp(part + strlen(p), ".partial.", 9) &&
	      strlen(part) == strlen(p) + 15, "partial name %s is not %s.partial.XXXXXX", part, p);
	CHECK(stat(part, &st) == 0 && S_ISREG(st.st_mode), "partial %s missing", part);
	CHECK((st.st_mode & 0777) == (0644 & ~um), "partial mode %o", st.st_mode & 0777);
	CHECK(fsize(p) == 3, "the final name was touched before finish");
	CHECK(put(w, 0) == 0 && sbt_flush(w) == 0, "write");
	CHECK(fsize(part) == 40 + gen(0, &(const char *){ 0 }, &(size_t){ 0 },
				       &(uint32_t){ 0 })->size, "flush did not write");
	REQUIRE(sbt_finish(w, SBT_END_DURATION, 0, 0, 0) == 0, "finish");
	CHECK(!exists(saved), "partial %s still there after finish", saved);
	CHECK(fsize(p) > 40, "final file not in place");

	/* two writers of one path never share a temporary */
	{
		struct sbt_writer *a = sbt_create(p), *b = sbt_create(p);

		REQUIRE(a && b, "second writer");
		CHECK(strcmp(sbt_partial_path(a), sbt_partial_path(b)), "same partial name");
		sbt_abandon(a);
		sbt_abandon(b);
	}
}

static void t_abandon_keeps_partial(void)
{
	const char *p = tpath("abandon.sbt");
	struct sbt_writer *w = sbt_create(p);
	char part[300], err[512], why[256];
	uint64_t n;
	unsigned i;
	enum sbt_status s;

	REQUIRE(w, "sbt_create: %s", strerror(errno));
	snprintf(part, sizeof(part), "%s", sbt_partial_path(w));
	for (i = 0; i < 500; i++)
		REQUIRE(put(w, i) == 0, "write");
	sbt_abandon(w);
	CHECK(!exists(p), "abandon renamed the file");
	s = read_back(part, &n, why, sizeof(why), err, sizeof(err));
	CHECK(s == SBT_TRUNCATED, "status %s: %s", status_name(s), err);
	CHECK(n == 500, "read %" PRIu64 " of 500", n);
	CHECK(!why[0], "%s", why);
	CHECK(strstr(err, "cut short after 500 records at offset") && strstr(err, "no trailer"),
	      "message: %s", err);
}

static void ro_child(void *arg)
{
	char p[300];
	struct sbt_writer *w;

	if (geteuid() == 0 && (setgid(65534) || setuid(65534))) {
		dprintf(3, "cannot become nobody: %s", strerror(errno));
		_exit(77);
	}
	snprintf(p, sizeof(p), "%s/x.sbt", (const char *)arg);
	errno = 0;
	w = sbt_create(p);
	if (w || errno != EACCES) {
		dprintf(3, "read-only dir: %p, errno %d", (void *)w, errno);
		_exit(1);
	}
	_exit(0);
}

static void t_create_fails_cleanly(void)
{
	char sub[300];
	struct sbt_writer *w;

	errno = 0;
	w = sbt_create(tpath("no/such/dir/x.sbt"));
	CHECK(!w && errno == ENOENT, "nonexistent dir: %p errno %d", (void *)w, errno);
	if (w)
		sbt_abandon(w);
	w = sbt_create("");
	CHECK(!w && errno == EINVAL, "empty path");
	snprintf(sub, sizeof(sub), "%s", tpath("ro"));
	REQUIRE(mkdir(sub, 0555) == 0, "mkdir");
	/* root writes anywhere: try as nobody */
	run_child(ro_child, sub);
}

static void t_truncated_at_every_byte(void)
{
	const char *p = tpath("full.sbt"), *q = tpath("cut.sbt");
	const unsigned n = 40;
	unsigned char *b;
	size_t len, cut, off = 40;
	size_t ends[64];
	unsigned i, whole;
	uint64_t got;
	char err[512], why[256];
	enum sbt_status s;

	REQUIRE(write_file(p, n), "write_file");
	b = slurp(p, &len);
	REQUIRE(b, "slurp");
	for (i = 0; i < n; i++) {
		const char *text;
		size_t tlen;
		uint32_t id;

		off += gen(i, &text, &tlen, &id)->size;
		ends[i] = off;
	}
	REQUIRE(off + sizeof(struct sb_trailer) == len, "file size %zu, expected %zu", len,
		off + sizeof(struct sb_trailer));
	/* every cut from inside the file header to one byte before the end */
	for (cut = 0; cut < len; cut++) {
		if (cut > 41 && cut < ends[n - 6])
			continue;
		REQUIRE(spit(q, b, cut), "spit");
		s = read_back(q, &got, why, sizeof(why), err, sizeof(err));
		if (cut < 40) {
			CHECK(s == SBT_IO && err[0], "cut %zu inside the header: %s", cut,
			      status_name(s));
			continue;
		}
		for (whole = 0; whole < n && ends[whole] <= cut; whole++)
			;
		CHECK(s == SBT_TRUNCATED, "cut at %zu: status %s (%s)", cut, status_name(s), err);
		CHECK(got == whole, "cut at %zu: %" PRIu64 " records, %u whole", cut, got, whole);
		CHECK(!why[0], "cut at %zu: %s", cut, why);
		CHECK(strstr(err, "cut short after") && strstr(err, "offset"),
		      "cut at %zu: message %s", cut, err);
		if (test_failed_now)
			break;
	}
	free(b);
}

static void t_zero_filled_tail(void)
{
	const char *p = tpath("z.sbt"), *q = tpath("z2.sbt");
	static unsigned char zeros[3 << 20];
	unsigned char *b;
	size_t len, keep;
	uint64_t got;
	char err[512], why[256];
	enum sbt_status s;

	REQUIRE(write_file(p, 30), "write_file");
	b = slurp(p, &len);
	REQUIRE(b, "slurp");
	keep = len - sizeof(struct sb_trailer);
	/* a crash leaves zero blocks past the last record: still just cut short */
	REQUIRE(spit(q, b, keep), "spit");
	{
		int fd = open(q, O_WRONLY | O_APPEND);

		REQUIRE(fd >= 0 && write(fd, zeros, sizeof(zeros)) == sizeof(zeros), "append");
		close(fd);
	}
	s = read_back(q, &got, why, sizeof(why), err, sizeof(err));
	CHECK(s == SBT_TRUNCATED && got == 30 && !why[0], "zero tail: %s, %" PRIu64 " records: %s",
	      status_name(s), got, err);
	/* but zeros followed by data are corruption */
	{
		int fd = open(q, O_WRONLY | O_APPEND);

		REQUIRE(fd >= 0 && write(fd, "x", 1) == 1, "append");
		close(fd);
	}
	s = read_back(q, &got, why, sizeof(why), err, sizeof(err));
	CHECK(s == SBT_CORRUPT && got == 30, "zeros then data: %s, %" PRIu64 " records: %s",
	      status_name(s), got, err);
	free(b);
}

/* patch a finished file and read it: status, records before, message */
struct corrupt_case {
	const char *name;
	unsigned rec;       /* patch this record's header... */
	int field;          /* 0 type, 1 size, 2 text len, 3 append, 4 trailer count */
	uint32_t value;
	enum sbt_status want;
	const char *msg;
};

static void t_corrupt_records(void)
{
	static const struct corrupt_case cases[] = {
		{ "size 0", 3, 1, 0, SBT_CORRUPT, "has size 0" },
		{ "size not multiple of 8", 3, 1, 60, SBT_CORRUPT, "not a multiple of 8" },
		{ "size over max", 3, 1, 65535, SBT_CORRUPT, "exceeds the maximum" },
		{ "size under struct", 0, 1, 48, SBT_CORRUPT, "smaller than its 56-byte struct" },
		{ "unknown type < max", 5, 0, 22, SBT_CORRUPT, "unknown record type 22" },
		{ "unknown type 0", 5, 0, 0, SBT_CORRUPT, "unknown record type 0" },
		{ "type >= max", 5, 0, 64, SBT_CORRUPT, "unknown record type 64" },
		{ "text len too big", 14, 2, 9999, SBT_CORRUPT, "text length 9999" },
		{ "data after trailer", 99, 3, 0, SBT_CORRUPT, "after the trailer" },
		{ "trailer count", 99, 4, 99, SBT_CORRUPT, "counts 99" },
		/* a record size running past the end is a cut, not corruption */
		{ "size past end", 11, 1, 65528, SBT_TRUNCATED, "cut short after 11 records" },
	};
	const char *p = tpath("good.sbt"), *q = tpath("bad.sbt");
	const unsigned n = 16;
	unsigned char *b, *c;
	size_t len, offs[20], off = 40, i;
	uint64_t got;
	char err[512], why[256], want_off[64];
	enum sbt_status s;

	REQUIRE(write_file(p, n), "write_file");
	b = slurp(p, &len);
	REQUIRE(b, "slurp");
	c = malloc(len + 8);
	for (i = 0; i <= n; i++) {
		const char *text;
		size_t tlen;
		uint32_t id;

		offs[i] = off;
		if (i < n)
			off += gen(i, &text, &tlen, &id)->size;
	}
	REQUIRE(gen(14, &(const char *){ 0 }, &(size_t){ 0 }, &(uint32_t){ 0 })->type ==
		SB_REC_HOST, "record 14 is not a text record");
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct corrupt_case *k = &cases[i];
		unsigned rec = k->rec == 99 ? n : k->rec; /* 99: the trailer */
		struct sb_hdr *h = (struct sb_hdr *)(c + offs[rec]);
		size_t clen = len, at = offs[rec];

		memcpy(c, b, len);
		switch (k->field) {
		case 0: h->type = k->value; break;
		case 1: h->size = k->value; break;
		case 2: ((struct sb_text *)h)->len = k->value; break;
		case 3: memset(c + len, 0x55, 8); clen += 8; at = len; break;
		case 4: ((struct sb_trailer *)h)->records[SB_EV_FAULT] = k->value; break;
		}
		REQUIRE(spit(q, c, clen), "spit");
		s = read_back(q, &got, why, sizeof(why), err, sizeof(err));
		snprintf(want_off, sizeof(want_off), "offset %zu", at);
		CHECK(s == k->want, "%s: status %s, want %s (%s)", k->name, status_name(s),
		      status_name(k->want), err);
		CHECK(got == (k->rec == 99 ? n : k->rec), "%s: %" PRIu64 " records before", k->name,
		      got);
		CHECK(!why[0], "%s: %s", k->name, why);
		CHECK(strstr(err, k->msg), "%s: message '%s' lacks '%s'", k->name, err, k->msg);
		CHECK(strstr(err, want_off), "%s: message '%s' lacks '%s'", k->name, err, want_off);
		CHECK(!strchr(err, '\n'), "%s: message is not one line", k->name);
	}
	free(b);
	free(c);
}

static void t_bad_file_headers(void)
{
	const char *p = tpath("hgood.sbt"), *q = tpath("hbad.sbt");
	struct sbt_file_hdr *fh;
	unsigned char *b;
	size_t len;
	char err[512];
	struct sbt_reader *r;
	static const struct { const char *name; int field; uint32_t v; const char *msg; } cases[] = {
		{ "magic", 0, 0, "hbad.sbt is not a stepblame trace" },
		{ "version", 1, 2, "hbad.sbt is trace version 2; this stepblame reads version 1" },
		{ "swapped", 2, 0x04030201u, "hbad.sbt was written on a host of the other byte order" },
		{ "endian junk", 2, 0xdeadbeefu, "is not a stepblame trace" },
		{ "hdr_size small", 3, 16, "bad file header size 16" },
		{ "hdr_size odd", 3, 44, "bad file header size 44" },
		{ "hdr_size huge", 3, 1u << 30, "bad file header size" },
		{ "clock", 4, 0, "uses clock 0" },
	};
	size_t i;

	REQUIRE(write_file(p, 3), "write_file");
	b = slurp(p, &len);
	REQUIRE(b, "slurp");
	fh = (struct sbt_file_hdr *)b;
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		struct sbt_file_hdr save = *fh;

		switch (cases[i].field) {
		case 0: fh->magic[1] = 'X'; break;
		case 1: fh->version = cases[i].v; break;
		case 2: fh->endian = cases[i].v; break;
		case 3: fh->hdr_size = cases[i].v; break;
		case 4: fh->clock = cases[i].v; break;
		}
		REQUIRE(spit(q, b, len), "spit");
		*fh = save;
		r = sbt_open(q, err, sizeof(err));
		CHECK(!r, "%s: opened", cases[i].name);
		if (r)
			sbt_close(r);
		CHECK(strstr(err, cases[i].msg), "%s: '%s' lacks '%s'", cases[i].name, err,
		      cases[i].msg);
	}
	r = sbt_open(tpath("does-not-exist.sbt"), err, sizeof(err));
	CHECK(!r && strstr(err, "cannot open ") && strstr(err, "No such file or directory"),
	      "missing file: %s", err);
	r = sbt_open(dir, err, sizeof(err));
	CHECK(!r && strstr(err, "cannot open ") && strstr(err, "directory"), "dir: %s", err);
	REQUIRE(spit(q, "", 0), "spit");
	r = sbt_open(q, err, sizeof(err));
	CHECK(!r && strstr(err, "not a stepblame trace"), "empty file: %s", err);
	REQUIRE(spit(q, "#!/bin/sh\necho hi\n", 18), "spit");
	r = sbt_open(q, err, sizeof(err));
	CHECK(!r && strstr(err, "not a stepblame trace"), "script: %s", err);

	/* a longer header from a later revision is skipped, records still aligned */
	{
		unsigned char *c = malloc(len + 16);
		uint64_t got;
		char why[256];
		enum sbt_status s;

		memcpy(c, b, 40);
		memset(c + 40, 0xee, 16);
		memcpy(c + 56, b + 40, len - 40);
		((struct sbt_file_hdr *)c)->hdr_size = 56;
		REQUIRE(spit(q, c, len + 16), "spit");
		s = read_back(q, &got, why, sizeof(why), err, sizeof(err));
		CHECK(s == SBT_EOF && got == 3 && !why[0], "hdr_size 56: %s %" PRIu64 " %s %s",
		      status_name(s), got, err, why);
		free(c);
	}
	free(b);
}

static void t_check_record(void)
{
	_Alignas(8) unsigned char b[128] = { 0 };
	struct sb_hdr *h = (struct sb_hdr *)b;

	h->type = SB_EV_STEP;
	h->size = sizeof(struct sb_step);
	CHECK(sbt_check_record(h, 40) == NULL, "good step rejected: %s", sbt_check_record(h, 40));
	CHECK(sbt_check_record(h, 39) != NULL, "step past the end accepted");
	CHECK(sbt_check_record(h, 10) != NULL, "half a header accepted");
	h->type = SB_REC_STRING;
	h->size = 40;
	((struct sb_text *)h)->len = 8;
	CHECK(sbt_check_record(h, 40) == NULL, "text len 8 in 40 rejected");
	((struct sb_text *)h)->len = 1;
	CHECK(sbt_check_record(h, 40) == NULL, "text len 1 in 40 rejected");
	h->size = 48;
	CHECK(sbt_check_record(h, 48) != NULL, "text len 1 padded to 48 accepted");
	CHECK(!strcmp(sb_type_name(SB_EV_SWITCH_OUT), "switch_out") &&
	      !strcmp(sb_type_name(SB_REC_TRAILER), "trailer") &&
	      !strcmp(sb_type_name(22), "unknown") &&
	      !strcmp(sb_state_name(SB_STATE_RUNNABLE), "runnable") &&
	      !strcmp(sb_alloc_fn_name(SB_FN_POSIX_MEMALIGN), "posix_memalign") &&
	      !strcmp(sb_mmsys_name(SB_SYS_MADVISE), "madvise") &&
	      !strcmp(sb_mmsys_name(0), "unknown"), "names");
}

/*
 * Fill a file system until a write fails, in a child (rlimits and mounts stay
 * there). The child exits 0 (pass), 77 (skip) or 1 and says why on fd 3.
 */
static void disk_full_child(const char *path, int want_err, bool finish)
{
	struct sbt_writer *w = create(path);
	char part[300], err[512], why[256];
	unsigned i, ok = 0;
	uint64_t got;
	long sz;
	int rc = 0;
	enum sbt_status s;

	if (!w) {
		dprintf(3, "sbt_create: %s", strerror(errno));
		_exit(1);
	}
	snprintf(part, sizeof(part), "%s", sbt_partial_path(w));
	for (i = 0; i < 200000; i++) {
		rc = put(w, i);
		if (rc)
			break;
		ok++;
	}
	if (rc != -want_err) {
		dprintf(3, "writing stopped with %d (%s) after %u records, want -%s", rc,
			strerror(-rc), ok, strerrorname_np(want_err));
		_exit(1);
	}
	if (finish) {
		rc = sbt_finish(w, SBT_END_ERROR, 0, 0, 0);
		if (rc == 0 || exists(path) || !exists(part)) {
			dprintf(3, "finish on a full disk: %d, final %d, partial %d", rc,
				exists(path), exists(part));
			_exit(1);
		}
	} else {
		sbt_abandon(w);
	}
	s = read_back(part, &got, why, sizeof(why), err, sizeof(err));
	sz = fsize(part);
	if (s != SBT_TRUNCATED || why[0] || !got || got > ok || !strstr(err, "(no trailer)") ||
	    strstr(err, "bytes of")) {
		dprintf(3, "after the failure: %s, %" PRIu64 " of %u records, %s %s (size %ld)",
			status_name(s), got, ok, err, why, sz);
		_exit(1);
	}
	_exit(0);
}

static void run_child(void (*fn)(void *), void *arg)
{
	int pfd[2], st;
	char msg[400] = "";
	ssize_t n;
	pid_t pid;

	REQUIRE(pipe(pfd) == 0, "pipe");
	fflush(stdout);
	pid = fork();
	REQUIRE(pid >= 0, "fork");
	if (pid == 0) {
		close(pfd[0]);
		dup2(pfd[1], 3);
		fn(arg);
		_exit(1);
	}
	close(pfd[1]);
	n = read(pfd[0], msg, sizeof(msg) - 1);
	msg[n > 0 ? n : 0] = 0;
	close(pfd[0]);
	REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
		SKIP("%s", msg);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status 0x%x: %s", st, msg);
}

static void efbig_child(void *arg)
{
	struct rlimit rl = { 300003, 300003 }; /* not on a record boundary */

	signal(SIGXFSZ, SIG_IGN);
	if (setrlimit(RLIMIT_FSIZE, &rl)) {
		dprintf(3, "setrlimit: %s", strerror(errno));
		_exit(77);
	}
	disk_full_child(arg, EFBIG, false);
}

static void t_file_size_limit(void)
{
	run_child(efbig_child, tpath("efbig.sbt"));
}

static void enospc_child(void *arg)
{
	const char *mnt = arg;

	if (unshare(CLONE_NEWNS)) {
		dprintf(3, "unshare(CLONE_NEWNS): %s (needs root)", strerror(errno));
		_exit(77);
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("tmpfs", mnt, "tmpfs", 0, "size=64k")) {
		dprintf(3, "mount tmpfs: %s", strerror(errno));
		_exit(77);
	}
	disk_full_child(tpath("tiny/full.sbt"), ENOSPC, true);
}

static void t_disk_full(void)
{
	const char *mnt = tpath("tiny");

	REQUIRE(mkdir(mnt, 0755) == 0, "mkdir");
	run_child(enospc_child, (void *)mnt);
}

/* ---- zstd-compressed traces ---- */

/* a zstd frame starts at p (not a skippable one) */
static bool zframe_at(const unsigned char *p, size_t n)
{
	return n >= 4 && p[0] == 0x28 && p[1] == 0xb5 && p[2] == 0x2f && p[3] == 0xfd;
}

/*
 * The frames of a compressed file: their end offsets in the file and how many
 * records (after the file header) the frames up to each hold. Returns the
 * number of frames; all of b must be whole frames.
 */
static size_t zframes(const unsigned char *b, size_t len, size_t *ends, uint64_t *recs,
		      size_t max)
{
	size_t at = 0, n = 0, dlen = 0, cap = 1 << 22;
	unsigned char *d = malloc(cap);
	uint64_t nrec = 0;
	size_t roff = 40;

	while (at < len && n < max) {
		size_t fsz = ZSTD_findFrameCompressedSize(b + at, len - at);
		size_t got;

		if (ZSTD_isError(fsz))
			break;
		got = ZSTD_decompress(d + dlen, cap - dlen, b + at, fsz);
		if (ZSTD_isError(got))
			break;
		dlen += got;
		while (roff + sizeof(struct sb_hdr) <= dlen &&
		       roff + ((struct sb_hdr *)(d + roff))->size <= dlen) {
			roff += ((struct sb_hdr *)(d + roff))->size;
			nrec++;
		}
		at += fsz;
		ends[n] = at;
		recs[n++] = nrec;
	}
	free(d);
	return at == len ? n : 0;
}

static void t_zstd_roundtrip(void)
{
	const char *p = tpath("rt.sbt"), *pz = tpath("rt.sbt.zst");
	/* several MiB: a frame per MiB of records */
	const unsigned n = 60000;
	unsigned char *a, *b, *d;
	size_t alen, blen, dlen = 0, at = 0, ends[64];
	uint64_t got, recs[64];
	char err[512], why[256];
	struct sbt_reader *r;
	enum sbt_status s;
	size_t nf;

	wlevel = 0;
	REQUIRE(write_file(p, n), "write_file plain");
	wlevel = SBT_ZSTD_LEVEL;
	REQUIRE(write_file(pz, n), "write_file zstd");
	wlevel = 0;
	s = read_back(pz, &got, why, sizeof(why), err, sizeof(err));
	CHECK(s == SBT_EOF && got == n && !why[0], "read back: %s, %" PRIu64 " of %u: %s %s",
	      status_name(s), got, n, err, why);
	r = sbt_open(pz, err, sizeof(err));
	REQUIRE(r, "%s", err);
	CHECK(sbt_is_zstd(r), "not seen as compressed");
	sbt_close(r);
	r = sbt_open(p, err, sizeof(err));
	REQUIRE(r, "%s", err);
	CHECK(!sbt_is_zstd(r), "a plain trace seen as compressed");
	sbt_close(r);

	a = slurp(p, &alen);
	b = slurp(pz, &blen);
	REQUIRE(a && b, "slurp");
	CHECK(zframe_at(b, blen), "the file does not start with a zstd frame");
	CHECK(blen * 3 < alen, "compressed %zu bytes, plain %zu", blen, alen);
	/* one frame for the header, then one per MiB of records written out */
	nf = zframes(b, blen, ends, recs, ARRAY_SIZE(ends));
	CHECK(nf >= 1 + alen / (1 << 20) && nf <= 2 + alen / (1 << 20) + 1,
	      "%zu frames for %zu bytes", nf, alen);
	CHECK(nf && ends[0] < 100 && recs[0] == 0, "the first frame is not the file header alone");
	/* decompressed, it is the plain trace (but the header's creation times) */
	d = malloc(alen + 1);
	while (at < blen && dlen <= alen) {
		size_t fsz = ZSTD_findFrameCompressedSize(b + at, blen - at);
		size_t k = ZSTD_isError(fsz) ? fsz : ZSTD_decompress(d + dlen, alen + 1 - dlen,
								     b + at, fsz);

		REQUIRE(!ZSTD_isError(k), "frame at %zu: %s", at, ZSTD_getErrorName(k));
		REQUIRE(ZSTD_getFrameContentSize(b + at, blen - at) == k,
			"frame at %zu does not state its size", at);
		dlen += k;
		at += fsz;
	}
	CHECK(dlen == alen && !memcmp(a, d, 24) && !memcmp(a + 40, d + 40, alen - 40),
	      "decompressed: %zu bytes, differs from the plain file (%zu bytes)", dlen, alen);
	free(d);
	free(a);
	free(b);

	r = NULL;
	CHECK(!sbt_create_as(tpath("lvl.sbt"), NULL, SBT_ZSTD_LEVEL_MAX + 1, err, sizeof(err)) &&
	      errno == EINVAL && strstr(err, "level"), "level %d accepted", SBT_ZSTD_LEVEL_MAX + 1);
}

/* cut short anywhere: read up to the last whole frame at least, never corrupt */
static void t_zstd_cut_short(void)
{
	const char *p = tpath("cz.sbt.zst"), *q = tpath("cz-cut.sbt.zst");
	const unsigned n = 60000;
	unsigned char *b;
	size_t len, ends[64], cuts[600], ncut = 0, nf, i, f;
	uint64_t recs[64], got;
	char err[512], why[256];
	enum sbt_status s;

	wlevel = SBT_ZSTD_LEVEL;
	REQUIRE(write_file(p, n), "write_file");
	wlevel = 0;
	b = slurp(p, &len);
	REQUIRE(b, "slurp");
	nf = zframes(b, len, ends, recs, ARRAY_SIZE(ends));
	REQUIRE(nf >= 4, "%zu frames", nf);
	/* every frame's end and the bytes around it, the first frame byte by byte, and spread cuts */
	for (i = 0; i < ends[0] + 2; i++)
		cuts[ncut++] = i;
	for (f = 1; f < nf; f++)
		for (int d = -2; d <= 2; d++)
			cuts[ncut++] = ends[f] + d;
	for (i = 0; i < 300; i++)
		cuts[ncut++] = ends[0] + (i * 2654435761u) % (len - ends[0]);
	for (i = 0; i < ncut; i++) {
		size_t cut = cuts[i];
		uint64_t whole = 0;

		if (cut >= len)
			continue;
		REQUIRE(spit(q, b, cut), "spit");
		s = read_back(q, &got, why, sizeof(why), err, sizeof(err));
		if (cut < ends[0]) {
			/* the header is read once its block is whole (the checksum after it cut) */
			CHECK((s == SBT_IO && (cut == 0 ? strstr(err, "empty") :
					       cut < 4 ? strstr(err, "not a stepblame trace") :
					       strstr(err, "cut short inside its file header"))) ||
			      (s == SBT_TRUNCATED && got == 0 && cut + 4 >= ends[0] &&
			       strstr(err, "ends inside a zstd frame")),
			      "cut %zu inside the header's frame: %s: %s", cut, status_name(s), err);
			continue;
		}
		for (f = 0; f < nf && ends[f] <= cut; f++)
			whole = recs[f];
		CHECK(s == SBT_TRUNCATED, "cut at %zu: status %s (%s)", cut, status_name(s), err);
		CHECK(got >= whole && got <= n, "cut at %zu: %" PRIu64 " records, %" PRIu64
		      " in whole frames", cut, got, whole);
		CHECK(!why[0], "cut at %zu: %s", cut, why);
		CHECK(strstr(err, "cut short after") &&
		      (!!strstr(err, "ends inside a zstd frame") == (f == nf || ends[f - 1] != cut)),
		      "cut at %zu: message %s", cut, err);
		if (test_failed_now)
			break;
	}
	free(b);
}

/* zeros after the last whole frame: cut short; anything after them, or after the end: corrupt */
static void t_zstd_damage(void)
{
	const char *p = tpath("dz.sbt.zst"), *q = tpath("dz2.sbt.zst");
	static unsigned char zeros[1 << 20];
	const unsigned n = 30000;
	unsigned char *b;
	size_t len, ends[64], nf;
	uint64_t recs[64], got;
	char err[512], why[256];
	enum sbt_status s;
	int fd;

	wlevel = SBT_ZSTD_LEVEL;
	REQUIRE(write_file(p, n), "write_file");
	wlevel = 0;
	b = slurp(p, &len);
	REQUIRE(b, "slurp");
	nf = zframes(b, len, ends, recs, ARRAY_SIZE(ends));
	REQUIRE(nf >= 3, "%zu frames", nf);

	REQUIRE(spit(q, b, ends[1]), "spit");
	fd = open(q, O_WRONLY | O_APPEND);
	REQUIRE(fd >= 0 && write(fd, zeros, sizeof(zeros)) == sizeof(zeros), "append");
	close(fd);
	s = read_back(q, &got, why, sizeof(why), err, sizeof(err));
	CHECK(s == SBT_TRUNCATED && got == recs[1] && !why[0] && strstr(err, "zero-filled tail"),
	      "zero tail: %s, %" PRIu64 " of %" PRIu64 " records: %s", status_name(s), got,
	      recs[1], err);
	fd = open(q, O_WRONLY | O_APPEND);
	REQUIRE(fd >= 0 && write(fd, "x", 1) == 1, "append");
	close(fd);
	s = read_back(q, &got, why, sizeof(why), err, sizeof(err));
	CHECK(s == SBT_CORRUPT && got == recs[1] && strstr(err, "corrupt zstd data"),
	      "zeros then data: %s, %" PRIu64 " records: %s", status_name(s), got, err);

	/* bytes after the last frame */
	REQUIRE(spit(q, b, len), "spit");
	fd = open(q, O_WRONLY | O_APPEND);
	REQUIRE(fd >= 0 && write(fd, "garbage!", 8) == 8, "append");
	close(fd);
	s = read_back(q, &got, why, sizeof(why), err, sizeof(err));
	CHECK(s == SBT_CORRUPT && got == n && strstr(err, "corrupt zstd data"),
	      "garbage after the end: %s, %" PRIu64 " records: %s", status_name(s), got, err);

	/* a byte changed inside the second frame of records: caught there at the latest */
	b[ends[1] + (ends[2] - ends[1]) / 2] ^= 0x5a;
	REQUIRE(spit(q, b, len), "spit");
	s = read_back(q, &got, why, sizeof(why), err, sizeof(err));
	CHECK(s == SBT_CORRUPT && got >= recs[1] && got <= recs[2] &&
	      strstr(err, "corrupt zstd data"), "a changed byte: %s, %" PRIu64 " records (%"
	      PRIu64 "..%" PRIu64 "): %s", status_name(s), got, recs[1], recs[2], err);
	free(b);
}

/* a frame that asks for more memory than a reader gives is refused, with the reason */
static void t_zstd_window_limit(void)
{
	const char *p = tpath("plain.sbt"), *q = tpath("win.sbt.zst");
	ZSTD_CCtx *c = ZSTD_createCCtx();
	unsigned char *a, *z;
	size_t alen, zcap, k;
	ZSTD_inBuffer in;
	ZSTD_outBuffer out;
	char err[512];
	struct sbt_reader *r;

	wlevel = 0;
	REQUIRE(write_file(p, 2000), "write_file");
	a = slurp(p, &alen);
	REQUIRE(a && c, "slurp");
	zcap = ZSTD_compressBound(alen);
	z = malloc(zcap);
	/* streamed with no size given: the frame keeps its 128 MiB window (zstd --long) */
	ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, 27);
	ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0);
	in = (ZSTD_inBuffer){ a, alen, 0 };
	out = (ZSTD_outBuffer){ z, zcap, 0 };
	/* fed in two calls, as a stream: one call would tell it the size, and shrink the window */
	k = ZSTD_compressStream2(c, &out, &in, ZSTD_e_continue);
	REQUIRE(!ZSTD_isError(k), "compress: %s", ZSTD_getErrorName(k));
	k = ZSTD_compressStream2(c, &out, &in, ZSTD_e_end);
	REQUIRE(k == 0, "compress: %s", ZSTD_isError(k) ? ZSTD_getErrorName(k) : "not flushed");
	REQUIRE(ZSTD_getFrameContentSize(z, out.pos) == ZSTD_CONTENTSIZE_UNKNOWN, "size stated");
	REQUIRE(spit(q, z, out.pos), "spit");
	r = sbt_open(q, err, sizeof(err));
	CHECK(!r && strstr(err, "corrupt zstd data") && strstr(err, "8 MiB"),
	      "a 128 MiB window: %s", r ? "opened" : err);
	sbt_close(r);
	/* the same with a window of 8 MiB reads */
	ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, SBT_ZSTD_WINDOW_LOG_MAX);
	ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0);
	in = (ZSTD_inBuffer){ a, alen, 0 };
	out = (ZSTD_outBuffer){ z, zcap, 0 };
	k = ZSTD_compressStream2(c, &out, &in, ZSTD_e_end);
	REQUIRE(k == 0 && spit(q, z, out.pos), "compress");
	{
		uint64_t got;
		char why[256];
		enum sbt_status s = read_back(q, &got, why, sizeof(why), err, sizeof(err));

		CHECK(s == SBT_EOF && got == 2000 && !why[0], "an 8 MiB window: %s, %" PRIu64
		      " records: %s %s", status_name(s), got, err, why);
	}
	ZSTD_freeCCtx(c);
	free(a);
	free(z);
}

static void efbig_zstd_child(void *arg)
{
	/* the file holds a few frames before the limit */
	struct rlimit rl = { 2000003, 2000003 };

	signal(SIGXFSZ, SIG_IGN);
	if (setrlimit(RLIMIT_FSIZE, &rl)) {
		dprintf(3, "setrlimit: %s", strerror(errno));
		_exit(77);
	}
	wlevel = SBT_ZSTD_LEVEL;
	disk_full_child(arg, EFBIG, false);
}

/* a failed write leaves whole frames only: read to a record boundary */
static void t_zstd_file_size_limit(void)
{
	run_child(efbig_zstd_child, tpath("efbig.sbt.zst"));
}

/* ---- dump ---- */

struct dump_args {
	char *argv[8];
	int argc;
	const char *out, *err;
};

static void dump_child(void *arg)
{
	struct dump_args *a = arg;
	int o = open(a->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int e = open(a->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	dup2(o, 1);
	dup2(e, 2);
	o = cmd_dump(a->argc, a->argv);
	fflush(stdout);
	_exit(o);
}

/* cmd_dump in a child; its exit status, stdout and stderr in files */
static int dump(const char *out, const char *err, ...)
{
	struct dump_args a = { .argv = { "dump" }, .argc = 1, .out = out, .err = err };
	va_list ap;
	char *s;
	int st;
	pid_t pid;

	va_start(ap, err);
	while ((s = va_arg(ap, char *)) && a.argc < 7)
		a.argv[a.argc++] = s;
	va_end(ap);
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		dump_child(&a);
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static bool contains_line(const char *file, const char *line)
{
	size_t len;
	unsigned char *b = slurp(file, &len);
	char *p, *s;
	bool found = false;

	if (!b)
		return false;
	b[len] = 0;
	for (p = (char *)b; p && *p && !found; p = s ? s + 1 : NULL) {
		s = strchr(p, '\n');
		if (s)
			*s = 0;
		found = !strcmp(p, line);
	}
	free(b);
	return found;
}

static bool contains(const char *file, const char *what)
{
	size_t len;
	unsigned char *b = slurp(file, &len);
	bool found;

	if (!b)
		return false;
	b[len] = 0;
	found = strstr((char *)b, what) != NULL;
	free(b);
	return found;
}

#define BASE 1000000000000ull

/* a small capture with known values; created_mono_ns set to BASE */
static bool write_dump_file(const char *p)
{
	struct sbt_writer *w = sbt_create(p);
	struct sb_switch_out so = { .h = { SB_EV_SWITCH_OUT, sizeof(so), 1, 0, 1234, 1240,
					   BASE + 12345678901ull },
				    .state = SB_STATE_RUNNABLE, .next_pid = 4412, .next_tid = 4412,
				    .next_comm = "hog" };
	struct sb_switch_in si = { .h = { SB_EV_SWITCH_IN, sizeof(si), 2, 0, 1234, 1240,
					  BASE + 12400000000ull },
				   .wait_ns = 54321, .prev_pid = 7, .prev_tid = 8,
				   .prev_comm = "we\"ird \x01\xff\xc2\x9b", .wait_reason = SB_WAIT_PREEMPTED };
	struct sb_fault f = { .h = { SB_EV_FAULT, sizeof(f), 0, SB_FAULT_MAJOR, 1234, 1241,
				     BASE + 13000000000ull },
			      .addr = 0x7fffdeadb000ull, .ip = 0x401000, .error_code = 6,
			      .maj_flt = 3, .min_flt = 99 };
	struct sb_mmsys m = { .h = { SB_EV_MMSYS, sizeof(m), 0, 0, 1234, 1241, BASE + 13000005000ull },
			      .start_ns = BASE + 13000001000ull, .addr = 0, .len = 1 << 20,
			      .ret = -12, .call = SB_SYS_MMAP, .arg = 3 };
	struct sb_gpu g = { .h = { SB_REC_GPU, sizeof(g), 0, SB_GPU_KERNEL, 1234, 0,
				   BASE + 14000000000ull },
			    .end_ns = BASE + 14000002500ull, .correlation_id = 17, .stream = 7,
			    .name_id = 5, .grid = { 64, 1, 1 }, .block = { 256, 1, 1 } };
	static const char kname[] = "void gemm<float>(float*, int) \"q\"";
	static const char host[] = "kernel=6.8.0\nhostname=box\nnr_cpus=8\n";
	int fd;
	uint64_t base = BASE;
	bool ok;

	if (!w)
		return false;
	ok = !sbt_write_text(w, SB_REC_HOST, 0, BASE, 0, 0, host, strlen(host)) &&
	     !sbt_write_text(w, SB_REC_STRING, 5, BASE, 1234, 0, kname, strlen(kname)) &&
	     !sbt_write(w, &so) && !sbt_write(w, &si) && !sbt_write(w, &f) && !sbt_write(w, &m) &&
	     !sbt_write(w, &g);
	if (!ok || sbt_finish(w, SBT_END_DURATION, BASE, BASE + 20000000000ull, 0))
		return false;
	fd = open(p, O_WRONLY);
	ok = fd >= 0 && pwrite(fd, &base, 8, offsetof(struct sbt_file_hdr, created_mono_ns)) == 8;
	close(fd);
	return ok;
}

static void t_dump_text(void)
{
	const char *p = tpath("dump.sbt"), *out = tpath("dump.out"), *err = tpath("dump.err");
	int rc;

	REQUIRE(write_dump_file(p), "write_dump_file");
	rc = dump(out, err, p, NULL);
	CHECK(rc == 0, "exit %d", rc);
	CHECK(contains_line(out, "     12.345678901 cpu1 1234/1240 switch_out state=runnable "
			    "prev_state=0x0 next=hog[4412/4412]"), "switch_out line");
	CHECK(contains_line(out, "     12.400000000 cpu2 1234/1240 switch_in wait_ns=54321 "
			    "wait_reason=preempted prev=we\\x22ird\\x20\\x01\\xff\\xc2\\x9b[7/8]"),
	      "switch_in line");
	CHECK(contains_line(out, "     13.000000000 cpu0 1234/1241 fault addr=0x7fffdeadb000 "
			    "ip=0x401000 error_code=0x6 maj_flt=3 min_flt=99 kind=major"),
	      "fault line");
	CHECK(contains_line(out, "     13.000005000 cpu0 1234/1241 mmsys call=mmap addr=0x0 "
			    "len=1048576 ret=-12 arg=0x3 dur_ns=4000"), "mmsys line");
	CHECK(contains(out, " gpu kind=kernel dur_ns=2500 correlation_id=17 device=0 "
		       "stream=7 name_id=5 name=\"void gemm<float>(float*, int) \\\"q\\\"\" "
		       "grid=64x1x1 block=256x1x1"), "gpu line");
	CHECK(contains(out, " host text=\"kernel=6.8.0\\nhostname=box\\nnr_cpus=8\\n\""),
	      "host line");
	CHECK(contains(out, "trailer end_reason=duration dur_ns=20000000000 drops_total=0 "
		       "records=7 switch_out=1 switch_in=1 fault=1 mmsys=1 host=1 gpu=1 string=1"),
	      "trailer line");
	CHECK(fsize(err) == 0, "stderr not empty on a complete file");

	rc = dump(out, err, "--abs", p, NULL);
	CHECK(rc == 0 && contains(out, "    1012345678901 cpu1 1234/1240 switch_out"),
	      "--abs: exit %d", rc);
	rc = dump(out, err, p, "--limit", "2", NULL);
	CHECK(rc == 0 && !contains(out, "switch_out") && contains(out, " string id=5"),
	      "--limit 2: exit %d", rc);
}

static void t_dump_jsonl(void)
{
	const char *p = tpath("dumpj.sbt"), *out = tpath("dumpj.out"), *err = tpath("dumpj.err");
	char cmd[1024];
	int rc;

	REQUIRE(write_dump_file(p), "write_dump_file");
	rc = dump(out, err, "--jsonl", p, NULL);
	CHECK(rc == 0, "exit %d", rc);
	CHECK(contains_line(out, "{\"ts\":1012345678901,\"type\":\"switch_out\",\"cpu\":1,"
			    "\"pid\":1234,\"tid\":1240,\"flags\":0,\"state\":\"runnable\","
			    "\"prev_state\":\"0x0\",\"next_comm\":\"hog\",\"next_pid\":4412,"
			    "\"next_tid\":4412}"), "switch_out object");
	CHECK(contains(out, "\"prev_comm\":\"we\\\"ird \\u0001\\ufffd\\u009b\""), "escaped comm");
	if (system("python3 -c 'pass' 2>/dev/null"))
		SKIP("python3 not found: JSON lines not parsed");
	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import json,sys\n"
		 "l=[json.loads(x) for x in sys.stdin]\n"
		 "assert l[0][\"type\"]==\"header\" and l[-1][\"type\"]==\"trailer\", l\n"
		 "s=[x for x in l if x[\"type\"]==\"switch_in\"][0]\n"
		 "assert s[\"prev_comm\"]==\"we\\\"ird \\x01\\ufffd\\x9b\", s\n"
		 "g=[x for x in l if x[\"type\"]==\"gpu\"][0]\n"
		 "assert g[\"name\"].endswith(\"\\\"q\\\"\") and g[\"grid\"]==[64,1,1], g\n"
		 "assert l[-1][\"by_type\"][\"fault\"]==1\n' < %s 2>%s", out, err);
	rc = system(cmd);
	CHECK(rc == 0, "python3 rejected the JSON lines (%s)", err);
}

/* an empty name as the first string: dump's string table has no arena yet (UB found by fuzz_trace) */
static void t_dump_empty_first_string(void)
{
	const char *p = tpath("dumpe.sbt"), *out = tpath("dumpe.out"), *err = tpath("dumpe.err");
	struct sbt_writer *w = sbt_create(p);
	int rc;

	REQUIRE(w, "sbt_create: %s", strerror(errno));
	CHECK(sbt_write_text(w, SB_REC_STRING, 7, 1000, 1, 1, "", 0) == 0, "empty string");
	CHECK(sbt_write_text(w, SB_REC_STRING, 8, 1001, 1, 1, "k", 1) == 0, "string");
	REQUIRE(sbt_finish(w, SBT_END_DURATION, 1000, 2000, 0) == 0, "finish");
	rc = dump(out, err, p, NULL);
	CHECK(rc == 0, "exit %d: %s", rc, contains(err, "runtime error") ? "UB" : "");
	CHECK(contains(out, "string"), "no string records dumped");
}

static void t_dump_exit_codes(void)
{
	const char *p = tpath("dumpx.sbt"), *q = tpath("dumpx-cut.sbt");
	const char *out = tpath("dumpx.out"), *err = tpath("dumpx.err");
	unsigned char *b;
	size_t len;
	int rc;

	REQUIRE(write_dump_file(p), "write_dump_file");
	b = slurp(p, &len);
	REQUIRE(b, "slurp");
	REQUIRE(spit(q, b, len - sizeof(struct sb_trailer) - 3), "spit");
	rc = dump(out, err, q, NULL);
	CHECK(rc == 0, "cut short: exit %d", rc);
	CHECK(contains(err, "dumpx-cut.sbt was cut short after 6 records (no trailer"),
	      "cut short: stderr");
	CHECK(contains(out, "13.000005000 cpu0 1234/1241 mmsys") && !contains(out, " gpu "),
	      "cut short: records before the cut");

	((struct sb_hdr *)(b + 40))->size = 12;
	REQUIRE(spit(q, b, len), "spit");
	rc = dump(out, err, q, NULL);
	CHECK(rc == 1 && contains(err, "corrupt record at offset 40") && contains(err, "\n") &&
	      fsize(err) < 200, "corrupt: exit %d", rc);

	rc = dump(out, err, tpath("nope.sbt"), NULL);
	CHECK(rc == 1 && contains(err, "cannot open"), "missing: exit %d", rc);
	rc = dump(out, err, NULL);
	CHECK(rc == 2 && contains(err, "usage: stepblame dump FILE"), "no file: exit %d", rc);
	rc = dump(out, err, "--bogus", p, NULL);
	CHECK(rc == 2 && contains(err, "unknown option '--bogus'"), "bad flag: exit %d", rc);
	rc = dump(out, err, p, "--limit", "x", NULL);
	CHECK(rc == 2, "bad limit: exit %d", rc);
	rc = dump(out, err, p, p, NULL);
	CHECK(rc == 2, "two files: exit %d", rc);
	rc = dump(out, err, "--help", NULL);
	CHECK(rc == 0 && contains(out, "Exit status"), "--help: exit %d", rc);
	free(b);
}

/* the real binary, when tests/run points at one: same output as cmd_dump */
static void t_dump_binary(void)
{
	const char *bin = getenv("STEPBLAME");
	const char *p = tpath("dumpb.sbt"), *out = tpath("dumpb.out"), *err = tpath("dumpb.err");
	const char *out2 = tpath("dumpb2.out");
	char cmd[1024];
	int rc;

	if (!bin || access(bin, X_OK))
		SKIP("STEPBLAME not set or not executable");
	REQUIRE(write_dump_file(p), "write_dump_file");
	REQUIRE(dump(out, err, "--jsonl", p, NULL) == 0, "cmd_dump failed");
	snprintf(cmd, sizeof(cmd), "'%s' dump --jsonl '%s' > '%s' 2>'%s'", bin, p, out2, err);
	rc = system(cmd);
	CHECK(rc == 0, "%s: status %d", cmd, rc);
	snprintf(cmd, sizeof(cmd), "cmp -s '%s' '%s'", out, out2);
	CHECK(system(cmd) == 0, "binary and cmd_dump differ");
	snprintf(cmd, sizeof(cmd), "'%s' dump > /dev/null 2>&1", bin);
	rc = system(cmd);
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "no file: status %d", rc);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/test_trace.XXXXXX");
	if (!mkdtemp(dir) || chmod(dir, 0755)) {
		printf("FAIL setup: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	RUN(t_roundtrip_every_type);
	RUN(t_typed_fields);
	RUN(t_text_records);
	RUN(t_write_rejects_bad_records);
	RUN(t_partial_then_rename);
	RUN(t_abandon_keeps_partial);
	RUN(t_create_fails_cleanly);
	RUN(t_truncated_at_every_byte);
	RUN(t_zero_filled_tail);
	RUN(t_corrupt_records);
	RUN(t_bad_file_headers);
	RUN(t_check_record);
	RUN(t_file_size_limit);
	RUN(t_disk_full);
	RUN(t_zstd_roundtrip);
	RUN(t_zstd_cut_short);
	RUN(t_zstd_damage);
	RUN(t_zstd_window_limit);
	RUN(t_zstd_file_size_limit);
	RUN(t_dump_text);
	RUN(t_dump_jsonl);
	RUN(t_dump_exit_codes);
	RUN(t_dump_empty_first_string);
	RUN(t_dump_binary);
	chmod(tpath("ro"), 0755);
	if (getenv("TEST_KEEP"))
		printf("# files kept in %s\n", dir);
	else
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return test_summary();
}
