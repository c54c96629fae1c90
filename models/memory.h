/* ptdsim — memory per GPU in mixed-precision training (Megatron-LM, SC21).
 *
 * Model state per local parameter: fp16 weights (2 bytes), fp16 gradients
 * (2), fp32 master weights and Adam's two moments (12).
 * Activations per layer per microbatch (Korthikanti et al. 2022, "Reducing
 * Activation Recomputation in Large Transformer Models", section 4, tensor
 * parallelism without sequence parallelism):
 *     s b h (10 + 24/t + 5 a s / (h t))  bytes;
 * for other shapes (transformer.h) the 24 is the shards' own widths:
 * 4 (a d + g d)/h for query, key, value and context, 4f/h for the MLP's
 * activation (6f/h for SwiGLU, which keeps the gate and up projections);
 * without Megatron's fused softmax kernel the fp32 softmax saves its output
 * in fp32 (layer.c), 2 a s^2 b / t bytes more: 7 a s / (h t);
 * with full recomputation only the layer input is kept, 2 s b h bytes, plus
 * one layer's full activations while it is recomputed.  The last stage adds
 * the logits of one microbatch (fp16 and fp32 copies, 6 s b V/t), the first
 * stage the embedding dropout mask of each microbatch in flight (s b h).
 * Selective recomputation (Korthikanti et al. section 5) keeps no s x s
 * tensor: s b h (10 + 24/t) per layer and microbatch.
 * Sequence parallelism (their section 4.2.2) splits the replicated part over
 * t as well: s b h (10/t + 24/t + 5 a s/(h t)); the layer input kept with
 * full recomputation is 2 s b h / t, the first stage's dropout mask s b h / t.
 * FlashAttention keeps no s x s tensor either, only the fp32 log-sum-exp
 * of each query row: 4 a s b / t in place of 5 a s^2 b / t.
 * FP8 linear layers (Transformer Engine) keep their inputs for the backward
 * in FP8, one byte where there were two: the two norm outputs of the
 * replicated part (10 -> 8 s b h), the context (a d) and the MLP's down
 * projection input (f); and each weight's FP8 copy and transpose, 2 bytes
 * per linear parameter.
 * Multi-head latent attention (transformer.h) keeps its queries and keys
 * of dn + dr channels and values and context of dv per head over t, and
 * its latents whole: 2 (a (2 (dn + dr) + 2 dv))/t + 4 (q_lora + kv_lora +
 * dr) bytes per token in place of the 4 (a d + g d)/t.
 * Megatron's distributed optimizer shards the 12 bytes of optimizer state
 * per parameter over the d data-parallel ranks (12/d); the fp16 weights and
 * gradients stay whole.
 */
#pragma once

#include "transformer.h"

typedef struct {
  double weights, gradients, optimizer, activations, total; /* bytes */
} ModelMemory;

typedef struct {
  guint t, b;
  guint64 params;              /* local parameters */
  double inflight_layer_mbs;   /* peak (layers x microbatches) whose activations are held */
  double inflight_mbs;         /* peak microbatches in flight on this GPU */
  gboolean recompute;
  gboolean first_stage, last_stage;
  gboolean fp32_softmax;       /* the unfused softmax chain runs (model_softmax_fused is FALSE) */
  guint optimizer_shards;      /* the distributed optimizer's data-parallel ranks d; 0 or 1: not sharded */
  gboolean selective;          /* selective recomputation: the attention core's s x s tensors are not kept */
  gboolean sequence_parallel;  /* the replicated s b h tensors are split over t too */
  gboolean flash;              /* FlashAttention: no s x s tensor kept, its fp32 log-sum-exp per query and head */
  gboolean fp8;                /* FP8 linear layers: their inputs kept in FP8, their weights cached in FP8 too */
  guint64 fp8_weight_params;   /* the linear layers' local parameters, cached in FP8 with their transposes */
} ModelMemoryRequest;

double model_layer_activation_bytes(const ModelShape *m, guint t, guint b, gboolean fp32_softmax);
/* The attention core's s x s part of it: 5 a s^2 b / t (7 with the fp32
 * softmax chain). */
double model_attention_score_bytes(const ModelShape *m, guint t, guint b, gboolean fp32_softmax);
/* One layer's activations of one microbatch as model_memory holds them
 * without recomputation (sequence parallelism, FlashAttention, selective
 * recomputation and FP8 applied), in bytes. */
double model_layer_held_bytes(const ModelShape *m, const ModelMemoryRequest *req);
/* What of them a split backward keeps from its input gradient (B) to its
 * weight gradient (W): the inputs of the four weight GEMMs (the two norm
 * outputs, the context, the down projection's input) and the gradients of
 * their outputs, 2 bytes each per token: 32 s b h for GPT at t = 1, the
 * M_W of Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024), against
 * its M_B = 34 s b h + 5 a s^2 b (sail-sg/zero-bubble-pipeline-parallelism,
 * megatron/core/pipeline_parallel/efficiency.py: mem_f = 34h + 5as,
 * mem_w = -32h per token).  At most the layer's whole. */
double model_layer_wgrad_kept_bytes(const ModelShape *m, const ModelMemoryRequest *req);
void model_memory(const ModelShape *m, const ModelMemoryRequest *req, ModelMemory *out);
