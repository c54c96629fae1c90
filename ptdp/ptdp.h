/* ptdsim — PTD-P (Narayanan et al., SC21): a plan's iteration as a task
 * graph on the engine -- tensor, pipeline, data and context parallelism,
 * mixtures of experts, FSDP2 -- under any schedule of schedule/, and what
 * it needs without simulating (memory, pass times, the schedule's CSV).
 * The builder's files share build.h. */
#pragma once

#include "../models/moe.h"
#include "../plan/plan.h"
#include "../taskgraph/timeline.h"

/* One microbatch's compute on one pipeline rank, from the cost model alone
 * (no communication, no overlap): a layer's forward, the input-gradient part
 * of its backward, what recomputation adds to that backward (the forward, or
 * the attention core with selective recomputation), its weight-gradient
 * part; the embedding's and the logit layer's passes (head_b includes
 * head_w, the logit layer's weight gradient); and a layer's tensor-parallel
 * all-reduce buffer.  ZB's heuristics order stages by these, and plan's
 * lower bound adds them up. */
typedef struct {
  double layer_f, layer_b, layer_recompute, layer_w;
  double emb_f, emb_b, head_f, head_b, head_w;
  double tp_allreduce_bytes;
} SimPassTimes;
void sim_ptdp_pass_times(const SimPlan *plan, const ModelProfile *profile, SimPassTimes *t);

/* Simulates one iteration of `plan`; with an observer (NULL: none), which
 * sees the finished timeline (taskgraph/timeline.h). */
gboolean sim_ptdp_run(const SimPlan *plan, const ModelProfile *profile, const TopoCluster *cluster,
                      SimResult *result, GError **error);
gboolean sim_ptdp_run_observed(const SimPlan *plan, const ModelProfile *profile, const TopoCluster *cluster,
                               SimResult *result, SimTimelineFn observe, gpointer data, GError **error);
/* Per-phase effective bandwidth (bisection_bandwidth_GBps.dp): n transfers,
 * transfer i in flight over [start_ns[i], end_ns[i]) in phase phase[i] (one
 * phase per pipeline stage: that stage's data-parallel all-reduces), moving
 * bytes[i] across the cut.  Returns, in bytes/s, the sum over phases of the
 * phase's bytes over the length of the union of its transfers' intervals:
 * the rate the cut carries when the phases run at once (they use disjoint
 * nodes), not diluted by the time between staggered phases.  Phases with no
 * time count nothing. */
double sim_phased_bandwidth(guint n, const int64_t *start_ns, const int64_t *end_ns, const guint *phase,
                            const double *bytes, guint n_phases);
/* FSDP2's parameter, gradient and optimizer state on a GPU of stage s
 * (ptdp/memory.c gives the formulas); out->activations as computed. */
void sim_fsdp_state_memory(const SimPlan *plan, guint s, ModelMemory *out);
/* The memory request's framework and recomputation policy (models/memory.h)
 * for a stage of `stage_layers` layers. */
void sim_ptdp_policy_request(const SimPlan *plan, guint stage_layers, ModelMemoryRequest *req);
/* The time a layer's recomputation takes under --recompute op or modules
 * (ModelPass's shares; 0 for the other policies), and whether the rank's
 * layer `layer` (from 0) is checkpointed whole under --recompute layer
 * (torchtitan's count from 1 a multiple of k). */
double sim_ptdp_policy_recompute_s(const SimPlan *plan, const ModelLayerCost *c);
/* The same for an MoE layer under --recompute modules: its attention
 * block's modules (`attn`) and the MoE block's (models/moe.h): moe the
 * block's whole forward compute (its token communication runs again too,
 * sim_ptdp_moe_recompute), shared_experts their MLP, moe_act the experts'
 * activation kernels. */
double sim_ptdp_policy_recompute_moe_s(const SimPlan *plan, const ModelLayerCost *attn, const ModelMoeCost *moe);
gboolean sim_ptdp_layer_checkpointed(const SimPlan *plan, guint layer);
/* The plan's schedule as a CSV of per-rank actions (sim_schedule_csv_orders),
 * ZB's heuristics ordered as a run on `profile` orders them. */
char *sim_ptdp_schedule_csv(const SimPlan *plan, const ModelProfile *profile);
/* Each stage's peak microbatches in flight (SimResult.peak_inflight_mbs is
 * their most), into per_stage[0 .. p-1]. */
void sim_ptdp_inflight(const SimPlan *plan, const ModelProfile *profile, double *per_stage);
/* Memory only (no simulation): the busiest GPU. */
void sim_ptdp_memory(const SimPlan *plan, const ModelProfile *profile, ModelMemory *mem, guint *stage);
