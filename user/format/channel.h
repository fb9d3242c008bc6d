/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The GPU timeline channel (schemas/channel.md): a shared-memory file
 * /dev/shm/stepblame-<pid>-<16 hex random>.chan created by the traced process
 * (the producer: CUPTI collector, simtrainer) and read by the agent. A header,
 * a bounded multi-producer ring of struct sb_gpu records, and a string table.
 *
 * The producer side is linked into foreign processes (the CUPTI collector):
 * it uses libc only, never blocks, never allocates after sbc_create, and
 * writes no records unless an agent has enabled the channel and keeps its
 * heartbeat fresh.
 *
 * The agent side trusts nothing in the file (schemas/channel.md, "Trust
 * model"): it finds the channel in the target's own mappings, validates a
 * private copy of the header once, bounds-checks every value it reads from
 * the shared memory at the point of use, and spends at most a fixed budget of
 * CPU per second on a producer.
 */
#ifndef STEPBLAME_CHANNEL_H
#define STEPBLAME_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "format/gpu.h"

#define SBC_MAGIC "SBGPUCH\0"
#define SBC_VERSION 1
#define SBC_HEADER_SIZE 512
#define SBC_SLOT_SIZE 128
#define SBC_STRING_SIZE 128
#define SBC_STRING_MAX (SBC_STRING_SIZE - 9)  /* longest name kept, bytes */
#define SBC_STRINGS 4096                      /* string table entries (ids 1..4096) */
#define SBC_MIN_SLOTS 16
#define SBC_MAX_SLOTS (1u << 22)
#define SBC_DEFAULT_SLOTS 16384
#define SBC_HEARTBEAT_TIMEOUT_NS 2000000000ull /* producer stops if older */
#define SBC_HEARTBEAT_PERIOD_NS 100000000ull   /* how often the agent refreshes */

/*
 * The file's name: /dev/shm/stepblame-<pid>-<16 hex from getrandom>.chan,
 * created with O_EXCL (a name taken by anyone else is retried with new random
 * bytes). The agent does not build this name: it looks for it in the target's
 * /proc/PID/maps (schemas/channel.md, "The file").
 */
#define SBC_DIR "/dev/shm"
#define SBC_NAME_PREFIX "stepblame-"
#define SBC_NAME_SUFFIX ".chan"
#define SBC_PATH_MAX 64 /* with the NUL */

/*
 * The agent's budgets per producer (schemas/channel.md, "Budgets"): records it
 * passes on per second; records over that it releases unread and counts as
 * dropped, per second (beyond both it stops reading and the ring fills: the
 * producer counts ring_drops); scans of /proc/PID/task per second to map the
 * thread ids of a target in another pid namespace. Each budget may be spent
 * in one burst of a second's worth.
 */
#define SBC_RECORDS_PER_SEC 500000u
#define SBC_DISCARDS_PER_SEC 2000000u
#define SBC_TID_RESCANS_PER_SEC 2u
/* mappings of /proc/PID/maps read, and channel-like ones tried, per attach */
#define SBC_MAPS_LINES_MAX 65536u
#define SBC_CANDIDATES_MAX 16u

enum sbc_control { SBC_CONTROL_OFF = 0, SBC_CONTROL_ON = 1 };

/* the shared layout; offsets are part of the format (schemas/channel.md) */
struct sbc_header {
	/* identity: written once by the producer before anything else reads it */
	char magic[8];              /*   0 "SBGPUCH\0" */
	uint32_t version;           /*   8 SBC_VERSION */
	uint32_t header_size;       /*  12 SBC_HEADER_SIZE */
	uint64_t total_size;        /*  16 bytes of the whole file */
	char producer[32];          /*  24 NUL-terminated: "simtrainer", "cupti" */
	uint32_t producer_pid;      /*  56 getpid() in the producer's pid namespace */
	uint32_t clock_id;          /*  60 clockid_t of the source's timestamps */
	int64_t clock_offset_ns;    /*  64 add to ts/end_ns to get CLOCK_MONOTONIC */
	uint32_t slot_size;         /*  72 SBC_SLOT_SIZE */
	uint32_t ring_capacity;     /*  76 slots, a power of two */
	uint64_t ring_offset;       /*  80 = header_size */
	uint32_t string_size;       /*  88 SBC_STRING_SIZE */
	uint32_t string_capacity;   /*  92 entries; id i lives in entry i-1 */
	uint64_t strings_offset;    /*  96 */
	uint64_t created_ns;        /* 104 CLOCK_MONOTONIC at creation */
	uint8_t pad0[16];           /* 112 */
	/* written by the agent */
	uint32_t control;           /* 128 enum sbc_control */
	uint32_t agent_pid;         /* 132 the agent, in its own pid namespace */
	uint64_t heartbeat_ns;      /* 136 CLOCK_MONOTONIC, refreshed every ~100 ms */
	uint32_t epoch;             /* 144 session number, bumped at every enable */
	uint32_t pad1;              /* 148 */
	uint8_t pad2[40];           /* 152 */
	/* written by the producer; cumulative since creation */
	uint64_t written;           /* 192 records put in the ring */
	uint64_t ring_drops;        /* 200 records lost: ring full */
	uint64_t string_drops;      /* 208 names lost: string table full */
	uint64_t source_drops;      /* 216 records the source itself lost (CUPTI) */
	uint64_t strings_used;      /* 224 ids handed out */
	uint8_t pad3[280];          /* 232 .. 512 */
};

struct sbc_slot {
	union {
		struct {
			uint64_t seq;       /* Vyukov sequence: pos = free for pos, pos+1 = ready */
			uint32_t epoch;     /* header epoch when written */
			uint32_t pad;
			struct sb_gpu rec;  /* 96 bytes; room to grow to 112 */
		};
		uint8_t bytes[SBC_SLOT_SIZE];
	};
};

struct sbc_string {
	uint32_t len;               /* 0 = unused; stored last, with release order */
	uint32_t hash;              /* FNV-1a of the name */
	char name[SBC_STRING_SIZE - 8]; /* NUL-terminated */
};

_Static_assert(sizeof(struct sbc_header) == SBC_HEADER_SIZE, "channel header size");
_Static_assert(offsetof(struct sbc_header, control) == 128, "control offset");
_Static_assert(offsetof(struct sbc_header, written) == 192, "counters offset");
_Static_assert(sizeof(struct sbc_slot) == SBC_SLOT_SIZE, "channel slot size");
_Static_assert(sizeof(struct sbc_string) == SBC_STRING_SIZE, "channel string size");

/* ---- producer (inside the traced process) ---- */

struct sbc_producer;

/*
 * Create this process's channel (nslots rounded up to a power of two, 0 =
 * default) under a new random name. NULL with errno set on failure; EBUSY if
 * this process already has one. The file is unlinked by sbc_destroy or at
 * normal exit, by the process that created it, and only if the name still
 * holds the file it created.
 */
struct sbc_producer *sbc_create(const char *producer, unsigned nslots);
/* the source's clock, when it is not CLOCK_MONOTONIC: ts + offset = monotonic */
void sbc_set_clock(struct sbc_producer *p, uint32_t clock_id, int64_t offset_ns);
/* an agent has enabled the channel and its heartbeat is fresh */
bool sbc_active(struct sbc_producer *p);
/* id of name (1..SBC_STRINGS), interning it; 0 if the table is full (counted) */
uint32_t sbc_intern(struct sbc_producer *p, const char *name);
/*
 * Put one record in the ring; fills h.type, h.size, and h.pid if zero.
 * 0, -EAGAIN if not active (nothing written), -ENOSPC if the ring is full
 * (counted as a drop). Lock-free, safe from any thread, never blocks.
 */
int sbc_emit(struct sbc_producer *p, const struct sb_gpu *rec);
void sbc_add_source_drops(struct sbc_producer *p, uint64_t n);
/* the file's path (SBC_DIR/SBC_NAME_PREFIX<pid>-<random>SBC_NAME_SUFFIX) */
const char *sbc_path(const struct sbc_producer *p);
/* unmap and unlink */
void sbc_destroy(struct sbc_producer *p);

/* ---- agent ---- */

struct sbc_reader;

/*
 * Map the channel of host pid `pid` read-write. It is found in the target's
 * own mappings: a shared mapping in /proc/PID/maps of a file named
 * SBC_DIR/SBC_NAME_PREFIX*SBC_NAME_SUFFIX, opened through
 * /proc/PID/map_files/ (needs CAP_SYS_ADMIN), on tmpfs, a regular file owned
 * by the target's real uid, not writable by group or others, whose header
 * passes the checks and names the target (its pid in its own namespace) as
 * the producer; other candidates are skipped. NULL with errno and a one-line
 * *err: ENOENT no channel (or no process), EPERM refused (the line says why),
 * EAGAIN still being created, EBUSY another live agent has it enabled.
 */
struct sbc_reader *sbc_attach(pid_t pid, char *err, size_t errlen);
/*
 * The same, with the text of /proc/PID/maps read by the caller (maps_len
 * bytes; < 0: reading it failed, -errno): the agent reads it with a time
 * limit, as the target can hold the lock the kernel builds it under
 * (SECURITY.md, "What the trainer can do to the agent").
 */
struct sbc_reader *sbc_attach_maps(pid_t pid, const char *maps, ssize_t maps_len, char *err,
				   size_t errlen);
/*
 * Turn collection on (a new session: records left from earlier sessions are
 * discarded, names are passed on again, counters restart) or off. 0 or -errno
 * (-EBUSY: another live agent enabled it first).
 */
int sbc_set_enabled(struct sbc_reader *r, bool on);
/* call at least every SBC_HEARTBEAT_PERIOD_NS while enabled */
void sbc_heartbeat(struct sbc_reader *r);
/*
 * Consume the ready records in order (at most one ring's worth per call, and
 * no more than the budgets allow: see SBC_RECORDS_PER_SEC).
 * For a record whose name_id was not yet passed on in this session, cb first
 * gets an SB_REC_STRING record (struct sb_text); then the struct sb_gpu
 * record (h.pid = the host pid, tids translated to host tids, timestamps on
 * CLOCK_MONOTONIC). A name that cannot be resolved is passed as name_id 0.
 * cb returns 0 to go on or -errno to stop (the record stays in the ring).
 * Returns the number of GPU records delivered, or cb's -errno, or -EIO once
 * the producer has cut the file short under the mapping (the reader is broken
 * for good: every call fails or does nothing, sbc_counters keeps the last
 * values it read; detach it).
 */
int sbc_drain(struct sbc_reader *r, int (*cb)(void *ctx, const struct sb_hdr *rec), void *ctx);
/*
 * Drops since this reader's last enable. ring_drops: records lost in the
 * channel, the producer's count (ring full) plus the records this reader
 * released unread over its record budget; string_drops, source_drops: the
 * producer's counts. The producer's counts are taken as never decreasing.
 */
void sbc_counters(struct sbc_reader *r, uint64_t *ring_drops, uint64_t *string_drops,
		  uint64_t *source_drops);

/* what the budgets did, since this reader's last enable (rescans: since attach) */
struct sbc_stats {
	uint64_t delivered;     /* GPU records passed on */
	uint64_t budget_drops;  /* released unread over the record budget (in ring_drops) */
	uint64_t tid_rescans;   /* scans of /proc/PID/task */
	uint64_t tid_unmapped;  /* tids passed as 0 because the rescan budget was spent */
};
void sbc_stats(const struct sbc_reader *r, struct sbc_stats *st);

/* budgets per second; 0 leaves one as it is (defaults: SBC_RECORDS_PER_SEC ...) */
struct sbc_budget {
	uint32_t records_per_sec;
	uint32_t discards_per_sec;
	uint32_t rescans_per_sec;
};
void sbc_set_budget(struct sbc_reader *r, const struct sbc_budget *b);

/* records of earlier sessions discarded by this reader */
uint64_t sbc_stale(const struct sbc_reader *r);
/* the producer's name, non-printable bytes replaced by '?' */
const char *sbc_producer_name(struct sbc_reader *r);
/* the path of the mapped file as the target's maps show it, printable */
const char *sbc_reader_path(const struct sbc_reader *r);
/* disable (if this reader enabled it) and unmap */
void sbc_detach(struct sbc_reader *r);

#endif
