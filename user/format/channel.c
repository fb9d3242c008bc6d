// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The GPU timeline channel (schemas/channel.md). The producer half runs inside
 * the traced process, so it depends on libc only (no util.c) and is careful:
 * lock-free, no allocation after create, bounded loops even if the shared
 * memory is scribbled on. The reader half treats every shared byte as
 * untrusted input (schemas/channel.md, "Trust model"): it finds the file in
 * the target's mappings, checks a private copy of the header once, bounds
 * every value it reads from the mapping where it uses it, and spends at most
 * its budgets ("Budgets") on a producer.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "format/channel.h"
#include "format/maps.h"
#include "format/trace.h"

#define LOAD(p, mo) __atomic_load_n((p), __ATOMIC_##mo)
#define STORE(p, v, mo) __atomic_store_n((p), (v), __ATOMIC_##mo)
#define ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)

static uint32_t fnv1a(const char *s, size_t len)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

static size_t channel_size(uint32_t nslots)
{
	return SBC_HEADER_SIZE + (size_t)nslots * SBC_SLOT_SIZE +
	       (size_t)SBC_STRINGS * SBC_STRING_SIZE;
}

/* ---------------------------------------------------------------- producer */

#define HASH_SLOTS (2 * SBC_STRINGS) /* power of two, never more than half full */

struct sbc_producer {
	struct sbc_header *hdr;
	struct sbc_slot *ring;
	struct sbc_string *strings;
	size_t map_len;
	uint32_t mask;
	uint32_t pid;
	char path[SBC_PATH_MAX];
	dev_t dev;                  /* the file created, to unlink nothing else */
	ino_t ino;
	/* key = hash << 32 | id; 0 = empty. Names are compared in the shared table. */
	uint64_t names[HASH_SLOTS];
	uint32_t next_id;
	_Alignas(64) uint64_t head; /* next position to claim; private, so no agent can stall us */
};

/* one channel per process; the atexit hook unlinks it, in the creator only */
static int g_have_channel;
static pid_t g_owner;
static char g_path[SBC_PATH_MAX];
static dev_t g_dev;
static ino_t g_ino;
/*
 * getpid() of the running process, kept by an atfork handler: a forked child
 * inherits the parent's producer and mapping, and must not write into the
 * parent's ring. One plain load on the emit path instead of a getpid() call.
 */
static pid_t g_self;

static void after_fork_in_child(void)
{
	g_self = getpid();
}

/* unlink path only while it still names the file this process created */
static void unlink_mine(const char *path, dev_t dev, ino_t ino)
{
	struct stat st;

	if (!lstat(path, &st) && st.st_dev == dev && st.st_ino == ino)
		unlink(path);
}

static void unlink_at_exit(void)
{
	if (LOAD(&g_have_channel, ACQUIRE) && getpid() == g_owner)
		unlink_mine(g_path, g_dev, g_ino);
}

/* 64 unpredictable bits: getrandom, else /dev/urandom */
static int random64(uint64_t *out)
{
	uint8_t *b = (uint8_t *)out;
	size_t got = 0;
	int fd;

	while (got < sizeof(*out)) {
		ssize_t n = getrandom(b + got, sizeof(*out) - got, GRND_NONBLOCK);

		if (n > 0)
			got += (size_t)n;
		else if (n < 0 && errno == EINTR)
			continue;
		else
			break;
	}
	if (got == sizeof(*out))
		return 0;
	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	for (got = 0; got < sizeof(*out);) {
		ssize_t n = read(fd, b + got, sizeof(*out) - got);

		if (n > 0)
			got += (size_t)n;
		else if (!(n < 0 && errno == EINTR))
			break;
	}
	close(fd);
	return got == sizeof(*out) ? 0 : -1;
}

/*
 * Create a new file under a random name: O_EXCL, so a name anyone else holds
 * (a squatter guessing names, a file left by a dead process) is never opened,
 * followed or removed, only skipped for another random name.
 */
static int create_file(char *path, size_t pathlen, uint32_t pid)
{
	for (int attempt = 0; attempt < 16; attempt++) {
		uint64_t rnd;
		int fd;

		if (random64(&rnd))
			return -1;
		snprintf(path, pathlen, SBC_DIR "/" SBC_NAME_PREFIX "%u-%016llx" SBC_NAME_SUFFIX,
			 pid, (unsigned long long)rnd);
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	path[0] = 0;
	errno = EEXIST;
	return -1;
}

struct sbc_producer *sbc_create(const char *producer, unsigned nslots)
{
	static int atexit_done;
	struct sbc_producer *p;
	uint32_t n = SBC_MIN_SLOTS;
	int fd = -1, err, expected = 0;
	struct stat st;
	size_t len;
	void *map;

	if (!nslots)
		nslots = SBC_DEFAULT_SLOTS;
	if (nslots > SBC_MAX_SLOTS)
		nslots = SBC_MAX_SLOTS;
	while (n < nslots)
		n <<= 1;
	if (!__atomic_compare_exchange_n(&g_have_channel, &expected, 1, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE) &&
	    LOAD(&g_owner, ACQUIRE) == getpid()) {
		errno = EBUSY;
		return NULL;
	}
	/* else the flag was inherited across fork: that channel is the parent's */
	/* calloc only promises 16-byte alignment; head wants its own cache line */
	p = aligned_alloc(_Alignof(struct sbc_producer),
			  (sizeof(*p) + _Alignof(struct sbc_producer) - 1) &
				  ~(_Alignof(struct sbc_producer) - 1));
	if (p)
		memset(p, 0, sizeof(*p));
	if (!p) {
		STORE(&g_have_channel, 0, RELEASE);
		errno = ENOMEM;
		return NULL;
	}
	p->pid = (uint32_t)getpid();
	len = channel_size(n);

	fd = create_file(p->path, sizeof(p->path), p->pid);
	if (fd < 0) {
		p->path[0] = 0; /* nothing of ours to unlink */
		goto fail;
	}
	if (fstat(fd, &st))
		goto fail_unlink;
	p->dev = st.st_dev;
	p->ino = st.st_ino;
	if (fchmod(fd, 0600))
		goto fail_unlink;
	/* reserve the tmpfs pages now: no SIGBUS later when /dev/shm fills up */
	err = posix_fallocate(fd, 0, (off_t)len);
	if (err == EOPNOTSUPP || err == EINVAL)
		err = ftruncate(fd, (off_t)len) ? errno : 0;
	if (err) {
		errno = err;
		goto fail_unlink;
	}
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		goto fail_unlink;
	close(fd);
	fd = -1;

	/* touching every page here keeps page faults off the emit path */
	memset(map, 0, len);
	p->hdr = map;
	p->map_len = len;
	p->mask = n - 1;
	p->ring = (struct sbc_slot *)((char *)map + SBC_HEADER_SIZE);
	p->strings = (struct sbc_string *)((char *)map + SBC_HEADER_SIZE + (size_t)n * SBC_SLOT_SIZE);
	for (uint32_t i = 0; i < n; i++)
		p->ring[i].seq = i;

	struct sbc_header *h = p->hdr;
	h->version = SBC_VERSION;
	h->header_size = SBC_HEADER_SIZE;
	h->total_size = len;
	snprintf(h->producer, sizeof(h->producer), "%s", producer ? producer : "");
	h->producer_pid = p->pid;
	h->clock_id = CLOCK_MONOTONIC;
	h->slot_size = SBC_SLOT_SIZE;
	h->ring_capacity = n;
	h->ring_offset = SBC_HEADER_SIZE;
	h->string_size = SBC_STRING_SIZE;
	h->string_capacity = SBC_STRINGS;
	h->strings_offset = SBC_HEADER_SIZE + (uint64_t)n * SBC_SLOT_SIZE;
	h->created_ns = mono_ns();
	/* the magic last: a reader that sees it sees a complete header */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(h->magic, SBC_MAGIC, sizeof(h->magic));

	snprintf(g_path, sizeof(g_path), "%s", p->path);
	g_dev = p->dev;
	g_ino = p->ino;
	STORE(&g_owner, (pid_t)p->pid, RELEASE);
	g_self = (pid_t)p->pid;
	if (!atexit_done) {
		atexit_done = 1;
		atexit(unlink_at_exit);
		pthread_atfork(NULL, NULL, after_fork_in_child);
	}
	return p;

fail_unlink:
	err = errno;
	if (p->ino)
		unlink_mine(p->path, p->dev, p->ino);
	else
		unlink(p->path); /* made with O_EXCL a moment ago; fstat failed */
	errno = err;
fail:
	err = errno;
	if (fd >= 0)
		close(fd);
	free(p);
	STORE(&g_have_channel, 0, RELEASE);
	errno = err;
	return NULL;
}

void sbc_set_clock(struct sbc_producer *p, uint32_t clock_id, int64_t offset_ns)
{
	if (!p)
		return;
	STORE(&p->hdr->clock_offset_ns, offset_ns, RELAXED);
	STORE(&p->hdr->clock_id, clock_id, RELAXED);
}

bool sbc_active(struct sbc_producer *p)
{
	uint64_t hb;

	if (!p || LOAD(&p->hdr->control, ACQUIRE) != SBC_CONTROL_ON ||
	    (pid_t)p->pid != LOAD(&g_self, RELAXED))
		return false;
	hb = LOAD(&p->hdr->heartbeat_ns, RELAXED);
	return mono_ns() - hb < SBC_HEARTBEAT_TIMEOUT_NS;
}

static bool name_matches(struct sbc_producer *p, uint64_t key, uint32_t hash, const char *name,
			 size_t len)
{
	uint32_t id = (uint32_t)key;

	if ((uint32_t)(key >> 32) != hash || id == 0 || id > SBC_STRINGS)
		return false;
	const struct sbc_string *e = &p->strings[id - 1];
	return LOAD(&e->len, ACQUIRE) == len && !memcmp(e->name, name, len);
}

uint32_t sbc_intern(struct sbc_producer *p, const char *name)
{
	uint32_t hash, mine = 0;
	size_t len;

	if (!p || !name)
		return 0;
	len = strnlen(name, SBC_STRING_MAX);
	if (!len)
		return 0;
	hash = fnv1a(name, len);
	for (uint32_t i = 0, at = hash & (HASH_SLOTS - 1); i < HASH_SLOTS;
	     i++, at = (at + 1) & (HASH_SLOTS - 1)) {
		uint64_t key = LOAD(&p->names[at], ACQUIRE);

		if (key) {
			if (name_matches(p, key, hash, name, len))
				return (uint32_t)key;
			continue;
		}
		if (!mine) {
			/* checked first so that failed calls cannot wrap the counter */
			if (LOAD(&p->next_id, RELAXED) >= SBC_STRINGS ||
			    (mine = ADD(&p->next_id, 1) + 1) > SBC_STRINGS) {
				ADD(&p->hdr->string_drops, 1);
				return 0;
			}
			struct sbc_string *e = &p->strings[mine - 1];
			memcpy(e->name, name, len);
			e->name[len] = 0;
			e->hash = hash;
			STORE(&e->len, (uint32_t)len, RELEASE);
			ADD(&p->hdr->strings_used, 1);
		}
		uint64_t want = (uint64_t)hash << 32 | mine;
		if (__atomic_compare_exchange_n(&p->names[at], &key, want, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return mine;
		/* lost the race for this slot; if it was the same name, that id wins */
		if (name_matches(p, key, hash, name, len))
			return (uint32_t)key;
	}
	return mine; /* unreachable: the hash table is twice the id space */
}

int sbc_emit(struct sbc_producer *p, const struct sb_gpu *rec)
{
	struct sbc_slot *s;
	uint64_t pos;
	uint32_t epoch;

	if (!p || !rec)
		return -EINVAL;
	if (!sbc_active(p))
		return -EAGAIN;
	epoch = LOAD(&p->hdr->epoch, RELAXED);
	pos = LOAD(&p->head, RELAXED);
	/* bounded: a scribbled ring must cost a drop, never a hang */
	for (int tries = 0;; tries++) {
		if (tries == 256)
			goto full;
		s = &p->ring[pos & p->mask];
		int64_t d = (int64_t)(LOAD(&s->seq, ACQUIRE) - pos);

		if (d == 0) {
			if (__atomic_compare_exchange_n(&p->head, &pos, pos + 1, true,
							__ATOMIC_RELAXED, __ATOMIC_RELAXED))
				break;
		} else if (d < 0) {
			goto full;
		} else {
			pos = LOAD(&p->head, RELAXED);
		}
	}
	s->epoch = epoch;
	s->pad = 0;
	memcpy(&s->rec, rec, sizeof(s->rec));
	s->rec.h.type = SB_REC_GPU;
	s->rec.h.size = sizeof(struct sb_gpu);
	if (!s->rec.h.pid)
		s->rec.h.pid = p->pid;
	STORE(&s->seq, pos + 1, RELEASE);
	ADD(&p->hdr->written, 1);
	return 0;
full:
	ADD(&p->hdr->ring_drops, 1);
	return -ENOSPC;
}

void sbc_add_source_drops(struct sbc_producer *p, uint64_t n)
{
	if (p && n)
		ADD(&p->hdr->source_drops, n);
}

const char *sbc_path(const struct sbc_producer *p)
{
	return p ? p->path : NULL;
}

void sbc_destroy(struct sbc_producer *p)
{
	if (!p)
		return;
	if (getpid() == (pid_t)p->pid)
		unlink_mine(p->path, p->dev, p->ino);
	munmap(p->hdr, p->map_len);
	if (getpid() == (pid_t)p->pid)
		STORE(&g_have_channel, 0, RELEASE);
	free(p);
}

/* ------------------------------------------------------------------ reader */

/*
 * Host tids of a target in another pid namespace: a set-associative cache of
 * TID_SETS x TID_WAYS entries where the oldest entry of a set gives way, so a
 * producer inventing thread ids costs a bounded table and O(1) lookups. A
 * miss costs a scan of /proc/PID/task (at most TID_SCAN_MAX entries) only
 * while the rescan budget lasts; past it the tid is passed as 0.
 */
#define TID_SETS 256
#define TID_WAYS 4
#define TID_SCAN_MAX 2048
#define TID_MISS_TTL_NS 1000000000ull /* a tid a scan did not find: believed gone so long */
#define NSEC 1000000000ull
/* a clock offset beyond +-2^62 ns (146 years) is no calibration: ignored */
#define CLOCK_OFFSET_MAX (1ll << 62)
#define COUNTER_MAX (1ull << 62)      /* the producer's counters saturate here */
#define MAPS_BYTES_MAX (8u << 20)     /* of /proc/PID/maps read per attach */

struct tidmap {
	uint32_t ns, host; /* ns 0: empty; host 0: not found */
	uint64_t when;     /* CLOCK_MONOTONIC of the scan that saw it (or missed it) */
};

/* a per-second budget: credit in billionths of an item, at most a second's worth */
struct bucket {
	uint64_t rate, credit, last;
};

struct sbc_reader {
	/*
	 * The mapping (the header is its first bytes). Every pointer and size
	 * below comes from the private copy of the header validated at attach,
	 * never from the live shared header.
	 */
	struct sbc_header *hdr;
	struct sbc_slot *ring;
	struct sbc_string *strings;
	size_t map_len;
	uint32_t cap, mask, scap;
	uint64_t pos;          /* next position to consume */
	uint32_t epoch;        /* our session; 0 = never enabled */
	bool enabled;
	pid_t pid, nspid;
	bool translate;        /* target in another pid namespace: map its tids */
	uint64_t stale;
	uint64_t base_ring, base_string, base_source;
	uint64_t last_ring, last_string, last_source; /* what sbc_counters last read */
	bool broken;           /* the file was cut short under the mapping (SIGBUS) */
	uint64_t *seen;        /* bitmap of string ids passed on this session */
	char producer[sizeof(((struct sbc_header *)0)->producer)];
	char path[128];        /* printable */
	uint64_t now;          /* CLOCK_MONOTONIC at the start of this drain */
	struct bucket deliver, discard, rescan;
	uint64_t delivered, budget_drops, tid_rescans, tid_unmapped;
	struct tidmap tids[TID_SETS][TID_WAYS];
	struct sb_gpu rec;
	union {
		struct sb_text t;
		char bytes[sizeof(struct sb_text) + SBC_STRING_SIZE];
	} text;
};

static void bucket_init(struct bucket *b, uint32_t rate, uint64_t now)
{
	b->rate = rate;
	b->credit = (uint64_t)rate * NSEC;
	b->last = now;
}

static void bucket_refill(struct bucket *b, uint64_t now)
{
	uint64_t dt = now > b->last ? now - b->last : 0;

	if (dt > NSEC)
		dt = NSEC;
	b->last = now;
	b->credit += dt * b->rate; /* rate < 2^32: no overflow */
	if (b->credit > b->rate * NSEC)
		b->credit = b->rate * NSEC;
}

static bool bucket_take(struct bucket *b)
{
	if (b->credit < NSEC)
		return false;
	b->credit -= NSEC;
	return true;
}

/* copy out of the shared mapping a word at a time: each word is read exactly once */
static void copy_shared(void *dst, const void *src, size_t n)
{
	const uint64_t *s = src;
	uint64_t *d = dst;

	for (size_t i = 0; i < n / 8; i++)
		d[i] = LOAD(&s[i], RELAXED);
}

/*
 * The producer's user owns the channel file and may truncate it while the
 * agent has it mapped: touching a mapped page past the new end of the file is
 * SIGBUS, which would kill the agent (root) on the trainer's say-so. So every
 * access of the reader to the mapping runs under a guard: a SIGBUS at an
 * address inside the guarded mapping jumps back out, the reader is marked
 * broken and its calls fail with -EIO from then on. Any other SIGBUS goes to
 * whatever handled it before. Only the agent's side installs the handler.
 */
static struct sigaction bus_prev;
static pthread_once_t bus_once = PTHREAD_ONCE_INIT;
static __thread sigjmp_buf *bus_jmp;
static __thread const char *bus_lo, *bus_hi;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	const char *a = si->si_addr;

	if (bus_jmp && a >= bus_lo && a < bus_hi)
		siglongjmp(*bus_jmp, 1);
	if (bus_prev.sa_flags & SA_SIGINFO)
		bus_prev.sa_sigaction(sig, si, uc);
	else if (bus_prev.sa_handler != SIG_DFL && bus_prev.sa_handler != SIG_IGN)
		bus_prev.sa_handler(sig);
	else
		signal(SIGBUS, SIG_DFL); /* the access faults again, with the default action */
}

static void bus_install(void)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_NODEFER };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &bus_prev);
}

/*
 * Open a guarded section over [lo, lo + len) in a function returning `fail`;
 * close it with BUS_END() on every return path. Nothing set inside the section
 * may be relied on once the jump is taken (only *broken is written there).
 */
#define BUS_BEGIN(lo, len, broken, fail) \
	sigjmp_buf bus_jb_; \
	if (sigsetjmp(bus_jb_, 0)) { \
		bus_jmp = NULL; \
		*(broken) = true; \
		return fail; \
	} \
	bus_lo = (const char *)(lo); \
	bus_hi = bus_lo + (len); \
	bus_jmp = &bus_jb_
#define BUS_END() (bus_jmp = NULL)

static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static ssize_t read_text(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got = 0, n;

	if (fd < 0)
		return -errno;
	while ((size_t)got + 1 < len) {
		n = read(fd, buf + got, len - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += n;
	}
	buf[got] = 0;
	close(fd);
	return got;
}

/* the numbers after "Key:" in a /proc status text; returns how many */
static int status_numbers(const char *status, const char *key, long *out, int max)
{
	const char *p = status;
	size_t klen = strlen(key);
	int n = 0;

	while (p && *p) {
		if (!strncmp(p, key, klen)) {
			p += klen;
			while (n < max) {
				char *end;
				long v;

				while (*p == ' ' || *p == '\t')
					p++;
				if (!isdigit((unsigned char)*p))
					break;
				v = strtol(p, &end, 10);
				out[n++] = v;
				p = end;
			}
			return n;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return 0;
}

static bool agent_alive(uint32_t pid)
{
	/* the producer can write any number here: only a real pid is looked at */
	return (int32_t)pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

static bool busy(struct sbc_header *h)
{
	uint32_t agent = LOAD(&h->agent_pid, RELAXED);

	return LOAD(&h->control, ACQUIRE) == SBC_CONTROL_ON &&
	       mono_ns() - LOAD(&h->heartbeat_ns, RELAXED) < SBC_HEARTBEAT_TIMEOUT_NS &&
	       agent != (uint32_t)getpid() && agent_alive(agent);
}

/*
 * The consumer position follows from the slots alone: every slot waits for
 * exactly one position in [tail, tail + capacity), ready ones for seq - 1,
 * free ones for seq. So a reader needs no state from an earlier reader, even
 * one killed halfway through consuming a slot.
 */
static int find_tail(struct sbc_reader *r, uint64_t *tail)
{
	uint64_t min = UINT64_MAX;

	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < r->cap; i++) {
			uint64_t seq = LOAD(&r->ring[i].seq, ACQUIRE), want;

			if ((seq & r->mask) == i)
				want = seq;
			else if (((seq - 1) & r->mask) == i)
				want = seq - 1;
			else
				return -1;
			if (pass == 0 && want < min)
				min = want;
			/* producers may publish meanwhile; that keeps each slot's position */
			if (pass == 1 && want != min + ((i - min) & r->mask))
				return -1;
		}
	}
	*tail = min;
	return 0;
}

/* h: the private copy of the header; every check is on it, never on the live one */
static int check_header(const struct sbc_header *h, size_t size, pid_t nspid, char *why,
			size_t whylen)
{
	uint32_t cap = h->ring_capacity;

	if (memcmp(h->magic, SBC_MAGIC, sizeof(h->magic))) {
		static const char zero[8];

		if (!memcmp(h->magic, zero, sizeof(zero))) {
			snprintf(why, whylen, "is still being created");
			return -EAGAIN;
		}
		snprintf(why, whylen, "has a bad magic (not a stepblame channel)");
		return -EPERM;
	}
	if (h->version != SBC_VERSION) {
		snprintf(why, whylen, "has version %u, this stepblame reads version %u", h->version,
			 SBC_VERSION);
		return -EPERM;
	}
	if (h->header_size != SBC_HEADER_SIZE || h->slot_size != SBC_SLOT_SIZE ||
	    h->string_size != SBC_STRING_SIZE || cap < SBC_MIN_SLOTS || cap > SBC_MAX_SLOTS ||
	    (cap & (cap - 1)) || h->ring_offset != SBC_HEADER_SIZE || !h->string_capacity ||
	    h->string_capacity > 65536 ||
	    h->strings_offset != SBC_HEADER_SIZE + (uint64_t)cap * SBC_SLOT_SIZE ||
	    h->total_size != h->strings_offset + (uint64_t)h->string_capacity * SBC_STRING_SIZE ||
	    h->total_size != size) {
		snprintf(why, whylen, "has an inconsistent layout (sizes do not match the file)");
		return -EPERM;
	}
	if ((pid_t)h->producer_pid != nspid) {
		snprintf(why, whylen, "was made by pid %u, not %d", h->producer_pid, (int)nspid);
		return -ESRCH; /* another process's channel: sbc_attach tries the next */
	}
	return 0;
}

/* ---- finding the channel in the target's mappings ---- */

struct cand {
	unsigned long start, end;
	dev_t dev;
	unsigned long long ino;
	char path[128]; /* printable */
};

/* bytes to a printable string: what the producer chose reaches terminals and notes */
static void printable(char *dst, size_t dstlen, const char *src, size_t len)
{
	size_t i;

	if (!dstlen)
		return;
	for (i = 0; i < len && i + 1 < dstlen; i++)
		dst[i] = isprint((unsigned char)src[i]) ? src[i] : '?';
	dst[i] = 0;
}

/* SBC_DIR/SBC_NAME_PREFIX...SBC_NAME_SUFFIX, nothing more: a channel's name */
static bool channel_name(const char *path, size_t len)
{
	static const char dir[] = SBC_DIR "/" SBC_NAME_PREFIX, suf[] = SBC_NAME_SUFFIX;
	const size_t dl = sizeof(dir) - 1, sl = sizeof(suf) - 1;

	return len > dl + sl && !memcmp(path, dir, dl) && !memcmp(path + len - sl, suf, sl) &&
	       !memchr(path + dl, '/', len - dl - sl);
}

/* one line of /proc/PID/maps: a shared mapping of a channel-named file? */
static bool maps_candidate(char *line, struct cand *c)
{
	static const char deleted[] = " (deleted)";
	struct maps_line l;
	size_t len;

	if (!maps_line_parse(line, &l) || l.perms[3] != 's' || !l.ino || l.end <= l.start)
		return false;
	line = (char *)l.name;
	len = strlen(line);
	if (len > sizeof(deleted) - 1 &&
	    !strcmp(line + len - (sizeof(deleted) - 1), deleted))
		len -= sizeof(deleted) - 1;
	if (!channel_name(line, len))
		return false;
	c->start = l.start;
	c->end = l.end;
	c->dev = makedev(l.maj, l.min);
	c->ino = l.ino;
	printable(c->path, sizeof(c->path), line, len);
	return true;
}

/*
 * The distinct channel-like shared mappings in the maps text of a process
 * (len bytes), in their order, at most max of them; looks at most at
 * SBC_MAPS_LINES_MAX lines and MAPS_BYTES_MAX bytes (a target can have any
 * number of mappings). A line longer than a path allows, or cut short at
 * the end of the text, is no channel's.
 */
static int scan_maps(const char *text, size_t len, struct cand *out, unsigned max)
{
	const char *p = text, *end = text + (len < MAPS_BYTES_MAX ? len : MAPS_BYTES_MAX);
	unsigned lines = 0, n = 0;
	char line[8192];

	while (p < end && n < max && lines < SBC_MAPS_LINES_MAX) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		struct cand c;

		if (!nl)
			break;
		if ((size_t)(nl - p) < sizeof(line)) {
			memcpy(line, p, (size_t)(nl - p));
			line[nl - p] = 0;
			if (maps_candidate(line, &c)) {
				bool dup = false;

				for (unsigned i = 0; i < n; i++)
					dup |= out[i].dev == c.dev && out[i].ino == c.ino;
				if (!dup)
					out[n++] = c;
			}
		}
		lines++;
		p = nl + 1;
	}
	return (int)n;
}

/* the maps text of pid, read here (up to MAPS_BYTES_MAX) into a buffer to free: its length, or -errno */
static ssize_t read_maps_plain(pid_t pid, char **out)
{
	char path[64];
	size_t have = 0, cap = 1u << 16;
	char *buf = NULL;
	int fd;

	*out = NULL;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t k;

		if (have == cap || !buf) {
			char *nb;

			if (buf && cap >= MAPS_BYTES_MAX)
				break;
			cap = buf ? cap * 2 : cap;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				close(fd);
				return -ENOMEM;
			}
			buf = nb;
		}
		k = read(fd, buf + have, cap - have);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		have += (size_t)k;
	}
	close(fd);
	*out = buf;
	return (ssize_t)have;
}

/* the checks on the file itself, on a stat of it (schemas/channel.md, "The file") */
static int check_file(const struct stat *st, long uid, pid_t pid, const char *path, char *err,
		      size_t errlen)
{
	if (!S_ISREG(st->st_mode)) {
		set_err(err, errlen, "refusing %s: not a regular file", path);
		return -EPERM;
	}
	if ((long)st->st_uid != uid) {
		set_err(err, errlen, "refusing %s: owned by uid %u, but process %d runs as uid %ld",
			path, (unsigned)st->st_uid, (int)pid, uid);
		return -EPERM;
	}
	if (st->st_mode & 022) {
		set_err(err, errlen, "refusing %s: mode %03o lets others write it", path,
			(unsigned)(st->st_mode & 0777));
		return -EPERM;
	}
	if (st->st_size < SBC_HEADER_SIZE || st->st_size > (1ll << 30)) {
		set_err(err, errlen, "refusing %s: size %lld is not a channel's", path,
			(long long)st->st_size);
		return -EPERM;
	}
	return 0;
}

static bool on_tmpfs(const struct statfs *sf)
{
	return sf->f_type == TMPFS_MAGIC;
}

/*
 * Map the file of one candidate mapping and check it. The reader or NULL,
 * with *e = -errno and the reason in err. *pid_mismatch: the file is fine but
 * made by another process (a forked child maps its parent's channel).
 */
static struct sbc_reader *open_candidate(pid_t pid, pid_t nspid, long uid, bool translate,
					 const struct cand *c, int *e, bool *pid_mismatch,
					 char *err, size_t errlen)
{
	char link[96], why[128];
	struct sbc_reader *volatile r = NULL; /* volatile: read after a SIGBUS jump */
	struct sbc_header hc;
	struct stat st, fst;
	struct statfs sf;
	sigjmp_buf jb;
	size_t size;
	void *map;
	int fd, rc, pathfd = -1;

	*pid_mismatch = false;
	snprintf(link, sizeof(link), "/proc/%d/map_files/%lx-%lx", (int)pid, c->start, c->end);
	/* stat follows the link without opening: nothing but a regular file is opened */
	rc = stat(link, &st);
	if (rc && (errno == EPERM || errno == EACCES)) {
		/*
		 * map_files wants CAP_SYS_ADMIN. An agent with CAP_BPF+CAP_PERFMON
		 * tracing its own user's process looks the name up in the target's
		 * root instead, without following a final symlink, and takes only
		 * the inode that the maps line names (checked below).
		 */
		char alt[PATH_MAX + 32];

		snprintf(alt, sizeof(alt), "/proc/%d/root%s", (int)pid, c->path);
		pathfd = open(alt, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (pathfd >= 0) {
			snprintf(link, sizeof(link), "/proc/self/fd/%d", pathfd);
			rc = stat(link, &st);
		} else {
			errno = EPERM;
		}
	}
	if (rc) {
		*e = -errno;
		if (*e == -ENOENT) {
			set_err(err, errlen, "process %d unmapped %s meanwhile", (int)pid, c->path);
		} else {
			set_err(err, errlen, "cannot open the mapping of %s in process %d: %s%s",
				c->path, (int)pid, strerror(-*e),
				*e == -EPERM || *e == -EACCES ? " (the agent needs CAP_SYS_ADMIN)" : "");
			*e = -EPERM;
		}
		if (pathfd >= 0)
			close(pathfd);
		return NULL;
	}
	if (st.st_dev != c->dev || st.st_ino != c->ino) {
		set_err(err, errlen, "process %d remapped %s meanwhile", (int)pid, c->path);
		*e = -ENOENT;
		if (pathfd >= 0)
			close(pathfd);
		return NULL;
	}
	*e = check_file(&st, uid, pid, c->path, err, errlen);
	if (*e) {
		if (pathfd >= 0)
			close(pathfd);
		return NULL;
	}
	if (statfs(link, &sf) || !on_tmpfs(&sf)) {
		set_err(err, errlen, "refusing %s: not on tmpfs", c->path);
		*e = -EPERM;
		if (pathfd >= 0)
			close(pathfd);
		return NULL;
	}
	fd = open(link, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd >= 0 && pathfd >= 0) {
		close(pathfd);
		pathfd = -1;
	}
	if (fd < 0) {
		*e = -errno;
		set_err(err, errlen, "cannot open the mapping of %s in process %d: %s", c->path,
			(int)pid, strerror(-*e));
		if (*e != -ENOENT)
			*e = -EPERM;
		if (pathfd >= 0)
			close(pathfd);
		return NULL;
	}
	/* what was opened is what was checked, and it is checked again */
	if (fstat(fd, &fst) || fst.st_dev != st.st_dev || fst.st_ino != st.st_ino ||
	    fstatfs(fd, &sf) || !on_tmpfs(&sf)) {
		set_err(err, errlen, "process %d remapped %s meanwhile", (int)pid, c->path);
		*e = -ENOENT;
		close(fd);
		return NULL;
	}
	*e = check_file(&fst, uid, pid, c->path, err, errlen);
	if (*e) {
		close(fd);
		return NULL;
	}
	size = (size_t)fst.st_size;
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	*e = map == MAP_FAILED ? -errno : 0;
	close(fd);
	if (*e) {
		set_err(err, errlen, "cannot map %s: %s", c->path, strerror(-*e));
		return NULL;
	}
	/* from here on the file may shrink under us: see on_sigbus */
	pthread_once(&bus_once, bus_install);
	if (sigsetjmp(jb, 0)) {
		set_err(err, errlen, "refusing %s: it was cut short while being read", c->path);
		*e = -EPERM;
		goto fail_unmap;
	}
	bus_lo = map;
	bus_hi = (const char *)map + size;
	bus_jmp = &jb;
	/*
	 * One private copy of the header: it is checked against the file's size,
	 * and every pointer, size and capacity comes from it alone. The producer
	 * may rewrite the shared header at any moment, before or after.
	 */
	copy_shared(&hc, map, sizeof(hc));
	*e = check_header(&hc, size, nspid, why, sizeof(why));
	if (*e) {
		*pid_mismatch = *e == -ESRCH;
		if (*e == -ESRCH)
			*e = -EPERM;
		set_err(err, errlen, "refusing %s: it %s", c->path, why);
		goto fail_unmap;
	}
	if (busy(map)) {
		set_err(err, errlen, "the GPU channel of process %d is in use by agent pid %u",
			(int)pid, LOAD(&((struct sbc_header *)map)->agent_pid, RELAXED));
		*e = -EBUSY;
		goto fail_unmap;
	}
	r = calloc(1, sizeof(*r));
	if (!r || !(r->seen = calloc(hc.string_capacity / 64 + 1, sizeof(uint64_t)))) {
		*e = -ENOMEM;
		set_err(err, errlen, "out of memory");
		goto fail_unmap;
	}
	r->hdr = map;
	r->map_len = size;
	r->cap = hc.ring_capacity;
	r->mask = r->cap - 1;
	r->scap = hc.string_capacity;
	r->ring = (struct sbc_slot *)((char *)map + hc.ring_offset);
	r->strings = (struct sbc_string *)((char *)map + hc.strings_offset);
	r->pid = pid;
	r->nspid = nspid;
	r->translate = translate;
	printable(r->producer, sizeof(r->producer), hc.producer,
		  strnlen(hc.producer, sizeof(hc.producer)));
	snprintf(r->path, sizeof(r->path), "%s", c->path);
	r->now = mono_ns();
	bucket_init(&r->deliver, SBC_RECORDS_PER_SEC, r->now);
	bucket_init(&r->discard, SBC_DISCARDS_PER_SEC, r->now);
	bucket_init(&r->rescan, SBC_TID_RESCANS_PER_SEC, r->now);
	if (find_tail(r, &r->pos)) {
		set_err(err, errlen, "refusing %s: its ring is corrupt", c->path);
		*e = -EPERM;
		goto fail_unmap;
	}
	BUS_END();
	return r;

fail_unmap:
	BUS_END();
	if (r)
		free(r->seen);
	free(r);
	munmap(map, size);
	return NULL;
}

/* which refusal to report when several candidates were refused */
static int refusal_rank(int e, bool pid_mismatch)
{
	switch (e) {
	case -EBUSY: return 4;
	case -EAGAIN: return 3;
	case -EPERM: return pid_mismatch ? 1 : 2;
	default: return e == -ENOENT ? 0 : 2;
	}
}

struct sbc_reader *sbc_attach(pid_t pid, char *err, size_t errlen)
{
	char *maps = NULL;
	ssize_t len = pid > 0 ? read_maps_plain(pid, &maps) : -EINVAL;
	struct sbc_reader *r = sbc_attach_maps(pid, maps, len, err, errlen);
	int e = errno;

	free(maps);
	errno = e;
	return r;
}

struct sbc_reader *sbc_attach_maps(pid_t pid, const char *maps, ssize_t maps_len, char *err,
				   size_t errlen)
{
	char status[4096], path[64], why[256] = "";
	long nspids[16], uids[4];
	struct cand cands[SBC_CANDIDATES_MAX];
	int n, ncand, best = -1, best_e = -ENOENT;

	if (pid <= 0) {
		set_err(err, errlen, "invalid pid %d", (int)pid);
		errno = EINVAL;
		return NULL;
	}
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (read_text(path, status, sizeof(status)) < 0) {
		set_err(err, errlen, "no process %d", (int)pid);
		errno = ENOENT;
		return NULL;
	}
	n = status_numbers(status, "NSpid:", nspids, 16);
	if (status_numbers(status, "Uid:", uids, 4) < 1) {
		set_err(err, errlen, "cannot read the owner of process %d", (int)pid);
		errno = EPERM;
		return NULL;
	}
	pid_t nspid = n > 0 ? (pid_t)nspids[n - 1] : pid;

	ncand = maps_len < 0 ? (int)maps_len : scan_maps(maps, (size_t)maps_len, cands,
							    SBC_CANDIDATES_MAX);
	if (ncand < 0) {
		set_err(err, errlen, "cannot read the mappings of process %d: %s", (int)pid,
			strerror(-ncand));
		errno = ncand == -ENOENT || ncand == -ESRCH ? ENOENT : EPERM;
		return NULL;
	}
	for (int i = 0; i < ncand; i++) {
		struct sbc_reader *r;
		bool mismatch;
		int e, rank;

		r = open_candidate(pid, nspid, uids[0], n > 1, &cands[i], &e, &mismatch, why,
				   sizeof(why));
		if (r)
			return r;
		rank = refusal_rank(e, mismatch);
		if (rank > best) {
			best = rank;
			best_e = e;
			set_err(err, errlen, "%s", why);
		}
	}
	if (best <= 0) {
		/* nothing, or only mappings that went away: no channel */
		set_err(err, errlen, "process %d has no GPU timeline channel (no shared mapping of "
			SBC_DIR "/" SBC_NAME_PREFIX "*" SBC_NAME_SUFFIX ")", (int)pid);
		best_e = -ENOENT;
	}
	errno = -best_e;
	return NULL;
}

static void release(struct sbc_reader *r, struct sbc_slot *s)
{
	/* r->pos and r->mask are ours: the slot written is one we validated */
	STORE(&s->seq, r->pos + r->cap, RELEASE);
	r->pos++;
}

int sbc_set_enabled(struct sbc_reader *r, bool on)
{
	struct sbc_header *h;

	if (!r)
		return -EINVAL;
	if (r->broken)
		return -EIO;
	h = r->hdr;
	BUS_BEGIN(r->hdr, r->map_len, &r->broken, -EIO);
	if (!on) {
		if (r->enabled && LOAD(&h->agent_pid, RELAXED) == (uint32_t)getpid())
			STORE(&h->control, SBC_CONTROL_OFF, RELEASE);
		r->enabled = false;
		BUS_END();
		return 0;
	}
	if (busy(h)) {
		BUS_END();
		return -EBUSY;
	}
	STORE(&h->control, SBC_CONTROL_OFF, RELEASE);
	r->epoch = LOAD(&h->epoch, RELAXED) + 1;
	if (!r->epoch)
		r->epoch = 1;
	STORE(&h->epoch, r->epoch, RELEASE);
	/* free what earlier sessions left, so it cannot fill the ring against us */
	for (uint32_t n = 0; n < r->cap; n++) {
		struct sbc_slot *s = &r->ring[r->pos & r->mask];

		if (LOAD(&s->seq, ACQUIRE) != r->pos + 1)
			break;
		release(r, s);
		r->stale++;
	}
	memset(r->seen, 0, (r->scap / 64 + 1) * sizeof(uint64_t));
	r->base_ring = LOAD(&h->ring_drops, RELAXED);
	r->base_string = LOAD(&h->string_drops, RELAXED);
	r->base_source = LOAD(&h->source_drops, RELAXED);
	r->last_ring = r->last_string = r->last_source = 0;
	r->delivered = r->budget_drops = r->tid_unmapped = 0;
	STORE(&h->agent_pid, (uint32_t)getpid(), RELAXED);
	STORE(&h->heartbeat_ns, mono_ns(), RELAXED);
	STORE(&h->control, SBC_CONTROL_ON, RELEASE);
	r->enabled = true;
	BUS_END();
	return 0;
}

void sbc_heartbeat(struct sbc_reader *r)
{
	if (!r || !r->enabled || r->broken)
		return;
	BUS_BEGIN(r->hdr, r->map_len, &r->broken, );
	STORE(&r->hdr->heartbeat_ns, mono_ns(), RELAXED);
	BUS_END();
}

static struct tidmap *tid_set(struct sbc_reader *r, uint32_t tid)
{
	return r->tids[(tid * 2654435761u) >> 24]; /* 256 sets */
}

static struct tidmap *tid_find(struct sbc_reader *r, uint32_t tid)
{
	struct tidmap *set = tid_set(r, tid);

	for (int w = 0; w < TID_WAYS; w++)
		if (set[w].ns == tid)
			return &set[w];
	return NULL;
}

static void tid_put(struct sbc_reader *r, uint32_t ns, uint32_t host)
{
	struct tidmap *set = tid_set(r, ns), *e = tid_find(r, ns);

	if (!e) {
		e = &set[0];
		for (int w = 0; w < TID_WAYS; w++) {
			if (!set[w].ns) {
				e = &set[w];
				break;
			}
			if (set[w].when < e->when)
				e = &set[w];
		}
	}
	*e = (struct tidmap){ ns, host, r->now };
}

/* the target's threads as it names them (NSpid) and as we do; at most TID_SCAN_MAX */
static void tid_rescan(struct sbc_reader *r)
{
	char path[64], status[4096];
	struct dirent *d;
	unsigned seen = 0;
	DIR *dir;

	r->tid_rescans++;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)r->pid);
	dir = opendir(path);
	if (!dir)
		return;
	while (seen < TID_SCAN_MAX && (d = readdir(dir))) {
		long ids[16];
		int n;

		if (!isdigit((unsigned char)d->d_name[0]))
			continue;
		seen++;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/status", (int)r->pid, d->d_name);
		if (read_text(path, status, sizeof(status)) < 0)
			continue;
		n = status_numbers(status, "NSpid:", ids, 16);
		if (n < 2 || ids[n - 1] <= 0 || ids[0] <= 0 || ids[n - 1] > UINT32_MAX ||
		    ids[0] > UINT32_MAX)
			continue;
		tid_put(r, (uint32_t)ids[n - 1], (uint32_t)ids[0]);
	}
	closedir(dir);
}

/*
 * The host tid of a tid in the target's pid namespace; 0 if unknown, or if
 * finding it would take a scan over the rescan budget.
 */
static uint32_t host_tid(struct sbc_reader *r, uint32_t tid)
{
	struct tidmap *e;

	if (!r->translate || !tid)
		return tid;
	e = tid_find(r, tid);
	if (e && (e->host || r->now - e->when < TID_MISS_TTL_NS))
		return e->host;
	bucket_refill(&r->rescan, r->now);
	if (!bucket_take(&r->rescan)) {
		r->tid_unmapped++;
		return 0;
	}
	tid_rescan(r);
	e = tid_find(r, tid);
	if (e && e->host)
		return e->host;
	tid_put(r, tid, 0); /* remember the miss: one scan per unknown thread, not per record */
	return 0;
}

static int pass_name(struct sbc_reader *r, int (*cb)(void *, const struct sb_hdr *), void *ctx)
{
	uint32_t id = r->rec.name_id; /* our copy of the record */
	const struct sbc_string *e;
	struct sb_text *t = &r->text.t;
	uint64_t name[sizeof(e->name) / 8];
	size_t len;
	int err;

	if (!id)
		return 0;
	if (id > r->scap) {
		r->rec.name_id = 0;
		return 0;
	}
	if (r->seen[id / 64] & (1ull << (id % 64)))
		return 0;
	e = &r->strings[id - 1];
	len = LOAD(&e->len, ACQUIRE);
	if (!len || len > SBC_STRING_MAX) {
		r->rec.name_id = 0;
		return 0;
	}
	copy_shared(name, e->name, sizeof(name));
	memset(r->text.bytes, 0, sizeof(r->text.bytes));
	memcpy(t->text, name, len);
	len = strnlen(t->text, len);
	t->h.type = SB_REC_STRING;
	t->h.size = (uint16_t)((sizeof(*t) + len + 7) & ~(size_t)7);
	t->h.pid = (uint32_t)r->pid;
	t->h.ts = r->rec.h.ts;
	t->len = (uint32_t)len;
	t->id = id;
	err = cb(ctx, &t->h);
	if (err < 0)
		return err;
	r->seen[id / 64] |= 1ull << (id % 64);
	return 0;
}

static int drain_ring(struct sbc_reader *r, int (*cb)(void *ctx, const struct sb_hdr *rec),
		      void *ctx)
{
	int64_t offset = LOAD(&r->hdr->clock_offset_ns, RELAXED);
	int delivered = 0, err;

	if (offset > CLOCK_OFFSET_MAX || offset < -CLOCK_OFFSET_MAX)
		offset = 0;
	r->now = mono_ns();
	bucket_refill(&r->deliver, r->now);
	bucket_refill(&r->discard, r->now);
	for (uint32_t n = 0; n < r->cap; n++) {
		struct sbc_slot *s = &r->ring[r->pos & r->mask];

		if (LOAD(&s->seq, ACQUIRE) != r->pos + 1)
			break;
		if (!r->epoch || LOAD(&s->epoch, RELAXED) != r->epoch) {
			/* not ours to deliver; releasing it is work too */
			if (!bucket_take(&r->discard))
				break;
			release(r, s);
			r->stale++;
			continue;
		}
		if (!bucket_take(&r->deliver)) {
			/* over the record budget: released unread and counted */
			if (!bucket_take(&r->discard))
				break; /* left in the ring: when it is full, the producer counts */
			release(r, s);
			r->budget_drops++;
			continue;
		}
		copy_shared(&r->rec, &s->rec, sizeof(r->rec));
		r->rec.h.type = SB_REC_GPU;
		r->rec.h.size = sizeof(r->rec);
		r->rec.h.pid = (uint32_t)r->pid;
		r->rec.h.tid = host_tid(r, r->rec.h.tid);
		if (offset) {
			r->rec.h.ts += (uint64_t)offset;
			r->rec.end_ns += (uint64_t)offset;
		}
		err = pass_name(r, cb, ctx);
		if (!err)
			err = cb(ctx, &r->rec.h);
		if (err < 0) {
			r->deliver.credit += NSEC; /* the record stays: so does its credit */
			return err;
		}
		release(r, s);
		delivered++;
		r->delivered++;
	}
	return delivered;
}

int sbc_drain(struct sbc_reader *r, int (*cb)(void *ctx, const struct sb_hdr *rec), void *ctx)
{
	int n;

	if (!r || !cb)
		return -EINVAL;
	if (r->broken)
		return -EIO;
	BUS_BEGIN(r->hdr, r->map_len, &r->broken, -EIO);
	n = drain_ring(r, cb, ctx);
	BUS_END();
	return n;
}

/* a producer's counter since our baseline: never decreasing, saturating */
static uint64_t counter_since(uint64_t now, uint64_t base, uint64_t last)
{
	uint64_t d = now >= base ? now - base : 0;

	if (d > COUNTER_MAX)
		d = COUNTER_MAX;
	return d > last ? d : last;
}

static void read_counters(struct sbc_reader *r)
{
	if (r->broken)
		return; /* the last values read stand */
	BUS_BEGIN(r->hdr, r->map_len, &r->broken, );
	r->last_ring = counter_since(LOAD(&r->hdr->ring_drops, RELAXED), r->base_ring, r->last_ring);
	r->last_string = counter_since(LOAD(&r->hdr->string_drops, RELAXED), r->base_string,
				       r->last_string);
	r->last_source = counter_since(LOAD(&r->hdr->source_drops, RELAXED), r->base_source,
				       r->last_source);
	BUS_END();
}

void sbc_counters(struct sbc_reader *r, uint64_t *ring_drops, uint64_t *string_drops,
		  uint64_t *source_drops)
{
	if (r)
		read_counters(r);
	if (ring_drops)
		*ring_drops = r ? r->last_ring + r->budget_drops : 0; /* both < 2^63 */
	if (string_drops)
		*string_drops = r ? r->last_string : 0;
	if (source_drops)
		*source_drops = r ? r->last_source : 0;
}

void sbc_stats(const struct sbc_reader *r, struct sbc_stats *st)
{
	if (!st)
		return;
	memset(st, 0, sizeof(*st));
	if (!r)
		return;
	st->delivered = r->delivered;
	st->budget_drops = r->budget_drops;
	st->tid_rescans = r->tid_rescans;
	st->tid_unmapped = r->tid_unmapped;
}

void sbc_set_budget(struct sbc_reader *r, const struct sbc_budget *b)
{
	uint64_t now = mono_ns();

	if (!r || !b)
		return;
	if (b->records_per_sec)
		bucket_init(&r->deliver, b->records_per_sec, now);
	if (b->discards_per_sec)
		bucket_init(&r->discard, b->discards_per_sec, now);
	if (b->rescans_per_sec)
		bucket_init(&r->rescan, b->rescans_per_sec, now);
}

uint64_t sbc_stale(const struct sbc_reader *r)
{
	return r ? r->stale : 0;
}

const char *sbc_producer_name(struct sbc_reader *r)
{
	return r ? r->producer : "";
}

const char *sbc_reader_path(const struct sbc_reader *r)
{
	return r ? r->path : "";
}

void sbc_detach(struct sbc_reader *r)
{
	if (!r)
		return;
	sbc_set_enabled(r, false);
	munmap(r->hdr, r->map_len);
	free(r->seen);
	free(r);
}
