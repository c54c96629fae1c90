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

#include "../models/profile.h"
#include "measurements.h"

/* One transformer layer shape as Megatron shards it: hidden h, heads a,
 * sequence s, micro-batch b, tensor-parallel size t. */
typedef struct {
  guint hidden, heads, seq, micro_batch, tp;
  /* Modern shapes (0 / FALSE for the 2021 GPT layer): key/value heads
   * (grouped-query when fewer than heads), MLP width (4 hidden when 0),
   * Llama style (RMSNorm, rotary, SwiGLU, no bias), vocabulary (the logit
   * GEMM's width before the tensor-parallel split; 0: none measured). */
  guint kv_heads, ffn, vocab;
  gboolean llama;
} CalibLayerShape;

#define CALIB_MAX_SHAPES 16
#define CALIB_MAX_OVERLAP_BLOCKS 16

typedef struct {
  /* The layer shapes: the gemm mode measures every shape's GEMMs, the
   * kernels mode its element-wise kernels, the layer mode the whole layer. */
  CalibLayerShape shapes[CALIB_MAX_SHAPES];
  guint n_shapes;
  guint gpus; /* ranks for the NCCL sweep */
  guint64 nccl_min_bytes, nccl_max_bytes;
  guint64 membw_min_bytes, membw_max_bytes;
  /* The sustained mode: a loop of CALIB_SUSTAINED_M x N x K bf16 GEMMs
   * through cuBLASLt for this many seconds, in chunks of
   * CALIB_SUSTAINED_CHUNK products. */
  double sustained_s;
  /* The overlap mode: the holder's thread-block counts (one run each) and
   * the window each timed interval lasts at least, seconds. */
  guint overlap_blocks[CALIB_MAX_OVERLAP_BLOCKS];
  guint n_overlap_blocks;
  double overlap_window_s;
} CalibPlanConfig;

#define CALIB_SUSTAINED_M 8192u
#define CALIB_SUSTAINED_N 8192u
#define CALIB_SUSTAINED_K 8192u
#define CALIB_SUSTAINED_CHUNK 100u
/* The overlap mode's GEMM: the largest MLP GEMM of the llama3 preset's
 * 70B layer at t = 8 (the forward of the gate and up projections of
 * SwiGLU: 2 x 28672 / 8 = 7168 outputs, 8192 tokens, hidden 8192), bf16,
 * in the forward's TN layout; the holder's buffer (bytes copied per pass),
 * the memory-bound probe's (copied per pass) and the all-reduce's size
 * (nccl-tests' convention). */
#define CALIB_OVERLAP_M 7168u
#define CALIB_OVERLAP_N 8192u
#define CALIB_OVERLAP_K 8192u
#define CALIB_OVERLAP_HOLDER_BYTES (256.0 * 1048576)
#define CALIB_OVERLAP_MEM_BYTES (1024.0 * 1048576)
#define CALIB_OVERLAP_ALLREDUCE_BYTES (256.0 * 1048576)
/* A run beside another is timed inside it: the outer work is sized to last
 * this many windows at its own rate alone, the inner one window. */
#define CALIB_OVERLAP_OUTER 3u
/* Before the overlap runs the GEMM loops this long, seconds, so that a
 * power-capped clock has settled (the H100's fell to its sustained value
 * within two seconds: calibrate/measurements/h100-sxm5-80gb-sustained.json). */
#define CALIB_OVERLAP_SETTLE_S 2.0

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

/* A cuBLASLt GEMM of the gemmlt mode: run in bf16 and in FP8. */
typedef struct {
  char op[32];    /* "lt.qkv.fwd", "lt.logits.wgrad", "lt.grid.square", ... */
  guint64 m, n, k;
  guint shape;    /* index into cfg.shapes, or G_MAXUINT for the grids */
  char layout[4]; /* "TN" (forward), "NN" (input gradient), "NT" (weight gradient) */
} CalibPlanLtGemm;

typedef struct {
  guint64 batch, heads, kv_heads, seq, head_dim;
} CalibPlanAttention;

typedef struct {
  const CalibMemboundOp *op;
  guint64 rows, cols;
} CalibPlanMembound;

/* A modern layer of the modern mode: shape, linear layers in FP8 or bf16,
 * sequence parallelism where t > 1 (as Megatron-Core runs tensor
 * parallelism today). */
typedef struct {
  guint shape;
  gboolean fp8, sequence_parallel;
} CalibPlanModern;

typedef struct {
  CalibPlanConfig cfg;
  GArray *modern;      /* CalibPlanModern */
  GArray *gemm;        /* CalibPlanGemm, each run in fp16 and bf16 */
  GArray *gemmlt;      /* CalibPlanLtGemm, each in bf16 and fp8 */
  GArray *attention;   /* CalibPlanAttention, causal bf16 */
  GArray *membound;    /* CalibPlanMembound */
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
 * that layer at t = 8, b = 1; `gpt3`: GPT-3 175B at t = 8, s 2048 and 4096;
 * `llama3`: Llama 3 8B, 70B and 405B at s = 8192) or a comma list of
 * HIDDEN:HEADS:SEQ:MICRO_BATCH:TP[:KV_HEADS:FFN:VOCAB:STYLE].  One-line
 * errors. */
gboolean calib_plan_parse_shapes(const char *spec, CalibPlanConfig *cfg, GError **error);
/* Whether the 2021 modes (kernels, layer) apply: Megatron's GPT layer,
 * multi-head attention, MLP 4 h. */
gboolean calib_shape_is_2021(const CalibLayerShape *s);
/* Key/value heads and MLP width with their defaults filled in. */
guint calib_shape_kv_heads(const CalibLayerShape *s);
guint calib_shape_ffn(const CalibLayerShape *s);
/* "h=12288 a=96 s=2048 b=1 t=8", or for modern shapes
 * "llama h=8192 a=64 g=8 f=28672 s=8192 b=1 t=8" */
void calib_layer_shape_label(const CalibLayerShape *s, char *buf, gsize len);
/* GPU memory that ptdsim-calibrate's layer mode allocates for `s`, bytes
 * (the buffers of calib_gpu_layer in gpu.cu). */
double calib_plan_layer_bytes(const CalibLayerShape *s);
/* GPU memory that the modern mode's layer allocates for `s` (bounded
 * above), bytes. */
double calib_plan_modern_bytes(const CalibLayerShape *s);
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
/* Sets cfg's holder block counts from SPEC, a comma list of 1 to
 * CALIB_MAX_OVERLAP_BLOCKS whole numbers from 1 to 1024 (the harness checks
 * them against the device's SMs).  One-line errors. */
gboolean calib_plan_parse_blocks(const char *spec, CalibPlanConfig *cfg, GError **error);
/* The human-readable plan (--dry-run). */
void calib_plan_print(const CalibPlan *p, const char *modes, guint warmup, guint reps, GString *out);
/* The harness's modes, in the order it runs them: the 2021 ones (gemm,
 * kernels, layer, nccl, membw), today's (gemmlt, attention, membound,
 * modern), the sustained loop and the overlap runs. */
extern const char *const calib_modes[];
extern const guint calib_n_modes;
/* Whether the comma list `modes` names `mode` (or is "all"). */
gboolean calib_plan_has_mode(const char *modes, const char *mode);
