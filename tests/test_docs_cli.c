/* The docs' example outputs against the tool: every example in README.md
 * and the pages of doc/ written as a `build/ptdsim ...` command block followed by
 * its output block is run as written (from the repository's root, through
 * /bin/sh, so pipes work) and must print the block's lines (blank lines
 * aside), or where a "..." line stands for lines left out, the block's lines
 * in order among its own; timings and rates, which differ run to run, are
 * compared as words.  Examples that write files,
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

/* The non-blank lines of `text`, normalized. */
static GPtrArray *lines_of(const char *text) {
  GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
  char **l = g_strsplit(text, "\n", -1);
  for (guint i = 0; l[i]; i++) {
    char *n = normal(l[i]);
    if (*n)
      g_ptr_array_add(a, n);
    else
      g_free(n);
  }
  g_strfreev(l);
  return a;
}

/* Whether `got` prints what `want` shows: the same lines, or where `want`
 * leaves lines out ("..."), its lines in order among `got`'s.  *missing:
 * the first line shown and not printed (or the first printed and not
 * shown). */
static gboolean holds(const char *got, const char *want, char **missing) {
  GPtrArray *g = lines_of(got), *w = lines_of(want);
  gboolean excerpt = FALSE, ok = TRUE;
  for (guint j = 0; j < w->len; j++)
    excerpt = excerpt || strcmp(g_ptr_array_index(w, j), "...") == 0;
  guint i = 0;
  for (guint j = 0; j < w->len && ok; j++) {
    const char *line = g_ptr_array_index(w, j);
    if (strcmp(line, "...") == 0)
      continue;
    while (i < g->len && strcmp(g_ptr_array_index(g, i), line) != 0 && excerpt)
      i++;
    if (i == g->len || strcmp(g_ptr_array_index(g, i), line) != 0) {
      ok = FALSE;
      *missing = g_strdup(line);
    }
    i++;
  }
  if (ok && !excerpt && i < g->len) {
    ok = FALSE;
    *missing = g_strdup_printf("(printed, not shown) %s", (const char *)g_ptr_array_index(g, i));
  }
  g_ptr_array_unref(g);
  g_ptr_array_unref(w);
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
    /* standard output, or with its standard error where the page shows that too */
    char *both = g_strconcat(r.out, r.err, NULL), *missing = NULL;
    gboolean ok = holds(r.out, want, &missing);
    if (!ok) {
      g_free(missing);
      missing = NULL;
      ok = holds(both, want, &missing);
    }
    if (!ok)
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
