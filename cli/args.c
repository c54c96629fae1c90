/* ptdsim — a verb's command line (see cli.h): GOption, plus the two checks
 * it lacks.  GOption lets a repeated option silently override the first and
 * reports an unknown option without a hint; both are checked here, before
 * GOption parses, against the names of every entry the verb registered.
 * Other tools' names for the configuration options (search_aliases:
 * Megatron-LM's) are registered beside them, hidden from --help (each
 * option's help names its alias), and handed to the option's own callback
 * under its own name. */
#include <string.h>

#include "cli.h"

typedef struct {
  char *long_name;
  char short_name; /* 0: none */
  gboolean takes_value;
  gboolean repeatable;
  char *canonical; /* an alias: the option's own name; NULL otherwise */
} Known;

void cli_args_init(CliArgs *a, const char *parameter_string) {
  a->ctx = g_option_context_new(parameter_string);
  a->known = g_ptr_array_new();
  a->strings = g_ptr_array_new_with_free_func(g_free);
}

static void known_free(gpointer p) {
  Known *k = p;
  g_free(k->long_name);
  g_free(k->canonical);
  g_free(k);
}

void cli_args_clear(CliArgs *a) {
  g_ptr_array_set_free_func(a->known, known_free);
  g_ptr_array_free(a->known, TRUE);
  g_ptr_array_free(a->strings, TRUE);
  g_option_context_free(a->ctx);
  memset(a, 0, sizeof *a);
}

typedef union {
  GOptionArgFunc f;
  gpointer p;
} Callback; /* GOption keeps a callback as data */

/* An alias's callback: its option's own, called with the option's own name
 * and the value in the option's words.  One table for the process (the
 * callbacks get no CliArgs), filled as verbs register their options. */
typedef struct {
  const SearchAlias *alias;
  Callback own;
  char *own_name; /* "--tp" */
} AliasCall;
static GHashTable *alias_calls; /* "--tensor-model-parallel-size" -> AliasCall */

static gboolean alias_arg(const char *option_name, const char *value, gpointer data, GError **error) {
  const AliasCall *c = alias_calls ? g_hash_table_lookup(alias_calls, option_name) : NULL;
  g_return_val_if_fail(c != NULL, FALSE);
  const char *v = value ? search_alias_value(c->alias, value, error) : NULL;
  if (value && !v)
    return FALSE;
  return c->own.f(c->own_name, v, data, error);
}

static void remember(CliArgs *a, const GOptionEntry *entries, const char *const *canonical) {
  for (const GOptionEntry *e = entries; e->long_name; e++) {
    Known *k = g_new0(Known, 1);
    k->long_name = g_strdup(e->long_name);
    k->canonical = g_strdup(canonical[e - entries]);
    k->short_name = e->short_name;
    /* an optional value is only ever inline: --name=value */
    k->takes_value =
        e->arg != G_OPTION_ARG_NONE && !(e->flags & (G_OPTION_FLAG_NO_ARG | G_OPTION_FLAG_OPTIONAL_ARG));
    g_ptr_array_add(a->known, k);
  }
}

/* The entries with every value taken as the bytes given: GOption converts
 * a string (or a callback's value) from the locale's character set to
 * UTF-8, which under the C locale refuses any byte above 127 with a line
 * naming neither the option nor the value.  Paths are bytes; a value that
 * must be a number or a name is checked by its own parser, whose message
 * names the option and shows the bytes escaped.  GOption copies the
 * entries, so the copy is freed by the caller. */
static GOptionEntry *as_bytes(const GOptionEntry *entries) {
  gsize n = 0;
  while (entries[n].long_name)
    n++;
  GOptionEntry *copy = g_new(GOptionEntry, n + 1);
  memcpy(copy, entries, (n + 1) * sizeof *copy);
  for (gsize i = 0; i < n; i++) {
    if (copy[i].arg == G_OPTION_ARG_STRING)
      copy[i].arg = G_OPTION_ARG_FILENAME;
    else if (copy[i].arg == G_OPTION_ARG_STRING_ARRAY)
      copy[i].arg = G_OPTION_ARG_FILENAME_ARRAY;
    else if (copy[i].arg == G_OPTION_ARG_CALLBACK)
      copy[i].flags |= G_OPTION_FLAG_FILENAME;
  }
  return copy;
}

/* Whether entry e is the configuration option an alias names: run's,
 * plan's and sweep's configuration options are callbacks (cli_config_add,
 * sweep's grid), a verb's own options of the same name (fit --tp) are not. */
static gboolean aliased(const SearchAlias *s, const GOptionEntry *e) {
  return e->arg == G_OPTION_ARG_CALLBACK && strcmp(search_option(s->id)->name, e->long_name) == 0;
}

/* The entries and, after them, an entry for each alias of a configuration
 * option among them: hidden, its value handed on by alias_arg; the
 * option's help names the alias.  canonical[i]: the own name of entry i
 * when it is an alias. */
static GOptionEntry *with_aliases(CliArgs *a, const GOptionEntry *entries, const char ***canonical) {
  gsize n = 0, extra = 0;
  while (entries[n].long_name)
    n++;
  const SearchAlias *al = search_aliases();
  for (gsize i = 0; i < n; i++)
    for (const SearchAlias *s = al; s->name; s++)
      extra += aliased(s, &entries[i]);
  GOptionEntry *out = g_new0(GOptionEntry, n + extra + 1);
  *canonical = g_new0(const char *, n + extra + 1);
  memcpy(out, entries, n * sizeof *out);
  gsize k = n;
  for (gsize i = 0; i < n; i++)
    for (const SearchAlias *s = al; s->name; s++) {
      if (!aliased(s, &entries[i]))
        continue;
      char *flag = g_strdup_printf("--%s", s->name);
      if (!out[i].description || !strstr(out[i].description, flag)) { /* its help may name it already */
        char *help = g_strdup_printf("%s (%s: %s)", out[i].description ? out[i].description : "", s->tool, flag);
        g_ptr_array_add(a->strings, help);
        out[i].description = help;
      }
      g_free(flag);
      out[k] = entries[i];
      out[k].long_name = s->name;
      out[k].flags |= G_OPTION_FLAG_HIDDEN;
      out[k].description = out[k].arg_description = NULL;
      (*canonical)[k] = entries[i].long_name;
      if (!alias_calls)
        alias_calls = g_hash_table_new(g_str_hash, g_str_equal);
      char *key = g_strdup_printf("--%s", s->name);
      AliasCall *c = g_hash_table_lookup(alias_calls, key);
      if (!c) {
        c = g_new0(AliasCall, 1);
        g_hash_table_insert(alias_calls, key, c);
      } else
        g_free(key);
      g_free(c->own_name);
      c->alias = s;
      c->own.p = entries[i].arg_data;
      c->own_name = g_strdup_printf("--%s", entries[i].long_name);
      Callback cb = {.f = alias_arg};
      out[k].arg_data = cb.p;
      k++;
    }
  return out;
}

static void add_entries(CliArgs *a, GOptionGroup *group, const GOptionEntry *entries) {
  const char **canonical;
  GOptionEntry *all = with_aliases(a, entries, &canonical);
  GOptionEntry *copy = as_bytes(all);
  if (group)
    g_option_group_add_entries(group, copy);
  else
    g_option_context_add_main_entries(a->ctx, copy, NULL);
  g_free(copy);
  remember(a, all, canonical);
  g_free(canonical);
  g_free(all);
}

void cli_args_add(CliArgs *a, const GOptionEntry *entries) { add_entries(a, NULL, entries); }

void cli_args_add_group(CliArgs *a, GOptionGroup *group, const GOptionEntry *entries) {
  add_entries(a, group, entries);
}

void cli_args_repeatable(CliArgs *a, const char *long_name) {
  for (guint i = 0; i < a->known->len; i++) {
    Known *k = g_ptr_array_index(a->known, i);
    if (strcmp(k->long_name, long_name) == 0)
      k->repeatable = TRUE;
  }
}

/* The option named `name` (len characters; one character: a short name). */
static const Known *lookup(const CliArgs *a, const char *name, gsize len, gboolean is_short) {
  for (guint i = 0; i < a->known->len; i++) {
    const Known *k = g_ptr_array_index(a->known, i);
    if (is_short ? k->short_name == name[0]
                 : strlen(k->long_name) == len && strncmp(k->long_name, name, len) == 0)
      return k;
  }
  return NULL;
}

/* Levenshtein distance, for the suggestion. */
static guint distance(const char *s, gsize n, const char *t) {
  gsize m = strlen(t);
  guint *row = g_new(guint, m + 1);
  for (gsize j = 0; j <= m; j++)
    row[j] = (guint)j;
  for (gsize i = 1; i <= n; i++) {
    guint diag = row[0];
    row[0] = (guint)i;
    for (gsize j = 1; j <= m; j++) {
      guint up = row[j];
      guint best = MIN(row[j] + 1, row[j - 1] + 1);
      row[j] = MIN(best, diag + (s[i - 1] == t[j - 1] ? 0u : 1u));
      diag = up;
    }
  }
  guint d = row[m];
  g_free(row);
  return d;
}

/* The known long name nearest to `name` (a typo within a third of its
 * length, at least two edits; or a name it begins), or NULL. */
static const char *nearest(const CliArgs *a, const char *name, gsize len) {
  const char *best = NULL, *prefixed = NULL;
  guint best_d = G_MAXUINT;
  for (guint i = 0; i < a->known->len; i++) {
    const Known *k = g_ptr_array_index(a->known, i);
    guint d = distance(name, len, k->long_name);
    if (d < best_d) {
      best_d = d;
      best = k->long_name;
    }
    if (!prefixed && len >= 2 && strncmp(k->long_name, name, len) == 0)
      prefixed = k->long_name;
  }
  /* one edit away, or a longer typo that no name begins with (--fp8 is
   * --fp8-format cut short, not --tp mistyped) */
  if (best && (best_d <= 1 || (best_d <= MAX(2u, (guint)len / 3) && !prefixed)))
    return best;
  return prefixed;
}

gboolean cli_args_parse(CliArgs *a, int *argc, char ***argv, GError **error) {
  GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
  gboolean ok = TRUE;
  for (int i = 1; ok && i < *argc; i++) {
    const char *arg = (*argv)[i];
    if (strcmp(arg, "--") == 0)
      break;
    const char *name;
    gsize len;
    gboolean inline_value, is_short = FALSE;
    if (g_str_has_prefix(arg, "--")) {
      name = arg + 2;
      const char *eq = strchr(name, '=');
      len = eq ? (gsize)(eq - name) : strlen(name);
      inline_value = eq != NULL;
      if (g_str_has_prefix(name, "help"))
        continue; /* --help, --help-all, --help-GROUP: GOption's own */
    } else if (arg[0] == '-' && arg[1] && !g_ascii_isdigit(arg[1]) && arg[1] != '.') {
      name = arg + 1;
      len = 1;
      is_short = TRUE;
      inline_value = arg[2] != '\0';
      if (arg[1] == 'h' || arg[1] == '?')
        continue;
    } else
      continue; /* an argument, not an option */
    const Known *k = lookup(a, name, len, is_short);
    if (!k) {
      const char *near = is_short ? NULL : nearest(a, name, len);
      g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_UNKNOWN_OPTION,
                  "unknown option %s%.*s%s%s%s (%s --help lists them)", is_short ? "-" : "--", (int)MIN(len, 100), name,
                  near ? "; did you mean --" : "", near ? near : "", near ? "?" : "", g_get_prgname());
      ok = FALSE;
      break;
    }
    /* -o and --output are one option, and so are an alias and its option. */
    const char *key = k->canonical ? k->canonical : k->long_name;
    const char *first = g_hash_table_lookup(seen, key);
    if (!k->repeatable && first) {
      if (strcmp(first, k->long_name) != 0)
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
                    "--%s is given twice, as --%s and --%s; give each option once (the second would silently replace "
                    "the first)",
                    key, first, k->long_name);
      else
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
                    "--%s is given twice; give each option once (the second would silently replace the first)", key);
      ok = FALSE;
      break;
    }
    g_hash_table_insert(seen, (gpointer)key, k->long_name);
    if (k->takes_value && !inline_value)
      i++; /* its value, whatever it looks like */
  }
  g_hash_table_destroy(seen);
  return ok && g_option_context_parse(a->ctx, argc, argv, error);
}
