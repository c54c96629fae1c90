/* ptdsim — what an op's tag and stream say, shared by every task graph
 * (PTD-P, ZeRO, TeraPipe), the exposed-time measure and the trace writers.
 *
 * A simulated GPU g owns streams g * SIM_STREAM_KINDS + kind, kinds in the
 * order below (zero.c adds a host stream after them); an op's tag carries
 * its category and pass (engine.h's SimOpTag), which exposed.c classifies
 * and the trace writers name (taskgraph/timeline.c). */
#pragma once

enum { SIM_STREAM_COMPUTE, SIM_STREAM_TP, SIM_STREAM_PP_SEND, SIM_STREAM_PP_RECV, SIM_STREAM_DP, SIM_STREAM_KINDS };

/* Tag categories.  SIM_CAT_PP_GATHER: the scatter/gather optimization's
 * all-gather after a pipeline transfer; SIM_CAT_CP: context parallelism's
 * ring hops; SIM_CAT_EP: the bytes of the MoE token communication (its ops
 * are tagged SIM_CAT_TP: they block the layer as the tensor-parallel
 * collectives do). */
enum {
  SIM_CAT_COMPUTE,
  SIM_CAT_TP,
  SIM_CAT_PP,
  SIM_CAT_PP_GATHER,
  SIM_CAT_DP,
  SIM_CAT_OPTIMIZER,
  SIM_CAT_CP,
  SIM_CAT_EP,
  SIM_N_CATS
};

/* A tag's pass.  SIM_PASS_WEIGHT: a zero-bubble schedule's W (the weight
 * gradients apart). */
enum { SIM_PASS_FORWARD, SIM_PASS_BACKWARD, SIM_PASS_RECOMPUTE, SIM_PASS_OTHER, SIM_PASS_WEIGHT };
