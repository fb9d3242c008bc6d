/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Step markers for stepblame: call stepblame_step(n) at the start of every
 * training step. It fires the USDT probe stepblame:step (argument: n), which
 * is a single nop until a tracer attaches, so it costs nothing otherwise.
 *
 *   #include <stepblame.h>
 *   for (uint64_t n = 0; ; n++) { stepblame_step(n); train_one_step(); }
 *
 * stepblame:step marks a step boundary: a step runs from one mark to the
 * next, whatever happens in between. The probes of stepblame_step_begin(n)
 * and stepblame_step_end(n) are not read by the agent: a step does not end at
 * step_end, so that the wait for the next batch after it (a data loader's
 * stall) stays in a step and is blamed. Time spent between epochs (an
 * evaluation) is in the step before it.
 *
 * Header-only. Python and other FFI users load libstepblame.so instead, which
 * exports the same names as real functions (define STEPBLAME_EXTERN before
 * including this header to get those prototypes in C).
 */
#ifndef STEPBLAME_MARKER_H
#define STEPBLAME_MARKER_H

#include <sys/sdt.h>

#ifdef STEPBLAME_EXTERN
#ifdef __cplusplus
extern "C" {
#endif
void stepblame_step(unsigned long long n);
void stepblame_step_begin(unsigned long long n);
void stepblame_step_end(unsigned long long n);
#ifdef __cplusplus
}
#endif
#else
static inline __attribute__((always_inline)) void stepblame_step(unsigned long long n)
{
	STAP_PROBE1(stepblame, step, n);
}

static inline __attribute__((always_inline)) void stepblame_step_begin(unsigned long long n)
{
	STAP_PROBE1(stepblame, step_begin, n);
}

static inline __attribute__((always_inline)) void stepblame_step_end(unsigned long long n)
{
	STAP_PROBE1(stepblame, step_end, n);
}
#endif

#endif
