/* ptdsim — cluster loading (see cluster.h). */
#include "cluster.h"

#include "../base/jsonutil.h"
#include "../base/ranges.h"

void topo_cluster_free(TopoCluster *c) {
  if (!c)
    return;
  g_free(c->name);
  g_free(c->path);
  g_free(c->gpu_profile);
  cJSON_Delete(c->json);
  g_free(c);
}

guint topo_cluster_gpus(const TopoCluster *c) { return c->nodes * c->gpus_per_node; }

guint topo_p2p_channels(const TopoNet *net, double bytes) {
  return bytes <= 512.0 * 1024 ? 1 : MAX(1u, net->p2p_net_channels);
}

const char *topo_proto_name(TopoProto proto) {
  static const char *names[] = {"LL", "LL128", "Simple"};
  return proto < TOPO_N_PROTOS ? names[proto] : "?";
}

/* Reads {"LL": x, "LL128": y, "Simple": z} at nccl.KEY into out[], scaled. */
gboolean topo_json_per_proto(const cJSON *root, const char *key, const char *file, double scale, const PtdRange *range,
                          double out[TOPO_N_PROTOS], GError **error) {
  for (int p = 0; p < TOPO_N_PROTOS; p++) {
    char *k = g_strdup_printf("nccl.%s.%s", key, topo_proto_name((TopoProto)p));
    double v;
    gboolean ok = ptd_json_in(root, k, file, range, &v, error);
    g_free(k);
    if (!ok)
      return FALSE;
    out[p] = v * scale;
  }
  return TRUE;
}

gboolean topo_cluster_size_check(const cJSON *root, const char *file, guint *nodes, guint *gpus_per_node,
                                 guint *nics_per_node, GError **error) {
  double n, g, nics;
  if (!ptd_json_in(root, "nodes", file, &ptd_range_nodes, &n, error) ||
      !ptd_json_in(root, "gpus_per_node", file, &ptd_range_per_node, &g, error) ||
      !ptd_json_in(root, "nics_per_node", file, &ptd_range_per_node, &nics, error))
    return FALSE;
  if (n * g > PTD_MAX_CLUSTER_GPUS) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: keys 'nodes' x 'gpus_per_node' give %.0f GPUs, more than the %u a cluster may have", file, n * g,
                PTD_MAX_CLUSTER_GPUS);
    return FALSE;
  }
  *nodes = (guint)n;
  *gpus_per_node = (guint)g;
  *nics_per_node = (guint)nics;
  return TRUE;
}

static gboolean load_body(TopoCluster *c, const cJSON *root, const char *file, GError **error) {
  const char *name = ptd_json_string(root, "name", file, error);
  const char *gpu = name ? ptd_json_string(root, "gpu_profile", file, error) : NULL;
  if (!gpu)
    return FALSE;
  c->name = g_strdup(name);
  c->gpu_profile = g_strdup(gpu);
  c->has_fabric = cJSON_GetObjectItemCaseSensitive(root, "fabric") != NULL;
  TopoNet *n = &c->net;
  double allreduce, p2p, p2p_lat_intra, nic, p2p_lat_inter;
  if (!topo_cluster_size_check(root, file, &c->nodes, &c->gpus_per_node, &n->nics_per_node, error) ||
      !ptd_json_object(root, "nvlink", file, error) ||
      !ptd_json_in(root, "nvlink.allreduce_busbw_GBps", file, &ptd_range_bandwidth_GBps, &allreduce, error) ||
      !ptd_json_in(root, "nvlink.p2p_GBps", file, &ptd_range_bandwidth_GBps, &p2p, error) ||
      !ptd_json_in(root, "nvlink.p2p_latency_us", file, &ptd_range_latency_us, &p2p_lat_intra, error) ||
      !ptd_json_object(root, "network", file, error) ||
      !ptd_json_in(root, "network.nic_GBps", file, &ptd_range_bandwidth_GBps, &nic, error) ||
      !ptd_json_in(root, "network.p2p_latency_us", file, &ptd_range_latency_us, &p2p_lat_inter, error) ||
      !ptd_json_object(root, "nccl", file, error) ||
      !topo_json_per_proto(root, "ring_base_us", file, 1e-6, &ptd_range_latency_us, n->ring_base, error) ||
      !topo_json_per_proto(root, "nvlink_hop_us", file, 1e-6, &ptd_range_latency_us, n->nvlink_hop, error) ||
      !topo_json_per_proto(root, "net_hop_us", file, 1e-6, &ptd_range_latency_us, n->net_hop, error) ||
      !topo_json_per_proto(root, "protocol_bandwidth_factor", file, 1.0, &ptd_range_efficiency, n->proto_bw_factor, error))
    return FALSE;
  /* optional: NCCL's point-to-point channels (cluster.h) */
  double channels, channel_GBps;
  if (!ptd_json_in_or(root, "nccl.p2p_channels_per_net_peer", file, &ptd_range_channels, 2, &channels, error) ||
      !ptd_json_in_or(root, "nccl.p2p_channel_GBps", file, &ptd_range_bandwidth_GBps, 14, &channel_GBps, error))
    return FALSE;
  n->p2p_net_channels = (guint)channels;
  n->p2p_channel_bw = channel_GBps * 1e9;
  n->gpus_per_node = c->gpus_per_node;
  n->nvlink_busbw = allreduce * 1e9;
  n->nvlink_p2p_bw = p2p * 1e9;
  n->nic_bw = nic * 1e9;
  n->p2p_latency_intra = p2p_lat_intra * 1e-6;
  n->p2p_latency_inter = p2p_lat_inter * 1e-6;
  return TRUE;
}

TopoCluster *topo_cluster_from_json(cJSON *root, const char *path, GError **error) {
  TopoCluster *c = g_new0(TopoCluster, 1);
  c->path = g_strdup(path);
  c->json = root;
  if (!load_body(c, root, path, error)) {
    topo_cluster_free(c);
    return NULL;
  }
  return c;
}

TopoCluster *topo_cluster_load(const char *name_or_file, GError **error) {
  char *path = ptd_data_resolve("topologies", name_or_file, "cluster", error);
  if (!path)
    return NULL;
  cJSON *root = ptd_json_load(path, error);
  TopoCluster *c = root ? topo_cluster_from_json(root, path, error) : NULL;
  g_free(path);
  return c;
}
