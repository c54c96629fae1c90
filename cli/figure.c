/* ptdsim figure — regenerate a table or figure of either paper. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../base/text.h"
#include "../traces/figures.h"
#include "cli.h"

typedef struct {
  char *cluster, *profile, *format, *network, *workload, *out_dir, *save_traces, *from_traces;
  gboolean list, all;
  SimNetwork network_value;   /* --network, read once here */
  SimWorkload workload_value; /* --workload */
} FigureOptions;

/* The directory of --from-traces must exist; --save-traces is created. */
static gboolean check_dirs(const FigureOptions *o, GError **error) {
  if (o->save_traces && o->from_traces) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--save-traces and --from-traces exclude each other: save once, then rebuild from the traces");
    return FALSE;
  }
  if (o->from_traces && !g_file_test(o->from_traces, G_FILE_TEST_IS_DIR)) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--from-traces '%s' is not a directory; give the directory that --save-traces wrote", o->from_traces);
    return FALSE;
  }
  if (o->save_traces) {
    if (g_file_test(o->save_traces, G_FILE_TEST_EXISTS) && !g_file_test(o->save_traces, G_FILE_TEST_IS_DIR)) {
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "--save-traces '%s' is a file; give a directory",
                  o->save_traces);
      return FALSE;
    }
    if (g_mkdir_with_parents(o->save_traces, 0777) != 0) {
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "cannot create --save-traces '%s': %s",
                  o->save_traces, g_strerror(errno));
      return FALSE;
    }
  }
  return TRUE;
}

/* The key path of the first number of `node` that is NaN or infinite (a
 * division by a published zero printed +inf% and wrote null), or NULL. */
static char *not_finite(const cJSON *node) {
  for (const cJSON *c = node->child; c; c = c->next) {
    if (cJSON_IsNumber(c) && !isfinite(c->valuedouble))
      return g_strdup(c->string ? c->string : "[]");
    char *below = not_finite(c);
    if (below) {
      char *path = g_strdup_printf("%s.%s", c->string ? c->string : "[]", below);
      g_free(below);
      return path;
    }
  }
  return NULL;
}

/* Runs one figure and prints or writes what it made. */
static gboolean one_figure(const TraceFigure *fig, const FigureOptions *o, CliFormat fmt, gboolean quiet,
                           GError **error) {
  if (o->network && strcmp(o->network, "analytic") != 0 && g_str_has_prefix(fig->name, "terapipe-")) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--network %s is not available for the TeraPipe figures yet; leave --network out", o->network);
    return FALSE;
  }
  if (fig->own_machines && (o->cluster || o->profile)) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "%s compares the built-in machines it names; leave --cluster and --profile out", fig->name);
    return FALSE;
  }
  TopoCluster *cluster = NULL;
  ModelProfile *profile = NULL;
  if (!cli_load_machine(o->cluster ? o->cluster : fig->default_cluster, o->profile, &cluster, &profile, error))
    return FALSE;
  TraceFigureContext ctx = {cluster,
                            profile,
                            o->network ? &o->network_value : NULL,
                            o->workload ? &o->workload_value : NULL,
                            TRACE_FIGURE_SIMULATE,
                            NULL,
                            fig->name,
                            0,
                            NULL};
  if (o->save_traces)
    ctx.mode = TRACE_FIGURE_SAVE_TRACES, ctx.trace_dir = o->save_traces;
  if (o->from_traces)
    ctx.mode = TRACE_FIGURE_FROM_TRACES, ctx.trace_dir = o->from_traces;
  TraceFigureOut out;
  trace_figure_out_init(&out, fig->name);
  gint64 t0 = g_get_monotonic_time();
  char **written = NULL;
  gboolean ok = fig->run(&ctx, &out, error);
  /* a figure that simulates nothing (a formula) has no network to choose */
  if (ok && o->network && ctx.runs == 0) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--network does not apply to %s: it simulates nothing (a formula); leave --network out", fig->name);
    ok = FALSE;
  }
  /* no printed result is infinite or NaN, whatever the reference data holds */
  char *bad = ok ? not_finite(out.json) : NULL;
  if (bad) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "its result %s is not a finite number; check the inputs and the reference data", bad);
    g_free(bad);
    ok = FALSE;
  }
  ok = ok && (!o->out_dir || trace_figure_write(&out, fig->name, o->out_dir, &written, error));
  if (ok && quiet) { /* --all -o DIR: a line per figure */
    char *where = g_build_filename(o->out_dir, fig->name, NULL);
    printf("%-18s %4u configuration%s %7.2f s  %s.{%s}\n", fig->name, ctx.runs, ctx.runs == 1 ? " " : "s",
           (g_get_monotonic_time() - t0) * 1e-6, where, out.plot || out.gantt ? "json,csv,svg,png" : "json,csv");
    g_free(where);
  }
  else if (ok && fmt == CLI_JSON)
    cli_print_json(out.json);
  else if (ok)
    fputs(out.text->str, stdout);
  if (ok && written && !quiet)
    for (guint i = 0; written[i]; i++)
      fprintf(stderr, "wrote %s\n", written[i]);
  if (!ok && g_error_matches(*error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_OOM)) {
    /* the hint names run's options; a figure's configurations are fixed */
    char *cut = strstr((*error)->message, "; use ");
    char *msg = g_strdup_printf("%.*s; the figure's configurations are the paper's: run it on a cluster whose GPUs "
                                "have more memory, such as its default %s",
                                cut ? (int)(cut - (*error)->message) : (int)strlen((*error)->message),
                                (*error)->message, fig->default_cluster ? fig->default_cluster : "selene");
    g_free((*error)->message);
    (*error)->message = msg;
  }
  if (!ok && !strstr((*error)->message, fig->name))
    g_prefix_error(error, "%s: ", fig->name);
  g_strfreev(written);
  trace_figure_out_clear(&out);
  topo_cluster_free(cluster);
  model_profile_free(profile);
  return ok;
}

int cli_figure(int argc, char **argv) {
  FigureOptions o = {0};
  GOptionEntry entries[] = {
      {"list", 0, 0, G_OPTION_ARG_NONE, &o.list, "List the figures", NULL},
      {"all", 0, 0, G_OPTION_ARG_NONE, &o.all,
       "Every figure, one after another (with -o: the whole gallery, a line per figure on stdout)", NULL},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &o.out_dir,
       "Also write NAME.svg, NAME.png, NAME.csv and NAME.json into DIR (created if missing)", "DIR"},
      {"save-traces", 0, 0, G_OPTION_ARG_FILENAME, &o.save_traces,
       "Keep the trace of every configuration simulated, as DIR/NAME.K.json.gz", "DIR"},
      {"from-traces", 0, 0, G_OPTION_ARG_FILENAME, &o.from_traces,
       "Rebuild the figure from the traces --save-traces wrote into DIR, simulating nothing", "DIR"},
      {"cluster", 0, 0, G_OPTION_ARG_STRING, &o.cluster,
       "Cluster: " PTD_NAME_OR_PATH_HELP "; default selene, aws-p3-16xlarge for the TeraPipe figures",
       "NAME|FILE"},
      {"profile", 0, 0, G_OPTION_ARG_STRING, &o.profile, "Device profile: " PTD_NAME_OR_PATH_HELP "; default: the cluster's GPU",
       "NAME|FILE"},
      {"format", 0, 0, G_OPTION_ARG_STRING, &o.format, "text or json (default text)", "FMT"},
      {"network", 0, 0, G_OPTION_ARG_STRING, &o.network,
       "flow or analytic, as for run (default: flow for the SC21 figures, analytic for TeraPipe's and for the "
       "schedule diagrams)",
       "MODEL"},
      {"workload", 0, 0, G_OPTION_ARG_STRING, &o.workload,
       "TeraPipe figures: layers (TeraPipe's benchmark, the default) or gpt (the whole training step)", "KIND"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  CliArgs args;
  cli_args_init(&args, "NAME - regenerate a table or figure of the papers");
  guint n;
  const TraceFigure *figs = trace_figures(&n);
  GString *desc = g_string_new("Figures:\n");
  for (guint i = 0; i < n; i++)
    g_string_append_printf(desc, "  %-18s %s\n", figs[i].name, figs[i].description);
  g_string_append(desc, "\nExamples:\n"
                        "  ptdsim figure megatron-fig13 -o gallery        table on stdout, pictures and data in gallery/\n"
                        "  ptdsim figure --all -o gallery                 every figure\n"
                        "  ptdsim figure megatron-fig12 --save-traces tr  keep each configuration's trace\n"
                        "  ptdsim figure megatron-fig12 --from-traces tr -o gallery   rebuild from them\n");
  g_option_context_set_description(args.ctx, desc->str);
  cli_args_add(&args, entries);
  GError *error = NULL;
  int code = 0;
  CliFormat fmt;
  if (!cli_args_parse(&args, &argc, &argv, &error) || !cli_format(o.format, &fmt, &error))
    goto fail;
  if (o.list && argc > 1) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "figure --list takes no figure name; drop '%s'",
                argv[1]);
    goto fail;
  }
  if (o.list) {
    for (guint i = 0; i < n; i++)
      printf("%-18s %s\n", figs[i].name, figs[i].description);
    goto done;
  }
  if (o.all && argc > 1) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "figure: --all runs every figure; drop '%s'",
                argv[1]);
    goto fail;
  }
  if (!o.all && argc != 2) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                argc < 2 ? "figure: name a figure, or --all (ptdsim figure --list shows them)"
                         : "figure: one figure at a time, or --all (ptdsim figure --list shows them)");
    goto fail;
  }
  if (o.all && fmt == CLI_JSON) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "figure --all prints text; use -o DIR for every figure's JSON (DIR/NAME.json)");
    goto fail;
  }
  const TraceFigure *fig = o.all ? NULL : trace_figure_lookup(argv[1]);
  if (!o.all && !fig) {
    char *echo = ptd_echo(argv[1], PTD_ECHO_MAX, FALSE);
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unknown figure '%s' (ptdsim figure --list shows them)",
                echo);
    g_free(echo);
    goto fail;
  }
  int word = 0;
  if (o.network && ptd_word_value(sim_network_words, o.network, &word))
    o.network_value = (SimNetwork)word;
  else if (o.network) {
    char *echo = ptd_echo(o.network, PTD_ECHO_MAX, FALSE);
    char *words = ptd_word_list(sim_network_words);
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unknown --network '%s'; use %s", echo, words);
    g_free(words);
    g_free(echo);
    goto fail;
  }
  if (o.workload && fig && !g_str_has_prefix(fig->name, "terapipe-")) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--workload applies to the TeraPipe figures; %s runs the whole training step", fig->name);
    goto fail;
  }
  if (o.all && (o.cluster || o.profile || o.network || o.workload)) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "figure --all runs every figure on its own cluster and defaults; drop --cluster, --profile, "
                "--network and --workload, or name one figure");
    goto fail;
  }
  if (o.workload && ptd_word_value(sim_workload_words, o.workload, &word))
    o.workload_value = (SimWorkload)word;
  else if (o.workload) {
    char *echo = ptd_echo(o.workload, PTD_ECHO_MAX, FALSE);
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "unknown --workload '%s'; use gpt (the whole training step) or layers (TeraPipe's benchmark)", echo);
    g_free(echo);
    goto fail;
  }
  if (!check_dirs(&o, &error))
    goto fail;
  if (fig) {
    if (!one_figure(fig, &o, fmt, FALSE, &error))
      goto fail;
    goto done;
  }
  gint64 t0 = g_get_monotonic_time();
  for (guint i = 0; i < n; i++) {
    if (!one_figure(&figs[i], &o, fmt, o.out_dir != NULL, &error))
      goto fail;
    if (!o.out_dir && i + 1 < n)
      putchar('\n');
  }
  if (o.out_dir)
    printf("%u figures in %.1f s, written to %s\n", n, (g_get_monotonic_time() - t0) * 1e-6, o.out_dir);
  goto done;
fail:
  code = cli_fail(error);
done:
  g_string_free(desc, TRUE);
  g_free(o.cluster);
  g_free(o.profile);
  g_free(o.format);
  g_free(o.network);
  g_free(o.workload);
  g_free(o.out_dir);
  g_free(o.save_traces);
  g_free(o.from_traces);
  cli_args_clear(&args);
  return code;
}
