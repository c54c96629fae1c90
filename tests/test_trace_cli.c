/* ptdsim — end-to-end tests of `ptdsim run --trace FILE` through the real
 * binary ($PTDSIM_BIN): the file is trace-event JSON with complete events on
 * every stream kind, consistent with the run's own report (compute time on
 * the critical GPU), no overlap on a stream, byte-identical across runs, and
 * no file at all when anything goes wrong. */
#include <cjson/cJSON.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "cli_harness.h"

static char *tmpdir;

/* Runs ptdsim with `args` (space-separated, no shell) and, when `trace` is
 * not NULL, --trace TRACE. */
static Proc run(const char *args, const char *trace) {
  char **v = g_strsplit(args, " ", -1);
  GPtrArray *argv = g_ptr_array_new();
  for (guint i = 0; v[i]; i++)
    g_ptr_array_add(argv, v[i]);
  if (trace) {
    g_ptr_array_add(argv, (gpointer) "--trace");
    g_ptr_array_add(argv, (gpointer)trace);
  }
  g_ptr_array_add(argv, NULL);
  Proc p = run_argv((const char *const *)argv->pdata);
  g_ptr_array_free(argv, TRUE);
  g_strfreev(v);
  return p;
}

static char *tmp_path(const char *name) { return g_build_filename(tmpdir, name, NULL); }

/* No file of that name and no temporary left beside it (".NAME.XXXXXX"). */
static void assert_no_trace_left(const char *path) {
  g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));
  char *dir = g_path_get_dirname(path), *base = g_path_get_basename(path);
  char *prefix = g_strdup_printf(".%s.", base);
  GDir *d = g_dir_open(dir, 0, NULL);
  if (d) {
    const char *n;
    while ((n = g_dir_read_name(d)))
      g_assert_false(g_str_has_prefix(n, prefix));
    g_dir_close(d);
  }
  g_free(prefix);
  g_free(dir);
  g_free(base);
}

/* One error line on stderr, nothing on stdout, non-zero exit. */
static void assert_one_line_error(const Proc *p, const char *needle) {
  g_assert_cmpint(p->status, !=, 0);
  g_assert_cmpstr(p->out, ==, "");
  g_assert_true(g_str_has_prefix(p->err, "ptdsim: "));
  g_assert_nonnull(strchr(p->err, '\n'));
  g_assert_cmpstr(strchr(p->err, '\n') + 1, ==, "");
  if (!strstr(p->err, needle))
    g_test_message("stderr: %s", p->err);
  g_assert_nonnull(strstr(p->err, needle));
}

static char *slurp(const char *path, gsize *len) {
  char *text = NULL;
  GError *error = NULL;
  g_assert_true(g_file_get_contents(path, &text, len, &error));
  g_assert_no_error(error);
  return text;
}

/* ts/dur are microseconds written to three decimals: back to exact ns. */
static gint64 to_ns(const cJSON *e, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);
  g_assert_true(cJSON_IsNumber(v));
  g_assert_cmpfloat(v->valuedouble, >=, 0);
  return (gint64)llround(v->valuedouble * 1000.0);
}

typedef struct {
  gint64 ts, end;
} Span;

static int span_cmp(const void *a, const void *b) {
  const Span *x = a, *y = b;
  return x->ts < y->ts ? -1 : x->ts > y->ts ? 1 : (x->end > y->end) - (x->end < y->end);
}

/* The checks every trace must pass.  Returns the parsed trace. */
static cJSON *check_trace(const char *path, guint expect_streams_with_events, const char *const *cats) {
  gsize len;
  char *text = slurp(path, &len);
  cJSON *json = cJSON_Parse(text);
  g_free(text);
  g_assert_nonnull(json);
  g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(json, "displayTimeUnit")), ==, "ns");
  const cJSON *events = cJSON_GetObjectItemCaseSensitive(json, "traceEvents");
  g_assert_true(cJSON_IsArray(events));
  /* Per (pid, tid): the spans, to check for overlap; which tids have X events. */
  GHashTable *streams = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, (GDestroyNotify)g_array_unref);
  gboolean tid_seen[5] = {FALSE}, tid_named[5] = {FALSE};
  GHashTable *cat_seen = g_hash_table_new(g_str_hash, g_str_equal);
  guint n_x = 0, n_procs = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, events) {
    const char *ph = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "ph"));
    g_assert_nonnull(ph);
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid"), *tid = cJSON_GetObjectItemCaseSensitive(e, "tid");
    g_assert_true(cJSON_IsNumber(pid));
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name"));
    g_assert_nonnull(name);
    if (strcmp(ph, "M") == 0) {
      const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
      if (strcmp(name, "process_name") == 0) {
        const char *pn = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(args, "name"));
        g_assert_true(g_str_has_prefix(pn, "GPU "));
        g_assert_nonnull(strstr(pn, "(stage "));
        n_procs++;
      } else if (strcmp(name, "thread_name") == 0) {
        g_assert_true(cJSON_IsNumber(tid));
        g_assert_cmpint(tid->valueint, <, 5);
        tid_named[tid->valueint] = TRUE;
      }
      continue;
    }
    g_assert_cmpstr(ph, ==, "X");
    g_assert_true(cJSON_IsNumber(tid));
    g_assert_cmpint(tid->valueint, >=, 0);
    g_assert_cmpint(tid->valueint, <, 5);
    const char *cat = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "cat"));
    g_assert_nonnull(cat);
    g_hash_table_add(cat_seen, (gpointer)cat);
    tid_seen[tid->valueint] = TRUE;
    n_x++;
    gint64 key = (gint64)pid->valueint * 8 + tid->valueint;
    GArray *spans = g_hash_table_lookup(streams, &key);
    if (!spans) {
      spans = g_array_new(FALSE, FALSE, sizeof(Span));
      g_hash_table_insert(streams, g_memdup2(&key, sizeof key), spans);
    }
    Span s = {to_ns(e, "ts"), 0};
    s.end = s.ts + to_ns(e, "dur");
    g_array_append_val(spans, s);
  }
  g_assert_cmpuint(n_x, >, 0);
  g_assert_cmpuint(n_procs, >, 0);
  guint with_events = 0;
  for (guint t = 0; t < 5; t++) {
    g_assert_true(tid_named[t]);
    with_events += tid_seen[t];
  }
  g_assert_cmpuint(with_events, ==, expect_streams_with_events);
  for (guint c = 0; cats[c]; c++) {
    if (!g_hash_table_contains(cat_seen, cats[c]))
      g_test_message("no X event of category %s", cats[c]);
    g_assert_true(g_hash_table_contains(cat_seen, cats[c]));
  }
  /* A stream runs one op at a time: sorted by start, each ends before the next starts. */
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, streams);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    GArray *spans = v;
    qsort(spans->data, spans->len, sizeof(Span), span_cmp);
    for (guint j = 1; j < spans->len; j++)
      g_assert_cmpint(g_array_index(spans, Span, j - 1).end, <=, g_array_index(spans, Span, j).ts);
  }
  g_hash_table_destroy(streams);
  g_hash_table_destroy(cat_seen);
  return json;
}

/* Sum of the "compute" events' durations (ns) of the process whose name says
 * "(stage S, tp 0, replica 0". */
static gint64 stage_compute_ns(const cJSON *json, int stage) {
  const cJSON *events = cJSON_GetObjectItemCaseSensitive(json, "traceEvents"), *e;
  char *want = g_strdup_printf("(stage %d, tp 0, replica 0", stage);
  int pid = -1;
  cJSON_ArrayForEach(e, events) {
    if (g_strcmp0(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name")), "process_name") == 0 &&
        strstr(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "args"),
                                                                      "name")),
               want))
      pid = cJSON_GetObjectItemCaseSensitive(e, "pid")->valueint;
  }
  g_free(want);
  g_assert_cmpint(pid, >=, 0);
  gint64 sum = 0;
  cJSON_ArrayForEach(e, events) {
    if (g_strcmp0(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "cat")), "compute") == 0 &&
        cJSON_GetObjectItemCaseSensitive(e, "pid")->valueint == pid)
      sum += to_ns(e, "dur");
  }
  return sum;
}

static double report_compute_s(const char *out, int *critical_stage) {
  cJSON *r = cJSON_Parse(out);
  g_assert_nonnull(r);
  const cJSON *tb = cJSON_GetObjectItemCaseSensitive(r, "time_breakdown_s");
  double c = cJSON_GetObjectItemCaseSensitive(tb, "compute")->valuedouble;
  *critical_stage = cJSON_GetObjectItemCaseSensitive(r, "critical_stage")->valueint;
  cJSON_Delete(r);
  return c;
}

static const char *const PTDP_CATS[] = {"compute", "tp", "pp", "dp", "optimizer", NULL};

/* Why: a PTD-P trace must show every stream and agree with the run's report:
 * compute has first claim on a GPU's time in the breakdown and compute ops
 * never overlap, so the critical GPU's compute events sum exactly (to the
 * nanosecond) to the reported compute time; with --trace the report itself
 * does not change.  Torch DDP puts gradient all-reduces on the dp stream
 * during the backward pass; every stream kind carries events. */
static void check_ptdp(const char *cfg, const char *file) {
  char *path = tmp_path(file);
  Proc plain = run(cfg, NULL);
  g_assert_cmpint(plain.status, ==, 0);
  Proc p = run(cfg, path);
  g_assert_cmpint(p.status, ==, 0);
  g_assert_cmpstr(p.out, ==, plain.out);
  cJSON *json = check_trace(path, 5, PTDP_CATS);
  int stage;
  double compute_s = report_compute_s(p.out, &stage);
  gint64 sum = stage_compute_ns(json, stage);
  g_assert_cmpint(llabs(sum - (gint64)llround(compute_s * 1e9)), <=, 1);
  cJSON_Delete(json);
  proc_clear(&plain);
  proc_clear(&p);
  g_free(path);
}

#define SMALL "run --layers 8 --hidden 1024 --heads 16 --seq-len 512 --vocab 4096 --gpus 32 --tp 2 --pp 4 --dp 4 " \
              "--global-batch 32 --micro-batch 1 --format json"

static void test_ptdp_ideal(void) { check_ptdp(SMALL " --profile ideal --ddp torch", "ideal.json"); }
static void test_ptdp_flow(void) { check_ptdp(SMALL " --ddp torch --network flow", "flow.json"); }
static void test_ptdp_analytic_interleaved(void) {
  check_ptdp(SMALL " --network analytic --schedule interleaved --chunks 2", "inter.json");
}

/* Why: without the symmetry shortcut every GPU is a process of its own, named
 * by its tensor rank and replica, and the trace says so. */
static void test_no_symmetry(void) {
  char *path = tmp_path("nosym.json");
  Proc p = run("run --layers 4 --hidden 512 --heads 8 --seq-len 256 --vocab 1024 --gpus 16 --tp 2 --pp 2 --dp 4 "
               "--global-batch 8 --micro-batch 1 --network analytic --no-symmetry",
               path);
  g_assert_cmpint(p.status, ==, 0);
  cJSON *json = check_trace(path, 5, PTDP_CATS);
  const cJSON *other = cJSON_GetObjectItemCaseSensitive(json, "otherData");
  g_assert_cmpint(cJSON_GetObjectItemCaseSensitive(other, "simulated_gpus")->valueint, ==, 16);
  guint procs = 0;
  gboolean seen_tp1_rep3 = FALSE;
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(json, "traceEvents")) {
    if (g_strcmp0(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name")), "process_name") != 0)
      continue;
    procs++;
    const char *n =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "args"), "name"));
    seen_tp1_rep3 |= strstr(n, "tp 1, replica 3)") != NULL;
  }
  g_assert_cmpuint(procs, ==, 16);
  g_assert_true(seen_tp1_rep3);
  cJSON_Delete(json);
  proc_clear(&p);
  g_free(path);
}

/* Why: TeraPipe runs trace too (token slices as the items), with the same
 * invariants; its single replica has no dp stream traffic beyond the
 * embedding all-reduce and the gradient all-reduce. */
static void test_terapipe(void) {
  char *path = tmp_path("tera.json");
  const char *cfg = "run --model gpt3-1b --cluster aws-p3-16xlarge --gpus 16 --tp 1 --pp 8 --dp 2 --global-batch 8 "
                    "--schedule terapipe --slices uniform:4 --micro-batch 2 --format json";
  Proc p = run(cfg, path);
  g_assert_cmpint(p.status, ==, 0);
  static const char *const cats[] = {"compute", "pp", "dp", "optimizer", NULL};
  /* t = 1: no tensor-parallel all-reduce, so the tp stream is empty. */
  cJSON *json = check_trace(path, 4, cats);
  int stage;
  double compute_s = report_compute_s(p.out, &stage);
  g_assert_cmpint(llabs(stage_compute_ns(json, stage) - (gint64)llround(compute_s * 1e9)), <=, 1);
  char *text = cJSON_PrintUnformatted(json);
  gboolean named = strstr(text, "\"forward slice 3\"") != NULL && strstr(text, "\"backward slice 0\"") != NULL;
  cJSON_free(text);
  g_assert_true(named);
  cJSON_Delete(json);
  proc_clear(&p);
  g_free(path);
}

/* Why: same inputs give the same bytes (the trace is an artefact people diff). */
static void test_deterministic(void) {
  char *a = tmp_path("det-a.json"), *b = tmp_path("det-b.json");
  Proc p = run(SMALL " --ddp torch --network flow", a), q = run(SMALL " --ddp torch --network flow", b);
  g_assert_cmpint(p.status, ==, 0);
  g_assert_cmpint(q.status, ==, 0);
  gsize la, lb;
  char *ta = slurp(a, &la), *tb = slurp(b, &lb);
  g_assert_cmpuint(la, ==, lb);
  g_assert_true(memcmp(ta, tb, la) == 0);
  g_free(ta);
  g_free(tb);
  proc_clear(&p);
  proc_clear(&q);
  g_free(a);
  g_free(b);
}

/* Why: a trace that cannot be written fails at once, in one line, with
 * nothing printed and nothing left behind; so does a run that fails after the
 * trace file was opened (here: it does not fit in memory), and a trace over
 * the event limit. */
static void test_errors(void) {
  char *missing = g_build_filename(tmpdir, "no-such-dir", "t.json", NULL);
  Proc p = run(SMALL, missing);
  assert_one_line_error(&p, "--trace");
  assert_no_trace_left(missing);
  proc_clear(&p);
  g_free(missing);

  p = run(SMALL, tmpdir); /* a directory */
  assert_one_line_error(&p, "--trace");
  proc_clear(&p);

  p = run(SMALL, "");
  assert_one_line_error(&p, "--trace");
  proc_clear(&p);

  if (g_file_test("/dev/null", G_FILE_TEST_EXISTS)) { /* never replaced, even when the tests run as root */
    p = run(SMALL, "/dev/null");
    assert_one_line_error(&p, "not a regular file");
    proc_clear(&p);
    g_assert_false(g_file_test("/dev/null", G_FILE_TEST_IS_REGULAR));
  }

  char *oom = tmp_path("oom.json");
  p = run("run --model gpt3-175b --gpus 8 --tp 8 --pp 1 --global-batch 8 --micro-batch 1", oom);
  assert_one_line_error(&p, "does not fit in memory");
  assert_no_trace_left(oom);
  proc_clear(&p);
  g_free(oom);

  /* About 3.3 million events: refused after the (fast) simulation, before writing. */
  char *big = tmp_path("big.json");
  p = run("run --layers 32 --hidden 512 --heads 8 --seq-len 512 --vocab 1024 --gpus 8 --tp 2 --pp 4 "
          "--global-batch 8192 --micro-batch 1 --profile ideal",
          big);
  assert_one_line_error(&p, "fewer microbatches");
  assert_no_trace_left(big);
  proc_clear(&p);
  g_free(big);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  GError *error = NULL;
  tmpdir = g_dir_make_tmp("ptdsim-trace-XXXXXX", &error);
  g_assert_no_error(error);
  g_test_add_func("/trace/ptdp-ideal", test_ptdp_ideal);
  g_test_add_func("/trace/ptdp-flow", test_ptdp_flow);
  g_test_add_func("/trace/ptdp-analytic-interleaved", test_ptdp_analytic_interleaved);
  g_test_add_func("/trace/no-symmetry", test_no_symmetry);
  g_test_add_func("/trace/terapipe", test_terapipe);
  g_test_add_func("/trace/deterministic", test_deterministic);
  g_test_add_func("/trace/errors", test_errors);
  int rc = g_test_run();
  /* Remove what the tests wrote. */
  GDir *d = g_dir_open(tmpdir, 0, NULL);
  const char *n;
  while (d && (n = g_dir_read_name(d))) {
    char *f = g_build_filename(tmpdir, n, NULL);
    g_unlink(f);
    g_free(f);
  }
  if (d)
    g_dir_close(d);
  g_rmdir(tmpdir);
  g_free(tmpdir);
  return rc;
}
