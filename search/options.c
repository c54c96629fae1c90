/* ptdsim — the configuration options (see options.h). */
#include "options.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "../base/jsonutil.h"
#include "../base/text.h"
#include "../base/units.h"
#include "../models/modelfile.h"
#include "../plan/validate.h"

/* The closed sets of words of the options the plan reads are plan/'s
 * (sim_*_words); the model's and the run's are here. */
#define recomputes sim_recompute_words
#define ddps sim_ddp_words
#define networks sim_network_words
#define placements sim_placement_words
#define fsdp_dtypes sim_reduce_dtype_words
#define fsdp_reshards sim_reshard_words
#define workloads sim_workload_words
#define attentions sim_attention_words
#define precisions sim_precision_words
#define dispatchers sim_dispatcher_words
#define frameworks sim_framework_words
#define clocks sim_clock_words
static const PtdWord norms[] = {{"layernorm", MODEL_NORM_LAYERNORM}, {"rmsnorm", MODEL_NORM_RMSNORM}, {NULL, 0}};
static const PtdWord positions[] = {{"learned", MODEL_POSITION_LEARNED}, {"rope", MODEL_POSITION_ROTARY}, {NULL, 0}};
static const PtdWord checkpoints[] = {{"sync", 0}, {"async", 1}, {NULL, 0}};

static const SearchOption options[SEARCH_N_OPTIONS] = {
    [SEARCH_OPT_MODEL] = {"model", SEARCH_OPT_TEXT, "NAME|FILE",
                          "Model: a built-in's name (gpt3-175b, llama3-70b, ...; `ptdsim models` lists them), or a "
                          "JSON file's path (with a '/' or ending in .json): ptdsim's model JSON or a Hugging Face "
                          "config.json (Llama, Qwen3, Mixtral, DeepSeek-V3); the shape options below override its "
                          "values",
                          NULL},
    [SEARCH_OPT_LAYERS] = {"layers", SEARCH_OPT_COUNT, "L", "Transformer layers l", NULL},
    [SEARCH_OPT_HIDDEN] = {"hidden", SEARCH_OPT_COUNT, "H", "Hidden size h", NULL},
    [SEARCH_OPT_HEADS] = {"heads", SEARCH_OPT_COUNT, "A", "Attention heads a", NULL},
    [SEARCH_OPT_SEQ_LEN] = {"seq-len", SEARCH_OPT_COUNT, "S", "Sequence length s (default 2048)", NULL},
    [SEARCH_OPT_VOCAB] = {"vocab", SEARCH_OPT_COUNT, "V", "Vocabulary size V (default 51200)", NULL},
    [SEARCH_OPT_FFN_HIDDEN] = {"ffn-hidden", SEARCH_OPT_COUNT, "F", "MLP hidden size f (default 4h)", NULL},
    [SEARCH_OPT_SWIGLU] = {"swiglu", SEARCH_OPT_FLAG, NULL,
                           "Gated MLP (SwiGLU: gate and up projections h->f, down f->h) instead of GeLU", NULL},
    [SEARCH_OPT_QUERY_GROUPS] = {"num-query-groups", SEARCH_OPT_COUNT, "G",
                                 "Key/value heads g for grouped-query attention (default: the heads, multi-head "
                                 "attention; 1: multi-query)",
                                 NULL},
    [SEARCH_OPT_KV_CHANNELS] = {"kv-channels", SEARCH_OPT_COUNT, "D", "Channels per attention head d (default h/a)",
                                NULL},
    [SEARCH_OPT_NORM] = {"norm", SEARCH_OPT_TEXT, "KIND", "layernorm (default) or rmsnorm", norms},
    [SEARCH_OPT_POSITION] = {"position-embedding", SEARCH_OPT_TEXT, "KIND",
                             "learned (absolute, an embedding table; default) or rope (rotary, applied in every "
                             "layer)",
                             positions},
    [SEARCH_OPT_UNTIE] = {"untie-embeddings", SEARCH_OPT_FLAG, NULL,
                          "The logit layer has its own weights instead of sharing the word embedding's", NULL},
    [SEARCH_OPT_NO_BIAS] = {"no-bias", SEARCH_OPT_FLAG, NULL, "Linear layers without biases (as Llama)", NULL},
    [SEARCH_OPT_CLUSTER] = {"cluster", SEARCH_OPT_TEXT, "NAME|FILE", "Cluster: " PTD_NAME_OR_PATH_HELP "; default selene",
                            NULL},
    [SEARCH_OPT_NODES] = {"nodes", SEARCH_OPT_COUNT, "N",
                          "Nodes of the cluster (default: its file's count; for a GB200 NVL72, compute trays, 18 to "
                          "a rack)",
                          NULL},
    [SEARCH_OPT_PROFILE] = {"profile", SEARCH_OPT_TEXT, "NAME|FILE",
                            "Device profile: " PTD_NAME_OR_PATH_HELP "; default: the cluster's GPU; 'ideal' for "
                            "textbook timing",
                            NULL},
    [SEARCH_OPT_GPUS] = {"gpus", SEARCH_OPT_COUNT, "N", "GPUs n", NULL},
    [SEARCH_OPT_TP] = {"tp", SEARCH_OPT_COUNT, "T", "Tensor-parallel size t", NULL},
    [SEARCH_OPT_PP] = {"pp", SEARCH_OPT_COUNT, "P", "Pipeline-parallel size p", NULL},
    [SEARCH_OPT_DP] = {"dp", SEARCH_OPT_COUNT, "D", "Data-parallel size d (default n/(t*p))", NULL},
    [SEARCH_OPT_GLOBAL_BATCH] = {"global-batch", SEARCH_OPT_COUNT, "B", "Global batch B in sequences", NULL},
    [SEARCH_OPT_LOCAL_BATCH] = {"local-batch", SEARCH_OPT_COUNT, "N",
                                "Sequences per data-parallel rank per step (torchtitan's local_batch_size) in place of "
                                "--global-batch: the global batch is N x the data-parallel size (gpus / (tp x pp x "
                                "cp), or --dp); run and sweep (plan searches the data-parallel size)",
                                NULL},
    [SEARCH_OPT_MICRO_BATCH] = {"micro-batch", SEARCH_OPT_COUNT, "b", "Microbatch size b", NULL},
    /* its help and words come from the schedules' table (schedule_option) */
    [SEARCH_OPT_SCHEDULE] = {"schedule", SEARCH_OPT_TEXT, "NAME", NULL, NULL},
    [SEARCH_OPT_SCHEDULE_FILE] = {"schedule-file", SEARCH_OPT_TEXT, "FILE",
                                  "A schedule of your own: a CSV of per-rank actions (0F0, 0I0, 0W0, 1B0...) in "
                                  "torch.distributed.pipelining's format, one row per pipeline rank",
                                  NULL},
    [SEARCH_OPT_STAGE_TIMES] = {"stage-times", SEARCH_OPT_TEXT, "F,B,W,COMM",
                                "Times in ms per microbatch and stage (forward, input gradient, weight gradient, a "
                                "pipeline hop) in place of the cost model: the schedule alone",
                                NULL},
    [SEARCH_OPT_ACTIVATION_LIMIT] = {"activation-limit", SEARCH_OPT_TEXT, "GiB",
                                     "zb-auto: the activations a GPU may hold, in GiB; ZB's heuristic keeps within "
                                     "it",
                                     NULL},
    [SEARCH_OPT_LAYERS_PER_CHUNK] = {"layers-per-chunk", SEARCH_OPT_COUNT, "L",
                                     "Interleaved: layers per model chunk (Megatron's "
                                     "--num-layers-per-virtual-pipeline-stage)",
                                     NULL},
    [SEARCH_OPT_CHUNKS] = {"chunks", SEARCH_OPT_COUNT, "V", "Interleaved: model chunks v per GPU", NULL},
    [SEARCH_OPT_FIRST_STAGE_LAYERS] = {"first-stage-layers", SEARCH_OPT_COUNT, "N",
                                       "Layers of the first pipeline stage, the rest split evenly over the middle "
                                       "stages (Megatron's --decoder-first-pipeline-num-layers; interleaved: a "
                                       "multiple of the chunks)",
                                       NULL},
    [SEARCH_OPT_LAST_STAGE_LAYERS] = {"last-stage-layers", SEARCH_OPT_COUNT, "N",
                                      "Layers of the last pipeline stage (Megatron's "
                                      "--decoder-last-pipeline-num-layers)",
                                      NULL},
    [SEARCH_OPT_ACCOUNT_EMBEDDING] = {"account-for-embedding", SEARCH_OPT_FLAG, NULL,
                                      "Count the embedding as a layer in the pipeline split ((layers + 1) / p a "
                                      "stage, + 2 with --account-for-loss): the first stage holds one layer fewer "
                                      "(Megatron's --account-for-embedding-in-pipeline-split)",
                                      NULL},
    [SEARCH_OPT_ACCOUNT_LOSS] = {"account-for-loss", SEARCH_OPT_FLAG, NULL,
                                 "Count the loss as a layer in the pipeline split: the last stage holds one layer "
                                 "fewer (Megatron's --account-for-loss-in-pipeline-split)",
                                 NULL},
    [SEARCH_OPT_PIPELINE_LAYOUT] = {"pipeline-model-parallel-layout", SEARCH_OPT_TEXT, "LAYOUT",
                                    "The model's pieces per virtual stage, as Megatron-Core writes them: E (embedding), "
                                    "t (a layer), m (an MTP module), L (loss), '|' between virtual stages, (...)*N and "
                                    "x*N repeat; e.g. \"Et*3|(tt|)*29,m|L\" (sets the chunks; in a sweep, separate "
                                    "values with ';')",
                                    NULL},
    [SEARCH_OPT_SLICES] = {"slices", SEARCH_OPT_TEXT, "SPEC",
                           "TeraPipe token slicing: auto (the DP, with batch slicing), uniform:N, or token counts "
                           "512,384,...",
                           NULL},
    [SEARCH_OPT_GRANULARITY] = {"granularity", SEARCH_OPT_COUNT, "G",
                                "TeraPipe: slice lengths on multiples of this many tokens (default 8, as TeraPipe's "
                                "code)",
                                NULL},
    [SEARCH_OPT_RECOMPUTE] = {"recompute", SEARCH_OPT_TEXT, "MODE",
                              "Activation recomputation: full, selective (the attention core only), none, op "
                              "(torchtitan's per-op selective checkpointing; --framework eager), layer (torchtitan's "
                              "selective layer checkpointing: every --recompute-every'th layer whole) or modules "
                              "(Megatron-Core's --recompute-modules) (default full)",
                              recomputes},
    [SEARCH_OPT_RECOMPUTE_EVERY] = {"recompute-every", SEARCH_OPT_COUNT, "K",
                                    "--recompute layer: every K-th layer of a rank checkpointed whole (torchtitan's "
                                    "selective_ac_option; default 2)",
                                    NULL},
    [SEARCH_OPT_RECOMPUTE_MODULES] = {"recompute-modules", SEARCH_OPT_TEXT, "LIST",
                                      "--recompute modules: Megatron-Core's modules recomputed, comma separated: "
                                      "core_attn, mlp, layernorm, moe_act, mla_up_proj, moe, shared_experts, or none "
                                      "(default core_attn)",
                                      NULL},
    [SEARCH_OPT_NO_SCATTER_GATHER] = {"no-scatter-gather", SEARCH_OPT_FLAG, NULL,
                                      "Send whole activations from every tensor-parallel rank instead of 1/t each "
                                      "plus an NVLink all-gather",
                                      NULL},
    [SEARCH_OPT_NO_FUSION] = {"no-fusion", SEARCH_OPT_FLAG, NULL,
                              "Unfused bias+GeLU, bias+dropout+add and scale+mask+softmax kernels", NULL},
    [SEARCH_OPT_ATTENTION] = {"attention", SEARCH_OPT_TEXT, "KERNELS",
                              "flash (FlashAttention-2), fused (Megatron's fused softmax where its shape rules allow) or "
                              "unfused (its fp32 softmax chain); default: the device profile's (flash on H100, fused "
                              "on A100 and V100)",
                              attentions},
    [SEARCH_OPT_PRECISION] = {"precision", SEARCH_OPT_TEXT, "TYPE",
                              "fp16, bf16 or fp8 (the linear layers' GEMMs in FP8 with Transformer Engine, on a device "
                              "that has it); default: the device profile's first (bf16 on H100, fp16 on A100 and V100)",
                              precisions},
    [SEARCH_OPT_SEQUENCE_PARALLEL] = {"sequence-parallel", SEARCH_OPT_FLAG, NULL,
                                      "Megatron's sequence parallelism: norms, dropouts and residuals on s/t of the "
                                      "sequence, each tensor-parallel all-reduce a reduce-scatter and an all-gather "
                                      "(needs --tp 2 or more)",
                                      NULL},
    [SEARCH_OPT_DDP] = {"ddp", SEARCH_OPT_TEXT, "IMPL",
                        "Data-parallel gradient reduction: torch (overlapped with backward) or local (after the "
                        "flush; default)",
                        ddps},
    [SEARCH_OPT_DISTRIBUTED_OPTIMIZER] = {"distributed-optimizer", SEARCH_OPT_FLAG, NULL,
                                          "Megatron's distributed optimizer: optimizer state sharded over the "
                                          "data-parallel ranks, gradients reduce-scattered (overlapped with backward "
                                          "under --ddp torch), parameters all-gathered after the step",
                                          NULL},
    [SEARCH_OPT_ZERO] = {"zero", SEARCH_OPT_COUNT, "STAGE",
                         "ZeRO data parallelism instead of tensor and pipeline parallelism (DeepSpeed, as SC21 "
                         "compares it): 1 shards the optimizer state, 2 also the gradients, 3 also the parameters; "
                         "needs --tp 1 --pp 1",
                         NULL},
    [SEARCH_OPT_WORKLOAD] = {"workload", SEARCH_OPT_TEXT, "KIND",
                             "gpt (the whole training step; default) or layers (TeraPipe's benchmark: the transformer "
                             "layers only, no embedding, logits or loss; --schedule terapipe)",
                             workloads},
    [SEARCH_OPT_NETWORK] = {"network", SEARCH_OPT_TEXT, "MODEL",
                            "flow (flows sharing the cluster graph's links; default where the cluster has a fabric, "
                            "except TeraPipe) or analytic (alpha-beta per tier; fast)",
                            networks},
    [SEARCH_OPT_PLACEMENT] = {"placement", SEARCH_OPT_TEXT, "ORDER",
                              "tp-dp-pp (Megatron's rank order; default), dp-outermost, or misaligned (TP groups "
                              "straddle two nodes)",
                              placements},
    [SEARCH_OPT_TOKENS] = {"tokens", SEARCH_OPT_TEXT, "T",
                           "Training budget in tokens, for training_days (300e9, 300B, 1.2T)", NULL},
    [SEARCH_OPT_PRICE] = {"price-per-gpu-hour", SEARCH_OPT_TEXT, "USD",
                          "What one GPU-hour costs, in dollars, for the cost per million tokens and of the run "
                          "(default: the cluster file's price_per_gpu_hour, if any)",
                          NULL},
    [SEARCH_OPT_NO_SYMMETRY] = {"no-symmetry", SEARCH_OPT_FLAG, NULL,
                                "Simulate every GPU instead of one per tensor-parallel group and one replica (slow; a "
                                "check)",
                                NULL},
    [SEARCH_OPT_ALLOW_OOM] = {"allow-oom", SEARCH_OPT_FLAG, NULL,
                              "Simulate a configuration that does not fit in memory (reported as fits_in_memory: "
                              "false)",
                              NULL},
    [SEARCH_OPT_MEMORY_RESERVE] = {"memory-reserve", SEARCH_OPT_TEXT, "GiB",
                                   "GPU memory kept back from the model for the CUDA context, NCCL and cuBLAS buffers "
                                   "and fragmentation (default 3)",
                                   NULL},
    [SEARCH_OPT_EXACT] = {"exact", SEARCH_OPT_FLAG, NULL,
                          "Simulate every op one by one, without the shortcuts that give the same results faster "
                          "(a check, and the slow path)",
                          NULL},
    [SEARCH_OPT_CP] = {"cp", SEARCH_OPT_COUNT, "C",
                       "Context-parallel size cp (Megatron-Core): each rank holds s/cp of every sequence, attention "
                       "runs as a ring over the cp ranks (FlashAttention), n = t*cp*p*d (default 1)",
                       NULL},
    [SEARCH_OPT_TP_COMM_OVERLAP] = {"tp-comm-overlap", SEARCH_OPT_FLAG, NULL,
                                    "Pipeline the sequence-parallel all-gathers and reduce-scatters with their GEMMs "
                                    "(Transformer Engine's userbuffers; needs --sequence-parallel)",
                                    NULL},
    [SEARCH_OPT_OVERLAP_PARAM_GATHER] = {"overlap-param-gather", SEARCH_OPT_FLAG, NULL,
                                         "The distributed optimizer's parameter all-gather overlapped with the next "
                                         "forward, layer by layer (needs --distributed-optimizer and --ddp torch)",
                                         NULL},
    [SEARCH_OPT_FRAMEWORK] = {"framework", SEARCH_OPT_TEXT, "NAME",
                              "The framework whose kernels run the layers: megatron (Megatron-Core with Transformer "
                              "Engine: fused rotary, bias-dropout-add and SwiGLU kernels) or eager (PyTorch eager as a "
                              "plain model runs it: each op its own kernels, fp32 cross entropy, gradients added "
                              "into .grad); default megatron",
                              frameworks},
    [SEARCH_OPT_HOST_OP] = {"host-op-us", SEARCH_OPT_TEXT, "US",
                            "Host time to launch one kernel, in microseconds: the GPU waits where its kernels are "
                            "shorter (default: 0 for megatron, for eager the per-launch time measured from the "
                            "shipped PyTorch step traces)",
                            NULL},
    [SEARCH_OPT_CUDA_GRAPHS] = {"cuda-graphs", SEARCH_OPT_FLAG, NULL,
                                "The step's kernels replayed from CUDA graphs: the host launches nothing one by one "
                                "(--host-op-us 0)",
                                NULL},
    [SEARCH_OPT_CLOCK] = {"clock", SEARCH_OPT_TEXT, "WHEN",
                          "sustained (a long run: GEMMs at the device profile's sustained clock, default) or burst "
                          "(a short measurement after idle: the boost clock)",
                          clocks},
    [SEARCH_OPT_POWER_LIMIT] = {"power-limit", SEARCH_OPT_TEXT, "W",
                                "The GPUs' board power cap in watts (nvidia-smi -pl): the GEMMs run at the clock it "
                                "allows by the device profile's power model (default: the cluster's "
                                "gpu_power_limit_W, else the part's rated cap)",
                                NULL},
    [SEARCH_OPT_NUM_EXPERTS] = {"num-experts", SEARCH_OPT_COUNT, "E",
                                "Routed experts per MoE layer (Megatron's --num-experts; default: the model's, or "
                                "none: a dense model)",
                                NULL},
    [SEARCH_OPT_MOE_TOPK] = {"moe-router-topk", SEARCH_OPT_COUNT, "K", "Experts each token is routed to (default 2)",
                             NULL},
    [SEARCH_OPT_MOE_FFN_HIDDEN] = {"moe-ffn-hidden-size", SEARCH_OPT_COUNT, "F",
                                   "Hidden size of one routed expert's MLP (default: --ffn-hidden)", NULL},
    [SEARCH_OPT_MOE_SHARED_FFN_HIDDEN] = {"moe-shared-expert-intermediate-size", SEARCH_OPT_COUNT, "F",
                                          "Hidden size of the shared experts together (default: none)", NULL},
    [SEARCH_OPT_MOE_LAYER_FREQ] = {"moe-layer-freq", SEARCH_OPT_COUNT, "N",
                                   "Every N-th layer is an MoE layer (default 1: every one)", NULL},
    [SEARCH_OPT_MOE_FIRST_DENSE] = {"moe-first-dense-layers", SEARCH_OPT_COUNT, "K",
                                    "The first K layers stay dense (DeepSeek's first_k_dense_replace)", NULL},
    [SEARCH_OPT_EP] = {"ep", SEARCH_OPT_COUNT, "EP",
                       "Expert-parallel size (Megatron-Core's --expert-model-parallel-size): the experts of an MoE "
                       "layer split over EP ranks, tokens sent to them by all-to-all (default 1)",
                       NULL},
    [SEARCH_OPT_EXPERT_TP] = {"expert-tp", SEARCH_OPT_COUNT, "ETP",
                              "Expert tensor-parallel size (--expert-tensor-parallel-size); MoE layers fold the "
                              "t*cp*d ranks of a stage as ETP x EP x expert-DP (default: t)",
                              NULL},
    [SEARCH_OPT_MOE_IMBALANCE] = {"moe-imbalance", SEARCH_OPT_TEXT, "X",
                                  "Tokens of the busiest rank's experts over the balanced share, >= 1 (default 1: "
                                  "perfectly balanced routing)",
                                  NULL},
    [SEARCH_OPT_MOE_CAPACITY_FACTOR] = {"moe-expert-capacity-factor", SEARCH_OPT_TEXT, "X",
                                        "Drop tokens beyond X times an expert's balanced share (default: dropless)",
                                        NULL},
    [SEARCH_OPT_MOE_TOKEN_DISPATCHER] = {"moe-token-dispatcher", SEARCH_OPT_TEXT, "KIND",
                                         "alltoall (default), allgather or deepep (DeepEP's kernels, Megatron-Core's "
                                         "flex dispatcher with --moe-enable-deepep: a token crosses InfiniBand once "
                                         "per node, then NVLink): how tokens reach their experts",
                                         dispatchers},
    [SEARCH_OPT_MOE_ROUTER_NUM_GROUPS] = {"moe-router-num-groups", SEARCH_OPT_COUNT, "G",
                                          "Group-limited routing: the experts dealt in G equal groups (DeepSeek-V3: "
                                          "one per node of the expert-parallel group); with --moe-router-group-topk",
                                          NULL},
    [SEARCH_OPT_MOE_ROUTER_GROUP_TOPK] = {"moe-router-group-topk", SEARCH_OPT_COUNT, "M",
                                          "Group-limited routing: each token picks its top M groups, then its top-k "
                                          "experts among theirs",
                                          NULL},
    [SEARCH_OPT_OVERLAP_MOE_EP_COMM] = {"overlap-moe-expert-parallel-comm", SEARCH_OPT_FLAG, NULL,
                                        "Megatron-Core's EP all-to-all overlap: in the 1F1B steady state a forward "
                                        "and the backward after it run together, each one's token dispatch and "
                                        "combine behind the other's compute (needs --ep > 1; with --pp > 1 the "
                                        "interleaved schedule)",
                                        NULL},
    [SEARCH_OPT_SLOW] = {"slow", SEARCH_OPT_TEXT, "WHO=F,...",
                         "Stragglers: GPUs running at F of their speed (0 < F <= 1): RANK=F (a global GPU index), "
                         "node:N=F (every GPU of node N) or stage:S=F (every GPU of pipeline stage S); "
                         "comma-separated",
                         NULL},
    [SEARCH_OPT_GPU_SPEED] = {"gpu-speed", SEARCH_OPT_TEXT, "lognormal:SIGMA",
                              "Every GPU's speed drawn from a lognormal of median 1 and this sigma, capped at 1 "
                              "(--seed picks the draw)",
                              NULL},
    [SEARCH_OPT_SLOW_LINK] = {"slow-link", SEARCH_OPT_TEXT, "WHERE=F,...",
                              "Slow or failed inter-node links: node:N=F (node N's NICs at F of their rate) or "
                              "rail:R=F (rail R's NIC on every node; rail:R=0, the rail down: its GPUs share the next "
                              "rail's NIC); comma-separated",
                              NULL},
    [SEARCH_OPT_SEED] = {"seed", SEARCH_OPT_TEXT, "S",
                         "Seed of --gpu-speed's draw and of the whole run's Monte-Carlo (default 1)", NULL},
    [SEARCH_OPT_GPU_FAILURE_RATE] = {"gpu-failure-rate", SEARCH_OPT_TEXT, "PER_HOUR",
                                     "Interruptions per GPU per hour (default: Llama 3 405B's, 268 GPU-attributed in "
                                     "54 days on 16,384 H100s, 1.26e-5)",
                                     NULL},
    [SEARCH_OPT_NODE_FAILURE_RATE] = {"node-failure-rate", SEARCH_OPT_TEXT, "PER_HOUR",
                                      "Interruptions per node per hour from the host, its NIC, storage and software "
                                      "(default: Llama 3 405B's 116 in 54 days on 2,048 nodes, 4.37e-5)",
                                      NULL},
    [SEARCH_OPT_SWITCH_FAILURE_RATE] = {"switch-failure-rate", SEARCH_OPT_TEXT, "PER_HOUR",
                                        "Interruptions per switch (one per 16 GPUs) per hour (default: Llama 3 "
                                        "405B's 35 network switch and cable failures in 54 days, 2.64e-5)",
                                        NULL},
    [SEARCH_OPT_RESTART_TIME] = {"restart-time", SEARCH_OPT_TEXT, "S",
                                 "Seconds to relaunch the job after an interruption (scheduling, health checks, NCCL "
                                 "init), besides reading the checkpoint (default 600)",
                                 NULL},
    [SEARCH_OPT_STORAGE_BW] = {"storage-bw", SEARCH_OPT_TEXT, "GB/s",
                               "Checkpoint storage's aggregate write and read bandwidth (default 2000, Llama 3's "
                               "Tectonic sustained)",
                               NULL},
    [SEARCH_OPT_STORAGE_NODE_BW] = {"storage-node-bw", SEARCH_OPT_TEXT, "GB/s",
                                    "Each node's bandwidth to checkpoint storage (default 25, a 200 Gbit/s link)", NULL},
    [SEARCH_OPT_HOST_COPY_BW] = {"host-copy-bw", SEARCH_OPT_TEXT, "GB/s",
                                 "Asynchronous checkpoints: each GPU's copy of its state to host memory (default 25)",
                                 NULL},
    [SEARCH_OPT_CHECKPOINT] = {"checkpoint", SEARCH_OPT_TEXT, "MODE",
                               "sync (training waits for the write; default) or async (it waits for the copy to host "
                               "memory, the write runs beside the next iterations)",
                               checkpoints},
    [SEARCH_OPT_CHECKPOINT_EVERY] = {"checkpoint-every", SEARCH_OPT_TEXT, "N|TIME",
                                     "Checkpoint interval: N iterations, or a time (90s, 30m, 2h) rounded to whole "
                                     "iterations (default: Daly's optimum)",
                                     NULL},
    [SEARCH_OPT_SPARE_NODES] = {"spare-nodes", SEARCH_OPT_TEXT, "N",
                                "Hot spare nodes that replace a failed one at restart; a failed node returns after "
                                "--repair-hours (default: as many as needed)",
                                NULL},
    [SEARCH_OPT_REPAIR_HOURS] = {"repair-hours", SEARCH_OPT_TEXT, "H",
                                 "Hours until a failed node is back, with --spare-nodes (default 24)", NULL},
    [SEARCH_OPT_TRIALS] = {"trials", SEARCH_OPT_COUNT, "N",
                           "Monte-Carlo runs of the whole run (with --tokens): median and 90th-percentile days", NULL},
    [SEARCH_OPT_ZERO_PREFETCH_BUCKET] = {"zero-prefetch-bucket", SEARCH_OPT_COUNT, "ELEMENTS",
                                         "--zero 3: DeepSpeed's stage3_prefetch_bucket_size, parameter elements "
                                         "gathered ahead of use (default 50000000)",
                                         NULL},
    [SEARCH_OPT_ZERO_MAX_LIVE] = {"zero-max-live", SEARCH_OPT_COUNT, "ELEMENTS",
                                  "--zero 3: DeepSpeed's stage3_max_live_parameters, no prefetch while this many "
                                  "elements are gathered (default 1000000000)",
                                  NULL},
    [SEARCH_OPT_ZERO_REUSE_DISTANCE] = {"zero-reuse-distance", SEARCH_OPT_COUNT, "ELEMENTS",
                                        "--zero 3: DeepSpeed's stage3_max_reuse_distance, a sub-module used again "
                                        "within this many elements stays gathered (default 1000000000)",
                                        NULL},
    [SEARCH_OPT_ZERO_PERSISTENCE] = {"zero-persistence", SEARCH_OPT_COUNT, "ELEMENTS",
                                     "--zero 3: DeepSpeed's stage3_param_persistence_threshold, smaller tensors stay "
                                     "whole on every GPU (default 100000)",
                                     NULL},
    [SEARCH_OPT_ZERO_REDUCE_BUCKET] = {"zero-reduce-bucket", SEARCH_OPT_COUNT, "ELEMENTS",
                                       "--zero 3: DeepSpeed's reduce_bucket_size, gradient elements reduced together "
                                       "(default 500000000)",
                                       NULL},
    [SEARCH_OPT_ZERO_CONTIGUOUS_GRADIENTS] = {"zero-contiguous-gradients", SEARCH_OPT_FLAG, NULL,
                                              "--zero 3: DeepSpeed's contiguous_gradients, each gradient "
                                              "reduce-scattered on its own (default off: each bucket all-reduced)",
                                              NULL},
    [SEARCH_OPT_ZERO_TRACE_FIXED] = {"zero-trace-fixed", SEARCH_OPT_FLAG, NULL,
                                     "--zero 3: DeepSpeed after the fix of its sub-module trace (mid-2021), whose "
                                     "prefetch and reuse work; default: the April 2021 release SC21 ran, whose hooks "
                                     "left the trace one step off, so every parameter is gathered when needed",
                                     NULL},
    [SEARCH_OPT_FSDP] = {"fsdp", SEARCH_OPT_FLAG, NULL,
                         "PyTorch FSDP2 (fully_shard, as torchtitan applies it) over the data-parallel ranks: "
                         "parameters, gradients and optimizer state sharded, each layer's bf16 parameters "
                         "all-gathered before use and its gradients reduce-scattered; composes with --tp, --pp, --cp",
                         NULL},
    [SEARCH_OPT_HSDP] = {"hsdp", SEARCH_OPT_COUNT, "R",
                         "FSDP2 sharding within groups of d/R data-parallel ranks, replicated across R groups "
                         "(gradients all-reduced across them); implies --fsdp",
                         NULL},
    [SEARCH_OPT_FSDP_REDUCE_DTYPE] = {"fsdp-reduce-dtype", SEARCH_OPT_TEXT, "TYPE",
                                      "FSDP2's gradient reduce-scatter in fp32 (torchtitan's default) or bf16",
                                      fsdp_dtypes},
    [SEARCH_OPT_FSDP_RESHARD] = {"fsdp-reshard-after-forward", SEARCH_OPT_TEXT, "WHEN",
                                 "FSDP2's reshard_after_forward: always (gathered again for backward), never (kept "
                                 "from forward to backward) or default (torchtitan's: never with --pp, else always)",
                                 fsdp_reshards},
};

/* --schedule: its words and help from the schedules' table (schedule/). */
static const SearchOption *schedule_option(void) {
  static SearchOption o;
  static gsize once = 0;
  if (g_once_init_enter(&once)) {
    o = options[SEARCH_OPT_SCHEDULE];
    o.help = g_strdup_printf("%s (default %s; %s when chunks are given); doc/schedules.md", sim_schedule_word_list(),
                             sim_schedule_name(sim_schedule_default(FALSE)),
                             sim_schedule_name(sim_schedule_default(TRUE)));
    o.words = sim_schedule_words();
    g_once_init_leave(&once, 1);
  }
  return &o;
}

const SearchOption *search_option(SearchOptId id) {
  g_return_val_if_fail(id < SEARCH_N_OPTIONS, NULL);
  return id == SEARCH_OPT_SCHEDULE ? schedule_option() : &options[id];
}

/* Megatron-LM's argument names (megatron/training/arguments.py, and the
 * fields of megatron/core's ModelParallelConfig, TransformerConfig and
 * DistributedDataParallelConfig that it turns into arguments) for ptdsim's
 * options of the same meaning; doc/options.md lists them with their
 * differences. */
static const char *const fp8_formats[][2] = {{"e4m3", "fp8"}, {"hybrid", "fp8"}, {NULL, NULL}};
static const SearchAlias aliases[] = {
    {"tensor-model-parallel-size", SEARCH_OPT_TP, "Megatron-LM", NULL},
    {"pipeline-model-parallel-size", SEARCH_OPT_PP, "Megatron-LM", NULL},
    {"context-parallel-size", SEARCH_OPT_CP, "Megatron-LM", NULL},
    {"expert-model-parallel-size", SEARCH_OPT_EP, "Megatron-LM", NULL},
    {"expert-tensor-parallel-size", SEARCH_OPT_EXPERT_TP, "Megatron-LM", NULL},
    {"num-layers", SEARCH_OPT_LAYERS, "Megatron-LM", NULL},
    {"hidden-size", SEARCH_OPT_HIDDEN, "Megatron-LM", NULL},
    {"num-attention-heads", SEARCH_OPT_HEADS, "Megatron-LM", NULL},
    {"ffn-hidden-size", SEARCH_OPT_FFN_HIDDEN, "Megatron-LM", NULL},
    {"seq-length", SEARCH_OPT_SEQ_LEN, "Megatron-LM", NULL},
    {"untie-embeddings-and-output-weights", SEARCH_OPT_UNTIE, "Megatron-LM", NULL},
    {"disable-bias-linear", SEARCH_OPT_NO_BIAS, "Megatron-LM", NULL},
    {"global-batch-size", SEARCH_OPT_GLOBAL_BATCH, "Megatron-LM", NULL},
    {"micro-batch-size", SEARCH_OPT_MICRO_BATCH, "Megatron-LM", NULL},
    {"num-layers-per-virtual-pipeline-stage", SEARCH_OPT_LAYERS_PER_CHUNK, "Megatron-LM", NULL},
    {"num-virtual-stages-per-pipeline-rank", SEARCH_OPT_CHUNKS, "Megatron-LM", NULL},
    {"decoder-first-pipeline-num-layers", SEARCH_OPT_FIRST_STAGE_LAYERS, "Megatron-LM", NULL},
    {"decoder-last-pipeline-num-layers", SEARCH_OPT_LAST_STAGE_LAYERS, "Megatron-LM", NULL},
    {"account-for-embedding-in-pipeline-split", SEARCH_OPT_ACCOUNT_EMBEDDING, "Megatron-LM", NULL},
    {"account-for-loss-in-pipeline-split", SEARCH_OPT_ACCOUNT_LOSS, "Megatron-LM", NULL},
    {"fp8-format", SEARCH_OPT_PRECISION, "Megatron-LM", fp8_formats},
    {"use-distributed-optimizer", SEARCH_OPT_DISTRIBUTED_OPTIMIZER, "Megatron-LM", NULL},
    {"moe-token-dispatcher-type", SEARCH_OPT_MOE_TOKEN_DISPATCHER, "Megatron-LM", NULL},
    {NULL, 0, NULL, NULL}};

const SearchAlias *search_aliases(void) { return aliases; }

const char *search_alias_value(const SearchAlias *a, const char *value, GError **error) {
  if (!a->values)
    return value;
  GString *words = g_string_new(NULL);
  for (guint i = 0; a->values[i][0]; i++) {
    if (value && strcmp(value, a->values[i][0]) == 0) {
      g_string_free(words, TRUE);
      return a->values[i][1];
    }
    g_string_append_printf(words, "%s%s", i ? " or " : "", a->values[i][0]);
  }
  char *echo = ptd_echo(value ? value : "", PTD_ECHO_MAX, FALSE);
  g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unknown --%s '%s'; use %s (--%s %s)", a->name, echo,
              words->str, options[a->id].name, a->values[0][1]);
  g_free(echo);
  g_string_free(words, TRUE);
  return NULL;
}

gint search_option_find(const char *name) {
  for (guint i = 0; i < SEARCH_N_OPTIONS; i++)
    if (strcmp(options[i].name, name) == 0)
      return (gint)i;
  return -1;
}

/* The real-number options: each a decimal number (ptd_parse_real) in its
 * range, `open` excluding `lo`; `what` says the rule in a message. */
static const struct {
  SearchOptId id;
  double lo, hi;
  gboolean open;
  const char *what, *example;
} reals[] = {
    {SEARCH_OPT_MOE_IMBALANCE, 1, 1e6, FALSE, "a number from 1 to 1e6", "1.2"},
    {SEARCH_OPT_MOE_CAPACITY_FACTOR, 1e-3, 1e6, FALSE, "a number from 0.001 to 1e6", "1.25"},
    {SEARCH_OPT_ACTIVATION_LIMIT, 0, 1e6, TRUE, "a number of GiB above 0, at most 1e6", "20"},
    {SEARCH_OPT_MEMORY_RESERVE, 0, 1024, FALSE, "a number of GiB from 0 to 1024", "3"},
    {SEARCH_OPT_HOST_OP, 0, 1e5, FALSE, "a number of microseconds from 0 to 1e5", "20"},
    {SEARCH_OPT_POWER_LIMIT, 1, 1e5, FALSE, "a number of watts from 1 to 1e5", "500"},
    {SEARCH_OPT_PRICE, 0, 1e6, TRUE, "a number of dollars above 0, at most 1e6", "2.5"},
    {SEARCH_OPT_GPU_FAILURE_RATE, 0, 1e3, FALSE, "a failure rate from 0 to 1000 per hour", "1.3e-5"},
    {SEARCH_OPT_NODE_FAILURE_RATE, 0, 1e3, FALSE, "a failure rate from 0 to 1000 per hour", "4.4e-5"},
    {SEARCH_OPT_SWITCH_FAILURE_RATE, 0, 1e3, FALSE, "a failure rate from 0 to 1000 per hour", "2.6e-5"},
    {SEARCH_OPT_RESTART_TIME, 0, 1e7, FALSE, "a number of seconds from 0 to 1e7", "600"},
    {SEARCH_OPT_REPAIR_HOURS, 0, 1e5, FALSE, "a number of hours from 0 to 1e5", "24"},
    {SEARCH_OPT_STORAGE_BW, 1e-6, 1e9, FALSE, "a bandwidth in GB/s from 1e-6 to 1e9", "100"},
    {SEARCH_OPT_STORAGE_NODE_BW, 1e-6, 1e9, FALSE, "a bandwidth in GB/s from 1e-6 to 1e9", "25"},
    {SEARCH_OPT_HOST_COPY_BW, 1e-6, 1e9, FALSE, "a bandwidth in GB/s from 1e-6 to 1e9", "25"},
};

/* The whole-number options that may be 0 (the counts of SEARCH_OPT_COUNT
 * start at 1): decimal digits (ptd_parse_whole) up to `max`. */
static const struct {
  SearchOptId id;
  guint64 max;
  const char *example;
} wholes[] = {
    {SEARCH_OPT_SEED, 4294967295u, "7"},
    {SEARCH_OPT_SPARE_NODES, 1000000, "16"},
};

/* A real option's value, or its error. */
static gboolean real_value(SearchOptId id, const char *text, double *out, GError **error) {
  for (guint i = 0; i < G_N_ELEMENTS(reals); i++) {
    if (reals[i].id != id)
      continue;
    double v = 0;
    if (ptd_parse_real(text, &v) && (reals[i].open ? v > reals[i].lo : v >= reals[i].lo) && v <= reals[i].hi) {
      *out = v;
      return TRUE;
    }
    char *echo = ptd_echo(text, PTD_ECHO_MAX, FALSE);
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--%s '%s' is not %s, written in decimal (digits, a point, an exponent); give e.g. --%s %s",
                options[id].name, echo, reals[i].what, options[id].name, reals[i].example);
    g_free(echo);
    return FALSE;
  }
  g_return_val_if_reached(FALSE);
}

/* A whole option's value, or its error. */
static gboolean whole_value(SearchOptId id, const char *text, guint64 *out, GError **error) {
  for (guint i = 0; i < G_N_ELEMENTS(wholes); i++) {
    if (wholes[i].id != id)
      continue;
    if (ptd_parse_whole(text, wholes[i].max, out))
      return TRUE;
    char *echo = ptd_echo(text, PTD_ECHO_MAX, FALSE);
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--%s '%s' is not a whole number from 0 to %" G_GUINT64_FORMAT
                "; give decimal digits (no sign, space, leading zero or exponent), e.g. --%s %s",
                options[id].name, echo, wholes[i].max, options[id].name, wholes[i].example);
    g_free(echo);
    return FALSE;
  }
  g_return_val_if_reached(FALSE);
}

/* A given real option into *out (left as it is when not given). */
static gboolean real_opt(const SearchConfig *c, SearchOptId id, double *out, GError **error) {
  return !c->text[id] || real_value(id, c->text[id], out, error);
}

static gboolean interval_opt(const char *text, RtInterval *out, GError **error);

/* --schedule-file: a regular file of at most 64 MiB (schedule/schedule.c reads
 * it, checking again). */
static gboolean schedule_file_check(const char *path, GError **error) {
  GStatBuf st = {0};
  const char *why = g_stat(path, &st) != 0   ? g_strerror(errno)
                    : !S_ISREG(st.st_mode)   ? "not a regular file"
                    : st.st_size > (64 << 20) ? "larger than 64 MiB"
                                              : NULL;
  if (!why)
    return TRUE;
  char *echo = ptd_echo(path, PTD_ECHO_MAX, TRUE);
  g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
              "--schedule-file '%s' cannot be read: %s; give the path of a CSV of per-rank actions (at most 64 MiB)",
              echo, why);
  g_free(echo);
  return FALSE;
}

static gboolean text_value_check(SearchOptId id, const char *value, GError **error) {
  for (guint i = 0; i < G_N_ELEMENTS(reals); i++)
    if (reals[i].id == id) {
      double v;
      return real_value(id, value, &v, error);
    }
  for (guint i = 0; i < G_N_ELEMENTS(wholes); i++)
    if (wholes[i].id == id) {
      guint64 v;
      return whole_value(id, value, &v, error);
    }
  double v, ms[4];
  SimSlow slow[SIM_MAX_SLOW];
  guint n;
  RtInterval every;
  switch (id) {
  case SEARCH_OPT_TOKENS:
    return search_tokens(value, &v, error);
  case SEARCH_OPT_SLOW:
  case SEARCH_OPT_SLOW_LINK:
    return sim_slow_parse(value, id == SEARCH_OPT_SLOW_LINK, slow, &n, error);
  case SEARCH_OPT_GPU_SPEED:
    return sim_gpu_speed_parse(value, &v, error);
  case SEARCH_OPT_STAGE_TIMES:
    return sim_stage_times_parse(value, ms, error);
  case SEARCH_OPT_PIPELINE_LAYOUT:
    return sim_layout_parse(value, error) != NULL;
  case SEARCH_OPT_CHECKPOINT_EVERY:
    return interval_opt(value, &every, error);
  case SEARCH_OPT_SCHEDULE_FILE:
    return schedule_file_check(value, error);
  case SEARCH_OPT_RECOMPUTE_MODULES:
    return sim_recompute_modules_parse(value, &n, error);
  case SEARCH_OPT_MODEL: { /* a model file is read where it arrives: a bad one is refused before any run */
    ModelShape m;
    return !ptd_is_path(value) || model_file_read(value, &m, error);
  }
  default:
    return TRUE;
  }
}

void search_config_init(SearchConfig *c) { memset(c, 0, sizeof *c); }

void search_config_clear(SearchConfig *c) {
  for (guint i = 0; i < SEARCH_N_OPTIONS; i++)
    g_free(c->text[i]);
  memset(c, 0, sizeof *c);
}

void search_config_copy(SearchConfig *to, const SearchConfig *from) {
  *to = *from;
  for (guint i = 0; i < SEARCH_N_OPTIONS; i++)
    to->text[i] = g_strdup(from->text[i]);
}

void search_config_unset(SearchConfig *c, SearchOptId id) {
  c->given[id] = FALSE;
  c->count[id] = 0;
  g_clear_pointer(&c->text[id], g_free);
}

static gboolean search_choice(SearchOptId id, const char *word, int *value, GError **error);

gboolean search_config_set(SearchConfig *c, SearchOptId id, const char *value, GError **error) {
  const SearchOption *o = search_option(id);
  switch (o->kind) {
  case SEARCH_OPT_FLAG:
    break;
  case SEARCH_OPT_TEXT:
    if (!value || !*value) {
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "--%s needs a value, e.g. --%s %s", o->name, o->name,
                  o->metavar);
      return FALSE;
    }
    /* a word of a closed set is checked as it is given, so that every
     * verb (plan's search too) names an unknown one and lists the set */
    int v;
    if (o->words && !search_choice(id, value, &v, error))
      return FALSE;
    g_free(c->text[id]);
    c->text[id] = g_strdup(value);
    break;
  case SEARCH_OPT_COUNT: {
    /* Digits only, no leading zero (ptd_parse_whole): GOption and strtol
     * would read "010" as 8 and "-1" as a huge count. */
    guint64 max = id == SEARCH_OPT_TRIALS ? SEARCH_MAX_TRIALS : G_MAXINT32, v = 0;
    if (!ptd_parse_whole(value, max, &v) || v < 1) {
      char *echo = ptd_echo(value, PTD_ECHO_MAX, FALSE);
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                  "--%s '%s' is not a whole number from 1 to %" G_GUINT64_FORMAT "; give decimal digits, e.g. --%s %s",
                  o->name, echo, max, o->name, id == SEARCH_OPT_TRIALS ? "200" : "8");
      g_free(echo);
      return FALSE;
    }
    c->count[id] = (guint)v;
    break;
  }
  }
  c->given[id] = TRUE;
  return TRUE;
}

gboolean search_tokens(const char *text, double *out, GError **error) {
  *out = 0;
  if (!text)
    return TRUE;
  if (!ptd_parse_count(text, out) || *out >= 1e18) {
    char *echo = ptd_echo(text, PTD_ECHO_MAX, FALSE);
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--tokens '%s' is not a token count; give a positive number below 1e18, such as 300e9, 300B or 1.2T",
                echo);
    g_free(echo);
    return FALSE;
  }
  return TRUE;
}

void search_tokens_append(GString *s, double tokens) {
  /* The largest suffix whose mantissa is at least 1, with up to 3
   * decimals; K is left out (2048 reads better than 2.048K). */
  static const struct {
    double scale;
    char suffix;
  } steps[] = {{1e12, 'T'}, {1e9, 'B'}, {1e6, 'M'}};
  for (guint i = 0; i < G_N_ELEMENTS(steps); i++) {
    if (!(tokens >= steps[i].scale))
      continue;
    for (int decimals = 0; decimals <= 3; decimals++) {
      char buf[64];
      double back;
      g_snprintf(buf, sizeof buf, "%.*f%c", decimals, tokens / steps[i].scale, steps[i].suffix);
      if (search_tokens(buf, &back, NULL) && back == tokens) {
        g_string_append(s, buf);
        return;
      }
    }
    break;
  }
  ptd_append_exact_number(s, tokens);
}

/* A word of an option with a closed set of words, and its value. */
static gboolean search_choice(SearchOptId id, const char *word, int *value, GError **error) {
  const SearchOption *o = search_option(id);
  if (id == SEARCH_OPT_SCHEDULE && strcmp(word, "all") == 0)
    return TRUE; /* plan --schedule all: every PTD-P schedule (search_config_request refuses it, naming the words) */
  if (ptd_word_value(o->words, word, value))
    return TRUE;
  char *words = ptd_word_list(o->words);
  char *echo = ptd_echo(word, PTD_ECHO_MAX, FALSE);
  if (id == SEARCH_OPT_PRECISION && (g_ascii_strcasecmp(word, "fp4") == 0 || g_ascii_strcasecmp(word, "nvfp4") == 0 ||
                                      g_ascii_strcasecmp(word, "mxfp4") == 0))
    /* Blackwell has FP4 tensor cores, but no public measurement of FP4
     * training GEMMs with their block scales, nor of the quantization
     * kernels around them, is at hand to price them from */
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--precision %s is not priced: the cost model has no FP4 GEMM or block-scaling kernels from "
                "measurements; use %s",
                echo, words);
  else
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unknown --%s '%s'; use %s", o->name, echo, words);
  g_free(echo);
  g_free(words);
  return FALSE;
}

/* A worded option's value, where given: the word was checked as it was set
 * (search_config_set), and is parsed here, once, into its value. */
static gboolean word_opt(const SearchConfig *c, SearchOptId id, int *value, gboolean *given, GError **error) {
  *given = c->text[id] != NULL;
  *value = 0;
  return !*given || search_choice(id, c->text[id], value, error);
}
#define WORD_OPT(c, id, field, error)                                                                                 \
  do {                                                                                                                 \
    int v_;                                                                                                            \
    if (!word_opt(c, id, &v_, &r->field##_given, error))                                                             \
      return FALSE;                                                                                                    \
    r->field = v_;                                                                                                     \
  } while (0)

gboolean search_value_check(SearchOptId id, const char *value, GError **error) {
  SearchConfig c;
  search_config_init(&c);
  /* a value wrong on its own is refused where it arrives (here, for the
   * command line and a sweep's grid), by the one parser its kind has, so
   * that run, plan and sweep refuse it alike; search_config_set does not
   * parse it again for each sweep row */
  gboolean ok = search_config_set(&c, id, value, error) &&
                (search_option(id)->kind != SEARCH_OPT_TEXT || text_value_check(id, value, error));
  search_config_clear(&c);
  return ok;
}

static guint count_or(const SearchConfig *c, SearchOptId id, guint dflt) {
  return c->given[id] ? c->count[id] : dflt;
}

gboolean search_config_request(const SearchConfig *c, SimPlanRequest *r, GError **error) {
  memset(r, 0, sizeof *r);
  ModelShape named = {.seq_len = 2048, .vocab = 51200};
  const char *model = c->text[SEARCH_OPT_MODEL];
  if (model && ptd_is_path(model)) {
    if (!model_file_read(model, &named, error))
      return FALSE;
  } else if (model && !model_lookup(model, &named)) {
    GString *names = g_string_new(NULL);
    for (const char *const *n = model_names(); *n; n++)
      g_string_append_printf(names, "%s%s", names->len ? ", " : "", *n);
    char *echo = ptd_echo(model, PTD_ECHO_MAX, FALSE);
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unknown --model '%s'; built-in models: %s%s%s%s", echo,
                names->str, g_file_test(model, G_FILE_TEST_IS_REGULAR) ? " (for the file of that name, write ./" : "",
                g_file_test(model, G_FILE_TEST_IS_REGULAR) ? echo : "",
                g_file_test(model, G_FILE_TEST_IS_REGULAR) ? ")" : "");
    g_free(echo);
    g_string_free(names, TRUE);
    return FALSE;
  }
  if (!model && (!c->given[SEARCH_OPT_LAYERS] || !c->given[SEARCH_OPT_HIDDEN] || !c->given[SEARCH_OPT_HEADS])) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "no model: give --model NAME or all of --layers, --hidden and --heads");
    return FALSE;
  }
  if (!c->given[SEARCH_OPT_GPUS]) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "--gpus is required");
    return FALSE;
  }
  if (c->given[SEARCH_OPT_GLOBAL_BATCH] && c->given[SEARCH_OPT_LOCAL_BATCH]) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--local-batch and --global-batch are both given; give one (the global batch is the local batch x "
                "the data-parallel size)");
    return FALSE;
  }
  if (!c->given[SEARCH_OPT_GLOBAL_BATCH] && !c->given[SEARCH_OPT_LOCAL_BATCH]) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "--global-batch is required");
    return FALSE;
  }
  r->model = named;
  r->model.layers = count_or(c, SEARCH_OPT_LAYERS, named.layers);
  r->model.hidden = count_or(c, SEARCH_OPT_HIDDEN, named.hidden);
  r->model.heads = count_or(c, SEARCH_OPT_HEADS, named.heads);
  r->model.seq_len = count_or(c, SEARCH_OPT_SEQ_LEN, named.seq_len);
  r->model.vocab = count_or(c, SEARCH_OPT_VOCAB, named.vocab);
  r->model.ffn_hidden = count_or(c, SEARCH_OPT_FFN_HIDDEN, named.ffn_hidden);
  r->model.query_groups = count_or(c, SEARCH_OPT_QUERY_GROUPS, named.query_groups);
  r->model.kv_channels = count_or(c, SEARCH_OPT_KV_CHANNELS, named.kv_channels);
  r->model.experts = count_or(c, SEARCH_OPT_NUM_EXPERTS, named.experts);
  r->model.topk = count_or(c, SEARCH_OPT_MOE_TOPK, named.topk ? named.topk : 2);
  if (!r->model.experts)
    r->model.topk = 0;
  r->model.moe_ffn = count_or(c, SEARCH_OPT_MOE_FFN_HIDDEN, named.moe_ffn);
  r->model.shared_ffn = count_or(c, SEARCH_OPT_MOE_SHARED_FFN_HIDDEN, named.shared_ffn);
  r->model.moe_freq = count_or(c, SEARCH_OPT_MOE_LAYER_FREQ, named.moe_freq);
  r->model.first_dense = count_or(c, SEARCH_OPT_MOE_FIRST_DENSE, named.first_dense);
  r->ep = count_or(c, SEARCH_OPT_EP, 0);
  r->expert_tp = count_or(c, SEARCH_OPT_EXPERT_TP, 0);
  /* the shape of MoE layers on a model without them: nothing to shape */
  const SearchOptId shapes[] = {SEARCH_OPT_MOE_TOPK, SEARCH_OPT_MOE_FFN_HIDDEN, SEARCH_OPT_MOE_SHARED_FFN_HIDDEN,
                                SEARCH_OPT_MOE_LAYER_FREQ, SEARCH_OPT_MOE_FIRST_DENSE};
  for (guint i = 0; i < G_N_ELEMENTS(shapes) && !r->model.experts; i++)
    if (c->given[shapes[i]]) {
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                  "--%s shapes mixture-of-experts layers, but the model is dense; give --num-experts or an MoE "
                  "--model (see ptdsim models), or drop it",
                  options[shapes[i]].name);
      return FALSE;
    }
  if (!real_opt(c, SEARCH_OPT_MOE_IMBALANCE, &r->moe_imbalance, error) ||
      !real_opt(c, SEARCH_OPT_MOE_CAPACITY_FACTOR, &r->moe_capacity, error))
    return FALSE;
  if (!c->given[SEARCH_OPT_MOE_IMBALANCE])
    r->moe_imbalance = 0;
  if (!c->given[SEARCH_OPT_MOE_CAPACITY_FACTOR])
    r->moe_capacity = 0;
  WORD_OPT(c, SEARCH_OPT_MOE_TOKEN_DISPATCHER, moe_dispatcher, error);
  r->moe_a2a_overlap = c->given[SEARCH_OPT_OVERLAP_MOE_EP_COMM];
  r->moe_groups = count_or(c, SEARCH_OPT_MOE_ROUTER_NUM_GROUPS, 0);
  r->moe_group_topk = count_or(c, SEARCH_OPT_MOE_ROUTER_GROUP_TOPK, 0);
  if (c->given[SEARCH_OPT_SWIGLU])
    r->model.mlp = MODEL_MLP_SWIGLU;
  if (c->given[SEARCH_OPT_UNTIE])
    r->model.untied = TRUE;
  if (c->given[SEARCH_OPT_NO_BIAS])
    r->model.no_bias = TRUE;
  const char *norm = c->text[SEARCH_OPT_NORM], *position = c->text[SEARCH_OPT_POSITION];
  int w;
  if (norm && !search_choice(SEARCH_OPT_NORM, norm, &w, error))
    return FALSE;
  if (norm)
    r->model.norm = (ModelNorm)w;
  if (position && !search_choice(SEARCH_OPT_POSITION, position, &w, error))
    return FALSE;
  if (position)
    r->model.position = (ModelPosition)w;
  r->gpus = c->count[SEARCH_OPT_GPUS];
  r->tp = count_or(c, SEARCH_OPT_TP, 1);
  r->pp = count_or(c, SEARCH_OPT_PP, 1);
  r->dp = count_or(c, SEARCH_OPT_DP, 0);
  r->global_batch = c->count[SEARCH_OPT_GLOBAL_BATCH];
  if (c->given[SEARCH_OPT_LOCAL_BATCH]) {
    /* torchtitan: global_batch_size = local_batch_size x the data-parallel
     * degree (dp_shard x dp_replicate, the GPUs over tp x pp x cp) */
    guint64 mp = (guint64)r->tp * r->pp * count_or(c, SEARCH_OPT_CP, 1);
    guint64 dp = c->given[SEARCH_OPT_DP] ? c->count[SEARCH_OPT_DP] : r->gpus / mp;
    if (!c->given[SEARCH_OPT_DP] && (r->gpus % mp || dp == 0)) {
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                  "--local-batch needs a whole data-parallel size, but --gpus %u is not a multiple of tp x pp x cp = "
                  "%" G_GUINT64_FORMAT "; give --global-batch, or --gpus a multiple",
                  r->gpus, mp);
      return FALSE;
    }
    guint64 global = dp * c->count[SEARCH_OPT_LOCAL_BATCH];
    if (global > G_MAXINT32) {
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                  "--local-batch %u x %" G_GUINT64_FORMAT " data-parallel ranks is more than %d sequences",
                  c->count[SEARCH_OPT_LOCAL_BATCH], dp, G_MAXINT32);
      return FALSE;
    }
    r->global_batch = (guint)global;
  }
  r->micro_batch = count_or(c, SEARCH_OPT_MICRO_BATCH, 1);
  r->layers_per_chunk = count_or(c, SEARCH_OPT_LAYERS_PER_CHUNK, 0);
  r->chunks = count_or(c, SEARCH_OPT_CHUNKS, 0);
  r->split.first = count_or(c, SEARCH_OPT_FIRST_STAGE_LAYERS, 0);
  r->split.last = count_or(c, SEARCH_OPT_LAST_STAGE_LAYERS, 0);
  r->split.embedding = c->given[SEARCH_OPT_ACCOUNT_EMBEDDING];
  r->split.loss = c->given[SEARCH_OPT_ACCOUNT_LOSS];
  r->layout = c->text[SEARCH_OPT_PIPELINE_LAYOUT];
  r->granularity = count_or(c, SEARCH_OPT_GRANULARITY, 0);
  r->zero = count_or(c, SEARCH_OPT_ZERO, 0);
  r->zero_prefetch_bucket = count_or(c, SEARCH_OPT_ZERO_PREFETCH_BUCKET, 0);
  r->zero_max_live = count_or(c, SEARCH_OPT_ZERO_MAX_LIVE, 0);
  r->zero_reuse_distance = count_or(c, SEARCH_OPT_ZERO_REUSE_DISTANCE, 0);
  r->zero_persistence = count_or(c, SEARCH_OPT_ZERO_PERSISTENCE, 0);
  r->zero_reduce_bucket = count_or(c, SEARCH_OPT_ZERO_REDUCE_BUCKET, 0);
  r->zero_contiguous_gradients = c->given[SEARCH_OPT_ZERO_CONTIGUOUS_GRADIENTS];
  r->zero_trace_fixed = c->given[SEARCH_OPT_ZERO_TRACE_FIXED];
  r->fsdp = c->given[SEARCH_OPT_FSDP];
  r->hsdp = count_or(c, SEARCH_OPT_HSDP, 0);
  WORD_OPT(c, SEARCH_OPT_FSDP_REDUCE_DTYPE, fsdp_reduce_dtype, error);
  WORD_OPT(c, SEARCH_OPT_FSDP_RESHARD, fsdp_reshard, error);
  if (!search_tokens(c->text[SEARCH_OPT_TOKENS], &r->tokens, error))
    return FALSE;
  const char *schedule = c->text[SEARCH_OPT_SCHEDULE];
  if (schedule && strcmp(schedule, "all") == 0) { /* plan's word for every schedule; a run takes one */
    char *echo = ptd_echo(schedule, PTD_ECHO_MAX, FALSE);
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unknown --schedule '%s'; use %s", echo,
                sim_schedule_word_list());
    g_free(echo);
    return FALSE;
  }
  WORD_OPT(c, SEARCH_OPT_SCHEDULE, schedule, error);
  r->schedule_file = c->text[SEARCH_OPT_SCHEDULE_FILE];
  if (c->text[SEARCH_OPT_STAGE_TIMES]) {
    if (!sim_stage_times_parse(c->text[SEARCH_OPT_STAGE_TIMES], r->stage_times_ms, error))
      return FALSE;
    r->stage_times = TRUE;
    r->stage_times_text = c->text[SEARCH_OPT_STAGE_TIMES];
  }
  double limit = 0;
  if (!real_opt(c, SEARCH_OPT_ACTIVATION_LIMIT, &limit, error))
    return FALSE;
  r->activation_limit_gib = limit;
  if (c->text[SEARCH_OPT_SLICES]) {
    if (!sim_slices_parse(c->text[SEARCH_OPT_SLICES], r, error))
      return FALSE;
    r->slices_text = c->text[SEARCH_OPT_SLICES];
  }
  WORD_OPT(c, SEARCH_OPT_DDP, ddp, error);
  WORD_OPT(c, SEARCH_OPT_RECOMPUTE, recompute, error);
  r->recompute_every = count_or(c, SEARCH_OPT_RECOMPUTE_EVERY, 0);
  if (c->text[SEARCH_OPT_RECOMPUTE_MODULES]) {
    if (!sim_recompute_modules_parse(c->text[SEARCH_OPT_RECOMPUTE_MODULES], &r->recompute_modules, error))
      return FALSE;
    r->recompute_modules_given = TRUE;
  }
  WORD_OPT(c, SEARCH_OPT_NETWORK, network, error);
  WORD_OPT(c, SEARCH_OPT_PLACEMENT, placement, error);
  WORD_OPT(c, SEARCH_OPT_WORKLOAD, workload, error);
  r->no_scatter_gather = c->given[SEARCH_OPT_NO_SCATTER_GATHER];
  r->no_fusion = c->given[SEARCH_OPT_NO_FUSION];
  r->no_symmetry = c->given[SEARCH_OPT_NO_SYMMETRY];
  r->allow_oom = c->given[SEARCH_OPT_ALLOW_OOM];
  r->exact = c->given[SEARCH_OPT_EXACT];
  r->distributed_optimizer = c->given[SEARCH_OPT_DISTRIBUTED_OPTIMIZER];
  r->sequence_parallel = c->given[SEARCH_OPT_SEQUENCE_PARALLEL];
  r->cp = count_or(c, SEARCH_OPT_CP, 0);
  r->tp_comm_overlap = c->given[SEARCH_OPT_TP_COMM_OVERLAP];
  r->overlap_param_gather = c->given[SEARCH_OPT_OVERLAP_PARAM_GATHER];
  WORD_OPT(c, SEARCH_OPT_ATTENTION, attention, error);
  WORD_OPT(c, SEARCH_OPT_PRECISION, precision, error);
  WORD_OPT(c, SEARCH_OPT_FRAMEWORK, framework, error);
  WORD_OPT(c, SEARCH_OPT_CLOCK, clock, error);
  SimStragglers *st = &r->stragglers;
  if ((c->text[SEARCH_OPT_SLOW] && !sim_slow_parse(c->text[SEARCH_OPT_SLOW], FALSE, st->gpu, &st->n_gpu, error)) ||
      (c->text[SEARCH_OPT_SLOW_LINK] &&
       !sim_slow_parse(c->text[SEARCH_OPT_SLOW_LINK], TRUE, st->link, &st->n_link, error)) ||
      (c->text[SEARCH_OPT_GPU_SPEED] && !sim_gpu_speed_parse(c->text[SEARCH_OPT_GPU_SPEED], &st->sigma, error)))
    return FALSE;
  guint64 seed = 1;
  if (c->text[SEARCH_OPT_SEED] && !whole_value(SEARCH_OPT_SEED, c->text[SEARCH_OPT_SEED], &seed, error))
    return FALSE;
  if (c->given[SEARCH_OPT_SEED] && !c->given[SEARCH_OPT_GPU_SPEED] && !c->given[SEARCH_OPT_TRIALS]) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--seed picks --gpu-speed's draw and the whole run's Monte-Carlo (--trials), and neither is given; "
                "add one or drop --seed");
    return FALSE;
  }
  r->seed = seed;
  if (c->text[SEARCH_OPT_MEMORY_RESERVE]) {
    if (!real_opt(c, SEARCH_OPT_MEMORY_RESERVE, &r->memory_reserve_gib, error))
      return FALSE;
    r->memory_reserve_given = TRUE;
  }
  if (c->text[SEARCH_OPT_HOST_OP]) {
    if (!real_opt(c, SEARCH_OPT_HOST_OP, &r->host_op_us, error))
      return FALSE;
    r->host_op_given = TRUE;
  }
  r->cuda_graphs = c->given[SEARCH_OPT_CUDA_GRAPHS];
  if (c->text[SEARCH_OPT_POWER_LIMIT]) {
    if (!real_opt(c, SEARCH_OPT_POWER_LIMIT, &r->power_limit_W, error))
      return FALSE;
    r->power_limit_given = TRUE;
  }
  if (c->text[SEARCH_OPT_PRICE] && !real_opt(c, SEARCH_OPT_PRICE, &r->price_per_gpu_hour, error))
    return FALSE;
  return TRUE;
}

/* --checkpoint-every: digits, iterations; a decimal number and s, m, min
 * or h, a time. */
static gboolean interval_opt(const char *text, RtInterval *out, GError **error) {
  gsize len = strlen(text), cut = g_str_has_suffix(text, "min") ? 3 : len && strchr("smh", text[len - 1]) ? 1 : 0;
  double unit = !cut ? 0 : text[len - 1] == 's' ? 1 : text[len - 1] == 'h' ? 3600 : 60;
  char *number = g_strndup(text, len - cut);
  guint64 n = 0;
  double v = 0;
  gboolean ok = cut ? ptd_parse_real(number, &v) && v > 0 && v < 1e12 : ptd_parse_whole(number, 999999999999u, &n) && n > 0;
  g_free(number);
  if (!ok) {
    char *echo = ptd_echo(text, PTD_ECHO_MAX, FALSE);
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--checkpoint-every '%s' is not a number of iterations (decimal digits) or a time (a decimal number "
                "and s, m or h); give e.g. --checkpoint-every 500 or --checkpoint-every 30m",
                echo);
    g_free(echo);
    return FALSE;
  }
  if (!cut)
    out->iterations = n;
  else
    out->seconds = v * unit;
  return TRUE;
}

gboolean search_config_runtime(const SearchConfig *c, RtOptions *o, GError **error) {
  rt_options_default(o);
  if (!c->given[SEARCH_OPT_TOKENS])
    for (guint i = SEARCH_OPT_GPU_FAILURE_RATE; i <= SEARCH_OPT_TRIALS; i++)
      if (c->given[i]) {
        g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                    "--%s is about the whole run, which needs a token budget; give --tokens (e.g. --tokens 15T)",
                    options[i].name);
        return FALSE;
      }
  if (c->given[SEARCH_OPT_REPAIR_HOURS] && !c->given[SEARCH_OPT_SPARE_NODES]) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--repair-hours is how long a failed node is away from a pool of spares, and no --spare-nodes is "
                "given (the default is as many spares as needed); add --spare-nodes N or drop --repair-hours");
    return FALSE;
  }
  double gbps = 0;
  guint64 spares = 0, seed = 1;
  if (!real_opt(c, SEARCH_OPT_GPU_FAILURE_RATE, &o->gpu_rate, error) ||
      !real_opt(c, SEARCH_OPT_NODE_FAILURE_RATE, &o->node_rate, error) ||
      !real_opt(c, SEARCH_OPT_SWITCH_FAILURE_RATE, &o->switch_rate, error) ||
      !real_opt(c, SEARCH_OPT_RESTART_TIME, &o->restart_s, error) ||
      !real_opt(c, SEARCH_OPT_REPAIR_HOURS, &o->repair_s, error) ||
      (c->text[SEARCH_OPT_SPARE_NODES] &&
       !whole_value(SEARCH_OPT_SPARE_NODES, c->text[SEARCH_OPT_SPARE_NODES], &spares, error)) ||
      (c->text[SEARCH_OPT_SEED] && !whole_value(SEARCH_OPT_SEED, c->text[SEARCH_OPT_SEED], &seed, error)))
    return FALSE;
  if (c->text[SEARCH_OPT_REPAIR_HOURS])
    o->repair_s *= 3600.0;
  if (c->text[SEARCH_OPT_SPARE_NODES])
    o->spares = (gint64)spares;
  o->seed = seed;
  const SearchOptId bws[] = {SEARCH_OPT_STORAGE_BW, SEARCH_OPT_STORAGE_NODE_BW, SEARCH_OPT_HOST_COPY_BW};
  double *to[] = {&o->storage_Bps, &o->storage_node_Bps, &o->host_copy_Bps};
  for (guint i = 0; i < G_N_ELEMENTS(bws); i++) {
    gbps = 0;
    if (!real_opt(c, bws[i], &gbps, error))
      return FALSE;
    if (gbps > 0)
      *to[i] = gbps * 1e9;
  }
  const char *mode = c->text[SEARCH_OPT_CHECKPOINT];
  int async = 0;
  if (mode && !search_choice(SEARCH_OPT_CHECKPOINT, mode, &async, error))
    return FALSE;
  o->async = async;
  if (c->text[SEARCH_OPT_CHECKPOINT_EVERY] && !interval_opt(c->text[SEARCH_OPT_CHECKPOINT_EVERY], &o->every, error))
    return FALSE;
  o->trials = c->given[SEARCH_OPT_TRIALS] ? c->count[SEARCH_OPT_TRIALS] : 0;
  return TRUE;
}

/* A word as a POSIX shell reads it: bare when it is made of safe
 * characters, else in single quotes. */
static void append_word(GString *s, const char *w) {
  gboolean safe = *w != '\0';
  for (const char *p = w; safe && *p; p++)
    safe = g_ascii_isalnum(*p) || strchr("-_.,:/+=@%", *p);
  if (safe) {
    g_string_append(s, w);
    return;
  }
  g_string_append_c(s, '\'');
  for (const char *p = w; *p; p++)
    if (*p == '\'')
      g_string_append(s, "'\\''");
    else
      g_string_append_c(s, *p);
  g_string_append_c(s, '\'');
}

char *search_config_command(const SearchConfig *c) {
  GString *s = g_string_new("ptdsim run");
  for (guint i = 0; i < SEARCH_N_OPTIONS; i++) {
    if (!c->given[i])
      continue;
    g_string_append_printf(s, " --%s", options[i].name);
    double tokens;
    if (options[i].kind == SEARCH_OPT_COUNT)
      g_string_append_printf(s, " %u", c->count[i]);
    else if (i == SEARCH_OPT_TOKENS && search_tokens(c->text[i], &tokens, NULL)) {
      g_string_append_c(s, ' '); /* one spelling for 300B, 300e9, 3e11: 300B */
      search_tokens_append(s, tokens);
    } else if (options[i].kind == SEARCH_OPT_TEXT) {
      g_string_append_c(s, ' ');
      append_word(s, c->text[i]);
    }
  }
  return g_string_free(s, FALSE);
}
