/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The outputs: they read an engine's results (after engine_finish) and never
 * drive it. Each returns 0 or -errno.
 */
#ifndef STEPBLAME_REPORT_H
#define STEPBLAME_REPORT_H

#include <stdio.h>

#include "engine/engine.h"

/* the JSON report's "schema" and "schema_version" (schemas/report.md) */
#define REPORT_SCHEMA_NAME "stepblame-report"
#define REPORT_SCHEMA_VERSION 1

int report_text(const struct engine *e, FILE *f);
int report_json(const struct engine *e, FILE *f);
int report_jsonl(const struct engine *e, FILE *f);

/* one step as a compact JSON object plus newline (the JSONL line; attach --json) */
int report_step_json(const struct engine *e, const struct eng_step *s, const struct eng_summary *sum,
		     FILE *f);
/* one step as a line of text (attach) */
int report_step_line(const struct engine *e, const struct eng_step *s, const struct eng_summary *sum,
		     FILE *f);

/*
 * A Perfetto (Chrome JSON) document streamed to f while the engine sweeps:
 * perfetto_stream_new() fills *hooks (for engine_opts.timeline); NULL if out
 * of memory. report_perfetto() closes the document; with no stream (p NULL,
 * or nothing streamed to f) it writes one of the steps alone.
 */
struct perfetto_stream;
struct perfetto_stream *perfetto_stream_new(FILE *f, struct eng_timeline_hooks *hooks);
void perfetto_stream_free(struct perfetto_stream *p);
int report_perfetto(const struct engine *e, const struct perfetto_stream *p, FILE *f);

#endif
