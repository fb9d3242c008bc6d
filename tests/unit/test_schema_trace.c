// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * schemas/trace.md against the compiler: every offset/size row of its struct
 * tables, the struct sizes in its headings, and the record-type table, so the
 * document cannot drift from bpf/events.h, user/trace.h and user/gpu.h.
 */
#include <limits.h>
#include <stddef.h>

#include "test.h"
#include "format/gpu.h"
#include "format/trace.h"
#include "base/util.h"

#define F(s, f) { #s, #f, offsetof(struct s, f), sizeof(((struct s *)0)->f), 0 }

static struct field {
	const char *s, *f;
	size_t off, size;
	int seen;
} fields[] = {
	F(sbt_file_hdr, magic), F(sbt_file_hdr, version), F(sbt_file_hdr, hdr_size),
	F(sbt_file_hdr, endian), F(sbt_file_hdr, clock), F(sbt_file_hdr, created_realtime_ns),
	F(sbt_file_hdr, created_mono_ns),
	F(sb_hdr, type), F(sb_hdr, size), F(sb_hdr, cpu), F(sb_hdr, flags), F(sb_hdr, pid),
	F(sb_hdr, tid), F(sb_hdr, ts),
	F(sb_switch_out, h), F(sb_switch_out, prev_state), F(sb_switch_out, state),
	F(sb_switch_out, throttled), F(sb_switch_out, pad), F(sb_switch_out, next_pid),
	F(sb_switch_out, next_tid), F(sb_switch_out, next_comm),
	F(sb_switch_in, h), F(sb_switch_in, wait_ns), F(sb_switch_in, prev_pid),
	F(sb_switch_in, prev_tid), F(sb_switch_in, prev_comm), F(sb_switch_in, wait_reason),
	F(sb_switch_in, pad),
	F(sb_runslice, h), F(sb_runslice, start_ns), F(sb_runslice, comm),
	F(sb_runslice, nwaiting), F(sb_runslice, steal_us),
	F(sb_wakeup, h), F(sb_wakeup, waker_pid), F(sb_wakeup, waker_tid), F(sb_wakeup, waker_comm),
	F(sb_wakeup, waker_cpu), F(sb_wakeup, is_new), F(sb_wakeup, throttled),
	F(sb_wakeup, pad),
	F(sb_migrate, h), F(sb_migrate, orig_cpu), F(sb_migrate, dest_cpu),
	F(sb_migrate, orig_node), F(sb_migrate, dest_node),
	F(sb_fault, h), F(sb_fault, addr), F(sb_fault, ip), F(sb_fault, error_code),
	F(sb_fault, maj_flt), F(sb_fault, min_flt),
	F(sb_fault_run, h), F(sb_fault_run, start_ns), F(sb_fault_run, count),
	F(sb_fault_run, addr), F(sb_fault_run, last_addr), F(sb_fault_run, lo_addr),
	F(sb_fault_run, hi_addr), F(sb_fault_run, ip), F(sb_fault_run, error_code),
	F(sb_fault_run, first_maj_flt), F(sb_fault_run, first_min_flt), F(sb_fault_run, maj_flt),
	F(sb_fault_run, min_flt),
	F(sb_sched_run, h), F(sb_sched_run, start_ns), F(sb_sched_run, sleeps),
	F(sb_sched_run, preempts), F(sb_sched_run, sleep_ns), F(sb_sched_run, wait_ns),
	F(sb_sched_run, idle_wait_ns), F(sb_sched_run, steal_ns), F(sb_sched_run, max_ns),
	F(sb_sched_run, waker_pid), F(sb_sched_run, waker_tid), F(sb_sched_run, waker_comm),
	F(sb_sched_run, runner_pid), F(sb_sched_run, runner_tid), F(sb_sched_run, runner_comm),
	F(sb_irq_run, h), F(sb_irq_run, start_ns), F(sb_irq_run, hard_ns), F(sb_irq_run, soft_ns),
	F(sb_irq_run, hard_count), F(sb_irq_run, soft_count), F(sb_irq_run, vec_ns),
	F(sb_irq_run, hard_irq), F(sb_irq_run, sys_count), F(sb_irq_run, hard_name),
	F(sb_irq_run, sys_ns),
	F(sb_reclaim, h), F(sb_reclaim, start_ns), F(sb_reclaim, result), F(sb_reclaim, kind),
	F(sb_reclaim, pad),
	F(sb_mmsys, h), F(sb_mmsys, start_ns), F(sb_mmsys, addr), F(sb_mmsys, len),
	F(sb_mmsys, ret), F(sb_mmsys, call), F(sb_mmsys, arg),
	F(sb_alloc, h), F(sb_alloc, start_ns), F(sb_alloc, size), F(sb_alloc, ptr),
	F(sb_alloc, fn), F(sb_alloc, floor_ns),
	F(sb_step, h), F(sb_step, step), F(sb_step, source), F(sb_step, pad),
	F(sb_step_alloc, fast_calls),
	F(sb_thread, h), F(sb_thread, parent_tid), F(sb_thread, parent_pid), F(sb_thread, comm),
	F(sb_rename, h), F(sb_rename, oldcomm), F(sb_rename, newcomm),
	F(sb_cuda, h), F(sb_cuda, start_ns), F(sb_cuda, fn), F(sb_cuda, sym),
	F(sb_alloc_burst, h), F(sb_alloc_burst, start_ns), F(sb_alloc_burst, calls),
	F(sb_alloc_burst, sum_ns), F(sb_alloc_burst, bytes), F(sb_alloc_burst, slow_ns),
	F(sb_iosys, h), F(sb_iosys, start_ns), F(sb_iosys, ret), F(sb_iosys, len),
	F(sb_iosys, call), F(sb_iosys, fd),
	F(sb_iosys_file, ino), F(sb_iosys_file, written), F(sb_iosys_file, dev),
	F(sb_iosys_file, kind), F(sb_iosys_file, flags), F(sb_iosys_file, path_len),
	F(sb_iosys_file, path),
	F(sb_mmsys_map, flags), F(sb_mmsys_map, fd), F(sb_mmsys_map, file),
	F(sb_affinity, h), F(sb_affinity, start_ns), F(sb_affinity, ret), F(sb_affinity, pid),
	F(sb_affinity, pad),
	F(sb_stack, h), F(sb_stack, ev_start_ns), F(sb_stack, ev_type), F(sb_stack, nframes),
	F(sb_stack, ip),
	F(sb_text, h), F(sb_text, len), F(sb_text, id),
	F(sb_cpu, h), F(sb_cpu, node), F(sb_cpu, online),
	F(sb_alloc_stats, h), F(sb_alloc_stats, calls), F(sb_alloc_stats, ns),
	F(sb_drops, h), F(sb_drops, ring), F(sb_drops, gpu_channel), F(sb_drops, gpu_source),
	F(sb_drops, wait_overflow),
	F(sb_gpu, h), F(sb_gpu, end_ns), F(sb_gpu, bytes), F(sb_gpu, graph_node_id),
	F(sb_gpu, correlation_id), F(sb_gpu, device), F(sb_gpu, stream), F(sb_gpu, name_id),
	F(sb_gpu, sub), F(sb_gpu, graph_id), F(sb_gpu, grid), F(sb_gpu, block),
	F(sb_trailer, h), F(sb_trailer, records), F(sb_trailer, drops_total),
	F(sb_trailer, start_ns), F(sb_trailer, end_reason), F(sb_trailer, pad),
};

#define S(s) { #s, sizeof(struct s) }

static const struct { const char *s; size_t size; } structs[] = {
	S(sbt_file_hdr), S(sb_hdr), S(sb_switch_out), S(sb_switch_in), S(sb_runslice),
	S(sb_wakeup), S(sb_migrate), S(sb_fault), S(sb_reclaim), S(sb_mmsys), S(sb_alloc),
	S(sb_step), S(sb_step_alloc), S(sb_thread), S(sb_rename), S(sb_cuda), S(sb_alloc_burst), S(sb_iosys), S(sb_iosys_file), S(sb_mmsys_map), S(sb_affinity),
	S(sb_stack), S(sb_fault_run), S(sb_sched_run), S(sb_irq_run),
	S(sb_text), S(sb_cpu),
	S(sb_alloc_stats), S(sb_drops), S(sb_gpu), S(sb_trailer),
};

static ssize_t struct_size(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(structs); i++)
		if (!strcmp(structs[i].s, name))
			return structs[i].size;
	return -1;
}

static FILE *open_doc(void)
{
	char exe[PATH_MAX], path[PATH_MAX + 32], *slash;
	ssize_t n;
	int up;
	FILE *f = fopen("schemas/trace.md", "r");

	if (f)
		return f;
	/* the binary lives in BUILD/tests/unit/: walk up to the source tree */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = 0;
	for (up = 0; up < 6 && (slash = strrchr(exe, '/')); up++) {
		*slash = 0;
		snprintf(path, sizeof(path), "%s/schemas/trace.md", exe);
		f = fopen(path, "r");
		if (f)
			return f;
	}
	return NULL;
}

/* split a markdown table row into trimmed cells; number of cells */
static int cells(char *line, char **c, int max)
{
	int n = 0;
	char *p = line, *e;

	if (*p != '|')
		return 0;
	p++;
	while (n < max && (e = strchr(p, '|'))) {
		*e = 0;
		while (*p == ' ')
			p++;
		for (char *t = e - 1; t >= p && *t == ' '; t--)
			*t = 0;
		c[n++] = p;
		p = e + 1;
	}
	return n;
}

static bool num(const char *s, size_t *v)
{
	char *end;

	if (!*s || *s < '0' || *s > '9')
		return false;
	*v = strtoul(s, &end, 10);
	return !*end;
}

static void t_schema_matches_structs(void)
{
	FILE *f = open_doc();
	char line[4096], cur[64] = "", *c[8];
	size_t i, off, size, rows = 0, heads = 0, types = 0;
	int n;

	if (!f)
		SKIP("schemas/trace.md not found from here");
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (line[0] == '#') {
			char *s = strstr(line, "`struct "), *e;

			cur[0] = 0;
			if (!s)
				continue;
			s += 8;
			e = strchr(s, '`');
			if (!e || e - s >= (long)sizeof(cur))
				continue;
			memcpy(cur, s, e - s);
			cur[e - s] = 0;
			CHECK(struct_size(cur) >= 0, "heading names unknown struct %s", cur);
			e = strstr(e, "`, ");
			if (e && sscanf(e + 3, "%zu bytes", &size) == 1) {
				CHECK((ssize_t)size == struct_size(cur), "%s: heading says %zu bytes, "
				      "sizeof is %zd", cur, size, struct_size(cur));
				heads++;
			}
			continue;
		}
		n = cells(line, c, 8);
		/* the record-type table: | type | name | `struct` | bytes | ... */
		if (n >= 4 && num(c[0], &off) && c[2][0] == '`') {
			char sname[64];
			ssize_t want;

			CHECK(!strcmp(sb_type_name(off), c[1]), "type %zu is %s in the doc, %s in "
			      "the code", off, c[1], sb_type_name(off));
			if (sscanf(c[2], "`%63[a-z_]`", sname) != 1)
				continue;
			CHECK(off < SB_TYPE_MAX && sb_types[off].struct_name &&
			      !strcmp(sb_types[off].struct_name, sname),
			      "type %zu: struct %s in the doc, %s in SB_RECORD_TYPES", off, sname,
			      off < SB_TYPE_MAX && sb_types[off].struct_name ?
				      sb_types[off].struct_name : "none");
			want = struct_size(sname);
			CHECK(want >= 0, "type %zu: unknown struct %s", off, sname);
			CHECK((num(c[3], &size) && (ssize_t)size == want) ||
			      (!strcmp(sname, "sb_text") && !strcmp(c[3], "32+")),
			      "type %zu: %s bytes in the doc, sizeof %zd", off, c[3], want);
			types++;
			continue;
		}
		if (n < 3 || !cur[0] || !num(c[0], &off))
			continue;
		for (i = 0; i < ARRAY_SIZE(fields); i++)
			if (!strcmp(fields[i].s, cur) && !strcmp(fields[i].f, c[2]))
				break;
		if (i == ARRAY_SIZE(fields)) {
			/* the flexible text of sb_text: offset only */
			CHECK(!strcmp(cur, "sb_text") && !strcmp(c[2], "text") &&
			      off == offsetof(struct sb_text, text), "%s.%s is not in the code",
			      cur, c[2]);
			continue;
		}
		fields[i].seen = 1;
		rows++;
		CHECK(off == fields[i].off, "%s.%s: offset %zu in the doc, %zu in the code", cur,
		      c[2], off, fields[i].off);
		CHECK(num(c[1], &size) && size == fields[i].size, "%s.%s: size %s in the doc, %zu "
		      "in the code", cur, c[2], c[1], fields[i].size);
	}
	fclose(f);
	for (i = 0; i < ARRAY_SIZE(fields); i++)
		CHECK(fields[i].seen, "%s.%s is missing from schemas/trace.md", fields[i].s,
		      fields[i].f);
	CHECK(heads == ARRAY_SIZE(structs), "%zu struct headings with sizes, want %zu", heads,
	      ARRAY_SIZE(structs));
	{
		size_t defined = 0;

		for (unsigned t = 1; t < SB_TYPE_MAX; t++)
			defined += sb_type_size(t) > 0;
		CHECK(types == defined, "%zu rows in the record-type table, %zu types defined", types,
		      defined);
	}
	CHECK(rows == ARRAY_SIZE(fields), "%zu field rows", rows);
}

int main(void)
{
	RUN(t_schema_matches_structs);
	return test_summary();
}
