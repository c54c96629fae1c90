/* ptdsim report — a run's report again, read from its trace. */
#include <stdio.h>

#include "../traces/report.h"
#include "../traces/runner.h"
#include "cli.h"

int cli_report(int argc, char **argv) {
  char *format = NULL;
  gboolean request = FALSE;
  GOptionEntry entries[] = {
      {"format", 0, 0, G_OPTION_ARG_STRING, &format, "text or json (default text); json is run --format json's object",
       "FMT"},
      {"request", 0, 0, G_OPTION_ARG_NONE, &request,
       "Print the request the trace was simulated from (JSON: options, cluster and profile with the SHA-256 of "
       "their files, ptdsim's version) instead of the report",
       NULL},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  CliArgs args;
  cli_args_init(&args, "TRACE - print the report of a run from its trace");
  g_option_context_set_summary(
      args.ctx, "Reads a trace written by ptdsim run --trace FILE or ptdsim figure --save-traces DIR (plain or .gz),\n"
                "checks that its events give the iteration time and time breakdown it records, and prints the\n"
                "run's report as ptdsim run printed it.\n\n"
                "Example:\n  ptdsim run --model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 96 --trace run.json.gz\n"
                "  ptdsim report run.json.gz");
  cli_args_add(&args, entries);
  GError *error = NULL;
  int code = 0;
  CliFormat fmt;
  cJSON *run = NULL, *req = NULL;
  if (!cli_args_parse(&args, &argc, &argv, &error) || !cli_format(format, &fmt, &error))
    goto fail;
  if (argc < 2) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "report: name a trace file, e.g. ptdsim report run.json.gz");
    goto fail;
  }
  if (argc > 2) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "report: one trace at a time (unexpected '%s')",
                argv[2]);
    goto fail;
  }
  if (!(run = trace_read(argv[1], &req, NULL, &error)))
    goto fail;
  if (request)
    cli_print_json(req); /* JSON in either format: it is a record, not a report */
  else
    cli_print_run(run, fmt);
  goto done;
fail:
  code = cli_fail(error);
done:
  cJSON_Delete(run);
  cJSON_Delete(req);
  g_free(format);
  cli_args_clear(&args);
  return code;
}
