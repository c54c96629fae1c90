/* Unit tests of the whole-run model (runtime/): Young's and Daly's
 * intervals, the exact expectation of a segment and of a run, the expected
 * lost work, the Monte-Carlo against the analytic, determinism and the
 * one-line errors.  Expected values are written out here from the closed
 * forms, not copied from the code's output. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "../runtime/runtime.h"

static void assert_rel(double got, double want, double rel) {
  if (fabs(got - want) > rel * fabs(want))
    g_assert_cmpfloat_with_epsilon(got, want, rel * fabs(want));
}

/* A small run: 10,000 iterations of 12 s, 64 GPUs on 8 nodes, a checkpoint
 * of 1 TB written at 10 GB/s per node (80 GB/s: 12.5 s), failures often
 * enough that a run sees dozens. */
static void small_run(RtInput *in, RtOptions *o) {
  *in = (RtInput){.iteration_s = 12.0,
                  .tokens_per_iteration = 1e6,
                  .tokens = 1e10,
                  .gpus = 64,
                  .gpus_per_node = 8,
                  .checkpoint_bytes = 1e12,
                  .rank_bytes = 20e9};
  rt_options_default(o);
  o->gpu_rate = 1e-3;
  o->node_rate = 2e-3;
  o->switch_rate = 1e-3;
  o->restart_s = 300;
  o->storage_node_Bps = 10e9;
  o->storage_Bps = 1e15;
}

static void test_young_daly(void) {
  double delta = 120, M = 3 * 3600.0;
  g_assert_cmpfloat(rt_young_interval(delta, M), ==, sqrt(2 * delta * M));
  double x = delta / (2 * M);
  double daly = sqrt(2 * delta * M) * (1 + sqrt(x) / 3 + x / 9) - delta;
  assert_rel(rt_daly_interval(delta, M), daly, 1e-15);
  /* delta >= 2M: the interval is M (Daly's eq. 37, second branch) */
  g_assert_cmpfloat(rt_daly_interval(3 * M, M), ==, M);
  /* the run's interval: Daly's optimum at the run's MTBF and write time,
   * rounded to whole iterations */
  RtInput in;
  RtOptions o;
  small_run(&in, &o);
  RtResult r;
  g_assert_true(rt_run(&in, &o, &r, NULL));
  double lambda_h = 64 * 1e-3 + 8 * 2e-3 + 4 * 1e-3; /* 64 GPUs, 8 nodes, 4 switches of 16 GPUs */
  assert_rel(r.failures_per_hour, lambda_h, 1e-15);
  double write = 1e12 / (8 * 10e9);
  assert_rel(r.write_s, write, 1e-15);
  double Ms = 3600 / lambda_h;
  assert_rel(r.young_s, sqrt(2 * write * Ms), 1e-14);
  assert_rel(r.daly_s, rt_daly_interval(write, Ms), 1e-14);
  g_assert_cmpuint(r.every_iterations, ==, (guint64)llround(rt_daly_interval(write, Ms) / 12.0));
}

static void test_segment_and_run(void) {
  /* a segment: failed attempts are geometric with P(success) = e^{-lambda L} */
  double L = 1000, lambda = 1e-4, R = 50;
  double p = exp(-lambda * L);
  double want = (1 - p) / (lambda * p) + R * (1 - p) / p;
  assert_rel(rt_segment_expected_s(L, lambda, R), want, 1e-12);
  g_assert_cmpfloat(rt_segment_expected_s(L, 0, R), ==, L);

  /* the run: full segments of k iterations and the rest, each ending in a
   * synchronous write; R = restart + read */
  RtInput in;
  RtOptions o;
  small_run(&in, &o);
  o.every.iterations = 300;
  RtResult r;
  g_assert_true(rt_run(&in, &o, &r, NULL));
  g_assert_true(r.exact);
  g_assert_cmpuint(r.iterations, ==, 10000);
  double lam = (64 * 1e-3 + 8 * 2e-3 + 4 * 1e-3) / 3600.0, write = 12.5, Rr = 300 + write;
  double Lf = 300 * 12.0 + write, Lr = 100 * 12.0 + write; /* 33 full segments and 100 iterations */
  double E = 33 * expm1(lam * Lf) * (1 / lam + Rr) + expm1(lam * Lr) * (1 / lam + Rr);
  assert_rel(r.expected_days * 86400, E, 1e-12);
  assert_rel(r.ideal_days * 86400, 10000 * 12.0, 1e-15);
  assert_rel(r.effective_training_time, 120000.0 / E, 1e-12);
  assert_rel(r.interruptions, 33 * expm1(lam * Lf) + expm1(lam * Lr), 1e-12);
  assert_rel(r.checkpoint_hours * 3600, 34 * write, 1e-12);
  assert_rel(r.gpu_hours, E / 3600 * 64, 1e-12);
}

/* The expected work lost to one interruption is E[X | X < L] =
 * 1/lambda - L / (e^{lambda L} - 1), about L/2 when failures are rare. */
static void test_lost_work(void) {
  RtInput in;
  RtOptions o;
  small_run(&in, &o);
  o.every.iterations = 250; /* 40 segments, none partial */
  RtResult r;
  g_assert_true(rt_run(&in, &o, &r, NULL));
  double lam = r.failures_per_hour / 3600, L = 250 * 12.0 + 12.5;
  double per = r.lost_work_hours * 3600 / r.interruptions;
  assert_rel(per, 1 / lam - L / expm1(lam * L), 1e-9);
  o.gpu_rate = o.node_rate = o.switch_rate = 1e-7; /* rare: the first-order L/2 */
  g_assert_true(rt_run(&in, &o, &r, NULL));
  assert_rel(r.lost_work_hours * 3600 / r.interruptions, L / 2, 1e-3);
}

/* The Monte-Carlo's mean within three of its standard errors of the exact
 * expectation: with hot spares (unlimited) and with none (each node
 * failure waits for its repair). */
static void test_monte_carlo(void) {
  RtInput in;
  RtOptions o;
  small_run(&in, &o);
  o.every.iterations = 300;
  o.trials = 4000;
  o.seed = 7;
  for (int spares = -1; spares <= 0; spares++) {
    o.spares = spares;
    o.repair_s = 3600;
    RtResult r;
    g_assert_true(rt_run(&in, &o, &r, NULL));
    g_assert_true(r.exact);
    g_test_message("spares %d: analytic %.6f days, Monte-Carlo %.6f +- %.6f", spares, r.expected_days,
                   r.mc_mean_days, r.mc_stderr_days);
    g_assert_cmpfloat(r.mc_stderr_days, >, 0);
    g_assert_cmpfloat(fabs(r.mc_mean_days - r.expected_days), <, 3 * r.mc_stderr_days);
    g_assert_cmpfloat(r.mc_median_days, <=, r.mc_p90_days);
    assert_rel(r.mc_interruptions, r.interruptions, 0.02);
  }
}

/* Asynchronous writes: the Monte-Carlo runs the exact rule (a failure
 * before the previous write finishes rolls back two segments); the
 * analytic is first order, close when the write is short beside the
 * interval.  Fewer spares never make a trial faster (the trials draw the
 * same numbers). */
static void test_async_and_spares(void) {
  RtInput in;
  RtOptions o;
  small_run(&in, &o);
  o.every.iterations = 300;
  o.trials = 2000;
  o.async = TRUE;
  RtResult a;
  g_assert_true(rt_run(&in, &o, &a, NULL));
  g_assert_false(a.exact);
  assert_rel(a.blocking_s, 1e12 / 8 / 10e9 > 300 * 12.0 ? 0 : 20e9 / 25e9, 1e-12); /* the snapshot alone */
  assert_rel(a.mc_mean_days, a.expected_days, 0.01);
  o.async = FALSE;
  RtResult s;
  g_assert_true(rt_run(&in, &o, &s, NULL));
  g_assert_cmpfloat(a.checkpoint_hours, <, s.checkpoint_hours); /* a 0.8 s snapshot blocks less than a 12.5 s write */

  o.repair_s = 6 * 3600;
  double prev = 0;
  for (gint64 spares = -1; spares <= 4; spares++) {
    if (spares > 0 && spares < 4)
      continue;
    o.spares = spares == -1 ? -1 : 4 - spares; /* unlimited, 4, 0 */
    RtResult r;
    g_assert_true(rt_run(&in, &o, &r, NULL));
    g_assert_cmpfloat(r.mc_mean_days, >=, prev);
    prev = r.mc_mean_days;
  }
}

static void test_deterministic(void) {
  RtInput in;
  RtOptions o;
  small_run(&in, &o);
  o.trials = 300;
  o.seed = 42;
  o.spares = 2;
  RtResult a, b, c;
  g_assert_true(rt_run(&in, &o, &a, NULL));
  g_assert_true(rt_run(&in, &o, &b, NULL));
  g_assert_cmpmem(&a, sizeof a, &b, sizeof b);
  o.seed = 43;
  g_assert_true(rt_run(&in, &o, &c, NULL));
  g_assert_cmpfloat(a.mc_mean_days, !=, c.mc_mean_days);
}

static void test_errors(void) {
  RtInput in;
  RtOptions o;
  RtResult r;
  GError *e = NULL;
  small_run(&in, &o);
  o.node_rate = -1e-6;
  g_assert_false(rt_run(&in, &o, &r, &e));
  g_assert_nonnull(strstr(e->message, "below zero"));
  g_assert_null(strchr(e->message, '\n'));
  g_clear_error(&e);
  small_run(&in, &o);
  o.every.seconds = 5; /* an iteration is 12 s */
  g_assert_false(rt_run(&in, &o, &r, &e));
  g_assert_nonnull(strstr(e->message, "shorter than one iteration"));
  g_clear_error(&e);
  small_run(&in, &o);
  o.every.iterations = 20000;
  g_assert_false(rt_run(&in, &o, &r, &e));
  g_assert_nonnull(strstr(e->message, "longer than the run"));
  g_clear_error(&e);
  small_run(&in, &o);
  in.tokens = 0;
  g_assert_false(rt_run(&in, &o, &r, &e));
  g_assert_nonnull(strstr(e->message, "--tokens"));
  g_clear_error(&e);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/runtime/young-daly", test_young_daly);
  g_test_add_func("/runtime/segment-and-run", test_segment_and_run);
  g_test_add_func("/runtime/lost-work", test_lost_work);
  g_test_add_func("/runtime/monte-carlo", test_monte_carlo);
  g_test_add_func("/runtime/async-and-spares", test_async_and_spares);
  g_test_add_func("/runtime/deterministic", test_deterministic);
  g_test_add_func("/runtime/errors", test_errors);
  return g_test_run();
}
