/* ptdsim — the options that describe one configuration, shared by `run`,
 * `plan` and `sweep`: one table of names, kinds and help; strict parsing of
 * their values (whole numbers in decimal only); the request they make; and
 * the `ptdsim run` command line that reproduces a configuration. */
#pragma once

#include <glib.h>

#include "../runtime/runtime.h"
#include "../plan/plan.h"

/* The most Monte-Carlo trials of a whole run (--trials). */
#define SEARCH_MAX_TRIALS 100000

typedef enum {
  SEARCH_OPT_COUNT, /* a whole number from 1 to 2^31-1 */
  SEARCH_OPT_TEXT,  /* a word or a file name; checked where it is used */
  SEARCH_OPT_FLAG,  /* present or not */
} SearchOptKind;

/* The options, in the order `--help` lists them and commands print them. */
typedef enum {
  SEARCH_OPT_MODEL,
  SEARCH_OPT_LAYERS,
  SEARCH_OPT_HIDDEN,
  SEARCH_OPT_HEADS,
  SEARCH_OPT_SEQ_LEN,
  SEARCH_OPT_VOCAB,
  SEARCH_OPT_FFN_HIDDEN,
  SEARCH_OPT_SWIGLU,
  SEARCH_OPT_QUERY_GROUPS,
  SEARCH_OPT_KV_CHANNELS,
  SEARCH_OPT_NORM,
  SEARCH_OPT_POSITION,
  SEARCH_OPT_UNTIE,
  SEARCH_OPT_NO_BIAS,
  SEARCH_OPT_CLUSTER,
  SEARCH_OPT_NODES,
  SEARCH_OPT_PROFILE,
  SEARCH_OPT_GPUS,
  SEARCH_OPT_TP,
  SEARCH_OPT_PP,
  SEARCH_OPT_DP,
  SEARCH_OPT_GLOBAL_BATCH,
  SEARCH_OPT_LOCAL_BATCH,
  SEARCH_OPT_MICRO_BATCH,
  SEARCH_OPT_SCHEDULE,
  SEARCH_OPT_SCHEDULE_FILE,
  SEARCH_OPT_STAGE_TIMES,
  SEARCH_OPT_ACTIVATION_LIMIT,
  SEARCH_OPT_LAYERS_PER_CHUNK,
  SEARCH_OPT_CHUNKS,
  SEARCH_OPT_FIRST_STAGE_LAYERS,
  SEARCH_OPT_LAST_STAGE_LAYERS,
  SEARCH_OPT_ACCOUNT_EMBEDDING,
  SEARCH_OPT_ACCOUNT_LOSS,
  SEARCH_OPT_PIPELINE_LAYOUT,
  SEARCH_OPT_SLICES,
  SEARCH_OPT_GRANULARITY,
  SEARCH_OPT_RECOMPUTE,
  SEARCH_OPT_RECOMPUTE_EVERY,
  SEARCH_OPT_RECOMPUTE_MODULES,
  SEARCH_OPT_NO_SCATTER_GATHER,
  SEARCH_OPT_NO_FUSION,
  SEARCH_OPT_ATTENTION,
  SEARCH_OPT_PRECISION,
  SEARCH_OPT_SEQUENCE_PARALLEL,
  SEARCH_OPT_DDP,
  SEARCH_OPT_DISTRIBUTED_OPTIMIZER,
  SEARCH_OPT_ZERO,
  SEARCH_OPT_WORKLOAD,
  SEARCH_OPT_NETWORK,
  SEARCH_OPT_PLACEMENT,
  SEARCH_OPT_TOKENS,
  SEARCH_OPT_PRICE,
  SEARCH_OPT_NO_SYMMETRY,
  SEARCH_OPT_ALLOW_OOM,
  SEARCH_OPT_MEMORY_RESERVE,
  SEARCH_OPT_EXACT,
  SEARCH_OPT_CP,
  SEARCH_OPT_TP_COMM_OVERLAP,
  SEARCH_OPT_OVERLAP_PARAM_GATHER,
  /* the step as the framework runs it (models/layer.h) */
  SEARCH_OPT_FRAMEWORK,
  SEARCH_OPT_HOST_OP,
  SEARCH_OPT_CUDA_GRAPHS,
  SEARCH_OPT_CLOCK,
  SEARCH_OPT_POWER_LIMIT,
  /* mixture of experts (models/moe.h) */
  SEARCH_OPT_NUM_EXPERTS,
  SEARCH_OPT_MOE_TOPK,
  SEARCH_OPT_MOE_FFN_HIDDEN,
  SEARCH_OPT_MOE_SHARED_FFN_HIDDEN,
  SEARCH_OPT_MOE_LAYER_FREQ,
  SEARCH_OPT_MOE_FIRST_DENSE,
  SEARCH_OPT_EP,
  SEARCH_OPT_EXPERT_TP,
  SEARCH_OPT_MOE_IMBALANCE,
  SEARCH_OPT_MOE_CAPACITY_FACTOR,
  SEARCH_OPT_MOE_TOKEN_DISPATCHER,
  SEARCH_OPT_MOE_ROUTER_NUM_GROUPS,
  SEARCH_OPT_MOE_ROUTER_GROUP_TOPK,
  SEARCH_OPT_OVERLAP_MOE_EP_COMM,
  /* stragglers (plan/plan.h) */
  SEARCH_OPT_SLOW,
  SEARCH_OPT_GPU_SPEED,
  SEARCH_OPT_SLOW_LINK,
  SEARCH_OPT_SEED,
  /* the whole run (runtime/runtime.h) */
  SEARCH_OPT_GPU_FAILURE_RATE,
  SEARCH_OPT_NODE_FAILURE_RATE,
  SEARCH_OPT_SWITCH_FAILURE_RATE,
  SEARCH_OPT_RESTART_TIME,
  SEARCH_OPT_STORAGE_BW,
  SEARCH_OPT_STORAGE_NODE_BW,
  SEARCH_OPT_HOST_COPY_BW,
  SEARCH_OPT_CHECKPOINT,
  SEARCH_OPT_CHECKPOINT_EVERY,
  SEARCH_OPT_SPARE_NODES,
  SEARCH_OPT_REPAIR_HOURS,
  SEARCH_OPT_TRIALS,
  SEARCH_OPT_ZERO_PREFETCH_BUCKET,
  SEARCH_OPT_ZERO_MAX_LIVE,
  SEARCH_OPT_ZERO_REUSE_DISTANCE,
  SEARCH_OPT_ZERO_PERSISTENCE,
  SEARCH_OPT_ZERO_REDUCE_BUCKET,
  SEARCH_OPT_ZERO_CONTIGUOUS_GRADIENTS,
  SEARCH_OPT_ZERO_TRACE_FIXED,
  SEARCH_OPT_FSDP,
  SEARCH_OPT_HSDP,
  SEARCH_OPT_FSDP_REDUCE_DTYPE,
  SEARCH_OPT_FSDP_RESHARD,
  SEARCH_N_OPTIONS
} SearchOptId;

typedef struct {
  const char *name; /* the long option without its dashes: "micro-batch" */
  SearchOptKind kind;
  const char *metavar; /* NULL for flags */
  const char *help;
  /* For words from a closed set (schedule, recompute...): the set and the
   * value of each word; `sweep --OPTION all` means all of them.  NULL: free. */
  const PtdWord *words;
} SearchOption;

const SearchOption *search_option(SearchOptId id);
/* The option of that long name (without dashes), or -1. */
gint search_option_find(const char *name);

/* Another tool's name for an option of the same meaning (Megatron-LM's
 * --tensor-model-parallel-size for --tp): the command line takes it in the
 * option's place (an option given under both names is given twice); what
 * ptdsim prints is always its own name.  `values` maps the other tool's
 * words onto the option's ("e4m3" -> "fp8"; NULL: the value as given). */
typedef struct {
  const char *name; /* without dashes */
  SearchOptId id;
  const char *tool; /* whose name it is: "Megatron-LM" */
  const char *const (*values)[2]; /* pairs, ending in {NULL, NULL} */
} SearchAlias;
/* The aliases, ending in {NULL}. */
const SearchAlias *search_aliases(void);
/* The value under alias `a` as the option's own word, or NULL with a
 * one-line error naming the alias and its words. */
const char *search_alias_value(const SearchAlias *a, const char *value, GError **error);

/* The values given for one configuration. */
typedef struct {
  gboolean given[SEARCH_N_OPTIONS];
  guint count[SEARCH_N_OPTIONS]; /* SEARCH_OPT_COUNT */
  char *text[SEARCH_N_OPTIONS];  /* SEARCH_OPT_TEXT */
} SearchConfig;

void search_config_init(SearchConfig *c);
void search_config_clear(SearchConfig *c);
void search_config_copy(SearchConfig *to, const SearchConfig *from);
/* Sets option `id` from its text (NULL for a flag): a count must be digits
 * only, 1 to 2^31-1 ("08", "0x8", "-1", "8.0" and "" are refused), a word
 * of a closed set one of its words.  A text value is not parsed further
 * here: search_value_check does that where a value first arrives.  Errors
 * are one line naming the option. */
gboolean search_config_set(SearchConfig *c, SearchOptId id, const char *value, GError **error);
/* Clears option `id` (as if not given). */
void search_config_unset(SearchConfig *c, SearchOptId id);

/* The run request of a configuration (the model by name or by shape, the
 * defaults of `ptdsim run`); one-line errors.  The request points into `c`,
 * which must outlive it. */
gboolean search_config_request(const SearchConfig *c, SimPlanRequest *req, GError **error);
/* The whole-run options of a configuration (runtime/runtime.h), defaults
 * filled; one-line errors (a rate below zero, a bandwidth of zero, an
 * interval of nothing, a whole-run option without --tokens). */
gboolean search_config_runtime(const SearchConfig *c, RtOptions *o, GError **error);
/* Reads a token count: 300e9, 300B, 1.2T; 0 when text is NULL. */
gboolean search_tokens(const char *text, double *out, GError **error);
/* Checks one value of an option on its own, as run would refuse it (a
 * count, a word of a closed set, --tokens, --memory-reserve, --slow, a
 * --schedule-file that cannot be read): the command line's values and a
 * sweep's grid values are checked by it as they arrive, so a sweep refuses
 * a value wrong for every row before any row runs. */
gboolean search_value_check(SearchOptId id, const char *value, GError **error);
/* Writes a token count as people write it -- 15T, 300B, 1.2T, 2.5M: the
 * largest of the suffixes T, B and M that leaves a mantissa of at least 1,
 * with the fewest decimals (at most 3) -- when search_tokens reads that
 * back to the identical double; else the exact number (2048,
 * 123456789012). */
void search_tokens_append(GString *s, double tokens);

/* `ptdsim run ...` with every option given, in table order, each value
 * quoted for a POSIX shell where it needs it. */
char *search_config_command(const SearchConfig *c);
