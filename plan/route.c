/* ptdsim — a plan's pipeline route (see route.h). */
#include "route.h"

guint sim_plan_zb_limit(const SimPlan *plan) {
  guint k = sim_schedule_info(plan->schedule)->limit_p;
  return k ? k * plan->pp : plan->activation_limit_mbs;
}

/* A plan's order on one stage: its built-in schedule for m microbatches,
 * or its --schedule-file (ZB's heuristics need the stages' times). */
static void plan_order(const SimPlan *plan, guint m, guint stage, GArray *out) {
  if (plan->schedule_file) {
    const GArray *o = plan->schedule_file->orders[stage];
    g_array_set_size(out, 0);
    g_array_append_vals(out, o->data, o->len);
    return;
  }
  sim_schedule_order(plan->schedule, plan->pp, m, plan->chunks, stage, out);
}

/* Megatron-Core's EP all-to-all overlap (--overlap-moe-expert-parallel-
 * comm; pipeline_parallel/combined_1f1b.py): in the 1F1B steady state a
 * forward runs together with the backward after it, each one's token
 * dispatch and combine behind the other's compute.  A forward is paired
 * only with the backward of another microbatch (its own needs it done:
 * the interleaved schedule's warm-up puts other microbatches' backwards
 * there, which is why Megatron-Core asks for virtual stages with p > 1).
 * Without a pipeline the forward of microbatch i + 1 goes before the
 * backward of i and runs with it. */
static void pair_steady(GArray *order, gboolean one_stage) {
  if (one_stage)
    for (guint j = 1; j + 1 < order->len; j += 2) { /* F0 B0 F1 B1 ... -> F0 F1 B0 F2 B1 ... */
      SimItem *a = &g_array_index(order, SimItem, j), *b = &g_array_index(order, SimItem, j + 1);
      if (a->forward || !b->forward)
        break;
      SimItem t = *a;
      *a = *b;
      *b = t;
    }
  for (guint j = 0; j + 1 < order->len; j++) {
    SimItem *f = &g_array_index(order, SimItem, j), *b = &g_array_index(order, SimItem, j + 1);
    if (f->forward && !b->forward && b->grad != SIM_GRAD_WEIGHT && b->microbatch != f->microbatch) {
      f->paired = 1;
      j++;
    }
  }
}

void sim_plan_orders_timed(const SimPlan *plan, guint m, const double *tf, const double *tb, const double *tw,
                           double tc, double mem_f, double mem_w, GArray **orders) {
  guint p = plan->pp;
  if (sim_schedule_info(plan->schedule)->timed) {
    sim_schedule_zb_auto(p, m, tf, tb, tw, tc, mem_f, mem_w, sim_plan_zb_limit(plan), orders);
    return;
  }
  for (guint s = 0; s < p; s++) {
    plan_order(plan, m, s, orders[s]);
    if (plan->moe_a2a_overlap)
      pair_steady(orders[s], p == 1);
  }
}

guint sim_plan_route_len(const SimPlan *plan) {
  return sim_schedule_info(plan->schedule)->route_len(plan->pp, plan->chunks);
}

guint sim_plan_vstage(const SimPlan *pl, guint s, guint c, guint mb) {
  if (pl->schedule_file)
    return pl->schedule_file->stage_of[s * pl->chunks + c];
  return sim_schedule_info(pl->schedule)->vstage(pl->pp, pl->chunks, pl->microbatches, s, c, mb);
}

void sim_plan_place(const SimPlan *pl, guint vs, guint mb, guint *s, guint *c) {
  if (pl->schedule_file) {
    *s = pl->schedule_file->rank_of[vs];
    *c = pl->schedule_file->chunk_of[vs];
    return;
  }
  sim_schedule_info(pl->schedule)->place(pl->pp, pl->chunks, pl->microbatches, vs, mb, s, c);
}

char *sim_schedule_csv_orders(const SimPlan *plan, GArray *const *orders) {
  GString *s = g_string_new(NULL);
  for (guint r = 0; r < plan->pp; r++) {
    const GArray *order = orders[r];
    for (guint j = 0; j < order->len; j++) {
      SimItem it = g_array_index(order, SimItem, j);
      gboolean pair = it.paired && j + 1 < order->len;
      if (j)
        g_string_append_c(s, ',');
      if (pair)
        g_string_append_c(s, '(');
      for (guint q = j; q <= j + (pair ? 1 : 0); q++) {
        SimItem x = g_array_index(order, SimItem, q);
        char kind = x.forward ? 'F' : x.grad == SIM_GRAD_INPUT ? 'I' : x.grad == SIM_GRAD_WEIGHT ? 'W' : 'B';
        g_string_append_printf(s, "%s%u%c%u", q > j ? ";" : "", sim_plan_vstage(plan, r, x.chunk, x.microbatch), kind,
                               x.microbatch);
      }
      if (pair) {
        g_string_append(s, ")OVERLAP_F_B");
        j++;
      }
    }
    g_string_append_c(s, '\n');
  }
  return g_string_free(s, FALSE);
}
