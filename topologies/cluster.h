/* ptdsim — cluster descriptions (topologies/NAME.json).
 *
 * A cluster names its nodes, GPUs per node, default device profile, and the
 * network facts the communication models need: the NVSwitch tier inside a
 * node, the NIC tier between nodes, and NCCL's tuner constants.  The
 * flow-level fabric (leaves, spines, rails) is described under "fabric".
 */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>

#include "../base/jsonutil.h"

/* NCCL's protocols (src/include/devcomm.h: LL, LL128, Simple); the cluster
 * gives NCCL's tuner constants per protocol. */
typedef enum { TOPO_PROTO_LL, TOPO_PROTO_LL128, TOPO_PROTO_SIMPLE, TOPO_N_PROTOS } TopoProto;
const char *topo_proto_name(TopoProto proto);

/* The network facts of the cluster's "nvlink", "network" and "nccl" blocks,
 * in SI units. */
typedef struct {
  guint gpus_per_node;
  guint nics_per_node;
  double nvlink_busbw;      /* B/s: NCCL ring busbw inside one node */
  double nvlink_p2p_bw;     /* B/s: one direction between two GPUs of a node */
  double nic_bw;            /* B/s: achievable per NIC in NCCL */
  double p2p_latency_intra; /* s */
  double p2p_latency_inter; /* s */
  double ring_base[TOPO_N_PROTOS];   /* s */
  double nvlink_hop[TOPO_N_PROTOS];  /* s */
  double net_hop[TOPO_N_PROTOS];     /* s */
  double proto_bw_factor[TOPO_N_PROTOS];
  /* Point-to-point across nodes, as NCCL runs ncclSend/ncclRecv: channels
   * per peer (nccl.p2p_channels_per_net_peer; NCCL_NCHANNELS_PER_NET_PEER,
   * 2 in v2.12) and what one channel carries (nccl.p2p_channel_GBps; 14 GB/s,
   * NCCL's own P2P_PER_CHANNEL_NET_BW).  models/comm.h uses them. */
  guint p2p_net_channels;
  double p2p_channel_bw; /* B/s */
} TopoNet;

/* Channels NCCL v2.12 gives a send of `bytes` to a peer on another node:
 * src/group.cc cuts it into pieces of 512 KiB (SENDRECV_SLICEFACTOR x the
 * 128 KiB Simple step) to 2 MiB dealt round-robin over the peer's
 * p2p_net_channels, so up to 512 KiB it is one channel. */
guint topo_p2p_channels(const TopoNet *net, double bytes);

typedef struct {
  char *name;
  char *path;
  char *gpu_profile; /* default profile name */
  guint nodes;
  guint gpus_per_node;
  gboolean has_fabric; /* it has a "fabric" block: the flow network can run on it */
  TopoNet net;
  cJSON *json; /* the description it was made from (fabric, NCCL tables), read-only */
} TopoCluster;

/* Loads a cluster by shipped name (topologies/NAME.json) or path. */
TopoCluster *topo_cluster_load(const char *name_or_file, GError **error);
/* A cluster from its description `root` (taken over, freed on error too);
 * `path` is where it came from, for errors and provenance. */
TopoCluster *topo_cluster_from_json(cJSON *root, const char *path, GError **error);
void topo_cluster_free(TopoCluster *c);
/* Reads {"LL": x, "LL128": y, "Simple": z} at nccl.KEY of a cluster's JSON
 * into out[], each in `range`, times `scale`. */
gboolean topo_json_per_proto(const cJSON *root, const char *key, const char *file, double scale, const PtdRange *range,
                             double out[TOPO_N_PROTOS], GError **error);
/* Reads and checks a cluster's size: nodes, GPUs and NICs per node, each in
 * its range (base/ranges.h) and at most PTD_MAX_CLUSTER_GPUS GPUs in all. */
gboolean topo_cluster_size_check(const cJSON *root, const char *file, guint *nodes, guint *gpus_per_node,
                                 guint *nics_per_node, GError **error);
guint topo_cluster_gpus(const TopoCluster *c);
