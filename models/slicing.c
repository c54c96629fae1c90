/* ptdsim — TeraPipe's per-slice cost, its fitted context term, the slicing
 * DP and the batch knapsack (formulas and citations in slicing.h). */
#include "slicing.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"

G_DEFINE_QUARK(model-slicing-error-quark, model_slicing_error)

/* --- direct per-slice cost of one cell --- */

void model_cell_slice_time(const ModelCell *c, guint b, guint tokens, guint context, double *fwd_s, double *bwd_s,
                           double *tp_fwd_s, double *tp_bwd_s) {
  ModelLayerCost lc;
  model_layer_slice_cost(c->profile, c->model, c->tp, b, tokens, context, c->fused, &lc);
  double f = lc.fwd.seg_s[0] + lc.fwd.seg_s[1] + lc.fwd.seg_s[2];
  double g = lc.bwd.seg_s[0] + lc.bwd.seg_s[1] + lc.bwd.seg_s[2];
  /* Two tensor-parallel all-reduces per pass (Megatron's f and g). */
  double ar = 0;
  if (c->net && c->tp > 1)
    ar = 2 * model_collective_time_s(c->net, MODEL_COLL_ALLREDUCE, lc.tp_allreduce_bytes, c->tp, c->tp_nodes, NULL);
  double passes_bwd = c->recompute ? 2 : 1; /* recomputation forward, then the backward */
  *fwd_s = c->layers * f;
  *bwd_s = c->layers * (g + (c->recompute ? f : 0));
  if (c->head) {
    ModelShape slice = *c->model;
    slice.seq_len = tokens; /* the logits of this slice's tokens */
    double hf, hb;
    model_head_cost(c->profile, &slice, c->tp, b, &hf, &hb);
    *fwd_s += hf;
    *bwd_s += hb;
  }
  if (tp_fwd_s)
    *tp_fwd_s = c->layers * ar;
  if (tp_bwd_s)
    *tp_bwd_s = c->layers * ar * passes_bwd;
}

double model_cell_slice_total_s(const ModelCell *c, guint b, guint tokens, guint context) {
  double f, g, tf, tg;
  model_cell_slice_time(c, b, tokens, context, &f, &g, &tf, &tg);
  return f + g + tf + tg;
}

/* --- the fitted context term --- */

void model_slice_cost_clear(ModelSliceCost *c) { g_clear_pointer(&c->t0, g_free); }

double model_slice_cost_eval(const ModelSliceCost *c, guint len, guint start) {
  double i = (double)len * c->granularity, j = (double)start * c->granularity;
  return c->t0[len] + c->a[0] + c->a[1] * i + c->a[2] * j + c->a[3] * i * j;
}

typedef struct {
  guint i, j; /* granules */
} Pt;

/* A grid of (slice length, context) points, in granules: every pair when n
 * is small, else lengths on a geometric ladder (plus `shift`) and contexts
 * at eighths of the sequence. */
static GArray *grid(guint n, guint shift) {
  GArray *pts = g_array_new(FALSE, FALSE, sizeof(Pt));
  if (n <= 32) {
    for (guint i = 1; i <= n; i++)
      for (guint j = 0; i + j <= n; j++)
        g_array_append_val(pts, ((Pt){i, j}));
    return pts;
  }
  for (guint base = 1; base <= n; base = base * 3 / 2 + 1) {
    guint i = MIN(n, base + shift);
    for (guint q = 0; q < 8; q++) {
      guint j = (guint)((guint64)(n - i) * q / 7);
      g_array_append_val(pts, ((Pt){i, j}));
    }
  }
  return pts;
}

gboolean model_slice_cost_fit(const ModelCell *c, guint b, guint seq_len, guint granularity, ModelSliceCost *out,
                              GError **error) {
  memset(out, 0, sizeof *out);
  if (granularity == 0 || seq_len % granularity) {
    g_set_error(error, MODEL_SLICING_ERROR, MODEL_SLICING_ERROR_INVALID,
                "--granularity %u does not divide the sequence length %u; use a divisor such as 8", granularity,
                seq_len);
    return FALSE;
  }
  guint n = seq_len / granularity, g = granularity;
  out->b = b;
  out->seq_len = seq_len;
  out->granularity = g;
  out->n = n;
  out->t0 = g_new0(double, n + 1);
  for (guint k = 1; k <= n; k++)
    out->t0[k] = model_cell_slice_total_s(c, b, k * g, 0);

  /* Weighted least squares on t(i, j) - t(i, 0), weights 1/t(i, j)^2 so the
   * residuals are relative errors. */
  GArray *pts = grid(n, 0);
  gsl_matrix *X = gsl_matrix_alloc(pts->len, 4);
  gsl_vector *y = gsl_vector_alloc(pts->len), *w = gsl_vector_alloc(pts->len), *coef = gsl_vector_alloc(4);
  gsl_matrix *cov = gsl_matrix_alloc(4, 4);
  for (guint r = 0; r < pts->len; r++) {
    Pt p = g_array_index(pts, Pt, r);
    double i = (double)p.i * g, j = (double)p.j * g;
    double t = model_cell_slice_total_s(c, b, p.i * g, p.j * g);
    gsl_matrix_set(X, r, 0, 1);
    gsl_matrix_set(X, r, 1, i);
    gsl_matrix_set(X, r, 2, j);
    gsl_matrix_set(X, r, 3, i * j);
    gsl_vector_set(y, r, t - out->t0[p.i]);
    gsl_vector_set(w, r, t > 0 ? 1.0 / (t * t) : 1.0);
  }
  double chisq;
  gsl_error_handler_t *old = gsl_set_error_handler_off();
  int status = GSL_EINVAL;
  if (pts->len >= 1) {
    gsl_multifit_linear_workspace *ws = gsl_multifit_linear_alloc(pts->len, 4);
    status = gsl_multifit_wlinear(X, w, y, coef, cov, &chisq, ws);
    gsl_multifit_linear_free(ws);
  }
  gsl_set_error_handler(old);
  for (guint k = 0; k < 4; k++)
    out->a[k] = status == GSL_SUCCESS ? gsl_vector_get(coef, k) : 0;
  gsl_matrix_free(X);
  gsl_vector_free(y);
  gsl_vector_free(w);
  gsl_vector_free(coef);
  gsl_matrix_free(cov);
  g_array_free(pts, TRUE);
  if (status != GSL_SUCCESS || !isfinite(out->a[0] + out->a[1] + out->a[2] + out->a[3])) {
    g_set_error(error, MODEL_SLICING_ERROR, MODEL_SLICING_ERROR_FIT, "the context-cost fit failed (%s)",
                gsl_strerror(status));
    model_slice_cost_clear(out);
    return FALSE;
  }

  /* Error of the fitted cost against the direct one, on a shifted grid. */
  pts = grid(n, 1);
  double sum = 0, worst = 0;
  guint used = 0;
  for (guint r = 0; r < pts->len; r++) {
    Pt p = g_array_index(pts, Pt, r);
    double t = model_cell_slice_total_s(c, b, p.i * g, p.j * g);
    if (t <= 0)
      continue;
    double e = fabs(model_slice_cost_eval(out, p.i, p.j) - t) / t;
    sum += e;
    worst = MAX(worst, e);
    used++;
  }
  g_array_free(pts, TRUE);
  out->fit_max_rel_error = worst;
  out->fit_mean_rel_error = used ? sum / used : 0;
  return TRUE;
}

/* --- Algorithm 1 --- */

void model_slicing_clear(ModelSlicing *s) { g_clear_pointer(&s->len, g_free); }

double model_slicing_objective(const guint *len, guint n_slices, guint K, ModelSliceFn fn, gpointer data) {
  double sum = 0, worst = 0;
  guint start = 0;
  for (guint m = 0; m < n_slices; m++) {
    double t = fn(len[m], start, data);
    sum += t;
    worst = MAX(worst, t);
    start += len[m];
  }
  return sum + (K - 1.0) * worst;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

void model_token_dp(guint n, guint K, double eps_s, ModelSliceFn fn, gpointer data, ModelSlicing *out) {
  memset(out, 0, sizeof *out);
  out->T = INFINITY;
  if (n == 0)
    return;
  /* The cost table, row `start` holding lengths 1..n-start. */
  gsize *row = g_new(gsize, n + 1);
  gsize cells = 0;
  for (guint p = 0; p < n; p++) {
    row[p] = cells;
    cells += n - p;
  }
  double *cost = g_new(double, cells);
  gboolean *mono = g_new(gboolean, n);
  for (guint p = 0; p < n; p++) {
    mono[p] = TRUE;
    for (guint l = 1; l <= n - p; l++) {
      cost[row[p] + l - 1] = fn(l, p, data);
      if (l > 1 && cost[row[p] + l - 1] < cost[row[p] + l - 2])
        mono[p] = FALSE;
    }
  }
  double *cand = g_memdup2(cost, cells * sizeof(double));
  qsort(cand, cells, sizeof(double), cmp_double);

  double *S = g_new(double, n + 1);
  guint *choice = g_new(guint, n + 1);
  guint *best_len = g_new(guint, n);
  double last = -INFINITY;
  for (gsize ci = 0; ci < cells; ci++) {
    double tmax = cand[ci];
    if (ci > 0 && tmax == cand[ci - 1])
      continue;
    if (tmax < last + eps_s)
      continue; /* acceleration 1: t_max within eps of the last one solved */
    if (out->n_slices && K * tmax >= out->T)
      break; /* acceleration 2: no slicing with this largest slice can win */
    last = tmax;
    out->candidates_solved++;
    S[0] = 0;
    for (guint i = 1; i <= n; i++)
      S[i] = INFINITY;
    for (guint p = 0; p < n; p++) {
      if (S[p] == INFINITY)
        continue;
      const double *c = cost + row[p];
      for (guint l = 1; l <= n - p; l++) {
        if (c[l - 1] > tmax) {
          if (mono[p])
            break;
          continue;
        }
        double v = S[p] + c[l - 1];
        if (v < S[p + l]) {
          S[p + l] = v;
          choice[p + l] = l;
        }
      }
    }
    if (S[n] == INFINITY)
      continue;
    /* Backtrack, then score the slicing by its actual largest slice. */
    guint m = 0;
    for (guint i = n; i > 0; i -= choice[i])
      best_len[m++] = choice[i];
    double worst = 0;
    for (guint i = n, k = 0; k < m; k++) {
      worst = MAX(worst, cost[row[i - best_len[k]] + best_len[k] - 1]);
      i -= best_len[k];
    }
    double T = S[n] + (K - 1.0) * worst;
    if (T < out->T) {
      out->T = T;
      out->t_max = worst;
      g_free(out->len);
      out->len = g_new(guint, m);
      for (guint k = 0; k < m; k++)
        out->len[k] = best_len[m - 1 - k]; /* backtracking ran from the end */
      out->n_slices = m;
    }
  }
  g_free(S);
  g_free(choice);
  g_free(best_len);
  g_free(cand);
  g_free(cost);
  g_free(mono);
  g_free(row);
}

double model_batch_knapsack(const double *T_b, guint B, GArray *batch) {
  double *best = g_new(double, B + 1);
  guint *pick = g_new(guint, B + 1);
  best[0] = 0;
  for (guint x = 1; x <= B; x++) {
    best[x] = INFINITY;
    for (guint b = 1; b <= x; b++)
      if (best[x - b] + T_b[b - 1] < best[x]) {
        best[x] = best[x - b] + T_b[b - 1];
        pick[x] = b;
      }
  }
  g_array_set_size(batch, 0);
  for (guint x = B; x > 0; x -= pick[x])
    g_array_append_val(batch, pick[x]);
  double total = best[B];
  g_free(best);
  g_free(pick);
  return total;
}
