/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * For BPF tests: run collect_run() on a thread, keep a copy of every record,
 * and wake the test once the probes are attached (or the capture failed).
 *
 *   c->o = ...; cap_start(c, &t); ...let the target go...; pthread_join(t, NULL);
 */
#ifndef STEPBLAME_TESTS_CAPTURE_H
#define STEPBLAME_TESTS_CAPTURE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capture/collect.h"

struct cap {
	struct collect_opts o;
	struct collect_result res;
	int rc;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool ready;
	struct sb_hdr **recs;
	size_t n, cap;
	char out[4096]; /* what the target printed, for tests that keep it */
};

static int mem_sink(void *ctx, const struct sb_hdr *r)
{
	struct cap *c = ctx;

	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 65536;
		c->recs = realloc(c->recs, c->cap * sizeof(*c->recs));
		if (!c->recs)
			abort();
	}
	c->recs[c->n] = malloc(r->size);
	if (!c->recs[c->n])
		abort();
	memcpy(c->recs[c->n], r, r->size);
	c->n++;
	return 0;
}

static void on_ready(void *ctx)
{
	struct cap *c = ctx;

	pthread_mutex_lock(&c->mu);
	c->ready = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

static void *cap_thread(void *arg)
{
	struct cap *c = arg;

	c->rc = collect_run(&c->o, mem_sink, c, &c->res);
	on_ready(c); /* also wakes the waiter when the capture failed to start */
	return NULL;
}

/* run the capture on *t and return once its probes are attached (or it failed) */
static void cap_start(struct cap *c, pthread_t *t)
{
	c->o.on_ready = on_ready;
	c->o.on_ready_ctx = c;
	collect_stop = 0;
	pthread_create(t, NULL, cap_thread, c);
	pthread_mutex_lock(&c->mu);
	while (!c->ready)
		pthread_cond_wait(&c->cv, &c->mu);
	pthread_mutex_unlock(&c->mu);
}

/* a test program of the build: $BUILD/tests/progs/NAME (BUILD defaults to build) */
static inline const char *prog_path(const char *name)
{
	static char path[512];
	const char *b = getenv("BUILD");

	snprintf(path, sizeof(path), "%s/tests/progs/%s", b ? b : "build", name);
	return path;
}

/* start sbwork with args (at most 30); it waits for a byte on *go_fd */
static inline pid_t spawn_work(char *const args[], int *go_fd)
{
	int p[2];
	pid_t pid;

	*go_fd = -1;
	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		char *argv[32] = { (char *)prog_path("sbwork") };
		int i;

		for (i = 0; args[i] && i < 30; i++)
			argv[i + 1] = args[i];
		argv[i + 1] = NULL;
		dup2(p[0], 0);
		close(p[0]);
		close(p[1]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[0]);
	if (pid < 0)
		close(p[1]);
	else
		*go_fd = p[1];
	return pid;
}

/*
 * Capture sbwork ARGS with the options already in c->o plus the tests' own
 * (16 MiB ring, 30 s at most, agent unpinned, quiet, no GPU channel): start
 * it, attach, let it go, wait for it and for the capture. 0, or -1 if sbwork
 * cannot run. *child (if given) gets its pid.
 */
static inline int cap_run_sbwork(struct cap *c, char *const args[], pid_t *child)
{
	pthread_t t;
	int go, status;
	pid_t pid;

	if (access(prog_path("sbwork"), X_OK))
		return -1;
	pid = spawn_work(args, &go);
	if (pid < 0)
		return -1;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->o.probe.pid = pid;
	c->o.probe.ring_bytes = 16 << 20;
	c->o.probe.wake_bytes = 64 << 10;
	c->o.duration_ns = 30000000000ll;
	c->o.agent_cpu = -2;
	c->o.quiet = true;
	c->o.no_gpu = true;
	cap_start(c, &t);
	if (child)
		*child = pid;
	if (write(go, "g", 1) != 1)
		kill(pid, SIGKILL);
	close(go);
	waitpid(pid, &status, 0);
	pthread_join(t, NULL);
	return 0;
}

/* the tid of the thread the capture saw renamed to name; 0 if none */
static inline uint32_t tid_named(struct cap *c, const char *name)
{
	for (size_t i = 0; i < c->n; i++) {
		const struct sb_rename *r = (const void *)c->recs[i];

		if (r->h.type == SB_EV_RENAME && !strcmp(r->newcomm, name))
			return r->h.tid;
	}
	return 0;
}

static void free_cap(struct cap *c)
{
	for (size_t i = 0; c && i < c->n; i++)
		free(c->recs[i]);
	if (c)
		free(c->recs);
	free(c);
}

#endif
