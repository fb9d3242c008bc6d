// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The GPU timeline channel against a hostile producer (schemas/channel.md,
 * "Trust model"): the trainer owns every byte of the file and the agent runs
 * as root. Each case performs the attack for real:
 *
 *   hostile_writers     threads rewrite every header, slot and string field
 *                       with adversarial values while the agent attaches,
 *                       enables, drains, reads counters and detaches, over and
 *                       over; nothing read outside the mapping may come out
 *   squatted_names      another uid pre-creates files under the names a
 *                       producer could use; it still gets a channel of its own,
 *                       the agent finds that one, and nothing else is unlinked
 *   forked_child        a child maps its parent's channel and its own
 *   tid_flood           a producer in its own pid namespace gives every record
 *                       a new thread id; the /proc rescans stay in budget
 *   record_flood        a producer floods far above the record budget: the
 *                       agent passes on no more than the budget, the rest is
 *                       counted, nothing is lost silently
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "format/channel.h"
#include "test.h"
#include "format/trace.h"
#include "base/util.h"

#define CANARY "#CANARY#"

static uint64_t mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* our channel file, mapped once more: the hostile producer's pen */
static void *map_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	struct stat st;
	void *m;

	if (fd < 0 || fstat(fd, &st)) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	*len = (size_t)st.st_size;
	return m == MAP_FAILED ? NULL : m;
}

/* ------------------------------------------------------- what comes out */

struct check {
	uint64_t gpu, strings, bad, canary, foreign_pid, nul_in_name;
	char why[160];
};

static int check_cb(void *ctx, const struct sb_hdr *h)
{
	struct check *c = ctx;
	const char *why = sbt_check_record(h, h->size);

	if (why || (h->type != SB_REC_GPU && h->type != SB_REC_STRING)) {
		if (!c->bad++)
			snprintf(c->why, sizeof(c->why), "type %u size %u: %s", h->type, h->size,
				 why ? why : "not gpu or string");
		return 0;
	}
	if (h->pid != (uint32_t)getpid())
		c->foreign_pid++;
	if (memmem(h, h->size, CANARY, 4))
		c->canary++;
	if (h->type == SB_REC_STRING) {
		const struct sb_text *t = (const void *)h;

		if (t->id == 0 || t->id > 65536 || t->len > SBC_STRING_MAX) {
			if (!c->bad++)
				snprintf(c->why, sizeof(c->why), "string id %u len %u", t->id, t->len);
		}
		if (memchr(t->text, 0, t->len))
			c->nul_in_name++;
		c->strings++;
	} else {
		c->gpu++;
	}
	return 0;
}

static bool printable_str(const char *s)
{
	for (; *s; s++)
		if (!isprint((unsigned char)*s))
			return false;
	return true;
}

/* ------------------------------------------------------- hostile writers */

struct hostile {
	struct sbc_header *h;  /* the producer's mapping of its own file */
	size_t len;
	struct sbc_header valid; /* the header as created */
	uint32_t cap, scap;
	int stop;
	uint64_t seed;
	uint64_t writes;
};

static uint64_t pick(uint64_t *rng, const uint64_t *v, size_t n)
{
	return v[xorshift(rng) % n];
}

#define PICK(rng, ...) \
	({ const uint64_t v_[] = { __VA_ARGS__ }; pick(rng, v_, sizeof(v_) / sizeof(v_[0])); })

/* hold an adversarial value a moment, then (mostly) put the valid one back */
#define FLIP(field, bad) do { \
		__typeof__(h->field) good_ = hs->valid.field; \
		__atomic_store_n(&h->field, (__typeof__(h->field))(bad), __ATOMIC_RELAXED); \
		for (unsigned k_ = xorshift(&rng) % 2000; k_; k_--) \
			__asm__ volatile("" ::: "memory"); \
		if (xorshift(&rng) % 16) \
			__atomic_store_n(&h->field, good_, __ATOMIC_RELAXED); \
	} while (0)

static void *hostile_thread(void *arg)
{
	struct hostile *hs = arg;
	struct sbc_header *h = hs->h;
	struct sbc_slot *ring = (struct sbc_slot *)((char *)h + SBC_HEADER_SIZE);
	struct sbc_string *strs = (struct sbc_string *)((char *)h + hs->valid.strings_offset);
	uint64_t rng = __atomic_add_fetch(&hs->seed, 0x9e3779b97f4a7c15ull, __ATOMIC_RELAXED) | 1;
	const uint64_t total = hs->len, soff = hs->valid.strings_offset;

	while (!__atomic_load_n(&hs->stop, __ATOMIC_RELAXED)) {
		unsigned what = xorshift(&rng) % 24;
		uint64_t r = xorshift(&rng);

		switch (what) {
		case 0:
			FLIP(ring_offset, PICK(&rng, 1ull << 40, total - 128, total, total + 4096,
						  SBC_HEADER_SIZE + 128, r, 0, ~0ull));
			break;
		case 1:
			FLIP(ring_capacity, PICK(&rng, SBC_MAX_SLOTS, hs->cap * 2, 16, 0,
						    hs->cap + 1, 1u << 31, r));
			break;
		case 2:
			FLIP(strings_offset, PICK(&rng, 1ull << 40, total - 128, total,
						     total - 64 * 128, soff + 64, r, 0));
			break;
		case 3:
			FLIP(string_capacity, PICK(&rng, 65536, hs->scap + 1, hs->scap * 2, 0,
						      ~0u, r));
			break;
		case 4:
			FLIP(total_size, PICK(&rng, 1ull << 40, total * 2, total - 128, r));
			break;
		case 5:
			FLIP(header_size, PICK(&rng, 0, 4096, r));
			break;
		case 6:
			FLIP(slot_size, PICK(&rng, 0, 4096, 64, r));
			break;
		case 7:
			FLIP(string_size, PICK(&rng, 0, 4096, 8, r));
			break;
		case 8:
			FLIP(version, PICK(&rng, 0, 2, r));
			break;
		case 9: /* the name: control bytes, no NUL, no terminator */
			for (size_t i = 0; i < sizeof(h->producer); i++)
				h->producer[i] = (char)(1 + xorshift(&rng) % 255);
			if (xorshift(&rng) % 4)
				snprintf(h->producer, sizeof(h->producer), "%s", hs->valid.producer);
			break;
		case 10:
			FLIP(producer_pid, PICK(&rng, 1, 0, ~0u, r));
			break;
		case 11:
			__atomic_store_n(&h->clock_offset_ns,
					 (int64_t)PICK(&rng, (uint64_t)INT64_MIN, INT64_MAX, r,
						       (uint64_t)-5000, 0, 1ull << 62, -(1ull << 62)),
					 __ATOMIC_RELAXED);
			break;
		case 12:
			__atomic_store_n(&h->control, (uint32_t)PICK(&rng, 0, 1, r), __ATOMIC_RELAXED);
			break;
		case 13:
			__atomic_store_n(&h->agent_pid, (uint32_t)PICK(&rng, 0, ~0u, 1u << 31, r, 1),
					 __ATOMIC_RELAXED);
			break;
		case 14:
			__atomic_store_n(&h->epoch, (uint32_t)PICK(&rng, 0, ~0u, r), __ATOMIC_RELAXED);
			break;
		case 15:
			__atomic_store_n(&h->heartbeat_ns, PICK(&rng, 0, ~0ull, mono(), r),
					 __ATOMIC_RELAXED);
			break;
		case 16:
			__atomic_store_n(&h->ring_drops, PICK(&rng, 0, ~0ull, r), __ATOMIC_RELAXED);
			__atomic_store_n(&h->string_drops, PICK(&rng, 0, ~0ull, r), __ATOMIC_RELAXED);
			__atomic_store_n(&h->source_drops, PICK(&rng, 0, ~0ull, r), __ATOMIC_RELAXED);
			break;
		case 17:
			memcpy(h->magic, xorshift(&rng) % 2 ? "NOTMAGIC" : "\0\0\0\0\0\0\0\0", 8);
			for (unsigned k = xorshift(&rng) % 2000; k; k--)
				__asm__ volatile("" ::: "memory");
			memcpy(h->magic, SBC_MAGIC, 8);
			break;
		default: {
			/* a slot or a string entry, published for the agent's session */
			uint32_t i = (uint32_t)(r % hs->cap);
			struct sbc_slot *s = &ring[i];
			uint64_t seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);

			if (what < 21) {
				uint64_t *w = (uint64_t *)&s->rec;

				for (size_t k = 0; k < sizeof(s->rec) / 8; k++)
					w[k] = xorshift(&rng);
				s->rec.name_id = (uint32_t)PICK(&rng, 0, 1, hs->scap, hs->scap + 1,
								65536, 65537, ~0u, r);
				s->epoch = xorshift(&rng) % 4 ? __atomic_load_n(&h->epoch, __ATOMIC_RELAXED) :
								(uint32_t)r;
				if ((seq & (hs->cap - 1)) == i) {
					/* free: publish it, as a producer would */
					__atomic_store_n(&s->seq, seq + 1, __ATOMIC_RELEASE);
				} else if (xorshift(&rng) % 4 == 0) {
					/* any sequence at all, for a moment */
					__atomic_store_n(&s->seq, PICK(&rng, seq + 2, ~0ull, r, i + 1,
								       seq - hs->cap),
							 __ATOMIC_RELEASE);
					for (unsigned k = xorshift(&rng) % 2000; k; k--)
						__asm__ volatile("" ::: "memory");
					__atomic_store_n(&s->seq, seq, __ATOMIC_RELEASE);
				}
			} else {
				struct sbc_string *e = &strs[r % hs->scap];

				for (size_t k = 0; k < sizeof(e->name); k++)
					e->name[k] = (char)(xorshift(&rng) % 4 ? 'a' + k % 26 :
							    xorshift(&rng));
				__atomic_store_n(&e->len, (uint32_t)PICK(&rng, SBC_STRING_MAX,
									 SBC_STRING_MAX + 1, 120, 128,
									 ~0u, 1u << 31, r, 5),
						 __ATOMIC_RELEASE);
			}
		}
		}
		hs->writes++;
		/* quiet a while: the agent must get through sometimes, mid-attack */
		for (unsigned k = xorshift(&rng) % 20000; k; k--)
			__asm__ volatile("" ::: "memory");
		if (!(hs->writes % 64))
			sched_yield();
	}
	return NULL;
}

/* a legitimate producer thread beside the hostile ones */
static void *emitter_thread(void *arg)
{
	struct sbc_producer *p = ((void **)arg)[0];
	int *stop = ((void **)arg)[1];
	uint32_t id = sbc_intern(p, "honest_kernel");

	for (uint64_t i = 0; !__atomic_load_n(stop, __ATOMIC_RELAXED); i++) {
		struct sb_gpu g = { .h.flags = 1, .h.ts = 1000 + i, .end_ns = 2000 + i, .name_id = id };

		sbc_emit(p, &g);
		if (i % 32 == 0)
			usleep(50);
	}
	return NULL;
}

/*
 * Canary pages on both sides of a hole the size of the agent's mapping: the
 * kernel tends to place the agent's mapping in it, so a read past either end
 * of the mapping reads canary text (ready-looking string entries named
 * CANARY) and shows up in what the agent passes on.
 */
static char *canary_setup(size_t maplen, size_t side, char **hole)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t holelen = (maplen + page - 1) & ~(page - 1);
	char *m = mmap(NULL, side + holelen + side, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return NULL;
	for (size_t off = 0; off < side + holelen + side; off += SBC_STRING_SIZE) {
		struct sbc_string *e = (struct sbc_string *)(m + off);

		e->len = 16;
		e->hash = 0;
		for (size_t k = 0; k + 8 <= sizeof(e->name); k += 8)
			memcpy(e->name + k, CANARY, 8);
	}
	munmap(m + side, holelen);
	*hole = m + side;
	return m;
}

/*
 * The kernel puts a new mapping in the highest gap it fits. So that the
 * agent's mapping goes in the hole, every gap above it that would fit is
 * filled with inaccessible placeholders for the time of the attach (not the
 * gap below the stack, which must stay free for it to grow).
 */
#define PLACEHOLDERS 256

struct placeholders {
	void *at[PLACEHOLDERS];
	size_t len[PLACEHOLDERS];
	unsigned n;
};

static void fill_gaps_above(const char *hole, size_t holelen, struct placeholders *ph)
{
	char line[512];
	unsigned long prev_end = 0;
	FILE *f = fopen("/proc/self/maps", "re");

	ph->n = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f) && ph->n < PLACEHOLDERS) {
		unsigned long start, end;

		if (sscanf(line, "%lx-%lx", &start, &end) != 2)
			continue;
		if (prev_end >= (unsigned long)hole + holelen && start > prev_end &&
		    start - prev_end >= holelen && start - prev_end < (256ul << 20) &&
		    !strstr(line, "[stack]")) {
			void *m = mmap((void *)prev_end, start - prev_end, PROT_NONE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
				       -1, 0);

			if (m != MAP_FAILED) {
				ph->at[ph->n] = m;
				ph->len[ph->n++] = start - prev_end;
			}
		}
		prev_end = end;
	}
	fclose(f);
}

static void unfill(struct placeholders *ph)
{
	for (unsigned i = 0; i < ph->n; i++)
		munmap(ph->at[i], ph->len[i]);
	ph->n = 0;
}

/* is the agent's mapping of path at hole? */
static bool mapped_at(const char *path, const char *hole)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "re");
	bool at = false;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, path) && strtoul(line, NULL, 16) == (unsigned long)hole)
			at = true;
	fclose(f);
	return at;
}

static void t_hostile_writers(void)
{
	/*
	 * Attaches race three writers, so how many win in a given time depends on
	 * the scheduler: the attack runs for ROUNDS_MS, then on (up to MAX_MS)
	 * until MIN_ATTACHES attaches and a record have come through.
	 */
	enum { THREADS = 3, ROUNDS_MS = 2500, MAX_MS = 20000, MIN_ATTACHES = 8 };
	char err[256], path[SBC_PATH_MAX];
	struct sbc_producer *p = sbc_create("hostile", 64);
	struct hostile hs = { .seed = 0x1234567 };
	struct check chk = { 0 };
	pthread_t thr[THREADS], em;
	char *canary = NULL, *hole = NULL;
	size_t side = 1u << 20;
	unsigned attached = 0, refused = 0, enabled = 0, in_hole = 0, odd_errno = 0, multiline = 0;
	unsigned badname = 0;
	int stop_emit = 0;
	void *emarg[2] = { p, &stop_emit };

	REQUIRE(p, "sbc_create: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s", sbc_path(p));
	hs.h = map_file(path, &hs.len);
	if (!hs.h) {
		sbc_destroy(p);
		REQUIRE(0, "map %s", path);
	}
	memcpy(&hs.valid, hs.h, sizeof(hs.valid));
	hs.cap = hs.valid.ring_capacity;
	hs.scap = hs.valid.string_capacity;
	canary = canary_setup(hs.len, side, &hole);
	if (getenv("HOSTILE_DEBUG"))
		fprintf(stderr, "hole at %p len %zu\n", (void *)hole, hs.len);
	for (int t = 0; t < THREADS; t++)
		pthread_create(&thr[t], NULL, hostile_thread, &hs);
	pthread_create(&em, NULL, emitter_thread, emarg);

	uint64_t t0 = mono();
	for (;;) {
		uint64_t ms = (mono() - t0) / 1000000ull;
		struct placeholders ph;

		if (ms >= MAX_MS ||
		    (ms >= ROUNDS_MS && attached >= MIN_ATTACHES && refused > 0 && chk.gpu > 0))
			break;

		if (hole)
			fill_gaps_above(hole, hs.len, &ph);
		struct sbc_reader *r = sbc_attach(getpid(), err, sizeof(err));

		if (hole)
			unfill(&ph);

		if (!r) {
			refused++;
			if (getenv("HOSTILE_DEBUG"))
				fprintf(stderr, "refused: %s\n", err);
			if (errno != EPERM && errno != EAGAIN && errno != EBUSY && errno != ENOENT)
				odd_errno++;
			if (!err[0] || strchr(err, '\n'))
				multiline++;
			if (!printable_str(err))
				badname++;
			continue;
		}
		attached++;
		if (hole && mapped_at(path, hole))
			in_hole++;
		else if (getenv("HOSTILE_DEBUG") && attached < 3)
			system("grep -n -B2 -A2 stepblame /proc/$PPID/maps >&2");
		if (!printable_str(sbc_producer_name(r)) || !printable_str(sbc_reader_path(r)))
			badname++;
		if (sbc_set_enabled(r, true) == 0)
			enabled++;
		for (int i = 0; i < 20; i++) {
			uint64_t a, b, c;
			struct sbc_stats st;

			sbc_heartbeat(r);
			sbc_drain(r, check_cb, &chk);
			sbc_counters(r, &a, &b, &c);
			usleep(200);
			sbc_stats(r, &st);
			if (i == 10) {
				sbc_set_enabled(r, false);
				sbc_set_enabled(r, true);
			}
		}
		sbc_detach(r);
	}
	__atomic_store_n(&hs.stop, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&stop_emit, 1, __ATOMIC_RELAXED);
	for (int t = 0; t < THREADS; t++)
		pthread_join(thr[t], NULL);
	pthread_join(em, NULL);

	printf("    hostile_writers: in %.1f s, %u attaches, %u refused, %u enabled, "
	       "%u in the canary hole; %llu records, %llu strings out; %llu hostile writes\n",
	       (mono() - t0) / 1e9, attached, refused, enabled,
	       in_hole, (unsigned long long)chk.gpu, (unsigned long long)chk.strings,
	       (unsigned long long)hs.writes);
	CHECK(attached > 0 && refused > 0, "attached %u, refused %u: the attack did not bite",
	      attached, refused);
	CHECK(chk.gpu > 0, "no record came through at all");
	CHECK(chk.bad == 0, "%llu malformed records: %s", (unsigned long long)chk.bad, chk.why);
	CHECK(chk.canary == 0, "%llu records carry bytes from outside the mapping",
	      (unsigned long long)chk.canary);
	CHECK(chk.foreign_pid == 0, "%llu records with the producer's pid",
	      (unsigned long long)chk.foreign_pid);
	CHECK(chk.nul_in_name == 0, "%llu names with a NUL", (unsigned long long)chk.nul_in_name);
	CHECK(odd_errno == 0 && multiline == 0, "%u refusals with an odd errno, %u not one line",
	      odd_errno, multiline);
	CHECK(badname == 0, "%u non-printable names, paths or errors", badname);
	munmap(hs.h, hs.len);
	if (canary)
		munmap(canary, side * 2 + ((hs.len + 4095) & ~4095ul));
	sbc_destroy(p);
}

/* ------------------------------------------------------- squatted names */

static void t_squatted_names(void)
{
	enum { AHEAD = 64 };
	char err[256], names[AHEAD * 4][96], real[SBC_PATH_MAX] = "", decoy[96];
	int up[2], down[2], status, nnames = 0;
	long last = 0;
	FILE *f;
	pid_t sq, prod;
	struct check chk = { 0 };

	if (geteuid() != 0)
		SKIP("needs root to act as another user");
	f = fopen("/proc/sys/kernel/ns_last_pid", "re");
	if (!f || fscanf(f, "%ld", &last) != 1)
		last = getpid();
	if (f)
		fclose(f);
	/* the names a producer with the next pids could use, old style and guessed */
	for (int i = 1; i <= AHEAD; i++) {
		long pid = last + i;

		snprintf(names[nnames++], sizeof(names[0]), SBC_DIR "/" SBC_NAME_PREFIX "%ld" SBC_NAME_SUFFIX, pid);
		snprintf(names[nnames++], sizeof(names[0]),
			 SBC_DIR "/" SBC_NAME_PREFIX "%ld-0000000000000000" SBC_NAME_SUFFIX, pid);
		snprintf(names[nnames++], sizeof(names[0]),
			 SBC_DIR "/" SBC_NAME_PREFIX "%ld-ffffffffffffffff" SBC_NAME_SUFFIX, pid);
		snprintf(names[nnames++], sizeof(names[0]),
			 SBC_DIR "/" SBC_NAME_PREFIX "%ld-%016llx" SBC_NAME_SUFFIX, pid,
			 (unsigned long long)pid * 0x9e3779b97f4a7c15ull);
	}
	sq = fork();
	if (sq == 0) {
		if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
			_exit(2);
		for (int i = 0; i < nnames; i++) {
			if (i % 4 == 3) {
				/* a symlink to somewhere the victim can write */
				if (symlink("/dev/shm/squatted-target", names[i]))
					_exit(3);
				continue;
			}
			int fd = open(names[i], O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);

			if (fd < 0 || write(fd, "squat", 5) != 5)
				_exit(3);
			fchmod(fd, 0666);
			close(fd);
		}
		_exit(0);
	}
	REQUIRE(sq > 0, "fork");
	waitpid(sq, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		for (int i = 0; i < nnames; i++)
			unlink(names[i]);
		REQUIRE(0, "the squatter failed (status %#x)", status);
	}

	REQUIRE(!pipe(up) && !pipe(down), "pipe");
	prod = fork();
	if (prod == 0) {
		char x = 0;
		struct sbc_producer *p;
		size_t len;
		void *dm = NULL, *m;

		close(up[0]);
		close(down[1]);
		/* a decoy mapped first: a channel-named copy that belongs to nobody */
		snprintf(decoy, sizeof(decoy), SBC_DIR "/" SBC_NAME_PREFIX "%d-decoy" SBC_NAME_SUFFIX,
			 (int)getpid());
		p = sbc_create("victim", 64);
		if (!p)
			_exit(4);
		m = map_file(sbc_path(p), &len);
		int fd = open(decoy, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);

		if (!m || fd < 0 || write(fd, m, len) != (ssize_t)len || fchown(fd, 65534, 65534))
			_exit(5);
		dm = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		munmap(m, len);
		if (dm == MAP_FAILED)
			_exit(6);
		((struct sbc_header *)dm)->producer[0] = 'D'; /* "DICTIM": tell it apart */
		if (write(up[1], sbc_path(p), strlen(sbc_path(p)) + 1) < 0)
			_exit(7);
		for (int i = 0; i < 5000 && !sbc_active(p); i++)
			usleep(1000);
		uint32_t id = sbc_intern(p, "victim_kernel");
		for (int i = 0; i < 10; i++) {
			struct sb_gpu g = { .h.flags = 1, .h.ts = 100 + i, .end_ns = 200 + i,
					    .name_id = id };

			sbc_emit(p, &g);
		}
		if (write(up[1], &x, 1) != 1 || read(down[0], &x, 1) != 1)
			_exit(8);
		sbc_destroy(p);
		munmap(dm, len);
		unlink(decoy);
		exit(0);
	}
	REQUIRE(prod > 0, "fork");
	close(up[1]);
	close(down[0]);
	ssize_t got = 0, k;
	while (got < (ssize_t)sizeof(real) && (k = read(up[0], real + got, 1)) == 1 && real[got])
		got++;
	real[sizeof(real) - 1] = 0;
	struct sbc_reader *r = sbc_attach(prod, err, sizeof(err));

	CHECK(r, "attach to the victim: %s", err);
	if (r) {
		char x;

		CHECK(!strcmp(sbc_producer_name(r), "victim"), "attached to '%s' (%s)",
		      sbc_producer_name(r), sbc_reader_path(r));
		CHECK(!strcmp(sbc_reader_path(r), real), "attached to %s, the victim made %s",
		      sbc_reader_path(r), real);
		CHECK(sbc_set_enabled(r, true) == 0, "enable");
		CHECK(read(up[0], &x, 1) == 1, "victim did not emit");
		while (sbc_drain(r, check_cb, &chk) > 0)
			;
		CHECK(chk.gpu == 10 && chk.strings == 1 && chk.bad == 0, "%llu records, %llu names",
		      (unsigned long long)chk.gpu, (unsigned long long)chk.strings);
		sbc_detach(r);
	}
	CHECK(write(down[1], "x", 1) == 1, "release the victim");
	waitpid(prod, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "victim status %#x", status);
	printf("    squatted_names: victim pid %d (%s the squatted range %ld..%ld), channel %s\n",
	       (int)prod, prod > last && prod <= last + AHEAD ? "in" : "outside", last + 1,
	       last + AHEAD, real);
	for (int i = 0; i < nnames; i++) {
		struct stat st;

		CHECK(!lstat(names[i], &st) && st.st_uid == 65534, "%s was removed or replaced",
		      names[i]);
		unlink(names[i]);
	}
	CHECK(access(real, F_OK) && errno == ENOENT, "the victim left %s", real);
	CHECK(access("/dev/shm/squatted-target", F_OK), "the victim wrote through a symlink");
	unlink("/dev/shm/squatted-target");
	close(up[0]);
	close(down[1]);
}

/* ------------------------------------------------------- forked child */

static void t_forked_child(void)
{
	char err[256];
	struct sbc_producer *p = sbc_create("parent", 16);
	int up[2], down[2], status;
	pid_t child;
	char x = 0;

	REQUIRE(p, "sbc_create: %s", strerror(errno));
	REQUIRE(!pipe(up) && !pipe(down), "pipe");
	child = fork();
	if (child == 0) {
		/* the parent's mapping is inherited; a channel of its own comes second */
		if (write(up[1], &x, 1) != 1 || read(down[0], &x, 1) != 1)
			_exit(1);
		struct sbc_producer *mine = sbc_create("child", 16);

		if (!mine || write(up[1], &x, 1) != 1 || read(down[0], &x, 1) != 1)
			_exit(2);
		sbc_destroy(mine);
		_exit(0);
	}
	REQUIRE(child > 0, "fork");
	CHECK(read(up[0], &x, 1) == 1, "child");
	struct sbc_reader *r = sbc_attach(child, err, sizeof(err));
	CHECK(!r && errno == EPERM && strstr(err, "made by pid"),
	      "the parent's channel, mapped in the child: errno %d '%s'", errno,
	      r ? sbc_producer_name(r) : err);
	sbc_detach(r);
	CHECK(write(down[1], &x, 1) == 1 && read(up[0], &x, 1) == 1, "child");
	r = sbc_attach(child, err, sizeof(err));
	CHECK(r && !strcmp(sbc_producer_name(r), "child"), "child's own channel: %s",
	      r ? sbc_producer_name(r) : err);
	sbc_detach(r);
	CHECK(write(down[1], &x, 1) == 1, "child");
	waitpid(child, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
	sbc_destroy(p);
}

/* ------------------------------------------------------- tid flood */

struct tidcheck {
	uint64_t n, real, real_ok, fake_mapped;
	uint32_t want_host;
};

static int tid_cb(void *ctx, const struct sb_hdr *h)
{
	struct tidcheck *c = ctx;
	const struct sb_gpu *g = (const void *)h;

	if (h->type != SB_REC_GPU)
		return 0;
	c->n++;
	if (g->bytes == 1) { /* the producer's real thread */
		c->real++;
		c->real_ok += h->tid == c->want_host;
	} else if (h->tid) {
		c->fake_mapped++;
	}
	return 0;
}

static void t_tid_flood(void)
{
	enum { N = 100000 };
	char err[256], x;
	int up[2], down[2], pidp[2], status;
	pid_t outer, inner = 0;
	struct tidcheck tc = { 0 };
	struct sbc_stats st = { 0 };
	uint64_t rd = 0;

	if (geteuid() != 0)
		SKIP("needs root to make a pid namespace");
	REQUIRE(!pipe(up) && !pipe(down) && !pipe(pidp), "pipe");
	outer = fork();
	if (outer == 0) {
		close(up[0]);
		close(down[1]);
		if (unshare(CLONE_NEWPID))
			_exit(3);
		pid_t in = fork();

		if (in == 0) {
			struct sbc_producer *p;
			uint64_t sent = 0;

			prctl(PR_SET_PDEATHSIG, SIGKILL);
			p = sbc_create("tidflood", 4096);
			if (!p || getpid() != 1 || write(up[1], &x, 1) != 1)
				_exit(5);
			for (int i = 0; i < 5000 && !sbc_active(p); i++)
				usleep(1000);
			/* every record a thread id never seen; every 50th our own */
			for (uint64_t i = 0; i < N; i++) {
				struct sb_gpu g = { .h.flags = 4, .h.ts = 1000 + i, .end_ns = 1000 + i };

				g.bytes = i % 50 == 0;
				g.h.tid = g.bytes ? (uint32_t)syscall(SYS_gettid) : (uint32_t)(1000 + i);
				while (sbc_emit(p, &g) == -ENOSPC)
					usleep(100); /* counted as a drop: retried, so all N arrive */
				sent++;
			}
			if (write(up[1], &sent, sizeof(sent)) != sizeof(sent) ||
			    read(down[0], &x, 1) != 1)
				_exit(7);
			sbc_destroy(p);
			_exit(0);
		}
		if (in < 0 || write(pidp[1], &in, sizeof(in)) != sizeof(in))
			_exit(8);
		waitpid(in, &status, 0);
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 9);
	}
	REQUIRE(outer > 0, "fork");
	close(up[1]);
	close(down[0]);
	close(pidp[1]);
	bool ready = read(up[0], &x, 1) == 1 && read(pidp[0], &inner, sizeof(inner)) == sizeof(inner);
	close(pidp[0]);
	if (!ready) {
		close(down[1]);
		waitpid(outer, &status, 0);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
			SKIP("cannot make a pid namespace here");
		REQUIRE(0, "namespace child failed, status %#x", status);
	}
	tc.want_host = (uint32_t)inner;
	struct sbc_reader *r = sbc_attach(inner, err, sizeof(err));

	CHECK(r, "attach: %s", err);
	if (r) {
		uint64_t sent = 0, t0 = mono(), cpu = 0, hb = 0;
		int flags = fcntl(up[0], F_GETFL);

		fcntl(up[0], F_SETFL, flags | O_NONBLOCK);
		sbc_set_enabled(r, true);
		while (mono() - t0 < 60000000000ull) {
			uint64_t c0 = thread_cpu_ns();
			int n = sbc_drain(r, tid_cb, &tc);

			cpu += thread_cpu_ns() - c0;
			if (mono() - hb > SBC_HEARTBEAT_PERIOD_NS) {
				sbc_heartbeat(r);
				hb = mono();
			}
			if (!sent && read(up[0], &sent, sizeof(sent)) != sizeof(sent))
				sent = 0;
			if (sent && n == 0 && tc.n >= sent)
				break;
			if (n == 0)
				usleep(200);
		}
		double secs = (mono() - t0) / 1e9;

		sbc_stats(r, &st);
		sbc_counters(r, &rd, NULL, NULL);
		printf("    tid_flood: %llu records in %.2f s, agent CPU %.3f s (%.2f us/record), "
		       "%llu rescans, %llu tids unmapped over the budget\n",
		       (unsigned long long)tc.n, secs, cpu / 1e9, tc.n ? cpu / 1e3 / tc.n : 0.0,
		       (unsigned long long)st.tid_rescans, (unsigned long long)st.tid_unmapped);
		CHECK(sent == N && tc.n == N, "sent %llu, delivered %llu of %d",
		      (unsigned long long)sent, (unsigned long long)tc.n, N);
		CHECK(st.tid_rescans <= SBC_TID_RESCANS_PER_SEC * (secs + 1) + 1,
		      "%llu rescans of /proc in %.2f s, budget %u/s", (unsigned long long)st.tid_rescans,
		      secs, SBC_TID_RESCANS_PER_SEC);
		/* a count above all, but the time too: one scan per record was ~26 us each */
		CHECK(cpu < 1000000000ull, "the agent spent %.2f s of CPU on %llu records", cpu / 1e9,
		      (unsigned long long)tc.n);
		CHECK(tc.fake_mapped == 0, "%llu invented tids were mapped to a host tid",
		      (unsigned long long)tc.fake_mapped);
		CHECK(tc.real == N / 50 && tc.real_ok == tc.real,
		      "the real thread kept its host tid in %llu of %llu records",
		      (unsigned long long)tc.real_ok, (unsigned long long)tc.real);
		sbc_detach(r);
	}
	CHECK(write(down[1], "x", 1) == 1, "release");
	close(down[1]);
	close(up[0]);
	waitpid(outer, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "namespace child status %#x", status);
}

/* ------------------------------------------------------- record flood */

struct flood {
	struct sbc_producer *p;
	int stop;
	uint64_t produced; /* emits written or counted as a ring drop */
};

static void *flood_thread(void *arg)
{
	struct flood *f = arg;
	uint64_t mine = 0;

	for (uint64_t i = 0; !__atomic_load_n(&f->stop, __ATOMIC_RELAXED); i++) {
		struct sb_gpu g = { .h.flags = 1, .h.ts = i + 1, .end_ns = i + 2 };
		int e = sbc_emit(f->p, &g);

		if (e == 0 || e == -ENOSPC)
			mine++;
	}
	__atomic_fetch_add(&f->produced, mine, __ATOMIC_RELAXED);
	return NULL;
}

static int count_cb(void *ctx, const struct sb_hdr *h)
{
	if (h->type == SB_REC_GPU)
		(*(uint64_t *)ctx)++;
	return 0;
}

/* flood for ms at budget (0: the default); the numbers come back */
static void flood(uint32_t budget, unsigned ms, uint64_t *produced, uint64_t *delivered,
		  uint64_t *dropped, uint64_t *budget_drops, double *secs, double *cpu)
{
	enum { T = 2 };
	char err[256];
	struct flood f = { 0 };
	pthread_t thr[T];
	struct sbc_reader *r;
	struct sbc_stats st;
	uint64_t t0, hb = 0, c = 0, n = 0;

	*produced = *delivered = *dropped = *budget_drops = 0;
	*secs = *cpu = 0;
	f.p = sbc_create("flood", 4096);
	if (!f.p)
		return;
	t0 = mono(); /* the budgets start at attach */
	r = sbc_attach(getpid(), err, sizeof(err));
	if (!r) {
		sbc_destroy(f.p);
		return;
	}
	if (budget)
		sbc_set_budget(r, &(struct sbc_budget){ .records_per_sec = budget,
							.discards_per_sec = budget * 4 });
	sbc_set_enabled(r, true);
	for (int t = 0; t < T; t++)
		pthread_create(&thr[t], NULL, flood_thread, &f);
	while (mono() - t0 < ms * 1000000ull) {
		uint64_t c0 = thread_cpu_ns();

		sbc_drain(r, count_cb, &n);
		c += thread_cpu_ns() - c0;
		if (mono() - hb > SBC_HEARTBEAT_PERIOD_NS) {
			sbc_heartbeat(r);
			hb = mono();
		}
		usleep(1000);
	}
	__atomic_store_n(&f.stop, 1, __ATOMIC_RELAXED);
	for (int t = 0; t < T; t++)
		pthread_join(thr[t], NULL);
	/* what is left in the ring: delivered or counted, within the budgets */
	for (uint64_t t1 = mono(); mono() - t1 < 5000000000ull;) {
		sbc_drain(r, count_cb, &n);
		sbc_counters(r, dropped, NULL, NULL);
		if (n + *dropped >= f.produced)
			break;
		usleep(1000);
	}
	*secs = (mono() - t0) / 1e9;
	*cpu = c / 1e9;
	sbc_stats(r, &st);
	sbc_counters(r, dropped, NULL, NULL);
	*produced = f.produced;
	*delivered = n;
	*budget_drops = st.budget_drops;
	sbc_detach(r);
	sbc_destroy(f.p);
}

static void t_record_flood(void)
{
	const uint32_t budget = 20000;
	uint64_t produced, delivered, dropped, bdrops;
	double secs, cpu;

	flood(budget, 1500, &produced, &delivered, &dropped, &bdrops, &secs, &cpu);
	REQUIRE(produced, "no flood (no channel or no agent)");
	printf("    record_flood: budget %u/s: produced %llu in %.2f s, delivered %llu, dropped %llu "
	       "(%llu over the budget), agent CPU %.3f s\n", budget, (unsigned long long)produced,
	       secs, (unsigned long long)delivered, (unsigned long long)dropped,
	       (unsigned long long)bdrops, cpu);
	CHECK(delivered <= budget * (secs + 1) + 1, "delivered %llu in %.2f s over a budget of %u/s",
	      (unsigned long long)delivered, secs, budget);
	CHECK(delivered >= budget / 2, "delivered only %llu", (unsigned long long)delivered);
	CHECK(bdrops > 0, "no record was counted over the budget");
	CHECK(delivered + dropped == produced, "delivered %llu + dropped %llu != produced %llu",
	      (unsigned long long)delivered, (unsigned long long)dropped,
	      (unsigned long long)produced);

	/* the default budget, as stepblame runs */
	flood(0, 1500, &produced, &delivered, &dropped, &bdrops, &secs, &cpu);
	printf("    record_flood: default budget %u/s: produced %llu in %.2f s, delivered %llu, "
	       "dropped %llu (%llu over the budget), agent CPU %.3f s\n", SBC_RECORDS_PER_SEC,
	       (unsigned long long)produced, secs, (unsigned long long)delivered,
	       (unsigned long long)dropped, (unsigned long long)bdrops, cpu);
	CHECK(delivered <= SBC_RECORDS_PER_SEC * (secs + 1) + 1,
	      "delivered %llu in %.2f s over the default budget", (unsigned long long)delivered,
	      secs);
	CHECK(delivered + dropped == produced, "default: delivered %llu + dropped %llu != %llu",
	      (unsigned long long)delivered, (unsigned long long)dropped,
	      (unsigned long long)produced);
}


int main(void)
{
	RUN_ROOT(t_hostile_writers);
	RUN_ROOT(t_squatted_names);
	RUN_ROOT(t_forked_child);
	RUN_ROOT(t_tid_flood);
	RUN_ROOT(t_record_flood);
	return test_summary();
}
