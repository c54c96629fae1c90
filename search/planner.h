/* ptdsim — the configuration search behind `ptdsim plan`: every (t, p, d, b,
 * schedule, v, recompute, pipeline split) that a model, GPU budget and
 * global batch allow,
 * and ZeRO stages 1-3 for t = p = 1 (zero/zero.h), the ones that fit in
 * memory simulated (on every core), ranked by iteration time.  Options the
 * user gives pin the search: --tp 8 searches t = 8 only, --schedule
 * interleaved the interleaved schedule only, and so on. */
#pragma once

#include <glib.h>

#include "../plan/plan.h"
#include "options.h"

/* What plan ranks by: the iteration time (and so the time to train, the
 * batch being fixed); the GPU-seconds an iteration takes (the cost of a
 * token, whatever a GPU-hour's price: with --tokens, the whole run's
 * expected GPU-hours, failures and checkpoints included); or the same at
 * the steady pace (tokens per dollar).  They differ where the candidates'
 * GPU counts do (--allow-fewer) or their runs' interruptions do. */
typedef enum { SEARCH_OBJECTIVE_TIME, SEARCH_OBJECTIVE_COST, SEARCH_OBJECTIVE_TOKENS_PER_DOLLAR } SearchObjective;

typedef struct {
  /* The user's options: model, gpus (the budget), global batch and any
   * other; tp, pp, dp, micro-batch, schedule, chunks or layers-per-chunk,
   * recompute, zero, ddp and the pipeline split (--first-stage-layers,
   * --last-stage-layers, --account-for-embedding, --account-for-loss),
   * when given, pin the search to them. */
  const SearchConfig *config;
  gboolean allow_fewer; /* also t*p*d < gpus (every d that divides the batch) */
  guint keep;           /* rows wanted (--top); candidates that provably cannot enter the best `keep` are
                           pruned; 0: keep (and simulate) everything that fits */
  guint jobs;           /* threads simulating; 0 or 1: one */
  gboolean rejected;    /* also return the candidates not ranked, with their reason */
  SearchObjective objective;
} SearchRequest;

typedef enum {
  SEARCH_ROW_RANKED,        /* fits, simulated */
  SEARCH_ROW_OUT_OF_MEMORY, /* did not fit (not simulated) */
  SEARCH_ROW_INFEASIBLE,    /* rejected by the plan checks (e.g. too many ops) */
  SEARCH_ROW_PRUNED,        /* fits, but its lower bound (bound_s) is above the keep-th best time */
} SearchRowStatus;

typedef struct {
  SearchConfig config; /* the candidate's options: search_config_command gives its `ptdsim run` */
  SearchRowStatus status;
  char *reason; /* not ranked: why (one line) */
  guint gpus, tp, pp, dp, micro_batch, chunks, microbatches;
  guint cp;             /* context-parallel size (1: none) */
  guint ep, expert_tp;  /* MoE: expert-parallel and expert tensor-parallel sizes (0: a dense model) */
  SimSchedule schedule; /* ignored with zero */
  guint zero;           /* ZeRO stage, 0: none */
  guint fsdp;           /* FSDP2: 0 none, 1 full sharding, R > 1 HSDP with R replicas */
  ModelRecompute recompute;
  gboolean sequence_parallel, distributed_optimizer;
  const char *attention; /* the kernels it ran: flash, fused or unfused (static strings) */
  SimSplit split;        /* the pipeline split (all zero: even) */
  gboolean uneven;       /* its stages hold different numbers of layers (or its chunks do) */
  guint first_layers, mid_layers, last_layers; /* stage 0's, a middle stage's and stage p - 1's layers */
  guint *stage_layers;   /* every stage's layers (pp of them; NULL where no plan was made) */
  double iteration_time_s, tflops_per_gpu, memory_GiB, training_days, tokens_per_s; /* memory: also when OOM */
  double model_tflops_per_gpu, mfu; /* model FLOPs per second per GPU, and over the peak (a fraction) */
  double peak_tflops;               /* the peak MFU is measured against: the run's precision's */
  const char *precision;            /* that precision: fp16, bf16 or fp8 (static strings) */
  gboolean sc21_reproduction;       /* sim_plan_is_sc21_reproduction: Eq. 3 is its headline */
  /* with --tokens: the whole run (runtime/runtime.h), expected days and
   * the share of them spent training */
  double run_days, effective_training_time;
  /* with `keep`: a lower bound on iteration_time_s known before simulating
   * (its compute on the device with the pipeline's fill and drain, or where
   * that is not derived, its FLOPs at peak loosened by a slack: bound_flops) */
  double bound_s;
  gboolean bound_flops;
  double bound_score; /* the least score bound_s allows (objective_bound) */
  /* the objective's value (lower is better): the iteration time, or GPUs
   * times it (times the whole run's days over its ideal days for the cost
   * with --tokens); 0 where not simulated */
  double score;
  double price_per_gpu_hour; /* the plan's (--price-per-gpu-hour, or the cluster's); 0: none */
} SearchRow;

/* Context-parallel sizes plan tries unpinned: up to SEARCH_MAX_CP, each
 * rank keeping at least SEARCH_MIN_CP_TOKENS of the sequence (shorter
 * sequences gain nothing from it: their activations are small next to the
 * model state, and the ring's hops stop hiding behind the attention). */
#define SEARCH_MAX_CP 16u
/* Pipeline splits plan tries per p: the even one where p divides the
 * layers, and at most this many uneven ones in all (sim_split_candidates). */
#define SEARCH_MAX_SPLITS 4u
#define SEARCH_MIN_CP_TOKENS 4096u

/* "none", "full" or "selective". */
const char *search_recompute_word(ModelRecompute r);

typedef struct {
  GArray *rows;     /* SearchRow, best first; every row fits in memory */
  GArray *rejected; /* SearchRow not ranked, in search order (with `rejected`) */
  guint searched;      /* candidates enumerated */
  guint simulated;     /* fitted in memory and simulated */
  guint out_of_memory; /* did not fit (not simulated) */
  guint infeasible;    /* rejected by the plan checks */
  guint pruned;        /* fit, but could not enter the best `keep` */
  char *first_infeasible; /* the reason of the first infeasible candidate, or NULL */
  ModelShape model;       /* the model searched */
} SearchResult;

/* Enumerates (largest GPU count first), checks memory, prunes, simulates
 * what is left in batches of a fixed size (so that what is pruned does not
 * depend on the number of threads) and sorts: iteration time ascending,
 * ties by (memory, gpus, t, p, d, b, schedule, v, zero, recompute, ...,
 * split), a total order.  Fails with one line when nothing fits. */
gboolean search_run(const SearchRequest *req, const ModelProfile *profile, const TopoCluster *cluster,
                    SearchResult *out, GError **error);
void search_result_clear(SearchResult *r);
/* The total order used for ranking (exposed for tests). */
int search_row_cmp(const SearchRow *a, const SearchRow *b);
