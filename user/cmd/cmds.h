/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The subcommands; each parses its own arguments and returns the exit status. */
#ifndef STEPBLAME_CMDS_H
#define STEPBLAME_CMDS_H

int cmd_record(int argc, char **argv); /* collect.c */
int cmd_attach(int argc, char **argv); /* collect.c */
int cmd_dump(int argc, char **argv);   /* dump.c */
int cmd_report(int argc, char **argv); /* report.c */
int cmd_demo(int argc, char **argv);   /* demo.c */
int cmd_run(int argc, char **argv);    /* run.c */

#endif
