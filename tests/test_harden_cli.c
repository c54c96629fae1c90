/* ptdsim — end-to-end tests of hostile input: numbers outside their
 * physical range, outputs that must not replace what is not theirs,
 * options read strictly, inputs read with bounds.  Every case runs the
 * real binary ($PTDSIM_BIN); where a shell is needed (a redirection, a
 * working directory, an environment, a time limit) it runs under /bin/sh
 * with the binary as "$PTDSIM_BIN". */
#include <cjson/cJSON.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_harness.h"
#include "test_tmp.h"

static char *tmpdir;

/* A small configuration that simulates in milliseconds. */
#define SMALL "run --model gpt3-1b --gpus 8 --tp 8 --global-batch 8 --network analytic"

/* Runs `script` under /bin/sh (with $PTDSIM_BIN and $T, the test's folder),
 * killed after 60 s. */
static Proc run_sh(const char *script) { return run_sh_in(tmpdir, script, 60); }

static char *in_tmp(const char *name) { return g_build_filename(tmpdir, name, NULL); }

/* A shipped JSON file with one number changed (a dotted key path), written
 * into the test's folder as `name`; returns its path. */
static char *edited(const char *shipped, const char *key_path, double value, const char *name) {
  char *src = g_build_filename(g_getenv("PTDSIM_DATA_DIR"), shipped, NULL);
  gsize len;
  char *text = slurp(src, &len);
  cJSON *root = cJSON_Parse(text);
  g_assert_nonnull(root);
  char **parts = g_strsplit(key_path, ".", -1);
  cJSON *at = root;
  guint n = g_strv_length(parts);
  for (guint i = 0; i + 1 < n; i++)
    at = cJSON_GetObjectItemCaseSensitive(at, parts[i]);
  g_assert_nonnull(at);
  cJSON_DeleteItemFromObjectCaseSensitive(at, parts[n - 1]);
  cJSON_AddNumberToObject(at, parts[n - 1], value);
  char *out = cJSON_Print(root), *path = in_tmp(name);
  g_assert_true(g_file_set_contents(path, out, -1, NULL));
  cJSON_free(out);
  cJSON_Delete(root);
  g_strfreev(parts);
  g_free(text);
  g_free(src);
  return path;
}

static void expect_error(const char *args, const char *needle) {
  Proc p = run_line(args);
  assert_one_line_error(&p, needle);
  proc_clear(&p);
}

static void expect_errorf(const char *needle, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void expect_errorf(const char *needle, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *args = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  expect_error(args, needle);
  g_free(args);
}

/* run_line on printf-style arguments, asserting exit 0. */
static void expect_successf(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static void expect_successf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *args = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  Proc p = run_line(args);
  if (p.status != 0)
    g_test_message("ptdsim %s: %s", args, p.err);
  g_assert_cmpint(p.status, ==, 0);
  proc_clear(&p);
  g_free(args);
}

/* --- numbers outside their physical range --- */

/* Why: a profile number far outside physics overflowed the nanosecond
 * clock (a heap overflow), gave a negative iteration time or an infinite
 * TFLOP/s.  Each is refused, naming the file, the key and the range. */
static void test_profile_out_of_range(void) {
  static const struct {
    const char *profile, *key;
    double value;
    const char *needle;
  } cases[] = {
      {"calibrate/profiles/a100-sxm4-80gb.json", "memory_efficiency", 1e-15, "'memory_efficiency' is 1e-15, outside [0.01, 1]"},
      {"calibrate/profiles/ideal.json", "layer_forward_ns_per_token", 1e15, "'layer_forward_ns_per_token' is 1e+15"},
      {"calibrate/profiles/ideal.json", "peak_tflops", 1e-308, "'peak_tflops' is 1e-308, outside"},
      {"calibrate/profiles/a100-sxm4-80gb.json", "gemm.tile_bandwidth_GBps", 1e-9, "'gemm.tile_bandwidth_GBps'"},
      {"calibrate/profiles/a100-sxm4-80gb.json", "kernel_launch_us", 1e9, "'kernel_launch_us'"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    char *path = edited(cases[i].profile, cases[i].key, cases[i].value, "bad-profile.json");
    char *args = g_strdup_printf(SMALL " --profile %s --format json", path);
    expect_error(args, cases[i].needle);
    Proc p = run_line(args);
    g_assert_nonnull(strstr(p.err, path));
    proc_clear(&p);
    g_free(args);
    /* plan must not rank what run refuses */
    args = g_strdup_printf("plan --model gpt3-1b --gpus 8 --global-batch 8 --network analytic --profile %s", path);
    expect_error(args, cases[i].key);
    g_free(args);
    g_free(path);
  }
}

/* Why: within every range, a long enough run can still pass what the
 * clock holds; it is an error at the documented bound (1e7 s), never a
 * wrapped-around negative time.  Both sides of the bound are checked. */
static void test_time_bound(void) {
  char *path = edited("calibrate/profiles/ideal.json", "layer_forward_ns_per_token", 1e6, "slow.json");
  /* 96 layers x 2048 tokens x 3 (forward, backward twice) x 1e-3 s per token-layer x B sequences, recompute adds one */
  char *args = g_strdup_printf("run --model gpt3-175b --gpus 8 --tp 8 --global-batch 16384 --allow-oom --network "
                               "analytic --profile %s",
                               path);
  expect_error(args, "longer than 1e+07 s");
  g_free(args);
  args = g_strdup_printf("run --model gpt3-175b --gpus 8 --tp 8 --global-batch 8 --allow-oom --network analytic "
                         "--format json --profile %s",
                         path);
  cJSON *j = run_json(args);
  g_assert_cmpfloat(num(j, "iteration_time_s"), >, 0);
  g_assert_cmpfloat(num(j, "iteration_time_s"), <=, 1e7);
  cJSON_Delete(j);
  g_free(args);
  g_free(path);
  /* the other end: an iteration shorter than a nanosecond gave null (infinite) TFLOP/s, which plan ranked */
  path = edited("calibrate/profiles/ideal.json", "layer_forward_ns_per_token", 0.001, "fast.json");
  const char *tiny = "--layers 1 --hidden 64 --heads 1 --seq-len 1 --vocab 1 --gpus 1 --global-batch 1";
  expect_errorf("tflops_per_gpu = inf", "run %s --profile %s --format json", tiny, path);
  expect_errorf("less than a nanosecond", "plan %s --profile %s --format json", tiny, path);
  g_free(path);
}

/* Why: a huge PCIe latency gave a "schedule deadlock"; cluster sizes past
 * what can be built aborted on an allocation or wrapped the GPU count to 0. */
static void test_cluster_out_of_range(void) {
  static const struct {
    const char *key;
    double value;
    const char *needle;
  } cases[] = {
      {"fabric.node.pcie_latency_us", 1e12, "'fabric.node.pcie_latency_us' is 1e+12"},
      {"nodes", 1000000, "'nodes' is 1e+06"},
      {"nodes", 536870912, "'nodes'"},
      {"nodes", 65536, "GPUs, more than the 262144"},
      {"fabric.node.cpus", 1e6, "'fabric.node.cpus'"},
      {"network.nic_GBps", 1e-30, "'network.nic_GBps'"},
      {"nccl.ring_base_us.LL", -1, "'nccl.ring_base_us.LL'"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    char *path = edited("topologies/selene.json", cases[i].key, cases[i].value, "bad-cluster.json");
    char *args = g_strdup_printf("run --model gpt3-1b --gpus 16 --tp 8 --pp 2 --global-batch 16 --cluster %s", path);
    expect_error(args, cases[i].needle);
    g_free(args);
    args = g_strdup_printf("collective --op allreduce --gpus 16 --max-bytes 1M --cluster %s", path);
    expect_error(args, cases[i].key);
    g_free(args);
    g_free(path);
  }
}

/* --- names and paths --- */

/* Why: a file in the working directory named like a built-in replaced the
 * built-in, while the report still printed the built-in's name.  A name
 * is a built-in; a path (a '/' or .json) is a file. */
static void test_name_is_not_a_file(void) {
  char *path = edited("calibrate/profiles/a100-sxm4-80gb.json", "memory_efficiency", 0.2, "a100-sxm4-80gb");
  Proc named = run_sh("cd \"$T\" && exec \"$PTDSIM_BIN\" " SMALL " --profile a100-sxm4-80gb --format json");
  cJSON *builtin = run_json(SMALL " --profile a100-sxm4-80gb --format json");
  cJSON *j = parse_json(&named);
  g_assert_cmpfloat(num(j, "iteration_time_s"), ==, num(builtin, "iteration_time_s"));
  cJSON_Delete(j);
  /* the file, given as a path, is the file */
  Proc file = run_sh("cd \"$T\" && exec \"$PTDSIM_BIN\" " SMALL " --profile ./a100-sxm4-80gb --format json");
  j = parse_json(&file);
  g_assert_cmpfloat(num(j, "iteration_time_s"), >, num(builtin, "iteration_time_s"));
  cJSON_Delete(j);
  cJSON_Delete(builtin);
  proc_clear(&named);
  proc_clear(&file);
  /* a name that is no built-in says how to give the file */
  Proc p = run_sh("cd \"$T\" && cp a100-sxm4-80gb mine && exec \"$PTDSIM_BIN\" " SMALL " --profile mine");
  assert_one_line_error(&p, "e.g. ./mine");
  proc_clear(&p);
  g_free(path);
}

/* Why: a directory or a FIFO given as --cluster said "no such file"; a
 * FIFO blocked the reader. */
static void test_not_a_regular_input(void) {
  char *fifo = in_tmp("fifo.json");
  g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
  char *args = g_strdup_printf(SMALL " --cluster %s", fifo);
  expect_error(args, "not a regular file");
  g_free(args);
  args = g_strdup_printf(SMALL " --cluster %s/", tmpdir);
  expect_error(args, "is a directory");
  g_free(args);
  Proc p = run_sh("exec \"$PTDSIM_BIN\" fit \"$T/fifo.json\" -o \"$T/out.json\"");
  assert_one_line_error(&p, "not a regular file");
  proc_clear(&p);
  p = run_sh("exec \"$PTDSIM_BIN\" fit /dev/zero -o \"$T/out.json\"");
  assert_one_line_error(&p, "not a regular file");
  proc_clear(&p);
  char *out = in_tmp("out.json");
  g_assert_false(g_file_test(out, G_FILE_TEST_EXISTS));
  g_free(out);
  g_unlink(fifo);
  g_free(fifo);
}

/* --- measurements read strictly --- */

static char *synthesize(const char *name) {
  char *path = in_tmp(name);
  char *args = g_strdup_printf("fit --synthesize a100-sxm4-80gb -o %s", path);
  run_line_ok(args);
  g_free(args);
  return path;
}

/* Why: trailing junk and duplicate keys in a measurements file were
 * accepted (the first key won, unlike every JSON tool); a file larger than
 * any input was read whole. */
static void test_measurements_strict(void) {
  char *m = synthesize("m.json");
  gsize len;
  char *text = slurp(m, &len);
  char *junk = in_tmp("junk.json"), *dup = in_tmp("dup.json"), *big = in_tmp("big.json");
  char *with_junk = g_strconcat(text, "\n{\"more\": 1}\n", NULL);
  g_assert_true(g_file_set_contents(junk, with_junk, -1, NULL));
  /* the first member again, with another value */
  char *brace = strchr(text, '{');
  g_assert_nonnull(brace);
  char *with_dup = g_strdup_printf("{\"format\": \"other\", %s", brace + 1);
  g_assert_true(g_file_set_contents(dup, with_dup, -1, NULL));
  expect_errorf("malformed JSON", "fit %s -o %s/p.json", junk, tmpdir);
  expect_errorf("'format' is given twice", "fit %s -o %s/p.json", dup, tmpdir);
  Proc p = run_sh("head -c 70000000 /dev/zero | tr '\\0' ' ' > \"$T/big.json\" && exec \"$PTDSIM_BIN\" fit "
                  "\"$T/big.json\" -o \"$T/p.json\"");
  assert_one_line_error(&p, "more than the 67108864");
  proc_clear(&p);
  g_unlink(big);
  g_free(with_junk);
  g_free(with_dup);
  g_free(text);
  g_free(junk);
  g_free(dup);
  g_free(big);
  g_free(m);
}

/* --- outputs --- */

static mode_t mode_of(const char *path) {
  GStatBuf st;
  g_assert_cmpint(g_lstat(path, &st), ==, 0);
  return st.st_mode;
}

/* Hidden temporary files (".NAME.XXXXXX") left in the test folder. */
static guint leftovers(void) {
  GDir *d = g_dir_open(tmpdir, 0, NULL);
  guint n = 0;
  const char *e;
  while ((e = g_dir_read_name(d)))
    n += e[0] == '.';
  g_dir_close(d);
  return n;
}

/* Why: fit -o replaced FIFOs, devices and symbolic links with a regular
 * file, overwrote its own input, and changed an existing file's mode. */
static void test_fit_output(void) {
  char *m = synthesize("meas.json");
  gsize len0;
  char *before = slurp(m, &len0);
  expect_errorf("is also an input", "fit %s -o %s", m, m);
  gsize len1;
  char *after = slurp(m, &len1);
  g_assert_cmpstr(before, ==, after);
  g_free(after);
  /* a FIFO, a symbolic link, a device */
  char *fifo = in_tmp("out-fifo"), *link = in_tmp("out-link"), *target = in_tmp("target.json");
  g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
  g_assert_true(g_file_set_contents(target, "keep", -1, NULL));
  g_assert_cmpint(symlink(target, link), ==, 0);
  expect_errorf("not a regular file", "fit %s -o %s", m, fifo);
  g_assert_true(S_ISFIFO(mode_of(fifo)));
  expect_errorf("a symbolic link", "fit %s -o %s", m, link);
  g_assert_true(S_ISLNK(mode_of(link)));
  after = slurp(target, &len1);
  g_assert_cmpstr(after, ==, "keep");
  g_free(after);
  expect_errorf("not a regular file", "fit %s -o /dev/null", m);
  g_assert_true(S_ISCHR(mode_of("/dev/null")));
  expect_errorf("not a regular file", "fit --synthesize a100-sxm4-80gb -o %s", fifo);
  /* an existing file keeps its mode */
  char *out = in_tmp("fitted.json");
  g_assert_true(g_file_set_contents(out, "old", -1, NULL));
  g_assert_cmpint(g_chmod(out, 0640), ==, 0);
  expect_successf("fit %s -o %s", m, out);
  g_assert_cmpint(mode_of(out) & 0777, ==, 0640);
  g_assert_cmpuint(leftovers(), ==, 0);
  g_unlink(fifo);
  g_unlink(link);
  g_free(before);
  g_free(fifo);
  g_free(link);
  g_free(target);
  g_free(out);
  g_free(m);
}

/* Why: fit wrote its check file to $TMPDIR and failed where that is not
 * writable although the output's folder is. */
static void test_fit_tmpdir(void) {
  char *m = synthesize("meas2.json");
  Proc p = run_sh("TMPDIR=/nonexistent/tmp exec \"$PTDSIM_BIN\" fit \"$T/meas2.json\" -o \"$T/fitted2.json\"");
  if (p.status != 0)
    g_test_message("stderr: %s", p.err);
  g_assert_cmpint(p.status, ==, 0);
  char *fitted = in_tmp("fitted2.json");
  g_assert_true(g_file_test(fitted, G_FILE_TEST_IS_REGULAR));
  g_free(fitted);
  proc_clear(&p);
  g_free(m);
}

/* Why: the trace writer replaced symbolic links and changed an existing
 * file's mode. */
static void test_trace_output(void) {
  char *link = in_tmp("trace-link.json"), *target = in_tmp("trace-target.json"), *out = in_tmp("trace.json");
  g_assert_true(g_file_set_contents(target, "keep", -1, NULL));
  g_assert_cmpint(symlink(target, link), ==, 0);
  expect_errorf("a symbolic link", SMALL " --trace %s", link);
  g_assert_true(S_ISLNK(mode_of(link)));
  /* the run's own profile is not a place for its trace */
  char *profile = edited("calibrate/profiles/a100-sxm4-80gb.json", "memory_efficiency", 0.7, "own.json");
  gsize before_len, after_len;
  char *before = slurp(profile, &before_len);
  expect_errorf("is also an input", SMALL " --profile %s --trace %s", profile, profile);
  char *after = slurp(profile, &after_len);
  g_assert_cmpstr(before, ==, after);
  g_free(before);
  g_free(after);
  g_free(profile);
  g_assert_true(g_file_set_contents(out, "old", -1, NULL));
  g_assert_cmpint(g_chmod(out, 0604), ==, 0);
  expect_successf(SMALL " --trace %s", out);
  g_assert_cmpint(mode_of(out) & 0777, ==, 0604);
  g_assert_cmpuint(leftovers(), ==, 0);
  g_unlink(link);
  g_free(link);
  g_free(target);
  g_free(out);
}

/* Why: SIGTERM during a large --trace left a hidden temporary file behind. */
static void test_trace_signal(void) {
  char *dir = in_tmp("sig");
  g_assert_cmpint(g_mkdir(dir, 0700), ==, 0);
  char *trace = g_build_filename(dir, "big.json", NULL);
  const char *argv[] = {bin,    "run",    "--model", "gpt3-175b", "--gpus", "1536", "--tp",
                        "8",    "--pp",   "16",      "--global-batch", "1536", "--exact", "--no-symmetry",
                        "--network", "analytic", "--trace", trace, NULL};
  GPid pid;
  g_assert_true(g_spawn_async(NULL, (char **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL |
                                                        G_SPAWN_STDERR_TO_DEV_NULL,
                              NULL, NULL, &pid, NULL));
  /* wait for the temporary file, then stop the run */
  gboolean seen = FALSE;
  for (guint i = 0; i < 600 && !seen; i++) {
    GDir *d = g_dir_open(dir, 0, NULL);
    seen = g_dir_read_name(d) != NULL;
    g_dir_close(d);
    if (!seen)
      g_usleep(50000);
  }
  g_assert_true(seen);
  kill(pid, SIGTERM);
  int status;
  g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
  g_spawn_close_pid(pid);
  g_assert_true(WIFSIGNALED(status));
  GDir *d = g_dir_open(dir, 0, NULL);
  const char *left = g_dir_read_name(d);
  if (left)
    g_test_message("left behind: %s", left);
  g_assert_null(left);
  g_dir_close(d);
  g_rmdir(dir);
  g_free(trace);
  g_free(dir);
}

/* Why: write errors on stdout were ignored: `> /dev/full` exited 0, for
 * every verb (--help included). */
static void test_stdout_errors(void) {
  static const char *verbs[] = {SMALL, SMALL " --format json",
                                "plan --model gpt3-1b --gpus 8 --global-batch 8 --network analytic --top 1",
                                "collective --op allreduce --gpus 8 --max-bytes 1M", "figure --list",
                                "run --help", "--version"};
  for (guint i = 0; i < G_N_ELEMENTS(verbs); i++) {
    char *script = g_strdup_printf("exec \"$PTDSIM_BIN\" %s > /dev/full", verbs[i]);
    Proc p = run_sh(script);
    if (p.status != 1)
      g_test_message("ptdsim %s > /dev/full: exit %d", verbs[i], p.status);
    g_assert_cmpint(p.status, ==, 1);
    g_assert_nonnull(strstr(p.err, "ptdsim: cannot write to standard output"));
    proc_clear(&p);
    g_free(script);
  }
}

/* --- options read strictly --- */

/* Why: -1 meant "not given" and silently took the default; 0 did for fit's
 * shape options; "010" was octal 8.  Every verb's whole numbers are
 * decimal digits, in range, or an error. */
static void test_strict_numbers(void) {
  static const struct {
    const char *args, *needle;
  } cases[] = {
      {SMALL " --layers -1", "--layers '-1'"},
      {SMALL " --dp -1", "--dp '-1'"},
      {SMALL " --tokens -1", "--tokens '-1'"},
      {SMALL " --pp 010", "--pp '010'"},
      {"plan --model gpt3-1b --gpus 8 --global-batch 8 --top -1", "--top '-1'"},
      {"fit --synthesize ideal --hidden 0 -o x.json", "--hidden '0'"},
      {"fit --synthesize a100-sxm4-80gb --tp 010 -o x.json", "--tp '010'"},
      {"fit --synthesize a100-sxm4-80gb --seed -1 -o x.json", "--seed '-1'"},
      {"fit --synthesize a100-sxm4-80gb --gpus 0x8 -o x.json", "--gpus '0x8'"},
      {"collective --op allreduce --gpus 010", "--gpus '010'"},
      {"collective --op allreduce --gpus 8 --gpus-per-node -1", "--gpus-per-node '-1'"},
      {"collective --op allreduce --gpus 8 --jobs 1e3", "--jobs '1e3'"},
      {"bench --repeat 010", "--repeat '010'"},
      {"collective --op allreduce --gpus 8 --min-bytes 0x10", "--min-bytes '0x10'"},
      {"collective --op allreduce --gpus 8 --max-bytes +8M", "--max-bytes '+8M'"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++)
    expect_error(cases[i].args, cases[i].needle);
}

/* Why: a step factor that rounds down to the same size looped forever. */
static void test_collective_step_factor(void) {
  Proc p = run_sh("exec \"$PTDSIM_BIN\" collective --op allreduce --gpus 8 --min-bytes 1 --max-bytes 64 "
                  "--step-factor 1.1 --format json");
  cJSON *j = parse_json(&p);
  const cJSON *rows = arr(j, "rows"), *row;
  double last = 0;
  guint n = 0;
  cJSON_ArrayForEach(row, rows) {
    g_assert_cmpfloat(num(row, "bytes"), >, last);
    last = num(row, "bytes");
    n++;
  }
  g_assert_cmpuint(n, >, 1);
  g_assert_cmpfloat(last, <=, 64);
  cJSON_Delete(j);
  proc_clear(&p);
  p = run_sh("exec \"$PTDSIM_BIN\" collective --op allreduce --gpus 8 --step-factor 1.0001");
  assert_one_line_error(&p, "more than 10000 rows");
  proc_clear(&p);
}

/* Why: leftover arguments were accepted, and bench printed its header
 * before refusing a bad --network; figure's memory error named options
 * that figure does not take. */
static void test_verb_leftovers(void) {
  expect_error("bench extra", "unexpected argument 'extra'");
  expect_error("bench --network ib", "--network 'ib'");
  expect_error("figure --list extra", "drop 'extra'");
  Proc p = run_line("figure megatron-table1 --cluster aws-p3-16xlarge");
  assert_one_line_error(&p, "does not fit");
  g_assert_null(strstr(p.err, "--tp"));
  g_assert_null(strstr(p.err, "--allow-oom"));
  proc_clear(&p);
}

/* Why: TeraPipe's slicing DP took memory growing with the square of the
 * granules (8 GB at 131072 tokens, an abort at 262144); it is bounded up
 * front, and the bound names the way out. */
static void test_terapipe_dp_bound(void) {
  const char *base = "run --layers 8 --hidden 1024 --heads 16 --gpus 8 --pp 8 --global-batch 8 --schedule terapipe "
                     "--cluster aws-p3-16xlarge --allow-oom";
  char *args = g_strdup_printf("%s --seq-len 131072", base);
  expect_error(args, "--granularity of at least 64");
  g_free(args);
  args = g_strdup_printf("%s --seq-len 16384 --granularity 8 --format json", base); /* 2048 granules: allowed */
  cJSON *j = run_json(args);
  g_assert_cmpfloat(num(j, "iteration_time_s"), >, 0);
  cJSON_Delete(j);
  g_free(args);
  args = g_strdup_printf("%s --seq-len 16392 --granularity 8", base); /* 2049 */
  expect_error(args, "2049 granules");
  g_free(args);
}

/* Why: the symmetry shortcut was said to give identical results, yet with
 * ECMP routing some configurations differ.  The exact condition: no flow of
 * the run has a choice of path another rank's flow could collide on.  Both
 * sides are checked: ECMP on a job across scalable units (a leaf uplink
 * chosen by hash: differs), the same job with adaptive routing (spread
 * evenly: identical), and ECMP on a job inside one unit (no flow leaves its
 * leaf: identical). */
static void test_symmetry_condition(void) {
  char *src = g_build_filename(g_getenv("PTDSIM_DATA_DIR"), "topologies", "selene.json", NULL);
  gsize len;
  char *text = slurp(src, &len);
  cJSON *root = cJSON_Parse(text);
  cJSON *fabric = cJSON_GetObjectItemCaseSensitive(root, "fabric");
  cJSON_ReplaceItemInObjectCaseSensitive(fabric, "routing", cJSON_CreateString("adaptive"));
  char *adaptive = in_tmp("selene-adaptive.json"), *out = cJSON_Print(root);
  g_assert_true(g_file_set_contents(adaptive, out, -1, NULL));
  const char *across = "run --model gpt3-175b --gpus 192 --tp 8 --pp 12 --global-batch 192 --format json";
  const char *inside = "run --model gpt3-13b --gpus 160 --tp 8 --pp 4 --global-batch 160 --format json";
  const struct {
    const char *run, *cluster;
    gboolean exact;
  } cases[] = {{across, "selene", FALSE}, {across, adaptive, TRUE}, {inside, "selene", TRUE}};
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    char *sym = g_strdup_printf("%s --cluster %s", cases[i].run, cases[i].cluster);
    char *all = g_strdup_printf("%s --no-symmetry", sym);
    cJSON *a = run_json(sym), *b = run_json(all);
    g_test_message("%s: %.9f against %.9f", sym, num(a, "iteration_time_s"), num(b, "iteration_time_s"));
    g_assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj(a, "simulation"), "symmetry")));
    if (cases[i].exact)
      g_assert_cmpfloat(num(a, "iteration_time_s"), ==, num(b, "iteration_time_s"));
    else
      g_assert_cmpfloat(num(a, "iteration_time_s"), !=, num(b, "iteration_time_s"));
    cJSON_Delete(a);
    cJSON_Delete(b);
    g_free(sym);
    g_free(all);
  }
  cJSON_free(out);
  cJSON_Delete(root);
  g_free(text);
  g_free(src);
  g_free(adaptive);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  tmpdir = test_tmp_dir("ptdsim-harden");
  g_test_add_func("/harden/profile-out-of-range", test_profile_out_of_range);
  g_test_add_func("/harden/time-bound", test_time_bound);
  g_test_add_func("/harden/cluster-out-of-range", test_cluster_out_of_range);
  g_test_add_func("/harden/name-is-not-a-file", test_name_is_not_a_file);
  g_test_add_func("/harden/not-a-regular-input", test_not_a_regular_input);
  g_test_add_func("/harden/measurements-strict", test_measurements_strict);
  g_test_add_func("/harden/fit-output", test_fit_output);
  g_test_add_func("/harden/fit-tmpdir", test_fit_tmpdir);
  g_test_add_func("/harden/trace-output", test_trace_output);
  g_test_add_func("/harden/trace-signal", test_trace_signal);
  g_test_add_func("/harden/stdout-errors", test_stdout_errors);
  g_test_add_func("/harden/strict-numbers", test_strict_numbers);
  g_test_add_func("/harden/collective-step-factor", test_collective_step_factor);
  g_test_add_func("/harden/verb-leftovers", test_verb_leftovers);
  g_test_add_func("/harden/terapipe-dp-bound", test_terapipe_dp_bound);
  g_test_add_func("/harden/symmetry-condition", test_symmetry_condition);
  int rc = g_test_run();
  char *rm = g_strdup_printf("rm -rf '%s'", tmpdir);
  g_assert_true(g_spawn_command_line_sync(rm, NULL, NULL, NULL, NULL));
  g_free(rm);
  g_free(tmpdir);
  return rc;
}
