/* ptdsim — what ships with the repository points at what exists.
 *
 * Shipped profiles and clusters say where every number comes from.  A path
 * they cite that is not attributed to another repository ("NVIDIA/nccl
 * src/graph/tuning.cc") is a path of this repository and must exist; the
 * documentation's relative links must lead to files. */
#include <cjson/cJSON.h>
#include <glib.h>
#include <string.h>

static const char *root;

static gboolean has_extension(const char *w) {
  static const char *ext[] = {".json", ".c", ".h", ".cu", ".md", ".py", ".sh", ".cc", ".txt"};
  for (guint i = 0; i < G_N_ELEMENTS(ext); i++)
    if (g_str_has_suffix(w, ext[i]))
      return TRUE;
  return FALSE;
}

/* "NVIDIA/nccl", "stas00/ml-engineering": a repository, the attribution of
 * the path that follows it. */
static gboolean is_repository(const char *w) {
  return w && g_regex_match_simple("^[A-Za-z0-9_-][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+$", w, 0, 0) && !has_extension(w);
}

/* Checks the repository paths cited in `text` (found at `where`), appending
 * one line per path that does not exist under `base`. */
static void check_text(const char *base, const char *where, const char *text, GString *problems) {
  char **words = g_strsplit_set(text, " \t\n", -1);
  const char *prev = NULL;
  for (char **w = words; *w; w++) {
    char *word = g_strdup(*w);
    g_strstrip(word);
    /* surrounding punctuation of prose: (path; path, 'path' */
    gsize n = strlen(word);
    while (n && strchr("),;:'\".", word[n - 1]))
      word[--n] = '\0';
    char *start = word;
    while (*start && strchr("(\"'", *start))
      start++;
    if (strchr(start, '/') && has_extension(start) && !g_str_has_prefix(start, "http") && !is_repository(prev)) {
      char *path = g_build_filename(base, start, NULL);
      if (!g_file_test(path, G_FILE_TEST_IS_REGULAR))
        g_string_append_printf(problems, "%s cites '%s', which is not a file of this repository\n", where, start);
      g_free(path);
    }
    g_free((char *)prev);
    prev = g_strdup(start);
    g_free(word);
  }
  g_free((char *)prev);
  g_strfreev(words);
}

static void check_json(const char *base, const char *file, const cJSON *node, const char *key, GString *problems) {
  if (cJSON_IsString(node)) {
    char *where = g_strdup_printf("%s: %s", file, key);
    check_text(base, where, node->valuestring, problems);
    g_free(where);
  }
  for (const cJSON *c = node->child; c; c = c->next) {
    char *k = c->string ? g_strdup_printf("%s%s%s", key, *key ? "." : "", c->string) : g_strdup(key);
    check_json(base, file, c, k, problems);
    g_free(k);
  }
}

/* Every shipped JSON file of `subdir`. */
static guint check_folder(const char *subdir, GString *problems) {
  char *dir = g_build_filename(root, subdir, NULL);
  GDir *d = g_dir_open(dir, 0, NULL);
  g_assert_nonnull(d);
  guint n = 0;
  for (const char *name; (name = g_dir_read_name(d));) {
    if (!g_str_has_suffix(name, ".json"))
      continue;
    char *path = g_build_filename(dir, name, NULL), *text = NULL, *rel = g_build_filename(subdir, name, NULL);
    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    cJSON *json = cJSON_Parse(text);
    g_assert_nonnull(json);
    check_json(root, rel, json, "", problems);
    cJSON_Delete(json);
    g_free(text);
    g_free(rel);
    g_free(path);
    n++;
  }
  g_dir_close(d);
  g_free(dir);
  return n;
}

/* Why: the check must catch the kind of path that once slipped through (a
 * folder outside the repository) and let external citations be. */
static void test_check_can_fail(void) {
  GString *problems = g_string_new(NULL);
  check_text(root, "x", "hardware (shared/reference/hardware.json gpus.a100)", problems);
  g_assert_nonnull(strstr(problems->str, "'shared/reference/hardware.json'"));
  g_string_truncate(problems, 0);
  check_text(root, "x", "traces/reference/no-such.json; (calibrate/profiles/gone.json)", problems);
  g_assert_nonnull(strstr(problems->str, "'traces/reference/no-such.json'"));
  g_assert_nonnull(strstr(problems->str, "'calibrate/profiles/gone.json'"));
  g_string_truncate(problems, 0);
  check_text(root,
             "x",
             "NCCL's tuner (NVIDIA/nccl src/graph/tuning.cc, v2.12; traces/reference/hardware.json nccl); "
             "stas00/ml-engineering compute/accelerator/README.md; https://example.com/a/b.md",
             problems);
  g_assert_cmpstr(problems->str, ==, "");
  g_string_free(problems, TRUE);
}

/* Why: a profile's provenance is only worth something if a reader can open
 * what it cites. */
static void test_provenance_paths(void) {
  GString *problems = g_string_new(NULL);
  guint n = check_folder("calibrate/profiles", problems) + check_folder("topologies", problems);
  g_assert_cmpuint(n, >=, 7);
  if (problems->len)
    g_test_message("%s", problems->str);
  g_assert_cmpstr(problems->str, ==, "");
  g_string_free(problems, TRUE);
}

/* The relative links of one Markdown file. */
static void check_links(const char *rel, GString *problems) {
  char *path = g_build_filename(root, rel, NULL), *text = NULL, *dir = g_path_get_dirname(path);
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  GRegex *re = g_regex_new("\\]\\(([^)#\\s]+)(#[^)]*)?\\)", 0, 0, NULL);
  GMatchInfo *mi = NULL;
  g_regex_match(re, text, 0, &mi);
  for (; g_match_info_matches(mi); g_match_info_next(mi, NULL)) {
    char *target = g_match_info_fetch(mi, 1);
    if (!strstr(target, "://") && !g_str_has_prefix(target, "mailto:")) {
      char *full = g_build_filename(dir, target, NULL);
      if (!g_file_test(full, G_FILE_TEST_EXISTS))
        g_string_append_printf(problems, "%s links to '%s', which does not exist\n", rel, target);
      g_free(full);
    }
    g_free(target);
  }
  g_match_info_free(mi);
  g_regex_unref(re);
  g_free(dir);
  g_free(text);
  g_free(path);
}

/* Why: the README and doc/ are the way in; a dead link is a dead end. */
static void test_doc_links(void) {
  GString *problems = g_string_new(NULL);
  check_links("README.md", problems);
  check_links("ARCHITECTURE.md", problems);
  char *doc = g_build_filename(root, "doc", NULL);
  GDir *d = g_dir_open(doc, 0, NULL);
  g_assert_nonnull(d);
  for (const char *name; (name = g_dir_read_name(d));)
    if (g_str_has_suffix(name, ".md")) {
      char *rel = g_build_filename("doc", name, NULL);
      check_links(rel, problems);
      g_free(rel);
    }
  g_dir_close(d);
  g_free(doc);
  if (problems->len)
    g_test_message("%s", problems->str);
  g_assert_cmpstr(problems->str, ==, "");
  g_string_free(problems, TRUE);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  root = g_getenv("PTDSIM_DATA_DIR");
  if (!root) {
    g_printerr("PTDSIM_DATA_DIR is not set (meson test sets it)\n");
    return 1;
  }
  g_test_add_func("/shipped/check-can-fail", test_check_can_fail);
  g_test_add_func("/shipped/provenance-paths", test_provenance_paths);
  g_test_add_func("/shipped/doc-links", test_doc_links);
  return g_test_run();
}
