/* ptdsim — the steady state of 1F1B and interleaved 1F1B on the PTD-P graph
 * (steady.h): the short run's microbatches, and the proof that its
 * timeline repeats (build.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"

/* --- the steady state (steady.h) --- */

/* Microbatches a schedule period adds (its row's period): 1F1B repeats
 * every microbatch, the interleaved schedule every p (its chunks take p
 * microbatches in turn). */
static guint steady_step(const SimPlan *pl) {
  return sim_schedule_info(pl->schedule)->period == SIM_PERIOD_ROUND ? pl->pp : 1;
}

/* Schedule periods the timeline may take to repeat.  Equal stages repeat
 * every period.  Unequal ones can settle into a pattern of two: the
 * slowest stages, equal among themselves, take turns to hold the others up,
 * so the pace alternates from one period to the next (seen on 1F1B with
 * lighter end stages); the short run of an uneven plan holds whole pairs of
 * periods, and the proof tries one period, then two. */
static guint steady_cycle(const SimPlan *pl) { return sim_plan_uneven(pl) ? 2 : 1; }

/* The microbatches of the short run for `pl`, or 0 to simulate the whole
 * iteration: the warm-up, a few periods in which the state can be seen to
 * repeat, and the cool-down, as many modulo the period as the plan has.
 * Not for --exact, traces (which show every op) or GPipe (whose forwards
 * and backwards are two phases, not one period). */
guint sim_ptdp_steady_short_m(const SimPlan *pl, gboolean traced) {
  /* not FSDP2 either: its per-block gathers are issued inside the items */
  if (pl->exact || traced || pl->pp < 2 || pl->stage_times || pl->fsdp ||
      sim_schedule_info(pl->schedule)->period == SIM_PERIOD_NONE)
    return 0; /* GPipe's two phases, and the schedules not proved here: every op simulated */
  guint step = steady_step(pl), cycle = steady_cycle(pl), m = pl->microbatches;
  /* 1F1B: the last stage's warm-up ends after p - 1 microbatches and the
   * first stage's after about 2 (p - 1) passes; interleaved, the first
   * stage warms up for 2 (p - 1) + (v - 1) p forward chunks, under two
   * periods of p v; then SIM_STEADY_PERIODS periods (of `cycle` each). */
  guint want = (step == 1 ? pl->pp : 2 * step) + SIM_STEADY_PERIODS * cycle * step;
  step *= cycle;
  guint short_m = want + (m % step + step - want % step) % step; /* = m modulo the step */
  /* worth a try only where it saves at least half: a proof that fails
   * (transfers meeting on the flows inside the period) costs the short run */
  return 2 * short_m <= m ? short_m : 0;
}

/* What steady_same_kind is handed: the PtdpBuild and the microbatches a
 * period moves on. */
typedef struct {
  const PtdpBuild *b;
  guint mb_step;
} Kind;

/* An op and its copy one period on do the same work: tags but the
 * microbatch, what a coarse op holds, the flow plan. */
static gboolean steady_same_kind(const SimEngine *e, guint op, guint copy, gpointer data) {
  const Kind *kd = data;
  const PtdpBuild *b = kd->b;
  const SimOpTag *t = sim_engine_op_tag(e, op), *u = sim_engine_op_tag(e, copy);
  if (t->category != u->category || t->pass != u->pass || t->stage != u->stage || t->chunk != u->chunk ||
      t->layer != u->layer || (gint64)u->microbatch != (gint64)t->microbatch + kd->mb_step)
    return FALSE;
  if (ptdp_tp_part_of(b, op) != ptdp_tp_part_of(b, copy) || ptdp_extra_of(b, op) != ptdp_extra_of(b, copy))
    return FALSE;
  if (b->flow) {
    double c_op = 0, c_copy = 0;
    const NetCollPlan *p_op = sim_netops_plan_of(b->flow->ops, op, &c_op);
    const NetCollPlan *p_copy = sim_netops_plan_of(b->flow->ops, copy, &c_copy);
    if (p_op != p_copy || c_op != c_copy)
      return FALSE;
  }
  return TRUE;
}

/* Proves the short run's steady state (steady.h) for a period of `q`
 * schedule periods: each item's ops have their copies in the item q
 * periods later in its stage's order, if that item is the same with the
 * microbatch q steps on; the window is tried a few periods into the first
 * stage's steady part.  Sets b->steady. */
static gboolean steady_find_q(PtdpBuild *b, guint q) {
  const SimPlan *pl = b->plan;
  guint step = steady_step(pl) * q, L = 2 * step * b->v; /* items per period on a stage */
  guint n_ops = sim_engine_n_ops(b->e);
  guint *next = g_new(guint, MAX(n_ops, 1));
  for (guint op = 0; op < n_ops; op++)
    next[op] = G_MAXUINT;
  for (guint k = 0; k < b->ds; k++)
    for (guint s = 0; s < b->p; s++)
      for (guint x = 0; x + L < b->n_items; x++) {
        SimItem a = g_array_index(b->order[s], SimItem, x), c = g_array_index(b->order[s], SimItem, x + L);
        if (a.chunk != c.chunk || a.forward != c.forward || c.microbatch != a.microbatch + step)
          continue;
        guint i = (k * b->p + s) * b->n_items + x, j = i + L;
        if (b->item_hi[i] - b->item_lo[i] == b->item_hi[j] - b->item_lo[j])
          for (guint o = 0; o < b->item_hi[i] - b->item_lo[i]; o++)
            next[b->item_lo[i] + o] = b->item_lo[j] + o;
        if (b->xfer_hi[i] - b->xfer_lo[i] == b->xfer_hi[j] - b->xfer_lo[j])
          for (guint o = 0; o < b->xfer_hi[i] - b->xfer_lo[i]; o++)
            next[b->xfer_lo[i] + o] = b->xfer_lo[j] + o;
      }
  guint first_bwd = 0;
  while (first_bwd < b->n_items && g_array_index(b->order[0], SimItem, first_bwd).forward)
    first_bwd++;
  Kind kd = {b, step};
  gboolean ok = FALSE;
  SimSteady st = {0};
  for (guint c = 1; c <= SIM_STEADY_PERIODS && !ok; c++) {
    guint x = first_bwd + c * L;
    if (x + L >= b->n_items)
      break;
    SimTime tau = sim_engine_op_start(b->e, b->item_lo[x]);
    SimTime period = sim_engine_op_start(b->e, b->item_lo[x + L]) - tau;
    ok = sim_steady_prove(b->e, next, tau, period, steady_same_kind, &kd, &st);
  }
  g_free(next);
  if (!ok)
    return FALSE;
  st.k = (pl->microbatches - b->m) / step;
  /* a long run past the longest time ptdsim represents is the whole run's error to report */
  if ((double)sim_engine_makespan(b->e) + (double)st.k * st.period > (double)SIM_TIME_MAX)
    return FALSE;
  b->steady = st;
  return TRUE;
}

/* The shortest period the short run proves (steady_cycle). */
gboolean sim_ptdp_steady_find(PtdpBuild *b) {
  for (guint q = 1; q <= steady_cycle(b->plan); q++)
    if (steady_find_q(b, q))
      return TRUE;
  return FALSE;
}
