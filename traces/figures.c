/* ptdsim — figure registry and the SC21 Table 1 regeneration. */
#include "figures.h"

#include <math.h>
#include <string.h>

#include "../base/jsonutil.h"
#include "terapipe_figs.h"

cJSON *trace_reference_load(const char *file, GError **error) {
  char *path = g_build_filename(ptd_data_dir(), "traces", "reference", file, NULL);
  cJSON *root = ptd_json_load(path, error);
  g_free(path);
  return root;
}

static gboolean row_int(const cJSON *row, int col, const char *name, guint *out, GError **error) {
  const cJSON *v = cJSON_GetArrayItem(row, col);
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble)) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "megatron-sc21.json: table1 column '%s' is not a count",
                name);
    return FALSE;
  }
  *out = (guint)v->valuedouble;
  return TRUE;
}

gboolean trace_table1_request(const cJSON *row, SimPlanRequest *req, GError **error) {
  memset(req, 0, sizeof *req);
  guint lpc = 0, heads, hidden, layers;
  const cJSON *lpc_item = cJSON_GetArrayItem(row, 9), *ddp = cJSON_GetArrayItem(row, 10),
              *published = cJSON_GetArrayItem(row, 11), *params = cJSON_GetArrayItem(row, 0);
  if (!row_int(row, 1, "heads", &heads, error) || !row_int(row, 2, "hidden", &hidden, error) ||
      !row_int(row, 3, "layers", &layers, error) || !row_int(row, 4, "tp", &req->tp, error) ||
      !row_int(row, 5, "pp", &req->pp, error) || !row_int(row, 6, "gpus", &req->gpus, error) ||
      !row_int(row, 7, "global_batch", &req->global_batch, error) ||
      !row_int(row, 8, "micro_batch", &req->micro_batch, error) ||
      (!cJSON_IsNull(lpc_item) && !row_int(row, 9, "layers_per_chunk", &lpc, error)))
    return FALSE;
  if (!cJSON_IsString(ddp) || !cJSON_IsNumber(published) || !cJSON_IsNumber(params)) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "megatron-sc21.json: a table1 row is malformed");
    return FALSE;
  }
  req->model = (ModelShape){layers, hidden, heads, 2048, 51200};
  req->layers_per_chunk = lpc;
  req->schedule = lpc ? "interleaved" : "1f1b";
  req->ddp = ddp->valuestring;
  return TRUE;
}

/* SC21 Table 1 (weak scaling, 1.7B to 1T on Selene): every row simulated
 * with its published settings; the paper's throughput is shown beside. */
static gboolean table1(const TraceFigureContext *ctx, cJSON *json, GString *text, GError **error) {
  cJSON *ref = trace_reference_load("megatron-sc21.json", error);
  if (!ref)
    return FALSE;
  const cJSON *t1 = cJSON_GetObjectItemCaseSensitive(ref, "table1");
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(t1, "rows");
  if (!cJSON_IsArray(rows)) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "megatron-sc21.json: table1.rows is missing");
    cJSON_Delete(ref);
    return FALSE;
  }
  cJSON *out = cJSON_AddArrayToObject(json, "rows");
  double sum_err = 0, worst = 0;
  int n = 0;
  if (text)
    g_string_append_printf(text, "SC21 Table 1 on %s with %s\n%7s %5s %6s %4s %3s %3s %5s %5s %3s %3s %6s  %9s %9s "
                                 "%7s  %8s %7s\n",
                           ctx->cluster->name, ctx->profile->name, "params", "heads", "hidden", "l", "t", "p", "n",
                           "B", "b", "v", "ddp", "predicted", "published", "error", "iter s", "bubble");
  const cJSON *row;
  cJSON_ArrayForEach(row, rows) {
    SimPlanRequest req;
    if (!trace_table1_request(row, &req, error)) {
      cJSON_Delete(ref);
      return FALSE;
    }
    req.network = ctx->network;
    if (!req.network && ctx->profile->n_coll > 0)
      req.network = "analytic"; /* as in run: measured collectives drive the analytic model */
    guint heads = req.model.heads, hidden = req.model.hidden, layers = req.model.layers;
    const cJSON *ddp = cJSON_GetArrayItem(row, 10), *published = cJSON_GetArrayItem(row, 11),
                *params = cJSON_GetArrayItem(row, 0);
    SimPlan plan;
    SimResult r;
    if (!sim_plan_build(&req, ctx->cluster, &plan, error) || !sim_ptdp_run(&plan, ctx->profile, ctx->cluster, &r, error)) {
      cJSON_Delete(ref);
      return FALSE;
    }
    double pub = published->valuedouble;
    double err = 100.0 * (r.tflops_per_gpu - pub) / pub;
    sum_err += fabs(err);
    worst = fmax(worst, fabs(err));
    n++;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "params_billion", params->valuedouble);
    cJSON_AddNumberToObject(o, "heads", heads);
    cJSON_AddNumberToObject(o, "hidden", hidden);
    cJSON_AddNumberToObject(o, "layers", layers);
    cJSON_AddNumberToObject(o, "tp", plan.tp);
    cJSON_AddNumberToObject(o, "pp", plan.pp);
    cJSON_AddNumberToObject(o, "dp", plan.dp);
    cJSON_AddNumberToObject(o, "gpus", plan.gpus);
    cJSON_AddNumberToObject(o, "global_batch", plan.global_batch);
    cJSON_AddNumberToObject(o, "micro_batch", plan.micro_batch);
    cJSON_AddNumberToObject(o, "chunks", plan.chunks);
    cJSON_AddStringToObject(o, "schedule", sim_schedule_name(plan.schedule));
    cJSON_AddStringToObject(o, "ddp", ddp->valuestring);
    cJSON_AddNumberToObject(o, "tflops_per_gpu", r.tflops_per_gpu);
    cJSON_AddNumberToObject(o, "published_tflops_per_gpu", pub);
    cJSON_AddNumberToObject(o, "error_percent", err);
    cJSON_AddNumberToObject(o, "percent_of_peak", r.percent_of_peak);
    cJSON_AddNumberToObject(o, "aggregate_pflops", r.aggregate_pflops);
    cJSON_AddNumberToObject(o, "iteration_time_s", r.iteration_time_s);
    cJSON_AddNumberToObject(o, "bubble_fraction", r.bubble_fraction);
    cJSON_AddNumberToObject(o, "memory_GiB", r.memory.total / 1073741824.0);
    cJSON_AddItemToArray(out, o);
    if (text)
      g_string_append_printf(text, "%6.1fB %5u %6u %4u %3u %3u %5u %5u %3u %3u %6s  %9.1f %9.0f %+6.1f%%  %8.2f %7.4f\n",
                             params->valuedouble, heads, hidden, layers, plan.tp, plan.pp, plan.gpus,
                             plan.global_batch, plan.micro_batch, plan.chunks, ddp->valuestring, r.tflops_per_gpu,
                             pub, err, r.iteration_time_s, r.bubble_fraction);
  }
  cJSON_Delete(ref);
  double mape = n ? sum_err / n : 0;
  cJSON_AddNumberToObject(json, "mean_absolute_percentage_error", mape);
  cJSON_AddNumberToObject(json, "worst_absolute_percentage_error", worst);
  cJSON_AddStringToObject(json, "source", "Narayanan et al., SC21, Table 1");
  if (text)
    g_string_append_printf(text, "mean absolute error %.1f%%, worst %.1f%% (TFLOP/s per GPU, Eq. 3 FLOPs)\n", mape,
                           worst);
  return TRUE;
}

static const TraceFigure figures[] = {
    {"megatron-table1", "SC21 Table 1: weak scaling 1.7B-1T on Selene, predicted vs published TFLOP/s per GPU",
     table1},
    {"terapipe-fig3", "TeraPipe figure 3: one GPT3-1B layer's forward time and throughput for 1..2048 tokens",
     trace_terapipe_fig3},
    {"terapipe-fig5", "TeraPipe figure 5: latency of settings 1-10 with GPipe and with TeraPipe, and the speedup",
     trace_terapipe_fig5},
    {"terapipe-fig6", "TeraPipe figure 6: uniform slicing (1..16, 1..128 slices) vs the DP, settings 8 and 9",
     trace_terapipe_fig6},
    {"terapipe-fig7", "TeraPipe figure 7: setting 5 at sequence lengths 2048-8192, GPipe vs TeraPipe",
     trace_terapipe_fig7},
};

const TraceFigure *trace_figures(guint *n) {
  *n = G_N_ELEMENTS(figures);
  return figures;
}

const TraceFigure *trace_figure_lookup(const char *name) {
  for (guint i = 0; i < G_N_ELEMENTS(figures); i++)
    if (strcmp(figures[i].name, name) == 0)
      return &figures[i];
  return NULL;
}
