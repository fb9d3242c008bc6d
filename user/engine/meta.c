// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Text records, which take effect when they arrive: the target, thread
 * names, strings (kernel and NVTX names), the tracer's costs, the overhead
 * guard's mode changes, probes that did not attach, drops, the trailer. And
 * the capture's clock that GPU records are judged against.
 */
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"
#include "base/util.h"
#include "format/gpu.h"

#define STRINGS_MAX (1u << 17)
#define STRING_BYTES_MAX (64ull << 20)
#define PROBES_MAX 256

/*
 * Guard records arrive with the agent's records, ahead of the sweep: their
 * mode changes are kept with their times and read back as steps finalise, in
 * order.
 */
#define GUARD_CHANGES_MAX 4096
/* attached windows kept: one a second at most, a day of sampling */
#define GUARD_WINDOWS_MAX 131072

static void guard_record(struct engine *e, uint64_t ts, const char *s, size_t n)
{
	struct sb_guard g;
	int prev = e->guard.known ? e->guard.mode : SB_GUARD_FULL;

	if (!sb_guard_parse(&g, s, n))
		return;
	e->guard.known = true;
	e->guard.mode = g.mode;
	e->guard.limit_ppm = g.limit_ppm;
	e->guard.estimate_ppm = g.estimate_ppm;
	e->guard.duty_ppm = g.duty_ppm;
	e->guard.calls_seen = g.calls_seen;
	e->guard.calls_estimated = g.calls_estimated;
	if (g.estimate_ppm > e->guard.max_estimate_ppm)
		e->guard.max_estimate_ppm = g.estimate_ppm;
	if (g.window_start_ns && g.window_start_ns < g.window_end_ns && g.window_end_ns <= ts &&
	    e->nguard_windows < GUARD_WINDOWS_MAX &&
	    (!e->nguard_windows || g.window_start_ns >= e->guard_windows[e->nguard_windows - 1].e)) {
		if (e->nguard_windows == e->guard_windows_cap) {
			uint32_t nc = e->guard_windows_cap ? 2 * e->guard_windows_cap : 16;
			void *q = realloc(e->guard_windows, nc * sizeof(*e->guard_windows));

			if (q) {
				heap_account(e, (int64_t)((nc - e->guard_windows_cap) *
							  sizeof(*e->guard_windows)));
				e->guard_windows = q;
				e->guard_windows_cap = nc;
			}
		}
		if (e->nguard_windows < e->guard_windows_cap) {
			e->guard_windows[e->nguard_windows].s = g.window_start_ns;
			e->guard_windows[e->nguard_windows].e = g.window_end_ns;
			e->nguard_windows++;
		}
	}
	if (g.mode == prev)
		return;
	e->guard.changes++;
	if (g.mode == SB_GUARD_SAMPLED && !e->guard.first_sampled_ns)
		e->guard.first_sampled_ns = ts;
	if (e->nguard_changes == GUARD_CHANGES_MAX)
		return; /* the last mode then stands for the rest of the capture */
	if (e->nguard_changes == e->guard_changes_cap) {
		uint32_t nc = e->guard_changes_cap ? 2 * e->guard_changes_cap : 16;
		void *q = realloc(e->guard_changes, nc * sizeof(*e->guard_changes));

		if (!q)
			return;
		heap_account(e, (int64_t)((nc - e->guard_changes_cap) * sizeof(*e->guard_changes)));
		e->guard_changes = q;
		e->guard_changes_cap = nc;
	}
	e->guard_changes[e->nguard_changes].ts = ts;
	e->guard_changes[e->nguard_changes].mode = g.mode;
	e->nguard_changes++;
}

bool guard_attached_in(struct engine *e, uint64_t s, uint64_t end)
{
	if (!guard_sampled_in(e, s, end))
		return true;
	while (e->guard_window_next < e->nguard_windows &&
	       e->guard_windows[e->guard_window_next].e < end)
		e->guard_window_next++;
	return e->guard_window_next < e->nguard_windows &&
	       e->guard_windows[e->guard_window_next].s <= s;
}

/* was the guard sampling at any time in [s, end]? steps come in order */
bool guard_sampled_in(struct engine *e, uint64_t s, uint64_t end)
{
	bool any;

	while (e->guard_change_next < e->nguard_changes && e->guard_changes[e->guard_change_next].ts <= s)
		e->guard_mode_before = e->guard_changes[e->guard_change_next++].mode;
	any = e->guard_mode_before == SB_GUARD_SAMPLED;
	for (uint32_t i = e->guard_change_next;
	     !any && i < e->nguard_changes && e->guard_changes[i].ts <= end; i++)
		any = e->guard_changes[i].mode == SB_GUARD_SAMPLED;
	return any;
}

const struct string *string_find(struct engine *e, uint32_t id)
{
	if (!id || !e->string_hash_cap)
		return NULL;
	for (uint32_t i = hash32(id) & (e->string_hash_cap - 1);; i = (i + 1) & (e->string_hash_cap - 1)) {
		uint32_t v = e->string_hash[i];

		if (!v)
			return NULL;
		if (e->strings[v - 1].id == id)
			return &e->strings[v - 1];
	}
}

static void text_of(const struct sb_hdr *h, const char **s, size_t *n, uint32_t *id)
{
	const struct sb_text *t = (const void *)h;
	size_t max = h->size - sizeof(*t);

	*s = t->text;
	*n = t->len < max ? t->len : max;
	*id = t->id;
}

static void string_put(struct engine *e, uint32_t id, const char *s, size_t n)
{
	struct string *x = (struct string *)string_find(e, id);
	uint64_t had = x ? x->alloc : 0;

	/* names a trace may hold: STRINGS_MAX of them, STRING_BYTES_MAX in all; the rest are counted */
	if ((!x && e->nstrings >= STRINGS_MAX) || e->string_bytes - had + n + 1 > STRING_BYTES_MAX) {
		e->strings_dropped++;
		return;
	}
	e->string_bytes += n + 1 - had;
	if (!x) {
		if ((e->nstrings + 1) * 2 > e->string_hash_cap) {
			uint32_t nc = e->string_hash_cap ? e->string_hash_cap * 2 : 256;

			free(e->string_hash);
			heap_account(e, -(int64_t)(e->string_hash_cap * sizeof(uint32_t)));
			e->string_hash = heap_calloc(e, nc, sizeof(uint32_t));
			e->string_hash_cap = nc;
			for (uint32_t i = 0; i < e->nstrings; i++)
				for (uint32_t k = hash32(e->strings[i].id) & (nc - 1);; k = (k + 1) & (nc - 1))
					if (!e->string_hash[k]) {
						e->string_hash[k] = i + 1;
						break;
					}
		}
		heap_grow(e, (void **)&e->strings, &e->strings_cap, e->nstrings + 1, sizeof(*e->strings));
		x = &e->strings[e->nstrings++];
		x->id = id;
		for (uint32_t k = hash32(id) & (e->string_hash_cap - 1);; k = (k + 1) & (e->string_hash_cap - 1))
			if (!e->string_hash[k]) {
				e->string_hash[k] = e->nstrings;
				break;
			}
	} else {
		heap_account(e, -(int64_t)x->alloc);
		free(x->text);
	}
	x->text = heap_strndup(e, s, n);
	x->alloc = (uint32_t)(n + 1);
	x->nvtx = e->has_nvtx && !regexec(&e->re_nvtx, x->text, 0, NULL, 0);
	x->kernel = e->has_kernel && !regexec(&e->re_kernel, x->text, 0, NULL, 0);
	x->api = e->has_api && !regexec(&e->re_api, x->text, 0, NULL, 0);
}

void meta_record(struct engine *e, const struct sb_hdr *h)
{
	const char *s;
	size_t n;
	uint32_t id;
	char buf[64];

	switch (h->type) {
	case SB_REC_TARGET:
		text_of(h, &s, &n, &id);
		if (kv_get(s, n, "pid", buf, sizeof(buf)))
			e->target_pid = (uint32_t)strtoul(buf, NULL, 10);
		else
			e->target_pid = h->pid;
		if (kv_get(s, n, "comm", buf, sizeof(buf))) {
			memset(e->target_comm, 0, sizeof(e->target_comm));
			memcpy(e->target_comm, buf, min64(strlen(buf), SB_COMM_LEN));
		}
		kv_get(s, n, "job", e->identity.job, sizeof(e->identity.job));
		kv_get(s, n, "rank", e->identity.rank, sizeof(e->identity.rank));
		kv_get(s, n, "local_rank", e->identity.local_rank, sizeof(e->identity.local_rank));
		kv_get(s, n, "world_size", e->identity.world_size, sizeof(e->identity.world_size));
		{
			char cmd[1024];

			if (kv_get(s, n, "cmdline", cmd, sizeof(cmd))) {
				if (e->target_cmdline) {
					heap_account(e, -(int64_t)(strlen(e->target_cmdline) + 1));
					free(e->target_cmdline);
				}
				e->target_cmdline = heap_strndup(e, cmd, strlen(cmd));
			}
		}
		break;
	case SB_REC_THREAD: {
		struct thread *t;

		text_of(h, &s, &n, &id);
		t = thread_get(e, h->tid, h->pid);
		memset(t->comm, 0, sizeof(t->comm));
		memcpy(t->comm, s, n < SB_COMM_LEN ? n : SB_COMM_LEN);
		t->comm[strcspn(t->comm, "\n")] = 0;
		/* a descendant's main thread: its parent and command line follow the comm */
		const char *nl = memchr(s, '\n', n);
		size_t kn = nl ? n - (size_t)(nl + 1 - s) : 0;

		/* the keys start after the comm's line (a comm may hold '=') */
		if (nl && h->pid == h->tid && h->pid != e->target_pid &&
		    kv_get(nl + 1, kn, "ppid", buf, sizeof(buf))) {
			char cmd[1024];
			bool has_cmd = kv_get(nl + 1, kn, "cmdline", cmd, sizeof(cmd));

			struct proc_ids ids;
			bool any;

			proc_note(e, h->pid, (uint32_t)strtoul(buf, NULL, 10), has_cmd ? cmd : NULL,
				  has_cmd ? strlen(cmd) : 0, h->ts);
			/* the latest record holds: one without ids clears those of an earlier one */
			memset(&ids, 0, sizeof(ids));
			any = kv_get(nl + 1, kn, "job", ids.job, sizeof(ids.job));
			any |= kv_get(nl + 1, kn, "rank", ids.rank, sizeof(ids.rank));
			any |= kv_get(nl + 1, kn, "local_rank", ids.local_rank, sizeof(ids.local_rank));
			any |= kv_get(nl + 1, kn, "world_size", ids.world_size, sizeof(ids.world_size));
			proc_ids_note(e, h->pid, any ? &ids : NULL);
		}
		break;
	}
	case SB_REC_COSTS:
		text_of(h, &s, &n, &id);
		sb_costs_parse(&e->costs, s, n);
		e->costs_given = true;
		/* a recorder that writes fault runs prices them: its faults' probes are tracer */
		e->fault_tracer_on = kv_get(s, n, sb_cost_key[SB_COST_FAULT_EXT], buf, sizeof(buf));
		if (!e->fault_tracer_on)
			e->costs.ns[SB_COST_FAULT_EXT] = 0;
		/* a recorder that folds scheduler trips prices them (older ones wrote none) */
		if (!kv_get(s, n, sb_cost_key[SB_COST_SCHED_FOLD], buf, sizeof(buf)))
			e->costs.ns[SB_COST_SCHED_FOLD] = 0;
		break;
	case SB_REC_GUARD:
		text_of(h, &s, &n, &id);
		guard_record(e, h->ts, s, n);
		break;
	case SB_REC_HOST:
		text_of(h, &s, &n, &id);
		kv_get(s, n, "hostname", e->identity.host, sizeof(e->identity.host));
		kv_get(s, n, "boot_id", e->identity.boot_id, sizeof(e->identity.boot_id));
		kv_get(s, n, "stepblame_version", e->identity.version, sizeof(e->identity.version));
		if (kv_get(s, n, "clock_realtime_offset_ns", buf, sizeof(buf))) {
			e->identity.realtime_offset_ns = strtoll(buf, NULL, 10);
			e->identity.have_realtime = true;
		}
		if (kv_get(s, n, "agent_pid", buf, sizeof(buf)))
			e->identity.agent_pid = (uint32_t)strtoul(buf, NULL, 10);
		/* a recorder that measured the per-fault cost says so */
		if (!e->opts.fault_cost_ns && kv_get(s, n, "fault_ns", buf, sizeof(buf))) {
			uint64_t v = strtoull(buf, NULL, 10);

			if (v) {
				e->opts.fault_cost_ns = v;
				e->fault_cost = v;
			}
		}
		break;
	case SB_REC_STRING:
		text_of(h, &s, &n, &id);
		if (id)
			string_put(e, id, s, n);
		break;
	case SB_REC_PROBE:
		text_of(h, &s, &n, &id);
		if (!id && e->nprobes_missing >= PROBES_MAX) {
			e->probes_dropped++;
		} else if (!id) {
			char **p = realloc(e->probes_missing, (e->nprobes_missing + 1) * sizeof(*p));

			if (!p)
				abort();
			e->probes_missing = p;
			heap_account(e, sizeof(*p));
			p[e->nprobes_missing++] = heap_strndup(e, s, n);
		}
		break;
	case SB_REC_MAPPING:
	case SB_REC_PERFMAP:
		text_of(h, &s, &n, &id);
		stacks_meta(e, h, s, n);
		if (h->type == SB_REC_MAPPING)
			map_seed_record(e, h, s, n);
		break;
	case SB_REC_DROPS:
		memcpy(&e->drops, h, sizeof(e->drops));
		e->have_drops = true;
		break;
	case SB_REC_TRAILER: {
		const struct sb_trailer *t = (const void *)h;

		e->complete = true;
		e->end_reason = t->end_reason;
		e->trailer_ts = t->h.ts;
		e->trailer_start = t->start_ns;
		break;
	}
	}
}

/*
 * A time the capture's own clock vouches for: a kernel record (its start, too,
 * when it is the first), an agent record, the live clock.
 */
void clock_saw(struct engine *e, uint64_t ts, bool start_too)
{
	if (start_too)
		e->clock_lo = min64(e->clock_lo, ts);
	else if (e->clock_lo > e->clock_hi)
		e->clock_lo = ts;
	e->clock_hi = max64(e->clock_hi, ts);
}

/*
 * A GPU record comes from the trainer (the channel, CUPTI's clock, the
 * producer's clock offset): its times are believed only inside the capture,
 * give or take ENG_GPU_MARGIN_NS. One at 2^64 would otherwise hold the
 * reorder window open for ever (every later record late, the window growing
 * with the input), one at 0 would close gaps that never closed.
 */
bool gpu_time_ok(struct engine *e, const struct sb_gpu *g)
{
	uint64_t lo, hi;

	if (g->end_ns < g->h.ts)
		return false;
	if (e->clock_lo > e->clock_hi)
		return true;
	lo = e->clock_lo > ENG_GPU_MARGIN_NS ? e->clock_lo - ENG_GPU_MARGIN_NS : 0;
	if (g->h.ts < lo)
		return false;
	hi = e->clock_hi < UINT64_MAX - ENG_GPU_MARGIN_NS ? e->clock_hi + ENG_GPU_MARGIN_NS : UINT64_MAX;
	if (g->end_ns <= hi)
		return true;
	if (!e->opts.live)
		return false;
	/* live: the records are drained after they happened, so the clock now bounds them */
	clock_saw(e, mono_ns(), false);
	hi = e->clock_hi + ENG_GPU_MARGIN_NS;
	return g->end_ns <= hi;
}
