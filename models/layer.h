/* ptdsim — per-op cost of a Megatron GPT layer, its embedding, its logit
 * layer and the optimizer step, on a device profile.
 *
 * One layer's forward, as Megatron-LM runs it with tensor parallelism t
 * (Shoeybi et al. 2019, figure 3; Narayanan et al. SC21 section 3.3):
 *   [layernorm, QKV GEMM (column-parallel), scores (batched), scale-mask-
 *    softmax, attention dropout, attention over values (batched), context
 *    copy, projection GEMM (row-parallel)]  all-reduce
 *   [bias-dropout-add, layernorm, MLP h->4h GEMM, bias+GeLU, MLP 4h->h GEMM]
 *   all-reduce  [bias-dropout-add]
 * so a pass is three compute segments around two tensor-parallel
 * all-reduces.  The backward pass runs two GEMMs (input and weight gradient)
 * per forward GEMM and its own two all-reduces (the conjugates f of the
 * column-parallel layers).  With fusion, bias+GeLU, bias+dropout+add and
 * scale+mask+softmax are single kernels; without, each is two or three.
 *
 * Llama-style shapes (transformer.h) change the widths and a few kernels:
 * the QKV GEMM has (a + 2g) d / t columns and the projection a d / t rows;
 * rotary embeddings add one element-wise pass over the query and key shards
 * forward and backward (Megatron-Core's fused apply_rotary_pos_emb); SwiGLU
 * runs one h -> 2f GEMM (gate and up together, as Megatron-Core's fused
 * linear_fc1), the SwiGLU kernel (reads 2f, writes f; backward reads the
 * gradient and both inputs and writes two gradients) and the f -> h GEMM.
 * RMSNorm moves the same bytes as layernorm; a layer without linear biases
 * still runs its fused dropout-add.
 */
#pragma once

#include "profile.h"
#include "transformer.h"

/* Where a stretch of a pass's compute lies: in segment `seg`, starting
 * `at_s` into it, `s` long. */
typedef struct {
  guint seg;
  double at_s, s;
} ModelSpan;

/* The four linear GEMMs next to the tensor-parallel communication of a pass,
 * in pass order, and what the communication does beside them under
 * sequence parallelism (Korthikanti et al. 2022, figure 5): forward, the
 * all-gathers feed the QKV and first MLP GEMMs and the reduce-scatters take
 * the projection's and second MLP GEMM's partial sums; backward, the
 * conjugates: all-gathers of the output gradient feed the second MLP
 * GEMM's and the projection's input-gradient GEMMs, and the reduce-scatters
 * of the first MLP GEMM's and QKV's input gradients run beside their
 * weight-gradient GEMMs. */
typedef enum { MODEL_TP_GEMM_GATHER_FEEDS, MODEL_TP_GEMM_SCATTER_AFTER, MODEL_TP_GEMM_SCATTER_BESIDE } ModelTpGemm;

typedef struct {
  double seg_s[3]; /* compute before, between and after the two all-reduces */
  double wgrad_s[3]; /* backward: the weight-gradient GEMMs' part of each segment (zero-bubble schedules' W) */
  double flops;    /* FLOPs executed by this GPU in the pass (GEMMs only) */
  guint kernels;
  double membound_s;  /* the memory-bound kernels' part of the segments (everything but GEMMs and attention) */
  double host_wait_s; /* the GPU's part of the segments spent waiting for the host to launch the next kernel */
  ModelSpan core;       /* the attention core's kernels (with context parallelism: its ring's steps) */
  /* Forward: what the frameworks' recomputation policies run again before
   * the backward (models/memory.h): the two norms (Megatron-Core's
   * layernorm module), the MLP block from its first GEMM to its last (mlp),
   * and torchtitan's selective op checkpointing's recomputed ops: the norms,
   * the key GEMM (its share of QKV's), rotary, the projection, the residual
   * add, the activation and, for SwiGLU, the up GEMM (w3's share) and the
   * product; the saved GEMMs and SDPA are not run again, nor what follows
   * the last tensor the backward needs (early stop). */
  double norms_s, mlp_s, op_sac_s;
  /* multi-head latent attention's up projections of the query and the
   * key/value latents and the rotary embedding (Megatron-Core's
   * mla_up_proj module) */
  double mla_up_s;
  ModelSpan tp_gemm[4]; /* the GEMMs the tensor-parallel communication can overlap, in pass order */
} ModelPass;

/* What the communication does beside tp_gemm[j] of a forward or backward
 * pass. */
ModelTpGemm model_tp_gemm_kind(gboolean backward, guint j);

typedef struct {
  ModelPass fwd; /* the recomputation forward is the same work */
  ModelPass bwd;
  ModelPass core; /* the forward's attention core alone (scores, softmax, dropout, over values), in seg_s[0]:
                   * what selective recomputation runs again */
  double tp_allreduce_bytes; /* one all-reduce buffer: b*s*h fp16 */
  double cp_hop_bytes;       /* context parallelism: the keys and values of the rank's s/cp tokens, 16-bit */
} ModelLayerCost;

void model_layer_cost(const ModelProfile *p, const ModelShape *m, guint t, guint b, gboolean fused,
                      ModelLayerCost *out);

/* The attention core's kernels: Megatron's (scores GEMM, scale-mask-softmax
 * fused where its rules allow, dropout, attention over values), Megatron's
 * with the fp32 softmax chain always, or FlashAttention-2 (Dao 2023): one
 * forward kernel and one backward kernel over tiles, no s x s tensor in
 * memory. */
typedef enum {
  MODEL_ATTENTION_FUSED,
  MODEL_ATTENTION_UNFUSED,
  MODEL_ATTENTION_FLASH,
  /* Megatron's fused softmax kernel whatever the shape (the calibration
   * harness's 2021 layer runs it so, outside the kernel's rules) */
  MODEL_ATTENTION_FUSED_KERNEL
} ModelAttention;

/* The framework that runs the layer, which decides its kernel list:
 * Megatron-Core with Transformer Engine (fused rotary, fused bias-dropout-
 * add, one SwiGLU kernel, vocab-parallel cross entropy), or PyTorch eager
 * as a plain model runs it (layer.c lists each aten op's kernels). */
typedef enum { MODEL_FRAMEWORK_MEGATRON, MODEL_FRAMEWORK_EAGER, MODEL_FRAMEWORK_N } ModelFramework;

typedef struct {
  gboolean fused;            /* the element-wise kernels fused (--no-fusion: not) */
  gboolean sequence_parallel; /* norms, dropouts, residuals on s/t of the tokens (Korthikanti et al. 2022, 4.2.2) */
  ModelAttention attention;
  gboolean fp8;              /* the linear layers' GEMMs in FP8 with Transformer Engine's casts */
  guint cp;                  /* context parallelism: each rank holds s/cp of the tokens (0 or 1: none) */
  ModelFramework framework;
  /* Host time to launch one kernel (the framework's dispatch and the launch
   * call), 0: the host never holds the GPU back.  Each layer pass's kernels
   * are issued one after another from a host that starts the pass with no
   * lead: kernel i starts at max(end of kernel i - 1, i x host_op_s). */
  double host_op_s;
  /* Every memory-bound kernel free: the report prices them as the
   * difference this makes. */
  gboolean free_membound;
} ModelLayerOptions;

/* model_layer_cost with the options: with sequence parallelism the norms,
 * dropouts and residual adds move b s h / t elements; with flash the core
 * is FlashAttention-2's kernels (model_flash_time_s); with context
 * parallelism cp every kernel runs on the rank's s/cp tokens and the core is
 * the cp steps of ring attention (model_flash_ring_time_s; flash only),
 * tp_allreduce_bytes is b (s/cp) h 2 and cp_hop_bytes the keys and values
 * a rank passes on at each step. */
void model_layer_cost_with(const ModelProfile *p, const ModelShape *m, guint t, guint b, const ModelLayerOptions *o,
                           ModelLayerCost *out);
/* How much longer the layer's forward and backward take while a
 * collective's kernels run beside them, holding `held` of the device's SMs
 * (a whole number, or channels times a fitted share per channel)
 * and moving `hbm_share` of its HBM bandwidth: their time with the GEMMs'
 * and attention's waves over the SMs left and the memory-bound kernels on
 * the bandwidth left, over their time alone.  1 where nothing is held or
 * the profile is the ideal one. */
double model_layer_contention(const ModelProfile *p, const ModelShape *m, guint t, guint b,
                              const ModelLayerOptions *o, double held, double hbm_share);
/* The same layer without its MLP: the attention block of an MoE layer
 * (whose MLP block is models/moe.h's), its norms and residual adds kept;
 * forward: attention | layernorm 2 and the dropout-add | the closing
 * dropout-add, backward: the closing dropout-add | layernorm 2 and the
 * attention | layernorm 1. */
void model_layer_attention_cost(const ModelProfile *p, const ModelShape *m, guint t, guint b,
                                const ModelLayerOptions *o, ModelLayerCost *out);
/* Whether the fp32 softmax chain runs for these options (its output is kept
 * in fp32: memory.h). */
gboolean model_softmax_fp32(const ModelShape *m, guint t, guint b, const ModelLayerOptions *o);
/* FlashAttention-2's kernel time for `heads` (b a / t) heads of q queries
 * over kv keys with d channels, causal: the tiles above the diagonal are
 * skipped (of n = ceil(q/128) row blocks, (n + 1) / (2n) of the s^2 work
 * runs), at the profile's forward or backward share of peak; the backward
 * runs 5 GEMM-equivalents where the forward runs 2. */
double model_flash_time_s(const ModelProfile *p, guint64 heads, guint64 q, guint64 kv, guint64 d, gboolean backward);
/* Ring attention (context parallelism, Megatron-Core over Transformer
 * Engine's AttnFuncWithCPAndKVP2P): the sequence is cut into 2 cp chunks and
 * rank r holds chunks r and 2 cp - 1 - r, so every rank does 1/cp of the
 * causal work.  The time of all cp steps of one rank, each a FlashAttention-2
 * kernel on 1/cp of that work (one launch each). */
double model_flash_ring_time_s(const ModelProfile *p, guint64 heads, guint64 s, guint64 d, guint cp, gboolean backward);
/* Whether Megatron runs its fused scale-mask-softmax kernel for this layer:
 * fusion on, and the kernel's shape constraints (megatron/model/
 * fused_softmax.py: 16 < key length <= 2048, query length and b * a / t
 * multiples of 4); otherwise the fp32 PyTorch chain runs (layer.c). */
gboolean model_softmax_fused(const ModelShape *m, guint t, guint b, gboolean fusion);
/* The same layer for a TeraPipe token slice (Li et al., ICML 2021, section
 * 3.2): b sequences, `tokens` new tokens each, attending causally over
 * `context` earlier tokens plus themselves.  The GEMMs of QKV, projection and
 * MLP scale with the tokens; the attention scores, softmax and attention over
 * values with tokens x (tokens + context).  model_layer_cost is the case
 * tokens = s, context = 0, with Megatron's softmax kernel rules
 * (model_softmax_fused); a slice takes `fused` for the softmax as given. */
void model_layer_slice_cost(const ModelProfile *p, const ModelShape *m, guint t, guint b, guint tokens,
                            guint context, gboolean fused, ModelLayerCost *out);
/* The same as the options' framework runs it: with Megatron's, as above
 * (o->fused for the softmax); with PyTorch eager, TeraPipe's own layer as
 * its code runs it (transformer_models.py, test_transformer_terapipe.py:
 * fp16, no dropout, ReLU, the mask added before an fp32 softmax, the keys
 * and values written into a cache of the whole sequence whose gradient is
 * cloned per slice, each weight's gradient added into .grad after the
 * slice's backward), each kernel behind the host's launch (host_op_s). */
void model_layer_slice_cost_with(const ModelProfile *p, const ModelShape *m, guint t, guint b, guint tokens,
                                 guint context, const ModelLayerOptions *o, ModelLayerCost *out);
/* Word + position embedding lookup, embedding dropout (first stage). */
void model_embedding_cost(const ModelProfile *p, const ModelShape *m, guint t, guint b, double *fwd_s,
                          double *bwd_s);
/* The same, and the head's below, as the options' framework runs them. */
void model_embedding_cost_with(const ModelProfile *p, const ModelShape *m, guint t, guint b,
                               const ModelLayerOptions *o, double *fwd_s, double *bwd_s);
/* Final layernorm, logit GEMM against the vocabulary shard, vocab-parallel
 * cross entropy (last stage). */
void model_head_cost(const ModelProfile *p, const ModelShape *m, guint t, guint b, double *fwd_s, double *bwd_s);
void model_head_cost_with(const ModelProfile *p, const ModelShape *m, guint t, guint b, const ModelLayerOptions *o,
                          double *fwd_s, double *bwd_s);
/* The logit layer's weight-gradient GEMM, the part of its backward a
 * zero-bubble schedule's W runs (0 on the ideal profile). */
double model_head_wgrad_s(const ModelProfile *p, const ModelShape *m, guint t, guint b);
/* Mixed-precision Adam over `params` local parameters (memory-bound). */
double model_optimizer_time_s(const ModelProfile *p, guint64 params);

/* Parameters of one transformer layer on one GPU of a tensor-parallel group
 * (Megatron's sharding: column-parallel weights and biases and row-parallel
 * weights are split, the row-parallel biases and norms replicated). */
guint64 model_layer_local_params(const ModelShape *m, guint t);
/* Parameters held by one GPU of pipeline stage `stage` of p holding
 * `layers` layers, with tensor parallelism t: the word embedding is split
 * over t and held by the first stage, the logit layer by the last (a tied
 * copy of the word embedding when p > 1, or its own matrix when untied), the
 * learned position embedding by the first and the final norm by the last. */
guint64 model_stage_params(const ModelShape *m, guint t, guint p, guint stage, guint layers);
