/* ptdsim — discrete-event engine (see engine.h for the model). */
#include "engine.h"
#include "../base/heap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK(sim-engine-error-quark, sim_engine_error)

typedef struct {
  SimTime duration;
  SimTime start;
  SimTime end;
  guint stream_off; /* into engine->op_streams */
  guint n_streams;
  SimOpTag tag;
  gboolean net; /* ends when the network model says */
} Op;

typedef struct {
  SimTime time;
  guint64 seq;
  guint op;
  guint version; /* a contended op's completion as of its version-th pace (stale ones are dropped) */
} Event;

struct _SimEngine {
  GArray *ops;        /* Op */
  GArray *op_streams; /* guint, flattened stream lists of the ops */
  GArray *op_pos;     /* guint64, the op's position on each of its streams */
  GArray *deps;       /* guint pairs (before, after) */
  GArray *stream_gpu; /* guint per stream */
  GArray *stream_speed; /* double per stream (1: full speed); NULL: all at full speed */

  /* Built by sim_engine_run(). */
  guint *stream_off;  /* CSR: stream -> ops in issue order */
  guint *stream_list;
  guint *succ_off;    /* CSR: op -> successors */
  guint *succ_list;
  SimTime makespan;
  guint64 n_events;
  gboolean ran;
  SimEngineNetwork network;
  gboolean has_network;
  guint n_net;             /* network ops */
  gboolean repeats_stream; /* some op is on one stream twice */
  gboolean too_long;       /* some op lasts longer than SIM_TIME_MAX */
  GArray *stream_holds;    /* guint8 per stream: its ops hold SMs of its GPU (NULL: none does) */
  GArray *contended;       /* float per op: its contention factor, 0 where none (NULL: no op has one) */
  guint n_contended;
};

SimEngine *sim_engine_new(void) {
  SimEngine *e = g_new0(SimEngine, 1);
  e->ops = g_array_new(FALSE, FALSE, sizeof(Op));
  e->op_streams = g_array_new(FALSE, FALSE, sizeof(guint));
  e->op_pos = g_array_new(FALSE, FALSE, sizeof(guint64));
  e->deps = g_array_new(FALSE, FALSE, sizeof(guint) * 2);
  e->stream_gpu = g_array_new(FALSE, FALSE, sizeof(guint));
  return e;
}

static void free_results(SimEngine *e) {
  g_clear_pointer(&e->stream_off, g_free);
  g_clear_pointer(&e->stream_list, g_free);
  g_clear_pointer(&e->succ_off, g_free);
  g_clear_pointer(&e->succ_list, g_free);
  e->ran = FALSE;
}

void sim_engine_free(SimEngine *e) {
  if (!e)
    return;
  free_results(e);
  g_array_free(e->ops, TRUE);
  g_array_free(e->op_streams, TRUE);
  g_array_free(e->op_pos, TRUE);
  g_array_free(e->deps, TRUE);
  g_array_free(e->stream_gpu, TRUE);
  if (e->stream_speed)
    g_array_free(e->stream_speed, TRUE);
  if (e->stream_holds)
    g_array_free(e->stream_holds, TRUE);
  if (e->contended)
    g_array_free(e->contended, TRUE);
  g_free(e);
}

/* A GArray of `size` elements' room, its contents kept. */
static GArray *with_room(GArray *a, guint elt, guint size) {
  if (size <= a->len)
    return a;
  GArray *b = g_array_sized_new(FALSE, FALSE, elt, size);
  g_array_append_vals(b, a->data, a->len);
  g_array_free(a, TRUE);
  return b;
}

void sim_engine_reserve(SimEngine *e, guint n_ops, guint n_slots, guint n_deps) {
  e->ops = with_room(e->ops, sizeof(Op), n_ops);
  e->op_streams = with_room(e->op_streams, sizeof(guint), n_slots);
  e->op_pos = with_room(e->op_pos, sizeof(guint64), n_slots);
  e->deps = with_room(e->deps, sizeof(guint) * 2, n_deps);
}

guint sim_engine_add_stream(SimEngine *e, guint gpu) {
  g_array_append_val(e->stream_gpu, gpu);
  return e->stream_gpu->len - 1;
}

guint sim_engine_n_streams(const SimEngine *e) { return e->stream_gpu->len; }

void sim_engine_set_stream_speed(SimEngine *e, guint stream, double speed) {
  g_return_if_fail(stream < e->stream_gpu->len && speed > 0 && speed <= 1);
  if (!e->stream_speed) {
    e->stream_speed = g_array_new(FALSE, FALSE, sizeof(double));
    double one = 1;
    for (guint i = 0; i < e->stream_gpu->len; i++)
      g_array_append_val(e->stream_speed, one);
  }
  while (e->stream_speed->len < e->stream_gpu->len) {
    double one = 1;
    g_array_append_val(e->stream_speed, one);
  }
  g_array_index(e->stream_speed, double, stream) = speed;
}

/* An op's duration on its streams: the slowest stream's speed stretches it. */
static SimTime scaled(const SimEngine *e, SimTime d, const guint *streams, guint n) {
  if (!e->stream_speed || d <= 0)
    return d;
  double f = 1;
  for (guint i = 0; i < n; i++)
    if (streams[i] < e->stream_speed->len)
      f = MIN(f, g_array_index(e->stream_speed, double, streams[i]));
  if (f >= 1)
    return d;
  /* a very slow stream (a straggler's factor of 1e-300) stretches an op
   * past what SimTime holds: past the longest time, which the run refuses */
  double stretched = (double)d / f;
  return stretched > (double)SIM_TIME_MAX ? SIM_TIME_MAX + 1 : (SimTime)llround(stretched);
}
guint sim_engine_n_ops(const SimEngine *e) { return e->ops->len; }
guint sim_engine_n_net_ops(const SimEngine *e) { return e->n_net; }
gboolean sim_engine_op_is_net(const SimEngine *e, guint op) { return g_array_index(e->ops, Op, op).net; }

const guint *sim_engine_deps(const SimEngine *e, guint *n_pairs) {
  *n_pairs = e->deps->len;
  return (const guint *)(const void *)e->deps->data;
}

guint sim_engine_add_op_at(SimEngine *e, SimTime duration_ns, const guint *streams, const guint64 *positions,
                           guint n_streams, const SimOpTag *tag) {
  g_return_val_if_fail(n_streams > 0 && duration_ns >= 0, G_MAXUINT);
  if (duration_ns <= SIM_TIME_MAX)
    duration_ns = scaled(e, duration_ns, streams, n_streams);
  if (duration_ns > SIM_TIME_MAX) { /* refused at run, with an error */
    e->too_long = TRUE;
    duration_ns = 0;
  }
  Op op = {.duration = duration_ns, .start = -1, .end = -1, .stream_off = e->op_streams->len, .n_streams = n_streams};
  if (tag)
    op.tag = *tag;
  else
    op.tag = (SimOpTag){0, 0, -1, -1, -1, -1};
  for (guint i = 0; i < n_streams; i++) {
    g_return_val_if_fail(streams[i] < e->stream_gpu->len, G_MAXUINT);
    for (guint j = 0; j < i; j++)
      e->repeats_stream |= streams[j] == streams[i];
    g_array_append_val(e->op_streams, streams[i]);
    guint64 pos = positions ? positions[i] : e->ops->len;
    g_array_append_val(e->op_pos, pos);
  }
  g_array_append_val(e->ops, op);
  return e->ops->len - 1;
}

guint sim_engine_add_op(SimEngine *e, SimTime duration_ns, const guint *streams, guint n_streams,
                        const SimOpTag *tag) {
  return sim_engine_add_op_at(e, duration_ns, streams, NULL, n_streams, tag);
}

guint sim_engine_add_op1(SimEngine *e, SimTime duration_ns, guint stream, const SimOpTag *tag) {
  return sim_engine_add_op(e, duration_ns, &stream, 1, tag);
}

guint64 sim_engine_op_position(const SimEngine *e, guint op, guint stream) {
  const Op *o = &g_array_index(e->ops, Op, op);
  for (guint i = 0; i < o->n_streams; i++)
    if (g_array_index(e->op_streams, guint, o->stream_off + i) == stream)
      return g_array_index(e->op_pos, guint64, o->stream_off + i);
  return op;
}

void sim_engine_set_op_position(SimEngine *e, guint op, guint stream, guint64 position) {
  const Op *o = &g_array_index(e->ops, Op, op);
  for (guint i = 0; i < o->n_streams; i++)
    if (g_array_index(e->op_streams, guint, o->stream_off + i) == stream)
      g_array_index(e->op_pos, guint64, o->stream_off + i) = position;
}

void sim_engine_set_network(SimEngine *e, const SimEngineNetwork *network) {
  e->has_network = network != NULL;
  if (network)
    e->network = *network;
}

guint sim_engine_add_net_op(SimEngine *e, const guint *streams, const guint64 *positions, guint n_streams,
                            const SimOpTag *tag) {
  guint op = sim_engine_add_op_at(e, 0, streams, positions, n_streams, tag);
  if (op != G_MAXUINT)
    sim_engine_op_to_network(e, op);
  return op;
}

void sim_engine_op_to_network(SimEngine *e, guint op) {
  g_return_if_fail(op < e->ops->len);
  Op *o = &g_array_index(e->ops, Op, op);
  if (o->net)
    return;
  o->net = TRUE;
  o->duration = 0;
  e->n_net++;
}

void sim_engine_set_stream_holds_sms(SimEngine *e, guint stream) {
  g_return_if_fail(stream < e->stream_gpu->len);
  if (!e->stream_holds)
    e->stream_holds = g_array_new(FALSE, TRUE, sizeof(guint8));
  if (e->stream_holds->len < e->stream_gpu->len)
    g_array_set_size(e->stream_holds, e->stream_gpu->len);
  g_array_index(e->stream_holds, guint8, stream) = 1;
}

void sim_engine_set_op_contended(SimEngine *e, guint op, double factor) {
  g_return_if_fail(op < e->ops->len && factor >= 1);
  if (factor <= 1)
    return;
  if (!e->contended)
    e->contended = g_array_new(FALSE, TRUE, sizeof(float));
  if (e->contended->len < e->ops->len)
    g_array_set_size(e->contended, e->ops->len);
  float *f = &g_array_index(e->contended, float, op);
  e->n_contended += *f == 0;
  *f = (float)factor;
}

gboolean sim_engine_has_contention(const SimEngine *e) { return e->n_contended > 0; }

void sim_engine_add_dep(SimEngine *e, guint before, guint after) {
  g_return_if_fail(before < e->ops->len && after < e->ops->len && before != after);
  guint pair[2] = {before, after};
  g_array_append_vals(e->deps, pair, 1);
}

/* --- the event heap: a binary min-heap on (time, seq), preallocated --- */

static inline gboolean event_before(const Event *a, const Event *b) {
  return a->time < b->time || (a->time == b->time && a->seq < b->seq);
}

PTD_HEAP_DEFINE(event, Event, event_before)

/* --- run --- */

typedef struct {
  SimEngine *e;
  Op *ops;
  const guint *op_streams;
  guint *pred_left;
  guint *cursor; /* per stream: index into its op list of the head */
  guint8 *busy;  /* per stream */
  Event *heap;
  guint heap_n, heap_cap;
  guint64 seq;
  /* contention (sim_engine_set_op_contended); NULL without */
  const float *factor;     /* per op, 0: none */
  const guint8 *holds;     /* per stream */
  guint *held;             /* per GPU: ops running on its SM-holding streams */
  GArray **running;        /* per GPU: the contended ops running there (guint) */
  double *done;            /* per op: the share of its work done by `since` */
  SimTime *since;
  guint *version;
  guint8 *slow;            /* per op: running at the contended pace */
} Run;

static inline gboolean is_head(const Run *r, guint stream, guint op) {
  const SimEngine *e = r->e;
  guint at = e->stream_off[stream] + r->cursor[stream];
  return at < e->stream_off[stream + 1] && e->stream_list[at] == op;
}

static void push(Run *r, Event ev) {
  if (r->heap_n == r->heap_cap) { /* contention pushes an op's completion again when its pace changes */
    r->heap_cap *= 2;
    r->heap = g_renew(Event, r->heap, r->heap_cap);
  }
  event_push_at(r->heap, &r->heap_n, ev);
}

static guint gpu_of(const Run *r, guint op) {
  return g_array_index(r->e->stream_gpu, guint, r->op_streams[r->ops[op].stream_off]);
}

/* A contended op's completion at its pace from `now`: its remaining work at
 * its duration, or at factor times it while its GPU's SMs are shared. */
static void pace(Run *r, guint op, SimTime now, gboolean slow) {
  const Op *o = &r->ops[op];
  double was = (double)o->duration * (r->slow[op] ? r->factor[op] : 1.0);
  if (was > 0)
    r->done[op] = MIN(1.0, r->done[op] + (double)(now - r->since[op]) / was);
  r->since[op] = now;
  r->slow[op] = (guint8)slow;
  double rest = (1.0 - r->done[op]) * (double)o->duration * (slow ? r->factor[op] : 1.0);
  push(r, (Event){sim_time_add(now, (SimTime)llround(rest)), r->seq++, op, ++r->version[op]});
}

/* An op on SM-holding streams starts (+1) or ends (-1): each of its GPUs
 * whose count leaves or reaches zero repaces the contended ops running there. */
static void hold(Run *r, guint op, SimTime now, int delta) {
  const Op *o = &r->ops[op];
  const guint *streams = r->op_streams + o->stream_off;
  for (guint i = 0; i < o->n_streams; i++) {
    if (!r->holds[streams[i]])
      continue;
    guint g = g_array_index(r->e->stream_gpu, guint, streams[i]);
    gboolean was = r->held[g] > 0;
    r->held[g] += delta;
    if ((r->held[g] > 0) != was && r->running[g])
      for (guint k = 0; k < r->running[g]->len; k++)
        pace(r, g_array_index(r->running[g], guint, k), now, !was);
  }
}

/* Starts `op` at `now` if everything it waits for is in place. */
static void try_start(Run *r, guint op, SimTime now) {
  Op *o = &r->ops[op];
  if (o->start >= 0 || r->pred_left[op] != 0)
    return;
  const guint *streams = r->op_streams + o->stream_off;
  for (guint i = 0; i < o->n_streams; i++)
    if (r->busy[streams[i]] || !is_head(r, streams[i], op))
      return;
  for (guint i = 0; i < o->n_streams; i++)
    r->busy[streams[i]] = 1;
  o->start = now;
  if (r->holds)
    hold(r, op, now, +1);
  if (r->factor && r->factor[op] > 0 && !o->net) {
    guint g = gpu_of(r, op);
    if (!r->running[g])
      r->running[g] = g_array_new(FALSE, FALSE, sizeof(guint));
    g_array_append_val(r->running[g], op);
    r->since[op] = now;
    pace(r, op, now, r->held[g] > 0);
    return;
  }
  if (o->net && r->e->has_network)
    r->e->network.start(r->e->network.data, op, now);
  else
    push(r, (Event){sim_time_add(now, o->duration), r->seq++, op, 0});
}

/* `op` ends at `now`: free its streams, count it off its successors, and
 * start what that unblocks (the next op of each of its streams, and its
 * successors). */
static void complete(Run *r, guint op, SimTime now) {
  SimEngine *e = r->e;
  Op *o = &r->ops[op];
  o->end = now;
  if (r->factor && r->factor[op] > 0 && !o->net) {
    GArray *run = r->running[gpu_of(r, op)];
    for (guint k = 0; k < run->len; k++)
      if (g_array_index(run, guint, k) == op) {
        g_array_remove_index_fast(run, k);
        break;
      }
  }
  if (r->holds)
    hold(r, op, now, -1);
  const guint *streams = r->op_streams + o->stream_off;
  for (guint i = 0; i < o->n_streams; i++) {
    r->busy[streams[i]] = 0;
    r->cursor[streams[i]]++;
  }
  for (guint k = e->succ_off[op]; k < e->succ_off[op + 1]; k++)
    r->pred_left[e->succ_list[k]]--;
  for (guint i = 0; i < o->n_streams; i++) {
    guint s = streams[i];
    guint at = e->stream_off[s] + r->cursor[s];
    if (at < e->stream_off[s + 1])
      try_start(r, e->stream_list[at], now);
  }
  for (guint k = e->succ_off[op]; k < e->succ_off[op + 1]; k++)
    try_start(r, e->succ_list[k], now);
}

/* Every op has a fixed duration: an op starts when the last of the ops
 * before it on its streams and of its dependencies ends, so its start is
 * the maximum of their ends, whatever order equal-time events are handled
 * in.  The times come out of one pass over the ops in a topological order
 * (a work list of ops whose predecessors are all timed), with no event
 * heap: the same starts, ends, makespan and event count (one completion
 * per op) as the event loop, and the same ops left over on a deadlock. */
static guint run_fixed(Run *r, SimTime *makespan) {
  SimEngine *e = r->e;
  Op *ops = r->ops;
  guint n_ops = e->ops->len, n_streams = e->stream_gpu->len;
  guint *need = r->pred_left; /* dependencies, then stream predecessors too */
  guint *next = g_new(guint, MAX(e->op_streams->len, 1)); /* per (op, stream slot): the next op there */
  for (guint s = 0; s < n_streams; s++)
    for (guint k = e->stream_off[s]; k < e->stream_off[s + 1]; k++) {
      guint op = e->stream_list[k];
      const guint *streams = r->op_streams + ops[op].stream_off;
      guint slot = 0;
      while (streams[slot] != s)
        slot++;
      next[ops[op].stream_off + slot] = k + 1 < e->stream_off[s + 1] ? e->stream_list[k + 1] : G_MAXUINT;
      if (k > e->stream_off[s])
        need[op]++;
    }
  guint *work = g_new(guint, MAX(n_ops, 1)); /* each op is pushed once */
  guint n_work = 0;
  for (guint op = 0; op < n_ops; op++) {
    ops[op].start = 0; /* the latest end among the predecessors timed so far */
    if (need[op] == 0)
      work[n_work++] = op;
  }
  guint done = 0;
  SimTime last = 0;
  while (n_work > 0) {
    guint op = work[--n_work];
    Op *o = &ops[op];
    o->end = sim_time_add(o->start, o->duration);
    last = MAX(last, o->end);
    done++;
    for (guint i = 0; i < o->n_streams; i++) {
      guint nx = next[o->stream_off + i];
      if (nx == G_MAXUINT)
        continue;
      ops[nx].start = MAX(ops[nx].start, o->end);
      if (--need[nx] == 0)
        work[n_work++] = nx;
    }
    for (guint k = e->succ_off[op]; k < e->succ_off[op + 1]; k++) {
      guint nx = e->succ_list[k];
      ops[nx].start = MAX(ops[nx].start, o->end);
      if (--need[nx] == 0)
        work[n_work++] = nx;
    }
  }
  /* ops never reached keep no times, as the event loop leaves them */
  if (done != n_ops)
    for (guint op = 0; op < n_ops; op++)
      if (need[op] != 0)
        ops[op].start = ops[op].end = -1;
  g_free(next);
  g_free(work);
  *makespan = last;
  return done;
}

static void build_csr(guint n_keys, const guint *keys, guint n_items, const guint *values, guint stride,
                      guint **off_out, guint **list_out) {
  guint *off = g_new0(guint, n_keys + 1);
  for (guint i = 0; i < n_items; i++)
    off[keys[i * stride] + 1]++;
  for (guint k = 0; k < n_keys; k++)
    off[k + 1] += off[k];
  guint *fill = g_memdup2(off, sizeof(guint) * n_keys);
  guint *list = g_new(guint, MAX(n_items, 1));
  for (guint i = 0; i < n_items; i++)
    list[fill[keys[i * stride]]++] = values[i * stride];
  g_free(fill);
  *off_out = off;
  *list_out = list;
}

/* Orders each stream's ops by position (then id), where positions were
 * given; the common case, positions equal to ids, is already sorted. */
typedef struct {
  guint64 pos;
  guint op;
} Keyed;

static int keyed_cmp(const void *a, const void *b) {
  const Keyed *x = a, *y = b;
  if (x->pos != y->pos)
    return x->pos < y->pos ? -1 : 1;
  return x->op < y->op ? -1 : (x->op > y->op);
}

/* Sorts buf[0..n) by (position, op): a natural merge sort, since a
 * stream's ops arrive as a few ascending runs (a pipeline stage's receive
 * stream gets the transfers of the stage before it, then of the one after
 * it), so merging the runs costs n times the log of their number. */
static void sort_keyed(Keyed *buf, Keyed *tmp, guint n) {
  while (n > 1) {
    gboolean merged = FALSE;
    guint out = 0;
    for (guint a = 0; a < n;) {
      guint b = a + 1;
      while (b < n && keyed_cmp(&buf[b - 1], &buf[b]) < 0)
        b++;
      guint c = b;
      if (b < n) {
        c = b + 1;
        while (c < n && keyed_cmp(&buf[c - 1], &buf[c]) < 0)
          c++;
        merged = TRUE;
      }
      guint i = a, j = b;
      while (i < b && j < c)
        tmp[out++] = keyed_cmp(&buf[i], &buf[j]) < 0 ? buf[i++] : buf[j++];
      while (i < b)
        tmp[out++] = buf[i++];
      while (j < c)
        tmp[out++] = buf[j++];
      a = c;
    }
    memcpy(buf, tmp, sizeof *buf * n);
    if (!merged)
      break;
  }
}

static void sort_streams(SimEngine *e, const Op *ops) {
  const guint *op_streams = (const guint *)(void *)e->op_streams->data;
  const guint64 *op_pos = (const guint64 *)(void *)e->op_pos->data;
  guint n_streams = e->stream_gpu->len;
  Keyed *buf = NULL, *tmp = NULL;
  guint alloc = 0;
  for (guint s = 0; s < n_streams; s++) {
    guint lo = e->stream_off[s], hi = e->stream_off[s + 1];
    if (hi - lo > alloc) {
      alloc = MAX(hi - lo, 2 * alloc);
      buf = g_renew(Keyed, buf, alloc);
      tmp = g_renew(Keyed, tmp, alloc);
    }
    gboolean sorted = TRUE;
    guint64 last = 0;
    for (guint k = lo; k < hi; k++) {
      guint op = e->stream_list[k];
      guint64 pos = 0;
      for (guint i = 0; i < ops[op].n_streams; i++)
        if (op_streams[ops[op].stream_off + i] == s)
          pos = op_pos[ops[op].stream_off + i];
      buf[k - lo] = (Keyed){pos, op};
      if (k > lo && pos < last)
        sorted = FALSE;
      last = pos;
    }
    if (sorted)
      continue;
    sort_keyed(buf, tmp, hi - lo);
    for (guint k = lo; k < hi; k++)
      e->stream_list[k] = buf[k - lo].op;
  }
  g_free(buf);
  g_free(tmp);
}

gboolean sim_engine_run(SimEngine *e, GError **error) {
  free_results(e);
  guint n_ops = e->ops->len, n_streams = e->stream_gpu->len;
  Op *ops = (Op *)(void *)e->ops->data;
  const guint *op_streams = (const guint *)(void *)e->op_streams->data;

  /* Stream lists: op ids are issued in increasing order, so walking the ops
   * in id order lists each stream's ops in issue order. */
  guint n_pairs = e->op_streams->len;
  guint *pair_stream = g_new(guint, MAX(n_pairs, 1) * 2);
  for (guint op = 0, k = 0; op < n_ops; op++)
    for (guint i = 0; i < ops[op].n_streams; i++, k++) {
      pair_stream[2 * k] = op_streams[ops[op].stream_off + i];
      pair_stream[2 * k + 1] = op;
    }
  build_csr(n_streams, pair_stream, n_pairs, pair_stream + 1, 2, &e->stream_off, &e->stream_list);
  g_free(pair_stream);
  sort_streams(e, ops);

  const guint *deps = (const guint *)(void *)e->deps->data;
  build_csr(n_ops, deps, e->deps->len, deps + 1, 2, &e->succ_off, &e->succ_list);

  Run r = {.e = e, .ops = ops, .op_streams = op_streams};
  r.pred_left = g_new0(guint, MAX(n_ops, 1));
  for (guint i = 0; i < e->deps->len; i++)
    r.pred_left[deps[2 * i + 1]]++;
  r.cursor = g_new0(guint, MAX(n_streams, 1));
  r.busy = g_new0(guint8, MAX(n_streams, 1));

  for (guint op = 0; op < n_ops; op++)
    ops[op].start = ops[op].end = -1;

  guint done = 0;
  SimTime now = 0;
  /* a network model with no op to end is no network at all */
  gboolean contention = e->n_contended > 0 && e->stream_holds;
  guint n_gpus = 0;
  if ((!e->has_network || e->n_net == 0) && !e->repeats_stream && !contention) {
    done = run_fixed(&r, &now);
    goto finished;
  }
  r.heap_cap = MAX(n_ops, 1);
  r.heap = g_new(Event, r.heap_cap);
  if (contention) {
    if (e->contended->len < n_ops)
      g_array_set_size(e->contended, n_ops);
    if (e->stream_holds->len < n_streams)
      g_array_set_size(e->stream_holds, n_streams);
    for (guint s = 0; s < n_streams; s++)
      n_gpus = MAX(n_gpus, g_array_index(e->stream_gpu, guint, s) + 1);
    r.factor = (const float *)(const void *)e->contended->data;
    r.holds = (const guint8 *)(const void *)e->stream_holds->data;
    r.held = g_new0(guint, n_gpus);
    r.running = g_new0(GArray *, n_gpus);
    r.done = g_new0(double, n_ops);
    r.since = g_new0(SimTime, n_ops);
    r.version = g_new0(guint, n_ops);
    r.slow = g_new0(guint8, n_ops);
  }
  for (guint s = 0; s < n_streams; s++)
    if (e->stream_off[s] < e->stream_off[s + 1])
      try_start(&r, e->stream_list[e->stream_off[s]], 0);

  GArray *ended = e->has_network ? g_array_new(FALSE, FALSE, sizeof(guint)) : NULL;
  for (;;) {
    SimTime tn = e->has_network ? e->network.next(e->network.data) : -1;
    if (r.heap_n > 0 && (tn < 0 || r.heap[0].time <= tn)) {
      Event ev = event_pop_at(r.heap, &r.heap_n);
      if (r.version && ev.version != r.version[ev.op])
        continue; /* the op's pace changed since: a later event ends it */
      now = ev.time;
      complete(&r, ev.op, now);
      done++;
    } else if (tn >= 0) {
      now = tn;
      g_array_set_size(ended, 0);
      e->network.advance(e->network.data, now, ended);
      for (guint i = 0; i < ended->len; i++, done++)
        complete(&r, g_array_index(ended, guint, i), now);
    } else
      break;
  }
  if (ended)
    g_array_free(ended, TRUE);
finished:
  e->n_events = done;
  e->makespan = now;

  g_free(r.pred_left);
  g_free(r.cursor);
  g_free(r.busy);
  g_free(r.heap);
  if (r.running) {
    for (guint g = 0; g < n_gpus; g++)
      if (r.running[g])
        g_array_free(r.running[g], TRUE);
    g_free(r.running);
    g_free(r.held);
    g_free(r.done);
    g_free(r.since);
    g_free(r.version);
    g_free(r.slow);
  }

  if (e->too_long || now > SIM_TIME_MAX) {
    g_set_error(error, SIM_ENGINE_ERROR, SIM_ENGINE_ERROR_TOO_LONG,
                "the simulated iteration %s longer than %g s, the longest time ptdsim represents; check the "
                "profile's and the cluster's numbers (doc/inputs.md lists their ranges)",
                e->too_long ? "has an op" : "runs", SIM_TIME_MAX_S);
    return FALSE;
  }
  if (done != n_ops) {
    guint stuck = 0;
    while (stuck < n_ops && ops[stuck].end >= 0)
      stuck++;
    g_set_error(error, SIM_ENGINE_ERROR, SIM_ENGINE_ERROR_DEADLOCK,
                "schedule deadlock: %u of %u ops never ran (first: op %u on stream %u)", n_ops - done, n_ops, stuck,
                op_streams[ops[stuck].stream_off]);
    return FALSE;
  }
  e->ran = TRUE;
  return TRUE;
}

SimTime sim_time_ns(double seconds) {
  /* NaN, infinities, negatives and anything past the bound become one past
   * it: an op the engine refuses with an error, never a wrapped-around time.
   * A difference of times rounded a hair below zero is zero, as it rounds. */
  if (!(seconds > -0.5e-9 && seconds <= SIM_TIME_MAX_S))
    return SIM_TIME_MAX + 1;
  return MAX((SimTime)llround(seconds * 1e9), 0);
}

SimTime sim_time_add(SimTime a, SimTime b) { return MIN(a + b, SIM_TIME_MAX + 1); }

SimTime sim_engine_op_start(const SimEngine *e, guint op) {
  return g_array_index(e->ops, Op, op).start;
}
SimTime sim_engine_op_end(const SimEngine *e, guint op) {
  return g_array_index(e->ops, Op, op).end;
}
const SimOpTag *sim_engine_op_tag(const SimEngine *e, guint op) {
  return &g_array_index(e->ops, Op, op).tag;
}
guint sim_engine_op_n_streams(const SimEngine *e, guint op) {
  return g_array_index(e->ops, Op, op).n_streams;
}
const guint *sim_engine_op_streams(const SimEngine *e, guint op) {
  return &g_array_index(e->op_streams, guint, g_array_index(e->ops, Op, op).stream_off);
}
SimTime sim_engine_makespan(const SimEngine *e) { return e->makespan; }
guint64 sim_engine_n_events(const SimEngine *e) { return e->n_events; }

const guint *sim_engine_stream_ops(const SimEngine *e, guint stream, guint *n_ops) {
  g_return_val_if_fail(e->ran && stream < e->stream_gpu->len, NULL);
  *n_ops = e->stream_off[stream + 1] - e->stream_off[stream];
  return e->stream_list + e->stream_off[stream];
}
guint sim_engine_stream_gpu(const SimEngine *e, guint stream) {
  return g_array_index(e->stream_gpu, guint, stream);
}
