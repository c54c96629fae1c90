/* ptdsim — Perfetto / Chrome trace-event JSON of a simulated timeline
 * (`ptdsim run --trace FILE`).
 *
 * Format: the Chrome trace-event format ("Trace Event Format", Google, the
 * JSON Object Format with "traceEvents", "displayTimeUnit" and "otherData"),
 * which ui.perfetto.dev and chrome://tracing open.  One "X" (complete) event
 * per op per stream it occupies, ts/dur in microseconds written exactly to
 * the nanosecond; pid = the GPU's number in the cluster, tid = the stream;
 * "M" events name processes "GPU n (stage s, tp i, replica k)" and threads by
 * stream.
 *
 * After "traceEvents" the object holds "ptdsim": the request and the run's
 * results (traces/runner.h), so that the trace describes itself.  A path
 * ending in ".gz" is written gzip-compressed.
 *
 * The file is written to a temporary file in the target's directory, created
 * when the trace is opened (so an unwritable place fails before any
 * simulation), and renamed over the target only when complete: an error
 * leaves no partial file. */
#pragma once

#include "../taskgraph/timeline.h"

/* Traces beyond this many events are refused (the UI becomes unusable and
 * the file runs to hundreds of MB); the error suggests fewer microbatches.
 * Traces kept for rebuilding figures, which are read back by ptdsim rather
 * than opened in a UI, may be larger (trace_perfetto_set_max_events). */
#define TRACE_PERFETTO_MAX_EVENTS 2000000u

typedef struct _TracePerfetto TracePerfetto;

/* Creates the temporary file next to `path` (base/outfile.h: a directory,
 * link, pipe or device, or one of `inputs`, the NULL-terminated files the
 * run reads, is refused); one-line GError if it cannot. */
TracePerfetto *trace_perfetto_open(const char *path, const char *const *inputs, GError **error);
/* Raises (or lowers) the event limit of this trace. */
void trace_perfetto_set_max_events(TracePerfetto *trace, guint64 max_events);
/* A SimTimelineFn (`data` is the TracePerfetto): writes the whole trace to
 * the temporary file. */
gboolean trace_perfetto_write(const SimTimeline *timeline, gpointer data, GError **error);
/* Closes the object, with `meta` as its "ptdsim" member (NULL: none), and
 * renames the finished file into place. */
gboolean trace_perfetto_commit(TracePerfetto *trace, const cJSON *meta, GError **error);
/* Removes the temporary file unless committed, and frees.  NULL is fine. */
void trace_perfetto_free(TracePerfetto *trace);
/* Events the last trace_perfetto_write wrote (metadata included). */
guint64 trace_perfetto_n_events(const TracePerfetto *trace);

#define TRACE_PERFETTO_ERROR (trace_perfetto_error_quark())
GQuark trace_perfetto_error_quark(void);
typedef enum { TRACE_PERFETTO_ERROR_IO, TRACE_PERFETTO_ERROR_TOO_BIG } TracePerfettoError;
