/* ptdsim — what ptdsim-calibrate measures: the plan, shared by the CUDA
 * harness, its --dry-run, and `ptdsim fit --synthesize` (so synthetic
 * measurements have exactly the shapes and sizes a real run has).
 *
 * GEMMs: the six GEMMs of a Megatron GPT layer at the tensor-parallel shard
 * (Narayanan et al. SC21 section 3.3; QKV, scores, attention over values,
 * projection, MLP h->4h and 4h->h), each forward and its two backward GEMMs
 * (input gradient: M x K from M x N times N x K; weight gradient: K x N from
 * K x M times M x N), plus a grid that exposes tile and wave quantization
 * (N stepping by 128 across SM-count multiples of tiles) and the K roll-off.
 */
#pragma once

#include <glib.h>

#include "measurements.h"

/* One transformer layer shape as Megatron shards it: hidden h, heads a,
 * sequence s, micro-batch b, tensor-parallel size t. */
typedef struct {
  guint hidden, heads, seq, micro_batch, tp;
} CalibLayerShape;

#define CALIB_MAX_SHAPES 16

typedef struct {
  /* The layer shapes: the gemm mode measures every shape's GEMMs, the
   * kernels mode its element-wise kernels, the layer mode the whole layer. */
  CalibLayerShape shapes[CALIB_MAX_SHAPES];
  guint n_shapes;
  guint gpus; /* ranks for the NCCL sweep */
  guint64 nccl_min_bytes, nccl_max_bytes;
  guint64 membw_min_bytes, membw_max_bytes;
} CalibPlanConfig;

typedef struct {
  char op[32];
  guint64 batch, m, n, k;
  guint shape;   /* index into cfg.shapes, or G_MAXUINT for the grids */
  char layout[4]; /* cuBLAS ops of A and B: "NN" (all but the layout group), "TN", "NT" */
} CalibPlanGemm;

typedef struct {
  char name[32];
  gboolean fused;
  guint64 rows, cols;
  double bytes;
  guint kernels;
  guint64 seq, head_dim; /* causal period and head size (softmax, attention) */
} CalibPlanKernel;

typedef struct {
  CalibPlanConfig cfg;
  GArray *gemm;        /* CalibPlanGemm, each run in fp16 and bf16 */
  GArray *kernels;     /* CalibPlanKernel */
  GArray *membw_bytes; /* double: bytes copied (2x moved) */
  GArray *nccl_bytes;  /* double: nccl-tests size column */
} CalibPlan;

/* The default: the `sc21` preset of layer shapes, 8 GPUs, NCCL 8 B .. 1 GiB,
 * copies 4 KiB .. 1 GiB. */
void calib_plan_config_default(CalibPlanConfig *cfg);
/* Sets cfg's shapes from SPEC: a preset name (`sc21`: the layers of GPT-3
 * 175B at t = 8, the 1.7B model at t = 1 and the 18.4B model at t = 8 of
 * Narayanan et al. SC21 Table 1, s = 2048, micro-batch 1 and 4; `gpt3-175b`:
 * that layer at t = 8, b = 1) or a comma list of HIDDEN:HEADS:SEQ:MICRO_BATCH:TP.
 * One-line errors. */
gboolean calib_plan_parse_shapes(const char *spec, CalibPlanConfig *cfg, GError **error);
/* "h=12288 a=96 s=2048 b=1 t=8" */
void calib_layer_shape_label(const CalibLayerShape *s, char *buf, gsize len);
/* GPU memory that ptdsim-calibrate's layer mode allocates for `s`, bytes
 * (the buffers of calib_gpu_layer in gpu.cu). */
double calib_plan_layer_bytes(const CalibLayerShape *s);
/* A conservative estimate of the wall time of a run of `modes` on one GPU of
 * the H100 class (rates stated in the --dry-run output), seconds. */
double calib_plan_estimate_s(const CalibPlan *p, const char *modes, guint warmup, guint reps, guint gpus);
/* Checks the configuration (one-line errors) and builds the plan. */
CalibPlan *calib_plan_new(const CalibPlanConfig *cfg, GError **error);
void calib_plan_free(CalibPlan *p);
/* The GPU counts the NCCL sweep runs the collectives on: the powers of two
 * from 2 up to `gpus`, and `gpus` itself (1 when there is one GPU), as
 * tensor-parallel groups of those sizes would use.  Returns how many. */
guint calib_plan_nccl_ranks(guint gpus, guint *out, guint max);
/* Whether `op` on `ranks` ranks can move `bytes` (float elements split evenly). */
gboolean calib_plan_coll_fits(CalibCollOp op, guint ranks, double bytes);
/* The human-readable plan (--dry-run). */
void calib_plan_print(const CalibPlan *p, const char *modes, guint warmup, guint reps, GString *out);
/* Whether the comma list `modes` names `mode` (or is "all"). */
gboolean calib_plan_has_mode(const char *modes, const char *mode);
