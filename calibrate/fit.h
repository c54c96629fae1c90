/* ptdsim — fitting a device profile to calibration measurements, and the
 * reverse (synthetic measurements from a profile, for tests and round trips).
 *
 * Every fit is GSL nonlinear least squares (gsl_multifit_nlinear, Levenberg-
 * Marquardt with a trust region) on *relative* residuals (model - measured) /
 * measured, because the sizes span nine orders of magnitude and absolute
 * residuals would let the largest transfers decide everything.  Standard
 * errors are sqrt(diag((J^T J)^-1) * chi^2 / (n - p)).
 *
 * Fitted, in this order:
 *  1. memory-bound kernels (membw copies): t = launch + bytes / bandwidth;
 *  2. GEMMs (models/compute.c with the fitted launch and bandwidth fixed):
 *     t = launch + max(T1 (K + k_half) / (K e_max), bytes / bandwidth),
 *     T1 the best tile's wave-quantized time at peak; parameters e_max, k_half;
 *  3. each collective (op, ranks): t = alpha + bus bytes / busbw over one
 *     size range, or two ranges split where that halves the squared
 *     residuals (NCCL's LL/LL128 regime of small messages vs Simple).
 * The fused kernels and whole-layer measurements are not fitted: the profile
 * reports how the fitted model predicts them (a check on the model's form).
 */
#pragma once

#include <cjson/cJSON.h>

#include "../models/comm.h"
#include "../models/layer.h"
#include "../models/profile.h"
#include "measurements.h"
#include "plan.h"

typedef struct {
  const char *name;               /* profile name */
  const char *measurements_path;  /* recorded in the profile */
  const ModelProfile *tiles_from; /* tile shapes of the GEMM model */
  const char *dtype;              /* GEMM records fitted: "fp16" or "bf16" */
  guint max_iterations;
} CalibFitOptions;

/* The fitted profile as JSON (loadable by model_profile_load), or NULL with
 * an error: too few points for a model, a fit that did not converge, or
 * unphysical results. */
cJSON *calib_fit(const CalibMeasurements *m, const CalibFitOptions *opt, GError **error);

/* Measurements that `profile` (and, for collectives it does not carry, the
 * network model `net` inside one node) predicts for the plan, each time
 * multiplied by exp(noise * N(0,1)) with a seeded generator (GSL mt19937). */
CalibMeasurements *calib_synthesize(const ModelProfile *profile, const ModelNet *net, const CalibPlan *plan,
                                    double noise, gulong seed);

/* The simulator's compute time of one layer at this shape on `p`
 * (models/layer.c: the forward, which is also the recomputation forward,
 * and the backward; the tensor-parallel all-reduces are not included, as
 * the harness runs the layer on one GPU). */
void calib_layer_predict(const ModelProfile *p, guint hidden, guint heads, guint seq, guint micro_batch, guint tp,
                         gboolean fused, ModelLayerCost *out);

/* Measured against predicted, on profile `p`: every layer record's forward,
 * backward and (when measured) recomputation times against
 * calib_layer_predict, and the GEMM model against every `dtype` GEMM record
 * (median, p90 and worst |relative error|, overall and per group: the
 * layers' GEMMs, grid.square, grid.wave, grid.k, layout).  JSON:
 * {"profile", "device", "measured", "layer": [{hidden, heads, seq,
 * micro_batch, tp, pass, measured_us, predicted_us, error}], "layer_summary",
 * "gemm": [{group, dtype, gemms, median_abs_error, p90_abs_error,
 * max_abs_error, worst}]}, errors as predicted / measured - 1. */
cJSON *calib_compare(const CalibMeasurements *m, const ModelProfile *p, const char *dtype, GError **error);
