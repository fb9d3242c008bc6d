// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The simulated GPU: one stream executing a bounded launch queue. Device times
 * are virtual: start = max(launch, end of the previous op), end = start +
 * duration. They are computed, never measured, so a busy host CPU cannot
 * stretch a kernel; the device thread only sleeps until each virtual end so
 * that whoever waits on the GPU really waits.
 *
 * It can only wake up late: a timer that fires late on a busy or virtualised
 * machine keeps the launcher waiting past a virtual end. That lateness is the
 * machine's, not an injection's, and goes into the ground truth (device_late).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "sim.h"

static struct {
	pthread_mutex_t mu;
	pthread_cond_t not_full, not_empty, done;
	struct op *q;
	unsigned cap, head, count;
	uint64_t issued, completed;
	uint64_t stream_end;
	uint64_t busy_ns;
	/* lateness: while the launcher waits (waiting_since != 0), the time past the
	 * virtual end it waits for before the device thread got to it, less its own
	 * run delay */
	uint64_t waiting_since, late_until, late_ns;
	bool quit;
	pthread_t thr;
	bool started;
} dev = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void emit_op(const struct op *op, uint64_t start, uint64_t end)
{
	struct sb_gpu g = {
		.h.ts = start,
		.end_ns = end,
		.correlation_id = op->corr,
		.device = SIM_DEVICE,
		.stream = SIM_STREAM,
		.name_id = op->name_id,
	};

	if (op->kind == OP_KERNEL) {
		g.h.flags = SB_GPU_KERNEL;
		memcpy(g.grid, op->grid, sizeof(g.grid));
		memcpy(g.block, op->block, sizeof(g.block));
	} else {
		g.h.flags = SB_GPU_MEMCPY;
		g.sub = SB_COPY_HTOD;
		g.bytes = op->bytes;
	}
	sim_emit(&g);
}

static void *device_main(void *arg)
{
	prctl(PR_SET_NAME, "gpu-sim");
	truth_watch_thread();
	pthread_mutex_lock(&dev.mu);
	for (;;) {
		while (!dev.count && !dev.quit)
			pthread_cond_wait(&dev.not_empty, &dev.mu);
		if (dev.quit)
			break;
		struct op op = dev.q[dev.head];
		uint64_t start = op.launch_ns > dev.stream_end ? op.launch_ns : dev.stream_end;
		uint64_t end = start + op.dur_ns;

		dev.stream_end = end;
		pthread_mutex_unlock(&dev.mu);
		uint64_t rd0 = 0, rd1 = 0;
		bool rd = truth_self_run_delay(&rd0);

		sleep_until(end);
		uint64_t woke = now_ns();

		emit_op(&op, start, end);
		pthread_mutex_lock(&dev.mu);
		/* only the completion the launcher waits for: the last one of a sync,
		 * the one that frees the slot of a launch */
		bool awaited = dev.completed + 1 == dev.issued || dev.count == dev.cap;

		if (dev.waiting_since && rd && awaited) {
			uint64_t from = end;

			if (from < dev.waiting_since)
				from = dev.waiting_since;
			if (from < dev.late_until)
				from = dev.late_until;
			/* time runnable after the timer fired is CPU contention, whoever
			 * caused it: not counted as lateness */
			if (woke > from && truth_self_run_delay(&rd1) && woke - from > rd1 - rd0)
				dev.late_ns += woke - from - (rd1 - rd0);
			if (woke > dev.late_until)
				dev.late_until = woke;
		}
		dev.head = (dev.head + 1) % dev.cap;
		dev.count--;
		dev.completed++;
		dev.busy_ns += op.dur_ns;
		pthread_cond_signal(&dev.not_full);
		if (dev.completed == dev.issued)
			pthread_cond_broadcast(&dev.done);
	}
	pthread_mutex_unlock(&dev.mu);
	return NULL;
}

int device_start(unsigned depth)
{
	int err;

	dev.cap = depth ? depth : 1;
	dev.q = calloc(dev.cap, sizeof(*dev.q));
	if (!dev.q)
		return -ENOMEM;
	pthread_cond_init(&dev.not_full, NULL);
	pthread_cond_init(&dev.not_empty, NULL);
	pthread_cond_init(&dev.done, NULL);
	err = pthread_create(&dev.thr, NULL, device_main, NULL);
	if (err)
		return -err;
	dev.started = true;
	return 0;
}

uint64_t device_launch(struct op *op)
{
	uint64_t t;

	pthread_mutex_lock(&dev.mu);
	if (dev.count == dev.cap)
		dev.waiting_since = now_ns();
	while (dev.count == dev.cap && !dev.quit && !stopping())
		pthread_cond_wait(&dev.not_full, &dev.mu);
	dev.waiting_since = 0;
	if (dev.quit || stopping()) {
		pthread_mutex_unlock(&dev.mu);
		return 0;
	}
	t = now_ns();
	op->launch_ns = t;
	dev.q[(dev.head + dev.count) % dev.cap] = *op;
	dev.count++;
	dev.issued++;
	pthread_cond_signal(&dev.not_empty);
	pthread_mutex_unlock(&dev.mu);
	return t;
}

bool device_sync(void)
{
	bool ok;

	pthread_mutex_lock(&dev.mu);
	if (dev.completed != dev.issued)
		dev.waiting_since = now_ns();
	while (dev.completed != dev.issued && !dev.quit && !stopping())
		pthread_cond_wait(&dev.done, &dev.mu);
	dev.waiting_since = 0;
	ok = dev.completed == dev.issued;
	pthread_mutex_unlock(&dev.mu);
	return ok;
}

void device_wake(void)
{
	pthread_mutex_lock(&dev.mu);
	pthread_cond_broadcast(&dev.not_full);
	pthread_cond_broadcast(&dev.done);
	pthread_mutex_unlock(&dev.mu);
}

void device_join(void)
{
	if (!dev.started)
		return;
	pthread_mutex_lock(&dev.mu);
	dev.quit = true;
	pthread_cond_broadcast(&dev.not_empty);
	pthread_cond_broadcast(&dev.not_full);
	pthread_cond_broadcast(&dev.done);
	pthread_mutex_unlock(&dev.mu);
	pthread_join(dev.thr, NULL);
	dev.started = false;
	free(dev.q);
	dev.q = NULL;
}

uint64_t device_late(void)
{
	uint64_t ns;

	pthread_mutex_lock(&dev.mu);
	ns = dev.late_ns;
	pthread_mutex_unlock(&dev.mu);
	return ns;
}

void device_stats(uint64_t *busy_ns, uint64_t *ops)
{
	pthread_mutex_lock(&dev.mu);
	*busy_ns = dev.busy_ns;
	*ops = dev.completed;
	pthread_mutex_unlock(&dev.mu);
}
