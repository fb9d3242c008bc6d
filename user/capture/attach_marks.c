// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Step marks: the stepblame:step USDT note in any file the target maps, and
 * --step-uprobe LIB:SYM. The family's programs include the CUDA driver's
 * (attach_cuda.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "capture/probes_internal.h"
#include "marks.skel.h"

/* ---- step marks ---- */

int open_marks(struct probes *p)
{
	struct marks_bpf *m = marks_bpf__open();
	int err;

	if (!m)
		return -errno;
	SET_TARGET(p, m);
	err = reuse_shared(p, m->maps.events, m->maps.drops, m->maps.target_state,
			   m->maps.followed, m->maps.follow_any);
	if (!err) /* the fault run slot (bpf/common.bpf.h) */
		err = reuse_thread_maps(p, m->obj);
	if (!err)
		err = marks_bpf__load(m);
	if (err) {
		marks_bpf__destroy(m);
		return err;
	}
	p->marks = m;
	return 0;
}

/*
 * The step note of one file, for every process that maps it (pid -1): the
 * program keeps the marks of the target and its followed descendants
 * (current_is_target), so a child that execs a trainer, or a fork that marks,
 * is covered by one attach per file (docs/ARCHITECTURE.md, "Step marks").
 */
bool attach_usdt_step(struct probes *p, const char *fpath, const char *shown)
{
	struct bpf_link *l;
	int err;

	if (p->nusdt >= USDT_MAX)
		return false;
	l = bpf_program__attach_usdt(p->marks->progs.step_usdt, -1, fpath, "stepblame",
				     "step", NULL);
	err = keep_link(p, l);
	p->nusdt++;
	add_status(p, "usdt:stepblame:step", !err, false, err ? "%s: %s" : "%s%s",
		   shown, err ? uprobe_why(-err) : "");
	return true;
}

struct find_lib {
	struct probes *p;
	const char *want;
	struct mapping m;
	bool found;
};

static int find_lib_cb(void *ctx, const struct mapping *m)
{
	struct find_lib *f = ctx;
	const char *b = base_name(m->path);

	if (!strcmp(m->path, f->want) || !strncmp(b, f->want, strlen(f->want))) {
		f->m = *m;
		f->found = true;
		return 1;
	}
	return 0;
}

void attach_step_uprobe(struct probes *p)
{
	char spec[PATH_MAX], *colon, fpath[64];
	struct find_lib *f = calloc(1, sizeof(*f));
	const char *path;
	int fd = -1, err;

	if (!f) {
		add_status(p, "step-uprobe", false, true, "out of memory");
		return;
	}
	snprintf(spec, sizeof(spec), "%s", p->o.step_uprobe);
	colon = strrchr(spec, ':');
	if (!colon || colon == spec || !colon[1]) {
		add_status(p, "step-uprobe", false, true, "expected LIB:SYM, got '%s'", spec);
		free(f);
		return;
	}
	*colon = 0;
	f->p = p;
	f->want = spec;
	for_each_mapping(p->o.pid, find_lib_cb, f);
	/* the library the target maps, opened safely; else LIB as the user gave it */
	path = spec;
	if (f->found) {
		fd = open_mapped(p, &f->m);
		if (fd < 0) {
			add_status(p, "step-uprobe", false, true,
				   "%s:%s: cannot open %s as mapped: %s", spec, colon + 1,
				   f->m.path, strerror(-fd));
			free(f);
			return;
		}
		fd_path(fd, fpath, sizeof(fpath));
		path = fpath;
	}
	LIBBPF_OPTS(bpf_uprobe_opts, o, .func_name = colon + 1);
	struct bpf_link *l = bpf_program__attach_uprobe_opts(p->marks->progs.step_uprobe,
							     p->o.pid, path, 0, &o);
	err = keep_link(p, l);
	if (fd >= 0)
		close(fd);
	add_status(p, "step-uprobe", !err, true, err ? "%s:%s: %s" : "%s:%s%s", spec, colon + 1,
		   err ? uprobe_why(-err) : "");
	p->step_uprobe_attached = !err;
	free(f);
}

bool usdt_file(struct probes *p, struct file_key *k, int fd, const char *shown)
{
	char fpath[64];
	bool left_out = false;

	if (k->usdt_seen)
		return false;
	k->usdt_seen = 1;
	fd_path(fd, fpath, sizeof(fpath));
	if (elf_has_usdt(fd, "stepblame", "step"))
		left_out = !attach_usdt_step(p, fpath, shown);
	return left_out;
}

bool probes_child_file_seen(struct probes *p, uint64_t dev, uint64_t ino)
{
	struct file_key *k;

	if (!p || !p->marks)
		return true;
	k = file_get(&p->files, dev, ino);
	return k && k->usdt_seen;
}

void probes_child_file(struct probes *p, int fd, const struct mapping *m)
{
	struct file_key *k;

	if (!p || !p->marks || !(k = file_get(&p->files, m->dev, m->ino)))
		return;
	if (usdt_file(p, k, fd, m->path)) {
		p->usdt_left_out++;
		add_status(p, "usdt:stepblame:step", false, false,
			   "%s (mapped by a child): at most %d files get probes, the first ones "
			   "mapped", m->path, USDT_MAX);
	}
}
