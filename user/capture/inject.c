// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Loading a library into a running process (inject.h; docs/ARCHITECTURE.md,
 * "Late injection"; SECURITY.md, "Late injection").
 *
 * The thread: one that sleeps in a system call that holds no lock of the C
 * library (read, poll, futex, nanosleep, epoll_wait, ...), seen in
 * /proc/PID/task/TID/syscall and confirmed on its registers once interrupted.
 * A thread interrupted while running its own code may be inside malloc or the
 * dynamic loader, and dlopen there could deadlock on its own lock; such a
 * thread is let go untouched and another one tried.
 *
 * A remote call: the saved registers with rip = the function, the arguments
 * in rdi..r9, orig_rax = -1 (the kernel then does not restart the interrupted
 * system call on the way out), a stack whose return address is 0. The call
 * returns to 0, faults, and the SIGSEGV it raises stops the thread in
 * signal-delivery-stop, where rax is read and the signal discarded. A thread
 * that blocks or ignores SIGSEGV is never used: the kernel would unblock it
 * and reset its handler to raise the fault. At the end the saved registers
 * (orig_rax and the -ERESTART* in rax with them) and the extended state are
 * written back and the thread detached without a signal: the kernel restarts
 * the interrupted call as for any signal that had no handler.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capture/inject.h"
#include "capture/target.h"
#include "format/maps.h"
#include "base/util.h"

#ifndef PTRACE_SECCOMP_GET_FILTER
#define PTRACE_SECCOMP_GET_FILTER 0x420c
#endif
#ifndef SECCOMP_RET_KILL_PROCESS
#define SECCOMP_RET_KILL_PROCESS 0x80000000u
#endif
#ifndef SECCOMP_RET_ACTION_FULL
#define SECCOMP_RET_ACTION_FULL 0xffff0000u
#endif
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001u
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002u
#endif
#ifndef F_ADD_SEALS
#define F_ADD_SEALS 1033
#define F_GET_SEALS 1034
#define F_SEAL_SEAL 0x0001
#define F_SEAL_SHRINK 0x0002
#define F_SEAL_GROW 0x0004
#define F_SEAL_WRITE 0x0008
#endif

#define ERESTARTSYS_ 512
#define ERESTARTNOHAND_ 514
#define ERESTART_RESTARTBLOCK_ 516
#define STACK_BYTES (4u << 20)          /* the private stack of the remote calls */
#define XSTATE_MAX (64u << 10)
#define DEFAULT_TIMEOUT_MS 20000
#define PICK_TRIES 50                   /* rounds over the threads, 20 ms apart */
#define LIB_MAX (256u << 20)            /* a library bigger than this is not ours */

int inject_find_collector(char *out, size_t len, char *looked, size_t looked_len)
{
	const char *env = getenv("STEPBLAME_COLLECTOR");
	static const char *const rel[] = { "/" INJECT_COLLECTOR_SO, "/../lib/" INJECT_COLLECTOR_SO,
					   "/../lib/stepblame/" INJECT_COLLECTOR_SO };

	if (env && *env) {
		snprintf(looked, looked_len, "$STEPBLAME_COLLECTOR=%s", env);
		if (!sb_is_file(env) || !realpath(env, out))
			return -1;
		return 0;
	}
	return sb_find_beside(rel, ARRAY_SIZE(rel), NULL, out, len, looked, looked_len);
}

int inject_yama_allows(int scope, char *err, size_t errlen)
{
	if (scope >= 3) {
		snprintf(err, errlen, "YAMA ptrace_scope is %d: this kernel allows no process to be "
			 "traced until reboot, so the collector cannot be loaded into a running "
			 "trainer; start it under `stepblame run` instead", scope);
		return -EPERM;
	}
	return 0;
}

#if defined(__x86_64__)

/* ---- seccomp: would a filter kill the target for what loading a library does? ---- */

uint32_t inject_seccomp_run(const struct sock_filter *f, unsigned len, int nr,
			    const uint64_t args[6])
{
	uint32_t data[16], a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };

	data[0] = (uint32_t)nr;
	data[1] = AUDIT_ARCH_X86_64;
	data[2] = data[3] = 0; /* instruction pointer */
	for (int i = 0; i < 6; i++) {
		data[4 + 2 * i] = (uint32_t)args[i];
		data[5 + 2 * i] = (uint32_t)(args[i] >> 32);
	}
	for (unsigned pc = 0; pc < len; pc++) {
		const struct sock_filter *in = &f[pc];
		uint32_t k = in->k, src = BPF_SRC(in->code) == BPF_X ? x : k;

		switch (BPF_CLASS(in->code)) {
		case BPF_LD:
			switch (BPF_MODE(in->code)) {
			case BPF_ABS:
				if (BPF_SIZE(in->code) != BPF_W || k % 4 || k >= sizeof(data))
					return SECCOMP_RET_KILL_PROCESS;
				a = data[k / 4];
				break;
			case BPF_IMM: a = k; break;
			case BPF_MEM:
				if (k >= BPF_MEMWORDS)
					return SECCOMP_RET_KILL_PROCESS;
				a = mem[k];
				break;
			case BPF_LEN: a = sizeof(data); break;
			default: return SECCOMP_RET_KILL_PROCESS;
			}
			break;
		case BPF_LDX:
			switch (BPF_MODE(in->code)) {
			case BPF_IMM: x = k; break;
			case BPF_MEM:
				if (k >= BPF_MEMWORDS)
					return SECCOMP_RET_KILL_PROCESS;
				x = mem[k];
				break;
			case BPF_LEN: x = sizeof(data); break;
			default: return SECCOMP_RET_KILL_PROCESS;
			}
			break;
		case BPF_ST:
		case BPF_STX:
			if (k >= BPF_MEMWORDS)
				return SECCOMP_RET_KILL_PROCESS;
			mem[k] = BPF_CLASS(in->code) == BPF_ST ? a : x;
			break;
		case BPF_ALU:
			switch (BPF_OP(in->code)) {
			case BPF_ADD: a += src; break;
			case BPF_SUB: a -= src; break;
			case BPF_MUL: a *= src; break;
			case BPF_DIV:
				if (!src)
					return 0; /* the kernel's answer: the filter returns 0 */
				a /= src;
				break;
			case BPF_MOD:
				if (!src)
					return 0;
				a %= src;
				break;
			case BPF_OR: a |= src; break;
			case BPF_AND: a &= src; break;
			case BPF_XOR: a ^= src; break;
			case BPF_LSH: a = src < 32 ? a << src : 0; break;
			case BPF_RSH: a = src < 32 ? a >> src : 0; break;
			case BPF_NEG: a = -a; break;
			default: return SECCOMP_RET_KILL_PROCESS;
			}
			break;
		case BPF_JMP: {
			unsigned off;

			if (BPF_OP(in->code) == BPF_JA) {
				off = k;
			} else {
				bool t;

				switch (BPF_OP(in->code)) {
				case BPF_JEQ: t = a == src; break;
				case BPF_JGT: t = a > src; break;
				case BPF_JGE: t = a >= src; break;
				case BPF_JSET: t = (a & src) != 0; break;
				default: return SECCOMP_RET_KILL_PROCESS;
				}
				off = t ? in->jt : in->jf;
			}
			if (off >= len - pc - 1)
				return SECCOMP_RET_KILL_PROCESS;
			pc += off;
			break;
		}
		case BPF_RET:
			return BPF_RVAL(in->code) == BPF_A ? a : k;
		case BPF_MISC:
			if (BPF_MISCOP(in->code) == BPF_TAX)
				x = a;
			else
				a = x;
			break;
		default:
			return SECCOMP_RET_KILL_PROCESS;
		}
	}
	return SECCOMP_RET_KILL_PROCESS;
}

/* the actions that end or signal the target, and any the kernel may add later */
static bool action_harms(uint32_t ret)
{
	switch (ret & SECCOMP_RET_ACTION_FULL) {
	case SECCOMP_RET_ERRNO:       /* the call fails: the code checks its result */
	case SECCOMP_RET_USER_NOTIF:
	case SECCOMP_RET_TRACE:
	case SECCOMP_RET_LOG:
	case SECCOMP_RET_ALLOW:
		return false;
	default:
		return true;
	}
}

/* what loading the collector asks of the kernel, with arguments as they will be */
static const struct {
	int nr;
	const char *name;
	uint64_t args[6];
} needed[] = {
	{ SYS_mmap, "mmap", { 0, STACK_BYTES, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, (uint64_t)-1, 0 } },
	{ SYS_mmap, "mmap", { 0, 4096, PROT_READ, MAP_PRIVATE, 3, 0 } },
	{ SYS_mmap, "mmap", { 0, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, 3, 0 } },
	{ SYS_mmap, "mmap", { 0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 3, 0 } },
	{ SYS_memfd_create, "memfd_create", { 0, MFD_CLOEXEC | MFD_ALLOW_SEALING } },
	{ SYS_openat, "openat", { (uint64_t)AT_FDCWD, 0, O_RDONLY | O_CLOEXEC } },
	{ SYS_openat, "openat", { (uint64_t)AT_FDCWD, 0, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600 } },
	{ SYS_read, "read" }, { SYS_pread64, "pread64" }, { SYS_write, "write", { 2 } },
	{ SYS_close, "close" }, { SYS_fstat, "fstat" }, { SYS_newfstatat, "newfstatat" },
	{ SYS_lseek, "lseek" }, { SYS_mprotect, "mprotect", { 0, 4096, PROT_READ } },
	{ SYS_munmap, "munmap" }, { SYS_brk, "brk" }, { SYS_madvise, "madvise" },
	{ SYS_rt_sigprocmask, "rt_sigprocmask" }, { SYS_getpid, "getpid" },
	{ SYS_gettid, "gettid" }, { SYS_futex, "futex" }, { SYS_getrandom, "getrandom" },
	{ SYS_ftruncate, "ftruncate" }, { SYS_fallocate, "fallocate" }, { SYS_fcntl, "fcntl" },
	{ SYS_unlinkat, "unlinkat" }, { SYS_set_robust_list, "set_robust_list" },
	{ SYS_clone, "clone", { 0x3d0f00 } }, /* the flags of pthread_create */
#ifdef SYS_rseq
	{ SYS_rseq, "rseq" },
#endif
};

/* 0 if no filter of the stopped thread tid harms it on a call we make; else -EPERM/-errno */
static int seccomp_check(pid_t pid, pid_t tid, char *err, size_t errlen)
{
	for (unsigned idx = 0; idx < 64; idx++) {
		long n = ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)(unsigned long)idx, NULL);
		struct sock_filter *f;

		if (n < 0 && errno == ENOENT)
			return 0; /* no more filters */
		if (n <= 0 || n > BPF_MAXINSNS) {
			int e = n < 0 ? errno : EINVAL;

			snprintf(err, errlen, "PID %d runs under a seccomp filter that stepblame cannot "
				 "read (%s), so it cannot tell whether loading a library would kill "
				 "it: late injection refused", (int)pid, strerror(e));
			return -e;
		}
		f = calloc((size_t)n, sizeof(*f));
		if (!f)
			return -ENOMEM;
		if (ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)(unsigned long)idx, f) != n) {
			int e = errno;

			free(f);
			snprintf(err, errlen, "reading the seccomp filter of PID %d: %s", (int)pid,
				 strerror(e));
			return -e;
		}
		for (size_t i = 0; i < ARRAY_SIZE(needed); i++) {
			uint32_t r = inject_seccomp_run(f, (unsigned)n, needed[i].nr, needed[i].args);

			if (action_harms(r)) {
				snprintf(err, errlen, "PID %d runs under a seccomp filter that would %s "
					 "it on %s, which loading a library needs: late injection "
					 "refused (start the trainer under `stepblame run`)", (int)pid,
					 (r & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_TRAP ? "send SIGSYS to"
					 : "kill", needed[i].name);
				free(f);
				return -EPERM;
			}
		}
		free(f);
	}
	return 0;
}

/* ---- the target's C library: where dlopen and friends are ---- */

struct sym_want {
	const char *names[3];   /* the first found wins */
	bool optional;
	uint64_t addr;          /* in the target */
};

enum {
	S_MMAP, S_MUNMAP, S_MEMFD, S_CLOSE, S_DLOPEN, S_DLSYM, S_DLCLOSE, S_DLERROR, S_ERRNO,
	S_SIGMASK, S_N
};

static void syms_init(struct sym_want *s)
{
	static const struct sym_want init[S_N] = {
		[S_MMAP] = { { "mmap", "mmap64" } },
		[S_MUNMAP] = { { "munmap" } },
		[S_MEMFD] = { { "memfd_create" } },
		[S_CLOSE] = { { "close", "__close" } },
		[S_DLOPEN] = { { "dlopen", "__libc_dlopen_mode" } },
		[S_DLSYM] = { { "dlsym", "__libc_dlsym" } },
		[S_DLCLOSE] = { { "dlclose", "__libc_dlclose" } },
		[S_DLERROR] = { { "dlerror" }, true },
		[S_ERRNO] = { { "__errno_location" }, true },
		[S_SIGMASK] = { { "pthread_sigmask", "sigprocmask" }, true },
	};
	memcpy(s, init, sizeof(init));
}

/* look up the still-missing symbols in one mapped library file */
static void elf_lookup(const char *file, uint64_t map_start, struct sym_want *s)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	Elf *e;
	Elf_Scn *scn = NULL;
	uint64_t base_vaddr = UINT64_MAX;
	size_t nph;
	struct stat st;

	if (fd < 0)
		return;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > (off_t)LIB_MAX) {
		close(fd);
		return;
	}
	elf_version(EV_CURRENT);
	/* read, not mapped: the target can change the file under a mapping */
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF || elf_getphdrnum(e, &nph))
		goto out;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_offset == 0)
			base_vaddr = ph.p_vaddr & ~(uint64_t)4095;
	}
	if (base_vaddr == UINT64_MAX)
		goto out;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF ||
			    GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_value)
				continue;
			name = elf_strptr(e, sh.sh_link, sym.st_name);
			if (!name)
				continue;
			for (int k = 0; k < S_N; k++)
				for (int j = 0; j < 3 && s[k].names[j]; j++)
					if (!s[k].addr && !strcmp(name, s[k].names[j]))
						s[k].addr = map_start + sym.st_value - base_vaddr;
		}
	}
out:
	if (e)
		elf_end(e);
	close(fd);
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

/* the libraries of the C library and the loader: libc.so.6, libdl.so.2, ld-musl */
static bool is_libc(const char *path)
{
	const char *b = base_name(path);

	return !strncmp(b, "libc.so", 7) || !strncmp(b, "libc-2.", 7) ||
	       !strncmp(b, "libdl.so", 8) || !strncmp(b, "libdl-2.", 8) ||
	       !strncmp(b, "ld-musl-", 8);
}

struct maps_facts {
	bool loader;            /* a dynamic loader is mapped */
	bool libcuda;
	bool collector;         /* ours, loaded by a file name or by an earlier injection */
	bool channel;           /* a GPU channel file (schemas/channel.md, "The file") */
};

/*
 * One pass over the target's maps: the facts, and (syms non-NULL) the symbols
 * from its C library, read through /proc/PID/map_files (the very file mapped,
 * in whatever mount namespace).
 */
static int scan_maps(pid_t pid, struct maps_facts *mf, struct sym_want *syms, const char *memfd)
{
	char *maps = NULL, *line, *save = NULL;
	ssize_t len = read_maps(pid, &maps, 0);

	memset(mf, 0, sizeof(*mf));
	if (len < 0)
		return (int)len;
	for (line = strtok_r(maps, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char path[PATH_MAX], file[96];
		struct maps_line l;
		const char *b;

		if (!maps_line_parse(line, &l))
			continue;
		snprintf(path, sizeof(path), "%s", l.name);
		if (path[0] != '/' && strncmp(path, "/memfd:", 7))
			continue;
		b = base_name(path);
		if (!strncmp(b, "ld-linux", 8) || !strncmp(b, "ld-musl-", 8) || !strncmp(b, "ld.so", 5))
			mf->loader = true;
		if (!strncmp(b, "libcuda.so", 10))
			mf->libcuda = true;
		if (!strncmp(b, "stepblame-", 10) && strstr(b, ".chan"))
			mf->channel = true;
		if (!strncmp(b, "libstepblame-cupti.so", 21) ||
		    (!strncmp(path, "/memfd:", 7) && !strncmp(path + 7, memfd, strlen(memfd))))
			mf->collector = true;
		if (syms && l.off == 0 && is_libc(path)) {
			snprintf(file, sizeof(file), "/proc/%d/map_files/%llx-%llx", (int)pid,
				 (unsigned long long)l.start, (unsigned long long)l.end);
			elf_lookup(file, l.start, syms);
		}
	}
	free(maps);
	return 0;
}

/* ---- /proc facts of a thread ---- */

static int status_field(pid_t pid, pid_t tid, const char *key, char *out, size_t len)
{
	char path[64], buf[4096], *p;
	ssize_t n;

	if (tid)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	n = read_small_file(path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	for (p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		size_t kl = strlen(key);

		if (!strncmp(p, key, kl) && p[kl] == ':') {
			p += kl + 1;
			while (*p == ' ' || *p == '\t')
				p++;
			snprintf(out, len, "%.*s", (int)strcspn(p, "\n"), p);
			return 0;
		}
	}
	return -ENOENT;
}

static bool sigsegv_usable(pid_t pid, pid_t tid)
{
	char v[64];
	unsigned long long blk, ign;

	if (status_field(pid, tid, "SigBlk", v, sizeof(v)) || sscanf(v, "%llx", &blk) != 1)
		return false;
	if (status_field(pid, tid, "SigIgn", v, sizeof(v)) || sscanf(v, "%llx", &ign) != 1)
		return false;
	return !((blk | ign) & (1ull << (SIGSEGV - 1)));
}

/*
 * The system calls a thread may sleep in while it holds no lock of the C
 * library and no temporary signal mask, and that the kernel restarts after
 * an interruption (epoll_wait and its kind return EINTR even to a ptrace
 * interrupt: such a thread is left alone).
 */
static bool quiet_syscall(long nr)
{
	switch (nr) {
	case SYS_read: case SYS_poll: case SYS_select: case SYS_pause: case SYS_nanosleep:
	case SYS_accept: case SYS_accept4: case SYS_recvfrom: case SYS_recvmsg:
	case SYS_recvmmsg: case SYS_wait4: case SYS_waitid: case SYS_futex:
	case SYS_clock_nanosleep:
		return true;
	default:
		return false;
	}
}

/* the system call a thread sleeps in (/proc/PID/task/TID/syscall), -1 if none */
static long thread_syscall(pid_t pid, pid_t tid)
{
	char path[64], buf[256];
	long nr;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	if (read_small_file(path, buf, sizeof(buf)) <= 0 || sscanf(buf, "%ld", &nr) != 1)
		return -1;
	return nr;
}

/* ---- ptrace ---- */

struct remote {
	pid_t pid, tid;
	bool seized;
	bool execd;             /* the thread ran exec while seized: nothing of ours goes into it */
	int mem;                /* /proc/PID/mem, opened while the thread was stopped (mem_open) */
	bool have_state;        /* saved and xstate hold this thread's registers */
	struct user_regs_struct saved;
	void *xstate;
	size_t xlen;
	uint64_t stack;         /* the private stack, 0 if none yet */
	uint64_t deadline;      /* mono ns */
	char *err;
	size_t errlen;
};

/* wait for the next stop of r->tid: 1 stopped (*status), 0 gone, -ETIMEDOUT */
static int wait_stop(struct remote *r, int *status)
{
	long sleep_ns = 100000;

	for (;;) {
		pid_t w = waitpid(r->tid, status, __WALL | WNOHANG);

		if (w == r->tid) {
			if (WIFSTOPPED(*status))
				return 1;
			if (WIFEXITED(*status) || WIFSIGNALED(*status)) {
				r->seized = false;
				return 0;
			}
			continue;
		}
		/*
		 * A thread other than the main one that runs exec takes the
		 * process's id, with no word of its old one (ptrace(2), "execve(2)
		 * under ptrace"): its exec stop comes under the new id
		 */
		if (w < 0 && errno == ECHILD && r->tid != r->pid && r->seized) {
			r->tid = r->pid;
			continue;
		}
		if (w < 0 && errno != EINTR) {
			r->seized = false;
			return 0;
		}
		if (mono_ns() > r->deadline)
			return -ETIMEDOUT;
		struct timespec ts = { 0, sleep_ns };
		nanosleep(&ts, NULL);
		if (sleep_ns < 2000000)
			sleep_ns *= 2;
	}
}

/*
 * The thread ran exec (PTRACE_O_TRACEEXEC): it is another program now, maybe
 * a setuid one, which the kernel let gain its privileges because root traces
 * it. Nothing of ours may go into it, registers or memory (SECURITY.md,
 * "Loading the collector late").
 */
static bool exec_stop(struct remote *r, int st)
{
	if ((st >> 16) != PTRACE_EVENT_EXEC)
		return false;
	r->execd = true;
	return true;
}

static int seize(struct remote *r)
{
	int st, w;

	if (ptrace(PTRACE_SEIZE, r->tid, NULL, (void *)(long)PTRACE_O_TRACEEXEC))
		return -errno;
	r->seized = true;
	if (ptrace(PTRACE_INTERRUPT, r->tid, NULL, NULL))
		return -errno;
	for (;;) {
		w = wait_stop(r, &st);
		if (w <= 0)
			return w ? w : -ESRCH;
		if (exec_stop(r, st))
			return -EPERM;
		if ((st >> 16) == PTRACE_EVENT_STOP)
			return 0;
		/* a signal on its way to the thread: let it go where it was going */
		if (ptrace(PTRACE_CONT, r->tid, NULL, (void *)(long)WSTOPSIG(st)))
			return -errno;
	}
}

static int get_state(struct remote *r)
{
	struct iovec iov;

	r->have_state = false;
	if (ptrace(PTRACE_GETREGS, r->tid, NULL, &r->saved))
		return -errno;
	r->xstate = calloc(1, XSTATE_MAX);
	if (!r->xstate)
		return -ENOMEM;
	iov.iov_base = r->xstate;
	iov.iov_len = XSTATE_MAX;
	if (ptrace(PTRACE_GETREGSET, r->tid, (void *)NT_X86_XSTATE, &iov)) {
		/* without XSAVE: the legacy FP state */
		iov.iov_len = sizeof(struct user_fpregs_struct);
		if (ptrace(PTRACE_GETFPREGS, r->tid, NULL, r->xstate))
			return -errno;
		r->xlen = 0;
		r->have_state = true;
		return 0;
	}
	r->xlen = iov.iov_len;
	r->have_state = true;
	return 0;
}

/* put the thread back as it was and let it go; false if that could not be done */
static bool release(struct remote *r)
{
	bool ok = true;

	if (!r->seized)
		return true;
	if (r->execd) {
		/* its exec stop: let it go as it is (it stopped for us, so no signal is lost) */
		ptrace(PTRACE_DETACH, r->tid, NULL, NULL);
		r->seized = false;
		return false;
	}
	if (!r->have_state) {
		/* never changed: only let go (a tracee must be stopped to be detached) */
		if (ptrace(PTRACE_DETACH, r->tid, NULL, NULL) &&
		    !ptrace(PTRACE_INTERRUPT, r->tid, NULL, NULL)) {
			uint64_t deadline = r->deadline;
			int st;

			r->deadline = mono_ns() + 1000000000ull;
			if (wait_stop(r, &st) > 0)
				ptrace(PTRACE_DETACH, r->tid, NULL,
				       (void *)(long)((st >> 16) ? 0 : WSTOPSIG(st)));
			r->deadline = deadline;
		}
		r->seized = false;
		return true;
	}
	if (ptrace(PTRACE_SETREGS, r->tid, NULL, &r->saved))
		ok = false;
	if (r->xstate) {
		if (r->xlen) {
			struct iovec iov = { r->xstate, r->xlen };

			if (ptrace(PTRACE_SETREGSET, r->tid, (void *)NT_X86_XSTATE, &iov))
				ok = false;
		} else if (ptrace(PTRACE_SETFPREGS, r->tid, NULL, r->xstate)) {
			ok = false;
		}
	}
	ptrace(PTRACE_DETACH, r->tid, NULL, NULL);
	r->seized = false;
	return ok;
}

/*
 * The target's memory through /proc/PID/mem opened while the seized thread
 * was stopped: that file stays on the address space it was opened on, so
 * after an exec (by any thread) a write lands in the old program's memory,
 * never in the new one's (SECURITY.md, "Loading the collector late")
 */
static int mem_open(struct remote *r)
{
	char path[64];
	struct user_regs_struct regs;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)r->pid);
	r->mem = open(path, O_RDWR | O_CLOEXEC);
	if (r->mem < 0)
		return -errno;
	/* still our stopped thread: no exec came between its stop and the open */
	if (ptrace(PTRACE_GETREGS, r->tid, NULL, &regs))
		return -ESRCH;
	return 0;
}

static int poke(struct remote *r, uint64_t addr, const void *buf, size_t len)
{
	if (r->execd || r->mem < 0 || addr > INT64_MAX - len)
		return -EFAULT;
	return pwrite(r->mem, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -EFAULT;
}

static int peek(struct remote *r, uint64_t addr, void *buf, size_t len)
{
	if (r->execd || r->mem < 0 || addr > INT64_MAX - len)
		return -EFAULT;
	return pread(r->mem, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -EFAULT;
}

/*
 * Call fn(a0..a5) in the thread on the stack whose top is sp: 0 and *ret, or
 * -errno (-ETIMEDOUT: it did not return in time; -EFAULT: it crashed).
 */
static int rcall(struct remote *r, uint64_t fn, uint64_t sp, const uint64_t a[6], uint64_t *ret)
{
	struct user_regs_struct regs = r->saved;
	uint64_t zero = 0;
	int st, w;

	sp = (sp & ~(uint64_t)15) - 8; /* as after a call: (rsp + 8) % 16 == 0 */
	if (r->execd)
		return -EPERM;
	if (poke(r, sp, &zero, sizeof(zero)))
		return -EFAULT;
	regs.rip = fn;
	regs.rsp = sp;
	regs.rdi = a[0], regs.rsi = a[1], regs.rdx = a[2], regs.rcx = a[3];
	regs.r8 = a[4], regs.r9 = a[5];
	regs.rax = 0;
	regs.orig_rax = (unsigned long long)-1;
	if (ptrace(PTRACE_SETREGS, r->tid, NULL, &regs) ||
	    ptrace(PTRACE_CONT, r->tid, NULL, NULL))
		return -errno;
	for (;;) {
		w = wait_stop(r, &st);
		if (w == 0)
			return -ESRCH;
		if (w < 0) {
			/* stuck (a lock its own interrupted code holds?): take it back */
			if (!ptrace(PTRACE_INTERRUPT, r->tid, NULL, NULL)) {
				r->deadline = mono_ns() + 2000000000ull;
				while ((w = wait_stop(r, &st)) > 0 && (st >> 16) != PTRACE_EVENT_STOP &&
				       !exec_stop(r, st))
					ptrace(PTRACE_CONT, r->tid, NULL, (void *)(long)WSTOPSIG(st));
			}
			return r->execd ? -EPERM : -ETIMEDOUT;
		}
		/* the thread ran exec in our call (the target's own code at that address) */
		if (exec_stop(r, st))
			return -EPERM;
		if ((st >> 16) == PTRACE_EVENT_STOP) {
			/* a group stop (SIGSTOP to the process): keep running our call */
			if (ptrace(PTRACE_CONT, r->tid, NULL, NULL))
				return -errno;
			continue;
		}
		if (WSTOPSIG(st) == SIGSEGV) {
			if (ptrace(PTRACE_GETREGS, r->tid, NULL, &regs))
				return -errno;
			if (regs.rip == 0) {
				*ret = regs.rax;
				return 0;
			}
			return -EFAULT; /* a real fault in the call: not delivered */
		}
		/* someone's signal: the target's handler runs on our stack, then our call goes on */
		if (ptrace(PTRACE_CONT, r->tid, NULL, (void *)(long)WSTOPSIG(st)))
			return -errno;
	}
}

/* read a NUL-terminated string of the target */
static void peek_str(struct remote *r, uint64_t addr, char *out, size_t len)
{
	size_t i = 0;

	out[0] = 0;
	if (!addr)
		return;
	while (i + 1 < len) {
		char c;

		if (peek(r, addr + i, &c, 1) || !c)
			break;
		out[i++] = c;
	}
	out[i] = 0;
}

static int fail(struct remote *r, int e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct remote *r, int e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, r->errlen, fmt, ap);
	va_end(ap);
	return e;
}

/*
 * Whether out is what memfd_create(name, MFD_ALLOW_SEALING) made: a shmem file
 * (only those answer F_GET_SEALS) with no seals yet (other shmem files carry
 * F_SEAL_SEAL), no name in any directory, empty, and named /memfd:NAME. The
 * trainer chooses the number memfd_create returns (a seccomp user
 * notification can answer it with any descriptor) and can swap what the
 * number holds afterwards.
 */
static bool fresh_memfd(int out, const char *name)
{
	char self[64], link[PATH_MAX], want[PATH_MAX];
	struct stat st;
	ssize_t n;

	if (fstat(out, &st) || !S_ISREG(st.st_mode) || st.st_size != 0 || st.st_nlink != 0 ||
	    fcntl(out, F_GET_SEALS) != 0)
		return false;
	snprintf(self, sizeof(self), "/proc/self/fd/%d", out);
	n = readlink(self, link, sizeof(link) - 1);
	if (n <= 0)
		return false;
	link[n] = 0;
	snprintf(want, sizeof(want), "/memfd:%s (deleted)", name);
	return !strcmp(link, want);
}

/* copy the library into the target's memfd fd (through pidfd_getfd) and seal it */
static int fill_memfd(struct remote *r, int pidfd, int tfd, const char *name, const char *lib)
{
	int in = -1, out = -1, e = 0;
	char buf[65536];
	struct stat st;
	size_t total = 0;

	out = (int)syscall(SYS_pidfd_getfd, pidfd, tfd, 0);
	if (out < 0)
		return fail(r, -errno, "pidfd_getfd of the target's memfd: %s", strerror(errno));
	if (!fresh_memfd(out, name)) {
		close(out);
		return fail(r, -EBADF, "descriptor %d of PID %d is not the empty memfd made for "
			    "the library: nothing written, late injection refused", tfd, (int)r->pid);
	}
	in = open(lib, O_RDONLY | O_CLOEXEC);
	if (in < 0 || fstat(in, &st) || !S_ISREG(st.st_mode) || st.st_size > LIB_MAX) {
		e = in < 0 ? -errno : -EINVAL;
		snprintf(r->err, r->errlen, "%s: %s", lib, in < 0 ? strerror(errno) : "not a library file");
		goto out;
	}
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf)), w = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			e = fail(r, -errno, "reading %s: %s", lib, strerror(errno));
			goto out;
		}
		if (!n)
			break;
		while (w < n) {
			ssize_t k = pwrite(out, buf + w, (size_t)(n - w), (off_t)(total + (size_t)w));

			if (k <= 0) {
				e = fail(r, k < 0 ? -errno : -EIO, "writing the library into PID %d: %s",
					 (int)r->pid, k < 0 ? strerror(errno) : "short write");
				goto out;
			}
			w += k;
		}
		total += (size_t)n;
	}
	if (fcntl(out, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL))
		e = fail(r, -errno, "sealing the library's memfd: %s", strerror(errno));
out:
	if (in >= 0)
		close(in);
	close(out);
	return e;
}

/* seize a thread that sleeps in a quiet system call; 0, or -errno with why */
static int pick_thread(struct remote *r, pid_t want)
{
	char why[160] = "no thread of it sleeps in a system call that holds no lock";

	for (int round = 0; round < PICK_TRIES; round++) {
		char path[64];
		DIR *d;
		struct dirent *de;
		pid_t tids[256];
		int n = 0;

		snprintf(path, sizeof(path), "/proc/%d/task", (int)r->pid);
		d = opendir(path);
		if (!d)
			return fail(r, -errno, "PID %d: %s", (int)r->pid, strerror(errno));
		while ((de = readdir(d)) && n < (int)ARRAY_SIZE(tids)) {
			pid_t t = (pid_t)atoi(de->d_name);

			if (t > 0 && (!want || t == want))
				tids[n++] = t;
		}
		closedir(d);
		/* the main thread last: it is the one most likely to launch the GPU's work */
		for (int pass = 0; pass < 2; pass++)
			for (int i = 0; i < n; i++) {
				pid_t t = tids[i];
				long nr;
				int e;

				if ((t == r->pid) != (pass == 1) && !want)
					continue;
				nr = thread_syscall(r->pid, t);
				if (!quiet_syscall(nr))
					continue;
				if (!sigsegv_usable(r->pid, t)) {
					snprintf(why, sizeof(why), "thread %d blocks or ignores SIGSEGV",
						 (int)t);
					continue;
				}
				r->tid = t;
				e = seize(r);
				if (e == -EPERM || e == -EBUSY)
					return fail(r, e, "ptrace of PID %d refused: %s", (int)r->pid,
						    strerror(-e));
				/*
				 * -ERESTART_RESTARTBLOCK (a relative sleep, a wait with a
				 * timeout) restarts from the thread's restart block, which
				 * a call of ours interrupted by a signal would overwrite:
				 * such threads only in the second half of the tries
				 */
				if (!e && !(e = get_state(r)) &&
				    quiet_syscall((long)r->saved.orig_rax) &&
				    (long)r->saved.rax >= (round < PICK_TRIES / 2 ? -ERESTARTNOHAND_ :
							   -ERESTART_RESTARTBLOCK_) &&
				    (long)r->saved.rax <= -ERESTARTSYS_)
					return 0;
				/* it woke up in between: back as it was, try another */
				if (r->seized)
					release(r);
				free(r->xstate);
				r->xstate = NULL;
				r->have_state = false;
			}
		struct timespec ts = { 0, 20000000 };
		nanosleep(&ts, NULL);
	}
	return fail(r, -EAGAIN, "cannot load a library into PID %d now: %s", (int)r->pid, why);
}

int inject_check(pid_t pid, char *err, size_t errlen)
{
	char v[64], comm[32];
	struct maps_facts mf;
	int scope = -1, e;

	if (read_small_file("/proc/sys/kernel/yama/ptrace_scope", v, sizeof(v)) > 0)
		scope = atoi(v);
	e = inject_yama_allows(scope, err, errlen);
	if (e)
		return e;
	if (status_field(pid, 0, "TracerPid", v, sizeof(v))) {
		snprintf(err, errlen, "PID %d: no such process", (int)pid);
		return -ESRCH;
	}
	if (atoi(v) > 0) {
		thread_comm(atoi(v), atoi(v), comm, sizeof(comm));
		snprintf(err, errlen, "PID %d is already traced by PID %d (%s): a debugger or strace "
			 "holds it, and a process has one tracer; detach it, or use --no-inject",
			 (int)pid, atoi(v), comm[0] ? comm : "?");
		return -EBUSY;
	}
	if (!status_field(pid, 0, "Seccomp", v, sizeof(v)) && atoi(v) == 1) {
		snprintf(err, errlen, "PID %d runs in seccomp strict mode: it can make no system call "
			 "that loading a library needs", (int)pid);
		return -EPERM;
	}
	e = scan_maps(pid, &mf, NULL, INJECT_MEMFD_NAME);
	if (e) {
		snprintf(err, errlen, "reading the mappings of PID %d: %s", (int)pid, strerror(-e));
		return e;
	}
	if (!mf.loader) {
		snprintf(err, errlen, "PID %d has no dynamic loader mapped (statically linked): a "
			 "library cannot be loaded into it", (int)pid);
		return -ENOEXEC;
	}
	return 0;
}

/*
 * The thread can still run calls: not gone. One that was stuck in a call (taken
 * back) or crashed in one is stopped too, and can still close the memfd and
 * unmap the stack; only dlclose is not tried then (the loader may be locked).
 */
static bool usable(int e)
{
	return e != -ESRCH;
}

int inject_scan(pid_t pid, struct inject_maps *m)
{
	struct maps_facts mf;
	int e = scan_maps(pid, &mf, NULL, INJECT_MEMFD_NAME);

	m->libcuda = mf.libcuda;
	m->collector = mf.collector;
	m->channel = mf.channel;
	return e;
}

int inject_library(pid_t pid, const struct inject_opts *o, struct inject_result *res,
		   char *err, size_t errlen)
{
	struct remote r = { .pid = pid, .mem = -1, .err = err, .errlen = errlen };
	struct sym_want s[S_N];
	struct maps_facts mf;
	const char *memfd = o->memfd_name ? o->memfd_name : INJECT_MEMFD_NAME;
	char path[64], dlerr[200], v[64];
	uint64_t ret = 0, top = 0, handle = 0, entry = 0, t0 = 0, errno_at = 0, none[6] = { 0 };
	unsigned long long mask_before = 0, mask_after;
	int32_t errno_before = 0;
	long tfd = -1;
	int e, pidfd = -1;

	memset(res, 0, sizeof(*res));
	e = inject_check(pid, err, errlen);
	if (e)
		return e;
	syms_init(s);
	e = scan_maps(pid, &mf, s, memfd);
	if (e)
		return fail(&r, e, "reading the mappings of PID %d: %s", (int)pid, strerror(-e));
	for (int k = 0; k < S_N; k++)
		if (!s[k].addr && !s[k].optional)
			return fail(&r, -ENOENT, "PID %d: %s not found in its C library (glibc or musl "
				    "expected): a library cannot be loaded into it", (int)pid,
				    s[k].names[0]);
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return fail(&r, -errno, "pidfd_open(%d): %s", (int)pid, strerror(errno));
	r.deadline = mono_ns() + (uint64_t)(o->timeout_ms > 0 ? o->timeout_ms : DEFAULT_TIMEOUT_MS) *
				 1000000ull;
	e = pick_thread(&r, o->tid);
	if (!e && (e = mem_open(&r)))
		fail(&r, e, "PID %d: its memory: %s", (int)pid, strerror(-e));
	if (e)
		goto out;
	t0 = mono_ns();
	res->tid = r.tid;
	res->interrupted_nr = (long)r.saved.orig_rax;
	if (!status_field(pid, r.tid, "SigBlk", v, sizeof(v)))
		sscanf(v, "%llx", &mask_before);
	if (!status_field(pid, r.tid, "Seccomp", v, sizeof(v)) && atoi(v) == 2) {
		e = seccomp_check(pid, r.tid, err, errlen);
		if (e)
			goto out;
	}
	/* a stack of our own, below the interrupted frame and its red zone: the thread's may be small */
	{
		uint64_t a[6] = { 0, STACK_BYTES, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, (uint64_t)-1, 0 };

		e = rcall(&r, s[S_MMAP].addr, r.saved.rsp - 4096, a, &ret);
		if (!e && ret > (uint64_t)-4096)
			e = (int)ret;
		if (e) {
			fail(&r, e, "mmap in PID %d failed: %s", (int)pid, strerror(-e));
			goto out;
		}
		r.stack = ret;
		top = r.stack + STACK_BYTES - 512;
	}
	/* the thread's errno, put back at the end */
	if (s[S_ERRNO].addr && !rcall(&r, s[S_ERRNO].addr, top - 64, none, &errno_at) &&
	    peek(&r, errno_at, &errno_before, sizeof(errno_before)))
		errno_at = 0;
	/* memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING) */
	{
		uint64_t a[6] = { top, MFD_CLOEXEC | MFD_ALLOW_SEALING };

		if ((e = poke(&r, top, memfd, strlen(memfd) + 1)) ||
		    (e = rcall(&r, s[S_MEMFD].addr, top - 64, a, &ret))) {
			fail(&r, e, "memfd_create in PID %d: %s", (int)pid, strerror(-e));
			goto cleanup;
		}
		if ((int)ret < 0) {
			e = -EPERM;
			fail(&r, e, "memfd_create in PID %d failed (a seccomp filter?)", (int)pid);
			goto cleanup;
		}
		tfd = (int)ret;
	}
	e = fill_memfd(&r, pidfd, (int)tfd, memfd, o->lib);
	if (e)
		goto cleanup;
	/* dlopen("/proc/self/fd/N", RTLD_NOW) */
	{
		uint64_t a[6] = { top, RTLD_NOW };

		snprintf(path, sizeof(path), "/proc/self/fd/%ld", tfd);
		if ((e = poke(&r, top, path, strlen(path) + 1)) ||
		    (e = rcall(&r, s[S_DLOPEN].addr, top - 64, a, &handle))) {
			fail(&r, e, "dlopen in PID %d: %s", (int)pid, e == -ETIMEDOUT ?
			     "did not return (abandoned; the thread was put back)" : strerror(-e));
			goto cleanup;
		}
		if (!handle) {
			dlerr[0] = 0;
			if (s[S_DLERROR].addr && !rcall(&r, s[S_DLERROR].addr, top - 64, none, &ret))
				peek_str(&r, ret, dlerr, sizeof(dlerr));
			e = -ENOEXEC;
			fail(&r, e, "dlopen of %s in PID %d failed: %s", o->lib, (int)pid,
			     dlerr[0] ? dlerr : "no reason given");
			goto cleanup;
		}
	}
	/* dlsym(handle, entry); entry() */
	{
		uint64_t a[6] = { handle, top };

		if ((e = poke(&r, top, o->entry, strlen(o->entry) + 1)) ||
		    (e = rcall(&r, s[S_DLSYM].addr, top - 64, a, &entry))) {
			fail(&r, e, "dlsym in PID %d: %s", (int)pid, strerror(-e));
			goto cleanup;
		}
		if (!entry) {
			e = -ENOENT;
			fail(&r, e, "%s has no function %s", o->lib, o->entry);
			goto cleanup;
		}
		e = rcall(&r, entry, top - 64, none, &ret);
		if (e) {
			fail(&r, e, "%s() in PID %d: %s", o->entry, (int)pid, e == -ETIMEDOUT ?
			     "did not return in time (abandoned; the thread was put back)" :
			     e == -EFAULT ? "crashed (the fault was not delivered; the thread was "
			     "put back)" : strerror(-e));
			goto cleanup;
		}
		res->entry_ret = (int)ret;
	}
cleanup:
	if (!usable(e))
		goto out;
	r.deadline = mono_ns() + 2000000000ull;
	if (handle && o->unload && e != -ETIMEDOUT && e != -EFAULT) {
		uint64_t a[6] = { handle };

		rcall(&r, s[S_DLCLOSE].addr, top - 64, a, &ret);
	}
	if (tfd >= 0) {
		uint64_t a[6] = { (uint64_t)tfd };
		int e2 = rcall(&r, s[S_CLOSE].addr, top - 64, a, &ret);

		if (!e && e2)
			e = fail(&r, e2, "close in PID %d: %s", (int)pid, strerror(-e2));
	}
	/* what pthread_create and the loader may have left in the thread's signal mask */
	if (s[S_SIGMASK].addr && !status_field(pid, r.tid, "SigBlk", v, sizeof(v)) &&
	    sscanf(v, "%llx", &mask_after) == 1 && mask_after != mask_before) {
		uint64_t set[16] = { mask_before }, a[6] = { SIG_SETMASK, top, 0 };

		if (!poke(&r, top, set, sizeof(set)))
			rcall(&r, s[S_SIGMASK].addr, top - 256, a, &ret);
	}
	if (errno_at)
		poke(&r, errno_at, &errno_before, sizeof(errno_before));
	{
		uint64_t a[6] = { r.stack, STACK_BYTES };
		int e2 = rcall(&r, s[S_MUNMAP].addr, r.saved.rsp - 4096, a, &ret);

		if (!e && e2)
			e = fail(&r, e2, "munmap in PID %d: %s", (int)pid, strerror(-e2));
	}
out:
	/*
	 * A call of ours taken back in the middle may have left its own restart
	 * block in the thread: its interrupted call then ends with EINTR, as after
	 * a signal with a handler, rather than restart as something else.
	 */
	if ((e == -ETIMEDOUT || e == -EFAULT) &&
	    (long)r.saved.rax == -ERESTART_RESTARTBLOCK_) {
		r.saved.rax = (unsigned long long)-EINTR;
		r.saved.orig_rax = (unsigned long long)-1;
	}
	if (r.seized) {
		res->pause_ns = mono_ns() - t0;
		/* after a timeout the thread is stopped where it was taken back: still ours */
		if (!release(&r) && !e)
			e = fail(&r, -EIO, "could not put thread %d of PID %d back as it was",
				 (int)r.tid, (int)pid);
	}
	if (r.execd && !e)
		e = -EPERM;
	if (r.execd)
		fail(&r, e, "PID %d ran exec while the collector was being loaded: left alone, "
		     "nothing written into the new program", (int)pid);
	free(r.xstate);
	if (r.mem >= 0)
		close(r.mem);
	if (pidfd >= 0)
		close(pidfd);
	return e;
}

#else /* not x86-64 */

uint32_t inject_seccomp_run(const struct sock_filter *f, unsigned len, int nr,
			    const uint64_t args[6])
{
	(void)f, (void)len, (void)nr, (void)args;
	return 0;
}

int inject_scan(pid_t pid, struct inject_maps *m)
{
	memset(m, 0, sizeof(*m));
	return -ENOTSUP;
}

int inject_check(pid_t pid, char *err, size_t errlen)
{
	snprintf(err, errlen, "loading the collector into a running PID %d is implemented for "
		 "x86-64 only: start the trainer under `stepblame run`", (int)pid);
	return -ENOTSUP;
}

int inject_library(pid_t pid, const struct inject_opts *o, struct inject_result *res,
		   char *err, size_t errlen)
{
	(void)o;
	memset(res, 0, sizeof(*res));
	return inject_check(pid, err, errlen);
}

#endif
