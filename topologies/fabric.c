/* ptdsim — the cluster's link graph and its routes (see fabric.h). */
#include "fabric.h"

#include "cluster.h"

#include <math.h>
#include <string.h>

#include "../base/jsonutil.h"
#include "../base/ranges.h"

G_DEFINE_QUARK(topo-fabric-error-quark, topo_fabric_error)

enum { NET_RAIL_FAT_TREE, NET_SINGLE_SWITCH };

typedef struct {
  guint a, b; /* template vertices */
  double bw, lat;
} TLink;

typedef struct {
  guint from, to;
  double bw, lat;
} Link;

struct _TopoFabric {
  guint nodes, G, N; /* nodes, GPUs and NICs per node */
  gboolean nvswitch;
  guint P, C;        /* PCIe switches and CPUs per node */
  guint v_node;      /* vertices per node */
  guint pcie0, cpu0, nic0; /* template vertex bases */
  GArray *tlinks;    /* TLink: the node template's physical links */
  /* network */
  int kind;
  guint units, nodes_per_unit, units_per_pod, pods;
  guint S, Cg;       /* spines per (pod, rail) group; cores per core group */
  guint U;           /* uplinks per leaf */
  guint *spine_up;   /* [e]: uplinks of a spine with index e in its group */
  guint *spine_off;  /* [spine]: first of its uplinks, prefix sums */
  guint n_leaves, n_spines, n_cores;
  guint base_net, base_ls, base_sc; /* directed link id bases */
  guint v_switch0;   /* first network vertex */
  TopoRouting routing;
  Link *links;
  guint n_links;
  /* template routes: [src * G + dst] GPU to GPU, and [G*G + g * N + k] GPU g to NIC k;
   * each a GPtrArray of GArray(guint template directed link ids) */
  GPtrArray **troutes;
  guint *ring;
};

/* --- small helpers --- */

static guint64 mix64(guint64 x) { /* splitmix64 finalizer: a well-spread flow hash */
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

static gboolean fail(GError **error, int code, const char *file, const char *fmt, ...) G_GNUC_PRINTF(4, 5);
static gboolean fail(GError **error, int code, const char *file, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, TOPO_FABRIC_ERROR, code, "%s: %s", file, msg);
  g_free(msg);
  return FALSE;
}

/* A number at obj[key], named "path.key" in errors, in `range`
 * (base/ranges.h); `dflt` < 0 means required. */
static gboolean num(const cJSON *obj, const char *path, const char *key, double dflt, const PtdRange *range,
                    const char *file, double *out, GError **error) {
  const cJSON *it = obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
  if (!it) {
    if (dflt >= 0) {
      *out = dflt;
      return TRUE;
    }
    return fail(error, TOPO_FABRIC_ERROR_INVALID, file, "key '%s.%s' is missing", path, key);
  }
  if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
    return fail(error, TOPO_FABRIC_ERROR_INVALID, file, "key '%s.%s' must be a number", path, key);
  *out = it->valuedouble;
  if (range->whole && *out != floor(*out))
    return fail(error, TOPO_FABRIC_ERROR_INVALID, file, "key '%s.%s' must be a whole number", path, key);
  char *key_path = g_strdup_printf("%s.%s", path, key);
  gboolean ok = ptd_range_check(*out, range, file, key_path, error);
  g_free(key_path);
  return ok;
}

static gboolean count(const cJSON *obj, const char *path, const char *key, double dflt, const PtdRange *range,
                      const char *file, guint *out, GError **error) {
  double v;
  if (!num(obj, path, key, dflt, range, file, &v, error))
    return FALSE;
  *out = (guint)v;
  return TRUE;
}

static void tlink(TopoFabric *f, guint a, guint b, double bw, double lat) {
  TLink l = {a, b, bw, lat};
  g_array_append_val(f->tlinks, l);
}

/* --- template routes: all shortest paths, GPUs never in transit --- */

typedef struct {
  guint to, dlink; /* neighbour, template directed link id */
} Adj;

static void enumerate(const TopoFabric *f, GArray **adj, const guint *dist, guint at, guint dst, GArray *stack,
                      GPtrArray *out) {
  if (at == dst) {
    GArray *path = g_array_new(FALSE, FALSE, sizeof(guint));
    g_array_append_vals(path, stack->data, stack->len);
    g_ptr_array_add(out, path);
    return;
  }
  if (out->len >= 64)
    return;
  for (guint i = 0; i < adj[at]->len; i++) {
    Adj a = g_array_index(adj[at], Adj, i);
    if (dist[a.to] + 1 != dist[at] || (a.to < f->G && a.to != dst))
      continue; /* GPUs other than the destination do not forward */
    g_array_append_val(stack, a.dlink);
    enumerate(f, adj, dist, a.to, dst, stack, out);
    g_array_set_size(stack, stack->len - 1);
  }
}

static double tpath_bw(const TopoFabric *f, const GArray *path) {
  double bw = INFINITY;
  for (guint i = 0; i < path->len; i++)
    bw = fmin(bw, g_array_index(f->tlinks, TLink, g_array_index(path, guint, i) / 2).bw);
  return bw;
}

/* Shortest paths from template vertex src to dst; GPUs other than the two
 * ends do not forward.  Empty when unreachable. */
static GPtrArray *paths(const TopoFabric *f, GArray **adj, guint src, guint dst) {
  guint V = f->v_node;
  guint *dist = g_new(guint, V);
  for (guint v = 0; v < V; v++)
    dist[v] = G_MAXUINT;
  /* BFS from dst backwards (links are symmetric, so distances agree). */
  guint *queue = g_new(guint, V), qh = 0, qt = 0;
  dist[dst] = 0;
  queue[qt++] = dst;
  while (qh < qt) {
    guint v = queue[qh++];
    if (v < f->G && v != dst)
      continue; /* a GPU is an end point, not a router */
    for (guint i = 0; i < adj[v]->len; i++) {
      Adj a = g_array_index(adj[v], Adj, i);
      if (dist[a.to] == G_MAXUINT) {
        dist[a.to] = dist[v] + 1;
        queue[qt++] = a.to;
      }
    }
  }
  GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)(void (*)(void))g_array_unref);
  if (dist[src] != G_MAXUINT) {
    GArray *stack = g_array_new(FALSE, FALSE, sizeof(guint));
    /* walk forward from src along decreasing distance; from src the first hop
     * may leave a GPU, later hops never enter a GPU except dst */
    enumerate(f, adj, dist, src, dst, stack, out);
    g_array_free(stack, TRUE);
    /* Of the shortest paths keep the widest (NVLink over PCIe, as NCCL's
     * topology search does). */
    double widest = 0;
    for (guint i = 0; i < out->len; i++)
      widest = fmax(widest, tpath_bw(f, g_ptr_array_index(out, i)));
    for (guint i = out->len; i-- > 0;)
      if (tpath_bw(f, g_ptr_array_index(out, i)) < widest * (1 - 1e-9))
        g_ptr_array_remove_index(out, i);
  }
  g_free(dist);
  g_free(queue);
  return out;
}


/* Depth-first search for the cycle through every GPU whose slowest edge is
 * fastest (ties: the first found, so lexicographically smallest). */
static void ring_search(const TopoFabric *f, guint *cur, guint depth, gboolean *used, double minbw, guint *best,
                        double *best_ring_bw) {
  guint G = f->G;
  if (depth == G) {
    double close = tpath_bw(f, g_ptr_array_index(f->troutes[cur[G - 1] * G + cur[0]], 0));
    double bw = fmin(minbw, close);
    if (bw > *best_ring_bw * (1 + 1e-12)) {
      *best_ring_bw = bw;
      memcpy(best, cur, sizeof(guint) * G);
    }
    return;
  }
  for (guint g = 1; g < G; g++) {
    if (used[g])
      continue;
    const GArray *p = g_ptr_array_index(f->troutes[cur[depth - 1] * G + g], 0);
    double bw = fmin(minbw, tpath_bw(f, p));
    if (bw <= *best_ring_bw)
      continue; /* cannot beat the best found */
    used[g] = TRUE;
    cur[depth] = g;
    ring_search(f, cur, depth + 1, used, bw, best, best_ring_bw);
    used[g] = FALSE;
  }
}

static gboolean build_template_routes(TopoFabric *f, const char *file, GError **error) {
  guint V = f->v_node, G = f->G, N = f->N;
  GArray **adj = g_new(GArray *, V);
  for (guint v = 0; v < V; v++)
    adj[v] = g_array_new(FALSE, FALSE, sizeof(Adj));
  for (guint i = 0; i < f->tlinks->len; i++) {
    TLink l = g_array_index(f->tlinks, TLink, i);
    Adj ab = {l.b, 2 * i}, ba = {l.a, 2 * i + 1};
    g_array_append_val(adj[l.a], ab);
    g_array_append_val(adj[l.b], ba);
  }
  guint n = G * G + G * N;
  f->troutes = g_new0(GPtrArray *, n);
  gboolean ok = TRUE;
  for (guint s = 0; s < G && ok; s++)
    for (guint d = 0; d < G && ok; d++) {
      f->troutes[s * G + d] = paths(f, adj, s, d);
      if (s != d && f->troutes[s * G + d]->len == 0)
        ok = fail(error, TOPO_FABRIC_ERROR_DISCONNECTED, file,
                  "fabric.node: GPU %u cannot reach GPU %u inside a node (disconnected graph: give the node an "
                  "nvswitch, nvlink_pairs or pcie_switches)",
                  s, d);
    }
  for (guint g = 0; g < G && ok; g++)
    for (guint k = 0; k < N && ok; k++) {
      /* With an NVSwitch a GPU only ever sends through its own NIC (other
       * rails are reached by PXN over NVLink: topo_fabric_route), so in a
       * domain of trays whose PCIe trees are not joined only those are built. */
      if (f->nvswitch && k != topo_fabric_gpu_nic(f, g)) {
        f->troutes[G * G + g * N + k] = g_ptr_array_new();
        continue;
      }
      f->troutes[G * G + g * N + k] = paths(f, adj, g, f->nic0 + k);
      if (f->troutes[G * G + g * N + k]->len == 0)
        ok = fail(error, TOPO_FABRIC_ERROR_DISCONNECTED, file,
                  "fabric.node: GPU %u cannot reach NIC %u (disconnected graph: connect NICs and GPUs through "
                  "pcie_switches)",
                  g, k);
    }
  for (guint v = 0; v < V; v++)
    g_array_free(adj[v], TRUE);
  g_free(adj);
  if (!ok)
    return FALSE;
  f->ring = g_new(guint, G);
  for (guint g = 0; g < G; g++)
    f->ring[g] = g;
  if (!f->nvswitch && G > 2 && G <= 12) {
    guint cur[12], best[12];
    gboolean used[12] = {FALSE};
    cur[0] = 0;
    used[0] = TRUE;
    double best_bw = 0;
    memcpy(best, f->ring, sizeof(guint) * G);
    ring_search(f, cur, 1, used, INFINITY, best, &best_bw);
    memcpy(f->ring, best, sizeof(guint) * G);
  }
  return TRUE;
}

/* --- building --- */

static gboolean build_node(TopoFabric *f, const cJSON *node, const char *file, GError **error) {
  guint G = f->G;
  const cJSON *nvs = cJSON_GetObjectItemCaseSensitive(node, "nvswitch");
  const cJSON *pairs = cJSON_GetObjectItemCaseSensitive(node, "nvlink_pairs");
  f->nvswitch = nvs != NULL;
  double pcie_bw, pcie_lat, cpu_bw;
  if (!count(node, "fabric.node", "pcie_switches", 1, &ptd_range_per_node, file, &f->P, error) ||
      !count(node, "fabric.node", "cpus", 0, &ptd_range_cpus, file, &f->C, error) ||
      !num(node, "fabric.node", "pcie_GBps", -1, &ptd_range_bandwidth_GBps, file, &pcie_bw, error) ||
      !num(node, "fabric.node", "pcie_latency_us", 0, &ptd_range_latency_us, file, &pcie_lat, error) ||
      !num(node, "fabric.node", "cpu_link_GBps", 20, &ptd_range_bandwidth_GBps, file, &cpu_bw, error))
    return FALSE;
  if (f->P == 0)
    return fail(error, TOPO_FABRIC_ERROR_INVALID, file, "key 'fabric.node.pcie_switches' must be at least 1");
  f->pcie0 = G + (f->nvswitch ? 1 : 0);
  f->cpu0 = f->pcie0 + f->P;
  f->nic0 = f->cpu0 + f->C;
  f->v_node = f->nic0 + f->N;
  pcie_bw *= 1e9;
  pcie_lat *= 1e-6;
  if (f->nvswitch) {
    double bw, eff, lat;
    if (!cJSON_IsObject(nvs))
      return fail(error, TOPO_FABRIC_ERROR_INVALID, file, "key 'fabric.node.nvswitch' must be an object");
    if (!num(nvs, "fabric.node.nvswitch", "GBps", -1, &ptd_range_bandwidth_GBps, file, &bw, error) ||
        !num(nvs, "fabric.node.nvswitch", "efficiency", 1, &ptd_range_efficiency, file, &eff, error) ||
        !num(nvs, "fabric.node.nvswitch", "latency_us", 0, &ptd_range_latency_us, file, &lat, error))
      return FALSE;
    if (eff > 1)
      return fail(error, TOPO_FABRIC_ERROR_INVALID, file, "key 'fabric.node.nvswitch.efficiency' must be in (0, 1]");
    for (guint g = 0; g < G; g++)
      tlink(f, g, G, bw * eff * 1e9, lat * 1e-6);
  }
  if (pairs) {
    double bw, eff, lat;
    const cJSON *nvl = cJSON_GetObjectItemCaseSensitive(node, "nvlink");
    if (!num(nvl, "fabric.node.nvlink", "GBps_per_link", -1, &ptd_range_bandwidth_GBps, file, &bw, error) ||
        !num(nvl, "fabric.node.nvlink", "efficiency", 1, &ptd_range_efficiency, file, &eff, error) ||
        !num(nvl, "fabric.node.nvlink", "latency_us", 0, &ptd_range_latency_us, file, &lat, error))
      return FALSE;
    if (!cJSON_IsArray(pairs))
      return fail(error, TOPO_FABRIC_ERROR_INVALID, file, "key 'fabric.node.nvlink_pairs' must be an array");
    int i = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, pairs) {
      const cJSON *a = cJSON_GetArrayItem(p, 0), *b = cJSON_GetArrayItem(p, 1), *n = cJSON_GetArrayItem(p, 2);
      if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 3 || !cJSON_IsNumber(a) || !cJSON_IsNumber(b) ||
          !cJSON_IsNumber(n))
        return fail(error, TOPO_FABRIC_ERROR_INVALID, file,
                    "fabric.node.nvlink_pairs[%d] must be [gpu, gpu, links] (three numbers)", i);
      for (int e = 0; e < 2; e++) {
        double id = e ? b->valuedouble : a->valuedouble;
        if (id < 0 || id >= G || id != floor(id))
          return fail(error, TOPO_FABRIC_ERROR_INVALID, file,
                      "fabric.node.nvlink_pairs[%d]: GPU %g does not exist (the node's GPUs are 0..%u)", i, id,
                      G - 1);
      }
      if (a->valuedouble == b->valuedouble)
        return fail(error, TOPO_FABRIC_ERROR_INVALID, file, "fabric.node.nvlink_pairs[%d] joins GPU %g to itself",
                    i, a->valuedouble);
      if (!(n->valuedouble >= 1) || n->valuedouble != floor(n->valuedouble) || n->valuedouble > 64)
        return fail(error, TOPO_FABRIC_ERROR_INVALID, file,
                    "fabric.node.nvlink_pairs[%d]: the link count %g must be a whole number from 1 to 64", i,
                    n->valuedouble);
      tlink(f, (guint)a->valuedouble, (guint)b->valuedouble, n->valuedouble * bw * eff * 1e9, lat * 1e-6);
      i++;
    }
  }
  for (guint g = 0; g < G; g++)
    tlink(f, g, f->pcie0 + g * f->P / G, pcie_bw, pcie_lat);
  for (guint k = 0; k < f->N; k++)
    tlink(f, f->nic0 + k, f->pcie0 + k * f->P / f->N, pcie_bw, pcie_lat);
  if (f->C > 0) {
    for (guint p = 0; p < f->P; p++)
      tlink(f, f->pcie0 + p, f->cpu0 + p * f->C / f->P, pcie_bw, pcie_lat);
    for (guint c = 0; c + 1 < f->C; c++)
      tlink(f, f->cpu0 + c, f->cpu0 + c + 1, cpu_bw * 1e9, pcie_lat);
  }
  return TRUE;
}

static void add_link(TopoFabric *f, guint id, guint from, guint to, double bw, double lat) {
  f->links[id] = (Link){from, to, bw, lat};
}

static void add_pair(TopoFabric *f, guint id, guint a, guint b, double bw, double lat) {
  add_link(f, id, a, b, bw, lat);
  add_link(f, id + 1, b, a, bw, lat);
}

static guint nic_vertex(const TopoFabric *f, guint node, guint k) { return node * f->v_node + f->nic0 + k; }
static guint leaf_of(const TopoFabric *f, guint node, guint rail) {
  return (node / f->nodes_per_unit) * f->N + rail;
}
static guint spine_of(const TopoFabric *f, guint pod, guint rail, guint e) { return (pod * f->N + rail) * f->S + e; }

static gboolean build_network(TopoFabric *f, const cJSON *net, const char *file, GError **error) {
  const char *kind = ptd_json_string(net, "kind", file, error);
  if (!kind)
    return FALSE;
  double link_bw, eff, lat;
  if (!num(net, "fabric.network", "link_GBps", -1, &ptd_range_bandwidth_GBps, file, &link_bw, error) ||
      !num(net, "fabric.network", "efficiency", 1, &ptd_range_efficiency, file, &eff, error) ||
      !num(net, "fabric.network", "hop_latency_us", 0, &ptd_range_latency_us, file, &lat, error))
    return FALSE;
  if (eff > 1)
    return fail(error, TOPO_FABRIC_ERROR_INVALID, file, "key 'fabric.network.efficiency' must be in (0, 1]");
  link_bw *= eff * 1e9;
  lat *= 1e-6;
  guint ports = 0;
  if (strcmp(kind, "rail-fat-tree") == 0) {
    f->kind = NET_RAIL_FAT_TREE;
    if (!count(net, "fabric.network", "nodes_per_unit", -1, &ptd_range_nodes, file, &f->nodes_per_unit, error) ||
        !count(net, "fabric.network", "units_per_pod", -1, &ptd_range_nodes, file, &f->units_per_pod, error) ||
        !count(net, "fabric.network", "switch_ports", -1, &ptd_range_nodes, file, &ports, error))
      return FALSE;
    if (f->nodes_per_unit == 0 || f->units_per_pod == 0)
      return fail(error, TOPO_FABRIC_ERROR_INVALID, file,
                  "keys 'fabric.network.nodes_per_unit' and 'units_per_pod' must be at least 1");
    if (ports < 2 * f->nodes_per_unit)
      return fail(error, TOPO_FABRIC_ERROR_INVALID, file,
                  "fabric.network: a %u-port leaf cannot take %u nodes down and as many links up (non-blocking); "
                  "use switch_ports >= %u",
                  ports, f->nodes_per_unit, 2 * f->nodes_per_unit);
  } else if (strcmp(kind, "single-switch") == 0) {
    f->kind = NET_SINGLE_SWITCH;
    f->nodes_per_unit = f->nodes;
    f->units_per_pod = 1;
  } else
    return fail(error, TOPO_FABRIC_ERROR_INVALID, file,
                "fabric.network.kind '%s' is unknown; use rail-fat-tree or single-switch", kind);
  f->units = (f->nodes + f->nodes_per_unit - 1) / f->nodes_per_unit;
  f->pods = (f->units + f->units_per_pod - 1) / f->units_per_pod;
  guint N = f->N;
  if (f->kind == NET_SINGLE_SWITCH) {
    f->n_leaves = 1;
    f->S = f->Cg = 0;
  } else {
    f->n_leaves = f->units * N;
    if (f->units > 1) {
      /* Spines per (pod, rail) group: the pod's leaves of that rail bring
       * units_per_pod * nodes_per_unit uplinks; a spine takes all its ports
       * down, or half when a core layer sits above it. */
      guint down = f->pods > 1 ? ports / 2 : ports;
      guint pod_units = MIN(f->units, f->units_per_pod);
      f->S = MIN((pod_units * f->nodes_per_unit + down - 1) / down, f->nodes_per_unit);
    }
  }
  f->n_spines = f->pods * N * f->S;
  f->v_switch0 = f->nodes * f->v_node;
  /* Leaf uplinks: as many as the leaf has nodes below it (non-blocking), one
   * link each, uplink u to spine u mod S of the leaf's (pod, rail) group.  A
   * spine has as many uplinks to the core as it has links down; its uplink v
   * goes to core v mod Cg of core group e (the spine's index in its group). */
  guint U = f->nodes_per_unit, pod_units = MIN(f->units, f->units_per_pod);
  f->U = U;
  f->spine_up = g_new0(guint, MAX(f->S, 1));
  for (guint e = 0; e < f->S; e++)
    f->spine_up[e] = pod_units * ((U - e + f->S - 1) / f->S);
  if (f->pods > 1) {
    guint dmax = f->spine_up[0];
    f->Cg = (f->pods * N * dmax + ports - 1) / ports;
  }
  f->n_cores = f->S * f->Cg;
  guint L_t = f->tlinks->len;
  f->base_net = f->nodes * L_t * 2;
  f->base_ls = f->base_net + f->nodes * N * 2;
  f->base_sc = f->base_ls + (f->S ? f->n_leaves * U * 2 : 0);
  f->spine_off = g_new0(guint, f->n_spines + 1);
  for (guint sp = 0; sp < f->n_spines; sp++)
    f->spine_off[sp + 1] = f->spine_off[sp] + (f->Cg ? f->spine_up[sp % f->S] : 0);
  f->n_links = f->base_sc + f->spine_off[f->n_spines] * 2;
  f->links = g_new(Link, MAX(f->n_links, 1));
  for (guint n = 0; n < f->nodes; n++)
    for (guint i = 0; i < L_t; i++) {
      TLink l = g_array_index(f->tlinks, TLink, i);
      add_pair(f, (n * L_t + i) * 2, n * f->v_node + l.a, n * f->v_node + l.b, l.bw, l.lat);
    }
  guint leaf0 = f->v_switch0, spine0 = leaf0 + f->n_leaves, core0 = spine0 + f->n_spines;
  for (guint n = 0; n < f->nodes; n++)
    for (guint k = 0; k < N; k++)
      add_pair(f, f->base_net + (n * N + k) * 2, nic_vertex(f, n, k),
               leaf0 + (f->kind == NET_SINGLE_SWITCH ? 0 : leaf_of(f, n, k)), link_bw, lat);
  for (guint leaf = 0; leaf < f->n_leaves && f->S; leaf++) {
    guint unit = leaf / N, rail = leaf % N, pod = unit / f->units_per_pod;
    for (guint u = 0; u < U; u++)
      add_pair(f, f->base_ls + (leaf * U + u) * 2, leaf0 + leaf, spine0 + spine_of(f, pod, rail, u % f->S), link_bw,
               lat);
  }
  for (guint sp = 0; sp < f->n_spines && f->Cg; sp++) {
    guint e = sp % f->S;
    for (guint v = 0; v < f->spine_up[e]; v++)
      add_pair(f, f->base_sc + (f->spine_off[sp] + v) * 2, spine0 + sp, core0 + e * f->Cg + v % f->Cg, link_bw, lat);
  }
  return TRUE;
}

/* Every vertex must reach GPU 0 (links are symmetric). */
static gboolean check_connected(TopoFabric *f, const char *file, GError **error) {
  guint V = f->v_switch0 + f->n_leaves + f->n_spines + f->n_cores;
  guint *off = g_new0(guint, V + 1), *list = g_new(guint, MAX(f->n_links, 1));
  for (guint l = 0; l < f->n_links; l++)
    off[f->links[l].from + 1]++;
  for (guint v = 0; v < V; v++)
    off[v + 1] += off[v];
  guint *fill = g_memdup2(off, sizeof(guint) * V);
  for (guint l = 0; l < f->n_links; l++)
    list[fill[f->links[l].from]++] = f->links[l].to;
  guint8 *seen = g_new0(guint8, V);
  guint *queue = g_new(guint, V), qh = 0, qt = 0;
  seen[0] = 1;
  queue[qt++] = 0;
  while (qh < qt) {
    guint v = queue[qh++];
    for (guint k = off[v]; k < off[v + 1]; k++)
      if (!seen[list[k]]) {
        seen[list[k]] = 1;
        queue[qt++] = list[k];
      }
  }
  guint bad = G_MAXUINT;
  for (guint n = 0; n < f->nodes && bad == G_MAXUINT; n++)
    for (guint g = 0; g < f->G; g++)
      if (!seen[n * f->v_node + g]) {
        bad = n * f->v_node + g;
        break;
      }
  g_free(off);
  g_free(list);
  g_free(fill);
  g_free(seen);
  g_free(queue);
  if (bad != G_MAXUINT) {
    char *name = topo_fabric_vertex_name(f, bad);
    fail(error, TOPO_FABRIC_ERROR_DISCONNECTED, file,
         "fabric: %s cannot reach n0.gpu0 (disconnected graph: give every node at least one NIC and a network)",
         name);
    g_free(name);
    return FALSE;
  }
  return TRUE;
}

TopoFabric *topo_fabric_build(const cJSON *fabric, const char *file, guint nodes, guint gpus_per_node,
                              guint nics_per_node, GError **error) {
  TopoFabric *f = g_new0(TopoFabric, 1);
  f->nodes = nodes;
  f->G = gpus_per_node;
  f->N = nics_per_node;
  f->tlinks = g_array_new(FALSE, FALSE, sizeof(TLink));
  const cJSON *node = cJSON_GetObjectItemCaseSensitive(fabric, "node");
  const cJSON *net = cJSON_GetObjectItemCaseSensitive(fabric, "network");
  const cJSON *routing = cJSON_GetObjectItemCaseSensitive(fabric, "routing");
  gboolean ok = TRUE;
  if (!cJSON_IsObject(fabric))
    ok = fail(error, TOPO_FABRIC_ERROR_INVALID, file,
              "key 'fabric' is missing or not an object; the flow network needs the cluster's link graph (see "
              "topologies/selene.json)");
  else if (!cJSON_IsObject(node) || !cJSON_IsObject(net))
    ok = fail(error, TOPO_FABRIC_ERROR_INVALID, file, "key 'fabric.%s' is missing or not an object",
              cJSON_IsObject(node) ? "network" : "node");
  else if (nodes == 0 || gpus_per_node == 0 || gpus_per_node > PTD_MAX_DOMAIN_NICS || nics_per_node == 0 ||
           nics_per_node > PTD_MAX_DOMAIN_NICS)
    ok = fail(error, TOPO_FABRIC_ERROR_INVALID, file,
              "the fabric needs 1..%u GPUs and 1..%u NICs per NVLink domain and at least one domain",
              PTD_MAX_DOMAIN_NICS, PTD_MAX_DOMAIN_NICS);
  if (ok && routing) {
    if (cJSON_IsString(routing) && strcmp(routing->valuestring, "ecmp") == 0)
      f->routing = TOPO_ROUTING_ECMP;
    else if (cJSON_IsString(routing) && strcmp(routing->valuestring, "adaptive") == 0)
      f->routing = TOPO_ROUTING_ADAPTIVE;
    else
      ok = fail(error, TOPO_FABRIC_ERROR_INVALID, file, "key 'fabric.routing' must be \"ecmp\" or \"adaptive\"");
  }
  ok = ok && build_node(f, node, file, error) && build_network(f, net, file, error) &&
       build_template_routes(f, file, error) && check_connected(f, file, error);
  if (!ok) {
    topo_fabric_free(f);
    return NULL;
  }
  return f;
}

TopoFabric *topo_fabric_load(const char *cluster_path, GError **error) {
  cJSON *root = ptd_json_load(cluster_path, error);
  if (!root)
    return NULL;
  guint nodes = 0, gpn = 0, nics = 0;
  TopoFabric *f = NULL;
  if (topo_cluster_size_check(root, cluster_path, &nodes, &gpn, &nics, NULL, error))
    f = topo_fabric_build(cJSON_GetObjectItemCaseSensitive(root, "fabric"), cluster_path, nodes, gpn, nics, error);
  cJSON_Delete(root);
  return f;
}

void topo_fabric_free(TopoFabric *f) {
  if (!f)
    return;
  if (f->troutes) {
    for (guint i = 0; i < f->G * f->G + f->G * f->N; i++)
      if (f->troutes[i])
        g_ptr_array_unref(f->troutes[i]);
    g_free(f->troutes);
  }
  g_array_free(f->tlinks, TRUE);
  g_free(f->links);
  g_free(f->ring);
  g_free(f->spine_up);
  g_free(f->spine_off);
  g_free(f);
}

/* --- queries --- */

guint topo_fabric_n_vertices(const TopoFabric *f) { return f->v_switch0 + f->n_leaves + f->n_spines + f->n_cores; }
guint topo_fabric_n_links(const TopoFabric *f) { return f->n_links; }
guint topo_fabric_nodes(const TopoFabric *f) { return f->nodes; }
guint topo_fabric_gpus_per_node(const TopoFabric *f) { return f->G; }
guint topo_fabric_nics_per_node(const TopoFabric *f) { return f->N; }
void topo_fabric_switches(const TopoFabric *f, guint *leaves, guint *spines, guint *cores) {
  *leaves = f->n_leaves;
  *spines = f->n_spines;
  *cores = f->n_cores;
}
double topo_fabric_link_bw(const TopoFabric *f, guint link) { return f->links[link].bw; }
double topo_fabric_link_latency(const TopoFabric *f, guint link) { return f->links[link].lat; }
guint topo_fabric_link_from(const TopoFabric *f, guint link) { return f->links[link].from; }
guint topo_fabric_link_to(const TopoFabric *f, guint link) { return f->links[link].to; }
guint topo_fabric_gpu_vertex(const TopoFabric *f, guint gpu) { return (gpu / f->G) * f->v_node + gpu % f->G; }
gboolean topo_fabric_has_nvswitch(const TopoFabric *f) { return f->nvswitch; }
gboolean topo_fabric_nvswitch_links(const TopoFabric *f, guint gpu, guint *up, guint *down) {
  if (!f->nvswitch || gpu >= f->nodes * f->G)
    return FALSE;
  /* build_node adds the GPU-switch links first, GPU g's as template link g */
  guint id = ((gpu / f->G) * f->tlinks->len + gpu % f->G) * 2;
  *up = id;
  *down = id + 1;
  return TRUE;
}
TopoRouting topo_fabric_routing(const TopoFabric *f) { return f->routing; }
void topo_fabric_set_routing(TopoFabric *f, TopoRouting routing) { f->routing = routing; }
guint topo_fabric_gpu_nic(const TopoFabric *f, guint local_gpu) { return topo_gpu_nic(local_gpu, f->G, f->N); }
const guint *topo_fabric_node_ring(const TopoFabric *f) { return f->ring; }

char *topo_fabric_vertex_name(const TopoFabric *f, guint v) {
  if (v < f->v_switch0) {
    guint n = v / f->v_node, l = v % f->v_node;
    if (l < f->G)
      return g_strdup_printf("n%u.gpu%u", n, l);
    if (f->nvswitch && l == f->G)
      return g_strdup_printf("n%u.nvswitch", n);
    if (l < f->cpu0)
      return g_strdup_printf("n%u.pcie%u", n, l - f->pcie0);
    if (l < f->nic0)
      return g_strdup_printf("n%u.cpu%u", n, l - f->cpu0);
    return g_strdup_printf("n%u.nic%u", n, l - f->nic0);
  }
  v -= f->v_switch0;
  if (v < f->n_leaves)
    return f->kind == NET_SINGLE_SWITCH ? g_strdup("switch") : g_strdup_printf("u%u.leaf%u", v / f->N, v % f->N);
  v -= f->n_leaves;
  if (v < f->n_spines)
    return g_strdup_printf("p%u.r%u.spine%u", v / (f->N * f->S), (v / f->S) % f->N, v % f->S);
  v -= f->n_spines;
  return g_strdup_printf("core%u.%u", v / MAX(f->Cg, 1), v % MAX(f->Cg, 1));
}

/* --- routes --- */

static void push(GArray *hops, guint link, double coef) {
  TopoHop h = {link, coef};
  g_array_append_val(hops, h);
}

/* Appends a template path of node `n` (reversed: walked from its end back). */
static double push_tpath(const TopoFabric *f, guint n, const GArray *path, gboolean reversed, double coef,
                         GArray *hops) {
  guint L_t = f->tlinks->len;
  double lat = 0;
  for (guint i = 0; i < path->len; i++) {
    guint dl = g_array_index(path, guint, reversed ? path->len - 1 - i : i);
    if (reversed)
      dl ^= 1;
    guint id = (n * L_t + dl / 2) * 2 + dl % 2;
    push(hops, id, coef);
    lat += f->links[id].lat;
  }
  return lat;
}

/* A template route (GPtrArray of paths) by ECMP or spread. */
static double push_troute(const TopoFabric *f, guint n, GPtrArray *alts, gboolean reversed, guint64 hash,
                          GArray *hops) {
  if (f->routing == TOPO_ROUTING_ADAPTIVE && alts->len > 1) {
    double lat = 0;
    for (guint i = 0; i < alts->len; i++)
      lat = push_tpath(f, n, g_ptr_array_index(alts, i), reversed, 1.0 / alts->len, hops);
    return lat;
  }
  return push_tpath(f, n, g_ptr_array_index(alts, mix64(hash) % alts->len), reversed, 1.0, hops);
}

double topo_fabric_route(const TopoFabric *f, guint src, guint dst, guint64 hash, GArray *hops) {
  guint G = f->G, N = f->N;
  guint na = src / G, nb = dst / G, i = src % G, j = dst % G;
  if (src == dst)
    return 0;
  if (na == nb)
    return push_troute(f, na, f->troutes[i * G + j], FALSE, hash, hops);
  guint k = topo_fabric_gpu_nic(f, j);
  double lat = 0;
  if (topo_fabric_gpu_nic(f, i) != k && f->nvswitch) {
    /* PXN: over NVLink to the local GPU on the destination's rail, then out. */
    lat += push_troute(f, na, f->troutes[i * G + j], FALSE, hash, hops);
    lat += push_troute(f, na, f->troutes[G * G + j * N + k], FALSE, hash, hops);
  } else
    lat += push_troute(f, na, f->troutes[G * G + i * N + k], FALSE, hash, hops);
  /* NIC k of node a up to its leaf */
  guint up = f->base_net + (na * N + k) * 2, down = f->base_net + (nb * N + k) * 2 + 1;
  push(hops, up, 1.0);
  lat += f->links[up].lat;
  if (f->kind == NET_RAIL_FAT_TREE) {
    guint ua = na / f->nodes_per_unit, ub = nb / f->nodes_per_unit;
    if (ua != ub) {
      /* up through leaf uplink u (spine e = u mod S), across the core through
       * spine uplink v when the pods differ, and down the same indices on the
       * far side */
      guint la = ua * N + k, lb = ub * N + k, pa = ua / f->units_per_pod, pb = ub / f->units_per_pod;
      guint64 h = mix64(hash ^ 0x5bd1e995u);
      gboolean spread = f->routing == TOPO_ROUTING_ADAPTIVE;
      guint u0 = spread ? 0 : (guint)(h % f->U), u1 = spread ? f->U : u0 + 1;
      for (guint u = u0; u < u1; u++) {
        double cu = 1.0 / (u1 - u0);
        guint e = u % f->S;
        push(hops, f->base_ls + (la * f->U + u) * 2, cu);
        if (pa != pb) {
          guint sa = spine_of(f, pa, k, e), sb = spine_of(f, pb, k, e), d = f->spine_up[e];
          guint v0 = spread ? 0 : (guint)(mix64(h + 1) % d), v1 = spread ? d : v0 + 1;
          for (guint v = v0; v < v1; v++) {
            push(hops, f->base_sc + (f->spine_off[sa] + v) * 2, cu / (v1 - v0));
            push(hops, f->base_sc + (f->spine_off[sb] + v) * 2 + 1, cu / (v1 - v0));
          }
        }
        push(hops, f->base_ls + (lb * f->U + u) * 2 + 1, cu);
      }
      lat += f->links[f->base_ls].lat * (pa != pb ? 4 : 2);
    }
  }
  push(hops, down, 1.0);
  lat += f->links[down].lat;
  lat += push_troute(f, nb, f->troutes[G * G + j * N + k], TRUE, hash, hops);
  return lat;
}
