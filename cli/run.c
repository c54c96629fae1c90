/* ptdsim run — simulate one configuration. */
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>

#include "../base/outfile.h"
#include "../schedule/schedule.h"
#include "../traces/report.h"
#include "../traces/runner.h"
#include "cli.h"
#include "../ptdp/ptdp.h"
#include "../plan/validate.h"

/* --dump-schedule: the plan's schedule as a CSV of per-rank actions (NULL
 * path: nothing).  The target is checked and its temporary file opened
 * before the run (*out), and the file is put in place only after the run
 * has succeeded, so that a failed run leaves no file and replaces none;
 * never onto one of the run's inputs or onto --trace. */
static gboolean dump_schedule_open(const SimPlanRequest *req, const TopoCluster *cluster, const ModelProfile *profile,
                                   const char *path, const char *trace, const char *input, PtdOutFile **out,
                                   char **csv, GError **error) {
  *out = NULL;
  *csv = NULL;
  if (!path)
    return TRUE;
  SimPlan *plan = g_new0(SimPlan, 1);
  gboolean ok = sim_plan_build(req, cluster, plan, error);
  const SimScheduleInfo *row = ok ? sim_schedule_info(plan->schedule) : NULL;
  if (ok && (!row->passes || plan->zero || plan->pp < 2)) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--dump-schedule writes a pipeline schedule of F, B, I and W actions; give --pp of at least 2 and a "
                "schedule other than %s",
                sim_schedule_name(SIM_SCHEDULE_TERAPIPE));
    ok = FALSE;
  }
  if (ok && row->copies) { /* two directions: a virtual stage on two ranks */
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--dump-schedule: %s sends half the microbatches the other way, which torch.distributed."
                "pipelining's format (every stage sees every microbatch) cannot write; dualpipev can be written",
                row->name);
    ok = FALSE;
  }
  if (ok && trace) {
    /* the same file: one inode, or (not yet there) one name once ./ and ../ are resolved */
    GStatBuf a, b;
    char *pa = g_canonicalize_filename(path, NULL), *pb = g_canonicalize_filename(trace, NULL);
    gboolean same = strcmp(pa, pb) == 0 ||
                    (g_stat(path, &a) == 0 && g_stat(trace, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino);
    g_free(pa);
    g_free(pb);
    if (same) {
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                  "--dump-schedule and --trace name the same file; write them to two files");
      ok = FALSE;
    }
  }
  if (ok) {
    const char *inputs[] = {cluster->path, profile->path, input, NULL};
    ok = (*out = ptd_out_open(path, "--dump-schedule", inputs, error)) != NULL;
  }
  if (ok)
    *csv = sim_ptdp_schedule_csv(plan, profile);
  g_free(plan);
  return ok;
}

int cli_run(int argc, char **argv) {
  SearchConfig cfg;
  search_config_init(&cfg);
  char *format = NULL, *trace = NULL, *dump = NULL;
  CliArgs args;
  cli_args_init(&args, "- simulate one training iteration of one configuration");
  g_option_context_set_summary(
      args.ctx, "Simulates one iteration (one global batch, optimizer step included) of a transformer language model\n"
           "trained with tensor (t), pipeline (p) and data (d) parallelism, and reports iteration time, model\n"
           "TFLOP/s per GPU and MFU (led by SC21's Eq. 3 for an SC21 reproduction: GPT on the 2021 stack),\n"
           "pipeline bubble, time breakdown, traffic, bisection bandwidth and memory per GPU.\n\n"
           "Example:\n  ptdsim run --model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 36 --micro-batch 1 \\\n"
           "             --schedule interleaved --layers-per-chunk 2 --format json");
  cli_config_add(&args, &cfg);
  GOptionEntry trace_entries[] = {
      {"format", 0, 0, G_OPTION_ARG_STRING, &format, "text or json (default text)", "FMT"},
      {"trace", 0, 0, G_OPTION_ARG_FILENAME, &trace,
       "Also write the simulated timeline as Chrome/Perfetto trace-event JSON (open in ui.perfetto.dev; a name "
       "ending in .gz is gzip-compressed); ptdsim report FILE prints the report again from it",
       "FILE"},
      {"dump-schedule", 0, 0, G_OPTION_ARG_FILENAME, &dump,
       "Also write the pipeline schedule as a CSV of per-rank actions (torch.distributed.pipelining's format, which "
       "--schedule-file reads back)",
       "FILE"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  cli_args_add(&args, trace_entries);
  GError *error = NULL;
  int code = 0;
  SimPlanRequest req;
  RtOptions rt;
  CliFormat fmt;
  TopoCluster *cluster = NULL;
  ModelProfile *profile = NULL;
  cJSON *json = NULL;
  PtdOutFile *dump_out = NULL;
  char *csv = NULL;
  if (!cli_args_parse(&args, &argc, &argv, &error))
    goto fail;
  if (argc > 1) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unexpected argument '%s' (see ptdsim run --help)",
                argv[1]);
    goto fail;
  }
  if (!cli_format(format, &fmt, &error) || !search_config_request(&cfg, &req, &error) ||
      !(req.step_effects = TRUE) ||
      !search_config_runtime(&cfg, &rt, &error) ||
      !cli_load_machine_sized(cfg.text[SEARCH_OPT_CLUSTER], cfg.count[SEARCH_OPT_NODES], cfg.text[SEARCH_OPT_PROFILE],
                              &cluster, &profile, &error) ||
      !dump_schedule_open(&req, cluster, profile, dump, trace, cfg.text[SEARCH_OPT_SCHEDULE_FILE], &dump_out, &csv,
                          &error) ||
      !(json = trace_run_full(&req, &rt, cluster, profile, trace, 0, &error)))
    goto fail;
  if (dump_out) {
    if (!ptd_out_write(dump_out, csv, strlen(csv), &error))
      goto fail;
    PtdOutFile *f = dump_out;
    dump_out = NULL; /* the commit frees it, done or not */
    if (!ptd_out_commit(f, &error))
      goto fail;
  }

  cli_print_run(json, fmt);
  goto done;
fail:
  code = cli_fail(error);
done:
  ptd_out_abort(dump_out);
  g_free(csv);
  cJSON_Delete(json);
  topo_cluster_free(cluster);
  model_profile_free(profile);
  search_config_clear(&cfg);
  g_free(format);
  g_free(trace);
  g_free(dump);
  cli_args_clear(&args);
  return code;
}
