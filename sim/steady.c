/* ptdsim — the periodic steady state (steady.h). */
#include "steady.h"

#include <math.h>
#include <stdlib.h>

/* An edge of the graph as the engine times it: `u` ends before `v` starts. */
typedef struct {
  guint v, u;
} Pred;

static int pred_cmp(const void *a, const void *b) {
  const Pred *x = a, *y = b;
  if (x->v != y->v)
    return x->v < y->v ? -1 : 1;
  return x->u < y->u ? -1 : x->u > y->u;
}

static int guint_cmp(const void *a, const void *b) {
  guint x = *(const guint *)a, y = *(const guint *)b;
  return x < y ? -1 : x > y;
}

/* Calls `fn` on every predecessor edge: dependencies and stream order. */
typedef gboolean (*EdgeFn)(guint u, guint v, gpointer data);

static gboolean each_edge(const SimEngine *e, EdgeFn fn, gpointer data) {
  guint n_deps;
  const guint *deps = sim_engine_deps(e, &n_deps);
  for (guint j = 0; j < n_deps; j++)
    if (!fn(deps[2 * j], deps[2 * j + 1], data))
      return FALSE;
  for (guint s = 0; s < sim_engine_n_streams(e); s++) {
    guint n;
    const guint *ops = sim_engine_stream_ops(e, s, &n);
    for (guint j = 1; j < n; j++)
      if (!fn(ops[j - 1], ops[j], data))
        return FALSE;
  }
  return TRUE;
}

typedef struct {
  const SimEngine *e;
  SimTime tau, period;
  GArray *preds; /* Pred, for v starting in W0 or W1 */
  guint8 *far;   /* per op: 1 has a predecessor from before tau, 2 and that one does not set its start */
} Check;

/* An edge from before tau to an op from tau + P on, which the windows do
 * not see (condition 2). */
static gboolean is_far(const Check *c, SimTime su, SimTime sv) { return sv >= c->tau + c->period && su < c->tau; }

/* Condition 2, and the predecessors condition 3 compares. */
static gboolean edge_check(guint u, guint v, gpointer data) {
  Check *c = data;
  SimTime sv = sim_engine_op_start(c->e, v), su = sim_engine_op_start(c->e, u);
  if (sv >= c->tau && sv < c->tau + c->period && su < c->tau - c->period)
    return FALSE;
  if (is_far(c, su, sv)) {
    c->far[v] = 1;
    return TRUE;
  }
  if (sv >= c->tau && sv < c->tau + 2 * c->period) {
    Pred p = {v, u};
    g_array_append_val(c->preds, p);
  }
  return TRUE;
}

/* An op with a far predecessor starts when a near one ends. */
static gboolean near_sets_start(guint u, guint v, gpointer data) {
  Check *c = data;
  SimTime sv = sim_engine_op_start(c->e, v);
  if (c->far[v] && !is_far(c, sim_engine_op_start(c->e, u), sv) && sim_engine_op_end(c->e, u) == sv)
    c->far[v] = 2;
  return TRUE;
}

/* The predecessors of v: a run of the sorted list. */
static const Pred *preds_of(GArray *preds, guint v, guint *n) {
  guint lo = 0, hi = preds->len;
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    if (g_array_index(preds, Pred, mid).v < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  guint end = lo;
  while (end < preds->len && g_array_index(preds, Pred, end).v == v)
    end++;
  *n = end - lo;
  return &g_array_index(preds, Pred, lo);
}

gboolean sim_steady_prove(const SimEngine *e, const guint *next, SimTime tau, SimTime period,
                          gboolean (*same_kind)(const SimEngine *e, guint op, guint copy, gpointer data),
                          gpointer data, SimSteady *out) {
  if (period <= 0 || tau < period)
    return FALSE;
  guint n_ops = sim_engine_n_ops(e);
  guint8 *hit = g_new0(guint8, MAX(n_ops, 1));
  gboolean ok = TRUE;
  guint64 n_from = 0, n_to = 0, w0 = 0;
  for (guint op = 0; op < n_ops && ok; op++) {
    SimTime a = sim_engine_op_start(e, op), z = sim_engine_op_end(e, op);
    ok = a >= 0;
    /* condition 5 */
    if (sim_engine_op_is_net(e, op))
      ok = ok && (z <= tau - period || a >= tau + 2 * period);
    /* condition 4 */
    if (a < tau)
      ok = ok && z <= tau + period;
    else if (a < tau + period)
      ok = ok && z <= tau + 2 * period;
    n_to += a >= tau && a < tau + 2 * period;
    w0 += a >= tau && a < tau + period;
    if (!ok || a < tau - period || a >= tau + period)
      continue;
    /* condition 1 */
    n_from++;
    guint c = next[op];
    ok = c != G_MAXUINT && c < n_ops && !hit[c] && sim_engine_op_start(e, c) == a + period &&
         sim_engine_op_end(e, c) == z + period && sim_engine_op_n_streams(e, c) == sim_engine_op_n_streams(e, op);
    for (guint i = 0; ok && i < sim_engine_op_n_streams(e, op); i++)
      ok = sim_engine_op_streams(e, c)[i] == sim_engine_op_streams(e, op)[i];
    ok = ok && (!same_kind || same_kind(e, op, c, data));
    if (ok)
      hit[c] = 1;
  }
  g_free(hit);
  ok = ok && n_from == n_to && w0 > 0;

  Check chk = {e, tau, period, g_array_new(FALSE, FALSE, sizeof(Pred)), g_new0(guint8, MAX(n_ops, 1))};
  ok = ok && each_edge(e, edge_check, &chk) && each_edge(e, near_sets_start, &chk);
  for (guint op = 0; op < n_ops && ok; op++)
    ok = chk.far[op] != 1;
  g_free(chk.far);
  if (ok && chk.preds->len > 1)
    qsort(chk.preds->data, chk.preds->len, sizeof(Pred), pred_cmp);
  /* condition 3 */
  GArray *mine = g_array_new(FALSE, FALSE, sizeof(guint));
  for (guint j = 0; ok && j < chk.preds->len;) {
    guint v = g_array_index(chk.preds, Pred, j).v, n_v, n_c;
    const Pred *pv = preds_of(chk.preds, v, &n_v);
    j += n_v;
    if (sim_engine_op_start(e, v) >= tau + period)
      continue;
    const Pred *pc = preds_of(chk.preds, next[v], &n_c);
    ok = n_c == n_v;
    g_array_set_size(mine, 0);
    for (guint i = 0; ok && i < n_v; i++)
      g_array_append_val(mine, next[pv[i].u]);
    if (ok && n_v > 1)
      qsort(mine->data, n_v, sizeof(guint), guint_cmp);
    for (guint i = 0; ok && i < n_v; i++)
      ok = g_array_index(mine, guint, i) == pc[i].u;
  }
  /* an op of W0 with no predecessor would start at 0, not in W0 */
  g_array_free(mine, TRUE);
  g_array_free(chk.preds, TRUE);
  if (ok)
    *out = (SimSteady){0, tau, period, w0};
  return ok;
}

void sim_steady_w1(const SimSteady *st, SimTime a, SimTime b, SimTime *lo, SimTime *hi) {
  *lo = MAX(a, st->tau + st->period);
  *hi = MIN(b, st->tau + 2 * st->period);
}

/* Adding x > 0 to s >= x, s a multiple of u (its binade's spacing), while
 * s + x stays below the binade's top B: the sum rounds to the nearest
 * multiple of u, so it grows by the same c each time unless x's part below
 * u is exactly u/2 (a tie, which rounds to even and so alternates). */
double sim_steady_repeat_add(double x, guint64 n) {
  if (n == 0)
    return 0;
  double s = x; /* 0 + x */
  n--;
  while (n > 0) {
    int exp;
    frexp(s, &exp); /* s in [2^(exp-1), 2^exp) */
    double top = ldexp(1.0, exp), u = ldexp(1.0, exp - 53);
    double r = fmod(x, u);
    double c = x - r + (r > u / 2 ? u : 0);
    if (!(x > 0) || !isfinite(s) || r == u / 2 || top - s <= x) { /* one addition as it is */
      double t = s + x;
      if (t == s) /* x no longer moves the sum */
        return s;
      s = t;
      n--;
      continue;
    }
    if (c == 0)
      return s;
    /* steps j with top - (s + j c) > x: j < (top - s - x) / c */
    guint64 j = (guint64)floor((top - s - x) / c);
    while (j > 0 && !(top - (s + (double)j * c) > x))
      j--;
    while (top - (s + (double)(j + 1) * c) > x)
      j++;
    guint64 steps = MIN(n, j + 1); /* steps 0..j stay in the binade */
    s += (double)steps * c;
    n -= steps;
  }
  return s;
}

gboolean sim_steady_sum(const SimSteady *st, const SimEngine *e, const guint *ops, const double *vals,
                        const guint *counts, guint n, double *sum) {
  guint64 total = 0, extra = 0; /* values added, and how many of them W0's copies add */
  for (guint j = 0; j < n; j++) {
    guint64 c = counts ? counts[j] : 1;
    total += c;
    if (st && st->k > 0 && ops[j] != G_MAXUINT && sim_steady_in_w0(st, sim_engine_op_start(e, ops[j])))
      extra += c;
  }
  if (extra == 0) { /* nothing repeats: the short run's sequence */
    double s = 0;
    for (guint j = 0; j < n; j++)
      for (guint64 c = counts ? counts[j] : 1; c > 0; c--)
        s += vals[j];
    *sum = s;
    return TRUE;
  }
  gboolean same = TRUE, whole = TRUE;
  guint64 exact = 0;
  const guint64 limit = (guint64)1 << 53;
  for (guint j = 0; j < n; j++) {
    same = same && vals[j] == vals[0];
    whole = whole && vals[j] >= 0 && vals[j] < (double)limit && vals[j] == floor(vals[j]);
    if (!whole)
      continue;
    guint64 c = counts ? counts[j] : 1;
    guint64 times = c * (1 + (ops[j] != G_MAXUINT && sim_steady_in_w0(st, sim_engine_op_start(e, ops[j])) ? st->k : 0));
    guint64 v = (guint64)vals[j];
    whole = v == 0 || times <= (limit - exact) / v;
    exact += whole ? v * times : 0;
  }
  if (same) {
    *sum = sim_steady_repeat_add(vals[0], total + extra * st->k);
    return TRUE;
  }
  /* integers with every partial sum below 2^53 add exactly in any order */
  if (whole && exact < limit) {
    *sum = (double)exact;
    return TRUE;
  }
  return FALSE;
}
