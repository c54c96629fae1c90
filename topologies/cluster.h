/* ptdsim — cluster descriptions (topologies/NAME.json).
 *
 * A cluster names its nodes, GPUs per node, default device profile, and the
 * network facts the communication models need: the NVSwitch tier inside a
 * node, the NIC tier between nodes, and NCCL's tuner constants.  The
 * flow-level fabric (leaves, spines, rails) is described under "fabric".
 */
#pragma once

#include <glib.h>

#include "../models/comm.h"

typedef struct {
  char *name;
  char *path;
  char *gpu_profile; /* default profile name */
  guint nodes;
  guint gpus_per_node;
  gboolean has_fabric; /* it has a "fabric" block: the flow network can run on it */
  ModelNet net;
} TopoCluster;

/* Loads a cluster by shipped name (topologies/NAME.json) or path. */
TopoCluster *topo_cluster_load(const char *name_or_file, GError **error);
void topo_cluster_free(TopoCluster *c);
guint topo_cluster_gpus(const TopoCluster *c);
