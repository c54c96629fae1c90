/* ptdsim — ZeRO data parallelism on the engine (see zero.h). */
#include "zero.h"

#include <math.h>
#include <string.h>

#include "../models/comm.h"
#include "../models/compute.h"
#include "../models/layer.h"
#include "../sim/exposed.h"
#include "../sim/tags.h"
#include "../taskgraph/netops.h"

/* A unit: a sub-module whose parameters DeepSpeed's hooks gather and
 * release together (deepspeed/runtime/zero/partitioned_param_coordinator.py:
 * pre-forward and pre-backward hooks per module).  Layernorms are below
 * stage3_param_persistence_threshold (1e5 elements) and stay whole on every
 * GPU; the linears and the embeddings are gathered. */
typedef struct {
  guint64 params;  /* parameters gathered for it (the tied word embedding counts again in the head) */
  guint64 owned;   /* parameters it owns, its layernorms included (each parameter owned by one unit) */
  double fwd, bwd; /* compute seconds for one microbatch, from this unit's gather to the next one's need */
  gboolean layer;  /* part of a transformer layer: recomputed with --recompute full */
  gint32 index;    /* layer index, or -1 embedding, -3 head */
  guint part;      /* SIM_PART_*, for traces */
  guint tens[5];   /* stage 3: its tensors (indices into Build.tens), each gathered on its own */
  guint n_tens;
} Unit;

/* A parameter tensor as DeepSpeed's stage 3 keeps it: partitioned over all
 * ranks (deepspeed/runtime/zero/partition_parameters.py, _partition_param),
 * or whole on every rank below stage3_param_persistence_threshold
 * (stage3.py, persistent_parameters). */
typedef struct {
  guint64 numel;
  gboolean persist;
  guint8 status;  /* TENSOR_* */
  guint ready;    /* the op after which its gathered copy is usable */
  guint last_bwd; /* the backward use after which its gradient is complete */
  guint unit;     /* the unit whose backward completes its gradient */
} Tensor;
enum { TENSOR_NOT_AVAILABLE, TENSOR_INFLIGHT, TENSOR_AVAILABLE };

/* One use of a unit in DeepSpeed's trace of sub-modules: its forward, its
 * recomputation forward (activation checkpointing), or its backward. */
typedef struct {
  guint unit;
  guint pass; /* SIM_PASS_FORWARD, SIM_PASS_RECOMPUTE, SIM_PASS_BACKWARD */
} Use;

/* A stream beyond the timeline's kinds, not traced: the host thread.  The
 * gradient reductions (overlap_comm's reduction_stream) share the dp
 * stream with the gathers: the host's device-wide synchronizations keep
 * them apart anyway. */
enum { STREAM_HOST = SIM_STREAM_KINDS, N_STREAMS };

typedef struct {
  const SimPlan *pl;
  const ModelProfile *profile;
  ModelNet net;
  SimEngine *e;
  SimNetOps *flow; /* NULL: the analytic network */
  guint8 *side;    /* bisection: replicas below d/2 against the rest */
  Unit *units;
  guint n_units;
  guint nodes;     /* nodes the d GPUs span */
  double bytes;    /* sent by all GPUs in ZeRO's collectives */
  double cross;    /* crossing the replica cut, one direction */
  GArray *comm;    /* the collective ops, for the bisection */
  GArray *comm_bytes;
  guint last_comm; /* the previous op on the communication stream */
  GArray *pieces;  /* traced runs: what each op is (timeline.h) */
  /* stage 3 */
  Tensor *tens;
  guint n_tens;
  Use *uses;
  guint n_uses;
  guint64 live, live_peak;  /* gathered elements (DeepSpeed's total_available_parameter_numel) and its peak */
  guint host;               /* the host thread's last op (G_MAXUINT: none) */
  guint last_compute;       /* the compute stream's last op */
  guint last_gather;        /* the gather stream's last op */
  guint last_reduce;        /* the reduction stream's last op */
  GArray *inflight;         /* tensors prefetched, not yet waited for */
  GArray *bucket;           /* tensors whose gradients wait in the reduction bucket */
  guint64 bucket_numel;
  guint bucket_after;       /* the compute op that produced the bucket's last gradient */
  guint64 bucket_peak;      /* the most gradient elements waiting in a bucket, or reduced at once */
  guint64 gathers, reductions;
  double gather_bytes, reduce_bytes, host_s;
  double contention; /* how much longer compute takes beside a collective (1: not modelled) */
} Build;

static SimTime ns(double seconds) { return sim_time_ns(seconds); }

static SimOpTag tag(guint cat, guint pass, guint mb, gint32 layer) {
  return (SimOpTag){(guint16)cat, (guint16)pass, 0, 0, (gint32)mb, layer};
}

static double gemm_s(const ModelProfile *p, guint64 m, guint64 n, guint64 k) {
  ModelGemm g = {1, m, n, k};
  return model_gemm_time_s(p, &g);
}

/* The units in forward order: the embedding; per layer QKV, projection, MLP
 * up and down (the layer's compute split at the GEMMs: the QKV unit carries
 * the norm and the attention core, the MLP-up unit the residual, second
 * norm and activation); the head.  Backward in reverse, split the same
 * way. */
static void units_of(const SimPlan *pl, const ModelProfile *profile, Unit **out, guint *n) {
  const ModelShape *m = &pl->model;
  guint L = m->layers, b = pl->micro_batch;
  guint64 h = m->hidden, bs = (guint64)b * m->seq_len;
  guint64 q = (guint64)m->heads * model_head_dim(m), f = model_ffn(m);
  ModelLinears lin = model_layer_linears(m);
  Unit *u = g_new0(Unit, 4 * L + 2);
  ModelLayerCost lc;
  ModelLayerOptions lo = sim_plan_layer_options(pl, profile);
  model_layer_cost_with(profile, m, 1, b, &lo, &lc);
  double ef, eb, hf, hb;
  model_embedding_cost_with(profile, m, 1, b, &lo, &ef, &eb);
  model_head_cost_with(profile, m, 1, b, &lo, &hf, &hb);
  guint64 word = (guint64)m->vocab * h, pos = m->position == MODEL_POSITION_LEARNED ? (guint64)m->seq_len * h : 0;
  u[0] = (Unit){word + pos, word + pos, ef, eb, FALSE, -1, SIM_PART_EMBEDDING, {0}, 0};
  const double *F = lc.fwd.seg_s, *G = lc.bwd.seg_s;
  double fw[4], bw[4];
  if (profile->kind == MODEL_PROFILE_IDEAL) {
    /* the ideal profile has no GEMM model: split by the linears' FLOPs */
    double total = (double)(lin.qkv + lin.proj + lin.up + lin.down);
    const double share[4] = {(double)lin.qkv / total, (double)lin.proj / total, (double)lin.up / total,
                             (double)lin.down / total};
    for (int k = 0; k < 4; k++) {
      fw[k] = share[k] * (F[0] + F[1] + F[2]);
      bw[k] = share[k] * (G[0] + G[1] + G[2]);
    }
  } else {
    double proj = gemm_s(profile, bs, h, q), fc2 = gemm_s(profile, bs, h, f);
    double proj_b = gemm_s(profile, bs, q, h) + gemm_s(profile, q, h, bs);
    double fc2_b = gemm_s(profile, bs, f, h) + gemm_s(profile, f, h, bs);
    fw[0] = F[0] - proj, bw[0] = G[1] - proj_b + G[2];
    fw[1] = proj, bw[1] = proj_b;
    fw[2] = F[1] - fc2, bw[2] = G[0] - fc2_b;
    fw[3] = fc2 + F[2], bw[3] = fc2_b;
  }
  for (guint l = 0; l < L; l++) {
    Unit *x = u + 1 + 4 * l;
    gint32 i = (gint32)l;
    /* the QKV unit owns the first norm, MLP-up the second */
    x[0] = (Unit){lin.qkv, lin.qkv + lin.norm, fw[0], bw[0], TRUE, i, SIM_PART_QKV, {0}, 0};
    x[1] = (Unit){lin.proj, lin.proj, fw[1], bw[1], TRUE, i, SIM_PART_PROJECTION, {0}, 0};
    x[2] = (Unit){lin.up, lin.up + lin.norm, fw[2], bw[2], TRUE, i, SIM_PART_MLP_UP, {0}, 0};
    x[3] = (Unit){lin.down, lin.down, fw[3], bw[3], TRUE, i, SIM_PART_MLP_DOWN, {0}, 0};
  }
  /* the head: the tied word embedding gathered again for the logits, or its
   * own logit matrix when untied; it owns the final norm */
  u[4 * L + 1] = (Unit){word, (m->untied ? word : 0) + lin.norm, hf, hb, FALSE, -3, SIM_PART_HEAD, {0}, 0};
  *out = u;
  *n = 4 * L + 2;
}

/* A collective of ZeRO over all d GPUs moving `bytes` (the all-gather's
 * output, the reduce-scatter's input), after `after` (G_MAXUINT: none), on
 * the communication stream in issue order. */
/* The op of one collective over all d ranks on `stream`: a plan on the flow
 * network, or its time on the analytic one. */
static guint coll_op(Build *b, NetCollOp op, double bytes, guint stream, const SimOpTag *t) {
  guint d = b->pl->dp;
  if (b->flow) {
    char key[48];
    g_snprintf(key, sizeof key, "zero%d:%.0f", (int)op, bytes);
    guint *gpus = g_new(guint, d);
    for (guint k = 0; k < d; k++)
      gpus[k] = k;
    guint plan = sim_netops_coll(b->flow, key, op, gpus, d, 1, bytes, b->side);
    g_free(gpus);
    return sim_netops_op(b->flow, plan, &stream, NULL, 1, t);
  }
  ModelCollOp mop = op == NET_OP_ALLGATHER       ? MODEL_COLL_ALLGATHER
                  : op == NET_OP_REDUCESCATTER ? MODEL_COLL_REDUCESCATTER
                                               : MODEL_COLL_ALLREDUCE;
  return sim_engine_add_op1(b->e, ns(model_collective_time_s(&b->net, mop, bytes, d, b->nodes, NULL)), stream, t);
}

static guint coll(Build *b, NetCollOp op, double bytes, guint after, const SimOpTag *t, guint act, const Unit *un) {
  const SimPlan *pl = b->pl;
  guint d = pl->dp, x = coll_op(b, op, bytes, SIM_STREAM_DP, t);
  if (after != G_MAXUINT)
    sim_engine_add_dep(b->e, after, x);
  sim_timeline_piece(b->pieces, x, act, un ? un->part : SIM_PART_NONE, un && un->layer ? un->index : -1, 1, 0);
  /* a ring all-gather or reduce-scatter: every rank sends (d-1)/d of the
   * buffer; the ring crosses the replica cut once each way */
  b->bytes += bytes * (d - 1);
  double one_way = bytes * (d - 1) / d;
  b->cross += one_way;
  g_array_append_val(b->comm, x);
  g_array_append_val(b->comm_bytes, one_way);
  b->last_comm = x;
  return x;
}

static guint compute(Build *b, double seconds, guint after, const SimOpTag *t, const Unit *un) {
  guint x = sim_engine_add_op1(b->e, ns(seconds), SIM_STREAM_COMPUTE, t);
  if (b->contention > 1)
    sim_engine_set_op_contended(b->e, x, b->contention);
  if (after != G_MAXUINT)
    sim_engine_add_dep(b->e, after, x);
  if (un)
    sim_timeline_piece(b->pieces, x, SIM_ACT_RUN, un->part, un->layer ? un->index : -1, 1, 0);
  return x;
}

/* --- Stage 3 as DeepSpeed v0.3.14 runs it --- */

static guint add_tensor(Build *b, guint64 numel) {
  Tensor *t = &b->tens[b->n_tens];
  *t = (Tensor){numel, numel < b->pl->zk.persistence, TENSOR_NOT_AVAILABLE, G_MAXUINT, G_MAXUINT, 0};
  /* persistent tensors are gathered once after the step and kept */
  if (t->persist)
    t->status = TENSOR_AVAILABLE;
  return b->n_tens++;
}

static void unit_add(Unit *u, guint tensor) { u->tens[u->n_tens++] = tensor; }

/* Each unit's tensors, one per parameter as PyTorch registers them: the
 * linears' weights and biases, the norms' weights (and biases), the word
 * and position embeddings; the head's logits use the tied word embedding
 * (the same tensor as the embedding's) or its own. */
static void tensors_of(Build *b) {
  const ModelShape *m = &b->pl->model;
  guint64 h = m->hidden, q = (guint64)m->heads * model_head_dim(m), kv = (guint64)model_groups(m) * model_head_dim(m);
  guint64 f = model_ffn(m), upw = h * (m->mlp == MODEL_MLP_SWIGLU ? 2 * f : f);
  ModelLinears lin = model_layer_linears(m);
  guint norm_tensors = (guint)(lin.norm / h); /* layernorm: weight and bias; RMSNorm: weight */
  b->tens = g_new0(Tensor, (gsize)b->n_units * 5 + 4);
  b->n_tens = 0;
  for (guint u = 0; u < b->n_units; u++)
    b->units[u].n_tens = 0;
  guint word = add_tensor(b, (guint64)m->vocab * h);
  unit_add(&b->units[0], word);
  if (m->position == MODEL_POSITION_LEARNED)
    unit_add(&b->units[0], add_tensor(b, (guint64)m->seq_len * h));
  const guint64 weight[4] = {h * (q + 2 * kv), q * h, upw, f * h};
  const guint64 total[4] = {lin.qkv, lin.proj, lin.up, lin.down};
  for (guint l = 0; l < m->layers; l++)
    for (guint k = 0; k < 4; k++) {
      Unit *x = &b->units[1 + 4 * l + k];
      unit_add(x, add_tensor(b, weight[k]));
      if (total[k] > weight[k])
        unit_add(x, add_tensor(b, total[k] - weight[k]));
      if (k == 0 || k == 2) /* the norm before attention, and before the MLP */
        for (guint j = 0; j < norm_tensors; j++)
          unit_add(x, add_tensor(b, h));
    }
  Unit *head = &b->units[b->n_units - 1];
  unit_add(head, m->untied ? add_tensor(b, (guint64)m->vocab * h) : word);
  for (guint j = 0; j < norm_tensors; j++)
    unit_add(head, add_tensor(b, h));
}

/* DeepSpeed's trace of sub-modules for one forward and backward
 * (partitioned_param_coordinator's sub_module_trace, recorded by the pre-
 * forward and pre-backward hooks): every unit forward; then backward from
 * the head, each layer recomputed (Megatron's checkpointing, one layer per
 * checkpoint) just before its backward; the embedding last. */
static void uses_of(Build *b) {
  const SimPlan *pl = b->pl;
  guint U = b->n_units;
  b->uses = g_new(Use, 3 * (gsize)U);
  b->n_uses = 0;
  for (guint u = 0; u < U; u++)
    b->uses[b->n_uses++] = (Use){u, SIM_PASS_FORWARD};
  b->uses[b->n_uses++] = (Use){U - 1, SIM_PASS_BACKWARD};
  for (guint l = pl->model.layers; l-- > 0;) {
    if (pl->recompute)
      for (guint k = 0; k < 4; k++)
        b->uses[b->n_uses++] = (Use){1 + 4 * l + k, SIM_PASS_RECOMPUTE};
    for (guint k = 4; k-- > 0;)
      b->uses[b->n_uses++] = (Use){1 + 4 * l + k, SIM_PASS_BACKWARD};
  }
  b->uses[b->n_uses++] = (Use){0, SIM_PASS_BACKWARD};
  for (guint i = 0; i < b->n_uses; i++)
    if (b->uses[i].pass == SIM_PASS_BACKWARD) {
      const Unit *un = &b->units[b->uses[i].unit];
      for (guint j = 0; j < un->n_tens; j++)
        b->tens[un->tens[j]].last_bwd = i, b->tens[un->tens[j]].unit = b->uses[i].unit;
    }
}

static guint64 unit_numel(const Build *b, guint u) {
  guint64 n = 0;
  for (guint j = 0; j < b->units[u].n_tens; j++)
    n += b->tens[b->units[u].tens[j]].numel;
  return n;
}

/* get_reuse_distance_in_numel: the elements of every unit used between
 * use i and the next use of the same unit (none: never again). */
static guint64 reuse_distance(const Build *b, guint i) {
  guint u = b->uses[i].unit;
  guint64 d = 0;
  for (guint j = i + 1; j < b->n_uses; j++) {
    if (b->uses[j].unit == u)
      return d;
    d += unit_numel(b, b->uses[j].unit);
  }
  return G_MAXUINT64;
}

static void dep(Build *b, guint before, guint after) {
  if (before != G_MAXUINT)
    sim_engine_add_dep(b->e, before, after);
}

/* A host-thread op of `seconds` after the host's last op and `deps`.  Its
 * category is SIM_CAT_PP_GATHER, which the exposed time files under the
 * pipeline class (sim_exposed_class): the host's work has no class of its
 * own, and it is kept there so that the outputs stay as they were. */
static guint host_op(Build *b, double seconds, const guint *deps, guint n) {
  guint x =
      sim_engine_add_op1(b->e, ns(seconds), STREAM_HOST, &(SimOpTag){SIM_CAT_PP_GATHER, SIM_PASS_OTHER, 0, 0, 0, -1});
  if (b->host != G_MAXUINT)
    sim_engine_add_dep(b->e, b->host, x);
  for (guint j = 0; j < n; j++)
    if (deps[j] != G_MAXUINT)
      sim_engine_add_dep(b->e, deps[j], x);
  b->host_s += seconds;
  return b->host = x;
}

/* torch.cuda.synchronize(): the host waits for every stream. */
static void device_sync(Build *b) {
  guint deps[3] = {b->last_compute, b->last_gather, b->last_reduce};
  host_op(b, 0, deps, 3);
}

/* A collective of stage 3 over all d ranks moving `bytes`, after `after`
 * and the host's last op, on `stream` in issue order. */
static guint coll3(Build *b, NetCollOp op, double bytes, guint stream, guint after, guint act, const Unit *un,
                   guint pass, guint mb) {
  const SimPlan *pl = b->pl;
  guint d = pl->dp;
  SimOpTag t = tag(SIM_CAT_DP, pass, mb, un ? un->index : -1);
  guint x = coll_op(b, op, bytes, stream, &t);
  dep(b, b->host, x);
  dep(b, after, x);
  sim_timeline_piece(b->pieces, x, act, un ? un->part : SIM_PART_NONE, un && un->layer ? un->index : -1, 1, 0);
  /* a ring: every rank sends (d-1)/d of the buffer, twice for an all-reduce */
  double f = (op == NET_OP_ALLREDUCE ? 2.0 : 1.0) * (d - 1) / d;
  b->bytes += bytes * f * d;
  b->cross += bytes * f;
  g_array_append_val(b->comm, x);
  double one_way = bytes * f;
  g_array_append_val(b->comm_bytes, one_way);
  return x;
}

/* A framework op per rank: DeepSpeed's narrow() of each rank's partition
 * (partition_parameters.py, _allgather_param builds a list of d views;
 * _reduce_scatter_gradient a view() and a narrow() each), and PyTorch's
 * copy of each of the d list entries out of (or into) the flat buffer NCCL
 * works on (ProcessGroupNCCL.cpp, allgather and reduce_scatter with tensor
 * lists).  Each costs an eager op's issue time, the profile's
 * kernel_launch_s. */
static double per_rank_host_s(const Build *b) { return (double)b->pl->dp * b->profile->kernel_launch_s; }

/* `passes` passes of `bytes` through HBM on `stream` (an elementwise
 * kernel or copies), after `after` and the host's last op. */
static guint hbm_op(Build *b, double passes, double bytes, guint stream, guint after, guint pass, guint mb) {
  double hbm = b->profile->hbm_bytes_per_s * b->profile->memory_efficiency;
  guint x = sim_engine_add_op1(b->e, ns(passes * bytes / hbm), stream,
                               &(SimOpTag){SIM_CAT_DP, (guint16)pass, 0, 0, (gint32)mb, -1});
  dep(b, after, x);
  dep(b, b->host, x);
  return x;
}

/* Partitioning `n` tensors again (_partition_param): param.data =
 * torch.ones(1).half().to(device), three eager ops each, the copy to the
 * device waiting for the default stream (`after`). */
static void partition_ops(Build *b, guint n, guint after) {
  if (n == 0)
    return;
  guint deps[1] = {after};
  host_op(b, 3.0 * n * b->profile->kernel_launch_s, deps, 1);
}

/* _allgather_param: torch.cuda.synchronize(), the d views, the all-gather
 * on the gather stream, the d copies out of its flat output; the tensor is
 * usable when they are done, in flight until the host waits for it.  The
 * flat buffer is zeroed first (torch.zeros) and copied once more: three
 * passes over its bytes in HBM. */
static void gather_tensor(Build *b, guint ti, const Unit *un, guint pass, guint mb) {
  Tensor *t = &b->tens[ti];
  double bytes = 2.0 * (double)t->numel;
  device_sync(b);
  host_op(b, per_rank_host_s(b), NULL, 0);
  guint g = coll3(b, NET_OP_ALLGATHER, bytes, SIM_STREAM_DP, b->last_gather, SIM_ACT_PARAM_GATHER, un, pass, mb);
  host_op(b, per_rank_host_s(b), NULL, 0);
  b->last_gather = t->ready = hbm_op(b, 3, bytes, SIM_STREAM_DP, g, pass, mb);
  b->gathers++;
  b->gather_bytes += bytes;
  t->status = TENSOR_INFLIGHT;
  if (!t->persist)
    b->live += t->numel;
  g_array_append_val(b->inflight, ti);
}

/* A gathered tensor partitioned again; persistent tensors do not count in
 * the gathered elements. */
static void partition_tensor(Build *b, Tensor *t) {
  t->status = TENSOR_NOT_AVAILABLE;
  if (!t->persist)
    b->live -= t->numel;
}

/* reduce_ipg_grads: the host waits for the previous bucket's reduction
 * (reduction_stream.synchronize()), then reduces this one on the reduction
 * stream.  With contiguous_gradients (average_tensor): the whole ipg
 * buffer (reduce_bucket_size elements) divided by d, then one
 * reduce-scatter per tensor (_reduce_scatter_gradients, with its d views
 * and d copies into PyTorch's flat input).  Else (buffered_reduce_fallback,
 * allreduce_and_copy): the bucket flattened, divided by d, all-reduced, and
 * copied back into the tensors' gradients: six passes over its bytes. */
static void reduce_bucket(Build *b, guint mb) {
  if (b->bucket->len == 0)
    return;
  b->bucket_peak = MAX(b->bucket_peak, b->bucket_numel);
  guint deps[1] = {b->last_reduce};
  host_op(b, 0, deps, 1);
  if (b->pl->zk.contiguous) {
    guint after = hbm_op(b, 2, 2.0 * (double)b->pl->zk.reduce_bucket, SIM_STREAM_DP, b->bucket_after, SIM_PASS_OTHER, mb);
    for (guint j = 0; j < b->bucket->len; j++) {
      const Tensor *t = &b->tens[g_array_index(b->bucket, guint, j)];
      double bytes = 2.0 * (double)t->numel;
      host_op(b, 3 * per_rank_host_s(b), NULL, 0);
      after = hbm_op(b, 2, bytes, SIM_STREAM_DP, after, SIM_PASS_OTHER, mb);
      b->last_reduce = after = coll3(b, NET_OP_REDUCESCATTER, bytes, SIM_STREAM_DP, after,
                                     SIM_ACT_GRAD_REDUCE_SCATTER, &b->units[t->unit], SIM_PASS_OTHER, mb);
      b->reductions++;
      b->reduce_bytes += bytes;
    }
  } else {
    double bytes = 2.0 * (double)b->bucket_numel;
    const Tensor *t = &b->tens[g_array_index(b->bucket, guint, b->bucket->len - 1)];
    guint pre = hbm_op(b, 4, bytes, SIM_STREAM_DP, b->bucket_after, SIM_PASS_OTHER, mb);
    guint r = coll3(b, NET_OP_ALLREDUCE, bytes, SIM_STREAM_DP, pre, SIM_ACT_GRAD_ALLREDUCE, &b->units[t->unit],
                    SIM_PASS_OTHER, mb);
    b->last_reduce = hbm_op(b, 2, bytes, SIM_STREAM_DP, r, SIM_PASS_OTHER, mb);
    b->reductions++;
    b->reduce_bytes += bytes;
  }
  g_array_set_size(b->bucket, 0);
  b->bucket_numel = 0;
}

/* stage3.py backward() ends in _partition_all_parameters: every tensor
 * still gathered is partitioned again, the persistent ones too.  So
 * after a microbatch's backward the persistent tensors are partitioned,
 * and the next microbatch's hooks gather each of them on its first use
 * (fetch_sub_module; release_sub_module then keeps them, ds_persist). */
static void release_all(Build *b) {
  guint released = 0;
  for (guint t = 0; t < b->n_tens; t++) {
    Tensor *x = &b->tens[t];
    if (x->status != TENSOR_AVAILABLE)
      continue;
    partition_tensor(b, x);
    released++;
  }
  partition_ops(b, released, b->last_compute);
}

/* stage3.py _post_step: after the step (which updated each rank's 1/d of
 * every tensor, the persistent ones included) the persistent tensors are
 * gathered back whole in one call, _allgather_params
 * (partition_parameters.py): a flat buffer of d partitions, each the
 * tensors' partitions of ceil(numel/d) elements end to end; d narrow()
 * views, this rank's partitions copied in (a narrow() and a copy_() per
 * tensor); one all-gather, whose d list entries PyTorch copies out of its
 * flat output; then per tensor a torch.empty() and, for each rank whose
 * partition starts inside the tensor, a narrow() of that rank's partition,
 * a view() and a narrow() of the tensor and a copy_(): four eager ops per
 * tensor and rank, issued one at a time from Python.  The host work grows
 * with d times the number of persistent tensors (eight per GPT layer). */
static void post_step_gather(Build *b, guint opt) {
  guint64 d = b->pl->dp, part = 0, numel = 0;
  double count = 0, pairs = 0;
  for (guint t = 0; t < b->n_tens; t++) {
    Tensor *x = &b->tens[t];
    if (!x->persist)
      continue;
    guint64 ps = (x->numel + d - 1) / d;
    part += ps;
    numel += x->numel;
    pairs += (double)((x->numel + ps - 1) / ps);
    count++;
    x->status = TENSOR_AVAILABLE;
  }
  if (count == 0)
    return;
  double k = b->profile->kernel_launch_s;
  host_op(b, (1.0 + (double)d + 2 * count) * k, NULL, 0);
  double bytes = 2.0 * (double)part * (double)d;
  guint g = coll3(b, NET_OP_ALLGATHER, bytes, SIM_STREAM_DP, opt, SIM_ACT_PARAM_ALLGATHER, NULL, SIM_PASS_OTHER, 0);
  host_op(b, ((double)d + count + 4 * pairs) * k, NULL, 0);
  /* the copies out of the flat buffer into the tensors, on the device */
  b->last_compute = hbm_op(b, 2, 2.0 * (double)numel, SIM_STREAM_COMPUTE, g, SIM_PASS_OTHER, 0);
  b->gathers++;
  b->gather_bytes += bytes;
}

/* One forward and backward under stage 3, following DeepSpeed's hooks
 * (stage3.py pre_sub_module_forward_function and its backward twin, the
 * PartitionedParameterCoordinator of that file): at each use of a unit,
 *  - fetch_sub_module: its tensors not gathered are all-gathered now; if
 *    any were gathered or in flight, the host waits for the gathers and the
 *    whole device (_synchronize_communication ends in
 *    torch.cuda.synchronize());
 *  - prefetch_next_sub_modules: when nothing is in flight and fewer than
 *    stage3_max_live_parameters elements are gathered, the next tensors of
 *    the trace not gathered, until stage3_prefetch_bucket_size elements;
 *  - the unit computes on the default stream once the host has issued it;
 *  - release_sub_module: its tensors are partitioned again unless used
 *    again within stage3_max_reuse_distance elements (_keep_for_later);
 *  - after a backward, each tensor's complete gradient joins the reduction
 *    bucket; a bucket that would pass reduce_bucket_size is reduced first.
 * Persistent tensors are never gathered.
 *
 * In the release SC21 ran (v0.3.14) the trace is one step off: the root
 * module's own pre-forward hook (which counts a step) runs before the hook
 * that resets the step count (setup_zero_stage3_hooks registers them in
 * that order), so every later sub-module finds another module at its step
 * in the trace; get_params_to_prefetch then prefetches nothing and
 * get_reuse_distance_in_numel answers "no reuse" (DeepSpeed issue 1069,
 * "the rest of the step ids in the forward pass [are] off by 1, which was
 * causing the prefetches to be skipped").  Each unit's tensors are then
 * gathered in its own hook, with the device idle, and released after it.
 * zk->trace_fixed models the later releases where the trace lines up. */
static void emit_stage3_microbatch(Build *b, guint mb) {
  const SimZeroKnobs *zk = &b->pl->zk;
  for (guint i = 0; i < b->n_uses; i++) {
    const Use *use = &b->uses[i];
    const Unit *un = &b->units[use->unit];
    gboolean wait = FALSE;
    for (guint j = 0; j < un->n_tens; j++) {
      Tensor *t = &b->tens[un->tens[j]];
      if (t->status == TENSOR_NOT_AVAILABLE)
        gather_tensor(b, un->tens[j], un, use->pass, mb);
      wait |= t->status == TENSOR_INFLIGHT;
    }
    b->live_peak = MAX(b->live_peak, b->live);
    if (wait) {
      device_sync(b);
      for (guint j = 0; j < b->inflight->len; j++)
        b->tens[g_array_index(b->inflight, guint, j)].status = TENSOR_AVAILABLE;
      g_array_set_size(b->inflight, 0);
    }
    if (zk->trace_fixed && b->inflight->len == 0 && b->live < zk->max_live) {
      guint64 total = 0;
      for (guint k = i + 1; k < b->n_uses && total < zk->prefetch_bucket; k++) {
        const Unit *nx = &b->units[b->uses[k].unit];
        for (guint j = 0; j < nx->n_tens && total < zk->prefetch_bucket; j++) {
          Tensor *t = &b->tens[nx->tens[j]];
          if (t->status != TENSOR_NOT_AVAILABLE)
            continue;
          gather_tensor(b, nx->tens[j], nx, b->uses[k].pass, mb);
          total += t->numel;
        }
      }
      b->live_peak = MAX(b->live_peak, b->live);
    }
    SimOpTag ct = tag(SIM_CAT_COMPUTE, use->pass, mb, un->index);
    double secs = use->pass == SIM_PASS_BACKWARD ? un->bwd : un->fwd;
    guint c = compute(b, secs, b->host, &ct, un);
    for (guint j = 0; j < un->n_tens; j++)
      dep(b, b->tens[un->tens[j]].ready, c);
    b->last_compute = c;
    /* after a backward, each tensor whose gradient is complete joins the
     * bucket, the bucket before it reduced if it would overflow.  Its
     * AccumulateGrad hook runs before the module's post-backward hook:
     * PyTorch gives AccumulateGrad the highest sequence number
     * (torch/csrc/autograd/functions/accumulate_grad.cpp) and its engine
     * runs the ready node with the highest one first. */
    if (use->pass == SIM_PASS_BACKWARD)
      for (guint j = 0; j < un->n_tens; j++) {
        Tensor *t = &b->tens[un->tens[j]];
        if (t->last_bwd != i)
          continue;
        if (b->bucket_numel + t->numel > zk->reduce_bucket)
          reduce_bucket(b, mb);
        g_array_append_val(b->bucket, un->tens[j]);
        b->bucket_numel += t->numel;
        b->bucket_after = c;
        /* contiguous_gradients: the gradient copied into the ipg buffer by
         * the hook, on the default stream (a tensor larger than the bucket
         * is reduced where it is) */
        if (zk->contiguous && t->numel <= zk->reduce_bucket)
          b->bucket_after = b->last_compute = hbm_op(b, 2, 2.0 * (double)t->numel, SIM_STREAM_COMPUTE, c, SIM_PASS_OTHER, mb);
      }
    /* release_sub_module: the unit's tensors partitioned after its compute */
    gboolean keep = zk->trace_fixed && reuse_distance(b, i) < zk->max_reuse;
    guint released = 0;
    for (guint j = 0; j < un->n_tens; j++) {
      Tensor *t = &b->tens[un->tens[j]];
      if (!t->persist && !keep && t->status == TENSOR_AVAILABLE) {
        partition_tensor(b, t);
        released++;
      }
    }
    partition_ops(b, released, b->last_compute);
  }
  /* the epilogue: the last bucket, and the reduction stream waited for */
  reduce_bucket(b, mb);
  guint deps[1] = {b->last_reduce};
  host_op(b, 0, deps, 1);
  release_all(b);
}

/* One microbatch under stages 1 and 2: the whole model is on every GPU;
 * stage 2 reduce-scatters each unit's gradients as its backward ends. */
static guint emit_replicated_microbatch(Build *b, guint mb, gboolean reduce_each) {
  const SimPlan *pl = b->pl;
  guint U = b->n_units, last = G_MAXUINT;
  for (guint u = 0; u < U; u++) {
    SimOpTag t = tag(SIM_CAT_COMPUTE, SIM_PASS_FORWARD, mb, b->units[u].index);
    last = compute(b, b->units[u].fwd, G_MAXUINT, &t, &b->units[u]);
  }
  for (guint k = 0; k < U; k++) {
    guint u = U - 1 - k;
    const Unit *un = &b->units[u];
    SimOpTag t = tag(SIM_CAT_COMPUTE, SIM_PASS_RECOMPUTE, mb, un->index);
    if (pl->recompute && un->layer)
      compute(b, un->fwd, G_MAXUINT, &t, un);
    t.pass = SIM_PASS_BACKWARD;
    last = compute(b, un->bwd, G_MAXUINT, &t, un);
    if (reduce_each && un->owned > 0) {
      SimOpTag rt = tag(SIM_CAT_DP, SIM_PASS_OTHER, mb, un->index);
      coll(b, NET_OP_REDUCESCATTER, 2.0 * un->owned, last, &rt, SIM_ACT_GRAD_REDUCE_SCATTER, un);
    }
  }
  return last;
}

static guint64 total_params(const Build *b) {
  guint64 p = 0;
  for (guint u = 0; u < b->n_units; u++)
    p += b->units[u].owned;
  return p;
}

/* Stage 3's tensors, trace and coordinator state (b->units set). */
static void stage3_begin(Build *b) {
  tensors_of(b);
  uses_of(b);
  b->host = b->last_compute = b->last_gather = b->last_reduce = b->bucket_after = G_MAXUINT;
  b->inflight = g_array_new(FALSE, FALSE, sizeof(guint));
  b->bucket = g_array_new(FALSE, FALSE, sizeof(guint));
}

static void stage3_end(Build *b) {
  g_free(b->tens);
  g_free(b->uses);
  if (b->inflight)
    g_array_free(b->inflight, TRUE);
  if (b->bucket)
    g_array_free(b->bucket, TRUE);
}

static void emit(Build *b) {
  const SimPlan *pl = b->pl;
  guint64 P = total_params(b);
  guint last = G_MAXUINT;
  for (guint mb = 0; mb < pl->microbatches; mb++) {
    if (pl->zero == 3)
      emit_stage3_microbatch(b, mb);
    else
      last = emit_replicated_microbatch(b, mb, pl->zero == 2);
  }
  /* stage 1: the accumulated gradients reduce-scattered once */
  if (pl->zero == 1) {
    SimOpTag rt = tag(SIM_CAT_DP, SIM_PASS_OTHER, 0, -1);
    coll(b, NET_OP_REDUCESCATTER, 2.0 * P, last, &rt, SIM_ACT_GRAD_REDUCE_SCATTER, NULL);
  }
  /* The step on this GPU's shard, after its last gradients arrived (stage
   * 3: after the host waited for the reduction stream). */
  SimOpTag ot = tag(SIM_CAT_OPTIMIZER, SIM_PASS_OTHER, 0, -1);
  guint64 shard = (P + pl->dp - 1) / pl->dp;
  guint opt = compute(b, model_optimizer_time_s(b->profile, shard), pl->zero == 3 ? b->host : b->last_comm, &ot, NULL);
  if (pl->zero == 3)
    post_step_gather(b, opt);
  /* stages 1 and 2: the updated fp16 parameters gathered back */
  if (pl->zero < 3) {
    SimOpTag gt = tag(SIM_CAT_DP, SIM_PASS_OTHER, 0, -1);
    coll(b, NET_OP_ALLGATHER, 2.0 * P, opt, &gt, SIM_ACT_PARAM_ALLGATHER, NULL);
  }
}

void sim_zero3_memory(const SimPlan *pl, const ModelProfile *profile, Stage3Memory *out) {
  g_return_if_fail(pl->zero == 3);
  memset(out, 0, sizeof *out);
  /* the coordinator walked over one microbatch on a throwaway engine with
   * free communication: only its bookkeeping is read */
  Build b = {.pl = pl, .profile = profile};
  b.net = (ModelNet){.free_comm = TRUE};
  b.nodes = 1;
  units_of(pl, profile, &b.units, &b.n_units);
  b.e = sim_engine_new();
  for (guint k = 0; k < N_STREAMS; k++)
    sim_engine_add_stream(b.e, 0);
  b.comm = g_array_new(FALSE, FALSE, sizeof(guint));
  b.comm_bytes = g_array_new(FALSE, FALSE, sizeof(double));
  stage3_begin(&b);
  emit_stage3_microbatch(&b, 0);
  for (guint t = 0; t < b.n_tens; t++) {
    if (b.tens[t].persist)
      out->persistent += b.tens[t].numel;
    else
      out->sharded += b.tens[t].numel;
  }
  for (guint t = 0; t < b.n_tens; t++)
    if (!b.tens[t].persist)
      out->largest_gathered = MAX(out->largest_gathered, b.tens[t].numel);
  out->live_peak = b.live_peak;
  out->bucket_peak = b.bucket_peak;
  out->gathers = b.gathers;
  out->reductions = b.reductions;
  out->gather_bytes = b.gather_bytes;
  out->reduce_bytes = b.reduce_bytes;
  stage3_end(&b);
  g_array_free(b.comm, TRUE);
  g_array_free(b.comm_bytes, TRUE);
  sim_engine_free(b.e);
  g_free(b.units);
}

void sim_zero_memory(const SimPlan *pl, const ModelProfile *profile, ModelMemory *mem) {
  ModelLayerOptions lo = sim_plan_layer_options(pl, profile);
  const ModelShape *m = &pl->model;
  double d = pl->dp;
  double P = (double)model_param_count(m);
  /* one microbatch in flight at a time: all its layers' activations */
  ModelMemoryRequest req = {.t = 1,
                            .b = pl->micro_batch,
                            .inflight_layer_mbs = m->layers,
                            .inflight_mbs = 1,
                            .recompute = pl->recompute,
                            .first_stage = TRUE,
                            .last_stage = TRUE,
                            .fp32_softmax = model_softmax_fp32(m, 1, pl->micro_batch, &lo),
                            .flash = lo.attention == MODEL_ATTENTION_FLASH};
  ModelMemory act;
  model_memory(m, &req, &act);
  mem->activations = act.activations;
  mem->allocator = 0;
  mem->optimizer = 12 * P / d;
  mem->gradients = pl->zero >= 2 ? 2 * P / d : 2 * P;
  if (pl->zero == 3) {
    Stage3Memory z;
    sim_zero3_memory(pl, profile, &z);
    /* the fp16 partitions, the persistent tensors whole, the tensors
     * gathered at the peak, and ProcessGroupNCCL's flat output of the
     * largest gather (a second copy until its d copies are done) */
    mem->weights = 2.0 * (double)z.sharded / d + 2.0 * (double)z.persistent + 2.0 * (double)z.live_peak +
                   2.0 * (double)z.largest_gathered;
    /* the fp16 gradient partitions, and the fp16 gradients waiting whole in
     * the reduction bucket, flattened once more for their all-reduce (or
     * in the contiguous buffer) */
    mem->gradients = 2.0 * (double)(z.sharded + z.persistent) / d + 2.0 * 2.0 * (double)z.bucket_peak;
  } else
    mem->weights = 2 * P;
  mem->total = mem->weights + mem->gradients + mem->optimizer + mem->activations;
}

/* Bisection of ZeRO's traffic: the replica cut, one direction, over the
 * time its collectives are in flight (as ptdp.c measures data-parallel
 * traffic, with one phase). */
static double bisection(Build *b) {
  GArray *edges = sim_exposed_edges_new();
  double bytes = 0;
  for (guint j = 0; j < b->comm->len; j++) {
    guint op = g_array_index(b->comm, guint, j);
    double c = g_array_index(b->comm_bytes, double, j);
    if (b->flow) {
      double copies;
      const NetCollPlan *plan = sim_netops_plan_of(b->flow, op, &copies);
      c = plan ? fmax(net_coll_plan_crossing_bytes(plan, 0), net_coll_plan_crossing_bytes(plan, 1)) * copies : 0;
    }
    if (c <= 0)
      continue;
    bytes += c;
    sim_exposed_add(edges, sim_engine_op_start(b->e, op), sim_engine_op_end(b->e, op), 0);
  }
  double u[SIM_N_CLS + 1];
  sim_exposed_split(edges, 0, u);
  g_array_free(edges, TRUE);
  return u[0] > 0 ? bytes / u[0] : 0;
}

gboolean sim_zero_run(const SimPlan *pl, const ModelProfile *profile, const TopoCluster *cluster, SimResult *r,
                      SimTimelineFn observe, gpointer data, GError **error) {
  g_return_val_if_fail(pl->zero >= 1 && pl->zero <= 3 && pl->tp == 1 && pl->pp == 1, FALSE);
  memset(r, 0, sizeof *r);
  if (!sim_plan_check_device(pl, profile, error))
    return FALSE;
  sim_zero_memory(pl, profile, &r->memory);
  r->fits_in_memory = r->memory.total <= sim_plan_usable_bytes(pl, profile);
  if (!r->fits_in_memory && !pl->allow_oom) {
    const ModelMemory *mm = &r->memory;
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_OOM,
                "does not fit in memory: each GPU needs %.1f GiB of %.1f GiB usable (weights %.1f, gradients %.1f, optimizer "
                "%.1f, activations %.1f); use more GPUs, %sa smaller --micro-batch%s (--allow-oom simulates it anyway)",
                mm->total / 1073741824.0, sim_plan_usable_bytes(pl, profile) / 1073741824.0, mm->weights / 1073741824.0,
                mm->gradients / 1073741824.0, mm->optimizer / 1073741824.0, mm->activations / 1073741824.0,
                pl->recompute ? "" : "--recompute full, ", pl->zero < 3 ? " or a higher --zero stage" : "");
    return FALSE;
  }
  Build b = {.pl = pl, .profile = profile};
  b.net = (ModelNet){.hw = cluster->net,
                     .free_comm = profile->kind == MODEL_PROFILE_IDEAL,
                     .measured = profile->coll,
                     .n_measured = profile->n_coll};
  b.nodes = (pl->dp + cluster->gpus_per_node - 1) / cluster->gpus_per_node;
  units_of(pl, profile, &b.units, &b.n_units);
  b.e = sim_engine_new();
  for (guint kind = 0; kind < N_STREAMS; kind++)
    sim_engine_add_stream(b.e, 0);
  /* the gathers and reductions run beside the compute */
  b.contention = sim_plan_contention(pl, profile, cluster, 1, pl->dp, FALSE);
  if (b.contention > 1)
    sim_engine_set_stream_holds_sms(b.e, SIM_STREAM_DP);
  if (pl->zero == 3)
    stage3_begin(&b);
  b.comm = g_array_new(FALSE, FALSE, sizeof(guint));
  b.comm_bytes = g_array_new(FALSE, FALSE, sizeof(double));
  b.last_comm = G_MAXUINT;
  gboolean ok = TRUE;
  if (pl->flow_network && !b.net.free_comm) {
    guint total = topo_cluster_gpus(cluster);
    b.side = g_malloc(total);
    memset(b.side, 2, total);
    for (guint k = 0; k < pl->dp; k++)
      b.side[k] = k < pl->dp / 2 ? 0 : 1;
    ok = (b.flow = sim_netops_new(cluster, b.e, error)) != NULL;
  }
  if (ok) {
    b.pieces = observe ? g_array_new(FALSE, FALSE, sizeof(SimTimelinePiece)) : NULL;
    emit(&b);
    if (b.flow)
      sim_netops_built(b.flow);
    ok = sim_engine_run(b.e, error);
  }
  if (ok) {
    SimTime makespan = sim_engine_makespan(b.e);
    r->iteration_time_s = (double)makespan * 1e-9;
    r->contention = b.contention;
    sim_plan_rates(pl, profile, r);
    /* no pipeline: the only idle time is waiting for parameters */
    GArray *edges = sim_exposed_edges_new();
    for (guint kind = 0; kind < SIM_STREAM_KINDS; kind++) {
      guint n;
      const guint *ops = sim_engine_stream_ops(b.e, kind, &n);
      for (guint j = 0; j < n; j++)
        sim_exposed_add_op(edges, b.e, ops[j]);
    }
    double parts[SIM_N_CLS + 1];
    sim_exposed_split(edges, makespan, parts);
    g_array_free(edges, TRUE);
    r->breakdown = (SimBreakdown){parts[SIM_CLS_COMPUTE], parts[SIM_CLS_TP], parts[SIM_CLS_PP],
                                  parts[SIM_CLS_DP],      parts[SIM_CLS_OPT], parts[SIM_N_CLS]};
    r->bytes_dp = b.bytes;
    r->shard_gathers = b.gathers;
    r->shard_reductions = b.reductions;
    r->shard_gather_bytes = b.gather_bytes;
    r->shard_reduce_bytes = b.reduce_bytes;
    r->shard_host_s = b.host_s;
    r->bisection_dp_GBps = pl->dp > 1 ? bisection(&b) / 1e9 : 0;
    r->ops = sim_engine_n_ops(b.e);
    r->events = sim_engine_n_events(b.e);
    r->simulated_gpus = 1;
    r->symmetric = TRUE;
    if (observe) {
      guint gpu0 = 0;
      SimTimeline tl = {b.e, pl, 1, 1, 1, &gpu0, "mb", 0, b.pieces, NULL, NULL};
      ok = observe(&tl, data, error);
    }
  }
  if (b.pieces)
    g_array_free(b.pieces, TRUE);
  sim_engine_free(b.e);
  sim_netops_free(b.flow);
  g_free(b.side);
  stage3_end(&b);
  g_free(b.units);
  g_array_free(b.comm, TRUE);
  g_array_free(b.comm_bytes, TRUE);
  return ok;
}
