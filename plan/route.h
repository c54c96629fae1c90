/* ptdsim — a plan's pipeline route: the orders its stages run (its
 * schedule's, its --schedule-file's, or ZB's heuristics for the stages'
 * times), the virtual stage each (stage, chunk) is for a microbatch and
 * back, and the orders written as torch.distributed.pipelining's CSV. */
#pragma once

#include "plan.h"

/* The heuristics' limit in microbatches: p (zb-1p), 2p (zb-2p), or what
 * --activation-limit allows (zb-auto). */
guint sim_plan_zb_limit(const SimPlan *plan);
/* All the stages' orders of a plan, the heuristics run with these per-stage
 * times (others ignore them). */
void sim_plan_orders_timed(const SimPlan *plan, guint m, const double *tf, const double *tb, const double *tw,
                           double tc, double mem_f, double mem_w, GArray **orders);
/* Virtual stages a microbatch passes through (v p; DualPipe: p). */
guint sim_plan_route_len(const SimPlan *plan);
/* The virtual stage that chunk c of stage s is for microbatch mb (its
 * position on the microbatch's route), and back: the stage and chunk of
 * virtual stage vs for microbatch mb.  G_MAXUINT where that chunk never
 * sees that microbatch (DualPipe's other direction). */
guint sim_plan_vstage(const SimPlan *plan, guint s, guint c, guint mb);
void sim_plan_place(const SimPlan *plan, guint vs, guint mb, guint *s, guint *c);
/* Per-rank orders as that CSV (--dump-schedule): one row per rank. */
char *sim_schedule_csv_orders(const SimPlan *plan, GArray *const *orders);
