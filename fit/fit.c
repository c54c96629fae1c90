/* ptdsim — fitting a whole device profile to calibration measurements
 * (see fit.h for the models and the method). */
#include "fit.h"

#include <math.h>
#include <string.h>

#include "../models/compute.h"
#include "../models/layer.h"
#include "../base/ranges.h"
#include "nls.h"

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

static cJSON *fit_summary(cJSON *fit, const char *key, const char *model, const CalibNls *r, size_t n) {
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

static double ssr(const CalibNls *r, size_t n) {
  return r->rms * r->rms * (double)n;
}

/* One (op, ranks) group: one range, or two if a split at some size halves the
 * squared residuals (each side keeps at least 3 points and a positive alpha). */
static gboolean fit_collective(CalibCollOp op, guint ranks, CollPoint *pts, size_t n, guint max_iter, cJSON *profile_list,
                               cJSON *fit_list, cJSON *skipped, GError **error) {
  qsort(pts, n, sizeof *pts, cmp_point);
  double *bus = g_new(double, n), *t = g_new(double, n);
  for (size_t i = 0; i < n; i++)
    bus[i] = pts[i].bus, t[i] = pts[i].t;
  char what[64];
  g_snprintf(what, sizeof what, "%s on %u ranks", calib_coll_name(op), ranks);
  CalibNls one, lo, hi, best_lo = {0}, best_hi = {0};
  gboolean ok = calib_fit_line(what, bus, t, n, max_iter, &one, error);
  size_t split = 0;
  double best = ok ? ssr(&one, n) * 0.5 : 0;
  for (size_t j = 3; ok && j + 3 <= n; j++) {
    if (!calib_fit_line(what, bus, t, j, max_iter, &lo, NULL) ||
        !calib_fit_line(what, bus + j, t + j, n - j, max_iter, &hi, NULL))
      continue;
    double s = ssr(&lo, j) + ssr(&hi, n - j);
    if (s < best && lo.x[0] >= 0 && hi.x[0] >= 0 && lo.x[1] > 0 && hi.x[1] > 0) {
      best = s;
      split = j;
      best_lo = lo;
      best_hi = hi;
    }
  }
  CalibNls ranges[2];
  guint nr = split ? 2 : 1;
  if (split)
    ranges[0] = best_lo, ranges[1] = best_hi;
  else
    ranges[0] = one;
  /* times that do not grow measurably with the size (all latency-bound)
   * leave the bandwidth undetermined, as for the memory-bound classes:
   * such a group is not fitted (the analytic model prices it) */
  for (guint r = 0; ok && r < nr; r++)
    if (!(ranges[r].se[1] < 0.5 * fabs(ranges[r].x[1]))) {
      char note[160];
      g_snprintf(note, sizeof note,
                 "%s: %zu points up to %.0f bytes whose times do not grow measurably with size: bus bandwidth not "
                 "determined, not fitted",
                 what, n, pts[n - 1].bytes);
      cJSON_AddItemToArray(skipped, cJSON_CreateString(note));
      g_free(bus);
      g_free(t);
      return TRUE;
    }
  if (ok && one.x[1] <= 0) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_NO_CONVERGENCE,
                "the %s fit gave a bus bandwidth of %.3g GB/s, which is not physical; check the measurements", what,
                one.x[1]);
    ok = FALSE;
  }
  if (ok) {
    size_t lo_i[2] = {0, split}, hi_i[2] = {split ? split - 1 : n - 1, n - 1};
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
      ok = fit_collective((CalibCollOp)op, r, (CollPoint *)pts->data, pts->len, max_iter, plist, flist, skipped,
                          error);
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

/* --- memory-bound kernels by class --- */

typedef struct {
  double bytes, t_us;
} MemPoint;

typedef struct {
  const MemPoint *pt;
  double l2_bytes;
} MemData;

/* x = (gap_us, hbm_GBps, l2_GBps): the step at the L2's size. */
static void mem_residuals(const double *x, const void *data, double *r, size_t n) {
  const MemData *d = data;
  for (size_t i = 0; i < n; i++) {
    double bw = d->pt[i].bytes <= d->l2_bytes ? x[2] : x[1];
    r[i] = (x[0] + d->pt[i].bytes / (bw * 1e3) - d->pt[i].t_us) / d->pt[i].t_us;
  }
}

/* x = (hbm_GBps, l2_GBps) with the gap fixed at zero (where a free gap
 * comes out negative). */
static void mem_residuals_nogap(const double *x, const void *data, double *r, size_t n) {
  double y[3] = {0, x[0], x[1]};
  mem_residuals(y, data, r, n);
}

/* x = (bandwidth_GBps): points on one side of the L2's size, no gap. */
typedef struct {
  const double *size, *t;
} LineData;

static void line_residuals_nogap(const double *x, const void *data, double *r, size_t n) {
  const LineData *d = data;
  for (size_t i = 0; i < n; i++)
    r[i] = (d->size[i] / (x[0] * 1e3) - d->t[i]) / d->t[i];
}

typedef struct {
  gboolean fitted, from_base;
  guint points, points_l2;
  double gap_us, hbm_GBps, l2_GBps;
  double se[3];
  double rms, max_abs;
  char note[256];
} MemClassFit;

/* The fit record of each fitted memory-bound class of `mc` into `parent`. */
static void mem_fit_record(cJSON *parent, const MemClassFit *mc) {
  for (int c = 0; c < MODEL_MEM_N; c++) {
    if (!mc[c].fitted)
      continue;
    cJSON *o = cJSON_AddObjectToObject(parent, model_mem_class_name((ModelMemClass)c));
    cJSON_AddStringToObject(o, "model", "t = gap + bytes / (l2_GBps if bytes <= l2_MiB else hbm_GBps)");
    cJSON_AddNumberToObject(o, "points", mc[c].points);
    cJSON_AddNumberToObject(o, "points_in_l2", mc[c].points_l2);
    cJSON_AddNumberToObject(o, "rms_relative_residual", mc[c].rms);
    cJSON_AddNumberToObject(o, "max_relative_residual", mc[c].max_abs);
    cJSON *pm = cJSON_AddObjectToObject(o, "parameters");
    param(pm, "gap_us", mc[c].gap_us, mc[c].se[0]);
    param(pm, "hbm_GBps", mc[c].hbm_GBps, mc[c].se[1]);
    param(pm, "l2_GBps", mc[c].l2_GBps, mc[c].se[2]);
    cJSON_AddStringToObject(o, "note", mc[c].note);
  }
}

/* The measured points of class c: copies (bytes moved), the membound
 * kernels (today's: 16-byte vectorized, one pass, as Megatron-Core and
 * Transformer Engine write them) and, only where the files have none of
 * those in the class, the 2021 fused kernels of that class.  The two
 * generations run the same class at different rates on one GPU (on an H100
 * the 2021 layernorm moves 0.9-1.3 TB/s, today's 1.4-2.9 TB/s): one curve
 * through both fits neither, and a profile fitted from today's kernels
 * prices the layers that run them.  With `kernels_2021`: the 2021 kernels
 * of a class that today's kernels measure too, fitted apart into
 * membound_2021 for the 2021 layer (none otherwise). */
static GArray *mem_points(const CalibMeasurements *m, ModelMemClass c, gboolean kernels_2021) {
  GArray *a = g_array_new(FALSE, FALSE, sizeof(MemPoint));
  if (c == MODEL_MEM_COPY && !kernels_2021)
    for (guint i = 0; i < m->membw->len; i++) {
      const CalibMembw *b = &g_array_index(m->membw, CalibMembw, i);
      MemPoint p = {b->bytes, b->t.median_us};
      g_array_append_val(a, p);
    }
  gboolean today = FALSE;
  for (guint i = 0; i < m->membound->len; i++) {
    const CalibMembound *b = &g_array_index(m->membound, CalibMembound, i);
    if (calib_membound_op(b->op)->cls == c) {
      MemPoint p = {b->bytes, b->t.median_us};
      if (!kernels_2021)
        g_array_append_val(a, p);
      today = TRUE;
    }
  }
  /* the 2021 kernels: the class's own points where today's do not measure
   * it; apart (kernels_2021), for membound_2021, where they do */
  for (guint i = 0; i < m->kernels->len && today == kernels_2021; i++) {
    const CalibKernel *k = &g_array_index(m->kernels, CalibKernel, i);
    if (calib_kernel_class(k->name, k->fused, k->kernels) == c) {
      MemPoint p = {k->bytes, k->t.median_us};
      g_array_append_val(a, p);
    }
  }
  return a;
}

/* The gap of t = gap + bytes / bw for a given bw, least squares on the
 * relative residuals: the weighted mean of t - bytes / bw with weights
 * 1 / t^2 (closed form), at least 0. */
static void fit_gap(const double *sz, const double *t, guint k, double bw_GBps, CalibNls *r) {
  double num = 0, den = 0;
  for (guint i = 0; i < k; i++)
    num += (t[i] - sz[i] / (bw_GBps * 1e3)) / (t[i] * t[i]), den += 1 / (t[i] * t[i]);
  double gap = fmax(0, num / den), sq = 0;
  r->max_abs = 0;
  for (guint i = 0; i < k; i++) {
    double e = (gap + sz[i] / (bw_GBps * 1e3) - t[i]) / t[i];
    sq += e * e;
    r->max_abs = fmax(r->max_abs, fabs(e));
  }
  r->x[0] = gap;
  r->se[0] = k > 1 ? sqrt(sq / (k - 1) / den) : 0;
  r->x[1] = bw_GBps;
  r->se[1] = 0;
  r->rms = sqrt(sq / k);
}

/* Class c's points (on one side of the L2's size, `in_l2`) do not determine
 * its bandwidth: the bandwidth of that side from the base profile's class,
 * else from the copies (another class), else, for the copies themselves,
 * the device's theoretical HBM bandwidth; the gap fitted with it.  Nothing
 * fitted (a note says why) where none of those is known.  Returns whether
 * the class was fitted. */
static gboolean undetermined_bw(const CalibMeasurements *m, ModelMemClass c, double l2_bytes, gboolean in_l2,
                                const MemClassFit *copy, const ModelProfile *base, const double *sz, const double *t,
                                guint k, CalibNls *r, MemClassFit *out) {
  gboolean l2_side = l2_bytes > 0 && in_l2;
  double bw = 0, hbm = 0, l2bw = 0;
  const char *src = NULL;
  if (base && base->has_membound) {
    hbm = base->mem_hbm_bytes_per_s[c] / 1e9, l2bw = base->mem_l2_bytes_per_s[c] / 1e9;
    src = "the base profile's class";
  } else if (copy && copy->fitted && c != MODEL_MEM_COPY) {
    hbm = copy->hbm_GBps, l2bw = copy->l2_GBps;
    src = "the copies";
  } else if (c == MODEL_MEM_COPY && m->device.hbm_GBps > 0) {
    hbm = l2bw = m->device.hbm_GBps;
    src = "the device's theoretical HBM bandwidth for both sides (assumption)";
  }
  bw = l2_side ? l2bw : hbm;
  double span = 0;
  for (guint i = 0; i < k; i++)
    span = fmax(span, sz[i]);
  if (!(bw > 0 && hbm > 0 && l2bw > 0)) {
    g_snprintf(out->note, sizeof out->note,
               "%u points up to %.0f bytes whose times do not grow measurably with size: bandwidth not determined, "
               "not fitted",
               k, span);
    return FALSE;
  }
  fit_gap(sz, t, k, bw, r);
  out->gap_us = r->x[0];
  out->hbm_GBps = l2_bytes > 0 ? hbm : bw;
  out->l2_GBps = l2_bytes > 0 ? l2bw : bw;
  out->se[0] = r->se[0];
  out->fitted = TRUE;
  out->rms = r->rms;
  out->max_abs = r->max_abs;
  out->gap_us = round_sig(out->gap_us, 6);
  out->hbm_GBps = round_sig(out->hbm_GBps, 6);
  out->l2_GBps = round_sig(out->l2_GBps, 6);
  g_snprintf(out->note, sizeof out->note,
             "gap fitted on %u points up to %.0f bytes whose times do not grow measurably with size (launch-bound): "
             "bandwidths from %s",
             k, span, src);
  return TRUE;
}

/* Fits class c: both bandwidths where the points reach both sides of the
 * L2's size, one where they reach one side (the other then from the base
 * profile's class, else at the copies' ratio of the two), nothing with
 * fewer than three points. */
static gboolean fit_mem_class(const CalibMeasurements *m, ModelMemClass c, gboolean kernels_2021, double l2_bytes,
                              const MemClassFit *copy, const ModelProfile *base, guint max_iter, MemClassFit *out,
                              GError **error) {
  memset(out, 0, sizeof *out);
  GArray *pts = mem_points(m, c, kernels_2021);
  const MemPoint *p = (const MemPoint *)pts->data;
  guint n = pts->len, nl2 = 0;
  for (guint i = 0; i < n; i++)
    nl2 += l2_bytes > 0 && p[i].bytes <= l2_bytes;
  out->points = n;
  out->points_l2 = nl2;
  char what[64];
  g_snprintf(what, sizeof what, "%s kernels (memory-bound)", model_mem_class_name(c));
  gboolean ok = TRUE;
  if (n < 3) {
    g_snprintf(out->note, sizeof out->note, "%u measured point%s: not fitted", n, n == 1 ? "" : "s");
    g_array_free(pts, TRUE);
    return TRUE;
  }
  MemData d = {p, l2_bytes};
  CalibNls r;
  guint nh = n - nl2;
  if (nl2 >= 2 && nh >= 2 && n >= 4) {
    /* Start from a line through each side. */
    double x0[3] = {0.5 * p[0].t_us, 1, 1};
    for (guint i = 0; i < n; i++) {
      double bw = p[i].bytes / (p[i].t_us * 1e3);
      if (p[i].bytes <= l2_bytes)
        x0[2] = fmax(x0[2], bw);
      else
        x0[1] = fmax(x0[1], bw);
      x0[0] = fmin(x0[0], 0.5 * p[i].t_us);
    }
    ok = calib_nls(what, mem_residuals, &d, n, 3, x0, max_iter, &r, error);
    if (ok && r.x[0] < 0) {
      double y0[2] = {x0[1], x0[2]};
      CalibNls r2;
      ok = calib_nls(what, mem_residuals_nogap, &d, n, 2, y0, max_iter, &r2, error);
      r = r2;
      r.x[2] = r2.x[1], r.x[1] = r2.x[0], r.x[0] = 0;
      r.se[2] = r2.se[1], r.se[1] = r2.se[0], r.se[0] = 0;
    }
    if (ok) {
      out->gap_us = r.x[0], out->hbm_GBps = r.x[1], out->l2_GBps = r.x[2];
      memcpy(out->se, r.se, sizeof out->se);
      g_snprintf(out->note, sizeof out->note, "fitted: %u points in L2 (<= %.0f MiB), %u beyond", nl2,
                 l2_bytes / 1048576.0, nh);
    }
  } else {
    gboolean in_l2 = nl2 >= nh; /* the side with the points */
    guint k = 0;
    double *sz = g_new(double, n), *t = g_new(double, n);
    for (guint i = 0; i < n; i++)
      if ((l2_bytes > 0 && p[i].bytes <= l2_bytes) == in_l2 || l2_bytes <= 0)
        sz[k] = p[i].bytes, t[k++] = p[i].t_us;
    ok = k >= 3 && calib_fit_line(what, sz, t, k, max_iter, &r, error);
    if (ok && r.x[0] < 0) { /* a negative gap is not physical: the bandwidth again with none */
      LineData ld = {sz, t};
      double x0[1] = {r.x[1]};
      CalibNls r1;
      ok = calib_nls(what, line_residuals_nogap, &ld, k, 1, x0, max_iter, &r1, error);
      r.x[0] = 0, r.se[0] = 0, r.x[1] = r1.x[0], r.se[1] = r1.se[0], r.rms = r1.rms, r.max_abs = r1.max_abs;
    }
    /* Points whose times do not grow measurably with their size (all of
     * them launch-bound, the bytes' share of each time below the noise)
     * leave the bandwidth undetermined: its least-squares value is the
     * noise's slope, anything from near zero to 1e8 GB/s.  A bandwidth
     * whose standard error is half of it or more is not taken; the class's
     * gap is fitted with the bandwidth from elsewhere (undetermined_bw). */
    if (ok && k >= 3 && !(isfinite(r.x[1]) && r.x[1] > 0 && r.se[1] < 0.5 * r.x[1])) {
      (void)undetermined_bw(m, c, l2_bytes, in_l2, copy, base, sz, t, k, &r, out);
      g_free(sz);
      g_free(t);
      g_array_free(pts, TRUE);
      return TRUE;
    }
    g_free(sz);
    g_free(t);
    if (k < 3) {
      g_snprintf(out->note, sizeof out->note, "%u measured points, too few on either side of the L2's size: not fitted",
                 n);
      g_array_free(pts, TRUE);
      return TRUE;
    }
    if (ok) {
      double bw = r.x[1], other;
      const char *src;
      if (l2_bytes <= 0) {
        other = bw, src = "the L2's size is not known: one bandwidth for all sizes";
      } else if (base && base->has_membound) {
        other = in_l2 ? base->mem_hbm_bytes_per_s[c] / 1e9 : base->mem_l2_bytes_per_s[c] / 1e9;
        src = "the other side of the L2's size from the base profile";
      } else if (copy && copy->fitted && c != MODEL_MEM_COPY) {
        other = in_l2 ? bw * copy->hbm_GBps / copy->l2_GBps : bw * copy->l2_GBps / copy->hbm_GBps;
        src = "the other side of the L2's size at the copies' ratio of the two (assumption)";
      } else {
        other = bw, src = "the other side of the L2's size not measured: the same bandwidth (assumption)";
      }
      out->gap_us = r.x[0];
      out->hbm_GBps = in_l2 ? other : bw;
      out->l2_GBps = in_l2 ? bw : other;
      out->se[0] = r.se[0];
      out->se[in_l2 ? 2 : 1] = r.se[1];
      g_snprintf(out->note, sizeof out->note, "fitted on %u points %s; %s", k,
                 l2_bytes <= 0 ? "" : (in_l2 ? "inside the L2" : "beyond the L2"), src);
    }
  }
  if (ok && !(out->hbm_GBps > 0 && out->l2_GBps > 0 && out->hbm_GBps < 1e6 && out->l2_GBps < 1e6)) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_NO_CONVERGENCE,
                "the %s fit gave bandwidths of %.3g GB/s (HBM) and %.3g GB/s (L2), which are not physical; check "
                "those measurements",
                what, out->hbm_GBps, out->l2_GBps);
    ok = FALSE;
  }
  if (ok) {
    out->fitted = TRUE;
    out->rms = r.rms;
    out->max_abs = r.max_abs;
    out->gap_us = round_sig(out->gap_us, 6);
    out->hbm_GBps = round_sig(out->hbm_GBps, 6);
    out->l2_GBps = round_sig(out->l2_GBps, 6);
  }
  g_array_free(pts, TRUE);
  return ok;
}

/* --- GEMMs --- */

typedef struct {
  const ModelGemm *g;
  const double *mem, *t; /* memory-bound us; measured us */
  guint n;
  double launch_us;
  gboolean fp8;
  ModelProfile *prof; /* the device, the tiles under test, k_half 0 and e_max 1 */
} GemmData;

static void set_tile_bw(GemmData *d, double bytes_per_s) {
  if (d->fp8)
    d->prof->gemm_fp8.tile_bytes_per_s = bytes_per_s;
  else
    d->prof->gemm.tile_bytes_per_s = bytes_per_s;
}

/* x = (e_max, k_half, tile bandwidth in TB/s): the best tile depends on the
 * tile bandwidth (models/compute.h), so it is chosen again for every x. */
static void gemm_residuals(const double *x, const void *data, double *r, size_t n) {
  GemmData *d = (GemmData *)data;
  set_tile_bw(d, x[2] * 1e12);
  for (size_t i = 0; i < n; i++) {
    double k = (double)d->g[i].k;
    double t1 = d->fp8 ? model_gemm_fp8_math_time_s(d->prof, &d->g[i]) : model_gemm_math_time_s(d->prof, &d->g[i], 1.0);
    double math = t1 * 1e6 * (k + x[1]) / (k * x[0]);
    r[i] = (d->launch_us + fmax(math, d->mem[i]) - d->t[i]) / d->t[i];
  }
}

static void set_tiles(GemmData *d, const guint *tm, const guint *tn, guint n) {
  if (d->fp8) {
    d->prof->gemm_fp8.n_tiles = n;
    memcpy(d->prof->gemm_fp8.tile_m, tm, n * sizeof *tm);
    memcpy(d->prof->gemm_fp8.tile_n, tn, n * sizeof *tn);
  } else {
    d->prof->gemm.n_tiles = n;
    memcpy(d->prof->gemm.tile_m, tm, n * sizeof *tm);
    memcpy(d->prof->gemm.tile_n, tn, n * sizeof *tn);
  }
}

static gboolean gemm_nls(GemmData *d, const char *what, guint max_iter, CalibNls *r, GError **error) {
  /* Start the tile bandwidth low, where tiles up to 128 x 128 (intensity
   * 64 FLOP/B) are bandwidth-bound: the per-tile roofline is flat in the
   * bandwidth once every chosen tile is compute-bound, so the fit must
   * approach the truth from below to see it. */
  double peak = d->fp8 ? d->prof->peak_fp8_flops : d->prof->peak_flops;
  double x0[3] = {0.8, 64, peak / 1e12 / (d->fp8 ? 128.0 : 64.0)};
  gboolean ok = calib_nls(what, gemm_residuals, d, d->n, 3, x0, max_iter, r, error);
  /* A second start, where tiles of intensity 16 FLOP/B are already
   * compute-bound: the roofline makes the residuals' landscape piecewise,
   * and the better of the two minima is kept. */
  CalibNls r2;
  double x1[3] = {0.8, 64, 4 * x0[2]};
  if (calib_nls(what, gemm_residuals, d, d->n, 3, x1, max_iter, &r2, NULL) && (!ok || r2.rms < r->rms) &&
      r2.x[0] > 0 && r2.x[0] <= 1 && r2.x[1] > 0 && r2.x[2] > 0) {
    if (!ok)
      g_clear_error(error);
    *r = r2;
    ok = TRUE;
  }
  set_tile_bw(d, r->x[2] * 1e12);
  if (ok && !(r->x[0] > 0 && r->x[0] <= 1 && r->x[1] > 0 && r->x[2] > 0)) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_NO_CONVERGENCE,
                "the %s fit gave e_max %.3g, k_half %.3g and tile bandwidth %.3g TB/s, outside (0, 1], > 0 and > 0; "
                "check the gemm measurements (peak %.1f TFLOP/s)",
                what, r->x[0], r->x[1], r->x[2], peak / 1e12);
    ok = FALSE;
  }
  return ok;
}

/* The tiles cuBLAS may choose on a device of compute capability `cc`
 * (NULL: not known): edges of 64, 128 and 256 on Ampere (CUTLASS's and cuBLAS's sm80 tile
 * shapes), and of 64, 128, 192 and 256 with 320 x 128 on Hopper (cuBLASLt's
 * CUBLASLT_MATMUL_TILE_* list for sm90's wgmma kernels). */
static guint tile_candidates(const char *cc, guint *tm, guint *tn) {
  static const guint ampere[] = {64, 128, 256}, hopper[] = {64, 128, 192, 256};
  /* Volta and Ampere the smaller list; Hopper and later, and a device whose
   * compute capability is not known (a synthetic file), the larger */
  gboolean h = !cc || !(g_str_has_prefix(cc, "7.") || g_str_has_prefix(cc, "8."));
  const guint *e = h ? hopper : ampere;
  guint ne = h ? G_N_ELEMENTS(hopper) : G_N_ELEMENTS(ampere), n = 0;
  for (guint i = 0; i < ne; i++)
    for (guint j = 0; j < ne; j++)
      tm[n] = e[i], tn[n++] = e[j];
  if (h) {
    tm[n] = 320, tn[n++] = 128;
    tm[n] = 128, tn[n++] = 320;
  }
  return n;
}

#define MAX_TILE_CANDIDATES 20

/* The GEMM model of one set of records: tiles as recorded by cuBLASLt,
 * else those of `tiles_from`, else chosen from the device's candidates by
 * forward selection (add the tile that lowers the squared residuals most,
 * while that gains at least 2%, up to 8 tiles). */
static gboolean fit_gemm_set(GemmData *d, const CalibMeasurements *m, const GArray *idx, const GArray *also,
                             const ModelProfile *tiles_from, const char *what, guint max_iter, CalibNls *r,
                             char *how, gsize howlen, GError **error) {
  guint tm[MODEL_PROFILE_MAX_TILES], tn[MODEL_PROFILE_MAX_TILES], nt = 0;
  /* the tiles recorded for these records and for `also` (the same model's
   * other records, such as FP8's gradient GEMMs) */
  for (guint j = 0; j < idx->len + (also ? also->len : 0); j++) {
    guint at = j < idx->len ? g_array_index(idx, guint, j) : g_array_index(also, guint, j - idx->len);
    const CalibGemm *g = &g_array_index(m->gemm, CalibGemm, at);
    gboolean seen = g->tile_m == 0;
    for (guint i = 0; i < nt && !seen; i++)
      seen = tm[i] == g->tile_m && tn[i] == g->tile_n;
    if (!seen && nt < MODEL_PROFILE_MAX_TILES)
      tm[nt] = g->tile_m, tn[nt++] = g->tile_n;
  }
  guint recorded = nt;
  if (tiles_from && recorded == 0) {
    set_tiles(d, tiles_from->gemm.tile_m, tiles_from->gemm.tile_n, tiles_from->gemm.n_tiles);
    g_snprintf(how, howlen, "the tiles of profile %s (--tiles-from)", tiles_from->name ? tiles_from->name : "?");
    return gemm_nls(d, what, max_iter, r, error);
  }
  /* Forward selection, from the recorded tiles (records without one, such
   * as cublasGemmEx's, may use others). */
  guint cm[MAX_TILE_CANDIDATES], cn[MAX_TILE_CANDIDATES], nc = tile_candidates(m->device.compute_capability, cm, cn);
  gboolean used[MAX_TILE_CANDIDATES] = {FALSE};
  double best_ssr = INFINITY;
  CalibNls best_r;
  memset(&best_r, 0, sizeof best_r);
  if (recorded > 0) {
    set_tiles(d, tm, tn, nt);
    if (!gemm_nls(d, what, max_iter, &best_r, error))
      return FALSE;
    best_ssr = best_r.rms * best_r.rms;
    for (guint c = 0; c < nc; c++)
      for (guint i = 0; i < nt; i++)
        used[c] |= cm[c] == tm[i] && cn[c] == tn[i];
  }
  while (nt < MIN(recorded + 8, (guint)MODEL_PROFILE_MAX_TILES)) {
    int pick = -1;
    double pick_ssr = INFINITY;
    CalibNls pick_r;
    memset(&pick_r, 0, sizeof pick_r);
    for (guint c = 0; c < nc; c++) {
      if (used[c])
        continue;
      tm[nt] = cm[c], tn[nt] = cn[c];
      set_tiles(d, tm, tn, nt + 1);
      CalibNls t;
      if (!gemm_nls(d, what, max_iter, &t, NULL))
        continue;
      double ss = t.rms * t.rms;
      if (ss < pick_ssr)
        pick_ssr = ss, pick = (int)c, pick_r = t;
    }
    if (pick < 0 || !(pick_ssr < best_ssr * 0.98))
      break;
    used[pick] = TRUE;
    tm[nt] = cm[pick], tn[nt++] = cn[pick];
    best_ssr = pick_ssr;
    best_r = pick_r;
  }
  if (nt == 0) /* no candidate converged: report why with the first */
    return set_tiles(d, cm, cn, 1), gemm_nls(d, what, max_iter, r, error);
  set_tiles(d, tm, tn, nt);
  *r = best_r;
  if (recorded > 0)
    g_snprintf(how, howlen, "the %u tiles cuBLASLt reported choosing for these GEMMs%s%u chosen by forward selection",
               recorded, nt > recorded ? " and " : ", with ", nt - recorded);
  else
    g_snprintf(how, howlen, "%u tiles chosen by forward selection from compute capability %s's candidates", nt,
               m->device.compute_capability ? m->device.compute_capability : "?");
  set_tile_bw(d, r->x[2] * 1e12); /* the model's tile bandwidth at the selected parameters */
  return TRUE;
}

/* The records of one GEMM class: `dtype`, and for fp8 the forward
 * (fast-accumulation, layout TN) or the gradient ones. */
static GArray *gemm_records(const CalibMeasurements *m, const char *dtype, int fp8_grad) {
  GArray *idx = g_array_new(FALSE, FALSE, sizeof(guint));
  for (guint i = 0; i < m->gemm->len; i++) {
    const CalibGemm *g = &g_array_index(m->gemm, CalibGemm, i);
    if (strcmp(g->dtype, dtype) != 0)
      continue;
    if (fp8_grad >= 0 && (strcmp(g->layout, "TN") != 0) != fp8_grad)
      continue;
    g_array_append_val(idx, i);
  }
  return idx;
}

static void gemm_data(GemmData *d, const CalibMeasurements *m, const GArray *idx, double bw_GBps) {
  guint n = idx->len;
  ModelGemm *gg = g_new(ModelGemm, MAX(n, 1));
  double *mt = g_new(double, MAX(n, 1)), *gt = g_new(double, MAX(n, 1));
  double in = d->fp8 ? 1.0 : 2.0;
  for (guint j = 0; j < n; j++) {
    const CalibGemm *g = &g_array_index(m->gemm, CalibGemm, g_array_index(idx, guint, j));
    gg[j] = (ModelGemm){g->batch, g->m, g->n, g->k};
    mt[j] = model_gemm_bytes(&gg[j], in, 2.0) / (bw_GBps * 1e3);
    gt[j] = g->t.median_us;
  }
  d->g = gg, d->mem = mt, d->t = gt, d->n = n;
}

static void gemm_data_free(GemmData *d) {
  g_free((gpointer)d->g);
  g_free((gpointer)d->mem);
  g_free((gpointer)d->t);
}

/* FP8 gradient GEMMs: the share of the fast-accumulation rate they keep
 * (x[0]), priced by the model itself (the tile roofline sees the lower
 * rate). */
static void split_residuals(const double *x, const void *data, double *r, size_t n) {
  const GemmData *d = data;
  d->prof->gemm_fp8_split_accumulation = x[0];
  for (size_t i = 0; i < n; i++)
    r[i] = (model_gemm_fp8_time_s(d->prof, &d->g[i], TRUE) * 1e6 - d->t[i]) / d->t[i];
}

/* --- flash attention --- */

typedef struct {
  const CalibAttention *a; /* the records with this pass */
  guint n;
  gboolean backward;
  ModelProfile *prof;
} AttnData;

/* x = (efficiency, cta_overhead_us) of one pass. */
static void attn_residuals(const double *x, const void *data, double *r, size_t n) {
  const AttnData *d = data;
  ModelFlashPass *f = &d->prof->flash[d->backward];
  f->efficiency = fmin(fmax(x[0], 1e-4), 4.0);
  f->cta_overhead_s = fmax(x[1], 0) * 1e-6;
  for (size_t i = 0; i < n; i++) {
    const CalibAttention *a = &d->a[i];
    double us = model_flash_waves_time_any_s(d->prof, d->backward, a->causal, a->batch * a->heads, a->seq, a->seq,
                                             a->head_dim) *
                1e6;
    double t = d->backward ? a->bwd.median_us : a->fwd.median_us;
    r[i] = (us - t) / t;
  }
}

/* --- the whole profile --- */

/* Replaces or adds o[key]. */
static void put(cJSON *o, const char *key, cJSON *v) {
  if (cJSON_GetObjectItemCaseSensitive(o, key))
    cJSON_ReplaceItemInObjectCaseSensitive(o, key, v);
  else
    cJSON_AddItemToObject(o, key, v);
}

/* One class of a membound or membound_2021 block: parent[class] = {gap_us,
 * hbm_GBps, l2_GBps}, each to six significant digits. */
static void put_mem_class(cJSON *parent, ModelMemClass c, double gap_us, double hbm_GBps, double l2_GBps) {
  cJSON *o = cJSON_AddObjectToObject(parent, model_mem_class_name(c));
  cJSON_AddNumberToObject(o, "gap_us", round_sig(gap_us, 6));
  cJSON_AddNumberToObject(o, "hbm_GBps", round_sig(hbm_GBps, 6));
  cJSON_AddNumberToObject(o, "l2_GBps", round_sig(l2_GBps, 6));
}

static void put_num(cJSON *o, const char *key, double v) {
  put(o, key, cJSON_CreateNumber(v));
}

static void put_str(cJSON *o, const char *key, const char *v) {
  put(o, key, cJSON_CreateString(v));
}

/* "from the base profile NAME" and what the base says of `key`. */
static void prov_from_base(cJSON *prov, const cJSON *base_prov, const char *base_name, const char *key) {
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(base_prov, key);
  char *text = g_strdup_printf("from the base profile %s (not measured in this file)%s%s", base_name,
                               cJSON_IsString(b) ? ": " : "", cJSON_IsString(b) ? b->valuestring : "");
  put_str(prov, key, text);
  g_free(text);
}

static cJSON *tiles_json(guint n, const guint *tm, const guint *tn) {
  cJSON *a = cJSON_CreateArray();
  for (guint i = 0; i < n; i++) {
    int t[2] = {(int)tm[i], (int)tn[i]};
    cJSON_AddItemToArray(a, cJSON_CreateIntArray(t, 2));
  }
  return a;
}

/* A GEMM model's keys: its tiles, k_half, tile bandwidth and ceiling
 * efficiency. */
static cJSON *gemm_json(const ModelGemmParams *g) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddItemToObject(o, "tiles", tiles_json(g->n_tiles, g->tile_m, g->tile_n));
  cJSON_AddNumberToObject(o, "k_half", g->k_half);
  cJSON_AddNumberToObject(o, "tile_bandwidth_GBps", g->tile_bytes_per_s / 1e9);
  cJSON_AddNumberToObject(o, "efficiency_max", g->efficiency_max);
  return o;
}

static void gemm_residual_rows(cJSON *res, const CalibMeasurements *m, const GArray *idx, const ModelProfile *p) {
  for (guint j = 0; j < idx->len; j++) {
    const CalibGemm *g = &g_array_index(m->gemm, CalibGemm, g_array_index(idx, guint, j));
    ModelGemm mg = {g->batch, g->m, g->n, g->k};
    char label[96];
    g_snprintf(label, sizeof label, "%s %s %" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT,
               g->op, g->layout, g->batch, g->m, g->n, g->k);
    double us = strcmp(g->dtype, "fp8") == 0 ? model_gemm_fp8_time_s(p, &mg, strcmp(g->layout, "TN") != 0)
                                             : model_gemm_time_s(p, &mg);
    add_residual(res, label, g->t.median_us, us * 1e6);
  }
}

/* FlashAttention-2's tiles for head size 128 (Dao 2023; flash-attention's
 * flash_fwd_launch_template.h: 128 x 128 forward; flash_bwd_launch_template.h:
 * key blocks of 128 stepping over 64 queries backward), where the base
 * profile has no waves model. */
static const ModelFlashPass default_flash[2] = {{128, 128, 0, 0}, {64, 128, 0, 0}};

/* The base's attention block on a profile of another peak: its shares of
 * peak scaled by base peak / this peak, so that attention runs at the same
 * rate.  FALSE (a one-line error) where a share falls below what a profile
 * holds (the measurements' peak is then far above the base's). */
static gboolean rescale_attention(cJSON *root, double ratio, cJSON *prov, GError **error) {
  if (fabs(ratio - 1) < 1e-12)
    return TRUE;
  cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "attention");
  static const char *flat[] = {"flash_forward_efficiency", "flash_backward_efficiency"};
  cJSON *shares[4] = {NULL};
  for (guint i = 0; i < G_N_ELEMENTS(flat); i++)
    shares[i] = cJSON_GetObjectItemCaseSensitive(a, flat[i]);
  static const char *passes[] = {"forward", "backward"};
  for (guint i = 0; i < G_N_ELEMENTS(passes); i++)
    shares[2 + i] = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a, passes[i]), "efficiency");
  for (guint i = 0; i < G_N_ELEMENTS(shares); i++) {
    if (!cJSON_IsNumber(shares[i]))
      continue;
    double v = round_sig(fmin(1.0, shares[i]->valuedouble * ratio), 6);
    if (v < ptd_range_efficiency.lo) {
      g_set_error(error, CALIB_ERROR, CALIB_ERROR_TOO_FEW,
                  "the measurements' peak is %.3g times the base profile's, which would leave its flash attention "
                  "%.3g of peak, below the %g a profile holds; check device.peak_tflops, or measure attention "
                  "(ptdsim-calibrate --mode attention)",
                  1 / ratio, v, ptd_range_efficiency.lo);
      return FALSE;
    }
    cJSON_SetNumberValue(shares[i], v);
  }
  const cJSON *pa = cJSON_GetObjectItemCaseSensitive(prov, "attention");
  char *text = g_strdup_printf("%s; its shares of peak scaled by %.6g (the base's peak over this profile's), so that "
                               "attention runs at the same rate",
                               cJSON_IsString(pa) ? pa->valuestring : "", ratio);
  put_str(prov, "attention", text);
  g_free(text);
  return TRUE;
}

/* --- the power model (models/profile.h) --- */

/* The board power that does not scale with the SM clock, where neither
 * several caps nor the base profile give it: an idle H100 SXM5 80GB at P0
 * with no process drew 88 W and 83 W (two boards' nvidia-smi in
 * NVIDIA/nccl issue #1264, 2024); their mean, 85.5 W of its 700 W rating,
 * taken as a share of the rated cap. */
#define FIT_IDLE_SHARE_OF_RATED (85.5 / 700.0)
#define FIT_IDLE_SOURCE                                                                                               \
  "an idle H100 SXM5 80GB at P0 with no process drew 88 W and 83 W (nvidia-smi of two boards in NVIDIA/nccl issue " \
  "#1264); their mean, 85.5 W of its 700 W rating, as a share of this device's rated cap"
/* The cube law: dynamic power alpha C V^2 f with V rising about linearly
 * with f in the DVFS range (models/profile.h cites it). */
#define FIT_POWER_EXPONENT 3.0

/* A sustained loop that can place the device on its power curve: the SM
 * clock sampled and the power limit recorded. */
static gboolean sustained_on_curve(const CalibSustained *x) {
  return x->n_clock > 0 && x->power_limit_W > 0;
}

typedef struct {
  guint n;
  const double *f, *P; /* settled clock (MHz) and board power (W) of each loop */
  double fs, rated, idle; /* idle: fixed where it is not fitted */
  gboolean fit_idle;
} PowerData;

/* x[0] the exponent, x[1] the idle power where fitted: P(f) against the
 * settled power, relative. */
static void power_residuals(const double *x, const void *data, double *r, size_t n) {
  const PowerData *d = data;
  double idle = d->fit_idle ? x[1] : d->idle;
  for (size_t i = 0; i < n; i++)
    r[i] = (idle + (d->rated - idle) * pow(d->f[i] / d->fs, x[0]) - d->P[i]) / d->P[i];
}

/* The "power" block from the sustained loops that sampled the SM clock
 * under a recorded power limit: rated_W the highest limit, its loops'
 * settled clock (median of their second halves, the median over them) the
 * sustained clock, the boost clock the device's (else the base's); with
 * loops at two or more limits the exponent is fitted to their settled
 * clocks and powers (GSL), and with three or more the idle power too;
 * otherwise the cube law and the cited idle share.  Writes nothing where
 * no loop qualifies or no boost clock is known.  *record: the fit's record
 * (NULL where nothing was fitted). */
static gboolean fit_power(const CalibMeasurements *m, const ModelProfile *base, const char *base_name,
                          const cJSON *base_prov, guint max_iter, cJSON *root, cJSON *prov, cJSON **record,
                          GError **error) {
  *record = NULL;
  cJSON_DeleteItemFromObjectCaseSensitive(root, "power");
  cJSON_DeleteItemFromObjectCaseSensitive(prov, "power");
  guint n = 0, n_rated = 0, n_caps = 0;
  double rated = 0, caps[CALIB_MAX_SAMPLES];
  for (guint i = 0; i < m->sustained->len; i++) {
    const CalibSustained *x = &g_array_index(m->sustained, CalibSustained, i);
    if (!sustained_on_curve(x))
      continue;
    n++;
    rated = fmax(rated, x->power_limit_W);
    guint c = 0;
    while (c < n_caps && caps[c] != x->power_limit_W)
      c++;
    if (c == n_caps && n_caps < CALIB_MAX_SAMPLES)
      caps[n_caps++] = x->power_limit_W;
  }
  if (n == 0)
    return TRUE;
  double boost = m->device.sm_clock_MHz > 0 ? m->device.sm_clock_MHz : base && base->has_power ? base->power_boost_clock_MHz : 0;
  if (!(boost > 0)) {
    cJSON_AddStringToObject(prov, "power",
                            "not written: the sustained loops sampled the clock, but neither the measurements' device "
                            "(sm_clock_MHz) nor the base profile gives the boost clock");
    return TRUE;
  }
  double *f = g_new(double, n), *P = g_new(double, n), *at_rated = g_new(double, n);
  guint k = 0;
  for (guint i = 0; i < m->sustained->len; i++) {
    const CalibSustained *x = &g_array_index(m->sustained, CalibSustained, i);
    if (!sustained_on_curve(x))
      continue;
    f[k] = calib_sustained_clock_MHz(x);
    P[k] = x->n_power > 0 ? calib_sustained_power_W(x) : x->power_limit_W;
    if (x->power_limit_W == rated)
      at_rated[n_rated++] = f[k];
    k++;
  }
  double fs = round_sig(calib_time_from_samples(at_rated, n_rated).median_us, 6);
  gboolean ok = TRUE;
  if (fs > boost) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                "the sustained loops settled at %.0f MHz, above the boost clock %.0f MHz; check their clock_MHz "
                "samples and the device's sm_clock_MHz",
                fs, boost);
    ok = FALSE;
  }
  double idle = base && base->has_power ? base->power_idle_W : round_sig(rated * FIT_IDLE_SHARE_OF_RATED, 6);
  const char *idle_from = base && base->has_power ? "base" : "cited";
  double exponent = FIT_POWER_EXPONENT;
  CalibNls r = {0};
  PowerData d = {n, f, P, fs, rated, idle, n_caps >= 3};
  if (ok && n_caps >= 2) {
    double x0[2] = {FIT_POWER_EXPONENT, idle};
    ok = calib_nls("power curve", power_residuals, &d, n, d.fit_idle ? 2 : 1, x0, max_iter, &r, error);
    if (ok && !(r.x[0] >= 1 && r.x[0] <= 6 && (!d.fit_idle || (r.x[1] > 0 && r.x[1] < rated)))) {
      g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                  "the power curve's fit gives exponent %g%s, outside exponent 1..6 and idle power 0..%g W; check the "
                  "sustained loops' clock_MHz, power_W and power_limit_W",
                  r.x[0], d.fit_idle ? " and that idle power" : "", rated);
      ok = FALSE;
    }
    if (ok) {
      exponent = round_sig(r.x[0], 6);
      if (d.fit_idle)
        idle = round_sig(r.x[1], 6);
    }
  }
  if (ok && !(idle < rated)) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                "the base profile's idle power %g W is not below the sustained loops' limit %g W; give a base whose "
                "power block fits this device, or --base none",
                idle, rated);
    ok = FALSE;
  }
  if (ok) {
    cJSON *pw = cJSON_CreateObject();
    cJSON_AddNumberToObject(pw, "rated_W", rated);
    cJSON_AddNumberToObject(pw, "idle_W", idle);
    cJSON_AddNumberToObject(pw, "boost_clock_MHz", boost);
    cJSON_AddNumberToObject(pw, "sustained_clock_MHz", fs);
    cJSON_AddNumberToObject(pw, "exponent", exponent);
    put(root, "power", pw);
    GString *why = g_string_new(NULL);
    g_string_append_printf(why,
                           "P(f) = idle_W + (rated_W - idle_W) (f / sustained_clock_MHz)^exponent (models/profile.h). "
                           "rated_W: the power limit of the sustained loop%s; sustained_clock_MHz: the median SM clock "
                           "of %s second half%s; boost_clock_MHz: %s; ",
                           n_rated > 1 ? "s at the highest limit" : "",
                           n_rated > 1 ? "their" : "its", n_rated > 1 ? "s (the median over them)" : "",
                           m->device.sm_clock_MHz > 0 ? "the measured device's maximum SM clock"
                                                      : "from the base profile");
    if (n_caps >= 3)
      g_string_append_printf(why, "exponent and idle_W: fitted (GSL least squares) to the settled clock and power of "
                                  "%u loops at %u power limits",
                             n, n_caps);
    else {
      if (n_caps == 2)
        g_string_append_printf(why, "exponent: fitted (GSL least squares) to the settled clock and power of %u loops "
                                    "at 2 power limits; ",
                               n);
      else
        g_string_append_printf(why, "exponent: 3, the cube law (dynamic power alpha C V^2 f, V rising with f; one "
                                    "power limit measured); ");
      if (strcmp(idle_from, "base") == 0) {
        const cJSON *bp = cJSON_GetObjectItemCaseSensitive(base_prov, "power");
        g_string_append_printf(why, "idle_W: from the base profile %s%s%s", base_name, cJSON_IsString(bp) ? " (" : "",
                               cJSON_IsString(bp) ? bp->valuestring : "");
        if (cJSON_IsString(bp))
          g_string_append_c(why, ')');
      } else
        g_string_append_printf(why, "idle_W: %s", FIT_IDLE_SOURCE);
    }
    cJSON_AddStringToObject(prov, "power", why->str);
    g_string_free(why, TRUE);
    if (n_caps >= 2) {
      *record = cJSON_CreateObject();
      cJSON_AddStringToObject(*record, "model", "P(f) = idle + (rated - idle) (f / f_sustained)^exponent against "
                                                "the loops' settled power (models/profile.h)");
      cJSON_AddNumberToObject(*record, "points", n);
      cJSON_AddNumberToObject(*record, "iterations", r.iterations);
      cJSON_AddNumberToObject(*record, "rms_relative_residual", r.rms);
      cJSON_AddNumberToObject(*record, "max_relative_residual", r.max_abs);
      cJSON *pp = cJSON_AddObjectToObject(*record, "parameters");
      param(pp, "exponent", r.x[0], r.se[0]);
      if (d.fit_idle)
        param(pp, "idle_W", r.x[1], r.se[1]);
    }
  }
  g_free(f);
  g_free(P);
  g_free(at_rated);
  return ok;
}

/* --- compute beside a collective (the overlap mode) --- */

/* Least squares through the origin, y = b x: b, its standard error and
 * the residuals' rms (n >= 1; the error is 0 for one point). */
static void origin_fit(const double *x, const double *y, guint n, double *b, double *se, double *rms) {
  double sxx = 0, sxy = 0, ssr_ = 0;
  for (guint i = 0; i < n; i++)
    sxx += x[i] * x[i], sxy += x[i] * y[i];
  *b = sxy / sxx;
  for (guint i = 0; i < n; i++)
    ssr_ += (y[i] - *b * x[i]) * (y[i] - *b * x[i]);
  *se = n > 1 ? sqrt(ssr_ / (n - 1) / sxx) : 0;
  *rms = sqrt(ssr_ / n);
}

/* The "overlap" block from the overlap mode's holder runs ("copy" records)
 * on the profile `p` being fitted (its SMs, HBM bandwidth and efficiency),
 * its record in *record; the all-reduce runs add to the record only.
 *
 * sms_per_channel, k: the SMs one holder block takes from the GEMM.  The
 * model deals a GEMM's tiles in waves over the SMs left, sms - held
 * (models/compute.c); over a GEMM of many waves (the mode's has 14 on an
 * H100) that is a rate in proportion to the SMs it has, so beside N blocks
 * the share of its rate lost, y = 1 - t_alone / t_beside, is k N / sms:
 * least squares through the origin over the runs.  (The wave count's steps
 * are left out of the fit: fitted against them, every k inside one step
 * would fit as well, and the measured GEMM's steps are cuBLASLt's, not the
 * model's tiles'.)
 *
 * hbm_bytes_per_byte, c: the model prices memory-bound work beside a
 * collective at the HBM bandwidth left, 1 - hbm_held, with hbm_held = c x
 * the collective's rate / (hbm_GBps x memory_efficiency) (plan/plan.c): the
 * probe copy's lost rate share 1 - t_alone / t_beside against x = the
 * holder's rate alone / (hbm_GBps x memory_efficiency), least squares
 * through the origin.  The probe also loses the holder's SMs, which a
 * streaming copy hardly needs: c takes all of its slowdown.
 *
 * The other direction (the holder's and the all-reduce's rate beside the
 * GEMM and beside the probe, over their rate alone) is recorded, measured,
 * in the fit record only: the simulation runs a collective at its own rate
 * beside compute, and a figure nothing uses is not a profile key. */
static gboolean fit_overlap(const CalibMeasurements *m, const ModelProfile *p, cJSON *root, cJSON *prov,
                            cJSON **record, GError **error) {
  *record = NULL;
  if (m->overlap->len == 0)
    return TRUE;
  guint n = 0, min_blocks = G_MAXUINT, max_blocks = 0;
  double *xk = g_new(double, m->overlap->len), *yk = g_new(double, m->overlap->len);
  double *xc = g_new(double, m->overlap->len), *yc = g_new(double, m->overlap->len);
  double stream = p->hbm_bytes_per_s * p->memory_efficiency / 1e9; /* GB/s */
  const CalibOverlap *first = NULL;
  cJSON *rec = cJSON_CreateObject(), *rows = cJSON_CreateArray(), *slow = cJSON_CreateArray();
  for (guint i = 0; i < m->overlap->len; i++) {
    const CalibOverlap *x = &g_array_index(m->overlap, CalibOverlap, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "with", x->with);
    cJSON_AddNumberToObject(o, strcmp(x->with, "copy") == 0 ? "blocks" : "ranks",
                            strcmp(x->with, "copy") == 0 ? x->blocks : x->ranks);
    cJSON_AddNumberToObject(o, "gemm", x->gemm_beside_us / x->gemm_us);
    cJSON_AddNumberToObject(o, "beside_gemm", x->moved_GBps / x->moved_beside_GBps);
    if (strcmp(x->with, "copy") == 0)
      cJSON_AddNumberToObject(o, "beside_probe", x->moved_GBps / x->moved_beside_mem_GBps);
    cJSON_AddItemToArray(slow, o);
    if (strcmp(x->with, "copy") != 0)
      continue;
    first = first ? first : x;
    min_blocks = MIN(min_blocks, x->blocks);
    max_blocks = MAX(max_blocks, x->blocks);
    xk[n] = (double)x->blocks / p->sms;
    yk[n] = 1 - x->gemm_us / x->gemm_beside_us;
    xc[n] = x->moved_GBps / stream;
    yc[n] = 1 - x->mem_us / x->mem_beside_us;
    n++;
  }
  double k = 0, c = 0, se_k = 0, se_c = 0, rms_k = 0, rms_c = 0;
  if (n > 0) {
    origin_fit(xk, yk, n, &k, &se_k, &rms_k);
    origin_fit(xc, yc, n, &c, &se_c, &rms_c);
    k = round_sig(k, 6), c = round_sig(c, 6);
  }
  gboolean ok = TRUE;
  if (n > 0 && !(k > 0 && k <= 16 && k * max_blocks < p->sms))
    ok = FALSE, g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                            "the overlap runs give %g SMs taken per holder block (from the GEMM's times beside %u to "
                            "%u blocks), outside (0, 16] or more than the %u SMs at %u blocks; check their gemm_us and "
                            "gemm_beside_us",
                            k, min_blocks, max_blocks, p->sms, max_blocks);
  else if (n > 0 && !(c > 0 && c <= 16))
    ok = FALSE, g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                            "the overlap runs give %g HBM bytes displaced per byte the holder moves (from the probe "
                            "copy's times beside it), outside (0, 16]; check their mem_us, mem_beside_us and moved_GBps",
                            c);
  if (ok && n > 0) {
    cJSON *blk = cJSON_CreateObject();
    cJSON_AddNumberToObject(blk, "sms_per_channel", k);
    cJSON_AddNumberToObject(blk, "hbm_bytes_per_byte", c);
    put(root, "overlap", blk);
    char *why = g_strdup_printf(
        "measured: %u runs of a %s %" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT
        " GEMM beside a holder kernel of %u to %u blocks copying HBM to HBM; sms_per_channel: least squares of the "
        "GEMM's lost rate (1 - t_alone / t_beside) against blocks x k / %u SMs; hbm_bytes_per_byte: of a streaming "
        "copy's lost rate against c x the holder's rate / %.0f GB/s (hbm_GBps x memory_efficiency) (fit record "
        "\"overlap\")",
        n, first->dtype, first->m, first->n, first->k, min_blocks, max_blocks, p->sms, stream);
    cJSON_AddStringToObject(prov, "overlap", why);
    g_free(why);
    cJSON_AddStringToObject(rec, "model", "1 - t_alone / t_beside = k blocks / sms (the GEMM); = c rate / (hbm_GBps "
                                          "memory_efficiency) (the probe copy)");
    cJSON_AddNumberToObject(rec, "points", n);
    cJSON *pp = cJSON_AddObjectToObject(rec, "parameters");
    param(pp, "sms_per_channel", k, se_k);
    param(pp, "hbm_bytes_per_byte", c, se_c);
    cJSON_AddNumberToObject(rec, "rms_residual_gemm", rms_k);
    cJSON_AddNumberToObject(rec, "rms_residual_probe", rms_c);
    for (guint i = 0, j = 0; i < m->overlap->len; i++) {
      const CalibOverlap *x = &g_array_index(m->overlap, CalibOverlap, i);
      if (strcmp(x->with, "copy") != 0)
        continue;
      cJSON *o = cJSON_CreateObject();
      cJSON_AddNumberToObject(o, "blocks", x->blocks);
      cJSON_AddNumberToObject(o, "gemm_lost", yk[j]);
      cJSON_AddNumberToObject(o, "gemm_lost_predicted", k * xk[j]);
      cJSON_AddNumberToObject(o, "probe_lost", yc[j]);
      cJSON_AddNumberToObject(o, "probe_lost_predicted", c * xc[j]);
      cJSON_AddItemToArray(rows, o);
      j++;
    }
  }
  cJSON_AddItemToObject(rec, "residuals", rows);
  cJSON_AddItemToObject(rec, "collective_slowdown", slow);
  cJSON_AddStringToObject(rec, "collective_slowdown_note",
                          "measured, not modelled: each run's time beside the GEMM (gemm) and the holder's or the "
                          "all-reduce's rate alone over its rate beside the GEMM (beside_gemm) and beside the probe "
                          "copy (beside_probe); the simulation runs collectives at their own rate beside compute");
  g_free(xk);
  g_free(yk);
  g_free(xc);
  g_free(yc);
  if (!ok) {
    cJSON_Delete(rec);
    return FALSE;
  }
  *record = rec;
  return TRUE;
}

cJSON *calib_fit(const CalibMeasurements *m, const CalibFitOptions *opt, GError **error) {
  guint max_iter = opt->max_iterations ? opt->max_iterations : 200;
  const ModelProfile *base = opt->base;
  const char *base_name = base && base->name ? base->name : "?";
  const cJSON *base_prov = opt->base_json ? cJSON_GetObjectItemCaseSensitive(opt->base_json, "provenance") : NULL;
  /* The L2's size: as the harness read it off the device, else the base's. */
  double l2 = m->device.l2_MiB > 0 ? m->device.l2_MiB * 1048576.0 : base ? base->l2_bytes : 0;

  /* 1. Memory-bound kernels, copies first (they give the launch gap and the
   * HBM efficiency). */
  MemClassFit mc[MODEL_MEM_N];
  if (!fit_mem_class(m, MODEL_MEM_COPY, FALSE, l2, NULL, base, max_iter, &mc[MODEL_MEM_COPY], error))
    return NULL;
  gboolean copies = mc[MODEL_MEM_COPY].fitted;
  if (!copies && !base) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_TOO_FEW,
                "too few points for the memory bandwidth (membw) fit: %u given, it needs at least 3 copies; run "
                "ptdsim-calibrate --mode membw",
                mc[MODEL_MEM_COPY].points);
    return NULL;
  }
  for (int c = 1; c < MODEL_MEM_N; c++)
    if (!fit_mem_class(m, (ModelMemClass)c, FALSE, l2, &mc[MODEL_MEM_COPY], base, max_iter, &mc[c], error))
      return NULL;
  /* Megatron's 2021 kernels apart, in the classes today's kernels measure
   * too (mem_points_2021). */
  MemClassFit mc21[MODEL_MEM_N];
  memset(&mc21[MODEL_MEM_COPY], 0, sizeof mc21[MODEL_MEM_COPY]);
  gboolean any_2021 = FALSE;
  for (int c = 1; c < MODEL_MEM_N; c++) {
    if (!fit_mem_class(m, (ModelMemClass)c, TRUE, l2, &mc[MODEL_MEM_COPY], base, max_iter, &mc21[c], error))
      return NULL;
    any_2021 |= mc21[c].fitted;
  }
  /* Without copies: the base's launch gap and HBM efficiency. */
  double launch_us = copies ? mc[MODEL_MEM_COPY].gap_us : base->kernel_launch_s * 1e6;
  double bw = copies ? mc[MODEL_MEM_COPY].hbm_GBps : base->hbm_bytes_per_s * base->memory_efficiency / 1e9;
  double hbm = copies ? fmax(m->device.hbm_GBps, bw) : base->hbm_bytes_per_s / 1e9;
  if (!copies)
    mc[MODEL_MEM_COPY] = (MemClassFit){.gap_us = launch_us, .hbm_GBps = bw, .l2_GBps = bw};
  /* The device's peak at the clock it reported: the measured rates are
   * shares of that (a datasheet's peak at a lower clock can be exceeded). */
  double peak_tflops = m->device.peak_tflops;

  /* 2. 16-bit GEMMs. */
  gboolean any_bf16 = FALSE;
  for (guint i = 0; i < m->gemm->len; i++)
    any_bf16 |= strcmp(g_array_index(m->gemm, CalibGemm, i).dtype, "bf16") == 0;
  const char *dtype = opt->dtype ? opt->dtype : any_bf16 ? "bf16" : "fp16";
  ModelProfile prof = {.kind = MODEL_PROFILE_ANALYTIC, .peak_flops = peak_tflops * 1e12, .sms = m->device.sms,
                       .memory_bytes = m->device.memory_GiB * 1073741824.0, .hbm_bytes_per_s = hbm * 1e9,
                       .memory_efficiency = bw / hbm, .kernel_launch_s = launch_us * 1e-6,
                       .gemm.efficiency_max = 1, .sustained_clock_ratio = 1, .gemm_fp8_split_accumulation = 1,
                       .l2_bytes = l2};
  GArray *idx = gemm_records(m, dtype, -1);
  CalibNls gf;
  memset(&gf, 0, sizeof gf);
  char what[64], how16[160] = "", how8[160] = "";
  gboolean ok = TRUE, gemms = idx->len > 0;
  if (!gemms && !base) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_TOO_FEW,
                "the measurements have no %s GEMMs and there is no base profile to take the GEMM model from; run "
                "ptdsim-calibrate --mode gemm or gemmlt, or give --base",
                dtype);
    ok = FALSE;
  } else if (gemms) {
    GemmData gd = {.launch_us = launch_us, .fp8 = FALSE, .prof = &prof};
    gemm_data(&gd, m, idx, bw);
    g_snprintf(what, sizeof what, "GEMM efficiency (%s gemm records)", dtype);
    ok = fit_gemm_set(&gd, m, idx, NULL, opt->tiles_from, what, max_iter, &gf, how16, sizeof how16, error);
    gemm_data_free(&gd);
    prof.gemm.efficiency_max = round_sig(gf.x[0], 6);
    prof.gemm.k_half = round_sig(gf.x[1], 6);
    prof.gemm.tile_bytes_per_s = round_sig(gf.x[2] * 1e3, 6) * 1e9;
  } else {
    prof.gemm.n_tiles = base->gemm.n_tiles;
    memcpy(prof.gemm.tile_m, base->gemm.tile_m, sizeof prof.gemm.tile_m);
    memcpy(prof.gemm.tile_n, base->gemm.tile_n, sizeof prof.gemm.tile_n);
    prof.gemm.efficiency_max = base->gemm.efficiency_max;
    prof.gemm.k_half = base->gemm.k_half;
    prof.gemm.tile_bytes_per_s = base->gemm.tile_bytes_per_s;
  }
  if (!ok) {
    g_array_free(idx, TRUE);
    return NULL;
  }

  /* 3. FP8 GEMMs: the forward ones (fast accumulation) fit the gemm_fp8
   * model, the gradient ones the share of that rate they keep. */
  GArray *idx8 = gemm_records(m, "fp8", 0), *idx8g = gemm_records(m, "fp8", 1);
  CalibNls f8 = {0}, fs = {0};
  gboolean fp8 = idx8->len > 0, split = FALSE;
  if (!fp8 && base && base->has_gemm_fp8) { /* the base's FP8 model, for the layers' comparison */
    prof.peak_fp8_flops = base->peak_fp8_flops;
    prof.has_gemm_fp8 = TRUE;
    prof.gemm_fp8 = base->gemm_fp8;
    prof.gemm_fp8_split_accumulation = base->gemm_fp8_split_accumulation;
  }
  if (fp8) {
    const char *cc = m->device.compute_capability;
    if (base && model_profile_supports(base, "fp8"))
      prof.peak_fp8_flops = base->peak_fp8_flops;
    else if (cc && (g_str_has_prefix(cc, "8.9") || g_str_has_prefix(cc, "9.") || g_str_has_prefix(cc, "10.")))
      prof.peak_fp8_flops = 2 * prof.peak_flops; /* Ada, Hopper, Blackwell: dense FP8 twice dense 16-bit */
    else {
      g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                  "the measurements have fp8 GEMMs but no FP8 peak is known for %s; give --base a profile with "
                  "peak_fp8_tflops",
                  m->device.name);
      ok = FALSE;
    }
    prof.has_gemm_fp8 = TRUE;
    prof.gemm_fp8 = (ModelGemmParams){.efficiency_max = 1};
    GemmData g8 = {.launch_us = launch_us, .fp8 = TRUE, .prof = &prof};
    gemm_data(&g8, m, idx8, bw);
    ok = ok && fit_gemm_set(&g8, m, idx8, idx8g, NULL, "FP8 GEMM efficiency (fp8 forward gemm records)", max_iter, &f8, how8,
                            sizeof how8, error);
    gemm_data_free(&g8);
    if (ok) {
      prof.gemm_fp8.efficiency_max = round_sig(f8.x[0], 6);
      prof.gemm_fp8.k_half = round_sig(f8.x[1], 6);
      prof.gemm_fp8.tile_bytes_per_s = round_sig(f8.x[2] * 1e3, 6) * 1e9;
    }
    if (ok && idx8g->len >= 2) {
      GemmData gg = {.launch_us = launch_us, .fp8 = TRUE, .prof = &prof};
      gemm_data(&gg, m, idx8g, bw);
      double x0[1] = {0.8};
      ok = calib_nls("FP8 split accumulation (fp8 gradient gemm records)", split_residuals, &gg, gg.n, 1, x0, max_iter,
                     &fs, error);
      if (ok && !(fs.x[0] > 0.01 && fs.x[0] <= 1.5)) {
        g_set_error(error, CALIB_ERROR, CALIB_ERROR_NO_CONVERGENCE,
                    "the FP8 gradient GEMMs run at %.3g of the forward ones' rate, which is not physical; check the fp8 "
                    "gemm measurements",
                    fs.x[0]);
        ok = FALSE;
      }
      split = ok;
      if (ok)
        prof.gemm_fp8_split_accumulation = round_sig(fmin(fs.x[0], 1.0), 6);
      gemm_data_free(&gg);
    }
  }

  /* 4. Flash attention, each pass. */
  gboolean attn = ok && m->attention->len > 0;
  CalibNls af[2];
  memset(af, 0, sizeof af);
  if (attn) {
    for (int pass = 0; pass < 2; pass++)
      prof.flash[pass] = base && base->flash_waves ? base->flash[pass] : default_flash[pass];
    prof.flash_ctas_per_sm = base && base->flash_waves ? base->flash_ctas_per_sm : 1;
    prof.flash_waves = TRUE;
    for (int pass = 0; ok && pass < 2; pass++) {
      GArray *with = g_array_new(FALSE, FALSE, sizeof(CalibAttention));
      for (guint i = 0; i < m->attention->len; i++) {
        const CalibAttention *a = &g_array_index(m->attention, CalibAttention, i);
        if (pass ? a->has_bwd : a->has_fwd)
          g_array_append_val(with, *a);
      }
      AttnData ad = {(const CalibAttention *)with->data, with->len, pass == 1, &prof};
      double x0[2] = {0.5, 2.0};
      ok = calib_nls(pass ? "flash attention backward (attention records)" : "flash attention forward (attention records)",
                     attn_residuals, &ad, with->len, 2, x0, max_iter, &af[pass], error);
      g_array_free(with, TRUE);
      if (ok && !(af[pass].x[0] > 0.01 && af[pass].x[0] <= 1 && af[pass].x[1] >= -1e-3)) {
        g_set_error(error, CALIB_ERROR, CALIB_ERROR_NO_CONVERGENCE,
                    "the flash attention %s fit gave a share of peak %.3g and a block overhead of %.3g us, outside "
                    "(0.01, 1] and >= 0; check the attention measurements",
                    pass ? "backward" : "forward", af[pass].x[0], af[pass].x[1]);
        ok = FALSE;
      }
      if (ok) {
        prof.flash[pass].efficiency = round_sig(af[pass].x[0], 6);
        prof.flash[pass].cta_overhead_s = round_sig(fmax(af[pass].x[1], 0), 6) * 1e-6;
      }
    }
  }
  if (!ok) {
    g_array_free(idx, TRUE);
    g_array_free(idx8, TRUE);
    g_array_free(idx8g, TRUE);
    return NULL;
  }
  gboolean any_class = FALSE;
  for (int c = 0; c < MODEL_MEM_N; c++)
    any_class |= mc[c].fitted;
  /* Classes measured but no copies, and no base classes: the copy class,
   * which every unmeasured class is priced as, from the profile's launch gap
   * and streaming bandwidth (what prices kernels where a profile has no
   * classes). */
  if (any_class && !mc[MODEL_MEM_COPY].fitted && !(base && base->has_membound)) {
    mc[MODEL_MEM_COPY].gap_us = launch_us;
    mc[MODEL_MEM_COPY].hbm_GBps = mc[MODEL_MEM_COPY].l2_GBps = bw;
  }
  for (int c = 0; c < MODEL_MEM_N; c++) {
    prof.mem_gap_s[c] = (mc[c].fitted ? mc[c].gap_us : mc[MODEL_MEM_COPY].gap_us) * 1e-6;
    prof.mem_hbm_bytes_per_s[c] = (mc[c].fitted ? mc[c].hbm_GBps : mc[MODEL_MEM_COPY].hbm_GBps) * 1e9;
    prof.mem_l2_bytes_per_s[c] = (mc[c].fitted ? mc[c].l2_GBps : mc[MODEL_MEM_COPY].l2_GBps) * 1e9;
    if (!mc[c].fitted && base && base->has_membound) {
      prof.mem_gap_s[c] = base->mem_gap_s[c];
      prof.mem_hbm_bytes_per_s[c] = base->mem_hbm_bytes_per_s[c];
      prof.mem_l2_bytes_per_s[c] = base->mem_l2_bytes_per_s[c];
    }
  }
  prof.has_membound = any_class || (base && base->has_membound);

  /* The profile: the base's description, with what was measured put in. */
  cJSON *root = opt->base_json ? cJSON_Duplicate(opt->base_json, TRUE) : cJSON_CreateObject();
  cJSON_DeleteItemFromObjectCaseSensitive(root, "fit");
  cJSON_DeleteItemFromObjectCaseSensitive(root, "collectives");
  put_str(root, "name", opt->name);
  put_str(root, "kind", "analytic");
  char *desc = g_strdup_printf("%s, fitted by ptdsim fit from %s (%s)%s%s%s", m->device.name, opt->measurements_path,
                               m->synthetic ? "SYNTHETIC measurements"
                               : m->source  ? "published figures, transcribed"
                                            : "measured by ptdsim-calibrate",
                               base ? "; what it does not measure is from the base profile " : "",
                               base ? base_name : "", base ? " (see provenance)" : "");
  put_str(root, "description", desc);
  g_free(desc);
  cJSON *prov = cJSON_CreateObject();
  cJSON_AddStringToObject(prov, "method",
                          "fitted by ptdsim fit: GSL nonlinear least squares on relative residuals (see fit block)");
  cJSON_AddStringToObject(prov, "measurements", opt->measurements_path);
  if (m->synthetic)
    cJSON_AddStringToObject(prov, "synthetic", m->synthetic);
  if (m->source)
    cJSON_AddStringToObject(prov, "source", m->source);
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
  if (base) {
    /* a shipped profile is cited by its place in the repository */
    const char *at = base->path ? strstr(base->path, "calibrate/profiles/") : NULL;
    char *b = g_strdup_printf("%s (%s): the keys said to come from it below", base_name,
                              at ? at : base->path ? base->path : "?");
    cJSON_AddStringToObject(prov, "base", b);
    g_free(b);
  }
  cJSON_AddStringToObject(prov, "peak_tflops", m->device.peak_source ? m->device.peak_source : "from the measurements");
  put_num(root, "peak_tflops", peak_tflops);
  put_num(root, "sms", m->device.sms);
  put_num(root, "memory_GiB", m->device.memory_GiB);
  cJSON_AddStringToObject(prov, "sms", "the measured device");
  cJSON_AddStringToObject(prov, "memory_GiB", "the measured device");
  if (copies) {
    put_num(root, "hbm_GBps", hbm);
    cJSON_AddStringToObject(prov, "hbm_GBps", hbm > m->device.hbm_GBps
                                                 ? "the copies' fitted bandwidth (above the device's theoretical figure)"
                                                 : "the measured device's theoretical figure: 2 x memory clock x bus width");
    put_num(root, "memory_efficiency", bw / hbm);
    put_num(root, "kernel_launch_us", launch_us);
    cJSON_AddStringToObject(prov, "memory_efficiency", "fitted: copies beyond the L2 over hbm_GBps (membw records)");
    cJSON_AddStringToObject(prov, "kernel_launch_us", "fitted: the copies' gap (membw records)");
  } else {
    prov_from_base(prov, base_prov, base_name, "hbm_GBps");
    prov_from_base(prov, base_prov, base_name, "memory_efficiency");
    prov_from_base(prov, base_prov, base_name, "kernel_launch_us");
  }
  /* The GEMMs and layers were timed in bursts, at the clocks the GPU runs
   * before its power limit pulls them down; a training run's tensor-core
   * work runs at the settled clock.  A sustained loop measures the ratio
   * (the median over its records); without one, the burst clocks. */
  cJSON *power_record = NULL;
  gboolean power_ok = TRUE; /* its error is returned below, once the fit's arrays are freed */
  if (m->sustained->len > 0) {
    /* loops run under several power limits: the ratio is the highest
     * limit's (the part's rated cap; the power model prices the others),
     * with the loops that recorded no limit */
    double top = 0;
    for (guint i = 0; i < m->sustained->len; i++)
      top = fmax(top, g_array_index(m->sustained, CalibSustained, i).power_limit_W);
    double *ratio = g_new(double, m->sustained->len);
    guint n_ratio = 0, first = m->sustained->len;
    for (guint i = 0; i < m->sustained->len; i++) {
      const CalibSustained *x = &g_array_index(m->sustained, CalibSustained, i);
      if (x->power_limit_W > 0 && x->power_limit_W < top)
        continue;
      first = MIN(first, i);
      /* the clock stretches the math, not the launch gap (models/compute.c) */
      ModelGemm mg = {1, x->m, x->n, x->k};
      double flops = model_gemm_flops(&mg);
      /* over the profile's own burst rate for that GEMM: the rate the
       * rest of the model runs at (a loop's own burst, read by another
       * tool or after the first milliseconds of load, can sit below it) */
      double tb = model_gemm_time_s(&prof, &mg), ts = flops / (calib_sustained_tflops(x) * 1e12);
      double l = fmin(prof.kernel_launch_s, 0.5 * tb);
      ratio[n_ratio++] = (tb - l) / (ts - l);
    }
    double r = round_sig(fmin(calib_time_from_samples(ratio, n_ratio).median_us, 1.0), 6);
    g_free(ratio);
    const CalibSustained *x = &g_array_index(m->sustained, CalibSustained, first);
    GString *why = g_string_new(NULL);
    g_string_append_printf(why,
                           "measured: the settled rate of a %gs loop of a %s %" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT
                           "x%" G_GUINT64_FORMAT " GEMM (the median of its second half's chunks, %.1f TFLOP/s) over "
                           "this profile's rate for it at the burst clock (%.1f TFLOP/s; the loop's own burst read "
                           "%.1f), the launch gap left out",
                           x->loop_s, x->dtype, x->m, x->n, x->k, calib_sustained_tflops(x),
                           model_gemm_flops(&(ModelGemm){1, x->m, x->n, x->k}) /
                               model_gemm_time_s(&prof, &(ModelGemm){1, x->m, x->n, x->k}) / 1e12,
                           x->burst_tflops);
    if (calib_sustained_clock_MHz(x) > 0)
      g_string_append_printf(why, "; SM clock %.0f MHz", calib_sustained_clock_MHz(x));
    if (calib_sustained_power_W(x) > 0)
      g_string_append_printf(why, " at %.0f W", calib_sustained_power_W(x));
    if (x->power_limit_W > 0)
      g_string_append_printf(why, " (limit %.0f W)", x->power_limit_W);
    if (n_ratio > 1)
      g_string_append_printf(why, "; the median of %u such loops", n_ratio);
    if (n_ratio < m->sustained->len)
      g_string_append_printf(why, " (the loops at the highest power limit, %.0f W)", top);
    put_num(root, "sustained_clock_ratio", r);
    cJSON_AddStringToObject(prov, "sustained_clock_ratio", why->str);
    g_string_free(why, TRUE);
    power_ok = fit_power(m, base, base_name, base_prov, max_iter, root, prov, &power_record, error);
  } else {
    put_num(root, "sustained_clock_ratio", 1);
    cJSON_AddStringToObject(prov, "sustained_clock_ratio",
                            "1: the GEMMs were measured at the clocks the GPU ran during calibration");
  }
  cJSON *overlap_record = NULL;
  if (power_ok)
    power_ok = fit_overlap(m, &prof, root, prov, &overlap_record, error);
  if (power_ok && !cJSON_GetObjectItemCaseSensitive(prov, "overlap") &&
      cJSON_GetObjectItemCaseSensitive(root, "overlap"))
    prov_from_base(prov, base_prov, base_name, "overlap");
  if (l2 > 0) {
    put_num(root, "l2_MiB", l2 / 1048576.0);
    if (m->device.l2_MiB > 0)
      cJSON_AddStringToObject(prov, "l2_MiB", "the measured device (cudaDevAttrL2CacheSize)");
    else
      prov_from_base(prov, base_prov, base_name, "l2_MiB");
  }
  if (base) {
    prov_from_base(prov, base_prov, base_name, "precisions");
    if (model_profile_supports(base, "fp8"))
      prov_from_base(prov, base_prov, base_name, "peak_fp8_tflops");
  }
  if (fp8 && (!base || !model_profile_supports(base, "fp8"))) {
    int n = 0;
    const char *words[3];
    words[n++] = "bf16", words[n++] = "fp16", words[n++] = "fp8";
    put(root, "precisions", cJSON_CreateStringArray(words, n));
    put_num(root, "peak_fp8_tflops", prof.peak_fp8_flops / 1e12);
    cJSON_AddStringToObject(prov, "peak_fp8_tflops", "twice the dense 16-bit peak (compute capability 8.9 and later)");
  }
  char *gp;
  /* the GEMM model as the fit or the base has it, its ceiling efficiency
   * given: a base's anchor (an absolute rate) is solved against the base's
   * own peak, and would ask another peak for a rate it cannot give */
  put(root, "gemm", gemm_json(&prof.gemm));
  if (gemms) {
    gp = g_strdup_printf("fitted on %u %s GEMMs; tiles: %s", idx->len, dtype, how16);
    cJSON_AddStringToObject(prov, "gemm", gp);
    g_free(gp);
  } else
    prov_from_base(prov, base_prov, base_name, "gemm");
  if (fp8) {
    put(root, "gemm_fp8", gemm_json(&prof.gemm_fp8));
    gp = g_strdup_printf("fitted on %u fp8 forward (fast-accumulation) GEMMs; tiles: %s", idx8->len, how8);
    cJSON_AddStringToObject(prov, "gemm_fp8", gp);
    g_free(gp);
    if (split) {
      put_num(root, "gemm_fp8_split_accumulation", prof.gemm_fp8_split_accumulation);
      gp = g_strdup_printf("fitted on %u fp8 gradient GEMMs (split accumulation)", idx8g->len);
      cJSON_AddStringToObject(prov, "gemm_fp8_split_accumulation", gp);
      g_free(gp);
    } else if (base && cJSON_GetObjectItemCaseSensitive(opt->base_json, "gemm_fp8_split_accumulation"))
      prov_from_base(prov, base_prov, base_name, "gemm_fp8_split_accumulation");
    else
      cJSON_DeleteItemFromObjectCaseSensitive(root, "gemm_fp8_split_accumulation");
  } else if (base && base->has_gemm_fp8)
    prov_from_base(prov, base_prov, base_name, "gemm_fp8");
  if (attn) {
    const cJSON *ba = opt->base_json ? cJSON_GetObjectItemCaseSensitive(opt->base_json, "attention") : NULL;
    const cJSON *bd = cJSON_GetObjectItemCaseSensitive(ba, "default");
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "default", cJSON_IsString(bd) ? bd->valuestring : "flash");
    cJSON_AddNumberToObject(a, "ctas_per_sm", prof.flash_ctas_per_sm);
    for (int pass = 0; pass < 2; pass++) {
      cJSON *o = cJSON_AddObjectToObject(a, pass ? "backward" : "forward");
      cJSON_AddNumberToObject(o, "tile_q", prof.flash[pass].tile_q);
      cJSON_AddNumberToObject(o, "tile_kv", prof.flash[pass].tile_kv);
      cJSON_AddNumberToObject(o, "efficiency", prof.flash[pass].efficiency);
      cJSON_AddNumberToObject(o, "cta_overhead_us", prof.flash[pass].cta_overhead_s * 1e6);
    }
    put(root, "attention", a);
    gp = g_strdup_printf("fitted: the waves model's share of peak and block overhead per pass on %u cuDNN flash "
                         "attention records; tiles %s",
                         m->attention->len,
                         base && base->flash_waves ? "and blocks per SM from the base profile"
                                                   : "of FlashAttention-2 for head size 128 (assumption), one block per SM");
    cJSON_AddStringToObject(prov, "attention", gp);
    g_free(gp);
  } else if (base && (base->flash_forward_efficiency > 0 || base->flash_waves)) {
    prov_from_base(prov, base_prov, base_name, "attention");
    if (power_ok) /* (one error at a time: a failed power fit has set it) */
      power_ok = rescale_attention(root, base->peak_flops / (peak_tflops * 1e12), prov, error);
  }
  cJSON *mb = cJSON_CreateObject();
  for (int c = 0; c < MODEL_MEM_N && prof.has_membound; c++) {
    char key[48];
    g_snprintf(key, sizeof key, "membound.%s", model_mem_class_name((ModelMemClass)c));
    if (!mc[c].fitted && !(base && base->has_membound) && c != MODEL_MEM_COPY) {
      char *note = g_strdup_printf("%s; priced as the copy class", mc[c].note);
      cJSON_AddStringToObject(prov, key, note);
      g_free(note);
      continue;
    }
    put_mem_class(mb, (ModelMemClass)c, prof.mem_gap_s[c] * 1e6, prof.mem_hbm_bytes_per_s[c] / 1e9,
                  prof.mem_l2_bytes_per_s[c] / 1e9);
    if (mc[c].fitted)
      cJSON_AddStringToObject(prov, key, mc[c].note);
    else if (c == MODEL_MEM_COPY && !(base && base->has_membound))
      cJSON_AddStringToObject(prov, key, "the profile's kernel_launch_us and HBM efficiency (no copies measured)");
    else
      prov_from_base(prov, base_prov, base_name, key);
  }
  if (prof.has_membound)
    put(root, "membound", mb);
  else
    cJSON_Delete(mb);
  cJSON_DeleteItemFromObjectCaseSensitive(root, "membound_2021");
  if (any_2021) {
    cJSON *m21 = cJSON_CreateObject();
    for (int c = 1; c < MODEL_MEM_N; c++) {
      if (!mc21[c].fitted)
        continue;
      char key[48];
      g_snprintf(key, sizeof key, "membound_2021.%s", model_mem_class_name((ModelMemClass)c));
      put_mem_class(m21, (ModelMemClass)c, mc21[c].gap_us, mc21[c].hbm_GBps, mc21[c].l2_GBps);
      char *note = g_strdup_printf("Megatron's 2021 kernels (the 2021 layer's), %s", mc21[c].note);
      cJSON_AddStringToObject(prov, key, note);
      g_free(note);
    }
    put(root, "membound_2021", m21);
  }
  put(root, "provenance", prov);

  /* The fit record. */
  cJSON *fit = cJSON_CreateObject();
  mem_fit_record(cJSON_AddObjectToObject(fit, "membound"), mc);
  if (any_2021)
    mem_fit_record(cJSON_AddObjectToObject(fit, "membound_2021"), mc21);
  cJSON *fg = !gemms ? NULL : fit_summary(fit, "gemm",
                          "t = launch + max(T1 (K + k_half) / (K e_max), bytes / bandwidth), T1 the best tile's "
                          "wave-quantized time at peak times min(1, its intensity x tile_bandwidth / peak) "
                          "(models/compute.h)",
                          &gf, idx->len);
  if (fg) {
    cJSON_AddStringToObject(fg, "dtype", dtype);
    cJSON_AddStringToObject(fg, "tiles", how16);
    cJSON *pg = cJSON_AddObjectToObject(fg, "parameters");
    param(pg, "efficiency_max", gf.x[0], gf.se[0]);
    param(pg, "k_half", gf.x[1], gf.se[1]);
    param(pg, "tile_bandwidth_GBps", gf.x[2] * 1e3, gf.se[2] * 1e3);
    gemm_residual_rows(cJSON_AddArrayToObject(fg, "residuals"), m, idx, &prof);
  }
  if (fp8) {
    cJSON *f = fit_summary(fit, "gemm_fp8", "as gemm, at the FP8 peak with 1-byte operands", &f8, idx8->len);
    cJSON_AddStringToObject(f, "tiles", how8);
    cJSON *p8 = cJSON_AddObjectToObject(f, "parameters");
    param(p8, "efficiency_max", f8.x[0], f8.se[0]);
    param(p8, "k_half", f8.x[1], f8.se[1]);
    param(p8, "tile_bandwidth_GBps", f8.x[2] * 1e3, f8.se[2] * 1e3);
    if (split)
      param(p8, "split_accumulation", fs.x[0], fs.se[0]);
    gemm_residual_rows(cJSON_AddArrayToObject(f, "residuals"), m, idx8, &prof);
    gemm_residual_rows(cJSON_AddArrayToObject(f, "residuals_gradient"), m, idx8g, &prof);
  }
  if (attn)
    for (int pass = 0; pass < 2; pass++) {
      cJSON *f = fit_summary(fit, pass ? "attention_backward" : "attention_forward",
                             "thread-block waves over the SMs (models/compute.h model_flash_waves_time_s)", &af[pass],
                             m->attention->len);
      cJSON *pa = cJSON_AddObjectToObject(f, "parameters");
      param(pa, "efficiency", af[pass].x[0], af[pass].se[0]);
      param(pa, "cta_overhead_us", af[pass].x[1], af[pass].se[1]);
    }
  g_array_free(idx, TRUE);
  g_array_free(idx8, TRUE);
  g_array_free(idx8g, TRUE);
  if (!power_ok || !fit_collectives(m, max_iter, root, fit, error)) {
    cJSON_Delete(power_record);
    cJSON_Delete(overlap_record);
    cJSON_Delete(fit);
    cJSON_Delete(root);
    return NULL;
  }
  if (power_record)
    cJSON_AddItemToObject(fit, "power", power_record);
  if (overlap_record)
    cJSON_AddItemToObject(fit, "overlap", overlap_record);
  cJSON_AddItemToObject(root, "fit", fit);
  return root;
}

void calib_layer_shape(const CalibLayer *l, ModelShape *shape, ModelLayerOptions *o) {
  *shape = (ModelShape){.layers = 1, .hidden = l->hidden, .heads = l->heads, .seq_len = l->seq,
                        .vocab = 51200, /* one layer: the vocabulary does not enter a layer's cost */
                        .ffn_hidden = l->ffn, .query_groups = l->kv_heads};
  if (l->llama) {
    shape->mlp = MODEL_MLP_SWIGLU;
    shape->norm = MODEL_NORM_RMSNORM;
    shape->position = MODEL_POSITION_ROTARY;
    shape->no_bias = TRUE;
  }
  *o = (ModelLayerOptions){.fused = l->fused, .sequence_parallel = l->sequence_parallel,
                           /* the harness's 2021 layer runs the fused softmax kernel at every shape */
                           .attention = l->flash ? MODEL_ATTENTION_FLASH : MODEL_ATTENTION_FUSED_KERNEL,
                           .fp8 = strcmp(l->dtype, "fp8") == 0, .cp = 1};
}

void calib_layer_predict(const ModelProfile *p, const CalibLayer *l, ModelLayerCost *out) {
  ModelShape shape;
  ModelLayerOptions o;
  calib_layer_shape(l, &shape, &o);
  model_layer_cost_with(p, &shape, l->tp, l->micro_batch, &o, out);
}
