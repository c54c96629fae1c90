/* End-to-end tests of what a run costs and of throughput per GPU, through
 * the real binary: tokens/s per GPU in run and plan, a GPU-hour's price from
 * the cluster file or --price-per-gpu-hour giving the cost of a million
 * tokens and of the run (the arithmetic checked exactly against the run's
 * own figures), plan's --objective, and the refusals of a bad price.
 *
 * No figure is pasted from an output: each is checked against others the
 * same run reports.
 */
#include <glib/gstdio.h>
#include <string.h>

#include "cli_harness.h"
#include "test_plain.h"
#include "test_tmp.h"

static char *tmpdir;

#define RUN "run --model llama3-8b --cluster dgx-h100-superpod --gpus 64 --tp 2 --pp 2 --global-batch 128 " \
            "--network analytic --format json"

/* Why: a price turns the run's own figures into dollars and nothing else:
 * the cost of a million tokens is price x GPUs / 3600 / tokens/s x 1e6,
 * the run's is its GPU-hours at the price, the whole run's its expected
 * GPU-hours at it; no price, no cost keys. */
static void test_run_cost(void) {
  cJSON *none = run_json(RUN " --tokens 1T");
  g_assert_null(cJSON_GetObjectItemCaseSensitive(none, "cost_per_million_tokens"));
  g_assert_null(cJSON_GetObjectItemCaseSensitive(none, "cost"));
  g_assert_cmpfloat_with_epsilon(num(none, "tokens_per_s_per_gpu"), num(none, "tokens_per_s") / 64, 1e-9);
  cJSON *j = run_json(RUN " --tokens 1T --price-per-gpu-hour 2.5");
  g_assert_cmpfloat(num(j, "price_per_gpu_hour"), ==, 2.5);
  g_assert_cmpfloat_with_epsilon(num(j, "cost_per_million_tokens"), 2.5 * 64 / 3600.0 / num(j, "tokens_per_s") * 1e6,
                                 1e-9);
  g_assert_cmpfloat_with_epsilon(num(j, "cost"), 2.5 * num(j, "gpu_hours"), 1e-6);
  const cJSON *e = obj(obj(j, "whole_run"), "expected");
  g_assert_cmpfloat_with_epsilon(num(e, "cost"), 2.5 * num(e, "gpu_hours"), 1e-6);
  g_assert_cmpfloat(num(e, "cost"), >=, num(j, "cost"));
  /* the price changes nothing else */
  g_assert_cmpfloat(num(j, "iteration_time_s"), ==, num(none, "iteration_time_s"));
  cJSON_Delete(j);
  cJSON_Delete(none);
  /* the text report says it */
  Proc p = run_line("run --model llama3-8b --cluster dgx-h100-superpod --gpus 64 --tp 2 --pp 2 --global-batch 128 "
                    "--network analytic --tokens 1T --price-per-gpu-hour 2.5");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, " per GPU\ncost       $"));
  g_assert_nonnull(strstr(p.out, " per million tokens at $2.50 per GPU-hour\n"));
  g_assert_nonnull(strstr(p.out, " GPU-hours, $"));
  proc_clear(&p);
}

/* A copy of the shipped dgx-h100-superpod cluster with `extra` inserted
 * after its opening brace, at `name` in the test folder (g_free it). */
static char *cluster_with(const char *name, const char *extra) {
  char *src = data_file("topologies/dgx-h100-superpod.json");
  gsize len;
  char *text = slurp(src, &len);
  char *brace = strchr(text, '{');
  g_assert_nonnull(brace);
  char *out = g_strdup_printf("%.*s{%s%s", (int)(brace - text), text, extra, brace + 1);
  char *path = g_build_filename(tmpdir, name, NULL);
  write_bytes(path, out, -1);
  g_free(out);
  g_free(text);
  g_free(src);
  return path;
}

/* Why: a cluster file may carry its price; --price-per-gpu-hour overrides
 * it; a bad price is one line and no output. */
static void test_cluster_price(void) {
  char *priced = cluster_with("priced.json", "\"price_per_gpu_hour\": 3.0, ");
  char *cmd = g_strdup_printf("run --model llama3-8b --cluster %s --gpus 64 --tp 2 --pp 2 --global-batch 128 "
                              "--network analytic --format json",
                              priced);
  cJSON *a = run_json(cmd);
  g_assert_cmpfloat(num(a, "price_per_gpu_hour"), ==, 3.0);
  char *over = g_strconcat(cmd, " --price-per-gpu-hour 1.5", NULL);
  cJSON *b = run_json(over);
  g_assert_cmpfloat(num(b, "price_per_gpu_hour"), ==, 1.5);
  g_assert_cmpfloat_with_epsilon(num(b, "cost_per_million_tokens") * 2, num(a, "cost_per_million_tokens"), 1e-9);
  cJSON_Delete(a);
  cJSON_Delete(b);
  g_free(over);
  g_free(cmd);
  g_unlink(priced);
  g_free(priced);

  char *bad = cluster_with("bad-price.json", "\"price_per_gpu_hour\": -1, ");
  cmd = g_strdup_printf("run --model llama3-8b --cluster %s --gpus 64 --tp 2 --pp 2 --global-batch 128", bad);
  Proc p = run_line(cmd);
  assert_one_line_error(&p, "price_per_gpu_hour");
  proc_clear(&p);
  g_free(cmd);
  g_unlink(bad);
  g_free(bad);
  static const char *const prices[] = {"0", "-2", "two", "1e7"};
  for (guint i = 0; i < G_N_ELEMENTS(prices); i++) {
    cmd = g_strdup_printf(RUN " --price-per-gpu-hour %s", prices[i]);
    p = run_line(cmd);
    assert_one_line_error(&p, "--price-per-gpu-hour");
    proc_clear(&p);
    g_free(cmd);
  }
}

#define PLAN "plan --model llama3-8b --cluster dgx-h100-superpod --gpus 64 --global-batch 128 --format json"

/* Why: plan's rows carry tokens/s per GPU and, with a price, the cost of
 * a million tokens; --objective cost ranks by GPU-seconds an iteration
 * (with --allow-fewer, fewer GPUs may win), time by the iteration. */
static void test_plan_objective(void) {
  cJSON *t = run_json(PLAN " --allow-fewer --top 5 --price-per-gpu-hour 2");
  g_assert_cmpstr(str(t, "ranked_by"), ==, "iteration_time_s");
  cJSON *c = run_json(PLAN " --allow-fewer --top 5 --price-per-gpu-hour 2 --objective cost");
  g_assert_cmpstr(str(c, "ranked_by"), ==, "gpu_seconds_per_iteration");
  double prev = 0;
  const cJSON *row;
  cJSON_ArrayForEach(row, arr(c, "rows")) {
    double gpu_s = num(row, "gpus") * num(row, "iteration_time_s");
    g_assert_cmpfloat(gpu_s, >=, prev);
    prev = gpu_s;
    g_assert_cmpfloat_with_epsilon(num(row, "tokens_per_s_per_gpu"), num(row, "tokens_per_s") / num(row, "gpus"),
                                   1e-9);
    g_assert_cmpfloat_with_epsilon(num(row, "cost_per_million_tokens"),
                                   2.0 * num(row, "gpus") / 3600.0 / num(row, "tokens_per_s") * 1e6, 1e-9);
  }
  prev = 0;
  cJSON_ArrayForEach(row, arr(t, "rows")) {
    g_assert_cmpfloat(num(row, "iteration_time_s"), >=, prev);
    prev = num(row, "iteration_time_s");
  }
  /* the cheapest per token is no costlier than the fastest */
  const cJSON *c0 = cJSON_GetArrayItem(arr(c, "rows"), 0), *t0 = cJSON_GetArrayItem(arr(t, "rows"), 0);
  g_assert_cmpfloat(num(c0, "cost_per_million_tokens"), <=, num(t0, "cost_per_million_tokens"));
  /* plan names the model's parameters as run does */
  cJSON *r = run_json(RUN);
  g_assert_cmpfloat(num(t, "parameters"), ==, num(obj(r, "config"), "parameters"));
  cJSON_Delete(r);
  cJSON_Delete(c);
  cJSON_Delete(t);
  Proc q = run_line("plan --model llama3-8b --cluster dgx-h100-superpod --gpus 64 --global-batch 128 --top 1");
  g_assert_cmpint(q.status, ==, 0);
  g_assert_true(g_str_has_prefix(q.out, "model      32 layers, hidden 4096, 32 heads, seq 8192, vocab 128256: 8.03B "
                                        "parameters\n"));
  proc_clear(&q);
  Proc p = run_line(PLAN " --objective money");
  assert_one_line_error(&p, "unknown --objective 'money'");
  proc_clear(&p);
}

/* Why: pruning keeps the best rows of every objective: the top 3 of a
 * pruned search are the first 3 of the search that simulates everything. */
static void test_pruning_per_objective(void) {
  if (test_plain_only("twelve searches, half of them unpruned"))
    return;
  static const char *const objectives[] = {"time", "cost", "tokens-per-dollar"};
  for (guint o = 0; o < G_N_ELEMENTS(objectives); o++) {
    for (guint t = 0; t < 2; t++) {
      const char *base = "plan --model gpt3-1b --gpus 16 --global-batch 16 --allow-fewer --format json";
      char *pruned = g_strdup_printf("%s --objective %s --top 3%s", base, objectives[o], t ? " --tokens 1B" : "");
      char *all = g_strdup_printf("%s --objective %s --top 100000%s", base, objectives[o], t ? " --tokens 1B" : "");
      cJSON *a = run_json(pruned), *b = run_json(all);
      g_assert_cmpfloat(num(a, "pruned"), >, 0);
      for (int i = 0; i < 3; i++)
        g_assert_cmpstr(str(cJSON_GetArrayItem(arr(a, "rows"), i), "command"), ==,
                        str(cJSON_GetArrayItem(arr(b, "rows"), i), "command"));
      cJSON_Delete(a);
      cJSON_Delete(b);
      g_free(pruned);
      g_free(all);
    }
  }
}

/* Why: plan searches a given layout at its own chunks (its pieces over p),
 * and reports each row's stages as the layout makes them. */
static void test_plan_layout(void) {
  cJSON *j = run_json("plan --model llama3-8b --cluster dgx-h100-superpod --gpus 64 --global-batch 128 --format json "
                      "--top 5 --pp 4 --pipeline-model-parallel-layout Et*2|(t*3|)*10,L");
  gboolean v2 = FALSE;
  const cJSON *row;
  cJSON_ArrayForEach(row, arr(j, "rows")) {
    v2 = v2 || (num(row, "pp") == 4 && num(row, "chunks") == 3); /* 12 pieces on 4 stages: 3 chunks, not dividing 8 */
    const cJSON *per = cJSON_GetObjectItemCaseSensitive(row, "layers_per_stage"), *x;
    double sum = 0;
    cJSON_ArrayForEach(x, per) sum += x->valuedouble;
    if (per)
      g_assert_cmpfloat(sum, ==, 32);
  }
  g_assert_true(v2);
  cJSON_Delete(j);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  tmpdir = test_tmp_dir("ptdsim-cost");
  g_test_add_func("/cost/run", test_run_cost);
  g_test_add_func("/cost/cluster-price", test_cluster_price);
  g_test_add_func("/cost/plan-objective", test_plan_objective);
  g_test_add_func("/cost/pruning-per-objective", test_pruning_per_objective);
  g_test_add_func("/cost/plan-layout", test_plan_layout);
  int rc = g_test_run();
  g_rmdir(tmpdir);
  g_free(tmpdir);
  return rc;
}
