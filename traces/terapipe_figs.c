/* ptdsim — TeraPipe figures (see terapipe_figs.h).
 *
 * The GPipe baseline is the same simulator with one token slice per batch
 * slice (whole-sequence microbatches, all forwards then all backwards, a
 * synchronous flush), with the microbatch size b that runs fastest among the
 * divisors of the per-pipeline batch that fit in memory (every divisor is
 * simulated, with --allow-oom, so that the choice can be remade from the
 * traces).  TeraPipe is --slices auto: the joint batch and token DP, then
 * the simulation. */
#include "terapipe_figs.h"

#include <math.h>
#include <string.h>

#include "../base/jsonutil.h"
#include "../models/layer.h"
#include "../plan/validate.h"
#include "../terapipe/terapipe.h"
#include "report.h"

static gboolean bad_ref(GError **error, const char *what) {
  g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "terapipe-icml21.json: %s", what);
  return FALSE;
}

gboolean trace_terapipe_setting(guint id, const char *slices, guint micro_batch, SimPlanRequest *req,
                                GError **error) {
  return trace_terapipe_setting_as(id, slices, micro_batch, NULL, req, error);
}

gboolean trace_terapipe_setting_as(guint id, const char *slices, guint micro_batch, const SimWorkload *workload,
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
      req->schedule = SIM_SCHEDULE_TERAPIPE;
      req->schedule_given = TRUE;
      ok = !slices || sim_slices_parse(slices, req, error); /* NULL: not given */
      /* TeraPipe's evaluation (test_transformer_terapipe.py): the layers
       * alone, all activations kept, no recomputation. */
      req->workload = workload ? *workload : SIM_WORKLOAD_LAYERS;
      req->workload_given = TRUE;
      req->recompute = MODEL_RECOMPUTE_NONE;
      req->recompute_given = TRUE;
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
  cJSON *tera; /* the TeraPipe run's JSON */
} Pair;

static gboolean run_gpipe(TraceFigureContext *ctx, SimPlanRequest req, Pair *out, GError **error) {
  guint Bp = req.global_batch / req.dp;
  out->gpipe_s = INFINITY;
  for (guint b = 1; b <= Bp; b++) {
    if (Bp % b)
      continue;
    req.micro_batch = b;
    req.slices_given = TRUE, req.slices_mode = SIM_SLICES_UNIFORM, req.n_slices = 1;
    req.allow_oom = TRUE; /* simulated all the same; only those that fit count */
    cJSON *run = trace_figure_run(ctx, &req, error);
    if (!run)
      return FALSE;
    double s = trace_num(run, "iteration_time_s");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(run, "fits_in_memory")) && s < out->gpipe_s) {
      out->gpipe_s = s;
      out->gpipe_b = b;
    }
    cJSON_Delete(run);
  }
  if (!isfinite(out->gpipe_s)) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_OOM, "GPipe does not fit in memory with any microbatch size");
    return FALSE;
  }
  return TRUE;
}

static gboolean run_pair(TraceFigureContext *ctx, const SimPlanRequest *req, Pair *out, GError **error) {
  memset(out, 0, sizeof *out);
  if (!run_gpipe(ctx, *req, out, error))
    return FALSE;
  SimPlanRequest r = *req;
  r.slices_given = TRUE, r.slices_mode = SIM_SLICES_AUTO;
  r.micro_batch = 1;
  if (!(out->tera = trace_figure_run(ctx, &r, error)))
    return FALSE;
  out->tera_s = trace_num(out->tera, "iteration_time_s");
  return TRUE;
}

/* The slicing of a TeraPipe run, as the figures' rows give it. */
static void add_slices(cJSON *row, const char *key, const cJSON *run) {
  static const char *const keys[] = {"batch_slices",         "token_slices",
                                     "dp_predicted_latency_s", "dp_candidates_solved",
                                     "context_fit_max_rel_error", "context_fit_mean_rel_error"};
  const cJSON *tp = cJSON_GetObjectItemCaseSensitive(run, "terapipe");
  cJSON *sl = cJSON_AddObjectToObject(row, key);
  for (guint i = 0; i < G_N_ELEMENTS(keys); i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(tp, keys[i]);
    if (v)
      cJSON_AddItemToObject(sl, keys[i], cJSON_Duplicate(v, TRUE));
  }
}

static guint total_slices(const cJSON *run) {
  return (guint)trace_num(run, "terapipe.token_slices_in_pipeline");
}

static void describe_brief(GString *text, const cJSON *run) {
  SimTeraPipeSlicing s;
  trace_slicing_from_json(cJSON_GetObjectItemCaseSensitive(run, "terapipe"), &s);
  sim_terapipe_slicing_describe(&s, TRUE, text);
  sim_terapipe_slicing_clear(&s);
}

static char *subtitle(const TraceFigureContext *ctx, const char *what) {
  return g_strdup_printf("%s, %s, %s%s", ctx->cluster->name, ctx->profile->name,
                         ctx->workload && *ctx->workload == SIM_WORKLOAD_GPT ? "the whole training step"
                                                                             : "the layers alone (TeraPipe's benchmark)",
                         what);
}

/* --- figure 5: latency of settings 1-10, GPipe vs TeraPipe --- */

gboolean trace_terapipe_fig5(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  GString *text = out->text;
  g_string_append_printf(text,
                         "TeraPipe figure 5 on %s with %s: per-iteration latency\n%7s %-10s %5s %4s %4s %4s %3s  "
                         "%9s %3s  %9s %7s  %s\n",
                         ctx->cluster->name, ctx->profile->name, "setting", "model", "gpus", "B", "d", "p", "t",
                         "gpipe s", "b", "terapipe s", "speedup",
                         "slicing: batch slices x sequences, token slices each");
  double speedup[10];
  char *labels[11] = {0};
  guint n = 0;
  gboolean ok = TRUE;
  for (guint id = 1; id <= 10 && ok; id++) {
    SimPlanRequest req;
    Pair pr;
    if (!(ok = trace_terapipe_setting_as(id, "auto", 1, ctx->workload, &req, error)))
      break;
    if (!(ok = run_pair(ctx, &req, &pr, error))) {
      cJSON_Delete(pr.tera);
      g_prefix_error(error, "setting %u: ", id);
      break;
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
    add_slices(o, "slices", pr.tera);
    cJSON_AddItemToArray(out->rows, o);
    char label[32];
    g_snprintf(label, sizeof label, "%.1fB", model_param_count(&req.model) / 1e9);
    g_string_append_printf(text, "%7u %-10s %5u %4u %4u %4u %3u  %9.3f %3u  %9.3f %6.2fx  ", id, label, req.gpus,
                           req.global_batch, req.dp, req.pp, req.tp, pr.gpipe_s, pr.gpipe_b, pr.tera_s,
                           pr.gpipe_s / pr.tera_s);
    describe_brief(text, pr.tera);
    g_string_append_c(text, '\n');
    speedup[n] = pr.gpipe_s / pr.tera_s;
    labels[n++] = g_strdup_printf("(%u) %s, B=%u", id, label, req.global_batch);
    cJSON_Delete(pr.tera);
  }
  if (ok) {
    cJSON_AddStringToObject(out->json, "source", "Li et al., ICML 2021, figure 5 (settings of Table 1)");
    cJSON_AddStringToObject(out->json, "gpipe_baseline",
                            "whole-sequence microbatches, GPipe order, fastest microbatch size that fits");
    out->plot = trace_plot_new(TRACE_PLOT_BARS, "TeraPipe figure 5: speedup of TeraPipe over GPipe, settings 1-10",
                               "setting (model, global batch)", "speedup over GPipe (latency ratio)");
    char *sub = subtitle(ctx, "; GPipe at its fastest microbatch size, TeraPipe with the DP's slicing");
    trace_plot_set_subtitle(out->plot, sub);
    g_free(sub);
    trace_plot_set_categories(out->plot, (const char *const *)labels, n);
    trace_plot_add_series(out->plot, "speedup: GPipe latency / TeraPipe latency", NULL, speedup, n);
  }
  for (guint i = 0; i < n; i++)
    g_free(labels[i]);
  return ok;
}

/* --- figure 6: uniform slicing vs the DP, settings 8 and 9 --- */

gboolean trace_terapipe_fig6(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  static const guint ids[] = {8, 9}, max_n[] = {16, 128};
  cJSON *settings = cJSON_AddArrayToObject(out->json, "settings");
  GString *text = out->text;
  out->plot = trace_plot_new(TRACE_PLOT_LINES, "TeraPipe figure 6: uniform token slicing against the DP",
                             "token slices per sequence (uniform)", "iteration latency (s)");
  char *sub = subtitle(ctx, "; one sequence per batch slice; diamonds: the DP's slicing at its slice count");
  trace_plot_set_subtitle(out->plot, sub);
  g_free(sub);
  trace_plot_set_x_log2(out->plot, TRUE);
  for (guint x = 0; x < G_N_ELEMENTS(ids); x++) {
    SimPlanRequest req;
    if (!trace_terapipe_setting_as(ids[x], "auto", 1, ctx->workload, &req, error))
      return FALSE;
    cJSON *dp = trace_figure_run(ctx, &req, error);
    if (!dp)
      return FALSE;
    double dp_s = trace_num(dp, "iteration_time_s"), best = INFINITY;
    guint best_n = 0;
    g_string_append_printf(text, "TeraPipe figure 6, setting %u on %s: uniform token slicing (one sequence per "
                                 "batch slice) vs the DP\n%7s %10s\n",
                           ids[x], ctx->cluster->name, "slices", "latency s");
    double *xs = g_new(double, max_n[x]), *ys = g_new(double, max_n[x]);
    gboolean ok = TRUE;
    for (guint n = 1; n <= max_n[x] && ok; n++) {
      /* The paper's baseline (figure 6): the input sliced on the batch
       * dimension first, one sequence per batch slice, then each sequence
       * into n equal token slices. */
      SimPlanRequest u = req;
      u.slices_given = TRUE, u.slices_mode = SIM_SLICES_UNIFORM, u.n_slices = n;
      cJSON *run = trace_figure_run(ctx, &u, error);
      if (!(ok = run != NULL))
        break;
      double s = trace_num(run, "iteration_time_s");
      cJSON_Delete(run);
      cJSON *e = cJSON_CreateObject();
      cJSON_AddNumberToObject(e, "setting", ids[x]);
      cJSON_AddStringToObject(e, "slicing", "uniform");
      cJSON_AddNumberToObject(e, "slices", n);
      cJSON_AddNumberToObject(e, "latency_s", s);
      cJSON_AddItemToArray(out->rows, e);
      xs[n - 1] = n;
      ys[n - 1] = s;
      if (s < best) {
        best = s;
        best_n = n;
      }
      g_string_append_printf(text, "%7u %10.4f\n", n, s);
    }
    if (ok) {
      cJSON *e = cJSON_CreateObject();
      cJSON_AddNumberToObject(e, "setting", ids[x]);
      cJSON_AddStringToObject(e, "slicing", "dp");
      cJSON_AddNumberToObject(e, "slices", total_slices(dp));
      cJSON_AddNumberToObject(e, "latency_s", dp_s);
      cJSON_AddItemToArray(out->rows, e);
      cJSON *o = cJSON_CreateObject();
      cJSON_AddItemToArray(settings, o);
      cJSON_AddNumberToObject(o, "setting", ids[x]);
      cJSON_AddNumberToObject(o, "best_uniform_latency", best);
      cJSON_AddNumberToObject(o, "best_uniform_slices", best_n);
      cJSON_AddNumberToObject(o, "dp_latency", dp_s);
      cJSON_AddNumberToObject(o, "dp_slices", total_slices(dp));
      add_slices(o, "dp_slicing", dp);
      g_string_append_printf(text, "best uniform %.4f s (%u slices); DP %.4f s (%u slices)\n\n", best, best_n, dp_s,
                             total_slices(dp));
      char name[64];
      g_snprintf(name, sizeof name, "setting %u, uniform", ids[x]);
      trace_plot_add_series(out->plot, name, xs, ys, max_n[x]);
      /* The DP's slices per sequence: all of the pipeline's token slices
       * over its sequences. */
      double dx = (double)total_slices(dp) * req.dp / req.global_batch;
      g_snprintf(name, sizeof name, "setting %u, DP", ids[x]);
      trace_plot_add_reference(out->plot, name, &dx, &dp_s, 1);
    }
    g_free(xs);
    g_free(ys);
    cJSON_Delete(dp);
    if (!ok)
      return FALSE;
  }
  if (g_str_has_suffix(text->str, "\n\n")) /* the blank line separates the settings */
    g_string_truncate(text, text->len - 1);
  cJSON_AddStringToObject(out->json, "source", "Li et al., ICML 2021, figure 6");
  return TRUE;
}

/* --- figure 7: setting 5 at longer sequences --- */

gboolean trace_terapipe_fig7(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  static const guint seq[] = {2048, 4096, 6144, 8192}, batch[] = {32, 8, 4, 2};
  GString *text = out->text;
  g_string_append_printf(text, "TeraPipe figure 7 on %s: GPT3-13B, setting 5, longer sequences\n%7s %5s %9s %3s "
                               "%10s %7s\n",
                         ctx->cluster->name, "seq", "B", "gpipe s", "b", "terapipe s", "speedup");
  double gpipe[4], tera[4];
  char *labels[5] = {0};
  guint n = 0;
  gboolean ok = TRUE;
  for (guint x = 0; x < G_N_ELEMENTS(seq) && ok; x++) {
    SimPlanRequest req;
    Pair pr;
    if (!(ok = trace_terapipe_setting_as(5, "auto", 1, ctx->workload, &req, error)))
      break;
    req.model.seq_len = seq[x];
    req.global_batch = batch[x];
    if (!(ok = run_pair(ctx, &req, &pr, error))) {
      cJSON_Delete(pr.tera);
      g_prefix_error(error, "sequence length %u: ", seq[x]);
      break;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "seq_len", seq[x]);
    cJSON_AddNumberToObject(o, "global_batch", batch[x]);
    cJSON_AddNumberToObject(o, "gpipe_latency_s", pr.gpipe_s);
    cJSON_AddNumberToObject(o, "gpipe_micro_batch", pr.gpipe_b);
    cJSON_AddNumberToObject(o, "terapipe_latency_s", pr.tera_s);
    cJSON_AddNumberToObject(o, "speedup", pr.gpipe_s / pr.tera_s);
    add_slices(o, "slices", pr.tera);
    cJSON_AddItemToArray(out->rows, o);
    g_string_append_printf(text, "%7u %5u %9.3f %3u %10.3f %6.2fx\n", seq[x], batch[x], pr.gpipe_s, pr.gpipe_b,
                           pr.tera_s, pr.gpipe_s / pr.tera_s);
    gpipe[n] = pr.gpipe_s;
    tera[n] = pr.tera_s;
    labels[n++] = g_strdup_printf("%u tokens, B=%u", seq[x], batch[x]);
    cJSON_Delete(pr.tera);
  }
  if (ok) {
    cJSON_AddStringToObject(out->json, "source", "Li et al., ICML 2021, figure 7");
    out->plot = trace_plot_new(TRACE_PLOT_BARS, "TeraPipe figure 7: GPT3-13B (setting 5) at longer sequences",
                               "sequence length and global batch", "iteration latency (s)");
    char *sub = subtitle(ctx, "; 320 GPUs, t 8 x p 40");
    trace_plot_set_subtitle(out->plot, sub);
    g_free(sub);
    trace_plot_set_categories(out->plot, (const char *const *)labels, n);
    trace_plot_add_series(out->plot, "GPipe", NULL, gpipe, n);
    trace_plot_add_series(out->plot, "TeraPipe", NULL, tera, n);
  }
  for (guint i = 0; i < n; i++)
    g_free(labels[i]);
  return ok;
}

/* --- figure 3: one GPT3-1B layer on one GPU --- */

gboolean trace_terapipe_fig3(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  ModelShape m;
  if (!model_lookup("gpt3-1b", &m)) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "gpt3-1b is not a built-in model");
    return FALSE;
  }
  GString *text = out->text;
  g_string_append_printf(text, "TeraPipe figure 3: forward pass of one GPT3-1B layer on one %s\n%7s %12s %14s "
                               "%9s\n",
                         ctx->profile->name, "tokens", "forward ms", "tokens per ms", "TFLOP/s");
  double xs[64], ys[64];
  guint n = 0;
  /* as TeraPipe's code runs a layer: PyTorch eager, each kernel behind the
   * host's launch (the eager default per launch, as a TeraPipe run) */
  ModelLayerOptions o = {.fused = TRUE, .framework = MODEL_FRAMEWORK_EAGER, .host_op_s = SIM_EAGER_HOST_OP_US * 1e-6};
  for (guint tokens = 1; tokens <= 2048;) {
    ModelLayerCost lc;
    model_layer_slice_cost_with(ctx->profile, &m, 1, 1, tokens, 0, &o, &lc);
    double s = lc.fwd.seg_s[0] + lc.fwd.seg_s[1] + lc.fwd.seg_s[2];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "tokens", tokens);
    cJSON_AddNumberToObject(o, "forward_ms", s * 1e3);
    cJSON_AddNumberToObject(o, "tokens_per_ms", tokens / (s * 1e3));
    cJSON_AddNumberToObject(o, "tflops", lc.fwd.flops / s / 1e12);
    cJSON_AddItemToArray(out->rows, o);
    g_string_append_printf(text, "%7u %12.4f %14.1f %9.1f\n", tokens, s * 1e3, tokens / (s * 1e3),
                           lc.fwd.flops / s / 1e12);
    xs[n] = tokens;
    ys[n++] = tokens / (s * 1e3);
    tokens = tokens < 128 ? tokens * 2 : tokens + 128;
  }
  cJSON_AddStringToObject(out->json, "source", "Li et al., ICML 2021, figure 3");
  out->plot = trace_plot_new(TRACE_PLOT_LINES, "TeraPipe figure 3: one GPT3-1B layer's forward pass",
                             "input tokens (one sequence)", "throughput (tokens per ms)");
  char *sub = g_strdup_printf("%s, PyTorch eager with %.1f us of host per launch; flat latency for short inputs, "
                              "then throughput saturates",
                              ctx->profile->name, SIM_EAGER_HOST_OP_US);
  trace_plot_set_subtitle(out->plot, sub);
  g_free(sub);
  trace_plot_set_x_log2(out->plot, TRUE);
  trace_plot_add_series(out->plot, "forward pass", xs, ys, n);
  return TRUE;
}
