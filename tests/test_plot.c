/* ptdsim — tests of the chart and schedule pictures (plot/plot.c).  The
 * PNGs are decoded back with cairo and probed at pixels whose place the
 * module itself reports (trace_plot_pixel, trace_gantt_pixel); the SVGs are
 * parsed with GMarkup. */
#include <cairo.h>
#include <glib.h>
#include <math.h>
#include <string.h>

#include "../plot/plot.h"

/* ------------------------------------------------------------------ */
/* Reading the pictures back */

typedef struct {
  const guint8 *data;
  gsize len, at;
} Reader;

static cairo_status_t read_bytes(void *closure, unsigned char *out, unsigned int length) {
  Reader *r = closure;
  if (r->len - r->at < length)
    return CAIRO_STATUS_READ_ERROR;
  memcpy(out, r->data + r->at, length);
  r->at += length;
  return CAIRO_STATUS_SUCCESS;
}

/* Decodes a PNG, checking its signature on the way. */
static cairo_surface_t *decode_png(GBytes *png) {
  static const guint8 signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  g_assert_nonnull(png);
  Reader r = {0};
  r.data = g_bytes_get_data(png, &r.len);
  g_assert_cmpuint(r.len, >, sizeof signature);
  g_assert_cmpmem(r.data, sizeof signature, signature, sizeof signature);
  cairo_surface_t *s = cairo_image_surface_create_from_png_stream(read_bytes, &r);
  g_assert_cmpint(cairo_surface_status(s), ==, CAIRO_STATUS_SUCCESS);
  return s;
}

/* The colour at (x, y) as 0xRRGGBB (the pictures are opaque RGB). */
static guint32 pixel_at(cairo_surface_t *s, double x, double y) {
  int ix = (int)floor(x), iy = (int)floor(y);
  g_assert_cmpint(ix, >=, 0);
  g_assert_cmpint(iy, >=, 0);
  g_assert_cmpint(ix, <, cairo_image_surface_get_width(s));
  g_assert_cmpint(iy, <, cairo_image_surface_get_height(s));
  cairo_surface_flush(s);
  const guint8 *row = cairo_image_surface_get_data(s) + (gsize)iy * (gsize)cairo_image_surface_get_stride(s);
  guint32 v;
  memcpy(&v, row + 4 * ix, sizeof v);
  return v & 0xffffff;
}

typedef struct {
  int depth;
  char *root;
  char *width, *height;
} SvgRoot;

static void svg_start(GMarkupParseContext *ctx, const char *name, const char **attr_names, const char **attr_values,
                      gpointer data, GError **error) {
  (void)ctx;
  (void)error;
  SvgRoot *r = data;
  if (r->depth++ > 0)
    return;
  r->root = g_strdup(name);
  for (guint i = 0; attr_names[i]; i++) {
    if (strcmp(attr_names[i], "width") == 0)
      r->width = g_strdup(attr_values[i]);
    else if (strcmp(attr_names[i], "height") == 0)
      r->height = g_strdup(attr_values[i]);
  }
}

static void svg_end(GMarkupParseContext *ctx, const char *name, gpointer data, GError **error) {
  (void)ctx;
  (void)name;
  (void)error;
  ((SvgRoot *)data)->depth--;
}

/* Parses the SVG as XML (failing the test when it is not well formed) and
 * checks the root element and its size. */
static void check_svg(GBytes *svg, int width, int height) {
  g_assert_nonnull(svg);
  gsize len;
  const char *text = g_bytes_get_data(svg, &len);
  GMarkupParser parser = {.start_element = svg_start, .end_element = svg_end};
  SvgRoot r = {0};
  GMarkupParseContext *ctx = g_markup_parse_context_new(&parser, 0, &r, NULL);
  GError *error = NULL;
  g_markup_parse_context_parse(ctx, text, (gssize)len, &error);
  g_assert_no_error(error);
  g_markup_parse_context_end_parse(ctx, &error);
  g_assert_no_error(error);
  g_markup_parse_context_free(ctx);
  g_assert_cmpint(r.depth, ==, 0);
  g_assert_cmpstr(r.root, ==, "svg");
  char *w = g_strdup_printf("%d", width), *h = g_strdup_printf("%d", height);
  g_assert_cmpstr(r.width, ==, w);
  g_assert_cmpstr(r.height, ==, h);
  g_free(w);
  g_free(h);
  g_free(r.root);
  g_free(r.width);
  g_free(r.height);
}

/* ------------------------------------------------------------------ */
/* Sample pictures */

static TracePlot *line_chart(void) {
  static const double gpus[] = {64, 128, 256, 512, 1024, 2048};
  static const double a[] = {135, 138, 140, 142, 140, 138}, b[] = {120, 125, 127, NAN, 130, 131};
  static const double pub[] = {138, 141, 141, 143, 139, 138};
  TracePlot *p = trace_plot_new(TRACE_PLOT_LINES, "Weak scaling", "GPUs", "TFLOP/s per GPU");
  trace_plot_set_subtitle(p, "GPT 1.7B .. 1T, seq 2048, interleaved 1F1B");
  trace_plot_set_x_log2(p, TRUE);
  trace_plot_add_series(p, "simulated", gpus, a, G_N_ELEMENTS(gpus));
  trace_plot_add_series(p, "simulated (no overlap)", gpus, b, G_N_ELEMENTS(gpus));
  trace_plot_add_reference(p, NULL, gpus, pub, G_N_ELEMENTS(gpus));
  return p;
}

static TracePlot *bar_chart(void) {
  static const char *const cats[] = {"1", "2", "4", "8", "16"};
  static const double a[] = {1.0, 1.8, 3.1, 4.9, 6.0}, b[] = {0.9, 1.7, 2.8, 4.2, 5.5};
  TracePlot *p = trace_plot_new(TRACE_PLOT_BARS, "Microbatch size", "microbatch size", "throughput (seq/s)");
  trace_plot_set_categories(p, cats, G_N_ELEMENTS(cats));
  trace_plot_add_series(p, "1F1B", NULL, a, G_N_ELEMENTS(a));
  trace_plot_add_series(p, "GPipe", NULL, b, G_N_ELEMENTS(b));
  return p;
}

static TraceGantt *gantt(void) {
  static const char *const rows[] = {"GPU 0", "GPU 1"};
  TraceGantt *g = trace_gantt_new("1F1B", 2, rows, 0.040);
  guint fwd = trace_gantt_add_class(g, "forward", 0x0072B2), bwd = trace_gantt_add_class(g, "backward", 0xE69F00);
  trace_gantt_add_box(g, 0, 0.000, 0.010, fwd, "1");
  trace_gantt_add_box(g, 1, 0.010, 0.020, fwd, "1");
  trace_gantt_add_box(g, 1, 0.020, 0.040, bwd, "1");
  return g;
}

/* ------------------------------------------------------------------ */
/* Tests */

/* Why: the gallery and the papers' build read these files as PNG; a byte
 * stream that is not a PNG, or one of another size, breaks the page layout. */
static void test_png_format(void) {
  TracePlot *p = line_chart();
  GBytes *png = trace_plot_png(p);
  cairo_surface_t *s = decode_png(png);
  g_assert_cmpint(cairo_image_surface_get_width(s), ==, TRACE_PLOT_WIDTH);
  g_assert_cmpint(cairo_image_surface_get_height(s), ==, TRACE_PLOT_HEIGHT);
  cairo_surface_destroy(s);
  g_bytes_unref(png);
  trace_plot_free(p);

  TraceGantt *g = gantt();
  int w, h;
  trace_gantt_size(g, &w, &h);
  g_assert_cmpint(w, ==, TRACE_GANTT_WIDTH);
  /* Two rows of TRACE_GANTT_ROW_HEIGHT plus title, legend and axis. */
  g_assert_cmpint(h, >, 2 * TRACE_GANTT_ROW_HEIGHT);
  g_assert_cmpint(h, <, 2 * TRACE_GANTT_ROW_HEIGHT + 300);
  png = trace_gantt_png(g);
  s = decode_png(png);
  g_assert_cmpint(cairo_image_surface_get_width(s), ==, w);
  g_assert_cmpint(cairo_image_surface_get_height(s), ==, h);
  cairo_surface_destroy(s);
  g_bytes_unref(png);
  trace_gantt_free(g);
}

/* Why: a picture can be a valid PNG and still be blank or wrongly coloured;
 * the white background and a bar in the first palette colour, at the place
 * the layout gives, show that the drawing reached the pixels. */
static void test_png_pixels(void) {
  static const double one[] = {10};
  TracePlot *p = trace_plot_new(TRACE_PLOT_BARS, "One bar", "category", "value");
  trace_plot_add_series(p, NULL, NULL, one, 1);
  double x, y;
  g_assert_true(trace_plot_pixel(p, 0, 5, &x, &y)); /* the bar's middle: category 0, half its height */
  GBytes *png = trace_plot_png(p);
  cairo_surface_t *s = decode_png(png);
  g_assert_cmphex(pixel_at(s, 0, 0), ==, 0xffffff);
  g_assert_cmphex(pixel_at(s, TRACE_PLOT_WIDTH - 1, TRACE_PLOT_HEIGHT - 1), ==, 0xffffff);
  g_assert_cmphex(pixel_at(s, x, y), ==, trace_plot_palette_rgb(0));
  /* The bar is tall: a quarter of its height from its top is still bar. */
  double top;
  g_assert_true(trace_plot_pixel(p, 0, 9, NULL, &top));
  g_assert_cmphex(pixel_at(s, x, top), ==, trace_plot_palette_rgb(0));
  cairo_surface_destroy(s);
  g_bytes_unref(png);
  trace_plot_free(p);
}

/* Why: the SVGs are embedded in web pages and LaTeX; a malformed document
 * or one sized in points instead of pixels renders wrong or not at all. */
static void test_svg_wellformed(void) {
  TracePlot *p = line_chart();
  GBytes *svg = trace_plot_svg(p);
  check_svg(svg, TRACE_PLOT_WIDTH, TRACE_PLOT_HEIGHT);
  g_bytes_unref(svg);
  trace_plot_free(p);

  p = bar_chart();
  svg = trace_plot_svg(p);
  check_svg(svg, TRACE_PLOT_WIDTH, TRACE_PLOT_HEIGHT);
  g_bytes_unref(svg);
  trace_plot_free(p);

  TraceGantt *g = gantt();
  int w, h;
  trace_gantt_size(g, &w, &h);
  svg = trace_gantt_svg(g);
  check_svg(svg, w, h);
  g_bytes_unref(svg);
  trace_gantt_free(g);
}

/* Why: regenerated figures are committed; any byte that changes between two
 * runs of the same input (a timestamp, an address, an id) would show up as a
 * spurious change in every review. */
static void test_deterministic(void) {
  TracePlot *p1 = line_chart(), *p2 = line_chart();
  GBytes *a = trace_plot_png(p1), *b = trace_plot_png(p1), *c = trace_plot_png(p2);
  g_assert_true(g_bytes_equal(a, b));
  g_assert_true(g_bytes_equal(a, c));
  g_bytes_unref(a);
  g_bytes_unref(b);
  g_bytes_unref(c);
  a = trace_plot_svg(p1);
  b = trace_plot_svg(p1);
  c = trace_plot_svg(p2);
  g_assert_true(g_bytes_equal(a, b));
  g_assert_true(g_bytes_equal(a, c));
  g_bytes_unref(a);
  g_bytes_unref(b);
  g_bytes_unref(c);
  trace_plot_free(p1);
  trace_plot_free(p2);

  TraceGantt *g = gantt();
  a = trace_gantt_png(g);
  b = trace_gantt_png(g);
  g_assert_true(g_bytes_equal(a, b));
  g_bytes_unref(a);
  g_bytes_unref(b);
  a = trace_gantt_svg(g);
  b = trace_gantt_svg(g);
  g_assert_true(g_bytes_equal(a, b));
  g_bytes_unref(a);
  g_bytes_unref(b);
  trace_gantt_free(g);
}

/* Why: a schedule is read by its colours (forward, backward); each box must
 * be filled with its class colour at the row and time it was given. */
static void test_gantt_box_colour(void) {
  TraceGantt *g = gantt();
  GBytes *png = trace_gantt_png(g);
  cairo_surface_t *s = decode_png(png);
  double x, y;
  g_assert_true(trace_gantt_pixel(g, 0, 0.005, &x, &y));
  g_assert_cmphex(pixel_at(s, x, y - 10), ==, 0x0072B2); /* above the label "1" */
  g_assert_true(trace_gantt_pixel(g, 1, 0.030, &x, &y));
  g_assert_cmphex(pixel_at(s, x, y - 10), ==, 0xE69F00);
  /* Row 0 during the backward box of row 1: no box there. */
  g_assert_true(trace_gantt_pixel(g, 0, 0.030, &x, &y));
  g_assert_cmphex(pixel_at(s, x, y - 10), !=, 0xE69F00);
  g_assert_false(trace_gantt_pixel(g, 2, 0.010, &x, &y));
  cairo_surface_destroy(s);
  g_bytes_unref(png);
  trace_gantt_free(g);
}

static void render_all(const TracePlot *p) {
  GBytes *png = trace_plot_png(p), *svg = trace_plot_svg(p);
  cairo_surface_t *s = decode_png(png);
  cairo_surface_destroy(s);
  check_svg(svg, TRACE_PLOT_WIDTH, TRACE_PLOT_HEIGHT);
  g_bytes_unref(png);
  g_bytes_unref(svg);
}

/* Why: figures are drawn from whatever a sweep produced, including nothing
 * at all, failed points (NAN, inf), one point, or a flat line; none of these
 * may crash or produce a broken file. */
static void test_degenerate(void) {
  static const double nan3[] = {NAN, NAN, NAN}, inf3[] = {INFINITY, 3, -INFINITY}, flat[] = {7, 7, 7};
  static const double xs[] = {1, NAN, 4}, one[] = {5}, zero3[] = {0, 0, 0};
  static const double huge[] = {1e308, -1e308, 2}, huge_x[] = {1e308, 1, 2}, close[] = {1e15, 1e15 + 0.5, 1e15};
  for (int kind = TRACE_PLOT_LINES; kind <= TRACE_PLOT_BARS; kind++) {
    TracePlot *p = trace_plot_new(kind, NULL, NULL, NULL);
    render_all(p); /* empty: no series, no titles */
    trace_plot_add_series(p, NULL, NULL, nan3, 3);
    render_all(p);
    trace_plot_add_series(p, "inf", xs, inf3, 3);
    trace_plot_add_series(p, "one", NULL, one, 1);
    trace_plot_add_reference(p, "", NULL, nan3, 3);
    render_all(p);
    trace_plot_set_y_from_zero(p, FALSE);
    trace_plot_add_series(p, "flat", NULL, flat, 3);
    render_all(p);
    trace_plot_set_x_log2(p, TRUE); /* x = 0 cannot be placed on it */
    render_all(p);
    trace_plot_free(p);

    p = trace_plot_new(kind, "zeros", "x", "y");
    trace_plot_add_series(p, "zero", NULL, zero3, 3);
    trace_plot_set_categories(p, NULL, 0);
    render_all(p);
    trace_plot_free(p);

    /* Values at the edge of double, and a span below double's resolution. */
    p = trace_plot_new(kind, "extremes", "x", "y");
    trace_plot_set_y_from_zero(p, FALSE);
    trace_plot_add_series(p, "huge", huge_x, huge, 3);
    trace_plot_add_series(p, "close", NULL, close, 3);
    render_all(p);
    trace_plot_free(p);
  }
  /* A single point still draws its marker. */
  TracePlot *p = trace_plot_new(TRACE_PLOT_LINES, "one point", NULL, NULL);
  trace_plot_set_y_from_zero(p, FALSE);
  trace_plot_add_series(p, NULL, one, one, 1);
  double x, y;
  g_assert_true(trace_plot_pixel(p, 5, 5, &x, &y));
  GBytes *png = trace_plot_png(p);
  cairo_surface_t *s = decode_png(png);
  g_assert_cmphex(pixel_at(s, x, y), ==, trace_plot_palette_rgb(0));
  cairo_surface_destroy(s);
  g_bytes_unref(png);
  trace_plot_free(p);

  TraceGantt *g = trace_gantt_new(NULL, 0, NULL, NAN);
  png = trace_gantt_png(g);
  s = decode_png(png);
  cairo_surface_destroy(s);
  g_bytes_unref(png);
  trace_gantt_free(g);
  g = trace_gantt_new("", 3, NULL, 0);
  guint c = trace_gantt_add_class(g, NULL, 0x123456);
  trace_gantt_add_box(g, 2, 0.5, 0.25, c, "backwards: skipped");
  trace_gantt_add_box(g, 1, NAN, 1, c, NULL);
  trace_gantt_add_box(g, 0, 0, 1e-9, c, "a long label in a tiny box");
  trace_gantt_add_box(g, 1, -1e300, 1e300, c, "far out");
  png = trace_gantt_png(g);
  s = decode_png(png);
  cairo_surface_destroy(s);
  g_bytes_unref(png);
  trace_gantt_free(g);
}

/* Why: GPU counts (64 .. 2048) are swept in powers of two; on a log2 axis
 * they must be evenly spaced, in order, and render. */
static void test_log2_axis(void) {
  TracePlot *p = line_chart();
  render_all(p);
  double prev = -1, step = 0;
  for (double gpus = 64; gpus <= 2048; gpus *= 2) {
    double x;
    g_assert_true(trace_plot_pixel(p, gpus, 140, &x, NULL));
    g_assert_cmpfloat(x, >, prev);
    if (prev >= 0 && step > 0)
      g_assert_cmpfloat_with_epsilon(x - prev, step, 1e-6);
    if (prev >= 0)
      step = x - prev;
    prev = x;
  }
  g_assert_false(trace_plot_pixel(p, 0, 140, NULL, NULL));
  trace_plot_free(p);
}

/* fontconfig 2.14 (Debian 12) leaks a few hundred bytes once per process
 * while it parses its configuration files, on cairo's first font lookup;
 * nothing of ptdsim's is allocated by fontconfig.  LeakSanitizer asks this
 * hook for its default suppressions; builds without it never call it. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libfontconfig.so\n"; }

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/plot/png-format", test_png_format);
  g_test_add_func("/plot/png-pixels", test_png_pixels);
  g_test_add_func("/plot/svg-wellformed", test_svg_wellformed);
  g_test_add_func("/plot/deterministic", test_deterministic);
  g_test_add_func("/plot/gantt-box-colour", test_gantt_box_colour);
  g_test_add_func("/plot/degenerate", test_degenerate);
  g_test_add_func("/plot/log2-axis", test_log2_axis);
  int rc = g_test_run();
  /* Hand cairo's font caches back, so the leak checker sees only ours. */
  cairo_debug_reset_static_data();
  return rc;
}
