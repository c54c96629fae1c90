/* ptdsim — the flow network seen from a task graph (see netops.h). */
#include "netops.h"

#include <stdlib.h>

/* A transfer inside a coarse op: it runs from `offset` after the op's
 * start, for its plan's time alone. */
typedef struct {
  guint plan, op;
  SimTime offset;
} Part;

struct _SimNetOps {
  SimEngine *engine;
  NetModel *net;
  NetRun *run;
  GPtrArray *plans;  /* NetCollPlan*, owned */
  GHashTable *index; /* key -> plan index + 1 */
  GArray *op_plan;   /* op -> plan index (G_MAXUINT: not a network op) */
  GArray *copies;    /* per plan: how many ranks' transfers it stands for */
  GArray *solo;      /* per plan: SimTime alone on the network, -1 until asked */
  gboolean fixing;   /* ops added now are fixed at their plan's time alone */
  GArray *fixed;     /* per op: guint8, 1 while it is a fixed op */
  GArray *parts;     /* Part, in coarse ops; op G_MAXUINT until sim_netops_parts_to */
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
  return sim_netops_new_for(cluster, NULL, engine, error);
}

SimNetOps *sim_netops_new_for(const TopoCluster *cluster, const SimPlan *plan, SimEngine *engine, GError **error) {
  NetModel *net = net_model_load(cluster, error);
  if (!net)
    return NULL;
  if (plan && plan->stragglers.n_link) {
    /* --slow-link: a NIC at its factor; a rail down (0): its GPUs send
     * through the next rail's NIC, the two sharing it -- each NIC at half */
    guint nics = MAX(cluster->net.nics_per_node, 1u);
    double *f = g_new(double, (gsize)cluster->nodes * nics);
    for (guint i = 0; i < cluster->nodes * nics; i++)
      f[i] = 1;
    for (guint n = 0; n < cluster->nodes; n++)
      for (guint r = 0; r < nics; r++) {
        double x = sim_plan_nic_factor(plan, n, r);
        if (x <= 0) {
          f[n * nics + r] = MIN(f[n * nics + r], 0.5);
          f[n * nics + (r + 1) % nics] = MIN(f[n * nics + (r + 1) % nics], 0.5);
        } else
          f[n * nics + r] = MIN(f[n * nics + r], x);
      }
    net_model_scale_nics(net, f);
    g_free(f);
  }
  SimNetOps *n = g_new0(SimNetOps, 1);
  n->engine = engine;
  n->net = net;
  n->run = net_run_new(net);
  n->plans = g_ptr_array_new_with_free_func((GDestroyNotify)net_coll_plan_free);
  n->index = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  n->op_plan = g_array_new(FALSE, FALSE, sizeof(guint));
  n->copies = g_array_new(FALSE, FALSE, sizeof(double));
  n->solo = g_array_new(FALSE, FALSE, sizeof(SimTime));
  n->fixed = g_array_new(FALSE, TRUE, sizeof(guint8));
  n->parts = g_array_new(FALSE, FALSE, sizeof(Part));
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
  g_array_free(n->solo, TRUE);
  g_array_free(n->fixed, TRUE);
  g_array_free(n->parts, TRUE);
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
  SimTime unknown = -1;
  g_array_append_val(n->solo, unknown);
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

guint sim_netops_coll_groups(SimNetOps *n, const char *key, NetCollOp op, const guint *gpus, guint count, guint groups,
                             double copies, double bytes, const guint8 *side) {
  guint idx = lookup(n, key);
  if (idx != G_MAXUINT)
    return idx;
  net_model_set_sides(n->net, side);
  NetCollPlan *p = net_coll_plan(n->net, op, NET_ALGO_AUTO, -1, gpus, count, groups, bytes, key_salt(key), NULL);
  g_assert(p);
  return keep(n, key, p, copies);
}

guint sim_netops_alltoall_pair(SimNetOps *n, const char *key, const guint *gpus_a, guint na, guint ga, double bytes_a,
                               const guint *gpus_b, guint nb, guint gb, double bytes_b, double copies,
                               const guint8 *side) {
  guint idx = lookup(n, key);
  if (idx != G_MAXUINT)
    return idx;
  net_model_set_sides(n->net, side);
  guint64 salt = key_salt(key);
  NetCollPlan *a = net_coll_plan(n->net, NET_OP_ALLTOALL, NET_ALGO_AUTO, -1, gpus_a, na, ga, bytes_a, salt, NULL);
  NetCollPlan *b = net_coll_plan(n->net, NET_OP_ALLTOALL, NET_ALGO_AUTO, -1, gpus_b, nb, gb, bytes_b, salt + 1, NULL);
  return keep(n, key, net_coll_plan_together(a, b), copies);
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
  guint op = n->fixing ? sim_engine_add_op_at(n->engine, sim_netops_solo_ns(n, plan), streams, positions, count, tag)
                      : sim_engine_add_net_op(n->engine, streams, positions, count, tag);
  GArray *map = n->op_plan;
  if (op >= map->len) {
    guint old = map->len;
    g_array_set_size(map, MAX(op + 1, 2 * old));
    g_array_set_size(n->fixed, map->len);
    for (guint j = old; j < map->len; j++)
      g_array_index(map, guint, j) = G_MAXUINT;
  }
  g_array_index(map, guint, op) = plan;
  g_array_index(n->fixed, guint8, op) = (guint8)n->fixing;
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

/* --- fixed transfers --- */

void sim_netops_fixing(SimNetOps *n, gboolean on) { n->fixing = on; }

SimTime sim_netops_solo_ns(SimNetOps *n, guint plan) {
  SimTime *solo = &g_array_index(n->solo, SimTime, plan);
  if (*solo < 0)
    *solo = net_coll_plan_ns(n->net, g_ptr_array_index(n->plans, plan));
  return *solo;
}

void sim_netops_part(SimNetOps *n, guint plan, SimTime offset) {
  g_return_if_fail(n->fixing);
  Part p = {plan, G_MAXUINT, offset};
  g_array_append_val(n->parts, p);
}

void sim_netops_parts_to(SimNetOps *n, guint op) {
  for (guint i = n->parts->len; i-- > 0 && g_array_index(n->parts, Part, i).op == G_MAXUINT;)
    g_array_index(n->parts, Part, i).op = op;
}

/* A transfer in the finished run, [a, z): a network op, a fixed op or a
 * part of a coarse op (`ref`: the op, or the part's index). */
enum { SPAN_NET, SPAN_FIXED, SPAN_PART };
typedef struct {
  SimTime a, z;
  guint plan, ref;
  guint8 kind, side;
} Span;

static int span_cmp(const void *x, const void *y) {
  const Span *p = x, *q = y;
  if (p->a != q->a)
    return p->a < q->a ? -1 : 1;
  return (p->z > q->z) - (p->z < q->z);
}

static int u64_cmp(const void *x, const void *y) {
  guint64 p = *(const guint64 *)x, q = *(const guint64 *)y;
  return (p > q) - (p < q);
}

/* Sorts and drops repeats. */
static void sort_unique(GArray *a) {
  if (a->len < 2)
    return;
  qsort(a->data, a->len, sizeof(guint64), u64_cmp);
  guint out = 1;
  for (guint i = 1; i < a->len; i++)
    if (g_array_index(a, guint64, i) != g_array_index(a, guint64, out - 1))
      g_array_index(a, guint64, out++) = g_array_index(a, guint64, i);
  g_array_set_size(a, out);
}

/* What met: fixed ops to move onto the flows, and whether a coarse op's
 * transfer met something (a coarse op cannot be split in place). */
typedef struct {
  GArray *flip;    /* guint ops */
  gboolean coarse; /* a part met another transfer */
  GArray *active;  /* scratch: Span */
} Met;

static void met(SimNetOps *n, const Span *s, Met *m) {
  if (s->kind == SPAN_PART)
    m->coarse = TRUE;
  else if (s->kind == SPAN_FIXED && g_array_index(n->fixed, guint8, s->ref) == 1) {
    g_array_index(n->fixed, guint8, s->ref) = 2; /* listed */
    g_array_append_val(m->flip, s->ref);
  }
}

/* Whether a plan's transfers, sorted by start, never overlap one another:
 * the common case, as a plan's ops mostly share streams. */
static gboolean disjoint(const Span *p, guint np) {
  SimTime end = G_MININT64;
  for (guint i = 0; i < np; i++) {
    if (p[i].a < end && p[i].a < p[i].z)
      return FALSE;
    end = MAX(end, p[i].z);
  }
  return TRUE;
}

/* Notes every two transfers of plans p and q (each list sorted by start;
 * q NULL: p with itself) that overlap for a positive time, one of them
 * fixed.  Two lists of disjoint transfers merge like sorted lists: of two
 * transfers, the one that ends first cannot meet anything later in the
 * other list.  Otherwise a sweep in order of start keeps those still in
 * flight. */
static void sweep(SimNetOps *n, Span *p, guint np, Span *q, guint nq, gboolean p_disjoint, gboolean q_disjoint,
                  Met *m) {
  if (q == NULL ? p_disjoint : p_disjoint && q_disjoint) {
    for (guint i = 0, j = 0; q && i < np && j < nq;) {
      if (p[i].z <= q[j].a || p[i].a >= p[i].z)
        i++;
      else if (q[j].z <= p[i].a || q[j].a >= q[j].z)
        j++;
      else {
        if (p[i].kind != SPAN_NET || q[j].kind != SPAN_NET) {
          met(n, &p[i], m);
          met(n, &q[j], m);
        }
        if (p[i].z <= q[j].z)
          i++;
        else
          j++;
      }
    }
    return;
  }
  g_array_set_size(m->active, 0);
  for (guint i = 0; i < np; i++)
    p[i].side = 0;
  for (guint j = 0; j < nq; j++)
    q[j].side = 1;
  for (guint i = 0, j = 0; i < np || j < nq;) {
    const Span *s = j >= nq || (i < np && p[i].a <= q[j].a) ? &p[i++] : &q[j++];
    if (s->a >= s->z)
      continue; /* takes no time: shares nothing */
    guint keep = 0;
    for (guint k = 0; k < m->active->len; k++) {
      const Span *t = &g_array_index(m->active, Span, k);
      if (t->z <= s->a)
        continue;
      if ((q == NULL || t->side != s->side) && (t->kind != SPAN_NET || s->kind != SPAN_NET)) {
        met(n, t, m);
        met(n, s, m);
      }
      g_array_index(m->active, Span, keep++) = *t;
    }
    g_array_set_size(m->active, keep);
    g_array_append_val(m->active, *s);
  }
}

/* Checks the finished run (see netops.h): every fixed op or coarse part
 * that overlapped a transfer sharing one of its links is noted in `m`. */
static void check(SimNetOps *n, Met *m) {
  guint n_plans = n->plans->len, n_ops = n->op_plan->len;
  /* Which plans have fixed transfers; then pairs of plans that share a
   * link, one of them with fixed transfers (itself included: two of its
   * transfers at once share its links). */
  guint8 *has_fixed = g_new0(guint8, MAX(n_plans, 1));
  for (guint op = 0; op < n_ops; op++)
    if (g_array_index(n->fixed, guint8, op))
      has_fixed[g_array_index(n->op_plan, guint, op)] = 1;
  for (guint i = 0; i < n->parts->len; i++)
    has_fixed[g_array_index(n->parts, Part, i).plan] = 1;
  GArray *uses = g_array_new(FALSE, FALSE, sizeof(guint64)); /* link << 32 | plan */
  GArray *links = g_array_new(FALSE, FALSE, sizeof(guint));
  for (guint p = 0; p < n_plans; p++) {
    g_array_set_size(links, 0);
    net_coll_plan_links(g_ptr_array_index(n->plans, p), links);
    for (guint i = 0; i < links->len; i++) {
      guint64 u = (guint64)g_array_index(links, guint, i) << 32 | p;
      g_array_append_val(uses, u);
    }
  }
  g_array_free(links, TRUE);
  sort_unique(uses);
  GArray *pairs = g_array_new(FALSE, FALSE, sizeof(guint64)); /* plan with fixed << 32 | other */
  for (guint lo = 0, hi; lo < uses->len; lo = hi) {
    guint64 link = g_array_index(uses, guint64, lo) >> 32;
    for (hi = lo + 1; hi < uses->len && g_array_index(uses, guint64, hi) >> 32 == link; hi++)
      ;
    for (guint i = lo; i < hi; i++) {
      guint p = (guint)g_array_index(uses, guint64, i);
      for (guint j = lo; has_fixed[p] && j < hi; j++) {
        guint q = (guint)g_array_index(uses, guint64, j);
        guint64 pair = (guint64)p << 32 | q;
        if (q >= p || !has_fixed[q]) /* each pair of two fixed plans once */
          g_array_append_val(pairs, pair);
      }
    }
  }
  g_array_free(uses, TRUE);
  g_free(has_fixed);
  sort_unique(pairs);
  /* The transfers of the plans in those pairs, bucketed by plan (a count,
   * then a fill); a plan's transfers mostly come in start order already
   * (a stream's ops are issued in order), so a bucket is sorted only when
   * it is not. */
  guint8 *wanted = g_new0(guint8, MAX(n_plans, 1));
  for (guint i = 0; i < pairs->len; i++) {
    guint64 pair = g_array_index(pairs, guint64, i);
    wanted[pair >> 32] = wanted[(guint)pair] = 1;
  }
  guint *first = g_new0(guint, n_plans + 1);
  for (guint op = 0; op < n_ops; op++) {
    guint p = g_array_index(n->op_plan, guint, op);
    if (p != G_MAXUINT && wanted[p])
      first[p + 1]++;
  }
  for (guint i = 0; i < n->parts->len; i++)
    first[g_array_index(n->parts, Part, i).plan + 1]++;
  for (guint p = 0; p < n_plans; p++)
    first[p + 1] += first[p];
  Span *all = g_new(Span, MAX(first[n_plans], 1));
  guint *fill = g_memdup2(first, sizeof(guint) * n_plans);
  for (guint op = 0; op < n_ops; op++) {
    guint p = g_array_index(n->op_plan, guint, op);
    if (p != G_MAXUINT && wanted[p])
      all[fill[p]++] = (Span){sim_engine_op_start(n->engine, op), sim_engine_op_end(n->engine, op), p, op,
                              g_array_index(n->fixed, guint8, op) ? SPAN_FIXED : SPAN_NET, 0};
  }
  for (guint i = 0; i < n->parts->len; i++) {
    const Part *pt = &g_array_index(n->parts, Part, i);
    SimTime a = sim_engine_op_start(n->engine, pt->op) + pt->offset;
    all[fill[pt->plan]++] = (Span){a, a + g_array_index(n->solo, SimTime, pt->plan), pt->plan, i, SPAN_PART, 0};
  }
  g_free(fill);
  g_free(wanted);
  guint8 *apart = g_new(guint8, MAX(n_plans, 1));
  for (guint p = 0; p < n_plans; p++) {
    for (guint k = first[p] + 1; k < first[p + 1]; k++)
      if (span_cmp(&all[k - 1], &all[k]) > 0) {
        qsort(all + first[p], first[p + 1] - first[p], sizeof(Span), span_cmp);
        break;
      }
    apart[p] = (guint8)disjoint(all + first[p], first[p + 1] - first[p]);
  }
  for (guint i = 0; i < pairs->len; i++) {
    guint64 pair = g_array_index(pairs, guint64, i);
    guint p = (guint)(pair >> 32), q = (guint)pair;
    sweep(n, all + first[p], first[p + 1] - first[p], p == q ? NULL : all + first[q],
          p == q ? 0 : first[q + 1] - first[q], apart[p], apart[q], m);
  }
  g_free(apart);
  g_free(first);
  g_free(all);
  g_array_free(pairs, TRUE);
}

/* Rounds of moving the fixed ops that met another transfer onto the flows
 * before all of them go.  Each round runs the whole graph again (a run
 * with few transfers on the flows costs about a fifth of one with all of
 * them, on SC21 Table 1's interleaved rows), so rounds pay only while they
 * converge: when a round moves more than half as many ops as the one
 * before, or after the last round, every fixed op goes. */
#define FIX_ROUNDS 4

gboolean sim_netops_run(SimNetOps *n, gboolean *coarse_met, GError **error) {
  *coarse_met = FALSE;
  Met m = {g_array_new(FALSE, FALSE, sizeof(guint)), FALSE, g_array_new(FALSE, FALSE, sizeof(Span))};
  gboolean ok;
  guint last_flips = G_MAXUINT;
  for (guint round = 1;; round++) {
    if (!(ok = sim_engine_run(n->engine, error)))
      break;
    g_array_set_size(m.flip, 0);
    check(n, &m);
    if (m.coarse) {
      *coarse_met = TRUE;
      break;
    }
    if (m.flip->len == 0)
      break;
    if (round == FIX_ROUNDS || m.flip->len > last_flips / 2) /* every fixed op */
      for (guint op = 0; op < n->op_plan->len; op++)
        if (g_array_index(n->fixed, guint8, op) == 1) {
          g_array_index(n->fixed, guint8, op) = 2;
          g_array_append_val(m.flip, op);
        }
    last_flips = m.flip->len;
    for (guint i = 0; i < m.flip->len; i++) {
      guint op = g_array_index(m.flip, guint, i);
      g_array_index(n->fixed, guint8, op) = 0;
      sim_engine_op_to_network(n->engine, op);
    }
    /* a new live network for the next run */
    net_run_free(n->run);
    n->run = net_run_new(n->net);
  }
  g_array_free(m.flip, TRUE);
  g_array_free(m.active, TRUE);
  return ok;
}
