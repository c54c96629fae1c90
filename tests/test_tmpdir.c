/* ptdsim — the whole suite leaves the temporary folder as it found it.
 * meson sets TMPDIR to a folder of the build tree for every test; this
 * program runs first ("before": lists that folder into a file) and last
 * ("after": lists it again and fails, naming each entry, where the lists
 * differ).  Both run alone (is_parallel: false), ordered by priority. */
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>

static char *listing(const char *dir) {
  GDir *d = g_dir_open(dir, 0, NULL);
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  const char *e;
  while (d && (e = g_dir_read_name(d)))
    g_ptr_array_add(names, g_strdup(e));
  if (d)
    g_dir_close(d);
  g_ptr_array_sort(names, (GCompareFunc)(void (*)(void))g_strcmp0);
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < names->len; i++)
    g_string_append_printf(s, "%s\n", (char *)g_ptr_array_index(names, i));
  g_ptr_array_free(names, TRUE);
  return g_string_free(s, FALSE);
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "before") != 0 && strcmp(argv[1], "after") != 0)) {
    fprintf(stderr, "usage: test_tmpdir before|after LISTFILE\n");
    return 2;
  }
  const char *dir = g_get_tmp_dir();
  if (g_mkdir_with_parents(dir, 0700) != 0) {
    fprintf(stderr, "cannot make %s\n", dir);
    return 1;
  }
  char *now = listing(dir);
  if (strcmp(argv[1], "before") == 0) {
    gboolean ok = g_file_set_contents(argv[2], now, -1, NULL);
    g_free(now);
    return ok ? 0 : 1;
  }
  char *before = NULL;
  if (!g_file_get_contents(argv[2], &before, NULL, NULL)) {
    fprintf(stderr, "no listing from before the suite (%s): run the whole suite\n", argv[2]);
    g_free(now);
    return 1;
  }
  int status = 0;
  if (strcmp(before, now) != 0) {
    /* what is new, each on a line */
    char **b = g_strsplit(before, "\n", -1), **n = g_strsplit(now, "\n", -1);
    for (guint i = 0; n[i]; i++)
      if (*n[i] && !g_strv_contains((const char *const *)b, n[i]))
        fprintf(stderr, "left in %s by the suite: %s\n", dir, n[i]);
    for (guint i = 0; b[i]; i++)
      if (*b[i] && !g_strv_contains((const char *const *)n, b[i]))
        fprintf(stderr, "removed from %s by the suite: %s\n", dir, b[i]);
    g_strfreev(b);
    g_strfreev(n);
    status = 1;
  }
  g_free(before);
  g_free(now);
  return status;
}
