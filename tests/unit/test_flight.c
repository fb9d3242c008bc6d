// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The flight recorder of `stepblame watch` (capture/flight.h): what it keeps,
 * what it drops, and the trace a snippet is, read back with the trace reader
 * and the report.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <sys/stat.h>

#include "test.h"
#include "capture/flight.h"
#include "format/trace.h"
#include "base/util.h"

static char dir[64];

static char *tpath(const char *name)
{
	static char p[4][256];
	static int i;

	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", dir, name);
	return p[i];
}

static _Alignas(8) unsigned char rbuf[8192];

static void put_text(struct flight *f, uint16_t type, uint32_t pid, uint32_t tid, const char *text,
		     uint64_t ts, uint64_t now)
{
	sb_text_build(rbuf, sizeof(rbuf), type, 0, ts, pid, tid, text, strlen(text));
	flight_put(f, (const void *)rbuf, now);
}

static void put_thread_ev(struct flight *f, uint16_t type, uint32_t pid, uint32_t tid,
			  const char *comm, uint64_t ts, uint64_t now)
{
	struct sb_thread t = { .h = { .type = type, .size = sizeof(t), .pid = pid, .tid = tid,
				      .ts = ts } };

	strncpy(t.comm, comm, sizeof(t.comm));
	flight_put(f, &t.h, now);
}

static void put_rename(struct flight *f, uint32_t pid, uint32_t tid, const char *comm, uint64_t ts,
		       uint64_t now)
{
	struct sb_rename r = { .h = { .type = SB_EV_RENAME, .size = sizeof(r), .pid = pid,
				      .tid = tid, .ts = ts } };

	strncpy(r.newcomm, comm, sizeof(r.newcomm));
	flight_put(f, &r.h, now);
}

static void put_switch(struct flight *f, uint32_t tid, uint64_t ts, uint64_t now)
{
	struct sb_switch_out s = { .h = { .type = SB_EV_SWITCH_OUT, .size = sizeof(s), .pid = 100,
					  .tid = tid, .ts = ts } };

	flight_put(f, &s.h, now);
}

static void put_drops(struct flight *f, uint64_t ring1, uint64_t chan, uint64_t now)
{
	struct sb_drops d = { .h = { .type = SB_REC_DROPS, .size = sizeof(d), .ts = now } };

	d.ring[1] = ring1;
	d.gpu_channel = chan;
	flight_put(f, &d.h, now);
}

struct seen {
	int n, notes, threads, guards, hosts, switches, drops;
	uint64_t drops_ring1, drops_chan, first_switch_ts, last_switch_ts, thread_ts;
	char thread_text[4][64];
	uint32_t thread_tid[4];
	int first_type;
	uint64_t trailer_drops, trailer_start;
	bool complete;
};

static int read_back(const char *path, struct seen *s)
{
	char err[256];
	struct sbt_reader *r = sbt_open(path, err, sizeof(err));
	const struct sb_hdr *h;
	enum sbt_status st;

	memset(s, 0, sizeof(*s));
	if (!r)
		return -1;
	while ((st = sbt_next(r, &h)) == SBT_OK) {
		if (!s->n++)
			s->first_type = h->type;
		switch (h->type) {
		case SB_REC_NOTE: s->notes++; break;
		case SB_REC_HOST: s->hosts++; break;
		case SB_REC_GUARD: s->guards++; break;
		case SB_REC_THREAD: {
			const struct sb_text *x = (const void *)h;

			if (s->threads < 4) {
				snprintf(s->thread_text[s->threads], 64, "%.*s", (int)x->len, x->text);
				s->thread_tid[s->threads] = h->tid;
			}
			s->thread_ts = h->ts;
			s->threads++;
			break;
		}
		case SB_EV_SWITCH_OUT:
			if (!s->switches++)
				s->first_switch_ts = h->ts;
			s->last_switch_ts = h->ts;
			break;
		case SB_REC_DROPS: {
			const struct sb_drops *d = (const void *)h;

			s->drops++;
			s->drops_ring1 = d->ring[1];
			s->drops_chan = d->gpu_channel;
			break;
		}
		}
	}
	if (st == SBT_EOF) {
		s->complete = true;
		s->trailer_drops = sbt_trailer(r)->drops_total;
		s->trailer_start = sbt_trailer(r)->start_ns;
	}
	sbt_close(r);
	return 0;
}

#define S 1000000000ull

/*
 * The snippet from a time on: the state before it as its preamble (threads
 * alive then, under their latest names; the guard's state; host facts), the
 * records from then on, drop counters counted from then; nothing after to_ns.
 */
static void t_snippet(void)
{
	struct flight *f = flight_new(60 * S, 64 << 20);
	struct flight_snippet sn = { .from_ns = 10 * S, .to_ns = 20 * S, .note = "why" };
	char err[256];
	struct seen s;

	put_text(f, SB_REC_HOST, 100, 0, "hostname=h\n", 1 * S, 1 * S);
	put_text(f, SB_REC_TARGET, 100, 100, "pid=100\ncomm=trainer\n", 1 * S, 1 * S);
	put_text(f, SB_REC_THREAD, 100, 100, "trainer", 1 * S, 1 * S);
	put_text(f, SB_REC_THREAD, 100, 101, "launcher", 1 * S, 1 * S);
	put_thread_ev(f, SB_EV_THREAD_NEW, 100, 102, "worker", 2 * S, 2 * S);
	put_rename(f, 100, 102, "worker-0", 3 * S, 3 * S);
	put_thread_ev(f, SB_EV_THREAD_NEW, 100, 103, "gone", 3 * S, 3 * S);
	put_thread_ev(f, SB_EV_THREAD_EXIT, 100, 103, "gone", 4 * S, 4 * S);
	put_text(f, SB_REC_GUARD, 100, 0, "state=sampled\n", 5 * S, 5 * S);
	put_drops(f, 5, 1, 6 * S);
	for (uint64_t t = 1; t < 10; t++)
		put_switch(f, 101, t * S, t * S);
	for (uint64_t t = 10; t < 30; t++) {
		put_switch(f, 101, t * S, t * S);
		if (t == 15)
			put_drops(f, 7, 4, 15 * S);
	}
	CHECK(!flight_write(f, tpath("a.sbt"), &sn, err, sizeof(err)), "write: %s", err);
	CHECK(!read_back(tpath("a.sbt"), &s), "cannot read it back");
	CHECK(s.complete, "no trailer");
	CHECK(s.first_type == SB_REC_NOTE && s.notes == 1, "the note is not first");
	CHECK(s.hosts == 1 && s.guards == 1, "%d host, %d guard records", s.hosts, s.guards);
	CHECK(s.threads == 3, "%d thread records, want trainer, launcher, worker-0", s.threads);
	CHECK(!strcmp(s.thread_text[2], "worker-0") && s.thread_tid[2] == 102,
	      "the created thread is '%s' (tid %u), not its new name", s.thread_text[2],
	      s.thread_tid[2]);
	CHECK(s.thread_ts == 10 * S, "thread records at %" PRIu64 ", not the snippet's start",
	      s.thread_ts);
	CHECK(s.switches == 11 && s.first_switch_ts == 10 * S && s.last_switch_ts == 20 * S,
	      "%d switches %" PRIu64 "..%" PRIu64 ", want 11 from 10 s to 20 s", s.switches,
	      s.first_switch_ts, s.last_switch_ts);
	CHECK(s.drops == 1 && s.drops_ring1 == 2 && s.drops_chan == 3 && s.trailer_drops == 5,
	      "drops since the start: ring %" PRIu64 " channel %" PRIu64 " trailer %" PRIu64
	      ", want 2, 3, 5", s.drops_ring1, s.drops_chan, s.trailer_drops);
	CHECK(s.trailer_start == 10 * S, "start %" PRIu64, s.trailer_start);
	CHECK(sn.records == 12 && sn.drops == 5 && sn.start_ns == 10 * S && sn.end_ns == 20 * S,
	      "records %" PRIu64 " drops %" PRIu64 " %" PRIu64 "..%" PRIu64, sn.records, sn.drops,
	      sn.start_ns, sn.end_ns);
	flight_free(f);
}

/*
 * Records past keep_ns go, a chunk at a time, and what they said stays in
 * the state: a thread created long ago is still in a snippet's preamble, an
 * exited one is not. max_bytes bounds the memory whatever keep_ns says.
 */
static void t_eviction(void)
{
	struct flight *f = flight_new(5 * S, 64 << 20), *g;
	struct flight_snippet sn = { 0 };
	struct flight_stats st;
	char err[256];
	struct seen s;
	uint64_t t;

	put_text(f, SB_REC_THREAD, 100, 101, "launcher", 0, 0);
	put_thread_ev(f, SB_EV_THREAD_NEW, 100, 102, "old", 0, 0);
	put_thread_ev(f, SB_EV_THREAD_EXIT, 100, 102, "old", 1, 1);
	/* 40 s of 50k switches a second: far more than 5 s of them in memory */
	for (t = 0; t < 2000000; t++)
		put_switch(f, 101, t * 20000, t * 20000);
	flight_stats(f, &st);
	/* 5 s of records, and at most the two chunks (1 MiB) at either end beyond */
	CHECK(st.oldest_ns >= 40 * S - 5 * S - S &&
	      st.bytes <= 5 * 50000 * (8 + sizeof(struct sb_switch_out)) + (2u << 20),
	      "oldest kept at %" PRIu64 " ns, %" PRIu64 " bytes held", st.oldest_ns, st.bytes);
	CHECK(st.evicted_early == 0, "%" PRIu64 " evicted by the byte cap", st.evicted_early);
	CHECK(!flight_write(f, tpath("b.sbt"), &sn, err, sizeof(err)), "write: %s", err);
	CHECK(!read_back(tpath("b.sbt"), &s), "cannot read it back");
	CHECK(s.threads == 1 && s.thread_tid[0] == 101,
	      "%d thread records (first tid %u): want the launcher alone", s.threads,
	      s.thread_tid[0]);
	CHECK(sn.start_ns == st.oldest_ns, "start %" PRIu64 ", oldest %" PRIu64, sn.start_ns,
	      st.oldest_ns);
	flight_free(f);

	g = flight_new(3600 * S, 4u << 20);
	for (t = 0; t < 1000000; t++)
		put_switch(g, 101, t * 1000, t * 1000);
	flight_stats(g, &st);
	CHECK(st.bytes <= 4u << 20 && st.evicted_early > 0,
	      "%" PRIu64 " bytes held under a 4 MiB cap, %" PRIu64 " evicted early", st.bytes,
	      st.evicted_early);
	flight_free(g);
}

/*
 * An agent that drains 3 s behind the trainer: a snippet is still the span
 * of the capture's time it names (the probes' clock), not what arrived in
 * that span of the wall clock; and how far the drain has reached is the
 * probes' newest time, not the wall clock, until they go quiet. The agent's
 * own records, stamped as made, move neither.
 */
static void t_behind(void)
{
	struct flight *f = flight_new(60 * S, 64 << 20);
	struct flight_snippet sn = { .from_ns = 10 * S, .to_ns = 20 * S };
	char err[256];
	struct seen s;

	put_text(f, SB_REC_THREAD, 100, 101, "launcher", 1 * S, 1 * S);
	for (uint64_t t = 1; t < 30; t++) {
		put_switch(f, 101, t * S, t * S + 3 * S);
		put_text(f, SB_REC_NOTE, 100, 0, "late", t * S + 3 * S, t * S + 3 * S);
	}
	CHECK(flight_reached(f, 32 * S) == 29 * S, "reached %" PRIu64 " at 32 s, want 29 s",
	      flight_reached(f, 32 * S));
	CHECK(flight_reached(f, 40 * S) == 40 * S - FLIGHT_QUIET_NS,
	      "reached %" PRIu64 " at 40 s, quiet since 32 s", flight_reached(f, 40 * S));
	CHECK(!flight_write(f, tpath("d.sbt"), &sn, err, sizeof(err)), "write: %s", err);
	CHECK(!read_back(tpath("d.sbt"), &s), "cannot read it back");
	CHECK(s.switches == 11 && s.first_switch_ts == 10 * S && s.last_switch_ts == 20 * S,
	      "%d switches %" PRIu64 "..%" PRIu64 ", want 11 from 10 s to 20 s", s.switches,
	      s.first_switch_ts, s.last_switch_ts);
	CHECK(sn.start_ns == 10 * S && sn.end_ns == 20 * S && s.trailer_start == 10 * S,
	      "%" PRIu64 "..%" PRIu64 ", want 10 s..20 s", sn.start_ns, sn.end_ns);
	flight_free(f);
}

/* a snippet cannot be written through a link planted at its name */
static void t_no_follow(void)
{
	struct flight *f = flight_new(60 * S, 8 << 20);
	struct flight_snippet sn = { 0 };
	char err[256];
	struct stat st;

	put_switch(f, 101, S, S);
	CHECK(!symlink(tpath("target"), tpath("c.sbt")), "symlink: %s", strerror(errno));
	CHECK(!flight_write(f, tpath("c.sbt"), &sn, err, sizeof(err)), "write: %s", err);
	CHECK(lstat(tpath("target"), &st) && errno == ENOENT, "the link's target was written");
	CHECK(!lstat(tpath("c.sbt"), &st) && S_ISREG(st.st_mode), "c.sbt is not a regular file");
	flight_free(f);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/sbflight.XXXXXX");
	if (!mkdtemp(dir)) {
		printf("FAIL setup: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	RUN(t_snippet);
	RUN(t_eviction);
	RUN(t_behind);
	RUN(t_no_follow);
	test_rm_tree(dir);
	return test_summary();
}
