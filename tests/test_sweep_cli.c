/* ptdsim — end-to-end tests of `ptdsim sweep` through the real binary
 * ($PTDSIM_BIN): rows per grid point, each row what `run` gives, the same
 * bytes for any --jobs and any MPI rank count, --set moving the hardware as
 * asked, a killed sweep resumed to the same file as an uninterrupted one,
 * and bad specs refused in one line with the output file untouched. */
#include <cjson/cJSON.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "../search/keys.h"
#include "../search/sweep.h"
#include "cli_harness.h"
#include "test_plain.h"
#include "test_tmp.h"

static char *tmpdir;

static char *tmp_path(const char *name) { return g_build_filename(tmpdir, name, NULL); }

static guint count_lines(const char *text) {
  guint n = 0;
  for (const char *p = text; *p; p++)
    n += *p == '\n';
  return n;
}

/* A small grid of PTD-P configurations: 2 x 3 x 2 x 3 = 36 points, some
 * out of memory, some invalid (t = 8 does not divide 20 heads... here 16 do). */
#define GRID "sweep --layers 8 --hidden 1024 --heads 16 --seq-len 512 --vocab 4096 --gpus 16 --global-batch 32 " \
             "--tp 2,4 --pp 1..4x2 --micro-batch 1,4 --recompute full,selective,none --network analytic"

/* Why: one row per configuration of the grid, in grid order (the last
 * option varying fastest), for CSV and JSONL alike. */
static void test_row_count(void) {
  Proc p = run_line(GRID);
  g_assert_cmpint(p.status, ==, 0);
  g_assert_cmpuint(count_lines(p.out), ==, 1 + 2 * 3 * 2 * 3);
  /* `all` is every word of the option: --recompute's six */
  Proc all = run_line("sweep --layers 8 --hidden 1024 --heads 16 --seq-len 512 --vocab 4096 --gpus 16 --global-batch 32 "
                      "--tp 2 --pp 2 --micro-batch 1 --recompute all --network analytic");
  g_assert_cmpint(all.status, ==, 0);
  g_assert_cmpuint(count_lines(all.out), ==, 1 + 6);
  proc_clear(&all);
  g_assert_true(g_str_has_prefix(p.out, "index,layers,hidden,heads,seq-len,vocab,gpus,tp,pp,global-batch,micro-batch,"
                                        "recompute,network,status,reason,config.layers,"));
  /* point 1 differs from point 0 in the last option only */
  char **lines = g_strsplit(p.out, "\n", -1);
  g_assert_true(g_str_has_prefix(lines[1], "0,8,1024,16,512,4096,16,2,1,32,1,full,analytic,"));
  g_assert_true(g_str_has_prefix(lines[2], "1,8,1024,16,512,4096,16,2,1,32,1,selective,analytic,"));
  g_assert_true(g_str_has_prefix(lines[3], "2,8,1024,16,512,4096,16,2,1,32,1,none,analytic,"));
  g_assert_true(g_str_has_prefix(lines[4], "3,8,1024,16,512,4096,16,2,1,32,4,full,analytic,"));
  g_strfreev(lines);
  g_assert_nonnull(strstr(p.err, "36 of 36 rows"));
  proc_clear(&p);
  Proc q = run_line(GRID " --format jsonl");
  g_assert_cmpint(q.status, ==, 0);
  g_assert_cmpuint(count_lines(q.out), ==, 36);
  proc_clear(&q);
}

/* The `ptdsim run --format json` line of a JSONL row's options. */
static char *run_line_of(const cJSON *opts) {
  GString *s = g_string_new("run");
  const cJSON *o;
  cJSON_ArrayForEach(o, opts) {
    if (cJSON_IsBool(o)) {
      if (cJSON_IsTrue(o))
        g_string_append_printf(s, " --%s", o->string);
    } else if (cJSON_IsNumber(o))
      g_string_append_printf(s, " --%s %.0f", o->string, o->valuedouble);
    else
      g_string_append_printf(s, " --%s %s", o->string, o->valuestring);
  }
  g_string_append(s, " --format json");
  return g_string_free(s, FALSE);
}

/* JSON text with ptdsim's exact numbers, for a byte comparison. */
static char *canonical(const cJSON *j) {
  cJSON *copy = cJSON_Duplicate(j, TRUE);
  char *text = cJSON_PrintUnformatted(copy);
  cJSON_Delete(copy);
  return text;
}

/* Why: a sweep row is `ptdsim run` of its configuration, bit for bit (the
 * JSONL "result" is run's object), and a refused configuration is a row
 * with run's own error as its reason. */
static void test_rows_are_runs(void) {
  static const char *grids[] = {
      GRID " --format jsonl --step-effects",
      "sweep --model gpt3-1b --cluster aws-p3-16xlarge --gpus 16 --tp 2 --pp 8 --dp 1 --global-batch 2 "
      "--schedule terapipe --slices auto;uniform:4;1024,1024 --format jsonl --step-effects",
      "sweep --model gpt3-1b --gpus 8 --tp 1 --pp 1 --global-batch 16 --micro-batch 2 --zero 1..3 --no-fusion=false,true "
      "--tokens 1B --format jsonl --step-effects"};
  /* without --step-effects a row is the run less its step breakdown (the
   * runs without each effect are not made) */
  Proc plain = run_line(GRID " --format jsonl");
  g_assert_cmpint(plain.status, ==, 0);
  char *nl = strchr(plain.out, '\n');
  g_assert_nonnull(nl);
  *nl = 0;
  cJSON *first = cJSON_Parse(plain.out);
  g_assert_nonnull(first);
  g_assert_nonnull(cJSON_GetObjectItemCaseSensitive(first, "result"));
  g_assert_null(cJSON_GetObjectItemCaseSensitive(obj(first, "result"), "step_effects_s"));
  cJSON_Delete(first);
  proc_clear(&plain);
  for (guint g = 0; g < G_N_ELEMENTS(grids); g++) {
    Proc p = run_line(grids[g]);
    g_assert_cmpint(p.status, ==, 0);
    char **lines = g_strsplit(p.out, "\n", -1);
    guint ok_rows = 0;
    for (guint i = 0; lines[i] && *lines[i]; i++) {
      cJSON *row = cJSON_Parse(lines[i]);
      g_assert_nonnull(row);
      g_assert_cmpfloat(num(row, "index"), ==, i);
      char *line = run_line_of(obj(row, "options"));
      Proc r = run_line(line);
      const char *status = str(row, "status");
      if (strcmp(status, "ok") == 0) {
        ok_rows++;
        g_assert_cmpint(r.status, ==, 0);
        cJSON *rj = cJSON_Parse(r.out);
        char *a = canonical(rj), *b = canonical(obj(row, "result"));
        g_assert_cmpstr(a, ==, b);
        g_free(a);
        g_free(b);
        cJSON_Delete(rj);
      } else {
        g_assert_cmpint(r.status, ==, 1); /* an error, not a crash */
        /* run prints "ptdsim: REASON\n" */
        char *want = g_strdup_printf("ptdsim: %s\n", str(row, "reason"));
        g_assert_cmpstr(r.err, ==, want);
        g_free(want);
        g_assert_true(strcmp(status, "out_of_memory") == 0 || strcmp(status, "invalid") == 0);
      }
      proc_clear(&r);
      g_free(line);
      cJSON_Delete(row);
    }
    g_assert_cmpuint(ok_rows, >, 0);
    g_strfreev(lines);
    proc_clear(&p);
  }
}

/* Why: the output does not depend on the threads. */
static void test_jobs(void) {
  Proc a = run_line(GRID " --jobs 1"), b = run_line(GRID " --jobs 2"), c = run_line(GRID " --jobs 7 --format jsonl"),
       d = run_line(GRID " --jobs 1 --format jsonl");
  g_assert_cmpint(a.status, ==, 0);
  g_assert_cmpstr(a.out, ==, b.out);
  g_assert_cmpstr(c.out, ==, d.out);
  proc_clear(&a);
  proc_clear(&b);
  proc_clear(&c);
  proc_clear(&d);
}

/* Why: under MPI the output does not depend on the ranks either: -n 1,
 * -n 2 and -n 3 write the same bytes as one process. */
static void test_mpi(void) {
  char *mpirun = g_find_program_in_path("mpirun");
  if (!mpirun) {
    g_test_skip("mpirun is not installed (tools/install-deps installs OpenMPI)");
    return;
  }
  Proc one = run_line(GRID " --jobs 2");
  g_assert_cmpint(one.status, ==, 0);
  for (int n = 1; n <= 3; n++) {
    char *out = g_strdup_printf("%s/mpi-%d.csv", tmpdir, n), *np = g_strdup_printf("%d", n);
    char **words = g_strsplit(GRID " --jobs 1", " ", -1);
    GPtrArray *argv = g_ptr_array_new();
    const char *pre[] = {mpirun, "-n", np, "--oversubscribe", bin};
    for (guint i = 0; i < G_N_ELEMENTS(pre); i++)
      g_ptr_array_add(argv, (gpointer)pre[i]);
    for (guint i = 0; words[i]; i++)
      g_ptr_array_add(argv, words[i]);
    g_ptr_array_add(argv, (gpointer) "-o");
    g_ptr_array_add(argv, out);
    g_ptr_array_add(argv, NULL);
    char **env = g_get_environ();
    /* the test may run as root (containers): OpenMPI refuses that unless told */
    env = g_environ_setenv(env, "OMPI_ALLOW_RUN_AS_ROOT", "1", TRUE);
    env = g_environ_setenv(env, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", TRUE);
    /* under AddressSanitizer: OpenMPI never frees what MPI_Init allocates
     * (much of it in plugins unloaded by then, which suppressions cannot
     * name); memory errors are still caught */
    env = g_environ_setenv(env, "ASAN_OPTIONS", "detect_leaks=0", TRUE);
    int status;
    char *err = NULL;
    GError *error = NULL;
    g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, env, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &err,
                               &status, &error));
    g_assert_no_error(error);
    if (err && strstr(err, "was built without MPI")) {
      g_test_skip("this ptdsim was built without MPI (OpenMPI was not found when it was configured)");
      g_free(err);
      g_strfreev(env);
      g_ptr_array_free(argv, TRUE);
      g_strfreev(words);
      g_free(out);
      g_free(np);
      break;
    }
    if (!g_spawn_check_wait_status(status, NULL))
      g_test_message("mpirun -n %d: %s", n, err);
    g_assert_true(g_spawn_check_wait_status(status, NULL));
    gsize len;
    char *text = slurp(out, &len);
    /* the file is stdout's; its version and inputs are beside it */
    g_assert_cmpstr(text, ==, one.out);
    char *side = g_strconcat(out, ".inputs.json", NULL), *meta = slurp(side, &len);
    g_assert_true(g_str_has_prefix(meta, "{\"ptdsim_sweep\":\"ptdsim "));
    g_unlink(side);
    g_free(side);
    g_free(meta);
    g_free(text);
    g_free(err);
    g_strfreev(env);
    g_ptr_array_free(argv, TRUE);
    g_strfreev(words);
    g_free(out);
    g_free(np);
  }
  proc_clear(&one);
  g_free(mpirun);
}

/* Why: --set changes the hardware as asked.  Two GPUs on two nodes of one
 * GPU each, no latency: the pipeline's transfers are pure inter-node
 * transfers, and doubling the NIC (and the channel NCCL gives a send)
 * halves their time, to the nanosecond rounding of each transfer. */
static void test_set(void) {
  Proc p = run_line("sweep --model gpt3-1b --gpus 2 --tp 1 --pp 2 --global-batch 8 --network analytic "
                    "--set cluster.gpus_per_node=1 --set cluster.network.p2p_latency_us=0 "
                    "--set cluster.network.nic_GBps=24,48 --set cluster.nccl.p2p_channel_GBps=14,28 "
                    "--zip cluster.network.nic_GBps,cluster.nccl.p2p_channel_GBps --format jsonl");
  g_assert_cmpint(p.status, ==, 0);
  char **lines = g_strsplit(p.out, "\n", -1);
  g_assert_cmpuint(g_strv_length(lines), ==, 3);
  cJSON *slow = cJSON_Parse(lines[0]), *fast = cJSON_Parse(lines[1]);
  g_assert_cmpfloat(num(obj(slow, "options"), "cluster.network.nic_GBps"), ==, 24);
  g_assert_cmpfloat(num(obj(fast, "options"), "cluster.network.nic_GBps"), ==, 48);
  const cJSON *rs = obj(slow, "result"), *rf = obj(fast, "result");
  double ts = num(obj(rs, "time_breakdown_s"), "pp_comm"), tf = num(obj(rf, "time_breakdown_s"), "pp_comm");
  g_assert_cmpfloat(ts, >, 0);
  /* 8 microbatches' activations and gradients, each transfer rounded to the
   * ns: 2 tf and ts differ by at most 16 ns */
  g_assert_cmpfloat(fabs(2 * tf - ts), <=, 16e-9);
  g_assert_cmpfloat(num(obj(rs, "bytes_per_iteration"), "pp"), ==, num(obj(rf, "bytes_per_iteration"), "pp"));
  cJSON_Delete(slow);
  cJSON_Delete(fast);
  g_strfreev(lines);
  proc_clear(&p);
}

/* A slow grid (flow network, GPT-3 175B), 40 rows. */
static const char *const SLOW[] = {"sweep", "--model", "gpt3-175b", "--gpus", "96", "--tp", "8", "--pp", "12",
                                   "--global-batch", "24..480+24", "--micro-batch", "1,2", "--jobs", "2", NULL};

static Proc run_slow(const char *out, gboolean resume) {
  GPtrArray *argv = g_ptr_array_new();
  for (guint i = 0; SLOW[i]; i++)
    g_ptr_array_add(argv, (gpointer)SLOW[i]);
  g_ptr_array_add(argv, (gpointer) "-o");
  g_ptr_array_add(argv, (gpointer)out);
  if (resume)
    g_ptr_array_add(argv, (gpointer) "--resume");
  g_ptr_array_add(argv, NULL);
  Proc p = run_argv((const char *const *)argv->pdata);
  g_ptr_array_free(argv, TRUE);
  return p;
}

/* Why: a sweep killed mid-way keeps every row it finished and no partial
 * one, and --resume completes it to the very bytes of an uninterrupted
 * sweep -- after SIGKILL (no chance to clean up), after SIGINT, and after a
 * power loss that cut the last line short. */
static void test_kill_and_resume(void) {
  char *full = tmp_path("full.csv");
  Proc p = run_slow(full, FALSE);
  g_assert_cmpint(p.status, ==, 0);
  proc_clear(&p);
  gsize full_len;
  char *want = slurp(full, &full_len);
  static const int sigs[] = {SIGKILL, SIGINT};
  for (guint s = 0; s < G_N_ELEMENTS(sigs); s++) {
    char *part = g_strdup_printf("%s/part-%u.csv", tmpdir, s);
    GPtrArray *argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)bin);
    for (guint i = 0; SLOW[i]; i++)
      g_ptr_array_add(argv, (gpointer)SLOW[i]);
    g_ptr_array_add(argv, (gpointer) "-o");
    g_ptr_array_add(argv, part);
    g_ptr_array_add(argv, NULL);
    GPid pid;
    GError *error = NULL;
    g_assert_true(g_spawn_async(NULL, (char **)argv->pdata, NULL,
                                G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &pid, &error));
    g_assert_no_error(error);
    /* let it write a few rows (header + 3 lines), then stop it */
    for (guint wait = 0; wait < 600; wait++) {
      char *text = NULL;
      gsize len = 0;
      if (g_file_get_contents(part, &text, &len, NULL) && count_lines(text) >= 4) {
        g_free(text);
        break;
      }
      g_free(text);
      g_usleep(50000);
    }
    kill(pid, sigs[s]);
    int status;
    waitpid(pid, &status, 0);
    g_spawn_close_pid(pid);
    gsize len;
    char *got = slurp(part, &len);
    g_assert_cmpuint(len, <, full_len); /* stopped before the end */
    g_assert_true(len > 0 && got[len - 1] == '\n'); /* whole rows only */
    g_assert_true(memcmp(got, want, len) == 0);     /* a prefix of the full sweep */
    g_free(got);
    if (s == 0) { /* a torn last line, as a power loss may leave */
      GError *e = NULL;
      char *text = slurp(part, &len);
      g_assert_true(g_file_set_contents(part, text, (gssize)(len - 7), &e));
      g_assert_no_error(e);
      g_free(text);
    }
    Proc r = run_slow(part, TRUE);
    g_assert_cmpint(r.status, ==, 0);
    g_assert_nonnull(strstr(r.err, "40 of 40 rows"));
    g_assert_nonnull(strstr(r.err, "the rest resumed"));
    got = slurp(part, &len);
    g_assert_cmpstr(got, ==, want);
    g_free(got);
    proc_clear(&r);
    g_ptr_array_free(argv, TRUE);
    g_free(part);
  }
  g_free(want);
  g_free(full);
}

/* Why: a bad sweep spec is refused in one line before anything runs, and
 * the output file it names is left as it was (an earlier sweep's rows are
 * never lost). */
static void test_bad_specs(void) {
  char *kept = tmp_path("kept.csv"), *fresh = tmp_path("fresh.csv"), *file = tmp_path("bad-sweep.json");
  char *grid_o = g_strdup_printf("%s -o %s", GRID, kept);
  run_line_ok(grid_o);
  gsize kept_len;
  char *kept_before = slurp(kept, &kept_len);
  GError *error = NULL;
  g_assert_true(g_file_set_contents(file, "{\"options\": {\"tp\": [1, 2], \"warp\": 9}}", -1, &error));
  g_assert_no_error(error);
  char *with_file = g_strdup_printf("sweep --model gpt3-1b --gpus 8 --global-batch 16 --file %s", file);
  char *other_grid = g_strdup(GRID);
  memcpy(strstr(other_grid, "--tp 2,4"), "--tp 2,8", 8); /* another grid, the same columns */
  char *resume_other = g_strdup_printf("%s -o %s --resume", other_grid, kept);
  g_free(other_grid);
  static const char *base = "sweep --model gpt3-1b --gpus 8 --global-batch 16 ";
  const struct {
    const char *args, *needle;
  } cases[] = {
      {"--tp ,", "has an empty item"},
      {"--tp 1,,2", "has an empty item"},
      {"--tp 8..2", "is an empty range"},
      {"--tp 1..8x1", "the step must be above 1"},
      {"--tp 1..", "is not a range"},
      {"--tp 0", "is not a whole number from 1"},
      {"--tp 99999999999", "is not a whole number from 1"},
      {"--tp 010", "is not a whole number from 1"},
      {"--schedule 1f1b,warp", "'warp' is not one of"},
      {"--no-fusion=maybe", "is not true or false"},
      {"--set cluster.network.nope=1", "has no number at 'network.nope'"},
      {"--set cluster.fabric.network.link_GBps=0", "'fabric.network.link_GBps' is 0, outside"},
      {"--set network.nic_GBps=1", "names neither the cluster nor the profile"},
      {"--set cluster.network.nic_GBps=-5", "is not a number of zero or more"},
      {"--set cluster.network.nic_GBps", "is not KEY=VALUES"},
      {"--tp 1,2 --pp 1,2,4 --zip tp,pp", "have 2 and 3 values"},
      {"--tp 1,2 --zip tp,pp", "which is not in the sweep"},
      {"--tp 1,2 --format xml", "unknown --format 'xml'"},
      {"--jobs 0", "--jobs '0' is out of range"},
      {"--resume", "is not there"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    char *line = g_strdup_printf("%s%s -o %s", base, cases[i].args, fresh);
    Proc q = run_line(line);
    assert_one_line_error(&q, cases[i].needle);
    g_assert_false(g_file_test(fresh, G_FILE_TEST_EXISTS));
    proc_clear(&q);
    g_free(line);
  }
  const struct {
    const char *args, *needle;
  } whole[] = {
      {with_file, "has no option 'warp'"},
      {resume_other, "was written by another sweep"},
      {grid_o, "exists; give --resume"},
      {"sweep --model gpt3-1b --global-batch 16", "--gpus is required"},
      {"sweep --gpus 8 --global-batch 16", "no model"},
      {"sweep --model gpt3-1b,warp --gpus 8 --global-batch 16", "'warp' is not one of"},
      {"sweep --model gpt3-1b --gpus 8 --global-batch 16 --resume", "give it with -o"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(whole); i++) {
    Proc q = run_line(whole[i].args);
    assert_one_line_error(&q, whole[i].needle);
    proc_clear(&q);
  }
  gsize len;
  char *kept_after = slurp(kept, &len);
  g_assert_cmpstr(kept_after, ==, kept_before); /* untouched by the refused resume and the refused overwrite */
  g_free(kept_after);
  g_free(kept_before);
  g_free(with_file);
  g_free(resume_other);
  g_free(grid_o);
  g_free(kept);
  g_free(fresh);
  g_free(file);
}

/* Why: a sweep file is the command line's options in JSON: the same grid,
 * the same rows; zip pairs values instead of crossing them. */
static void test_file_and_zip(void) {
  char *file = tmp_path("sweep.json");
  GError *error = NULL;
  g_assert_true(g_file_set_contents(
      file,
      "{\"options\": {\"layers\": 8, \"hidden\": 1024, \"heads\": 16, \"seq-len\": 512, \"vocab\": 4096, \"gpus\": 16,"
      " \"global-batch\": 32, \"tp\": [2, 4], \"pp\": \"1..4x2\", \"micro-batch\": [1, 4], \"recompute\": [\"full\", \"selective\", \"none\"],"
      " \"network\": \"analytic\"}}",
      -1, &error));
  g_assert_no_error(error);
  char *line = g_strdup_printf("sweep --file %s", file);
  Proc a = run_line(line), b = run_line(GRID);
  g_assert_cmpint(a.status, ==, 0);
  g_assert_cmpstr(a.out, ==, b.out);
  proc_clear(&a);
  proc_clear(&b);
  Proc z = run_line("sweep --model gpt3-1b --gpus 8 --global-batch 16 --tp 1,2,8 --pp 8,4,1 --zip tp,pp "
                    "--network analytic --format jsonl");
  g_assert_cmpint(z.status, ==, 0);
  char **lines = g_strsplit(z.out, "\n", -1);
  g_assert_cmpuint(g_strv_length(lines), ==, 4); /* three pairs, not nine */
  static const double tps[] = {1, 2, 8}, pps[] = {8, 4, 1};
  for (guint i = 0; i < 3; i++) {
    cJSON *row = cJSON_Parse(lines[i]);
    g_assert_cmpfloat(num(obj(row, "options"), "tp"), ==, tps[i]);
    g_assert_cmpfloat(num(obj(row, "options"), "pp"), ==, pps[i]);
    cJSON_Delete(row);
  }
  g_strfreev(lines);
  proc_clear(&z);
  g_free(line);
  g_free(file);
}

/* Why: the CSV's result columns cover every key of run's JSON, whatever
 * kind of run (PTD-P with a training budget, ZeRO, TeraPipe, one that does
 * not fit with --allow-oom): no result is silently dropped. */
static void test_columns_cover_run(void) {
  static const char *runs[] = {
      "run --model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 96 --tokens 300B --network analytic --format json",
      "run --model gpt3-1b --gpus 8 --tp 1 --pp 1 --global-batch 16 --zero 3 --format json",
      "run --model gpt3-1b --cluster aws-p3-16xlarge --gpus 16 --tp 2 --pp 8 --dp 1 --global-batch 2 --schedule "
      "terapipe --format json",
      "run --model gpt3-175b --gpus 8 --tp 8 --pp 1 --global-batch 8 --allow-oom --network analytic --format json"};
  guint n;
  const char *const *cols = search_sweep_result_columns(&n);
  for (guint r = 0; r < G_N_ELEMENTS(runs); r++) {
    cJSON *j = run_json(runs[r]);
    const cJSON *a, *b;
    cJSON_ArrayForEach(a, j) {
      gboolean nested = cJSON_IsObject(a);
      for (b = nested ? a->child : a; b; b = nested ? b->next : NULL) {
        char *key = nested ? g_strdup_printf("%s.%s", a->string, b->string) : g_strdup(a->string);
        gboolean found = FALSE;
        for (guint i = 0; i < n && !found; i++)
          found = strcmp(cols[i], key) == 0;
        if (!found)
          g_test_message("run's key %s is not a sweep column", key);
        g_assert_true(found);
        g_free(key);
      }
    }
    cJSON_Delete(j);
  }
}

/* Why: a sweep's rows carry the throughput a reader of today compares --
 * model TFLOP/s per GPU and MFU -- and whether the row is an SC21
 * reproduction (where tflops_per_gpu, Eq. 3, is the paper's figure), as
 * run reports them; they are appended after the older columns, which keep
 * their places (scripts read columns by position). */
static void test_throughput_columns(void) {
  const char *grid = "sweep --model gpt3-1b --gpus 8 --tp 2 --pp 2 --global-batch 8 --sequence-parallel=false,true "
                     "--network analytic";
  Proc p = run_line(grid);
  g_assert_cmpint(p.status, ==, 0);
  char **lines = g_strsplit(p.out, "\n", -1);
  g_assert_nonnull(strstr(lines[0], ",terapipe.context_fit_mean_rel_error,model_tflops_per_gpu,mfu,"
                                    "sc21_reproduction,whole_run.expected.days,"));
  g_assert_nonnull(strstr(lines[0], ",status,reason,config.layers,"));
  guint n;
  const char *const *cols = search_sweep_result_columns(&n);
  /* the mixture-of-experts columns after the stragglers', then the schedule's, then the step's, then the
   * layout's, throughput per GPU and cost */
  const guint moe = 22, sched = 6, step = 7, cost = 6;
  g_assert_cmpstr(cols[n - 1 - moe - sched - step - cost], ==, "stragglers");
  g_assert_cmpstr(cols[n - 1 - sched - step - cost], ==, "moe.tokens_per_expert");
  g_assert_cmpstr(cols[n - 1 - step - cost], ==, "pipeline_schedule.peak_inflight_per_stage");
  g_assert_cmpstr(cols[n - 1 - cost], ==, "step_effects_s.contention");
  g_assert_cmpstr(cols[n - cost], ==, "config.pipeline_layout");
  g_assert_cmpstr(cols[n - 1], ==, "whole_run.expected.cost");
  static const char *const sp[] = {"", " --sequence-parallel"};
  for (guint i = 0; i < 2; i++) {
    char **f = g_strsplit(lines[1 + i], ",", -1);
    guint nf = g_strv_length(f);
    char *args = g_strdup_printf("run --model gpt3-1b --gpus 8 --tp 2 --pp 2 --global-batch 8%s --network analytic "
                                 "--format json",
                                 sp[i]);
    cJSON *r = run_json(args);
    /* last the schedule's: no --stage-times, then span, bubble, rate, in
     * flight, and in flight per stage (JSON text, its commas quoted) */
    char *per = strrchr(lines[1 + i], '"');
    g_assert_nonnull(per);
    char *head = g_strndup(lines[1 + i], (gsize)(per - lines[1 + i]));
    char *open = strrchr(head, '"');
    g_assert_nonnull(open);
    *open = '\0';
    g_strfreev(f);
    f = g_strsplit(head, ",", -1);
    g_free(head);
    nf = g_strv_length(f) - 1; /* the empty field before the quoted array */
    g_assert_cmpstr(f[nf - 5], ==, "");
    g_assert_cmpfloat(g_ascii_strtod(f[nf - 3], NULL), ==, num(obj(r, "pipeline_schedule"), "bubble_s"));
    nf -= 5;
    guint after = 17 + moe; /* the whole run's, the stragglers' and the MoE columns, empty here */
    for (guint j = 0; j < after; j++)
      g_assert_cmpstr(f[nf - 1 - j], ==, "");
    g_assert_cmpfloat(g_ascii_strtod(f[nf - after - 3], NULL), ==, num(r, "model_tflops_per_gpu"));
    g_assert_cmpfloat(g_ascii_strtod(f[nf - after - 2], NULL), ==, num(r, "mfu"));
    g_assert_cmpstr(f[nf - after - 1], ==, i == 0 ? "true" : "false");
    cJSON_Delete(r);
    g_free(args);
    g_strfreev(f);
  }
  g_strfreev(lines);
  proc_clear(&p);
}

static void rm_rf(const char *path) {
  if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
    GDir *d = g_dir_open(path, 0, NULL);
    const char *n;
    while (d && (n = g_dir_read_name(d))) {
      char *child = g_build_filename(path, n, NULL);
      rm_rf(child);
      g_free(child);
    }
    if (d)
      g_dir_close(d);
    g_rmdir(path);
  } else
    g_unlink(path);
}

/* --exact simulates every fine op (each layer's compute and all-reduces
 * as ops of their own, every transfer on the flows); by default an item's
 * chain that nothing else can touch is one op, and a transfer that meets
 * no other runs for its time alone.  Both must give the same bytes for
 * every result, over schedules, p, m, v, both networks, machines,
 * placements, DDP modes, recomputation and the symmetry shortcut: the rows
 * may differ only in the options echo. */
static void test_exact_same_results(void) {
  static const char *grids[] = {
      "sweep --model gpt3-1b --gpus 32 --tp 2 --pp 2,4 --global-batch 16,32 --schedule 1f1b,gpipe "
      "--network analytic,flow --placement tp-dp-pp,misaligned --ddp local,torch --no-symmetry false,true",
      "sweep --model gpt3-1b --gpus 32 --tp 2 --pp 4 --global-batch 16,64 --schedule interleaved "
      "--layers-per-chunk 1,3 --recompute full,none --network analytic,flow --placement tp-dp-pp,dp-outermost",
      "sweep --model gpt3-13b --gpus 64 --tp 8 --pp 8 --global-batch 64 --micro-batch 1,2 --network analytic,flow "
      "--no-scatter-gather false,true",
      "sweep --model llama3-8b --seq-len 2048 --gpus 32 --tp 4 --pp 4 --global-batch 16 --schedule 1f1b,gpipe "
      "--ddp local,torch --distributed-optimizer false,true --recompute full,selective --sequence-parallel false,true "
      "--network analytic,flow",
      /* the flow network's fixed transfers (taskgraph/netops.h) on three machines:
       * kept, moved onto the flows in rounds, and coarse items built again */
      "sweep --model gpt3-2.7b --gpus 32 --tp 2,4 --pp 4 --global-batch 32 --schedule interleaved --chunks 2 "
      "--cluster selene,dgx-h100-superpod,aws-p3-16xlarge --ddp local,torch --network flow",
      /* enough microbatches for the steady state (sim/steady.h) to carry
       * most of the iteration in closed form (these three: the plain
       * build's, below) */
      "sweep --model gpt3-1b --gpus 32 --tp 2 --pp 2,4 --global-batch 128,512 --schedule 1f1b "
      "--network analytic,flow --placement tp-dp-pp,misaligned --ddp local,torch",
      "sweep --model gpt3-1b --gpus 32 --tp 2 --pp 2,4 --global-batch 128,512 --schedule interleaved --chunks 2 "
      "--network analytic,flow --placement tp-dp-pp,misaligned --ddp local,torch",
      "sweep --model llama3-8b --seq-len 2048 --gpus 32 --tp 4 --pp 4 --global-batch 256 --sequence-parallel "
      "--tp-comm-overlap false,true --distributed-optimizer --ddp torch --overlap-param-gather false,true "
      "--recompute selective --network analytic,flow"};
  guint compared = 0;
  for (guint g = 0; g < G_N_ELEMENTS(grids); g++) {
    if (g >= 5 && test_sanitized()) { /* long runs op by op (--exact), half on the flow network */
      g_test_message("%s: expensive end to end, run by the plain build only", grids[g]);
      continue;
    }
    char *plain = g_strdup_printf("%s --format jsonl", grids[g]);
    char *exact = g_strdup_printf("%s --exact true --format jsonl", grids[g]);
    Proc a = run_line(plain), b = run_line(exact);
    g_assert_cmpint(a.status, ==, 0);
    g_assert_cmpint(b.status, ==, 0);
    char **la = g_strsplit(a.out, "\n", -1), **lb = g_strsplit(b.out, "\n", -1);
    g_assert_cmpuint(g_strv_length(la), ==, g_strv_length(lb));
    for (guint i = 0; la[i] && la[i][0]; i++) {
      const char *ra = strstr(la[i], "\"status\":"), *rb = strstr(lb[i], "\"status\":");
      g_assert_nonnull(ra);
      g_assert_nonnull(rb);
      g_assert_true(g_str_has_prefix(ra, "\"status\":\"ok\""));
      g_assert_nonnull(strstr(lb[i], "\"exact\":true"));
      g_assert_cmpstr(ra, ==, rb);
      compared++;
    }
    g_strfreev(la);
    g_strfreev(lb);
    proc_clear(&a);
    proc_clear(&b);
    g_free(plain);
    g_free(exact);
  }
  g_assert_cmpuint(compared, ==, 128 + 32 + 8 + 64 + 12 + (test_sanitized() ? 0 : 32 + 32 + 8));
}

/* Every number below `o` (its object path from `path`) has a line saying
 * what it moves; the count of numbers seen. */
static guint assert_keys_described(const cJSON *o, const char *path) {
  guint n = 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, o) {
    if (!c->string)
      continue;
    char *key = g_strconcat(path, ".", c->string, NULL);
    if (cJSON_IsObject(c))
      n += assert_keys_described(c, key);
    else if (cJSON_IsNumber(c)) {
      if (!search_set_key_doc(key))
        g_error("--set key %s has no line in search/keys.c", key);
      n++;
    }
    g_free(key);
  }
  return n;
}

/* Why: every what-if key says what it moves, and the GEMM rate's key is
 * named where a user looks (beside peak_tflops, which moves MFU's
 * denominator): every number of every shipped cluster and profile has its
 * line, and --list-keys prints them, each a key --set takes. */
static void test_list_keys(void) {
  static const char *const dirs[][2] = {{"topologies", "cluster"}, {"calibrate/profiles", "profile"}};
  for (guint d = 0; d < G_N_ELEMENTS(dirs); d++) {
    char *dir = data_file(dirs[d][0]);
    GDir *gd = g_dir_open(dir, 0, NULL);
    g_assert_nonnull(gd);
    const char *name;
    guint files = 0;
    while ((name = g_dir_read_name(gd))) {
      if (!g_str_has_suffix(name, ".json"))
        continue;
      char *path = g_build_filename(dir, name, NULL);
      gsize len;
      char *text = slurp(path, &len);
      cJSON *j = cJSON_Parse(text);
      g_assert_nonnull(j);
      g_assert_cmpuint(assert_keys_described(j, dirs[d][1]), >, 0);
      files++;
      cJSON_Delete(j);
      g_free(text);
      g_free(path);
    }
    g_assert_cmpuint(files, >, 0);
    g_dir_close(gd);
    g_free(dir);
  }
  Proc p = run_line("sweep --list-keys --cluster dgx-h100-superpod");
  g_assert_cmpint(p.status, ==, 0);
  const char *peak = strstr(p.out, "\n  profile.peak_tflops=989\n");
  g_assert_nonnull(peak);
  char *line = g_strndup(peak + 1, (gsize)(strchr(strchr(peak + 1, '\n') + 1, '\n') - peak));
  g_assert_nonnull(strstr(line, "MFU's denominator"));
  g_assert_nonnull(strstr(line, "gemm.anchor.tflops"));
  g_free(line);
  g_assert_nonnull(strstr(p.out, "\n  cluster.network.nic_GBps="));
  g_assert_null(strstr(p.out, "no line here"));
  proc_clear(&p);
  /* a listed key is one --set takes: the GEMM rate moves the iteration */
  const char *grid = "sweep --model llama3-8b --cluster dgx-h100-superpod --gpus 8 --tp 8 --global-batch 8 "
                     "--network analytic --format jsonl --set profile.gemm.anchor.tflops=794.5,900";
  p = run_line(grid);
  g_assert_cmpint(p.status, ==, 0);
  char **rows = g_strsplit(p.out, "\n", -1);
  cJSON *a = cJSON_Parse(rows[0]), *b = cJSON_Parse(rows[1]);
  g_assert_cmpfloat(num(obj(b, "result"), "iteration_time_s"), <, num(obj(a, "result"), "iteration_time_s"));
  cJSON_Delete(a);
  cJSON_Delete(b);
  g_strfreev(rows);
  proc_clear(&p);
  p = run_line("sweep --list-keys --cluster no-such-cluster");
  assert_one_line_error(&p, "no-such-cluster");
  proc_clear(&p);
}

/* Why: torchtitan's users think in local batch; a sweep takes it in place
 * of the global batch, which is then the local batch times d. */
static void test_local_batch(void) {
  Proc p = run_line("sweep --model llama3-8b --cluster dgx-h100-superpod --gpus 64 --tp 8 --local-batch 2,4 --network "
                    "analytic --format jsonl");
  g_assert_cmpint(p.status, ==, 0);
  char **rows = g_strsplit(p.out, "\n", -1);
  for (guint i = 0; i < 2; i++) {
    cJSON *r = cJSON_Parse(rows[i]);
    g_assert_nonnull(r);
    const cJSON *cfg = obj(obj(r, "result"), "config");
    g_assert_cmpfloat(num(cfg, "global_batch"), ==, (i ? 4 : 2) * num(cfg, "dp"));
    cJSON_Delete(r);
  }
  g_strfreev(rows);
  proc_clear(&p);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  tmpdir = test_tmp_dir("ptdsim-sweep");
  g_test_add_func("/sweep/row-count", test_row_count);
  g_test_add_func("/sweep/exact-same-results", test_exact_same_results);
  g_test_add_func("/sweep/rows-are-runs", test_rows_are_runs);
  g_test_add_func("/sweep/jobs", test_jobs);
  g_test_add_func("/sweep/mpi", test_mpi);
  g_test_add_func("/sweep/set", test_set);
  g_test_add_func("/sweep/kill-and-resume", test_kill_and_resume);
  g_test_add_func("/sweep/bad-specs", test_bad_specs);
  g_test_add_func("/sweep/file-and-zip", test_file_and_zip);
  g_test_add_func("/sweep/columns-cover-run", test_columns_cover_run);
  g_test_add_func("/sweep/throughput-columns", test_throughput_columns);
  g_test_add_func("/sweep/list-keys", test_list_keys);
  g_test_add_func("/sweep/local-batch", test_local_batch);
  int rc = g_test_run();
  rm_rf(tmpdir);
  g_free(tmpdir);
  return rc;
}
