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

typedef struct {
  guint hidden, heads, seq, micro_batch, tp;
  guint gpus; /* ranks for the NCCL sweep */
  guint64 nccl_min_bytes, nccl_max_bytes;
  guint64 membw_min_bytes, membw_max_bytes;
} CalibPlanConfig;

typedef struct {
  char op[32];
  guint64 batch, m, n, k;
} CalibPlanGemm;

typedef struct {
  char name[32];
  gboolean fused;
  guint64 rows, cols;
  double bytes;
  guint kernels;
} CalibPlanKernel;

typedef struct {
  CalibPlanConfig cfg;
  GArray *gemm;        /* CalibPlanGemm, each run in fp16 and bf16 */
  GArray *kernels;     /* CalibPlanKernel */
  GArray *membw_bytes; /* double: bytes copied (2x moved) */
  GArray *nccl_bytes;  /* double: nccl-tests size column */
} CalibPlan;

/* Megatron-like defaults: GPT-3 175B's layer with t = 8, 8 GPUs. */
void calib_plan_config_default(CalibPlanConfig *cfg);
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
void calib_plan_print(const CalibPlan *p, const char *modes, GString *out);
