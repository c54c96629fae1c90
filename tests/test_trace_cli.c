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
#include "test_tmp.h"

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

/* Whether an X event is an op (it has args.op) rather than one of the parts
 * nested in a compute op. */
static gboolean is_op(const cJSON *e) {
  return cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "args"), "op"));
}

/* The checks every trace must pass: every stream runs one op at a time; the
 * parts nested in an op lie inside it, one after another; every flow arrow
 * has one start and one end, on different GPUs.  Returns the parsed trace. */
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
  GHashTable *nested = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, (GDestroyNotify)g_array_unref);
  GHashTable *flows = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free); /* id -> pid of s, f */
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
    if (strcmp(ph, "s") == 0 || strcmp(ph, "f") == 0) {
      gint64 id = (gint64)cJSON_GetObjectItemCaseSensitive(e, "id")->valuedouble;
      gint64 *ends = g_hash_table_lookup(flows, &id);
      if (!ends) {
        ends = g_new(gint64, 2);
        ends[0] = ends[1] = -1;
        g_hash_table_insert(flows, g_memdup2(&id, sizeof id), ends);
      }
      gint64 *end = &ends[ph[0] == 's' ? 0 : 1];
      g_assert_cmpint(*end, ==, -1);
      *end = pid->valueint;
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
    GHashTable *table = is_op(e) ? streams : nested;
    GArray *spans = g_hash_table_lookup(table, &key);
    if (!spans) {
      spans = g_array_new(FALSE, FALSE, sizeof(Span));
      g_hash_table_insert(table, g_memdup2(&key, sizeof key), spans);
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
  g_hash_table_iter_init(&it, nested);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    GArray *parts = v, *ops = g_hash_table_lookup(streams, k);
    g_assert_nonnull(ops);
    qsort(parts->data, parts->len, sizeof(Span), span_cmp);
    guint o = 0;
    for (guint j = 0; j < parts->len; j++) {
      const Span *pt = &g_array_index(parts, Span, j);
      if (j > 0)
        g_assert_cmpint(g_array_index(parts, Span, j - 1).end, <=, pt->ts);
      while (o + 1 < ops->len && g_array_index(ops, Span, o + 1).ts <= pt->ts)
        o++;
      g_assert_cmpint(g_array_index(ops, Span, o).ts, <=, pt->ts);
      g_assert_cmpint(pt->end, <=, g_array_index(ops, Span, o).end);
    }
  }
  g_hash_table_iter_init(&it, flows);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    const gint64 *ends = v;
    g_assert_cmpint(ends[0], >=, 0);
    g_assert_cmpint(ends[1], >=, 0);
    g_assert_cmpint(ends[0], !=, ends[1]);
  }
  g_hash_table_destroy(streams);
  g_hash_table_destroy(nested);
  g_hash_table_destroy(flows);
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
    if (g_strcmp0(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "cat")), "compute") == 0 && is_op(e) &&
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
  gboolean named = strstr(text, "(forward slice 3)\"") != NULL && strstr(text, "(backward slice 0)\"") != NULL &&
                   strstr(text, "\"layers 0-2 (forward slice 0)\"") != NULL;
  cJSON_free(text);
  g_assert_true(named);
  cJSON_Delete(json);
  proc_clear(&p);
  g_free(path);
}

/* An X event with this exact name, or NULL. */
static const cJSON *event_named(const cJSON *json, const char *name) {
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(json, "traceEvents")) {
    if (g_strcmp0(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name")), name) == 0 &&
        g_strcmp0(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "ph")), "X") == 0)
      return e;
  }
  return NULL;
}

static const char *arg_str(const cJSON *e, const char *key) {
  return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "args"), key));
}

/* Why: a trace says what each slice is -- compute by layer and part, nested
 * in the op that runs them back to back; ZeRO's collectives by the part
 * they move; TeraPipe's broadcast by its name -- and carries its
 * configuration: the request as given and the run's results. */
static void test_detail(void) {
  char *path = tmp_path("detail.json");
  Proc p = run("run --layers 4 --hidden 1024 --heads 16 --gpus 4 --tp 2 --pp 2 --global-batch 4 --micro-batch 1 "
               "--network analytic --format json",
               path);
  g_assert_cmpint(p.status, ==, 0);
  cJSON *json = check_trace(path, 5, PTDP_CATS);
  /* tensor parallelism cuts a layer at its all-reduces: attention, then MLP */
  const cJSON *att = event_named(json, "layer 0 attention (forward mb 0)");
  g_assert_nonnull(att);
  g_assert_cmpstr(arg_str(att, "part"), ==, "attention");
  /* the compute between two all-reduces runs the closing residual of one
   * layer and the attention of the next: one op, two nested parts */
  const cJSON *op = event_named(json, "layer 0 residual ... layer 1 attention (forward mb 0)");
  g_assert_true(op && is_op(op));
  const cJSON *part = event_named(json, "layer 0 residual (forward mb 0)");
  g_assert_true(part && !is_op(part));
  g_assert_nonnull(event_named(json, "layer 1 MLP (backward mb 3)"));
  g_assert_nonnull(event_named(json, "logits and loss (forward mb 2)"));
  /* the request and the result ride along */
  const cJSON *meta = cJSON_GetObjectItemCaseSensitive(json, "ptdsim");
  g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "format")), ==, "ptdsim-trace");
  const cJSON *req = cJSON_GetObjectItemCaseSensitive(meta, "request");
  g_assert_cmpint(cJSON_GetObjectItemCaseSensitive(req, "tp")->valueint, ==, 2);
  g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(req, "network")), ==, "analytic");
  g_assert_cmpuint(strlen(cJSON_GetStringValue(
                       cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(req, "cluster"), "sha256"))),
                   ==, 64);
  cJSON *out = cJSON_Parse(p.out);
  g_assert_true(cJSON_Compare(out, cJSON_GetObjectItemCaseSensitive(meta, "result"), TRUE));
  cJSON_Delete(out);
  cJSON_Delete(json);
  proc_clear(&p);

  p = run("run --layers 2 --hidden 1024 --heads 16 --gpus 4 --tp 1 --pp 1 --global-batch 4 --micro-batch 1 --zero 3 "
          "--zero-contiguous-gradients",
          path);
  g_assert_cmpint(p.status, ==, 0);
  json = check_trace(path, 2, (const char *const[]){"compute", "dp", "optimizer", NULL});
  g_assert_nonnull(event_named(json, "param all-gather, layer 1 MLP up (recompute mb 0)"));
  g_assert_nonnull(event_named(json, "layer 0 QKV and attention (backward mb 0)"));
  g_assert_nonnull(event_named(json, "grad reduce-scatter, layer 0 projection"));
  cJSON_Delete(json);
  proc_clear(&p);

  p = run("run --model gpt3-1b --cluster aws-p3-16xlarge --gpus 16 --tp 2 --pp 8 --dp 1 --global-batch 2 "
          "--schedule terapipe --slices uniform:2",
          path);
  g_assert_cmpint(p.status, ==, 0);
  json = check_trace(path, 5, (const char *const[]){"compute", "tp", "pp", "dp", "optimizer", NULL});
  g_assert_nonnull(event_named(json, "broadcast (forward slice 1)"));
  g_assert_null(event_named(json, "pp all-gather (forward slice 1)"));
  cJSON_Delete(json);
  proc_clear(&p);
  g_free(path);
}

/* Why: `ptdsim report` prints from a trace exactly what `run` printed, text
 * and JSON, compressed or not; its request is the run's options. */
static void test_report_round_trip(void) {
#define SMALL_TEXT "run --layers 8 --hidden 1024 --heads 16 --seq-len 512 --vocab 4096 --gpus 32 --tp 2 --pp 4 " \
                   "--dp 4 --global-batch 32 --micro-batch 1"
  static const char *const configs[] = {
      SMALL_TEXT " --network flow",
      SMALL_TEXT " --schedule interleaved --layers-per-chunk 1 --network analytic --tokens 1B",
      "run --layers 2 --hidden 1024 --heads 16 --gpus 4 --tp 1 --pp 1 --global-batch 4 --micro-batch 1 --zero 2",
      "run --model gpt3-1b --cluster aws-p3-16xlarge --gpus 16 --tp 1 --pp 8 --dp 2 --global-batch 8 "
      "--schedule terapipe --micro-batch 2"};
  for (guint i = 0; i < G_N_ELEMENTS(configs); i++)
    for (guint gz = 0; gz < 2; gz++) {
      char *path = tmp_path(gz ? "round.json.gz" : "round.json");
      Proc text = run(configs[i], path);
      g_assert_cmpint(text.status, ==, 0);
      const char *argv_r[] = {"report", path, NULL};
      Proc back = run_argv(argv_r);
      g_assert_cmpint(back.status, ==, 0);
      g_assert_cmpstr(back.out, ==, text.out);
      char *json_cfg = g_strconcat(configs[i], " --format json", NULL);
      Proc json = run(json_cfg, NULL);
      const char *argv_j[] = {"report", path, "--format", "json", NULL};
      Proc back_json = run_argv(argv_j);
      g_assert_cmpstr(back_json.out, ==, json.out);
      if (gz) { /* gzip's magic bytes */
        gsize len;
        char *bytes = slurp(path, &len);
        g_assert_cmpuint(len, >, 2);
        g_assert_cmpint((guchar)bytes[0], ==, 0x1f);
        g_assert_cmpint((guchar)bytes[1], ==, 0x8b);
        g_free(bytes);
      }
      proc_clear(&text);
      proc_clear(&back);
      proc_clear(&json);
      proc_clear(&back_json);
      g_free(json_cfg);
      g_free(path);
    }
}

/* Writes `text` to a file in the test directory; returns its path. */
static char *write_tmp(const char *name, const char *text, gsize len) {
  char *path = tmp_path(name);
  GError *error = NULL;
  g_assert_true(g_file_set_contents(path, text, (gssize)len, &error));
  g_assert_no_error(error);
  return path;
}

/* Why: a trace that is missing, truncated, not JSON, not ptdsim's, or
 * whose events were changed after the fact is refused in one line naming
 * the file -- the numbers are recomputed from the events, not trusted. */
static void test_report_bad_traces(void) {
  char *path = tmp_path("good.json");
  Proc p = run(SMALL " --network analytic", path);
  g_assert_cmpint(p.status, ==, 0);
  proc_clear(&p);
  gsize len;
  char *text = slurp(path, &len);
  struct {
    const char *name, *needle;
    char *content;
    gsize len;
  } cases[] = {
      {"truncated.json", "not valid JSON", g_strndup(text, len / 2), len / 2},
      {"empty.json", "not valid JSON", g_strdup(""), 0},
      {"foreign.json", "not a ptdsim trace", g_strdup("{\"traceEvents\": []}"), 0},
      {"garbage.json", "not valid JSON", g_strdup("\x01\x02 not json"), 0},
      {"late.json", "its events end at", NULL, 0},
      {"moved.json", "time_breakdown_s", NULL, 0},
  };
  /* the last compute event made to end later: the iteration time no longer
   * matches; the first compute op of the critical GPU shortened: its
   * breakdown no longer does */
  GString *late = g_string_new(text);
  char *last_dur = g_strrstr(late->str, "\"dur\":");
  g_assert_nonnull(last_dur);
  g_string_insert(late, last_dur - late->str + 6, "9");
  cases[4].content = g_string_free(late, FALSE);
  cJSON *json = cJSON_Parse(text);
  const cJSON *meta = cJSON_GetObjectItemCaseSensitive(json, "ptdsim");
  int crit = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(meta, "result"), "critical_stage")
                 ->valueint;
  char *want = g_strdup_printf("(stage %d, tp 0, replica 0", crit);
  int pid = -1;
  cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(json, "traceEvents")) {
    if (g_strcmp0(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name")), "process_name") == 0 &&
        strstr(arg_str(e, "name"), want))
      pid = cJSON_GetObjectItemCaseSensitive(e, "pid")->valueint;
  }
  g_assert_cmpint(pid, >=, 0);
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(json, "traceEvents")) {
    if (cJSON_GetObjectItemCaseSensitive(e, "pid")->valueint == pid &&
        g_strcmp0(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "cat")), "compute") == 0 && is_op(e)) {
      cJSON *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
      cJSON_SetNumberValue(dur, dur->valuedouble / 2);
      break;
    }
  }
  cases[5].content = cJSON_PrintUnformatted(json);
  cJSON_Delete(json);
  g_free(want);
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    char *bad = write_tmp(cases[i].name, cases[i].content, cases[i].len ? cases[i].len : strlen(cases[i].content));
    const char *argv[] = {"report", bad, NULL};
    Proc r = run_argv(argv);
    assert_one_line_error(&r, cases[i].needle);
    g_assert_nonnull(strstr(r.err, cases[i].name));
    proc_clear(&r);
    g_free(bad);
    if (i == 5)
      cJSON_free(cases[i].content);
    else
      g_free(cases[i].content);
  }
  const char *argv[] = {"report", "/nonexistent/trace.json.gz", NULL};
  Proc r = run_argv(argv);
  assert_one_line_error(&r, "no such file");
  proc_clear(&r);
  g_free(text);
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
  tmpdir = test_tmp_dir("ptdsim-trace");
  g_assert_no_error(error);
  g_test_add_func("/trace/ptdp-ideal", test_ptdp_ideal);
  g_test_add_func("/trace/ptdp-flow", test_ptdp_flow);
  g_test_add_func("/trace/ptdp-analytic-interleaved", test_ptdp_analytic_interleaved);
  g_test_add_func("/trace/no-symmetry", test_no_symmetry);
  g_test_add_func("/trace/terapipe", test_terapipe);
  g_test_add_func("/trace/detail", test_detail);
  g_test_add_func("/trace/report-round-trip", test_report_round_trip);
  g_test_add_func("/trace/report-bad-traces", test_report_bad_traces);
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
