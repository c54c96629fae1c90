/* ptdsim — tests of the periodic steady state (sim/steady.h): the exact
 * repeated sum, the proof on small graphs, and PTD-P runs carried in closed
 * form against the same runs simulated op by op. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "../models/transformer.h"
#include "../sim/engine.h"
#include "../plan/plan.h"
#include "../sim/steady.h"
#include "test_plain.h"
#include "../ptdp/ptdp.h"
#include "../plan/validate.h"

static TopoCluster *selene;
static ModelProfile *a100;

/* n additions of x from 0, one after another, as a loop does them. */
static void test_repeat_add(void) {
  GRand *rng = g_rand_new_with_seed(14);
  const double fixed[] = {1.0, 0.1, 3.0, 1e-3, 7.25, 1.0 / 3, 2251799813685248.0, 123456789.123, 5e15, 0.0};
  for (guint trial = 0; trial < 400; trial++) {
    double x = trial < G_N_ELEMENTS(fixed) ? fixed[trial]
                                           : ldexp(g_rand_double_range(rng, 1, 2), g_rand_int_range(rng, -30, 50));
    guint64 n = trial % 3 == 0 ? (guint64)g_rand_int_range(rng, 0, 200) : (guint64)g_rand_int_range(rng, 0, 300000);
    double loop = 0;
    for (guint64 i = 0; i < n; i++)
      loop += x;
    double fast = sim_steady_repeat_add(x, n);
    if (fast != loop)
      g_error("x = %.17g, n = %" G_GUINT64_FORMAT ": %.17g, the loop gives %.17g", x, n, fast, loop);
  }
  /* past 2^53 the sum stops growing where x is below half its spacing */
  double big = 9007199254740992.0;
  g_assert_cmpfloat(sim_steady_repeat_add(big, 3) + 0.0, ==, big * 3);
  g_rand_free(rng);
}

/* A stream of identical ops after a longer first one, on one stream, and a
 * second stream whose ops each wait for the first's: periodic from the
 * first op on, with period the op's length. */
static SimEngine *chain(guint n, SimTime first, SimTime each, SimTime odd_at, guint **next) {
  SimEngine *e = sim_engine_new();
  guint s0 = sim_engine_add_stream(e, 0), s1 = sim_engine_add_stream(e, 0);
  *next = g_new(guint, 2 * n);
  for (guint i = 0; i < n; i++) {
    guint a = sim_engine_add_op1(e, i == 0 ? first : i == odd_at ? each + 1 : each, s0, NULL);
    guint b = sim_engine_add_op1(e, each / 2, s1, NULL);
    sim_engine_add_dep(e, a, b);
    (*next)[a] = i + 1 < n ? a + 2 : G_MAXUINT;
    (*next)[b] = i + 1 < n ? b + 2 : G_MAXUINT;
  }
  GError *error = NULL;
  g_assert_true(sim_engine_run(e, &error));
  g_assert_no_error(error);
  return e;
}

static void test_prove(void) {
  guint *next;
  SimSteady st;
  SimEngine *e = chain(12, 50, 10, G_MAXUINT, &next);
  /* ops i start at 50 + 10 (i - 1): a window from the fourth op on repeats */
  g_assert_true(sim_steady_prove(e, next, 80, 10, NULL, NULL, &st));
  g_assert_cmpint(st.tau, ==, 80);
  g_assert_cmpint(st.period, ==, 10);
  g_assert_cmpuint(st.w0_ops, ==, 2);
  g_assert_cmpuint(st.k, ==, 0);
  /* a wrong period, and a window that reaches the long first op */
  g_assert_false(sim_steady_prove(e, next, 80, 20, NULL, NULL, &st));
  g_assert_false(sim_steady_prove(e, next, 50, 10, NULL, NULL, &st));
  /* the last window whose ops all have copies, and the next, whose last op has none */
  g_assert_true(sim_steady_prove(e, next, 140, 10, NULL, NULL, &st));
  g_assert_false(sim_steady_prove(e, next, 150, 10, NULL, NULL, &st));
  sim_engine_free(e);
  g_free(next);
  /* one op a nanosecond longer inside the window */
  e = chain(12, 50, 10, 5, &next);
  g_assert_false(sim_steady_prove(e, next, 80, 10, NULL, NULL, &st));
  g_assert_true(sim_steady_prove(e, next, 120, 10, NULL, NULL, &st));
  sim_engine_free(e);
  g_free(next);
}

/* The plan's iteration with and without the steady state: every field of
 * the result the same; the steady state used where the plan has enough
 * microbatches beyond the short run. */
static void check_same_split(const char *model, guint layers, SimSplit split, guint gpus, guint tp, guint pp,
                             guint batch, const char *schedule, guint chunks, const char *network, const char *ddp,
                             gboolean *used) {
  SimPlanRequest req = {.gpus = gpus, .tp = tp, .pp = pp, .global_batch = batch, .micro_batch = 1,
                        .chunks = chunks, .allow_oom = TRUE, .split = split};
  /* the words as the command line's edge reads them */
  int w;
  if (schedule) {
    g_assert_nonnull(sim_schedule_find(schedule));
    req.schedule = sim_schedule_find(schedule)->id;
    req.schedule_given = TRUE;
  }
  if (network) {
    g_assert_true(ptd_word_value(sim_network_words, network, &w));
    req.network = (SimNetwork)w;
    req.network_given = TRUE;
  }
  if (ddp) {
    g_assert_true(ptd_word_value(sim_ddp_words, ddp, &w));
    req.ddp = (SimDdp)w;
    req.ddp_given = TRUE;
  }
  g_assert_true(model_lookup(model, &req.model));
  if (layers)
    req.model.layers = layers;
  GError *error = NULL;
  SimPlan plan, exact;
  sim_plan_build(&req, selene, &plan, &error);
  g_assert_no_error(error);
  req.exact = TRUE;
  sim_plan_build(&req, selene, &exact, &error);
  g_assert_no_error(error);
  SimResult a, b;
  g_assert_true(sim_ptdp_run(&plan, a100, selene, &a, &error));
  g_assert_no_error(error);
  g_assert_true(sim_ptdp_run(&exact, a100, selene, &b, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(b.steady_periods, ==, 0);
  *used = a.steady_periods > 0;
  a.steady_periods = 0;
  if (memcmp(&a, &b, sizeof a) != 0)
    g_error("%s %u GPUs t%u p%u B%u %s v%u %s %s: %.9f s (%" G_GUINT64_FORMAT " ops) against %.9f s (%" G_GUINT64_FORMAT
            " ops) op by op",
            model, gpus, tp, pp, batch, schedule, chunks, network, ddp, a.iteration_time_s, a.ops, b.iteration_time_s,
            b.ops);
}

static void check_same(const char *model, guint gpus, guint tp, guint pp, guint batch, const char *schedule,
                       guint chunks, const char *network, const char *ddp, gboolean *used) {
  check_same_split(model, 0, (SimSplit){0}, gpus, tp, pp, batch, schedule, chunks, network, ddp, used);
}

static void test_ptdp_same(void) {
  guint used = 0, runs = 0;
  const char *nets[] = {"analytic", "flow"}, *ddps[] = {"local", "torch"};
  for (guint n = 0; n < 2; n++)
    for (guint d = 0; d < 2; d++)
      for (guint pp = 2; pp <= 8; pp *= 2)
        for (guint mult = 1; mult <= 16; mult *= 4) {
          /* the longest runs op by op on the flow network (m up to 384):
           * the plain build's */
          if (mult == 16 && n == 1 && test_sanitized())
            continue;
          gboolean u;
          /* 1F1B: t 8, p, d 2, m = batch / 2 */
          check_same("gpt3-2.7b", 16 * pp, 8, pp, 2 * (pp + 4) * mult, "1f1b", 0, nets[n], ddps[d], &u);
          used += u;
          /* interleaved, two chunks: m a multiple of p */
          check_same("gpt3-2.7b", 16 * pp, 8, pp, 2 * pp * 6 * mult, "interleaved", 2, nets[n], ddps[d], &u);
          used += u;
          runs += 2;
        }
  /* most of the grid is long enough to be carried in closed form */
  g_assert_cmpuint(used, >=, runs / 2);
}

/* Why: with stages of unequal layers the slowest stages set the pace and
 * the others wait at other places in their period, which can alternate
 * from one period to the next; the steady state must be proved on the
 * short run only where the timeline repeats, and then give the very result
 * of the op-by-op run: each kind of split, 1F1B and interleaved, both
 * networks and both DDPs.  On the analytic network every 1F1B split here
 * is carried in closed form (two of them repeat only every second period). */
static void test_ptdp_same_uneven(void) {
  guint used = 0, runs = 0;
  const char *nets[] = {"analytic", "flow"}, *ddps[] = {"local", "torch"};
  /* gpt3-2.7b's 32 layers made 30 (ends of 3 and 3 on p = 4 leave 12 on
   * each middle stage; the embedding and loss counted, 32 / 4 = 8: 7, 8,
   * 8, 7), 31 (the embedding or the loss alone) or 28 (ends of 6) */
  const struct {
    guint layers;
    SimSplit split;
    guint chunks;
  } splits[] = {{30, {3, 3, FALSE, FALSE}, 0}, {30, {0, 0, TRUE, TRUE}, 0}, {31, {0, 0, TRUE, FALSE}, 0},
                {31, {0, 0, FALSE, TRUE}, 2}, {30, {0, 0, TRUE, TRUE}, 2}, {28, {6, 6, FALSE, FALSE}, 2}};
  for (guint n = 0; n < 2; n++)
    for (guint d = 0; d < 2; d++)
      for (guint i = 0; i < G_N_ELEMENTS(splits); i++) {
        gboolean u;
        guint v = splits[i].chunks;
        /* m = 32 (1F1B) or 96 (interleaved): room for the short run */
        check_same_split("gpt3-2.7b", splits[i].layers, splits[i].split, 64, 8, 4, v ? 192 : 64,
                         v ? "interleaved" : "1f1b", v, nets[n], ddps[d], &u);
        if (n == 0 && v == 0 && !u)
          g_test_fail_printf("split %u (%s DDP) on the analytic network was not carried in closed form", i, ddps[d]);
        used += u;
        runs++;
      }
  g_assert_cmpuint(used, >=, runs / 2);
}

/* A run with four times the microbatches carries more periods in closed
 * form on the same short run. */
static void test_periods_carry_m(void) {
  SimPlanRequest req = {.gpus = 128, .tp = 8, .pp = 8, .micro_batch = 1, .network = SIM_NETWORK_ANALYTIC,
                        .network_given = TRUE, .allow_oom = TRUE};
  g_assert_true(model_lookup("gpt3-13b", &req.model));
  guint64 periods[2];
  guint m[2];
  for (guint j = 0; j < 2; j++) {
    req.global_batch = j == 0 ? 512 : 2048;
    SimPlan plan;
    SimResult r;
    GError *error = NULL;
    g_assert_true(sim_plan_build(&req, selene, &plan, &error));
    g_assert_true(sim_ptdp_run(&plan, a100, selene, &r, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(r.steady_periods, >, 0);
    periods[j] = r.steady_periods;
    m[j] = plan.microbatches;
  }
  /* the same short run: every microbatch more per pipeline is one more
   * period of 1F1B, none of them simulated */
  g_assert_cmpuint(m[1], ==, 4 * m[0]);
  g_assert_cmpuint(periods[1] - periods[0], ==, m[1] - m[0]);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  GError *error = NULL;
  selene = topo_cluster_load("selene", &error);
  g_assert_no_error(error);
  a100 = model_profile_load("a100-sxm4-80gb", &error);
  g_assert_no_error(error);
  g_test_add_func("/steady/repeat-add", test_repeat_add);
  g_test_add_func("/steady/prove", test_prove);
  g_test_add_func("/steady/ptdp-same-as-op-by-op", test_ptdp_same);
  g_test_add_func("/steady/uneven-same-as-op-by-op", test_ptdp_same_uneven);
  g_test_add_func("/steady/periods-carry-m", test_periods_carry_m);
  int rc = g_test_run();
  topo_cluster_free(selene);
  model_profile_free(a100);
  return rc;
}
