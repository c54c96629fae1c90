/* ptdsim — the PTD-P task graph's shared state (ptdp/ only): the builder
 * (PtdpBuild), the small helpers on it that every file of the room uses
 * (ptdp_, PTDP_), and what each file offers the others, grouped by the
 * file that defines it (sim_ptdp_). */
#pragma once

#include "../models/comm.h"
#include "../models/compute.h"
#include "../models/layer.h"
#include "../network/collective.h"
#include "../sim/engine.h"
#include "../sim/exposed.h"
#include "../plan/moe.h"
#include "../taskgraph/netops.h"
#include "../plan/plan.h"
#include "../plan/route.h"
#include "../schedule/schedule.h"
#include "../sim/steady.h"
#include "../sim/tags.h"
#include "../taskgraph/timeline.h"
#include "ptdp.h"


/* The ops item idx of stage s issued on a rank, from the first to the
 * last (PtdpBuild.items). */
typedef struct {
  guint first, last;
} PtdpItemOps;

/* --network flow: communication ops end when their flows do (netops.h). */
typedef struct {
  SimNetOps *ops;
  guint8 *side_pp, *side_dp; /* bisection sides per global GPU */
} PtdpFlow;

/* What an attempt counted as it emitted its ops (sim_ptdp_measure reports
 * it); zero again before each attempt. */
typedef struct {
  double bytes[SIM_N_CATS];
  double bytes_embedding; /* the tied-embedding all-reduce's part of bytes[SIM_CAT_DP] */
  guint64 shard_gathers, shard_reductions; /* FSDP2, per GPU of stage 0 */
  double shard_gather_bytes, shard_reduce_bytes;
  guint64 logical_extra; /* fine ops the coarse ones stand for, beyond one each */
} PtdpCounts;

/* The builder: one plan's iteration as ops on the engine.  run.c fills
 * the first part once (build_init, build_costs) and the rest once per
 * attempt (build_tables ... measure); build_clear frees an attempt's,
 * build_free everything. */
typedef struct {
  /* --- the run: the plan and its shape, fixed for every attempt --- */
  const SimPlan *plan;
  const ModelProfile *profile;
  const TopoCluster *cluster;
  ModelNet net; /* the cluster's network with the profile's free or measured collectives */
  guint ts, ds; /* simulated tensor ranks and replicas */
  /* The symmetry shortcut's classes (sim_ptdp_classes): simulated replica k
   * is the job's replica kmap[k] (NULL: k itself), standing for the
   * replicas of its class, which run the same timeline; `declined` says why
   * every GPU is simulated ("": the shortcut holds, or --no-symmetry). */
  guint *kmap;
  guint *kweight; /* per simulated replica: the job's replicas it stands for (NULL: 1 each, or all d for one) */
  char declined[SIM_DECLINED_LEN];
  char approximate[SIM_DECLINED_LEN]; /* where the shortcut taken may miss something ("": nothing) */
  guint cp;    /* context-parallel ranks: one simulated, standing for all (they do equal work) */
  guint dpc;   /* the gradient group: the d replicas times the cp context-parallel ranks */
  guint shard; /* FSDP2: the ranks of a shard group (dpc, or dpc / R under HSDP) */
  guint p, v;  /* stages, chunks */
  /* The pipeline split (sim_plan_chunk_layers): per (stage s, chunk c) at
   * [s * v + c] the chunk's layers and the stage-local index of its first;
   * lmax, the most layers of any chunk, strides the per-layer tables. */
  guint *chunk_n, *chunk_at, lmax;
  ModelLayerCost layer;
  /* How much longer compute takes while a collective holds SMs of its GPU
   * (ptdp_contention; 1: not modelled) */
  double contention;
  double emb_fwd, emb_bwd, head_fwd, head_bwd;
  /* The MTP modules (mtp_n of them, in virtual stage mtp_vs; 0 and
   * G_MAXUINT: none): each one's 2h -> h projection forward and backward,
   * its MoE layer (moe_attn, moe) and its logits and loss forward and
   * backward */
  guint mtp_n, mtp_vs;
  double mtp_proj_f, mtp_proj_b, mtp_head_f, mtp_head_b;
  ModelPass bwd_in;       /* the backward without its weight-gradient GEMMs (a split schedule's B) */
  double layer_w, head_w; /* the weight-gradient GEMMs of a layer, of the logit layer (its W) */
  guint route;            /* virtual stages a microbatch passes (sim_plan_route_len) */
  gboolean blocking;      /* Megatron's blocking sends (GPipe, 1F1B, interleaved on the cost model) */
  /* Mixture of experts (plan/moe.h): which layers are MoE, per (stage s,
   * chunk c, layer l) at [(s * v + c) * lmax + l]; an MoE layer's attention
   * block and MLP block. */
  guint8 *moe_layer;
  ModelLayerCost moe_attn;
  ModelMoeCost moe;
  /* --moe-token-dispatcher deepep: the nodes an expert-parallel group
   * spans, and how much longer compute takes beside DeepEP's kernels (the
   * SMs they hold) where DualPipe's F&B overlap them with it (0: none) */
  guint moe_ep_nodes;
  double deepep_contention;

  /* --- an attempt: its engine and tables (build_tables) --- */
  guint m; /* microbatches: the plan's, or the steady state's short run's */
  SimEngine *e;
  PtdpFlow *flow;   /* NULL: the analytic network */
  GArray **order;   /* per stage: SimItem */
  guint *len;       /* per stage: its items */
  guint n_items;    /* per stage at most: 2 m v, or 3 m v where the backward is split */
  guint **position; /* per stage: (chunk * m + mb) * 3 + ptdp_slot_of -> item index */
  guint *last_bwd;  /* per (stage s, chunk c) at [s * v + c]: the item that ends the chunk's last backward */
  PtdpItemOps *items; /* [(k * p + s) * n_items + idx] * ts + i */
  /* per simulated (stage, replica) tensor-parallel group: the all-reduce, or
   * with sequence parallelism its reduce-scatter and all-gather:
   * [(s * ds + k) * 2 + j] */
  SimTime *tp_ns;
  /* per simulated (stage, replica): context parallelism's ring hops (keys
   * and values; backward with the gradients so far; the gradients' last hop
   * home) and the overlapped tensor-parallel ring's hops (all-gather,
   * reduce-scatter): [(s * ds + k) * 5 + j] */
  SimTime *hop_ns;
  guint *hop_plans; /* the same, as flow plans (G_MAXUINT: not built yet) */
  /* per stage an MoE layer's token communication (PTDP_MOE_DISPATCH ...),
   * its time (alone on the flows, or analytic) and its plan */
  SimTime *moe_ns;
  guint *moe_plans;
  /* plan indices by what they connect (G_MAXUINT: not built yet), so that
   * an op finds its plan without formatting the plan's key */
  guint *tp_plans;     /* [(s * ds + k) * 3 + (all-reduce 0, all-gather 1, reduce-scatter 2)] */
  guint *pp_plans;     /* [((k * p + s) * ts + i) * 2 + (forward)] */
  guint *param_gather; /* --overlap-param-gather: [((s * v + c) * lmax + l) * ts + i]: the op that gathers layer l */
  guint *grad_ready; /* torch DDP: [((k * p + s) * v + c) * lmax + l] * ts + i: op that ends layer l's last backward */
  GArray **fsdp_rs;  /* FSDP2: per (stage s, tensor rank i) at [s * ts + i], the layers' gradient reductions */
  GArray *pp_to;     /* guint per op: the stage a send on the sender's stream alone goes to (sim_ptdp_measure) */
  GArray *tp_part;   /* SimTime per op: the all-reduce time inside a coarse op (0: none) */
  PtdpCounts counts;

  /* --- the emission of the current item (pass.c, moe.c, emit.c) --- */
  double *pending; /* per rank: compute not yet in an op */
  guint *prev;     /* per rank: its chain's last op */
  guint *join;     /* per rank: an op the next op of its chain must also wait for (G_MAXUINT: none) */
  /* Coarse items (see sim_ptdp_emit_item): an item's chain of compute ops and
   * tensor-parallel all-reduces, which nothing else can touch, is one op of
   * their summed durations.  `dry`: the item's fine ops are counted and
   * timed, not issued. */
  gboolean coarse, dry;
  SimTime dry_compute, dry_tp;
  guint dry_ops;
  /* traced runs only (timeline.h): what each compute op runs, and the
   * pieces of the compute not yet in an op */
  GArray *pieces, *pending_pieces;

  /* --- the steady state (steady.h): a short run of m microbatches stands
   * for the plan's; per item (k, s, idx) the ops it issued, [lo, hi), its
   * transfers' too, and the bytes counted as it was built (PtdpAdd) --- */
  gboolean steady_failed; /* a sum over ops did not carry to the long run */
  guint *item_lo, *item_hi, *xfer_lo, *xfer_hi;
  guint cur_item; /* the item being issued (| PTDP_STEADY_XFER: its transfers); G_MAXUINT: none */
  GArray *adds;   /* PtdpAdd */
  GArray *extra;  /* guint per op: the fine ops a coarse op stands for, beyond itself */
  SimSteady steady; /* k > 0: the results are the long run's */
} PtdpBuild;

/* An MoE layer's token communication (moe_ns, moe_plans). */
enum { PTDP_MOE_DISPATCH, PTDP_MOE_COMBINE, PTDP_MOE_ETP_GATHER, PTDP_MOE_ETP_SCATTER, PTDP_MOE_N_COMM };
/* cur_item's mark while an item's transfers are issued. */
#define PTDP_STEADY_XFER 0x80000000u

/* Bytes counted while the short run was built (sim_ptdp_account), equal
 * counts in a row kept once: measure.c carries them to the long run. */
typedef struct {
  guint item; /* cur_item when counted */
  guint cat;
  double bytes;
  guint count; /* times in a row */
} PtdpAdd;

static inline guint ptdp_gpu_of(const PtdpBuild *b, guint i, guint s, guint k) { return i + b->ts * (k + b->ds * s); }
/* The layers of chunk c of stage s, the stage-local index of its first, the
 * layers of stage s. */
static inline guint ptdp_chunk_layers(const PtdpBuild *b, guint s, guint c) { return b->chunk_n[s * b->v + c]; }

static inline guint ptdp_chunk_first(const PtdpBuild *b, guint s, guint c) { return b->chunk_at[s * b->v + c]; }

static inline guint ptdp_stage_layers(const PtdpBuild *b, guint s) {
  return ptdp_chunk_first(b, s, b->v - 1) + ptdp_chunk_layers(b, s, b->v - 1);
}

static inline guint ptdp_stream_of(const PtdpBuild *b, guint i, guint s, guint k, guint kind) {
  return ptdp_gpu_of(b, i, s, k) * SIM_STREAM_KINDS + kind;
}
/* The job's rank of tensor rank i, context-parallel rank c, replica k,
 * stage s (see SimPlacement; context-parallel ranks sit next to the
 * tensor-parallel ones, as Megatron-Core orders tp-cp-dp-pp): what --slow
 * RANK counts. */
static inline guint ptdp_rank_of_c(const PtdpBuild *b, guint i, guint c, guint s, guint k) {
  const SimPlan *pl = b->plan;
  guint tc = pl->tp * b->cp;
  switch (pl->placement) {
  case SIM_PLACEMENT_DP_OUTERMOST:
    return i + pl->tp * c + tc * (s + pl->pp * k);
  case SIM_PLACEMENT_MISALIGNED:
    return i + pl->tp * c + tc * (k + pl->dp * s) + b->cluster->gpus_per_node / 2;
  default:
    return i + pl->tp * c + tc * (k + pl->dp * s);
  }
}
/* Its cluster GPU: tensor- and context-parallel groups packed whole into
 * NVLink domains (sim_place).  `k` is the job's replica. */
static inline guint ptdp_gpu_of_job_rank(const PtdpBuild *b, guint i, guint c, guint s, guint k) {
  guint r = ptdp_rank_of_c(b, i, c, s, k);
  return b->plan->placement == SIM_PLACEMENT_MISALIGNED ? r : sim_place(b->cluster, b->plan->tp * b->cp, r);
}

/* The job's replica that simulated replica k is. */
static inline guint ptdp_job_replica(const PtdpBuild *b, guint k) { return b->kmap ? b->kmap[k] : k; }

/* The cluster GPU of simulated tensor rank i, context-parallel rank c,
 * stage s, simulated replica k. */
static inline guint ptdp_gpu_of_rank_c(const PtdpBuild *b, guint i, guint c, guint s, guint k) {
  return ptdp_gpu_of_job_rank(b, i, c, s, ptdp_job_replica(b, k));
}

static inline guint ptdp_gpu_of_rank(const PtdpBuild *b, guint i, guint s, guint k) {
  return ptdp_gpu_of_rank_c(b, i, 0, s, k);
}

static inline guint ptdp_node_of_rank(const PtdpBuild *b, guint i, guint s, guint k) {
  return ptdp_gpu_of_rank(b, i, s, k) / b->cluster->gpus_per_node;
}

static inline SimTime ptdp_ns(double seconds) { return sim_time_ns(seconds); }

static inline SimOpTag ptdp_tag(guint cat, guint pass, guint s, guint c, guint mb, gint layer) {
  return (SimOpTag){(guint16)cat, (guint16)pass, (gint32)s, (gint32)c, (gint32)mb, layer};
}

/* --- the flow network --- */

/* The ranks whose transfers an op carries on the flow network: its own.
 * Under the symmetry shortcut the simulated ranks stand for those of their
 * class: their flows meet each other on the links exactly as the other
 * ranks' flows meet their images, because ranks whose flows meet on a NIC
 * or a link are simulated together (sim_ptdp_classes).  What this misses:
 * ECMP collisions between the flows of different ranks across scalable
 * units, which are not symmetric (--no-symmetry carries every rank's
 * flows).  `ptdp_copies` is how many ranks' transfers the op stands for, on
 * average over the classes (every replica moves the same bytes), for the
 * byte counts. */
static inline double ptdp_copies(const PtdpBuild *b, gboolean over_i, gboolean over_k) {
  return (over_i ? (double)b->plan->tp / b->ts : 1.0) * (over_k ? (double)b->plan->dp / b->ds : 1.0);
}
/* The same for an op of the one simulated context-parallel rank, which
 * stands for its cp - 1 peers' ops too. */
static inline double ptdp_copies_c(const PtdpBuild *b, gboolean over_i, gboolean over_k) {
  return ptdp_copies(b, over_i, over_k) * b->cp;
}

/* --- context parallelism's ring and overlapped tensor-parallel communication --- */
enum { PTDP_HOP_KV, PTDP_HOP_KV_GRAD, PTDP_HOP_GRAD, PTDP_HOP_TP_GATHER, PTDP_HOP_TP_SCATTER };

/* --- pipeline transfers --- */

/* An item's slot in the position table: the whole backward or its input
 * gradient 0, the forward 1, the weight gradient 2. */
static inline guint ptdp_slot_of(SimItem it) { return it.forward ? 1 : it.grad == SIM_GRAD_WEIGHT ? 2 : 0; }

static inline guint ptdp_item_index(const PtdpBuild *b, guint s, guint chunk, guint mb, gboolean fwd) {
  return b->position[s][((guint64)chunk * b->m + mb) * 3 + (fwd ? 1 : 0)];
}

/* The model as one rank sees it: context parallelism gives it s/cp of
 * every sequence's tokens. */
static inline ModelShape ptdp_rank_shape(const SimPlan *pl) {
  ModelShape local = pl->model;
  local.seq_len /= sim_plan_cp(pl);
  return local;
}

/* A microbatch's activation between stages on one rank: b (s/cp) h fp16. */
static inline double ptdp_activation_bytes(const SimPlan *pl) {
  return 2.0 * pl->micro_batch * (pl->model.seq_len / sim_plan_cp(pl)) * pl->model.hidden;
}

/* Bytes each tensor-parallel rank sends a pipeline hop: the whole
 * activation, or its 1/t under scatter/gather or sequence parallelism. */
static inline double ptdp_pp_bytes_per_rank(const SimPlan *pl) {
  double full = ptdp_activation_bytes(pl);
  return pl->tp > 1 && (pl->scatter_gather || pl->sequence_parallel) ? full / pl->tp : full;
}

/* --- measuring the timeline --- */

/* The all-reduce time inside a coarse op (0: none, or not coarse). */
static inline SimTime ptdp_tp_part_of(const PtdpBuild *b, guint op) {
  return op < b->tp_part->len ? g_array_index(b->tp_part, SimTime, op) : 0;
}
/* The fine ops a coarse op of the short run stands for, beyond itself. */
static inline guint ptdp_extra_of(const PtdpBuild *b, guint op) {
  return op < b->extra->len ? g_array_index(b->extra, guint, op) : 0;
}

/* --- what each file offers the others, by the file that defines it ---
 * The calls run one way: run.c calls them all; pass.c calls comm.c,
 * moe.c and emit.c; comm.c and moe.c call emit.c; symmetry.c calls
 * comm.c's group layouts; emit.c, measure.c, memory.c and steady.c call no
 * other file of the room. */

/* emit.c: the emission primitives, below every pass -- the bytes each
 * class moved, the flow plans of a collective, a send and a tensor-parallel
 * group, a network op, a rank's chain of compute and its flush into ops,
 * the tensor-parallel all-reduce and stream op. */
void sim_ptdp_account(PtdpBuild *b, guint cat, double bytes);
/* Counts n of a layer's tensor-parallel buffers as SIM_CAT_TP bytes, over
 * the replicas and context ranks a simulated one stands for. */
void sim_ptdp_count_tp(PtdpBuild *b, double n);
guint sim_ptdp_coll_plan(PtdpBuild *b, const char *key, NetCollOp op, const guint *gpus, guint n, double copies,
                         double bytes, const guint8 *side);
guint sim_ptdp_p2p_plan(PtdpBuild *b, const char *key, guint src, guint dst, double copies, double bytes,
                        const guint8 *side);
guint sim_ptdp_net_op(PtdpBuild *b, guint plan, const guint *streams, const guint64 *pos, guint n, const SimOpTag *t);
guint sim_ptdp_tp_plan(PtdpBuild *b, guint s, guint k, NetCollOp op, double bytes);
void sim_ptdp_add_compute(PtdpBuild *b, guint part, gint layer, guint pass, double seconds);
void sim_ptdp_chain_dep(PtdpBuild *b, guint i, guint op);
void sim_ptdp_flush(PtdpBuild *b, guint s, guint k, const SimOpTag *t, gboolean force);
void sim_ptdp_tp_allreduce(PtdpBuild *b, guint s, guint k, const SimOpTag *t);
/* One collective on the tensor-parallel streams of stage s, replica k,
 * after what each last did: the flow network's `plan`, or `dur` on the
 * analytic network; it becomes each rank's last op. */
void sim_ptdp_tp_stream_op(PtdpBuild *b, guint s, guint k, const SimOpTag *t, guint plan, SimTime dur);

/* moe.c: an MoE layer's pass -- the router, the tokens' dispatch and
 * combine, the experts' GEMMs. */
guint sim_ptdp_moe_plan(PtdpBuild *b, guint s, guint kind);
double sim_ptdp_moe_analytic_s(const PtdpBuild *b, guint s, guint kind);
/* The nodes each expert-parallel group spans, for DeepEP; 0 (a one-line
 * error) where a group holds unequal numbers of GPUs on its nodes. */
guint sim_ptdp_moe_check(PtdpBuild *b, GError **error);
void sim_ptdp_moe_pass(PtdpBuild *b, guint s, guint k, const SimOpTag *t, gboolean backward);
/* Its MLP block's forward again, with its token communication, in t's pass
 * (the moe recompute module). */
void sim_ptdp_moe_recompute(PtdpBuild *b, guint s, guint k, const SimOpTag *t);

/* comm.c: what crosses GPUs outside a pass -- pipeline transfers, the
 * data-parallel groups and their collectives, FSDP2's, the optimizer step;
 * the nodes and NICs a group spans. */
void sim_ptdp_fsdp_gather(PtdpBuild *b, guint s, guint k, guint chunk, gint layer, gboolean forward, double params,
                          guint after, guint *out);
void sim_ptdp_fsdp_reduce(PtdpBuild *b, guint s, guint k, guint chunk, gint layer, double params, guint i, guint after);
void sim_ptdp_emit_transfers(PtdpBuild *b, guint s, guint k, guint idx);
void sim_ptdp_emit_param_gathers(PtdpBuild *b);
void sim_ptdp_emit_dp_and_optimizer(PtdpBuild *b, guint s, guint *opt_ops);
guint sim_ptdp_tp_group_nodes(const PtdpBuild *b, guint s, guint k);
/* Nodes spanned by a group of stage s: the tensor-parallel group of the
 * job's replica `fixed` (over_tp) or the data-parallel group of tensor rank
 * `fixed`. */
guint sim_ptdp_group_nodes(const PtdpBuild *b, guint s, guint fixed, gboolean over_tp);
/* The speed factor of the NIC cluster GPU g sends through (--slow-link). */
double sim_ptdp_nic_factor(const PtdpBuild *b, guint g);
double sim_ptdp_tp_link_factor(const PtdpBuild *b, guint s, guint k);
/* The speed of the compute of tensor rank i, stage s, replica k (the
 * job's): the slowest of its context-parallel ranks (--slow). */
double sim_ptdp_rank_speed(const PtdpBuild *b, guint i, guint s, guint k);

/* pass.c: an item of a schedule on a stage -- F, B, W, DualPipe's
 * overlapped F&B -- as compute ops, tensor-parallel all-reduces, the
 * context-parallel ring and overlapped GEMMs. */
void sim_ptdp_emit_item(PtdpBuild *b, guint s, guint k, guint idx);
/* Item idx of stage s is the backward of a DualPipe F&B (the forward
 * before it is paired with it) and runs interleaved with it. */
gboolean sim_ptdp_pairs_with_previous(const PtdpBuild *b, guint s, guint idx);
void sim_ptdp_overlap_pair(PtdpBuild *b, guint s, guint k, guint lo, guint mid, guint hi);

/* symmetry.c: the symmetry shortcut's classes (kmap, kweight, declined). */
void sim_ptdp_classes(PtdpBuild *b);

/* memory.c: each stage's order walked for its memory; the orders a run
 * uses (ZB's heuristics timed on the cost model). */
void sim_ptdp_plan_orders(const SimPlan *pl, const ModelProfile *profile, guint m, GArray **orders);
const SimPlan *sim_ptdp_with_limit(const SimPlan *pl, const ModelProfile *profile, SimPlan **owned);
/* zb-auto: FALSE (a one-line error) where --activation-limit holds less
 * than one microbatch's activations on some stage: no schedule keeps
 * within it.  Others: TRUE. */
gboolean sim_ptdp_limit_check(const SimPlan *pl, const ModelProfile *profile, GError **error);
void sim_ptdp_memory_walk(const SimPlan *pl, const ModelProfile *profile, ModelMemory *mem, guint *stage,
                          double *inflight);

/* measure.c: the finished timeline measured -- breakdown, bubbles, bytes,
 * bisection bandwidths. */
gboolean sim_ptdp_measure(PtdpBuild *b, SimResult *r);
void sim_ptdp_flow_bisection(PtdpBuild *b, SimResult *r);

/* steady.c: the steady state's short run and its proof. */
guint sim_ptdp_steady_short_m(const SimPlan *pl, gboolean traced);
gboolean sim_ptdp_steady_find(PtdpBuild *b);
