/* ptdsim — the schedule diagrams end to end through the real binary
 * ($PTDSIM_BIN): each figure's boxes obey its schedule's order (GPipe's
 * flush, 1F1B's bounded warm-up and strict alternation, interleaving's two
 * chunks and smaller bubble, TeraPipe's slices flowing cell to cell), the
 * rows are the boxes, the pictures are written and show the chunk shades,
 * and a figure rebuilt from its saved traces is the same to the byte. */
#include <cairo.h>
#include <cjson/cJSON.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "../plot/plot.h"
#include "cli_harness.h"
#include "test_tmp.h"

static char *tmpdir;

/* One row of a diagram's CSV/JSON: a box. */
typedef struct {
  int device; /* or TeraPipe cell, from 1 */
  gboolean backward;
  int item;   /* microbatch or token slice, from 1 */
  int chunk;  /* from 1; 1 for TeraPipe */
  double start, end;
} Row;

/* The rows of `json` whose schedule is `schedule`, in the order given. */
static GArray *rows_of(const cJSON *json, const char *schedule, const char *row_key, const char *item_key) {
  GArray *out = g_array_new(FALSE, FALSE, sizeof(Row));
  const cJSON *r;
  cJSON_ArrayForEach(r, arr(json, "rows")) {
    if (strcmp(str(r, "schedule"), schedule) != 0)
      continue;
    const char *pass = str(r, "pass");
    g_assert_true(strcmp(pass, "forward") == 0 || strcmp(pass, "backward") == 0);
    const cJSON *chunk = cJSON_GetObjectItemCaseSensitive(r, "chunk");
    Row row = {(int)num(r, row_key), strcmp(pass, "backward") == 0, (int)num(r, item_key),
               cJSON_IsNumber(chunk) ? (int)chunk->valuedouble : 1, num(r, "start_s"), num(r, "end_s")};
    g_assert_cmpfloat(row.end, >, row.start);
    g_array_append_val(out, row);
  }
  return out;
}

/* The rows of one device, sorted by start. */
static gint by_start(gconstpointer pa, gconstpointer pb) {
  const Row *a = pa, *b = pb;
  return a->start < b->start ? -1 : a->start > b->start;
}

static GArray *device_rows(const GArray *rows, int device) {
  GArray *out = g_array_new(FALSE, FALSE, sizeof(Row));
  for (guint i = 0; i < rows->len; i++)
    if (g_array_index(rows, Row, i).device == device)
      g_array_append_val(out, g_array_index(rows, Row, i));
  g_array_sort(out, by_start);
  return out;
}

/* Every (device, pass, item, chunk) appears exactly once, for devices 1..p,
 * items 1..m and chunks 1..v; one device's boxes never overlap. */
static void assert_complete(const GArray *rows, int p, int m, int v) {
  g_assert_cmpuint(rows->len, ==, (guint)(p * m * 2 * v));
  guint8 *seen = g_new0(guint8, (gsize)(p * m * 2 * v));
  for (guint i = 0; i < rows->len; i++) {
    const Row *r = &g_array_index(rows, Row, i);
    g_assert_cmpint(r->device, >=, 1);
    g_assert_cmpint(r->device, <=, p);
    g_assert_cmpint(r->item, >=, 1);
    g_assert_cmpint(r->item, <=, m);
    g_assert_cmpint(r->chunk, >=, 1);
    g_assert_cmpint(r->chunk, <=, v);
    gsize k = (((gsize)(r->device - 1) * 2 + (gsize)r->backward) * (gsize)v + (gsize)(r->chunk - 1)) * (gsize)m +
              (gsize)(r->item - 1);
    g_assert_cmpuint(seen[k], ==, 0);
    seen[k] = 1;
  }
  g_free(seen);
  for (int d = 1; d <= p; d++) {
    GArray *dev = device_rows(rows, d);
    for (guint i = 1; i < dev->len; i++)
      g_assert_cmpfloat(g_array_index(dev, Row, i).start, >=, g_array_index(dev, Row, i - 1).end);
    g_array_unref(dev);
  }
}

/* The figure's summary of `label`: its boxes equal its rows. */
static const cJSON *summary(const cJSON *json, const char *label) {
  const cJSON *s;
  cJSON_ArrayForEach(s, arr(json, "schedules")) {
    if (strcmp(str(s, "label"), label) == 0)
      return s;
  }
  g_assert_not_reached();
  return NULL;
}

/* Why: SC21 figure 3 is GPipe: 4 devices x 8 microbatches x 2 passes, and
 * on every device every forward ends before any backward starts (the
 * flush); the figure's configuration is the one it says. */
static void test_fig3_gpipe(void) {
  cJSON *j = run_json("figure megatron-fig3 --format json");
  g_assert_cmpstr(str(j, "figure"), ==, "megatron-fig3");
  const cJSON *s = summary(j, "GPipe");
  const cJSON *cfg = obj(s, "config");
  g_assert_cmpfloat(num(cfg, "pp"), ==, 4);
  g_assert_cmpfloat(num(cfg, "microbatches"), ==, 8);
  g_assert_cmpstr(str(cfg, "schedule"), ==, "gpipe");
  GArray *rows = rows_of(j, "gpipe", "device", "microbatch");
  assert_complete(rows, 4, 8, 1);
  g_assert_cmpint(cJSON_GetArraySize(arr(j, "rows")), ==, 4 * 8 * 2);
  g_assert_cmpfloat(num(s, "boxes"), ==, rows->len);
  for (int d = 1; d <= 4; d++) {
    double last_forward_end = 0, first_backward_start = INFINITY;
    for (guint i = 0; i < rows->len; i++) {
      const Row *r = &g_array_index(rows, Row, i);
      if (r->device != d)
        continue;
      if (r->backward)
        first_backward_start = fmin(first_backward_start, r->start);
      else
        last_forward_end = fmax(last_forward_end, r->end);
    }
    g_assert_cmpfloat(last_forward_end, <=, first_backward_start);
  }
  g_assert_cmpfloat(num(s, "bubble_fraction"), >, 0);
  g_assert_cmpfloat(num(s, "flush_s"), <=, num(s, "iteration_time_s"));
  g_array_unref(rows);
  cJSON_Delete(j);
}

/* Why: in 1F1B the first device runs at most p forwards before its first
 * backward (what bounds its stashed activations), and the last device
 * alternates strictly F1 B1 F2 B2 ... F8 B8. */
static void test_fig4_1f1b(void) {
  cJSON *j = run_json("figure megatron-fig4 --format json");
  GArray *rows = rows_of(j, "1f1b", "device", "microbatch");
  assert_complete(rows, 4, 8, 1);
  g_assert_cmpfloat(num(summary(j, "1F1B"), "boxes"), ==, rows->len);

  GArray *first = device_rows(rows, 1);
  guint forwards = 0;
  while (forwards < first->len && !g_array_index(first, Row, forwards).backward)
    forwards++;
  g_assert_cmpuint(forwards, >=, 1);
  g_assert_cmpuint(forwards, <=, 4);
  g_array_unref(first);

  GArray *last = device_rows(rows, 4);
  g_assert_cmpuint(last->len, ==, 16);
  for (guint i = 0; i < last->len; i++) {
    const Row *r = &g_array_index(last, Row, i);
    g_assert_cmpint(r->backward, ==, (int)(i % 2));
    g_assert_cmpint(r->item, ==, (int)(i / 2) + 1);
  }
  g_array_unref(last);
  g_array_unref(rows);
  cJSON_Delete(j);
}

/* Why: interleaving gives each device two model chunks, each chunk's
 * forward and backward of every microbatch; with the same model, p and m,
 * its iteration is shorter and its measured bubble smaller than 1F1B's, as
 * (p-1)/(v m) < (p-1)/m says.  The rows are exactly the boxes of both. */
static void test_fig4_interleaved(void) {
  cJSON *j = run_json("figure megatron-fig4 --format json");
  const cJSON *one = summary(j, "1F1B"), *inter = summary(j, "interleaved 1F1B");
  g_assert_cmpfloat(num(obj(inter, "config"), "chunks"), ==, 2);
  g_assert_cmpfloat(num(obj(inter, "config"), "layers"), ==, num(obj(one, "config"), "layers"));
  g_assert_cmpfloat(num(obj(inter, "config"), "microbatches"), ==, num(obj(one, "config"), "microbatches"));
  GArray *rows = rows_of(j, "interleaved", "device", "microbatch");
  assert_complete(rows, 4, 8, 2);
  g_assert_cmpfloat(num(inter, "boxes"), ==, rows->len);
  for (int d = 1; d <= 4; d++) {
    int chunks_seen[3] = {0};
    for (guint i = 0; i < rows->len; i++)
      if (g_array_index(rows, Row, i).device == d)
        chunks_seen[g_array_index(rows, Row, i).chunk]++;
    g_assert_cmpint(chunks_seen[1], ==, 16);
    g_assert_cmpint(chunks_seen[2], ==, 16);
  }
  g_assert_cmpint(cJSON_GetArraySize(arr(j, "rows")), ==, (int)(num(one, "boxes") + num(inter, "boxes")));
  g_assert_cmpfloat(num(inter, "iteration_time_s"), <, num(one, "iteration_time_s"));
  g_assert_cmpfloat(num(inter, "flush_s"), <, num(one, "flush_s"));
  g_assert_cmpfloat(num(inter, "bubble_fraction"), <, num(one, "bubble_fraction"));
  g_assert_cmpfloat(num(inter, "analytic_bubble_fraction"), <, num(one, "analytic_bubble_fraction"));
  g_array_unref(rows);
  cJSON_Delete(j);
}

static const Row *find(const GArray *rows, int device, gboolean backward, int item) {
  for (guint i = 0; i < rows->len; i++) {
    const Row *r = &g_array_index(rows, Row, i);
    if (r->device == device && r->backward == backward && r->item == item)
      return r;
  }
  g_assert_not_reached();
  return NULL;
}

/* Why: TeraPipe pipelines token slices: slice j's forward on cell k+1
 * starts only after it ends on cell k, and its backward flows the other
 * way; a later slice attends to a longer context, so its forward is no
 * shorter (equal where the host's launches pace it: to the engine's
 * nanosecond, the durations being differences of times in seconds). */
static void test_terapipe(void) {
  cJSON *j = run_json("figure terapipe-schedule --format json");
  const cJSON *s = summary(j, "TeraPipe");
  int cells = (int)num(obj(s, "config"), "pp");
  GArray *rows = rows_of(j, "terapipe", "cell", "slice");
  g_assert_cmpint(cells, ==, 4);
  g_assert_cmpuint(rows->len % (guint)(2 * cells), ==, 0);
  int slices = (int)rows->len / (2 * cells);
  g_assert_cmpint(slices, >=, 4);
  assert_complete(rows, cells, slices, 1);
  g_assert_cmpfloat(num(s, "boxes"), ==, rows->len);
  for (int k = 1; k < cells; k++)
    for (int i = 1; i <= slices; i++) {
      g_assert_cmpfloat(find(rows, k + 1, FALSE, i)->start, >=, find(rows, k, FALSE, i)->end);
      g_assert_cmpfloat(find(rows, k, TRUE, i)->start, >=, find(rows, k + 1, TRUE, i)->end);
    }
  for (int i = 2; i <= slices; i++) {
    const Row *a = find(rows, 1, FALSE, i - 1), *b = find(rows, 1, FALSE, i);
    g_assert_cmpfloat(b->end - b->start, >=, a->end - a->start - 1e-9);
  }
  g_array_unref(rows);
  cJSON_Delete(j);
}

/* --- the files --- */

static char *path_in(const char *dir, const char *name) { return g_build_filename(tmpdir, dir, name, NULL); }

static char *read_text(const char *path) {
  char *text = NULL;
  GError *error = NULL;
  g_file_get_contents(path, &text, NULL, &error);
  g_assert_no_error(error);
  return text;
}

static void run_ok(const char *const *args) {
  Proc p = run_argv(args);
  if (p.status != 0)
    g_printerr("%s", p.err);
  g_assert_cmpint(p.status, ==, 0);
  proc_clear(&p);
}

/* The largest area of one colour that is `rgb` mixed with white (a
 * lighter shade, between 25% and 85% white), in pixels: a box class, not
 * the anti-aliased edges of labels, which spread over many colours. */
static guint shade_area(cairo_surface_t *s, guint32 rgb) {
  GHashTable *count = g_hash_table_new(g_direct_hash, g_direct_equal);
  int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s),
      stride = cairo_image_surface_get_stride(s);
  const guint8 *data = cairo_image_surface_get_data(s);
  guint best = 0;
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      guint32 px = *(const guint32 *)(data + (gsize)y * (gsize)stride + (gsize)x * 4) & 0xffffff;
      double f = NAN;
      gboolean mix = TRUE;
      for (int shift = 0; shift <= 16 && mix; shift += 8) {
        double c = (rgb >> shift) & 0xff, v = (px >> shift) & 0xff;
        if (c > 250)
          continue;
        double g = (v - c) / (255 - c);
        mix = isnan(f) || fabs(g - f) < 0.02;
        f = isnan(f) ? g : f;
      }
      if (!mix || !(f > 0.25 && f < 0.85))
        continue;
      guint n = GPOINTER_TO_UINT(g_hash_table_lookup(count, GUINT_TO_POINTER(px))) + 1;
      g_hash_table_insert(count, GUINT_TO_POINTER(px), GUINT_TO_POINTER(n));
      best = MAX(best, n);
    }
  g_hash_table_unref(count);
  return best;
}

/* Why: -o writes the four files, the PNG a real 1400 px wide picture and
 * the CSV one line per row; in figure 4 the second chunk's forward and
 * backward are drawn in lighter shades of their colours (boxes of
 * thousands of pixels), which figure 3, with one chunk, has none of. */
static void test_files(void) {
  static const char *const names[] = {"megatron-fig3", "megatron-fig4", "terapipe-schedule"};
  char *out = g_build_filename(tmpdir, "direct", NULL);
  guint areas[2][2] = {{0}};
  for (guint f = 0; f < G_N_ELEMENTS(names); f++) {
    const char *args[] = {"figure", names[f], "-o", out, NULL};
    run_ok(args);
    static const char *const ext[] = {"json", "csv", "svg", "png"};
    for (guint e = 0; e < G_N_ELEMENTS(ext); e++) {
      char *file = g_strdup_printf("%s.%s", names[f], ext[e]);
      char *path = path_in("direct", file);
      g_assert_true(g_file_test(path, G_FILE_TEST_IS_REGULAR));
      g_free(file);
      g_free(path);
    }
    char *file = g_strdup_printf("%s.json", names[f]);
    char *path = path_in("direct", file);
    char *text = read_text(path);
    cJSON *j = cJSON_Parse(text);
    g_assert_nonnull(j);
    guint rows = (guint)cJSON_GetArraySize(arr(j, "rows"));
    cJSON_Delete(j);
    g_free(text);
    g_free(path);
    g_free(file);
    file = g_strdup_printf("%s.csv", names[f]);
    path = path_in("direct", file);
    text = read_text(path);
    guint lines = 0;
    for (const char *c = text; *c; c++)
      lines += *c == '\n';
    g_assert_cmpuint(lines, ==, rows + 1);
    g_free(text);
    g_free(path);
    g_free(file);
    file = g_strdup_printf("%s.png", names[f]);
    path = path_in("direct", file);
    cairo_surface_t *png = cairo_image_surface_create_from_png(path);
    g_assert_cmpint(cairo_surface_status(png), ==, CAIRO_STATUS_SUCCESS);
    g_assert_cmpint(cairo_image_surface_get_width(png), ==, TRACE_GANTT_WIDTH);
    if (f < 2)
      for (guint pass = 0; pass < 2; pass++)
        areas[f][pass] = shade_area(png, trace_plot_palette_rgb(pass == 0 ? 0 : 2));
    cairo_surface_destroy(png);
    g_free(path);
    g_free(file);
  }
  for (guint pass = 0; pass < 2; pass++) {
    g_assert_cmpuint(areas[0][pass], <, 2000);
    g_assert_cmpuint(areas[1][pass], >, 5000);
  }
  g_free(out);
}

/* Why: the diagram is read off the trace, so --from-traces rebuilds it
 * from the saved traces alone: the same CSV and PNG as simulating. */
static void test_from_traces(void) {
  char *direct = g_build_filename(tmpdir, "fig4-direct", NULL), *saved = g_build_filename(tmpdir, "fig4-save", NULL),
       *rebuilt = g_build_filename(tmpdir, "fig4-rebuilt", NULL), *traces = g_build_filename(tmpdir, "traces", NULL);
  const char *a[] = {"figure", "megatron-fig4", "-o", direct, NULL};
  const char *b[] = {"figure", "megatron-fig4", "--save-traces", traces, "-o", saved, NULL};
  const char *c[] = {"figure", "megatron-fig4", "--from-traces", traces, "-o", rebuilt, NULL};
  run_ok(a);
  run_ok(b);
  run_ok(c);
  static const char *const files[] = {"megatron-fig4.csv", "megatron-fig4.png"};
  for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
    char *pa = path_in("fig4-direct", files[i]), *pb = path_in("fig4-save", files[i]),
         *pc = path_in("fig4-rebuilt", files[i]);
    gchar *ta, *tb, *tc;
    gsize na, nb, nc;
    g_assert_true(g_file_get_contents(pa, &ta, &na, NULL));
    g_assert_true(g_file_get_contents(pb, &tb, &nb, NULL));
    g_assert_true(g_file_get_contents(pc, &tc, &nc, NULL));
    g_assert_cmpmem(ta, na, tb, nb);
    g_assert_cmpmem(ta, na, tc, nc);
    g_free(ta);
    g_free(tb);
    g_free(tc);
    g_free(pa);
    g_free(pb);
    g_free(pc);
  }
  g_free(direct);
  g_free(saved);
  g_free(rebuilt);
  g_free(traces);
}

/* Removes `dir` and what it holds (one level of folders below tmpdir). */
static void remove_tree(const char *dir) {
  GDir *d = g_dir_open(dir, 0, NULL);
  const char *n;
  while (d && (n = g_dir_read_name(d))) {
    char *f = g_build_filename(dir, n, NULL);
    if (g_file_test(f, G_FILE_TEST_IS_DIR))
      remove_tree(f);
    else
      g_unlink(f);
    g_free(f);
  }
  if (d)
    g_dir_close(d);
  g_rmdir(dir);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  GError *error = NULL;
  tmpdir = test_tmp_dir("ptdsim-diagrams");
  g_assert_no_error(error);
  g_test_add_func("/diagrams/fig3-gpipe", test_fig3_gpipe);
  g_test_add_func("/diagrams/fig4-1f1b", test_fig4_1f1b);
  g_test_add_func("/diagrams/fig4-interleaved", test_fig4_interleaved);
  g_test_add_func("/diagrams/terapipe", test_terapipe);
  g_test_add_func("/diagrams/files", test_files);
  g_test_add_func("/diagrams/from-traces", test_from_traces);
  int rc = g_test_run();
  remove_tree(tmpdir);
  g_free(tmpdir);
  return rc;
}
