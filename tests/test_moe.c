/* Mixture of experts: the built-in MoE models' parameter counts against
 * their released checkpoints, FLOPs with top-k routing, the all-to-all's
 * bytes, Megatron-Core's folded rank layout, the MoE memory formulas. */
#include <glib.h>
#include <math.h>

#include "../models/comm.h"
#include "../models/compute.h"
#include "../models/memory.h"
#include "../models/moe.h"
#include "../models/transformer.h"
#include "../plan/moe.h"

static ModelShape get(const char *name) {
  ModelShape m;
  g_assert_true(model_lookup(name, &m));
  return m;
}

/* Released checkpoints, as the sum of their tensors' sizes (the
 * model.safetensors.index.json "total_size" over 2 bytes for the bf16 ones;
 * for DeepSeek-V3 the count Hugging Face shows, 684,489,845,504, which
 * includes the MTP module's stored copies of the embedding and the head). */
static void test_checkpoint_counts(void) {
  ModelShape m = get("mixtral-8x7b");
  g_assert_cmpuint(model_param_count(&m), ==, 93405585408ull / 2); /* 46.7B */
  g_assert_cmpuint(model_active_param_count(&m), ==, 12879925248ull); /* "12.9B active" */
  m = get("mixtral-8x22b");
  g_assert_cmpuint(model_param_count(&m), ==, 140620634112ull);     /* "141B" */
  g_assert_cmpuint(model_active_param_count(&m), ==, 39152031744ull); /* "39B active" */
  m = get("deepseek-v3");
  guint64 Vh = (guint64)m.vocab * m.hidden;
  g_assert_cmpuint(model_param_count(&m) + 2 * Vh * m.mtp, ==, 684489845504ull);
  /* the main model without the MTP module: "671B total, 37B activated" */
  guint64 main = model_param_count(&m) - model_mtp_params(&m);
  g_assert_cmpuint(main, ==, 671026419200ull);
  g_assert_cmpuint(model_active_param_count(&m) - (model_mtp_params(&m) - 248ull * model_expert_params(&m)), ==,
                   37552297472ull);
  g_assert_cmpuint(model_moe_layer_count(&m), ==, 58);
  m = get("qwen3-30b-a3b");
  g_assert_cmpuint(model_param_count(&m), ==, 30532122624ull);
  g_assert_cmpuint(model_active_param_count(&m), ==, 3353032704ull);
  m = get("qwen3-235b-a22b");
  g_assert_cmpuint(model_param_count(&m), ==, 235093634560ull);
  g_assert_cmpuint(model_active_param_count(&m), ==, 22190763520ull);
}

/* Matrix by matrix for DeepSeek-V3's MLA block (modeling_deepseek.py). */
static void test_mla_params(void) {
  ModelShape m = get("deepseek-v3");
  guint64 h = 7168, a = 128;
  guint64 mla = h * 1536 + 1536 + 1536 * a * 192 + h * (512 + 64) + 512 + 512 * a * (128 + 128) + a * 128 * h;
  g_assert_cmpuint(model_attention_params(&m), ==, mla);
  g_assert_cmpuint(model_expert_params(&m), ==, 3 * h * 2048);
  g_assert_cmpuint(model_moe_mlp_params(&m), ==, 257 * 3 * h * 2048 + 256 * h + 256);
}

/* Forward FLOPs of an MoE layer: attention, router 2bsHE, k routed experts
 * and the shared ones, 2 x 3 h f each (SwiGLU). */
static void test_moe_flops(void) {
  ModelShape m = get("mixtral-8x7b");
  double bs = 4096, h = 4096, attn = model_layer_forward_flops(&m, 1) - 2 * bs * h * 14336 * 3;
  g_assert_true(model_layer_is_moe(&m, 0));
  g_assert_cmpfloat(model_layer_forward_flops_at(&m, 0, 1), ==, attn + 2 * bs * h * 8 + 2 * bs * h * 3 * 2 * 14336.0);
  ModelShape d = get("deepseek-v3");
  g_assert_false(model_layer_is_moe(&d, 2));
  g_assert_true(model_layer_is_moe(&d, 3));
  double dattn = model_layer_forward_flops(&d, 1) - 2 * bs * 7168 * 18432 * 3;
  g_assert_cmpfloat(fabs(model_layer_forward_flops_at(&d, 3, 1) -
                         (dattn + 2 * bs * 7168 * 256 + 2 * bs * 7168 * 3 * (8 * 2048.0 + 2048))),
                    <=, 1e-6 * dattn);
}

/* The dispatch's bytes: each rank routes T = b s / (t cp) tokens, k copies
 * of h 2-byte values, (ep - 1)/ep of them to other ranks; tokens per local
 * expert T ep etp k / E, scaled by the imbalance up to the capacity. */
static void test_dispatch_bytes(void) {
  ModelShape m = get("mixtral-8x7b");
  ModelMoeOptions o = {.t = 2, .cp = 1, .ep = 4, .etp = 1, .b = 2, .imbalance = 1};
  double T = 2.0 * 4096 / 2;
  g_assert_cmpfloat(model_moe_a2a_wire_bytes(&m, &o), ==, T * 2 * 4096 * 2 * 3 / 4);
  g_assert_cmpfloat(model_moe_expert_tokens(&m, &o), ==, T * 4 * 2 / 8);
  o.imbalance = 1.5;
  g_assert_cmpfloat(model_moe_expert_tokens(&m, &o), ==, T * 4 * 2 / 8 * 1.5);
  o.capacity = 1.25; /* tokens beyond the capacity are dropped */
  g_assert_cmpfloat(model_moe_expert_tokens(&m, &o), ==, T * 4 * 2 / 8 * 1.25);
  ModelMoeCost c;
  ModelProfile p = {0};
  p.kind = MODEL_PROFILE_IDEAL;
  o.capacity = 0;
  o.imbalance = 1;
  model_moe_cost(&p, &m, &o, &c);
  g_assert_cmpfloat(c.dispatch_bytes, ==, T * 2 * 4096 * 2);
  g_assert_cmpuint(c.local_experts, ==, 2);
  g_assert_cmpfloat(c.etp_bytes, ==, 0);
  o.dispatcher = MODEL_MOE_ALLGATHER; /* every rank's T tokens gathered over the group */
  model_moe_cost(&p, &m, &o, &c);
  g_assert_cmpfloat(c.dispatch_bytes, ==, T * 4096 * 2 * 4);
}

/* An analytic network of 8-GPU nodes, a NIC of 50 GB/s per GPU, latencies
 * 10 us inside a node and 20 us across. */
static ModelNet two_tier_net(double nvlink_busbw) {
  ModelNet net = {0};
  net.hw.nvlink_busbw = nvlink_busbw;
  net.hw.nic_bw = 50e9;
  net.hw.nics_per_node = 8;
  net.hw.gpus_per_node = 8;
  net.hw.p2p_latency_intra = 1e-5;
  net.hw.p2p_latency_inter = 2e-5;
  return net;
}

/* The all-to-all on the analytic network: inside a node (n-1)/n of the
 * buffer over NVLink; across nodes the (n - m)/n bound elsewhere over a
 * GPU's share of the NICs, when that is the slower. */
static void test_alltoall_analytic(void) {
  ModelNet net = two_tier_net(400e9);
  double S = 1 << 30;
  g_assert_cmpfloat(fabs(model_alltoall_time_s(&net, S, 8, 1) - (1e-5 + 7.0 / 8 * S / 400e9)), <, 1e-12);
  g_assert_cmpfloat(fabs(model_alltoall_time_s(&net, S, 16, 2) - (2e-5 + 8.0 / 16 * S / 50e9)), <, 1e-12);
  g_assert_cmpfloat(fabs(model_alltoall_time_s(&net, S, 64, 8) - (2e-5 + 56.0 / 64 * S / 50e9)), <, 1e-12);
  g_assert_cmpfloat(model_busbw_factor(MODEL_COLL_ALLTOALL, 8), ==, 7.0 / 8);
}

/* Megatron-Core's folding (parallel_state.py, order tp-cp-ep-dp-pp): in a
 * stage the MoE layers read rank r as e + etp (j + ep q). */
static void test_folding(void) {
  SimPlan pl = {0};
  pl.tp = 2;
  pl.cp = 1;
  pl.dp = 4;
  pl.pp = 2;
  pl.ep = 4;
  pl.etp = 1;
  pl.edp = 2;
  guint r[8];
  sim_moe_ep_ranks(&pl, 0, 0, r); /* ep groups of consecutive ranks, across tensor groups */
  g_assert_cmpuint(r[0], ==, 0);
  g_assert_cmpuint(r[3], ==, 3);
  sim_moe_ep_ranks(&pl, 0, 5, r);
  g_assert_cmpuint(r[0], ==, 4);
  g_assert_cmpuint(r[3], ==, 7);
  sim_moe_ep_ranks(&pl, 1, 0, r); /* stage 1 starts at 8 */
  g_assert_cmpuint(r[0], ==, 8);
  g_assert_cmpuint(r[3], ==, 11);
  sim_moe_edp_ranks(&pl, 0, 1, r);
  g_assert_cmpuint(r[0], ==, 1);
  g_assert_cmpuint(r[1], ==, 5);
  pl.etp = 2; /* expert-tp 2 x ep 2 x expert-dp 2 */
  pl.ep = 2;
  pl.edp = 2;
  sim_moe_ep_ranks(&pl, 0, 3, r);
  g_assert_cmpuint(r[0], ==, 1);
  g_assert_cmpuint(r[1], ==, 3);
  sim_moe_etp_ranks(&pl, 0, 3, r);
  g_assert_cmpuint(r[0], ==, 2);
  g_assert_cmpuint(r[1], ==, 3);
  sim_moe_edp_ranks(&pl, 0, 3, r);
  g_assert_cmpuint(r[0], ==, 3);
  g_assert_cmpuint(r[1], ==, 7);
  pl.tp = 8; /* t 8 d 8 on 64 GPUs, ep 8: an ep group is a tensor group, one NVLink domain */
  pl.dp = 8;
  pl.pp = 1;
  pl.etp = 1;
  pl.ep = 8;
  pl.edp = 8;
  sim_moe_ep_ranks(&pl, 0, 17, r);
  for (guint j = 0; j < 8; j++)
    g_assert_cmpuint(r[j], ==, 16 + j);
}

/* Memory: the local experts E/ep split over etp; an MoE layer's kept
 * activations per moe.h. */
static void test_memory(void) {
  ModelShape m = get("qwen3-30b-a3b");
  g_assert_cmpuint(model_moe_local_expert_params(&m, 8, 1), ==, 16ull * 3 * 2048 * 768);
  g_assert_cmpuint(model_moe_local_expert_params(&m, 8, 2), ==, 16ull * 3 * 2048 * 384);
  g_assert_cmpuint(model_moe_local_params(&m, 2, 8, 1), ==, 16ull * 3 * 2048 * 768 + 2048ull * 128);
  ModelMoeOptions o = {.t = 1, .cp = 1, .ep = 8, .etp = 1, .b = 1, .imbalance = 1};
  double T = 4096, rows = T * 8; /* every token's k rows land on some rank: T k per rank on average */
  /* the router's fp32 logits and scores, the permute's int32 map [T, 2E + 1],
   * the two chunk sorts' maps (16 local experts), and per row the experts'
   * input, fc1's SwiGLU output, the fp32 probability and fc2's input */
  g_assert_cmpfloat(model_moe_activation_bytes(&m, &o, 0), ==,
                    8 * T * 128 + 4 * T * 257 + 8 * rows + rows * (2.0 * 2048 + 4.0 * 768 + 4 + 2.0 * 768));
  g_assert_cmpfloat(model_dense_mlp_activation_bytes(&m, 2, 1, FALSE), ==, 6.0 * 6144 * 4096 / 2);
  /* latent attention: queries and keys of 192 channels, values and context
   * of 128 per head, split over t; the latents (1536, 512 + 64) whole, before
   * and after their norms; the dense MLP and the replicated 10 s b h */
  ModelShape d = get("deepseek-v3");
  double s = 4096, h = 7168, per_token = 10 * h + 4.0 * (1536 + 512 + 64) +
                                         (2.0 * 128 * (2 * 192 + 2 * 128) + 6.0 * 18432) / 2 + 5.0 * 128 * s / 2;
  g_assert_cmpfloat(fabs(model_layer_activation_bytes(&d, 2, 1, FALSE) - s * per_token), <=, 1e-9 * s * per_token);
}

/* FP8 experts (Transformer Engine's GroupedLinear): each local expert's
 * GEMMs at the FP8 rate (fp32 promotion for the gradients) after the cast
 * of the operand that changes, 4 bytes per element of it; the weight
 * gradients reuse the casts; the router stays 16-bit.  Composed by hand from
 * the measured H100's GEMM and memory-bound rates, Mixtral 8x7B (no shared
 * experts) at t 2, ep 4.  Memory: the experts' inputs and the SwiGLU
 * outputs kept as 1-byte copies. */
static void test_fp8_experts(void) {
  GError *error = NULL;
  ModelProfile *p = model_profile_load("h100-sxm5-80gb-measured", &error);
  g_assert_no_error(error);
  ModelShape m = get("mixtral-8x7b");
  ModelMoeOptions o = {.t = 2, .cp = 1, .ep = 4, .etp = 1, .b = 1, .imbalance = 1};
  ModelMoeCost c16, c8;
  model_moe_cost(p, &m, &o, &c16);
  o.fp8 = TRUE;
  model_moe_cost(p, &m, &o, &c8);
  double n = model_moe_expert_tokens(&m, &o), h = 4096, f = 14336;
  ModelGemm up = {1, (guint64)n, (guint64)(2 * f), (guint64)h}, down = {1, (guint64)n, (guint64)h, (guint64)f};
  double fwd = model_mem_time_s(p, MODEL_MEM_POINTWISE, 4 * n * h) + model_gemm_fp8_time_s(p, &up, FALSE) +
               model_mem_time_s(p, MODEL_MEM_ACTIVATION, 6 * n * f) +
               model_mem_time_s(p, MODEL_MEM_POINTWISE, 4 * n * f) + model_gemm_fp8_time_s(p, &down, FALSE);
  g_assert_cmpfloat(fabs(c8.fwd_experts_s - 2 * fwd), <=, 1e-12 * fwd);
  ModelGemm dd = {1, (guint64)n, (guint64)f, (guint64)h}, dw = {1, (guint64)f, (guint64)h, (guint64)n},
            ud = {1, (guint64)n, (guint64)h, (guint64)(2 * f)}, uw = {1, (guint64)h, (guint64)(2 * f), (guint64)n};
  double bwd = model_mem_time_s(p, MODEL_MEM_POINTWISE, 4 * n * h) + model_gemm_fp8_time_s(p, &dd, TRUE) +
               model_gemm_fp8_time_s(p, &dw, TRUE) + model_mem_time_s(p, MODEL_MEM_ACTIVATION, 10 * n * f) +
               model_mem_time_s(p, MODEL_MEM_POINTWISE, 4 * n * 2 * f) + model_gemm_fp8_time_s(p, &ud, TRUE) +
               model_gemm_fp8_time_s(p, &uw, TRUE);
  g_assert_cmpfloat(fabs(c8.bwd_experts_s - 2 * bwd), <=, 1e-12 * bwd);
  g_assert_cmpfloat(c8.fwd_experts_s, <, c16.fwd_experts_s);
  g_assert_cmpfloat(c8.fwd_route_s, ==, c16.fwd_route_s); /* the router's GEMM and the permute: 16-bit */
  g_assert_cmpfloat(c8.bwd_route_s, ==, c16.bwd_route_s);
  g_assert_cmpfloat(c8.fwd_flops, ==, c16.fwd_flops);
  /* the experts' inputs and fc2's as 1-byte copies; the router keeps the
   * norm's 16-bit output where the dense formula counted its FP8 copy */
  double rows = n * 2, T = 4096 / 2;
  g_assert_cmpfloat(model_moe_activation_bytes(&m, &(ModelMoeOptions){.t = 2, .cp = 1, .ep = 4, .etp = 1, .b = 1,
                                                                       .imbalance = 1},
                                               0) -
                        model_moe_activation_bytes(&m, &o, 0),
                    ==, rows * (h + f) - T * h);
  g_assert_cmpfloat(model_dense_mlp_activation_bytes(&m, 2, 1, TRUE), ==, 5.0 * f * 4096 / 2);
  model_profile_free(p);
}

/* Megatron-Core's recompute_modules on DeepSeek-V3 (t 1, ep 8, one
 * sequence of 4096): the MoE block's saved tensors each module drops, and
 * the attention block's (model_layer_held_bytes under modules). */
static void test_recompute_modules(void) {
  ModelShape d = get("deepseek-v3");
  ModelMoeOptions o = {.t = 1, .cp = 1, .ep = 8, .etp = 1, .b = 1, .imbalance = 1};
  double T = 4096, h = 7168, E = 256, rows = T * 8, fe = 2048, fs = 2048;
  ModelMoeSaved k;
  model_moe_saved_tensors(&d, &o, 0, &k);
  g_assert_cmpfloat(k.router, ==, 8 * T * E);
  g_assert_cmpfloat(k.permute_map, ==, 4 * T * (2 * E + 1));
  g_assert_cmpfloat(k.sort_maps, ==, 2 * 4 * rows); /* 32 local experts */
  g_assert_cmpfloat(k.fc1_input, ==, rows * 2 * h);
  g_assert_cmpfloat(k.fc1_output, ==, rows * 4 * fe);
  g_assert_cmpfloat(k.probs, ==, rows * 4);
  g_assert_cmpfloat(k.fc2_input, ==, rows * 2 * fe);
  g_assert_cmpfloat(k.shared, ==, T * 6 * fs);
  g_assert_cmpfloat(k.norm_output, ==, 0);
  double all = k.router + k.permute_map + k.sort_maps + k.fc1_input + k.fc1_output + k.probs + k.fc2_input + k.shared;
  g_assert_cmpfloat(model_moe_activation_bytes(&d, &o, 0), ==, all);
  g_assert_cmpfloat(model_moe_activation_bytes(&d, &o, MODEL_RC_MOE_ACT), ==, all - rows * 2 * fe);
  g_assert_cmpfloat(model_moe_activation_bytes(&d, &o, MODEL_RC_SHARED_EXPERTS), ==, all - T * 6 * fs);
  g_assert_cmpfloat(model_moe_activation_bytes(&d, &o, MODEL_RC_MOE), ==, 0);
  g_assert_cmpfloat(model_moe_activation_bytes(&d, &o, MODEL_RC_CORE_ATTN | MODEL_RC_MLA_UP_PROJ), ==, all);
  /* FP8: 1-byte copies of the experts' inputs; the norm's 16-bit output
   * kept by the router (1 byte over the dense formula's FP8 copy) and the
   * shared experts' own FP8 copy of it; the moe checkpoint's 16-bit input */
  o.fp8 = TRUE;
  model_moe_saved_tensors(&d, &o, 0, &k);
  g_assert_cmpfloat(k.fc1_input, ==, rows * h);
  g_assert_cmpfloat(k.fc2_input, ==, rows * fe);
  g_assert_cmpfloat(k.shared, ==, T * 5 * fs);
  g_assert_cmpfloat(k.norm_output, ==, 2 * T * h);
  g_assert_cmpfloat(model_moe_activation_bytes(&d, &o, MODEL_RC_MOE), ==, T * h);
  g_assert_cmpfloat(model_moe_activation_bytes(&d, &o, MODEL_RC_MOE | MODEL_RC_LAYERNORM), ==, 0);
  model_moe_saved_tensors(&d, &o, MODEL_RC_MOE_ACT | MODEL_RC_SHARED_EXPERTS, &k);
  g_assert_cmpfloat(k.fc2_input, ==, 0);
  g_assert_cmpfloat(k.shared, ==, 0);
  g_assert_cmpfloat(k.norm_output, ==, T * h);
  /* the attention block: mla_up_proj drops the query and key (192 channels
   * a head) and the value (128), core_attn FlashAttention's fp32 log-sum-exp
   * per head, layernorm both norms' outputs, mlp the dense MLP's */
  ModelMemoryRequest r = {.t = 1, .b = 1, .flash = TRUE};
  double none = model_layer_held_bytes(&d, &r);
  r.ac = MODEL_RECOMPUTE_MODULES;
  g_assert_cmpfloat(model_layer_held_bytes(&d, &r), ==, none);
  r.modules = MODEL_RC_MLA_UP_PROJ;
  g_assert_cmpfloat(model_layer_held_bytes(&d, &r), ==, none - 2.0 * 128 * (2 * 192 + 128) * T);
  /* held again while one layer's backward recomputes them */
  g_assert_cmpfloat(model_layer_modules_working_bytes(&d, &r), ==, 2.0 * 128 * (2 * 192 + 128) * T);
  r.modules = MODEL_RC_CORE_ATTN;
  g_assert_cmpfloat(model_layer_held_bytes(&d, &r), ==, none - 4.0 * 128 * T);
  r.modules = MODEL_RC_LAYERNORM;
  g_assert_cmpfloat(model_layer_held_bytes(&d, &r), ==, none - 2 * 2 * T * h);
  r.modules = MODEL_RC_MLP;
  g_assert_cmpfloat(model_layer_held_bytes(&d, &r), ==, none - 6.0 * 18432 * T);
  /* the recomputation's FLOPs per iteration (2 sequences): the up
   * projections on all 61 layers, the MLP on the 3 dense ones, the MoE
   * block (router, 8 routed and the shared expert) or the shared expert
   * alone on the 58 MoE ones */
  double bs = 2 * T, up = 2 * bs * 128 * (1536.0 * 192 + 512.0 * 256);
  g_assert_cmpfloat(model_policy_recompute_flops(&d, 2, MODEL_RECOMPUTE_MODULES, MODEL_RC_MLA_UP_PROJ, 0), ==, 61 * up);
  g_assert_cmpfloat(model_policy_recompute_flops(&d, 2, MODEL_RECOMPUTE_MODULES, MODEL_RC_MLP, 0), ==,
                    3 * 2 * bs * h * 18432 * 3);
  g_assert_cmpfloat(model_policy_recompute_flops(&d, 2, MODEL_RECOMPUTE_MODULES, MODEL_RC_MOE, 0), ==,
                    58 * 2 * bs * h * (E + 3 * (8 * fe + fs)));
  g_assert_cmpfloat(model_policy_recompute_flops(&d, 2, MODEL_RECOMPUTE_MODULES, MODEL_RC_SHARED_EXPERTS, 0), ==,
                    58 * 2 * bs * h * 3 * fs);
  g_assert_cmpfloat(model_policy_recompute_flops(&d, 2, MODEL_RECOMPUTE_MODULES, MODEL_RC_MOE_ACT, 0), ==, 0);
}

/* Group-limited routing's reach: the expected distinct units (nodes, GPUs)
 * a token's k experts lie on, by hand for small cases -- units inside
 * groups, groups inside units, units straddling groups, no groups. */
static void test_router_reach(void) {
  ModelShape m = {.experts = 8, .topk = 2};
  ModelMoeOptions o = {.groups = 4, .group_topk = 2};
  const double eps = 1e-12;
  /* 4 units = the 4 groups of 2: a group chosen with C(3,1)/C(4,2) = 1/2,
   * then missed by both picks out of the pool of 4 with C(2,2)/C(4,2) */
  g_assert_cmpfloat(fabs(model_moe_reach(&m, &o, 4) - 4 * 0.5 * (1 - 1.0 / 6)), <=, eps);
  /* 8 units of one expert: always k distinct */
  g_assert_cmpfloat(fabs(model_moe_reach(&m, &o, 8) - 2), <=, eps);
  /* 2 units of 2 groups: none of its groups chosen 1/6 (miss), one 4/6
   * (miss 1/6), both 1/6 (a hit) */
  g_assert_cmpfloat(fabs(model_moe_reach(&m, &o, 2) - 2 * (1 - (1.0 / 6 + 4.0 / 6 / 6))), <=, eps);
  /* no groups: C(6,2)/C(8,2) = 15/28 misses a unit of 2 */
  o.groups = o.group_topk = 0;
  g_assert_cmpfloat(fabs(model_moe_reach(&m, &o, 4) - 4 * (13.0 / 28)), <=, eps);
  /* units straddling groups: 12 experts, 3 groups of 4, one chosen; each
   * unit of 6 holds 4 of one group and 2 of the middle one */
  m.experts = 12;
  o.groups = 3;
  o.group_topk = 1;
  g_assert_cmpfloat(fabs(model_moe_reach(&m, &o, 2) - 2 * (1 - (0 + 1.0 / 6 + 1) / 3)), <=, eps);
}

/* DeepEP's bytes per rank: Mixtral's 8 experts on ep 4 over 2 nodes, in 2
 * groups of one node each, one group per token (node-limited to 1): every
 * token crosses InfiniBand to the other node half the time, and reaches
 * 4 x 1/2 x (1 - 1/6) = 5/3 GPUs, of which the forwarder is one of 2 in its
 * node; FP8 dispatch (h bytes and an fp32 scale per 128 channels), bf16
 * combine.  With the alltoall dispatcher grouping moves nothing: each rank
 * still sends T k rows, as many to every peer in expectation. */
static void test_deepep_bytes(void) {
  ModelShape m = get("mixtral-8x7b");
  ModelMoeOptions o = {.t = 1, .cp = 1, .ep = 4, .etp = 1, .b = 1, .imbalance = 1, .groups = 2, .group_topk = 1,
                       .ep_nodes = 2, .dispatcher = MODEL_MOE_DEEPEP, .fp8 = TRUE};
  double T = 4096, h = 4096, fp8 = h + 4 * 32, reach = 4 * 0.5 * (1 - 1.0 / 6), ib, nvl;
  g_assert_cmpfloat(fabs(model_moe_reach(&m, &o, 2) - 1), <=, 1e-12);
  model_moe_deepep_bytes(&m, &o, FALSE, &ib, &nvl);
  g_assert_cmpfloat(fabs(ib - T * fp8 * 1 * 0.5), <=, 1e-9 * ib);
  g_assert_cmpfloat(fabs(nvl - T * fp8 * reach * 0.5), <=, 1e-9 * nvl);
  model_moe_deepep_bytes(&m, &o, TRUE, &ib, &nvl);
  g_assert_cmpfloat(fabs(ib - T * 2 * h * 0.5), <=, 1e-9 * ib);
  g_assert_cmpfloat(fabs(nvl - T * 2 * h * reach * 0.5), <=, 1e-9 * nvl);
  ModelMoeCost c;
  ModelProfile p = {0};
  p.kind = MODEL_PROFILE_IDEAL;
  model_moe_cost(&p, &m, &o, &c);
  g_assert_cmpfloat(c.ib_bytes_c, ==, ib);
  g_assert_cmpfloat(c.nvl_bytes_c, ==, nvl);
  g_assert_cmpfloat(c.dispatch_bytes, ==, c.ib_bytes_d + c.nvl_bytes_d);
  /* one node: no InfiniBand, NVLink to the 5/3 GPUs less the sender's own */
  o.ep_nodes = 1;
  o.fp8 = FALSE;
  model_moe_deepep_bytes(&m, &o, FALSE, &ib, &nvl);
  g_assert_cmpfloat(ib, ==, 0);
  g_assert_cmpfloat(fabs(nvl - T * 2 * h * reach * 3 / 4), <=, 1e-9 * nvl);
  /* DeepSeek-V3 at ep 64 over 8 nodes, 8 groups (one a node), 4 per token:
   * a node reached with 1/2 x (1 - C(96,8)/C(128,8)), a GPU (4 experts)
   * with 1/2 x (1 - C(124,8)/C(128,8)) */
  m = get("deepseek-v3");
  o = (ModelMoeOptions){.t = 1, .cp = 1, .ep = 64, .etp = 1, .b = 1, .imbalance = 1, .groups = 8, .group_topk = 4,
                        .ep_nodes = 8, .dispatcher = MODEL_MOE_DEEPEP, .fp8 = TRUE};
  double miss_node = 1, miss_gpu = 1;
  for (int i = 0; i < 8; i++) {
    miss_node *= (96.0 - i) / (128 - i);
    miss_gpu *= (124.0 - i) / (128 - i);
  }
  double nodes = 8 * 0.5 * (1 - miss_node), gpus = 64 * 0.5 * (1 - miss_gpu), tok = 7168 + 4 * 56;
  model_moe_deepep_bytes(&m, &o, FALSE, &ib, &nvl);
  g_assert_cmpfloat(fabs(ib - 4096 * tok * nodes * 7 / 8), <=, 1e-9 * ib);
  g_assert_cmpfloat(fabs(nvl - 4096 * tok * gpus * 7 / 8), <=, 1e-9 * nvl);
  g_assert_cmpfloat(model_moe_reach(&m, &o, 8), <, 4); /* node-limited: at most M = 4 of the 8 nodes */
  /* the alltoall dispatcher: the same T k h 2 bytes with or without groups */
  ModelMoeCost a, g;
  o.dispatcher = MODEL_MOE_ALLTOALL;
  model_moe_cost(&p, &m, &o, &g);
  o.groups = o.group_topk = 0;
  model_moe_cost(&p, &m, &o, &a);
  g_assert_cmpfloat(g.dispatch_bytes, ==, a.dispatch_bytes);
  g_assert_cmpfloat(a.dispatch_bytes, ==, 4096.0 * 8 * 7168 * 2);
}

/* DeepEP on the analytic network: the InfiniBand and NVLink phases
 * pipelined, the slower of the two plus a latency. */
static void test_deepep_analytic(void) {
  ModelNet net = two_tier_net(160e9);
  g_assert_cmpfloat(model_deepep_time_s(&net, 100e6, 200e6, 8), ==, 2e-5 + 100e6 / 50e9);
  g_assert_cmpfloat(model_deepep_time_s(&net, 10e6, 320e6, 8), ==, 2e-5 + 320e6 / 160e9);
  g_assert_cmpfloat(model_deepep_time_s(&net, 0, 320e6, 1), ==, 1e-5 + 320e6 / 160e9);
  net.free_comm = TRUE;
  g_assert_cmpfloat(model_deepep_time_s(&net, 100e6, 200e6, 8), ==, 0);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/moe/checkpoint-counts", test_checkpoint_counts);
  g_test_add_func("/moe/mla-params", test_mla_params);
  g_test_add_func("/moe/flops", test_moe_flops);
  g_test_add_func("/moe/dispatch-bytes", test_dispatch_bytes);
  g_test_add_func("/moe/alltoall-analytic", test_alltoall_analytic);
  g_test_add_func("/moe/folding", test_folding);
  g_test_add_func("/moe/memory", test_memory);
  g_test_add_func("/moe/fp8-experts", test_fp8_experts);
  g_test_add_func("/moe/recompute-modules", test_recompute_modules);
  g_test_add_func("/moe/router-reach", test_router_reach);
  g_test_add_func("/moe/deepep-bytes", test_deepep_bytes);
  g_test_add_func("/moe/deepep-analytic", test_deepep_analytic);
  return g_test_run();
}
