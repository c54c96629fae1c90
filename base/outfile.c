/* ptdsim — safe output files (see outfile.h). */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct _PtdOutFile {
  char *path, *tmp, *what;
  int fd;
  gint slot; /* in `pending`, or -1 */
  mode_t mode;
  gboolean keep_mode;
};

/* Temporary files in flight, for the signal handler: it may only call
 * async-signal-safe functions, so it reads this fixed table and unlinks. */
#define MAX_PENDING 256
static char *volatile pending[MAX_PENDING];
/* Private temporary folders (ptd_tmp_dir_new): removed after the files. */
static char *volatile pending_dirs[MAX_PENDING];

static void on_signal(int sig) {
  for (guint i = 0; i < MAX_PENDING; i++) {
    char *p = pending[i];
    if (p)
      unlink(p);
  }
  for (guint i = 0; i < MAX_PENDING; i++) {
    char *p = pending_dirs[i];
    if (p)
      rmdir(p);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

static gpointer install_handlers(gpointer data) {
  (void)data;
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
  for (guint i = 0; i < G_N_ELEMENTS(sigs); i++) {
    struct sigaction old;
    /* a handler the program set itself (sweep stops cleanly) stays */
    if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL) {
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_handler = on_signal;
      sigemptyset(&sa.sa_mask);
      sigaction(sigs[i], &sa, NULL);
    }
  }
  return NULL;
}

static gint remember_in(char *volatile *table, char *tmp) {
  static GOnce once = G_ONCE_INIT;
  g_once(&once, install_handlers, NULL);
  for (gint i = 0; i < MAX_PENDING; i++)
    if (g_atomic_pointer_compare_and_exchange((gpointer *)&table[i], NULL, tmp))
      return i;
  return -1; /* more than MAX_PENDING at once: this one is not removed on a signal */
}

static gint remember(char *tmp) { return remember_in(pending, tmp); }

static void forget(PtdOutFile *f) {
  if (f->slot >= 0)
    g_atomic_pointer_set((gpointer *)&pending[f->slot], NULL);
  f->slot = -1;
}

static gboolean fail(GError **error, const char *what, const char *path, int err, const char *how) {
  g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(err), "cannot write %s '%s': %s%s", what, path,
              g_strerror(err), how ? how : "");
  return FALSE;
}

PtdOutFile *ptd_out_open(const char *path, const char *what, const char *const *inputs, GError **error) {
  if (!path || !*path) {
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s needs a file name", what);
    return NULL;
  }
  GStatBuf st;
  gboolean exists = g_lstat(path, &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_EXIST,
                "%s '%s' exists and is %s, not a regular file; give a new or regular file name", what, path,
                S_ISDIR(st.st_mode)   ? "a directory"
                : S_ISLNK(st.st_mode) ? "a symbolic link"
                                      : "a pipe, socket or device");
    return NULL;
  }
  for (guint i = 0; exists && inputs && inputs[i]; i++) {
    GStatBuf in;
    if (g_stat(inputs[i], &in) == 0 && in.st_dev == st.st_dev && in.st_ino == st.st_ino) {
      g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_EXIST,
                  "%s '%s' is also an input of this run (%s); write to another file", what, path, inputs[i]);
      return NULL;
    }
  }
  char *dir = g_path_get_dirname(path), *base = g_path_get_basename(path);
  char *tmp = g_strdup_printf("%s%c.%s.XXXXXX", dir, G_DIR_SEPARATOR, base);
  g_free(dir);
  g_free(base);
  /* known to the signal handler before it exists: g_mkstemp_full fills in
   * the name in place, so a signal at any point removes what was made */
  gint slot = remember(tmp);
  int fd = g_mkstemp_full(tmp, O_RDWR | O_CLOEXEC, 0666); /* 0666 less the umask, as a plain fopen would give */
  if (fd < 0) {
    int err = errno;
    if (slot >= 0)
      g_atomic_pointer_set((gpointer *)&pending[slot], NULL);
    g_free(tmp);
    fail(error, what, path, err, "; give a file in an existing, writable directory");
    return NULL;
  }
  PtdOutFile *f = g_new0(PtdOutFile, 1);
  f->path = g_strdup(path);
  f->what = g_strdup(what);
  f->tmp = tmp;
  f->fd = fd;
  f->keep_mode = exists;
  f->mode = exists ? st.st_mode & 07777 : 0;
  f->slot = slot;
  return f;
}

int ptd_out_fd(const PtdOutFile *f) { return f->fd; }
const char *ptd_out_tmp_path(const PtdOutFile *f) { return f->tmp; }
const char *ptd_out_path(const PtdOutFile *f) { return f->path; }

gboolean ptd_out_write(PtdOutFile *f, const void *data, gsize len, GError **error) {
  const char *p = data;
  for (gsize done = 0; done < len;) {
    gssize n = write(f->fd, p + done, len - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return fail(error, f->what, f->path, n < 0 ? errno : ENOSPC, NULL);
    done += (gsize)n;
  }
  return TRUE;
}

static void out_free(PtdOutFile *f) {
  forget(f);
  if (f->fd >= 0)
    close(f->fd);
  g_free(f->path);
  g_free(f->tmp);
  g_free(f->what);
  g_free(f);
}

void ptd_out_abort(PtdOutFile *f) {
  if (!f)
    return;
  g_unlink(f->tmp);
  out_free(f);
}

gboolean ptd_out_commit(PtdOutFile *f, GError **error) {
  int err = 0;
  if (f->keep_mode && fchmod(f->fd, f->mode) != 0)
    err = errno;
  if (!err && fsync(f->fd) != 0)
    err = errno;
  if (!err && close(f->fd) != 0)
    err = errno;
  f->fd = -1;
  if (!err && g_rename(f->tmp, f->path) != 0)
    err = errno;
  if (err) {
    fail(error, f->what, f->path, err, NULL);
    ptd_out_abort(f);
    return FALSE;
  }
  /* the rename itself reaches the disk with the folder */
  char *dir = g_path_get_dirname(f->path);
  int dfd = g_open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  g_free(dir);
  out_free(f);
  return TRUE;
}

gboolean ptd_write_file(const char *path, const char *what, const char *const *inputs, const void *data, gsize len,
                        GError **error) {
  PtdOutFile *f = ptd_out_open(path, what, inputs, error);
  if (!f)
    return FALSE;
  if (!ptd_out_write(f, data, len, error)) {
    ptd_out_abort(f);
    return FALSE;
  }
  return ptd_out_commit(f, error);
}

struct _PtdTmpDir {
  char *dir, *file;
  gint dir_slot, file_slot;
};

PtdTmpDir *ptd_tmp_dir_new(const char *prefix, const char *file, GError **error) {
  PtdTmpDir *d = g_new0(PtdTmpDir, 1);
  char *name = g_strdup_printf("%s-XXXXXX", prefix);
  d->dir = g_build_filename(g_get_tmp_dir(), name, NULL);
  g_free(name);
  /* known to the handler before it exists: g_mkdtemp fills in the name
   * in place, so a signal at any point removes what was made */
  d->dir_slot = remember_in(pending_dirs, d->dir);
  if (!g_mkdtemp(d->dir)) {
    int err = errno;
    if (d->dir_slot >= 0)
      g_atomic_pointer_set((gpointer *)&pending_dirs[d->dir_slot], NULL);
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(err),
                "cannot make a temporary directory in %s: %s (set TMPDIR to a writable directory)", g_get_tmp_dir(),
                g_strerror(err));
    g_free(d->dir);
    g_free(d);
    return NULL;
  }
  d->file = g_build_filename(d->dir, file, NULL);
  d->file_slot = remember(d->file);
  return d;
}

const char *ptd_tmp_dir_file(const PtdTmpDir *d) { return d->file; }

void ptd_tmp_dir_free(PtdTmpDir *d) {
  if (!d)
    return;
  g_unlink(d->file);
  g_rmdir(d->dir);
  if (d->file_slot >= 0)
    g_atomic_pointer_set((gpointer *)&pending[d->file_slot], NULL);
  if (d->dir_slot >= 0)
    g_atomic_pointer_set((gpointer *)&pending_dirs[d->dir_slot], NULL);
  g_free(d->file);
  g_free(d->dir);
  g_free(d);
}
