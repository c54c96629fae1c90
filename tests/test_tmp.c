/* ptdsim — test folders removed at exit and on abort (see test_tmp.h). */
#define _XOPEN_SOURCE 700
#include "test_tmp.h"

#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_DIRS 16
static char *dirs[MAX_DIRS];

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

void test_rm_rf(const char *path) { nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS); }

static void remove_all(void) {
  for (guint i = 0; i < MAX_DIRS; i++)
    if (dirs[i])
      test_rm_rf(dirs[i]);
}

/* A failed g_assert aborts: the folders go first (nftw is not
 * async-signal-safe, but the program is ending on its own abort). */
static void on_abort(int sig) {
  remove_all();
  signal(sig, SIG_DFL);
  raise(sig);
}

char *test_tmp_dir(const char *prefix) {
  g_mkdir_with_parents(g_get_tmp_dir(), 0700); /* the suite's own $TMPDIR, under build/ */
  char *tmpl = g_strdup_printf("%s-XXXXXX", prefix);
  GError *error = NULL;
  char *dir = g_dir_make_tmp(tmpl, &error);
  g_assert_no_error(error);
  g_free(tmpl);
  static gboolean hooked;
  if (!hooked) {
    atexit(remove_all);
    signal(SIGABRT, on_abort);
    signal(SIGTERM, on_abort); /* meson's timeout */
    hooked = TRUE;
  }
  for (guint i = 0; i < MAX_DIRS; i++)
    if (!dirs[i]) {
      dirs[i] = g_strdup(dir);
      break;
    }
  return dir;
}
