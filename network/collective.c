/* ptdsim — NCCL collectives on the cluster graph (see collective.h). */
#include "collective.h"

#include <stdio.h>

#include <math.h>
#include <string.h>

#include "../base/jsonutil.h"
#include "../base/ranges.h"
#include "flow.h"
#include "../base/heap.h"

G_DEFINE_QUARK(net-coll-error-quark, net_coll_error)

struct _NetModel {
  TopoFabric *fabric;
  TopoNet nccl;
  gboolean has_tree;
  double tree_base[TOPO_N_PROTOS], tree_nvlink_hop[TOPO_N_PROTOS], tree_net_hop[TOPO_N_PROTOS];
  /* NCCL's per-channel bandwidth caps in its tuner, B/s (INFINITY: none) */
  double ll128_per_channel, tree_per_channel[3], net_channel, ll_max[3];
  double *capacity;
  guint *local_pos; /* position of each local GPU in the node ring */
  const guint8 *side; /* bisection sides, or NULL */
  gboolean no_latency; /* building the tuner's bandwidth probe: flows only */
  double crossing[2]; /* crossing bytes of the plan being built: side 0 -> 1, side 1 -> 0 */
  NetRun *probe;      /* net_coll_plan_time's network, reset between uses */
};

typedef struct {
  GArray *hops; /* TopoHop */
  double bytes;
} Flow;

/* A phase: `latency_s` (NCCL's base latency: launch and setup) before its
 * flows start, then the flows.  Once the flows have taken T (at least
 * `min_xfer_s`, the tuner's transfer term: NCCL's per-channel caps are
 * rates its protocols do not exceed), the phase ends at
 *
 *     start of flows + max(T, chain_s + T / slices)
 *
 * a ring (or tree) of K dependent steps, each a per-step latency alpha plus
 * its chunk's transfer c = T / K, each chunk cut into `slices` that go on as
 * soon as they arrive (a step then takes max(c, alpha + c / slices)).
 *
 * LL and LL128 (rings and trees): slices = 1 (their primitives'
 * SlicePerChunk in NCCL v2.12), so the latency is added, T + sum alpha, and
 * `chain_s` sums PHYSICAL per-step latencies, not the tuner's: an NVLink
 * step NCCL's table value of the protocol (ring 0.47 / 1.9 us, tree 0.52 /
 * 1.25), a network step the fabric's path latency between the two GPUs
 * (added by ring_flows / tree_flows from the routes) plus NCCL's per-step
 * cost through its network proxy, the table's value (ring 2.7 / 4.0 us,
 * tree 5.0 / 8.5).
 *
 * Simple is treated differently: in one node the table's latency
 * added (slices = 1; the in-node nccl-tests curve and Table 1 were checked
 * with it), across nodes the table's hops overlapped (slices = INFINITY:
 * base + max(hops, T)).  Both physical alternatives break a target
 * (doc/network.md): the table's 3.4 us per NVLink step
 * added over 2(n-1) steps takes the 1 GiB all-reduce on 256 GPUs to
 * 162 GB/s; NCCL's 2 slices per chunk for Simple (ALLREDUCE_CHUNKSTEPS /
 * ALLREDUCE_SLICESTEPS) hide the chain at 1 GiB but, in one node too, make
 * Table 1 4.2%.  The tuner keeps the full table to CHOOSE (net_coll_plan);
 * only the executed time uses the above. */
typedef struct {
  double latency_s, chain_s, slices, min_xfer_s;
  guint net_steps; /* network steps of the chain, each adding the path latency */
  GPtrArray *flows; /* Flow* */
} Phase;

struct _NetCollPlan {
  NetCollAlgo algo;
  TopoProto proto;
  double crossing_bytes[2]; /* side 0 -> 1, side 1 -> 0 */
  GPtrArray *phases; /* Phase* */
};

/* --- loading --- */

NetModel *net_model_load(const TopoCluster *cluster, GError **error) {
  const cJSON *root = cluster->json;
  TopoFabric *fabric = topo_fabric_build(cJSON_GetObjectItemCaseSensitive(root, "fabric"), cluster->path,
                                         cluster->nodes, cluster->gpus_per_node, cluster->net.nics_per_node, error);
  if (!fabric)
    return NULL;
  NetModel *net = g_new0(NetModel, 1);
  net->fabric = fabric;
  net->nccl = cluster->net;
  const cJSON *nccl = cJSON_GetObjectItemCaseSensitive(root, "nccl");
  gboolean ok = TRUE;
  if (ok && cJSON_GetObjectItemCaseSensitive(nccl, "tree_base_us")) {
    ok = topo_json_per_proto(root, "tree_base_us", cluster->path, 1e-6, &ptd_range_latency_us, net->tree_base, error) &&
         topo_json_per_proto(root, "tree_nvlink_hop_us", cluster->path, 1e-6, &ptd_range_latency_us,
                             net->tree_nvlink_hop, error) &&
         topo_json_per_proto(root, "tree_net_hop_us", cluster->path, 1e-6, &ptd_range_latency_us, net->tree_net_hop,
                             error);
    net->has_tree = ok;
  }
  net->ll128_per_channel = net->net_channel = INFINITY;
  for (int i = 0; i < 3; i++)
    net->tree_per_channel[i] = net->ll_max[i] = INFINITY;
  if (ok && cJSON_GetObjectItemCaseSensitive(nccl, "channel_caps_GBps")) {
    /* optional: NCCL v2.12's per-channel caps (tuning.cc) and the speed its
     * ring search gives one NIC channel (search.cc) */
    static const char *keys[8] = {"ll128", "net_channel", "tree_1_node", "tree_2_nodes", "tree_3_or_more_nodes",
                                  "ll_1_node", "ll_2_nodes", "ll_3_or_more_nodes"};
    double *outs[8] = {&net->ll128_per_channel, &net->net_channel, &net->tree_per_channel[0],
                       &net->tree_per_channel[1], &net->tree_per_channel[2], &net->ll_max[0], &net->ll_max[1],
                       &net->ll_max[2]};
    ok = ptd_json_object(nccl, "channel_caps_GBps", cluster->path, error) != NULL;
    for (int i = 0; ok && i < 8; i++) {
      char *k = g_strconcat("nccl.channel_caps_GBps.", keys[i], NULL);
      ok = ptd_json_in(root, k, cluster->path, &ptd_range_bandwidth_GBps, outs[i], error);
      g_free(k);
    }
    if (ok) {
      net->ll128_per_channel *= 1e9;
      net->net_channel *= 1e9;
      for (int i = 0; i < 3; i++) {
        net->tree_per_channel[i] *= 1e9;
        net->ll_max[i] *= 1e9;
      }
    }
  }
  if (!ok) {
    net_model_free(net);
    return NULL;
  }
  guint L = topo_fabric_n_links(fabric), G = topo_fabric_gpus_per_node(fabric);
  net->capacity = g_new(double, MAX(L, 1));
  for (guint l = 0; l < L; l++)
    net->capacity[l] = topo_fabric_link_bw(fabric, l);
  net->local_pos = g_new(guint, G);
  const guint *ring = topo_fabric_node_ring(fabric);
  for (guint i = 0; i < G; i++)
    net->local_pos[ring[i]] = i;
  return net;
}

void net_model_scale_nics(NetModel *net, const double *factor) {
  guint L = topo_fabric_n_links(net->fabric), nodes = topo_fabric_nodes(net->fabric);
  guint nics = topo_fabric_nics_per_node(net->fabric);
  for (guint l = 0; l < L; l++) {
    guint ends[2] = {topo_fabric_link_from(net->fabric, l), topo_fabric_link_to(net->fabric, l)};
    for (guint j = 0; j < 2; j++) {
      char *name = topo_fabric_vertex_name(net->fabric, ends[j]);
      guint node, nic;
      char tail;
      if (sscanf(name, "n%u.nic%u%c", &node, &nic, &tail) == 2 && node < nodes && nic < nics &&
          factor[node * nics + nic] < 1) {
        net->capacity[l] *= factor[node * nics + nic];
        j = 2; /* once per link */
      }
      g_free(name);
    }
  }
  net_model_drop_probe(net);
}

void net_model_free(NetModel *net) {
  if (!net)
    return;
  net_run_free(net->probe);
  topo_fabric_free(net->fabric);
  g_free(net->capacity);
  g_free(net->local_pos);
  g_free(net);
}

TopoFabric *net_model_fabric(NetModel *net) { return net->fabric; }

const char *net_coll_algo_name(NetCollAlgo a) {
  static const char *names[] = {"auto", "ring", "tree", "hierarchical", "p2p", "nvls", "nvls-tree"};
  return names[a];
}

gboolean net_coll_algo_parse(const char *text, NetCollAlgo *out) {
  for (int a = NET_ALGO_AUTO; a <= NET_ALGO_NVLS_TREE; a++)
    if (a != NET_ALGO_P2P && strcmp(text, net_coll_algo_name((NetCollAlgo)a)) == 0) {
      *out = (NetCollAlgo)a;
      return TRUE;
    }
  return FALSE;
}

/* --- plans --- */

static Phase *phase_new(NetCollPlan *plan, double latency, double chain, double slices) {
  Phase *ph = g_new0(Phase, 1);
  ph->latency_s = latency;
  ph->chain_s = chain;
  ph->slices = slices;
  ph->flows = g_ptr_array_new();
  g_ptr_array_add(plan->phases, ph);
  return ph;
}

static Flow *flow_new(Phase *ph, double bytes) {
  Flow *f = g_new0(Flow, 1);
  f->hops = g_array_new(FALSE, FALSE, sizeof(TopoHop));
  f->bytes = bytes;
  g_ptr_array_add(ph->flows, f);
  return f;
}

void net_coll_plan_free(NetCollPlan *plan) {
  if (!plan)
    return;
  for (guint i = 0; i < plan->phases->len; i++) {
    Phase *ph = g_ptr_array_index(plan->phases, i);
    for (guint j = 0; j < ph->flows->len; j++) {
      Flow *f = g_ptr_array_index(ph->flows, j);
      g_array_free(f->hops, TRUE);
      g_free(f);
    }
    g_ptr_array_free(ph->flows, TRUE);
    g_free(ph);
  }
  g_ptr_array_free(plan->phases, TRUE);
  g_free(plan);
}

NetCollPlan *net_coll_plan_together(NetCollPlan *a, NetCollPlan *b) {
  if (b->phases->len == 0) {
    net_coll_plan_free(b);
    return a;
  }
  if (a->phases->len == 0) {
    net_coll_plan_free(a);
    return b;
  }
  g_assert(a->phases->len == 1 && b->phases->len == 1);
  Phase *pa = g_ptr_array_index(a->phases, 0), *pb = g_ptr_array_index(b->phases, 0);
  g_assert(pa->chain_s == 0 && pb->chain_s == 0 && pa->net_steps == 0 && pb->net_steps == 0);
  pa->latency_s = MAX(pa->latency_s, pb->latency_s);
  pa->min_xfer_s = MAX(pa->min_xfer_s, pb->min_xfer_s);
  for (guint j = 0; j < pb->flows->len; j++)
    g_ptr_array_add(pa->flows, g_ptr_array_index(pb->flows, j));
  g_ptr_array_set_size(pb->flows, 0);
  for (guint d = 0; d < 2; d++)
    a->crossing_bytes[d] += b->crossing_bytes[d];
  net_coll_plan_free(b);
  return a;
}

static NetCollPlan *plan_new(NetCollAlgo algo, TopoProto proto) {
  NetCollPlan *p = g_new0(NetCollPlan, 1);
  p->algo = algo;
  p->proto = proto;
  p->phases = g_ptr_array_new();
  return p;
}

NetCollAlgo net_coll_plan_algo(const NetCollPlan *p) { return p->algo; }
TopoProto net_coll_plan_proto(const NetCollPlan *p) { return p->proto; }

/* One group's layout: its nodes in order of first appearance, and each
 * node's members in node-ring order. */
typedef struct {
  guint n_nodes;
  guint *node;   /* [n_nodes] */
  guint *off;    /* [n_nodes + 1] into mem */
  guint *mem;    /* [n] global GPU ids */
  guint m_min, m_max;
} Layout;

static void layout(const NetModel *net, const guint *gpus, guint n, Layout *lo) {
  guint G = topo_fabric_gpus_per_node(net->fabric);
  lo->node = g_new(guint, n);
  lo->off = g_new0(guint, n + 1);
  lo->mem = g_new(guint, n);
  lo->n_nodes = 0;
  guint *which = g_new(guint, n);
  /* a group over many nodes (a data-parallel group of thousands) finds its
   * nodes by a table, not by a scan of those seen */
  GHashTable *seen = n > 64 ? g_hash_table_new(g_direct_hash, g_direct_equal) : NULL;
  for (guint r = 0; r < n; r++) {
    guint nd = gpus[r] / G, k = 0;
    if (seen) {
      gpointer v = g_hash_table_lookup(seen, GUINT_TO_POINTER(nd + 1));
      k = v ? GPOINTER_TO_UINT(v) - 1 : lo->n_nodes;
    } else
      while (k < lo->n_nodes && lo->node[k] != nd)
        k++;
    if (k == lo->n_nodes) {
      lo->node[lo->n_nodes++] = nd;
      if (seen)
        g_hash_table_insert(seen, GUINT_TO_POINTER(nd + 1), GUINT_TO_POINTER(k + 1));
    }
    which[r] = k;
    lo->off[k + 1]++;
  }
  if (seen)
    g_hash_table_destroy(seen);
  for (guint k = 0; k < lo->n_nodes; k++)
    lo->off[k + 1] += lo->off[k];
  guint *fill = g_memdup2(lo->off, sizeof(guint) * (lo->n_nodes + 1));
  for (guint r = 0; r < n; r++) {
    /* insertion by ring position keeps each node's members in ring order */
    guint k = which[r], at = fill[k]++;
    while (at > lo->off[k] && net->local_pos[lo->mem[at - 1] % G] > net->local_pos[gpus[r] % G]) {
      lo->mem[at] = lo->mem[at - 1];
      at--;
    }
    lo->mem[at] = gpus[r];
  }
  lo->m_min = G_MAXUINT;
  lo->m_max = 0;
  for (guint k = 0; k < lo->n_nodes; k++) {
    guint m = lo->off[k + 1] - lo->off[k];
    lo->m_min = MIN(lo->m_min, m);
    lo->m_max = MAX(lo->m_max, m);
  }
  g_free(fill);
  g_free(which);
}

static void layout_clear(Layout *lo) {
  g_free(lo->node);
  g_free(lo->off);
  g_free(lo->mem);
}

static guint64 edge_hash(guint64 salt, guint channel, guint a, guint b) {
  return salt * 0x9e3779b97f4a7c15ull ^ ((guint64)channel << 48) ^ ((guint64)a << 24) ^ b;
}

/* Routes edge a -> b into flow f; `data` is the edge's payload in bytes, for
 * the bisection count. */
static double add_route(NetModel *net, Flow *f, guint a, guint b, guint64 hash, double data) {
  double lat = topo_fabric_route(net->fabric, a, b, hash, f->hops);
  if (net->side && net->side[a] < 2 && net->side[b] < 2 && net->side[a] != net->side[b])
    net->crossing[net->side[a]] += data;
  return lat;
}

void net_model_set_sides(NetModel *net, const guint8 *side) { net->side = side; }
double net_coll_plan_crossing_bytes(const NetCollPlan *p, guint direction) {
  g_return_val_if_fail(direction < 2, 0);
  return p->crossing_bytes[direction];
}

/* Channels of a ring: one per rail the group can use across nodes; inside
 * a node without NVSwitch, the ring and its reverse. */
static guint ring_channels(const NetModel *net, const Layout *lo) {
  if (lo->n_nodes == 1)
    return topo_fabric_has_nvswitch(net->fabric) ? 1 : 2;
  return MAX(1, MIN(lo->m_min, topo_fabric_nics_per_node(net->fabric)));
}

/* Where channel c enters node k of a group across nodes: the offset among
 * the node's members of the first on the c-th of the NICs its members sit
 * on (in order of first appearance), so that C channels over a node of C
 * NICs use every NIC once, however many GPUs share one.  NCCL's search
 * (src/graph/search.cc, ncclTopoSearchRecNet and its NET-to-GPU steps)
 * starts each channel of an inter-node ring or tree at a NIC, enters the
 * node at a GPU near it and, without NCCL_CROSS_NIC, leaves it by the same
 * NIC (trees always: "Trees are symmetric"); the NIC's bandwidth is taken
 * per channel, so channels spread over the NICs before sharing one.  With
 * one NIC per member this is member c, as a plain rotation gives. */
static guint channel_entry(const NetModel *net, const Layout *lo, guint k, guint c, guint *exit) {
  guint m = lo->off[k + 1] - lo->off[k], G = topo_fabric_gpus_per_node(net->fabric);
  const guint *mem = lo->mem + lo->off[k];
  guint nics[PTD_MAX_DOMAIN_NICS], d = 0;
  for (guint j = 0; j < m && d < PTD_MAX_DOMAIN_NICS; j++) {
    guint nic = topo_fabric_gpu_nic(net->fabric, mem[j] % G), i = 0;
    while (i < d && nics[i] != nic)
      i++;
    if (i == d)
      nics[d++] = nic;
  }
  guint want = nics[c % MAX(d, 1u)], at = c % m;
  for (guint j = 0; j < m; j++)
    if (topo_fabric_gpu_nic(net->fabric, mem[j] % G) == want) {
      at = j;
      break;
    }
  /* the ring leaves by the same NIC from another GPU on it (the last), where
   * NVSwitch lets the node's chain run in any order */
  *exit = G_MAXUINT;
  for (guint j = m; topo_fabric_has_nvswitch(net->fabric) && j-- > 0;)
    if (j != at && topo_fabric_gpu_nic(net->fabric, mem[j] % G) == want) {
      *exit = j;
      break;
    }
  return at;
}

/* The ring sequence of channel c: each node's members from where the
 * channel enters it to where it leaves (channel_entry); in one node from
 * its c-th. */
static void ring_seq(const NetModel *net, const Layout *lo, guint c, gboolean reverse, guint *seq) {
  guint at = 0;
  for (guint k = 0; k < lo->n_nodes; k++) {
    guint m = lo->off[k + 1] - lo->off[k], exit = G_MAXUINT;
    guint first = lo->n_nodes > 1 ? channel_entry(net, lo, k, c, &exit) : c % m;
    for (guint j = 0; j < m; j++)
      if ((first + j) % m != exit)
        seq[at++] = lo->mem[lo->off[k] + (first + j) % m];
    if (exit != G_MAXUINT)
      seq[at++] = lo->mem[lo->off[k] + exit];
  }
  if (reverse)
    for (guint i = 0; i < at / 2; i++) {
      guint t = seq[i];
      seq[i] = seq[at - 1 - i];
      seq[at - 1 - i] = t;
    }
}

/* NCCL's ring latency: base + intra-node steps * NVLink hop + inter-node
 * steps * network hop (hardware.json nccl.latencies_us_v2_12.ring_latency). */
static void ring_hops2(const NetModel *net, NetCollOp op, guint ranks, guint nodes, TopoProto p, double *in_node,
                       double *across) {
  const TopoNet *nc = &net->nccl;
  guint factor = op == NET_OP_ALLREDUCE ? 2 : 1;
  guint steps = factor * (ranks - 1), inter = nodes > 1 ? factor * nodes : 0;
  guint intra = steps > inter ? steps - inter : 0;
  *in_node = intra * nc->nvlink_hop[p];
  *across = inter * nc->net_hop[p];
}

static double ring_hops(const NetModel *net, NetCollOp op, guint ranks, guint nodes, TopoProto p) {
  double a, b;
  ring_hops2(net, op, ranks, nodes, p, &a, &b);
  return a + b;
}

static double ring_latency(const NetModel *net, NetCollOp op, guint ranks, guint nodes, TopoProto p) {
  return net->nccl.ring_base[p] + ring_hops(net, op, ranks, nodes, p);
}

/* NCCL's per-step cost of a network step through its proxy for LL and
 * LL128, without the path (see Phase). */
static double net_step_overhead(const NetModel *net, TopoProto p) { return net->nccl.net_hop[p]; }

/* A ring phase: NCCL's base latency first; the chain of 2(n-1) (all-reduce)
 * or n-1 steps with physical per-step latencies; the path latency of each
 * network step is added by ring_flows once the routes are known. */
static Phase *ring_phase(NetCollPlan *plan, const NetModel *net, NetCollOp op, guint ranks, guint nodes,
                         TopoProto p) {
  guint factor = op == NET_OP_ALLREDUCE ? 2 : 1;
  guint steps = factor * (ranks - 1), inter = nodes > 1 ? factor * nodes : 0;
  guint intra = steps > inter ? steps - inter : 0;
  if (net->no_latency)
    return phase_new(plan, 0, 0, 1);
  if (p == TOPO_PROTO_SIMPLE) {
    /* Simple (see Phase): the table's
     * latency added in one node, its hops overlapped across nodes */
    double hops = intra * net->nccl.nvlink_hop[p] + inter * net->nccl.net_hop[p];
    return nodes <= 1 ? phase_new(plan, net->nccl.ring_base[p] + hops, 0, 1)
                      : phase_new(plan, net->nccl.ring_base[p], hops, INFINITY);
  }
  Phase *ph = phase_new(plan, net->nccl.ring_base[p],
                        intra * net->nccl.nvlink_hop[p] + inter * net_step_overhead(net, p), 1);
  ph->net_steps = inter;
  return ph;
}

static double bus_factor(NetCollOp op, guint n) {
  return op == NET_OP_ALLREDUCE ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
}

/* Ring flows of every group into `ph`, edge bytes from `bytes`. */
static void ring_flows(NetModel *net, Phase *ph, NetCollOp op, const guint *gpus, guint n, guint n_groups,
                       double bytes, TopoProto proto, guint64 salt) {
  guint *seq = g_new(guint, n), G = topo_fabric_gpus_per_node(net->fabric);
  double path = 0; /* the slowest network path of a ring edge, s */
  for (guint g = 0; g < n_groups; g++) {
    Layout lo;
    layout(net, gpus + (gsize)g * n, n, &lo);
    guint C = ring_channels(net, &lo);
    double edge = bytes * bus_factor(op, n) / C / net->nccl.proto_bw_factor[proto];
    for (guint c = 0; c < C; c++) {
      gboolean rev = lo.n_nodes == 1 && c % 2 == 1;
      ring_seq(net, &lo, lo.n_nodes == 1 ? 0 : c, rev, seq);
      Flow *f = flow_new(ph, edge);
      for (guint i = 0; i < n; i++) {
        double lat = add_route(net, f, seq[i], seq[(i + 1) % n], edge_hash(salt + g, c, seq[i], seq[(i + 1) % n]),
                               edge * net->nccl.proto_bw_factor[proto]);
        if (seq[i] / G != seq[(i + 1) % n] / G)
          path = fmax(path, lat);
      }
    }
    layout_clear(&lo);
  }
  ph->chain_s += ph->net_steps * path;
  g_free(seq);
}

/* NCCL's binary tree over node ranks 0..M-1: the parent of r is found from
 * its lowest set bit b: (r ^ b) | 2b, or r ^ b when that is out of range. */
static gint btree_parent(guint r, guint M) {
  if (r == 0)
    return -1;
  guint b = r & (~r + 1);
  guint up = (r ^ b) | (b << 1);
  return (gint)(up >= M ? (r ^ b) : up);
}

/* Returns the slowest network path between a node and its parent, s.
 * `chain`: with the chain inside each node (NCCL's tree); without, the trees
 * between the channels' entry GPUs only (NVLS-tree's heads). */
static double tree_flows(NetModel *net, Phase *ph, const guint *gpus, guint n, guint n_groups, double bytes,
                         TopoProto proto, guint64 salt, gboolean chain) {
  double path = 0;
  for (guint g = 0; g < n_groups; g++) {
    Layout lo;
    layout(net, gpus + (gsize)g * n, n, &lo);
    guint C = ring_channels(net, &lo), M = lo.n_nodes;
    double share = bytes / (2.0 * C) / net->nccl.proto_bw_factor[proto];
    guint *entry = g_new(guint, M); /* per node: channel c's entry member (its position in the node) */
    for (guint c = 0; c < C; c++) {
      for (guint k = 0; k < M; k++) {
        guint exit;
        entry[k] = M > 1 ? channel_entry(net, &lo, k, c, &exit) : c % (lo.off[k + 1] - lo.off[k]);
      }
      for (guint t = 0; t < 2; t++) {
        Flow *f = flow_new(ph, share);
        for (guint k = 0; chain && k < M; k++) { /* the chain inside node k, both ways, from the channel's entry */
          guint m = lo.off[k + 1] - lo.off[k], e = entry[k];
          for (guint j = 0; j + 1 < m; j++) {
            guint a = lo.mem[lo.off[k] + (j + e) % m], b = lo.mem[lo.off[k] + (j + 1 + e) % m];
            add_route(net, f, a, b, edge_hash(salt + g, c, a, b), share * net->nccl.proto_bw_factor[proto]);
            add_route(net, f, b, a, edge_hash(salt + g, c, b, a), share * net->nccl.proto_bw_factor[proto]);
          }
        }
        for (guint r = 0; r < M; r++) {
          /* tree 1 mirrors tree 0, so that leaves of one are inner nodes of the other */
          guint me = t ? M - 1 - r : r;
          gint par = btree_parent(r, M);
          if (par < 0)
            continue;
          guint pk = t ? M - 1 - (guint)par : (guint)par;
          guint a = lo.mem[lo.off[me] + entry[me]], b = lo.mem[lo.off[pk] + entry[pk]];
          path = fmax(path, add_route(net, f, a, b, edge_hash(salt + g, c * 2 + t, a, b),
                                      share * net->nccl.proto_bw_factor[proto]));
          path = fmax(path, add_route(net, f, b, a, edge_hash(salt + g, c * 2 + t, b, a),
                                      share * net->nccl.proto_bw_factor[proto]));
        }
      }
    }
    g_free(entry);
    layout_clear(&lo);
  }
  return path;
}

/* NVLS-tree (see collective.h): its heads per node, one GPU per NIC in use
 * (NCCL's NVLS graph, src/graph/search.cc: a head is a GPU with its NIC), 0
 * where it does not apply: an all-reduce across two or more nodes of a
 * cluster whose nccl.nvls block has "tree", with an NVSwitch, NCCL's NIC
 * speed (nccl.channel_caps_GBps.net_channel) and at least two heads (NCCL:
 * "NVLS/NVLStree needs at least 2 channels"). */
static guint nvls_tree_heads(const NetModel *net, NetCollOp op, guint M, guint m_min) {
  if (op != NET_OP_ALLREDUCE || M < 2 || !net->nccl.has_nvls || !net->nccl.has_nvls_tree ||
      !topo_fabric_has_nvswitch(net->fabric) || !isfinite(net->net_channel))
    return 0;
  guint h = MIN(m_min, topo_fabric_nics_per_node(net->fabric));
  return h >= 2 ? h : 0;
}

/* NCCL's latency for NVLS-tree (src/graph/tuning.cc): the NVLS NVLink
 * latency plus 2 log2i(nodes) network steps (log2i rounds down). */
static double nvls_tree_latency(const NetModel *net, guint M) {
  guint depth = 0;
  while ((2u << depth) <= M)
    depth++;
  return net->nccl.nvls_latency + 2.0 * depth * net->nccl.nvls_tree_net_hop;
}

/* NCCL's algorithm bandwidth for NVLS-tree (src/graph/tuning.cc): h
 * channels of min(bwIntra x nvlsEfficiency x (h - 1)/h x 2, bwInter (x 2 on
 * two nodes), perChMaxNVLSTreeBw), where the NVLS graph's search gives
 * bwIntra = bwInter = the NIC's speed; times n / 2(n - 1) as a ring's. */
static double nvls_tree_algbw(const NetModel *net, guint n, guint M, guint h) {
  double b = net->net_channel;
  double intra = b * net->nccl.nvls_eff * (h - 1.0) / h * 2.0, inter = b * (M <= 2 ? 2.0 : 1.0);
  double ch = fmin(fmin(intra, inter), net->nccl.nvls_tree_cap[M <= 2 ? 0 : 1]);
  return h * ch * n / (2.0 * (n - 1));
}

static NetCollPlan *build(NetModel *net, NetCollOp op, NetCollAlgo algo, TopoProto proto, const guint *gpus,
                          guint n, guint n_groups, double bytes, guint64 salt, GError **error) {
  Layout lo;
  layout(net, gpus, n, &lo);
  guint M = lo.n_nodes, m_min = lo.m_min, m_max = lo.m_max;
  layout_clear(&lo);
  NetCollPlan *plan = plan_new(algo, proto);
  if (n <= 1 || bytes <= 0)
    return plan;
  net->crossing[0] = net->crossing[1] = 0;
  switch (algo) {
  case NET_ALGO_RING:
    ring_flows(net, ring_phase(plan, net, op, n, M, proto), op, gpus, n, n_groups, bytes, proto, salt);
    memcpy(plan->crossing_bytes, net->crossing, sizeof net->crossing);
    return plan;
  case NET_ALGO_TREE: {
    if (op != NET_OP_ALLREDUCE || !net->has_tree) {
      g_set_error(error, NET_COLL_ERROR, 0, "%s",
                  op != NET_OP_ALLREDUCE ? "--algorithm tree applies to allreduce only; use ring"
                                         : "the cluster's nccl block has no tree latencies (tree_base_us ...); use ring");
      break;
    }
    /* the chain up the tree and down again: m-1 NVLink steps and log2(M)
     * network steps each way, at physical per-step latencies (see Phase:
     * Simple's tree table values, 28 us, are penalties; its NVLink step is
     * the ring's, its network step LL128's) plus the path */
    double depth = log2((double)M);
    double chain = 2 * ((m_max - 1) * net->tree_nvlink_hop[proto] + depth * net->tree_net_hop[proto]);
    gboolean simple = proto == TOPO_PROTO_SIMPLE;
    Phase *ph = phase_new(plan, net->tree_base[proto], chain, simple ? INFINITY : 1);
    double path = tree_flows(net, ph, gpus, n, n_groups, bytes, proto, salt, TRUE);
    if (!simple)
      ph->chain_s += 2 * depth * path;
    memcpy(plan->crossing_bytes, net->crossing, sizeof net->crossing);
    return plan;
  }
  case NET_ALGO_HIER: {
    if (op != NET_OP_ALLREDUCE || M < 2 || m_min != m_max || m_min < 2) {
      g_set_error(error, NET_COLL_ERROR, 0,
                  "--algorithm hierarchical needs an allreduce over two or more nodes with the same number (2 or "
                  "more) of GPUs on each; use ring or tree");
      break;
    }
    guint m = m_min;
    /* Phase 1 and 3: inside each node over m ranks; phase 2: m rings of M
     * ranks (the j-th member of every node) over 1/m of the data. */
    guint *sub = g_new(guint, (gsize)n * n_groups);
    for (guint ph = 0; ph < 3; ph++) {
      NetCollOp sop = ph == 0 ? NET_OP_REDUCESCATTER : ph == 1 ? NET_OP_ALLREDUCE : NET_OP_ALLGATHER;
      guint size = ph == 1 ? M : m, groups = ph == 1 ? m * n_groups : M * n_groups;
      for (guint g = 0; g < n_groups; g++) {
        Layout l2;
        layout(net, gpus + (gsize)g * n, n, &l2);
        for (guint k = 0; k < M; k++)
          for (guint j = 0; j < m; j++) {
            guint gpu = l2.mem[l2.off[k] + j];
            if (ph == 1)
              sub[((gsize)g * m + j) * M + k] = gpu;
            else
              sub[((gsize)g * M + k) * m + j] = gpu;
          }
        layout_clear(&l2);
      }
      Phase *p = ring_phase(plan, net, sop, size, ph == 1 ? M : 1, proto);
      ring_flows(net, p, sop, sub, size, groups, ph == 1 ? bytes / m : bytes, proto, salt + 7919 * ph);
    }
    g_free(sub);
    memcpy(plan->crossing_bytes, net->crossing, sizeof net->crossing);
    return plan;
  }
  case NET_ALGO_NVLS: {
    TopoFabric *fab = net->fabric;
    double algbw = M == 1 && topo_fabric_has_nvswitch(fab)
                       ? topo_nvls_algbw(&net->nccl, op == NET_OP_ALLREDUCE, n)
                       : 0;
    if (algbw <= 0) {
      g_set_error(error, NET_COLL_ERROR, 0,
                  "--algorithm nvls needs a cluster whose nccl block has \"nvls\", an NVSwitch, and every GPU of the "
                  "collective in one NVLink domain; use ring");
      break;
    }
    Phase *ph = phase_new(plan, net->no_latency ? 0 : net->nccl.nvls_latency, 0, 1);
    /* what each GPU sends to and receives from the switch, at NVLS's rate
     * (topo_nvls_exec): flows up and down its NVSwitch link sized so that
     * alone they take that time, beside other traffic sharing the link */
    double out, in;
    TopoNvlsOp nop = op == NET_OP_ALLREDUCE   ? TOPO_NVLS_ALLREDUCE
                     : op == NET_OP_ALLGATHER ? TOPO_NVLS_ALLGATHER
                                              : TOPO_NVLS_REDUCESCATTER;
    double rate = topo_nvls_exec(&net->nccl, nop, n, &out, &in);
    for (guint i = 0; i < n * n_groups; i++) {
      guint up, down;
      topo_fabric_nvswitch_links(fab, gpus[i], &up, &down);
      Flow *fu = flow_new(ph, bytes * out / rate * net->capacity[up]),
           *fd = flow_new(ph, bytes * in / rate * net->capacity[down]);
      TopoHop hu = {up, 1.0}, hd = {down, 1.0};
      g_array_append_val(fu->hops, hu);
      g_array_append_val(fd->hops, hd);
    }
    return plan;
  }
  case NET_ALGO_NVLS_TREE: {
    TopoFabric *fab = net->fabric;
    guint heads = nvls_tree_heads(net, op, M, m_min);
    if (!heads) {
      g_set_error(error, NET_COLL_ERROR, 0,
                  "--algorithm nvls-tree needs an allreduce over two or more nodes of a cluster whose nccl.nvls block "
                  "has \"tree\", with an NVSwitch and two or more GPUs on NICs of each node; use ring or tree");
      break;
    }
    Phase *ph = phase_new(plan, net->no_latency ? 0 : nvls_tree_latency(net, M), 0, 1);
    /* inside each node: every GPU sends its buffer up to the switch and
     * reads the whole result; a head also reads its reduced 1/h and
     * multicasts the result of its 1/h (all_reduce.h: scatter, gather,
     * reduce, broadcast), at NVLS's rate (topo_nvls_exec) */
    double out, in;
    double rate = topo_nvls_exec(&net->nccl, TOPO_NVLS_ALLREDUCE, heads, &out, &in);
    for (guint g = 0; g < n_groups; g++) {
      Layout l2;
      layout(net, gpus + (gsize)g * n, n, &l2);
      guint h = MIN(l2.m_min, topo_fabric_nics_per_node(fab));
      for (guint k = 0; k < M; k++) {
        guint m = l2.off[k + 1] - l2.off[k];
        gboolean *head = g_new0(gboolean, m);
        for (guint c = 0; c < h; c++) {
          guint exit;
          head[channel_entry(net, &l2, k, c, &exit)] = TRUE;
        }
        for (guint j = 0; j < m; j++) {
          guint up, down;
          topo_fabric_nvswitch_links(fab, l2.mem[l2.off[k] + j], &up, &down);
          /* a head's share is topo_nvls_exec's all-reduce `out` for its group's
           * h heads, written out: a group of another shape than the first
           * (custom placements) may have h < 2, where that call gives none */
          double part = 1.0 + (head[j] ? 1.0 / h : 0);
          Flow *fu = flow_new(ph, bytes * part / rate * net->capacity[up]),
               *fd = flow_new(ph, bytes * part / rate * net->capacity[down]);
          TopoHop hu = {up, 1.0}, hd = {down, 1.0};
          g_array_append_val(fu->hops, hu);
          g_array_append_val(fd->hops, hd);
        }
        g_free(head);
      }
      layout_clear(&l2);
    }
    /* across nodes: the two trees over each channel's heads, S/2h per edge */
    tree_flows(net, ph, gpus, n, n_groups, bytes, TOPO_PROTO_SIMPLE, salt, FALSE);
    memcpy(plan->crossing_bytes, net->crossing, sizeof net->crossing);
    return plan;
  }
  default:
    break;
  }
  if (error && !*error)
    g_set_error(error, NET_COLL_ERROR, 0, "no such algorithm");
  net_coll_plan_free(plan);
  return NULL;
}

NetCollPlan *net_coll_plan_p2p(NetModel *net, const guint *src, const guint *dst, guint n_pairs, double bytes,
                               guint64 salt) {
  NetCollPlan *plan = plan_new(NET_ALGO_P2P, TOPO_PROTO_SIMPLE);
  if (bytes <= 0 || n_pairs == 0)
    return plan;
  guint G = topo_fabric_gpus_per_node(net->fabric);
  gboolean inter = FALSE;
  for (guint i = 0; i < n_pairs; i++)
    inter |= src[i] / G != dst[i] / G;
  Phase *ph = phase_new(plan, 0, 0, 1);
  double path_lat = 0;
  /* Across nodes NCCL deals a send's pieces over the peer's channels, one
   * flow each, none faster than a channel carries (models/comm.h): the
   * phase takes at least bytes / (channels x per-channel rate). */
  guint channels = inter ? topo_p2p_channels(&net->nccl, bytes) : 1;
  if (inter && net->nccl.p2p_channel_bw > 0)
    ph->min_xfer_s = bytes / (channels * net->nccl.p2p_channel_bw);
  for (guint i = 0; i < n_pairs; i++) {
    if (src[i] == dst[i])
      continue;
    gboolean cross = src[i] / G != dst[i] / G;
    for (guint c = 0; c < (cross ? channels : 1); c++) {
      Flow *f = flow_new(ph, cross ? bytes / channels : bytes);
      path_lat = fmax(path_lat, topo_fabric_route(net->fabric, src[i], dst[i],
                                                  edge_hash(salt + c, i, src[i], dst[i]), f->hops));
    }
    if (net->side && net->side[src[i]] < 2 && net->side[dst[i]] < 2 && net->side[src[i]] != net->side[dst[i]])
      plan->crossing_bytes[net->side[src[i]]] += bytes;
  }
  ph->latency_s = (inter ? net->nccl.p2p_latency_inter : net->nccl.p2p_latency_intra) + path_lat;
  return plan;
}

/* All-to-all (see collective.h): every ordered pair of a group, bytes / n
 * each, in one phase; cross-node sends routed through the PXN proxy.
 * `lump`: one flow per group and class (the pairs inside a node, the pairs
 * across nodes) standing for all its pairs, each link loaded by the number
 * of its pairs that cross it (flow.h's coefficients): the pairs of a class
 * move at one rate, that of their most loaded link.  Each pair's route is
 * still its own (its ECMP hash, its PXN proxy). */
static NetCollPlan *plan_alltoall_as(NetModel *net, const guint *gpus, guint n, guint n_groups, double bytes,
                                     guint64 salt, gboolean lump) {
  NetCollPlan *plan = plan_new(NET_ALGO_P2P, TOPO_PROTO_SIMPLE);
  if (bytes <= 0 || n < 2)
    return plan;
  guint G = topo_fabric_gpus_per_node(net->fabric);
  double piece = bytes / n;
  gboolean inter = FALSE;
  for (guint i = 0; i < (guint64)n * n_groups && !inter; i++)
    inter |= gpus[i] / G != gpus[(i / n) * n] / G;
  Phase *ph = phase_new(plan, 0, 0, 1);
  guint channels = inter ? topo_p2p_channels(&net->nccl, piece) : 1;
  if (inter && net->nccl.p2p_channel_bw > 0)
    ph->min_xfer_s = piece / (channels * net->nccl.p2p_channel_bw);
  double path_lat = 0;
  guint n_links = topo_fabric_n_links(net->fabric);
  double *load = lump ? g_new0(double, n_links) : NULL; /* a class's pairs on each link */
  GArray *used = g_array_new(FALSE, FALSE, sizeof(guint)), *hops = g_array_new(FALSE, FALSE, sizeof(TopoHop));
  for (guint g = 0; g < n_groups; g++)
    for (guint cls = 0; cls < (lump ? 2u : 1u); cls++) { /* lumped: inside nodes, then across */
      g_array_set_size(used, 0);
      for (guint a = 0; a < n; a++)
        for (guint q = 1; q < n; q++) {
          guint src = gpus[(gsize)g * n + a], dst = gpus[(gsize)g * n + (a + q) % n];
          if (src == dst || (lump && (src / G != dst / G) != cls))
            continue;
          Flow *f = lump ? NULL : flow_new(ph, piece);
          GArray *to = lump ? hops : f->hops;
          g_array_set_size(hops, 0);
          guint64 hash = edge_hash(salt, q, src, dst);
          if (src / G == dst / G)
            path_lat = fmax(path_lat, topo_fabric_route(net->fabric, src, dst, hash, to));
          else {
            guint proxy = (src / G) * G + dst % G; /* PXN: the local GPU on the destination's rail */
            double lat = proxy != src ? topo_fabric_route(net->fabric, src, proxy, hash, to) : 0;
            path_lat = fmax(path_lat, lat + topo_fabric_route(net->fabric, proxy, dst, hash, to));
          }
          if (net->side && net->side[src] < 2 && net->side[dst] < 2 && net->side[src] != net->side[dst])
            plan->crossing_bytes[net->side[src]] += piece;
          for (guint h = 0; lump && h < hops->len; h++) {
            const TopoHop *x = &g_array_index(hops, TopoHop, h);
            if (load[x->link] == 0)
              g_array_append_val(used, x->link);
            load[x->link] += x->coef;
          }
        }
      if (!lump || used->len == 0)
        continue;
      Flow *f = flow_new(ph, piece);
      for (guint i = 0; i < used->len; i++) { /* links in first-use order */
        guint l = g_array_index(used, guint, i);
        TopoHop x = {l, load[l]};
        g_array_append_val(f->hops, x);
        load[l] = 0;
      }
    }
  g_array_free(used, TRUE);
  g_array_free(hops, TRUE);
  g_free(load);
  ph->latency_s = (inter ? net->nccl.p2p_latency_inter : net->nccl.p2p_latency_intra) + path_lat;
  return plan;
}

/* The all-to-all's flows lumped by group and class where that changes
 * nothing alone: an all-to-all of equal pieces ends when its most loaded
 * link has carried its pairs (that link saturates first in progressive
 * filling and holds its pairs to one rate to the end; every other pair is
 * at least as fast), one flow per pair or lumped.  Checked on the idle
 * network, to the nanosecond, for every distinct plan (one flow per pair
 * where not).  When another transfer meets it, a lumped class slows
 * together: the pairs on the shared link and the rest, which alone would
 * end first anyway. */
static NetCollPlan *plan_alltoall(NetModel *net, const guint *gpus, guint n, guint n_groups, double bytes,
                                  guint64 salt) {
  NetCollPlan *pairs = plan_alltoall_as(net, gpus, n, n_groups, bytes, salt, FALSE);
  if (bytes <= 0 || n < 3)
    return pairs;
  NetCollPlan *lumped = plan_alltoall_as(net, gpus, n, n_groups, bytes, salt, TRUE);
  if (net_coll_plan_ns(net, lumped) == net_coll_plan_ns(net, pairs)) {
    net_coll_plan_free(pairs);
    return lumped;
  }
  net_coll_plan_free(lumped);
  return pairs;
}

static void net_run_reset(NetRun *r);

void net_model_drop_probe(NetModel *net) { g_clear_pointer(&net->probe, net_run_free); }

double net_coll_plan_time(NetModel *net, const NetCollPlan *plan) { return (double)net_coll_plan_ns(net, plan) * 1e-9; }

int64_t net_coll_plan_ns(NetModel *net, const NetCollPlan *plan) {
  /* One network for every probe (a new one per probe would allocate and
   * clear every link of the cluster each time), reset to its new state. */
  if (!net->probe)
    net->probe = net_run_new(net);
  NetRun *run = net->probe;
  net_run_reset(run);
  net_run_start(run, plan, 0, 0);
  GArray *done = g_array_new(FALSE, FALSE, sizeof(guint64));
  int64_t t = 0, end = 0;
  while ((t = net_run_next(run)) >= 0) {
    net_run_advance(run, t, done);
    end = t;
  }
  g_array_free(done, TRUE);
  return end;
}

void net_coll_plan_links(const NetCollPlan *plan, GArray *links) {
  for (guint i = 0; i < plan->phases->len; i++) {
    const Phase *ph = g_ptr_array_index(plan->phases, i);
    for (guint j = 0; j < ph->flows->len; j++) {
      const Flow *f = g_ptr_array_index(ph->flows, j);
      for (guint h = 0; h < f->hops->len; h++)
        g_array_append_val(links, g_array_index(f->hops, TopoHop, h).link);
    }
  }
}

guint net_coll_plan_n_flows(const NetCollPlan *plan) {
  guint n = 0;
  for (guint i = 0; i < plan->phases->len; i++)
    n += ((const Phase *)g_ptr_array_index(plan->phases, i))->flows->len;
  return n;
}

NetCollPlan *net_coll_plan(NetModel *net, NetCollOp op, NetCollAlgo algo, int proto, const guint *gpus, guint n,
                           guint n_groups, double bytes, guint64 salt, GError **error) {
  if (op == NET_OP_ALLTOALL)
    return plan_alltoall(net, gpus, n, n_groups, bytes, salt);
  if (op == NET_OP_SENDRECV) {
    /* nccl-tests' sendrecv: every rank sends to the next and receives from
     * the previous. */
    guint *src = g_new(guint, (gsize)n * n_groups), *dst = g_new(guint, (gsize)n * n_groups);
    for (guint g = 0; g < n_groups; g++)
      for (guint r = 0; r < n; r++) {
        src[g * n + r] = gpus[g * n + r];
        dst[g * n + r] = gpus[g * n + (r + 1) % n];
      }
    NetCollPlan *p = net_coll_plan_p2p(net, src, dst, n * n_groups, bytes, salt);
    g_free(src);
    g_free(dst);
    return p;
  }
  /* NCCL's tuner (src/graph/tuning.cc, v2.12) picks by its own model:
   * time = latency + bytes / algbw, with the ring's bus bandwidth from the
   * topology, the tree's capped at 0.92 of it (120/128 for LL128, 1/3.8 for
   * LL) and halved to an algorithm bandwidth.  Our ring bus bandwidth is
   * that of the ring's flows alone on the graph; the chosen plan is then what
   * runs on the flow network. */
  Layout lo;
  layout(net, gpus, n, &lo);
  guint M = lo.n_nodes, m_max = lo.m_max, m_min = lo.m_min;
  layout_clear(&lo);
  if (algo == NET_ALGO_HIER && proto >= 0)
    return build(net, op, algo, (TopoProto)proto, gpus, n, n_groups, bytes, salt, error);
  double ring_bus = 0;
  if (n > 1) {
    double probe = 1073741824.0; /* rates do not depend on size; any large size will do */
    net->no_latency = TRUE;
    NetCollPlan *rs = build(net, op, NET_ALGO_RING, TOPO_PROTO_SIMPLE, gpus, n, 1, probe, salt, error);
    net->no_latency = FALSE;
    double t = net_coll_plan_time(net, rs);
    net_coll_plan_free(rs);
    ring_bus = t > 0 ? probe * bus_factor(op, n) / t : INFINITY;
  }
  static const double tree_cap[TOPO_N_PROTOS] = {1.0 / 3.8, 120.0 / 128.0, 1.0};
  /* NCCL's channel count across nodes: one ring channel per NIC in use, at
   * the speed its search gives a NIC (24 GB/s for HDR), doubled at half the
   * speed when that speed is 25 GB/s or more (search.cc, "duplicate
   * channels").  Its per-channel caps then bound LL128 (ll128MaxBwPerCh)
   * and the tree (perChMaxTreeBws, by 1, 2, 3+ nodes); LL has a total cap
   * (llMaxBws, by GPU generation in one node, by CPU vendor across nodes).  Inside one node the
   * LL128 cap cannot bind: NCCL's NVLink channels carry at most 20 GB/s
   * each, so 20 GB/s times the channels is at least the bus bandwidth. */
  double nch = INFINITY;
  if (M > 1 && isfinite(net->net_channel)) {
    guint rails = MAX(1, MIN(m_max, topo_fabric_nics_per_node(net->fabric)));
    nch = rails * (net->net_channel >= 25e9 ? 2.0 : 1.0);
  }
  guint by_nodes = M <= 2 ? (M > 0 ? M - 1 : 0) : 2;
  double tree_ch = net->tree_per_channel[by_nodes], ll_max = net->ll_max[by_nodes];
  NetCollAlgo best_a = NET_ALGO_RING;
  int best_p = TOPO_PROTO_SIMPLE;
  double best_t = INFINITY, best_xfer = 0;
  for (int a = NET_ALGO_RING; a <= NET_ALGO_HIER; a++) {
    if (algo != NET_ALGO_AUTO ? a != (int)algo : a == NET_ALGO_HIER)
      continue;
    if (a == NET_ALGO_TREE && algo == NET_ALGO_AUTO && (op != NET_OP_ALLREDUCE || !net->has_tree || M < 2))
      continue; /* NCCL's trees are for all-reduce across nodes */
    for (int p = 0; p < TOPO_N_PROTOS; p++) {
      if (proto >= 0 && p != proto)
        continue;
      double t, xfer;
      if (a == NET_ALGO_TREE && net->has_tree) {
        double lat = net->tree_base[p] +
                     2 * ((m_max - 1) * net->tree_nvlink_hop[p] + log2((double)M) * net->tree_net_hop[p]);
        double bus = fmin(ring_bus * 0.92, nch * tree_ch) * tree_cap[p];
        if (p == TOPO_PROTO_LL128)
          bus = fmin(bus, nch * net->ll128_per_channel);
        if (p == TOPO_PROTO_LL)
          bus = fmin(bus, ll_max);
        xfer = bytes / (0.5 * bus);
        t = lat + xfer;
      } else {
        double bus = ring_bus * net->nccl.proto_bw_factor[p];
        if (p == TOPO_PROTO_LL128)
          bus = fmin(bus, nch * net->ll128_per_channel);
        if (p == TOPO_PROTO_LL)
          bus = fmin(bus, ll_max);
        xfer = bytes * bus_factor(op, n) / bus;
        t = ring_latency(net, op, n, M, (TopoProto)p) + xfer;
      }
      if (t < best_t) {
        best_t = t;
        best_xfer = xfer;
        best_a = (NetCollAlgo)a;
        best_p = p;
      }
    }
  }
  /* NVLS inside one NVLink domain where the cluster's NCCL has it: NCCL's
   * tuner prices it by its own model (topo_nvls_algbw), Simple only; it
   * runs as build's NVLS phase moves its bytes (topo_nvls_exec) */
  double nvls = M == 1 && topo_fabric_has_nvswitch(net->fabric) && (algo == NET_ALGO_AUTO || algo == NET_ALGO_NVLS) &&
                        (proto < 0 || proto == TOPO_PROTO_SIMPLE)
                    ? topo_nvls_algbw(&net->nccl, op == NET_OP_ALLREDUCE, n)
                    : 0;
  if (algo == NET_ALGO_NVLS && nvls <= 0)
    return build(net, op, NET_ALGO_NVLS, TOPO_PROTO_SIMPLE, gpus, n, n_groups, bytes, salt, error);
  if (nvls > 0 && net->nccl.nvls_latency + bytes / nvls < best_t) {
    best_t = net->nccl.nvls_latency + bytes / nvls;
    best_xfer = bytes / nvls;
    best_a = NET_ALGO_NVLS;
    best_p = TOPO_PROTO_SIMPLE;
  }
  /* NVLS-tree across nodes (NCCL 2.18 and later), Simple only, priced as
   * NCCL's tuner does (nvls_tree_algbw, nvls_tree_latency); NCCL disables it
   * on one node, and plain NVLS across nodes without CollNet */
  guint heads = algo == NET_ALGO_AUTO || algo == NET_ALGO_NVLS_TREE ? nvls_tree_heads(net, op, M, m_min) : 0;
  if (algo == NET_ALGO_NVLS_TREE && heads == 0)
    return build(net, op, NET_ALGO_NVLS_TREE, TOPO_PROTO_SIMPLE, gpus, n, n_groups, bytes, salt, error);
  if (heads > 0 && (proto < 0 || proto == TOPO_PROTO_SIMPLE || algo == NET_ALGO_NVLS_TREE)) {
    double algbw = nvls_tree_algbw(net, n, M, heads), t = nvls_tree_latency(net, M) + bytes / algbw;
    if (t < best_t) {
      best_t = t;
      best_xfer = bytes / algbw;
      best_a = NET_ALGO_NVLS_TREE;
      best_p = TOPO_PROTO_SIMPLE;
    }
  }
  NetCollPlan *plan = build(net, op, best_a, (TopoProto)best_p, gpus, n, n_groups, bytes, salt, error);
  /* the caps of NCCL's bandwidth model (LL128 20 GB/s per channel, the
   * tree's per-channel rates, LL's totals) are per-channel rates its
   * protocols do not exceed: the executed transfer is no faster than the
   * tuner's transfer term (for an uncapped ring it is the flows' own time) */
  if (plan && plan->phases->len == 1 && isfinite(best_xfer))
    ((Phase *)g_ptr_array_index(plan->phases, 0))->min_xfer_s = best_xfer;
  return plan;
}

/* --- the live network --- */

enum { X_WAIT_START, X_FLOWING, X_WAIT_END };

typedef struct {
  const NetCollPlan *plan;
  guint64 token;
  guint phase;
  guint left;      /* flows of the phase still running */
  int state;
  int64_t flow_start; /* when the phase's flows started */
} Xfer;

typedef struct {
  int64_t time;
  guint64 seq;
  guint xfer;
} Timer;

struct _NetRun {
  NetModel *net;
  NetFlows *flows;
  GArray *xfers;     /* Xfer */
  GArray *free_x;    /* reusable xfer slots */
  GArray *timers;    /* Timer heap */
  GArray *owner;     /* flow id -> xfer */
  GArray *finished;  /* scratch */
  guint64 seq;
};

static inline gboolean timer_before(const Timer *a, const Timer *b) {
  return a->time < b->time || (a->time == b->time && a->seq < b->seq);
}
PTD_HEAP_DEFINE(timer, Timer, timer_before)

NetRun *net_run_new(NetModel *net) {
  NetRun *r = g_new0(NetRun, 1);
  r->net = net;
  r->flows = net_flows_new(topo_fabric_n_links(net->fabric), net->capacity);
  r->xfers = g_array_new(FALSE, FALSE, sizeof(Xfer));
  r->free_x = g_array_new(FALSE, FALSE, sizeof(guint));
  r->timers = g_array_new(FALSE, FALSE, sizeof(Timer));
  r->owner = g_array_new(FALSE, FALSE, sizeof(guint));
  r->finished = g_array_new(FALSE, FALSE, sizeof(guint));
  return r;
}

void net_run_free(NetRun *r) {
  if (!r)
    return;
  net_flows_free(r->flows);
  g_array_free(r->xfers, TRUE);
  g_array_free(r->free_x, TRUE);
  g_array_free(r->timers, TRUE);
  g_array_free(r->owner, TRUE);
  g_array_free(r->finished, TRUE);
  g_free(r);
}

/* Returns the live network to its new state; nothing may be in flight. */
static void net_run_reset(NetRun *r) {
  net_flows_reset(r->flows);
  g_array_set_size(r->xfers, 0);
  g_array_set_size(r->free_x, 0);
  g_array_set_size(r->timers, 0);
  g_array_set_size(r->owner, 0);
  g_array_set_size(r->finished, 0);
  r->seq = 0;
}

static int64_t ns_of(double s) { return (int64_t)llround(s * 1e9); }

/* Schedules phase `x->phase` of transfer `id` (its latency first), or
 * reports the transfer done. */
static void next_phase(NetRun *r, guint id, int64_t now, GArray *done) {
  Xfer *x = &g_array_index(r->xfers, Xfer, id);
  if (x->phase >= x->plan->phases->len) {
    g_array_append_val(done, x->token);
    g_array_append_val(r->free_x, id);
    return;
  }
  const Phase *ph = g_ptr_array_index(x->plan->phases, x->phase);
  x->state = X_WAIT_START;
  timer_push(r->timers, (Timer){now + ns_of(ph->latency_s), r->seq++, id});
}

/* The phase's flows are done at `now`: end it, or wait for the rest of
 * its pipelined chain (see Phase). */
static void flows_done(NetRun *r, guint id, int64_t now, GArray *done) {
  Xfer *x = &g_array_index(r->xfers, Xfer, id);
  const Phase *ph = g_ptr_array_index(x->plan->phases, x->phase);
  int64_t xfer = MAX(now - x->flow_start, ns_of(ph->min_xfer_s));
  int64_t end = x->flow_start + MAX(xfer, ns_of(ph->chain_s) + (int64_t)llround((double)xfer / ph->slices));
  if (now < end) {
    x->state = X_WAIT_END;
    timer_push(r->timers, (Timer){end, r->seq++, id});
    return;
  }
  x->phase++;
  next_phase(r, id, now, done);
}

void net_run_start(NetRun *r, const NetCollPlan *plan, guint64 token, int64_t now) {
  guint id;
  Xfer x = {plan, token, 0, 0, X_WAIT_START, 0};
  if (r->free_x->len) {
    id = g_array_index(r->free_x, guint, r->free_x->len - 1);
    g_array_set_size(r->free_x, r->free_x->len - 1);
    g_array_index(r->xfers, Xfer, id) = x;
  } else {
    id = r->xfers->len;
    g_array_append_val(r->xfers, x);
  }
  /* a plan with no phases finishes at once, through a zero timer */
  if (plan->phases->len == 0) {
    g_array_index(r->xfers, Xfer, id).phase = G_MAXUINT - 1;
    timer_push(r->timers, (Timer){now, r->seq++, id});
    return;
  }
  next_phase(r, id, now, NULL);
}

int64_t net_run_next(NetRun *r) {
  int64_t f = net_flow_next(r->flows);
  int64_t t = r->timers->len ? g_array_index(r->timers, Timer, 0).time : -1;
  if (f < 0)
    return t;
  if (t < 0)
    return f;
  return MIN(f, t);
}

void net_run_advance(NetRun *r, int64_t now, GArray *done) {
  /* flows first: phases that end now may start their successors now; one
   * re-solve for all of it */
  net_flow_hold(r->flows);
  g_array_set_size(r->finished, 0);
  int64_t f = net_flow_next(r->flows);
  if (f >= 0 && f <= now)
    net_flow_advance(r->flows, now, r->finished);
  for (guint i = 0; i < r->finished->len; i++) {
    guint xid = g_array_index(r->owner, guint, g_array_index(r->finished, guint, i));
    Xfer *x = &g_array_index(r->xfers, Xfer, xid);
    if (--x->left == 0)
      flows_done(r, xid, now, done);
  }
  while (r->timers->len && g_array_index(r->timers, Timer, 0).time <= now) {
    Timer t = timer_pop(r->timers);
    Xfer *x = &g_array_index(r->xfers, Xfer, t.xfer);
    if (x->phase == G_MAXUINT - 1) { /* empty plan */
      g_array_append_val(done, x->token);
      g_array_append_val(r->free_x, t.xfer);
      continue;
    }
    if (x->state == X_WAIT_END) {
      x->phase++;
      next_phase(r, t.xfer, now, done);
      continue;
    }
    const Phase *ph = g_ptr_array_index(x->plan->phases, x->phase);
    x->left = 0;
    x->state = X_FLOWING;
    x->flow_start = now;
    for (guint i = 0; i < ph->flows->len; i++) {
      const Flow *fl = g_ptr_array_index(ph->flows, i);
      guint fid = net_flow_add(r->flows, (const TopoHop *)(const void *)fl->hops->data, fl->hops->len, fl->bytes, now);
      if (fid >= r->owner->len)
        g_array_set_size(r->owner, fid + 1);
      g_array_index(r->owner, guint, fid) = t.xfer;
      x = &g_array_index(r->xfers, Xfer, t.xfer);
      x->left++;
    }
    if (x->left == 0) /* a phase without flows */
      flows_done(r, t.xfer, now, done);
  }
  net_flow_release(r->flows, now);
}

void net_run_stats(const NetRun *r, guint64 *solves, guint64 *touched) {
  net_flow_stats(r->flows, solves, touched);
}
