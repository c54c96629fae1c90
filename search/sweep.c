/* ptdsim — the rows of a sweep (see sweep.h). */
#include "sweep.h"

#include <string.h>

#include "../base/jsonutil.h"
#include "../traces/figures.h"
#include "../traces/runner.h"

/* Every result of `run --format json` (the output contract, doc/output.md),
 * flattened: a test checks that no key of run's JSON is missing here. */
static const char *const result_columns[] = {
    "config.layers", "config.hidden", "config.heads", "config.seq_len", "config.vocab", "config.ffn_hidden",
    "config.query_groups", "config.kv_channels", "config.mlp", "config.norm", "config.position_embedding",
    "config.tied_embeddings", "config.linear_bias", "config.parameters",
    "config.gpus", "config.tp", "config.pp", "config.dp", "config.cp", "config.global_batch", "config.micro_batch",
    "config.microbatches", "config.chunks", "config.layers_per_stage", "config.layers_per_virtual_stage", "config.schedule", "config.recompute", "config.ddp", "config.distributed_optimizer", "config.sequence_parallel", "config.tp_comm_overlap", "config.overlap_param_gather", "config.attention", "config.precision",
    "config.scatter_gather", "config.fusion", "config.cluster", "config.profile", "config.network",
    "config.placement", "config.workload", "config.zero", "config.zero_prefetch_bucket_size",
    "config.zero_max_live_parameters", "config.zero_max_reuse_distance", "config.zero_param_persistence_threshold",
    "config.zero_reduce_bucket_size", "config.zero_contiguous_gradients", "config.zero_trace_fixed", "config.fsdp",
    "config.hsdp_replicas", "config.fsdp_reduce_dtype", "config.fsdp_reshard_after_forward", "iteration_time_s", "tflops_per_gpu",
    "hardware_tflops_per_gpu", "percent_of_peak", "mfu_percent", "hfu_percent", "tokens_per_s", "aggregate_pflops", "bubble_fraction", "analytic_bubble_fraction",
    "time_breakdown_s.compute", "time_breakdown_s.tp_comm", "time_breakdown_s.pp_comm", "time_breakdown_s.dp_comm",
    "time_breakdown_s.optimizer", "time_breakdown_s.bubble", "critical_stage", "bytes_per_iteration.tp",
    "bytes_per_iteration.pp", "bytes_per_iteration.dp", "bytes_per_iteration.cp", "bytes_per_iteration.embedding",
    "sharded_per_gpu.param_allgathers", "sharded_per_gpu.param_allgather_bytes", "sharded_per_gpu.grad_reductions",
    "sharded_per_gpu.grad_reduction_bytes", "sharded_per_gpu.host_s", "bisection_bandwidth_GBps.pp", "bisection_bandwidth_GBps.dp", "memory_per_gpu_GiB.weights",
    "memory_per_gpu_GiB.gradients", "memory_per_gpu_GiB.optimizer", "memory_per_gpu_GiB.activations",
    "memory_per_gpu_GiB.total", "memory_per_gpu_GiB.stage", "memory_per_gpu_GiB.reserve", "fits_in_memory", "memory_note", "tokens",
    "training_days", "gpu_hours", "simulation.ops", "simulation.events", "simulation.simulated_gpus", "simulation.symmetry",
    "terapipe.idle_fraction", "terapipe.analytic_idle_fraction", "terapipe.token_slices_in_pipeline",
    "terapipe.granularity", "terapipe.batch_slices", "terapipe.token_slices", "terapipe.dp_predicted_latency_s",
    "terapipe.dp_candidates_solved", "terapipe.context_fit_max_rel_error", "terapipe.context_fit_mean_rel_error",
    /* appended after the columns above, which keep their places */
    "model_tflops_per_gpu", "mfu", "sc21_reproduction",
    "whole_run.expected.days", "whole_run.expected.effective_training_time", "whole_run.expected.gpu_hours",
    "whole_run.expected.interruptions", "whole_run.checkpoint.every_iterations", "whole_run.checkpoint.write_s",
    "whole_run.monte_carlo.median_days", "whole_run.monte_carlo.p90_days", "whole_run.iterations", "whole_run.nodes",
    "whole_run.switches", "whole_run.failures", "whole_run.restart", "whole_run.checkpoint", "whole_run.expected",
    "whole_run.monte_carlo", "stragglers",
    /* mixture of experts (present for MoE models) */
    "config.active_parameters", "config.experts", "config.moe_topk", "config.moe_ffn_hidden",
    "config.moe_shared_ffn_hidden", "config.moe_layers", "config.q_lora_rank", "config.kv_lora_rank",
    "config.qk_rope_head_dim", "config.v_head_dim", "config.mtp_layers", "config.ep", "config.expert_tp",
    "config.expert_dp", "config.moe_token_dispatcher", "config.moe_imbalance", "config.moe_capacity_factor",
    "bytes_per_iteration.ep", "moe.comm_s", "moe.comm_fraction", "moe.dispatch_bytes_per_rank",
    "moe.tokens_per_expert",
    /* the pipeline schedule (doc/schedules.md) */
    "config.stage_times_ms", "pipeline_schedule.span_s", "pipeline_schedule.bubble_s", "pipeline_schedule.bubble_rate",
    "pipeline_schedule.peak_inflight_microbatches", "pipeline_schedule.peak_inflight_per_stage",
    /* the step as a framework runs it (doc/model.md) */
    "config.framework", "config.host_op_us", "config.clock", "step_effects_s.clock",
    "step_effects_s.framework_kernels", "step_effects_s.host_launch", "step_effects_s.contention",
    /* the pipeline's layout; throughput per GPU and cost (doc/output.md) */
    "config.pipeline_layout", "tokens_per_s_per_gpu", "price_per_gpu_hour", "cost_per_million_tokens", "cost",
    "whole_run.expected.cost"};

const char *const *search_sweep_result_columns(guint *n) {
  *n = G_N_ELEMENTS(result_columns);
  return result_columns;
}

const char *search_sweep_status_name(SearchSweepStatus s) {
  static const char *const names[] = {"ok", "out_of_memory", "invalid"};
  return s < SEARCH_SWEEP_N_STATUS ? names[s] : "?";
}

char *search_sweep_header(const SearchGrid *g, SearchSweepFormat f) {
  if (f != SEARCH_SWEEP_CSV)
    return NULL;
  GString *s = g_string_new("index");
  for (guint c = 0; c < search_grid_n_columns(g); c++) {
    g_string_append_c(s, ',');
    trace_csv_text(s, search_grid_column(g, c));
  }
  g_string_append(s, ",status,reason");
  for (guint i = 0; i < G_N_ELEMENTS(result_columns); i++)
    g_string_append_printf(s, ",%s", result_columns[i]);
  g_string_append_c(s, '\n');
  return g_string_free(s, FALSE);
}

static const cJSON *at_path(const cJSON *o, const char *path) {
  char **parts = g_strsplit(path, ".", -1);
  for (guint i = 0; parts[i] && o; i++)
    o = cJSON_GetObjectItemCaseSensitive(o, parts[i]);
  g_strfreev(parts);
  return o;
}

/* A column's value as JSON: counts and set values as numbers, flags as
 * booleans, words as strings. */
static cJSON *typed(const SearchGrid *g, guint c, const char *v) {
  gint id = search_option_find(search_grid_column(g, c));
  if (id < 0 || search_option((SearchOptId)id)->kind == SEARCH_OPT_COUNT)
    return cJSON_CreateNumber(g_ascii_strtod(v, NULL));
  if (search_option((SearchOptId)id)->kind == SEARCH_OPT_FLAG)
    return cJSON_CreateBool(strcmp(v, "true") == 0);
  return cJSON_CreateString(v);
}

char *search_sweep_row(const SearchGrid *g, guint64 k, SearchSweepFormat f, SearchSweepStatus *status) {
  SearchConfig cfg;
  const TopoCluster *cluster;
  const ModelProfile *profile;
  SimPlanRequest req;
  RtOptions rt;
  GError *error = NULL;
  cJSON *run = NULL;
  if (search_grid_point(g, k, &cfg, &cluster, &profile, &error) && search_config_request(&cfg, &req, &error) &&
      search_config_runtime(&cfg, &rt, &error)) {
    req.step_effects = search_grid_step_effects(g); /* the step's breakdown: a run per effect, on request */
    run = trace_run_full(&req, &rt, cluster, profile, NULL, 0, &error);
  }
  *status = run ? SEARCH_SWEEP_OK
                : g_error_matches(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_OOM) ? SEARCH_SWEEP_OUT_OF_MEMORY
                                                                             : SEARCH_SWEEP_INVALID;
  if (run)
    ptd_json_exact_numbers(run);
  GString *s = g_string_new(NULL);
  if (f == SEARCH_SWEEP_CSV) {
    g_string_append_printf(s, "%" G_GUINT64_FORMAT, k);
    for (guint c = 0; c < search_grid_n_columns(g); c++) {
      g_string_append_c(s, ',');
      trace_csv_text(s, search_grid_value(g, k, c));
    }
    g_string_append_printf(s, ",%s,", search_sweep_status_name(*status));
    if (error)
      trace_csv_text(s, error->message);
    for (guint i = 0; i < G_N_ELEMENTS(result_columns); i++) {
      g_string_append_c(s, ',');
      if (run)
        trace_csv_cell(s, at_path(run, result_columns[i]));
    }
  } else {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", (double)k);
    cJSON *opts = cJSON_AddObjectToObject(o, "options");
    for (guint c = 0; c < search_grid_n_columns(g); c++)
      cJSON_AddItemToObject(opts, search_grid_column(g, c), typed(g, c, search_grid_value(g, k, c)));
    cJSON_AddStringToObject(o, "status", search_sweep_status_name(*status));
    if (error)
      cJSON_AddStringToObject(o, "reason", error->message);
    else
      cJSON_AddNullToObject(o, "reason");
    if (run)
      cJSON_AddItemToObject(o, "result", run), run = NULL;
    else
      cJSON_AddNullToObject(o, "result");
    ptd_json_exact_numbers(o);
    char *text = cJSON_PrintUnformatted(o);
    g_string_append(s, text);
    cJSON_free(text);
    cJSON_Delete(o);
  }
  g_string_append_c(s, '\n');
  cJSON_Delete(run);
  g_clear_error(&error);
  search_config_clear(&cfg);
  return g_string_free(s, FALSE);
}

/* --- reading a row back --- */

/* Splits one CSV line into its fields (quotes as trace_csv_text writes
 * them).  NULL if a quote is not closed. */
static GPtrArray *csv_fields(const char *line) {
  GPtrArray *fields = g_ptr_array_new_with_free_func(g_free);
  GString *cur = g_string_new(NULL);
  const char *p = line;
  for (;;) {
    if (*p == '"') {
      for (p++;; p++) {
        if (!*p) {
          g_string_free(cur, TRUE);
          g_ptr_array_unref(fields);
          return NULL;
        }
        if (*p == '"' && p[1] == '"')
          g_string_append_c(cur, '"'), p++;
        else if (*p == '"') {
          p++;
          break;
        } else
          g_string_append_c(cur, *p);
      }
    }
    while (*p && *p != ',')
      g_string_append_c(cur, *p++);
    g_ptr_array_add(fields, g_strdup(cur->str));
    g_string_truncate(cur, 0);
    if (!*p)
      break;
    p++;
  }
  g_string_free(cur, TRUE);
  return fields;
}

static gboolean mismatch(GError **error, guint64 k, const char *what) {
  g_set_error(error, SEARCH_GRID_ERROR, SEARCH_GRID_ERROR_SPEC, "row %" G_GUINT64_FORMAT " %s", k, what);
  return FALSE;
}

static gboolean status_of(const char *word, SearchSweepStatus *out) {
  for (guint s = 0; s < SEARCH_SWEEP_N_STATUS; s++)
    if (strcmp(word, search_sweep_status_name((SearchSweepStatus)s)) == 0) {
      *out = (SearchSweepStatus)s;
      return TRUE;
    }
  return FALSE;
}

gboolean search_sweep_check_row(const SearchGrid *g, SearchSweepFormat f, const char *line, guint64 k,
                                SearchSweepStatus *status, GError **error) {
  guint nc = search_grid_n_columns(g);
  char *index = g_strdup_printf("%" G_GUINT64_FORMAT, k);
  gboolean ok = TRUE;
  if (f == SEARCH_SWEEP_CSV) {
    GPtrArray *fields = csv_fields(line);
    if (!fields || fields->len != 1 + nc + 2 + G_N_ELEMENTS(result_columns))
      ok = mismatch(error, k, "is not a row of this sweep's CSV (another number of columns)");
    else if (strcmp(g_ptr_array_index(fields, 0), index) != 0)
      ok = mismatch(error, k, "has another index");
    for (guint c = 0; ok && c < nc; c++)
      if (strcmp(g_ptr_array_index(fields, 1 + c), search_grid_value(g, k, c)) != 0) {
        char *what = g_strdup_printf("has %s %s where this sweep has %s", search_grid_column(g, c),
                                     (const char *)g_ptr_array_index(fields, 1 + c), search_grid_value(g, k, c));
        ok = mismatch(error, k, what);
        g_free(what);
      }
    if (ok && !status_of(g_ptr_array_index(fields, 1 + nc), status))
      ok = mismatch(error, k, "has no status");
    if (fields)
      g_ptr_array_unref(fields);
  } else {
    cJSON *o = cJSON_Parse(line);
    const cJSON *idx = cJSON_GetObjectItemCaseSensitive(o, "index"), *opts = cJSON_GetObjectItemCaseSensitive(o, "options");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");
    if (!cJSON_IsObject(o) || !cJSON_IsNumber(idx) || !cJSON_IsObject(opts) || !cJSON_IsString(st))
      ok = mismatch(error, k, "is not a row of a sweep's JSONL");
    else if (idx->valuedouble != (double)k)
      ok = mismatch(error, k, "has another index");
    else if (cJSON_GetArraySize(opts) != (int)nc)
      ok = mismatch(error, k, "has other options");
    for (guint c = 0; ok && c < nc; c++) {
      cJSON *want = typed(g, c, search_grid_value(g, k, c));
      const cJSON *got = cJSON_GetObjectItemCaseSensitive(opts, search_grid_column(g, c));
      if (!got || !cJSON_Compare(want, got, TRUE)) {
        char *what = g_strdup_printf("has another %s than this sweep (%s)", search_grid_column(g, c),
                                     search_grid_value(g, k, c));
        ok = mismatch(error, k, what);
        g_free(what);
      }
      cJSON_Delete(want);
    }
    if (ok && !status_of(st->valuestring, status))
      ok = mismatch(error, k, "has no status");
    cJSON_Delete(o);
  }
  g_free(index);
  return ok;
}
