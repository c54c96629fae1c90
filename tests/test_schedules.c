/* ptdsim — tests of the pipeline schedules and of the PTD-P simulation:
 * schedule orders, bubble identities, symmetry, traffic volumes, FLOP
 * accounting, time breakdown and memory.  Every expected value is computed
 * here from the papers' formulas, never pasted from a run. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "../models/layer.h"
#include "../plan/plan.h"
#include "../schedule/schedule.h"
#include "../taskgraph/timeline.h"
#include "../zero/zero.h"
#include "../ptdp/ptdp.h"
#include "../plan/validate.h"
#include "../plan/route.h"

static TopoCluster *selene;
static ModelProfile *ideal, *a100;

/* --- helpers --- */

/* One configuration, as a test writes it; zero fields take defaults. */
typedef struct {
  guint layers, hidden, heads, seq, vocab;
  guint tp, pp, dp, b, m; /* m: microbatches per pipeline */
  guint chunks;           /* > 0 selects the interleaved schedule */
  const char *schedule;   /* NULL: 1f1b, or interleaved with chunks */
  const char *recompute;  /* NULL: full */
  const char *ddp;        /* NULL: local */
  gboolean no_sg, no_symmetry;
  SimSplit split; /* the pipeline split (all zero: even) */
} Cfg;

static char *cfg_text(const Cfg *c) {
  char *split = sim_split_options(&c->split);
  char *t = g_strdup_printf("l=%u h=%u a=%u s=%u V=%u t=%u p=%u d=%u b=%u m=%u v=%u %s recompute=%s ddp=%s%s%s%s%s",
                            c->layers, c->hidden, c->heads, c->seq, c->vocab, c->tp, c->pp, c->dp, c->b, c->m,
                            c->chunks, c->schedule ? c->schedule : (c->chunks ? "interleaved" : "1f1b"),
                            c->recompute ? c->recompute : "full", c->ddp ? c->ddp : "local", c->no_sg ? " no-sg" : "",
                            c->no_symmetry ? " no-symmetry" : "", *split ? " " : "", split);
  g_free(split);
  return t;
}

static void cfg_defaults(Cfg *c) {
  if (!c->hidden)
    c->hidden = 1024;
  if (!c->heads)
    c->heads = 16;
  if (!c->seq)
    c->seq = 256;
  if (!c->vocab)
    c->vocab = 51200;
  if (!c->tp)
    c->tp = 1;
  if (!c->pp)
    c->pp = 1;
  if (!c->dp)
    c->dp = 1;
  if (!c->b)
    c->b = 1;
  if (!c->layers)
    c->layers = 2 * c->pp * (c->chunks ? c->chunks : 1);
}

static void build_plan(Cfg *c, SimPlan *plan) {
  cfg_defaults(c);
  SimPlanRequest r = {0};
  r.model = (ModelShape){.layers = c->layers, .hidden = c->hidden, .heads = c->heads, .seq_len = c->seq, .vocab = c->vocab};
  r.tp = c->tp;
  r.pp = c->pp;
  r.dp = c->dp;
  r.gpus = c->tp * c->pp * c->dp;
  r.micro_batch = c->b;
  r.global_batch = c->m * c->b * c->dp;
  r.chunks = c->chunks;
  /* the test's words as the command line's edge reads them */
  int w;
  if (c->schedule) {
    g_assert_nonnull(sim_schedule_find(c->schedule));
    r.schedule = sim_schedule_find(c->schedule)->id;
    r.schedule_given = TRUE;
  }
  if (c->recompute) {
    g_assert_true(ptd_word_value(sim_recompute_words, c->recompute, &w));
    r.recompute = (ModelRecompute)w;
    r.recompute_given = TRUE;
  }
  if (c->ddp) {
    g_assert_true(ptd_word_value(sim_ddp_words, c->ddp, &w));
    r.ddp = (SimDdp)w;
    r.ddp_given = TRUE;
  }
  r.no_scatter_gather = c->no_sg;
  r.no_symmetry = c->no_symmetry;
  r.split = c->split;
  r.network = SIM_NETWORK_ANALYTIC; /* the engine's symmetry identity; flow mode has its own test (test_cli_network) */
  r.network_given = TRUE;
  r.allow_oom = TRUE;
  GError *error = NULL;
  gboolean ok = sim_plan_build(&r, selene, plan, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
  g_assert_cmpuint(plan->microbatches, ==, c->m);
}

static void run_cfg(Cfg *c, const ModelProfile *profile, SimPlan *plan, SimResult *r) {
  build_plan(c, plan);
  GError *error = NULL;
  gboolean ok = sim_ptdp_run(plan, profile, selene, r, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
}

/* Relative comparison that names the configuration when it fails and lets
 * the test go on, so one run shows every failing configuration. */
static void check_rel(const Cfg *c, const char *what, double got, double want, double tol) {
  if (fabs(got - want) <= tol * fabs(want))
    return;
  char *t = cfg_text(c);
  g_test_message("%s: got %.17g, want %.17g (rel err %.3g) [%s]", what, got, want,
                 want != 0 ? fabs(got - want) / fabs(want) : fabs(got), t);
  g_test_fail_printf("%s: got %.17g, want %.17g [%s]", what, got, want, t);
  g_free(t);
}

static void check_abs(const Cfg *c, const char *what, double got, double want, double tol) {
  if (fabs(got - want) <= tol)
    return;
  char *t = cfg_text(c);
  g_test_message("%s: got %.17g, want %.17g [%s]", what, got, want, t);
  g_test_fail_printf("%s: got %.17g, want %.17g [%s]", what, got, want, t);
  g_free(t);
}

static guint virtual_chunks(const Cfg *c) { return c->chunks ? c->chunks : 1; }

/* --- 1. schedule orders --- */

/* Checks the properties every schedule's order must have on one stage, and
 * returns the peak number of (chunk) forwards whose backward has not run. */
static guint check_order(SimSchedule sch, guint p, guint m, guint v, guint s, GArray *order) {
  g_assert_cmpuint(order->len, ==, 2 * m * v);
  gint *fpos = g_new(gint, m * v), *bpos = g_new(gint, m * v);
  for (guint j = 0; j < m * v; j++)
    fpos[j] = bpos[j] = -1;
  guint inflight = 0, peak = 0;
  for (guint j = 0; j < order->len; j++) {
    SimItem it = g_array_index(order, SimItem, j);
    g_assert_cmpuint(it.chunk, <, v);
    g_assert_cmpuint(it.microbatch, <, m);
    guint key = it.chunk * m + it.microbatch;
    if (it.forward) {
      g_assert_cmpint(fpos[key], ==, -1); /* each forward once */
      fpos[key] = (gint)j;
      inflight++;
    } else {
      g_assert_cmpint(bpos[key], ==, -1); /* each backward once */
      g_assert_cmpint(fpos[key], >=, 0);  /* after its own forward */
      bpos[key] = (gint)j;
      inflight--;
    }
    peak = MAX(peak, inflight);
    if (sch == SIM_SCHEDULE_1F1B)
      g_assert_cmpuint(inflight, <=, p - s); /* PipeDream-Flush: at most p - s in flight */
    if (sch == SIM_SCHEDULE_GPIPE)
      g_assert_cmpint(it.forward, ==, j < m); /* all forwards first */
  }
  for (guint key = 0; key < m * v; key++) {
    g_assert_cmpint(fpos[key], >=, 0);
    g_assert_cmpint(bpos[key], >=, 0);
  }
  /* A microbatch enters chunk c+1 of this stage only after chunk c (the
   * pipeline wraps around through the other stages), and leaves in reverse;
   * within a chunk, microbatches go first in, first out (SC21 figures 3
   * and 4 number the backward passes in forward order). */
  for (guint mb = 0; mb < m; mb++)
    for (guint c = 0; c + 1 < v; c++) {
      g_assert_cmpint(fpos[c * m + mb], <, fpos[(c + 1) * m + mb]);
      g_assert_cmpint(bpos[c * m + mb], >, bpos[(c + 1) * m + mb]);
    }
  for (guint c = 0; c < v; c++)
    for (guint mb = 0; mb + 1 < m; mb++) {
      g_assert_cmpint(fpos[c * m + mb], <, fpos[c * m + mb + 1]);
      g_assert_cmpint(bpos[c * m + mb], <, bpos[c * m + mb + 1]);
    }
  g_free(fpos);
  g_free(bpos);
  return peak;
}

/* Runs all stages' orders against the pipeline's data dependencies (forward
 * of virtual stage k needs k-1's forward, backward needs k+1's backward),
 * one item per stage per round: every schedule must finish, never deadlock. */
static void check_no_deadlock(SimSchedule sch, guint p, guint m, guint v) {
  GArray **orders = g_new(GArray *, p);
  for (guint s = 0; s < p; s++) {
    orders[s] = g_array_new(FALSE, FALSE, sizeof(SimItem));
    sim_schedule_order(sch, p, m, v, s, orders[s]);
  }
  /* done[(vs * m + mb) * 2 + fwd]: the round it finished, or G_MAXUINT */
  guint n = v * p * m * 2;
  guint *done = g_new(guint, n);
  for (guint j = 0; j < n; j++)
    done[j] = G_MAXUINT;
  guint *next = g_new0(guint, p);
  guint finished = 0;
  for (guint round = 0; finished < p; round++) {
    g_assert_cmpuint(round, <, 4 * n + 4); /* no progress: deadlock */
    for (guint s = 0; s < p; s++) {
      if (next[s] == orders[s]->len)
        continue;
      SimItem it = g_array_index(orders[s], SimItem, next[s]);
      guint vs = it.chunk * p + s;
      gboolean ready = TRUE;
      if (it.forward && vs > 0)
        ready = done[((vs - 1) * m + it.microbatch) * 2 + 1] < round;
      if (!it.forward && vs + 1 < v * p)
        ready = done[((vs + 1) * m + it.microbatch) * 2 + 0] < round;
      if (!ready)
        continue;
      done[(vs * m + it.microbatch) * 2 + it.forward] = round;
      if (++next[s] == orders[s]->len)
        finished++;
    }
  }
  for (guint s = 0; s < p; s++)
    g_array_free(orders[s], TRUE);
  g_free(orders);
  g_free(done);
  g_free(next);
}

/* Why: schedules decide order only; an order that loses, repeats or
 * reorders a pass, or holds more microbatches than the paper says, breaks
 * every number downstream. */
static void test_orders_gpipe_1f1b(void) {
  GArray *order = g_array_new(FALSE, FALSE, sizeof(SimItem));
  guint ps[] = {1, 2, 3, 4, 5, 8};
  for (guint i = 0; i < G_N_ELEMENTS(ps); i++) {
    guint p = ps[i];
    for (guint m = 1; m <= 3 * p + 1; m++)
      for (guint s = 0; s < p; s++) {
        sim_schedule_order(SIM_SCHEDULE_GPIPE, p, m, 1, s, order);
        g_assert_cmpuint(check_order(SIM_SCHEDULE_GPIPE, p, m, 1, s, order), ==, m);
        sim_schedule_order(SIM_SCHEDULE_1F1B, p, m, 1, s, order);
        /* 1F1B: stage s warms up with p-s-1 forwards, then one more before
         * its first backward. */
        g_assert_cmpuint(check_order(SIM_SCHEDULE_1F1B, p, m, 1, s, order), ==, MIN(p - s, m));
      }
  }
  g_array_free(order, TRUE);
}

/* Why: the interleaved order is Megatron's index arithmetic; check it holds
 * every chunk's passes once, in dependency order, with the warm-up depth
 * (p-s-1)*2 + (v-1)*p + 1 in flight at the peak. */
static void test_orders_interleaved(void) {
  GArray *order = g_array_new(FALSE, FALSE, sizeof(SimItem));
  guint ps[] = {2, 3, 4, 8};
  for (guint i = 0; i < G_N_ELEMENTS(ps); i++)
    for (guint v = 1; v <= 4; v++)
      for (guint k = 1; k <= 4; k++) {
        guint p = ps[i], m = k * p;
        for (guint s = 0; s < p; s++) {
          sim_schedule_order(SIM_SCHEDULE_INTERLEAVED, p, m, v, s, order);
          guint peak = check_order(SIM_SCHEDULE_INTERLEAVED, p, m, v, s, order);
          guint want = m == p ? m * v : MIN((p - s - 1) * 2 + (v - 1) * p + 1, m * v);
          g_assert_cmpuint(peak, ==, want);
        }
      }
  g_array_free(order, TRUE);
}

/* Why: per-stage properties do not prove the stages agree with each other;
 * a wrong interleaving deadlocks the real pipeline. */
static void test_orders_no_deadlock(void) {
  guint ps[] = {1, 2, 3, 4, 8};
  for (guint i = 0; i < G_N_ELEMENTS(ps); i++) {
    guint p = ps[i];
    for (guint m = 1; m <= 2 * p + 1; m++) {
      check_no_deadlock(SIM_SCHEDULE_GPIPE, p, m, 1);
      check_no_deadlock(SIM_SCHEDULE_1F1B, p, m, 1);
    }
    if (p > 1)
      for (guint v = 2; v <= 4; v++)
        for (guint k = 1; k <= 3; k++)
          check_no_deadlock(SIM_SCHEDULE_INTERLEAVED, p, k * p, v);
  }
}

/* --- 2. bubble identities on the ideal profile --- */

/* With every layer's forward taking tf and its backward 2tf (plus tf of
 * recomputation), and nothing else costing time, a pipeline of p stages of T
 * = lps*tf*(3 or 4) per microbatch takes T (m + (p-1)/v), and its bubble is
 * (p-1)/m, or (p-1)/(v m) interleaved (SC21 sections 2.2.1 and 2.2.2). */
static void check_bubble(Cfg *c) {
  SimPlan plan;
  SimResult r;
  run_cfg(c, ideal, &plan, &r);
  double p = c->pp, m = c->m, v = virtual_chunks(c);
  double want = (p - 1) / (v * m);
  check_abs(c, "bubble_fraction", r.bubble_fraction, want, 1e-6);
  check_abs(c, "analytic_bubble_fraction", r.analytic_bubble_fraction, want, 1e-12);
  double tf = ideal->ideal_layer_s_per_token * c->b * c->seq;
  gboolean recompute = !c->recompute || strcmp(c->recompute, "full") == 0;
  double T = (double)c->layers / p * tf * (recompute ? 4 : 3);
  check_rel(c, "iteration_time_s", r.iteration_time_s, T * (m + (p - 1) / v), 1e-6);
  check_rel(c, "breakdown.compute", r.breakdown.compute, T * m, 1e-6);
  check_rel(c, "breakdown.bubble", r.breakdown.bubble, T * (p - 1) / v, 1e-6);
}

/* Why: the paper's bubble identities are the simplest end-to-end check that
 * the schedules, the engine and the bubble measurement agree. */
static void test_bubble_identities(void) {
  guint ps[] = {2, 3, 4, 8};
  const char *scheds[] = {"gpipe", "1f1b"};
  for (guint i = 0; i < G_N_ELEMENTS(ps); i++) {
    guint p = ps[i];
    guint ms[] = {p, 2 * p, 4 * p, 3 * p + 1};
    for (guint j = 0; j < G_N_ELEMENTS(ms); j++) {
      for (guint k = 0; k < G_N_ELEMENTS(scheds); k++) {
        Cfg c = {.pp = p, .m = ms[j], .schedule = scheds[k], .layers = 2 * p};
        check_bubble(&c);
        Cfg cn = c;
        cn.recompute = "none";
        check_bubble(&cn);
      }
      if (ms[j] % p)
        continue;
      for (guint v = 2; v <= 4; v++) {
        Cfg c = {.pp = p, .m = ms[j], .chunks = v, .schedule = "interleaved", .layers = p * v};
        check_bubble(&c);
      }
    }
  }
}

/* Why: on the ideal profile communication is free, so tensor and data
 * parallelism (simulated by symmetry or in full) must not move the bubble. */
static void test_bubble_identities_tp_dp(void) {
  guint tps[] = {2, 4};
  guint ps[] = {2, 4};
  for (guint i = 0; i < G_N_ELEMENTS(tps); i++)
    for (guint j = 0; j < G_N_ELEMENTS(ps); j++)
      for (guint sym = 0; sym < 2; sym++) {
        guint p = ps[j];
        Cfg g = {.tp = tps[i], .pp = p, .dp = 2, .m = 2 * p, .schedule = "gpipe", .no_symmetry = sym};
        check_bubble(&g);
        Cfg f = {.tp = tps[i], .pp = p, .dp = 2, .m = 3 * p + 1, .schedule = "1f1b", .ddp = "torch",
                 .no_symmetry = sym};
        check_bubble(&f);
        Cfg il = {.tp = tps[i], .pp = p, .dp = 2, .m = 2 * p, .chunks = 2, .schedule = "interleaved",
                  .no_symmetry = sym};
        check_bubble(&il);
      }
}

/* --- 3. symmetry --- */

/* Whether every tensor rank i and replica k sees the same placement as
 * (0, 0): each pipeline boundary, and the tied-embedding pair of the first
 * and last stage, joins two GPUs of one node for all of them or for none.
 * Ranks are i + t (k + d s) (Megatron's order, ptdp.c). */
static gboolean placement_uniform(const Cfg *c) {
  guint g = selene->gpus_per_node;
#define NODE(i, s, k) (((i) + c->tp * ((k) + c->dp * (s))) / g)
  for (guint s = 0; s < c->pp; s++) {
    guint s2 = s + 1 < c->pp ? s + 1 : 0; /* the last pair is the embedding's */
    if (s2 == s)
      continue;
    gboolean same0 = NODE(0, s, 0) == NODE(0, s2, 0);
    for (guint i = 0; i < c->tp; i++)
      for (guint k = 0; k < c->dp; k++)
        if ((NODE(i, s, k) == NODE(i, s2, k)) != same0)
          return FALSE;
  }
#undef NODE
  return TRUE;
}

/* Simulates c by symmetry and in full; returns a description of the first
 * difference, or NULL when the two agree. */
static char *symmetry_difference(Cfg *c) {
  Cfg full = *c;
  full.no_symmetry = TRUE;
  SimPlan p1, p2;
  SimResult r1, r2;
  run_cfg(c, a100, &p1, &r1);
  run_cfg(&full, a100, &p2, &r2);
  g_assert_true(p1.symmetry);
  g_assert_false(p2.symmetry);
  g_assert_false(r2.symmetric);
  /* one GPU per stage where the placement is uniform; else a replica of
   * each class of node layout, still fewer than every GPU */
  g_assert_true(r1.symmetric);
  if (placement_uniform(c))
    g_assert_cmpuint(r1.simulated_gpus, ==, c->pp);
  else
    g_assert_cmpuint(r1.simulated_gpus, <, c->tp * c->pp * c->dp);
  g_assert_cmpuint(r2.simulated_gpus, ==, c->tp * c->pp * c->dp);
  struct {
    const char *name;
    double sym, full, tol;
  } v[] = {
      {"iteration_time_s", r1.iteration_time_s, r2.iteration_time_s, 0}, /* exact */
      {"bubble_fraction", r1.bubble_fraction, r2.bubble_fraction, 1e-12},
      {"bytes_tp", r1.bytes_tp, r2.bytes_tp, 1e-12},
      {"bytes_pp", r1.bytes_pp, r2.bytes_pp, 1e-12},
      {"bytes_dp", r1.bytes_dp, r2.bytes_dp, 1e-12},
      {"breakdown.compute", r1.breakdown.compute, r2.breakdown.compute, 1e-12},
      {"breakdown.tp_comm", r1.breakdown.tp_comm, r2.breakdown.tp_comm, 1e-12},
      {"breakdown.pp_comm", r1.breakdown.pp_comm, r2.breakdown.pp_comm, 1e-12},
      {"breakdown.dp_comm", r1.breakdown.dp_comm, r2.breakdown.dp_comm, 1e-12},
      {"breakdown.optimizer", r1.breakdown.optimizer, r2.breakdown.optimizer, 1e-12},
      {"breakdown.bubble", r1.breakdown.bubble, r2.breakdown.bubble, 1e-12},
      {"bisection_pp_GBps", r1.bisection_pp_GBps, r2.bisection_pp_GBps, 1e-12},
      {"bisection_dp_GBps", r1.bisection_dp_GBps, r2.bisection_dp_GBps, 1e-12},
  };
  for (guint j = 0; j < G_N_ELEMENTS(v); j++)
    if (!(fabs(v[j].sym - v[j].full) <= v[j].tol * fabs(v[j].full))) {
      char *t = cfg_text(c);
      char *msg = g_strdup_printf("%s: symmetric %.17g, full %.17g [%s]", v[j].name, v[j].sym, v[j].full, t);
      g_free(t);
      return msg;
    }
  return NULL;
}

/* The grid: tp 2/4, pp 2/4, dp 2/3, all three schedules, both DDPs,
 * recomputation and scatter/gather varied along. */
static void symmetry_grid(gboolean want_uniform, guint *n_cfgs, GPtrArray *diffs) {
  guint tps[] = {2, 4}, ps[] = {2, 4}, ds[] = {2, 3};
  const char *scheds[] = {"gpipe", "1f1b", "interleaved"};
  const char *ddps[] = {"torch", "local"};
  *n_cfgs = 0;
  for (guint a = 0; a < G_N_ELEMENTS(tps); a++)
    for (guint bb = 0; bb < G_N_ELEMENTS(ps); bb++)
      for (guint cc = 0; cc < G_N_ELEMENTS(ds); cc++)
        for (guint e = 0; e < G_N_ELEMENTS(scheds); e++)
          for (guint f = 0; f < G_N_ELEMENTS(ddps); f++) {
            guint p = ps[bb];
            Cfg c = {.layers = 8, .seq = 512, .tp = tps[a], .pp = p, .dp = ds[cc], .m = 2 * p,
                     .chunks = e == 2 ? 2 : 0, .schedule = scheds[e], .ddp = ddps[f],
                     .recompute = (a + cc) % 2 ? "none" : "full", .no_sg = (bb + f) % 2};
            cfg_defaults(&c);
            if (placement_uniform(&c) != want_uniform)
              continue;
            (*n_cfgs)++;
            char *diff = symmetry_difference(&c);
            if (diff)
              g_ptr_array_add(diffs, diff);
          }
}

/* Why: by default one GPU per tensor-parallel group and one replica are
 * simulated; that shortcut is only sound if the full simulation gives the
 * very same timeline (exactly the same iteration time). */
static void test_symmetry(void) {
  guint n;
  GPtrArray *diffs = g_ptr_array_new_with_free_func(g_free);
  symmetry_grid(TRUE, &n, diffs);
  g_assert_cmpuint(n, >=, 32);
  for (guint j = 0; j < diffs->len; j++)
    g_test_message("%s", (char *)g_ptr_array_index(diffs, j));
  if (diffs->len)
    g_test_fail_printf("%u of %u configurations differ; first: %s", diffs->len, n,
                       (char *)g_ptr_array_index(diffs, 0));
  g_ptr_array_unref(diffs);
}

/* Why: when t*d does not line up with the 8-GPU nodes, some replicas' stage
 * boundaries stay inside a node (NVLink) while replica 0's cross it
 * (InfiniBand), or the other way round; replica 0 alone would then differ
 * from the full simulation, so ptdsim simulates one replica of each class
 * of layout and must agree exactly. */
static void test_symmetry_straddling_nodes(void) {
  guint n;
  GPtrArray *diffs = g_ptr_array_new_with_free_func(g_free);
  symmetry_grid(FALSE, &n, diffs);
  g_assert_cmpuint(n, >=, 1); /* the grid has such configurations (t=2, d=3) */
  for (guint j = 0; j < diffs->len; j++)
    g_test_message("%s", (char *)g_ptr_array_index(diffs, j));
  if (diffs->len)
    g_test_fail_printf("symmetry shortcut differs from the full simulation when replicas straddle nodes: "
                       "%u of %u configurations; first: %s",
                             diffs->len, n, (char *)g_ptr_array_index(diffs, 0));
  g_ptr_array_unref(diffs);
}

/* --- 4. communication volumes --- */

/* Bytes per iteration over the whole cluster, from the paper's formulas. */
static void check_volumes(Cfg *c) {
  SimPlan plan;
  SimResult r;
  run_cfg(c, a100, &plan, &r);
  double t = c->tp, p = c->pp, d = c->dp, m = c->m, v = virtual_chunks(c);
  double bsh2 = 2.0 * c->b * c->seq * c->hidden; /* one activation tensor in fp16 */
  gboolean recompute = !c->recompute || strcmp(c->recompute, "full") == 0;
  /* Tensor parallel: 4 all-reduces per layer per microbatch (6 with
   * recomputation), each rank of t sending 2(t-1)/t of the buffer (ring). */
  double tp = c->layers * m * d * (recompute ? 6 : 4) * 2.0 * (t - 1) * bsh2;
  /* Pipeline: v p - 1 boundaries, each crossed forward and backward by every
   * microbatch; every rank sends the tensor, or 1/t of it with scatter/gather. */
  gboolean sg = !c->no_sg && c->tp > 1;
  double pp = (v * p - 1) * m * 2 * bsh2 * d * (sg ? 1 : t);
  /* Data parallel: ring all-reduce of every rank's fp16 gradients, plus the
   * tied word-embedding all-reduce between the first and last stage. */
  double params = 0;
  for (guint s = 0; s < c->pp; s++)
    params += (double)model_stage_params(&plan.model, c->tp, c->pp, s, c->layers / c->pp) * t;
  double dp = c->dp > 1 ? 2.0 * (d - 1) * 2.0 * params : 0;
  if (c->pp > 1)
    dp += 2 * (2.0 * c->vocab * c->hidden / t) * t * d;
  check_rel(c, "bytes_tp", r.bytes_tp, tp, 1e-12);
  check_rel(c, "bytes_pp", r.bytes_pp, pp, 1e-12);
  check_rel(c, "bytes_dp", r.bytes_dp, dp, 1e-12);
}

/* Why: the traffic volumes feed the bisection bandwidths and are checkable
 * exactly against the paper's 8bsh(t-1)/t and b*s*h per boundary. */
static void test_volumes(void) {
  Cfg cs[] = {
      {.tp = 2, .pp = 2, .dp = 2, .m = 4, .recompute = "none"},
      {.tp = 2, .pp = 2, .dp = 2, .m = 4, .recompute = "full"},
      {.tp = 4, .pp = 4, .dp = 2, .m = 8, .chunks = 2, .schedule = "interleaved", .no_sg = TRUE},
      {.tp = 4, .pp = 4, .dp = 2, .m = 8, .chunks = 2, .schedule = "interleaved", .recompute = "none"},
      {.tp = 1, .pp = 3, .dp = 3, .m = 5, .schedule = "gpipe", .ddp = "torch"},
      {.tp = 8, .pp = 1, .dp = 2, .m = 3, .ddp = "local"},
      {.tp = 2, .pp = 2, .dp = 1, .m = 3, .no_sg = TRUE},
      {.tp = 4, .pp = 2, .dp = 3, .b = 2, .m = 4, .ddp = "torch", .recompute = "none"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cs); i++)
    check_volumes(&cs[i]);
}

/* Why: SC21 section 5.9's effective bisection bandwidth counts one
 * direction of the cut.  Data-parallel, p = 1, local DDP: the one ring
 * all-reduce per replica set crosses the replica cut once each way with
 * 2 (d-1)/d of the fp16 gradients of each of the t rings, and it runs alone
 * after the flush (its whole duration is the exposed dp_comm), so the
 * figure is exactly those one-way bytes over dp_comm -- half of what
 * counting both directions would give.  Pipeline, GPipe on one node: each
 * direction's sends follow one another, so the figure is one send's bytes
 * over one send's time. */
static void test_bisection_one_direction(void) {
  Cfg c = {.tp = 8, .pp = 1, .dp = 2, .m = 3, .ddp = "local"};
  SimPlan plan;
  SimResult r;
  run_cfg(&c, a100, &plan, &r);
  double params = (double)model_stage_params(&plan.model, c.tp, 1, 0, plan.model.layers);
  double one_way = model_busbw_factor(MODEL_COLL_ALLREDUCE, c.dp) * 2.0 * params * c.tp;
  check_rel(&c, "bisection dp = one-way bytes / all-reduce time", r.bisection_dp_GBps * 1e9,
            one_way / r.breakdown.dp_comm, 1e-9);

  Cfg g = {.tp = 1, .pp = 2, .dp = 1, .m = 4, .schedule = "gpipe"};
  run_cfg(&g, a100, &plan, &r);
  double send = 2.0 * plan.micro_batch * plan.model.seq_len * plan.model.hidden;
  ModelNet net = {.hw = selene->net};
  double secs = llround(model_p2p_time_s(&net, send, TRUE) * 1e9) * 1e-9;
  check_rel(&g, "bisection pp = one send / its time", r.bisection_pp_GBps * 1e9, send / secs, 1e-9);
}

/* Why: ZeRO's traffic is its definition (Rajbhandari et al., section 7):
 * stage 3 gathers every gathered unit's fp16 parameters before its forward,
 * before its recomputation forward (layers) and before its backward, and
 * reduce-scatters all gradients, every microbatch (DeepSpeed's 2021
 * release also gathers its whole-kept small tensors after each partition
 * of them); stages 1 and 2
 * reduce-scatter the gradients (stage 2 every microbatch, stage 1 once) and
 * gather the updated parameters once.  A ring all-gather or reduce-scatter
 * of S bytes over d GPUs sends (d - 1) S in all.  Here by the parameter
 * counts: layers' linears 12 h^2 + 9 h each (gathered three times with
 * recomputation, twice without), the word and position embeddings gathered
 * for the embedding pass (forward, backward), the word embedding again for
 * the tied logits (forward, backward), and P = Eq. 2 + the final layernorm
 * reduced. */
static void test_zero_bytes_and_memory(void) {
  const guint stages[] = {1, 2, 3};
  /* SC21's GPT, and a Llama-style shape: 4 key/value groups, SwiGLU of
   * f = 2816, RMSNorm, rotary positions, untied logits, no biases */
  const ModelShape shapes[] = {
      {.layers = 4, .hidden = 1024, .heads = 16, .seq_len = 512, .vocab = 51200},
      {.layers = 4, .hidden = 1024, .heads = 16, .seq_len = 512, .vocab = 51200, .ffn_hidden = 2816,
       .query_groups = 4, .mlp = MODEL_MLP_SWIGLU, .norm = MODEL_NORM_RMSNORM, .position = MODEL_POSITION_ROTARY,
       .untied = TRUE, .no_bias = TRUE}};
  for (guint sh = 0; sh < G_N_ELEMENTS(shapes); sh++)
  for (guint si = 0; si < 3; si++)
    for (int rc = 0; rc <= 1; rc++) {
      SimPlanRequest req = {.model = shapes[sh],
                            .gpus = 16,
                            .tp = 1,
                            .pp = 1,
                            .dp = 16,
                            .global_batch = 48,
                            .micro_batch = 1,
                            .recompute = rc ? MODEL_RECOMPUTE_FULL : MODEL_RECOMPUTE_NONE,
                            .recompute_given = TRUE,
                            .network = SIM_NETWORK_ANALYTIC,
                            .network_given = TRUE,
                            .zero = stages[si],
                            .allow_oom = TRUE};
      SimPlan plan;
      GError *error = NULL;
      g_assert_true(sim_plan_build(&req, selene, &plan, &error));
      g_assert_no_error(error);
      g_assert_cmpuint(plan.microbatches, ==, 3);
      SimResult r;
      g_assert_true(sim_zero_run(&plan, a100, selene, &r, NULL, NULL, &error));
      g_assert_no_error(error);
      const ModelShape *ms = &shapes[sh];
      double h = 1024, L = 4, V = 51200, s = 512, d = 16, m = 3;
      double P = (double)model_param_count(&plan.model); /* the final norm included */
      double bias = ms->no_bias ? 0 : 1, f = ms->ffn_hidden ? ms->ffn_hidden : 4 * h;
      double kv = ms->query_groups ? ms->query_groups * (h / ms->heads) : h;
      double up = ms->mlp == MODEL_MLP_SWIGLU ? 2 * f : f, norm = ms->norm == MODEL_NORM_RMSNORM ? h : 2 * h;
      double qkv = h * (h + 2 * kv) + bias * (h + 2 * kv), proj = h * h + bias * h, mlp_up = h * up + bias * up,
             mlp_down = f * h + bias * h;
      if (sh == 0) /* SC21's GPT: 12 h^2 + 9 h */
        g_assert_cmpfloat(qkv + proj + mlp_up + mlp_down, ==, 12 * h * h + 9 * h);
      double linears = L * (qkv + proj + mlp_up + mlp_down);
      double position = ms->position == MODEL_POSITION_ROTARY ? 0 : s * h;
      /* stage 3 gathers the tensors of 10^5 elements or more (the four
       * weights of a layer, the embeddings), DeepSpeed's
       * stage3_param_persistence_threshold; the rest stay whole */
      double weights = h * (h + 2 * kv) + h * h + h * up + f * h;
      double persistent = P - L * weights - V * h * (ms->untied ? 2 : 1) - position;
      g_assert_cmpfloat(persistent, ==, L * (bias * ((h + 2 * kv) + h + up + h) + 2 * norm) + norm);
      double sent;
      if (stages[si] == 3) {
        /* each gathered again for every use (the 2021 release's trace is
         * off by one: no reuse); the gradients all-reduced in buckets
         * (contiguous_gradients off), every microbatch; the persistent
         * tensors, partitioned after each backward, gathered once in each
         * later microbatch and once after the step (every one of their
         * lengths divides by d = 16: no padding) */
        double gathered = (rc ? 3 : 2) * L * weights + 2 * (V * h + position) + 2 * V * h;
        sent = m * (d - 1) * (2 * gathered + 2 * 2 * P) + m * (d - 1) * 2 * persistent;
      } else if (stages[si] == 2)
        sent = (d - 1) * 2 * (m * P + P);
      else
        sent = (d - 1) * 2 * (P + P);
      (void)linears;
      g_assert_cmpfloat_with_epsilon(r.bytes_dp, sent, 1e-12 * sent);
      /* memory per GPU: optimizer state sharded in every stage, gradients
       * from stage 2, parameters in stage 3 (but the small tensors, whole,
       * the most gathered at once -- one unit: the embedding's tables --
       * and NCCL's flat copy of the largest gather; and the gradients of
       * the one bucket, 5e8 elements being more than the model, whole and
       * flattened for their all-reduce) */
      g_assert_cmpfloat_with_epsilon(r.memory.optimizer, 12 * P / d, 1e-9 * P);
      g_assert_cmpfloat_with_epsilon(r.memory.gradients,
                                     stages[si] == 3   ? 2 * P / d + 4 * P
                                     : stages[si] == 2 ? 2 * P / d
                                                       : 2 * P,
                                     1e-9 * P);
      double live = V * h + position; /* the embedding unit */
      g_assert_cmpfloat_with_epsilon(r.memory.weights,
                                     stages[si] == 3 ? 2 * (P - persistent) / d + 2 * persistent + 2 * live + 2 * V * h
                                                     : 2 * P,
                                     1e-9 * P);
      g_assert_cmpfloat(r.bubble_fraction, ==, 0);
      /* the flow network moves the same bytes */
      req.network = SIM_NETWORK_FLOW;
      g_assert_true(sim_plan_build(&req, selene, &plan, &error));
      SimResult fl;
      g_assert_true(sim_zero_run(&plan, a100, selene, &fl, NULL, NULL, &error));
      g_assert_no_error(error);
      g_assert_cmpfloat_with_epsilon(fl.bytes_dp, sent, 1e-12 * sent);
    }
}

/* Whether any data-parallel op overlaps any compute op in time. */
typedef struct {
  guint overlapped;
} PrefetchCheck;

static gboolean check_prefetch(const SimTimeline *tl, gpointer data, GError **error) {
  (void)error;
  PrefetchCheck *pc = data;
  guint nd, nc;
  const guint *dp = sim_engine_stream_ops(tl->engine, 4, &nd), *comp = sim_engine_stream_ops(tl->engine, 0, &nc);
  for (guint x = 0; x < nd; x++)
    for (guint c = 0; c < nc; c++) {
      SimTime a0 = sim_engine_op_start(tl->engine, dp[x]), a1 = sim_engine_op_end(tl->engine, dp[x]);
      SimTime b0 = sim_engine_op_start(tl->engine, comp[c]), b1 = sim_engine_op_end(tl->engine, comp[c]);
      pc->overlapped += a0 < b1 && b0 < a1 && a1 > a0 && b1 > b0;
    }
  return TRUE;
}

/* Why: in the DeepSpeed release SC21 ran, ZeRO-3 hides no gather behind
 * compute: its module trace is one step off, so nothing is prefetched, and
 * every hook synchronizes the device before the next gather; the
 * reductions too wait for the next hook's synchronization.  With the trace
 * fixed (--zero-trace-fixed) the next unit's tensors are gathered while
 * this one computes. */
static void test_zero_prefetch(void) {
  for (int fixed = 0; fixed <= 1; fixed++) {
    SimPlanRequest req = {.model = {4, 1024, 16, 512, 51200},
                          .gpus = 16,
                          .tp = 1,
                          .pp = 1,
                          .dp = 16,
                          .global_batch = 16,
                          .micro_batch = 1,
                          .recompute = MODEL_RECOMPUTE_NONE,
                          .recompute_given = TRUE,
                          .network = SIM_NETWORK_ANALYTIC,
                          .network_given = TRUE,
                          .zero = 3,
                          .zero_trace_fixed = fixed,
                          .allow_oom = TRUE};
    SimPlan plan;
    GError *error = NULL;
    g_assert_true(sim_plan_build(&req, selene, &plan, &error));
    SimResult r;
    PrefetchCheck pc = {0};
    g_assert_true(sim_zero_run(&plan, a100, selene, &r, check_prefetch, &pc, &error));
    g_assert_no_error(error);
    if (fixed)
      g_assert_cmpuint(pc.overlapped, >, 0);
    else
      g_assert_cmpuint(pc.overlapped, ==, 0);
  }
}

/* --- 5. FLOP accounting --- */

/* Why: the headline TFLOP/s must be Eq. 3 over the simulated time, and the
 * hardware rate must drop the recomputation forward when it is off. */
static void test_flops(void) {
  Cfg cs[] = {
      {.tp = 2, .pp = 2, .dp = 2, .m = 4, .recompute = "none"},
      {.tp = 2, .pp = 2, .dp = 2, .m = 4, .recompute = "full"},
      {.tp = 4, .pp = 4, .dp = 1, .m = 8, .chunks = 2, .schedule = "interleaved", .recompute = "none"},
      {.tp = 1, .pp = 1, .dp = 4, .b = 4, .m = 2, .seq = 1024, .ddp = "torch"},
      {.tp = 8, .pp = 2, .dp = 1, .m = 6, .hidden = 2048, .heads = 32, .schedule = "gpipe", .recompute = "none"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cs); i++) {
    Cfg *c = &cs[i];
    SimPlan plan;
    SimResult r;
    run_cfg(c, a100, &plan, &r);
    double B = (double)c->m * c->b * c->dp, s = c->seq, l = c->layers, h = c->hidden, V = c->vocab;
    double gpus = (double)c->tp * c->pp * c->dp;
    /* Eq. 3: F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) */
    double F = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    /* Executed: forward 24Bsh^2 + 4Bs^2h per layer, times 3 (fwd + 2x bwd)
     * or 4 with recomputation; the logit GEMM 2BshV, forward and backward. */
    gboolean recompute = !c->recompute || strcmp(c->recompute, "full") == 0;
    double Fhw = (recompute ? 4 : 3) * l * (24 * B * s * h * h + 4 * B * s * s * h) + 3 * 2 * B * s * h * V;
    check_rel(c, "tflops_per_gpu * gpus * time", r.tflops_per_gpu * 1e12 * gpus * r.iteration_time_s, F, 1e-9);
    check_rel(c, "hardware_tflops_per_gpu", r.hardware_tflops_per_gpu, Fhw / r.iteration_time_s / gpus / 1e12,
              1e-9);
    if (recompute)
      check_rel(c, "hardware == model TFLOP/s with recomputation", r.hardware_tflops_per_gpu, r.tflops_per_gpu,
                1e-9);
    else
      g_assert_cmpfloat(r.hardware_tflops_per_gpu, <, r.tflops_per_gpu);
    check_rel(c, "percent_of_peak", r.percent_of_peak, 100 * r.tflops_per_gpu / (a100->peak_flops / 1e12), 1e-9);
    check_rel(c, "aggregate_pflops", r.aggregate_pflops, r.tflops_per_gpu * gpus / 1000, 1e-9);
  }
}

/* --- 6. time breakdown --- */

/* Why: the breakdown is exposed time on the critical GPU, so its parts must
 * add up to the iteration, with no part negative. */
static void test_breakdown_sums(void) {
  Cfg cs[] = {
      {.tp = 2, .pp = 2, .dp = 2, .m = 4, .ddp = "torch"},
      {.tp = 4, .pp = 4, .dp = 3, .m = 8, .chunks = 2, .schedule = "interleaved"},
      {.tp = 8, .pp = 1, .dp = 2, .m = 2, .recompute = "none"},
      {.tp = 1, .pp = 3, .dp = 2, .m = 7, .schedule = "gpipe", .no_sg = TRUE, .ddp = "local"},
      {.tp = 2, .pp = 8, .dp = 1, .m = 16, .seq = 1024, .recompute = "none"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cs); i++) {
    Cfg *c = &cs[i];
    SimPlan plan;
    SimResult r;
    run_cfg(c, a100, &plan, &r);
    const SimBreakdown *b = &r.breakdown;
    double parts[] = {b->compute, b->tp_comm, b->pp_comm, b->dp_comm, b->optimizer, b->bubble};
    double sum = 0;
    for (guint j = 0; j < G_N_ELEMENTS(parts); j++) {
      g_assert_cmpfloat(parts[j], >=, 0);
      sum += parts[j];
    }
    g_assert_cmpfloat(b->compute, >, 0);
    g_assert_cmpfloat(b->optimizer, >, 0);
    if (c->tp > 1)
      g_assert_cmpfloat(b->tp_comm, >, 0);
    check_rel(c, "breakdown sum", sum, r.iteration_time_s, 1e-9);
  }
}

/* --- 7. memory --- */

/* Activations of one layer for one microbatch, Korthikanti et al. 2022:
 * s b h (10 + 24/t + 5 a s / (h t)) bytes. */
static double layer_act(const Cfg *c) {
  double s = c->seq, b = c->b, h = c->hidden, a = c->heads, t = c->tp;
  return s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
}

static ModelMemory stage0_memory(Cfg *c, guint *stage) {
  SimPlan plan;
  build_plan(c, &plan);
  ModelMemory mem;
  sim_ptdp_memory(&plan, a100, &mem, stage);
  return mem;
}

/* Why: 1F1B's point is that the first stage holds p microbatches, not m as
 * GPipe does; with a fixed number of layers per stage its activation memory
 * must grow with p, exactly as the formula says. */
static void test_memory_inflight(void) {
  guint lps = 2;
  double prev = 0;
  guint ps[] = {2, 4, 8};
  for (guint i = 0; i < G_N_ELEMENTS(ps); i++) {
    guint p = ps[i], m = 4 * p, stage;
    /* a small vocabulary keeps the last stage's logits below the first
     * stage's activations, so stage 0 is the busiest */
    Cfg f = {.pp = p, .m = m, .layers = lps * p, .vocab = 1024, .recompute = "none", .schedule = "1f1b"};
    ModelMemory mf = stage0_memory(&f, &stage);
    g_assert_cmpuint(stage, ==, 0);
    double sbh = (double)f.seq * f.b * f.hidden; /* embedding dropout mask per microbatch in flight */
    check_rel(&f, "1f1b activations", mf.activations, layer_act(&f) * lps * p + sbh * p, 1e-12);
    g_assert_cmpfloat(mf.activations, >, prev);
    prev = mf.activations;

    Cfg g = f;
    g.schedule = "gpipe";
    ModelMemory mg = stage0_memory(&g, &stage);
    check_rel(&g, "gpipe activations", mg.activations, layer_act(&g) * lps * m + sbh * m, 1e-12);

    /* Interleaved: the first stage's warm-up holds (p-1)*2 + (v-1)*p + 1
     * chunks of lps/v layers, i.e. lps * p (1 + (p-1)/(p v)) layer-microbatches
     * (SC21 section 2.2.2: "a little" more than 1F1B). */
    guint v = 2;
    Cfg il = {.pp = p, .m = m, .chunks = v, .layers = lps * p, .vocab = 1024, .recompute = "none",
              .schedule = "interleaved"};
    ModelMemory mi = stage0_memory(&il, &stage);
    double held = lps * p * (1 + (p - 1.0) / (p * v));
    g_assert_cmpfloat(mi.activations, >=, layer_act(&il) * held);
    g_assert_cmpfloat(mi.activations, <=, layer_act(&il) * held + sbh * m);
    g_assert_cmpfloat(mi.activations, >, mf.activations);
  }
}

/* Why: recomputation exists to trade compute for activation memory. */
static void test_memory_recompute(void) {
  const char *scheds[] = {"gpipe", "1f1b"};
  for (guint i = 0; i < G_N_ELEMENTS(scheds); i++)
    for (guint t = 1; t <= 4; t *= 2) {
      Cfg none = {.tp = t, .pp = 4, .m = 8, .schedule = scheds[i], .recompute = "none"};
      Cfg full = none;
      full.recompute = "full";
      guint s1, s2;
      ModelMemory mn = stage0_memory(&none, &s1), mf = stage0_memory(&full, &s2);
      g_assert_cmpfloat(mn.activations, >, mf.activations);
      g_assert_cmpfloat(mn.total, >, mf.total);
    }
}


/* --- 8. uneven pipeline stages --- */

/* The transformer layers of chunk `ch` of stage s under Megatron-Core's
 * rules (transformer_config.py, get_num_layers_to_build), written out here:
 * end stages given hold their layers and the other stages share the rest
 * evenly; with the embedding (loss) counted, (l + extras) / p per stage and
 * one layer fewer in the first (last) virtual stage; each stage's layers
 * split evenly over its v chunks. */
static guint split_chunk_layers(const Cfg *c, guint s, guint ch) {
  guint l = c->layers, p = c->pp, v = virtual_chunks(c);
  const SimSplit *sp = &c->split;
  if (sp->first || sp->last) {
    guint rest = l - sp->first - sp->last, mids = p - (sp->first ? 1 : 0) - (sp->last ? 1 : 0);
    guint stage = s == 0 && sp->first ? sp->first : s == p - 1 && sp->last ? sp->last : rest / mids;
    return stage / v;
  }
  guint n = (l + (sp->embedding ? 1 : 0) + (sp->loss ? 1 : 0)) / p / v;
  return n - (sp->embedding && s == 0 && ch == 0 ? 1 : 0) - (sp->loss && s == p - 1 && ch == v - 1 ? 1 : 0);
}

static guint split_stage_layers(const Cfg *c, guint s) {
  guint n = 0;
  for (guint ch = 0; ch < virtual_chunks(c); ch++)
    n += split_chunk_layers(c, s, ch);
  return n;
}

/* The iteration on the ideal profile, by its definition, in ns: every
 * stage runs its schedule's order (section 1 checks the orders), a chunk's
 * pass takes its layers times t_f forward and k - 1 times that backward (k
 * = 3, or 4 with the recomputation forward), nothing else costs time; a
 * pass waits for the one before it on its stage and for its input, the
 * previous virtual stage's forward or the next one's backward (the last
 * virtual stage's backward for its own forward), which arrives by a send
 * that takes no time but, being blocking, waits for the receiver to have
 * taken the sends before it in its own order, and holds its sender until
 * it is done.  The longest path, by relaxation in every stage's order. */
static gint64 reference_ns(const Cfg *c, SimSchedule sch, gint64 tf, guint k) {
  guint p = c->pp, v = virtual_chunks(c), m = c->m, n = 2 * m * v;
  GArray **order = g_new(GArray *, p);
  guint *pos = g_new0(guint, (gsize)p * v * m * 2); /* [(s v + ch) m + mb] * 2 + fwd: index in s's order */
  for (guint s = 0; s < p; s++) {
    order[s] = g_array_new(FALSE, FALSE, sizeof(SimItem));
    sim_schedule_order(sch, p, m, v, s, order[s]);
    g_assert_cmpuint(order[s]->len, ==, n);
    for (guint j = 0; j < n; j++) {
      SimItem it = g_array_index(order[s], SimItem, j);
      pos[(((gsize)s * v + it.chunk) * m + it.microbatch) * 2 + it.forward] = j;
    }
  }
  gint64 *end = g_new(gint64, (gsize)p * n), *xend = g_new(gint64, (gsize)p * n);
  for (gsize i = 0; i < (gsize)p * n; i++)
    end[i] = xend[i] = -1;
  /* the item that feeds item j of stage s (G_MAXUINT: none), as s' * n + j' */
#define ITEM(s_, j_) g_array_index(order[s_], SimItem, j_)
  guint *src = g_new(guint, (gsize)p * n), *dst = g_new(guint, (gsize)p * n);
  for (gsize i = 0; i < (gsize)p * n; i++)
    src[i] = dst[i] = G_MAXUINT;
  for (guint s = 0; s < p; s++)
    for (guint j = 0; j < n; j++) {
      SimItem it = ITEM(s, j);
      guint vs = it.chunk * p + s;
      if ((it.forward && vs == p * v - 1) || (!it.forward && vs == 0))
        continue;
      guint dvs = it.forward ? vs + 1 : vs - 1, ds = dvs % p, dc = dvs / p;
      guint dj = pos[(((gsize)ds * v + dc) * m + it.microbatch) * 2 + it.forward];
      dst[s * n + j] = ds * n + dj;
      src[ds * n + dj] = s * n + j;
    }
  guint *at = g_new0(guint, p);
  guint done = 0;
  while (done < p * n) {
    gboolean progress = FALSE;
    for (guint s = 0; s < p; s++)
      for (;;) {
        guint j = at[s];
        if (j > 0 && dst[s * n + j - 1] != G_MAXUINT && xend[s * n + j - 1] < 0) {
          /* the send of the item before: after it, after the sender's earlier sends (its order), after the
           * receiver's earlier receives (its order) */
          guint to = dst[s * n + j - 1], ts = to / n;
          gint64 t0 = end[s * n + j - 1];
          gboolean ready = TRUE;
          for (guint q = 0; q + 1 < j && ready; q++)
            if (dst[s * n + q] != G_MAXUINT)
              ready = xend[s * n + q] >= 0, t0 = MAX(t0, xend[s * n + q]);
          for (guint q = ts * n; q < to && ready; q++)
            if (src[q] != G_MAXUINT)
              ready = xend[src[q]] >= 0, t0 = MAX(t0, xend[src[q]]);
          if (!ready)
            break;
          xend[s * n + j - 1] = t0;
          progress = TRUE;
        }
        if (j == n)
          break;
        gint64 start = j > 0 ? end[s * n + j - 1] : 0;
        if (j > 0 && dst[s * n + j - 1] != G_MAXUINT)
          start = MAX(start, xend[s * n + j - 1]);
        guint from = src[s * n + j];
        if (from != G_MAXUINT && xend[from] < 0)
          break;
        if (from != G_MAXUINT)
          start = MAX(start, xend[from]);
        SimItem it = ITEM(s, j);
        if (!it.forward && it.chunk * p + s == p * v - 1) { /* the last virtual stage's own forward */
          gint64 f = end[s * n + pos[(((gsize)s * v + it.chunk) * m + it.microbatch) * 2 + 1]];
          start = MAX(start, f);
        }
        gint64 dur = split_chunk_layers(c, s, it.chunk) * tf * (it.forward ? 1 : k - 1);
        end[s * n + j] = start + dur;
        at[s]++;
        done++;
        progress = TRUE;
      }
    g_assert_true(progress);
  }
#undef ITEM
  gint64 last = 0;
  for (gsize i = 0; i < (gsize)p * n; i++)
    last = MAX(last, MAX(end[i], xend[i]));
  for (guint s = 0; s < p; s++)
    g_array_free(order[s], TRUE);
  g_free(order);
  g_free(pos);
  g_free(end);
  g_free(xend);
  g_free(src);
  g_free(dst);
  g_free(at);
  return last;
}

/* Simulates an uneven split on the ideal profile; checks the stage layers
 * against the rules, the iteration against the longest path to the
 * nanosecond, and the closed forms where they hold: GPipe (a flow shop of
 * identical jobs, forward then backward) takes k t_f (sum L + (m - 1) max L)
 * for stage layers L_s; 1F1B the same with L_{p-1} for max L where the last
 * stage holds the most (it never waits once the first microbatch reaches
 * it); and the busiest stage computes k t_f m max L. */
static void check_uneven_ideal(Cfg *c) {
  SimPlan plan;
  SimResult r;
  run_cfg(c, ideal, &plan, &r);
  guint p = c->pp, v = virtual_chunks(c);
  guint sum = 0, most = 0;
  for (guint s = 0; s < p; s++) {
    for (guint ch = 0; ch < v; ch++)
      check_abs(c, "chunk layers", sim_plan_chunk_layers(&plan, s, ch), split_chunk_layers(c, s, ch), 0);
    guint L = split_stage_layers(c, s);
    sum += L;
    most = MAX(most, L);
  }
  check_abs(c, "layers in all", sum, c->layers, 0);
  gint64 tf = llround(ideal->ideal_layer_s_per_token * c->b * c->seq * 1e9);
  gboolean recompute = !c->recompute || strcmp(c->recompute, "full") == 0;
  guint k = recompute ? 4 : 3;
  SimSchedule sch = plan.schedule;
  gint64 want = reference_ns(c, sch, tf, k);
  check_abs(c, "iteration_time_s (ns)", (double)llround(r.iteration_time_s * 1e9), (double)want, 0);
  gint64 flow_shop = (gint64)k * tf * ((gint64)sum + (gint64)(c->m - 1) * most);
  if (sch == SIM_SCHEDULE_GPIPE)
    check_abs(c, "gpipe closed form (ns)", (double)want, (double)flow_shop, 0);
  if (sch == SIM_SCHEDULE_1F1B && split_stage_layers(c, p - 1) == most)
    check_abs(c, "1f1b closed form (ns)", (double)want, (double)flow_shop, 0);
  if (sch == SIM_SCHEDULE_1F1B && split_stage_layers(c, p - 1) < most)
    g_assert_cmpint(want, <=, flow_shop); /* the flow shop's time is a bound, gaps in the warm-up make it shorter */
  /* the busiest stage is one that holds the most layers, and its compute is all of them, m times */
  g_assert_cmpuint(split_stage_layers(c, r.critical_stage), ==, most);
  check_rel(c, "breakdown.compute", r.breakdown.compute, (double)k * tf * 1e-9 * c->m * most, 1e-9);
}

/* Why: an uneven split must give each stage the layers Megatron would
 * build there, and then the engine's timeline must be exactly the longest
 * path through the schedule with each stage's passes as long as its
 * layers: the textbook identities of uneven pipelines, through the whole
 * task graph. */
static void test_uneven_ideal(void) {
  const struct {
    guint pp, layers, chunks;
    SimSplit split;
  } splits[] = {
      {4, 10, 0, {0, 0, TRUE, TRUE}},   /* 2, 3, 3, 2: lighter ends (Llama 3 405B's shape) */
      {4, 10, 0, {1, 5, FALSE, FALSE}}, /* 1, 2, 2, 5: the last stage the heaviest */
      {4, 10, 0, {4, 4, FALSE, FALSE}}, /* 4, 1, 1, 4 */
      {3, 8, 0, {0, 0, TRUE, FALSE}},   /* 2, 3, 3 */
      {3, 8, 0, {0, 0, FALSE, TRUE}},   /* 3, 3, 2 */
      {2, 5, 0, {3, 2, FALSE, FALSE}},  /* 3, 2 */
      {2, 5, 0, {1, 0, FALSE, FALSE}},  /* 1, 4: only the first given */
      {5, 13, 0, {1, 0, FALSE, FALSE}}, /* 1, 3, 3, 3, 3 */
      {5, 13, 0, {0, 5, FALSE, FALSE}}, /* 2, 2, 2, 2, 5 */
      {4, 14, 2, {0, 0, TRUE, TRUE}},   /* chunks 1+2, 2+2, 2+2, 2+1 */
      {4, 10, 2, {2, 4, FALSE, FALSE}}, /* chunks 1+1, 1+1, 1+1, 2+2 */
      {4, 15, 2, {0, 0, FALSE, TRUE}},  /* chunks 2+2, 2+2, 2+2, 2+1 */
  };
  guint runs = 0;
  for (guint i = 0; i < G_N_ELEMENTS(splits); i++) {
    guint p = splits[i].pp, v = splits[i].chunks;
    guint ms[] = {p, 2 * p + 1, 4 * p};
    for (guint j = 0; j < G_N_ELEMENTS(ms); j++)
      for (guint r = 0; r < 2; r++) {
        const char *rc = r ? "full" : "none";
        if (v) {
          if (ms[j] % p)
            continue;
          Cfg c = {.pp = p, .layers = splits[i].layers, .m = ms[j], .chunks = v, .schedule = "interleaved",
                   .recompute = rc, .split = splits[i].split};
          check_uneven_ideal(&c);
          runs++;
          continue;
        }
        const char *scheds[] = {"gpipe", "1f1b"};
        for (guint q = 0; q < 2; q++) {
          Cfg c = {.pp = p, .layers = splits[i].layers, .m = ms[j], .schedule = scheds[q], .recompute = rc,
                   .split = splits[i].split};
          check_uneven_ideal(&c);
          runs++;
        }
      }
  }
  g_assert_cmpuint(runs, >=, 100);
}

/* Why: a stage's parameters are its own layers' and its ends' extras, so
 * over the stages they add up to the model's (with the tied word
 * embedding's second copy on the last stage when p > 1), whatever the
 * split; and each stage's weights, gradients and optimizer state in the
 * memory walk are those of its own layers. */
static void test_uneven_params(void) {
  const ModelShape shapes[] = {
      {.layers = 10, .hidden = 1024, .heads = 16, .seq_len = 512, .vocab = 51200},
      {.layers = 10, .hidden = 1024, .heads = 16, .seq_len = 512, .vocab = 32000, .ffn_hidden = 2816,
       .query_groups = 4, .mlp = MODEL_MLP_SWIGLU, .norm = MODEL_NORM_RMSNORM, .position = MODEL_POSITION_ROTARY,
       .untied = TRUE, .no_bias = TRUE}};
  const SimSplit splits[] = {{0, 0, TRUE, TRUE}, {1, 5, FALSE, FALSE}, {0, 4, FALSE, FALSE}, {4, 0, FALSE, FALSE}};
  for (guint sh = 0; sh < G_N_ELEMENTS(shapes); sh++)
    for (guint i = 0; i < G_N_ELEMENTS(splits); i++) {
      Cfg c = {.layers = 10, .pp = 4, .m = 4, .split = splits[i]};
      SimPlan plan;
      build_plan(&c, &plan);
      plan.model = shapes[sh]; /* the shape alone: the split is the plan's */
      double sum = 0;
      for (guint s = 0; s < c.pp; s++) {
        guint L = split_stage_layers(&c, s);
        check_abs(&c, "stage layers", sim_plan_stage_layers(&plan, s), L, 0);
        sum += (double)model_stage_params(&plan.model, 1, c.pp, s, L);
      }
      double extra = shapes[sh].untied ? 0 : (double)shapes[sh].vocab * shapes[sh].hidden;
      check_abs(&c, "parameters over the stages", sum, (double)model_param_count(&shapes[sh]) + extra, 0);
    }
}

/* Why: the memory walk must take each stage's own layers: 1F1B holds
 * min(p - s, m) microbatches on stage s, each with L_s layers'
 * activations, and the stage's own parameters; with the embedding and the
 * loss counted as layers the first stage holds one layer fewer, so a
 * middle stage can be the one that needs the most. */
static void test_uneven_memory(void) {
  const struct {
    guint layers;
    SimSplit split;
    guint busiest; /* the stage that needs the most (G_MAXUINT: not checked) */
  } cases[] = {{10, {0, 0, TRUE, TRUE}, 1}, {10, {1, 5, FALSE, FALSE}, G_MAXUINT}, {14, {5, 3, FALSE, FALSE}, 0},
               {15, {0, 0, TRUE, FALSE}, 1}};
  const char *rcs[] = {"none", "full"};
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++)
    for (guint rc = 0; rc < 2; rc++) {
      Cfg c = {.layers = cases[i].layers, .pp = 4, .m = 8, .vocab = 1024, .recompute = rcs[rc],
               .split = cases[i].split};
      SimPlan plan;
      build_plan(&c, &plan);
      ModelMemory got;
      guint stage;
      sim_ptdp_memory(&plan, a100, &got, &stage);
      ModelMemory best = {0};
      guint best_s = 0;
      for (guint s = 0; s < c.pp; s++) {
        guint L = split_stage_layers(&c, s), mbs = MIN(c.pp - s, c.m);
        ModelLayerOptions lo = sim_plan_layer_options(&plan, a100);
        ModelMemoryRequest req = {.t = 1,
                                  .b = c.b,
                                  .params = model_stage_params(&plan.model, 1, c.pp, s, L),
                                  .inflight_layer_mbs = (double)L * mbs,
                                  .inflight_mbs = mbs,
                                  .recompute = rc == 1,
                                  .first_stage = s == 0,
                                  .last_stage = s == c.pp - 1,
                                  .fp32_softmax = model_softmax_fp32(&plan.model, 1, c.b, &lo),
                                  .optimizer_shards = 1};
        ModelMemory mm;
        model_memory(&plan.model, &req, &mm);
        if (mm.total > best.total)
          best = mm, best_s = s;
      }
      check_abs(&c, "memory stage", stage, best_s, 0);
      check_rel(&c, "memory total", got.total, best.total, 1e-12);
      check_rel(&c, "memory weights", got.weights, best.weights, 1e-12);
      check_rel(&c, "memory activations", got.activations, best.activations, 1e-12);
      if (cases[i].busiest != G_MAXUINT && rc == 0)
        check_abs(&c, "the stage that needs the most", stage, cases[i].busiest, 0);
    }
}

/* Why: the data-parallel gradient all-reduce of each stage carries its own
 * stage's parameters, and each stage's optimizer step is over them: the
 * bytes add up by stage, and the critical stage's exposed optimizer time is
 * the step over its own parameters. */
static void test_uneven_dp_and_optimizer(void) {
  const Cfg cs[] = {
      {.tp = 2, .pp = 4, .dp = 2, .m = 8, .layers = 10, .split = {0, 0, TRUE, TRUE}},
      {.tp = 2, .pp = 4, .dp = 2, .m = 8, .layers = 10, .ddp = "torch", .split = {1, 5, FALSE, FALSE}},
      {.tp = 4, .pp = 4, .dp = 2, .m = 8, .layers = 14, .chunks = 2, .schedule = "interleaved",
       .split = {0, 0, TRUE, TRUE}},
      {.tp = 1, .pp = 3, .dp = 3, .m = 5, .layers = 8, .schedule = "gpipe", .split = {0, 0, FALSE, TRUE}},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cs); i++) {
    Cfg c = cs[i];
    SimPlan plan;
    SimResult r;
    run_cfg(&c, a100, &plan, &r);
    double t = c.tp, d = c.dp, params = 0;
    for (guint s = 0; s < c.pp; s++)
      params += (double)model_stage_params(&plan.model, c.tp, c.pp, s, split_stage_layers(&c, s)) * t;
    double dp = 2.0 * (d - 1) * 2.0 * params + 2 * (2.0 * c.vocab * c.hidden / t) * t * d;
    check_rel(&c, "bytes_dp", r.bytes_dp, dp, 1e-12);
    guint64 crit = model_stage_params(&plan.model, c.tp, c.pp, r.critical_stage,
                                      split_stage_layers(&c, r.critical_stage));
    check_rel(&c, "breakdown.optimizer", r.breakdown.optimizer,
              llround(model_optimizer_time_s(a100, crit) * 1e9) * 1e-9, 1e-12);
  }
}

/* Why: the symmetry shortcut must stay exact when stages differ. */
static void test_uneven_symmetry(void) {
  Cfg cs[] = {
      {.layers = 10, .seq = 512, .tp = 2, .pp = 4, .dp = 2, .m = 8, .split = {0, 0, TRUE, TRUE}},
      {.layers = 10, .seq = 512, .tp = 4, .pp = 4, .dp = 2, .m = 8, .ddp = "torch", .recompute = "none",
       .split = {1, 5, FALSE, FALSE}},
      {.layers = 14, .seq = 512, .tp = 2, .pp = 4, .dp = 2, .m = 8, .chunks = 2, .schedule = "interleaved",
       .split = {0, 0, TRUE, TRUE}},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cs); i++) {
    cfg_defaults(&cs[i]);
    char *diff = symmetry_difference(&cs[i]);
    if (diff)
      g_test_fail_printf("%s", diff);
    g_free(diff);
  }
}

/* --- the schedules' table --- */

/* The v a row runs at for the test: its rule's. */
static guint table_chunks(const SimScheduleInfo *row, guint k) {
  return row->chunks == SIM_CHUNKS_TWO ? 2 : row->chunks == SIM_CHUNKS_ANY ? 1 + k : 1;
}

/* Every schedule has one row, its name parses back to it, the word list
 * holds exactly the rows --schedule takes (the schedules of passes first in
 * the text), and each row's rules agree with what its order does. */
static void test_table_names(void) {
  guint n;
  const SimScheduleInfo *t = sim_schedule_table(&n);
  guint seen[SIM_SCHEDULE_ZB_AUTO + 1] = {0};
  guint words = 0;
  /* the list's words one by one ("a, b or c"): a substring test would pass
   * "interleaved" on "interleaved-zb" */
  GPtrArray *listed = g_ptr_array_new_with_free_func(g_free);
  {
    char **parts = g_strsplit(sim_schedule_word_list(), ", ", -1);
    guint np = g_strv_length(parts);
    g_assert_cmpuint(np, >, 0);
    for (guint k = 0; k + 1 < np; k++)
      g_ptr_array_add(listed, g_strdup(parts[k]));
    char **last = g_strsplit(parts[np - 1], " or ", -1);
    g_assert_cmpuint(g_strv_length(last), ==, np > 1 ? 2 : 1);
    for (guint k = 0; last[k]; k++)
      g_ptr_array_add(listed, g_strdup(last[k]));
    g_strfreev(last);
    g_strfreev(parts);
    g_ptr_array_add(listed, NULL);
  }
  for (guint i = 0; i < n; i++) {
    g_assert_cmpuint(t[i].id, <=, SIM_SCHEDULE_ZB_AUTO);
    seen[t[i].id]++;
    g_assert_true(sim_schedule_info(t[i].id) == &t[i]);
    g_assert_true(sim_schedule_find(t[i].name) == &t[i]);
    g_assert_cmpstr(sim_schedule_name(t[i].id), ==, t[i].name);
    g_assert_true(strstr(sim_schedule_word_list(), t[i].name) != NULL || !t[i].word);
    g_assert_cmpint(g_strv_contains((const char *const *)listed->pdata, t[i].name), ==, t[i].word);
    g_assert_cmpint(sim_schedule_splits(t[i].id), ==, t[i].backward == SIM_BACKWARD_SPLIT);
    /* an order from p, m and v alone, or from the stages' times, or neither
     * (TeraPipe's, a file's) */
    g_assert_true(!(t[i].order && t[i].timed));
    g_assert_true(t[i].timed || !t[i].limit_p);
    g_assert_true(!t[i].activation_limit || (t[i].timed && !t[i].limit_p));
    g_assert_true(t[i].route_len && t[i].vstage && t[i].place);
    /* the planner tries only schedules of passes with an order it can make */
    g_assert_true(t[i].search == SIM_SEARCH_NEVER || (t[i].word && t[i].passes && !t[i].activation_limit));
    g_assert_true(t[i].search == SIM_SEARCH_NEVER || t[i].search_rank > 0);
    if (t[i].word)
      g_assert_cmpstr(sim_schedule_words()[words++].word, ==, t[i].name);
  }
  g_assert_null(sim_schedule_words()[words].word);
  g_assert_cmpuint(listed->len - 1, ==, words); /* each word once, nothing else */
  g_ptr_array_free(listed, TRUE);
  for (guint id = 0; id <= SIM_SCHEDULE_ZB_AUTO; id++)
    g_assert_cmpuint(seen[id], ==, 1);
  g_assert_null(sim_schedule_find("all"));
  /* one default per chunk kind, ranks unique per kind */
  for (int looped = 0; looped <= 1; looped++) {
    guint defaults = 0;
    for (guint i = 0; i < n; i++) {
      if (t[i].search == SIM_SEARCH_NEVER || (t[i].chunks == SIM_CHUNKS_ANY) != looped)
        continue;
      defaults += t[i].search == SIM_SEARCH_DEFAULT;
      for (guint j = i + 1; j < n; j++)
        if (t[j].search != SIM_SEARCH_NEVER && (t[j].chunks == SIM_CHUNKS_ANY) == looped)
          g_assert_cmpuint(t[i].search_rank, !=, t[j].search_rank);
    }
    g_assert_cmpuint(defaults, ==, 1);
  }
  /* the defaults --schedule means when not given (doc/schedules.md) */
  g_assert_cmpint(sim_schedule_default(FALSE), ==, SIM_SCHEDULE_1F1B);
  g_assert_cmpint(sim_schedule_default(TRUE), ==, SIM_SCHEDULE_INTERLEAVED);
}

/* Every row's place is the inverse of its vstage over small p, v, m: each
 * (stage, chunk) a microbatch visits is one virtual stage of its route, and
 * each virtual stage one (stage, chunk). */
static void test_table_placement(void) {
  guint n;
  const SimScheduleInfo *t = sim_schedule_table(&n);
  for (guint i = 0; i < n; i++)
    for (guint p = 1; p <= 5; p++)
      for (guint k = 0; k < 3; k++)
        for (guint m = 1; m <= 6; m++) {
          const SimScheduleInfo *row = &t[i];
          guint v = table_chunks(row, k), len = row->route_len(p, v);
          for (guint mb = 0; mb < m; mb++) {
            guint hits = 0;
            for (guint s = 0; s < p; s++)
              for (guint c = 0; c < v; c++) {
                guint vs = row->vstage(p, v, m, s, c, mb);
                if (vs == G_MAXUINT)
                  continue;
                hits++;
                g_assert_cmpuint(vs, <, len);
                guint s2 = G_MAXUINT, c2 = G_MAXUINT;
                row->place(p, v, m, vs, mb, &s2, &c2);
                g_assert_cmpuint(s2, ==, s);
                g_assert_cmpuint(c2, ==, c);
              }
            g_assert_cmpuint(hits, ==, len);
            for (guint vs = 0; vs < len; vs++) {
              guint s, c;
              row->place(p, v, m, vs, mb, &s, &c);
              g_assert_cmpuint(s, <, p);
              g_assert_cmpuint(c, <, v);
              g_assert_cmpuint(row->vstage(p, v, m, s, c, mb), ==, vs);
            }
          }
        }
}

/* Every row's order, for small p, m and v its rules allow (the ZB
 * heuristics' for unit times): on each stage exactly the (chunk,
 * microbatch) pairs its placement gives the stage, each once forward and
 * once backward (whole, or B and W where the row splits), F before B
 * before W; and where one direction carries every microbatch, the orders
 * written as torch's CSV read back as a schedule that runs to the end. */
static void test_table_orders(void) {
  guint n;
  const SimScheduleInfo *t = sim_schedule_table(&n);
  for (guint i = 0; i < n; i++) {
    const SimScheduleInfo *row = &t[i];
    if (!row->passes || row->chunks == SIM_CHUNKS_FILE)
      continue;
    g_assert_true(row->order || row->timed);
    for (guint p = 2; p <= 4; p++)
      for (guint k = 0; k < 3; k++)
        for (guint m = 1; m <= 3 * p; m++) {
          guint v = table_chunks(row, k);
          if ((row->m_multiple_of_p && m % p) || (row->even_p_and_m && (p % 2 || m % 2)) ||
              m < row->min_m_per_p * p)
            continue;
          GArray **orders = g_new(GArray *, p);
          for (guint s = 0; s < p; s++)
            orders[s] = g_array_new(FALSE, FALSE, sizeof(SimItem));
          if (row->timed) {
            double one[4] = {1, 1, 1, 1};
            double tf[4], tb[4], tw[4];
            for (guint s = 0; s < p; s++)
              tf[s] = tb[s] = tw[s] = one[s];
            sim_schedule_zb_auto(p, m, tf, tb, tw, 0, 1, 0.5, row->limit_p ? row->limit_p * p : 2 * p, orders);
          } else
            for (guint s = 0; s < p; s++)
              sim_schedule_order(row->id, p, m, v, s, orders[s]);
          gboolean split_seen = FALSE;
          for (guint s = 0; s < p; s++) {
            /* per (chunk, mb): position of F, B (whole or input), W */
            gint *pf = g_new(gint, v * m), *pb = g_new(gint, v * m), *pw = g_new(gint, v * m);
            gboolean *input = g_new0(gboolean, v * m); /* its backward is B alone: a W is owed */
            for (guint j = 0; j < v * m; j++)
              pf[j] = pb[j] = pw[j] = -1;
            GArray *o = orders[s];
            for (guint j = 0; j < o->len; j++) {
              SimItem it = g_array_index(o, SimItem, j);
              g_assert_cmpuint(it.chunk, <, v);
              g_assert_cmpuint(it.microbatch, <, m);
              g_assert_cmpuint(row->vstage(p, v, m, s, it.chunk, it.microbatch), !=, G_MAXUINT);
              guint x = it.chunk * m + it.microbatch;
              gint *slot = it.forward ? &pf[x] : it.grad == SIM_GRAD_WEIGHT ? &pw[x] : &pb[x];
              g_assert_cmpint(*slot, ==, -1);
              *slot = (gint)j;
              if (!it.forward && it.grad != SIM_GRAD_ALL) {
                g_assert_cmpint(row->backward, ==, SIM_BACKWARD_SPLIT);
                split_seen = TRUE;
              }
              if (!it.forward && it.grad != SIM_GRAD_WEIGHT)
                input[x] = it.grad == SIM_GRAD_INPUT;
            }
            for (guint c = 0; c < v; c++)
              for (guint mb = 0; mb < m; mb++) {
                guint x = c * m + mb;
                if (row->vstage(p, v, m, s, c, mb) == G_MAXUINT) {
                  g_assert_cmpint(pf[x], ==, -1);
                  continue;
                }
                g_assert_cmpint(pf[x], >=, 0);
                g_assert_cmpint(pb[x], >, pf[x]);
                if (input[x])
                  g_assert_cmpint(pw[x], >, pb[x]);
                else
                  g_assert_cmpint(pw[x], ==, -1);
              }
            g_free(pf);
            g_free(pb);
            g_free(pw);
            g_free(input);
          }
          if (row->copies) /* two directions: a virtual stage on two ranks, which torch's CSV cannot say */
            ;
          else {
            SimPlan plan = {.pp = p, .chunks = v, .microbatches = m, .schedule = row->id};
            char *csv = sim_schedule_csv_orders(&plan, orders);
            GError *err = NULL;
            SimScheduleFile *f = sim_schedule_file_parse(csv, strlen(csv), "table", p, m, &err);
            if (!f)
              g_error("%s p=%u m=%u v=%u: %s\n%s", row->name, p, m, v, err->message, csv);
            g_assert_cmpuint(f->v, ==, v);
            g_assert_cmpint(f->splits, ==, split_seen);
            for (guint s = 0; s < p; s++)
              for (guint c = 0; c < v; c++)
                g_assert_cmpuint(f->stage_of[s * v + c], ==, row->vstage(p, v, m, s, c, 0));
            sim_schedule_file_free(f);
            g_free(csv);
          }
          for (guint s = 0; s < p; s++)
            g_array_free(orders[s], TRUE);
          g_free(orders);
        }
  }
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  GError *error = NULL;
  selene = topo_cluster_load("selene", &error);
  g_assert_no_error(error);
  ideal = model_profile_load("ideal", &error);
  g_assert_no_error(error);
  a100 = model_profile_load("a100-sxm4-80gb", &error);
  g_assert_no_error(error);

  g_test_add_func("/schedules/table/names", test_table_names);
  g_test_add_func("/schedules/table/placement", test_table_placement);
  g_test_add_func("/schedules/table/orders", test_table_orders);
  g_test_add_func("/schedules/order/gpipe-1f1b", test_orders_gpipe_1f1b);
  g_test_add_func("/schedules/order/interleaved", test_orders_interleaved);
  g_test_add_func("/schedules/order/no-deadlock", test_orders_no_deadlock);
  g_test_add_func("/schedules/bubble/identities", test_bubble_identities);
  g_test_add_func("/schedules/bubble/identities-tp-dp", test_bubble_identities_tp_dp);
  g_test_add_func("/schedules/symmetry/uniform-placement", test_symmetry);
  g_test_add_func("/schedules/symmetry/straddling-nodes", test_symmetry_straddling_nodes);
  g_test_add_func("/schedules/volumes", test_volumes);
  g_test_add_func("/schedules/bisection-one-direction", test_bisection_one_direction);
  g_test_add_func("/schedules/zero-bytes-and-memory", test_zero_bytes_and_memory);
  g_test_add_func("/schedules/zero-prefetch", test_zero_prefetch);
  g_test_add_func("/schedules/flops", test_flops);
  g_test_add_func("/schedules/breakdown-sums", test_breakdown_sums);
  g_test_add_func("/schedules/memory/inflight", test_memory_inflight);
  g_test_add_func("/schedules/memory/recompute", test_memory_recompute);
  g_test_add_func("/schedules/uneven/ideal", test_uneven_ideal);
  g_test_add_func("/schedules/uneven/params", test_uneven_params);
  g_test_add_func("/schedules/uneven/memory", test_uneven_memory);
  g_test_add_func("/schedules/uneven/dp-and-optimizer", test_uneven_dp_and_optimizer);
  g_test_add_func("/schedules/uneven/symmetry", test_uneven_symmetry);
  int rc = g_test_run();
  topo_cluster_free(selene);
  model_profile_free(ideal);
  model_profile_free(a100);
  return rc;
}
