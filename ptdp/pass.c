/* ptdsim — a microbatch's pass on a stage: its compute ops, the tensor-parallel
 * all-reduces between them, the context-parallel ring and the overlapped
 * tensor-parallel GEMMs, and the flow plans they run on; the items of a
 * schedule built of them -- F, B, W, DualPipe's overlapped F&B (build.h).
 * It calls comm.c (FSDP2's gathers and reductions), moe.c (an MoE layer's
 * pass) and emit.c, none of which calls it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"

/* A hop of a ring of (s, k) as a flow plan: every member sends to the next
 * at once.  kind < 3: the context-parallel rings of the simulated tensor
 * ranks (tensor-parallel ranks i over c = 0..cp-1); else the
 * tensor-parallel ring of context-parallel rank 0 (its t ranks). */
static guint hop_plan(PtdpBuild *b, guint s, guint k, guint kind, double bytes) {
  guint *cached = &b->hop_plans[(s * b->ds + k) * 5 + kind];
  if (*cached != G_MAXUINT)
    return *cached;
  gboolean cp_ring = kind < 3;
  guint rings = cp_ring ? b->ts : 1, n = cp_ring ? b->cp : b->plan->tp;
  guint *src = g_new(guint, (gsize)rings * n), *dst = g_new(guint, (gsize)rings * n);
  for (guint r = 0; r < rings; r++)
    for (guint j = 0; j < n; j++) {
      src[r * n + j] = cp_ring ? ptdp_gpu_of_rank_c(b, r, j, s, k) : ptdp_gpu_of_rank(b, j, s, k);
      dst[r * n + j] = cp_ring ? ptdp_gpu_of_rank_c(b, r, (j + 1) % n, s, k) : ptdp_gpu_of_rank(b, (j + 1) % n, s, k);
    }
  char key[64];
  g_snprintf(key, sizeof key, "ring%u:%u:%u:%.0f", kind, s, ptdp_job_replica(b, k), bytes);
  *cached = sim_netops_pairs(b->flow->ops, key, src, dst, rings * n,
                             cp_ring ? ptdp_copies(b, TRUE, TRUE) : ptdp_copies_c(b, FALSE, TRUE), bytes, NULL);
  g_free(src);
  g_free(dst);
  return *cached;
}

/* A layer's pass: compute, all-reduce, compute, all-reduce, compute (the
 * segments of models/layer.h; backward runs the layer in reverse). */
static void emit_pass(PtdpBuild *b, guint s, guint k, const ModelPass *pass, const SimOpTag *t) {
  static const guint fwd_parts[3] = {SIM_PART_ATTENTION, SIM_PART_MLP, SIM_PART_RESIDUAL},
                     bwd_parts[3] = {SIM_PART_MLP, SIM_PART_ATTENTION, SIM_PART_LAYERNORM};
  const guint *parts = t->pass == SIM_PASS_BACKWARD ? bwd_parts : fwd_parts;
  sim_ptdp_add_compute(b, parts[0], t->layer, t->pass, pass->seg_s[0]);
  sim_ptdp_tp_allreduce(b, s, k, t);
  sim_ptdp_add_compute(b, parts[1], t->layer, t->pass, pass->seg_s[1]);
  sim_ptdp_tp_allreduce(b, s, k, t);
  sim_ptdp_add_compute(b, parts[2], t->layer, t->pass, pass->seg_s[2]);
}

/* A communication op on the tensor-parallel streams of (s, k) after the op
 * `after` (G_MAXUINT: none) and, with `chain`, after every rank's chain so
 * far: `dur` on the analytic network, a hop's flows (hop_plan, `kind`), or
 * with kind G_MAXUINT the tensor-parallel reduce-scatter. */
static guint side_op(PtdpBuild *b, guint s, guint k, guint cat, guint kind, double bytes, const SimOpTag *t,
                     guint after, gboolean chain) {
  guint streams[b->ts];
  for (guint i = 0; i < b->ts; i++)
    streams[i] = ptdp_stream_of(b, i, s, k, SIM_STREAM_TP);
  SimOpTag at = *t;
  at.category = (guint16)cat;
  guint op;
  if (b->flow)
    op = sim_ptdp_net_op(
        b, kind == G_MAXUINT ? sim_ptdp_tp_plan(b, s, k, NET_OP_REDUCESCATTER, bytes) : hop_plan(b, s, k, kind, bytes),
        streams, NULL, b->ts, &at);
  else {
    SimTime dur = kind == G_MAXUINT ? b->tp_ns[(s * b->ds + k) * 2] : b->hop_ns[(s * b->ds + k) * 5 + kind];
    op = sim_engine_add_op(b->e, dur, streams, b->ts, &at);
  }
  if (after != G_MAXUINT)
    sim_engine_add_dep(b->e, after, op);
  if (chain)
    for (guint i = 0; i < b->ts; i++)
      sim_ptdp_chain_dep(b, i, op);
  return op;
}

/* `seconds` of compute of `part` on every rank, after its chain and after
 * `after` (G_MAXUINT: none). */
static void step_compute(PtdpBuild *b, guint s, guint k, const SimOpTag *t, guint part, double seconds, guint after) {
  sim_ptdp_add_compute(b, part, t->layer, t->pass, seconds);
  sim_ptdp_flush(b, s, k, t, TRUE);
  if (after != G_MAXUINT)
    for (guint i = 0; i < b->ts; i++)
      sim_engine_add_dep(b->e, after, b->prev[i]);
}

/* The bytes a hop moves, each rank sending to the next. */
static double hop_bytes(const PtdpBuild *b, guint kind) {
  switch (kind) {
  case PTDP_HOP_KV:
  case PTDP_HOP_GRAD:
    return b->layer.cp_hop_bytes;
  case PTDP_HOP_KV_GRAD:
    return 2 * b->layer.cp_hop_bytes;
  default: /* a tensor-parallel shard: the all-reduce buffer over t */
    return b->layer.tp_allreduce_bytes / b->plan->tp;
  }
}

/* Counts a context-parallel hop's bytes: one send from each of the t cp
 * ranks of every replica. */
static void count_hop(PtdpBuild *b, guint kind) {
  sim_ptdp_account(b, SIM_CAT_CP, hop_bytes(b, kind) * ((double)b->cp * b->plan->tp) * ((double)b->plan->dp / b->ds));
}

/* The attention core of `core_s` as ring attention (Liu et al. 2023; Megatron-
 * Core's context parallelism over Transformer Engine's
 * AttnFuncWithCPAndKVP2P): cp steps, each the kernel on the keys and values
 * at hand while the ring passes them on to the next rank, so step j + 1
 * waits for hop j.  Backward, each hop carries the partial key and value
 * gradients too (issued once the step that made them is done) and a last
 * hop takes them home before the QKV GEMMs.  Under a coarse item the same
 * graph is timed in closed form. */
static void cp_ring(PtdpBuild *b, guint s, guint k, const SimOpTag *t, guint part, double core_s, gboolean backward) {
  guint cp = b->cp;
  sim_ptdp_flush(b, s, k, t, TRUE); /* the keys and values are ready */
  double step = core_s / cp;
  guint hop = backward ? PTDP_HOP_KV_GRAD : PTDP_HOP_KV;
  if (b->dry) {
    const SimTime *h = &b->hop_ns[(s * b->ds + k) * 5];
    SimTime C = ptdp_ns(step), c_end = 0, h_end = 0;
    for (guint j = 0; j < cp; j++) {
      SimTime start = j == 0 ? 0 : MAX(c_end, h_end); /* step j waits for hop j - 1 */
      /* hop j: after hop j - 1 (backward: and step j - 1, whose gradients it carries) */
      SimTime h_next = j + 1 < cp ? (j == 0 ? 0 : backward ? MAX(h_end, c_end) : h_end) + h[hop] : h_end;
      c_end = start + C;
      h_end = h_next;
      if (j + 1 < cp)
        count_hop(b, hop);
    }
    SimTime end = c_end;
    if (backward) {
      end = MAX(c_end, h_end) + h[PTDP_HOP_GRAD];
      count_hop(b, PTDP_HOP_GRAD);
    }
    b->dry_compute += C * cp;
    b->dry_tp += end - C * cp;
    b->dry_ops += 2 * cp - 1 + (backward ? 1 : 0);
    return;
  }
  guint prev_hop = G_MAXUINT;
  for (guint j = 0; j < cp; j++) {
    guint next = G_MAXUINT;
    if (j + 1 < cp) {
      next = side_op(b, s, k, SIM_CAT_CP, hop, hop_bytes(b, hop), t, prev_hop, j == 0 || backward);
      count_hop(b, hop);
    }
    step_compute(b, s, k, t, part, step, prev_hop);
    prev_hop = next;
  }
  if (backward) {
    guint home = side_op(b, s, k, SIM_CAT_CP, PTDP_HOP_GRAD, hop_bytes(b, PTDP_HOP_GRAD), t, G_MAXUINT, TRUE);
    count_hop(b, PTDP_HOP_GRAD);
    for (guint i = 0; i < b->ts; i++)
      b->prev[i] = home;
  }
}

/* A GEMM of `gemm_s` with its tensor-parallel communication overlapped
 * (Transformer Engine's userbuffers, Megatron-Core's --tp-comm-overlap):
 * an all-gather that feeds it or a reduce-scatter of its partial sums is a
 * ring of t - 1 hops pipelined with t chunks of the GEMM, each chunk
 * starting once its rows have arrived (gather) or each hop once its chunk
 * is done (scatter); the backward's reduce-scatter of an input gradient
 * runs whole beside the weight-gradient GEMM.  The copies run on the
 * copy engines: the GEMM's rate is taken as unchanged. */
static void tp_overlapped(PtdpBuild *b, guint s, guint k, const SimOpTag *t, guint part, double gemm_s,
                          ModelTpGemm kind) {
  guint n = b->plan->tp;
  sim_ptdp_count_tp(b, 1.0); /* an all-gather or a reduce-scatter, however it is cut */
  sim_ptdp_flush(b, s, k, t, TRUE);
  double chunk = gemm_s / n;
  if (b->dry) {
    const SimTime *h = &b->hop_ns[(s * b->ds + k) * 5];
    SimTime g = ptdp_ns(chunk), end = 0;
    if (kind == MODEL_TP_GEMM_GATHER_FEEDS) {
      SimTime g_end = g;
      for (guint j = 1; j < n; j++)
        g_end = MAX(g_end, (SimTime)j * h[PTDP_HOP_TP_GATHER]) + g;
      end = g_end;
      b->dry_ops += 2 * n - 1;
    } else if (kind == MODEL_TP_GEMM_SCATTER_AFTER) {
      SimTime r_end = 0;
      for (guint j = 0; j + 1 < n; j++)
        r_end = MAX((SimTime)(j + 1) * g, r_end) + h[PTDP_HOP_TP_SCATTER];
      end = MAX((SimTime)n * g, r_end);
      b->dry_ops += 2 * n - 1;
    } else {
      g = ptdp_ns(gemm_s);
      end = MAX(g, b->tp_ns[(s * b->ds + k) * 2]);
      b->dry_ops += 2;
      n = 1;
    }
    b->dry_compute += g * n;
    b->dry_tp += end - g * n;
    return;
  }
  if (kind == MODEL_TP_GEMM_SCATTER_BESIDE) {
    guint rs = side_op(b, s, k, SIM_CAT_TP, G_MAXUINT, b->layer.tp_allreduce_bytes, t, G_MAXUINT, TRUE);
    step_compute(b, s, k, t, part, gemm_s, G_MAXUINT);
    for (guint i = 0; i < b->ts; i++)
      b->join[i] = rs;
    return;
  }
  guint hop = kind == MODEL_TP_GEMM_GATHER_FEEDS ? PTDP_HOP_TP_GATHER : PTDP_HOP_TP_SCATTER, prev_hop = G_MAXUINT;
  for (guint j = 0; j < n; j++) {
    if (kind == MODEL_TP_GEMM_GATHER_FEEDS) {
      guint next = G_MAXUINT;
      if (j + 1 < n) { /* rows for chunk j + 1, on their way while chunk j runs */
        next = side_op(b, s, k, SIM_CAT_TP, hop, hop_bytes(b, hop), t, prev_hop, j == 0);
      }
      step_compute(b, s, k, t, part, chunk, prev_hop);
      prev_hop = next;
    } else {
      step_compute(b, s, k, t, part, chunk, G_MAXUINT);
      if (j + 1 < n) { /* chunk j's partial sums on to the next rank */
        prev_hop = side_op(b, s, k, SIM_CAT_TP, hop, hop_bytes(b, hop), t, G_MAXUINT, FALSE);
        for (guint i = 0; i < b->ts; i++)
          sim_engine_add_dep(b->e, b->prev[i], prev_hop);
      }
    }
  }
  if (kind == MODEL_TP_GEMM_SCATTER_AFTER)
    for (guint i = 0; i < b->ts; i++)
      b->join[i] = prev_hop;
}

/* A pass whose communication is not only at its two all-reduce points: the
 * ring around its attention core (context parallelism) and/or its
 * tensor-parallel communication beside its four GEMMs (--tp-comm-overlap).
 * The compute between them is cut from the pass's segments by position. */
static void emit_pass_marked(PtdpBuild *b, guint s, guint k, const ModelPass *pass, const SimOpTag *t, gboolean ring) {
  static const guint fwd_parts[3] = {SIM_PART_ATTENTION, SIM_PART_MLP, SIM_PART_RESIDUAL},
                     bwd_parts[3] = {SIM_PART_MLP, SIM_PART_ATTENTION, SIM_PART_LAYERNORM};
  const guint *parts = t->pass == SIM_PASS_BACKWARD ? bwd_parts : fwd_parts;
  gboolean backward = t->pass == SIM_PASS_BACKWARD;
  double base[4] = {0, pass->seg_s[0], pass->seg_s[0] + pass->seg_s[1],
                    pass->seg_s[0] + pass->seg_s[1] + pass->seg_s[2]};
  enum { MARK_ALLREDUCE = 4, MARK_RING = 5 };
  typedef struct {
    double at, len;
    guint what, seg;
  } Mark;
  Mark marks[7];
  guint n = 0;
  if (b->plan->tp_comm_overlap)
    for (guint j = 0; j < 4; j++)
      marks[n++] = (Mark){base[pass->tp_gemm[j].seg] + pass->tp_gemm[j].at_s, pass->tp_gemm[j].s, j,
                                      pass->tp_gemm[j].seg};
  else
    for (guint j = 1; j <= 2; j++)
      marks[n++] = (Mark){base[j], 0, MARK_ALLREDUCE, j - 1};
  if (ring)
    marks[n++] = (Mark){base[pass->core.seg] + pass->core.at_s, pass->core.s, MARK_RING, pass->core.seg};
  for (guint j = 1; j < n; j++) /* in pass order */
    for (guint q = j; q > 0 && marks[q].at < marks[q - 1].at; q--) {
      Mark x = marks[q];
      marks[q] = marks[q - 1];
      marks[q - 1] = x;
    }
  double cursor = 0;
  for (guint j = 0; j <= n; j++) {
    double upto = j < n ? marks[j].at : base[3];
    for (guint g = 0; g < 3; g++) { /* the compute up to the mark, by segment */
      double lo = MAX(cursor, base[g]), hi = MIN(upto, base[g + 1]);
      if (hi > lo)
        sim_ptdp_add_compute(b, parts[g], t->layer, t->pass, hi - lo);
    }
    if (j == n)
      break;
    if (marks[j].what == MARK_ALLREDUCE)
      sim_ptdp_tp_allreduce(b, s, k, t);
    else if (marks[j].what == MARK_RING)
      cp_ring(b, s, k, t, parts[marks[j].seg], marks[j].len, backward);
    else
      tp_overlapped(b, s, k, t, parts[marks[j].seg], marks[j].len, model_tp_gemm_kind(backward, marks[j].what));
    cursor = MAX(cursor, marks[j].at + marks[j].len);
  }
}

/* The MTP modules of a pass, after the chunk's layers: each its
 * projection, an MoE layer with its token exchange, its logits and loss;
 * backward the other way round, the MoE layer's forward again first under
 * full recomputation. */
static void emit_mtp(PtdpBuild *b, guint s, guint k, const SimOpTag *item, gboolean backward) {
  SimOpTag t = *item;
  t.layer = -1;
  for (guint j = 0; j < b->mtp_n; j++) {
    if (!backward) {
      sim_ptdp_add_compute(b, SIM_PART_MLP, -1, t.pass, b->mtp_proj_f);
      sim_ptdp_moe_pass(b, s, k, &t, FALSE);
      sim_ptdp_add_compute(b, SIM_PART_HEAD, -1, t.pass, b->mtp_head_f);
      continue;
    }
    sim_ptdp_add_compute(b, SIM_PART_HEAD, -1, SIM_PASS_BACKWARD, b->mtp_head_b);
    if (b->plan->recompute) {
      t.pass = SIM_PASS_RECOMPUTE;
      sim_ptdp_add_compute(b, SIM_PART_MLP, -1, t.pass, b->mtp_proj_f);
      sim_ptdp_moe_pass(b, s, k, &t, FALSE);
      t.pass = SIM_PASS_BACKWARD;
    }
    sim_ptdp_moe_pass(b, s, k, &t, TRUE);
    sim_ptdp_add_compute(b, SIM_PART_MLP, -1, SIM_PASS_BACKWARD, b->mtp_proj_b);
  }
}

/* A layer's pass, marked where it has to be (emit_pass_marked). */
static void emit_layer_pass(PtdpBuild *b, guint s, guint k, const ModelPass *pass, const SimOpTag *t) {
  if (b->cp > 1 || b->plan->tp_comm_overlap)
    emit_pass_marked(b, s, k, pass, t, b->cp > 1);
  else
    emit_pass(b, s, k, pass, t);
}

void sim_ptdp_emit_item(PtdpBuild *b, guint s, guint k, guint idx) {
  const SimPlan *pl = b->plan;
  SimItem it = g_array_index(b->order[s], SimItem, idx);
  guint vs = sim_plan_vstage(pl, s, it.chunk, it.microbatch), last_vs = b->route - 1;
  for (guint i = 0; i < b->ts; i++) {
    b->pending[i] = 0;
    b->prev[i] = G_MAXUINT;
    b->join[i] = G_MAXUINT;
  }
  /* The item's first op must follow the previous item's last op on this GPU:
   * stream order does that for compute; explicit deps keep all-reduces in
   * line too.  The backward of DualPipe's F&B follows what its forward
   * follows: the two run interleaved (sim_ptdp_overlap_pair). */
  guint before = idx;
  if (idx > 0 && sim_ptdp_pairs_with_previous(b, s, idx))
    before = idx - 1;
  if (before > 0)
    for (guint i = 0; i < b->ts; i++)
      b->prev[i] = b->items[((k * b->p + s) * b->n_items + before - 1) * b->ts + i].last;
  guint first_op = sim_engine_n_ops(b->e);
  guint gi = (k * b->p + s) * b->n_items + idx;
  b->cur_item = gi;
  if (b->item_lo)
    b->item_lo[gi] = first_op;
  SimOpTag t = ptdp_tag(SIM_CAT_COMPUTE,
                   it.forward                        ? SIM_PASS_FORWARD
                   : it.grad == SIM_GRAD_WEIGHT      ? SIM_PASS_WEIGHT
                                                     : SIM_PASS_BACKWARD,
                   s, it.chunk, it.microbatch, -1);
  /* the item that ends the chunk's last backward: torch DDP's buckets are ready */
  gboolean last_mb = idx == b->last_bwd[s * b->v + it.chunk];
  /* Coarse: the item's ops form one chain on the compute and TP streams,
   * each starting as the one before ends (nothing else runs on those
   * streams, the all-reduces have fixed durations), so one op of their
   * summed integer durations starts and ends exactly when the chain would.
   * Not where torch DDP hangs a bucket's all-reduce on a layer inside it. */
  gboolean gathered = pl->overlap_param_gather && it.forward && it.microbatch == 0; /* waits for its parameters */
  /* FSDP2: gathered for every forward without pipelining (resharded after
   * each backward), else for the first microbatch's (torch's pipelining
   * keeps them between microbatches), and again for every backward when
   * resharded after forward; gradients reduced after every backward
   * without pipelining (torchtitan's gradient accumulation), after the last
   * microbatch's with it (torch.distributed.pipelining's stage turns
   * FSDP2's gradient sync off but for the last backward) */
  gboolean fsdp = pl->fsdp && b->dpc > 1;
  gboolean fsdp_g = fsdp && (it.forward ? it.microbatch == 0 || pl->reshard_after_forward || b->p == 1
                                        : pl->reshard_after_forward);
  gboolean fsdp_rs = fsdp && !it.forward && (last_mb || b->p == 1);
  guint64 fsdp_layer = fsdp ? model_layer_local_params(&pl->model, pl->tp) : 0;
  guint64 fsdp_root = fsdp && it.chunk == 0 ? model_stage_params(&pl->model, pl->tp, b->p, s, ptdp_stage_layers(b, s)) -
                                                  fsdp_layer * ptdp_stage_layers(b, s)
                                            : 0;
  guint nl = ptdp_chunk_layers(b, s, it.chunk);
  guint *fsdp_ops = fsdp_g ? g_new(guint, (gsize)(nl + 2) * b->ts) : NULL;
  gathered = gathered || fsdp_g || fsdp_rs;
  b->dry = b->coarse && !(pl->ddp == SIM_DDP_TORCH && last_mb && b->dpc > 1 && !it.forward) && !gathered;
  b->dry_compute = b->dry_tp = 0;
  b->dry_ops = 0;
  if (fsdp_g) /* the first two blocks of the item (the root's parameters with the first forward) */
    for (guint j = 0; j < MIN(2u, nl); j++) {
      guint l = it.forward ? j : nl - 1 - j;
      sim_ptdp_fsdp_gather(b, s, k, it.chunk, (gint)(ptdp_chunk_first(b, s, it.chunk) + l), it.forward,
                           (double)fsdp_layer + (it.forward && j == 0 ? (double)fsdp_root : 0), b->prev[0],
                           fsdp_ops + l * b->ts);
    }
  if (pl->stage_times) {
    /* a microbatch's pass over a whole stage takes the time given; a chunk
     * its share of it */
    double share = (double)b->p / b->route;
    double sec = it.forward                   ? pl->stage_f_s
                 : it.grad == SIM_GRAD_INPUT  ? pl->stage_b_s
                 : it.grad == SIM_GRAD_WEIGHT ? pl->stage_w_s
                                              : pl->stage_b_s + pl->stage_w_s;
    sim_ptdp_add_compute(b, SIM_PART_LAYERS, -1, t.pass, sec * share);
  } else if (it.forward) {
    if (vs == 0)
      sim_ptdp_add_compute(b, SIM_PART_EMBEDDING, -1, SIM_PASS_FORWARD, b->emb_fwd);
    for (guint l = 0; l < ptdp_chunk_layers(b, s, it.chunk); l++) {
      if (gathered && !fsdp) { /* the layer's first forward waits for its parameters' all-gather */
        sim_ptdp_flush(b, s, k, &t, FALSE);
        for (guint i = 0; i < b->ts; i++)
          b->join[i] = b->param_gather[((s * b->v + it.chunk) * b->lmax + l) * b->ts + i];
      }
      if (fsdp_g) {
        sim_ptdp_flush(b, s, k, &t, FALSE);
        for (guint i = 0; i < b->ts; i++)
          b->join[i] = fsdp_ops[l * b->ts + i];
      }
      t.layer = (gint32)(ptdp_chunk_first(b, s, it.chunk) + l);
      if (b->moe_layer && b->moe_layer[(s * b->v + it.chunk) * b->lmax + l])
        sim_ptdp_moe_pass(b, s, k, &t, FALSE);
      else
        emit_layer_pass(b, s, k, &b->layer.fwd, &t);
      if (fsdp_g && l + 2 < nl) { /* the block two ahead, once this one's copy is freed */
        sim_ptdp_flush(b, s, k, &t, TRUE);
        sim_ptdp_fsdp_gather(b, s, k, it.chunk, t.layer + 2, TRUE, (double)fsdp_layer, b->prev[0],
                    fsdp_ops + (l + 2) * b->ts);
      }
    }
    if (vs == b->mtp_vs)
      emit_mtp(b, s, k, &t, FALSE);
    if (vs == last_vs)
      sim_ptdp_add_compute(b, SIM_PART_HEAD, -1, SIM_PASS_FORWARD, b->head_fwd);
  } else if (it.grad == SIM_GRAD_WEIGHT) {
    /* the weight-gradient GEMMs, layer by layer in backward order, the
     * logit layer's first and the embedding's last (all of its backward is
     * its weight gradient); a mixture-of-experts layer's backward runs whole
     * in its B (its experts' weight gradients are not split off) */
    if (vs == last_vs)
      sim_ptdp_add_compute(b, SIM_PART_HEAD, -1, SIM_PASS_WEIGHT, b->head_w);
    for (guint l = ptdp_chunk_layers(b, s, it.chunk); l-- > 0;) {
      t.layer = (gint32)(ptdp_chunk_first(b, s, it.chunk) + l);
      if (!(b->moe_layer && b->moe_layer[(s * b->v + it.chunk) * b->lmax + l]))
        sim_ptdp_add_compute(b, SIM_PART_MLP, t.layer, SIM_PASS_WEIGHT, b->layer_w);
      if (vs == 0 && l == 0)
        sim_ptdp_add_compute(b, SIM_PART_EMBEDDING, -1, SIM_PASS_WEIGHT, b->emb_bwd);
      if (pl->ddp == SIM_DDP_TORCH && last_mb && b->dpc > 1) {
        sim_ptdp_flush(b, s, k, &t, TRUE);
        for (guint i = 0; i < b->ts; i++)
          b->grad_ready[(((k * b->p + s) * b->v + it.chunk) * b->lmax + l) * b->ts + i] = b->prev[i];
      }
      if (fsdp_rs) { /* the block's gradients are whole once its W has run: reduced then */
        sim_ptdp_flush(b, s, k, &t, TRUE);
        if (k == 0)
          for (guint i = 0; i < b->ts; i++)
            sim_ptdp_fsdp_reduce(b, s, k, it.chunk, t.layer, (double)fsdp_layer, i, b->prev[i]);
      }
    }
    if (vs == 0 && ptdp_chunk_layers(b, s, it.chunk) == 0) /* a layout's chunk of the embedding alone */
      sim_ptdp_add_compute(b, SIM_PART_EMBEDDING, -1, SIM_PASS_WEIGHT, b->emb_bwd);
  } else {
    gboolean input = it.grad == SIM_GRAD_INPUT;
    if (vs == last_vs)
      sim_ptdp_add_compute(b, SIM_PART_HEAD, -1, SIM_PASS_BACKWARD, input ? b->head_bwd - b->head_w : b->head_bwd);
    if (vs == b->mtp_vs) /* the MTP modules' backward runs whole in B (as an MoE layer's) */
      emit_mtp(b, s, k, &t, TRUE);
    for (guint l = ptdp_chunk_layers(b, s, it.chunk); l-- > 0;) {
      t.layer = (gint32)(ptdp_chunk_first(b, s, it.chunk) + l);
      if (fsdp_g) { /* FSDP2's pre-backward hook: the block gathered again, before its recomputation */
        sim_ptdp_flush(b, s, k, &t, FALSE);
        for (guint i = 0; i < b->ts; i++)
          b->join[i] = fsdp_ops[l * b->ts + i];
      }
      gboolean moe = b->moe_layer && b->moe_layer[(s * b->v + it.chunk) * b->lmax + l];
      double policy_s = moe ? sim_ptdp_policy_recompute_moe_s(pl, &b->moe_attn, &b->moe)
                            : sim_ptdp_policy_recompute_s(pl, &b->layer);
      if (pl->recompute || sim_ptdp_layer_checkpointed(pl, (guint)t.layer)) {
        t.pass = SIM_PASS_RECOMPUTE;
        if (moe)
          sim_ptdp_moe_pass(b, s, k, &t, FALSE);
        else
          emit_layer_pass(b, s, k, &b->layer.fwd, &t);
        t.pass = SIM_PASS_BACKWARD;
      } else if (pl->selective && b->cp > 1) { /* the attention core again, with its ring */
        t.pass = SIM_PASS_RECOMPUTE;
        cp_ring(b, s, k, &t, SIM_PART_ATTENTION, b->layer.core.seg_s[0], FALSE);
        t.pass = SIM_PASS_BACKWARD;
      } else if (pl->selective) /* the attention core again, no communication */
        sim_ptdp_add_compute(b, SIM_PART_ATTENTION, t.layer, SIM_PASS_RECOMPUTE, b->layer.core.seg_s[0]);
      else if (policy_s > 0 && moe) { /* Megatron-Core's modules of an MoE layer: the MoE block's apart */
        double attn_s = sim_ptdp_policy_recompute_s(pl, &b->moe_attn);
        if (attn_s > 0)
          sim_ptdp_add_compute(b, SIM_PART_ATTENTION, t.layer, SIM_PASS_RECOMPUTE, attn_s);
        t.pass = SIM_PASS_RECOMPUTE;
        if (pl->recompute_modules & MODEL_RC_MOE) /* with its dispatch and combine */
          sim_ptdp_moe_recompute(b, s, k, &t);
        else if (policy_s > attn_s)
          sim_ptdp_add_compute(b, SIM_PART_MLP, t.layer, SIM_PASS_RECOMPUTE, policy_s - attn_s);
        t.pass = SIM_PASS_BACKWARD;
      } else if (policy_s > 0) { /* the ops a framework's policy runs again (no communication modelled) */
        double mlp_s = pl->ac == MODEL_RECOMPUTE_MODULES && (pl->recompute_modules & MODEL_RC_MLP) ? b->layer.fwd.mlp_s
                                                                                                  : 0;
        if (policy_s > mlp_s)
          sim_ptdp_add_compute(b, SIM_PART_ATTENTION, t.layer, SIM_PASS_RECOMPUTE, policy_s - mlp_s);
        if (mlp_s > 0)
          sim_ptdp_add_compute(b, SIM_PART_MLP, t.layer, SIM_PASS_RECOMPUTE, mlp_s);
      }
      if (moe)
        sim_ptdp_moe_pass(b, s, k, &t, TRUE);
      else
        emit_layer_pass(b, s, k, input ? &b->bwd_in : &b->layer.bwd, &t);
      if (vs == 0 && l == 0 && !input)
        sim_ptdp_add_compute(b, SIM_PART_EMBEDDING, -1, SIM_PASS_BACKWARD, b->emb_bwd);
      if (pl->ddp == SIM_DDP_TORCH && last_mb && b->dpc > 1 && !input) {
        sim_ptdp_flush(b, s, k, &t, TRUE);
        for (guint i = 0; i < b->ts; i++)
          b->grad_ready[(((k * b->p + s) * b->v + it.chunk) * b->lmax + l) * b->ts + i] = b->prev[i];
      }
      if (fsdp_rs && !input) { /* the block's gradients, reduced as its backward ends (a split one's at its W) */
        sim_ptdp_flush(b, s, k, &t, TRUE);
        if (k == 0)
          for (guint i = 0; i < b->ts; i++)
            sim_ptdp_fsdp_reduce(b, s, k, it.chunk, t.layer, (double)fsdp_layer, i, b->prev[i]);
      }
      if (fsdp_g && l >= 2) { /* the block two behind in backward order, once this one's copy is freed */
        sim_ptdp_flush(b, s, k, &t, TRUE);
        sim_ptdp_fsdp_gather(b, s, k, it.chunk, t.layer - 2, FALSE, (double)fsdp_layer, b->prev[0],
                             fsdp_ops + (l - 2) * b->ts);
      }
    }
    if (vs == 0 && ptdp_chunk_layers(b, s, it.chunk) == 0 && !input) /* a layout's chunk of the embedding alone */
      sim_ptdp_add_compute(b, SIM_PART_EMBEDDING, -1, SIM_PASS_BACKWARD, b->emb_bwd);
  }
  sim_ptdp_flush(b, s, k, &t, FALSE);
  g_free(fsdp_ops);
  if (b->dry) {
    b->dry = FALSE;
    t.layer = -1;
    guint op = sim_engine_add_op1(b->e, b->dry_compute + b->dry_tp, ptdp_stream_of(b, 0, s, k, SIM_STREAM_COMPUTE), &t);
    if (b->prev[0] != G_MAXUINT)
      sim_engine_add_dep(b->e, b->prev[0], op);
    if (b->flow)
      sim_netops_parts_to(b->flow->ops, op);
    if (b->dry_tp > 0) {
      if (b->tp_part->len <= op)
        g_array_set_size(b->tp_part, MAX(op + 1, 2 * b->tp_part->len));
      g_array_index(b->tp_part, SimTime, op) = b->dry_tp;
    }
    b->counts.logical_extra += MAX(b->dry_ops, 1u) - 1; /* an item with no work is one op too */
    if (b->extra) {
      g_array_set_size(b->extra, op + 1);
      g_array_index(b->extra, guint, op) = MAX(b->dry_ops, 1u) - 1;
    }
    PtdpItemOps *io = &b->items[(k * b->p + s) * b->n_items + idx];
    io->first = io->last = op;
    if (b->item_hi)
      b->item_hi[gi] = sim_engine_n_ops(b->e);
    return;
  }
  for (guint i = 0; i < b->ts; i++)
    if (b->join[i] != G_MAXUINT) { /* the item ends when what it waits for has */
      sim_ptdp_flush(b, s, k, &t, TRUE);
      break;
    }
  if (sim_engine_n_ops(b->e) == first_op) /* an item with no work still needs an op */
    sim_ptdp_flush(b, s, k, &t, TRUE);
  if (b->item_hi)
    b->item_hi[gi] = sim_engine_n_ops(b->e);
  for (guint i = 0; i < b->ts; i++) {
    PtdpItemOps *io = &b->items[((k * b->p + s) * b->n_items + idx) * b->ts + i];
    io->last = b->prev[i];
  }
  /* The first compute op of the item for rank i is the first op issued on
   * its compute stream after first_op; ops are issued rank by rank. */
  for (guint i = 0; i < b->ts; i++) {
    PtdpItemOps *io = &b->items[((k * b->p + s) * b->n_items + idx) * b->ts + i];
    guint stream = ptdp_stream_of(b, i, s, k, SIM_STREAM_COMPUTE);
    for (guint op = first_op;; op++) {
      const guint *st = sim_engine_op_streams(b->e, op);
      if (sim_engine_op_n_streams(b->e, op) == 1 && st[0] == stream) {
        io->first = op;
        break;
      }
    }
  }
}

gboolean sim_ptdp_pairs_with_previous(const PtdpBuild *b, guint s, guint idx) {
  if (idx == 0 || b->coarse)
    return FALSE;
  SimItem it = g_array_index(b->order[s], SimItem, idx), before = g_array_index(b->order[s], SimItem, idx - 1);
  return !it.forward && before.forward && before.paired;
}

/* DualPipe's F&B (DeepSeek-V3 report, section 3.2.1 and figure 4: the
 * forward chunk of one microbatch and the backward chunk of another run
 * together, each one's communication behind the other's computation): the
 * two items' ops on the compute stream take turns, one of the forward's,
 * one of the backward's, and so do their collectives on the tensor-parallel
 * stream (the MoE dispatch and combine, the tensor-parallel all-reduces).
 * Each item's ops still follow one another; while one item's collective
 * runs, the other's computation has the compute stream.  The items' ops are
 * [lo, mid) and [mid, hi); the positions they take are their own ids, so
 * everything else on those streams keeps its place. */
void sim_ptdp_overlap_pair(PtdpBuild *b, guint s, guint k, guint lo, guint mid, guint hi) {
  GArray *f = g_array_new(FALSE, FALSE, sizeof(guint)), *g = g_array_new(FALSE, FALSE, sizeof(guint));
  for (guint i = 0; i < b->ts; i++)
    for (guint kind = SIM_STREAM_COMPUTE; kind <= SIM_STREAM_TP; kind++) {
      guint st = ptdp_stream_of(b, i, s, k, kind);
      g_array_set_size(f, 0);
      g_array_set_size(g, 0);
      for (guint op = lo; op < hi; op++) {
        const guint *on = sim_engine_op_streams(b->e, op);
        for (guint j = 0; j < sim_engine_op_n_streams(b->e, op); j++)
          if (on[j] == st)
            g_array_append_val(op < mid ? f : g, op);
      }
      guint nf = f->len, ng = g->len, next = 0;
      guint64 *pos = g_new(guint64, nf + ng);
      for (guint j = 0; j < nf; j++)
        pos[j] = sim_engine_op_position(b->e, g_array_index(f, guint, j), st);
      for (guint j = 0; j < ng; j++)
        pos[nf + j] = sim_engine_op_position(b->e, g_array_index(g, guint, j), st);
      for (guint j = 0; j < MAX(nf, ng); j++) { /* the positions are ascending: take them in turn */
        if (j < nf)
          sim_engine_set_op_position(b->e, g_array_index(f, guint, j), st, pos[next++]);
        if (j < ng)
          sim_engine_set_op_position(b->e, g_array_index(g, guint, j), st, pos[next++]);
      }
      g_free(pos);
    }
  g_array_free(f, TRUE);
  g_array_free(g, TRUE);
}
