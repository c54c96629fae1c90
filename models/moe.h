/* ptdsim — the cost of a mixture-of-experts layer's MLP block as
 * Megatron-Core runs it (megatron/core/transformer/moe/: router.py,
 * token_dispatcher.py, experts.py, moe_layer.py), on a device profile.
 *
 * The attention block runs on t x cp ranks; with t > 1 sequence parallelism
 * is on (Megatron's arguments.py requires it with MoE), so each rank routes
 * T = b s / (t cp) tokens.  Forward, per rank:
 *   router: the gate GEMM T x E x h, the score function and top-k over the
 *     T x E fp32 logits (a memory-bound pass), and the shared experts (a
 *     SwiGLU MLP of width shared_ffn on the T tokens);
 *   permute: the T k chosen (token, expert) rows gathered in expert order;
 *   dispatch: the all-to-all over the ep ranks of the expert-parallel group
 *     (--moe-token-dispatcher alltoall: MoEAlltoAllTokenDispatcher; each
 *     rank sends T k h 2 bytes, (ep - 1)/ep of them off-rank) or the
 *     all-gather of the T h tokens over the group (allgather:
 *     MoEAllGatherTokenDispatcher); with expert-tp > 1 the received tokens
 *     are all-gathered over the etp ranks of the expert-tensor group;
 *   experts: the E / ep local experts' grouped GEMMs (TEGroupedMLP), each
 *     expert a GEMM of its n tokens x (2 moe_ffn / etp) x h, the SwiGLU
 *     kernel and n x h x (moe_ffn / etp), priced one by one with the GEMM
 *     model at the per-expert sizes (small experts run at a low share of
 *     the peak: that is the point), where
 *       n = T ep etp k / E x min(imbalance, capacity factor)
 *     on the busiest rank (--moe-imbalance, default 1: perfectly balanced
 *     routing; --moe-capacity-factor caps it: tokens beyond are dropped);
 *   combine: the reverse all-to-all (or reduce-scatter), after the
 *     expert-tensor reduce-scatter;
 *   unpermute: the k expert outputs of each token weighted and summed.
 * Backward runs each in reverse: input- and weight-gradient GEMMs for every
 * forward GEMM, the all-to-alls in the other direction.
 *
 * In FP8 (Transformer Engine's GroupedLinear for the experts, its Linear
 * for the shared experts) every expert and shared-expert GEMM casts its
 * changing operand and runs at the FP8 rate as a dense layer's does
 * (models/layer.c); the router (a plain 16-bit linear in router.py), the
 * score function, permute, unpermute and the token communication stay
 * 16-bit (but DeepEP's dispatch, FP8 with its scales: model_moe_deepep_bytes).
 */
#pragma once

#include "profile.h"
#include "transformer.h"

typedef enum { MODEL_MOE_ALLTOALL, MODEL_MOE_ALLGATHER, MODEL_MOE_DEEPEP } ModelMoeDispatcher;

typedef struct {
  guint t, cp, ep, etp, b;
  double imbalance;   /* >= 1: the busiest rank's tokens over the average */
  double capacity;    /* 0: dropless; else the capacity factor */
  ModelMoeDispatcher dispatcher;
  gboolean fp8;       /* the experts' and shared experts' GEMMs in FP8 (the router's stay 16-bit) */
  /* group-limited routing (Megatron-Core's --moe-router-num-groups and
   * --moe-router-group-topk): the experts dealt in `groups` equal groups,
   * each token choosing `group_topk` of them, then its k experts among
   * theirs; 0: plain top-k over all experts */
  guint groups, group_topk;
  /* MODEL_MOE_DEEPEP: the nodes an expert-parallel group spans, its ep
   * ranks spread evenly over them (0 or 1: one node) */
  guint ep_nodes;
} ModelMoeOptions;

typedef struct {
  double tokens;        /* T, tokens each rank routes */
  double expert_tokens; /* n, tokens of one local expert on the busiest rank */
  guint local_experts;  /* E / ep */
  /* nccl-tests' size of one dispatch (and of one combine) per rank: the
   * all-to-all's send buffer T k h 2, or the all-gather's output T h 2 ep */
  double dispatch_bytes;
  /* etp > 1: the expert-tensor all-gather's output (and the
   * reduce-scatter's input) per rank, T k h 2 etp; 0: none */
  double etp_bytes;
  /* MODEL_MOE_DEEPEP, per rank and dispatch (d) or combine (c): the bytes
   * that cross InfiniBand and the bytes forwarded over NVLink
   * (model_moe_deepep_bytes); dispatch_bytes is then their sum for the
   * dispatch */
  double ib_bytes_d, nvl_bytes_d, ib_bytes_c, nvl_bytes_c;
  /* compute, in seconds: before the dispatch (router, shared experts,
   * permute), the local experts, after the combine (unpermute) */
  double fwd_route_s, fwd_experts_s, fwd_unpermute_s;
  double bwd_unpermute_s, bwd_experts_s, bwd_route_s;
  double fwd_flops, bwd_flops; /* executed by this rank, GEMMs only */
  /* parts of the forward that Megatron-Core's recompute_modules run again:
   * the shared experts' MLP (in fwd_route_s) and the local experts'
   * activation kernels (in fwd_experts_s) */
  double fwd_shared_s, fwd_act_s;
} ModelMoeCost;

/* Tokens per local expert on the busiest rank (n above). */
double model_moe_expert_tokens(const ModelShape *m, const ModelMoeOptions *o);
/* Bytes each rank sends to other ranks in one dispatch (and in one
 * combine): T k h 2 (ep - 1)/ep (all-to-all). */
double model_moe_a2a_wire_bytes(const ModelShape *m, const ModelMoeOptions *o);
void model_moe_cost(const ModelProfile *p, const ModelShape *m, const ModelMoeOptions *o, ModelMoeCost *out);

/* The expected number of distinct units a token's k experts lie on, the
 * E experts dealt in order over `units` equal units (the ranks of an
 * expert-parallel group, or its nodes: expert e on unit e / (E / units), as
 * Megatron-Core places experts on ranks), under group-limited routing with
 * o->groups and o->group_topk (none: one group, always chosen).  The
 * assumption: routing balanced in expectation -- each token's M groups a
 * uniform choice of M of the G, its k experts a uniform choice of k of the
 * M E / G experts of those groups, without repetition.  A unit u holding x
 * of the chosen groups' experts misses all k with probability
 * C(P - x, k) / C(P, k), P = M E / G; x follows from which of the groups
 * overlapping u are chosen, each set of j of its s overlapping groups with
 * probability C(G - s, M - j) / C(G, M).  The sum over the units of
 * 1 - E[miss]. */
double model_moe_reach(const ModelShape *m, const ModelMoeOptions *o, guint units);
/* DeepEP's bytes per rank of one dispatch (`combine` FALSE) or combine
 * (deepseek-ai/DeepEP's internode kernels; the DeepSeek-V3 report, section
 * 3.2.2): a token crosses InfiniBand once to each node other than its own
 * that holds one of its experts (to the GPU of its own rail there), then
 * that GPU forwards it over NVLink once to each other GPU of its node that
 * holds one (not once per expert).  With N = o->ep_nodes nodes of m =
 * ep / N ranks, and the source's node (GPU) any of the N (m) with equal
 * chance:
 *   ib  = T x token bytes x reach(N nodes) x (N - 1) / N
 *   nvl = T x token bytes x reach(ep ranks) x (m - 1) / m
 * a token 2h bytes (bf16), or with o->fp8 for the dispatch h bytes of FP8
 * and an fp32 scale per 128 channels (DeepEP's FP8 dispatch, the report's
 * section 3.3); the combine is bf16 on the reverse path. */
void model_moe_deepep_bytes(const ModelShape *m, const ModelMoeOptions *o, gboolean combine, double *ib,
                            double *nvl);

/* Parameters of one MoE layer's MLP block on one GPU: E/ep experts split
 * over etp, the shared experts split over t, the router and its bias whole. */
guint64 model_moe_local_params(const ModelShape *m, guint t, guint ep, guint etp);
/* The expert part of it (what the expert-data-parallel ranks share). */
guint64 model_moe_local_expert_params(const ModelShape *m, guint ep, guint etp);
/* The tensors one MoE layer's MLP block keeps for its backward per
 * microbatch on the busiest rank, beyond what its attention block and norms
 * keep (model_layer_held_bytes), in bytes, as Megatron-Core with Transformer
 * Engine holds them (--moe-permute-fusion and --moe-grouped-gemm, the
 * alltoall dispatcher's path; megatron/core/transformer/moe/):
 *   router: the fp32 logits and scores of the T tokens over the E experts,
 *     8 T E (router_gating_linear in moe_utils.py saves the 16-bit norm
 *     output, already counted, and returns router_dtype fp32);
 *   permute_map: the fused permute's row_id_map, int32 [T, 2E + 1]
 *     (transformer_engine/pytorch/permutation.py,
 *     _moe_permute_mask_map_setup_context saves it alone, not the tokens;
 *     the unpermute, called without probs by MoEAlltoAllTokenDispatcher.
 *     combine_postprocess, saves the same map);
 *   sort_maps: with more than one local expert, the two chunk sorts'
 *     int32 maps, one per received row each (_moe_chunk_sort_setup_context);
 *   fc1_input: the experts' first grouped GEMM's input, n E/ep rows of h
 *     (TE's GroupedLinear saves its input; in FP8 its FP8 copy, 1 byte);
 *   fc1_output: its output, 2 x 2 moe_ffn / etp per row with SwiGLU,
 *     saved by the weighted activation (fused_bias_swiglu.py,
 *     WeightedSwiGLUFunction saves its input and the probabilities);
 *   probs: those per-row probabilities, fp32 (the router's dtype): the
 *     routing weights are applied in the activation (experts.py,
 *     TEGroupedMLP.forward's bias_act_func), so nothing keeps the experts'
 *     outputs for the unpermute;
 *   fc2_input: the activation's output, moe_ffn / etp per row (2 bytes, or
 *     its FP8 copy);
 *   shared: the shared experts' MLP (a tensor-parallel MLP on the
 *     sequence-parallel tokens: its first GEMM's output and the activation's,
 *     T shared_ffn (4 + 2) bytes with SwiGLU, one byte less in FP8);
 *   norm_output: in FP8, the pre-MLP norm's 16-bit output that the router
 *     keeps where the dense layer's formula counted its FP8 copy (1 byte
 *     more per element), and the shared experts' first GEMM's own FP8 copy
 *     of it (1 byte more).
 * `modules` (Megatron-Core's recompute_modules, MODEL_RC_*): moe_act drops
 * fc2_input (experts.py: the activation under CheckpointWithoutOutput, its
 * output discarded once fc2 has run; in FP8 fc2 saves that 16-bit output,
 * set_save_original_input); shared_experts drops shared (the shared
 * experts under tensor_parallel.checkpoint in moe_layer.py); moe drops all
 * but the checkpoint's input (moe_layer.py: the whole forward under
 * tensor_parallel.checkpoint); layernorm leaves norm_output to the norm's
 * own recomputation (transformer_layer.py, pre_mlp_layernorm under
 * CheckpointWithoutOutput). */
typedef struct {
  double router, permute_map, sort_maps, fc1_input, fc1_output, probs, fc2_input, shared, norm_output;
} ModelMoeSaved;
void model_moe_saved_tensors(const ModelShape *m, const ModelMoeOptions *o, guint modules, ModelMoeSaved *out);
/* Their sum. */
double model_moe_activation_bytes(const ModelShape *m, const ModelMoeOptions *o, guint modules);
/* The dense MLP's share of model_layer_activation_bytes that an MoE layer
 * does not keep: (6 or 4) f s b / t, one byte less per f in FP8 (the
 * second GEMM's input kept as its FP8 copy). */
double model_dense_mlp_activation_bytes(const ModelShape *m, guint t, guint b, gboolean fp8);
