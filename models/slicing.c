/* ptdsim — TeraPipe's per-slice cost, its fitted context term, the slicing
 * DP and the batch knapsack (formulas and citations in slicing.h). */
#include "slicing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compute.h"
#include "layer.h"


G_DEFINE_QUARK(model-slicing-error-quark, model_slicing_error)

/* --- direct per-slice cost of one cell --- */

void model_cell_slice_time(const ModelCell *c, guint b, guint tokens, guint context, double *fwd_s, double *bwd_s,
                           double *tp_fwd_s, double *tp_bwd_s) {
  ModelLayerCost lc;
  gboolean eager = c->layer.framework == MODEL_FRAMEWORK_EAGER;
  if (eager)
    model_layer_slice_cost_with(c->profile, c->model, c->tp, b, tokens, context, &c->layer, &lc);
  else
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
  if (c->slice_grads && !eager && c->profile->kind == MODEL_PROFILE_ANALYTIC) {
    double P = (double)model_layer_local_params(c->model, c->tp);
    double kv = (double)b * c->model->seq_len * c->model->hidden / c->tp;
    double accumulate = 12 * c->profile->kernel_launch_s + model_memop_time_s(c->profile, 6 * P) -
                        c->profile->kernel_launch_s;
    double clones = 2 * model_memop_time_s(c->profile, 4 * kv);
    *bwd_s += c->layers * (accumulate + clones);
  }
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

void model_slice_cost_clear(ModelSliceCost *c) {
  g_clear_pointer(&c->t0, g_free);
  g_clear_pointer(&c->tend, g_free);
  g_clear_pointer(&c->alpha, g_free);
  g_clear_pointer(&c->beta, g_free);
}

double model_slice_cost_eval(const ModelSliceCost *c, guint len, guint start) {
  if (start == 0)
    return c->t0[len];
  if (start + len == c->n)
    return c->tend[len];
  return c->t0[len] + c->alpha[len] + c->beta[len] * ((double)start * c->granularity);
}

typedef struct {
  guint i, j; /* granules */
} Pt;

/* A grid of (slice length, context) points, in granules, strictly inside
 * the sequence (context at least one granule, ending before the last: the
 * first and last slices are costed directly), in runs of equal length:
 * every such pair when n is small, else lengths on a geometric ladder of
 * ratio about 5/4 (plus `shift`; fine enough to follow the bend where the
 * host stops holding the GPU back) and eight contexts spread over the room
 * left. */
static GArray *grid(guint n, guint shift) {
  GArray *pts = g_array_new(FALSE, FALSE, sizeof(Pt));
  if (n <= 32) {
    for (guint i = 1; i <= n; i++)
      for (guint j = 1; i + j < n; j++)
        g_array_append_val(pts, ((Pt){i, j}));
    return pts;
  }
  guint last = 0;
  for (guint base = 1; base <= n; base = base * 5 / 4 + 1) {
    guint i = MIN(n, base + shift);
    if (n - i < 2)
      continue;
    for (guint q = 0; q < 8; q++) {
      guint j = 1 + (guint)((guint64)(n - i - 2) * q / 7);
      g_array_append_val(pts, ((Pt){i, j}));
    }
    last = i;
  }
  if (shift == 0 && last < n - 2) /* the longest slice that has an inside (one context) */
    g_array_append_val(pts, ((Pt){n - 2, 1}));
  return pts;
}

/* Weighted least squares of y = alpha + beta x over points r0..r1-1,
 * weights w: closed form (a single x gives beta 0). */
static void line_fit(const double *x, const double *y, const double *w, guint r0, guint r1, double *alpha,
                     double *beta) {
  double sw = 0, sx = 0, sy = 0;
  for (guint r = r0; r < r1; r++) {
    sw += w[r];
    sx += w[r] * x[r];
    sy += w[r] * y[r];
  }
  double mx = sx / sw, my = sy / sw, sxx = 0, sxy = 0;
  for (guint r = r0; r < r1; r++) {
    sxx += w[r] * (x[r] - mx) * (x[r] - mx);
    sxy += w[r] * (x[r] - mx) * (y[r] - my);
  }
  *beta = sxx > 0 ? sxy / sxx : 0;
  *alpha = my - *beta * mx;
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
  out->tend = g_new0(double, n + 1);
  out->alpha = g_new0(double, n + 1);
  out->beta = g_new0(double, n + 1);
  for (guint k = 1; k <= n; k++) {
    out->t0[k] = model_cell_slice_total_s(c, b, k * g, 0);
    out->tend[k] = k == n ? out->t0[k] : model_cell_slice_total_s(c, b, k * g, (n - k) * g);
  }

  /* For each length of the grid, weighted least squares of the context term
   * t(i, j) - t(i, 0) on a line in j, weights 1/t(i, j)^2 so the residuals
   * are relative errors; between the grid's lengths alpha and beta are
   * interpolated linearly in i, beyond them held. */
  GArray *pts = grid(n, 0);
  guint np = pts->len;
  double *x = g_new(double, MAX(np, 1u)), *y = g_new(double, MAX(np, 1u)), *w = g_new(double, MAX(np, 1u));
  guint *fitted = g_new0(guint, n + 1); /* the grid's lengths, in ascending order */
  guint nf = 0;
  for (guint r = 0; r < np; r++) {
    Pt p = g_array_index(pts, Pt, r);
    double t = model_cell_slice_total_s(c, b, p.i * g, p.j * g);
    x[r] = (double)p.j * g;
    y[r] = t - out->t0[p.i];
    w[r] = t > 0 ? 1.0 / (t * t) : 1.0;
  }
  for (guint r0 = 0; r0 < np;) {
    guint i = g_array_index(pts, Pt, r0).i, r1 = r0;
    while (r1 < np && g_array_index(pts, Pt, r1).i == i)
      r1++;
    line_fit(x, y, w, r0, r1, &out->alpha[i], &out->beta[i]);
    fitted[nf++] = i;
    r0 = r1;
  }
  for (guint k = 1, f = 0; nf > 0 && k <= n; k++) {
    while (f + 1 < nf && fitted[f + 1] <= k)
      f++;
    guint lo = fitted[f];
    if (k <= lo || f + 1 == nf) { /* at or outside the grid's lengths: held */
      out->alpha[k] = out->alpha[lo];
      out->beta[k] = out->beta[lo];
      continue;
    }
    guint hi = fitted[f + 1];
    double u = (double)(k - lo) / (hi - lo);
    out->alpha[k] = (1 - u) * out->alpha[lo] + u * out->alpha[hi];
    out->beta[k] = (1 - u) * out->beta[lo] + u * out->beta[hi];
  }
  g_free(x);
  g_free(y);
  g_free(w);
  g_free(fitted);
  g_array_free(pts, TRUE);
  gboolean finite = TRUE;
  for (guint k = 0; k <= n; k++)
    finite = finite && isfinite(out->alpha[k] + out->beta[k]);
  if (!finite) {
    g_set_error(error, MODEL_SLICING_ERROR, MODEL_SLICING_ERROR_FIT,
                "the context-cost fit failed (a slice cost is not finite)");
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

/* Per-slice values of a slicing, in sequence order. */
static void slice_values(const ModelPipeCost *pc, const guint *len, guint n_slices, double *c, double *u, double *h,
                         double *share) {
  guint start = 0;
  for (guint m = 0; m < n_slices; m++) {
    share[m] = pc->share ? pc->share(len[m], start, pc->data) : 0.5;
    c[m] = pc->last(len[m], start, pc->data);
    u[m] = pc->cell ? pc->cell(len[m], start, pc->data) : c[m];
    h[m] = pc->hop ? pc->hop(len[m], start, pc->data) : 0;
    start += len[m];
  }
}

/* The critical path of the token pipeline, slices 1..M on K - 1 cells of
 * time u_m, each followed by a hop h_m, then the last cell of time c_m.  In
 * this flow shop the longest path runs along the first cells and hops with
 * slices 1..m, down to the last cell with slice m, then along it for slices
 * m..M; bounding its repeated stage visits by the largest slice so far:
 *     max_m  u_1 + ... + u_m + (K - 2) max(u_1..u_m) + (K - 1) max(h_1..h_m)
 *            + c_m + ... + c_M.
 * The backward runs the slices in reverse from the last cell down and gives
 * the same expression, so fwd + bwd values are scored together. */
static double path_of(const double *c, const double *u, const double *h, guint M, guint K) {
  double tail = 0, best = 0, prefix = 0, umax = 0, hmax = 0;
  if (K < 2) {
    for (guint m = 0; m < M; m++)
      tail += c[m];
    return tail;
  }
  /* The pacing stage of a slice is the last cell or, on a slow network, a
   * hop: the path runs along whichever is slower. */
  for (guint m = 0; m < M; m++)
    tail += MAX(c[m], h[m]);
  for (guint m = 0; m < M; m++) {
    prefix += MAX(u[m], h[m]);
    umax = MAX(umax, u[m]);
    hmax = MAX(hmax, h[m]);
    best = MAX(best, prefix + (K - 2.0) * umax + (K - 1.0) * hmax + tail - MAX(u[m], h[m]) + u[m]);
    tail -= MAX(c[m], h[m]);
  }
  return best;
}

/* With `share` (the forward's part of each slice's time, NULL: none) the
 * forward and the backward are scored apart -- a hop may pace one and not
 * the other -- the backward by the same expression (a flow shop run
 * backwards in time, its slices reversed, is the forward one). */
static double score(const ModelPipeCost *pc, const double *c, const double *u, const double *h, const double *share,
                    guint M, guint K) {
  if (pc->path && share) {
    double *v = g_new(double, 3 * (gsize)M), T = 0;
    for (int bwd = 0; bwd < 2; bwd++) {
      for (guint m = 0; m < M; m++) {
        double f = bwd ? 1 - share[m] : share[m];
        v[m] = c[m] * f;
        v[M + m] = u[m] * f;
        v[2 * M + m] = h[m] / 2; /* the same tensor each way */
      }
      T += path_of(v, v + M, v + 2 * M, M, K);
    }
    g_free(v);
    return T;
  }
  if (pc->path)
    return path_of(c, u, h, M, K);
  double sum = 0, worst = 0;
  for (guint m = 0; m < M; m++) {
    sum += c[m];
    worst = MAX(worst, u[m] + h[m]);
  }
  return sum + (K - 1.0) * worst;
}

double model_slicing_score(const guint *len, guint n_slices, guint K, const ModelPipeCost *pc) {
  guint M = MAX(1u, n_slices);
  double *c = g_new(double, M), *u = g_new(double, M), *h = g_new(double, M), *f = g_new(double, M);
  slice_values(pc, len, n_slices, c, u, h, f);
  double T = score(pc, c, u, h, pc->share ? f : NULL, n_slices, K);
  g_free(f);
  g_free(c);
  g_free(u);
  g_free(h);
  return T;
}

double model_slicing_objective(const guint *len, guint n_slices, guint K, ModelSliceFn fn, gpointer data) {
  ModelPipeCost pc = {fn, NULL, NULL, NULL, data, FALSE};
  return model_slicing_score(len, n_slices, K, &pc);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Sorts a[0..n) ascending: a least-significant-digit radix sort of the
 * values' bit patterns, mapped so that unsigned order is numeric order
 * (negatives' bits flipped, the sign bit set on the rest), eight passes of
 * a byte, a pass skipped where every value has the same byte.  No NaN or
 * negative zero (Sorted sends those to qsort). */
static void radix_sort(double *a, gsize n) {
  const guint64 sign = G_GUINT64_CONSTANT(1) << 63;
  if (n < 2)
    return;
  gsize *count = g_new0(gsize, 8 * 256); /* per byte d, per value v: count[256 * d + v] */
  for (gsize i = 0; i < n; i++) {
    guint64 u;
    memcpy(&u, &a[i], sizeof u);
    u = u & sign ? ~u : u | sign;
    memcpy(&a[i], &u, sizeof u); /* the key, in place */
    for (guint d = 0; d < 8; d++)
      count[256 * d + ((u >> (8 * d)) & 0xff)]++;
  }
  double *tmp = g_new(double, n), *from = a, *to = tmp;
  for (guint d = 0; d < 8; d++) {
    guint64 u0;
    memcpy(&u0, &from[0], sizeof u0);
    if (count[256 * d + ((u0 >> (8 * d)) & 0xff)] == n)
      continue; /* one byte value throughout: the order stands */
    gsize at = 0;
    for (guint v = 0; v < 256; v++) {
      gsize c = count[256 * d + v];
      count[256 * d + v] = at;
      at += c;
    }
    for (gsize i = 0; i < n; i++) {
      guint64 u;
      memcpy(&u, &from[i], sizeof u);
      memcpy(&to[count[256 * d + ((u >> (8 * d)) & 0xff)]++], &u, sizeof u);
    }
    double *x = from;
    from = to;
    to = x;
  }
  for (gsize i = 0; i < n; i++) {
    guint64 u;
    memcpy(&u, &from[i], sizeof u);
    u = u & sign ? u & ~sign : ~u;
    memcpy(&a[i], &u, sizeof u);
  }
  g_free(tmp);
  g_free(count);
}

static void swap_d(double *a, gsize i, gsize j) {
  double t = a[i];
  a[i] = a[j];
  a[j] = t;
}

/* Rearranges a[0..n) so that a[0..k) holds its k smallest values (in any
 * order): quickselect with a median-of-three pivot and a three-way
 * partition (runs of equal values cost one pass); past a depth of 64 the
 * range left is sorted outright. */
static void select_smallest(double *a, gsize n, gsize k) {
  gsize lo = 0, hi = n;
  for (guint depth = 0; hi - lo > 16 && k > lo && k < hi; depth++) {
    if (depth == 64) {
      radix_sort(a + lo, hi - lo);
      return;
    }
    double x = a[lo], y = a[lo + (hi - lo) / 2], z = a[hi - 1];
    double p = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
    gsize lt = lo, i = lo, gt = hi; /* [lo, lt) < p, [lt, i) == p, [gt, hi) > p */
    while (i < gt) {
      if (a[i] < p)
        swap_d(a, lt++, i++);
      else if (a[i] > p)
        swap_d(a, i, --gt);
      else
        i++;
    }
    if (k < lt)
      hi = lt;
    else if (k > gt)
      lo = gt;
    else
      return; /* the cut falls among the pivot's equals */
  }
  if (k > lo && k < hi)
    radix_sort(a + lo, hi - lo);
}

/* A list of candidates read in ascending order, sorted as far as read:
 * the DP stops long before the end of its millions of candidates, so
 * chunks of the smallest values left are selected and sorted as reading
 * reaches them.  The values read are those of qsort with cmp_double on the
 * whole list; a NaN or a negative zero (whose order among equals qsort
 * leaves to its input) sends the whole list to qsort at once. */
typedef struct {
  double *a;
  gsize n, ready; /* a[0..ready) sorted, none larger than the rest */
} Sorted;

static void sorted_init(Sorted *s, double *a, gsize n) {
  const guint64 neg_zero = G_GUINT64_CONSTANT(1) << 63;
  *s = (Sorted){a, n, 0};
  for (gsize i = 0; i < n; i++) {
    guint64 u;
    memcpy(&u, &a[i], sizeof u);
    if (isnan(a[i]) || u == neg_zero) {
      qsort(a, n, sizeof(double), cmp_double);
      s->ready = n;
      return;
    }
  }
}

static double sorted_at(Sorted *s, gsize i) {
  if (i >= s->ready) {
    gsize k = MIN(s->n, MAX(i + 1, s->ready + MAX(s->n / 16, (gsize)4096)));
    select_smallest(s->a + s->ready, s->n - s->ready, k - s->ready);
    radix_sort(s->a + s->ready, k - s->ready);
    s->ready = k;
  }
  return s->a[i];
}

void model_token_dp(guint n, guint K, double eps_s, ModelSliceFn fn, gpointer data, ModelSlicing *out) {
  ModelPipeCost pc = {fn, NULL, NULL, NULL, data, FALSE};
  model_token_dp_pipe(n, K, eps_s, &pc, out);
}

void model_token_dp_pipe(guint n, guint K, double eps_s, const ModelPipeCost *pc, ModelSlicing *out) {
  memset(out, 0, sizeof *out);
  out->T = INFINITY;
  if (n == 0)
    return;
  /* The cost tables, row `start` holding lengths 1..n-start: c (summed),
   * u and h, and the bound d = u + h that the candidate t_max limits. */
  gsize *row = g_new(gsize, n + 1);
  gsize cells = 0;
  for (guint p = 0; p < n; p++) {
    row[p] = cells;
    cells += n - p;
  }
  double *cost = g_new(double, cells), *cu = g_new(double, cells), *ch = g_new(double, cells);
  double *cf = pc->share ? g_new(double, cells) : NULL;
  double *bound = g_new(double, cells);
  gboolean *mono = g_new(gboolean, n);
  for (guint p = 0; p < n; p++) {
    mono[p] = TRUE;
    for (guint l = 1; l <= n - p; l++) {
      gsize at = row[p] + l - 1;
      cost[at] = pc->last(l, p, pc->data);
      cu[at] = pc->cell ? pc->cell(l, p, pc->data) : cost[at];
      ch[at] = pc->hop ? pc->hop(l, p, pc->data) : 0;
      if (cf)
        cf[at] = pc->share(l, p, pc->data);
      bound[at] = cu[at] + ch[at];
      if (l > 1 && l < n - p && bound[at] < bound[at - 1])
        mono[p] = FALSE;
    }
  }
  double *cand = g_memdup2(bound, cells * sizeof(double));
  Sorted sorted;
  sorted_init(&sorted, cand, cells);
  /* Algorithm 1 proper (t_m = u_m = c_m, no hops): an optimum whose largest
   * slice costs t_max has T >= K t_max.  Otherwise T >= (K - 1) t_max. */
  gboolean plain = !pc->cell && !pc->hop && !pc->path;

  double *S = g_new(double, n + 1);
  guint *choice = g_new(guint, n + 1);
  guint *best_len = g_new(guint, n);
  double *vc = g_new(double, n), *vu = g_new(double, n), *vh = g_new(double, n), *vf = g_new(double, n);
  /* With path scoring a second family of candidates caps each slice's own
   * term of the critical path, (K - 1) d - (the last cell's lead over the
   * others accumulated before the slice), the lead estimated as alpha per
   * granule of the whole sequence's: early slices fill the pipeline and
   * matter more than late ones once the last cell paces it. */
  double *cap = bound, *cap2 = NULL;
  if (pc->path && K > 1) {
    double alpha = MAX(0.0, (cost[row[0] + n - 1] - cu[row[0] + n - 1]) / n);
    cap2 = g_new(double, cells);
    for (guint p = 0; p < n; p++)
      for (guint l = 1; l <= n - p; l++)
        cap2[row[p] + l - 1] = (K - 1.0) * bound[row[p] + l - 1] - alpha * p;
  }
  for (guint family = 0; family < (cap2 ? 2u : 1u); family++) {
    if (family == 1) {
      cap = cap2;
      memcpy(cand, cap2, cells * sizeof(double));
      sorted_init(&sorted, cand, cells);
    }
    double last = -INFINITY, eps = family ? (K - 1.0) * eps_s : eps_s;
    for (gsize ci = 0; ci < cells; ci++) {
      double tmax = sorted_at(&sorted, ci);
      if (ci > 0 && tmax == cand[ci - 1])
        continue;
      if (tmax < last + eps)
        continue; /* acceleration 1: t_max within eps of the last one solved */
      /* acceleration 2: no slicing with this largest slice can win (the
       * critical path is at least (K - 1) d of every slice, so at least
       * the second family's cap too) */
      if (out->n_slices && (family ? 1.0 : plain ? K : K - 1.0) * tmax >= out->T)
        break;
      last = tmax;
      out->candidates_solved++;
      S[0] = 0;
      for (guint i = 1; i <= n; i++)
        S[i] = INFINITY;
      for (guint p = 0; p < n; p++) {
        if (S[p] == INFINITY)
          continue;
        const double *c = cost + row[p], *d = cap + row[p];
        for (guint l = 1; l <= n - p; l++) {
          if (d[l - 1] > tmax) {
            if (mono[p]) /* none longer but the rest of the sequence, which the last slice's cost is */
              l = MAX(l, n - p - 1);
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
      /* Backtrack, then score the slicing itself (its actual largest
       * slice, or its critical path). */
      guint m = 0;
      for (guint i = n; i > 0; i -= choice[i])
        best_len[m++] = choice[i];
      double worst = 0;
      for (guint i = n, k = 0; k < m; k++) {
        gsize at = row[i - best_len[k]] + best_len[k] - 1;
        worst = MAX(worst, bound[at]);
        vc[m - 1 - k] = cost[at]; /* in sequence order */
        vu[m - 1 - k] = cu[at];
        vh[m - 1 - k] = ch[at];
        vf[m - 1 - k] = cf ? cf[at] : 0.5;
        i -= best_len[k];
      }
      double T = score(pc, vc, vu, vh, cf ? vf : NULL, m, K);
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
  }
  g_free(cap2);
  /* Path scoring is not solved exactly by the two families above, so the
   * uniform slicings (M slices a granule apart at most, the longer first)
   * are candidates too: the answer is never worse under the score than
   * any of them. */
  for (guint M = 1; pc->path && M <= n; M++) {
    for (guint k = 0, start = 0; k < M; k++) {
      guint l = n / M + (k < n % M ? 1 : 0);
      gsize at = row[start] + l - 1;
      best_len[k] = l;
      vc[k] = cost[at];
      vu[k] = cu[at];
      vh[k] = ch[at];
      vf[k] = cf ? cf[at] : 0.5;
      start += l;
    }
    double T = score(pc, vc, vu, vh, cf ? vf : NULL, M, K);
    if (T < out->T) {
      double worst = 0;
      for (guint k = 0, start = 0; k < M; k++) {
        worst = MAX(worst, bound[row[start] + best_len[k] - 1]);
        start += best_len[k];
      }
      out->T = T;
      out->t_max = worst;
      g_free(out->len);
      out->len = g_memdup2(best_len, M * sizeof(guint));
      out->n_slices = M;
    }
  }
  g_free(S);
  g_free(choice);
  g_free(best_len);
  g_free(vc);
  g_free(vu);
  g_free(vh);
  g_free(vf);
  g_free(cf);
  g_free(cand);
  g_free(cost);
  g_free(cu);
  g_free(ch);
  g_free(bound);
  g_free(mono);
  g_free(row);
}

/* One batch size's cost tables (rows as in model_token_dp_pipe). */
typedef struct {
  gsize *row;
  double *cost, *bound;
  gboolean *mono;
} SizeTables;

static void size_tables(guint n, const ModelPipeCost *pc, SizeTables *t) {
  gsize cells = 0;
  t->row = g_new(gsize, n + 1);
  for (guint p = 0; p < n; p++) {
    t->row[p] = cells;
    cells += n - p;
  }
  t->row[n] = cells;
  t->cost = g_new(double, MAX(cells, 1));
  t->bound = g_new(double, MAX(cells, 1));
  t->mono = g_new(gboolean, MAX(n, 1));
  for (guint p = 0; p < n; p++) {
    t->mono[p] = TRUE;
    for (guint l = 1; l <= n - p; l++) {
      gsize at = t->row[p] + l - 1;
      double c = pc->last(l, p, pc->data);
      double u = pc->cell ? pc->cell(l, p, pc->data) : c;
      double h = pc->hop ? pc->hop(l, p, pc->data) : 0;
      t->cost[at] = c;
      t->bound[at] = u + h;
      if (l > 1 && l < n - p && t->bound[at] < t->bound[at - 1])
        t->mono[p] = FALSE;
    }
  }
}

static void size_tables_clear(SizeTables *t) {
  g_free(t->row);
  g_free(t->cost);
  g_free(t->bound);
  g_free(t->mono);
}

/* S(tmax): the least sum of c over slicings of n positions whose every
 * slice has d <= tmax (INFINITY if none); `choice` for the backtrack. */
static double bounded_sum(const SizeTables *t, guint n, double tmax, double *S, guint *choice) {
  S[0] = 0;
  for (guint i = 1; i <= n; i++)
    S[i] = INFINITY;
  for (guint p = 0; p < n; p++) {
    if (S[p] == INFINITY)
      continue;
    const double *c = t->cost + t->row[p], *d = t->bound + t->row[p];
    for (guint l = 1; l <= n - p; l++) {
      if (d[l - 1] > tmax) {
        if (t->mono[p]) /* none longer but the rest of the sequence, which the last slice's cost is */
          l = MAX(l, n - p - 1);
        continue;
      }
      double v = S[p] + c[l - 1];
      if (v < S[p + l]) {
        S[p + l] = v;
        choice[p + l] = l;
      }
    }
  }
  return S[n];
}

/* The least sum over batch partitions of B given each size's sum (a 1-D
 * knapsack); `pick[x]` the size taken last for x sequences. */
static double knapsack(const double *sum_b, guint B, double *best, guint *pick) {
  best[0] = 0;
  for (guint x = 1; x <= B; x++) {
    best[x] = INFINITY;
    for (guint b = 1; b <= x; b++)
      if (best[x - b] + sum_b[b - 1] < best[x]) {
        best[x] = best[x - b] + sum_b[b - 1];
        pick[x] = b;
      }
  }
  return best[B];
}

void model_joint_slicing(guint B, guint n, guint K, double eps_s, const ModelPipeCost *per_b, GArray *batch,
                         GPtrArray *tokens, ModelJointSlicing *out) {
  memset(out, 0, sizeof *out);
  out->J = INFINITY;
  g_array_set_size(batch, 0);
  g_ptr_array_set_size(tokens, 0);
  if (B == 0 || n == 0)
    return;
  SizeTables *tab = g_new(SizeTables, B);
  gsize cells = (gsize)n * (n + 1) / 2;
  double *cand = g_new(double, cells * B);
  for (guint b = 0; b < B; b++) {
    size_tables(n, &per_b[b], &tab[b]);
    memcpy(cand + cells * b, tab[b].bound, cells * sizeof(double));
  }
  Sorted sorted;
  sorted_init(&sorted, cand, cells * B);
  double *S = g_new(double, n + 1), *sum_b = g_new(double, B), *best = g_new(double, B + 1);
  guint *choice = g_new(guint, n + 1), *pick = g_new(guint, B + 1);
  /* The unbounded optimum: a lower bound of the summed part at any t_max. */
  for (guint b = 0; b < B; b++)
    sum_b[b] = bounded_sum(&tab[b], n, INFINITY, S, choice);
  double floor_sum = knapsack(sum_b, B, best, pick);
  double last = -INFINITY, best_t = 0;
  for (gsize ci = 0; ci < cells * B; ci++) {
    double tmax = sorted_at(&sorted, ci);
    if ((ci > 0 && tmax == cand[ci - 1]) || tmax < last + eps_s)
      continue;
    if ((K - 1.0) * tmax + floor_sum >= out->J)
      break; /* no larger bound can win */
    last = tmax;
    out->candidates_solved++;
    for (guint b = 0; b < B; b++)
      sum_b[b] = bounded_sum(&tab[b], n, tmax, S, choice);
    double J = knapsack(sum_b, B, best, pick) + (K - 1.0) * tmax;
    if (J < out->J) {
      out->J = J;
      best_t = tmax;
    }
  }
  if (isfinite(out->J)) {
    /* Rebuild the answer at its bound: the partition, then each size's
     * slicing; its actual largest d. */
    for (guint b = 0; b < B; b++)
      sum_b[b] = bounded_sum(&tab[b], n, best_t, S, choice);
    double total = knapsack(sum_b, B, best, pick);
    for (guint x = B; x > 0; x -= pick[x])
      g_array_append_val(batch, pick[x]);
    /* largest first, so equal sizes sit together */
    for (guint i = 1; i < batch->len; i++)
      for (guint j = i; j > 0 && g_array_index(batch, guint, j) > g_array_index(batch, guint, j - 1); j--) {
        guint tmp = g_array_index(batch, guint, j);
        g_array_index(batch, guint, j) = g_array_index(batch, guint, j - 1);
        g_array_index(batch, guint, j - 1) = tmp;
      }
    for (guint k = 0; k < batch->len; k++) {
      const SizeTables *t = &tab[g_array_index(batch, guint, k) - 1];
      bounded_sum(t, n, best_t, S, choice);
      GArray *len = g_array_new(FALSE, FALSE, sizeof(guint));
      for (guint i = n; i > 0; i -= choice[i])
        g_array_prepend_val(len, choice[i]);
      for (guint m = 0, p = 0; m < len->len; m++) {
        guint l = g_array_index(len, guint, m);
        out->t_max = fmax(out->t_max, t->bound[t->row[p] + l - 1]);
        p += l;
      }
      g_ptr_array_add(tokens, len);
    }
    out->J = total + (K - 1.0) * out->t_max; /* its own largest d, at most the bound */
  }
  for (guint b = 0; b < B; b++)
    size_tables_clear(&tab[b]);
  g_free(tab);
  g_free(cand);
  g_free(S);
  g_free(sum_b);
  g_free(best);
  g_free(choice);
  g_free(pick);
}
