/* ptdsim — a mixture-of-experts layer's pass on a stage: the router, the
 * tokens' dispatch and combine over the expert-parallel group (all-to-all or
 * all-gather), the experts' GEMMs (build.h).  It calls emit.c alone. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"

/* --- the MoE layer's token communication (plan/moe.h) --- */

/* The GPUs of the groups of stage s that one MoE collective runs on: every
 * expert-parallel group of the stage (PTDP_MOE_DISPATCH, PTDP_MOE_COMBINE) or every
 * expert-tensor group, all at once, as the stage's ranks run them
 * together; group after group in out (ep or etp each).  Returns the
 * groups. */
static guint moe_groups(const PtdpBuild *b, guint s, guint kind, guint *out) {
  const SimPlan *pl = b->plan;
  guint stage = pl->tp * b->cp * pl->dp, n = kind <= PTDP_MOE_COMBINE ? pl->ep : pl->etp, groups = 0;
  guint ranks[MAX(pl->ep, pl->etp)];
  for (guint local = 0; local < stage; local++) {
    gboolean leader = kind <= PTDP_MOE_COMBINE ? (local / pl->etp) % pl->ep == 0 : local % pl->etp == 0;
    if (!leader)
      continue;
    if (kind <= PTDP_MOE_COMBINE)
      sim_moe_ep_ranks(pl, s, local, ranks);
    else
      sim_moe_etp_ranks(pl, s, local, ranks);
    for (guint j = 0; j < n; j++)
      out[groups * n + j] = sim_place(b->cluster, pl->tp * b->cp, ranks[j]);
    groups++;
  }
  return groups;
}

static NetCollOp moe_op(const PtdpBuild *b, guint kind) {
  if (kind >= PTDP_MOE_ETP_GATHER)
    return kind == PTDP_MOE_ETP_GATHER ? NET_OP_ALLGATHER : NET_OP_REDUCESCATTER;
  if (b->plan->moe_dispatcher == SIM_DISPATCH_ALLGATHER)
    return kind == PTDP_MOE_DISPATCH ? NET_OP_ALLGATHER : NET_OP_REDUCESCATTER;
  return NET_OP_ALLTOALL;
}

static double moe_bytes(const PtdpBuild *b, guint kind) {
  return kind <= PTDP_MOE_COMBINE ? b->moe.dispatch_bytes : b->moe.etp_bytes;
}

/* DeepEP's dispatch or combine: the bytes per rank across InfiniBand and
 * over NVLink (models/moe.h). */
static gboolean deepep(const PtdpBuild *b, guint kind) {
  return b->plan->moe_dispatcher == SIM_DISPATCH_DEEPEP && kind <= PTDP_MOE_COMBINE;
}

static void deepep_bytes(const PtdpBuild *b, guint kind, double *ib, double *nvl) {
  *ib = kind == PTDP_MOE_DISPATCH ? b->moe.ib_bytes_d : b->moe.ib_bytes_c;
  *nvl = kind == PTDP_MOE_DISPATCH ? b->moe.nvl_bytes_d : b->moe.nvl_bytes_c;
}

/* DeepEP's two exchanges of stage s as one plan: across nodes, each rail's
 * GPUs of an expert-parallel group (one per node) all-to-all, ib bytes
 * leaving each to the N - 1 others; inside each node the group's m GPUs
 * all-to-all, nvl bytes leaving each (net_coll_plan_together: both at
 * once, as DeepEP's kernels forward chunk by chunk).  The groups' GPUs
 * ascend, m of them on each of their N nodes (sim_ptdp_moe_check). */
static guint deepep_plan(PtdpBuild *b, guint s, guint kind, const char *key) {
  const SimPlan *pl = b->plan;
  guint n = pl->ep, nodes = b->moe_ep_nodes, m = n / nodes, *gpus = g_new(guint, (gsize)pl->tp * b->cp * pl->dp);
  guint groups = moe_groups(b, s, kind, gpus);
  guint *rails = g_new(guint, (gsize)groups * n), *inside = g_new(guint, (gsize)groups * n);
  for (guint g = 0; g < groups; g++)
    for (guint i = 0; i < nodes; i++)
      for (guint r = 0; r < m; r++) {
        guint gpu = gpus[g * n + i * m + r];
        rails[(g * m + r) * nodes + i] = gpu; /* group g's rail r: its node-i GPU */
        inside[(g * nodes + i) * m + r] = gpu;
      }
  double ib, nvl;
  deepep_bytes(b, kind, &ib, &nvl);
  /* nccl-tests' size: bytes / n to each of the n ranks, (n - 1)/n leaving */
  guint plan = sim_netops_alltoall_pair(b->flow->ops, key, rails, nodes, groups * m,
                                        nodes > 1 ? ib * nodes / (nodes - 1) : 0, inside, m, groups * nodes,
                                        m > 1 ? nvl * m / (m - 1) : 0, 1.0, NULL);
  g_free(rails);
  g_free(inside);
  g_free(gpus);
  return plan;
}

/* The flow plan of one MoE collective of stage s (every group at once). */
guint sim_ptdp_moe_plan(PtdpBuild *b, guint s, guint kind) {
  guint *cached = &b->moe_plans[s * PTDP_MOE_N_COMM + kind];
  if (*cached != G_MAXUINT)
    return *cached;
  const SimPlan *pl = b->plan;
  char key[64];
  if (deepep(b, kind)) {
    double ib, nvl;
    deepep_bytes(b, kind, &ib, &nvl);
    g_snprintf(key, sizeof key, "deepep%u:%u:%.0f:%.0f", kind, s, ib, nvl);
    return *cached = deepep_plan(b, s, kind, key);
  }
  guint n = kind <= PTDP_MOE_COMBINE ? pl->ep : pl->etp, *gpus = g_new(guint, (gsize)pl->tp * b->cp * pl->dp);
  guint groups = moe_groups(b, s, kind, gpus);
  g_snprintf(key, sizeof key, "moe%u:%u:%.0f", kind, s, moe_bytes(b, kind));
  *cached = sim_netops_coll_groups(b->flow->ops, key, moe_op(b, kind), gpus, n, groups, 1.0, moe_bytes(b, kind), NULL);
  g_free(gpus);
  return *cached;
}

/* Its time on the analytic network: the slowest group's. */
double sim_ptdp_moe_analytic_s(const PtdpBuild *b, guint s, guint kind) {
  const SimPlan *pl = b->plan;
  if (deepep(b, kind)) { /* every group alike (sim_ptdp_moe_check) */
    double ib, nvl;
    deepep_bytes(b, kind, &ib, &nvl);
    return pl->ep > 1 ? model_deepep_time_s(&b->net, ib, nvl, b->moe_ep_nodes) : 0;
  }
  guint n = kind <= PTDP_MOE_COMBINE ? pl->ep : pl->etp, *gpus = g_new(guint, (gsize)pl->tp * b->cp * pl->dp);
  guint groups = moe_groups(b, s, kind, gpus), G = b->cluster->gpus_per_node;
  double worst = 0;
  for (guint g = 0; g < groups; g++) {
    guint nodes = 0, last = G_MAXUINT;
    for (guint j = 0; j < n; j++) { /* a group's ranks increase: one more node at every change */
      nodes += gpus[g * n + j] / G != last;
      last = gpus[g * n + j] / G;
    }
    NetCollOp op = moe_op(b, kind);
    double t = op == NET_OP_ALLTOALL
                   ? model_alltoall_time_s(&b->net, moe_bytes(b, kind), n, nodes)
                   : model_collective_time_s(&b->net, op == NET_OP_ALLGATHER ? MODEL_COLL_ALLGATHER
                                                                              : MODEL_COLL_REDUCESCATTER,
                                             moe_bytes(b, kind), n, nodes, NULL);
    worst = MAX(worst, t);
  }
  g_free(gpus);
  return worst;
}

/* Counts one MoE collective's bytes over every rank of every replica: an
 * all-to-all sends (ep-1)/ep of each rank's buffer, an all-gather or
 * reduce-scatter (n-1)/n of its buffer from each rank. */
static void count_moe(PtdpBuild *b, guint kind) {
  const SimPlan *pl = b->plan;
  if (deepep(b, kind)) { /* what leaves each rank: across InfiniBand and over NVLink */
    double ib, nvl;
    deepep_bytes(b, kind, &ib, &nvl);
    sim_ptdp_account(b, SIM_CAT_EP, (ib + nvl) * pl->tp * b->cp * pl->dp);
    return;
  }
  guint n = kind <= PTDP_MOE_COMBINE ? pl->ep : pl->etp;
  double ranks = (double)pl->tp * b->cp * pl->dp;
  sim_ptdp_account(b, SIM_CAT_EP, moe_bytes(b, kind) * (n - 1) / n * ranks);
}

/* One MoE collective at this point of the chain (as tp_allreduce). */
static void moe_comm(PtdpBuild *b, guint s, guint k, const SimOpTag *t, guint kind) {
  const SimPlan *pl = b->plan;
  if ((kind <= PTDP_MOE_COMBINE ? pl->ep : pl->etp) < 2)
    return;
  sim_ptdp_flush(b, s, k, t, TRUE);
  SimTime dur = b->moe_ns[s * PTDP_MOE_N_COMM + kind];
  count_moe(b, kind);
  if (b->dry) {
    if (b->flow)
      sim_netops_part(b->flow->ops, sim_ptdp_moe_plan(b, s, kind), b->dry_compute + b->dry_tp);
    b->dry_tp += dur;
    b->dry_ops++;
    return;
  }
  sim_ptdp_tp_stream_op(b, s, k, t, b->flow ? sim_ptdp_moe_plan(b, s, kind) : G_MAXUINT, dur);
}

guint sim_ptdp_moe_check(PtdpBuild *b, GError **error) {
  const SimPlan *pl = b->plan;
  guint n = pl->ep, G = b->cluster->gpus_per_node, *gpus = g_new(guint, (gsize)pl->tp * b->cp * pl->dp), nodes = 0;
  gboolean even = TRUE;
  for (guint s = 0; s < b->p && even; s++) {
    guint groups = moe_groups(b, s, PTDP_MOE_DISPATCH, gpus);
    for (guint g = 0; g < groups && even; g++) {
      /* the group's GPUs ascend: a run of them per node */
      guint runs = 0, first = 0, here = 0, last = G_MAXUINT;
      for (guint j = 0; j <= n; j++) {
        if (j == n || gpus[g * n + j] / G != last) {
          if (runs == 1)
            first = here;
          else if (runs > 1)
            even = even && here == first;
          if (j == n)
            break;
          runs++;
          here = 0;
          last = gpus[g * n + j] / G;
        }
        here++;
      }
      even = even && (nodes == 0 || nodes == runs);
      nodes = runs;
    }
  }
  g_free(gpus);
  if (!even) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--moe-token-dispatcher deepep needs each expert-parallel group to hold as many GPUs on every node it "
                "spans (--ep %u on %u-GPU nodes does not); use an --ep that divides or is a multiple of %u",
                n, G, G);
    return 0;
  }
  return nodes;
}

/* An MoE layer's pass (models/moe.h): forward, the attention block, its
 * tensor-parallel collectives, layernorm 2, the router and the permute,
 * the dispatch, the experts, the combine, the unpermute and the closing
 * dropout-add; backward the reverse, the combine's gradient going out as
 * the dispatch did. */
void sim_ptdp_moe_pass(PtdpBuild *b, guint s, guint k, const SimOpTag *t, gboolean backward) {
  const ModelLayerCost *a = &b->moe_attn;
  const ModelMoeCost *m = &b->moe;
  gint l = t->layer;
  guint pass = t->pass;
  if (!backward) {
    sim_ptdp_add_compute(b, SIM_PART_ATTENTION, l, pass, a->fwd.seg_s[0]);
    sim_ptdp_tp_allreduce(b, s, k, t);
    sim_ptdp_add_compute(b, SIM_PART_MLP, l, pass, a->fwd.seg_s[1] + m->fwd_route_s);
    moe_comm(b, s, k, t, PTDP_MOE_DISPATCH);
    moe_comm(b, s, k, t, PTDP_MOE_ETP_GATHER);
    sim_ptdp_add_compute(b, SIM_PART_MLP, l, pass, m->fwd_experts_s);
    moe_comm(b, s, k, t, PTDP_MOE_ETP_SCATTER);
    moe_comm(b, s, k, t, PTDP_MOE_COMBINE);
    sim_ptdp_add_compute(b, SIM_PART_RESIDUAL, l, pass, m->fwd_unpermute_s + a->fwd.seg_s[2]);
    return;
  }
  sim_ptdp_add_compute(b, SIM_PART_MLP, l, pass, a->bwd.seg_s[0] + m->bwd_unpermute_s);
  moe_comm(b, s, k, t, PTDP_MOE_COMBINE);
  moe_comm(b, s, k, t, PTDP_MOE_ETP_GATHER);
  sim_ptdp_add_compute(b, SIM_PART_MLP, l, pass, m->bwd_experts_s);
  moe_comm(b, s, k, t, PTDP_MOE_ETP_SCATTER);
  /* the dispatch's gradient: with DeepEP a combine of 16-bit gradients
   * (FusedDispatch's backward calls buffer.combine), not an FP8 dispatch */
  moe_comm(b, s, k, t, b->plan->moe_dispatcher == SIM_DISPATCH_DEEPEP ? PTDP_MOE_COMBINE : PTDP_MOE_DISPATCH);
  sim_ptdp_add_compute(b, SIM_PART_ATTENTION, l, pass, m->bwd_route_s + a->bwd.seg_s[1]);
  sim_ptdp_tp_allreduce(b, s, k, t);
  sim_ptdp_add_compute(b, SIM_PART_LAYERNORM, l, pass, a->bwd.seg_s[2]);
}

/* An MoE layer's MLP block run again before its backward (Megatron-Core's
 * moe module: moe_layer.py checkpoints the whole forward, its dispatch and
 * combine included): router, permute, dispatch, experts, combine,
 * unpermute, as the forward runs them. */
void sim_ptdp_moe_recompute(PtdpBuild *b, guint s, guint k, const SimOpTag *t) {
  const ModelMoeCost *m = &b->moe;
  sim_ptdp_add_compute(b, SIM_PART_MLP, t->layer, t->pass, m->fwd_route_s);
  moe_comm(b, s, k, t, PTDP_MOE_DISPATCH);
  moe_comm(b, s, k, t, PTDP_MOE_ETP_GATHER);
  sim_ptdp_add_compute(b, SIM_PART_MLP, t->layer, t->pass, m->fwd_experts_s);
  moe_comm(b, s, k, t, PTDP_MOE_ETP_SCATTER);
  moe_comm(b, s, k, t, PTDP_MOE_COMBINE);
  sim_ptdp_add_compute(b, SIM_PART_MLP, t->layer, t->pass, m->fwd_unpermute_s);
}
