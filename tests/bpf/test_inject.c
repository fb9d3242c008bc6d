// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Loading a library into a running process (capture/inject.c) on
 * tests/progs/sbinject: its threads sleep in read, nanosleep, futex and
 * epoll_wait and check their own calls; this test checks what is seen from
 * outside (descriptors, mappings, memory) and the refusals. Root only (ptrace
 * of a process, pidfd_getfd).
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <limits.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "test.h"
#include "capture/inject.h"
#include "base/util.h"

struct target {
	pid_t pid;
	FILE *out;
};

static const char *build_dir(void)
{
	const char *b = getenv("BUILD");

	return b ? b : "build";
}

static void path_of(char *buf, size_t len, const char *rel)
{
	snprintf(buf, len, "%s/%s", build_dir(), rel);
}

/* start sbinject with args; waits for its "ready" line */
static int start(struct target *t, const char *const *args)
{
	char prog[256], line[128];
	const char *argv[12];
	int p[2], n = 0;

	path_of(prog, sizeof(prog), "tests/progs/sbinject");
	argv[n++] = prog;
	for (int i = 0; args[i] && n < 11; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	if (pipe(p))
		return -1;
	t->pid = fork();
	if (t->pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execv(prog, (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	t->out = fdopen(p[0], "r");
	if (!t->out || !fgets(line, sizeof(line), t->out) || strncmp(line, "ready", 5))
		return -1;
	/* let the threads reach their calls */
	usleep(200000);
	return 0;
}

/* its last line and exit status (0: exited 0) */
static int finish(struct target *t, char *last, size_t len)
{
	char line[512];
	int st = 0;

	last[0] = 0;
	while (t->out && fgets(line, sizeof(line), t->out))
		snprintf(last, len, "%.*s", (int)strcspn(line, "\n"), line);
	if (t->out)
		fclose(t->out);
	t->out = NULL;
	waitpid(t->pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int count_fds(pid_t pid)
{
	char path[64];
	DIR *d;
	struct dirent *de;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* lines of its maps, and of them those that contain what */
static int count_maps(pid_t pid, const char *what, int *matching)
{
	char path[64], line[1024];
	FILE *f;
	int n = 0;

	*matching = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		n++;
		*matching += what && strstr(line, what) != NULL;
	}
	fclose(f);
	return n;
}

static long rss_kb(pid_t pid)
{
	char path[64], buf[4096], *p;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (read_small_file(path, buf, sizeof(buf)) < 0 || !(p = strstr(buf, "VmRSS:")))
		return -1;
	return atol(p + 6);
}

static bool have_lib(char *lib, size_t len)
{
	path_of(lib, len, "tests/libs/libinjtest.so");
	return !access(lib, R_OK);
}

/* root, the library built, sbinject started with args: true; else the case skips or fails */
static bool prepare(struct target *t, const char *const *args, char *lib, size_t len)
{
	if (geteuid()) {
		test_skip("needs root");
		return false;
	}
	if (!have_lib(lib, len)) {
		test_skip("%s not built", lib);
		return false;
	}
	if (start(t, args)) {
		test_fail(__FILE__, __LINE__, "sbinject %s did not start", args[0]);
		return false;
	}
	return true;
}

static void t_inject_sleeping_threads(void)
{
	const char *args[] = { "1500", NULL };
	struct inject_opts o = { .memfd_name = "sbinject-test", .entry = "sbinject_entry" };
	struct inject_result res;
	struct target t = { 0 };
	char lib[256], err[512], last[512];
	int fds0, fds1, m, rc;

	if (!prepare(&t, args, lib, sizeof(lib)))
		return;
	o.lib = lib;
	fds0 = count_fds(t.pid);
	rc = inject_library(t.pid, &o, &res, err, sizeof(err));
	fds1 = count_fds(t.pid);
	count_maps(t.pid, "/memfd:sbinject-test", &m);
	CHECK(rc == 0, "inject_library: %s", err);
	CHECK(res.entry_ret == 42, "the entry returned %d", res.entry_ret);
	CHECK(res.tid != t.pid, "the main thread %d was used, sleeping threads were there",
	      (int)res.tid);
	CHECK(res.interrupted_nr >= 0, "interrupted in system call %ld", res.interrupted_nr);
	CHECK(fds1 == fds0, "descriptors %d before, %d after: one left behind", fds0, fds1);
	CHECK(m > 0, "the library is not mapped in the target");
	rc = finish(&t, last, sizeof(last));
	CHECK(rc == 0 && strstr(last, "sbinject: ok") && strstr(last, "notes=1"),
	      "the target's own checks: exit %d, %s", rc, last);
	printf("# thread %d interrupted in syscall %ld, held %.2f ms; %s\n", (int)res.tid,
	       res.interrupted_nr, res.pause_ns / 1e6, last);
}

/*
 * Each sleeping thread in turn (o.tid), five loads each: read, nanosleep and
 * futex are interrupted and restarted; epoll_wait, which the kernel would end
 * with EINTR, is never taken.
 */
static void t_inject_each_thread(void)
{
	const char *args[] = { "7000", NULL };
	struct inject_opts o = { .memfd_name = "sbinject-test", .entry = "sbinject_entry",
				 .unload = true, .timeout_ms = 3000 };
	struct inject_result res;
	struct target t = { 0 };
	char lib[256], err[512], last[512], path[64];
	bool read_done = false, sleep_done = false, futex_done = false, epoll_left = false;
	DIR *d;
	struct dirent *de;
	int rc, loads = 0;

	if (!prepare(&t, args, lib, sizeof(lib)))
		return;
	o.lib = lib;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)t.pid);
	d = opendir(path);
	while (d && (de = readdir(d))) {
		pid_t tid = (pid_t)atoi(de->d_name);
		char sc[64], buf[256];
		long nr;

		if (tid <= 0 || tid == t.pid)
			continue;
		snprintf(sc, sizeof(sc), "/proc/%d/task/%d/syscall", (int)t.pid, (int)tid);
		if (read_small_file(sc, buf, sizeof(buf)) <= 0 || sscanf(buf, "%ld", &nr) != 1)
			continue;
		o.tid = tid;
		for (int i = 0; i < 5; i++) {
			rc = inject_library(t.pid, &o, &res, err, sizeof(err));
			if (nr == 232 /* epoll_wait */) {
				CHECK(rc == -EAGAIN, "the epoll_wait thread was taken: rc %d %s", rc, err);
				epoll_left = true;
				break;
			}
			CHECK(rc == 0 && res.entry_ret == 42, "thread %d in syscall %ld: %s", (int)tid,
			      nr, err);
			loads++;
			read_done |= res.interrupted_nr == 0;
			sleep_done |= res.interrupted_nr == 35 || res.interrupted_nr == 230;
			futex_done |= res.interrupted_nr == 202;
		}
	}
	if (d)
		closedir(d);
	CHECK(read_done && sleep_done && futex_done && epoll_left,
	      "not every kind was tried: read %d nanosleep %d futex %d epoll %d", read_done,
	      sleep_done, futex_done, epoll_left);
	rc = finish(&t, last, sizeof(last));
	CHECK(rc == 0 && strstr(last, "sbinject: ok"), "the target's own checks: exit %d, %s", rc,
	      last);
	printf("# %d loads into chosen threads; %s\n", loads, last);
}

/* 100 loads and unloads: no descriptor, mapping or memory left behind */
static void t_inject_repeat_100(void)
{
	const char *args[] = { "60000", NULL };
	struct inject_opts o = { .memfd_name = "sbinject-test", .entry = "sbinject_entry",
				 .unload = true };
	struct inject_result res;
	struct target t = { 0 };
	char lib[256], err[512], last[512];
	int fds0, maps0, maps10 = 0, m, ok = 0, tids_used = 0;
	long rss0, rss1 = 0;
	uint64_t held_max = 0, t0;
	pid_t prev = 0;

	if (!prepare(&t, args, lib, sizeof(lib)))
		return;
	o.lib = lib;
	fds0 = count_fds(t.pid);
	maps0 = count_maps(t.pid, NULL, &m);
	rss0 = rss_kb(t.pid);
	t0 = mono_ns();
	for (int i = 0; i < 100; i++) {
		int rc = inject_library(t.pid, &o, &res, err, sizeof(err));

		if (rc) {
			CHECK(0, "round %d: %s", i, err);
			break;
		}
		ok += res.entry_ret == 42;
		/* one thread throughout: each thread's first dlopen makes it a malloc arena */
		o.tid = res.tid;
		tids_used += res.tid != prev;
		prev = res.tid;
		if (res.pause_ns > held_max)
			held_max = res.pause_ns;
		/*
		 * After the first loads: the loader's own tables, and a malloc arena
		 * (two mappings) for each thread that ran dlopen, once.
		 */
		if (i == 9) {
			rss1 = rss_kb(t.pid);
			maps10 = count_maps(t.pid, NULL, &m);
		}
	}
	CHECK(ok == 100, "%d of 100 entries returned 42", ok);
	CHECK(count_fds(t.pid) == fds0, "descriptors %d before, %d after", fds0, count_fds(t.pid));
	CHECK(count_maps(t.pid, "sbinject-test", &m) == maps10 && m == 0,
	      "mappings %d before, %d after 10 rounds, %d after 100 (%d of the library)", maps0,
	      maps10, count_maps(t.pid, NULL, &m), m);
	{
		long rss2 = rss_kb(t.pid);

		/* a leak of a stack (4 MiB reserved) or a copy of the library a round would show */
		CHECK(rss2 - rss1 < 2048, "RSS %ld kB at start, %ld after 10 rounds, %ld after 100",
		      rss0, rss1, rss2);
		printf("# 100 rounds in %.2f s on %d thread, longest hold %.2f ms, "
		       "RSS %ld -> %ld -> %ld kB, mappings %d -> %d\n", (mono_ns() - t0) / 1e9,
		       tids_used, held_max / 1e6, rss0, rss1, rss2, maps0, maps10);
	}
	kill(t.pid, SIGTERM);
	finish(&t, last, sizeof(last));
}

/* a thread taken, a thread that does nothing: sbinject's own checks after the load of a channel */
static void t_refuse_traced(void)
{
	const char *args[] = { "1500", NULL };
	struct inject_opts o = { .entry = "sbinject_entry" };
	struct inject_result res;
	struct target t = { 0 };
	char lib[256], err[512], last[512], want[64];
	pid_t tracer;
	int rc, p[2];

	if (!prepare(&t, args, lib, sizeof(lib)))
		return;
	o.lib = lib;
	if (pipe(p))
		return;
	tracer = fork();
	if (tracer == 0) {
		char c = ptrace(PTRACE_SEIZE, t.pid, NULL, NULL) ? 'n' : 'y';

		if (write(p[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	{
		char c = 0;

		CHECK(read(p[0], &c, 1) == 1 && c == 'y', "the tracer could not seize the target");
	}
	close(p[0]);
	close(p[1]);
	rc = inject_library(t.pid, &o, &res, err, sizeof(err));
	snprintf(want, sizeof(want), "already traced by PID %d", (int)tracer);
	CHECK(rc == -EBUSY && strstr(err, want), "rc %d: %s", rc, err);
	kill(tracer, SIGKILL);
	waitpid(tracer, NULL, 0);
	rc = finish(&t, last, sizeof(last));
	CHECK(rc == 0 && strstr(last, "notes=0"), "the target: exit %d, %s", rc, last);
	printf("# %s\n", err);
}

static void refuse_case(const char *flag, int want_rc, const char *want_text)
{
	const char *args[] = { flag, "1500", NULL };
	struct inject_opts o = { .entry = "sbinject_entry" };
	struct inject_result res;
	struct target t = { 0 };
	char lib[256], err[512], last[512];
	int rc, fds0;

	if (!prepare(&t, args, lib, sizeof(lib)))
		return;
	o.lib = lib;
	fds0 = count_fds(t.pid);
	rc = inject_library(t.pid, &o, &res, err, sizeof(err));
	CHECK(rc == want_rc && strstr(err, want_text), "rc %d (want %d): %s", rc, want_rc, err);
	CHECK(count_fds(t.pid) == fds0, "a descriptor left behind");
	rc = finish(&t, last, sizeof(last));
	CHECK(rc == 0 && strstr(last, "sbinject: ok") && strstr(last, "notes=0"),
	      "the target after the refusal: exit %d, %s", rc, last);
	printf("# %s\n", err);
}

/* a filter that kills on memfd_create: refused before any call, the target lives */
static void t_refuse_seccomp_kill(void)
{
	refuse_case("--seccomp-kill-memfd", -EPERM, "would kill it on memfd_create");
}

/* every thread blocks SIGSEGV: the return of a call could not be caught without changing that */
static void t_refuse_segv_blocked(void)
{
	refuse_case("--block-segv", -EAGAIN, "blocks or ignores SIGSEGV");
}

/* a container runtime's kind of filter (errors, kills elsewhere, argument checks): allowed */
static void t_inject_under_docker_filter(void)
{
	const char *args[] = { "--seccomp-docker", "1500", NULL };
	struct inject_opts o = { .memfd_name = "sbinject-test", .entry = "sbinject_entry" };
	struct inject_result res;
	struct target t = { 0 };
	char lib[256], err[512], last[512];
	int rc;

	if (!prepare(&t, args, lib, sizeof(lib)))
		return;
	o.lib = lib;
	rc = inject_library(t.pid, &o, &res, err, sizeof(err));
	CHECK(rc == 0 && res.entry_ret == 42, "rc %d: %s", rc, err);
	rc = finish(&t, last, sizeof(last));
	CHECK(rc == 0 && strstr(last, "notes=1"), "the target: exit %d, %s", rc, last);
}

/*
 * An entry that does not return: given up after the time limit, the thread
 * put back in its own call, the memfd closed; the program's checks pass.
 */
static void t_abandon_stuck_call(void)
{
	const char *args[] = { "4000", NULL };
	struct inject_opts o = { .memfd_name = "sbinject-test", .entry = "sbinject_hang",
				 .timeout_ms = 1500 };
	struct inject_result res;
	struct target t = { 0 };
	char lib[256], err[512], last[512];
	int rc, fds0;
	uint64_t t0;

	if (!prepare(&t, args, lib, sizeof(lib)))
		return;
	o.lib = lib;
	fds0 = count_fds(t.pid);
	t0 = mono_ns();
	rc = inject_library(t.pid, &o, &res, err, sizeof(err));
	CHECK(rc == -ETIMEDOUT && strstr(err, "did not return in time"), "rc %d: %s", rc, err);
	CHECK(mono_ns() - t0 < 5000000000ull, "gave up after %.1f s", (mono_ns() - t0) / 1e9);
	CHECK(count_fds(t.pid) == fds0, "descriptors %d before, %d after", fds0, count_fds(t.pid));
	rc = finish(&t, last, sizeof(last));
	CHECK(rc == 0 && strstr(last, "sbinject: ok"), "the target: exit %d, %s", rc, last);
	printf("# %s; %s\n", err, last);
}

/* the size of the file that PID holds open as path (a removed one too), -1 if none */
static long long held_file_size(pid_t pid, const char *path)
{
	char dir[64], fd[64 + 256 + 8], link[PATH_MAX];
	DIR *d;
	struct dirent *de;
	long long size = -1;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	if (!(d = opendir(dir)))
		return -1;
	while ((de = readdir(d))) {
		struct stat st;
		ssize_t n;

		snprintf(fd, sizeof(fd), "%s/%s", dir, de->d_name);
		n = readlink(fd, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		if (!strncmp(link, path, strlen(path)) && !stat(fd, &st))
			size = (long long)st.st_size;
	}
	closedir(d);
	return size;
}

/*
 * A hostile target answers memfd_create with a descriptor of a file of its
 * own (a seccomp user notification): the agent, root, writes nothing into it,
 * named or removed from its directory, and the target runs on.
 */
static void decoy_case(const char *flag)
{
	char decoy[64];
	const char *args[] = { flag, decoy, "1500", NULL };
	struct inject_opts o = { .memfd_name = "sbinject-test", .entry = "sbinject_entry" };
	struct inject_result res;
	struct target t = { 0 };
	char lib[256], err[512], last[512];
	long long size;
	int rc, fds0;

	snprintf(decoy, sizeof(decoy), "/dev/shm/sbinject-decoy-%d", (int)getpid());
	if (!prepare(&t, args, lib, sizeof(lib)))
		return;
	o.lib = lib;
	fds0 = count_fds(t.pid);
	rc = inject_library(t.pid, &o, &res, err, sizeof(err));
	size = held_file_size(t.pid, decoy);
	CHECK(rc == -EBADF && strstr(err, "not the empty memfd made for the library"),
	      "rc %d: %s", rc, err);
	CHECK(size == 0, "the decoy file now holds %lld bytes", size);
	CHECK(count_fds(t.pid) == fds0, "descriptors %d before, %d after", fds0, count_fds(t.pid));
	rc = finish(&t, last, sizeof(last));
	CHECK(rc == 0 && strstr(last, "sbinject: ok") && strstr(last, "notes=0"),
	      "the target: exit %d, %s", rc, last);
	unlink(decoy);
	printf("# %s\n", err);
}

static void t_hostile_memfd_decoy(void)
{
	decoy_case("--memfd-decoy");
}

static void t_hostile_memfd_decoy_unlinked(void)
{
	decoy_case("--memfd-decoy-unlinked");
}

/*
 * The target killed while its thread runs the injected entry: the agent
 * returns at once with an error, not at its deadline.
 */
static void t_target_killed_during_load(void)
{
	const char *args[] = { "8000", NULL };
	struct inject_opts o = { .memfd_name = "sbinject-test", .entry = "sbinject_hang",
				 .timeout_ms = 15000 };
	struct inject_result res;
	struct target t = { 0 };
	char lib[256], err[512], last[512];
	pid_t killer;
	uint64_t t0;
	int rc;

	if (!prepare(&t, args, lib, sizeof(lib)))
		return;
	o.lib = lib;
	killer = fork();
	if (killer == 0) {
		usleep(700000);
		kill(t.pid, SIGKILL);
		_exit(0);
	}
	t0 = mono_ns();
	rc = inject_library(t.pid, &o, &res, err, sizeof(err));
	CHECK(rc < 0 && rc != -ETIMEDOUT, "rc %d: %s", rc, err);
	CHECK(mono_ns() - t0 < 5000000000ull, "returned after %.1f s", (mono_ns() - t0) / 1e9);
	waitpid(killer, NULL, 0);
	rc = finish(&t, last, sizeof(last));
	CHECK(rc == 128 + SIGKILL, "the target ended with %d", rc);
	printf("# after %.2f s: %s\n", (mono_ns() - t0) / 1e9, err);
}

/*
 * A hostile target whose mmap (the agent's first remote call) runs exec: the
 * held thread becomes another program, which a setuid bit would make
 * privileged since root traces it. The agent gives up and writes nothing into
 * it: the new program runs to its end (registers of the old one put into it
 * would crash it).
 */
static void t_hostile_exec_in_call(void)
{
	char prog[256];
	const char *args[] = { "--exec-in-mmap", prog, "3000", NULL };
	struct inject_opts o = { .memfd_name = "sbinject-test", .entry = "sbinject_entry" };
	struct inject_result res;
	struct target t = { 0 };
	char lib[256], err[512], last[512], exe[PATH_MAX], link[64];
	ssize_t n;
	int rc;

	path_of(prog, sizeof(prog), "tests/progs/sbstatic");
	if (!prepare(&t, args, lib, sizeof(lib)))
		return;
	o.lib = lib;
	rc = inject_library(t.pid, &o, &res, err, sizeof(err));
	CHECK(rc < 0 && strstr(err, "ran exec while the collector was being loaded"),
	      "rc %d: %s", rc, err);
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)t.pid);
	n = readlink(link, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	CHECK(strstr(exe, "sbstatic") != NULL, "the target runs %s, not the program it exec'd", exe);
	rc = finish(&t, last, sizeof(last));
	CHECK(rc == 0, "the exec'd program ended with %d (the agent wrote into it?)", rc);
	printf("# %s\n", err);
}

/* a statically linked program has no loader to call */
static void t_refuse_static(void)
{
	char prog[256], err[512];
	pid_t pid;
	int rc, st;

	if (geteuid()) {
		test_skip("needs root");
		return;
	}
	path_of(prog, sizeof(prog), "tests/progs/sbstatic");
	pid = fork();
	if (pid == 0) {
		execl(prog, prog, "1500", (char *)NULL);
		_exit(127);
	}
	usleep(200000);
	rc = inject_check(pid, err, sizeof(err));
	CHECK(rc == -ENOEXEC && strstr(err, "statically linked"), "rc %d: %s", rc, err);
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sbstatic ended with status %d", st);
}

static void t_yama_scope(void)
{
	char err[256];

	CHECK(inject_yama_allows(3, err, sizeof(err)) == -EPERM && strstr(err, "ptrace_scope is 3"),
	      "scope 3 not refused: %s", err);
	for (int s = -1; s <= 2; s++)
		CHECK(inject_yama_allows(s, err, sizeof(err)) == 0, "scope %d refused", s);
}

int main(void)
{
	RUN(t_inject_sleeping_threads);
	RUN(t_inject_each_thread);
	RUN(t_inject_repeat_100);
	RUN(t_refuse_traced);
	RUN(t_refuse_seccomp_kill);
	RUN(t_refuse_segv_blocked);
	RUN(t_inject_under_docker_filter);
	RUN(t_abandon_stuck_call);
	RUN(t_hostile_memfd_decoy);
	RUN(t_hostile_memfd_decoy_unlinked);
	RUN(t_target_killed_during_load);
	RUN(t_hostile_exec_in_call);
	RUN(t_refuse_static);
	RUN(t_yama_scope);
	return test_summary();
}
