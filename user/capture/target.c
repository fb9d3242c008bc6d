// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Facts about the host and the target process, read from /proc and /sys. */
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "capture/target.h"
#include "base/timedread.h"
#include "base/util.h"

/*
 * /proc/PID/cmdline reads the process's memory, which the process can make a
 * read wait on (base/timedread.h): never longer than this
 */
#define CMDLINE_TIMEOUT_MS 200

/* length of the UTF-8 character at s (n bytes there), 0 if malformed or a C1 control */
static size_t utf8_char(const unsigned char *s, size_t n)
{
	size_t len = utf8_seq_len(s, n);

	/* C1 controls: U+0080..U+009F */
	return len == 2 && s[0] == 0xc2 && s[1] < 0xa0 ? 0 : len;
}

size_t sb_escape(char *dst, size_t len, const char *src, size_t n)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t o = 0;

	if (!len)
		return 0;
	for (size_t i = 0; i < n && s[i]; ) {
		size_t u = s[i] >= 0x80 ? utf8_char(s + i, n - i) : 0;

		if (u) {
			if (o + u >= len)
				break;
			memcpy(dst + o, s + i, u);
			o += u;
			i += u;
		} else if (s[i] < 0x20 || s[i] >= 0x7f || s[i] == '\\') {
			if (o + 4 >= len)
				break;
			snprintf(dst + o, 5, "\\x%02x", s[i]);
			o += 4;
			i++;
		} else {
			if (o + 1 >= len)
				break;
			dst[o++] = (char)s[i++];
		}
	}
	dst[o] = 0;
	return o;
}

int target_check(pid_t pid, char *err, size_t errlen)
{
	char path[64], buf[1024], state = 0;
	unsigned long flags = 0;
	ssize_t n;
	char *p;

	if (pid <= 0) {
		snprintf(err, errlen, "invalid PID %d", (int)pid);
		return -EINVAL;
	}
	/*
	 * The probes filter on the PID as the initial pid namespace sees it, where 1
	 * is always the machine's init. A trainer that is PID 1 of its container has
	 * another PID on the host: that one works.
	 */
	if (pid == 1) {
		snprintf(err, errlen, "PID 1 is the init process; stepblame traces a trainer "
			 "(a trainer that is PID 1 in a container: give its PID as the host sees it)");
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	n = read_small_file(path, buf, sizeof(buf));
	if (n == -ENOENT || n == -ESRCH) {
		snprintf(err, errlen, "no process with PID %d", (int)pid);
		return -ESRCH;
	}
	if (n < 0) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror((int)-n));
		return (int)n;
	}
	/* comm may hold spaces and parentheses: the fields start after the last ')' */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %lu", &state, &flags) != 2) {
		snprintf(err, errlen, "cannot parse %s", path);
		return -EINVAL;
	}
	if (flags & 0x00200000 /* PF_KTHREAD */) {
		snprintf(err, errlen, "PID %d is a kernel thread; stepblame traces user processes",
			 (int)pid);
		return -EINVAL;
	}
	if ((state == 'Z' || state == 'X') && !target_alive(pid)) {
		snprintf(err, errlen, "PID %d has already exited (zombie)", (int)pid);
		return -ESRCH;
	}
	/*
	 * Its main thread exited alone and other threads run on: the process's
	 * mappings are not readable through it any more (/proc/PID/maps is the
	 * main thread's), and the probes need them. One traced from its start
	 * (stepblame run, or attached before) is followed to its end.
	 */
	if (state == 'Z' || state == 'X') {
		snprintf(err, errlen, "PID %d: its main thread has exited while other threads run "
			 "on, and its mappings cannot be read through it: attach before that, or "
			 "start it with `stepblame run`", (int)pid);
		return -ESRCH;
	}
	if (pid == getpid()) {
		snprintf(err, errlen, "PID %d is stepblame itself", (int)pid);
		return -EINVAL;
	}
	return 0;
}

/* the task's state in a /proc stat file: running, sleeping, stopped..., not a zombie or dead */
static bool stat_alive(const char *path)
{
	char buf[512], *p;

	if (read_small_file(path, buf, sizeof(buf)) < 0)
		return false;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

struct any_alive {
	pid_t pid;
	bool alive;
};

static int task_alive(void *ctx, pid_t tid)
{
	struct any_alive *a = ctx;
	char path[96];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)a->pid, (int)tid);
	a->alive = stat_alive(path);
	return a->alive;
}

bool target_alive(pid_t pid)
{
	char path[64];
	struct any_alive a = { pid, false };

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (stat_alive(path))
		return true;
	/* its main thread exited (a zombie) while other threads run on: the process lives */
	target_threads(pid, task_alive, &a);
	return a.alive;
}

uint64_t target_start_time(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long st = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_small_file(path, buf, sizeof(buf)) < 0)
		return 0;
	p = strrchr(buf, ')');
	/* field 22 (starttime); after ')' we are at field 3 */
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
			 "%*d %*d %*d %*d %llu", &st) != 1)
		return 0;
	return st;
}

int target_threads(pid_t pid, int (*cb)(void *ctx, pid_t tid), void *ctx)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		uint64_t tid;

		if (!parse_u64(de->d_name, &tid))
			continue;
		n++;
		if (cb(ctx, (pid_t)tid))
			break;
	}
	closedir(d);
	return n;
}

static int add_affinity(void *ctx, pid_t tid)
{
	cpu_set_t *all = ctx, one;

	CPU_ZERO(&one);
	if (!sched_getaffinity(tid, sizeof(one), &one))
		CPU_OR(all, all, &one);
	return 0;
}

int target_cpus(pid_t pid)
{
	cpu_set_t used;

	CPU_ZERO(&used);
	if (target_threads(pid, add_affinity, &used) <= 0)
		return 0;
	return CPU_COUNT(&used);
}

int target_free_cpu(pid_t pid)
{
	cpu_set_t used, mine;
	int best = -1;

	CPU_ZERO(&used);
	if (target_threads(pid, add_affinity, &used) <= 0)
		return -1;
	CPU_ZERO(&mine);
	if (sched_getaffinity(0, sizeof(mine), &mine))
		return -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &mine) && !CPU_ISSET(c, &used))
			best = c;
	return best;
}

static void kv(char *buf, size_t len, size_t *off, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static void kv(char *buf, size_t len, size_t *off, const char *key, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*off >= len)
		return;
	n = snprintf(buf + *off, len - *off, "%s=", key);
	if (n < 0 || (size_t)n >= len - *off) {
		*off = len;
		return;
	}
	*off += n;
	va_start(ap, fmt);
	n = vsnprintf(buf + *off, len - *off, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len - *off) {
		*off = len;
		return;
	}
	*off += n;
	if (*off + 1 < len) {
		buf[(*off)++] = '\n';
		buf[*off] = 0;
	}
}

/* the bracketed word of a sysfs multiple-choice file: "always [madvise] never" */
static void sysfs_choice(const char *path, char *out, size_t len)
{
	char buf[256], *a, *b;

	snprintf(out, len, "unknown");
	if (read_small_file(path, buf, sizeof(buf)) < 0)
		return;
	a = strchr(buf, '[');
	b = a ? strchr(a, ']') : NULL;
	if (a && b) {
		*b = 0;
		snprintf(out, len, "%s", a + 1);
	}
}

size_t host_facts(char *buf, size_t len)
{
	struct utsname u;
	char boot[64] = "", thp[32], defrag[32];
	size_t off = 0;

	buf[0] = 0;
	uname(&u);
	if (read_small_file("/proc/sys/kernel/random/boot_id", boot, sizeof(boot)) > 0)
		boot[strcspn(boot, "\n")] = 0;
	sysfs_choice("/sys/kernel/mm/transparent_hugepage/enabled", thp, sizeof(thp));
	sysfs_choice("/sys/kernel/mm/transparent_hugepage/defrag", defrag, sizeof(defrag));
	kv(buf, len, &off, "kernel", "%s", u.release);
	kv(buf, len, &off, "machine", "%s", u.machine);
	kv(buf, len, &off, "hostname", "%s", u.nodename);
	kv(buf, len, &off, "nr_cpus", "%ld", sysconf(_SC_NPROCESSORS_CONF));
	kv(buf, len, &off, "boot_id", "%s", boot);
	kv(buf, len, &off, "thp_enabled", "%s", thp);
	kv(buf, len, &off, "thp_defrag", "%s", defrag);
	kv(buf, len, &off, "page_size", "%ld", sysconf(_SC_PAGESIZE));
	kv(buf, len, &off, "clock_realtime_offset_ns", "%lld",
	   (long long)(real_ns() - mono_ns()));
	kv(buf, len, &off, "stepblame_version", "%s", STEPBLAME_VERSION);
	kv(buf, len, &off, "agent_pid", "%d", (int)getpid());
	return off < len ? off : len - 1;
}

int cpu_node(int cpu)
{
	char path[96];

	for (int n = 0; n < 1024; n++) {
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/node%d", cpu, n);
		if (!access(path, F_OK))
			return n;
	}
	return 0;
}

bool cpu_online(int cpu)
{
	char path[96], buf[8];

	if (cpu == 0)
		return true;
	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/online", cpu);
	if (read_small_file(path, buf, sizeof(buf)) <= 0)
		return true;
	return buf[0] == '1';
}

/* the job, rank, local_rank and world_size lines of pid's environment (those set) */
static void env_id_lines(pid_t pid, char *buf, size_t len, size_t *off)
{
	struct target_ids ids;

	target_env_ids(pid, &ids);
	if (ids.job[0])
		kv(buf, len, off, "job", "%s", ids.job);
	if (ids.rank[0])
		kv(buf, len, off, "rank", "%s", ids.rank);
	if (ids.local_rank[0])
		kv(buf, len, off, "local_rank", "%s", ids.local_rank);
	if (ids.world_size[0])
		kv(buf, len, off, "world_size", "%s", ids.world_size);
}

size_t target_facts(pid_t pid, char *buf, size_t len, uid_t *uid)
{
	char path[64], comm[64] = "", cmd[4096] = "", exe[4096] = "", status[4096];
	/* what the target chose, escaped: a newline in it would make a key of its own */
	char ecomm[4 * sizeof(comm)], ecmd[4 * sizeof(cmd)], eexe[4 * sizeof(exe)];
	size_t off = 0;
	ssize_t n;
	char *u;

	buf[0] = 0;
	*uid = (uid_t)-1;
	thread_comm(pid, pid, comm, sizeof(comm));
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	n = read_small_file_timed(path, cmd, sizeof(cmd), CMDLINE_TIMEOUT_MS);
	for (ssize_t i = 0; i < n; i++)
		if (cmd[i] == 0 || cmd[i] == '\n')
			cmd[i] = ' ';
	while (n > 0 && cmd[n - 1] == ' ')
		cmd[--n] = 0;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (read_small_file(path, status, sizeof(status)) > 0 && (u = strstr(status, "\nUid:")))
		*uid = (uid_t)strtoul(u + 5, NULL, 10);
	sb_escape(ecomm, sizeof(ecomm), comm, sizeof(comm));
	sb_escape(ecmd, sizeof(ecmd), cmd, sizeof(cmd));
	sb_escape(eexe, sizeof(eexe), exe, sizeof(exe));
	kv(buf, len, &off, "pid", "%d", (int)pid);
	kv(buf, len, &off, "comm", "%s", ecomm);
	kv(buf, len, &off, "cmdline", "%s", ecmd);
	kv(buf, len, &off, "exe", "%s", eexe);
	kv(buf, len, &off, "uid", "%d", (int)*uid);
	kv(buf, len, &off, "start_time_ticks", "%llu",
	   (unsigned long long)target_start_time(pid));
	env_id_lines(pid, buf, len, &off);
	return off < len ? off : len - 1;
}

void target_id_tame(char *dst, const char *src, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < n && src[i] && o < TARGET_ID_MAX; i++) {
		char c = src[i];

		dst[o++] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			   strchr("._:@/+-", c) ? c : '_';
	}
	dst[o] = 0;
}

/* the first of names set in the environment block env (NUL-separated), tamed into out */
static bool env_pick(const char *env, size_t len, const char *const *names, char *out)
{
	for (int k = 0; names[k]; k++) {
		size_t nl = strlen(names[k]);

		for (size_t i = 0; i < len;) {
			const char *v = env + i;
			size_t vl = strnlen(v, len - i);

			if (vl > nl && !strncmp(v, names[k], nl) && v[nl] == '=') {
				target_id_tame(out, v + nl + 1, vl - nl - 1);
				return true;
			}
			i += vl + 1;
		}
	}
	return false;
}

void target_env_ids(pid_t pid, struct target_ids *ids)
{
	static const char *const jobs[] = { "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "JOB_ID", NULL };
	static const char *const ranks[] = { "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
					     "PMI_RANK", NULL };
	static const char *const local[] = { "LOCAL_RANK", "SLURM_LOCALID",
					     "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", NULL };
	static const char *const world[] = { "WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE",
					     "PMI_SIZE", NULL };
	char path[64], *env;
	ssize_t n = -1;
	size_t len = 0, cap = 1 << 20;

	memset(ids, 0, sizeof(*ids));
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	/* it reads the target's memory, which it can stall, as for its cmdline */
	env = malloc(cap + 1);
	if (env)
		n = read_small_file_timed(path, env, cap + 1, CMDLINE_TIMEOUT_MS);
	len = n > 0 ? (size_t)n : 0;
	if (len) {
		env_pick(env, len, jobs, ids->job);
		env_pick(env, len, ranks, ids->rank);
		env_pick(env, len, local, ids->local_rank);
		env_pick(env, len, world, ids->world_size);
	}
	free(env);
}

bool target_env_has(pid_t pid, const char *name)
{
	static const size_t cap = 1 << 20;
	char path[64], *env = malloc(cap + 1), out[TARGET_ID_MAX + 1];
	const char *names[] = { name, NULL };
	ssize_t n = -1;
	bool found = false;

	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	if (env)
		n = read_small_file_timed(path, env, cap + 1, CMDLINE_TIMEOUT_MS);
	if (n > 0)
		found = env_pick(env, (size_t)n, names, out);
	free(env);
	return found;
}

int target_descendants(pid_t root, int (*cb)(void *ctx, pid_t pid, pid_t ppid), void *ctx)
{
	enum { MAXP = 1 << 16 };
	struct { pid_t pid, ppid; } *all = malloc(MAXP * sizeof(*all));
	pid_t *queue = malloc(MAXP * sizeof(*queue));
	struct dirent *de;
	DIR *d = opendir("/proc");
	int n = 0, found = 0, qh = 0, qt = 0;

	if (!all || !queue || !d) {
		free(all);
		free(queue);
		if (d)
			closedir(d);
		return -ENOMEM;
	}
	while ((de = readdir(d)) && n < MAXP) {
		char path[64], buf[512], *p;
		uint64_t pid;
		int ppid;

		if (!parse_u64(de->d_name, &pid) || pid > 0x3fffffff)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		if (read_small_file(path, buf, sizeof(buf)) < 0)
			continue;
		/* comm may hold spaces and parentheses: the fields start after the last ')' */
		p = strrchr(buf, ')');
		if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1 || ppid <= 0)
			continue;
		all[n].pid = (pid_t)pid;
		all[n].ppid = ppid;
		n++;
	}
	closedir(d);
	/* breadth first from root: parents are given before their children */
	queue[qt++] = root;
	while (qh < qt) {
		pid_t parent = queue[qh++];

		for (int i = 0; i < n; i++) {
			if (all[i].ppid != parent || all[i].pid == root)
				continue;
			found++;
			if (cb(ctx, all[i].pid, parent) == 0 && qt < MAXP)
				queue[qt++] = all[i].pid;
		}
	}
	free(all);
	free(queue);
	return found;
}

size_t process_facts(pid_t pid, pid_t ppid, const char *comm_seen, bool ids, char *buf, size_t len)
{
	char path[64], comm[64] = "", cmd[2048] = "";
	char ecomm[4 * sizeof(comm)], ecmd[4 * sizeof(cmd)];
	size_t off = 0;
	ssize_t n;

	buf[0] = 0;
	thread_comm(pid, pid, comm, sizeof(comm));
	/* gone already (a short-lived child): the comm the kernel record carried */
	if (!comm[0] && comm_seen)
		snprintf(comm, sizeof(comm), "%.16s", comm_seen);
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	n = read_small_file_timed(path, cmd, sizeof(cmd), CMDLINE_TIMEOUT_MS);
	for (ssize_t i = 0; i < n; i++)
		if (cmd[i] == 0 || cmd[i] == '\n')
			cmd[i] = ' ';
	while (n > 0 && cmd[n - 1] == ' ')
		cmd[--n] = 0;
	if (n < 0)
		cmd[0] = 0;
	/* the first line is the comm, as in every thread record */
	sb_escape(ecomm, sizeof(ecomm), comm, sizeof(comm));
	n = snprintf(buf, len, "%s\n", ecomm);
	off = n > 0 && (size_t)n < len ? (size_t)n : len;
	sb_escape(ecmd, sizeof(ecmd), cmd, sizeof(cmd));
	kv(buf, len, &off, "ppid", "%d", (int)ppid);
	/* a zombie's is empty: not said rather than said empty */
	if (ecmd[0])
		kv(buf, len, &off, "cmdline", "%s", ecmd);
	if (ids)
		env_id_lines(pid, buf, len, &off);
	return off < len ? off : len - 1;
}
