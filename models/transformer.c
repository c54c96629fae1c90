/* ptdsim — transformer shapes, parameter and FLOP counts (see transformer.h). */
#include "transformer.h"

#include <string.h>

guint model_ffn(const ModelShape *m) { return m->ffn_hidden ? m->ffn_hidden : 4 * m->hidden; }
guint model_groups(const ModelShape *m) { return m->query_groups ? m->query_groups : m->heads; }
guint model_head_dim(const ModelShape *m) { return m->kv_channels ? m->kv_channels : m->hidden / m->heads; }

gboolean model_is_gpt(const ModelShape *m) {
  return model_ffn(m) == 4 * m->hidden && model_groups(m) == m->heads &&
         (guint64)model_head_dim(m) * m->heads == m->hidden && m->mlp == MODEL_MLP_GELU &&
         m->norm == MODEL_NORM_LAYERNORM && m->position == MODEL_POSITION_LEARNED && !m->untied && !m->no_bias;
}

guint64 model_norm_params(const ModelShape *m) {
  return m->norm == MODEL_NORM_RMSNORM ? m->hidden : 2ull * m->hidden;
}

ModelLinears model_layer_linears(const ModelShape *m) {
  guint64 h = m->hidden, f = model_ffn(m), d = model_head_dim(m);
  guint64 q = (guint64)m->heads * d, kv = (guint64)model_groups(m) * d;
  guint64 up = m->mlp == MODEL_MLP_SWIGLU ? 2 * f : f; /* gate and up projections, or h -> f */
  guint64 bias = m->no_bias ? 0 : 1;
  return (ModelLinears){h * (q + 2 * kv) + bias * (q + 2 * kv), q * h + bias * h, h * up + bias * up, f * h + bias * h,
                        model_norm_params(m), bias * h};
}

guint64 model_layer_param_count(const ModelShape *m) {
  ModelLinears l = model_layer_linears(m);
  return l.qkv + l.proj + l.up + l.down + 2 * l.norm;
}

guint64 model_param_count(const ModelShape *m) {
  guint64 h = m->hidden, V = m->vocab;
  guint64 embeddings = V * h * (m->untied ? 2 : 1) + (m->position == MODEL_POSITION_LEARNED ? (guint64)m->seq_len * h : 0);
  return (guint64)m->layers * model_layer_param_count(m) + embeddings + model_norm_params(m);
}

double model_slice_forward_flops(const ModelShape *m, guint b, guint tokens, guint context) {
  double h = m->hidden;
  if (model_is_gpt(m))
    /* QKV 6bsh^2, scores 2bs^2h, attention over values 2bs^2h, projection
     * 2bsh^2, MLP 16bsh^2. */
    return 24.0 * b * tokens * h * h + 4.0 * b * tokens * (double)(tokens + context) * h;
  double d = model_head_dim(m), q = (double)m->heads * d, kv = (double)model_groups(m) * d, f = model_ffn(m);
  double bq = (double)b * tokens, mlp = m->mlp == MODEL_MLP_SWIGLU ? 3.0 : 2.0; /* GEMMs of h x f */
  return 2.0 * bq * h * (q + 2.0 * kv) + 4.0 * bq * (double)(tokens + context) * q + 2.0 * bq * q * h +
         2.0 * bq * h * f * mlp;
}

double model_layer_forward_flops(const ModelShape *m, guint b) { return model_slice_forward_flops(m, b, m->seq_len, 0); }

double model_logit_forward_flops(const ModelShape *m, guint64 b) {
  return 2.0 * (double)b * m->seq_len * m->hidden * m->vocab;
}

double model_slice_attention_core_flops(const ModelShape *m, guint b, guint tokens, guint context) {
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
  double layers = (recompute == MODEL_RECOMPUTE_FULL ? 4.0 : 3.0) * m->layers * model_layer_forward_flops(m, 1) *
                  (double)global_batch;
  if (recompute == MODEL_RECOMPUTE_SELECTIVE)
    layers += (double)m->layers * model_attention_core_flops(m, 1) * (double)global_batch;
  return layers + 3.0 * model_logit_forward_flops(m, global_batch);
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
