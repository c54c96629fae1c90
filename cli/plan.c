/* ptdsim plan — search the configurations for a model, GPU budget and global
 * batch; rank by iteration time (and so by time to train, the batch being
 * fixed). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "../search/planner.h"

#define NOT_GIVEN (-1)

static void row_json(const SearchRow *r, gboolean tokens, cJSON *rows) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "gpus", r->gpus);
  cJSON_AddNumberToObject(o, "tp", r->tp);
  cJSON_AddNumberToObject(o, "pp", r->pp);
  cJSON_AddNumberToObject(o, "dp", r->dp);
  cJSON_AddNumberToObject(o, "micro_batch", r->micro_batch);
  cJSON_AddNumberToObject(o, "microbatches", r->microbatches);
  cJSON_AddStringToObject(o, "schedule", r->zero ? "zero" : sim_schedule_name(r->schedule));
  cJSON_AddNumberToObject(o, "zero", r->zero);
  cJSON_AddNumberToObject(o, "chunks", r->chunks);
  cJSON_AddStringToObject(o, "recompute", r->recompute ? "full" : "none");
  cJSON_AddNumberToObject(o, "iteration_time_s", r->iteration_time_s);
  cJSON_AddNumberToObject(o, "tflops_per_gpu", r->tflops_per_gpu);
  cJSON_AddNumberToObject(o, "tokens_per_s", r->tokens_per_s);
  cJSON_AddNumberToObject(o, "memory_per_gpu_GiB", r->memory_GiB);
  cJSON_AddBoolToObject(o, "fits_in_memory", TRUE);
  if (tokens)
    cJSON_AddNumberToObject(o, "training_days", r->training_days);
  cJSON_AddItemToArray(rows, o);
}

int cli_plan(int argc, char **argv) {
  CliRunOptions o;
  cli_run_options_init(&o);
  gint64 top = NOT_GIVEN;
  gboolean allow_fewer = FALSE;
  GOptionEntry entries[] = {
      {"model", 0, 0, G_OPTION_ARG_STRING, &o.model, "Built-in model (gpt3-175b, megatron-1t, ...)", "NAME"},
      {"layers", 0, 0, G_OPTION_ARG_INT64, &o.layers, "Transformer layers l", "L"},
      {"hidden", 0, 0, G_OPTION_ARG_INT64, &o.hidden, "Hidden size h", "H"},
      {"heads", 0, 0, G_OPTION_ARG_INT64, &o.heads, "Attention heads a", "A"},
      {"seq-len", 0, 0, G_OPTION_ARG_INT64, &o.seq_len, "Sequence length s (default 2048)", "S"},
      {"vocab", 0, 0, G_OPTION_ARG_INT64, &o.vocab, "Vocabulary size V (default 51200)", "V"},
      {"gpus", 0, 0, G_OPTION_ARG_INT64, &o.gpus, "GPU budget n (exactly n unless --allow-fewer)", "N"},
      {"allow-fewer", 0, 0, G_OPTION_ARG_NONE, &allow_fewer, "Also consider t*p*d below the budget", NULL},
      {"global-batch", 0, 0, G_OPTION_ARG_INT64, &o.global_batch, "Global batch B in sequences", "B"},
      {"tokens", 0, 0, G_OPTION_ARG_STRING, &o.tokens, "Training budget in tokens (300e9, 300B, 1.2T): adds training days",
       "T"},
      {"cluster", 0, 0, G_OPTION_ARG_STRING, &o.cluster, "Cluster name or JSON file (default selene)", "NAME|FILE"},
      {"profile", 0, 0, G_OPTION_ARG_STRING, &o.profile, "Device profile name or JSON file (default: the cluster's GPU)",
       "NAME|FILE"},
      {"network", 0, 0, G_OPTION_ARG_STRING, &o.network,
       "analytic (alpha-beta per tier; the default here, for speed) or flow (link sharing; slower)", "MODEL"},
      {"top", 0, 0, G_OPTION_ARG_INT64, &top, "Rows to print (default 10)", "K"},
      {"format", 0, 0, G_OPTION_ARG_STRING, &o.format, "text or json (default text)", "FMT"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  CliArgs args;
  cli_args_init(&args, "- rank the parallel configurations of a model on a GPU budget");
  g_option_context_set_summary(
      args.ctx, "Searches t (dividing the GPUs per node and the heads), p (dividing the layers), d = n/(t*p), the\n"
           "microbatch b (dividing B/d), 1F1B or interleaved with v chunks, and full or no recomputation\n"
           "(Megatron local DDP), and where t = p = 1 ZeRO stages 1-3 instead; skips what does not fit in\n"
           "memory, simulates the rest with the analytic network by default, and ranks by iteration time (the\n"
           "batch is fixed, so also by tokens/s and training days).\n\n"
           "Example:\n  ptdsim plan --model gpt3-175b --gpus 1024 --global-batch 1536 --tokens 300e9");
  cli_args_add(&args, entries);
  GError *error = NULL;
  int code = 0;
  CliFormat fmt;
  TopoCluster *cluster = NULL;
  ModelProfile *profile = NULL;
  SearchRequest sreq = {0};
  SearchResult res = {0};
  if (!cli_args_parse(&args, &argc, &argv, &error))
    goto fail;
  if (argc > 1) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unexpected argument '%s' (see ptdsim plan --help)",
                argv[1]);
    goto fail;
  }
  if (top != NOT_GIVEN && (top < 1 || top > 1000000)) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--top %" G_GINT64_FORMAT " is out of range; give a whole number from 1 to 1000000", top);
    goto fail;
  }
  if (!cli_format(o.format, &fmt, &error) || !cli_plan_request(&o, &sreq.base, &error))
    goto fail;
  if (o.network && strcmp(o.network, "analytic") != 0 && strcmp(o.network, "flow") != 0) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unknown --network '%s'; use analytic or flow",
                o.network);
    goto fail;
  }
  if (!cli_load_machine(o.cluster, o.profile, &cluster, &profile, &error))
    goto fail;
  /* Analytic by default: thousands of candidates, each simulated once. */
  const char *network = o.network ? o.network : "analytic";
  if (profile->n_coll > 0)
    network = "analytic"; /* measured collectives drive the analytic model only, as in `run` */
  sreq.base.network = network;
  sreq.allow_fewer = allow_fewer;
  sreq.keep = top == NOT_GIVEN ? 10 : (guint)top;
  if (!search_run(&sreq, profile, cluster, &res, &error))
    goto fail;
  guint k = top == NOT_GIVEN ? 10 : (guint)MIN((gint64)res.rows->len, top);
  k = MIN(k, res.rows->len);
  gboolean tokens = sreq.base.tokens > 0;
  if (fmt == CLI_JSON) {
    cJSON *json = cJSON_CreateObject();
    cJSON *rows = cJSON_AddArrayToObject(json, "rows");
    for (guint i = 0; i < k; i++)
      row_json(&g_array_index(res.rows, SearchRow, i), tokens, rows);
    cJSON_AddNumberToObject(json, "searched", res.searched);
    cJSON_AddNumberToObject(json, "simulated", res.simulated);
    cJSON_AddNumberToObject(json, "infeasible", res.infeasible);
    cJSON_AddNumberToObject(json, "out_of_memory", res.out_of_memory);
    cJSON_AddNumberToObject(json, "pruned", res.pruned);
    cJSON_AddNumberToObject(json, "ranked", res.rows->len);
    cJSON_AddStringToObject(json, "network", network);
    cJSON_AddStringToObject(json, "ranked_by", "iteration_time_s");
    cli_print_json(json);
    cJSON_Delete(json);
  } else {
    GString *text = g_string_new(NULL);
    g_string_append_printf(text,
                           "%u configurations searched: %u simulated, %u out of memory, %u infeasible, %u pruned "
                           "(network %s%s)\n",
                           res.searched, res.simulated, res.out_of_memory, res.infeasible, res.pruned, network,
                           o.network ? "" : ", the default for plan; --network flow models link sharing");
    g_string_append_printf(text, "%4s %5s %3s %3s %4s %3s %-11s %2s %-9s %11s %10s %9s", "rank", "gpus", "t", "p",
                           "d", "b", "schedule", "v", "recompute", "iteration_s", "TFLOP/s/GPU", "mem_GiB");
    if (tokens)
      g_string_append_printf(text, " %8s", "days");
    g_string_append_c(text, '\n');
    for (guint i = 0; i < k; i++) {
      const SearchRow *r = &g_array_index(res.rows, SearchRow, i);
      char sched[16];
      if (r->zero)
        g_snprintf(sched, sizeof sched, "zero-%u", r->zero);
      else
        g_strlcpy(sched, sim_schedule_name(r->schedule), sizeof sched);
      g_string_append_printf(text, "%4u %5u %3u %3u %4u %3u %-11s %2u %-9s %11.4f %10.1f %9.1f", i + 1, r->gpus,
                             r->tp, r->pp, r->dp, r->micro_batch, sched, r->chunks, r->recompute ? "full" : "none",
                             r->iteration_time_s, r->tflops_per_gpu, r->memory_GiB);
      if (tokens)
        g_string_append_printf(text, " %8.2f", r->training_days);
      g_string_append_c(text, '\n');
    }
    fputs(text->str, stdout);
    g_string_free(text, TRUE);
  }
  goto done;
fail:
  code = cli_fail(error);
done:
  search_result_clear(&res);
  topo_cluster_free(cluster);
  model_profile_free(profile);
  cli_run_options_clear(&o);
  cli_args_clear(&args);
  return code;
}
