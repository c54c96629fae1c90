/* ptdsim — cluster loading (see cluster.h). */
#include "cluster.h"

#include "../base/jsonutil.h"

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

/* Reads {"LL": x, "LL128": y, "Simple": z} into out[], scaled. */
static gboolean per_proto(const cJSON *nccl, const char *key, const char *file, double scale, gboolean positive,
                          double out[TOPO_N_PROTOS], GError **error) {
  const cJSON *obj = ptd_json_object(nccl, key, file, error);
  if (!obj)
    return FALSE;
  for (int p = 0; p < TOPO_N_PROTOS; p++) {
    char *k = g_strdup_printf("%s.%s", key, topo_proto_name((TopoProto)p));
    double v;
    gboolean ok = ptd_json_number(obj, topo_proto_name((TopoProto)p), file, &v, error);
    if (ok && (v < 0 || (positive && v == 0))) {
      g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "%s: key 'nccl.%s' must be %s", file, k,
                  positive ? "greater than zero" : "zero or more");
      ok = FALSE;
    }
    g_free(k);
    if (!ok)
      return FALSE;
    out[p] = v * scale;
  }
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
  const cJSON *nvlink, *network, *nccl;
  double allreduce, p2p, p2p_lat_intra, nic, p2p_lat_inter;
  if (!ptd_json_count(root, "nodes", file, &c->nodes, error) ||
      !ptd_json_count(root, "gpus_per_node", file, &c->gpus_per_node, error) ||
      !ptd_json_count(root, "nics_per_node", file, &n->nics_per_node, error) ||
      !(nvlink = ptd_json_object(root, "nvlink", file, error)) ||
      !ptd_json_positive(nvlink, "allreduce_busbw_GBps", file, &allreduce, error) ||
      !ptd_json_positive(nvlink, "p2p_GBps", file, &p2p, error) ||
      !ptd_json_number(nvlink, "p2p_latency_us", file, &p2p_lat_intra, error) ||
      !(network = ptd_json_object(root, "network", file, error)) ||
      !ptd_json_positive(network, "nic_GBps", file, &nic, error) ||
      !ptd_json_number(network, "p2p_latency_us", file, &p2p_lat_inter, error) ||
      !(nccl = ptd_json_object(root, "nccl", file, error)) ||
      !per_proto(nccl, "ring_base_us", file, 1e-6, FALSE, n->ring_base, error) ||
      !per_proto(nccl, "nvlink_hop_us", file, 1e-6, FALSE, n->nvlink_hop, error) ||
      !per_proto(nccl, "net_hop_us", file, 1e-6, FALSE, n->net_hop, error) ||
      !per_proto(nccl, "protocol_bandwidth_factor", file, 1.0, TRUE, n->proto_bw_factor, error))
    return FALSE;
  if (p2p_lat_intra < 0 || p2p_lat_inter < 0) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "%s: point-to-point latencies must be zero or more",
                file);
    return FALSE;
  }
  /* optional: NCCL's point-to-point channels (cluster.h) */
  double channels = 2, channel_GBps = 14;
  if (cJSON_GetObjectItemCaseSensitive(nccl, "p2p_channels_per_net_peer") &&
      !ptd_json_positive(nccl, "p2p_channels_per_net_peer", file, &channels, error))
    return FALSE;
  if (cJSON_GetObjectItemCaseSensitive(nccl, "p2p_channel_GBps") &&
      !ptd_json_positive(nccl, "p2p_channel_GBps", file, &channel_GBps, error))
    return FALSE;
  if (channels != (guint)channels || channels > 32) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: key 'nccl.p2p_channels_per_net_peer' must be a whole number from 1 to 32", file);
    return FALSE;
  }
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
