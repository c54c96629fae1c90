/* ptdsim — the zero-bubble paper's bubble rates (see zb_figs.h). */
#include "zb_figs.h"

#include <math.h>
#include <string.h>

#include "../base/jsonutil.h"

#define ZB_FILE "zero-bubble.json"
#define MAX_SCHED 8

/* The reference's tables, in the order drawn. */
static const char *const tables[] = {"bubble_rates", "v_bubble_rates"};

static gboolean bad(GError **error, const char *table) {
  g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
              ZB_FILE ": %s needs a title, a list of schedules (1 to %d) and rows of [model, pp, microbatches, hidden, "
              "heads, layers, F, B, W, comm (ms), one published rate per schedule]",
              table, MAX_SCHED);
  return FALSE;
}

/* A row: [model, pp, microbatches, hidden, heads, layers, f, b, w, comm (ms), then one published rate per
 * schedule]; whole counts where counts are. */
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

static gboolean table_ok(const cJSON *table, guint *n_sched) {
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(table, "rows");
  const cJSON *scheds = cJSON_GetObjectItemCaseSensitive(table, "schedules");
  *n_sched = cJSON_IsArray(scheds) ? (guint)cJSON_GetArraySize(scheds) : 0;
  gboolean ok = cJSON_IsString(cJSON_GetObjectItemCaseSensitive(table, "title")) && cJSON_IsArray(rows) &&
                *n_sched > 0 && *n_sched <= MAX_SCHED;
  for (guint k = 0; ok && k < *n_sched; k++) { /* each a schedule --schedule names */
    const SimScheduleInfo *named = sim_schedule_find(cJSON_GetStringValue(cJSON_GetArrayItem(scheds, (int)k)));
    ok = named && named->word;
  }
  const cJSON *row;
  if (ok)
    cJSON_ArrayForEach(row, rows) ok = ok && row_ok(row, *n_sched);
  return ok;
}

/* The chart: a series per schedule over every table's rows (NAN where a
 * table has no such schedule). */
typedef struct {
  GPtrArray *labels, *names; /* categories; schedule names */
  GArray *sim, *pub;         /* [series * rows + category] */
  guint rows;                /* categories in all: every table's rows */
} Chart;

static guint series_of(Chart *c, const char *name) {
  for (guint k = 0; k < c->names->len; k++)
    if (strcmp(g_ptr_array_index(c->names, k), name) == 0)
      return k;
  g_ptr_array_add(c->names, g_strdup(name));
  guint at = c->sim->len;
  g_array_set_size(c->sim, at + c->rows);
  g_array_set_size(c->pub, at + c->rows);
  for (guint j = at; j < at + c->rows; j++)
    g_array_index(c->sim, double, j) = g_array_index(c->pub, double, j) = NAN;
  return c->names->len - 1;
}

/* One table: each row under each of its schedules, printed and added to
 * the rows and the chart; *worst: the largest difference. */
static gboolean run_table(TraceFigureContext *ctx, TraceFigureOut *out, const char *name, const cJSON *table,
                          guint n_sched, Chart *chart, double *worst, GError **error) {
  const cJSON *scheds = cJSON_GetObjectItemCaseSensitive(table, "schedules");
  GString *text = out->text;
  g_string_append_printf(text, "%s\n%6s %3s %4s %7s %7s %7s %6s", cJSON_GetObjectItemCaseSensitive(table, "title")->valuestring,
                         "model", "p", "m", "F ms", "B ms", "W ms", "comm");
  for (guint k = 0; k < n_sched; k++)
    g_string_append_printf(text, " %15s", cJSON_GetArrayItem(scheds, (int)k)->valuestring);
  g_string_append_c(text, '\n');
  const cJSON *row;
  cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(table, "rows")) {
    guint p = (guint)item(row, 1), m = (guint)item(row, 2), layers = (guint)item(row, 5);
    const char *model = cJSON_GetArrayItem(row, 0)->valuestring;
    guint cat = chart->labels->len;
    g_ptr_array_add(chart->labels, g_strdup_printf("%s p%u m%u", model, p, m));
    g_string_append_printf(text, "%6s %3u %4u %7.3f %7.3f %7.3f %6.3f", model, p, m, item(row, 6), item(row, 7),
                           item(row, 8), item(row, 9));
    for (guint k = 0; k < n_sched; k++) {
      const char *sched = cJSON_GetArrayItem(scheds, (int)k)->valuestring;
      SimPlanRequest req;
      memset(&req, 0, sizeof req);
      req.model = (ModelShape){.layers = layers,
                               .hidden = (guint)item(row, 3),
                               .heads = (guint)item(row, 4),
                               .seq_len = 1024,
                               .vocab = 51200};
      req.gpus = req.pp = p;
      req.tp = req.dp = 1;
      req.global_batch = m;
      req.micro_batch = 1;
      req.recompute = MODEL_RECOMPUTE_NONE;
      req.recompute_given = TRUE;
      req.schedule = sim_schedule_find(sched)->id; /* a schedule's word: table_ok */
      req.schedule_given = TRUE;
      if (req.schedule == SIM_SCHEDULE_INTERLEAVED) /* as many chunks as layers per stage, the script's l // p */
        req.chunks = layers / p;
      req.stage_times = TRUE;
      req.stage_times_ms[0] = item(row, 6), req.stage_times_ms[1] = item(row, 7);
      req.stage_times_ms[2] = item(row, 8), req.stage_times_ms[3] = item(row, 9);
      trace_figure_network(ctx, &req);
      cJSON *run = trace_figure_run(ctx, &req, error);
      if (!run)
        return FALSE;
      double s = trace_num(run, "pipeline_schedule.bubble_rate"), r = item(row, 10 + (int)k);
      guint ser = series_of(chart, sched);
      g_array_index(chart->sim, double, ser * chart->rows + cat) = s;
      g_array_index(chart->pub, double, ser * chart->rows + cat) = r;
      *worst = fmax(*worst, fabs(s - r));
      g_string_append_printf(text, "  %6.4f / %6.4f", s, r);
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "table", name);
      cJSON_AddStringToObject(o, "model", model);
      cJSON_AddStringToObject(o, "schedule", sched);
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
  }
  return TRUE;
}

gboolean trace_zb_bubbles(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  cJSON *ref = trace_reference_load(ZB_FILE, error);
  if (!ref)
    return FALSE;
  guint n_sched[G_N_ELEMENTS(tables)];
  for (guint t = 0; t < G_N_ELEMENTS(tables); t++)
    if (!table_ok(cJSON_GetObjectItemCaseSensitive(ref, tables[t]), &n_sched[t])) {
      cJSON_Delete(ref);
      return bad(error, tables[t]);
    }
  Chart chart = {g_ptr_array_new_with_free_func(g_free), g_ptr_array_new_with_free_func(g_free),
                 g_array_new(FALSE, FALSE, sizeof(double)), g_array_new(FALSE, FALSE, sizeof(double)), 0};
  for (guint t = 0; t < G_N_ELEMENTS(tables); t++)
    chart.rows += (guint)cJSON_GetArraySize(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ref, tables[t]), "rows"));
  g_string_append_printf(out->text,
                         "Zero-bubble bubble rates from the profiled times (Qi et al., ICLR 2024), simulated on %s, %s: "
                         "ptdsim / published\n",
                         ctx->cluster->name, ctx->profile->name);
  double worst = 0;
  gboolean ok = TRUE;
  for (guint t = 0; ok && t < G_N_ELEMENTS(tables); t++) {
    if (t > 0)
      g_string_append_c(out->text, '\n');
    ok = run_table(ctx, out, tables[t], cJSON_GetObjectItemCaseSensitive(ref, tables[t]), n_sched[t], &chart, &worst,
                   error);
  }
  if (ok) {
    g_string_append_printf(out->text, "largest difference %.4f (absolute)\n", worst);
    cJSON_AddNumberToObject(out->json, "largest_absolute_difference", worst);
    cJSON_AddStringToObject(out->json, "source",
                            "Qi et al., Zero Bubble Pipeline Parallelism (ICLR 2024, arXiv 2401.10241); "
                            "sail-sg/zero-bubble-pipeline-parallelism, efficiency.py");
    TracePlot *plot = trace_plot_new(TRACE_PLOT_BARS, "Zero-bubble schedules: bubble rate from the profiled times",
                                     NULL, "bubble rate");
    trace_plot_set_subtitle(plot, "bars: ptdsim on the profiled F, B, W and communication times; ticks: the paper's rates");
    guint n = chart.labels->len;
    g_ptr_array_add(chart.labels, NULL);
    trace_plot_set_categories(plot, (const char *const *)chart.labels->pdata, n);
    trace_plot_set_y_from_zero(plot, TRUE);
    for (guint k = 0; k < chart.names->len; k++)
      trace_plot_add_series(plot, g_ptr_array_index(chart.names, k), NULL,
                            &g_array_index(chart.sim, double, k * chart.rows), n);
    for (guint k = 0; k < chart.names->len; k++)
      trace_plot_add_reference(plot, "published (ZB paper)", NULL, &g_array_index(chart.pub, double, k * chart.rows), n);
    out->plot = plot;
  }
  g_ptr_array_free(chart.labels, TRUE);
  g_ptr_array_free(chart.names, TRUE);
  g_array_free(chart.sim, TRUE);
  g_array_free(chart.pub, TRUE);
  cJSON_Delete(ref);
  return ok;
}
