// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The trace file (schemas/trace.md): writer and streaming reader.
 *
 * The writer appends whole records to a preallocated buffer and writes it out
 * with pwrite at an offset it tracks itself, so that after a failed or short
 * write it can cut the file back to the last whole record and carry on from
 * there. The reader streams through a fixed buffer whose start always sits at
 * an 8-aligned file offset, so records handed out are 8-aligned in memory.
 *
 * Compressed (schemas/trace.md, "Compressed traces"), each write-out of the
 * buffer is one zstd frame of whole records, and a failed write cuts the file
 * back to the end of the last whole frame; the reader decompresses as it
 * streams, and offsets are then those of the decompressed trace.
 */
#include <byteswap.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "format/gpu.h"
#include "base/outfile.h"
#include "format/trace.h"
#include "base/util.h"

#define SBT_WBUF (1u << 20)
#define SBT_RBUF (1u << 20)
#define SBT_HDR_MAX 4096 /* largest file header a reader accepts */

_Static_assert(sizeof(struct sbt_file_hdr) % 8 == 0, "file header must keep records 8-aligned");
_Static_assert(sizeof(struct sb_trailer) % 8 == 0, "trailer size");
_Static_assert(sizeof(struct sb_text) == 32, "text record header");
_Static_assert(SBT_WBUF >= SBT_MAX_RECORD && SBT_RBUF > SBT_MAX_RECORD + SBT_HDR_MAX, "buffers");

/* ---- record rules ---- */

/*
 * The table SB_RECORD_TYPES (bpf/events.h), expanded here, where every
 * struct it names is defined. The start column: a u64 field, or none.
 */
#define START_OFF_none(st) 0
#define START_OFF_start_ns(st) offsetof(struct st, start_ns)
#define START_SIZE_none(st) 8
#define START_SIZE_start_ns(st) sizeof(((struct st *)0)->start_ns)

#define TYPE_ROW(e, id, nm, st, start, cost, kd) \
	[id] = { .name = nm, .struct_name = #st, .size = sizeof(struct st), \
		 .kind = SB_KIND_##kd, .start_off = START_OFF_##start(st) },

const struct sb_type_info sb_types[SB_TYPE_MAX] = { SB_RECORD_TYPES(TYPE_ROW) };

/* each row: a struct of a valid record size whose start field, if any, is a u64 in its body */
#define TYPE_CHECK(e, id, nm, st, start, cost, kd) \
	_Static_assert(sizeof(struct st) % 8 == 0 && sizeof(struct st) <= SBT_MAX_RECORD && \
			       sizeof(struct st) >= sizeof(struct sb_hdr), \
		       "record struct size: " nm); \
	_Static_assert(START_SIZE_##start(st) == 8 && START_OFF_##start(st) % 8 == 0 && \
			       START_OFF_##start(st) < sizeof(struct st) && \
			       (START_OFF_##start(st) == 0 || \
				START_OFF_##start(st) >= sizeof(struct sb_hdr)), \
		       "record start field: " nm); \
	_Static_assert((SB_KIND_##kd == SB_KIND_TEXT) == \
			       __builtin_types_compatible_p(struct st, struct sb_text), \
		       "text records are exactly the sb_text rows: " nm);
SB_RECORD_TYPES(TYPE_CHECK)

size_t sb_type_size(unsigned type)
{
	return type < SB_TYPE_MAX ? sb_types[type].size : 0;
}

static __thread char check_why[128];

/* the header-only part of the check: type and size */
static const char *check_hdr(const struct sb_hdr *h)
{
	size_t min = sb_type_size(h->type);

	if (!min)
		snprintf(check_why, sizeof(check_why), "unknown record type %u (size %u)",
			 h->type, h->size);
	else if (h->size == 0)
		snprintf(check_why, sizeof(check_why), "%s record has size 0", sb_type_name(h->type));
	else if (h->size > SBT_MAX_RECORD)
		snprintf(check_why, sizeof(check_why), "%s record size %u exceeds the maximum %u",
			 sb_type_name(h->type), h->size, SBT_MAX_RECORD);
	else if (h->size % 8)
		snprintf(check_why, sizeof(check_why), "%s record size %u is not a multiple of 8",
			 sb_type_name(h->type), h->size);
	else if (h->size < min)
		snprintf(check_why, sizeof(check_why),
			 "%s record size %u is smaller than its %zu-byte struct",
			 sb_type_name(h->type), h->size, min);
	else
		return NULL;
	return check_why;
}

const char *sbt_check_record(const struct sb_hdr *h, size_t avail)
{
	const char *why;

	if (avail < sizeof(*h)) {
		snprintf(check_why, sizeof(check_why), "record header cut short (%zu of %zu bytes)",
			 avail, sizeof(*h));
		return check_why;
	}
	why = check_hdr(h);
	if (why)
		return why;
	if (avail < h->size) {
		snprintf(check_why, sizeof(check_why),
			 "%s record of %u bytes runs past the end (%zu bytes left)",
			 sb_type_name(h->type), h->size, avail);
		return check_why;
	}
	if (sb_type_is_text(h->type)) {
		const struct sb_text *t = (const struct sb_text *)h;
		size_t room = h->size - sizeof(*t);

		/* exactly the writer's padding: len fits and leaves less than 8 bytes over */
		if (t->len > room || room - t->len >= 8) {
			snprintf(check_why, sizeof(check_why),
				 "%s record text length %u does not match its size %u",
				 sb_type_name(h->type), t->len, h->size);
			return check_why;
		}
	}
	return NULL;
}

/* ---- names ---- */

const char *sb_type_name(unsigned type)
{
	return type < SB_TYPE_MAX && sb_types[type].name ? sb_types[type].name : "unknown";
}

const char *sb_state_name(unsigned state)
{
	static const char *const n[] = { "runnable", "sleep", "disk", "stopped", "dead", "other" };

	return state < ARRAY_SIZE(n) ? n[state] : "unknown";
}

const char *sb_alloc_fn_name(unsigned fn)
{
	static const char *const n[] = { "malloc", "calloc", "realloc", "free",
					 "posix_memalign", "aligned_alloc", "memalign" };

	_Static_assert(ARRAY_SIZE(n) == SB_FN_MAX, "alloc fn names");
	return fn < ARRAY_SIZE(n) ? n[fn] : "unknown";
}

const char *sb_mmsys_name(unsigned call)
{
	static const char *const n[] = { NULL, "mmap", "munmap", "brk", "madvise", "mprotect",
					 "mremap" };

	return call && call < ARRAY_SIZE(n) ? n[call] : "unknown";
}

const char *sb_io_name(unsigned call)
{
	static const char *const n[] = { NULL, "read", "write", "pread64", "pwrite64", "readv",
					 "writev", "fsync", "fdatasync", "sync_file_range", "unlink",
					 "unlinkat", "sync", "syncfs", "sendfile", "copy_file_range",
					 "splice", "preadv", "pwritev", "preadv2", "pwritev2" };

	_Static_assert(ARRAY_SIZE(n) == SB_IO_PWRITEV2 + 1, "io call names");
	return call && call < ARRAY_SIZE(n) ? n[call] : "unknown";
}

const char *sb_softirq_name(unsigned vec)
{
	/* include/linux/interrupt.h, enum { HI_SOFTIRQ = 0, ... } */
	static const char *const n[] = { "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL",
					 "TASKLET", "SCHED", "HRTIMER", "RCU" };

	_Static_assert(ARRAY_SIZE(n) == SB_NSOFTIRQ, "softirq names");
	return vec < ARRAY_SIZE(n) ? n[vec] : "unknown";
}

const char *sb_sysirq_name(unsigned k)
{
	static const char *const n[] = { "local_timer", "call_function", "reschedule", "irq_work" };

	_Static_assert(ARRAY_SIZE(n) == SB_NSYSIRQ, "system interrupt names");
	return k < ARRAY_SIZE(n) ? n[k] : "unknown";
}

const char *sb_file_kind_name(unsigned kind)
{
	static const char *const n[] = { "none", "regular", "socket", "pipe", "char", "block",
					 "dir", "other" };

	_Static_assert(ARRAY_SIZE(n) == SB_FILE_OTHER + 1, "file kind names");
	return kind < ARRAY_SIZE(n) ? n[kind] : "unknown";
}

const struct sb_iosys_file *sb_iosys_file_of(const struct sb_hdr *h)
{
	if (h->type != SB_EV_IOSYS || h->size < sizeof(struct sb_iosys_ext))
		return NULL;
	return &((const struct sb_iosys_ext *)h)->file;
}

const struct sb_step_alloc *sb_step_alloc_of(const struct sb_hdr *h)
{
	if (h->type != SB_EV_STEP || h->size < sizeof(struct sb_step_ext))
		return NULL;
	return &((const struct sb_step_ext *)h)->alloc;
}

const struct sb_mmsys_map *sb_mmsys_map_of(const struct sb_hdr *h)
{
	if (h->type != SB_EV_MMSYS || h->size < sizeof(struct sb_mmsys_ext) ||
	    ((const struct sb_mmsys *)h)->call != SB_SYS_MMAP)
		return NULL;
	return &((const struct sb_mmsys_ext *)h)->map;
}

size_t sb_iosys_file_path(const struct sb_iosys_file *f, char *out, size_t cap)
{
	size_t len = f->path_len < SB_IO_PATH_LEN ? f->path_len : SB_IO_PATH_LEN;
	size_t starts[SB_IO_PATH_LEN / 2 + 1], n = 0, o = 0;

	if (!cap)
		return 0;
	/* the components, leaf first, each ending in NUL (a last one cut short has none) */
	for (size_t i = 0; i < len && n < ARRAY_SIZE(starts);) {
		size_t k = i;

		while (k < len && f->path[k])
			k++;
		if (k > i)
			starts[n++] = i;
		i = k + 1;
	}
	if (n && !(f->flags & SB_IO_PATH_TOP) && o + 3 < cap) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	while (n-- > 0) {
		const char *c = f->path + starts[n];

		if (o + 1 < cap)
			out[o++] = '/';
		for (size_t i = starts[n]; i < len && *c && o + 1 < cap; i++, c++)
			out[o++] = *c >= 0x20 && *c < 0x7f ? *c : '?';
	}
	out[o] = 0;
	return o;
}

const char *sbt_end_name(unsigned reason)
{
	static const char *const n[] = { NULL, "duration", "signal", "target_exit", "error",
					 "target_credentials" };

	_Static_assert(ARRAY_SIZE(n) == SBT_END_CREDENTIALS + 1, "end reason names");
	return reason && reason < ARRAY_SIZE(n) ? n[reason] : "unknown";
}

/* ---- writer ---- */

struct sbt_writer {
	int fd;               /* = out.fd while open */
	int err;              /* sticky -errno: the file may no longer end on a record */
	unsigned char *buf;   /* SBT_WBUF bytes, whole records only */
	size_t used;
	uint64_t off;         /* bytes in the file: always a whole-record (or frame) boundary */
	uint64_t counts[SB_TYPE_MAX];
	struct sb_out out;    /* the temporary and its final name */
	ZSTD_CCtx *zc;        /* compressed: one frame per write-out; NULL: plain */
	unsigned char *zbuf;  /* a frame's room, ZSTD_compressBound(SBT_WBUF) */
	size_t zcap;
};

/* write n bytes at off; *done = bytes that made it. 0 or -errno */
static int pwrite_all(int fd, const void *p, size_t n, uint64_t off, size_t *done)
{
	size_t got = 0;
	ssize_t k;

	while (got < n) {
		k = pwrite(fd, (const char *)p + got, n - got, (off_t)(off + got));
		if (k < 0) {
			if (errno == EINTR)
				continue;
			*done = got;
			return -errno;
		}
		if (k == 0) {
			*done = got;
			return -EIO;
		}
		got += k;
	}
	*done = got;
	return 0;
}

/*
 * length of the longest run of whole records at the start of buf within n
 * bytes (of a file header, which holds no records: meaningless, and unused)
 */
static size_t whole_prefix(const unsigned char *buf, size_t used, size_t n)
{
	size_t at = 0, sz;

	while (at + sizeof(struct sb_hdr) <= used) {
		sz = ((const struct sb_hdr *)(buf + at))->size;
		if (!sz || at + sz > n)
			break;
		at += sz;
	}
	return at;
}

static void wfree(struct sbt_writer *w)
{
	ZSTD_freeCCtx(w->zc);
	free(w->zbuf);
	free(w->buf);
	free(w);
}

bool sbt_name_is_zstd(const char *path)
{
	size_t n = strlen(path);

	return n > 4 && !strcmp(path + n - 4, ".zst");
}

/* a compressor at level: checksummed frames that state their size */
static int zwriter_init(struct sbt_writer *w, int level)
{
	w->zc = ZSTD_createCCtx();
	w->zcap = ZSTD_compressBound(SBT_WBUF);
	w->zbuf = malloc(w->zcap);
	if (!w->zc || !w->zbuf ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->zc, ZSTD_c_compressionLevel, level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->zc, ZSTD_c_checksumFlag, 1)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->zc, ZSTD_c_contentSizeFlag, 1)))
		return -ENOMEM;
	return 0;
}

/*
 * Append n bytes of whole records at w->off, as they are or as one zstd
 * frame, and move w->off past what stays in the file. 0, or -errno with
 * *kept = how many of the n bytes are now in the file as whole records (the
 * rest is cut off again; -1 when that failed).
 */
static int wput(struct sbt_writer *w, const unsigned char *p, size_t n, ssize_t *kept)
{
	size_t done, z, keep;
	int rc;

	if (!w->zc) {
		rc = pwrite_all(w->fd, p, n, w->off, &done);
		/* cut a half-written record off the end so the file stays readable */
		keep = rc ? whole_prefix(p, n, done) : n;
		*kept = keep;
		if (done != keep && ftruncate(w->fd, (off_t)(w->off + keep)) < 0)
			*kept = -1;
		w->off += keep;
		return rc;
	}
	z = ZSTD_compress2(w->zc, w->zbuf, w->zcap, p, n);
	*kept = 0;
	if (ZSTD_isError(z))
		return -ENOMEM; /* the bound always fits: only its workspace can fail */
	rc = pwrite_all(w->fd, w->zbuf, z, w->off, &done);
	if (!rc) {
		w->off += z;
		*kept = n;
		return 0;
	}
	/* a frame is whole or not there */
	if (done && ftruncate(w->fd, (off_t)w->off) < 0)
		*kept = -1;
	return rc;
}

struct sbt_writer *sbt_create_as(const char *path, const struct sb_owner *owner, int zstd_level,
				 char *err, size_t errlen)
{
	struct sbt_writer *w;
	struct sbt_file_hdr fh = { .magic = SBT_MAGIC };
	ssize_t kept;
	int e;

	if (zstd_level < 0 || zstd_level > SBT_ZSTD_LEVEL_MAX) {
		snprintf(err, errlen, "zstd level %d is not 1..%d", zstd_level,
			 SBT_ZSTD_LEVEL_MAX);
		errno = EINVAL;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (w)
		w->buf = malloc(SBT_WBUF);
	if (!w || !w->buf || (zstd_level && zwriter_init(w, zstd_level))) {
		if (w)
			wfree(w);
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	/* O_CREAT|O_EXCL|O_NOFOLLOW with a random name in a pinned directory (outfile.h) */
	if (sb_out_open(&w->out, path, owner, err, errlen)) {
		e = errno;
		wfree(w);
		errno = e;
		return NULL;
	}
	/* a trace is a capture nobody can take again: the one it replaces is kept */
	w->out.keep_old = true;
	w->fd = w->out.fd;
	fh.version = SBT_VERSION;
	fh.hdr_size = sizeof(fh);
	fh.endian = SBT_ENDIAN_TAG;
	fh.clock = 1;
	fh.created_realtime_ns = real_ns();
	fh.created_mono_ns = mono_ns();
	/* compressed, the header is a frame of its own: a file with no records reads */
	e = -wput(w, (const unsigned char *)&fh, sizeof(fh), &kept);
	if (e) {
		snprintf(err, errlen, "cannot write %s: %s", w->out.tmp_path, strerror(e));
		sb_out_abandon(&w->out, false);
		wfree(w);
		errno = e;
		return NULL;
	}
	return w;
}

struct sbt_writer *sbt_create(const char *path)
{
	char err[256];

	return sbt_create_as(path, NULL, 0, err, sizeof(err));
}

static int wflush(struct sbt_writer *w)
{
	ssize_t kept;
	int rc;

	if (w->err)
		return w->err;
	if (!w->used)
		return 0;
	rc = wput(w, w->buf, w->used, &kept);
	if (kept < 0) {
		/* the file may no longer end on a record: nothing more goes in */
		w->err = rc;
		return rc;
	}
	memmove(w->buf, w->buf + kept, w->used - kept);
	w->used -= kept;
	return rc;
}

int sbt_write(struct sbt_writer *w, const void *rec)
{
	const struct sb_hdr *h = rec;
	int rc;

	if (!w || !h)
		return -EINVAL;
	if (w->err)
		return w->err;
	if (h->type == SB_REC_TRAILER || sbt_check_record(h, h->size))
		return -EINVAL;
	if (w->used + h->size > SBT_WBUF) {
		rc = wflush(w);
		if (rc)
			return rc;
	}
	memcpy(w->buf + w->used, rec, h->size);
	w->used += h->size;
	w->counts[h->type]++;
	return 0;
}

size_t sb_text_build(void *buf, size_t cap, uint16_t type, uint32_t id, uint64_t ts,
		     uint32_t pid, uint32_t tid, const char *text, size_t len)
{
	struct sb_text *t = buf;
	size_t max, size;

	if (cap > SBT_MAX_RECORD)
		cap = SBT_MAX_RECORD;
	if (cap < sizeof(*t))
		return 0;
	max = (cap & ~(size_t)7) - sizeof(*t);
	if (len > max)
		len = max;
	size = (sizeof(*t) + len + 7) & ~(size_t)7;
	memset(t, 0, sizeof(*t));
	t->h.type = type;
	t->h.size = (uint16_t)size;
	t->h.pid = pid;
	t->h.tid = tid;
	t->h.ts = ts;
	t->len = (uint32_t)len;
	t->id = id;
	if (len)
		memcpy(t->text, text, len);
	memset(t->text + len, 0, size - sizeof(*t) - len);
	return size;
}

int sbt_write_text(struct sbt_writer *w, uint16_t type, uint32_t id, uint64_t ts,
		   uint32_t pid, uint32_t tid, const char *text, size_t len)
{
	size_t size;
	int rc;

	if (!w || !sb_type_is_text(type) || (!text && len))
		return -EINVAL;
	if (w->err)
		return w->err;
	size = (sizeof(struct sb_text) + (len < SBT_MAX_RECORD ? len : SBT_MAX_RECORD) + 7) &
	       ~(size_t)7;
	if (size > SBT_MAX_RECORD)
		size = SBT_MAX_RECORD;
	if (w->used + size > SBT_WBUF) {
		rc = wflush(w);
		if (rc)
			return rc;
	}
	/* built in place: the buffer is 8-aligned and so is w->used */
	size = sb_text_build(w->buf + w->used, size, type, id, ts, pid, tid, text, len);
	w->used += size;
	w->counts[type]++;
	return 0;
}

int sbt_flush(struct sbt_writer *w)
{
	return w ? wflush(w) : -EINVAL;
}

int sbt_finish(struct sbt_writer *w, uint32_t end_reason, uint64_t start_ns, uint64_t end_ns,
	       uint64_t drops_total)
{
	struct sb_trailer t;
	int rc;

	if (!w)
		return -EINVAL;
	memset(&t, 0, sizeof(t));
	t.h.type = SB_REC_TRAILER;
	t.h.size = sizeof(t);
	t.h.ts = end_ns;
	memcpy(t.records, w->counts, sizeof(t.records));
	t.drops_total = drops_total;
	t.start_ns = start_ns;
	t.end_reason = end_reason;

	rc = w->err;
	if (!rc && w->used + sizeof(t) > SBT_WBUF)
		rc = wflush(w);
	if (!rc) {
		memcpy(w->buf + w->used, &t, sizeof(t));
		w->used += sizeof(t);
		rc = wflush(w);
	}
	if (rc)
		sb_out_abandon(&w->out, true);
	else
		rc = sb_out_commit(&w->out, true);
	wfree(w);
	return rc;
}

void sbt_abandon(struct sbt_writer *w)
{
	if (!w)
		return;
	wflush(w);
	sb_out_abandon(&w->out, true);
	wfree(w);
}

void sbt_discard(struct sbt_writer *w)
{
	if (!w)
		return;
	sb_out_abandon(&w->out, false);
	wfree(w);
}

int sbt_salvage(struct sbt_writer *w)
{
	int rc;

	if (!w)
		return -EINVAL;
	wflush(w);
	rc = sb_out_commit(&w->out, false);
	if (rc)
		sb_out_abandon(&w->out, true);
	wfree(w);
	return rc;
}

int sbt_fd(const struct sbt_writer *w)
{
	return w ? w->out.fd : -1;
}

const char *sbt_partial_path(const struct sbt_writer *w)
{
	return w ? w->out.tmp_path : NULL;
}

uint64_t sbt_count(const struct sbt_writer *w, uint16_t type)
{
	return w && type < SB_TYPE_MAX ? w->counts[type] : 0;
}

/* ---- reader ---- */

struct sbt_reader {
	int fd;
	bool eof;
	enum sbt_status status;    /* sticky once not SBT_OK */
	unsigned char *buf;        /* SBT_RBUF bytes */
	size_t pos, len;
	uint64_t buf_off;          /* file offset of buf[0], 8-aligned */
	uint64_t rec_off;          /* offset of the last record returned or rejected */
	uint64_t nrec;
	uint64_t counts[SB_TYPE_MAX];
	struct sbt_file_hdr fh;
	struct sb_trailer trailer;
	char err[512];
	/* compressed: the frames are read into zin and decompressed into buf */
	ZSTD_DCtx *zd;             /* NULL: a plain trace */
	unsigned char *zin;        /* SBT_ZIN bytes of the file */
	size_t zin_pos, zin_len;
	uint64_t zoff;             /* file offset of zin[zin_pos] */
	bool zeof;                 /* the file has no more bytes */
	bool zmid;                 /* inside a frame: its end not yet decompressed */
	const char *zend;          /* why the trace ended early: NULL, or said after "cut short" */
	char zerr[160];            /* the zstd data is bad (-EBADMSG): why */
	int zfail;                 /* an error held back until what came before is read */
};

#define SBT_ZIN (128u << 10)

/* read(2) into p, retried on EINTR */
static ssize_t read_some(int fd, void *p, size_t n)
{
	ssize_t k;

	do
		k = read(fd, p, n);
	while (k < 0 && errno == EINTR);
	return k < 0 ? -errno : k;
}

/* the next bytes of the file into zin; 0, or -errno */
static int zin_fill(struct sbt_reader *r)
{
	ssize_t n;

	r->zoff += r->zin_len - r->zin_pos;
	r->zin_pos = r->zin_len = 0;
	n = read_some(r->fd, r->zin, SBT_ZIN);
	if (n < 0)
		return (int)n;
	r->zin_len = (size_t)n;
	r->zeof = n == 0;
	return 0;
}

/*
 * Between frames, a zero byte: a file system's zero-filled tail after a crash
 * reads as the end, anything else after zeros is damage. 0 (the end), or -errno.
 */
static int zzero_tail(struct sbt_reader *r)
{
	int rc;

	for (;;) {
		for (; r->zin_pos < r->zin_len; r->zin_pos++, r->zoff++)
			if (r->zin[r->zin_pos]) {
				snprintf(r->zerr, sizeof(r->zerr),
					 "zero bytes, then data that is not a zstd frame");
				return -EBADMSG;
			}
		rc = zin_fill(r);
		if (rc)
			return rc;
		if (r->zeof) {
			r->zend = "zero-filled tail after the last zstd frame";
			return 0;
		}
	}
}

/*
 * Decompressed trace bytes into p (up to n): more than 0, 0 at the end of the
 * file, or -errno (-EBADMSG: the zstd data is bad, zerr says why).
 */
static ssize_t zread(struct sbt_reader *r, unsigned char *p, size_t n)
{
	ZSTD_outBuffer out = { p, n, 0 };
	ZSTD_inBuffer in;
	size_t ret;
	int rc = 0;

	if (r->zfail)
		return r->zfail;
	while (out.pos < out.size && !rc) {
		if (r->zin_pos == r->zin_len) {
			/* give what there is before waiting on a pipe */
			if (out.pos)
				break;
			rc = zin_fill(r);
			if (rc)
				break;
			if (r->zeof) {
				if (r->zmid)
					r->zend = "the file ends inside a zstd frame";
				break;
			}
		}
		if (!r->zmid && !r->zin[r->zin_pos]) {
			rc = zzero_tail(r);
			break;
		}
		in = (ZSTD_inBuffer){ r->zin, r->zin_len, r->zin_pos };
		ret = ZSTD_decompressStream(r->zd, &out, &in);
		r->zoff += in.pos - r->zin_pos;
		r->zin_pos = in.pos;
		if (ZSTD_isError(ret)) {
			snprintf(r->zerr, sizeof(r->zerr), "%s%s", ZSTD_getErrorName(ret),
				 ZSTD_getErrorCode(ret) == ZSTD_error_frameParameter_windowTooLarge ?
				 " (stepblame gives a frame a window of at most 8 MiB: "
				 "recompress without --long)" : "");
			rc = -EBADMSG;
			break;
		}
		/* 0: a frame ended, and everything it held is out */
		r->zmid = ret != 0;
	}
	/* the bytes decompressed before an error are good: they go first */
	if (rc && out.pos) {
		r->zfail = rc;
		return (ssize_t)out.pos;
	}
	return rc ? rc : (ssize_t)out.pos;
}

/* the trace's next bytes into p (up to n): more than 0, 0 at its end, or -errno */
static ssize_t src_read(struct sbt_reader *r, unsigned char *p, size_t n)
{
	return r->zd ? zread(r, p, n) : read_some(r->fd, p, n);
}

/* make at least need bytes available at pos, unless the file ends first */
static int rfill(struct sbt_reader *r, size_t need)
{
	ssize_t n;

	while (r->len - r->pos < need && !r->eof) {
		if (r->pos && (r->len == SBT_RBUF || SBT_RBUF - r->pos < need)) {
			memmove(r->buf, r->buf + r->pos, r->len - r->pos);
			r->buf_off += r->pos;
			r->len -= r->pos;
			r->pos = 0;
		}
		n = src_read(r, r->buf + r->len, SBT_RBUF - r->len);
		if (n < 0)
			return (int)n;
		if (n == 0)
			r->eof = true;
		r->len += n;
	}
	return 0;
}

static enum sbt_status rstop(struct sbt_reader *r, enum sbt_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static enum sbt_status rstop(struct sbt_reader *r, enum sbt_status st, const char *fmt, ...)
{
	va_list ap;

	size_t n;

	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	/* a compressed trace says how its frames ended */
	n = strlen(r->err);
	if (st == SBT_TRUNCATED && r->zend && n < sizeof(r->err))
		snprintf(r->err + n, sizeof(r->err) - n, "; %s", r->zend);
	r->status = st;
	return st;
}

static enum sbt_status rio(struct sbt_reader *r, int err)
{
	if (err == -EBADMSG && r->zd)
		return rstop(r, SBT_CORRUPT, "corrupt zstd data at file offset %" PRIu64
			     " (after %" PRIu64 " records, trace offset %" PRIu64 "): %s",
			     r->zoff, r->nrec, r->buf_off + r->len, r->zerr);
	return rstop(r, SBT_IO, "read error at offset %" PRIu64 ": %s",
		     r->buf_off + r->pos, strerror(-err));
}

/* true when everything from pos to the end of the file is zero bytes */
static int zero_tail(struct sbt_reader *r)
{
	int rc;

	for (;;) {
		for (; r->pos < r->len; r->pos++)
			if (r->buf[r->pos])
				return 0;
		rc = rfill(r, 1);
		if (rc < 0)
			return rc;
		if (r->pos == r->len)
			return 1;
	}
}

static bool all_zero(const void *p, size_t n)
{
	const unsigned char *c = p;

	while (n--)
		if (*c++)
			return false;
	return true;
}

enum sbt_status sbt_next(struct sbt_reader *r, const struct sb_hdr **rec)
{
	const struct sb_hdr *h;
	const char *why;
	size_t avail, size;
	int rc;
	unsigned t;

	if (rec)
		*rec = NULL;
	if (r->status != SBT_OK)
		return r->status;
	r->rec_off = r->buf_off + r->pos;
	rc = rfill(r, sizeof(*h));
	if (rc < 0)
		return rio(r, rc);
	avail = r->len - r->pos;
	if (avail == 0)
		return rstop(r, SBT_TRUNCATED, "cut short after %" PRIu64 " records at offset %"
			     PRIu64 " (no trailer)", r->nrec, r->rec_off);
	if (avail < sizeof(*h))
		return rstop(r, SBT_TRUNCATED, "cut short after %" PRIu64 " records at offset %"
			     PRIu64 " (%zu bytes of a record header, no trailer)",
			     r->nrec, r->rec_off, avail);
	h = (const struct sb_hdr *)(r->buf + r->pos);
	why = check_hdr(h);
	if (why) {
		/* a crash can leave zero-filled blocks after the last record written */
		if (all_zero(h, sizeof(*h))) {
			rc = zero_tail(r);
			if (rc < 0)
				return rio(r, rc);
			if (rc)
				return rstop(r, SBT_TRUNCATED, "cut short after %" PRIu64
					     " records at offset %" PRIu64
					     " (zero-filled tail, no trailer)", r->nrec, r->rec_off);
		}
		return rstop(r, SBT_CORRUPT, "corrupt record at offset %" PRIu64 " (after %"
			     PRIu64 " records): %s", r->rec_off, r->nrec, why);
	}
	size = h->size;
	rc = rfill(r, size);
	if (rc < 0)
		return rio(r, rc);
	h = (const struct sb_hdr *)(r->buf + r->pos);
	avail = r->len - r->pos;
	if (avail < size)
		return rstop(r, SBT_TRUNCATED, "cut short after %" PRIu64 " records at offset %"
			     PRIu64 " (%zu of the %zu bytes of its %s record, no trailer)",
			     r->nrec, r->rec_off, avail, size, sb_type_name(h->type));
	why = sbt_check_record(h, avail);
	if (why)
		return rstop(r, SBT_CORRUPT, "corrupt record at offset %" PRIu64 " (after %"
			     PRIu64 " records): %s", r->rec_off, r->nrec, why);
	r->pos += size;
	if (h->type != SB_REC_TRAILER) {
		r->counts[h->type]++;
		r->nrec++;
		if (rec)
			*rec = h;
		return SBT_OK;
	}

	memcpy(&r->trailer, h, sizeof(r->trailer));
	rc = rfill(r, 1);
	if (rc < 0)
		return rio(r, rc);
	if (r->len > r->pos) {
		r->rec_off = r->buf_off + r->pos;
		return rstop(r, SBT_CORRUPT, "corrupt data at offset %" PRIu64
			     ": %zu%s bytes after the trailer", r->buf_off + r->pos,
			     r->len - r->pos, r->eof ? "" : " or more");
	}
	/* compressed: the trailer's frame must be whole too (its checksum read) */
	if (r->zend)
		return rstop(r, SBT_TRUNCATED, "cut short after %" PRIu64 " records at offset %"
			     PRIu64 " (the trailer read, its frame not whole)", r->nrec,
			     r->rec_off);
	for (t = 0; t < SB_TYPE_MAX; t++)
		if (r->trailer.records[t] != r->counts[t])
			return rstop(r, SBT_CORRUPT, "corrupt trailer at offset %" PRIu64
				     ": it counts %" PRIu64 " %s records, the file holds %" PRIu64,
				     r->rec_off, (uint64_t)r->trailer.records[t], sb_type_name(t),
				     r->counts[t]);
	r->status = SBT_EOF;
	r->err[0] = 0;
	return SBT_EOF;
}

/* a zstd frame (magic 0xFD2FB528) or a skippable frame (0x184D2A50..5F) starts here */
static bool zstd_magic(const unsigned char *p, size_t n)
{
	uint32_t m;

	if (n < 4)
		return false;
	memcpy(&m, p, 4);
	m = le32toh(m);
	return m == ZSTD_MAGICNUMBER || (m & ZSTD_MAGIC_SKIPPABLE_MASK) == ZSTD_MAGIC_SKIPPABLE_START;
}

/* the decompressor, with the file's first n bytes (at p) as its input */
static int zreader_init(struct sbt_reader *r, const unsigned char *p, size_t n)
{
	r->zd = ZSTD_createDCtx();
	r->zin = malloc(SBT_ZIN);
	if (!r->zd || !r->zin ||
	    ZSTD_isError(ZSTD_DCtx_setParameter(r->zd, ZSTD_d_windowLogMax,
						 SBT_ZSTD_WINDOW_LOG_MAX)))
		return -ENOMEM;
	memcpy(r->zin, p, n);
	r->zin_len = n;
	return 0;
}

static void rfree(struct sbt_reader *r)
{
	ZSTD_freeDCtx(r->zd);
	free(r->zin);
	free(r->buf);
	free(r);
}

struct sbt_reader *sbt_open(const char *path, char *err, size_t errlen)
{
	struct sbt_reader *r = NULL;
	struct sbt_file_hdr fh;
	struct stat st;
	unsigned char first[sizeof(fh)];
	size_t got = 0;
	ssize_t n;
	int fd, rc;

	if (err && errlen)
		err[0] = 0;
	/* "-": the trace read from standard input (a pipe, as it comes) */
	if (!strcmp(path, "-")) {
		fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
		path = "standard input";
	} else {
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(EISDIR));
		goto fail;
	}
	/* the first bytes say whether it is compressed */
	while (got < sizeof(first)) {
		n = read_some(fd, first + got, sizeof(first) - got);
		if (n < 0) {
			snprintf(err, errlen, "cannot read %s: %s", path, strerror((int)-n));
			goto fail;
		}
		if (n == 0)
			break;
		got += n;
	}
	if (got == 0) {
		snprintf(err, errlen, "%s is empty, not a stepblame trace", path);
		goto fail;
	}
	r = calloc(1, sizeof(*r));
	if (r)
		r->buf = malloc(SBT_RBUF);
	if (!r || !r->buf || (zstd_magic(first, got) && zreader_init(r, first, got))) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(ENOMEM));
		goto fail;
	}
	r->fd = fd;
	if (!r->zd) {
		memcpy(r->buf, first, got);
		r->len = got;
		r->eof = got < sizeof(first);
	}
	/* the file header, decompressed if need be */
	rc = rfill(r, sizeof(fh));
	if (rc < 0) {
		if (rc == -EBADMSG && r->zd)
			snprintf(err, errlen, "%s: corrupt zstd data at file offset %" PRIu64 ": %s",
				 path, r->zoff, r->zerr);
		else
			snprintf(err, errlen, "cannot read %s: %s", path, strerror(-rc));
		goto fail;
	}
	got = r->len < sizeof(fh) ? r->len : sizeof(fh);
	memset(&fh, 0, sizeof(fh));
	memcpy(&fh, r->buf, got);
	if (r->zd && got < sizeof(fh) && (got < sizeof(fh.magic) ||
					   !memcmp(fh.magic, SBT_MAGIC, sizeof(fh.magic)))) {
		snprintf(err, errlen, "%s is cut short inside its file header (%zu of %zu bytes "
			 "decompressed%s%s)", path, got, sizeof(fh), r->zend ? "; " : "",
			 r->zend ? r->zend : "");
		goto fail;
	}
	if (got < sizeof(fh.magic) || memcmp(fh.magic, SBT_MAGIC, sizeof(fh.magic))) {
		snprintf(err, errlen, "%s is not a stepblame trace%s", path,
			 r->zd ? " (it is zstd-compressed data of something else)" : "");
		goto fail;
	}
	if (got < sizeof(fh)) {
		snprintf(err, errlen, "%s is cut short inside its file header (%zu of %zu bytes)",
			 path, got, sizeof(fh));
		goto fail;
	}
	if (fh.endian == bswap_32(SBT_ENDIAN_TAG)) {
		snprintf(err, errlen, "%s was written on a host of the other byte order", path);
		goto fail;
	}
	if (fh.endian != SBT_ENDIAN_TAG) {
		snprintf(err, errlen, "%s is not a stepblame trace (byte-order tag 0x%08x)",
			 path, fh.endian);
		goto fail;
	}
	if (fh.version != SBT_VERSION) {
		snprintf(err, errlen, "%s is trace version %u; this stepblame reads version %d",
			 path, fh.version, SBT_VERSION);
		goto fail;
	}
	if (fh.hdr_size < sizeof(fh) || fh.hdr_size > SBT_HDR_MAX || fh.hdr_size % 8) {
		snprintf(err, errlen, "%s has a bad file header size %u", path, fh.hdr_size);
		goto fail;
	}
	if (fh.clock != 1) {
		snprintf(err, errlen, "%s uses clock %u; this stepblame reads CLOCK_MONOTONIC (1)",
			 path, fh.clock);
		goto fail;
	}
	r->fh = fh;
	/* a longer header (a later minor revision) is skipped */
	rc = rfill(r, fh.hdr_size);
	if (rc < 0) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(-rc));
		goto fail;
	}
	if (r->len < fh.hdr_size) {
		snprintf(err, errlen, "%s is cut short inside its file header", path);
		goto fail;
	}
	r->pos = fh.hdr_size;
	r->rec_off = fh.hdr_size;
	return r;
fail:
	if (r)
		rfree(r);
	close(fd);
	return NULL;
}

bool sbt_is_zstd(const struct sbt_reader *r)
{
	return r && r->zd;
}

const char *sbt_error(const struct sbt_reader *r)
{
	return r ? r->err : "";
}

const struct sbt_file_hdr *sbt_header(const struct sbt_reader *r)
{
	return &r->fh;
}

const struct sb_trailer *sbt_trailer(const struct sbt_reader *r)
{
	return r->status == SBT_EOF ? &r->trailer : NULL;
}

uint64_t sbt_offset(const struct sbt_reader *r)
{
	return r->rec_off;
}

void sbt_close(struct sbt_reader *r)
{
	if (!r)
		return;
	close(r->fd);
	rfree(r);
}
