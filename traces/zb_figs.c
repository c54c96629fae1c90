/* ptdsim — the zero-bubble paper's bubble rates (see zb_figs.h). */
#include "zb_figs.h"

#include <math.h>
#include <string.h>

#include "../base/jsonutil.h"

#define ZB_COLUMNS 15

static gboolean bad(GError **error, const char *what) {
  g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "zero-bubble-iclr24.json: %s", what);
  return FALSE;
}

/* A row: [model, pp, microbatches, hidden, heads, layers, f, b, w, comm (ms), then one published rate per
 * schedule]. */
static gboolean row_ok(const cJSON *row, guint n_sched) {
  if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != (int)(10 + n_sched) ||
      !cJSON_IsString(cJSON_GetArrayItem(row, 0)))
    return FALSE;
  for (int k = 1; k < 10 + (int)n_sched; k++) {
    const cJSON *v = cJSON_GetArrayItem(row, k);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 || v->valuedouble > 1e6)
      return FALSE;
    if (k <= 5 && (v->valuedouble < 1 || v->valuedouble != floor(v->valuedouble)))
      return FALSE;
  }
  return TRUE;
}

static double item(const cJSON *row, int k) { return cJSON_GetArrayItem(row, k)->valuedouble; }

gboolean trace_zb_bubbles(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  cJSON *ref = trace_reference_load("zero-bubble-iclr24.json", error);
  if (!ref)
    return FALSE;
  const cJSON *table = cJSON_GetObjectItemCaseSensitive(ref, "bubble_rates");
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(table, "rows");
  const cJSON *scheds = cJSON_GetObjectItemCaseSensitive(table, "schedules");
  guint n_sched = cJSON_IsArray(scheds) ? (guint)cJSON_GetArraySize(scheds) : 0;
  gboolean ok = cJSON_IsArray(rows) && n_sched > 0 && n_sched <= 8;
  for (guint k = 0; ok && k < n_sched; k++)
    ok = cJSON_IsString(cJSON_GetArrayItem(scheds, (int)k));
  const cJSON *row;
  if (ok)
    cJSON_ArrayForEach(row, rows) ok = ok && row_ok(row, n_sched);
  if (!ok) {
    cJSON_Delete(ref);
    return bad(error, "bubble_rates needs a list of schedules (1 to 8) and rows of [model, pp, microbatches, hidden, "
                      "heads, layers, F, B, W, comm (ms), one published rate per schedule]");
  }
  guint n_rows = (guint)cJSON_GetArraySize(rows);
  double *sim = g_new0(double, (gsize)n_rows * n_sched), *pub = g_new0(double, (gsize)n_rows * n_sched);
  char **labels = g_new0(char *, n_rows + 1);
  GString *text = out->text;
  g_string_append_printf(text, "Zero-bubble bubble rates from the profiled times (Qi et al., ICLR 2024), simulated on "
                               "%s, %s: ptdsim / published\n%6s %3s %4s %7s %7s %7s %6s",
                         ctx->cluster->name, ctx->profile->name, "model", "p", "m", "F ms", "B ms", "W ms", "comm");
  for (guint k = 0; k < n_sched; k++)
    g_string_append_printf(text, " %15s", cJSON_GetArrayItem(scheds, (int)k)->valuestring);
  g_string_append_c(text, '\n');
  double worst = 0;
  guint i = 0;
  cJSON_ArrayForEach(row, rows) {
    guint p = (guint)item(row, 1), m = (guint)item(row, 2);
    char times[128];
    g_snprintf(times, sizeof times, "%.17g,%.17g,%.17g,%.17g", item(row, 6), item(row, 7), item(row, 8),
               item(row, 9));
    labels[i] = g_strdup_printf("%s m%u", cJSON_GetArrayItem(row, 0)->valuestring, m);
    g_string_append_printf(text, "%6s %3u %4u %7.3f %7.3f %7.3f %6.3f", cJSON_GetArrayItem(row, 0)->valuestring, p,
                           m, item(row, 6), item(row, 7), item(row, 8), item(row, 9));
    for (guint k = 0; ok && k < n_sched; k++) {
      SimPlanRequest req;
      memset(&req, 0, sizeof req);
      req.model = (ModelShape){.layers = (guint)item(row, 5),
                               .hidden = (guint)item(row, 3),
                               .heads = (guint)item(row, 4),
                               .seq_len = 1024,
                               .vocab = 51200};
      req.gpus = req.pp = p;
      req.tp = req.dp = 1;
      req.global_batch = m;
      req.micro_batch = 1;
      req.recompute = "none";
      req.schedule = cJSON_GetArrayItem(scheds, (int)k)->valuestring;
      req.stage_times = times;
      req.network = ctx->network;
      cJSON *run = trace_figure_run(ctx, &req, error);
      if (!(ok = run != NULL))
        break;
      double s = trace_num(run, "pipeline_schedule.bubble_rate"), r = item(row, 10 + (int)k);
      sim[k * n_rows + i] = s;
      pub[k * n_rows + i] = r;
      worst = fmax(worst, fabs(s - r));
      g_string_append_printf(text, "  %6.4f / %6.4f", s, r);
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "model", cJSON_GetArrayItem(row, 0)->valuestring);
      cJSON_AddStringToObject(o, "schedule", req.schedule);
      cJSON_AddNumberToObject(o, "pp", p);
      cJSON_AddNumberToObject(o, "microbatches", m);
      static const char *const names[] = {"f_ms", "b_ms", "w_ms", "comm_ms"};
      for (int c = 0; c < 4; c++)
        cJSON_AddNumberToObject(o, names[c], item(row, 6 + c));
      cJSON_AddNumberToObject(o, "bubble_rate", s);
      cJSON_AddNumberToObject(o, "published_bubble_rate", r);
      cJSON_AddNumberToObject(o, "difference", s - r);
      trace_row_copy(o, run, "pipeline_schedule.span_s", NULL);
      trace_row_copy(o, run, "pipeline_schedule.peak_inflight_microbatches", NULL);
      cJSON_AddItemToArray(out->rows, o);
      cJSON_Delete(run);
    }
    g_string_append_c(text, '\n');
    if (!ok)
      break;
    i++;
  }
  if (ok) {
    g_string_append_printf(text, "largest difference %.4f (absolute)\n", worst);
    cJSON_AddNumberToObject(out->json, "largest_absolute_difference", worst);
    cJSON_AddStringToObject(out->json, "source",
                            "Qi et al., Zero Bubble Pipeline Parallelism (ICLR 2024); sail-sg/zero-bubble-pipeline-"
                            "parallelism, efficiency.py");
    TracePlot *plot = trace_plot_new(TRACE_PLOT_BARS, "Zero-bubble schedules: bubble rate from the profiled times",
                                     NULL, "bubble rate");
    trace_plot_set_subtitle(plot, "bars: ptdsim on the profiled F, B, W and communication times; ticks: the paper's rates");
    trace_plot_set_categories(plot, (const char *const *)labels, n_rows);
    trace_plot_set_y_from_zero(plot, TRUE);
    for (guint k = 0; k < n_sched; k++) {
      const char *name = cJSON_GetArrayItem(scheds, (int)k)->valuestring;
      trace_plot_add_series(plot, name, NULL, sim + (gsize)k * n_rows, n_rows);
    }
    for (guint k = 0; k < n_sched; k++)
      trace_plot_add_reference(plot, "published (ZB paper)", NULL, pub + (gsize)k * n_rows, n_rows);
    out->plot = plot;
  }
  cJSON_Delete(ref);
  g_strfreev(labels);
  g_free(sim);
  g_free(pub);
  return ok;
}
