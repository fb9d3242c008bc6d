// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Data loaders: N threads that each make a batch (CPU work, optional file
 * read) and put it in a bounded queue the launcher takes from. The launcher
 * sleeps on a condition variable when the queue is empty and is woken by the
 * loader that fills it, as in a PyTorch DataLoader.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim.h"

static struct {
	pthread_mutex_t mu;
	pthread_cond_t not_empty, not_full, stall;
	pid_t *maker;           /* ring of the tid that made each queued batch */
	unsigned cap, head, count;
	uint64_t stall_until;
	bool quit;
	pthread_t *thr;
	unsigned nthr;
} bq = { .mu = PTHREAD_MUTEX_INITIALIZER };

struct loader_arg {
	unsigned idx;
};

static void read_some(int fd, char *buf, uint64_t want, off_t *off, off_t size)
{
	while (want && !stopping()) {
		size_t chunk = want > (1u << 20) ? (1u << 20) : want;
		ssize_t n;

		if (*off >= size)
			*off = 0;
		n = pread(fd, buf, chunk, *off);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			if (*off == 0)
				return; /* empty file */
			*off = 0;
			continue;
		}
		*off += n;
		want -= (uint64_t)n;
	}
}

static void *loader_main(void *argp)
{
	struct loader_arg *arg = argp;
	char name[16];
	char *buf = NULL;
	int fd = -1;
	off_t off = 0, size = 0;
	pid_t me = sim_gettid();

	snprintf(name, sizeof(name), "loader-%u", arg->idx);
	prctl(PR_SET_NAME, name);
	truth_watch_thread();
	if (opt.loader_read) {
		struct stat st;

		fd = open(opt.loader_read, O_RDONLY | O_CLOEXEC);
		buf = malloc(1u << 20);
		if (fd < 0 || !buf || fstat(fd, &st)) {
			sim_log("loader-%u: cannot read %s; loading without it", arg->idx,
				opt.loader_read);
			if (fd >= 0)
				close(fd);
			fd = -1;
		} else {
			size = st.st_size;
			off = (off_t)(((uint64_t)arg->idx * opt.loader_read_bytes) % (uint64_t)(size ? size : 1));
		}
	}
	while (!stopping()) {
		spin_ns(opt.loader_ns);
		if (fd >= 0)
			read_some(fd, buf, opt.loader_read_bytes, &off, size);

		pthread_mutex_lock(&bq.mu);
		/* a stall holds finished batches back: the queue runs dry */
		while (!bq.quit && !stopping()) {
			if (now_ns() < bq.stall_until)
				sim_cond_wait_until(&bq.stall, &bq.mu, bq.stall_until);
			else if (bq.count == bq.cap)
				pthread_cond_wait(&bq.not_full, &bq.mu);
			else
				break;
		}
		if (bq.quit || stopping()) {
			pthread_mutex_unlock(&bq.mu);
			break;
		}
		bq.maker[(bq.head + bq.count) % bq.cap] = me;
		bq.count++;
		pthread_cond_signal(&bq.not_empty);
		pthread_mutex_unlock(&bq.mu);
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	free(arg);
	return NULL;
}

int loaders_start(void)
{
	int err;

	bq.cap = opt.prefetch ? opt.prefetch : 1;
	bq.maker = calloc(bq.cap, sizeof(*bq.maker));
	bq.thr = calloc(opt.loaders ? opt.loaders : 1, sizeof(*bq.thr));
	if (!bq.maker || !bq.thr)
		return -ENOMEM;
	pthread_cond_init(&bq.not_empty, NULL);
	pthread_cond_init(&bq.not_full, NULL);
	sim_cond_init(&bq.stall);
	for (unsigned i = 0; i < opt.loaders; i++) {
		struct loader_arg *a = malloc(sizeof(*a));

		if (!a)
			return -ENOMEM;
		a->idx = i;
		err = pthread_create(&bq.thr[i], NULL, loader_main, a);
		if (err) {
			free(a);
			return -err;
		}
		bq.nthr++;
	}
	return 0;
}

bool batch_take(pid_t *tid)
{
	pthread_mutex_lock(&bq.mu);
	while (!bq.count && !bq.quit && !stopping())
		pthread_cond_wait(&bq.not_empty, &bq.mu);
	if (!bq.count) {
		pthread_mutex_unlock(&bq.mu);
		return false;
	}
	*tid = bq.maker[bq.head];
	bq.head = (bq.head + 1) % bq.cap;
	bq.count--;
	pthread_cond_signal(&bq.not_full);
	pthread_mutex_unlock(&bq.mu);
	return true;
}

void loaders_stall(uint64_t ns)
{
	pthread_mutex_lock(&bq.mu);
	bq.stall_until = now_ns() + ns;
	bq.count = 0;
	pthread_cond_broadcast(&bq.not_full);
	pthread_mutex_unlock(&bq.mu);
}

void loaders_wake(void)
{
	pthread_mutex_lock(&bq.mu);
	pthread_cond_broadcast(&bq.not_empty);
	pthread_cond_broadcast(&bq.not_full);
	pthread_cond_broadcast(&bq.stall);
	pthread_mutex_unlock(&bq.mu);
}

void loaders_join(void)
{
	pthread_mutex_lock(&bq.mu);
	bq.quit = true;
	pthread_mutex_unlock(&bq.mu);
	loaders_wake();
	for (unsigned i = 0; i < bq.nthr; i++)
		pthread_join(bq.thr[i], NULL);
	bq.nthr = 0;
	free(bq.thr);
	free(bq.maker);
	bq.thr = NULL;
	bq.maker = NULL;
}
