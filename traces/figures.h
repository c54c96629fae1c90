/* ptdsim — regenerating the papers' tables and figures.  Each figure is
 * registered with a name, a one-line description and its source. */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>

#include "../sim/plan.h"

typedef struct {
  const TopoCluster *cluster;
  const ModelProfile *profile;
  const char *network; /* --network; NULL: analytic */
  const char *workload; /* --workload for the TeraPipe figures; NULL: layers, TeraPipe's benchmark */
} TraceFigureContext;

typedef struct {
  const char *name;
  const char *description;
  /* Fills `json` ({"rows": [...], ...}) and, for text output, `text`. */
  gboolean (*run)(const TraceFigureContext *ctx, cJSON *json, GString *text, GError **error);
} TraceFigure;

const TraceFigure *trace_figures(guint *n);
const TraceFigure *trace_figure_lookup(const char *name);

/* The run request of one row of the SC21 Table 1 reference (its published
 * settings: seq 2048, vocab 51200, interleaved where layers_per_chunk is set). */
gboolean trace_table1_request(const cJSON *row, SimPlanRequest *req, GError **error);

/* Loads the SC21 reference configurations (traces/reference/megatron-sc21.json). */
cJSON *trace_reference_load(const char *file, GError **error);
