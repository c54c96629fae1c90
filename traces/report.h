/* ptdsim — reports of a simulated configuration: the --format json contract
 * of SPEC.md and a short human-readable text. */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>

#include "../runtime/runtime.h"
#include "../plan/plan.h"
#include "../terapipe/terapipe.h"

/* A model shape's keys (config's layers ... parameters, doc/output.md),
 * added to `o`. */
void trace_shape_json(cJSON *o, const ModelShape *m);
cJSON *trace_result_json(const SimPlan *plan, const ModelProfile *profile, const TopoCluster *cluster,
                         const SimResult *r);
/* The text report of a run, from its JSON (above; TeraPipe's "terapipe"
 * member included): what `ptdsim run` prints and `ptdsim report` prints
 * again from a trace. */
void trace_report_text(GString *out, const cJSON *run);
/* The whole run's object of the run JSON ("whole_run", doc/output.md). */
cJSON *trace_whole_run_json(const RtOptions *o, const RtResult *r);
/* The slicing of a TeraPipe run's JSON ("terapipe": batch_slices and
 * token_slices); clear it with sim_terapipe_slicing_clear. */
void trace_slicing_from_json(const cJSON *terapipe, SimTeraPipeSlicing *out);

/* FALSE, with a one-line error naming the key, when a run's JSON holds a
 * negative, NaN, infinite or null number: no such result is ever printed
 * (an iteration shorter than a nanosecond gives an infinite TFLOP/s). */
gboolean trace_run_json_check(const cJSON *run, GError **error);

/* FALSE, with an error naming the first missing key, when a run's JSON
 * (read back from a trace) lacks a key its text report reads, holds one
 * with another type or an empty name, or fails trace_run_json_check: a
 * report is never printed with zeros where results are missing. */
gboolean trace_report_check(const cJSON *run, GError **error);
