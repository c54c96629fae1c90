/* ptdsim — memory per GPU (formulas in memory.h). */
#include "memory.h"

#include <math.h>

double model_attention_score_bytes(const ModelShape *m, guint t, guint b, gboolean fp32_softmax) {
  double s = m->seq_len, a = m->heads;
  return (fp32_softmax ? 7.0 : 5.0) * a * s * s * b / t;
}

double model_layer_activation_bytes(const ModelShape *m, guint t, guint b, gboolean fp32_softmax) {
  double s = m->seq_len, h = m->hidden, a = m->heads;
  /* The tensor-parallel shards per s b h: the query, key, value and context
   * (2 bytes each, a d wide for query and context, g d for key and value)
   * and the MLP's activation input and output (4f; SwiGLU keeps the gate and
   * up outputs and its own, 6f); 24 for GPT. */
  double qw = (double)m->heads * model_head_dim(m), kvw = (double)model_groups(m) * model_head_dim(m);
  double sharded = (4.0 * (qw + kvw) + (m->mlp == MODEL_MLP_SWIGLU ? 6.0 : 4.0) * model_ffn(m)) / h;
  double latents = 0;
  if (model_is_mla(m)) {
    /* multi-head latent attention: queries and keys of dn + dr channels per
     * head, values and context of dv (2 bytes each, split over t), and the
     * latents every rank holds whole, before and after their norms: the
     * query's q_lora and the key/value's kv_lora + dr */
    double dn = model_head_dim(m), dqk = dn + m->rope_dim, dv = m->v_dim ? m->v_dim : dn;
    sharded = (2.0 * a * (2.0 * dqk + 2.0 * dv) + (m->mlp == MODEL_MLP_SWIGLU ? 6.0 : 4.0) * model_ffn(m)) / h;
    latents = 4.0 * ((double)m->q_lora + m->kv_lora + m->rope_dim) / h;
  }
  return s * b * h * (10.0 + latents + sharded / t + (fp32_softmax ? 7.0 : 5.0) * a * s / (h * t));
}

double model_layer_held_bytes(const ModelShape *m, const ModelMemoryRequest *r) {
  double sbh = (double)m->seq_len * r->b * m->hidden;
  double full = model_layer_activation_bytes(m, r->t, r->b, r->fp32_softmax);
  if (r->fp8) /* the norm outputs feeding QKV and the MLP, the context, the down projection's input */
    full -= (r->sequence_parallel ? 2.0 * sbh / r->t : 2.0 * sbh) +
            (double)m->seq_len * r->b * ((double)m->heads * model_head_dim(m) + model_ffn(m)) / r->t;
  if (r->sequence_parallel) /* norms, dropout masks, residual inputs: s/t of the tokens */
    full -= 10.0 * sbh - 10.0 * sbh / r->t;
  if (r->flash) /* no scores, softmax output or dropout mask: the row statistics */
    full += 4.0 * m->heads * m->seq_len * r->b / r->t - model_attention_score_bytes(m, r->t, r->b, r->fp32_softmax);
  else if (r->selective) /* the scores, softmax output, dropout mask and output are recomputed */
    full -= model_attention_score_bytes(m, r->t, r->b, r->fp32_softmax);
  return full;
}

double model_layer_wgrad_kept_bytes(const ModelShape *m, const ModelMemoryRequest *r) {
  double sb = (double)m->seq_len * r->b, h = m->hidden, t = r->t;
  double rep = r->sequence_parallel ? h / t : h; /* the norm outputs and the output gradients of the projections */
  double qw = (double)m->heads * model_head_dim(m), kvw = (double)model_groups(m) * model_head_dim(m);
  double f = model_ffn(m), up = m->mlp == MODEL_MLP_SWIGLU ? 2 * f : f;
  double inputs = rep + qw / t + rep + f / t;            /* QKV, out-projection, up and down projections */
  double grads = (qw + 2 * kvw) / t + rep + up / t + rep; /* the gradients of their outputs */
  return fmin(2 * sb * (inputs + grads), model_layer_held_bytes(m, r));
}

void model_memory(const ModelShape *m, const ModelMemoryRequest *r, ModelMemory *out) {
  double P = (double)r->params;
  double sbh = (double)m->seq_len * r->b * m->hidden;
  out->weights = 2 * P + (r->fp8 ? 2.0 * (double)r->fp8_weight_params : 0);
  out->gradients = 2 * P;
  out->optimizer = r->optimizer_shards > 1 ? 12 * P / r->optimizer_shards : 12 * P;
  double full = model_layer_held_bytes(m, r);
  if (r->sequence_parallel)
    sbh /= r->t;
  double act = r->recompute ? 2 * sbh * r->inflight_layer_mbs + full : full * r->inflight_layer_mbs;
  if (r->last_stage)
    act += 6.0 * m->seq_len * r->b * (double)(m->vocab / r->t);
  if (r->first_stage)
    act += sbh * r->inflight_mbs;
  out->activations = act;
  out->total = out->weights + out->gradients + out->optimizer + out->activations;
}
