/* ptdsim — one training configuration (a "plan"), the request a command
 * line makes (validate.h turns it into a plan), and the results of
 * simulating it. */
#pragma once

#include <glib.h>

#include "../models/layer.h"
#include "../models/memory.h"
#include "../models/profile.h"
#include "../models/transformer.h"
#include "../schedule/schedule.h"
#include "../topologies/cluster.h"
#include "layout.h"

/* TeraPipe token slicing: chosen by the DP, n equal slices, or a list. */
typedef enum { SIM_SLICES_AUTO, SIM_SLICES_UNIFORM, SIM_SLICES_LIST } SimSlicesMode;
#define SIM_MAX_SLICES 4096
typedef enum { SIM_DDP_TORCH, SIM_DDP_LOCAL } SimDdp;
/* What one iteration computes.  GPT: the whole training step (embedding,
 * layers, logits and loss).  LAYERS: the transformer layers alone, as
 * TeraPipe's evaluation benchmarks them (test_transformer_terapipe.py: random
 * hidden states in, the mean of the last layer's output as the loss; no
 * embedding, no logits). */
typedef enum { SIM_WORKLOAD_GPT, SIM_WORKLOAD_LAYERS } SimWorkload;
/* Where rank (tensor i, replica k, stage s) runs.  TP_DP_PP:
 * Megatron's order, GPU = i + t(k + d s); DP_OUTERMOST: GPU = i + t(s + p k);
 * MISALIGNED: Megatron's order shifted by half a node, so every
 * tensor-parallel group straddles two nodes (a deliberately bad placement). */
typedef enum { SIM_PLACEMENT_TP_DP_PP, SIM_PLACEMENT_DP_OUTERMOST, SIM_PLACEMENT_MISALIGNED } SimPlacement;
/* --network: flows on the cluster's graph, or the analytic alpha-beta model. */
typedef enum { SIM_NETWORK_FLOW, SIM_NETWORK_ANALYTIC } SimNetwork;
/* FSDP2's gradient reduction dtype and reshard_after_forward (default:
 * torchtitan's, never with a pipeline, else always). */
typedef enum { SIM_REDUCE_FP32, SIM_REDUCE_BF16 } SimReduceDtype;
typedef enum { SIM_RESHARD_DEFAULT, SIM_RESHARD_ALWAYS, SIM_RESHARD_NEVER } SimReshard;
/* --moe-token-dispatcher */
typedef enum { SIM_DISPATCH_ALLTOALL, SIM_DISPATCH_ALLGATHER, SIM_DISPATCH_DEEPEP } SimDispatcher;

/* The words of the worded options and the values they stand for, in the
 * order the options list them (base/text.h). */
extern const PtdWord sim_ddp_words[], sim_recompute_words[], sim_network_words[], sim_placement_words[],
    sim_workload_words[], sim_reduce_dtype_words[], sim_reshard_words[], sim_attention_words[],
    sim_precision_words[], sim_dispatcher_words[], sim_framework_words[], sim_clock_words[];
/* --clock: GEMMs at the profile's sustained clock (a long run) or at the
 * boost clock (a short measurement after idle). */
typedef enum { SIM_CLOCK_SUSTAINED, SIM_CLOCK_BURST } SimClock;
/* The host's time per kernel launch with --framework eager when
 * --host-op-us is not given: the median start-to-start gap of consecutive
 * launches on a thread in the shipped PyTorch step traces of an H100
 * (ptdsim fit --profiler-trace calibrate/measurements/h100-step-trace-*.json.gz:
 * 28.8 and 30.3 us; their mean). */
#define SIM_EAGER_HOST_OP_US 29.6

/* How the layers are split over the pipeline stages (Megatron-LM's
 * --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers,
 * or --account-for-embedding-in-pipeline-split /
 * --account-for-loss-in-pipeline-split); all zero: evenly. */
typedef struct {
  guint first, last;        /* layers of the first / last stage; 0: not given */
  gboolean embedding, loss; /* the embedding / the loss counts as one layer in the split */
} SimSplit;

/* Stragglers (--slow, --gpu-speed, --slow-link): GPUs that run at a
 * fraction of their speed, and inter-node links at a fraction of their
 * rate.  A GPU's speed is the least of the entries that name it (its rank,
 * its node or its stage) and of its lognormal draw (median 1, capped at 1,
 * from a hash of the seed and the GPU: the same seed gives the same draw). */
typedef enum { SIM_SLOW_RANK, SIM_SLOW_NODE, SIM_SLOW_STAGE, SIM_SLOW_RAIL } SimSlowKind;
#define SIM_MAX_SLOW 64
typedef struct {
  SimSlowKind kind;
  guint index;
  double factor; /* 0 < f <= 1 for GPUs; 0 <= f <= 1 for links (0: a rail down) */
} SimSlow;
typedef struct {
  guint n_gpu, n_link;
  SimSlow gpu[SIM_MAX_SLOW], link[SIM_MAX_SLOW];
  double sigma; /* --gpu-speed lognormal:SIGMA; 0: none */
  guint64 seed;
} SimStragglers;
/* DeepSpeed ZeRO stage 3's settings, in elements, with the names of its
 * config (deepspeed/runtime/zero/constants.py, v0.3.14, April 2021: the
 * release SC21's comparison ran on); defaults SIM_ZERO_DEFAULT_*. */
typedef struct {
  guint64 prefetch_bucket; /* stage3_prefetch_bucket_size: elements gathered ahead of use */
  guint64 max_live;        /* stage3_max_live_parameters: no prefetch while this many are gathered */
  guint64 max_reuse;       /* stage3_max_reuse_distance: kept gathered if used again within this many */
  guint64 persistence;     /* stage3_param_persistence_threshold: smaller tensors stay whole */
  guint64 reduce_bucket;   /* reduce_bucket_size: gradients reduced together */
  gboolean contiguous;     /* contiguous_gradients: reduce-scatter per tensor; else all-reduce per bucket */
  gboolean trace_fixed;    /* the sub-module trace lines up (later releases): prefetch and reuse work */
} SimZeroKnobs;
#define SIM_ZERO_DEFAULT_PREFETCH_BUCKET 50000000u
#define SIM_ZERO_DEFAULT_MAX_LIVE 1000000000u
#define SIM_ZERO_DEFAULT_MAX_REUSE 1000000000u
#define SIM_ZERO_DEFAULT_PERSISTENCE 100000u
#define SIM_ZERO_DEFAULT_REDUCE_BUCKET 500000000u

typedef struct {
  ModelShape model;
  guint gpus, tp, pp, dp;
  guint cp;             /* context-parallel ranks (1: none); GPUs = t cp p d */
  guint global_batch, micro_batch;
  guint microbatches;   /* m = B / (b d), per pipeline */
  guint chunks;         /* v, model chunks per device (1 unless interleaved) */
  SimSchedule schedule;
  SimDdp ddp;
  gboolean recompute;    /* full recomputation */
  gboolean selective;    /* selective recomputation (then recompute is FALSE) */
  /* A framework's own policy (op, layer, modules; then recompute and
   * selective are FALSE), else MODEL_RECOMPUTE_NONE; its parameters:
   * layer's k (every k-th layer of a rank checkpointed whole) and
   * modules' MODEL_RC_* bits. */
  ModelRecompute ac;
  guint recompute_every;
  guint recompute_modules;
  gboolean scatter_gather;
  gboolean fusion;
  gboolean symmetry;    /* simulate one rank per class of ranks that run the same timeline */
  gboolean allow_oom;   /* simulate even if it does not fit */
  double tokens;        /* training budget for training_days; 0 when not given */
  /* TeraPipe (--schedule terapipe) */
  SimSlicesMode slices_mode;
  guint granularity;    /* slice lengths on multiples of this many tokens (auto, uniform) */
  guint n_slices;       /* uniform: the count; list: the entries of slice_len */
  guint slice_len[SIM_MAX_SLICES]; /* list: tokens per slice, in sequence order */
  gboolean flow_network; /* --network flow: communication as flows on the cluster graph */
  SimPlacement placement;
  SimWorkload workload;
  guint zero;            /* ZeRO stage 1..3 (zero/zero.h); 0: none */
  SimZeroKnobs zk;       /* DeepSpeed's stage-3 settings (zero == 3) */
  /* PyTorch FSDP2 (fully_shard) over the d x cp data-parallel ranks: fsdp
   * on; shard groups of d cp / hsdp_replicas ranks, replicated hsdp_replicas
   * times (1: full sharding); gradients reduce-scattered in fp32 or bf16;
   * reshard_after_forward: parameters gathered again for backward. */
  gboolean fsdp;
  guint hsdp_replicas;
  gboolean fsdp_reduce_fp32;
  gboolean reshard_after_forward;
  gboolean exact;        /* every fine op simulated (no coarse ops): the check on the shortcut */
  gboolean distributed_optimizer; /* Megatron's: optimizer state sharded over d, gradients reduce-scattered */
  gboolean sequence_parallel;     /* Megatron's: norms and dropouts over s/t, all-reduces as reduce-scatter + all-gather */
  double memory_reserve_bytes;    /* GPU memory kept back from the model (CUDA context, NCCL, fragmentation) */
  /* Where the reserve is counted from its mechanisms (sim_plan_build, with
   * --framework eager or a recompute policy; 0 where it is the flat rule of
   * thumb or --memory-reserve): the CUDA context, and NCCL's buffers for the
   * rank's communicators */
  double memory_context_bytes, memory_nccl_bytes;
  gboolean attention_given;       /* --attention; else the device profile's default */
  ModelAttention attention;
  gboolean precision_given;       /* --precision; else the device profile's first */
  ModelPrecision precision;
  gboolean tp_comm_overlap;       /* sequence-parallel communication pipelined with its GEMMs */
  ModelFramework framework;       /* whose kernels run the layers */
  double host_op_s;               /* host time per kernel launch (0: never gates the GPU) */
  SimClock clock;                 /* which clock the GEMMs run at */
  double power_limit_W;           /* the GPUs' board power cap (--power-limit, or the cluster's); 0: none */
  double price_per_gpu_hour;      /* dollars a GPU-hour (--price-per-gpu-hour, or the cluster's); 0: not known */
  gboolean free_membound;         /* memory-bound kernels free: the step-effects breakdown's counterfactual */
  gboolean no_contention;         /* compute not slowed by the collectives beside it: the same breakdown's */
  gboolean overlap_param_gather;  /* the distributed optimizer's all-gather overlapped with the next forward */
  /* The pipeline split (sim_plan_chunk_layers): the transformer layers of
   * stage 0, of each middle stage and of stage p - 1, before the
   * account-for adjustments (equal for an even split); with
   * split_embedding (split_loss) stage 0's first (stage p - 1's last) model
   * chunk holds one layer fewer. */
  guint split_first, split_mid, split_last;
  gboolean split_embedding, split_loss;
  SimSplit split; /* the options as given (all zero: the even split) */
  /* --pipeline-model-parallel-layout (plan/layout.h; alive for the
   * process): each virtual stage's pieces, in place of the split; NULL:
   * none */
  const SimLayout *layout;
  SimStragglers stragglers;
  /* Mixture of experts (Megatron-Core's parallel folding): the MoE layers
   * of a stage run on its t cp d ranks folded as expert-tp x ep x
   * expert-dp, expert-tp fastest (parallel_state.py's expert rank
   * generator, order tp-cp-ep-dp-pp).  1, 1, t cp d for a dense model. */
  guint ep, etp, edp;
  double moe_imbalance;  /* >= 1 */
  double moe_capacity;   /* 0: dropless */
  SimDispatcher moe_dispatcher; /* --moe-token-dispatcher (alltoall where not given) */
  /* --overlap-moe-expert-parallel-comm: the steady state's forwards each
   * paired with the backward after it (SimItem.paired), as Megatron-Core's
   * combined 1F1B runs them */
  gboolean moe_a2a_overlap;
  guint moe_groups, moe_group_topk; /* group-limited routing (0: none) */
  const SimScheduleFile *schedule_file; /* SIM_SCHEDULE_FILE: the user's (alive for the process) */
  /* --stage-times F,B,W,COMM: each stage's forward, input-gradient and
   * weight-gradient time per microbatch and a pipeline hop's, in seconds,
   * in place of the cost model's; no tensor- or data-parallel work and no
   * optimizer step (a schedule study, as the ZB paper's) */
  gboolean stage_times;
  double stage_f_s, stage_b_s, stage_w_s, stage_comm_s;
  double activation_limit_gib; /* zb-auto: --activation-limit, GiB of activations per GPU */
  guint activation_limit_mbs;  /* zb-auto: that limit in microbatches (sim_ptdp fills it; 0: not yet) */
} SimPlan;

/* What the command line gave, as values (search/options.c parses the
 * words once, at the command line's edge); 0 or FALSE means "not given",
 * and each worded option has its value and whether it was given. */
typedef struct {
  ModelShape model;
  guint gpus, tp, pp, dp;
  guint global_batch, micro_batch;
  guint layers_per_chunk, chunks;
  SimSchedule schedule; /* not given: 1f1b, or interleaved if chunks were given */
  gboolean schedule_given;
  SimDdp ddp;           /* not given: local */
  gboolean ddp_given;
  ModelRecompute recompute; /* not given: full */
  gboolean recompute_given;
  guint recompute_every;    /* --recompute-every K (layer); 0: not given */
  guint recompute_modules;  /* --recompute-modules (modules): MODEL_RC_* bits */
  gboolean recompute_modules_given;
  gboolean no_scatter_gather, no_fusion, no_symmetry, allow_oom;
  double tokens;
  /* --slices (TeraPipe only; sim_slices_parse): not given, auto; uniform:N
   * (n_slices = N); or token counts (slice_len[0 .. n_slices - 1]) */
  SimSlicesMode slices_mode;
  gboolean slices_given;
  guint n_slices;
  guint slice_len[SIM_MAX_SLICES];
  const char *slices_text; /* the value as written, only for the trace's record and messages (NULL: the values) */
  guint granularity;    /* 0: 8, as TeraPipe's code */
  SimNetwork network;   /* not given: flow where the cluster has a fabric, except TeraPipe (analytic) */
  gboolean network_given;
  SimPlacement placement; /* not given: tp-dp-pp */
  gboolean placement_given;
  SimWorkload workload; /* not given: gpt */
  gboolean workload_given;
  guint zero;            /* --zero 1|2|3; 0: not given */
  /* --zero-prefetch-bucket, --zero-max-live, --zero-reuse-distance,
   * --zero-persistence, --zero-reduce-bucket (elements; 0: DeepSpeed's
   * default) and --zero-contiguous-gradients */
  guint zero_prefetch_bucket, zero_max_live, zero_reuse_distance, zero_persistence, zero_reduce_bucket;
  gboolean zero_contiguous_gradients;
  gboolean zero_trace_fixed;      /* --zero-trace-fixed */
  gboolean fsdp;                  /* --fsdp */
  guint hsdp;                     /* --hsdp R; 0: not given */
  SimReduceDtype fsdp_reduce_dtype; /* not given: fp32 */
  gboolean fsdp_reduce_dtype_given;
  SimReshard fsdp_reshard;        /* not given: default */
  gboolean fsdp_reshard_given;
  gboolean exact;        /* --exact */
  gboolean distributed_optimizer; /* --distributed-optimizer */
  gboolean sequence_parallel;     /* --sequence-parallel */
  gboolean memory_reserve_given;  /* --memory-reserve GiB, else SIM_DEFAULT_MEMORY_RESERVE_GIB */
  double memory_reserve_gib;
  ModelAttention attention;       /* not given: the device's default */
  gboolean attention_given;
  ModelPrecision precision;       /* not given: the device's default */
  gboolean precision_given;
  ModelFramework framework;       /* not given: megatron */
  gboolean framework_given;
  double host_op_us;              /* --host-op-us; not given: the framework's default */
  gboolean host_op_given;
  gboolean cuda_graphs;           /* --cuda-graphs */
  SimClock clock;                 /* not given: sustained */
  gboolean clock_given;
  double power_limit_W;           /* --power-limit (W); not given: the cluster's gpu_power_limit_W, if any */
  gboolean power_limit_given;
  gboolean step_effects;          /* price each effect of the step by running without it (ptdsim run) */
  double price_per_gpu_hour;      /* --price-per-gpu-hour (dollars); 0: not given (the cluster's, if any) */
  guint cp;                       /* --cp; 0: not given (1) */
  gboolean tp_comm_overlap;       /* --tp-comm-overlap */
  gboolean overlap_param_gather;  /* --overlap-param-gather */
  SimSplit split;                 /* --first-stage-layers, --last-stage-layers, --account-for-embedding, --account-for-loss */
  const char *layout;             /* --pipeline-model-parallel-layout; NULL: not given */
  /* --slow, --slow-link and --gpu-speed, parsed (sim_slow_parse,
   * sim_gpu_speed_parse); their indexes are checked against the run by
   * sim_plan_build; none: all zero.  The seed is --seed's, below. */
  SimStragglers stragglers;
  guint64 seed;                   /* --seed (0: 1) */
  guint ep, expert_tp;            /* --ep, --expert-tp; 0: not given (1, t) */
  double moe_imbalance;           /* --moe-imbalance; 0: not given (1) */
  double moe_capacity;            /* --moe-expert-capacity-factor; 0: dropless */
  SimDispatcher moe_dispatcher;   /* not given: alltoall */
  gboolean moe_dispatcher_given;
  gboolean moe_a2a_overlap;       /* --overlap-moe-expert-parallel-comm */
  guint moe_groups, moe_group_topk; /* --moe-router-num-groups, --moe-router-group-topk; 0: not given */
  const char *schedule_file;      /* --schedule-file CSV; NULL: none */
  gboolean stage_times;           /* --stage-times F,B,W,COMM; FALSE: the cost model */
  double stage_times_ms[4];       /* its F, B, W and COMM in ms (sim_stage_times_parse) */
  const char *stage_times_text;   /* the value as written, only for the trace's record of the request (NULL: the
                                   * numbers) */
  double activation_limit_gib;    /* --activation-limit GiB (zb-auto); 0: not given */
} SimPlanRequest;

/* GPU memory a training process needs besides what ptdsim counts: the CUDA
 * context and kernels (about 0.5-1 GiB), cuBLAS workspaces, NCCL's buffers
 * (a few MiB per channel and peer) and the caching allocator's
 * fragmentation; a rule of thumb, which --memory-reserve replaces. */
#define SIM_DEFAULT_MEMORY_RESERVE_GIB 3.0
/* The CUDA context with the kernels a training process loads (PyTorch,
 * cuBLAS, NCCL), which no allocator counts: a rule of thumb of 0.5 GiB on
 * today's GPUs with CUDA's lazy module loading; --memory-reserve replaces
 * it with the whole reserve. */
#define SIM_CUDA_CONTEXT_GIB 0.5
/* NCCL's buffers (NVIDIA/nccl src/init.cc, computeBuffSizes): per channel
 * and connection one buffer per protocol, DEFAULT_LL_BUFFSIZE (8 lines x
 * 512 threads x 8 steps x 16 B = 512 KiB), DEFAULT_LL128_BUFFSIZE (120 x
 * 640 x 8 x 8 B = 4,915,200 B) and DEFAULT_BUFFSIZE (NCCL_BUFFSIZE, 4 MiB);
 * a ring's channel receives from one peer.  A communicator over NVSwitch
 * H100s sets up 32 collective channels (MAXCHANNELS, src/include/device.h;
 * NCCL's init log: "32 coll channels"); point-to-point (the pipeline's
 * sends) a Simple buffer per channel and peer, the cluster's channels per
 * peer. */
#define SIM_NCCL_CHANNEL_BYTES (524288.0 + 4915200.0 + 4194304.0)
#define SIM_NCCL_COLL_CHANNELS 32

#define SIM_PLAN_ERROR (sim_plan_error_quark())
GQuark sim_plan_error_quark(void);
/* The most granules (--seq-len / --granularity) TeraPipe's slicing DP
 * (--slices auto) takes: its tables grow with the square of the count. */
#define SIM_MAX_DP_GRANULES 2048u

typedef enum { SIM_PLAN_ERROR_INVALID, SIM_PLAN_ERROR_OOM, SIM_PLAN_ERROR_TOO_BIG } SimPlanError;

/* The cluster GPU of the job's GPU `g` (in rank order) when the job is cut
 * into groups of `group` consecutive GPUs that talk over NVLink (the tensor-
 * and context-parallel group, t * cp): groups are packed whole into NVLink
 * domains, so that none straddles two.  Where `group` divides the domain this
 * is g itself; on a GB200 NVL72 rack groups of 16 fill 64 of its 72 GPUs and
 * the other 8 stay idle (as a scheduler places a job, with spares). */
guint sim_place(const TopoCluster *cluster, guint group, guint g);
/* The stage layers of `split` for `layers` on p stages of v model chunks
 * each, by Megatron-Core's rules (transformer_config.py and
 * transformer_block.py's get_num_layers_to_build): first/last given, the
 * rest split evenly over the middle stages; account-for, (layers + the
 * extras) split evenly and the first (last) virtual stage one layer short;
 * neither, layers / p.  *first, *mid and *last are the layers of stage 0,
 * a middle stage and stage p - 1 before the account-for adjustments.
 * Errors are one line saying what is wrong and how to fix it. */
gboolean sim_split_layers(const SimSplit *split, guint layers, guint p, guint v, guint *first, guint *mid,
                          guint *last, GError **error);
/* The uneven splits a Megatron user would try for `layers` on p stages, in
 * that order, at most `max`: the embedding and the loss counted as layers
 * (both, then either) where they make the count divide, else the first and
 * last stages sharing what ceil(layers / p) per middle stage leaves; none
 * whose stage layers repeat an earlier one's or the even split's.  Splits
 * that v chunks cannot take are left to sim_split_layers. */
guint sim_split_candidates(guint layers, guint p, SimSplit *out, guint max);
/* The transformer layers of model chunk c of stage s, of stage s, and the
 * stage-local index of chunk c's first layer. */
guint sim_plan_chunk_layers(const SimPlan *plan, guint s, guint c);
/* The virtual stage of a microbatch's route that chunk c of stage s runs
 * (for DualPipe, in the direction that runs that chunk). */
guint sim_plan_chunk_vstage(const SimPlan *plan, guint s, guint c);
/* The model's index (from 0) of the first transformer layer of chunk c of
 * stage s: the layers of the virtual stages before it on the route. */
guint sim_plan_chunk_first_layer(const SimPlan *plan, guint s, guint c);
/* The virtual stage that runs the MTP modules: the route's last (with the
 * loss) unless a layout says otherwise.  The embedding runs in the first,
 * the logits and the loss in the last. */
guint sim_plan_mtp_vstage(const SimPlan *plan);
/* What a million tokens cost at `price` dollars a GPU-hour on `gpus` GPUs
 * making `tokens_per_s`. */
double sim_cost_per_million_tokens(double price, guint gpus, double tokens_per_s);
/* The MTP modules chunk c of stage s runs (each an MoE layer, as DeepSeek-V3
 * runs them): the model's where the chunk is that virtual stage (both of
 * DualPipe's copies), else 0. */
guint sim_plan_chunk_mtp(const SimPlan *plan, guint s, guint c);
/* The plan's pipeline layout in Megatron-Core's syntax: the one given, or
 * the split written as one (g_free it). */
char *sim_plan_layout_text(const SimPlan *plan);
guint sim_plan_stage_layers(const SimPlan *plan, guint s);
guint sim_plan_chunk_offset(const SimPlan *plan, guint s, guint c);
/* Whether the stages hold different numbers of layers (or chunks do). */
gboolean sim_plan_uneven(const SimPlan *plan);
/* "--account-for-embedding --account-for-loss", "--first-stage-layers 15
 * --last-stage-layers 15": the options of a split (empty: even). */
char *sim_split_options(const SimSplit *split);
/* The plan's context-parallel size (1 where a plan was filled without it). */
static inline guint sim_plan_cp(const SimPlan *plan) { return plan->cp ? plan->cp : 1; }
/* The plan's recomputation as the models see it, and its word. */
ModelRecompute sim_plan_recompute(const SimPlan *plan);
/* The layers --recompute layer checkpoints whole: every k-th of each
 * stage's, as torchtitan counts a rank's blocks (0 under other settings). */
guint sim_plan_checkpointed_layers(const SimPlan *plan);
/* The attention kernels a run uses on `profile`: --attention, else the
 * profile's default (flash where it says so, Megatron's kernels otherwise). */
ModelAttention sim_plan_attention(const SimPlan *plan, const ModelProfile *profile);
/* The precision a run uses on `profile` (--precision, else the profile's
 * first), its word, and the dense peak rate at it. */
ModelPrecision sim_plan_precision(const SimPlan *plan, const ModelProfile *profile);
const char *sim_precision_name(ModelPrecision p);
double sim_plan_peak_flops(const SimPlan *plan, const ModelProfile *profile);
/* The attention kernels that run: "flash", "fused" (Megatron's fused
 * softmax) or "unfused" (its fp32 chain); TeraPipe: its own, by fusion. */
const char *sim_plan_attention_ran(const SimPlan *plan, const ModelProfile *profile);
/* The layer options of a run on `profile`. */
ModelLayerOptions sim_plan_layer_options(const SimPlan *plan, const ModelProfile *profile);
/* How much longer the compute of a rank with `tp` tensor-parallel ranks
 * takes beside a collective whose kernels hold SMs of its GPU (the
 * cluster's nccl.collective_channels): a data-parallel group of `group`
 * members (1: none runs beside the compute) and, with `tp_overlap`,
 * tensor-parallel communication pipelined with its GEMMs; with
 * --overlap-moe-expert-parallel-comm the expert-parallel all-to-all.  Each
 * channel holds the profile's SMs per channel, and the collective displaces
 * its HBM bytes per byte moved at its bus rate (model_profile_overlap: one
 * SM, and two bytes, read as sent and written as received, where the
 * profile has no measured "overlap" block): NVLink inside a node, the GPU's
 * share of its node's NICs across nodes (models/layer.h
 * model_layer_contention).  1 where
 * nothing runs beside the compute, the cluster holds no SMs or the plan
 * asks for none (no_contention). */
double sim_plan_contention(const SimPlan *plan, const ModelProfile *profile, const TopoCluster *cluster, guint tp,
                           guint group, gboolean tp_overlap);
/* The same for kernels holding `sms` SMs whose bytes pass at `rate` (bytes
 * per second sent and received), at the profile's HBM bytes per byte. */
double sim_plan_contention_at(const SimPlan *plan, const ModelProfile *profile, guint tp, double sms, double rate);
/* What the plan asks of the device that the profile cannot give (flash
 * attention without its figures): one-line error. */
gboolean sim_plan_check_device(const SimPlan *plan, const ModelProfile *profile, GError **error);
/* The memory a GPU has for the model: the profile's less the reserve. */
double sim_plan_usable_bytes(const SimPlan *plan, const ModelProfile *profile);
/* The word of the plan's recomputation (--recompute's). */
const char *sim_recompute_name(const SimPlan *plan);

/* The room for SimResult's symmetry_declined. */
#define SIM_DECLINED_LEN 192

typedef struct {
  double compute, tp_comm, pp_comm, dp_comm, optimizer, bubble;
} SimBreakdown;

typedef struct {
  double iteration_time_s;
  double tflops_per_gpu;
  double hardware_tflops_per_gpu;
  double percent_of_peak;
  double mfu_percent;   /* model FLOPs (no recomputation) per second per GPU over the peak */
  double model_tflops_per_gpu; /* model FLOPs (forward and backward, attention included, no recomputation) / s / GPU */
  double mfu;                  /* model_tflops_per_gpu over the peak at the run's precision, a fraction */
  double hfu_percent;   /* FLOPs executed per second per GPU over the peak */
  double tokens_per_s;  /* B s per iteration time */
  double aggregate_pflops;
  double bubble_fraction;
  double analytic_bubble_fraction;
  /* The pipeline's bubble as the zero-bubble paper counts it (Qi et al.
   * 2024, section 3; sail-sg's zb.py measures "the longest stage time"):
   * the longest span of a stage's compute from its first pass to its last
   * (the optimizer step left out), less the most busy time of any stage
   * (m (T_F + T_B + T_W) on equal stages), in seconds, and as a share of
   * that span. */
  double pipeline_span_s, bubble_s, bubble_rate;
  /* Microbatches whose activations a stage holds at once, at most over the
   * stages (from the F to the B, or to the W where the backward is split),
   * in whole-stage microbatches. */
  double peak_inflight_mbs;
  double idle_fraction; /* TeraPipe: (flush - busy) / flush of the busiest stage; 0 for PTD-P */
  guint token_slices;   /* TeraPipe: M, the token slices that flow through the pipeline (all batch slices) */
  SimBreakdown breakdown; /* exposed time on the critical GPU; sums to the iteration time */
  guint critical_stage;
  double bytes_tp, bytes_pp, bytes_dp;
  double bytes_cp;        /* context parallelism's ring: keys, values and their gradients */
  double bytes_embedding; /* the part of bytes_dp that is the tied-embedding all-reduce (first and last stage) */
  /* mixture of experts: the bytes of the token dispatch and combine (and
   * the expert-tensor gathers) over all ranks; the critical stage's time in
   * them per iteration (each at its time alone); one dispatch's bytes a
   * rank sends off-rank; tokens per local expert on the busiest rank */
  double bytes_ep, moe_comm_s, moe_a2a_bytes_per_rank, moe_expert_tokens;
  double moe_ib_bytes_per_rank, moe_nvl_bytes_per_rank; /* DeepEP's dispatch: its two parts */
  double bisection_pp_GBps, bisection_dp_GBps;
  /* Sharded data parallelism (ZeRO-3, FSDP2), per GPU per iteration: the
   * parameter all-gathers and gradient reductions issued, the bytes of
   * their buffers (an all-gather's output, a reduction's input), and the
   * host work their framework code does (ZeRO-3's per-rank views and copies) */
  guint64 shard_gathers, shard_reductions;
  double shard_gather_bytes, shard_reduce_bytes, shard_host_s;
  double contention; /* sim_plan_contention of the run's compute (1: none) */
  ModelMemory memory; /* the GPU that needs the most */
  guint memory_stage;
  gboolean fits_in_memory;
  double training_days; /* 0 when no token budget */
  double gpu_hours;     /* training_days x 24 x GPUs; 0 when no token budget */
  /* the simulation itself */
  guint64 ops, events;
  guint simulated_gpus;
  guint64 steady_periods; /* schedule periods carried in closed form (sim/steady.h); 0: every op simulated */
  gboolean symmetric; /* the shortcut was used (fewer GPUs simulated than the job has), or t d = 1 */
  /* why the shortcut was not taken, every GPU simulated ("": it was, or
   * --no-symmetry asked for every GPU) */
  char symmetry_declined[SIM_DECLINED_LEN];
  /* what the shortcut, where taken, may miss ("": nothing; it is exact) */
  char symmetry_approximate[SIM_DECLINED_LEN];
} SimResult;

/* Whether the plan has stragglers (GPUs or links); a GPU's speed factor
 * (1: full speed) given its pipeline stage, and a link factor for the NIC
 * of rail `rail` on `node` (1: full rate). */
gboolean sim_plan_has_stragglers(const SimPlan *plan);
double sim_plan_gpu_speed(const SimPlan *plan, guint gpu, guint stage, guint gpus_per_node);
double sim_plan_nic_factor(const SimPlan *plan, guint node, guint rail);
/* The pipeline stage GPU `gpu` holds under the plan's placement. */
guint sim_plan_stage_of_gpu(const SimPlan *plan, guint gpu, guint gpus_per_node);

/* Whether a run is an SC21 reproduction: Megatron's GPT (model_is_gpt)
 * trained as Narayanan et al. 2021 ran it, so that its throughput is
 * reported as the paper reports it, by Eq. 3.  That is the whole training
 * step (not the layers workload) under GPipe, 1F1B or interleaved 1F1B (the
 * cost model's times, not --stage-times), or
 * under ZeRO (the paper's Table 2 comparison), with the 2021 software stack:
 * full or no recomputation (selective came in 2022), fp16 or bf16 GEMMs,
 * Megatron's attention kernels (fused or unfused softmax, not
 * FlashAttention), and none of sequence parallelism, the distributed
 * optimizer, context parallelism, TP communication overlap or the
 * overlapped parameter all-gather.  Cluster, device, network, placement,
 * DDP, scatter/gather and fusion may be anything (the paper varies them).
 * Every other run -- any other shape, TeraPipe, a 2022+ mechanism -- is
 * reported by model FLOPs and MFU, which count only what the model needs. */
gboolean sim_plan_is_sc21_reproduction(const SimPlan *plan, const ModelProfile *profile);

/* The rates of a finished iteration, from r->iteration_time_s: TFLOP/s by
 * Eq. 3, of model FLOPs and executed, share of peak, MFU and HFU, tokens/s, aggregate
 * PFLOP/s, and the days and GPU-hours of the token budget.  The layers
 * workload counts no logit layer. */
void sim_plan_rates(const SimPlan *plan, const ModelProfile *profile, SimResult *r);
