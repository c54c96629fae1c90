/* End-to-end tests of the whole run (runtime/) through the real binary:
 * run's whole_run object against the closed forms recomputed here from the
 * run's own iteration time and the model's parameters; the same seed gives
 * the same bytes; plan and sweep carry it; nonsense is one line. */
#include <math.h>
#include <string.h>

#include "cli_harness.h"

#define RUN "run --model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 36 --network analytic --format json"

static void assert_rel(double got, double want, double rel) {
  if (fabs(got - want) > rel * fabs(want))
    g_assert_cmpfloat_with_epsilon(got, want, rel * fabs(want));
}

static void test_whole_run_json(void) {
  cJSON *run = run_json(RUN " --tokens 3B --checkpoint-every 40 --storage-bw 5 --restart-time 120 "
                            "--gpu-failure-rate 1e-3 --node-failure-rate 0 --switch-failure-rate 0");
  const cJSON *w = obj(run, "whole_run"), *c = obj(w, "checkpoint"), *e = obj(w, "expected");
  double T = num(run, "iteration_time_s"), P = num(obj(run, "config"), "parameters");
  double N = ceil(3e9 / (36 * 2048.0));
  g_assert_cmpfloat(num(w, "iterations"), ==, N);
  /* the checkpoint: 2 bytes of weights and 12 of optimizer state per parameter */
  g_assert_cmpfloat(num(c, "bytes"), ==, 14 * P);
  double write = 14 * P / 5e9; /* 12 nodes x 25 GB/s, capped by the 5 GB/s storage */
  assert_rel(num(c, "write_s"), write, 1e-12);
  g_assert_cmpfloat(num(c, "every_iterations"), ==, 40);
  /* the exact expectation: full segments and the rest, R = restart + read */
  double lam = 96 * 1e-3 / 3600, R = 120 + write;
  double full = floor(N / 40), rest = N - 40 * full;
  double E = full * expm1(lam * (40 * T + write)) * (1 / lam + R) +
             (rest > 0 ? expm1(lam * (rest * T + write)) * (1 / lam + R) : 0);
  assert_rel(num(e, "days") * 86400, E, 1e-9);
  assert_rel(num(e, "effective_training_time"), N * T / E, 1e-9);
  g_assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "exact")));
  g_assert_null(cJSON_GetObjectItemCaseSensitive(w, "monte_carlo"));
  cJSON_Delete(run);

  /* the default interval is Daly's optimum, rounded to iterations */
  run = run_json(RUN " --tokens 3B");
  c = obj(obj(run, "whole_run"), "checkpoint");
  g_assert_cmpstr(str(c, "interval_from"), ==, "daly");
  g_assert_cmpfloat(num(c, "every_iterations"), ==,
                    fmax(1, round(num(c, "daly_interval_s") / num(run, "iteration_time_s"))));
  const cJSON *f = obj(obj(run, "whole_run"), "failures");
  assert_rel(num(f, "gpu_per_hour"), 268.0 / (16384 * 54 * 24.0), 1e-12);
  cJSON_Delete(run);
  /* no --tokens, no whole run */
  run = run_json(RUN);
  g_assert_null(cJSON_GetObjectItemCaseSensitive(run, "whole_run"));
  cJSON_Delete(run);
}

static void test_monte_carlo_seed(void) {
  const char *a = RUN " --tokens 30B --gpu-failure-rate 1e-3 --trials 400 --seed 5";
  Proc p = run_line(a), q = run_line(a), r = run_line(RUN " --tokens 30B --gpu-failure-rate 1e-3 --trials 400 --seed 6");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_cmpstr(p.out, ==, q.out);
  g_assert_cmpstr(p.out, !=, r.out);
  cJSON *run = parse_json(&p);
  const cJSON *mc = obj(obj(run, "whole_run"), "monte_carlo"), *e = obj(obj(run, "whole_run"), "expected");
  g_assert_cmpfloat(num(mc, "trials"), ==, 400);
  g_assert_cmpfloat(fabs(num(mc, "mean_days") - num(e, "days")), <, 3 * num(mc, "stderr_days"));
  g_assert_cmpfloat(num(mc, "median_days"), <=, num(mc, "p90_days"));
  cJSON_Delete(run);
  proc_clear(&p);
  proc_clear(&q);
  proc_clear(&r);
}

static void test_text_plan_sweep(void) {
  Proc p = run_line("run --model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 36 --network analytic --tokens 3B "
                    "--trials 20 --checkpoint async --spare-nodes 2");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "\nwhole run  "));
  g_assert_nonnull(strstr(p.out, "effective training time"));
  g_assert_nonnull(strstr(p.out, " snapshot every "));
  g_assert_nonnull(strstr(p.out, "\nspares     2 hot spare nodes"));
  g_assert_nonnull(strstr(p.out, "\ntrials     20 Monte-Carlo runs"));
  proc_clear(&p);
  cJSON *plan = run_json("plan --model gpt3-175b --gpus 96 --global-batch 36 --tp 8 --pp 12 --network analytic "
                         "--tokens 3B --format json");
  const cJSON *row = cJSON_GetArrayItem(arr(plan, "rows"), 0);
  g_assert_cmpfloat(num(row, "whole_run_days"), >, num(row, "training_days"));
  g_assert_cmpfloat(num(row, "effective_training_time"), <, 1);
  cJSON_Delete(plan);
  p = run_line("sweep --model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 36 --network analytic --tokens 3B "
               "--checkpoint-every 20,80");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "whole_run.expected.days"));
  g_assert_nonnull(strstr(p.out, "whole_run.checkpoint.every_iterations"));
  proc_clear(&p);
}

static void test_errors(void) {
  static const CliBadCase cases[] = {
      {NULL, RUN " --tokens 3B --gpu-failure-rate -1", "--gpu-failure-rate '-1' is not a failure rate"},
      {NULL, RUN " --tokens 3B --node-failure-rate x", "--node-failure-rate 'x'"},
      {NULL, RUN " --tokens 3B --checkpoint-every 1s", "shorter than one iteration"},
      {NULL, RUN " --tokens 3B --checkpoint-every 0", "--checkpoint-every '0'"},
      {NULL, RUN " --tokens 3B --checkpoint-every 10days", "--checkpoint-every '10days'"},
      {NULL, RUN " --tokens 3B --checkpoint-every 99999999", "longer than the run"},
      {NULL, RUN " --trials 10", "needs a token budget"},
      {NULL, RUN " --tokens 3B --spare-nodes 1.5", "--spare-nodes '1.5' is not a whole number"},
      {NULL, RUN " --tokens 3B --storage-bw 0", "--storage-bw '0'"},
      {NULL, RUN " --tokens 3B --checkpoint sometimes", "--checkpoint"},
  };
  cli_test_bad_each(cases, G_N_ELEMENTS(cases));
}

/* Stragglers end to end: a slow stage makes itself critical and costs
 * time; one slow GPU of that stage costs the same as the whole stage on the
 * analytic network (its tensor-parallel group waits for it at every
 * all-reduce, the other replica at the data-parallel one); a rail down slows
 * the data-parallel all-reduce on both networks; the same seed draws the
 * same speeds; nonsense is one line. */
static void test_stragglers(void) {
  const char *base = "run --model gpt3-175b --gpus 192 --tp 8 --pp 12 --global-batch 64 --format json";
  char *a = g_strdup_printf("%s --slow stage:5=0.8 --network analytic", base),
       *b = g_strdup_printf("%s --slow 85=0.8 --network analytic", base);
  cJSON *ra = run_json(a), *rb = run_json(b);
  const cJSON *sa = obj(ra, "stragglers"), *sb = obj(rb, "stragglers");
  g_assert_cmpfloat(num(sa, "critical_stage"), ==, 5);
  g_assert_cmpfloat(num(sa, "slowest_gpu_stage"), ==, 5);
  g_assert_cmpfloat(num(sb, "slowest_gpu"), ==, 85);
  g_assert_cmpfloat(num(sa, "cost_s"), >, 0);
  g_assert_cmpfloat(num(ra, "iteration_time_s"), ==, num(rb, "iteration_time_s"));
  g_assert_cmpfloat(num(ra, "iteration_time_s") - num(sa, "iteration_time_s_without"), ==, num(sa, "cost_s"));
  cJSON_Delete(ra);
  cJSON_Delete(rb);
  g_free(a);
  g_free(b);
  for (guint net = 0; net < 2; net++) {
    char *c = g_strdup_printf("%s --network %s", base, net ? "analytic" : "flow");
    char *d = g_strdup_printf("%s --network %s --slow-link rail:0=0", base, net ? "analytic" : "flow");
    cJSON *rc = run_json(c), *rd = run_json(d);
    g_assert_cmpfloat(num(obj(rd, "time_breakdown_s"), "dp_comm"), >, 1.5 * num(obj(rc, "time_breakdown_s"), "dp_comm"));
    g_assert_cmpfloat(num(obj(rd, "stragglers"), "iteration_time_s_without"), ==, num(rc, "iteration_time_s"));
    cJSON_Delete(rc);
    cJSON_Delete(rd);
    g_free(c);
    g_free(d);
  }
  char *e = g_strdup_printf("%s --gpu-speed lognormal:0.05 --seed 9", base);
  Proc p = run_line(e), q = run_line(e);
  g_assert_cmpint(p.status, ==, 0);
  g_assert_cmpstr(p.out, ==, q.out);
  proc_clear(&p);
  proc_clear(&q);
  g_free(e);
  static const CliBadCase cases[] = {
      {NULL, RUN " --slow 5=0", "0 < FACTOR <= 1"},
      {NULL, RUN " --slow 5=-1", "0 < FACTOR <= 1"},
      {NULL, RUN " --slow 96=0.5", "outside the run's 96"},
      {NULL, RUN " --slow stage:12=0.5", "names stage 12"},
      {NULL, RUN " --slow-link rail:8=0.5", "names rail 8"},
      {NULL, RUN " --gpu-speed normal:1", "--gpu-speed 'normal:1'"},
      {NULL, RUN " --seed x", "--seed 'x'"},
  };
  cli_test_bad_each(cases, G_N_ELEMENTS(cases));
}


static double iter_of(const char *args) {
  cJSON *j = run_json(args);
  double t = num(j, "iteration_time_s");
  cJSON_Delete(j);
  return t;
}

/* Why: on the analytic network a slow NIC must slow what crosses it: the
 * pipeline sends leaving node 0 (one stage a node) and a tensor-parallel
 * ring of 16 across two nodes, not only the data-parallel rings. */
static void test_analytic_slow_links(void) {
  const char *pp = "run --model gpt3-175b --gpus 128 --tp 8 --pp 16 --global-batch 64 --cluster dgx-h100-superpod "
                   "--network analytic --format json";
  double base = iter_of(pp);
  char *slow = g_strconcat(pp, " --slow-link node:0=0.25", NULL);
  g_assert_cmpfloat(iter_of(slow), >, base);
  g_free(slow);
  const char *tp = "run --model gpt3-175b --gpus 128 --tp 16 --pp 8 --global-batch 64 --cluster dgx-h100-superpod "
                   "--network analytic --format json";
  base = iter_of(tp);
  slow = g_strconcat(tp, " --slow-link node:1=0.5", NULL);
  g_assert_cmpfloat(iter_of(slow), >, base * 1.05);
  g_free(slow);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  g_test_add_func("/runtime-cli/whole-run-json", test_whole_run_json);
  g_test_add_func("/runtime-cli/monte-carlo-seed", test_monte_carlo_seed);
  g_test_add_func("/runtime-cli/text-plan-sweep", test_text_plan_sweep);
  g_test_add_func("/runtime-cli/errors", test_errors);
  g_test_add_func("/runtime-cli/stragglers", test_stragglers);
  g_test_add_func("/runtime-cli/analytic-slow-links", test_analytic_slow_links);
  return g_test_run();
}
