/* ptdsim — the finished timeline of a PTD-P or TeraPipe run, handed to an
 * observer (the Perfetto trace writer) before the engine is freed.
 *
 * Both task graphs lay out their streams the same way: simulated GPU g owns
 * streams g * SIM_TIMELINE_STREAM_KINDS + kind, kinds in the order of
 * sim_timeline_stream_name(); op tags use the categories of
 * sim_timeline_category_name().  Simulated GPU g is tensor rank i, replica k
 * and stage s with g = i + ts (k + ds s); under the symmetry shortcut
 * (ts = ds = 1) each simulated GPU stands for the t ranks of its
 * tensor-parallel group and all d replicas.
 *
 * The observer is optional: runs without one do exactly what they did
 * before, with no extra work.
 */
#pragma once

#include "engine.h"
#include "plan.h"
#include "terapipe.h"

#define SIM_TIMELINE_STREAM_KINDS 5
/* Tag categories, as ptdp.c and terapipe.c number them. */
enum {
  SIM_TIMELINE_CAT_COMPUTE,
  SIM_TIMELINE_CAT_TP,
  SIM_TIMELINE_CAT_PP,
  SIM_TIMELINE_CAT_PP_GATHER,
  SIM_TIMELINE_CAT_DP,
  SIM_TIMELINE_CAT_OPTIMIZER
};

typedef struct {
  const SimEngine *engine;
  const SimPlan *plan;
  guint ts, ds, p;       /* simulated tensor ranks, replicas, stages */
  const guint *gpu_of;   /* per simulated GPU: its GPU number in the cluster (placement applied) */
  const char *item_unit; /* what a tag's microbatch field counts: "mb" (PTD-P) or "slice" (TeraPipe) */
  gboolean recompute_pass; /* pass 2 is the recomputation forward (PTD-P); else pass 2 is "other" */
  guint mirror; /* TeraPipe: token slices M; a backward tag's field j >= M is slice 2M - 1 - j (0: none) */
} SimTimeline;

/* Called once after a successful run.  Returning FALSE (with `error` set)
 * makes the run fail with that error. */
typedef gboolean (*SimTimelineFn)(const SimTimeline *timeline, gpointer data, GError **error);

/* "compute", "tp", "pp-send", "pp-recv", "dp". */
const char *sim_timeline_stream_name(guint kind);
/* Trace category of a tag category: "compute", "tp", "pp", "pp" (the
 * scatter/gather all-gather), "dp", "optimizer". */
const char *sim_timeline_category_name(guint category);
/* What an op of this category is, in a word or two ("forward", "all-reduce",
 * "send", "all-gather", "grad all-reduce", "optimizer"). */
const char *sim_timeline_category_label(guint category);

/* sim_ptdp_run and sim_terapipe_simulate with an observer (NULL: none). */
gboolean sim_ptdp_run_observed(const SimPlan *plan, const ModelProfile *profile, const TopoCluster *cluster,
                               SimResult *result, SimTimelineFn observe, gpointer data, GError **error);
gboolean sim_terapipe_simulate_observed(const SimPlan *plan, const ModelProfile *profile, const TopoCluster *cluster,
                                        const SimTeraPipeSlicing *slicing, SimResult *result, SimTimelineFn observe,
                                        gpointer data, GError **error);
