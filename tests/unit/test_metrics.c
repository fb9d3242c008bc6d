// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The Prometheus metrics of a live capture (cmd/metrics.c, schemas/metrics.md):
 * the sums of the steps fed to them, the histogram's cumulative buckets, the
 * bounded interferer labels, label values the target chose made harmless, the
 * exposition accepted by promtool where it is installed, the labels read from a
 * real process's environment, and the HTTP server's answers.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "test.h"
#include "cmd/metrics.h"

static struct eng_step step_of(uint64_t n, uint64_t dur, uint64_t cpu_wait, const char *who,
			       struct eng_blame *b)
{
	struct eng_step s = { .step = n, .duration_ns = dur, .gpu_timeline = true,
			      .gpu_idle_ns = cpu_wait + 1000, .tracer_ns = 500 };

	s.cause_ns[ENG_CPU_WAIT] = cpu_wait;
	s.cause_ns[ENG_HOST_COMPUTE] = 1000;
	b->cause = ENG_CPU_WAIT;
	b->ns = cpu_wait;
	b->has_who = who != NULL;
	if (who)
		snprintf(b->who.comm, sizeof(b->who.comm), "%.16s", who);
	s.blame = b;
	s.nblame = 1;
	return s;
}

static char *render(struct metrics *m)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	if (metrics_render(m, f)) {
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	return buf;
}

/* the value of the first sample line that starts with prefix, -1 if none */
static double value_of(const char *text, const char *prefix)
{
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *nl = strchr(l, '\n'), *sp = NULL;

		if (strncmp(l, prefix, strlen(prefix)))
			continue;
		for (const char *c = l; *c && c != nl; c++)
			if (*c == ' ')
				sp = c;
		return sp ? atof(sp + 1) : -1;
	}
	return -1;
}

static void t_sums_and_labels(void)
{
	struct metrics_labels lb = { 0 };
	struct eng_blame b[46];
	struct metrics *m;
	char *t, name[32];

	snprintf(lb.job, sizeof(lb.job), "job-1");
	snprintf(lb.rank, sizeof(lb.rank), "3");
	snprintf(lb.host, sizeof(lb.host), "h");
	m = metrics_new(&lb, 42, "tr\"ai\\ner\n");
	REQUIRE(m, "metrics_new");
	/*
	 * 30 steps of 4 ms with 1 ms of cpu_wait, 10 of 40 ms with 30 ms; 12 names;
	 * 6 more, of 4 ms with 1 ms, behind threads of the trainer (pid 42) that
	 * it named after other programs: their own series, never the others'
	 */
	for (int i = 0; i < 46; i++) {
		struct eng_step s;

		snprintf(name, sizeof(name), i < 30 ? "hog%d" : i >= 40 ? "sshd%d" : "big", i % 12);
		s = i < 30 || i >= 40 ? step_of(i, 4000000, 1000000, name, &b[i])
				      : step_of(i, 40000000, 30000000, "big", &b[i]);
		if (i >= 40)
			b[i].who.pid = 42;
		s.tail = i >= 30 && i < 40;
		metrics_step(m, &s);
	}
	{
		struct eng_step cut = { .step = 40, .incomplete = true, .duration_ns = 1 };

		metrics_step(m, &cut); /* the capture ended inside it: not a step */
	}
	metrics_drops(m, 7);
	t = render(m);
	REQUIRE(t, "render");
	CHECK(value_of(t, "stepblame_steps_total{job=\"job-1\",rank=\"3\",host=\"h\"}") == 46,
	      "steps_total:\n%.400s", t);
	CHECK(value_of(t, "stepblame_step_duration_seconds_bucket{job=\"job-1\",rank=\"3\",host=\"h\",le=\"0.002\"}") == 0 &&
	      value_of(t, "stepblame_step_duration_seconds_bucket{job=\"job-1\",rank=\"3\",host=\"h\",le=\"0.005\"}") == 36 &&
	      value_of(t, "stepblame_step_duration_seconds_bucket{job=\"job-1\",rank=\"3\",host=\"h\",le=\"0.05\"}") == 46 &&
	      value_of(t, "stepblame_step_duration_seconds_bucket{job=\"job-1\",rank=\"3\",host=\"h\",le=\"+Inf\"}") == 46,
	      "buckets are not cumulative counts");
	CHECK(value_of(t, "stepblame_step_duration_seconds_sum{") > 0.5439 &&
	      value_of(t, "stepblame_step_duration_seconds_sum{") < 0.5441, "sum: %g",
	      value_of(t, "stepblame_step_duration_seconds_sum{"));
	CHECK(value_of(t, "stepblame_tail_steps_total{") == 10, "tail");
	CHECK(value_of(t, "stepblame_blame_seconds_total{job=\"job-1\",rank=\"3\",host=\"h\",cause=\"cpu_wait\"}") > 0.3359 &&
	      value_of(t, "stepblame_blame_seconds_total{job=\"job-1\",rank=\"3\",host=\"h\",cause=\"cpu_wait\"}") < 0.3361,
	      "cpu_wait blame");
	CHECK(value_of(t, "stepblame_dropped_events_total{") == 7, "drops");
	/* ten names keep their series, the rest is other: 2 hog names and nothing of big */
	size_t series = 0;

	for (const char *p = t; (p = strstr(p, "\nstepblame_interferer_seconds_total{")); p++)
		series++;
	CHECK(series == 16 && strstr(t, "comm=\"other\",own=\"false\"}"), "%zu interferer series",
	      series);
	CHECK(fabs(value_of(t, "stepblame_interferer_seconds_total{job=\"job-1\",rank=\"3\",host=\"h\",comm=\"other\",own=\"false\"}") - 0.304) < 1e-6,
	      "other: the two later hog names (4 ms) and big (300 ms)");
	/* the trainer's threads: own="true", four names and the rest, none among the others */
	CHECK(fabs(value_of(t, "stepblame_interferer_seconds_total{job=\"job-1\",rank=\"3\",host=\"h\",comm=\"sshd4\",own=\"true\"}") - 0.001) < 1e-6 &&
	      fabs(value_of(t, "stepblame_interferer_seconds_total{job=\"job-1\",rank=\"3\",host=\"h\",comm=\"other\",own=\"true\"}") - 0.002) < 1e-6 &&
	      !strstr(t, "comm=\"sshd4\",own=\"false\""),
	      "the trainer's own threads: %.300s", strstr(t, "own=\"true\"") ? strstr(t, "own=\"true\"") : t);
	/* the target's name escaped in its label */
	CHECK(strstr(t, "target_comm=\"tr\\\"ai\\\\ner\\n\"") != NULL, "target_comm not escaped: %s",
	      strstr(t, "target_comm") ? strstr(t, "target_comm") : "(none)");
	/* promtool, where Debian's prometheus is installed, checks the whole exposition */
	if (!system("command -v promtool >/dev/null 2>&1")) {
		FILE *p = popen("promtool check metrics >/tmp/sb_promtool.out 2>&1", "w");

		REQUIRE(p, "popen");
		fputs(t, p);
		CHECK(pclose(p) == 0, "promtool rejects the exposition: %s",
		      test_slurp("/tmp/sb_promtool.out", NULL) ?: "");
		unlink("/tmp/sb_promtool.out");
	}
	free(t);
	metrics_free(m);
}

/* a real process's environment: RANK and friends, tamed */
static void t_labels_from_environment(void)
{
	struct metrics_labels lb;
	pid_t pid = fork();

	REQUIRE(pid >= 0, "fork");
	if (pid == 0) {
		char *env[] = { "RANK=5", "LOCAL_RANK=1", "SLURM_JOB_ID=77\"}\nevil{x=\"", NULL };

		execle("/bin/sleep", "sleep", "5", (char *)NULL, env);
		_exit(127);
	}
	usleep(200000);
	metrics_labels_fill(&lb, pid, NULL, NULL, NULL);
	CHECK(!strcmp(lb.rank, "5") && !strcmp(lb.local_rank, "1"), "rank '%s' local_rank '%s'",
	      lb.rank, lb.local_rank);
	CHECK(!strcmp(lb.job, "77___evil_x__"), "job '%s'", lb.job);
	CHECK(lb.host[0], "no host name");
	metrics_labels_fill(&lb, pid, "given", "9", NULL);
	CHECK(!strcmp(lb.job, "given") && !strcmp(lb.rank, "9") && !strcmp(lb.local_rank, "1"),
	      "flags over the environment: %s %s %s", lb.job, lb.rank, lb.local_rank);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/*
 * A launcher's environment has no ids; the child that marks the steps does:
 * its ids label the metrics from then on, unless a flag gave them or the
 * target's environment had some
 */
static void t_labels_of_marking_child(void)
{
	struct eng_identity id = { 0 };
	struct metrics_labels lb = { 0 };
	struct metrics *m;
	char *t;

	snprintf(lb.host, sizeof(lb.host), "h");
	lb.from_env = true;
	snprintf(id.rank, sizeof(id.rank), "3");
	snprintf(id.job, sizeof(id.job), "j7");
	m = metrics_new(&lb, 1, "bash");
	REQUIRE(m, "metrics_new");
	t = render(m);
	CHECK(t && strstr(t, "stepblame_steps_total{host=\"h\"}"), "before: %.300s", t ? t : "");
	free(t);
	metrics_identity(m, &id);
	t = render(m);
	CHECK(t && strstr(t, "stepblame_steps_total{job=\"j7\",rank=\"3\",host=\"h\"}"),
	      "after: %.300s", t ? t : "");
	free(t);
	/* adopted once: another child's ids later change nothing */
	snprintf(id.rank, sizeof(id.rank), "4");
	metrics_identity(m, &id);
	t = render(m);
	CHECK(t && strstr(t, "rank=\"3\"") && !strstr(t, "rank=\"4\""), "again: %.300s", t ? t : "");
	free(t);
	metrics_free(m);
	/* a flag gave one of them: left as given */
	lb.from_env = false;
	m = metrics_new(&lb, 1, "bash");
	REQUIRE(m, "metrics_new");
	metrics_identity(m, &id);
	t = render(m);
	CHECK(t && !strstr(t, "rank=") && !strstr(t, "job="), "flags: %.300s", t ? t : "");
	free(t);
	metrics_free(m);
}

static int http(int port, const char *req, char *out, size_t len)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	size_t got = 0;
	ssize_t r;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (void *)&a, sizeof(a)) || write(fd, req, strlen(req)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while (got + 1 < len && (r = read(fd, out + got, len - 1 - got)) > 0)
		got += (size_t)r;
	out[got] = 0;
	close(fd);
	return 0;
}

static void t_server(void)
{
	struct metrics_labels lb = { 0 };
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	struct metrics *m = metrics_new(&lb, 1, "x");
	char addr[64], err[256], buf[8192];
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	REQUIRE(m && fd >= 0, "setup");
	/* a free port */
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	REQUIRE(!bind(fd, (void *)&a, sizeof(a)) && !getsockname(fd, (void *)&a, &al), "bind");
	port = ntohs(a.sin_port);
	close(fd);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	REQUIRE(metrics_serve(m, addr, err, sizeof(err)) == 0, "serve: %s", err);
	CHECK(http(port, "GET /metrics HTTP/1.0\r\n\r\n", buf, sizeof(buf)) == 0 &&
	      strstr(buf, "200 OK") && strstr(buf, "text/plain; version=0.0.4") &&
	      strstr(buf, "\nstepblame_steps_total 0\n"), "GET /metrics: %.300s", buf);
	CHECK(http(port, "GET / HTTP/1.0\r\n\r\n", buf, sizeof(buf)) == 0 && strstr(buf, " 404 "),
	      "GET /: %.200s", buf);
	CHECK(http(port, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n", buf, sizeof(buf)) == 0 &&
	      strstr(buf, " 405 "), "POST: %.200s", buf);
	/* a second server on the same address: a clear error */
	{
		struct metrics *m2 = metrics_new(&lb, 1, "x");

		CHECK(metrics_serve(m2, addr, err, sizeof(err)) != 0 && strstr(err, addr),
		      "a second server on %s: '%s'", addr, err);
		metrics_free(m2);
	}
	CHECK(metrics_serve(m, "nonsense", err, sizeof(err)) == -EINVAL && strstr(err, "HOST:PORT"),
	      "bad address: '%s'", err);
	metrics_free(m);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	RUN(t_sums_and_labels);
	RUN(t_labels_from_environment);
	RUN(t_labels_of_marking_child);
	RUN(t_server);
	return test_summary();
}
