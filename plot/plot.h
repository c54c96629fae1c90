/* ptdsim — charts and schedule diagrams for the figure gallery, drawn with
 * cairo and rendered in memory to PNG and SVG.
 *
 * Two kinds of picture:
 *  - TracePlot: a line chart (lines with markers) or a grouped bar chart,
 *    1200 x 750 px, with the papers' published values overlaid;
 *  - TraceGantt: a pipeline schedule, one row per device, boxes on a time
 *    axis, 1400 px wide and as tall as its rows need.
 *
 * The output is a pure function of the calls made: the same calls give the
 * same bytes (no timestamps, no addresses, no hash-table order; one font,
 * "DejaVu Sans" through cairo's toy API, unhinted so that PNG and SVG lay
 * text out alike), so that figures can be committed and compared.  Writing
 * the bytes to files is the caller's business.
 *
 * Texts are copied; NULL texts are empty, invalid UTF-8 is repaired and
 * control characters become spaces (cairo draws one line per string).
 * Labels too long for their place are set smaller, then cut with "…".
 * Non-finite values are skipped, never drawn. */
#pragma once

#include <glib.h>

/* The picture sizes, in pixels (SVG user units). */
#define TRACE_PLOT_WIDTH 1200
#define TRACE_PLOT_HEIGHT 750
#define TRACE_GANTT_WIDTH 1400
#define TRACE_GANTT_ROW_HEIGHT 60

typedef struct _TracePlot TracePlot;

typedef enum {
  TRACE_PLOT_LINES, /* one polyline with filled circle markers per series */
  TRACE_PLOT_BARS,  /* one bar per series in each category, series side by side */
} TracePlotKind;

/* A new, empty chart.  `x_label` and `y_label` are printed as given, so
 * they carry the units ("GPUs", "TFLOP/s per GPU").  Any text may be NULL. */
TracePlot *trace_plot_new(TracePlotKind kind, const char *title, const char *x_label, const char *y_label);
/* Frees the chart and everything it copied.  NULL is fine. */
void trace_plot_free(TracePlot *p);
/* One line under the title, smaller and grey: the configuration the chart
 * was simulated with.  NULL or "" removes it. */
void trace_plot_set_subtitle(TracePlot *p, const char *text);
/* x on a base-2 logarithmic axis (GPU counts, microbatch sizes): ticks at
 * the powers of two, labelled as plain numbers (64, 128, 1024).  Points
 * with x <= 0 cannot be placed and are skipped.  Ignored for bar charts and
 * when categories are set, where x is a category. */
void trace_plot_set_x_log2(TracePlot *p, gboolean on);
/* Whether the y axis includes 0 (default TRUE: throughput and time are
 * compared against zero).  FALSE fits the axis to the data. */
void trace_plot_set_y_from_zero(TracePlot *p, gboolean on);
/* Names the x categories, left to right; `labels` has `n` entries (copied;
 * NULL entries are empty).  With categories a point's x is the category
 * index 0 .. n-1, for bars and for lines alike.  n = 0 removes them.
 * Without categories a bar chart makes one category per distinct x value,
 * ascending, labelled with the value. */
void trace_plot_set_categories(TracePlot *p, const char *const *labels, guint n);
/* Adds a series of `n` points (copied), drawn in the order added, in the
 * colour trace_plot_palette_rgb(index).  `x` NULL means x = 0 .. n-1.  A
 * NAN (or infinite) y is no point: lines break there, bars are left out.
 * Line points are joined in the order given.  `name` is the legend entry;
 * the legend is left out when every series and reference is unnamed.
 * Returns the series index (0 for the first). */
guint trace_plot_add_series(TracePlot *p, const char *name, const double *x, const double *y, guint n);
/* Adds published values (copied) to compare against: hollow black diamonds
 * on a line chart; on a bar chart a black tick across the bar at the
 * published value, the k-th reference added marking the bars of the k-th
 * series (or the whole group when there is no such series).  `x` NULL means
 * x = 0 .. n-1.  The legend says `name`, or "published" when it is NULL or
 * empty; references of the same name share one legend entry. */
void trace_plot_add_reference(TracePlot *p, const char *name, const double *x, const double *y, guint n);
/* The chart as a 1200 x 750 RGB PNG; NULL only if cairo fails (out of
 * memory).  Free with g_bytes_unref. */
GBytes *trace_plot_png(const TracePlot *p);
/* The chart as an SVG 1.1 document, width="1200" height="750" (user units,
 * i.e. pixels); NULL only if cairo fails. */
GBytes *trace_plot_svg(const TracePlot *p);
/* Where the data point (x, y) lands in the pictures, in pixels from the top
 * left corner (x as for trace_plot_add_series: a category index with
 * categories, for a bar chart without them one of the bars' x values).
 * FALSE, leaving the outputs alone, when the point is off the axes or cannot
 * be placed.  For tests and for annotating the pictures. */
gboolean trace_plot_pixel(const TracePlot *p, double x, double y, double *x_px, double *y_px);
/* The colour of series `i` as 0xRRGGBB: the Okabe-Ito palette (Okabe & Ito,
 * "Color Universal Design", 2008), distinguishable under the common colour-
 * vision deficiencies, without black (black marks published values); it
 * repeats after 7.  Also handy for trace_gantt_add_class. */
guint32 trace_plot_palette_rgb(guint i);

typedef struct _TraceGantt TraceGantt;

/* A new schedule diagram: `rows` rows (devices), labelled top to bottom by
 * `row_labels` (`rows` entries, copied; the array or an entry may be NULL:
 * empty), and a time axis from 0 to `t_end_s` seconds, printed in s, ms or
 * µs, whichever reads best.  A `t_end_s` that is not positive and finite is
 * replaced by the latest box end at rendering time. */
TraceGantt *trace_gantt_new(const char *title, guint rows, const char *const *row_labels, double t_end_s);
/* Frees the diagram and everything it copied.  NULL is fine. */
void trace_gantt_free(TraceGantt *g);
/* One line under the title: the configuration.  NULL or "" removes it. */
void trace_gantt_set_subtitle(TraceGantt *g, const char *text);
/* Defines a box class (forward, backward, ...) with its colour (0xRRGGBB)
 * and its legend entry, listed in the order defined; a NULL or empty legend
 * gets no entry.  Returns the class id, 0 for the first. */
guint trace_gantt_add_class(TraceGantt *g, const char *legend, guint32 rgb);
/* Adds a box on `row` from `start_s` to `end_s` seconds in class `cls`,
 * drawn over the boxes added before it, with `label` (may be NULL: none)
 * centred inside in white or black, whichever contrasts more with the
 * class colour, when it fits; otherwise the label is left out.  Boxes
 * with non-finite times or end_s <= start_s are skipped; the others are
 * drawn at least one pixel wide, however short.  `row` and `cls` must
 * exist. */
void trace_gantt_add_box(TraceGantt *g, guint row, double start_s, double end_s, guint cls, const char *label);
/* The diagram as an RGB PNG, TRACE_GANTT_WIDTH px wide and as tall as
 * the rows need (TRACE_GANTT_ROW_HEIGHT each, plus title, legend and axis);
 * NULL only if cairo fails. */
GBytes *trace_gantt_png(const TraceGantt *g);
/* The diagram as an SVG 1.1 document of the same size; NULL only if cairo
 * fails. */
GBytes *trace_gantt_svg(const TraceGantt *g);
/* The size the pictures will have, in pixels. */
void trace_gantt_size(const TraceGantt *g, int *width, int *height);
/* Where time `t_s` on row `row` (its vertical middle) lands in the
 * pictures, in pixels from the top left corner; FALSE, leaving the outputs
 * alone, when the row does not exist or the time is off the axis. */
gboolean trace_gantt_pixel(const TraceGantt *g, guint row, double t_s, double *x_px, double *y_px);
