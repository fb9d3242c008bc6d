// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The HTML report: one self-contained page (docs/ARCHITECTURE.md, "The HTML
 * report"). The page itself (user/report/html_page.html: markup, styles and the
 * script that draws it) is built into the binary; this file writes the run's
 * data into it as one compact JSON document, in columns, so that 100,000
 * steps stay a few megabytes. Nothing here decides blame: every figure is the
 * engine's, and every sentence the text report's.
 *
 * The data sits inside a <script type="application/octet-stream"> element,
 * gzip-compressed, in base64: the browser parses a fifth of the bytes, and
 * strings from the trace (thread names, file paths: the target's to choose)
 * cannot end the element, base64 having no '<'. The page decompresses it
 * (DecompressionStream) and puts strings into the document as text nodes only.
 *
 * Same engine results, same bytes: nothing depends on the time or the host
 * the report is written on.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "report/report.h"
#include "report/symbols.h"
#include "base/json.h"
#include "base/util.h"

/* the page, split where the data goes (built from html_page.html by the Makefile) */
static const char page[] =
#include "html_page.h"
	;
#define DATA_MARK "<!--stepblame-data-->"

#define MAX_INTERFERERS 16
/*
 * Blame entries a step carries into the page: its largest, and the next
 * ones of at least 1% of the step (the rest are in the text of tail steps)
 */
#define STEP_BLAME_MAX 3
/* tail steps whose text report line the page holds: the longest */
#define TAIL_TEXT_MAX 2000
/* episodes in the page's table: the longest */
#define EPISODES_MAX 1000

/* ---- writing the page around the data ---- */

/* n bytes gzip-compressed (no name, no time: the same bytes give the same bytes); NULL: no memory */
static unsigned char *gzip_of(const char *data, size_t n, size_t *outlen)
{
	z_stream z = { 0 };
	unsigned char *out;
	size_t cap;

	if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK)
		return NULL;
	cap = deflateBound(&z, n) + 64;
	if (!(out = malloc(cap))) {
		deflateEnd(&z);
		return NULL;
	}
	z.next_in = (unsigned char *)data;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	/* in pieces: avail_in is a uInt */
	while (n) {
		uInt k = n > (1u << 30) ? 1u << 30 : (uInt)n;

		z.avail_in = k;
		if (deflate(&z, Z_NO_FLUSH) != Z_OK || z.avail_in == k)
			goto fail;
		n -= k - z.avail_in;
	}
	if (deflate(&z, Z_FINISH) != Z_STREAM_END)
		goto fail;
	*outlen = z.total_out;
	deflateEnd(&z);
	return out;
fail:
	deflateEnd(&z);
	free(out);
	return NULL;
}

static void base64(FILE *f, const unsigned char *p, size_t n)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char q[4];

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
			     (i + 2 < n ? p[i + 2] : 0);

		q[0] = a[v >> 18 & 63];
		q[1] = a[v >> 12 & 63];
		q[2] = i + 1 < n ? a[v >> 6 & 63] : '=';
		q[3] = i + 2 < n ? a[v & 63] : '=';
		fwrite(q, 1, 4, f);
	}
}

/*
 * data (a JSON document) into the page's data element, gzip-compressed and in
 * base64: a fifth of the bytes for the browser to parse, and no '<' (nor any
 * character that could end the element) whatever the trace's strings hold
 */
static int put_data(FILE *f, const char *data, size_t n)
{
	size_t zn;
	unsigned char *z = gzip_of(data, n, &zn);

	if (!z)
		return -ENOMEM;
	fputs("<script type=\"application/octet-stream\" id=\"sb-data\" "
	      "data-encoding=\"gzip+base64\">", f);
	base64(f, z, zn);
	fputs("</script>\n", f);
	free(z);
	return 0;
}

static int write_page(FILE *f, const char *data, size_t n)
{
	const char *mark = strstr(page, DATA_MARK);

	if (!mark)
		return -EINVAL;
	fwrite(page, 1, (size_t)(mark - page), f);
	if (put_data(f, data, n))
		return -ENOMEM;
	fputs(mark + strlen(DATA_MARK), f);
	return ferror(f) ? -EIO : 0;
}

/* ---- a string table: names the steps share, written once ---- */

struct strtab {
	char **s;
	uint32_t n, cap;
	uint32_t *slot;          /* open addressing: index + 1, 0 empty */
	uint32_t nslot;
	bool oom;
};

static uint32_t str_hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

static bool strtab_grow(struct strtab *t)
{
	uint32_t ns = t->nslot ? t->nslot * 2 : 256, *slot = calloc(ns, sizeof(*slot));

	if (!slot)
		return false;
	for (uint32_t i = 0; i < t->n; i++) {
		uint32_t h = str_hash(t->s[i]) & (ns - 1);

		while (slot[h])
			h = (h + 1) & (ns - 1);
		slot[h] = i + 1;
	}
	free(t->slot);
	t->slot = slot;
	t->nslot = ns;
	return true;
}

/* s's index in the table; -1 when out of memory */
static int64_t strtab_id(struct strtab *t, const char *s)
{
	uint32_t h;

	if (t->oom)
		return -1;
	if ((t->n + 1) * 2 > t->nslot && !strtab_grow(t))
		goto oom;
	for (h = str_hash(s) & (t->nslot - 1); t->slot[h]; h = (h + 1) & (t->nslot - 1))
		if (!strcmp(t->s[t->slot[h] - 1], s))
			return t->slot[h] - 1;
	if (t->n == t->cap) {
		uint32_t nc = t->cap ? t->cap * 2 : 64;
		char **ns = realloc(t->s, nc * sizeof(*ns));

		if (!ns)
			goto oom;
		t->s = ns;
		t->cap = nc;
	}
	if (!(t->s[t->n] = strdup(s)))
		goto oom;
	t->slot[h] = t->n + 1;
	return t->n++;
oom:
	t->oom = true;
	return -1;
}

static void strtab_free(struct strtab *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		free(t->s[i]);
	free(t->s);
	free(t->slot);
}

/* ---- the run's data ---- */

static uint64_t us(uint64_t ns)
{
	return (ns + 500) / 1000;
}

/* "comm[id]", or a followed child process by its role */
static void who_label(const struct engine *e, const struct eng_blame *b, char *buf, size_t len)
{
	char c[64], role[128], rc[160];
	const struct eng_who *w = &b->who;
	uint32_t id = w->tid ? w->tid : w->pid;

	report_clean(c, sizeof(c), w->comm);
	if (b->processes > 1)
		report_crowd_name(buf, len, w->comm, b->processes);
	else if (w->tid == w->pid && engine_process_name(e, w->pid, role, sizeof(role)))
		snprintf(buf, len, "%s[%" PRIu32 "], %s", c, id, report_clean(rc, sizeof(rc), role));
	else
		snprintf(buf, len, "%s[%" PRIu32 "]", c, id);
	if (b->cause == ENG_BLOCKED && w->via_tid) {
		size_t l = strlen(buf);

		snprintf(buf + l, len - l, " via %s[%" PRIu32 "]",
			 report_clean(c, sizeof(c), w->via_comm), w->via_tid);
	}
}

/*
 * One column of per-step values: an array, or where most are 0 an object
 * {"n": N, "at": [gap, value, gap, value, ...]} of the others, gap the steps
 * since the one before (the first counted from -1).
 */
static void column(struct jw *w, const struct engine *e, uint64_t lo, uint64_t hi,
		   uint64_t (*val)(const struct eng_step *, int), int arg)
{
	uint64_t nz = 0, last = lo - 1;

	for (uint64_t i = lo; i < hi; i++)
		nz += val(engine_step(e, i), arg) != 0;
	if (nz * 5 >= (hi - lo) * 2) {
		jw_arr(w);
		for (uint64_t i = lo; i < hi; i++)
			jw_u64(w, val(engine_step(e, i), arg));
		jw_arr_end(w);
		return;
	}
	jw_obj(w);
	jw_key(w, "n");
	jw_u64(w, hi - lo);
	jw_key(w, "at");
	jw_arr(w);
	for (uint64_t i = lo; i < hi; i++) {
		uint64_t v = val(engine_step(e, i), arg);

		if (!v)
			continue;
		jw_u64(w, i - last);
		jw_u64(w, v);
		last = i;
	}
	jw_arr_end(w);
	jw_obj_end(w);
}

static uint64_t v_step(const struct eng_step *s, int a) { return s->step; }
static uint64_t v_dur(const struct eng_step *s, int a) { return us(s->duration_ns); }
static uint64_t v_tracer(const struct eng_step *s, int a) { return us(s->tracer_ns); }
static uint64_t v_cause(const struct eng_step *s, int c) { return us(s->cause_ns[c]); }
static uint64_t v_count(const struct eng_step *s, int c) { return s->count[c]; }
static uint64_t v_busy(const struct eng_step *s, int a)
{
	/* per mille of the step */
	return s->duration_ns ? (s->gpu_busy_ns * 1000 + s->duration_ns / 2) / s->duration_ns : 0;
}

/* [[k, column], ...] for each k < n whose column is not all 0 */
static void columns(struct jw *w, const struct engine *e, uint64_t lo, uint64_t hi, int n,
		    uint64_t (*val)(const struct eng_step *, int))
{
	jw_arr(w);
	for (int k = 0; k < n; k++) {
		bool any = false;

		for (uint64_t i = lo; i < hi && !any; i++)
			any = val(engine_step(e, i), k) != 0;
		if (!any)
			continue;
		jw_arr(w);
		jw_u64(w, (uint64_t)k);
		column(w, e, lo, hi, val, k);
		jw_arr_end(w);
	}
	jw_arr_end(w);
}

/* text a writer gives into a FILE, as a JSON string */
static void text_of(struct jw *w, void (*fn)(void *ctx, FILE *f), void *ctx)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	if (m) {
		fn(ctx, m);
		fclose(m);
	}
	jw_strn(w, buf ? buf : "", buf ? len : 0);
	free(buf);
}

struct step_text_ctx {
	const struct engine *e;
	struct symbols *sym;
	const struct eng_step *s;
	const struct eng_summary *sum;
	const struct report_episode *ep;
};

static void step_text(void *ctx, FILE *f)
{
	struct step_text_ctx *c = ctx;

	report_step_line(c->e, c->s, c->sum, NULL, f);
	report_step_stacks(c->e, c->sym, c->s, f);
}

static void episode_text(void *ctx, FILE *f)
{
	struct step_text_ctx *c = ctx;

	report_episode_line(c->e, c->ep, f);
}

static void full_text(void *ctx, FILE *f)
{
	report_text(((struct step_text_ctx *)ctx)->e, f);
}

/* qsort of step indices: the longest first (then in order), or in order */
static int by_duration(const void *a, const void *b, void *ctx)
{
	const struct engine *e = ctx;
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	uint64_t dx = engine_step(e, x)->duration_ns, dy = engine_step(e, y)->duration_ns;

	if (dx != dy)
		return dx > dy ? -1 : 1;
	return x < y ? -1 : x > y;
}

static int by_index(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static const char *dip_kind(int d)
{
	switch (d) {
	case ENG_DIP_PERIODIC: return "periodic";
	case ENG_DIP_SPORADIC: return "sporadic";
	case ENG_DIP_LOW: return "low";
	case ENG_DIP_NONE: return "none";
	}
	return "unknown";
}

static void key_u64(struct jw *w, const char *k, uint64_t v)
{
	jw_key(w, k);
	jw_u64(w, v);
}

static void summary(struct jw *w, const struct engine *e, const struct eng_summary *s)
{
	struct eng_loss l;

	engine_loss(e, &l);
	jw_key(w, "sum");
	jw_obj(w);
	key_u64(w, "steps", s->nsteps);
	key_u64(w, "complete", s->ncomplete);
	key_u64(w, "p50", s->p50);
	key_u64(w, "p90", s->p90);
	key_u64(w, "p99", s->p99);
	key_u64(w, "p999", s->p999);
	key_u64(w, "max", s->max);
	key_u64(w, "min", s->min);
	key_u64(w, "mad", s->mad);
	jw_key(w, "ratio");
	jw_fixed(w, s->p99_over_p50, 3);
	key_u64(w, "threshold", s->tail_threshold_ns);
	key_u64(w, "ntail", s->ntail);
	jw_key(w, "busy");
	jw_fixed(w, s->gpu_busy_share, 4);
	jw_key(w, "dip");
	jw_str(w, dip_kind(s->dip));
	key_u64(w, "dip_period", s->dip_period);
	key_u64(w, "ndips", s->ndips);
	jw_key(w, "dip_busy");
	jw_fixed(w, s->dip_busy_median, 4);
	key_u64(w, "tracer_median", s->tracer_median_ns);
	key_u64(w, "tracer_total", s->tracer_total_ns);
	key_u64(w, "tracer_p50_ppm", s->tracer_p50_ppm);
	key_u64(w, "tracer_p99_ppm", s->tracer_p99_ppm);
	key_u64(w, "sampled_steps", s->sampled_steps);
	jw_key(w, "windowed");
	jw_bool(w, s->windowed);
	key_u64(w, "first_kept", s->first_kept);
	key_u64(w, "loss", l.total);
	jw_obj_end(w);
}

static void run_data(struct jw *w, const struct engine *e, struct symbols *sym)
{
	struct eng_summary s;
	struct eng_target t;
	struct eng_capture c;
	struct eng_interferer_group itf[MAX_INTERFERERS];
	struct report_episode *ep;
	struct strtab names = { 0 };
	struct step_text_ctx tc = { .e = e, .sym = sym };
	uint64_t lo, hi, tail_ns[ENG_NCAUSE] = { 0 }, nep;
	char buf[256];
	int ni;

	engine_summarise(e, &s);
	engine_target(e, &t);
	engine_capture(e, &c);
	lo = engine_first_step(e);
	hi = engine_nsteps(e);
	tc.sum = &s;

	jw_obj(w);
	jw_key(w, "kind");
	jw_str(w, "run");
	jw_key(w, "target");
	jw_obj(w);
	key_u64(w, "pid", t.pid);
	jw_key(w, "comm");
	jw_str(w, report_clean(buf, sizeof(buf), t.comm));
	if (t.comm_end[0]) {
		jw_key(w, "comm_end");
		jw_str(w, report_clean(buf, sizeof(buf), t.comm_end));
	}
	jw_key(w, "cmdline");
	jw_str(w, t.cmdline);
	jw_obj_end(w);
	jw_key(w, "identity");
	report_json_identity(w, e);
	jw_key(w, "capture");
	jw_obj(w);
	key_u64(w, "ns", c.end_ns > c.start_ns ? c.end_ns - c.start_ns : 0);
	jw_key(w, "complete");
	jw_bool(w, c.complete);
	jw_key(w, "end");
	jw_str(w, c.end_reason ? c.end_reason : "");
	jw_key(w, "truncated");
	jw_str(w, c.truncated ? c.truncated : "");
	jw_key(w, "source");
	jw_str(w, c.step_source ? eng_step_src_name(c.step_source) : "");
	jw_obj_end(w);
	jw_key(w, "gpu");
	jw_bool(w, c.gpu_timeline);
	summary(w, e, &s);

	jw_key(w, "causes");
	jw_arr(w);
	for (int i = 0; i < ENG_NCAUSE; i++)
		jw_str(w, eng_cause_name(i));
	jw_arr_end(w);
	jw_key(w, "counts");
	jw_arr(w);
	for (int i = 0; i < ENG_NCOUNT; i++)
		jw_str(w, eng_count_name(i));
	jw_arr_end(w);
	for (uint64_t i = lo; i < hi; i++) {
		const struct eng_step *st = engine_step(e, i);

		if (st->tail)
			for (int k = 0; k < ENG_NCAUSE; k++)
				tail_ns[k] += st->cause_ns[k];
	}
	jw_key(w, "cause_total");
	jw_arr(w);
	for (int i = 0; i < ENG_NCAUSE; i++)
		jw_u64(w, s.cause_total[i]);
	jw_arr_end(w);
	jw_key(w, "cause_median");
	jw_arr(w);
	for (int i = 0; i < ENG_NCAUSE; i++)
		jw_u64(w, s.cause_median[i]);
	jw_arr_end(w);
	jw_key(w, "cause_tail");
	jw_arr(w);
	for (int i = 0; i < ENG_NCAUSE; i++)
		jw_u64(w, tail_ns[i]);
	jw_arr_end(w);

	/* the steps kept in detail, in columns (µs; busy in per mille) */
	key_u64(w, "first_index", lo);
	{
		bool consecutive = true;

		for (uint64_t i = lo + 1; i < hi && consecutive; i++)
			consecutive = engine_step(e, i)->step == engine_step(e, i - 1)->step + 1;
		if (consecutive && hi > lo) {
			/* numbered one after another: the first is enough */
			key_u64(w, "step_first", engine_step(e, lo)->step);
		} else {
			jw_key(w, "step");
			column(w, e, lo, hi, v_step, 0);
		}
	}
	jw_key(w, "dur");
	column(w, e, lo, hi, v_dur, 0);
	jw_key(w, "tracer");
	column(w, e, lo, hi, v_tracer, 0);
	if (c.gpu_timeline) {
		jw_key(w, "busy");
		column(w, e, lo, hi, v_busy, 0);
	}
	jw_key(w, "by_cause");
	columns(w, e, lo, hi, ENG_NCAUSE, v_cause);
	jw_key(w, "tail");
	jw_arr(w);
	for (uint64_t i = lo; i < hi; i++)
		if (engine_step(e, i)->tail)
			jw_u64(w, i - lo);
	jw_arr_end(w);
	jw_key(w, "incomplete");
	jw_arr(w);
	for (uint64_t i = lo; i < hi; i++)
		if (engine_step(e, i)->incomplete)
			jw_u64(w, i - lo);
	jw_arr_end(w);

	/* per step: the critical thread, the largest blame entries, the counts */
	jw_key(w, "crit");
	jw_arr(w);
	for (uint64_t i = lo; i < hi; i++) {
		const struct eng_step *st = engine_step(e, i);
		char cm[64];
		int64_t id;

		if (!st->crit_tid) {
			jw_u64(w, 0);
			continue;
		}
		snprintf(buf, sizeof(buf), "%s[%" PRIu32 "]",
			 report_clean(cm, sizeof(cm), st->crit_comm), st->crit_tid);
		id = strtab_id(&names, buf);
		jw_u64(w, id < 0 ? 0 : (uint64_t)id + 1);
	}
	jw_arr_end(w);
	jw_key(w, "blame");
	jw_arr(w);
	for (uint64_t i = lo; i < hi; i++) {
		const struct eng_step *st = engine_step(e, i);

		jw_arr(w);
		for (uint32_t b = 0; b < st->nblame && b < STEP_BLAME_MAX; b++) {
			int64_t id = 0;

			if (b && st->blame[b].ns * 100 < st->duration_ns)
				break;
			if (st->blame[b].has_who) {
				who_label(e, &st->blame[b], buf, sizeof(buf));
				id = strtab_id(&names, buf) + 1;
			}
			jw_u64(w, st->blame[b].cause);
			jw_u64(w, us(st->blame[b].ns));
			jw_u64(w, id > 0 ? (uint64_t)id : 0);
		}
		jw_arr_end(w);
	}
	jw_arr_end(w);
	jw_key(w, "by_count");
	columns(w, e, lo, hi, ENG_NCOUNT, v_count);
	/* the names the steps point at (1-based; 0: none) */
	jw_key(w, "names");
	jw_arr(w);
	for (uint32_t i = 0; i < names.n; i++)
		jw_str(w, names.s[i]);
	jw_arr_end(w);
	strtab_free(&names);

	/* tail steps: the text report's line and where the thread was */
	/* the longest tail steps: the text report's line and where the thread was */
	{
		uint64_t nt = 0, *ti = calloc(s.ntail ? s.ntail : 1, sizeof(*ti));

		for (uint64_t i = lo; ti && i < hi && nt < s.ntail; i++)
			if (engine_step(e, i)->tail)
				ti[nt++] = i;
		if (ti && nt > TAIL_TEXT_MAX) {
			qsort_r(ti, nt, sizeof(*ti), by_duration, (void *)e);
			nt = TAIL_TEXT_MAX;
			qsort(ti, nt, sizeof(*ti), by_index);
		}
		jw_key(w, "tail_text");
		jw_arr(w);
		for (uint64_t k = 0; ti && k < nt; k++) {
			tc.s = engine_step(e, ti[k]);
			jw_arr(w);
			jw_u64(w, ti[k] - lo);
			text_of(w, step_text, &tc);
			jw_arr_end(w);
		}
		jw_arr_end(w);
		free(ti);
	}

	/* episodes: a single step's text is its tail text above */
	nep = report_episodes(e, &s, &ep);
	key_u64(w, "episodes_total", nep);
	jw_key(w, "episodes");
	jw_arr(w);
	for (uint64_t i = 0; i < nep && i < EPISODES_MAX; i++) {
		jw_obj(w);
		key_u64(w, "first", ep[i].first->index - lo);
		key_u64(w, "last", ep[i].last->index - lo);
		key_u64(w, "longest", ep[i].longest->index - lo);
		key_u64(w, "steps", ep[i].nsteps);
		key_u64(w, "over_ns", ep[i].over_ns);
		jw_key(w, "cause");
		jw_str(w, eng_cause_name(ep[i].top.cause));
		key_u64(w, "cause_ns", ep[i].cause_ns);
		if (ep[i].nsteps > 1) {
			jw_key(w, "text");
			tc.ep = &ep[i];
			text_of(w, episode_text, &tc);
		}
		jw_obj_end(w);
	}
	jw_arr_end(w);
	free(ep);

	ni = engine_interferer_groups(e, itf, MAX_INTERFERERS);
	jw_key(w, "interferers");
	jw_arr(w);
	for (int i = 0; i < ni; i++) {
		jw_obj(w);
		jw_key(w, "name");
		jw_str(w, report_group_name(buf, sizeof(buf), &itf[i]));
		key_u64(w, "ns", itf[i].ns);
		jw_key(w, "own");
		jw_bool(w, itf[i].own);
		jw_key(w, "tracer");
		jw_bool(w, itf[i].tracer);
		jw_key(w, "realtime");
		jw_bool(w, itf[i].realtime);
		jw_obj_end(w);
	}
	jw_arr_end(w);

	jw_key(w, "text");
	text_of(w, full_text, &tc);
	jw_obj_end(w);
}

/* the data document into a buffer, then the page around it */
static int page_of(FILE *f, void (*fill)(void *ctx, FILE *m), void *ctx)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	int ret;

	if (!m)
		return -ENOMEM;
	fill(ctx, m);
	if (fclose(m)) {
		free(buf);
		return -ENOMEM;
	}
	ret = write_page(f, buf, len);
	free(buf);
	return ret;
}

static void run_fill(void *ctx, FILE *m)
{
	const struct engine *e = ctx;
	struct symbols *sym = sym_any(e) ? symbols_new(e) : NULL;
	struct jw w;

	jw_init(&w, m, false);
	run_data(&w, e, sym);
	fputc('\n', m);
	symbols_free(sym);
}

int report_html(const struct engine *e, FILE *f)
{
	return page_of(f, run_fill, (void *)e);
}

struct ranks_ctx {
	const struct rank_trace *r;
	int n;
};

/* the ranks report's JSON (schemas/report.md, "Ranks") and its text */
static void ranks_fill(void *ctx, FILE *m)
{
	struct ranks_ctx *c = ctx;
	char *buf = NULL;
	size_t len = 0;
	FILE *t;

	fputs("{\"kind\":\"ranks\",\"ranks\":", m);
	report_ranks_json(c->r, c->n, m);
	fputs(",\"text\":", m);
	if ((t = open_memstream(&buf, &len))) {
		report_ranks_text(c->r, c->n, t);
		fclose(t);
	}
	{
		struct jw w;

		jw_init(&w, m, false);
		jw_strn(&w, buf ? buf : "", buf ? len : 0);
	}
	free(buf);
	fputs("}\n", m);
}

int report_ranks_html(const struct rank_trace *r, int n, FILE *f)
{
	struct ranks_ctx c = { r, n };

	return page_of(f, ranks_fill, &c);
}
