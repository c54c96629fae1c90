/* ptdsim — the figures of today's questions end to end through the real
 * binary: today-machines (Llama 3 70B on 1024 GPUs of each machine) and
 * today-runtime (Llama 3 405B's days and effective training time as the
 * cluster grows, by checkpoint interval). */
#include <cjson/cJSON.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "cli_harness.h"

static const cJSON *row_of(const cJSON *rows, const char *key, const char *value, double gpus) {
  const cJSON *r;
  cJSON_ArrayForEach(r, rows) {
    if (strcmp(str(r, key), value) == 0 && (gpus == 0 || num(r, "gpus") == gpus))
      return r;
  }
  g_error("no row %s = %s (%g GPUs)", key, value, gpus);
  return NULL;
}

/* Why: the buyer's question: the same recipe on each machine, days and
 * GPU-hours for 15T tokens. Each row must be what `run` says for that
 * machine, the days must be the iteration time times the iterations, and
 * the ordering must follow the hardware (Blackwell ahead, the H800's narrow
 * NVLink behind). */
static void test_machines(void) {
  cJSON *j = run_json("figure today-machines --format json");
  const cJSON *rows = arr(j, "rows");
  g_assert_cmpint(cJSON_GetArraySize(rows), ==, 8);
  const cJSON *r;
  cJSON_ArrayForEach(r, rows) {
    g_assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "fits_in_memory")));
    /* 15T tokens in batches of 512 x 8192 tokens, each one iteration */
    double iterations = ceil(15e12 / (512.0 * 8192));
    double days = num(r, "training_days");
    g_assert_cmpfloat(fabs(days - iterations * num(r, "iteration_time_s") / 86400) / days, <, 1e-3);
    g_assert_cmpfloat(fabs(num(r, "gpu_hours") - days * 24 * 1024) / num(r, "gpu_hours"), <, 1e-9);
    g_assert_cmpfloat(num(r, "run_days"), >, days);
    g_assert_cmpfloat(num(r, "effective_training_time"), <, 1);
  }
  /* the row of one machine is `run` of the recipe on it */
  cJSON *run = run_json("run --model llama3-70b --gpus 1024 --tp 8 --pp 4 --global-batch 512 --micro-batch 1 "
                        "--sequence-parallel --distributed-optimizer --recompute selective --cluster p5.48xlarge "
                        "--nodes 128 --tokens 15T --format json");
  const cJSON *p5 = row_of(rows, "cluster", "p5.48xlarge", 0);
  g_assert_cmpfloat(num(p5, "iteration_time_s"), ==, num(run, "iteration_time_s"));
  g_assert_cmpfloat(num(p5, "run_days"), ==, num(obj(obj(run, "whole_run"), "expected"), "days"));
  cJSON_Delete(run);
  double h100 = num(row_of(rows, "cluster", "dgx-h100-superpod", 0), "training_days");
  g_assert_cmpfloat(num(row_of(rows, "cluster", "gb200-nvl72", 0), "training_days"), <, 0.6 * h100);
  g_assert_cmpfloat(num(row_of(rows, "cluster", "dgx-b200", 0), "training_days"), <, 0.6 * h100);
  g_assert_cmpfloat(num(row_of(rows, "cluster", "h800-cluster", 0), "training_days"), >, h100);
  cJSON_Delete(j);
  Proc p = run_line("figure today-machines --cluster selene");
  assert_one_line_error(&p, "leave --cluster and --profile out");
  proc_clear(&p);
}

/* Why: a planner's question: how often to checkpoint as the cluster grows.
 * Failures grow with the GPUs, so at a fixed interval the effective
 * training time falls with size, a long interval loses most, and Daly's
 * optimum does at least as well as a two-hour interval; the failure rate
 * grows with the GPUs. */
static void test_runtime(void) {
  cJSON *j = run_json("figure today-runtime --network analytic --format json");
  const cJSON *rows = arr(j, "rows");
  g_assert_cmpint(cJSON_GetArraySize(rows), ==, 16);
  static const double sizes[] = {4096, 8192, 16384, 32768};
  static const char *const series[] = {"every 10 min", "every 30 min", "every 2 h", "Daly's optimum"};
  for (guint s = 0; s < 4; s++) {
    double last = 2;
    for (guint i = 0; i < 4; i++) {
      const cJSON *r = row_of(rows, "series", series[s], sizes[i]);
      double ett = num(r, "effective_training_time");
      g_assert_cmpfloat(ett, <, last);
      last = ett;
      g_assert_cmpfloat(num(r, "run_days"), >, num(r, "ideal_days"));
      /* failures scale with the GPUs, their nodes and switches alike: the
       * mean time between them times the GPUs is the same at every size */
      double first = num(row_of(rows, "series", series[s], sizes[0]), "mtbf_hours") * sizes[0];
      g_assert_cmpfloat(fabs(num(r, "mtbf_hours") * sizes[i] - first) / first, <, 1e-12);
    }
  }
  for (guint i = 0; i < 4; i++) {
    double daly = num(row_of(rows, "series", "Daly's optimum", sizes[i]), "run_days");
    g_assert_cmpfloat(daly, <, num(row_of(rows, "series", "every 2 h", sizes[i]), "run_days"));
    g_assert_cmpfloat(num(row_of(rows, "series", "every 10 min", sizes[i]), "checkpoint_interval_s"), <=, 600 + 60);
  }
  cJSON_Delete(j);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  g_test_add_func("/today-figures/machines", test_machines);
  g_test_add_func("/today-figures/runtime", test_runtime);
  return g_test_run();
}
