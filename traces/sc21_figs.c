/* ptdsim — the SC21 paper's performance figures (see sc21_figs.h).
 *
 * Each figure reads its configurations from the reference
 * (traces/reference/megatron-sc21.json: "figure_sweeps", "table2"), runs
 * every one through trace_figure_run (so that it can be rebuilt from saved
 * traces) and draws the paper's comparison.  A configuration that does not
 * fit in memory is still simulated (--allow-oom) and kept as a row with
 * fits_in_memory false, but left out of the picture, as the paper leaves
 * out runs that could not be made. */
#include "sc21_figs.h"

#include <math.h>
#include <string.h>

#include "../base/jsonutil.h"

/* --- the reference --- */

typedef struct {
  cJSON *root;
  const cJSON *sweep; /* figure_sweeps.NAME */
  const char *name;
  guint seq_len, vocab;
} Ref;

static gboolean ref_bad(GError **error, const char *name, const char *key, const char *want) {
  g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "megatron-sc21.json: figure_sweeps.%s.%s %s", name, key,
              want);
  return FALSE;
}

static gboolean ref_open(const char *name, Ref *ref, GError **error) {
  memset(ref, 0, sizeof *ref);
  ref->name = name;
  if (!(ref->root = trace_reference_load("megatron-sc21.json", error)))
    return FALSE;
  const cJSON *common = cJSON_GetObjectItemCaseSensitive(ref->root, "common");
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(common, "seq_len"), *v = cJSON_GetObjectItemCaseSensitive(common, "vocab");
  ref->sweep = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ref->root, "figure_sweeps"), name);
  if (!cJSON_IsNumber(s) || !cJSON_IsNumber(v) || !cJSON_IsObject(ref->sweep)) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "megatron-sc21.json: common.seq_len, common.vocab or figure_sweeps.%s is missing", name);
    cJSON_Delete(ref->root);
    ref->root = NULL;
    return FALSE;
  }
  ref->seq_len = (guint)s->valuedouble;
  ref->vocab = (guint)v->valuedouble;
  return TRUE;
}

static void ref_close(Ref *ref) {
  cJSON_Delete(ref->root);
  ref->root = NULL;
}

static gboolean is_count(const cJSON *v) {
  return cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= 1e7 && v->valuedouble == floor(v->valuedouble);
}

/* A count, or a list of counts, at key (in `o`, figure_sweeps.NAME or
 * below); a single number is a list of one. */
static gboolean ref_counts(const Ref *ref, const cJSON *o, const char *key, GArray *out, GError **error) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key), *x;
  g_array_set_size(out, 0);
  if (is_count(v)) {
    guint c = (guint)v->valuedouble;
    g_array_append_val(out, c);
    return TRUE;
  }
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
    return ref_bad(error, ref->name, key, "is not a count or a list of counts");
  cJSON_ArrayForEach(x, v) {
    if (!is_count(x))
      return ref_bad(error, ref->name, key, "has an entry that is not a count");
    guint c = (guint)x->valuedouble;
    g_array_append_val(out, c);
  }
  return TRUE;
}

static gboolean ref_count(const Ref *ref, const cJSON *o, const char *key, guint *out, GError **error) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!is_count(v))
    return ref_bad(error, ref->name, key, "is not a count");
  *out = (guint)v->valuedouble;
  return TRUE;
}

/* The figure's model: layers (or layers_per_pp, times `pp`), hidden, heads. */
static gboolean ref_model(const Ref *ref, guint pp, ModelShape *m, GError **error) {
  const cJSON *mo = cJSON_GetObjectItemCaseSensitive(ref->sweep, "model");
  guint per_pp = 0;
  memset(m, 0, sizeof *m);
  if (!ref_count(ref, mo, "hidden", &m->hidden, error) || !ref_count(ref, mo, "heads", &m->heads, error))
    return FALSE;
  if (cJSON_GetObjectItemCaseSensitive(mo, "layers_per_pp")) {
    if (!ref_count(ref, mo, "layers_per_pp", &per_pp, error))
      return FALSE;
    m->layers = per_pp * pp;
  } else if (!ref_count(ref, mo, "layers", &m->layers, error))
    return FALSE;
  m->seq_len = ref->seq_len;
  m->vocab = ref->vocab;
  return TRUE;
}

#define UINTS(a, i) g_array_index((a), guint, (i))

/* --- running the points --- */

/* One point of a figure: its configuration and where it goes. */
typedef struct {
  TraceFigureContext *ctx;
  TraceFigureOut *out;
  const char *x_key; /* the row key holding x */
} Sweep;

static double seconds_per(const cJSON *run) { return trace_num(run, "iteration_time_s"); }

/* Runs one configuration and appends its row: the series, x, the
 * configuration and the metrics.  Returns the row (owned by out->rows). */
static cJSON *run_point(Sweep *sw, const char *series, double x, SimPlanRequest req, GError **error) {
  trace_figure_network(sw->ctx, &req);
  req.allow_oom = TRUE; /* the row says whether it fits; the picture leaves it out if not */
  cJSON *run = trace_figure_run(sw->ctx, &req, error);
  if (!run)
    return NULL;
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(run, "config");
  cJSON *row = cJSON_CreateObject();
  cJSON_AddStringToObject(row, "series", series);
  cJSON_AddNumberToObject(row, sw->x_key, x);
  static const char *const cfg_keys[] = {"layers", "hidden", "heads", "parameters", "gpus", "tp", "pp", "dp",
                                         "global_batch", "micro_batch", "microbatches", "chunks", "schedule",
                                         "recompute", "scatter_gather", "zero"};
  for (guint i = 0; i < G_N_ELEMENTS(cfg_keys); i++)
    if (strcmp(cfg_keys[i], sw->x_key) != 0)
      trace_row_copy(row, cfg, cfg_keys[i], NULL);
  trace_row_copy(row, run, "tflops_per_gpu", NULL);
  trace_row_copy(row, run, "hardware_tflops_per_gpu", NULL);
  trace_row_copy(row, run, "iteration_time_s", NULL);
  cJSON_AddNumberToObject(row, "sequences_per_s", trace_num(cfg, "global_batch") / seconds_per(run));
  trace_row_copy(row, run, "bubble_fraction", NULL);
  trace_row_copy(row, run, "analytic_bubble_fraction", NULL);
  static const char *const parts[] = {"compute", "tp_comm", "pp_comm", "dp_comm", "optimizer", "bubble"};
  for (guint i = 0; i < G_N_ELEMENTS(parts); i++) {
    char path[64], key[64];
    g_snprintf(path, sizeof path, "time_breakdown_s.%s", parts[i]);
    g_snprintf(key, sizeof key, "%s_s", parts[i]);
    trace_row_copy(row, run, path, key);
  }
  trace_row_copy(row, run, "memory_per_gpu_GiB.total", "memory_GiB");
  trace_row_copy(row, run, "fits_in_memory", NULL);
  if (trace_num(run, "tokens") > 0)
    trace_row_copy(row, run, "training_days", NULL);
  cJSON_AddItemToArray(sw->out->rows, row);
  cJSON_Delete(run);
  return row;
}

/* Whether a row's configuration fits in memory (rows of formulas: yes). */
static gboolean fits(const cJSON *row) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, "fits_in_memory");
  return !v || cJSON_IsTrue(v);
}

static const char *str_of(const cJSON *row, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, key);
  return cJSON_IsString(v) ? v->valuestring : "";
}

/* The rows' series, in order of first appearance. */
static GPtrArray *series_of(const cJSON *rows) {
  GPtrArray *names = g_ptr_array_new();
  const cJSON *row;
  cJSON_ArrayForEach(row, rows) {
    const char *s = str_of(row, "series");
    gboolean seen = FALSE;
    for (guint i = 0; i < names->len && !seen; i++)
      seen = strcmp(g_ptr_array_index(names, i), s) == 0;
    if (!seen)
      g_ptr_array_add(names, (gpointer)s);
  }
  return names;
}

/* One line (or bar) series per series of the rows: x from x_key, y from
 * y_key, NAN where the configuration does not fit. */
static void plot_rows(TracePlot *plot, const cJSON *rows, const char *x_key, const char *y_key) {
  GPtrArray *names = series_of(rows);
  guint n_rows = (guint)cJSON_GetArraySize(rows);
  double *xs = g_new(double, n_rows), *ys = g_new(double, n_rows);
  for (guint s = 0; s < names->len; s++) {
    guint n = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, rows) {
      if (strcmp(str_of(row, "series"), g_ptr_array_index(names, s)) != 0)
        continue;
      xs[n] = trace_num(row, x_key);
      ys[n++] = fits(row) ? trace_num(row, y_key) : NAN;
    }
    trace_plot_add_series(plot, g_ptr_array_index(names, s), xs, ys, n);
  }
  g_free(xs);
  g_free(ys);
  g_ptr_array_free(names, TRUE);
}

static char *subtitle(const TraceFigureContext *ctx, const char *what) {
  return g_strdup_printf("ptdsim on %s, %s%s%s", ctx->cluster->name, ctx->profile->name, what && *what ? "; " : "",
                         what ? what : "");
}

static TracePlot *new_plot(const TraceFigureContext *ctx, TracePlotKind kind, const char *title, const char *x,
                           const char *y, const char *what) {
  TracePlot *p = trace_plot_new(kind, title, x, y);
  char *sub = subtitle(ctx, what);
  trace_plot_set_subtitle(p, sub);
  g_free(sub);
  return p;
}

/* The text table: one line per row, the x column labelled `x_label`. */
static void text_rows(GString *text, const cJSON *rows, const char *x_key, const char *x_label) {
  g_string_append_printf(text, "%-34s %12s %5s %4s %4s %5s %4s  %8s %9s %8s %7s %7s\n", "series", x_label, "t",
                         "p", "d", "B", "b", "TFLOP/s", "seq/s", "iter s", "bubble", "GiB");
  const cJSON *row;
  cJSON_ArrayForEach(row, rows) {
    g_string_append_printf(text, "%-34s %12g %5.0f %4.0f %4.0f %5.0f %4.0f  %8.1f %9.2f %8.3f %7.4f %7.1f%s\n",
                           str_of(row, "series"), trace_num(row, x_key), trace_num(row, "tp"), trace_num(row, "pp"),
                           trace_num(row, "dp"), trace_num(row, "global_batch"), trace_num(row, "micro_batch"),
                           trace_num(row, "tflops_per_gpu"), trace_num(row, "sequences_per_s"),
                           trace_num(row, "iteration_time_s"), trace_num(row, "bubble_fraction"),
                           trace_num(row, "memory_GiB"), fits(row) ? "" : "  does not fit");
  }
}

static void source(TraceFigureOut *out, const char *what) {
  char *s = g_strdup_printf("Narayanan et al., SC21, %s", what);
  cJSON_AddStringToObject(out->json, "source", s);
  g_free(s);
}

static void header(TraceFigureContext *ctx, TraceFigureOut *out, const char *title) {
  g_string_append_printf(out->text, "%s on %s with %s\n", title, ctx->cluster->name, ctx->profile->name);
}

/* A base request: the model, parallel sizes and batch. */
static SimPlanRequest request(const ModelShape *m, guint gpus, guint tp, guint pp, guint B, guint b) {
  SimPlanRequest r;
  memset(&r, 0, sizeof r);
  r.model = *m;
  r.gpus = gpus;
  r.tp = tp;
  r.pp = pp;
  r.dp = gpus / (tp * pp);
  r.global_batch = B;
  r.micro_batch = b;
  return r;
}

/* --- figure 6: the bubble, analytic --- */

/* Section 3.3.2: with t = 1, n GPUs and b' = B/b, p = n/d and m = b'/d, so
 * the bubble (p-1)/m = (n/d - 1)/(b'/d) = (n - d)/b'.  Nothing simulated. */
gboolean trace_sc21_fig6(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  (void)error;
  static const guint ns[] = {32, 128}, bs[] = {32, 128};
  header(ctx, out, "SC21 figure 6: pipeline bubble (p-1)/m against the data-parallel size d, t = 1");
  g_string_append_printf(out->text, "%6s %6s %6s %6s %6s  %s\n", "n", "b'", "d", "p", "m", "bubble");
  for (guint i = 0; i < G_N_ELEMENTS(ns); i++)
    for (guint j = 0; j < G_N_ELEMENTS(bs); j++) {
      char series[48];
      g_snprintf(series, sizeof series, "n = %u, b' = %u", ns[i], bs[j]);
      for (guint d = 1; d <= ns[i] && d <= bs[j]; d *= 2) {
        guint p = ns[i] / d, m = bs[j] / d;
        double bubble = (p - 1.0) / m;
        cJSON *row = cJSON_CreateObject();
        cJSON_AddStringToObject(row, "series", series);
        cJSON_AddNumberToObject(row, "gpus", ns[i]);
        cJSON_AddNumberToObject(row, "batch_in_microbatches", bs[j]);
        cJSON_AddNumberToObject(row, "dp", d);
        cJSON_AddNumberToObject(row, "pp", p);
        cJSON_AddNumberToObject(row, "microbatches", m);
        cJSON_AddNumberToObject(row, "bubble_fraction", bubble);
        cJSON_AddItemToArray(out->rows, row);
        g_string_append_printf(out->text, "%6u %6u %6u %6u %6u  %.4f\n", ns[i], bs[j], d, p, m, bubble);
      }
    }
  source(out, "figure 6 (equation (p-1)/m with p = n/d, m = b'/d)");
  out->plot = new_plot(ctx, TRACE_PLOT_LINES, "SC21 figure 6: pipeline bubble against data-parallel size",
                       "data-parallel size d", "bubble fraction (p-1)/m", "analytic, t = 1, p = n/d, m = b'/d");
  trace_plot_set_x_log2(out->plot, TRUE);
  plot_rows(out->plot, out->rows, "dp", "bubble_fraction");
  return TRUE;
}

/* --- figures 7 and 8: microbatch size on one GPU, and equation (1) --- */

/* Runs the one-GPU configurations of figure 7: a batch of 128 sequences in
 * microbatches of b, so that the optimizer step is amortized as in a
 * steady-state measurement, with activation recomputation as in all of the
 * paper's runs (without it, microbatches of 8 and 16 do not fit: one layer's
 * attention scores alone take tens of GB). */
#define FIG7_BATCH 128u

static gboolean fig7_points(TraceFigureContext *ctx, TraceFigureOut *out, const char *series, GError **error) {
  Ref ref;
  if (!ref_open("fig7", &ref, error))
    return FALSE;
  GArray *mbs = g_array_new(FALSE, FALSE, sizeof(guint));
  ModelShape m;
  gboolean ok = ref_model(&ref, 1, &m, error) && ref_counts(&ref, ref.sweep, "micro_batch", mbs, error);
  Sweep sw = {ctx, out, "micro_batch"};
  for (guint i = 0; ok && i < mbs->len; i++) {
    SimPlanRequest r = request(&m, 1, 1, 1, FIG7_BATCH, UINTS(mbs, i));
    cJSON *row = run_point(&sw, series, UINTS(mbs, i), r, error);
    if (!(ok = row != NULL))
      break;
    /* one microbatch's forward, recomputation and backward: the compute
     * over m of them */
    cJSON_AddNumberToObject(row, "microbatch_time_s", trace_num(row, "compute_s") / trace_num(row, "microbatches"));
  }
  g_array_free(mbs, TRUE);
  ref_close(&ref);
  return ok;
}

gboolean trace_sc21_fig7(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  if (!fig7_points(ctx, out, "one GPU", error))
    return FALSE;
  header(ctx, out, "SC21 figure 7: throughput of one GPU against the microbatch size (4 layers, hidden 4096)");
  g_string_append_printf(out->text, "%6s %12s %14s %12s\n", "b", "TFLOP/s", "microbatch ms", "iteration s");
  const cJSON *row;
  cJSON_ArrayForEach(row, out->rows) {
    g_string_append_printf(out->text, "%6.0f %12.1f %14.3f %12.4f%s\n", trace_num(row, "micro_batch"),
                           trace_num(row, "tflops_per_gpu"), 1e3 * trace_num(row, "microbatch_time_s"),
                           trace_num(row, "iteration_time_s"), fits(row) ? "" : "  does not fit");
  }
  source(out, "figure 7");
  out->plot = new_plot(ctx, TRACE_PLOT_LINES, "SC21 figure 7: one GPU's throughput against the microbatch size",
                       "microbatch size b", "TFLOP/s per GPU",
                       "4 layers, hidden 4096, 128 heads; batch 128, activation recomputation");
  trace_plot_set_x_log2(out->plot, TRUE);
  plot_rows(out->plot, out->rows, "micro_batch", "tflops_per_gpu");
  return TRUE;
}

/* Equation (1): a batch of b' = B/d sequences in microbatches of b takes
 * (b'/b + p - 1) (t_f(b) + t_b(b)) on a pipeline of p stages; the
 * throughput b' / that, normalized by its best over b.  t_f + t_b is the
 * one-GPU microbatch time of figure 7 (the paper's own procedure). */
double trace_sc21_eq1(double batch, double b, double p, double t_microbatch) {
  return batch / ((batch / b + p - 1.0) * t_microbatch);
}

gboolean trace_sc21_fig8(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  Ref ref;
  if (!ref_open("fig8", &ref, error))
    return FALSE;
  guint p = 0;
  GArray *batches = g_array_new(FALSE, FALSE, sizeof(guint));
  gboolean ok = ref_count(&ref, ref.sweep, "pp", &p, error) && ref_counts(&ref, ref.sweep, "global_batch", batches, error);
  ref_close(&ref);
  /* the one-GPU times, as figure 7 runs them */
  TraceFigureOut times;
  trace_figure_out_init(&times, ctx->name);
  ok = ok && fig7_points(ctx, &times, "one GPU", error);
  header(ctx, out, "SC21 figure 8: normalized throughput from equation (1), (p, t) = (8, 8)");
  g_string_append_printf(out->text, "%6s %6s %14s %11s\n", "B", "b", "microbatch ms", "normalized");
  for (guint i = 0; ok && i < batches->len; i++) {
    double B = UINTS(batches, i), best = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, times.rows) best =
        fmax(best, trace_sc21_eq1(B, trace_num(t, "micro_batch"), p, trace_num(t, "microbatch_time_s")));
    char series[32];
    g_snprintf(series, sizeof series, "batch %u", UINTS(batches, i));
    cJSON_ArrayForEach(t, times.rows) {
      double b = trace_num(t, "micro_batch"), tb = trace_num(t, "microbatch_time_s");
      double v = trace_sc21_eq1(B, b, p, tb) / best;
      cJSON *row = cJSON_CreateObject();
      cJSON_AddStringToObject(row, "series", series);
      cJSON_AddNumberToObject(row, "global_batch", B);
      cJSON_AddNumberToObject(row, "micro_batch", b);
      cJSON_AddNumberToObject(row, "pp", p);
      cJSON_AddNumberToObject(row, "microbatch_time_s", tb);
      cJSON_AddNumberToObject(row, "normalized_throughput", v);
      cJSON_AddItemToArray(out->rows, row);
      g_string_append_printf(out->text, "%6.0f %6.0f %14.3f %11.4f\n", B, b, 1e3 * tb, v);
    }
  }
  trace_figure_out_clear(&times);
  g_array_free(batches, TRUE);
  if (!ok)
    return FALSE;
  source(out, "figure 8 (equation (1) on figure 7's microbatch times)");
  out->plot = new_plot(ctx, TRACE_PLOT_LINES, "SC21 figure 8: equation (1)'s estimate against the microbatch size",
                       "microbatch size b", "normalized throughput",
                       "(b'/b + p - 1)(t_f(b) + t_b(b)) with p = 8 and figure 7's simulated times");
  trace_plot_set_x_log2(out->plot, TRUE);
  plot_rows(out->plot, out->rows, "micro_batch", "normalized_throughput");
  return TRUE;
}

/* --- Table 2 and figure 10: PTD-P against ZeRO-3 --- */

typedef struct {
  const char *scheme;
  double params, published_tflops, published_days;
  SimPlanRequest req;
} T2Row;

static gboolean table2_rows(GArray *out, GError **error) {
  cJSON *root = trace_reference_load("megatron-sc21.json", error);
  if (!root)
    return FALSE;
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "table2"), "rows"), *row;
  const cJSON *common = cJSON_GetObjectItemCaseSensitive(root, "common");
  gboolean ok = cJSON_IsArray(rows);
  cJSON_ArrayForEach(row, rows) {
    if (!ok)
      break;
    const cJSON *scheme = cJSON_GetArrayItem(row, 0), *lpc = cJSON_GetArrayItem(row, 10);
    ok = cJSON_IsString(scheme) && cJSON_GetArraySize(row) == 13 && (cJSON_IsNull(lpc) || is_count(lpc)) &&
         (strcmp(scheme->valuestring, "ptdp") == 0 || strcmp(scheme->valuestring, "zero3") == 0) &&
         cJSON_IsNumber(cJSON_GetArrayItem(row, 1)) && cJSON_IsNumber(cJSON_GetArrayItem(row, 11)) &&
         cJSON_IsNumber(cJSON_GetArrayItem(row, 12));
    /* published numbers are positive: the error column divides by them */
    for (int c = 11; ok && c <= 12; c++)
      ok = cJSON_GetArrayItem(row, c)->valuedouble > 0 && cJSON_GetArrayItem(row, c)->valuedouble < 1e6;
    for (int c = 2; ok && c <= 9; c++)
      ok = is_count(cJSON_GetArrayItem(row, c));
    if (!ok)
      break;
    guint v[10];
    for (int c = 2; c <= 9; c++)
      v[c] = (guint)cJSON_GetArrayItem(row, c)->valuedouble;
    ModelShape m = {.layers = v[4], .hidden = v[3], .heads = v[2], .seq_len = (guint)trace_num(common, "seq_len"),
                    .vocab = (guint)trace_num(common, "vocab")};
    T2Row t = {strcmp(scheme->valuestring, "ptdp") == 0 ? "PTD-P" : "ZeRO-3", cJSON_GetArrayItem(row, 1)->valuedouble,
               cJSON_GetArrayItem(row, 11)->valuedouble, cJSON_GetArrayItem(row, 12)->valuedouble,
               request(&m, v[7], v[5], v[6], v[8], v[9])};
    if (t.req.tp == 1 && t.req.pp == 1 && strcmp(t.scheme, "ZeRO-3") == 0)
      t.req.zero = 3;
    if (is_count(lpc)) {
      t.req.schedule = SIM_SCHEDULE_INTERLEAVED;
      t.req.schedule_given = TRUE;
      t.req.layers_per_chunk = (guint)lpc->valuedouble;
    }
    t.req.tokens = 300e9;
    g_array_append_val(out, t);
  }
  if (!ok)
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "megatron-sc21.json: table2.rows is missing or has a malformed row (want [scheme ptdp|zero3, "
                "params_billion, heads, hidden, layers, tp, pp, gpus, global_batch, micro_batch, layers_per_chunk, "
                "tflops, days], tflops and days positive)");
  cJSON_Delete(root);
  return ok;
}

/* Runs Table 2's rows; the rows get the published numbers beside. */
static gboolean table2_run(TraceFigureContext *ctx, TraceFigureOut *out, GArray *t2, GError **error) {
  if (!table2_rows(t2, error))
    return FALSE;
  Sweep sw = {ctx, out, "gpus"};
  for (guint i = 0; i < t2->len; i++) {
    T2Row *t = &g_array_index(t2, T2Row, i);
    char series[48];
    g_snprintf(series, sizeof series, "%s, %.1fB", t->scheme, t->params);
    cJSON *row = run_point(&sw, series, t->req.gpus, t->req, error);
    if (!row)
      return FALSE;
    cJSON_AddNumberToObject(row, "published_tflops_per_gpu", t->published_tflops);
    cJSON_AddNumberToObject(row, "published_training_days", t->published_days);
    cJSON_AddNumberToObject(row, "error_percent", 100.0 * (trace_num(row, "tflops_per_gpu") - t->published_tflops) /
                                                       t->published_tflops);
  }
  return TRUE;
}

gboolean trace_sc21_table2(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  GArray *t2 = g_array_new(FALSE, FALSE, sizeof(T2Row));
  if (!table2_run(ctx, out, t2, error)) {
    g_array_free(t2, TRUE);
    return FALSE;
  }
  header(ctx, out, "SC21 Table 2: PTD-P against ZeRO-3 without model parallelism, 300B tokens");
  g_string_append_printf(out->text, "%-8s %7s %5s %5s %5s %4s  %9s %9s %7s  %8s %9s\n", "scheme", "params",
                         "t x p", "GPUs", "B", "b", "predicted", "published", "error", "days", "published");
  /* the picture pairs the k-th PTD-P row with the k-th ZeRO-3 row */
  guint n = t2->len / 2, np = 0, nz = 0;
  double *pred_p = g_new(double, t2->len), *pred_z = g_new(double, t2->len);
  double *pub_p = g_new(double, t2->len), *pub_z = g_new(double, t2->len);
  char **labels = g_new0(char *, t2->len + 1);
  guint *gpus_z = g_new0(guint, t2->len), *gpus_p = g_new0(guint, t2->len);
  double *params_p = g_new0(double, t2->len);
  const cJSON *row;
  guint i = 0;
  cJSON_ArrayForEach(row, out->rows) {
    const T2Row *t = &g_array_index(t2, T2Row, i++);
    g_string_append_printf(out->text, "%-8s %6.1fB %5.0f %5.0f %5.0f %4.0f  %9.1f %9.0f %+6.1f%%  %8.1f %9.0f%s\n",
                           t->scheme, t->params, trace_num(row, "tp") * trace_num(row, "pp"), trace_num(row, "gpus"),
                           trace_num(row, "global_batch"), trace_num(row, "micro_batch"),
                           trace_num(row, "tflops_per_gpu"), t->published_tflops, trace_num(row, "error_percent"),
                           trace_num(row, "training_days"), t->published_days, fits(row) ? "" : "  does not fit");
    double v = fits(row) ? trace_num(row, "tflops_per_gpu") : NAN;
    if (t->req.zero) {
      gpus_z[nz] = t->req.gpus;
      pub_z[nz] = t->published_tflops;
      pred_z[nz++] = v;
    } else {
      gpus_p[np] = t->req.gpus;
      params_p[np] = t->params;
      pub_p[np] = t->published_tflops;
      pred_p[np++] = v;
    }
  }
  n = MIN(np, nz);
  /* ZeRO-3's 529.6B at its smallest scale ran on 640 GPUs, PTD-P's on 560 */
  for (guint k = 0; k < n; k++)
    labels[k] = gpus_p[k] == gpus_z[k] ? g_strdup_printf("%.1fB, %u GPUs", params_p[k], gpus_p[k])
                                       : g_strdup_printf("%.1fB, %u / %u GPUs", params_p[k], gpus_p[k], gpus_z[k]);
  /* SC21 section 5.2's statements: PTD-P over ZeRO-3 at the smallest scale
   * (b = 4) and after doubling the GPUs, for each model (the pairs: the
   * k-th PTD-P row with the k-th ZeRO-3 row); and the ZeRO-3 rows' error */
  double mae = 0;
  guint nmae = 0;
  for (guint k = 0; k < nz; k++)
    if (isfinite(pred_z[k])) {
      mae += fabs(pred_z[k] - pub_z[k]) / pub_z[k];
      nmae++;
    }
  if (nmae)
    g_string_append_printf(out->text, "\nZeRO-3 rows: mean absolute error %.1f%% over %u rows\n", 100 * mae / nmae, nmae);
  for (guint k = 0; k + 1 < n; k++) {
    if (k % 3 != 0 || !(params_p[k] == params_p[k + 1]))
      continue;
    g_string_append_printf(out->text, "PTD-P over ZeRO-3, %.1fB at %u / %u GPUs: predicted %+.0f%%, published %+.0f%%",
                           params_p[k], gpus_p[k], gpus_z[k], 100 * (pred_p[k] / pred_z[k] - 1),
                           100 * (pub_p[k] / pub_z[k] - 1));
    g_string_append_printf(out->text, "; GPUs doubled (%u): predicted %+.0f%%, published %+.0f%%\n", gpus_p[k + 1],
                           100 * (pred_p[k + 1] / pred_z[k + 1] - 1), 100 * (pub_p[k + 1] / pub_z[k + 1] - 1));
  }
  source(out, "Table 2");
  out->plot = new_plot(ctx, TRACE_PLOT_BARS, "SC21 Table 2: PTD-P against ZeRO-3 without model parallelism",
                       "model and GPUs (PTD-P / ZeRO-3 where they differ)", "TFLOP/s per GPU",
                       "bars: predicted; black ticks: published");
  trace_plot_set_categories(out->plot, (const char *const *)labels, n);
  trace_plot_add_series(out->plot, "PTD-P", NULL, pred_p, n);
  trace_plot_add_series(out->plot, "ZeRO-3", NULL, pred_z, n);
  trace_plot_add_reference(out->plot, "published (Table 2)", NULL, pub_p, n);
  trace_plot_add_reference(out->plot, "published (Table 2)", NULL, pub_z, n);
  g_strfreev(labels);
  g_free(pred_p);
  g_free(pred_z);
  g_free(pub_p);
  g_free(pub_z);
  g_free(gpus_z);
  g_free(gpus_p);
  g_free(params_p);
  g_array_free(t2, TRUE);
  return TRUE;
}

gboolean trace_sc21_fig10(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  GArray *t2 = g_array_new(FALSE, FALSE, sizeof(T2Row));
  if (!table2_run(ctx, out, t2, error)) {
    g_array_free(t2, TRUE);
    return FALSE;
  }
  header(ctx, out, "SC21 figure 10: PTD-P and ZeRO-3 as the GPUs grow, batch fixed");
  text_rows(out->text, out->rows, "gpus", "GPUs");
  source(out, "figure 10 (the runs of Table 2)");
  out->plot = new_plot(ctx, TRACE_PLOT_LINES, "SC21 figure 10: PTD-P against ZeRO-3 as the GPUs grow", "GPUs",
                       "TFLOP/s per GPU", "lines: predicted; diamonds: published (Table 2)");
  trace_plot_set_x_log2(out->plot, TRUE);
  plot_rows(out->plot, out->rows, "gpus", "tflops_per_gpu");
  GPtrArray *names = series_of(out->rows);
  for (guint s = 0; s < names->len; s++) {
    double xs[16], ys[16];
    guint n = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, out->rows) {
      if (n < 16 && strcmp(str_of(row, "series"), g_ptr_array_index(names, s)) == 0) {
        xs[n] = trace_num(row, "gpus");
        ys[n++] = trace_num(row, "published_tflops_per_gpu");
      }
    }
    trace_plot_add_reference(out->plot, "published (Table 2)", xs, ys, n);
  }
  g_ptr_array_free(names, TRUE);
  g_array_free(t2, TRUE);
  return TRUE;
}

/* --- figure 11: pipeline weak scaling --- */

gboolean trace_sc21_fig11(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  Ref ref;
  if (!ref_open("fig11", &ref, error))
    return FALSE;
  GArray *pps = g_array_new(FALSE, FALSE, sizeof(guint)), *batches = g_array_new(FALSE, FALSE, sizeof(guint));
  guint tp = 0, per_pp = 0, b = 0;
  gboolean ok = ref_counts(&ref, ref.sweep, "pp", pps, error) &&
                ref_counts(&ref, ref.sweep, "global_batch", batches, error) && ref_count(&ref, ref.sweep, "tp", &tp, error) &&
                ref_count(&ref, ref.sweep, "gpus_per_pp", &per_pp, error) &&
                ref_count(&ref, ref.sweep, "micro_batch", &b, error);
  Sweep sw = {ctx, out, "pp"};
  for (guint j = 0; ok && j < batches->len; j++) {
    char series[32];
    g_snprintf(series, sizeof series, "batch %u", UINTS(batches, j));
    for (guint i = 0; ok && i < pps->len; i++) {
      ModelShape m;
      guint p = UINTS(pps, i);
      ok = ref_model(&ref, p, &m, error) &&
           run_point(&sw, series, p, request(&m, per_pp * p, tp, p, UINTS(batches, j), b), error) != NULL;
    }
  }
  ref_close(&ref);
  g_array_free(pps, TRUE);
  g_array_free(batches, TRUE);
  if (!ok)
    return FALSE;
  header(ctx, out, "SC21 figure 11: pipeline weak scaling, 3 layers per stage, t = 8");
  text_rows(out->text, out->rows, "pp", "p");
  source(out, "figure 11");
  out->plot = new_plot(ctx, TRACE_PLOT_LINES, "SC21 figure 11: pipeline-parallel weak scaling",
                       "pipeline-parallel size p (GPUs = 8 p)", "TFLOP/s per GPU",
                       "hidden 20480, 128 heads, 3 p layers, t = 8, b = 1");
  trace_plot_set_x_log2(out->plot, TRUE);
  plot_rows(out->plot, out->rows, "pp", "tflops_per_gpu");
  return TRUE;
}

/* --- figures 12 and 18: the interleaved schedule, scatter/gather --- */

/* GPT-3 175B on 96 GPUs (t 8, p 12) over batch sizes: each variant one
 * series.  `lpc` 0 is the non-interleaved schedule. */
typedef struct {
  const char *series;
  guint lpc;
  gboolean no_scatter_gather;
} Variant;

static gboolean gpt3_batches(TraceFigureContext *ctx, TraceFigureOut *out, const char *fig, const Variant *vars,
                             guint n_vars, GError **error) {
  Ref ref;
  if (!ref_open(fig, &ref, error))
    return FALSE;
  GArray *batches = g_array_new(FALSE, FALSE, sizeof(guint));
  guint tp = 0, pp = 0, gpus = 0, b = 0;
  ModelShape m;
  gboolean ok = ref_model(&ref, 1, &m, error) && ref_counts(&ref, ref.sweep, "global_batch", batches, error) &&
                ref_count(&ref, ref.sweep, "tp", &tp, error) && ref_count(&ref, ref.sweep, "pp", &pp, error) &&
                ref_count(&ref, ref.sweep, "gpus", &gpus, error) && ref_count(&ref, ref.sweep, "micro_batch", &b, error);
  Sweep sw = {ctx, out, "global_batch"};
  for (guint v = 0; ok && v < n_vars; v++)
    for (guint i = 0; ok && i < batches->len; i++) {
      SimPlanRequest r = request(&m, gpus, tp, pp, UINTS(batches, i), b);
      if (vars[v].lpc) {
        r.schedule = SIM_SCHEDULE_INTERLEAVED;
        r.schedule_given = TRUE;
        r.layers_per_chunk = vars[v].lpc;
      }
      r.no_scatter_gather = vars[v].no_scatter_gather;
      ok = run_point(&sw, vars[v].series, UINTS(batches, i), r, error) != NULL;
    }
  ref_close(&ref);
  g_array_free(batches, TRUE);
  return ok;
}

gboolean trace_sc21_fig12(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  static const Variant vars[] = {{"non-interleaved (1F1B)", 0, FALSE},
                                 {"interleaved, 2 layers per chunk", 2, FALSE},
                                 {"interleaved, no scatter/gather", 2, TRUE}};
  if (!gpt3_batches(ctx, out, "fig12", vars, G_N_ELEMENTS(vars), error))
    return FALSE;
  header(ctx, out, "SC21 figure 12: interleaved against non-interleaved schedule, GPT-3 175B on 96 GPUs");
  text_rows(out->text, out->rows, "global_batch", "batch");
  source(out, "figure 12");
  out->plot = new_plot(ctx, TRACE_PLOT_LINES, "SC21 figure 12: interleaved against non-interleaved 1F1B",
                       "global batch size", "TFLOP/s per GPU", "GPT-3 175B, 96 GPUs, t = 8, p = 12, b = 1");
  trace_plot_set_y_from_zero(out->plot, FALSE);
  plot_rows(out->plot, out->rows, "global_batch", "tflops_per_gpu");
  return TRUE;
}

gboolean trace_sc21_fig18(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  Ref ref;
  guint lpc = 0;
  if (!ref_open("fig18", &ref, error))
    return FALSE;
  gboolean ok = ref_count(&ref, ref.sweep, "layers_per_chunk", &lpc, error);
  ref_close(&ref);
  const Variant vars[] = {{"scatter/gather", lpc, FALSE}, {"no scatter/gather", lpc, TRUE}};
  if (!ok || !gpt3_batches(ctx, out, "fig18", vars, G_N_ELEMENTS(vars), error))
    return FALSE;
  header(ctx, out, "SC21 figure 18: the scatter/gather optimization, interleaved schedule, GPT-3 175B on 96 GPUs");
  text_rows(out->text, out->rows, "global_batch", "batch");
  source(out, "figure 18");
  out->plot = new_plot(ctx, TRACE_PLOT_LINES, "SC21 figure 18: with and without the scatter/gather optimization",
                       "global batch size", "TFLOP/s per GPU",
                       "GPT-3 175B, 96 GPUs, t = 8, p = 12, interleaved (2 layers per chunk), b = 1");
  trace_plot_set_y_from_zero(out->plot, FALSE);
  plot_rows(out->plot, out->rows, "global_batch", "tflops_per_gpu");
  return TRUE;
}

/* --- figures 13, 14, 15: splitting 64 GPUs two ways --- */

/* Each configuration a category "(a, b)" of two sizes, one series per
 * batch size: bars. */
typedef enum { SPLIT_TP_PP, SPLIT_PP_DP, SPLIT_TP_DP } Split;

static gboolean split_figure(TraceFigureContext *ctx, TraceFigureOut *out, const char *fig, Split split,
                             GError **error) {
  Ref ref;
  if (!ref_open(fig, &ref, error))
    return FALSE;
  GArray *sizes = g_array_new(FALSE, FALSE, sizeof(guint)), *batches = g_array_new(FALSE, FALSE, sizeof(guint));
  guint gpus = 0, b = 0, fixed = 1;
  ModelShape m;
  gboolean ok = ref_model(&ref, 1, &m, error) && ref_counts(&ref, ref.sweep, "global_batch", batches, error) &&
                ref_count(&ref, ref.sweep, "gpus", &gpus, error) && ref_count(&ref, ref.sweep, "micro_batch", &b, error);
  if (ok && split == SPLIT_TP_PP) { /* "tp_pp": [[t, p], ...] */
    const cJSON *pairs = cJSON_GetObjectItemCaseSensitive(ref.sweep, "tp_pp"), *pr;
    ok = cJSON_IsArray(pairs) && cJSON_GetArraySize(pairs) > 0;
    cJSON_ArrayForEach(pr, pairs) {
      ok = ok && cJSON_GetArraySize(pr) == 2 && is_count(cJSON_GetArrayItem(pr, 0)) && is_count(cJSON_GetArrayItem(pr, 1));
      if (ok) {
        guint t = (guint)cJSON_GetArrayItem(pr, 0)->valuedouble;
        g_array_append_val(sizes, t);
      }
    }
    if (!ok)
      ref_bad(error, fig, "tp_pp", "is not a list of [tp, pp] pairs");
  } else if (ok)
    ok = ref_counts(&ref, ref.sweep, split == SPLIT_PP_DP ? "pp" : "tp", sizes, error) &&
         ref_count(&ref, ref.sweep, split == SPLIT_PP_DP ? "tp" : "pp", &fixed, error);
  char **labels = g_new0(char *, sizes->len + 1);
  double *cats = g_new(double, sizes->len);
  Sweep sw = {ctx, out, "category"};
  for (guint i = 0; ok && i < sizes->len; i++) {
    guint a = UINTS(sizes, i), t, p, d;
    if (split == SPLIT_TP_PP)
      t = a, p = gpus / a, d = 1;
    else if (split == SPLIT_PP_DP)
      t = fixed, p = a, d = gpus / (a * fixed);
    else
      t = a, p = fixed, d = gpus / (a * fixed);
    labels[i] = split == SPLIT_TP_PP   ? g_strdup_printf("(t, p) = (%u, %u)", t, p)
                : split == SPLIT_PP_DP ? g_strdup_printf("(p, d) = (%u, %u)", p, d)
                                       : g_strdup_printf("(t, d) = (%u, %u)", t, d);
    cats[i] = i;
    (void)d;
  }
  for (guint j = 0; ok && j < batches->len; j++) {
    char series[32];
    g_snprintf(series, sizeof series, "batch %u", UINTS(batches, j));
    for (guint i = 0; ok && i < sizes->len; i++) {
      guint a = UINTS(sizes, i);
      guint t = split == SPLIT_PP_DP ? fixed : a, p = split == SPLIT_TP_PP ? gpus / a : split == SPLIT_PP_DP ? a : fixed;
      cJSON *row = run_point(&sw, series, i, request(&m, gpus, t, p, UINTS(batches, j), b), error);
      if (!(ok = row != NULL))
        break;
      cJSON_AddStringToObject(row, "configuration", labels[i]);
    }
  }
  ref_close(&ref);
  g_array_free(batches, TRUE);
  g_free(cats);
  if (ok) {
    static const char *const titles[] = {"SC21 figure 13: tensor against pipeline parallelism",
                                         "SC21 figure 14: pipeline against data parallelism",
                                         "SC21 figure 15: tensor against data parallelism"};
    static const char *const axes[] = {"(tensor, pipeline) parallel sizes", "(pipeline, data) parallel sizes",
                                       "(tensor, data) parallel sizes"};
    char *what = g_strdup_printf("%.1fB parameters (%u layers, hidden %u), %u GPUs, b = %u",
                                 model_param_count(&m) / 1e9, m.layers, m.hidden, gpus, b);
    header(ctx, out, titles[split]);
    g_string_append_printf(out->text, "%s\n", what);
    text_rows(out->text, out->rows, "category", "config #");
    out->plot = new_plot(ctx, TRACE_PLOT_BARS, titles[split], axes[split], "TFLOP/s per GPU", what);
    trace_plot_set_categories(out->plot, (const char *const *)labels, sizes->len);
    plot_rows(out->plot, out->rows, "category", "tflops_per_gpu");
    source(out, split == SPLIT_TP_PP ? "figure 13" : split == SPLIT_PP_DP ? "figure 14" : "figure 15");
    g_free(what);
  }
  g_strfreev(labels);
  g_array_free(sizes, TRUE);
  return ok;
}

gboolean trace_sc21_fig13(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  return split_figure(ctx, out, "fig13", SPLIT_TP_PP, error);
}

gboolean trace_sc21_fig14(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  return split_figure(ctx, out, "fig14", SPLIT_PP_DP, error);
}

gboolean trace_sc21_fig15(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  return split_figure(ctx, out, "fig15", SPLIT_TP_DP, error);
}

/* --- figure 16: microbatch size at scale --- */

gboolean trace_sc21_fig16(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  Ref ref;
  if (!ref_open("fig16", &ref, error))
    return FALSE;
  GArray *mbs = g_array_new(FALSE, FALSE, sizeof(guint)), *batches = g_array_new(FALSE, FALSE, sizeof(guint));
  guint tp = 0, pp = 0, gpus = 0;
  ModelShape m;
  gboolean ok = ref_model(&ref, 1, &m, error) && ref_counts(&ref, ref.sweep, "micro_batch", mbs, error) &&
                ref_counts(&ref, ref.sweep, "global_batch", batches, error) && ref_count(&ref, ref.sweep, "tp", &tp, error) &&
                ref_count(&ref, ref.sweep, "pp", &pp, error) && ref_count(&ref, ref.sweep, "gpus", &gpus, error);
  Sweep sw = {ctx, out, "micro_batch"};
  for (guint j = 0; ok && j < batches->len; j++) {
    char series[32];
    g_snprintf(series, sizeof series, "batch %u", UINTS(batches, j));
    for (guint i = 0; ok && i < mbs->len; i++)
      ok = run_point(&sw, series, UINTS(mbs, i), request(&m, gpus, tp, pp, UINTS(batches, j), UINTS(mbs, i)), error) !=
           NULL;
  }
  ref_close(&ref);
  g_array_free(mbs, TRUE);
  g_array_free(batches, TRUE);
  if (!ok)
    return FALSE;
  header(ctx, out, "SC21 figure 16: microbatch size, 91B parameters, (t, p) = (8, 8)");
  text_rows(out->text, out->rows, "micro_batch", "b");
  source(out, "figure 16");
  out->plot = new_plot(ctx, TRACE_PLOT_LINES, "SC21 figure 16: the microbatch size at scale", "microbatch size b",
                       "TFLOP/s per GPU", "91B parameters (32 layers, hidden 15360), 64 GPUs, t = 8, p = 8");
  trace_plot_set_x_log2(out->plot, TRUE);
  plot_rows(out->plot, out->rows, "micro_batch", "tflops_per_gpu");
  return TRUE;
}

/* --- figure 17: activation recomputation --- */

gboolean trace_sc21_fig17(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  Ref ref;
  if (!ref_open("fig17", &ref, error))
    return FALSE;
  GArray *batches = g_array_new(FALSE, FALSE, sizeof(guint));
  guint tp = 0, pp = 0, gpus = 0, b = 0;
  ModelShape m;
  gboolean ok = ref_model(&ref, 1, &m, error) && ref_counts(&ref, ref.sweep, "global_batch", batches, error) &&
                ref_count(&ref, ref.sweep, "tp", &tp, error) && ref_count(&ref, ref.sweep, "pp", &pp, error) &&
                ref_count(&ref, ref.sweep, "gpus", &gpus, error) && ref_count(&ref, ref.sweep, "micro_batch", &b, error);
  static const ModelRecompute modes[] = {MODEL_RECOMPUTE_FULL, MODEL_RECOMPUTE_NONE};
  static const char *const names[] = {"recomputation", "no recomputation"};
  Sweep sw = {ctx, out, "global_batch"};
  for (guint k = 0; ok && k < 2; k++)
    for (guint i = 0; ok && i < batches->len; i++) {
      SimPlanRequest r = request(&m, gpus, tp, pp, UINTS(batches, i), b);
      r.recompute = modes[k];
      r.recompute_given = TRUE;
      ok = run_point(&sw, names[k], UINTS(batches, i), r, error) != NULL;
    }
  ref_close(&ref);
  g_array_free(batches, TRUE);
  if (!ok)
    return FALSE;
  header(ctx, out, "SC21 figure 17: activation recomputation, 145B parameters, (t, p) = (8, 16)");
  text_rows(out->text, out->rows, "global_batch", "batch");
  source(out, "figure 17");
  out->plot = new_plot(ctx, TRACE_PLOT_LINES, "SC21 figure 17: with and without activation recomputation",
                       "global batch size", "sequences per second",
                       "145B parameters (80 layers, hidden 12288), 128 GPUs, t = 8, p = 16, b = 1");
  trace_plot_set_x_log2(out->plot, TRUE);
  plot_rows(out->plot, out->rows, "global_batch", "sequences_per_s");
  return TRUE;
}
