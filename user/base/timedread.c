/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#include "base/timedread.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/util.h"

struct treq {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int refs;         /* the caller's and the reader's */
	bool done;
	bool abandoned;   /* the caller gave up on it: it counts in stuck until it returns */
	ssize_t ret;
	size_t len;
	char path[4096];
	char buf[];       /* len bytes */
};

/* readers abandoned and still blocked: the threads left behind */
static atomic_int stuck;

static void treq_put(struct treq *r)
{
	bool last;

	pthread_mutex_lock(&r->mu);
	last = --r->refs == 0;
	pthread_mutex_unlock(&r->mu);
	if (last) {
		pthread_cond_destroy(&r->cv);
		pthread_mutex_destroy(&r->mu);
		free(r);
	}
}

static void *reader(void *arg)
{
	struct treq *r = arg;
	ssize_t n = read_small_file(r->path, r->buf, r->len);

	pthread_mutex_lock(&r->mu);
	r->ret = n;
	r->done = true;
	if (r->abandoned)
		atomic_fetch_sub(&stuck, 1);
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
	treq_put(r);
	return NULL;
}

bool timed_read_stalled(void)
{
	return atomic_load(&stuck) >= TIMED_READ_STUCK_MAX;
}

ssize_t read_small_file_timed(const char *path, char *buf, size_t len, unsigned timeout_ms)
{
	struct treq *r;
	pthread_attr_t attr;
	pthread_t th;
	struct timespec dl;
	ssize_t ret;
	int err = 0;

	if (!len)
		return -EINVAL;
	if (atomic_load(&stuck) >= TIMED_READ_STUCK_MAX)
		return -EDEADLK;
	if (strlen(path) >= sizeof(r->path))
		return -ENAMETOOLONG;
	r = calloc(1, sizeof(*r) + len);
	if (!r)
		return -ENOMEM;
	pthread_mutex_init(&r->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cv, &ca);
	pthread_condattr_destroy(&ca);
	r->refs = 2;
	r->len = len;
	strcpy(r->path, path);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 << 10);
	if (pthread_create(&th, &attr, reader, r) != 0) {
		pthread_attr_destroy(&attr);
		r->refs = 1;
		treq_put(r);
		return -EAGAIN;
	}
	pthread_attr_destroy(&attr);
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&r->mu);
	while (!r->done && err != ETIMEDOUT)
		err = pthread_cond_timedwait(&r->cv, &r->mu, &dl);
	if (r->done) {
		ret = r->ret;
		if (ret >= 0)
			memcpy(buf, r->buf, (size_t)ret + 1);
	} else {
		/* the reader stays blocked; it frees the request if it ever returns */
		r->abandoned = true;
		atomic_fetch_add(&stuck, 1);
		ret = -ETIMEDOUT;
	}
	pthread_mutex_unlock(&r->mu);
	treq_put(r);
	return ret;
}
