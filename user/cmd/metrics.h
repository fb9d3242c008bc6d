/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Prometheus metrics of a live capture (attach --metrics-addr): what the
 * finished steps said, summed, in the text exposition format, served over
 * HTTP by libmicrohttpd. schemas/metrics.md lists the metrics and labels.
 */
#ifndef STEPBLAME_METRICS_H
#define STEPBLAME_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "engine/engine.h"

#define METRICS_LABEL_MAX 64 /* as TARGET_ID_MAX (capture/target.h) */

/* the labels on every metric; "" leaves one out */
struct metrics_labels {
	char job[METRICS_LABEL_MAX + 1];
	char rank[METRICS_LABEL_MAX + 1];
	char local_rank[METRICS_LABEL_MAX + 1];
	char host[METRICS_LABEL_MAX + 1];
	bool from_env;           /* job, rank and local_rank all from the environment (no flag) */
};

/*
 * The labels the trainer's launcher set in its environment (RANK, LOCAL_RANK,
 * TORCHELASTIC_RUN_ID, SLURM_*, OMPI_*: /proc/PID/environ, as it was at exec),
 * for those not given (NULL), and the host name. The values are the target's:
 * kept to METRICS_LABEL_MAX characters of [A-Za-z0-9._:@/+-], others as '_'.
 */
void metrics_labels_fill(struct metrics_labels *lb, pid_t pid, const char *job, const char *rank,
			 const char *local_rank);

struct metrics;

/* the state alone (no server): for the tests and the static build */
struct metrics *metrics_new(const struct metrics_labels *lb, uint32_t target_pid,
			    const char *target_comm);
/* serve it at HOST:PORT ("127.0.0.1:9464", "[::1]:9464", "0.0.0.0:9464"); 0 or -errno */
int metrics_serve(struct metrics *m, const char *addr, char *err, size_t errlen);
void metrics_free(struct metrics *m);
/*
 * The thread that answers the scrapes (0: not known, or no server): an agent
 * that lowers its priority leaves this one as it was, so that a scrape is
 * answered in time on a busy machine
 */
pid_t metrics_server_tid(const struct metrics *m);

/* a finished step (attach's step callback); the capture's drops so far */
void metrics_step(struct metrics *m, const struct eng_step *s);
/*
 * The capture's ids as the engine has them (engine_identity): where the labels
 * came from the target's environment and it set none of them, and the steps
 * are a child's that has some (the target a launcher or a shell), those from
 * then on
 */
void metrics_identity(struct metrics *m, const struct eng_identity *id);
void metrics_drops(struct metrics *m, uint64_t total);

/* the exposition text as served; 0 or -errno */
int metrics_render(struct metrics *m, FILE *f);

#endif
