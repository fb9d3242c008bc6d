// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "cmd/cmds.h"

static const char usage[] =
"usage: stepblame COMMAND [ARGS]\n"
"\n"
"Per-step blame for training jobs: how long each step took, how long the GPU sat\n"
"idle, and which host events (preemption, faults, reclaim, allocator, I/O, waits)\n"
"caused it.\n"
"\n"
"  record -p PID [-d SEC] -o FILE        capture to a trace file\n"
"  report FILE [--format text|json|jsonl|perfetto|html] [-o OUT]\n"
"                                        per-step blame from a trace file\n"
"  compare BASE NEW [--fail-over PCT]   what got slower between two runs, and why\n"
"  attach -p PID [-d SEC] [--jsonl OUT]  live: a line per step, then the report\n"
"  watch (-p PID|-n REGEX|--cgroup PATH) [--dir DIR]\n"
"                                        always on: a step stream, and the detail\n"
"                                        around slow steps kept as trace files\n"
"  run [opts] -- CMD [ARGS...]           launch CMD with the GPU collector injected, trace it\n"
"  demo [--scenario NAME]                simulated trainer + injected interference + report\n"
"  dump FILE [--format text|jsonl]       raw records, for inspection\n"
"  help [COMMAND]                        this, or a command's own help\n"
"  -V, --version                         the version\n"
"\n"
"`stepblame help COMMAND` (or `stepblame COMMAND --help`) tells more. Tracing needs\n"
"root or CAP_BPF + CAP_PERFMON.\n";

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{ "record", cmd_record },
		{ "attach", cmd_attach },
		{ "watch", cmd_watch },
		{ "report", cmd_report },
		{ "compare", cmd_compare },
		{ "dump", cmd_dump },
		{ "demo", cmd_demo },
		{ "run", cmd_run },
	};

	if (argc < 2) {
		fputs(usage, stderr);
		return 2;
	}
	if (!strcmp(argv[1], "help") && argc > 2) {
		/* help COMMAND: the command's own --help */
		for (size_t i = 0; i < ARRAY_SIZE(cmds); i++)
			if (!strcmp(argv[2], cmds[i].name)) {
				char *hargv[] = { argv[2], "--help", NULL };

				return cmds[i].fn(2, hargv);
			}
		fprintf(stderr, "stepblame: no command '%s' to help with (see stepblame --help)\n",
			argv[2]);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		fputs(usage, stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version")) {
		printf("stepblame %s\n", STEPBLAME_VERSION);
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(cmds); i++)
		if (!strcmp(argv[1], cmds[i].name)) {
			/*
			 * A locale that cannot show UTF-8 (LANG=C, POSIX): what the
			 * commands print spelled in ASCII (µs as us)
			 */
			FILE *orig = stdout, *ascii = sb_locale_utf8() ? NULL : sb_ascii_stream(stdout);
			int rc;

			if (ascii)
				stdout = ascii;
			rc = cmds[i].fn(argc - 1, argv + 1);
			if (ascii) {
				fclose(ascii);
				stdout = orig;
			}
			return rc;
		}
	fprintf(stderr, "stepblame: unknown command '%s' (see stepblame --help)\n", argv[1]);
	return 2;
}
