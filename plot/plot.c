/* ptdsim — charts and schedule diagrams drawn with cairo (see plot.h).
 *
 * Every picture is laid out first, on a 1x1 measuring surface (text sizes
 * come from cairo_text_extents), and then drawn from that layout onto the
 * PNG or the SVG surface: both formats, and trace_*_pixel, share one
 * geometry.  Layouts are iterated a few passes because the margins depend
 * on the tick labels, which depend on the plot area's size. */
#include "plot.h"

#include <cairo-svg.h>
#include <cairo.h>
#include <math.h>
#include <string.h>

#define FONT_FACE "DejaVu Sans"
#define PAD 16.0          /* outer margin of every picture */
#define TICK_LEN 5.0      /* tick marks, outward */
#define TITLE_SIZE 20.0
#define SUBTITLE_SIZE 14.0
#define AXIS_LABEL_SIZE 15.0
#define TICK_SIZE 12.0
#define LEGEND_SIZE 13.0
#define MIN_SIZE 10.0     /* texts shrink to this before they are cut */
#define LINE_WIDTH 2.5
#define MARKER_R 5.0
#define DIAMOND_R 7.0     /* half diagonal of a published-value diamond */

/* Okabe & Ito (2008), reordered so that the first colours are the most
 * distinct on white; the yellow, weakest on white, comes last. */
static const guint32 palette[] = {0x0072B2, 0xD55E00, 0x009E73, 0xE69F00, 0xCC79A7, 0x56B4E9, 0xF0E442};

#define C_TEXT 0x202020
#define C_SUBTEXT 0x505050
#define C_AXIS 0x404040
#define C_GRID 0xE3E3E3
#define C_LEGEND_BORDER 0xB0B0B0
#define C_ROW_SHADE 0xF5F5F5

guint32 trace_plot_palette_rgb(guint i) { return palette[i % G_N_ELEMENTS(palette)]; }

/* ------------------------------------------------------------------ */
/* Texts and cairo helpers */

/* A copy cairo can draw: valid UTF-8 on one line.  NULL gives "". */
static char *clean_text(const char *s) {
  if (!s)
    return g_strdup("");
  char *v = g_utf8_make_valid(s, -1);
  for (char *c = v; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f)
      *c = ' ';
  return v;
}

static void set_rgb(cairo_t *cr, guint32 rgb) {
  cairo_set_source_rgb(cr, ((rgb >> 16) & 0xff) / 255.0, ((rgb >> 8) & 0xff) / 255.0, (rgb & 0xff) / 255.0);
}

static void set_font(cairo_t *cr, double size, gboolean bold) {
  cairo_select_font_face(cr, FONT_FACE, CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

/* Fixed, unhinted text: the same metrics on the image and the SVG surface,
 * and no dependence on the machine's fontconfig rendering settings. */
static void set_font_options(cairo_t *cr) {
  cairo_font_options_t *o = cairo_font_options_create();
  cairo_font_options_set_antialias(o, CAIRO_ANTIALIAS_GRAY);
  cairo_font_options_set_hint_style(o, CAIRO_HINT_STYLE_NONE);
  cairo_font_options_set_hint_metrics(o, CAIRO_HINT_METRICS_OFF);
  cairo_set_font_options(cr, o);
  cairo_font_options_destroy(o);
}

static double text_width(cairo_t *cr, const char *s) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s, &e);
  return e.x_advance;
}

/* Height of a line of the current font (ascent + descent). */
static double line_height(cairo_t *cr) {
  cairo_font_extents_t fe;
  cairo_font_extents(cr, &fe);
  return fe.ascent + fe.descent;
}

/* Draws `s` anchored at (x, y): ha 0 / 0.5 / 1 puts the anchor at its left,
 * centre or right; va 0 / 0.5 / 1 at the top, middle or bottom of the
 * font's line box (not the ink), so that labels of one row share a
 * baseline whatever their letters. */
static void text_at(cairo_t *cr, double x, double y, double ha, double va, const char *s) {
  cairo_font_extents_t fe;
  cairo_font_extents(cr, &fe);
  cairo_move_to(cr, x - ha * text_width(cr, s), y - va * (fe.ascent + fe.descent) + fe.ascent);
  cairo_show_text(cr, s);
}

/* `s` made to fit `max_w` px: the font shrinks from `size` down to
 * MIN_SIZE (when `shrink`), then the text is cut with an ellipsis.  Returns
 * the new text and leaves its font selected on `cr`; *used gets the size. */
static char *fit_text(cairo_t *cr, const char *s, double size, gboolean bold, gboolean shrink, double max_w,
                      double *used) {
  double z = size;
  set_font(cr, z, bold);
  while (shrink && z > MIN_SIZE && text_width(cr, s) > max_w) {
    z = MAX(MIN_SIZE, z - 0.5);
    set_font(cr, z, bold);
  }
  if (used)
    *used = z;
  if (text_width(cr, s) <= max_w)
    return g_strdup(s);
  GString *t = g_string_new(s);
  while (t->len > 0) {
    const char *end = g_utf8_find_prev_char(t->str, t->str + t->len);
    g_string_truncate(t, end ? (gsize)(end - t->str) : 0);
    char *trial = g_strconcat(t->str, "\u2026", NULL);
    gboolean fits = text_width(cr, trial) <= max_w;
    g_free(trial);
    if (fits)
      break;
  }
  g_string_append(t, "\u2026");
  return g_string_free(t, FALSE);
}

/* A value that can be placed: finite, and far enough from the limits of
 * double that spans and paddings computed from it stay finite. */
static gboolean usable(double v) { return isfinite(v) && fabs(v) <= 1e300; }

/* Pixel-crisp position of a 1 px line. */
static double crisp(double v) { return floor(v) + 0.5; }

/* ------------------------------------------------------------------ */
/* Numbers and ticks */

typedef struct {
  double v;    /* position in axis units: value, log2 of it, category index */
  char *label; /* NULL: a tick without a label */
} Tick;

static void ticks_clear(GArray *ticks) {
  for (guint i = 0; i < ticks->len; i++)
    g_free(g_array_index(ticks, Tick, i).label);
  g_array_set_size(ticks, 0);
}

static void tick_add(GArray *ticks, double v, char *label) {
  Tick t = {v, label};
  g_array_append_val(ticks, t);
}

/* A step of 1, 2 or 5 x 10^k that cuts `span` into about `target` parts. */
static double nice_step(double span, double target) {
  double raw = span / MAX(target, 1.0);
  double mag = pow(10.0, floor(log10(raw)));
  double f = raw / mag;
  return (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * mag;
}

/* A tick value with as many decimals as the step needs, never "-0", a
 * true minus sign, and long whole numbers in groups of three (SI style,
 * thin spaces: 1 500 000).  g_ascii_formatd, so that no locale's decimal
 * comma or separator creeps in. */
static char *format_tick(double v, double step) {
  if (fabs(v) < step * 1e-6)
    v = 0.0;
  int decimals = step >= 1.0 ? 0 : MIN(10, (int)ceil(-log10(step) - 1e-9));
  char fmt[16], buf[G_ASCII_DTOSTR_BUF_SIZE + 32];
  if (fabs(v) >= 1e15) { /* past any count of GPUs or tokens: nobody reads 16 digits */
    g_ascii_formatd(buf, sizeof buf, "%.6g", v);
    return g_strdup(buf);
  }
  g_snprintf(fmt, sizeof fmt, "%%.%df", decimals);
  g_ascii_formatd(buf, sizeof buf, fmt, fabs(v));
  GString *out = g_string_new(v < 0 ? "\u2212" : NULL);
  gsize n = strlen(buf);
  for (gsize i = 0; i < n; i++) {
    if (decimals == 0 && fabs(v) >= 1e4 && i > 0 && (n - i) % 3 == 0)
      g_string_append(out, "\u2009");
    g_string_append_c(out, buf[i]);
  }
  return g_string_free(out, FALSE);
}

/* A data value as a category label: whole numbers in full (GPU counts),
 * others with six significant digits. */
static char *format_value(double v) {
  char buf[G_ASCII_DTOSTR_BUF_SIZE + 32];
  if (v == floor(v) && fabs(v) < 1e15)
    g_ascii_formatd(buf, sizeof buf, "%.0f", v == 0.0 ? 0.0 : v);
  else
    g_ascii_formatd(buf, sizeof buf, "%.6g", v);
  return g_strdup(buf);
}

/* 2^k as a plain number: 64, 1024, 0.5; below 1/8 as "1/N"; beyond
 * 2^±40, where whole numbers stop being readable, as "2^k". */
static char *format_pow2(int k) {
  char buf[G_ASCII_DTOSTR_BUF_SIZE + 32];
  if (k > 40 || k < -40)
    return g_strdup_printf("2^%d", k);
  if (k >= 0)
    g_ascii_formatd(buf, sizeof buf, "%.0f", ldexp(1.0, k));
  else if (k >= -3)
    g_ascii_formatd(buf, sizeof buf, "%g", ldexp(1.0, k));
  else
    g_ascii_formatd(buf, sizeof buf, "1/%.0f", ldexp(1.0, -k));
  return g_strdup(buf);
}

/* Whether horizontally centred labels of `ticks` (at pixel x = x0 +
 * (v - lo) * scale) come closer than a gap of 12 px. */
static gboolean ticks_crowded(cairo_t *cr, const GArray *ticks, double x0, double lo, double scale) {
  double prev_right = -G_MAXDOUBLE;
  for (guint i = 0; i < ticks->len; i++) {
    const Tick *t = &g_array_index(ticks, Tick, i);
    if (!t->label)
      continue;
    double w = text_width(cr, t->label), x = x0 + (t->v - lo) * scale;
    if (x - w / 2 < prev_right + 12.0)
      return TRUE;
    prev_right = x + w / 2;
  }
  return FALSE;
}

/* Nice ticks from lo to hi (inclusive, with rounding slack), labelled. */
static void linear_ticks(GArray *ticks, double lo, double hi, double step) {
  double a = ceil(lo / step - 1e-9), b = floor(hi / step + 1e-9);
  for (int k = 0; a + k <= b && k <= 100; k++) /* the bound only guards against nonsense input */
    tick_add(ticks, (a + k) * step, format_tick((a + k) * step, step));
}

/* ------------------------------------------------------------------ */
/* Rendering to bytes */

static cairo_status_t append_bytes(void *closure, const unsigned char *data, unsigned int length) {
  g_byte_array_append(closure, data, length);
  return CAIRO_STATUS_SUCCESS;
}

typedef void (*DrawFn)(cairo_t *cr, gconstpointer object, gconstpointer layout);

/* Runs `draw` on a fresh context with the fixed font options. */
static gboolean draw_on(cairo_surface_t *s, DrawFn draw, gconstpointer object, gconstpointer layout) {
  cairo_t *cr = cairo_create(s);
  set_font_options(cr);
  draw(cr, object, layout);
  gboolean ok = cairo_status(cr) == CAIRO_STATUS_SUCCESS;
  cairo_destroy(cr);
  return ok;
}

static GBytes *render_png(int w, int h, DrawFn draw, gconstpointer object, gconstpointer layout) {
  /* RGB24: the background is opaque, and PNG then stores RGB without alpha. */
  cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
  GByteArray *buf = g_byte_array_new();
  gboolean ok = cairo_surface_status(s) == CAIRO_STATUS_SUCCESS && draw_on(s, draw, object, layout);
  if (ok) {
    cairo_surface_flush(s);
    ok = cairo_surface_write_to_png_stream(s, append_bytes, buf) == CAIRO_STATUS_SUCCESS;
  }
  cairo_surface_destroy(s);
  if (!ok) {
    g_byte_array_unref(buf);
    return NULL;
  }
  return g_byte_array_free_to_bytes(buf);
}

/* cairo 1.16 names the page group "surfaceN" after a process-wide counter
 * of surfaces, so the same picture drawn twice differs in that id.  The
 * glyphs are outlines and no user text reaches the document, so every
 * "surface<digits>" is such an id: renumber them 1, 2, ... in order of first
 * appearance, keeping references consistent.  Consumes `buf`. */
static GBytes *svg_renumber_surfaces(GByteArray *buf) {
  static const char key[] = "surface";
  const gsize klen = sizeof key - 1;
  GString *out = g_string_sized_new(buf->len);
  GPtrArray *seen = g_ptr_array_new_with_free_func(g_free);
  const char *d = (const char *)buf->data;
  gsize i = 0, n = buf->len;
  while (i < n) {
    gsize j = i + klen;
    if (j < n && memcmp(d + i, key, klen) == 0 && g_ascii_isdigit(d[j])) {
      while (j < n && g_ascii_isdigit(d[j]))
        j++;
      char *id = g_strndup(d + i + klen, j - i - klen);
      guint k = 0;
      while (k < seen->len && strcmp(g_ptr_array_index(seen, k), id) != 0)
        k++;
      if (k == seen->len)
        g_ptr_array_add(seen, id);
      else
        g_free(id);
      g_string_append_printf(out, "%s%u", key, k + 1);
      i = j;
    } else {
      g_string_append_c(out, d[i]);
      i++;
    }
  }
  g_ptr_array_unref(seen);
  g_byte_array_unref(buf);
  return g_string_free_to_bytes(out);
}

static GBytes *render_svg(int w, int h, DrawFn draw, gconstpointer object, gconstpointer layout) {
  GByteArray *buf = g_byte_array_new();
  cairo_surface_t *s = cairo_svg_surface_create_for_stream(append_bytes, buf, w, h);
  /* Before any drawing: 1.1 is what every viewer and LaTeX converter reads;
   * user units make width="1200" mean pixels rather than cairo's default pt. */
  cairo_svg_surface_restrict_to_version(s, CAIRO_SVG_VERSION_1_1);
  cairo_svg_surface_set_document_unit(s, CAIRO_SVG_UNIT_USER);
  gboolean ok = cairo_surface_status(s) == CAIRO_STATUS_SUCCESS && draw_on(s, draw, object, layout);
  cairo_surface_finish(s);
  ok = ok && cairo_surface_status(s) == CAIRO_STATUS_SUCCESS;
  cairo_surface_destroy(s);
  if (!ok) {
    g_byte_array_unref(buf);
    return NULL;
  }
  return svg_renumber_surfaces(buf);
}

/* A context on a 1x1 surface for measuring text while laying out. */
static cairo_t *measure_begin(void) {
  cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
  cairo_t *cr = cairo_create(s);
  cairo_surface_destroy(s); /* the context holds its own reference */
  set_font_options(cr);
  return cr;
}

/* Title and subtitle, shared by charts and Gantt diagrams. */
typedef struct {
  char *title, *subtitle;
  double title_size, subtitle_size, title_y, subtitle_y;
} Heading;

/* Lays out the heading from the top of a `width` px picture; returns the y
 * below it. */
static double heading_layout(cairo_t *cr, Heading *h, const char *title, const char *subtitle, double width) {
  double y = PAD;
  if (*title) {
    h->title = fit_text(cr, title, TITLE_SIZE, TRUE, TRUE, width - 2 * PAD, &h->title_size);
    h->title_y = y;
    y += line_height(cr);
  }
  if (*subtitle) {
    y += 4;
    h->subtitle = fit_text(cr, subtitle, SUBTITLE_SIZE, FALSE, TRUE, width - 2 * PAD, &h->subtitle_size);
    h->subtitle_y = y;
    y += line_height(cr);
  }
  return y;
}

static void heading_draw(cairo_t *cr, const Heading *h, double width) {
  if (h->title) {
    set_font(cr, h->title_size, TRUE);
    set_rgb(cr, C_TEXT);
    text_at(cr, width / 2, h->title_y, 0.5, 0, h->title);
  }
  if (h->subtitle) {
    set_font(cr, h->subtitle_size, FALSE);
    set_rgb(cr, C_SUBTEXT);
    text_at(cr, width / 2, h->subtitle_y, 0.5, 0, h->subtitle);
  }
}

static void heading_clear(Heading *h) {
  g_free(h->title);
  g_free(h->subtitle);
}

/* ------------------------------------------------------------------ */
/* Charts */

typedef struct {
  char *name;
  double *x, *y;
  guint n;
} Series;

struct _TracePlot {
  TracePlotKind kind;
  char *title, *subtitle, *x_label, *y_label;
  gboolean x_log2, y_from_zero;
  char **categories; /* n_categories entries, or NULL */
  guint n_categories;
  GPtrArray *series;     /* Series *, in order added */
  GPtrArray *references; /* Series * */
};

static void series_free(gpointer data) {
  Series *s = data;
  g_free(s->name);
  g_free(s->x);
  g_free(s->y);
  g_free(s);
}

TracePlot *trace_plot_new(TracePlotKind kind, const char *title, const char *x_label, const char *y_label) {
  g_return_val_if_fail(kind == TRACE_PLOT_LINES || kind == TRACE_PLOT_BARS, NULL);
  TracePlot *p = g_new0(TracePlot, 1);
  p->kind = kind;
  p->title = clean_text(title);
  p->subtitle = clean_text(NULL);
  p->x_label = clean_text(x_label);
  p->y_label = clean_text(y_label);
  p->y_from_zero = TRUE;
  p->series = g_ptr_array_new_with_free_func(series_free);
  p->references = g_ptr_array_new_with_free_func(series_free);
  return p;
}

void trace_plot_free(TracePlot *p) {
  if (!p)
    return;
  g_free(p->title);
  g_free(p->subtitle);
  g_free(p->x_label);
  g_free(p->y_label);
  g_strfreev(p->categories);
  g_ptr_array_unref(p->series);
  g_ptr_array_unref(p->references);
  g_free(p);
}

void trace_plot_set_subtitle(TracePlot *p, const char *text) {
  g_return_if_fail(p != NULL);
  g_free(p->subtitle);
  p->subtitle = clean_text(text);
}

void trace_plot_set_x_log2(TracePlot *p, gboolean on) {
  g_return_if_fail(p != NULL);
  p->x_log2 = on;
}

void trace_plot_set_y_from_zero(TracePlot *p, gboolean on) {
  g_return_if_fail(p != NULL);
  p->y_from_zero = on;
}

void trace_plot_set_categories(TracePlot *p, const char *const *labels, guint n) {
  g_return_if_fail(p != NULL);
  g_return_if_fail(labels != NULL || n == 0);
  g_strfreev(p->categories);
  p->categories = NULL;
  p->n_categories = n;
  if (n == 0)
    return;
  p->categories = g_new0(char *, n + 1);
  for (guint i = 0; i < n; i++)
    p->categories[i] = clean_text(labels[i]);
}

static Series *series_new(const char *name, const double *x, const double *y, guint n) {
  Series *s = g_new0(Series, 1);
  s->name = clean_text(name);
  s->n = n;
  s->x = g_new(double, MAX(n, 1));
  s->y = g_new(double, MAX(n, 1));
  for (guint i = 0; i < n; i++) {
    s->x[i] = x ? x[i] : (double)i;
    s->y[i] = y[i];
  }
  return s;
}

guint trace_plot_add_series(TracePlot *p, const char *name, const double *x, const double *y, guint n) {
  g_return_val_if_fail(p != NULL, 0);
  g_return_val_if_fail(y != NULL || n == 0, 0);
  g_ptr_array_add(p->series, series_new(name, x, y, n));
  return p->series->len - 1;
}

void trace_plot_add_reference(TracePlot *p, const char *name, const double *x, const double *y, guint n) {
  g_return_if_fail(p != NULL);
  g_return_if_fail(y != NULL || n == 0);
  g_ptr_array_add(p->references, series_new(name && *name ? name : "published", x, y, n));
}

/* The chart's geometry, in pixels and axis units. */
typedef struct {
  Heading head;
  double l, t, r, b;          /* the plot area */
  gboolean categorical;       /* x is a category index */
  gboolean log2;              /* x axis units are log2(x) */
  guint n_cat;
  char **cat_labels;          /* n_cat, fitted */
  GArray *cat_x;              /* bars without categories: distinct x values, ascending */
  double xlo, xhi, ylo, yhi;  /* axis ranges in axis units */
  GArray *xt, *yt;            /* Tick */
  gboolean x_rotated;         /* category labels at 45 degrees */
  char *x_label, *y_label;
  double x_label_size, y_label_size;
  /* data extent */
  gboolean have_x, have_y;
  double xmin, xmax, ymin, ymax;
  /* legend */
  gboolean legend;
  gboolean legend_outside;
  GPtrArray *legend_text;     /* series names then references', fitted */
  GArray *legend_series;      /* per entry: its series index, or -1 for a reference */
  double lx, ly, lw, lh, legend_row;
} ChartLayout;

static void chart_layout_clear(ChartLayout *L) {
  heading_clear(&L->head);
  g_strfreev(L->cat_labels);
  if (L->cat_x)
    g_array_unref(L->cat_x);
  ticks_clear(L->xt);
  ticks_clear(L->yt);
  g_array_unref(L->xt);
  g_array_unref(L->yt);
  g_free(L->x_label);
  g_free(L->y_label);
  g_ptr_array_unref(L->legend_text);
  if (L->legend_series)
    g_array_unref(L->legend_series);
}

static int cmp_double(gconstpointer a, gconstpointer b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The category of a bar or bar-chart reference at x, or FALSE. */
static gboolean bar_category(const ChartLayout *L, double x, guint *cat) {
  if (!usable(x))
    return FALSE;
  if (!L->cat_x) {
    if (x < 0 || x > L->n_cat - 1 || x != floor(x))
      return FALSE;
    *cat = (guint)x;
    return TRUE;
  }
  guint lo = 0, hi = L->cat_x->len;
  while (lo < hi) {
    guint mid = (lo + hi) / 2;
    double v = g_array_index(L->cat_x, double, mid);
    if (v == x) {
      *cat = mid;
      return TRUE;
    }
    if (v < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return FALSE;
}

/* x in axis units, or FALSE when it cannot be placed. */
static gboolean x_axis_units(const ChartLayout *L, double x, double *u) {
  if (!usable(x))
    return FALSE;
  if (L->log2) {
    if (x <= 0)
      return FALSE;
    x = log2(x);
  }
  *u = x;
  return TRUE;
}

static double px_of_x(const ChartLayout *L, double u) {
  return L->l + (u - L->xlo) / (L->xhi - L->xlo) * (L->r - L->l);
}

static double px_of_y(const ChartLayout *L, double y) {
  return L->b - (y - L->ylo) / (L->yhi - L->ylo) * (L->b - L->t);
}

/* Screen position of point i of a line series or of a reference on a line
 * chart; FALSE when it is not drawn. */
static gboolean line_point(const ChartLayout *L, const Series *s, guint i, double *sx, double *sy) {
  double u;
  if (!usable(s->y[i]) || !x_axis_units(L, s->x[i], &u))
    return FALSE;
  if (L->categorical && (u < 0 || u > L->n_cat - 1))
    return FALSE;
  *sx = px_of_x(L, u);
  *sy = px_of_y(L, s->y[i]);
  return TRUE;
}

/* The horizontal extent of bar slot `k` of `n_slots` in category `cat`:
 * the group takes 80% of the category's width, leaving a gap between groups. */
static void bar_slot(const ChartLayout *L, guint cat, guint k, guint n_slots, double *x0, double *x1) {
  double cw = (L->r - L->l) / L->n_cat, group = 0.8 * cw;
  double left = L->l + cw * cat + (cw - group) / 2, w = group / MAX(n_slots, 1);
  *x0 = left + w * k;
  *x1 = *x0 + w;
}

/* The bars start at 0, or at the axis' end nearest to 0 when 0 is off it. */
static double bar_base(const ChartLayout *L) { return px_of_y(L, CLAMP(0.0, L->ylo, L->yhi)); }

/* Bar of point i of series k: a pixel-aligned rectangle, FALSE if none. */
static gboolean bar_rect(const TracePlot *p, const ChartLayout *L, guint k, guint i, double *x0, double *y0,
                         double *x1, double *y1) {
  const Series *s = g_ptr_array_index(p->series, k);
  guint cat;
  if (!usable(s->y[i]) || !bar_category(L, s->x[i], &cat))
    return FALSE;
  double a, b;
  bar_slot(L, cat, k, p->series->len, &a, &b);
  /* A 1 px gap between neighbouring bars of a group, when they are wide
   * enough to spare it. */
  if (b - a >= 6 && p->series->len > 1)
    b -= 1;
  double base = bar_base(L), top = px_of_y(L, s->y[i]);
  *x0 = round(a);
  *x1 = MAX(round(b), *x0 + 1);
  *y0 = round(MIN(base, top));
  *y1 = round(MAX(base, top));
  return TRUE;
}

/* The tick of reference point i of reference r on a bar chart. */
static gboolean bar_ref_tick(const TracePlot *p, const ChartLayout *L, guint r, guint i, double *x0, double *x1,
                             double *y) {
  const Series *s = g_ptr_array_index(p->references, r);
  guint cat;
  if (!usable(s->y[i]) || !bar_category(L, s->x[i], &cat))
    return FALSE;
  if (r < p->series->len)
    bar_slot(L, cat, r, p->series->len, x0, x1);
  else
    bar_slot(L, cat, 0, 1, x0, x1);
  *x0 -= 3;
  *x1 += 3;
  *y = px_of_y(L, s->y[i]);
  return TRUE;
}

/* Liang-Barsky: whether the segment a-b meets the rectangle. */
static gboolean segment_hits(double ax, double ay, double bx, double by, double x0, double y0, double x1,
                             double y1) {
  double t0 = 0, t1 = 1, dx = bx - ax, dy = by - ay;
  double pp[4] = {-dx, dx, -dy, dy}, q[4] = {ax - x0, x1 - ax, ay - y0, y1 - ay};
  for (int i = 0; i < 4; i++) {
    if (pp[i] == 0) {
      if (q[i] < 0)
        return FALSE;
      continue;
    }
    double t = q[i] / pp[i];
    if (pp[i] < 0) {
      if (t > t1)
        return FALSE;
      t0 = MAX(t0, t);
    } else {
      if (t < t0)
        return FALSE;
      t1 = MIN(t1, t);
    }
  }
  return TRUE;
}

static gboolean rects_meet(double ax0, double ay0, double ax1, double ay1, double bx0, double by0, double bx1,
                           double by1) {
  return ax0 < bx1 && bx0 < ax1 && ay0 < by1 && by0 < ay1;
}

/* Whether anything drawn for the data would lie under the rectangle. */
static gboolean data_under(const TracePlot *p, const ChartLayout *L, double x0, double y0, double x1, double y1) {
  if (p->kind == TRACE_PLOT_BARS) {
    for (guint k = 0; k < p->series->len; k++) {
      const Series *s = g_ptr_array_index(p->series, k);
      for (guint i = 0; i < s->n; i++) {
        double a, b, c, d;
        if (bar_rect(p, L, k, i, &a, &b, &c, &d) && rects_meet(a, b, c, d, x0, y0, x1, y1))
          return TRUE;
      }
    }
    for (guint r = 0; r < p->references->len; r++) {
      const Series *s = g_ptr_array_index(p->references, r);
      for (guint i = 0; i < s->n; i++) {
        double a, b, y;
        if (bar_ref_tick(p, L, r, i, &a, &b, &y) && rects_meet(a, y - 3, b, y + 3, x0, y0, x1, y1))
          return TRUE;
      }
    }
    return FALSE;
  }
  for (guint k = 0; k < p->series->len; k++) {
    const Series *s = g_ptr_array_index(p->series, k);
    double px = 0, py = 0;
    gboolean prev = FALSE;
    for (guint i = 0; i < s->n; i++) {
      double sx, sy;
      gboolean ok = line_point(L, s, i, &sx, &sy);
      if (ok && rects_meet(sx - MARKER_R - 3, sy - MARKER_R - 3, sx + MARKER_R + 3, sy + MARKER_R + 3, x0, y0, x1,
                           y1))
        return TRUE;
      if (ok && prev && segment_hits(px, py, sx, sy, x0 - 3, y0 - 3, x1 + 3, y1 + 3))
        return TRUE;
      prev = ok;
      px = sx;
      py = sy;
    }
  }
  for (guint r = 0; r < p->references->len; r++) {
    const Series *s = g_ptr_array_index(p->references, r);
    for (guint i = 0; i < s->n; i++) {
      double sx, sy, e = DIAMOND_R + 3;
      if (line_point(L, s, i, &sx, &sy) && rects_meet(sx - e, sy - e, sx + e, sy + e, x0, y0, x1, y1))
        return TRUE;
    }
  }
  return FALSE;
}

/* The extent of the data: x in axis units (lines without categories), y
 * over series and references. */
static void chart_extent(const TracePlot *p, ChartLayout *L) {
  L->xmin = L->ymin = G_MAXDOUBLE;
  L->xmax = L->ymax = -G_MAXDOUBLE;
  GPtrArray *lists[2] = {p->series, p->references};
  for (guint a = 0; a < 2; a++)
    for (guint k = 0; k < lists[a]->len; k++) {
      const Series *s = g_ptr_array_index(lists[a], k);
      for (guint i = 0; i < s->n; i++) {
        double u;
        if (!usable(s->y[i]))
          continue;
        if (!L->categorical) {
          if (!x_axis_units(L, s->x[i], &u))
            continue;
          L->have_x = TRUE;
          L->xmin = MIN(L->xmin, u);
          L->xmax = MAX(L->xmax, u);
        } else if (L->cat_x) {
          if (!usable(s->x[i]))
            continue;
        } else if (!usable(s->x[i]) || s->x[i] < -0.5 || s->x[i] > L->n_cat - 0.5) {
          continue;
        }
        L->have_y = TRUE;
        L->ymin = MIN(L->ymin, s->y[i]);
        L->ymax = MAX(L->ymax, s->y[i]);
      }
    }
}

/* Categories of a bar chart without named ones: the distinct finite x. */
static void chart_bar_categories(const TracePlot *p, ChartLayout *L) {
  L->cat_x = g_array_new(FALSE, FALSE, sizeof(double));
  GPtrArray *lists[2] = {p->series, p->references};
  for (guint a = 0; a < 2; a++)
    for (guint k = 0; k < lists[a]->len; k++) {
      const Series *s = g_ptr_array_index(lists[a], k);
      for (guint i = 0; i < s->n; i++)
        if (usable(s->x[i]) && usable(s->y[i]))
          g_array_append_val(L->cat_x, s->x[i]);
    }
  g_array_sort(L->cat_x, cmp_double);
  guint n = 0;
  for (guint i = 0; i < L->cat_x->len; i++)
    if (n == 0 || g_array_index(L->cat_x, double, i) != g_array_index(L->cat_x, double, n - 1))
      g_array_index(L->cat_x, double, n++) = g_array_index(L->cat_x, double, i);
  g_array_set_size(L->cat_x, n);
  L->n_cat = n;
}

/* The y axis for a plot area `height` px tall: a range ending on nice ticks,
 * with 5% headroom beyond the data except at an anchored zero. */
static void chart_y_axis(const TracePlot *p, ChartLayout *L, double height) {
  if (!L->have_y) { /* nothing to show: a plain 0 .. 1 */
    L->ylo = 0;
    L->yhi = 1;
    ticks_clear(L->yt);
    linear_ticks(L->yt, 0, 1, nice_step(1, CLAMP(floor(height / 80), 3, 8)));
    return;
  }
  double lo = L->ymin, hi = L->ymax;
  if (p->y_from_zero) {
    lo = MIN(lo, 0);
    hi = MAX(hi, 0);
  }
  /* All values equal (or equal but for rounding noise, which would ask for
   * ticks finer than a double resolves). */
  if (hi - lo <= 1e-9 * MAX(fabs(lo), fabs(hi))) {
    hi = lo;
    if (lo == 0) { /* from zero, they can only be all zero */
      hi = 1;
    } else {
      lo -= fabs(lo) * 0.1;
      hi += fabs(hi) * 0.1;
    }
  }
  double span = hi - lo;
  if (!(p->y_from_zero && hi == 0))
    hi += 0.05 * span;
  if (!(p->y_from_zero && lo == 0))
    lo -= 0.05 * span;
  double step = nice_step(hi - lo, CLAMP(floor(height / 80), 3, 8));
  L->ylo = floor(lo / step + 1e-9) * step;
  L->yhi = ceil(hi / step - 1e-9) * step;
  ticks_clear(L->yt);
  linear_ticks(L->yt, L->ylo, L->yhi, step);
}

/* The x ticks for a plot area `width` px wide, thinned until their labels
 * keep apart; category labels turn 45 degrees when they do not fit flat. */
static void chart_x_axis(cairo_t *cr, ChartLayout *L, double width) {
  ticks_clear(L->xt);
  set_font(cr, TICK_SIZE, FALSE);
  if (L->categorical) {
    double slot = width / MAX(L->n_cat, 1), widest = 0;
    for (guint c = 0; c < L->n_cat; c++)
      widest = MAX(widest, text_width(cr, L->cat_labels[c]));
    L->x_rotated = widest + 8 > slot;
    guint stride = 1;
    /* Turned labels still need a line's height (times sqrt 2) each. */
    while (L->x_rotated && slot * stride < line_height(cr) * 1.5)
      stride++;
    for (guint c = 0; c < L->n_cat; c++)
      tick_add(L->xt, c, c % stride == 0 ? g_strdup(L->cat_labels[c]) : NULL);
    return;
  }
  L->x_rotated = FALSE;
  double scale = width / (L->xhi - L->xlo);
  if (L->log2) {
    int a = (int)ceil(L->xlo - 1e-9), b = (int)floor(L->xhi + 1e-9);
    for (int stride = 1; stride <= 64; stride++) {
      ticks_clear(L->xt);
      /* The powers between labelled ones keep an unlabelled tick, so the
       * octaves still read as even steps. */
      for (int k = a; k <= b; k++)
        tick_add(L->xt, k, ((k % stride) + stride) % stride == 0 ? format_pow2(k) : NULL);
      if (!ticks_crowded(cr, L->xt, 0, L->xlo, scale))
        return;
    }
    return;
  }
  for (double target = CLAMP(floor(width / 100), 2, 12); target >= 1; target--) {
    ticks_clear(L->xt);
    linear_ticks(L->xt, L->xlo, L->xhi, nice_step(L->xhi - L->xlo, target));
    if (!ticks_crowded(cr, L->xt, 0, L->xlo, scale))
      return;
  }
}

/* The x range of lines without categories: the data with 4% either side
 * (a quarter octave at least on a log2 axis), so markers clear the axes. */
static void chart_x_range(ChartLayout *L) {
  if (L->categorical) {
    L->xlo = -0.5;
    L->xhi = MAX(L->n_cat, 1) - 0.5;
    return;
  }
  double lo = L->have_x ? L->xmin : 0, hi = L->have_x ? L->xmax : (L->log2 ? 4 : 1);
  if (hi - lo <= 1e-9 * MAX(fabs(lo), fabs(hi))) {
    hi = lo;
    double d = L->log2 ? 1 : (lo == 0 ? 1 : fabs(lo) * 0.1);
    lo -= d;
    hi += d;
  }
  double pad = (hi - lo) * 0.04;
  if (L->log2)
    pad = MAX(pad, 0.25);
  L->xlo = lo - pad;
  L->xhi = hi + pad;
}

/* Legend texts and box size; whether there is a legend at all. */
static void chart_legend_size(const TracePlot *p, cairo_t *cr, ChartLayout *L) {
  L->legend_text = g_ptr_array_new_with_free_func(g_free);
  L->legend_series = g_array_new(FALSE, FALSE, sizeof(gint));
  gboolean any = FALSE;
  GPtrArray *lists[2] = {p->series, p->references};
  double widest = 0;
  for (guint a = 0; a < 2; a++)
    for (guint k = 0; k < lists[a]->len; k++) {
      const Series *s = g_ptr_array_index(lists[a], k);
      gboolean repeat = FALSE; /* references look alike: one entry per name */
      for (guint j = 0; a == 1 && j < k && !repeat; j++)
        repeat = strcmp(((const Series *)g_ptr_array_index(lists[a], j))->name, s->name) == 0;
      if (repeat)
        continue;
      any = any || *s->name;
      char *t = fit_text(cr, s->name, LEGEND_SIZE, FALSE, FALSE, 320, NULL);
      widest = MAX(widest, text_width(cr, t));
      g_ptr_array_add(L->legend_text, t);
      gint which = a == 0 ? (gint)k : -1;
      g_array_append_val(L->legend_series, which);
    }
  L->legend = any;
  set_font(cr, LEGEND_SIZE, FALSE);
  L->legend_row = MAX(line_height(cr), 14) + 5;
  L->lw = 10 + 28 + 8 + widest + 12;
  L->lh = 8 + L->legend_row * L->legend_text->len + 3;
}

/* Lays the chart out: heading, axes, margins and the legend's place. */
static void chart_layout(const TracePlot *p, cairo_t *cr, ChartLayout *L) {
  memset(L, 0, sizeof *L);
  const double W = TRACE_PLOT_WIDTH, H = TRACE_PLOT_HEIGHT;
  L->xt = g_array_new(FALSE, FALSE, sizeof(Tick));
  L->yt = g_array_new(FALSE, FALSE, sizeof(Tick));
  double top = heading_layout(cr, &L->head, p->title, p->subtitle, W);
  top += L->head.title || L->head.subtitle ? 18 : 10;

  L->categorical = p->kind == TRACE_PLOT_BARS || p->n_categories > 0;
  L->log2 = !L->categorical && p->x_log2;
  if (p->n_categories > 0) {
    L->n_cat = p->n_categories;
  } else if (L->categorical) {
    chart_bar_categories(p, L);
  }
  set_font(cr, TICK_SIZE, FALSE);
  L->cat_labels = g_new0(char *, L->n_cat + 1);
  for (guint c = 0; c < L->n_cat; c++) {
    char *raw = p->n_categories ? g_strdup(p->categories[c]) : format_value(g_array_index(L->cat_x, double, c));
    L->cat_labels[c] = fit_text(cr, raw, TICK_SIZE, FALSE, FALSE, 180, NULL);
    g_free(raw);
  }
  chart_extent(p, L);
  chart_x_range(L);
  chart_legend_size(p, cr, L);

  for (int attempt = 0; attempt < 2; attempt++) {
    L->t = top;
    L->l = 80;
    L->r = W - PAD - 8;
    L->b = H - 80;
    double extra_l = 0, extra_r = 0;
    for (int pass = 0; pass < 4; pass++) {
      chart_y_axis(p, L, L->b - L->t);
      set_font(cr, TICK_SIZE, FALSE);
      double yw = 0;
      for (guint i = 0; i < L->yt->len; i++)
        yw = MAX(yw, text_width(cr, g_array_index(L->yt, Tick, i).label));
      g_free(L->y_label);
      L->y_label = NULL;
      double ylab = 0;
      if (*p->y_label) {
        L->y_label = fit_text(cr, p->y_label, AXIS_LABEL_SIZE, FALSE, TRUE, L->b - L->t, &L->y_label_size);
        ylab = line_height(cr) + 10;
      }
      L->l = PAD + ylab + yw + 8 + TICK_LEN + extra_l;
      L->r = W - PAD - (L->legend_outside ? L->lw + 14 : 8) - extra_r;

      chart_x_axis(cr, L, L->r - L->l);
      set_font(cr, TICK_SIZE, FALSE);
      double lh = line_height(cr), block = lh, min_x = G_MAXDOUBLE, max_x = -G_MAXDOUBLE;
      for (guint i = 0; i < L->xt->len; i++) {
        const Tick *t = &g_array_index(L->xt, Tick, i);
        if (!t->label)
          continue;
        double w = text_width(cr, t->label), x = px_of_x(L, t->v);
        if (L->x_rotated) {
          block = MAX(block, G_SQRT2 / 2 * (w + lh));
          min_x = MIN(min_x, x - G_SQRT2 / 2 * w);
          max_x = MAX(max_x, x + G_SQRT2 / 2 * lh);
        } else {
          min_x = MIN(min_x, x - w / 2);
          max_x = MAX(max_x, x + w / 2);
        }
      }
      /* Tick labels that would stick out of the picture widen the margins. */
      if (min_x < PAD)
        extra_l += PAD - min_x;
      if (!L->legend_outside && max_x > W - PAD)
        extra_r += max_x - (W - PAD);
      g_free(L->x_label);
      L->x_label = NULL;
      double xlab = 0;
      if (*p->x_label) {
        L->x_label = fit_text(cr, p->x_label, AXIS_LABEL_SIZE, FALSE, TRUE, W - 2 * PAD, &L->x_label_size);
        xlab = line_height(cr) + 8;
      }
      L->b = H - PAD - xlab - block - 4 - TICK_LEN;
    }
    if (!L->legend || L->legend_outside)
      break;
    /* Inside at the top right, else the top left, else outside; the data
     * must keep 6 px clear of the box, not merely not touch it. */
    L->ly = L->t + 10;
    L->lx = L->r - 10 - L->lw;
    if (L->lh <= L->b - L->t - 20 && !data_under(p, L, L->lx - 6, L->ly - 6, L->lx + L->lw + 6, L->ly + L->lh + 6))
      break;
    L->lx = L->l + 10;
    if (L->lh <= L->b - L->t - 20 && !data_under(p, L, L->lx - 6, L->ly - 6, L->lx + L->lw + 6, L->ly + L->lh + 6))
      break;
    L->legend_outside = TRUE;
  }
  if (L->legend_outside) {
    L->lx = L->r + 14;
    L->ly = L->t;
  }
}

static void draw_marker(cairo_t *cr, double x, double y) {
  cairo_new_sub_path(cr);
  cairo_arc(cr, x, y, MARKER_R, 0, 2 * G_PI);
  cairo_fill(cr);
}

static void draw_diamond(cairo_t *cr, double x, double y) {
  cairo_move_to(cr, x, y - DIAMOND_R);
  cairo_line_to(cr, x + DIAMOND_R, y);
  cairo_line_to(cr, x, y + DIAMOND_R);
  cairo_line_to(cr, x - DIAMOND_R, y);
  cairo_close_path(cr);
  /* Hollow, but opaque inside: a series line under it must not show through. */
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_fill_preserve(cr);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1.75);
  cairo_stroke(cr);
}

static void chart_draw_lines(cairo_t *cr, const TracePlot *p, const ChartLayout *L) {
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
  for (guint k = 0; k < p->series->len; k++) {
    const Series *s = g_ptr_array_index(p->series, k);
    set_rgb(cr, trace_plot_palette_rgb(k));
    cairo_set_line_width(cr, LINE_WIDTH);
    gboolean prev = FALSE;
    for (guint i = 0; i < s->n; i++) {
      double x, y;
      gboolean ok = line_point(L, s, i, &x, &y);
      if (ok && prev)
        cairo_line_to(cr, x, y);
      else if (ok)
        cairo_move_to(cr, x, y);
      prev = ok;
    }
    cairo_stroke(cr);
    for (guint i = 0; i < s->n; i++) {
      double x, y;
      if (line_point(L, s, i, &x, &y))
        draw_marker(cr, x, y);
    }
  }
  for (guint r = 0; r < p->references->len; r++) {
    const Series *s = g_ptr_array_index(p->references, r);
    for (guint i = 0; i < s->n; i++) {
      double x, y;
      if (line_point(L, s, i, &x, &y))
        draw_diamond(cr, x, y);
    }
  }
}

static void chart_draw_bars(cairo_t *cr, const TracePlot *p, const ChartLayout *L) {
  for (guint k = 0; k < p->series->len; k++) {
    const Series *s = g_ptr_array_index(p->series, k);
    set_rgb(cr, trace_plot_palette_rgb(k));
    for (guint i = 0; i < s->n; i++) {
      double x0, y0, x1, y1;
      if (bar_rect(p, L, k, i, &x0, &y0, &x1, &y1)) {
        cairo_rectangle(cr, x0, y0, x1 - x0, y1 - y0);
        cairo_fill(cr);
      }
    }
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 3);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
  for (guint r = 0; r < p->references->len; r++) {
    const Series *s = g_ptr_array_index(p->references, r);
    for (guint i = 0; i < s->n; i++) {
      double x0, x1, y;
      if (bar_ref_tick(p, L, r, i, &x0, &x1, &y)) {
        cairo_move_to(cr, x0, y);
        cairo_line_to(cr, x1, y);
        cairo_stroke(cr);
      }
    }
  }
}

static void chart_draw_legend(cairo_t *cr, const TracePlot *p, const ChartLayout *L) {
  double x = floor(L->lx), y = floor(L->ly);
  cairo_rectangle(cr, x + 0.5, y + 0.5, L->lw, L->lh);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_fill_preserve(cr);
  set_rgb(cr, C_LEGEND_BORDER);
  cairo_set_line_width(cr, 1);
  cairo_stroke(cr);
  set_font(cr, LEGEND_SIZE, FALSE);
  for (guint e = 0; e < L->legend_text->len; e++) {
    double cy = y + 8 + L->legend_row * (e + 0.5), sx = x + 10;
    gint which = g_array_index(L->legend_series, gint, e);
    gboolean ref = which < 0;
    if (!ref && p->kind == TRACE_PLOT_LINES) {
      set_rgb(cr, trace_plot_palette_rgb((guint)which));
      cairo_set_line_width(cr, LINE_WIDTH);
      cairo_move_to(cr, sx, cy);
      cairo_line_to(cr, sx + 28, cy);
      cairo_stroke(cr);
      draw_marker(cr, sx + 14, cy);
    } else if (!ref) {
      set_rgb(cr, trace_plot_palette_rgb((guint)which));
      cairo_rectangle(cr, sx + 7, round(cy - 7), 14, 14);
      cairo_fill(cr);
    } else if (p->kind == TRACE_PLOT_LINES) {
      draw_diamond(cr, sx + 14, cy);
    } else {
      cairo_set_source_rgb(cr, 0, 0, 0);
      cairo_set_line_width(cr, 3);
      cairo_move_to(cr, sx + 4, cy);
      cairo_line_to(cr, sx + 24, cy);
      cairo_stroke(cr);
    }
    set_rgb(cr, C_TEXT);
    text_at(cr, sx + 28 + 8, cy, 0, 0.5, g_ptr_array_index(L->legend_text, e));
  }
}

static void chart_draw(cairo_t *cr, gconstpointer object, gconstpointer layout) {
  const TracePlot *p = object;
  const ChartLayout *L = layout;
  const double W = TRACE_PLOT_WIDTH, H = TRACE_PLOT_HEIGHT;
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  heading_draw(cr, &L->head, W);

  /* Grid under the data: horizontal at the y ticks, vertical at the x
   * ticks of line charts (bars are read against the horizontal ones). */
  set_rgb(cr, C_GRID);
  cairo_set_line_width(cr, 1);
  for (guint i = 0; i < L->yt->len; i++) {
    double y = crisp(px_of_y(L, g_array_index(L->yt, Tick, i).v));
    cairo_move_to(cr, L->l, y);
    cairo_line_to(cr, L->r, y);
  }
  if (p->kind == TRACE_PLOT_LINES)
    for (guint i = 0; i < L->xt->len; i++) {
      double x = crisp(px_of_x(L, g_array_index(L->xt, Tick, i).v));
      cairo_move_to(cr, x, L->t);
      cairo_line_to(cr, x, L->b);
    }
  cairo_stroke(cr);

  cairo_save(cr);
  /* Markers may reach a little past the area; nothing should reach far. */
  cairo_rectangle(cr, L->l - 8, L->t - 8, L->r - L->l + 16, L->b - L->t + 16);
  cairo_clip(cr);
  if (p->kind == TRACE_PLOT_BARS)
    chart_draw_bars(cr, p, L);
  else
    chart_draw_lines(cr, p, L);
  cairo_restore(cr);

  /* Axes, ticks and their labels. */
  set_rgb(cr, C_AXIS);
  cairo_set_line_width(cr, 1);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_SQUARE);
  double ax = crisp(L->l) - 1, ay = crisp(L->b);
  if (L->ylo < 0 && L->yhi > 0) { /* the zero line, where bars turn */
    double z = crisp(px_of_y(L, 0));
    cairo_move_to(cr, ax, z);
    cairo_line_to(cr, L->r, z);
  }
  cairo_move_to(cr, ax, L->t);
  cairo_line_to(cr, ax, ay);
  cairo_line_to(cr, L->r, ay);
  set_font(cr, TICK_SIZE, FALSE);
  for (guint i = 0; i < L->yt->len; i++) {
    const Tick *t = &g_array_index(L->yt, Tick, i);
    double y = crisp(px_of_y(L, t->v));
    cairo_move_to(cr, ax - TICK_LEN, y);
    cairo_line_to(cr, ax, y);
  }
  for (guint i = 0; i < L->xt->len; i++) {
    const Tick *t = &g_array_index(L->xt, Tick, i);
    double x = crisp(px_of_x(L, t->v));
    cairo_move_to(cr, x, ay);
    cairo_line_to(cr, x, ay + TICK_LEN);
  }
  cairo_stroke(cr);
  for (guint i = 0; i < L->yt->len; i++) {
    const Tick *t = &g_array_index(L->yt, Tick, i);
    text_at(cr, ax - TICK_LEN - 6, px_of_y(L, t->v), 1, 0.5, t->label);
  }
  for (guint i = 0; i < L->xt->len; i++) {
    const Tick *t = &g_array_index(L->xt, Tick, i);
    if (!t->label)
      continue;
    double x = px_of_x(L, t->v), y = ay + TICK_LEN + 4;
    if (L->x_rotated) {
      cairo_save(cr);
      cairo_translate(cr, x, y);
      cairo_rotate(cr, -G_PI / 4);
      text_at(cr, 0, 0, 1, 0, t->label);
      cairo_restore(cr);
    } else {
      text_at(cr, x, y, 0.5, 0, t->label);
    }
  }

  set_rgb(cr, C_TEXT);
  if (L->x_label) {
    set_font(cr, L->x_label_size, FALSE);
    double w = text_width(cr, L->x_label);
    double x = CLAMP((L->l + L->r) / 2, PAD + w / 2, W - PAD - w / 2);
    text_at(cr, x, H - PAD, 0.5, 1, L->x_label);
  }
  if (L->y_label) {
    set_font(cr, L->y_label_size, FALSE);
    cairo_save(cr);
    cairo_translate(cr, PAD, (L->t + L->b) / 2);
    cairo_rotate(cr, -G_PI / 2);
    text_at(cr, 0, 0, 0.5, 0, L->y_label);
    cairo_restore(cr);
  }
  if (L->legend)
    chart_draw_legend(cr, p, L);
}

GBytes *trace_plot_png(const TracePlot *p) {
  g_return_val_if_fail(p != NULL, NULL);
  ChartLayout L;
  cairo_t *cr = measure_begin();
  chart_layout(p, cr, &L);
  cairo_destroy(cr);
  GBytes *out = render_png(TRACE_PLOT_WIDTH, TRACE_PLOT_HEIGHT, chart_draw, p, &L);
  chart_layout_clear(&L);
  return out;
}

GBytes *trace_plot_svg(const TracePlot *p) {
  g_return_val_if_fail(p != NULL, NULL);
  ChartLayout L;
  cairo_t *cr = measure_begin();
  chart_layout(p, cr, &L);
  cairo_destroy(cr);
  GBytes *out = render_svg(TRACE_PLOT_WIDTH, TRACE_PLOT_HEIGHT, chart_draw, p, &L);
  chart_layout_clear(&L);
  return out;
}

gboolean trace_plot_pixel(const TracePlot *p, double x, double y, double *x_px, double *y_px) {
  g_return_val_if_fail(p != NULL, FALSE);
  ChartLayout L;
  cairo_t *cr = measure_begin();
  chart_layout(p, cr, &L);
  cairo_destroy(cr);
  double u = 0;
  gboolean ok = usable(y) && y >= L.ylo && y <= L.yhi;
  if (ok && p->kind == TRACE_PLOT_BARS) {
    guint cat = 0;
    ok = bar_category(&L, x, &cat);
    u = cat;
  } else if (ok) {
    ok = x_axis_units(&L, x, &u) && u >= L.xlo && u <= L.xhi;
  }
  if (ok) {
    if (x_px)
      *x_px = px_of_x(&L, u);
    if (y_px)
      *y_px = px_of_y(&L, y);
  }
  chart_layout_clear(&L);
  return ok;
}

/* ------------------------------------------------------------------ */
/* Gantt diagrams */

typedef struct {
  char *legend;
  guint32 rgb;
} GanttClass;

typedef struct {
  guint row, cls;
  double t0, t1;
  char *label;
} GanttBox;

struct _TraceGantt {
  char *title, *subtitle;
  guint rows;
  char **row_labels; /* rows entries */
  double t_end;
  GArray *classes; /* GanttClass */
  GArray *boxes;   /* GanttBox */
};

TraceGantt *trace_gantt_new(const char *title, guint rows, const char *const *row_labels, double t_end_s) {
  TraceGantt *g = g_new0(TraceGantt, 1);
  g->title = clean_text(title);
  g->subtitle = clean_text(NULL);
  g->rows = rows;
  g->row_labels = g_new0(char *, rows + 1);
  for (guint i = 0; i < rows; i++)
    g->row_labels[i] = clean_text(row_labels ? row_labels[i] : NULL);
  g->t_end = t_end_s;
  g->classes = g_array_new(FALSE, FALSE, sizeof(GanttClass));
  g->boxes = g_array_new(FALSE, FALSE, sizeof(GanttBox));
  return g;
}

void trace_gantt_free(TraceGantt *g) {
  if (!g)
    return;
  g_free(g->title);
  g_free(g->subtitle);
  g_strfreev(g->row_labels);
  for (guint i = 0; i < g->classes->len; i++)
    g_free(g_array_index(g->classes, GanttClass, i).legend);
  for (guint i = 0; i < g->boxes->len; i++)
    g_free(g_array_index(g->boxes, GanttBox, i).label);
  g_array_unref(g->classes);
  g_array_unref(g->boxes);
  g_free(g);
}

void trace_gantt_set_subtitle(TraceGantt *g, const char *text) {
  g_return_if_fail(g != NULL);
  g_free(g->subtitle);
  g->subtitle = clean_text(text);
}

guint trace_gantt_add_class(TraceGantt *g, const char *legend, guint32 rgb) {
  g_return_val_if_fail(g != NULL, 0);
  GanttClass c = {clean_text(legend), rgb & 0xffffff};
  g_array_append_val(g->classes, c);
  return g->classes->len - 1;
}

void trace_gantt_add_box(TraceGantt *g, guint row, double start_s, double end_s, guint cls, const char *label) {
  g_return_if_fail(g != NULL);
  g_return_if_fail(row < g->rows);
  g_return_if_fail(cls < g->classes->len);
  if (!isfinite(start_s) || !isfinite(end_s) || end_s <= start_s)
    return;
  GanttBox b = {row, cls, start_s, end_s, label && *label ? clean_text(label) : NULL};
  g_array_append_val(g->boxes, b);
}

typedef struct {
  Heading head;
  int height;
  double l, t, r, b;
  double t_end;          /* seconds at the right end of the axis */
  double unit_scale;     /* seconds -> the axis' unit */
  const char *axis_label;
  GArray *ticks;         /* Tick, v in the axis' unit */
  char **rows;           /* fitted row labels */
  double row_size;
  /* legend: one entry per class with a legend, in rows that wrap */
  GArray *legend_xy;     /* double pairs, the swatch's top left */
  GPtrArray *legend_text;
  GArray *legend_cls;    /* guint */
} GanttLayout;

static void gantt_layout_clear(GanttLayout *L) {
  heading_clear(&L->head);
  ticks_clear(L->ticks);
  g_array_unref(L->ticks);
  g_strfreev(L->rows);
  g_array_unref(L->legend_xy);
  g_ptr_array_unref(L->legend_text);
  g_array_unref(L->legend_cls);
}

static double gantt_px(const GanttLayout *L, double t_s) { return L->l + t_s / L->t_end * (L->r - L->l); }

/* Lays the diagram out: the picture's height follows from the rows. */
static void gantt_layout(const TraceGantt *g, cairo_t *cr, GanttLayout *L) {
  memset(L, 0, sizeof *L);
  const double W = TRACE_GANTT_WIDTH;
  L->ticks = g_array_new(FALSE, FALSE, sizeof(Tick));
  L->legend_xy = g_array_new(FALSE, FALSE, sizeof(double));
  L->legend_text = g_ptr_array_new_with_free_func(g_free);
  L->legend_cls = g_array_new(FALSE, FALSE, sizeof(guint));
  double y = heading_layout(cr, &L->head, g->title, g->subtitle, W);

  L->t_end = g->t_end;
  if (!isfinite(L->t_end) || L->t_end <= 0) {
    L->t_end = 0;
    for (guint i = 0; i < g->boxes->len; i++)
      L->t_end = MAX(L->t_end, g_array_index(g->boxes, GanttBox, i).t1);
    if (L->t_end <= 0)
      L->t_end = 1;
  }
  /* The unit in which the axis reads in whole numbers of modest size. */
  if (L->t_end >= 2) {
    L->unit_scale = 1;
    L->axis_label = "time (s)";
  } else if (L->t_end >= 2e-3) {
    L->unit_scale = 1e3;
    L->axis_label = "time (ms)";
  } else {
    L->unit_scale = 1e6;
    L->axis_label = "time (\u00b5s)";
  }

  L->rows = g_new0(char *, g->rows + 1);
  double widest = 0;
  L->row_size = LEGEND_SIZE;
  for (guint i = 0; i < g->rows; i++) {
    L->rows[i] = fit_text(cr, g->row_labels[i], LEGEND_SIZE, FALSE, FALSE, 280, NULL);
    widest = MAX(widest, text_width(cr, L->rows[i]));
  }
  L->l = PAD + widest + (widest > 0 ? 12 : 8);
  L->r = W - PAD - 16;

  /* The legend, left-aligned with the plot area, wrapping at the right. */
  set_font(cr, LEGEND_SIZE, FALSE);
  double lh = MAX(line_height(cr), 14), lx = L->l, ly = y + 10;
  gboolean any = FALSE;
  for (guint c = 0; c < g->classes->len; c++) {
    const GanttClass *k = &g_array_index(g->classes, GanttClass, c);
    if (!*k->legend)
      continue;
    char *t = fit_text(cr, k->legend, LEGEND_SIZE, FALSE, FALSE, 400, NULL);
    double w = 14 + 6 + text_width(cr, t);
    if (any && lx + w > W - PAD) {
      lx = L->l;
      ly += lh + 6;
    }
    double xy[2] = {lx, ly + (lh - 14) / 2};
    g_array_append_vals(L->legend_xy, xy, 2);
    g_ptr_array_add(L->legend_text, t);
    g_array_append_val(L->legend_cls, c);
    lx += w + 24;
    any = TRUE;
  }
  if (any)
    y = ly + lh;
  L->t = y + 16;
  L->b = L->t + TRACE_GANTT_ROW_HEIGHT * MAX(g->rows, 1);

  /* Time ticks, thinned until their labels keep apart; the last label
   * must not leave the picture. */
  set_font(cr, TICK_SIZE, FALSE);
  double span = L->t_end * L->unit_scale;
  for (int pass = 0; pass < 2; pass++) {
    double scale = (L->r - L->l) / span;
    for (double target = CLAMP(floor((L->r - L->l) / 110), 2, 14); target >= 1; target--) {
      ticks_clear(L->ticks);
      linear_ticks(L->ticks, 0, span, nice_step(span, target));
      if (!ticks_crowded(cr, L->ticks, 0, 0, scale))
        break;
    }
    if (L->ticks->len > 0) {
      const Tick *last = &g_array_index(L->ticks, Tick, L->ticks->len - 1);
      double over = L->l + last->v * scale + text_width(cr, last->label) / 2 - (W - PAD);
      if (over > 0)
        L->r -= over;
    }
  }
  double tick_h = line_height(cr);
  set_font(cr, AXIS_LABEL_SIZE, FALSE);
  L->height = (int)ceil(L->b + TICK_LEN + 4 + tick_h + 8 + line_height(cr) + PAD);
}

/* Black or white, whichever contrasts more with `rgb` (WCAG 2 contrast of
 * the relative luminance). */
static guint32 label_colour(guint32 rgb) {
  double c[3], L = 0;
  for (int i = 0; i < 3; i++) {
    double v = ((rgb >> (16 - 8 * i)) & 0xff) / 255.0;
    c[i] = v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4);
  }
  L = 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  return (L + 0.05) / 0.05 > 1.05 / (L + 0.05) ? 0x000000 : 0xffffff;
}

static void gantt_draw(cairo_t *cr, gconstpointer object, gconstpointer layout) {
  const TraceGantt *g = object;
  const GanttLayout *L = layout;
  const double W = TRACE_GANTT_WIDTH, row_h = TRACE_GANTT_ROW_HEIGHT;
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  heading_draw(cr, &L->head, W);

  set_font(cr, LEGEND_SIZE, FALSE);
  for (guint e = 0; e < L->legend_text->len; e++) {
    const GanttClass *k = &g_array_index(g->classes, GanttClass, g_array_index(L->legend_cls, guint, e));
    double x = round(g_array_index(L->legend_xy, double, 2 * e));
    double y = round(g_array_index(L->legend_xy, double, 2 * e + 1));
    set_rgb(cr, k->rgb);
    cairo_rectangle(cr, x, y, 14, 14);
    cairo_fill(cr);
    set_rgb(cr, C_TEXT);
    text_at(cr, x + 20, y + 7, 0, 0.5, g_ptr_array_index(L->legend_text, e));
  }

  /* Every other row shaded, so a long row reads across to its label. */
  double l = round(L->l), r = round(L->r), t = round(L->t), b = round(L->b);
  set_rgb(cr, C_ROW_SHADE);
  for (guint i = 1; i < g->rows; i += 2) {
    cairo_rectangle(cr, l, t + row_h * i, r - l, row_h);
    cairo_fill(cr);
  }
  set_rgb(cr, C_GRID);
  cairo_set_line_width(cr, 1);
  double span = L->t_end * L->unit_scale;
  for (guint i = 0; i < L->ticks->len; i++) {
    double x = crisp(L->l + g_array_index(L->ticks, Tick, i).v / span * (L->r - L->l));
    cairo_move_to(cr, x, t);
    cairo_line_to(cr, x, b);
  }
  cairo_stroke(cr);

  cairo_save(cr);
  cairo_rectangle(cr, l, t, r - l, b - t);
  cairo_clip(cr);
  set_font(cr, TICK_SIZE, FALSE);
  double text_h = line_height(cr);
  for (guint i = 0; i < g->boxes->len; i++) {
    const GanttBox *bx = &g_array_index(g->boxes, GanttBox, i);
    guint32 rgb = g_array_index(g->classes, GanttClass, bx->cls).rgb;
    /* Whole pixels: crisp edges, and neighbours separated by the borders. */
    /* Clamped near the area: cairo's fixed-point coordinates wrap far out. */
    double x0 = round(CLAMP(gantt_px(L, bx->t0), l - 2, r + 2)), x1 = round(CLAMP(gantt_px(L, bx->t1), l - 2, r + 2));
    x1 = MAX(x1, x0 + 1);
    double y0 = t + row_h * bx->row + 8, h = row_h - 16, w = x1 - x0;
    set_rgb(cr, rgb);
    cairo_rectangle(cr, x0, y0, w, h);
    cairo_fill(cr);
    if (w >= 4) {
      cairo_set_source_rgb(cr, 1, 1, 1);
      cairo_rectangle(cr, x0 + 0.5, y0 + 0.5, w - 1, h - 1);
      cairo_stroke(cr);
    }
    if (bx->label && text_width(cr, bx->label) + 6 <= w && text_h + 2 <= h) {
      set_rgb(cr, label_colour(rgb));
      text_at(cr, (x0 + x1) / 2, y0 + h / 2, 0.5, 0.5, bx->label);
    }
  }
  cairo_restore(cr);

  set_rgb(cr, C_AXIS);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_SQUARE);
  double ax = crisp(l) - 1, ay = crisp(b);
  cairo_move_to(cr, ax, t);
  cairo_line_to(cr, ax, ay);
  cairo_line_to(cr, r, ay);
  for (guint i = 0; i < L->ticks->len; i++) {
    double x = crisp(L->l + g_array_index(L->ticks, Tick, i).v / span * (L->r - L->l));
    cairo_move_to(cr, x, ay);
    cairo_line_to(cr, x, ay + TICK_LEN);
  }
  cairo_stroke(cr);
  for (guint i = 0; i < L->ticks->len; i++) {
    const Tick *tk = &g_array_index(L->ticks, Tick, i);
    text_at(cr, L->l + tk->v / span * (L->r - L->l), ay + TICK_LEN + 4, 0.5, 0, tk->label);
  }
  set_font(cr, L->row_size, FALSE);
  set_rgb(cr, C_TEXT);
  for (guint i = 0; i < g->rows; i++)
    text_at(cr, ax - 10, t + row_h * (i + 0.5), 1, 0.5, L->rows[i]);
  set_font(cr, AXIS_LABEL_SIZE, FALSE);
  text_at(cr, (L->l + L->r) / 2, L->height - PAD, 0.5, 1, L->axis_label);
}

GBytes *trace_gantt_png(const TraceGantt *g) {
  g_return_val_if_fail(g != NULL, NULL);
  GanttLayout L;
  cairo_t *cr = measure_begin();
  gantt_layout(g, cr, &L);
  cairo_destroy(cr);
  GBytes *out = render_png(TRACE_GANTT_WIDTH, L.height, gantt_draw, g, &L);
  gantt_layout_clear(&L);
  return out;
}

GBytes *trace_gantt_svg(const TraceGantt *g) {
  g_return_val_if_fail(g != NULL, NULL);
  GanttLayout L;
  cairo_t *cr = measure_begin();
  gantt_layout(g, cr, &L);
  cairo_destroy(cr);
  GBytes *out = render_svg(TRACE_GANTT_WIDTH, L.height, gantt_draw, g, &L);
  gantt_layout_clear(&L);
  return out;
}

void trace_gantt_size(const TraceGantt *g, int *width, int *height) {
  g_return_if_fail(g != NULL);
  GanttLayout L;
  cairo_t *cr = measure_begin();
  gantt_layout(g, cr, &L);
  cairo_destroy(cr);
  if (width)
    *width = TRACE_GANTT_WIDTH;
  if (height)
    *height = L.height;
  gantt_layout_clear(&L);
}

gboolean trace_gantt_pixel(const TraceGantt *g, guint row, double t_s, double *x_px, double *y_px) {
  g_return_val_if_fail(g != NULL, FALSE);
  if (row >= g->rows || !isfinite(t_s))
    return FALSE;
  GanttLayout L;
  cairo_t *cr = measure_begin();
  gantt_layout(g, cr, &L);
  cairo_destroy(cr);
  gboolean ok = t_s >= 0 && t_s <= L.t_end;
  if (ok) {
    if (x_px)
      *x_px = gantt_px(&L, t_s);
    if (y_px)
      *y_px = round(L.t) + TRACE_GANTT_ROW_HEIGHT * (row + 0.5);
  }
  gantt_layout_clear(&L);
  return ok;
}
