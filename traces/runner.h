/* ptdsim — one configuration, simulated or read back from its trace.
 *
 * `run`, the figures and the sweeps all get a configuration's results the
 * same way: as the JSON object `ptdsim run --format json` prints (the
 * output contract, doc/output.md).  trace_run simulates and, when asked,
 * writes the Perfetto trace of the run with the request and that JSON in its
 * metadata, so that the trace describes itself; trace_read gives the same
 * JSON back from such a file, after checking the file: a ptdsim trace whose
 * events give the stored iteration time and time breakdown (recomputed
 * here, the same sweep as the simulator's: sim/exposed.h).  Traces may be
 * gzip-compressed (a path ending in ".gz"). */
#pragma once

#include <cjson/cJSON.h>

#include "../runtime/runtime.h"
#include "../plan/plan.h"

#define TRACE_RUNNER_ERROR (trace_runner_error_quark())
GQuark trace_runner_error_quark(void);
typedef enum { TRACE_RUNNER_ERROR_READ, TRACE_RUNNER_ERROR_FORMAT, TRACE_RUNNER_ERROR_MISMATCH } TraceRunnerError;

/* The request as a trace stores it: every field of `req`, the cluster's and
 * the profile's names and SHA-256 of their files, and ptdsim's version. */
cJSON *trace_request_json(const SimPlanRequest *req, const TopoCluster *cluster, const ModelProfile *profile);

/* Simulates `req` and returns `run --format json`'s object (NULL and a
 * one-line error on failure).  With trace_path, also writes the run's trace
 * there (.gz: compressed), complete or not at all, of at most max_events
 * events (0: the default limit of perfetto.h). */
cJSON *trace_run(const SimPlanRequest *req, const TopoCluster *cluster, const ModelProfile *profile,
                 const char *trace_path, guint64 max_events, GError **error);
/* trace_run, and with a token budget the whole run's time under `rt`
 * (runtime/runtime.h; NULL: none) as the JSON's "whole_run" object. */
cJSON *trace_run_full(const SimPlanRequest *req, const RtOptions *rt, const TopoCluster *cluster,
                      const ModelProfile *profile, const char *trace_path, guint64 max_events, GError **error);

/* The event limit of the traces figures keep: they are read back by
 * ptdsim, not opened in a UI, so it is far above run --trace's. */
#define TRACE_FIGURE_MAX_EVENTS 20000000u

/* Reads a trace written by trace_run: returns its run JSON and, if `request`
 * is not NULL, its request, if `events` is not NULL its "traceEvents" (all
 * owned by the caller).  A missing,
 * truncated, malformed or foreign file, or one whose events disagree with
 * its metadata, is a one-line error naming the file. */
cJSON *trace_read(const char *path, cJSON **request, cJSON **events, GError **error);
