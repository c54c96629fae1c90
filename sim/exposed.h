/* ptdsim — what a GPU was doing, measured on a finished timeline.
 *
 * Ops become edges (+1 at the start, -1 at the end, by class); a sweep over
 * the sorted edges splits [0, end] into the classes by priority compute >
 * tensor-parallel > optimizer > data-parallel > pipeline > idle: time counts
 * as the highest-priority class active then ("exposed" time).  Used by the
 * PTD-P and TeraPipe graphs alike (their tag categories are
 * SIM_CAT_*, tags.h). */
#pragma once

#include "engine.h"
#include "steady.h"

enum { SIM_CLS_COMPUTE, SIM_CLS_TP, SIM_CLS_OPT, SIM_CLS_DP, SIM_CLS_PP, SIM_N_CLS };

/* The class of a tag category (SIM_CAT_*, tags.h). */
guint sim_exposed_class(guint category);
/* Adds [s0, s1) in class `cls` to `edges` (a GArray of the module's edges,
 * from sim_exposed_edges_new); empty intervals are skipped. */
void sim_exposed_add(GArray *edges, SimTime s0, SimTime s1, guint cls);
/* Adds op's interval in the class of its tag's category. */
void sim_exposed_add_op(GArray *edges, const SimEngine *e, guint op);
GArray *sim_exposed_edges_new(void);
/* Sorts `edges` and splits [0, end] by class into out[0..SIM_N_CLS-1], idle
 * into out[SIM_N_CLS], in seconds.  With end = 0 it measures, per class,
 * the union of its intervals where no higher class is active. */
void sim_exposed_split(GArray *edges, SimTime end, double out[SIM_N_CLS + 1]);
/* The same for the long run of a steady state proved on the short run
 * whose edges these are (steady.h): `end` is the short run's. */
void sim_exposed_split_steady(GArray *edges, SimTime end, const SimSteady *st, double out[SIM_N_CLS + 1]);

/* The pipeline's busiest GPU among gpus[0..n-1] (NULL: GPUs 0..n-1), whose
 * streams are laid out as in timeline.h: its busy work is the time of its
 * compute and tensor-parallel ops (which block compute), the optimizer left
 * out.  Returns the index of the first busiest GPU; *work is its busy time
 * in ns and *flush the latest end of busy work on any of them. */
guint sim_exposed_busiest(const SimEngine *e, const guint *gpus, guint n, double *work, SimTime *flush);
/* The same for the long run of a steady state proved on this short run. */
guint sim_exposed_busiest_steady(const SimEngine *e, const guint *gpus, guint n, const SimSteady *st, double *work,
                                 SimTime *flush);
