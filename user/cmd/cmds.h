/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The subcommands; each parses its own arguments and returns the exit status. */
#ifndef STEPBLAME_CMDS_H
#define STEPBLAME_CMDS_H

#include <stdbool.h>

int cmd_record(int argc, char **argv); /* record.c */
int cmd_attach(int argc, char **argv); /* record.c */
int cmd_watch(int argc, char **argv);  /* watch.c */
int cmd_dump(int argc, char **argv);   /* dump.c */
int cmd_report(int argc, char **argv); /* report.c */
int cmd_demo(int argc, char **argv);   /* demo.c */
int cmd_run(int argc, char **argv);    /* run.c */
int cmd_compare(int argc, char **argv); /* compare.c */

struct engine_opts;

/* the formats of stepblame report */
enum report_fmt { FMT_TEXT, FMT_JSON, FMT_JSONL, FMT_PERFETTO, FMT_HTML };

/*
 * stepblame report without its command line (report.c): the report of the
 * trace at path, as far as it is readable, in format fmt, on standard output
 * (outp NULL or "-") or written to outp atomically (outfile.h). opts: the
 * step definitions and lag; its perfetto and start_ns are the report's own.
 * 0, or 1 after one line on stderr.
 */
/* several traces as the ranks of one job (report/ranks.c) */
int report_rank_files(char **paths, int n, enum report_fmt fmt, const char *outp,
		      const struct engine_opts *opts);
int report_trace_file(const char *path, enum report_fmt fmt, const char *outp,
		      const struct engine_opts *opts);

/*
 * Feeds a whole trace to a new engine and finishes it (report.c); *rp is the
 * reader (sbt_close it). *bad_input: the trace is damaged, and the engine has
 * what came before the damage. NULL after one line on stderr.
 */
struct sbt_reader;
/* --lag SEC of report and compare into eo; -1 after one line on stderr */
int report_parse_lag(const char *cmd, const char *arg, struct engine_opts *eo);
struct engine *report_engine_of_file(const char *path, const struct engine_opts *opts,
				     struct sbt_reader **rp, bool *bad_input);

#endif
