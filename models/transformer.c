/* ptdsim — transformer shapes, parameter and FLOP counts (see transformer.h). */
#include "transformer.h"

#include <math.h>
#include <string.h>

guint model_ffn(const ModelShape *m) { return m->ffn_hidden ? m->ffn_hidden : 4 * m->hidden; }
guint model_groups(const ModelShape *m) { return m->query_groups ? m->query_groups : m->heads; }
guint model_head_dim(const ModelShape *m) { return m->kv_channels ? m->kv_channels : m->hidden / m->heads; }

gboolean model_is_gpt(const ModelShape *m) {
  return model_ffn(m) == 4 * m->hidden && model_groups(m) == m->heads &&
         (guint64)model_head_dim(m) * m->heads == m->hidden && m->mlp == MODEL_MLP_GELU &&
         m->norm == MODEL_NORM_LAYERNORM && m->position == MODEL_POSITION_LEARNED && !m->untied && !m->no_bias &&
         !model_is_moe(m) && !model_is_mla(m) && !m->qk_norm && m->mtp == 0;
}

gboolean model_is_moe(const ModelShape *m) { return m->experts > 0; }
gboolean model_is_mla(const ModelShape *m) { return m->kv_lora > 0; }
guint model_moe_ffn(const ModelShape *m) { return m->moe_ffn ? m->moe_ffn : model_ffn(m); }

gboolean model_layer_is_moe(const ModelShape *m, guint layer) {
  return model_is_moe(m) && layer >= m->first_dense && layer % MAX(m->moe_freq, 1u) == 0;
}

guint model_moe_layer_count(const ModelShape *m) {
  guint n = 0;
  for (guint i = 0; i < m->layers; i++)
    n += model_layer_is_moe(m, i);
  return n;
}

/* The query/key and value channels per head. */
static guint qk_dim(const ModelShape *m) { return model_head_dim(m) + (model_is_mla(m) ? m->rope_dim : 0); }
static guint v_dim(const ModelShape *m) { return model_is_mla(m) && m->v_dim ? m->v_dim : model_head_dim(m); }

/* An MLP of width f: h -> f (2f gated) and f -> h, with biases if any. */
static guint64 mlp_params(const ModelShape *m, guint64 f) {
  guint64 h = m->hidden, bias = m->no_bias ? 0 : 1;
  guint64 up = m->mlp == MODEL_MLP_SWIGLU ? 2 * f : f;
  return h * up + bias * up + f * h + bias * h;
}

guint64 model_expert_params(const ModelShape *m) { return mlp_params(m, model_moe_ffn(m)); }

guint64 model_moe_mlp_params(const ModelShape *m) {
  guint64 E = m->experts;
  return E * model_expert_params(m) + (m->shared_ffn ? mlp_params(m, m->shared_ffn) : 0) + E * m->hidden +
         (m->router_bias ? E : 0);
}

guint64 model_norm_params(const ModelShape *m) {
  return m->norm == MODEL_NORM_RMSNORM ? m->hidden : 2ull * m->hidden;
}

ModelLinears model_layer_linears(const ModelShape *m) {
  guint64 h = m->hidden, f = model_ffn(m), d = model_head_dim(m);
  guint64 q = (guint64)m->heads * d, kv = (guint64)model_groups(m) * d;
  guint64 up = m->mlp == MODEL_MLP_SWIGLU ? 2 * f : f; /* gate and up projections, or h -> f */
  guint64 bias = m->no_bias ? 0 : 1;
  ModelLinears l = {h * (q + 2 * kv) + bias * (q + 2 * kv), q * h + bias * h, h * up + bias * up, f * h + bias * h,
                    model_norm_params(m), bias * h, m->qk_norm ? 2ull * d : 0};
  if (model_is_mla(m)) {
    /* DeepSeek-V3's modeling_deepseek.py: q_a_proj h x q_lora, q_a_layernorm,
     * q_b_proj q_lora x a (dn + dr) (or q_proj h x a (dn + dr) without
     * q_lora); kv_a_proj_with_mqa h x (kv_lora + dr), kv_a_layernorm,
     * kv_b_proj kv_lora x a (dn + dv); o_proj a dv x h.  No biases. */
    guint64 a = m->heads, qk = qk_dim(m), vd = v_dim(m), ql = m->q_lora, kl = m->kv_lora;
    l.replicated = (ql ? h * ql + ql : 0) + h * (kl + m->rope_dim) + kl;
    l.qkv = (ql ? ql : h) * a * qk + kl * a * (d + vd);
    l.proj = a * vd * h + bias * h;
  }
  return l;
}

guint64 model_layer_param_count(const ModelShape *m) {
  ModelLinears l = model_layer_linears(m);
  return l.qkv + l.proj + l.up + l.down + 2 * l.norm + l.replicated;
}

guint64 model_attention_params(const ModelShape *m) {
  ModelLinears l = model_layer_linears(m);
  return l.qkv + l.proj + l.replicated;
}

guint64 model_layer_params_at(const ModelShape *m, guint layer) {
  if (!model_layer_is_moe(m, layer))
    return model_layer_param_count(m);
  return model_attention_params(m) + 2 * model_norm_params(m) + model_moe_mlp_params(m);
}

guint64 model_mtp_params(const ModelShape *m) {
  guint64 h = m->hidden;
  /* the module's layer is of the kind of the main model's last */
  return model_layer_params_at(m, m->layers ? m->layers - 1 : 0) + 3 * model_norm_params(m) + 2 * h * h;
}

guint64 model_param_count(const ModelShape *m) {
  guint64 h = m->hidden, V = m->vocab;
  guint64 embeddings = V * h * (m->untied ? 2 : 1) + (m->position == MODEL_POSITION_LEARNED ? (guint64)m->seq_len * h : 0);
  guint64 layers = 0;
  if (model_is_moe(m))
    for (guint i = 0; i < m->layers; i++)
      layers += model_layer_params_at(m, i);
  else
    layers = (guint64)m->layers * model_layer_param_count(m);
  return layers + embeddings + model_norm_params(m) + (guint64)m->mtp * model_mtp_params(m);
}

guint64 model_active_param_count(const ModelShape *m) {
  guint64 idle = m->experts > m->topk ? (guint64)(m->experts - m->topk) * model_expert_params(m) : 0;
  guint moe = model_moe_layer_count(m) + (m->mtp && model_layer_is_moe(m, m->layers - 1) ? m->mtp : 0);
  return model_param_count(m) - (guint64)moe * idle;
}

/* The attention block's GEMMs: its projections (2 FLOPs per weight per
 * token) and the core, scores 2 b q T a d_qk and over values 2 b q T a d_v
 * for T = tokens + context keys. */
static double attention_forward_flops(const ModelShape *m, guint b, guint tokens, guint context) {
  double h = m->hidden, bq = (double)b * tokens;
  if (!model_is_mla(m)) {
    double d = model_head_dim(m), q = (double)m->heads * d, kv = (double)model_groups(m) * d;
    return 2.0 * bq * h * (q + 2.0 * kv) + 4.0 * bq * (double)(tokens + context) * q + 2.0 * bq * q * h;
  }
  ModelLinears l = model_layer_linears(m);
  double bias = m->no_bias ? 0 : 1;
  /* the weights, less the latent norms' gains and the projection's bias */
  double weights = (double)(l.qkv + l.proj + l.replicated) - (double)(m->kv_lora + m->q_lora) - bias * h;
  return 2.0 * bq * weights + model_slice_attention_core_flops(m, b, tokens, context);
}

double model_slice_forward_flops(const ModelShape *m, guint b, guint tokens, guint context) {
  double h = m->hidden;
  if (model_is_gpt(m))
    /* QKV 6bsh^2, scores 2bs^2h, attention over values 2bs^2h, projection
     * 2bsh^2, MLP 16bsh^2. */
    return 24.0 * b * tokens * h * h + 4.0 * b * tokens * (double)(tokens + context) * h;
  double f = model_ffn(m);
  double bq = (double)b * tokens, mlp = m->mlp == MODEL_MLP_SWIGLU ? 3.0 : 2.0; /* GEMMs of h x f */
  return attention_forward_flops(m, b, tokens, context) + 2.0 * bq * h * f * mlp;
}

double model_layer_forward_flops_at(const ModelShape *m, guint layer, guint b) {
  if (!model_layer_is_moe(m, layer))
    return model_layer_forward_flops(m, b);
  double bs = (double)b * m->seq_len, h = m->hidden, mlp = m->mlp == MODEL_MLP_SWIGLU ? 3.0 : 2.0;
  return attention_forward_flops(m, b, m->seq_len, 0) + 2.0 * bs * h * m->experts +
         2.0 * bs * h * mlp * ((double)m->topk * model_moe_ffn(m) + m->shared_ffn);
}

double model_layers_forward_flops(const ModelShape *m, guint b) {
  double sum = 0;
  if (!model_is_moe(m))
    sum = (double)m->layers * model_layer_forward_flops(m, b);
  else
    for (guint i = 0; i < m->layers; i++)
      sum += model_layer_forward_flops_at(m, i, b);
  if (m->mtp) /* each module: its layer and the 2h -> h projection */
    sum += m->mtp * (model_layer_forward_flops_at(m, m->layers - 1, b) +
                     2.0 * b * m->seq_len * 2.0 * m->hidden * m->hidden);
  return sum;
}

double model_layer_forward_flops(const ModelShape *m, guint b) { return model_slice_forward_flops(m, b, m->seq_len, 0); }

double model_logit_forward_flops(const ModelShape *m, guint64 b) {
  return 2.0 * (double)b * m->seq_len * m->hidden * m->vocab;
}

double model_slice_attention_core_flops(const ModelShape *m, guint b, guint tokens, guint context) {
  if (model_is_mla(m))
    return 2.0 * b * tokens * (double)(tokens + context) * m->heads * ((double)qk_dim(m) + v_dim(m));
  return 4.0 * b * tokens * (double)(tokens + context) * m->heads * model_head_dim(m);
}

double model_attention_core_flops(const ModelShape *m, guint b) {
  return model_slice_attention_core_flops(m, b, m->seq_len, 0);
}

double model_flops_per_iteration(const ModelShape *m, guint64 global_batch) {
  if (!model_is_gpt(m))
    return model_hardware_flops_per_iteration(m, global_batch, MODEL_RECOMPUTE_FULL);
  double B = (double)global_batch, s = m->seq_len, l = m->layers, h = m->hidden, V = m->vocab;
  return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

double model_hardware_flops_per_iteration(const ModelShape *m, guint64 global_batch, ModelRecompute recompute) {
  double passes = recompute == MODEL_RECOMPUTE_FULL ? 4.0 : 3.0;
  double layers = model_is_moe(m) || m->mtp ? passes * model_layers_forward_flops(m, 1) * (double)global_batch
                                            : passes * m->layers * model_layer_forward_flops(m, 1) * (double)global_batch;
  if (recompute == MODEL_RECOMPUTE_SELECTIVE)
    layers += (double)(m->layers + m->mtp) * model_attention_core_flops(m, 1) * (double)global_batch;
  /* each MTP module has its own logits against the shared head */
  return layers + 3.0 * (1.0 + m->mtp) * model_logit_forward_flops(m, global_batch);
}

double model_policy_recompute_flops(const ModelShape *m, guint64 global_batch, ModelRecompute ac, guint modules,
                                    guint checkpointed) {
  double bs = (double)global_batch * m->seq_len, h = m->hidden, f = model_ffn(m), L = m->layers;
  double mlp = model_is_gpt(m) ? 16.0 * bs * h * h : 2.0 * bs * h * f * (m->mlp == MODEL_MLP_SWIGLU ? 3.0 : 2.0);
  switch (ac) {
  case MODEL_RECOMPUTE_OP: {
    /* torchtitan parallelize_llama.py (_custom_policy): the mm outputs are
     * saved but every second one, so the recomputation runs mm 2 (wk), 4
     * (wo) and 6 (w3) of wq, wk, wv, wo, w1, w3, w2 */
    double q = model_is_gpt(m) ? h : (double)m->heads * model_head_dim(m);
    double kv = model_is_gpt(m) ? h : (double)model_groups(m) * model_head_dim(m);
    double key = model_is_mla(m) ? 0 : 2.0 * bs * h * kv;
    double up = m->mlp == MODEL_MLP_SWIGLU ? 2.0 * bs * h * f : 0;
    return L * (key + 2.0 * bs * q * h + up);
  }
  case MODEL_RECOMPUTE_MODULES: {
    double moe = 0, dense = L; /* an MoE model's layers of each kind */
    if (model_is_moe(m)) {
      for (guint i = 0; i < m->layers; i++)
        moe += model_layer_is_moe(m, i);
      dense = L - moe;
    }
    double mult = m->mlp == MODEL_MLP_SWIGLU ? 3.0 : 2.0, up = 0;
    if (model_is_mla(m)) { /* the query's and the key/value latents' up projections */
      double dqk = (double)model_head_dim(m) + m->rope_dim, dv = m->v_dim ? m->v_dim : model_head_dim(m);
      up = 2.0 * bs * m->heads * ((m->q_lora ? m->q_lora : h) * dqk + (double)m->kv_lora * (model_head_dim(m) + dv));
    }
    double block = 2.0 * bs * h * (m->experts + mult * ((double)m->topk * model_moe_ffn(m) + m->shared_ffn));
    double shared = 2.0 * bs * h * mult * m->shared_ffn;
    return L * ((modules & MODEL_RC_CORE_ATTN ? model_attention_core_flops(m, 1) * (double)global_batch : 0) +
                (modules & MODEL_RC_MLA_UP_PROJ ? up : 0)) +
           dense * (modules & MODEL_RC_MLP ? mlp : 0) +
           moe * (modules & MODEL_RC_MOE ? block : modules & MODEL_RC_SHARED_EXPERTS ? shared : 0);
  }
  case MODEL_RECOMPUTE_LAYER:
    return (double)checkpointed * model_layer_forward_flops(m, 1) * (double)global_batch;
  default:
    return 0;
  }
}

double model_model_flops_per_iteration(const ModelShape *m, guint64 global_batch) {
  return model_hardware_flops_per_iteration(m, global_batch, MODEL_RECOMPUTE_NONE);
}

/* Megatron's GPT with SC21's sequence length and vocabulary. */
#define GPT(l, h, a) {.layers = (l), .hidden = (h), .heads = (a), .seq_len = 2048, .vocab = 51200}

/* Defaults for the Llama family: SwiGLU, RMSNorm, rotary positions, no
 * linear biases, untied logits. */
#define LLAMA(l, h, a, g, f, s, V)                                                                                     \
  {.layers = (l), .hidden = (h), .heads = (a), .seq_len = (s), .vocab = (V), .ffn_hidden = (f), .query_groups = (g), \
   .mlp = MODEL_MLP_SWIGLU, .norm = MODEL_NORM_RMSNORM, .position = MODEL_POSITION_ROTARY, .untied = TRUE,           \
   .no_bias = TRUE}

/* A Llama-style mixture of experts: E experts of width fe, k per token. */
#define MOE(l, h, a, g, f, s, V, E, k, fe)                                                                            \
  .layers = (l), .hidden = (h), .heads = (a), .seq_len = (s), .vocab = (V), .ffn_hidden = (f), .query_groups = (g),  \
  .mlp = MODEL_MLP_SWIGLU, .norm = MODEL_NORM_RMSNORM, .position = MODEL_POSITION_ROTARY, .untied = TRUE,             \
  .no_bias = TRUE, .experts = (E), .topk = (k), .moe_ffn = (fe)

static const struct {
  const char *name;
  ModelShape shape;
  const char *source;
} builtin[] = {
    {"gpt3-1b", GPT(24, 2048, 16), "Brown et al. 2020 Table 2.1 (GPT-3 XL), TeraPipe's 16 heads"},
    {"gpt3-2.7b", GPT(32, 2560, 32), "Brown et al. 2020 Table 2.1 (GPT-3 2.7B)"},
    {"gpt3-6.7b", GPT(32, 4096, 32), "Brown et al. 2020 Table 2.1 (GPT-3 6.7B)"},
    {"gpt3-13b", GPT(40, 5120, 40), "Brown et al. 2020 Table 2.1 (GPT-3 13B)"},
    {"gpt3-44b", GPT(96, 6144, 48), "Li et al. 2021 (TeraPipe) Table 1"},
    {"gpt3-175b", GPT(96, 12288, 96), "Brown et al. 2020 Table 2.1 (GPT-3 175B)"},
    {"megatron-1.7b", GPT(24, 2304, 24), "Narayanan et al. 2021 (SC21) Table 1"},
    {"megatron-3.6b", GPT(30, 3072, 32), "Narayanan et al. 2021 (SC21) Table 1"},
    {"megatron-7.5b", GPT(36, 4096, 32), "Narayanan et al. 2021 (SC21) Table 1"},
    {"megatron-18b", GPT(40, 6144, 48), "Narayanan et al. 2021 (SC21) Table 1"},
    {"megatron-39b", GPT(48, 8192, 64), "Narayanan et al. 2021 (SC21) Table 1"},
    {"megatron-76b", GPT(60, 10240, 80), "Narayanan et al. 2021 (SC21) Table 1"},
    {"megatron-145b", GPT(80, 12288, 96), "Narayanan et al. 2021 (SC21) Table 1"},
    {"megatron-310b", GPT(96, 16384, 128), "Narayanan et al. 2021 (SC21) Table 1"},
    {"megatron-530b", GPT(105, 20480, 128), "Narayanan et al. 2021 (SC21) Table 1"},
    {"megatron-1t", GPT(128, 25600, 160), "Narayanan et al. 2021 (SC21) Table 1"},
    {"llama2-7b", LLAMA(32, 4096, 32, 32, 11008, 4096, 32000),
     "Touvron et al. 2023 (Llama 2) Table 1; meta-llama/Llama-2-7b-hf config.json"},
    {"llama2-13b", LLAMA(40, 5120, 40, 40, 13824, 4096, 32000),
     "Touvron et al. 2023 (Llama 2) Table 1; meta-llama/Llama-2-13b-hf config.json"},
    {"llama2-70b", LLAMA(80, 8192, 64, 8, 28672, 4096, 32000),
     "Touvron et al. 2023 (Llama 2) Table 1; meta-llama/Llama-2-70b-hf config.json"},
    {"llama3-8b", LLAMA(32, 4096, 32, 8, 14336, 8192, 128256),
     "Llama Team 2024 (The Llama 3 Herd of Models) Table 3; meta-llama/Meta-Llama-3-8B config.json"},
    {"llama3-70b", LLAMA(80, 8192, 64, 8, 28672, 8192, 128256),
     "Llama Team 2024 (The Llama 3 Herd of Models) Table 3; meta-llama/Meta-Llama-3-70B config.json"},
    {"llama3-405b", LLAMA(126, 16384, 128, 8, 53248, 8192, 128256),
     "Llama Team 2024 (The Llama 3 Herd of Models) Table 3; meta-llama/Llama-3.1-405B config.json"},
    /* Mixtures of experts.  The sequence length is the one their pretraining
     * (and Megatron-Core's examples) use, 4096, not the longest context. */
    {"mixtral-8x7b", {MOE(32, 4096, 32, 8, 14336, 4096, 32000, 8, 2, 14336)},
     "Jiang et al. 2024 (Mixtral of Experts) Table 1; mistralai/Mixtral-8x7B-v0.1 config.json"},
    {"mixtral-8x22b", {MOE(56, 6144, 48, 8, 16384, 4096, 32000, 8, 2, 16384)},
     "mistralai/Mixtral-8x22B-v0.1 config.json"},
    {"deepseek-v3",
     {MOE(61, 7168, 128, 0, 18432, 4096, 129280, 256, 8, 2048), .kv_channels = 128, .shared_ffn = 2048,
      .first_dense = 3, .router_bias = TRUE, .q_lora = 1536, .kv_lora = 512, .rope_dim = 64, .v_dim = 128, .mtp = 1},
     "DeepSeek-AI 2024 (DeepSeek-V3 Technical Report) sections 2 and 4.2; deepseek-ai/DeepSeek-V3 config.json"},
    {"qwen3-30b-a3b", {MOE(48, 2048, 32, 4, 6144, 4096, 151936, 128, 8, 768), .kv_channels = 128, .qk_norm = TRUE},
     "Qwen Team 2025 (Qwen3 Technical Report) Table 2; Qwen/Qwen3-30B-A3B config.json"},
    {"qwen3-235b-a22b",
     {MOE(94, 4096, 64, 4, 12288, 4096, 151936, 128, 8, 1536), .kv_channels = 128, .qk_norm = TRUE},
     "Qwen Team 2025 (Qwen3 Technical Report) Table 2; Qwen/Qwen3-235B-A22B config.json"},
};

const char *const *model_names(void) {
  static const char *names[G_N_ELEMENTS(builtin) + 1];
  if (!names[0])
    for (guint i = 0; i < G_N_ELEMENTS(builtin); i++)
      names[i] = builtin[i].name;
  return names;
}

gboolean model_lookup(const char *name, ModelShape *out) {
  for (guint i = 0; i < G_N_ELEMENTS(builtin); i++)
    if (strcmp(builtin[i].name, name) == 0) {
      *out = builtin[i].shape;
      return TRUE;
    }
  return FALSE;
}

const char *model_source(const char *name) {
  for (guint i = 0; i < G_N_ELEMENTS(builtin); i++)
    if (strcmp(builtin[i].name, name) == 0)
      return builtin[i].source;
  return NULL;
}
