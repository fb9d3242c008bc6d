// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A process whose behaviour the probe tests know exactly. It waits for one
 * byte on stdin (the tracer is attached by then), does what its arguments
 * say on a thread named "sbw-main", and exits. Every action is bracketed so
 * the test can find it: sizes, counts and names are distinctive.
 *
 *   sbwork malloc N         N malloc(100000+i) + free on sbw-main
 *   sbwork migrate M        M forced moves between the first two allowed CPUs
 *   sbwork faults P         touch P fresh pages (one fault each)
 *   sbwork faultsteps S     S steps (USDT stepblame:step marks, numbered 3000.., and one
 *                           that closes the last): the even ones touch 2000 fresh pages,
 *                           the odd ones spin 3 ms; at the end, prints "faultstep N F" for
 *                           each, F = the thread's minflt + majflt over it
 *                           (/proc/thread-self/stat, read right before each mark)
 *   sbwork faultbursts B    B bursts of 65 fresh pages, one after the other in one mapping,
 *                           a 2 ms spin (no system call, no fault) after each; at the end,
 *                           prints "faultburst K T0 T1 LO HI" for each: CLOCK_MONOTONIC ns
 *                           right before its first and right after its last touch, and
 *                           its pages' addresses (hex)
 *   sbwork pingpong S       S steps (USDT stepblame:step marks, numbered 4000.., and one
 *                           that closes the last), each 200 round trips through two pipes
 *                           to thread "sbw-peer" pinned with sbw-main to one CPU (the
 *                           peer spins 20 us a trip) and 2 ms on the CPU; at the end, prints
 *                           "switchstep N V I" for each, V and I its thread's voluntary
 *                           and involuntary context switches over it (/proc/thread-self/status,
 *                           read right before each mark)
 *   sbwork sleep MS         one nanosleep of MS milliseconds
 *   sbwork mmap K           K mmap + munmap pairs of 3 pages
 *   sbwork steps S          S USDT stepblame:step marks, numbered 1000..
 *   sbwork thread 1         create thread "sbw-late" that does 7 malloc(77777)
 *   sbwork spin MS          spin on the CPU for MS milliseconds (pinned to CPU 0 with "pin 0")
 *   sbwork pin CPU          pin sbw-main to CPU first
 *   sbwork burst N          N malloc(64) + free in a tight loop (a burst of fast calls)
 *   sbwork churn MS         malloc(64) + free in a tight loop for MS milliseconds (as many
 *                           calls as the probes let through: the overhead guard's target)
 *   sbwork churnmadv MS     churn, with one madvise(MADV_DONTNEED) of a page and a touch of
 *                           it (a timed system call and a fault) every 16 pairs: the always-on
 *                           probes busy too
 *   sbwork stepchurn S      S steps (USDT stepblame:step marks, numbered 2000..), each
 *                           4 ms on the CPU then 2000 malloc(64) + free pairs: a trainer
 *                           whose steps end in allocator storms, the time of a call all
 *                           the probes' own
 *   sbwork write KB         one write() of KB KiB to a new file in $SBWORK_DIR (else
 *                           /var/tmp) on fd 77, fsync(77), close, then unlink it
 *   sbwork copy KB          KB KiB written to a file on fd 79, then copied by sendfile()
 *                           from fd 79 to a second file on fd 80, KB KiB more written to
 *                           fd 80 by one pwritev() of 4 KiB vectors, then sync(); both
 *                           files in $SBWORK_DIR (else /var/tmp), unlinked
 *   sbwork ckpt KB          write KB KiB in 64 KiB write()s to $SBWORK_DIR (else /var/tmp)
 *                           /sbwork-ckpt.PID.bin on fd 78, fsync(78), close, unlink it
 *   sbwork bigfree KB       malloc(KB KiB) (mapped on its own), touch every page, free:
 *                           the free unmaps them, a slow call
 * Arguments are processed in order; several may be given.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/sdt.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static volatile uintptr_t sink;

static void *late_thread(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "sbw-late");
	for (int i = 0; i < 7; i++) {
		void *p = malloc(77777);

		sink += (uintptr_t)p;
		free(p);
	}
	return NULL;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000ull + ts.tv_nsec / 1000000;
}

/* the calling thread's minflt + majflt (/proc/thread-self/stat, into a static buffer) */
static uint64_t thread_faults(void)
{
	static char buf[1024];
	int fd = open("/proc/thread-self/stat", O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	uint64_t minflt = 0, majflt = 0;
	char *p;
	int field = 3;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		exit(6);
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (!p)
		exit(6);
	/* after the comm: field 3 (state) on; minflt is field 10, majflt 12 */
	for (p++; *p && field <= 12; field++) {
		while (*p == ' ')
			p++;
		if (field == 10)
			minflt = strtoull(p, NULL, 10);
		if (field == 12)
			majflt = strtoull(p, NULL, 10);
		while (*p && *p != ' ')
			p++;
	}
	return minflt + majflt;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void fault_bursts(long n)
{
	long pg = sysconf(_SC_PAGESIZE), per = 65;
	uint64_t *t = calloc(2 * (n > 0 ? n : 1), sizeof(*t));
	char *m = mmap(NULL, n * per * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	if (!t || m == MAP_FAILED)
		exit(4);
	madvise(m, n * per * pg, MADV_NOHUGEPAGE);
	for (long k = 0; k < n; k++) {
		char *b = m + k * per * pg;
		uint64_t end;

		t[2 * k] = mono_ns();
		for (long i = 0; i < per; i++)
			((volatile char *)b)[i * pg] = 1;
		t[2 * k + 1] = mono_ns();
		end = t[2 * k + 1] + 2000000;
		while (mono_ns() < end)
			sink++;
	}
	for (long k = 0; k < n; k++)
		printf("faultburst %ld %llu %llu %lx %lx\n", k, (unsigned long long)t[2 * k],
		       (unsigned long long)t[2 * k + 1], (unsigned long)(m + k * per * pg),
		       (unsigned long)(m + (k + 1) * per * pg - 1));
	fflush(stdout);
	munmap(m, n * per * pg);
	free(t);
}

static void fault_steps(long n)
{
	long pg = sysconf(_SC_PAGESIZE), np = 2000;
	uint64_t f0, f1, *got = calloc(n > 0 ? n : 1, sizeof(*got));

	if (!got)
		exit(4);
	f0 = thread_faults();
	for (long k = 0; k < n; k++) {
		uint64_t step = 3000 + k;

		STAP_PROBE1(stepblame, step, step);
		if (k % 2 == 0) {
			char *m = mmap(NULL, np * pg, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (m == MAP_FAILED)
				exit(4);
			madvise(m, np * pg, MADV_NOHUGEPAGE);
			for (long i = 0; i < np; i++)
				m[i * pg] = 1;
			munmap(m, np * pg);
		} else {
			uint64_t end = now_ms() + 3;

			while (now_ms() < end)
				sink++;
		}
		f1 = thread_faults();
		got[k] = f1 - f0;
		f0 = f1;
	}
	{
		uint64_t step = 3000 + n;

		STAP_PROBE1(stepblame, step, step);
	}
	for (long k = 0; k < n; k++)
		printf("faultstep %ld %llu\n", 3000 + k, (unsigned long long)got[k]);
	fflush(stdout);
	free(got);
}

/* the calling thread's voluntary and involuntary context switches (/proc/thread-self/status) */
static void thread_switches(uint64_t *v, uint64_t *inv)
{
	static char buf[4096];
	int fd = open("/proc/thread-self/status", O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	char *p;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		exit(6);
	buf[n] = 0;
	p = strstr(buf, "\nvoluntary_ctxt_switches:");
	if (!p)
		exit(6);
	*v = strtoull(p + 26, NULL, 10);
	p = strstr(buf, "\nnonvoluntary_ctxt_switches:");
	if (!p)
		exit(6);
	*inv = strtoull(p + 29, NULL, 10);
}

static int ping[2], pong[2];

static void *peer(void *arg)
{
	char c;

	(void)arg;
	prctl(PR_SET_NAME, "sbw-peer");
	while (read(ping[0], &c, 1) == 1) {
		struct timespec t0, t;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		do
			clock_gettime(CLOCK_MONOTONIC, &t);
		while ((t.tv_sec - t0.tv_sec) * 1000000000l + t.tv_nsec - t0.tv_nsec < 20000);
		if (write(pong[1], &c, 1) != 1)
			break;
	}
	return NULL;
}

static void ping_pong(long n)
{
	uint64_t v0, i0, v1, i1, (*got)[2] = calloc(n > 0 ? n : 1, sizeof(*got));
	pthread_t th;
	cpu_set_t one;
	char c = 'x';

	if (!got || pipe(ping) || pipe(pong))
		exit(4);
	CPU_ZERO(&one);
	sched_getaffinity(0, sizeof(one), &one);
	for (int k = 0; k < CPU_SETSIZE; k++)
		if (CPU_ISSET(k, &one)) {
			CPU_ZERO(&one);
			CPU_SET(k, &one);
			break;
		}
	sched_setaffinity(0, sizeof(one), &one);
	/* the peer inherits the one CPU */
	if (pthread_create(&th, NULL, peer, NULL))
		exit(4);
	thread_switches(&v0, &i0);
	for (long k = 0; k < n; k++) {
		uint64_t step = 4000 + k, end;

		STAP_PROBE1(stepblame, step, step);
		for (int r = 0; r < 200; r++)
			if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1)
				exit(4);
		end = now_ms() + 2;
		while (now_ms() < end)
			sink++;
		thread_switches(&v1, &i1);
		got[k][0] = v1 - v0;
		got[k][1] = i1 - i0;
		v0 = v1;
		i0 = i1;
	}
	{
		uint64_t step = 4000 + n;

		STAP_PROBE1(stepblame, step, step);
	}
	close(ping[1]);
	pthread_join(th, NULL);
	for (long k = 0; k < n; k++)
		printf("switchstep %ld %llu %llu\n", 4000 + k, (unsigned long long)got[k][0],
		       (unsigned long long)got[k][1]);
	fflush(stdout);
	free(got);
}

static void *work(void *arg)
{
	char **argv = arg;

	prctl(PR_SET_NAME, "sbw-main");
	for (int i = 0; argv[i] && argv[i + 1]; i += 2) {
		const char *what = argv[i];
		long n = atol(argv[i + 1]);

		if (!strcmp(what, "malloc")) {
			for (long k = 0; k < n; k++) {
				void *p = malloc(100000 + k);

				sink += (uintptr_t)p;
				free(p);
			}
		} else if (!strcmp(what, "migrate")) {
			cpu_set_t all, one;
			int cpus[2], nc = 0;

			sched_getaffinity(0, sizeof(all), &all);
			for (int c = 0; c < CPU_SETSIZE && nc < 2; c++)
				if (CPU_ISSET(c, &all))
					cpus[nc++] = c;
			if (nc < 2) {
				fprintf(stderr, "sbwork: migrate needs two CPUs\n");
				exit(3);
			}
			/* start on the first CPU so every setaffinity below is a real move */
			CPU_ZERO(&one);
			CPU_SET(cpus[0], &one);
			sched_setaffinity(0, sizeof(one), &one);
			usleep(20000);
			for (long k = 0; k < n; k++) {
				CPU_ZERO(&one);
				CPU_SET(cpus[(k + 1) % 2], &one);
				sched_setaffinity(0, sizeof(one), &one);
			}
			sched_setaffinity(0, sizeof(all), &all);
		} else if (!strcmp(what, "faults")) {
			long pg = sysconf(_SC_PAGESIZE);
			char *m = mmap(NULL, n * pg, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (m == MAP_FAILED)
				exit(4);
			madvise(m, n * pg, MADV_NOHUGEPAGE);
			for (long k = 0; k < n; k++)
				m[k * pg] = 1;
			munmap(m, n * pg);
		} else if (!strcmp(what, "faultbursts")) {
			fault_bursts(n);
		} else if (!strcmp(what, "faultsteps")) {
			fault_steps(n);
		} else if (!strcmp(what, "pingpong")) {
			ping_pong(n);
		} else if (!strcmp(what, "sleep")) {
			struct timespec ts = { n / 1000, (n % 1000) * 1000000 };

			nanosleep(&ts, NULL);
		} else if (!strcmp(what, "mmap")) {
			long pg = sysconf(_SC_PAGESIZE);

			for (long k = 0; k < n; k++) {
				void *m = mmap(NULL, 3 * pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
					       -1, 0);

				if (m == MAP_FAILED)
					exit(5);
				munmap(m, 3 * pg);
			}
		} else if (!strcmp(what, "steps")) {
			for (long k = 0; k < n; k++) {
				uint64_t step = 1000 + k;

				STAP_PROBE1(stepblame, step, step);
			}
		} else if (!strcmp(what, "stepchurn")) {
			for (long k = 0; k <= n; k++) {
				uint64_t step = 2000 + k;

				uint64_t end = now_ms() + 4;

				STAP_PROBE1(stepblame, step, step);
				while (k < n && now_ms() < end)
					sink++;
				for (int j = 0; k < n && j < 2000; j++) {
					void *p = malloc(64);

					sink += (uintptr_t)p;
					free(p);
				}
			}
		} else if (!strcmp(what, "thread")) {
			pthread_t t;

			pthread_create(&t, NULL, late_thread, NULL);
			pthread_join(t, NULL);
		} else if (!strcmp(what, "pin")) {
			cpu_set_t one;

			CPU_ZERO(&one);
			CPU_SET(n, &one);
			sched_setaffinity(0, sizeof(one), &one);
		} else if (!strcmp(what, "burst")) {
			for (long k = 0; k < n; k++) {
				void *p = malloc(64);

				sink += (uintptr_t)p;
				free(p);
			}
		} else if (!strcmp(what, "churn")) {
			uint64_t end = now_ms() + n;

			while (now_ms() < end) {
				for (int k = 0; k < 64; k++) {
					void *p = malloc(64);

					sink += (uintptr_t)p;
					free(p);
				}
			}
		} else if (!strcmp(what, "churnmadv")) {
			long pg = sysconf(_SC_PAGESIZE);
			char *m = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				       -1, 0);
			uint64_t end = now_ms() + n;

			if (m == MAP_FAILED)
				exit(4);
			while (now_ms() < end) {
				for (int k = 0; k < 16; k++) {
					void *p = malloc(64);

					sink += (uintptr_t)p;
					free(p);
				}
				madvise(m, pg, MADV_DONTNEED);
				((volatile char *)m)[0] = 1;
			}
			munmap(m, pg);
		} else if (!strcmp(what, "write")) {
			const char *dir = getenv("SBWORK_DIR");
			char path[4096];
			size_t len = (size_t)n << 10;
			char *buf = malloc(len);
			int fd;

			snprintf(path, sizeof(path), "%s/sbwork.XXXXXX", dir ? dir : "/var/tmp");
			fd = mkstemp(path);
			if (!buf || fd < 0 || dup2(fd, 77) != 77)
				exit(6);
			close(fd);
			memset(buf, 'x', len);
			if (write(77, buf, len) != (ssize_t)len || fsync(77))
				exit(7);
			close(77);
			unlink(path);
			free(buf);
		} else if (!strcmp(what, "copy")) {
			const char *dir = getenv("SBWORK_DIR");
			char src[4096], dst[4096];
			size_t len = (size_t)n << 10;
			char *buf = malloc(len);
			struct iovec iov[256];
			off_t off = 0;
			int a, b;

			snprintf(src, sizeof(src), "%s/sbwork-src.XXXXXX", dir ? dir : "/var/tmp");
			snprintf(dst, sizeof(dst), "%s/sbwork-dst.XXXXXX", dir ? dir : "/var/tmp");
			a = mkstemp(src);
			b = mkstemp(dst);
			if (!buf || a < 0 || b < 0 || dup2(a, 79) != 79 || dup2(b, 80) != 80)
				exit(6);
			close(a);
			close(b);
			memset(buf, 'y', len);
			if (write(79, buf, len) != (ssize_t)len)
				exit(7);
			if (sendfile(80, 79, &off, len) != (ssize_t)len)
				exit(7);
			for (size_t o = 0; o < len;) {
				int k = 0;
				size_t chunk = 0;

				for (; k < 256 && o + chunk < len; k++) {
					iov[k].iov_base = buf + o + chunk;
					iov[k].iov_len = 4096;
					chunk += 4096;
				}
				if (pwritev(80, iov, k, (off_t)(len + o)) != (ssize_t)chunk)
					exit(7);
				o += chunk;
			}
			sync();
			close(79);
			close(80);
			unlink(src);
			unlink(dst);
			free(buf);
		} else if (!strcmp(what, "ckpt")) {
			const char *dir = getenv("SBWORK_DIR");
			char path[4096], buf[64 << 10];
			int fd;

			snprintf(path, sizeof(path), "%s/sbwork-ckpt.%d.bin", dir ? dir : "/var/tmp",
				 (int)getpid());
			fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			if (fd < 0 || dup2(fd, 78) != 78)
				exit(6);
			close(fd);
			memset(buf, 'c', sizeof(buf));
			for (long k = 0; k < n / 64; k++)
				if (write(78, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
					exit(7);
			if (fsync(78))
				exit(7);
			close(78);
			unlink(path);
		} else if (!strcmp(what, "bigfree")) {
			size_t len = (size_t)n << 10;
			char *m = malloc(len);

			if (!m)
				exit(8);
			memset(m, 1, len);
			sink += (uintptr_t)m[len - 1];
			free(m);
		} else if (!strcmp(what, "spin")) {
			uint64_t end = now_ms() + n;

			while (now_ms() < end)
				sink++;
		} else {
			fprintf(stderr, "sbwork: unknown action %s\n", what);
			exit(2);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;
	char go;

	(void)argc;
	/* the tracer writes one byte when it is attached */
	if (read(0, &go, 1) != 1)
		return 1;
	pthread_create(&t, NULL, work, argv + 1);
	pthread_join(t, NULL);
	return 0;
}
