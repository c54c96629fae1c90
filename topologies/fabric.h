/* ptdsim — the cluster as a graph of directed links (the "fabric" block of a
 * cluster JSON), and routes of GPU-to-GPU transfers over it.
 *
 * Vertices: per node its GPUs, an NVSwitch (when the node has one), PCIe
 * switches, CPUs and NICs; then the network's switches.  Every physical link
 * is two directed links, one per direction, each with its own bandwidth
 * (bytes/s, after the efficiency the JSON gives for its class) and latency.
 *
 * Networks:
 *  - "rail-fat-tree" (NVIDIA DGX SuperPOD reference architecture): scalable
 *    units of `nodes_per_unit` nodes; per unit one leaf per rail, NIC r of
 *    every node of the unit on leaf r; per pod of `units_per_pod` units one
 *    spine group per rail, every leaf of rail r linked to every spine of
 *    group r with its uplink capacity split evenly (non-blocking: a leaf's
 *    uplink capacity equals its downlink capacity); when there is more than
 *    one pod, a core layer joins spine j of every group to core group j.
 *  - "single-switch": every NIC on one switch (an Ethernet placement group).
 *
 * Routing (NCCL's behaviour): a transfer to GPU j of another node leaves
 * through the NIC on j's rail; if that is not the sender's own NIC, the data
 * first crosses NVLink to the local GPU on that rail (NCCL's PXN, v2.12).
 * Equal-cost paths (spines, cores) are chosen by ECMP on a flow hash, or, with
 * adaptive routing, the flow is spread evenly over all of them (each link
 * carries a share `coef` of the flow's rate).
 */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>

typedef struct _TopoFabric TopoFabric;

typedef enum { TOPO_ROUTING_ECMP, TOPO_ROUTING_ADAPTIVE } TopoRouting;

/* One link a route uses, and the share of the flow's rate it carries. */
typedef struct {
  guint link;
  double coef;
} TopoHop;

#define TOPO_FABRIC_ERROR (topo_fabric_error_quark())
GQuark topo_fabric_error_quark(void);
typedef enum { TOPO_FABRIC_ERROR_INVALID, TOPO_FABRIC_ERROR_DISCONNECTED } TopoFabricError;

/* Builds the graph from a cluster JSON's "fabric" object for `nodes` nodes of
 * `gpus_per_node` GPUs and `nics_per_node` NICs.  `file` names the source in
 * errors, which name the offending entry. */
TopoFabric *topo_fabric_build(const cJSON *fabric, const char *file, guint nodes, guint gpus_per_node,
                              guint nics_per_node, GError **error);
/* Reads the "fabric" object of a cluster JSON file. */
TopoFabric *topo_fabric_load(const char *cluster_path, GError **error);
void topo_fabric_free(TopoFabric *f);

guint topo_fabric_n_vertices(const TopoFabric *f);
guint topo_fabric_n_links(const TopoFabric *f);
guint topo_fabric_nodes(const TopoFabric *f);
guint topo_fabric_gpus_per_node(const TopoFabric *f);
guint topo_fabric_nics_per_node(const TopoFabric *f);
/* Switch counts of the network: leaves, spines, cores. */
void topo_fabric_switches(const TopoFabric *f, guint *leaves, guint *spines, guint *cores);
double topo_fabric_link_bw(const TopoFabric *f, guint link);      /* bytes/s */
double topo_fabric_link_latency(const TopoFabric *f, guint link); /* s */
guint topo_fabric_link_from(const TopoFabric *f, guint link);
guint topo_fabric_link_to(const TopoFabric *f, guint link);
/* A readable name of a vertex ("n3.gpu5", "u1.leaf4", "p0.r2.spine3", ...). */
char *topo_fabric_vertex_name(const TopoFabric *f, guint vertex);
guint topo_fabric_gpu_vertex(const TopoFabric *f, guint gpu);
gboolean topo_fabric_has_nvswitch(const TopoFabric *f);
/* The directed links between GPU `gpu` (global index) and its node's
 * NVSwitch, up (to the switch) and down; FALSE where the node has none. */
gboolean topo_fabric_nvswitch_links(const TopoFabric *f, guint gpu, guint *up, guint *down);
TopoRouting topo_fabric_routing(const TopoFabric *f);
void topo_fabric_set_routing(TopoFabric *f, TopoRouting routing);
/* The rail (NIC index) GPU `local_gpu` of a node sends through. */
guint topo_fabric_gpu_nic(const TopoFabric *f, guint local_gpu);
/* The intra-node ring NCCL would build: a cycle through every local GPU that
 * maximizes its slowest edge (the NVSwitch ring 0,1,...,g-1, or a Hamiltonian
 * cycle over NVLink pairs).  `order` has gpus_per_node entries. */
const guint *topo_fabric_node_ring(const TopoFabric *f);

/* Appends to `hops` the links of a transfer from GPU `src` to GPU `dst`
 * (global GPU indices); ECMP choices use `flow_hash`.  Returns the sum of the
 * link latencies along the path (for adaptive routing, of one path). */
double topo_fabric_route(const TopoFabric *f, guint src, guint dst, guint64 flow_hash, GArray *hops);
