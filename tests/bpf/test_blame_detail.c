// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The detail behind a cause, end to end: real probes on sbwork
 * (tests/progs/sbwork.c), the records fed to the engine, the step's results
 * and report lines read back. Which file an I/O wait was on, with the bytes
 * written to it in the step.
 */
#include <limits.h>
#include <sys/vfs.h>

#include "test.h"
#include "capture.h"
#include "engine/engine.h"
#include "format/trace.h"
#include "report/report.h"
#include "report/symbols.h"

/* trace sbwork ARGS and feed every record to a new engine; NULL if sbwork cannot run */
static struct engine *blame_work(char *const args[], struct cap **out, pid_t *child)
{
	struct cap *c = calloc(1, sizeof(*c));
	struct engine_opts o = { 0 };
	struct engine *e;
	char err[256];

	if (!c)
		abort();
	c->o.probe.alloc_min_ns = 10000;
	if (cap_run_sbwork(c, args, child)) {
		free(c);
		return NULL;
	}
	e = engine_new(&o, err, sizeof(err));
	if (!e)
		abort();
	for (size_t i = 0; i < c->n; i++)
		engine_feed(e, c->recs[i]);
	engine_finish(e);
	*out = c;
	return e;
}

/* the step numbered `number`, NULL if none */
static const struct eng_step *step_numbered(const struct engine *e, uint64_t number)
{
	for (uint64_t i = engine_first_step(e); i < engine_nsteps(e); i++)
		if (engine_step(e, i)->step == number)
			return engine_step(e, i);
	return NULL;
}

/* what a writer prints for step s, in buf */
static void step_text(const struct engine *e, const struct eng_step *s, bool json, char *buf,
		      size_t len)
{
	FILE *f = fmemopen(buf, len, "w");

	if (!f)
		abort();
	if (json) {
		struct symbols *sym = NULL;

		report_step_json(e, s, NULL, &sym, f);
		symbols_free(sym);
	}
	else
		report_step_line(e, s, NULL, NULL, f);
	fclose(f);
	buf[len - 1] = 0;
}

/*
 * 16 MiB written to a known file in 64 KiB writes, then fsync: inside step
 * 1000 the io_wait names that file, the fsync and its 16 MiB written, and the
 * slow writes' bytes add up to whole writes.
 */
static void t_fsync_names_file(void)
{
	char dir[PATH_MAX], want[PATH_MAX + 64], buf[16384];
	char *args[] = { "steps", "1", "ckpt", "16384", "steps", "1", NULL };
	const struct eng_step *s;
	const struct eng_io *fs = NULL;
	struct engine *e;
	struct cap *c;
	pid_t pid;
	struct statfs sf;

	NEED_BPF();
	/* a directory on a disk, so that the fsync waits for it: the tests run from the tree */
	REQUIRE(getcwd(dir, sizeof(dir)), "getcwd");
	REQUIRE(!statfs(dir, &sf) && sf.f_type != 0x01021994, "%s is on tmpfs", dir);
	setenv("SBWORK_DIR", dir, 1);
	e = blame_work(args, &c, &pid);
	unsetenv("SBWORK_DIR");
	REQUIRE(e, "cannot run %s (build it: make test-bin)", prog_path("sbwork"));
	snprintf(want, sizeof(want), "%s/sbwork-ckpt.%d.bin", dir, (int)pid);
	s = step_numbered(e, 1000);
	REQUIRE(s, "no step 1000 among %llu steps", (unsigned long long)engine_nsteps(e));
	REQUIRE(s->cause_ns[ENG_IO_WAIT] > 0, "step 1000 has no io_wait");
	REQUIRE(s->nio > 0, "step 1000's io_wait names no file");
	for (uint32_t i = 0; i < s->nio; i++) {
		const struct eng_io *x = &s->io[i];

		CHECK(!strcmp(x->path, want), "io entry %u on %s, want %s", i, x->path, want);
		CHECK(x->kind == SB_FILE_REGULAR, "file kind %u", x->kind);
		CHECK(x->ns > 0 && x->ns <= s->cause_ns[ENG_IO_WAIT], "io entry %u: %llu ns of %llu",
		      i, (unsigned long long)x->ns, (unsigned long long)s->cause_ns[ENG_IO_WAIT]);
		CHECK(x->written <= 16u << 20, "written %llu > 16 MiB",
		      (unsigned long long)x->written);
		if (x->call == SB_IO_FSYNC)
			fs = x;
		else
			CHECK(x->call == SB_IO_WRITE && x->bytes % (64 << 10) == 0 && x->bytes &&
			      x->bytes == (uint64_t)x->calls * (64 << 10),
			      "io entry %u: %s of %llu bytes in %u calls", i, sb_io_name(x->call),
			      (unsigned long long)x->bytes, x->calls);
	}
	REQUIRE(fs, "no fsync among the %u files of step 1000", s->nio);
	CHECK(fs->calls == 1 && fs->bytes == 0, "fsync: %u calls, %llu bytes", fs->calls,
	      (unsigned long long)fs->bytes);
	CHECK(fs->written == 16u << 20, "fsync: %llu bytes written to it in the step, want 16 MiB",
	      (unsigned long long)fs->written);
	step_text(e, s, true, buf, sizeof(buf));
	CHECK(strstr(buf, "\"call\":\"fsync\"") && strstr(buf, want) &&
	      strstr(buf, "\"written_bytes\":16777216"), "JSON: %s", buf);
	engine_free(e);
	free_cap(c);
}

/*
 * sbw-main moves itself between two CPUs with sched_setaffinity, inside step
 * 1000: its migration time is its own calls', and the line says so.
 */
static void t_moved_itself(void)
{
	char *args[] = { "steps", "1", "migrate", "6", "steps", "1", NULL };
	const struct eng_step *s;
	struct engine *e;
	struct cap *c;
	uint32_t tid;
	pid_t pid;

	NEED_BPF();
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP("one CPU: nothing to move to");
	e = blame_work(args, &c, &pid);
	REQUIRE(e, "cannot run %s (build it: make test-bin)", prog_path("sbwork"));
	tid = tid_named(c, "sbw-main");
	REQUIRE(tid, "no rename to sbw-main seen");
	s = step_numbered(e, 1000);
	REQUIRE(s, "no step 1000 among %llu steps", (unsigned long long)engine_nsteps(e));
	REQUIRE(s->cause_ns[ENG_MIGRATION] > 0, "step 1000 has no migration time");
	REQUIRE(s->nmoves > 0, "step 1000's migration names no mover");
	CHECK(s->moves[0].how == ENG_MOVE_SELF && s->moves[0].by_tid == tid,
	      "moved by %s %u, want self %u", eng_move_how_name(s->moves[0].how),
	      s->moves[0].by_tid, tid);
	CHECK(s->moves[0].ns > 0 && s->moves[0].ns <= s->cause_ns[ENG_MIGRATION],
	      "moves[0] %llu ns of %llu", (unsigned long long)s->moves[0].ns,
	      (unsigned long long)s->cause_ns[ENG_MIGRATION]);
	CHECK(s->moves[0].from_cpu < 0 || s->moves[0].from_cpu != s->moves[0].to_cpu,
	      "a move from CPU %d to itself", s->moves[0].from_cpu);
	CHECK(s->count[ENG_N_MIGRATIONS] >= 6, "%u migrations, want at least 6",
	      s->count[ENG_N_MIGRATIONS]);
	engine_free(e);
	free_cap(c);
}

/*
 * sbw-main maps 3000 anonymous pages inside step 1000 and touches each once:
 * the step's page_fault time is in that mapping, of that size, made in 1000.
 */
static void t_faults_name_mapping(void)
{
	char *args[] = { "steps", "1", "faults", "3000", "steps", "1", NULL };
	const struct eng_step *s;
	const struct eng_map *m;
	struct engine *e;
	struct cap *c;
	pid_t pid;
	long pg = sysconf(_SC_PAGESIZE);

	NEED_BPF();
	e = blame_work(args, &c, &pid);
	REQUIRE(e, "cannot run %s (build it: make test-bin)", prog_path("sbwork"));
	s = step_numbered(e, 1000);
	REQUIRE(s, "no step 1000 among %llu steps", (unsigned long long)engine_nsteps(e));
	REQUIRE(s->cause_ns[ENG_PAGE_FAULT] > 0, "step 1000 has no page_fault time");
	REQUIRE(s->nmaps > 0, "step 1000's faults name no mapping");
	m = &s->maps[0];
	CHECK(m->anon && m->len == 3000 * (uint64_t)pg, "mapping: anon %d, %llu bytes, want %llu",
	      m->anon, (unsigned long long)m->len, 3000ull * pg);
	CHECK(m->step_known && m->step_number == 1000, "mapped in step %llu (known %d)",
	      (unsigned long long)m->step_number, m->step_known);
	/* each page faults once; the probe sees every one (a busy machine only stretches them) */
	CHECK(m->faults >= 2900 && m->faults <= 3000, "%u faults in it, want about 3000", m->faults);
	CHECK(m->ns > 0 && m->ns <= s->cause_ns[ENG_PAGE_FAULT], "%llu ns of %llu",
	      (unsigned long long)m->ns, (unsigned long long)s->cause_ns[ENG_PAGE_FAULT]);
	engine_free(e);
	free_cap(c);
}

int main(void)
{
	RUN(t_faults_name_mapping);
	RUN(t_fsync_names_file);
	RUN(t_moved_itself);
	return test_summary();
}
