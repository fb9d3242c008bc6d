/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef STEPBLAME_TARGET_H
#define STEPBLAME_TARGET_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* can this PID be traced? 0, or -errno with a one-line reason */
int target_check(pid_t pid, char *err, size_t errlen);
/* still running (not gone, not a zombie) */
bool target_alive(pid_t pid);
/* start time in clock ticks since boot (tells a reused PID apart), 0 if gone */
uint64_t target_start_time(pid_t pid);
/* cb per thread id; count or -errno */
int target_threads(pid_t pid, int (*cb)(void *ctx, pid_t tid), void *ctx);
/* a CPU this process may use but none of pid's threads may: -1 if none */
int target_free_cpu(pid_t pid);
/* how many CPUs the threads of pid may run on, together (0: not known) */
int target_cpus(pid_t pid);
/* key=value lines for SB_REC_HOST / SB_REC_TARGET (schemas/trace.md); length */
size_t host_facts(char *buf, size_t len);
size_t target_facts(pid_t pid, char *buf, size_t len, uid_t *uid);

/*
 * Who the trainer is in its job, as its launcher set it in its environment
 * (/proc/PID/environ, as it was at exec; read with the cmdline's timeout, as
 * it reads the target's memory): the job id (TORCHELASTIC_RUN_ID,
 * SLURM_JOB_ID, JOB_ID), RANK (SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK),
 * LOCAL_RANK (SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID) and
 * WORLD_SIZE (SLURM_NTASKS, OMPI_COMM_WORLD_SIZE, PMI_SIZE), the first set of
 * each; "" where none is. The values are the target's: tamed to letters,
 * digits and ._:@/+- (others '_'), at most TARGET_ID_MAX bytes.
 */
#define TARGET_ID_MAX 64
struct target_ids {
	char job[TARGET_ID_MAX + 1];
	char rank[TARGET_ID_MAX + 1];
	char local_rank[TARGET_ID_MAX + 1];
	char world_size[TARGET_ID_MAX + 1];
};

void target_env_ids(pid_t pid, struct target_ids *ids);
/* whether name is set in pid's environment (as it was at exec) */
bool target_env_has(pid_t pid, const char *name);
/* src (n bytes, up to a NUL) tamed as target_env_ids does, into dst[TARGET_ID_MAX + 1] */
void target_id_tame(char *dst, const char *src, size_t n);
/*
 * Text read from the target (a path from its maps, a comm, its command line)
 * made safe for a terminal and for line-oriented records: control characters,
 * DEL, C1 controls, backslashes and bytes that are not UTF-8 become \xNN.
 * Copies n bytes of src (up to a NUL) into dst, NUL-terminated, never cutting
 * an escape or a character in two. Returns the length written.
 */
size_t sb_escape(char *dst, size_t len, const char *src, size_t n);
/*
 * cb(ctx, pid, ppid) for every descendant of root in /proc, parents before their
 * children; a non-zero return leaves that one's children out. Count, or -errno.
 */
int target_descendants(pid_t root, int (*cb)(void *ctx, pid_t pid, pid_t ppid), void *ctx);
/*
 * The text of a thread record (schemas/trace.md) for the main thread of a
 * followed descendant: its comm (comm_seen, if given, when /proc no longer has
 * it), then ppid= and cmdline= lines (no cmdline= when it has none, a zombie's), and
 * with ids the job=, rank=, local_rank= and world_size= its environment sets (as
 * target_facts); length.
 */
size_t process_facts(pid_t pid, pid_t ppid, const char *comm_seen, bool ids, char *buf,
		     size_t len);
int cpu_node(int cpu);
bool cpu_online(int cpu);
/*
 * pid's /proc/PID/maps into *out (malloc'd, NUL-terminated): its length, or
 * -errno (-ETIMEDOUT: the read stalled, -EDEADLK: too many did and are still blocked; timedread.h).
 * At most MAPS_TEXT_MAX bytes; the last line may be cut short. hint: its
 * size when last read (0: not known), to read it once. (capture/binfile.c)
 */
#define MAPS_TEXT_MAX (16u << 20)
#define MAPS_TIMEOUT_MS 500
ssize_t read_maps(pid_t pid, char **out, size_t hint);
/*
 * on: until maps_reuse(false), read_maps gives each process's maps as first
 * read in between (the agent's pass of a second, whose parts read the same
 * process's maps back to back). off: what was kept is let go.
 */
void maps_reuse(bool on);

#endif
