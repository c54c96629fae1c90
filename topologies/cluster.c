/* ptdsim — cluster loading (see cluster.h). */
#include "cluster.h"

#include "../base/jsonutil.h"
#include "../base/ranges.h"

#include <math.h>

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

double topo_nvls_algbw(const TopoNet *net, gboolean allreduce, guint ranks) {
  if (!net->has_nvls || ranks < 2)
    return 0;
  double n = ranks, c = net->nvls_channels;
  double bus = net->nvls_bw * net->nvls_eff * (c - 1) / c;
  return allreduce ? 2 * bus * n / (2 * (n - 1)) : bus * (n - 1) / n;
}

double topo_nvls_exec(const TopoNet *net, TopoNvlsOp op, guint ranks, double *out, double *in) {
  *out = *in = 0;
  if (!net->has_nvls || ranks < 2)
    return 0;
  double slice = 1.0 / ranks;
  *out = op == TOPO_NVLS_ALLGATHER ? slice : 1 + (op == TOPO_NVLS_ALLREDUCE ? slice : 0);
  *in = op == TOPO_NVLS_REDUCESCATTER ? slice : 1 + (op == TOPO_NVLS_ALLREDUCE ? slice : 0);
  return net->nvlink_busbw * net->nvls_eff;
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
                                 guint *nics_per_node, guint *gpus_per_host, GError **error) {
  double n, g, nics, domain;
  if (!ptd_json_in(root, "nodes", file, &ptd_range_nodes, &n, error) ||
      !ptd_json_in(root, "gpus_per_node", file, &ptd_range_per_node, &g, error) ||
      !ptd_json_in(root, "nics_per_node", file, &ptd_range_per_node, &nics, error) ||
      !ptd_json_in_or(root, "nvlink_domain_gpus", file, &ptd_range_nvlink_domain, g, &domain, error))
    return FALSE;
  if (n * g > PTD_MAX_CLUSTER_GPUS) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: keys 'nodes' x 'gpus_per_node' give %.0f GPUs, more than the %u a cluster may have", file, n * g,
                PTD_MAX_CLUSTER_GPUS);
    return FALSE;
  }
  /* An NVLink domain of several nodes (GB200 NVL72: 18 trays of 4 GPUs on
   * NVLink switch trays) is what NCCL sees as one node: with multi-node
   * NVLink it fuses the topology of every GPU of the NVLink clique into one
   * system and searches rings and trees over it (NVIDIA/nccl src/mnnvl.cc,
   * ncclMnnvlCheck; src/graph/topo.cc, "MNNVL clique support"), and counts
   * NVLink domains as its nodes (src/init.cc, initNvlDomainInfo).  So the
   * simulator's node is the domain: its GPUs and the NICs of all its trays. */
  if (domain < g || fmod(domain, g) != 0) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: key 'nvlink_domain_gpus' is %.0f, not a whole number of nodes of %.0f GPUs; give a multiple of "
                "gpus_per_node",
                file, domain, g);
    return FALSE;
  }
  if (fmod(n * g, domain) != 0) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: an NVLink domain of %.0f GPUs does not divide the cluster's %.0f GPUs (%.0f nodes of %.0f); give "
                "'nodes' as a multiple of %.0f",
                file, domain, n * g, n, g, domain / g);
    return FALSE;
  }
  if (nics * (domain / g) > PTD_MAX_DOMAIN_NICS) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: an NVLink domain of %.0f GPUs holds %.0f NICs, more than the %u one domain may have", file,
                domain, nics * (domain / g), PTD_MAX_DOMAIN_NICS);
    return FALSE;
  }
  *nodes = (guint)(n * g / domain);
  *gpus_per_node = (guint)domain;
  *nics_per_node = (guint)(nics * (domain / g));
  if (gpus_per_host)
    *gpus_per_host = (guint)g;
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
  /* the board power cap its operator sets on every GPU (0: the part's own) */
  if (!ptd_json_in_or(root, "gpu_power_limit_W", file, &ptd_range_power_W, 0, &c->gpu_power_limit_W, error))
    return FALSE;
  /* what a GPU-hour costs on it (0: not known) */
  if (!ptd_json_in_or(root, "price_per_gpu_hour", file, &ptd_range_price, 0, &c->price_per_gpu_hour, error))
    return FALSE;
  TopoNet *n = &c->net;
  double allreduce, p2p, p2p_lat_intra, nic, p2p_lat_inter;
  if (!topo_cluster_size_check(root, file, &c->nodes, &c->gpus_per_node, &n->nics_per_node, &c->gpus_per_host,
                               error) ||
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
  const cJSON *nccl = cJSON_GetObjectItemCaseSensitive(root, "nccl");
  n->collective_channels = 0;
  if (cJSON_GetObjectItemCaseSensitive(nccl, "collective_channels")) {
    double held;
    if (!ptd_json_in(root, "nccl.collective_channels", file, &ptd_range_channels, &held, error))
      return FALSE;
    n->collective_channels = (guint)held;
  }
  if (cJSON_GetObjectItemCaseSensitive(nccl, "nvls")) {
    double bw, eff, ch, lat;
    if (!ptd_json_object(nccl, "nvls", file, error) ||
        !ptd_json_in(root, "nccl.nvls.GBps", file, &ptd_range_bandwidth_GBps, &bw, error) ||
        !ptd_json_in(root, "nccl.nvls.efficiency", file, &ptd_range_efficiency, &eff, error) ||
        !ptd_json_in(root, "nccl.nvls.channels", file, &ptd_range_nvls_channels, &ch, error) ||
        !ptd_json_in(root, "nccl.nvls.latency_us", file, &ptd_range_latency_us, &lat, error))
      return FALSE;
    n->has_nvls = TRUE;
    n->nvls_bw = bw * 1e9;
    n->nvls_eff = eff;
    n->nvls_channels = (guint)ch;
    n->nvls_latency = lat * 1e-6;
    const cJSON *nv = cJSON_GetObjectItemCaseSensitive(nccl, "nvls");
    if (cJSON_GetObjectItemCaseSensitive(nv, "tree")) {
      double hop, cap2, cap3;
      if (!ptd_json_object(nv, "tree", file, error) ||
          !ptd_json_in(root, "nccl.nvls.tree.net_hop_us", file, &ptd_range_latency_us, &hop, error) ||
          !ptd_json_in(root, "nccl.nvls.tree.channel_cap_2_nodes_GBps", file, &ptd_range_bandwidth_GBps, &cap2,
                       error) ||
          !ptd_json_in(root, "nccl.nvls.tree.channel_cap_3_or_more_nodes_GBps", file, &ptd_range_bandwidth_GBps,
                       &cap3, error))
        return FALSE;
      n->has_nvls_tree = TRUE;
      n->nvls_tree_net_hop = hop * 1e-6;
      n->nvls_tree_cap[0] = cap2 * 1e9;
      n->nvls_tree_cap[1] = cap3 * 1e9;
    }
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
  return topo_cluster_load_sized(name_or_file, 0, error);
}

TopoCluster *topo_cluster_load_sized(const char *name_or_file, guint nodes, GError **error) {
  char *path = ptd_data_resolve("topologies", name_or_file, "cluster", error);
  if (!path)
    return NULL;
  cJSON *root = ptd_json_load(path, error);
  cJSON *n = nodes ? cJSON_GetObjectItemCaseSensitive(root, "nodes") : NULL;
  if (n && cJSON_IsNumber(n))
    cJSON_SetNumberValue(n, nodes);
  TopoCluster *c = root ? topo_cluster_from_json(root, path, error) : NULL;
  g_free(path);
  return c;
}
