// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * attach's view on a terminal: instead of a line per step (a 10 ms trainer
 * makes 100 a second), one screen redrawn a few times a second, as top does:
 * the step time's percentiles, the tail episode in progress or the last one,
 * what the tail steps were blamed on, who took the trainer's CPUs, the
 * tracer's own cost, and the last tail steps as attach's lines. Each line is
 * cut to the terminal's width.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cmd/top.h"
#include "base/util.h"
#include "report/report.h"

#define RECENT 6                    /* tail step lines kept */
#define REDRAW_NS 250000000ull      /* at most 4 redraws a second */

struct top {
	uint64_t start_ns, drawn_ns;
	uint64_t steps, last_step;
	bool any;
	/* the tail episode: consecutive tail steps with one top cause and culprit */
	bool ep_open, ep_any;
	uint64_t ep_first, ep_last, ep_ns;
	int ep_cause;
	char ep_who[64];
	/* the last tail steps, as attach's lines */
	char recent[RECENT][256];
	unsigned nrecent, next;
	const char *note;               /* what the live capture says of itself */
};

struct top *top_new(uint64_t start_ns)
{
	struct top *t = calloc(1, sizeof(*t));

	if (t)
		t->start_ns = start_ns;
	return t;
}

void top_free(struct top *t)
{
	free(t);
}

static void who_name(const struct eng_excess *x, char *buf, size_t len)
{
	if (x->has_who && x->who.comm[0])
		snprintf(buf, len, "%s[%" PRIu32 "]", x->who.comm, x->who.pid);
	else
		snprintf(buf, len, "-");
}

void top_step(struct top *t, const struct engine *e, const struct eng_step *s,
	      const struct eng_summary *sum)
{
	struct eng_excess ex[ENG_NCAUSE];
	char who[64];
	int n;

	t->steps++;
	t->last_step = s->step;
	t->any = true;
	if (!s->tail || s->incomplete) {
		t->ep_open = false;
		return;
	}
	n = engine_step_excess(e, s, sum, ex, ENG_NCAUSE);
	if (n > 0)
		who_name(&ex[0], who, sizeof(who));
	else
		snprintf(who, sizeof(who), "-");
	if (t->ep_open && n > 0 && ex[0].cause == t->ep_cause && !strcmp(who, t->ep_who) &&
	    s->step == t->ep_last + 1) {
		t->ep_last = s->step;
		t->ep_ns += s->duration_ns > sum->p50 ? s->duration_ns - sum->p50 : 0;
	} else {
		t->ep_open = t->ep_any = true;
		t->ep_first = t->ep_last = s->step;
		t->ep_ns = s->duration_ns > sum->p50 ? s->duration_ns - sum->p50 : 0;
		t->ep_cause = n > 0 ? ex[0].cause : ENG_UNKNOWN;
		snprintf(t->ep_who, sizeof(t->ep_who), "%s", who);
	}
	{
		/* the step in a few words, its causes first (a line cut to the width keeps them) */
		char *r = t->recent[t->next], d[32], x[32];
		size_t len = sizeof(t->recent[0]);
		int o = snprintf(r, len, "step %" PRIu64 "  %s  +%s:", s->step,
				 report_fmt_ns(d, sizeof(d), s->duration_ns),
				 report_fmt_ns(x, sizeof(x), s->duration_ns > sum->p50 ?
					       s->duration_ns - sum->p50 : 0));

		for (int i = 0; i < n && i < 3 && o > 0 && (size_t)o < len; i++) {
			who_name(&ex[i], who, sizeof(who));
			o += snprintf(r + o, len - (size_t)o, "%s %s +%s%s%s", i ? ";" : "",
				      eng_cause_name(ex[i].cause),
				      report_fmt_ns(x, sizeof(x), ex[i].ns),
				      ex[i].has_who ? " by " : "", ex[i].has_who ? who : "");
		}
		t->next = (t->next + 1) % RECENT;
		if (t->nrecent < RECENT)
			t->nrecent++;
	}
}

/* the terminal's size, 80 x 24 if not known */
static void term_size(unsigned *cols, unsigned *rows)
{
	struct winsize w;

	*cols = 80;
	*rows = 24;
	if (!ioctl(STDOUT_FILENO, TIOCGWINSZ, &w)) {
		if (w.ws_col >= 20)
			*cols = w.ws_col;
		if (w.ws_row >= 4)
			*rows = w.ws_row;
	}
}

/*
 * One line of the screen, cut to the width (in characters). Names in it are
 * the trainer's to choose: a control byte, a C1 control or a byte that is not
 * valid UTF-8 is shown as '?', so that no name can move the cursor or
 * reprogram the terminal.
 */
static void put_line(FILE *f, unsigned cols, const char *str)
{
	const unsigned char *s = (const unsigned char *)str, *end = s + strlen(str);
	unsigned n = 0;

	while (*s && *s != '\n' && ++n < cols) {
		size_t l = utf8_printable(s, (size_t)(end - s));

		if (!l) {
			fputc('?', f);
			s++;
		} else {
			fwrite(s, 1, l, f);
			s += l;
		}
	}
	fputs("\033[K\n", f); /* the rest of the line cleared */
}

int top_draw(struct top *t, const struct engine *e, uint64_t now, bool force, FILE *out)
{
	struct eng_summary sum;
	struct eng_interferer_group itf[8];
	struct eng_target tg;
	struct eng_capture cap;
	char line[1024], a[32], b[32], c[32], d[32], nm[64];
	unsigned cols, rows, used = 0, nshow;
	int ni, k = 0, order[ENG_NCAUSE];
	uint64_t total = 0;

	if (!force && now - t->drawn_ns < REDRAW_NS)
		return 0;
	t->drawn_ns = now;
	term_size(&cols, &rows);
	engine_running_summary(e, &sum);
	engine_target(e, &tg);
	engine_capture(e, &cap);
	fputs("\033[H", out); /* home: redrawn over the last screen */
	snprintf(line, sizeof(line), "stepblame attach  %s[%" PRIu32 "]  %.1f s  %" PRIu64
		 " steps  %s", eng_target_name(&tg)[0] ? eng_target_name(&tg) : "?", tg.pid,
		 (now - t->start_ns) / 1e9, sum.nsteps, cap.gpu_timeline ? "GPU timeline" : "host-only");
	put_line(out, cols, line);
	if (t->note)
		put_line(out, cols, t->note);
	if (!sum.ncomplete) {
		put_line(out, cols, "step time   no complete step yet");
	} else {
		snprintf(line, sizeof(line), "step time   P50 %s   P99 %s   max %s   tail %" PRIu64
			 " steps (> %s)", report_fmt_ns(a, sizeof(a), sum.p50),
			 report_fmt_ns(b, sizeof(b), sum.p99), report_fmt_ns(c, sizeof(c), sum.max),
			 sum.ntail, report_fmt_ns(d, sizeof(d), sum.tail_threshold_ns));
		put_line(out, cols, line);
	}
	if (cap.gpu_timeline && sum.gpu_busy_share >= 0) {
		snprintf(line, sizeof(line), "GPU         busy %.1f%% of step time, idle median %s",
			 100 * sum.gpu_busy_share, report_fmt_ns(a, sizeof(a), sum.idle_median));
		put_line(out, cols, line);
	}
	snprintf(line, sizeof(line), "tracer      median %s a step (%.2f%%, P99 %.2f%%)%s",
		 report_fmt_ns(a, sizeof(a), sum.tracer_median_ns), sum.tracer_p50_ppm / 1e4,
		 sum.tracer_p99_ppm / 1e4, sum.sampled_steps ? ", allocator sampled" : "");
	put_line(out, cols, line);
	if (t->ep_any) {
		if (t->ep_first == t->ep_last)
			snprintf(b, sizeof(b), "step %" PRIu64, t->ep_first);
		else
			snprintf(b, sizeof(b), "steps %" PRIu64 "-%" PRIu64, t->ep_first, t->ep_last);
		snprintf(line, sizeof(line), "%s %s: %s by %s, +%s in all",
			 t->ep_open ? "tail now   " : "last tail  ", b, eng_cause_name(t->ep_cause),
			 t->ep_who, report_fmt_ns(a, sizeof(a), t->ep_ns));
		put_line(out, cols, line);
	} else {
		put_line(out, cols, "tail        none yet");
	}
	/* what the time was blamed on, largest first */
	for (int i = 0; i < ENG_NCAUSE; i++) {
		total += sum.cause_total[i];
		if (sum.cause_total[i])
			order[k++] = i;
	}
	for (int i = 1; i < k; i++)
		for (int j = i; j > 0 && sum.cause_total[order[j]] > sum.cause_total[order[j - 1]]; j--) {
			int x = order[j];

			order[j] = order[j - 1];
			order[j - 1] = x;
		}
	{
		int o = snprintf(line, sizeof(line), "causes     ");

		for (int i = 0; i < k && i < 6 && o > 0 && (size_t)o < sizeof(line); i++)
			o += snprintf(line + o, sizeof(line) - (size_t)o, " %s %.0f%%",
				      eng_cause_name(order[i]), 100.0 * sum.cause_total[order[i]] / total);
		if (!k)
			snprintf(line, sizeof(line), "causes      none yet");
		put_line(out, cols, line);
	}
	ni = engine_interferer_groups(e, itf, (int)(sizeof(itf) / sizeof(itf[0])));
	{
		int o = snprintf(line, sizeof(line), "took CPUs  "), shown = 0;

		for (int i = 0; i < ni && shown < 4 && o > 0 && (size_t)o < sizeof(line); i++) {
			if (itf[i].own)
				continue;
			o += snprintf(line + o, sizeof(line) - (size_t)o, " %s%s %s",
				      report_group_name(nm, sizeof(nm), &itf[i]),
				      itf[i].tracer ? " (the tracer)" : "",
				      report_fmt_ns(a, sizeof(a), itf[i].ns));
			shown++;
		}
		if (!shown)
			snprintf(line, sizeof(line), "took CPUs   nobody yet");
		put_line(out, cols, line);
	}
	/*
	 * As many tail steps as fit: a screen that scrolled would no longer
	 * start at home (the lines above, and one for the cursor at the end)
	 */
	used = 10 + (t->note != NULL) + (cap.gpu_timeline && sum.gpu_busy_share >= 0);
	nshow = rows > used ? rows - used : 0;
	if (nshow > t->nrecent)
		nshow = t->nrecent;
	put_line(out, cols, "");
	put_line(out, cols, t->nrecent ? "last tail steps:" : "last tail steps: none yet");
	for (unsigned i = t->nrecent - nshow; i < t->nrecent; i++)
		put_line(out, cols, t->recent[(t->next + RECENT - t->nrecent + i) % RECENT]);
	fputs("\033[J", out); /* below: cleared */
	return fflush(out) ? -1 : 0;
}

void top_note(struct top *t, const char *note)
{
	t->note = note;
}

void top_begin(FILE *out)
{
	fputs("\033[H\033[2J", out);
	fflush(out);
}
