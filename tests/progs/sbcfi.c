// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A target whose stacks pass through the code of shared objects named on its
 * command line, for the tests of the call-frame information check
 * (tests/scenarios/robust_hostile_cfi.sh): it loads each LIB and, for SECONDS,
 * calls each one's sbcfi_call(nap) in turn, where nap sleeps 20 ms. Every
 * long sleep's stack is nap < sbcfi_call (of LIB) < main. With no LIB it
 * calls nap itself (a stack copy at every sleep, 50 a second).
 * Prints "ready" once the objects are loaded. With SBCFI_LATE=FILE in its
 * environment it prints "ready" first and calls nap itself until FILE
 * exists, and only then loads them: libraries mapped after the attach.
 * Usage: sbcfi SECONDS [LIB...]
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef void (*call_fn)(void (*)(void));

static __attribute__((noinline)) void nap(void)
{
	usleep(20000);
}

int main(int argc, char **argv)
{
	call_fn fn[128];
	int n = 0;
	time_t end;

	if (argc < 2 || argc - 2 > 128) {
		fprintf(stderr, "usage: sbcfi SECONDS [LIB...] (128 at most)\n");
		return 2;
	}
	const char *late = getenv("SBCFI_LATE");

	if (late) {
		printf("ready\n");
		fflush(stdout);
		while (access(late, F_OK))
			nap();
	}
	for (int i = 2; i < argc; i++) {
		void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);

		if (!h || !(fn[n++] = (call_fn)dlsym(h, "sbcfi_call"))) {
			fprintf(stderr, "sbcfi: %s: %s\n", argv[i], dlerror());
			return 1;
		}
	}
	if (!late) {
		printf("ready\n");
		fflush(stdout);
	}
	end = time(NULL) + atoi(argv[1]);
	while (time(NULL) < end) {
		for (int i = 0; i < n; i++)
			fn[i](nap);
		if (!n)
			nap();
	}
	return 0;
}
