/* ptdsim — end-to-end tests of what a third audit of the CLI found in the
 * stragglers, slow links, schedules and schedule files, MoE options and
 * the measurement records: a crash in --slow, results with exit 0 that
 * were wrong, a user's file replaced by --dump-schedule, errors that were
 * sweep rows, reads without a bound, options accepted against the docs,
 * and error lines that blamed the wrong thing.  Every case runs the real
 * binary ($PTDSIM_BIN) on small models and the analytic network. */
#include <cjson/cJSON.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "cli_harness.h"
#include "test_tmp.h"

static char *tmpdir;

/* Two nodes of Selene (t 8, p 2): a straggler, a node and a stage to name. */
#define RUN "run --model gpt3-1b --gpus 16 --tp 8 --pp 2 --global-batch 16 --network analytic"
#define PLAN "plan --model gpt3-1b --gpus 16 --global-batch 16 --network analytic"
#define SWEEP "sweep --model gpt3-1b --gpus 16 --tp 8 --pp 2 --global-batch 16,32 --network analytic"
/* the same with a token budget, for the whole run's options */
#define WHOLE RUN " --tokens 1T"

static char *in_tmp(const char *name) { return g_build_filename(tmpdir, name, NULL); }

static void expect_error_argv(const char *const *args, const char *needle) {
  Proc p = run_argv(args);
  g_test_message("-> %d: %s", p.status, p.err);
  assert_one_line_error(&p, needle);
  proc_clear(&p);
}

/* `line` refused by run, plan and sweep alike (sweep -o writing nothing). */
static void expect_refused_everywhere(const char *opts, const char *needle) {
  char *out = in_tmp("never.csv");
  char *lines[] = {g_strdup_printf(RUN " %s", opts), g_strdup_printf(PLAN " %s", opts),
                   g_strdup_printf(SWEEP " %s -o %s", opts, out)};
  for (guint i = 0; i < G_N_ELEMENTS(lines); i++) {
    CliBadCase c = {NULL, lines[i], needle};
    cli_test_bad(&c);
    g_assert_false(g_file_test(out, G_FILE_TEST_EXISTS));
    g_free(lines[i]);
  }
  g_free(out);
}

/* --- 1. the crash --- */

/* Why: parse_slow read *end through NULL when the index did not begin with
 * a digit: exit 139 with nothing on stderr, in run, plan and sweep (which
 * died mid-file). */
static void test_slow_crash(void) {
  static const char *const slow[] = {"gpu:0=0.5", "=0.5", "-1=0.5", "node:-1=0.5", "stage:=0.5", "Stage:0=0.5"};
  for (guint i = 0; i < G_N_ELEMENTS(slow); i++) {
    char *opts = g_strdup_printf("--slow %s", slow[i]);
    char *needle = g_strdup_printf("--slow '%s' is not WHO=FACTOR", slow[i]);
    expect_refused_everywhere(opts, needle);
    g_free(opts);
    g_free(needle);
  }
  expect_refused_everywhere("--slow-link rail:=0.5", "--slow-link 'rail:=0.5' is not WHERE=FACTOR");
}

/* --- 2. wrong results with exit 0 --- */

/* Why: a factor of 1e-300 stretched an op past the integer nanoseconds
 * before the 1e7 s check, and the iteration came out 6% shorter than
 * without the straggler; the error, once there was one, blamed the
 * profile and the cluster. */
static void test_straggler_overflow(void) {
  static const CliBadCase cases[] = {
      {NULL, RUN " --slow 0=1e-300", "a GPU or NIC slowed to F (--slow, --gpu-speed, --slow-link) takes 1/F as long"},
      {NULL, RUN " --slow 0=1e-15", "with its stragglers the simulated iteration lasts longer than 1e+07 s"},
      {NULL, "run --model gpt3-1b --gpus 16 --tp 8 --pp 2 --global-batch 16 --slow-link node:1=1e-300",
       "with its stragglers the simulated iteration lasts longer than 1e+07 s"},
  };
  cli_test_bad_each(cases, G_N_ELEMENTS(cases));
  /* a factor the clock holds still slows the run */
  cJSON *base = run_json(RUN " --format json"), *slow = run_json(RUN " --slow 0=0.5 --format json");
  g_assert_cmpfloat(num(slow, "iteration_time_s"), >, num(base, "iteration_time_s"));
  cJSON_Delete(base);
  cJSON_Delete(slow);
}

/* Why: a schedule study (--stage-times) divided the model's FLOPs by the
 * user's times: MFU 113% at 1,1,1,0.05 and 6,049% at 1e-30. */
static void test_stage_times_no_flops(void) {
  static const char *const times[] = {"1,1,1,0.05", "0.1,0.1,0.1,0", "1e-30,1e-30,1e-30,0"};
  static const char *const flops[] = {"tflops_per_gpu", "hardware_tflops_per_gpu", "percent_of_peak", "mfu_percent",
                                      "hfu_percent",    "model_tflops_per_gpu",    "mfu",             "aggregate_pflops"};
  for (guint i = 0; i < G_N_ELEMENTS(times); i++) {
    char *line = g_strdup_printf(RUN " --schedule zb-h1 --stage-times %s --format json", times[i]);
    cJSON *j = run_json(line);
    g_assert_cmpfloat(num(j, "iteration_time_s"), >, 0);
    for (guint k = 0; k < G_N_ELEMENTS(flops); k++)
      g_assert_null(cJSON_GetObjectItemCaseSensitive(j, flops[k]));
    cJSON_Delete(j);
    g_free(line);
  }
  Proc p = run_line(RUN " --schedule zb-h1 --stage-times 1,1,1,0.05");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "throughput none: --stage-times"));
  g_assert_null(strstr(p.out, "MFU"));
  proc_clear(&p);
}

/* Why: a node with every NIC down finished 3-11% slower instead of being
 * refused; zb-auto with a limit below one microbatch ran above it. */
static void test_nothing_left(void) {
  static const CliBadCase cases[] = {
      {NULL, RUN " --slow-link node:0=0", "leaves node 0 with none of its 8 NICs up"},
      {NULL, RUN " --slow-link node:1=0", "leaves node 1 with none of its 8 NICs up"},
      {NULL, RUN " --slow-link rail:0=0,rail:1=0,rail:2=0,rail:3=0,rail:4=0,rail:5=0,rail:6=0,rail:7=0",
       "leaves node 0 with none of its 8 NICs up"},
      {NULL,
       "run --model gpt3-1b --gpus 16 --tp 4 --pp 4 --global-batch 16 --network analytic --schedule zb-auto "
       "--activation-limit 1e-30",
       "--activation-limit 1e-30 GiB is less than one microbatch's activations on a stage"},
  };
  cli_test_bad_each(cases, G_N_ELEMENTS(cases));
  /* seven rails down leave the eighth */
  run_line_ok(RUN " --slow-link rail:0=0,rail:1=0,rail:2=0,rail:3=0,rail:4=0,rail:5=0,rail:6=0");
}

/* --- 3. --dump-schedule --- */

/* Why: the CSV was written before the run, so a run that then failed
 * left it behind or replaced an existing file; onto --cluster or
 * --profile it replaced the input (exit 0), onto --trace the trace
 * replaced it. */
static void test_dump_schedule(void) {
  char *dump = in_tmp("dump.csv"), *fresh = in_tmp("fresh.csv");
  write_bytes(dump, "mine\n", -1);
  /* out of memory */
  char *line = g_strdup_printf("run --model gpt3-175b --gpus 16 --tp 8 --pp 2 --global-batch 16 --network analytic "
                               "--dump-schedule %s",
                               dump);
  CliBadCase oom = {NULL, line, "does not fit in memory"};
  cli_test_bad(&oom);
  g_free(line);
  /* a --trace that cannot be written */
  line = g_strdup_printf(RUN " --dump-schedule %s --trace /nonexistent-dir/t.json", dump);
  CliBadCase trace = {NULL, line, "cannot write --trace"};
  cli_test_bad(&trace);
  g_free(line);
  line = g_strdup_printf(RUN " --dump-schedule %s --trace /nonexistent-dir/t.json", fresh);
  cli_test_bad(&(CliBadCase){NULL, line, "cannot write --trace"});
  g_free(line);
  gsize len;
  char *text = slurp(dump, &len);
  g_assert_cmpstr(text, ==, "mine\n");
  g_free(text);
  g_assert_false(g_file_test(fresh, G_FILE_TEST_EXISTS));
  /* onto an input, or onto the trace */
  char *cluster = in_tmp("c.json"), *profile = in_tmp("p.json"), *src_c = data_file("topologies/selene.json"),
       *src_p = data_file("calibrate/profiles/a100-sxm4-80gb.json");
  char *c_text = slurp(src_c, &len), *p_text;
  write_bytes(cluster, c_text, (gssize)len);
  gsize p_len;
  p_text = slurp(src_p, &p_len);
  write_bytes(profile, p_text, (gssize)p_len);
  const char *onto_cluster[] = {"run", "--model", "gpt3-1b", "--gpus", "16", "--tp", "8", "--pp", "2",
                                "--global-batch", "16", "--network", "analytic", "--cluster", cluster,
                                "--profile", profile, "--dump-schedule", cluster, NULL};
  expect_error_argv(onto_cluster, "is also an input of this run");
  const char *onto_profile[] = {"run", "--model", "gpt3-1b", "--gpus", "16", "--tp", "8", "--pp", "2",
                                "--global-batch", "16", "--network", "analytic", "--cluster", cluster,
                                "--profile", profile, "--dump-schedule", profile, NULL};
  expect_error_argv(onto_profile, "is also an input of this run");
  gsize l2;
  char *now = slurp(cluster, &l2);
  g_assert_true(l2 == len && memcmp(now, c_text, len) == 0);
  g_free(now);
  now = slurp(profile, &l2);
  g_assert_true(l2 == p_len && memcmp(now, p_text, p_len) == 0);
  g_free(now);
  char *both = in_tmp("both.json");
  line = g_strdup_printf(RUN " --dump-schedule %s --trace %s", both, both);
  cli_test_bad(&(CliBadCase){NULL, line, "--dump-schedule and --trace name the same file"});
  g_free(line);
  g_assert_false(g_file_test(both, G_FILE_TEST_EXISTS));
  line = g_strdup_printf(RUN " --dump-schedule %s/./both.json --trace %s", tmpdir, both);
  cli_test_bad(&(CliBadCase){NULL, line, "--dump-schedule and --trace name the same file"});
  g_free(line);
  g_assert_false(g_file_test(both, G_FILE_TEST_EXISTS));
  /* a run that succeeds writes both */
  char *t = in_tmp("t.json");
  line = g_strdup_printf(RUN " --dump-schedule %s --trace %s", fresh, t);
  run_line_ok(line);
  g_free(line);
  text = slurp(fresh, &len);
  g_assert_true(g_str_has_prefix(text, "0F0,"));
  g_free(text);
  g_free(c_text);
  g_free(p_text);
  g_free(src_c);
  g_free(src_p);
  g_free(cluster);
  g_free(profile);
  g_free(both);
  g_free(t);
  g_free(dump);
  g_free(fresh);
}

/* --- 4. errors that were rows --- */

/* Why: the second pass made --memory-reserve NaN an error for the whole
 * sweep; the options added since became 'invalid' rows with exit 0. */
static void test_sweep_errors_not_rows(void) {
  static const struct {
    const char *args, *needle;
  } cases[] = {
      {"--moe-imbalance NaN", "--moe-imbalance 'NaN' is not a number from 1 to 1e6"},
      {"--activation-limit NaN", "--activation-limit 'NaN' is not a number of GiB above 0"},
      {"--slow 0=2", "--slow '0=2' is not WHO=FACTOR"},
      {"--gpu-speed lognormal:-1", "--gpu-speed 'lognormal:-1' is not lognormal:SIGMA"},
      {"--seed abc", "--seed 'abc' is not a whole number"},
      {"--tokens 1T --checkpoint-every -1", "--checkpoint-every '-1' is not a number of iterations"},
      {"--stage-times x", "--stage-times 'x' is not F,B,W,COMM"},
      {"--schedule-file /nonexistent-dir/s.csv", "--schedule-file '/nonexistent-dir/s.csv' cannot be read"},
      {"--stage-times 1,1,1,0;x", "--stage-times 'x' is not F,B,W,COMM"},
  };
  char *out = in_tmp("rows.csv");
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    char *line = g_strdup_printf(SWEEP " %s -o %s", cases[i].args, out);
    CliBadCase c = {NULL, line, cases[i].needle};
    cli_test_bad(&c);
    g_assert_false(g_file_test(out, G_FILE_TEST_EXISTS));
    g_free(line);
  }
  g_free(out);
}

/* --- 5. bounds before reading --- */

/* Why: a 3 GB sparse --schedule-file was read whole before its 64 MiB
 * check (79 s, 3.15 GB); 60 MB of empty cells took 90 s and 783 MB; a
 * file of 10^6 rows was said to have 5; --trials had no upper bound. */
static void test_bounds(void) {
  char *big = in_tmp("big.csv");
  write_bytes(big, "", 0);
  g_assert_cmpint(truncate(big, (off_t)3 << 30), ==, 0);
  char *line = g_strdup_printf(RUN " --schedule-file %s", big);
  cli_test_bad(&(CliBadCase){NULL, line, "cannot be read: larger than 64 MiB"});
  g_free(line);
  g_unlink(big);
  GString *rows = g_string_new(NULL);
  for (guint i = 0; i < 1000000; i++)
    g_string_append(rows, "0F0\n");
  char *many = in_tmp("rows.csv");
  write_bytes(many, rows->str, (gssize)rows->len);
  line = g_strdup_printf(RUN " --schedule-file %s", many);
  cli_test_bad(&(CliBadCase){NULL, line, "has 1000000 rows of actions; give one row per pipeline rank, 2 for --pp 2"});
  g_free(line);
  g_string_truncate(rows, 0);
  g_string_append(rows, "0F0");
  for (guint i = 0; i < (1u << 20) + 1; i++)
    g_string_append_c(rows, ',');
  g_string_append(rows, "\n1F0\n");
  write_bytes(many, rows->str, (gssize)rows->len);
  line = g_strdup_printf(RUN " --schedule-file %s", many);
  cli_test_bad(&(CliBadCase){NULL, line, "rank 0 has more than 1048576 cells"});
  g_free(line);
  g_string_free(rows, TRUE);
  g_free(many);
  g_free(big);
  static const CliBadCase cases[] = {
      {NULL, WHOLE " --trials 1000000", "--trials '1000000' is not a whole number from 1 to 100000"},
      {NULL, WHOLE " --trials 2147483647", "--trials '2147483647' is not a whole number from 1 to 100000"},
  };
  cli_test_bad_each(cases, G_N_ELEMENTS(cases));
}

/* --- 6. options accepted against the docs --- */

/* Why: the MoE shape options were ignored on a dense model; a first-dense
 * count past the layers was accepted; seeds, spare nodes and reals took
 * hexadecimal, exponents and leading spaces; --seed and --repair-hours
 * were taken without a use. */
static void test_against_docs(void) {
  static const char *const moe[] = {"moe-router-topk", "moe-layer-freq", "moe-first-dense-layers",
                                    "moe-ffn-hidden-size", "moe-shared-expert-intermediate-size"};
  for (guint i = 0; i < G_N_ELEMENTS(moe); i++) {
    char *line = g_strdup_printf(RUN " --%s 2", moe[i]);
    char *needle = g_strdup_printf("--%s shapes mixture-of-experts layers, but the model is dense", moe[i]);
    cli_test_bad(&(CliBadCase){NULL, line, needle});
    g_free(line);
    g_free(needle);
  }
  static const CliBadCase cases[] = {
      {NULL,
       "run --model mixtral-8x7b --gpus 16 --tp 8 --pp 2 --global-batch 16 --network analytic --sequence-parallel "
       "--moe-first-dense-layers 1000",
       "--moe-first-dense-layers 1000 and --moe-layer-freq 1 leave none of the 32 layers an MoE layer"},
      {NULL, RUN " --gpu-speed lognormal:0.1 --seed 0x10", "--seed '0x10' is not a whole number from 0 to 4294967295"},
      {NULL, RUN " --gpu-speed lognormal:0.1 --seed 1e3", "--seed '1e3' is not a whole number"},
      {NULL, RUN " --gpu-speed lognormal:0.1 --seed 07", "--seed '07' is not a whole number"},
      {NULL, WHOLE " --spare-nodes 1e3", "--spare-nodes '1e3' is not a whole number from 0 to 1000000"},
      {NULL, RUN " --gpu-speed lognormal:", "--gpu-speed 'lognormal:' is not lognormal:SIGMA"},
      {NULL, RUN " --gpu-speed lognormal:0x1p-3", "--gpu-speed 'lognormal:0x1p-3' is not lognormal:SIGMA"},
      {NULL, RUN " --moe-imbalance 0x10", "--moe-imbalance '0x10' is not a number from 1 to 1e6, written in decimal"},
      {NULL, RUN " --stage-times 0x1,1,1,0", "--stage-times '0x1,1,1,0' is not F,B,W,COMM"},
      {NULL, RUN " --schedule zb-auto --activation-limit 0x1p3", "--activation-limit '0x1p3' is not a number of GiB"},
      {NULL, RUN " --memory-reserve inf", "--memory-reserve 'inf' is not a number of GiB from 0 to 1024"},
      {NULL, RUN " --slow 0=0x1p-1", "--slow '0=0x1p-1' is not WHO=FACTOR"},
      {NULL, WHOLE " --restart-time 0x10", "--restart-time '0x10' is not a number of seconds"},
      {NULL, WHOLE " --checkpoint-every 0x10m", "--checkpoint-every '0x10m' is not a number of iterations"},
      {NULL, RUN " --seed 3", "--seed picks --gpu-speed's draw and the whole run's Monte-Carlo (--trials)"},
      {NULL, WHOLE " --repair-hours 3", "--repair-hours is how long a failed node is away from a pool of spares"},
  };
  cli_test_bad_each(cases, G_N_ELEMENTS(cases));
  /* leading and trailing spaces (one argument each) */
  const char *lead[][3] = {{"--seed", " 1", "--seed ' 1' is not a whole number"},
                           {"--moe-imbalance", " 1.5", "--moe-imbalance ' 1.5' is not a number"},
                           {"--stage-times", "1, 1,1,0", "--stage-times '1, 1,1,0' is not F,B,W,COMM"},
                           {"--slow", "0= 0.5", "--slow '0= 0.5' is not WHO=FACTOR"},
                           {"--memory-reserve", "3 ", "--memory-reserve '3 ' is not a number of GiB"}};
  for (guint i = 0; i < G_N_ELEMENTS(lead); i++) {
    const char *args[] = {"run", "--model", "gpt3-1b", "--gpus", "16", "--tp", "8", "--pp", "2", "--global-batch",
                          "16", "--network", "analytic", "--gpu-speed", "lognormal:0.1", lead[i][0], lead[i][1],
                          NULL};
    expect_error_argv(args, lead[i][2]);
  }
  /* what the docs allow still runs */
  run_line_ok(RUN " --gpu-speed lognormal:0.1 --seed 0");
  run_line_ok(WHOLE " --spare-nodes 0 --repair-hours 12.5 --trials 3 --seed 4294967295 --checkpoint-every 1.5h");
  run_line_ok(RUN " --schedule zb-h1 --stage-times 1.5e0,.5,2.,0");
}

/* --- 7. fit --- */

static char *measurements_with_forward(const char *value) {
  char *seed = data_file("fuzz/seeds/measurements/synthetic-small.json");
  gsize len;
  char *text = slurp(seed, &len);
  cJSON *j = cJSON_Parse(text);
  g_assert_nonnull(j);
  cJSON *layer = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "layer"), 0);
  cJSON_DeleteItemFromObjectCaseSensitive(layer, "forward_spread_us");
  cJSON_ReplaceItemInObjectCaseSensitive(layer, "forward_us", cJSON_CreateRaw(value));
  char *out = cJSON_PrintUnformatted(j);
  char *path = in_tmp("m.json");
  write_bytes(path, out, -1);
  cJSON_free(out);
  cJSON_Delete(j);
  g_free(text);
  g_free(seed);
  return path;
}

/* Why: a measured time of 5e-324 us made fit --compare print inf% (1e-300
 * a 300-digit percentage); --check-facts never read an attention row's
 * kv_heads, and printed kv=nan. */
static void test_fit(void) {
  static const char *const tiny[] = {"5e-324", "1e-300", "0.0009"};
  for (guint i = 0; i < G_N_ELEMENTS(tiny); i++) {
    char *m = measurements_with_forward(tiny[i]);
    char *line = g_strdup_printf("fit --compare %s --profile a100-sxm4-80gb", m);
    cli_test_bad(&(CliBadCase){NULL, line, "layer[0].'forward_us' is"});
    g_free(line);
    g_free(m);
  }
  char *m = measurements_with_forward("0.001");
  char *line = g_strdup_printf("fit --compare %s --profile a100-sxm4-80gb", m);
  Proc p = run_line(line);
  g_assert_cmpint(p.status, ==, 0);
  g_assert_null(strstr(p.out, "inf"));
  proc_clear(&p);
  g_free(line);
  g_free(m);
  static const char *const kv[] = {"", "\"kv_heads\": null,", "\"kv_heads\": \"8\",", "\"kv_heads\": 0,",
                                   "\"kv_heads\": 3,", "\"kv_heads\": 1.5,", "\"kv_heads\": 32,"};
  char *facts = in_tmp("facts.json");
  for (guint i = 0; i <= G_N_ELEMENTS(kv); i++) {
    char *text = g_strdup_printf("{\"attention\": [{\"b\": 1, \"heads\": 16, %s \"s\": 2048, \"d\": 128, "
                                 "\"fwd_s\": 0.000125, \"bwd_s\": 0.00041}]}",
                                 i < G_N_ELEMENTS(kv) ? kv[i] : "\"kv_heads\": 4,");
    write_bytes(facts, text, -1);
    line = g_strdup_printf("fit --check-facts %s --profile h100-sxm5-80gb", facts);
    if (i < G_N_ELEMENTS(kv))
      cli_test_bad(&(CliBadCase){NULL, line, "attention[0] needs kv_heads, a whole number from 1 to heads"});
    else {
      p = run_line(line);
      g_assert_cmpint(p.status, ==, 0);
      g_assert_nonnull(strstr(p.out, "kv=4"));
      g_assert_null(strstr(p.out, "nan"));
      proc_clear(&p);
    }
    g_free(line);
    g_free(text);
  }
  g_free(facts);
}

/* --- 8. error lines --- */

/* Why: 65 --slow entries blamed a valid one; plan --schedule zb-auto
 * without a limit spoke of GPU counts; plan --schedule-file said to drop a
 * --schedule 1f1b never given; FSDP2 with --overlap-param-gather led round
 * four messages; --spare-nodes 1000000000 "is not a whole number"; values
 * were quoted whole (~1,000 bytes). */
static void test_error_lines(void) {
  GString *many = g_string_new(RUN " --slow ");
  for (guint i = 0; i < 65; i++)
    g_string_append_printf(many, "%s%u=0.5", i ? "," : "", i % 16);
  cli_test_bad(&(CliBadCase){NULL, many->str, "--slow has 65 entries, more than 64; give at most 64"});
  g_string_free(many, TRUE);
  char *csv = in_tmp("bad.csv");
  write_bytes(csv, "0F0,0B0\n", -1);
  char *line = g_strdup_printf(PLAN " --schedule-file %s", csv);
  Proc p = run_line(line);
  assert_one_line_error(&p, "plan searches the schedules itself, so it does not take --schedule-file");
  g_assert_null(strstr(p.err, "1f1b"));
  proc_clear(&p);
  g_free(line);
  g_free(csv);
  static const CliBadCase cases[] = {
      {NULL, PLAN " --schedule zb-auto", "--schedule zb-auto finds a schedule within an activation-memory limit"},
      {NULL, "run --model llama3-8b --gpus 16 --global-batch 16 --network analytic --fsdp --overlap-param-gather",
       "--fsdp gathers the parameters itself, layer by layer, overlapped with the forward; drop "
       "--overlap-param-gather"},
      {NULL, WHOLE " --spare-nodes 1000000000", "--spare-nodes '1000000000' is not a whole number from 0 to 1000000"},
  };
  cli_test_bad_each(cases, G_N_ELEMENTS(cases));
  /* a long value is quoted in part */
  static const char *const opts[] = {"--stage-times", "--slow", "--slow-link", "--gpu-speed", "--moe-imbalance",
                                     "--seed", "--checkpoint-every"};
  GString *value = g_string_new("1");
  for (guint i = 0; i < 1000; i++)
    g_string_append_c(value, 'x');
  for (guint i = 0; i < G_N_ELEMENTS(opts); i++) {
    const char *args[] = {"run", "--model", "gpt3-1b", "--gpus", "16", "--tp", "8", "--pp", "2", "--global-batch",
                          "16", "--network", "analytic", "--tokens", "1T", opts[i], value->str, NULL};
    p = run_argv(args);
    assert_one_line_error(&p, opts[i]);
    g_assert_nonnull(strstr(p.err, "..."));
    g_assert_cmpuint(strlen(p.err), <, 600);
    proc_clear(&p);
  }
  g_string_free(value, TRUE);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  tmpdir = test_tmp_dir("ptdsim-harden3");
  g_test_add_func("/harden3/slow-crash", test_slow_crash);
  g_test_add_func("/harden3/straggler-overflow", test_straggler_overflow);
  g_test_add_func("/harden3/stage-times-no-flops", test_stage_times_no_flops);
  g_test_add_func("/harden3/nothing-left", test_nothing_left);
  g_test_add_func("/harden3/dump-schedule", test_dump_schedule);
  g_test_add_func("/harden3/sweep-errors-not-rows", test_sweep_errors_not_rows);
  g_test_add_func("/harden3/bounds", test_bounds);
  g_test_add_func("/harden3/against-docs", test_against_docs);
  g_test_add_func("/harden3/fit", test_fit);
  g_test_add_func("/harden3/error-lines", test_error_lines);
  int rc = g_test_run();
  test_rm_rf(tmpdir);
  g_free(tmpdir);
  return rc;
}
