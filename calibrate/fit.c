/* ptdsim — fitting profiles to measurements, and synthetic measurements
 * (see fit.h for the models and the method). */
#include "fit.h"

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <string.h>

#include "../models/compute.h"
#include "../models/layer.h"

#define MAX_PARAMS 4

/* --- the least-squares driver --- */

typedef void (*ResidualFn)(const double *x, const void *data, double *r, size_t n);

typedef struct {
  ResidualFn fn;
  const void *data;
} Problem;

typedef struct {
  double x[MAX_PARAMS], se[MAX_PARAMS];
  double rms;       /* root mean square relative residual */
  double max_abs;   /* largest |relative residual| */
  guint iterations;
} NlsResult;

static int nls_f(const gsl_vector *x, void *params, gsl_vector *f) {
  const Problem *pb = params;
  double xv[MAX_PARAMS];
  for (size_t i = 0; i < x->size; i++)
    xv[i] = gsl_vector_get(x, i);
  double r[4096];
  size_t n = f->size;
  double *out = n <= G_N_ELEMENTS(r) ? r : g_new(double, n);
  pb->fn(xv, pb->data, out, n);
  int status = GSL_SUCCESS;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(out[i]))
      status = GSL_EDOM;
    gsl_vector_set(f, i, out[i]);
  }
  if (out != r)
    g_free(out);
  return status;
}

/* Minimises the sum of squared residuals from x0.  `what` names the fit in
 * errors. */
static gboolean nls(const char *what, ResidualFn fn, const void *data, size_t n, size_t p, const double *x0,
                    guint max_iter, NlsResult *res, GError **error) {
  memset(res, 0, sizeof *res);
  if (n < p + 1) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_TOO_FEW,
                "too few points for the %s fit: %zu given, it needs at least %zu (%zu parameters plus one)", what, n,
                p + 1, p);
    return FALSE;
  }
  gsl_set_error_handler_off(); /* GSL's default handler aborts; we report */
  Problem pb = {fn, data};
  gsl_multifit_nlinear_fdf fdf = {.f = nls_f, .df = NULL, .fvv = NULL, .n = n, .p = p, .params = &pb};
  gsl_multifit_nlinear_parameters params = gsl_multifit_nlinear_default_parameters();
  gsl_multifit_nlinear_workspace *w = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &params, n, p);
  gsl_vector *x = gsl_vector_alloc(p);
  for (size_t i = 0; i < p; i++)
    gsl_vector_set(x, i, x0[i]);
  int info = 0;
  int status = gsl_multifit_nlinear_init(x, &fdf, w);
  if (status == GSL_SUCCESS)
    status = gsl_multifit_nlinear_driver(max_iter, 1e-10, 1e-10, 1e-12, NULL, NULL, &info, w);
  gsl_vector *f = gsl_multifit_nlinear_residual(w);
  double chisq = 0;
  gsl_blas_ddot(f, f, &chisq);
  res->iterations = (guint)gsl_multifit_nlinear_niter(w);
  res->rms = sqrt(chisq / n);
  for (size_t i = 0; i < n; i++)
    res->max_abs = fmax(res->max_abs, fabs(gsl_vector_get(f, i)));
  /* No progress at a residual that is already at rounding level (noise-free
   * synthetic data) is convergence. */
  if (status == GSL_ENOPROG && res->rms < 1e-9)
    status = GSL_SUCCESS;
  gboolean ok = status == GSL_SUCCESS && isfinite(chisq);
  if (!ok) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_NO_CONVERGENCE,
                "the %s fit did not converge (%s after %u iterations, rms relative residual %.3g); check the "
                "measurements for outliers or raise --max-iterations",
                what, gsl_strerror(status), res->iterations, res->rms);
  } else {
    gsl_matrix *J = gsl_multifit_nlinear_jac(w);
    gsl_matrix *cov = gsl_matrix_alloc(p, p);
    gsl_multifit_nlinear_covar(J, 0.0, cov);
    double scale = n > p ? chisq / (double)(n - p) : 0;
    const gsl_vector *xs = gsl_multifit_nlinear_position(w);
    for (size_t i = 0; i < p; i++) {
      res->x[i] = gsl_vector_get(xs, i);
      res->se[i] = sqrt(fmax(0, gsl_matrix_get(cov, i, i) * scale));
    }
    gsl_matrix_free(cov);
  }
  gsl_vector_free(x);
  gsl_multifit_nlinear_free(w);
  return ok;
}

/* --- the three models --- */

typedef struct {
  const double *size, *t; /* size: bytes (memory) or bus bytes (collective); t: us */
} LineData;

/* t = alpha_us + size / (bw_GBps * 1e3) */
static void line_residuals(const double *x, const void *data, double *r, size_t n) {
  const LineData *d = data;
  for (size_t i = 0; i < n; i++)
    r[i] = (x[0] + d->size[i] / (x[1] * 1e3) - d->t[i]) / d->t[i];
}

static gboolean fit_line(const char *what, const double *size, const double *t, size_t n, guint max_iter,
                         NlsResult *res, GError **error) {
  double bw0 = 0, t0 = INFINITY;
  for (size_t i = 0; i < n; i++) {
    bw0 = fmax(bw0, size[i] / (t[i] * 1e3));
    t0 = fmin(t0, t[i]);
  }
  double x0[2] = {0.5 * t0, bw0 > 0 ? bw0 : 1};
  LineData d = {size, t};
  return nls(what, line_residuals, &d, n, 2, x0, max_iter, res, error);
}

typedef struct {
  const ModelGemm *g;
  const double *mem, *t; /* memory-bound us; measured us */
  double launch_us;
  ModelProfile *base;    /* the tiles and the device; e_max 1, no roll-off */
} GemmData;

/* x = (e_max, k_half, tile bandwidth in TB/s): the best tile depends on the
 * tile bandwidth (models/compute.h), so it is chosen again for every x. */
static void gemm_residuals(const double *x, const void *data, double *r, size_t n) {
  const GemmData *d = data;
  d->base->gemm_tile_bytes_per_s = x[2] * 1e12;
  for (size_t i = 0; i < n; i++) {
    double k = (double)d->g[i].k;
    double math = model_gemm_math_time_s(d->base, &d->g[i], 1.0) * 1e6 * (k + x[1]) / (k * x[0]);
    r[i] = (d->launch_us + fmax(math, d->mem[i]) - d->t[i]) / d->t[i];
  }
}

/* --- output helpers --- */

static cJSON *param(cJSON *parent, const char *key, double value, double se) {
  cJSON *o = cJSON_AddObjectToObject(parent, key);
  cJSON_AddNumberToObject(o, "value", value);
  cJSON_AddNumberToObject(o, "stderr", se);
  return o;
}

static void add_residual(cJSON *arr, const char *label, double measured_us, double predicted_us) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "what", label);
  cJSON_AddNumberToObject(o, "measured_us", measured_us);
  cJSON_AddNumberToObject(o, "predicted_us", predicted_us);
  cJSON_AddNumberToObject(o, "relative", (predicted_us - measured_us) / measured_us);
  cJSON_AddItemToArray(arr, o);
}

static cJSON *fit_summary(cJSON *fit, const char *key, const char *model, const NlsResult *r, size_t n) {
  cJSON *o = cJSON_AddObjectToObject(fit, key);
  cJSON_AddStringToObject(o, "model", model);
  cJSON_AddNumberToObject(o, "points", (double)n);
  cJSON_AddNumberToObject(o, "iterations", r->iterations);
  cJSON_AddNumberToObject(o, "rms_relative_residual", r->rms);
  cJSON_AddNumberToObject(o, "max_relative_residual", r->max_abs);
  return o;
}

static double round_sig(double v, int digits) {
  if (v == 0 || !isfinite(v))
    return v;
  double scale = pow(10, digits - 1 - (int)floor(log10(fabs(v))));
  return round(v * scale) / scale;
}

/* --- collectives --- */

typedef struct {
  double bytes, bus, t;
} CollPoint;

static int cmp_point(const void *a, const void *b) {
  double x = ((const CollPoint *)a)->bytes, y = ((const CollPoint *)b)->bytes;
  return (x > y) - (x < y);
}

static double ssr(const NlsResult *r, size_t n) {
  return r->rms * r->rms * (double)n;
}

/* One (op, ranks) group: one range, or two if a split at some size halves the
 * squared residuals (each side keeps at least 3 points and a positive alpha). */
static gboolean fit_collective(CalibCollOp op, guint ranks, CollPoint *pts, size_t n, guint max_iter, cJSON *profile_list,
                               cJSON *fit_list, GError **error) {
  qsort(pts, n, sizeof *pts, cmp_point);
  double *bus = g_new(double, n), *t = g_new(double, n);
  for (size_t i = 0; i < n; i++)
    bus[i] = pts[i].bus, t[i] = pts[i].t;
  char what[64];
  g_snprintf(what, sizeof what, "%s on %u ranks", calib_coll_name(op), ranks);
  NlsResult one, lo, hi, best_lo = {0}, best_hi = {0};
  gboolean ok = fit_line(what, bus, t, n, max_iter, &one, error);
  size_t split = 0;
  double best = ok ? ssr(&one, n) * 0.5 : 0;
  for (size_t j = 3; ok && j + 3 <= n; j++) {
    if (!fit_line(what, bus, t, j, max_iter, &lo, NULL) ||
        !fit_line(what, bus + j, t + j, n - j, max_iter, &hi, NULL))
      continue;
    double s = ssr(&lo, j) + ssr(&hi, n - j);
    if (s < best && lo.x[0] >= 0 && hi.x[0] >= 0 && lo.x[1] > 0 && hi.x[1] > 0) {
      best = s;
      split = j;
      best_lo = lo;
      best_hi = hi;
    }
  }
  if (ok && one.x[1] <= 0) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_NO_CONVERGENCE,
                "the %s fit gave a bus bandwidth of %.3g GB/s, which is not physical; check the measurements", what,
                one.x[1]);
    ok = FALSE;
  }
  if (ok) {
    NlsResult ranges[2];
    size_t lo_i[2] = {0, split}, hi_i[2] = {split ? split - 1 : n - 1, n - 1};
    guint nr = split ? 2 : 1;
    if (split)
      ranges[0] = best_lo, ranges[1] = best_hi;
    else
      ranges[0] = one;
    ModelCollFit mf = {(ModelCollOp)op, ranks, nr, {0}, {0}};
    cJSON *pc = cJSON_CreateObject(), *fc = cJSON_CreateObject();
    cJSON_AddStringToObject(pc, "op", calib_coll_name(op));
    cJSON_AddNumberToObject(pc, "ranks", ranks);
    cJSON *pr = cJSON_AddArrayToObject(pc, "ranges");
    cJSON_AddStringToObject(fc, "op", calib_coll_name(op));
    cJSON_AddNumberToObject(fc, "ranks", ranks);
    cJSON_AddNumberToObject(fc, "points", (double)n);
    cJSON *fr = cJSON_AddArrayToObject(fc, "ranges");
    for (guint r = 0; r < nr; r++) {
      double alpha = fmax(0, round_sig(ranges[r].x[0], 6)), bw = round_sig(ranges[r].x[1], 6);
      mf.alpha_s[r] = alpha * 1e-6;
      mf.busbw[r] = bw * 1e9;
      cJSON *o = cJSON_CreateObject();
      cJSON_AddNumberToObject(o, "alpha_us", alpha);
      cJSON_AddNumberToObject(o, "busbw_GBps", bw);
      cJSON_AddNumberToObject(o, "min_bytes", pts[lo_i[r]].bytes);
      cJSON_AddNumberToObject(o, "max_bytes", pts[hi_i[r]].bytes);
      cJSON_AddItemToArray(pr, o);
      cJSON *f = cJSON_CreateObject();
      cJSON_AddNumberToObject(f, "min_bytes", pts[lo_i[r]].bytes);
      cJSON_AddNumberToObject(f, "max_bytes", pts[hi_i[r]].bytes);
      param(f, "alpha_us", ranges[r].x[0], ranges[r].se[0]);
      param(f, "busbw_GBps", ranges[r].x[1], ranges[r].se[1]);
      cJSON_AddNumberToObject(f, "rms_relative_residual", ranges[r].rms);
      cJSON_AddNumberToObject(f, "iterations", ranges[r].iterations);
      cJSON_AddItemToArray(fr, f);
    }
    cJSON *res = cJSON_AddArrayToObject(fc, "residuals");
    double sq = 0;
    for (size_t i = 0; i < n; i++) {
      char label[48];
      g_snprintf(label, sizeof label, "%.0f B", pts[i].bytes);
      double pred = model_coll_fit_time_s(&mf, pts[i].bus) * 1e6;
      add_residual(res, label, pts[i].t, pred);
      sq += pow((pred - pts[i].t) / pts[i].t, 2);
    }
    cJSON_AddNumberToObject(fc, "rms_relative_residual", sqrt(sq / n));
    cJSON_AddItemToArray(profile_list, pc);
    cJSON_AddItemToArray(fit_list, fc);
  }
  g_free(bus);
  g_free(t);
  return ok;
}

static gboolean fit_collectives(const CalibMeasurements *m, guint max_iter, cJSON *profile, cJSON *fit, GError **error) {
  cJSON *plist = cJSON_CreateArray(), *flist = cJSON_AddArrayToObject(fit, "collectives");
  cJSON *skipped = cJSON_AddArrayToObject(fit, "collectives_not_fitted");
  gboolean ok = TRUE;
  for (int op = 0; ok && op < CALIB_N_COLL; op++) {
    /* Distinct rank counts in the order first seen, then sorted. */
    GArray *ranks = g_array_new(FALSE, FALSE, sizeof(guint));
    for (guint i = 0; i < m->coll->len; i++) {
      const CalibColl *c = &g_array_index(m->coll, CalibColl, i);
      gboolean seen = FALSE;
      for (guint j = 0; j < ranks->len; j++)
        seen |= g_array_index(ranks, guint, j) == c->ranks;
      if (c->op == (CalibCollOp)op && !seen)
        g_array_append_val(ranks, c->ranks);
    }
    for (guint a = 0; a < ranks->len; a++)
      for (guint b = a + 1; b < ranks->len; b++)
        if (g_array_index(ranks, guint, b) < g_array_index(ranks, guint, a)) {
          guint tmp = g_array_index(ranks, guint, a);
          g_array_index(ranks, guint, a) = g_array_index(ranks, guint, b);
          g_array_index(ranks, guint, b) = tmp;
        }
    for (guint j = 0; ok && j < ranks->len; j++) {
      guint r = g_array_index(ranks, guint, j);
      if (calib_busbw_factor((CalibCollOp)op, r) <= 0 || cJSON_GetArraySize(plist) >= MODEL_PROFILE_MAX_COLL) {
        char note[96];
        g_snprintf(note, sizeof note, "%s on %u rank%s: %s", calib_coll_name((CalibCollOp)op), r, r == 1 ? "" : "s",
                   r == 1 ? "one rank moves no bus bytes" : "too many collective groups");
        cJSON_AddItemToArray(skipped, cJSON_CreateString(note));
        continue;
      }
      GArray *pts = g_array_new(FALSE, FALSE, sizeof(CollPoint));
      for (guint i = 0; i < m->coll->len; i++) {
        const CalibColl *c = &g_array_index(m->coll, CalibColl, i);
        if (c->op == (CalibCollOp)op && c->ranks == r) {
          CollPoint p = {c->bytes, c->bytes * calib_busbw_factor(c->op, r), c->t.median_us};
          g_array_append_val(pts, p);
        }
      }
      ok = fit_collective((CalibCollOp)op, r, (CollPoint *)pts->data, pts->len, max_iter, plist, flist, error);
      g_array_free(pts, TRUE);
    }
    g_array_free(ranks, TRUE);
  }
  if (ok && cJSON_GetArraySize(plist) > 0)
    cJSON_AddItemToObject(profile, "collectives", plist);
  else
    cJSON_Delete(plist);
  return ok;
}

/* --- the whole fit --- */

static void fill_profile(ModelProfile *p, const CalibMeasurements *m, const ModelProfile *tiles, double launch_us,
                         double bw_GBps, double hbm_GBps, double e_max, double k_half, double tile_GBps) {
  memset(p, 0, sizeof *p);
  p->kind = MODEL_PROFILE_ANALYTIC;
  p->peak_flops = m->device.peak_tflops * 1e12;
  p->sms = m->device.sms;
  p->memory_bytes = m->device.memory_GiB * 1073741824.0;
  p->hbm_bytes_per_s = hbm_GBps * 1e9;
  p->memory_efficiency = bw_GBps / hbm_GBps;
  p->kernel_launch_s = launch_us * 1e-6;
  p->n_tiles = tiles->n_tiles;
  memcpy(p->tile_m, tiles->tile_m, sizeof p->tile_m);
  memcpy(p->tile_n, tiles->tile_n, sizeof p->tile_n);
  p->gemm_k_half = k_half;
  p->gemm_efficiency_max = e_max;
  p->gemm_tile_bytes_per_s = tile_GBps * 1e9;
  p->sustained_clock_ratio = 1.0;
}

void calib_layer_predict(const ModelProfile *p, guint hidden, guint heads, guint seq, guint micro_batch, guint tp,
                         gboolean fused, ModelLayerCost *out) {
  ModelShape shape = {.layers = 1, .hidden = hidden, .heads = heads, .seq_len = seq, .vocab = 51200}; /* one layer; the vocabulary does not enter a layer's cost */
  model_layer_cost(p, &shape, tp, micro_batch, fused, out);
}

cJSON *calib_fit(const CalibMeasurements *m, const CalibFitOptions *opt, GError **error) {
  guint max_iter = opt->max_iterations ? opt->max_iterations : 200;
  /* 1. Memory-bound copies. */
  guint nb = m->membw->len;
  double *size = g_new(double, MAX(nb, 1)), *t = g_new(double, MAX(nb, 1));
  for (guint i = 0; i < nb; i++) {
    const CalibMembw *b = &g_array_index(m->membw, CalibMembw, i);
    size[i] = b->bytes, t[i] = b->t.median_us;
  }
  NlsResult mem;
  gboolean ok = fit_line("memory bandwidth (membw)", size, t, nb, max_iter, &mem, error);
  g_free(size);
  g_free(t);
  if (!ok)
    return NULL;
  if (mem.x[1] <= 0 || mem.x[0] < 0) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_NO_CONVERGENCE,
                "the memory bandwidth fit gave launch %.3g us and bandwidth %.3g GB/s, which is not physical; check "
                "the membw measurements",
                mem.x[0], mem.x[1]);
    return NULL;
  }
  double launch_us = round_sig(mem.x[0], 6), bw = round_sig(mem.x[1], 6);
  double hbm = fmax(m->device.hbm_GBps, bw);

  /* 2. GEMMs of one dtype. */
  const char *dtype = opt->dtype ? opt->dtype : "fp16";
  GArray *idx = g_array_new(FALSE, FALSE, sizeof(guint));
  for (guint i = 0; i < m->gemm->len; i++)
    if (strcmp(g_array_index(m->gemm, CalibGemm, i).dtype, dtype) == 0)
      g_array_append_val(idx, i);
  guint ng = idx->len;
  ModelGemm *gg = g_new(ModelGemm, MAX(ng, 1));
  double *mt = g_new(double, MAX(ng, 1)), *gt = g_new(double, MAX(ng, 1));
  ModelProfile base;
  fill_profile(&base, m, opt->tiles_from, launch_us, bw, hbm, 1.0, 0.0, 0.0);
  for (guint j = 0; j < ng; j++) {
    const CalibGemm *g = &g_array_index(m->gemm, CalibGemm, g_array_index(idx, guint, j));
    gg[j] = (ModelGemm){g->batch, g->m, g->n, g->k};
    double bytes = 2.0 * (double)g->batch * ((double)g->m * g->k + (double)g->k * g->n + (double)g->m * g->n);
    mt[j] = bytes / (bw * 1e3);
    gt[j] = g->t.median_us;
  }
  GemmData gd = {gg, mt, gt, launch_us, &base};
  /* Start the tile bandwidth low, where tiles up to 128 x 128 (intensity
   * 64 FLOP/B) are bandwidth-bound: the per-tile roofline is flat in the
   * bandwidth once every chosen tile is compute-bound, so the fit must
   * approach the truth from below to see it. */
  double x0[3] = {0.8, 64, m->device.peak_tflops / 64.0};
  NlsResult gf;
  char what[48];
  g_snprintf(what, sizeof what, "GEMM efficiency (%s gemm records)", dtype);
  ok = nls(what, gemm_residuals, &gd, ng, 3, x0, max_iter, &gf, error);
  if (ok && !(gf.x[0] > 0 && gf.x[0] <= 1 && gf.x[1] > 0 && gf.x[2] > 0)) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_NO_CONVERGENCE,
                "the GEMM fit gave e_max %.3g, k_half %.3g and tile bandwidth %.3g TB/s, outside (0, 1], > 0 and > 0; "
                "check the gemm measurements (device peak_tflops %.1f)",
                gf.x[0], gf.x[1], gf.x[2], m->device.peak_tflops);
    ok = FALSE;
  }
  g_free(gg);
  g_free(mt);
  g_free(gt);
  if (!ok) {
    g_array_free(idx, TRUE);
    return NULL;
  }
  double e_max = round_sig(gf.x[0], 6), k_half = round_sig(gf.x[1], 6), tile_bw = round_sig(gf.x[2] * 1e3, 6);
  ModelProfile fitted;
  fill_profile(&fitted, m, opt->tiles_from, launch_us, bw, hbm, e_max, k_half, tile_bw);

  /* The profile. */
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "name", opt->name);
  cJSON_AddStringToObject(root, "kind", "analytic");
  char *desc = g_strdup_printf("%s, fitted by ptdsim fit from %s (%s)", m->device.name, opt->measurements_path,
                               m->synthetic ? "SYNTHETIC measurements" : "measured by ptdsim-calibrate");
  cJSON_AddStringToObject(root, "description", desc);
  g_free(desc);
  cJSON *prov = cJSON_AddObjectToObject(root, "provenance");
  cJSON_AddStringToObject(prov, "method",
                          "fitted by ptdsim fit: GSL nonlinear least squares on relative residuals (see fit block)");
  cJSON_AddStringToObject(prov, "measurements", opt->measurements_path);
  if (m->synthetic)
    cJSON_AddStringToObject(prov, "synthetic", m->synthetic);
  cJSON_AddStringToObject(prov, "tool", m->tool ? m->tool : "unknown");
  cJSON_AddStringToObject(prov, "host", m->host ? m->host : "unknown");
  cJSON_AddStringToObject(prov, "date", m->date ? m->date : "unknown");
  char *dev = g_strdup_printf("%s, %u SMs, compute capability %s, SM clock %.0f MHz, driver %s, CUDA %s, cuBLAS %s, "
                              "NCCL %s",
                              m->device.name, m->device.sms,
                              m->device.compute_capability ? m->device.compute_capability : "?", m->device.sm_clock_MHz,
                              m->device.driver ? m->device.driver : "?",
                              m->device.cuda_runtime ? m->device.cuda_runtime : "?",
                              m->device.cublas ? m->device.cublas : "?", m->device.nccl ? m->device.nccl : "?");
  cJSON_AddStringToObject(prov, "device", dev);
  g_free(dev);
  cJSON_AddStringToObject(prov, "peak_tflops", m->device.peak_source ? m->device.peak_source : "from the measurements");
  cJSON_AddStringToObject(prov, "gemm.tiles", opt->tiles_from->name ? opt->tiles_from->name : "?");
  cJSON_AddStringToObject(prov, "sustained_clock_ratio",
                          "1: the GEMMs were measured at the clocks the GPU ran during calibration");
  cJSON_AddNumberToObject(root, "peak_tflops", m->device.peak_tflops);
  cJSON_AddNumberToObject(root, "sms", m->device.sms);
  cJSON_AddNumberToObject(root, "memory_GiB", m->device.memory_GiB);
  cJSON_AddNumberToObject(root, "hbm_GBps", hbm);
  cJSON_AddNumberToObject(root, "memory_efficiency", bw / hbm);
  cJSON_AddNumberToObject(root, "kernel_launch_us", launch_us);
  cJSON_AddNumberToObject(root, "sustained_clock_ratio", 1);
  cJSON *gemm = cJSON_AddObjectToObject(root, "gemm");
  cJSON *tiles = cJSON_AddArrayToObject(gemm, "tiles");
  for (guint i = 0; i < fitted.n_tiles; i++) {
    int tm[2] = {(int)fitted.tile_m[i], (int)fitted.tile_n[i]};
    cJSON_AddItemToArray(tiles, cJSON_CreateIntArray(tm, 2));
  }
  cJSON_AddNumberToObject(gemm, "k_half", k_half);
  cJSON_AddNumberToObject(gemm, "tile_bandwidth_GBps", tile_bw);
  cJSON_AddNumberToObject(gemm, "efficiency_max", e_max);

  /* The fit record. */
  cJSON *fit = cJSON_CreateObject();
  cJSON *fm = fit_summary(fit, "memory", "t = launch + bytes / bandwidth (membw copies)", &mem, nb);
  cJSON *pm = cJSON_AddObjectToObject(fm, "parameters");
  param(pm, "launch_us", mem.x[0], mem.se[0]);
  param(pm, "bandwidth_GBps", mem.x[1], mem.se[1]);
  cJSON *res = cJSON_AddArrayToObject(fm, "residuals");
  for (guint i = 0; i < nb; i++) {
    const CalibMembw *b = &g_array_index(m->membw, CalibMembw, i);
    char label[48];
    g_snprintf(label, sizeof label, "copy %.0f B moved", b->bytes);
    add_residual(res, label, b->t.median_us, model_memop_time_s(&fitted, b->bytes) * 1e6);
  }
  cJSON *fg = fit_summary(fit, "gemm",
                          "t = launch + max(T1 (K + k_half) / (K e_max), bytes / bandwidth), T1 the best tile's "
                          "wave-quantized time at peak times min(1, its intensity x tile_bandwidth / peak) "
                          "(models/compute.h)",
                          &gf, ng);
  cJSON_AddStringToObject(fg, "dtype", dtype);
  cJSON *pg = cJSON_AddObjectToObject(fg, "parameters");
  param(pg, "efficiency_max", gf.x[0], gf.se[0]);
  param(pg, "k_half", gf.x[1], gf.se[1]);
  param(pg, "tile_bandwidth_GBps", gf.x[2] * 1e3, gf.se[2] * 1e3);
  res = cJSON_AddArrayToObject(fg, "residuals");
  for (guint j = 0; j < ng; j++) {
    const CalibGemm *g = &g_array_index(m->gemm, CalibGemm, g_array_index(idx, guint, j));
    ModelGemm mg = {g->batch, g->m, g->n, g->k};
    char label[96];
    g_snprintf(label, sizeof label, "%s %" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT,
               g->op, g->batch, g->m, g->n, g->k);
    add_residual(res, label, g->t.median_us, model_gemm_time_s(&fitted, &mg) * 1e6);
  }
  g_array_free(idx, TRUE);
  /* Not fitted: how the fitted model predicts the element-wise kernels and
   * whole layers. */
  res = cJSON_AddArrayToObject(fit, "kernels_check");
  for (guint i = 0; i < m->kernels->len; i++) {
    const CalibKernel *k = &g_array_index(m->kernels, CalibKernel, i);
    if (strcmp(k->name, "attention") == 0)
      continue; /* GEMMs inside: not a memory-bound prediction */
    char label[64];
    g_snprintf(label, sizeof label, "%s%s", k->name, k->fused ? " (fused)" : " (unfused)");
    add_residual(res, label, k->t.median_us, (k->kernels * fitted.kernel_launch_s + k->bytes / (bw * 1e9)) * 1e6);
  }
  res = cJSON_AddArrayToObject(fit, "layer_check");
  for (guint i = 0; i < m->layers->len; i++) {
    const CalibLayer *l = &g_array_index(m->layers, CalibLayer, i);
    ModelLayerCost c;
    calib_layer_predict(&fitted, l->hidden, l->heads, l->seq, l->micro_batch, l->tp, l->fused, &c);
    char label[96];
    g_snprintf(label, sizeof label, "layer h=%u a=%u s=%u b=%u t=%u forward", l->hidden, l->heads, l->seq,
               l->micro_batch, l->tp);
    add_residual(res, label, l->fwd.median_us, (c.fwd.seg_s[0] + c.fwd.seg_s[1] + c.fwd.seg_s[2]) * 1e6);
    g_snprintf(label, sizeof label, "layer h=%u a=%u s=%u b=%u t=%u backward", l->hidden, l->heads, l->seq,
               l->micro_batch, l->tp);
    add_residual(res, label, l->bwd.median_us, (c.bwd.seg_s[0] + c.bwd.seg_s[1] + c.bwd.seg_s[2]) * 1e6);
    if (l->has_recompute) {
      g_snprintf(label, sizeof label, "layer h=%u a=%u s=%u b=%u t=%u recompute", l->hidden, l->heads, l->seq,
                 l->micro_batch, l->tp);
      add_residual(res, label, l->recompute.median_us, (c.fwd.seg_s[0] + c.fwd.seg_s[1] + c.fwd.seg_s[2]) * 1e6);
    }
  }
  if (!fit_collectives(m, max_iter, root, fit, error)) {
    cJSON_Delete(fit);
    cJSON_Delete(root);
    return NULL;
  }
  cJSON_AddItemToObject(root, "fit", fit);
  return root;
}

/* --- synthetic measurements --- */

typedef struct {
  gsl_rng *rng;
  double noise;
} Noise;

static CalibTime noisy(Noise *nz, double seconds) {
  double med = seconds * 1e6 * exp(nz->noise * gsl_ran_gaussian(nz->rng, 1.0));
  CalibTime t = {med, med * exp(-2.0 * nz->noise), med * exp(-1.28 * nz->noise), med * exp(1.28 * nz->noise),
                 med * exp(2.0 * nz->noise), 50};
  return t;
}

CalibMeasurements *calib_synthesize(const ModelProfile *p, const ModelNet *net, const CalibPlan *plan, double noise,
                                    gulong seed) {
  CalibMeasurements *m = calib_measurements_new();
  Noise nz = {gsl_rng_alloc(gsl_rng_mt19937), noise};
  gsl_rng_set(nz.rng, seed);
  m->tool = g_strdup("ptdsim fit --synthesize");
  m->host = g_strdup("none (synthetic)");
  m->date = g_strdup("none (synthetic)");
  m->synthetic = g_strdup_printf("made from profile %s with relative noise %g, seed %lu", p->name ? p->name : "?",
                                 noise, seed);
  m->warmup = 10;
  m->reps = 50;
  CalibDevice *d = &m->device;
  d->name = g_strdup_printf("synthetic %s", p->name ? p->name : "device");
  d->sms = p->sms;
  d->peak_tflops = p->peak_flops / 1e12;
  d->hbm_GBps = p->hbm_bytes_per_s / 1e9;
  d->memory_GiB = p->memory_bytes / 1073741824.0;
  d->peak_source = g_strdup("the source profile's peak_tflops");
  guint ranks = plan->cfg.gpus;
  d->gpus = ranks;

  for (int dt = 0; dt < 2; dt++)
    for (guint i = 0; i < plan->gemm->len; i++) {
      const CalibPlanGemm *pg = &g_array_index(plan->gemm, CalibPlanGemm, i);
      CalibGemm g = {.batch = pg->batch, .m = pg->m, .n = pg->n, .k = pg->k};
      g_strlcpy(g.dtype, dt ? "bf16" : "fp16", sizeof g.dtype);
      g_strlcpy(g.op, pg->op, sizeof g.op);
      g_strlcpy(g.layout, pg->layout, sizeof g.layout);
      ModelGemm mg = {g.batch, g.m, g.n, g.k};
      g.t = noisy(&nz, model_gemm_time_s(p, &mg));
      g_array_append_val(m->gemm, g);
    }
  for (guint i = 0; i < plan->membw_bytes->len; i++) {
    CalibMembw b = {.bytes = 2 * g_array_index(plan->membw_bytes, double, i)};
    b.t = noisy(&nz, model_memop_time_s(p, b.bytes));
    g_array_append_val(m->membw, b);
  }
  double bw = p->hbm_bytes_per_s * p->memory_efficiency;
  for (guint i = 0; i < plan->kernels->len; i++) {
    const CalibPlanKernel *pk = &g_array_index(plan->kernels, CalibPlanKernel, i);
    if (strcmp(pk->name, "attention") == 0)
      continue; /* needs the GEMMs' shapes: only real runs measure it */
    CalibKernel k = {.fused = pk->fused, .rows = pk->rows, .cols = pk->cols, .bytes = pk->bytes, .kernels = pk->kernels};
    g_strlcpy(k.name, pk->name, sizeof k.name);
    k.t = noisy(&nz, pk->kernels * p->kernel_launch_s + pk->bytes / bw);
    g_array_append_val(m->kernels, k);
  }
  for (guint si = 0; si < plan->cfg.n_shapes; si++) {
    const CalibLayerShape *c = &plan->cfg.shapes[si];
    ModelLayerCost lc;
    calib_layer_predict(p, c->hidden, c->heads, c->seq, c->micro_batch, c->tp, TRUE, &lc);
    CalibLayer l = {.hidden = c->hidden, .heads = c->heads, .seq = c->seq, .micro_batch = c->micro_batch, .tp = c->tp,
                    .fused = TRUE, .has_recompute = TRUE};
    double fwd = lc.fwd.seg_s[0] + lc.fwd.seg_s[1] + lc.fwd.seg_s[2];
    l.fwd = noisy(&nz, fwd);
    l.recompute = noisy(&nz, fwd); /* the same work (models/layer.h) */
    l.bwd = noisy(&nz, lc.bwd.seg_s[0] + lc.bwd.seg_s[1] + lc.bwd.seg_s[2]);
    g_array_append_val(m->layers, l);
  }

  /* The harness's order: each GPU count, each collective, each size;
   * send/receive once, between two GPUs. */
  guint counts[16], nr = calib_plan_nccl_ranks(ranks, counts, G_N_ELEMENTS(counts));
  for (guint ri = 0; ri < nr; ri++)
    for (int op = 0; op < CALIB_N_COLL; op++) {
      guint r = op == CALIB_SENDRECV ? 2 : counts[ri];
      if (op == CALIB_SENDRECV && ri + 1 != nr)
        continue;
      for (guint i = 0; i < plan->nccl_bytes->len; i++) {
        double bytes = g_array_index(plan->nccl_bytes, double, i);
        if (!calib_plan_coll_fits((CalibCollOp)op, op == CALIB_SENDRECV ? ranks : r, bytes))
          continue;
        double s = op == CALIB_SENDRECV ? model_p2p_time_s(net, bytes, TRUE)
                                        : model_collective_time_s(net, (ModelCollOp)op, bytes, r, 1, NULL);
        if (!(s > 0))
          continue; /* one rank: nothing moves, nothing to fit */
        CalibColl cc = {(CalibCollOp)op, r, bytes, noisy(&nz, s)};
        g_array_append_val(m->coll, cc);
      }
    }
  gsl_rng_free(nz.rng);
  return m;
}

/* --- measured against predicted --- */

static int cmp_abs(const void *a, const void *b) {
  double x = fabs(*(const double *)a), y = fabs(*(const double *)b);
  return (x > y) - (x < y);
}

/* Median and 90th percentile of |errors| (type-7 quantiles, as the
 * measurements' spreads), sorted in place by magnitude. */
static void abs_stats(double *e, guint n, double *median, double *p90, double *worst) {
  *median = *p90 = *worst = 0;
  if (n == 0)
    return;
  qsort(e, n, sizeof *e, cmp_abs);
  double pos = 0.5 * (n - 1), pos9 = 0.9 * (n - 1);
  guint lo = (guint)pos, lo9 = (guint)pos9;
  guint hi = MIN(lo + 1, n - 1), hi9 = MIN(lo9 + 1, n - 1);
  *median = fabs(e[lo]) + (pos - lo) * (fabs(e[hi]) - fabs(e[lo]));
  *p90 = fabs(e[lo9]) + (pos9 - lo9) * (fabs(e[hi9]) - fabs(e[lo9]));
  *worst = fabs(e[n - 1]);
}

static void add_pass(cJSON *rows, const CalibLayer *l, const char *pass, double measured_us, double predicted_us) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "hidden", l->hidden);
  cJSON_AddNumberToObject(o, "heads", l->heads);
  cJSON_AddNumberToObject(o, "seq", l->seq);
  cJSON_AddNumberToObject(o, "micro_batch", l->micro_batch);
  cJSON_AddNumberToObject(o, "tp", l->tp);
  cJSON_AddStringToObject(o, "pass", pass);
  cJSON_AddNumberToObject(o, "measured_us", measured_us);
  cJSON_AddNumberToObject(o, "predicted_us", predicted_us);
  cJSON_AddNumberToObject(o, "error", predicted_us / measured_us - 1);
  cJSON_AddItemToArray(rows, o);
}

static const char *gemm_group(const char *op) {
  if (g_str_has_prefix(op, "grid."))
    return op;
  return g_str_has_prefix(op, "layout.") ? "layout" : "layer";
}

cJSON *calib_compare(const CalibMeasurements *m, const ModelProfile *p, const char *dtype, GError **error) {
  if (p->kind != MODEL_PROFILE_ANALYTIC) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                "--compare needs an analytic profile (one with a GEMM model), not '%s'", p->name ? p->name : "?");
    return NULL;
  }
  if (m->layers->len == 0 && m->gemm->len == 0) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_TOO_FEW,
                "the measurements have no layer and no gemm records to compare; run ptdsim-calibrate --mode "
                "gemm,layer");
    return NULL;
  }
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "profile", p->name ? p->name : "?");
  cJSON_AddStringToObject(root, "device", m->device.name);
  cJSON_AddStringToObject(root, "measured", m->synthetic ? m->synthetic : "measured by ptdsim-calibrate");
  cJSON *layers = cJSON_AddArrayToObject(root, "layer");
  GArray *lerr = g_array_new(FALSE, FALSE, sizeof(double));
  for (guint i = 0; i < m->layers->len; i++) {
    const CalibLayer *l = &g_array_index(m->layers, CalibLayer, i);
    ModelLayerCost c;
    calib_layer_predict(p, l->hidden, l->heads, l->seq, l->micro_batch, l->tp, l->fused, &c);
    double fwd = (c.fwd.seg_s[0] + c.fwd.seg_s[1] + c.fwd.seg_s[2]) * 1e6;
    double bwd = (c.bwd.seg_s[0] + c.bwd.seg_s[1] + c.bwd.seg_s[2]) * 1e6;
    add_pass(layers, l, "forward", l->fwd.median_us, fwd);
    add_pass(layers, l, "backward", l->bwd.median_us, bwd);
    if (l->has_recompute)
      add_pass(layers, l, "recompute", l->recompute.median_us, fwd);
  }
  const cJSON *row;
  cJSON_ArrayForEach(row, layers) {
    double e = cJSON_GetObjectItemCaseSensitive(row, "error")->valuedouble;
    g_array_append_val(lerr, e);
  }
  double med, p90, worst;
  abs_stats((double *)lerr->data, lerr->len, &med, &p90, &worst);
  cJSON *ls = cJSON_AddObjectToObject(root, "layer_summary");
  cJSON_AddNumberToObject(ls, "rows", lerr->len);
  cJSON_AddNumberToObject(ls, "median_abs_error", med);
  cJSON_AddNumberToObject(ls, "max_abs_error", worst);
  g_array_free(lerr, TRUE);

  /* GEMMs of one dtype, all together and by group (the layers' shapes, and
   * each quantization grid). */
  const char *groups[] = {"all", "layer", "grid.square", "grid.wave", "grid.k", "layout"};
  cJSON *gs = cJSON_AddArrayToObject(root, "gemm");
  for (guint gi = 0; gi < G_N_ELEMENTS(groups); gi++) {
    GArray *e = g_array_new(FALSE, FALSE, sizeof(double));
    const CalibGemm *worst_g = NULL;
    double worst_e = -1;
    for (guint i = 0; i < m->gemm->len; i++) {
      const CalibGemm *g = &g_array_index(m->gemm, CalibGemm, i);
      if (strcmp(g->dtype, dtype) != 0 || (gi > 0 && strcmp(gemm_group(g->op), groups[gi]) != 0))
        continue;
      ModelGemm mg = {g->batch, g->m, g->n, g->k};
      double err = model_gemm_time_s(p, &mg) * 1e6 / g->t.median_us - 1;
      g_array_append_val(e, err);
      if (fabs(err) > worst_e)
        worst_e = fabs(err), worst_g = g;
    }
    if (e->len > 0) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "group", groups[gi]);
      cJSON_AddStringToObject(o, "dtype", dtype);
      cJSON_AddNumberToObject(o, "gemms", e->len);
      abs_stats((double *)e->data, e->len, &med, &p90, &worst);
      cJSON_AddNumberToObject(o, "median_abs_error", med);
      cJSON_AddNumberToObject(o, "p90_abs_error", p90);
      cJSON_AddNumberToObject(o, "max_abs_error", worst);
      char label[128];
      g_snprintf(label, sizeof label,
                 "%s %" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT " %s",
                 worst_g->op, worst_g->batch, worst_g->m, worst_g->n, worst_g->k, worst_g->layout);
      cJSON_AddStringToObject(o, "worst", label);
      cJSON_AddItemToArray(gs, o);
    }
    g_array_free(e, TRUE);
  }
  if (cJSON_GetArraySize(gs) == 0 && m->gemm->len > 0) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_TOO_FEW, "the measurements have no %s gemm records; try --dtype %s",
                dtype, strcmp(dtype, "fp16") == 0 ? "bf16" : "fp16");
    cJSON_Delete(root);
    return NULL;
  }
  return root;
}
