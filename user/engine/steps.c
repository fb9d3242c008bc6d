// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Steps: marks from the step sources (docs/ARCHITECTURE.md, "Step sources")
 * begin and end them; the pieces of GPU idle in each are committed to the
 * thread that ended the gap, and a step is finalised into a result slot once
 * all of its pieces are. Also the candidates and the interferer table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"
#include "base/util.h"

#define INTERFERERS_MAX 65536

/*
 * A step's detail (blame entries, I/O, mappings, audit counts), kept with
 * that of the other steps of its chunk: a step holds only as many as it has,
 * and they go when the chunk goes: n elements of size bytes copied into
 * *head's newest block, or a new block of cap elements if they do not fit.
 */
static void *pool_store(struct engine *e, struct pool_block **head, const void *src,
			uint32_t n, size_t size, uint32_t cap)
{
	struct pool_block *q = *head;
	void *p;

	if (!q || q->used + n > q->cap) {
		size_t bytes;

		if (cap < n)
			cap = n;
		bytes = sizeof(*q) + (size_t)cap * size;
		q = heap_calloc(e, 1, bytes);
		q->bytes = bytes;
		q->cap = cap;
		q->next = *head;
		*head = q;
	}
	p = q->b + (size_t)q->used * size;
	memcpy(p, src, (size_t)n * size);
	q->used += n;
	return p;
}

/* the chunk the step being finalised goes into */
static struct result_chunk *result_chunk_now(struct engine *e)
{
	return e->results[e->nresults / RESULTS_PER_CHUNK - e->first_chunk];
}

/* the pools' blocks, by kind: elements each */
static const uint32_t pool_cap[POOL_KINDS] = {
	[POOL_BLAME] = BLAME_CHUNK, [POOL_IO] = 64, [POOL_MAP] = 64, [POOL_AUDIT] = 256, [POOL_IRQ] = 64,
};

/* the step's I/O detail: its accumulator's files, the largest first */
static void step_io(struct engine *e, struct eng_step *r, const struct accum *a)
{
	struct eng_io tmp[IO_USES_MAX];
	struct result_chunk *c = result_chunk_now(e);
	uint32_t n = 0;

	for (uint32_t i = 0; i < a->nio; i++) {
		const struct io_use *u = &a->io[i];
		const struct io_file *x;

		if (!u->ns || !u->file || u->file > e->nio_files)
			continue;
		x = &e->io_files[u->file - 1];
		memset(&tmp[n], 0, sizeof(tmp[n]));
		tmp[n].call = u->call;
		tmp[n].kind = x->kind;
		tmp[n].calls = u->calls;
		tmp[n].ns = u->ns;
		tmp[n].bytes = u->bytes;
		tmp[n].written = u->written;
		memcpy(tmp[n].path, x->path, sizeof(tmp[n].path));
		for (uint32_t j = n; j > 0 && tmp[j - 1].ns < tmp[j].ns; j--) {
			struct eng_io t = tmp[j];

			tmp[j] = tmp[j - 1];
			tmp[j - 1] = t;
		}
		n++;
	}
	if (n > ENG_MAX_IO)
		n = ENG_MAX_IO;
	if (!n)
		return;
	r->io = pool_store(e, &c->pool[POOL_IO], tmp, n, sizeof(tmp[0]), pool_cap[POOL_IO]);
	r->nio = n;
}

/* who moved the step's critical thread: its accumulator's moves, the largest first */
static void step_moves(struct engine *e, struct eng_step *r, const struct accum *a)
{
	for (uint32_t i = 0; i < a->nmoves; i++) {
		const struct move_use *u = &a->moves[i];
		struct eng_move m = { .how = u->how, .by_tid = u->by, .from_cpu = u->from,
				      .to_cpu = u->to, .ns = u->ns };
		uint32_t j;

		if (!u->ns)
			continue;
		if (u->by)
			snprintf(m.by_comm, sizeof(m.by_comm), "%s", thread_name_of(e, u->by));
		for (j = r->nmoves; j > 0 && r->moves[j - 1].ns < m.ns; j--)
			if (j < ENG_MAX_MOVES)
				r->moves[j] = r->moves[j - 1];
		if (j < ENG_MAX_MOVES) {
			r->moves[j] = m;
			if (r->nmoves < ENG_MAX_MOVES)
				r->nmoves++;
		}
	}
}

/* the interrupts on the step's critical thread's time, the largest first */
static void step_irqs(struct engine *e, struct eng_step *r, const struct accum *a)
{
	struct eng_irq tmp[IRQ_USES_MAX];
	uint32_t n = 0;

	for (uint32_t i = 0; i < a->nirqs; i++) {
		const struct irq_use *u = &a->irqs[i];

		if (!u->ns)
			continue;
		memset(&tmp[n], 0, sizeof(tmp[n]));
		tmp[n].kind = u->src < SB_NSOFTIRQ ? ENG_IRQ_SOFTIRQ :
			      u->src == SB_NSOFTIRQ ? ENG_IRQ_HARD : ENG_IRQ_SYSTEM;
		tmp[n].irq = u->irq;
		tmp[n].cpu = u->cpu;
		if (tmp[n].kind == ENG_IRQ_HARD)
			comm_copy(tmp[n].name, u->name);
		else if (tmp[n].kind == ENG_IRQ_SYSTEM)
			snprintf(tmp[n].name, sizeof(tmp[n].name), "%s",
				 sb_sysirq_name(u->src - SB_NSOFTIRQ - 1));
		else
			snprintf(tmp[n].name, sizeof(tmp[n].name), "%s", sb_softirq_name(u->src));
		tmp[n].ns = u->ns;
		for (uint32_t j = n; j > 0 && tmp[j - 1].ns < tmp[j].ns; j--) {
			struct eng_irq t = tmp[j];

			tmp[j] = tmp[j - 1];
			tmp[j - 1] = t;
		}
		n++;
	}
	/* the run's sources: each of this step's, however many it had */
	for (uint32_t i = 0; i < n; i++) {
		struct eng_irq *t = NULL;

		for (uint32_t k = 0; k < e->nirq_totals && !t; k++)
			if (e->irq_totals[k].kind == tmp[i].kind && e->irq_totals[k].cpu == tmp[i].cpu &&
			    !strcmp(e->irq_totals[k].name, tmp[i].name))
				t = &e->irq_totals[k];
		if (!t && e->nirq_totals < ENG_IRQ_TOTALS_MAX) {
			t = &e->irq_totals[e->nirq_totals++];
			*t = tmp[i];
			t->ns = 0;
		}
		if (t)
			t->ns = sat_add(t->ns, tmp[i].ns);
	}
	if (n > ENG_MAX_IRQS)
		n = ENG_MAX_IRQS;
	if (!n)
		return;
	r->irqs = pool_store(e, &result_chunk_now(e)->pool[POOL_IRQ], tmp, n, sizeof(tmp[0]),
			     pool_cap[POOL_IRQ]);
	r->nirqs = n;
}

/* the regions the step's faults were in, the largest first */
static void step_maps(struct engine *e, struct eng_step *r, const struct accum *a)
{
	struct eng_map tmp[MAP_USES_MAX];
	struct result_chunk *c = result_chunk_now(e);
	uint32_t n = 0;

	for (uint32_t i = 0; i < a->nmaps; i++) {
		const struct map_use *u = &a->maps[i];
		const struct map_region *x;

		/* its own time: less what it took over from an entry it replaced */
		if (u->ns <= u->err || !u->map || u->map > e->nmaps)
			continue;
		x = &e->maps[u->map - 1];
		if (x->start != u->start)
			continue; /* unmapped and its slot reused since */
		memset(&tmp[n], 0, sizeof(tmp[n]));
		tmp[n].addr = x->start;
		tmp[n].len = x->end - x->start;
		tmp[n].anon = x->anon;
		tmp[n].kind = x->kind;
		tmp[n].step_known = x->step_known;
		tmp[n].step_number = x->step_number;
		tmp[n].faults = u->faults;
		tmp[n].ns = u->ns - u->err;
		memcpy(tmp[n].path, x->path, sizeof(tmp[n].path));
		tmp[n].pid = x->pid;
		tmp[n].region = x->region;
		tmp[n].before_capture = x->before;
		for (uint32_t j = n; j > 0 && tmp[j - 1].ns < tmp[j].ns; j--) {
			struct eng_map t = tmp[j];

			tmp[j] = tmp[j - 1];
			tmp[j - 1] = t;
		}
		n++;
	}
	if (n > ENG_MAX_MAPS)
		n = ENG_MAX_MAPS;
	if (!n)
		return;
	r->maps = pool_store(e, &c->pool[POOL_MAP], tmp, n, sizeof(tmp[0]), pool_cap[POOL_MAP]);
	r->nmaps = n;
}

/* the step's launching threads and what they did (eng_step.audit) */
static void step_audit(struct engine *e, struct eng_step *r, struct open_step *st)
{
	struct result_chunk *c = result_chunk_now(e);
	uint32_t n = st->naudit;

	if (!n)
		return;
	for (uint32_t i = 0; i < n && st->fast_exact; i++)
		if (st->audit[i].tid == st->marker_tid) {
			uint32_t all = st->audit[i].n[ENG_AUD_ALLOC], burst = st->burst_calls[i];
			/* its slow calls, each a record, and the fast ones at the marks */
			uint64_t v = (all > burst ? all - burst : 0) + st->fast_calls;

			st->audit[i].n[ENG_AUD_ALLOC] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
			st->audit[i].alloc_exact = true;
		}
	r->audit = pool_store(e, &c->pool[POOL_AUDIT], st->audit, n, sizeof(st->audit[0]),
			      pool_cap[POOL_AUDIT]);
	r->naudit = n;
}

void launcher_add(struct engine *e, uint32_t tid)
{
	struct open_step *st = e->current_step;
	uint32_t i;

	for (i = 0; i < e->nlaunchers && e->launchers[i] != tid; i++)
		;
	if (i == e->nlaunchers) {
		if (i == ENG_MAX_AUDIT)
			return;
		e->launchers[e->nlaunchers++] = tid;
	}
	if (!st)
		return;
	for (i = 0; i < st->naudit && st->audit[i].tid != tid; i++)
		;
	if (i == st->naudit && i < ENG_MAX_AUDIT)
		st->audit[st->naudit++].tid = tid;
}

void launcher_gone(struct engine *e, uint32_t tid)
{
	for (uint32_t i = 0; i < e->nlaunchers; i++)
		if (e->launchers[i] == tid) {
			memmove(&e->launchers[i], &e->launchers[i + 1],
				(e->nlaunchers - i - 1) * sizeof(e->launchers[0]));
			e->nlaunchers--;
			return;
		}
}

void audit_count(struct engine *e, const struct sb_hdr *h)
{
	struct open_step *st = e->current_step;
	uint64_t n = 1;
	int k;

	switch (h->type) {
	case SB_EV_ALLOC: k = ENG_AUD_ALLOC; break;
	case SB_EV_ALLOC_BURST:
		k = ENG_AUD_ALLOC;
		n = ((const struct sb_alloc_burst *)h)->calls;
		break;
	case SB_EV_MMSYS: k = ENG_AUD_MMAP; break;
	case SB_EV_FAULT: k = ENG_AUD_FAULTS; break;
	case SB_EV_FAULT_RUN:
		k = ENG_AUD_FAULTS;
		n = ((const struct sb_fault_run *)h)->count;
		break;
	case SB_EV_MIGRATE: k = ENG_AUD_MIGRATIONS; break;
	case SB_EV_SWITCH_OUT: {
		uint8_t s = ((const struct sb_switch_out *)h)->state;

		if (s != SB_STATE_SLEEP && s != SB_STATE_DISK)
			return;
		k = ENG_AUD_SLEEPS;
		break;
	}
	case SB_EV_SCHED_RUN:
		k = ENG_AUD_SLEEPS;
		n = ((const struct sb_sched_run *)h)->sleeps;
		break;
	case SB_EV_IOSYS: k = ENG_AUD_IO; break;
	default: return;
	}
	for (uint32_t i = 0; i < st->naudit; i++)
		if (st->audit[i].tid == h->tid) {
			uint64_t v = st->audit[i].n[k] + n;

			if (h->type == SB_EV_ALLOC_BURST) {
				uint64_t b = st->burst_calls[i] + n;

				st->burst_calls[i] = b > UINT32_MAX ? UINT32_MAX : (uint32_t)b;
			}

			st->audit[i].n[k] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
			return;
		}
}

void result_pools_free(struct engine *e, struct result_chunk *c)
{
	for (int k = 0; k < POOL_KINDS; k++)
		while (c->pool[k]) {
			struct pool_block *q = c->pool[k];

			c->pool[k] = q->next;
			heap_account(e, -(int64_t)q->bytes);
			free(q);
		}
}

static struct open_step *step_by_seq(struct engine *e, uint64_t seq)
{
	struct open_step *f;

	if (!e->nopen_steps)
		return NULL;
	f = e->open_steps[e->open_steps_head];
	if (seq < f->seq || seq - f->seq >= e->nopen_steps)
		return NULL;
	return e->open_steps[(e->open_steps_head + (seq - f->seq)) % e->open_steps_cap];
}

struct piece *piece_new(struct engine *e, uint64_t step_seq, uint64_t start)
{
	struct piece *p;

	if (e->nfree_pieces) {
		p = e->free_pieces[--e->nfree_pieces];
	} else {
		p = heap_calloc(e, 1, sizeof(*p));
	}
	p->step_seq = step_seq;
	p->start = p->end = start;
	p->closed = false;
	for (int i = 0; i < e->ncandidates; i++)
		accum_reset(&p->accum[i]);
	if (e->npieces == e->pieces_cap) {
		uint32_t nc = e->pieces_cap ? e->pieces_cap * 2 : 8;
		struct piece **n = heap_calloc(e, nc, sizeof(*n));

		for (uint32_t i = 0; i < e->npieces; i++)
			n[i] = e->pieces[(e->pieces_head + i) % e->pieces_cap];
		free(e->pieces);
		heap_account(e, -(int64_t)(e->pieces_cap * sizeof(*n)));
		e->pieces = n;
		e->pieces_cap = nc;
		e->pieces_head = 0;
	}
	e->pieces[(e->pieces_head + e->npieces++) % e->pieces_cap] = p;
	if (++e->pieces_live > e->pieces_peak)
		e->pieces_peak = e->pieces_live;
	return p;
}

static void piece_release(struct engine *e, struct piece *p)
{
	heap_grow(e, (void **)&e->free_pieces, &e->free_pieces_cap, e->nfree_pieces + 1,
		  sizeof(*e->free_pieces));
	e->free_pieces[e->nfree_pieces++] = p;
	e->pieces_live--;
}

static struct interferer *interferer_slot(struct engine *e, uint32_t pid, const char *comm)
{
	uint32_t h = hash32(pid * 31u + (unsigned char)comm[0] * 7u + (unsigned)strlen(comm));

	for (uint32_t i = h & (e->interferers_cap - 1);; i = (i + 1) & (e->interferers_cap - 1)) {
		struct interferer *x = &e->interferers[i];

		if (!x->used || (x->pid == pid && !strcmp(x->comm, comm)))
			return x;
	}
}

/* a table of nc slots holding the entries of old[oc] */
static void interferer_rehash(struct engine *e, struct interferer *old, uint32_t oc, uint32_t nc)
{
	e->interferers = heap_calloc(e, nc, sizeof(*e->interferers));
	e->interferers_cap = nc;
	for (uint32_t i = 0; i < oc; i++)
		if (old[i].used)
			*interferer_slot(e, old[i].pid, old[i].comm) = old[i];
	free(old);
	heap_account(e, -(int64_t)(oc * sizeof(*old)));
}

static int interferer_ns_cmp(const void *a, const void *b)
{
	const struct interferer *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns > y->ns ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return strcmp(x->comm, y->comm);
}

/*
 * INTERFERERS_MAX tasks have taken time: the smaller half are folded into one
 * remainder (a run of days meets many short-lived tasks); a task folded that
 * takes time again starts from 0.
 */
static void interferers_fold(struct engine *e)
{
	struct interferer *all = heap_calloc(e, e->ninterferers, sizeof(*all));
	uint32_t n = 0, keep = INTERFERERS_MAX / 2;

	for (uint32_t i = 0; i < e->interferers_cap; i++)
		if (e->interferers[i].used)
			all[n++] = e->interferers[i];
	qsort(all, n, sizeof(*all), interferer_ns_cmp);
	for (uint32_t i = keep; i < n; i++) {
		e->interferers_other_ns += all[i].ns;
		e->interferers_folded++;
	}
	memset(e->interferers, 0, e->interferers_cap * sizeof(*e->interferers));
	e->ninterferers = n < keep ? n : keep;
	for (uint32_t i = 0; i < e->ninterferers; i++)
		*interferer_slot(e, all[i].pid, all[i].comm) = all[i];
	free(all);
	heap_account(e, -(int64_t)(n * sizeof(*all)));
}

static void interferer_add(struct engine *e, const struct eng_who *w, uint64_t ns)
{
	struct interferer *x;

	if (e->interferers_cap) {
		x = interferer_slot(e, w->pid, w->comm);
		if (x->used) {
			x->ns += ns;
			x->realtime = x->realtime || engine_task_realtime(e, w->tid, w->comm);
			return;
		}
	}
	if (e->ninterferers >= INTERFERERS_MAX)
		interferers_fold(e);
	if ((e->ninterferers + 1) * 2 > e->interferers_cap)
		interferer_rehash(e, e->interferers, e->interferers_cap,
				  e->interferers_cap ? e->interferers_cap * 2 : 64);
	x = interferer_slot(e, w->pid, w->comm);
	x->used = true;
	x->pid = w->pid;
	memcpy(x->comm, w->comm, sizeof(x->comm));
	x->ns = ns;
	x->realtime = engine_task_realtime(e, w->tid, w->comm);
	e->ninterferers++;
}

static bool candidate_of_tid(struct engine *e, uint32_t tid, int *ci)
{
	struct thread *t = tid ? thread_find(e, tid) : NULL;

	*ci = t ? t->candidate : -1;
	return *ci >= 0;
}

/* piece p is over: its time goes to the step as crit_tid's */
void piece_commit(struct engine *e, struct piece *p, uint32_t crit_tid)
{
	struct open_step *st = step_by_seq(e, p->step_seq);
	uint64_t idle = p->end > p->start ? p->end - p->start : 0, sum = 0;
	int ci;
	struct accum *a = NULL;

	if (!st)
		return;
	if (candidate_of_tid(e, crit_tid, &ci)) {
		a = &p->accum[ci];
		if (a->npending || a->pending_extra)
			resolve_sleep_accum(e, e->candidates[ci], a, NULL);
		for (int c = 0; c < ENG_NCAUSE; c++)
			sum += a->ns[c];
	}
	if (a) {
		/* the live set of culprits is what stole the time: count it before merging */
		for (uint32_t i = 0; i < a->nculprits; i++) {
			const struct culprit *c = &a->culprits[i];

			/* a culprit of tracer time is the agent: listed, marked as the tracer */
			if (c->cause == ENG_CPU_WAIT || c->cause == ENG_MIGRATION ||
			    c->cause == ENG_TRACER || (c->cause == ENG_BLOCKED && c->who.via_tid))
				interferer_add(e, &c->who, c->ns);
		}
		accum_merge(e, &st->accum, a);
	}
	if (idle > sum)
		st->accum.ns[ENG_UNKNOWN] += idle - sum;
	st->idle_ns += idle;
	if (idle && crit_tid) {
		uint32_t i;

		for (i = 0; i < st->ncritical && st->critical[i].tid != crit_tid; i++)
			;
		if (i < st->ncritical) {
			st->critical[i].ns += idle;
		} else if (st->ncritical < ARRAY_SIZE(st->critical)) {
			st->critical[st->ncritical].tid = crit_tid;
			st->critical[st->ncritical++].ns = idle;
		}
	}
	if (e->opts.timeline.gap && idle) {
		struct eng_gap g = { .step = st->number, .critical_tid = crit_tid,
				     .start_ns = p->start, .end_ns = p->end };

		for (int c = 0; c < ENG_NCAUSE; c++)
			g.cause_ns[c] = a ? a->ns[c] : 0;
		g.cause_ns[ENG_UNKNOWN] += idle > sum ? idle - sum : 0;
		e->opts.timeline.gap(e->opts.timeline.ctx, &g);
	}
	st->open_pieces--;
}

uint32_t step_fallback_critical(struct engine *e, uint64_t step_seq)
{
	struct open_step *st = step_by_seq(e, step_seq);
	int ci;

	if (st && candidate_of_tid(e, st->marker_tid, &ci))
		return st->marker_tid;
	return e->last_launch_tid ? e->last_launch_tid : (st ? st->marker_tid : 0);
}

void piece_pop(struct engine *e)
{
	struct piece *p = e->pieces[e->pieces_head];

	e->pieces_head = (e->pieces_head + 1) % e->pieces_cap;
	e->npieces--;
	if (p == e->current_piece)
		e->current_piece = NULL;
	piece_release(e, p);
}

/* commit the oldest closed pieces whose step has ended, with the fallback thread */
void pieces_commit_ended(struct engine *e, uint64_t older_than, bool all)
{
	while (e->npieces) {
		struct piece *p = e->pieces[e->pieces_head];
		struct open_step *st = step_by_seq(e, p->step_seq);

		if (!p->closed || !st || !st->ended)
			break;
		if (!all && st->end + e->lag > older_than)
			break;
		piece_commit(e, p, step_fallback_critical(e, p->step_seq));
		piece_pop(e);
	}
}

static void sort_blame(struct eng_blame *b, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++) {
		for (uint32_t j = i; j > 0; j--) {
			struct eng_blame *x = &b[j - 1], *y = &b[j];
			bool swap;

			if (x->ns != y->ns)
				swap = x->ns < y->ns;
			else if (x->cause != y->cause)
				swap = x->cause > y->cause;
			else if (x->has_who != y->has_who)
				swap = !x->has_who;
			else
				swap = x->who.pid > y->who.pid ||
				       (x->who.pid == y->who.pid && x->who.tid > y->who.tid);
			if (!swap)
				break;
			struct eng_blame t = *x;

			*x = *y;
			*y = t;
		}
	}
}

/*
 * Room for step nres: a new chunk when the last is full. In window mode the
 * chunks past the window go first, and the last of them takes the new steps.
 */
static struct eng_step *result_slot(struct engine *e)
{
	struct result_chunk *c = NULL;

	if (e->nresults < (e->first_chunk + e->nchunks) * RESULTS_PER_CHUNK)
		return RESULT(e, e->nresults);
	while (e->keep_steps && e->nchunks && (e->nchunks - 1) * RESULTS_PER_CHUNK >= e->keep_steps) {
		if (c) {
			free(c);
			heap_account(e, -(int64_t)sizeof(*c));
		}
		c = e->results[0];
		result_pools_free(e, c);
		memmove(e->results, e->results + 1, (e->nchunks - 1) * sizeof(*e->results));
		e->nchunks--;
		e->first_chunk++;
	}
	if (!c) {
		c = heap_calloc(e, 1, sizeof(*c));
		if (e->nchunks == e->results_cap) {
			uint64_t nc = e->results_cap ? 2 * e->results_cap : 16;
			struct result_chunk **q = realloc(e->results, nc * sizeof(*q));

			if (!q) {
				sb_err("out of memory in the blame engine");
				abort();
			}
			heap_account(e, (int64_t)((nc - e->results_cap) * sizeof(*q)));
			e->results = q;
			e->results_cap = nc;
		}
	}
	e->results[e->nchunks++] = c;
	return RESULT(e, e->nresults);
}

/* culprits a step's table holds on the stack (CULPRITS_MAX on the heap) */
#define FEW_CULPRITS 48

bool proc_groups_by_name(const struct engine *e, uint32_t pid)
{
	return pid && pid != e->target_pid && pid != e->identity.agent_pid &&
	       !proc_named_apart(e, pid);
}

static bool who_groups(const struct engine *e, int cause, const struct eng_who *w)
{
	return (cause == ENG_CPU_WAIT || (cause == ENG_BLOCKED && w->via_tid)) &&
	       proc_groups_by_name(e, w->pid);
}

bool engine_who_grouped(const struct engine *e, int cause, const struct eng_who *a,
			const struct eng_who *b)
{
	if (eng_who_same(a, b))
		return true;
	return a->via_tid == b->via_tid && !strcmp(a->comm, b->comm) && who_groups(e, cause, a) &&
	       who_groups(e, cause, b);
}

/* by cause and waker, then by process (by_pid) or by name, the biggest first */
static int crowd_cmp(const struct eng_blame *a, const struct eng_blame *b, bool by_pid)
{
	int c;

	if (a->cause != b->cause)
		return a->cause < b->cause ? -1 : 1;
	if (a->who.via_tid != b->who.via_tid)
		return a->who.via_tid < b->who.via_tid ? -1 : 1;
	if (by_pid && a->who.pid != b->who.pid)
		return a->who.pid < b->who.pid ? -1 : 1;
	if (!by_pid && (c = strcmp(a->who.comm, b->who.comm)))
		return c;
	if (a->ns != b->ns)
		return a->ns > b->ns ? -1 : 1;
	if (a->who.pid != b->who.pid)
		return a->who.pid < b->who.pid ? -1 : 1;
	return a->who.tid < b->who.tid ? -1 : a->who.tid > b->who.tid;
}

static int crowd_cmp_pid(const void *x, const void *y)
{
	return crowd_cmp(x, y, true);
}

static int crowd_cmp_name(const void *x, const void *y)
{
	return crowd_cmp(x, y, false);
}

/*
 * One pass of crowds_merge: the entries that may group (who_groups) of one
 * cause, waker and process (by_pid) or name as one, whose who is the
 * biggest's (they are sorted so: the first of the run). Returns the entries
 * left.
 */
static uint32_t crowds_pass(const struct engine *e, struct eng_blame *b, uint32_t n, bool by_pid)
{
	uint32_t m = 0;

	qsort(b, n, sizeof(*b), by_pid ? crowd_cmp_pid : crowd_cmp_name);
	for (uint32_t i = 0, j; i < n; i = j) {
		int64_t g = -1;

		for (j = i + 1; j < n && b[j].cause == b[i].cause &&
				b[j].who.via_tid == b[i].who.via_tid &&
				(by_pid ? b[j].who.pid == b[i].who.pid
					: !strcmp(b[j].who.comm, b[i].who.comm));
		     j++)
			;
		for (uint32_t k = i; k < j; k++) {
			/* m <= k: what is written was read */
			if (j - i == 1 || !who_groups(e, b[k].cause, &b[k].who)) {
				b[m++] = b[k];
			} else if (g < 0) {
				g = m;
				b[m++] = b[k];
			} else {
				b[g].ns = sat_add(b[g].ns, b[k].ns);
				/* a process's names are one process; each process of a name, one more */
				if (!by_pid)
					b[g].processes += b[k].processes;
			}
		}
	}
	return m;
}

/*
 * The step's named entries b[n], where they may group (who_groups): the
 * entries of one process (one that exec'd or renamed itself took the time
 * under each of its names) as one, then the processes of one name as one,
 * with eng_blame.processes. A fork storm of short-lived processes would
 * otherwise be as many small entries, folded away unnamed past
 * ENG_MAX_BLAME. Returns the entries left, in no order.
 */
static uint32_t crowds_merge(const struct engine *e, struct eng_blame *b, uint32_t n)
{
	if (n < 2)
		return n;
	n = crowds_pass(e, b, n, true);
	return crowds_pass(e, b, n, false);
}

static void step_finalize(struct engine *e, struct open_step *st)
{
	struct eng_step *r;
	/* a step's own culprits and causes: on the stack unless a crowd preempted it */
	struct eng_blame few[FEW_CULPRITS + ENG_NCAUSE], *tmp = few;
	uint32_t n = 0;
	uint64_t per_cause_named[ENG_NCAUSE] = { 0 };

	r = result_slot(e);
	memset(r, 0, sizeof(*r));
	r->index = e->nresults;
	r->step = st->number;
	r->start_ns = st->start;
	r->end_ns = st->end;
	r->duration_ns = st->end - st->start;
	r->incomplete = st->incomplete;
	r->gpu_timeline = e->gpu_fed;
	for (int c = 0; c < ENG_NCAUSE; c++)
		r->cause_ns[c] = st->accum.ns[c];
	if (r->gpu_timeline) {
		r->gpu_idle_ns = min64(st->idle_ns, r->duration_ns);
		r->gpu_busy_ns = r->duration_ns - r->gpu_idle_ns;
		r->cause_ns[ENG_GPU_SLOW] = min64(st->gpu_slow_ns, r->gpu_busy_ns);
	}
	memcpy(r->count, st->accum.count, sizeof(r->count));
	r->count[ENG_N_GPU_OPS] = st->gpu_ops;
	for (int c = 0; c < SB_NCOST; c++) {
		r->tracer_events += st->events_by_cost[c];
		r->tracer_ns += st->events_by_cost[c] * e->costs.ns[c];
	}
	r->alloc_sampled = guard_sampled_in(e, st->start, st->end);
	r->alloc_observed = guard_attached_in(e, st->start, st->end);
	for (uint32_t i = 0, best = 0; i < st->ncritical; i++)
		if (!i || st->critical[i].ns > st->critical[best].ns) {
			best = i;
			r->crit_tid = st->critical[i].tid;
		}
	if (!r->crit_tid)
		r->crit_tid = st->marker_tid;
	snprintf(r->crit_comm, sizeof(r->crit_comm), "%s", thread_name_of(e, r->crit_tid));

	if (st->accum.nculprits > FEW_CULPRITS &&
	    !(tmp = malloc((st->accum.nculprits + ENG_NCAUSE) * sizeof(*tmp)))) {
		/* no memory for the names: the causes alone */
		tmp = few;
		st->accum.nculprits = 0;
	}
	for (uint32_t i = 0; i < st->accum.nculprits; i++) {
		const struct culprit *c = &st->accum.culprits[i];

		if (!c->ns)
			continue;
		tmp[n].cause = c->cause;
		tmp[n].has_who = true;
		tmp[n].who = c->who;
		tmp[n].ns = c->ns;
		tmp[n].processes = 1;
		per_cause_named[c->cause] += c->ns;
		n++;
	}
	n = crowds_merge(e, tmp, n);
	for (int c = 0; c < ENG_NCAUSE; c++) {
		if (r->cause_ns[c] > per_cause_named[c]) {
			memset(&tmp[n], 0, sizeof(tmp[n]));
			tmp[n].cause = (uint8_t)c;
			tmp[n].ns = r->cause_ns[c] - per_cause_named[c];
			n++;
		}
	}
	sort_blame(tmp, n);
	/* too many: fold the smallest named entries into their cause's unnamed one */
	while (n > ENG_MAX_BLAME) {
		int k = -1;

		for (int i = (int)n - 1; i >= 0; i--)
			if (tmp[i].has_who) {
				k = i;
				break;
			}
		if (k < 0)
			break;
		uint8_t cause = tmp[k].cause;
		uint64_t ns = tmp[k].ns;
		uint32_t via = tmp[k].who.via_pid, j;

		memmove(&tmp[k], &tmp[k + 1], (n - k - 1) * sizeof(tmp[0]));
		n--;
		/*
		 * a preemptor reached through a thread the step waited for goes
		 * to the wait on that thread's process, where the step names one
		 * (it is still time spent waiting for it); else to the cause's
		 * unnamed entry, which the text reads as a sleep nobody traced ended
		 */
		for (j = 0; via && j < n && (tmp[j].cause != cause || !tmp[j].has_who ||
					     tmp[j].who.via_tid || tmp[j].who.pid != via); j++)
			;
		if (!via || j == n)
			for (j = 0; j < n && (tmp[j].cause != cause || tmp[j].has_who); j++)
				;
		if (j < n) {
			tmp[j].ns += ns;
		} else {
			memset(&tmp[n], 0, sizeof(tmp[n]));
			tmp[n].cause = cause;
			tmp[n].ns = ns;
			n++;
		}
		sort_blame(tmp, n);
	}
	r->blame = pool_store(e, &result_chunk_now(e)->pool[POOL_BLAME], tmp, n, sizeof(tmp[0]),
			      pool_cap[POOL_BLAME]);
	r->nblame = n;
	if (tmp != few)
		free(tmp);
	step_io(e, r, &st->accum);
	step_moves(e, r, &st->accum);
	step_maps(e, r, &st->accum);
	step_irqs(e, r, &st->accum);
	step_audit(e, r, st);
	e->nresults++;
	if (e->window_sums)
		window_sums_add(e->window_sums, r);
	else if (e->nresults > ENG_EXACT_STEPS_MAX)
		window_begin(e, ENG_REPORT_KEEP_STEPS);
	running_tail(e, r);
	if (e->opts.timeline.step)
		e->opts.timeline.step(e->opts.timeline.ctx, r);
	if (e->step_cb)
		e->step_cb(e->step_cb_ctx, r);
}

static void open_step_free(struct engine *e, struct open_step *st)
{
	accum_free(e, &st->accum);
	free(st);
	heap_account(e, -(int64_t)sizeof(*st));
}

void steps_finalize_ready(struct engine *e)
{
	while (e->nopen_steps) {
		struct open_step *st = e->open_steps[e->open_steps_head];

		if (!st->ended || st->open_pieces)
			break;
		step_finalize(e, st);
		e->open_steps_head = (e->open_steps_head + 1) % e->open_steps_cap;
		e->nopen_steps--;
		open_step_free(e, st);
	}
}

/* step r (kept) out of every total: its GPU busy time is not known (before the GPU records, or after) */
static void step_gpu_unknown(struct engine *e, struct eng_step *r, bool before)
{
	if (e->window_sums)
		window_sums_sub(e->window_sums, r);
	r->incomplete = true;
	if (before)
		r->gpu_before = true;
	else
		r->gpu_cut = true;
	if (e->window_sums)
		window_sums_add(e->window_sums, r);
}

/*
 * A trace cut short (or damaged) with a GPU timeline: the agent drains the GPU
 * channel in batches, so the GPU records of the capture's last moments come
 * after the host records of the same time, and what a drops record vouches for
 * is only what the channel held then (schemas/trace.md, "37 drops"). Past the
 * newest GPU operation read, the GPU's busy time is not known: the steps that
 * end after it are incomplete (their idle time, and the blame of it, would be
 * made of the missing records), whatever the host records say.
 */
void steps_gpu_cut(struct engine *e)
{
	uint64_t i = e->nresults;

	if (!e->gpu_fed)
		return;
	/*
	 * Before the GPU timeline: a channel read from later than the steps
	 * began (the collector's records start when it is read; a collector
	 * loaded into a running trainer). Steps that ended before the oldest
	 * GPU operation read have no GPU busy time to go by; their idle time
	 * and its blame would be made of the missing records.
	 */
	for (uint64_t k = first_kept(e); k < e->nresults; k++) {
		struct eng_step *r = RESULT(e, k);

		if (r->end_ns > e->gpu_from)
			break;
		if (r->incomplete)
			continue;
		step_gpu_unknown(e, r, true);
		e->gpu_before_steps++;
	}
	if (!e->truncated)
		return;
	/* steps end in order: the ones after the GPU records stop are the last */
	while (i > first_kept(e) && RESULT(e, i - 1)->end_ns > e->gpu_reach)
		i--;
	for (; i < e->nresults; i++) {
		struct eng_step *r = RESULT(e, i);

		step_gpu_unknown(e, r, false);
		e->gpu_cut_steps++;
	}
}

void step_end(struct engine *e, uint64_t t, bool incomplete)
{
	struct open_step *st = e->current_step;

	if (!st)
		return;
	account_candidates(e, t);
	if (e->current_piece) {
		e->current_piece->end = t;
		e->current_piece->closed = true;
		e->current_piece = NULL;
	}
	st->end = t;
	st->ended = true;
	st->incomplete = incomplete;
	/* ended by the next mark of the thread that began it, both with its count */
	if (!incomplete && st->fast_at_start_ok && e->mark_fast_ok &&
	    e->mark_fast_tid == st->marker_tid && e->mark_fast >= st->fast_at_start) {
		st->fast_exact = true;
		st->fast_calls = e->mark_fast - st->fast_at_start;
	}
	e->current_step = NULL;
	/* host-only: no GPU record has come, the marking thread is critical throughout */
	if (!e->gpu_fed)
		pieces_commit_ended(e, 0, true);
	steps_finalize_ready(e);
}

/* marks one above the one before, in a row, after which a number skipped forward is a loss */
#define NUMBERS_BY_ONE_MIN 4

static void step_begin(struct engine *e, uint64_t t, uint64_t number, uint32_t tid)
{
	struct open_step *st;
	bool skipped = false;

	if (e->number_seen && number <= e->last_number) {
		e->numbers_back++;
		e->numbers_same += number == e->last_number;
	}
	/*
	 * numbers that went up by one, then more: marks were lost (a program
	 * exec'd and not yet probed). The step that began at the last mark holds
	 * the unmarked ones and is no step's time: incomplete. A trainer that
	 * marks every tenth iteration never goes up by one.
	 */
	if (e->number_seen && number > e->last_number + 1 &&
	    e->numbers_by_one >= NUMBERS_BY_ONE_MIN) {
		skipped = true;
		e->numbers_skips++;
		e->numbers_missing += number - e->last_number - 1;
	}
	if (e->number_seen && number == e->last_number + 1)
		e->numbers_by_one++;
	else
		e->numbers_by_one = 0;
	if (e->current_step)
		step_end(e, t, skipped);
	account_candidates(e, t);
	st = heap_calloc(e, 1, sizeof(*st));
	st->seq = e->next_seq++;
	st->number = number;
	e->last_number = number;
	e->number_seen = true;
	st->start = t;
	st->marker_tid = tid;
	st->fast_at_start_ok = e->mark_fast_ok && e->mark_fast_tid == tid;
	st->fast_at_start = e->mark_fast;
	for (uint32_t i = 0; i < e->nlaunchers; i++)
		st->audit[st->naudit++].tid = e->launchers[i];
	if (e->nopen_steps == e->open_steps_cap) {
		uint32_t nc = e->open_steps_cap ? e->open_steps_cap * 2 : 16;
		struct open_step **n = heap_calloc(e, nc, sizeof(*n));

		for (uint32_t i = 0; i < e->nopen_steps; i++)
			n[i] = e->open_steps[(e->open_steps_head + i) % e->open_steps_cap];
		free(e->open_steps);
		heap_account(e, -(int64_t)(e->open_steps_cap * sizeof(*n)));
		e->open_steps = n;
		e->open_steps_cap = nc;
		e->open_steps_head = 0;
	}
	e->open_steps[(e->open_steps_head + e->nopen_steps++) % e->open_steps_cap] = st;
	if (e->nopen_steps > e->steps_flight_peak)
		e->steps_flight_peak = e->nopen_steps;
	e->current_step = st;
	if (tid) {
		candidate_add(e, thread_get(e, tid, e->target_pid));
		launcher_add(e, tid);
	}
	if (e->gap_open) {
		e->current_piece = piece_new(e, st->seq, t);
		st->open_pieces++;
	}
}

static int source_preference(int src)
{
	switch (src) {
	case ENG_SRC_USDT:
	case ENG_SRC_UPROBE: return 0;
	case ENG_SRC_GPU_MARKER: return 1;
	case ENG_SRC_NVTX: return 2;
	case ENG_SRC_KERNEL: return 3;
	case ENG_SRC_API: return 4;
	}
	return 9;
}

void pid_list_note(uint32_t *v, uint32_t *n, bool *more, uint32_t pid)
{
	uint32_t k = 0;

	while (k < *n && v[k] != pid)
		k++;
	if (k == *n && k < ENG_MARK_OTHERS_MAX)
		v[(*n)++] = pid;
	else if (k == *n)
		*more = true;
}

bool pid_list_may_hold(const uint32_t *v, uint32_t n, bool more, uint32_t pid)
{
	for (uint32_t k = 0; k < n; k++)
		if (v[k] == pid)
			return true;
	return more;
}

int marks_owner(struct mark_owner *m, uint32_t pid, uint32_t target_pid)
{
	bool restart;

	if (!m->pid || pid == m->pid) {
		m->pid = pid;
		return MARK_OWN;
	}
	restart = m->gone && !pid_list_may_hold(m->others, m->nothers, m->others_more, pid);
	if (!restart && pid != target_pid) {
		pid_list_note(m->others, &m->nothers, &m->others_more, pid);
		return MARK_OTHER;
	}
	/* the target's own marks over a descendant's: that one's become the others' */
	if (!restart)
		pid_list_note(m->others, &m->nothers, &m->others_more, m->pid);
	m->pid = pid;
	m->gone = false;
	return restart ? MARK_RESTART : MARK_TAKEN;
}

void step_mark(struct engine *e, int src, int kind, uint64_t number, uint64_t t, uint32_t tid)
{
	e->source_marks[src]++;
	if (e->forced_source && src != e->forced_source)
		return;
	if (e->step_source && src != e->step_source) {
		if (source_preference(src) >= source_preference(e->step_source))
			return;
		/* a better source turned up: the step in progress was cut by the change */
		if (e->current_step)
			step_end(e, t, true);
		/* its numbers start anew: no step went back */
		e->number_seen = false;
	}
	e->step_source = src;
	if (kind == MARK_END) {
		/* begin/end sources: the time between an end and the next begin is no step's */
		step_end(e, t, false);
		return;
	}
	step_begin(e, t, number, tid);
}

void candidate_add(struct engine *e, struct thread *t)
{
	if (t->candidate >= 0 || e->ncandidates >= CANDIDATES_MAX || t->sink)
		return;
	t->candidate = e->ncandidates;
	e->candidates[e->ncandidates++] = t;
	for (uint32_t i = 0; i < e->npieces; i++)
		accum_reset(&e->pieces[(e->pieces_head + i) % e->pieces_cap]->accum[t->candidate]);
	/* what it has been doing since its last state change counts from now on */
	t->last_cut = e->now;
	if (e->gap_open && e->current_piece && t->state != TS_UNKNOWN)
		t->last_cut = max64(e->current_piece->start, min64(t->since, e->now));
	t->noverlays = 0;
	t->nbursts = 0;
	t->nirqb = 0;
	t->fault_open = false;
}
