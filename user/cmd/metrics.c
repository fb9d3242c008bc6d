// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Prometheus metrics of a live capture: counters and a histogram summed over
 * the finished steps, rendered in the text exposition format on each scrape
 * (schemas/metrics.md). The HTTP server is libmicrohttpd's, on a thread of its
 * own; it answers GET /metrics and nothing else, and reads no request body.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef STEPBLAME_NO_METRICS_SERVER
#include <microhttpd.h>
#endif

#include "capture/target.h"
#include "cmd/metrics.h"
#include "base/util.h"

/* step time buckets, seconds: 1 ms to 30 s */
static const double bucket_s[] = { 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
				   0.2,   0.5,   1,     2,    5,    10,   30 };
#define NBUCKET ((int)ARRAY_SIZE(bucket_s))
/*
 * Interferers by name: a bounded label set, the rest summed as "other"; the
 * trainer's own threads apart (own="true"), in a smaller table, so that
 * names it gives them neither pass for other programs nor crowd them out
 */
#define ITF_MAX 10
#define ITF_OWN_MAX 4

struct itf_table {
	struct {
		char comm[SB_COMM_LEN + 1];
		uint64_t ns;
	} v[ITF_MAX];
	uint64_t other_ns;
};

struct metrics {
	pthread_mutex_t mu;
	pid_t server_tid;                /* the server's thread (metrics_server_tid), 0 not known */
	struct metrics_labels lb;
	char lbtext[512];                /* job="..",rank=".." as rendered */
	uint32_t target_pid;
	char target_comm[SB_COMM_LEN + 1];
	uint64_t steps, tail, incomplete;
	uint64_t bucket[NBUCKET];        /* steps of at most bucket_s[i] (not cumulative) */
	uint64_t dur_ns, idle_ns, tracer_ns;
	bool timeline;                   /* a step had a GPU timeline */
	uint64_t cause_ns[ENG_NCAUSE];
	struct itf_table itf, itf_own;
	uint64_t drops;
#ifndef STEPBLAME_NO_METRICS_SERVER
	struct MHD_Daemon *daemon;
#endif
};

/* ---- labels ---- */

void metrics_labels_fill(struct metrics_labels *lb, pid_t pid, const char *job, const char *rank,
			 const char *local_rank)
{
	struct target_ids ids;
	char h[256] = "";

	memset(lb, 0, sizeof(*lb));
	target_env_ids(pid, &ids);
	if (job)
		target_id_tame(lb->job, job, strlen(job));
	else
		memcpy(lb->job, ids.job, sizeof(lb->job));
	if (rank)
		target_id_tame(lb->rank, rank, strlen(rank));
	else
		memcpy(lb->rank, ids.rank, sizeof(lb->rank));
	if (local_rank)
		target_id_tame(lb->local_rank, local_rank, strlen(local_rank));
	else
		memcpy(lb->local_rank, ids.local_rank, sizeof(lb->local_rank));
	gethostname(h, sizeof(h) - 1);
	target_id_tame(lb->host, h, sizeof(h));
	lb->from_env = !job && !rank && !local_rank;
}

/* a label value in the exposition format: \\ \" \n escaped, controls as '?' */
static void label_value(FILE *f, const char *s, size_t n)
{
	for (size_t i = 0; i < n && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '\\' || c == '"')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c < 0x20 || c >= 0x7f)
			fputc('?', f); /* comms are not always UTF-8 */
		else
			fputc(c, f);
	}
}

/* the labels, and their text as every metric carries it */
static void set_labels(struct metrics *m, const struct metrics_labels *lb)
{
	const struct { const char *k, *v; } l[] = {
		{ "job", lb->job }, { "rank", lb->rank }, { "local_rank", lb->local_rank },
		{ "host", lb->host },
	};
	bool first = true;
	FILE *f;

	m->lb = *lb;
	m->lbtext[0] = 0;
	f = fmemopen(m->lbtext, sizeof(m->lbtext), "w");
	if (!f)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(l); i++) {
		if (!l[i].v[0])
			continue;
		fprintf(f, "%s%s=\"", first ? "" : ",", l[i].k);
		label_value(f, l[i].v, METRICS_LABEL_MAX);
		fputc('"', f);
		first = false;
	}
	fclose(f);
}

struct metrics *metrics_new(const struct metrics_labels *lb, uint32_t target_pid,
			    const char *target_comm)
{
	struct metrics *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	pthread_mutex_init(&m->mu, NULL);
	m->target_pid = target_pid;
	snprintf(m->target_comm, sizeof(m->target_comm), "%s", target_comm ? target_comm : "");
	set_labels(m, lb);
	return m;
}

void metrics_identity(struct metrics *m, const struct eng_identity *id)
{
	struct metrics_labels lb;

	if (!m || !m->lb.from_env || m->lb.job[0] || m->lb.rank[0] || m->lb.local_rank[0] ||
	    (!id->job[0] && !id->rank[0] && !id->local_rank[0]))
		return;
	lb = m->lb;
	snprintf(lb.job, sizeof(lb.job), "%s", id->job);
	snprintf(lb.rank, sizeof(lb.rank), "%s", id->rank);
	snprintf(lb.local_rank, sizeof(lb.local_rank), "%s", id->local_rank);
	pthread_mutex_lock(&m->mu);
	set_labels(m, &lb);
	pthread_mutex_unlock(&m->mu);
}

/* ---- what the steps said ---- */

static void add_interferer(struct itf_table *t, int max, const char *comm, uint64_t ns)
{
	int free_at = -1;

	for (int i = 0; i < max; i++) {
		if (!t->v[i].comm[0]) {
			if (free_at < 0)
				free_at = i;
			continue;
		}
		if (!strncmp(t->v[i].comm, comm, SB_COMM_LEN)) {
			t->v[i].ns += ns;
			return;
		}
	}
	if (free_at < 0) {
		/* a full table: the first names seen keep their series (stable labels) */
		t->other_ns += ns;
		return;
	}
	snprintf(t->v[free_at].comm, sizeof(t->v[free_at].comm), "%.*s", SB_COMM_LEN,
		 comm[0] ? comm : "?");
	t->v[free_at].ns = ns;
}

void metrics_step(struct metrics *m, const struct eng_step *s)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	if (s->incomplete) {
		m->incomplete++;
		pthread_mutex_unlock(&m->mu);
		return;
	}
	m->steps++;
	m->tail += s->tail;
	m->dur_ns += s->duration_ns;
	m->tracer_ns += s->tracer_ns;
	if (s->gpu_timeline) {
		m->timeline = true;
		m->idle_ns += s->gpu_idle_ns;
	}
	for (int i = 0; i < NBUCKET; i++)
		if (s->duration_ns <= (uint64_t)(bucket_s[i] * 1e9)) {
			m->bucket[i]++;
			break;
		}
	for (int c = 0; c < ENG_NCAUSE; c++)
		m->cause_ns[c] += s->cause_ns[c];
	/* who took the critical threads' CPU: cpu_wait behind another task */
	for (uint32_t i = 0; i < s->nblame; i++) {
		const struct eng_blame *b = &s->blame[i];

		if (b->cause != ENG_CPU_WAIT || !b->has_who)
			continue;
		if (m->target_pid && b->who.pid == m->target_pid)
			add_interferer(&m->itf_own, ITF_OWN_MAX, b->who.comm, b->ns);
		else
			add_interferer(&m->itf, ITF_MAX, b->who.comm, b->ns);
	}
	pthread_mutex_unlock(&m->mu);
}

void metrics_drops(struct metrics *m, uint64_t total)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	m->drops = total;
	pthread_mutex_unlock(&m->mu);
}

/* ---- the exposition ---- */

static void head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{labels[,extra]} value */
static void sample(FILE *f, const struct metrics *m, const char *name, const char *extra,
		   double v)
{
	bool any = m->lbtext[0] || (extra && extra[0]);

	fprintf(f, "%s%s%s%s%s%s %.9g\n", name, any ? "{" : "", m->lbtext,
		m->lbtext[0] && extra && extra[0] ? "," : "", extra ? extra : "", any ? "}" : "", v);
}

int metrics_render(struct metrics *m, FILE *f)
{
	char extra[128];
	uint64_t cum = 0;

	pthread_mutex_lock(&m->mu);
	head(f, "stepblame_steps_total", "counter", "Training steps finished since the capture began.");
	sample(f, m, "stepblame_steps_total", NULL, (double)m->steps);
	head(f, "stepblame_step_duration_seconds", "histogram", "Step time, mark to mark.");
	for (int i = 0; i < NBUCKET; i++) {
		cum += m->bucket[i];
		snprintf(extra, sizeof(extra), "le=\"%g\"", bucket_s[i]);
		sample(f, m, "stepblame_step_duration_seconds_bucket", extra, (double)cum);
	}
	sample(f, m, "stepblame_step_duration_seconds_bucket", "le=\"+Inf\"", (double)m->steps);
	sample(f, m, "stepblame_step_duration_seconds_sum", NULL, m->dur_ns / 1e9);
	sample(f, m, "stepblame_step_duration_seconds_count", NULL, (double)m->steps);
	head(f, "stepblame_tail_steps_total", "counter",
	     "Steps longer than the median + 3 MAD of the steps before them.");
	sample(f, m, "stepblame_tail_steps_total", NULL, (double)m->tail);
	head(f, "stepblame_gpu_idle_seconds_total", "counter",
	     "GPU idle time inside steps (steps with a GPU timeline; host-only: 0).");
	sample(f, m, "stepblame_gpu_idle_seconds_total", NULL, m->idle_ns / 1e9);
	head(f, "stepblame_blame_seconds_total", "counter",
	     "GPU idle time (host-only: step time) blamed on each cause (schemas/report.md).");
	for (int c = 0; c < ENG_NCAUSE; c++) {
		snprintf(extra, sizeof(extra), "cause=\"%s\"", eng_cause_name(c));
		sample(f, m, "stepblame_blame_seconds_total", extra, m->cause_ns[c] / 1e9);
	}
	head(f, "stepblame_interferer_seconds_total", "counter",
	     "cpu_wait time behind each task, by name (the first ten names; the rest as other); "
	     "own=\"true\": the trainer's own threads.");
	for (int own = 0; own < 2; own++) {
		const struct itf_table *t = own ? &m->itf_own : &m->itf;
		int max = own ? ITF_OWN_MAX : ITF_MAX;

		for (int i = 0; i < max && t->v[i].comm[0]; i++) {
			FILE *e = fmemopen(extra, sizeof(extra), "w");

			if (!e)
				continue;
			fputs("comm=\"", e);
			label_value(e, t->v[i].comm, SB_COMM_LEN);
			fprintf(e, "\",own=\"%s\"", own ? "true" : "false");
			fclose(e);
			sample(f, m, "stepblame_interferer_seconds_total", extra, t->v[i].ns / 1e9);
		}
		if (t->other_ns) {
			snprintf(extra, sizeof(extra), "comm=\"other\",own=\"%s\"",
				 own ? "true" : "false");
			sample(f, m, "stepblame_interferer_seconds_total", extra, t->other_ns / 1e9);
		}
	}
	head(f, "stepblame_tracer_seconds_total", "counter",
	     "The tracer's own estimated cost inside the steps.");
	sample(f, m, "stepblame_tracer_seconds_total", NULL, m->tracer_ns / 1e9);
	head(f, "stepblame_dropped_events_total", "counter",
	     "Events the capture could not keep (ring buffer, GPU channel).");
	sample(f, m, "stepblame_dropped_events_total", NULL, (double)m->drops);
	head(f, "stepblame_target_info", "gauge", "The traced process: its pid and name.");
	{
		FILE *e = fmemopen(extra, sizeof(extra), "w");

		if (e) {
			fprintf(e, "target_pid=\"%" PRIu32 "\",target_comm=\"", m->target_pid);
			label_value(e, m->target_comm, SB_COMM_LEN);
			fputc('"', e);
			fclose(e);
			sample(f, m, "stepblame_target_info", extra, 1);
		}
	}
	pthread_mutex_unlock(&m->mu);
	return ferror(f) ? -EIO : 0;
}

/* ---- the server ---- */

#ifndef STEPBLAME_NO_METRICS_SERVER
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_size, void **con_cls)
{
	struct metrics *m = cls;
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *buf = NULL;
	size_t len = 0;
	unsigned status = MHD_HTTP_OK;
	FILE *f;

	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		static const char no[] = "only GET /metrics\n";

		r = MHD_create_response_from_buffer(sizeof(no) - 1, (void *)no, MHD_RESPMEM_PERSISTENT);
		status = MHD_HTTP_METHOD_NOT_ALLOWED;
	} else if (strcmp(url, "/metrics")) {
		static const char nf[] = "stepblame: the metrics are at /metrics\n";

		r = MHD_create_response_from_buffer(sizeof(nf) - 1, (void *)nf, MHD_RESPMEM_PERSISTENT);
		status = MHD_HTTP_NOT_FOUND;
	} else {
		f = open_memstream(&buf, &len);
		if (!f)
			return MHD_NO;
		metrics_render(m, f);
		if (fclose(f)) {
			free(buf);
			return MHD_NO;
		}
		r = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
		if (r)
			MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
						"text/plain; version=0.0.4; charset=utf-8");
	}
	if (!r)
		return MHD_NO;
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

#define TIDS_SEEN_MAX 64

struct tids_seen {
	pid_t tid[TIDS_SEEN_MAX];
	int n;
	pid_t fresh;             /* the second pass: a thread not in tid[] */
	bool second;
};

static int tid_seen(void *ctx, pid_t tid)
{
	struct tids_seen *t = ctx;
	int i;

	if (!t->second) {
		if (t->n < TIDS_SEEN_MAX)
			t->tid[t->n++] = tid;
		return 0;
	}
	for (i = 0; i < t->n && t->tid[i] != tid; i++)
		;
	if (i == t->n && !t->fresh)
		t->fresh = tid;
	return 0;
}

int metrics_serve(struct metrics *m, const char *addr, char *err, size_t errlen)
{
	struct tids_seen seen = { .n = 0 };
	char host[256], port[16];
	const char *colon = strrchr(addr, ':');
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai = NULL;
	size_t hl;
	int rc;

	if (!colon || colon == addr || !colon[1] || strlen(colon + 1) >= sizeof(port)) {
		snprintf(err, errlen, "--metrics-addr wants HOST:PORT (127.0.0.1:9464), not '%s'", addr);
		return -EINVAL;
	}
	hl = (size_t)(colon - addr);
	if (addr[0] == '[' && hl >= 2 && addr[hl - 1] == ']') { /* [::1]:9464 */
		addr++;
		hl -= 2;
	}
	if (hl >= sizeof(host)) {
		snprintf(err, errlen, "--metrics-addr: host name too long");
		return -EINVAL;
	}
	memcpy(host, addr, hl);
	host[hl] = 0;
	snprintf(port, sizeof(port), "%s", colon + 1);
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc || !ai) {
		snprintf(err, errlen, "--metrics-addr %s: %s", addr, rc ? gai_strerror(rc) : "no address");
		return -EINVAL;
	}
	/* the agent's threads before the server's: the one more after is its (metrics_server_tid) */
	target_threads(getpid(), tid_seen, &seen);
	m->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
				     (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0),
				     0, NULL, NULL, on_request, m,
				     MHD_OPTION_SOCK_ADDR, ai->ai_addr,
				     MHD_OPTION_CONNECTION_LIMIT, 16u,
				     MHD_OPTION_PER_IP_CONNECTION_LIMIT, 8u,
				     MHD_OPTION_CONNECTION_TIMEOUT, 10u,
				     MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!m->daemon) {
		snprintf(err, errlen, "cannot serve metrics at %s (address in use, or not this host's?)",
			 addr);
		return -EADDRNOTAVAIL;
	}
	seen.second = true;
	if (seen.n < TIDS_SEEN_MAX)
		target_threads(getpid(), tid_seen, &seen);
	m->server_tid = seen.fresh;
	return 0;
}
#else
int metrics_serve(struct metrics *m, const char *addr, char *err, size_t errlen)
{
	snprintf(err, errlen, "this build has no metrics server (a static build: libmicrohttpd is "
		 "linked only into `make`'s build)");
	return -ENOTSUP;
}
#endif

pid_t metrics_server_tid(const struct metrics *m)
{
	return m ? m->server_tid : 0;
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
#ifndef STEPBLAME_NO_METRICS_SERVER
	if (m->daemon)
		MHD_stop_daemon(m->daemon);
#endif
	pthread_mutex_destroy(&m->mu);
	free(m);
}
