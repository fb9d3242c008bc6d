// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libstepblame.so: the step markers of include/stepblame.h as exported
 * functions, for Python (ctypes) and other languages that cannot inline C.
 * The probe sites live in this library, so a tracer attaches to
 * stepblame:step in libstepblame.so as mapped by the target.
 */
#define STEPBLAME_EXTERN
#include "stepblame.h"

#define EXPORT __attribute__((visibility("default"), noinline))

EXPORT void stepblame_step(unsigned long long n)
{
	STAP_PROBE1(stepblame, step, n);
}

EXPORT void stepblame_step_begin(unsigned long long n)
{
	STAP_PROBE1(stepblame, step_begin, n);
}

EXPORT void stepblame_step_end(unsigned long long n)
{
	STAP_PROBE1(stepblame, step_end, n);
}
