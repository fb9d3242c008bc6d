// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Calibration: what the allocator probes (and a single uprobe) cost a
 * thread on this machine, timed on functions of this binary with the
 * allocator's own programs (probes_calibrate, format/costs.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "format/costs.h"
#include "format/maps.h"
#include "capture/probes_internal.h"
#include "base/util.h"
#include "alloc.skel.h"

/* ---- calibration: what the allocator probes cost a thread on this machine ---- */

/*
 * Functions for the calibration to trap in, in this binary. What a uprobe
 * costs depends above all on the probed instruction: the kernel emulates a
 * few (nop; push on recent kernels) and single-steps the others out of
 * line, a second trap that can make a probe three times as dear (7 us
 * against 22 us on a 2-vCPU PVM guest with Linux 6.18). On x86-64 glibc's
 * malloc starts with a push and its free with a test, so one function starts
 * like each and an allocator call is taken as their mean (a malloc/free pair
 * is the common case). A single uprobe is mostly a USDT step mark: a nop.
 * Elsewhere the compiler chooses; the bodies differ so that no two are merged.
 */
#if defined(__x86_64__)
__asm__(".pushsection .text\n"
	".p2align 4\n"
	".globl sb_calib_plain\n.hidden sb_calib_plain\n.type sb_calib_plain, @function\n"
	"sb_calib_plain:\n\tnop\n\tret\n.size sb_calib_plain, .-sb_calib_plain\n"
	".p2align 4\n"
	".globl sb_calib_single\n.hidden sb_calib_single\n.type sb_calib_single, @function\n"
	"sb_calib_single:\n\tnop\n\tret\n.size sb_calib_single, .-sb_calib_single\n"
	".p2align 4\n"
	".globl sb_calib_emul\n.hidden sb_calib_emul\n.type sb_calib_emul, @function\n"
	"sb_calib_emul:\n\tpush %r12\n\tpop %r12\n\tret\n.size sb_calib_emul, .-sb_calib_emul\n"
	".p2align 4\n"
	".globl sb_calib_step\n.hidden sb_calib_step\n.type sb_calib_step, @function\n"
	"sb_calib_step:\n\ttest %rdi, %rdi\n\tret\n.size sb_calib_step, .-sb_calib_step\n"
	".popsection\n");
__attribute__((visibility("hidden"))) void sb_calib_plain(void);
__attribute__((visibility("hidden"))) void sb_calib_single(void);
__attribute__((visibility("hidden"))) void sb_calib_emul(void);
__attribute__((visibility("hidden"))) void sb_calib_step(void);
#else
static volatile unsigned calib_sink;

__attribute__((noinline)) static void sb_calib_plain(void) { calib_sink += 1; }
__attribute__((noinline)) static void sb_calib_single(void) { calib_sink += 2; }
__attribute__((noinline)) static void sb_calib_emul(void) { calib_sink += 3; }
__attribute__((noinline)) static void sb_calib_step(void) { calib_sink += 4; }
#endif

#define CALIB_CALLS 16              /* calls per function per round, timed together */
#define CALIB_ROUNDS 9              /* at most; the fastest round counts */
#define CALIB_BUDGET_NS 40000000ull /* no further round once this much time is spent */

/*
 * Where fn lies in the file it was mapped from: the mapping's file offset
 * plus fn's distance from the mapping's start. That is what a uprobe wants,
 * for a PIE or a static binary alike, with or without a symbol table.
 * path: /proc/self/exe when fn is in the executable (it reaches the file
 * even if it was replaced on disk since), else the mapped file's name.
 */
static int self_offset(void (*fn)(void), char *path, size_t len, uint64_t *off)
{
	uintptr_t addr = (uintptr_t)fn;
	char line[PATH_MAX + 128];
	struct stat exe;
	int err = -ENOENT;
	FILE *f;

	if (stat("/proc/self/exe", &exe))
		return -errno;
	f = fopen("/proc/self/maps", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		struct maps_line l;

		line[strcspn(line, "\n")] = 0;
		if (!maps_line_parse(line, &l) || addr < l.start || addr >= l.end)
			continue;
		if (l.perms[2] != 'x' || !l.ino || l.name[0] != '/') {
			err = -EFAULT;
			break;
		}
		*off = addr - l.start + l.off;
		snprintf(path, len, "%s", l.ino == exe.st_ino ? "/proc/self/exe" : l.name);
		err = 0;
		break;
	}
	fclose(f);
	return err;
}

/* per call of fn, ns: CALIB_CALLS calls timed together */
static uint64_t time_calls(void (*fn)(void))
{
	uint64_t t = mono_ns();

	for (int i = 0; i < CALIB_CALLS; i++)
		fn();
	return (mono_ns() - t) / CALIB_CALLS;
}

/*
 * The fastest round: whatever else happens on the CPU (an interrupt, a thread
 * of the target preempting the agent) only adds time, and enough of it to
 * spoil half the rounds is common at capture start.
 */
static uint64_t fastest(const uint64_t *v, int n)
{
	uint64_t m = v[0];

	for (int i = 1; i < n; i++)
		if (v[i] < m)
			m = v[i];
	return m;
}

static uint64_t minus(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 1;
}

/*
 * The calibration's links: entry (and return, for a pair) probe on fn, with
 * the allocator's own programs and links of the kind the allocator gets.
 * They run for this process, which their target filter turns away first
 * thing: the trap, the program's start and the filter are timed, all but
 * the little work that follows for a target's call.
 */
static int calib_attach(struct probes *p, void (*fn)(void), bool pair, struct alink *l, int *n)
{
	/* uprobe_multi: alloc_enter, cookie 0 (SB_FN_MALLOC) */
	struct bpf_program *progs[2] = {
		p->alloc_multi ? p->alloc->progs.alloc_enter : p->alloc->progs.malloc_enter,
		p->alloc->progs.alloc_return
	};
	char path[PATH_MAX];
	uint64_t off = 0;
	int err = self_offset(fn, path, sizeof(path), &off);

	for (int k = 0; !err && k < (pair ? 2 : 1); k++) {
		LIBBPF_OPTS(bpf_uprobe_opts, o, .retprobe = k == 1);
		struct alink *a = &l[*n];

		a->l = NULL;
		a->fd = -1;
		if (p->alloc_multi) {
			a->fd = uprobe_multi_link(bpf_program__fd(progs[k]), path, &off, NULL, 1,
						  k == 1, getpid());
			err = a->fd < 0 ? a->fd : 0;
		} else {
			a->l = bpf_program__attach_uprobe_opts(progs[k], getpid(), path, off, &o);
			err = a->l ? 0 : errno ? -errno : -EINVAL;
		}
		if (!err)
			++*n;
	}
	return err;
}

/* did the programs keep state for thread tid in the allocator's maps? removes it */
static bool calib_left_state(struct probes *p, __u32 tid)
{
	int fds[2] = { bpf_map__fd(p->alloc->maps.alloc_frames),
		       bpf_map__fd(p->alloc->maps.alloc_totals) };
	bool left = false;

	for (int i = 0; i < 2; i++)
		left |= bpf_map_delete_elem(fds[i], &tid) == 0;
	return left;
}

int probes_calibrate(struct probes *p, struct sb_costs *c)
{
	uint64_t plain[CALIB_ROUNDS], single[CALIB_ROUNDS], emul[CALIB_ROUNDS];
	uint64_t step[CALIB_ROUNDS], t0, pl, one = 0, pair = 0;
	struct alink l[6];
	int n = 0, rounds = 0, err;

	if (!p->alloc)
		return -ENOENT;
	/* the programs would take the calibration's calls for the target's */
	if (p->o.pid == getpid())
		return -EINVAL;
	err = calib_attach(p, sb_calib_single, false, l, &n);
	if (!err)
		err = calib_attach(p, sb_calib_emul, true, l, &n);
	if (!err)
		err = calib_attach(p, sb_calib_step, true, l, &n);
	if (!err) {
		/* the first hits set up the process's out-of-line area and return stack */
		for (int i = 0; i < 2; i++) {
			sb_calib_single();
			sb_calib_emul();
			sb_calib_step();
		}
		t0 = mono_ns();
		/* interleaved: a burst of noise hits one round of each, not all of one kind */
		while (rounds < CALIB_ROUNDS && (rounds < 3 || mono_ns() - t0 < CALIB_BUDGET_NS)) {
			plain[rounds] = time_calls(sb_calib_plain);
			single[rounds] = time_calls(sb_calib_single);
			emul[rounds] = time_calls(sb_calib_emul);
			step[rounds] = time_calls(sb_calib_step);
			rounds++;
		}
		pl = fastest(plain, rounds);
		one = minus(fastest(single, rounds), pl);
		pair = (minus(fastest(emul, rounds), pl) + minus(fastest(step, rounds), pl)) / 2;
	}
	while (n > 0)
		destroy_async(p, &l[--n]);
	/*
	 * The filter turns this process away before the programs touch a map.
	 * Should that ever change, the figures are not the probes' cost for a
	 * target's call, and this thread must not stay behind in the maps.
	 */
	if (calib_left_state(p, (__u32)syscall(SYS_gettid)) && !err)
		err = -EPROTO;
	if (err)
		return err;
	c->ns[SB_COST_UPROBE] = one;
	c->ns[SB_COST_ALLOC_CALL] = pair;
	/* the CUDA driver's entry points are no better known: the same mean */
	c->ns[SB_COST_CUDA_CALL] = pair;
	c->calibrated |= 1u << SB_COST_UPROBE | 1u << SB_COST_ALLOC_CALL | 1u << SB_COST_CUDA_CALL;
	c->samples = rounds * CALIB_CALLS * 3;
	return 0;
}
