/* ptdsim — the flow network as a task-graph builder sees it.
 *
 * With --network flow, communication ops have no fixed duration: the engine
 * starts each on a NetRun (network/collective.c) and it ends when its flows
 * do.  A builder asks for a plan per distinct transfer -- cached by a key,
 * so that every microbatch's identical all-reduce shares one plan -- and
 * adds ops that carry a plan.  After the run, the plan and the number of
 * ranks' transfers an op stands for (`copies`, under the symmetry shortcut)
 * give the bytes it moved across a cut.
 *
 * Fixed transfers: a transfer whose links carry no other flow while it runs
 * takes exactly its plan's time alone on the network (net_coll_plan_ns), so
 * its op can be an op of that fixed duration, off the flow solver, and a
 * chain of such transfers and compute can be one coarse op.  Whether
 * anything meets it depends on the timeline, so a builder may fix every
 * transfer in advance and let sim_netops_run confirm after the run: if no
 * fixed transfer overlaps in time a transfer of a plan that shares one of
 * its links (its own plan included), no flow met a fixed one, and the run
 * with every transfer on the flows gives the same timeline -- up to the
 * first meeting both runs are the same, and that meeting shows as an
 * overlap.  The fixed ops that met something go onto the flows and the
 * graph runs again; after a few rounds every fixed op goes. */
#pragma once

#include <glib.h>

#include "../network/collective.h"
#include "../sim/engine.h"
#include "../plan/plan.h"

typedef struct _SimNetOps SimNetOps;

/* Loads the cluster's network and attaches it to `engine`. */
SimNetOps *sim_netops_new(const TopoCluster *cluster, SimEngine *engine, GError **error);
/* The same, with the plan's slow links (--slow-link) on the cluster's NICs. */
SimNetOps *sim_netops_new_for(const TopoCluster *cluster, const SimPlan *plan, SimEngine *engine, GError **error);
void sim_netops_free(SimNetOps *n);

/* The plan index of a collective over n GPUs (NCCL's tuner picks the
 * algorithm), or of a send src -> dst, under `key`; built on first use with
 * the bisection `side` array (network/collective.h; NULL: not counted). */
guint sim_netops_coll(SimNetOps *n, const char *key, NetCollOp op, const guint *gpus, guint count, double copies,
                      double bytes, const guint8 *side);
/* The same collective on `groups` groups of `count` GPUs at once
 * (gpus[g * count + r]), one plan: what every group of a stage does
 * together (the MoE all-to-alls). */
guint sim_netops_coll_groups(SimNetOps *n, const char *key, NetCollOp op, const guint *gpus, guint count, guint groups,
                             double copies, double bytes, const guint8 *side);
/* Two all-to-alls at once, one plan (net_coll_plan_together): `ga` groups
 * of `na` GPUs of `bytes_a` per rank and `gb` groups of `nb` GPUs of
 * `bytes_b` (DeepEP's exchange between the nodes' same-rail GPUs beside
 * its exchange inside each node). */
guint sim_netops_alltoall_pair(SimNetOps *n, const char *key, const guint *gpus_a, guint na, guint ga, double bytes_a,
                               const guint *gpus_b, guint nb, guint gb, double bytes_b, double copies,
                               const guint8 *side);
guint sim_netops_p2p(SimNetOps *n, const char *key, guint src, guint dst, double copies, double bytes,
                     const guint8 *side);
/* Adds an op on `streams` (at `positions`, or NULL: in issue order) that
 * runs plan `plan`. */
/* Point-to-point sends src[j] -> dst[j] of `bytes` each, all at once (a
 * ring's hop), as one plan. */
guint sim_netops_pairs(SimNetOps *n, const char *key, const guint *src, const guint *dst, guint count, double copies,
                       double bytes, const guint8 *side);
guint sim_netops_op(SimNetOps *n, guint plan, const guint *streams, const guint64 *positions, guint count,
                    const SimOpTag *tag);
/* While on, ops added are fixed at their plan's time alone (see above). */
void sim_netops_fixing(SimNetOps *n, gboolean on);
/* The plan's time alone on the network, computed once. */
SimTime sim_netops_solo_ns(SimNetOps *n, guint plan);
/* A transfer of plan `plan` inside a coarse op still to be added, `offset`
 * after the op's start (while fixing); sim_netops_parts_to names the op. */
void sim_netops_part(SimNetOps *n, guint plan, SimTime offset);
void sim_netops_parts_to(SimNetOps *n, guint op);
/* Runs the engine until no fixed transfer met another (see above).  Sets
 * `coarse_met` when a transfer inside a coarse op did: the timeline is not
 * the flows' one, and the graph must be built again without coarse ops. */
gboolean sim_netops_run(SimNetOps *n, gboolean *coarse_met, GError **error);
/* Every plan is built: frees what building them needed, before the run. */
void sim_netops_built(SimNetOps *n);
/* The plan op `op` ran and the ranks it stands for, or NULL when `op` is
 * not a network op. */
const NetCollPlan *sim_netops_plan_of(const SimNetOps *n, guint op, double *copies);
