/* A torch.profiler trace replayed on the engine (see replay.h). */
#include "replay.h"

#include <math.h>
#include <string.h>

#include "../base/text.h"
#include "../sim/engine.h"

G_DEFINE_QUARK(ptdsim-replay-error-quark, replay_error)

static const char *const rate_names[REPLAY_RATE_N] = {"gemm", "gemm_fp8", "attention", "memory_bound"};

const char *replay_rate_name(ReplayRate k) { return k < REPLAY_RATE_N ? rate_names[k] : "?"; }

void replay_result_clear(ReplayResult *r) {
  g_clear_pointer(&r->gpu_start_ns, g_free);
  g_clear_pointer(&r->gpu_end_ns, g_free);
  g_clear_pointer(&r->call_start_ns, g_free);
  g_clear_pointer(&r->call_end_ns, g_free);
}

/* What a CUDA call is to the replay. */
typedef enum { CALL_PLAIN, CALL_SYNC, CALL_BLOCKING, CALL_WAIT } CallKind;

/* The calls that make the host wait for the GPU work launched before them
 * (CUDA runtime and driver API names). */
static gboolean is_sync(const char *n) {
  static const char *const names[] = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
                                      "cudaThreadSynchronize", "cuCtxSynchronize",      "cuStreamSynchronize",
                                      "cuEventSynchronize",    NULL};
  for (const char *const *s = names; *s; s++)
    if (!strcmp(n, *s))
      return TRUE;
  return FALSE;
}

/* A copy or memset that returns only once done (no "Async" in its name). */
static gboolean is_blocking(const char *n) {
  return (g_str_has_prefix(n, "cudaMemcpy") || g_str_has_prefix(n, "cudaMemset") || g_str_has_prefix(n, "cuMemcpy") ||
          g_str_has_prefix(n, "cuMemset")) &&
         !strstr(n, "Async");
}

static gboolean is_wait(const char *n) { return !strcmp(n, "cudaStreamWaitEvent") || !strcmp(n, "cuStreamWaitEvent"); }

/* An FP8 GEMM by its kernel name (cuBLASLt's and CUTLASS's name their
 * operand types). */
static gboolean is_fp8(const char *n) {
  return strstr(n, "e4m3") || strstr(n, "e5m2") || strstr(n, "fp8") || strstr(n, "FP8") || strstr(n, "f8f8");
}

static gboolean fail(GError **error, const CalibProfTrace *t, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static gboolean fail(GError **error, const CalibProfTrace *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, REPLAY_ERROR, REPLAY_ERROR_INVALID, "profiler trace '%s': %s", t->path, what);
  g_free(what);
  return FALSE;
}

/* A device's dense peak (FLOP/s) for 16-bit or FP8 GEMMs and attention,
 * and its HBM bandwidth (bytes/s) for memory-bound kernels: the rates a
 * kernel of the class scales with from one GPU to another. */
static double compute_rate(const ModelProfile *p, gboolean fp8) { return fp8 ? p->peak_fp8_flops : p->peak_flops; }

static double memory_rate(const ModelProfile *p) { return p->hbm_bytes_per_s; }

static gboolean set_ratios(const CalibProfTrace *t, const ReplayOptions *o, ReplayResult *r, GError **error) {
  for (int k = 0; k < REPLAY_RATE_N; k++)
    r->ratio[k] = 1;
  if (!o->source && !o->target)
    return TRUE;
  if (!o->source || !o->target)
    return fail(error, t, "re-pricing needs both the source and the target device profile");
  const ModelProfile *ps[] = {o->source, o->target};
  for (int i = 0; i < 2; i++)
    if (ps[i]->kind != MODEL_PROFILE_ANALYTIC || compute_rate(ps[i], FALSE) <= 0 || memory_rate(ps[i]) <= 0)
      return fail(error, t, "the profile '%s' has no peak rate and HBM bandwidth to re-price kernels by (give a "
                            "device's profile, not the ideal one)", ps[i]->name);
  double c = compute_rate(o->source, FALSE) / compute_rate(o->target, FALSE);
  r->ratio[REPLAY_RATE_GEMM] = c;
  r->ratio[REPLAY_RATE_ATTENTION] = c;
  /* FP8 at the FP8 rates where both devices have one, else as 16-bit */
  r->ratio[REPLAY_RATE_GEMM_FP8] = compute_rate(o->source, TRUE) > 0 && compute_rate(o->target, TRUE) > 0
                                       ? compute_rate(o->source, TRUE) / compute_rate(o->target, TRUE)
                                       : c;
  r->ratio[REPLAY_RATE_MEMORY] = memory_rate(o->source) / memory_rate(o->target);
  return TRUE;
}

/* The re-priced class of a GPU op, or -1 (memcpys, which cross PCIe or
 * NVLink, and kernels of no known class keep their time). */
static int rate_of(const CalibProfGpuOp *g, CalibStepClass c) {
  if (g->kind == CALIB_PROF_MEMCPY)
    return -1;
  switch (c) {
  case CALIB_STEP_GEMM:
    return is_fp8(g->name) ? REPLAY_RATE_GEMM_FP8 : REPLAY_RATE_GEMM;
  case CALIB_STEP_ATTENTION:
    return REPLAY_RATE_ATTENTION;
  case CALIB_STEP_OTHER:
    return -1;
  default:
    return REPLAY_RATE_MEMORY;
  }
}

/* One replayed host thread's calls: indices into t->api, in start order. */
typedef struct {
  gint64 tid;
  guint first, n; /* t->api[first .. first + n) */
  guint stream;
} Thread;

typedef struct {
  CallKind kind;
  gint thread;     /* index into threads, -1: not replayed */
  guint op;        /* the call's op (a blocking call's launch part): its GPU ops start after it */
  guint end_op;    /* the call's last op on the host stream */
  guint prev_op;   /* the op before it on its host stream, G_MAXUINT: none */
  gint gpu;        /* its first GPU op (index into t->gpu), -1 */
} Call;

/* A call at a time: a query of the GPU work launched before it (syncs and
 * stream waits), or a call's end; ordered by time, ties by call. */
typedef struct {
  gint64 at;
  guint call;
} Query;

static int by_at(gconstpointer pa, gconstpointer pb) {
  const Query *a = pa, *b = pb;
  return a->at != b->at ? (a->at < b->at ? -1 : 1) : (a->call < b->call ? -1 : a->call > b->call);
}

/* Indices ordered by a key array (`data`), ties by index. */
static int by_key(gconstpointer pa, gconstpointer pb, gpointer data) {
  const gint64 *end = data;
  guint a = *(const guint *)pa, b = *(const guint *)pb;
  return end[a] != end[b] ? (end[a] < end[b] ? -1 : 1) : (a < b ? -1 : a > b);
}

static gint64 clamp64(gint64 v, gint64 lo, gint64 hi) { return v < lo ? lo : v > hi ? hi : v; }

typedef struct {
  const CalibProfTrace *t;
  const ReplayOptions *o;
  ReplayResult *r;
  SimEngine *e;
  Call *calls;
  GArray *threads; /* Thread */
  guint n_streams; /* CUDA streams */
  gint64 *stream_id;  /* per CUDA stream, its id in the trace */
  guint *gpu_stream;  /* per GPU op, its CUDA stream's index */
  guint *gpu_pos;     /* per GPU op, its place on its stream */
  guint *gpu_op;      /* per GPU op, its engine op */
  gint64 *prev_end;   /* per GPU op, the trace end of the op before it on its stream, or -1 */
  GPtrArray *stream_ops; /* per CUDA stream, a GArray of GPU op indices in stream order */
} Build;

static const CalibProfApi *api(const Build *b, guint i) { return &g_array_index(b->t->api, CalibProfApi, i); }
static const CalibProfGpuOp *gpu(const Build *b, guint i) { return &g_array_index(b->t->gpu, CalibProfGpuOp, i); }

/* Which threads are replayed, and what each call is. */
static gboolean classify(Build *b, GError **error) {
  const CalibProfTrace *t = b->t;
  ReplayResult *r = b->r;
  if (t->api->len == 0)
    return fail(error, t, "no CUDA calls: the GPU's ops cannot be tied to the host that launched them; profile with "
                          "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]");
  for (guint i = 0; i < t->api->len; i++) {
    const CalibProfApi *a = api(b, i);
    b->calls[i].kind = is_sync(a->name) ? CALL_SYNC : is_wait(a->name) ? CALL_WAIT : CALL_PLAIN;
    b->calls[i].thread = -1;
    b->calls[i].gpu = -1;
  }
  for (guint g = 0; g < t->gpu->len; g++) {
    const CalibProfGpuOp *op = gpu(b, g);
    if (op->launch < 0) {
      char *name = ptd_echo(op->name, PTD_ECHO_MAX, FALSE);
      gboolean ok = op->correlation < 0
                        ? fail(error, t, "the %s '%s' has no correlation id, so the call that launched it is unknown; "
                                         "replay needs a trace with launches and correlation ids (torch.profiler "
                                         "with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])",
                               calib_prof_gpu_kind_name(op->kind), name)
                        : fail(error, t, "the %s '%s' (correlation id %" G_GINT64_FORMAT ") has no CUDA call that "
                                         "launched it; replay needs every launch (a trace with "
                                         "ProfilerActivity.CPU as well as CUDA)",
                               calib_prof_gpu_kind_name(op->kind), name, op->correlation);
      g_free(name);
      return ok;
    }
    Call *c = &b->calls[op->launch];
    if (c->gpu < 0)
      c->gpu = (gint)g;
  }
  for (guint i = 0; i < t->api->len; i++)
    if (b->calls[i].gpu >= 0 && is_blocking(api(b, i)->name))
      b->calls[i].kind = CALL_BLOCKING;
  /* threads: t->api is sorted by thread, then start */
  for (guint i = 0; i < t->api->len;) {
    guint j = i;
    gboolean replayed = FALSE;
    while (j < t->api->len && api(b, j)->tid == api(b, i)->tid) {
      replayed = replayed || b->calls[j].gpu >= 0 || b->calls[j].kind == CALL_SYNC;
      j++;
    }
    if (replayed) {
      if (b->threads->len == REPLAY_MAX_THREADS)
        return fail(error, t, "more than %u host threads launch GPU work; ptdsim replays up to %u (profile one "
                              "process's step)", REPLAY_MAX_THREADS, REPLAY_MAX_THREADS);
      Thread th = {api(b, i)->tid, i, j - i, 0};
      for (guint k = i; k < j; k++)
        b->calls[k].thread = (gint)b->threads->len;
      g_array_append_val(b->threads, th);
      r->calls += j - i;
    } else {
      r->threads_skipped++;
      r->calls_skipped += j - i;
    }
    i = j;
  }
  r->threads = b->threads->len;
  return TRUE;
}

/* The CUDA streams, and each GPU op's place on its stream (t->gpu is by
 * start, which is each stream's order). */
static void streams(Build *b) {
  const CalibProfTrace *t = b->t;
  GHashTable *index = g_hash_table_new(g_int64_hash, g_int64_equal);
  GArray *ids = g_array_new(FALSE, FALSE, sizeof(gint64));
  b->stream_ops = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
  for (guint g = 0; g < t->gpu->len; g++) {
    const CalibProfGpuOp *op = gpu(b, g);
    gpointer v;
    guint s;
    if (g_hash_table_lookup_extended(index, &op->stream, NULL, &v))
      s = GPOINTER_TO_UINT(v);
    else {
      s = ids->len;
      g_array_append_val(ids, op->stream);
      g_hash_table_insert(index, (gpointer)&op->stream, GUINT_TO_POINTER(s));
      g_ptr_array_add(b->stream_ops, g_array_new(FALSE, FALSE, sizeof(guint)));
    }
    GArray *list = g_ptr_array_index(b->stream_ops, s);
    b->gpu_stream[g] = s;
    b->gpu_pos[g] = list->len;
    b->prev_end[g] = list->len ? gpu(b, g_array_index(list, guint, list->len - 1))->start_ns +
                                     gpu(b, g_array_index(list, guint, list->len - 1))->dur_ns
                               : -1;
    g_array_append_val(list, g);
  }
  b->n_streams = ids->len;
  b->stream_id = (gint64 *)g_array_free(ids, FALSE);
  g_hash_table_destroy(index);
}

/* Whether a call keeps its host time (and the host time before it) under
 * --cuda-graphs: only what synchronizes. */
static gboolean kept_by_graphs(const Call *c) { return c->kind == CALL_SYNC || c->kind == CALL_BLOCKING; }

static SimOpTag tag_of(guint16 category) {
  SimOpTag tag = {category, 0, -1, -1, -1, -1};
  return tag;
}

enum { CAT_GAP, CAT_CALL, CAT_LAG, CAT_GPU };

/* The GPU ops in the order their launch calls returned (ties by index),
 * and those ends: the sweep of the queries (syncs, stream waits) in time
 * order walks them. */
typedef struct {
  guint *order;
  gint64 *lend;
} Launched;

static Launched launched(Build *b) {
  guint n = b->t->gpu->len;
  Launched l = {g_new(guint, n + 1), g_new(gint64, n + 1)};
  for (guint g = 0; g < n; g++) {
    const CalibProfApi *a = api(b, (guint)gpu(b, g)->launch);
    l.lend[g] = a->start_ns + a->dur_ns;
    l.order[g] = g;
  }
  g_qsort_with_data(l.order, (gint)n, sizeof(guint), by_key, l.lend);
  return l;
}

/* For each query, the latest trace end of the GPU ops launched before it
 * (G_MININT64: none): what a synchronization waited for. */
static gint64 *waited_until(Build *b, const Launched *l, GArray *queries) {
  guint n = b->t->gpu->len, k = 0;
  gint64 *w = g_new(gint64, queries->len + 1), end = G_MININT64;
  for (guint q = 0; q < queries->len; q++) {
    gint64 at = g_array_index(queries, Query, q).at;
    for (; k < n && l->lend[l->order[k]] <= at; k++)
      end = MAX(end, gpu(b, l->order[k])->start_ns + gpu(b, l->order[k])->dur_ns);
    w[q] = end;
  }
  return w;
}

/* The host streams: each replayed thread's gaps and calls. */
static void host_ops(Build *b, const gint64 *waited, const guint *query_of) {
  ReplayResult *r = b->r;
  gboolean graphs = b->o->cuda_graphs;
  for (guint h = 0; h < b->threads->len; h++) {
    Thread *th = &g_array_index(b->threads, Thread, h);
    th->stream = sim_engine_add_stream(b->e, 0);
    gint64 cursor = r->origin_ns; /* the trace time this thread's ops cover so far */
    guint last = G_MAXUINT;        /* the host stream's last op */
    for (guint i = th->first; i < th->first + th->n; i++) {
      const CalibProfApi *a = api(b, i);
      Call *c = &b->calls[i];
      gboolean keep = !graphs || kept_by_graphs(c);
      gint64 gap = MAX(0, a->start_ns - cursor);
      if (gap > 0) {
        SimOpTag tag = tag_of(CAT_GAP);
        last = sim_engine_add_op1(b->e, keep ? gap : 0, th->stream, &tag);
        r->host_gap_ns = sim_time_add(r->host_gap_ns, keep ? gap : 0);
      }
      c->prev_op = last;
      gint64 s0 = MAX(a->start_ns, cursor), end = a->start_ns + a->dur_ns;
      gint64 d = MAX(0, end - s0);
      SimOpTag tag = tag_of(CAT_CALL);
      if (c->kind == CALL_SYNC) {
        /* only the time after the GPU work it waited for */
        gint64 w = waited[query_of[i]];
        gint64 res = clamp64(end - MAX(w, s0), 0, d);
        c->op = c->end_op = sim_engine_add_op1(b->e, res, th->stream, &tag);
        r->host_call_ns = sim_time_add(r->host_call_ns, res);
      } else if (c->kind == CALL_BLOCKING) {
        /* launch, then the return once the copy is done */
        const CalibProfGpuOp *g = gpu(b, (guint)c->gpu);
        gint64 dl = clamp64(g->start_ns - MAX(s0, b->prev_end[c->gpu]), 0, d);
        gint64 dr = clamp64(end - MAX(g->start_ns + g->dur_ns, s0 + dl), 0, d - dl);
        c->op = sim_engine_add_op1(b->e, dl, th->stream, &tag);
        c->end_op = sim_engine_add_op1(b->e, dr, th->stream, &tag);
        r->host_call_ns = sim_time_add(r->host_call_ns, dl + dr);
      } else {
        c->op = c->end_op = sim_engine_add_op1(b->e, keep ? d : 0, th->stream, &tag);
        r->host_call_ns = sim_time_add(r->host_call_ns, keep ? d : 0);
      }
      cursor = MAX(cursor, end);
      last = c->end_op;
    }
  }
}

/* A thread waits for another where the trace shows it resuming after the
 * other's call: for each call, the latest call of each other thread that
 * ended after this thread's previous call began and before this one began. */
static void thread_deps(Build *b) {
  const CalibProfTrace *t = b->t;
  guint nt = b->threads->len;
  if (nt < 2)
    return;
  GArray *ended = g_array_new(FALSE, FALSE, sizeof(Query));
  for (guint i = 0; i < t->api->len; i++)
    if (b->calls[i].thread >= 0) {
      Query x = {api(b, i)->start_ns + api(b, i)->dur_ns, i};
      g_array_append_val(ended, x);
    }
  g_array_sort(ended, by_at);
  gint *latest = g_new(gint, nt);
  for (guint h = 0; h < nt; h++) {
    const Thread *th = &g_array_index(b->threads, Thread, h);
    for (guint i = th->first; i < th->first + th->n; i++) {
      gint64 from = i > th->first ? api(b, i - 1)->start_ns : G_MININT64, to = api(b, i)->start_ns;
      /* the calls that ended in (from, to]: binary search for the first */
      guint lo = 0, hi = ended->len;
      while (lo < hi) {
        guint mid = lo + (hi - lo) / 2;
        if (g_array_index(ended, Query, mid).at <= from)
          lo = mid + 1;
        else
          hi = mid;
      }
      for (guint k = 0; k < nt; k++)
        latest[k] = -1;
      for (guint k = lo; k < ended->len && g_array_index(ended, Query, k).at <= to; k++) {
        guint call = g_array_index(ended, Query, k).call;
        gint other = b->calls[call].thread;
        if ((guint)other != h)
          latest[other] = (gint)call;
      }
      gboolean keep = !b->o->cuda_graphs || kept_by_graphs(&b->calls[i]);
      for (guint k = 0; k < nt; k++) {
        if (latest[k] < 0)
          continue;
        const CalibProfApi *a = api(b, (guint)latest[k]);
        gint64 lag = to - (a->start_ns + a->dur_ns);
        SimOpTag tag = tag_of(CAT_LAG);
        guint op = sim_engine_add_op1(b->e, keep ? lag : 0, sim_engine_add_stream(b->e, 0), &tag);
        sim_engine_add_dep(b->e, b->calls[latest[k]].end_op, op);
        sim_engine_add_dep(b->e, op, b->calls[i].op);
        b->r->thread_deps++;
      }
    }
  }
  g_free(latest);
  g_array_unref(ended);
}

static void gpu_ops(Build *b) {
  const CalibProfTrace *t = b->t;
  ReplayResult *r = b->r;
  guint *engine_stream = g_new(guint, b->n_streams);
  for (guint s = 0; s < b->n_streams; s++)
    engine_stream[s] = sim_engine_add_stream(b->e, 1);
  for (guint g = 0; g < t->gpu->len; g++) {
    const CalibProfGpuOp *op = gpu(b, g);
    CalibStepClass c = calib_step_class(op->kind, op->name);
    int k = rate_of(op, c);
    gint64 d = op->dur_ns;
    if (k >= 0 && b->o->target) {
      double x = (double)op->dur_ns * r->ratio[k];
      d = x > (double)SIM_TIME_MAX ? SIM_TIME_MAX + 1 : llround(x); /* the engine refuses it */
      r->repriced[k]++;
    }
    r->class_ns[c] = sim_time_add(r->class_ns[c], d);
    r->op_ns = sim_time_add(r->op_ns, d);
    SimOpTag tag = tag_of(CAT_GPU);
    b->gpu_op[g] = sim_engine_add_op1(b->e, d, engine_stream[b->gpu_stream[g]], &tag);
    const Call *call = &b->calls[op->launch];
    sim_engine_add_dep(b->e, call->op, b->gpu_op[g]);
    if (call->kind == CALL_BLOCKING) /* it returns once its op is done */
      sim_engine_add_dep(b->e, b->gpu_op[g], call->end_op);
  }
  g_free(engine_stream);
}

/* Synchronizing calls wait for each stream's last op launched before them
 * (those a sync of the same thread waited for already need no second
 * dependency); a stream wait's next launched GPU op waits for the other
 * streams' where the trace agrees.  One sweep of the queries in time order
 * over the ops in launch order. */
static void gpu_waits(Build *b, const Launched *l, GArray *queries) {
  const CalibProfTrace *t = b->t;
  ReplayResult *r = b->r;
  guint n = t->gpu->len, ns = b->n_streams, k = 0;
  gint *cur = g_new(gint, ns);
  gint *awaited = g_new(gint, (gsize)b->threads->len * ns + 1);
  for (guint s = 0; s < ns; s++)
    cur[s] = -1;
  for (gsize x = 0; x < (gsize)b->threads->len * ns; x++)
    awaited[x] = -1;
  /* per call, the first GPU op of the next call of its thread that launched one */
  gint *next = g_new(gint, t->api->len + 1);
  for (guint h = 0; h < b->threads->len; h++) {
    const Thread *th = &g_array_index(b->threads, Thread, h);
    gint after = -1;
    for (guint i = th->first + th->n; i-- > th->first;) {
      next[i] = after;
      if (b->calls[i].gpu >= 0)
        after = b->calls[i].gpu;
    }
  }
  for (guint q = 0; q < queries->len; q++) {
    const Query *qu = &g_array_index(queries, Query, q);
    for (; k < n && l->lend[l->order[k]] <= qu->at; k++) {
      guint g = l->order[k], s = b->gpu_stream[g];
      if (cur[s] < 0 || b->gpu_pos[g] > b->gpu_pos[(guint)cur[s]])
        cur[s] = (gint)g;
    }
    const Call *c = &b->calls[qu->call];
    if (c->kind == CALL_SYNC) {
      gint *mine = awaited + (gsize)c->thread * ns;
      for (guint s = 0; s < ns; s++)
        if (cur[s] >= 0 && cur[s] != mine[s]) {
          sim_engine_add_dep(b->e, b->gpu_op[cur[s]], c->op);
          mine[s] = cur[s];
        }
      continue;
    }
    gint x = next[qu->call];
    if (x < 0)
      continue;
    const CalibProfGpuOp *xo = gpu(b, (guint)x);
    for (guint s = 0; s < ns; s++) {
      if (cur[s] < 0 || s == b->gpu_stream[x])
        continue;
      const CalibProfGpuOp *y = gpu(b, (guint)cur[s]);
      if (y->start_ns + y->dur_ns <= xo->start_ns) {
        sim_engine_add_dep(b->e, b->gpu_op[cur[s]], b->gpu_op[x]);
        r->waits_kept++;
      } else
        r->waits_dropped++;
    }
  }
  g_free(next);
  g_free(awaited);
  g_free(cur);
}

/* The replayed GPU's span and busy time: the union of its ops' intervals. */
static void measure(Build *b) {
  const CalibProfTrace *t = b->t;
  ReplayResult *r = b->r;
  guint n = t->gpu->len;
  gint64 *starts = g_new(gint64, n + 1), *ends = g_new(gint64, n + 1);
  guint *order = g_new(guint, n + 1);
  for (guint g = 0; g < n; g++) {
    starts[g] = r->gpu_start_ns[g] = sim_engine_op_start(b->e, b->gpu_op[g]);
    ends[g] = r->gpu_end_ns[g] = sim_engine_op_end(b->e, b->gpu_op[g]);
    order[g] = g;
  }
  g_qsort_with_data(order, (gint)n, sizeof(guint), by_key, starts);
  gint64 end = G_MININT64, first = n ? starts[order[0]] : 0;
  for (guint k = 0; k < n; k++) {
    gint64 s = starts[order[k]], e = ends[order[k]];
    if (s >= end)
      r->gpu_busy_ns += e - s;
    else if (e > end)
      r->gpu_busy_ns += e - end;
    end = MAX(end, e);
  }
  for (guint i = 0; i < t->api->len; i++) {
    const Call *c = &b->calls[i];
    r->call_start_ns[i] = r->call_end_ns[i] = -1;
    if (c->thread < 0)
      continue;
    gboolean blocks = c->kind == CALL_SYNC || c->kind == CALL_BLOCKING;
    r->call_start_ns[i] = blocks ? (c->prev_op == G_MAXUINT ? 0 : sim_engine_op_end(b->e, c->prev_op))
                                 : sim_engine_op_start(b->e, c->op);
    r->call_end_ns[i] = sim_engine_op_end(b->e, c->end_op);
  }
  r->gpu_first_ns = first;
  r->gpu_span_ns = n ? end - first : 0;
  r->step_ns = sim_engine_makespan(b->e);
  r->ops = sim_engine_n_ops(b->e);
  g_free(starts);
  g_free(ends);
  g_free(order);
}

gboolean replay_run(const CalibProfTrace *t, const ReplayOptions *o, ReplayResult *r, GError **error) {
  memset(r, 0, sizeof *r);
  calib_step_figures(t, &r->trace);
  if (!set_ratios(t, o, r, error))
    return FALSE;
  Build b = {.t = t, .o = o, .r = r};
  b.calls = g_new0(Call, t->api->len + 1);
  b.threads = g_array_new(FALSE, FALSE, sizeof(Thread));
  guint n = t->gpu->len;
  b.gpu_stream = g_new(guint, n + 1);
  b.gpu_pos = g_new(guint, n + 1);
  b.gpu_op = g_new(guint, n + 1);
  b.prev_end = g_new(gint64, n + 1);
  gboolean ok = classify(&b, error);
  GArray *queries = g_array_new(FALSE, FALSE, sizeof(Query));
  gint64 *waited = NULL;
  guint *query_of = NULL;
  Launched lau = {NULL, NULL};
  if (ok) {
    streams(&b);
    if (b.n_streams > REPLAY_MAX_STREAMS)
      ok = fail(error, t, "its GPU ops are on %u CUDA streams; ptdsim replays up to %u (profile one process's step)",
                b.n_streams, REPLAY_MAX_STREAMS);
  }
  if (ok) {
    /* the time 0 and the span: every replayed call and GPU op */
    gint64 lo = G_MAXINT64, hi = G_MININT64;
    for (guint i = 0; i < t->api->len; i++)
      if (b.calls[i].thread >= 0) {
        lo = MIN(lo, api(&b, i)->start_ns);
        hi = MAX(hi, api(&b, i)->start_ns + api(&b, i)->dur_ns);
      }
    for (guint g = 0; g < n; g++) {
      lo = MIN(lo, gpu(&b, g)->start_ns);
      hi = MAX(hi, gpu(&b, g)->start_ns + gpu(&b, g)->dur_ns);
    }
    r->origin_ns = lo;
    r->trace_span_ns = hi - lo;
    if (r->trace_span_ns > SIM_TIME_MAX)
      ok = fail(error, t, "it spans more than %g s; profile one step", SIM_TIME_MAX_S);
  }
  if (ok) {
    query_of = g_new0(guint, t->api->len + 1);
    for (guint i = 0; i < t->api->len; i++) {
      Call *c = &b.calls[i];
      if (c->thread < 0)
        continue;
      r->syncs += c->kind == CALL_SYNC;
      r->blocking += c->kind == CALL_BLOCKING;
      r->stream_waits += c->kind == CALL_WAIT;
      if (c->kind == CALL_SYNC || c->kind == CALL_WAIT) {
        Query q = {api(&b, i)->start_ns, i};
        g_array_append_val(queries, q);
      }
    }
    g_array_sort(queries, by_at);
    for (guint q = 0; q < queries->len; q++)
      query_of[g_array_index(queries, Query, q).call] = q;
    lau = launched(&b);
    waited = waited_until(&b, &lau, queries);
    b.e = sim_engine_new();
    host_ops(&b, waited, query_of);
    thread_deps(&b);
    gpu_ops(&b);
    gpu_waits(&b, &lau, queries);
    GError *local = NULL;
    ok = sim_engine_run(b.e, &local);
    if (!ok) {
      if (g_error_matches(local, SIM_ENGINE_ERROR, SIM_ENGINE_ERROR_TOO_LONG))
        fail(error, t, "its replay lasts longer than %g s (%s)", SIM_TIME_MAX_S, local->message);
      else
        fail(error, t, "its operations cannot be replayed in the order it records (%s)", local->message);
      g_error_free(local);
    } else {
      r->gpu_start_ns = g_new(gint64, n + 1);
      r->gpu_end_ns = g_new(gint64, n + 1);
      r->call_start_ns = g_new(gint64, t->api->len + 1);
      r->call_end_ns = g_new(gint64, t->api->len + 1);
      measure(&b);
    }
  }
  if (b.e)
    sim_engine_free(b.e);
  g_free(waited);
  g_free(lau.order);
  g_free(lau.lend);
  g_free(query_of);
  g_array_unref(queries);
  if (b.stream_ops)
    g_ptr_array_unref(b.stream_ops);
  g_free(b.stream_id);
  g_free(b.calls);
  g_array_unref(b.threads);
  g_free(b.gpu_stream);
  g_free(b.gpu_pos);
  g_free(b.gpu_op);
  g_free(b.prev_end);
  if (!ok)
    replay_result_clear(r);
  return ok;
}

static void us(cJSON *obj, const char *key, double ns) { cJSON_AddNumberToObject(obj, key, ns / 1000.0); }

cJSON *replay_json(const CalibProfTrace *t, const ReplayOptions *o, const ReplayResult *r) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "format", REPLAY_FORMAT);
  cJSON *src = calib_step_source_json(j, "a torch.profiler trace (export_chrome_trace's JSON)", t, &r->trace);
  us(src, "span_us", (double)r->trace_span_ns);
  us(src, "gpu_span_us", (double)r->trace.span_ns);
  us(src, "gpu_busy_us", (double)r->trace.busy_ns);

  cJSON *g = cJSON_AddObjectToObject(j, "graph");
  cJSON_AddNumberToObject(g, "host_threads", r->threads);
  cJSON_AddNumberToObject(g, "cuda_calls", r->calls);
  cJSON_AddNumberToObject(g, "threads_left_out", r->threads_skipped);
  cJSON_AddNumberToObject(g, "cuda_calls_left_out", r->calls_skipped);
  cJSON_AddNumberToObject(g, "synchronizations", r->syncs);
  cJSON_AddNumberToObject(g, "blocking_copies", r->blocking);
  cJSON_AddNumberToObject(g, "stream_waits", r->stream_waits);
  cJSON_AddNumberToObject(g, "cross_stream_deps", r->waits_kept);
  cJSON_AddNumberToObject(g, "cross_stream_deps_contradicted", r->waits_dropped);
  cJSON_AddNumberToObject(g, "thread_deps", r->thread_deps);
  cJSON_AddNumberToObject(g, "ops", r->ops);
  char *what = g_strdup_printf(
      "%u GPU ops on %u stream%s, each after the call that launched it and the op before it on its stream; %u CUDA "
      "calls on %u host thread%s with the host time between them (%u synchronizing), each thread after the others' "
      "calls it followed in the trace%s",
      t->gpu->len, r->trace.streams, r->trace.streams == 1 ? "" : "s", r->calls, r->threads,
      r->threads == 1 ? "" : "s", r->syncs + r->blocking,
      r->threads_skipped ? "; threads that launch nothing left out" : "");
  cJSON_AddStringToObject(g, "replayed", what);
  g_free(what);

  cJSON *w = cJSON_AddObjectToObject(j, "what_if");
  cJSON_AddBoolToObject(w, "cuda_graphs", o->cuda_graphs);
  cJSON *said = cJSON_AddArrayToObject(w, "said");
  if (o->cuda_graphs)
    cJSON_AddItemToArray(said, cJSON_CreateString(
                                   "CUDA graphs: every CUDA call but the synchronizing ones costs nothing, and so does "
                                   "the host time before it; the GPU runs what was launched back to back"));
  if (o->target) {
    cJSON *p = cJSON_AddObjectToObject(w, "profile");
    cJSON_AddStringToObject(p, "source", o->source->name);
    cJSON_AddStringToObject(p, "target", o->target->name);
    cJSON *ratios = cJSON_AddObjectToObject(p, "time_ratios");
    for (int k = 0; k < REPLAY_RATE_N; k++) {
      cJSON *x = cJSON_AddObjectToObject(ratios, rate_names[k]);
      cJSON_AddNumberToObject(x, "ratio", r->ratio[k]);
      cJSON_AddNumberToObject(x, "ops", r->repriced[k]);
    }
    char *line = g_strdup_printf(
        "another GPU: kernels re-priced from %s to %s, GEMMs and attention at the ratio of their dense peaks (16-bit, FP8 "
        "for FP8 GEMMs), memory-bound kernels and memsets at the ratio of their HBM bandwidths; memcpys "
        "and kernels of no known class keep their time",
        o->source->name, o->target->name);
    cJSON_AddItemToArray(said, cJSON_CreateString(line));
    g_free(line);
  }
  if (!o->cuda_graphs && !o->target)
    cJSON_AddItemToArray(said, cJSON_CreateString("none: the trace replayed as measured"));

  cJSON *rep = cJSON_AddObjectToObject(j, "replay");
  us(rep, "step_us", (double)r->step_ns);
  cJSON_AddNumberToObject(rep, "step_over_trace_span",
                          r->trace_span_ns > 0 ? (double)r->step_ns / (double)r->trace_span_ns : 0);
  us(rep, "gpu_first_us", (double)r->gpu_first_ns);
  us(rep, "gpu_span_us", (double)r->gpu_span_ns);
  us(rep, "gpu_busy_us", (double)r->gpu_busy_ns);
  us(rep, "gpu_idle_us", (double)(r->step_ns - r->gpu_busy_ns));
  cJSON_AddNumberToObject(rep, "gpu_busy_share", r->step_ns > 0 ? (double)r->gpu_busy_ns / (double)r->step_ns : 0);
  us(rep, "gpu_op_time_us", (double)r->op_ns);
  us(rep, "host_call_us", (double)r->host_call_ns);
  us(rep, "host_gap_us", (double)r->host_gap_ns);
  cJSON *classes = cJSON_AddArrayToObject(j, "classes");
  for (int c = 0; c < CALIB_STEP_N_CLASSES; c++) {
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "class", calib_step_class_name((CalibStepClass)c));
    cJSON_AddNumberToObject(x, "ops", r->trace.class_ops[c]);
    us(x, "trace_us", (double)r->trace.class_ns[c]);
    us(x, "replay_us", (double)r->class_ns[c]);
    cJSON_AddItemToArray(classes, x);
  }
  return j;
}

static void add_event(cJSON *events, const char *cat, const char *name, double pid, gint64 tid, gint64 start,
                      gint64 end, cJSON *args) {
  cJSON *e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "ph", "X");
  cJSON_AddStringToObject(e, "cat", cat);
  cJSON_AddStringToObject(e, "name", name);
  cJSON_AddNumberToObject(e, "pid", pid);
  cJSON_AddNumberToObject(e, "tid", (double)tid);
  us(e, "ts", (double)start);
  us(e, "dur", (double)(end - start));
  cJSON_AddItemToObject(e, "args", args);
  cJSON_AddItemToArray(events, e);
}

static void add_name(cJSON *events, const char *what, double pid, gint64 tid, const char *name) {
  cJSON *e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "ph", "M");
  cJSON_AddStringToObject(e, "name", what);
  cJSON_AddNumberToObject(e, "pid", pid);
  cJSON_AddNumberToObject(e, "tid", (double)tid);
  cJSON_AddStringToObject(cJSON_AddObjectToObject(e, "args"), "name", name);
  cJSON_AddItemToArray(events, e);
}

/* pids: the host's threads, the GPU's streams */
#define PID_HOST 1
#define PID_GPU 2

cJSON *replay_chrome_trace(const CalibProfTrace *t, const ReplayResult *r, cJSON *report) {
  cJSON *j = cJSON_CreateObject();
  cJSON *events = cJSON_AddArrayToObject(j, "traceEvents");
  add_name(events, "process_name", PID_HOST, 0, "host (replayed)");
  add_name(events, "process_name", PID_GPU, 0, t->device ? t->device : "GPU (replayed)");
  gint64 prev_tid = -1;
  for (guint i = 0; i < t->api->len; i++) {
    const CalibProfApi *a = &g_array_index(t->api, CalibProfApi, i);
    if (r->call_start_ns[i] < 0)
      continue;
    if (a->tid != prev_tid) { /* t->api is by thread */
      char *nm = g_strdup_printf("thread %" G_GINT64_FORMAT, a->tid);
      add_name(events, "thread_name", PID_HOST, a->tid, nm);
      g_free(nm);
      prev_tid = a->tid;
    }
    cJSON *args = cJSON_CreateObject();
    if (a->correlation >= 0)
      cJSON_AddNumberToObject(args, "correlation", (double)a->correlation);
    add_event(events, "cuda_runtime", a->name, PID_HOST, a->tid, r->call_start_ns[i], r->call_end_ns[i], args);
  }
  GHashTable *named = g_hash_table_new(g_int64_hash, g_int64_equal);
  for (guint g = 0; g < t->gpu->len; g++) {
    const CalibProfGpuOp *op = &g_array_index(t->gpu, CalibProfGpuOp, g);
    if (g_hash_table_add(named, (gpointer)&op->stream)) {
      char *nm = g_strdup_printf("stream %" G_GINT64_FORMAT, op->stream);
      add_name(events, "thread_name", PID_GPU, op->stream, nm);
      g_free(nm);
    }
    cJSON *args = cJSON_CreateObject();
    cJSON_AddNumberToObject(args, "stream", (double)op->stream);
    cJSON_AddNumberToObject(args, "correlation", (double)op->correlation);
    const char *cat = op->kind == CALIB_PROF_KERNEL ? "kernel" : op->kind == CALIB_PROF_MEMSET ? "gpu_memset" : "gpu_memcpy";
    add_event(events, cat, op->name, PID_GPU, op->stream, r->gpu_start_ns[g], r->gpu_end_ns[g], args);
  }
  g_hash_table_destroy(named);
  cJSON_AddStringToObject(j, "displayTimeUnit", "ns");
  if (report)
    cJSON_AddItemToObject(j, "ptdsim", report);
  return j;
}
