/* ptdsim — ZB's automatic schedule: the heuristic of Qi et al., "Zero
 * Bubble Pipeline Parallelism" (ICLR 2024, section 3.1), as its authors'
 * code runs it (sail-sg/zero-bubble-pipeline-parallelism,
 * megatron/core/pipeline_parallel/auto_schedule.py: Graph.manual_order and
 * initial_solution, the heuristic search their efficiency.py prints the
 * paper's bubble rates with).  See schedule.h.
 *
 * The schedule is built a microbatch's backward at a time.  Round 0 puts
 * every stage's first F, then as many more F as fit before the first B
 * comes back down the pipeline (in memory, and strictly less on each later
 * stage), then every stage's first B, last stage first.  Each later round i
 * puts one more F on the stages that still owe some (a stage skips its F
 * where, with B first, the next stage would wait on it: the "prioritize B"
 * choice), then B(i) on every stage, last stage first.  Before an F or a B
 * whose input is not there yet, the stage runs the W it owes that fit in
 * the wait, and one more W where the wait is longer than the slack the
 * most idle stage allows (or always, the "no-bubble greedy" choice); W also
 * runs wherever memory is full.  Eight variants (bubble allowed before the
 * first B or not, prioritize B or not, greedy or not); the shortest longest
 * stage span (first F's start to last W's end) is kept, the first of equal
 * ones.  Times are whole nanoseconds so that ties compare as the
 * reference's whole microseconds do. */
#include "schedule.h"

#include <math.h>
#include <string.h>

enum { ZF, ZB, ZW };

typedef struct {
  guint p, m;
  gint64 *cost[3]; /* ns, per stage */
  gint64 comm;
  gint64 mem[3];   /* what an F, a B and a W add to a stage's activations (B and W: <= 0) */
  gint64 cap;      /* a stage's limit */
  gboolean early, prioritize_b, greedy;
  /* state */
  guint *n[3];
  gint64 *used, *end, *idle, *done[3]; /* done: [s * m + mb], -1 unset */
  GArray **orders;
} Zb;

static gint64 at(const Zb *z, int k, guint s, guint mb) {
  gint64 v = mb < z->m ? z->done[k][(gsize)s * z->m + mb] : -1;
  return v < 0 ? 0 : v; /* the reference reads a pass not yet placed as time 0 */
}

static gint64 max_idle(const Zb *z) {
  gint64 mx = 0;
  for (guint s = 0; s < z->p; s++)
    mx = MAX(mx, z->idle[s]);
  return mx;
}

/* Places stage j's next pass of kind k; FALSE where it cannot be (memory,
 * or a dependency not placed: the order would not run). */
static gboolean put(Zb *z, guint j, int k) {
  guint i = z->n[k][j], m = z->m;
  if (i >= m || z->used[j] + z->mem[k] > z->cap)
    return FALSE;
  gint64 c = z->cost[k][j], t = z->end[j] + c, no_wait = t;
  if (k == ZF && j > 0) {
    gint64 dep = z->done[ZF][(gsize)(j - 1) * m + i];
    if (dep < 0)
      return FALSE;
    t = MAX(t, dep + z->comm + c);
  } else if (k == ZB) {
    if (z->n[ZF][j] <= i)
      return FALSE;
    if (j + 1 < z->p) {
      gint64 dep = z->done[ZB][(gsize)(j + 1) * m + i];
      if (dep < 0)
        return FALSE;
      t = MAX(t, dep + z->comm + c);
    }
  } else if (k == ZW && z->n[ZB][j] <= i)
    return FALSE;
  if (z->n[ZF][j] > 0)
    z->idle[j] += t - no_wait;
  z->end[j] = t;
  z->done[k][(gsize)j * m + i] = t;
  z->used[j] += z->mem[k];
  z->n[k][j]++;
  SimItem it = {i, 0, (guint8)(k == ZF), (guint8)(k == ZF ? SIM_GRAD_ALL : k == ZB ? SIM_GRAD_INPUT : SIM_GRAD_WEIGHT),
                0};
  g_array_append_val(z->orders[j], it);
  return TRUE;
}

/* Before a pass of stage j whose input is ready at `ready`: the W owed that
 * fit in the wait, and one more where the wait is longer than the slack
 * (always, when greedy). */
static gboolean fill_wait(Zb *z, guint j, gint64 ready) {
  while (z->n[ZW][j] < z->n[ZB][j] && z->end[j] + z->cost[ZW][j] <= ready)
    if (!put(z, j, ZW))
      return FALSE;
  if (z->n[ZW][j] < z->n[ZB][j] && z->end[j] < ready &&
      (ready - z->end[j] > max_idle(z) - z->idle[j] || z->greedy))
    return put(z, j, ZW);
  return TRUE;
}

/* W until a pass adding `add` fits in stage j's memory. */
static gboolean make_room(Zb *z, guint j, gint64 add) {
  while (z->used[j] + add > z->cap)
    if (z->n[ZW][j] >= z->n[ZB][j] || !put(z, j, ZW))
      return FALSE;
  return TRUE;
}

static gboolean first_round(Zb *z, guint *req) {
  guint p = z->p, m = z->m;
  for (guint j = 0; j < p; j++)
    if (!put(z, j, ZF))
      return FALSE;
  /* how many more F each stage has time for before its first B can start */
  gint64 last = 0;
  for (guint j = p; j-- > 0;) {
    req[j] = 0;
    if (j == p - 1) {
      last = z->done[ZF][(gsize)j * m] + z->cost[ZB][j];
      continue;
    }
    gint64 mem = z->used[j], t = z->end[j];
    while (z->n[ZF][j] + req[j] < m && mem + z->mem[ZF] <= z->cap) {
      if (z->early ? t + z->cost[ZF][j] > last + z->comm : t >= last + z->comm)
        break;
      mem += z->mem[ZF];
      t += z->cost[ZF][j];
      req[j]++;
    }
    last = MAX(t, last + z->comm) + z->cost[ZB][j];
  }
  for (guint j = 1; j < p; j++) /* each stage fewer than the one before */
    while (req[j] > 0 && req[j] >= req[j - 1] && z->n[ZF][j] + req[j] < m)
      req[j]--;
  for (guint j = 0; j < p; j++)
    for (guint k = 0; k < req[j]; k++)
      if (!put(z, j, ZF))
        return FALSE;
  for (guint j = p; j-- > 0;)
    if (!put(z, j, ZB))
      return FALSE;
  return TRUE;
}

static gboolean round_i(Zb *z, guint i, guint *req) {
  guint p = z->p;
  for (guint j = 0; j < p; j++) {
    req[j] = 0;
    if (z->n[ZF][j] >= z->m)
      continue;
    if (z->prioritize_b && j + 1 < p && z->n[ZF][j] >= z->n[ZF][j + 1] + 2) {
      /* when the next stage's F and B would come before this F (and the W
       * it needs for room), this stage's F can wait */
      gint64 next = z->end[j + 1] + z->cost[ZF][j + 1] + z->cost[ZB][j + 1] + z->comm;
      if (z->end[j] >= next)
        continue;
      gint64 wc = 0, mem = z->used[j] + z->mem[ZF];
      for (guint c = 0; mem > z->cap && z->n[ZW][j] + c < z->n[ZB][j]; c++) {
        wc += z->cost[ZW][j];
        mem += z->mem[ZW];
      }
      if (z->end[j] + z->cost[ZF][j] + wc > next && next - z->end[j] <= max_idle(z) - z->idle[j])
        continue;
    }
    req[j] = 1;
  }
  for (guint j = p - 1; j-- > 0;) /* a stage runs an F only where the later stages do */
    req[j] = MIN(req[j], req[j + 1]);
  for (guint j = 0; j < p; j++) {
    if (!req[j])
      continue;
    if (!make_room(z, j, z->mem[ZF]) || (j > 0 && !fill_wait(z, j, at(z, ZF, j - 1, z->n[ZF][j]) + z->comm)) ||
        !put(z, j, ZF))
      return FALSE;
  }
  for (guint j = p; j-- > 0;) {
    if (z->n[ZB][j] != i || !make_room(z, j, z->mem[ZB]))
      return FALSE;
    if (j + 1 < p && !fill_wait(z, j, at(z, ZB, j + 1, i) + z->comm))
      return FALSE;
    if (j == 0 && z->n[ZF][j] == z->m)
      while (z->n[ZW][j] < z->n[ZB][j])
        if (!put(z, j, ZW))
          return FALSE;
    if (!put(z, j, ZB))
      return FALSE;
  }
  return TRUE;
}

/* One variant; its longest stage span in ns, or -1 where it does not fit. */
static gint64 variant(Zb *z) {
  guint p = z->p, m = z->m;
  for (int k = 0; k < 3; k++) {
    memset(z->n[k], 0, p * sizeof(guint));
    for (gsize x = 0; x < (gsize)p * m; x++)
      z->done[k][x] = -1;
  }
  for (guint s = 0; s < p; s++) {
    z->used[s] = z->end[s] = z->idle[s] = 0;
    g_array_set_size(z->orders[s], 0);
  }
  guint *req = g_new0(guint, p);
  gboolean ok = first_round(z, req);
  for (guint i = 1; ok && i < m; i++)
    ok = round_i(z, i, req);
  for (guint s = 0; ok && s < p; s++)
    while (ok && z->n[ZW][s] < m)
      ok = put(z, s, ZW);
  g_free(req);
  if (!ok)
    return -1;
  gint64 span = 0;
  for (guint s = 0; s < p; s++)
    span = MAX(span, z->done[ZW][(gsize)s * m + m - 1] - z->done[ZF][(gsize)s * m] + z->cost[ZF][s]);
  return span;
}

gboolean sim_schedule_zb_heuristic(guint p, guint m, const double *tf, const double *tb, const double *tw, double tc,
                                   double mem_f, double mem_w, guint limit, GArray **orders) {
  Zb z = {.p = p, .m = m, .comm = llround(tc * 1e9), .orders = g_new(GArray *, p)};
  const double *t[3] = {tf, tb, tw};
  for (int k = 0; k < 3; k++) {
    z.cost[k] = g_new(gint64, p);
    for (guint s = 0; s < p; s++)
      z.cost[k][s] = llround(t[k][s] * 1e9);
    z.n[k] = g_new(guint, p);
    z.done[k] = g_new(gint64, (gsize)p * m);
  }
  z.mem[ZF] = MAX(llround(mem_f), 1);
  z.mem[ZW] = -CLAMP(llround(mem_w), 0, z.mem[ZF]);
  z.mem[ZB] = -z.mem[ZF] - z.mem[ZW];
  limit = MAX(limit, 1u);
  z.cap = (gint64)limit > G_MAXINT64 / z.mem[ZF] ? G_MAXINT64 : (gint64)limit * z.mem[ZF];
  z.used = g_new(gint64, p);
  z.end = g_new(gint64, p);
  z.idle = g_new(gint64, p);
  for (guint s = 0; s < p; s++)
    z.orders[s] = g_array_new(FALSE, FALSE, sizeof(SimItem));
  gint64 best = -1;
  for (int v = 0; v < 8; v++) { /* the reference's loop order: early, prioritize B, greedy; True first */
    z.early = !(v & 4);
    z.prioritize_b = !(v & 2);
    z.greedy = !(v & 1);
    gint64 span = variant(&z);
    if (span >= 0 && (best < 0 || span < best)) {
      best = span;
      for (guint s = 0; s < p; s++) {
        g_array_set_size(orders[s], 0);
        g_array_append_vals(orders[s], z.orders[s]->data, z.orders[s]->len);
      }
    }
  }
  for (int k = 0; k < 3; k++) {
    g_free(z.cost[k]);
    g_free(z.n[k]);
    g_free(z.done[k]);
  }
  for (guint s = 0; s < p; s++)
    g_array_free(z.orders[s], TRUE);
  g_free(z.orders);
  g_free(z.used);
  g_free(z.end);
  g_free(z.idle);
  return best >= 0;
}
