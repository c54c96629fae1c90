/* ptdsim — figure registry and the SC21 Table 1 regeneration. */
#include "figures.h"

#include <math.h>
#include <string.h>

#include "../base/jsonutil.h"
#include "diagrams.h"
#include "sc21_figs.h"
#include "terapipe_figs.h"
#include "today_figs.h"
#include "zb_figs.h"

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
  /* the error column divides by it: a throughput the paper published is
   * a positive number, never 0 (an infinite error) */
  if (!(published->valuedouble > 0 && published->valuedouble < 1e6) ||
      !(params->valuedouble > 0 && params->valuedouble < 1e6)) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "megatron-sc21.json: a table1 row has published TFLOP/s %g and %g billion parameters; both must be "
                "positive (the reference data was edited?)",
                published->valuedouble, params->valuedouble);
    return FALSE;
  }
  req->model = (ModelShape){.layers = layers, .hidden = hidden, .heads = heads, .seq_len = 2048, .vocab = 51200};
  req->layers_per_chunk = lpc;
  req->schedule = lpc ? SIM_SCHEDULE_INTERLEAVED : SIM_SCHEDULE_1F1B;
  req->schedule_given = TRUE;
  int value;
  if (!ptd_word_value(sim_ddp_words, ddp->valuestring, &value)) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "megatron-sc21.json: a table1 row's ddp is not local or torch (the reference data was edited?)");
    return FALSE;
  }
  req->ddp = (SimDdp)value;
  req->ddp_given = TRUE;
  return TRUE;
}

/* SC21 Table 1 (weak scaling, 1.7B to 1T on Selene): every row simulated
 * with its published settings; the paper's throughput is shown beside. */
static gboolean table1(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
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
  guint n_rows = (guint)cJSON_GetArraySize(rows);
  double *predicted = g_new(double, n_rows), *published_v = g_new(double, n_rows);
  char **labels = g_new0(char *, n_rows + 1);
  double sum_err = 0, worst = 0;
  guint n = 0;
  GString *text = out->text;
  g_string_append_printf(text, "SC21 Table 1 on %s with %s\n%7s %5s %6s %4s %3s %3s %5s %5s %3s %3s %6s  %9s %9s "
                               "%7s  %8s %7s\n",
                         ctx->cluster->name, ctx->profile->name, "params", "heads", "hidden", "l", "t", "p", "n", "B",
                         "b", "v", "ddp", "predicted", "published", "error", "iter s", "bubble");
  const cJSON *row;
  gboolean ok = TRUE;
  cJSON_ArrayForEach(row, rows) {
    SimPlanRequest req;
    if (!(ok = trace_table1_request(row, &req, error)))
      break;
    trace_figure_network(ctx, &req);
    const cJSON *ddp = cJSON_GetArrayItem(row, 10), *published = cJSON_GetArrayItem(row, 11),
                *params = cJSON_GetArrayItem(row, 0);
    cJSON *run = trace_figure_run(ctx, &req, error);
    if (!(ok = run != NULL))
      break;
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(run, "config");
    double tflops = trace_num(run, "tflops_per_gpu"), pub = published->valuedouble;
    double err = 100.0 * (tflops - pub) / pub;
    sum_err += fabs(err);
    worst = fmax(worst, fabs(err));
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "params_billion", params->valuedouble);
    cJSON_AddNumberToObject(o, "heads", req.model.heads);
    cJSON_AddNumberToObject(o, "hidden", req.model.hidden);
    cJSON_AddNumberToObject(o, "layers", req.model.layers);
    static const char *const config_keys[] = {"tp", "pp", "dp", "gpus", "global_batch", "micro_batch", "chunks"};
    for (guint k = 0; k < G_N_ELEMENTS(config_keys); k++)
      trace_row_copy(o, cfg, config_keys[k], NULL);
    trace_row_copy(o, cfg, "schedule", NULL);
    cJSON_AddStringToObject(o, "ddp", ddp->valuestring);
    cJSON_AddNumberToObject(o, "tflops_per_gpu", tflops);
    cJSON_AddNumberToObject(o, "published_tflops_per_gpu", pub);
    cJSON_AddNumberToObject(o, "error_percent", err);
    trace_row_copy(o, run, "percent_of_peak", NULL);
    trace_row_copy(o, run, "aggregate_pflops", NULL);
    trace_row_copy(o, run, "iteration_time_s", NULL);
    trace_row_copy(o, run, "bubble_fraction", NULL);
    trace_row_copy(o, run, "memory_per_gpu_GiB.total", "memory_GiB");
    cJSON_AddItemToArray(out->rows, o);
    g_string_append_printf(text, "%6.1fB %5u %6u %4u %3.0f %3.0f %5.0f %5.0f %3.0f %3.0f %6s  %9.1f %9.0f %+6.1f%%  "
                                 "%8.2f %7.4f\n",
                           params->valuedouble, req.model.heads, req.model.hidden, req.model.layers,
                           trace_num(cfg, "tp"), trace_num(cfg, "pp"), trace_num(cfg, "gpus"),
                           trace_num(cfg, "global_batch"), trace_num(cfg, "micro_batch"), trace_num(cfg, "chunks"),
                           ddp->valuestring, tflops, pub, err, trace_num(run, "iteration_time_s"),
                           trace_num(run, "bubble_fraction"));
    predicted[n] = tflops;
    published_v[n] = pub;
    labels[n] = g_strdup_printf("%gB", params->valuedouble);
    n++;
    cJSON_Delete(run);
  }
  cJSON_Delete(ref);
  if (ok) {
    double mape = n ? sum_err / n : 0;
    cJSON_AddNumberToObject(out->json, "mean_absolute_percentage_error", mape);
    cJSON_AddNumberToObject(out->json, "worst_absolute_percentage_error", worst);
    cJSON_AddStringToObject(out->json, "source", "Narayanan et al., SC21, Table 1");
    g_string_append_printf(text, "mean absolute error %.1f%%, worst %.1f%% (TFLOP/s per GPU, Eq. 3 FLOPs)\n", mape,
                           worst);
    TracePlot *plot = trace_plot_new(TRACE_PLOT_BARS, "SC21 Table 1: weak scaling from 1.7B to 1T parameters",
                                     "model size (parameters; 32 GPUs for 1.7B up to 3072 for 1T)",
                                     "TFLOP/s per GPU");
    char *sub = g_strdup_printf("%s, %s; predicted by ptdsim (bars) against the published values; mean abs. error "
                                "%.1f%%",
                                ctx->cluster->name, ctx->profile->name, mape);
    trace_plot_set_subtitle(plot, sub);
    g_free(sub);
    trace_plot_set_categories(plot, (const char *const *)labels, n);
    trace_plot_add_series(plot, "ptdsim", NULL, predicted, n);
    trace_plot_add_reference(plot, "published (Table 1)", NULL, published_v, n);
    out->plot = plot;
  }
  g_strfreev(labels);
  g_free(predicted);
  g_free(published_v);
  return ok;
}

#define TERAPIPE_CLUSTER "aws-p3-16xlarge"

static const TraceFigure figures[] = {
    {"megatron-table1", "SC21 Table 1: weak scaling 1.7B-1T on Selene, predicted vs published TFLOP/s per GPU",
     NULL, table1, FALSE},
    {"megatron-table2", "SC21 Table 2: PTD-P against ZeRO-3 without model parallelism, 175B and 530B", NULL,
     trace_sc21_table2, FALSE},
    {"megatron-fig3", "SC21 figure 3: the GPipe schedule, 8 microbatches on 4 devices, from a simulated timeline",
     NULL, trace_megatron_fig3, FALSE},
    {"megatron-fig4", "SC21 figure 4: 1F1B and interleaved 1F1B (2 model chunks), 8 microbatches on 4 devices",
     NULL, trace_megatron_fig4, FALSE},
    {"schedules", "Zero-bubble schedules (ZB-H1, ZB-H2, ZB-V) and DualPipe(V) beside 1F1B, F, B and W apart", NULL,
     trace_schedules_figure, FALSE},
    {"zb-bubbles", "Zero Bubble (ICLR 2024): bubble rates of 1F1B, ZB-H1/H2, ZB-1P/2P, ZB-V from its profiled times",
     NULL, trace_zb_bubbles, FALSE},
    {"megatron-fig6", "SC21 figure 6: the pipeline bubble (p-1)/m against the data-parallel size (analytic)", NULL,
     trace_sc21_fig6, FALSE},
    {"megatron-fig7", "SC21 figure 7: one GPU's throughput against the microbatch size", NULL, trace_sc21_fig7, FALSE},
    {"megatron-fig8", "SC21 figure 8: equation (1)'s normalized throughput against the microbatch size", NULL,
     trace_sc21_fig8, FALSE},
    {"megatron-fig10", "SC21 figure 10: PTD-P against ZeRO-3 as the GPUs grow (Table 2's runs)", NULL,
     trace_sc21_fig10, FALSE},
    {"megatron-fig11", "SC21 figure 11: pipeline weak scaling, 1 to 8 stages", NULL, trace_sc21_fig11, FALSE},
    {"megatron-fig12", "SC21 figure 12: interleaved against non-interleaved 1F1B, and without scatter/gather",
     NULL, trace_sc21_fig12, FALSE},
    {"megatron-fig13", "SC21 figure 13: tensor against pipeline parallelism, 162B on 64 GPUs", NULL,
     trace_sc21_fig13, FALSE},
    {"megatron-fig14", "SC21 figure 14: pipeline against data parallelism, 5.9B on 64 GPUs", NULL,
     trace_sc21_fig14, FALSE},
    {"megatron-fig15", "SC21 figure 15: tensor against data parallelism, 5.9B on 64 GPUs", NULL, trace_sc21_fig15, FALSE},
    {"megatron-fig16", "SC21 figure 16: the microbatch size, 91B on 64 GPUs", NULL, trace_sc21_fig16, FALSE},
    {"megatron-fig17", "SC21 figure 17: with and without activation recomputation, 145B on 128 GPUs", NULL,
     trace_sc21_fig17, FALSE},
    {"megatron-fig18", "SC21 figure 18: with and without scatter/gather, interleaved, 175B on 96 GPUs", NULL,
     trace_sc21_fig18, FALSE},
    {"terapipe-fig3", "TeraPipe figure 3: one GPT3-1B layer's forward time and throughput for 1..2048 tokens",
     TERAPIPE_CLUSTER, trace_terapipe_fig3, FALSE},
    {"terapipe-fig5", "TeraPipe figure 5: latency of settings 1-10 with GPipe and with TeraPipe, and the speedup",
     TERAPIPE_CLUSTER, trace_terapipe_fig5, FALSE},
    {"terapipe-fig6", "TeraPipe figure 6: uniform slicing (1..16, 1..128 slices) vs the DP, settings 8 and 9",
     TERAPIPE_CLUSTER, trace_terapipe_fig6, FALSE},
    {"terapipe-fig7", "TeraPipe figure 7: setting 5 at sequence lengths 2048-8192, GPipe vs TeraPipe",
     TERAPIPE_CLUSTER, trace_terapipe_fig7, FALSE},
    {"terapipe-schedule", "TeraPipe's token pipeline: one GPT3-1B sequence in 8 token slices through 4 cells",
     TERAPIPE_CLUSTER, trace_terapipe_schedule, FALSE},
    {"today-machines", "Llama 3 70B, 15T tokens, on 1024 GPUs of each of today's machines: days and GPU-hours",
     NULL, trace_today_machines, TRUE},
    {"today-runtime", "Llama 3 405B, 15T tokens, on 4k-32k H100s: days and effective training time by checkpoint "
     "interval", "dgx-h100-superpod", trace_today_runtime, FALSE},
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
