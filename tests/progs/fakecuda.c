// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A stand-in for the CUDA driver library, for the driver-uprobe test: the
 * test builds it at run time as libcuda.so.1 (the probes look for that name)
 *
 *   cc -shared -fPIC -O1 -DFAKECUDA_LIB tests/progs/fakecuda.c -o DIR/libcuda.so.1
 *
 * It exports a few driver entry points with the real signatures, so the
 * arguments sit in the same registers as in a real call; they are ignored.
 * cuStreamSynchronize sleeps FAKECUDA_SYNC_MS, the latency the test expects.
 * Built as a program (the rule every program in tests/progs gets) it only says this.
 */
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#define FAKECUDA_SYNC_MS 20

typedef int CUresult;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;

#ifdef FAKECUDA_LIB
#define EXPORT __attribute__((visibility("default"), noinline))

static volatile unsigned long long calls;
static unsigned long long next_ptr = 0x7f0000000000ull;

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			       unsigned by, unsigned bz, unsigned shmem, CUstream s,
			       void **params, void **extra)
{
	(void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem;
	(void)s, (void)params, (void)extra;
	calls++;
	return 0;
}

EXPORT CUresult cuStreamSynchronize(CUstream s)
{
	struct timespec ts = { 0, FAKECUDA_SYNC_MS * 1000000l };

	(void)s;
	calls++;
	while (nanosleep(&ts, &ts))
		;
	return 0;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
	calls++;
	*dptr = __atomic_fetch_add(&next_ptr, (bytes + 255) & ~255ull, __ATOMIC_RELAXED);
	return 0;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	(void)dptr;
	calls++;
	return 0;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes)
{
	(void)dst, (void)src, (void)bytes;
	calls++;
	return 0;
}
#else
int main(void)
{
	puts("fakecuda: a library source; build it with -shared -fPIC -DFAKECUDA_LIB "
	     "(tests/bpf/test_cuda_uprobes does)");
	return 0;
}
#endif
