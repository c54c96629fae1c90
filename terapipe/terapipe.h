/* ptdsim — TeraPipe (Li et al., ICML 2021): token-level pipelining of a GPT
 * model's cells, on the engine.
 *
 * The minibatch of one pipeline (B/d sequences) is cut into batch slices, and
 * each batch slice into token slices.  On every stage (cell) the slices run
 * forward in sequence order -- a slice waits for the previous cell's output
 * for it, and, by stream order, for its own earlier slices, which hold the
 * attention context -- then backward in reverse order after all forwards (a
 * synchronous flush, as GPipe), then the data-parallel gradient all-reduce
 * and the optimizer.  Tensor parallelism runs inside each cell; the t ranks
 * and the d replicas run identical timelines, so one GPU per stage is
 * simulated.  GPipe is the special case of one token slice per batch slice.
 */
#pragma once

#include <cjson/cJSON.h>

#include "../plan/plan.h"
#include "../taskgraph/timeline.h"

typedef struct {
  GArray *batch;      /* guint: sequences per batch slice, in order */
  GPtrArray *tokens;  /* per batch slice: GArray of guint, tokens per slice in sequence order */
  double predicted_s; /* Eq. 5 summed over batch slices, on the fitted cost (the DP's objective) */
  double fit_max_rel_error, fit_mean_rel_error; /* of the context fit against the direct cost; -1: not fitted */
  guint candidates_solved;                      /* t_max values the DP solved, all batch sizes */
} SimTeraPipeSlicing;

void sim_terapipe_slicing_init(SimTeraPipeSlicing *s);
void sim_terapipe_slicing_clear(SimTeraPipeSlicing *s);
/* Appends a batch slice of `b` sequences cut into `n` token slices of at
 * most one granule's difference, the longer ones first. */
void sim_terapipe_slicing_add_uniform(SimTeraPipeSlicing *s, guint b, guint seq_len, guint granularity, guint n);

/* The slicing a plan asks for: --slices auto runs the joint DP (every
 * batch-slice size's costs, one search with the fill charged once:
 * model_joint_slicing); uniform:N and lists use batch slices of
 * --micro-batch sequences. */
gboolean sim_terapipe_choose(const SimPlan *plan, const ModelProfile *profile, const TopoCluster *cluster,
                             SimTeraPipeSlicing *out, GError **error);
/* Simulates one iteration with a given slicing; with an observer (NULL:
 * none), which sees the finished timeline (taskgraph/timeline.h). */
gboolean sim_terapipe_simulate(const SimPlan *plan, const ModelProfile *profile, const TopoCluster *cluster,
                               const SimTeraPipeSlicing *slicing, SimResult *result, GError **error);
gboolean sim_terapipe_simulate_observed(const SimPlan *plan, const ModelProfile *profile, const TopoCluster *cluster,
                                        const SimTeraPipeSlicing *slicing, SimResult *result, SimTimelineFn observe,
                                        gpointer data, GError **error);
/* A slicing in words, consecutive equal batch slices together and token
 * slices run-length coded (count x tokens, in sequence order):
 *   "1 batch slice of 32 sequences, 128 token slices each: 128 x 16"
 * or, `brief`, "1 x 32 seq, 128 slices" (batch slices x sequences each,
 * token slices per batch slice; several groups joined by " + "). */
void sim_terapipe_slicing_describe(const SimTeraPipeSlicing *s, gboolean brief, GString *out);
/* M: token slices over all batch slices. */
guint sim_terapipe_slicing_count(const SimTeraPipeSlicing *s);
/* JSON of a slicing: {"batch_slices": [...], "token_slices": [[...], ...],
 * "dp_predicted_latency_s", "context_fit_max_rel_error", ...}. */
void sim_terapipe_slicing_json(const SimTeraPipeSlicing *s, cJSON *into);
