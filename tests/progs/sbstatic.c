// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A statically linked program (built with -static): it maps no C library, so
 * allocator probes on the target's libc never see its malloc calls.
 *
 *   sbstatic MS    malloc and free every 10 ms for MS milliseconds
 */
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	long ms = argc > 1 ? atol(argv[1]) : 1500;
	struct timespec ts = { 0, 10 * 1000 * 1000 };

	for (long t = 0; t < ms; t += 10) {
		volatile char *p = malloc(4096);

		if (p)
			p[0] = 1;
		free((void *)p);
		nanosleep(&ts, NULL);
	}
	return 0;
}
