/* ptdsim — the finished timeline of a PTD-P, ZeRO or TeraPipe run, handed
 * to an observer (the Perfetto trace writer) before the engine is freed.
 *
 * Every task graph lays out its streams the same way (sim/tags.h):
 * simulated GPU g owns streams g * SIM_STREAM_KINDS + kind, kinds in the
 * order of sim_timeline_stream_name(); op tags use the categories of
 * sim_timeline_category_name().  Simulated GPU g is tensor rank i, replica k
 * and stage s with g = i + ts (k + ds s); under the symmetry shortcut each
 * simulated GPU stands for the ranks of its class (ts = 1: the t ranks of
 * its tensor-parallel group; replica k: replicas_stood_for[k] replicas).
 *
 * The observer is optional: runs without one do exactly what they did
 * before, with no extra work.
 */
#pragma once

#include "../plan/plan.h"
#include "../sim/engine.h"
#include "../sim/tags.h"

/* What an op is, in more detail than its tag, for traces: the model part
 * it computes (several pieces when one op runs several parts back to back,
 * as compute between two tensor-parallel all-reduces does) or the
 * communication it stands for.  Recorded only when a run is observed. */
enum {
  SIM_PART_NONE,
  SIM_PART_EMBEDDING,
  SIM_PART_ATTENTION, /* layernorm 1, QKV, attention, projection (backward: the same in reverse) */
  SIM_PART_MLP,       /* bias-dropout-add, layernorm 2, the MLP */
  SIM_PART_RESIDUAL,  /* the closing bias-dropout-add */
  SIM_PART_LAYERNORM, /* backward's closing layernorm 1 and residual sum */
  SIM_PART_HEAD,      /* final layernorm, logits and loss */
  SIM_PART_QKV,       /* ZeRO's units: layernorm 1, QKV and the attention core */
  SIM_PART_PROJECTION,
  SIM_PART_MLP_UP, /* bias-dropout-add, layernorm 2, MLP h -> 4h, GeLU */
  SIM_PART_MLP_DOWN,
  SIM_PART_LAYERS, /* a TeraPipe cell: `layers` layers from `layer` */
  SIM_N_PARTS
};
enum {
  SIM_ACT_RUN,                /* computes (or, for communication ops, the category's own label) */
  SIM_ACT_PARAM_GATHER,       /* ZeRO-3: gathers the part's parameters */
  SIM_ACT_GRAD_REDUCE_SCATTER,/* ZeRO: reduce-scatters the part's gradients */
  SIM_ACT_PARAM_ALLGATHER,    /* ZeRO-1/2: the updated parameters gathered after the step */
  SIM_ACT_BROADCAST,          /* TeraPipe: the receiving rank broadcasts to its tensor group */
  SIM_ACT_GRAD_ALLREDUCE,     /* ZeRO-3: all-reduces a bucket of gradients (the last part's named) */
  SIM_N_ACTS
};

typedef struct {
  guint op;
  guint8 act, part;
  guint8 pass;     /* the piece's own pass when the op's tag has another (SIM_TIMELINE_PASS_OP: the op's) */
  guint16 layers;  /* SIM_PART_LAYERS: how many */
  gint32 layer;    /* -1: not a layer's */
  double seconds;  /* this piece's share of the op's time; 0: all of it */
} SimTimelinePiece;

#define SIM_TIMELINE_PASS_OP 255

/* Appends a piece to `log` (a GArray of SimTimelinePiece; NULL: nothing is
 * recorded), of the op's own pass.  Pieces of an op are appended in order,
 * ops in increasing order. */
void sim_timeline_piece(GArray *log, guint op, guint act, guint part, gint layer, guint layers, double seconds);
/* "attention", "MLP", ...; "" for SIM_PART_NONE. */
const char *sim_timeline_part_name(guint part);

typedef struct {
  const SimEngine *engine;
  const SimPlan *plan;
  guint ts, ds, p;       /* simulated tensor ranks, replicas, stages */
  const guint *gpu_of;   /* per simulated GPU: its GPU number in the cluster (placement applied) */
  const char *item_unit; /* what a tag's microbatch field counts: "mb" (PTD-P) or "slice" (TeraPipe) */
  guint mirror; /* TeraPipe: token slices M; a backward tag's field j >= M is slice 2M - 1 - j (0: none) */
  const GArray *pieces; /* SimTimelinePiece sorted by op; NULL: none */
  /* PTD-P under the symmetry shortcut: per simulated replica the job's
   * replica (NULL: the same index) and how many replicas it stands for
   * (NULL: one each, or all d for one) */
  const guint *replica_of, *replicas_stood_for;
} SimTimeline;

/* The pieces of `op` (n = 0: none). */
const SimTimelinePiece *sim_timeline_pieces(const SimTimeline *timeline, guint op, guint *n);

/* Called once after a successful run.  Returning FALSE (with `error` set)
 * makes the run fail with that error. */
typedef gboolean (*SimTimelineFn)(const SimTimeline *timeline, gpointer data, GError **error);

/* "compute", "tp", "pp-send", "pp-recv", "dp". */
const char *sim_timeline_stream_name(guint kind);
/* Trace category of a tag category: "compute", "tp", "pp", "pp" (the
 * scatter/gather all-gather), "dp", "optimizer". */
const char *sim_timeline_category_name(guint category);
/* What an op of this category is, in a word or two ("forward", "all-reduce",
 * "send", "all-gather", "grad all-reduce", "optimizer"). */
const char *sim_timeline_category_label(guint category);
