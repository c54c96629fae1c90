/* The docs' example outputs against the tool: every example in README.md
 * and the pages of doc/ written as a `build/ptdsim ...` command block followed by
 * its output block is run as written (from the repository's root, through
 * /bin/sh, so pipes work) and its output must hold the block's lines, in
 * order (a "..." line stands for lines left out; timings and rates, which
 * differ run to run, are compared as words).  Examples that write files,
 * read a file an earlier block made, or time the machine (bench) are not
 * run; nor are those whose pipe needs a program this machine lacks.
 * tools/doc-examples writes the blocks again from the tool.
 */
#include <string.h>

#include "cli_harness.h"
#include "test_tmp.h"

/* A line with its timings and rates replaced by words ("in 1.5 s, 7.9/s"
 * -> "in T s, R/s"), trailing blanks dropped. */
static char *normal(const char *line) {
  GRegex *t = g_regex_new("in [0-9.]+ s, [0-9.]+/s", 0, 0, NULL);
  char *a = g_regex_replace_literal(t, line, -1, 0, "in T s, R/s", 0, NULL);
  g_regex_unref(t);
  g_strchomp(a);
  return a;
}

/* Why the command is not run here (NULL: it is). */
static const char *skip_reason(const char *cmd) {
  static const char *const writes[] = {" -o ", "--output", "--trace ", "--save-traces", "--dump-schedule", " > ",
                                       "--file ", "--schedule-file"};
  if (strstr(cmd, "ptdsim bench"))
    return "it times this machine";
  for (guint i = 0; i < G_N_ELEMENTS(writes); i++)
    if (strstr(cmd, writes[i]))
      return "it writes or reads a file of its own";
  static const char *const tools[] = {"jq", "cut", "head", "sort"};
  for (guint i = 0; i < G_N_ELEMENTS(tools); i++) {
    char *piped = g_strdup_printf("| %s", tools[i]);
    gboolean uses = strstr(cmd, piped) != NULL;
    g_free(piped);
    if (uses) {
      char *found = g_find_program_in_path(tools[i]);
      g_free(found);
      if (!found)
        return "its pipe needs a program this machine lacks";
    }
  }
  return NULL;
}

/* Whether `want`'s lines appear in `got`, in order. */
static gboolean holds(const char *got, const char *want, char **missing) {
  char **g = g_strsplit(got, "\n", -1), **w = g_strsplit(want, "\n", -1);
  guint i = 0, ng = g_strv_length(g);
  gboolean ok = TRUE;
  for (guint j = 0; w[j] && ok; j++) {
    char *line = normal(w[j]);
    if (!*line || strcmp(line, "...") == 0) {
      g_free(line);
      continue;
    }
    while (i < ng) {
      char *have = normal(g[i++]);
      gboolean same = strcmp(have, line) == 0;
      g_free(have);
      if (same)
        break;
      if (i == ng) {
        ok = FALSE;
        *missing = g_strdup(line);
      }
    }
    if (i == ng && ok && w[j + 1] && *w[j + 1]) { /* lines still wanted after the output's last */
      gboolean rest = FALSE;
      for (guint k = j + 1; w[k]; k++)
        rest = rest || (*w[k] && strcmp(w[k], "...") != 0);
      if (rest) {
        ok = FALSE;
        *missing = g_strdup(w[j + 1]);
      }
    }
    g_free(line);
  }
  g_strfreev(g);
  g_strfreev(w);
  return ok;
}

static guint checked, skipped;

static void check_file(const char *root, const char *rel) {
  char *path = g_build_filename(root, rel, NULL);
  gsize len;
  char *text = slurp(path, &len);
  const char *p = text;
  while ((p = strstr(p, "```sh\nbuild/ptdsim "))) {
    const char *body = p + strlen("```sh\n"), *end = strstr(body, "\n```\n");
    g_assert_nonnull(end);
    p = end + 5;
    if (!g_str_has_prefix(p, "\n```\n"))
      continue; /* no output shown */
    const char *out = p + 5, *out_end = strstr(out, "```\n");
    g_assert_nonnull(out_end);
    char *cmd = g_strndup(body, (gsize)(end - body)), *want = g_strndup(out, (gsize)(out_end - out));
    p = out_end + 4;
    const char *why = skip_reason(cmd);
    if (why || (strchr(cmd, '\n') && !strstr(cmd, "\\\n"))) {
      g_test_message("%s: not run (%s): %s", rel, why ? why : "several commands", cmd);
      skipped++;
      g_free(cmd);
      g_free(want);
      continue;
    }
    GString *script = g_string_new(NULL);
    g_string_append_printf(script, "cd '%s' && ", root);
    for (const char *c = cmd; *c;) {
      if (g_str_has_prefix(c, "build/ptdsim ")) {
        g_string_append(script, "\"$PTDSIM_BIN\" ");
        c += strlen("build/ptdsim ");
      } else
        g_string_append_c(script, *c++);
    }
    Proc r = run_sh_in(root, script->str, 120);
    char *both = g_strconcat(r.out, r.err, NULL), *missing = NULL;
    if (!holds(both, want, &missing))
      g_error("%s: the example `%s` no longer prints what the page shows: first missing line \"%s\" (write the page's "
              "blocks again with tools/doc-examples)",
              rel, cmd, missing);
    checked++;
    g_free(both);
    proc_clear(&r);
    g_string_free(script, TRUE);
    g_free(cmd);
    g_free(want);
  }
  g_free(text);
  g_free(path);
}

/* Why: the docs speak of the product as it is; an example that prints
 * something else is a page gone stale. */
static void test_examples(void) {
  const char *root = g_getenv("PTDSIM_DATA_DIR");
  g_assert_nonnull(root);
  check_file(root, "README.md");
  char *doc = g_build_filename(root, "doc", NULL);
  GDir *d = g_dir_open(doc, 0, NULL);
  g_assert_nonnull(d);
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  const char *name;
  while ((name = g_dir_read_name(d)))
    if (g_str_has_suffix(name, ".md"))
      g_ptr_array_add(names, g_build_filename("doc", name, NULL));
  g_dir_close(d);
  for (guint i = 0; i < names->len; i++)
    check_file(root, g_ptr_array_index(names, i));
  g_ptr_array_unref(names);
  g_free(doc);
  g_test_message("%u examples checked, %u not run", checked, skipped);
  g_assert_cmpuint(checked, >=, 15);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  g_test_add_func("/docs/examples", test_examples);
  return g_test_run();
}
