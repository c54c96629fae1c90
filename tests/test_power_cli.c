/* End-to-end tests of the GPUs' power cap, through the real binary: a cap
 * below the rated one slows the GEMMs by the clock the profile's power
 * model allows, and the step's clock effect prices it; the cap given by
 * the cluster's file is the same as --power-limit; plan and sweep honour
 * it; bad caps are refused with one line. */
#include <math.h>
#include <string.h>

#include "cli_harness.h"
#include "test_tmp.h"

#define MACHINE "--cluster dgx-h100-superpod --profile h100-sxm5-80gb-measured"
#define SHAPE "--model llama3-8b --gpus 8 --tp 8 --global-batch 8"
#define RUN "run " SHAPE " " MACHINE " --format json"

static char *tmpdir;

/* The measured H100's rated cap, settled clock and sustained ratio, read
 * from its file. */
static void h100_power(double *rated, double *settled, double *ratio) {
  cJSON *p = load_shipped("calibrate/profiles", "h100-sxm5-80gb-measured");
  const cJSON *pw = obj(p, "power");
  *rated = num(pw, "rated_W");
  *settled = num(pw, "sustained_clock_MHz");
  *ratio = num(p, "sustained_clock_ratio");
  cJSON_Delete(p);
}

/* A cap under the rated one: slower, the clock effect larger by as much,
 * the clock and the ratio the run reports below the rated cap's; lower
 * caps slower still.  At the rated cap the run is the default run (the
 * profile's own sustained ratio, exactly). */
static void test_cap_slows(void) {
  double rated, settled, ratio;
  h100_power(&rated, &settled, &ratio);
  cJSON *def = run_json(RUN), *c500 = run_json(RUN " --power-limit 500");
  double t_def = num(def, "iteration_time_s"), t500 = num(c500, "iteration_time_s");
  double k_def = num(obj(def, "step_effects_s"), "clock"), k500 = num(obj(c500, "step_effects_s"), "clock");
  g_test_message("default %.6f s (clock %.6f s); 500 W %.6f s (clock %.6f s), ratio %.6f at %.1f MHz", t_def, k_def,
                 t500, k500, num(obj(c500, "config"), "gemm_clock_ratio"), num(obj(c500, "config"), "sm_clock_MHz"));
  g_assert_cmpfloat(t500, >, t_def);
  g_assert_cmpfloat(k500, >, k_def);
  /* only the clock differs: the rest of the step is the same */
  g_assert_cmpfloat(fabs((t500 - k500) - (t_def - k_def)), <=, 1e-9 * t_def);
  const cJSON *cfg = obj(c500, "config");
  g_assert_cmpfloat(num(cfg, "power_limit_W"), ==, 500);
  g_assert_cmpfloat(num(cfg, "gemm_clock_ratio"), <, ratio);
  g_assert_cmpfloat(num(cfg, "sm_clock_MHz"), <, settled);
  g_assert_null(cJSON_GetObjectItemCaseSensitive(obj(def, "config"), "power_limit_W")); /* not written uncapped */

  char *at_rated = g_strdup_printf(RUN " --power-limit %g", rated);
  cJSON *r = run_json(at_rated);
  g_assert_cmpfloat(num(r, "iteration_time_s"), ==, t_def);
  g_assert_cmpfloat(num(obj(r, "step_effects_s"), "clock"), ==, k_def);
  g_assert_cmpfloat(num(obj(r, "config"), "gemm_clock_ratio"), ==, ratio);
  g_assert_cmpfloat(num(obj(r, "config"), "sm_clock_MHz"), ==, settled);
  cJSON_Delete(r);
  g_free(at_rated);

  double last = t500;
  static const char *const lower[] = {"400", "300"};
  for (guint i = 0; i < G_N_ELEMENTS(lower); i++) {
    char *args = g_strdup_printf(RUN " --power-limit %s", lower[i]);
    cJSON *j = run_json(args);
    g_assert_cmpfloat(num(j, "iteration_time_s"), >, last);
    last = num(j, "iteration_time_s");
    cJSON_Delete(j);
    g_free(args);
  }
  /* --clock burst is the boost clock whatever the cap */
  cJSON *b = run_json(RUN " --clock burst"), *b500 = run_json(RUN " --clock burst --power-limit 500");
  g_assert_cmpfloat(num(b500, "iteration_time_s"), ==, num(b, "iteration_time_s"));
  g_assert_cmpfloat(num(obj(b500, "step_effects_s"), "clock"), ==, 0);
  /* the clock effect: the run less the burst run */
  g_assert_cmpfloat(fabs((t500 - k500) - num(b, "iteration_time_s")), <=, 1e-12 * t500);
  cJSON_Delete(b);
  cJSON_Delete(b500);

  /* the text report says it */
  Proc p = run_line("run " SHAPE " " MACHINE " --power-limit 500");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "a 500 W power cap (SM clock "));
  proc_clear(&p);
  cJSON_Delete(def);
  cJSON_Delete(c500);
}

/* A capped run's trace: its request records the cap, and report prints
 * the run as run printed it (step line included). */
static void test_trace_report(void) {
  char *trace = g_build_filename(tmpdir, "capped.json.gz", NULL);
  char *args = g_strdup_printf("run " SHAPE " " MACHINE " --power-limit 500 --trace %s", trace);
  Proc p = run_line(args);
  g_assert_cmpint(p.status, ==, 0);
  char *rep_args = g_strdup_printf("report %s", trace);
  Proc r = run_line(rep_args);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_cmpstr(r.err, ==, "");
  g_assert_nonnull(strstr(r.out, "a 500 W power cap (SM clock "));
  g_assert_cmpstr(r.out, ==, p.out);
  proc_clear(&p);
  proc_clear(&r);
  g_free(rep_args);
  g_free(args);
  g_free(trace);
}

/* The shipped cluster written with gpu_power_limit_W `cap` (0: as
 * shipped) into the test's folder; its path. */
static char *capped_cluster(double cap, const char *file) {
  cJSON *c = load_shipped("topologies", "dgx-h100-superpod");
  if (cap > 0)
    cJSON_AddNumberToObject(c, "gpu_power_limit_W", cap);
  char *text = cJSON_Print(c), *path = g_build_filename(tmpdir, file, NULL);
  write_bytes(path, text, -1);
  cJSON_free(text);
  cJSON_Delete(c);
  return path;
}

/* The iteration, its clock effect and its compute, as three numbers. */
static void key_numbers(const char *args, double out[3]) {
  cJSON *j = run_json(args);
  out[0] = num(j, "iteration_time_s");
  out[1] = num(obj(j, "step_effects_s"), "clock");
  out[2] = num(obj(j, "time_breakdown_s"), "compute");
  cJSON_Delete(j);
}

/* A cluster whose file caps its GPUs at 500 W runs as --power-limit 500 on
 * the shipped one; --power-limit overrides the file's cap. */
static void test_cluster_cap(void) {
  char *capped = capped_cluster(500, "capped.json");
  double a[3], b[3], c[3], d[3];
  char *args = g_strdup_printf("run " SHAPE " --cluster %s --profile h100-sxm5-80gb-measured --format json", capped);
  key_numbers(args, a);
  key_numbers(RUN " --power-limit 500", b);
  for (int i = 0; i < 3; i++)
    g_assert_cmpfloat(a[i], ==, b[i]);
  cJSON *j = run_json(args);
  g_assert_cmpfloat(num(obj(j, "config"), "power_limit_W"), ==, 500);
  cJSON_Delete(j);
  char *over = g_strdup_printf("%s --power-limit 600", args);
  key_numbers(over, c);
  key_numbers(RUN " --power-limit 600", d);
  for (int i = 0; i < 3; i++)
    g_assert_cmpfloat(c[i], ==, d[i]);
  g_assert_cmpfloat(c[0], <, a[0]);
  g_free(over);
  g_free(args);
  g_free(capped);
}

/* plan and sweep run at the cap: the sweep's row is the run's; plan's best
 * is slower under the cap and its rows run at it. */
static void test_plan_and_sweep(void) {
  Proc p = run_line("sweep " SHAPE " " MACHINE " --power-limit 500,700 --format jsonl");
  g_assert_cmpint(p.status, ==, 0);
  gchar **lines = g_strsplit(p.out, "\n", -1);
  double want[3], t700[3];
  key_numbers(RUN " --power-limit 500", want);
  key_numbers(RUN, t700); /* the rated cap: the default run */
  guint rows = 0;
  for (guint i = 0; lines[i]; i++) {
    if (!*lines[i])
      continue;
    cJSON *row = cJSON_Parse(lines[i]);
    g_assert_nonnull(row);
    const cJSON *res = obj(row, "result");
    double cap = num(obj(res, "config"), "power_limit_W");
    g_assert_cmpfloat(num(res, "iteration_time_s"), ==, cap == 500 ? want[0] : t700[0]);
    rows++;
    cJSON_Delete(row);
  }
  g_assert_cmpuint(rows, ==, 2);
  g_strfreev(lines);
  proc_clear(&p);

  cJSON *free_plan = run_json("plan " SHAPE " " MACHINE " --format json");
  cJSON *capped = run_json("plan " SHAPE " " MACHINE " --power-limit 500 --format json");
  const cJSON *r0 = cJSON_GetArrayItem(arr(free_plan, "rows"), 0), *r1 = cJSON_GetArrayItem(arr(capped, "rows"), 0);
  g_assert_nonnull(r0);
  g_assert_nonnull(r1);
  g_assert_cmpfloat(num(r1, "iteration_time_s"), >, num(r0, "iteration_time_s"));
  cJSON_Delete(free_plan);
  cJSON_Delete(capped);
}

static const CliBadCase bad[] = {
    {"zero", RUN " --power-limit 0", "--power-limit"},
    {"negative", RUN " --power-limit -5", "--power-limit"},
    {"word", RUN " --power-limit high", "--power-limit"},
    {"huge", RUN " --power-limit 1e6", "--power-limit"},
    {"below-idle", RUN " --power-limit 50", "idle"},
    {"above-rated", RUN " --power-limit 800", "rated"},
    {"no-power-model", "run " SHAPE " --cluster dgx-h100-superpod --profile h100-sxm5-80gb --power-limit 500",
     "no \"power\" block"},
    {"plan-no-power-model", "plan " SHAPE " --cluster dgx-h100-superpod --profile h100-sxm5-80gb --power-limit 500",
     "--power-limit"},
};

/* A cluster's cap with a profile that has no power model, or outside it. */
static void test_cluster_bad(void) {
  char *capped = capped_cluster(500, "capped-bad.json"), *low = capped_cluster(20, "low.json");
  char *args = g_strdup_printf("run " SHAPE " --cluster %s --profile h100-sxm5-80gb", capped);
  Proc p = run_line(args);
  assert_one_line_error(&p, "gpu_power_limit_W");
  proc_clear(&p);
  g_free(args);
  args = g_strdup_printf("run " SHAPE " --cluster %s --profile h100-sxm5-80gb-measured", low);
  p = run_line(args);
  assert_one_line_error(&p, "idle");
  proc_clear(&p);
  g_free(args);
  g_free(capped);
  g_free(low);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  tmpdir = test_tmp_dir("ptdsim-power");
  g_test_add_func("/power/cap-slows", test_cap_slows);
  g_test_add_func("/power/cluster-cap", test_cluster_cap);
  g_test_add_func("/power/trace-report", test_trace_report);
  g_test_add_func("/power/plan-and-sweep", test_plan_and_sweep);
  g_test_add_func("/power/cluster-bad", test_cluster_bad);
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    char *name = g_strdup_printf("/power/bad/%s", bad[i].name);
    g_test_add_data_func(name, &bad[i], cli_test_bad);
    g_free(name);
  }
  return g_test_run();
}
