/* ptdsim — ZeRO data parallelism on the engine (see zero.h). */
#include "zero.h"

#include <math.h>
#include <string.h>

#include "../models/comm.h"
#include "../models/compute.h"
#include "../models/layer.h"
#include "exposed.h"
#include "netops.h"

/* Tag categories and streams as the timeline numbers them (timeline.h). */
enum { STREAM_COMPUTE = 0, STREAM_DP = 4 };
enum { PASS_FORWARD, PASS_BACKWARD, PASS_RECOMPUTE, PASS_OTHER };

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
} Unit;

/* DeepSpeed's stage3_prefetch_bucket_size default, 5e7 elements
 * (deepspeed/runtime/zero/config.py: "maximum number of parameter elements
 * to fetch ahead of use"): a unit at most this large is gathered while the
 * one before it computes; a larger one only when it is needed. */
#define PREFETCH_ELEMENTS 50000000ull

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
  model_embedding_cost(profile, m, 1, b, &ef, &eb);
  model_head_cost(profile, m, 1, b, &hf, &hb);
  guint64 word = (guint64)m->vocab * h, pos = m->position == MODEL_POSITION_LEARNED ? (guint64)m->seq_len * h : 0;
  u[0] = (Unit){word + pos, word + pos, ef, eb, FALSE, -1, SIM_PART_EMBEDDING};
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
    x[0] = (Unit){lin.qkv, lin.qkv + lin.norm, fw[0], bw[0], TRUE, i, SIM_PART_QKV};
    x[1] = (Unit){lin.proj, lin.proj, fw[1], bw[1], TRUE, i, SIM_PART_PROJECTION};
    x[2] = (Unit){lin.up, lin.up + lin.norm, fw[2], bw[2], TRUE, i, SIM_PART_MLP_UP};
    x[3] = (Unit){lin.down, lin.down, fw[3], bw[3], TRUE, i, SIM_PART_MLP_DOWN};
  }
  /* the head: the tied word embedding gathered again for the logits, or its
   * own logit matrix when untied; it owns the final norm */
  u[4 * L + 1] = (Unit){word, (m->untied ? word : 0) + lin.norm, hf, hb, FALSE, -3, SIM_PART_HEAD};
  *out = u;
  *n = 4 * L + 2;
}

/* A collective of ZeRO over all d GPUs moving `bytes` (the all-gather's
 * output, the reduce-scatter's input), after `after` (G_MAXUINT: none), on
 * the communication stream in issue order. */
static guint coll(Build *b, NetCollOp op, double bytes, guint after, const SimOpTag *t, guint act, const Unit *un) {
  const SimPlan *pl = b->pl;
  guint d = pl->dp, stream = STREAM_DP, x;
  if (b->flow) {
    char key[48];
    g_snprintf(key, sizeof key, "zero%d:%.0f", (int)op, bytes);
    guint *gpus = g_new(guint, d);
    for (guint k = 0; k < d; k++)
      gpus[k] = k;
    guint plan = sim_netops_coll(b->flow, key, op, gpus, d, 1, bytes, b->side);
    g_free(gpus);
    x = sim_netops_op(b->flow, plan, &stream, NULL, 1, t);
  } else {
    ModelCollOp mop = op == NET_OP_ALLGATHER ? MODEL_COLL_ALLGATHER : MODEL_COLL_REDUCESCATTER;
    x = sim_engine_add_op1(b->e, ns(model_collective_time_s(&b->net, mop, bytes, d, b->nodes, NULL)), stream, t);
  }
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
  guint x = sim_engine_add_op1(b->e, ns(seconds), STREAM_COMPUTE, t);
  if (after != G_MAXUINT)
    sim_engine_add_dep(b->e, after, x);
  if (un)
    sim_timeline_piece(b->pieces, x, SIM_ACT_RUN, un->part, un->layer ? un->index : -1, 1, 0);
  return x;
}

/* One microbatch under stage 3.  A unit's parameters are gathered before
 * its forward, again before its recomputation forward and again before its
 * backward, and its gradients reduce-scattered after its backward.  A
 * gather runs while the unit before it computes when the unit fits
 * DeepSpeed's prefetch bucket; otherwise it waits for that compute to end
 * (the unit's own pre-forward hook). */
static void emit_stage3_microbatch(Build *b, guint mb) {
  const SimPlan *pl = b->pl;
  guint U = b->n_units, prev = G_MAXUINT;
  for (guint u = 0; u < U; u++) {
    const Unit *un = &b->units[u];
    SimOpTag t = tag(SIM_TIMELINE_CAT_DP, PASS_FORWARD, mb, un->index);
    guint g = coll(b, NET_OP_ALLGATHER, 2.0 * un->params, un->params > PREFETCH_ELEMENTS ? prev : G_MAXUINT, &t,
                   SIM_ACT_PARAM_GATHER, un);
    t.category = SIM_TIMELINE_CAT_COMPUTE;
    prev = compute(b, un->fwd, g, &t, un);
  }
  /* backward, units in reverse */
  guint pending_rs = G_MAXUINT;
  for (guint k = 0; k < U; k++) {
    guint u = U - 1 - k;
    const Unit *un = &b->units[u];
    gboolean wait = un->params > PREFETCH_ELEMENTS;
    SimOpTag t = tag(SIM_TIMELINE_CAT_DP, PASS_RECOMPUTE, mb, un->index);
    if (pl->recompute && un->layer) {
      guint g = coll(b, NET_OP_ALLGATHER, 2.0 * un->params, wait ? prev : G_MAXUINT, &t, SIM_ACT_PARAM_GATHER, un);
      t.category = SIM_TIMELINE_CAT_COMPUTE;
      prev = compute(b, un->fwd, g, &t, un);
    }
    t = tag(SIM_TIMELINE_CAT_DP, PASS_BACKWARD, mb, un->index);
    guint g = coll(b, NET_OP_ALLGATHER, 2.0 * un->params, wait ? prev : G_MAXUINT, &t, SIM_ACT_PARAM_GATHER, un);
    /* the previous unit's gradients go out behind this unit's gather */
    if (pending_rs != G_MAXUINT) {
      SimOpTag rt = tag(SIM_TIMELINE_CAT_DP, PASS_OTHER, mb, b->units[u + 1].index);
      coll(b, NET_OP_REDUCESCATTER, 2.0 * b->units[u + 1].owned, pending_rs, &rt, SIM_ACT_GRAD_REDUCE_SCATTER,
           &b->units[u + 1]);
    }
    t.category = SIM_TIMELINE_CAT_COMPUTE;
    prev = pending_rs = compute(b, un->bwd, g, &t, un);
  }
  SimOpTag rt = tag(SIM_TIMELINE_CAT_DP, PASS_OTHER, mb, b->units[0].index);
  coll(b, NET_OP_REDUCESCATTER, 2.0 * b->units[0].owned, pending_rs, &rt, SIM_ACT_GRAD_REDUCE_SCATTER, &b->units[0]);
}

/* One microbatch under stages 1 and 2: the whole model is on every GPU;
 * stage 2 reduce-scatters each unit's gradients as its backward ends. */
static guint emit_replicated_microbatch(Build *b, guint mb, gboolean reduce_each) {
  const SimPlan *pl = b->pl;
  guint U = b->n_units, last = G_MAXUINT;
  for (guint u = 0; u < U; u++) {
    SimOpTag t = tag(SIM_TIMELINE_CAT_COMPUTE, PASS_FORWARD, mb, b->units[u].index);
    last = compute(b, b->units[u].fwd, G_MAXUINT, &t, &b->units[u]);
  }
  for (guint k = 0; k < U; k++) {
    guint u = U - 1 - k;
    const Unit *un = &b->units[u];
    SimOpTag t = tag(SIM_TIMELINE_CAT_COMPUTE, PASS_RECOMPUTE, mb, un->index);
    if (pl->recompute && un->layer)
      compute(b, un->fwd, G_MAXUINT, &t, un);
    t.pass = PASS_BACKWARD;
    last = compute(b, un->bwd, G_MAXUINT, &t, un);
    if (reduce_each && un->owned > 0) {
      SimOpTag rt = tag(SIM_TIMELINE_CAT_DP, PASS_OTHER, mb, un->index);
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
    SimOpTag rt = tag(SIM_TIMELINE_CAT_DP, PASS_OTHER, 0, -1);
    coll(b, NET_OP_REDUCESCATTER, 2.0 * P, last, &rt, SIM_ACT_GRAD_REDUCE_SCATTER, NULL);
  }
  /* The step on this GPU's shard, after its last gradients arrived. */
  SimOpTag ot = tag(SIM_TIMELINE_CAT_OPTIMIZER, PASS_OTHER, 0, -1);
  guint64 shard = (P + pl->dp - 1) / pl->dp;
  guint opt = compute(b, model_optimizer_time_s(b->profile, shard), b->last_comm, &ot, NULL);
  /* stages 1 and 2: the updated fp16 parameters gathered back */
  if (pl->zero < 3) {
    SimOpTag gt = tag(SIM_TIMELINE_CAT_DP, PASS_OTHER, 0, -1);
    coll(b, NET_OP_ALLGATHER, 2.0 * P, opt, &gt, SIM_ACT_PARAM_ALLGATHER, NULL);
  }
}

void sim_zero_memory(const SimPlan *pl, const ModelProfile *profile, ModelMemory *mem) {
  ModelLayerOptions lo = sim_plan_layer_options(pl, profile);
  const ModelShape *m = &pl->model;
  double h = m->hidden, d = pl->dp;
  double P = (double)model_param_count(m);
  ModelLinears lin = model_layer_linears(m);
  double word = (double)m->vocab * h, mlp = (double)MAX(MAX(lin.qkv, lin.proj), MAX(lin.up, lin.down));
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
  mem->optimizer = 12 * P / d;
  mem->gradients = pl->zero >= 2 ? 2 * P / d : 2 * P;
  /* stage 3: the shard, the norms whole (under the persistence threshold),
   * and two units gathered at once (at most the word embedding or the
   * largest linear, twice) */
  double norms = (2.0 * m->layers + 1) * (double)lin.norm;
  mem->weights = pl->zero == 3 ? 2 * (P - norms) / d + 2 * norms + 2 * 2 * MAX(mlp, word) : 2 * P;
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
  for (guint kind = 0; kind < SIM_TIMELINE_STREAM_KINDS; kind++)
    sim_engine_add_stream(b.e, 0);
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
    sim_plan_rates(pl, profile, r);
    /* no pipeline: the only idle time is waiting for parameters */
    GArray *edges = sim_exposed_edges_new();
    for (guint kind = 0; kind < SIM_TIMELINE_STREAM_KINDS; kind++) {
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
    r->bisection_dp_GBps = pl->dp > 1 ? bisection(&b) / 1e9 : 0;
    r->ops = sim_engine_n_ops(b.e);
    r->events = sim_engine_n_events(b.e);
    r->simulated_gpus = 1;
    r->symmetric = TRUE;
    if (observe) {
      guint gpu0 = 0;
      SimTimeline tl = {b.e, pl, 1, 1, 1, &gpu0, "mb", TRUE, 0, b.pieces};
      ok = observe(&tl, data, error);
    }
  }
  if (b.pieces)
    g_array_free(b.pieces, TRUE);
  sim_engine_free(b.e);
  sim_netops_free(b.flow);
  g_free(b.side);
  g_free(b.units);
  g_array_free(b.comm, TRUE);
  g_array_free(b.comm_bytes, TRUE);
  return ok;
}
