/* ptdsim — what crosses GPUs outside a pass: the pipeline transfers between
 * stages, the data-parallel groups, their gradient collectives, FSDP2's
 * gathers and reductions, and the optimizer step; the nodes and NICs a
 * group spans (build.h).  It calls emit.c alone. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"

/* The data-parallel group a collective spans (dp_group_rank). */
enum { DP_ALL, DP_SHARD, DP_REPLICAS };

static guint dp_collective_g(PtdpBuild *b, NetCollOp kind, guint group, guint i, guint s, double bytes,
                             const guint *deps, guint n_deps, const SimOpTag *t);

/* FSDP2 (torch.distributed.fsdp.fully_shard, as torchtitan applies it per
 * transformer block and to the root module: torchtitan/models/llama3/infra/
 * parallelize.py, apply_fsdp): the bf16 parameters of a block all-gathered
 * over its shard group before the block runs.  The all-gathers run on their
 * own stream and the CPU issues the next block's while the current one
 * computes, but FSDP2 lets at most two blocks' gathered copies exist (its
 * copy-out of block l + 2 waits for block l's to be freed; PyTorch issue
 * 114299, "memory management"), so the gather of the block two ahead waits
 * for the end of this one.  `params`: the block's (and the root's, with the
 * stage's first block) parameters on this tensor rank. */
void sim_ptdp_fsdp_gather(PtdpBuild *b, guint s, guint k, guint chunk, gint layer, gboolean forward, double params,
                          guint after, guint *out) {
  for (guint i = 0; i < b->ts; i++) {
    SimOpTag t = ptdp_tag(SIM_CAT_DP, forward ? SIM_PASS_FORWARD : SIM_PASS_BACKWARD, s, chunk, 0, layer);
    guint dep = i == 0 ? after : G_MAXUINT;
    out[i] = dp_collective_g(b, NET_OP_ALLGATHER, DP_SHARD, i, s, 2.0 * params, &dep, 1, &t);
  }
  if (s == 0 && k == 0) {
    b->counts.shard_gathers++;
    b->counts.shard_gather_bytes += 2.0 * params;
  }
  b->counts.bytes[SIM_CAT_DP] += 2.0 * params * (b->shard - 1) * (b->dpc / b->shard) * b->plan->tp;
}

/* FSDP2's reduce-scatter of a block's gradients over its shard group, in
 * the reduce dtype (torchtitan's mixed_precision_reduce, fp32 by default),
 * and under HSDP the all-reduce of each shard across the R replicas. */
void sim_ptdp_fsdp_reduce(PtdpBuild *b, guint s, guint k, guint chunk, gint layer, double params, guint i,
                          guint after) {
  const SimPlan *pl = b->plan;
  double bytes = (pl->fsdp_reduce_fp32 ? 4.0 : 2.0) * params;
  SimOpTag t = ptdp_tag(SIM_CAT_DP, SIM_PASS_OTHER, s, chunk, 0, layer);
  guint op = dp_collective_g(b, NET_OP_REDUCESCATTER, DP_SHARD, i, s, bytes, &after, 1, &t);
  guint R = b->dpc / b->shard;
  if (R > 1)
    op = dp_collective_g(b, NET_OP_ALLREDUCE, DP_REPLICAS, i, s, bytes / b->shard, &op, 1, &t);
  g_array_append_val(b->fsdp_rs[s * b->ts + i], op);
  if (s == 0 && k == 0 && i == 0) {
    b->counts.shard_reductions += R > 1 ? 2 : 1;
    b->counts.shard_reduce_bytes += bytes + (R > 1 ? bytes / b->shard : 0);
  }
  if (i == 0)
    b->counts.bytes[SIM_CAT_DP] += (bytes * (b->shard - 1) * R + (R > 1 ? 2.0 * bytes / b->shard * (R - 1) * b->shard : 0)) *
                        pl->tp;
}

static void emit_transfers_of(PtdpBuild *b, guint s, guint k, guint idx);

void sim_ptdp_emit_transfers(PtdpBuild *b, guint s, guint k, guint idx) {
  guint gi = (k * b->p + s) * b->n_items + idx;
  b->cur_item = gi | PTDP_STEADY_XFER;
  if (b->xfer_lo)
    b->xfer_lo[gi] = sim_engine_n_ops(b->e);
  emit_transfers_of(b, s, k, idx);
  if (b->xfer_hi)
    b->xfer_hi[gi] = sim_engine_n_ops(b->e);
  b->cur_item = G_MAXUINT;
}

static void emit_transfers_of(PtdpBuild *b, guint s, guint k, guint idx) {
  const SimPlan *pl = b->plan;
  SimItem it = g_array_index(b->order[s], SimItem, idx);
  guint vs = sim_plan_vstage(pl, s, it.chunk, it.microbatch), last_vs = b->route - 1;
  if (it.grad == SIM_GRAD_WEIGHT || (it.forward && vs == last_vs) || (!it.forward && vs == 0))
    return;
  guint dvs = it.forward ? vs + 1 : vs - 1, ds_, dc;
  sim_plan_place(pl, dvs, it.microbatch, &ds_, &dc);
  guint didx = ptdp_item_index(b, ds_, dc, it.microbatch, it.forward);
  if (ds_ == s) { /* the next virtual stage on the same GPU (the V's turn): no transfer */
    for (guint i = 0; i < b->ts; i++)
      sim_engine_add_dep(b->e, b->items[((k * b->p + s) * b->n_items + idx) * b->ts + i].last,
                         b->items[((k * b->p + s) * b->n_items + didx) * b->ts + i].first);
    return;
  }
  double full = ptdp_activation_bytes(pl);
  /* scatter/gather: each rank sends 1/t and the receivers all-gather; with
   * sequence parallelism each rank's activation is already its s/t shard,
   * sent as it is and kept sharded */
  gboolean sg = pl->scatter_gather && pl->tp > 1;
  double per_rank = ptdp_pp_bytes_per_rank(pl);
  SimOpTag t = ptdp_tag(SIM_CAT_PP, it.forward ? SIM_PASS_FORWARD : SIM_PASS_BACKWARD, s, it.chunk, it.microbatch, -1);
  guint xfer[b->ts];
  for (guint i = 0; i < b->ts; i++) {
    gboolean same = ptdp_node_of_rank(b, i, s, k) == ptdp_node_of_rank(b, i, ds_, k);
    guint streams[2] = {ptdp_stream_of(b, i, s, k, SIM_STREAM_PP_SEND),
                        ptdp_stream_of(b, i, ds_, k, SIM_STREAM_PP_RECV)};
    guint64 pos[2] = {2ull * idx, 2ull * didx};
    /* Megatron's blocking point-to-point calls hold both ends in schedule
     * order; the other schedules post their sends and receives ahead
     * (torch.distributed.pipelining, DualPipe: batched isend/irecv), so a
     * transfer holds its sender's stream, in the sender's order, and the
     * receiver waits for it alone */
    guint nst = b->blocking ? 2 : 1;
    if (b->flow) {
      guint *plan = &b->pp_plans[((k * b->p + s) * b->ts + i) * 2 + it.forward];
      if (*plan == G_MAXUINT) {
        char key[64];
        g_snprintf(key, sizeof key, "pp:%u:%u:%u:%u", s, ds_, i, ptdp_job_replica(b, k));
        *plan = sim_ptdp_p2p_plan(b, key, ptdp_gpu_of_rank(b, i, s, k), ptdp_gpu_of_rank(b, i, ds_, k),
                                  ptdp_copies_c(b, TRUE, TRUE), per_rank, b->flow->side_pp);
      }
      xfer[i] = sim_ptdp_net_op(b, *plan, streams, pos, nst, &t);
    } else {
      ModelNet net = b->net;
      if (!same && pl->stragglers.n_link) { /* a send runs at the slower of its two NICs (--slow-link) */
        double f = 1;
        f = MIN(f, MIN(sim_ptdp_nic_factor(b, ptdp_gpu_of_rank(b, i, s, k)),
                       sim_ptdp_nic_factor(b, ptdp_gpu_of_rank(b, i, ds_, k))));
        net.hw.nic_bw *= f;
      }
      double secs = pl->stage_times ? pl->stage_comm_s : model_p2p_time_s(&net, per_rank, same);
      xfer[i] = sim_engine_add_op_at(b->e, ptdp_ns(secs), streams, pos, nst, &t);
    }
    if (nst == 1) {
      if (b->pp_to->len <= xfer[i])
        g_array_set_size(b->pp_to, MAX(xfer[i] + 1, 2 * b->pp_to->len));
      g_array_index(b->pp_to, guint, xfer[i]) = ds_ + 1;
    }
    sim_engine_add_dep(b->e, b->items[((k * b->p + s) * b->n_items + idx) * b->ts + i].last, xfer[i]);
    /* Megatron's point-to-point calls are blocking (batch_isend_irecv, then
     * wait): the sender goes on only once its send is done.  (The receiver's
     * side of the rendezvous is its receive-stream order.)  A forward run
     * with the backward after it (combined 1F1B) waits at the pair's end:
     * the item after the pair goes on once both sends are done. */
    guint next = idx + (it.forward && it.paired ? 2 : 1);
    if (b->blocking && next < b->len[s])
      sim_engine_add_dep(b->e, xfer[i], b->items[((k * b->p + s) * b->n_items + next) * b->ts + i].first);
  }
  sim_ptdp_account(b, SIM_CAT_PP, per_rank * pl->tp * pl->dp / b->ds * b->cp);
  const PtdpItemOps *dst = &b->items[((k * b->p + ds_) * b->n_items + didx) * b->ts];
  guint gather = G_MAXUINT;
  if (sg) {
    /* Scatter/gather (SC21 section 4.1): each rank sent b*s*h/t; the
     * receiving tensor-parallel group rebuilds the tensor over NVLink. */
    guint streams[b->ts];
    guint64 pos[b->ts];
    for (guint i = 0; i < b->ts; i++) {
      streams[i] = ptdp_stream_of(b, i, ds_, k, SIM_STREAM_PP_RECV);
      pos[i] = 2ull * didx + 1;
    }
    t.category = SIM_CAT_PP_GATHER;
    if (b->flow)
      gather = sim_ptdp_net_op(b, sim_ptdp_tp_plan(b, ds_, k, NET_OP_ALLGATHER, full), streams, pos, b->ts, &t);
    else {
      double ag = model_collective_time_s(&b->net, MODEL_COLL_ALLGATHER, full, pl->tp,
                                          sim_ptdp_tp_group_nodes(b, ds_, k), NULL);
      gather = sim_engine_add_op_at(b->e, ptdp_ns(ag), streams, pos, b->ts, &t);
    }
    for (guint i = 0; i < b->ts; i++) {
      sim_engine_add_dep(b->e, xfer[i], gather);
      sim_engine_add_dep(b->e, gather, dst[i].first);
    }
    sim_ptdp_account(b, SIM_CAT_PP_GATHER, full * (pl->tp - 1) * ((double)pl->dp / b->ds) * b->cp);
  } else
    for (guint i = 0; i < b->ts; i++)
      sim_engine_add_dep(b->e, xfer[i], dst[i].first);
  /* DualPipe's F&B: the backward's input holds up the forward paired with it */
  if (!it.forward && didx > 0 && g_array_index(b->order[ds_], SimItem, didx - 1).paired) {
    const PtdpItemOps *pair = &b->items[((k * b->p + ds_) * b->n_items + didx - 1) * b->ts];
    for (guint i = 0; i < b->ts; i++)
      sim_engine_add_dep(b->e, sg ? gather : xfer[i], pair[i].first);
  }
}

/* --- data-parallel gradient all-reduce and the optimizer --- */

/* Nodes spanned by a group of stage s: the tensor-parallel group of replica
 * `fixed` (over_tp) or the data-parallel group of tensor rank `fixed`.  Its
 * ranks increase along the group, so their nodes never decrease: one more
 * node at every change. */
guint sim_ptdp_group_nodes(const PtdpBuild *b, guint s, guint fixed, gboolean over_tp) {
  guint n = over_tp ? b->plan->tp : b->dpc, count = 0, last = G_MAXUINT;
  for (guint j = 0; j < n; j++) {
    guint gpu =
        over_tp ? ptdp_gpu_of_job_rank(b, j, 0, s, fixed) : ptdp_gpu_of_job_rank(b, fixed, j % b->cp, s, j / b->cp);
    guint node = gpu / b->cluster->gpus_per_node;
    count += node != last;
    last = node;
  }
  return count;
}

guint sim_ptdp_tp_group_nodes(const PtdpBuild *b, guint s, guint k) {
  return sim_ptdp_group_nodes(b, s, ptdp_job_replica(b, k), TRUE);
}

/* Which data-parallel ranks a collective spans: all d x cp; FSDP2's shard
 * group (the first `shard` of them, consecutive as torchtitan's mesh puts
 * dp_shard inside dp_replicate); or one rank of each of the R replicas
 * (DP_ALL, DP_SHARD, DP_REPLICAS). */
static guint dp_group_rank(const PtdpBuild *b, guint group, guint j) {
  return group == DP_REPLICAS ? j * b->shard : j;
}

static guint dp_group_size(const PtdpBuild *b, guint group) {
  return group == DP_ALL ? b->dpc : group == DP_SHARD ? b->shard : b->dpc / b->shard;
}

static guint dp_collective_g(PtdpBuild *b, NetCollOp kind, guint group, guint i, guint s, double bytes,
                             const guint *deps, guint n_deps, const SimOpTag *t) {
  guint n = dp_group_size(b, group);
  guint nodes = 0, last = G_MAXUINT;
  for (guint j = 0; j < n; j++) { /* ranks increase along the group: one more node at every change */
    guint r = dp_group_rank(b, group, j);
    guint node = ptdp_gpu_of_job_rank(b, i, r % b->cp, s, r / b->cp) / b->cluster->gpus_per_node;
    nodes += node != last;
    last = node;
  }
  guint streams[b->ds];
  for (guint k = 0; k < b->ds; k++)
    streams[k] = ptdp_stream_of(b, i, s, k, SIM_STREAM_DP);
  guint op;
  if (b->flow) {
    char key[64];
    if (kind == NET_OP_ALLREDUCE && group == DP_ALL) /* the key every all-reduce plan had */
      g_snprintf(key, sizeof key, "dp:%u:%u:%.0f", s, i, bytes);
    else if (group == DP_ALL)
      g_snprintf(key, sizeof key, "dp%d:%u:%u:%.0f", (int)kind, s, i, bytes);
    else
      g_snprintf(key, sizeof key, "dp%d:g%u:%u:%u:%.0f", (int)kind, group, s, i, bytes);
    guint gpus[n];
    for (guint j = 0; j < n; j++) {
      guint r = dp_group_rank(b, group, j);
      gpus[j] = ptdp_gpu_of_job_rank(b, i, r % b->cp, s, r / b->cp);
    }
    /* the other groups run the same collective at once on their own GPUs */
    double copies_g = ptdp_copies(b, TRUE, FALSE) * ((double)b->dpc / n);
    op = sim_ptdp_net_op(b, sim_ptdp_coll_plan(b, key, kind, gpus, n, copies_g, bytes, b->flow->side_dp), streams, NULL,
                         b->ds, t);
  } else {
    ModelCollOp coll = kind == NET_OP_REDUCESCATTER ? MODEL_COLL_REDUCESCATTER
                     : kind == NET_OP_ALLGATHER   ? MODEL_COLL_ALLGATHER
                                                  : MODEL_COLL_ALLREDUCE;
    ModelNet net = b->net;
    if (nodes > 1 && b->plan->stragglers.n_link) { /* a ring runs at its slowest NIC (--slow-link) */
      double f = 1;
      for (guint j = 0; j < n; j++) { /* rank i stands for tensor ranks whose NICs are alike */
        guint r = dp_group_rank(b, group, j);
        f = MIN(f, sim_ptdp_nic_factor(b, ptdp_gpu_of_job_rank(b, i, r % b->cp, s, r / b->cp)));
      }
      net.hw.nic_bw *= f;
    }
    double secs = model_collective_time_s(&net, coll, bytes, n, nodes, NULL);
    op = sim_engine_add_op(b->e, ptdp_ns(secs), streams, b->ds, t);
  }
  for (guint j = 0; j < n_deps; j++)
    if (deps[j] != G_MAXUINT)
      sim_engine_add_dep(b->e, deps[j], op);
  return op;
}

/* A data-parallel collective (all-reduce; reduce-scatter of gradients or
 * all-gather of parameters for the distributed optimizer) over the d
 * replicas of rank i of stage s, after `deps`; with context parallelism
 * over the d x cp ranks that hold the same parameters (Megatron-Core's
 * data-parallel group with context parallelism). */
/* The speed factor of the NIC cluster GPU g sends through (--slow-link):
 * its own, or half when its rail or the one before is down (two rails then
 * share a NIC). */
double sim_ptdp_nic_factor(const PtdpBuild *b, guint g) {
  guint gpn = b->cluster->gpus_per_node, nics = MAX(b->cluster->net.nics_per_node, 1u);
  guint rail = topo_gpu_nic(g % gpn, gpn, nics);
  double x = sim_plan_nic_factor(b->plan, g / gpn, rail),
         prev = sim_plan_nic_factor(b->plan, g / gpn, (rail + nics - 1) % nics);
  return x <= 0 || prev <= 0 ? 0.5 : x;
}

/* The slowest NIC of the tensor-parallel group of simulated replica k on
 * stage s (its class's replicas have the same NICs' factors). */
double sim_ptdp_tp_link_factor(const PtdpBuild *b, guint s, guint k) {
  double f = 1;
  for (guint i = 0; i < b->plan->tp; i++)
    f = MIN(f, sim_ptdp_nic_factor(b, ptdp_gpu_of_rank(b, i, s, k)));
  return f;
}

static guint dp_collective(PtdpBuild *b, NetCollOp kind, guint i, guint s, double bytes, const guint *deps,
                           guint n_deps, const SimOpTag *t) {
  return dp_collective_g(b, kind, DP_ALL, i, s, bytes, deps, n_deps, t);
}

/* --overlap-param-gather (Megatron-Core's distributed optimizer): the
 * updated parameters of the last step are all-gathered bucket by bucket as
 * the next forward reaches them, not after the step.  An iteration here
 * starts with those all-gathers, one per layer in forward order on each
 * stage's data-parallel stream (the stage's embedding and logit parameters
 * with its first layer in forward order, whichever chunk holds it), and a
 * layer's first forward waits for its own. */
void sim_ptdp_emit_param_gathers(PtdpBuild *b) {
  const SimPlan *pl = b->plan;
  b->param_gather = g_new(guint, (gsize)b->p * b->v * b->lmax * b->ts);
  guint64 layer_params = model_layer_local_params(&pl->model, pl->tp);
  for (guint s = 0; s < b->p; s++) {
    guint64 extra = model_stage_params(&pl->model, pl->tp, b->p, s, ptdp_stage_layers(b, s)) -
                    layer_params * ptdp_stage_layers(b, s);
    for (guint i = 0; i < b->ts; i++) {
      gboolean first = TRUE;
      for (guint c = 0; c < b->v; c++)
        for (guint l = 0; l < ptdp_chunk_layers(b, s, c); l++) {
          SimOpTag t = ptdp_tag(SIM_CAT_DP, SIM_PASS_OTHER, s, c, 0, (gint)(ptdp_chunk_first(b, s, c) + l));
          double params = (double)layer_params + (first ? (double)extra : 0);
          first = FALSE;
          b->param_gather[((s * b->v + c) * b->lmax + l) * b->ts + i] =
              dp_collective(b, NET_OP_ALLGATHER, i, s, 2.0 * params, NULL, 0, &t);
        }
    }
  }
}

/* MoE: the expert gradients' collective over the expert-data-parallel
 * group of the simulated rank (every such group of the stage at once on
 * the flows), on its data-parallel stream after `deps`. */
static guint edp_collective(PtdpBuild *b, NetCollOp kind, guint s, double bytes, const guint *deps, guint n_deps,
                            const SimOpTag *t) {
  const SimPlan *pl = b->plan;
  guint stage = pl->tp * b->cp * pl->dp, n = pl->edp, groups = stage / n, G = b->cluster->gpus_per_node;
  guint *gpus = g_new(guint, stage), ranks[n];
  for (guint g = 0; g < groups; g++) {
    sim_moe_edp_ranks(pl, s, g, ranks); /* local ranks 0 .. etp ep - 1 lead the groups */
    for (guint q = 0; q < n; q++)
      gpus[g * n + q] = sim_place(b->cluster, pl->tp * b->cp, ranks[q]);
  }
  guint stream = ptdp_stream_of(b, 0, s, 0, SIM_STREAM_DP), op;
  if (b->flow) {
    char key[64];
    g_snprintf(key, sizeof key, "edp%d:%u:%.0f", (int)kind, s, bytes);
    op = sim_ptdp_net_op(b,
                         sim_netops_coll_groups(b->flow->ops, key, kind, gpus, n, groups, 1.0, bytes, b->flow->side_dp),
                         &stream, NULL, 1, t);
  } else {
    guint nodes = 0, last = G_MAXUINT;
    for (guint q = 0; q < n; q++) {
      nodes += gpus[q] / G != last;
      last = gpus[q] / G;
    }
    ModelCollOp coll = kind == NET_OP_REDUCESCATTER ? MODEL_COLL_REDUCESCATTER
                     : kind == NET_OP_ALLGATHER   ? MODEL_COLL_ALLGATHER
                                                  : MODEL_COLL_ALLREDUCE;
    op = sim_engine_add_op(b->e, ptdp_ns(model_collective_time_s(&b->net, coll, bytes, n, nodes, NULL)), &stream, 1, t);
  }
  g_free(gpus);
  for (guint j = 0; j < n_deps; j++)
    sim_engine_add_dep(b->e, deps[j], op);
  return op;
}

void sim_ptdp_emit_dp_and_optimizer(PtdpBuild *b, guint s, guint *opt_ops) {
  const SimPlan *pl = b->plan;
  guint64 stage_params = model_stage_params(&pl->model, pl->tp, b->p, s, ptdp_stage_layers(b, s));
  guint64 expert_params = 0; /* MoE: the local experts', reduced over their own group */
  if (b->moe_layer)
    stage_params = sim_moe_stage_params(pl, s, &expert_params, NULL) - expert_params;
  guint64 layer_params = model_layer_local_params(&pl->model, pl->tp);
  guint64 extra_params = stage_params - layer_params * ptdp_stage_layers(b, s);
  SimOpTag t = ptdp_tag(SIM_CAT_DP, SIM_PASS_OTHER, s, 0, 0, -1);
  double grad_bytes = 2.0; /* fp16 gradients */
  /* Megatron's distributed optimizer reduce-scatters the gradients instead
   * of all-reducing them, steps on its 1/d shard, and all-gathers the
   * updated fp16 parameters. */
  gboolean fsdp = pl->fsdp && b->dpc > 1;
  gboolean dist = (pl->distributed_optimizer || fsdp) && b->dpc > 1;
  NetCollOp grad_coll = dist ? NET_OP_REDUCESCATTER : NET_OP_ALLREDUCE;
  for (guint i = 0; i < b->ts; i++) {
    GArray *mine = g_array_new(FALSE, FALSE, sizeof(guint)); /* ops the optimizer waits for */
    guint lasts[b->ds];
    for (guint k = 0; k < b->ds; k++)
      lasts[k] = b->items[((k * b->p + s) * b->n_items + b->len[s] - 1) * b->ts + i].last;
    if (fsdp) {
      /* the blocks' reductions, issued with their backward; the root's
       * (embedding, final norm, logits) after the stage's last backward */
      GArray *rs = b->fsdp_rs[s * b->ts + i];
      if (extra_params)
        sim_ptdp_fsdp_reduce(b, s, 0, 0, -1, (double)extra_params, i, lasts[0]);
      g_array_append_vals(mine, rs->data, rs->len);
    } else if (b->dpc > 1) {
      if (pl->ddp == SIM_DDP_TORCH) {
        /* torch DDP: a bucket per layer, all-reduced as soon as the last
         * microbatch's backward has produced it, in backward order. */
        for (guint c = b->v; c-- > 0;)
          for (guint l = ptdp_chunk_layers(b, s, c); l-- > 0;) {
            guint deps[b->ds];
            for (guint k = 0; k < b->ds; k++)
              deps[k] = b->grad_ready[(((k * b->p + s) * b->v + c) * b->lmax + l) * b->ts + i];
            t.layer = (gint32)(ptdp_chunk_first(b, s, c) + l);
            guint op = dp_collective(b, grad_coll, i, s, grad_bytes * layer_params, deps, b->ds, &t);
            g_array_append_val(mine, op);
          }
        t.layer = -1;
        if (extra_params) {
          guint op = dp_collective(b, grad_coll, i, s, grad_bytes * extra_params, lasts, b->ds, &t);
          g_array_append_val(mine, op);
        }
      } else {
        /* Megatron's local DDP: one all-reduce of the whole gradient buffer
         * after the pipeline flush. */
        guint op = dp_collective(b, grad_coll, i, s, grad_bytes * stage_params, lasts, b->ds, &t);
        g_array_append_val(mine, op);
      }
      b->counts.bytes[SIM_CAT_DP] += grad_bytes * stage_params * 2.0 * (b->dpc - 1) * ((double)pl->tp / b->ts);
    }
    if (expert_params && pl->edp > 1) {
      NetCollOp kind = pl->distributed_optimizer ? NET_OP_REDUCESCATTER : NET_OP_ALLREDUCE;
      guint op = edp_collective(b, kind, s, grad_bytes * expert_params, lasts, b->ds, &t);
      g_array_append_val(mine, op);
      b->counts.bytes[SIM_CAT_DP] +=
          grad_bytes * expert_params * 2.0 * (pl->edp - 1) * ((double)pl->tp * b->cp * pl->dp / pl->edp);
    }
    for (guint k = 0; k < b->ds; k++)
      g_array_append_val(mine, lasts[k]);
    /* Tied word embeddings: the first and last stage all-reduce their copies'
     * gradients (Megatron's allreduce of word_embeddings grads). */
    guint s0, c0, sl, cl; /* the stages of the embedding and the logit layer: the V's stage 0 holds both */
    sim_plan_place(pl, 0, 0, &s0, &c0);
    sim_plan_place(pl, b->route - 1, 0, &sl, &cl);
    if (b->p > 1 && !pl->model.untied && (s == 0 || s == b->p - 1) && s0 != sl) {
      SimOpTag et = ptdp_tag(SIM_CAT_DP, SIM_PASS_OTHER, s, 0, 0, -2);
      double bytes = grad_bytes * (double)pl->model.vocab * pl->model.hidden / pl->tp;
      for (guint k = 0; k < b->ds; k++) {
        if (s == 0) {
          guint streams[2] = {ptdp_stream_of(b, i, 0, k, SIM_STREAM_DP),
                              ptdp_stream_of(b, i, b->p - 1, k, SIM_STREAM_DP)};
          gboolean same = ptdp_node_of_rank(b, i, 0, k) == ptdp_node_of_rank(b, i, b->p - 1, k);
          guint op;
          if (b->flow) {
            char key[64];
            g_snprintf(key, sizeof key, "emb:%u:%u", i, ptdp_job_replica(b, k));
            guint gpus[2] = {ptdp_gpu_of_rank(b, i, 0, k), ptdp_gpu_of_rank(b, i, b->p - 1, k)};
            op = sim_ptdp_net_op(
                b, sim_ptdp_coll_plan(b, key, NET_OP_ALLREDUCE, gpus, 2, ptdp_copies_c(b, TRUE, TRUE), bytes, NULL),
                streams, NULL, 2, &et);
          } else {
            double secs =
                model_collective_time_s(&b->net, MODEL_COLL_ALLREDUCE, bytes, 2, same ? 1 : 2, NULL);
            op = sim_engine_add_op(b->e, ptdp_ns(secs), streams, 2, &et);
          }
          sim_engine_add_dep(b->e, b->items[((k * b->p + 0) * b->n_items + b->len[0] - 1) * b->ts + i].last, op);
          sim_engine_add_dep(
              b->e, b->items[((k * b->p + b->p - 1) * b->n_items + b->len[b->p - 1] - 1) * b->ts + i].last, op);
          /* the last stage's optimizer waits for it too */
          opt_ops[(k * b->p + 0) * b->ts + i] = op;
          opt_ops[(k * b->p + b->p - 1) * b->ts + i] = op;
        }
      }
      if (s == 0) {
        b->counts.bytes[SIM_CAT_DP] += bytes * 2.0 * pl->dp * ((double)pl->tp / b->ts) * b->cp;
        b->counts.bytes_embedding += bytes * 2.0 * pl->dp * ((double)pl->tp / b->ts) * b->cp;
      }
    }
    /* the step: on the whole stage, or on its 1/d shard (rounded up);
     * FSDP2's on its shard group's; MoE: the experts' on their 1/edp shard */
    guint64 stepped = dist ? (stage_params + b->shard - 1) / b->shard : stage_params;
    if (expert_params)
      stepped += pl->distributed_optimizer ? (expert_params + pl->edp - 1) / pl->edp : expert_params;
    guint steps[b->ds];
    for (guint k = 0; k < b->ds; k++) {
      guint op = sim_engine_add_op1(b->e, ptdp_ns(model_optimizer_time_s(b->profile, stepped)),
                                    ptdp_stream_of(b, i, s, k, SIM_STREAM_COMPUTE),
                                    &(SimOpTag){SIM_CAT_OPTIMIZER, SIM_PASS_OTHER, (gint32)s, 0, 0, -1});
      for (guint j = 0; j < mine->len; j++)
        sim_engine_add_dep(b->e, g_array_index(mine, guint, j), op);
      /* remember the optimizer op so the embedding all-reduce can gate it */
      guint slot = (k * b->p + s) * b->ts + i;
      if (opt_ops[slot] != G_MAXUINT)
        sim_engine_add_dep(b->e, opt_ops[slot], op);
      steps[k] = op;
    }
    if (dist && !pl->overlap_param_gather && !fsdp) /* every replica's updated shard, gathered back whole */
      dp_collective(b, NET_OP_ALLGATHER, i, s, 2.0 * stage_params, steps, b->ds, &t);
    if (expert_params && pl->edp > 1 && pl->distributed_optimizer)
      edp_collective(b, NET_OP_ALLGATHER, s, 2.0 * expert_params, steps, b->ds, &t);
    g_array_free(mine, TRUE);
  }
}
