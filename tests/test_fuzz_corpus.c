/* ptdsim — the fuzz corpus as regression tests: every seed (the shipped
 * clusters and profiles, fuzz/seeds/TARGET/) and every input that once
 * found a defect (fuzz/regressions/TARGET/) goes through the fuzz targets'
 * own entry points (fuzz/targets.h), in any build, with any compiler.  An
 * input that crashes, trips a GLib critical, or is accepted with a run that
 * reports a negative, NaN, infinite or null number aborts this test. */
#include <glib.h>
#include <string.h>

#include "../base/jsonutil.h"
#include "../fuzz/targets.h"

static guint feed(FuzzTarget t, const char *path) {
  char *data = NULL;
  gsize len = 0;
  GError *error = NULL;
  g_assert_true(g_file_get_contents(path, &data, &len, &error));
  g_assert_no_error(error);
  g_test_message("%s: %s", fuzz_target_name(t), path);
  fuzz_target_run(t, (const guint8 *)data, len);
  g_free(data);
  return 1;
}

/* The files of fuzz/KIND/TARGET/, in name order. */
static guint feed_dir(FuzzTarget t, const char *kind) {
  char *dir = g_build_filename(ptd_data_dir(), "fuzz", kind, fuzz_target_name(t), NULL);
  GDir *d = g_dir_open(dir, 0, NULL);
  guint n = 0;
  if (d) {
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    const char *e;
    while ((e = g_dir_read_name(d)))
      g_ptr_array_add(names, g_build_filename(dir, e, NULL));
    g_dir_close(d);
    g_ptr_array_sort(names, (GCompareFunc)(void (*)(void))g_strcmp0);
    for (guint i = 0; i < names->len; i++)
      n += feed(t, g_ptr_array_index(names, i));
    g_ptr_array_free(names, TRUE);
  }
  g_free(dir);
  return n;
}

static void test_target(gconstpointer data) {
  FuzzTarget t = (FuzzTarget)GPOINTER_TO_INT(data);
  guint n = 0;
  for (const char *const *s = fuzz_target_seeds(t); *s; s++) {
    char *path = g_build_filename(ptd_data_dir(), *s, NULL);
    n += feed(t, path);
    g_free(path);
  }
  n += feed_dir(t, "seeds") + feed_dir(t, "regressions");
  g_assert_cmpuint(n, >=, 2); /* a seed and a regression at least: the corpus is where it is looked for */
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  fuzz_init();
  for (guint t = 0; t < FUZZ_N_TARGETS; t++) {
    char *name = g_strdup_printf("/fuzz-corpus/%s", fuzz_target_name((FuzzTarget)t));
    g_test_add_data_func(name, GINT_TO_POINTER(t), test_target);
    g_free(name);
  }
  return g_test_run();
}
