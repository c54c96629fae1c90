/* ptdsim — TeraPipe figures (see terapipe_figs.h).
 *
 * The GPipe baseline is the same simulator with one token slice per batch
 * slice (whole-sequence microbatches, all forwards then all backwards, a
 * synchronous flush), with the microbatch size b that runs fastest among the
 * divisors of the per-pipeline batch that fit in memory.  TeraPipe is
 * --slices auto: the joint batch and token DP, then the simulation. */
#include "terapipe_figs.h"

#include <math.h>
#include <string.h>

#include "../base/jsonutil.h"
#include "../models/layer.h"
#include "../sim/terapipe.h"

const char *trace_figure_default_cluster(const char *figure_name) {
  return figure_name && g_str_has_prefix(figure_name, "terapipe-") ? "aws-p3-16xlarge" : NULL;
}

static gboolean bad_ref(GError **error, const char *what) {
  g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "terapipe-icml21.json: %s", what);
  return FALSE;
}

gboolean trace_terapipe_setting(guint id, const char *slices, guint micro_batch, SimPlanRequest *req,
                                GError **error) {
  return trace_terapipe_setting_as(id, slices, micro_batch, NULL, req, error);
}

gboolean trace_terapipe_setting_as(guint id, const char *slices, guint micro_batch, const char *workload,
                                   SimPlanRequest *req, GError **error) {
  memset(req, 0, sizeof *req);
  cJSON *ref = trace_reference_load("terapipe-icml21.json", error);
  if (!ref)
    return FALSE;
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ref, "settings"), "rows");
  const cJSON *row, *found = NULL;
  cJSON_ArrayForEach(row, rows) {
    const cJSON *first = cJSON_GetArrayItem(row, 0);
    if (cJSON_IsNumber(first) && first->valuedouble == id)
      found = row;
  }
  gboolean ok = FALSE;
  if (!found)
    bad_ref(error, "settings.rows has no such setting");
  else {
    const cJSON *name = cJSON_GetArrayItem(found, 1);
    double v[5];
    ok = cJSON_IsString(name) && cJSON_GetArraySize(found) == 7;
    for (int c = 0; ok && c < 5; c++) {
      const cJSON *x = cJSON_GetArrayItem(found, 2 + c);
      ok = cJSON_IsNumber(x) && x->valuedouble >= 1 && x->valuedouble == floor(x->valuedouble) && x->valuedouble < 1e6;
      v[c] = ok ? x->valuedouble : 0;
    }
    if (ok && !model_lookup(name->valuestring, &req->model))
      ok = FALSE;
    if (!ok)
      bad_ref(error, "a settings row is malformed (want [id, model, gpus, global_batch, data, pipe, op])");
    else {
      req->gpus = (guint)v[0];
      req->global_batch = (guint)v[1];
      req->dp = (guint)v[2];
      req->pp = (guint)v[3];
      req->tp = (guint)v[4];
      req->micro_batch = micro_batch;
      req->schedule = "terapipe";
      req->slices = slices;
      /* TeraPipe's evaluation (test_transformer_terapipe.py): the layers
       * alone, all activations kept, no recomputation. */
      req->workload = workload ? workload : "layers";
      req->recompute = "none";
    }
  }
  cJSON_Delete(ref);
  return ok;
}

/* --- one setting, both ways --- */

typedef struct {
  double gpipe_s;
  guint gpipe_b;
  double tera_s;
  SimTeraPipeSlicing slicing;
  SimPlan plan;
} Pair;

static gboolean run_gpipe(const TraceFigureContext *ctx, SimPlanRequest req, Pair *out, GError **error) {
  guint Bp = req.global_batch / req.dp;
  out->gpipe_s = INFINITY;
  for (guint b = 1; b <= Bp; b++) {
    if (Bp % b)
      continue;
    req.micro_batch = b;
    req.slices = "uniform:1";
    SimPlan plan;
    SimTeraPipeSlicing sl;
    SimResult r;
    if (!sim_plan_build(&req, ctx->cluster, &plan, error))
      return FALSE;
    GError *local = NULL;
    gboolean ok = sim_terapipe_choose(&plan, ctx->profile, ctx->cluster, &sl, &local) &&
                  sim_terapipe_simulate(&plan, ctx->profile, ctx->cluster, &sl, &r, &local);
    sim_terapipe_slicing_clear(&sl);
    if (!ok) {
      if (g_error_matches(local, SIM_PLAN_ERROR, SIM_PLAN_ERROR_OOM)) {
        g_clear_error(&local);
        continue; /* this microbatch size does not fit */
      }
      g_propagate_error(error, local);
      return FALSE;
    }
    if (r.iteration_time_s < out->gpipe_s) {
      out->gpipe_s = r.iteration_time_s;
      out->gpipe_b = b;
    }
  }
  if (!isfinite(out->gpipe_s)) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_OOM, "GPipe does not fit in memory with any microbatch size");
    return FALSE;
  }
  return TRUE;
}

static gboolean run_pair(const TraceFigureContext *ctx, const SimPlanRequest *req, Pair *out, GError **error) {
  memset(out, 0, sizeof *out);
  if (!run_gpipe(ctx, *req, out, error))
    return FALSE;
  SimPlanRequest r = *req;
  r.slices = "auto";
  r.micro_batch = 1;
  SimResult res;
  if (!sim_plan_build(&r, ctx->cluster, &out->plan, error) ||
      !sim_terapipe_choose(&out->plan, ctx->profile, ctx->cluster, &out->slicing, error) ||
      !sim_terapipe_simulate(&out->plan, ctx->profile, ctx->cluster, &out->slicing, &res, error))
    return FALSE;
  out->tera_s = res.iteration_time_s;
  return TRUE;
}

static guint total_slices(const SimTeraPipeSlicing *s) { return sim_terapipe_slicing_count(s); }

/* --- figure 5: latency of settings 1-10, GPipe vs TeraPipe --- */

gboolean trace_terapipe_fig5(const TraceFigureContext *ctx, cJSON *json, GString *text, GError **error) {
  cJSON *rows = cJSON_AddArrayToObject(json, "rows");
  if (text)
    g_string_append_printf(text,
                           "TeraPipe figure 5 on %s with %s: per-iteration latency\n%7s %-10s %5s %4s %4s %4s %3s  "
                           "%9s %3s  %9s %7s  %s\n",
                           ctx->cluster->name, ctx->profile->name, "setting", "model", "gpus", "B", "d", "p", "t",
                           "gpipe s", "b", "terapipe s", "speedup",
                           "slicing: batch slices x sequences, token slices each");
  for (guint id = 1; id <= 10; id++) {
    SimPlanRequest req;
    Pair pr;
    if (!trace_terapipe_setting_as(id, "auto", 1, ctx->workload, &req, error))
      return FALSE;
    if (!run_pair(ctx, &req, &pr, error)) {
      sim_terapipe_slicing_clear(&pr.slicing);
      g_prefix_error(error, "setting %u: ", id);
      return FALSE;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "setting", id);
    cJSON_AddNumberToObject(o, "layers", req.model.layers);
    cJSON_AddNumberToObject(o, "hidden", req.model.hidden);
    cJSON_AddNumberToObject(o, "gpus", req.gpus);
    cJSON_AddNumberToObject(o, "global_batch", req.global_batch);
    cJSON_AddNumberToObject(o, "data", req.dp);
    cJSON_AddNumberToObject(o, "pipe", req.pp);
    cJSON_AddNumberToObject(o, "op", req.tp);
    cJSON_AddNumberToObject(o, "gpipe_latency_s", pr.gpipe_s);
    cJSON_AddNumberToObject(o, "gpipe_micro_batch", pr.gpipe_b);
    cJSON_AddNumberToObject(o, "terapipe_latency_s", pr.tera_s);
    cJSON_AddNumberToObject(o, "speedup", pr.gpipe_s / pr.tera_s);
    cJSON *sl = cJSON_AddObjectToObject(o, "slices");
    sim_terapipe_slicing_json(&pr.slicing, sl);
    cJSON_AddItemToArray(rows, o);
    if (text) {
      char label[32];
      g_snprintf(label, sizeof label, "%.1fB", model_param_count(&req.model) / 1e9);
      g_string_append_printf(text, "%7u %-10s %5u %4u %4u %4u %3u  %9.3f %3u  %9.3f %6.2fx  ", id, label, req.gpus, req.global_batch, req.dp, req.pp, req.tp,
                             pr.gpipe_s, pr.gpipe_b, pr.tera_s, pr.gpipe_s / pr.tera_s);
      sim_terapipe_slicing_describe(&pr.slicing, TRUE, text);
      g_string_append_c(text, '\n');
    }
    sim_terapipe_slicing_clear(&pr.slicing);
  }
  cJSON_AddStringToObject(json, "source", "Li et al., ICML 2021, figure 5 (settings of Table 1)");
  cJSON_AddStringToObject(json, "gpipe_baseline",
                          "whole-sequence microbatches, GPipe order, fastest microbatch size that fits");
  return TRUE;
}

/* --- figure 6: uniform slicing vs the DP, settings 8 and 9 --- */

gboolean trace_terapipe_fig6(const TraceFigureContext *ctx, cJSON *json, GString *text, GError **error) {
  static const guint ids[] = {8, 9}, max_n[] = {16, 128};
  cJSON *settings = cJSON_AddArrayToObject(json, "settings");
  for (guint x = 0; x < G_N_ELEMENTS(ids); x++) {
    SimPlanRequest req;
    SimPlan plan;
    SimTeraPipeSlicing dp;
    SimResult r;
    if (!trace_terapipe_setting_as(ids[x], "auto", 1, ctx->workload, &req, error) ||
        !sim_plan_build(&req, ctx->cluster, &plan, error))
      return FALSE;
    if (!sim_terapipe_choose(&plan, ctx->profile, ctx->cluster, &dp, error))
      return FALSE;
    if (!sim_terapipe_simulate(&plan, ctx->profile, ctx->cluster, &dp, &r, error)) {
      sim_terapipe_slicing_clear(&dp);
      return FALSE;
    }
    double dp_s = r.iteration_time_s, best = INFINITY;
    guint best_n = 0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(settings, o);
    cJSON_AddNumberToObject(o, "setting", ids[x]);
    cJSON *uni = cJSON_AddArrayToObject(o, "uniform");
    if (text)
      g_string_append_printf(text, "TeraPipe figure 6, setting %u on %s: uniform token slicing (one sequence per "
                                   "batch slice) vs the DP\n%7s %10s\n",
                             ids[x], ctx->cluster->name, "slices", "latency s");
    for (guint n = 1; n <= max_n[x]; n++) {
      /* The paper's baseline (figure 6): the input sliced on the batch
       * dimension first, one sequence per batch slice, then each sequence
       * into n equal token slices. */
      SimTeraPipeSlicing u;
      sim_terapipe_slicing_init(&u);
      for (guint k = 0; k < plan.global_batch / plan.dp; k++)
        sim_terapipe_slicing_add_uniform(&u, 1, plan.model.seq_len, plan.granularity, n);
      gboolean ok = sim_terapipe_simulate(&plan, ctx->profile, ctx->cluster, &u, &r, error);
      sim_terapipe_slicing_clear(&u);
      if (!ok) {
        sim_terapipe_slicing_clear(&dp);
        return FALSE;
      }
      cJSON *e = cJSON_CreateObject();
      cJSON_AddNumberToObject(e, "slices", n);
      cJSON_AddNumberToObject(e, "latency_s", r.iteration_time_s);
      cJSON_AddItemToArray(uni, e);
      if (r.iteration_time_s < best) {
        best = r.iteration_time_s;
        best_n = n;
      }
      if (text)
        g_string_append_printf(text, "%7u %10.4f\n", n, r.iteration_time_s);
    }
    cJSON_AddNumberToObject(o, "best_uniform_latency", best);
    cJSON_AddNumberToObject(o, "best_uniform_slices", best_n);
    cJSON_AddNumberToObject(o, "dp_latency", dp_s);
    cJSON_AddNumberToObject(o, "dp_slices", total_slices(&dp));
    cJSON *sl = cJSON_AddObjectToObject(o, "dp_slicing");
    sim_terapipe_slicing_json(&dp, sl);
    if (text)
      g_string_append_printf(text, "best uniform %.4f s (%u slices); DP %.4f s (%u slices)\n\n", best, best_n, dp_s,
                             total_slices(&dp));
    sim_terapipe_slicing_clear(&dp);
  }
  cJSON_AddStringToObject(json, "source", "Li et al., ICML 2021, figure 6");
  return TRUE;
}

/* --- figure 7: setting 5 at longer sequences --- */

gboolean trace_terapipe_fig7(const TraceFigureContext *ctx, cJSON *json, GString *text, GError **error) {
  static const guint seq[] = {2048, 4096, 6144, 8192}, batch[] = {32, 8, 4, 2};
  cJSON *rows = cJSON_AddArrayToObject(json, "rows");
  if (text)
    g_string_append_printf(text, "TeraPipe figure 7 on %s: GPT3-13B, setting 5, longer sequences\n%7s %5s %9s %3s "
                                 "%10s %7s\n",
                           ctx->cluster->name, "seq", "B", "gpipe s", "b", "terapipe s", "speedup");
  for (guint x = 0; x < G_N_ELEMENTS(seq); x++) {
    SimPlanRequest req;
    Pair pr;
    if (!trace_terapipe_setting_as(5, "auto", 1, ctx->workload, &req, error))
      return FALSE;
    req.model.seq_len = seq[x];
    req.global_batch = batch[x];
    if (!run_pair(ctx, &req, &pr, error)) {
      sim_terapipe_slicing_clear(&pr.slicing);
      g_prefix_error(error, "sequence length %u: ", seq[x]);
      return FALSE;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "seq_len", seq[x]);
    cJSON_AddNumberToObject(o, "global_batch", batch[x]);
    cJSON_AddNumberToObject(o, "gpipe_latency_s", pr.gpipe_s);
    cJSON_AddNumberToObject(o, "gpipe_micro_batch", pr.gpipe_b);
    cJSON_AddNumberToObject(o, "terapipe_latency_s", pr.tera_s);
    cJSON_AddNumberToObject(o, "speedup", pr.gpipe_s / pr.tera_s);
    cJSON *sl = cJSON_AddObjectToObject(o, "slices");
    sim_terapipe_slicing_json(&pr.slicing, sl);
    cJSON_AddItemToArray(rows, o);
    if (text)
      g_string_append_printf(text, "%7u %5u %9.3f %3u %10.3f %6.2fx\n", seq[x], batch[x], pr.gpipe_s, pr.gpipe_b,
                             pr.tera_s, pr.gpipe_s / pr.tera_s);
    sim_terapipe_slicing_clear(&pr.slicing);
  }
  cJSON_AddStringToObject(json, "source", "Li et al., ICML 2021, figure 7");
  return TRUE;
}

/* --- figure 3: one GPT3-1B layer on one GPU --- */

gboolean trace_terapipe_fig3(const TraceFigureContext *ctx, cJSON *json, GString *text, GError **error) {
  ModelShape m;
  if (!model_lookup("gpt3-1b", &m)) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "gpt3-1b is not a built-in model");
    return FALSE;
  }
  cJSON *rows = cJSON_AddArrayToObject(json, "rows");
  if (text)
    g_string_append_printf(text, "TeraPipe figure 3: forward pass of one GPT3-1B layer on one %s\n%7s %12s %14s "
                                 "%9s\n",
                           ctx->profile->name, "tokens", "forward ms", "tokens per ms", "TFLOP/s");
  for (guint tokens = 1; tokens <= 2048;) {
    ModelLayerCost lc;
    model_layer_slice_cost(ctx->profile, &m, 1, 1, tokens, 0, TRUE, &lc);
    double s = lc.fwd.seg_s[0] + lc.fwd.seg_s[1] + lc.fwd.seg_s[2];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "tokens", tokens);
    cJSON_AddNumberToObject(o, "forward_ms", s * 1e3);
    cJSON_AddNumberToObject(o, "tokens_per_ms", tokens / (s * 1e3));
    cJSON_AddNumberToObject(o, "tflops", lc.fwd.flops / s / 1e12);
    cJSON_AddItemToArray(rows, o);
    if (text)
      g_string_append_printf(text, "%7u %12.4f %14.1f %9.1f\n", tokens, s * 1e3, tokens / (s * 1e3),
                             lc.fwd.flops / s / 1e12);
    tokens = tokens < 128 ? tokens * 2 : tokens + 128;
  }
  cJSON_AddStringToObject(json, "source", "Li et al., ICML 2021, figure 3");
  return TRUE;
}
