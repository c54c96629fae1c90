/* ptdsim — the layering of the tree, as ARCHITECTURE.md draws it.
 *
 * ARCHITECTURE.md's "## Layers" section holds a diagram: one line per floor,
 * top floor first, each line starting with the folders on that floor
 * ("sim/  calibrate/  ..."), then their description.  A folder may include
 * headers of its own and of folders on lower floors only; folders on one
 * floor do not include each other.  This test reads the diagram and every
 * `#include "..."` of every C, header and CUDA file in the tree, and fails
 * naming the file, the line and the folders when an include points up or
 * sideways, or when a folder with sources is not on the diagram.  It also
 * reads the "## The rooms" table: every folder with sources but tests/ has
 * a row ("| `sim/` | ..."), and the row names each of the folder's C and
 * CUDA files (`engine.c`), so the map says where every file is.  Its first
 * cases run the same checks on a scratch tree with one upward include, a
 * folder without a row and a file its row does not name, so that the
 * checks are seen to fail. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include "test_tmp.h"

typedef struct {
  GHashTable *floor; /* folder name ("sim") -> GINT_TO_POINTER(floor + 1), 1 = top */
  guint n_floors;
} Layers;

/* Reads the floors from the first fenced block after "## Layers".  On each
 * line the leading words that end in '/' are folders; a line without any
 * (a connector such as "│") is skipped. */
static gboolean layers_parse(const char *markdown, Layers *out, GString *problems) {
  out->floor = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  out->n_floors = 0;
  const char *sec = strstr(markdown, "\n## Layers");
  const char *open = sec ? strstr(sec, "\n```") : NULL;
  const char *body = open ? strchr(open + 1, '\n') : NULL;
  const char *close = body ? strstr(body, "\n```") : NULL;
  if (!close) {
    g_string_append(problems, "ARCHITECTURE.md: no fenced diagram after a '## Layers' heading\n");
    return FALSE;
  }
  char *block = g_strndup(body + 1, (gsize)(close - body - 1));
  char **lines = g_strsplit(block, "\n", -1);
  for (char **l = lines; *l; l++) {
    char **words = g_strsplit_set(g_strstrip(*l), " \t", -1);
    gboolean any = FALSE;
    for (char **w = words; *w; w++) {
      if (!**w)
        continue;
      gsize n = strlen(*w);
      if (n < 2 || (*w)[n - 1] != '/')
        break;
      (*w)[n - 1] = '\0';
      if (!any)
        out->n_floors++;
      any = TRUE;
      if (g_hash_table_contains(out->floor, *w))
        g_string_append_printf(problems, "ARCHITECTURE.md: %s/ is on two floors of the diagram\n", *w);
      g_hash_table_insert(out->floor, g_strdup(*w), GUINT_TO_POINTER(out->n_floors));
    }
    g_strfreev(words);
  }
  g_strfreev(lines);
  g_free(block);
  if (out->n_floors < 2)
    g_string_append(problems, "ARCHITECTURE.md: the Layers diagram has fewer than two floors\n");
  return out->n_floors >= 2;
}

static gboolean is_source(const char *name) {
  return g_str_has_suffix(name, ".c") || g_str_has_suffix(name, ".h") || g_str_has_suffix(name, ".cu");
}

/* A meson or other build directory: generated files, not the tree. */
static gboolean is_build_dir(const char *path) {
  char *a = g_build_filename(path, "meson-private", NULL), *b = g_build_filename(path, "build.ninja", NULL);
  gboolean yes = g_file_test(a, G_FILE_TEST_IS_DIR) || g_file_test(b, G_FILE_TEST_EXISTS);
  g_free(a);
  g_free(b);
  return yes;
}

/* The top folder of `rel` (a path relative to the root, '/'-separated) or
 * NULL when it is not inside one. */
static char *top_folder(const char *rel) {
  const char *slash = strchr(rel, '/');
  return slash ? g_strndup(rel, (gsize)(slash - rel)) : NULL;
}

/* Normalises "a/b/../c/./d.h" to "a/c/d.h"; NULL if it leaves the root. */
static char *normalise(const char *path) {
  char **parts = g_strsplit(path, "/", -1);
  GPtrArray *kept = g_ptr_array_new();
  gboolean outside = FALSE;
  for (char **p = parts; *p; p++) {
    if (!**p || strcmp(*p, ".") == 0)
      continue;
    if (strcmp(*p, "..") == 0) {
      if (kept->len == 0)
        outside = TRUE;
      else
        g_ptr_array_remove_index(kept, kept->len - 1);
    } else
      g_ptr_array_add(kept, *p);
  }
  g_ptr_array_add(kept, NULL);
  char *out = outside ? NULL : g_strjoinv("/", (char **)kept->pdata);
  g_ptr_array_free(kept, TRUE);
  g_strfreev(parts);
  return out;
}

static void check_file(const Layers *ly, const char *root, const char *rel, GString *problems) {
  char *path = g_build_filename(root, rel, NULL), *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL)) {
    g_string_append_printf(problems, "%s: cannot be read\n", rel);
    g_free(path);
    return;
  }
  char *from = top_folder(rel), *dir = g_path_get_dirname(rel);
  guint from_floor = GPOINTER_TO_UINT(g_hash_table_lookup(ly->floor, from));
  char **lines = g_strsplit(text, "\n", -1);
  for (guint i = 0; lines[i]; i++) {
    const char *l = lines[i];
    while (*l == ' ' || *l == '\t')
      l++;
    if (*l != '#')
      continue;
    l++;
    while (*l == ' ' || *l == '\t')
      l++;
    if (!g_str_has_prefix(l, "include") || !(l = strchr(l, '"')))
      continue;
    const char *end = strchr(l + 1, '"');
    if (!end)
      continue;
    char *inc = g_strndup(l + 1, (gsize)(end - l - 1));
    char *joined = g_strconcat(dir, "/", inc, NULL);
    char *target = normalise(joined);
    char *to = target ? top_folder(target) : NULL;
    if (to && strcmp(to, from) != 0) {
      guint to_floor = GPOINTER_TO_UINT(g_hash_table_lookup(ly->floor, to));
      if (!to_floor)
        g_string_append_printf(problems, "%s:%u includes \"%s\": %s/ is not on ARCHITECTURE.md's diagram\n", rel,
                               i + 1, inc, to);
      else if (to_floor <= from_floor)
        g_string_append_printf(problems,
                               "%s:%u includes \"%s\": %s/ may include only folders below it in ARCHITECTURE.md, "
                               "and %s/ is %s\n",
                               rel, i + 1, inc, from, to, to_floor == from_floor ? "beside it" : "above it");
    }
    g_free(to);
    g_free(target);
    g_free(joined);
    g_free(inc);
  }
  g_strfreev(lines);
  g_free(dir);
  g_free(from);
  g_free(text);
  g_free(path);
}

/* Walks `rel` (a folder under root) and checks every source file in it. */
static void walk(const Layers *ly, const char *root, const char *rel, guint *n_files, GString *problems) {
  char *path = g_build_filename(root, rel, NULL);
  GDir *d = g_dir_open(path, 0, NULL);
  if (!d || is_build_dir(path)) {
    if (d)
      g_dir_close(d);
    g_free(path);
    return;
  }
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  for (const char *n; (n = g_dir_read_name(d));)
    if (n[0] != '.')
      g_ptr_array_add(names, g_strdup(n));
  g_dir_close(d);
  for (guint i = 0; i < names->len; i++) {
    const char *n = g_ptr_array_index(names, i);
    char *child = g_strconcat(rel, "/", n, NULL), *full = g_build_filename(root, child, NULL);
    if (g_file_test(full, G_FILE_TEST_IS_DIR))
      walk(ly, root, child, n_files, problems);
    else if (is_source(n)) {
      check_file(ly, root, child, problems);
      (*n_files)++;
    }
    g_free(full);
    g_free(child);
  }
  g_ptr_array_free(names, TRUE);
  g_free(path);
}

static gboolean has_sources(const char *path) {
  if (is_build_dir(path))
    return FALSE;
  GDir *d = g_dir_open(path, 0, NULL);
  gboolean yes = FALSE;
  for (const char *n; d && !yes && (n = g_dir_read_name(d));) {
    char *full = g_build_filename(path, n, NULL);
    yes = n[0] != '.' && (g_file_test(full, G_FILE_TEST_IS_DIR) ? has_sources(full) : is_source(n));
    g_free(full);
  }
  if (d)
    g_dir_close(d);
  return yes;
}

/* The rooms table's row of `folder` ("| `folder/` | ..."), or NULL. */
static char *room_row(const char *markdown, const char *folder) {
  const char *sec = strstr(markdown, "\n## The rooms");
  if (!sec)
    return NULL;
  char *start = g_strdup_printf("\n| `%s/` |", folder);
  const char *row = strstr(sec, start);
  const char *next = row ? strstr(sec + 1, "\n## ") : NULL;
  char *out = row && (!next || row < next) ? g_strndup(row + 1, strcspn(row + 1, "\n")) : NULL;
  g_free(start);
  return out;
}

/* Every C and CUDA file directly in `folder` is named in its row. */
static void check_room(const char *markdown, const char *root, const char *folder, GString *problems) {
  if (strcmp(folder, "tests") == 0)
    return;
  char *row = room_row(markdown, folder);
  if (!row) {
    g_string_append_printf(problems, "%s/ holds sources but has no row in ARCHITECTURE.md's rooms table\n", folder);
    return;
  }
  char *path = g_build_filename(root, folder, NULL);
  GDir *d = g_dir_open(path, 0, NULL);
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  for (const char *n; d && (n = g_dir_read_name(d));)
    if (n[0] != '.' && (g_str_has_suffix(n, ".c") || g_str_has_suffix(n, ".cu")))
      g_ptr_array_add(names, g_strdup(n));
  if (d)
    g_dir_close(d);
  g_ptr_array_sort(names, (GCompareFunc)g_strcmp0);
  for (guint i = 0; i < names->len; i++) {
    char *quoted = g_strdup_printf("`%s`", (const char *)g_ptr_array_index(names, i));
    if (!strstr(row, quoted))
      g_string_append_printf(problems, "%s/%s is not named in the %s/ row of ARCHITECTURE.md's rooms table\n",
                             folder, (const char *)g_ptr_array_index(names, i), folder);
    g_free(quoted);
  }
  g_ptr_array_free(names, TRUE);
  g_free(path);
  g_free(row);
}

/* Checks the tree at `root` against its ARCHITECTURE.md; appends one line per
 * problem and returns how many source files it read. */
static guint check_tree(const char *root, GString *problems) {
  char *arch = g_build_filename(root, "ARCHITECTURE.md", NULL), *md = NULL;
  guint n_files = 0;
  Layers ly = {0};
  if (!g_file_get_contents(arch, &md, NULL, NULL))
    g_string_append_printf(problems, "%s: cannot be read\n", arch);
  else if (layers_parse(md, &ly, problems)) {
    GDir *d = g_dir_open(root, 0, NULL);
    GPtrArray *tops = g_ptr_array_new_with_free_func(g_free);
    for (const char *n; d && (n = g_dir_read_name(d));)
      if (n[0] != '.')
        g_ptr_array_add(tops, g_strdup(n));
    if (d)
      g_dir_close(d);
    g_ptr_array_sort(tops, (GCompareFunc)g_strcmp0);
    for (guint i = 0; i < tops->len; i++) {
      const char *n = g_ptr_array_index(tops, i);
      char *full = g_build_filename(root, n, NULL);
      if (g_file_test(full, G_FILE_TEST_IS_DIR) && has_sources(full)) {
        if (!g_hash_table_contains(ly.floor, n))
          g_string_append_printf(problems, "%s/ holds sources but is not on ARCHITECTURE.md's Layers diagram\n", n);
        else {
          walk(&ly, root, n, &n_files, problems);
          check_room(md, root, n, problems);
        }
      }
      g_free(full);
    }
    g_ptr_array_free(tops, TRUE);
  }
  if (ly.floor)
    g_hash_table_destroy(ly.floor);
  g_free(md);
  g_free(arch);
  return n_files;
}

static void write_file(const char *root, const char *rel, const char *text) {
  char *path = g_build_filename(root, rel, NULL), *dir = g_path_get_dirname(path);
  g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
  g_free(dir);
  g_free(path);
}

static void remove_tree(const char *path) {
  GDir *d = g_dir_open(path, 0, NULL);
  for (const char *n; d && (n = g_dir_read_name(d));) {
    char *full = g_build_filename(path, n, NULL);
    if (g_file_test(full, G_FILE_TEST_IS_DIR))
      remove_tree(full);
    else
      g_remove(full);
    g_free(full);
  }
  if (d)
    g_dir_close(d);
  g_rmdir(path);
}

/* Why: a check that cannot fail proves nothing.  A scratch tree with three
 * floors: downward includes pass; one upward, one sideways, one into an
 * undrawn folder and an undrawn folder with sources are each reported, with
 * the file and line. */
static void test_check_can_fail(void) {
  char *root = test_tmp_dir("ptdsim-layers");
  g_assert_nonnull(root);
  write_file(root, "ARCHITECTURE.md",
             "# Map\n\n## Layers\n\n```\ntop/   other/     the programs\n   │\nmid/        the middle\n"
             "   │\nlow/        the ground\n```\n\n## The rooms\n\n| folder | what |\n| --- | --- |\n"
             "| `top/` | `c.c`, `e.c` |\n| `other/` | headers |\n| `mid/` | `b.c` |\n| `low/` | `d.c` |\n"
             "| `stray/` | |\n");
  write_file(root, "low/a.h", "#pragma once\n");
  write_file(root, "mid/b.c", "#include \"../low/a.h\"\n#include \"b.h\"\n");
  write_file(root, "mid/b.h", "#pragma once\n");
  write_file(root, "top/c.c", "#include \"../mid/b.h\"\n#include \"../low/a.h\"\n#include <stdio.h>\n");
  GString *problems = g_string_new(NULL);
  g_assert_cmpuint(check_tree(root, problems), ==, 4);
  g_assert_cmpstr(problems->str, ==, "");

  write_file(root, "low/d.c", "#include <glib.h>\n\n  # include \"../mid/b.h\"\n");
  write_file(root, "top/e.c", "#include \"../other/f.h\"\n");
  write_file(root, "other/f.h", "#pragma once\n#include \"../stray/g.h\"\n");
  write_file(root, "stray/g.h", "#pragma once\n");
  g_string_truncate(problems, 0);
  check_tree(root, problems);
  g_assert_nonnull(strstr(problems->str, "low/d.c:3 includes \"../mid/b.h\": low/ may include only folders below "
                                         "it in ARCHITECTURE.md, and mid/ is above it\n"));
  g_assert_nonnull(strstr(problems->str, "top/e.c:1 includes \"../other/f.h\": top/ may include only folders "
                                         "below it in ARCHITECTURE.md, and other/ is beside it\n"));
  g_assert_nonnull(strstr(problems->str, "other/f.h:2 includes \"../stray/g.h\": stray/ is not on "
                                         "ARCHITECTURE.md's diagram\n"));
  g_assert_nonnull(strstr(problems->str, "stray/ holds sources but is not on ARCHITECTURE.md's Layers diagram\n"));
  char **lines = g_strsplit(problems->str, "\n", -1);
  g_assert_cmpuint(g_strv_length(lines), ==, 5); /* four problems and the empty rest */
  g_strfreev(lines);

  /* A folder without a row in the rooms table, and a file its row does not
   * name, are reported too. */
  write_file(root, "rowless/h.c", "");
  write_file(root, "mid/unnamed.c", "#include \"b.h\"\n");
  char *arch = g_build_filename(root, "ARCHITECTURE.md", NULL), *md = NULL;
  g_assert_true(g_file_get_contents(arch, &md, NULL, NULL));
  char *at = strstr(md, "low/        the ground");
  g_assert_nonnull(at);
  char *with = g_strdup_printf("%.*srowless/    no row\n   │\n%s", (int)(at - md), md, at);
  write_file(root, "ARCHITECTURE.md", with);
  g_string_truncate(problems, 0);
  check_tree(root, problems);
  g_assert_nonnull(strstr(problems->str, "rowless/ holds sources but has no row in ARCHITECTURE.md's rooms table\n"));
  g_assert_nonnull(strstr(problems->str, "mid/unnamed.c is not named in the mid/ row of ARCHITECTURE.md's rooms "
                                         "table\n"));
  g_assert_null(strstr(problems->str, "mid/b.c"));
  write_file(root, "ARCHITECTURE.md", md);
  char *rowless = g_build_filename(root, "rowless", "h.c", NULL),
       *unnamed = g_build_filename(root, "mid", "unnamed.c", NULL);
  g_assert_cmpint(g_remove(rowless), ==, 0);
  g_assert_cmpint(g_remove(unnamed), ==, 0);
  g_free(rowless);
  g_free(unnamed);
  g_free(with);
  g_free(md);
  g_free(arch);

  /* A build directory's generated sources are not the tree. */
  char *stray = g_build_filename(root, "stray", "g.h", NULL);
  g_assert_cmpint(g_remove(stray), ==, 0);
  g_free(stray);
  write_file(root, "builddir/build.ninja", "");
  write_file(root, "builddir/meson-private/sanity.c", "#include \"../../top/c.c\"\n");
  g_string_truncate(problems, 0);
  check_tree(root, problems);
  g_assert_null(strstr(problems->str, "builddir"));
  g_string_free(problems, TRUE);
  remove_tree(root);
  g_free(root);
}

/* Why: the map newcomers read must be the tree that exists. */
static void test_tree_follows_architecture(void) {
  const char *root = g_getenv("PTDSIM_DATA_DIR");
  g_assert_nonnull(root);
  GString *problems = g_string_new(NULL);
  guint n = check_tree(root, problems);
  if (problems->len)
    g_test_message("%s", problems->str);
  g_assert_cmpstr(problems->str, ==, "");
  g_assert_cmpuint(n, >, 50); /* the whole tree was read, not an empty folder */
  g_string_free(problems, TRUE);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/layers/check-can-fail", test_check_can_fail);
  g_test_add_func("/layers/tree-follows-architecture", test_tree_follows_architecture);
  return g_test_run();
}
