/* ptdsim — regenerating the papers' tables and figures.
 *
 * A figure is a registered function that runs its configurations through
 * trace_figure_run and fills a TraceFigureOut: the rows (one JSON object per
 * point of the figure, the same rows as the CSV), a text table, and a
 * picture (a chart or a schedule diagram, plot/plot.h).
 *
 * trace_figure_run gives a configuration's `run --format json` object in
 * one of three ways, the same to the byte for the figure: by simulating it,
 * by simulating it and keeping its trace (DIR/FIGURE.K.json.gz for the K-th
 * configuration the figure runs), or by reading that trace back, simulating
 * nothing, after checking that it was made from the very request the figure
 * asks for (traces/runner.h).  Figures are deterministic, so the K-th
 * request is the same every time. */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>

#include "../runtime/runtime.h"
#include "../plan/plan.h"
#include "../plot/plot.h"

typedef enum {
  TRACE_FIGURE_SIMULATE,    /* simulate, keep nothing */
  TRACE_FIGURE_SAVE_TRACES, /* simulate and write every configuration's trace to trace_dir */
  TRACE_FIGURE_FROM_TRACES, /* read every configuration from trace_dir; simulate nothing */
} TraceFigureMode;

typedef struct {
  const TopoCluster *cluster;
  const ModelProfile *profile;
  const SimNetwork *network;   /* --network; NULL: run's default */
  const SimWorkload *workload; /* --workload for the TeraPipe figures; NULL: layers, TeraPipe's benchmark */
  TraceFigureMode mode;
  const char *trace_dir; /* for SAVE_TRACES and FROM_TRACES */
  const char *name;      /* the figure's name: its traces' file names */
  guint runs;            /* configurations run so far (the next trace's K) */
  const RtOptions *rt;   /* the whole run's options for runs with a token budget; NULL: none */
} TraceFigureContext;

/* What a figure produces.  `json` is {"figure": NAME, "rows": [...], ...}
 * (trace_figure_out_init makes it); `text` is the table printed on stdout;
 * the picture is `plot` or `gantt` (at most one; NULL: none yet). */
typedef struct {
  cJSON *json;
  cJSON *rows; /* json's "rows" array */
  GString *text;
  TracePlot *plot;
  TraceGantt *gantt;
} TraceFigureOut;

void trace_figure_out_init(TraceFigureOut *out, const char *figure_name);
void trace_figure_out_clear(TraceFigureOut *out);

typedef struct {
  const char *name;
  const char *description;
  /* The cluster the figure runs on when --cluster is not given; NULL:
   * selene, the program's default. */
  const char *default_cluster;
  gboolean (*run)(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
  /* The figure compares machines of its own choosing: --cluster and
   * --profile do not apply to it. */
  gboolean own_machines;
} TraceFigure;

const TraceFigure *trace_figures(guint *n);
const TraceFigure *trace_figure_lookup(const char *name);

/* One configuration of the figure: `run --format json`'s object for `req`
 * (owned by the caller), simulated or read from its trace as ctx->mode
 * says.  In FROM_TRACES a missing, damaged or foreign trace, or one made
 * from another request, is a one-line error naming the file. */
cJSON *trace_figure_run(TraceFigureContext *ctx, const SimPlanRequest *req, GError **error);
/* The figure's --network, where given, in the request. */
void trace_figure_network(const TraceFigureContext *ctx, SimPlanRequest *req);
/* As trace_figure_run, and also the trace's events ("traceEvents", owned by
 * the caller): for the schedule diagrams, which draw the timeline itself.
 * Without a trace directory the trace goes through a temporary file. */
cJSON *trace_figure_run_events(TraceFigureContext *ctx, const SimPlanRequest *req, cJSON **events, GError **error);

/* The file of the K-th configuration's trace. */
char *trace_figure_trace_path(const TraceFigureContext *ctx, guint k);

/* The rows as CSV: one header line of column names, the union of the rows'
 * keys in order of first appearance, nested objects flattened to dotted
 * names ("time_breakdown_s.compute"); then one line per row.  Numbers are
 * written with the fewest digits that read back as the same double, arrays
 * as their compact JSON, strings quoted where CSV needs it, absent and null
 * values empty. */
char *trace_figure_csv(const cJSON *rows);

/* One CSV cell, as trace_figure_csv writes them: a JSON value, or text
 * (quoted where CSV needs it). */
void trace_csv_cell(GString *s, const cJSON *v);
void trace_csv_text(GString *s, const char *text);

/* Writes NAME.json, NAME.csv and, when the figure has a picture, NAME.svg
 * and NAME.png into `dir` (created if missing): every file is written to a
 * temporary name first and renamed into place only once all are written.
 * On success *written lists the paths (owned by the caller: g_strfreev). */
gboolean trace_figure_write(const TraceFigureOut *out, const char *name, const char *dir, char ***written,
                            GError **error);

/* The run request of one row of the SC21 Table 1 reference (its published
 * settings: seq 2048, vocab 51200, interleaved where layers_per_chunk is set). */
gboolean trace_table1_request(const cJSON *row, SimPlanRequest *req, GError **error);

/* Loads the papers' reference configurations (traces/reference/FILE). */
cJSON *trace_reference_load(const char *file, GError **error);

/* A JSON number or 0 (NAN for trace_num_or_nan) when `o` has no number at
 * the dotted path ("time_breakdown_s.compute"): for reading run JSON. */
double trace_num(const cJSON *o, const char *path);
double trace_num_or_nan(const cJSON *o, const char *path);
/* Copies the numbers at `paths` (dotted, as trace_num) from run JSON into a
 * row, under their last component ("compute"), or under `as` if given. */
void trace_row_copy(cJSON *row, const cJSON *run, const char *path, const char *as);
