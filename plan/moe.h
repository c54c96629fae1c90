/* ptdsim — mixture of experts in a PTD-P plan: Megatron-Core's parallel
 * folding (megatron/core/parallel_state.py, initialize_model_parallel: one
 * rank generator for the attention layers over tp-cp-dp-pp, one for the
 * experts over etp-ep-edp-pp on the same GPUs, the pipeline groups equal),
 * its validation, and the options of the MoE layer's cost.
 *
 * Within pipeline stage s the attention ranks are r = i + t c + t cp k
 * (tensor rank i, context rank c, replica k); the MoE layers read the same
 * r as r = e + etp (j + ep q): expert-tensor rank e, expert-parallel rank j,
 * expert-data-parallel replica q.  The expert-parallel group of a rank is
 * the ep ranks with its e and q; the expert-data-parallel group (the
 * experts' gradients and, with the distributed optimizer, their optimizer
 * state) the edp ranks with its e and j. */
#pragma once

#include "../models/moe.h"
#include "plan.h"

/* Checks and fills the plan's MoE fields (dense models: ep = etp = 1, edp =
 * t cp d).  Errors are one line saying what is wrong and how to fix it. */
gboolean sim_moe_build(const SimPlanRequest *r, SimPlan *plan, GError **error);
/* The job ranks of the expert-parallel group of stage-local rank `local` of
 * stage s (ep entries, in ep order), and of its expert-tensor group (etp). */
void sim_moe_ep_ranks(const SimPlan *plan, guint s, guint local, guint *out);
void sim_moe_etp_ranks(const SimPlan *plan, guint s, guint local, guint *out);
/* The expert-data-parallel group (edp entries). */
void sim_moe_edp_ranks(const SimPlan *plan, guint s, guint local, guint *out);
/* The parameters one GPU of stage s holds (the stage's dense parameters
 * over t as model_stage_params counts them, with each MoE layer's MLP
 * replaced by its local experts, shared experts and router), and in
 * `experts` the part that is its local experts (what its expert-data-
 * parallel group shares); the stage's MoE layers in `moe_layers`. */
guint64 sim_moe_stage_params(const SimPlan *plan, guint s, guint64 *experts, guint *moe_layers);
/* The SMs DeepEP's dispatch and combine kernels hold: Megatron-Core's
 * default for them (transformer_config.py, moe_deepep_num_sms: 20), the
 * number the DeepSeek-V3 report (section 3.2.2) finds enough to fill
 * InfiniBand and NVLink on H800s. */
#define SIM_DEEPEP_SMS 20
/* How much longer compute takes beside DeepEP's kernels, which hold
 * SIM_DEEPEP_SMS SMs and move the tokens through HBM at the rate of the
 * GPU's share of its node's NICs (nodes > 1) or of NVLink
 * (model_layer_contention, as sim_plan_contention prices NCCL's); 1 with
 * no_contention. */
double sim_moe_deepep_contention(const SimPlan *plan, const ModelProfile *profile, const TopoCluster *cluster,
                                 guint nodes);
/* The options of the plan's MoE layer cost on `profile` (FP8 where the
 * plan's precision on it is). */
ModelMoeOptions sim_moe_options(const SimPlan *plan, const ModelProfile *profile);
