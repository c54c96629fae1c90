/* ptdsim — collective and point-to-point communication time, α–β per tier.
 *
 * Conventions are nccl-tests' (doc/PERFORMANCE.md there): a collective on n
 * ranks moving a buffer of S bytes has bus bytes S * f(n) with f = 2(n-1)/n
 * for all-reduce and (n-1)/n for all-gather and reduce-scatter, and
 * time = latency + bus bytes / busbw.  The latency and the protocol choice
 * follow NCCL's tuner (src/graph/tuning.cc, v2.12): for a ring of n ranks on
 * N nodes, latency = base + intra_hops * nvlink_hop + inter_hops * net_hop,
 * for each of the LL, LL128 and Simple protocols, whose bandwidth is scaled by
 * a per-protocol factor; the fastest is taken.
 *
 * Bandwidth tiers: inside a node the measured NVSwitch ring busbw; across
 * nodes, a ring gets one NIC per member GPU on each node (NCCL runs one ring
 * channel per NIC, and the other GPUs of the node run their own
 * communicators on the other rails at the same time), capped by NVLink.
 */
#pragma once

#include <glib.h>

#include "../topologies/cluster.h"

/* The first four in the order of calibrate/'s CalibCollOp (fit.c casts). */
typedef enum {
  MODEL_COLL_ALLREDUCE,
  MODEL_COLL_ALLGATHER,
  MODEL_COLL_REDUCESCATTER,
  MODEL_COLL_SENDRECV,
  MODEL_COLL_BROADCAST,
  MODEL_COLL_ALLTOALL
} ModelCollOp;

/* A collective measured on one node and fitted by `ptdsim fit` (a profile's
 * optional "collectives" block): for `op` on `ranks` GPUs of one node,
 * time = min over its size ranges r of alpha_s[r] + bus bytes / busbw[r]
 * (one range per NCCL protocol regime the fit found; NCCL's tuner likewise
 * takes the fastest protocol).  Used instead of the cluster's analytic
 * intra-node model where it applies. */
#define MODEL_COLL_MAX_RANGES 2
typedef struct {
  ModelCollOp op;
  guint ranks;
  guint n_ranges;
  double alpha_s[MODEL_COLL_MAX_RANGES];
  double busbw[MODEL_COLL_MAX_RANGES]; /* B/s */
} ModelCollFit;

/* The network as the collective model sees it: the cluster's tiers and
 * NCCL constants, and what the device profile adds (the ideal profile's free
 * communication, collectives measured on the device). */
typedef struct {
  TopoNet hw;
  gboolean free_comm; /* the ideal profile: communication costs nothing */
  const ModelCollFit *measured; /* from the device profile, if it has them */
  guint n_measured;
} ModelNet;

/* Seconds for `bus_bytes` under a measured fit (min over its ranges). */
double model_coll_fit_time_s(const ModelCollFit *f, double bus_bytes);

/* nccl-tests' bus-bandwidth factor for `op` on n ranks (1 for send/receive
 * and broadcast, whose ring passes the whole buffer along n - 1 hops). */
double model_busbw_factor(ModelCollOp op, guint ranks);

/* Seconds for one ring collective of `bytes` (nccl-tests' size convention:
 * the all-reduce buffer, the all-gather output, the reduce-scatter input)
 * over `ranks` GPUs spread evenly over `nodes` nodes.  `proto_out`, if not
 * NULL, receives the protocol chosen. */
double model_collective_time_s(const ModelNet *net, ModelCollOp op, double bytes, guint ranks, guint nodes,
                               TopoProto *proto_out);
/* Seconds for one all-to-all of `bytes` per rank (nccl-tests' size: each
 * rank's send buffer, bytes / n to every rank) over `ranks` GPUs spread
 * evenly over `nodes` nodes.  NCCL runs it as a send and a receive to every
 * peer at once (src/collectives/all_to_all, grouped point-to-point), and
 * since v2.12 sends across nodes through the peer's rail with PXN: so every
 * byte leaving the GPU crosses its NVLink, (n-1)/n of the buffer at the
 * node's NVLink bus bandwidth, and the (n - m)/n bound for the other nodes
 * (m ranks per node) leave through the node's NICs, a GPU's share of them each:
 *   time = p2p latency + max((n-1)/n S / nvlink, (n - m)/n S / (NICs x rate / G)).
 * busbw = algbw (n-1)/n, as nccl-tests reports it. */
double model_alltoall_time_s(const ModelNet *net, double bytes, guint ranks, guint nodes);
/* Seconds for DeepEP's dispatch or combine (deepseek-ai/DeepEP, its
 * internode normal kernels; the DeepSeek-V3 report, section 3.2.2): each
 * rank sends `ib_bytes` across InfiniBand to the GPU of its own rail in
 * the other nodes, while those forward what they received over NVLink,
 * `nvl_bytes` leaving each rank, the two pipelined chunk by chunk:
 *   time = p2p latency + max(ib / (NICs x rate / G), nvl / nvlink busbw)
 * (no InfiniBand phase on one node: an NVLink exchange alone). */
double model_deepep_time_s(const ModelNet *net, double ib_bytes, double nvl_bytes, guint nodes);
/* Seconds for one point-to-point transfer of `bytes`.  Across nodes NCCL
 * (v2.12, src/group.cc and src/graph/paths.cc) cuts a send into pieces of
 * 512 KiB to 2 MiB dealt round-robin over the peer's channels (2 by
 * default), each channel carrying at most p2p_channel_bw, Simple protocol
 * only: the rate is min(NIC, channels x per-channel rate), with one channel
 * up to 512 KiB (topo_p2p_channels). */
double model_p2p_time_s(const ModelNet *net, double bytes, gboolean same_node);
/* Rate of such a send, B/s, when it has the NIC to itself (at most nic_bw). */
double model_p2p_net_rate(const TopoNet *hw, double bytes);
const char *topo_proto_name(TopoProto proto);
