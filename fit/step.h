/* ptdsim — the figures of one training step read from a torch.profiler
 * trace (measure/profiler.h): the GPU's span, busy time and idle share,
 * GPU time by class of kernel (GEMM, attention, the framework's own kernels
 * by kind), launches, the host's cost per launch, and how long the GPU
 * waited for the host. */
#pragma once

#include <cjson/cJSON.h>

#include "../measure/profiler.h"

#define CALIB_STEP_FORMAT "ptdsim-step-figures-1"

typedef enum {
  CALIB_STEP_GEMM,
  CALIB_STEP_ATTENTION,
  CALIB_STEP_ELEMENTWISE,
  CALIB_STEP_COPY,
  CALIB_STEP_FILL,
  CALIB_STEP_REDUCTION,
  CALIB_STEP_NORM,
  CALIB_STEP_INDEXING,
  CALIB_STEP_OTHER,
  CALIB_STEP_N_CLASSES
} CalibStepClass;

/* The class of a GPU op by its kind and kernel name (the patterns and their
 * sources are in step.c and doc/calibration.md). */
CalibStepClass calib_step_class(CalibProfGpuKind kind, const char *name);
const char *calib_step_class_name(CalibStepClass c);

typedef struct {
  gint64 first_ns;             /* the first GPU op's start */
  gint64 span_ns;              /* first GPU op's start to the last one's end */
  gint64 busy_ns;              /* the union of the GPU ops' intervals, over every stream */
  gint64 op_ns;                /* the sum of the GPU ops' durations (overlaps counted each time) */
  gint64 class_ns[CALIB_STEP_N_CLASSES];
  guint class_ops[CALIB_STEP_N_CLASSES];
  guint kernels, memsets, memcpys, streams;
  guint launches;              /* CUDA calls that launched at least one GPU op */
  guint launch_threads;        /* threads those calls were made on */
  guint gaps;                  /* consecutive launches on one thread */
  double gap_median_ns;        /* median start-to-start gap between them; 0 without gaps */
  double call_median_ns;       /* median duration of a launching call; 0 without launches */
  guint host_waits;            /* GPU ops that began an idle gap's end after their launch returned inside it */
  gint64 host_wait_ns;         /* the idle time before those ops */
  gint64 other_idle_ns;        /* the rest of the idle time within the span */
} CalibStepFigures;

void calib_step_figures(const CalibProfTrace *t, CalibStepFigures *f);
/* The trace's provenance and counts as the "source" object of `parent`
 * (what it is, said as `what`; its file, SHA-256, device, ops, streams,
 * calls, the profiler's window), returned for more keys. */
cJSON *calib_step_source_json(cJSON *parent, const char *what, const CalibProfTrace *t, const CalibStepFigures *f);
/* The figures and their provenance as JSON (times in microseconds). */
cJSON *calib_step_json(const CalibProfTrace *t, const CalibStepFigures *f);
