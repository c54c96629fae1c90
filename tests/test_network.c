/* ptdsim — tests of the network: the cluster link graph (topologies/fabric.c)
 * and the max-min fair flow solver (sim/flow.c).  Max-min cases are solved
 * by hand in the comments and checked exactly. */
#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/jsonutil.h"
#include "../network/collective.h"
#include "../sim/engine.h"
#include "../taskgraph/netops.h"
#include "../network/flow.h"
#include "../plan/plan.h"
#include "../topologies/fabric.h"
#include "../ptdp/ptdp.h"

static TopoFabric *load(const char *name) {
  GError *error = NULL;
  char *path = g_build_filename(ptd_data_dir(), "topologies", name, NULL);
  TopoFabric *f = topo_fabric_load(path, &error);
  g_assert_no_error(error);
  g_assert_nonnull(f);
  g_free(path);
  return f;
}

static GArray *route(const TopoFabric *f, guint a, guint b, guint64 hash) {
  GArray *hops = g_array_new(FALSE, FALSE, sizeof(TopoHop));
  topo_fabric_route(f, a, b, hash, hops);
  return hops;
}

/* A plain (ECMP) route is a chain of links from the source GPU's vertex to
 * the destination's. */
static void assert_chain(const TopoFabric *f, guint a, guint b, const GArray *hops) {
  g_assert_cmpuint(hops->len, >, 0);
  guint at = topo_fabric_gpu_vertex(f, a);
  for (guint i = 0; i < hops->len; i++) {
    TopoHop h = g_array_index(hops, TopoHop, i);
    g_assert_cmpfloat(h.coef, ==, 1.0);
    g_assert_cmpuint(topo_fabric_link_from(f, h.link), ==, at);
    at = topo_fabric_link_to(f, h.link);
  }
  g_assert_cmpuint(at, ==, topo_fabric_gpu_vertex(f, b));
}

static gboolean uses_vertex(const TopoFabric *f, const GArray *hops, const char *name) {
  for (guint i = 0; i < hops->len; i++) {
    char *n = topo_fabric_vertex_name(f, topo_fabric_link_to(f, g_array_index(hops, TopoHop, i).link));
    gboolean hit = strcmp(n, name) == 0;
    g_free(n);
    if (hit)
      return TRUE;
  }
  return FALSE;
}

/* Why: Selene is a rail-optimized three-level fat tree; routes must follow
 * its structure (NVSwitch inside a node; NIC i to leaf i; spines between
 * units; the core between pods) and be connected chains. */
static void test_selene_routes(void) {
  TopoFabric *f = load("selene.json");
  g_assert_cmpuint(topo_fabric_nodes(f), ==, 560);
  guint leaves, spines, cores;
  topo_fabric_switches(f, &leaves, &spines, &cores);
  g_assert_cmpuint(leaves, ==, 28 * 8); /* 20-node units, one leaf per rail */
  g_assert_cmpuint(spines, >, 0);
  g_assert_cmpuint(cores, >, 0); /* four 7-unit pods need a core */
  struct {
    guint a, b, hops;
    const char *via;
  } cases[] = {
      {0, 5, 2, "n0.nvswitch"},       /* same node: GPU -> NVSwitch -> GPU */
      {3, 8 + 3, 6, "u0.leaf3"},      /* same unit, rail 3: through leaf 3 only */
      {3, 8 * 25 + 3, 8, "u1.leaf3"}, /* next unit, same pod: up to a spine */
      {3, 8 * 300 + 3, 10, "u15.leaf3"}, /* another pod: through the core */
  };
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    GArray *h = route(f, cases[c].a, cases[c].b, 7);
    assert_chain(f, cases[c].a, cases[c].b, h);
    g_assert_cmpuint(h->len, ==, cases[c].hops);
    g_assert_true(uses_vertex(f, h, cases[c].via));
    g_array_free(h, TRUE);
  }
  /* The NVSwitch port carries 300 GB/s x 0.77 per direction. */
  GArray *h = route(f, 0, 5, 0);
  g_assert_cmpfloat_with_epsilon(topo_fabric_link_bw(f, g_array_index(h, TopoHop, 0).link), 300e9 * 0.77, 1);
  g_array_free(h, TRUE);
  /* Cross-rail (PXN): GPU 1 to GPU 3 of another node first crosses NVLink to
   * its own node's GPU 3, then leaves on rail 3. */
  h = route(f, 1, 8 + 3, 0);
  assert_chain(f, 1, 8 + 3, h);
  g_assert_true(uses_vertex(f, h, "n0.gpu3"));
  g_assert_true(uses_vertex(f, h, "n0.nic3"));
  g_assert_false(uses_vertex(f, h, "n0.nic1"));
  g_array_free(h, TRUE);
  topo_fabric_free(f);
}

/* Why: ECMP must be deterministic per flow hash yet spread different flows
 * over the spines; adaptive routing spreads one flow evenly. */
static void test_ecmp_and_adaptive(void) {
  TopoFabric *f = load("selene.json");
  guint a = 3, b = 8 * 25 + 3;
  GHashTable *seen = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (guint64 hash = 0; hash < 64; hash++) {
    GArray *x = route(f, a, b, hash), *y = route(f, a, b, hash);
    g_assert_cmpuint(x->len, ==, y->len);
    for (guint i = 0; i < x->len; i++) {
      g_assert_cmpuint(g_array_index(x, TopoHop, i).link, ==, g_array_index(y, TopoHop, i).link);
      g_assert_cmpfloat(g_array_index(x, TopoHop, i).coef, ==, g_array_index(y, TopoHop, i).coef);
    }
    g_hash_table_add(seen, GUINT_TO_POINTER(g_array_index(x, TopoHop, 3).link)); /* the leaf uplink */
    g_array_free(x, TRUE);
    g_array_free(y, TRUE);
  }
  g_assert_cmpuint(g_hash_table_size(seen), >=, 10); /* of 20 uplinks */
  g_hash_table_destroy(seen);
  topo_fabric_set_routing(f, TOPO_ROUTING_ADAPTIVE);
  GArray *h = route(f, a, b, 0);
  /* The shares leaving the source leaf sum to one, over its 20 uplinks. */
  double up = 0;
  guint n_up = 0;
  for (guint i = 0; i < h->len; i++) {
    TopoHop t = g_array_index(h, TopoHop, i);
    char *from = topo_fabric_vertex_name(f, topo_fabric_link_from(f, t.link));
    if (strcmp(from, "u0.leaf3") == 0) {
      up += t.coef;
      n_up++;
    }
    g_free(from);
  }
  g_assert_cmpuint(n_up, ==, 20);
  g_assert_cmpfloat_with_epsilon(up, 1.0, 1e-12);
  g_array_free(h, TRUE);
  topo_fabric_free(f);
}

/* Why: p3.16xlarge has no NVSwitch: pairs joined by two NVLinks, by one, or
 * only through PCIe and the CPUs; NCCL's ring follows NVLink. */
static void test_p3_cube_mesh(void) {
  TopoFabric *f = load("aws-p3-16xlarge.json");
  g_assert_false(topo_fabric_has_nvswitch(f));
  GArray *h = route(f, 0, 3, 0); /* two links */
  assert_chain(f, 0, 3, h);
  g_assert_cmpuint(h->len, ==, 1);
  g_assert_cmpfloat_with_epsilon(topo_fabric_link_bw(f, g_array_index(h, TopoHop, 0).link), 2 * 25e9 * 0.8, 1);
  g_array_free(h, TRUE);
  h = route(f, 0, 1, 0); /* one link */
  g_assert_cmpuint(h->len, ==, 1);
  g_assert_cmpfloat_with_epsilon(topo_fabric_link_bw(f, g_array_index(h, TopoHop, 0).link), 25e9 * 0.8, 1);
  g_array_free(h, TRUE);
  h = route(f, 0, 5, 0); /* no NVLink: through PCIe and the CPUs */
  assert_chain(f, 0, 5, h);
  g_assert_cmpuint(h->len, >=, 4);
  g_assert_true(uses_vertex(f, h, "n0.cpu0"));
  g_array_free(h, TRUE);
  /* the ring: every edge a direct NVLink (one hop) */
  const guint *ring = topo_fabric_node_ring(f);
  for (guint i = 0; i < 8; i++) {
    GArray *e = route(f, ring[i], ring[(i + 1) % 8], 0);
    g_assert_cmpuint(e->len, ==, 1);
    g_array_free(e, TRUE);
  }
  /* across instances: through the one NIC and the switch */
  h = route(f, 5, 8 + 2, 0);
  assert_chain(f, 5, 8 + 2, h);
  g_assert_true(uses_vertex(f, h, "switch"));
  g_array_free(h, TRUE);
  topo_fabric_free(f);
}

/* Why: bad fabric descriptions get one clear error naming the entry. */
static void test_fabric_errors(void) {
  struct {
    const char *json, *mention;
  } cases[] = {
      {"{\"node\": {\"nvlink\": {\"GBps_per_link\": 25}, \"nvlink_pairs\": [[0,1,1],[0,9,2]], \"pcie_GBps\": 10, "
       "\"cpus\": 1}, \"network\": {\"kind\": \"single-switch\", \"link_GBps\": 3}}",
       "nvlink_pairs[1]: GPU 9 does not exist"},
      {"{\"node\": {\"nvswitch\": {\"GBps\": 0}, \"pcie_GBps\": 10}, \"network\": {\"kind\": \"single-switch\", "
       "\"link_GBps\": 3}}",
       "'fabric.node.nvswitch.GBps' is 0"},
      {"{\"node\": {\"nvswitch\": {\"GBps\": 300}, \"pcie_GBps\": -1}, \"network\": {\"kind\": \"single-switch\", "
       "\"link_GBps\": 3}}",
       "'fabric.node.pcie_GBps' is -1"},
      {"{\"node\": {\"pcie_switches\": 2, \"pcie_GBps\": 10}, \"network\": {\"kind\": \"single-switch\", "
       "\"link_GBps\": 3}}",
       "GPU 0 cannot reach GPU 4"},
      {"{\"node\": {\"nvswitch\": {\"GBps\": 300}, \"pcie_GBps\": 10}, \"network\": {\"kind\": \"torus\", "
       "\"link_GBps\": 3}}",
       "'torus' is unknown"},
      {"{\"node\": {\"nvswitch\": {\"GBps\": 300}, \"pcie_GBps\": 10}}", "'fabric.network' is missing"},
      {"{\"routing\": \"random\", \"node\": {\"nvswitch\": {\"GBps\": 300}, \"pcie_GBps\": 10}, \"network\": "
       "{\"kind\": \"single-switch\", \"link_GBps\": 3}}",
       "fabric.routing"},
  };
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    cJSON *j = cJSON_Parse(cases[c].json);
    g_assert_nonnull(j);
    GError *error = NULL;
    TopoFabric *f = topo_fabric_build(j, "test.json", 2, 8, 1, &error);
    g_assert_null(f);
    g_assert_nonnull(error);
    if (!strstr(error->message, cases[c].mention))
      g_test_message("case %u: '%s' does not mention '%s'", c, error->message, cases[c].mention);
    g_assert_nonnull(strstr(error->message, cases[c].mention));
    g_assert_null(strchr(error->message, '\n'));
    g_error_free(error);
    cJSON_Delete(j);
  }
}

/* --- the flow solver --- */

static guint add(NetFlows *n, const guint *links, const double *coef, guint k, double bytes, int64_t now) {
  TopoHop h[8];
  for (guint i = 0; i < k; i++)
    h[i] = (TopoHop){links[i], coef ? coef[i] : 1.0};
  return net_flow_add(n, h, k, bytes, now);
}

/* Why: two flows on one link of 10 B/s get 5 each; when the 10-byte flow
 * ends at t = 2 s the other (10 bytes left) gets all 10 B/s and ends at 3 s. */
static void test_two_flows_one_link(void) {
  double cap[] = {10};
  NetFlows *n = net_flows_new(1, cap);
  guint l = 0;
  guint a = add(n, &l, NULL, 1, 10, 0), b = add(n, &l, NULL, 1, 20, 0);
  g_assert_cmpfloat(net_flow_rate(n, a), ==, 5);
  g_assert_cmpfloat(net_flow_rate(n, b), ==, 5);
  g_assert_cmpint(net_flow_next(n), ==, 2000000000);
  GArray *done = g_array_new(FALSE, FALSE, sizeof(guint));
  net_flow_advance(n, net_flow_next(n), done);
  g_assert_cmpuint(done->len, ==, 1);
  g_assert_cmpuint(g_array_index(done, guint, 0), ==, a);
  g_assert_cmpfloat(net_flow_rate(n, b), ==, 10);
  g_assert_cmpint(net_flow_next(n), ==, 3000000000);
  net_flow_advance(n, net_flow_next(n), done);
  g_assert_cmpuint(done->len, ==, 2);
  g_assert_cmpint(net_flow_next(n), ==, -1);
  g_assert_cmpuint(net_flow_n_active(n), ==, 0);
  g_array_free(done, TRUE);
  net_flows_free(n);
}

/* Why: the parking lot.  Links 0 (cap 1) and 1 (cap 2); a long flow over
 * both, a short flow on each.  Link 0 saturates first at rate 1/2 (two
 * flows), freezing the long flow and short-0 at 1/2; short-1 takes the rest
 * of link 1: 2 - 1/2 = 3/2. */
static void test_parking_lot(void) {
  double cap[] = {1, 2, 1};
  NetFlows *n = net_flows_new(3, cap);
  guint both[] = {0, 1}, l0 = 0, l1 = 1;
  guint lng = add(n, both, NULL, 2, 100, 0), s0 = add(n, &l0, NULL, 1, 100, 0), s1 = add(n, &l1, NULL, 1, 100, 0);
  g_assert_cmpfloat(net_flow_rate(n, lng), ==, 0.5);
  g_assert_cmpfloat(net_flow_rate(n, s0), ==, 0.5);
  g_assert_cmpfloat(net_flow_rate(n, s1), ==, 1.5);
  /* the classic three-link lot, all caps 1: everyone gets 1/2 */
  guint three[] = {0, 1, 2}, l2 = 2;
  net_flow_remove(n, lng, 0);
  net_flow_remove(n, s1, 0);
  guint lng3 = add(n, three, NULL, 3, 100, 0);
  guint t1 = add(n, &l1, NULL, 1, 100, 0), t2 = add(n, &l2, NULL, 1, 100, 0);
  g_assert_cmpfloat(net_flow_rate(n, lng3), ==, 0.5);
  g_assert_cmpfloat(net_flow_rate(n, s0), ==, 0.5);
  g_assert_cmpfloat(net_flow_rate(n, t1), ==, 1.5); /* link 1 has cap 2 */
  g_assert_cmpfloat(net_flow_rate(n, t2), ==, 0.5);
  net_flows_free(n);
}

/* Why: flows with different bottlenecks.  Link 0 (cap 1) carries f1, f2;
 * link 1 (cap 3) carries f2, f3.  Link 0 saturates at 1/2 (f1 = f2 = 1/2);
 * f3 gets 3 - 1/2 = 5/2.  A flow loading a link twice (coef 2, a ring whose
 * two edges cross it) alone on a 10 B/s link gets 5. */
static void test_different_bottlenecks(void) {
  double cap[] = {1, 3, 10};
  NetFlows *n = net_flows_new(3, cap);
  guint l0 = 0, l1 = 1, both[] = {0, 1}, l2 = 2;
  guint f1 = add(n, &l0, NULL, 1, 1, 0), f2 = add(n, both, NULL, 2, 1, 0), f3 = add(n, &l1, NULL, 1, 1, 0);
  g_assert_cmpfloat(net_flow_rate(n, f1), ==, 0.5);
  g_assert_cmpfloat(net_flow_rate(n, f2), ==, 0.5);
  g_assert_cmpfloat(net_flow_rate(n, f3), ==, 2.5);
  double two = 2;
  guint g = add(n, &l2, &two, 1, 1, 0);
  g_assert_cmpfloat(net_flow_rate(n, g), ==, 5);
  /* a repeated link in the hop list counts twice too */
  guint twice[] = {2, 2};
  guint g2 = add(n, twice, NULL, 2, 1, 0);
  g_assert_cmpfloat(net_flow_rate(n, g), ==, 2.5);
  g_assert_cmpfloat(net_flow_rate(n, g2), ==, 2.5);
  net_flows_free(n);
}

/* A reference max-min solver for the tests: plain progressive filling over
 * every flow and link (no components, no heaps), O(F * L) per step. */
static void reference_rates(guint n_links, const double *cap, guint n_flows, guint (*links)[4], double (*coef)[4],
                            const guint *nl, const gboolean *live, double *rate) {
  double *load = g_new0(double, n_links), *weight = g_new0(double, n_links);
  gboolean *frozen = g_new0(gboolean, n_flows);
  for (guint i = 0; i < n_flows; i++)
    frozen[i] = !live[i];
  double level = 0;
  for (;;) {
    for (guint l = 0; l < n_links; l++)
      weight[l] = 0;
    for (guint i = 0; i < n_flows; i++)
      if (!frozen[i])
        for (guint k = 0; k < nl[i]; k++)
          weight[links[i][k]] += coef[i][k];
    double best = INFINITY;
    guint arg = G_MAXUINT;
    for (guint l = 0; l < n_links; l++)
      if (weight[l] > 0 && (cap[l] - load[l]) / weight[l] < best) {
        best = (cap[l] - load[l]) / weight[l];
        arg = l;
      }
    if (arg == G_MAXUINT)
      break;
    double step = best; /* every unfrozen flow rises by `step` */
    level += step;
    for (guint i = 0; i < n_flows; i++)
      if (!frozen[i])
        for (guint k = 0; k < nl[i]; k++)
          load[links[i][k]] += coef[i][k] * step;
    for (guint i = 0; i < n_flows; i++) {
      if (frozen[i])
        continue;
      for (guint k = 0; k < nl[i]; k++)
        if (load[links[i][k]] >= cap[links[i][k]] * (1 - 1e-12)) {
          frozen[i] = TRUE;
          rate[i] = level;
          break;
        }
    }
  }
  g_free(load);
  g_free(weight);
  g_free(frozen);
}

static void incremental_case(guint32 seed) {
  enum { L = 40, F = 120 };
  double cap[L];
  GRand *rng = g_rand_new_with_seed(seed);
  for (guint l = 0; l < L; l++)
    cap[l] = g_rand_int_range(rng, 1, 20);
  guint links[F][4], nl[F];
  double coef[F][4];
  const double coefs[] = {1, 1, 0.5, 2, 0.25};
  for (guint i = 0; i < F; i++) {
    nl[i] = g_rand_int_range(rng, 1, 5);
    for (guint k = 0; k < nl[i]; k++) {
      links[i][k] = g_rand_int_range(rng, 0, L);
      coef[i][k] = coefs[g_rand_int_range(rng, 0, G_N_ELEMENTS(coefs))];
    }
  }
  NetFlows *n = net_flows_new(L, cap);
  guint id[F];
  gboolean live[F] = {FALSE};
  for (guint step = 0; step < 400; step++) {
    guint i = g_rand_int_range(rng, 0, F);
    /* every 40 steps, a batch of starts and ends under one hold */
    if (step % 40 == 20) {
      net_flow_hold(n);
      for (guint b = 0; b < 10; b++, i = (i + 7) % F) {
        if (live[i])
          net_flow_remove(n, id[i], 0);
        else
          id[i] = add(n, links[i], coef[i], nl[i], 1e9, 0);
        live[i] = !live[i];
      }
      net_flow_release(n, 0);
    }
    if (live[i])
      net_flow_remove(n, id[i], 0);
    else
      id[i] = add(n, links[i], coef[i], nl[i], 1e9, 0);
    live[i] = !live[i];
    if (step % 40 != 39)
      continue;
    NetFlows *s = net_flows_new(L, cap);
    guint sid[F];
    for (guint j = 0; j < F; j++)
      if (live[j])
        sid[j] = add(s, links[j], coef[j], nl[j], 1e9, 0);
    double want[F];
    reference_rates(L, cap, F, links, coef, nl, live, want);
    for (guint j = 0; j < F; j++)
      if (live[j]) {
        g_assert_cmpfloat_with_epsilon(net_flow_rate(s, sid[j]), net_flow_rate(n, id[j]), 1e-9);
        g_assert_cmpfloat_with_epsilon(want[j], net_flow_rate(n, id[j]), 1e-9);
      }
    net_flows_free(s);
  }
  guint64 solves, touched;
  net_flow_stats(n, &solves, &touched);
  g_assert_cmpuint(solves, ==, 410); /* 400 single changes, 10 held batches */
  g_assert_cmpuint(touched, <, 400ull * F); /* components, not everything */
  net_flows_free(n);
  g_rand_free(rng);
}

/* Why: the incremental re-solve (only across links that flows fill, grown
 * until no filled link is shared with a flow left out) must give the rates
 * of a solve from scratch, after any sequence of starts and ends. */
static void test_incremental_matches_scratch(void) {
  for (guint32 seed = 1; seed <= 60; seed++)
    incremental_case(seed);
}

/* Why: the same through time: flows of random sizes complete (several at
 * one instant under a hold, as the engine does), new ones start with the
 * ones that end, and after every event each rate equals a solve from
 * scratch of the flows then in flight.  This exercises the floor (flows
 * slower than every flow that changed keep their rate) with completions, not
 * only with starts and removals. */
static void completions_case(guint32 seed) {
  enum { L = 30, F = 80 };
  double cap[L];
  GRand *rng = g_rand_new_with_seed(seed);
  for (guint l = 0; l < L; l++)
    cap[l] = g_rand_int_range(rng, 1, 20);
  NetFlows *n = net_flows_new(L, cap);
  guint links[2 * F][4], nl[2 * F], id_of[2 * F];
  double coef[2 * F][4];
  const double coefs[] = {1, 1, 0.5, 2};
  GHashTable *by_id = g_hash_table_new(NULL, NULL); /* flow id -> index + 1 */
  guint next = 0;
  for (guint i = 0; i < 2 * F; i++) {
    nl[i] = g_rand_int_range(rng, 1, 5);
    for (guint k = 0; k < nl[i]; k++) {
      links[i][k] = g_rand_int_range(rng, 0, L);
      coef[i][k] = coefs[g_rand_int_range(rng, 0, G_N_ELEMENTS(coefs))];
    }
  }
  net_flow_hold(n);
  for (; next < F; next++) {
    id_of[next] = add(n, links[next], coef[next], nl[next], g_rand_double_range(rng, 1, 100), 0);
    g_hash_table_insert(by_id, GUINT_TO_POINTER(id_of[next]), GUINT_TO_POINTER(next + 1));
  }
  net_flow_release(n, 0);
  GArray *done = g_array_new(FALSE, FALSE, sizeof(guint));
  for (guint event = 0; event < 60 && net_flow_n_active(n) > 0; event++) {
    int64_t now = net_flow_next(n);
    g_array_set_size(done, 0);
    net_flow_hold(n);
    net_flow_advance(n, now, done);
    for (guint k = 0; k < done->len; k++) /* ids are reused: forget them all first */
      g_hash_table_remove(by_id, GUINT_TO_POINTER(g_array_index(done, guint, k)));
    for (guint k = 0; k < done->len; k++) {
      if (next < 2 * F) {
        id_of[next] = add(n, links[next], coef[next], nl[next], g_rand_double_range(rng, 1, 100), now);
        g_hash_table_insert(by_id, GUINT_TO_POINTER(id_of[next]), GUINT_TO_POINTER(next + 1));
        next++;
      }
    }
    net_flow_release(n, now);
    gboolean live[2 * F] = {FALSE};
    double want[2 * F];
    GHashTableIter it;
    gpointer key, val;
    g_hash_table_iter_init(&it, by_id);
    while (g_hash_table_iter_next(&it, &key, &val))
      live[GPOINTER_TO_UINT(val) - 1] = TRUE;
    reference_rates(L, cap, 2 * F, links, coef, nl, live, want);
    g_hash_table_iter_init(&it, by_id);
    while (g_hash_table_iter_next(&it, &key, &val)) {
      guint j = GPOINTER_TO_UINT(val) - 1;
      g_assert_cmpfloat_with_epsilon(want[j], net_flow_rate(n, GPOINTER_TO_UINT(key)), 1e-9);
    }
  }
  g_array_free(done, TRUE);
  g_hash_table_destroy(by_id);
  net_flows_free(n);
  g_rand_free(rng);
}

/* Runs seeded random flows (several waves, starts and ends at shared
 * instants) on `n` to the end; appends (completion time, flow id, rate
 * before it ended) of every flow to `log`. */
static void reset_scenario(NetFlows *n, guint L, guint32 seed, GArray *log) {
  GRand *rng = g_rand_new_with_seed(seed);
  GArray *done = g_array_new(FALSE, FALSE, sizeof(guint));
  int64_t now = 0;
  for (guint wave = 0; wave < 4; wave++) {
    net_flow_hold(n);
    for (guint f = 0; f < 25; f++) {
      guint links[3], k = g_rand_int_range(rng, 1, 4);
      double coef[3];
      for (guint j = 0; j < k; j++) {
        links[j] = g_rand_int_range(rng, 0, L);
        coef[j] = j % 2 ? 0.5 : 1.0;
      }
      add(n, links, coef, k, g_rand_double_range(rng, 1, 1000), now);
    }
    net_flow_release(n, now);
    for (guint e = 0; e < 12 && net_flow_n_active(n) > 0; e++) {
      now = net_flow_next(n);
      g_array_set_size(done, 0);
      net_flow_advance(n, now, done);
      for (guint j = 0; j < done->len; j++) {
        double rec[3] = {(double)now, g_array_index(done, guint, j), 0};
        g_array_append_vals(log, rec, 3);
      }
    }
  }
  while (net_flow_n_active(n) > 0) { /* drain */
    now = net_flow_next(n);
    g_array_set_size(done, 0);
    net_flow_advance(n, now, done);
    for (guint j = 0; j < done->len; j++) {
      double rec[3] = {(double)now, g_array_index(done, guint, j), 1};
      g_array_append_vals(log, rec, 3);
    }
  }
  g_array_free(done, TRUE);
  g_rand_free(rng);
}

/* Why: the tuner's probes share one network, reset between them; a reset
 * network must run anything exactly as a new one does (the same
 * completion instants and flow ids, bit for bit), whatever ran on it
 * before -- here long runs whose running link totals have drifted. */
static void test_reset_is_new(void) {
  enum { L = 24 };
  double cap[L];
  for (guint l = 0; l < L; l++)
    cap[l] = 3 + l % 7;
  for (guint32 seed = 1; seed <= 20; seed++) {
    GArray *fresh = g_array_new(FALSE, FALSE, sizeof(double)), *reused = g_array_new(FALSE, FALSE, sizeof(double)),
           *before = g_array_new(FALSE, FALSE, sizeof(double));
    NetFlows *a = net_flows_new(L, cap), *b = net_flows_new(L, cap);
    reset_scenario(a, L, seed, fresh);
    reset_scenario(b, L, seed + 1000, before);
    net_flows_reset(b);
    reset_scenario(b, L, seed, reused);
    g_assert_cmpuint(fresh->len, >, 3 * 50);
    g_assert_cmpuint(fresh->len, ==, reused->len);
    g_assert_cmpmem(fresh->data, fresh->len * sizeof(double), reused->data, reused->len * sizeof(double));
    guint64 s1, t1, s2, t2;
    net_flow_stats(a, &s1, &t1);
    net_flow_stats(b, &s2, &t2);
    g_assert_cmpuint(s1, ==, s2);
    g_assert_cmpuint(t1, ==, t2);
    net_flows_free(a);
    net_flows_free(b);
    g_array_free(fresh, TRUE);
    g_array_free(reused, TRUE);
    g_array_free(before, TRUE);
  }
}

static void test_incremental_completions(void) {
  for (guint32 seed = 1; seed <= 60; seed++)
    completions_case(seed);
}



/* Why: flows ending at the same ns are reported in start order. */
static void test_completion_ties(void) {
  double cap[] = {4, 4};
  NetFlows *n = net_flows_new(2, cap);
  guint l0 = 0, l1 = 1;
  guint b = add(n, &l1, NULL, 1, 8, 0), a = add(n, &l0, NULL, 1, 8, 0);
  GArray *done = g_array_new(FALSE, FALSE, sizeof(guint));
  net_flow_advance(n, net_flow_next(n), done);
  g_assert_cmpuint(done->len, ==, 2);
  g_assert_cmpuint(g_array_index(done, guint, 0), ==, b);
  g_assert_cmpuint(g_array_index(done, guint, 1), ==, a);
  g_array_free(done, TRUE);
  net_flows_free(n);
}

/* --- network ops in the engine --- */

/* A fake network: every op ends 7 ns after it starts. */
typedef struct {
  GArray *ops, *ends;
} Fake;

static void fake_start(gpointer data, guint op, SimTime now) {
  Fake *f = data;
  SimTime end = now + 7;
  g_array_append_val(f->ops, op);
  g_array_append_val(f->ends, end);
}

static SimTime fake_next(gpointer data) {
  Fake *f = data;
  SimTime best = -1;
  for (guint i = 0; i < f->ends->len; i++) {
    SimTime t = g_array_index(f->ends, SimTime, i);
    if (t >= 0 && (best < 0 || t < best))
      best = t;
  }
  return best;
}

static void fake_advance(gpointer data, SimTime now, GArray *ended) {
  Fake *f = data;
  for (guint i = 0; i < f->ends->len; i++)
    if (g_array_index(f->ends, SimTime, i) == now) {
      g_array_append_val(ended, g_array_index(f->ops, guint, i));
      g_array_index(f->ends, SimTime, i) = -1;
    }
}

/* Why: an op whose end the network decides sits in stream order and
 * dependencies like any other: A (10 ns) -> B (network, 7 ns) -> C (5 ns);
 * B and a fixed 17 ns op D on another stream end at the same instant, and
 * the heap's event (D) is handled first. */
static void test_engine_network_ops(void) {
  SimEngine *e = sim_engine_new();
  guint s0 = sim_engine_add_stream(e, 0), s1 = sim_engine_add_stream(e, 1);
  Fake fake = {g_array_new(FALSE, FALSE, sizeof(guint)), g_array_new(FALSE, FALSE, sizeof(SimTime))};
  sim_engine_set_network(e, &(SimEngineNetwork){&fake, fake_start, fake_next, fake_advance});
  guint a = sim_engine_add_op1(e, 10, s0, NULL);
  guint b = sim_engine_add_net_op(e, &s0, NULL, 1, NULL);
  guint c = sim_engine_add_op1(e, 5, s0, NULL);
  guint d = sim_engine_add_op1(e, 17, s1, NULL);
  guint x = sim_engine_add_net_op(e, &s1, NULL, 1, NULL); /* after D on stream 1 */
  sim_engine_add_dep(e, a, b);
  GError *error = NULL;
  g_assert_true(sim_engine_run(e, &error));
  g_assert_no_error(error);
  g_assert_cmpint(sim_engine_op_start(e, b), ==, 10);
  g_assert_cmpint(sim_engine_op_end(e, b), ==, 17);
  g_assert_cmpint(sim_engine_op_start(e, c), ==, 17);
  g_assert_cmpint(sim_engine_op_end(e, c), ==, 22);
  g_assert_cmpint(sim_engine_op_end(e, d), ==, 17);
  g_assert_cmpint(sim_engine_op_end(e, x), ==, 24);
  g_assert_cmpint(sim_engine_makespan(e), ==, 24);
  /* D's completion (heap) came before B's (network): X was started first */
  g_assert_cmpuint(g_array_index(fake.ops, guint, 0), ==, b);
  g_assert_cmpuint(g_array_index(fake.ops, guint, 1), ==, x);
  g_assert_cmpuint(sim_engine_n_events(e), ==, 5);
  g_array_free(fake.ops, TRUE);
  g_array_free(fake.ends, TRUE);
  sim_engine_free(e);
}

/* Why: transfers that share a link share its bandwidth.  Two sends from the
 * same GPU to two other nodes both leave through its NIC: together each
 * takes twice as long (less the fixed latency) as alone; a send from another
 * GPU on another rail is unaffected. */
static void test_netrun_sharing(void) {
  GError *error = NULL;
  TopoCluster *c = topo_cluster_load("selene", &error);
  g_assert_no_error(error);
  NetModel *net = net_model_load(c, &error);
  g_assert_no_error(error);
  guint s1 = 0, d1 = 8, d2 = 16, s3 = 1, d3 = 9;
  double bytes = 1e9;
  NetCollPlan *p1 = net_coll_plan_p2p(net, &s1, &d1, 1, bytes, 1);
  NetCollPlan *p2 = net_coll_plan_p2p(net, &s1, &d2, 1, bytes, 2);
  NetCollPlan *p3 = net_coll_plan_p2p(net, &s3, &d3, 1, bytes, 3);
  double alone = net_coll_plan_time(net, p1);
  NetRun *run = net_run_new(net);
  net_run_start(run, p1, 1, 0);
  net_run_start(run, p2, 2, 0);
  net_run_start(run, p3, 3, 0);
  GArray *done = g_array_new(FALSE, FALSE, sizeof(guint64));
  double end[4] = {0};
  for (int64_t t; (t = net_run_next(run)) >= 0;) {
    guint before = done->len;
    net_run_advance(run, t, done);
    for (guint i = before; i < done->len; i++)
      end[g_array_index(done, guint64, i)] = t * 1e-9;
  }
  /* sharing the NIC at half rate = sending twice the bytes alone */
  NetCollPlan *twice = net_coll_plan_p2p(net, &s1, &d1, 1, 2 * bytes, 1);
  double alone2 = net_coll_plan_time(net, twice);
  net_coll_plan_free(twice);
  g_assert_cmpfloat(alone, >, c->net.p2p_latency_inter);
  g_assert_cmpfloat_with_epsilon(end[1], alone2, 1e-6 * alone2);
  g_assert_cmpfloat_with_epsilon(end[2], alone2, 1e-6 * alone2);
  g_assert_cmpfloat_with_epsilon(end[3], alone, 1e-6 * alone);
  /* alone, a send runs at the NIC's rate: 25 GB/s x 0.96 */
  g_assert_cmpfloat_with_epsilon(bytes / (alone2 - alone), 24e9, 1e-5 * 24e9);
  g_array_free(done, TRUE);
  net_run_free(run);
  net_coll_plan_free(p1);
  net_coll_plan_free(p2);
  net_coll_plan_free(p3);
  net_model_free(net);
  topo_cluster_free(c);
}

/* Why: alone, an all-to-all of equal pieces ends when its most loaded
 * link has carried its pairs (that link saturates first in progressive
 * filling and holds its pairs to one rate to the end; every other pair is
 * at least as fast), so one flow per group and class (inside a node,
 * across nodes) standing for its pairs, its coefficients the pairs on each
 * link, takes the same time as the 4032 flows of 64 GPUs over 8 DGX H100
 * nodes: two flows, two groups four.  A group of 3 GPUs of one node and 1
 * of another too: its bottleneck is the NIC of the lone GPU's rail on the
 * first node, which carries 3 pieces: 3/4 S at the NIC's rate. */
static void test_alltoall_lumped(void) {
  GError *error = NULL;
  TopoCluster *c = topo_cluster_load("dgx-h100-superpod", &error);
  g_assert_no_error(error);
  NetModel *net = net_model_load(c, &error);
  g_assert_no_error(error);
  guint gpus[128];
  for (guint i = 0; i < 128; i++)
    gpus[i] = i;
  double S = 256.0 * 1024 * 1024;
  NetCollPlan *one = net_coll_plan(net, NET_OP_ALLTOALL, NET_ALGO_AUTO, -1, gpus, 64, 1, S, 1, &error);
  NetCollPlan *two = net_coll_plan(net, NET_OP_ALLTOALL, NET_ALGO_AUTO, -1, gpus, 64, 2, S, 1, &error);
  g_assert_cmpuint(net_coll_plan_n_flows(one), ==, 2);
  g_assert_cmpuint(net_coll_plan_n_flows(two), ==, 4);
  /* two groups on their own nodes take the time of one */
  g_assert_cmpint(net_coll_plan_ns(net, two), ==, net_coll_plan_ns(net, one));
  /* across nodes the NIC carries 56 of a GPU's 64 pieces: 56/64 S at the
   * NIC's rate, after the size-independent latency (the time of a 1-byte
   * all-to-all) */
  double t = net_coll_plan_time(net, one);
  NetCollPlan *tiny = net_coll_plan(net, NET_OP_ALLTOALL, NET_ALGO_AUTO, -1, gpus, 64, 1, 1, 1, &error);
  double lat = net_coll_plan_time(net, tiny);
  g_test_message("all-to-all of 256 MiB on 64 GPUs: %.6f s (latency %.6f s, NIC %.1f GB/s)", t, lat,
                 c->net.nic_bw / 1e9);
  g_assert_cmpfloat_with_epsilon(t - lat, 56.0 / 64 * (S - 1) / c->net.nic_bw, 1e-4 * t);
  guint uneven[] = {0, 1, 2, 8};
  NetCollPlan *u = net_coll_plan(net, NET_OP_ALLTOALL, NET_ALGO_AUTO, -1, uneven, 4, 1, S, 1, &error);
  NetCollPlan *utiny = net_coll_plan(net, NET_OP_ALLTOALL, NET_ALGO_AUTO, -1, uneven, 4, 1, 1, 1, &error);
  g_assert_cmpuint(net_coll_plan_n_flows(u), ==, 2);
  double tu = net_coll_plan_time(net, u);
  g_assert_cmpfloat_with_epsilon(tu - net_coll_plan_time(net, utiny), 3.0 / 4 * (S - 1) / c->net.nic_bw, 1e-4 * tu);
  net_coll_plan_free(tiny);
  net_coll_plan_free(utiny);
  net_coll_plan_free(one);
  net_coll_plan_free(two);
  net_coll_plan_free(u);
  net_model_free(net);
  topo_cluster_free(c);
}

/* Why: DeepEP's exchange is two all-to-alls at once, one among the rails'
 * GPUs across nodes and one inside each node (net_coll_plan_together):
 * on links they do not share, after the longer of the two latencies (the
 * time of a 1-byte exchange), it transfers for the longer of the two
 * alone, its flows both plans' flows; a plan with nothing to send adds
 * nothing. */
static void test_alltoalls_together(void) {
  GError *error = NULL;
  TopoCluster *c = topo_cluster_load("dgx-h100-superpod", &error);
  g_assert_no_error(error);
  NetModel *net = net_model_load(c, &error);
  g_assert_no_error(error);
  guint rails[] = {0, 8, 1, 9}, inside[] = {2, 3, 4, 5, 10, 11, 12, 13};
  double S = 64.0 * 1024 * 1024;
  NetCollPlan *la = net_coll_plan(net, NET_OP_ALLTOALL, NET_ALGO_AUTO, -1, rails, 2, 2, 1, 1, &error);
  NetCollPlan *lb = net_coll_plan(net, NET_OP_ALLTOALL, NET_ALGO_AUTO, -1, inside, 4, 2, 1, 2, &error);
  int64_t lat_a = net_coll_plan_ns(net, la), lat_b = net_coll_plan_ns(net, lb);
  g_assert_cmpint(lat_a, >, lat_b); /* InfiniBand's latency over NVLink's */
  for (guint k = 0; k < 2; k++) { /* the inter-node exchange the slower, then the NVLink one */
    double Sb = k ? 40 * S : S;
    NetCollPlan *a = net_coll_plan(net, NET_OP_ALLTOALL, NET_ALGO_AUTO, -1, rails, 2, 2, S, 1, &error);
    NetCollPlan *b = net_coll_plan(net, NET_OP_ALLTOALL, NET_ALGO_AUTO, -1, inside, 4, 2, Sb, 2, &error);
    int64_t ta = net_coll_plan_ns(net, a), tb = net_coll_plan_ns(net, b);
    guint flows = net_coll_plan_n_flows(a) + net_coll_plan_n_flows(b);
    g_assert_cmpint(k ? tb : ta, >, k ? ta : tb);
    NetCollPlan *both = net_coll_plan_together(a, b);
    g_assert_cmpuint(net_coll_plan_n_flows(both), ==, flows);
    int64_t want = lat_a + MAX(ta - lat_a, tb - lat_b);
    g_assert_cmpint(llabs(net_coll_plan_ns(net, both) - want), <=, 2);
    NetCollPlan *none = net_coll_plan(net, NET_OP_ALLTOALL, NET_ALGO_AUTO, -1, rails, 1, 4, S, 1, &error);
    both = net_coll_plan_together(none, both);
    g_assert_cmpint(llabs(net_coll_plan_ns(net, both) - want), <=, 2);
    net_coll_plan_free(both);
  }
  net_coll_plan_free(la);
  net_coll_plan_free(lb);
  net_model_free(net);
  topo_cluster_free(c);
}

/* Why: bisection_bandwidth_GBps.dp is per phase: each stage's data-parallel
 * bytes over the union of its own transfers' intervals, summed over stages.
 * By hand: stage 0 moves 4 + 4 bytes over [0, 2) and [1, 3) s: 8 / 3 B/s;
 * stage 1 moves 6 + 3 bytes over [10, 12) and [13, 14) s: 9 / 3 B/s; a
 * transfer of no duration (stage 2) adds nothing.  The old measure (all
 * bytes over the union of every interval, 6 s) would give 17 / 6. */
static void test_phased_bandwidth(void) {
  const int64_t s = 1000000000;
  int64_t a[] = {0, 1 * s, 10 * s, 13 * s, 20 * s}, z[] = {2 * s, 3 * s, 12 * s, 14 * s, 20 * s};
  guint phase[] = {0, 0, 1, 1, 2};
  double bytes[] = {4, 4, 6, 3, 5};
  g_assert_cmpfloat_with_epsilon(sim_phased_bandwidth(5, a, z, phase, bytes, 3), 8.0 / 3 + 3, 1e-12);
  /* one phase: the union over everything */
  guint one[] = {0, 0, 0, 0, 0};
  g_assert_cmpfloat_with_epsilon(sim_phased_bandwidth(5, a, z, one, bytes, 1), 22.0 / 6, 1e-12);
  /* order does not matter */
  int64_t a2[] = {13 * s, 0, 10 * s, 1 * s}, z2[] = {14 * s, 2 * s, 12 * s, 3 * s};
  guint phase2[] = {1, 0, 1, 0};
  double bytes2[] = {3, 4, 6, 4};
  g_assert_cmpfloat_with_epsilon(sim_phased_bandwidth(4, a2, z2, phase2, bytes2, 2), 8.0 / 3 + 3, 1e-12);
}

/* Why: SC21 section 5.9's effective bisection bandwidth counts the bytes
 * that cross the cut from one side to the other; a ring crosses it once
 * each way, a send one way only.  With node 0 on side 0 and node 1 on side
 * 1: a send 0 -> 8 crosses 0 -> 1 only; 9 -> 1 the other way; a ring
 * all-reduce over both nodes' 16 GPUs moves 2 (n-1)/n S across each
 * direction (per channel its share, summed), the same both ways. */
static void test_crossing_one_direction(void) {
  GError *error = NULL;
  TopoCluster *c = topo_cluster_load("selene", &error);
  g_assert_no_error(error);
  NetModel *net = net_model_load(c, &error);
  g_assert_no_error(error);
  guint8 *side = g_malloc(topo_cluster_gpus(c));
  memset(side, 2, topo_cluster_gpus(c));
  memset(side, 0, 8);
  memset(side + 8, 1, 8);
  net_model_set_sides(net, side);
  guint a = 0, b = 8, x = 9, y = 1;
  NetCollPlan *up = net_coll_plan_p2p(net, &a, &b, 1, 1e6, 1);
  NetCollPlan *down = net_coll_plan_p2p(net, &x, &y, 1, 3e6, 2);
  g_assert_cmpfloat(net_coll_plan_crossing_bytes(up, 0), ==, 1e6);
  g_assert_cmpfloat(net_coll_plan_crossing_bytes(up, 1), ==, 0);
  g_assert_cmpfloat(net_coll_plan_crossing_bytes(down, 0), ==, 0);
  g_assert_cmpfloat(net_coll_plan_crossing_bytes(down, 1), ==, 3e6);
  guint gpus[16];
  for (guint i = 0; i < 16; i++)
    gpus[i] = i;
  double S = 1 << 30;
  NetCollPlan *ring = net_coll_plan(net, NET_OP_ALLREDUCE, NET_ALGO_RING, TOPO_PROTO_SIMPLE, gpus, 16, 1, S, 3, &error);
  g_assert_no_error(error);
  g_assert_cmpfloat_with_epsilon(net_coll_plan_crossing_bytes(ring, 0), 2.0 * 15 / 16 * S, 1e-9 * S);
  g_assert_cmpfloat_with_epsilon(net_coll_plan_crossing_bytes(ring, 1), 2.0 * 15 / 16 * S, 1e-9 * S);
  /* a GPU marked 2 is outside the cut */
  guint z = 16;
  NetCollPlan *outside = net_coll_plan_p2p(net, &a, &z, 1, 1e6, 4);
  g_assert_cmpfloat(net_coll_plan_crossing_bytes(outside, 0) + net_coll_plan_crossing_bytes(outside, 1), ==, 0);
  net_coll_plan_free(up);
  net_coll_plan_free(down);
  net_coll_plan_free(ring);
  net_coll_plan_free(outside);
  g_free(side);
  net_model_free(net);
  topo_cluster_free(c);
}

/* Why: the flow network runs a send across nodes as NCCL does -- one flow
 * per channel (2), none faster than a channel's 14 GB/s.  On Selene two
 * channels share an HDR NIC's 24 GB/s (NIC-bound: the time is the latency
 * plus bytes over 24 GB/s, as one flow gave); on the DGX H100 SuperPOD's
 * 47 GB/s NDR NIC the two channels cap the send at 28 GB/s; a 256 KiB send
 * is one channel at 14 GB/s. */
static void test_p2p_channels_flow(void) {
  const char *clusters[] = {"selene", "dgx-h100-superpod"};
  const double rate[] = {24e9, 28e9};
  for (guint k = 0; k < 2; k++) {
    GError *error = NULL;
    TopoCluster *c = topo_cluster_load(clusters[k], &error);
    g_assert_no_error(error);
    NetModel *net = net_model_load(c, &error);
    g_assert_no_error(error);
    guint a = 0, b = c->gpus_per_node; /* rank 0 of node 0 to rank 0 of node 1: same rail */
    double big = 1 << 30, small = 256 * 1024;
    NetCollPlan *p1 = net_coll_plan_p2p(net, &a, &b, 1, big, 1), *p2 = net_coll_plan_p2p(net, &a, &b, 1, 2 * big, 1);
    /* the difference of two sizes removes the latency: bytes over the rate */
    double t1 = net_coll_plan_time(net, p1), t2 = net_coll_plan_time(net, p2);
    g_assert_cmpfloat_with_epsilon(big / (t2 - t1), rate[k], 1e-5 * rate[k]);
    NetCollPlan *ps = net_coll_plan_p2p(net, &a, &b, 1, small, 1), *ps2 = net_coll_plan_p2p(net, &a, &b, 1, 2 * small, 1);
    double u1 = net_coll_plan_time(net, ps), u2 = net_coll_plan_time(net, ps2); /* 256 KiB, 512 KiB: one channel */
    g_assert_cmpfloat_with_epsilon(small / (u2 - u1), 14e9, 1e-3 * 14e9);
    net_coll_plan_free(p1);
    net_coll_plan_free(p2);
    net_coll_plan_free(ps);
    net_coll_plan_free(ps2);
    net_model_free(net);
    topo_cluster_free(c);
  }
}


/* A random task graph on `cluster`'s first 16 GPUs: per GPU a compute
 * stream and a communication stream; rounds of compute (0 to 2, 8, 32 or
 * 128 ms by seed) each followed by a transfer -- a send to another GPU or
 * an all-reduce over a random group -- of 1 to 64 MB, so that transfers
 * meet on links in a few places or in many.  Returns every op's start and
 * end. */
static GArray *random_run(const char *cluster, guint32 seed, gboolean fixing) {
  GError *error = NULL;
  TopoCluster *c = topo_cluster_load(cluster, &error);
  g_assert_no_error(error);
  SimEngine *e = sim_engine_new();
  SimNetOps *n = sim_netops_new(c, e, &error);
  g_assert_no_error(error);
  sim_netops_fixing(n, fixing);
  enum { G = 16, ROUNDS = 12 };
  for (guint g = 0; g < G; g++) {
    sim_engine_add_stream(e, g);
    sim_engine_add_stream(e, g);
  }
  GRand *rng = g_rand_new_with_seed(seed);
  guint last[G];
  for (guint g = 0; g < G; g++)
    last[g] = G_MAXUINT;
  for (guint r = 0; r < ROUNDS; r++)
    for (guint g = 0; g < G; g++) {
      guint op = sim_engine_add_op1(e, g_rand_int_range(rng, 0, 2000000 << (seed % 4 * 2)), 2 * g, NULL);
      if (last[g] != G_MAXUINT)
        sim_engine_add_dep(e, last[g], op);
      guint members[4] = {g}, k = 1, streams[4];
      guint want = g_rand_boolean(rng) ? 2 : 4;
      while (k < want) { /* distinct GPUs */
        guint x = (guint)g_rand_int_range(rng, 0, G);
        gboolean dup = FALSE;
        for (guint j = 0; j < k; j++)
          dup |= members[j] == x;
        if (!dup)
          members[k++] = x;
      }
      double bytes = 1e6 * g_rand_int_range(rng, 1, 65);
      char key[64];
      guint plan;
      if (k == 2) {
        g_snprintf(key, sizeof key, "p2p:%u:%u:%.0f", members[0], members[1], bytes);
        plan = sim_netops_p2p(n, key, members[0], members[1], 1, bytes, NULL);
      } else {
        g_snprintf(key, sizeof key, "ar:%u:%u:%u:%u:%.0f", members[0], members[1], members[2], members[3], bytes);
        plan = sim_netops_coll(n, key, NET_OP_ALLREDUCE, members, k, 1, bytes, NULL);
      }
      for (guint j = 0; j < k; j++)
        streams[j] = 2 * members[j] + 1;
      guint xfer = sim_netops_op(n, plan, streams, NULL, k, NULL);
      sim_engine_add_dep(e, op, xfer);
      for (guint j = 0; j < k; j++)
        last[members[j]] = xfer;
    }
  g_rand_free(rng);
  sim_netops_built(n);
  gboolean coarse = FALSE;
  g_assert_true(sim_netops_run(n, &coarse, &error));
  g_assert_no_error(error);
  g_assert_false(coarse);
  GArray *times = g_array_new(FALSE, FALSE, sizeof(SimTime));
  for (guint op = 0; op < sim_engine_n_ops(e); op++) {
    SimTime t[2] = {sim_engine_op_start(e, op), sim_engine_op_end(e, op)};
    g_array_append_vals(times, t, 2);
  }
  sim_netops_free(n);
  sim_engine_free(e);
  topo_cluster_free(c);
  return times;
}

/* Why: transfers may first run as fixed ops of their time alone, which
 * sim_netops_run keeps only where no fixed transfer met another on a link
 * (netops.h).  Whatever it keeps, every op's start and end must be the
 * flows' to the nanosecond: over random graphs on an NVSwitch cluster and
 * on V100 nodes without one (they take two or three runs). */
static void test_fixed_transfers_exact(void) {
  const char *clusters[] = {"selene", "aws-p3-16xlarge"};
  for (guint k = 0; k < G_N_ELEMENTS(clusters); k++)
    for (guint32 seed = 1; seed <= 12; seed++) {
      GArray *flows = random_run(clusters[k], seed, FALSE), *fixed = random_run(clusters[k], seed, TRUE);
      g_assert_cmpuint(flows->len, ==, fixed->len);
      for (guint i = 0; i < flows->len; i++)
        g_assert_cmpint(g_array_index(flows, SimTime, i), ==, g_array_index(fixed, SimTime, i));
      g_array_free(flows, TRUE);
      g_array_free(fixed, TRUE);
    }
}

/* Why: a transfer whose links carry nothing else takes its plan's time
 * alone to the nanosecond, wherever it starts; two sends out of one GPU's
 * NIC at once share it, and a fixed run must give what the flows give:
 * each as long as a send of twice the bytes alone. */
static void test_fixed_transfers_meet(void) {
  GError *error = NULL;
  TopoCluster *c = topo_cluster_load("selene", &error);
  g_assert_no_error(error);
  for (int fixing = 0; fixing < 2; fixing++) {
    SimEngine *e = sim_engine_new();
    SimNetOps *n = sim_netops_new(c, e, &error);
    g_assert_no_error(error);
    sim_netops_fixing(n, fixing);
    for (guint s = 0; s < 4; s++)
      sim_engine_add_stream(e, s);
    guint p1 = sim_netops_p2p(n, "a", 0, 8, 1, 1e9, NULL), p2 = sim_netops_p2p(n, "b", 0, 16, 1, 1e9, NULL);
    guint p3 = sim_netops_p2p(n, "c", 1, 9, 1, 1e9, NULL), twice = sim_netops_p2p(n, "d", 0, 8, 1, 2e9, NULL);
    SimTime alone = sim_netops_solo_ns(n, p1), alone2 = sim_netops_solo_ns(n, twice);
    guint delay = sim_engine_add_op1(e, 12345, 2, NULL);
    guint a = sim_netops_op(n, p1, (guint[]){0}, NULL, 1, NULL), b = sim_netops_op(n, p2, (guint[]){1}, NULL, 1, NULL);
    guint x = sim_netops_op(n, p3, (guint[]){2}, NULL, 1, NULL);
    sim_engine_add_dep(e, delay, x);
    sim_netops_built(n);
    gboolean coarse;
    g_assert_true(sim_netops_run(n, &coarse, &error));
    g_assert_cmpint(sim_engine_op_end(e, a), ==, alone2);
    g_assert_cmpint(sim_engine_op_end(e, b), ==, alone2);
    g_assert_cmpint(sim_engine_op_start(e, x), ==, 12345);
    g_assert_cmpint(sim_engine_op_end(e, x), ==, 12345 + alone);
    sim_netops_free(n);
    sim_engine_free(e);
  }
  topo_cluster_free(c);
}


/* A slow rank in a ring all-reduce: the ring runs at its slowest link.  One
 * GPU on each of 8 Selene nodes (all on rail 0), NCCL's ring, Simple
 * protocol: the time is a latency plus 2(n-1)/n S over the ring's rate, so
 * the time per byte (the slope between S and 2S) doubles when one node's
 * NIC runs at half rate, and is unchanged when a NIC the ring does not use
 * (rail 1) does. */
static double ring_slope(NetModel *net) {
  guint gpus[8];
  for (guint i = 0; i < 8; i++)
    gpus[i] = 8 * i;
  double t[2];
  for (guint j = 0; j < 2; j++) {
    GError *error = NULL;
    NetCollPlan *pl = net_coll_plan(net, NET_OP_ALLREDUCE, NET_ALGO_RING, TOPO_PROTO_SIMPLE, gpus, 8, 1,
                                    (j + 1) * 1073741824.0, 1, &error);
    g_assert_no_error(error);
    t[j] = net_coll_plan_time(net, pl);
    net_coll_plan_free(pl);
  }
  return (t[1] - t[0]) / 1073741824.0;
}

static void test_slow_rank_ring(void) {
  GError *error = NULL;
  TopoCluster *c = topo_cluster_load("selene", &error);
  g_assert_no_error(error);
  guint nics = c->net.nics_per_node, n = c->nodes * nics;
  double *f = g_new(double, n);
  for (guint i = 0; i < n; i++)
    f[i] = 1;
  NetModel *net = net_model_load(c, &error);
  double base = ring_slope(net);
  net_model_free(net);
  f[3 * nics + 1] = 0.5; /* rail 1 of node 3: not on the ring */
  net = net_model_load(c, &error);
  net_model_scale_nics(net, f);
  g_assert_cmpfloat_with_epsilon(ring_slope(net), base, 1e-9 * base);
  net_model_free(net);
  f[3 * nics + 0] = 0.5; /* rail 0 of node 3: the ring's slowest link at half */
  net = net_model_load(c, &error);
  net_model_scale_nics(net, f);
  double slow = ring_slope(net);
  g_test_message("seconds per byte: %.6g at full rate, %.6g with one NIC at half", base, slow);
  g_assert_cmpfloat_with_epsilon(slow, 2 * base, 1e-6 * base);
  net_model_free(net);
  g_free(f);
  topo_cluster_free(c);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/network/slow-rank-ring", test_slow_rank_ring);
  g_test_add_func("/network/p2p-channels", test_p2p_channels_flow);
  g_test_add_func("/bisection/phased", test_phased_bandwidth);
  g_test_add_func("/network/alltoall-lumped", test_alltoall_lumped);
  g_test_add_func("/network/alltoalls-together", test_alltoalls_together);
  g_test_add_func("/bisection/one-direction", test_crossing_one_direction);
  g_test_add_func("/fabric/selene-routes", test_selene_routes);
  g_test_add_func("/fabric/ecmp-adaptive", test_ecmp_and_adaptive);
  g_test_add_func("/fabric/p3-cube-mesh", test_p3_cube_mesh);
  g_test_add_func("/fabric/errors", test_fabric_errors);
  g_test_add_func("/flow/two-flows-one-link", test_two_flows_one_link);
  g_test_add_func("/flow/parking-lot", test_parking_lot);
  g_test_add_func("/flow/different-bottlenecks", test_different_bottlenecks);
  g_test_add_func("/flow/incremental", test_incremental_matches_scratch);
  g_test_add_func("/flow/incremental-completions", test_incremental_completions);
  g_test_add_func("/flow/completion-ties", test_completion_ties);
  g_test_add_func("/flow/reset-is-new", test_reset_is_new);
  g_test_add_func("/flow/engine-network-ops", test_engine_network_ops);
  g_test_add_func("/flow/netrun-sharing", test_netrun_sharing);
  g_test_add_func("/netops/fixed-transfers-exact", test_fixed_transfers_exact);
  g_test_add_func("/netops/fixed-transfers-meet", test_fixed_transfers_meet);
  return g_test_run();
}
