/* ptdsim — a plan's pipeline route (see route.h). */
#include "route.h"

guint sim_plan_zb_limit(const SimPlan *plan) {
  switch (plan->schedule) {
  case SIM_SCHEDULE_ZB_1P:
    return plan->pp;
  case SIM_SCHEDULE_ZB_2P:
    return 2 * plan->pp;
  default:
    return plan->activation_limit_mbs;
  }
}

/* A plan's order on one stage: its built-in schedule for m microbatches,
 * or its --schedule-file (ZB's heuristics need the stages' times). */
static void plan_order(const SimPlan *plan, guint m, guint stage, GArray *out) {
  if (plan->schedule == SIM_SCHEDULE_FILE) {
    const GArray *o = plan->schedule_file->orders[stage];
    g_array_set_size(out, 0);
    g_array_append_vals(out, o->data, o->len);
    return;
  }
  sim_schedule_order(plan->schedule, plan->pp, m, plan->chunks, stage, out);
}

void sim_plan_orders_timed(const SimPlan *plan, guint m, const double *tf, const double *tb, const double *tw,
                           double tc, double mem_f, double mem_w, GArray **orders) {
  guint p = plan->pp;
  if (plan->schedule == SIM_SCHEDULE_ZB_1P || plan->schedule == SIM_SCHEDULE_ZB_2P ||
      plan->schedule == SIM_SCHEDULE_ZB_AUTO) {
    sim_schedule_zb_auto(p, m, tf, tb, tw, tc, mem_f, mem_w, sim_plan_zb_limit(plan), orders);
    return;
  }
  for (guint s = 0; s < p; s++)
    plan_order(plan, m, s, orders[s]);
}

guint sim_plan_route_len(const SimPlan *plan) {
  return plan->schedule == SIM_SCHEDULE_DUALPIPE ? plan->pp : plan->pp * plan->chunks;
}

guint sim_plan_vstage(const SimPlan *pl, guint s, guint c, guint mb) {
  guint p = pl->pp;
  switch (pl->schedule) {
  case SIM_SCHEDULE_ZB_V:
  case SIM_SCHEDULE_DUALPIPEV:
    return c == 0 ? s : 2 * p - 1 - s;
  case SIM_SCHEDULE_DUALPIPE:
    if ((mb >= pl->microbatches / 2) != (c == 1))
      return G_MAXUINT;
    return c == 0 ? s : p - 1 - s;
  case SIM_SCHEDULE_FILE:
    return pl->schedule_file->stage_of[s * pl->chunks + c];
  default:
    return c * p + s;
  }
}

void sim_plan_place(const SimPlan *pl, guint vs, guint mb, guint *s, guint *c) {
  guint p = pl->pp;
  switch (pl->schedule) {
  case SIM_SCHEDULE_ZB_V:
  case SIM_SCHEDULE_DUALPIPEV:
    *c = vs >= p;
    *s = vs < p ? vs : 2 * p - 1 - vs;
    return;
  case SIM_SCHEDULE_DUALPIPE:
    *c = mb >= pl->microbatches / 2;
    *s = *c ? p - 1 - vs : vs;
    return;
  case SIM_SCHEDULE_FILE:
    *s = pl->schedule_file->rank_of[vs];
    *c = pl->schedule_file->chunk_of[vs];
    return;
  default:
    *s = vs % p;
    *c = vs / p;
  }
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
