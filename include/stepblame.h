/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Step markers for stepblame: call stepblame_step(n) at the start of every
 * training step. It fires the USDT probe stepblame:step (argument: n), which
 * is a single nop until a tracer attaches, so it costs nothing otherwise.
 *
 *   #include <stepblame.h>
 *   for (uint64_t n = 0; ; n++) { stepblame_step(n); train_one_step(); }
 *
 * stepblame:step marks a step boundary. stepblame:step_begin / step_end are
 * optional finer marks (e.g. to exclude evaluation between steps); the agent
 * does not need them.
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
