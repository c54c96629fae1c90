/* ptdsim — GPT transformer shapes, parameter and FLOP counts (SC21 Eq. 2, 3). */
#include "transformer.h"

#include <string.h>

guint64 model_layer_param_count(const ModelShape *m) {
  guint64 h = m->hidden;
  /* QKV 3h^2 + 3h, projection h^2 + h, MLP 4h^2 + 4h and 4h^2 + h,
   * two layernorms 2 * 2h. */
  return 12 * h * h + 13 * h;
}

guint64 model_param_count(const ModelShape *m) {
  guint64 h = m->hidden;
  /* Word embedding V*h (tied with the logit layer) and position embedding
   * s*h; the final layernorm's 2h is not in Eq. 2, and neither is it here. */
  return (guint64)m->layers * model_layer_param_count(m) + ((guint64)m->vocab + m->seq_len) * h;
}

double model_layer_forward_flops(const ModelShape *m, guint b) {
  double h = m->hidden, s = m->seq_len;
  /* QKV 6bsh^2, scores 2bs^2h, attention over values 2bs^2h, projection
   * 2bsh^2, MLP 16bsh^2. */
  return 24.0 * b * s * h * h + 4.0 * b * s * s * h;
}

static double logit_forward_flops(const ModelShape *m, guint64 b) {
  return 2.0 * (double)b * m->seq_len * m->hidden * m->vocab;
}

double model_flops_per_iteration(const ModelShape *m, guint64 global_batch) {
  double B = (double)global_batch, s = m->seq_len, l = m->layers, h = m->hidden, V = m->vocab;
  return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

double model_hardware_flops_per_iteration(const ModelShape *m, guint64 global_batch, gboolean recompute) {
  double layers = (recompute ? 4.0 : 3.0) * m->layers * model_layer_forward_flops(m, 1) * (double)global_batch;
  return layers + 3.0 * logit_forward_flops(m, global_batch);
}

/* GPT-3 family (Brown et al. 2020, Table 2.1) with TeraPipe's head counts
 * (head dimension 128), and the SC21 Table 1 models. */
static const struct {
  const char *name;
  ModelShape shape;
} builtin[] = {
    {"gpt3-1b", {24, 2048, 16, 2048, 51200}},        {"gpt3-13b", {40, 5120, 40, 2048, 51200}},
    {"gpt3-44b", {96, 6144, 48, 2048, 51200}},       {"gpt3-175b", {96, 12288, 96, 2048, 51200}},
    {"megatron-1.7b", {24, 2304, 24, 2048, 51200}},  {"megatron-3.6b", {30, 3072, 32, 2048, 51200}},
    {"megatron-7.5b", {36, 4096, 32, 2048, 51200}},  {"megatron-18b", {40, 6144, 48, 2048, 51200}},
    {"megatron-39b", {48, 8192, 64, 2048, 51200}},   {"megatron-76b", {60, 10240, 80, 2048, 51200}},
    {"megatron-145b", {80, 12288, 96, 2048, 51200}}, {"megatron-310b", {96, 16384, 128, 2048, 51200}},
    {"megatron-530b", {105, 20480, 128, 2048, 51200}}, {"megatron-1t", {128, 25600, 160, 2048, 51200}},
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
