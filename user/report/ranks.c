// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Several traces as the ranks of one job: which rank finished its part of each
 * step last, by how much, and why (schemas/report.md, "Ranks").
 *
 * Steps are aligned by their number, never by clock: the ranks may be on
 * different hosts. A rank's own time in a step is the step's time less the
 * time its GPU spent in collective kernels (NCCL's, by name): a rank that
 * arrives late at an all-reduce keeps the others' collectives waiting, so
 * their own time stays short and the late one's is long. The rank with the
 * most own time finished last; it straggled when its lead over the median rank
 * was over three times the job's usual lead (the median lead over the steps;
 * robust while fewer than half the steps straggle), and at least 1% of the
 * median own time. Why: each cause's time in the straggler's step over the
 * median rank's in the same step (what made it later than the others, not what
 * made the step slow for all), with the straggler's culprit for it. Ranks are
 * listed by the time their straggles cost the job.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"
#include "base/json.h"
#include "base/util.h"

#define STEPS_SHOWN 10

struct aligned {
	uint64_t step;
	uint64_t repeat;         /* the number came this many times before (it restarts each epoch) */
	int last;                /* -1: fewer than two ranks have it */
	int nhave;
	uint64_t behind_ns;      /* the last rank's own time over the median rank's */
	bool straggle;
};

/* where an aligned step sits: by the time its number came, then by the number */
struct step_key {
	uint64_t repeat, step;
};

/* a culprit of one cause over a rank's straggles: the excess it was named for */
#define CULPRITS 8
struct culprit_sum {
	struct eng_who who;
	uint64_t ns;
	const struct eng_step *step; /* where it took the most */
	uint64_t step_ns;
};

struct rank_sum {
	uint64_t last, straggles;
	uint64_t *lead;          /* its leads in the steps it was last in (nlead = last) */
	uint64_t last_cause_ns[ENG_NCAUSE]; /* its causes over the median rank's in those steps */
	struct culprit_sum last_who[ENG_NCAUSE][CULPRITS];
	bool slower;             /* slower throughout (rank_slower) */
	uint64_t behind_total;   /* over the straggles: the time they cost the job */
	uint64_t *behind;        /* of the straggles, for the median */
	uint64_t cause_ns[ENG_NCAUSE];
	struct culprit_sum who[ENG_NCAUSE][CULPRITS];
};

/* adds ns to who's sum for its cause (the smallest gives way when all are taken) */
static void culprit_add(struct culprit_sum *cs, const struct eng_who *w, uint64_t ns,
			const struct eng_step *s)
{
	int free_at = -1, least = 0;

	for (int i = 0; i < CULPRITS; i++) {
		if (!cs[i].ns) {
			if (free_at < 0)
				free_at = i;
			continue;
		}
		if (cs[i].who.pid == w->pid && cs[i].who.tid == w->tid &&
		    !strncmp(cs[i].who.comm, w->comm, sizeof(w->comm))) {
			cs[i].ns += ns;
			if (ns > cs[i].step_ns) {
				cs[i].step = s;
				cs[i].step_ns = ns;
			}
			return;
		}
		if (cs[i].ns < cs[least].ns)
			least = i;
	}
	if (free_at < 0) {
		if (cs[least].ns >= ns)
			return;
		free_at = least;
	}
	cs[free_at] = (struct culprit_sum){ .who = *w, .ns = ns, .step = s, .step_ns = ns };
}

/* the cause's culprit with the most time, NULL if none was named */
static const struct culprit_sum *top_culprit(const struct culprit_sum *cs)
{
	const struct culprit_sum *best = NULL;

	for (int i = 0; i < CULPRITS; i++)
		if (cs[i].ns && (!best || cs[i].ns > best->ns))
			best = &cs[i];
	return best;
}

struct ranks {
	const struct rank_trace *r;
	int n;
	struct eng_summary *sum;     /* per rank */
	const struct eng_step ***at; /* at[rank][aligned index]: NULL where absent */
	uint64_t **own;              /* own[rank][aligned index] */
	struct aligned *st;
	size_t nst;
	uint64_t noise_ns;
	struct rank_sum *rs;
};

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The median rank's value among n ranks' (sorts v): the lower of the two
 * middle ones for an even count, a rank's own value (with two ranks, the
 * other's), never an average no rank had
 */
static uint64_t median_rank_of(uint64_t *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), u64_cmp);
	return v[(n - 1) / 2];
}

static uint64_t median_of(uint64_t *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), u64_cmp);
	return n % 2 ? v[n / 2] : v[n / 2 - 1] / 2 + v[n / 2] / 2 + (v[n / 2 - 1] % 2 + v[n / 2] % 2) / 2;
}

static uint64_t own_time(const struct rank_trace *r, const struct eng_step *s, uint64_t idx)
{
	uint64_t coll = r->coll_ns ? r->coll_ns[idx] : 0;

	return s->duration_ns > coll ? s->duration_ns - coll : 0;
}

/*
 * The complete steps of one rank, by step number and, for a number that
 * came more than once (numbers that restart each epoch), by how many times
 * it came before: the k-th step numbered N of one rank aligns with the k-th
 * of the others
 */
struct numbered {
	uint64_t step, idx, repeat;
};

static int numbered_cmp(const void *a, const void *b)
{
	const struct numbered *x = a, *y = b;

	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int key_cmp(const void *a, const void *b)
{
	const struct step_key *x = a, *y = b;

	if (x->repeat != y->repeat)
		return x->repeat < y->repeat ? -1 : 1;
	return x->step < y->step ? -1 : x->step > y->step;
}

static int numbered_key_cmp(const void *a, const void *b)
{
	const struct numbered *x = a, *y = b;
	struct step_key kx = { x->repeat, x->step }, ky = { y->repeat, y->step };

	return key_cmp(&kx, &ky);
}

static struct numbered *rank_steps(const struct engine *e, size_t *n)
{
	uint64_t first = engine_first_step(e), all = engine_nsteps(e);
	struct numbered *v = calloc(all - first + 1, sizeof(*v));
	size_t k = 0;

	if (!v)
		return NULL;
	for (uint64_t i = first; i < all; i++) {
		const struct eng_step *s = engine_step(e, i);

		if (s && !s->incomplete)
			v[k++] = (struct numbered){ s->step, i };
	}
	qsort(v, k, sizeof(*v), numbered_cmp);
	for (size_t i = 1; i < k; i++)
		if (v[i].step == v[i - 1].step)
			v[i].repeat = v[i - 1].repeat + 1;
	qsort(v, k, sizeof(*v), numbered_key_cmp);
	*n = k;
	return v;
}

/*
 * The straggler's causes in aligned step j over the median rank's, largest
 * first: each cause's excess split among the straggler's biggest culprits for
 * it in the step (their blame lines, largest first, each up to its own time;
 * what they do not cover stays without a culprit), so that a wait shared by
 * two preemptors names both. out holds RANK_EXCESS_MAX; returns how many.
 */
#define RANK_CULPRITS 3
#define RANK_EXCESS_MAX (ENG_NCAUSE * (RANK_CULPRITS + 1))

static int relative_excess(const struct ranks *R, size_t j, int last, struct eng_excess *out)
{
	const struct eng_step *s = R->at[last][j];
	uint64_t v[R->n];
	int n = 0;

	for (int c = 0; c < ENG_NCAUSE; c++) {
		size_t m = 0;

		for (int i = 0; i < R->n; i++)
			if (R->at[i][j])
				v[m++] = R->at[i][j]->cause_ns[c];
		uint64_t med = median_rank_of(v, m);

		if (c == ENG_TRACER || s->cause_ns[c] <= med)
			continue;
		uint64_t left = s->cause_ns[c] - med;

		/* the blame list is by ns, descending */
		for (uint32_t b = 0, k = 0; b < s->nblame && k < RANK_CULPRITS && left; b++) {
			if (s->blame[b].cause != c || !s->blame[b].has_who)
				continue;
			struct eng_excess *x = &out[n++];

			memset(x, 0, sizeof(*x));
			x->cause = (uint8_t)c;
			x->ns = left < s->blame[b].ns ? left : s->blame[b].ns;
			x->has_who = true;
			x->who = s->blame[b].who;
			x->processes = s->blame[b].processes;
			left -= x->ns;
			k++;
		}
		if (left) {
			struct eng_excess *x = &out[n++];

			memset(x, 0, sizeof(*x));
			x->cause = (uint8_t)c;
			x->ns = left;
		}
	}
	for (int i = 1; i < n; i++)
		for (int k = i; k > 0 && out[k].ns > out[k - 1].ns; k--) {
			struct eng_excess t = out[k];

			out[k] = out[k - 1];
			out[k - 1] = t;
		}
	return n;
}

static void ranks_free(struct ranks *R)
{
	for (int i = 0; i < R->n; i++) {
		if (R->at)
			free(R->at[i]);
		if (R->own)
			free(R->own[i]);
		if (R->rs) {
			free(R->rs[i].behind);
			free(R->rs[i].lead);
		}
	}
	free(R->at);
	free(R->own);
	free(R->rs);
	free(R->st);
	free(R->sum);
}

static void rank_slower(struct ranks *R);

static int ranks_build(struct ranks *R, const struct rank_trace *r, int n)
{
	struct numbered **num = calloc((size_t)n, sizeof(*num));
	size_t *nnum = calloc((size_t)n, sizeof(*nnum)), total = 0;
	struct step_key *steps = NULL;
	int rc = -ENOMEM;

	memset(R, 0, sizeof(*R));
	R->r = r;
	R->n = n;
	R->sum = calloc((size_t)n, sizeof(*R->sum));
	R->at = calloc((size_t)n, sizeof(*R->at));
	R->own = calloc((size_t)n, sizeof(*R->own));
	R->rs = calloc((size_t)n, sizeof(*R->rs));
	if (!num || !nnum || !R->sum || !R->at || !R->own || !R->rs)
		goto out;
	for (int i = 0; i < n; i++) {
		engine_summarise(r[i].e, &R->sum[i]);
		if (!(num[i] = rank_steps(r[i].e, &nnum[i])))
			goto out;
		total += nnum[i];
	}
	/* every step any rank has (number and repeat), once */
	steps = malloc((total + 1) * sizeof(*steps));
	if (!steps)
		goto out;
	for (int i = 0; i < n; i++)
		for (size_t k = 0; k < nnum[i]; k++)
			steps[R->nst++] = (struct step_key){ num[i][k].repeat, num[i][k].step };
	qsort(steps, R->nst, sizeof(*steps), key_cmp);
	size_t u = 0;

	for (size_t k = 0; k < R->nst; k++)
		if (!u || key_cmp(&steps[u - 1], &steps[k]))
			steps[u++] = steps[k];
	R->nst = u;
	R->st = calloc(u + 1, sizeof(*R->st));
	if (!R->st)
		goto out;
	for (int i = 0; i < n; i++) {
		R->at[i] = calloc(u + 1, sizeof(*R->at[i]));
		R->own[i] = calloc(u + 1, sizeof(*R->own[i]));
		R->rs[i].behind = calloc(u + 1, sizeof(uint64_t));
		R->rs[i].lead = calloc(u + 1, sizeof(uint64_t));
		if (!R->at[i] || !R->own[i] || !R->rs[i].behind || !R->rs[i].lead)
			goto out;
		/* both lists are sorted the same way: one merge */
		size_t k = 0;

		for (size_t j = 0; j < u; j++) {
			struct step_key kk;

			while (k < nnum[i] && (kk = (struct step_key){ num[i][k].repeat, num[i][k].step },
					       key_cmp(&kk, &steps[j]) < 0))
				k++;
			if (k < nnum[i] && num[i][k].repeat == steps[j].repeat &&
			    num[i][k].step == steps[j].step) {
				R->at[i][j] = engine_step(r[i].e, num[i][k].idx);
				R->own[i][j] = own_time(&r[i], R->at[i][j], num[i][k].idx);
			}
		}
	}
	/* each step's last rank and its lead over the median rank */
	uint64_t *v = malloc((u + 1) * sizeof(*v)), *lead = malloc((u + 1) * sizeof(*lead));
	uint64_t *meds = malloc((u + 1) * sizeof(*meds));
	size_t nlead = 0;

	if (!v || !lead || !meds) {
		free(v);
		free(lead);
		free(meds);
		goto out;
	}
	for (size_t j = 0; j < u; j++) {
		struct aligned *a = &R->st[j];
		size_t m = 0;

		a->step = steps[j].step;
		a->repeat = steps[j].repeat;
		a->last = -1;
		for (int i = 0; i < n; i++) {
			if (!R->at[i][j])
				continue;
			v[m++] = R->own[i][j];
			if (a->last < 0 || R->own[i][j] > R->own[a->last][j])
				a->last = i;
		}
		a->nhave = (int)m;
		if (m < 2) {
			a->last = -1;
			continue;
		}
		uint64_t med = median_rank_of(v, m), mine = R->own[a->last][j];

		a->behind_ns = mine > med ? mine - med : 0;
		meds[nlead] = med;
		lead[nlead++] = a->behind_ns;
	}
	/* the noise: three times the usual lead */
	R->noise_ns = 3 * median_of(lead, nlead);
	/* and at least 1% of the median rank's usual own time */
	if (R->noise_ns < median_of(meds, nlead) / 100)
		R->noise_ns = median_of(meds, nlead) / 100;
	free(lead);
	free(meds);
	/* who straggled, and why */
	for (size_t j = 0; j < u; j++) {
		struct aligned *a = &R->st[j];

		if (a->last < 0)
			continue;
		a->straggle = a->behind_ns > R->noise_ns;
		struct rank_sum *rs = &R->rs[a->last];

		rs->lead[rs->last++] = a->behind_ns;
		/* why: its causes over the median rank's in the step */
		struct eng_excess ex[RANK_EXCESS_MAX];
		const struct eng_step *s = R->at[a->last][j];
		int ne = relative_excess(R, j, a->last, ex);

		for (int k = 0; k < ne; k++) {
			int c = ex[k].cause;

			rs->last_cause_ns[c] += ex[k].ns;
			if (ex[k].has_who)
				culprit_add(rs->last_who[c], &ex[k].who, ex[k].ns, s);
		}
		if (!a->straggle)
			continue;
		rs->behind[rs->straggles++] = a->behind_ns;
		rs->behind_total += a->behind_ns;
		for (int k = 0; k < ne; k++) {
			int c = ex[k].cause;

			rs->cause_ns[c] += ex[k].ns;
			if (ex[k].has_who)
				culprit_add(rs->who[c], &ex[k].who, ex[k].ns, s);
		}
	}
	rank_slower(R);
	free(v);
	rc = 0;
out:
	for (int i = 0; num && i < n; i++)
		free(num[i]);
	free(num);
	free(nnum);
	free(steps);
	if (rc)
		ranks_free(R);
	return rc;
}

/*
 * A rank slower throughout: last in at least three quarters of the steps two
 * or more ranks have (and in ten at least), by a median lead of at least 1%
 * of the median rank's own time. Its lead is then the job's usual one, which
 * the straggle rule measures against: a bad node no single step shows.
 */
static void rank_slower(struct ranks *R)
{
	size_t both = 0;
	uint64_t *meds = malloc((R->nst + 1) * sizeof(*meds)), nm = 0;

	if (!meds)
		return;
	for (size_t j = 0; j < R->nst; j++) {
		uint64_t v[R->n];
		size_t m = 0;

		if (R->st[j].nhave < 2)
			continue;
		both++;
		for (int i = 0; i < R->n; i++)
			if (R->at[i][j])
				v[m++] = R->own[i][j];
		meds[nm++] = median_rank_of(v, m);
	}
	uint64_t usual = median_of(meds, nm);

	free(meds);
	for (int i = 0; i < R->n; i++) {
		struct rank_sum *rs = &R->rs[i];
		uint64_t lead;

		if (rs->last < 10 || rs->last * 4 < both * 3)
			continue;
		lead = median_of(rs->lead, rs->last);
		rs->slower = lead * 100 >= usual;
	}
}

/* ranks by the time their straggles cost, most first, then by rank */
static int *rank_order(const struct ranks *R)
{
	int *o = malloc((size_t)R->n * sizeof(*o));

	if (!o)
		return NULL;
	for (int i = 0; i < R->n; i++)
		o[i] = i;
	for (int i = 1; i < R->n; i++)
		for (int k = i; k > 0 && R->rs[o[k]].behind_total > R->rs[o[k - 1]].behind_total; k--) {
			int t = o[k];

			o[k] = o[k - 1];
			o[k - 1] = t;
		}
	return o;
}

/* the causes of a rank's straggles (or of the steps it was last in), largest first (the tracer's own is never one) */
static int top_causes(const uint64_t *cause_ns, int *out)
{
	int n = 0;

	for (int c = 0; c < ENG_NCAUSE; c++)
		if (cause_ns[c] && c != ENG_TRACER)
			out[n++] = c;
	for (int i = 1; i < n; i++)
		for (int k = i; k > 0 && cause_ns[out[k]] > cause_ns[out[k - 1]]; k--) {
			int t = out[k];

			out[k] = out[k - 1];
			out[k - 1] = t;
		}
	return n;
}

/* the aligned steps at least min ranks have */
static uint64_t steps_had(const struct ranks *R, int min)
{
	uint64_t n = 0;

	for (size_t j = 0; j < R->nst; j++)
		n += R->st[j].nhave >= min;
	return n;
}

/* " (2nd time)": the step's number came before (it restarts each epoch) */
static const char *repeat_note(char *buf, size_t len, uint64_t repeat)
{
	uint64_t k = repeat + 1;
	const char *sfx = k % 100 >= 11 && k % 100 <= 13 ? "th" :
			  k % 10 == 1 ? "st" : k % 10 == 2 ? "nd" : k % 10 == 3 ? "rd" : "th";

	if (!repeat)
		return "";
	snprintf(buf, len, " (%" PRIu64 "%s time)", k, sfx);
	return buf;
}

/* the process whose steps a rank's are: its trace's target, or the rank's own in a trace of several */
static uint32_t rank_process(const struct rank_trace *r, char *comm, size_t len)
{
	struct eng_target t;
	const char *nm;

	if (r->pid) {
		nm = engine_thread_name(r->e, r->pid);
		snprintf(comm, len, "%s", nm && nm[0] ? nm : "?");
		return r->pid;
	}
	engine_target(r->e, &t);
	snprintf(comm, len, "%s", eng_target_name(&t)[0] ? eng_target_name(&t) : "?");
	return t.pid;
}

static void rank_label(FILE *f, const struct ranks *R, int i)
{
	struct eng_identity id;
	char a[256], b[64], comm[SB_COMM_LEN + 1];
	uint32_t pid = rank_process(&R->r[i], comm, sizeof(comm));

	engine_identity(R->r[i].e, &id);
	/* the ranks of one trace: the file is the same for all */
	fprintf(f, "rank %d (", i);
	if (!R->r[i].pid)
		fprintf(f, "%s, ", report_clean(a, sizeof(a), R->r[i].path));
	fprintf(f, "%s[%" PRIu32 "]", report_clean(b, sizeof(b), comm), pid);
	/* its host, and the RANK its launcher gave it (its place in the list may differ) */
	if (id.host[0])
		fprintf(f, " on %s", report_clean(a, sizeof(a), id.host));
	if (id.rank[0])
		fprintf(f, ", RANK=%s", report_clean(b, sizeof(b), id.rank));
	fputc(')', f);
}

/* whether any rank's collective kernels were seen (else own time is step time) */
static bool ranks_collectives(const struct rank_trace *r, int n)
{
	for (int i = 0; i < n; i++)
		if (r[i].coll_ns)
			return true;
	return false;
}

/* why a rank's trace ends early: cut short, or damaged (its reason); NULL if complete */
static const char *rank_cut(const struct rank_trace *r)
{
	struct eng_capture c;

	engine_capture(r->e, &c);
	if (c.complete && !r->corrupt)
		return NULL;
	return r->corrupt && r->error ? r->error : c.truncated ? c.truncated : "no trailer";
}

/* ": cause +X in all — culprit ...; ..." for a rank's causes over the median rank's, the three largest */
static void print_causes(FILE *f, const struct engine *e, const uint64_t *cause_ns,
			 const struct culprit_sum (*who)[CULPRITS])
{
	int causes[ENG_NCAUSE], nc = top_causes(cause_ns, causes);
	char x[32];

	for (int c = 0; c < nc && c < 3; c++) {
		int cause = causes[c];

		if (c && cause_ns[cause] * 20 < cause_ns[causes[0]])
			break;
		const struct culprit_sum *cs = top_culprit(who[cause]);

		fprintf(f, "%s%s +%s in all", c ? "; " : ": ", eng_cause_name(cause),
			report_fmt_ns(x, sizeof(x), cause_ns[cause]));
		if (cs)
			report_cause_phrase(e, cs->step, cause, &cs->who, true, 1, f);
	}
}

/* straggles (indexes into sort_base) by lead, longest first, then by step */
static const struct aligned *sort_base;

static int straggle_cmp(const void *a, const void *b)
{
	const struct aligned *x = &sort_base[*(const size_t *)a], *y = &sort_base[*(const size_t *)b];

	if (x->behind_ns != y->behind_ns)
		return x->behind_ns > y->behind_ns ? -1 : 1;
	return x->step < y->step ? -1 : x->step > y->step;
}

int report_ranks_text(const struct rank_trace *r, int n, FILE *f)
{
	struct ranks R;
	char x[32], y[32], a[256];
	int *order;

	if (ranks_build(&R, r, n))
		return -ENOMEM;
	fprintf(f, "stepblame report: %d ranks, %" PRIu64 " steps that all have, %" PRIu64 " that at "
		"least two have (aligned by step number)\n", n, steps_had(&R, n), steps_had(&R, 2));
	for (int i = 0; i < n; i++) {
		struct eng_summary *s = &R.sum[i];

		fputs("  ", f);
		rank_label(f, &R, i);
		fprintf(f, ": %" PRIu64 " complete steps, P50 %s, P99 %s", s->ncomplete,
			report_fmt_ns(x, sizeof(x), s->p50), report_fmt_ns(y, sizeof(y), s->p99));
		if (!r[i].coll_ns)
			fputs(", no collective kernels seen", f);
		if (rank_cut(&r[i]))
			fprintf(f, "; trace %s: %s, the rank covers the records before it",
				r[i].corrupt ? "CORRUPT" : "CUT SHORT",
				report_clean(a, sizeof(a), rank_cut(&r[i])));
		fputc('\n', f);
	}
	fprintf(f, "Own time    a step's time less its collective (NCCL) kernels: the rank with the most "
		"finished its part last,\n            and the others' collectives waited for it\n");
	if (!ranks_collectives(r, n))
		fputs("Host only   no rank had collective kernels: own time is the whole step, so a rank "
		      "that waited for the others\n            in a host-side all-reduce cannot be told "
		      "from the one it waited for; the straggle\n            verdicts are only about step "
		      "time\n", f);
	order = rank_order(&R);
	if (!order) {
		ranks_free(&R);
		return -ENOMEM;
	}
	uint64_t any = 0;

	for (int i = 0; i < n; i++)
		any += R.rs[i].straggles;
	if (!steps_had(&R, 2)) {
		fputs("Stragglers  nothing to compare: no step number is in two ranks' traces (are "
		      "they of one job?)\n", f);
	} else if (!any) {
		fprintf(f, "Stragglers  none: no rank was last by more than %s (3 times the usual lead) "
			"in any step\n",
			report_fmt_ns(x, sizeof(x), R.noise_ns));
	} else {
		fprintf(f, "Stragglers  ranks last by more than %s (3 times the usual lead), the most "
			"time behind first;\n            why: their causes over the median rank's in the "
			"same steps\n", report_fmt_ns(x, sizeof(x), R.noise_ns));
		for (int k = 0; k < n; k++) {
			const struct rank_sum *rs = &R.rs[order[k]];

			if (!rs->straggles)
				continue;
			fputs("  ", f);
			rank_label(f, &R, order[k]);
			fprintf(f, " straggled in %" PRIu64 " of %" PRIu64 " steps, %s behind in all, %s "
				"at the median", rs->straggles, steps_had(&R, 2),
				report_fmt_ns(y, sizeof(y), rs->behind_total),
				report_fmt_ns(x, sizeof(x), median_of(rs->behind, rs->straggles)));
			print_causes(f, r[order[k]].e, rs->cause_ns, rs->who);
			fputc('\n', f);
		}
		/* the longest straggles, each with the straggler's own blame */
		size_t *idx = malloc((R.nst + 1) * sizeof(*idx)), m = 0;

		if (!idx) {
			free(order);
			ranks_free(&R);
			return -ENOMEM;
		}
		for (size_t j = 0; j < R.nst; j++)
			if (R.st[j].straggle)
				idx[m++] = j;
		sort_base = R.st;
		qsort(idx, m, sizeof(*idx), straggle_cmp);
		if (m > STEPS_SHOWN)
			fprintf(f, "Steps       the %d longest straggles (--format json lists every step):\n",
				STEPS_SHOWN);
		else
			fprintf(f, "Steps       every straggle, longest first:\n");
		for (size_t k = 0; k < m && k < STEPS_SHOWN; k++) {
			const struct aligned *a = &R.st[idx[k]];
			const struct eng_step *s = R.at[a->last][idx[k]];
			struct eng_excess ex[RANK_EXCESS_MAX];
			int ne = relative_excess(&R, idx[k], a->last, ex);

			fprintf(f, "  step %" PRIu64 "%s: rank %d last, +%s over the median rank", a->step,
				repeat_note(y, sizeof(y), a->repeat), a->last,
				report_fmt_ns(x, sizeof(x), a->behind_ns));
			for (int c = 0, shown = 0; c < ne && shown < 2; c++) {
				if (shown && ex[c].ns * 20 < a->behind_ns)
					break;
				fprintf(f, "%s%s +%s", shown ? "; " : ": ", eng_cause_name(ex[c].cause),
					report_fmt_ns(x, sizeof(x), ex[c].ns));
				report_cause_phrase(r[a->last].e, s, ex[c].cause, &ex[c].who, ex[c].has_who,
						    ex[c].processes, f);
				shown++;
			}
			fputc('\n', f);
		}
		if (m > STEPS_SHOWN)
			fprintf(f, "  ... and %zu more\n", m - STEPS_SHOWN);
		free(idx);
	}
	/* a rank behind in most steps by the same lead: never past the noise, which that lead sets */
	for (int i = 0; i < n; i++) {
		const struct rank_sum *rs = &R.rs[i];

		if (!rs->slower)
			continue;
		fputs("Slower      ", f);
		rank_label(f, &R, i);
		fprintf(f, " was last in %" PRIu64 " of %" PRIu64 " steps, by %s at the median: slower "
			"throughout, not in bursts", rs->last, steps_had(&R, 2),
			report_fmt_ns(x, sizeof(x), median_of(rs->lead, rs->last)));
		print_causes(f, r[i].e, rs->last_cause_ns, rs->last_who);
		fputc('\n', f);
	}
	free(order);
	ranks_free(&R);
	return ferror(f) ? -EIO : 0;
}

int report_ranks_json(const struct rank_trace *r, int n, FILE *f)
{
	struct ranks R;
	struct jw w;
	int *order;

	if (ranks_build(&R, r, n))
		return -ENOMEM;
	order = rank_order(&R);
	if (!order) {
		ranks_free(&R);
		return -ENOMEM;
	}
	jw_init(&w, f, true);
	jw_obj(&w);
	jw_key(&w, "schema");
	jw_obj(&w);
	jw_key(&w, "name");
	jw_str(&w, RANKS_SCHEMA_NAME);
	jw_key(&w, "version");
	jw_u64(&w, RANKS_SCHEMA_VERSION);
	jw_obj_end(&w);
	jw_key(&w, "ranks");
	jw_arr(&w);
	for (int i = 0; i < n; i++) {
		struct eng_target t;

		engine_target(r[i].e, &t);
		jw_obj(&w);
		jw_key(&w, "rank");
		jw_u64(&w, (uint64_t)i);
		jw_key(&w, "file");
		jw_str(&w, r[i].path);
		jw_key(&w, "target");
		jw_obj(&w);
		jw_key(&w, "pid");
		jw_u64(&w, t.pid);
		jw_key(&w, "comm");
		jw_strn(&w, t.comm, strnlen(t.comm, SB_COMM_LEN));
		jw_obj_end(&w);
		{
			char comm[SB_COMM_LEN + 1];
			uint32_t pid = rank_process(&r[i], comm, sizeof(comm));

			jw_key(&w, "process");
			jw_obj(&w);
			jw_key(&w, "pid");
			jw_u64(&w, pid);
			jw_key(&w, "comm");
			jw_str(&w, comm);
			jw_obj_end(&w);
		}
		jw_key(&w, "identity");
		report_json_identity(&w, r[i].e);
		jw_key(&w, "complete_steps");
		jw_u64(&w, R.sum[i].ncomplete);
		jw_key(&w, "p50_ns");
		jw_u64(&w, R.sum[i].p50);
		jw_key(&w, "p99_ns");
		jw_u64(&w, R.sum[i].p99);
		jw_key(&w, "collectives_seen");
		jw_bool(&w, r[i].coll_ns != NULL);
		jw_key(&w, "cut_short");
		jw_bool(&w, rank_cut(&r[i]) != NULL);
		jw_key(&w, "cut_short_reason");
		if (rank_cut(&r[i]))
			jw_str(&w, rank_cut(&r[i]));
		else
			jw_null(&w);
		jw_key(&w, "corrupt");
		jw_bool(&w, r[i].corrupt);
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	jw_key(&w, "collectives_seen");
	jw_bool(&w, ranks_collectives(r, n));
	jw_key(&w, "noise_ns");
	jw_u64(&w, R.noise_ns);
	jw_key(&w, "steps");
	jw_arr(&w);
	for (size_t j = 0; j < R.nst; j++) {
		const struct aligned *a = &R.st[j];

		jw_obj(&w);
		jw_key(&w, "step");
		jw_u64(&w, a->step);
		if (a->repeat) {
			jw_key(&w, "repeat");
			jw_u64(&w, a->repeat);
		}
		jw_key(&w, "own_ns");
		jw_arr(&w);
		for (int i = 0; i < n; i++) {
			if (R.at[i][j])
				jw_u64(&w, R.own[i][j]);
			else
				jw_null(&w);
		}
		jw_arr_end(&w);
		jw_key(&w, "duration_ns");
		jw_arr(&w);
		for (int i = 0; i < n; i++) {
			if (R.at[i][j])
				jw_u64(&w, R.at[i][j]->duration_ns);
			else
				jw_null(&w);
		}
		jw_arr_end(&w);
		if (a->last >= 0) {
			jw_key(&w, "last_rank");
			jw_u64(&w, (uint64_t)a->last);
			jw_key(&w, "behind_ns");
			jw_u64(&w, a->behind_ns);
			jw_key(&w, "straggle");
			jw_bool(&w, a->straggle);
			/* why, when it straggled; empty otherwise */
			struct eng_excess ex[RANK_EXCESS_MAX];
			int ne = a->straggle ? relative_excess(&R, j, a->last, ex) : 0;

			jw_key(&w, "blame");
			report_json_excess(&w, r[a->last].e, ex, ne);
		}
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	jw_key(&w, "stragglers");
	jw_arr(&w);
	for (int k = 0; k < n; k++) {
		const struct rank_sum *rs = &R.rs[order[k]];
		int causes[ENG_NCAUSE], nc = top_causes(rs->cause_ns, causes);

		jw_obj(&w);
		jw_key(&w, "rank");
		jw_u64(&w, (uint64_t)order[k]);
		jw_key(&w, "last");
		jw_u64(&w, rs->last);
		jw_key(&w, "straggles");
		jw_u64(&w, rs->straggles);
		jw_key(&w, "behind_ns");
		jw_u64(&w, rs->behind_total);
		jw_key(&w, "median_behind_ns");
		jw_u64(&w, median_of(rs->behind, rs->straggles));
		jw_key(&w, "slower_throughout");
		jw_bool(&w, rs->slower);
		jw_key(&w, "median_lead_ns");
		jw_u64(&w, median_of(rs->lead, rs->last));
		jw_key(&w, "causes");
		jw_arr(&w);
		for (int c = 0; c < nc; c++) {
			jw_obj(&w);
			jw_key(&w, "cause");
			jw_str(&w, eng_cause_name(causes[c]));
			jw_key(&w, "ns");
			jw_u64(&w, rs->cause_ns[causes[c]]);
			const struct culprit_sum *cs = top_culprit(rs->who[causes[c]]);

			if (cs)
				report_json_culprit(&w, r[order[k]].e, &cs->who);
			jw_obj_end(&w);
		}
		jw_arr_end(&w);
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	jw_obj_end(&w);
	free(order);
	ranks_free(&R);
	return ferror(f) ? -EIO : 0;
}

/*
 * Perfetto (Chrome JSON): a process per rank, on the rank's own clock shifted so
 * that its first step starts at 0 (the hosts' clocks differ); its steps on one
 * track, each straggle on a second with its lead and causes (schemas/report.md,
 * "Ranks"). The ranks' own detail is in each trace's report.
 */
static void pf_rank_slice(FILE *f, bool *first, int pid, int tid, const char *name, const char *cat,
			  uint64_t s, uint64_t dur, const char *args)
{
	fputs(*first ? "" : ",\n", f);
	*first = false;
	fprintf(f, "{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"name\":\"", pid, tid);
	json_escape(f, name, strlen(name));
	fprintf(f, "\",\"cat\":\"%s\",\"ts\":%" PRIu64 ".%03" PRIu64 ",\"dur\":%" PRIu64 ".%03" PRIu64
		",\"args\":{%s}}", cat, s / 1000, s % 1000, dur / 1000, dur % 1000, args);
}

static void pf_rank_meta(FILE *f, bool *first, const char *what, int pid, int tid, const char *name)
{
	fputs(*first ? "" : ",\n", f);
	*first = false;
	fprintf(f, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%d", what, pid);
	if (tid >= 0)
		fprintf(f, ",\"tid\":%d", tid);
	fputs(",\"args\":{\"name\":\"", f);
	json_escape(f, name, strlen(name));
	fputs("\"}}", f);
}

int report_ranks_perfetto(const struct rank_trace *r, int n, FILE *f)
{
	struct ranks R;
	bool first = true;
	char name[96], args[512];

	if (ranks_build(&R, r, n))
		return -ENOMEM;
	fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
	for (int i = 0; i < n; i++) {
		uint64_t base = UINT64_MAX;

		for (size_t j = 0; j < R.nst; j++)
			if (R.at[i][j] && R.at[i][j]->start_ns < base)
				base = R.at[i][j]->start_ns;
		for (size_t j = 0; j < R.nst; j++) {
			const struct eng_step *s = R.at[i][j];
			const struct aligned *a = &R.st[j];
			bool mine = a->last == i && a->straggle;

			if (!s)
				continue;
			snprintf(args, sizeof(args), "\"step\":%" PRIu64 ",\"duration_ns\":%" PRIu64
				 ",\"own_ns\":%" PRIu64 ",\"last\":%s,\"straggle\":%s", a->step,
				 s->duration_ns, R.own[i][j], a->last == i ? "true" : "false",
				 mine ? "true" : "false");
			snprintf(name, sizeof(name), "step %" PRIu64 "%s", a->step, mine ? " (straggle)" : "");
			pf_rank_slice(f, &first, i + 1, 1, name, "step", s->start_ns - base, s->duration_ns,
				      args);
			if (!mine)
				continue;
			/* the straggle: its lead, and why */
			struct eng_excess ex[RANK_EXCESS_MAX];
			int ne = relative_excess(&R, j, i, ex);
			size_t o = (size_t)snprintf(args, sizeof(args), "\"step\":%" PRIu64
						    ",\"behind_ns\":%" PRIu64, a->step, a->behind_ns);

			uint64_t by_cause[ENG_NCAUSE] = { 0 };

			for (int k = 0; k < ne; k++)
				by_cause[ex[k].cause] += ex[k].ns;
			for (int c = 0; c < ENG_NCAUSE && o < sizeof(args); c++)
				if (by_cause[c])
					o += (size_t)snprintf(args + o, sizeof(args) - o,
							      ",\"%s_ns\":%" PRIu64, eng_cause_name(c),
							      by_cause[c]);
			snprintf(name, sizeof(name), "+%.2f ms%s%s", a->behind_ns / 1e6, ne ? ": " : "",
				 ne ? eng_cause_name(ex[0].cause) : "");
			pf_rank_slice(f, &first, i + 1, 2, name, "straggle", s->start_ns - base,
				      s->duration_ns, args);
		}
		{
			char comm[SB_COMM_LEN + 1];
			uint32_t pid = rank_process(&r[i], comm, sizeof(comm));

			snprintf(name, sizeof(name), "rank %d: %.16s[%" PRIu32 "]%s", i, comm, pid,
				 !rank_cut(&r[i]) ? "" : r[i].corrupt ? " (trace corrupt)" :
				 " (trace cut short)");
		}
		pf_rank_meta(f, &first, "process_name", i + 1, -1, name);
		pf_rank_meta(f, &first, "thread_name", i + 1, 1, "steps");
		pf_rank_meta(f, &first, "thread_name", i + 1, 2, "straggles");
	}
	fputs("\n]}\n", f);
	ranks_free(&R);
	return ferror(f) ? -EIO : 0;
}
