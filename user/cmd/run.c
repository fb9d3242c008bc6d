// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `stepblame run [opts] -- CMD [ARGS...]`: launch CMD with the CUPTI collector
 * injected (CUDA_INJECTION64_PATH, and NVTX_INJECTION64_PATH = libcupti so
 * NVTX ranges arrive as markers), trace it from its first instruction to its
 * exit, and print the report.
 *
 * The child is held at CMD's entry point (PTRACE_TRACEME stops it after the
 * exec; a breakpoint at AT_ENTRY lets the dynamic loader map libc first), so
 * that the trace starts with CMD's own identity and its libraries' probes,
 * and is let go once the probes are attached. Where ptrace is not allowed it
 * waits on a pipe before the exec instead.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd/cmds.h"
#include "capture/capture_file.h"
#include "capture/collect.h"
#include "capture/inject.h"
#include "base/opts.h"
#include "base/outfile.h"
#include "capture/probes.h"
#include "capture/target.h"
#include "engine/engine.h"
#include "format/trace.h"
#include "base/util.h"

#define COLLECTOR_SO INJECT_COLLECTOR_SO

static const char run_usage[] =
"usage: stepblame run [options] [--dormant] [-o FILE] -- CMD [ARGS...]\n"
"\n"
"Launch CMD (a training job) with stepblame's GPU collector loaded into it, trace\n"
"it until it exits, then print the per-step report. CMD's exit status is\n"
"stepblame's exit status. Under sudo, CMD runs as the user who ran sudo (with\n"
"that user's HOME), not as root; only the tracer keeps root. The trace is that\n"
"user's from its first byte, and an output path they could not create or replace\n"
"themselves is refused before CMD starts.\n"
"\n"
"The collector is a CUPTI library loaded through CUDA_INJECTION64_PATH: it\n"
"records kernels, copies, memsets, synchronisations, the CUDA calls that launch\n"
"them (and the thread that made each call) and NVTX ranges (PyTorch's\n"
"torch.cuda.nvtx.range_push), all on the same clock as the host events. It is\n"
"dormant (nothing enabled in CUPTI) until a stepblame agent turns it on, and\n"
"goes dormant again when the agent leaves.\n"
"\n";

enum { OPT_STEP_NVTX = 256, OPT_STEP_KERNEL, OPT_STEP_API, OPT_DORMANT, OPT_MARK_OPTIMIZER };

/*
 * What run's help lists; --dormant and the step options are run's own
 * (pre_parse), the others are capture options (collect_options) described
 * as run uses them.
 */
static const struct opt run_options[] = {
	{ "output", 'o', "FILE",
	  "trace file (default: stepblame-<PID>.sbtrace in the current\n"
	  "directory); read it again with `stepblame report FILE`" },
	{ "step-nvtx", OPT_STEP_NVTX, "REGEX",
	  "steps are the NVTX ranges whose text matches REGEX\n"
	  "(e.g. '^step [0-9]+$'); passed to the report" },
	{ "step-kernel", OPT_STEP_KERNEL, "REGEX", "a step begins at each launch of a matching kernel" },
	{ "step-api", OPT_STEP_API, "REGEX", "a step begins at each CUDA API call whose name matches" },
	{ "mark-optimizer-steps", OPT_MARK_OPTIMIZER, NULL,
	  "CMD is a Python trainer: a step mark after every PyTorch\n"
	  "optimizer.step(), with no change to the script (step N is\n"
	  "the loop's iteration N; the stepblame Python package, put\n"
	  "first on PYTHONPATH, hooks torch.optim when it is imported)" },
	{ "dormant", OPT_DORMANT, NULL,
	  "load the collector but do not trace: CMD runs with its own\n"
	  "PID, and `sudo stepblame attach -p PID` (or record) turns the\n"
	  "GPU timeline on at any time, and off when it detaches.\n"
	  "Needs no privileges." },
	{ "duration", 'd', "SEC",
	  "stop tracing after SEC (CMD keeps running; the report is\n"
	  "printed then, and stepblame waits for CMD to exit)" },
	{ 0 }
};

/* the capture options run passes on, named from their table so that none is forgotten */
static void run_help_capture_options(FILE *f)
{
	int col = 22;

	fputs("  ...                 and the options of `stepblame record` (see its --help):\n", f);
	fprintf(f, "%*s", col, "");
	for (const struct opt *o = collect_options; o->name; o++) {
		char name[40];
		int len;

		/* listed by record's help, not described above, and not the target or output */
		if (!o->help || !(o->list & COLLECT_RECORD) || opts_find_long(run_options, o->name) ||
		    o->key == 'p' || o->key == 'o')
			continue;
		if (o->key < 256)
			len = snprintf(name, sizeof(name), "-%c", o->key);
		else
			len = snprintf(name, sizeof(name), "--%s", o->name);
		if (col > 22 && col + 2 + len > 79) {
			fprintf(f, ",\n%*s", 22, "");
			col = 22;
		} else if (col > 22) {
			fputs(", ", f);
			col += 2;
		}
		fputs(name, f);
		col += len;
	}
	fputs("\n\n", f);
}

static const char run_usage_tail[] =
"Where the collector is looked for: $STEPBLAME_COLLECTOR, then " COLLECTOR_SO "\n"
"next to the stepblame binary, then ../lib/ and ../lib/stepblame/ from it. It is\n"
"built by `make` when a CUDA toolkit with CUPTI is found (CUDA_HOME or\n"
"/usr/local/cuda). Without it, run still traces CMD in host-only mode (CPU side\n"
"of CUDA by uprobes, no GPU timeline). libcupti for NVTX: $STEPBLAME_CUPTI_LIB,\n"
"else next to the collector, else under $CUDA_HOME or /usr/local/cuda.\n"
"Another CUPTI user in the same process (torch.profiler, nsys) and the collector\n"
"exclude each other; the collector says so on CMD's stderr and stays out.\n"
"run traces CMD's process, all its threads, and the processes it starts (their\n"
"threads, DataLoader workers, a script's trainer) unless --no-children. Where\n"
"several of them mark steps (the ranks torchrun starts), each is a rank: the\n"
"report is the ranks' (which finished each step last, and why; schemas/report.md,\n"
"\"Ranks\"). The collector is loaded into each through CUDA's injection variable,\n"
"which children inherit.\n"
"\n"
"examples:\n"
"  sudo stepblame run -- python train.py\n"
"  sudo stepblame run --step-nvtx '^step' -- python train.py  # torch.cuda.nvtx.range_push(\"step 3\")\n"
"  sudo stepblame run --mark-optimizer-steps -- python3 train.py  # no marks in train.py\n"
"  sudo stepblame run -o run1.sbtrace -d 60 -- python train.py --epochs 3\n"
"  stepblame run --dormant -- python train.py &    # later:\n"
"  sudo stepblame attach -p <PID it printed>\n";

static pid_t child;

static void forward(int sig)
{
	collect_stop = 1;
	/* Ctrl-C reaches CMD through the terminal already; other signals do not */
	if (child > 0 && sig != SIGINT)
		kill(child, sig);
}

/*
 * --mark-optimizer-steps: the stepblame Python package (python/ of the build
 * tree, LIBDIR/stepblame/python installed) first on CMD's PYTHONPATH, its
 * _autorun directory before it (a sitecustomize that hooks torch.optim), and
 * the marker library for it to load. 0, or -1 with one line in err.
 */
static int python_marks(char *err, size_t len)
{
	/* build/stepblame, build/san/stepblame; installed */
	static const char *const pyrel[] = { "/../python", "/../../python", "/../lib/stepblame/python" };
	static const char *const librel[] = { "/libstepblame.so", "/../lib/libstepblame.so" };
	char py[PATH_MAX], lib[PATH_MAX], looked[PATH_MAX + 8], path[3 * PATH_MAX];
	const char *old = getenv("PYTHONPATH");

	if (sb_find_beside(pyrel, ARRAY_SIZE(pyrel), "stepblame/__init__.py", py, sizeof(py), looked,
			sizeof(looked))) {
		snprintf(err, len, "--mark-optimizer-steps: the stepblame Python package was not "
			 "found (python/ of the source tree, or ../lib/stepblame/python/ from %s): `make install`, or "
			 "run the stepblame of a built source tree", looked);
		return -1;
	}
	if (!getenv("STEPBLAME_LIB") &&
	    !sb_find_beside(librel, ARRAY_SIZE(librel), NULL, lib, sizeof(lib), looked, sizeof(looked)))
		setenv("STEPBLAME_LIB", lib, 1);
	snprintf(path, sizeof(path), "%s/stepblame/_autorun:%s%s%s", py, py, old && *old ? ":" : "",
		 old && *old ? old : "");
	setenv("PYTHONPATH", path, 1);
	setenv("STEPBLAME_MARK_OPTIMIZER", "1", 1);
	return 0;
}

static int find_cupti(const char *collector, char *out, size_t len)
{
	const char *env = getenv("STEPBLAME_CUPTI_LIB"), *cuda = getenv("CUDA_HOME");
	static const char *names[] = { "libcupti.so", "libcupti.so.13" };
	static const char *subdirs[] = { "lib64", "extras/CUPTI/lib64", "lib" };
	char dir[PATH_MAX], cand[PATH_MAX + 64];

	if (env && *env)
		return sb_is_file(env) && realpath(env, out) ? 0 : -1;
	sb_dir_of(collector, dir, sizeof(dir));
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		snprintf(cand, sizeof(cand), "%s/%s", dir, names[i]);
		if (sb_is_file(cand) && realpath(cand, out))
			return 0;
	}
	for (int pass = 0; pass < 2; pass++) {
		const char *home = pass ? "/usr/local/cuda" : cuda;

		if (!home || !*home)
			continue;
		for (size_t s = 0; s < ARRAY_SIZE(subdirs); s++)
			for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
				snprintf(cand, sizeof(cand), "%s/%s/%s", home, subdirs[s], names[i]);
				if (sb_is_file(cand) && realpath(cand, out) && strlen(out) < len)
					return 0;
			}
	}
	return -1;
}

/* ---- the invoking user, under sudo (no NSS: the static binary has none) ---- */

struct invoker {
	bool drop;
	struct sb_owner id;  /* uid, gid and groups: what CMD runs as, who owns the trace */
	char name[64], home[PATH_MAX];
};

static bool parse_id(const char *s, unsigned long *v)
{
	uint64_t x;

	if (!s || !parse_u64(s, &x) || x > 0xfffffffe)
		return false;
	*v = (unsigned long)x;
	return true;
}

static void read_user(struct invoker *u)
{
	unsigned long uid, gid;
	char line[1024];
	FILE *f;

	memset(u, 0, sizeof(*u));
	if (geteuid() != 0 || !parse_id(getenv("SUDO_UID"), &uid) || uid == 0)
		return;
	if (!parse_id(getenv("SUDO_GID"), &gid))
		gid = uid;
	u->drop = true;
	u->id.uid = (uid_t)uid;
	u->id.gid = (gid_t)gid;
	u->id.groups[u->id.ngroups++] = u->id.gid;
	f = fopen("/etc/passwd", "re");
	while (f && fgets(line, sizeof(line), f)) {
		char *fld[7] = {}, *p = line;
		int n = 0;

		line[strcspn(line, "\n")] = 0;
		/* strsep keeps empty fields */
		while (n < 7 && (fld[n] = strsep(&p, ":")))
			n++;
		if (n >= 6 && fld[2] && strtoul(fld[2], NULL, 10) == uid) {
			snprintf(u->name, sizeof(u->name), "%s", fld[0]);
			snprintf(u->home, sizeof(u->home), "%s", fld[5]);
			break;
		}
	}
	if (f)
		fclose(f);
	if (!u->name[0]) {
		const char *s = getenv("SUDO_USER");

		snprintf(u->name, sizeof(u->name), "%s", s ? s : "");
	}
	f = u->name[0] ? fopen("/etc/group", "re") : NULL;
	while (f && fgets(line, sizeof(line), f) && u->id.ngroups < (int)ARRAY_SIZE(u->id.groups)) {
		char *fld[4] = {}, *p = line, *m;
		int n = 0;

		line[strcspn(line, "\n")] = 0;
		while (n < 4 && (fld[n] = strsep(&p, ":")))
			n++;
		if (n < 4 || !fld[3])
			continue;
		for (p = fld[3]; (m = strsep(&p, ","));) {
			if (!strcmp(m, u->name)) {
				gid_t g = (gid_t)strtoul(fld[2], NULL, 10);

				if (g != u->id.gid)
					u->id.groups[u->id.ngroups++] = g;
				break;
			}
		}
	}
	if (f)
		fclose(f);
}

static int become_user(const struct invoker *u, char *err, size_t len)
{
	if (!u->drop)
		return 0;
	if (setgroups((size_t)u->id.ngroups, u->id.groups) || setgid(u->id.gid) || setuid(u->id.uid)) {
		snprintf(err, len, "cannot switch to uid %u: %s", (unsigned)u->id.uid, strerror(errno));
		return -1;
	}
	if (u->home[0])
		setenv("HOME", u->home, 1);
	if (u->name[0]) {
		setenv("USER", u->name, 1);
		setenv("LOGNAME", u->name, 1);
	}
	return 0;
}

/* ---- the child ---- */

enum { MODE_TRACED = 'T', MODE_PIPE = 'P', MODE_ERROR = 'E' };

static void child_fail(int info, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void child_fail(int info, const char *fmt, ...)
{
	char msg[600];
	va_list ap;
	int n;

	msg[0] = MODE_ERROR;
	va_start(ap, fmt);
	n = vsnprintf(msg + 1, sizeof(msg) - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(msg) - 2)
		n = sizeof(msg) - 2;
	if (write(info, msg, (size_t)n + 1) < 0)
		_exit(126);
	_exit(127);
}

/*
 * In the child: become the user, load the collector through the environment,
 * then stop after the exec (traced) or wait for the go byte (pipe mode).
 * Reports its mode, or one error line, on the close-on-exec info pipe.
 */
static void child_main(char **cmd, const struct invoker *u, int info, int go)
{
	char err[256], c;

	signal(SIGPIPE, SIG_DFL);
	if (become_user(u, err, sizeof(err)))
		child_fail(info, "%s", err);
	if (!ptrace(PTRACE_TRACEME, 0, NULL, NULL)) {
		c = MODE_TRACED;
		close(go);
	} else {
		c = MODE_PIPE;
	}
	if (write(info, &c, 1) != 1)
		_exit(126);
	if (c == MODE_PIPE && read(go, &c, 1) != 1)
		_exit(126); /* the tracer gave up */
	execvp(cmd[0], cmd);
	child_fail(info, "cannot run '%s': %s", cmd[0], strerror(errno));
}

static unsigned long aux_entry(pid_t pid)
{
	char path[64];
	unsigned long av[2];
	unsigned long entry = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/auxv", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	while (read(fd, av, sizeof(av)) == sizeof(av) && av[0] != AT_NULL)
		if (av[0] == AT_ENTRY)
			entry = av[1];
	close(fd);
	return entry;
}

/*
 * From the stop after exec, run the traced child to its entry point, where
 * the loader has mapped CMD's libraries (libc: the allocator probes attach at
 * once). -1 if not done: the child is then still at the exec stop, or gone.
 */
static int run_to_entry(pid_t pid)
{
#if defined(__x86_64__) || defined(__aarch64__)
	unsigned long entry = aux_entry(pid);
	long orig, trap;
	int status, sig = 0;

	if (!entry)
		return -1;
	errno = 0;
	orig = ptrace(PTRACE_PEEKTEXT, pid, (void *)entry, NULL);
	if (errno)
		return -1;
#if defined(__x86_64__)
	trap = (orig & ~0xffl) | 0xcc;                    /* int3 */
#else
	trap = (orig & ~0xffffffffl) | 0xd4200000l;      /* brk #0 */
#endif
	if (ptrace(PTRACE_POKETEXT, pid, (void *)entry, (void *)trap))
		return -1;
	for (;;) {
		if (ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig))
			return -1;
		while (waitpid(pid, &status, 0) < 0)
			if (errno != EINTR)
				return -1;
		if (!WIFSTOPPED(status))
			return -1; /* exited before its entry point */
		if (WSTOPSIG(status) == SIGTRAP)
			break;
		sig = WSTOPSIG(status); /* someone else's signal: pass it on */
	}
	if (ptrace(PTRACE_POKETEXT, pid, (void *)entry, (void *)orig))
		return -1;
#if defined(__x86_64__)
	/* int3 left the pc one byte past the entry; brk on arm64 does not move it */
	struct user_regs_struct regs;

	if (ptrace(PTRACE_GETREGS, pid, NULL, &regs) || regs.rip != entry + 1)
		return -1;
	regs.rip = entry;
	if (ptrace(PTRACE_SETREGS, pid, NULL, &regs))
		return -1;
#endif
	return 0;
#else
	(void)pid;
	return -1;
#endif
}

struct launch {
	pid_t pid;
	int mode;
	int info, go;
};

/* what is left on the info pipe: 1 and the child's error line in msg, or 0 */
static int read_error(int info, char *msg, size_t len)
{
	size_t got = 0;
	ssize_t n;

	while (got + 1 < len && (n = read(info, msg + got, len - 1 - got)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		got += (size_t)n;
	}
	msg[got] = 0;
	if (!got || msg[0] != MODE_ERROR)
		return 0;
	memmove(msg, msg + 1, got);
	return 1;
}

/* fork CMD held before it runs; -1 after one line on stderr */
static int launch(char **cmd, const struct invoker *u, struct launch *l)
{
	int info[2], go[2], status;
	char msg[600] = "";

	memset(l, 0, sizeof(*l));
	if (pipe2(info, O_CLOEXEC) || pipe2(go, O_CLOEXEC)) {
		sb_err("run: pipe: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	l->pid = fork();
	if (l->pid < 0) {
		sb_err("run: fork: %s", strerror(errno));
		close(info[0]);
		close(info[1]);
		close(go[0]);
		close(go[1]);
		return -1;
	}
	if (l->pid == 0) {
		close(info[0]);
		close(go[1]);
		child_main(cmd, u, info[1], go[0]);
	}
	close(info[1]);
	close(go[0]);
	l->info = info[0];
	l->go = go[1];
	if (read(l->info, msg, 1) != 1 || msg[0] == MODE_ERROR) {
		if (msg[0] == MODE_ERROR) {
			ssize_t n = read(l->info, msg, sizeof(msg) - 1);

			msg[n > 0 ? n : 0] = 0;
			sb_err("run: %s", msg[0] ? msg : "cannot start the command");
		} else {
			sb_err("run: the child for '%s' died before starting it", cmd[0]);
		}
		waitpid(l->pid, &status, 0);
		goto fail;
	}
	l->mode = msg[0];
	if (l->mode == MODE_PIPE)
		return 0;
	/* traced: the first stop is the SIGTRAP after a successful exec */
	while (waitpid(l->pid, &status, 0) < 0) {
		if (errno != EINTR) {
			sb_err("run: waitpid: %s", strerror(errno));
			goto fail;
		}
	}
	if (WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP) {
		if (run_to_entry(l->pid) && !target_alive(l->pid)) {
			sb_err("run: '%s' exited before it started", cmd[0]);
			waitpid(l->pid, &status, 0);
			goto fail;
		}
		return 0;
	}
	if (read_error(l->info, msg, sizeof(msg)))
		sb_err("run: %s", msg);
	else if (WIFSTOPPED(status))
		sb_err("run: '%s' stopped by signal %d before it started", cmd[0], WSTOPSIG(status));
	else
		sb_err("run: '%s' did not start (status 0x%x)", cmd[0], status);
	if (WIFSTOPPED(status)) {
		kill(l->pid, SIGKILL);
		ptrace(PTRACE_DETACH, l->pid, NULL, NULL);
		waitpid(l->pid, &status, 0);
	}
fail:
	close(l->info);
	close(l->go);
	l->go = -1;
	return -1;
}

/* let the held child go: called once the probes are attached */
static void release(void *ctx)
{
	struct launch *l = ctx;

	if (l->mode == MODE_TRACED) {
		if (ptrace(PTRACE_DETACH, l->pid, NULL, NULL))
			sb_warn("run: cannot let PID %d go (ptrace detach: %s)", (int)l->pid,
				strerror(errno));
	} else if (l->mode == MODE_PIPE) {
		if (write(l->go, "g", 1) != 1)
			sb_warn("run: cannot let PID %d go: %s", (int)l->pid, strerror(errno));
	}
	if (l->go >= 0)
		close(l->go);
	l->go = -1;
	l->mode = 0;
}

static void abandon(struct launch *l)
{
	int status;

	kill(l->pid, SIGKILL);
	if (l->mode == MODE_TRACED)
		ptrace(PTRACE_DETACH, l->pid, NULL, NULL);
	if (l->go >= 0)
		close(l->go);
	l->go = -1;
	while (waitpid(l->pid, &status, 0) < 0 && errno == EINTR)
		;
}

static int wait_child(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return 1;
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

/* options of run that are not capture options: they go to the report */
struct run_extra {
	bool dormant, mark_optimizer;
	const char *step_nvtx, *step_kernel, *step_api;
};

/* --name VALUE or --name=VALUE at argv[*i]; advances *i past a separate value */
static bool opt_value(int argc, char **argv, int *i, const char *name, const char **val)
{
	size_t n = strlen(name);

	if (strncmp(argv[*i], name, n))
		return false;
	if (argv[*i][n] == '=') {
		*val = argv[*i] + n + 1;
		return true;
	}
	if (argv[*i][n] || *i + 1 >= argc)
		return false;
	*val = argv[++*i];
	return true;
}

/*
 * Split off what collect_parse_common does not know (--dormant, the report's
 * step options) and find where CMD starts. Options taking a value (in
 * collect_options) are skipped with their value so that nothing of CMD's own
 * arguments is touched.
 */
static int pre_parse(int argc, char **argv, char **kept, struct run_extra *x)
{
	int n = 0, i;

	kept[n++] = argv[0];
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const struct opt *o;
		bool takes;

		if (!strcmp(a, "--"))
			break;
		if (a[0] != '-' || !a[1])
			break;
		if (!strcmp(a, "--dormant")) {
			x->dormant = true;
			continue;
		}
		if (!strcmp(a, "--mark-optimizer-steps")) {
			x->mark_optimizer = true;
			continue;
		}
		if (opt_value(argc, argv, &i, "--step-nvtx", &x->step_nvtx) ||
		    opt_value(argc, argv, &i, "--step-kernel", &x->step_kernel) ||
		    opt_value(argc, argv, &i, "--step-api", &x->step_api))
			continue;
		kept[n++] = argv[i];
		if (a[1] == '-')
			o = opts_find_long(collect_options, a + 2);
		else
			o = opts_find_short(collect_options, a[2] ? 0 : a[1]);
		takes = o && o->arg;
		/* a value in the next argument; -d30 and --duration=30 carry their own */
		if (takes && i + 1 < argc)
			kept[n++] = argv[++i];
	}
	for (; i < argc; i++)
		kept[n++] = argv[i];
	kept[n] = NULL;
	return n;
}

static void print_cmd(char **cmd, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	for (int i = 0; cmd[i] && off + 1 < len; i++)
		off += snprintf(buf + off, len - off, "%s%s", i ? " " : "", cmd[i]);
	if (off >= len && len > 4)
		strcpy(buf + len - 4, "...");
}

/* what the capture hooks of cmd_run need */
struct run_capture {
	struct launch *l;
	const char *shown;
	bool have_collector;
};

/* the trace file exists: signals stop the capture and reach CMD */
static void run_started(struct capture_file *cf, const struct collect_opts *o)
{
	const struct run_capture *rc = cf->ctx;

	collect_signals();
	{
		struct sigaction sa = { .sa_handler = forward };

		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
	}
	if (!o->quiet)
		fprintf(stderr, "stepblame: running '%s' as PID %d%s, tracing to %s\n", rc->shown,
			(int)rc->l->pid, rc->have_collector ? " with the GPU collector" : "",
			cf->path);
}

static void run_stopped(struct capture_file *cf, const struct collect_opts *o)
{
	struct run_capture *rc = cf->ctx;
	char err[PATH_MAX + 256];

	if (rc->l->mode)
		release(rc->l); /* in case the capture ended before it was ready */
	if (read_error(rc->l->info, err, sizeof(err)))
		sb_err("run: %s", err);
	close(rc->l->info);
}

int cmd_run(int argc, char **argv)
{
	char collector[PATH_MAX] = "", cupti[PATH_MAX] = "", looked[PATH_MAX + 32] = "";
	char err[PATH_MAX + 256], shown[256], defout[64], trace_path[64];
	struct collect_opts o;
	struct launch l = { .go = -1 };
	struct run_capture rcap = { .l = &l, .shown = shown };
	struct capture_file cf = { .on_created = run_started, .on_stopped = run_stopped,
				   .ctx = &rcap };
	const struct collect_result *res = &cf.res;
	struct invoker u;
	const char *out = NULL;
	struct run_extra x = {};
	bool have_collector;
	char **kept, **cmd;
	int n, i, status;

	kept = calloc((size_t)argc + 1, sizeof(*kept));
	if (!kept)
		return 1;
	n = pre_parse(argc, argv, kept, &x);
	i = collect_parse_common(n, kept, &o, &out, NULL, "run");
	if (i == -2) {
		fputs(run_usage, stdout);
		opts_help(stdout, run_options, 22, 0);
		run_help_capture_options(stdout);
		fputs(run_usage_tail, stdout);
		free(kept);
		return 0;
	}
	if (i < 0) {
		free(kept);
		return 2;
	}
	if (i >= n) {
		sb_err("run: no command given: stepblame run [options] -- CMD [ARGS...] "
		       "(see stepblame run --help)");
		free(kept);
		return 2;
	}
	if (o.probe.pid) {
		sb_err("run: -p is not an option of run; to trace a running process use "
		       "`stepblame attach -p PID` or `stepblame record -p PID`");
		free(kept);
		return 2;
	}
	cmd = kept + i;
	print_cmd(cmd, shown, sizeof(shown));

	have_collector = !inject_find_collector(collector, sizeof(collector), looked, sizeof(looked));
	if (x.dormant && !have_collector) {
		sb_err("run --dormant: the GPU collector %s was not found (looked in %s); build "
		       "stepblame where a CUDA toolkit is installed, or set STEPBLAME_COLLECTOR",
		       COLLECTOR_SO, looked);
		free(kept);
		return 1;
	}
	if (have_collector) {
		const char *prev = getenv("CUDA_INJECTION64_PATH");

		if (prev && *prev && strcmp(prev, collector) && !o.quiet)
			sb_warn("CUDA_INJECTION64_PATH=%s is replaced by the GPU collector (one "
				"CUPTI client per process)", prev);
		setenv("CUDA_INJECTION64_PATH", collector, 1);
		/* a user's own NVTX injection wins; else libcupti turns ranges into markers */
		if (!getenv("NVTX_INJECTION64_PATH")) {
			if (!find_cupti(collector, cupti, sizeof(cupti)))
				setenv("NVTX_INJECTION64_PATH", cupti, 1);
			else if (!o.quiet)
				sb_warn("libcupti not found for NVTX_INJECTION64_PATH (set "
					"STEPBLAME_CUPTI_LIB): NVTX ranges will not be recorded");
		}
	}
	if (x.mark_optimizer && python_marks(err, sizeof(err))) {
		sb_err("run: %s", err);
		free(kept);
		return 1;
	}
	read_user(&u);

	if (x.dormant) {
		/* nothing to trace: CMD takes over this process, keeping its PID */
		if (become_user(&u, err, sizeof(err))) {
			sb_err("run: %s", err);
			free(kept);
			return 1;
		}
		fprintf(stderr, "stepblame: PID %d runs '%s' with the GPU collector dormant; turn "
			"it on with: sudo stepblame attach -p %d\n", (int)getpid(), shown,
			(int)getpid());
		fflush(NULL);
		execvp(cmd[0], cmd);
		sb_err("run: cannot run '%s': %s", cmd[0], strerror(errno));
		free(kept);
		return 127;
	}

	if (probes_check_privileges(0, err, sizeof(err))) {
		sb_err("run: %s (or use --dormant, which needs none, and attach later)", err);
		free(kept);
		return 1;
	}
	if (!have_collector && !o.quiet)
		fprintf(stderr, "stepblame: the GPU collector %s is not built or not found (looked "
			"in %s): tracing host-only, no GPU timeline. Build stepblame where a CUDA "
			"toolkit is installed, or set STEPBLAME_COLLECTOR.\n", COLLECTOR_SO, looked);

	child = 0;
	if (launch(cmd, &u, &l)) {
		free(kept);
		return 127;
	}
	child = l.pid;
	if (!out) {
		snprintf(defout, sizeof(defout), "stepblame-%d" SBT_EXT "%s", (int)l.pid,
			 o.zstd_level ? ".zst" : "");
		out = defout;
	}
	/* under sudo: only where the user could write, and theirs from the first byte */
	cf.path = out;
	cf.owner = u.drop ? &u.id : NULL;
	cf.keep_fd = true;
	o.probe.pid = l.pid;
	o.gpu_expected = have_collector;
	rcap.have_collector = have_collector;
	o.on_ready = release;
	o.on_ready_ctx = &l;
	switch (capture_to_file(&o, &cf)) {
	case CAPTURE_NO_FILE:
		sb_err("run: %s; '%s' was stopped before it ran", cf.err, shown);
		abandon(&l);
		free(kept);
		return 1;
	case CAPTURE_NOT_RUN:
		sb_err("run: tracing did not start; '%s' was stopped", shown);
		abandon(&l);
		free(kept);
		return cf.status;
	case CAPTURE_CUT_SHORT:
		sb_err("run: writing %s: %s; the trace is readable up to its last whole record",
		       cf.where, strerror(cf.error));
		status = wait_child(l.pid);
		free(kept);
		return status ? status : 1;
	case CAPTURE_NOT_FINISHED:
		sb_err("run: cannot finish %s: %s", out, strerror(cf.error));
		break;
	case CAPTURE_DONE:
		if (!o.quiet)
			fprintf(stderr, "stepblame: wrote %" PRIu64 " records in %.1f s to %s; %"
				PRIu64 " events dropped%s\n", res->records,
				(res->end_ns - res->start_ns) / 1e9, out, res->drops_total,
				res->gpu ? "" : "; host-only (no GPU timeline)");
		fflush(stderr);
		{
			struct engine_opts eo = { .step_nvtx = x.step_nvtx,
						  .step_kernel = x.step_kernel,
						  .step_api = x.step_api };

			snprintf(trace_path, sizeof(trace_path), "/proc/self/fd/%d", cf.fd);
			fflush(stdout);
			report_trace_file(cf.fd >= 0 ? trace_path : out, FMT_TEXT, NULL, &eo);
			fflush(stdout);
		}
		break;
	}
	if (cf.fd >= 0)
		close(cf.fd);
	if (res->end_reason != SBT_END_TARGET_EXIT && !o.quiet && target_alive(l.pid))
		fprintf(stderr, "stepblame: tracing stopped; waiting for PID %d to exit\n",
			(int)l.pid);
	status = wait_child(l.pid);
	free(kept);
	return status;
}
