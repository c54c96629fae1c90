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

/* The NIC (0 .. nics - 1) that GPU `local_gpu` (0 .. gpus - 1) of a node
 * sends through: the NICs split the node's GPUs into equal runs in order
 * (rail r serves GPUs r G/N .. (r + 1) G/N - 1).  The fabric's routes, the
 * symmetry shortcut's shared resources and the --slow-link factors all use
 * this one mapping. */
static inline guint topo_gpu_nic(guint local_gpu, guint gpus, guint nics) { return local_gpu * nics / gpus; }

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
  /* The thread blocks a collective's kernels run on each member GPU, one
   * SM each, taken from the compute beside it (nccl.collective_channels,
   * optional; 0: none modelled).  NCCL runs one block per channel. */
  guint collective_channels;
  /* NVLink SHARP (nccl.nvls, optional): the NVLink switch reduces and
   * multicasts.  NCCL's tuner (src/graph/tuning.cc) prices it inside one
   * NVLink domain from the GPU's NVLink bandwidth, an efficiency per GPU
   * generation (nvlsEfficiency), its channels (c - 1)/c, and a latency. */
  gboolean has_nvls;
  double nvls_bw;      /* B/s: one GPU's NVLink bandwidth, one direction */
  double nvls_eff;     /* share of it */
  guint nvls_channels;
  double nvls_latency; /* s */
  /* NVLS-tree (nccl.nvls.tree, optional): NCCL's all-reduce across nodes
   * that reduces and broadcasts through the NVLink switch inside each node
   * and runs a tree over the NICs between the nodes' heads.  The tuner's
   * constants (NVIDIA/nccl src/graph/tuning.cc): the network latency of one
   * tree step (hwLatencies[NET][NVLS_TREE][Simple]) and the per-channel cap
   * on 2 and on 3 or more nodes (perChMaxNVLSTreeBws). */
  gboolean has_nvls_tree;
  double nvls_tree_net_hop;    /* s */
  double nvls_tree_cap[2];     /* B/s per channel: 2 nodes, 3 or more */
} TopoNet;

/* NCCL's NVLS algorithm bandwidth (bytes of the nccl-tests buffer per
 * second) for an all-reduce (`allreduce`) or an all-gather / reduce-scatter
 * on `ranks` GPUs of one NVLink domain: the bus bandwidth
 * B e (c - 1)/c, twice that for an all-reduce (it pipelines reduce and
 * multicast), turned into an algorithm bandwidth as NCCL does (times
 * n / 2(n - 1) for an all-reduce; an all-gather's and reduce-scatter's stays
 * as it is, times (n - 1)/n).  0 where NVLS does not apply. */
double topo_nvls_algbw(const TopoNet *net, gboolean allreduce, guint ranks);

typedef enum { TOPO_NVLS_ALLREDUCE, TOPO_NVLS_ALLGATHER, TOPO_NVLS_REDUCESCATTER } TopoNvlsOp;
/* NVLS as it runs (the time both network models take, where the tuner above
 * chose it), from what moves over each GPU's NVSwitch link for a buffer of
 * S bytes on n GPUs (NVIDIA/nccl src/device/all_reduce.h, runRing's NVLS
 * sibling: each GPU reduces its 1/n slice with a multimem load-reduce, which
 * reads that slice from every GPU, itself included, and multicasts it back
 * with a multimem store): an all-reduce sends S + S/n and receives S/n + S,
 * a reduce-scatter sends S and receives S/n, an all-gather sends S/n and
 * receives S.  `out` and `in` get those per buffer byte; the rate returned
 * (B/s, each way) is NCCL's NVLS share of the NVLink the ring sees:
 * nvlink_busbw (the ring's busbw, what one direction of a GPU's NVLink
 * carries) x nvls_eff.  The transfer takes S max(out, in) / rate; 0 where
 * NVLS does not apply. */
double topo_nvls_exec(const TopoNet *net, TopoNvlsOp op, guint ranks, double *out, double *in);

/* Channels NCCL v2.12 gives a send of `bytes` to a peer on another node:
 * src/group.cc cuts it into pieces of 512 KiB (SENDRECV_SLICEFACTOR x the
 * 128 KiB Simple step) to 2 MiB dealt round-robin over the peer's
 * p2p_net_channels, so up to 512 KiB it is one channel. */
guint topo_p2p_channels(const TopoNet *net, double bytes);

typedef struct {
  char *name;
  char *path;
  char *gpu_profile; /* default profile name */
  /* "gpu_power_limit_W": the board power cap set on every GPU (W); 0 where
   * the file gives none (the part's rated cap) */
  double gpu_power_limit_W;
  /* "price_per_gpu_hour": what one GPU-hour costs (dollars); 0 where the
   * file gives none */
  double price_per_gpu_hour;
  /* The simulator's view: a node is one NVLink domain, whose GPUs talk over
   * NVLink and whose NICs are those of all its hosts.  For a DGX, a domain is
   * one host (8 GPUs); for a GB200 NVL72 rack, 18 compute trays of 4. */
  guint nodes;         /* NVLink domains */
  guint gpus_per_node; /* GPUs of one NVLink domain */
  guint gpus_per_host; /* GPUs of one host (the JSON's gpus_per_node) */
  gboolean has_fabric; /* it has a "fabric" block: the flow network can run on it */
  TopoNet net;
  cJSON *json; /* the description it was made from (fabric, NCCL tables), read-only */
} TopoCluster;

/* Loads a cluster by shipped name (topologies/NAME.json) or path. */
TopoCluster *topo_cluster_load(const char *name_or_file, GError **error);
/* A cluster from its description `root` (taken over, freed on error too);
 * `path` is where it came from, for errors and provenance. */
TopoCluster *topo_cluster_from_json(cJSON *root, const char *path, GError **error);
/* The same with `nodes` nodes in place of its file's count (0: as it is). */
TopoCluster *topo_cluster_load_sized(const char *name_or_file, guint nodes, GError **error);
void topo_cluster_free(TopoCluster *c);
/* Reads {"LL": x, "LL128": y, "Simple": z} at nccl.KEY of a cluster's JSON
 * into out[], each in `range`, times `scale`. */
gboolean topo_json_per_proto(const cJSON *root, const char *key, const char *file, double scale, const PtdRange *range,
                             double out[TOPO_N_PROTOS], GError **error);
/* Reads and checks a cluster's size: nodes, GPUs and NICs per node and the
 * NVLink domain, each in its range (base/ranges.h) and at most
 * PTD_MAX_CLUSTER_GPUS GPUs in all.  Gives the simulator's view, where a node
 * is one NVLink domain (its GPUs, and the NICs of all its hosts), and the GPUs
 * of one host (`gpus_per_host` may be NULL). */
gboolean topo_cluster_size_check(const cJSON *root, const char *file, guint *nodes, guint *gpus_per_node,
                                 guint *nics_per_node, guint *gpus_per_host, GError **error);
guint topo_cluster_gpus(const TopoCluster *c);
