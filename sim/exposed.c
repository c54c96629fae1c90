/* ptdsim — exposed time by class on a finished timeline (exposed.h). */
#include "exposed.h"

#include <stdlib.h>

#include "tags.h"

typedef struct {
  SimTime at;
  gint8 delta;
  guint8 cls;
} Edge;

static int edge_cmp(const void *a, const void *b) {
  const Edge *x = a, *y = b;
  return x->at < y->at ? -1 : x->at > y->at;
}

guint sim_exposed_class(guint category) {
  switch (category) {
  case SIM_CAT_COMPUTE:
    return SIM_CLS_COMPUTE;
  case SIM_CAT_TP:
  case SIM_CAT_CP: /* blocks the attention core as the tensor-parallel collectives block the layer */
    return SIM_CLS_TP;
  case SIM_CAT_OPTIMIZER:
    return SIM_CLS_OPT;
  case SIM_CAT_DP:
    return SIM_CLS_DP;
  default:
    return SIM_CLS_PP;
  }
}

GArray *sim_exposed_edges_new(void) { return g_array_new(FALSE, FALSE, sizeof(Edge)); }

void sim_exposed_add(GArray *edges, SimTime s0, SimTime s1, guint cls) {
  if (s1 <= s0)
    return;
  Edge a = {s0, 1, (guint8)cls}, z = {s1, -1, (guint8)cls};
  g_array_append_val(edges, a);
  g_array_append_val(edges, z);
}

void sim_exposed_add_op(GArray *edges, const SimEngine *e, guint op) {
  sim_exposed_add(edges, sim_engine_op_start(e, op), sim_engine_op_end(e, op),
                  sim_exposed_class(sim_engine_op_tag(e, op)->category));
}

void sim_exposed_split(GArray *edges, SimTime end, double out[SIM_N_CLS + 1]) {
  sim_exposed_split_steady(edges, end, NULL, out);
}

void sim_exposed_split_steady(GArray *edges, SimTime end, const SimSteady *st, double out[SIM_N_CLS + 1]) {
  if (edges->len > 1) /* an empty GArray has no data to sort */
    qsort(edges->data, edges->len, sizeof(Edge), edge_cmp);
  int active[SIM_N_CLS] = {0};
  SimTime at = 0, ns[SIM_N_CLS + 1] = {0}; /* integer sums: exact, then one conversion */
  for (guint j = 0; j <= edges->len; j++) {
    SimTime next = j < edges->len ? g_array_index(edges, Edge, j).at : end;
    if (next > at) {
      guint cls = SIM_N_CLS;
      for (guint c = 0; c < SIM_N_CLS; c++)
        if (active[c] > 0) {
          cls = c;
          break;
        }
      ns[cls] += next - at;
      if (st && st->k > 0) { /* W1's part, k more times (steady.h) */
        SimTime lo, hi;
        sim_steady_w1(st, at, next, &lo, &hi);
        if (hi > lo)
          ns[cls] += (SimTime)st->k * (hi - lo);
      }
      at = next;
    }
    if (j < edges->len) {
      const Edge *ed = &g_array_index(edges, Edge, j);
      active[ed->cls] += ed->delta;
    }
  }
  for (guint c = 0; c <= SIM_N_CLS; c++)
    out[c] = (double)ns[c] * 1e-9;
}

guint sim_exposed_busiest(const SimEngine *e, const guint *gpus, guint n, double *work, SimTime *flush) {
  return sim_exposed_busiest_steady(e, gpus, n, NULL, work, flush);
}

/* The length of [lo, hi) in the long run of `st` (steady.h). */
static SimTime covered(const SimSteady *st, SimTime lo, SimTime hi) {
  SimTime len = hi - lo;
  if (st && st->k > 0) {
    SimTime a, z;
    sim_steady_w1(st, lo, hi, &a, &z);
    if (z > a)
      len += (SimTime)st->k * (z - a);
  }
  return len;
}

guint sim_exposed_busiest_steady(const SimEngine *e, const guint *gpus, guint n, const SimSteady *st, double *work,
                                 SimTime *flush) {
  G_STATIC_ASSERT(SIM_STREAM_KINDS >= 2); /* kind 0: compute, kind 1: tensor-parallel */
  double best = -1;
  guint critical = 0;
  *flush = 0;
  for (guint s = 0; s < n; s++) {
    guint gpu = gpus ? gpus[s] : s;
    /* The union of the two streams' ops (communication overlapped with
     * compute counts once): each stream runs its ops one after another, so
     * merging the two in start order and extending the covered interval
     * walks them in order. */
    guint n_ops[2];
    const guint *ops[2];
    for (guint kind = 0; kind < 2; kind++)
      ops[kind] = sim_engine_stream_ops(e, gpu * SIM_STREAM_KINDS + kind, &n_ops[kind]);
    guint at[2] = {0, 0};
    SimTime busy = 0, lo = 0, hi = -1;
    for (;;) {
      for (guint kind = 0; kind < 2; kind++) /* the optimizer step is not pipeline work */
        while (at[kind] < n_ops[kind] &&
               sim_engine_op_tag(e, ops[kind][at[kind]])->category == SIM_CAT_OPTIMIZER)
          at[kind]++;
      gboolean more0 = at[0] < n_ops[0], more1 = at[1] < n_ops[1];
      if (!more0 && !more1)
        break;
      guint kind = !more0                                                                       ? 1
                   : !more1                                                                     ? 0
                   : sim_engine_op_start(e, ops[1][at[1]]) < sim_engine_op_start(e, ops[0][at[0]]) ? 1
                                                                                                 : 0;
      guint op = ops[kind][at[kind]++];
      SimTime a = sim_engine_op_start(e, op), z = sim_engine_op_end(e, op);
      /* in the long run, ops from W0 on end k periods later */
      *flush = MAX(*flush, st && st->k > 0 && a >= st->tau ? z + (SimTime)st->k * st->period : z);
      if (a > hi) { /* a new covered interval */
        if (hi > lo)
          busy += covered(st, lo, hi);
        lo = a;
        hi = z;
      } else
        hi = MAX(hi, z);
    }
    if (hi > lo)
      busy += covered(st, lo, hi);
    if ((double)busy > best) {
      best = (double)busy;
      critical = s;
    }
  }
  *work = best;
  return critical;
}
