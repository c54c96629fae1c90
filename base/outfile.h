/* ptdsim — every file ptdsim writes (traces, profiles, measurements,
 * figures) goes through here: a temporary file in the target's folder,
 * synced and renamed into place, so that a reader never sees half a file
 * and a failed or interrupted run leaves the old file as it was.  A target
 * that is not a regular file (a pipe, a device, a directory, a symbolic
 * link) or that is one of the run's inputs is refused; an existing file
 * keeps its mode; SIGINT, SIGTERM and SIGHUP remove the temporary files
 * before the program ends. */
#pragma once

#include <glib.h>

typedef struct _PtdOutFile PtdOutFile;

/* Checks `path` as a target (see above; `what` names it in errors, e.g.
 * "--trace", and `inputs` is a NULL-terminated list of files the run reads,
 * or NULL) and opens a temporary file next to it. */
PtdOutFile *ptd_out_open(const char *path, const char *what, const char *const *inputs, GError **error);
/* The temporary file's descriptor (owned by the PtdOutFile) and path. */
int ptd_out_fd(const PtdOutFile *f);
const char *ptd_out_tmp_path(const PtdOutFile *f);
const char *ptd_out_path(const PtdOutFile *f);
/* Appends to the temporary file. */
gboolean ptd_out_write(PtdOutFile *f, const void *data, gsize len, GError **error);
/* Syncs, closes and renames the temporary file into place, and frees f. */
gboolean ptd_out_commit(PtdOutFile *f, GError **error);
/* Removes the temporary file and frees f (NULL: nothing). */
void ptd_out_abort(PtdOutFile *f);
/* ptd_out_open, ptd_out_write and ptd_out_commit in one. */
gboolean ptd_write_file(const char *path, const char *what, const char *const *inputs, const void *data, gsize len,
                        GError **error);

/* A private folder in the temporary directory ($TMPDIR), named PREFIX-XXXXXX,
 * for one file named `file`: both are removed by ptd_tmp_dir_free, and by
 * SIGINT, SIGTERM and SIGHUP (with the temporary files above) before the
 * program ends. */
typedef struct _PtdTmpDir PtdTmpDir;
PtdTmpDir *ptd_tmp_dir_new(const char *prefix, const char *file, GError **error);
/* The path of the folder's file (it need not exist yet). */
const char *ptd_tmp_dir_file(const PtdTmpDir *d);
void ptd_tmp_dir_free(PtdTmpDir *d);
