/* ptdsim run — simulate one configuration. */
#include <stdio.h>

#include "../traces/report.h"
#include "cli.h"

int cli_run(int argc, char **argv) {
  CliRunOptions o;
  cli_run_options_init(&o);
  GOptionContext *ctx = g_option_context_new("- simulate one training iteration of one configuration");
  g_option_context_set_summary(
      ctx, "Simulates one iteration (one global batch, optimizer step included) of a GPT model trained with\n"
           "tensor (t), pipeline (p) and data (d) parallelism, and reports iteration time, TFLOP/s per GPU,\n"
           "pipeline bubble, time breakdown, traffic, bisection bandwidth and memory per GPU.\n\n"
           "Example:\n  ptdsim run --model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 36 --micro-batch 1 \\\n"
           "             --schedule interleaved --layers-per-chunk 2 --format json");
  g_option_context_set_main_group(ctx, cli_run_option_group(&o));
  GError *error = NULL;
  int code = 0;
  SimPlanRequest req;
  SimPlan plan;
  CliFormat fmt;
  TopoCluster *cluster = NULL;
  ModelProfile *profile = NULL;
  if (!g_option_context_parse(ctx, &argc, &argv, &error))
    goto fail;
  if (argc > 1) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unexpected argument '%s' (see ptdsim run --help)",
                argv[1]);
    goto fail;
  }
  if (!cli_format(o.format, &fmt, &error) || !cli_plan_request(&o, &req, &error) ||
      !cli_load_machine(o.cluster, o.profile, &cluster, &profile, &error) ||
      !sim_plan_build(&req, cluster, &plan, &error))
    goto fail;
  SimResult r;
  if (!sim_ptdp_run(&plan, profile, cluster, &r, &error))
    goto fail;
  if (fmt == CLI_JSON) {
    cJSON *json = trace_result_json(&plan, profile, cluster, &r);
    cli_print_json(json);
    cJSON_Delete(json);
  } else {
    GString *text = g_string_new(NULL);
    trace_result_text(text, &plan, profile, cluster, &r);
    fputs(text->str, stdout);
    g_string_free(text, TRUE);
  }
  goto done;
fail:
  code = cli_fail(error);
done:
  topo_cluster_free(cluster);
  model_profile_free(profile);
  cli_run_options_clear(&o);
  g_option_context_free(ctx);
  return code;
}
