// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Calls the CUDA driver entry points of a library (the test's fake
 * libcuda.so.1) a known number of times. The library is loaded first, then
 * one byte is awaited on stdin (the tracer has attached by then), then the
 * calls run on a thread named "cu-main", in argument order. It writes one
 * byte to stdout once the library is mapped, so the tracer knows when to attach.
 *
 *   cudauser LIB [launch N] [sync N] [alloc N] [free N] [memcpy N] [side N] [exit N]
 *
 * "side N" makes a second thread, "cu-side", do N launches after cu-main's;
 * "exit N" makes the process exit with status N once the calls are done.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			 unsigned, void *, void **, void **);
typedef int (*sync_fn)(void *);
typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*free_fn)(unsigned long long);
typedef int (*memcpy_fn)(unsigned long long, const void *, size_t);

static launch_fn launch;
static sync_fn sync_;
static alloc_fn alloc;
static free_fn free_;
static memcpy_fn copy;
static int status;

static void *side(void *arg)
{
	long n = (long)arg;

	prctl(PR_SET_NAME, "cu-side");
	for (long i = 0; i < n; i++)
		launch(NULL, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
	return NULL;
}

static void *work(void *arg)
{
	char **argv = arg;
	static char host[4096];
	unsigned long long p = 0;

	prctl(PR_SET_NAME, "cu-main");
	for (int i = 0; argv[i] && argv[i + 1]; i += 2) {
		long n = atol(argv[i + 1]);

		if (!strcmp(argv[i], "launch")) {
			for (long k = 0; k < n; k++)
				launch(NULL, 128, 1, 1, 256, 1, 1, 0, NULL, NULL, NULL);
		} else if (!strcmp(argv[i], "sync")) {
			for (long k = 0; k < n; k++)
				sync_(NULL);
		} else if (!strcmp(argv[i], "alloc")) {
			for (long k = 0; k < n; k++)
				alloc(&p, 1 << 20);
		} else if (!strcmp(argv[i], "free")) {
			for (long k = 0; k < n; k++)
				free_(p);
		} else if (!strcmp(argv[i], "memcpy")) {
			for (long k = 0; k < n; k++)
				copy(p, host, sizeof(host));
		} else if (!strcmp(argv[i], "exit")) {
			status = (int)n;
		} else if (!strcmp(argv[i], "side")) {
			pthread_t t;

			pthread_create(&t, NULL, side, (void *)n);
			pthread_join(t, NULL);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;
	void *h;
	char go;

	if (argc < 2) {
		fprintf(stderr, "usage: cudauser LIB [launch N] [sync N] [alloc N] [free N] "
			"[memcpy N] [side N] [exit N]\n");
		return 2;
	}
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "cudauser: %s\n", dlerror());
		return 1;
	}
	launch = (launch_fn)dlsym(h, "cuLaunchKernel");
	sync_ = (sync_fn)dlsym(h, "cuStreamSynchronize");
	alloc = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
	free_ = (free_fn)dlsym(h, "cuMemFree_v2");
	copy = (memcpy_fn)dlsym(h, "cuMemcpyHtoD_v2");
	if (!launch || !sync_ || !alloc || !free_ || !copy) {
		fprintf(stderr, "cudauser: %s lacks a driver symbol\n", argv[1]);
		return 1;
	}
	if (write(1, "r", 1) != 1 || read(0, &go, 1) != 1)
		return 1;
	pthread_create(&t, NULL, work, argv + 2);
	pthread_join(t, NULL);
	return status;
}
