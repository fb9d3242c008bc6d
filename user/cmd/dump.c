// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * stepblame dump FILE: every record of a trace file, one line each, as text or
 * JSON lines. Output goes through one large buffer and hand-rolled number
 * formatting: a capture can hold tens of millions of records.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cmds.h"
#include "format/gpu.h"
#include "format/trace.h"
#include "base/json.h"
#include "base/util.h"

#define USAGE "usage: stepblame dump FILE [--format text|jsonl] [--abs] [--limit N]"

static const char help_text[] =
USAGE "\n"
"\n"
"Print every record of a trace file written by `stepblame record`, one per line,\n"
"to inspect what was captured.\n"
"\n"
"  -f, --format FMT  text (default) or jsonl: one JSON object per line, first the\n"
"               file header (\"type\":\"header\"), then the records, last the\n"
"               trailer; \"ts\" is CLOCK_MONOTONIC ns (--jsonl is the same)\n"
"  --abs        text: times as raw CLOCK_MONOTONIC ns instead of seconds since\n"
"               the capture started (the time in the file header)\n"
"  --limit N    stop after N records\n"
"  -h, --help   this text\n"
"\n"
"Text lines are TIME cpuN PID/TID TYPE key=value..., for example\n"
"        1.204518713 cpu3 4412/4415 switch_out state=runnable prev_state=0x0 next=hog[977/977]\n"
"Durations are dur_ns=; pointers and addresses are hex; names of threads are\n"
"printed with odd bytes as \\xNN, free text in double quotes.\n"
"\n"
"Exit status: 0 when the file was read to its end, and also when it was cut short\n"
"(an interrupted capture: everything before the cut is shown and a warning goes\n"
"to stderr); 1 when the file cannot be opened, is not a trace, or is corrupt\n"
"(the records before the corruption are shown, then one error line); 2 on a\n"
"usage error.\n";

/* ---- output ---- */

static char obuf[1 << 18];
static size_t olen;
static int oerr;

static void oflush(void)
{
	size_t at = 0;
	ssize_t n;

	while (at < olen && !oerr) {
		n = write(STDOUT_FILENO, obuf + at, olen - at);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			oerr = n < 0 ? errno : EIO;
		else
			at += n;
	}
	olen = 0;
}

static inline void ochar(char c)
{
	if (olen == sizeof(obuf))
		oflush();
	obuf[olen++] = c;
}

static void omem(const void *p, size_t n)
{
	const char *s = p;
	size_t k;

	while (n) {
		if (olen == sizeof(obuf))
			oflush();
		k = sizeof(obuf) - olen;
		if (k > n)
			k = n;
		memcpy(obuf + olen, s, k);
		olen += k;
		s += k;
		n -= k;
	}
}

static inline void ostr(const char *s)
{
	omem(s, strlen(s));
}

static void ou64(uint64_t v)
{
	char t[24];
	int i = sizeof(t);

	do {
		t[--i] = '0' + v % 10;
		v /= 10;
	} while (v);
	omem(t + i, sizeof(t) - i);
}

static void oi64(int64_t v)
{
	if (v < 0) {
		ochar('-');
		ou64(-(uint64_t)v);
	} else {
		ou64(v);
	}
}

static void ohex(uint64_t v)
{
	char t[18];
	int i = sizeof(t);

	do {
		t[--i] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	t[--i] = 'x';
	t[--i] = '0';
	omem(t + i, sizeof(t) - i);
}

enum esc { ESC_BARE, ESC_QUOTED, ESC_JSON };

static void oxbyte(unsigned c)
{
	char t[4] = { '\\', 'x', "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15] };

	omem(t, 4);
}

/*
 * A string of any bytes. BARE: a text-mode token (no spaces or quotes), QUOTED:
 * text-mode "...", JSON: a JSON string body (json_escape_one(), the policy of
 * every JSON stepblame writes). Valid UTF-8 passes through, but for the C1
 * controls and the bidirectional overrides and isolates (utf8_printable());
 * any other byte becomes \xNN in text.
 */
static void oesc(const void *p, size_t n, enum esc mode)
{
	const unsigned char *s = p;
	size_t i, k;
	unsigned c;

	if (mode == ESC_JSON) {
		char e[JSON_ESC_MAX];

		for (i = 0; i < n; i += k)
			omem(e, json_escape_one(e, (const char *)s + i, n - i, &k));
		return;
	}
	for (i = 0; i < n; i++) {
		c = s[i];
		if (c >= 0x80) {
			k = utf8_printable(s + i, n - i);
			if (k) {
				omem(s + i, k);
				i += k - 1;
			} else {
				oxbyte(c);
			}
			continue;
		}
		if (c > 0x20 && c < 0x7f && c != '"' && c != '\\') {
			ochar(c);
			continue;
		}
		if (mode == ESC_BARE) {
			if (c == '\\')
				ostr("\\\\");
			else
				oxbyte(c);
			continue;
		}
		switch (c) {
		case ' ': ochar(' '); break;
		case '"': ostr("\\\""); break;
		case '\\': ostr("\\\\"); break;
		case '\n': ostr("\\n"); break;
		case '\t': ostr("\\t"); break;
		case '\r': ostr("\\r"); break;
		default:
			oxbyte(c);
		}
	}
}

/* ---- kernel-name table for GPU records: SB_REC_STRING id -> text, bounded ---- */

#define ST_MAX_ENTRIES (1u << 20)
#define ST_MAX_BYTES (64u << 20)

static struct {
	uint32_t *id;     /* open addressing; 0 = empty slot */
	uint32_t *off, *len;
	size_t slots, n;
	char *arena;
	size_t alen, acap;
} st;

static size_t st_slot(uint32_t id)
{
	size_t i = (id * 0x9e3779b1u) & (st.slots - 1);

	while (st.id[i] && st.id[i] != id)
		i = (i + 1) & (st.slots - 1);
	return i;
}

static bool st_grow(void)
{
	size_t old = st.slots, i, j, slots = old ? old * 2 : 1024;
	uint32_t *id = calloc(slots, sizeof(*id));
	uint32_t *off = malloc(slots * sizeof(*off));
	uint32_t *len = malloc(slots * sizeof(*len));
	uint32_t *oid = st.id, *ooff = st.off, *olen_ = st.len;

	if (!id || !off || !len) {
		free(id);
		free(off);
		free(len);
		return false;
	}
	st.id = id;
	st.off = off;
	st.len = len;
	st.slots = slots;
	for (i = 0; i < old; i++) {
		if (!oid[i])
			continue;
		j = st_slot(oid[i]);
		st.id[j] = oid[i];
		st.off[j] = ooff[i];
		st.len[j] = olen_[i];
	}
	free(oid);
	free(ooff);
	free(olen_);
	return true;
}

/* names past the bounds stay unresolved: the dump shows their id only */
static void st_put(uint32_t id, const char *s, uint32_t n)
{
	size_t i;

	if (!id || st.alen + n > ST_MAX_BYTES)
		return;
	if ((st.n + 1) * 2 > st.slots && (st.n >= ST_MAX_ENTRIES || !st_grow()))
		return;
	if (st.alen + n > st.acap) {
		size_t cap = st.acap ? st.acap : 1 << 16;
		char *a;

		while (cap < st.alen + n)
			cap *= 2;
		if (cap > ST_MAX_BYTES)
			cap = ST_MAX_BYTES;
		a = realloc(st.arena, cap);
		if (!a)
			return;
		st.arena = a;
		st.acap = cap;
	}
	if (n) /* an empty name may come first, before there is an arena */
		memcpy(st.arena + st.alen, s, n);
	i = st_slot(id);
	if (!st.id[i])
		st.n++;
	st.id[i] = id;
	st.off[i] = st.alen;
	st.len[i] = n;
	st.alen += n;
}

static bool st_get(uint32_t id, const char **s, uint32_t *n)
{
	size_t i;

	if (!id || !st.slots)
		return false;
	i = st_slot(id);
	if (!st.id[i])
		return false;
	*s = st.arena + st.off[i];
	*n = st.len[i];
	return true;
}

static void st_free(void)
{
	free(st.id);
	free(st.off);
	free(st.len);
	free(st.arena);
	memset(&st, 0, sizeof(st));
}

/* ---- fields: " key=value" in text, ",\"key\":value" in JSON ---- */

static bool json, abs_time;
static uint64_t time_base;

static void key(const char *k)
{
	if (json) {
		ostr(",\"");
		ostr(k);
		ostr("\":");
	} else {
		ochar(' ');
		ostr(k);
		ochar('=');
	}
}

static void key2(const char *prefix, const char *k)
{
	if (json) {
		ostr(",\"");
		ostr(prefix);
		ochar('_');
		ostr(k);
		ostr("\":");
	} else {
		ochar(' ');
		ostr(prefix);
		ochar('_');
		ostr(k);
		ochar('=');
	}
}

static void f_u(const char *k, uint64_t v)
{
	key(k);
	ou64(v);
}

static void f_i(const char *k, int64_t v)
{
	key(k);
	oi64(v);
}

/* JSON numbers lose precision past 2^53: addresses are hex strings */
static void f_hex(const char *k, uint64_t v)
{
	key(k);
	if (json)
		ochar('"');
	ohex(v);
	if (json)
		ochar('"');
}

/* an enum: its name, or its number (as a string in JSON) when it has none */
static void f_enum(const char *k, const char *name, uint64_t raw)
{
	key(k);
	if (json)
		ochar('"');
	if (name && strcmp(name, "unknown"))
		ostr(name);
	else
		ou64(raw);
	if (json)
		ochar('"');
}

static void ostring(const char *s, size_t n, enum esc text_mode)
{
	if (json) {
		ochar('"');
		oesc(s, n, ESC_JSON);
		ochar('"');
	} else if (text_mode == ESC_QUOTED) {
		ochar('"');
		oesc(s, n, ESC_QUOTED);
		ochar('"');
	} else {
		/* an empty bare token would read as a missing value */
		if (!n)
			ostr("\"\"");
		oesc(s, n, ESC_BARE);
	}
}

static void f_comm(const char *k, const char *comm)
{
	key(k);
	ostring(comm, strnlen(comm, SB_COMM_LEN), ESC_BARE);
}

static void f_text(const char *k, const char *s, size_t n)
{
	key(k);
	ostring(s, n, ESC_QUOTED);
}

/* another task: "next=comm[pid/tid]" in text, next_comm/next_pid/next_tid in JSON */
static void f_task(const char *k, const char *comm, uint32_t pid, uint32_t tid)
{
	if (json) {
		key2(k, "comm");
		ostring(comm, strnlen(comm, SB_COMM_LEN), ESC_BARE);
		key2(k, "pid");
		ou64(pid);
		key2(k, "tid");
		ou64(tid);
		return;
	}
	key(k);
	ostring(comm, strnlen(comm, SB_COMM_LEN), ESC_BARE);
	ochar('[');
	ou64(pid);
	ochar('/');
	ou64(tid);
	ochar(']');
}

/* an interval ending at end: dur_ns in text, start_ns and dur_ns in JSON */
static void f_span(uint64_t start, uint64_t end)
{
	if (json)
		f_u("start_ns", start);
	f_i("dur_ns", (int64_t)(end - start));
}

/* the time column, right-aligned in 17 characters */
static void otime(uint64_t ts)
{
	char t[40];
	int i = sizeof(t), k;
	uint64_t a = ts;
	bool neg = false;

	if (!abs_time && !ts) {
		t[--i] = '-';
	} else {
		if (!abs_time) {
			int64_t d = (int64_t)(ts - time_base);

			neg = d < 0;
			a = neg ? -(uint64_t)d : (uint64_t)d;
			for (k = 0; k < 9; k++, a /= 10)
				t[--i] = '0' + a % 10;
			t[--i] = '.';
		}
		do {
			t[--i] = '0' + a % 10;
			a /= 10;
		} while (a);
		if (neg)
			t[--i] = '-';
	}
	while (i > (int)sizeof(t) - 17)
		t[--i] = ' ';
	omem(t + i, sizeof(t) - i);
}

static void line_start(const struct sb_hdr *h)
{
	if (json) {
		ostr("{\"ts\":");
		ou64(h->ts);
		ostr(",\"type\":\"");
		ostr(sb_type_name(h->type));
		ostr("\",\"cpu\":");
		ou64(h->cpu);
		ostr(",\"pid\":");
		ou64(h->pid);
		ostr(",\"tid\":");
		ou64(h->tid);
		ostr(",\"flags\":");
		ou64(h->flags);
		return;
	}
	otime(h->ts);
	ostr(" cpu");
	ou64(h->cpu);
	ochar(' ');
	ou64(h->pid);
	ochar('/');
	ou64(h->tid);
	ochar(' ');
	ostr(sb_type_name(h->type));
}

static void line_end(void)
{
	if (json)
		ochar('}');
	ochar('\n');
}

/* ---- names of field values only dump shows (the shared ones: format/trace.h) ---- */

#define NAME(arr, i) ((i) < ARRAY_SIZE(arr) ? (arr)[i] : NULL)

static const char *const wait_reason_names[] = { "none", "preempted", "woken", "throttled" };
static const char *const reclaim_names[] = { NULL, "direct", "memcg", "compact" };
static const char *const step_src_names[] = { NULL, "usdt", "uprobe", "gpu_marker" };
static const char *const cuda_fn_names[] = { NULL, "launch", "sync", "alloc", "free", "memcpy" };
static const char *const gpu_kind_names[] = { NULL, "kernel", "memcpy", "memset", "api", "sync",
					      "marker", "overhead" };
static const char *const gpu_api_names[] = { NULL, "launch", "sync", "alloc", "free", "memcpy",
					     "other" };
static const char *const gpu_mark_names[] = { NULL, "step_begin", "step_end", "range_push",
					      "range_pop", "instant" };
static const char *const gpu_copy_names[] = { NULL, "htod", "dtoh", "dtod", "htoh", "peer",
					      "other" };

/* each table names every value of its enum (bpf/events.h, format/gpu.h) */
_Static_assert(ARRAY_SIZE(wait_reason_names) == SB_WAIT_THROTTLED + 1, "wait reasons");
_Static_assert(ARRAY_SIZE(reclaim_names) == SB_RECLAIM_COMPACT + 1, "reclaim kinds");
_Static_assert(ARRAY_SIZE(step_src_names) == SB_STEP_GPU_MARKER + 1, "step sources");
_Static_assert(ARRAY_SIZE(cuda_fn_names) == SB_CU_MEMCPY + 1, "CUDA functions");
_Static_assert(ARRAY_SIZE(gpu_kind_names) == SB_GPU_OVERHEAD + 1, "GPU record kinds");
_Static_assert(ARRAY_SIZE(gpu_api_names) == SB_API_OTHER + 1, "GPU API calls");
_Static_assert(ARRAY_SIZE(gpu_mark_names) == SB_MARK_INSTANT + 1, "GPU markers");
_Static_assert(ARRAY_SIZE(gpu_copy_names) == SB_COPY_OTHER + 1, "GPU copy kinds");

/*
 * ---- records: one printer per struct of SB_RECORD_TYPES (bpf/events.h),
 * print_<struct>, the fields after the common ones ----
 */

static void print_sb_switch_out(const struct sb_hdr *h)
{
	const struct sb_switch_out *e = (const void *)h;

	f_enum("state", sb_state_name(e->state), e->state);
	f_hex("prev_state", e->prev_state);
	if (e->throttled)
		f_u("throttled", e->throttled);
	f_task("next", e->next_comm, e->next_pid, e->next_tid);
}

static void print_sb_switch_in(const struct sb_hdr *h)
{
	const struct sb_switch_in *e = (const void *)h;

	f_u("wait_ns", e->wait_ns);
	f_enum("wait_reason", NAME(wait_reason_names, e->wait_reason), e->wait_reason);
	f_task("prev", e->prev_comm, e->prev_pid, e->prev_tid);
}

static void print_sb_runslice(const struct sb_hdr *h)
{
	const struct sb_runslice *e = (const void *)h;

	f_comm("comm", e->comm);
	f_span(e->start_ns, h->ts);
	f_u("nwaiting", e->nwaiting);
	f_u("steal_us", e->steal_us);
}

static void print_sb_wakeup(const struct sb_hdr *h)
{
	const struct sb_wakeup *e = (const void *)h;

	f_task("waker", e->waker_comm, e->waker_pid, e->waker_tid);
	f_u("waker_cpu", e->waker_cpu);
	f_u("is_new", e->is_new);
	if (e->throttled)
		f_u("throttled", e->throttled);
}

static void print_sb_migrate(const struct sb_hdr *h)
{
	const struct sb_migrate *e = (const void *)h;

	f_u("orig_cpu", e->orig_cpu);
	f_u("dest_cpu", e->dest_cpu);
	f_u("orig_node", e->orig_node);
	f_u("dest_node", e->dest_node);
}

static void print_sb_fault(const struct sb_hdr *h)
{
	const struct sb_fault *e = (const void *)h;

	f_hex("addr", e->addr);
	f_hex("ip", e->ip);
	f_hex("error_code", e->error_code);
	f_u("maj_flt", e->maj_flt);
	f_u("min_flt", e->min_flt);
	if (h->flags & SB_FAULT_MAJOR)
		f_enum("kind", "major", 0);
	else if (h->flags & SB_FAULT_MINOR)
		f_enum("kind", "minor", 0);
}

static void print_sb_fault_run(const struct sb_hdr *h)
{
	const struct sb_fault_run *e = (const void *)h;

	f_span(e->start_ns, h->ts);
	f_u("count", e->count);
	f_hex("addr", e->addr);
	f_hex("last_addr", e->last_addr);
	f_hex("lo_addr", e->lo_addr);
	f_hex("hi_addr", e->hi_addr);
	f_hex("ip", e->ip);
	f_hex("error_code", e->error_code);
	f_u("first_maj_flt", e->first_maj_flt);
	f_u("first_min_flt", e->first_min_flt);
	f_u("maj_flt", e->maj_flt);
	f_u("min_flt", e->min_flt);
}

static void print_sb_sched_run(const struct sb_hdr *h)
{
	const struct sb_sched_run *e = (const void *)h;

	f_span(e->start_ns, h->ts);
	f_u("sleeps", e->sleeps);
	f_u("preempts", e->preempts);
	f_u("sleep_ns", e->sleep_ns);
	f_u("wait_ns", e->wait_ns);
	f_u("idle_wait_ns", e->idle_wait_ns);
	f_u("steal_ns", e->steal_ns);
	f_u("max_ns", e->max_ns);
	f_task("waker", e->waker_comm, e->waker_pid, e->waker_tid);
	f_task("runner", e->runner_comm, e->runner_pid, e->runner_tid);
}

/* "NAME_ns=N" for each nonzero ns[i], NAME lower-cased name(i): "net_rx_ns", "local_timer_ns" */
static void f_ns_by_name(const uint32_t *ns, unsigned n, const char *(*name)(unsigned))
{
	char k[32];

	for (unsigned i = 0; i < n; i++) {
		if (!ns[i])
			continue;
		snprintf(k, sizeof(k), "%s_ns", name(i));
		for (char *c = k; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		f_u(k, ns[i]);
	}
}

static void print_sb_irq_run(const struct sb_hdr *h)
{
	const struct sb_irq_run *e = (const void *)h;

	f_span(e->start_ns, h->ts);
	f_u("hard_ns", e->hard_ns);
	f_u("hard_count", e->hard_count);
	f_u("soft_ns", e->soft_ns);
	f_u("soft_count", e->soft_count);
	f_ns_by_name(e->vec_ns, SB_NSOFTIRQ, sb_softirq_name);
	if (e->hard_count) {
		f_u("hard_irq", e->hard_irq);
		f_comm("hard_name", e->hard_name);
	}
	f_u("sys_count", e->sys_count);
	f_ns_by_name(e->sys_ns, SB_NSYSIRQ, sb_sysirq_name);
}

static void print_sb_reclaim(const struct sb_hdr *h)
{
	const struct sb_reclaim *e = (const void *)h;

	f_enum("kind", NAME(reclaim_names, e->kind), e->kind);
	f_span(e->start_ns, h->ts);
	f_u("result", e->result);
}

static void print_mmsys_map(const struct sb_hdr *h);

static void print_sb_mmsys(const struct sb_hdr *h)
{
	const struct sb_mmsys *e = (const void *)h;

	f_enum("call", sb_mmsys_name(e->call), e->call);
	f_hex("addr", e->addr);
	f_u("len", e->len);
	f_i("ret", e->ret);
	f_hex("arg", e->arg);
	f_span(e->start_ns, h->ts);
	print_mmsys_map(h);
}

/* what an mmap record mapped, when it says (struct sb_mmsys_map) */
static void print_mmsys_map(const struct sb_hdr *h)
{
	const struct sb_mmsys_map *m = sb_mmsys_map_of(h);
	char path[2 * SB_IO_PATH_LEN];
	size_t n;

	if (!m)
		return;
	f_hex("flags", m->flags);
	f_i("fd", m->fd);
	f_enum("file", sb_file_kind_name(m->file.kind), m->file.kind);
	n = sb_iosys_file_path(&m->file, path, sizeof(path));
	if (n)
		f_text("path", path, n);
}

static void print_sb_alloc(const struct sb_hdr *h)
{
	const struct sb_alloc *e = (const void *)h;

	f_enum("fn", sb_alloc_fn_name(e->fn), e->fn);
	f_u("size", e->size);
	f_hex("ptr", e->ptr);
	f_u("floor_ns", e->floor_ns);
	f_span(e->start_ns, h->ts);
}

static void print_sb_alloc_burst(const struct sb_hdr *h)
{
	const struct sb_alloc_burst *e = (const void *)h;

	f_u("calls", e->calls);
	f_u("sum_ns", e->sum_ns);
	f_u("bytes", e->bytes);
	f_span(e->start_ns, h->ts);
	/* who emitted it: the thread itself, or the agent's periodic flush */
	f_enum("ended_by", h->flags & SB_ALLOC_BURST_FLUSHED ? "agent" : "thread", 0);
}

static void print_sb_iosys(const struct sb_hdr *h)
{
	const struct sb_iosys *e = (const void *)h;

	f_enum("call", sb_io_name(e->call), e->call);
	f_i("fd", e->fd);
	f_u("len", e->len);
	f_i("ret", e->ret);
	f_span(e->start_ns, h->ts);
	{
		const struct sb_iosys_file *fl = sb_iosys_file_of(h);
		char path[2 * SB_IO_PATH_LEN];
		size_t n;

		if (!fl)
			return; /* an older trace's record: no file */
		f_enum("file", sb_file_kind_name(fl->kind), fl->kind);
		f_u("ino", fl->ino);
		f_hex("dev", fl->dev);
		f_u("written", fl->written);
		n = sb_iosys_file_path(fl, path, sizeof(path));
		if (n)
			f_text("path", path, n);
	}
}

static void print_sb_affinity(const struct sb_hdr *h)
{
	const struct sb_affinity *e = (const void *)h;

	f_u("pid", e->pid);
	f_i("ret", e->ret);
	f_span(e->start_ns, h->ts);
}

static void print_sb_stack(const struct sb_hdr *h)
{
	const struct sb_stack *e = (const void *)h;
	uint32_t n = e->nframes < SB_STACK_MAX ? e->nframes : SB_STACK_MAX;

	f_enum("event", sb_type_name(e->ev_type), e->ev_type);
	f_span(e->ev_start_ns, h->ts);
	if (h->flags & SB_STACK_TRUNCATED)
		f_u("truncated", 1);
	/* innermost first: text a comma list, JSON an array of hex strings */
	key("frames");
	if (json)
		ochar('[');
	for (uint32_t i = 0; i < n; i++) {
		if (i)
			ochar(',');
		if (json)
			ochar('"');
		ohex(e->ip[i]);
		if (json)
			ochar('"');
	}
	if (json)
		ochar(']');
	else if (!n)
		ostr("\"\"");
}

static void print_sb_step(const struct sb_hdr *h)
{
	const struct sb_step *e = (const void *)h;
	const struct sb_step_alloc *a = sb_step_alloc_of(h);

	f_u("step", e->step);
	f_enum("source", NAME(step_src_names, e->source), e->source);
	if (a)
		f_u("fast_calls", a->fast_calls);
}

/* thread_new and thread_exit */
static void print_sb_thread(const struct sb_hdr *h)
{
	const struct sb_thread *e = (const void *)h;

	if (h->type == SB_EV_THREAD_NEW || json)
		f_u("parent_tid", e->parent_tid);
	/* older traces leave it 0: printed only when said */
	if (e->parent_pid)
		f_u("parent_pid", e->parent_pid);
	f_comm("comm", e->comm);
}

static void print_sb_rename(const struct sb_hdr *h)
{
	const struct sb_rename *e = (const void *)h;

	f_comm("oldcomm", e->oldcomm);
	f_comm("newcomm", e->newcomm);
}

static void print_sb_cuda(const struct sb_hdr *h)
{
	const struct sb_cuda *e = (const void *)h;

	f_enum("fn", NAME(cuda_fn_names, e->fn), e->fn);
	f_u("sym", e->sym);
	f_span(e->start_ns, h->ts);
}

/* every text type */
static void print_sb_text(const struct sb_hdr *h)
{
	const struct sb_text *e = (const void *)h;

	if (h->type == SB_REC_STRING) {
		st_put(e->id, e->text, e->len);
		f_u("id", e->id);
	} else if (h->type == SB_REC_PROBE) {
		f_u("attached", e->id);
	} else if (e->id || json) {
		f_u("id", e->id);
	}
	f_text("text", e->text, e->len);
}

static void print_sb_cpu(const struct sb_hdr *h)
{
	const struct sb_cpu *e = (const void *)h;

	f_u("node", e->node);
	f_u("online", e->online);
}

static void print_sb_alloc_stats(const struct sb_hdr *h)
{
	const struct sb_alloc_stats *a = (const void *)h;
	unsigned i;

	if (json) {
		ostr(",\"calls\":{");
		for (i = 0; i < SB_FN_MAX; i++) {
			if (i)
				ochar(',');
			ochar('"');
			ostr(sb_alloc_fn_name(i));
			ostr("\":");
			ou64(a->calls[i]);
		}
		ostr("},\"ns\":{");
		for (i = 0; i < SB_FN_MAX; i++) {
			if (i)
				ochar(',');
			ochar('"');
			ostr(sb_alloc_fn_name(i));
			ostr("\":");
			ou64(a->ns[i]);
		}
		ochar('}');
		return;
	}
	/* text: calls/summed-ns, only the functions that were called */
	for (i = 0; i < SB_FN_MAX; i++) {
		if (!a->calls[i] && !a->ns[i])
			continue;
		key(sb_alloc_fn_name(i));
		ou64(a->calls[i]);
		ochar('/');
		ou64(a->ns[i]);
		ostr("ns");
	}
}

static void print_sb_drops(const struct sb_hdr *h)
{
	const struct sb_drops *d = (const void *)h;
	uint64_t total = 0;
	unsigned i;
	bool first = true;

	for (i = 0; i <= SB_EV_KERNEL_MAX; i++)
		total += d->ring[i];
	f_u("ring_total", total);
	if (json)
		ostr(",\"ring\":{");
	for (i = 0; i <= SB_EV_KERNEL_MAX; i++) {
		if (!d->ring[i])
			continue;
		if (json) {
			if (!first)
				ochar(',');
			ochar('"');
			ostr(sb_type_name(i));
			if (!strcmp(sb_type_name(i), "unknown"))
				ou64(i);
			ostr("\":");
			ou64(d->ring[i]);
		} else {
			ostr(" ring_");
			ostr(sb_type_name(i));
			if (!strcmp(sb_type_name(i), "unknown"))
				ou64(i);
			ochar('=');
			ou64(d->ring[i]);
		}
		first = false;
	}
	if (json)
		ochar('}');
	f_u("gpu_channel", d->gpu_channel);
	f_u("gpu_source", d->gpu_source);
	f_u("wait_overflow", d->wait_overflow);
}

static void print_sb_gpu(const struct sb_hdr *h)
{
	const struct sb_gpu *g = (const void *)h;
	unsigned kind = g->h.flags;
	const char *name;
	uint32_t nlen;

	f_enum("kind", NAME(gpu_kind_names, kind), kind);
	switch (kind) {
	case SB_GPU_API: f_enum("api", NAME(gpu_api_names, g->sub), g->sub); break;
	case SB_GPU_MARKER: f_enum("mark", NAME(gpu_mark_names, g->sub), g->sub); break;
	case SB_GPU_MEMCPY: f_enum("copy", NAME(gpu_copy_names, g->sub), g->sub); break;
	default:
		if (g->sub || json)
			f_u("sub", g->sub);
	}
	if (json)
		f_u("end_ns", g->end_ns);
	f_i("dur_ns", (int64_t)(g->end_ns - g->h.ts));
	if (kind == SB_GPU_MARKER)
		f_u("step", g->bytes);
	else if (g->bytes || json)
		f_u("bytes", g->bytes);
	f_u("correlation_id", g->correlation_id);
	f_u("device", g->device);
	f_u("stream", g->stream);
	f_u("name_id", g->name_id);
	if (st_get(g->name_id, &name, &nlen))
		f_text("name", name, nlen);
	if (json) {
		f_u("graph_id", g->graph_id);
		f_u("graph_node_id", g->graph_node_id);
		ostr(",\"grid\":[");
		ou64(g->grid[0]); ochar(','); ou64(g->grid[1]); ochar(','); ou64(g->grid[2]);
		ostr("],\"block\":[");
		ou64(g->block[0]); ochar(','); ou64(g->block[1]); ochar(','); ou64(g->block[2]);
		ochar(']');
		return;
	}
	if (g->graph_id || g->graph_node_id) {
		f_u("graph_id", g->graph_id);
		f_u("graph_node_id", g->graph_node_id);
	}
	if (kind == SB_GPU_KERNEL || g->grid[0] || g->block[0]) {
		key("grid");
		ou64(g->grid[0]); ochar('x'); ou64(g->grid[1]); ochar('x'); ou64(g->grid[2]);
		key("block");
		ou64(g->block[0]); ochar('x'); ou64(g->block[1]); ochar('x'); ou64(g->block[2]);
	}
}

static void print_sb_trailer(const struct sb_hdr *h)
{
	const struct sb_trailer *tr = (const void *)h;
	uint64_t total = 0;
	unsigned i;
	bool first = true;

	for (i = 0; i < SB_TYPE_MAX; i++)
		total += tr->records[i];
	f_enum("end_reason", sbt_end_name(tr->end_reason), tr->end_reason);
	if (json)
		f_u("start_ns", tr->start_ns);
	else
		f_i("dur_ns", (int64_t)(tr->h.ts - tr->start_ns));
	f_u("drops_total", tr->drops_total);
	f_u("records", total);
	if (json)
		ostr(",\"by_type\":{");
	for (i = 0; i < SB_TYPE_MAX; i++) {
		if (!tr->records[i])
			continue;
		if (json) {
			if (!first)
				ochar(',');
			ochar('"');
			ostr(sb_type_name(i));
			ostr("\":");
		} else {
			ochar(' ');
			ostr(sb_type_name(i));
			ochar('=');
		}
		ou64(tr->records[i]);
		first = false;
	}
	if (json)
		ochar('}');
}

/* the printer of each type, from its struct */
#define PRINTER(e, id, name, st, start, cost, kind) [id] = print_##st,
static void (*const printers[SB_TYPE_MAX])(const struct sb_hdr *h) = {
	SB_RECORD_TYPES(PRINTER)
};

static void print_record(const struct sb_hdr *h)
{
	line_start(h);
	if (h->type < SB_TYPE_MAX && printers[h->type])
		printers[h->type](h);
	line_end();
}

static void print_file_header(const struct sbt_file_hdr *fh, bool zstd)
{
	char when[64] = "?";
	time_t secs = (time_t)(fh->created_realtime_ns / 1000000000u);
	struct tm tm;

	if (json) {
		ostr("{\"type\":\"header\",\"version\":");
		ou64(fh->version);
		ostr(",\"hdr_size\":");
		ou64(fh->hdr_size);
		ostr(",\"clock\":\"monotonic\",\"created_realtime_ns\":");
		ou64(fh->created_realtime_ns);
		ostr(",\"created_mono_ns\":");
		ou64(fh->created_mono_ns);
		ostr(zstd ? ",\"compression\":\"zstd\"}\n" : ",\"compression\":\"none\"}\n");
		return;
	}
	if (gmtime_r(&secs, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	ostr("# stepblame trace version ");
	ou64(fh->version);
	ostr(zstd ? " (zstd-compressed), created " : ", created ");
	ostr(when);
	ochar('.');
	{
		char ns[16];

		snprintf(ns, sizeof(ns), "%09" PRIu64, fh->created_realtime_ns % 1000000000u);
		ostr(ns);
	}
	ostr("Z at CLOCK_MONOTONIC ");
	ou64(fh->created_mono_ns);
	ostr(abs_time ? " ns; times: CLOCK_MONOTONIC ns\n" :
		 " ns; times: seconds since then\n");
}

static int usage_error(const char *fmt, const char *arg)
{
	fputs("stepblame: dump: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs(" (" USAGE ")\n", stderr);
	return 2;
}

int cmd_dump(int argc, char **argv)
{
	const char *path = NULL;
	uint64_t limit = UINT64_MAX, n = 0;
	struct sbt_reader *r;
	const struct sb_hdr *h;
	enum sbt_status s = SBT_OK;
	char err[512];
	bool opts = true;
	int i, rc = 0;

	json = abs_time = false;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (opts && (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
			fputs(help_text, stdout);
			return 0;
		} else if (opts && !strcmp(a, "--jsonl")) {
			json = true;
		} else if (opts && (!strcmp(a, "-f") || !strcmp(a, "--format") ||
				    !strncmp(a, "--format=", 9))) {
			/* the name report uses for the same choice */
			const char *v = a[2] == 'f' && a[8] == '=' ? a + 9 :
					(i + 1 < argc ? argv[++i] : NULL);

			if (!v)
				return usage_error("--format needs text or jsonl%s", "");
			if (!strcmp(v, "jsonl"))
				json = true;
			else if (!strcmp(v, "text"))
				json = false;
			else
				return usage_error("--format is text or jsonl, not '%s'", v);
		} else if (opts && !strcmp(a, "--abs")) {
			abs_time = true;
		} else if (opts && (!strcmp(a, "--limit") || !strncmp(a, "--limit=", 8))) {
			const char *v = a[7] == '=' ? a + 8 : (i + 1 < argc ? argv[++i] : NULL);

			if (!v)
				return usage_error("--limit needs a number%s", "");
			if (!parse_u64(v, &limit))
				return usage_error("--limit needs a number, not '%s'", v);
		} else if (opts && !strcmp(a, "--")) {
			opts = false;
		} else if (opts && a[0] == '-' && a[1]) {
			return usage_error("unknown option '%s'", a);
		} else if (path) {
			return usage_error("one trace file at a time, not also '%s'", a);
		} else {
			path = a;
		}
	}
	if (!path)
		return usage_error("no trace file given%s", "");

	r = sbt_open(path, err, sizeof(err));
	if (!r) {
		sb_err("%s", err);
		return 1;
	}
	olen = 0;
	oerr = 0;
	time_base = sbt_header(r)->created_mono_ns;
	print_file_header(sbt_header(r), sbt_is_zstd(r));
	while (n < limit && !oerr) {
		s = sbt_next(r, &h);
		if (s != SBT_OK)
			break;
		print_record(h);
		n++;
	}
	if (s == SBT_EOF && !oerr)
		print_record(&sbt_trailer(r)->h);
	oflush();
	if (oerr) {
		if (oerr != EPIPE)
			sb_err("cannot write the dump: %s", strerror(oerr));
		rc = 1;
	} else if (s == SBT_TRUNCATED) {
		sb_err("%s was cut short after %" PRIu64 " records (no trailer, at offset %"
			PRIu64 "); everything before is shown", path, n, sbt_offset(r));
	} else if (s == SBT_CORRUPT || s == SBT_IO) {
		sb_err("%s: %s", path, sbt_error(r));
		rc = 1;
	}
	sbt_close(r);
	st_free();
	return rc;
}
