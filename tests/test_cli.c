/* ptdsim — end-to-end tests of the command line: the real binary
 * ($PTDSIM_BIN), run without a shell, its JSON contract, determinism, error
 * reporting and help.  Expected values are computed here from formulas. */
#include <cjson/cJSON.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "cli_harness.h"
#include "test_plain.h"
#include "test_tmp.h"

static char *tmpdir;

#define assert_rel(a, b, tol) g_assert_cmpfloat_with_epsilon((a), (b), (tol) * fabs(b))

/* A small configuration that simulates in a few milliseconds. */
#define MODEL8 "run --layers 8 --hidden 1024 --heads 16 --seq-len 512"
#define SMALL MODEL8 " --gpus 16 --tp 2 --pp 2 --global-batch 16"

/* --- 1. the JSON contract --- */

/* Why: the keys of `run --format json` are the product's contract (SPEC);
 * training_days must follow from the token budget and the iteration time. */
static void test_json_contract(void) {
  double tokens = 3e11;
  Proc p = run_line(SMALL " --micro-batch 2 --schedule interleaved --chunks 2 --tokens 3e11 --format json");
  g_assert_cmpstr(p.err, ==, "");
  cJSON *j = parse_json(&p);
  const char *top[] = {"iteration_time_s", "tflops_per_gpu",   "hardware_tflops_per_gpu", "percent_of_peak",
                       "aggregate_pflops", "bubble_fraction", "analytic_bubble_fraction", "training_days"};
  for (guint i = 0; i < G_N_ELEMENTS(top); i++)
    num(j, top[i]);
  const char *tb[] = {"compute", "tp_comm", "pp_comm", "dp_comm", "optimizer", "bubble"};
  const cJSON *t = obj(j, "time_breakdown_s");
  double sum = 0;
  for (guint i = 0; i < G_N_ELEMENTS(tb); i++) {
    g_assert_cmpfloat(num(t, tb[i]), >=, 0);
    sum += num(t, tb[i]);
  }
  const char *three[] = {"tp", "pp", "dp"};
  for (guint i = 0; i < 3; i++)
    g_assert_cmpfloat(num(obj(j, "bytes_per_iteration"), three[i]), >, 0);
  for (guint i = 1; i < 3; i++)
    g_assert_cmpfloat(num(obj(j, "bisection_bandwidth_GBps"), three[i]), >, 0);
  const char *mem[] = {"weights", "gradients", "optimizer", "activations", "total"};
  const cJSON *m = obj(j, "memory_per_gpu_GiB");
  double msum = 0;
  for (guint i = 0; i < 4; i++)
    msum += num(m, mem[i]);
  assert_rel(num(m, mem[4]), msum, 1e-9);
  g_assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "fits_in_memory")));

  double time = num(j, "iteration_time_s");
  double B = 16, s = 512, p_ = 2, m_ = 16.0 / (2 * 4), v = 2;
  /* training_days: tokens / (B s) iterations of iteration_time_s each */
  assert_rel(num(j, "training_days") * 86400, tokens / (B * s) * time, 1e-9);
  assert_rel(sum, time, 1e-9);
  assert_rel(num(j, "aggregate_pflops"), num(j, "tflops_per_gpu") * 16 / 1000, 1e-9);
  assert_rel(num(j, "analytic_bubble_fraction"), (p_ - 1) / (v * m_), 1e-12);
  cJSON_Delete(j);
  proc_clear(&p);

  /* without --tokens there is no training_days */
  p = run_line(SMALL " --format json");
  j = parse_json(&p);
  g_assert_null(cJSON_GetObjectItemCaseSensitive(j, "training_days"));
  cJSON_Delete(j);
  proc_clear(&p);
}

/* --- 2. determinism --- */

/* Why: the engine orders equal-time events totally, so the same command must
 * print the same bytes every time. */
static void test_determinism(void) {
  const char *cmds[] = {
      SMALL " --dp 4 --ddp torch",
      SMALL " --schedule interleaved --layers-per-chunk 2 --format json",
      "figure megatron-table1 --format json",
  };
  for (guint i = 0; i < G_N_ELEMENTS(cmds); i++) {
    if (i == 2 && test_sanitized()) { /* SC21's whole Table 1, twice: the plain build's */
      g_test_message("figure megatron-table1 twice: expensive end to end, run by the plain build only");
      continue;
    }
    Proc a = run_line(cmds[i]), b = run_line(cmds[i]);
    g_assert_cmpint(a.status, ==, 0);
    g_assert_cmpint(b.status, ==, 0);
    g_assert_cmpuint(strlen(a.out), >, 0);
    g_assert_cmpstr(a.out, ==, b.out);
    proc_clear(&a);
    proc_clear(&b);
  }
}

/* --- 3. bad input --- */

typedef struct {
  const char *name;
  const char *args;    /* space-separated; @DIR@ is the test's temp dir */
  const char *mention; /* what stderr must name */
} BadCase;

static const BadCase bad_cases[] = {
    {"tpd-not-n", SMALL " --dp 3", "--dp"},
    {"gpus-not-multiple", "run --layers 8 --hidden 1024 --heads 16 --gpus 10 --tp 2 --pp 2 --global-batch 16",
     "--gpus 10"},
    {"tp-over-heads", "run --layers 8 --hidden 1024 --heads 16 --gpus 32 --tp 32 --global-batch 16", "--tp 32"},
    {"heads-not-divisible", "run --layers 8 --hidden 1536 --heads 12 --gpus 8 --tp 8 --global-batch 16", "--heads 12"},
    {"batch-not-divisible", MODEL8 " --gpus 16 --tp 2 --pp 2 --global-batch 18 --micro-batch 2", "--global-batch 18"},
    {"layers-not-divisible", "run --layers 9 --hidden 1024 --heads 16 --gpus 16 --tp 2 --pp 2 --global-batch 16",
     "--layers 9"},
    {"layers-per-chunk", SMALL " --schedule interleaved --layers-per-chunk 3", "--layers-per-chunk 3"},
    {"chunks", SMALL " --schedule interleaved --chunks 3", "--chunks 3"},
    {"interleaved-m", "run --layers 8 --hidden 1024 --heads 16 --gpus 16 --tp 1 --pp 4 --global-batch 24 --chunks 2",
     "--pp 4"},
    {"zero", SMALL " --micro-batch 0", "--micro-batch"},
    {"negative", MODEL8 " --gpus 16 --tp 2 --pp -2 --global-batch 16", "--pp"},
    {"non-numeric", MODEL8 " --gpus 16 --tp two --pp 2 --global-batch 16", "two"},
    {"overflow", MODEL8 " --gpus 16 --tp 2 --pp 2 --global-batch 99999999999999999999", "99999999999999999999"},
    {"overflow-int32", MODEL8 " --gpus 4294967312 --tp 2 --pp 2 --global-batch 16", "--gpus"},
    {"tokens-negative", SMALL " --tokens -5", "--tokens"},
    {"unknown-flag", SMALL " --frobnicate", "--frobnicate"},
    {"unknown-schedule", SMALL " --schedule zigzag", "zigzag"},
    {"unknown-recompute", SMALL " --recompute sometimes", "sometimes"},
    {"unknown-ddp", SMALL " --ddp horovod", "horovod"},
    {"unknown-figure", "figure no-such-figure", "no-such-figure"},
    {"unknown-verb", "frobnicate", "frobnicate"},
    {"unknown-model", SMALL " --model gpt-9000", "gpt-9000"},
    {"format-xml", SMALL " --format xml", "xml"},
    {"missing-gpus", "run --layers 8 --hidden 1024 --heads 16 --tp 2 --pp 2 --global-batch 16", "--gpus"},
    {"missing-model", "run --gpus 8 --global-batch 8", "--model"},
    {"more-gpus-than-cluster", "run --layers 8 --hidden 1024 --heads 16 --gpus 8192 --global-batch 8192", "8192"},
    {"missing-cluster-file", SMALL " --cluster @DIR@/no-such-cluster.json", "no-such-cluster.json"},
    {"malformed-cluster", SMALL " --cluster @DIR@/malformed.json", "malformed.json"},
    {"negative-bandwidth", SMALL " --profile @DIR@/negative-bw.json", "hbm_GBps"},
    {"missing-profile", SMALL " --profile no-such-profile", "no-such-profile"},
    {"out-of-memory", "run --model gpt3-175b --gpus 8 --tp 8 --pp 1 --global-batch 8", "memory"},
    {"figure-format", "figure megatron-table1 --format xml", "xml"},
    {"extra-argument", SMALL " stray", "stray"},
    {"repeated-option", SMALL " --tp 4", "--tp is given twice"},
    {"repeated-option-equals", SMALL " --tp=4", "--tp is given twice"},
    {"repeated-short-and-long", "fit -o @DIR@/a.json --output @DIR@/b.json x.json", "--output is given twice"},
    {"unknown-option-suggests", SMALL " --global-bach 16", "did you mean --global-batch?"},
    {"unknown-option-prefix", SMALL " --micro 2", "did you mean --micro-batch?"},
    {"unknown-option-other-verb", "plan --model gpt3-175b --gpus 64 --global-batch 64 --trace x.json",
     "unknown option --trace"},
    {"tokens-junk", SMALL " --tokens 300x", "--tokens '300x'"},
    {"tokens-two-suffixes", SMALL " --tokens 3BT", "--tokens '3BT'"},
    {"tokens-hex", SMALL " --tokens 0x10", "--tokens '0x10'"},
    {"tokens-zero", SMALL " --tokens 0B", "--tokens '0B'"},
    {"tokens-huge", SMALL " --tokens 2e18", "--tokens '2e18'"},
    {"tokens-inf", SMALL " --tokens inf", "--tokens 'inf'"},
    {"plan-tokens-junk", "plan --model gpt3-175b --gpus 64 --global-batch 64 --tokens 1.2.3T", "--tokens '1.2.3T'"},
    {"zero-stage", MODEL8 " --gpus 16 --tp 1 --pp 1 --global-batch 16 --zero 4", "--zero 4 is not a ZeRO stage"},
    {"zero-with-tp", SMALL " --zero 3", "use --tp 1 --pp 1"},
    {"zero-with-schedule", MODEL8 " --gpus 16 --tp 1 --pp 1 --global-batch 16 --zero 3 --schedule gpipe",
     "drop --schedule"},
    {"zero-with-ddp", MODEL8 " --gpus 16 --tp 1 --pp 1 --global-batch 16 --zero 1 --ddp torch", "drop --ddp"},
    {"zero-oom", "run --model gpt3-175b --gpus 8 --tp 1 --pp 1 --global-batch 8 --zero 3", "does not fit"},
    {"terapipe-placement", MODEL8 " --gpus 16 --tp 2 --pp 2 --global-batch 16 --schedule terapipe --placement tp-dp-pp "
     "--network analytic", "drop --placement"},
    {"terapipe-no-sg", MODEL8 " --gpus 16 --tp 2 --pp 2 --global-batch 16 --schedule terapipe --no-scatter-gather "
     "--network analytic", "does not apply to --schedule terapipe"},
};

/* Why: every mistake a user can make must end in one readable line on
 * stderr, naming the culprit, with nothing on stdout and a failing status. */
static void test_bad_input(gconstpointer data) {
  const BadCase *c = data;
  char **parts = g_strsplit(c->args, "@DIR@", -1);
  char *args = g_strjoinv(tmpdir, parts);
  g_strfreev(parts);
  Proc p = run_line(args);
  g_test_message("ptdsim %s -> status %d, stderr: %s", args, p.status, p.err);
  g_assert_true(p.status == 1 || p.status == 2); /* an error (2: a usage error), not a crash */
  g_assert_cmpstr(p.out, ==, "");
  g_assert_true(g_str_has_prefix(p.err, "ptdsim"));
  g_assert_true(g_str_has_suffix(p.err, "\n"));
  g_assert_true(strchr(p.err, '\n') == p.err + strlen(p.err) - 1); /* exactly one line */
  g_assert_nonnull(strstr(p.err, c->mention));
  g_free(args);
  proc_clear(&p);
}

/* Why: --allow-oom is the documented way past the memory check; the result
 * must say it does not fit. */
static void test_allow_oom(void) {
  Proc p = run_line("run --model gpt3-175b --gpus 8 --tp 8 --pp 1 --global-batch 8 --allow-oom --format json");
  cJSON *j = parse_json(&p);
  g_assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "fits_in_memory")));
  /* 175B parameters at 16 bytes each cannot sit in 8 x 80 GiB */
  g_assert_cmpfloat(num(obj(j, "memory_per_gpu_GiB"), "total"), >, 80);
  cJSON_Delete(j);
  proc_clear(&p);
}

/* Why: a typo must not pass unnoticed, but an unrelated word must not get a
 * misleading suggestion. */
static void test_unknown_option_no_suggestion(void) {
  Proc p = run_line(SMALL " --xyzzyplugh 3");
  g_assert_cmpint(p.status, ==, 1); /* an error, not a crash */
  g_assert_nonnull(strstr(p.err, "unknown option --xyzzyplugh"));
  g_assert_null(strstr(p.err, "did you mean"));
  proc_clear(&p);
}

/* Why: a token budget is written as 300e9 or 300B or 1.2T; all spellings of
 * one number must give the same report, and the days must follow from it. */
static void test_tokens_suffixes(void) {
  const char *same[][2] = {{"300e9", "300B"}, {"300000000000", "300b"}, {"1.2e12", "1.2T"}, {"450e6", "450M"},
                           {"2048000", "2048K"}};
  for (guint i = 0; i < G_N_ELEMENTS(same); i++) {
    char *a = g_strdup_printf(SMALL " --tokens %s --format json", same[i][0]);
    char *b = g_strdup_printf(SMALL " --tokens %s --format json", same[i][1]);
    Proc pa = run_line(a), pb = run_line(b);
    g_assert_cmpint(pa.status, ==, 0);
    g_assert_cmpstr(pa.out, ==, pb.out);
    cJSON *j = parse_json(&pa);
    assert_rel(num(j, "tokens"), g_ascii_strtod(same[i][0], NULL), 1e-15);
    assert_rel(num(j, "training_days") * 86400, num(j, "tokens") / (16.0 * 512) * num(j, "iteration_time_s"), 1e-12);
    cJSON_Delete(j);
    proc_clear(&pa);
    proc_clear(&pb);
    g_free(a);
    g_free(b);
  }
  /* plan takes the same spellings */
  Proc pa = run_line("plan --model gpt3-175b --gpus 64 --global-batch 64 --tokens 300e9 --top 2 --format json");
  Proc pb = run_line("plan --model gpt3-175b --gpus 64 --global-batch 64 --tokens 300B --top 2 --format json");
  g_assert_cmpint(pa.status, ==, 0);
  g_assert_cmpstr(pa.out, ==, pb.out);
  proc_clear(&pa);
  proc_clear(&pb);
  /* the text report prints the budget readably */
  Proc t = run_line(SMALL " --tokens 1.2T");
  g_assert_cmpint(t.status, ==, 0);
  g_assert_nonnull(strstr(t.out, "\ntraining   1.2T tokens in "));
  proc_clear(&t);
}

/* The value printed after `label` on the report line starting with `line`. */
static double report_value(const char *text, const char *line, const char *label) {
  const char *at = strstr(text, line);
  g_assert_nonnull(at);
  const char *end = strchr(at + 1, '\n');
  const char *v = g_strstr_len(at, end - at, label);
  g_assert_nonnull(v);
  return g_ascii_strtod(v + strlen(label), NULL);
}

/* Why: the text report is what a newcomer reads.  Both bubble figures say
 * which is which and agree with the JSON; the network line is there for
 * either network; with d = 1 the tied-embedding all-reduce is not called
 * data-parallel traffic, and its bytes are the JSON's embedding bytes. */
static void test_text_report(void) {
  const char *nets[] = {"analytic", "flow"};
  for (guint i = 0; i < 2; i++) {
    char *args = g_strdup_printf("run --layers 8 --hidden 1024 --heads 16 --seq-len 512 --gpus 4 --tp 2 --pp 2 "
                                 "--global-batch 16 --network %s", nets[i]);
    char *jargs = g_strdup_printf("%s --format json", args);
    Proc p = run_line(args);
    cJSON *j = run_json(jargs);
    g_assert_cmpint(p.status, ==, 0);
    char *net = g_strdup_printf("\nnetwork    %s (", nets[i]);
    g_assert_nonnull(strstr(p.out, net));
    g_assert_nonnull(strstr(p.out, " measured (idle / busy time of the busiest stage), "));
    g_assert_nonnull(strstr(p.out, " analytic (p-1)/m\n"));
    g_assert_cmpfloat_with_epsilon(report_value(p.out, "\nbubble ", "bubble     "), num(j, "bubble_fraction"), 5e-5);
    g_assert_cmpfloat_with_epsilon(report_value(p.out, "\nbubble ", "busiest stage), "),
                                   num(j, "analytic_bubble_fraction"), 5e-5);
    /* d = 1, p = 2: the only gradient all-reduce is the tied embedding's */
    const cJSON *by = obj(j, "bytes_per_iteration");
    g_assert_cmpfloat(num(by, "embedding"), >, 0);
    g_assert_cmpfloat(num(by, "embedding"), ==, num(by, "dp"));
    g_assert_null(strstr(p.out, "dp comm"));
    g_assert_nonnull(strstr(p.out, "\n    embedding "));
    g_assert_nonnull(strstr(p.out, "tied-embedding all-reduce "));
    g_assert_null(strstr(p.out, "B, dp ")); /* the traffic line names no dp bytes */
    cJSON_Delete(j);
    proc_clear(&p);
    g_free(net);
    g_free(jargs);
    g_free(args);
  }
  /* d = 4: data-parallel traffic, of which the embedding's part is named */
  Proc p = run_line(SMALL " --schedule interleaved --chunks 2");
  cJSON *j = run_json(SMALL " --schedule interleaved --chunks 2 --format json");
  const cJSON *by = obj(j, "bytes_per_iteration");
  g_assert_cmpfloat(num(by, "embedding"), >, 0);
  g_assert_cmpfloat(num(by, "embedding"), <, num(by, "dp"));
  g_assert_nonnull(strstr(p.out, "\n    dp comm "));
  g_assert_nonnull(strstr(p.out, " of it the tied-embedding all-reduce) per iteration\n"));
  g_assert_nonnull(strstr(p.out, " analytic (p-1)/(v m)\n"));
  cJSON_Delete(j);
  proc_clear(&p);
  /* no pipeline: no embedding all-reduce at all */
  j = run_json("run --layers 8 --hidden 1024 --heads 16 --seq-len 512 --gpus 16 --tp 2 --global-batch 16 --format json");
  g_assert_cmpfloat(num(obj(j, "bytes_per_iteration"), "embedding"), ==, 0);
  cJSON_Delete(j);
  /* TeraPipe runs print the network line too */
  p = run_line("run --model gpt3-1b --cluster aws-p3-16xlarge --gpus 8 --tp 1 --pp 8 --dp 1 --global-batch 8 "
               "--schedule terapipe");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "\nnetwork    analytic ("));
  proc_clear(&p);
}

/* Why: --version is how a bug report says which ptdsim it is about. */
static void test_version(void) {
  Proc p = run_line("--version");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_cmpstr(p.err, ==, "");
  g_assert_true(g_regex_match_simple("^ptdsim [0-9]+\\.[0-9]+\\.[0-9]+\n$", p.out, 0, 0));
  proc_clear(&p);
}

/* --- 4. help --- */

/* Whether `text` names option `opt` as a whole word ("--tp" in "--tp=T",
 * not in "--tpx"). */
static gboolean mentions_option(const char *text, const char *opt) {
  gsize n = strlen(opt);
  for (const char *at = strstr(text, opt); at; at = strstr(at + 1, opt)) {
    char next = at[n];
    if (next == '=' || next == ' ' || next == '\n' || next == ',')
      return TRUE;
  }
  return FALSE;
}

/* Why: each verb explains itself, and the option names are a contract. */
static void test_help(void) {
  Proc p = run_line("--help");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "run"));
  g_assert_nonnull(strstr(p.out, "figure"));
  proc_clear(&p);

  p = run_line("run --help");
  g_assert_cmpint(p.status, ==, 0);
  const char *opts[] = {"--model",  "--layers",       "--hidden",      "--heads",       "--seq-len",
                        "--vocab",  "--cluster",      "--profile",     "--gpus",        "--tp",
                        "--pp",     "--dp",           "--global-batch", "--micro-batch", "--schedule",
                        "--layers-per-chunk", "--chunks", "--recompute", "--no-scatter-gather", "--no-fusion",
                        "--ddp",    "--tokens",       "--format"};
  for (guint i = 0; i < G_N_ELEMENTS(opts); i++)
    if (!mentions_option(p.out, opts[i]))
      g_test_fail_printf("run --help does not mention %s", opts[i]);
  proc_clear(&p);

  p = run_line("figure --help");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "--list"));
  proc_clear(&p);
}

/* --- 5. the Table 1 figure --- */

/* Why: the figure's error columns must be arithmetic on its own predicted
 * and published columns, not separately computed numbers that can drift. */
static void test_figure_table1(void) {
  Proc p = run_line("figure megatron-table1 --format json");
  cJSON *j = parse_json(&p);
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(j, "rows");
  g_assert_true(cJSON_IsArray(rows));
  int n = cJSON_GetArraySize(rows);
  g_assert_cmpint(n, >, 0);
  double sum = 0;
  const cJSON *row;
  cJSON_ArrayForEach(row, rows) {
    double pred = num(row, "tflops_per_gpu"), pub = num(row, "published_tflops_per_gpu");
    double err = num(row, "error_percent");
    g_assert_cmpfloat(pred, >, 0);
    g_assert_cmpfloat(pub, >, 0);
    assert_rel(err, 100 * (pred - pub) / pub, 1e-9);
    sum += fabs(err);
  }
  assert_rel(num(j, "mean_absolute_percentage_error"), sum / n, 1e-9);
  cJSON_Delete(j);
  proc_clear(&p);

  p = run_line("figure --list");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "megatron-table1"));
  proc_clear(&p);
}

/* --- 6. a textbook end-to-end run --- */

/* Why: with the ideal profile, 1F1B over p = 4 stages and m = 8 microbatches
 * must show the paper's bubble (p-1)/m through the whole program. */
static void test_ideal_bubble(void) {
  Proc p = run_line("run --profile ideal --layers 8 --hidden 1024 --heads 16 --seq-len 512 --gpus 4 --tp 1 --pp 4 "
                    "--global-batch 8 --micro-batch 1 --schedule 1f1b --format json");
  cJSON *j = parse_json(&p);
  double pp = 4, m = 8;
  g_assert_cmpfloat_with_epsilon(num(j, "bubble_fraction"), (pp - 1) / m, 1e-9);
  g_assert_cmpfloat_with_epsilon(num(j, "analytic_bubble_fraction"), (pp - 1) / m, 1e-12);
  cJSON_Delete(j);
  proc_clear(&p);
}

/* --- fixtures --- */

static void write_fixtures(void) {
  GError *error = NULL;
  char *path = g_build_filename(tmpdir, "malformed.json", NULL);
  g_file_set_contents(path, "{\"name\": \"broken\", \"nodes\": 4,\n", -1, &error);
  g_assert_no_error(error);
  g_free(path);

  /* the shipped A100 profile with a negative HBM bandwidth */
  const char *data = g_getenv("PTDSIM_DATA_DIR");
  g_assert_nonnull(data);
  char *src = g_build_filename(data, "calibrate", "profiles", "a100-sxm4-80gb.json", NULL);
  char *text = NULL;
  g_file_get_contents(src, &text, NULL, &error);
  g_assert_no_error(error);
  cJSON *json = cJSON_Parse(text);
  g_assert_nonnull(json);
  cJSON *bw = cJSON_GetObjectItemCaseSensitive(json, "hbm_GBps");
  g_assert_true(cJSON_IsNumber(bw));
  cJSON_SetNumberValue(bw, -bw->valuedouble);
  char *out = cJSON_Print(json);
  path = g_build_filename(tmpdir, "negative-bw.json", NULL);
  g_file_set_contents(path, out, -1, &error);
  g_assert_no_error(error);
  g_free(path);
  cJSON_free(out);
  cJSON_Delete(json);
  g_free(text);
  g_free(src);
}

static void remove_fixtures(void) {
  const char *names[] = {"malformed.json", "negative-bw.json"};
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    char *path = g_build_filename(tmpdir, names[i], NULL);
    g_remove(path);
    g_free(path);
  }
  g_rmdir(tmpdir);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  GError *error = NULL;
  tmpdir = test_tmp_dir("ptdsim-test-cli");
  g_assert_no_error(error);
  write_fixtures();

  g_test_add_func("/cli/json-contract", test_json_contract);
  g_test_add_func("/cli/determinism", test_determinism);
  for (guint i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
    char *path = g_strconcat("/cli/bad-input/", bad_cases[i].name, NULL);
    g_test_add_data_func(path, &bad_cases[i], test_bad_input);
    g_free(path);
  }
  g_test_add_func("/cli/allow-oom", test_allow_oom);
  g_test_add_func("/cli/unknown-option-no-suggestion", test_unknown_option_no_suggestion);
  g_test_add_func("/cli/tokens-suffixes", test_tokens_suffixes);
  g_test_add_func("/cli/text-report", test_text_report);
  g_test_add_func("/cli/version", test_version);
  g_test_add_func("/cli/help", test_help);
  g_test_add_func("/cli/figure-table1", test_figure_table1);
  g_test_add_func("/cli/ideal-bubble", test_ideal_bubble);
  int rc = g_test_run();
  remove_fixtures();
  g_free(tmpdir);
  return rc;
}
