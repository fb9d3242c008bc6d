// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * User stacks and what the report needs to symbolise them: kept aside as the
 * sweep passes them (which counts their cost to the step), read by the writers through engine_stacks() for the steps they show.
 * docs/ARCHITECTURE.md, "Stacks". Bounded: the last ENG_STACKS_MAX stacks,
 * MAPPINGS_MAX mappings and JITSYMS_MAX JIT symbols.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "engine/internal.h"
#include "format/costs.h"

#define MAPPINGS_MAX 65536
#define JITSYMS_MAX (1u << 20)

struct stack_slot {
	struct eng_stack s;
	uint64_t ip[SB_STACK_MAX];
};

/* a mapping read without execute permission: no return address lies in it */
struct noexec {
	uint32_t pid;
	uint64_t start, end;
	uint64_t ts;             /* when it was read */
};

struct stack_store {
	struct stack_slot *slot; /* a ring once full */
	uint32_t n, cap, head;   /* head: the oldest, once full */
	/*
	 * Stacks come in the sweep's time order; one that came earlier than the
	 * one before (a late record) makes the ring unsorted: searched in full
	 */
	bool unsorted;
	uint64_t last_ts;
	struct eng_mapping *maps;
	uint32_t nmaps, maps_cap;
	struct eng_jitsym *jit;
	uint32_t njit, jit_cap;
	struct noexec *noexec;   /* by (pid, start); the last read of each start */
	uint32_t nnoexec, noexec_cap;
};

static struct stack_store *store(struct engine *e)
{
	if (!e->stacks)
		e->stacks = heap_calloc(e, 1, sizeof(*e->stacks));
	return e->stacks;
}

void stacks_record(struct engine *e, const struct sb_hdr *h)
{
	const struct sb_stack *r = (const void *)h;
	struct stack_store *st = store(e);
	struct stack_slot *sl;
	uint32_t n = r->nframes < SB_STACK_MAX ? r->nframes : SB_STACK_MAX;

	if (st->n < ENG_STACKS_MAX) {
		if (st->n == st->cap)
			heap_grow(e, (void **)&st->slot, &st->cap, st->n + 1, sizeof(*st->slot));
		sl = &st->slot[st->n++];
	} else {
		sl = &st->slot[st->head];
		st->head = (st->head + 1) % st->n;
	}
	if (h->ts < st->last_ts)
		st->unsorted = true;
	st->last_ts = h->ts;
	memcpy(sl->ip, r->ip, n * sizeof(sl->ip[0]));
	sl->s = (struct eng_stack){
		.tid = h->tid,
		.ev_type = (uint16_t)r->ev_type,
		.truncated = (h->flags & SB_STACK_TRUNCATED) != 0,
		.start_ns = r->ev_start_ns <= h->ts ? r->ev_start_ns : h->ts,
		.ts = h->ts,
		.nframes = n,
		.pid = h->pid,
	};
}

static uint64_t kv_u64(const char *s, size_t n, const char *key)
{
	char buf[64];

	return kv_get(s, n, key, buf, sizeof(buf)) ? strtoull(buf, NULL, 0) : 0;
}

/* the first noexec entry of pid at or after start (st->nnoexec: none) */
static uint32_t noexec_lower(const struct stack_store *st, uint32_t pid, uint64_t start)
{
	uint32_t lo = 0, hi = st->nnoexec;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct noexec *x = &st->noexec[mid];

		if (x->pid < pid || (x->pid == pid && x->start < start))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void add_noexec(struct engine *e, struct stack_store *st, uint32_t pid, uint64_t start,
		       uint64_t end, uint64_t ts)
{
	uint32_t i = noexec_lower(st, pid, start);

	if (end <= start)
		return;
	if (i < st->nnoexec && st->noexec[i].pid == pid && st->noexec[i].start == start) {
		st->noexec[i].end = end;
		st->noexec[i].ts = ts;
		return;
	}
	if (st->nnoexec >= MAPPINGS_MAX)
		return;
	if (st->nnoexec == st->noexec_cap)
		heap_grow(e, (void **)&st->noexec, &st->noexec_cap, st->nnoexec + 1,
			  sizeof(*st->noexec));
	memmove(&st->noexec[i + 1], &st->noexec[i], (st->nnoexec - i) * sizeof(*st->noexec));
	st->noexec[i] = (struct noexec){ .pid = pid, .start = start, .end = end, .ts = ts };
	st->nnoexec++;
}

/* pid made [lo, hi) code (mmap or mprotect with PROT_EXEC): no longer data */
void stacks_code_mapped(struct engine *e, uint32_t pid, uint64_t lo, uint64_t hi)
{
	struct stack_store *st = e->stacks;
	uint32_t i, k;

	if (!st || !st->nnoexec || hi <= lo)
		return;
	i = noexec_lower(st, pid, lo);
	if (i > 0 && st->noexec[i - 1].pid == pid && st->noexec[i - 1].end > lo)
		i--;
	for (k = i; k < st->nnoexec && st->noexec[k].pid == pid && st->noexec[k].start < hi; k++)
		;
	if (k > i) {
		memmove(&st->noexec[i], &st->noexec[k], (st->nnoexec - k) * sizeof(*st->noexec));
		st->nnoexec -= k - i;
	}
}

/*
 * Is addr, as a return address of pid's stack taken at ts, in memory read
 * without execute permission before ts, and not read as code since?
 */
static bool in_noexec(const struct stack_store *st, uint32_t pid, uint64_t addr, uint64_t ts)
{
	uint32_t i = noexec_lower(st, pid, addr + 1);
	const struct noexec *x;

	if (!i)
		return false;
	x = &st->noexec[i - 1];
	if (x->pid != pid || addr >= x->end || x->ts > ts)
		return false;
	for (uint32_t k = 0; k < st->nmaps; k++) {
		const struct eng_mapping *m = &st->maps[k];

		if (m->pid == pid && addr >= m->start && addr < m->end && m->ts >= x->ts && m->ts <= ts)
			return false;
	}
	return true;
}

/*
 * The frames of a stack worth naming: a frame-pointer walk through code that
 * keeps no frame pointer reads stale words, and one that lands in data
 * (mapped without execute permission) is no caller: the stack ends before it.
 */
static uint32_t frames_kept(const struct stack_store *st, const struct eng_stack *s,
			    const uint64_t *ip)
{
	if (!st->nnoexec)
		return s->nframes;
	for (uint32_t i = 1; i < s->nframes; i++)
		if (in_noexec(st, s->pid, ip[i] - 1, s->ts))
			return i;
	return s->nframes;
}

static void add_mapping(struct engine *e, struct stack_store *st, const struct sb_hdr *h,
			const char *s, size_t n)
{
	char path[4096], bid[128], buf[16], funcs[2048];
	struct eng_mapping *m;
	bool vdso = false;

	/*
	 * Data has no symbols. Where no code can be either (read-only or no
	 * access, the heap, the stack), a return address in it ends the stack;
	 * writable anonymous memory may be a JIT's, made code later.
	 */
	if (kv_get(s, n, "perms", buf, sizeof(buf)) && buf[0] && buf[1] && buf[2] && buf[2] != 'x') {
		char kind[16];

		if (buf[1] != 'w' || (kv_get(s, n, "kind", kind, sizeof(kind)) &&
				      (!strcmp(kind, "heap") || !strcmp(kind, "stack"))))
			add_noexec(e, st, h->pid, kv_u64(s, n, "start"), kv_u64(s, n, "end"), h->ts);
		return;
	}
	if (st->nmaps >= MAPPINGS_MAX)
		return;
	/*
	 * the target's in `path`; a child's in `name`, read when it is executable
	 * code of a file; the vDSO's, with its functions
	 */
	if (!kv_get(s, n, "path", path, sizeof(path)) &&
	    !(kv_get(s, n, "perms", buf, sizeof(buf)) && buf[0] && buf[1] && buf[2] == 'x' &&
	      kv_get(s, n, "kind", bid, sizeof(bid)) &&
	      ((vdso = !strcmp(bid, "vdso")) || !strcmp(bid, "file")) &&
	      kv_get(s, n, "name", path, sizeof(path))))
		return;
	if (vdso && !kv_get(s, n, "funcs", funcs, sizeof(funcs)))
		funcs[0] = 0;
	if (!kv_get(s, n, "build_id", bid, sizeof(bid)))
		bid[0] = 0;
	if (st->nmaps == st->maps_cap)
		heap_grow(e, (void **)&st->maps, &st->maps_cap, st->nmaps + 1, sizeof(*st->maps));
	m = &st->maps[st->nmaps];
	*m = (struct eng_mapping){
		.ts = h->ts,
		.start = kv_u64(s, n, "start"),
		.end = kv_u64(s, n, "end"),
		.offset = kv_u64(s, n, "offset"),
		.deleted = kv_get(s, n, "deleted", buf, sizeof(buf)) && buf[0] == '1',
		.ino = kv_u64(s, n, "inode"),
		.pid = h->pid,
	};
	if (kv_get(s, n, "dev", buf, sizeof(buf))) {
		unsigned maj = 0, mnr = 0;

		if (sscanf(buf, "%u:%u", &maj, &mnr) == 2)
			m->dev = makedev(maj, mnr);
	}
	if (m->end <= m->start)
		return;
	m->path = heap_strndup(e, path, strlen(path));
	m->build_id = heap_strndup(e, bid, strlen(bid));
	if (vdso)
		m->funcs = heap_strndup(e, funcs, strlen(funcs));
	st->nmaps++;
}

/* "START SIZE name" lines, hex without 0x */
static void add_jitsyms(struct engine *e, struct stack_store *st, const char *s, size_t n)
{
	const char *p = s, *end = s + n;

	while (p < end && st->njit < JITSYMS_MAX) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end, *q;
		char num[2][24];
		int k = 0;

		q = p;
		for (; k < 2; k++) {
			size_t l = 0;

			while (q < le && *q == ' ')
				q++;
			while (q < le && *q != ' ' && l + 1 < sizeof(num[k]))
				num[k][l++] = *q++;
			num[k][l] = 0;
		}
		while (q < le && *q == ' ')
			q++;
		if (num[0][0] && num[1][0] && q < le) {
			struct eng_jitsym *j;

			if (st->njit == st->jit_cap)
				heap_grow(e, (void **)&st->jit, &st->jit_cap, st->njit + 1,
					  sizeof(*st->jit));
			j = &st->jit[st->njit++];
			j->start = strtoull(num[0], NULL, 16);
			j->size = strtoull(num[1], NULL, 16);
			j->name = heap_strndup(e, q, (size_t)(le - q));
		}
		p = nl ? nl + 1 : end;
	}
}

void stacks_meta(struct engine *e, const struct sb_hdr *h, const char *s, size_t n)
{
	struct stack_store *st = store(e);

	if (h->type == SB_REC_MAPPING)
		add_mapping(e, st, h, s, n);
	else
		add_jitsyms(e, st, s, n);
}

void stacks_free(struct engine *e)
{
	struct stack_store *st = e->stacks;

	if (!st)
		return;
	for (uint32_t i = 0; i < st->nmaps; i++) {
		free((char *)st->maps[i].path);
		free((char *)st->maps[i].build_id);
		free((char *)st->maps[i].funcs);
	}
	for (uint32_t i = 0; i < st->njit; i++)
		free((char *)st->jit[i].name);
	free(st->maps);
	free(st->jit);
	free(st->noexec);
	free(st->slot);
	free(st);
	e->stacks = NULL;
}

/* engine_stacks; out NULL: only counts them */
static int stacks_in(const struct engine *e, uint32_t tid, uint64_t lo, uint64_t hi,
		     struct eng_stack *out, int max)
{
	const struct stack_store *st = e ? e->stacks : NULL;
	uint32_t from = 0;
	int k = 0;

	if (!st)
		return 0;
	if (!st->unsorted) {
		/* in time order: the first that ends at lo or later, by bisection */
		uint32_t a = 0, b = st->n;

		while (a < b) {
			uint32_t m = a + (b - a) / 2;

			if (st->slot[(st->head + m) % st->n].s.ts < lo)
				a = m + 1;
			else
				b = m;
		}
		from = a;
	}
	for (uint32_t i = from; i < st->n && k < max; i++) {
		const struct stack_slot *sl = &st->slot[(st->head + i) % st->n];

		if (!st->unsorted && sl->s.ts > hi)
			break;
		if ((tid && sl->s.tid != tid) || sl->s.ts < lo || sl->s.ts > hi)
			continue;
		if (out) {
			out[k] = sl->s;
			out[k].ip = sl->ip;
			out[k].nframes = frames_kept(st, &sl->s, sl->ip);
			/* ended at a stale word: nothing of it was cut off */
			if (out[k].nframes < sl->s.nframes)
				out[k].truncated = false;
		}
		k++;
	}
	return k;
}

int engine_stacks(const struct engine *e, uint32_t tid, uint64_t lo, uint64_t hi,
		  struct eng_stack *out, int max)
{
	return out ? stacks_in(e, tid, lo, hi, out, max) : 0;
}

struct eng_stack *engine_stacks_copy(const struct engine *e, uint32_t tid, uint64_t lo,
				     uint64_t hi, int *n)
{
	int k = stacks_in(e, tid, lo, hi, NULL, ENG_STACKS_MAX);
	struct eng_stack *out = k > 0 ? malloc((size_t)k * sizeof(*out)) : NULL;

	*n = out ? stacks_in(e, tid, lo, hi, out, k) : 0;
	return out;
}

uint32_t engine_nmappings(const struct engine *e)
{
	return e && e->stacks ? e->stacks->nmaps : 0;
}

const struct eng_mapping *engine_mapping(const struct engine *e, uint32_t i)
{
	return i < engine_nmappings(e) ? &e->stacks->maps[i] : NULL;
}

uint32_t engine_njitsyms(const struct engine *e)
{
	return e && e->stacks ? e->stacks->njit : 0;
}

const struct eng_jitsym *engine_jitsym(const struct engine *e, uint32_t i)
{
	return i < engine_njitsyms(e) ? &e->stacks->jit[i] : NULL;
}
