/* ptdsim — MoE folding and validation (see moe.h). */
#include "moe.h"
#include "route.h"

#include <string.h>

#include "../models/layer.h"

#define FAIL(...)                                                                                                      \
  do {                                                                                                                 \
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, __VA_ARGS__);                                           \
    return FALSE;                                                                                                      \
  } while (0)

gboolean sim_moe_build(const SimPlanRequest *r, SimPlan *plan, GError **error) {
  const ModelShape *m = &plan->model;
  guint cp = sim_plan_cp(plan), stage = plan->tp * cp * plan->dp;
  plan->ep = 1;
  plan->etp = 1;
  plan->edp = stage;
  plan->moe_imbalance = 1;
  plan->moe_capacity = 0;
  plan->moe_dispatcher = SIM_DISPATCH_ALLTOALL;
  plan->moe_a2a_overlap = FALSE;
  plan->moe_groups = plan->moe_group_topk = 0;
  if (!model_is_moe(m)) {
    if (r->ep || r->expert_tp || r->moe_imbalance || r->moe_capacity || r->moe_dispatcher_given || r->moe_groups ||
        r->moe_group_topk || r->moe_a2a_overlap)
      FAIL("--%s is about mixture-of-experts layers, but the model is dense; give --num-experts or an MoE --model "
           "(see ptdsim models)",
           r->ep                     ? "ep"
           : r->expert_tp            ? "expert-tp"
           : r->moe_imbalance        ? "moe-imbalance"
           : r->moe_capacity         ? "moe-expert-capacity-factor"
           : r->moe_dispatcher_given ? "moe-token-dispatcher"
           : r->moe_groups           ? "moe-router-num-groups"
           : r->moe_group_topk       ? "moe-router-group-topk"
                                     : "overlap-moe-expert-parallel-comm");
    return TRUE;
  }
  if (m->topk < 1 || m->topk > m->experts)
    FAIL("--moe-router-topk %u must be from 1 to the %u experts", m->topk, m->experts);
  guint moe_layers = 0;
  for (guint l = 0; l < m->layers; l++)
    moe_layers += model_layer_is_moe(m, l);
  if (moe_layers == 0)
    FAIL("--moe-first-dense-layers %u and --moe-layer-freq %u leave none of the %u layers an MoE layer; give fewer "
         "dense layers (below %u) or a smaller frequency",
         m->first_dense, MAX(m->moe_freq, 1u), m->layers, m->layers);
  guint ep = r->ep ? r->ep : 1, etp = r->expert_tp ? r->expert_tp : plan->tp;
  if (m->experts % ep)
    FAIL("--ep %u does not divide the %u experts of an MoE layer; use a divisor of %u", ep, m->experts, m->experts);
  if (model_moe_ffn(m) % etp)
    FAIL("--expert-tp %u does not divide the experts' hidden size %u; use a divisor of it", etp, model_moe_ffn(m));
  if (stage % ((guint64)ep * etp))
    FAIL("--expert-tp %u x --ep %u = %u does not divide the %u GPUs of a pipeline stage (t x cp x d = %u x %u x %u); "
         "expert-tp x ep x expert-dp must equal t x cp x d: pick ep and expert-tp whose product divides %u",
         etp, ep, etp * ep, stage, plan->tp, cp, plan->dp, stage);
  if (plan->zero)
    FAIL("MoE layers are modelled under PTD-P (Megatron-Core), not ZeRO; drop --zero (use --distributed-optimizer)");
  if (plan->schedule == SIM_SCHEDULE_TERAPIPE)
    FAIL("MoE layers are not modelled with TeraPipe's token slices; use --schedule 1f1b or interleaved");
  if (plan->tp > 1 && !plan->sequence_parallel)
    FAIL("MoE with --tp %u needs --sequence-parallel, as Megatron-Core requires (each rank routes its own s/t "
         "tokens); add it",
         plan->tp);
  if (cp > 1)
    FAIL("MoE layers with --cp are not modelled (the experts' tokens would be folded over cp too); drop --cp");
  if (plan->tp_comm_overlap)
    FAIL("--tp-comm-overlap is not modelled for MoE layers; drop it");
  if (plan->placement != SIM_PLACEMENT_TP_DP_PP)
    FAIL("MoE layers follow Megatron-Core's rank order (tp-cp-ep-dp-pp); drop --placement");
  if (plan->ddp == SIM_DDP_TORCH)
    FAIL("--ddp torch is not modelled with MoE layers (their expert gradients have their own group); use --ddp "
         "local");
  if (!plan->symmetry)
    FAIL("MoE layers are simulated one GPU per stage (the symmetry shortcut); drop --no-symmetry");
  if (plan->workload != SIM_WORKLOAD_GPT)
    FAIL("--workload layers is TeraPipe's benchmark; drop it for an MoE model");
  /* group-limited routing: Megatron-Core's TransformerConfig checks
   * (transformer_config.py: both given, the groups dividing the experts,
   * group_topk <= num_groups) and what top-k needs of the chosen groups */
  if (r->moe_group_topk && !r->moe_groups)
    FAIL("--moe-router-group-topk %u needs --moe-router-num-groups (the groups the experts are dealt in); give both",
         r->moe_group_topk);
  if (r->moe_groups) {
    if (!r->moe_group_topk)
      FAIL("--moe-router-num-groups %u needs --moe-router-group-topk (the groups each token may use); give both",
           r->moe_groups);
    if (m->experts % r->moe_groups)
      FAIL("--moe-router-num-groups %u does not divide the %u experts; use a divisor of %u", r->moe_groups,
           m->experts, m->experts);
    if (r->moe_group_topk > r->moe_groups)
      FAIL("--moe-router-group-topk %u is more than the %u groups of --moe-router-num-groups; use at most %u",
           r->moe_group_topk, r->moe_groups, r->moe_groups);
    if ((guint64)r->moe_group_topk * (m->experts / r->moe_groups) < m->topk)
      FAIL("--moe-router-group-topk %u groups of %u experts hold fewer than the %u experts each token picks "
           "(--moe-router-topk); choose more groups per token",
           r->moe_group_topk, m->experts / r->moe_groups, m->topk);
  }
  gboolean deepep = r->moe_dispatcher_given && r->moe_dispatcher == SIM_DISPATCH_DEEPEP;
  if (deepep && etp > 1)
    FAIL("--moe-token-dispatcher deepep is modelled over the expert-parallel group alone, not with --expert-tp %u; "
         "give --expert-tp 1 (or use alltoall)",
         etp);
  plan->ep = ep;
  plan->etp = etp;
  plan->edp = stage / (ep * etp);
  plan->moe_imbalance = r->moe_imbalance ? r->moe_imbalance : 1;
  plan->moe_capacity = r->moe_capacity;
  plan->moe_dispatcher = r->moe_dispatcher_given ? r->moe_dispatcher : SIM_DISPATCH_ALLTOALL;
  plan->moe_groups = r->moe_groups;
  plan->moe_group_topk = r->moe_groups ? r->moe_group_topk : 0;
  if (r->moe_a2a_overlap) {
    /* Megatron-Core's rules for it (transformer_config.py) */
    if (ep < 2)
      FAIL("--overlap-moe-expert-parallel-comm overlaps the expert-parallel all-to-all, and --ep is 1; give --ep > 1");
    if (plan->moe_dispatcher == SIM_DISPATCH_ALLGATHER)
      FAIL("--overlap-moe-expert-parallel-comm runs with the alltoall or deepep dispatcher (Megatron-Core's alltoall "
           "and flex); drop --moe-token-dispatcher allgather");
    if (plan->recompute)
      FAIL("--overlap-moe-expert-parallel-comm cannot run with full recomputation (Megatron-Core refuses it); use "
           "--recompute selective or none");
    if (plan->pp > 1 ? plan->schedule != SIM_SCHEDULE_INTERLEAVED : plan->schedule != SIM_SCHEDULE_1F1B)
      FAIL("--overlap-moe-expert-parallel-comm pairs the 1F1B steady state's passes: with --pp > 1 it needs "
           "--schedule interleaved (virtual stages, as Megatron-Core requires), with --pp 1 the default 1f1b");
    plan->moe_a2a_overlap = TRUE;
  }
  return TRUE;
}

/* The job rank of stage-local rank `local` of stage s (Megatron's order:
 * stages outermost). */
static guint job_rank(const SimPlan *pl, guint s, guint local) {
  return local + pl->tp * sim_plan_cp(pl) * pl->dp * s;
}

void sim_moe_ep_ranks(const SimPlan *pl, guint s, guint local, guint *out) {
  guint e = local % pl->etp, q = local / (pl->etp * pl->ep);
  for (guint j = 0; j < pl->ep; j++)
    out[j] = job_rank(pl, s, e + pl->etp * (j + pl->ep * q));
}

void sim_moe_etp_ranks(const SimPlan *pl, guint s, guint local, guint *out) {
  guint base = local - local % pl->etp;
  for (guint e = 0; e < pl->etp; e++)
    out[e] = job_rank(pl, s, base + e);
}

void sim_moe_edp_ranks(const SimPlan *pl, guint s, guint local, guint *out) {
  guint inner = local % (pl->etp * pl->ep);
  for (guint q = 0; q < pl->edp; q++)
    out[q] = job_rank(pl, s, inner + pl->etp * pl->ep * q);
}

guint64 sim_moe_stage_params(const SimPlan *pl, guint s, guint64 *experts, guint *moe_layers) {
  const ModelShape *m = &pl->model;
  guint v = pl->chunks ? pl->chunks : 1, layers = sim_plan_stage_layers(pl, s), moe = 0;
  for (guint c = 0; c < v && model_is_moe(m); c++) {
    guint first = sim_plan_chunk_first_layer(pl, s, c), n = sim_plan_chunk_layers(pl, s, c);
    for (guint l = 0; l < n; l++)
      moe += model_layer_is_moe(m, first + l);
  }
  guint64 n = model_stage_params(m, pl->tp, pl->pp, s, layers);
  ModelLinears lin = model_layer_linears(m);
  guint64 dense_mlp = lin.up / pl->tp + (lin.down - lin.row_bias) / pl->tp + lin.row_bias;
  guint64 moe_local = model_moe_local_params(m, pl->tp, pl->ep, pl->etp);
  *experts = (guint64)moe * model_moe_local_expert_params(m, pl->ep, pl->etp);
  if (moe_layers)
    *moe_layers = moe;
  n = n - (guint64)moe * dense_mlp + (guint64)moe * moe_local;
  /* the MTP modules, where the virtual stage that runs them is (the
   * route's last, or a layout's; DualPipe's two directions each keep a
   * copy): an MoE layer, the 2h -> h projection split over t, three norms */
  guint mtp = 0;
  for (guint c = 0; c < v; c++)
    mtp += sim_plan_chunk_mtp(pl, s, c);
  if (mtp && model_layer_is_moe(m, m->layers - 1)) {
    n += mtp * (model_layer_local_params(m, pl->tp) - dense_mlp + moe_local + 2ull * m->hidden * m->hidden / pl->tp +
                3 * model_norm_params(m));
    *experts += mtp * model_moe_local_expert_params(m, pl->ep, pl->etp);
  }
  return n;
}

double sim_moe_deepep_contention(const SimPlan *pl, const ModelProfile *profile, const TopoCluster *cluster,
                                 guint nodes) {
  const TopoNet *net = &cluster->net;
  if (pl->no_contention)
    return 1;
  double rate = nodes > 1 ? net->nic_bw * net->nics_per_node / net->gpus_per_node : net->nvlink_busbw;
  return sim_plan_contention_at(pl, profile, pl->tp, SIM_DEEPEP_SMS, rate);
}

ModelMoeOptions sim_moe_options(const SimPlan *pl, const ModelProfile *profile) {
  return (ModelMoeOptions){.t = pl->tp,
                           .cp = sim_plan_cp(pl),
                           .ep = pl->ep,
                           .etp = pl->etp,
                           .b = pl->micro_batch,
                           .imbalance = pl->moe_imbalance,
                           .capacity = pl->moe_capacity,
                           .dispatcher = pl->moe_dispatcher == SIM_DISPATCH_ALLGATHER ? MODEL_MOE_ALLGATHER
                                         : pl->moe_dispatcher == SIM_DISPATCH_DEEPEP  ? MODEL_MOE_DEEPEP
                                                                                      : MODEL_MOE_ALLTOALL,
                           .groups = pl->moe_groups,
                           .group_topk = pl->moe_group_topk,
                           .fp8 = sim_plan_precision(pl, profile) == MODEL_PRECISION_FP8};
}

