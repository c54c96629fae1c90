/* ptdsim — per-op costs of a Megatron GPT layer (see layer.h). */
#include "layer.h"

#include "compute.h"

/* Accumulates one segment of a pass. */
typedef struct {
  const ModelProfile *p;
  ModelPass *pass;
  guint seg;
  gboolean fp8; /* the linear layers' GEMMs in FP8 (Transformer Engine) */
  gboolean backward; /* gradient GEMMs: FP8 with split accumulation */
  gboolean kernels_2021; /* Megatron's 2021 memory-bound kernels (a layer without flash attention) */
  gboolean eager;        /* PyTorch eager's kernel list (layer.h) */
  gboolean cache;        /* TeraPipe's own layer over its attention cache (model_layer_slice_cost_with) */
  gboolean free_mem;     /* memory-bound kernels cost nothing (ModelLayerOptions.free_membound) */
  double host_op_s;      /* host time per launch */
  double host, gpu;      /* when the host issues the next kernel, when the GPU ends the last one */
} Acc;

static Acc acc(const ModelProfile *p, ModelPass *pass, const ModelLayerOptions *o, gboolean fp8, gboolean backward,
               gboolean kernels_2021) {
  return (Acc){.p = p, .pass = pass, .fp8 = fp8, .backward = backward, .kernels_2021 = kernels_2021,
               .eager = o && o->framework == MODEL_FRAMEWORK_EAGER, .free_mem = o && o->free_membound,
               .host_op_s = o ? o->host_op_s : 0};
}

/* One kernel of `s` seconds: it starts when the GPU has ended the one
 * before and the host has issued it (layer.h: host_op_s). */
static void kernel(Acc *a, double s, gboolean membound) {
  double wait = 0;
  if (a->host_op_s > 0) {
    double start = MAX(a->gpu, a->host);
    wait = start - a->gpu;
    a->host += a->host_op_s;
    a->gpu = start + s;
  }
  a->pass->seg_s[a->seg] += wait + s;
  a->pass->host_wait_s += wait;
  if (membound)
    a->pass->membound_s += s;
  a->pass->kernels++;
}

/* The span of a pass that starts here and, with span_end, ends there (both
 * in one segment). */
static void span_begin(Acc *a, ModelSpan *sp) {
  sp->seg = a->seg;
  sp->at_s = a->pass->seg_s[a->seg];
}
static void span_end(Acc *a, ModelSpan *sp) {
  g_assert(sp->seg == a->seg);
  sp->s = a->pass->seg_s[a->seg] - sp->at_s;
}

static void gemm(Acc *a, guint64 batch, guint64 m, guint64 n, guint64 k) {
  ModelGemm g = {batch, m, n, k};
  a->pass->flops += model_gemm_flops(&g);
  kernel(a, model_gemm_time_s(a->p, &g), FALSE);
}

/* A memory-bound kernel of class `c` moving `bytes` (read + written). */
static void memop(Acc *a, ModelMemClass c, double bytes) {
  if (a->free_mem)
    return;
  kernel(a, a->kernels_2021 ? model_mem_2021_time_s(a->p, c, bytes) : model_mem_time_s(a->p, c, bytes), TRUE);
}

/* A GEMM of a linear layer (QKV, projection, MLP).  In FP8, Transformer
 * Engine first casts the operand that changes (the input forward, the
 * output gradient for dgrad) to FP8 with its transpose for the other pass,
 * updating the tensor's amax on the way: a kernel reading 2 bytes and
 * writing 1 + 1 per element of the m x k operand; the weight-gradient GEMM
 * reuses those casts.  Then the GEMM runs at the FP8 rate: with fast
 * accumulation forward, with fp32 promotion of the partial sums for the
 * gradients (Transformer Engine's defaults: _2X_ACC_FPROP false,
 * _2X_ACC_DGRAD and _2X_ACC_WGRAD true). */
static void linear(Acc *a, guint64 m, guint64 n, guint64 k, gboolean cast) {
  if (!a->fp8) {
    gemm(a, 1, m, n, k);
    return;
  }
  if (cast)
    memop(a, MODEL_MEM_POINTWISE, 4.0 * (double)m * (double)k);
  ModelGemm g = {1, m, n, k};
  a->pass->flops += model_gemm_flops(&g);
  kernel(a, model_gemm_fp8_time_s(a->p, &g, a->backward), FALSE);
}

/* A linear layer's GEMM time alone, at the rate linear() runs it (no cast,
 * nothing charged): what a recomputation share counts. */
static double linear_s(const Acc *a, guint64 m, guint64 n, guint64 k) {
  ModelGemm g = {1, m, n, k};
  return a->fp8 ? model_gemm_fp8_time_s(a->p, &g, a->backward) : model_gemm_time_s(a->p, &g);
}

/* PyTorch eager's AccumulateGrad after a weight-gradient GEMM: the new
 * gradient added into the parameter's .grad kept from the backward before
 * (reads both, writes one, 16-bit: 6 bytes per parameter). */
static void accumulate(Acc *a, guint64 rows, guint64 cols) {
  if (a->eager && !a->cache) /* (TeraPipe adds every gradient after the pass: cache_accumulate) */
    memop(a, MODEL_MEM_POINTWISE, 6.0 * (double)rows * (double)cols);
}

/* Element counts of one layer's tensors on one GPU, for b sequences of which
 * q tokens are processed, attending over kv tokens (q for a whole sequence;
 * q + the earlier context for a TeraPipe token slice).  For GPT the query,
 * key/value and context widths are all h/t and the MLP's is 4h/t. */
typedef struct {
  guint64 bs, h, ht, qkv_t, ffn_t, heads_t, s, kv, d;
  gboolean swiglu, rotary, flash, no_mlp;
  /* multi-head latent attention (transformer.h): the ranks, and the up
   * projections' widths on this rank, a (dn + dr) / t and a (dn + dv) / t */
  gboolean mla;
  guint64 q_lora, kv_lora, rope, q_up_t, kv_up_t;
  guint cp;         /* context parallelism: q = kv = s/cp here, the ring's sequence cp times that */
  double N;  /* b*s*h: norm, dropout and residual tensors (replicated) */
  double Nm; /* b*s*f/t: MLP activation shard (the output of the activation) */
  double Na; /* b*(a/t)*q*kv: attention matrix shard */
  double Nc; /* b*s*a*d/t: attention context shard */
  double Nr; /* b*s*(a+g)*d/t: the query and key shards rotary embeddings rotate */
  double Nq, Nk; /* b*s*a*d/t and b*s*g*d/t: the query shard and the key shard apart */
  double Nf;     /* TeraPipe: b*L*g*d/t, the key (or value) cache of the whole sequence of L tokens */
  gboolean last; /* TeraPipe: the slice ends the sequence */
} Dims;

static Dims dims(const ModelShape *m, guint t, guint b, guint q, guint kv) {
  Dims d;
  d.bs = (guint64)b * q;
  d.h = m->hidden;
  d.d = model_head_dim(m);
  guint64 qw = (guint64)m->heads * d.d, kvw = (guint64)model_groups(m) * d.d;
  d.ht = qw / t;                 /* context and projection width */
  d.qkv_t = (qw + 2 * kvw) / t;  /* query, key and value columns */
  d.ffn_t = (guint64)model_ffn(m) / t;
  d.heads_t = (guint64)b * (m->heads / t);
  d.s = q;
  d.kv = kv;
  d.swiglu = m->mlp == MODEL_MLP_SWIGLU;
  d.rotary = m->position == MODEL_POSITION_ROTARY;
  d.flash = FALSE;
  d.no_mlp = FALSE;
  d.mla = model_is_mla(m);
  if (d.mla) {
    guint64 dn = model_head_dim(m), dv = m->v_dim ? m->v_dim : dn;
    d.q_lora = m->q_lora;
    d.kv_lora = m->kv_lora;
    d.rope = m->rope_dim;
    d.q_up_t = (guint64)m->heads * (dn + d.rope) / t;
    d.kv_up_t = (guint64)m->heads * (dn + dv) / t;
    /* the core: scores over dn + dr channels, values of dv, as one head
     * dimension of their mean (the same FLOPs) */
    d.d = (dn + d.rope + dv) / 2;
    qw = (guint64)m->heads * dv;
    kvw = qw;
    d.ht = qw / t;
    d.qkv_t = d.q_up_t + d.kv_up_t;
  }
  d.cp = 1;
  d.N = (double)d.bs * d.h;
  d.Nm = (double)d.bs * d.ffn_t;
  d.Na = (double)d.heads_t * d.s * d.kv;
  d.Nc = (double)d.bs * d.ht;
  d.Nr = (double)d.bs * (qw + kvw) / t;
  d.Nq = (double)d.bs * qw / t;
  d.Nk = (double)d.bs * kvw / t;
  d.Nf = (double)b * m->seq_len * kvw / t;
  d.last = kv >= m->seq_len;
  if (d.mla) /* the rotary channels: each head's query part and the one shared key */
    d.Nr = (double)d.bs * ((double)m->heads * d.rope / t + d.rope);
  return d;
}

/* Scale-mask-softmax without the fused kernel.  Megatron-LM's
 * FusedScaleMaskSoftmax (megatron/model/fused_softmax.py) falls back to
 * PyTorch ops, and query-key layer scaling (on by default) forces
 * softmax_in_fp32 (megatron/arguments.py): input.float(), input * scale,
 * masked_fill_ (attention_mask_func), an fp32 torch.nn.Softmax and
 * probs.half(): five kernels with fp32 intermediates.  Bytes per element:
 * cast 2 + 4, scale 4 + 4, masked_fill_ in place 4 + 4 (the boolean mask is
 * broadcast over heads and stays in L2), softmax 4 + 4 (its extra passes
 * over a row hit the cache), cast back 4 + 2.  Backward in reverse: the
 * cast's gradient 2 + 4, softmax backward (gradient and saved fp32 output
 * in, gradient out) 4 + 4 + 4, masked_fill's 4 + 4, the scale's 4 + 4, the
 * cast back 4 + 2.  The fused kernel reads and writes fp16 once: 2 + 2
 * forward, 2 + 2 + 2 backward. */
static const double softmax_fp32_fwd[] = {6, 8, 8, 8, 6};
static const double softmax_fp32_bwd[] = {6, 12, 8, 8, 6};

/* Bytes moved by element-wise kernels, fp16 (2 bytes) tensors and 1-byte
 * dropout masks.  Forward: layernorm reads x, writes y (4N); softmax reads
 * and writes the scores (4Na); dropout reads, writes, and writes its mask
 * (5 per element); bias+GeLU reads and writes (4Nm); bias+dropout+add reads
 * x and the residual, writes y and the mask (7N).  Unfused, every step is its
 * own read and write. */
double model_flash_time_s(const ModelProfile *p, guint64 heads, guint64 q, guint64 kv, guint64 d, gboolean backward) {
  if (p->flash_waves)
    return model_flash_waves_time_s(p, backward, heads, q, kv, d);
  double eff = backward ? p->flash_backward_efficiency : p->flash_forward_efficiency;
  guint64 blocks = (q + 127) / 128;
  /* causal: the query block i sees key blocks 0..i (and, for a slice, the
   * earlier context whole) */
  double causal = 1.0 - ((double)q / kv) * (1.0 - (double)(blocks + 1) / (2.0 * blocks));
  double flops = 4.0 * heads * q * kv * d * causal * (backward ? 2.5 : 1.0);
  return flops / (p->peak_flops * eff * p->sustained_clock_ratio) + p->kernel_launch_s;
}

/* A FlashAttention-2 kernel: its time and, as ptdsim counts FLOPs, the
 * GEMMs it stands for (full s x s, as the model FLOPs count attention). */
static void flash(Acc *a, const Dims *d, gboolean backward) {
  if (d->cp > 1) { /* ring attention: this rank's queries against the whole sequence, 1/cp of the causal work */
    a->pass->flops += 4.0 * d->heads_t * d->s * (d->s * d->cp) * d->d * (backward ? 2.0 : 1.0);
    double ring = model_flash_ring_time_s(a->p, d->heads_t, d->s * d->cp, d->d, d->cp, backward);
    if (a->host_op_s > 0) /* each step a launch of its own */
      for (guint i = 0; i < d->cp; i++)
        kernel(a, ring / d->cp, FALSE);
    else {
      kernel(a, ring, FALSE);
      a->pass->kernels += d->cp - 1;
    }
    return;
  }
  a->pass->flops += 4.0 * d->heads_t * d->s * d->kv * d->d * (backward ? 2.0 : 1.0);
  kernel(a, model_flash_time_s(a->p, d->heads_t, d->s, d->kv, d->d, backward), FALSE);
}

double model_flash_ring_time_s(const ModelProfile *p, guint64 heads, guint64 s, guint64 d, guint cp, gboolean backward) {
  if (p->flash_waves) /* every step has the work of causal attention over s / cp tokens */
    return cp * model_flash_waves_time_s(p, backward, heads, s / cp, s / cp, d);
  double eff = backward ? p->flash_backward_efficiency : p->flash_forward_efficiency;
  guint64 blocks = (s + 127) / 128;
  double causal = (double)(blocks + 1) / (2.0 * blocks);
  double flops = 4.0 * heads * s * s * d * causal * (backward ? 2.5 : 1.0) / cp;
  return flops / (p->peak_flops * eff * p->sustained_clock_ratio) + cp * p->kernel_launch_s;
}

/* Rotary embeddings as PyTorch eager runs the common rotate-half form
 * (x * cos + cat(-x2, x1) * sin, as in Hugging Face Transformers' Llama):
 * per element of the rotated tensor, forward mul by cos 2 + 2 bytes, neg of
 * the second half 1 + 1, cat 2 + 2, mul by sin 2 + 2, add 2 + 2 + 2;
 * backward (autograd's graph of it) mul 2 + 2, neg 1 + 1, mul 2 + 2, and
 * for each half's slice a zero fill 2, a copy 1 + 1 and an add into the
 * gradient 2 + 2 + 2.  The query and the key shards each run the list. */
static const double rope_eager_fwd[] = {4, 2, 4, 4, 6};
static const double rope_eager_bwd[] = {4, 2, 4, 2, 2, 6, 2, 2, 6};

static void rotary(Acc *a, const Dims *d, gboolean backward) {
  if (!a->eager || d->mla) { /* Megatron-Core's fused kernel over both shards */
    memop(a, MODEL_MEM_POINTWISE, 4 * d->Nr);
    return;
  }
  const double *bytes = backward ? rope_eager_bwd : rope_eager_fwd;
  guint n = backward ? G_N_ELEMENTS(rope_eager_bwd) : G_N_ELEMENTS(rope_eager_fwd);
  double shard[2] = {backward ? d->Nk : d->Nq, backward ? d->Nq : d->Nk}; /* backward: in reverse */
  for (guint j = 0; j < 2; j++)
    for (guint i = 0; i < n; i++)
      memop(a, !backward && i == 2 ? MODEL_MEM_COPY : MODEL_MEM_POINTWISE, bytes[i] * shard[j]); /* (the cat: a copy) */
}

/* The residual add closing a block: Megatron's fused bias-dropout-add (or,
 * unfused, its three kernels); PyTorch eager's add (no dropout in today's
 * models). */
static void residual(Acc *a, const Dims *d, gboolean fused) {
  if (a->eager)
    memop(a, MODEL_MEM_POINTWISE, 6 * d->N);
  else if (fused)
    memop(a, MODEL_MEM_POINTWISE, 7 * d->N);    /* bias-dropout-add */
  else {
    memop(a, MODEL_MEM_POINTWISE, 4 * d->N);    /* bias */
    memop(a, MODEL_MEM_POINTWISE, 5 * d->N);    /* dropout */
    memop(a, MODEL_MEM_POINTWISE, 6 * d->N);    /* residual add */
  }
}

/* A norm's backward and the residual branch's gradient sum: Megatron's
 * one pass (12N); PyTorch eager's norm backward (input gradient 6N, then
 * the weight gradient's column reduction 4N) and its add_ into the
 * residual's gradient (6N). */
static void norm_backward(Acc *a, const Dims *d) {
  if (!a->eager) {
    memop(a, MODEL_MEM_NORM, 12 * d->N);
    return;
  }
  memop(a, MODEL_MEM_NORM, 6 * d->N);
  memop(a, MODEL_MEM_NORM, 4 * d->N);
  memop(a, MODEL_MEM_POINTWISE, 6 * d->N);
}

/* TeraPipe's attention over its cache (transformer_models.py,
 * MultiheadLMAttentionWithCache.forward, PyTorch eager, fp16), per slice of
 * q = d->s tokens after c = kv - q earlier ones: q * scaling (2 + 2 bytes
 * per query element); the causal mask of the slice built (new_full writes
 * 2 per q x q element, triu_ reads and writes 2 + 2); the slice's keys and
 * values written into the caches (assign_cache_, copies of 2 + 2); the
 * zeros for the context (2 per q x c element, no kernel without context)
 * and the cat of the mask (2 + 2 per q x kv); the scores bmm; the mask
 * added in place (2 + 2 per score); the softmax to fp32 (reads 2, writes
 * 4: one kernel, PyTorch's half-to-float softmax); type_as back to fp16
 * (4 + 2); the bmm over values.  No dropout. */
static void cache_core(Acc *a, const Dims *d) {
  double qq = (double)d->s * d->s, qc = (double)d->s * (d->kv - d->s);
  memop(a, MODEL_MEM_POINTWISE, 4 * d->Nq);    /* q * scaling */
  memop(a, MODEL_MEM_POINTWISE, 2 * qq);       /* new_full (the mask) */
  memop(a, MODEL_MEM_POINTWISE, 4 * qq);       /* triu_ */
  memop(a, MODEL_MEM_COPY, 4 * d->Nk);         /* keys into the cache */
  memop(a, MODEL_MEM_COPY, 4 * d->Nk);         /* values into the cache */
  if (qc > 0)
    memop(a, MODEL_MEM_POINTWISE, 2 * qc);     /* new_zeros for the context */
  memop(a, MODEL_MEM_COPY, 4 * (qq + qc));     /* cat: the mask over the context and the slice */
  gemm(a, d->heads_t, d->s, d->kv, d->d);       /* scores Q K^T */
  memop(a, MODEL_MEM_POINTWISE, 4 * d->Na);    /* += mask */
  memop(a, MODEL_MEM_SOFTMAX, 6 * d->Na);      /* softmax to fp32 */
  memop(a, MODEL_MEM_POINTWISE, 6 * d->Na);    /* type_as (fp16) */
  gemm(a, d->heads_t, d->s, d->d, d->kv);       /* attention over values */
}

/* The attention core's forward: what selective recomputation runs again. */
static void attention_core(Acc *a, const Dims *d, gboolean fused_softmax) {
  if (a->cache) {
    cache_core(a, d);
    return;
  }
  if (d->flash) {
    flash(a, d, FALSE);                         /* FlashAttention-2 forward */
    return;
  }
  gemm(a, d->heads_t, d->s, d->kv, d->d);       /* scores Q K^T */
  if (fused_softmax)
    memop(a, MODEL_MEM_SOFTMAX, 4 * d->Na);     /* scale-mask-softmax */
  else
    for (guint i = 0; i < G_N_ELEMENTS(softmax_fp32_fwd); i++)
      memop(a, i == 3 ? MODEL_MEM_SOFTMAX : MODEL_MEM_POINTWISE,
            softmax_fp32_fwd[i] * d->Na);       /* float, scale, mask, softmax, half */
  memop(a, MODEL_MEM_POINTWISE, 5 * d->Na);    /* attention dropout */
  gemm(a, d->heads_t, d->s, d->d, d->kv);       /* attention over values */
}

ModelTpGemm model_tp_gemm_kind(gboolean backward, guint j) {
  g_return_val_if_fail(j < 4, MODEL_TP_GEMM_GATHER_FEEDS);
  if (j % 2 == 0) /* QKV and the first MLP GEMM forward; the row-parallel input gradients backward */
    return MODEL_TP_GEMM_GATHER_FEEDS;
  return backward ? MODEL_TP_GEMM_SCATTER_BESIDE : MODEL_TP_GEMM_SCATTER_AFTER;
}

/* The time of the current segment so far: marks for ModelPass's
 * recomputation shares. */
static double mark(const Acc *a) { return a->pass->seg_s[a->seg]; }

static void forward(Acc *a, const Dims *d, gboolean fused, gboolean fused_softmax) {
  ModelPass *ps = a->pass;
  a->seg = 0;
  double t0 = mark(a);
  memop(a, MODEL_MEM_NORM, 4 * d->N);           /* layernorm 1 */
  ps->norms_s += mark(a) - t0;
  ps->op_sac_s += mark(a) - t0;
  if (!d->mla) { /* the key GEMM's share of QKV's */
    ps->op_sac_s += linear_s(a, d->bs, (d->qkv_t - d->ht) / 2, d->h);
  }
  span_begin(a, &ps->tp_gemm[0]);
  if (d->mla) { /* down-projections (whole on every rank), their norms, up-projections (split) */
    double q0 = mark(a);
    linear(a, d->bs, d->q_lora ? d->q_lora : d->q_up_t, d->h, TRUE);
    if (!d->q_lora) /* no query latent: its projection is in the checkpoint */
      ps->mla_up_s += mark(a) - q0;
    if (d->q_lora) {
      memop(a, MODEL_MEM_NORM, 4.0 * d->bs * d->q_lora);
      double u0 = mark(a);
      linear(a, d->bs, d->q_up_t, d->q_lora, TRUE);
      ps->mla_up_s += mark(a) - u0;
    }
    linear(a, d->bs, d->kv_lora + d->rope, d->h, FALSE);
    memop(a, MODEL_MEM_NORM, 4.0 * d->bs * d->kv_lora);
    double u1 = mark(a);
    linear(a, d->bs, d->kv_up_t, d->kv_lora, TRUE);
    ps->mla_up_s += mark(a) - u1;
  } else
    linear(a, d->bs, d->qkv_t, d->h, TRUE);     /* QKV, bias in the epilogue */
  span_end(a, &ps->tp_gemm[0]);
  t0 = mark(a);
  if (d->rotary)
    rotary(a, d, FALSE);                        /* rotary embedding of Q and K */
  ps->op_sac_s += mark(a) - t0;
  if (d->mla)
    ps->mla_up_s += mark(a) - t0;
  span_begin(a, &ps->core);
  attention_core(a, d, fused_softmax);
  span_end(a, &ps->core);
  if (!a->eager || a->cache) /* (eager's SDPA writes [b, s, a, d], which the projection reads as is) */
    memop(a, MODEL_MEM_COPY, 4 * d->Nc);        /* context to [s, b, h/t] */
  span_begin(a, &ps->tp_gemm[1]);
  linear(a, d->bs, d->h, d->ht, TRUE);          /* projection */
  span_end(a, &ps->tp_gemm[1]);
  ps->op_sac_s += ps->tp_gemm[1].s;
  a->seg = 1;                                   /* --- all-reduce --- */
  t0 = mark(a);
  residual(a, d, fused);                        /* bias-dropout-add */
  double t1 = mark(a);
  memop(a, MODEL_MEM_NORM, 4 * d->N);           /* layernorm 2 */
  ps->norms_s += mark(a) - t1;
  ps->op_sac_s += mark(a) - t0;
  if (d->no_mlp) { /* an MoE layer: its MLP block is costed apart (moe.h) */
    a->seg = 2;
    residual(a, d, TRUE);                       /* the closing dropout-add */
    return;
  }
  double m0 = mark(a);
  span_begin(a, &ps->tp_gemm[2]);
  if (d->swiglu) {
    linear(a, d->bs, 2 * d->ffn_t, d->h, TRUE); /* MLP gate and up, h -> 2f */
    span_end(a, &ps->tp_gemm[2]);
    ps->op_sac_s += linear_s(a, d->bs, d->ffn_t, d->h);
    t0 = mark(a);
    if (a->eager) { /* silu(gate) * up: two kernels */
      memop(a, MODEL_MEM_ACTIVATION, 4 * d->Nm);
      memop(a, MODEL_MEM_POINTWISE, 6 * d->Nm);
    } else
      memop(a, MODEL_MEM_ACTIVATION, 6 * d->Nm); /* SwiGLU: reads 2f, writes f */
    ps->op_sac_s += mark(a) - t0;
  } else {
    linear(a, d->bs, d->ffn_t, d->h, TRUE);     /* MLP h -> 4h */
    span_end(a, &ps->tp_gemm[2]);
    t0 = mark(a);
    if (a->cache)
      memop(a, MODEL_MEM_POINTWISE, 4 * d->Nm);  /* TeraPipe's relu_ (in place) */
    else if (fused || a->eager) /* (eager: the bias in the GEMM's epilogue) */
      memop(a, MODEL_MEM_ACTIVATION, 4 * d->Nm); /* bias+GeLU */
    else {
      memop(a, MODEL_MEM_POINTWISE, 4 * d->Nm); /* bias */
      memop(a, MODEL_MEM_ACTIVATION, 4 * d->Nm); /* GeLU */
    }
    ps->op_sac_s += mark(a) - t0;
  }
  span_begin(a, &ps->tp_gemm[3]);
  linear(a, d->bs, d->h, d->ffn_t, TRUE);       /* MLP 4h -> h */
  span_end(a, &ps->tp_gemm[3]);
  ps->mlp_s += mark(a) - m0;
  a->seg = 2;                                   /* --- all-reduce --- */
  residual(a, d, fused);
}

/* A weight-gradient GEMM: counted in its segment, and apart in wgrad_s
 * (what a zero-bubble schedule's W runs; Qi et al. 2024, section 2). */
static void wlinear(Acc *a, guint64 m, guint64 n, guint64 k) {
  double before = a->pass->seg_s[a->seg];
  linear(a, m, n, k, FALSE);
  accumulate(a, m, n);
  a->pass->wgrad_s[a->seg] += a->pass->seg_s[a->seg] - before;
}

/* TeraPipe's linear layers keep their biases outside the GEMM's backward:
 * autograd's addmm backward sums the output gradient's rows (reads 2 bytes
 * per element of rows x cols). */
static void bias_grad(Acc *a, double rows, double cols) {
  if (a->cache)
    memop(a, MODEL_MEM_NORM, 2 * rows * cols);
}

/* The backward of TeraPipe's cache, after the attention core's
 * (transformer_models.py): for the keys and for the values, the slice
 * k = cache[:, :kv] gives its gradient to the whole cache (a zero fill of
 * the sequence's cache, 2 bytes per element, and a copy of the kv tokens'
 * part, 2 + 2); unless the slice ends the sequence, the later slices'
 * cache gradient is added to it (2 + 2 + 2); _AssignCache.backward clones
 * it (2 + 2) and zeroes the slice's part (2).  Then the gradient of
 * q * scaling (2 + 2). */
static void cache_backward(Acc *a, const Dims *d) {
  double kv = d->Nk * ((double)d->kv / d->s); /* the keys of the context and the slice */
  for (guint j = 0; j < 2; j++) {
    memop(a, MODEL_MEM_POINTWISE, 2 * d->Nf);  /* the slice's backward: zeros */
    memop(a, MODEL_MEM_COPY, 4 * kv);          /*                       and its part */
    if (!d->last)
      memop(a, MODEL_MEM_POINTWISE, 6 * d->Nf); /* + the later slices' cache gradient */
    memop(a, MODEL_MEM_COPY, 4 * d->Nf);       /* grad_cache_output.clone() */
    memop(a, MODEL_MEM_POINTWISE, 2 * d->Nk);  /* grad_cache.data[index] = 0 */
  }
  memop(a, MODEL_MEM_POINTWISE, 4 * d->Nq);    /* q * scaling */
}

/* TeraPipe's per-slice gradient accumulation (test_transformer_terapipe.py,
 * backward_step): after torch.autograd.grad, w.grad += grad_w for each of
 * the layer's twelve tensors in parameters() order (norm weight and bias,
 * QKV's weight and bias, the projection's, the second norm's, the two MLP
 * linears'), each reading both and writing one, 2 bytes each. */
static void cache_accumulate(Acc *a, const Dims *d) {
  double h = (double)d->h;
  const double n[] = {h, h, h * d->qkv_t, d->qkv_t, d->ht * h, h, h, h, h * d->ffn_t, d->ffn_t, d->ffn_t * h, h};
  for (guint i = 0; i < G_N_ELEMENTS(n); i++)
    memop(a, MODEL_MEM_POINTWISE, 6 * n[i]);
}

/* Backward, in reverse: every GEMM becomes an input-gradient and a
 * weight-gradient GEMM.  Element-wise backward kernels read the incoming
 * gradient and what they saved and write the outgoing gradient: dropout
 * (grad, mask -> grad: 5 per element), GeLU (grad, input -> grad, plus the
 * bias-gradient reduction: 6Nm), softmax (grad, output -> grad: 6Na),
 * layernorm (x, grad -> grad: 6N) and the residual branch's gradient sum
 * (6N). */
static void backward(Acc *a, const Dims *d, gboolean fused, gboolean fused_softmax) {
  ModelPass *ps = a->pass;
  a->seg = 0;
  if (a->eager) /* (the residual add's gradient is its input's) */
    ;
  else if (fused)
    memop(a, MODEL_MEM_POINTWISE, 5 * d->N);    /* bias-dropout-add 2 */
  else {
    memop(a, MODEL_MEM_POINTWISE, 5 * d->N);    /* dropout */
    memop(a, MODEL_MEM_NORM, 4 * d->N);         /* bias gradient (a column reduction) */
  }
  if (d->no_mlp)
    goto attention;
  span_begin(a, &ps->tp_gemm[0]);
  linear(a, d->bs, d->ffn_t, d->h, TRUE);       /* MLP 4h -> h: dgrad */
  span_end(a, &ps->tp_gemm[0]);
  wlinear(a, d->ffn_t, d->h, d->bs);      /*                wgrad */
  bias_grad(a, d->bs, d->h);
  if (d->swiglu) {
    if (a->eager) { /* the mul's two gradients, silu's backward, the cat of the gate's and up's gradients */
      memop(a, MODEL_MEM_POINTWISE, 6 * d->Nm);
      memop(a, MODEL_MEM_POINTWISE, 6 * d->Nm);
      memop(a, MODEL_MEM_ACTIVATION, 6 * d->Nm);
      memop(a, MODEL_MEM_COPY, 8 * d->Nm);
    } else
      memop(a, MODEL_MEM_ACTIVATION, 10 * d->Nm); /* SwiGLU: gradient, gate, up in; two gradients out */
    linear(a, d->bs, d->h, 2 * d->ffn_t, TRUE); /* MLP h -> 2f: dgrad */
    span_begin(a, &ps->tp_gemm[1]);
    wlinear(a, d->h, 2 * d->ffn_t, d->bs); /*                wgrad */
    span_end(a, &ps->tp_gemm[1]);
  } else {
    if (a->cache)
      memop(a, MODEL_MEM_POINTWISE, 6 * d->Nm);  /* relu_'s gradient */
    else if (fused || a->eager)
      memop(a, MODEL_MEM_ACTIVATION, 6 * d->Nm); /* bias+GeLU */
    else {
      memop(a, MODEL_MEM_ACTIVATION, 6 * d->Nm); /* GeLU */
      memop(a, MODEL_MEM_NORM, 4 * d->Nm);      /* bias gradient (a column reduction) */
    }
    linear(a, d->bs, d->h, d->ffn_t, TRUE);     /* MLP h -> 4h: dgrad */
    span_begin(a, &ps->tp_gemm[1]);
    wlinear(a, d->h, d->ffn_t, d->bs);    /*                wgrad */
    span_end(a, &ps->tp_gemm[1]);
    bias_grad(a, d->bs, d->ffn_t);
  }
attention:
  a->seg = 1;                                   /* --- all-reduce --- */
  norm_backward(a, d);                          /* layernorm 2, residual sum */
  if (a->eager)
    ;
  else if (fused)
    memop(a, MODEL_MEM_POINTWISE, 5 * d->N);    /* bias-dropout-add 1 */
  else {
    memop(a, MODEL_MEM_POINTWISE, 5 * d->N);
    memop(a, MODEL_MEM_NORM, 4 * d->N);
  }
  span_begin(a, &ps->tp_gemm[2]);
  linear(a, d->bs, d->ht, d->h, TRUE);          /* projection: dgrad */
  span_end(a, &ps->tp_gemm[2]);
  wlinear(a, d->ht, d->h, d->bs);         /*             wgrad */
  bias_grad(a, d->bs, d->h);
  if (!a->eager)
    memop(a, MODEL_MEM_COPY, 4 * d->Nc);        /* context layout */
  if (d->flash) {
    /* FlashAttention-2's preprocessing kernel, rowsum(dO * O); the waves
     * model is fitted to whole backward passes (cuDNN's runs it inside) */
    if (!a->p->flash_waves)
      memop(a, MODEL_MEM_NORM, 4 * d->Nc);
    span_begin(a, &ps->core);
    flash(a, d, TRUE);                          /* its backward: S and P again, dV, dP, dQ, dK */
    span_end(a, &ps->core);
  } else {
  span_begin(a, &ps->core);
  gemm(a, d->heads_t, d->s, d->kv, d->d);       /* d(probs) = dC V^T */
  gemm(a, d->heads_t, d->kv, d->d, d->s);       /* dV = P^T dC */
  if (a->cache) { /* type_as's gradient to fp32 (2 + 4), the softmax's to fp16 (4 + 4 in, 2 out) */
    memop(a, MODEL_MEM_POINTWISE, 6 * d->Na);
    memop(a, MODEL_MEM_SOFTMAX, 10 * d->Na);
  } else {
    memop(a, MODEL_MEM_POINTWISE, 5 * d->Na);  /* attention dropout */
    if (fused_softmax)
      memop(a, MODEL_MEM_SOFTMAX, 6 * d->Na);   /* scale-mask-softmax */
    else
      for (guint i = 0; i < G_N_ELEMENTS(softmax_fp32_bwd); i++)
        memop(a, i == 1 ? MODEL_MEM_SOFTMAX : MODEL_MEM_POINTWISE,
              softmax_fp32_bwd[i] * d->Na);     /* half, softmax, mask, scale, float */
  }
  gemm(a, d->heads_t, d->s, d->d, d->kv);       /* dQ = dS K */
  gemm(a, d->heads_t, d->kv, d->d, d->s);       /* dK = dS^T Q */
  span_end(a, &ps->core);
  }
  if (a->cache)
    cache_backward(a, d);
  if (d->rotary)
    rotary(a, d, TRUE);                         /* rotary embedding's gradient */
  if (d->mla) { /* the up-projections', the norms' and the down-projections' gradients */
    linear(a, d->bs, d->kv_lora, d->kv_up_t, TRUE);
    linear(a, d->kv_up_t, d->kv_lora, d->bs, FALSE);
    memop(a, MODEL_MEM_NORM, 6.0 * d->bs * d->kv_lora);
    linear(a, d->bs, d->h, d->kv_lora + d->rope, TRUE);
    linear(a, d->kv_lora + d->rope, d->h, d->bs, FALSE);
    guint64 qd = d->q_lora ? d->q_lora : d->q_up_t;
    if (d->q_lora) {
      linear(a, d->bs, d->q_lora, d->q_up_t, TRUE);
      linear(a, d->q_up_t, d->q_lora, d->bs, FALSE);
      memop(a, MODEL_MEM_NORM, 6.0 * d->bs * d->q_lora);
    }
    linear(a, d->bs, d->h, qd, TRUE);
    span_begin(a, &ps->tp_gemm[3]);
    linear(a, qd, d->h, d->bs, FALSE);
    span_end(a, &ps->tp_gemm[3]);
  } else {
  if (a->eager) /* the split of QKV's output: its backward concatenates the three gradients */
    memop(a, MODEL_MEM_COPY, 4.0 * d->bs * d->qkv_t);
  linear(a, d->bs, d->h, d->qkv_t, TRUE);       /* QKV: dgrad */
  span_begin(a, &ps->tp_gemm[3]);
  wlinear(a, d->qkv_t, d->h, d->bs);      /*      wgrad */
  span_end(a, &ps->tp_gemm[3]);
  bias_grad(a, d->bs, d->qkv_t);
  }
  a->seg = 2;                                   /* --- all-reduce --- */
  norm_backward(a, d);                          /* layernorm 1, residual sum */
  if (a->cache)
    cache_accumulate(a, d);
}

static void ideal_pass(const ModelProfile *p, guint b, guint q, double scale, ModelPass *pass) {
  *pass = (ModelPass){.seg_s = {p->ideal_layer_s_per_token * (double)b * q * scale, 0, 0}};
}

static void layer_cost(const ModelProfile *p, const ModelShape *m, guint t, guint b, guint tokens, guint context,
                       gboolean fused, gboolean fused_softmax, gboolean sp, gboolean use_flash, gboolean fp8,
                       guint cp, gboolean no_mlp, gboolean slice, const ModelLayerOptions *o,
                       ModelLayerCost *out) {
  *out = (ModelLayerCost){0};
  cp = MAX(cp, 1u);
  guint local = tokens / cp; /* the rank's tokens (context parallelism splits the sequence) */
  out->tp_allreduce_bytes = 2.0 * b * local * m->hidden;
  /* keys and values of the rank's tokens, its tensor-parallel shard of the groups, 16-bit */
  out->cp_hop_bytes = cp > 1 ? 2.0 * 2.0 * b * local * (double)model_groups(m) * model_head_dim(m) / t : 0;
  if (p->kind == MODEL_PROFILE_IDEAL) {
    /* The ideal profile: time scales with the tokens processed, the
     * attention context is free. */
    ideal_pass(p, b, local, 1.0, &out->fwd);
    ideal_pass(p, b, local, 2.0, &out->bwd);
    out->bwd.wgrad_s[0] = out->bwd.seg_s[0] / 2; /* the weight gradients: half the backward, as T_W = T_F */
    out->fwd.flops = model_slice_forward_flops(m, b, tokens, context) / t / cp;
    /* the attention core: its share of the forward FLOPs, at the same rate */
    out->core.flops = model_slice_attention_core_flops(m, b, tokens, context) / t / cp;
    out->core.seg_s[0] = out->fwd.seg_s[0] * out->core.flops / out->fwd.flops;
    out->bwd.flops = 2 * out->fwd.flops;
    out->fwd.core = (ModelSpan){0, 0, out->core.seg_s[0]};
    out->bwd.core = (ModelSpan){0, 0, 2 * out->core.seg_s[0]};
    if (no_mlp) { /* the attention block: its share of the dense layer's FLOPs */
      double mlp = 2.0 * b * tokens * (double)m->hidden * model_ffn(m) * (m->mlp == MODEL_MLP_SWIGLU ? 3.0 : 2.0);
      double keep = 1.0 - mlp / model_slice_forward_flops(m, b, tokens, context);
      out->fwd.seg_s[0] *= keep;
      out->bwd.seg_s[0] *= keep;
      out->fwd.flops *= keep;
      out->bwd.flops *= keep;
    }
    return;
  }
  Dims d = dims(m, t, b, local, local + context);
  d.cp = cp;
  if (sp)
    d.N /= t; /* the sequence-parallel region: s/t of the tokens */
  d.flash = use_flash;
  d.no_mlp = no_mlp;
  /* without flash attention the layer is Megatron's 2021 layer, its
   * memory-bound kernels the 2021 ones */
  gboolean k21 = !use_flash;
  Acc f = acc(p, &out->fwd, o, fp8, FALSE, k21), g = acc(p, &out->bwd, o, fp8, TRUE, k21),
      c = acc(p, &out->core, o, fp8, FALSE, k21);
  /* a token slice run by PyTorch eager: TeraPipe's own layer */
  f.cache = g.cache = c.cache = f.eager && slice;
  forward(&f, &d, fused, fused_softmax);
  backward(&g, &d, fused, fused_softmax);
  attention_core(&c, &d, fused_softmax);
}

/* A token slice: TeraPipe runs its own attention code, not Megatron's
 * kernel and its shape rules, so `fused` applies to the softmax as given. */
void model_layer_slice_cost(const ModelProfile *p, const ModelShape *m, guint t, guint b, guint tokens,
                            guint context, gboolean fused, ModelLayerCost *out) {
  layer_cost(p, m, t, b, tokens, context, fused, fused, FALSE, FALSE, FALSE, 1, FALSE, TRUE, NULL, out);
}

void model_layer_slice_cost_with(const ModelProfile *p, const ModelShape *m, guint t, guint b, guint tokens,
                                 guint context, const ModelLayerOptions *o, ModelLayerCost *out) {
  layer_cost(p, m, t, b, tokens, context, o->fused, o->fused, FALSE, FALSE, FALSE, 1, FALSE, TRUE, o, out);
}

gboolean model_softmax_fused(const ModelShape *m, guint t, guint b, gboolean fusion) {
  guint64 kv = m->seq_len, q = m->seq_len, batch = (guint64)b * (m->heads / t);
  return fusion && kv > 16 && kv <= 2048 && q % 4 == 0 && batch % 4 == 0;
}

gboolean model_softmax_fp32(const ModelShape *m, guint t, guint b, const ModelLayerOptions *o) {
  return o->attention == MODEL_ATTENTION_UNFUSED ||
         (o->attention == MODEL_ATTENTION_FUSED && !model_softmax_fused(m, t, b, o->fused));
}

void model_layer_cost_with(const ModelProfile *p, const ModelShape *m, guint t, guint b, const ModelLayerOptions *o,
                           ModelLayerCost *out) {
  gboolean flash_core = o->attention == MODEL_ATTENTION_FLASH;
  layer_cost(p, m, t, b, m->seq_len, 0, o->fused, !flash_core && !model_softmax_fp32(m, t, b, o),
             o->sequence_parallel, flash_core, o->fp8, o->cp, FALSE, FALSE, o, out);
}

static double pass_total(const ModelPass *ps) { return ps->seg_s[0] + ps->seg_s[1] + ps->seg_s[2]; }

double model_layer_contention(const ModelProfile *p, const ModelShape *m, guint t, guint b,
                              const ModelLayerOptions *o, double held, double hbm_share) {
  if (!(held > 0) || p->kind == MODEL_PROFILE_IDEAL || held >= p->sms)
    return 1;
  ModelProfile less = *p;
  less.sms_held = held;
  less.hbm_held = CLAMP(hbm_share, 0.0, 0.9);
  ModelLayerCost all, shared;
  model_layer_cost_with(p, m, t, b, o, &all);
  model_layer_cost_with(&less, m, t, b, o, &shared);
  double full = pass_total(&all.fwd) + pass_total(&all.bwd);
  return full > 0 ? MAX(1.0, (pass_total(&shared.fwd) + pass_total(&shared.bwd)) / full) : 1;
}

void model_layer_attention_cost(const ModelProfile *p, const ModelShape *m, guint t, guint b,
                                const ModelLayerOptions *o, ModelLayerCost *out) {
  gboolean flash_core = o->attention == MODEL_ATTENTION_FLASH;
  layer_cost(p, m, t, b, m->seq_len, 0, o->fused, !flash_core && !model_softmax_fp32(m, t, b, o),
             o->sequence_parallel, flash_core, o->fp8, o->cp, TRUE, FALSE, o, out);
}

void model_layer_cost(const ModelProfile *p, const ModelShape *m, guint t, guint b, gboolean fused,
                      ModelLayerCost *out) {
  ModelLayerOptions o = {.fused = fused, .attention = MODEL_ATTENTION_FUSED, .fp8 = FALSE, .cp = 1};
  model_layer_cost_with(p, m, t, b, &o, out);
}

void model_embedding_cost(const ModelProfile *p, const ModelShape *m, guint t, guint b, double *fwd_s,
                          double *bwd_s) {
  model_embedding_cost_with(p, m, t, b, NULL, fwd_s, bwd_s);
}

static gboolean eager(const ModelLayerOptions *o) {
  return o && o->framework == MODEL_FRAMEWORK_EAGER;
}

/* A memory-bound kernel outside the layers (no host gating: the embedding's
 * and the head's kernels are long), free with free_membound. */
static double mem(const ModelProfile *p, const ModelLayerOptions *o, ModelMemClass c, double bytes) {
  return o && o->free_membound ? 0 : model_mem_time_s(p, c, bytes);
}

void model_embedding_cost_with(const ModelProfile *p, const ModelShape *m, guint t, guint b,
                               const ModelLayerOptions *o, double *fwd_s, double *bwd_s) {
  *fwd_s = *bwd_s = 0;
  if (p->kind == MODEL_PROFILE_IDEAL)
    return;
  double N = (double)b * m->seq_len * m->hidden;
  if (eager(o)) {
    /* PyTorch eager's dense embedding: forward a gather (4N); backward a
     * zero fill of the whole table's gradient (2 bytes a parameter), the
     * sorted segment sums into it (about 6N) and AccumulateGrad's add
     * into .grad (6 bytes a parameter; layer.c's accumulate). */
    double table = (double)(m->vocab / t) * m->hidden;
    *fwd_s = mem(p, o, MODEL_MEM_COPY, 4 * N);
    *bwd_s = mem(p, o, MODEL_MEM_POINTWISE, 2 * table) + mem(p, o, MODEL_MEM_COPY, 6 * N) +
             mem(p, o, MODEL_MEM_POINTWISE, 6 * table);
    return;
  }
  /* Forward: gather word rows (read + write 4N), add positions (6N), mask
   * the vocab shard and all-reduce (on the tp stream; folded in here as a
   * memory pass of 4N), dropout (5N).  Backward: dropout (5N), scatter-add
   * into the word and position embedding gradients (about 8N). */
  if (m->position == MODEL_POSITION_ROTARY) {
    /* No position embedding to add or to update (the rotation is in each
     * layer); the word gradient's scatter-add reads and writes 6N. */
    *fwd_s = mem(p, o, MODEL_MEM_COPY, 4 * N) + mem(p, o, MODEL_MEM_COPY, 4 * N) +
             mem(p, o, MODEL_MEM_POINTWISE, 5 * N);
    *bwd_s = mem(p, o, MODEL_MEM_POINTWISE, 5 * N) + mem(p, o, MODEL_MEM_COPY, 6 * N);
    return;
  }
  *fwd_s = mem(p, o, MODEL_MEM_COPY, 4 * N) + mem(p, o, MODEL_MEM_POINTWISE, 6 * N) +
           mem(p, o, MODEL_MEM_COPY, 4 * N) + mem(p, o, MODEL_MEM_POINTWISE, 5 * N);
  *bwd_s = mem(p, o, MODEL_MEM_POINTWISE, 5 * N) + mem(p, o, MODEL_MEM_COPY, 8 * N);
}

void model_head_cost(const ModelProfile *p, const ModelShape *m, guint t, guint b, double *fwd_s, double *bwd_s) {
  model_head_cost_with(p, m, t, b, NULL, fwd_s, bwd_s);
}

void model_head_cost_with(const ModelProfile *p, const ModelShape *m, guint t, guint b, const ModelLayerOptions *o,
                          double *fwd_s, double *bwd_s) {
  *fwd_s = *bwd_s = 0;
  if (p->kind == MODEL_PROFILE_IDEAL)
    return;
  guint64 bs = (guint64)b * m->seq_len;
  guint64 vt = m->vocab / t;
  double N = (double)bs * m->hidden, L = (double)bs * vt;
  ModelGemm logits = {1, bs, vt, m->hidden};
  ModelGemm dgrad = {1, bs, m->hidden, vt};
  ModelGemm wgrad = {1, vt, m->hidden, bs};
  if (eager(o)) {
    /* PyTorch eager's fp32 cross entropy over the logits: forward the
     * final norm (4N), the logit GEMM, the cast to fp32 (2 + 4 bytes per
     * logit), log_softmax (reads 4, writes 4) and the loss's gather;
     * backward the zero fill of the fp32 gradient (4), log_softmax's
     * backward (gradient and saved output in, gradient out: 12), the cast
     * back (4 + 2), the two GEMMs, AccumulateGrad's add into the logit
     * weight's .grad (6 per parameter) and the norm's backward (6N + 4N). */
    *fwd_s = mem(p, o, MODEL_MEM_NORM, 4 * N) + model_gemm_time_s(p, &logits) + mem(p, o, MODEL_MEM_COPY, 6 * L) +
             mem(p, o, MODEL_MEM_CROSS_ENTROPY, 8 * L);
    *bwd_s = mem(p, o, MODEL_MEM_POINTWISE, 4 * L) + mem(p, o, MODEL_MEM_CROSS_ENTROPY, 12 * L) +
             mem(p, o, MODEL_MEM_COPY, 6 * L) + model_gemm_time_s(p, &dgrad) + model_gemm_time_s(p, &wgrad) +
             mem(p, o, MODEL_MEM_POINTWISE, 6.0 * vt * m->hidden) + mem(p, o, MODEL_MEM_NORM, 6 * N) +
             mem(p, o, MODEL_MEM_NORM, 4 * N);
    return;
  }
  /* Vocab-parallel cross entropy in fp32 (Megatron's
   * _VocabParallelCrossEntropy): max, subtract, exp, sum and the target
   * gather, about four fp32 passes over the logit shard read and written
   * (8 bytes each) plus reading the fp16 logits; backward writes the fp16
   * gradient from the saved softmax (6 bytes). */
  *fwd_s = mem(p, o, MODEL_MEM_NORM, 4 * N) + model_gemm_time_s(p, &logits) +
           mem(p, o, MODEL_MEM_CROSS_ENTROPY, 2 * L) + 3 * mem(p, o, MODEL_MEM_CROSS_ENTROPY, 8 * L);
  *bwd_s = mem(p, o, MODEL_MEM_CROSS_ENTROPY, 6 * L) + model_gemm_time_s(p, &dgrad) +
           model_gemm_time_s(p, &wgrad) + mem(p, o, MODEL_MEM_NORM, 6 * N);
}

double model_head_wgrad_s(const ModelProfile *p, const ModelShape *m, guint t, guint b) {
  if (p->kind == MODEL_PROFILE_IDEAL)
    return 0;
  ModelGemm wgrad = {1, m->vocab / t, m->hidden, (guint64)b * m->seq_len};
  return model_gemm_time_s(p, &wgrad);
}

double model_optimizer_time_s(const ModelProfile *p, guint64 params) {
  if (p->kind == MODEL_PROFILE_IDEAL)
    return 0;
  /* Per parameter (apex multi-tensor kernels, Megatron's fp16 optimizer):
   * copy the fp16 gradient into fp32 (2 + 4 bytes), unscale and check for
   * inf/nan (4 + 4), gradient norm (4), Adam reading fp32 parameter,
   * gradient, m and v and writing parameter, m and v (16 + 12), and the copy
   * back to fp16 parameters (4 + 2): 56 bytes, in about six kernels over
   * chunked tensor lists. */
  return 6 * p->kernel_launch_s + 56.0 * (double)params / (p->hbm_bytes_per_s * p->memory_efficiency);
}

guint64 model_layer_local_params(const ModelShape *m, guint t) {
  ModelLinears l = model_layer_linears(m);
  /* Column-parallel QKV and MLP up (weights and biases) and row-parallel
   * projection and MLP down (weights) are split over t; the row-parallel
   * biases and the norms are replicated.  GPT: QKV 3h^2/t + 3h/t,
   * projection h^2/t + h, MLP 4h^2/t + 4h/t and 4h^2/t + h, layernorms 4h. */
  return l.qkv / t + (l.proj - l.row_bias) / t + l.row_bias + l.up / t + (l.down - l.row_bias) / t + l.row_bias +
         2 * l.norm + l.replicated;
}

guint64 model_stage_params(const ModelShape *m, guint t, guint p, guint stage, guint layers) {
  guint64 h = m->hidden;
  guint64 n = layers * model_layer_local_params(m, t);
  if (stage == 0) {
    n += (guint64)m->vocab * h / t;
    if (m->position == MODEL_POSITION_LEARNED)
      n += (guint64)m->seq_len * h;
  }
  if (stage == p - 1) {
    n += model_norm_params(m); /* final norm */
    if (p > 1 || m->untied)
      n += (guint64)m->vocab * h / t; /* the logit layer: a tied copy of the word embedding, or its own */
  }
  return n;
}
