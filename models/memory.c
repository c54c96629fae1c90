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

gboolean model_memory_op_list(const ModelShape *m, const ModelMemoryRequest *r) {
  gboolean own = r->ac == MODEL_RECOMPUTE_OP || r->ac == MODEL_RECOMPUTE_LAYER || r->ac == MODEL_RECOMPUTE_MODULES;
  /* (a mixture of experts keeps the closed form: ptdp/memory.c prices its
   * MLP block against the dense one's there) */
  return (r->eager || own) && !model_is_mla(m) && !model_is_moe(m);
}

double model_allocator_block_bytes(double bytes) {
  const double min_block = 512, min_large = 10.0 * 1048576, round_large = 2.0 * 1048576;
  double q = bytes >= min_large ? round_large : min_block;
  return bytes <= 0 ? 0 : ceil(bytes / q) * q;
}

typedef struct {
  double size;
  gint owner; /* the tensor's event index; -1: free */
} Block;

double model_allocator_reserved_bytes(const double *ev, guint n) {
  /* c10/cuda/CUDACachingAllocator.cpp: get_free_block's best fit over the
   * pool's free blocks ordered by size then address, alloc_found_block's
   * split, free_block's merge with free neighbours, and with expandable
   * segments find_expandable_block's growth at the segment's end */
  GArray *b = g_array_new(FALSE, FALSE, sizeof(Block));
  double end = 0; /* the pool's size: it grows and never shrinks */
  for (guint i = 0; i < n; i++) {
    if (ev[i] < 0) {
      guint j = 0, id = (guint)(-ev[i] - 1);
      while (j < b->len && g_array_index(b, Block, j).owner != (gint)id)
        j++;
      if (j == b->len)
        continue;
      g_array_index(b, Block, j).owner = -1;
      if (j + 1 < b->len && g_array_index(b, Block, j + 1).owner < 0) {
        g_array_index(b, Block, j).size += g_array_index(b, Block, j + 1).size;
        g_array_remove_index(b, j + 1);
      }
      if (j > 0 && g_array_index(b, Block, j - 1).owner < 0) {
        g_array_index(b, Block, j - 1).size += g_array_index(b, Block, j).size;
        g_array_remove_index(b, j);
      }
      continue;
    }
    double size = model_allocator_block_bytes(ev[i]);
    gint best = -1;
    for (guint j = 0; j < b->len; j++) {
      Block *k = &g_array_index(b, Block, j);
      if (k->owner < 0 && k->size >= size && (best < 0 || k->size < g_array_index(b, Block, best).size))
        best = (gint)j;
    }
    if (best < 0) { /* grow: the free block at the end, or a new one */
      if (b->len && g_array_index(b, Block, b->len - 1).owner < 0) {
        Block *last = &g_array_index(b, Block, b->len - 1);
        end += size - last->size;
        last->size = size;
      } else {
        Block k = {size, -1};
        g_array_append_val(b, k);
        end += size;
      }
      best = (gint)b->len - 1;
    }
    Block *k = &g_array_index(b, Block, best);
    if (k->size > size) {
      Block rest = {k->size - size, -1};
      k->size = size;
      g_array_insert_val(b, (guint)best + 1, rest);
      k = &g_array_index(b, Block, best);
    }
    k->owner = (gint)i;
  }
  g_array_free(b, TRUE);
  return end;
}

double model_eager_loss_reserved_bytes(double elems, gboolean parallel, guint mbs) {
  /* torchtitan's loss_fn (train.py at its December 2024 benchmark,
   * 9dec370): cross_entropy(pred.flatten(0, 1).float(), labels); aten's
   * cross_entropy is log_softmax then nll_loss, whose backwards allocate a
   * zeroed gradient and log_softmax's; under loss_parallel
   * (torch/distributed/tensor/parallel/loss.py) _log_softmax makes x - max,
   * exp of it and the result, and _nll_loss_backward_handler returns
   * (zeros scattered + exp(x)) * grad_output; _to_copy's backward casts the
   * gradient back to bf16 */
  double A = 2 * elems, F = 4 * elems;
  GArray *seq = g_array_new(FALSE, FALSE, sizeof(double));
  double peak = 0;
  gboolean keep = mbs > 0;
  mbs = MAX(mbs, 1u);
#define ALLOC(x) (g_array_append_val(seq, (x)), seq->len - 1)
#define FREE(i) G_STMT_START { double f_ = -(double)(i) - 1; g_array_append_val(seq, f_); } G_STMT_END
  for (guint k = 0; k < mbs; k++) {
    guint a = ALLOC(A), x = ALLOC(F), out;
    if (parallel) {
      guint sh = ALLOC(F), ex = ALLOC(F);
      FREE(ex);
      out = ALLOC(F);
      FREE(sh);
    } else
      out = ALLOC(F);
    FREE(x);
    if (!keep) /* train.py: del pred before loss.backward() */
      FREE(a);
    guint g0 = ALLOC(F), grad;
    if (parallel) {
      guint ex = ALLOC(F), sum = ALLOC(F);
      FREE(ex);
      grad = ALLOC(F);
      FREE(sum);
      FREE(g0);
      FREE(out);
    } else {
      grad = ALLOC(F);
      FREE(g0);
      FREE(out);
    }
    guint cast = ALLOC(A);
    FREE(grad);
    FREE(cast);
  }
#undef ALLOC
#undef FREE
  peak = model_allocator_reserved_bytes((const double *)seq->data, seq->len);
  g_array_free(seq, TRUE);
  return peak;
}

/* What a norm keeps for its backward, T tokens of width `rep` (`tok` of
 * them on this rank for its statistics): eager's RMSNorm its input's fp32
 * upcast, rstd and the normalized 16-bit output before the weight; a fused
 * norm its input and rstd (and the mean).  Returns the tensors written. */
static guint norm_saved(const ModelShape *m, gboolean eager, double rep, double T, double tok, double *out) {
  if (eager && m->norm == MODEL_NORM_RMSNORM) {
    out[0] = 4 * rep * T;
    out[1] = 4 * tok;
    out[2] = 2 * rep * T;
    return 3;
  }
  out[0] = 2 * rep * T;
  out[1] = (m->norm == MODEL_NORM_LAYERNORM ? 8 : 4) * tok;
  return 2;
}

guint model_layer_saved_tensors(const ModelShape *m, const ModelMemoryRequest *r, ModelRecompute ac, double *out) {
  double T = (double)m->seq_len * r->b, t = r->t, h = m->hidden, a = m->heads;
  double rep = r->sequence_parallel ? h / t : h, tok = r->sequence_parallel ? T / t : T; /* the replicated part */
  double qw = (double)m->heads * model_head_dim(m), kvw = (double)model_groups(m) * model_head_dim(m);
  double f = model_ffn(m), lin = r->fp8 ? 1 : 2; /* a linear layer's saved input, per element */
  gboolean swiglu = m->mlp == MODEL_MLP_SWIGLU, dropout = m->norm == MODEL_NORM_LAYERNORM && !r->eager;
  double core = r->flash ? 4.0 * a * T / t : model_attention_score_bytes(m, r->t, r->b, r->fp32_softmax);
  guint n = 0;
#define KEEP(x) (out[n++] = (x))
  if (ac == MODEL_RECOMPUTE_FULL) { /* the checkpoint's input */
    KEEP(2 * rep * T);
    return n;
  }
  if (ac == MODEL_RECOMPUTE_OP) {
    KEEP(2 * rep * T);                           /* the checkpoint's input */
    KEEP(2 * qw * T / t);                        /* mm 1: wq */
    KEEP(2 * kvw * T / t);                       /* mm 3: wv */
    KEEP(2 * qw * T / t);                        /* SDPA's output */
    KEEP(4 * a * T / t);                         /* and log-sum-exp */
    KEEP(2 * f * T / t);                         /* mm 5: w1 (GeLU: fc1) */
    if (swiglu)
      KEEP(2 * (t > 1 ? h : rep) * T);           /* mm 7: w2, the partial sums before their reduce-scatter */
    if (r->sequence_parallel)
      for (guint i = 0; i < 2; i++)
        KEEP(2 * rep * T);                       /* the reduce-scatters' outputs */
    return n;
  }
  gboolean drop_core = ac == MODEL_RECOMPUTE_SELECTIVE || (ac == MODEL_RECOMPUTE_MODULES && r->modules & MODEL_RC_CORE_ATTN);
  gboolean drop_mlp = ac == MODEL_RECOMPUTE_MODULES && r->modules & MODEL_RC_MLP;
  gboolean drop_norm = ac == MODEL_RECOMPUTE_MODULES && r->modules & MODEL_RC_LAYERNORM;
  for (guint j = 0; j < 2; j++) { /* the two norms, the attention after the first and the MLP after the second */
    n += norm_saved(m, r->eager, rep, T, tok, out + n);
    if (!drop_norm)                              /* its output, the GEMMs' input (eager: gathered) */
      KEEP(lin * (r->eager && t > 1 ? h : rep) * T);
    if (j == 0) {
      KEEP(2 * (qw + 2 * kvw) * T / t);          /* query, key and value */
      KEEP(2 * qw * T / t);                      /* the attention's output, the projection's input */
      if (r->fp8)
        KEEP(qw * T / t);                        /* and its FP8 copy */
      if (!drop_core)
        KEEP(core);                              /* log-sum-exp, or the s x s tensors */
    } else if (!drop_mlp) {
      if (r->eager && swiglu) {
        for (guint i = 0; i < 4; i++)
          KEEP(2 * f * T / t);                   /* w1, silu, w3, their product */
      } else {
        KEEP(2 * (swiglu ? 2 : 1) * f * T / t);  /* fc1's output */
        KEEP(lin * f * T / t);                   /* the activation's output */
      }
    }
    if (dropout)
      KEEP(rep * T);                             /* the block's dropout mask */
  }
#undef KEEP
  return n;
}

static double saved_sum(const ModelShape *m, const ModelMemoryRequest *r, ModelRecompute ac, double *rounded) {
  double b[MODEL_MAX_SAVED], sum = 0, rsum = 0;
  guint n = model_layer_saved_tensors(m, r, ac, b);
  for (guint i = 0; i < n; i++) {
    sum += b[i];
    rsum += model_allocator_block_bytes(b[i]);
  }
  if (rounded)
    *rounded = rsum;
  return sum;
}

/* The op lists' layer (model_memory_op_list): what it keeps on average
 * over the stage's layers (*rounded: as the allocator holds it), and what
 * more it holds while its backward recomputes (*working). */
static double op_list_layer(const ModelShape *m, const ModelMemoryRequest *r, double *rounded, double *working) {
  double none_r, none = saved_sum(m, r, MODEL_RECOMPUTE_NONE, &none_r), kept, kept_r;
  if (r->ac == MODEL_RECOMPUTE_LAYER) {
    /* torchtitan's _apply_layer_sac: a block is wrapped whole where a count
     * over the rank's blocks, from 1, is a multiple of k */
    double L = MAX(r->stage_layers, 1u), ck = floor(L / MAX(r->every, 1u)), x_r, x = saved_sum(m, r, MODEL_RECOMPUTE_FULL, &x_r);
    kept = (ck * x + (L - ck) * none) / L;
    kept_r = (ck * x_r + (L - ck) * none_r) / L;
    if (working)
      *working = ck > 0 ? none - x : 0;
  } else {
    ModelRecompute ac = r->ac != MODEL_RECOMPUTE_NONE ? r->ac
                        : r->recompute                 ? MODEL_RECOMPUTE_FULL
                        : r->selective                 ? MODEL_RECOMPUTE_SELECTIVE
                                                       : MODEL_RECOMPUTE_NONE;
    kept = saved_sum(m, r, ac, &kept_r);
    if (working)
      *working = MAX(none - kept, 0.0);
  }
  if (rounded)
    *rounded = kept_r;
  return kept;
}

double model_layer_held_bytes(const ModelShape *m, const ModelMemoryRequest *r) {
  if (model_memory_op_list(m, r))
    return op_list_layer(m, r, NULL, NULL);
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
  if (r->ac == MODEL_RECOMPUTE_MODULES) { /* (multi-head latent attention or experts: memory.h) */
    double sb = (double)m->seq_len * r->b, t = r->t, lin = r->fp8 ? 1 : 2;
    if (r->modules & MODEL_RC_CORE_ATTN) /* the log-sum-exp, or the s x s tensors */
      full -= r->flash ? 4.0 * m->heads * sb / t : model_attention_score_bytes(m, r->t, r->b, r->fp32_softmax);
    if (r->modules & MODEL_RC_LAYERNORM) /* both norms' outputs */
      full -= 2.0 * lin * sb * (r->sequence_parallel ? m->hidden / t : m->hidden);
    if (r->modules & MODEL_RC_MLP) /* fc1's and the activation's outputs */
      full -= ((m->mlp == MODEL_MLP_SWIGLU ? 4.0 : 2.0) + lin) * model_ffn(m) * sb / t;
    if ((r->modules & MODEL_RC_MLA_UP_PROJ) && model_is_mla(m)) { /* the query, key and value */
      double dqk = (double)model_head_dim(m) + m->rope_dim, dv = m->v_dim ? m->v_dim : model_head_dim(m);
      full -= 2.0 * m->heads * (2.0 * dqk + dv) * sb / t;
    }
  }
  return full;
}

double model_layer_modules_working_bytes(const ModelShape *m, const ModelMemoryRequest *r) {
  if (r->ac != MODEL_RECOMPUTE_MODULES || model_memory_op_list(m, r))
    return 0;
  ModelMemoryRequest none = *r;
  none.ac = MODEL_RECOMPUTE_NONE;
  return MAX(model_layer_held_bytes(m, &none) - model_layer_held_bytes(m, r), 0.0);
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
  out->allocator = 0;
  if (model_memory_op_list(m, r)) {
    double rounded, working, layer = op_list_layer(m, r, &rounded, &working);
    double act = layer * r->inflight_layer_mbs, V = (double)(m->vocab / r->t), sb = (double)m->seq_len * r->b;
    out->allocator = (rounded - layer) * r->inflight_layer_mbs;
    if (r->eager) {
      /* the loss as the caching allocator holds it
       * (model_eager_loss_reserved_bytes), its blocks free again before the
       * last layer's recomputation, whose working set is the other candidate
       * for the peak; a pipeline's last stage keeps the logits it has made */
      double kept = 2.0 * sb * V * r->pipeline_logits;
      act += r->last_stage ? MAX(model_eager_loss_reserved_bytes(sb * V, r->t > 1, r->pipeline_logits), kept + working)
                           : working;
      /* the rank's other stages' outputs and gradient buffers, s/t of the
       * tokens under sequence parallelism (torchtitan's layers end in
       * RowwiseParallel to Shard(1)) */
      double rep = r->sequence_parallel ? m->hidden / (double)r->t : m->hidden;
      act += 2.0 * sb * rep * r->pipeline_outputs;
      if (r->last_stage) {
        /* the head's saved tensors beside the loss: the final RMSNorm's
         * (its fp32 upcast, rstd, the normalized bf16; the shard of the
         * sequence under sequence parallelism) and the output layer's
         * input, gathered whole with tensor parallelism (torchtitan's plan:
         * ColwiseParallel from Shard(1)) */
        double tok = r->sequence_parallel ? sb / r->t : sb, kept[3];
        for (guint i = 0, k = norm_saved(m, TRUE, rep, sb, tok, kept); i < k; i++)
          act += kept[i];
        act += 2.0 * m->hidden * sb;
      }
    } else {
      act += working + (r->last_stage ? 6.0 * sb * V : 0);
      if (r->first_stage && m->norm == MODEL_NORM_LAYERNORM) /* the embedding's dropout mask */
        act += (r->sequence_parallel ? sbh / r->t : sbh) * r->inflight_mbs;
    }
    out->activations = act;
    out->total = out->weights + out->gradients + out->optimizer + out->activations + out->allocator;
    return;
  }
  double full = model_layer_held_bytes(m, r);
  if (r->sequence_parallel)
    sbh /= r->t;
  double act = r->recompute ? 2 * sbh * r->inflight_layer_mbs + full : full * r->inflight_layer_mbs;
  act += model_layer_modules_working_bytes(m, r);
  if (r->last_stage)
    act += 6.0 * m->seq_len * r->b * (double)(m->vocab / r->t);
  if (r->first_stage)
    act += sbh * r->inflight_mbs;
  out->activations = act;
  out->total = out->weights + out->gradients + out->optimizer + out->activations;
}
