/* ptdsim — the flow solver's cost per event as concurrent flows grow.
 *
 * On Selene's graph (560 nodes, ECMP), keeps F flows in flight (1k, 10k,
 * 100k): each event ends the flows due and starts as many new ones, so every
 * event re-solves the components it touched.  Two traffic patterns: random
 * GPU pairs anywhere (flows share spines and form one large component: the
 * worst case) and rail-local pairs (GPU i to GPU i of another node, as NCCL's
 * rings and pipeline sends are: smaller components).  Prints microseconds
 * per event and the mean number of flows re-solved per event.
 *
 * Usage: bench_flows [EVENTS]   (default 300 per row; run from the build
 * directory or with PTDSIM_DATA_DIR set). */
#include <stdio.h>
#include <stdlib.h>

#include "../network/collective.h"
#include "../network/flow.h"
#include "../topologies/fabric.h"
#include "../base/jsonutil.h"

static void start_flow(NetFlows *net, const TopoFabric *f, GRand *rng, gboolean rail, GArray *hops, int64_t now) {
  guint G = topo_fabric_gpus_per_node(f), nodes = topo_fabric_nodes(f);
  guint a = g_rand_int_range(rng, 0, (gint32)(nodes * G)), b;
  do {
    b = rail ? (guint)g_rand_int_range(rng, 0, (gint32)nodes) * G + a % G
             : (guint)g_rand_int_range(rng, 0, (gint32)(nodes * G));
  } while (b == a);
  g_array_set_size(hops, 0);
  topo_fabric_route(f, a, b, g_rand_int(rng), hops);
  double bytes = g_rand_double_range(rng, 1e6, 1e8);
  net_flow_add(net, (const TopoHop *)(const void *)hops->data, hops->len, bytes, now);
}

int main(int argc, char **argv) {
  guint events = argc > 1 ? (guint)atoi(argv[1]) : 300;
  if (events < 1)
    events = 300;
  GError *error = NULL;
  char *path = g_build_filename(ptd_data_dir(), "topologies", "selene.json", NULL);
  TopoFabric *f = topo_fabric_load(path, &error);
  g_free(path);
  if (!f) {
    fprintf(stderr, "bench_flows: %s\n", error->message);
    return 1;
  }
  guint L = topo_fabric_n_links(f);
  double *cap = g_new(double, L);
  for (guint l = 0; l < L; l++)
    cap[l] = topo_fabric_link_bw(f, l);
  printf("%-12s %8s %8s %14s %16s %14s\n", "pattern", "flows", "events", "us/event", "flows re-solved", "setup s");
  const guint sizes[] = {1000, 10000, 100000};
  for (int rail = 1; rail >= 0; rail--)
    for (guint s = 0; s < G_N_ELEMENTS(sizes); s++) {
      GRand *rng = g_rand_new_with_seed(1234 + sizes[s]);
      NetFlows *net = net_flows_new(L, cap);
      GArray *hops = g_array_new(FALSE, FALSE, sizeof(TopoHop));
      GArray *done = g_array_new(FALSE, FALSE, sizeof(guint));
      gint64 t0 = g_get_monotonic_time();
      net_flow_hold(net);
      for (guint i = 0; i < sizes[s]; i++)
        start_flow(net, f, rng, rail, hops, 0);
      net_flow_release(net, 0);
      double setup = (g_get_monotonic_time() - t0) * 1e-6;
      guint64 solves0, touched0;
      net_flow_stats(net, &solves0, &touched0);
      t0 = g_get_monotonic_time();
      for (guint e = 0; e < events; e++) {
        int64_t now = net_flow_next(net);
        g_array_set_size(done, 0);
        net_flow_hold(net);
        net_flow_advance(net, now, done);
        for (guint k = 0; k < done->len; k++)
          start_flow(net, f, rng, rail, hops, now);
        net_flow_release(net, now);
      }
      double secs = (g_get_monotonic_time() - t0) * 1e-6;
      guint64 solves, touched;
      net_flow_stats(net, &solves, &touched);
      printf("%-12s %8u %8u %14.1f %16.0f %14.2f\n", rail ? "rail-local" : "random", sizes[s], events,
             secs / events * 1e6, (double)(touched - touched0) / events, setup);
      fflush(stdout);
      g_array_free(hops, TRUE);
      g_array_free(done, TRUE);
      net_flows_free(net);
      g_rand_free(rng);
    }
  g_free(cap);
  topo_fabric_free(f);
  return 0;
}
