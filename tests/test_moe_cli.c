/* End-to-end tests of mixtures of experts through the real binary: the
 * all-to-all's nccl-tests table, an MoE run's token communication counted
 * exactly, the folding's refusals as one line each. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <glib/gstdio.h>

#include "cli_harness.h"

#define MIXTRAL "run --model mixtral-8x7b --cluster dgx-h100-superpod --gpus 64 --pp 4 --global-batch 64"
#define QWEN_EP16                                                                                                      \
  "run --model qwen3-30b-a3b --cluster dgx-h100-superpod --gpus 32 --pp 2 --ep 16 --global-batch 64 --recompute full " \
  "--distributed-optimizer --format json"
#define NODE_LIMITED " --moe-token-dispatcher deepep --moe-router-num-groups 2 --moe-router-group-topk 1"

static double busbw_at(const char *gpus, double bytes) {
  char *line = g_strdup_printf("collective --op alltoall --cluster dgx-h100-superpod --gpus %s --min-bytes %.0f "
                               "--max-bytes %.0f --format json",
                               gpus, bytes, bytes);
  cJSON *j = run_json(line);
  const cJSON *row = cJSON_GetArrayItem(arr(j, "rows"), 0);
  double bus = num(row, "busbw_GBps"), alg = num(row, "algbw_GBps");
  /* nccl-tests' alltoall: busbw = algbw (n-1)/n */
  double n = g_ascii_strtod(gpus, NULL);
  g_assert_cmpfloat(fabs(bus - alg * (n - 1) / n), <=, 1e-9 * bus);
  g_assert_cmpstr(str(j, "op"), ==, "alltoall");
  cJSON_Delete(j);
  g_free(line);
  return bus;
}

/* Why: an expert-parallel group that leaves the NVLink domain sends most of
 * its bytes over one NIC per GPU, so its bus bandwidth falls from NVLink's
 * to about a NIC's. */
static void test_alltoall_table(void) {
  double in = busbw_at("8", 268435456), two = busbw_at("16", 268435456), eight = busbw_at("64", 268435456);
  g_test_message("alltoall busbw: 8 GPUs %.1f, 16 GPUs %.1f, 64 GPUs %.1f GB/s", in, two, eight);
  g_assert_cmpfloat(in, >, 2 * two);
  g_assert_cmpfloat(two, >, eight);
  /* across nodes a GPU's rail carries (n - 8)/n of its buffer: busbw at most
   * (n-1)/(n-8) x 50 GB/s (a ConnectX-7 NDR port) */
  g_assert_cmpfloat(two, <=, 15.0 / 8 * 50);
  g_assert_cmpfloat(eight, <=, 63.0 / 56 * 50);
  Proc p = run_line("collective --op alltoall --cluster dgx-h100-superpod --gpus 16 --min-bytes 1M --max-bytes 4M");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "alltoall on 16 GPUs"));
  g_assert_nonnull(strstr(p.out, " none "));
  proc_clear(&p);
}

/* Why: the dispatch and combine move T k h 2 (ep-1)/ep bytes off every rank
 * per MoE layer and microbatch in each pass that runs the layer (forward,
 * backward, and the recomputation forward under full recomputation). */
static void test_run_bytes(void) {
  cJSON *r = run_json(MIXTRAL " --ep 8 --recompute full --format json");
  const cJSON *cfg = obj(r, "config"), *moe = obj(r, "moe");
  g_assert_cmpfloat(num(cfg, "ep"), ==, 8);
  g_assert_cmpfloat(num(cfg, "expert_tp"), ==, 1);
  g_assert_cmpfloat(num(cfg, "expert_dp"), ==, 2);
  double T = 4096, wire = T * 2 * 4096 * 2 * 7.0 / 8;
  g_assert_cmpfloat(num(moe, "dispatch_bytes_per_rank"), ==, wire);
  double m = num(cfg, "microbatches"), ranks = 16; /* t d of a stage */
  double want = 32 * m * 3 * 2 * wire * ranks;
  double got = num(obj(r, "bytes_per_iteration"), "ep");
  g_assert_cmpfloat(fabs(got - want), <=, 1e-9 * want);
  g_assert_cmpfloat(num(moe, "tokens_per_expert"), ==, T * 8 * 2 / 8);
  g_assert_cmpfloat(num(moe, "comm_s"), >, 0);
  g_assert_cmpfloat(num(moe, "comm_s"), <, num(r, "iteration_time_s"));
  g_assert_cmpfloat(num(r, "mfu"), >, 0.05);
  g_assert_cmpfloat(num(r, "mfu"), <, 0.8);
  cJSON_Delete(r);
  /* no expert parallelism: no token communication */
  r = run_json(MIXTRAL " --recompute full --allow-oom --format json");
  g_assert_cmpfloat(num(obj(r, "bytes_per_iteration"), "ep"), ==, 0);
  g_assert_cmpfloat(num(obj(r, "moe"), "comm_s"), ==, 0);
  cJSON_Delete(r);
  Proc p = run_line(MIXTRAL " --ep 8");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "\nexperts    8 routed experts of width 14336, top 2"));
  g_assert_nonnull(strstr(p.out, "\nmoe comm   "));
  proc_clear(&p);
}

/* Why: the same expert-parallel group costs more once it leaves the NVLink
 * domain (ep 16 of Qwen3-30B-A3B spans two DGX nodes), and an imbalanced
 * routing makes the busiest rank's experts slower. */
static void test_ep_domain_and_imbalance(void) {
  const char *base = "run --model qwen3-30b-a3b --cluster dgx-h100-superpod --gpus 32 --pp 2 --global-batch 64 "
                     "--recompute full --distributed-optimizer --format json";
  char *a = g_strdup_printf("%s --ep 8", base), *b = g_strdup_printf("%s --ep 16", base);
  cJSON *in = run_json(a), *out = run_json(b);
  double per_in = num(obj(in, "moe"), "comm_s") / num(obj(in, "moe"), "dispatch_bytes_per_rank");
  double per_out = num(obj(out, "moe"), "comm_s") / num(obj(out, "moe"), "dispatch_bytes_per_rank");
  g_assert_cmpfloat(per_out, >, 2 * per_in);
  char *c = g_strdup_printf("%s --ep 8 --moe-imbalance 1.5", base);
  cJSON *skew = run_json(c);
  g_assert_cmpfloat(num(skew, "iteration_time_s"), >, num(in, "iteration_time_s"));
  g_assert_cmpfloat(num(obj(skew, "moe"), "tokens_per_expert"), ==, 1.5 * num(obj(in, "moe"), "tokens_per_expert"));
  cJSON_Delete(in);
  cJSON_Delete(out);
  cJSON_Delete(skew);
  g_free(a);
  g_free(b);
  g_free(c);
}

/* Why: the shortcuts (one GPU per stage, coarse items, the steady state)
 * are exact for MoE layers too, DeepEP's exchanges with node-limited
 * routing included: --exact gives the same iteration and the same token
 * bytes, on both networks. */
static void test_exact(void) {
  const char *nets[] = {"analytic", "flow"}, *dispatch[] = {"", NODE_LIMITED};
  for (guint i = 0; i < 4; i++) {
    char *a = g_strdup_printf(QWEN_EP16 "%s --network %s", dispatch[i / 2], nets[i % 2]);
    char *b = g_strconcat(a, " --exact", NULL);
    cJSON *x = run_json(a), *y = run_json(b);
    g_assert_cmpfloat(num(x, "iteration_time_s"), ==, num(y, "iteration_time_s"));
    g_assert_cmpfloat(num(obj(x, "bytes_per_iteration"), "ep"), ==, num(obj(y, "bytes_per_iteration"), "ep"));
    cJSON_Delete(x);
    cJSON_Delete(y);
    g_free(a);
    g_free(b);
  }
}

/* Why: under the ideal profile (time in proportion to the FLOPs, free
 * communication) an MoE pipeline's bubble is the schedule's own, (p-1)/m. */
static void test_ideal_bubble(void) {
  cJSON *r = run_json("run --model mixtral-8x7b --gpus 64 --pp 4 --ep 8 --global-batch 64 --profile ideal "
                      "--network analytic --format json");
  g_assert_cmpfloat(fabs(num(r, "bubble_fraction") - num(r, "analytic_bubble_fraction")), <, 1e-6);
  g_assert_cmpfloat(num(r, "analytic_bubble_fraction"), ==, 3.0 / 4);
  cJSON_Delete(r);
}

/* Why: plan searches the expert folding; its best row's command runs and
 * gives the row's time. */
static void test_plan(void) {
  cJSON *j = run_json("plan --model qwen3-30b-a3b --cluster dgx-h100-superpod --gpus 16 --global-batch 32 --top 3 "
                      "--format json");
  const cJSON *row = cJSON_GetArrayItem(arr(j, "rows"), 0);
  g_assert_nonnull(row);
  double ep = num(row, "ep");
  g_assert_cmpfloat(ep, >=, 1);
  g_assert_cmpfloat(fmod(128, ep), ==, 0);
  g_assert_cmpfloat(num(row, "expert_tp"), >=, 1);
  const char *cmd = str(row, "command");
  g_assert_true(g_str_has_prefix(cmd, "ptdsim run "));
  g_assert_nonnull(strstr(cmd, " --ep "));
  char *line = g_strconcat(cmd + strlen("ptdsim "), " --format json", NULL);
  cJSON *r = run_json(line);
  g_assert_cmpfloat(num(r, "iteration_time_s"), ==, num(row, "iteration_time_s"));
  cJSON_Delete(r);
  g_free(line);
  cJSON_Delete(j);
}

/* Why: FP8 experts run (Transformer Engine's GroupedLinear): the run says
 * fp8, its experts' GEMMs are faster than bf16's while the token bytes stay
 * 16-bit, and the GPU holds FP8 copies of its linear weights (more than
 * bf16's weights, less than twice: the embedding, logits and routers have
 * none). */
static void test_fp8(void) {
  const char *base = "run --model mixtral-8x7b --cluster dgx-h100-superpod --profile h100-sxm5-80gb-measured "
                     "--gpus 64 --tp 2 --pp 4 --ep 8 --sequence-parallel --global-batch 64 --distributed-optimizer "
                     "--format json --precision";
  char *a = g_strdup_printf("%s bf16", base), *b = g_strdup_printf("%s fp8", base);
  cJSON *x = run_json(a), *y = run_json(b);
  g_assert_cmpstr(str(obj(y, "config"), "precision"), ==, "fp8");
  g_assert_cmpfloat(num(y, "iteration_time_s"), <, num(x, "iteration_time_s"));
  g_assert_cmpfloat(num(obj(y, "bytes_per_iteration"), "ep"), ==, num(obj(x, "bytes_per_iteration"), "ep"));
  double w16 = num(obj(x, "memory_per_gpu_GiB"), "weights"), w8 = num(obj(y, "memory_per_gpu_GiB"), "weights");
  g_assert_cmpfloat(w8, >, w16);
  g_assert_cmpfloat(w8, <, 2 * w16);
  cJSON_Delete(x);
  cJSON_Delete(y);
  g_free(a);
  g_free(b);
}

/* Why: --overlap-moe-expert-parallel-comm runs the 1F1B steady state's
 * forwards each with the backward after it (Megatron-Core's combined
 * 1F1B): with the all-to-all exposed the iteration is shorter, the
 * shortcuts still give the same answer, the dumped schedule holds the
 * pairs, each of two microbatches; without a pipeline the next forward
 * goes ahead of a backward, so one more microbatch's activations are held. */
static void test_a2a_overlap(void) {
  const char *pipe = "run --model qwen3-30b-a3b --cluster dgx-h100-superpod --gpus 64 --pp 4 --ep 16 --schedule "
                     "interleaved --chunks 4 --global-batch 256 --distributed-optimizer --recompute none --format json";
  char *a = g_strdup_printf("%s --overlap-moe-expert-parallel-comm", pipe), *b = g_strconcat(a, " --exact", NULL);
  cJSON *off = run_json(pipe), *on = run_json(a), *exact = run_json(b);
  g_assert_cmpfloat(num(on, "iteration_time_s"), <, num(off, "iteration_time_s"));
  g_assert_cmpfloat(num(on, "iteration_time_s"), ==, num(exact, "iteration_time_s"));
  g_assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj(on, "config"), "overlap_moe_expert_parallel_comm")));
  g_assert_null(cJSON_GetObjectItemCaseSensitive(obj(off, "config"), "overlap_moe_expert_parallel_comm"));
  char *dir = g_dir_make_tmp("ptdsim-a2a-XXXXXX", NULL), *csv = g_build_filename(dir, "s.csv", NULL);
  char *dump = g_strdup_printf("%s --dump-schedule %s", a, csv);
  run_line_ok(dump);
  char *text = slurp(csv, NULL);
  guint pairs = 0;
  for (const char *at = strstr(text, "("); at; at = strstr(at + 1, "(")) {
    guint vf, mf, vb, mb;
    g_assert_cmpint(sscanf(at, "(%uF%u;%uB%u)OVERLAP_F_B", &vf, &mf, &vb, &mb), ==, 4);
    g_assert_cmpuint(mf, !=, mb);
    pairs++;
  }
  g_assert_cmpuint(pairs, >, 0);
  const char *one = "run --model qwen3-30b-a3b --cluster dgx-h100-superpod --gpus 16 --ep 16 --layers 4 "
                    "--global-batch 64 --recompute none --allow-oom --format json";
  char *c = g_strdup_printf("%s --overlap-moe-expert-parallel-comm", one);
  cJSON *x = run_json(one), *y = run_json(c);
  g_assert_cmpfloat(num(y, "iteration_time_s"), <, num(x, "iteration_time_s"));
  g_assert_cmpfloat(num(obj(y, "memory_per_gpu_GiB"), "activations"), >,
                    num(obj(x, "memory_per_gpu_GiB"), "activations"));
  cJSON_Delete(off);
  cJSON_Delete(on);
  cJSON_Delete(exact);
  cJSON_Delete(x);
  cJSON_Delete(y);
  g_remove(csv);
  g_rmdir(dir);
  g_free(text);
  g_free(dump);
  g_free(csv);
  g_free(dir);
  g_free(a);
  g_free(b);
  g_free(c);
}


/* Why: with node-limited routing (Qwen3-30B-A3B's 128 experts in 2 groups,
 * one per node of an ep-16 group, each token to 1 group) DeepEP sends a
 * token across InfiniBand at most once, to the other node half the time:
 * T h 2 / 2 bytes per rank, where the all-to-all sends (16 - 8)/15 of its
 * T k h 2 bytes off the node; over NVLink it reaches 16 x 1/2 x (1 -
 * C(56,8)/C(64,8)) GPUs, 7/8 of them not the forwarder.  Fewer bytes
 * across the slow links: a shorter iteration.  Every dispatch and combine
 * of every MoE layer and microbatch, three passes under full recomputation,
 * on the 16 ranks of each stage, is counted. */
static void test_deepep_node_limited(void) {
  cJSON *a = run_json(QWEN_EP16), *d = run_json(QWEN_EP16 NODE_LIMITED);
  const cJSON *cfg = obj(d, "config"), *moe = obj(d, "moe");
  g_assert_cmpstr(str(cfg, "moe_token_dispatcher"), ==, "deepep");
  g_assert_cmpfloat(num(cfg, "moe_router_num_groups"), ==, 2);
  g_assert_cmpfloat(num(cfg, "moe_router_group_topk"), ==, 1);
  double T = num(cfg, "seq_len"), h = 2048, miss = 1;
  for (int i = 0; i < 8; i++)
    miss *= (56.0 - i) / (64 - i);
  double ib = T * 2 * h / 2, nvl = T * 2 * h * 16 * 0.5 * (1 - miss) * 7 / 8;
  g_assert_cmpfloat(num(moe, "dispatch_ib_bytes_per_rank"), ==, ib);
  g_assert_cmpfloat(fabs(num(moe, "dispatch_nvlink_bytes_per_rank") - nvl), <=, 1e-9 * nvl);
  double a2a_inter = num(obj(a, "moe"), "dispatch_bytes_per_rank") * 8 / 15;
  g_assert_cmpfloat(a2a_inter, ==, T * 8 * h * 2 * 8 / 16);
  g_assert_cmpfloat(ib, <, a2a_inter);
  g_assert_cmpfloat(num(d, "iteration_time_s"), <, num(a, "iteration_time_s"));
  g_assert_cmpfloat(num(obj(d, "moe"), "comm_s"), <, num(obj(a, "moe"), "comm_s"));
  double want = num(cfg, "moe_layers") * num(cfg, "microbatches") * 3 * 2 * (ib + nvl) * 16;
  double got = num(obj(d, "bytes_per_iteration"), "ep");
  g_assert_cmpfloat(fabs(got - want), <=, 1e-9 * want);
  /* the alltoall dispatcher moves the same bytes with or without groups */
  cJSON *g = run_json(QWEN_EP16 " --moe-router-num-groups 2 --moe-router-group-topk 1");
  g_assert_cmpfloat(num(obj(g, "bytes_per_iteration"), "ep"), ==, num(obj(a, "bytes_per_iteration"), "ep"));
  g_assert_cmpfloat(num(g, "iteration_time_s"), ==, num(a, "iteration_time_s"));
  cJSON_Delete(a);
  cJSON_Delete(d);
  cJSON_Delete(g);
}

/* Why: in FP8 DeepEP dispatches h bytes and an fp32 scale per 128 channels
 * a token (combining in bf16), and DualPipe's F&B run compute beside its
 * kernels, which hold SMs: the run reports a contention effect it has not
 * under 1F1B, where nothing runs beside them. */
static void test_deepep_fp8_and_sms(void) {
  const char *prof = " --profile h100-sxm5-80gb-measured --precision";
  char *a = g_strconcat(QWEN_EP16 NODE_LIMITED, prof, " bf16", NULL), *b = g_strconcat(QWEN_EP16 NODE_LIMITED, prof,
                                                                                        " fp8", NULL);
  cJSON *x = run_json(a), *y = run_json(b);
  g_assert_cmpfloat(num(obj(y, "moe"), "dispatch_ib_bytes_per_rank") / num(obj(x, "moe"), "dispatch_ib_bytes_per_rank"),
                    ==, (2048.0 + 4 * 16) / 4096);
  cJSON_Delete(x);
  cJSON_Delete(y);
  x = run_json(QWEN_EP16 NODE_LIMITED " --schedule dualpipe");
  y = run_json(QWEN_EP16 NODE_LIMITED);
  g_assert_cmpfloat(num(obj(x, "step_effects_s"), "contention"), >, 0);
  g_assert_cmpfloat(num(obj(y, "step_effects_s"), "contention"), ==, 0);
  cJSON_Delete(x);
  cJSON_Delete(y);
  g_free(a);
  g_free(b);
}

/* NVIDIA's published recipes (Megatron-Bridge's perf_recipes: DeepSeek-V3
 * on 256 B200s and 1,024 H100s with their recompute_modules and layouts,
 * Qwen3-235B-A22B on 64 B200s and 256 H100s, Qwen3-30B-A3B on 16 H100s)
 * ran on those machines, so each fits as ptdsim holds the memory. */
static void test_recipes_fit(void) {
  static const char *const recipes[] = {
      "run --model deepseek-v3 --cluster dgx-b200 --gpus 256 --tp 1 --pp 16 --ep 8 --expert-tp 1 --global-batch 4096 "
      "--micro-batch 1 --recompute modules --recompute-modules mla_up_proj --pipeline-model-parallel-layout "
      "Et*4|(t*4|)*14,tmL --distributed-optimizer --network analytic --format json",
      "run --model deepseek-v3 --cluster dgx-h100-superpod --gpus 1024 --tp 2 --pp 8 --chunks 4 --ep 64 --expert-tp 1 "
      "--sequence-parallel --global-batch 16384 --micro-batch 1 --recompute modules "
      "--recompute-modules mla_up_proj,mlp --pipeline-model-parallel-layout Et|(tt|)*30mL --distributed-optimizer "
      "--network analytic --format json",
      "run --model qwen3-235b-a22b --cluster dgx-b200 --gpus 64 --tp 1 --pp 8 --chunks 4 --ep 8 --expert-tp 1 "
      "--global-batch 2048 --micro-batch 1 --recompute none --account-for-embedding --account-for-loss "
      "--distributed-optimizer --network analytic --format json",
      "run --model qwen3-235b-a22b --cluster dgx-h100-superpod --gpus 256 --tp 2 --pp 8 --chunks 4 --ep 32 "
      "--expert-tp 1 --sequence-parallel --global-batch 8192 --micro-batch 1 --recompute none --account-for-embedding "
      "--account-for-loss --distributed-optimizer --network analytic --format json",
      "run --model qwen3-30b-a3b --cluster dgx-h100-superpod --gpus 16 --tp 1 --pp 1 --ep 16 --expert-tp 1 "
      "--global-batch 1024 --micro-batch 1 --recompute none --distributed-optimizer --network analytic --format json",
  };
  for (guint i = 0; i < G_N_ELEMENTS(recipes); i++) {
    cJSON *j = run_json(recipes[i]);
    g_test_message("recipe %u: %.1f GiB", i, num(obj(j, "memory_per_gpu_GiB"), "total"));
    g_assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "fits_in_memory")));
    cJSON_Delete(j);
  }
}

/* --recompute modules on an MoE model with latent attention and shared
 * experts (DeepSeek-V3's shape, 8 layers: 3 dense, 5 MoE): each module
 * keeps less than none and costs time against it; moe keeps the least of
 * the MoE block's and costs the most of them (its dispatch and combine run
 * again). */
static void test_modules_moe(void) {
#define DS8                                                                                                          \
  "run --model deepseek-v3 --layers 8 --cluster dgx-h100-superpod --gpus 8 --ep 8 --global-batch 8 --micro-batch 1 " \
  "--network analytic --allow-oom --format json --recompute modules --recompute-modules "
  static const char *const one[] = {"core_attn", "layernorm", "mla_up_proj", "mlp", "moe_act", "shared_experts", "moe"};
  double act[G_N_ELEMENTS(one)], time[G_N_ELEMENTS(one)];
  cJSON *j = run_json(DS8 "none");
  double none_act = num(obj(j, "memory_per_gpu_GiB"), "activations"), none_t = num(j, "iteration_time_s");
  cJSON_Delete(j);
  for (guint i = 0; i < G_N_ELEMENTS(one); i++) {
    char *line = g_strdup_printf(DS8 "%s", one[i]);
    j = run_json(line);
    act[i] = num(obj(j, "memory_per_gpu_GiB"), "activations");
    time[i] = num(j, "iteration_time_s");
    g_assert_cmpstr(str(obj(j, "config"), "recompute_modules"), ==, one[i]);
    g_test_message("%s: activations %.3f GiB (none %.3f), %.4f s (none %.4f)", one[i], act[i], none_act, time[i],
                   none_t);
    g_assert_cmpfloat(act[i], <, none_act);
    g_assert_cmpfloat(time[i], >, none_t);
    cJSON_Delete(j);
    g_free(line);
  }
  g_assert_cmpfloat(act[6], <, act[4]); /* moe under moe_act and shared_experts */
  g_assert_cmpfloat(act[6], <, act[5]);
  g_assert_cmpfloat(time[6], >, time[4]);
  g_assert_cmpfloat(time[6], >, time[5]);
#undef DS8
}

static void test_errors(void) {
  static const CliBadCase cases[] = {
      {NULL, MIXTRAL " --ep 3", "does not divide the 8 experts"},
      {NULL, MIXTRAL " --ep 8 --expert-tp 4", "expert-tp x ep x expert-dp must equal t x cp x d"},
      {NULL, MIXTRAL " --ep 2 --expert-tp 5", "does not divide the experts' hidden size"},
      {NULL, MIXTRAL " --tp 2", "--sequence-parallel"},
      {NULL, MIXTRAL " --ep 2 --ddp torch", "--ddp local"},
      {NULL, MIXTRAL " --moe-imbalance 0.5", "--moe-imbalance"},
      {NULL, MIXTRAL " --moe-token-dispatcher ring", "moe-token-dispatcher"},
      {NULL, MIXTRAL " --ep 2 --no-symmetry", "symmetry"},
      {NULL, MIXTRAL " --moe-router-topk 9", "--moe-router-topk 9"},
      {NULL, "run --model mixtral-8x7b --gpus 8 --global-batch 8 --zero 1", "ZeRO"},
      {NULL, "run --model mixtral-8x7b --gpus 8 --pp 2 --global-batch 8 --schedule terapipe", "TeraPipe"},
      {NULL, "run --model llama2-7b --gpus 8 --global-batch 8 --ep 2", "dense"},
      {NULL, "run --model llama2-7b --gpus 8 --global-batch 8 --overlap-moe-expert-parallel-comm", "dense"},
      {NULL, MIXTRAL " --overlap-moe-expert-parallel-comm --schedule interleaved --chunks 2", "--ep > 1"},
      {NULL, MIXTRAL " --ep 8 --overlap-moe-expert-parallel-comm --schedule interleaved --chunks 2 --recompute full",
       "full recomputation"},
      {NULL, MIXTRAL " --ep 8 --overlap-moe-expert-parallel-comm --schedule interleaved --chunks 2 "
                     "--moe-token-dispatcher allgather",
       "alltoall"},
      {NULL, MIXTRAL " --ep 8 --overlap-moe-expert-parallel-comm --recompute none", "--schedule interleaved"},
      {NULL, "run --model llama2-7b --gpus 8 --global-batch 8 --moe-router-num-groups 2", "dense"},
      {NULL, MIXTRAL " --moe-router-num-groups 3 --moe-router-group-topk 1", "does not divide the 8 experts"},
      {NULL, MIXTRAL " --moe-router-num-groups 4 --moe-router-group-topk 5", "more than the 4 groups"},
      {NULL, MIXTRAL " --moe-router-num-groups 8 --moe-router-group-topk 1", "fewer than the 2 experts"},
      {NULL, MIXTRAL " --moe-router-group-topk 2", "needs --moe-router-num-groups"},
      {NULL, MIXTRAL " --moe-router-num-groups 2", "needs --moe-router-group-topk"},
      {NULL, MIXTRAL " --tp 2 --sequence-parallel --ep 2 --moe-token-dispatcher deepep", "--expert-tp 1"},
      {NULL,
       "run --model llama2-7b --num-experts 24 --cluster dgx-h100-superpod --gpus 48 --global-batch 48 --ep 12 "
       "--moe-token-dispatcher deepep --allow-oom",
       "as many GPUs on every node"},
      {NULL, MIXTRAL " --recompute modules --recompute-modules mla_up_proj", "mla_up_proj"},
      {NULL, MIXTRAL " --recompute modules --recompute-modules shared_experts", "no shared experts"},
      {NULL,
       "run --model qwen3-30b-a3b --gpus 16 --ep 16 --global-batch 16 --recompute modules --recompute-modules mlp",
       "every layer of this model is a mixture of experts"},
      {NULL, "run --model llama2-7b --gpus 8 --global-batch 8 --recompute modules --recompute-modules moe",
       "no experts"},
  };
  cli_test_bad_each(cases, G_N_ELEMENTS(cases));
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  g_test_add_func("/moe-cli/alltoall-table", test_alltoall_table);
  g_test_add_func("/moe-cli/run-bytes", test_run_bytes);
  g_test_add_func("/moe-cli/ep-domain-imbalance", test_ep_domain_and_imbalance);
  g_test_add_func("/moe-cli/exact", test_exact);
  g_test_add_func("/moe-cli/plan", test_plan);
  g_test_add_func("/moe-cli/ideal-bubble", test_ideal_bubble);
  g_test_add_func("/moe-cli/errors", test_errors);
  g_test_add_func("/moe-cli/recipes-fit", test_recipes_fit);
  g_test_add_func("/moe-cli/modules", test_modules_moe);
  g_test_add_func("/moe-cli/fp8", test_fp8);
  g_test_add_func("/moe-cli/a2a-overlap", test_a2a_overlap);
  g_test_add_func("/moe-cli/deepep-node-limited", test_deepep_node_limited);
  g_test_add_func("/moe-cli/deepep-fp8-sms", test_deepep_fp8_and_sms);
  return g_test_run();
}
