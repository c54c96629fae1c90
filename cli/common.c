/* ptdsim — options and helpers shared by the verbs (see cli.h). */
#include <stdio.h>
#include <string.h>

#include "../base/jsonutil.h"
#include "../base/text.h"
#include "../base/units.h"
#include "../traces/report.h"
#include "cli.h"

/* GOption hands every configuration option here: "--name" and its text. */
static gboolean config_arg(const char *option_name, const char *value, gpointer data, GError **error) {
  gint id = search_option_find(g_str_has_prefix(option_name, "--") ? option_name + 2 : option_name);
  g_return_val_if_fail(id >= 0, FALSE);
  return search_value_check((SearchOptId)id, value, error) && search_config_set(data, (SearchOptId)id, value, error);
}

void cli_config_add(CliArgs *a, SearchConfig *cfg) {
  GOptionEntry entries[SEARCH_N_OPTIONS + 1];
  memset(entries, 0, sizeof entries);
  for (guint i = 0; i < SEARCH_N_OPTIONS; i++) {
    const SearchOption *o = search_option((SearchOptId)i);
    union {
      GOptionArgFunc f;
      gpointer p;
    } cb = {.f = config_arg}; /* GOption keeps the callback as data */
    entries[i] = (GOptionEntry){o->name, 0, o->kind == SEARCH_OPT_FLAG ? G_OPTION_FLAG_NO_ARG : 0,
                                G_OPTION_ARG_CALLBACK, cb.p, o->help, o->metavar};
  }
  GOptionGroup *g = g_option_group_new("run", "Configuration options", "Show configuration options", cfg, NULL);
  cli_args_add_group(a, g, entries);
  g_option_context_set_main_group(a->ctx, g);
}

gboolean cli_format(const char *text, CliFormat *out, GError **error) {
  if (!text || strcmp(text, "text") == 0)
    *out = CLI_TEXT;
  else if (strcmp(text, "json") == 0)
    *out = CLI_JSON;
  else {
    char *echo = ptd_echo(text, PTD_ECHO_MAX, FALSE);
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unknown --format '%s'; use text or json", echo);
    g_free(echo);
    return FALSE;
  }
  return TRUE;
}

gboolean cli_load_machine(const char *cluster_name, const char *profile_name, TopoCluster **cluster,
                          ModelProfile **profile, GError **error) {
  return cli_load_machine_sized(cluster_name, 0, profile_name, cluster, profile, error);
}

gboolean cli_load_machine_sized(const char *cluster_name, guint nodes, const char *profile_name,
                                TopoCluster **cluster, ModelProfile **profile, GError **error) {
  *cluster = topo_cluster_load_sized(cluster_name ? cluster_name : "selene", nodes, error);
  if (!*cluster) {
    if (nodes && error && *error)
      g_prefix_error(error, "--nodes %u does not fit the cluster: ", nodes);
    return FALSE;
  }
  *profile = model_profile_load(profile_name ? profile_name : (*cluster)->gpu_profile, error);
  if (!*profile) {
    topo_cluster_free(*cluster);
    *cluster = NULL;
    return FALSE;
  }
  return TRUE;
}

void cli_print_json(cJSON *json) {
  ptd_json_exact_numbers(json); /* numbers read back as computed */
  char *text = cJSON_Print(json);
  fputs(text, stdout);
  fputc('\n', stdout);
  cJSON_free(text);
}

void cli_print_run(cJSON *run, CliFormat fmt) {
  if (fmt == CLI_JSON) {
    cli_print_json(run);
    return;
  }
  GString *text = g_string_new(NULL);
  trace_report_text(text, run);
  fputs(text->str, stdout);
  g_string_free(text, TRUE);
}

/* The longest message printed whole (a longer one is cut, saying so). */
#define CLI_MESSAGE_MAX 1000

int cli_fail(GError *error) {
  /* one line of printable text, whatever the message quotes */
  char *line = ptd_echo(error->message, CLI_MESSAGE_MAX, TRUE);
  fprintf(stderr, "ptdsim: %s\n", line);
  g_free(line);
  g_error_free(error);
  return 1;
}

gboolean cli_count(const char *flag, const char *text, guint lo, guint hi, guint *out, GError **error) {
  guint64 v = 0;
  if (!ptd_parse_whole(text, hi, &v) || v < lo) {
    char *echo = ptd_echo(text, PTD_ECHO_MAX, FALSE);
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "%s '%s' is out of range; give a whole number from %u to %u",
                flag, echo, lo, hi);
    g_free(echo);
    return FALSE;
  }
  *out = (guint)v;
  return TRUE;
}

gboolean cli_count_or(const char *flag, const char *text, guint lo, guint hi, guint dflt, guint *out, GError **error) {
  if (!text) {
    *out = dflt;
    return TRUE;
  }
  return cli_count(flag, text, lo, hi, out, error);
}
