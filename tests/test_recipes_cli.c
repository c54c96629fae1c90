/* End-to-end tests of the published Megatron-Core recipe results on DGX H100
 * (traces/reference/megatron-recipes-h100.json, the judge that
 * tools/validate-recipes runs in full): every row parses and names its
 * source; the rows on at most 64 GPUs (the quick ones) run through the real
 * binary as their recipe sets them up, the way tools/validate-recipes builds
 * the command line, and their mean absolute throughput error on the measured
 * H100 profile is reported and held within 10%. */
#include <math.h>
#include <string.h>

#include "cli_harness.h"

static cJSON *reference;

static gboolean flag(const cJSON *recipe, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(recipe, key);
  g_assert_true(cJSON_IsBool(v));
  return cJSON_IsTrue(v);
}

/* The row's value under column `key` of `columns` (asserted present). */
static const cJSON *cell(const cJSON *columns, const cJSON *row, const char *key) {
  int i = 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, columns) {
    if (cJSON_IsString(c) && strcmp(c->valuestring, key) == 0)
      return cJSON_GetArrayItem(row, i);
    i++;
  }
  g_assert_not_reached();
  return NULL;
}

static double ncell(const cJSON *columns, const cJSON *row, const char *key) {
  const cJSON *v = cell(columns, row, key);
  g_assert_true(cJSON_IsNumber(v));
  return v->valuedouble;
}

/* Every table names its source (an https address and a title), its model,
 * its metric and the recipe's settings; every row has one value per column,
 * a precision, a layout whose sizes multiply to the GPUs, and the published
 * metric, a positive number. */
static void test_rows_parse(void) {
  const cJSON *tables = arr(reference, "tables"), *t;
  g_assert_cmpint(cJSON_GetArraySize(tables), >, 0);
  g_assert_cmpuint(strlen(str(reference, "about")), >, 0);
  guint rows = 0;
  cJSON_ArrayForEach(t, tables) {
    const cJSON *source = obj(t, "source"), *columns = arr(t, "columns"), *recipe = obj(t, "recipe"), *row;
    g_assert_true(g_str_has_prefix(str(source, "url"), "https://"));
    g_assert_cmpuint(strlen(str(source, "title")), >, 0);
    g_assert_cmpuint(strlen(str(t, "model")), >, 0);
    const char *metric = str(t, "metric");
    g_assert_true(strcmp(metric, "step_time_s") == 0 || strcmp(metric, "tokens_per_s_per_gpu") == 0);
    g_assert_cmpuint(strlen(str(recipe, "recompute")), >, 0);
    flag(recipe, "sequence_parallel");
    cJSON_ArrayForEach(row, arr(t, "rows")) {
      g_assert_cmpint(cJSON_GetArraySize(row), ==, cJSON_GetArraySize(columns));
      const char *prec = cell(columns, row, "precision")->valuestring;
      g_assert_true(strcmp(prec, "bf16") == 0 || strcmp(prec, "fp8") == 0);
      double gpus = ncell(columns, row, "gpus"), tp = ncell(columns, row, "tp"), pp = ncell(columns, row, "pp"),
             cp = ncell(columns, row, "cp");
      g_assert_cmpfloat(fmod(gpus, tp * pp * cp), ==, 0);
      g_assert_cmpfloat(ncell(columns, row, metric), >, 0);
      rows++;
    }
  }
  g_assert_cmpuint(rows, >=, 40);
}

/* One row's `ptdsim run` command line as tools/validate-recipes builds it. */
static char *row_command(const cJSON *t, const cJSON *row) {
  const cJSON *c = arr(t, "columns"), *rec = obj(t, "recipe"), *vp = cell(c, row, "vp");
  double gpus = ncell(c, row, "gpus"), pp = ncell(c, row, "pp");
  GString *a = g_string_new(NULL);
  g_string_append_printf(a,
                         "run --model %s --cluster dgx-h100-superpod --nodes %.0f --profile h100-sxm5-80gb-measured "
                         "--gpus %.0f --layers %.0f --seq-len %.0f --tp %.0f --pp %.0f --cp %.0f --global-batch %.0f "
                         "--micro-batch %.0f --precision %s --recompute %s --framework megatron --format json",
                         str(t, "model"), fmax(1, floor(gpus / 8)), gpus, ncell(c, row, "layers"),
                         ncell(c, row, "seq_len"), ncell(c, row, "tp"), pp, ncell(c, row, "cp"),
                         ncell(c, row, "gbs"), ncell(c, row, "mbs"), cell(c, row, "precision")->valuestring,
                         str(rec, "recompute"));
  if (cJSON_IsNumber(vp))
    g_string_append_printf(a, " --schedule interleaved --chunks %.0f", vp->valuedouble);
  if (flag(rec, "account_for_embedding_and_loss") && pp > 1)
    g_string_append(a, " --account-for-embedding --account-for-loss");
  if (flag(rec, "sequence_parallel"))
    g_string_append(a, " --sequence-parallel");
  if (flag(rec, "tp_comm_overlap"))
    g_string_append(a, " --tp-comm-overlap");
  if (flag(rec, "distributed_optimizer"))
    g_string_append(a, " --distributed-optimizer");
  if (flag(rec, "overlap_grad_reduce"))
    g_string_append(a, " --ddp torch");
  if (flag(rec, "overlap_param_gather"))
    g_string_append(a, " --overlap-param-gather");
  if (flag(rec, "cuda_graphs"))
    g_string_append(a, " --cuda-graphs");
  return g_string_free(a, FALSE);
}

/* The rows on at most 64 GPUs that ptdsim can express: each runs and fits
 * in memory, or is refused in one line (a layout ptdsim cannot model, as
 * tools/validate-recipes prints it); the runs' mean absolute throughput
 * error against the published figures stays within 10%. */
static void test_quick_rows(void) {
  const cJSON *t;
  double sum_abs = 0, sum = 0;
  guint ran = 0, refused = 0;
  cJSON_ArrayForEach(t, arr(reference, "tables")) {
    if (cJSON_GetObjectItemCaseSensitive(t, "unsupported"))
      continue;
    const cJSON *c = arr(t, "columns"), *row;
    gboolean step = strcmp(str(t, "metric"), "step_time_s") == 0;
    cJSON_ArrayForEach(row, arr(t, "rows")) {
      double gpus = ncell(c, row, "gpus");
      if (gpus > 64)
        continue;
      char *args = row_command(t, row);
      Proc p = run_line(args);
      if (p.status != 0) {
        assert_one_line_error(&p, "");
        g_test_message("%s: refused: %s", args, g_strchomp(p.err));
        refused++;
      } else {
        cJSON *j = parse_json(&p);
        g_assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "fits_in_memory")));
        double err = step ? ncell(c, row, "step_time_s") / num(j, "iteration_time_s") - 1
                          : num(j, "tokens_per_s") / gpus / ncell(c, row, "tokens_per_s_per_gpu") - 1;
        g_test_message("%s %s %.0f GPUs: %+.1f%%", str(t, "name"), cell(c, row, "precision")->valuestring, gpus,
                       100 * err);
        sum_abs += fabs(err);
        sum += err;
        ran++;
        cJSON_Delete(j);
      }
      proc_clear(&p);
      g_free(args);
    }
  }
  g_assert_cmpuint(ran, >=, 10);
  double mae = 100 * sum_abs / ran;
  g_test_message("%u rows on at most 64 GPUs ran (%u refused): mean absolute error %.2f%%, mean signed %+.2f%% "
                 "(bound 10%%)",
                 ran, refused, mae, 100 * sum / ran);
  g_assert_cmpfloat(mae, <=, 10.0);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  reference = load_shipped("traces/reference", "megatron-recipes-h100");
  g_test_add_func("/recipes/rows-parse", test_rows_parse);
  g_test_add_func("/recipes/quick-rows", test_quick_rows);
  int rc = g_test_run();
  cJSON_Delete(reference);
  return rc;
}
