// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A capture into a trace file (capture_file.h). */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "capture/capture_file.h"
#include "format/trace.h"

static int write_sink(void *ctx, const struct sb_hdr *rec)
{
	return sbt_write(ctx, rec);
}

enum capture_end capture_to_file(const struct collect_opts *o, struct capture_file *cf)
{
	struct sbt_writer *w;
	int rc;

	cf->fd = -1;
	cf->status = cf->error = 0;
	cf->where = cf->path;
	/* -z, or a name that ends in .zst */
	w = sbt_create_as(cf->path, cf->owner,
			  o->zstd_level ? o->zstd_level :
			  sbt_name_is_zstd(cf->path) ? SBT_ZSTD_LEVEL : 0,
			  cf->err, sizeof(cf->err));
	if (!w)
		return CAPTURE_NO_FILE;
	if (cf->on_created)
		cf->on_created(cf, o);
	rc = collect_run(o, write_sink, w, &cf->res);
	if (rc) {
		/* nothing captured: leave nothing behind */
		sbt_discard(w);
		cf->status = rc;
		return CAPTURE_NOT_RUN;
	}
	if (cf->on_stopped)
		cf->on_stopped(cf, o);
	if (cf->res.sink_error) {
		/* disk full or similar: keep what reached the disk under the asked-for name */
		cf->error = -cf->res.sink_error;
		snprintf(cf->err, sizeof(cf->err), "%s", sbt_partial_path(w));
		if (sbt_salvage(w))
			cf->where = cf->err;
		return CAPTURE_CUT_SHORT;
	}
	/*
	 * A reader of the finished trace reads it through this descriptor, never
	 * by its name: the name may be in a directory another user controls.
	 */
	if (cf->keep_fd)
		cf->fd = fcntl(sbt_fd(w), F_DUPFD_CLOEXEC, 3);
	rc = sbt_finish(w, cf->res.end_reason, cf->res.start_ns, cf->res.end_ns,
			cf->res.drops_total);
	if (rc) {
		if (cf->fd >= 0)
			close(cf->fd);
		cf->fd = -1;
		cf->error = -rc;
		return CAPTURE_NOT_FINISHED;
	}
	return CAPTURE_DONE;
}
