/* End-to-end tests of the frameworks' recomputation policies and memory,
 * through the real binary: each policy's memory and time in the order its
 * saved set and its recomputed ops give, the reserve from its mechanisms
 * only where asked for, and the options' refusals. */
#include <math.h>
#include <string.h>

#include "cli_harness.h"

/* A small Llama-shaped model with FSDP2 on 8 H100s, as torchtitan runs it. */
#define EAGER                                                                                                        \
  "run --cluster dgx-h100-superpod --profile h100-sxm5-80gb-measured --gpus 8 --fsdp --global-batch 8 "             \
  "--micro-batch 1 --layers 4 --hidden 1024 --heads 8 --num-query-groups 2 --ffn-hidden 3584 --vocab 32000 "       \
  "--seq-len 2048 --norm rmsnorm --position-embedding rope --swiglu --untie-embeddings --no-bias --allow-oom "      \
  "--format json --framework eager"
#define MEGATRON                                                                                                     \
  "run --model llama3-8b --cluster dgx-h100-superpod --profile h100-sxm5-80gb-measured --gpus 8 --tp 8 "            \
  "--sequence-parallel --global-batch 8 --micro-batch 1 --seq-len 2048 --allow-oom --format json"

typedef struct {
  double total, activations, time, reserve;
} Mem;

static Mem run_mem(const char *base, const char *extra) {
  char *args = g_strdup_printf("%s %s", base, extra);
  cJSON *j = run_json(args);
  const cJSON *m = obj(j, "memory_per_gpu_GiB");
  Mem r = {num(m, "total"), num(m, "activations"), num(j, "iteration_time_s"), num(m, "reserve")};
  cJSON_Delete(j);
  g_free(args);
  return r;
}

/* torchtitan's policies with eager: memory none > layer (k = 2) > layer
 * (k = 1, every layer) = full, and none > op > full; time the other way,
 * each recomputation costing more than none's zero and less than full's
 * whole forward. */
static void test_eager_order(void) {
  Mem none = run_mem(EAGER, "--recompute none"), op = run_mem(EAGER, "--recompute op"),
      full = run_mem(EAGER, "--recompute full"), l2 = run_mem(EAGER, "--recompute layer"),
      l1 = run_mem(EAGER, "--recompute layer --recompute-every 1"),
      l4 = run_mem(EAGER, "--recompute layer --recompute-every 4");
  g_assert_cmpfloat(none.activations, >, l4.activations);
  g_assert_cmpfloat(l4.activations, >, l2.activations);
  g_assert_cmpfloat(l2.activations, >, l1.activations);
  g_assert_cmpfloat(none.activations, >, op.activations);
  g_assert_cmpfloat(op.activations, >, full.activations);
  g_assert_cmpfloat(l1.activations, ==, full.activations);
  g_assert_cmpfloat(none.time, <, op.time);
  g_assert_cmpfloat(op.time, <, full.time);
  g_assert_cmpfloat(none.time, <, l4.time);
  g_assert_cmpfloat(l4.time, <, l2.time);
  g_assert_cmpfloat(l2.time, <, l1.time);
  g_assert_cmpfloat(l1.time, ==, full.time);
}

/* FSDP2 with a pipeline: the unsharded gradients accumulate over the
 * microbatches, upcast to fp32 where the reduction is fp32.  Without a
 * pipeline the two reduce dtypes differ by a block's fp32 copy (4 Lp);
 * with one, by that and 2 bytes more per stage parameter, whose bf16 copy
 * gathered whole (2 Ps) plus its fp32 shard over 4 ranks (Ps) is bf16's
 * gradient figure, 3 Ps. */
static double grads(const char *extra, double *weights, int *stage) {
  char *args = g_strdup_printf("%s --recompute full %s", EAGER, extra);
  cJSON *j = run_json(args);
  const cJSON *m = obj(j, "memory_per_gpu_GiB");
  double g = num(m, "gradients");
  if (weights)
    *weights = num(m, "weights");
  *stage = (int)num(m, "stage");
  cJSON_Delete(j);
  g_free(args);
  return g;
}

static void test_fsdp_accumulation(void) {
  int s1, s2, s3, s4;
  double d1 = grads("--fsdp-reduce-dtype fp32", NULL, &s1) - grads("--fsdp-reduce-dtype bf16", NULL, &s2);
  double g16 = grads("--pp 2 --fsdp-reduce-dtype bf16", NULL, &s4);
  double d2 = grads("--pp 2 --fsdp-reduce-dtype fp32", NULL, &s3) - g16;
  g_assert_cmpint(s1, ==, s2);
  g_assert_cmpint(s3, ==, s4);
  g_assert_cmpfloat(d1, >, 0);
  g_assert_cmpfloat(fabs(d2 - d1 - 2.0 / 3.0 * g16), <, 1e-9 * g16);
}

/* A pipeline in eager keeps each microbatch's logits on its last stage to
 * the step's end (torch.distributed.pipelining's output_chunks): doubling
 * the microbatches from 2 to 4 adds at least two microbatches' bf16
 * logits, 2 s b V bytes each (s 2048, b 1, V 32000), where the default
 * framework's 1F1B holds the same. */
static void test_pipeline_logits(void) {
  const char *base = "run --cluster dgx-h100-superpod --profile h100-sxm5-80gb-measured --gpus 8 --fsdp --micro-batch 1 "
                     "--layers 4 --hidden 1024 --heads 8 --num-query-groups 2 --ffn-hidden 3584 --vocab 32000 "
                     "--seq-len 2048 --norm rmsnorm --position-embedding rope --swiglu --untie-embeddings --no-bias "
                     "--allow-oom --format json --pp 2 --recompute full";
  Mem m[2][2];
  for (guint f = 0; f < 2; f++)
    for (guint k = 0; k < 2; k++) {
      char *extra = g_strdup_printf("--framework %s --global-batch %u", f ? "megatron" : "eager", k ? 16 : 8);
      m[f][k] = run_mem(base, extra);
      g_free(extra);
    }
  double logits = 2.0 * 2048 * 32000 / 1073741824.0;
  g_assert_cmpfloat(m[0][1].activations - m[0][0].activations, >=, 2 * logits * (1 - 1e-12));
  g_assert_cmpfloat(m[1][1].activations, ==, m[1][0].activations);
}

/* Megatron-Core's modules: each module recomputed keeps less and costs
 * more than none; core_attn, mlp and layernorm together keep the least of
 * them.  Its none keeps less than the default --recompute none, whose
 * formula counts GPT's dropout masks, which a Llama recipe has not. */
static void test_megatron_modules(void) {
  Mem legacy = run_mem(MEGATRON, "--recompute none");
  Mem none = run_mem(MEGATRON, "--recompute modules --recompute-modules none");
  Mem all = run_mem(MEGATRON, "--recompute modules --recompute-modules core_attn,mlp,layernorm");
  static const char *const one[] = {"core_attn", "mlp", "layernorm"};
  g_assert_cmpfloat(none.activations, <, legacy.activations);
  for (guint i = 0; i < G_N_ELEMENTS(one); i++) {
    char *extra = g_strdup_printf("--recompute modules --recompute-modules %s", one[i]);
    Mem m = run_mem(MEGATRON, extra);
    g_free(extra);
    g_assert_cmpfloat(m.activations, <, none.activations);
    g_assert_cmpfloat(m.activations, >, all.activations);
    g_assert_cmpfloat(m.time, >, none.time);
    g_assert_cmpfloat(m.time, <, all.time);
  }
  /* the default list is Megatron-Core's ["core_attn"] */
  Mem dflt = run_mem(MEGATRON, "--recompute modules");
  Mem core = run_mem(MEGATRON, "--recompute modules --recompute-modules core_attn");
  g_assert_cmpfloat(dflt.activations, ==, core.activations);
  g_assert_cmpfloat(dflt.time, ==, core.time);
}

/* The reserve: the flat 3 GiB for the default framework and policies;
 * from its mechanisms (the CUDA context and NCCL's buffers, listed) with
 * eager or a framework's policy; --memory-reserve overrides both. */
static void test_reserve(void) {
  cJSON *dflt = run_json(MEGATRON " --recompute full");
  const cJSON *m = obj(dflt, "memory_per_gpu_GiB");
  g_assert_cmpfloat(num(m, "reserve"), ==, 3);
  g_assert_null(cJSON_GetObjectItemCaseSensitive(m, "cuda_context"));
  g_assert_null(cJSON_GetObjectItemCaseSensitive(m, "nccl_buffers"));
  g_assert_null(cJSON_GetObjectItemCaseSensitive(m, "allocator_rounding"));
  cJSON_Delete(dflt);
  cJSON *eager = run_json(EAGER " --recompute op");
  m = obj(eager, "memory_per_gpu_GiB");
  double ctx = num(m, "cuda_context"), nccl = num(m, "nccl_buffers");
  g_assert_cmpfloat(ctx, >, 0);
  g_assert_cmpfloat(nccl, >, 0);
  g_assert_cmpfloat(num(m, "reserve"), ==, ctx + nccl);
  g_assert_cmpstr(str(obj(eager, "config"), "recompute"), ==, "op");
  /* the executed FLOPs count the policy's recomputed GEMMs: per layer and
   * sequence wk, wo and w3 (2 s h n each: n = 256, 1024, 3584) over the
   * model's forward, backward and logits (3 passes of 2 s h (1024 + 256 +
   * 256 + 1024 + 3 x 3584) per layer, 4 s^2 h for the scores, 2 s h V) */
  double s = 2048, h = 1024, layer = 2 * s * h * (1024 + 2 * 256 + 1024 + 3 * 3584) + 4 * s * s * h;
  double model = 3 * (4 * layer + 2 * s * h * 32000), again = 4 * 2 * s * h * (256 + 1024 + 3584);
  g_assert_cmpfloat(fabs(num(eager, "hardware_tflops_per_gpu") / num(eager, "model_tflops_per_gpu") -
                         (model + again) / model),
                    <, 1e-9);
  /* --recompute layer counts each stage's blocks apart, as torchtitan's
   * ranks do: 32 layers on 4 stages, every 3rd of each stage's 8, is 8
   * layers run again (a count over the whole model would say 10) */
  gchar **parts = g_strsplit(EAGER " --pp 4 --recompute layer --recompute-every 3", "--layers 4 ", 2);
  char *eager32 = g_strjoinv("--layers 32 ", parts);
  cJSON *staged = run_json(eager32);
  g_strfreev(parts);
  g_free(eager32);
  double model32 = 3 * (32 * layer + 2 * s * h * 32000);
  g_assert_cmpfloat(fabs(num(staged, "hardware_tflops_per_gpu") / num(staged, "model_tflops_per_gpu") -
                         (model32 + 8 * layer) / model32),
                    <, 1e-9);
  cJSON_Delete(staged);
  cJSON_Delete(eager);
  Mem given = run_mem(EAGER, "--recompute op --memory-reserve 2");
  g_assert_cmpfloat(given.reserve, ==, 2);
}

/* plan searches a pinned policy with its parameter and says it in each
 * row's command; unpinned, it searches full, selective and none only. */
static void test_plan(void) {
  cJSON *j = run_json("plan --model llama3-8b --gpus 8 --global-batch 16 --seq-len 2048 --framework eager "
                      "--recompute layer --recompute-every 4 --top 2 --format json");
  const cJSON *row;
  guint n = 0;
  cJSON_ArrayForEach(row, arr(j, "rows")) {
    g_assert_cmpstr(str(row, "recompute"), ==, "layer");
    g_assert_nonnull(strstr(str(row, "command"), "--recompute layer --recompute-every 4"));
    n++;
  }
  g_assert_cmpuint(n, >, 0);
  cJSON_Delete(j);
  j = run_json("plan --model llama3-8b --gpus 8 --global-batch 16 --seq-len 2048 --top 50 --format json");
  cJSON_ArrayForEach(row, arr(j, "rows")) {
    const char *rc = str(row, "recompute");
    g_assert_true(strcmp(rc, "full") == 0 || strcmp(rc, "selective") == 0 || strcmp(rc, "none") == 0);
  }
  cJSON_Delete(j);
}

static const CliBadCase bad[] = {
    {"op-megatron", MEGATRON " --recompute op", "--framework eager"},
    {"modules-eager", EAGER " --recompute modules", "--recompute-modules"},
    {"every-without-layer", EAGER " --recompute op --recompute-every 2", "--recompute layer"},
    {"every-zero", EAGER " --recompute layer --recompute-every 0", "--recompute-every"},
    {"modules-without-modules", MEGATRON " --recompute full --recompute-modules mlp", "--recompute modules"},
    {"modules-unknown", MEGATRON " --recompute modules --recompute-modules attn", "unknown module 'attn'"},
    {"modules-empty", MEGATRON " --recompute modules --recompute-modules ,", "--recompute-modules"},
    {"moe-act-dense", MEGATRON " --recompute modules --recompute-modules moe_act", "no experts"},
    {"op-zero", "run --model gpt3-1b --gpus 8 --tp 1 --pp 1 --global-batch 8 --micro-batch 1 --zero 1 --framework eager "
                "--recompute op",
     "--zero"},
    {"unknown-policy", MEGATRON " --recompute sometimes", "--recompute"},
};

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  g_test_add_func("/memory/eager-order", test_eager_order);
  g_test_add_func("/memory/megatron-modules", test_megatron_modules);
  g_test_add_func("/memory/fsdp-accumulation", test_fsdp_accumulation);
  g_test_add_func("/memory/pipeline-logits", test_pipeline_logits);
  g_test_add_func("/memory/reserve", test_reserve);
  g_test_add_func("/memory/plan", test_plan);
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    char *name = g_strdup_printf("/memory/bad/%s", bad[i].name);
    g_test_add_data_func(name, &bad[i], cli_test_bad);
    g_free(name);
  }
  return g_test_run();
}
