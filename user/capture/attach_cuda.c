// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The CUDA driver's entry points: entry and return probes (marks family's programs). */
#include <bpf/libbpf.h>

#include "capture/probes_internal.h"
#include "base/util.h"
#include "marks.skel.h"

/* ---- CUDA driver ---- */

static const struct {
	const char *sym;
	__u32 fn;
} cuda_syms[] = {
	{ "cuLaunchKernel", SB_CU_LAUNCH },
	{ "cuLaunchKernelEx", SB_CU_LAUNCH },
	{ "cuStreamSynchronize", SB_CU_SYNC },
	{ "cuCtxSynchronize", SB_CU_SYNC },
	{ "cuEventSynchronize", SB_CU_SYNC },
	{ "cuMemAlloc_v2", SB_CU_ALLOC },
	{ "cuMemAllocAsync", SB_CU_ALLOC },
	{ "cuMemAllocManaged", SB_CU_ALLOC },
	{ "cuMemAllocHost_v2", SB_CU_ALLOC },
	{ "cuMemAllocPitch_v2", SB_CU_ALLOC },
	{ "cuMemFree_v2", SB_CU_FREE },
	{ "cuMemFreeAsync", SB_CU_FREE },
	{ "cuMemFreeHost", SB_CU_FREE },
	{ "cuMemcpy", SB_CU_MEMCPY },
	{ "cuMemcpyAsync", SB_CU_MEMCPY },
	{ "cuMemcpyHtoD_v2", SB_CU_MEMCPY },
	{ "cuMemcpyDtoH_v2", SB_CU_MEMCPY },
	{ "cuMemcpyHtoDAsync_v2", SB_CU_MEMCPY },
	{ "cuMemcpyDtoHAsync_v2", SB_CU_MEMCPY },
};

const char *probes_cuda_symbol(unsigned idx)
{
	return idx < ARRAY_SIZE(cuda_syms) ? cuda_syms[idx].sym : "?";
}

void attach_cuda(struct probes *p, const char *open_path, const char *shown)
{
	int ok = 0;

	for (size_t i = 0; i < ARRAY_SIZE(cuda_syms); i++) {
		__u64 cookie = ((__u64)cuda_syms[i].fn << 16) | i;
		LIBBPF_OPTS(bpf_uprobe_opts, eo, .func_name = cuda_syms[i].sym, .bpf_cookie = cookie);
		LIBBPF_OPTS(bpf_uprobe_opts, ro, .func_name = cuda_syms[i].sym, .retprobe = true);
		struct bpf_link *le, *lr;

		le = bpf_program__attach_uprobe_opts(p->marks->progs.cuda_enter, p->o.pid,
						     open_path, 0, &eo);
		if (!le)
			continue;
		lr = bpf_program__attach_uprobe_opts(p->marks->progs.cuda_return, p->o.pid,
						     open_path, 0, &ro);
		if (!lr) {
			bpf_link__destroy(le);
			continue;
		}
		keep_link(p, le);
		keep_link(p, lr);
		ok++;
	}
	if (ok)
		add_status(p, "cuda-driver", true, false, "%d symbols of %s", ok, shown);
	else
		add_status(p, "cuda-driver", false, false, "no symbols in %s", shown);
}
