/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One capture: probes + GPU channel -> a sink (trace file or live engine).
 * `record`, `run` and `demo` capture into a trace file through
 * capture_to_file (capture_file.h); `attach` feeds the engine live.
 */
#ifndef STEPBLAME_COLLECT_H
#define STEPBLAME_COLLECT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/opts.h"
#include "capture/probes.h"
#include "format/trace.h"

/* a sink takes every record in drain order; non-zero stops the capture */
typedef int (*sink_fn)(void *ctx, const struct sb_hdr *rec);

struct collect_result;

struct collect_opts {
	struct probe_opts probe;
	int64_t duration_ns;         /* 0: until signal or target exit */
	/*
	 * An end on the agent's clock (mono_ns) whatever the attach took: a
	 * command that runs for a time (watch -d) ends then, where duration_ns
	 * counts from the end of the attach, which a starved machine can make
	 * last minutes. 0: none.
	 */
	uint64_t deadline_ns;
	int agent_cpu;               /* -1: choose; -2: do not pin */
	bool no_gpu;                 /* do not look for the GPU channel */
	bool gpu_expected;           /* the collector was injected: its channel appears at CUDA init */
	bool no_inject;              /* never load the collector into a running trainer (inject.h) */
	bool quiet;                  /* no progress lines on stderr */
	int zstd_level;              /* -z: the trace files written compressed at it; 0: plain */
	uint64_t tick_ns;            /* how often to poll/heartbeat (default 100 ms) */
	/*
	 * --max-overhead: the overhead guard's limit on the allocator probes'
	 * estimated cost, parts per million of the target's time (guard.h).
	 * 0: the guard only measures and never detaches them. The default
	 * (collect_opts_init) is 10000 (1%).
	 */
	uint64_t max_overhead_ppm;
	/*
	 * The most memory the records written while the probes attach may take
	 * before the capture reads the ring (collect.c, "early"); 0: 512 MiB.
	 * watch gives its --buffer-mb.
	 */
	uint64_t early_max_bytes;
	/*
	 * live: records are wanted soon after the fact (attach): the probes'
	 * held fault runs are written every tick, not every second
	 */
	bool live;
	/* called about once a second (attach's rolling summary); may be NULL */
	void (*on_second)(void *ctx, uint64_t now);
	void *on_second_ctx;     /* given to on_second, on_tick and on_gpu */
	/*
	 * called each tick once the ring is drained: every record of an event
	 * before drained_to has reached the sink; may be NULL
	 */
	void (*on_tick)(void *ctx, uint64_t drained_to);
	/* called when the GPU channel is read from now on, before its first record; may be NULL */
	void (*on_gpu)(void *ctx);
	/*
	 * called once the capture has ended well and its last records reached
	 * the sink, res filled in, before the probes are taken down (that can
	 * take seconds); may be NULL
	 */
	void (*on_end)(void *ctx, const struct collect_result *res);
	/* called once the probes are attached and the preamble is out; may be NULL */
	void (*on_ready)(void *ctx);
	void *on_ready_ctx;
};

struct collect_result {
	enum sbt_end end_reason;
	uint64_t start_ns, end_ns;
	uint64_t records;
	uint64_t drops_total;
	bool gpu;                    /* a GPU channel was read */
	int sink_error;              /* what the sink returned, if it stopped us */
};

extern volatile sig_atomic_t collect_stop;

/* the command line's defaults: 64 MiB ring, 256 KiB wakeups, 10 us allocator
 * threshold, --max-overhead 1%, agent CPU chosen */
void collect_opts_init(struct collect_opts *o);

/* the options record, attach and run share (base/opts.h); the help of record
 * lists the rows marked COLLECT_RECORD, attach's those marked COLLECT_ATTACH */
enum { COLLECT_RECORD = 1, COLLECT_ATTACH = 2, COLLECT_WATCH = 4 };
extern const struct opt collect_options[];

/*
 * The live commands' own options: attach's outputs (--json, --tail-only),
 * the Prometheus endpoint with its labels (attach and watch), and watch's
 * target, directory and flight recorder (watch set: the command is watch)
 */
struct live_args {
	const char *json;
	const char *html;            /* attach --html: the HTML report at the end */
	const char *metrics_addr;    /* HOST:PORT */
	const char *job, *rank, *local_rank; /* label values given; NULL: from the environment */
	bool tail_only;              /* step lines for tail steps only */
	bool lines;                  /* step lines on a terminal too, not the top view */
	bool watch;                  /* in: parsing watch's options */
	const char *name;            /* -n REGEX: the process whose command line matches */
	const char *cgroup;          /* --cgroup PATH: the oldest root process in it */
	const char *dir;             /* --dir: the step stream and the snippets */
	uint64_t around_ns;          /* --around: detail before and after a tail step */
	uint64_t buffer_bytes;       /* --buffer-mb: the flight recorder's memory */
	uint64_t max_snippets;       /* --max-snippets */
	uint64_t max_disk_bytes;     /* --max-disk-mb: snippets and the rotated stream */
	uint64_t rotate_bytes;       /* --rotate-mb: the step stream's file size */
	uint64_t idle_ppm;           /* --idle-pct: a step idler than this gets a snippet; 0 off */
	uint64_t tail_k_milli;       /* --tail-k, in thousandths */
};

/*
 * Parse the options record, attach and run share (collect_options) into o,
 * the defaults first; out and live take -o and attach's options where the
 * command has them (NULL: "not an option of this command"). Returns the index
 * of the first non-option, -2 for -h/--help (the help is the caller's), or -1
 * after printing a one-line error.
 */
int collect_parse_common(int argc, char **argv, struct collect_opts *o, const char **out,
			 struct live_args *live, const char *cmd);

/*
 * Check the target, load probes, pin, then drain into sink until -d expires,
 * SIGINT/SIGTERM, or the target exits. Host, target and thread records come
 * first; drops, stats and a final drops record along the way.
 * 0 on a capture that ran (see res->end_reason), or non-zero exit status after
 * printing one line.
 */
int collect_run(const struct collect_opts *o, sink_fn sink, void *ctx,
		struct collect_result *res);

/* install SIGINT/SIGTERM handlers that set collect_stop */
void collect_signals(void);

#endif
