/* ptdsim — a torch.profiler trace (measure/profiler.h) replayed on the
 * discrete-event engine (sim/engine.h): its dependency graph rebuilt from
 * what the trace recorded and timed again, as measured or under a what-if.
 *
 * The graph.  Each host thread that launches GPU work (or synchronizes
 * with it) is a stream of host ops: its CUDA calls at their measured
 * durations, and the host time between consecutive calls kept as ops of
 * their own.  Each GPU op (kernel, memset, memcpy) is an op on its CUDA
 * stream at its measured duration, after the call that launched it (a
 * kernel may start once its launch call has returned) and after the op
 * before it on its stream.  A synchronizing call (cudaDeviceSynchronize,
 * cudaStreamSynchronize, cudaEventSynchronize and their driver forms)
 * waits for the GPU work launched before it, then takes only the time the
 * trace shows it taking after that work ended; a blocking copy or memset
 * (cudaMemcpy, cudaMemset without Async) launches its GPU op and returns
 * after it.  A thread waits for another where the trace shows it resuming
 * after the other's call: its call starts no sooner than the other's end
 * plus the host time the trace shows between the two.  A cudaStreamWaitEvent
 * makes the next GPU op its thread launches wait for the other streams'
 * work launched before it, where the trace shows that op starting after
 * that work ended (the trace does not say which event or stream).
 *
 * Replayed as measured, every op starts when the trace says it did, up to
 * the few that the trace shows starting before their launch call returned. */
#pragma once

#include <cjson/cJSON.h>

#include "../fit/step.h"
#include "../measure/profiler.h"
#include "../models/profile.h"

#define REPLAY_FORMAT "ptdsim-replay-1"
/* The most host threads a replay takes (threads that launch GPU work). */
#define REPLAY_MAX_THREADS 256u
/* The most CUDA streams (a rank's compute, copy and NCCL streams are a
 * handful; the cap bounds the work per synchronization). */
#define REPLAY_MAX_STREAMS 1024u

#define REPLAY_ERROR (replay_error_quark())
GQuark replay_error_quark(void);
typedef enum { REPLAY_ERROR_INVALID } ReplayError;

typedef struct {
  /* CUDA graphs: every CUDA call but the synchronizing ones costs nothing,
   * and so does the host time before it; the GPU runs what was launched
   * back to back, the host keeps only the synchronizations and the host
   * time before them. */
  gboolean cuda_graphs;
  /* Another GPU: both or neither.  Kernels re-priced by class at the
   * ratio of the source's rate to the target's (replay.c). */
  const ModelProfile *source, *target;
} ReplayOptions;

/* The re-priced classes: 16-bit GEMMs, FP8 GEMMs, attention, memory-bound
 * kernels (and memsets). */
typedef enum { REPLAY_RATE_GEMM, REPLAY_RATE_GEMM_FP8, REPLAY_RATE_ATTENTION, REPLAY_RATE_MEMORY, REPLAY_RATE_N } ReplayRate;

typedef struct {
  /* the trace */
  CalibStepFigures trace;     /* fit/step.c's figures of it */
  gint64 origin_ns;           /* the first replayed call's or GPU op's start: the replay's time 0 */
  gint64 trace_span_ns;       /* from there to the last replayed call's or GPU op's end */
  guint threads, threads_skipped; /* host threads replayed; threads that launch nothing, left out */
  guint calls, calls_skipped; /* their CUDA calls */
  guint syncs, blocking, stream_waits;
  guint waits_kept, waits_dropped; /* cross-stream dependencies a stream wait made, and those the trace contradicts */
  guint thread_deps;          /* waits of one thread for another */
  /* the replay */
  gint64 step_ns;             /* time 0 to the last op's end */
  gint64 gpu_first_ns, gpu_span_ns, gpu_busy_ns;
  gint64 host_call_ns, host_gap_ns; /* the replayed threads' calls and host time between them, summed */
  gint64 class_ns[CALIB_STEP_N_CLASSES];
  gint64 op_ns;               /* the GPU ops' durations, summed */
  double ratio[REPLAY_RATE_N]; /* time multipliers applied (1 without another GPU) */
  guint repriced[REPLAY_RATE_N];
  guint ops;                  /* engine ops */
  gint64 *gpu_start_ns, *gpu_end_ns; /* per t->gpu op, its replayed start and end */
  /* per t->api call, its replayed start and end (-1: not replayed); a
   * synchronizing call or blocking copy from when its thread reached it */
  gint64 *call_start_ns, *call_end_ns;
} ReplayResult;

/* Rebuilds the graph of `t` and runs it.  FALSE with one line in `error`
 * when the trace cannot be replayed (no CUDA calls, a GPU op without a
 * correlation id or its launch, too many threads or streams, an order no
 * replay can follow, an ideal profile). */
gboolean replay_run(const CalibProfTrace *t, const ReplayOptions *o, ReplayResult *r, GError **error);
void replay_result_clear(ReplayResult *r);
const char *replay_rate_name(ReplayRate k);
/* The report as JSON (times in microseconds). */
cJSON *replay_json(const CalibProfTrace *t, const ReplayOptions *o, const ReplayResult *r);
/* The replayed timeline as a Chrome trace (the format torch.profiler
 * exports, which Perfetto opens and `ptdsim replay` reads back): the
 * replayed threads' CUDA calls and the GPU ops, with their names,
 * correlation ids and streams, times from the replay's 0; `report` (taken,
 * or NULL) as its "ptdsim" member. */
cJSON *replay_chrome_trace(const CalibProfTrace *t, const ReplayResult *r, cJSON *report);
