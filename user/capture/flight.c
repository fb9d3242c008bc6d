// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The flight recorder (flight.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/util.h"
#include "capture/flight.h"
#include "capture/target.h"
#include "format/trace.h"

/* records are kept in chunks of this size, each record after its arrival time */
#define FL_CHUNK (1u << 20)

struct fl_chunk {
	struct fl_chunk *next;
	size_t used;
	uint64_t last_arrival;
	uint64_t records;
	unsigned char data[FL_CHUNK];
};

struct fl_thread {
	uint32_t pid, tid;
	char comm[4 * SB_COMM_LEN + 1]; /* escaped, as thread records carry it */
	char *extra;                    /* a process's facts after the comm's line, or NULL */
};

/* what the capture had said before a point in time, for a snippet's preamble */
struct fl_state {
	unsigned char *meta;            /* kept records, back to back */
	size_t meta_len, meta_cap;
	uint64_t meta_dropped;
	struct fl_thread *th;
	size_t nth, thcap;
	unsigned char guard[1024];      /* the overhead guard's last state record */
	struct sb_drops drops;          /* the drop counters then */
	bool have_guard, have_drops;
};

struct flight {
	uint64_t keep_ns, max_bytes, bytes, records, evicted_early;
	uint64_t kernel_ts, kernel_arrival; /* the newest kernel record's time, and its arrival */
	struct fl_chunk *head, *tail, *spare;
	struct fl_state st;             /* as of the oldest record held */
};

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n);

	if (!q && n)
		abort();
	return q;
}

static void state_free(struct fl_state *s)
{
	for (size_t i = 0; i < s->nth; i++)
		free(s->th[i].extra);
	free(s->th);
	free(s->meta);
	memset(s, 0, sizeof(*s));
}

static void state_copy(struct fl_state *d, const struct fl_state *s)
{
	*d = *s;
	d->meta = xrealloc(NULL, s->meta_cap ? s->meta_cap : 1);
	if (s->meta_len)
		memcpy(d->meta, s->meta, s->meta_len);
	d->th = xrealloc(NULL, (s->thcap ? s->thcap : 1) * sizeof(*d->th));
	if (s->nth)
		memcpy(d->th, s->th, s->nth * sizeof(*d->th));
	for (size_t i = 0; i < s->nth; i++)
		if (s->th[i].extra)
			d->th[i].extra = strdup(s->th[i].extra);
}

static struct fl_thread *thread_find(struct fl_state *s, uint32_t tid)
{
	for (size_t i = 0; i < s->nth; i++)
		if (s->th[i].tid == tid)
			return &s->th[i];
	return NULL;
}

static struct fl_thread *thread_add(struct fl_state *s, uint32_t pid, uint32_t tid)
{
	struct fl_thread *t = thread_find(s, tid);

	if (t) {
		t->pid = pid;
		return t;
	}
	if (s->nth == s->thcap) {
		s->thcap = s->thcap ? 2 * s->thcap : 64;
		s->th = xrealloc(s->th, s->thcap * sizeof(*s->th));
	}
	t = &s->th[s->nth++];
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->tid = tid;
	return t;
}

static void thread_del(struct fl_state *s, uint32_t tid)
{
	struct fl_thread *t = thread_find(s, tid);

	if (!t)
		return;
	free(t->extra);
	*t = s->th[--s->nth];
}

/* the comm of a kernel record (16 bytes, maybe without its NUL), escaped */
static void comm_set(struct fl_thread *t, const char *comm)
{
	char raw[SB_COMM_LEN + 1];

	memcpy(raw, comm, SB_COMM_LEN);
	raw[SB_COMM_LEN] = 0;
	sb_escape(t->comm, sizeof(t->comm), raw, strlen(raw));
}

static void meta_keep(struct fl_state *s, const struct sb_hdr *h)
{
	if (s->meta_len + h->size > FLIGHT_META_MAX) {
		s->meta_dropped++;
		return;
	}
	if (s->meta_len + h->size > s->meta_cap) {
		s->meta_cap = s->meta_cap ? 2 * s->meta_cap : 64 << 10;
		while (s->meta_cap < s->meta_len + h->size)
			s->meta_cap *= 2;
		s->meta = xrealloc(s->meta, s->meta_cap);
	}
	memcpy(s->meta + s->meta_len, h, h->size);
	s->meta_len += h->size;
}

/* what a record, now in the past, changes of the state a later snippet starts from */
static void state_apply(struct fl_state *s, const struct sb_hdr *h)
{
	struct fl_thread *t;

	switch (h->type) {
	case SB_REC_HOST:
	case SB_REC_CPU:
	case SB_REC_TARGET:
	case SB_REC_PROBE:
	case SB_REC_COSTS:
	case SB_REC_STRING:
	case SB_REC_MAPPING:
	case SB_REC_PERFMAP:
		meta_keep(s, h);
		break;
	case SB_REC_GUARD:
		if (h->size <= sizeof(s->guard)) {
			memcpy(s->guard, h, h->size);
			s->have_guard = true;
		}
		break;
	case SB_REC_DROPS:
		if (h->size >= sizeof(s->drops)) {
			memcpy(&s->drops, h, sizeof(s->drops));
			s->have_drops = true;
		}
		break;
	case SB_REC_THREAD: {
		const struct sb_text *x = (const void *)h;
		size_t n = x->len, first;

		if (h->size < sizeof(*x) || n > h->size - sizeof(*x))
			break;
		t = thread_add(s, h->pid, h->tid);
		first = strcspn(x->text, "\n");
		if (first > n)
			first = n;
		memset(t->comm, 0, sizeof(t->comm));
		memcpy(t->comm, x->text, first < sizeof(t->comm) - 1 ? first : sizeof(t->comm) - 1);
		free(t->extra);
		t->extra = first < n ? strndup(x->text + first, n - first) : NULL;
		break;
	}
	case SB_EV_THREAD_NEW:
		if (h->size >= sizeof(struct sb_thread) && !thread_find(s, h->tid))
			comm_set(thread_add(s, h->pid, h->tid), ((const struct sb_thread *)h)->comm);
		break;
	case SB_EV_RENAME:
		if (h->size >= sizeof(struct sb_rename) && (t = thread_find(s, h->tid)))
			comm_set(t, ((const struct sb_rename *)h)->newcomm);
		break;
	case SB_EV_THREAD_EXIT:
		thread_del(s, h->tid);
		break;
	}
}

struct flight *flight_new(uint64_t keep_ns, uint64_t max_bytes)
{
	struct flight *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->keep_ns = keep_ns;
	f->max_bytes = max_bytes < 2 * FL_CHUNK ? 2 * FL_CHUNK : max_bytes;
	return f;
}

void flight_free(struct flight *f)
{
	struct fl_chunk *c, *n;

	if (!f)
		return;
	for (c = f->head; c; c = n) {
		n = c->next;
		free(c);
	}
	free(f->spare);
	state_free(&f->st);
	free(f);
}

/* each record in a chunk: its arrival (8 bytes), then the record (a multiple of 8) */
#define FL_REC(c, at) ((const struct sb_hdr *)((c)->data + (at) + 8))
#define FL_ARRIVAL(c, at) (*(const uint64_t *)((c)->data + (at)))

static void evict_head(struct flight *f)
{
	struct fl_chunk *c = f->head;

	for (size_t at = 0; at < c->used; at += 8 + FL_REC(c, at)->size)
		state_apply(&f->st, FL_REC(c, at));
	f->head = c->next;
	if (!f->head)
		f->tail = NULL;
	f->bytes -= c->used;
	f->records -= c->records;
	free(f->spare);
	f->spare = c;
}

/*
 * The probes' records carry the kernel's clock (bpf_ktime_get_ns): they say
 * what time of the capture the drain has reached. The agent's own records
 * are stamped as made and GPU records come from the trainer: neither does.
 */
static bool is_kernel(const struct sb_hdr *h)
{
	return h->type >= 1 && h->type <= SB_EV_KERNEL_MAX;
}

void flight_put(struct flight *f, const struct sb_hdr *rec, uint64_t now)
{
	struct fl_chunk *c = f->tail;
	size_t need = 8 + (size_t)rec->size;

	if (rec->size < sizeof(*rec) || rec->size % 8)
		return;
	/* the oldest chunks once all of them are past keep_ns, or over the byte cap */
	while (f->head && f->head != f->tail && f->head->last_arrival + f->keep_ns < now)
		evict_head(f);
	if (!c || c->used + need > FL_CHUNK) {
		while (f->head && f->bytes + FL_CHUNK > f->max_bytes) {
			f->evicted_early += f->head->records;
			evict_head(f);
		}
		c = f->spare ? f->spare : malloc(sizeof(*c));
		f->spare = NULL;
		if (!c)
			return;
		c->next = NULL;
		c->used = 0;
		c->records = 0;
		if (f->tail)
			f->tail->next = c;
		else
			f->head = c;
		f->tail = c;
	}
	if (is_kernel(rec) && rec->ts <= now) {
		if (rec->ts > f->kernel_ts)
			f->kernel_ts = rec->ts;
		f->kernel_arrival = now;
	}
	memcpy(c->data + c->used, &now, 8);
	memcpy(c->data + c->used + 8, rec, rec->size);
	c->used += need;
	c->records++;
	c->last_arrival = now;
	f->bytes += need;
	f->records++;
}

void flight_stats(const struct flight *f, struct flight_stats *s)
{
	memset(s, 0, sizeof(*s));
	s->bytes = f->bytes;
	s->records = f->records;
	s->oldest_ns = f->head && f->head->used ? FL_ARRIVAL(f->head, 0) : 0;
	s->meta_bytes = f->st.meta_len;
	s->meta_dropped = f->st.meta_dropped;
	s->evicted_early = f->evicted_early;
}

uint64_t flight_reached(const struct flight *f, uint64_t now)
{
	/* nothing from the probes for a second: the drain is not behind, the trainer is quiet */
	if (now >= f->kernel_arrival + FLIGHT_QUIET_NS && now - FLIGHT_QUIET_NS > f->kernel_ts)
		return now - FLIGHT_QUIET_NS;
	return f->kernel_ts;
}

static uint64_t sub0(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* a drops record counted from the snippet's start */
static void drops_since(struct sb_drops *out, const struct sb_hdr *h, const struct fl_state *base)
{
	memcpy(out, h, sizeof(*out));
	if (!base->have_drops)
		return;
	for (int i = 0; i <= SB_EV_KERNEL_MAX; i++)
		out->ring[i] = sub0(out->ring[i], base->drops.ring[i]);
	out->gpu_channel = sub0(out->gpu_channel, base->drops.gpu_channel);
	out->gpu_source = sub0(out->gpu_source, base->drops.gpu_source);
	out->wait_overflow = sub0(out->wait_overflow, base->drops.wait_overflow);
}

/* the state as of from_ns: thread records, the kept records, the guard's state */
static int write_preamble(struct sbt_writer *w, const struct fl_state *s, uint64_t ts,
			  const char *note, uint32_t pid)
{
	static _Alignas(8) unsigned char buf[8192 + 64];
	int rc = 0;

	if (note)
		rc = sbt_write_text(w, SB_REC_NOTE, 0, ts, pid, 0, note, strlen(note));
	for (size_t at = 0; !rc && at < s->meta_len; at += ((const struct sb_hdr *)(s->meta + at))->size)
		rc = sbt_write(w, s->meta + at);
	for (size_t i = 0; !rc && i < s->nth; i++) {
		const struct fl_thread *t = &s->th[i];
		char text[8192];
		int n = snprintf(text, sizeof(text), "%s%s", t->comm, t->extra ? t->extra : "");

		if (n < 0)
			continue;
		if (sb_text_build(buf, sizeof(buf), SB_REC_THREAD, 0, ts, t->pid, t->tid, text,
				  (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1))
			rc = sbt_write(w, buf);
	}
	if (!rc && s->have_guard)
		rc = sbt_write(w, s->guard);
	return rc;
}

int flight_write(struct flight *f, const char *path, struct flight_snippet *sn, char *err,
		 size_t errlen)
{
	struct fl_state st;
	struct sbt_writer *w;
	struct fl_chunk *c = f->head;
	size_t at = 0;
	uint64_t end = 0, drops = 0, now = mono_ns();
	bool started = false, done = false, earlier = false;
	uint32_t pid = 0;
	int rc = 0;

	sn->records = sn->drops = sn->bytes = 0;
	w = sbt_create_as(path, NULL, sn->zstd_level, err, errlen);
	if (!w)
		return -1;
	state_copy(&st, &f->st);
	sn->start_ns = sn->from_ns;
	for (; c && !rc && !done; c = c->next, at = 0) {
		for (; at < c->used && !rc; at += 8 + FL_REC(c, at)->size) {
			const struct sb_hdr *h = FL_REC(c, at);
			bool timed = is_kernel(h) && h->ts <= now;

			if (!pid && h->type == SB_REC_TARGET)
				pid = h->pid;
			/* the first probe record from from_ns on starts it: what came before is state */
			if (!started && !(timed && h->ts >= sn->from_ns)) {
				earlier |= timed;
				state_apply(&st, h);
				continue;
			}
			if (timed && sn->to_ns && h->ts > sn->to_ns) {
				done = true;
				break;
			}
			if (!started) {
				/* the oldest record held is later than from_ns: the trace starts there */
				if (h->ts > sn->start_ns && !earlier)
					sn->start_ns = h->ts;
				rc = write_preamble(w, &st, sn->start_ns, sn->note, pid ? pid : h->pid);
				started = true;
				if (rc)
					break;
			}
			if (h->type == SB_REC_DROPS && h->size >= sizeof(struct sb_drops)) {
				struct sb_drops d;

				drops_since(&d, h, &st);
				drops = sb_drops_total(&d);
				rc = sbt_write(w, &d);
			} else {
				rc = sbt_write(w, h);
			}
			sn->records++;
			if (timed && h->ts > end)
				end = h->ts;
		}
	}
	if (!rc && !started)
		rc = write_preamble(w, &st, sn->start_ns, sn->note, pid);
	state_free(&st);
	if (rc) {
		snprintf(err, errlen, "writing %s: %s", path, strerror(-rc));
		sbt_discard(w);
		return -1;
	}
	sn->end_ns = end > sn->start_ns ? end : sn->start_ns;
	sn->drops = drops;
	rc = sbt_finish(w, SBT_END_DURATION, sn->start_ns, sn->end_ns, drops);
	if (rc) {
		snprintf(err, errlen, "finishing %s: %s", path, strerror(-rc));
		return -1;
	}
	{
		struct stat sb;

		if (!stat(path, &sb))
			sn->bytes = (uint64_t)sb.st_size;
	}
	return 0;
}
