/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The trace file (schemas/trace.md): a fixed header, then records that all
 * start with struct sb_hdr (bpf/events.h), then a trailer. Written through a
 * temporary name and renamed when complete; a file cut short is readable up
 * to its last whole record.
 */
#ifndef STEPBLAME_TRACE_H
#define STEPBLAME_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bpf/events.h"

#define SBT_MAGIC "SBTRACE\0"
#define SBT_VERSION 1
#define SBT_ENDIAN_TAG 0x01020304u
#define SBT_MAX_RECORD 65528 /* sb_hdr.size is 16 bits, multiple of 8 */
/*
 * The extension of the names stepblame gives traces (stepblame-PID.sbtrace);
 * ".sbt", which older versions gave, is Scala's build file. Any name reads:
 * the reader goes by the magic.
 */
#define SBT_EXT ".sbtrace"
/*
 * zstd-compressed traces (schemas/trace.md, "Compressed traces"): the trace
 * as zstd frames, each holding whole records, so a file cut short reads up
 * to its last whole frame. The level -z gives, and the levels accepted.
 */
#define SBT_ZSTD_LEVEL 3
#define SBT_ZSTD_LEVEL_MAX 19
/* the largest zstd window a reader gives a frame (2^23 = 8 MiB) */
#define SBT_ZSTD_WINDOW_LOG_MAX 23

struct sbt_file_hdr {
	char magic[8];          /* "SBTRACE\0" */
	uint32_t version;       /* SBT_VERSION */
	uint32_t hdr_size;      /* sizeof(struct sbt_file_hdr) */
	uint32_t endian;        /* SBT_ENDIAN_TAG as written by the host */
	uint32_t clock;         /* 1 = CLOCK_MONOTONIC */
	uint64_t created_realtime_ns; /* CLOCK_REALTIME at creation */
	uint64_t created_mono_ns;     /* CLOCK_MONOTONIC at the same instant */
};

/*
 * Text records (the TEXT rows of SB_RECORD_TYPES: host, target, thread, probe,
 * string, note, costs, guard): the header, then a u32 length of the text and
 * the text itself (key=value lines for HOST, TARGET, COSTS and GUARD, see
 * schemas/trace.md), zero-padded to a multiple of 8.
 */
struct sb_text {
	struct sb_hdr h;
	uint32_t len;
	uint32_t id;  /* STRING: id; PROBE: 1 attached, 0 not; others 0 */
	char text[];
};

struct sb_cpu {
	struct sb_hdr h;        /* cpu = the CPU */
	uint32_t node;          /* NUMA node */
	uint32_t online;
};

/* the last record of a complete file */
struct sb_trailer {
	struct sb_hdr h;        /* ts = end of capture */
	uint64_t records[SB_TYPE_MAX]; /* records written, by type (trailer excluded) */
	uint64_t drops_total;   /* all drops, every source */
	uint64_t start_ns;      /* capture start */
	uint32_t end_reason;    /* enum sbt_end */
	uint32_t pad;
};

enum sbt_end {
	SBT_END_DURATION = 1,   /* -d expired */
	SBT_END_SIGNAL = 2,     /* SIGINT / SIGTERM */
	SBT_END_TARGET_EXIT = 3,/* the target exited */
	SBT_END_ERROR = 4,      /* the agent stopped on an error (disk full, ...) */
	SBT_END_CREDENTIALS = 5,/* the target took another user's credentials (setuid exec) */
};

/* ---- writer ---- */

struct sbt_writer;

/*
 * Create path's temporary sibling (path.partial.XXXXXX, 0644 less the umask,
 * O_EXCL) and write the file header. NULL with errno set on failure.
 * A failed write (ENOSPC, EIO, EFBIG) returns -errno and leaves the file ending
 * on its last whole record; the record that failed is not written or counted,
 * and records accepted earlier but not yet on disk stay buffered for the next
 * flush (sbt_abandon tries once more, then keeps what reached the disk).
 * Records are validated with sbt_check_record (-EINVAL if bad, and for the
 * trailer type, which only sbt_finish writes).
 */
struct sbt_writer *sbt_create(const char *path);
struct sb_owner;
/*
 * The same, for the user owner (NULL: the caller): refuses a path owner could
 * not create or replace, and gives the file to owner on its descriptor
 * before writing (outfile.h). zstd_level 1..SBT_ZSTD_LEVEL_MAX: written as
 * zstd frames, one per buffer of records written out; 0: plain. NULL with
 * errno and one line in err.
 */
struct sbt_writer *sbt_create_as(const char *path, const struct sb_owner *owner, int zstd_level,
				 char *err, size_t errlen);
/* the name asks for a compressed trace: it ends in ".zst" */
bool sbt_name_is_zstd(const char *path);
/* append one record (rec->size bytes); buffered, no allocation. 0 or -errno */
int sbt_write(struct sbt_writer *w, const void *rec);
/* a text record of the given type */
int sbt_write_text(struct sbt_writer *w, uint16_t type, uint32_t id, uint64_t ts,
		   uint32_t pid, uint32_t tid, const char *text, size_t len);
/*
 * Build a text record in buf (cap bytes, 8-aligned); text longer than fits is
 * cut. Returns the record's size, 0 if cap cannot hold even the header.
 */
size_t sb_text_build(void *buf, size_t cap, uint16_t type, uint32_t id, uint64_t ts,
		     uint32_t pid, uint32_t tid, const char *text, size_t len);
/* flush buffered records to the kernel (not fsync) */
int sbt_flush(struct sbt_writer *w);
/* write the trailer, fsync, rename to the final name; frees w. 0 or -errno */
int sbt_finish(struct sbt_writer *w, uint32_t end_reason, uint64_t start_ns, uint64_t end_ns,
	       uint64_t drops_total);
/* give up: close and leave the partial file as it is (readable); frees w */
void sbt_abandon(struct sbt_writer *w);
/* give up: close and remove the partial file; frees w */
void sbt_discard(struct sbt_writer *w);
/*
 * Cut short (a write failed): flush what can be, then rename the partial
 * file, readable up to its last whole record, onto the final name. 0, or
 * -errno and the partial file is left under its temporary name. Frees w.
 */
int sbt_salvage(struct sbt_writer *w);
/* the open file (for a reader of the same inode), -1 after finish */
int sbt_fd(const struct sbt_writer *w);
const char *sbt_partial_path(const struct sbt_writer *w);
uint64_t sbt_count(const struct sbt_writer *w, uint16_t type);

/* ---- reader ---- */

enum sbt_status {
	SBT_OK = 0,
	SBT_EOF = 1,            /* clean end: trailer seen */
	SBT_TRUNCATED = 2,      /* file ends without trailer (cut short) */
	SBT_CORRUPT = 3,        /* a record violates the format */
	SBT_IO = 4,
};

struct sbt_reader;

/*
 * Open and validate the header ("-": standard input); a zstd-compressed trace
 * is read through its frames, whatever its name. NULL and *err (one line) on
 * failure.
 */
struct sbt_reader *sbt_open(const char *path, char *err, size_t errlen);
/* the file is zstd-compressed (offsets are then those of the decompressed trace) */
bool sbt_is_zstd(const struct sbt_reader *r);
/*
 * Next record into the reader's buffer (valid until the next call, 8-aligned).
 * Returns SBT_OK with *rec set, or a status, which then sticks: SBT_EOF after
 * the trailer (not handed out as a record: see sbt_trailer), SBT_TRUNCATED when
 * the file ends without one; sbt_error() says why (one line, with the byte
 * offset) for SBT_TRUNCATED, SBT_CORRUPT and SBT_IO.
 */
enum sbt_status sbt_next(struct sbt_reader *r, const struct sb_hdr **rec);
const char *sbt_error(const struct sbt_reader *r);
const struct sbt_file_hdr *sbt_header(const struct sbt_reader *r);
/* the trailer, once sbt_next returned SBT_EOF */
const struct sb_trailer *sbt_trailer(const struct sbt_reader *r);
/* file offset of the record last returned, or of where reading stopped */
uint64_t sbt_offset(const struct sbt_reader *r);
void sbt_close(struct sbt_reader *r);

/*
 * validate one record's type and size against the format, avail = bytes readable
 * at h; NULL if fine, else why (a thread-local string valid until the next call)
 */
const char *sbt_check_record(const struct sb_hdr *h, size_t avail);

/* ---- record types: the table SB_RECORD_TYPES in bpf/events.h ---- */

/* one row of the table, indexed by type; all zero for a type not defined */
struct sb_type_info {
	const char *name;       /* NULL: not defined */
	const char *struct_name; /* its struct, "sb_switch_out", ... */
	uint16_t size;          /* its struct: the smallest valid record */
	uint8_t kind;           /* enum sb_rec_kind */
	uint8_t start_off;      /* offset of its u64 interval start; 0: none, an instant */
};

extern const struct sb_type_info sb_types[SB_TYPE_MAX];

/* smallest valid size of a record of this type (its struct); 0 if the type is not defined */
size_t sb_type_size(unsigned type);

/* enum sb_rec_kind of the type, SB_KIND_NONE if not defined */
static inline unsigned sb_type_kind(unsigned type)
{
	return type < SB_TYPE_MAX ? sb_types[type].kind : SB_KIND_NONE;
}

/* a text record: struct sb_text, then its text */
static inline bool sb_type_is_text(unsigned type)
{
	return sb_type_kind(type) == SB_KIND_TEXT;
}

/* what the blame engine takes into its time-ordered window: kernel events and GPU records */
static inline bool sb_type_is_engine_input(unsigned type)
{
	unsigned k = sb_type_kind(type);

	return k == SB_KIND_KERNEL || k == SB_KIND_GPU;
}

/*
 * The agent's records the engine reads as they come (text, CPU, statistics,
 * trailer): their smallest valid size; 0 for the engine's inputs and undefined types.
 */
static inline size_t sb_meta_min(unsigned type)
{
	unsigned k = sb_type_kind(type);

	return k == SB_KIND_TEXT || k == SB_KIND_META || k == SB_KIND_TRAILER ?
		       sb_types[type].size : 0;
}

/*
 * When a record starts to matter: for a type that stands for an interval
 * [start, ts], its start if nonzero and not after h->ts; otherwise h->ts.
 * h must be a whole record of its type (sbt_check_record).
 */
static inline uint64_t sb_rec_start(const struct sb_hdr *h)
{
	unsigned off = h->type < SB_TYPE_MAX ? sb_types[h->type].start_off : 0;
	uint64_t s;

	if (!off)
		return h->ts;
	memcpy(&s, (const char *)h + off, sizeof(s));
	return s && s <= h->ts ? s : h->ts;
}

/* every drop a drops record counts, all sources together */
static inline uint64_t sb_drops_total(const struct sb_drops *d)
{
	uint64_t t = d->gpu_channel + d->gpu_source + d->wait_overflow;

	for (int i = 0; i <= SB_EV_KERNEL_MAX; i++)
		t += d->ring[i];
	return t;
}

/* names for dump and reports: sb_types[type].name, "unknown" if not defined */
const char *sb_type_name(unsigned type);
const char *sb_state_name(unsigned state);
const char *sb_alloc_fn_name(unsigned fn);
const char *sb_mmsys_name(unsigned call);
/* enum sb_io_call: "read", "write", ...; "unknown" */
const char *sb_io_name(unsigned call);
/* a softirq vector (the kernel's order): "HI", "TIMER", "NET_TX", "NET_RX", ...; "unknown" */
const char *sb_softirq_name(unsigned vec);
/* enum sb_sysirq: "local_timer", "call_function", "reschedule", "irq_work"; "unknown" */
const char *sb_sysirq_name(unsigned k);
/* enum sb_file_kind: "none", "regular", "socket", "pipe", "char", "block", "dir", "other" */
const char *sb_file_kind_name(unsigned kind);
/* the mapping tail of an mmap record, NULL if the record (an older trace's, or not mmap) has none */
const struct sb_mmsys_map *sb_mmsys_map_of(const struct sb_hdr *h);
/* the file tail of an iosys record, NULL if the record (an older trace's) has none */
const struct sb_iosys_file *sb_iosys_file_of(const struct sb_hdr *h);
/* a step record's count of its thread's fast allocator calls; NULL: it has none */
const struct sb_step_alloc *sb_step_alloc_of(const struct sb_hdr *h);
/*
 * f's name as a path, root first ("/ckpt/model.pt"; "…/x/y" when the walk did
 * not reach the root), bytes outside printable ASCII as '?'; "" if it has no
 * name. Returns the length written (out always ends in NUL).
 */
size_t sb_iosys_file_path(const struct sb_iosys_file *f, char *out, size_t cap);
/* enum sbt_end: "duration", "signal", "target_exit", "error", "target_credentials"; "unknown" */
const char *sbt_end_name(unsigned reason);

#endif
