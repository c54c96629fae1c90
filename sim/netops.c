/* ptdsim — the flow network seen from a task graph (see netops.h). */
#include "netops.h"

struct _SimNetOps {
  SimEngine *engine;
  NetModel *net;
  NetRun *run;
  GPtrArray *plans;  /* NetCollPlan*, owned */
  GHashTable *index; /* key -> plan index + 1 */
  GArray *op_plan;   /* op -> plan index (G_MAXUINT: not a network op) */
  GArray *copies;    /* per plan: how many ranks' transfers it stands for */
  GArray *tokens;    /* scratch */
};

static void on_start(gpointer data, guint op, SimTime now) {
  SimNetOps *n = data;
  guint idx = g_array_index(n->op_plan, guint, op);
  net_run_start(n->run, g_ptr_array_index(n->plans, idx), op, now);
}

static SimTime on_next(gpointer data) { return net_run_next(((SimNetOps *)data)->run); }

static void on_advance(gpointer data, SimTime now, GArray *ended) {
  SimNetOps *n = data;
  g_array_set_size(n->tokens, 0);
  net_run_advance(n->run, now, n->tokens);
  for (guint i = 0; i < n->tokens->len; i++) {
    guint op = (guint)g_array_index(n->tokens, guint64, i);
    g_array_append_val(ended, op);
  }
}

SimNetOps *sim_netops_new(const TopoCluster *cluster, SimEngine *engine, GError **error) {
  NetModel *net = net_model_load(cluster, error);
  if (!net)
    return NULL;
  SimNetOps *n = g_new0(SimNetOps, 1);
  n->engine = engine;
  n->net = net;
  n->run = net_run_new(net);
  n->plans = g_ptr_array_new_with_free_func((GDestroyNotify)net_coll_plan_free);
  n->index = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  n->op_plan = g_array_new(FALSE, FALSE, sizeof(guint));
  n->copies = g_array_new(FALSE, FALSE, sizeof(double));
  n->tokens = g_array_new(FALSE, FALSE, sizeof(guint64));
  sim_engine_set_network(engine, &(SimEngineNetwork){n, on_start, on_next, on_advance});
  return n;
}

void sim_netops_free(SimNetOps *n) {
  if (!n)
    return;
  net_run_free(n->run);
  g_ptr_array_free(n->plans, TRUE);
  g_hash_table_destroy(n->index);
  g_array_free(n->op_plan, TRUE);
  g_array_free(n->copies, TRUE);
  g_array_free(n->tokens, TRUE);
  net_model_free(n->net);
  g_free(n);
}

static guint64 key_salt(const char *key) { return g_str_hash(key) * 0x9e3779b97f4a7c15ull; }

/* The cached plan for `key`, or G_MAXUINT. */
static guint lookup(SimNetOps *n, const char *key) {
  gpointer v = g_hash_table_lookup(n->index, key);
  return v ? GPOINTER_TO_UINT(v) - 1 : G_MAXUINT;
}

static guint keep(SimNetOps *n, const char *key, NetCollPlan *plan, double copies) {
  g_ptr_array_add(n->plans, plan);
  g_array_append_val(n->copies, copies);
  g_hash_table_insert(n->index, g_strdup(key), GUINT_TO_POINTER(n->plans->len));
  return n->plans->len - 1;
}

guint sim_netops_coll(SimNetOps *n, const char *key, NetCollOp op, const guint *gpus, guint count, double copies,
                      double bytes, const guint8 *side) {
  guint idx = lookup(n, key);
  if (idx != G_MAXUINT)
    return idx;
  net_model_set_sides(n->net, side);
  NetCollPlan *p = net_coll_plan(n->net, op, NET_ALGO_AUTO, -1, gpus, count, 1, bytes, key_salt(key), NULL);
  g_assert(p); /* the tuner's choice always applies */
  return keep(n, key, p, copies);
}

guint sim_netops_p2p(SimNetOps *n, const char *key, guint src, guint dst, double copies, double bytes,
                     const guint8 *side) {
  guint idx = lookup(n, key);
  if (idx != G_MAXUINT)
    return idx;
  net_model_set_sides(n->net, side);
  return keep(n, key, net_coll_plan_p2p(n->net, &src, &dst, 1, bytes, key_salt(key)), copies);
}

guint sim_netops_pairs(SimNetOps *n, const char *key, const guint *src, const guint *dst, guint count, double copies,
                       double bytes, const guint8 *side) {
  guint idx = lookup(n, key);
  if (idx != G_MAXUINT)
    return idx;
  net_model_set_sides(n->net, side);
  return keep(n, key, net_coll_plan_p2p(n->net, src, dst, count, bytes, key_salt(key)), copies);
}

guint sim_netops_op(SimNetOps *n, guint plan, const guint *streams, const guint64 *positions, guint count,
                    const SimOpTag *tag) {
  guint op = sim_engine_add_net_op(n->engine, streams, positions, count, tag);
  GArray *map = n->op_plan;
  if (op >= map->len) {
    guint old = map->len;
    g_array_set_size(map, MAX(op + 1, 2 * old));
    for (guint j = old; j < map->len; j++)
      g_array_index(map, guint, j) = G_MAXUINT;
  }
  g_array_index(map, guint, op) = plan;
  return op;
}

const NetCollPlan *sim_netops_plan_of(const SimNetOps *n, guint op, double *copies) {
  if (op >= n->op_plan->len)
    return NULL;
  guint idx = g_array_index(n->op_plan, guint, op);
  if (idx == G_MAXUINT)
    return NULL;
  if (copies)
    *copies = g_array_index(n->copies, double, idx);
  return g_ptr_array_index(n->plans, idx);
}

void sim_netops_built(SimNetOps *n) { net_model_drop_probe(n->net); }
