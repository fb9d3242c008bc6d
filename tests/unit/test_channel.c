// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The GPU timeline channel: producer and agent, in one process and across processes. */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "format/channel.h"
#include "test.h"
#include "format/trace.h"
#include "base/util.h"

/* ------------------------------------------------------------ helpers */

struct coll {
	struct sb_gpu *recs;
	size_t n, cap;
	char (*names)[SBC_STRING_SIZE]; /* by id */
	unsigned char *seen;
	unsigned nstrings, dup_strings, unresolved, bad;
};

static struct coll *coll_new(size_t cap)
{
	struct coll *c = calloc(1, sizeof(*c));

	c->cap = cap;
	c->recs = calloc(cap, sizeof(*c->recs));
	c->names = calloc(SBC_STRINGS + 1, sizeof(*c->names));
	c->seen = calloc(SBC_STRINGS + 1, 1);
	return c;
}

static void coll_free(struct coll *c)
{
	if (!c)
		return;
	free(c->recs);
	free(c->names);
	free(c->seen);
	free(c);
}

static int collect(void *ctx, const struct sb_hdr *h)
{
	struct coll *c = ctx;

	if (h->type == SB_REC_STRING) {
		const struct sb_text *t = (const void *)h;

		if (t->id == 0 || t->id > SBC_STRINGS || t->len >= SBC_STRING_SIZE ||
		    h->size != ((sizeof(*t) + t->len + 7) & ~7ul) || h->size % 8) {
			c->bad++;
			return 0;
		}
		if (c->seen[t->id])
			c->dup_strings++;
		c->seen[t->id] = 1;
		memcpy(c->names[t->id], t->text, t->len);
		c->names[t->id][t->len] = 0;
		c->nstrings++;
		return 0;
	}
	if (h->type != SB_REC_GPU || h->size != sizeof(struct sb_gpu)) {
		c->bad++;
		return 0;
	}
	const struct sb_gpu *g = (const void *)h;

	if (g->name_id && (g->name_id > SBC_STRINGS || !c->seen[g->name_id]))
		c->unresolved++;
	if (c->n < c->cap)
		c->recs[c->n++] = *g;
	return 0;
}

static struct sb_gpu mkrec(uint64_t i)
{
	struct sb_gpu g = {
		.h.flags = (uint16_t)(1 + i % 7),
		.h.tid = (uint32_t)(1000 + i % 13),
		.h.ts = 1000000 + i * 10,
		.end_ns = 1000000 + i * 10 + 5,
		.bytes = i,
		.graph_node_id = i * 3,
		.correlation_id = (uint32_t)(i + 1),
		.device = (uint32_t)(i % 2),
		.stream = 7,
		.sub = (uint32_t)(i % 5),
		.graph_id = 9,
		.grid = { 1, 2, 3 },
		.block = { 4, 5, 6 },
	};
	return g;
}

static bool same_payload(const struct sb_gpu *a, const struct sb_gpu *b)
{
	/* everything after the header, plus the header fields the producer owns */
	return a->h.flags == b->h.flags && a->h.tid == b->h.tid && a->h.ts == b->h.ts &&
	       !memcmp((const char *)a + sizeof(a->h), (const char *)b + sizeof(b->h),
		       sizeof(*a) - sizeof(a->h));
}

static char chan_path[PATH_MAX];

/* how many channel files of pid are in /dev/shm; the first one's path in path */
static int chan_files(pid_t pid, char *path, size_t len)
{
	char pat[64];
	glob_t g;
	int n = 0;

	snprintf(pat, sizeof(pat), SBC_DIR "/" SBC_NAME_PREFIX "%d-*" SBC_NAME_SUFFIX, (int)pid);
	if (path && len)
		snprintf(path, len, SBC_DIR "/" SBC_NAME_PREFIX "%d-absent" SBC_NAME_SUFFIX, (int)pid);
	if (!glob(pat, 0, NULL, &g)) {
		n = (int)g.gl_pathc;
		if (n && path && len)
			snprintf(path, len, "%s", g.gl_pathv[0]);
		globfree(&g);
	}
	return n;
}

/* the path of this process's channel (a name that does not exist if none) */
static const char *own_path(void)
{
	chan_files(getpid(), chan_path, sizeof(chan_path));
	return chan_path;
}

/* SBC_DIR/SBC_NAME_PREFIX<pid>-<16 lowercase hex>SBC_NAME_SUFFIX */
static bool well_named(const char *path, pid_t pid)
{
	char head[64];
	size_t hl;

	hl = (size_t)snprintf(head, sizeof(head), SBC_DIR "/" SBC_NAME_PREFIX "%d-", (int)pid);
	if (strncmp(path, head, hl) || strlen(path) != hl + 16 + strlen(SBC_NAME_SUFFIX) ||
	    strcmp(path + hl + 16, SBC_NAME_SUFFIX))
		return false;
	for (size_t i = hl; i < hl + 16; i++)
		if (!strchr("0123456789abcdef", path[i]))
			return false;
	return true;
}

/* a private mapping of our own channel file, to play a misbehaving party */
static struct sbc_header *poke_map(size_t *len)
{
	int fd = open(own_path(), O_RDWR | O_CLOEXEC);
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

static int drain_all(struct sbc_reader *r, struct coll *c)
{
	int n, total = 0;

	while ((n = sbc_drain(r, collect, c)) > 0)
		total += n;
	return n < 0 ? n : total;
}

/* -------------------------------------------------------------- cases */

static void t_roundtrip(void)
{
	char err[256];
	struct sbc_producer *p = sbc_create("unit-test", 64);
	struct sbc_reader *r;
	struct coll *c;
	int n;

	REQUIRE(p, "sbc_create: %s", strerror(errno));
	CHECK(!strcmp(sbc_path(p), own_path()) && well_named(sbc_path(p), getpid()), "path %s",
	      sbc_path(p));
	struct stat st;
	CHECK(!lstat(own_path(), &st) && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600,
	      "channel file mode %o", (unsigned)st.st_mode);
	CHECK(!sbc_active(p), "active with no agent");
	r = sbc_attach(getpid(), err, sizeof(err));
	if (!r) {
		sbc_destroy(p);
		REQUIRE(0, "attach: %s", err);
	}
	CHECK(!strcmp(sbc_producer_name(r), "unit-test"), "producer %s", sbc_producer_name(r));
	CHECK(!sbc_active(p), "active before enable");
	REQUIRE(sbc_set_enabled(r, true) == 0, "enable");
	CHECK(sbc_active(p), "not active after enable");
	c = coll_new(1000);
	for (uint64_t i = 0; i < 60; i++) {
		struct sb_gpu g = mkrec(i);

		CHECK(sbc_emit(p, &g) == 0, "emit %llu", (unsigned long long)i);
	}
	n = drain_all(r, c);
	CHECK(n == 60, "drained %d, want 60", n);
	CHECK(c->n == 60, "collected %zu", c->n);
	for (size_t i = 0; i < c->n; i++) {
		struct sb_gpu want = mkrec(i);

		CHECK(same_payload(&c->recs[i], &want), "record %zu differs (bytes %llu)", i,
		      (unsigned long long)c->recs[i].bytes);
		CHECK(c->recs[i].h.type == SB_REC_GPU && c->recs[i].h.pid == (uint32_t)getpid(),
		      "record %zu header type %u pid %u", i, c->recs[i].h.type, c->recs[i].h.pid);
	}
	CHECK(c->bad == 0, "%u malformed records", c->bad);
	CHECK(sbc_drain(r, collect, c) == 0, "second drain not empty");
	sbc_detach(r);
	CHECK(!sbc_active(p), "still active after detach");
	sbc_destroy(p);
	CHECK(access(own_path(), F_OK) && errno == ENOENT, "channel file left after destroy");
	coll_free(c);
}

static void t_disabled_writes_nothing(void)
{
	char err[256];
	struct sbc_producer *p = sbc_create("unit-test", 64);
	struct sbc_reader *r;
	struct coll *c = coll_new(100);
	size_t len;
	struct sbc_header *h;

	REQUIRE(p, "sbc_create: %s", strerror(errno));
	for (int i = 0; i < 50; i++) {
		struct sb_gpu g = mkrec(i);

		CHECK(sbc_emit(p, &g) == -EAGAIN, "emit with no agent did not say EAGAIN");
	}
	h = poke_map(&len);
	CHECK(h && h->written == 0 && h->ring_drops == 0, "producer wrote with no agent");
	if (h)
		munmap(h, len);
	r = sbc_attach(getpid(), err, sizeof(err));
	CHECK(r, "attach: %s", err);
	if (r) {
		/* attached but not enabled: still nothing */
		struct sb_gpu g = mkrec(1);

		CHECK(sbc_emit(p, &g) == -EAGAIN, "emit while attached but disabled");
		CHECK(sbc_set_enabled(r, true) == 0, "enable");
		CHECK(drain_all(r, c) == 0, "records from before enabling");
		CHECK(sbc_stale(r) == 0, "stale %llu", (unsigned long long)sbc_stale(r));
		sbc_set_enabled(r, false);
		CHECK(sbc_emit(p, &g) == -EAGAIN, "emit after disable");
		sbc_detach(r);
	}
	sbc_destroy(p);
	coll_free(c);
}

static void t_strings(void)
{
	char err[256], longname[300];
	struct sbc_producer *p = sbc_create("unit-test", 256);
	struct sbc_reader *r;
	struct coll *c = coll_new(100);
	uint32_t a, b, a2, l;
	uint64_t sd;

	REQUIRE(p, "sbc_create: %s", strerror(errno));
	a = sbc_intern(p, "sgemm_128x64_nt");
	b = sbc_intern(p, "layernorm_fwd");
	a2 = sbc_intern(p, "sgemm_128x64_nt");
	memset(longname, 'k', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	l = sbc_intern(p, longname);
	CHECK(a && b && a != b && a == a2, "ids a=%u b=%u a again=%u", a, b, a2);
	CHECK(l && l != a && l != b, "long name id %u", l);
	CHECK(sbc_intern(p, "") == 0 && sbc_intern(p, NULL) == 0, "empty name got an id");
	r = sbc_attach(getpid(), err, sizeof(err));
	if (!r) {
		sbc_destroy(p);
		coll_free(c);
		REQUIRE(0, "attach: %s", err);
	}
	sbc_set_enabled(r, true);
	uint32_t ids[] = { a, b, a, 0, l, b, a };
	for (size_t i = 0; i < ARRAY_SIZE(ids); i++) {
		struct sb_gpu g = mkrec(i);

		g.name_id = ids[i];
		sbc_emit(p, &g);
	}
	CHECK(drain_all(r, c) == (int)ARRAY_SIZE(ids), "drained %zu", c->n);
	CHECK(c->nstrings == 3 && c->dup_strings == 0, "%u strings, %u repeated", c->nstrings,
	      c->dup_strings);
	CHECK(c->unresolved == 0, "%u records used a name before its string record", c->unresolved);
	CHECK(!strcmp(c->names[a], "sgemm_128x64_nt") && !strcmp(c->names[b], "layernorm_fwd"),
	      "names '%s' '%s'", c->names[a], c->names[b]);
	CHECK(strlen(c->names[l]) == SBC_STRING_MAX && !strncmp(c->names[l], longname, SBC_STRING_MAX),
	      "long name kept %zu bytes", strlen(c->names[l]));
	for (size_t i = 0; i < c->n && i < ARRAY_SIZE(ids); i++)
		CHECK(c->recs[i].name_id == ids[i], "record %zu name_id %u want %u", i,
		      c->recs[i].name_id, ids[i]);

	/* a new session passes the names on again */
	sbc_set_enabled(r, false);
	sbc_set_enabled(r, true);
	struct coll *c2 = coll_new(10);
	struct sb_gpu g = mkrec(0);
	g.name_id = b;
	sbc_emit(p, &g);
	CHECK(drain_all(r, c2) == 1 && c2->nstrings == 1 && !strcmp(c2->names[b], "layernorm_fwd"),
	      "second session: %zu records, %u strings", c2->n, c2->nstrings);
	coll_free(c2);

	/* fill the table: the overflow gets id 0 and is counted */
	char name[32];
	uint32_t last = 0, zero = 0;
	for (int i = 0; i < SBC_STRINGS + 10; i++) {
		snprintf(name, sizeof(name), "kernel_%d", i);
		uint32_t id = sbc_intern(p, name);

		if (id)
			last = id;
		else
			zero++;
	}
	sbc_counters(r, NULL, &sd, NULL);
	CHECK(last == SBC_STRINGS, "last id %u", last);
	CHECK(zero == 13 && sd == 13, "%u names got id 0, %llu string drops (want 13, 13)", zero,
	      (unsigned long long)sd);
	CHECK(sbc_intern(p, "layernorm_fwd") == b, "known name lost once the table is full");
	sbc_detach(r);
	sbc_destroy(p);
	coll_free(c);
}

static void t_overrun_counts_exact(void)
{
	char err[256];
	struct sbc_producer *p = sbc_create("unit-test", 16);
	struct sbc_reader *r;
	struct coll *c = coll_new(200);
	int ok = 0, full = 0, n;
	uint64_t rd, sd, srcd;

	REQUIRE(p, "sbc_create: %s", strerror(errno));
	r = sbc_attach(getpid(), err, sizeof(err));
	if (!r) {
		sbc_destroy(p);
		coll_free(c);
		REQUIRE(0, "attach: %s", err);
	}
	sbc_set_enabled(r, true);
	for (int i = 0; i < 100; i++) {
		struct sb_gpu g = mkrec(i);
		int e = sbc_emit(p, &g);

		if (e == 0)
			ok++;
		else if (e == -ENOSPC)
			full++;
	}
	CHECK(ok == 16 && full == 84, "accepted %d, refused %d (want 16, 84)", ok, full);
	sbc_add_source_drops(p, 7);
	sbc_counters(r, &rd, &sd, &srcd);
	CHECK(rd == 84 && sd == 0 && srcd == 7, "drops ring %llu string %llu source %llu",
	      (unsigned long long)rd, (unsigned long long)sd, (unsigned long long)srcd);
	n = drain_all(r, c);
	CHECK(n == 16, "drained %d", n);
	for (size_t i = 0; i < c->n; i++)
		CHECK(c->recs[i].bytes == i, "record %zu is #%llu", i, (unsigned long long)c->recs[i].bytes);
	for (int i = 100; i < 105; i++) {
		struct sb_gpu g = mkrec(i);

		CHECK(sbc_emit(p, &g) == 0, "emit after drain");
	}
	c->n = 0;
	CHECK(drain_all(r, c) == 5 && c->recs[0].bytes == 100 && c->recs[4].bytes == 104,
	      "after the overrun: %zu records", c->n);
	sbc_detach(r);
	sbc_destroy(p);
	coll_free(c);
}

static void t_midrun_attach_sees_only_later(void)
{
	char err[256];
	struct sbc_producer *p = sbc_create("unit-test", 16);
	struct sbc_reader *a, *b;
	struct coll *c = coll_new(2000);
	uint64_t i = 0;

	REQUIRE(p, "sbc_create: %s", strerror(errno));
	a = sbc_attach(getpid(), err, sizeof(err));
	if (!a) {
		sbc_destroy(p);
		coll_free(c);
		REQUIRE(0, "attach: %s", err);
	}
	sbc_set_enabled(a, true);
	/* wrap a 16-slot ring many times */
	for (; i < 1000; i++) {
		struct sb_gpu g = mkrec(i);

		CHECK(sbc_emit(p, &g) == 0, "emit %llu", (unsigned long long)i);
		if (i % 10 == 9)
			drain_all(a, c);
	}
	drain_all(a, c);
	CHECK(c->n == 1000 && c->recs[999].bytes == 999, "first reader got %zu", c->n);
	/* leave some behind, half-consumed, and go */
	for (; i < 1009; i++) {
		struct sb_gpu g = mkrec(i);

		sbc_emit(p, &g);
	}
	sbc_detach(a);
	for (; i < 1100; i++) {
		struct sb_gpu g = mkrec(i);

		CHECK(sbc_emit(p, &g) == -EAGAIN, "emit between agents");
	}
	b = sbc_attach(getpid(), err, sizeof(err));
	if (!b) {
		sbc_destroy(p);
		coll_free(c);
		REQUIRE(0, "second attach: %s", err);
	}
	sbc_set_enabled(b, true);
	CHECK(sbc_stale(b) == 9, "discarded %llu stale records, want 9",
	      (unsigned long long)sbc_stale(b));
	c->n = 0;
	for (uint64_t k = 0; k < 40; k++, i++) {
		struct sb_gpu g = mkrec(i);

		CHECK(sbc_emit(p, &g) == 0, "emit for the second reader %llu", (unsigned long long)k);
		if (k % 10 == 9)
			drain_all(b, c);
	}
	CHECK(c->n == 40 && c->recs[0].bytes == 1100 && c->recs[39].bytes == 1139,
	      "second reader got %zu records starting at %llu", c->n,
	      (unsigned long long)(c->n ? c->recs[0].bytes : 0));
	sbc_detach(b);
	sbc_destroy(p);
	coll_free(c);
}

static void t_dead_reader_is_replaced(void)
{
	char err[256], x = 0;
	struct sbc_producer *p = sbc_create("unit-test", 16);
	struct sbc_reader *b;
	struct coll *c = coll_new(100);
	int up[2], down[2], status;
	pid_t child;

	REQUIRE(p, "sbc_create: %s", strerror(errno));
	REQUIRE(!pipe(up) && !pipe(down), "pipe");
	child = fork();
	if (child == 0) {
		/* an agent that enables, consumes part of the ring and dies without a word */
		struct sbc_reader *a = sbc_attach(getppid(), err, sizeof(err));
		struct coll *cc = coll_new(100);

		if (!a || sbc_set_enabled(a, true) || write(up[1], &x, 1) != 1 ||
		    read(down[0], &x, 1) != 1)
			_exit(1);
		for (int i = 0; i < 4; i++)
			sbc_heartbeat(a);
		sbc_drain(a, collect, cc);
		_exit(cc->n == 10 ? 0 : 2);
	}
	REQUIRE(child > 0, "fork");
	CHECK(read(up[0], &x, 1) == 1, "child agent did not enable");
	for (int i = 0; i < 10; i++) {
		struct sb_gpu g = mkrec(i);

		CHECK(sbc_emit(p, &g) == 0, "emit %d for the first agent", i);
	}
	CHECK(write(down[1], &x, 1) == 1, "go");
	waitpid(child, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child agent status %#x", status);
	/* control is on and the heartbeat fresh, but the agent is gone */
	CHECK(sbc_active(p), "producer should still see the dead agent's fresh heartbeat");
	for (int i = 10; i < 40; i++) {
		struct sb_gpu g = mkrec(i);

		sbc_emit(p, &g); /* 16 fit, for nobody */
	}
	b = sbc_attach(getpid(), err, sizeof(err));
	CHECK(b, "attach after a dead agent: %s", err);
	if (b) {
		CHECK(sbc_set_enabled(b, true) == 0, "enable after a dead agent");
		CHECK(sbc_stale(b) == 16, "discarded %llu, want 16", (unsigned long long)sbc_stale(b));
		for (int i = 100; i < 110; i++) {
			struct sb_gpu g = mkrec(i);

			CHECK(sbc_emit(p, &g) == 0, "emit %d after the takeover", i);
		}
		CHECK(drain_all(b, c) == 10 && c->recs[0].bytes == 100 && c->recs[9].bytes == 109,
		      "got %zu, first %llu", c->n, (unsigned long long)(c->n ? c->recs[0].bytes : 0));
		sbc_detach(b);
	}
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
	sbc_destroy(p);
	coll_free(c);
}

static void t_stale_heartbeat_stops_producer(void)
{
	char err[256];
	struct sbc_producer *p = sbc_create("unit-test", 64);
	struct sbc_reader *r;
	struct sbc_header *h;
	size_t len;
	struct timespec ts;

	REQUIRE(p, "sbc_create: %s", strerror(errno));
	r = sbc_attach(getpid(), err, sizeof(err));
	if (!r) {
		sbc_destroy(p);
		REQUIRE(0, "attach: %s", err);
	}
	sbc_set_enabled(r, true);
	CHECK(sbc_active(p), "not active after enable");
	h = poke_map(&len);
	if (h) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;

		__atomic_store_n(&h->heartbeat_ns, now - SBC_HEARTBEAT_TIMEOUT_NS - 1000000,
				 __ATOMIC_RELAXED);
		CHECK(!sbc_active(p), "active with a heartbeat older than the timeout");
		struct sb_gpu g = mkrec(0);
		CHECK(sbc_emit(p, &g) == -EAGAIN, "emit with a stale heartbeat");
		sbc_heartbeat(r);
		CHECK(sbc_active(p), "heartbeat did not revive the channel");
		munmap(h, len);
	} else {
		CHECK(0, "cannot map the channel");
	}
	sbc_detach(r);
	sbc_destroy(p);
}

static void t_cross_process(void)
{
	enum { N = 200000 };
	char err[256];
	int pfd[2];
	pid_t child;
	struct sbc_reader *r = NULL;
	struct coll *c;
	uint64_t rd = 0;
	int status = 0;
	bool exited = false;

	REQUIRE(!pipe(pfd), "pipe");
	child = fork();
	if (child == 0) {
		struct sbc_producer *p = sbc_create("forked", 1024);
		char x = 1;

		close(pfd[0]);
		if (!p || write(pfd[1], &x, 1) != 1)
			_exit(1);
		for (int i = 0; i < 5000 && !sbc_active(p); i++)
			usleep(1000);
		if (!sbc_active(p))
			_exit(2);
		uint32_t id = sbc_intern(p, "forked_kernel");
		for (uint64_t i = 0; i < N; i++) {
			struct sb_gpu g = mkrec(i);

			g.name_id = id;
			sbc_emit(p, &g);
		}
		exit(0); /* atexit unlinks the channel */
	}
	REQUIRE(child > 0, "fork");
	c = coll_new(N); /* after fork: the child's exit() runs the leak checker */
	close(pfd[1]);
	char x;
	if (read(pfd[0], &x, 1) == 1)
		r = sbc_attach(child, err, sizeof(err));
	close(pfd[0]);
	CHECK(r, "attach to child: %s", r ? "" : err);
	if (r) {
		sbc_set_enabled(r, true);
		while (!exited) {
			exited = waitpid(child, &status, WNOHANG) == child;
			sbc_heartbeat(r);
			drain_all(r, c);
		}
		drain_all(r, c);
		sbc_counters(r, &rd, NULL, NULL);
	} else {
		kill(child, SIGKILL);
		waitpid(child, &status, 0);
	}
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	CHECK(c->n + rd == N, "delivered %zu + dropped %llu != %d", c->n, (unsigned long long)rd, N);
	CHECK(c->n > 0, "nothing delivered");
	CHECK(c->nstrings == 1 && c->unresolved == 0 && c->bad == 0,
	      "strings %u unresolved %u malformed %u", c->nstrings, c->unresolved, c->bad);
	for (size_t i = 1; i < c->n; i++)
		if (c->recs[i].bytes <= c->recs[i - 1].bytes) {
			CHECK(0, "out of order at %zu: %llu after %llu", i,
			      (unsigned long long)c->recs[i].bytes,
			      (unsigned long long)c->recs[i - 1].bytes);
			break;
		}
	for (size_t i = 0; i < c->n; i++) {
		struct sb_gpu want = mkrec(c->recs[i].bytes);

		want.name_id = c->recs[i].name_id;
		if (!same_payload(&c->recs[i], &want) || c->recs[i].h.pid != (uint32_t)child) {
			CHECK(0, "record %zu corrupted", i);
			break;
		}
	}
	CHECK(chan_files(child, NULL, 0) == 0, "child's channel not unlinked at exit");
	sbc_detach(r);
	coll_free(c);
}

struct thr_arg {
	struct sbc_producer *p;
	unsigned idx;
	uint64_t n;
	int *finished;
};

static void *producer_thread(void *argp)
{
	struct thr_arg *a = argp;

	for (uint64_t i = 0; i < a->n; i++) {
		struct sb_gpu g = mkrec(i);

		g.device = a->idx;
		sbc_emit(a->p, &g);
		if (i % 64 == 0)
			sched_yield();
	}
	__atomic_fetch_add(a->finished, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void t_many_producer_threads(void)
{
	enum { T = 4, N = 50000 };
	char err[256];
	struct sbc_producer *p = sbc_create("unit-test", 256);
	struct sbc_reader *r;
	struct coll *c = coll_new(T * N);
	pthread_t thr[T];
	struct thr_arg args[T];
	uint64_t last[T], rd;
	int finished = 0;

	REQUIRE(p, "sbc_create: %s", strerror(errno));
	r = sbc_attach(getpid(), err, sizeof(err));
	if (!r) {
		sbc_destroy(p);
		coll_free(c);
		REQUIRE(0, "attach: %s", err);
	}
	sbc_set_enabled(r, true);
	for (int t = 0; t < T; t++) {
		args[t] = (struct thr_arg){ p, (unsigned)t, N, &finished };
		pthread_create(&thr[t], NULL, producer_thread, &args[t]);
	}
	while (__atomic_load_n(&finished, __ATOMIC_ACQUIRE) < T) {
		sbc_heartbeat(r); /* a loaded machine can make this take seconds */
		drain_all(r, c);
	}
	for (int t = 0; t < T; t++)
		pthread_join(thr[t], NULL);
	drain_all(r, c);
	sbc_counters(r, &rd, NULL, NULL);
	CHECK(c->n + rd == (size_t)T * N, "delivered %zu + dropped %llu != %d", c->n,
	      (unsigned long long)rd, T * N);
	CHECK(c->n > N / 10, "only %zu delivered", c->n);
	for (int t = 0; t < T; t++)
		last[t] = UINT64_MAX;
	for (size_t i = 0; i < c->n; i++) {
		unsigned t = c->recs[i].device;

		if (t >= T || (last[t] != UINT64_MAX && c->recs[i].bytes <= last[t]) ||
		    c->recs[i].correlation_id != c->recs[i].bytes + 1) {
			CHECK(0, "thread %u's records out of order or torn at %zu", t, i);
			break;
		}
		last[t] = c->recs[i].bytes;
	}
	sbc_detach(r);
	sbc_destroy(p);
	coll_free(c);
}

static void t_clock_offset_applied(void)
{
	char err[256];
	struct sbc_producer *p = sbc_create("unit-test", 16);
	struct sbc_reader *r;
	struct coll *c = coll_new(4);

	REQUIRE(p, "sbc_create: %s", strerror(errno));
	sbc_set_clock(p, CLOCK_REALTIME, -5000);
	r = sbc_attach(getpid(), err, sizeof(err));
	if (r) {
		struct sb_gpu g = mkrec(3);

		sbc_set_enabled(r, true);
		sbc_emit(p, &g);
		CHECK(drain_all(r, c) == 1 && c->recs[0].h.ts == g.h.ts - 5000 &&
		      c->recs[0].end_ns == g.end_ns - 5000, "offset not applied");
		sbc_detach(r);
	} else {
		CHECK(0, "attach: %s", err);
	}
	sbc_destroy(p);
	coll_free(c);
}

static void t_refuses_bad_channels(void)
{
	char err[256];
	struct sbc_producer *p;
	struct sbc_reader *r;
	struct sbc_header *h;
	size_t len;

	/* no channel, no process */
	r = sbc_attach(getpid(), err, sizeof(err));
	CHECK(!r && errno == ENOENT, "no channel: errno %d", errno);
	CHECK(strlen(err) > 10 && !strchr(err, '\n'), "error line '%s'", err);
	r = sbc_attach(999999999, err, sizeof(err));
	CHECK(!r && errno == ENOENT, "no process: errno %d", errno);

	p = sbc_create("unit-test", 16);
	REQUIRE(p, "sbc_create: %s", strerror(errno));
	CHECK(!sbc_create("again", 16) && errno == EBUSY, "a second channel in one process");
	h = poke_map(&len);
	REQUIRE(h, "map");

	memcpy(h->magic, "NOTMAGIC", 8);
	r = sbc_attach(getpid(), err, sizeof(err));
	CHECK(!r && errno == EPERM && strstr(err, "magic"), "bad magic: errno %d '%s'", errno, err);
	memcpy(h->magic, SBC_MAGIC, 8);

	h->version = 99;
	r = sbc_attach(getpid(), err, sizeof(err));
	CHECK(!r && errno == EPERM && strstr(err, "version"), "bad version: errno %d '%s'", errno, err);
	h->version = SBC_VERSION;

	h->ring_capacity = 17;
	r = sbc_attach(getpid(), err, sizeof(err));
	CHECK(!r && errno == EPERM, "bad ring size: errno %d '%s'", errno, err);
	h->ring_capacity = 16;

	/* a slot whose sequence fits no position */
	struct sbc_slot *s = (struct sbc_slot *)((char *)h + SBC_HEADER_SIZE);
	s[3].seq = 12345;
	r = sbc_attach(getpid(), err, sizeof(err));
	CHECK(!r && errno == EPERM && strstr(err, "corrupt"), "corrupt ring: errno %d '%s'", errno, err);
	s[3].seq = 3;

	chmod(own_path(), 0620);
	r = sbc_attach(getpid(), err, sizeof(err));
	CHECK(!r && errno == EPERM, "group-writable: errno %d '%s'", errno, err);
	chmod(own_path(), 0600);

	r = sbc_attach(getpid(), err, sizeof(err));
	CHECK(r, "repaired channel refused: %s", err);
	sbc_detach(r);

	if (truncate(own_path(), 4096) == 0) {
		r = sbc_attach(getpid(), err, sizeof(err));
		CHECK(!r && errno == EPERM, "truncated: errno %d '%s'", errno, err);
	}
	munmap(h, len);
	sbc_destroy(p);

	/*
	 * The agent goes by the target's mappings, not by names: a channel file
	 * with our pid in its name that we do not map, a channel mapped
	 * privately, or one mapped from another directory is no channel of ours.
	 */
	struct {
		const char *fmt;
		int flags;
	} decoys[] = {
		{ SBC_DIR "/" SBC_NAME_PREFIX "%d" SBC_NAME_SUFFIX, -1 },              /* old name */
		{ SBC_DIR "/" SBC_NAME_PREFIX "%d-0000000000000000" SBC_NAME_SUFFIX, -1 },
		{ SBC_DIR "/" SBC_NAME_PREFIX "%d-1111111111111111" SBC_NAME_SUFFIX, MAP_PRIVATE },
		{ "/tmp/" SBC_NAME_PREFIX "%d-2222222222222222" SBC_NAME_SUFFIX, MAP_SHARED },
	};
	p = sbc_create("unit-test", 16);
	REQUIRE(p, "sbc_create: %s", strerror(errno));
	h = poke_map(&len);
	REQUIRE(h, "map");
	void *maps[ARRAY_SIZE(decoys)] = { 0 };
	char dpath[ARRAY_SIZE(decoys)][96];
	for (size_t i = 0; i < ARRAY_SIZE(decoys); i++) {
		snprintf(dpath[i], sizeof(dpath[i]), decoys[i].fmt, (int)getpid());
		int fd = open(dpath[i], O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0600);

		CHECK(fd >= 0 && write(fd, h, len) == (ssize_t)len, "decoy %s", dpath[i]);
		if (fd >= 0 && decoys[i].flags >= 0) {
			maps[i] = mmap(NULL, len, PROT_READ | PROT_WRITE, decoys[i].flags, fd, 0);
			CHECK(maps[i] != MAP_FAILED, "map decoy %s", dpath[i]);
			if (maps[i] == MAP_FAILED)
				maps[i] = NULL;
		}
		if (fd >= 0)
			close(fd);
	}
	munmap(h, len);
	sbc_destroy(p); /* our real channel is gone; only the decoys are left */
	r = sbc_attach(getpid(), err, sizeof(err));
	CHECK(!r && errno == ENOENT, "a decoy was taken for our channel: errno %d '%s'", errno,
	      r ? sbc_reader_path(r) : err);
	sbc_detach(r);
	for (size_t i = 0; i < ARRAY_SIZE(decoys); i++) {
		if (maps[i])
			munmap(maps[i], len);
		unlink(dpath[i]);
	}
}

static void t_other_owner_refused(void)
{
	char err[256];
	struct sbc_producer *p;
	struct sbc_reader *r;

	if (geteuid() != 0)
		SKIP("needs root to give the channel file to another user");
	p = sbc_create("unit-test", 16);
	REQUIRE(p, "sbc_create: %s", strerror(errno));
	REQUIRE(!chown(own_path(), 65534, 65534), "chown: %s", strerror(errno));
	r = sbc_attach(getpid(), err, sizeof(err));
	CHECK(!r && errno == EPERM && strstr(err, "owned by uid 65534"),
	      "foreign channel: errno %d '%s'", errno, r ? "attached" : err);
	sbc_detach(r);
	sbc_destroy(p);
}

/* a file with the name an older stepblame would have used is left alone */
static void t_old_name_left_alone(void)
{
	char old[64], err[256];
	struct sbc_producer *p;
	struct stat st;
	int fd;

	snprintf(old, sizeof(old), SBC_DIR "/" SBC_NAME_PREFIX "%d" SBC_NAME_SUFFIX, (int)getpid());
	fd = open(old, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
	REQUIRE(fd >= 0, "create %s", old);
	CHECK(write(fd, "junk", 4) == 4, "write");
	close(fd);
	p = sbc_create("unit-test", 16);
	CHECK(p, "create beside a stale file: %s", strerror(errno));
	CHECK(!p || strcmp(sbc_path(p), old), "the channel took the old name");
	CHECK(!stat(old, &st) && st.st_size == 4, "the producer removed or changed %s", old);
	struct sbc_reader *r = sbc_attach(getpid(), err, sizeof(err));
	CHECK(r, "attach: %s", err);
	sbc_detach(r);
	sbc_destroy(p);
	CHECK(!stat(old, &st) && st.st_size == 4, "sbc_destroy removed %s", old);
	unlink(old);
}

static void t_forked_child_leaves_parent_channel(void)
{
	char err[256];
	struct sbc_producer *p = sbc_create("unit-test", 16);
	struct sbc_reader *r;
	struct coll *c;
	pid_t child;
	int status;

	REQUIRE(p, "sbc_create: %s", strerror(errno));
	r = sbc_attach(getpid(), err, sizeof(err));
	if (!r) {
		sbc_destroy(p);
		REQUIRE(0, "attach: %s", err);
	}
	sbc_set_enabled(r, true);
	child = fork();
	if (child == 0) {
		/* the parent's producer and mapping are inherited: they are not ours */
		struct sb_gpu g = mkrec(1);
		struct sbc_producer *mine;

		if (sbc_active(p) || sbc_emit(p, &g) != -EAGAIN)
			_exit(1);
		mine = sbc_create("child", 16);
		if (!mine)
			_exit(2);
		sbc_destroy(mine);
		exit(0); /* runs atexit handlers: must not unlink the parent's channel */
	}
	REQUIRE(child > 0, "fork");
	waitpid(child, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	CHECK(access(own_path(), F_OK) == 0, "a forked child's exit unlinked the parent's channel");
	c = coll_new(4);
	CHECK(sbc_drain(r, collect, c) == 0, "the child wrote into the parent's ring");
	CHECK(sbc_active(p), "the parent's channel went inactive");
	coll_free(c);
	sbc_detach(r);
	sbc_destroy(p);
}

static void t_busy_when_agent_alive(void)
{
	char err[256];
	struct sbc_producer *p = sbc_create("unit-test", 16);
	struct sbc_reader *r;
	pid_t child;
	int status;

	REQUIRE(p, "sbc_create: %s", strerror(errno));
	r = sbc_attach(getpid(), err, sizeof(err));
	if (!r) {
		sbc_destroy(p);
		REQUIRE(0, "attach: %s", err);
	}
	sbc_set_enabled(r, true);
	child = fork();
	if (child == 0) {
		struct sbc_reader *r2 = sbc_attach(getppid(), err, sizeof(err));

		_exit(!r2 && errno == EBUSY ? 0 : 1);
	}
	waitpid(child, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "second live agent was not refused");
	sbc_detach(r);
	sbc_destroy(p);
}

/* a trainer in a container: own pid and mount namespaces, its own /dev/shm */
static void t_container_channel_found(void)
{
	char err[256];
	int up[2], down[2], pidp[2];
	pid_t outer, inner = 0;
	int status;
	struct coll *c;

	if (geteuid() != 0)
		SKIP("needs root to make namespaces");
	REQUIRE(!pipe(up) && !pipe(down) && !pipe(pidp), "pipe");
	outer = fork();
	if (outer == 0) {
		close(up[0]);
		close(down[1]);
		if (unshare(CLONE_NEWPID | CLONE_NEWNS))
			_exit(3);
		pid_t in = fork();

		if (in == 0) {
			char x = 0;

			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
			    mount("tmpfs", "/dev/shm", "tmpfs", 0, "mode=1777"))
				_exit(4);
			struct sbc_producer *p = sbc_create("container", 64);

			if (!p || getpid() != 1)
				_exit(5);
			if (write(up[1], &x, 1) != 1)
				_exit(6);
			for (int i = 0; i < 5000 && !sbc_active(p); i++)
				usleep(1000);
			for (int i = 0; i < 10; i++) {
				struct sb_gpu g = mkrec(i);

				g.h.tid = (uint32_t)syscall(SYS_gettid);
				g.h.pid = 0;
				sbc_emit(p, &g);
			}
			if (write(up[1], &x, 1) != 1 || read(down[0], &x, 1) != 1)
				_exit(7);
			sbc_destroy(p);
			_exit(0);
		}
		/* tell the test the host pid of the inner process */
		if (in < 0 || write(pidp[1], &in, sizeof(in)) != sizeof(in))
			_exit(8);
		waitpid(in, &status, 0);
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 9);
	}
	REQUIRE(outer > 0, "fork");
	close(up[1]);
	close(down[0]);
	close(pidp[1]);
	char x;
	bool ready = read(up[0], &x, 1) == 1 && read(pidp[0], &inner, sizeof(inner)) == sizeof(inner);
	close(pidp[0]);
	if (!ready) {
		close(down[1]);
		waitpid(outer, &status, 0);
		if (WIFEXITED(status) && (WEXITSTATUS(status) == 3 || WEXITSTATUS(status) == 4))
			SKIP("cannot make pid/mount namespaces here (status %d)", WEXITSTATUS(status));
		REQUIRE(0, "container child failed, status %#x", status);
	}
	CHECK(chan_files(1, NULL, 0) == 0, "the container's channel leaked into our /dev/shm");
	c = coll_new(20);
	struct sbc_reader *r = sbc_attach(inner, err, sizeof(err));
	CHECK(r, "attach to the container's pid %d: %s", (int)inner, err);
	if (r) {
		sbc_set_enabled(r, true);
		CHECK(read(up[0], &x, 1) == 1, "container did not emit");
		drain_all(r, c);
		CHECK(c->n == 10, "got %zu records", c->n);
		for (size_t i = 0; i < c->n; i++)
			CHECK(c->recs[i].h.pid == (uint32_t)inner && c->recs[i].h.tid == (uint32_t)inner,
			      "record %zu: pid %u tid %u, want host pid %d", i, c->recs[i].h.pid,
			      c->recs[i].h.tid, (int)inner);
		sbc_detach(r);
	}
	CHECK(write(down[1], &x, 1) == 1, "release container");
	close(down[1]);
	close(up[0]);
	waitpid(outer, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "container child status %#x", status);
	coll_free(c);
}

/* schemas/channel.md against the compiler: every offset/size row of its tables */
#define FLD(s, f, doc) { #s, doc, offsetof(struct s, f), sizeof(((struct s *)0)->f), 0 }

static struct chan_field {
	const char *s, *doc;
	size_t off, size;
	int seen;
} chan_fields[] = {
	FLD(sbc_header, magic, "magic"), FLD(sbc_header, version, "version"),
	FLD(sbc_header, header_size, "header_size"), FLD(sbc_header, total_size, "total_size"),
	FLD(sbc_header, producer, "producer"), FLD(sbc_header, producer_pid, "producer_pid"),
	FLD(sbc_header, clock_id, "clock_id"), FLD(sbc_header, clock_offset_ns, "clock_offset_ns"),
	FLD(sbc_header, slot_size, "slot_size"), FLD(sbc_header, ring_capacity, "ring_capacity"),
	FLD(sbc_header, ring_offset, "ring_offset"), FLD(sbc_header, string_size, "string_size"),
	FLD(sbc_header, string_capacity, "string_capacity"),
	FLD(sbc_header, strings_offset, "strings_offset"), FLD(sbc_header, created_ns, "created_ns"),
	FLD(sbc_header, control, "control"), FLD(sbc_header, agent_pid, "agent_pid"),
	FLD(sbc_header, heartbeat_ns, "heartbeat_ns"), FLD(sbc_header, epoch, "epoch"),
	FLD(sbc_header, written, "written"), FLD(sbc_header, ring_drops, "ring_drops"),
	FLD(sbc_header, string_drops, "string_drops"), FLD(sbc_header, source_drops, "source_drops"),
	FLD(sbc_header, strings_used, "strings_used"),
	FLD(sbc_slot, seq, "seq"), FLD(sbc_slot, epoch, "epoch"), FLD(sbc_slot, rec, "struct sb_gpu"),
	FLD(sb_gpu, h.type, "h.type"), FLD(sb_gpu, h.size, "h.size"), FLD(sb_gpu, h.cpu, "h.cpu"),
	FLD(sb_gpu, h.flags, "h.flags"), FLD(sb_gpu, h.pid, "h.pid"), FLD(sb_gpu, h.tid, "h.tid"),
	FLD(sb_gpu, h.ts, "h.ts"), FLD(sb_gpu, end_ns, "end_ns"), FLD(sb_gpu, bytes, "bytes"),
	FLD(sb_gpu, graph_node_id, "graph_node_id"),
	FLD(sb_gpu, correlation_id, "correlation_id"), FLD(sb_gpu, device, "device"),
	FLD(sb_gpu, stream, "stream"), FLD(sb_gpu, name_id, "name_id"), FLD(sb_gpu, sub, "sub"),
	FLD(sb_gpu, graph_id, "graph_id"), FLD(sb_gpu, grid, "grid"), FLD(sb_gpu, block, "block"),
	FLD(sbc_string, len, "len"), FLD(sbc_string, hash, "hash"), FLD(sbc_string, name, "name"),
};

static void t_schema_matches_layout(void)
{
	FILE *f = fopen("schemas/channel.md", "re");
	char line[512], section[64] = "", *cell[6];
	unsigned rows = 0;

	if (!f)
		SKIP("no schemas/channel.md here (run from the repository root, as tests/run does)");
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "## ", 3)) {
			const char *h = line + 3;

			snprintf(section, sizeof(section), "%s",
				 !strncmp(h, "Header", 6) ? "sbc_header" :
				 !strncmp(h, "Ring", 4) ? "sbc_slot" :
				 !strncmp(h, "Record", 6) ? "sb_gpu" :
				 !strncmp(h, "String table", 12) ? "sbc_string" : "");
			continue;
		}
		if (line[0] != '|' || !section[0])
			continue;
		int n = 0;
		for (char *p = line + 1, *bar; n < 6 && (bar = strchr(p, '|')); p = bar + 1) {
			*bar = 0;
			cell[n++] = p;
		}
		if (n < 3)
			continue;
		char *end1, *end2, *name, *close;
		unsigned long off = strtoul(cell[0], &end1, 10), size = strtoul(cell[1], &end2, 10);

		if (end1 == cell[0] || end2 == cell[1] || strspn(end1, " ") != strlen(end1) ||
		    strspn(end2, " ") != strlen(end2))
			continue; /* a heading row, or a size that is an expression */
		name = cell[2] + strspn(cell[2], " ");
		if (*name != '`' || !(close = strchr(name + 1, '`')))
			continue; /* reserved */
		*close = 0;
		name++;
		name[strcspn(name, "[")] = 0;
		rows++;
		bool found = false;
		for (size_t i = 0; i < ARRAY_SIZE(chan_fields); i++) {
			struct chan_field *cf = &chan_fields[i];

			if (strcmp(cf->s, section) || strcmp(cf->doc, name))
				continue;
			found = true;
			cf->seen = 1;
			CHECK(cf->off == off && cf->size == size,
			      "%s.%s: documented at %lu size %lu, is at %zu size %zu", section, name, off,
			      size, cf->off, cf->size);
		}
		CHECK(found, "schemas/channel.md documents %s.%s, the code has no such field",
		      section, name);
	}
	fclose(f);
	for (size_t i = 0; i < ARRAY_SIZE(chan_fields); i++)
		CHECK(chan_fields[i].seen, "%s.%s is not in schemas/channel.md", chan_fields[i].s,
		      chan_fields[i].doc);
	CHECK(rows >= ARRAY_SIZE(chan_fields), "only %u rows read", rows);
}


int main(void)
{
	RUN_ROOT(t_roundtrip);
	RUN_ROOT(t_disabled_writes_nothing);
	RUN_ROOT(t_strings);
	RUN_ROOT(t_overrun_counts_exact);
	RUN_ROOT(t_midrun_attach_sees_only_later);
	RUN_ROOT(t_dead_reader_is_replaced);
	RUN_ROOT(t_stale_heartbeat_stops_producer);
	RUN_ROOT(t_cross_process);
	RUN_ROOT(t_many_producer_threads);
	RUN_ROOT(t_clock_offset_applied);
	RUN_ROOT(t_refuses_bad_channels);
	RUN_ROOT(t_other_owner_refused);
	RUN_ROOT(t_old_name_left_alone);
	RUN_ROOT(t_forked_child_leaves_parent_channel);
	RUN_ROOT(t_busy_when_agent_alive);
	RUN_ROOT(t_container_channel_found);
	RUN(t_schema_matches_layout);
	return test_summary();
}
