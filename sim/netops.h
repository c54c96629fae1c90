/* ptdsim — the flow network as a task-graph builder sees it.
 *
 * With --network flow, communication ops have no fixed duration: the engine
 * starts each on a NetRun (network/collective.c) and it ends when its flows
 * do.  A builder asks for a plan per distinct transfer -- cached by a key,
 * so that every microbatch's identical all-reduce shares one plan -- and
 * adds ops that carry a plan.  After the run, the plan and the number of
 * ranks' transfers an op stands for (`copies`, under the symmetry shortcut)
 * give the bytes it moved across a cut. */
#pragma once

#include <glib.h>

#include "../network/collective.h"
#include "engine.h"

typedef struct _SimNetOps SimNetOps;

/* Loads the cluster's network and attaches it to `engine`. */
SimNetOps *sim_netops_new(const TopoCluster *cluster, SimEngine *engine, GError **error);
void sim_netops_free(SimNetOps *n);

/* The plan index of a collective over n GPUs (NCCL's tuner picks the
 * algorithm), or of a send src -> dst, under `key`; built on first use with
 * the bisection `side` array (network/collective.h; NULL: not counted). */
guint sim_netops_coll(SimNetOps *n, const char *key, NetCollOp op, const guint *gpus, guint count, double copies,
                      double bytes, const guint8 *side);
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
/* Every plan is built: frees what building them needed, before the run. */
void sim_netops_built(SimNetOps *n);
/* The plan op `op` ran and the ranks it stands for, or NULL when `op` is
 * not a network op. */
const NetCollPlan *sim_netops_plan_of(const SimNetOps *n, guint op, double *copies);
