/* ptdsim — NVLink domains larger than a node (GB200 NVL72) and NVLS:
 * the placement that packs tensor-parallel groups into domains, the
 * cluster's view of a domain, NCCL's NVLS model on both networks.  Exact
 * where the arithmetic is. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "../models/comm.h"
#include "../network/collective.h"
#include "../plan/plan.h"
#include "../topologies/cluster.h"
#include "../topologies/fabric.h"

static TopoCluster *cluster(const char *name) {
  GError *error = NULL;
  TopoCluster *c = topo_cluster_load(name, &error);
  g_assert_no_error(error);
  return c;
}

/* Why: on a 72-GPU domain a tensor-parallel group of 16 must never straddle
 * two racks; groups that divide the domain keep the plain rank order, and
 * the packing never puts two ranks on one GPU. */
static void test_place(void) {
  TopoCluster *c = cluster("gb200-nvl72");
  g_assert_cmpuint(c->gpus_per_node, ==, 72);
  g_assert_cmpuint(c->gpus_per_host, ==, 4);
  double trays = cJSON_GetObjectItemCaseSensitive(c->json, "nodes")->valuedouble;
  g_assert_cmpuint(c->nodes, ==, (guint)trays * 4 / 72); /* racks: the domains */
  g_assert_cmpuint(c->net.nics_per_node, ==, 72);
  /* 4 groups of 16 to a rack: the 5th group starts the next rack */
  g_assert_cmpuint(sim_place(c, 16, 0), ==, 0);
  g_assert_cmpuint(sim_place(c, 16, 63), ==, 63);
  g_assert_cmpuint(sim_place(c, 16, 64), ==, 72);
  g_assert_cmpuint(sim_place(c, 16, 127), ==, 135);
  g_assert_cmpuint(sim_place(c, 16, 128), ==, 144);
  guint n = topo_cluster_gpus(c);
  guint8 *used = g_new0(guint8, n);
  for (guint g = 0; g < 16 * 4 * 16; g++) {
    guint at = sim_place(c, 16, g);
    g_assert_cmpuint(at, <, n);
    g_assert_false(used[at]);
    used[at] = 1;
    /* the group's first rank and this one share a domain */
    g_assert_cmpuint(at / 72, ==, sim_place(c, 16, g - g % 16) / 72);
  }
  g_free(used);
  for (guint g = 0; g < 500; g++) {
    g_assert_cmpuint(sim_place(c, 8, g), ==, g);  /* 8 divides 72 */
    g_assert_cmpuint(sim_place(c, 144, g), ==, g); /* larger than a domain: as given */
  }
  topo_cluster_free(c);
  /* on an 8-GPU DGX every power of two up to 8 divides the node */
  c = cluster("dgx-b200");
  for (guint g = 0; g < 100; g++)
    g_assert_cmpuint(sim_place(c, 16, g), ==, g);
  topo_cluster_free(c);
}

/* NCCL's NVLS algorithm bandwidth, from the cluster's numbers, by hand. */
static double nvls_algbw(const TopoNet *net, gboolean allreduce, double n) {
  double bus = net->nvls_bw * net->nvls_eff * (net->nvls_channels - 1.0) / net->nvls_channels;
  return allreduce ? 2 * bus * n / (2 * (n - 1)) : bus * (n - 1) / n;
}

/* NVLS as it runs, by hand: each GPU sends S + S/n to the switch and
 * receives as much (its slice reduced from every GPU, then multicast), at
 * the ring's NVLink busbw times NCCL's NVLS efficiency. */
static double nvls_run_s(const TopoNet *net, double S, double n) {
  return net->nvls_latency + S * (n + 1) / n / (net->nvlink_busbw * net->nvls_eff);
}

/* Why: NVLS is chosen as NCCL's tuner prices it and runs as its bytes move
 * over the GPUs' NVSwitch links: both network models take the same time
 * for a large all-reduce inside one domain, the latency plus S (n+1)/n each
 * way at NVLS's rate; on an 8-GPU DGX H100 (NVLS since NCCL 2.17) too. */
static void nvls_models_on(const char *name, guint max_n) {
  TopoCluster *c = cluster(name);
  g_assert_true(c->net.has_nvls);
  const cJSON *nvls = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c->json, "nccl"), "nvls");
  g_assert_cmpfloat(c->net.nvls_bw, ==, cJSON_GetObjectItemCaseSensitive(nvls, "GBps")->valuedouble * 1e9);
  g_assert_cmpfloat(c->net.nvls_eff, ==, cJSON_GetObjectItemCaseSensitive(nvls, "efficiency")->valuedouble);
  g_assert_cmpfloat(topo_nvls_algbw(&c->net, TRUE, 8), ==, nvls_algbw(&c->net, TRUE, 8));
  g_assert_cmpfloat(topo_nvls_algbw(&c->net, FALSE, 16), ==, nvls_algbw(&c->net, FALSE, 16));
  g_assert_cmpfloat(topo_nvls_algbw(&c->net, TRUE, 1), ==, 0);
  double S = 1073741824.0;
  for (guint n = 8; n <= max_n; n *= 2) {
    double want = nvls_run_s(&c->net, S, n);
    ModelNet mn = {.hw = c->net};
    double t = model_collective_time_s(&mn, MODEL_COLL_ALLREDUCE, S, n, 1, NULL);
    g_assert_cmpfloat(fabs(t - want), <, 1e-12);
    /* across two domains NVLS does not apply: the ring is slower */
    g_assert_cmpfloat(model_collective_time_s(&mn, MODEL_COLL_ALLREDUCE, S, n, 2, NULL), >, want);
    GError *error = NULL;
    NetModel *net = net_model_load(c, &error);
    g_assert_no_error(error);
    guint *gpus = g_new(guint, n);
    for (guint r = 0; r < n; r++)
      gpus[r] = r;
    NetCollPlan *p = net_coll_plan(net, NET_OP_ALLREDUCE, NET_ALGO_AUTO, -1, gpus, n, 1, S, 1, &error);
    g_assert_no_error(error);
    g_assert_cmpint(net_coll_plan_algo(p), ==, NET_ALGO_NVLS);
    /* alone on the fabric, the flows take that time */
    g_assert_cmpfloat(fabs(net_coll_plan_time(net, p) - want), <, 2e-9);
    /* its flows are the GPUs' NVSwitch links, one up and one down each */
    GArray *links = g_array_new(FALSE, FALSE, sizeof(guint));
    net_coll_plan_links(p, links);
    g_assert_cmpuint(links->len, ==, 2 * n);
    TopoFabric *f = net_model_fabric(net);
    for (guint i = 0; i < links->len; i++) {
      guint l = g_array_index(links, guint, i);
      char *a = topo_fabric_vertex_name(f, topo_fabric_link_from(f, l)),
           *b = topo_fabric_vertex_name(f, topo_fabric_link_to(f, l));
      g_assert_true(strstr(a, "nvswitch") || strstr(b, "nvswitch"));
      g_free(a);
      g_free(b);
    }
    g_array_free(links, TRUE);
    net_coll_plan_free(p);
    g_free(gpus);
    net_model_free(net);
  }
  topo_cluster_free(c);
}

static void test_nvls_models(void) {
  nvls_models_on("gb200-nvl72", 64);
  nvls_models_on("dgx-h100-superpod", 8);
  /* a cluster without an nvls block never gets it, and forcing it says why */
  TopoCluster *c = cluster("selene");
  double S = 1073741824.0;
  g_assert_false(c->net.has_nvls);
  GError *error = NULL;
  NetModel *net = net_model_load(c, &error);
  guint gpus[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  NetCollPlan *p = net_coll_plan(net, NET_OP_ALLREDUCE, NET_ALGO_AUTO, -1, gpus, 8, 1, S, 1, &error);
  g_assert_cmpint(net_coll_plan_algo(p), !=, NET_ALGO_NVLS);
  net_coll_plan_free(p);
  p = net_coll_plan(net, NET_OP_ALLREDUCE, NET_ALGO_NVLS, -1, gpus, 8, 1, S, 1, &error);
  g_assert_null(p);
  g_assert_nonnull(strstr(error->message, "nvls"));
  g_clear_error(&error);
  net_model_free(net);
  topo_cluster_free(c);
}

/* Why: the point of an NVL72: a ring of 16 GPUs of one rack never leaves
 * NVLink (no NIC on any of its routes), where on 8-GPU DGX nodes it must. */
static void test_ring_of_16(void) {
  const char *names[] = {"gb200-nvl72", "dgx-b200"};
  for (guint k = 0; k < 2; k++) {
    TopoCluster *c = cluster(names[k]);
    GError *error = NULL;
    NetModel *net = net_model_load(c, &error);
    g_assert_no_error(error);
    guint gpus[16];
    for (guint r = 0; r < 16; r++)
      gpus[r] = r;
    NetCollPlan *p = net_coll_plan(net, NET_OP_ALLREDUCE, NET_ALGO_RING, -1, gpus, 16, 1, 1 << 26, 1, &error);
    g_assert_no_error(error);
    GArray *links = g_array_new(FALSE, FALSE, sizeof(guint));
    net_coll_plan_links(p, links);
    TopoFabric *f = net_model_fabric(net);
    guint nic = 0;
    for (guint i = 0; i < links->len; i++) {
      char *a = topo_fabric_vertex_name(f, topo_fabric_link_to(f, g_array_index(links, guint, i)));
      nic += strstr(a, "nic") != NULL;
      g_free(a);
    }
    if (k == 0)
      g_assert_cmpuint(nic, ==, 0);
    else
      g_assert_cmpuint(nic, >, 0);
    g_array_free(links, TRUE);
    net_coll_plan_free(p);
    net_model_free(net);
    topo_cluster_free(c);
  }
}

/* Why: a domain must be whole nodes and divide the cluster; anything else
 * is one line naming the key. */
static void test_bad_domain(void) {
  const struct {
    double nodes, gpn, domain;
    const char *needle;
  } cases[] = {{36, 4, 70, "not a whole number of nodes"},
               {20, 4, 72, "does not divide the cluster's 80 GPUs"},
               {18, 4, 577, "nvlink_domain_gpus"},
               {18, 4, 2, "not a whole number of nodes"}};
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "nodes", cases[i].nodes);
    cJSON_AddNumberToObject(j, "gpus_per_node", cases[i].gpn);
    cJSON_AddNumberToObject(j, "nics_per_node", 4);
    cJSON_AddNumberToObject(j, "nvlink_domain_gpus", cases[i].domain);
    guint nodes, gpn, nics, host;
    GError *error = NULL;
    g_assert_false(topo_cluster_size_check(j, "x.json", &nodes, &gpn, &nics, &host, &error));
    g_assert_nonnull(error);
    if (!strstr(error->message, cases[i].needle))
      g_error("case %u: '%s' lacks '%s'", i, error->message, cases[i].needle);
    g_assert_null(strchr(error->message, '\n'));
    g_clear_error(&error);
    cJSON_Delete(j);
  }
}

/* NVLS-tree across nodes as NCCL's tuner prices it (src/graph/tuning.cc),
 * by hand: h heads per node (one GPU per NIC), per channel
 * min(B e (h-1)/h x 2, B (x2 on two nodes), the cap), B NCCL's NIC speed;
 * times n / 2(n-1); latency the NVLS latency + 2 log2(nodes) network steps. */
static double nvls_tree_tuner_s(const TopoNet *net, double B, double cap, double S, double n, double nodes,
                                double h) {
  double ch = fmin(fmin(B * net->nvls_eff * (h - 1) / h * 2, B * (nodes <= 2 ? 2 : 1)), cap);
  return net->nvls_latency + 2 * floor(log2(nodes)) * net->nvls_tree_net_hop + S / (h * ch * n / (2 * (n - 1)));
}

static NetCollPlan *plan_on(NetModel *net, NetCollAlgo algo, guint n, double S, GError **error) {
  guint *gpus = g_new(guint, n);
  for (guint r = 0; r < n; r++)
    gpus[r] = r;
  NetCollPlan *p = net_coll_plan(net, NET_OP_ALLREDUCE, algo, -1, gpus, n, 1, S, 1, error);
  g_free(gpus);
  return p;
}

/* Why: on several DGX H100 nodes NCCL (2.18 and later) runs large
 * all-reduces as NVLS-tree: the tuner must choose it where NCCL's model
 * does (not on one node, where plain NVLS runs; not without an NVSwitch or
 * the cluster's nvls.tree constants), its time must be NCCL's where NCCL's
 * per-channel cap binds, and what it moves must be what NCCL moves: S + S/h
 * each way on a head's NVSwitch link (exact where that binds), and S each
 * way between two nodes (each NIC S/h). */
static void test_nvls_tree(void) {
  TopoCluster *c = cluster("dgx-h100-superpod");
  g_assert_true(c->net.has_nvls_tree);
  GError *error = NULL;
  NetModel *net = net_model_load(c, &error);
  g_assert_no_error(error);
  const cJSON *caps = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c->json, "nccl"),
                                                       "channel_caps_GBps");
  double B = cJSON_GetObjectItemCaseSensitive(caps, "net_channel")->valuedouble * 1e9, S = 1073741824.0;
  /* one node: plain NVLS; forcing NVLS-tree there says why */
  NetCollPlan *p = plan_on(net, NET_ALGO_AUTO, 8, S, &error);
  g_assert_cmpint(net_coll_plan_algo(p), ==, NET_ALGO_NVLS);
  net_coll_plan_free(p);
  g_assert_null(plan_on(net, NET_ALGO_NVLS_TREE, 8, S, &error));
  g_assert_nonnull(strstr(error->message, "nvls-tree"));
  g_clear_error(&error);
  /* 2, 8 nodes: chosen, and NCCL's cap binds, so it takes the tuner's time */
  for (guint n = 16; n <= 64; n *= 4) {
    p = plan_on(net, NET_ALGO_AUTO, n, S, &error);
    g_assert_no_error(error);
    g_assert_cmpint(net_coll_plan_algo(p), ==, NET_ALGO_NVLS_TREE);
    g_assert_cmpint(net_coll_plan_proto(p), ==, TOPO_PROTO_SIMPLE);
    double want = nvls_tree_tuner_s(&c->net, B, c->net.nvls_tree_cap[n <= 16 ? 0 : 1], S, n, n / 8, 8);
    g_test_message("%u H100s, 1 GiB: NVLS-tree %.4f ms (NCCL's model %.4f ms)", n, net_coll_plan_time(net, p) * 1e3,
                   want * 1e3);
    g_assert_cmpfloat(fabs(net_coll_plan_time(net, p) - want), <, 2e-9);
    net_coll_plan_free(p);
  }
  /* two nodes, bytes across: S each way over the cut between them */
  guint8 *side = g_new(guint8, topo_cluster_gpus(c));
  for (guint i = 0; i < topo_cluster_gpus(c); i++)
    side[i] = i < 8 ? 0 : i < 16 ? 1 : 2;
  net_model_set_sides(net, side);
  p = plan_on(net, NET_ALGO_NVLS_TREE, 16, S, &error);
  g_assert_no_error(error);
  g_assert_cmpfloat(fabs(net_coll_plan_crossing_bytes(p, 0) - S), <, 1e-3);
  g_assert_cmpfloat(fabs(net_coll_plan_crossing_bytes(p, 1) - S), <, 1e-3);
  net_coll_plan_free(p);
  net_model_set_sides(net, NULL);
  g_free(side);
  net_model_free(net);

  /* without NCCL's caps (raised out of reach) the two nodes' NVSwitch links
   * bind: S (1 + 1/8) each way at NVLS's rate, after the latency */
  cJSON *j = cJSON_Duplicate(c->json, TRUE);
  cJSON *tree = cJSON_GetObjectItemCaseSensitive(
    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "nccl"), "nvls"), "tree");
  cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(tree, "channel_cap_2_nodes_GBps"), 1e5);
  TopoCluster *u = topo_cluster_from_json(j, "uncapped", &error);
  g_assert_no_error(error);
  net = net_model_load(u, &error);
  g_assert_no_error(error);
  p = plan_on(net, NET_ALGO_AUTO, 16, S, &error);
  g_assert_cmpint(net_coll_plan_algo(p), ==, NET_ALGO_NVLS_TREE);
  double want =
    c->net.nvls_latency + 2 * c->net.nvls_tree_net_hop + S * 9 / 8 / (c->net.nvlink_busbw * c->net.nvls_eff);
  g_assert_cmpfloat(want, >, nvls_tree_tuner_s(&c->net, B, 1e14, S, 16, 2, 8)); /* the cap is out of reach */
  g_assert_cmpfloat(fabs(net_coll_plan_time(net, p) - want), <, 2e-9);
  net_coll_plan_free(p);
  net_model_free(net);
  topo_cluster_free(u);
  topo_cluster_free(c);

  /* no nvls block (Selene), no NVSwitch (p3.16xlarge's cube mesh), no
   * nvls.tree block (DGX B200 here): never chosen, and forcing it says why */
  const char *without[] = {"selene", "aws-p3-16xlarge", "dgx-b200"};
  for (guint i = 0; i < G_N_ELEMENTS(without); i++) {
    c = cluster(without[i]);
    g_assert_false(c->net.has_nvls_tree);
    net = net_model_load(c, &error);
    g_assert_no_error(error);
    p = plan_on(net, NET_ALGO_AUTO, 16, S, &error);
    g_assert_cmpint(net_coll_plan_algo(p), !=, NET_ALGO_NVLS_TREE);
    net_coll_plan_free(p);
    g_assert_null(plan_on(net, NET_ALGO_NVLS_TREE, 16, S, &error));
    g_assert_nonnull(strstr(error->message, "nvls-tree"));
    g_clear_error(&error);
    net_model_free(net);
    topo_cluster_free(c);
  }
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/domains/place", test_place);
  g_test_add_func("/domains/nvls-models", test_nvls_models);
  g_test_add_func("/domains/nvls-tree", test_nvls_tree);
  g_test_add_func("/domains/ring-of-16", test_ring_of_16);
  g_test_add_func("/domains/bad-domain", test_bad_domain);
  return g_test_run();
}
