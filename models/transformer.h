/* ptdsim — transformer shapes, parameter and FLOP counts.
 *
 * The GPT of Megatron-LM (SC21) and the Llama-style variants people train
 * today share one shape: l layers of hidden size h; a query heads of kv
 * channels d each (d = h/a unless given), grouped into g key/value groups
 * (g = a: multi-head attention; g < a: grouped-query attention, g = 1:
 * multi-query; Ainslie et al. 2023); an MLP of hidden size f (4h unless
 * given), either GeLU (two GEMMs) or SwiGLU (gate and up projections and a
 * down projection, Shazeer 2020); layernorm (gain and bias) or RMSNorm (gain
 * only); learned absolute or rotary position embeddings (Su et al. 2021);
 * linear layers with or without biases; the logit layer tied to the word
 * embedding or its own matrix.
 *
 * For Megatron's GPT (the defaults) the counts are the paper's (Narayanan
 * et al., SC21, section 5.1 and appendix):
 *   parameters  P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h))              (Eq. 2)
 *   model FLOPs F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h))                (Eq. 3)
 * F counts forward, backward (2x forward) and one recomputation forward of
 * every transformer layer, and forward + backward of the logit layer.
 * Other shapes are counted GEMM by GEMM in the same way.
 */
#pragma once

#include <glib.h>

typedef enum { MODEL_MLP_GELU, MODEL_MLP_SWIGLU } ModelMlp;
typedef enum { MODEL_NORM_LAYERNORM, MODEL_NORM_RMSNORM } ModelNorm;
typedef enum { MODEL_POSITION_LEARNED, MODEL_POSITION_ROTARY } ModelPosition;
/* Activation recomputation: none; full (every layer's forward again before
 * its backward; SC21); selective (only the attention core: scores, softmax,
 * dropout, attention over values; Korthikanti et al. 2022, section 5);
 * the frameworks' own policies (models/memory.h): torchtitan's selective
 * op checkpointing (op), its selective layer checkpointing (layer: every
 * k-th layer whole) and Megatron-Core's --recompute-modules (modules). */
typedef enum {
  MODEL_RECOMPUTE_NONE,
  MODEL_RECOMPUTE_FULL,
  MODEL_RECOMPUTE_SELECTIVE,
  MODEL_RECOMPUTE_OP,
  MODEL_RECOMPUTE_LAYER,
  MODEL_RECOMPUTE_MODULES
} ModelRecompute;
/* Megatron-Core's recompute_modules (megatron/core/transformer/
 * transformer_config.py) that ptdsim models, a bit each. */
enum {
  MODEL_RC_CORE_ATTN = 1u << 0, /* the attention core */
  MODEL_RC_MLP = 1u << 1,       /* the dense MLP block: fc1, the activation, fc2 */
  MODEL_RC_LAYERNORM = 1u << 2, /* input_layernorm and pre_mlp_layernorm */
  MODEL_RC_MOE_ACT = 1u << 3,   /* the routed experts' activation function alone */
  MODEL_RC_MLA_UP_PROJ = 1u << 4, /* multi-head latent attention's up projections and rotary */
  MODEL_RC_MOE = 1u << 5,         /* an MoE layer's MLP block whole: router, dispatch, experts, combine */
  MODEL_RC_SHARED_EXPERTS = 1u << 6 /* an MoE layer's shared experts */
};
/* The precision of the linear layers' GEMMs: fp16 or bf16 (same rate), or
 * fp8 with Transformer Engine (weights and the rest in bf16). */
typedef enum { MODEL_PRECISION_FP16, MODEL_PRECISION_BF16, MODEL_PRECISION_FP8 } ModelPrecision;

/* Zero in the optional fields means Megatron's GPT default, so a shape
 * written {l, h, a, s, V} is the SC21 GPT. */
typedef struct {
  guint layers;  /* l */
  guint hidden;  /* h */
  guint heads;   /* a, query heads */
  guint seq_len; /* s */
  guint vocab;   /* V */
  guint ffn_hidden;     /* f; 0: 4h */
  guint query_groups;   /* g, key/value heads; 0: a */
  guint kv_channels;    /* d, channels per head; 0: h/a */
  ModelMlp mlp;
  ModelNorm norm;
  ModelPosition position;
  gboolean untied;      /* the logit layer has its own weights */
  gboolean no_bias;     /* linear layers without biases (Megatron's --disable-bias-linear) */
  /* Mixture of experts (0 experts: every layer dense).  An MoE layer's MLP
   * is a router (h x E, no bias) choosing k of E routed experts per token,
   * each a SwiGLU (or GeLU) MLP of width moe_ffn, plus shared experts of
   * total width shared_ffn that every token passes (DeepSeek: n_shared x
   * moe_ffn).  Layer i (from 0) is MoE when i >= first_dense and
   * i % moe_freq == 0 (Megatron-Core's --moe-layer-freq as an integer, and
   * DeepSeek's first_k_dense_replace). */
  guint experts;      /* E */
  guint topk;         /* k */
  guint moe_ffn;      /* width of one routed expert; 0: f */
  guint shared_ffn;   /* width of the shared experts together; 0: none */
  guint moe_freq;     /* 0 or 1: every layer from first_dense */
  guint first_dense;  /* the first layers that stay dense */
  gboolean router_bias; /* a per-expert score bias (DeepSeek-V3's e_score_correction_bias): E per MoE layer */
  gboolean qk_norm;     /* RMSNorm over each query and key head (Qwen3): 2 d per layer */
  /* Multi-head latent attention (DeepSeek-V2/V3; kv_lora > 0): queries
   * through a rank q_lora down-projection (0: none) and its RMSNorm, keys
   * and values through a shared kv_lora latent and its RMSNorm plus one
   * rope_dim rotary key shared by all heads; per head kv_channels
   * (qk_nope_head_dim) + rope_dim channels of query and key, v_dim of value.
   * query_groups does not apply. */
  guint q_lora, kv_lora, rope_dim, v_dim;
  guint mtp;            /* multi-token prediction modules (DeepSeek-V3: 1) */
} ModelShape;

/* The shape's values with the defaults filled in. */
guint model_ffn(const ModelShape *m);
guint model_groups(const ModelShape *m);
guint model_head_dim(const ModelShape *m);
/* Whether every optional field has its GPT default. */
gboolean model_is_gpt(const ModelShape *m);

/* Every parameter of the model, as an exact integer: the layers, the word
 * embedding, the position embedding (learned), the logit layer (untied) and
 * the final norm.  For GPT: Eq. 2 + 2h (the final layernorm, which Eq. 2
 * leaves out). */
guint64 model_param_count(const ModelShape *m);
/* Eq. 3 for a global batch of B sequences, in FLOPs: 4 forward passes of
 * the layers (forward, backward as two, and the recomputation forward,
 * counted whether or not it runs), 3 of the logit layer. */
double model_flops_per_iteration(const ModelShape *m, guint64 global_batch);
/* FLOPs actually executed (the numerator of hardware FLOPs utilization):
 * Eq. 3 with full recomputation; without its recomputation forward when
 * recomputation is off; with the attention core's GEMMs (4 b s^2 a d per
 * layer) in its place when selective. */
double model_hardware_flops_per_iteration(const ModelShape *m, guint64 global_batch, ModelRecompute recompute);
/* The forward FLOPs a framework's own checkpointing policy runs again per
 * iteration (global_batch sequences, all layers of a dense model), as
 * models/layer.c prices their time: `op` (torchtitan's per-op policy,
 * every second mm recomputed) the key and output projections and SwiGLU's
 * up projection; `modules` the attention core, multi-head latent
 * attention's up projections (mla_up_proj), the dense layers' MLP (mlp),
 * an MoE layer's block (moe: router, experts and shared experts) or its
 * shared experts among `modules` (the norms and activations run no GEMM);
 * `layer` the whole forward of the `checkpointed`
 * layers (every k-th of each pipeline stage's, counted by the caller).
 * 0 for the other settings (model_hardware_flops_per_iteration counts
 * full and selective). */
double model_policy_recompute_flops(const ModelShape *m, guint64 global_batch, ModelRecompute ac, guint modules,
                                    guint checkpointed);
/* Forward FLOPs of one layer's attention core for b sequences: the scores
 * and the attention over values, 4 b s^2 a d. */
double model_attention_core_flops(const ModelShape *m, guint b);
double model_slice_attention_core_flops(const ModelShape *m, guint b, guint tokens, guint context);
/* The model's own FLOPs, 3 forward passes of layers and logits, never a
 * recomputation (the numerator of model FLOPs utilization, MFU). */
double model_model_flops_per_iteration(const ModelShape *m, guint64 global_batch);
/* Forward FLOPs of one transformer layer for b sequences (all GEMMs,
 * attention over the full s x s scores): for GPT 24 b s h^2 + 4 b s^2 h;
 * in general 2bs h (a+2g)d + 4 b s^2 a d + 2bs a d h + 2bs h f (2 or 3). */
double model_layer_forward_flops(const ModelShape *m, guint b);
/* The same for `tokens` new tokens of each of b sequences attending over
 * `context` earlier tokens too (TeraPipe's token slices); context 0 and
 * tokens s is model_layer_forward_flops. */
double model_slice_forward_flops(const ModelShape *m, guint b, guint tokens, guint context);
/* Forward FLOPs of the logit layer for b sequences: 2 b s h V. */
double model_logit_forward_flops(const ModelShape *m, guint64 b);

/* Parameters of one dense transformer layer: QKV weights h (a+2g) d and biases,
 * the projection a d h and bias h, the MLP's h f (x2 gated) and f h and
 * biases, two norms (2h each for layernorm, h for RMSNorm).  GPT: 12 h^2 +
 * 13 h. */
guint64 model_layer_param_count(const ModelShape *m);
/* Parameters of a layer's four linear layers, each with its biases, and of
 * one norm: QKV h (a+2g) d, projection a d h (+h), MLP up h f (2f gated),
 * MLP down f h (+h); `row_bias` is the bias of each row-parallel one
 * (projection, down), h or 0, which tensor parallelism replicates. */
typedef struct {
  guint64 qkv, proj, up, down, norm, row_bias;
  guint64 replicated; /* attention parameters every tensor-parallel rank holds whole: MLA's down projections
                       * and latent norms, qk-norm gains (Megatron-Core builds them duplicated) */
} ModelLinears;
ModelLinears model_layer_linears(const ModelShape *m);
/* Parameters of one norm: 2h (layernorm) or h (RMSNorm). */
guint64 model_norm_params(const ModelShape *m);

/* --- mixture of experts, latent attention, multi-token prediction --- */

gboolean model_is_moe(const ModelShape *m);
gboolean model_is_mla(const ModelShape *m);
/* Whether layer i (0-based) is an MoE layer; how many are. */
gboolean model_layer_is_moe(const ModelShape *m, guint layer);
guint model_moe_layer_count(const ModelShape *m);
guint model_moe_ffn(const ModelShape *m);
/* Parameters of one routed expert: h x moe_ffn x (3 SwiGLU, 2 GeLU)
 * (+ biases where the shape has them). */
guint64 model_expert_params(const ModelShape *m);
/* Parameters of an MoE layer's MLP block: E experts, the shared experts,
 * the router (h E) and its bias (E). */
guint64 model_moe_mlp_params(const ModelShape *m);
/* Parameters of the attention block of a layer (its projections and, for
 * MLA and qk-norm, their norms; not the layer's two norms). */
guint64 model_attention_params(const ModelShape *m);
/* Parameters of layer i, dense or MoE. */
guint64 model_layer_params_at(const ModelShape *m, guint layer);
/* Parameters of one multi-token-prediction module (DeepSeek-V3 section
 * 2.2): its transformer layer (MoE when the model is), the two RMSNorms of
 * its inputs, the projection of their concatenation 2h -> h, and its own
 * final norm; the embedding and output head are the main model's. */
guint64 model_mtp_params(const ModelShape *m);
/* Parameters one token passes through: every routed expert but k per MoE
 * layer left out (DeepSeek-V3's "activated" count). */
guint64 model_active_param_count(const ModelShape *m);
/* Forward FLOPs of layer i for b sequences: the dense layer's
 * (model_slice_forward_flops) or, for an MoE layer, attention plus the
 * router 2bsHE, k routed experts and the shared experts. */
double model_layer_forward_flops_at(const ModelShape *m, guint layer, guint b);
/* Forward FLOPs of every layer, plus the MTP modules' layers and their 2h
 * -> h projections. */
double model_layers_forward_flops(const ModelShape *m, guint b);

/* Built-in model names (gpt3-1b ... megatron-1t, llama2-7b ...);
 * NULL-terminated list. */
const char *const *model_names(void);
gboolean model_lookup(const char *name, ModelShape *out);
/* Where a built-in model's shape comes from (a paper, a model card). */
const char *model_source(const char *name);
