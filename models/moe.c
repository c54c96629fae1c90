/* ptdsim — an MoE layer's MLP block (see moe.h). */
#include "moe.h"

#include <math.h>
#include <string.h>

#include "compute.h"

double model_moe_expert_tokens(const ModelShape *m, const ModelMoeOptions *o) {
  double T = (double)o->b * m->seq_len / ((double)MAX(o->t, 1u) * MAX(o->cp, 1u));
  double skew = o->capacity > 0 ? MIN(MAX(o->imbalance, 1.0), o->capacity) : MAX(o->imbalance, 1.0);
  /* the ep etp ranks' T tokens each choose k of the E experts (the all-gather
   * dispatcher brings every token to every rank; its experts take the same) */
  return T * o->ep * o->etp * m->topk / m->experts * skew;
}

double model_moe_a2a_wire_bytes(const ModelShape *m, const ModelMoeOptions *o) {
  double T = (double)o->b * m->seq_len / ((double)MAX(o->t, 1u) * MAX(o->cp, 1u));
  return T * m->topk * m->hidden * 2.0 * (o->ep - 1) / o->ep;
}

/* ln C(n, r); -inf where r is out of 0..n. */
static double ln_choose(double n, double r) {
  if (r < 0 || r > n)
    return -INFINITY;
  return lgamma(n + 1) - lgamma(r + 1) - lgamma(n - r + 1);
}

/* C(pool - x, k) / C(pool, k): none of k picks out of `pool` among x. */
static double miss(double pool, double x, double k) {
  double q = 1;
  for (double i = 0; i < k && q > 0; i++)
    q *= MAX(pool - x - i, 0.0) / (pool - i);
  return q;
}

double model_moe_reach(const ModelShape *m, const ModelMoeOptions *o, guint units) {
  guint E = m->experts, G = o->groups ? o->groups : 1, M = o->groups ? o->group_topk : 1;
  if (units == 0 || E == 0 || E % units || E % G)
    return 0;
  guint w = E / G, c = E / units;
  double pool = (double)M * w, lnall = ln_choose(G, M), reach = 0;
  /* count[j * (c + 1) + x]: the sets of j of the unit's overlapping groups
   * holding x of its experts */
  double *count = g_new(double, (gsize)(M + 1) * (c + 1));
  for (guint u = 0; u < units; u++) {
    guint lo = u * c, hi = lo + c, first = lo / w, last = (hi - 1) / w, span = last - first + 1;
    memset(count, 0, sizeof(double) * (M + 1) * (c + 1));
    count[0] = 1;
    for (guint g = first; g <= last; g++) {
      guint o_g = MIN(hi, (g + 1) * w) - MAX(lo, g * w);
      for (guint j = MIN(M, g - first + 1); j >= 1; j--)
        for (guint x = c; x >= o_g; x--) {
          count[j * (c + 1) + x] += count[(j - 1) * (c + 1) + x - o_g];
          if (x == 0)
            break;
        }
    }
    double missed = 0;
    for (guint j = 0; j <= MIN(M, span); j++) {
      double pj = exp(ln_choose(G - span, M - j) - lnall);
      for (guint x = 0; x <= c; x++)
        if (count[j * (c + 1) + x] > 0)
          missed += count[j * (c + 1) + x] * pj * miss(pool, x, m->topk);
    }
    reach += 1 - missed;
  }
  g_free(count);
  return reach;
}

void model_moe_deepep_bytes(const ModelShape *m, const ModelMoeOptions *o, gboolean combine, double *ib,
                            double *nvl) {
  double T = (double)o->b * m->seq_len / ((double)MAX(o->t, 1u) * MAX(o->cp, 1u)), h = m->hidden;
  guint ep = MAX(o->ep, 1u), nodes = CLAMP(o->ep_nodes, 1u, ep), per = ep / nodes;
  double token = o->fp8 && !combine ? h + 4.0 * ceil(h / 128) : 2.0 * h;
  *ib = nodes > 1 ? T * token * model_moe_reach(m, o, nodes) * (nodes - 1) / nodes : 0;
  *nvl = per > 1 ? T * token * model_moe_reach(m, o, ep) * (per - 1) / per : 0;
}

typedef struct {
  const ModelProfile *p;
  double s, flops;
  gboolean fp8, backward; /* the experts' GEMMs in FP8; the backward pass */
} Acc;

/* A 16-bit GEMM (the router's, in every precision). */
static void gemm(Acc *a, double m, double n, double k) {
  if (m < 1 || n < 1 || k < 1)
    return;
  ModelGemm g = {1, (guint64)m, (guint64)n, (guint64)k};
  a->s += model_gemm_time_s(a->p, &g);
  a->flops += model_gemm_flops(&g);
}

static void mem(Acc *a, ModelMemClass c, double bytes) {
  if (bytes > 0)
    a->s += model_mem_time_s(a->p, c, bytes);
}

/* An expert's (or a shared expert's) GEMM: Transformer Engine's linear,
 * in FP8 as models/layer.c prices a dense one (GroupedLinear runs each
 * local expert's GEMM over its m_splits rows the same way): the operand
 * that changes (the input forward, the output gradient for dgrad) cast to
 * FP8 with its transpose, reading 2 bytes and writing 1 + 1 per element of
 * the m x k operand, then the GEMM at the FP8 rate, with fp32 promotion of
 * the partial sums for the gradients; the weight gradient reuses the casts. */
static void linear(Acc *a, double m, double n, double k, gboolean cast) {
  if (!a->fp8) {
    gemm(a, m, n, k);
    return;
  }
  if (m < 1 || n < 1 || k < 1)
    return;
  if (cast)
    mem(a, MODEL_MEM_POINTWISE, 4.0 * m * k);
  ModelGemm g = {1, (guint64)m, (guint64)n, (guint64)k};
  a->s += model_gemm_fp8_time_s(a->p, &g, a->backward);
  a->flops += model_gemm_flops(&g);
}

/* An MLP of width f on n tokens: forward h -> f (2f gated), the activation,
 * f -> h; backward the input- and weight-gradient GEMM of each. */
static void mlp(Acc *a, const ModelShape *m, double n, double f, gboolean backward) {
  double h = m->hidden, up = m->mlp == MODEL_MLP_SWIGLU ? 2 * f : f;
  a->backward = backward;
  if (!backward) {
    linear(a, n, up, h, TRUE);
    mem(a, MODEL_MEM_ACTIVATION, (m->mlp == MODEL_MLP_SWIGLU ? 6.0 : 4.0) * n * f);
    linear(a, n, h, f, TRUE);
    return;
  }
  linear(a, n, f, h, TRUE);   /* down: dgrad */
  linear(a, f, h, n, FALSE);  /*       wgrad */
  mem(a, MODEL_MEM_ACTIVATION, (m->mlp == MODEL_MLP_SWIGLU ? 10.0 : 6.0) * n * f);
  linear(a, n, h, up, TRUE);  /* up: dgrad */
  linear(a, h, up, n, FALSE); /*     wgrad */
}

void model_moe_cost(const ModelProfile *p, const ModelShape *m, const ModelMoeOptions *o, ModelMoeCost *out) {
  *out = (ModelMoeCost){0};
  double h = m->hidden, E = m->experts, k = m->topk;
  double T = (double)o->b * m->seq_len / ((double)MAX(o->t, 1u) * MAX(o->cp, 1u));
  guint etp = MAX(o->etp, 1u);
  out->tokens = T;
  out->local_experts = m->experts / MAX(o->ep, 1u);
  out->expert_tokens = model_moe_expert_tokens(m, o);
  out->dispatch_bytes = o->dispatcher == MODEL_MOE_ALLGATHER ? T * h * 2.0 * o->ep : T * k * h * 2.0;
  out->etp_bytes = etp > 1 ? T * k * h * 2.0 * etp : 0;
  if (o->dispatcher == MODEL_MOE_DEEPEP) {
    model_moe_deepep_bytes(m, o, FALSE, &out->ib_bytes_d, &out->nvl_bytes_d);
    model_moe_deepep_bytes(m, o, TRUE, &out->ib_bytes_c, &out->nvl_bytes_c);
    out->dispatch_bytes = out->ib_bytes_d + out->nvl_bytes_d;
  }
  if (p->kind == MODEL_PROFILE_IDEAL) {
    /* the ideal profile's rate (time per token of a dense layer, whatever
     * the shape) scaled by the MoE block's FLOPs over the dense layer's */
    double mlp = m->mlp == MODEL_MLP_SWIGLU ? 3.0 : 2.0;
    double moe = 2.0 * h * (E + mlp * (k * model_moe_ffn(m) + m->shared_ffn));
    double tokens = (double)o->b * m->seq_len / MAX(o->cp, 1u);
    out->fwd_experts_s = p->ideal_layer_s_per_token * tokens * moe / model_layer_forward_flops(m, 1) * m->seq_len;
    out->bwd_experts_s = 2 * out->fwd_experts_s;
    return;
  }
  double rows = T * k; /* (token, expert) rows this rank permutes */
  double fe = (double)model_moe_ffn(m) / etp, n = out->expert_tokens;
  /* shared experts: tensor-parallel over t on the t T tokens of the
   * sequence-parallel group, the same work as their T tokens at full width */
  double fs = m->shared_ffn;
  Acc a = {p, 0, 0, o->fp8, FALSE};
  /* forward */
  gemm(&a, T, E, h);                          /* router: gate logits */
  mem(&a, MODEL_MEM_NORM, 8.0 * T * E);       /* score function and top-k over fp32 logits */
  double s0 = a.s;
  if (fs > 0)
    mlp(&a, m, T, fs, FALSE);                 /* shared experts */
  out->fwd_shared_s = a.s - s0;
  mem(&a, MODEL_MEM_COPY, 4.0 * rows * h);    /* permute: gather the rows in expert order */
  out->fwd_route_s = a.s;
  a.s = 0;
  for (guint e = 0; e < out->local_experts; e++)
    mlp(&a, m, n, fe, FALSE);                 /* grouped GEMMs of the local experts */
  out->fwd_experts_s = a.s;
  if (n * fe > 0) /* their activations (mlp's memory-bound pass) */
    out->fwd_act_s = out->local_experts *
                     model_mem_time_s(p, MODEL_MEM_ACTIVATION, (m->mlp == MODEL_MLP_SWIGLU ? 6.0 : 4.0) * n * fe);
  a.s = 0;
  mem(&a, MODEL_MEM_POINTWISE, 2.0 * rows * h + 4.0 * rows + 2.0 * T * h); /* unpermute: weighted sum of k rows */
  if (fs > 0)
    mem(&a, MODEL_MEM_POINTWISE, 6.0 * T * h); /* plus the shared experts' output */
  out->fwd_unpermute_s = a.s;
  out->fwd_flops = a.flops;
  /* backward */
  a = (Acc){p, 0, 0, o->fp8, TRUE};
  mem(&a, MODEL_MEM_POINTWISE, 2.0 * T * h + 2.0 * rows * h + 2.0 * rows * h); /* unpermute: rows' and probs' grads */
  out->bwd_unpermute_s = a.s;
  a.s = 0;
  for (guint e = 0; e < out->local_experts; e++)
    mlp(&a, m, n, fe, TRUE);
  out->bwd_experts_s = a.s;
  a.s = 0;
  mem(&a, MODEL_MEM_COPY, 4.0 * rows * h);    /* permute's gradient: scatter-add back to tokens */
  if (fs > 0)
    mlp(&a, m, T, fs, TRUE);
  mem(&a, MODEL_MEM_NORM, 12.0 * T * E);      /* top-k and score function's gradient */
  gemm(&a, T, h, E);                          /* router: dgrad */
  gemm(&a, E, h, T);                          /*         wgrad */
  out->bwd_route_s = a.s;
  out->bwd_flops = a.flops;
}

guint64 model_moe_local_expert_params(const ModelShape *m, guint ep, guint etp) {
  return (guint64)(m->experts / ep) * (model_expert_params(m) / etp);
}

guint64 model_moe_local_params(const ModelShape *m, guint t, guint ep, guint etp) {
  guint64 shared = model_moe_mlp_params(m) - (guint64)m->experts * model_expert_params(m) -
                   (guint64)m->experts * m->hidden - (m->router_bias ? m->experts : 0);
  return model_moe_local_expert_params(m, ep, etp) + shared / t + (guint64)m->experts * m->hidden +
         (m->router_bias ? m->experts : 0);
}

/* Bytes per element of width f an MLP keeps: the first GEMM's output (2f
 * gated, 16-bit) and the activation's output, the second GEMM's input (16
 * bits, or its FP8 copy alone: Transformer Engine saves the cast input). */
static double mlp_kept(const ModelShape *m, gboolean fp8) {
  return (m->mlp == MODEL_MLP_SWIGLU ? 4.0 : 2.0) + (fp8 ? 1.0 : 2.0);
}

void model_moe_saved_tensors(const ModelShape *m, const ModelMoeOptions *o, guint modules, ModelMoeSaved *out) {
  *out = (ModelMoeSaved){0};
  double T = (double)o->b * m->seq_len / ((double)MAX(o->t, 1u) * MAX(o->cp, 1u)), h = m->hidden, E = m->experts;
  guint local = m->experts / MAX(o->ep, 1u);
  double rows = model_moe_expert_tokens(m, o) * local;
  double fe = (double)model_moe_ffn(m) / MAX(o->etp, 1u), fs = m->shared_ffn;
  double lin = o->fp8 ? 1.0 : 2.0, up = m->mlp == MODEL_MLP_SWIGLU ? 2.0 : 1.0;
  gboolean whole = (modules & MODEL_RC_MOE) != 0, norm = (modules & MODEL_RC_LAYERNORM) != 0;
  if (o->fp8 && !norm) /* the pre-MLP norm's output: 16-bit where the dense layer's FP8 copy was counted */
    out->norm_output = T * h * (whole ? 1.0 : 1.0 + (fs > 0 && !(modules & MODEL_RC_SHARED_EXPERTS) ? 1.0 : 0.0));
  if (whole) /* the checkpoint keeps its input alone */
    return;
  out->router = 8.0 * T * E;
  out->permute_map = 4.0 * T * (2.0 * E + 1.0);
  out->sort_maps = local > 1 ? 2.0 * 4.0 * rows : 0;
  out->fc1_input = rows * lin * h;
  out->fc1_output = rows * 2.0 * up * fe;
  out->probs = rows * 4.0;
  out->fc2_input = modules & MODEL_RC_MOE_ACT ? 0 : rows * lin * fe;
  if (fs > 0 && !(modules & MODEL_RC_SHARED_EXPERTS))
    out->shared = T * fs * mlp_kept(m, o->fp8);
}

double model_moe_activation_bytes(const ModelShape *m, const ModelMoeOptions *o, guint modules) {
  ModelMoeSaved k;
  model_moe_saved_tensors(m, o, modules, &k);
  return k.norm_output + k.router + k.permute_map + k.sort_maps + k.fc1_input + k.fc1_output + k.probs + k.fc2_input +
         k.shared;
}

double model_dense_mlp_activation_bytes(const ModelShape *m, guint t, guint b, gboolean fp8) {
  return mlp_kept(m, fp8) * model_ffn(m) * (double)m->seq_len * b / t;
}
