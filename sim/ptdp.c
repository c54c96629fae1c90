/* ptdsim — PTD-P: builds the task graph of one Megatron-LM training
 * iteration (tensor, pipeline and data parallelism) on the engine, runs it,
 * and measures the timeline.
 *
 * Streams per simulated GPU: compute, tensor-parallel communication,
 * pipeline send, pipeline receive, data-parallel communication.
 *
 * Symmetry: the t ranks of a tensor-parallel group run identical timelines,
 * and data-parallel replicas are identical until they share the network, so
 * by default one GPU per group and one replica are simulated; the collectives
 * keep their full group size in the cost models.  --no-symmetry simulates
 * every GPU, with collectives occupying every member's stream.
 *
 * Placement (Megatron's order, ranks numbered tensor-parallel fastest, then
 * data-parallel, then pipeline): rank = i + t (k + d s) for tensor rank i,
 * replica k, stage s, so tensor-parallel groups sit inside a node, and
 * pipeline stages are the outermost blocks, across nodes.
 */
#include <math.h>
#include <string.h>
#include <stdlib.h>

#include "../models/comm.h"
#include "../models/compute.h"
#include "../models/layer.h"
#include "../network/collective.h"
#include "engine.h"
#include "netops.h"
#include "exposed.h"
#include "moe.h"
#include "plan.h"
#include "schedule.h"
#include "steady.h"
#include "timeline.h"

enum { STREAM_COMPUTE, STREAM_TP, STREAM_PP_SEND, STREAM_PP_RECV, STREAM_DP, N_STREAM_KINDS };
/* CAT_EP: bytes of the MoE token communication (its ops are tagged CAT_TP:
 * they block the layer as the tensor-parallel collectives do) */
enum { CAT_COMPUTE, CAT_TP, CAT_PP, CAT_PP_GATHER, CAT_DP, CAT_OPTIMIZER, CAT_CP, CAT_EP, N_CATS };
/* exposed.c classifies ops by the shared categories */
G_STATIC_ASSERT((int)CAT_COMPUTE == (int)SIM_TIMELINE_CAT_COMPUTE && (int)CAT_TP == (int)SIM_TIMELINE_CAT_TP &&
                (int)CAT_DP == (int)SIM_TIMELINE_CAT_DP && (int)CAT_OPTIMIZER == (int)SIM_TIMELINE_CAT_OPTIMIZER &&
                (int)CAT_CP == (int)SIM_TIMELINE_CAT_CP);
/* PASS_WEIGHT: a zero-bubble schedule's W (the weight gradients apart) */
enum { PASS_FORWARD, PASS_BACKWARD, PASS_RECOMPUTE, PASS_OTHER, PASS_WEIGHT };
G_STATIC_ASSERT((int)N_STREAM_KINDS == SIM_TIMELINE_STREAM_KINDS); /* traces name the streams by kind */
G_STATIC_ASSERT((int)PASS_WEIGHT == SIM_TIMELINE_PASS_WEIGHT);

typedef struct {
  guint first, last;
} ItemOps;

/* --network flow: communication ops end when their flows do (netops.h). */
typedef struct {
  SimNetOps *ops;
  guint8 *side_pp, *side_dp; /* bisection sides per global GPU */
} FlowCtx;

typedef struct {
  const SimPlan *plan;
  const ModelProfile *profile;
  const TopoCluster *cluster;
  ModelNet net; /* the cluster's network with the profile's free or measured collectives */
  SimEngine *e;
  guint ts, ds; /* simulated tensor ranks and replicas */
  guint cp;     /* context-parallel ranks: one simulated, standing for all (they do equal work) */
  guint dpc;    /* the gradient group: the d replicas times the cp context-parallel ranks */
  guint shard;  /* FSDP2: the ranks of a shard group (dpc, or dpc / R under HSDP) */
  guint fsdp_ring[2]; /* FSDP2: the ends of the last two layers emitted on rank 0 (prefetch depth one) */
  guint64 shard_gathers, shard_reductions; /* FSDP2, per GPU of stage 0 */
  GArray **fsdp_rs; /* FSDP2: per (stage s, tensor rank i) at [s * ts + i], the layers' gradient reductions */
  double shard_gather_bytes, shard_reduce_bytes;
  guint p, v, m; /* stages, chunks, microbatches */
  /* The pipeline split (sim_plan_chunk_layers): per (stage s, chunk c) at
   * [s * v + c] the chunk's layers and the stage-local index of its first;
   * lmax, the most layers of any chunk, strides the per-layer tables. */
  guint *chunk_n, *chunk_at, lmax;
  ModelLayerCost layer;
  double emb_fwd, emb_bwd, head_fwd, head_bwd;
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
  guint *param_gather; /* --overlap-param-gather: [((s * v + c) * lmax + l) * ts + i]: the op that gathers layer l */
  guint *join;      /* per rank: an op the next op of its chain must also wait for (G_MAXUINT: none) */
  GArray **order;   /* per stage: SimItem */
  guint **position; /* per stage: (chunk * m + mb) * 2 + fwd -> item index */
  ItemOps *items;   /* [(k * p + s) * n_items + idx] * ts + i */
  guint n_items;    /* per stage at most: 2 m v, or 3 m v where the backward is split */
  guint *len;       /* per stage: its items */
  guint *last_bwd;  /* per (stage s, chunk c) at [s * v + c]: the item that ends the chunk's last backward */
  guint route;      /* virtual stages a microbatch passes (sim_plan_route_len) */
  gboolean blocking; /* Megatron's blocking sends (GPipe, 1F1B, interleaved on the cost model) */
  ModelPass bwd_in;  /* the backward without its weight-gradient GEMMs (a split schedule's B) */
  double layer_w, head_w; /* the weight-gradient GEMMs of a layer, of the logit layer (its W) */
  GArray *pp_to;     /* guint per op: the stage a send on the sender's stream alone goes to (measure) */
  guint *grad_ready; /* torch DDP: [((k * p + s) * v + c) * lmax + l] * ts + i: op that ends layer l's last backward */
  /* emission state of the current item */
  double *pending;
  guint *prev;
  gboolean *started;
  /* accounting */
  double bytes[N_CATS];
  double bytes_embedding; /* the tied-embedding all-reduce's part of bytes[CAT_DP] */
  FlowCtx *flow; /* NULL: the analytic network */
  /* plan indices by what they connect (G_MAXUINT: not built yet), so that
   * an op finds its plan without formatting the plan's key */
  guint *tp_plans; /* [(s * ds + k) * 3 + (all-reduce 0, all-gather 1, reduce-scatter 2)] */
  guint *pp_plans; /* [((k * p + s) * ts + i) * 2 + (forward)] */
  /* traced runs only (timeline.h): what each compute op runs, and the
   * pieces of the compute not yet in an op */
  GArray *pieces, *pending_pieces;
  /* Coarse items (see emit_item): an item's chain of compute ops and
   * tensor-parallel all-reduces, which nothing else can touch, is one op of
   * their summed durations.  `dry`: the item's fine ops are counted and
   * timed, not issued. */
  gboolean coarse, dry;
  SimTime dry_compute, dry_tp;
  guint dry_ops;
  guint64 logical_extra; /* fine ops the coarse ones stand for, beyond one each */
  GArray *tp_part;       /* SimTime per op: the all-reduce time inside a coarse op (0: none) */
  /* The steady state (steady.h): a short run of b.m microbatches stands
   * for the plan's; per item (k, s, idx) the ops it issued, [lo, hi), its
   * transfers' too, and the bytes counted as it was built (Add). */
  gboolean steady_failed; /* a sum over ops did not carry to the long run */
  guint *item_lo, *item_hi, *xfer_lo, *xfer_hi;
  guint cur_item; /* the item being issued (| STEADY_XFER: its transfers); G_MAXUINT: none */
  GArray *adds;   /* Add */
  GArray *extra;  /* guint per op: the fine ops a coarse op stands for, beyond itself */
  SimSteady steady; /* k > 0: the results are the long run's */
  /* Mixture of experts (sim/moe.h): which layers are MoE, per (stage s,
   * chunk c, layer l) at [(s * v + c) * lmax + l]; an MoE layer's attention
   * block and MLP block; per stage the times of its token communication
   * (MOE_DISPATCH ...; alone on the flows, or analytic) and their plans. */
  guint8 *moe_layer;
  ModelLayerCost moe_attn;
  ModelMoeCost moe;
  SimTime *moe_ns;
  guint *moe_plans;
} Build;

enum { MOE_DISPATCH, MOE_COMBINE, MOE_ETP_GATHER, MOE_ETP_SCATTER, MOE_N_COMM };

#define STEADY_XFER 0x80000000u
typedef struct {
  guint item; /* cur_item when counted */
  guint cat;
  double bytes;
  guint count; /* times in a row */
} Add;

static guint gpu_of(const Build *b, guint i, guint s, guint k) { return i + b->ts * (k + b->ds * s); }
/* The layers of chunk c of stage s, the stage-local index of its first, the
 * layers of stage s. */
static guint chunk_layers(const Build *b, guint s, guint c) { return b->chunk_n[s * b->v + c]; }
static guint chunk_first(const Build *b, guint s, guint c) { return b->chunk_at[s * b->v + c]; }
static guint stage_layers(const Build *b, guint s) {
  return chunk_first(b, s, b->v - 1) + chunk_layers(b, s, b->v - 1);
}
static guint stream_of(const Build *b, guint i, guint s, guint k, guint kind) {
  return gpu_of(b, i, s, k) * N_STREAM_KINDS + kind;
}
/* The job's rank of tensor rank i, context-parallel rank c, replica k,
 * stage s (see SimPlacement; context-parallel ranks sit next to the
 * tensor-parallel ones, as Megatron-Core orders tp-cp-dp-pp): what --slow
 * RANK counts. */
static guint rank_of_c(const Build *b, guint i, guint c, guint s, guint k) {
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
 * NVLink domains (sim_place). */
static guint gpu_of_rank_c(const Build *b, guint i, guint c, guint s, guint k) {
  guint r = rank_of_c(b, i, c, s, k);
  return b->plan->placement == SIM_PLACEMENT_MISALIGNED ? r : sim_place(b->cluster, b->plan->tp * b->cp, r);
}
static guint gpu_of_rank(const Build *b, guint i, guint s, guint k) { return gpu_of_rank_c(b, i, 0, s, k); }
static guint node_of_rank(const Build *b, guint i, guint s, guint k) {
  return gpu_of_rank(b, i, s, k) / b->cluster->gpus_per_node;
}
static guint tp_group_nodes(const Build *b, guint s, guint k);
static double nic_factor(const Build *b, guint g);

/* Stragglers: each simulated rank's compute stream runs at the slowest GPU
 * it stands for -- itself and its context-parallel peers, and under the
 * symmetry shortcut every tensor rank of its group and every replica of its
 * stage (exact for stragglers in one replica; otherwise the slowest replica
 * per stage, an upper bound).  The ranks' own all-reduces and sends then
 * wait for it as the schedule says. */
static void set_speeds(Build *b) {
  const SimPlan *pl = b->plan;
  guint gpn = b->cluster->gpus_per_host;
  for (guint s = 0; s < b->p; s++)
    for (guint k = 0; k < b->ds; k++)
      for (guint i = 0; i < b->ts; i++) {
        double f = 1;
        for (guint kk = b->ds == pl->dp ? k : 0; kk < (b->ds == pl->dp ? k + 1 : pl->dp); kk++)
          for (guint ii = b->ts == pl->tp ? i : 0; ii < (b->ts == pl->tp ? i + 1 : pl->tp); ii++)
            for (guint c = 0; c < b->cp; c++)
              f = MIN(f, sim_plan_gpu_speed(pl, rank_of_c(b, ii, c, s, kk) % pl->gpus, s, gpn));
        if (f < 1)
          sim_engine_set_stream_speed(b->e, stream_of(b, i, s, k, STREAM_COMPUTE), f);
      }
}

static SimTime ns(double seconds) { return sim_time_ns(seconds); }

static SimOpTag tag(guint cat, guint pass, guint s, guint c, guint mb, gint layer) {
  return (SimOpTag){(guint16)cat, (guint16)pass, (gint32)s, (gint32)c, (gint32)mb, layer};
}

/* Counts bytes of class `cat`, noting which item's op counted them. */
static void account(Build *b, guint cat, double bytes) {
  b->bytes[cat] += bytes;
  if (b->adds) {
    Add *last = b->adds->len ? &g_array_index(b->adds, Add, b->adds->len - 1) : NULL;
    if (last && last->item == b->cur_item && last->cat == cat && last->bytes == bytes)
      last->count++;
    else {
      Add a = {b->cur_item, cat, bytes, 1};
      g_array_append_val(b->adds, a);
    }
  }
}

/* --- the flow network --- */

/* The ranks whose transfers an op carries on the flow network: its own.
 * Under the symmetry shortcut the simulated ranks (tensor rank 0, replica 0)
 * stand for all: their flows meet each other on the links exactly as every
 * other rank's flows meet their symmetric images (the placement is checked
 * uniform before the shortcut is taken).  What this misses: ECMP collisions
 * between the flows of different ranks, which are not symmetric
 * (--no-symmetry carries every rank's flows).  `copies` is how many ranks'
 * transfers the op stands for, for the byte counts. */
static double copies(const Build *b, gboolean over_i, gboolean over_k) {
  return (over_i && b->ts == 1 ? b->plan->tp : 1.0) * (over_k && b->ds == 1 ? b->plan->dp : 1.0);
}
/* The same for an op of the one simulated context-parallel rank, which
 * stands for its cp - 1 peers' ops too. */
static double copies_c(const Build *b, gboolean over_i, gboolean over_k) { return copies(b, over_i, over_k) * b->cp; }

/* A collective over n GPUs (NCCL's tuner picks), a send, an op that runs a plan. */
static guint coll_plan(Build *b, const char *key, NetCollOp op, const guint *gpus, guint n, double copies,
                       double bytes, const guint8 *side) {
  return sim_netops_coll(b->flow->ops, key, op, gpus, n, copies, bytes, side);
}

static guint p2p_plan(Build *b, const char *key, guint src, guint dst, double copies, double bytes,
                      const guint8 *side) {
  return sim_netops_p2p(b->flow->ops, key, src, dst, copies, bytes, side);
}

static guint net_op(Build *b, guint plan, const guint *streams, const guint64 *pos, guint n, const SimOpTag *t) {
  return sim_netops_op(b->flow->ops, plan, streams, pos, n, t);
}

/* The tensor-parallel group of stage s, replica k (every replica's under
 * symmetry). */
static guint tp_plan(Build *b, guint s, guint k, NetCollOp op, double bytes) {
  guint *cached = &b->tp_plans[(s * b->ds + k) * 3 + (op == NET_OP_ALLGATHER ? 1 : op == NET_OP_REDUCESCATTER ? 2 : 0)];
  if (*cached != G_MAXUINT)
    return *cached;
  char key[64];
  g_snprintf(key, sizeof key, "tp%d:%u:%u:%.0f", (int)op, s, k, bytes);
  guint t = b->plan->tp, gpus[t];
  for (guint i = 0; i < t; i++)
    gpus[i] = gpu_of_rank(b, i, s, k);
  return *cached = coll_plan(b, key, op, gpus, t, copies_c(b, FALSE, TRUE), bytes, NULL);
}

/* A hop of a ring of (s, k) as a flow plan: every member sends to the next
 * at once.  kind < 3: the context-parallel rings of the simulated tensor
 * ranks (tensor-parallel ranks i over c = 0..cp-1); else the
 * tensor-parallel ring of context-parallel rank 0 (its t ranks). */
static guint hop_plan(Build *b, guint s, guint k, guint kind, double bytes) {
  guint *cached = &b->hop_plans[(s * b->ds + k) * 5 + kind];
  if (*cached != G_MAXUINT)
    return *cached;
  gboolean cp_ring = kind < 3;
  guint rings = cp_ring ? b->ts : 1, n = cp_ring ? b->cp : b->plan->tp;
  guint *src = g_new(guint, (gsize)rings * n), *dst = g_new(guint, (gsize)rings * n);
  for (guint r = 0; r < rings; r++)
    for (guint j = 0; j < n; j++) {
      src[r * n + j] = cp_ring ? gpu_of_rank_c(b, r, j, s, k) : gpu_of_rank(b, j, s, k);
      dst[r * n + j] = cp_ring ? gpu_of_rank_c(b, r, (j + 1) % n, s, k) : gpu_of_rank(b, (j + 1) % n, s, k);
    }
  char key[64];
  g_snprintf(key, sizeof key, "ring%u:%u:%u:%.0f", kind, s, k, bytes);
  *cached = sim_netops_pairs(b->flow->ops, key, src, dst, rings * n,
                             cp_ring ? copies(b, TRUE, TRUE) : copies_c(b, FALSE, TRUE), bytes, NULL);
  g_free(src);
  g_free(dst);
  return *cached;
}

/* --- emitting one item's compute and tensor-parallel all-reduces --- */

/* Makes `op` wait for rank i's chain so far (and an op it must join). */
static void chain_dep(Build *b, guint i, guint op) {
  if (b->prev[i] != G_MAXUINT)
    sim_engine_add_dep(b->e, b->prev[i], op);
  if (b->join[i] != G_MAXUINT) {
    sim_engine_add_dep(b->e, b->join[i], op);
    b->join[i] = G_MAXUINT;
  }
}

static void flush(Build *b, guint s, guint k, const SimOpTag *t, gboolean force) {
  if (b->dry) { /* one rank (coarse items run under the symmetry shortcut) */
    if (b->pending[0] > 0 || force) {
      b->dry_compute += ns(b->pending[0]);
      b->dry_ops++;
      b->pending[0] = 0;
    }
    return;
  }
  for (guint i = 0; i < b->ts; i++) {
    if (b->pending[i] <= 0 && !force)
      continue;
    guint op = sim_engine_add_op1(b->e, ns(b->pending[i]), stream_of(b, i, s, k, STREAM_COMPUTE), t);
    chain_dep(b, i, op);
    b->prev[i] = op;
    b->pending[i] = 0;
    for (guint j = 0; b->pieces && j < b->pending_pieces->len; j++) {
      SimTimelinePiece pc = g_array_index(b->pending_pieces, SimTimelinePiece, j);
      pc.op = op;
      g_array_append_val(b->pieces, pc);
    }
  }
  if (b->pieces)
    g_array_set_size(b->pending_pieces, 0);
}

/* Counts `n` halves of a tensor-parallel all-reduce (2: the all-reduce; 1:
 * a reduce-scatter or an all-gather of the same buffer): a ring all-reduce
 * of b*s*h*2 bytes over t ranks sends 2(t-1)/t of it from each rank, for
 * every replica and context-parallel rank. */
static void count_tp(Build *b, double n) {
  account(b, CAT_TP, b->layer.tp_allreduce_bytes * n * (b->plan->tp - 1) * ((double)b->plan->dp / b->ds) * b->cp);
}

/* A tensor-parallel all-reduce of the layer's output; with sequence
 * parallelism its reduce-scatter and the next all-gather (Korthikanti et al.
 * section 4.2.2: g and g-bar), placed one after the other at the same point
 * of the chain: the sharded element-wise work between them runs in the
 * compute next to it, so the serial chain's time is the same. */
static void tp_allreduce(Build *b, guint s, guint k, const SimOpTag *t) {
  if (b->plan->tp == 1)
    return;
  flush(b, s, k, t, TRUE);
  gboolean sp = b->plan->sequence_parallel;
  const NetCollOp kinds[2] = {sp ? NET_OP_REDUCESCATTER : NET_OP_ALLREDUCE, NET_OP_ALLGATHER};
  guint n = sp ? 2 : 1;
  const SimTime *dur = &b->tp_ns[(s * b->ds + k) * 2];
  if (b->dry) {
    for (guint j = 0; j < n; j++) {
      if (b->flow) /* where it runs inside the coarse op (netops.h) */
        sim_netops_part(b->flow->ops, tp_plan(b, s, k, kinds[j], b->layer.tp_allreduce_bytes),
                        b->dry_compute + b->dry_tp);
      b->dry_tp += dur[j];
    }
    b->dry_ops += n;
    count_tp(b, 2.0);
    return;
  }
  guint streams[b->ts];
  for (guint i = 0; i < b->ts; i++)
    streams[i] = stream_of(b, i, s, k, STREAM_TP);
  SimOpTag at = *t;
  at.category = CAT_TP;
  for (guint j = 0; j < n; j++) {
    guint op = b->flow ? net_op(b, tp_plan(b, s, k, kinds[j], b->layer.tp_allreduce_bytes), streams, NULL, b->ts, &at)
                       : sim_engine_add_op(b->e, dur[j], streams, b->ts, &at);
    for (guint i = 0; i < b->ts; i++) {
      chain_dep(b, i, op);
      b->prev[i] = op;
    }
  }
  count_tp(b, 2.0);
}

/* --- the MoE layer's token communication (sim/moe.h) --- */

/* The GPUs of the groups of stage s that one MoE collective runs on: every
 * expert-parallel group of the stage (MOE_DISPATCH, MOE_COMBINE) or every
 * expert-tensor group, all at once, as the stage's ranks run them
 * together; group after group in out (ep or etp each).  Returns the
 * groups. */
static guint moe_groups(const Build *b, guint s, guint kind, guint *out) {
  const SimPlan *pl = b->plan;
  guint stage = pl->tp * b->cp * pl->dp, n = kind <= MOE_COMBINE ? pl->ep : pl->etp, groups = 0;
  guint ranks[MAX(pl->ep, pl->etp)];
  for (guint local = 0; local < stage; local++) {
    gboolean leader = kind <= MOE_COMBINE ? (local / pl->etp) % pl->ep == 0 : local % pl->etp == 0;
    if (!leader)
      continue;
    if (kind <= MOE_COMBINE)
      sim_moe_ep_ranks(pl, s, local, ranks);
    else
      sim_moe_etp_ranks(pl, s, local, ranks);
    for (guint j = 0; j < n; j++)
      out[groups * n + j] = sim_place(b->cluster, pl->tp * b->cp, ranks[j]);
    groups++;
  }
  return groups;
}

static NetCollOp moe_op(const Build *b, guint kind) {
  if (kind >= MOE_ETP_GATHER)
    return kind == MOE_ETP_GATHER ? NET_OP_ALLGATHER : NET_OP_REDUCESCATTER;
  if (b->plan->moe_allgather)
    return kind == MOE_DISPATCH ? NET_OP_ALLGATHER : NET_OP_REDUCESCATTER;
  return NET_OP_ALLTOALL;
}

static double moe_bytes(const Build *b, guint kind) {
  return kind <= MOE_COMBINE ? b->moe.dispatch_bytes : b->moe.etp_bytes;
}

/* The flow plan of one MoE collective of stage s (every group at once). */
static guint moe_plan(Build *b, guint s, guint kind) {
  guint *cached = &b->moe_plans[s * MOE_N_COMM + kind];
  if (*cached != G_MAXUINT)
    return *cached;
  const SimPlan *pl = b->plan;
  guint n = kind <= MOE_COMBINE ? pl->ep : pl->etp, *gpus = g_new(guint, (gsize)pl->tp * b->cp * pl->dp);
  guint groups = moe_groups(b, s, kind, gpus);
  char key[64];
  g_snprintf(key, sizeof key, "moe%u:%u:%.0f", kind, s, moe_bytes(b, kind));
  *cached = sim_netops_coll_groups(b->flow->ops, key, moe_op(b, kind), gpus, n, groups, 1.0, moe_bytes(b, kind), NULL);
  g_free(gpus);
  return *cached;
}

/* Its time on the analytic network: the slowest group's. */
static double moe_analytic_s(const Build *b, guint s, guint kind) {
  const SimPlan *pl = b->plan;
  guint n = kind <= MOE_COMBINE ? pl->ep : pl->etp, *gpus = g_new(guint, (gsize)pl->tp * b->cp * pl->dp);
  guint groups = moe_groups(b, s, kind, gpus), G = b->cluster->gpus_per_node;
  double worst = 0;
  for (guint g = 0; g < groups; g++) {
    guint nodes = 0, last = G_MAXUINT;
    for (guint j = 0; j < n; j++) { /* a group's ranks increase: one more node at every change */
      nodes += gpus[g * n + j] / G != last;
      last = gpus[g * n + j] / G;
    }
    NetCollOp op = moe_op(b, kind);
    double t = op == NET_OP_ALLTOALL
                   ? model_alltoall_time_s(&b->net, moe_bytes(b, kind), n, nodes)
                   : model_collective_time_s(&b->net, op == NET_OP_ALLGATHER ? MODEL_COLL_ALLGATHER
                                                                              : MODEL_COLL_REDUCESCATTER,
                                             moe_bytes(b, kind), n, nodes, NULL);
    worst = MAX(worst, t);
  }
  g_free(gpus);
  return worst;
}

/* Counts one MoE collective's bytes over every rank of every replica: an
 * all-to-all sends (ep-1)/ep of each rank's buffer, an all-gather or
 * reduce-scatter (n-1)/n of its buffer from each rank. */
static void count_moe(Build *b, guint kind) {
  const SimPlan *pl = b->plan;
  guint n = kind <= MOE_COMBINE ? pl->ep : pl->etp;
  double ranks = (double)pl->tp * b->cp * pl->dp;
  account(b, CAT_EP, moe_bytes(b, kind) * (n - 1) / n * ranks);
}

/* One MoE collective at this point of the chain (as tp_allreduce). */
static void moe_comm(Build *b, guint s, guint k, const SimOpTag *t, guint kind) {
  const SimPlan *pl = b->plan;
  if ((kind <= MOE_COMBINE ? pl->ep : pl->etp) < 2)
    return;
  flush(b, s, k, t, TRUE);
  SimTime dur = b->moe_ns[s * MOE_N_COMM + kind];
  count_moe(b, kind);
  if (b->dry) {
    if (b->flow)
      sim_netops_part(b->flow->ops, moe_plan(b, s, kind), b->dry_compute + b->dry_tp);
    b->dry_tp += dur;
    b->dry_ops++;
    return;
  }
  guint streams[b->ts];
  for (guint i = 0; i < b->ts; i++)
    streams[i] = stream_of(b, i, s, k, STREAM_TP);
  SimOpTag at = *t;
  at.category = CAT_TP;
  guint op = b->flow ? net_op(b, moe_plan(b, s, kind), streams, NULL, b->ts, &at)
                     : sim_engine_add_op(b->e, dur, streams, b->ts, &at);
  for (guint i = 0; i < b->ts; i++) {
    chain_dep(b, i, op);
    b->prev[i] = op;
  }
}

static void add_compute(Build *b, guint part, gint layer, guint pass, double seconds);

/* An MoE layer's pass (models/moe.h): forward, the attention block, its
 * tensor-parallel collectives, layernorm 2, the router and the permute,
 * the dispatch, the experts, the combine, the unpermute and the closing
 * dropout-add; backward the reverse, the combine's gradient going out as
 * the dispatch did. */
static void moe_pass(Build *b, guint s, guint k, const SimOpTag *t, gboolean backward) {
  const ModelLayerCost *a = &b->moe_attn;
  const ModelMoeCost *m = &b->moe;
  gint l = t->layer;
  guint pass = t->pass;
  if (!backward) {
    add_compute(b, SIM_PART_ATTENTION, l, pass, a->fwd.seg_s[0]);
    tp_allreduce(b, s, k, t);
    add_compute(b, SIM_PART_MLP, l, pass, a->fwd.seg_s[1] + m->fwd_route_s);
    moe_comm(b, s, k, t, MOE_DISPATCH);
    moe_comm(b, s, k, t, MOE_ETP_GATHER);
    add_compute(b, SIM_PART_MLP, l, pass, m->fwd_experts_s);
    moe_comm(b, s, k, t, MOE_ETP_SCATTER);
    moe_comm(b, s, k, t, MOE_COMBINE);
    add_compute(b, SIM_PART_RESIDUAL, l, pass, m->fwd_unpermute_s + a->fwd.seg_s[2]);
    return;
  }
  add_compute(b, SIM_PART_MLP, l, pass, a->bwd.seg_s[0] + m->bwd_unpermute_s);
  moe_comm(b, s, k, t, MOE_COMBINE);
  moe_comm(b, s, k, t, MOE_ETP_GATHER);
  add_compute(b, SIM_PART_MLP, l, pass, m->bwd_experts_s);
  moe_comm(b, s, k, t, MOE_ETP_SCATTER);
  moe_comm(b, s, k, t, MOE_DISPATCH);
  add_compute(b, SIM_PART_ATTENTION, l, pass, m->bwd_route_s + a->bwd.seg_s[1]);
  tp_allreduce(b, s, k, t);
  add_compute(b, SIM_PART_LAYERNORM, l, pass, a->bwd.seg_s[2]);
}

/* Compute of `part` (of `layer`, -1: none) in `pass`, into the op the
 * next flush makes; a traced run records it as a piece of that op. */
static void add_compute(Build *b, guint part, gint layer, guint pass, double seconds) {
  for (guint i = 0; i < b->ts; i++)
    b->pending[i] += seconds;
  if (b->pending_pieces) {
    sim_timeline_piece(b->pending_pieces, 0, SIM_ACT_RUN, part, layer, 1, seconds);
    g_array_index(b->pending_pieces, SimTimelinePiece, b->pending_pieces->len - 1).pass = (guint8)pass;
  }
}

/* A layer's pass: compute, all-reduce, compute, all-reduce, compute (the
 * segments of models/layer.h; backward runs the layer in reverse). */
static void emit_pass(Build *b, guint s, guint k, const ModelPass *pass, const SimOpTag *t) {
  static const guint fwd_parts[3] = {SIM_PART_ATTENTION, SIM_PART_MLP, SIM_PART_RESIDUAL},
                     bwd_parts[3] = {SIM_PART_MLP, SIM_PART_ATTENTION, SIM_PART_LAYERNORM};
  const guint *parts = t->pass == PASS_BACKWARD ? bwd_parts : fwd_parts;
  add_compute(b, parts[0], t->layer, t->pass, pass->seg_s[0]);
  tp_allreduce(b, s, k, t);
  add_compute(b, parts[1], t->layer, t->pass, pass->seg_s[1]);
  tp_allreduce(b, s, k, t);
  add_compute(b, parts[2], t->layer, t->pass, pass->seg_s[2]);
}

/* --- context parallelism's ring and overlapped tensor-parallel communication --- */

enum { HOP_KV, HOP_KV_GRAD, HOP_GRAD, HOP_TP_GATHER, HOP_TP_SCATTER };

/* A communication op on the tensor-parallel streams of (s, k) after the op
 * `after` (G_MAXUINT: none) and, with `chain`, after every rank's chain so
 * far: `dur` on the analytic network, a hop's flows (hop_plan, `kind`), or
 * with kind G_MAXUINT the tensor-parallel reduce-scatter. */
static guint side_op(Build *b, guint s, guint k, guint cat, guint kind, double bytes, const SimOpTag *t, guint after,
                     gboolean chain) {
  guint streams[b->ts];
  for (guint i = 0; i < b->ts; i++)
    streams[i] = stream_of(b, i, s, k, STREAM_TP);
  SimOpTag at = *t;
  at.category = (guint16)cat;
  guint op;
  if (b->flow)
    op = net_op(b, kind == G_MAXUINT ? tp_plan(b, s, k, NET_OP_REDUCESCATTER, bytes) : hop_plan(b, s, k, kind, bytes),
                streams, NULL, b->ts, &at);
  else {
    SimTime dur = kind == G_MAXUINT ? b->tp_ns[(s * b->ds + k) * 2] : b->hop_ns[(s * b->ds + k) * 5 + kind];
    op = sim_engine_add_op(b->e, dur, streams, b->ts, &at);
  }
  if (after != G_MAXUINT)
    sim_engine_add_dep(b->e, after, op);
  if (chain)
    for (guint i = 0; i < b->ts; i++)
      chain_dep(b, i, op);
  return op;
}

/* `seconds` of compute of `part` on every rank, after its chain and after
 * `after` (G_MAXUINT: none). */
static void step_compute(Build *b, guint s, guint k, const SimOpTag *t, guint part, double seconds, guint after) {
  add_compute(b, part, t->layer, t->pass, seconds);
  flush(b, s, k, t, TRUE);
  if (after != G_MAXUINT)
    for (guint i = 0; i < b->ts; i++)
      sim_engine_add_dep(b->e, after, b->prev[i]);
}

/* The bytes a hop moves, each rank sending to the next. */
static double hop_bytes(const Build *b, guint kind) {
  switch (kind) {
  case HOP_KV:
  case HOP_GRAD:
    return b->layer.cp_hop_bytes;
  case HOP_KV_GRAD:
    return 2 * b->layer.cp_hop_bytes;
  default: /* a tensor-parallel shard: the all-reduce buffer over t */
    return b->layer.tp_allreduce_bytes / b->plan->tp;
  }
}

/* Counts a context-parallel hop's bytes: one send from each of the t cp
 * ranks of every replica. */
static void count_hop(Build *b, guint kind) {
  account(b, CAT_CP, hop_bytes(b, kind) * ((double)b->cp * b->plan->tp) * ((double)b->plan->dp / b->ds));
}

/* The attention core of `core_s` as ring attention (Liu et al. 2023; Megatron-
 * Core's context parallelism over Transformer Engine's
 * AttnFuncWithCPAndKVP2P): cp steps, each the kernel on the keys and values
 * at hand while the ring passes them on to the next rank, so step j + 1
 * waits for hop j.  Backward, each hop carries the partial key and value
 * gradients too (issued once the step that made them is done) and a last
 * hop takes them home before the QKV GEMMs.  Under a coarse item the same
 * graph is timed in closed form. */
static void cp_ring(Build *b, guint s, guint k, const SimOpTag *t, guint part, double core_s, gboolean backward) {
  guint cp = b->cp;
  flush(b, s, k, t, TRUE); /* the keys and values are ready */
  double step = core_s / cp;
  guint hop = backward ? HOP_KV_GRAD : HOP_KV;
  if (b->dry) {
    const SimTime *h = &b->hop_ns[(s * b->ds + k) * 5];
    SimTime C = ns(step), c_end = 0, h_end = 0;
    for (guint j = 0; j < cp; j++) {
      SimTime start = j == 0 ? 0 : MAX(c_end, h_end); /* step j waits for hop j - 1 */
      /* hop j: after hop j - 1 (backward: and step j - 1, whose gradients it carries) */
      SimTime h_next = j + 1 < cp ? (j == 0 ? 0 : backward ? MAX(h_end, c_end) : h_end) + h[hop] : h_end;
      c_end = start + C;
      h_end = h_next;
      if (j + 1 < cp)
        count_hop(b, hop);
    }
    SimTime end = c_end;
    if (backward) {
      end = MAX(c_end, h_end) + h[HOP_GRAD];
      count_hop(b, HOP_GRAD);
    }
    b->dry_compute += C * cp;
    b->dry_tp += end - C * cp;
    b->dry_ops += 2 * cp - 1 + (backward ? 1 : 0);
    return;
  }
  guint prev_hop = G_MAXUINT;
  for (guint j = 0; j < cp; j++) {
    guint next = G_MAXUINT;
    if (j + 1 < cp) {
      next = side_op(b, s, k, CAT_CP, hop, hop_bytes(b, hop), t, prev_hop, j == 0 || backward);
      count_hop(b, hop);
    }
    step_compute(b, s, k, t, part, step, prev_hop);
    prev_hop = next;
  }
  if (backward) {
    guint home = side_op(b, s, k, CAT_CP, HOP_GRAD, hop_bytes(b, HOP_GRAD), t, G_MAXUINT, TRUE);
    count_hop(b, HOP_GRAD);
    for (guint i = 0; i < b->ts; i++)
      b->prev[i] = home;
  }
}

/* A GEMM of `gemm_s` with its tensor-parallel communication overlapped
 * (Transformer Engine's userbuffers, Megatron-Core's --tp-comm-overlap):
 * an all-gather that feeds it or a reduce-scatter of its partial sums is a
 * ring of t - 1 hops pipelined with t chunks of the GEMM, each chunk
 * starting once its rows have arrived (gather) or each hop once its chunk
 * is done (scatter); the backward's reduce-scatter of an input gradient
 * runs whole beside the weight-gradient GEMM.  The copies run on the
 * copy engines: the GEMM's rate is taken as unchanged. */
static void tp_overlapped(Build *b, guint s, guint k, const SimOpTag *t, guint part, double gemm_s, ModelTpGemm kind) {
  guint n = b->plan->tp;
  count_tp(b, 1.0); /* an all-gather or a reduce-scatter, however it is cut */
  flush(b, s, k, t, TRUE);
  double chunk = gemm_s / n;
  if (b->dry) {
    const SimTime *h = &b->hop_ns[(s * b->ds + k) * 5];
    SimTime g = ns(chunk), end = 0;
    if (kind == MODEL_TP_GEMM_GATHER_FEEDS) {
      SimTime g_end = g;
      for (guint j = 1; j < n; j++)
        g_end = MAX(g_end, (SimTime)j * h[HOP_TP_GATHER]) + g;
      end = g_end;
      b->dry_ops += 2 * n - 1;
    } else if (kind == MODEL_TP_GEMM_SCATTER_AFTER) {
      SimTime r_end = 0;
      for (guint j = 0; j + 1 < n; j++)
        r_end = MAX((SimTime)(j + 1) * g, r_end) + h[HOP_TP_SCATTER];
      end = MAX((SimTime)n * g, r_end);
      b->dry_ops += 2 * n - 1;
    } else {
      g = ns(gemm_s);
      end = MAX(g, b->tp_ns[(s * b->ds + k) * 2]);
      b->dry_ops += 2;
      n = 1;
    }
    b->dry_compute += g * n;
    b->dry_tp += end - g * n;
    return;
  }
  if (kind == MODEL_TP_GEMM_SCATTER_BESIDE) {
    guint rs = side_op(b, s, k, CAT_TP, G_MAXUINT, b->layer.tp_allreduce_bytes, t, G_MAXUINT, TRUE);
    step_compute(b, s, k, t, part, gemm_s, G_MAXUINT);
    for (guint i = 0; i < b->ts; i++)
      b->join[i] = rs;
    return;
  }
  guint hop = kind == MODEL_TP_GEMM_GATHER_FEEDS ? HOP_TP_GATHER : HOP_TP_SCATTER, prev_hop = G_MAXUINT;
  for (guint j = 0; j < n; j++) {
    if (kind == MODEL_TP_GEMM_GATHER_FEEDS) {
      guint next = G_MAXUINT;
      if (j + 1 < n) { /* rows for chunk j + 1, on their way while chunk j runs */
        next = side_op(b, s, k, CAT_TP, hop, hop_bytes(b, hop), t, prev_hop, j == 0);
      }
      step_compute(b, s, k, t, part, chunk, prev_hop);
      prev_hop = next;
    } else {
      step_compute(b, s, k, t, part, chunk, G_MAXUINT);
      if (j + 1 < n) { /* chunk j's partial sums on to the next rank */
        prev_hop = side_op(b, s, k, CAT_TP, hop, hop_bytes(b, hop), t, G_MAXUINT, FALSE);
        for (guint i = 0; i < b->ts; i++)
          sim_engine_add_dep(b->e, b->prev[i], prev_hop);
      }
    }
  }
  if (kind == MODEL_TP_GEMM_SCATTER_AFTER)
    for (guint i = 0; i < b->ts; i++)
      b->join[i] = prev_hop;
}

/* A pass whose communication is not only at its two all-reduce points: the
 * ring around its attention core (context parallelism) and/or its
 * tensor-parallel communication beside its four GEMMs (--tp-comm-overlap).
 * The compute between them is cut from the pass's segments by position. */
static void emit_pass_marked(Build *b, guint s, guint k, const ModelPass *pass, const SimOpTag *t, gboolean ring) {
  static const guint fwd_parts[3] = {SIM_PART_ATTENTION, SIM_PART_MLP, SIM_PART_RESIDUAL},
                     bwd_parts[3] = {SIM_PART_MLP, SIM_PART_ATTENTION, SIM_PART_LAYERNORM};
  const guint *parts = t->pass == PASS_BACKWARD ? bwd_parts : fwd_parts;
  gboolean backward = t->pass == PASS_BACKWARD;
  double base[4] = {0, pass->seg_s[0], pass->seg_s[0] + pass->seg_s[1], pass->seg_s[0] + pass->seg_s[1] + pass->seg_s[2]};
  enum { MARK_ALLREDUCE = 4, MARK_RING = 5 };
  typedef struct {
    double at, len;
    guint what, seg;
  } Mark;
  Mark marks[7];
  guint n = 0;
  if (b->plan->tp_comm_overlap)
    for (guint j = 0; j < 4; j++)
      marks[n++] = (Mark){base[pass->tp_gemm[j].seg] + pass->tp_gemm[j].at_s, pass->tp_gemm[j].s, j,
                                      pass->tp_gemm[j].seg};
  else
    for (guint j = 1; j <= 2; j++)
      marks[n++] = (Mark){base[j], 0, MARK_ALLREDUCE, j - 1};
  if (ring)
    marks[n++] = (Mark){base[pass->core.seg] + pass->core.at_s, pass->core.s, MARK_RING, pass->core.seg};
  for (guint j = 1; j < n; j++) /* in pass order */
    for (guint q = j; q > 0 && marks[q].at < marks[q - 1].at; q--) {
      Mark x = marks[q];
      marks[q] = marks[q - 1];
      marks[q - 1] = x;
    }
  double cursor = 0;
  for (guint j = 0; j <= n; j++) {
    double upto = j < n ? marks[j].at : base[3];
    for (guint g = 0; g < 3; g++) { /* the compute up to the mark, by segment */
      double lo = MAX(cursor, base[g]), hi = MIN(upto, base[g + 1]);
      if (hi > lo)
        add_compute(b, parts[g], t->layer, t->pass, hi - lo);
    }
    if (j == n)
      break;
    if (marks[j].what == MARK_ALLREDUCE)
      tp_allreduce(b, s, k, t);
    else if (marks[j].what == MARK_RING)
      cp_ring(b, s, k, t, parts[marks[j].seg], marks[j].len, backward);
    else
      tp_overlapped(b, s, k, t, parts[marks[j].seg], marks[j].len, model_tp_gemm_kind(backward, marks[j].what));
    cursor = MAX(cursor, marks[j].at + marks[j].len);
  }
}

/* A layer's pass, marked where it has to be (emit_pass_marked). */
static void emit_layer_pass(Build *b, guint s, guint k, const ModelPass *pass, const SimOpTag *t) {
  if (b->cp > 1 || b->plan->tp_comm_overlap)
    emit_pass_marked(b, s, k, pass, t, b->cp > 1);
  else
    emit_pass(b, s, k, pass, t);
}

enum { DP_ALL, DP_SHARD, DP_REPLICAS };
static guint dp_collective_g(Build *b, NetCollOp kind, guint group, guint i, guint s, double bytes, const guint *deps,
                             guint n_deps, const SimOpTag *t);

/* FSDP2 (torch.distributed.fsdp.fully_shard, as torchtitan applies it per
 * transformer block and to the root module: torchtitan/models/llama3/infra/
 * parallelize.py, apply_fsdp): the bf16 parameters of a block all-gathered
 * over its shard group before the block runs.  The all-gathers run on their
 * own stream and the CPU issues the next block's while the current one
 * computes, but FSDP2 lets at most two blocks' gathered copies exist (its
 * copy-out of block l + 2 waits for block l's to be freed; PyTorch issue
 * 114299, "memory management"), so the gather of the block two ahead waits
 * for the end of this one.  `params`: the block's (and the root's, with the
 * stage's first block) parameters on this tensor rank. */
static void fsdp_gather(Build *b, guint s, guint k, guint chunk, gint layer, gboolean forward, double params,
                        guint after, guint *out) {
  for (guint i = 0; i < b->ts; i++) {
    SimOpTag t = tag(CAT_DP, forward ? PASS_FORWARD : PASS_BACKWARD, s, chunk, 0, layer);
    guint dep = i == 0 ? after : G_MAXUINT;
    out[i] = dp_collective_g(b, NET_OP_ALLGATHER, DP_SHARD, i, s, 2.0 * params, &dep, 1, &t);
  }
  if (s == 0 && k == 0) {
    b->shard_gathers++;
    b->shard_gather_bytes += 2.0 * params;
  }
  b->bytes[CAT_DP] += 2.0 * params * (b->shard - 1) * (b->dpc / b->shard) * b->plan->tp;
}

/* FSDP2's reduce-scatter of a block's gradients over its shard group, in
 * the reduce dtype (torchtitan's mixed_precision_reduce, fp32 by default),
 * and under HSDP the all-reduce of each shard across the R replicas. */
static void fsdp_reduce(Build *b, guint s, guint k, guint chunk, gint layer, double params, guint i, guint after) {
  const SimPlan *pl = b->plan;
  double bytes = (pl->fsdp_reduce_fp32 ? 4.0 : 2.0) * params;
  SimOpTag t = tag(CAT_DP, PASS_OTHER, s, chunk, 0, layer);
  guint op = dp_collective_g(b, NET_OP_REDUCESCATTER, DP_SHARD, i, s, bytes, &after, 1, &t);
  guint R = b->dpc / b->shard;
  if (R > 1)
    op = dp_collective_g(b, NET_OP_ALLREDUCE, DP_REPLICAS, i, s, bytes / b->shard, &op, 1, &t);
  g_array_append_val(b->fsdp_rs[s * b->ts + i], op);
  if (s == 0 && k == 0 && i == 0) {
    b->shard_reductions += R > 1 ? 2 : 1;
    b->shard_reduce_bytes += bytes + (R > 1 ? bytes / b->shard : 0);
  }
  if (i == 0)
    b->bytes[CAT_DP] += (bytes * (b->shard - 1) * R + (R > 1 ? 2.0 * bytes / b->shard * (R - 1) * b->shard : 0)) *
                        pl->tp;
}

static void emit_item(Build *b, guint s, guint k, guint idx) {
  const SimPlan *pl = b->plan;
  SimItem it = g_array_index(b->order[s], SimItem, idx);
  guint vs = sim_plan_vstage(pl, s, it.chunk, it.microbatch), last_vs = b->route - 1;
  for (guint i = 0; i < b->ts; i++) {
    b->pending[i] = 0;
    b->prev[i] = G_MAXUINT;
    b->join[i] = G_MAXUINT;
  }
  /* The item's first op must follow the previous item's last op on this GPU:
   * stream order does that for compute; explicit deps keep all-reduces in
   * line too. */
  if (idx > 0)
    for (guint i = 0; i < b->ts; i++)
      b->prev[i] = b->items[((k * b->p + s) * b->n_items + idx - 1) * b->ts + i].last;
  guint first_op = sim_engine_n_ops(b->e);
  guint gi = (k * b->p + s) * b->n_items + idx;
  b->cur_item = gi;
  if (b->item_lo)
    b->item_lo[gi] = first_op;
  SimOpTag t = tag(CAT_COMPUTE,
                   it.forward                        ? PASS_FORWARD
                   : it.grad == SIM_GRAD_WEIGHT      ? PASS_WEIGHT
                                                     : PASS_BACKWARD,
                   s, it.chunk, it.microbatch, -1);
  /* the item that ends the chunk's last backward: torch DDP's buckets are ready */
  gboolean last_mb = idx == b->last_bwd[s * b->v + it.chunk];
  /* Coarse: the item's ops form one chain on the compute and TP streams,
   * each starting as the one before ends (nothing else runs on those
   * streams, the all-reduces have fixed durations), so one op of their
   * summed integer durations starts and ends exactly when the chain would.
   * Not where torch DDP hangs a bucket's all-reduce on a layer inside it. */
  gboolean gathered = pl->overlap_param_gather && it.forward && it.microbatch == 0; /* waits for its parameters */
  /* FSDP2: gathered for every forward without pipelining (resharded after
   * each backward), else for the first microbatch's (torch's pipelining
   * keeps them between microbatches), and again for every backward when
   * resharded after forward; gradients reduced after every backward
   * without pipelining (torchtitan's gradient accumulation), after the last
   * microbatch's with it (torch.distributed.pipelining's stage turns
   * FSDP2's gradient sync off but for the last backward) */
  gboolean fsdp = pl->fsdp && b->dpc > 1;
  gboolean fsdp_g = fsdp && (it.forward ? it.microbatch == 0 || pl->reshard_after_forward || b->p == 1
                                        : pl->reshard_after_forward);
  gboolean fsdp_rs = fsdp && !it.forward && (last_mb || b->p == 1);
  guint64 fsdp_layer = fsdp ? model_layer_local_params(&pl->model, pl->tp) : 0;
  guint64 fsdp_root = fsdp && it.chunk == 0 ? model_stage_params(&pl->model, pl->tp, b->p, s, stage_layers(b, s)) -
                                                  fsdp_layer * stage_layers(b, s)
                                            : 0;
  guint nl = chunk_layers(b, s, it.chunk);
  guint *fsdp_ops = fsdp_g ? g_new(guint, (gsize)(nl + 2) * b->ts) : NULL;
  gathered = gathered || fsdp_g || fsdp_rs;
  b->dry = b->coarse && !(pl->ddp == SIM_DDP_TORCH && last_mb && b->dpc > 1 && !it.forward) && !gathered;
  b->dry_compute = b->dry_tp = 0;
  b->dry_ops = 0;
  if (fsdp_g) /* the first two blocks of the item (the root's parameters with the first forward) */
    for (guint j = 0; j < MIN(2u, nl); j++) {
      guint l = it.forward ? j : nl - 1 - j;
      fsdp_gather(b, s, k, it.chunk, (gint)(chunk_first(b, s, it.chunk) + l), it.forward,
                  (double)fsdp_layer + (it.forward && j == 0 ? (double)fsdp_root : 0), b->prev[0], fsdp_ops + l * b->ts);
    }
  if (pl->stage_times) {
    /* a microbatch's pass over a whole stage takes the time given; a chunk
     * its share of it */
    double share = (double)b->p / b->route;
    double sec = it.forward                   ? pl->stage_f_s
                 : it.grad == SIM_GRAD_INPUT  ? pl->stage_b_s
                 : it.grad == SIM_GRAD_WEIGHT ? pl->stage_w_s
                                              : pl->stage_b_s + pl->stage_w_s;
    add_compute(b, SIM_PART_LAYERS, -1, t.pass, sec * share);
  } else if (it.forward) {
    if (vs == 0)
      add_compute(b, SIM_PART_EMBEDDING, -1, PASS_FORWARD, b->emb_fwd);
    for (guint l = 0; l < chunk_layers(b, s, it.chunk); l++) {
      if (gathered && !fsdp) { /* the layer's first forward waits for its parameters' all-gather */
        flush(b, s, k, &t, FALSE);
        for (guint i = 0; i < b->ts; i++)
          b->join[i] = b->param_gather[((s * b->v + it.chunk) * b->lmax + l) * b->ts + i];
      }
      if (fsdp_g) {
        flush(b, s, k, &t, FALSE);
        for (guint i = 0; i < b->ts; i++)
          b->join[i] = fsdp_ops[l * b->ts + i];
      }
      t.layer = (gint32)(chunk_first(b, s, it.chunk) + l);
      if (b->moe_layer && b->moe_layer[(s * b->v + it.chunk) * b->lmax + l])
        moe_pass(b, s, k, &t, FALSE);
      else
        emit_layer_pass(b, s, k, &b->layer.fwd, &t);
      if (fsdp_g && l + 2 < nl) { /* the block two ahead, once this one's copy is freed */
        flush(b, s, k, &t, TRUE);
        fsdp_gather(b, s, k, it.chunk, t.layer + 2, TRUE, (double)fsdp_layer, b->prev[0],
                    fsdp_ops + (l + 2) * b->ts);
      }
    }
    if (vs == last_vs)
      add_compute(b, SIM_PART_HEAD, -1, PASS_FORWARD, b->head_fwd);
  } else if (it.grad == SIM_GRAD_WEIGHT) {
    /* the weight-gradient GEMMs, layer by layer in backward order, the
     * logit layer's first and the embedding's last (all of its backward is
     * its weight gradient) */
    if (vs == last_vs)
      add_compute(b, SIM_PART_HEAD, -1, PASS_WEIGHT, b->head_w);
    for (guint l = chunk_layers(b, s, it.chunk); l-- > 0;) {
      t.layer = (gint32)(chunk_first(b, s, it.chunk) + l);
      add_compute(b, SIM_PART_MLP, t.layer, PASS_WEIGHT, b->layer_w);
      if (vs == 0 && l == 0)
        add_compute(b, SIM_PART_EMBEDDING, -1, PASS_WEIGHT, b->emb_bwd);
      if (pl->ddp == SIM_DDP_TORCH && last_mb && b->dpc > 1) {
        flush(b, s, k, &t, TRUE);
        for (guint i = 0; i < b->ts; i++)
          b->grad_ready[(((k * b->p + s) * b->v + it.chunk) * b->lmax + l) * b->ts + i] = b->prev[i];
      }
    }
  } else {
    gboolean input = it.grad == SIM_GRAD_INPUT;
    if (vs == last_vs)
      add_compute(b, SIM_PART_HEAD, -1, PASS_BACKWARD, input ? b->head_bwd - b->head_w : b->head_bwd);
    for (guint l = chunk_layers(b, s, it.chunk); l-- > 0;) {
      t.layer = (gint32)(chunk_first(b, s, it.chunk) + l);
      if (fsdp_g) { /* FSDP2's pre-backward hook: the block gathered again, before its recomputation */
        flush(b, s, k, &t, FALSE);
        for (guint i = 0; i < b->ts; i++)
          b->join[i] = fsdp_ops[l * b->ts + i];
      }
      gboolean moe = b->moe_layer && b->moe_layer[(s * b->v + it.chunk) * b->lmax + l];
      if (pl->recompute) {
        t.pass = PASS_RECOMPUTE;
        if (moe)
          moe_pass(b, s, k, &t, FALSE);
        else
          emit_layer_pass(b, s, k, &b->layer.fwd, &t);
        t.pass = PASS_BACKWARD;
      } else if (pl->selective && b->cp > 1) { /* the attention core again, with its ring */
        t.pass = PASS_RECOMPUTE;
        cp_ring(b, s, k, &t, SIM_PART_ATTENTION, b->layer.core.seg_s[0], FALSE);
        t.pass = PASS_BACKWARD;
      } else if (pl->selective) /* the attention core again, no communication */
        add_compute(b, SIM_PART_ATTENTION, t.layer, PASS_RECOMPUTE, b->layer.core.seg_s[0]);
      if (moe)
        moe_pass(b, s, k, &t, TRUE);
      else
        emit_layer_pass(b, s, k, input ? &b->bwd_in : &b->layer.bwd, &t);
      if (vs == 0 && l == 0 && !input)
        add_compute(b, SIM_PART_EMBEDDING, -1, PASS_BACKWARD, b->emb_bwd);
      if (pl->ddp == SIM_DDP_TORCH && last_mb && b->dpc > 1 && !input) {
        flush(b, s, k, &t, TRUE);
        for (guint i = 0; i < b->ts; i++)
          b->grad_ready[(((k * b->p + s) * b->v + it.chunk) * b->lmax + l) * b->ts + i] = b->prev[i];
      }
      if (fsdp_rs) { /* the block's gradients, reduced as its backward ends */
        flush(b, s, k, &t, TRUE);
        if (k == 0)
          for (guint i = 0; i < b->ts; i++)
            fsdp_reduce(b, s, k, it.chunk, t.layer, (double)fsdp_layer, i, b->prev[i]);
      }
      if (fsdp_g && l >= 2) { /* the block two behind in backward order, once this one's copy is freed */
        flush(b, s, k, &t, TRUE);
        fsdp_gather(b, s, k, it.chunk, t.layer - 2, FALSE, (double)fsdp_layer, b->prev[0], fsdp_ops + (l - 2) * b->ts);
      }
    }
  }
  flush(b, s, k, &t, FALSE);
  g_free(fsdp_ops);
  if (b->dry) {
    b->dry = FALSE;
    t.layer = -1;
    guint op = sim_engine_add_op1(b->e, b->dry_compute + b->dry_tp, stream_of(b, 0, s, k, STREAM_COMPUTE), &t);
    if (b->prev[0] != G_MAXUINT)
      sim_engine_add_dep(b->e, b->prev[0], op);
    if (b->flow)
      sim_netops_parts_to(b->flow->ops, op);
    if (b->dry_tp > 0) {
      if (b->tp_part->len <= op)
        g_array_set_size(b->tp_part, MAX(op + 1, 2 * b->tp_part->len));
      g_array_index(b->tp_part, SimTime, op) = b->dry_tp;
    }
    b->logical_extra += MAX(b->dry_ops, 1u) - 1; /* an item with no work is one op too */
    if (b->extra) {
      g_array_set_size(b->extra, op + 1);
      g_array_index(b->extra, guint, op) = MAX(b->dry_ops, 1u) - 1;
    }
    ItemOps *io = &b->items[(k * b->p + s) * b->n_items + idx];
    io->first = io->last = op;
    if (b->item_hi)
      b->item_hi[gi] = sim_engine_n_ops(b->e);
    return;
  }
  for (guint i = 0; i < b->ts; i++)
    if (b->join[i] != G_MAXUINT) { /* the item ends when what it waits for has */
      flush(b, s, k, &t, TRUE);
      break;
    }
  if (sim_engine_n_ops(b->e) == first_op) /* an item with no work still needs an op */
    flush(b, s, k, &t, TRUE);
  if (b->item_hi)
    b->item_hi[gi] = sim_engine_n_ops(b->e);
  for (guint i = 0; i < b->ts; i++) {
    ItemOps *io = &b->items[((k * b->p + s) * b->n_items + idx) * b->ts + i];
    io->last = b->prev[i];
  }
  /* The first compute op of the item for rank i is the first op issued on
   * its compute stream after first_op; ops are issued rank by rank. */
  for (guint i = 0; i < b->ts; i++) {
    ItemOps *io = &b->items[((k * b->p + s) * b->n_items + idx) * b->ts + i];
    guint stream = stream_of(b, i, s, k, STREAM_COMPUTE);
    for (guint op = first_op;; op++) {
      const guint *st = sim_engine_op_streams(b->e, op);
      if (sim_engine_op_n_streams(b->e, op) == 1 && st[0] == stream) {
        io->first = op;
        break;
      }
    }
  }
}

/* --- pipeline transfers --- */

/* An item's slot in the position table: the whole backward or its input
 * gradient 0, the forward 1, the weight gradient 2. */
static guint slot_of(SimItem it) { return it.forward ? 1 : it.grad == SIM_GRAD_WEIGHT ? 2 : 0; }
static guint item_index(const Build *b, guint s, guint chunk, guint mb, gboolean fwd) {
  return b->position[s][((guint64)chunk * b->m + mb) * 3 + (fwd ? 1 : 0)];
}

/* The model as one rank sees it: context parallelism gives it s/cp of
 * every sequence's tokens. */
static ModelShape rank_shape(const SimPlan *pl) {
  ModelShape local = pl->model;
  local.seq_len /= sim_plan_cp(pl);
  return local;
}

/* A microbatch's activation between stages on one rank: b (s/cp) h fp16. */
static double activation_bytes(const SimPlan *pl) {
  return 2.0 * pl->micro_batch * (pl->model.seq_len / sim_plan_cp(pl)) * pl->model.hidden;
}

/* Bytes each tensor-parallel rank sends a pipeline hop: the whole
 * activation, or its 1/t under scatter/gather or sequence parallelism. */
static double pp_bytes_per_rank(const SimPlan *pl) {
  double full = activation_bytes(pl);
  return pl->tp > 1 && (pl->scatter_gather || pl->sequence_parallel) ? full / pl->tp : full;
}

static void emit_transfers_of(Build *b, guint s, guint k, guint idx);

static void emit_transfers(Build *b, guint s, guint k, guint idx) {
  guint gi = (k * b->p + s) * b->n_items + idx;
  b->cur_item = gi | STEADY_XFER;
  if (b->xfer_lo)
    b->xfer_lo[gi] = sim_engine_n_ops(b->e);
  emit_transfers_of(b, s, k, idx);
  if (b->xfer_hi)
    b->xfer_hi[gi] = sim_engine_n_ops(b->e);
  b->cur_item = G_MAXUINT;
}

static void emit_transfers_of(Build *b, guint s, guint k, guint idx) {
  const SimPlan *pl = b->plan;
  SimItem it = g_array_index(b->order[s], SimItem, idx);
  guint vs = sim_plan_vstage(pl, s, it.chunk, it.microbatch), last_vs = b->route - 1;
  if (it.grad == SIM_GRAD_WEIGHT || (it.forward && vs == last_vs) || (!it.forward && vs == 0))
    return;
  guint dvs = it.forward ? vs + 1 : vs - 1, ds_, dc;
  sim_plan_place(pl, dvs, it.microbatch, &ds_, &dc);
  guint didx = item_index(b, ds_, dc, it.microbatch, it.forward);
  if (ds_ == s) { /* the next virtual stage on the same GPU (the V's turn): no transfer */
    for (guint i = 0; i < b->ts; i++)
      sim_engine_add_dep(b->e, b->items[((k * b->p + s) * b->n_items + idx) * b->ts + i].last,
                         b->items[((k * b->p + s) * b->n_items + didx) * b->ts + i].first);
    return;
  }
  double full = activation_bytes(pl);
  /* scatter/gather: each rank sends 1/t and the receivers all-gather; with
   * sequence parallelism each rank's activation is already its s/t shard,
   * sent as it is and kept sharded */
  gboolean sg = pl->scatter_gather && pl->tp > 1;
  double per_rank = pp_bytes_per_rank(pl);
  SimOpTag t = tag(CAT_PP, it.forward ? PASS_FORWARD : PASS_BACKWARD, s, it.chunk, it.microbatch, -1);
  guint xfer[b->ts];
  for (guint i = 0; i < b->ts; i++) {
    gboolean same = node_of_rank(b, i, s, k) == node_of_rank(b, i, ds_, k);
    guint streams[2] = {stream_of(b, i, s, k, STREAM_PP_SEND), stream_of(b, i, ds_, k, STREAM_PP_RECV)};
    guint64 pos[2] = {2ull * idx, 2ull * didx};
    /* Megatron's blocking point-to-point calls hold both ends in schedule
     * order; the other schedules post their sends and receives ahead
     * (torch.distributed.pipelining, DualPipe: batched isend/irecv), so a
     * transfer holds its sender's stream, in the sender's order, and the
     * receiver waits for it alone */
    guint nst = b->blocking ? 2 : 1;
    if (b->flow) {
      guint *plan = &b->pp_plans[((k * b->p + s) * b->ts + i) * 2 + it.forward];
      if (*plan == G_MAXUINT) {
        char key[64];
        g_snprintf(key, sizeof key, "pp:%u:%u:%u:%u", s, ds_, i, k);
        *plan = p2p_plan(b, key, gpu_of_rank(b, i, s, k), gpu_of_rank(b, i, ds_, k), copies_c(b, TRUE, TRUE),
                         per_rank, b->flow->side_pp);
      }
      xfer[i] = net_op(b, *plan, streams, pos, nst, &t);
    } else {
      ModelNet net = b->net;
      if (!same && pl->stragglers.n_link) { /* a send runs at the slower of its two NICs (--slow-link) */
        double f = 1;
        for (guint kk = b->ds == pl->dp ? k : 0; kk < (b->ds == pl->dp ? k + 1 : pl->dp); kk++)
          for (guint ii = b->ts == pl->tp ? i : 0; ii < (b->ts == pl->tp ? i + 1 : pl->tp); ii++)
            f = MIN(f, MIN(nic_factor(b, gpu_of_rank(b, ii, s, kk)), nic_factor(b, gpu_of_rank(b, ii, ds_, kk))));
        net.hw.nic_bw *= f;
      }
      double secs = pl->stage_times ? pl->stage_comm_s : model_p2p_time_s(&net, per_rank, same);
      xfer[i] = sim_engine_add_op_at(b->e, ns(secs), streams, pos, nst, &t);
    }
    if (nst == 1) {
      if (b->pp_to->len <= xfer[i])
        g_array_set_size(b->pp_to, MAX(xfer[i] + 1, 2 * b->pp_to->len));
      g_array_index(b->pp_to, guint, xfer[i]) = ds_ + 1;
    }
    sim_engine_add_dep(b->e, b->items[((k * b->p + s) * b->n_items + idx) * b->ts + i].last, xfer[i]);
    /* Megatron's point-to-point calls are blocking (batch_isend_irecv, then
     * wait): the sender goes on only once its send is done.  (The receiver's
     * side of the rendezvous is its receive-stream order.) */
    if (b->blocking && idx + 1 < b->len[s])
      sim_engine_add_dep(b->e, xfer[i], b->items[((k * b->p + s) * b->n_items + idx + 1) * b->ts + i].first);
  }
  account(b, CAT_PP, per_rank * pl->tp * pl->dp / b->ds * b->cp);
  const ItemOps *dst = &b->items[((k * b->p + ds_) * b->n_items + didx) * b->ts];
  guint gather = G_MAXUINT;
  if (sg) {
    /* Scatter/gather (SC21 section 4.1): each rank sent b*s*h/t; the
     * receiving tensor-parallel group rebuilds the tensor over NVLink. */
    guint streams[b->ts];
    guint64 pos[b->ts];
    for (guint i = 0; i < b->ts; i++) {
      streams[i] = stream_of(b, i, ds_, k, STREAM_PP_RECV);
      pos[i] = 2ull * didx + 1;
    }
    t.category = CAT_PP_GATHER;
    if (b->flow)
      gather = net_op(b, tp_plan(b, ds_, k, NET_OP_ALLGATHER, full), streams, pos, b->ts, &t);
    else {
      double ag = model_collective_time_s(&b->net, MODEL_COLL_ALLGATHER, full, pl->tp,
                                          tp_group_nodes(b, ds_, k), NULL);
      gather = sim_engine_add_op_at(b->e, ns(ag), streams, pos, b->ts, &t);
    }
    for (guint i = 0; i < b->ts; i++) {
      sim_engine_add_dep(b->e, xfer[i], gather);
      sim_engine_add_dep(b->e, gather, dst[i].first);
    }
    account(b, CAT_PP_GATHER, full * (pl->tp - 1) * ((double)pl->dp / b->ds) * b->cp);
  } else
    for (guint i = 0; i < b->ts; i++)
      sim_engine_add_dep(b->e, xfer[i], dst[i].first);
  /* DualPipe's F&B: the backward's input holds up the forward paired with it */
  if (!it.forward && didx > 0 && g_array_index(b->order[ds_], SimItem, didx - 1).paired) {
    const ItemOps *pair = &b->items[((k * b->p + ds_) * b->n_items + didx - 1) * b->ts];
    for (guint i = 0; i < b->ts; i++)
      sim_engine_add_dep(b->e, sg ? gather : xfer[i], pair[i].first);
  }
}

/* --- data-parallel gradient all-reduce and the optimizer --- */

/* Nodes spanned by a group of stage s: the tensor-parallel group of replica
 * `fixed` (over_tp) or the data-parallel group of tensor rank `fixed`.  Its
 * ranks increase along the group, so their nodes never decrease: one more
 * node at every change. */
static guint group_nodes(const Build *b, guint s, guint fixed, gboolean over_tp) {
  guint n = over_tp ? b->plan->tp : b->dpc, count = 0, last = G_MAXUINT;
  for (guint j = 0; j < n; j++) {
    guint node = over_tp ? node_of_rank(b, j, s, fixed)
                         : gpu_of_rank_c(b, fixed, j % b->cp, s, j / b->cp) / b->cluster->gpus_per_node;
    count += node != last;
    last = node;
  }
  return count;
}

static guint dp_group_nodes(const Build *b, guint i, guint s) { return group_nodes(b, s, i, FALSE); }
static guint tp_group_nodes(const Build *b, guint s, guint k) { return group_nodes(b, s, k, TRUE); }

/* The symmetry shortcut is exact only when every tensor-parallel group,
 * every data-parallel group and every pipeline hop sees the same node
 * layout as the one simulated (rank 0, replica 0), stage by stage. */
static gboolean placement_uniform(const Build *b) {
  const SimPlan *pl = b->plan;
  for (guint s = 0; s < b->p; s++) {
    guint dp0 = dp_group_nodes(b, 0, s);
    for (guint i = 1; i < pl->tp; i++)
      if (dp_group_nodes(b, i, s) != dp0)
        return FALSE;
    guint tp0 = tp_group_nodes(b, s, 0);
    for (guint k = 0; k < pl->dp; k++) {
      if (k > 0 && tp_group_nodes(b, s, k) != tp0)
        return FALSE;
      if (s + 1 < b->p) {
        gboolean same0 = node_of_rank(b, 0, s, 0) == node_of_rank(b, 0, s + 1, 0);
        for (guint i = 0; i < pl->tp; i++)
          if ((node_of_rank(b, i, s, k) == node_of_rank(b, i, s + 1, k)) != same0)
            return FALSE;
      }
    }
  }
  return TRUE;
}

/* Which data-parallel ranks a collective spans: all d x cp; FSDP2's shard
 * group (the first `shard` of them, consecutive as torchtitan's mesh puts
 * dp_shard inside dp_replicate); or one rank of each of the R replicas
 * (DP_ALL, DP_SHARD, DP_REPLICAS). */

static guint dp_group_rank(const Build *b, guint group, guint j) {
  return group == DP_REPLICAS ? j * b->shard : j;
}

static guint dp_group_size(const Build *b, guint group) {
  return group == DP_ALL ? b->dpc : group == DP_SHARD ? b->shard : b->dpc / b->shard;
}

static guint dp_collective_g(Build *b, NetCollOp kind, guint group, guint i, guint s, double bytes, const guint *deps,
                             guint n_deps, const SimOpTag *t) {
  guint n = dp_group_size(b, group);
  guint nodes = 0, last = G_MAXUINT;
  for (guint j = 0; j < n; j++) { /* ranks increase along the group: one more node at every change */
    guint r = dp_group_rank(b, group, j);
    guint node = gpu_of_rank_c(b, i, r % b->cp, s, r / b->cp) / b->cluster->gpus_per_node;
    nodes += node != last;
    last = node;
  }
  guint streams[b->ds];
  for (guint k = 0; k < b->ds; k++)
    streams[k] = stream_of(b, i, s, k, STREAM_DP);
  guint op;
  if (b->flow) {
    char key[64];
    if (kind == NET_OP_ALLREDUCE && group == DP_ALL) /* the key every all-reduce plan had */
      g_snprintf(key, sizeof key, "dp:%u:%u:%.0f", s, i, bytes);
    else if (group == DP_ALL)
      g_snprintf(key, sizeof key, "dp%d:%u:%u:%.0f", (int)kind, s, i, bytes);
    else
      g_snprintf(key, sizeof key, "dp%d:g%u:%u:%u:%.0f", (int)kind, group, s, i, bytes);
    guint gpus[n];
    for (guint j = 0; j < n; j++) {
      guint r = dp_group_rank(b, group, j);
      gpus[j] = gpu_of_rank_c(b, i, r % b->cp, s, r / b->cp);
    }
    /* the other groups run the same collective at once on their own GPUs */
    double copies_g = copies(b, TRUE, FALSE) * ((double)b->dpc / n);
    op = net_op(b, coll_plan(b, key, kind, gpus, n, copies_g, bytes, b->flow->side_dp), streams, NULL, b->ds, t);
  } else {
    ModelCollOp coll = kind == NET_OP_REDUCESCATTER ? MODEL_COLL_REDUCESCATTER
                     : kind == NET_OP_ALLGATHER   ? MODEL_COLL_ALLGATHER
                                                  : MODEL_COLL_ALLREDUCE;
    ModelNet net = b->net;
    if (nodes > 1 && b->plan->stragglers.n_link) { /* a ring runs at its slowest NIC (--slow-link) */
      const SimPlan *pl = b->plan;
      double f = 1;
      for (guint ii = b->ts == pl->tp ? i : 0; ii < (b->ts == pl->tp ? i + 1 : pl->tp); ii++)
        for (guint j = 0; j < n; j++) {
          guint r = dp_group_rank(b, group, j);
          f = MIN(f, nic_factor(b, gpu_of_rank_c(b, ii, r % b->cp, s, r / b->cp)));
        }
      net.hw.nic_bw *= f;
    }
    double secs = model_collective_time_s(&net, coll, bytes, n, nodes, NULL);
    op = sim_engine_add_op(b->e, ns(secs), streams, b->ds, t);
  }
  for (guint j = 0; j < n_deps; j++)
    if (deps[j] != G_MAXUINT)
      sim_engine_add_dep(b->e, deps[j], op);
  return op;
}

/* A data-parallel collective (all-reduce; reduce-scatter of gradients or
 * all-gather of parameters for the distributed optimizer) over the d
 * replicas of rank i of stage s, after `deps`; with context parallelism
 * over the d x cp ranks that hold the same parameters (Megatron-Core's
 * data-parallel group with context parallelism). */
/* The speed factor of the NIC cluster GPU g sends through (--slow-link):
 * its own, or half when its rail or the one before is down (two rails then
 * share a NIC). */
static double nic_factor(const Build *b, guint g) {
  guint gpn = b->cluster->gpus_per_node, nics = MAX(b->cluster->net.nics_per_node, 1u), rail = (g % gpn) * nics / gpn;
  double x = sim_plan_nic_factor(b->plan, g / gpn, rail),
         prev = sim_plan_nic_factor(b->plan, g / gpn, (rail + nics - 1) % nics);
  return x <= 0 || prev <= 0 ? 0.5 : x;
}

/* The slowest NIC of the tensor-parallel group of replica k on stage s
 * (under the symmetry shortcut, of every replica's group). */
static double tp_link_factor(const Build *b, guint s, guint k) {
  const SimPlan *pl = b->plan;
  double f = 1;
  for (guint kk = b->ds == pl->dp ? k : 0; kk < (b->ds == pl->dp ? k + 1 : pl->dp); kk++)
    for (guint i = 0; i < pl->tp; i++)
      f = MIN(f, nic_factor(b, gpu_of_rank(b, i, s, kk)));
  return f;
}

static guint dp_collective(Build *b, NetCollOp kind, guint i, guint s, double bytes, const guint *deps, guint n_deps,
                           const SimOpTag *t) {
  return dp_collective_g(b, kind, DP_ALL, i, s, bytes, deps, n_deps, t);
}

/* --overlap-param-gather (Megatron-Core's distributed optimizer): the
 * updated parameters of the last step are all-gathered bucket by bucket as
 * the next forward reaches them, not after the step.  An iteration here
 * starts with those all-gathers, one per layer in forward order on each
 * stage's data-parallel stream (the stage's embedding and logit parameters
 * with its first layer), and a layer's first forward waits for its own. */
static void emit_param_gathers(Build *b) {
  const SimPlan *pl = b->plan;
  b->param_gather = g_new(guint, (gsize)b->p * b->v * b->lmax * b->ts);
  guint64 layer_params = model_layer_local_params(&pl->model, pl->tp);
  for (guint s = 0; s < b->p; s++) {
    guint64 extra = model_stage_params(&pl->model, pl->tp, b->p, s, stage_layers(b, s)) -
                    layer_params * stage_layers(b, s);
    for (guint i = 0; i < b->ts; i++)
      for (guint c = 0; c < b->v; c++)
        for (guint l = 0; l < chunk_layers(b, s, c); l++) {
          SimOpTag t = tag(CAT_DP, PASS_OTHER, s, c, 0, (gint)(chunk_first(b, s, c) + l));
          double params = (double)layer_params + (c == 0 && l == 0 ? (double)extra : 0);
          b->param_gather[((s * b->v + c) * b->lmax + l) * b->ts + i] =
              dp_collective(b, NET_OP_ALLGATHER, i, s, 2.0 * params, NULL, 0, &t);
        }
  }
}

/* MoE: the expert gradients' collective over the expert-data-parallel
 * group of the simulated rank (every such group of the stage at once on
 * the flows), on its data-parallel stream after `deps`. */
static guint edp_collective(Build *b, NetCollOp kind, guint s, double bytes, const guint *deps, guint n_deps,
                            const SimOpTag *t) {
  const SimPlan *pl = b->plan;
  guint stage = pl->tp * b->cp * pl->dp, n = pl->edp, groups = stage / n, G = b->cluster->gpus_per_node;
  guint *gpus = g_new(guint, stage), ranks[n];
  for (guint g = 0; g < groups; g++) {
    sim_moe_edp_ranks(pl, s, g, ranks); /* local ranks 0 .. etp ep - 1 lead the groups */
    for (guint q = 0; q < n; q++)
      gpus[g * n + q] = sim_place(b->cluster, pl->tp * b->cp, ranks[q]);
  }
  guint stream = stream_of(b, 0, s, 0, STREAM_DP), op;
  if (b->flow) {
    char key[64];
    g_snprintf(key, sizeof key, "edp%d:%u:%.0f", (int)kind, s, bytes);
    op = net_op(b, sim_netops_coll_groups(b->flow->ops, key, kind, gpus, n, groups, 1.0, bytes, b->flow->side_dp),
                &stream, NULL, 1, t);
  } else {
    guint nodes = 0, last = G_MAXUINT;
    for (guint q = 0; q < n; q++) {
      nodes += gpus[q] / G != last;
      last = gpus[q] / G;
    }
    ModelCollOp coll = kind == NET_OP_REDUCESCATTER ? MODEL_COLL_REDUCESCATTER
                     : kind == NET_OP_ALLGATHER   ? MODEL_COLL_ALLGATHER
                                                  : MODEL_COLL_ALLREDUCE;
    op = sim_engine_add_op(b->e, ns(model_collective_time_s(&b->net, coll, bytes, n, nodes, NULL)), &stream, 1, t);
  }
  g_free(gpus);
  for (guint j = 0; j < n_deps; j++)
    sim_engine_add_dep(b->e, deps[j], op);
  return op;
}

static void emit_dp_and_optimizer(Build *b, guint s, guint *opt_ops) {
  const SimPlan *pl = b->plan;
  guint64 stage_params = model_stage_params(&pl->model, pl->tp, b->p, s, stage_layers(b, s));
  guint64 expert_params = 0; /* MoE: the local experts', reduced over their own group */
  if (b->moe_layer)
    stage_params = sim_moe_stage_params(pl, s, &expert_params, NULL) - expert_params;
  guint64 layer_params = model_layer_local_params(&pl->model, pl->tp);
  guint64 extra_params = stage_params - layer_params * stage_layers(b, s);
  SimOpTag t = tag(CAT_DP, PASS_OTHER, s, 0, 0, -1);
  double grad_bytes = 2.0; /* fp16 gradients */
  /* Megatron's distributed optimizer reduce-scatters the gradients instead
   * of all-reducing them, steps on its 1/d shard, and all-gathers the
   * updated fp16 parameters. */
  gboolean fsdp = pl->fsdp && b->dpc > 1;
  gboolean dist = (pl->distributed_optimizer || fsdp) && b->dpc > 1;
  NetCollOp grad_coll = dist ? NET_OP_REDUCESCATTER : NET_OP_ALLREDUCE;
  for (guint i = 0; i < b->ts; i++) {
    GArray *mine = g_array_new(FALSE, FALSE, sizeof(guint)); /* ops the optimizer waits for */
    guint lasts[b->ds];
    for (guint k = 0; k < b->ds; k++)
      lasts[k] = b->items[((k * b->p + s) * b->n_items + b->len[s] - 1) * b->ts + i].last;
    if (fsdp) {
      /* the blocks' reductions, issued with their backward; the root's
       * (embedding, final norm, logits) after the stage's last backward */
      GArray *rs = b->fsdp_rs[s * b->ts + i];
      if (extra_params)
        fsdp_reduce(b, s, 0, 0, -1, (double)extra_params, i, lasts[0]);
      g_array_append_vals(mine, rs->data, rs->len);
    } else if (b->dpc > 1) {
      if (pl->ddp == SIM_DDP_TORCH) {
        /* torch DDP: a bucket per layer, all-reduced as soon as the last
         * microbatch's backward has produced it, in backward order. */
        for (guint c = b->v; c-- > 0;)
          for (guint l = chunk_layers(b, s, c); l-- > 0;) {
            guint deps[b->ds];
            for (guint k = 0; k < b->ds; k++)
              deps[k] = b->grad_ready[(((k * b->p + s) * b->v + c) * b->lmax + l) * b->ts + i];
            t.layer = (gint32)(chunk_first(b, s, c) + l);
            guint op = dp_collective(b, grad_coll, i, s, grad_bytes * layer_params, deps, b->ds, &t);
            g_array_append_val(mine, op);
          }
        t.layer = -1;
        if (extra_params) {
          guint op = dp_collective(b, grad_coll, i, s, grad_bytes * extra_params, lasts, b->ds, &t);
          g_array_append_val(mine, op);
        }
      } else {
        /* Megatron's local DDP: one all-reduce of the whole gradient buffer
         * after the pipeline flush. */
        guint op = dp_collective(b, grad_coll, i, s, grad_bytes * stage_params, lasts, b->ds, &t);
        g_array_append_val(mine, op);
      }
      b->bytes[CAT_DP] += grad_bytes * stage_params * 2.0 * (b->dpc - 1) * ((double)pl->tp / b->ts);
    }
    if (expert_params && pl->edp > 1) {
      NetCollOp kind = pl->distributed_optimizer ? NET_OP_REDUCESCATTER : NET_OP_ALLREDUCE;
      guint op = edp_collective(b, kind, s, grad_bytes * expert_params, lasts, b->ds, &t);
      g_array_append_val(mine, op);
      b->bytes[CAT_DP] += grad_bytes * expert_params * 2.0 * (pl->edp - 1) * ((double)pl->tp * b->cp * pl->dp / pl->edp);
    }
    for (guint k = 0; k < b->ds; k++)
      g_array_append_val(mine, lasts[k]);
    /* Tied word embeddings: the first and last stage all-reduce their copies'
     * gradients (Megatron's allreduce of word_embeddings grads). */
    guint s0, c0, sl, cl; /* the stages of the embedding and the logit layer: the V's stage 0 holds both */
    sim_plan_place(pl, 0, 0, &s0, &c0);
    sim_plan_place(pl, b->route - 1, 0, &sl, &cl);
    if (b->p > 1 && !pl->model.untied && (s == 0 || s == b->p - 1) && s0 != sl) {
      SimOpTag et = tag(CAT_DP, PASS_OTHER, s, 0, 0, -2);
      double bytes = grad_bytes * (double)pl->model.vocab * pl->model.hidden / pl->tp;
      for (guint k = 0; k < b->ds; k++) {
        if (s == 0) {
          guint streams[2] = {stream_of(b, i, 0, k, STREAM_DP), stream_of(b, i, b->p - 1, k, STREAM_DP)};
          gboolean same = node_of_rank(b, i, 0, k) == node_of_rank(b, i, b->p - 1, k);
          guint op;
          if (b->flow) {
            char key[64];
            g_snprintf(key, sizeof key, "emb:%u:%u", i, k);
            guint gpus[2] = {gpu_of_rank(b, i, 0, k), gpu_of_rank(b, i, b->p - 1, k)};
            op = net_op(b, coll_plan(b, key, NET_OP_ALLREDUCE, gpus, 2, copies_c(b, TRUE, TRUE), bytes, NULL), streams,
                        NULL, 2, &et);
          } else {
            double secs =
                model_collective_time_s(&b->net, MODEL_COLL_ALLREDUCE, bytes, 2, same ? 1 : 2, NULL);
            op = sim_engine_add_op(b->e, ns(secs), streams, 2, &et);
          }
          sim_engine_add_dep(b->e, b->items[((k * b->p + 0) * b->n_items + b->len[0] - 1) * b->ts + i].last, op);
          sim_engine_add_dep(b->e, b->items[((k * b->p + b->p - 1) * b->n_items + b->len[b->p - 1] - 1) * b->ts + i].last,
                             op);
          /* the last stage's optimizer waits for it too */
          opt_ops[(k * b->p + 0) * b->ts + i] = op;
          opt_ops[(k * b->p + b->p - 1) * b->ts + i] = op;
        }
      }
      if (s == 0) {
        b->bytes[CAT_DP] += bytes * 2.0 * pl->dp * ((double)pl->tp / b->ts) * b->cp;
        b->bytes_embedding += bytes * 2.0 * pl->dp * ((double)pl->tp / b->ts) * b->cp;
      }
    }
    /* the step: on the whole stage, or on its 1/d shard (rounded up);
     * FSDP2's on its shard group's; MoE: the experts' on their 1/edp shard */
    guint64 stepped = dist ? (stage_params + b->shard - 1) / b->shard : stage_params;
    if (expert_params)
      stepped += pl->distributed_optimizer ? (expert_params + pl->edp - 1) / pl->edp : expert_params;
    guint steps[b->ds];
    for (guint k = 0; k < b->ds; k++) {
      guint op = sim_engine_add_op1(b->e, ns(model_optimizer_time_s(b->profile, stepped)),
                                    stream_of(b, i, s, k, STREAM_COMPUTE),
                                    &(SimOpTag){CAT_OPTIMIZER, PASS_OTHER, (gint32)s, 0, 0, -1});
      for (guint j = 0; j < mine->len; j++)
        sim_engine_add_dep(b->e, g_array_index(mine, guint, j), op);
      /* remember the optimizer op so the embedding all-reduce can gate it */
      guint slot = (k * b->p + s) * b->ts + i;
      if (opt_ops[slot] != G_MAXUINT)
        sim_engine_add_dep(b->e, opt_ops[slot], op);
      steps[k] = op;
    }
    if (dist && !pl->overlap_param_gather && !fsdp) /* every replica's updated shard, gathered back whole */
      dp_collective(b, NET_OP_ALLGATHER, i, s, 2.0 * stage_params, steps, b->ds, &t);
    if (expert_params && pl->edp > 1 && pl->distributed_optimizer)
      edp_collective(b, NET_OP_ALLGATHER, s, 2.0 * expert_params, steps, b->ds, &t);
    g_array_free(mine, TRUE);
  }
}

/* --- measuring the timeline --- */

/* The all-reduce time inside a coarse op (0: none, or not coarse). */
static SimTime tp_part_of(const Build *b, guint op) {
  return op < b->tp_part->len ? g_array_index(b->tp_part, SimTime, op) : 0;
}
/* The fine ops a coarse op of the short run stands for, beyond itself. */
static guint extra_of(const Build *b, guint op) {
  return op < b->extra->len ? g_array_index(b->extra, guint, op) : 0;
}

/* Splits [0, end] on one GPU into what it was doing (exposed.h). */
static void breakdown(const Build *b, guint gpu, SimTime end, double out[SIM_N_CLS + 1]) {
  GArray *edges = sim_exposed_edges_new();
  for (guint kind = 0; kind < N_STREAM_KINDS; kind++) {
    guint n;
    const guint *ops = sim_engine_stream_ops(b->e, gpu * N_STREAM_KINDS + kind, &n);
    for (guint j = 0; j < n; j++) {
      SimTime tp = tp_part_of(b, ops[j]);
      if (tp == 0) {
        sim_exposed_add_op(edges, b->e, ops[j]);
        continue;
      }
      /* A coarse op: its compute and its all-reduces cover it without a
       * gap, and only lower classes can overlap it, so the split inside it
       * does not change any class's exposed time. */
      SimTime a = sim_engine_op_start(b->e, ops[j]), z = sim_engine_op_end(b->e, ops[j]);
      sim_exposed_add(edges, a, z - tp, SIM_CLS_COMPUTE);
      sim_exposed_add(edges, z - tp, z, SIM_CLS_TP);
    }
  }
  sim_exposed_split_steady(edges, end, b->steady.k > 0 ? &b->steady : NULL, out);
  g_array_free(edges, TRUE);
}

/* Length of the union of the intervals of the selected ops. */
static double union_seconds(const Build *b, GArray *ops) {
  const SimEngine *e = b->e;
  GArray *edges = sim_exposed_edges_new();
  for (guint j = 0; j < ops->len; j++) {
    guint op = g_array_index(ops, guint, j);
    sim_exposed_add(edges, sim_engine_op_start(e, op), sim_engine_op_end(e, op), 0);
  }
  double u[SIM_N_CLS + 1];
  sim_exposed_split_steady(edges, 0, b->steady.k > 0 ? &b->steady : NULL, u);
  g_array_free(edges, TRUE);
  return u[0];
}

typedef struct {
  int64_t start, end;
  guint phase;
} Span;

static int span_cmp(const void *a, const void *b) {
  const Span *x = a, *y = b;
  if (x->phase != y->phase)
    return x->phase < y->phase ? -1 : 1;
  return x->start < y->start ? -1 : x->start > y->start;
}

double sim_phased_bandwidth(guint n, const int64_t *start_ns, const int64_t *end_ns, const guint *phase,
                            const double *bytes, guint n_phases) {
  double *phase_bytes = g_new0(double, MAX(n_phases, 1));
  Span *sp = g_new(Span, MAX(n, 1));
  guint m = 0;
  for (guint i = 0; i < n; i++) {
    g_return_val_if_fail(phase[i] < n_phases, 0);
    phase_bytes[phase[i]] += bytes[i];
    if (end_ns[i] > start_ns[i])
      sp[m++] = (Span){start_ns[i], end_ns[i], phase[i]};
  }
  if (m > 1)
    qsort(sp, m, sizeof *sp, span_cmp);
  double rate = 0;
  for (guint i = 0; i < m;) {
    guint ph = sp[i].phase;
    int64_t total = 0, a = sp[i].start, z = sp[i].end;
    for (; i < m && sp[i].phase == ph; i++) {
      if (sp[i].start > z) { /* a gap: close the merged interval */
        total += z - a;
        a = sp[i].start;
      }
      z = MAX(z, sp[i].end);
    }
    total += z - a;
    rate += phase_bytes[ph] / ((double)total * 1e-9);
  }
  g_free(sp);
  g_free(phase_bytes);
  return rate;
}

/* The per-phase bandwidth of the selected data-parallel ops, phase = their
 * pipeline stage, op_bytes[j] the crossing bytes of sel[j]. */
static double stage_phased(const Build *b, GArray *sel, const double *op_bytes) {
  guint n = sel->len;
  int64_t *a = g_new(int64_t, MAX(n, 1)), *z = g_new(int64_t, MAX(n, 1));
  guint *ph = g_new(guint, MAX(n, 1));
  for (guint j = 0; j < n; j++) {
    guint op = g_array_index(sel, guint, j);
    a[j] = sim_engine_op_start(b->e, op);
    z[j] = sim_engine_op_end(b->e, op);
    ph[j] = (sim_engine_op_streams(b->e, op)[0] / N_STREAM_KINDS) / (b->ts * b->ds);
  }
  double r = sim_phased_bandwidth(n, a, z, ph, op_bytes, b->p);
  g_free(a);
  g_free(z);
  g_free(ph);
  return r;
}

/* Memory of stage s: the peak number of (layer x microbatch) activations the
 * schedule holds, walked from its order. */
/* The stage's items run one after another on its compute stream, so its
 * order is its timeline: a microbatch's activations of a chunk are alive
 * from its F to its backward, or, where the backward is split, to its W
 * (which still reads the layers' inputs; counted whole, an upper bound on
 * what W keeps).  `*inflight` (may be NULL): the peak in whole-stage
 * microbatches. */
static void stage_memory(const SimPlan *pl, const ModelProfile *profile, GArray *order, guint s, ModelMemory *out,
                         double *inflight) {
  ModelLayerOptions lo = sim_plan_layer_options(pl, profile);
  guint p = pl->pp, layers = sim_plan_stage_layers(pl, s);
  double held = 0, peak = 0, mbs = 0, peak_mbs = 0;
  for (guint j = 0; j < order->len; j++) {
    SimItem it = g_array_index(order, SimItem, j);
    if (!it.forward && it.grad == SIM_GRAD_INPUT)
      continue; /* the activations stay for the W */
    double d = it.forward ? 1 : -1;
    held += d * sim_plan_chunk_layers(pl, s, it.chunk);
    if (it.chunk == 0)
      mbs += d;
    peak = MAX(peak, held);
    peak_mbs = MAX(peak_mbs, mbs);
  }
  if (inflight) /* a microbatch passes route / p chunks of the stage */
    *inflight = peak / ((double)sim_plan_route_len(pl) / p * sim_plan_chunk_layers(pl, s, 0));
  ModelShape local = rank_shape(pl);
  guint64 params = model_stage_params(&pl->model, pl->tp, p, s, layers);
  gboolean first = s == 0, last = s == p - 1;
  if (pl->schedule == SIM_SCHEDULE_DUALPIPE) { /* two copies: stage s of one direction, p-1-s of the other */
    guint half = layers / 2;
    params = model_stage_params(&pl->model, pl->tp, p, s, half) + model_stage_params(&pl->model, pl->tp, p, p - 1 - s, half);
    first = last = s == 0 || s == p - 1;
  } else if (pl->schedule != SIM_SCHEDULE_GPIPE && pl->schedule != SIM_SCHEDULE_1F1B &&
             pl->schedule != SIM_SCHEDULE_INTERLEAVED) {
    /* where the route puts the embedding (its first virtual stage) and the
     * logit layer (its last): the V's stage 0 holds both */
    guint s0, c0, sl, cl;
    sim_plan_place(pl, 0, 0, &s0, &c0);
    sim_plan_place(pl, sim_plan_route_len(pl) - 1, 0, &sl, &cl);
    first = s == s0;
    last = s == sl;
    guint64 head = model_stage_params(&pl->model, pl->tp, p, p - 1, 0);
    guint64 emb = model_stage_params(&pl->model, pl->tp, p, 0, 0);
    params = (guint64)layers * model_layer_local_params(&pl->model, pl->tp) + (first ? emb : 0) + (last ? head : 0);
  }
  ModelMemoryRequest req = {.t = pl->tp,
                            .b = pl->micro_batch,
                            .params = params,
                            .inflight_layer_mbs = peak,
                            .inflight_mbs = peak_mbs,
                            .recompute = pl->recompute,
                            .first_stage = first,
                            .last_stage = last,
                            .fp32_softmax = model_softmax_fp32(&pl->model, pl->tp, pl->micro_batch, &lo),
                            .optimizer_shards = pl->distributed_optimizer ? pl->dp * sim_plan_cp(pl) : 1,
                            .selective = pl->selective,
                            .sequence_parallel = pl->sequence_parallel,
                            .flash = lo.attention == MODEL_ATTENTION_FLASH,
                            .fp8 = lo.fp8,
                            .fp8_weight_params = (guint64)layers * model_layer_local_params(&pl->model, pl->tp)};
  guint64 experts = 0;
  guint moe = 0;
  if (model_is_moe(&pl->model))
    req.params = sim_moe_stage_params(pl, s, &experts, &moe);
  model_memory(&local, &req, out);
  if (moe) {
    /* the expert parameters' optimizer state over their expert-data-
     * parallel group; an MoE layer's activations in place of a dense MLP's
     * (models/moe.h); the dispatch's send and receive buffers */
    guint shards = pl->distributed_optimizer ? pl->dp * sim_plan_cp(pl) : 1;
    guint eshards = pl->distributed_optimizer ? pl->edp : 1;
    out->optimizer = 12.0 * (double)(req.params - experts) / shards + 12.0 * (double)experts / eshards;
    ModelMoeOptions mo = sim_moe_options(pl);
    double delta = model_moe_activation_bytes(&pl->model, &mo) -
                   model_dense_mlp_activation_bytes(&pl->model, pl->tp, pl->micro_batch);
    double T = (double)pl->micro_batch * pl->model.seq_len / ((double)pl->tp * sim_plan_cp(pl));
    out->activations += (pl->recompute ? MAX(delta, 0.0) : delta * peak * moe / layers) +
                        2.0 * T * pl->model.topk * pl->model.hidden * 2.0;
    out->total = out->weights + out->gradients + out->optimizer + out->activations;
  }
  if (pl->fsdp)
    sim_fsdp_state_memory(pl, s, out);
}

void sim_fsdp_state_memory(const SimPlan *pl, guint s, ModelMemory *out) {
  /* FSDP2 with torchtitan's mixed precision (fp32 model, bf16 param_dtype,
   * reduce_dtype fp32 or bf16) and AdamW: the fp32 parameters, gradients
   * and the two moments sharded over the shard group (16 bytes a
   * parameter); the bf16 gathered blocks (the one running and the one
   * prefetched, with the root's; without reshard_after_forward all of the
   * stage's from forward to backward); the bf16 unsharded gradients (a
   * block's, or the whole stage's while they accumulate over microbatches
   * reduced after the last) and a block's fp32 copy for the reduction. */
  guint layers = sim_plan_stage_layers(pl, s);
  double shard = (double)pl->dp * sim_plan_cp(pl) / pl->hsdp_replicas;
  double Ps = (double)model_stage_params(&pl->model, pl->tp, pl->pp, s, layers);
  double Lp = (double)model_layer_local_params(&pl->model, pl->tp);
  double root = Ps - Lp * layers;
  out->optimizer = 8.0 * Ps / shard;
  out->weights = 4.0 * Ps / shard + 2.0 * (pl->reshard_after_forward ? root + MIN(2.0, (double)layers) * Lp : Ps);
  gboolean accumulate = pl->pp > 1 && pl->microbatches > 1; /* unsharded until the last microbatch */
  out->gradients = 4.0 * Ps / shard + 2.0 * (accumulate ? Ps : Lp) + (pl->fsdp_reduce_fp32 ? 4.0 * Lp : 0);
  out->total = out->weights + out->gradients + out->optimizer + out->activations;
}

static gboolean heuristic(const SimPlan *pl) {
  return pl->schedule == SIM_SCHEDULE_ZB_1P || pl->schedule == SIM_SCHEDULE_ZB_2P || pl->schedule == SIM_SCHEDULE_ZB_AUTO;
}

/* Every stage's order for m microbatches.  ZB's heuristics order by each
 * stage's F, B and W: the --stage-times, else the cost model's compute
 * times on `profile` (its layers, the embedding and the logit layer; the
 * communication left to the engine). */
static void plan_orders(const SimPlan *pl, const ModelProfile *profile, guint m, GArray **orders) {
  guint p = pl->pp;
  double *t = g_new0(double, 3 * (gsize)p), *tf = t, *tb = t + p, *tw = t + 2 * p, tc = 0;
  if (heuristic(pl) && pl->stage_times) {
    for (guint s = 0; s < p; s++)
      tf[s] = pl->stage_f_s, tb[s] = pl->stage_b_s, tw[s] = pl->stage_w_s;
    tc = pl->stage_comm_s;
  } else if (heuristic(pl)) {
    ModelLayerOptions lo = sim_plan_layer_options(pl, profile);
    ModelLayerCost c;
    model_layer_cost_with(profile, &pl->model, pl->tp, pl->micro_batch, &lo, &c);
    ModelShape local = rank_shape(pl);
    double ef, eb, hf, hb;
    model_embedding_cost(profile, &local, pl->tp, pl->micro_batch, &ef, &eb);
    model_head_cost(profile, &local, pl->tp, pl->micro_batch, &hf, &hb);
    double hw = model_head_wgrad_s(profile, &local, pl->tp, pl->micro_batch);
    double f = 0, b = 0, w = 0;
    for (guint j = 0; j < 3; j++) {
      f += c.fwd.seg_s[j];
      b += c.bwd.seg_s[j] - c.bwd.wgrad_s[j];
      w += c.bwd.wgrad_s[j];
    }
    if (pl->recompute)
      b += f;
    else if (pl->selective)
      b += c.core.seg_s[0];
    for (guint s = 0; s < p; s++) {
      double L = sim_plan_stage_layers(pl, s);
      tf[s] = L * f + (s == 0 ? ef : 0) + (s == p - 1 ? hf : 0);
      tb[s] = L * b + (s == p - 1 ? hb - hw : 0);
      tw[s] = L * w + (s == 0 ? eb : 0) + (s == p - 1 ? hw : 0);
    }
  }
  sim_plan_orders_timed(pl, m, tf, tb, tw, tc, orders);
  g_free(t);
}

/* zb-auto: the plan with --activation-limit in microbatches (a stage's
 * activations of one microbatch, the most of any stage, into the limit;
 * at least 1).  Others: the plan itself.  *owned: what to free. */
static const SimPlan *with_limit(const SimPlan *pl, const ModelProfile *profile, SimPlan **owned) {
  *owned = NULL;
  if (pl->schedule != SIM_SCHEDULE_ZB_AUTO || pl->activation_limit_mbs)
    return pl;
  GArray *one = g_array_new(FALSE, FALSE, sizeof(SimItem));
  double per_mb = 0;
  for (guint s = 0; s < pl->pp; s++) {
    g_array_set_size(one, 0);
    SimItem f = {0, 0, 1, SIM_GRAD_ALL, 0};
    g_array_append_val(one, f);
    ModelMemory mm;
    stage_memory(pl, profile, one, s, &mm, NULL);
    per_mb = MAX(per_mb, mm.activations);
  }
  g_array_free(one, TRUE);
  SimPlan *copy = g_new(SimPlan, 1);
  *copy = *pl;
  double n = per_mb > 0 ? floor(pl->activation_limit_gib * 1073741824.0 / per_mb) : 1e9;
  copy->activation_limit_mbs = (guint)CLAMP(n, 1.0, 1e9);
  *owned = copy;
  return copy;
}

/* The same, with the peak in-flight microbatches over the stages, and
 * (per_stage, may be NULL) each stage's. */
static void ptdp_memory_per(const SimPlan *pl, const ModelProfile *profile, ModelMemory *mem, guint *stage,
                            double *inflight, double *per_stage) {
  SimPlan *owned;
  pl = with_limit(pl, profile, &owned);
  GArray **orders = g_new(GArray *, pl->pp);
  for (guint s = 0; s < pl->pp; s++)
    orders[s] = g_array_new(FALSE, FALSE, sizeof(SimItem));
  plan_orders(pl, profile, pl->microbatches, orders);
  memset(mem, 0, sizeof *mem);
  *stage = 0;
  if (inflight)
    *inflight = 0;
  for (guint s = 0; s < pl->pp; s++) {
    ModelMemory m;
    double in = 0;
    GArray *order = orders[s];
    stage_memory(pl, profile, order, s, &m, &in);
    if (inflight)
      *inflight = MAX(*inflight, in);
    if (per_stage)
      per_stage[s] = in;
    if (m.total > mem->total) {
      *mem = m;
      *stage = s;
    }
  }
  for (guint s = 0; s < pl->pp; s++)
    g_array_free(orders[s], TRUE);
  g_free(orders);
  g_free(owned);
}

static void ptdp_memory(const SimPlan *pl, const ModelProfile *profile, ModelMemory *mem, guint *stage,
                        double *inflight) {
  ptdp_memory_per(pl, profile, mem, stage, inflight, NULL);
}

void sim_ptdp_memory(const SimPlan *pl, const ModelProfile *profile, ModelMemory *mem, guint *stage) {
  ptdp_memory(pl, profile, mem, stage, NULL);
}

void sim_ptdp_inflight(const SimPlan *pl, const ModelProfile *profile, double *per_stage) {
  ModelMemory mem;
  guint stage;
  ptdp_memory_per(pl, profile, &mem, &stage, NULL, per_stage);
}

/* The effective bisection bandwidth of one traffic class, in bytes/s (SC21
 * section 5.9; defined in doc/output.md): for each direction of the cut,
 * the bytes its transfers move across it that way, over the time during
 * which those transfers are in flight -- the union of their intervals, or,
 * per phase (data-parallel: one phase per pipeline stage, whose all-reduces
 * run on disjoint nodes at staggered times), the sum over phases of each
 * phase's rate.  The busier direction is reported: a cut, like a link,
 * carries so much one way.  dir_bytes[2 j + d] are sel[j]'s bytes in
 * direction d (0: from the low side to the high side). */
static double bisection_rate(Build *b, GArray *sel, const double *dir_bytes, gboolean phased) {
  const SimSteady *st = b->steady.k > 0 ? &b->steady : NULL;
  double best = 0;
  GArray *one = g_array_new(FALSE, FALSE, sizeof(guint));
  double *bytes = g_new(double, MAX(sel->len, 1));
  for (guint d = 0; d < 2; d++) {
    g_array_set_size(one, 0);
    for (guint j = 0; j < sel->len; j++)
      if (dir_bytes[2 * j + d] > 0) {
        bytes[one->len] = dir_bytes[2 * j + d];
        g_array_append_val(one, g_array_index(sel, guint, j));
      }
    double total, rate;
    if (!sim_steady_sum(st, b->e, (const guint *)(void *)one->data, bytes, NULL, one->len, &total))
      b->steady_failed = TRUE;
    if (phased) {
      /* the data-parallel phases run after the pipeline: none repeats */
      for (guint j = 0; j < one->len; j++)
        if (sim_steady_in_w0(st, sim_engine_op_start(b->e, g_array_index(one, guint, j))))
          b->steady_failed = TRUE;
      rate = stage_phased(b, one, bytes);
    } else {
      double secs = union_seconds(b, one);
      rate = secs > 0 ? total / secs : 0;
    }
    best = fmax(best, rate);
  }
  g_free(bytes);
  g_array_free(one, TRUE);
  return best;
}

/* The byte counts of the long run: each item's counts once per copy
 * (steady.h).  FALSE where the sums would depend on their order. */
static gboolean steady_bytes(Build *b) {
  static const guint cats[] = {CAT_TP, CAT_CP, CAT_PP, CAT_EP};
  GArray *ops = g_array_new(FALSE, FALSE, sizeof(guint)), *vals = g_array_new(FALSE, FALSE, sizeof(double));
  GArray *counts = g_array_new(FALSE, FALSE, sizeof(guint));
  gboolean ok = TRUE;
  for (guint c = 0; c < G_N_ELEMENTS(cats) && ok; c++) {
    g_array_set_size(ops, 0);
    g_array_set_size(vals, 0);
    g_array_set_size(counts, 0);
    for (guint j = 0; j < b->adds->len; j++) {
      const Add *a = &g_array_index(b->adds, Add, j);
      if (a->cat != cats[c])
        continue;
      guint item = a->item & ~STEADY_XFER;
      guint op = a->item == G_MAXUINT ? G_MAXUINT : a->item & STEADY_XFER ? b->xfer_lo[item] : b->item_lo[item];
      g_array_append_val(ops, op);
      g_array_append_val(vals, a->bytes);
      g_array_append_val(counts, a->count);
    }
    ok = sim_steady_sum(&b->steady, b->e, (const guint *)(void *)ops->data, (const double *)(void *)vals->data,
                        (const guint *)(void *)counts->data, ops->len, &b->bytes[cats[c]]);
  }
  g_array_free(counts, TRUE);
  g_array_free(ops, TRUE);
  g_array_free(vals, TRUE);
  return ok;
}

static int time_cmp(const void *a, const void *b) {
  const SimTime *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The zero-bubble paper's bubble (SimResult.bubble_s): the longest stage
 * span, from a stage's first pass's start to its last pass's end (compute
 * and the tensor-parallel communication that blocks it; not the optimizer
 * step), less the most busy time of a stage (Qi et al.'s m (T_F + T_B +
 * T_W) where the stages are equal).  With a steady state (1F1B and
 * interleaved only) every stage's span grows by k periods and its busy time
 * by k times its part in W1 (steady.h). */
static void zb_bubble(const Build *b, SimResult *r) {
  const SimSteady *st = b->steady.k > 0 ? &b->steady : NULL;
  double best_span = -1, best_busy = 0;
  GArray *iv = g_array_new(FALSE, FALSE, sizeof(SimTime) * 2);
  for (guint s = 0; s < b->p; s++) {
    g_array_set_size(iv, 0);
    guint gpu = gpu_of(b, 0, s, 0);
    for (guint kind = STREAM_COMPUTE; kind <= STREAM_TP; kind++) {
      guint n;
      const guint *ops = sim_engine_stream_ops(b->e, gpu * N_STREAM_KINDS + kind, &n);
      for (guint j = 0; j < n; j++) {
        const SimOpTag *t = sim_engine_op_tag(b->e, ops[j]);
        if (t->category == CAT_OPTIMIZER || t->category == CAT_DP)
          continue;
        SimTime x[2] = {sim_engine_op_start(b->e, ops[j]), sim_engine_op_end(b->e, ops[j])};
        g_array_append_val(iv, x);
      }
    }
    if (!iv->len)
      continue;
    qsort(iv->data, iv->len, sizeof(SimTime) * 2, time_cmp);
    SimTime *x = (SimTime *)(void *)iv->data, first = x[0], last = x[1], a = x[0], z = x[1], busy = 0, in_w1 = 0;
    for (guint j = 1; j <= iv->len; j++) {
      if (j == iv->len || x[2 * j] > z) { /* a merged interval ends: [a, z) */
        busy += z - a;
        if (st) {
          SimTime lo, hi;
          sim_steady_w1(st, a, z, &lo, &hi);
          in_w1 += hi > lo ? hi - lo : 0;
        }
        if (j == iv->len)
          break;
        a = x[2 * j];
      }
      z = MAX(z, x[2 * j + 1]);
      last = MAX(last, x[2 * j + 1]);
    }
    /* steady state: the union grows by k times its part in W1 (steady.h) */
    double span = (double)(last - first + (st ? (SimTime)st->k * st->period : 0));
    double work = (double)(busy + (st ? (SimTime)st->k * in_w1 : 0));
    best_span = MAX(best_span, span);
    best_busy = MAX(best_busy, work);
  }
  g_array_free(iv, TRUE);
  r->pipeline_span_s = best_span > 0 ? best_span * 1e-9 : 0;
  r->bubble_s = best_span > 0 ? (best_span - best_busy) * 1e-9 : 0;
  r->bubble_rate = best_span > 0 ? (best_span - best_busy) / best_span : 0;
}

/* Measures the timeline (of the plan's iteration: with a steady state, the
 * long run the short one stands for).  FALSE where a sum over ops cannot
 * be carried to the long run exactly (steady.h): simulate it all. */
static gboolean measure(Build *b, SimResult *r) {
  const SimPlan *pl = b->plan;
  const SimSteady *st = b->steady.k > 0 ? &b->steady : NULL;
  SimTime end_short = sim_engine_makespan(b->e);
  SimTime makespan = end_short + (st ? (SimTime)st->k * st->period : 0);
  r->iteration_time_s = (double)makespan * 1e-9;
  sim_plan_rates(pl, b->profile, r);
  /* (p-1)/m, over v for the looped schedules (SC21 section 2.2) */
  gboolean looped = pl->schedule == SIM_SCHEDULE_INTERLEAVED || pl->schedule == SIM_SCHEDULE_INTERLEAVED_ZB;
  r->analytic_bubble_fraction = (double)(b->p - 1) / ((looped ? (double)b->v : 1.0) * pl->microbatches);

  /* The pipeline's busy work per stage (compute and tensor-parallel
   * all-reduces, which block compute), and the flush: the end of the last
   * pass anywhere. */
  SimTime flush;
  double best_work;
  guint *stage_gpu = g_new(guint, b->p);
  for (guint s = 0; s < b->p; s++)
    stage_gpu[s] = gpu_of(b, 0, s, 0);
  guint critical = sim_exposed_busiest_steady(b->e, stage_gpu, b->p, st, &best_work, &flush);
  g_free(stage_gpu);
  r->bubble_fraction = best_work > 0 ? ((double)flush - best_work) / best_work : 0;
  r->critical_stage = critical;
  zb_bubble(b, r);
  double parts[SIM_N_CLS + 1];
  breakdown(b, gpu_of(b, 0, critical, 0), end_short, parts);
  r->breakdown = (SimBreakdown){parts[SIM_CLS_COMPUTE], parts[SIM_CLS_TP], parts[SIM_CLS_PP],
                                parts[SIM_CLS_DP],      parts[SIM_CLS_OPT], parts[SIM_N_CLS]};

  if (st && !steady_bytes(b))
    return FALSE;
  r->bytes_tp = b->bytes[CAT_TP];
  r->bytes_cp = b->bytes[CAT_CP];
  r->bytes_pp = b->bytes[CAT_PP];
  r->bytes_dp = b->bytes[CAT_DP];
  r->shard_gathers = b->shard_gathers;
  r->shard_reductions = b->shard_reductions;
  r->shard_gather_bytes = b->shard_gather_bytes;
  r->shard_reduce_bytes = b->shard_reduce_bytes;
  r->bytes_embedding = b->bytes_embedding;
  r->bytes_ep = b->bytes[CAT_EP];
  if (b->moe_layer) {
    /* the critical stage's MoE token communication, each transfer at its
     * time alone: per MoE layer and microbatch, forward, backward and the
     * recomputation forward */
    guint s = r->critical_stage, moe = 0;
    for (guint c = 0; c < b->v; c++)
      for (guint l = 0; l < chunk_layers(b, s, c); l++)
        moe += b->moe_layer[(s * b->v + c) * b->lmax + l];
    SimTime per = 0;
    for (guint kind = 0; kind < MOE_N_COMM; kind++)
      if ((kind <= MOE_COMBINE ? pl->ep : pl->etp) > 1)
        per += b->moe_ns[s * MOE_N_COMM + kind];
    r->moe_comm_s = (double)per * 1e-9 * moe * pl->microbatches * (pl->recompute ? 3 : 2);
    r->moe_a2a_bytes_per_rank = model_moe_a2a_wire_bytes(&pl->model, &(ModelMoeOptions){.t = pl->tp, .cp = b->cp,
                                                                                         .ep = pl->ep, .b = pl->micro_batch});
    r->moe_expert_tokens = b->moe.expert_tokens;
  }

  /* Effective bisection bandwidth (bisection_rates): pipeline cut between
   * stages below p/2 and the rest, data-parallel cut between replicas below
   * d/2 and the rest; bytes counted in one direction. */
  GArray *sel = g_array_new(FALSE, FALSE, sizeof(guint));
  GArray *dir_bytes = g_array_new(FALSE, FALSE, sizeof(double) * 2);
  guint n_ops = sim_engine_n_ops(b->e);
  if (b->p > 1) {
    double per_rank = pp_bytes_per_rank(pl);
    /* one simulated send stands for tp dp / (ts ds) ranks' sends */
    double per_op = per_rank * pl->tp * pl->dp / (b->ts * b->ds) * b->cp;
    for (guint op = 0; op < n_ops; op++) {
      const SimOpTag *t = sim_engine_op_tag(b->e, op);
      if (t->category != CAT_PP)
        continue;
      const guint *st = sim_engine_op_streams(b->e, op);
      guint from = (st[0] / N_STREAM_KINDS) / (b->ts * b->ds);
      guint to = sim_engine_op_n_streams(b->e, op) > 1 ? (st[1] / N_STREAM_KINDS) / (b->ts * b->ds)
                                                       : g_array_index(b->pp_to, guint, op) - 1;
      guint side_from = from >= b->p / 2, side_to = to >= b->p / 2;
      if (side_from == side_to)
        continue;
      double d[2] = {0, 0};
      d[side_from] = per_op;
      g_array_append_val(sel, op);
      g_array_append_val(dir_bytes, d);
    }
    r->bisection_pp_GBps = bisection_rate(b, sel, (const double *)(const void *)dir_bytes->data, FALSE) / 1e9;
  }
  if (pl->dp > 1) {
    g_array_set_size(sel, 0);
    g_array_set_size(dir_bytes, 0);
    for (guint op = 0; op < n_ops; op++) {
      const SimOpTag *t = sim_engine_op_tag(b->e, op);
      if (t->category != CAT_DP || t->layer == -2)
        continue;
      g_array_append_val(sel, op);
    }
    /* A ring all-reduce over the d replicas crosses the cut once each way,
     * 2 (d-1)/d of the fp16 gradients each way, in each of the t rings; a
     * stage's crossing bytes are shared evenly by its data-parallel ops. */
    double *stage_bytes = g_new0(double, b->p);
    guint *stage_ops = g_new0(guint, b->p);
    for (guint s = 0; s < b->p; s++)
      stage_bytes[s] = model_busbw_factor(MODEL_COLL_ALLREDUCE, b->dpc) * 2.0 *
                       model_stage_params(&pl->model, pl->tp, b->p, s, stage_layers(b, s)) * pl->tp;
    for (guint j = 0; j < sel->len; j++)
      stage_ops[(sim_engine_op_streams(b->e, g_array_index(sel, guint, j))[0] / N_STREAM_KINDS) / (b->ts * b->ds)]++;
    for (guint j = 0; j < sel->len; j++) {
      guint s = (sim_engine_op_streams(b->e, g_array_index(sel, guint, j))[0] / N_STREAM_KINDS) / (b->ts * b->ds);
      double d[2] = {stage_bytes[s] / stage_ops[s], stage_bytes[s] / stage_ops[s]};
      g_array_append_val(dir_bytes, d);
    }
    r->bisection_dp_GBps = bisection_rate(b, sel, (const double *)(const void *)dir_bytes->data, TRUE) / 1e9;
    g_free(stage_bytes);
    g_free(stage_ops);
  }
  g_array_free(dir_bytes, TRUE);
  g_array_free(sel, TRUE);
  /* the ops of the fine task graph, whether coarse ops stood for them */
  guint64 more_ops = 0, extra = b->logical_extra;
  if (st) { /* W0's ops k more times (steady.h) */
    more_ops = st->k * st->w0_ops;
    for (guint op = 0; op < n_ops; op++)
      if (sim_steady_in_w0(st, sim_engine_op_start(b->e, op)))
        extra += st->k * extra_of(b, op);
  }
  r->ops = n_ops + more_ops + extra;
  r->events = sim_engine_n_events(b->e) + more_ops + extra;
  r->simulated_gpus = b->ts * b->p * b->ds;
  r->steady_periods = st ? st->k : 0;
  return !b->steady_failed;
}

/* Flow network: the same measure over the flows themselves -- the data
 * bytes of every ring edge, tree edge or send whose ends lie on opposite
 * sides (pipeline: stages below p/2 against the rest; data-parallel:
 * replicas below d/2 against the rest), per direction. */
static void flow_bisection(Build *b, SimResult *r) {
  GArray *sel = g_array_new(FALSE, FALSE, sizeof(guint));
  GArray *bytes = g_array_new(FALSE, FALSE, sizeof(double) * 2);
  for (int cls = 0; cls < 2; cls++) {
    g_array_set_size(sel, 0);
    g_array_set_size(bytes, 0);
    guint n_ops = sim_engine_n_ops(b->e);
    for (guint op = 0; op < n_ops; op++) {
      double copies;
      const NetCollPlan *plan = sim_netops_plan_of(b->flow->ops, op, &copies);
      const SimOpTag *t = sim_engine_op_tag(b->e, op);
      if (!plan || t->category != (cls == 0 ? CAT_PP : CAT_DP) || t->layer == -2)
        continue;
      double c[2] = {net_coll_plan_crossing_bytes(plan, 0) * copies, net_coll_plan_crossing_bytes(plan, 1) * copies};
      if (c[0] <= 0 && c[1] <= 0)
        continue;
      g_array_append_val(sel, op);
      g_array_append_val(bytes, c);
    }
    double gbps = bisection_rate(b, sel, (const double *)(const void *)bytes->data, cls == 1) / 1e9;
    if (cls == 0)
      r->bisection_pp_GBps = gbps;
    else
      r->bisection_dp_GBps = gbps;
  }
  g_array_free(sel, TRUE);
  g_array_free(bytes, TRUE);
}

gboolean sim_ptdp_run(const SimPlan *pl, const ModelProfile *profile, const TopoCluster *cluster, SimResult *r,
                      GError **error) {
  return sim_ptdp_run_observed(pl, profile, cluster, r, NULL, NULL, error);
}

/* Hands the finished timeline to `observe` (the trace writer). */
static gboolean observe_timeline(const Build *b, SimTimelineFn observe, gpointer data, GError **error) {
  guint n = b->ts * b->ds * b->p;
  guint *gpus = g_new(guint, n);
  for (guint s = 0; s < b->p; s++)
    for (guint k = 0; k < b->ds; k++)
      for (guint i = 0; i < b->ts; i++)
        gpus[gpu_of(b, i, s, k)] = gpu_of_rank(b, i, s, k);
  SimTimeline tl = {b->e, b->plan, b->ts, b->ds, b->p, gpus, "mb", TRUE, 0, b->pieces};
  gboolean ok = observe(&tl, data, error);
  g_free(gpus);
  return ok;
}

/* --- the steady state (steady.h) --- */

/* Microbatches a schedule period adds: 1F1B repeats every microbatch, the
 * interleaved schedule every p (its chunks take p microbatches in turn). */
static guint steady_step(const SimPlan *pl) { return pl->schedule == SIM_SCHEDULE_INTERLEAVED ? pl->pp : 1; }

/* Schedule periods the timeline may take to repeat.  Equal stages repeat
 * every period.  Unequal ones can settle into a pattern of two: the
 * slowest stages, equal among themselves, take turns to hold the others up,
 * so the pace alternates from one period to the next (seen on 1F1B with
 * lighter end stages); the short run of an uneven plan holds whole pairs of
 * periods, and the proof tries one period, then two. */
static guint steady_cycle(const SimPlan *pl) { return sim_plan_uneven(pl) ? 2 : 1; }

/* The microbatches of the short run for `pl`, or 0 to simulate the whole
 * iteration: the warm-up, a few periods in which the state can be seen to
 * repeat, and the cool-down, as many modulo the period as the plan has.
 * Not for --exact, traces (which show every op) or GPipe (whose forwards
 * and backwards are two phases, not one period). */
static guint steady_short_m(const SimPlan *pl, gboolean traced) {
  /* not FSDP2 either: its per-block gathers are issued inside the items */
  if (pl->exact || traced || pl->pp < 2 || pl->stage_times || pl->fsdp ||
      (pl->schedule != SIM_SCHEDULE_1F1B && pl->schedule != SIM_SCHEDULE_INTERLEAVED))
    return 0; /* GPipe's two phases, and the schedules not proved here: every op simulated */
  guint step = steady_step(pl), cycle = steady_cycle(pl), m = pl->microbatches;
  /* 1F1B: the last stage's warm-up ends after p - 1 microbatches and the
   * first stage's after about 2 (p - 1) passes; interleaved, the first
   * stage warms up for 2 (p - 1) + (v - 1) p forward chunks, under two
   * periods of p v; then SIM_STEADY_PERIODS periods (of `cycle` each). */
  guint want = (step == 1 ? pl->pp : 2 * step) + SIM_STEADY_PERIODS * cycle * step;
  step *= cycle;
  guint short_m = want + (m % step + step - want % step) % step; /* = m modulo the step */
  /* worth a try only where it saves at least half: a proof that fails
   * (transfers meeting on the flows inside the period) costs the short run */
  return 2 * short_m <= m ? short_m : 0;
}

typedef struct {
  const Build *b;
  guint mb_step;
} Kind;

/* An op and its copy one period on do the same work: tags but the
 * microbatch, what a coarse op holds, the flow plan. */
static gboolean steady_same_kind(const SimEngine *e, guint op, guint copy, gpointer data) {
  const Kind *kd = data;
  const Build *b = kd->b;
  const SimOpTag *t = sim_engine_op_tag(e, op), *u = sim_engine_op_tag(e, copy);
  if (t->category != u->category || t->pass != u->pass || t->stage != u->stage || t->chunk != u->chunk ||
      t->layer != u->layer || (gint64)u->microbatch != (gint64)t->microbatch + kd->mb_step)
    return FALSE;
  if (tp_part_of(b, op) != tp_part_of(b, copy) || extra_of(b, op) != extra_of(b, copy))
    return FALSE;
  if (b->flow) {
    double c_op = 0, c_copy = 0;
    const NetCollPlan *p_op = sim_netops_plan_of(b->flow->ops, op, &c_op);
    const NetCollPlan *p_copy = sim_netops_plan_of(b->flow->ops, copy, &c_copy);
    if (p_op != p_copy || c_op != c_copy)
      return FALSE;
  }
  return TRUE;
}

/* Proves the short run's steady state (steady.h) for a period of `q`
 * schedule periods: each item's ops have their copies in the item q
 * periods later in its stage's order, if that item is the same with the
 * microbatch q steps on; the window is tried a few periods into the first
 * stage's steady part.  Sets b->steady. */
static gboolean steady_find_q(Build *b, guint q) {
  const SimPlan *pl = b->plan;
  guint step = steady_step(pl) * q, L = 2 * step * b->v; /* items per period on a stage */
  guint n_ops = sim_engine_n_ops(b->e);
  guint *next = g_new(guint, MAX(n_ops, 1));
  for (guint op = 0; op < n_ops; op++)
    next[op] = G_MAXUINT;
  for (guint k = 0; k < b->ds; k++)
    for (guint s = 0; s < b->p; s++)
      for (guint x = 0; x + L < b->n_items; x++) {
        SimItem a = g_array_index(b->order[s], SimItem, x), c = g_array_index(b->order[s], SimItem, x + L);
        if (a.chunk != c.chunk || a.forward != c.forward || c.microbatch != a.microbatch + step)
          continue;
        guint i = (k * b->p + s) * b->n_items + x, j = i + L;
        if (b->item_hi[i] - b->item_lo[i] == b->item_hi[j] - b->item_lo[j])
          for (guint o = 0; o < b->item_hi[i] - b->item_lo[i]; o++)
            next[b->item_lo[i] + o] = b->item_lo[j] + o;
        if (b->xfer_hi[i] - b->xfer_lo[i] == b->xfer_hi[j] - b->xfer_lo[j])
          for (guint o = 0; o < b->xfer_hi[i] - b->xfer_lo[i]; o++)
            next[b->xfer_lo[i] + o] = b->xfer_lo[j] + o;
      }
  guint first_bwd = 0;
  while (first_bwd < b->n_items && g_array_index(b->order[0], SimItem, first_bwd).forward)
    first_bwd++;
  Kind kd = {b, step};
  gboolean ok = FALSE;
  SimSteady st = {0};
  for (guint c = 1; c <= SIM_STEADY_PERIODS && !ok; c++) {
    guint x = first_bwd + c * L;
    if (x + L >= b->n_items)
      break;
    SimTime tau = sim_engine_op_start(b->e, b->item_lo[x]);
    SimTime period = sim_engine_op_start(b->e, b->item_lo[x + L]) - tau;
    ok = sim_steady_prove(b->e, next, tau, period, steady_same_kind, &kd, &st);
  }
  g_free(next);
  if (!ok)
    return FALSE;
  st.k = (pl->microbatches - b->m) / step;
  /* a long run past the longest time ptdsim represents is the whole run's error to report */
  if ((double)sim_engine_makespan(b->e) + (double)st.k * st.period > (double)SIM_TIME_MAX)
    return FALSE;
  b->steady = st;
  return TRUE;
}

/* The shortest period the short run proves (steady_cycle). */
static gboolean steady_find(Build *b) {
  for (guint q = 1; q <= steady_cycle(b->plan); q++)
    if (steady_find_q(b, q))
      return TRUE;
  return FALSE;
}

static gboolean ptdp_run(const SimPlan *pl, const ModelProfile *profile, const TopoCluster *cluster, SimResult *r,
                         SimTimelineFn observe, gpointer data, GError **error);

gboolean sim_ptdp_run_observed(const SimPlan *pl, const ModelProfile *profile, const TopoCluster *cluster,
                               SimResult *r, SimTimelineFn observe, gpointer data, GError **error) {
  SimPlan *owned;
  gboolean ok = ptdp_run(with_limit(pl, profile, &owned), profile, cluster, r, observe, data, error);
  g_free(owned);
  return ok;
}

char *sim_ptdp_schedule_csv(const SimPlan *pl, const ModelProfile *profile) {
  SimPlan *owned;
  pl = with_limit(pl, profile, &owned);
  GArray **orders = g_new(GArray *, pl->pp);
  for (guint s = 0; s < pl->pp; s++)
    orders[s] = g_array_new(FALSE, FALSE, sizeof(SimItem));
  plan_orders(pl, profile, pl->microbatches, orders);
  char *csv = sim_schedule_csv_orders(pl, orders);
  for (guint s = 0; s < pl->pp; s++)
    g_array_free(orders[s], TRUE);
  g_free(orders);
  g_free(owned);
  return csv;
}

static gboolean ptdp_run(const SimPlan *pl, const ModelProfile *profile, const TopoCluster *cluster, SimResult *r,
                         SimTimelineFn observe, gpointer data, GError **error) {
  memset(r, 0, sizeof *r);
  if (!sim_plan_check_device(pl, profile, error))
    return FALSE;
  ptdp_memory(pl, profile, &r->memory, &r->memory_stage, &r->peak_inflight_mbs);
  r->fits_in_memory = r->memory.total <= sim_plan_usable_bytes(pl, profile);
  if (!r->fits_in_memory && !pl->allow_oom && !pl->stage_times) {
    const ModelMemory *mm = &r->memory;
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_OOM,
                "does not fit in memory: stage %u needs %.1f GiB of %.1f GiB usable (weights+gradients+optimizer %.1f, "
                "activations %.1f); use %s%sa larger --tp or --pp, or a smaller --micro-batch "
                "(--allow-oom simulates it anyway)",
                r->memory_stage, mm->total / 1073741824.0, sim_plan_usable_bytes(pl, profile) / 1073741824.0,
                (mm->weights + mm->gradients + mm->optimizer) / 1073741824.0, mm->activations / 1073741824.0,
                pl->recompute ? "" : "--recompute full, ", model_is_moe(&pl->model) ? "a larger --ep, " : "");
    return FALSE;
  }

  Build b = {.plan = pl, .profile = profile, .cluster = cluster};
  b.net = (ModelNet){.hw = cluster->net,
                     .free_comm = profile->kind == MODEL_PROFILE_IDEAL,
                     /* collectives measured on the device, if the profile has them */
                     .measured = profile->coll,
                     .n_measured = profile->n_coll};
  b.ts = b.ds = 1;
  b.cp = sim_plan_cp(pl);
  b.dpc = pl->dp * b.cp;
  b.shard = pl->fsdp ? b.dpc / pl->hsdp_replicas : b.dpc;
  b.p = pl->pp;
  b.v = pl->chunks;
  double mean_lpc = (double)pl->model.layers / (pl->pp * pl->chunks); /* layers per chunk, on average */
  if (!pl->symmetry || !placement_uniform(&b)) {
    /* FSDP2's per-block collectives are issued once for the group, as the
     * symmetric simulation has them */
    if (pl->fsdp && pl->dp > 1) {
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                  "%s is simulated with one GPU standing for its replicas, which needs groups that fill whole nodes "
                  "in Megatron's rank order; drop --no-symmetry and --placement, or use sizes whose groups fill nodes",
                  pl->hsdp_replicas > 1 ? "--hsdp" : "--fsdp");
      return FALSE;
    }
    /* Without the shortcut every GPU is simulated: check the size again. */
    double ops = 2.0 * pl->microbatches * b.v * b.p * (6.0 * mean_lpc + 4) * pl->tp * pl->dp;
    if (pl->symmetry && ops > 60e6) {
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_TOO_BIG,
                  "--tp %u x --dp %u does not line up with %u-GPU nodes, so every GPU must be simulated (about %.0f "
                  "million ops, over the limit of 60 million); use sizes whose groups fill whole nodes",
                  pl->tp, pl->dp, cluster->gpus_per_node, ops / 1e6);
      return FALSE;
    }
    b.ts = pl->tp;
    b.ds = pl->dp;
  }
  r->symmetric = b.ts == 1 && b.ds == 1;
  b.chunk_n = g_new(guint, (gsize)b.p * b.v);
  b.chunk_at = g_new(guint, (gsize)b.p * b.v);
  b.lmax = 0;
  for (guint s = 0; s < b.p; s++)
    for (guint c = 0; c < b.v; c++) {
      b.chunk_n[s * b.v + c] = sim_plan_chunk_layers(pl, s, c);
      b.chunk_at[s * b.v + c] = c ? b.chunk_at[s * b.v + c - 1] + b.chunk_n[s * b.v + c - 1] : 0;
      b.lmax = MAX(b.lmax, b.chunk_n[s * b.v + c]);
    }
  ModelLayerOptions lo = sim_plan_layer_options(pl, profile);
  model_layer_cost_with(profile, &pl->model, pl->tp, pl->micro_batch, &lo, &b.layer);
  if (model_is_moe(&pl->model)) {
    if (b.ts > 1 || b.ds > 1) {
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                  "MoE layers are simulated one GPU per stage (the symmetry shortcut), which this placement does "
                  "not allow%s; use sizes whose groups fill whole nodes",
                  pl->symmetry ? "" : " (--no-symmetry)");
      g_free(b.chunk_n);
      g_free(b.chunk_at);
      return FALSE;
    }
    model_layer_attention_cost(profile, &pl->model, pl->tp, pl->micro_batch, &lo, &b.moe_attn);
    ModelMoeOptions mo = sim_moe_options(pl);
    model_moe_cost(profile, &pl->model, &mo, &b.moe);
    b.moe_layer = g_new0(guint8, (gsize)b.p * b.v * b.lmax);
    for (guint s = 0; s < b.p; s++)
      for (guint c = 0; c < b.v; c++)
        for (guint l = 0; l < b.chunk_n[s * b.v + c]; l++)
          b.moe_layer[(s * b.v + c) * b.lmax + l] = (guint8)sim_moe_layer(pl, s, c, l);
  }
  ModelShape local = rank_shape(pl);
  model_embedding_cost(profile, &local, pl->tp, pl->micro_batch, &b.emb_fwd, &b.emb_bwd);
  model_head_cost(profile, &local, pl->tp, pl->micro_batch, &b.head_fwd, &b.head_bwd);
  if (b.moe_layer && pl->model.mtp && profile->kind != MODEL_PROFILE_IDEAL) {
    /* DeepSeek-V3's multi-token prediction modules, after the head on the
     * last stage: each the 2h -> h projection of the normed hidden states
     * and embeddings, an MoE layer's compute (its token communication is
     * not simulated) and its own logits and loss */
    const ModelLayerCost *a = &b.moe_attn;
    const ModelMoeCost *mc = &b.moe;
    guint64 bs = (guint64)pl->micro_batch * pl->model.seq_len / pl->tp, h = pl->model.hidden;
    ModelGemm eh = {1, bs, h, 2 * h}, eh_d = {1, bs, 2 * h, h}, eh_w = {1, 2 * h, h, bs};
    double fwd = a->fwd.seg_s[0] + a->fwd.seg_s[1] + a->fwd.seg_s[2] + mc->fwd_route_s + mc->fwd_experts_s +
                 mc->fwd_unpermute_s + model_gemm_time_s(profile, &eh);
    double bwd = a->bwd.seg_s[0] + a->bwd.seg_s[1] + a->bwd.seg_s[2] + mc->bwd_route_s + mc->bwd_experts_s +
                 mc->bwd_unpermute_s + model_gemm_time_s(profile, &eh_d) + model_gemm_time_s(profile, &eh_w);
    double hf = b.head_fwd, hb = b.head_bwd;
    b.head_fwd += pl->model.mtp * (fwd + hf);
    b.head_bwd += pl->model.mtp * (bwd + hb + (pl->recompute ? fwd : 0));
  }
  b.bwd_in = b.layer.bwd;
  b.layer_w = 0;
  for (guint j = 0; j < 3; j++) {
    b.bwd_in.seg_s[j] -= b.layer.bwd.wgrad_s[j];
    b.layer_w += b.layer.bwd.wgrad_s[j];
  }
  b.head_w = model_head_wgrad_s(profile, &local, pl->tp, pl->micro_batch);
  b.route = sim_plan_route_len(pl);
  b.blocking = !pl->stage_times && (pl->schedule == SIM_SCHEDULE_GPIPE || pl->schedule == SIM_SCHEDULE_1F1B ||
                                    pl->schedule == SIM_SCHEDULE_INTERLEAVED);
  /* Under the flow network transfers are first fixed at their time alone,
   * which sim_netops_run confirms or undoes (netops.h); when a transfer
   * inside a coarse op met another, the graph is built again without them. */
  gboolean coarse_flow = TRUE;
  /* The steady state (steady.h): first a short run that proves it, and the
   * whole iteration where it cannot. */
  guint short_m = steady_short_m(pl, observe != NULL);
build:
  b.m = short_m ? short_m : pl->microbatches;
  b.order = g_new0(GArray *, b.p);
  b.len = g_new0(guint, b.p);
  b.n_items = 0;
  for (guint s = 0; s < b.p; s++)
    b.order[s] = g_array_new(FALSE, FALSE, sizeof(SimItem));
  plan_orders(pl, profile, b.m, b.order);
  for (guint s = 0; s < b.p; s++) {
    b.len[s] = b.order[s]->len;
    b.n_items = MAX(b.n_items, b.len[s]);
  }
  b.steady = (SimSteady){0};
  b.steady_failed = FALSE;
  b.cur_item = G_MAXUINT;
  b.tp_ns = g_new0(SimTime, (gsize)b.p * b.ds * 2);
  for (guint s = 0; s < b.p; s++)
    for (guint k = 0; k < b.ds; k++) {
      SimTime *d = &b.tp_ns[(s * b.ds + k) * 2];
      guint nodes = tp_group_nodes(&b, s, k);
      double bytes = b.layer.tp_allreduce_bytes;
      ModelNet net = b.net;
      if (nodes > 1 && pl->stragglers.n_link) /* a ring across nodes runs at its slowest NIC (--slow-link) */
        net.hw.nic_bw *= tp_link_factor(&b, s, k);
      if (pl->sequence_parallel) {
        d[0] = ns(model_collective_time_s(&net, MODEL_COLL_REDUCESCATTER, bytes, pl->tp, nodes, NULL));
        d[1] = ns(model_collective_time_s(&net, MODEL_COLL_ALLGATHER, bytes, pl->tp, nodes, NULL));
      } else
        d[0] = ns(model_collective_time_s(&net, MODEL_COLL_ALLREDUCE, bytes, pl->tp, nodes, NULL));
    }
  b.moe_ns = g_new0(SimTime, (gsize)b.p * MOE_N_COMM);
  b.moe_plans = g_new(guint, (gsize)b.p * MOE_N_COMM);
  for (guint j = 0; j < b.p * MOE_N_COMM; j++)
    b.moe_plans[j] = G_MAXUINT;
  for (guint s = 0; s < b.p && b.moe_layer; s++)
    for (guint kind = 0; kind < MOE_N_COMM; kind++)
      b.moe_ns[s * MOE_N_COMM + kind] = ns(moe_analytic_s(&b, s, kind));
  /* the rings' hops on the analytic network: a send to the next rank, all
   * at once, as long as the slowest (between nodes if the ring leaves one);
   * the overlapped tensor-parallel hops, 1/(t-1) of the collective each */
  b.hop_ns = g_new0(SimTime, (gsize)b.p * b.ds * 5);
  for (guint s = 0; s < b.p && (b.cp > 1 || pl->tp_comm_overlap); s++) /* only runs that have rings */
    for (guint k = 0; k < b.ds; k++) {
      SimTime *h = &b.hop_ns[(s * b.ds + k) * 5];
      gboolean same = TRUE;
      for (guint c = 1; c < b.cp; c++)
        same = same && gpu_of_rank_c(&b, 0, c, s, k) / cluster->gpus_per_node == node_of_rank(&b, 0, s, k);
      h[HOP_KV] = h[HOP_GRAD] = ns(model_p2p_time_s(&b.net, b.layer.cp_hop_bytes, same));
      h[HOP_KV_GRAD] = ns(model_p2p_time_s(&b.net, 2 * b.layer.cp_hop_bytes, same));
      if (pl->tp_comm_overlap) {
        guint nodes = tp_group_nodes(&b, s, k);
        double bytes = b.layer.tp_allreduce_bytes;
        h[HOP_TP_GATHER] =
            ns(model_collective_time_s(&b.net, MODEL_COLL_ALLGATHER, bytes, pl->tp, nodes, NULL) / (pl->tp - 1));
        h[HOP_TP_SCATTER] =
            ns(model_collective_time_s(&b.net, MODEL_COLL_REDUCESCATTER, bytes, pl->tp, nodes, NULL) / (pl->tp - 1));
      }
    }

  b.e = sim_engine_new();
  FlowCtx fc = {0};
  if (pl->flow_network && !b.net.free_comm && !pl->stage_times) {
    if (!(fc.ops = sim_netops_new_for(cluster, pl, b.e, error))) {
      g_free(b.chunk_n);
      g_free(b.chunk_at);
      g_free(b.tp_ns);
      g_free(b.hop_ns);
      g_free(b.moe_ns);
      g_free(b.moe_plans);
      g_free(b.moe_layer);
      sim_engine_free(b.e);
      return FALSE;
    }
    /* Bisection sides: pipeline stages below p/2 against the rest; replicas
     * below d/2 against the rest. */
    guint total = topo_cluster_gpus(cluster);
    fc.side_pp = g_malloc(total);
    fc.side_dp = g_malloc(total);
    memset(fc.side_pp, 2, total);
    memset(fc.side_dp, 2, total);
    for (guint s = 0; s < pl->pp; s++)
      for (guint k = 0; k < pl->dp; k++)
        for (guint c = 0; c < b.cp; c++)
          for (guint i = 0; i < pl->tp; i++) {
            guint g = gpu_of_rank_c(&b, i, c, s, k);
            fc.side_pp[g] = s < pl->pp / 2 ? 0 : 1;
            fc.side_dp[g] = k < pl->dp / 2 ? 0 : 1;
          }
    b.flow = &fc;
  }
  if (short_m) {
    gsize n = (gsize)b.ds * b.p * b.n_items;
    b.item_lo = g_new(guint, n);
    b.item_hi = g_new(guint, n);
    b.xfer_lo = g_new(guint, n);
    b.xfer_hi = g_new(guint, n);
    b.adds = g_array_new(FALSE, FALSE, sizeof(Add));
    b.extra = g_array_new(FALSE, TRUE, sizeof(guint));
  }
  guint n_gpus = b.ts * b.p * b.ds;
  for (guint g = 0; g < n_gpus; g++)
    for (guint kind = 0; kind < N_STREAM_KINDS; kind++)
      sim_engine_add_stream(b.e, g);
  if (sim_plan_has_stragglers(pl))
    set_speeds(&b);

  b.position = g_new0(guint *, b.p);
  b.last_bwd = g_new(guint, (gsize)b.p * b.v);
  for (guint s = 0; s < b.p; s++) {
    gsize n = (gsize)b.v * b.m * 3;
    b.position[s] = g_new(guint, n);
    for (gsize j = 0; j < n; j++)
      b.position[s][j] = G_MAXUINT;
    for (guint c = 0; c < b.v; c++)
      b.last_bwd[s * b.v + c] = G_MAXUINT;
    for (guint j = 0; j < b.len[s]; j++) {
      SimItem it = g_array_index(b.order[s], SimItem, j);
      b.position[s][((guint64)it.chunk * b.m + it.microbatch) * 3 + slot_of(it)] = j;
      if (!it.forward && it.grad != SIM_GRAD_INPUT)
        b.last_bwd[s * b.v + it.chunk] = j;
    }
  }
  b.items = g_new0(ItemOps, (gsize)b.ds * b.p * b.n_items * b.ts);
  b.grad_ready = g_new0(guint, (gsize)b.ds * b.p * b.v * b.lmax * b.ts);
  b.fsdp_rs = g_new(GArray *, (gsize)b.p * b.ts);
  for (guint j = 0; j < b.p * b.ts; j++)
    b.fsdp_rs[j] = g_array_new(FALSE, FALSE, sizeof(guint));
  b.shard_gathers = b.shard_reductions = 0;
  b.shard_gather_bytes = b.shard_reduce_bytes = 0;
  b.pending = g_new0(double, b.ts);
  b.prev = g_new0(guint, b.ts);
  b.join = g_new(guint, b.ts);
  for (guint i = 0; i < b.ts; i++)
    b.join[i] = G_MAXUINT;
  b.hop_plans = g_new(guint, (gsize)b.p * b.ds * 5);
  for (gsize j = 0; j < (gsize)b.p * b.ds * 5; j++)
    b.hop_plans[j] = G_MAXUINT;
  b.tp_part = g_array_new(FALSE, TRUE, sizeof(SimTime));
  b.pp_to = g_array_new(FALSE, TRUE, sizeof(guint));
  b.tp_plans = g_new(guint, (gsize)b.p * b.ds * 3);
  for (gsize j = 0; j < (gsize)b.p * b.ds * 3; j++)
    b.tp_plans[j] = G_MAXUINT;
  b.pp_plans = g_new(guint, (gsize)b.ds * b.p * b.ts * 2);
  for (gsize j = 0; j < (gsize)b.ds * b.p * b.ts * 2; j++)
    b.pp_plans[j] = G_MAXUINT;
  if (b.flow && !pl->exact) {
    sim_netops_fixing(fc.ops, TRUE);
    for (guint s = 0; s < b.p && pl->tp > 1; s++) /* what coarse items sum: the transfers' time alone */
      for (guint k = 0; k < b.ds; k++)
        for (guint j = 0; j < (pl->sequence_parallel ? 2u : 1u); j++) {
          NetCollOp op = !pl->sequence_parallel ? NET_OP_ALLREDUCE : j == 0 ? NET_OP_REDUCESCATTER : NET_OP_ALLGATHER;
          guint plan = tp_plan(&b, s, k, op, b.layer.tp_allreduce_bytes);
          b.tp_ns[(s * b.ds + k) * 2 + j] = sim_netops_solo_ns(fc.ops, plan);
        }
    for (guint s = 0; s < b.p && b.moe_layer; s++)
      for (guint kind = 0; kind < MOE_N_COMM; kind++)
        if ((kind <= MOE_COMBINE ? pl->ep : pl->etp) > 1)
          b.moe_ns[s * MOE_N_COMM + kind] = sim_netops_solo_ns(fc.ops, moe_plan(&b, s, kind));
  }
  /* coarse items: fixed all-reduces (the analytic network, or transfers
   * fixed on the flow network), one rank per stage (the symmetry shortcut),
   * no trace (which shows every op) */
  b.coarse = !pl->exact && (!b.flow || coarse_flow) && b.ts == 1 && b.ds == 1 && !observe;
  if (b.flow && (b.cp > 1 || pl->tp_comm_overlap)) /* their rings' timing inside a coarse op is the analytic network's */
    b.coarse = FALSE;
  {
    /* Room for the graph, estimated from its shape: an item is one op, or
     * per layer and pass two compute ops on each rank and two all-reduces;
     * a transfer per rank and a gather per item. */
    double passes = pl->recompute ? 1.5 : 1.0; /* forward 1, backward 1 or 2 */
    double item_ops = b.coarse ? 1 : 2.0 * passes * mean_lpc * (b.ts + 1) + 2;
    double item_slots = b.coarse ? 1 : 4.0 * passes * mean_lpc * b.ts + 2;
    double items = (double)b.ds * b.p * b.n_items;
    double ops = items * (item_ops + b.ts + 1), slots = items * (item_slots + 3.0 * b.ts);
    if (ops < 1e8 && slots < 1e8)
      sim_engine_reserve(b.e, (guint)ops, (guint)slots, (guint)(slots + items * b.ts));
  }
  if (observe) {
    b.pieces = g_array_new(FALSE, FALSE, sizeof(SimTimelinePiece));
    b.pending_pieces = g_array_new(FALSE, FALSE, sizeof(SimTimelinePiece));
  }

  if (pl->overlap_param_gather && b.dpc > 1)
    emit_param_gathers(&b);
  for (guint k = 0; k < b.ds; k++)
    for (guint s = 0; s < b.p; s++)
      for (guint j = 0; j < b.len[s]; j++)
        emit_item(&b, s, k, j);
  b.cur_item = G_MAXUINT;
  for (guint k = 0; k < b.ds; k++)
    for (guint s = 0; s < b.p; s++)
      for (guint j = 0; j < b.len[s]; j++)
        emit_transfers(&b, s, k, j);
  guint *opt_gate = g_new(guint, (gsize)b.ds * b.p * b.ts);
  for (gsize j = 0; j < (gsize)b.ds * b.p * b.ts; j++)
    opt_gate[j] = G_MAXUINT;
  for (guint s = 0; s < b.p && !pl->stage_times; s++) /* --stage-times: the pipeline alone */
    emit_dp_and_optimizer(&b, s, opt_gate);
  g_free(opt_gate);

  if (b.flow)
    sim_netops_built(fc.ops);
  gboolean again = FALSE;
  gboolean ok = b.flow ? sim_netops_run(fc.ops, &again, error) : sim_engine_run(b.e, error);
  gboolean whole = FALSE; /* the short run proved nothing: simulate the whole iteration */
  if (ok && !again && short_m)
    whole = !steady_find(&b);
  if (ok && !again && !whole) {
    whole = !measure(&b, r);
    if (b.flow)
      flow_bisection(&b, r);
    whole = whole || b.steady_failed;
    r->fits_in_memory = r->memory.total <= sim_plan_usable_bytes(pl, profile);
    if (observe)
      ok = observe_timeline(&b, observe, data, error);
  }
  if (!ok && short_m) { /* the long run says what is wrong, as it would have alone */
    g_clear_error(error);
    ok = whole = TRUE;
  }

  for (guint s = 0; s < b.p; s++) {
    g_array_free(b.order[s], TRUE);
    g_free(b.position[s]);
  }
  g_free(b.order);
  g_free(b.position);
  g_free(b.len);
  g_free(b.last_bwd);
  g_free(b.items);
  g_free(b.grad_ready);
  for (guint j = 0; j < b.p * b.ts; j++)
    g_array_free(b.fsdp_rs[j], TRUE);
  g_free(b.fsdp_rs);
  g_free(b.tp_ns);
  g_free(b.moe_ns);
  g_free(b.hop_ns);
  g_free(b.hop_plans);
  g_clear_pointer(&b.param_gather, g_free); /* allocated again only with --overlap-param-gather */
  g_free(b.join);
  g_free(b.pending);
  g_free(b.prev);
  g_array_free(b.tp_part, TRUE);
  g_array_free(b.pp_to, TRUE);
  g_free(b.tp_plans);
  g_free(b.pp_plans);
  g_free(b.moe_plans);
  if (b.pieces) {
    g_array_free(b.pieces, TRUE);
    g_array_free(b.pending_pieces, TRUE);
  }
  sim_engine_free(b.e);
  if (b.flow) {
    sim_netops_free(fc.ops);
    g_free(fc.side_pp);
    g_free(fc.side_dp);
  }
  if (short_m) {
    g_free(b.item_lo);
    g_free(b.item_hi);
    g_free(b.xfer_lo);
    g_free(b.xfer_hi);
    g_array_free(b.adds, TRUE);
    g_array_free(b.extra, TRUE);
    b.item_lo = b.item_hi = b.xfer_lo = b.xfer_hi = NULL;
    b.adds = b.extra = NULL;
  }
  if (whole) {
    short_m = 0;
    again = TRUE;
  }
  if (again) {
    if (!whole)
      coarse_flow = FALSE;
    memset(b.bytes, 0, sizeof b.bytes);
    b.bytes_embedding = 0;
    b.logical_extra = 0;
    goto build;
  }
  g_free(b.chunk_n);
  g_free(b.chunk_at);
  g_free(b.moe_layer);
  return ok;
}
