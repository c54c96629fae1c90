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
  /* PyTorch's caching allocator rounding each saved tensor up to its block
   * (model_allocator_block_bytes), in `total`; 0 outside the frameworks'
   * op lists (model_memory_op_list) */
  double allocator;
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
  /* The frameworks' op lists (model_memory_op_list): the framework, the
   * recomputation (MODEL_RECOMPUTE_*; with it, `recompute` and `selective`
   * are ignored), layer's k and the stage's layers it counts over,
   * modules' MODEL_RC_* bits. */
  gboolean eager;
  ModelRecompute ac;
  guint every, stage_layers, modules;
  /* eager with a pipeline (torch.distributed.pipelining, December 2024,
   * before pytorch#153383): the last stage's microbatches whose bf16 logits
   * it keeps at its peak (output_chunks, to the step's end), the current
   * one's included, 0 without a pipeline (torchtitan frees the logits before
   * the backward); and the stage outputs of the rank's other stages held
   * then (kept likewise) with their gradients' receive buffers (one a
   * microbatch, allocated once, _prepare_backward_infra) */
  guint pipeline_logits, pipeline_outputs;
} ModelMemoryRequest;

/* Whether a request is counted from the frameworks' op lists of saved
 * tensors (below) rather than Korthikanti et al.'s formulas: PyTorch eager,
 * or one of the frameworks' own recomputation policies (op, layer,
 * modules); not for multi-head latent attention. */
gboolean model_memory_op_list(const ModelShape *m, const ModelMemoryRequest *req);

#define MODEL_MAX_SAVED 24
/* One layer's tensors kept from its forward to its backward for one
 * microbatch at the rank's shape, each in bytes (out[MODEL_MAX_SAVED]),
 * under `ac` (NONE, FULL, SELECTIVE, OP or MODULES; LAYER is a mix of NONE
 * and FULL, model_layer_held_bytes); returns the count.
 *
 * Megatron-Core with Transformer Engine (what its autograd functions save,
 * for a pre-norm layer): the first norm's input (the layer input) and its
 * per-token fp32 rstd, its output (the QKV GEMM's input); the query, key
 * and value (FlashAttention's inputs) and its output (the projection's
 * input, the same tensor) and fp32 log-sum-exp per head, or without flash
 * the s x s tensors (model_attention_score_bytes); the second norm's input,
 * rstd and output (fc1's input); fc1's output (SwiGLU's input, 2f wide) and
 * the activation's output (fc2's input); dropout masks of a byte per
 * element where the model has dropout (GPT's layernorm models; the
 * Llama-family recipes set hidden_dropout 0, and PyTorch's dropout with p = 0
 * returns its input, no mask).  FP8 linear layers keep their inputs in FP8
 * (1 byte) beside the bf16 tensors the other ops keep.  `modules` drops
 * (megatron/core/transformer/transformer_config.py, recompute_modules):
 * core_attn the log-sum-exp or s x s tensors (the query, key and value stay
 * as the checkpoint's inputs); mlp fc1's and the activation's outputs (the
 * norm's output stays as its input); layernorm both norms' outputs
 * (CheckpointWithoutOutput: their inputs stay).
 *
 * PyTorch eager (autograd's saved tensors for a plain Llama block, as
 * torchtitan's model writes it, bf16): each RMSNorm upcasts its input to
 * fp32 and keeps it (pow and mul save it, 4 bytes), its fp32 rstd, its
 * normalized bf16 output (mul by the weight saves it) and its output (the
 * next GEMMs' input); rotary keeps only cos and sin (a mul by a tensor
 * without gradient saves just that tensor; they are shared by the layers
 * and left out); SDPA keeps the rotated query and key, the value, its
 * output and the log-sum-exp; SwiGLU keeps w1's output (silu's input),
 * silu's output and w3's output (the mul's two inputs) and their product
 * (w2's input); the layer input is kept by nothing.  With tensor
 * parallelism the GEMMs' input is each norm's output gathered whole
 * (torchtitan's plan: PrepareModuleInput to Replicate before the attention
 * and the feed-forward, DTensor's all-gather kept by the column-parallel
 * mm's backward), h wide under sequence parallelism too.
 *
 * torchtitan's selective op checkpointing (torchtitan/models/llama3/infra/
 * parallelize.py, _save_list and _custom_policy; torch.utils.checkpoint's
 * create_selective_checkpoint_contexts): the checkpoint keeps the layer's
 * input and the outputs of the ops in its save list, aten.mm (all but
 * every second one: of wq, wk, wv, wo, w1, w3, w2 in forward order it keeps
 * wq, wv, w1 and w2, whose output with tensor parallelism is the
 * row-parallel GEMM's partial sum over the whole hidden width), SDPA's
 * flash and efficient kernels (the output and the log-sum-exp), the
 * tensor-parallel reduce-scatters (their outputs, under sequence
 * parallelism) and aten.max (Float8's amax, a scalar); the rest is
 * recomputed. */
guint model_layer_saved_tensors(const ModelShape *m, const ModelMemoryRequest *req, ModelRecompute ac, double *out);
/* The bytes PyTorch's caching allocator (c10/cuda/CUDACachingAllocator.cpp)
 * gives a tensor of `bytes`: round_size's 512-byte multiple (kMinBlockSize),
 * and for a tensor of 10 MiB or more (kMinLargeAlloc), which gets a segment
 * of its own, that segment's 2 MiB multiple (kRoundLarge). */
double model_allocator_block_bytes(double bytes);

/* One pool of the caching allocator with expandable segments
 * (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, as torchtitan's launch
 * script sets it): a tensor goes to the smallest free block that holds it
 * (the lowest address among equals), split at its start; a freed block
 * merges with free neighbours; where none holds it the segment grows at its
 * end, taking in a free block there.  `ev[i]` > 0 allocates that many bytes
 * (rounded, model_allocator_block_bytes) as tensor i; `ev[i]` = -(j + 1)
 * frees tensor j.  Returns the most the segment spanned: the reserved
 * memory, which never shrinks without torch.cuda.empty_cache(). */
double model_allocator_reserved_bytes(const double *ev, guint n);

/* The reserved memory of the loss as PyTorch eager runs it on the last
 * stage, over `mbs` microbatches whose logits a pipeline keeps (0: no
 * pipeline, one microbatch, its logits freed first), for logits of
 * `elems` elements (tokens x V/t) a microbatch; `parallel`: DTensor's
 * loss_parallel over vocabulary shards (t > 1).  The allocator's sequence
 * (model_allocator_reserved_bytes): the bf16 logits, their fp32 copy
 * (.float()), log_softmax's fp32 output (loss_parallel: x - max and exp's
 * temporary as well); in the backward nll_loss's fp32 gradient and
 * log_softmax's (loss_parallel: one fused handler, zeros scattered, exp of
 * the saved output, their sum and its product with the output gradient).
 * Without a pipeline torchtitan's train.py frees the logits (del pred)
 * before the backward; a pipeline stage keeps every microbatch's. */
double model_eager_loss_reserved_bytes(double elems, gboolean parallel, guint mbs);

double model_layer_activation_bytes(const ModelShape *m, guint t, guint b, gboolean fp32_softmax);
/* The attention core's s x s part of it: 5 a s^2 b / t (7 with the fp32
 * softmax chain). */
double model_attention_score_bytes(const ModelShape *m, guint t, guint b, gboolean fp32_softmax);
/* One layer's activations of one microbatch as model_memory holds them
 * without recomputation (sequence parallelism, FlashAttention, selective
 * recomputation and FP8 applied), in bytes. */
double model_layer_held_bytes(const ModelShape *m, const ModelMemoryRequest *req);
/* Under --recompute modules in the closed form (multi-head latent
 * attention and MoE models, model_memory_op_list FALSE): what a layer's
 * recomputed modules hold again while its backward runs, the most of them
 * at once being one layer's: its held bytes without recomputation less
 * with.  0 otherwise. */
double model_layer_modules_working_bytes(const ModelShape *m, const ModelMemoryRequest *req);
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
