/* ptdsim — the symmetry shortcut's classes (doc/model.md#the-symmetry-shortcut):
 * which tensor ranks and replicas of a PTD-P run are simulated, each
 * standing for the ranks of its class, which run the same timeline; on the
 * flow network, ranks whose traffic meets simulated together
 * (build.h).  It calls comm.c for the nodes and NICs a group spans. */
#include <string.h>

#include "build.h"

static guint dp_group_nodes(const PtdpBuild *b, guint i, guint s) { return sim_ptdp_group_nodes(b, s, i, FALSE); }

static guint job_node(const PtdpBuild *b, guint i, guint c, guint s, guint k) {
  return ptdp_gpu_of_job_rank(b, i, c, s, k) / b->cluster->gpus_per_node;
}

/* Whether the send of tensor rank i, replica k (the job's) from stage s to
 * stage s2 stays inside a node. */
static gboolean hop_inside(const PtdpBuild *b, guint i, guint s, guint s2, guint k) {
  return job_node(b, i, 0, s, k) == job_node(b, i, 0, s2, k);
}

/* build.h: the slowest of a rank's context-parallel GPUs (--slow). */
double sim_ptdp_rank_speed(const PtdpBuild *b, guint i, guint s, guint k) {
  double f = 1;
  for (guint c = 0; c < b->cp; c++)
    f = MIN(f,
            sim_plan_gpu_speed(b->plan, ptdp_rank_of_c(b, i, c, s, k) % b->plan->gpus, s, b->cluster->gpus_per_host));
  return f;
}

static double rank_link(const PtdpBuild *b, guint i, guint s, guint k) {
  return b->plan->stragglers.n_link ? sim_ptdp_nic_factor(b, ptdp_gpu_of_job_rank(b, i, 0, s, k)) : 1;
}

static void append_double(GArray *sig, double x) {
  guint w[2];
  G_STATIC_ASSERT(sizeof w == sizeof x);
  memcpy(w, &x, sizeof w);
  g_array_append_vals(sig, w, 2);
}

/* What sets the times of replica k's ops apart from another's on the
 * analytic network, for its tensor ranks 0 .. ts - 1: per stage the nodes
 * of its tensor-parallel group, whether its context-parallel ring stays in
 * a node, whether each rank's pipeline sends do, each rank's speed and
 * NIC's (stragglers), and whether the tied embedding's all-reduce stays in
 * a node. */
static void replica_signature(const PtdpBuild *b, guint k, guint ts, GArray *sig) {
  const SimPlan *pl = b->plan;
  gboolean slow = sim_plan_has_stragglers(pl);
  for (guint s = 0; s < b->p; s++) {
    guint x = sim_ptdp_group_nodes(b, s, k, TRUE);
    g_array_append_val(sig, x);
    for (guint i = 0; i < (slow ? pl->tp : 0); i++) { /* the whole group: a slow NIC slows its ring */
      append_double(sig, sim_ptdp_rank_speed(b, i, s, k));
      append_double(sig, rank_link(b, i, s, k));
    }
    gboolean cp_inside = TRUE;
    for (guint c = 1; c < b->cp; c++)
      cp_inside = cp_inside && job_node(b, 0, c, s, k) == job_node(b, 0, 0, s, k);
    x = cp_inside;
    g_array_append_val(sig, x);
    for (guint i = 0; i < ts && s + 1 < b->p; i++) {
      x = hop_inside(b, i, s, s + 1, k);
      g_array_append_val(sig, x);
    }
  }
  for (guint i = 0; i < ts && b->p > 1 && !pl->model.untied; i++) {
    guint x = hop_inside(b, i, 0, b->p - 1, k);
    g_array_append_val(sig, x);
  }
}

/* Whether every tensor rank sees what rank 0 sees: its data-parallel
 * group's nodes on every stage, where its pipeline sends and the tied
 * embedding's all-reduce go, its speed and its NIC's. */
static gboolean tensor_ranks_alike(const PtdpBuild *b) {
  const SimPlan *pl = b->plan;
  for (guint s = 0; s < b->p; s++) {
    guint dp0 = dp_group_nodes(b, 0, s);
    for (guint i = 1; i < pl->tp; i++)
      if (dp_group_nodes(b, i, s) != dp0)
        return FALSE;
    for (guint k = 0; k < pl->dp; k++)
      for (guint i = 1; i < pl->tp; i++) {
        if (s + 1 < b->p && hop_inside(b, i, s, s + 1, k) != hop_inside(b, 0, s, s + 1, k))
          return FALSE;
        if (sim_ptdp_rank_speed(b, i, s, k) != sim_ptdp_rank_speed(b, 0, s, k) ||
            rank_link(b, i, s, k) != rank_link(b, 0, s, k))
          return FALSE;
        if (s == 0 && b->p > 1 && hop_inside(b, i, 0, b->p - 1, k) != hop_inside(b, 0, 0, b->p - 1, k))
          return FALSE;
      }
  }
  return TRUE;
}

/* Which ranks' traffic meets on the flow network beyond what the symmetry
 * shortcut sees: ranks that share a NIC (nodes with fewer NICs than GPUs),
 * and sends that leave a node through another GPU's NIC (NCCL's PXN: a send
 * to another node crosses NVLink to the local GPU on the receiver's rail
 * first).  Each GPU and NIC is owned by the first rank (tensor rank i,
 * replica k) whose traffic uses it; a rank of another replica that uses it
 * too joins that replica's block (`block`, a union-find over replicas,
 * simulated together), one of another tensor rank means every tensor rank
 * is simulated (*tensor_shared).  FALSE where a data-parallel ring leaves
 * a node through a GPU outside its group (the replicas would all meet). */
typedef struct {
  const PtdpBuild *b;
  guint *owner; /* per resource: (i * dp + k) + 1, 0: none */
  guint *block; /* per replica: union-find parent */
  gboolean tensor_shared;
} Meet;

static guint find(guint *parent, guint x) {
  while (parent[x] != x)
    x = parent[x] = parent[parent[x]];
  return x;
}

/* Resources: GPUs 0 .. G n - 1, then NICs, then nodes. */
static void touch(Meet *m, guint res, guint i, guint k) {
  guint dp = m->b->plan->dp, me = i * dp + k + 1;
  if (!m->owner[res]) {
    m->owner[res] = me;
    return;
  }
  guint oi = (m->owner[res] - 1) / dp, ok = (m->owner[res] - 1) % dp;
  if (oi != i)
    m->tensor_shared = TRUE;
  guint x = find(m->block, ok), y = find(m->block, k);
  if (x != y)
    m->block[MAX(x, y)] = MIN(x, y);
}

static guint nic_res(const PtdpBuild *b, guint gpu) {
  guint G = b->cluster->gpus_per_node, nics = MAX(b->cluster->net.nics_per_node, 1u);
  return topo_cluster_gpus(b->cluster) + (gpu / G) * nics + topo_gpu_nic(gpu % G, G, nics);
}

static void touch_gpu(Meet *m, guint gpu, guint i, guint k) {
  touch(m, gpu, i, k);
  touch(m, nic_res(m->b, gpu), i, k);
}

/* A send from GPU `from` to GPU `to` of another node, both ways: the GPUs
 * (and NICs) of each end's node on the other end's rail carry it. */
static void touch_send(Meet *m, guint from, guint to, guint i, guint k) {
  guint G = m->b->cluster->gpus_per_node;
  if (from / G == to / G)
    return;
  touch_gpu(m, from / G * G + to % G, i, k);
  touch_gpu(m, to / G * G + from % G, i, k);
}

static gboolean flow_blocks(const PtdpBuild *b, guint *block, gboolean *tensor_shared) {
  const SimPlan *pl = b->plan;
  guint G = b->cluster->gpus_per_node, nics = MAX(b->cluster->net.nics_per_node, 1u);
  gsize n_res = topo_cluster_gpus(b->cluster) + (gsize)b->cluster->nodes * nics;
  /* resources: GPUs, NICs, and nodes without an NVSwitch (where GPUs talk
   * over NVLink pairs and PCIe switches, whose links carry several pairs) */
  const cJSON *node = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(b->cluster->json, "fabric"),
                                                       "node");
  gboolean switched = cJSON_GetObjectItemCaseSensitive(node, "nvswitch") != NULL;
  Meet m = {b, g_new0(guint, n_res + b->cluster->nodes), block, FALSE};
  for (guint k = 0; k < pl->dp; k++)
    block[k] = k;
  guint *dp_nodes = g_new(guint, (gsize)b->p * pl->tp); /* per (s, i) */
  for (guint s = 0; s < b->p; s++)
    for (guint i = 0; i < pl->tp; i++)
      dp_nodes[s * pl->tp + i] = dp_group_nodes(b, i, s);
  /* a rank's own GPUs, and its NICs where any of its traffic leaves a node */
  for (guint k = 0; k < pl->dp; k++)
    for (guint i = 0; i < pl->tp; i++) {
      gboolean leaves = FALSE;
      for (guint s = 0; s < b->p && !leaves; s++) {
        leaves = dp_nodes[s * pl->tp + i] > 1 || sim_ptdp_group_nodes(b, s, k, TRUE) > 1 ||
                 (s + 1 < b->p && !hop_inside(b, i, s, s + 1, k)) || (s == 0 && !hop_inside(b, i, 0, b->p - 1, k));
        for (guint c = 1; c < b->cp; c++)
          leaves = leaves || job_node(b, i, c, s, k) != job_node(b, i, 0, s, k);
      }
      for (guint s = 0; s < b->p; s++)
        for (guint c = 0; c < b->cp; c++) {
          guint g = ptdp_gpu_of_job_rank(b, i, c, s, k);
          touch(&m, g, i, k);
          if (leaves)
            touch(&m, nic_res(b, g), i, k);
          if (!switched) /* NVLink pairs and PCIe: paths inside a node are shared */
            touch(&m, n_res + g / G, i, k);
        }
    }
  for (guint k = 0; k < pl->dp; k++)
    for (guint i = 0; i < pl->tp; i++)
      for (guint s = 0; s < b->p; s++)
        for (guint c = 0; c < b->cp; c++) {
          guint g = ptdp_gpu_of_job_rank(b, i, c, s, k);
          if (s + 1 < b->p)
            touch_send(&m, g, ptdp_gpu_of_job_rank(b, i, c, s + 1, k), i, k);
          if (s == 0 && b->p > 1)
            touch_send(&m, g, ptdp_gpu_of_job_rank(b, i, c, b->p - 1, k), i, k);
          touch_send(&m, g, ptdp_gpu_of_job_rank(b, (i + 1) % pl->tp, c, s, k), i, k);
          touch_send(&m, g, ptdp_gpu_of_job_rank(b, i, (c + 1) % b->cp, s, k), i, k);
        }
  /* A data-parallel group's rings and trees cross between its nodes on
   * the rails of its members: the GPUs there must be its own. */
  gboolean ok = TRUE;
  guint8 *rail = g_new(guint8, G), *mine = g_new0(guint8, topo_cluster_gpus(b->cluster));
  for (guint s = 0; s < b->p && ok; s++)
    for (guint i = 0; i < pl->tp && ok; i++) {
      if (dp_nodes[s * pl->tp + i] < 2)
        continue;
      memset(rail, 0, G);
      for (guint j = 0; j < b->dpc; j++) {
        guint g = ptdp_gpu_of_job_rank(b, i, j % b->cp, s, j / b->cp);
        rail[g % G] = mine[g] = 1;
      }
      for (guint j = 0; j < b->dpc && ok; j++) {
        guint node = ptdp_gpu_of_job_rank(b, i, j % b->cp, s, j / b->cp) / G;
        for (guint l = 0; l < G && ok; l++)
          ok = !rail[l] || mine[node * G + l];
      }
      for (guint j = 0; j < b->dpc; j++)
        mine[ptdp_gpu_of_job_rank(b, i, j % b->cp, s, j / b->cp)] = 0;
    }
  g_free(mine);
  g_free(dp_nodes);
  g_free(rail);
  g_free(m.owner);
  *tensor_shared = m.tensor_shared;
  return ok;
}

/* Whether flows of the job may pick their leaf uplinks by ECMP hash: a
 * rail-optimized fat tree with ECMP routing and the job's nodes in more
 * than one scalable unit.  Different ranks' flows may then collide on an
 * uplink where their images do not, which the shortcut does not see. */
static gboolean ecmp_across_units(const PtdpBuild *b) {
  const SimPlan *pl = b->plan;
  const cJSON *fabric = cJSON_GetObjectItemCaseSensitive(b->cluster->json, "fabric");
  const cJSON *net = cJSON_GetObjectItemCaseSensitive(fabric, "network");
  const cJSON *routing = cJSON_GetObjectItemCaseSensitive(fabric, "routing");
  const cJSON *kind = cJSON_GetObjectItemCaseSensitive(net, "kind");
  const cJSON *npu = cJSON_GetObjectItemCaseSensitive(net, "nodes_per_unit");
  if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "rail-fat-tree") != 0 || !cJSON_IsNumber(npu) ||
      npu->valuedouble < 1 || (cJSON_IsString(routing) && strcmp(routing->valuestring, "adaptive") == 0))
    return FALSE;
  guint per_unit = (guint)npu->valuedouble * b->cluster->gpus_per_node, first = G_MAXUINT;
  for (guint k = 0; k < pl->dp; k++)
    for (guint s = 0; s < b->p; s++)
      for (guint i = 0; i < pl->tp; i++)
        for (guint c = 0; c < b->cp; c++) {
          guint unit = ptdp_gpu_of_job_rank(b, i, c, s, k) / per_unit;
          if (first == G_MAXUINT)
            first = unit;
          else if (unit != first)
            return TRUE;
        }
  return FALSE;
}

/* The symmetry shortcut: which tensor ranks and replicas are simulated
 * (doc/model.md#the-symmetry-shortcut).  Replicas fall into classes that
 * see the same node layout (replica_signature); on the flow network,
 * replicas whose traffic meets (flow_blocks) are simulated together as a
 * block, and blocks fall into classes.  One block of each class is
 * simulated, and it stands for the others, which run the same timeline.
 * Tensor ranks are simulated all, or one standing for its group where all
 * see the same layout and no two of them share a NIC.  Every GPU is
 * simulated under --no-symmetry, and where the shortcut would not be exact
 * (b->declined says why). */
void sim_ptdp_classes(PtdpBuild *b) {
  const SimPlan *pl = b->plan;
  guint dp = pl->dp;
  b->ts = pl->tp;
  b->ds = dp;
  b->kmap = b->kweight = NULL;
  b->declined[0] = b->approximate[0] = '\0';
  if (!pl->symmetry || pl->tp * dp == 1)
    return;
  gboolean flow = pl->flow_network && b->profile->kind != MODEL_PROFILE_IDEAL && !pl->stage_times &&
                  b->cluster->has_fabric;
  guint *block = g_new(guint, dp);
  gboolean tensor_shared = FALSE;
  if (flow) {
    if (!flow_blocks(b, block, &tensor_shared)) {
      g_strlcpy(b->declined, "data-parallel rings cross nodes through other ranks' GPUs (NCCL's PXN)",
                sizeof b->declined);
      g_free(block);
      return;
    }
    for (guint k = 0; k < dp; k++)
      block[k] = find(block, k);
  } else
    for (guint k = 0; k < dp; k++)
      block[k] = k;
  guint ts = !tensor_shared && tensor_ranks_alike(b) ? 1 : pl->tp;
  /* each block's signature: its replicas' in order */
  GHashTable *seen = g_hash_table_new_full(g_bytes_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref, NULL);
  GArray *sig = g_array_new(FALSE, FALSE, sizeof(guint));
  GArray *sim = g_array_new(FALSE, FALSE, sizeof(guint));
  guint *weight = g_new0(guint, dp); /* per first replica of a chosen block: the blocks of its class */
  guint8 *chosen = g_new0(guint8, dp);
  guint blocks = 0;
  for (guint k0 = 0; k0 < dp; k0++) {
    if (block[k0] != k0)
      continue; /* not the first replica of its block */
    blocks++;
    g_array_set_size(sig, 0);
    for (guint k = k0; k < dp; k++)
      if (block[k] == k0) {
        guint mark = G_MAXUINT;
        g_array_append_val(sig, mark);
        replica_signature(b, k, ts, sig);
      }
    GBytes *key = g_bytes_new(sig->data, (gsize)sig->len * sizeof(guint));
    gpointer first;
    if (g_hash_table_lookup_extended(seen, key, NULL, &first)) {
      weight[GPOINTER_TO_UINT(first)]++;
      g_bytes_unref(key);
      continue;
    }
    g_hash_table_insert(seen, key, GUINT_TO_POINTER(k0));
    weight[k0] = 1;
    for (guint k = k0; k < dp; k++)
      if (block[k] == k0)
        chosen[k] = 1;
  }
  GArray *wsim = g_array_new(FALSE, FALSE, sizeof(guint));
  for (guint k = 0; k < dp; k++)
    if (chosen[k]) {
      g_array_append_val(sim, k);
      g_array_append_val(wsim, weight[block[k]]);
    }
  g_free(weight);
  guint ds = sim->len;
  g_hash_table_destroy(seen);
  g_array_free(sig, TRUE);
  g_free(chosen);
  g_free(block);
  if (ts == pl->tp && ds == dp) {
    g_array_free(wsim, TRUE);
    const char *why_k = blocks == 1 ? "the replicas' traffic meets on shared NICs or links"
                                    : "no two replicas have the same node layout and speeds";
    const char *why_i = tensor_shared ? "the tensor-parallel ranks' traffic meets on shared NICs or links"
                                      : "the tensor-parallel ranks differ in node layout or speed";
    g_snprintf(b->declined, sizeof b->declined, "%s%s%s", dp > 1 ? why_k : "", dp > 1 && pl->tp > 1 ? "; " : "",
               pl->tp > 1 ? why_i : "");
    g_array_free(sim, TRUE);
    return;
  }
  b->ts = ts;
  b->ds = ds;
  if (flow && ecmp_across_units(b))
    g_strlcpy(b->approximate,
              "ECMP routing across scalable units: flows of ranks not simulated may collide on leaf uplinks where "
              "the simulated ones do not; --no-symmetry carries them",
              sizeof b->approximate);
  if (ds < dp) {
    b->kmap = (guint *)(void *)g_array_free(sim, FALSE);
    b->kweight = (guint *)(void *)g_array_free(wsim, FALSE);
  } else {
    g_array_free(sim, TRUE);
    g_array_free(wsim, TRUE);
  }
}

