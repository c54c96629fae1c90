/* ptdsim run — simulate one configuration. */
#include <stdio.h>

#include "../traces/perfetto.h"
#include "../traces/report.h"
#include "cli.h"
#include "../sim/terapipe.h"
#include "../sim/zero.h"

int cli_run(int argc, char **argv) {
  CliRunOptions o;
  cli_run_options_init(&o);
  CliArgs args;
  cli_args_init(&args, "- simulate one training iteration of one configuration");
  g_option_context_set_summary(
      args.ctx, "Simulates one iteration (one global batch, optimizer step included) of a GPT model trained with\n"
           "tensor (t), pipeline (p) and data (d) parallelism, and reports iteration time, TFLOP/s per GPU,\n"
           "pipeline bubble, time breakdown, traffic, bisection bandwidth and memory per GPU.\n\n"
           "Example:\n  ptdsim run --model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 36 --micro-batch 1 \\\n"
           "             --schedule interleaved --layers-per-chunk 2 --format json");
  cli_run_options_add(&args, &o);
  GOptionEntry trace_entries[] = {
      {"trace", 0, 0, G_OPTION_ARG_FILENAME, &o.trace,
       "Also write the simulated timeline as Chrome/Perfetto trace-event JSON (open in ui.perfetto.dev)", "FILE"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  cli_args_add(&args, trace_entries);
  GError *error = NULL;
  int code = 0;
  SimPlanRequest req;
  SimPlan plan;
  CliFormat fmt;
  TopoCluster *cluster = NULL;
  ModelProfile *profile = NULL;
  SimTeraPipeSlicing slicing = {0};
  TracePerfetto *trace = NULL;
  if (!cli_args_parse(&args, &argc, &argv, &error))
    goto fail;
  if (argc > 1) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unexpected argument '%s' (see ptdsim run --help)",
                argv[1]);
    goto fail;
  }
  if (!cli_format(o.format, &fmt, &error) || !cli_plan_request(&o, &req, &error) ||
      !cli_load_machine(o.cluster, o.profile, &cluster, &profile, &error))
    goto fail;
  /* The trace file's place is checked (a temporary file created there) before anything is simulated. */
  if (o.trace && !(trace = trace_perfetto_open(o.trace, &error)))
    goto fail;
  if (!req.network && profile->n_coll > 0)
    req.network = "analytic"; /* measured collectives drive the analytic model; the flow network cannot use them yet */
  if (!sim_plan_build(&req, cluster, &plan, &error))
    goto fail;
  SimResult r;
  gboolean tera = plan.schedule == SIM_SCHEDULE_TERAPIPE;
  if (tera) {
    if (!sim_terapipe_choose(&plan, profile, cluster, &slicing, &error) ||
        !sim_terapipe_simulate_observed(&plan, profile, cluster, &slicing, &r, trace ? trace_perfetto_write : NULL,
                                        trace, &error))
      goto fail;
  } else if (plan.zero) {
    if (!sim_zero_run(&plan, profile, cluster, &r, trace ? trace_perfetto_write : NULL, trace, &error))
      goto fail;
  } else if (!sim_ptdp_run_observed(&plan, profile, cluster, &r, trace ? trace_perfetto_write : NULL, trace, &error))
    goto fail;
  if (trace && !trace_perfetto_commit(trace, &error))
    goto fail;
  if (fmt == CLI_JSON) {
    cJSON *json = trace_result_json(&plan, profile, cluster, &r);
    if (tera) {
      cJSON *tp = cJSON_AddObjectToObject(json, "terapipe");
      cJSON_AddNumberToObject(tp, "idle_fraction", r.idle_fraction);
      cJSON_AddNumberToObject(tp, "analytic_idle_fraction",
                              (plan.pp - 1.0) / ((double)r.token_slices + plan.pp - 1.0));
      cJSON_AddNumberToObject(tp, "token_slices_in_pipeline", r.token_slices);
      cJSON_AddNumberToObject(tp, "granularity", plan.granularity);
      sim_terapipe_slicing_json(&slicing, tp);
    }
    cli_print_json(json);
    cJSON_Delete(json);
  } else {
    GString *text = g_string_new(NULL);
    trace_result_text(text, &plan, profile, cluster, &r);
    if (tera) {
      g_string_append(text, "slicing    ");
      sim_terapipe_slicing_describe(&slicing, FALSE, text);
      g_string_append_c(text, '\n');
      if (slicing.predicted_s > 0)
        g_string_append_printf(text, "           by the DP (--slices auto): predicted %.4f s to the flush; context fit error "
                                     "max %.2f%%, mean %.2f%%\n",
                               slicing.predicted_s, 100 * slicing.fit_max_rel_error, 100 * slicing.fit_mean_rel_error);
    }
    fputs(text->str, stdout);
    g_string_free(text, TRUE);
  }
  goto done;
fail:
  code = cli_fail(error);
done:
  trace_perfetto_free(trace);
  sim_terapipe_slicing_clear(&slicing);
  topo_cluster_free(cluster);
  model_profile_free(profile);
  cli_run_options_clear(&o);
  cli_args_clear(&args);
  return code;
}
