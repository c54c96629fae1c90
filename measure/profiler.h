/* ptdsim — a torch.profiler trace (the Chrome trace-event JSON that
 * `torch.profiler.profile.export_chrome_trace` writes, gzipped or not) read
 * into typed arrays: the GPU's operations (kernels, memsets, memcpys) on
 * their streams, the CUDA runtime and driver calls that launched them
 * (matched by correlation id), and the CPU ops.  Only what is measured; the
 * figures made from it are fit/step.c's. */
#pragma once

#include <glib.h>

/* The most a trace may have: bytes uncompressed, and events of each kind. */
#define CALIB_PROF_MAX_BYTES ((gsize)512 << 20)
#define CALIB_PROF_MAX_EVENTS 4000000u

typedef enum { CALIB_PROF_KERNEL, CALIB_PROF_MEMSET, CALIB_PROF_MEMCPY } CalibProfGpuKind;

/* Times are integer nanoseconds on the trace's clock (its "ts" and "dur",
 * microseconds with three decimals, rounded to the ns). */
typedef struct {
  CalibProfGpuKind kind;
  gint64 stream;
  gint64 start_ns, dur_ns;
  const char *name;    /* in the trace's string chunk */
  gint64 correlation;  /* -1: the trace records none */
  gint launch;         /* index into `api` of the call that launched it, -1 if none */
} CalibProfGpuOp;

/* A CUDA runtime or driver call ("cuda_runtime", "cuda_driver"). */
typedef struct {
  gint64 tid;
  gint64 start_ns, dur_ns;
  const char *name;
  gint64 correlation; /* -1: none */
  gint64 external_id; /* args["External id"]: the CPU op that made the call (the same id), -1: none */
  gboolean launched;  /* a GPU op of the trace carries its correlation */
} CalibProfApi;

typedef struct {
  gint64 tid;
  gint64 start_ns, dur_ns;
  const char *name;
  gint64 external_id; /* args["External id"], -1: none */
} CalibProfCpuOp;

typedef struct {
  char *path;
  char *sha256;       /* of the file as stored (compressed or not) */
  char *device;       /* deviceProperties[0].name, or NULL */
  GArray *gpu;        /* CalibProfGpuOp, by start, end, correlation */
  GArray *api;        /* CalibProfApi, by thread, start */
  GArray *cpu;        /* CalibProfCpuOp, by thread, start */
  gboolean has_window;
  gint64 window_start_ns, window_dur_ns; /* the profiler's own recorded span ("Trace" event), when present */
  GStringChunk *names;
} CalibProfTrace;

/* Reads and checks a trace at `path`.  NULL with one line in CALIB_ERROR
 * that names the file and what is wrong (not a file, not JSON, a truncated
 * gzip, no traceEvents, an event whose times are not finite non-negative
 * numbers, no GPU operation, a correlation id twice (on CUDA calls, or on GPU
 * ops not launched by one CUDA graph launch), a GPU op whose launch
 * is missing where the trace records launches, too large). */
CalibProfTrace *calib_prof_load(const char *path, GError **error);
/* The same on text already in memory (`len` bytes; plain JSON, no gzip):
 * the fuzz target's entry.  `label` stands for the file in messages. */
CalibProfTrace *calib_prof_parse(const char *text, gsize len, const char *label, GError **error);
void calib_prof_free(CalibProfTrace *t);
const char *calib_prof_gpu_kind_name(CalibProfGpuKind k);
