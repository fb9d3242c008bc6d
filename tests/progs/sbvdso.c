// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A target whose CPU time is in the vDSO, for the stack tests: waits for a
 * byte on stdin, then marks 30 steps of 30 ms of CPU each; in steps 0-14 it
 * reads the clock in a loop (clock_gettime: the vDSO's code, no system
 * call), in steps 15-29 it counts in spin_plain. The CPU samples of the
 * first steps are in the vDSO, those of the last in spin_plain.
 * Usage: sbvdso
 */
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <stepblame.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) void spin_clock(uint64_t ns)
{
	uint64_t end = now_ns() + ns;

	while (now_ns() < end)
		;
}

__attribute__((noinline)) void spin_plain(uint64_t ns)
{
	uint64_t end = now_ns() + ns;
	volatile uint64_t x = 0;

	do {
		for (int i = 0; i < 200000; i++)
			x += (uint64_t)i;
	} while (now_ns() < end);
}

int main(void)
{
	char c;

	if (read(0, &c, 1) != 1)
		return 1;
	for (unsigned long long n = 0; n < 30; n++) {
		stepblame_step(n);
		if (n < 15)
			spin_clock(30000000ull);
		else
			spin_plain(30000000ull);
	}
	stepblame_step(30);
	return 0;
}
