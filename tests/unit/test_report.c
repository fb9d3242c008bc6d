// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The report formats against their contract: JSON validates against
 * schemas/report.schema.json (with python3's jsonschema when it is installed,
 * and always with the small checker tests/schema_check.py, which knows the
 * keywords the schema uses), JSONL lines are the steps[] objects, Perfetto JSON has its tracks,
 * and `stepblame report` on a real trace file writes atomically, says when a
 * trace was cut short, and fails with one line on bad input.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <elfutils/libdwelf.h>
#include <gelf.h>

#include <zlib.h>

#include "test.h"
#include "base/json.h"
#include "base/util.h"
#include "cmd/cmds.h"
#include "engine_synth.h"
#include "report/symbols.h"


static char dir[64];
static char checker[128];
static bool have_python;

static const char *tpath(const char *name)
{
	static char buf[4][256];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, name);
	return buf[i];
}

/* python3 CHECKER MODE SCHEMA FILE [ARG]; 0 when it says OK, else its message */
static int pycheck(const char *mode, const char *file, const char *arg, char *msg, size_t len)
{
	char cmd[1024], line[512] = "";
	FILE *p;
	int st;

	snprintf(cmd, sizeof(cmd), "python3 %s %s schemas/report.schema.json %s %s 2>&1", checker,
		 mode, file, arg ? arg : "");
	p = popen(cmd, "r");
	if (!p) {
		snprintf(msg, len, "popen: %s", strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), p))
		snprintf(msg, len, "%s", line);
	st = pclose(p);
	msg[strcspn(msg, "\n")] = 0;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

static void rich_world(struct world *w, unsigned nsteps)
{
	struct sopt plain = { .pre = 5 * MS, .gpu = 80 * MS };
	struct sopt pre = { .pre = 5 * MS, .gpu = 80 * MS, .len = 30 * MS, .inj = inj_preempt };
	uint64_t S = 10 * SEC;

	world_init(w);
	for (unsigned k = 0; k < nsteps; k++) {
		struct sopt o = k % 9 == 4 ? pre : plain;

		o.pre += (k % 5) * 100 * US;
		if (k % 9 == 7) {
			/* a slow munmap and a few faults */
			w_interval(w, SB_EV_MMSYS, S + 2 * MS, S + 4 * MS, T_LAUNCHER, SB_SYS_MUNMAP);
			for (int i = 0; i < 100; i++)
				w_fault(w, S + 4 * MS + 10 * US + i * 3 * US, T_LAUNCHER, 0, i);
		}
		S = std_step(w, S, k, &o);
	}
	w_step(w, S, T_LAUNCHER, nsteps);
}

static bool write_file(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "w");
	bool ok;

	if (!f)
		return false;
	ok = fwrite(data, 1, len, f) == len;
	return !fclose(f) && ok;
}

static char *render(struct engine *e, int (*fn)(const struct engine *, FILE *), size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	if (len)
		*len = 0;
	if (!f)
		return NULL;
	fn(e, f);
	fclose(f);
	if (len)
		*len = n;
	return buf;
}

/* the first line a shell command prints (its stderr too); "" if none */
static void first_line(const char *cmd, char *line, size_t len)
{
	FILE *p = popen(cmd, "r");

	line[0] = 0;
	if (p && !fgets(line, (int)len, p))
		line[0] = 0;
	if (p)
		pclose(p);
}

static struct engine *run(struct world *w, const struct engine_opts *o)
{
	struct engine *e = new_engine(o);

	if (e) {
		world_feed(e, w, 800 * MS);
		engine_finish(e);
	}
	return e;
}

/* preempted by a task whose comm is a terminal escape sequence (any user can name a process) */
static void inj_evil(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_RUNNABLE);
	w_runslice(w, at, at + len, T_CPU, 901, 901, "\x1b]0;pwn\x07\xc2\x9b" "2J\xff");
	w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
}

/* what reaches a terminal from a name the target chose: no control, no reordering */
static void t_printable(void)
{
	static const struct { const char *in, *out; } cases[] = {
		{ "plain name", "plain name" },
		{ "caf\xc3\xa9 \xe6\x97\xa5", "caf\xc3\xa9 \xe6\x97\xa5" },       /* é and a CJK character stay */
		{ "\x1b[2J", "?[2J" },                                             /* ESC */
		{ "a\xc2\x9b" "2Jb", "a??2Jb" },                                    /* CSI as C1 */
		{ "\xc2\x9d" "0;PWN\xc2\x9c", "??0;PWN??" },                        /* OSC ... ST */
		{ "exe.\xe2\x80\xae" "fdp", "exe.???fdp" },                         /* RIGHT-TO-LEFT OVERRIDE */
		{ "x\xe2\x81\xa6y", "x???y" },                                     /* LEFT-TO-RIGHT ISOLATE */
		{ "\xc0\xaf\xed\xa0\x80", "?????" },                              /* overlong, surrogate */
		{ "tab\there\x7f", "tab?here?" },
	};
	char buf[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		sb_printable(buf, sizeof(buf), cases[i].in, strlen(cases[i].in));
		CHECK(!strcmp(buf, cases[i].out), "case %zu: '%s', want '%s'", i, buf, cases[i].out);
	}
	/* cut at the buffer, never inside a character */
	sb_printable(buf, 5, "ab\xc3\xa9\xc3\xa9", 6);
	CHECK(!strcmp(buf, "ab\xc3\xa9"), "cut: '%s'", buf);

	/* a frame: a function name from the target's symbol table or perf map, its file's name */
	{
		struct sym_frame f = { .addr = 0x1000, .func = "wait\x1b]0;PWN\x07\xc2\x9b" "2J",
				       .module = "/x/lib\xe2\x80\xae" "os.so", .off = 0x24 };
		char fr[512];

		sym_frame_text(&f, fr, sizeof(fr));
		CHECK(!strcmp(fr, "wait?]0;PWN???2J+0x24 (lib???os.so)"), "frame: '%s'", fr);
	}
	/* JSON keeps them, as escapes: the same string decoded, nothing raw that a terminal or a page acts on */
	static const struct { const char *in, *out; } js[] = {
		{ "caf\xc3\xa9\xe6\x97\xa5", "caf\xc3\xa9\xe6\x97\xa5" },
		{ "a\xc2\x9b" "2J", "a\\u009b2J" },
		{ "exe.\xe2\x80\xae" "fdp\xe2\x81\xa9", "exe.\\u202efdp\\u2069" },
		{ "\xc2\xa0\xe2\x80\xaf", "\xc2\xa0\xe2\x80\xaf" },            /* no-break spaces stay */
		{ "\xc0\xaf", "\\ufffd\\ufffd" },
	};
	for (size_t i = 0; i < sizeof(js) / sizeof(js[0]); i++) {
		char *out = NULL;
		size_t olen = 0;
		FILE *f = open_memstream(&out, &olen);

		json_escape(f, js[i].in, strlen(js[i].in));
		fclose(f);
		CHECK(out && !strcmp(out, js[i].out), "json case %zu: '%s', want '%s'", i, out, js[i].out);
		free(out);
	}
}

static void t_text_escapes_names(void)
{
	struct sopt plain = { .pre = 5 * MS, .gpu = 80 * MS };
	struct sopt evil = { .pre = 5 * MS, .gpu = 80 * MS, .len = 30 * MS, .inj = inj_evil };
	uint64_t S = 10 * SEC;
	struct world w;
	struct engine *e;
	size_t len, ctl = 0;
	char *text;

	world_init(&w);
	/* the interferer a followed child: its role, named after it, is the target's text too */
	w_thread_of(&w, 901, 901, "\x1b]0;pwn\x07\xc2\x9b" "2J\xff\nppid=100\ncmdline=x\n");
	for (unsigned k = 0; k < 30; k++)
		S = std_step(&w, S, k, k == 20 ? &evil : &plain);
	w_step(&w, S, T_LAUNCHER, 30);
	e = run(&w, NULL);
	REQUIRE(e, "engine");
	text = render(e, report_text, &len);
	REQUIRE(text, "render");
	for (size_t i = 0; i < len; i++)
		ctl += ((unsigned char)text[i] < 0x20 && text[i] != '\n') || text[i] == 0x7f ||
		       (unsigned char)text[i] == 0xff ||
		       ((unsigned char)text[i] == 0xc2 && i + 1 < len &&
			(unsigned char)text[i + 1] >= 0x80 && (unsigned char)text[i + 1] < 0xa0);
	CHECK(ctl == 0, "%zu control or non-UTF-8 bytes in the text report", ctl);
	CHECK(strstr(text, "?]0;pwn???2J?[901]"), "the interferer is not named, escaped: %s",
	      strstr(text, "[901]") ? strstr(text, "[901]") - 14 : "(absent)");
	CHECK(strstr(text, "(?]0;pwn???2J?, child process 1 of "), "its role not given, escaped: %s",
	      strstr(text, "Interferers") ? strstr(text, "Interferers") : "(absent)");
	free(text);
	engine_free(e);
	world_free(&w);
}

/* preempted by a task named to end the page's script element */
static void inj_script(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_RUNNABLE);
	w_runslice(w, at, at + len, T_CPU, 903, 903, "</script><b>");
	w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
}

/* occurrences of needle in the n bytes at hay */
static size_t count_of(const char *hay, size_t n, const char *needle)
{
	size_t k = 0, l = strlen(needle);

	for (const char *p = hay; (p = memmem(p, n - (size_t)(p - hay), needle, l)); p += l)
		k++;
	return k;
}

/*
 * The HTML page (html.c): the page's own two scripts and nothing a thread
 * name could add; its data decodes (gzip, base64) to the steps and causes of
 * the engine, with the hostile name as plain text; the same engine gives the
 * same bytes.
 */
static void t_html_page(void)
{
	struct sopt plain = { .pre = 5 * MS, .gpu = 80 * MS };
	struct sopt evil = { .pre = 5 * MS, .gpu = 80 * MS, .len = 30 * MS, .inj = inj_script };
	uint64_t S = 10 * SEC;
	struct world w;
	struct engine *e;
	char *a, *b, cmd[2048], line[512];
	size_t la, lb;

	world_init(&w);
	for (unsigned k = 0; k < 40; k++)
		S = std_step(&w, S, k, k == 20 || k == 21 ? &evil : &plain);
	w_step(&w, S, T_LAUNCHER, 40);
	e = run(&w, NULL);
	REQUIRE(e, "engine");
	a = render(e, report_html, &la);
	b = render(e, report_html, &lb);
	REQUIRE(a && b, "render");
	CHECK(la == lb && !memcmp(a, b, la), "two pages of one engine differ (%zu, %zu bytes)", la, lb);
	CHECK(count_of(a, la, "</script") == 2 && count_of(a, la, "<script") == 2,
	      "%zu script elements end, %zu begin: the data and the code only",
	      count_of(a, la, "</script"), count_of(a, la, "<script"));
	CHECK(!memmem(a, la, "<b>", 3), "the hostile name is in the page as markup");
	if (!have_python) {
		free(a);
		free(b);
		engine_free(e);
		world_free(&w);
		SKIP("python3 is not installed");
	}
	REQUIRE(write_file(tpath("r.html"), a, la), "write");
	snprintf(cmd, sizeof(cmd), "python3 -c \"\n"
		 "import base64, gzip, json, re\n"
		 "s = open('%s').read()\n"
		 "m = re.search(r'id=.sb-data. data-encoding=.gzip.base64.>([A-Za-z0-9+/=]*)</script>', s)\n"
		 "d = json.loads(gzip.decompress(base64.b64decode(m.group(1))))\n"
		 "cpu = d['causes'].index('cpu_wait')\n"
		 "hostile = [n for n in d['names'] if n.startswith('</script><b>')]\n"
		 "tails = [d['step_first'] + i for i in d['tail']]\n"
		 "ok = len(d['dur']) == 41 and hostile and tails[:2] == [20, 21] and d['dur'][20] > d['dur'][0] + 25000 and d['cause_tail'][cpu] >= 55000000\n"
		 "print('OK' if ok else 'steps %%d, names %%s, tail steps %%s, durations %%s' %% (len(d['dur']), d['names'], tails, d['dur'][18:23]))\n"
		 "\" 2>&1", tpath("r.html"));
	first_line(cmd, line, sizeof(line));
	CHECK(!strncmp(line, "OK", 2), "%s", line);
	free(a);
	free(b);
	engine_free(e);
	world_free(&w);
}

/* preempted for len by pid 902 "other" */
static void inj_other(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_RUNNABLE);
	w_runslice(w, at, at + len, T_CPU, 902, 902, "other");
	w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
}

/*
 * Ten consecutive steps preempted by one task are one episode, listed even
 * when more than ten single tail steps are longer than each of them; the
 * single steps still get their own lines, and a run broken by a step of
 * another cause is two episodes.
 */
static void t_text_tail_episodes(void)
{
	struct sopt plain = { .pre = 5 * MS, .gpu = 80 * MS };
	struct sopt run10 = { .pre = 5 * MS, .gpu = 80 * MS, .len = 20 * MS, .inj = inj_preempt };
	struct sopt big = { .pre = 5 * MS, .gpu = 80 * MS, .len = 60 * MS, .inj = inj_other };
	uint64_t S = 10 * SEC;
	struct world w;
	struct engine *e;
	char *text, *ep;

	world_init(&w);
	for (unsigned k = 0; k < 120; k++) {
		const struct sopt *o = &plain;

		if (k >= 20 && k < 30)
			o = &run10;
		else if (k == 40 || k == 41)
			o = &run10;
		else if (k >= 50 && k < 62 && k % 2 == 0)
			o = &big;
		S = std_step(&w, S, k, o);
	}
	w_step(&w, S, T_LAUNCHER, 120);
	e = run(&w, NULL);
	REQUIRE(e, "engine");
	text = render(e, report_text, NULL);
	REQUIRE(text, "render");
	ep = strstr(text, "steps 20-29 (10 steps, +");
	CHECK(ep, "no episode for steps 20-29:\n%s", text);
	CHECK(ep && strstr(ep, "cpu_wait +200 ms in all — launcher[101] preempted by noisy[900]"),
	      "the episode's cause: %.160s", ep ? ep : "(absent)");
	CHECK(strstr(text, "steps 40-41 (2 steps"), "no episode for steps 40-41");
	/* the six 60 ms steps are not consecutive: one line each, longest first */
	for (unsigned k = 50; k < 62; k += 2) {
		char want[32];

		snprintf(want, sizeof(want), "  step %u: ", k);
		CHECK(strstr(text, want), "no line for step %u", k);
	}
	CHECK(!strstr(text, "more single steps"), "lines left out with only 6 single steps");
	CHECK(ep && ep < strstr(text, "  step 50: "), "the episode of 10 x 20 ms (200 ms over the "
	      "median in all) is not listed before the 60 ms step:\n%s", text);
	free(text);
	engine_free(e);
	world_free(&w);
}

/* preempted len: noisy takes 3/5 of it, another task the rest */
static void inj_shared(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	(void)arg;
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_RUNNABLE);
	w_runslice(w, at, at + len * 3 / 5, T_CPU, 900, 900, "noisy");
	w_runslice(w, at + len * 3 / 5, at + len, T_CPU, 902, 902, "other");
	w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
}

/*
 * An episode whose preemptor took 60% of its cpu_wait says so over the
 * episode's steps, as a single step's line does: the name alone would read
 * as the whole
 */
/*
 * 60 standard steps, 20-24 injected len by inj (its arg the step's number):
 * the text report (NULL if it failed), the engine and world to free
 */
static char *five_slow_steps(inject_fn inj, struct world *w, struct engine **e)
{
	struct sopt plain = { .pre = 5 * MS, .gpu = 80 * MS };
	uint64_t S = 10 * SEC;

	world_init(w);
	for (unsigned k = 0; k < 60; k++) {
		struct sopt slow = { .pre = 5 * MS, .gpu = 80 * MS, .len = 20 * MS, .inj = inj,
				     .arg = (void *)(uintptr_t)k };

		S = std_step(w, S, k, k >= 20 && k < 25 ? &slow : &plain);
	}
	w_step(w, S, T_LAUNCHER, 60);
	*e = run(w, NULL);
	return *e ? render(*e, report_text, NULL) : NULL;
}

static void t_text_episode_share(void)
{
	struct world w;
	struct engine *e;
	char *text = five_slow_steps(inj_shared, &w, &e), *ep;

	REQUIRE(text, "engine or render");
	ep = strstr(text, "steps 20-24 (5 steps, +");
	CHECK(ep && strstr(ep, "preempted by noisy[900] on CPU 0 (60.0 ms of 100 ms in these steps; "
			   "other tasks and the rest 40.0 ms)"), "%.400s", ep ? ep : text);
	free(text);
	engine_free(e);
	world_free(&w);
}

/* preempted len by one short-lived process of a storm, another each step (pid 920 + step) */
static void inj_storm_step(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	uint32_t pid = 920 + (uint32_t)(uintptr_t)arg;

	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_RUNNABLE);
	w_runslice(w, at, at + len, T_CPU, pid, pid, "stormer");
	w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
}

/*
 * Consecutive steps, each slowed by another process of one name: one
 * episode of that name, not five single steps of five culprits
 */
static void t_text_episode_crowd(void)
{
	struct world w;
	struct engine *e;
	char *text = five_slow_steps(inj_storm_step, &w, &e), *ep;

	REQUIRE(text, "engine or render");
	ep = strstr(text, "steps 20-24 (5 steps, +");
	CHECK(ep && strstr(ep, "preempted by stormer (several processes) on CPU 0") &&
	      !strstr(text, "  step 21: "), "%.400s", ep ? ep : text);
	free(text);
	engine_free(e);
	world_free(&w);
}

/* preempted 60 ms: noisy takes 15 ms, then 9 tasks 5 ms each */
static void inj_crowd(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	(void)arg;
	(void)len;
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_RUNNABLE);
	w_runslice(w, at, at + 15 * MS, T_CPU, 900, 900, "noisy");
	for (unsigned k = 0; k < 9; k++) {
		char name[16];

		snprintf(name, sizeof(name), "crowd%u", k);
		w_runslice(w, at + 15 * MS + k * 5 * MS, at + 20 * MS + k * 5 * MS, T_CPU, 910 + k,
			   910 + k, name);
	}
	w_switch_in(w, at + 60 * MS, T_LAUNCHER, T_CPU);
}

/* the step line names the largest preemptor with its share, not as the whole of the wait */
static void t_text_culprit_share(void)
{
	struct sopt plain = { .pre = 5 * MS, .gpu = 80 * MS };
	struct sopt crowd = { .pre = 5 * MS, .gpu = 80 * MS, .len = 60 * MS, .inj = inj_crowd };
	struct sopt run10 = { .pre = 5 * MS, .gpu = 80 * MS, .len = 20 * MS, .inj = inj_preempt };
	uint64_t S = 10 * SEC;
	struct world w;
	struct engine *e;
	char *text, *l;

	world_init(&w);
	for (unsigned k = 0; k < 40; k++)
		S = std_step(&w, S, k, k == 20 ? &crowd : k == 30 ? &run10 : &plain);
	w_step(&w, S, T_LAUNCHER, 40);
	e = run(&w, NULL);
	REQUIRE(e, "engine");
	text = render(e, report_text, NULL);
	REQUIRE(text, "render");
	l = strstr(text, "  step 20: ");
	CHECK(l && strstr(l, "preempted by noisy[900] on CPU 0 (15.0 ms of 60.0 ms in the step; 9 "
			  "other tasks and the rest 45.0 ms)"), "step 20's line: %.300s", l ? l : "(absent)");
	/* one task took it all: no share */
	l = strstr(text, "  step 30: ");
	CHECK(l && strstr(l, "preempted by noisy[900] on CPU 0  [tail]"), "step 30's line: %.300s",
	      l ? l : "(absent)");
	free(text);
	engine_free(e);
	world_free(&w);
}

static void t_json_validates(void)
{
	struct world w;
	struct engine *e;
	char *json, msg[512] = "";
	size_t len;

	if (!have_python)
		SKIP("python3 is not installed");
	rich_world(&w, 40);
	/* the recorder's host facts: its identity, and noisy[900] as the recorder itself */
	w_text(&w, SB_REC_HOST, 0, 0, "hostname=node-7\nboot_id=b00t\nclock_realtime_offset_ns=1000\n"
	       "stepblame_version=9.9.9\nagent_pid=900\n");
	e = run(&w, NULL);
	REQUIRE(e, "engine");
	json = render(e, report_json, &len);
	REQUIRE(json && write_file(tpath("r.json"), json, len), "write");
	CHECK(pycheck("doc", tpath("r.json"), NULL, msg, sizeof(msg)) == 0, "schema: %s", msg);
	{
		char cmd[1024], line[512];

		snprintf(cmd, sizeof(cmd), "python3 -c \"\n"
			 "import json\n"
			 "d = json.load(open('%s'))\n"
			 "i = d['identity']\n"
			 "t = [x for x in d['summary']['interferers'] if x.get('tracer')]\n"
			 "ok = (i['host'], i['boot_id'], i['stepblame_version'], i['agent_pid']) == ('node-7', 'b00t', '9.9.9', 900) and [x['pid'] for x in t] == [900]\n"
			 "print('OK' if ok else 'identity %%s, marked %%s' %% (i, t))\n"
			 "\" 2>&1", tpath("r.json"));
		first_line(cmd, line, sizeof(line));
		CHECK(!strncmp(line, "OK", 2), "%s", line);
	}
	free(json);
	engine_free(e);
	world_free(&w);
}

/*
 * A waker's activity besides its own code (inj_busy_loader): the text names
 * the file of its I/O and the region of its faults, and the JSON with
 * io_file and fault_region validates.
 */
static void t_waker_activity_io_faults(void)
{
	struct sopt plain = { .pre = 5 * MS, .gpu = 80 * MS };
	struct sopt inj = { .pre = 5 * MS, .gpu = 80 * MS, .len = 60 * MS, .inj = inj_busy_loader };
	uint64_t S = 10 * SEC;
	struct world w;
	struct engine *e;
	char *text, *json, msg[512] = "";
	size_t len;

	world_init(&w);
	w.fault_addr = ACT_MAP + 4096;
	for (unsigned k = 0; k < 12; k++)
		S = std_step(&w, S, k, k == 6 ? &inj : &plain);
	w_step(&w, S, T_LAUNCHER, 12);
	e = run(&w, NULL);
	REQUIRE(e, "engine");
	text = render(e, report_text, NULL);
	REQUIRE(text, "text");
	CHECK(strstr(text, "waited for loader[103], which was on CPU ") &&
	      strstr(text, ", in I/O 10.0 ms (fsync /data/shard3.bin)") &&
	      strstr(text, ", faulting 9.01 ms (in anon mapping 64 MiB)") &&
	      strstr(text, ", reclaiming memory 2.00 ms") && strstr(text, ", in the allocator 4.00 ms"),
	      "the waker's activity:\n%s", text);
	free(text);
	json = render(e, report_json, &len);
	REQUIRE(json, "json");
	CHECK(strstr(json, "\"io_call\": \"fsync\"") && strstr(json, "\"io_file\": \"/data/shard3.bin\"") &&
	      strstr(json, "\"faulting_ns\": 9007000") && strstr(json, "\"fault_region\": {"),
	      "waker_activity in JSON: %.400s", strstr(json, "waker_activity") ? strstr(json, "waker_activity") : json);
	if (have_python) {
		REQUIRE(write_file(tpath("wa.json"), json, len), "write");
		CHECK(pycheck("doc", tpath("wa.json"), NULL, msg, sizeof(msg)) == 0, "schema: %s", msg);
	}
	free(json);
	engine_free(e);
	world_free(&w);
}

/* ---- user stacks: symbolised from a real binary, in JSON that validates ---- */

struct elfinfo {
	char build_id[96];
	uint64_t text_vaddr, text_off, text_end;  /* the executable PT_LOAD */
	uint64_t fn[3];                           /* checkpoint_save, arena_reserve, main */
};

/* what the test needs of the ELF file at path, read with libelf */
static bool elf_info(const char *path, struct elfinfo *in)
{
	static const char *const names[3] = { "checkpoint_save", "arena_reserve", "main" };
	int fd = open(path, O_RDONLY);
	Elf *elf;
	Elf_Scn *scn = NULL;
	size_t nph;
	const void *id;
	ssize_t n;

	memset(in, 0, sizeof(*in));
	if (fd < 0)
		return false;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_getphdrnum(elf, &nph)) {
		close(fd);
		return false;
	}
	n = dwelf_elf_gnu_build_id(elf, &id);
	for (ssize_t i = 0; i < n && i < 40; i++)
		snprintf(in->build_id + 2 * i, 3, "%02x", ((const unsigned char *)id)[i]);
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
			in->text_vaddr = ph.p_vaddr & ~0xfffull;
			in->text_off = ph.p_offset & ~0xfffull;
			in->text_end = (ph.p_vaddr + ph.p_memsz + 0xfff) & ~0xfffull;
		}
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *nm;

			if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
			    !(nm = elf_strptr(elf, sh.sh_link, sym.st_name)))
				continue;
			for (int k = 0; k < 3; k++)
				if (!strcmp(nm, names[k]))
					in->fn[k] = sym.st_value;
		}
	}
	elf_end(elf);
	close(fd);
	return in->build_id[0] && in->text_end && in->fn[0] && in->fn[1] && in->fn[2];
}

#define LOAD_BIAS 0x555555000000ull
#define OLD_BIAS 0x7f0000000000ull   /* a mapping of the same file with another build id */
#define JIT_AT 0x7e0000001000ull

/*
 * Steps of which every ninth has a 30 ms munmap of the launcher (tail steps,
 * alloc), with a stack for each; mapping and perfmap records.
 */
static void stack_world(struct world *w, const char *prog, const struct elfinfo *in)
{
	struct sopt plain = { .pre = 5 * MS, .gpu = 80 * MS };
	char text[1024];
	const struct stream *h;
	uint64_t S = 10 * SEC;

	world_init(w);
	for (unsigned k = 0; k < 40; k++) {
		struct sopt o = plain;

		if (k % 9 == 7) {
			o.pre = 40 * MS;
			w_interval(w, SB_EV_MMSYS, S + 2 * MS, S + 32 * MS, T_LAUNCHER, SB_SYS_MUNMAP);
		}
		S = std_step(w, S, k, &o);
	}
	w_step(w, S, T_LAUNCHER, 40);
	snprintf(text, sizeof(text), "start=0x%llx\nend=0x%llx\noffset=0x%llx\nbuild_id=%s\n"
		 "deleted=0\npath=%s\n", (unsigned long long)(LOAD_BIAS + in->text_vaddr),
		 (unsigned long long)(LOAD_BIAS + in->text_end), (unsigned long long)in->text_off,
		 in->build_id, prog);
	w_text(w, SB_REC_MAPPING, 0, 0, text);
	snprintf(text, sizeof(text), "start=0x%llx\nend=0x%llx\noffset=0x%llx\nbuild_id=00ff\n"
		 "deleted=0\npath=%s\n", (unsigned long long)(OLD_BIAS + in->text_vaddr),
		 (unsigned long long)(OLD_BIAS + in->text_end), (unsigned long long)in->text_off, prog);
	w_text(w, SB_REC_MAPPING, 0, 0, text);
	snprintf(text, sizeof(text), "%llx 40 jit_hot_loop\n", (unsigned long long)JIT_AT);
	w_text(w, SB_REC_PERFMAP, 0, 0, text);
	/* a stack for every slow munmap rich_world made */
	h = &w->host;
	for (size_t off = 0, n = h->len; off < n;) {
		const struct sb_hdr *r = (const void *)(h->b + off);

		off += r->size;
		if (r->type != SB_EV_MMSYS)
			continue;
		struct sb_stack st = { .ev_start_ns = ((const struct sb_mmsys *)r)->start_ns,
				       .ev_type = SB_EV_MMSYS, .nframes = 5 };

		hdr(&st.h, SB_EV_STACK, sizeof(st), r->ts, T_PID, r->tid, r->cpu);
		st.ip[0] = LOAD_BIAS + in->fn[1] + 4;   /* in arena_reserve */
		st.ip[1] = JIT_AT + 0x10;               /* JIT code */
		st.ip[2] = OLD_BIAS + in->fn[0] + 6;    /* the other build id: no name */
		st.ip[3] = LOAD_BIAS + in->fn[2] + 8;   /* main, a return address */
		st.ip[4] = 0x1234;                      /* nothing covers it */
		/* appended past n; h->b is read afresh each time (st_put may move it) */
		st_put(&w->host, &st);
		/* three CPU samples after it: two in checkpoint_save, one in main */
		for (int k = 0; k < 3; k++) {
			struct sb_stack sm = { .ev_type = SB_EV_STACK, .nframes = 2 };

			hdr(&sm.h, SB_EV_STACK, sizeof(sm), r->ts + (uint64_t)(k + 1) * MS, T_PID,
			    r->tid, r->cpu);
			sm.ev_start_ns = sm.h.ts;
			sm.ip[0] = LOAD_BIAS + (k < 2 ? in->fn[0] + 2 : in->fn[2] + 3);
			sm.ip[1] = LOAD_BIAS + in->fn[2] + 8;
			st_put(&w->host, &sm);
		}
	}
}

#define JITS_AT 0x7e4000000000ull
#define JITS_WIDE 0x7e5000000000ull
#define JITS_N 20000u

/*
 * A perf map of 20,000 functions, looked up by start (not one by one): the
 * last one written wins where two cover an address, also one written before
 * thousands of others that start after it
 */
static void t_jit_many(void)
{
	struct sopt plain = { .pre = 5 * MS, .gpu = 80 * MS };
	struct sb_stack sm = { .ev_type = SB_EV_STACK, .nframes = 6 };
	static const struct { uint64_t ip; const char *func; } want[] = {
		{ JITS_AT + 100 * 0x40 + 8, "f100" },
		{ JITS_AT + 200 * 0x40 + 8, "reused" },       /* written over f200 */
		{ JITS_WIDE + 0x108, "inner" },               /* inside wide, written after it */
		{ JITS_WIDE + 0x5000, "wide" },               /* 19,999 starts between them */
		{ JITS_AT + (JITS_N - 1) * 0x40 + 0x3f, "f19999" },
		{ JITS_AT + JITS_N * 0x40 + 8, NULL },        /* past them all */
	};
	struct world w;
	struct engine *e;
	struct symbols *sym;
	struct eng_stack st[1];
	struct sym_frame f;
	uint64_t S = 10 * SEC;
	char text[480];
	size_t o = 0;

	world_init(&w);
	w_text(&w, SB_REC_PERFMAP, 0, 0, "7e5000000000 10000 wide\n");
	for (uint32_t i = 0; i < JITS_N; i++) {
		o += (size_t)snprintf(text + o, sizeof(text) - o, "%llx 40 f%u\n",
				      (unsigned long long)(JITS_AT + i * 0x40ull), i);
		if (o > sizeof(text) - 40 || i == JITS_N - 1) {
			w_text(&w, SB_REC_PERFMAP, 0, 0, text);
			o = 0;
		}
	}
	snprintf(text, sizeof(text), "%llx 40 reused\n%llx 10 inner\n",
		 (unsigned long long)(JITS_AT + 200 * 0x40), (unsigned long long)(JITS_WIDE + 0x100));
	w_text(&w, SB_REC_PERFMAP, 0, 0, text);
	for (unsigned k = 0; k < 4; k++)
		S = std_step(&w, S, k, &plain);
	w_step(&w, S, T_LAUNCHER, 4);
	hdr(&sm.h, SB_EV_STACK, sizeof(sm), 10 * SEC + 2 * MS, T_PID, T_LAUNCHER, 0);
	sm.ev_start_ns = sm.h.ts;
	for (int i = 0; i < 6; i++)
		sm.ip[i] = want[i].ip + 1; /* return addresses: looked up one byte back */
	st_put(&w.host, &sm);
	e = run(&w, NULL);
	REQUIRE(e, "engine");
	REQUIRE(engine_njitsyms(e) == JITS_N + 3, "%u JIT symbols", engine_njitsyms(e));
	REQUIRE(engine_stacks(e, T_LAUNCHER, 0, UINT64_MAX, st, 1) == 1, "no stack kept");
	sym = symbols_new(e);
	REQUIRE(sym, "symbols");
	for (uint32_t i = 0; i < 6; i++) {
		symbols_frame(sym, &st[0], i, &f);
		CHECK(want[i].func ? f.func && !strcmp(f.func, want[i].func) : !f.func,
		      "frame %u: %s, want %s", i, f.func ? f.func : "(none)",
		      want[i].func ? want[i].func : "(none)");
	}
	symbols_free(sym);
	engine_free(e);
	world_free(&w);
}

#define VDSO_AT 0x7ffd00000000ull

/*
 * Four plain steps with the mapping record text and one stack of the
 * launcher's, frames ip[0..n), 2 ms into them: analysed (NULL: the engine failed)
 */
static struct engine *one_stack_world(struct world *w, const char *text, const uint64_t *ip,
				      uint32_t n)
{
	struct sopt plain = { .pre = 5 * MS, .gpu = 80 * MS };
	struct sb_stack sm = { .ev_type = SB_EV_STACK, .nframes = n };
	uint64_t S = 10 * SEC;

	world_init(w);
	w_text(w, SB_REC_MAPPING, 0, 0, text);
	for (unsigned k = 0; k < 4; k++)
		S = std_step(w, S, k, &plain);
	w_step(w, S, T_LAUNCHER, 4);
	hdr(&sm.h, SB_EV_STACK, sizeof(sm), 10 * SEC + 2 * MS, T_PID, T_LAUNCHER, 0);
	sm.ev_start_ns = sm.h.ts;
	memcpy(sm.ip, ip, n * sizeof(ip[0]));
	st_put(&w->host, &sm);
	return run(w, NULL);
}

/*
 * The vDSO: a mapping record with its functions (schemas/trace.md); a frame
 * inside one is named after it, one outside all of them by the region
 */
static void t_vdso_frames(void)
{
	/* inside clock_gettime; a return address past every function */
	const uint64_t ip[] = { VDSO_AT + 0x120, VDSO_AT + 0x21 };
	struct world w;
	struct engine *e;
	struct symbols *sym;
	struct eng_stack st[1];
	struct sym_frame f;
	char text[512], buf[128];

	snprintf(text, sizeof(text), "start=0x%llx\nend=0x%llx\noffset=0x0\ndev=0:0\ninode=0\n"
		 "perms=r-xp\nkind=vdso\nattach=1\ndeleted=0\nfuncs=100+80 clock_gettime,"
		 "200+10 __vdso_time,100+80 __vdso_clock_gettime\nname=[vdso]\n",
		 (unsigned long long)VDSO_AT, (unsigned long long)VDSO_AT + 0x2000);
	e = one_stack_world(&w, text, ip, 2);
	REQUIRE(e, "engine");
	REQUIRE(engine_stacks(e, T_LAUNCHER, 0, UINT64_MAX, st, 1) == 1, "no stack kept");
	sym = symbols_new(e);
	REQUIRE(sym, "symbols");
	symbols_frame(sym, &st[0], 0, &f);
	CHECK(f.func && !strcmp(f.func, "clock_gettime") && f.off == 0x20 && f.module &&
	      !strcmp(f.module, "[vdso]"), "frame 0: %s+0x%" PRIx64 " in %s", f.func ? f.func : "?",
	      f.off, f.module ? f.module : "?");
	CHECK(!strcmp(sym_frame_text(&f, buf, sizeof(buf)), "clock_gettime+0x20 ([vdso])"),
	      "frame 0 reads %s", buf);
	symbols_frame(sym, &st[0], 1, &f);
	CHECK(!f.func && f.module && !strcmp(f.module, "[vdso]") && f.off == 0x21,
	      "frame 1: %s in %s", f.func ? f.func : "(none)", f.module ? f.module : "?");
	CHECK(!strcmp(sym_frame_text(&f, buf, sizeof(buf)), "[vdso]+0x21"), "frame 1 reads %s", buf);
	symbols_free(sym);
	engine_free(e);
	world_free(&w);
}

#define DATA_AT 0x7f1072f00000ull

/*
 * A return address in memory mapped where no code can be (read-only, the
 * stack) is a stale word the frame-pointer walk read, not a caller: the stack
 * ends before it. Writable anonymous memory may be a JIT's, and memory made
 * code (mprotect with PROT_EXEC) before the stack is code: those stay.
 */
static void t_frames_end_in_data(void)
{
	static const struct { const char *perms, *kind; uint32_t want; } r[] = {
		{ "r--p", "anon", 1 },  /* read-only data: ends there */
		{ "rw-p", "anon", 3 },  /* perhaps a JIT's: kept */
		{ "rw-p", "stack", 1 }, /* the stack: ends there */
		{ "r--p", "anon", 3 },  /* made code before the stack: kept */
		{ NULL, NULL, 3 },      /* every frame in code */
	};
	struct sopt plain = { .pre = 5 * MS, .gpu = 80 * MS };
	struct sb_stack sm = { .ev_type = SB_EV_STACK, .nframes = 3 };
	struct sb_mmsys mp;
	struct world w;
	struct engine *e;
	struct eng_stack st[5];
	char text[512];
	uint64_t S = 10 * SEC;
	int n;

	world_init(&w);
	snprintf(text, sizeof(text), "start=0x%llx\nend=0x%llx\noffset=0x0\ndev=0:0\ninode=0\n"
		 "perms=r-xp\nkind=vdso\nattach=1\ndeleted=0\nfuncs=100+80 clock_gettime\n"
		 "name=[vdso]\n", (unsigned long long)VDSO_AT, (unsigned long long)VDSO_AT + 0x2000);
	w_text(&w, SB_REC_MAPPING, 0, 0, text);
	for (unsigned k = 0; k < 4; k++) {
		uint64_t at = DATA_AT + ((uint64_t)k << 20);

		snprintf(text, sizeof(text), "start=0x%llx\nend=0x%llx\noffset=0x0\ndev=0:0\n"
			 "inode=0\nperms=%s\nkind=%s\nattach=1\ndeleted=0\nname=\n",
			 (unsigned long long)at, (unsigned long long)at + 0x100000, r[k].perms,
			 r[k].kind);
		w_text_at(&w, SB_REC_MAPPING, 0, 0, 1 * SEC, text);
	}
	for (unsigned k = 0; k < 4; k++)
		S = std_step(&w, S, k, &plain);
	w_step(&w, S, T_LAUNCHER, 4);
	memset(&mp, 0, sizeof(mp));
	hdr(&mp.h, SB_EV_MMSYS, sizeof(mp), 10 * SEC + 1 * MS, T_PID, T_LAUNCHER, 0);
	mp.start_ns = mp.h.ts - 5 * US;
	mp.call = SB_SYS_MPROTECT;
	mp.addr = DATA_AT + (3u << 20);
	mp.len = 1u << 20;
	mp.arg = 5; /* PROT_READ | PROT_EXEC */
	st_put(&w.host, &mp);
	/* in clock_gettime, then a word in region k, then the vDSO again */
	for (unsigned k = 0; k < 5; k++) {
		hdr(&sm.h, SB_EV_STACK, sizeof(sm), 10 * SEC + (2 + k) * MS, T_PID, T_LAUNCHER, 0);
		sm.ev_start_ns = sm.h.ts;
		sm.ip[0] = VDSO_AT + 0x120;
		sm.ip[1] = r[k].perms ? DATA_AT + ((uint64_t)k << 20) + 0x42c6c : VDSO_AT + 0x140;
		sm.ip[2] = VDSO_AT + 0x130;
		st_put(&w.host, &sm);
	}
	e = run(&w, NULL);
	REQUIRE(e, "engine");
	n = engine_stacks(e, T_LAUNCHER, 0, UINT64_MAX, st, 5);
	REQUIRE(n == 5, "%d stacks kept, want 5", n);
	for (unsigned k = 0; k < 5; k++)
		CHECK(st[k].nframes == r[k].want && !st[k].truncated,
		      "a stack through %s %s: %u frames, want %u", r[k].perms ? r[k].perms : "code",
		      r[k].kind ? r[k].kind : "", st[k].nframes, r[k].want);
	engine_free(e);
	world_free(&w);
}

#define FIFO_AT 0x7e1000000000ull

/*
 * A mapping record that names a FIFO (the target replaced its mapped file by
 * one before the report ran): symbolising a frame in it never opens the FIFO
 * for reading, which would let the writer blocked in open() go on; the same
 * holds for a device, where an open alone can act (SECURITY.md)
 */
static void t_frames_never_open_fifo(void)
{
	const uint64_t ip[] = { FIFO_AT + 0x120 };
	char dir[] = "/tmp/sb_fifo.XXXXXX", fifo[64], text[512];
	struct world w;
	struct engine *e;
	struct symbols *sym;
	struct eng_stack st[1];
	struct sym_frame f;
	int status = 0;
	pid_t kid, done;

	REQUIRE(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	snprintf(fifo, sizeof(fifo), "%s/libtrainer.so", dir);
	REQUIRE(mkfifo(fifo, 0600) == 0, "mkfifo: %s", strerror(errno));
	kid = fork();
	REQUIRE(kid >= 0, "fork");
	if (kid == 0) {
		/* blocks until a reader opens the FIFO */
		int fd = open(fifo, O_WRONLY);

		_exit(fd >= 0 ? 0 : 1);
	}
	snprintf(text, sizeof(text), "start=0x%llx\nend=0x%llx\noffset=0x0\ndev=0:0\ninode=7\n"
		 "perms=r-xp\nkind=file\nattach=1\nbuild_id=\ndeleted=0\npath=%s\n",
		 (unsigned long long)FIFO_AT, (unsigned long long)FIFO_AT + 0x10000, fifo);
	e = one_stack_world(&w, text, ip, 1);
	REQUIRE(e, "engine");
	REQUIRE(engine_stacks(e, T_LAUNCHER, 0, UINT64_MAX, st, 1) == 1, "no stack kept");
	sym = symbols_new(e);
	REQUIRE(sym, "symbols");
	symbols_frame(sym, &st[0], 0, &f);
	CHECK(!f.func && f.module && !strcmp(f.module, fifo), "frame 0: %s in %s",
	      f.func ? f.func : "(none)", f.module ? f.module : "?");
	usleep(100000);
	done = waitpid(kid, &status, WNOHANG);
	CHECK(done == 0, "the FIFO was opened for reading: its writer went on (%d)", (int)done);
	if (done == 0) {
		kill(kid, SIGKILL);
		waitpid(kid, &status, 0);
	}
	symbols_free(sym);
	engine_free(e);
	world_free(&w);
	unlink(fifo);
	rmdir(dir);
}

/*
 * A mapped file's name that the target replaced by a link into the kernel's
 * own file systems: "regular" to stat, never opened (a read of /proc/kmsg
 * takes the messages it returns from the system's logger)
 */
static void t_open_regular_not_kernel_fs(void)
{
	char dir[] = "/tmp/sb_kfs.XXXXXX", link[64], plain[64];
	const char *kernel[] = { "/proc/kmsg", "/proc/self/status",
				 "/sys/kernel/mm/transparent_hugepage/enabled" };
	struct stat st;
	int fd;

	REQUIRE(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	snprintf(link, sizeof(link), "%s/libtrainer.so", dir);
	snprintf(plain, sizeof(plain), "%s/plain", dir);
	for (size_t i = 0; i < sizeof(kernel) / sizeof(kernel[0]); i++) {
		if (stat(kernel[i], &st) || !S_ISREG(st.st_mode))
			continue;
		unlink(link);
		REQUIRE(symlink(kernel[i], link) == 0, "symlink: %s", strerror(errno));
		fd = sb_open_regular(link, false, &st);
		CHECK(fd < 0, "a link to %s was opened", kernel[i]);
		if (fd >= 0)
			close(fd);
	}
	fd = open(plain, O_WRONLY | O_CREAT | O_EXCL, 0600);
	REQUIRE(fd >= 0, "create: %s", strerror(errno));
	close(fd);
	unlink(link);
	REQUIRE(symlink(plain, link) == 0, "symlink: %s", strerror(errno));
	fd = sb_open_regular(link, false, &st);
	CHECK(fd >= 0, "a link to a plain file was not followed");
	if (fd >= 0)
		close(fd);
	unlink(link);
	unlink(plain);
	rmdir(dir);
}

/*
 * A tail step of 40 ms of faults (a run, its stack at its first fault) with a
 * 10 ms wait off the CPU beside them, stacked too: the where-line under it
 * shows the fault's stack, the kind of event its largest cause is made of,
 * not the longer wait's
 */
static void inj_faults_and_wait(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	struct sb_stack st = { .ev_type = SB_EV_FAULT, .nframes = 1 };

	(void)arg;
	(void)len;
	w_faults(w, at, 10 * US, 4000, T_LAUNCHER, 0x7f0000000000ull, 0, NULL, true);
	hdr(&st.h, SB_EV_STACK, sizeof(st), at, T_PID, T_LAUNCHER, 0);
	st.ev_start_ns = at;
	st.ip[0] = 0x7e0000000111ull;
	st_put(&w->host, &st);
	w_switch_out(w, at + 41 * MS, T_LAUNCHER, 0, SB_STATE_SLEEP);
	w_wakeup(w, at + 51 * MS, T_LAUNCHER, 0, 0, 0, "swapper/0");
	w_switch_in(w, at + 51 * MS, T_LAUNCHER, 0);
	st.ev_type = SB_EV_SWITCH_IN;
	hdr(&st.h, SB_EV_STACK, sizeof(st), at + 51 * MS, T_PID, T_LAUNCHER, 0);
	st.ev_start_ns = at + 41 * MS;
	st.ip[0] = 0x7e0000000222ull;
	st_put(&w->host, &st);
}

/*
 * The text report of 12 steps, step 6 with inj: the where-line under step 6's
 * tail line, which must name cause (malloc'd, without its newline); NULL when
 * there is none.
 */
static char *step6_where(const struct sopt *inj, const char *cause)
{
	struct sopt plain = { .pre = 5 * MS, .gpu = 80 * MS };
	struct world w;
	struct engine *e;
	char *text, *line, *where = NULL;
	uint64_t S = 10 * SEC;

	world_init(&w);
	for (unsigned k = 0; k < 12; k++)
		S = std_step(&w, S, k, k == 6 ? inj : &plain);
	w_step(&w, S, T_LAUNCHER, 12);
	e = run(&w, NULL);
	text = e ? render(e, report_text, NULL) : NULL;
	line = text ? strstr(text, "  step 6: ") : NULL;
	CHECK(line && strstr(line, cause) && strstr(line, cause) < strchr(line, '\n'),
	      "no tail line for step 6 with %s:\n%s", cause, text ? text : "(no report)");
	line = line ? strstr(line, "      where ") : NULL;
	if (line)
		where = strndup(line, strcspn(line, "\n"));
	free(text);
	engine_free(e);
	world_free(&w);
	return where;
}

static void t_where_of_cause(void)
{
	struct sopt inj = { .pre = 5 * MS, .gpu = 80 * MS, .len = 52 * MS, .inj = inj_faults_and_wait };
	char *line = step6_where(&inj, "page_fault +");

	CHECK(line && !strncmp(line, "      where fault ", 18) && strstr(line, "0x7e0000000111"),
	      "step 6's where-line: %s", line ? line : "(none)");
	free(line);
}

/* a stack record of the launcher's for event type ev over [s, end], its one frame ip */
static void w_stack1(struct world *w, unsigned ev, uint64_t s, uint64_t end, uint64_t ip)
{
	struct sb_stack st = { .ev_type = ev, .nframes = 1 };

	hdr(&st.h, SB_EV_STACK, sizeof(st), end, T_PID, T_LAUNCHER, 0);
	st.ev_start_ns = s;
	st.ip[0] = ip;
	st_put(&w->host, &st);
}

/* the launcher asleep [s, end], woken by the loader (wtid) or a timer (0) */
static void w_sleep(struct world *w, uint64_t s, uint64_t end, unsigned state, uint32_t wtid)
{
	w_switch_out(w, s, T_LAUNCHER, 0, state);
	w_wakeup(w, end, T_LAUNCHER, 0, wtid ? T_PID : 0, wtid, wtid ? "loader" : "swapper/0");
	w_switch_in(w, end, T_LAUNCHER, 0);
}

/*
 * arg NULL: the launcher reads a pipe for 30 ms (asleep, woken by the loader:
 * blocked), its call stacked as a slow I/O call (0x...333), then sleeps 5 ms
 * on a timer, stacked as a wait off the CPU (0x...222): the where-line shows
 * the read, the call that the step's blocked time was spent in.
 * Else: four waits of 9 ms off the CPU (0x...222) and a 20 ms fsync asleep in
 * D (io_wait, 0x...333): blocked is the largest cause, and the fsync, longer
 * than each wait but all of the step's io_wait, is not where it went.
 */
static void inj_blocked_in_call(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	(void)len;
	if (!arg) {
		w_sleep(w, at + 10 * US, at + 30 * MS, SB_STATE_SLEEP, T_LOADER);
		w_iofile(w, at, at + 30 * MS + 10 * US, T_LAUNCHER, SB_IO_READ, 4096, 55, SB_FILE_PIPE,
			 "pipe:[55]", 0);
		w_stack1(w, SB_EV_IOSYS, at, at + 30 * MS + 10 * US, 0x7e0000000333ull);
		w_sleep(w, at + 31 * MS, at + 36 * MS, SB_STATE_SLEEP, 0);
		w_stack1(w, SB_EV_SWITCH_IN, at + 31 * MS, at + 36 * MS, 0x7e0000000222ull);
		return;
	}
	for (int i = 0; i < 4; i++) {
		uint64_t s = at + (uint64_t)i * 10 * MS;

		w_sleep(w, s, s + 9 * MS, SB_STATE_SLEEP, T_LOADER);
		w_stack1(w, SB_EV_SWITCH_IN, s, s + 9 * MS, 0x7e0000000222ull);
	}
	w_sleep(w, at + 40 * MS + 10 * US, at + 60 * MS, SB_STATE_DISK, 0);
	w_iofile(w, at + 40 * MS, at + 60 * MS + 10 * US, T_LAUNCHER, SB_IO_FSYNC, 0, 77, SB_FILE_REGULAR,
		 "/ckpt/model.pt", 0);
	w_stack1(w, SB_EV_IOSYS, at + 40 * MS, at + 60 * MS + 10 * US, 0x7e0000000333ull);
}

static void where_blocked(bool fsync, const char *want_ev, uint64_t want_ip)
{
	struct sopt inj = { .pre = 5 * MS, .gpu = 80 * MS, .len = fsync ? 62 * MS : 37 * MS,
			    .inj = inj_blocked_in_call, .arg = fsync ? &inj : NULL };
	char *line = step6_where(&inj, "blocked +"), ip[32];

	snprintf(ip, sizeof(ip), "0x%" PRIx64, want_ip);
	CHECK(line && !strncmp(line + 12, want_ev, strlen(want_ev)) && strstr(line, ip),
	      "step 6's where-line: %s", line ? line : "(none)");
	free(line);
}

static void t_where_blocked_in_read(void)
{
	where_blocked(false, "iosys ", 0x7e0000000333ull);
}

static void t_where_blocked_not_fsync(void)
{
	where_blocked(true, "off_cpu ", 0x7e0000000222ull);
}

/* a run of *(uint64_t *)arg faults 10 us apart */
static void inj_fault_run(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	(void)len;
	w_faults(w, at, 10 * US, *(uint64_t *)arg, T_LAUNCHER, 0x7f0000000000ull, 0, NULL, true);
}

/*
 * Three consecutive fault steps are one episode; the figures its line gives
 * (the fault count) are one step's, and the line says which: the longest.
 * A cpu_wait episode's line has no figures to place.
 */
static void t_text_episode_figures(void)
{
	static uint64_t n[3] = { 2000, 4000, 3000 };
	struct sopt plain = { .pre = 5 * MS, .gpu = 80 * MS };
	struct sopt f[3], pre = { .pre = 5 * MS, .gpu = 80 * MS, .len = 20 * MS, .inj = inj_preempt };
	struct world w;
	struct engine *e;
	char *text, *ep, *nl;
	uint64_t S = 10 * SEC;

	for (int i = 0; i < 3; i++)
		f[i] = (struct sopt){ .pre = 5 * MS, .gpu = 80 * MS, .len = n[i] * 10 * US,
				      .inj = inj_fault_run, .arg = &n[i] };
	world_init(&w);
	for (unsigned k = 0; k < 40; k++)
		S = std_step(&w, S, k, k >= 10 && k < 13 ? &f[k - 10] : k >= 20 && k < 23 ? &pre : &plain);
	w_step(&w, S, T_LAUNCHER, 40);
	e = run(&w, NULL);
	REQUIRE(e, "engine");
	text = render(e, report_text, NULL);
	REQUIRE(text, "render");
	ep = strstr(text, "steps 10-12 (3 steps, +");
	REQUIRE(ep, "no episode for steps 10-12:\n%s", text);
	nl = strchr(ep, '\n');
	if (nl)
		*nl = 0;
	CHECK(strstr(ep, "page_fault +") && strstr(ep, "(4,000 faults)") &&
	      strstr(ep, "(in step 11, the longest)  [tail]"), "the episode's line: %s", ep);
	if (nl)
		*nl = '\n';
	ep = strstr(text, "steps 20-22 (3 steps, +");
	nl = ep ? strchr(ep, '\n') : NULL;
	CHECK(ep && nl && !memmem(ep, (size_t)(nl - ep), "(in step", 8), "the cpu_wait episode: %.200s",
	      ep ? ep : text);
	free(text);
	engine_free(e);
	world_free(&w);
}

static void t_json_stacks(void)
{
	struct world w;
	struct engine *e;
	struct elfinfo in;
	char prog[512], *json, *text, msg[512] = "";
	const char *b = getenv("BUILD");
	size_t len;
	struct symbols *sym;
	struct eng_stack st[4];
	struct sym_frame f;
	int n;

	snprintf(prog, sizeof(prog), "%s/%s/tests/progs/sbstack", getcwd(msg, 256) ? msg : ".",
		 b ? b : "build");
	if (!elf_info(prog, &in))
		SKIP("no %s with symbols and a build id", prog);
	stack_world(&w, prog, &in);
	e = run(&w, NULL);
	REQUIRE(e, "engine");
	/* the symboliser on its own */
	n = engine_stacks(e, T_LAUNCHER, 0, UINT64_MAX, st, 4);
	REQUIRE(n >= 1, "no stacks kept");
	sym = symbols_new(e);
	REQUIRE(sym, "symbols");
	symbols_frame(sym, &st[0], 0, &f);
	CHECK(f.func && !strcmp(f.func, "arena_reserve") && f.off == 4 && f.module &&
	      !strcmp(f.module, prog), "frame 0: %s+%" PRIu64 " in %s", f.func ? f.func : "?",
	      f.off, f.module ? f.module : "?");
	symbols_frame(sym, &st[0], 1, &f);
	CHECK(f.func && !strcmp(f.func, "jit_hot_loop") && f.module && !strcmp(f.module, "[jit]") &&
	      f.off == 0x10, "frame 1: %s in %s", f.func ? f.func : "?", f.module ? f.module : "?");
	symbols_frame(sym, &st[0], 2, &f);
	CHECK(!f.func && f.module && f.off == in.text_off + in.fn[0] + 6 - in.text_vaddr,
	      "frame 2 (build id differs): %s, offset 0x%" PRIx64, f.func ? f.func : "(none)", f.off);
	symbols_frame(sym, &st[0], 3, &f);
	CHECK(f.func && !strcmp(f.func, "main") && f.off == 8, "frame 3: %s+%" PRIu64,
	      f.func ? f.func : "?", f.off);
	symbols_frame(sym, &st[0], 4, &f);
	CHECK(!f.func && !f.module && f.addr == 0x1234, "frame 4: %s", f.func ? f.func : "(none)");
	symbols_free(sym);
	/* the outputs */
	text = render(e, report_text, NULL);
	REQUIRE(text, "render");
	write_file(tpath("s.txt"), text, strlen(text));
	CHECK(strstr(text, "where mmsys 30.0 ms, tid 101: arena_reserve+0x4 (sbstack) < "
		      "jit_hot_loop+0x10 ([jit]) < [sbstack+0x"), "no where-line (%s)", tpath("s.txt"));
	CHECK(strstr(text, "Stacks      ") && strstr(text, " x, "), "no Stacks section:\n%s", text);
	CHECK(strstr(text, "      on CPU  2 of 3 samples of tid 101 in checkpoint_save+0x2 (sbstack)"),
	      "no on-CPU line (%s)", tpath("s.txt"));
	free(text);
	json = render(e, report_json, &len);
	REQUIRE(json && write_file(tpath("s.json"), json, len), "write");
	CHECK(strstr(json, "\"function\": \"arena_reserve\""), "JSON names no arena_reserve");
	CHECK(strstr(json, "\"hot\": ["), "JSON has no hot stacks");
	CHECK(strstr(json, "\"cpu_samples\": {\n") && strstr(json, "\"samples\": 2,"),
	      "JSON has no cpu_samples with 2 in the top function");
	if (have_python)
		CHECK(pycheck("doc", tpath("s.json"), NULL, msg, sizeof(msg)) == 0, "schema: %s", msg);
	free(json);
	json = render(e, report_jsonl, &len);
	REQUIRE(json && write_file(tpath("s.jsonl"), json, len), "write");
	if (have_python)
		CHECK(pycheck("jsonl", tpath("s.jsonl"), tpath("s.json"), msg, sizeof(msg)) == 0,
		      "jsonl: %s", msg);
	free(json);
	/* Perfetto (without a stream: from the results): a slice per stacked event */
	{
		char *buf = NULL;
		size_t n = 0;
		FILE *f = open_memstream(&buf, &n);

		REQUIRE(f, "memstream");
		CHECK(report_perfetto(e, NULL, f) == 0, "report_perfetto failed");
		fclose(f);
		CHECK(buf && strstr(buf, "\"name\":\"mmsys\",\"cat\":\"stack\"") &&
		      strstr(buf, "\"stack\":\"arena_reserve+0x4 (sbstack) < jit_hot_loop+0x10 "
			     "([jit])"), "no stack slices in the Perfetto output");
		free(buf);
	}
	engine_free(e);
	world_free(&w);
}

/*
 * Window mode (attach, or a trace of more than ENG_EXACT_STEPS_MAX steps): the
 * document lists the steps kept and says so in summary.window; the JSON lines
 * are those steps.
 */
static void t_window_json_validates(void)
{
	struct world w;
	struct engine_opts o = { .keep_steps = 1024 };
	struct engine *e;
	struct eng_summary s;
	char *json, *jsonl, msg[512] = "", want[64];
	size_t len, l2, lines = 0;

	if (!have_python)
		SKIP("python3 is not installed");
	rich_world(&w, 3000);
	e = run(&w, &o);
	REQUIRE(e, "engine");
	engine_summarise(e, &s);
	CHECK(s.windowed && engine_first_step(e) >= 1024 && s.nsteps == 3001 &&
	      3001 - engine_first_step(e) >= 1024, "windowed %d, kept from %" PRIu64, s.windowed,
	      engine_first_step(e));
	json = render(e, report_json, &len);
	jsonl = render(e, report_jsonl, &l2);
	REQUIRE(json && jsonl && write_file(tpath("w.json"), json, len) &&
		write_file(tpath("w.jsonl"), jsonl, l2), "write");
	snprintf(want, sizeof(want), "\"first_index\": %" PRIu64, engine_first_step(e));
	CHECK(strstr(json, "\"window\": {") && strstr(json, want), "no summary.window");
	for (size_t i = 0; i < l2; i++)
		lines += jsonl[i] == '\n';
	CHECK(lines == 3001 - engine_first_step(e), "%zu lines", lines);
	CHECK(pycheck("doc", tpath("w.json"), NULL, msg, sizeof(msg)) == 0, "schema: %s", msg);
	CHECK(pycheck("jsonl", tpath("w.jsonl"), tpath("w.json"), msg, sizeof(msg)) == 0, "%s", msg);
	free(json);
	free(jsonl);
	engine_free(e);
	world_free(&w);
}

/* a trace naming more threads than the engine follows: `limits` says so, and validates */
static void t_limits_json_validates(void)
{
	struct world w;
	struct engine *e;
	char *json, msg[512] = "";
	size_t len;

	if (!have_python)
		SKIP("python3 is not installed");
	rich_world(&w, 40);
	for (uint32_t i = 0; i < 70000; i++) {
		struct sb_thread th = { 0 };

		hdr(&th.h, SB_EV_THREAD_NEW, sizeof(th), 10 * SEC + 500 * MS + i, T_PID, 5000 + i, 0);
		memcpy(th.comm, "spawned", 7);
		st_put(&w.host, &th);
	}
	e = run(&w, NULL);
	REQUIRE(e, "engine");
	json = render(e, report_json, &len);
	REQUIRE(json && write_file(tpath("l.json"), json, len), "write");
	CHECK(strstr(json, "\"limits\": {") && strstr(json, "\"thread_records_lost\": "),
	      "no limits in the report");
	CHECK(pycheck("doc", tpath("l.json"), NULL, msg, sizeof(msg)) == 0, "schema: %s", msg);
	free(json);
	engine_free(e);
	world_free(&w);
}

/* the checker must reject what the schema forbids, or a pass means nothing */
static void t_schema_rejects(void)
{
	static const char *const bad[] = {
		"del d['summary']['p50_ns']",
		"d['steps'][0]['blame'][0]['cause'] = 'gremlins'",
		"d['steps'][0]['undocumented'] = 1",
		"d['loss']['ring']['gremlin'] = 1",
		"d['summary']['tracer']['cost_per_event_ns']['gremlin'] = 1",
		"d['identity']['gremlin'] = 1",
		"d['loss']['ring']['switch_out'] = -1",
		"d['target']['pid'] = 'x'",
		"d['schema']['version'] = 2",
	};
	char cmd[1024], msg[512];

	if (!have_python)
		SKIP("python3 is not installed");
	REQUIRE(access(tpath("r.json"), R_OK) == 0, "json_validates did not leave r.json");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(cmd, sizeof(cmd),
			 "python3 -c \"import json; d = json.load(open('%s')); %s; "
			 "json.dump(d, open('%s', 'w'))\"", tpath("r.json"), bad[i], tpath("bad.json"));
		REQUIRE(system(cmd) == 0, "mutate: %s", bad[i]);
		CHECK(pycheck("doc", tpath("bad.json"), NULL, msg, sizeof(msg)) != 0,
		      "accepted a document where %s", bad[i]);
	}
}

static void t_jsonl_lines_are_the_steps(void)
{
	struct world w;
	struct engine *e;
	char *json, *jsonl, msg[512] = "";
	size_t l1, l2, lines = 0;

	if (!have_python)
		SKIP("python3 is not installed");
	rich_world(&w, 30);
	e = run(&w, NULL);
	REQUIRE(e, "engine");
	json = render(e, report_json, &l1);
	jsonl = render(e, report_jsonl, &l2);
	REQUIRE(json && jsonl, "render");
	for (size_t i = 0; i < l2; i++)
		lines += jsonl[i] == '\n';
	CHECK(lines == engine_nsteps(e), "%zu lines for %" PRIu64 " steps", lines, engine_nsteps(e));
	REQUIRE(write_file(tpath("s.json"), json, l1) && write_file(tpath("s.jsonl"), jsonl, l2),
		"write");
	CHECK(pycheck("jsonl", tpath("s.jsonl"), tpath("s.json"), msg, sizeof(msg)) == 0, "%s", msg);
	free(json);
	free(jsonl);
	engine_free(e);
	world_free(&w);
}

static void t_perfetto_tracks(void)
{
	struct world w;
	struct engine *e;
	struct engine_opts o = { 0 };
	struct perfetto_stream *ps;
	char *buf = NULL, msg[512] = "", n[16];
	size_t len = 0;
	FILE *f;

	if (!have_python)
		SKIP("python3 is not installed");
	rich_world(&w, 20);
	f = open_memstream(&buf, &len);
	REQUIRE(f, "memstream");
	ps = perfetto_stream_new(f, &o.timeline);
	REQUIRE(ps, "perfetto stream");
	e = run(&w, &o);
	REQUIRE(e, "engine");
	CHECK(report_perfetto(e, ps, f) == 0, "report_perfetto failed");
	perfetto_stream_free(ps);
	fclose(f);
	REQUIRE(write_file(tpath("p.json"), buf, len), "write");
	snprintf(n, sizeof(n), "%" PRIu64, engine_nsteps(e));
	CHECK(pycheck("perfetto", tpath("p.json"), n, msg, sizeof(msg)) == 0, "%s", msg);
	free(buf);
	engine_free(e);
	world_free(&w);
}

/* the world as `stepblame record` would have written it */
static bool write_trace(const struct world *w, const char *path)
{
	return world_write(w, path, 10 * SEC, NULL, 0, SIZE_MAX);
}

static int report(const char *a1, const char *a2, const char *a3, const char *a4,
		  const char *a5, const char *a6)
{
	char *argv[8] = { "report", (char *)a1, (char *)a2, (char *)a3, (char *)a4, (char *)a5,
			  (char *)a6, NULL };
	int argc = 1, rc;

	while (argc < 7 && argv[argc])
		argc++;
	fflush(stdout);
	rc = cmd_report(argc, argv);
	fflush(stdout);
	return rc;
}

static bool partial_left(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "ls %s | grep -q partial", dir);
	return system(cmd) == 0;
}

static void t_report_command(void)
{
	struct world w;
	char *a, *b, msg[512] = "";
	size_t la, lb;

	rich_world(&w, 30);
	REQUIRE(write_trace(&w, tpath("run.sbt")), "writing the trace: %s", strerror(errno));
	CHECK(report(tpath("run.sbt"), "--format", "json", "-o", tpath("out.json"), NULL) == 0,
	      "report --format json failed");
	CHECK(!partial_left(), "a temporary file was left behind");
	if (have_python)
		CHECK(pycheck("doc", tpath("out.json"), NULL, msg, sizeof(msg)) == 0, "%s", msg);
	a = test_slurp(tpath("out.json"), &la);
	REQUIRE(a, "no output file");
	CHECK(strstr(a, "\"complete\": true") && strstr(a, "\"end_reason\": \"duration\""),
	      "a complete trace not reported as complete");
	CHECK(report(tpath("run.sbt"), "-f", "json", "-o", tpath("out2.json"), NULL) == 0, "again");
	b = test_slurp(tpath("out2.json"), &lb);
	CHECK(b && la == lb && !memcmp(a, b, la), "the same trace reported twice differs");
	free(a);
	free(b);
	/* OUT.gz: the same bytes, gzip-compressed, and the same compressed bytes every time */
	CHECK(report(tpath("run.sbt"), "-f", "perfetto", "-o", tpath("p.json"), NULL) == 0 &&
	      report(tpath("run.sbt"), "-f", "perfetto", "-o", tpath("p.json.gz"), NULL) == 0 &&
	      report(tpath("run.sbt"), "-f", "perfetto", "-o", tpath("p2.json.gz"), NULL) == 0,
	      "report -f perfetto -o FILE.gz failed");
	CHECK(!partial_left(), "a temporary file was left behind");
	{
		size_t lz = 0, lz2 = 0, lp = 0;
		char *z = test_slurp(tpath("p.json.gz"), &lz), *z2 = test_slurp(tpath("p2.json.gz"), &lz2);
		char *plain = test_slurp(tpath("p.json"), &lp), *un = malloc(lp + 1);
		gzFile g = gzopen(tpath("p.json.gz"), "rb");
		int n = g && un ? gzread(g, un, (unsigned)lp + 1) : -1;

		CHECK(z && lz > 18 && (unsigned char)z[0] == 0x1f && (unsigned char)z[1] == 0x8b &&
		      lz < lp, "p.json.gz is not gzip, or not smaller (%zu vs %zu bytes)", lz, lp);
		CHECK(n == (int)lp && !memcmp(un, plain, lp), "gunzipped: %d bytes, the plain file %zu",
		      n, lp);
		CHECK(z2 && lz == lz2 && !memcmp(z, z2, lz), "two gzip outputs of one trace differ");
		if (g)
			gzclose(g);
		free(z);
		free(z2);
		free(plain);
		free(un);
	}
	CHECK(report(tpath("run.sbt"), "-o", tpath("out.txt"), NULL, NULL, NULL) == 0, "text");
	a = test_slurp(tpath("out.txt"), NULL);
	CHECK(a && strstr(a, "step ") && strstr(a, "noisy[900]") && strstr(a, "Capture     complete"),
	      "text report lacks the tail culprit: %.300s", a ? a : "(none)");
	free(a);
	world_free(&w);
}

/* preempted for len: by noisy[900] for two thirds of it, then by kworker/1:2[33] */
static void inj_preempt_two(struct world *w, uint64_t at, uint64_t len, void *arg)
{
	(void)arg;
	w_switch_out(w, at, T_LAUNCHER, T_CPU, SB_STATE_RUNNABLE);
	w_runslice(w, at, at + len * 2 / 3, T_CPU, 900, 900, "noisy");
	w_runslice(w, at + len * 2 / 3, at + len, T_CPU, 33, 33, "kworker/1:2");
	w_switch_in(w, at + len, T_LAUNCHER, T_CPU);
}

/*
 * Three traces as the ranks of one job: rank 1 is preempted 3 ms by noisy[900]
 * before its launches in steps 8-9, and in steps 10-11 2 ms by noisy and 1 ms by
 * kworker/1:2[33]; rank 2's kernels are NCCL collectives, which its own time
 * leaves out. The ranks report names rank 1 in exactly those steps, 3 ms behind,
 * for cpu_wait behind noisy (and kworker where it shared the wait), and follows
 * the file when the order changes.
 */
static void ranks_world(struct world *w, bool hog, bool nccl)
{
	struct sopt plain = { .pre = 5 * MS, .gpu = 2 * MS };
	struct sopt pre = { .pre = 5 * MS, .gpu = 2 * MS, .len = 3 * MS, .inj = inj_preempt };
	struct sopt two = { .pre = 5 * MS, .gpu = 2 * MS, .len = 3 * MS, .inj = inj_preempt_two };
	uint64_t S = 10 * SEC;

	world_init(w);
	if (nccl) {
		w_text(w, SB_REC_STRING, 9, 0, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
		w->kname = 9;
	}
	for (unsigned k = 0; k < 20; k++)
		S = std_step(w, S, k, !hog || k < 8 || k > 11 ? &plain : k < 10 ? &pre : &two);
	w_step(w, S, T_LAUNCHER, 20);
}

static char *ranks_report(const char *fmt, const char *out, const char *f0, const char *f1,
			  const char *f2)
{
	char *argv[] = { "report", (char *)f0, (char *)f1, (char *)f2, "--format", (char *)fmt,
			 "-o", (char *)out, NULL };

	fflush(stdout);
	if (cmd_report(8, argv))
		return NULL;
	return test_slurp(out, NULL);
}


/*
 * Two ranks whose step numbers restart each epoch (0..9 twice): rank 1 is
 * preempted 3 ms in the second epoch's step 5, and from the second epoch
 * slower by 1 ms in each step when slow. The k-th step 5 of one rank aligns
 * with the k-th of the other; with two ranks the median rank is the other,
 * so the lead is the whole 3 ms, not half of it.
 */
static void ranks_epochs_world(struct world *w, bool hog, uint64_t pre_ns)
{
	struct sopt plain = { .pre = pre_ns, .gpu = 2 * MS };
	struct sopt pre = { .pre = pre_ns, .gpu = 2 * MS, .len = 3 * MS, .inj = inj_preempt };
	uint64_t S = 10 * SEC;

	world_init(w);
	for (unsigned k = 0; k < 20; k++)
		S = std_step(w, S, k % 10, hog && k == 15 ? &pre : &plain);
	w_step(w, S, T_LAUNCHER, 0);
}

static void t_ranks_epochs(void)
{
	struct world a, b, c;
	char *js, *txt;
	const char *p;

	ranks_epochs_world(&a, false, 5 * MS);
	ranks_epochs_world(&b, true, 5 * MS);
	ranks_epochs_world(&c, false, 6 * MS);
	REQUIRE(write_trace(&a, tpath("e0.sbt")) && write_trace(&b, tpath("e1.sbt")) &&
		write_trace(&c, tpath("e2.sbt")), "writing the traces: %s", strerror(errno));
	{
		char *argv[] = { "report", (char *)tpath("e0.sbt"), (char *)tpath("e1.sbt"), "--format",
				 "json", "-o", (char *)tpath("e01.json"), NULL };

		fflush(stdout);
		REQUIRE(cmd_report(7, argv) == 0, "report of two traces failed");
	}
	js = test_slurp(tpath("e01.json"), NULL);
	REQUIRE(js, "no report");
	/* 20 steps aligned, not 10; the second epoch's step 5 is rank 1's, by 3 ms */
	p = strstr(js, "\"step\": 5,\n      \"repeat\": 1,");
	CHECK(p && strstr(js, "\"step\": 9,\n      \"repeat\": 1,"), "steps of the second epoch not "
	      "aligned: %.400s", strstr(js, "\"steps\"") ? strstr(js, "\"steps\"") : js);
	if (p) {
		const char *b = strstr(p, "\"behind_ns\": "), *st = strstr(p, "\"straggle\": ");
		long long behind = b ? atoll(b + 13) : -1;

		CHECK(st && !strncmp(st + 12, "true", 4) && behind > 2900000 && behind < 3100000,
		      "the second step 5: %.300s", p);
	}
	free(js);
	/* a rank slower in every step: not one straggle, yet said */
	{
		char *argv[] = { "report", (char *)tpath("e0.sbt"), (char *)tpath("e2.sbt"), "--format",
				 "text", "-o", (char *)tpath("e02.txt"), NULL };

		fflush(stdout);
		REQUIRE(cmd_report(7, argv) == 0, "report of two traces failed");
	}
	txt = test_slurp(tpath("e02.txt"), NULL);
	CHECK(txt && strstr(txt, "Slower      rank 1 (") && strstr(txt, "was last in 20 of 20 steps, by "
	      "1.00 ms at the median: slower throughout") && strstr(txt, "20 that at least two have"),
	      "text: %.900s", txt ? txt : "(none)");
	free(txt);
	world_free(&a);
	world_free(&b);
	world_free(&c);
}

/*
 * One trace whose step numbers restart (0..9 twice), rank 1's of the epochs
 * test: its one slow step is named by number and index, and the Marks line
 * says the numbers went back. Then every iteration marked twice (a second
 * mark with the same number 1 ms into each step): the Marks line says so.
 */
static void t_step_numbers_repeat(void)
{
	struct world w, d;
	char *txt;
	uint64_t S = 10 * SEC;
	struct sopt plain = { .pre = 5 * MS, .gpu = 2 * MS };

	ranks_epochs_world(&w, true, 5 * MS);
	REQUIRE(write_trace(&w, tpath("rep.sbt")), "writing the trace: %s", strerror(errno));
	REQUIRE(report(tpath("rep.sbt"), "-o", tpath("rep.txt"), NULL, NULL, NULL) == 0,
		"report failed");
	txt = test_slurp(tpath("rep.txt"), NULL);
	CHECK(txt && strstr(txt, "\nMarks       the step numbers went back 2 times (numbers that "
			     "restart each epoch?)") && strstr(txt, "  step 5 (index 15): "),
	      "text: %.1200s", txt ? txt : "(none)");
	free(txt);
	world_init(&d);
	for (unsigned k = 0; k < 20; k++) {
		uint64_t next = std_step(&d, S, k, &plain);

		w_step(&d, S + 1 * MS, T_LAUNCHER, k);
		S = next;
	}
	w_step(&d, S, T_LAUNCHER, 20);
	REQUIRE(write_trace(&d, tpath("twice.sbt")), "writing the trace: %s", strerror(errno));
	REQUIRE(report(tpath("twice.sbt"), "-o", tpath("twice.txt"), NULL, NULL, NULL) == 0,
		"report failed");
	txt = test_slurp(tpath("twice.txt"), NULL);
	CHECK(txt && strstr(txt, "\nMarks       20 of 41 steps have the number of the step before: "
			     "each iteration is marked twice"),
	      "text: %.800s", txt ? txt : "(none)");
	free(txt);
	world_free(&w);
	world_free(&d);
}

/*
 * Numbers that went up by one, then skip forward (14 never marked: a program
 * exec'd and not yet probed): the step before the skip is incomplete, and
 * the Marks line says so. A trainer that marks every tenth iteration skips
 * nothing.
 */
static void t_step_numbers_skip(void)
{
	struct world w, d;
	struct sopt plain = { .pre = 5 * MS, .gpu = 2 * MS };
	struct eng_capture c;
	const struct eng_step *st;
	struct engine *e;
	uint64_t S = 10 * SEC, n = 0;
	char *txt;

	world_init(&w);
	for (unsigned k = 0; k < 50; k++, n++) {
		if (k == 30)
			n += 14;
		S = std_step(&w, S, n, &plain);
	}
	w_step(&w, S, T_LAUNCHER, n);
	e = run(&w, NULL);
	REQUIRE(e, "engine");
	engine_capture(e, &c);
	CHECK(c.numbers_skips == 1 && c.numbers_missing == 14 && !c.numbers_back,
	      "skips %" PRIu64 ", missing %" PRIu64 ", back %" PRIu64, c.numbers_skips,
	      c.numbers_missing, c.numbers_back);
	st = NULL;
	for (uint64_t i = engine_first_step(e); i < engine_nsteps(e); i++)
		if (engine_step(e, i)->step == 29)
			st = engine_step(e, i);
	CHECK(st && st->incomplete, "step 29, before the skip, is %s",
	      st ? "complete" : "missing");
	st = step_no(e, 44);
	CHECK(st && !st->incomplete, "step 44, after the skip, is %s",
	      st ? "incomplete" : "missing");
	engine_free(e);
	REQUIRE(write_trace(&w, tpath("skip.sbt")), "writing the trace: %s", strerror(errno));
	REQUIRE(report(tpath("skip.sbt"), "-o", tpath("skip.txt"), NULL, NULL, NULL) == 0,
		"report failed");
	txt = test_slurp(tpath("skip.txt"), NULL);
	CHECK(txt && strstr(txt, "\nMarks       the step numbers skipped forward 1 time, 14 numbers "
			     "never marked"), "text: %.1200s", txt ? txt : "(none)");
	free(txt);
	world_free(&w);
	/* every tenth iteration marked: no loss */
	world_init(&d);
	S = 10 * SEC;
	for (unsigned k = 0; k < 30; k++)
		S = std_step(&d, S, 10 * k, &plain);
	w_step(&d, S, T_LAUNCHER, 300);
	e = run(&d, NULL);
	REQUIRE(e, "engine");
	engine_capture(e, &c);
	CHECK(!c.numbers_skips, "a stride of 10: %" PRIu64 " skips", c.numbers_skips);
	engine_free(e);
	world_free(&d);
}

static void t_ranks_report(void)
{
	struct world a, b, c;
	char msg[512] = "";
	char *txt, *js;
	char cmd[4096], line[512];

	ranks_world(&a, false, false);
	ranks_world(&b, true, false);
	ranks_world(&c, false, true);
	/* r0b.sbt: rank 0's again, as a third rank (one file given twice is refused) */
	REQUIRE(write_trace(&a, tpath("r0.sbt")) && write_trace(&b, tpath("r1.sbt")) &&
		write_trace(&c, tpath("r2.sbt")) && write_trace(&a, tpath("r0b.sbt")),
		"writing the traces: %s", strerror(errno));
	js = ranks_report("json", tpath("ranks.json"), tpath("r0.sbt"), tpath("r1.sbt"),
			  tpath("r2.sbt"));
	REQUIRE(js, "report of three traces failed");
	if (have_python) {
		CHECK(pycheck("ranks", tpath("ranks.json"), NULL, msg, sizeof(msg)) == 0, "schema: %s",
		      msg);
		/* the straggles, their margin and cause, the collectives left out */
		snprintf(cmd, sizeof(cmd), "python3 -c \"\n"
			 "import json,sys\n"
			 "d = json.load(open('%s'))\n"
			 "bad = []\n"
			 "for s in d['steps']:\n"
			 "    hog = 8 <= s['step'] <= 11\n"
			 "    if s['straggle'] != hog: bad.append('step %%d straggle %%s' %% (s['step'], s['straggle']))\n"
			 "    if hog and (s['last_rank'] != 1 or abs(s['behind_ns'] - 3000000) > 100000 or\n"
			 "                s['blame'][0]['cause'] != 'cpu_wait' or s['blame'][0]['culprit']['pid'] != 900):\n"
			 "        bad.append('step %%d: %%s' %% (s['step'], json.dumps(s)[:300]))\n"
			 "    waits = [(b['culprit']['pid'], round(b['ns'] / 1e5)) for b in s['blame'] if b['cause'] == 'cpu_wait']\n"
			 "    if hog and waits != ([(900, 30)] if s['step'] < 10 else [(900, 20), (33, 10)]):\n"
			 "        bad.append('step %%d: cpu_wait by culprit %%s' %% (s['step'], waits))\n"
			 "    if s['own_ns'][2] != s['duration_ns'][2] - 2000000: bad.append('step %%d own %%s' %% (s['step'], s['own_ns']))\n"
			 "    if s['own_ns'][0] != s['duration_ns'][0]: bad.append('rank 0 own time %%s' %% s['own_ns'])\n"
			 "g = d['stragglers'][0]\n"
			 "if g['rank'] != 1 or g['straggles'] != 4 or g['causes'][0]['cause'] != 'cpu_wait' or g['causes'][0]['culprit']['comm'] != 'noisy':\n"
			 "    bad.append('summary ' + json.dumps(g)[:300])\n"
			 "if [r['collectives_seen'] for r in d['ranks']] != [False, False, True]: bad.append('collectives_seen')\n"
			 "print('; '.join(bad[:4]) or 'OK')\n\" 2>&1", tpath("ranks.json"));
		first_line(cmd, line, sizeof(line));
		CHECK(!strncmp(line, "OK", 2), "ranks document: %s", line);
	}
	free(js);
	txt = ranks_report("text", tpath("ranks.txt"), tpath("r0.sbt"), tpath("r1.sbt"),
			   tpath("r2.sbt"));
	CHECK(txt && strstr(txt, "3 ranks") && strstr(txt, "straggled in 4 of 20 steps") &&
	      strstr(txt, "noisy[900]") && strstr(strstr(txt, "Stragglers"), "rank 1 ("),
	      "text: %.600s", txt ? txt : "(none)");
	free(txt);
	/* with no collectives anywhere, own time is step time: said */
	txt = ranks_report("text", tpath("ranks_h.txt"), tpath("r0.sbt"), tpath("r1.sbt"),
			   tpath("r0b.sbt"));
	CHECK(txt && strstr(txt, "Host only   no rank had collective kernels"), "host only: %.600s",
	      txt ? txt : "(none)");
	free(txt);
	js = ranks_report("json", tpath("ranks_h.json"), tpath("r0.sbt"), tpath("r1.sbt"),
			  tpath("r0b.sbt"));
	CHECK(js && strstr(js, "\n  \"collectives_seen\": false"), "host only json");
	free(js);
	js = ranks_report("json", tpath("ranks_c.json"), tpath("r0.sbt"), tpath("r1.sbt"),
			  tpath("r2.sbt"));
	CHECK(js && strstr(js, "\n  \"collectives_seen\": true"), "collectives json");
	free(js);
	/* the straggler is the file, wherever it comes */
	js = ranks_report("json", tpath("ranks2.json"), tpath("r1.sbt"), tpath("r0.sbt"),
			  tpath("r2.sbt"));
	{
		const char *g = js ? strstr(js, "\"stragglers\": [") : NULL;
		const char *rk = g ? strstr(g, "\"rank\": ") : NULL;
		const char *sg = g ? strstr(g, "\"straggles\": ") : NULL;

		CHECK(rk && sg && atoi(rk + 8) == 0 && atoi(sg + 13) == 4,
		      "rank 1 given first: %.300s", g ? g : js ? js : "(none)");
	}
	free(js);
	/* a process per rank, its steps and its straggles */
	js = ranks_report("perfetto", tpath("ranks.pf.json"), tpath("r0.sbt"), tpath("r1.sbt"),
			  tpath("r2.sbt"));
	if (js && have_python) {
		snprintf(cmd, sizeof(cmd), "python3 -c \"\n"
			 "import json\n"
			 "ev = json.load(open('%s'))['traceEvents']\n"
			 "st = [e for e in ev if e.get('cat') == 'step']\n"
			 "sg = [e for e in ev if e.get('cat') == 'straggle']\n"
			 "names = {e['pid']: e['args']['name'] for e in ev if e['ph'] == 'M' and e['name'] == 'process_name'}\n"
			 "ok = len(st) == 60 and sorted({e['pid'] for e in st}) == [1, 2, 3] and "
			 "sorted(e['args']['step'] for e in sg) == [8, 9, 10, 11] and {e['pid'] for e in sg} == {2} and "
			 "all(e['args']['cpu_wait_ns'] > 2900000 for e in sg) and names.get(2, '').startswith('rank 1: trainer')\n"
			 "print('OK' if ok else 'tracks: %%d steps, straggles %%s, names %%s' %% (len(st), [(e['pid'], e['args']) for e in sg][:4], names))\n"
			 "\" 2>&1", tpath("ranks.pf.json"));
		first_line(cmd, line, sizeof(line));
		CHECK(!strncmp(line, "OK", 2), "ranks perfetto: %s", line);
	}
	CHECK(js, "report of three traces --format perfetto failed");
	free(js);
	/* the format that streams one trace's steps */
	char *argv[] = { "report", (char *)tpath("r0.sbt"), (char *)tpath("r1.sbt"), "--format",
			 "jsonl", NULL };
	CHECK(cmd_report(5, argv) == 2, "jsonl of two traces accepted");
	world_free(&a);
	world_free(&b);
	world_free(&c);
}

/* a rank's trace with its launcher's ids: RANK, the job's id and the host's boot id */
static bool write_rank_trace(struct world *w, const char *path, const char *rank,
			     const char *job, const char *boot)
{
	char t[256], h[128];

	snprintf(t, sizeof(t), "pid=100\ncomm=trainer\ncmdline=python train.py\nrank=%s\njob=%s\n",
		 rank, job);
	snprintf(h, sizeof(h), "hostname=node-%s\nboot_id=%s\n", rank, boot);
	w_text(w, SB_REC_TARGET, 0, T_PID, t);
	w_text(w, SB_REC_HOST, 0, 0, h);
	return write_trace(w, path);
}

/* files given out of order are ranked by the RANK in their environment */
static void t_ranks_by_rank(void)
{
	struct world a, b, c;
	char *txt, *js, want[512];

	ranks_world(&a, true, false);
	ranks_world(&b, false, false);
	ranks_world(&c, false, true);
	REQUIRE(write_rank_trace(&a, tpath("k2.sbt"), "2", "j1", "boot-a") &&
		write_rank_trace(&b, tpath("k0.sbt"), "0", "j1", "boot-b") &&
		write_rank_trace(&c, tpath("k1.sbt"), "1", "j1", "boot-c"),
		"writing the traces: %s", strerror(errno));
	txt = ranks_report("text", tpath("k.txt"), tpath("k2.sbt"), tpath("k0.sbt"), tpath("k1.sbt"));
	snprintf(want, sizeof(want), "  rank 0 (%s, trainer[100] on node-0, RANK=0)", tpath("k0.sbt"));
	CHECK(txt && strstr(txt, want), "RANK=0 is not rank 0: %.600s", txt ? txt : "(none)");
	snprintf(want, sizeof(want), "  rank 2 (%s, trainer[100] on node-2, RANK=2) straggled in 4",
		 tpath("k2.sbt"));
	CHECK(txt && strstr(txt, want), "the straggler is not rank 2: %.900s", txt ? txt : "(none)");
	free(txt);
	js = ranks_report("json", tpath("k.json"), tpath("k2.sbt"), tpath("k0.sbt"), tpath("k1.sbt"));
	{
		const char *g = js ? strstr(js, "\"stragglers\": [") : NULL;
		const char *rk = g ? strstr(g, "\"rank\": ") : NULL;
		const char *f0 = js ? strstr(js, "\"file\": \"") : NULL;

		CHECK(rk && atoi(rk + 8) == 2, "json: the straggler is not rank 2: %.300s",
		      g ? g : js ? js : "(none)");
		CHECK(f0 && strstr(f0, "k0.sbt") && strstr(f0, "k0.sbt") < strstr(f0, "\n"),
		      "json: ranks[0] is not RANK=0's file: %.200s", f0 ? f0 : "(none)");
	}
	free(js);
	world_free(&a);
	world_free(&b);
	world_free(&c);
}

/* the report of ranks, its standard error into err */
static char *ranks_report_err(const char *fmt, const char *out, const char *f0, const char *f1,
			      const char *f2, const char *err, int *rc)
{
	char *argv[] = { "report", (char *)f0, (char *)f1, (char *)f2, "--format", (char *)fmt,
			 "-o", (char *)out, NULL };
	int saved = dup(2), fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (saved < 0 || fd < 0)
		return NULL;
	fflush(stdout);
	fflush(stderr);
	dup2(fd, 2);
	*rc = cmd_report(8, argv);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fd);
	return *rc == 0 || *rc == 1 ? test_slurp(out, NULL) : NULL;
}

/* a rank whose trace was cut short, or damaged, says so wherever the rank is shown */
static void t_ranks_cut_short(void)
{
	struct world a, b;
	char *full, *txt, *js, *err, msg[512] = "";
	size_t len;
	char c0[256], c0b[256], cerr[256];
	int rc = -1;

	snprintf(c0, sizeof(c0), "%s", tpath("c0.sbt"));
	snprintf(c0b, sizeof(c0b), "%s", tpath("c0b.sbt"));
	snprintf(cerr, sizeof(cerr), "%s", tpath("c.err"));
	ranks_world(&a, false, false);
	ranks_world(&b, true, false);
	/* c0b.sbt: rank 0's again, as a third rank (one file given twice is refused) */
	REQUIRE(write_trace(&a, tpath("c0.sbt")) && write_trace(&b, tpath("c1.sbt")) &&
		write_trace(&a, tpath("c0b.sbt")), "writing the traces: %s", strerror(errno));
	full = test_slurp(tpath("c1.sbt"), &len);
	REQUIRE(full && len > 4096, "no trace");
	REQUIRE(write_file(tpath("c1cut.sbt"), full, len * 2 / 3 + 5), "write");
	txt = ranks_report_err("text", tpath("c.txt"), c0, tpath("c1cut.sbt"),
			       c0b, cerr, &rc);
	err = test_slurp(cerr, NULL);
	{
		const char *l1 = txt ? strstr(txt, "  rank 1 (") : NULL;
		const char *eol = l1 ? strchr(l1, '\n') : NULL;
		const char *cut = l1 ? strstr(l1, "CUT SHORT") : NULL;

		CHECK(rc == 0 && cut && cut < eol, "rank 1's line: exit %d: %.600s", rc,
		      txt ? txt : "(none)");
		CHECK(!strstr(txt ? txt : "", "  rank 0 (") ||
		      !strstr(strstr(txt, "  rank 0 ("), "CUT SHORT") ||
		      strstr(strstr(txt, "  rank 0 ("), "CUT SHORT") > strstr(txt, "  rank 1 ("),
		      "rank 0 said cut short: %.600s", txt ? txt : "(none)");
	}
	CHECK(err && strstr(err, "c1cut.sbt: cut short") && strstr(err, "rank 1 covers"),
	      "stderr: %.300s", err ? err : "(none)");
	free(txt);
	free(err);
	js = ranks_report_err("json", tpath("c.json"), c0, tpath("c1cut.sbt"),
			      c0b, cerr, &rc);
	CHECK(js && strstr(js, "\"cut_short\": true") && strstr(js, "\"cut_short\": false") &&
	      !strstr(js, "\"corrupt\": true"), "json: %.300s", js ? js : "(none)");
	if (js && have_python)
		CHECK(pycheck("ranks", tpath("c.json"), NULL, msg, sizeof(msg)) == 0, "schema: %s",
		      msg);
	free(js);
	js = ranks_report_err("perfetto", tpath("c.pf.json"), c0, tpath("c1cut.sbt"),
			      c0b, cerr, &rc);
	CHECK(js && strstr(js, "trainer[100] (trace cut short)"), "perfetto: no word of the cut");
	free(js);
	/* damaged in the middle: said in the report too, and the exit says it failed */
	memset(full + len / 2, 0xff, 64);
	REQUIRE(write_file(tpath("c1bad.sbt"), full, len), "write");
	js = ranks_report_err("json", tpath("cb.json"), c0, tpath("c1bad.sbt"),
			      c0b, cerr, &rc);
	CHECK(rc == 1 && js && strstr(js, "\"corrupt\": true"), "json of a corrupt rank: exit %d",
	      rc);
	free(js);
	txt = ranks_report_err("text", tpath("cb.txt"), c0, tpath("c1bad.sbt"),
			       c0b, cerr, &rc);
	{
		const char *l1 = txt ? strstr(txt, "  rank 1 (") : NULL;
		const char *bad = l1 ? strstr(l1, "CORRUPT") : NULL;

		CHECK(rc == 1 && bad && bad < strchr(l1, '\n'), "text of a corrupt rank: %.600s",
		      txt ? txt : "(none)");
	}
	free(txt);
	free(full);
	world_free(&a);
	world_free(&b);
}

static void t_report_cut_short(void)
{
	char *full, *text;
	size_t len;
	int rc;

	full = test_slurp(tpath("run.sbt"), &len);
	REQUIRE(full && len > 4096, "t_report_command left no trace");
	/* as if the recorder was killed: no trailer, the last record torn */
	REQUIRE(write_file(tpath("cut.sbt"), full, len * 2 / 3 + 5), "write");
	rc = report(tpath("cut.sbt"), "-o", tpath("cut.txt"), NULL, NULL, NULL);
	CHECK(rc == 0, "a cut-short trace: exit %d", rc);
	text = test_slurp(tpath("cut.txt"), NULL);
	CHECK(text && strstr(text, "CUT SHORT") && strstr(text, "step "),
	      "no word of the cut: %.200s", text ? text : "(none)");
	free(text);
	rc = report(tpath("cut.sbt"), "--format", "json", "-o", tpath("cut.json"), NULL);
	text = test_slurp(tpath("cut.json"), NULL);
	CHECK(rc == 0 && text && strstr(text, "\"cut_short\": true"), "json of a cut trace");
	free(text);
	/* damage in the middle: the part before is reported, the exit says it failed */
	memset(full + len / 2, 0xff, 64);
	REQUIRE(write_file(tpath("bad.sbt"), full, len), "write");
	rc = report(tpath("bad.sbt"), "-o", tpath("bad.txt"), NULL, NULL, NULL);
	CHECK(rc == 1, "a corrupt trace: exit %d", rc);
	free(full);
}

static void t_report_errors(void)
{
	int saved = dup(2), null = open("/dev/null", O_WRONLY);

	REQUIRE(saved >= 0 && null >= 0, "fds");
	fflush(stderr);
	dup2(null, 2);
	CHECK(report(NULL, NULL, NULL, NULL, NULL, NULL) == 2, "no file: not exit 2");
	CHECK(report(tpath("run.sbt"), "--format", "xml", NULL, NULL, NULL) == 2, "bad format");
	CHECK(report(tpath("run.sbt"), "--bogus", NULL, NULL, NULL, NULL) == 2, "bad option");
	CHECK(report(tpath("nope.sbt"), NULL, NULL, NULL, NULL, NULL) == 1, "missing file");
	CHECK(report(tpath("run.sbt"), "--step-nvtx", "([", "-o", tpath("x.txt"), NULL) == 1,
	      "bad regex");
	CHECK(report(tpath("run.sbt"), "-o", "/nonexistent/dir/out.txt", NULL, NULL, NULL) == 1,
	      "unwritable output");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(null);
	CHECK(access(tpath("x.txt"), F_OK) != 0, "output written despite an error");
}

/*
 * Under a locale without UTF-8 the commands print through sb_ascii_stream: the
 * text report comes out in ASCII, µs as us and the dash as -, the rest as it
 * was; a sequence split between two writes still becomes one letter.
 */
static void t_report_ascii(void)
{
	struct world w;
	struct engine *e;
	char *utf = NULL, *asc = NULL, *expect;
	size_t nu = 0, na = 0, k = 0;
	FILE *m, *a;

	rich_world(&w, 40);
	e = run(&w, NULL);
	REQUIRE(e, "engine");
	utf = render(e, report_text, &nu);
	REQUIRE(utf && strstr(utf, "\xc2\xb5s") && strstr(utf, "\xe2\x80\x94"),
		"the UTF-8 report has no µs or dash to spell: %.200s", utf ? utf : "(none)");
	m = open_memstream(&asc, &na);
	a = m ? sb_ascii_stream(m) : NULL;
	REQUIRE(a, "ascii stream");
	CHECK(report_text(e, a) == 0, "report through the ASCII stream failed");
	fputs("split \xc2", a);
	fflush(a);
	fputs("\xb5s \xe2\x80", a);
	fflush(a);
	fputs("\x94 end\n", a);
	fclose(a);
	fclose(m);
	/* what it must be: the UTF-8 report with the table's spellings, then the split line */
	expect = malloc(nu * 2 + 64);
	REQUIRE(expect, "memory");
	for (size_t i = 0; i < nu; i++) {
		if (!memcmp(utf + i, "\xc2\xb5", 2)) {
			expect[k++] = 'u';
			i += 1;
		} else if (!memcmp(utf + i, "\xe2\x80\x94", 3)) {
			expect[k++] = '-';
			i += 2;
		} else if (!memcmp(utf + i, "\xc2\xb7", 2)) {
			expect[k++] = '*';
			i += 1;
		} else if (!memcmp(utf + i, "\xe2\x89\x88", 3)) {
			expect[k++] = '~';
			i += 2;
		} else if (!memcmp(utf + i, "\xe2\x86\x92", 3)) {
			expect[k++] = '-';
			expect[k++] = '>';
			i += 2;
		} else {
			expect[k++] = utf[i];
		}
	}
	memcpy(expect + k, "split us - end\n", 16);
	k += 15;
	CHECK(na == k && !memcmp(asc, expect, k), "ASCII report differs (%zu bytes, want %zu): %.300s",
	      na, k, asc ? asc : "(none)");
	for (size_t i = 0; i < na; i++)
		if ((unsigned char)asc[i] >= 0x80) {
			CHECK(0, "byte %#x at %zu of the ASCII report", (unsigned char)asc[i], i);
			break;
		}
	free(expect);
	free(utf);
	free(asc);
	engine_free(e);
	world_free(&w);
}

static void t_report_help(void)
{
	int saved = dup(1), fd = open(tpath("help.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	char *h;
	int rc;

	REQUIRE(saved >= 0 && fd >= 0, "fds");
	fflush(stdout);
	dup2(fd, 1);
	rc = report("--help", NULL, NULL, NULL, NULL, NULL);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	close(fd);
	h = test_slurp(tpath("help.txt"), NULL);
	CHECK(rc == 0 && h && strstr(h, "--format") && strstr(h, "--step-nvtx") &&
	      strstr(h, "perfetto"), "help: %d %.100s", rc, h ? h : "");
	free(h);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/sb-report-XXXXXX");
	if (!mkdtemp(dir)) {
		printf("FAIL setup: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	snprintf(checker, sizeof(checker), "tests/schema_check.py");
	have_python = system("python3 -c 'import json' >/dev/null 2>&1") == 0;
	if (access("schemas/report.schema.json", R_OK)) {
		printf("FAIL setup: run from the repository root (schemas/report.schema.json)\n");
		return 1;
	}
	RUN(t_json_validates);
	RUN(t_printable);
	RUN(t_text_escapes_names);
	RUN(t_text_tail_episodes);
	RUN(t_text_episode_share);
	RUN(t_text_episode_crowd);
	RUN(t_text_culprit_share);
	RUN(t_waker_activity_io_faults);
	RUN(t_schema_rejects);
	RUN(t_window_json_validates);
	RUN(t_json_stacks);
	RUN(t_vdso_frames);
	RUN(t_frames_never_open_fifo);
	RUN(t_jit_many);
	RUN(t_open_regular_not_kernel_fs);
	RUN(t_frames_end_in_data);
	RUN(t_where_of_cause);
	RUN(t_where_blocked_in_read);
	RUN(t_where_blocked_not_fsync);
	RUN(t_text_episode_figures);
	RUN(t_limits_json_validates);
	RUN(t_jsonl_lines_are_the_steps);
	RUN(t_perfetto_tracks);
	RUN(t_html_page);
	RUN(t_ranks_report);
	RUN(t_ranks_epochs);
	RUN(t_ranks_by_rank);
	RUN(t_ranks_cut_short);
	RUN(t_step_numbers_repeat);
	RUN(t_step_numbers_skip);
	RUN(t_report_command);
	RUN(t_report_cut_short);
	RUN(t_report_errors);
	RUN(t_report_help);
	RUN(t_report_ascii);
	test_rm_tree(dir);
	return test_summary();
}
