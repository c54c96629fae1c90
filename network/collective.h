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
 *  - all-to-all: NCCL's grouped send/receive to every peer at once, each
 *    rank sending bytes / n to each other rank, one phase of one flow per
 *    ordered pair (with NCCL's per-channel cap on each send across nodes).
 *    Across nodes with PXN (NCCL >= 2.12, on by default: "Doubling all2all
 *    performance with NCCL 2.12", NVIDIA technical blog, 2022) a send first
 *    crosses NVLink to the GPU of its own node with the destination's local
 *    index, whose NIC is on the destination's rail, so the inter-node part
 *    stays on one rail: the flow's route is the NVLink hop then the rail.
 *  - nvls (all-reduce, all-gather, reduce-scatter inside one NVLink domain,
 *    where the cluster's nccl block has "nvls"): NVLink SHARP, the switch
 *    reduces and multicasts.  One phase of NCCL's NVLS latency, then per GPU
 *    one flow up to the switch and one down, each carrying what moves at the
 *    link's rate in the time NCCL's tuner gives the transfer
 *    (topo_nvls_algbw), so that alone it takes the tuner's time and beside
 *    other traffic it shares the GPU's NVLink.
 *  - nvls-tree (all-reduce across two or more nodes, where the cluster's
 *    nccl.nvls block has "tree" and its nodes an NVSwitch): NCCL's NVLS_TREE
 *    (NVIDIA/nccl src/device/all_reduce.h, RunWorkColl for NCCL_ALGO_NVLS_TREE;
 *    src/graph/connect.cc, connectNvls).  Each node has h heads, one GPU per
 *    NIC in use (NCCL's NVLS graph: src/graph/search.cc), each owning 1/h of
 *    the buffer: every GPU sends its buffer to the switch, each head reads
 *    its reduced 1/h, sends it up a tree over the heads of the same rank on
 *    every node (two mirrored binary trees, half the channels each), gets
 *    the result down and multicasts it; every GPU reads the whole result.
 *    One pipelined phase: per GPU a flow up its NVSwitch link (S, plus S/h
 *    for a head) and one down (S, plus S/h), at NVLS's rate as for nvls, and
 *    per head channel the two trees' flows over the NICs (S/2h on every tree
 *    edge, both ways), NCCL's tuner latency first.
 * The protocol's bandwidth factor (LL 0.25, LL128 0.92, Simple 1) scales the
 * bytes on the wire.  The tuner runs every candidate (algorithm, protocol)
 * alone on the graph and keeps the fastest, as NCCL's does with its model.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "../topologies/cluster.h"
#include "../topologies/fabric.h"

typedef enum { NET_OP_ALLREDUCE, NET_OP_ALLGATHER, NET_OP_REDUCESCATTER, NET_OP_SENDRECV, NET_OP_ALLTOALL } NetCollOp;
typedef enum { NET_ALGO_AUTO, NET_ALGO_RING, NET_ALGO_TREE, NET_ALGO_HIER, NET_ALGO_P2P, NET_ALGO_NVLS,
              NET_ALGO_NVLS_TREE } NetCollAlgo;

#define NET_COLL_ERROR (net_coll_error_quark())
GQuark net_coll_error_quark(void);

typedef struct _NetModel NetModel;
typedef struct _NetCollPlan NetCollPlan;
typedef struct _NetRun NetRun;

/* The cluster's fabric and NCCL constants. */
NetModel *net_model_load(const TopoCluster *cluster, GError **error);
void net_model_free(NetModel *net);
/* Slow links: the capacity of the links in and out of NIC r of node n
 * times factor[n * nics_per_node + r] (0 < factor <= 1). */
void net_model_scale_nics(NetModel *net, const double *factor);
TopoFabric *net_model_fabric(NetModel *net);

/* A collective on `n_groups` groups of `n` GPUs each (gpus[g * n + r] is rank
 * r of group g; global GPU indices) running at once, `bytes` per group in
 * nccl-tests' size convention.  NET_ALGO_AUTO / proto < 0 let the tuner
 * choose.  `salt` varies the ECMP flow hashes (e.g. per job).  Returns NULL
 * with `error` set when the forced algorithm does not apply. */
NetCollPlan *net_coll_plan(NetModel *net, NetCollOp op, NetCollAlgo algo, int proto, const guint *gpus, guint n,
                           guint n_groups, double bytes, guint64 salt, GError **error);
/* Point-to-point transfers src[i] -> dst[i] of `bytes` each, together. */
NetCollPlan *net_coll_plan_p2p(NetModel *net, const guint *src, const guint *dst, guint n_pairs, double bytes,
                               guint64 salt);
void net_coll_plan_free(NetCollPlan *plan);
/* Two plans of one phase each (or none) run as one: b's flows join a's
 * phase, which waits the longer of their latencies and transfer floors
 * and ends when the last flow of either does; their crossing bytes add.
 * Takes both; returns the plan (DeepEP's InfiniBand and NVLink exchanges,
 * concurrent). */
NetCollPlan *net_coll_plan_together(NetCollPlan *a, NetCollPlan *b);
/* Bisection accounting: with `side[gpu]` 0 or 1 for the GPUs on either side
 * of a cut (2: not counted), plans built afterwards count the data bytes of
 * their transfers that cross it (a ring edge, a tree edge, a send), per
 * direction.  NULL turns it off.  The array is not copied. */
void net_model_set_sides(NetModel *net, const guint8 *side);
/* Crossing bytes from side 0 to side 1 (direction 0) or from 1 to 0 (1). */
double net_coll_plan_crossing_bytes(const NetCollPlan *plan, guint direction);
NetCollAlgo net_coll_plan_algo(const NetCollPlan *plan);
TopoProto net_coll_plan_proto(const NetCollPlan *plan);
/* Seconds the plan takes alone on the network. */
double net_coll_plan_time(NetModel *net, const NetCollPlan *plan);
/* The same in integer nanoseconds, as a live network times it: started at
 * any time t on a NetRun where none of its links carries another flow while
 * it runs, it ends at exactly t plus this (every time inside a run is an
 * integer offset from the plan's start, and a flow's rate depends only on
 * the flows sharing its links). */
int64_t net_coll_plan_ns(NetModel *net, const NetCollPlan *plan);
/* Appends the links the plan's flows use (with repeats) to `links` (guint). */
void net_coll_plan_links(const NetCollPlan *plan, GArray *links);
/* The flows of all its phases (a flow may stand for several sends that move
 * at one rate: a ring channel's edges, an all-to-all's pairs). */
guint net_coll_plan_n_flows(const NetCollPlan *plan);
/* Frees the network the tuner's probes run on (built again if needed):
 * for when every plan is built and memory goes to the run. */
void net_model_drop_probe(NetModel *net);
const char *net_coll_algo_name(NetCollAlgo algo);
gboolean net_coll_algo_parse(const char *text, NetCollAlgo *out);

/* A live network: plans started at some time, finished when their last phase
 * ends; everything in flight shares the links. */
NetRun *net_run_new(NetModel *net);
void net_run_free(NetRun *run);
/* Starts `plan` (not copied: it must outlive the transfer) at `now_ns`. */
void net_run_start(NetRun *run, const NetCollPlan *plan, guint64 token, int64_t now_ns);
/* The next time something happens, or -1 when idle. */
int64_t net_run_next(NetRun *run);
/* Handles everything due at `now_ns` (= net_run_next), appending the
 * tokens of finished plans to `done` (guint64). */
void net_run_advance(NetRun *run, int64_t now_ns, GArray *done);
/* Work counters of the flow solver. */
void net_run_stats(const NetRun *run, guint64 *solves, guint64 *flows_touched);
