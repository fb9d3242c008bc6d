/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* attach's view on a terminal, redrawn as top does (top.c) */
#ifndef STEPBLAME_CMD_TOP_H
#define STEPBLAME_CMD_TOP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/engine.h"

struct top;

struct top *top_new(uint64_t start_ns);
void top_free(struct top *t);
/* a step was finalised: the episode and the last tail steps follow it */
void top_step(struct top *t, const struct engine *e, const struct eng_step *s,
	      const struct eng_summary *sum);
/* a line about the capture itself under the title (kept, not copied; NULL: none) */
void top_note(struct top *t, const char *note);
/* clear the screen once, before the first draw */
void top_begin(FILE *out);
/* redraw, unless the last draw was less than a quarter second ago (force: now) */
int top_draw(struct top *t, const struct engine *e, uint64_t now, bool force, FILE *out);

#endif
