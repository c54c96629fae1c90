/* ptdsim — NCCL's collective algorithms as flows on the cluster graph, and a
 * live network that runs them (max-min sharing between everything in
 * flight).
 *
 * A collective becomes a plan: phases run one after another, each a latency
 * (NCCL's tuner model, src/graph/tuning.cc v2.12, from the cluster's nccl
 * block) followed by flows that start together; the phase ends when its last
 * flow ends.  Algorithms:
 *  - ring (all-reduce, all-gather, reduce-scatter): C channels; channel c is
 *    one flow standing for the whole ring, since every edge of a pipelined
 *    ring moves at the pace of the slowest: it loads each link by the number
 *    of ring edges routed over it, and carries the bytes of one edge,
 *    S*2(n-1)/n/C for all-reduce and S*(n-1)/n/C otherwise (nccl-tests'
 *    conventions).  Inside a node the ring follows the node's ring order; in
 *    a multi-node ring, channel c starts every node at its c-th member, so
 *    each channel crosses nodes on its own rail (one ring per rail).
 *  - tree (all-reduce): NCCL's double binary tree over nodes (Sanders,
 *    Speck, Traeff, "Two-tree algorithms for full bandwidth broadcast,
 *    reduction and scan", Parallel Computing 2009), a chain inside each node;
 *    each of the two trees carries half the data up and down every edge.
 *  - hierarchical (all-reduce): reduce-scatter inside each node, all-reduce
 *    of each 1/m shard across nodes (one ring per local rank, on its rail),
 *    all-gather inside each node.
 *  - p2p (send/receive): one flow per pair.
 * The protocol's bandwidth factor (LL 0.25, LL128 0.92, Simple 1) scales the
 * bytes on the wire.  The tuner runs every candidate (algorithm, protocol)
 * alone on the graph and keeps the fastest, as NCCL's does with its model.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "../topologies/cluster.h"
#include "../topologies/fabric.h"

typedef enum { SIM_OP_ALLREDUCE, SIM_OP_ALLGATHER, SIM_OP_REDUCESCATTER, SIM_OP_SENDRECV } SimCollOp;
typedef enum { SIM_ALGO_AUTO, SIM_ALGO_RING, SIM_ALGO_TREE, SIM_ALGO_HIER, SIM_ALGO_P2P } SimCollAlgo;

#define SIM_COLL_ERROR (sim_coll_error_quark())
GQuark sim_coll_error_quark(void);

typedef struct _SimNetwork SimNetwork;
typedef struct _SimCollPlan SimCollPlan;
typedef struct _SimNetRun SimNetRun;

/* The cluster's fabric and NCCL constants. */
SimNetwork *sim_network_load(const TopoCluster *cluster, GError **error);
void sim_network_free(SimNetwork *net);
TopoFabric *sim_network_fabric(SimNetwork *net);

/* A collective on `n_groups` groups of `n` GPUs each (gpus[g * n + r] is rank
 * r of group g; global GPU indices) running at once, `bytes` per group in
 * nccl-tests' size convention.  SIM_ALGO_AUTO / proto < 0 let the tuner
 * choose.  `salt` varies the ECMP flow hashes (e.g. per job).  Returns NULL
 * with `error` set when the forced algorithm does not apply. */
SimCollPlan *sim_coll_plan(SimNetwork *net, SimCollOp op, SimCollAlgo algo, int proto, const guint *gpus, guint n,
                           guint n_groups, double bytes, guint64 salt, GError **error);
/* Point-to-point transfers src[i] -> dst[i] of `bytes` each, together. */
SimCollPlan *sim_coll_plan_p2p(SimNetwork *net, const guint *src, const guint *dst, guint n_pairs, double bytes,
                               guint64 salt);
void sim_coll_plan_free(SimCollPlan *plan);
/* Bisection accounting: with `side[gpu]` 0 or 1 for the GPUs on either side
 * of a cut (2: not counted), plans built afterwards count the data bytes of
 * their transfers that cross it (a ring edge, a tree edge, a send).  NULL
 * turns it off.  The array is not copied. */
void sim_network_set_sides(SimNetwork *net, const guint8 *side);
double sim_coll_plan_crossing_bytes(const SimCollPlan *plan);
SimCollAlgo sim_coll_plan_algo(const SimCollPlan *plan);
TopoProto sim_coll_plan_proto(const SimCollPlan *plan);
/* Seconds the plan takes alone on the network. */
double sim_coll_plan_time(SimNetwork *net, const SimCollPlan *plan);
const char *sim_coll_algo_name(SimCollAlgo algo);
gboolean sim_coll_algo_parse(const char *text, SimCollAlgo *out);

/* A live network: plans started at some time, finished when their last phase
 * ends; everything in flight shares the links. */
SimNetRun *sim_netrun_new(SimNetwork *net);
void sim_netrun_free(SimNetRun *run);
/* Starts `plan` (not copied: it must outlive the transfer) at `now_ns`. */
void sim_netrun_start(SimNetRun *run, const SimCollPlan *plan, guint64 token, int64_t now_ns);
/* The next time something happens, or -1 when idle. */
int64_t sim_netrun_next(SimNetRun *run);
/* Handles everything due at `now_ns` (= sim_netrun_next), appending the
 * tokens of finished plans to `done` (guint64). */
void sim_netrun_advance(SimNetRun *run, int64_t now_ns, GArray *done);
/* Work counters of the flow solver. */
void sim_netrun_stats(const SimNetRun *run, guint64 *solves, guint64 *flows_touched);
