/* ptdsim — fitting a device profile to calibration measurements, and the
 * reverse (synthetic measurements from a profile, for tests and round trips).
 *
 * Every fit is GSL nonlinear least squares (fit/nls.h) on *relative*
 * residuals (model - measured) / measured, because the sizes span nine
 * orders of magnitude and absolute residuals would let the largest
 * transfers decide everything.  Standard errors are
 * sqrt(diag((J^T J)^-1) chi^2 / (n - p)).
 *
 * The fit makes a whole profile.  Fitted, in this order, each where the
 * file measures it:
 *  1. memory-bound kernels by class (models/profile.h ModelMemClass):
 *     t = gap + bytes / bandwidth, with one bandwidth for kernels whose
 *     bytes fit in the L2 and one for the rest; copies (membw) give the
 *     kernel launch gap and the HBM efficiency;
 *  2. GEMMs of one 16-bit dtype (models/compute.c):
 *     t = launch + max(T1 (K + k_half) / (K e_max), bytes / bandwidth),
 *     T1 the best tile's wave-quantized time at peak; parameters e_max,
 *     k_half and the tiles' L2 bandwidth, over the tiles cuBLASLt reported
 *     choosing, or else chosen from the device's candidate tiles;
 *  3. FP8 GEMMs the same way at the FP8 peak (the forward ones, with fast
 *     accumulation), and the share of that rate the gradient GEMMs keep;
 *  4. flash attention's waves (models/compute.h): per pass, the share of
 *     an SM's peak one step reaches and each block's overhead;
 *  5. each collective (op, ranks): t = alpha + bus bytes / busbw over one
 *     size range, or two ranges split where that halves the squared
 *     residuals (NCCL's LL/LL128 regime of small messages vs Simple).
 * What the file does not measure comes from the base profile and the
 * provenance says so key by key; whole layers are not fitted but compared
 * (calib_compare).
 */
#pragma once

#include <cjson/cJSON.h>

#include "../models/comm.h"
#include "../models/layer.h"
#include "../models/profile.h"
#include "../measure/measurements.h"
#include "../measure/plan.h"

typedef struct {
  const char *name;               /* profile name */
  const char *measurements_path;  /* recorded in the profile */
  const ModelProfile *base;       /* what is not measured (NULL: nothing but what is) */
  const cJSON *base_json;         /* the base profile's description, copied where not measured */
  const ModelProfile *tiles_from; /* NULL: the tiles come from the measurements */
  const char *dtype;              /* 16-bit GEMM records fitted: "fp16" or "bf16" (NULL: bf16 where measured) */
  guint max_iterations;
} CalibFitOptions;

/* The fitted profile as JSON (loadable by model_profile_load), or NULL with
 * an error: too few points for a model, a fit that did not converge, or
 * unphysical results. */
cJSON *calib_fit(const CalibMeasurements *m, const CalibFitOptions *opt, GError **error);

/* Measurements that `profile` (and, for collectives it does not carry, the
 * network model `net` inside one node) predicts for the plan, each time
 * multiplied by exp(noise * N(0,1)) with a seeded generator (GSL mt19937):
 * every record kind the harness writes, timed as the harness times them (in
 * bursts: the profile's sustained_clock_ratio left out), so that a fit can
 * be checked to give the profile back. */
CalibMeasurements *calib_synthesize(const ModelProfile *profile, const ModelNet *net, const CalibPlan *plan,
                                    double noise, gulong seed);

/* The simulator's description of a layer record: its shape and the
 * options it ran with (GPT or Llama style, fp16/bf16 or FP8 linear layers,
 * Megatron's or flash attention, sequence parallelism). */
void calib_layer_shape(const CalibLayer *l, ModelShape *shape, ModelLayerOptions *o);
/* The simulator's compute time of that layer on `p` (models/layer.c: the
 * forward, which is also the recomputation forward, and the backward; the
 * tensor-parallel communication is not included, as the harness runs the
 * layer on one GPU). */
void calib_layer_predict(const ModelProfile *p, const CalibLayer *l, ModelLayerCost *out);

/* "h=12288 a=96 s=2048 b=1 t=8", or "llama fp8 flash h=8192 a=64 g=8
 * s=8192 b=1 t=8 sp" for a modern layer. */
void calib_layer_label(const CalibLayer *l, char *buf, gsize len);
/* Measured against predicted on profile `p`, every class the file has:
 * GEMMs per dtype (16-bit by group: the layers', each grid, the layouts,
 * cuBLASLt's; fp8 forward and gradient), flash attention forward and
 * backward, memory-bound kernels per class, and every layer record's
 * forward, backward and recomputation.  JSON: {"profile", "device",
 * "measured", "classes": [{class, what, count, median_abs_error,
 * p90_abs_error, max_abs_error, worst}], "layer": [{label, pass,
 * measured_us, predicted_us, error}], "layer_summary"}; errors are
 * predicted / measured - 1. */
cJSON *calib_compare(const CalibMeasurements *m, const ModelProfile *p, GError **error);

/* The profile at the clocks of a burst: every record but the sustained
 * loops is timed in a burst (warm-up, then back-to-back repetitions),
 * before a power limit pulls the clock down, so it is predicted by the
 * profile's burst rates: `p` with sustained_clock_ratio 1. */
ModelProfile calib_profile_at_burst(const ModelProfile *p);

/* Kernel facts from another tool (the format of
 * shared/measurements/h100-kernels-pytorch.json: attention, gemm and
 * membound lists of PyTorch timings on one GPU) against profile `p`.  A
 * timing at or below the file's host floor — the largest time of its
 * shortest attention sequence, for each pass, where those times are flat in
 * the heads because the host's launch time dominates — is an upper bound:
 * a prediction at or below it is consistent, one above it is an error.
 * JSON: {"profile", "facts", "rows": [{kind, what, measured_us,
 * predicted_us, error, upper_bound}], "summary": [{kind, rows, bounded,
 * median_abs_error, max_abs_error}]}. */
cJSON *calib_check_facts(const cJSON *facts, const char *path, const ModelProfile *p, GError **error);
