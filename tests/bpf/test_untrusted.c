// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The trainer is untrusted and the agent runs as root. Real attacks by a
 * target on the agent, each against the real kernel. Root only.
 *
 *  - many_files_bounded: a target maps 3000 distinct copies of an ELF file
 *    with the stepblame:step note. The capture is ready within 2 s (it took
 *    minutes when every file got probes and a list of 512 was searched
 *    again), at most 16 files get probes with one status saying how many were
 *    left out, and the rescans that follow parse no file again.
 *  - setuid_exec_stops: a target running as nobody execs a setuid-root
 *    program that then faults pages and calls malloc: nothing of it reaches
 *    the trace, and a note says why the recording stopped.
 *  - plain_exec_recorded: the same with a program that is not setuid: it is
 *    recorded as before.
 *  - setuid_call_stops: a target running as root calls setresuid(nobody)
 *    and goes on working: nothing after the change is recorded.
 *  - child_setuid_exec_unfollowed: a child process of a target running as
 *    nobody execs a setuid-root program that faults pages and calls malloc:
 *    nothing of it is recorded, not even its exit, while the target goes on
 *    being recorded; child_plain_exec_followed: with a plain program the
 *    child's work and exit are recorded.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>

#include "test.h"
#include "capture.h"
#include "capture/collect.h"
#include "base/util.h"

#define NOBODY 65534

static int copy_file(const char *src, const char *dst, mode_t mode)
{
	char buf[65536];
	int in = open(src, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;

	if (in < 0)
		return -1;
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
	if (out < 0) {
		close(in);
		return -1;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n)
			n = -1;
	close(in);
	close(out);
	/* chown first: it clears the set-user-ID bit */
	if (n < 0 || chown(dst, 0, 0) || chmod(dst, mode))
		return -1;
	return 0;
}

/* a new directory, 0755, on a file system that honours set-user-ID bits; NULL if none */
static const char *suid_dir(char *buf, size_t len)
{
	static const char *bases[] = { "/tmp", "/var/tmp", "/dev/shm" };

	for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		struct statvfs v;

		snprintf(buf, len, "%s/sbsuid.XXXXXX", bases[i]);
		if (!mkdtemp(buf))
			continue;
		if (!statvfs(buf, &v) && !(v.f_flag & ST_NOSUID) && !chmod(buf, 0755))
			return buf;
		rmdir(buf);
	}
	return NULL;
}

static void rm_dir(const char *dir)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", dir);
}

/*
 * Start argv[0] with its stdin and stdout on pipes (*go, *out), as uid if
 * not 0 (groups dropped, gid the same).
 */
static pid_t spawn(char *const argv[], uid_t uid, int *go, int *out)
{
	int in[2], o[2], ex[2];
	pid_t pid;
	char c;

	if (pipe(in))
		return -1;
	if (pipe(o) || pipe2(ex, O_CLOEXEC)) {
		close(in[0]);
		close(in[1]);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(o[1], 1);
		close(in[0]);
		close(in[1]);
		close(o[0]);
		close(o[1]);
		close(ex[0]);
		if (uid && (setgroups(0, NULL) || setresgid(uid, uid, uid) || setresuid(uid, uid, uid)))
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	close(in[0]);
	close(o[1]);
	close(ex[1]);
	/*
	 * Returns once the child has taken uid and exec'd (the close-on-exec
	 * pipe reads end-of-file): a capture started earlier would see the
	 * target change credentials under it, and rightly stop recording.
	 */
	while (read(ex[0], &c, 1) < 0 && errno == EINTR)
		;
	close(ex[0]);
	*go = in[1];
	*out = o[0];
	return pid;
}

/* what the child printed until it (and what it exec'd) closed stdout */
static void read_all(int fd, char *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;

	while (got + 1 < len && (n = read(fd, buf + got, len - 1 - got)) > 0)
		got += n;
	buf[got] = 0;
}

static void cap_init(struct cap *c, pid_t pid, int64_t duration_ns)
{
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->o.probe.pid = pid;
	c->o.probe.ring_bytes = 16 << 20;
	c->o.probe.wake_bytes = 64 << 10;
	c->o.duration_ns = duration_ns;
	c->o.agent_cpu = -2;
	c->o.quiet = true;
	c->o.no_gpu = true;
}

static const struct sb_text *find_text(struct cap *c, unsigned type, const char *needle)
{
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_text *t = (const void *)c->recs[i];

		if (t->h.type == type && memmem(t->text, t->len, needle, strlen(needle)))
			return t;
	}
	return NULL;
}

static size_t count_text(struct cap *c, unsigned type, uint32_t id, const char *needle)
{
	size_t n = 0;

	for (size_t i = 0; i < c->n; i++) {
		const struct sb_text *t = (const void *)c->recs[i];

		if (t->h.type == type && t->id == id &&
		    memmem(t->text, t->len, needle, strlen(needle)))
			n++;
	}
	return n;
}

/* ---- many mapped files ---- */

static void t_many_files_bounded(void)
{
	char dir[] = "/dev/shm/sbmany.XXXXXX", buf[256] = "", count[16];
	struct probes_scan_counters at_ready, at_end;
	struct cap *c;
	uint64_t t0, ready_ns;
	pthread_t t;
	int go = -1, out = -1, status;
	pid_t pid;
	ssize_t n;

	NEED_BPF();
	REQUIRE(!access(prog_path("sbhostile"), X_OK), "no %s (make test-bin)",
		prog_path("sbhostile"));
	REQUIRE(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	snprintf(count, sizeof(count), "%d", 3000);
	{
		char *argv[] = { (char *)prog_path("sbhostile"), "-t", "120", "copies", dir,
				 (char *)prog_path("sbhostile"), count, NULL };

		pid = spawn(argv, 0, &go, &out);
	}
	REQUIRE(pid > 0, "cannot start sbhostile");
	n = read(out, buf, sizeof(buf) - 1);
	if (n <= 0 || !strstr(buf, "ready")) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		rm_dir(dir);
		REQUIRE(0, "sbhostile did not map its copies");
	}
	c = calloc(1, sizeof(*c));
	cap_init(c, pid, 4500000000ll);
	t0 = mono_ns();
	cap_start(c, &t);
	ready_ns = mono_ns() - t0;
	probes_scan_counters(&at_ready);
	pthread_join(t, NULL);
	probes_scan_counters(&at_end);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	close(go);
	close(out);
	rm_dir(dir);

	CHECK(c->rc == 0, "capture failed to start");
	/*
	 * It took minutes before: every file got probes. The work is bounded by
	 * the counts below (probes, parses); the times only catch minutes, not a
	 * loaded machine's seconds (bench/maps_cost.py measures them)
	 */
	CHECK(ready_ns < 30000000000ull, "attach took %.2f s with 3000 mapped files", ready_ns / 1e9);
	CHECK(count_text(c, SB_REC_PROBE, 1, "usdt:stepblame:step") <= 16,
	      "%zu files got step probes", count_text(c, SB_REC_PROBE, 1, "usdt:stepblame:step"));
	CHECK(count_text(c, SB_REC_PROBE, 1, "usdt:stepblame:step") >= 1, "no file got step probes");
	CHECK(find_text(c, SB_REC_PROBE, "more mapped files carry the step note"),
	      "no status saying how many files were left out");
	/*
	 * each file left out is said once: a scan says the ones it found new (a
	 * loaded machine's attach scan can stop at its deadline and leave some to
	 * the next), so the statuses' counts add up to the total the last says
	 */
	{
		unsigned long long sum = 0, more, total = 0;
		size_t said = 0;

		for (size_t i = 0; i < c->n; i++) {
			const struct sb_text *x = (const void *)c->recs[i];
			char line[256];

			if (x->h.type != SB_REC_PROBE || x->id != 0)
				continue;
			snprintf(line, sizeof(line), "%.*s", (int)x->len, x->text);
			const char *m = strstr(line, " more mapped files carry the step note");

			if (!m)
				continue;
			while (m > line && m[-1] >= '0' && m[-1] <= '9')
				m--; /* to the count's first digit */
			if (sscanf(m, "%llu more mapped files carry the step note (%llu in all so far)",
				   &more, &total) != 2)
				continue;
			sum += more;
			said++;
		}
		size_t probed = count_text(c, SB_REC_PROBE, 1, "usdt:stepblame:step");

		CHECK(said >= 1 && sum == total,
		      "%zu statuses say %llu files left out, the last %llu in all", said, sum, total);
		/* the 3000 copies and the program itself carry the note: each probed or said once */
		CHECK(total + probed >= 3000 && total + probed <= 3001,
		      "%llu files said left out and %zu probed, of 3001", total, probed);
	}
	/* the files are parsed once: the rescans find them known */
	CHECK(at_ready.elf_parses >= 3000, "only %llu files parsed",
	      (unsigned long long)at_ready.elf_parses);
	CHECK(at_end.scans >= at_ready.scans + 3, "%llu rescans in 4.5 s",
	      (unsigned long long)(at_end.scans - at_ready.scans));
	CHECK(at_end.elf_parses == at_ready.elf_parses, "the rescans parsed %llu files again",
	      (unsigned long long)(at_end.elf_parses - at_ready.elf_parses));
	/* a rescan reads the 3000 lines and finds every file known: milliseconds, not a parse each */
	CHECK(at_end.max_scan_ns < 5000000000ull, "a rescan took %.0f ms", at_end.max_scan_ns / 1e6);
	printf("# 3000 mapped files: ready in %.0f ms, %llu files parsed, rescans up to %.1f ms\n",
	       ready_ns / 1e6, (unsigned long long)at_ready.elf_parses, at_end.max_scan_ns / 1e6);
	free_cap(c);
}

/* ---- credentials ---- */

struct after {
	uint64_t t;                  /* the target's time just before the change */
	uint64_t stop_ns;            /* the stop note's time */
	const struct sb_text *note;  /* the stop note */
	size_t ev_after_stop;        /* kernel events of the target after the stop */
	size_t user_after_t;         /* faults, allocator calls, mmap calls after t */
	size_t faults_before, faults_after, allocs_before;
};

static uint64_t last_t(const char *out)
{
	const char *p = out, *l = NULL;

	while ((p = strstr(p, "T ")))
		l = p++;
	return l ? strtoull(l + 2, NULL, 10) : 0;
}

static void look(struct cap *c, pid_t pid, uint64_t t, struct after *a)
{
	memset(a, 0, sizeof(*a));
	a->t = t;
	a->note = find_text(c, SB_REC_NOTE, "recording stopped");
	a->stop_ns = a->note ? a->note->h.ts : UINT64_MAX;
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_hdr *h = c->recs[i];
		bool user = h->type == SB_EV_FAULT || h->type == SB_EV_ALLOC ||
			    h->type == SB_EV_MMSYS || h->type == SB_EV_ALLOC_BURST ||
			    h->type == SB_EV_FAULT_RUN;

		if (h->type > SB_EV_KERNEL_MAX || h->pid != (uint32_t)pid)
			continue;
		if (h->ts > a->stop_ns)
			a->ev_after_stop++;
		if (user && h->ts > t)
			a->user_after_t++;
		if (h->type == SB_EV_FAULT)
			*(h->ts > t ? &a->faults_after : &a->faults_before) += 1;
		/* a run of faults (bpf/mem.bpf.c): all after t if its last is */
		if (h->type == SB_EV_FAULT_RUN)
			*(h->ts > t ? &a->faults_after : &a->faults_before) +=
				((const struct sb_fault_run *)h)->count;
		if (h->type == SB_EV_ALLOC && h->ts < t)
			a->allocs_before++;
	}
}

/*
 * Run sbexec (copied into dir) with args as uid under a capture; the
 * records and what it printed come back in *cp and out.
 */
static int run_changer(const char *dir, char *const args[], uid_t uid, struct cap **cp,
		       pid_t *pidp, char *out, size_t outlen)
{
	char exe[600], *argv[8] = { exe };
	struct cap *c;
	pthread_t t;
	int go, fd, status;
	pid_t pid;

	snprintf(exe, sizeof(exe), "%s/sbexec", dir);
	if (access(exe, X_OK) && copy_file(prog_path("sbexec"), exe, 0755))
		return -1;
	for (int i = 0; args[i] && i < 6; i++)
		argv[i + 1] = args[i];
	pid = spawn(argv, uid, &go, &fd);
	if (pid < 0)
		return -1;
	c = calloc(1, sizeof(*c));
	cap_init(c, pid, 20000000000ll);
	c->o.probe.alloc_min_ns = 0; /* every allocator call is an event */
	cap_start(c, &t);
	/* one byte for sbexec, one for the program it execs */
	if (write(go, "gg", 2) != 2)
		kill(pid, SIGKILL);
	read_all(fd, out, outlen);
	waitpid(pid, &status, 0);
	pthread_join(t, NULL);
	close(go);
	close(fd);
	*cp = c;
	*pidp = pid;
	return 0;
}

/*
 * run_changer, then dir is removed and the records are looked at; false
 * (the case has failed, and nothing is left to free) if sbexec could not
 * run or the capture did not start
 */
static bool changer_case(const char *dir, char *const args[], uid_t uid, struct cap **cp,
			 pid_t *pidp, struct after *a)
{
	char out[512];

	if (run_changer(dir, args, uid, cp, pidp, out, sizeof(out))) {
		rm_dir(dir);
		CHECK(0, "cannot run sbexec%s", uid ? " as nobody" : "");
		return false;
	}
	rm_dir(dir);
	if ((*cp)->rc || !last_t(out)) {
		CHECK(0, "capture failed to start (%d), or sbexec printed no time: '%s'", (*cp)->rc, out);
		free_cap(*cp);
		return false;
	}
	look(*cp, *pidp, last_t(out), a);
	return true;
}

static void exec_case(bool setuid_bit)
{
	char dbuf[128], prog[600];
	const char *dir;
	struct after a;
	struct cap *c = NULL;
	pid_t pid;

	NEED_BPF();
	REQUIRE(!access(prog_path("sbexec"), X_OK) && !access(prog_path("sbwork"), X_OK),
		"no %s or sbwork (make test-bin)", prog_path("sbexec"));
	dir = suid_dir(dbuf, sizeof(dbuf));
	if (!dir)
		SKIP("no file system here honours set-user-ID bits (all nosuid)");
	snprintf(prog, sizeof(prog), "%s/sbwork", dir);
	if (copy_file(prog_path("sbwork"), prog, setuid_bit ? 04755 : 0755)) {
		rm_dir(dir);
		REQUIRE(0, "cannot copy sbwork to %s: %s", dir, strerror(errno));
	}
	{
		char *args[] = { "exec", prog, "faults", "300", "malloc", "20", NULL };

		if (!changer_case(dir, args, NOBODY, &c, &pid, &a))
			return;
	}
	/* what it did before the exec is recorded either way */
	CHECK(a.faults_before >= 64, "%zu faults before the exec (%zu after, %zu allocator calls "
	      "before; drops %" PRIu64 ")", a.faults_before, a.faults_after, a.allocs_before,
	      c->res.drops_total);
	CHECK(a.allocs_before >= 8, "%zu allocator calls before the exec", a.allocs_before);
	if (setuid_bit) {
		CHECK(a.note, "no note saying the recording stopped");
		CHECK(!a.note || (memmem(a.note->text, a.note->len, "now runs as another user", 24) &&
		      memmem(a.note->text, a.note->len, "euid 65534 -> 0", 15) &&
		      memmem(a.note->text, a.note->len, "after exec", 10)),
		      "note: '%.*s'", (int)a.note->len, a.note->text);
		CHECK(a.stop_ns >= a.t, "stopped %lld ns before the exec",
		      (long long)(a.t - a.stop_ns));
		CHECK(a.ev_after_stop == 0, "%zu events of the setuid program recorded",
		      a.ev_after_stop);
		CHECK(a.user_after_t == 0, "%zu faults/allocator/mmap events after the exec",
		      a.user_after_t);
		CHECK(c->res.end_reason == SBT_END_CREDENTIALS, "ended by %d", c->res.end_reason);
	} else {
		CHECK(!a.note, "recording stopped: '%.*s'", (int)a.note->len, a.note->text);
		/* sbwork faults 300 pages after the exec */
		CHECK(a.faults_after >= 300, "%zu faults after a plain exec", a.faults_after);
	}
	free_cap(c);
}

static void t_setuid_exec_stops(void)
{
	exec_case(true);
}

static void t_plain_exec_recorded(void)
{
	exec_case(false);
}

static void t_setuid_call_stops(void)
{
	char dbuf[128];
	const char *dir;
	struct after a;
	struct cap *c = NULL;
	pid_t pid;

	NEED_BPF();
	REQUIRE(!access(prog_path("sbexec"), X_OK), "no %s (make test-bin)", prog_path("sbexec"));
	dir = suid_dir(dbuf, sizeof(dbuf));
	REQUIRE(dir, "no temporary directory");
	{
		char *args[] = { "setuid", "65534", NULL };

		if (!changer_case(dir, args, 0, &c, &pid, &a))
			return;
	}
	CHECK(a.faults_before >= 64, "%zu faults before setresuid", a.faults_before);
	CHECK(a.note, "no note saying the recording stopped");
	CHECK(!a.note || (memmem(a.note->text, a.note->len, "uid 0 -> 65534", 14) &&
			  memmem(a.note->text, a.note->len, "after a change of credentials", 29)),
	      "note: '%.*s'", (int)a.note->len, a.note->text);
	CHECK(a.ev_after_stop == 0, "%zu events after the stop", a.ev_after_stop);
	/* 256 faults and 16 allocator calls follow the change */
	CHECK(a.user_after_t == 0, "%zu faults/allocator/mmap events after setresuid",
	      a.user_after_t);
	free_cap(c);
}

/* sbexec fork-exec: the child (pid after "C ") execs a copy of sbwork, setuid or not */
static void child_exec_case(bool setuid_bit)
{
	char dbuf[128], prog[600], out[512];
	const char *dir, *cl;
	struct cap *c = NULL;
	size_t child_user = 0, child_exit = 0, parent_after = 0;
	uint64_t t;
	pid_t pid, child;

	NEED_BPF();
	REQUIRE(!access(prog_path("sbexec"), X_OK) && !access(prog_path("sbwork"), X_OK),
		"no %s or sbwork (make test-bin)", prog_path("sbexec"));
	dir = suid_dir(dbuf, sizeof(dbuf));
	if (!dir)
		SKIP("no file system here honours set-user-ID bits (all nosuid)");
	snprintf(prog, sizeof(prog), "%s/sbwork", dir);
	if (copy_file(prog_path("sbwork"), prog, setuid_bit ? 04755 : 0755)) {
		rm_dir(dir);
		REQUIRE(0, "cannot copy sbwork to %s: %s", dir, strerror(errno));
	}
	{
		char *args[] = { "fork-exec", prog, "faults", "300", "malloc", "20", NULL };
		int r = run_changer(dir, args, NOBODY, &c, &pid, out, sizeof(out));

		rm_dir(dir);
		REQUIRE(!r, "cannot run sbexec as nobody");
	}
	cl = strstr(out, "C ");
	t = last_t(out);
	if (c->rc || !cl || !t) {
		CHECK(0, "capture failed to start (%d), or sbexec printed no child or time: '%s'",
		      c->rc, out);
		free_cap(c);
		return;
	}
	child = (pid_t)atoi(cl + 2);
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_hdr *h = c->recs[i];
		bool user = h->type == SB_EV_FAULT || h->type == SB_EV_ALLOC ||
			    h->type == SB_EV_MMSYS || h->type == SB_EV_ALLOC_BURST ||
			    h->type == SB_EV_FAULT_RUN;

		if (h->type > SB_EV_KERNEL_MAX)
			continue;
		/* a fault run stands for its faults */
		if (h->pid == (uint32_t)child && user && h->ts > t)
			child_user += h->type == SB_EV_FAULT_RUN ?
				      ((const struct sb_fault_run *)h)->count : 1;
		if (h->pid == (uint32_t)child && h->type == SB_EV_THREAD_EXIT)
			child_exit++;
		if (h->pid == (uint32_t)pid && h->type == SB_EV_FAULT && h->ts > t)
			parent_after++;
		if (h->pid == (uint32_t)pid && h->type == SB_EV_FAULT_RUN && h->ts > t)
			parent_after += ((const struct sb_fault_run *)h)->count;
	}
	/* the target itself is recorded throughout: 256 faults after its child exited */
	CHECK(parent_after >= 256, "%zu faults of the target after its child's exec", parent_after);
	CHECK(!find_text(c, SB_REC_NOTE, "recording stopped"), "the recording stopped");
	CHECK(c->res.end_reason != SBT_END_CREDENTIALS, "ended by a change of credentials");
	if (setuid_bit) {
		CHECK(child_user == 0, "%zu faults/allocator/mmap events of the setuid child",
		      child_user);
		CHECK(child_exit == 0, "the setuid child's exit recorded");
	} else {
		/* sbwork faults 300 pages after the exec */
		CHECK(child_user >= 300, "%zu events of the child after a plain exec", child_user);
		/* sbwork works on a thread of its own: two exits */
		CHECK(child_exit >= 1, "%zu exits of the child recorded", child_exit);
	}
	free_cap(c);
}

static void t_child_setuid_exec_unfollowed(void)
{
	child_exec_case(true);
}

static void t_child_plain_exec_followed(void)
{
	child_exec_case(false);
}

int main(void)
{
	RUN(t_many_files_bounded);
	RUN(t_setuid_exec_stops);
	RUN(t_plain_exec_recorded);
	RUN(t_setuid_call_stops);
	RUN(t_child_setuid_exec_unfollowed);
	RUN(t_child_plain_exec_followed);
	return test_summary();
}
