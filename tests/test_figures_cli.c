/* ptdsim — end-to-end tests of `ptdsim figure` through the real binary
 * ($PTDSIM_BIN): the four files of -o (PNG and SVG decoded back, CSV and
 * JSON with one row per configuration of the figure, counted from the
 * reference), the exact formulas of figures 6 and 8, rebuilding from saved
 * traces to the byte, and refused traces. */
#include <cairo.h>
#include <cjson/cJSON.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "../traces/sc21_figs.h"
#include "cli_harness.h"
#include "test_plain.h"
#include "test_tmp.h"

static char *tmpdir;
static cJSON *reference; /* traces/reference/megatron-sc21.json */

static char *tmp_path(const char *name) { return g_build_filename(tmpdir, name, NULL); }

/* Runs `figure NAME ARGS...` (space-separated extra arguments). */
static Proc figure(const char *name, const char *extra) {
  char *line = g_strdup_printf("figure %s%s%s", name, extra ? " " : "", extra ? extra : "");
  Proc p = run_line(line);
  g_free(line);
  return p;
}

/* --- reading the pictures back --- */

typedef struct {
  const guchar *data;
  gsize len, at;
} Reader;

static cairo_status_t read_bytes(void *closure, unsigned char *out, unsigned int length) {
  Reader *r = closure;
  if (r->at + length > r->len)
    return CAIRO_STATUS_READ_ERROR;
  memcpy(out, r->data + r->at, length);
  r->at += length;
  return CAIRO_STATUS_SUCCESS;
}

/* Decodes a PNG with cairo; returns its size. */
static void png_size(const char *path, int *w, int *h) {
  gsize len;
  char *bytes = slurp(path, &len);
  Reader r = {(const guchar *)bytes, len, 0};
  cairo_surface_t *s = cairo_image_surface_create_from_png_stream(read_bytes, &r);
  g_assert_cmpint(cairo_surface_status(s), ==, CAIRO_STATUS_SUCCESS);
  *w = cairo_image_surface_get_width(s);
  *h = cairo_image_surface_get_height(s);
  cairo_surface_destroy(s);
  g_free(bytes);
}

static void svg_start(GMarkupParseContext *ctx, const char *name, const char **attr_names, const char **attr_values,
                      gpointer data, GError **error) {
  (void)ctx, (void)attr_names, (void)attr_values, (void)error;
  guint *elements = data;
  if (*elements == 0)
    g_assert_cmpstr(name, ==, "svg");
  (*elements)++;
}

/* Parses an SVG as XML: its root is <svg> and it has drawing in it. */
static void svg_parses(const char *path) {
  gsize len;
  char *text = slurp(path, &len);
  const char *start = strstr(text, "<svg");
  g_assert_nonnull(start);
  guint elements = 0;
  GMarkupParser parser = {.start_element = svg_start};
  GMarkupParseContext *ctx = g_markup_parse_context_new(&parser, 0, &elements, NULL);
  GError *error = NULL;
  g_assert_true(g_markup_parse_context_parse(ctx, start, (gssize)(len - (gsize)(start - text)), &error) &&
                g_markup_parse_context_end_parse(ctx, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(elements, >, 10);
  g_markup_parse_context_free(ctx);
  g_free(text);
}

/* --- how many configurations each figure has, from the reference --- */

static guint list_len(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsArray(v) ? (guint)cJSON_GetArraySize(v) : cJSON_IsNumber(v) ? 1u : 0u;
}

static const cJSON *sweep(const char *fig) {
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(reference, "figure_sweeps"), fig);
  g_assert_nonnull(s);
  return s;
}

/* Rows the figure must have: one per configuration (figure 6: one per
 * (n, b', d) with d a power of two up to min(n, b')). */
static guint expected_rows(const char *name) {
  if (strcmp(name, "megatron-fig6") == 0) {
    guint rows = 0;
    static const guint ns[] = {32, 128}, bs[] = {32, 128};
    for (guint i = 0; i < 2; i++)
      for (guint j = 0; j < 2; j++)
        for (guint d = 1; d <= MIN(ns[i], bs[j]); d *= 2)
          rows++;
    return rows;
  }
  if (strcmp(name, "megatron-fig7") == 0)
    return list_len(sweep("fig7"), "micro_batch");
  if (strcmp(name, "megatron-fig8") == 0)
    return list_len(sweep("fig8"), "global_batch") * list_len(sweep("fig7"), "micro_batch");
  if (strcmp(name, "megatron-fig11") == 0)
    return list_len(sweep("fig11"), "pp") * list_len(sweep("fig11"), "global_batch");
  if (strcmp(name, "megatron-fig12") == 0) /* 1F1B, interleaved, interleaved without scatter/gather */
    return 3 * list_len(sweep("fig12"), "global_batch");
  if (strcmp(name, "megatron-fig13") == 0)
    return list_len(sweep("fig13"), "tp_pp") * list_len(sweep("fig13"), "global_batch");
  if (strcmp(name, "megatron-fig14") == 0)
    return list_len(sweep("fig14"), "pp") * list_len(sweep("fig14"), "global_batch");
  if (strcmp(name, "megatron-fig15") == 0)
    return list_len(sweep("fig15"), "tp") * list_len(sweep("fig15"), "global_batch");
  if (strcmp(name, "megatron-fig16") == 0)
    return list_len(sweep("fig16"), "micro_batch") * list_len(sweep("fig16"), "global_batch");
  if (strcmp(name, "megatron-fig17") == 0)
    return list_len(sweep("fig17"), "recompute") * list_len(sweep("fig17"), "global_batch");
  if (strcmp(name, "megatron-fig18") == 0)
    return list_len(sweep("fig18"), "scatter_gather") * list_len(sweep("fig18"), "global_batch");
  if (strcmp(name, "megatron-table2") == 0 || strcmp(name, "megatron-fig10") == 0)
    return list_len(cJSON_GetObjectItemCaseSensitive(reference, "table2"), "rows");
  g_assert_not_reached();
}

/* CSV lines, the header excluded. */
static guint csv_rows(const char *path) {
  gsize len;
  char *text = slurp(path, &len);
  g_assert_cmpuint(len, >, 0);
  g_assert_cmpint(text[len - 1], ==, '\n');
  guint lines = 0;
  for (gsize i = 0; i < len; i++)
    lines += text[i] == '\n';
  g_free(text);
  return lines - 1;
}

/* Why: `figure NAME -o DIR` writes four files a user can open -- a PNG and
 * an SVG that decode, a CSV and a JSON with one row per configuration of
 * the figure -- and prints the table on stdout; the network is analytic
 * here only to keep the test quick (the default path is the same code). */
static void test_outputs(gconstpointer data) {
  const char *name = data;
  char *dir = tmp_path(name);
  char *extra = g_strdup_printf("-o %s%s", dir,
                                strcmp(name, "megatron-table2") == 0 || strcmp(name, "megatron-fig10") == 0
                                    ? " --network analytic"
                                    : "");
  Proc p = figure(name, extra);
  if (p.status != 0)
    g_test_message("stderr: %s", p.err);
  g_assert_cmpint(p.status, ==, 0);
  g_assert_true(g_str_has_prefix(p.out, "SC21 "));
  static const char *const ext[] = {"json", "csv", "svg", "png"};
  for (guint i = 0; i < G_N_ELEMENTS(ext); i++) {
    char *file = g_strdup_printf("%s/%s.%s", dir, name, ext[i]);
    g_assert_true(g_file_test(file, G_FILE_TEST_IS_REGULAR));
    char *said = g_strdup_printf("wrote %s\n", file);
    g_assert_nonnull(strstr(p.err, said));
    g_free(said);
    g_free(file);
  }
  char *png = g_strdup_printf("%s/%s.png", dir, name), *svg = g_strdup_printf("%s/%s.svg", dir, name);
  int w, h;
  png_size(png, &w, &h);
  g_assert_cmpint(w, ==, 1200);
  g_assert_cmpint(h, ==, 750);
  svg_parses(svg);
  char *csv = g_strdup_printf("%s/%s.csv", dir, name), *json_path = g_strdup_printf("%s/%s.json", dir, name);
  guint want = expected_rows(name);
  g_assert_cmpuint(csv_rows(csv), ==, want);
  gsize len;
  char *text = slurp(json_path, &len);
  cJSON *json = cJSON_Parse(text);
  g_assert_nonnull(json);
  g_assert_cmpstr(str(json, "figure"), ==, name);
  g_assert_cmpint(cJSON_GetArraySize(arr(json, "rows")), ==, (int)want);
  g_assert_true(g_str_has_prefix(str(json, "source"), "Narayanan et al., SC21"));
  cJSON_Delete(json);
  g_free(text);
  g_free(png);
  g_free(svg);
  g_free(csv);
  g_free(json_path);
  g_free(extra);
  g_free(dir);
  proc_clear(&p);
}

/* Why: figure 6 is the closed form (p-1)/m with p = n/d and m = b'/d, and
 * nothing else. */
static void test_fig6_exact(void) {
  cJSON *j = run_json("figure megatron-fig6 --format json");
  const cJSON *row;
  guint n = 0;
  cJSON_ArrayForEach(row, arr(j, "rows")) {
    double gpus = num(row, "gpus"), b = num(row, "batch_in_microbatches"), d = num(row, "dp");
    double p = gpus / d, m = b / d;
    g_assert_cmpfloat(num(row, "pp"), ==, p);
    g_assert_cmpfloat(num(row, "microbatches"), ==, m);
    g_assert_cmpfloat(num(row, "bubble_fraction"), ==, (p - 1) / m);
    n++;
  }
  g_assert_cmpuint(n, ==, expected_rows("megatron-fig6"));
  cJSON_Delete(j);
}

/* Why: figure 8 is equation (1) on figure 7's one-GPU microbatch times,
 * normalized by the best microbatch size of each batch: recomputed here
 * from the rows, to the bit; and figure 7's microbatch time is its
 * simulated compute over its microbatches. */
static void test_fig8_is_equation_1(void) {
  cJSON *f7 = run_json("figure megatron-fig7 --format json"), *f8 = run_json("figure megatron-fig8 --format json");
  const cJSON *row;
  cJSON_ArrayForEach(row, arr(f7, "rows")) {
    g_assert_cmpfloat(num(row, "microbatch_time_s"), ==, num(row, "compute_s") / num(row, "microbatches"));
    g_assert_cmpfloat(num(row, "tp"), ==, 1);
    g_assert_cmpfloat(num(row, "gpus"), ==, 1);
  }
  guint n = 0;
  cJSON_ArrayForEach(row, arr(f8, "rows")) {
    double B = num(row, "global_batch"), best = 0, p = num(row, "pp");
    const cJSON *t, *other;
    /* its time is figure 7's at the same b */
    gboolean found = FALSE;
    cJSON_ArrayForEach(t, arr(f7, "rows")) if (num(t, "micro_batch") == num(row, "micro_batch")) {
      g_assert_cmpfloat(num(row, "microbatch_time_s"), ==, num(t, "microbatch_time_s"));
      found = TRUE;
    }
    g_assert_true(found);
    cJSON_ArrayForEach(other, arr(f8, "rows")) if (num(other, "global_batch") == B) {
      double b = num(other, "micro_batch"), tm = num(other, "microbatch_time_s");
      best = fmax(best, B / ((B / b + p - 1.0) * tm));
    }
    double b = num(row, "micro_batch"), tm = num(row, "microbatch_time_s");
    g_assert_cmpfloat(num(row, "normalized_throughput"), ==, B / ((B / b + p - 1.0) * tm) / best);
    g_assert_cmpfloat(trace_sc21_eq1(B, b, p, tm), ==, B / ((B / b + p - 1.0) * tm));
    n++;
  }
  g_assert_cmpuint(n, ==, expected_rows("megatron-fig8"));
  cJSON_Delete(f7);
  cJSON_Delete(f8);
}

/* Why: Table 2's rows are `ptdsim run` of the same configuration: a ZeRO-3
 * row is `run --zero 3`, a PTD-P row `run` with t and p; both schemes'
 * published numbers ride along. */
static void test_table2_rows_are_runs(void) {
  cJSON *j = run_json("figure megatron-table2 --network analytic --format json");
  const cJSON *row;
  guint zero = 0, ptdp = 0;
  cJSON_ArrayForEach(row, arr(j, "rows")) {
    num(row, "published_tflops_per_gpu");
    num(row, "published_training_days");
    if (num(row, "zero") == 3) {
      zero++;
      g_assert_cmpfloat(num(row, "tp"), ==, 1);
      g_assert_cmpfloat(num(row, "pp"), ==, 1);
    } else
      ptdp++;
    if (zero == 1 && num(row, "zero") == 3) {
      char *line = g_strdup_printf("run --model gpt3-175b --gpus %.0f --tp 1 --pp 1 --zero 3 --global-batch %.0f "
                                   "--micro-batch %.0f --network analytic --tokens 300B --allow-oom --format json",
                                   num(row, "gpus"), num(row, "global_batch"), num(row, "micro_batch"));
      cJSON *r = run_json(line);
      g_assert_cmpfloat(num(r, "tflops_per_gpu"), ==, num(row, "tflops_per_gpu"));
      g_assert_cmpfloat(num(r, "training_days"), ==, num(row, "training_days"));
      cJSON_Delete(r);
      g_free(line);
    }
  }
  g_assert_cmpuint(zero, ==, 6);
  g_assert_cmpuint(ptdp, ==, 6);
  cJSON_Delete(j);
}

static gint by_name(gconstpointer a, gconstpointer b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The files of a directory, sorted. */
static GPtrArray *dir_files(const char *dir) {
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  GDir *d = g_dir_open(dir, 0, NULL);
  if (d) {
    const char *n;
    while ((n = g_dir_read_name(d)))
      g_ptr_array_add(names, g_strdup(n));
    g_dir_close(d);
  }
  g_ptr_array_sort(names, by_name);
  return names;
}

static void assert_same_file(const char *a, const char *b) {
  gsize la, lb;
  char *ta = slurp(a, &la), *tb = slurp(b, &lb);
  g_assert_cmpuint(la, ==, lb);
  g_assert_true(memcmp(ta, tb, la) == 0);
  g_free(ta);
  g_free(tb);
}

/* Why: --save-traces keeps one trace per configuration simulated, and
 * --from-traces rebuilds the table, the CSV, the JSON and the pictures from
 * them alone, to the byte (PTD-P's figure 7 in every build; its figure 12
 * and TeraPipe's figure 7, whole figures of large runs, in the plain one). */
static void test_from_traces(gconstpointer data) {
  const char *name = data;
  if (strcmp(name, "megatron-fig7") != 0 && test_plain_only(name))
    return;
  char *direct = tmp_path("direct"), *saved = tmp_path("saved"), *rebuilt = tmp_path("rebuilt");
  char *traces = g_strdup_printf("%s/%s-traces", tmpdir, name);
  char *a = g_strdup_printf("-o %s", direct), *b = g_strdup_printf("-o %s --save-traces %s", saved, traces),
       *c = g_strdup_printf("-o %s --from-traces %s", rebuilt, traces);
  Proc pa = figure(name, a), pb = figure(name, b), pc = figure(name, c);
  g_assert_cmpint(pa.status, ==, 0);
  g_assert_cmpint(pb.status, ==, 0);
  if (pc.status != 0)
    g_test_message("stderr: %s", pc.err);
  g_assert_cmpint(pc.status, ==, 0);
  g_assert_cmpstr(pa.out, ==, pc.out);
  g_assert_cmpstr(pa.out, ==, pb.out);
  GPtrArray *tr = dir_files(traces);
  g_assert_cmpuint(tr->len, >, 4);
  for (guint i = 0; i < tr->len; i++) {
    char *want = g_strdup_printf("%s.%04u.json.gz", name, i);
    g_assert_cmpstr(g_ptr_array_index(tr, i), ==, want);
    g_free(want);
  }
  static const char *const ext[] = {"json", "csv", "svg", "png"};
  for (guint i = 0; i < G_N_ELEMENTS(ext); i++) {
    char *fa = g_strdup_printf("%s/%s.%s", direct, name, ext[i]), *fc = g_strdup_printf("%s/%s.%s", rebuilt, name, ext[i]);
    assert_same_file(fa, fc);
    g_free(fa);
    g_free(fc);
  }
  g_ptr_array_free(tr, TRUE);
  proc_clear(&pa);
  proc_clear(&pb);
  proc_clear(&pc);
  g_free(a);
  g_free(b);
  g_free(c);
  g_free(traces);
  g_free(direct);
  g_free(saved);
  g_free(rebuilt);
}

static void copy_file(const char *from, const char *to, gsize keep) {
  gsize len;
  char *bytes = slurp(from, &len);
  GError *error = NULL;
  g_assert_true(g_file_set_contents(to, bytes, (gssize)MIN(len, keep), &error));
  g_assert_no_error(error);
  g_free(bytes);
}

/* Why: a trace directory that does not hold this figure's traces as it runs
 * now -- a file missing, two swapped, one cut short -- is refused in one
 * line naming the file, and -o gets nothing. */
static void test_bad_traces(void) {
  char *good = tmp_path("fig7-traces"), *bad = tmp_path("fig7-bad"), *out = tmp_path("fig7-out");
  char *save = g_strdup_printf("--save-traces %s", good);
  Proc p = figure("megatron-fig7", save);
  g_assert_cmpint(p.status, ==, 0);
  proc_clear(&p);
  g_mkdir_with_parents(bad, 0777);
  char *t0 = g_strdup_printf("%s/megatron-fig7.0000.json.gz", good), *t1 = g_strdup_printf("%s/megatron-fig7.0001.json.gz", good);
  char *b0 = g_strdup_printf("%s/megatron-fig7.0000.json.gz", bad), *b1 = g_strdup_printf("%s/megatron-fig7.0001.json.gz", bad);
  char *from = g_strdup_printf("--from-traces %s -o %s", bad, out);
  /* nothing there */
  p = figure("megatron-fig7", from);
  assert_one_line_error(&p, b0);
  g_assert_nonnull(strstr(p.err, "no such file"));
  proc_clear(&p);
  /* configurations 0 and 1 swapped: microbatch 2's trace where 1's belongs */
  copy_file(t1, b0, G_MAXSIZE);
  copy_file(t0, b1, G_MAXSIZE);
  p = figure("megatron-fig7", from);
  assert_one_line_error(&p, "is not configuration 0 of figure megatron-fig7");
  g_assert_nonnull(strstr(p.err, b0));
  g_assert_nonnull(strstr(p.err, "micro_batch: 1 for this figure, 2 in the trace"));
  proc_clear(&p);
  /* cut short */
  copy_file(t0, b0, 300);
  p = figure("megatron-fig7", from);
  assert_one_line_error(&p, b0);
  proc_clear(&p);
  /* another cluster than the traces were made on */
  char *other = g_strdup_printf("--from-traces %s -o %s --cluster dgx-h100-superpod", good, out);
  p = figure("megatron-fig7", other);
  assert_one_line_error(&p, "is not configuration 0 of figure megatron-fig7");
  proc_clear(&p);
  g_assert_false(g_file_test(out, G_FILE_TEST_EXISTS));
  /* the options themselves */
  char *both = g_strdup_printf("--from-traces %s --save-traces %s", good, bad);
  p = figure("megatron-fig7", both);
  assert_one_line_error(&p, "exclude each other");
  proc_clear(&p);
  p = figure("megatron-fig7", "--from-traces /nonexistent/traces");
  assert_one_line_error(&p, "is not a directory");
  proc_clear(&p);
  char *file_out = g_strdup_printf("-o %s", t0);
  p = figure("megatron-fig7", file_out);
  assert_one_line_error(&p, "is a file");
  proc_clear(&p);
  g_free(file_out);
  g_free(both);
  g_free(other);
  g_free(from);
  g_free(t0);
  g_free(t1);
  g_free(b0);
  g_free(b1);
  g_free(save);
  g_free(good);
  g_free(bad);
  g_free(out);
}

/* Why: pictures are artefacts people commit and diff: the same figure gives
 * the same bytes. */
static void test_deterministic(void) {
  char *a = tmp_path("det-a"), *b = tmp_path("det-b");
  char *oa = g_strdup_printf("-o %s", a), *ob = g_strdup_printf("-o %s", b);
  Proc pa = figure("megatron-fig13", oa), pb = figure("megatron-fig13", ob);
  g_assert_cmpint(pa.status, ==, 0);
  g_assert_cmpint(pb.status, ==, 0);
  static const char *const ext[] = {"json", "csv", "svg", "png"};
  for (guint i = 0; i < G_N_ELEMENTS(ext); i++) {
    char *fa = g_strdup_printf("%s/megatron-fig13.%s", a, ext[i]), *fb = g_strdup_printf("%s/megatron-fig13.%s", b, ext[i]);
    assert_same_file(fa, fb);
    g_free(fa);
    g_free(fb);
  }
  proc_clear(&pa);
  proc_clear(&pb);
  g_free(oa);
  g_free(ob);
  g_free(a);
  g_free(b);
}

/* Why: the listing names every figure the issue of the papers' figures
 * asks for, and --all refuses what it cannot honour. */
static void test_list_and_all(void) {
  Proc p = run_line("figure --list");
  g_assert_cmpint(p.status, ==, 0);
  static const char *const names[] = {"megatron-table1", "megatron-table2", "megatron-fig6",  "megatron-fig7",
                                      "megatron-fig8",   "megatron-fig10",  "megatron-fig11", "megatron-fig12",
                                      "megatron-fig13",  "megatron-fig14",  "megatron-fig15", "megatron-fig16",
                                      "megatron-fig17",  "megatron-fig18",  "terapipe-fig3",  "terapipe-fig5",
                                      "terapipe-fig6",   "terapipe-fig7"};
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    char *line = g_strdup_printf("%s ", names[i]);
    g_assert_true(g_str_has_prefix(p.out, line) || strstr(p.out, line));
    g_free(line);
  }
  proc_clear(&p);
  p = run_line("figure --all megatron-fig7");
  assert_one_line_error(&p, "--all runs every figure");
  proc_clear(&p);
  p = run_line("figure --all --format json");
  assert_one_line_error(&p, "use -o DIR");
  proc_clear(&p);
  p = run_line("figure --all --cluster selene");
  assert_one_line_error(&p, "drop --cluster");
  proc_clear(&p);
  p = run_line("figure megatron-fig99");
  assert_one_line_error(&p, "unknown figure 'megatron-fig99'");
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

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  const char *data = g_getenv("PTDSIM_DATA_DIR");
  char *ref_path = g_build_filename(data ? data : ".", "traces", "reference", "megatron-sc21.json", NULL);
  gsize len;
  char *text = slurp(ref_path, &len);
  reference = cJSON_Parse(text);
  g_assert_nonnull(reference);
  g_free(text);
  g_free(ref_path);
  tmpdir = test_tmp_dir("ptdsim-figures");
  static const char *const figures[] = {"megatron-table2", "megatron-fig6",  "megatron-fig7",  "megatron-fig8",
                                        "megatron-fig10",  "megatron-fig11", "megatron-fig12", "megatron-fig13",
                                        "megatron-fig14",  "megatron-fig15", "megatron-fig16", "megatron-fig17",
                                        "megatron-fig18"};
  for (guint i = 0; i < G_N_ELEMENTS(figures); i++) {
    char *path = g_strconcat("/figures/outputs/", figures[i], NULL);
    g_test_add_data_func(path, figures[i], test_outputs);
    g_free(path);
  }
  g_test_add_func("/figures/fig6-exact", test_fig6_exact);
  g_test_add_func("/figures/fig8-is-equation-1", test_fig8_is_equation_1);
  g_test_add_func("/figures/table2-rows-are-runs", test_table2_rows_are_runs);
  g_test_add_data_func("/figures/from-traces/megatron-fig7", "megatron-fig7", test_from_traces);
  g_test_add_data_func("/figures/from-traces/megatron-fig12", "megatron-fig12", test_from_traces);
  g_test_add_data_func("/figures/from-traces/terapipe-fig7", "terapipe-fig7", test_from_traces);
  g_test_add_func("/figures/bad-traces", test_bad_traces);
  g_test_add_func("/figures/deterministic", test_deterministic);
  g_test_add_func("/figures/list-and-all", test_list_and_all);
  int rc = g_test_run();
  rm_rf(tmpdir);
  g_free(tmpdir);
  cJSON_Delete(reference);
  return rc;
}
