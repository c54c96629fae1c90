/* ptdsim plan — search the configurations for a model, GPU budget and global
 * batch; rank by iteration time (and so by time to train, the batch being
 * fixed). */
#include <stdio.h>
#include <string.h>

#include "../base/text.h"
#include "../base/units.h"
#include "../plan/validate.h"
#include "cli.h"
#include "../search/planner.h"
#include "../search/pool.h"

static const char *status_word(SearchRowStatus s) {
  static const char *const words[] = {"ranked", "out_of_memory", "infeasible", "pruned"};
  return words[s];
}

/* A row's tokens per second per GPU, and its cost per million tokens at
 * `price` dollars a GPU-hour (0: no price). */
static double row_tokens_per_gpu(const SearchRow *r) { return r->tokens_per_s / r->gpus; }
static double row_cost_per_mtok(const SearchRow *r, double price) {
  return sim_cost_per_million_tokens(price, r->gpus, r->tokens_per_s);
}

static void row_json(const SearchRow *r, gboolean tokens, double price, cJSON *rows) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "gpus", r->gpus);
  cJSON_AddNumberToObject(o, "tp", r->tp);
  cJSON_AddNumberToObject(o, "pp", r->pp);
  cJSON_AddNumberToObject(o, "dp", r->dp);
  cJSON_AddNumberToObject(o, "cp", MAX(r->cp, 1u));
  if (r->ep) {
    cJSON_AddNumberToObject(o, "ep", r->ep);
    cJSON_AddNumberToObject(o, "expert_tp", r->expert_tp);
  }
  cJSON_AddNumberToObject(o, "micro_batch", r->micro_batch);
  cJSON_AddNumberToObject(o, "microbatches", r->microbatches);
  cJSON_AddStringToObject(o, "schedule", r->zero ? "zero" : sim_schedule_name(r->schedule));
  cJSON_AddNumberToObject(o, "zero", r->zero);
  cJSON_AddNumberToObject(o, "fsdp", r->fsdp); /* 0 none, 1 FSDP2, R > 1 HSDP over R replicas */
  cJSON_AddNumberToObject(o, "chunks", r->chunks);
  cJSON_AddStringToObject(o, "recompute", search_recompute_word(r->recompute));
  cJSON_AddBoolToObject(o, "sequence_parallel", r->sequence_parallel);
  cJSON_AddBoolToObject(o, "distributed_optimizer", r->distributed_optimizer);
  if (r->attention && *r->attention)
    cJSON_AddStringToObject(o, "attention", r->attention);
  if (r->uneven) { /* as run's config has it */
    cJSON *per = cJSON_AddArrayToObject(o, "layers_per_stage");
    for (guint s = 0; s < r->pp; s++)
      cJSON_AddItemToArray(per, cJSON_CreateNumber(r->stage_layers[s]));
  }
  if (r->status == SEARCH_ROW_RANKED) {
    cJSON_AddNumberToObject(o, "iteration_time_s", r->iteration_time_s);
    cJSON_AddNumberToObject(o, "tflops_per_gpu", r->tflops_per_gpu);
    cJSON_AddNumberToObject(o, "tokens_per_s", r->tokens_per_s);
    cJSON_AddNumberToObject(o, "tokens_per_s_per_gpu", row_tokens_per_gpu(r));
    if (price > 0)
      cJSON_AddNumberToObject(o, "cost_per_million_tokens", row_cost_per_mtok(r, price));
    cJSON_AddNumberToObject(o, "model_tflops_per_gpu", r->model_tflops_per_gpu);
    cJSON_AddNumberToObject(o, "mfu", r->mfu);
    cJSON_AddBoolToObject(o, "sc21_reproduction", r->sc21_reproduction);
  }
  cJSON_AddNumberToObject(o, "memory_per_gpu_GiB", r->memory_GiB);
  cJSON_AddBoolToObject(o, "fits_in_memory", r->status != SEARCH_ROW_OUT_OF_MEMORY);
  if (tokens && r->status == SEARCH_ROW_RANKED) {
    cJSON_AddNumberToObject(o, "training_days", r->training_days);
    cJSON_AddNumberToObject(o, "whole_run_days", r->run_days);
    cJSON_AddNumberToObject(o, "effective_training_time", r->effective_training_time);
    if (price > 0) /* the whole run's expected GPU-hours at the price */
      cJSON_AddNumberToObject(o, "whole_run_cost", r->run_days * 24 * r->gpus * price);
  }
  if (r->status != SEARCH_ROW_RANKED) {
    cJSON_AddStringToObject(o, "status", status_word(r->status));
    cJSON_AddStringToObject(o, "reason", r->reason);
  }
  char *cmd = search_config_command(&r->config);
  cJSON_AddStringToObject(o, "command", cmd);
  g_free(cmd);
  cJSON_AddItemToArray(rows, o);
}

/* A row's layers per stage: "16" when even, else first/middle/last
 * ("15/16/15"; "62/64" on two stages; "9/10-11/10" where the middle
 * stages differ). */
static void layers_text(const SearchRow *r, char *buf, gsize len) {
  const guint *l = r->stage_layers, p = r->pp;
  guint lo = G_MAXUINT, hi = 0;
  for (guint s = 1; s + 1 < p; s++)
    lo = MIN(lo, l[s]), hi = MAX(hi, l[s]);
  if (!r->uneven)
    g_snprintf(buf, len, "%u", l[0]);
  else if (p == 2)
    g_snprintf(buf, len, "%u/%u", l[0], l[1]);
  else if (lo == hi)
    g_snprintf(buf, len, "%u/%u/%u", l[0], lo, l[p - 1]);
  else
    g_snprintf(buf, len, "%u/%u-%u/%u", l[0], lo, hi, l[p - 1]);
}

static void row_text(GString *text, const char *label, const SearchRow *r, gboolean tokens, double price,
                     gboolean with_cp, gboolean with_layers, gboolean eq3) {
  char sched[16];
  if (r->zero)
    g_snprintf(sched, sizeof sched, "zero-%u", r->zero);
  else if (r->fsdp == 1)
    g_snprintf(sched, sizeof sched, "%s+fsdp", sim_schedule_name(r->schedule));
  else if (r->fsdp > 1)
    g_snprintf(sched, sizeof sched, "%s+hsdp%u", sim_schedule_name(r->schedule), r->fsdp);
  else
    g_strlcpy(sched, sim_schedule_name(r->schedule), sizeof sched);
  g_string_append_printf(text, "%4s %5u %3u %3u %4u", label, r->gpus, r->tp, r->pp, r->dp);
  if (with_cp)
    g_string_append_printf(text, " %3u", MAX(r->cp, 1u));
  if (r->ep)
    g_string_append_printf(text, " %3u %3u", r->ep, r->expert_tp);
  if (with_layers) {
    char layers[40] = "-";
    if (!r->zero && r->stage_layers)
      layers_text(r, layers, sizeof layers);
    g_string_append_printf(text, " %-11s", layers);
  }
  g_string_append_printf(text, " %3u %-11s %2u %-9s %-3s %-4s %-7s", r->micro_batch, sched, r->chunks, search_recompute_word(r->recompute),
                         r->sequence_parallel ? "on" : "-", r->distributed_optimizer ? "on" : "-",
                         r->attention && *r->attention ? r->attention : "-");
  if (r->status == SEARCH_ROW_RANKED) {
    if (eq3)
      g_string_append_printf(text, " %11.4f %11.1f %9.1f", r->iteration_time_s, r->tflops_per_gpu, r->memory_GiB);
    else
      g_string_append_printf(text, " %11.4f %13.1f %5.1f%% %9.1f", r->iteration_time_s, r->model_tflops_per_gpu,
                             100 * r->mfu, r->memory_GiB);
    g_string_append_printf(text, " %9.0f", row_tokens_per_gpu(r));
    if (price > 0)
      g_string_append_printf(text, " %7.3f", row_cost_per_mtok(r, price));
    if (tokens)
      g_string_append_printf(text, " %8.2f %8.2f %5.1f%%", r->training_days, r->run_days,
                             100 * r->effective_training_time);
    if (tokens && price > 0) {
      char a[32];
      g_string_append_printf(text, " %9s", ptd_format_count(r->run_days * 24 * r->gpus * price, a, sizeof a));
    }
  } else
    g_string_append_printf(text, "  %s: %s", status_word(r->status), r->reason);
  g_string_append_c(text, '\n');
}

int cli_plan(int argc, char **argv) {
  SearchConfig cfg;
  search_config_init(&cfg);
  gboolean allow_fewer = FALSE, show_all = FALSE;
  char *format = NULL, *top_text = NULL, *jobs_text = NULL, *objective_text = NULL;
  guint top = 10, jobs = search_pool_cores();
  GOptionEntry entries[] = {
      {"allow-fewer", 0, 0, G_OPTION_ARG_NONE, &allow_fewer, "Also consider t*p*d below the budget --gpus", NULL},
      {"top", 0, 0, G_OPTION_ARG_STRING, &top_text, "Rows to print (default 10)", "K"},
      {"show-all", 0, 0, G_OPTION_ARG_NONE, &show_all,
       "Also list every candidate not ranked (out of memory, infeasible, pruned) with the reason", NULL},
      {"jobs", 'j', 0, G_OPTION_ARG_STRING, &jobs_text, "Threads simulating (default: all cores)", "N"},
      {"format", 0, 0, G_OPTION_ARG_STRING, &format, "text or json (default text)", "FMT"},
      {"objective", 0, 0, G_OPTION_ARG_STRING, &objective_text,
       "Rank by time (the iteration time, default), cost (GPU-hours a token: with --tokens the whole run's, "
       "failures included) or tokens-per-dollar (the same at the steady pace); cost and tokens-per-dollar differ "
       "from time with --allow-fewer",
       "WHAT"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  CliArgs args;
  cli_args_init(&args, "- rank the parallel configurations of a model on a GPU budget");
  g_option_context_set_summary(
      args.ctx,
      "Searches t (dividing the GPUs per node and the heads), p (dividing the layers, or with the first\n"
      "and last stages a few layers short, as Megatron's uneven split), d = n/(t*p), the microbatch b\n"
      "(dividing B/d), 1F1B or interleaved with v chunks, and full or no recomputation (Megatron local\n"
      "DDP), and where t = p = 1 ZeRO stages 1-3 instead; skips what does not fit in\n"
      "memory, simulates the rest with the analytic network by default, and ranks by iteration time (the\n"
      "batch is fixed, so also by tokens/s and training days).  --gpus is the budget.  Any other\n"
      "configuration option pins the search: --tp 8 searches t = 8 only, --schedule interleaved the\n"
      "interleaved schedule only, --no-fusion runs every candidate unfused.  Every ranked row comes with\n"
      "the ptdsim run command that reproduces it.  Throughput is model TFLOP/s per GPU and MFU (the model's\n"
      "FLOPs, no recomputation); SC21's Eq. 3 where every row shown is an SC21 reproduction (GPT, 2021 stack).\n\n"
      "Example:\n  ptdsim plan --model gpt3-175b --gpus 1024 --global-batch 1536 --tokens 300e9");
  cli_config_add(&args, &cfg);
  cli_args_add(&args, entries);
  GError *error = NULL;
  int code = 0;
  CliFormat fmt;
  TopoCluster *cluster = NULL;
  ModelProfile *profile = NULL;
  SearchResult res = {0};
  if (!cli_args_parse(&args, &argc, &argv, &error))
    goto fail;
  if (argc > 1) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unexpected argument '%s' (see ptdsim plan --help)",
                argv[1]);
    goto fail;
  }
  if ((top_text && !cli_count("--top", top_text, 1, 1000000, &top, &error)) ||
      (jobs_text && !cli_count("--jobs", jobs_text, 1, 4096, &jobs, &error)))
    goto fail;
  const char *network = cfg.text[SEARCH_OPT_NETWORK];
  if (network && strcmp(network, "analytic") != 0 && strcmp(network, "flow") != 0) {
    char *echo = ptd_echo(network, PTD_ECHO_MAX, FALSE);
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unknown --network '%s'; use analytic or flow", echo);
    g_free(echo);
    goto fail;
  }
  if (cfg.given[SEARCH_OPT_ALLOW_OOM]) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "plan ranks configurations that fit; --allow-oom belongs to run and sweep (--show-all lists what "
                "does not fit)");
    goto fail;
  }
  /* what the search cannot honour, said before it runs (its candidates
   * would each be refused, and the first refusal would name another cause) */
  if (cfg.given[SEARCH_OPT_SCHEDULE_FILE]) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "plan searches the schedules itself, so it does not take --schedule-file; run your schedule with "
                "ptdsim run or sweep --schedule-file");
    goto fail;
  }
  const SimScheduleInfo *named = sim_schedule_find(cfg.text[SEARCH_OPT_SCHEDULE]);
  if (named && !sim_plan_activation_limit_check(named, cfg.given[SEARCH_OPT_ACTIVATION_LIMIT], &error))
    goto fail;
  static const PtdWord objectives[] = {{"time", SEARCH_OBJECTIVE_TIME},
                                       {"cost", SEARCH_OBJECTIVE_COST},
                                       {"tokens-per-dollar", SEARCH_OBJECTIVE_TOKENS_PER_DOLLAR},
                                       {NULL, 0}};
  int objective = SEARCH_OBJECTIVE_TIME;
  if (objective_text && !ptd_word_value(objectives, objective_text, &objective)) {
    char *echo = ptd_echo(objective_text, PTD_ECHO_MAX, FALSE);
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "unknown --objective '%s'; use time, cost or tokens-per-dollar", echo);
    g_free(echo);
    goto fail;
  }
  RtOptions rt;
  if (!cli_format(format, &fmt, &error) || !search_config_runtime(&cfg, &rt, &error) ||
      !cli_load_machine_sized(cfg.text[SEARCH_OPT_CLUSTER], cfg.count[SEARCH_OPT_NODES], cfg.text[SEARCH_OPT_PROFILE],
                              &cluster, &profile, &error))
    goto fail;
  SearchRequest sreq = {&cfg, allow_fewer, top, jobs, show_all, (SearchObjective)objective};
  if (!search_run(&sreq, profile, cluster, &res, &error))
    goto fail;
  guint k = MIN(sreq.keep, res.rows->len);
  /* the model searched and its parameters */
  ModelShape shape = res.model;
  guint64 params = model_param_count(&shape);
  gboolean moe = model_is_moe(&shape);
  guint64 active = moe ? model_active_param_count(&shape) : params;
  gboolean tokens = cfg.given[SEARCH_OPT_TOKENS];
  /* a GPU-hour's price, as every candidate's plan resolved it (0: none) */
  double price = res.rows->len ? g_array_index(res.rows, SearchRow, 0).price_per_gpu_hour : 0;
  const char *used = res.rows->len ? g_array_index(res.rows, SearchRow, 0).config.text[SEARCH_OPT_NETWORK] : "";
  /* The throughput shown: Eq. 3 when every row shown is an SC21
   * reproduction (comparable with the paper), else model FLOPs and MFU for
   * all, so that one column never mixes the two. */
  gboolean eq3 = k > 0;
  for (guint i = 0; i < k; i++)
    eq3 = eq3 && g_array_index(res.rows, SearchRow, i).sc21_reproduction;
  if (fmt == CLI_JSON) {
    cJSON *json = cJSON_CreateObject();
    cJSON *rows = cJSON_AddArrayToObject(json, "rows");
    for (guint i = 0; i < k; i++)
      row_json(&g_array_index(res.rows, SearchRow, i), tokens, price, rows);
    if (show_all) {
      cJSON *rej = cJSON_AddArrayToObject(json, "rejected");
      for (guint i = 0; i < res.rejected->len; i++)
        row_json(&g_array_index(res.rejected, SearchRow, i), tokens, price, rej);
    }
    if (params) {
      cJSON_AddNumberToObject(json, "parameters", (double)params);
      if (moe)
        cJSON_AddNumberToObject(json, "active_parameters", (double)active);
    }
    cJSON_AddNumberToObject(json, "searched", res.searched);
    cJSON_AddNumberToObject(json, "simulated", res.simulated);
    cJSON_AddNumberToObject(json, "infeasible", res.infeasible);
    cJSON_AddNumberToObject(json, "out_of_memory", res.out_of_memory);
    cJSON_AddNumberToObject(json, "pruned", res.pruned);
    cJSON_AddNumberToObject(json, "ranked", res.rows->len);
    cJSON_AddStringToObject(json, "network", used);
    cJSON_AddStringToObject(json, "ranked_by", objective == SEARCH_OBJECTIVE_TIME ? "iteration_time_s"
                                               : objective == SEARCH_OBJECTIVE_COST
                                                   ? (tokens ? "whole_run_gpu_hours" : "gpu_seconds_per_iteration")
                                                   : "gpu_seconds_per_iteration");
    if (price > 0)
      cJSON_AddNumberToObject(json, "price_per_gpu_hour", price);
    cJSON_AddStringToObject(json, "throughput", eq3 ? "tflops_per_gpu" : "model_tflops_per_gpu");
    cli_print_json(json);
    cJSON_Delete(json);
  } else {
    GString *text = g_string_new(NULL);
    if (params) {
      g_string_append_printf(text, "model      %u layers, hidden %u, %u heads, seq %u, vocab %u: %.2fB parameters",
                             shape.layers, shape.hidden, shape.heads, shape.seq_len, shape.vocab, params / 1e9);
      if (moe)
        g_string_append_printf(text, " (%.2fB active)", active / 1e9);
      g_string_append_c(text, '\n');
    }
    g_string_append_printf(text,
                           "%u configurations searched: %u simulated, %u out of memory, %u infeasible, %u pruned "
                           "(network %s%s)\n",
                           res.searched, res.simulated, res.out_of_memory, res.infeasible, res.pruned, used,
                           network ? "" : ", the default for plan; --network flow models link sharing");
    /* a cp column where context parallelism was searched or pinned */
    gboolean with_cp = FALSE;
    for (guint i = 0; i < res.rows->len; i++)
      with_cp = with_cp || g_array_index(res.rows, SearchRow, i).cp > 1;
    for (guint i = 0; i < res.rejected->len; i++)
      with_cp = with_cp || g_array_index(res.rejected, SearchRow, i).cp > 1;
    /* a layers column where some row splits its pipeline unevenly */
    gboolean with_layers = FALSE;
    for (guint i = 0; i < k; i++)
      with_layers = with_layers || g_array_index(res.rows, SearchRow, i).uneven;
    for (guint i = 0; show_all && i < res.rejected->len; i++)
      with_layers = with_layers || g_array_index(res.rejected, SearchRow, i).uneven;
    g_string_append_printf(text, "%4s %5s %3s %3s %4s", "rank", "gpus", "t", "p", "d");
    if (with_cp)
      g_string_append_printf(text, " %3s", "cp");
    if ((res.rows->len && g_array_index(res.rows, SearchRow, 0).ep) ||
        (res.rejected->len && g_array_index(res.rejected, SearchRow, 0).ep))
      g_string_append_printf(text, " %3s %3s", "ep", "etp");
    if (with_layers)
      g_string_append_printf(text, " %-11s", "layers");
    g_string_append_printf(text, " %3s %-11s %2s %-9s %-3s %-4s %-7s %11s", "b", "schedule", "v", "recompute", "sp",
                           "dopt", "attn", "iteration_s");
    if (eq3)
      g_string_append_printf(text, " %11s %9s", "Eq3_TFLOP/s", "mem_GiB");
    else
      g_string_append_printf(text, " %13s %6s %9s %9s", "model_TFLOP/s", "MFU", "mem_GiB", "tok/s/GPU");
    if (eq3)
      g_string_append_printf(text, " %9s", "tok/s/GPU");
    if (price > 0)
      g_string_append_printf(text, " %7s", "$/Mtok");
    if (tokens)
      g_string_append_printf(text, " %8s %8s %6s", "days", "run_days", "ETT");
    if (tokens && price > 0)
      g_string_append_printf(text, " %9s", "run_cost");
    g_string_append_c(text, '\n');
    for (guint i = 0; i < k; i++) {
      char label[16];
      g_snprintf(label, sizeof label, "%u", i + 1);
      row_text(text, label, &g_array_index(res.rows, SearchRow, i), tokens, price, with_cp, with_layers, eq3);
    }
    if (k && tokens)
      g_string_append(text, "\nrun_days: the whole run's expected days with failures, restarts and checkpoints; ETT: "
                            "its effective training time (doc/runtime.md)\n");
    if (k && eq3)
      g_string_append(text, "\nEq3_TFLOP/s: per GPU by SC21's Eq. 3, as the paper reports its runs (it counts a "
                            "recomputation forward always)\n");
    else if (k)
      g_string_append_printf(text, "\nmodel_TFLOP/s: the model's FLOPs per second per GPU (forward and backward, "
                                   "attention included, no recomputation);\nMFU: model_TFLOP/s over %s's %s peak, %.1f "
                                   "TFLOP/s\n",
                             profile->name, g_array_index(res.rows, SearchRow, 0).precision,
                             g_array_index(res.rows, SearchRow, 0).peak_tflops);
    if (k && price > 0)
      g_string_append_printf(text, "$/Mtok: dollars per million tokens at $%.2f per GPU-hour%s\n", price,
                             tokens ? "; run_cost: the whole run's expected GPU-hours at that price" : "");
    if (k && objective != SEARCH_OBJECTIVE_TIME)
      g_string_append_printf(text, "ranked by %s\n",
                             objective == SEARCH_OBJECTIVE_COST && tokens
                                 ? "cost: the whole run's expected GPU-hours (failures and checkpoints included)"
                                 : "GPU-hours per token (the cost of a token at any price)");
    g_string_append(text, "\nto reproduce a row:\n");
    for (guint i = 0; i < k; i++) {
      char *cmd = search_config_command(&g_array_index(res.rows, SearchRow, i).config);
      g_string_append_printf(text, "%4u  %s\n", i + 1, cmd);
      g_free(cmd);
    }
    if (show_all && res.rejected->len) {
      g_string_append_printf(text, "\nnot ranked (%u):\n", res.rejected->len);
      for (guint i = 0; i < res.rejected->len; i++)
        row_text(text, "-", &g_array_index(res.rejected, SearchRow, i), tokens, price, with_cp, with_layers, eq3);
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
  search_config_clear(&cfg);
  g_free(format);
  g_free(top_text);
  g_free(objective_text);
  g_free(jobs_text);
  cli_args_clear(&args);
  return code;
}
