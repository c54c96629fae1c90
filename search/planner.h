/* ptdsim — the configuration search behind `ptdsim plan`: every (t, p, d, b,
 * schedule, v, recompute) that a model, GPU budget and global batch allow,
 * and ZeRO stages 1-3 for t = p = 1 (sim/zero.h), the ones that fit in
 * memory simulated, ranked by iteration time. */
#pragma once

#include <glib.h>

#include "../sim/plan.h"

typedef struct {
  SimPlanRequest base;  /* model, gpus (the budget), global_batch, tokens, network, fusion...; tp/pp/dp/micro_batch,
                           schedule, chunks and recompute are what the search sets */
  gboolean allow_fewer; /* also t*p*d < gpus (every d that divides the batch) */
  guint keep;           /* rows wanted (--top); candidates that provably cannot enter the best `keep` are
                           pruned; 0: keep (and simulate) everything that fits */
} SearchRequest;

typedef struct {
  guint gpus, tp, pp, dp, micro_batch, chunks, microbatches;
  SimSchedule schedule; /* 1f1b or interleaved; ignored with zero */
  guint zero;           /* ZeRO stage, 0: none */
  gboolean recompute;
  double iteration_time_s, tflops_per_gpu, memory_GiB, training_days, tokens_per_s;
} SearchRow;

typedef struct {
  GArray *rows; /* SearchRow, best first; every row fits in memory */
  guint searched;      /* candidates enumerated */
  guint simulated;     /* fitted in memory and simulated */
  guint out_of_memory; /* did not fit (not simulated) */
  guint infeasible;    /* rejected by the plan checks (e.g. too many ops) */
  guint pruned;        /* fit, but their compute lower bound is above the keep-th best time */
} SearchResult;

/* Enumerates (largest GPU count first), checks memory, simulates what fits
 * unless pruned, and sorts: iteration time
 * ascending, ties by (memory, gpus, t, p, d, b, schedule, v, zero, recompute)
 * so the order is total.  Fails with one line when nothing fits. */
gboolean search_run(const SearchRequest *req, const ModelProfile *profile, const TopoCluster *cluster,
                        SearchResult *out, GError **error);
void search_result_clear(SearchResult *r);
/* The total order used for ranking (exposed for tests). */
int search_row_cmp(const SearchRow *a, const SearchRow *b);
