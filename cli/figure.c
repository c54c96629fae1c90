/* ptdsim figure — regenerate a table or figure of either paper. */
#include <stdio.h>

#include "../traces/figures.h"
#include "../traces/terapipe_figs.h"
#include "cli.h"

int cli_figure(int argc, char **argv) {
  char *cluster_name = NULL, *profile_name = NULL, *format = NULL, *network = NULL, *workload = NULL;
  gboolean list = FALSE;
  GOptionEntry entries[] = {
      {"list", 0, 0, G_OPTION_ARG_NONE, &list, "List the figures", NULL},
      {"cluster", 0, 0, G_OPTION_ARG_STRING, &cluster_name, "Cluster name or JSON file (default selene; aws-p3-16xlarge for the TeraPipe figures)", "NAME|FILE"},
      {"profile", 0, 0, G_OPTION_ARG_STRING, &profile_name, "Device profile (default: the cluster's GPU)",
       "NAME|FILE"},
      {"format", 0, 0, G_OPTION_ARG_STRING, &format, "text or json (default text)", "FMT"},
      {"network", 0, 0, G_OPTION_ARG_STRING, &network, "flow or analytic, as for run (default: flow for SC21 figures, analytic for TeraPipe's)", "MODEL"},
      {"workload", 0, 0, G_OPTION_ARG_STRING, &workload,
       "TeraPipe figures: layers (TeraPipe's benchmark, the default) or gpt (the whole training step)", "KIND"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  CliArgs args;
  cli_args_init(&args, "NAME - regenerate a table or figure of the papers");
  guint n;
  const TraceFigure *figs = trace_figures(&n);
  GString *desc = g_string_new("Figures:\n");
  for (guint i = 0; i < n; i++)
    g_string_append_printf(desc, "  %-18s %s\n", figs[i].name, figs[i].description);
  g_option_context_set_description(args.ctx, desc->str);
  cli_args_add(&args, entries);
  GError *error = NULL;
  int code = 0;
  CliFormat fmt;
  TopoCluster *cluster = NULL;
  ModelProfile *profile = NULL;
  cJSON *json = NULL;
  GString *text = NULL;
  if (!cli_args_parse(&args, &argc, &argv, &error) || !cli_format(format, &fmt, &error))
    goto fail;
  if (list) {
    for (guint i = 0; i < n; i++)
      printf("%-18s %s\n", figs[i].name, figs[i].description);
    goto done;
  }
  if (argc != 2) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                argc < 2 ? "figure: name a figure (ptdsim figure --list shows them)"
                         : "figure: one figure at a time (ptdsim figure --list shows them)");
    goto fail;
  }
  const TraceFigure *fig = trace_figure_lookup(argv[1]);
  if (!fig) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unknown figure '%s' (ptdsim figure --list shows them)",
                argv[1]);
    goto fail;
  }
  if (network && strcmp(network, "analytic") != 0 && g_str_has_prefix(fig->name, "terapipe-")) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--network %s is not available for the TeraPipe figures yet; leave --network out", network);
    goto fail;
  }
  if (workload && !g_str_has_prefix(fig->name, "terapipe-")) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--workload applies to the TeraPipe figures; %s runs the whole training step", fig->name);
    goto fail;
  }
  if (!cli_load_machine(cluster_name ? cluster_name : trace_figure_default_cluster(fig->name), profile_name, &cluster,
                        &profile, &error))
    goto fail;
  TraceFigureContext fc = {cluster, profile, network, workload};
  json = cJSON_CreateObject();
  cJSON_AddStringToObject(json, "figure", fig->name);
  text = fmt == CLI_TEXT ? g_string_new(NULL) : NULL;
  if (!fig->run(&fc, json, text, &error))
    goto fail;
  if (fmt == CLI_JSON)
    cli_print_json(json);
  else
    fputs(text->str, stdout);
  goto done;
fail:
  code = cli_fail(error);
done:
  if (json)
    cJSON_Delete(json);
  if (text)
    g_string_free(text, TRUE);
  g_string_free(desc, TRUE);
  topo_cluster_free(cluster);
  model_profile_free(profile);
  g_free(cluster_name);
  g_free(profile_name);
  g_free(format);
  g_free(network);
  g_free(workload);
  cli_args_clear(&args);
  return code;
}
