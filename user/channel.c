// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The GPU timeline channel (schemas/channel.md). The producer half runs inside
 * the traced process, so it depends on libc only (no util.c) and is careful:
 * lock-free, no allocation after create, bounded loops even if the shared
 * memory is scribbled on. The reader half treats every shared byte as
 * untrusted input.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "channel.h"
#include "trace.h"

#define LOAD(p, mo) __atomic_load_n((p), __ATOMIC_##mo)
#define STORE(p, v, mo) __atomic_store_n((p), (v), __ATOMIC_##mo)
#define ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

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
	char path[64];
	/* key = hash << 32 | id; 0 = empty. Names are compared in the shared table. */
	uint64_t names[HASH_SLOTS];
	uint32_t next_id;
	_Alignas(64) uint64_t head; /* next position to claim; private, so no agent can stall us */
};

/* one channel per process; the atexit hook unlinks it, in the creator only */
static int g_have_channel;
static pid_t g_owner;
static char g_path[64];
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

static void unlink_at_exit(void)
{
	if (LOAD(&g_have_channel, ACQUIRE) && getpid() == g_owner)
		unlink(g_path);
}

struct sbc_producer *sbc_create(const char *producer, unsigned nslots)
{
	static int atexit_done;
	struct sbc_producer *p;
	uint32_t n = SBC_MIN_SLOTS;
	int fd = -1, err, expected = 0;
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
	snprintf(p->path, sizeof(p->path), SBC_PATH_FMT, (int)p->pid);
	len = channel_size(n);

	for (int attempt = 0; attempt < 2; attempt++) {
		fd = open(p->path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			break;
		/* our pid is ours: a file with our name was left by a dead process */
		if (unlink(p->path) && errno != ENOENT)
			break;
	}
	if (fd < 0)
		goto fail;
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
	h->created_ns = now_ns();
	/* the magic last: a reader that sees it sees a complete header */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(h->magic, SBC_MAGIC, sizeof(h->magic));

	snprintf(g_path, sizeof(g_path), "%s", p->path);
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
	unlink(p->path);
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
	return now_ns() - hb < SBC_HEARTBEAT_TIMEOUT_NS;
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
		unlink(p->path);
	munmap(p->hdr, p->map_len);
	if (getpid() == (pid_t)p->pid)
		STORE(&g_have_channel, 0, RELEASE);
	free(p);
}

/* ------------------------------------------------------------------ reader */

#define TIDMAP 512

struct tidmap {
	uint32_t ns, host; /* host 0: not found */
};

struct sbc_reader {
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
	unsigned ntids;
	struct tidmap tids[TIDMAP];
	struct sb_gpu rec;
	union {
		struct sb_text t;
		char bytes[sizeof(struct sb_text) + SBC_STRING_SIZE];
	} text;
};

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
	return pid && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

static bool busy(struct sbc_header *h)
{
	uint32_t agent = LOAD(&h->agent_pid, RELAXED);

	return LOAD(&h->control, ACQUIRE) == SBC_CONTROL_ON &&
	       now_ns() - LOAD(&h->heartbeat_ns, RELAXED) < SBC_HEARTBEAT_TIMEOUT_NS &&
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
		return -EPERM;
	}
	return 0;
}

struct sbc_reader *sbc_attach(pid_t pid, char *err, size_t errlen)
{
	char status[4096], path[128], why[128];
	long nspids[16], uids[4];
	struct sbc_reader *volatile r = NULL; /* volatile: read after a SIGBUS jump */
	struct stat st;
	int fd, n, e;
	void *map;
	sigjmp_buf jb;

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

	snprintf(path, sizeof(path), "/proc/%d/root" SBC_PATH_FMT, (int)pid, (int)nspid);
	fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		e = errno;
		if (e == ENOENT) {
			set_err(err, errlen, "process %d has no GPU timeline channel (%s)", (int)pid,
				path);
			errno = ENOENT;
		} else if (e == ELOOP || e == EISDIR || e == ENXIO) {
			set_err(err, errlen, "refusing %s: not a regular file", path);
			errno = EPERM;
		} else {
			set_err(err, errlen, "cannot open %s: %s", path, strerror(e));
			errno = (e == EACCES) ? EPERM : e;
		}
		return NULL;
	}
	if (fstat(fd, &st)) {
		e = errno;
		set_err(err, errlen, "cannot stat %s: %s", path, strerror(e));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		set_err(err, errlen, "refusing %s: not a regular file", path);
		e = EPERM;
		goto fail;
	}
	if ((long)st.st_uid != uids[0]) {
		set_err(err, errlen, "refusing %s: owned by uid %u, but process %d runs as uid %ld",
			path, (unsigned)st.st_uid, (int)pid, uids[0]);
		e = EPERM;
		goto fail;
	}
	if (st.st_mode & 022) {
		set_err(err, errlen, "refusing %s: mode %03o lets others write it", path,
			(unsigned)(st.st_mode & 0777));
		e = EPERM;
		goto fail;
	}
	if (st.st_size < SBC_HEADER_SIZE || st.st_size > (1ll << 30)) {
		set_err(err, errlen, "refusing %s: size %lld is not a channel's", path,
			(long long)st.st_size);
		e = EPERM;
		goto fail;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		e = errno;
		set_err(err, errlen, "cannot map %s: %s", path, strerror(e));
		goto fail;
	}
	close(fd);
	fd = -1;
	/* from here on the file may shrink under us: see on_sigbus */
	pthread_once(&bus_once, bus_install);
	if (sigsetjmp(jb, 0)) {
		set_err(err, errlen, "refusing %s: it was cut short while being read", path);
		e = EPERM;
		goto fail_unmap;
	}
	bus_lo = map;
	bus_hi = (const char *)map + st.st_size;
	bus_jmp = &jb;
	e = -check_header(map, (size_t)st.st_size, nspid, why, sizeof(why));
	if (e) {
		set_err(err, errlen, "refusing %s: it %s", path, why);
		goto fail_unmap;
	}
	if (busy(map)) {
		set_err(err, errlen, "the GPU channel of process %d is in use by agent pid %u",
			(int)pid, LOAD(&((struct sbc_header *)map)->agent_pid, RELAXED));
		e = EBUSY;
		goto fail_unmap;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		e = ENOMEM;
		set_err(err, errlen, "out of memory");
		goto fail_unmap;
	}
	r->hdr = map;
	r->map_len = (size_t)st.st_size;
	r->cap = r->hdr->ring_capacity;
	r->mask = r->cap - 1;
	r->scap = r->hdr->string_capacity;
	r->ring = (struct sbc_slot *)((char *)map + r->hdr->ring_offset);
	r->strings = (struct sbc_string *)((char *)map + r->hdr->strings_offset);
	r->pid = pid;
	r->nspid = nspid;
	r->translate = n > 1;
	for (size_t i = 0; i + 1 < sizeof(r->producer) && r->hdr->producer[i]; i++)
		r->producer[i] = isprint((unsigned char)r->hdr->producer[i]) ? r->hdr->producer[i] : '?';
	r->seen = calloc(r->scap / 64 + 1, sizeof(uint64_t));
	if (!r->seen) {
		e = ENOMEM;
		set_err(err, errlen, "out of memory");
		goto fail_unmap;
	}
	if (find_tail(r, &r->pos)) {
		set_err(err, errlen, "refusing %s: its ring is corrupt", path);
		e = EPERM;
		goto fail_unmap;
	}
	BUS_END();
	return r;

fail_unmap:
	BUS_END();
	if (r)
		free(r->seen);
	free(r);
	munmap(map, (size_t)st.st_size);
fail:
	if (fd >= 0)
		close(fd);
	errno = e;
	return NULL;
}

static void release(struct sbc_reader *r, struct sbc_slot *s)
{
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
	STORE(&h->agent_pid, (uint32_t)getpid(), RELAXED);
	STORE(&h->heartbeat_ns, now_ns(), RELAXED);
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
	STORE(&r->hdr->heartbeat_ns, now_ns(), RELAXED);
	BUS_END();
}

static void tid_rescan(struct sbc_reader *r)
{
	char path[64], status[4096];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)r->pid);
	dir = opendir(path);
	if (!dir)
		return;
	while ((d = readdir(dir))) {
		long ids[16];
		int n;

		if (!isdigit((unsigned char)d->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/status", (int)r->pid, d->d_name);
		if (read_text(path, status, sizeof(status)) < 0)
			continue;
		n = status_numbers(status, "NSpid:", ids, 16);
		if (n < 2)
			continue;
		bool known = false;
		for (unsigned i = 0; i < r->ntids; i++) {
			if (r->tids[i].ns == (uint32_t)ids[n - 1]) {
				r->tids[i].host = (uint32_t)ids[0];
				known = true;
			}
		}
		if (!known && r->ntids < TIDMAP)
			r->tids[r->ntids++] = (struct tidmap){ (uint32_t)ids[n - 1], (uint32_t)ids[0] };
	}
	closedir(dir);
}

/* the host tid of a tid in the target's pid namespace; 0 if unknown */
static uint32_t host_tid(struct sbc_reader *r, uint32_t tid)
{
	if (!r->translate || !tid)
		return tid;
	for (int pass = 0; pass < 2; pass++) {
		for (unsigned i = 0; i < r->ntids; i++)
			if (r->tids[i].ns == tid)
				return r->tids[i].host;
		if (pass == 0) {
			if (r->ntids >= TIDMAP - 64)
				r->ntids = 0;
			tid_rescan(r);
		}
	}
	/* remember the miss: one rescan per unknown thread, not one per record */
	if (r->ntids < TIDMAP)
		r->tids[r->ntids++] = (struct tidmap){ tid, 0 };
	return 0;
}

static int pass_name(struct sbc_reader *r, int (*cb)(void *, const struct sb_hdr *), void *ctx)
{
	uint32_t id = r->rec.name_id;
	const struct sbc_string *e;
	struct sb_text *t = &r->text.t;
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
	memset(r->text.bytes, 0, sizeof(r->text.bytes));
	memcpy(t->text, e->name, len);
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

	for (uint32_t n = 0; n < r->cap; n++) {
		struct sbc_slot *s = &r->ring[r->pos & r->mask];

		if (LOAD(&s->seq, ACQUIRE) != r->pos + 1)
			break;
		if (!r->epoch || s->epoch != r->epoch) {
			release(r, s);
			r->stale++;
			continue;
		}
		memcpy(&r->rec, &s->rec, sizeof(r->rec));
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
		if (err < 0)
			return err;
		release(r, s);
		delivered++;
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

static void read_counters(struct sbc_reader *r)
{
	if (r->broken)
		return; /* the last values read stand */
	BUS_BEGIN(r->hdr, r->map_len, &r->broken, );
	r->last_ring = LOAD(&r->hdr->ring_drops, RELAXED) - r->base_ring;
	r->last_string = LOAD(&r->hdr->string_drops, RELAXED) - r->base_string;
	r->last_source = LOAD(&r->hdr->source_drops, RELAXED) - r->base_source;
	BUS_END();
}

void sbc_counters(struct sbc_reader *r, uint64_t *ring_drops, uint64_t *string_drops,
		  uint64_t *source_drops)
{
	if (r)
		read_counters(r);
	if (ring_drops)
		*ring_drops = r ? r->last_ring : 0;
	if (string_drops)
		*string_drops = r ? r->last_string : 0;
	if (source_drops)
		*source_drops = r ? r->last_source : 0;
}

uint64_t sbc_stale(const struct sbc_reader *r)
{
	return r ? r->stale : 0;
}

const char *sbc_producer_name(struct sbc_reader *r)
{
	return r ? r->producer : "";
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
