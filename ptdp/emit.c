/* ptdsim — PTD-P's emission primitives, below every pass: the bytes each
 * class moved, the flow plans of a collective, a send and a stage's
 * tensor-parallel group, a network op, a rank's chain of compute and its
 * flush into ops, the tensor-parallel all-reduce and stream op (build.h).
 * The bottom of the room: it calls no other file of it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"

/* Counts bytes of class `cat`, noting which item's op counted them. */
void sim_ptdp_account(PtdpBuild *b, guint cat, double bytes) {
  b->counts.bytes[cat] += bytes;
  if (b->adds) {
    PtdpAdd *last = b->adds->len ? &g_array_index(b->adds, PtdpAdd, b->adds->len - 1) : NULL;
    if (last && last->item == b->cur_item && last->cat == cat && last->bytes == bytes)
      last->count++;
    else {
      PtdpAdd a = {b->cur_item, cat, bytes, 1};
      g_array_append_val(b->adds, a);
    }
  }
}

/* A collective over n GPUs (NCCL's tuner picks), a send, an op that runs a plan. */
guint sim_ptdp_coll_plan(PtdpBuild *b, const char *key, NetCollOp op, const guint *gpus, guint n, double copies,
                         double bytes, const guint8 *side) {
  return sim_netops_coll(b->flow->ops, key, op, gpus, n, copies, bytes, side);
}

guint sim_ptdp_p2p_plan(PtdpBuild *b, const char *key, guint src, guint dst, double copies, double bytes,
                        const guint8 *side) {
  return sim_netops_p2p(b->flow->ops, key, src, dst, copies, bytes, side);
}

guint sim_ptdp_net_op(PtdpBuild *b, guint plan, const guint *streams, const guint64 *pos, guint n, const SimOpTag *t) {
  return sim_netops_op(b->flow->ops, plan, streams, pos, n, t);
}

/* The tensor-parallel group of stage s, replica k (every replica's under
 * symmetry). */
guint sim_ptdp_tp_plan(PtdpBuild *b, guint s, guint k, NetCollOp op, double bytes) {
  guint *cached = &b->tp_plans[(s * b->ds + k) * 3 + (op == NET_OP_ALLGATHER ? 1 : op == NET_OP_REDUCESCATTER ? 2 : 0)];
  if (*cached != G_MAXUINT)
    return *cached;
  char key[64];
  g_snprintf(key, sizeof key, "tp%d:%u:%u:%.0f", (int)op, s, ptdp_job_replica(b, k), bytes);
  guint t = b->plan->tp, gpus[t];
  for (guint i = 0; i < t; i++)
    gpus[i] = ptdp_gpu_of_rank(b, i, s, k);
  return *cached = sim_ptdp_coll_plan(b, key, op, gpus, t, ptdp_copies_c(b, FALSE, TRUE), bytes, NULL);
}

/* --- emitting one item's compute and tensor-parallel all-reduces --- */

/* Makes `op` wait for rank i's chain so far (and an op it must join). */
void sim_ptdp_chain_dep(PtdpBuild *b, guint i, guint op) {
  if (b->prev[i] != G_MAXUINT)
    sim_engine_add_dep(b->e, b->prev[i], op);
  if (b->join[i] != G_MAXUINT) {
    sim_engine_add_dep(b->e, b->join[i], op);
    b->join[i] = G_MAXUINT;
  }
}

void sim_ptdp_flush(PtdpBuild *b, guint s, guint k, const SimOpTag *t, gboolean force) {
  if (b->dry) { /* one rank (coarse items run under the symmetry shortcut) */
    if (b->pending[0] > 0 || force) {
      b->dry_compute += ptdp_ns(b->pending[0]);
      b->dry_ops++;
      b->pending[0] = 0;
    }
    return;
  }
  for (guint i = 0; i < b->ts; i++) {
    if (b->pending[i] <= 0 && !force)
      continue;
    guint op = sim_engine_add_op1(b->e, ptdp_ns(b->pending[i]), ptdp_stream_of(b, i, s, k, SIM_STREAM_COMPUTE), t);
    if (b->contention > 1)
      sim_engine_set_op_contended(b->e, op, b->contention);
    sim_ptdp_chain_dep(b, i, op);
    b->prev[i] = op;
    b->pending[i] = 0;
    for (guint j = 0; b->pieces && j < b->pending_pieces->len; j++) {
      SimTimelinePiece pc = g_array_index(b->pending_pieces, SimTimelinePiece, j);
      pc.op = op;
      g_array_append_val(b->pieces, pc);
    }
  }
  if (b->pieces)
    g_array_set_size(b->pending_pieces, 0);
}

/* Counts `n` halves of a tensor-parallel all-reduce (2: the all-reduce; 1:
 * a reduce-scatter or an all-gather of the same buffer): a ring all-reduce
 * of b*s*h*2 bytes over t ranks sends 2(t-1)/t of it from each rank, for
 * every replica and context-parallel rank. */
void sim_ptdp_count_tp(PtdpBuild *b, double n) {
  sim_ptdp_account(b, SIM_CAT_TP,
                   b->layer.tp_allreduce_bytes * n * (b->plan->tp - 1) * ((double)b->plan->dp / b->ds) * b->cp);
}

/* A tensor-parallel all-reduce of the layer's output; with sequence
 * parallelism its reduce-scatter and the next all-gather (Korthikanti et al.
 * section 4.2.2: g and g-bar), placed one after the other at the same point
 * of the chain: the sharded element-wise work between them runs in the
 * compute next to it, so the serial chain's time is the same. */
void sim_ptdp_tp_allreduce(PtdpBuild *b, guint s, guint k, const SimOpTag *t) {
  if (b->plan->tp == 1)
    return;
  sim_ptdp_flush(b, s, k, t, TRUE);
  gboolean sp = b->plan->sequence_parallel;
  const NetCollOp kinds[2] = {sp ? NET_OP_REDUCESCATTER : NET_OP_ALLREDUCE, NET_OP_ALLGATHER};
  guint n = sp ? 2 : 1;
  const SimTime *dur = &b->tp_ns[(s * b->ds + k) * 2];
  if (b->dry) {
    for (guint j = 0; j < n; j++) {
      if (b->flow) /* where it runs inside the coarse op (netops.h) */
        sim_netops_part(b->flow->ops, sim_ptdp_tp_plan(b, s, k, kinds[j], b->layer.tp_allreduce_bytes),
                        b->dry_compute + b->dry_tp);
      b->dry_tp += dur[j];
    }
    b->dry_ops += n;
    sim_ptdp_count_tp(b, 2.0);
    return;
  }
  for (guint j = 0; j < n; j++)
    sim_ptdp_tp_stream_op(b, s, k, t,
                          b->flow ? sim_ptdp_tp_plan(b, s, k, kinds[j], b->layer.tp_allreduce_bytes) : G_MAXUINT,
                          dur[j]);
  sim_ptdp_count_tp(b, 2.0);
}

void sim_ptdp_tp_stream_op(PtdpBuild *b, guint s, guint k, const SimOpTag *t, guint plan, SimTime dur) {
  guint streams[b->ts];
  for (guint i = 0; i < b->ts; i++)
    streams[i] = ptdp_stream_of(b, i, s, k, SIM_STREAM_TP);
  SimOpTag at = *t;
  at.category = SIM_CAT_TP;
  guint op = b->flow ? sim_ptdp_net_op(b, plan, streams, NULL, b->ts, &at)
                     : sim_engine_add_op(b->e, dur, streams, b->ts, &at);
  for (guint i = 0; i < b->ts; i++) {
    sim_ptdp_chain_dep(b, i, op);
    b->prev[i] = op;
  }
}

/* Compute of `part` (of `layer`, -1: none) in `pass`, into the op the
 * next flush makes; a traced run records it as a piece of that op. */
void sim_ptdp_add_compute(PtdpBuild *b, guint part, gint layer, guint pass, double seconds) {
  for (guint i = 0; i < b->ts; i++)
    b->pending[i] += seconds;
  if (b->pending_pieces) {
    sim_timeline_piece(b->pending_pieces, 0, SIM_ACT_RUN, part, layer, 1, seconds);
    g_array_index(b->pending_pieces, SimTimelinePiece, b->pending_pieces->len - 1).pass = (guint8)pass;
  }
}
