/* ptdsim — TeraPipe end to end through the real binary ($PTDSIM_BIN): the
 * run report, the four figures' JSON contracts, determinism, and one clear
 * line for every bad --slices input. */
#include <cjson/cJSON.h>
#include <glib.h>
#include <math.h>
#include <string.h>

#include "cli_harness.h"
#include "test_plain.h"
#include "../plan/plan.h"

/* Setting 9 (GPT3-175B, 96 cells of t = 4) on the AWS cluster. */
#define SETTING9 "run --model gpt3-175b --cluster aws-p3-16xlarge --gpus 384 --tp 4 --pp 96 --dp 1 --global-batch 2"

/* Why: a TeraPipe run reports the contract keys plus its slicing, whose
 * token slices cover the sequence and whose batch slices cover the batch;
 * an explicit list is simulated as given; uniform:1 is slower than the DP
 * on this large model with a tiny batch (the paper's headline case). */
static void test_run_report(void) {
  Proc p = run_line(SETTING9 " --schedule terapipe --format json");
  cJSON *j = parse_json(&p);
  double auto_s = num(j, "iteration_time_s");
  num(j, "tflops_per_gpu");
  num(j, "bubble_fraction");
  const cJSON *tp = cJSON_GetObjectItemCaseSensitive(j, "terapipe");
  g_assert_true(cJSON_IsObject(tp));
  double idle = num(tp, "idle_fraction");
  g_assert_cmpfloat(idle, >, 0);
  g_assert_cmpfloat(idle, <, 1);
  g_assert_cmpfloat(num(tp, "context_fit_max_rel_error"), <, 0.02);
  g_assert_cmpfloat(num(tp, "dp_predicted_latency_s"), >, 0);
  const cJSON *batch = arr(tp, "batch_slices"), *tokens = arr(tp, "token_slices"), *b, *row;
  double seqs = 0;
  cJSON_ArrayForEach(b, batch) seqs += b->valuedouble;
  g_assert_cmpfloat(seqs, ==, 2);
  cJSON_ArrayForEach(row, tokens) {
    double sum = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, row) {
      g_assert_cmpfloat(t->valuedouble, >, 0);
      g_assert_cmpfloat(fmod(t->valuedouble, 8), ==, 0);
      sum += t->valuedouble;
    }
    g_assert_cmpfloat(sum, ==, 2048);
  }
  cJSON_Delete(j);
  proc_clear(&p);

  p = run_line(SETTING9 " --schedule terapipe --slices uniform:1 --micro-batch 1 --format json");
  j = parse_json(&p);
  g_assert_cmpfloat(num(j, "iteration_time_s"), >, 2 * auto_s);
  cJSON_Delete(j);
  proc_clear(&p);

  p = run_line(SETTING9 " --schedule terapipe --slices 1024,512,256,256 --micro-batch 2 --format json");
  j = parse_json(&p);
  const cJSON *t = cJSON_GetArrayItem(arr(cJSON_GetObjectItemCaseSensitive(j, "terapipe"), "token_slices"), 0);
  g_assert_cmpint(cJSON_GetArraySize(t), ==, 4);
  g_assert_cmpfloat(cJSON_GetArrayItem(t, 0)->valuedouble, ==, 1024);
  g_assert_cmpfloat(cJSON_GetArrayItem(t, 3)->valuedouble, ==, 256);
  cJSON_Delete(j);
  proc_clear(&p);

  /* text output names the slicing, run-length coded, and the token
   * pipeline's bubble and idle share with their analytic values for M = 8
   * slices (2 batch slices of 4) on K = 96 cells */
  p = run_line(SETTING9 " --schedule terapipe --slices uniform:4 --micro-batch 1");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "slicing    2 batch slices of 1 sequence, 4 token slices each: 4 x 512 tokens\n"));
  g_assert_nonnull(strstr(p.out, "batch      2 sequences, 2 per pipeline, in batch slices"));
  g_assert_null(strstr(p.out, "microbatch"));
  char *want = g_strdup_printf("%.4f analytic (K-1)/M for M = 8 token slices on K = 96 cells", 95.0 / 8);
  g_assert_nonnull(strstr(p.out, want));
  g_free(want);
  want = g_strdup_printf("%.4f analytic (K-1)/(M+K-1)", 95.0 / 103);
  g_assert_nonnull(strstr(p.out, want));
  g_free(want);
  proc_clear(&p);
  p = run_line(SETTING9 " --schedule terapipe --slices uniform:4 --micro-batch 1 --format json");
  j = parse_json(&p);
  tp = cJSON_GetObjectItemCaseSensitive(j, "terapipe");
  g_assert_cmpfloat(num(tp, "token_slices_in_pipeline"), ==, 8);
  g_assert_cmpfloat_with_epsilon(num(tp, "analytic_idle_fraction"), 95.0 / 103, 1e-12);
  g_assert_cmpfloat_with_epsilon(num(j, "analytic_bubble_fraction"), 95.0 / 8, 1e-12);
  cJSON_Delete(j);
  proc_clear(&p);
}

/* Why: TeraPipe runs its own PyTorch eager code, so a run prices every
 * slice's kernels behind the host's launch at the eager default (its JSON
 * says so), --host-op-us sets that time (a free host is faster) and
 * --cuda-graphs, launching nothing from the host, is the free host. */
static void test_host(void) {
  const char *base = SETTING9 " --schedule terapipe --slices uniform:16 --micro-batch 1 --format json";
  Proc p = run_line(base);
  cJSON *j = parse_json(&p);
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(j, "config");
  g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "framework")), ==, "eager");
  g_assert_cmpfloat(num(cfg, "host_op_us"), ==, SIM_EAGER_HOST_OP_US);
  double dflt = num(j, "iteration_time_s");
  cJSON_Delete(j);
  proc_clear(&p);
  char *cmd = g_strdup_printf("%s --host-op-us 0", base);
  p = run_line(cmd);
  g_free(cmd);
  j = parse_json(&p);
  double free_host = num(j, "iteration_time_s");
  g_assert_cmpfloat(free_host, <, dflt);
  cJSON_Delete(j);
  proc_clear(&p);
  cmd = g_strdup_printf("%s --cuda-graphs", base);
  p = run_line(cmd);
  g_free(cmd);
  j = parse_json(&p);
  g_assert_cmpfloat(num(j, "iteration_time_s"), ==, free_host);
  cJSON_Delete(j);
  proc_clear(&p);
}

/* Why: same inputs, byte-identical output (the DP and the simulation). */
static void test_determinism(void) {
  Proc a = run_line(SETTING9 " --schedule terapipe --format json");
  Proc b = run_line(SETTING9 " --schedule terapipe --format json");
  g_assert_cmpint(a.status, ==, 0);
  g_assert_cmpstr(a.out, ==, b.out);
  proc_clear(&a);
  proc_clear(&b);
}

typedef struct {
  const char *name, *args, *expect;
} BadCase;

static const BadCase bad_cases[] = {
    {"sum", SETTING9 " --schedule terapipe --slices 512,512 --micro-batch 1", "adds up to 1024"},
    {"zero", SETTING9 " --schedule terapipe --slices 0,2048 --micro-batch 1", "zero tokens"},
    {"word", SETTING9 " --schedule terapipe --slices 1024,abc,1024", "not a whole number"},
    {"negative", SETTING9 " --schedule terapipe --slices -8,2056", "not a whole number"},
    {"empty-entry", SETTING9 " --schedule terapipe --slices 1024,,1024", "not a whole number"},
    {"uniform-zero", SETTING9 " --schedule terapipe --slices uniform:0", "uniform:N"},
    {"uniform-word", SETTING9 " --schedule terapipe --slices uniform:x", "uniform:N"},
    {"uniform-too-many", SETTING9 " --schedule terapipe --slices uniform:300", "more slices than"},
    {"granularity", SETTING9 " --schedule terapipe --granularity 7", "does not divide"},
    {"granularity-zero", SETTING9 " --schedule terapipe --granularity 0", "not a whole number from 1"},
    {"slices-without-terapipe", SETTING9 " --schedule gpipe --slices uniform:4", "need --schedule terapipe"},
    {"unknown-schedule", SETTING9 " --schedule tera", "unknown --schedule"},
    {"ddp-torch", SETTING9 " --schedule terapipe --ddp torch", "after the flush"},
    {"no-symmetry", SETTING9 " --schedule terapipe --no-symmetry", "--no-symmetry is not available"},
};

/* Why: every bad TeraPipe input is one line on stderr saying what to fix,
 * a non-zero exit, and nothing on stdout. */
static void test_bad_input(gconstpointer data) {
  const BadCase *c = data;
  Proc p = run_line(c->args);
  g_assert_cmpint(p.status, ==, 1); /* an error, not a crash */
  g_assert_cmpstr(p.out, ==, "");
  g_assert_nonnull(strstr(p.err, c->expect));
  char *nl = strchr(p.err, '\n');
  g_assert_nonnull(nl);
  g_assert_cmpstr(nl + 1, ==, "");
  proc_clear(&p);
}

/* Why: the figures' JSON keys are a contract, and their content
 * must show the paper's shapes: speedups where batches are small, none
 * where they are large; the DP no worse than uniform slicing on setting 8;
 * TeraPipe's advantage growing with the sequence length. */
static void test_fig5(void) {
  if (test_plain_only("figure terapipe-fig5"))
    return;
  Proc p = run_line("figure terapipe-fig5 --format json");
  cJSON *j = parse_json(&p);
  const cJSON *rows = arr(j, "rows"), *row;
  g_assert_cmpint(cJSON_GetArraySize(rows), ==, 10);
  guint id = 0;
  cJSON_ArrayForEach(row, rows) {
    id++;
    g_assert_cmpfloat(num(row, "setting"), ==, id);
    double g = num(row, "gpipe_latency_s"), t = num(row, "terapipe_latency_s");
    g_assert_cmpfloat_with_epsilon(num(row, "speedup"), g / t, 1e-12 * g / t);
    g_assert_true(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(row, "slices")));
    if (id == 2 || id == 3) /* 36 and 72 sequences per pipeline: no room to help */
      g_assert_cmpfloat(fabs(g / t - 1), <, 0.1);
    if (id >= 8) /* the largest models with batch 8 and 2 */
      g_assert_cmpfloat(g / t, >, 2);
    if (id == 5) {
      /* the figure's row is what `run` prints for the same setting: same
       * slicing, same latency */
      Proc r = run_line("run --model gpt3-13b --cluster aws-p3-16xlarge --gpus 320 --tp 8 --pp 40 --dp 1 "
                        "--global-batch 32 --schedule terapipe --workload layers --recompute none --format json");
      cJSON *rj = parse_json(&r);
      const cJSON *rtp = cJSON_GetObjectItemCaseSensitive(rj, "terapipe");
      const cJSON *fs = cJSON_GetObjectItemCaseSensitive(row, "slices");
      g_assert_true(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(rtp, "batch_slices"),
                                  cJSON_GetObjectItemCaseSensitive(fs, "batch_slices"), TRUE));
      g_assert_true(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(rtp, "token_slices"),
                                  cJSON_GetObjectItemCaseSensitive(fs, "token_slices"), TRUE));
      g_assert_cmpfloat(num(rj, "iteration_time_s"), ==, t);
      cJSON_Delete(rj);
      proc_clear(&r);
    }
  }
  cJSON_Delete(j);
  proc_clear(&p);
  /* and the text figure describes it as run does: batch slices x sequences,
   * token slices each */
  p = run_line("figure terapipe-fig5");
  g_assert_cmpint(p.status, ==, 0);
  Proc r = run_line("run --model gpt3-13b --cluster aws-p3-16xlarge --gpus 320 --tp 8 --pp 40 --dp 1 "
                    "--global-batch 32 --schedule terapipe --workload layers --recompute none");
  /* "slicing    N batch slice(s) of B sequence(s), M token slices...": the
   * figure's brief form is "N x B seq, M slices" */
  const char *line = strstr(r.out, "slicing    ");
  g_assert_nonnull(line);
  char *end = NULL;
  guint nb = (guint)strtoul(line + strlen("slicing    "), &end, 10);
  const char *of = strstr(end, " of ");
  g_assert_nonnull(of);
  guint seqs = (guint)strtoul(of + 4, &end, 10);
  const char *comma = strstr(end, ", ");
  g_assert_nonnull(comma);
  guint n = (guint)strtoul(comma + 2, NULL, 10);
  char *want = g_strdup_printf("%u x %u seq, %u slices\n", nb, seqs, n);
  const char *row5 = strstr(p.out, "\n      5 ");
  g_assert_nonnull(row5);
  g_assert_nonnull(strstr(row5, want));
  g_assert_true(strstr(row5, want) < strstr(row5 + 1, "\n      6 "));
  g_free(want);
  proc_clear(&r);
  proc_clear(&p);
}

/* Why: figure 6's rows are one per configuration (every uniform slice
 * count of each setting, then the DP), its claim holds in simulation (the
 * DP no slower than the best uniform slicing), and a row is what `run`
 * prints for the same configuration. */
static void test_fig6(void) {
  if (test_plain_only("figure terapipe-fig6"))
    return;
  Proc p = run_line("figure terapipe-fig6 --format json");
  cJSON *j = parse_json(&p);
  const cJSON *settings = arr(j, "settings"), *s, *rows = arr(j, "rows");
  g_assert_cmpint(cJSON_GetArraySize(settings), ==, 2);
  g_assert_cmpint(cJSON_GetArraySize(rows), ==, 16 + 1 + 128 + 1);
  static const double ids[] = {8, 9}, counts[] = {16, 128};
  guint x = 0;
  cJSON_ArrayForEach(s, settings) {
    g_assert_cmpfloat(num(s, "setting"), ==, ids[x]);
    double best = INFINITY, dp_row = NAN;
    guint n = 0;
    const cJSON *u, *eleventh = NULL;
    cJSON_ArrayForEach(u, rows) {
      if (num(u, "setting") != ids[x])
        continue;
      const char *slicing = cJSON_GetObjectItemCaseSensitive(u, "slicing")->valuestring;
      if (strcmp(slicing, "dp") == 0) {
        dp_row = num(u, "latency_s");
        g_assert_cmpfloat(num(u, "slices"), ==, num(s, "dp_slices"));
        continue;
      }
      g_assert_cmpstr(slicing, ==, "uniform");
      g_assert_cmpfloat(num(u, "slices"), ==, ++n);
      best = MIN(best, num(u, "latency_s"));
      if (n == 11)
        eleventh = u;
    }
    g_assert_cmpuint(n, ==, (guint)counts[x]);
    g_assert_cmpfloat(num(s, "best_uniform_latency"), ==, best);
    double dp = num(s, "dp_latency");
    g_assert_cmpfloat(dp, ==, dp_row);
    g_assert_cmpfloat(dp, <=, best); /* figure 6's claim, in simulation */
    /* The baseline slices the input on the batch dimension first, one
     * sequence per batch slice (the paper's figure 6): its uniform entry
     * of 11 slices is `run` with batch slices of 1 and uniform:11. */
    if (x == 0) {
      cJSON *r = run_json("run --model gpt3-44b --cluster aws-p3-16xlarge --gpus 384 --tp 8 --pp 48 --dp 1 "
                          "--global-batch 8 --micro-batch 1 --schedule terapipe --slices uniform:11 --workload layers "
                          "--recompute none --format json");
      const cJSON *tp = obj(r, "terapipe");
      g_assert_cmpint(cJSON_GetArraySize(arr(tp, "batch_slices")), ==, 8);
      g_assert_nonnull(eleventh);
      g_assert_cmpfloat(num(r, "iteration_time_s"), ==, num(eleventh, "latency_s"));
      cJSON_Delete(r);
    }
    x++;
  }
  cJSON_Delete(j);
  proc_clear(&p);
}

static void test_fig7(void) {
  Proc p = run_line("figure terapipe-fig7 --format json");
  cJSON *j = parse_json(&p);
  const cJSON *rows = arr(j, "rows"), *row;
  g_assert_cmpint(cJSON_GetArraySize(rows), ==, 4);
  double last = 0, seq = 0;
  cJSON_ArrayForEach(row, rows) {
    g_assert_cmpfloat(num(row, "seq_len"), >, seq);
    seq = num(row, "seq_len");
    num(row, "global_batch");
    double sp = num(row, "speedup");
    g_assert_cmpfloat_with_epsilon(sp, num(row, "gpipe_latency_s") / num(row, "terapipe_latency_s"), 1e-9 * sp);
    g_assert_cmpfloat(sp, >, last);
    last = sp;
  }
  cJSON_Delete(j);
  proc_clear(&p);
}

static void test_fig3(void) {
  Proc p = run_line("figure terapipe-fig3 --format json");
  cJSON *j = parse_json(&p);
  const cJSON *rows = arr(j, "rows"), *row;
  double t1 = 0, t128 = 0;
  cJSON_ArrayForEach(row, rows) {
    if (num(row, "tokens") == 1)
      t1 = num(row, "forward_ms");
    if (num(row, "tokens") == 128)
      t128 = num(row, "forward_ms");
    num(row, "tokens_per_ms");
  }
  g_assert_cmpfloat(t1, >, 0);
  g_assert_cmpfloat(t128, <, 1.5 * t1); /* flat for small inputs */
  cJSON_Delete(j);
  proc_clear(&p);

  p = run_line("figure --list");
  g_assert_cmpint(p.status, ==, 0);
  for (guint i = 0; i < 4; i++) {
    static const char *names[] = {"terapipe-fig3", "terapipe-fig5", "terapipe-fig6", "terapipe-fig7"};
    g_assert_nonnull(strstr(p.out, names[i]));
  }
  proc_clear(&p);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  g_test_add_func("/terapipe-cli/run-report", test_run_report);
  g_test_add_func("/terapipe-cli/determinism", test_determinism);
  g_test_add_func("/terapipe-cli/host", test_host);
  for (guint i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
    char *path = g_strconcat("/terapipe-cli/bad-input/", bad_cases[i].name, NULL);
    g_test_add_data_func(path, &bad_cases[i], test_bad_input);
    g_free(path);
  }
  g_test_add_func("/terapipe-cli/fig5", test_fig5);
  g_test_add_func("/terapipe-cli/fig6", test_fig6);
  g_test_add_func("/terapipe-cli/fig7", test_fig7);
  g_test_add_func("/terapipe-cli/fig3", test_fig3);
  return g_test_run();
}
