/* Unit tests of the discrete-event engine (sim/engine.h).
 *
 * Small hand-built graphs check each scheduling rule with times worked out in
 * the comments; random graphs check the whole contract against a reference
 * written here from the definition: with each stream's order fixed (position,
 * then id), an op starts at the latest end among its dependencies and the
 * op before it on each of its streams (as soon as possible), and the engine
 * deadlocks exactly when those constraints contain a cycle.
 */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "../sim/engine.h"
#include "../schedule/schedule.h"

/* Adds `n` streams to `e` (one GPU each) and checks the ids are 0..n-1. */
static void add_streams(SimEngine *e, guint n) {
  for (guint i = 0; i < n; i++)
    g_assert_cmpuint(sim_engine_add_stream(e, i), ==, i);
  g_assert_cmpuint(sim_engine_n_streams(e), ==, n);
}

static void run_ok(SimEngine *e) {
  GError *error = NULL;
  gboolean ok = sim_engine_run(e, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
}

static void assert_span(const SimEngine *e, guint op, SimTime start, SimTime end) {
  g_assert_cmpint(sim_engine_op_start(e, op), ==, start);
  g_assert_cmpint(sim_engine_op_end(e, op), ==, end);
}

/* --- small graphs ------------------------------------------------------ */

/* An empty engine runs and reports nothing: the degenerate case must not
 * trip over zero-sized arrays. */
static void test_empty(void) {
  SimEngine *e = sim_engine_new();
  add_streams(e, 2);
  run_ok(e);
  g_assert_cmpint(sim_engine_makespan(e), ==, 0);
  g_assert_cmpuint(sim_engine_n_events(e), ==, 0);
  guint n = 99;
  sim_engine_stream_ops(e, 1, &n);
  g_assert_cmpuint(n, ==, 0);
  sim_engine_free(e);
}

/* Ops on one stream run back to back in issue order: each starts where the
 * previous one ended, so the times are the prefix sums of the durations. */
static void test_chain(void) {
  static const SimTime dur[] = {3, 7, 1000000007, 11, 2, 5};
  SimEngine *e = sim_engine_new();
  add_streams(e, 1);
  for (guint i = 0; i < G_N_ELEMENTS(dur); i++)
    g_assert_cmpuint(sim_engine_add_op1(e, dur[i], 0, NULL), ==, i);
  g_assert_cmpuint(sim_engine_n_ops(e), ==, G_N_ELEMENTS(dur));
  run_ok(e);
  SimTime t = 0;
  for (guint i = 0; i < G_N_ELEMENTS(dur); i++) {
    assert_span(e, i, t, t + dur[i]);
    t += dur[i];
  }
  g_assert_cmpint(sim_engine_makespan(e), ==, t);
  g_assert_cmpuint(sim_engine_n_events(e), ==, G_N_ELEMENTS(dur));
  guint n = 0;
  const guint *ops = sim_engine_stream_ops(e, 0, &n);
  g_assert_cmpuint(n, ==, G_N_ELEMENTS(dur));
  for (guint i = 0; i < n; i++)
    g_assert_cmpuint(ops[i], ==, i);
  sim_engine_free(e);
}

/* Two streams without dependencies do not wait for each other, even when
 * their ops are issued interleaved. */
static void test_parallel(void) {
  SimEngine *e = sim_engine_new();
  add_streams(e, 2);
  guint a0 = sim_engine_add_op1(e, 10, 0, NULL);
  guint b0 = sim_engine_add_op1(e, 4, 1, NULL);
  guint a1 = sim_engine_add_op1(e, 5, 0, NULL);
  guint b1 = sim_engine_add_op1(e, 30, 1, NULL);
  run_ok(e);
  assert_span(e, a0, 0, 10);
  assert_span(e, a1, 10, 15);
  assert_span(e, b0, 0, 4);
  assert_span(e, b1, 4, 34);
  g_assert_cmpint(sim_engine_makespan(e), ==, 34); /* max(10 + 5, 4 + 30) */
  sim_engine_free(e);
}

/* A dependency across streams delays the dependent op to the producer's
 * end; the ops behind it on its stream are delayed with it (in order), and
 * a dependency that is already satisfied changes nothing. */
static void test_cross_stream_dep(void) {
  SimEngine *e = sim_engine_new();
  add_streams(e, 2);
  guint a0 = sim_engine_add_op1(e, 10, 0, NULL);
  guint b0 = sim_engine_add_op1(e, 3, 1, NULL);
  guint b1 = sim_engine_add_op1(e, 4, 1, NULL); /* waits for a0 */
  guint b2 = sim_engine_add_op1(e, 1, 1, NULL); /* no deps, but behind b1 */
  guint a1 = sim_engine_add_op1(e, 2, 0, NULL); /* waits for b0: done at 3 */
  sim_engine_add_dep(e, a0, b1);
  sim_engine_add_dep(e, b0, a1);
  run_ok(e);
  assert_span(e, a0, 0, 10);
  assert_span(e, b0, 0, 3);
  assert_span(e, b1, 10, 14); /* max(a0 end 10, b0 end 3) */
  assert_span(e, b2, 14, 15);
  assert_span(e, a1, 10, 12); /* stream order dominates the met dependency */
  g_assert_cmpint(sim_engine_makespan(e), ==, 15);
  sim_engine_free(e);
}

/* An op on two streams (a collective) starts only when it heads both, and
 * holds both while it runs; later ops on either stream wait for it even
 * when their own stream was free earlier. */
static void test_multi_stream(void) {
  SimEngine *e = sim_engine_new();
  add_streams(e, 3);
  guint a0 = sim_engine_add_op1(e, 5, 0, NULL);
  guint b0 = sim_engine_add_op1(e, 9, 1, NULL);
  guint ab[] = {0, 1};
  guint m = sim_engine_add_op(e, 2, ab, 2, NULL);
  guint a1 = sim_engine_add_op1(e, 1, 0, NULL);
  guint b1 = sim_engine_add_op1(e, 6, 1, NULL);
  guint c0 = sim_engine_add_op1(e, 7, 2, NULL); /* unrelated stream */
  run_ok(e);
  assert_span(e, a0, 0, 5);
  assert_span(e, b0, 0, 9);
  assert_span(e, m, 9, 11); /* max(5, 9) */
  assert_span(e, a1, 11, 12);
  assert_span(e, b1, 11, 17);
  assert_span(e, c0, 0, 7);
  g_assert_cmpuint(sim_engine_op_n_streams(e, m), ==, 2);
  g_assert_cmpuint(sim_engine_op_streams(e, m)[0], ==, 0);
  g_assert_cmpuint(sim_engine_op_streams(e, m)[1], ==, 1);
  g_assert_cmpint(sim_engine_makespan(e), ==, 17);
  sim_engine_free(e);
}

/* Explicit positions reorder a stream: it runs its ops in increasing
 * position, ties in creation order, and ops added without positions take
 * their id as position. */
static void test_positions(void) {
  SimEngine *e = sim_engine_new();
  add_streams(e, 2);
  guint s0 = 0;
  guint64 p30 = 30, p10 = 10, p20 = 20;
  guint x = sim_engine_add_op_at(e, 100, &s0, &p30, 1, NULL); /* id 0 */
  guint y = sim_engine_add_op_at(e, 10, &s0, &p10, 1, NULL);  /* id 1 */
  guint z = sim_engine_add_op_at(e, 1, &s0, &p20, 1, NULL);   /* id 2 */
  guint w = sim_engine_add_op_at(e, 5, &s0, &p10, 1, NULL);   /* id 3, ties y */
  guint v = sim_engine_add_op1(e, 2, 0, NULL);                /* id 4 = position 4 */
  /* A two-stream op placed first on stream 1 but last-but-one on stream 0. */
  guint s01[] = {0, 1};
  guint64 pos[] = {25, 0};
  guint u = sim_engine_add_op_at(e, 3, s01, pos, 2, NULL); /* id 5 */
  guint t1 = sim_engine_add_op1(e, 1, 1, NULL);            /* id 6 */
  run_ok(e);
  /* Stream 0 order: v(4) y(10) w(10) z(20) u(25) x(30). */
  static const guint want[] = {4, 1, 3, 2, 5, 0};
  guint n = 0;
  const guint *ops = sim_engine_stream_ops(e, 0, &n);
  g_assert_cmpuint(n, ==, G_N_ELEMENTS(want));
  for (guint i = 0; i < n; i++)
    g_assert_cmpuint(ops[i], ==, want[i]);
  assert_span(e, v, 0, 2);
  assert_span(e, y, 2, 12);
  assert_span(e, w, 12, 17);
  assert_span(e, z, 17, 18);
  assert_span(e, u, 18, 21);
  assert_span(e, x, 21, 121);
  /* Stream 1: u then t1, so t1 waits for u although stream 1 was idle. */
  ops = sim_engine_stream_ops(e, 1, &n);
  g_assert_cmpuint(n, ==, 2);
  g_assert_cmpuint(ops[0], ==, u);
  g_assert_cmpuint(ops[1], ==, t1);
  assert_span(e, t1, 21, 22);
  g_assert_cmpint(sim_engine_makespan(e), ==, 121);
  sim_engine_free(e);
}

/* Zero-duration ops (barriers, empty transfers) start and end at the same
 * instant, pass readiness on without delay, and are counted as events. */
static void test_zero_duration(void) {
  SimEngine *e = sim_engine_new();
  add_streams(e, 2);
  guint a0 = sim_engine_add_op1(e, 0, 0, NULL);
  guint a1 = sim_engine_add_op1(e, 0, 0, NULL);
  guint b0 = sim_engine_add_op1(e, 6, 1, NULL);
  guint ab[] = {0, 1};
  guint m = sim_engine_add_op(e, 0, ab, 2, NULL); /* zero-time barrier */
  guint a2 = sim_engine_add_op1(e, 4, 0, NULL);
  guint b1 = sim_engine_add_op1(e, 0, 1, NULL);
  guint a3 = sim_engine_add_op1(e, 0, 0, NULL);
  sim_engine_add_dep(e, a1, b0); /* met at time 0 */
  sim_engine_add_dep(e, b1, a3); /* b1 ends at 6, a2 at 10 */
  run_ok(e);
  assert_span(e, a0, 0, 0);
  assert_span(e, a1, 0, 0);
  assert_span(e, b0, 0, 6);
  assert_span(e, m, 6, 6);
  assert_span(e, a2, 6, 10);
  assert_span(e, b1, 6, 6);
  assert_span(e, a3, 10, 10);
  g_assert_cmpint(sim_engine_makespan(e), ==, 10);
  g_assert_cmpuint(sim_engine_n_events(e), ==, 7);

  /* All zero: makespan zero, everything ran. */
  SimEngine *z = sim_engine_new();
  add_streams(z, 1);
  for (guint i = 0; i < 50; i++)
    sim_engine_add_op1(z, 0, 0, NULL);
  run_ok(z);
  g_assert_cmpint(sim_engine_makespan(z), ==, 0);
  g_assert_cmpuint(sim_engine_n_events(z), ==, 50);
  for (guint i = 0; i < 50; i++)
    assert_span(z, i, 0, 0);
  sim_engine_free(z);
  sim_engine_free(e);
}

/* Tags are stored as given and defaulted (-1 labels) when NULL. */
static void test_tags(void) {
  SimEngine *e = sim_engine_new();
  add_streams(e, 1);
  SimOpTag tag = {.category = 3, .pass = 2, .stage = 7, .chunk = 1, .microbatch = 42, .layer = 9};
  guint a = sim_engine_add_op1(e, 1, 0, &tag);
  guint b = sim_engine_add_op1(e, 1, 0, NULL);
  run_ok(e);
  const SimOpTag *ta = sim_engine_op_tag(e, a);
  g_assert_cmpuint(ta->category, ==, 3);
  g_assert_cmpuint(ta->pass, ==, 2);
  g_assert_cmpint(ta->stage, ==, 7);
  g_assert_cmpint(ta->chunk, ==, 1);
  g_assert_cmpint(ta->microbatch, ==, 42);
  g_assert_cmpint(ta->layer, ==, 9);
  const SimOpTag *tb = sim_engine_op_tag(e, b);
  g_assert_cmpint(tb->stage, ==, -1);
  g_assert_cmpint(tb->chunk, ==, -1);
  g_assert_cmpint(tb->microbatch, ==, -1);
  g_assert_cmpint(tb->layer, ==, -1);
  sim_engine_free(e);
}

/* --- deadlocks ----------------------------------------------------------- */

static void assert_deadlock(SimEngine *e) {
  GError *error = NULL;
  gboolean ok = sim_engine_run(e, &error);
  g_assert_false(ok);
  g_assert_error(error, SIM_ENGINE_ERROR, SIM_ENGINE_ERROR_DEADLOCK);
  g_assert_nonnull(strstr(error->message, "deadlock"));
  g_error_free(error);
}

/* Each way a graph can block forever must end the run with a deadlock error.
 * The cases run in a subprocess with a time limit, so that a hang or a crash
 * fails this test instead of the whole program. */
static void test_deadlocks(void) {
  if (!g_test_subprocess()) {
    g_test_trap_subprocess(NULL, 10 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_passed();
    return;
  }
  /* Two-op cycle across streams. */
  SimEngine *e = sim_engine_new();
  add_streams(e, 2);
  guint a = sim_engine_add_op1(e, 1, 0, NULL);
  guint b = sim_engine_add_op1(e, 1, 1, NULL);
  sim_engine_add_dep(e, a, b);
  sim_engine_add_dep(e, b, a);
  assert_deadlock(e);
  sim_engine_free(e);

  /* Three-op cycle behind some ops that can run. */
  e = sim_engine_new();
  add_streams(e, 3);
  sim_engine_add_op1(e, 5, 0, NULL);
  guint x = sim_engine_add_op1(e, 1, 0, NULL);
  guint y = sim_engine_add_op1(e, 1, 1, NULL);
  guint z = sim_engine_add_op1(e, 1, 2, NULL);
  sim_engine_add_dep(e, x, y);
  sim_engine_add_dep(e, y, z);
  sim_engine_add_dep(e, z, x);
  assert_deadlock(e);
  sim_engine_free(e);

  /* A dependency against stream order: the first op of a stream waits for
   * the second. */
  e = sim_engine_new();
  add_streams(e, 1);
  guint first = sim_engine_add_op1(e, 1, 0, NULL);
  guint second = sim_engine_add_op1(e, 1, 0, NULL);
  sim_engine_add_dep(e, second, first);
  assert_deadlock(e);
  sim_engine_free(e);

  /* Two two-stream ops whose positions disagree between the streams (each
   * heads one stream and waits to head the other). */
  e = sim_engine_new();
  add_streams(e, 2);
  guint s01[] = {0, 1};
  guint64 p_ab[] = {1, 2}, p_ba[] = {2, 1};
  sim_engine_add_op_at(e, 1, s01, p_ab, 2, NULL);
  sim_engine_add_op_at(e, 1, s01, p_ba, 2, NULL);
  assert_deadlock(e);
  sim_engine_free(e);
}

/* --- random graphs against a reference ----------------------------------- */

typedef guint StreamTriple[3];
typedef guint64 PosTriple[3];

typedef struct {
  guint n_ops, n_streams;
  SimTime *dur;
  guint *n_st;       /* streams per op */
  StreamTriple *st;  /* the op's streams (distinct) */
  PosTriple *pos;    /* its position on each */
  GArray *deps;      /* guint pairs */
} Graph;

static void graph_free(Graph *g) {
  g_free(g->dur);
  g_free(g->n_st);
  g_free(g->st);
  g_free(g->pos);
  g_array_free(g->deps, TRUE);
}

/* A random graph.  Mode 0: issue order (positions = ids), deps from lower to
 * higher id: always runnable.  Mode 1: positions follow a random permutation
 * of the ops and deps go from lower to higher rank in it: runnable, and the
 * streams must be reordered.  Mode 2: random positions and deps in any
 * direction: usually deadlocks, sometimes not. */
static Graph graph_random(guint32 seed, guint n_ops, guint n_streams, guint n_deps, int mode) {
  GRand *rng = g_rand_new_with_seed(seed);
  Graph g = {.n_ops = n_ops, .n_streams = n_streams};
  g.dur = g_new(SimTime, n_ops);
  g.n_st = g_new(guint, n_ops);
  g.st = g_new(StreamTriple, n_ops);
  g.pos = g_new(PosTriple, n_ops);
  g.deps = g_array_new(FALSE, FALSE, sizeof(guint) * 2);
  guint *rank = g_new(guint, n_ops);
  for (guint i = 0; i < n_ops; i++)
    rank[i] = i;
  if (mode == 1)
    for (guint i = n_ops - 1; i > 0; i--) {
      guint j = (guint)g_rand_int_range(rng, 0, (gint32)i + 1), tmp = rank[i];
      rank[i] = rank[j];
      rank[j] = tmp;
    }
  for (guint i = 0; i < n_ops; i++) {
    g.dur[i] = g_rand_int_range(rng, 0, 10) == 0 ? 0 : g_rand_int_range(rng, 1, 1000);
    /* 1 to 3 streams; in mode 2 mostly one, so that not every graph locks. */
    g.n_st[i] = mode == 2 ? (g_rand_int_range(rng, 0, 4) == 0 ? 2u : 1u) : (guint)g_rand_int_range(rng, 1, 4);
    g.n_st[i] = MIN(g.n_st[i], n_streams);
    for (guint k = 0; k < g.n_st[i]; k++) {
      guint s;
      gboolean dup;
      do {
        s = (guint)g_rand_int_range(rng, 0, (gint32)n_streams);
        dup = FALSE;
        for (guint j = 0; j < k; j++)
          dup |= g.st[i][j] == s;
      } while (dup);
      g.st[i][k] = s;
      g.pos[i][k] = mode == 2 ? (guint64)g_rand_int_range(rng, 0, (gint32)n_ops) : rank[i];
    }
  }
  for (guint d = 0; d < n_deps; d++) {
    guint a = (guint)g_rand_int_range(rng, 0, (gint32)n_ops), b = (guint)g_rand_int_range(rng, 0, (gint32)n_ops);
    if (a == b)
      continue;
    guint pair[2] = {a, b};
    if (mode != 2 && rank[a] > rank[b]) {
      pair[0] = b;
      pair[1] = a;
    }
    g_array_append_vals(g.deps, pair, 1);
  }
  g_free(rank);
  g_rand_free(rng);
  return g;
}

/* A network model with nothing in flight: installing it makes the engine
 * take its event loop, where fixed-duration ops alone take the pass over a
 * topological order.  Both must give the same times. */
static void idle_start(gpointer data, guint op, SimTime now) {
  (void)data, (void)op, (void)now;
  g_assert_not_reached(); /* no network ops are added */
}
static SimTime idle_next(gpointer data) {
  (void)data;
  return -1;
}
static void idle_advance(gpointer data, SimTime now, GArray *ended) { (void)data, (void)now, (void)ended; }

static gboolean use_event_loop;

static SimEngine *graph_engine(const Graph *g, gboolean with_positions) {
  SimEngine *e = sim_engine_new();
  if (use_event_loop)
    sim_engine_set_network(e, &(SimEngineNetwork){NULL, idle_start, idle_next, idle_advance});
  for (guint s = 0; s < g->n_streams; s++)
    sim_engine_add_stream(e, s / 2);
  for (guint i = 0; i < g->n_ops; i++) {
    SimOpTag tag = {0, 0, -1, -1, -1, (gint32)i};
    guint id = with_positions ? sim_engine_add_op_at(e, g->dur[i], g->st[i], g->pos[i], g->n_st[i], &tag)
                              : sim_engine_add_op(e, g->dur[i], g->st[i], g->n_st[i], &tag);
    g_assert_cmpuint(id, ==, i);
  }
  for (guint d = 0; d < g->deps->len; d++) {
    const guint *pair = &g_array_index(g->deps, guint, 2 * d);
    sim_engine_add_dep(e, pair[0], pair[1]);
  }
  return e;
}

typedef struct {
  guint64 pos;
  guint op;
} PosOp;

static gint posop_cmp(gconstpointer a, gconstpointer b) {
  const PosOp *x = a, *y = b;
  if (x->pos != y->pos)
    return x->pos < y->pos ? -1 : 1;
  return x->op < y->op ? -1 : (x->op > y->op);
}

/* The reference: each stream's order (position, then id); the constraint
 * graph of dependencies and stream predecessors; ASAP times by Kahn's
 * algorithm over it.  Returns FALSE when it has a cycle (a deadlock).
 * `order[s]` receives stream s's ops in run order. */
static gboolean reference(const Graph *g, SimTime *start, SimTime *end, GArray **order) {
  guint n = g->n_ops;
  GPtrArray *succ = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
  for (guint i = 0; i < n; i++)
    g_ptr_array_add(succ, g_array_new(FALSE, FALSE, sizeof(guint)));
  guint *indeg = g_new0(guint, n);
  for (guint s = 0; s < g->n_streams; s++) {
    GArray *list = g_array_new(FALSE, FALSE, sizeof(PosOp));
    for (guint i = 0; i < n; i++)
      for (guint k = 0; k < g->n_st[i]; k++)
        if (g->st[i][k] == s) {
          PosOp po = {g->pos[i][k], i};
          g_array_append_val(list, po);
        }
    g_array_sort(list, posop_cmp);
    order[s] = g_array_new(FALSE, FALSE, sizeof(guint));
    for (guint k = 0; k < list->len; k++) {
      guint op = g_array_index(list, PosOp, k).op;
      g_array_append_val(order[s], op);
      if (k > 0) {
        g_array_append_val(g_ptr_array_index(succ, g_array_index(list, PosOp, k - 1).op), op);
        indeg[op]++;
      }
    }
    g_array_free(list, TRUE);
  }
  for (guint d = 0; d < g->deps->len; d++) {
    const guint *pair = &g_array_index(g->deps, guint, 2 * d);
    g_array_append_val(g_ptr_array_index(succ, pair[0]), pair[1]);
    indeg[pair[1]]++;
  }
  guint *queue = g_new(guint, n), head = 0, tail = 0;
  for (guint i = 0; i < n; i++) {
    start[i] = 0;
    if (indeg[i] == 0)
      queue[tail++] = i;
  }
  while (head < tail) {
    guint op = queue[head++];
    end[op] = start[op] + g->dur[op];
    GArray *out = g_ptr_array_index(succ, op);
    for (guint k = 0; k < out->len; k++) {
      guint next = g_array_index(out, guint, k);
      start[next] = MAX(start[next], end[op]);
      if (--indeg[next] == 0)
        queue[tail++] = next;
    }
  }
  gboolean acyclic = tail == n;
  g_free(queue);
  g_free(indeg);
  g_ptr_array_free(succ, TRUE);
  return acyclic;
}

/* Checks one run of `g` against the reference and the invariants; returns
 * whether it ran. */
static gboolean check_graph(const Graph *g, gboolean with_positions) {
  SimEngine *e = graph_engine(g, with_positions);
  SimTime *start = g_new(SimTime, g->n_ops), *end = g_new(SimTime, g->n_ops);
  GArray **order = g_new0(GArray *, g->n_streams);
  gboolean acyclic = reference(g, start, end, order);
  GError *error = NULL;
  gboolean ok = sim_engine_run(e, &error);
  /* The engine deadlocks exactly when the constraints have a cycle. */
  g_assert_cmpint(ok, ==, acyclic);
  if (!ok) {
    g_assert_error(error, SIM_ENGINE_ERROR, SIM_ENGINE_ERROR_DEADLOCK);
    /* both paths name the same stuck ops */
    use_event_loop = !use_event_loop;
    SimEngine *other = graph_engine(g, with_positions);
    use_event_loop = !use_event_loop;
    GError *other_error = NULL;
    g_assert_false(sim_engine_run(other, &other_error));
    g_assert_cmpstr(error->message, ==, other_error->message);
    g_error_free(other_error);
    sim_engine_free(other);
    g_error_free(error);
  } else {
    g_assert_no_error(error);
    SimTime max_end = 0;
    for (guint i = 0; i < g->n_ops; i++) {
      /* ASAP: the exact time the reference computes. */
      g_assert_cmpint(sim_engine_op_start(e, i), ==, start[i]);
      g_assert_cmpint(sim_engine_op_end(e, i), ==, end[i]);
      g_assert_cmpint(sim_engine_op_end(e, i) - sim_engine_op_start(e, i), ==, g->dur[i]);
      max_end = MAX(max_end, end[i]);
    }
    for (guint d = 0; d < g->deps->len; d++) {
      const guint *pair = &g_array_index(g->deps, guint, 2 * d);
      g_assert_cmpint(sim_engine_op_start(e, pair[1]), >=, sim_engine_op_end(e, pair[0]));
    }
    for (guint s = 0; s < g->n_streams; s++) {
      guint n = 0;
      const guint *ops = sim_engine_stream_ops(e, s, &n);
      g_assert_cmpuint(n, ==, order[s]->len);
      for (guint k = 0; k < n; k++) {
        g_assert_cmpuint(ops[k], ==, g_array_index(order[s], guint, k)); /* position order */
        if (k > 0) /* no overlap, in order */
          g_assert_cmpint(sim_engine_op_start(e, ops[k]), >=, sim_engine_op_end(e, ops[k - 1]));
      }
    }
    g_assert_cmpint(sim_engine_makespan(e), ==, max_end);
    g_assert_cmpuint(sim_engine_n_events(e), ==, g->n_ops);
  }
  for (guint s = 0; s < g->n_streams; s++)
    g_array_free(order[s], TRUE);
  g_free(order);
  g_free(start);
  g_free(end);
  sim_engine_free(e);
  return ok;
}

/* The same seeded random graph, built twice, gives identical times for
 * every op (the (time, seq) order leaves nothing to chance); running one
 * engine twice does too. */
static void test_determinism(void) {
  Graph g = graph_random(20240611, 3000, 12, 4000, 1);
  SimEngine *e1 = graph_engine(&g, TRUE), *e2 = graph_engine(&g, TRUE);
  run_ok(e1);
  run_ok(e2);
  g_assert_cmpint(sim_engine_makespan(e1), >, 0);
  g_assert_cmpint(sim_engine_makespan(e1), ==, sim_engine_makespan(e2));
  g_assert_cmpuint(sim_engine_n_events(e1), ==, sim_engine_n_events(e2));
  SimTime *s1 = g_new(SimTime, g.n_ops), *t1 = g_new(SimTime, g.n_ops);
  for (guint i = 0; i < g.n_ops; i++) {
    s1[i] = sim_engine_op_start(e1, i);
    t1[i] = sim_engine_op_end(e1, i);
    g_assert_cmpint(s1[i], ==, sim_engine_op_start(e2, i));
    g_assert_cmpint(t1[i], ==, sim_engine_op_end(e2, i));
  }
  run_ok(e1); /* again, on the same engine */
  for (guint i = 0; i < g.n_ops; i++) {
    g_assert_cmpint(sim_engine_op_start(e1, i), ==, s1[i]);
    g_assert_cmpint(sim_engine_op_end(e1, i), ==, t1[i]);
  }
  g_free(s1);
  g_free(t1);
  sim_engine_free(e1);
  sim_engine_free(e2);
  graph_free(&g);
}

/* Large random graphs in issue order: every op at its ASAP time, deps
 * respected, streams in order without overlap, makespan the latest end. */
static void test_random_issue_order(void) {
  for (guint32 seed = 1; seed <= 5; seed++) {
    Graph g = graph_random(seed, 5000, 16, 6000, 0);
    g_assert_true(check_graph(&g, FALSE));
    graph_free(&g);
  }
}

/* The same with explicit positions that reorder every stream. */
static void test_random_positions(void) {
  for (guint32 seed = 100; seed < 105; seed++) {
    Graph g = graph_random(seed, 5000, 16, 6000, 1);
    g_assert_true(check_graph(&g, TRUE));
    graph_free(&g);
  }
}

/* Random positions and deps in both directions: the engine must fail
 * exactly on the graphs whose constraints are cyclic, and time the others
 * exactly; both outcomes must occur, or the test checks nothing. */
static void test_random_deadlock_agreement(void) {
  guint ran = 0, deadlocked = 0;
  for (guint32 seed = 1; seed <= 400; seed++) {
    /* Few ops and deps so that a good share of them is acyclic. */
    guint n_ops = 3 + seed % 8;
    Graph g = graph_random(seed, n_ops, 4, seed % 3, 2);
    if (check_graph(&g, TRUE))
      ran++;
    else
      deadlocked++;
    graph_free(&g);
  }
  g_test_message("random small graphs: %u ran, %u deadlocked", ran, deadlocked);
  g_assert_cmpuint(ran, >, 20);
  g_assert_cmpuint(deadlocked, >, 20);
}

/* The random graphs again through the event loop. */
static void test_event_loop_issue_order(void) {
  use_event_loop = TRUE;
  test_random_issue_order();
  use_event_loop = FALSE;
}
static void test_event_loop_positions(void) {
  use_event_loop = TRUE;
  test_random_positions();
  use_event_loop = FALSE;
}
static void test_event_loop_deadlock_agreement(void) {
  use_event_loop = TRUE;
  test_random_deadlock_agreement();
  use_event_loop = FALSE;
}

/* --- the time bound ----------------------------------------------------- */

/* Why: a duration computed from an absurd input overflowed the int64 clock
 * (llround past its range), the engine refused the op with a CRITICAL log
 * and the caller indexed past its arrays; sums of long ops wrapped to
 * negative times.  Seconds convert to nanoseconds exactly up to the bound,
 * anything past it (or NaN, or negative) becomes one past the bound, and a
 * run with such an op, or one whose times sum past the bound, is an error.
 * Both timing paths are checked: fixed durations and the event loop. */
static void test_time_bound(void) {
  g_assert_cmpint(sim_time_ns(1.5e-9), ==, 2);
  g_assert_cmpint(sim_time_ns(SIM_TIME_MAX_S), ==, SIM_TIME_MAX);
  g_assert_cmpint(sim_time_ns(SIM_TIME_MAX_S * 1.0000001), ==, SIM_TIME_MAX + 1);
  g_assert_cmpint(sim_time_ns(1e300), ==, SIM_TIME_MAX + 1);
  g_assert_cmpint(sim_time_ns(NAN), ==, SIM_TIME_MAX + 1);
  g_assert_cmpint(sim_time_ns(-1), ==, SIM_TIME_MAX + 1);
  g_assert_cmpint(sim_time_ns(-1e-12), ==, 0); /* rounds to zero, as llround did */
  g_assert_cmpint(sim_time_add(SIM_TIME_MAX + 1, SIM_TIME_MAX + 1), ==, SIM_TIME_MAX + 1);
  for (guint event_loop = 0; event_loop < 2; event_loop++) {
    /* one op past the bound: refused at run, with an id like any other */
    SimEngine *e = sim_engine_new();
    add_streams(e, 2);
    guint a = sim_engine_add_op1(e, 5, 0, NULL);
    guint b = sim_engine_add_op1(e, sim_time_ns(1e12), 0, NULL);
    g_assert_cmpuint(b, ==, a + 1);
    if (event_loop) /* an op on one stream twice takes the event loop */
      sim_engine_add_op(e, 1, (const guint[]){1, 1}, 2, NULL);
    GError *error = NULL;
    g_assert_false(sim_engine_run(e, &error));
    g_assert_error(error, SIM_ENGINE_ERROR, SIM_ENGINE_ERROR_TOO_LONG);
    g_clear_error(&error);
    sim_engine_free(e);
    /* ops within the bound whose chain passes it: an error, not a wrapped time */
    e = sim_engine_new();
    add_streams(e, 2);
    for (guint i = 0; i < 1000; i++)
      sim_engine_add_op1(e, SIM_TIME_MAX, 0, NULL);
    if (event_loop)
      sim_engine_add_op(e, 1, (const guint[]){1, 1}, 2, NULL);
    g_assert_false(sim_engine_run(e, &error));
    g_assert_error(error, SIM_ENGINE_ERROR, SIM_ENGINE_ERROR_TOO_LONG);
    g_clear_error(&error);
    sim_engine_free(e);
    /* exactly at the bound: fine */
    e = sim_engine_new();
    add_streams(e, 2);
    sim_engine_add_op1(e, SIM_TIME_MAX - 1, 0, NULL);
    sim_engine_add_op1(e, 1, 0, NULL);
    if (event_loop)
      sim_engine_add_op(e, 1, (const guint[]){1, 1}, 2, NULL);
    run_ok(e);
    g_assert_cmpint(sim_engine_makespan(e), ==, SIM_TIME_MAX);
    sim_engine_free(e);
  }
}


/* A straggler on one stage of a p-stage 1F1B pipeline: stage j's stream at
 * speed f stretches its forwards F and backwards B to F/f and B/f.  The
 * engine's makespan equals the schedule's critical path -- the longest
 * path through the dependencies and each stage's order, computed here by
 * a pass over the ops in a topological order, no events -- and, when f is
 * so low that the slow stage never waits (F/f >= F + B), the closed form
 * j (F + B) + m (F + B) / f: the j stages before it fill it (j F), it runs
 * its m forwards and backwards back to back (each downstream round trip,
 * (p - 1 - j)(F + B), hides behind one of its forwards), and they drain
 * (j B). */
static SimTime straggler_pipeline(guint p, guint m, guint j, double f, SimTime F, SimTime B, SimTime *critical) {
  SimEngine *e = sim_engine_new();
  for (guint s = 0; s < p; s++)
    sim_engine_add_stream(e, s);
  sim_engine_set_stream_speed(e, j, f);
  guint *fwd = g_new(guint, p * m), *bwd = g_new(guint, p * m);
  GArray **order = g_new(GArray *, p);
  for (guint s = 0; s < p; s++) {
    order[s] = g_array_new(FALSE, FALSE, sizeof(SimItem));
    sim_schedule_order(SIM_SCHEDULE_1F1B, p, m, 1, s, order[s]);
  }
  /* issue stage by stage in each stage's order; dependencies after */
  GArray *dur = g_array_new(FALSE, FALSE, sizeof(SimTime));
  GArray *prev = g_array_new(FALSE, FALSE, sizeof(guint));
  for (guint s = 0; s < p; s++)
    for (guint i = 0; i < order[s]->len; i++) {
      SimItem it = g_array_index(order[s], SimItem, i);
      SimTime d = it.forward ? F : B;
      guint op = sim_engine_add_op1(e, d, s, NULL);
      (it.forward ? fwd : bwd)[s * m + it.microbatch] = op;
      SimTime want = s == j ? (SimTime)llround((double)d / f) : d;
      g_array_append_val(dur, want);
      g_array_append_val(prev, op);
    }
  for (guint s = 0; s < p; s++)
    for (guint mb = 0; mb < m; mb++) {
      if (s > 0)
        sim_engine_add_dep(e, fwd[(s - 1) * m + mb], fwd[s * m + mb]);
      if (s + 1 < p)
        sim_engine_add_dep(e, bwd[(s + 1) * m + mb], bwd[s * m + mb]);
      else
        sim_engine_add_dep(e, fwd[s * m + mb], bwd[s * m + mb]);
    }
  g_assert_true(sim_engine_run(e, NULL));
  /* the longest path: relax until nothing changes (a DAG: at most n rounds) */
  guint n = sim_engine_n_ops(e), n_pairs;
  const guint *deps = sim_engine_deps(e, &n_pairs);
  SimTime *end = g_new0(SimTime, n);
  for (gboolean changed = TRUE; changed;) {
    changed = FALSE;
    for (guint s = 0, op = 0; s < p; s++)
      for (guint i = 0; i < order[s]->len; i++, op++) {
        SimTime start = i ? end[op - 1] : 0;
        for (guint d = 0; d < n_pairs; d++)
          if (deps[2 * d + 1] == op)
            start = MAX(start, end[deps[2 * d]]);
        SimTime e2 = start + g_array_index(dur, SimTime, op);
        if (e2 != end[op])
          end[op] = e2, changed = TRUE;
      }
  }
  *critical = 0;
  for (guint op = 0; op < n; op++)
    *critical = MAX(*critical, end[op]);
  SimTime makespan = sim_engine_makespan(e);
  for (guint s = 0; s < p; s++)
    g_array_free(order[s], TRUE);
  g_free(order);
  g_free(fwd);
  g_free(bwd);
  g_free(end);
  g_array_free(dur, TRUE);
  g_array_free(prev, TRUE);
  sim_engine_free(e);
  return makespan;
}

static void test_straggler_1f1b(void) {
  const guint p = 4, m = 8;
  const SimTime F = 1000, B = 2000;
  SimTime crit;
  /* no straggler: (m + p - 1)(F + B) */
  g_assert_cmpint(straggler_pipeline(p, m, 1, 1.0, F, B, &crit), ==, (SimTime)(m + p - 1) * (F + B));
  for (guint j = 0; j < p; j++) {
    const double fs[] = {0.9, 0.5, 0.25, 0.2};
    for (guint k = 0; k < G_N_ELEMENTS(fs); k++) {
      SimTime t = straggler_pipeline(p, m, j, fs[k], F, B, &crit);
      g_assert_cmpint(t, ==, crit);
      if ((double)F / fs[k] >= (double)(F + B)) { /* the slow stage never waits */
        SimTime want = (SimTime)j * (F + B) + (SimTime)m * (llround(F / fs[k]) + llround(B / fs[k]));
        g_assert_cmpint(t, ==, want);
      }
    }
  }
}

/* --- contention: compute sharing its GPU with a collective's kernels --- */

/* GPU 0 has a compute stream (0) and a communication stream (1) whose ops
 * hold SMs; GPU 1 one stream (2) that holds SMs too.  Compute op A (100 ns,
 * factor 2) runs beside the collective C (20-60 on stream 1): 0-20 at full
 * pace (20 of its 100 ns of work), 20-60 at half (20 more), the last 60 at
 * full pace: it ends at 120.  A collective on another GPU, or on a stream
 * that holds no SMs, leaves it at 100; two collectives at once on its GPU
 * slow it no more than one; one running when it starts slows it from its
 * start. */
static SimEngine *contention_graph(gboolean holds, guint c_stream, SimTime x_ns, guint *a, guint *c) {
  SimEngine *e = sim_engine_new();
  g_assert_cmpuint(sim_engine_add_stream(e, 0), ==, 0);
  g_assert_cmpuint(sim_engine_add_stream(e, 0), ==, 1);
  g_assert_cmpuint(sim_engine_add_stream(e, 1), ==, 2);
  g_assert_cmpuint(sim_engine_add_stream(e, 0), ==, 3); /* holds no SMs */
  if (holds) {
    sim_engine_set_stream_holds_sms(e, 1);
    sim_engine_set_stream_holds_sms(e, 2);
  }
  *a = sim_engine_add_op1(e, 100, 0, NULL);
  sim_engine_set_op_contended(e, *a, 2.0);
  guint x = x_ns ? sim_engine_add_op1(e, x_ns, 3, NULL) : G_MAXUINT; /* C waits for it */
  *c = sim_engine_add_op1(e, 40, c_stream, NULL);
  if (x != G_MAXUINT)
    sim_engine_add_dep(e, x, *c);
  return e;
}

static void test_contention(void) {
  guint a, c;
  SimEngine *e = contention_graph(TRUE, 1, 20, &a, &c);
  g_assert_true(sim_engine_has_contention(e));
  run_ok(e);
  assert_span(e, c, 20, 60);
  assert_span(e, a, 0, 120);
  sim_engine_free(e);
  /* not marked (the fixed durations); on another GPU, or on a stream that
   * holds none */
  static const struct {
    gboolean marked;
    guint where;
  } free_pace[] = {{FALSE, 1}, {TRUE, 2}, {TRUE, 3}};
  for (guint i = 0; i < G_N_ELEMENTS(free_pace); i++) {
    e = contention_graph(free_pace[i].marked, free_pace[i].where, 20, &a, &c);
    run_ok(e);
    assert_span(e, a, 0, 100);
    sim_engine_free(e);
  }
  /* from the start: C at 0-40 then 60 of work at full pace: ends at 40 + 80 */
  e = contention_graph(TRUE, 1, 0, &a, &c);
  run_ok(e);
  assert_span(e, c, 0, 40);
  assert_span(e, a, 0, 40 + 80);
  sim_engine_free(e);
  /* two at once (the op before C on stream 1 holds SMs too: 0-20, then C
   * 20-60): SMs shared 0-60, 30 of work, the other 70 at full pace */
  e = sim_engine_new();
  sim_engine_add_stream(e, 0);
  sim_engine_add_stream(e, 0);
  sim_engine_add_stream(e, 0);
  sim_engine_set_stream_holds_sms(e, 1);
  sim_engine_set_stream_holds_sms(e, 2);
  a = sim_engine_add_op1(e, 100, 0, NULL);
  sim_engine_set_op_contended(e, a, 2.0);
  sim_engine_add_op1(e, 20, 1, NULL);
  c = sim_engine_add_op1(e, 40, 1, NULL);
  guint d = sim_engine_add_op1(e, 50, 2, NULL);
  run_ok(e);
  assert_span(e, d, 0, 50);
  assert_span(e, a, 0, 60 + 70);
  sim_engine_free(e);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/engine/event-loop/random/issue-order", test_event_loop_issue_order);
  g_test_add_func("/engine/event-loop/random/positions", test_event_loop_positions);
  g_test_add_func("/engine/event-loop/random/deadlock-agreement", test_event_loop_deadlock_agreement);
  g_test_add_func("/engine/empty", test_empty);
  g_test_add_func("/engine/chain", test_chain);
  g_test_add_func("/engine/parallel", test_parallel);
  g_test_add_func("/engine/cross-stream-dep", test_cross_stream_dep);
  g_test_add_func("/engine/multi-stream", test_multi_stream);
  g_test_add_func("/engine/positions", test_positions);
  g_test_add_func("/engine/zero-duration", test_zero_duration);
  g_test_add_func("/engine/tags", test_tags);
  g_test_add_func("/engine/deadlocks", test_deadlocks);
  g_test_add_func("/engine/time-bound", test_time_bound);
  g_test_add_func("/engine/determinism", test_determinism);
  g_test_add_func("/engine/random/issue-order", test_random_issue_order);
  g_test_add_func("/engine/random/positions", test_random_positions);
  g_test_add_func("/engine/random/deadlock-agreement", test_random_deadlock_agreement);
  g_test_add_func("/engine/straggler/1f1b", test_straggler_1f1b);
  g_test_add_func("/engine/contention", test_contention);
  return g_test_run();
}
