/* End-to-end tests of the model shapes people train today (Llama-style:
 * grouped-query attention, SwiGLU, RMSNorm, rotary positions, untied
 * logits, no linear biases), the built-in model list, and the rates every
 * run reports (MFU, HFU, tokens/s, GPU-hours), through the real binary.
 *
 * Expected values are computed here from the run's own JSON with formulas
 * written out in each test, never copied from an output.
 */
#include <math.h>
#include <string.h>

#include "../search/planner.h"
#include "cli_harness.h"

#define REL 1e-12

static void assert_rel(double got, double want, double rel) {
  if (fabs(got - want) > rel * fabs(want))
    g_assert_cmpfloat_with_epsilon(got, want, rel * fabs(want));
}

static gboolean flag_of(const cJSON *o, const char *key) {
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, key);
  g_assert_true(cJSON_IsBool(b));
  return cJSON_IsTrue(b);
}

/* Parameters from a config or model object's own fields, matrix by matrix. */
static double params_of(const cJSON *c) {
  double l = num(c, "layers"), h = num(c, "hidden"), a = num(c, "heads"), g = num(c, "query_groups");
  double d = num(c, "kv_channels"), f = num(c, "ffn_hidden"), V = num(c, "vocab"), s = num(c, "seq_len");
  double bias = flag_of(c, "linear_bias") ? 1 : 0;
  double norm = strcmp(str(c, "norm"), "rmsnorm") == 0 ? h : 2 * h;
  double up = strcmp(str(c, "mlp"), "swiglu") == 0 ? 2 * f : f;
  double layer = h * (a + 2 * g) * d + bias * (a + 2 * g) * d + a * d * h + bias * h + h * up + bias * up + f * h +
                 bias * h + 2 * norm;
  double position = strcmp(str(c, "position_embedding"), "learned") == 0 ? s * h : 0;
  return l * layer + V * h * (flag_of(c, "tied_embeddings") ? 1 : 2) + position + norm;
}

/* Forward FLOPs of one layer for one sequence, and of the logit layer. */
static double layer_flops(const cJSON *c) {
  double h = num(c, "hidden"), a = num(c, "heads"), g = num(c, "query_groups"), d = num(c, "kv_channels");
  double f = num(c, "ffn_hidden"), s = num(c, "seq_len");
  double mlp = strcmp(str(c, "mlp"), "swiglu") == 0 ? 3 : 2;
  return 2 * s * h * (a + 2 * g) * d + 4 * s * s * a * d + 2 * s * a * d * h + 2 * s * h * f * mlp;
}

static double logit_flops(const cJSON *c) { return 2 * num(c, "seq_len") * num(c, "hidden") * num(c, "vocab"); }

#define LLAMA70 "run --model llama2-70b --cluster dgx-h100-superpod --gpus 64 --tp 8 --pp 4 --global-batch 32 --network analytic"

/* Why: a Llama preset must be modelled as Llama (GQA, SwiGLU, RMSNorm,
 * rotary, untied, no biases), its parameters counted exactly, and the
 * rates follow from the iteration time by their definitions: tokens/s =
 * B s / T; MFU counts 3 passes of the model's FLOPs, HFU what runs (4 with
 * full recomputation), so HFU / MFU is fixed by the shape; GPU-hours are
 * days x 24 x GPUs. */
static void test_llama_run(void) {
  cJSON *j = run_json(LLAMA70 " --tokens 1T --format json");
  const cJSON *c = obj(j, "config");
  g_assert_cmpstr(str(c, "mlp"), ==, "swiglu");
  g_assert_cmpstr(str(c, "norm"), ==, "rmsnorm");
  g_assert_cmpstr(str(c, "position_embedding"), ==, "rope");
  g_assert_false(flag_of(c, "tied_embeddings"));
  g_assert_false(flag_of(c, "linear_bias"));
  g_assert_cmpfloat(num(c, "query_groups"), <, num(c, "heads"));
  g_assert_cmpfloat(num(c, "kv_channels") * num(c, "heads"), ==, num(c, "hidden"));
  g_assert_cmpfloat(num(c, "parameters"), ==, params_of(c));
  double T = num(j, "iteration_time_s"), B = num(c, "global_batch"), s = num(c, "seq_len"), n = num(c, "gpus");
  assert_rel(num(j, "tokens_per_s"), B * s / T, REL);
  assert_rel(num(j, "gpu_hours"), num(j, "training_days") * 24 * n, REL);
  assert_rel(num(j, "training_days") * 86400, 1e12 / (B * s) * T, 1e-9);
  double l = num(c, "layers");
  double model = 3 * l * layer_flops(c) + 3 * logit_flops(c), executed = 4 * l * layer_flops(c) + 3 * logit_flops(c);
  g_assert_cmpstr(str(c, "recompute"), ==, "full");
  assert_rel(num(j, "hfu_percent") / num(j, "mfu_percent"), executed / model, 1e-9);
  assert_rel(num(j, "hardware_tflops_per_gpu"), executed * B / T / n / 1e12, 1e-9);
  /* Eq. 3 counts the recomputation forward: with recomputation on it is what runs */
  assert_rel(num(j, "percent_of_peak"), num(j, "hfu_percent"), 1e-9);
  g_assert_cmpfloat(num(j, "mfu_percent"), >, 0);
  g_assert_cmpfloat(num(j, "mfu_percent"), <, 100);
  cJSON_Delete(j);
  /* without recomputation what runs is the model's FLOPs: HFU = MFU, and
   * Eq. 3 still counts a fourth pass */
  j = run_json(LLAMA70 " --recompute none --allow-oom --format json");
  assert_rel(num(j, "hfu_percent"), num(j, "mfu_percent"), 1e-9);
  assert_rel(num(j, "percent_of_peak") / num(j, "mfu_percent"), executed / model, 1e-9);
  cJSON_Delete(j);
}

/* Why: every shape option must reach the model, alone or over a preset;
 * an untied logit layer has its own weights (V h more parameters) and no
 * tied-embedding all-reduce between the first and last stage. */
static void test_shape_options(void) {
  cJSON *j = run_json("run --model gpt3-1b --num-query-groups 4 --swiglu --ffn-hidden 5504 --norm rmsnorm "
                      "--position-embedding rope --no-bias --kv-channels 64 --gpus 8 --tp 2 --pp 2 --global-batch 8 "
                      "--network analytic --format json");
  const cJSON *c = obj(j, "config");
  g_assert_cmpfloat(num(c, "query_groups"), ==, 4);
  g_assert_cmpfloat(num(c, "ffn_hidden"), ==, 5504);
  g_assert_cmpfloat(num(c, "kv_channels"), ==, 64);
  g_assert_cmpstr(str(c, "mlp"), ==, "swiglu");
  g_assert_cmpstr(str(c, "norm"), ==, "rmsnorm");
  g_assert_cmpstr(str(c, "position_embedding"), ==, "rope");
  g_assert_false(flag_of(c, "linear_bias"));
  g_assert_true(flag_of(c, "tied_embeddings"));
  g_assert_cmpfloat(num(c, "parameters"), ==, params_of(c));
  cJSON_Delete(j);

  const char *base = "run --layers 8 --hidden 1024 --heads 16 --seq-len 512 --gpus 8 --tp 2 --pp 2 --global-batch 8 "
                     "--network analytic --format json";
  cJSON *tied = run_json(base);
  char *untied_args = g_strconcat(base, " --untie-embeddings", NULL);
  cJSON *untied = run_json(untied_args);
  const cJSON *ct = obj(tied, "config"), *cu = obj(untied, "config");
  g_assert_cmpfloat(num(cu, "parameters") - num(ct, "parameters"), ==, num(ct, "vocab") * num(ct, "hidden"));
  g_assert_cmpfloat(num(obj(tied, "bytes_per_iteration"), "embedding"), >, 0);
  g_assert_cmpfloat(num(obj(untied, "bytes_per_iteration"), "embedding"), ==, 0);
  cJSON_Delete(tied);
  cJSON_Delete(untied);
  g_free(untied_args);

  /* fewer key/value heads: a narrower QKV GEMM and smaller K and V, so a
   * faster layer and less activation memory */
  cJSON *mha = run_json(base);
  char *mqa_args = g_strconcat(base, " --num-query-groups 2", NULL);
  cJSON *gqa = run_json(mqa_args);
  g_assert_cmpfloat(num(gqa, "iteration_time_s"), <, num(mha, "iteration_time_s"));
  g_assert_cmpfloat(num(obj(gqa, "memory_per_gpu_GiB"), "activations"), <,
                    num(obj(mha, "memory_per_gpu_GiB"), "activations"));
  cJSON_Delete(mha);
  cJSON_Delete(gqa);
  g_free(mqa_args);

  /* a head width that is not h/a is allowed when given */
  j = run_json("run --layers 4 --hidden 1000 --heads 16 --kv-channels 64 --seq-len 512 --gpus 2 --tp 2 "
               "--global-batch 2 --network analytic --format json");
  g_assert_cmpfloat(num(obj(j, "config"), "parameters"), ==, params_of(obj(j, "config")));
  cJSON_Delete(j);
}

/* Why: the report must say in words what the model is and what each rate
 * means, so that a newcomer can read it; a run that is not an SC21
 * reproduction leads with the model's FLOPs and MFU, and shows Eq. 3 only
 * labelled as such, after them. */
static void test_report_text(void) {
  Proc p = run_line(LLAMA70 " --tokens 1T");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "grouped-query attention (8 key/value heads), head dim 128; MLP 28672 SwiGLU; "
                                 "RMSNorm; rotary positions; untied logits; no linear biases\n"));
  cJSON *j = run_json(LLAMA70 " --tokens 1T --format json");
  char *head = g_strdup_printf("\nthroughput %.1f TFLOP/s per GPU of model FLOPs: MFU %.1f%% of peak, %.1f PFLOP/s "
                               "aggregate\n",
                               num(j, "model_tflops_per_gpu"), 100 * num(j, "mfu"),
                               num(j, "model_tflops_per_gpu") * num(obj(j, "config"), "gpus") / 1000);
  g_assert_nonnull(strstr(p.out, head));
  char *eq3 = g_strdup_printf("\n           %.1f TFLOP/s per GPU by SC21's Eq. 3 (%.1f%% of peak: ",
                              num(j, "tflops_per_gpu"), num(j, "percent_of_peak"));
  g_assert_nonnull(strstr(p.out, eq3));
  g_assert_true(strstr(p.out, head) < strstr(p.out, eq3));
  g_assert_null(strstr(p.out, "by SC21's Eq. 3\n"));
  g_assert_nonnull(strstr(p.out, ": HFU "));
  char *per_gpu = g_strdup_printf(" tokens/s, %.0f per GPU\n", num(j, "tokens_per_s_per_gpu"));
  g_assert_nonnull(strstr(p.out, per_gpu));
  g_free(per_gpu);
  g_assert_cmpfloat_with_epsilon(num(j, "tokens_per_s_per_gpu"),
                                 num(j, "tokens_per_s") / num(obj(j, "config"), "gpus"), 1e-9);
  g_assert_nonnull(strstr(p.out, " GPU-hours\n"));
  g_free(head);
  g_free(eq3);
  cJSON_Delete(j);
  proc_clear(&p);
  /* a GPT prints no architecture line */
  p = run_line("run --model gpt3-1b --gpus 8 --tp 2 --pp 2 --global-batch 8 --network analytic");
  g_assert_null(strstr(p.out, "multi-head attention"));
  proc_clear(&p);
}

/* Why: the model's FLOPs are what PaLM (appendix B) and Megatron-Core count
 * for MFU: forward and backward (3 forward passes) of every layer,
 * attention's s x s products included, and of the logit layer, never a
 * recomputation; so model TFLOP/s follow from the shape and the time
 * whatever --recompute says, MFU is that over the profile's peak at the
 * run's precision (never above it), and Eq. 3 (4 passes of the layers) is
 * above it. */
static void test_model_flops(void) {
  static const char *const runs[] = {
      LLAMA70 " --format json",
      LLAMA70 " --recompute selective --sequence-parallel --format json",
      LLAMA70 " --recompute none --allow-oom --format json",
      "run --model llama3-8b --seq-len 4096 --cluster dgx-h100-superpod --gpus 64 --tp 4 --pp 2 --global-batch 64 "
      "--network analytic --precision fp8 --format json",
      "run --model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 96 --network analytic --format json"};
  for (guint i = 0; i < G_N_ELEMENTS(runs); i++) {
    cJSON *j = run_json(runs[i]);
    const cJSON *c = obj(j, "config");
    double T = num(j, "iteration_time_s"), B = num(c, "global_batch"), n = num(c, "gpus");
    double model = B * (3 * num(c, "layers") * layer_flops(c) + 3 * logit_flops(c));
    double peak = profile_peak_tflops(j);
    assert_rel(num(j, "model_tflops_per_gpu"), model / T / n / 1e12, 1e-9);
    assert_rel(num(j, "mfu"), num(j, "model_tflops_per_gpu") / peak, 1e-9);
    assert_rel(num(j, "mfu") * 100, num(j, "mfu_percent"), 1e-9);
    g_assert_cmpfloat(num(j, "model_tflops_per_gpu"), <=, peak);
    g_assert_cmpfloat(num(j, "model_tflops_per_gpu"), <, num(j, "tflops_per_gpu"));
    cJSON_Delete(j);
  }
}

/* Why: an SC21 reproduction is Megatron's GPT on the 2021 stack as the
 * paper ran it (sim_plan_is_sc21_reproduction); each 2022+ mechanism, each
 * other shape, TeraPipe and the layers workload make a run that is not. */
static void test_sc21_rule(void) {
  static const struct {
    const char *args;
    gboolean sc21;
  } cases[] = {
      {"--model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 96", TRUE},
      {"--model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 96 --recompute none --allow-oom", TRUE},
      {"--model gpt3-175b --gpus 96 --tp 8 --pp 6 --global-batch 96 --schedule interleaved --chunks 2 --ddp torch "
       "--no-scatter-gather --no-fusion",
       TRUE},
      {"--model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 96 --schedule gpipe --precision bf16", TRUE},
      {"--model gpt3-1b --gpus 8 --tp 1 --pp 1 --global-batch 16 --zero 3", TRUE},
      {"--layers 8 --hidden 1024 --heads 16 --seq-len 512 --gpus 8 --tp 2 --pp 2 --global-batch 8", TRUE},
      {"--model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 96 --recompute selective", FALSE},
      {"--model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 96 --sequence-parallel", FALSE},
      {"--model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 96 --distributed-optimizer", FALSE},
      {"--model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 96 --attention flash", FALSE},
      {"--model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 96 --cluster dgx-h100-superpod", FALSE},
      {"--model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 96 --cluster dgx-h100-superpod --attention fused "
       "--precision fp8",
       FALSE},
      {"--model gpt3-1b --gpus 8 --tp 1 --pp 1 --global-batch 16 --zero 3 --attention flash", FALSE},
      {"--model gpt3-1b --seq-len 8192 --gpus 16 --tp 2 --pp 2 --cp 2 --global-batch 16 --attention flash", FALSE},
      {"--model gpt3-1b --gpus 16 --tp 2 --pp 2 --global-batch 16 --sequence-parallel --tp-comm-overlap", FALSE},
      {"--model gpt3-1b --cluster aws-p3-16xlarge --gpus 16 --tp 2 --pp 8 --dp 1 --global-batch 2 --schedule "
       "terapipe",
       FALSE},
      {"--model gpt3-1b --gpus 8 --tp 2 --pp 2 --global-batch 8 --swiglu", FALSE},
      {"--model gpt3-1b --gpus 8 --tp 2 --pp 2 --global-batch 8 --num-query-groups 4", FALSE},
      {"--model gpt3-1b --gpus 8 --tp 2 --pp 2 --global-batch 8 --untie-embeddings", FALSE},
      {"--model llama2-7b --gpus 8 --tp 2 --pp 2 --global-batch 8 --attention fused", FALSE},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    char *line = g_strdup_printf("run %s --network analytic --format json", cases[i].args);
    g_test_message("%s", line);
    cJSON *j = run_json(line);
    g_assert_cmpint(flag_of(j, "sc21_reproduction"), ==, cases[i].sc21);
    cJSON_Delete(j);
    g_free(line);
  }
}

/* Why: an SC21 reproduction reports its throughput as it always has, as
 * the paper does: Eq. 3 first, said so, then HFU and MFU, in the very
 * words and digits of before, and the figures' Eq. 3 numbers are those of
 * `run` of the same configuration.  GPT-3 175B on Selene with the 2021
 * options (README's example, on the analytic network). */
static void test_sc21_report_unchanged(void) {
  const char *args = "run --model gpt3-175b --gpus 1536 --tp 8 --pp 16 --global-batch 1536 --micro-batch 1 --schedule "
                     "interleaved --chunks 2 --tokens 300B --network analytic";
  Proc p = run_line(args);
  g_assert_cmpint(p.status, ==, 0);
  char *json_args = g_strconcat(args, " --format json", NULL);
  cJSON *j = run_json(json_args);
  g_assert_true(flag_of(j, "sc21_reproduction"));
  char *block = g_strdup_printf(
      "\niteration  %.4f s\n"
      "throughput %.1f TFLOP/s per GPU (%.1f%% of peak), %.1f PFLOP/s aggregate, by SC21's Eq. 3\n"
      "           (which counts a recomputation forward whether or not one runs)\n"
      "           %.1f TFLOP/s per GPU executed (hardware): HFU %.1f%% of peak\n"
      "           MFU %.1f%% of peak: the model's FLOPs (forward and backward, attention included), no "
      "recomputation\n"
      "tokens     %.0f tokens/s, %.0f per GPU\n",
      num(j, "iteration_time_s"), num(j, "tflops_per_gpu"), num(j, "percent_of_peak"), num(j, "aggregate_pflops"),
      num(j, "hardware_tflops_per_gpu"), num(j, "hfu_percent"), num(j, "mfu_percent"), num(j, "tokens_per_s"),
      num(j, "tokens_per_s_per_gpu"));
  g_assert_nonnull(strstr(p.out, block));
  g_assert_null(strstr(p.out, "of model FLOPs"));
  g_free(block);
  cJSON_Delete(j);
  g_free(json_args);
  proc_clear(&p);
  /* Table 1's first and last rows are run's Eq. 3, and its text says so */
  cJSON *t = run_json("figure megatron-table1 --network analytic --format json");
  const cJSON *rows = arr(t, "rows");
  for (int i = 0; i < cJSON_GetArraySize(rows); i += cJSON_GetArraySize(rows) - 1) {
    const cJSON *row = cJSON_GetArrayItem(rows, i);
    gboolean interleaved = strcmp(str(row, "schedule"), "interleaved") == 0;
    char *chunks = g_strdup_printf(" --chunks %.0f", num(row, "chunks"));
    char *line = g_strdup_printf("run --layers %.0f --hidden %.0f --heads %.0f --gpus %.0f --tp %.0f --pp %.0f "
                                 "--global-batch %.0f --micro-batch %.0f --schedule %s%s --ddp %s --network analytic "
                                 "--allow-oom --format json",
                                 num(row, "layers"), num(row, "hidden"), num(row, "heads"), num(row, "gpus"),
                                 num(row, "tp"), num(row, "pp"), num(row, "global_batch"), num(row, "micro_batch"),
                                 str(row, "schedule"), interleaved ? chunks : "", str(row, "ddp"));
    g_free(chunks);
    cJSON *r = run_json(line);
    g_assert_true(flag_of(r, "sc21_reproduction"));
    g_assert_cmpfloat(num(r, "tflops_per_gpu"), ==, num(row, "tflops_per_gpu"));
    cJSON_Delete(r);
    g_free(line);
  }
  cJSON_Delete(t);
  p = run_line("figure megatron-table1 --network analytic");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "(TFLOP/s per GPU, Eq. 3 FLOPs)\n"));
  proc_clear(&p);
}

/* Why: `ptdsim models` is how a user finds a model's name and checks its
 * shape; every entry's parameter count follows from its own fields, and
 * every entry runs. */
static void test_models_verb(void) {
  Proc p = run_line("models --format json");
  cJSON *list = parse_json(&p);
  g_assert_true(cJSON_IsArray(list));
  guint n = 0;
  gboolean llama405 = FALSE;
  const cJSON *m;
  cJSON_ArrayForEach(m, list) {
    if (cJSON_GetObjectItemCaseSensitive(m, "experts")) { /* counted against their checkpoints in test_moe.c */
      g_assert_cmpfloat(num(m, "active_parameters"), <, num(m, "parameters"));
      g_assert_cmpstr(str(m, "name"), !=, "");
      n++;
      continue;
    }
    g_assert_cmpfloat(num(m, "parameters"), ==, params_of(m));
    g_assert_cmpuint(strlen(str(m, "source")), >, 10);
    llama405 |= strcmp(str(m, "name"), "llama3-405b") == 0;
    n++;
  }
  g_assert_true(llama405);
  g_assert_cmpuint(n, >=, 20);
  cJSON_Delete(list);
  proc_clear(&p);
  p = run_line("models");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "\nllama2-70b "));
  proc_clear(&p);
  p = run_line("models extra");
  assert_one_line_error(&p, "extra");
  proc_clear(&p);
}

/* Why: Megatron's distributed optimizer shards the optimizer state (12
 * bytes per parameter) over the d data-parallel ranks and nothing else
 * (Megatron-LM docs/source/api-guide/dist_optimizer.md); its gradient
 * reduce-scatter and parameter all-gather move what the all-reduce moved;
 * the step runs on 1/d of the parameters; the pipeline is untouched, so the
 * ideal profile's bubble is the same, under both DDP modes and networks. */
static void test_distributed_optimizer(void) {
  const char *nets[] = {"analytic", "flow"}, *ddps[] = {"local", "torch"};
  for (guint n = 0; n < 2; n++)
    for (guint k = 0; k < 2; k++) {
      char *base = g_strdup_printf("run --model llama3-8b --seq-len 2048 --gpus 64 --tp 4 --pp 4 --global-batch 64 "
                                   "--network %s --ddp %s --format json", nets[n], ddps[k]);
      char *dist_args = g_strconcat(base, " --distributed-optimizer", NULL);
      cJSON *plain = run_json(base), *dist = run_json(dist_args);
      g_assert_false(flag_of(obj(plain, "config"), "distributed_optimizer"));
      g_assert_true(flag_of(obj(dist, "config"), "distributed_optimizer"));
      double d = num(obj(dist, "config"), "dp");
      g_assert_cmpfloat(d, ==, 4);
      const cJSON *mp = obj(plain, "memory_per_gpu_GiB"), *md = obj(dist, "memory_per_gpu_GiB");
      assert_rel(num(md, "optimizer"), num(mp, "optimizer") / d, REL);
      g_assert_cmpfloat(num(md, "weights"), ==, num(mp, "weights"));
      g_assert_cmpfloat(num(md, "gradients"), ==, num(mp, "gradients"));
      g_assert_cmpfloat(num(md, "activations"), ==, num(mp, "activations"));
      g_assert_cmpfloat(num(obj(dist, "bytes_per_iteration"), "dp"), ==, num(obj(plain, "bytes_per_iteration"), "dp"));
      g_assert_cmpfloat(num(obj(dist, "time_breakdown_s"), "optimizer"), <,
                        num(obj(plain, "time_breakdown_s"), "optimizer") / (d - 1));
      cJSON_Delete(plain);
      cJSON_Delete(dist);
      g_free(dist_args);
      g_free(base);
    }
  cJSON *a = run_json("run --layers 8 --hidden 1024 --heads 16 --seq-len 512 --gpus 16 --tp 2 --pp 4 --global-batch "
                      "32 --profile ideal --network analytic --format json");
  cJSON *b = run_json("run --layers 8 --hidden 1024 --heads 16 --seq-len 512 --gpus 16 --tp 2 --pp 4 --global-batch "
                      "32 --profile ideal --network analytic --distributed-optimizer --format json");
  g_assert_cmpfloat(num(a, "bubble_fraction"), ==, num(b, "bubble_fraction"));
  assert_rel(num(a, "bubble_fraction"), num(a, "analytic_bubble_fraction"), 1e-9);
  cJSON_Delete(a);
  cJSON_Delete(b);
  Proc p = run_line(LLAMA70 " --distributed-optimizer");
  g_assert_nonnull(strstr(p.out, "local DDP with the distributed optimizer, "));
  proc_clear(&p);
}

/* Why: selective recomputation (Korthikanti et al. section 5) runs only the
 * attention core again and keeps none of its s x s tensors: between none
 * and full in time, activations s b h (10 + 24/t) per layer, and HFU counts
 * the core's two GEMMs once more per layer; plan searches it. */
static void test_selective_recompute(void) {
  const char *base = "run --layers 8 --hidden 1024 --heads 16 --seq-len 2048 --gpus 16 --tp 2 --pp 4 --global-batch 32 "
                     "--network analytic --allow-oom --format json --recompute ";
  cJSON *r[3];
  const char *modes[] = {"none", "selective", "full"};
  for (guint i = 0; i < 3; i++) {
    char *args = g_strconcat(base, modes[i], NULL);
    r[i] = run_json(args);
    g_assert_cmpstr(str(obj(r[i], "config"), "recompute"), ==, modes[i]);
    g_free(args);
  }
  g_assert_cmpfloat(num(r[0], "iteration_time_s"), <, num(r[1], "iteration_time_s"));
  g_assert_cmpfloat(num(r[1], "iteration_time_s"), <, num(r[2], "iteration_time_s"));
  const cJSON *c = obj(r[1], "config");
  double s = num(c, "seq_len"), h = num(c, "hidden"), a = num(c, "heads"), t = num(c, "tp"), l = num(c, "layers");
  double act_none = num(obj(r[0], "memory_per_gpu_GiB"), "activations") * 1073741824.0;
  double act_sel = num(obj(r[1], "memory_per_gpu_GiB"), "activations") * 1073741824.0;
  /* the same layers and microbatches held: the difference is the s x s
   * part, 5 a s^2 b / t per layer and microbatch held (b = 1) */
  double per_layer_none = s * h * (10 + 24 / t + 5 * a * s / (h * t)), per_layer_sel = s * h * (10 + 24 / t);
  double held = (act_none - act_sel) / (per_layer_none - per_layer_sel);
  assert_rel(held, round(held), 1e-9);
  g_assert_cmpfloat(held, >=, 1);
  double model = 3 * l * layer_flops(c) + 3 * logit_flops(c);
  double core = 4 * s * s * a * num(c, "kv_channels");
  assert_rel(num(r[1], "hfu_percent") / num(r[1], "mfu_percent"), (model + l * core) / model, 1e-9);
  for (guint i = 0; i < 3; i++)
    cJSON_Delete(r[i]);
  /* the ideal profile: the pipeline is unchanged, the bubble is (p-1)/m */
  cJSON *ideal = run_json("run --layers 8 --hidden 1024 --heads 16 --seq-len 512 --gpus 16 --tp 2 --pp 4 "
                          "--global-batch 32 --profile ideal --network analytic --recompute selective --format json");
  assert_rel(num(ideal, "bubble_fraction"), num(ideal, "analytic_bubble_fraction"), 1e-9);
  cJSON_Delete(ideal);
  cJSON *plan = run_json("plan --model gpt3-13b --gpus 64 --global-batch 128 --network analytic --recompute selective "
                         "--format json");
  const cJSON *rows = arr(plan, "rows"), *row;
  guint n = 0;
  cJSON_ArrayForEach(row, rows) {
    g_assert_cmpstr(str(row, "recompute"), ==, "selective");
    g_assert_nonnull(strstr(str(row, "command"), "--recompute selective"));
    n++;
  }
  g_assert_cmpuint(n, >, 0);
  cJSON_Delete(plan);
}

/* Why: sequence parallelism (Korthikanti et al. section 4.2.2) turns each
 * tensor-parallel all-reduce into a reduce-scatter and an all-gather, which
 * move the same bytes; pipeline sends carry each rank's s/t shard, the
 * bytes scatter/gather sends, with nothing to gather; the norms and
 * dropouts run on s/t of the tokens, so the layer is faster and holds less;
 * the ideal profile's bubble is untouched. */
static void test_sequence_parallel(void) {
  const char *nets[] = {"analytic", "flow"};
  for (guint n = 0; n < 2; n++) {
    char *base = g_strdup_printf("run --model llama3-8b --seq-len 2048 --gpus 32 --tp 4 --pp 4 --global-batch 16 "
                                 "--network %s --format json",
                                 nets[n]);
    char *sp_args = g_strconcat(base, " --sequence-parallel", NULL);
    cJSON *plain = run_json(base), *sp = run_json(sp_args);
    const cJSON *c = obj(sp, "config");
    g_assert_true(flag_of(c, "sequence_parallel"));
    g_assert_false(flag_of(c, "scatter_gather"));
    g_assert_true(flag_of(obj(plain, "config"), "scatter_gather"));
    const cJSON *bp = obj(plain, "bytes_per_iteration"), *bs = obj(sp, "bytes_per_iteration");
    g_assert_cmpfloat(num(bs, "tp"), ==, num(bp, "tp"));
    g_assert_cmpfloat(num(bs, "pp"), ==, num(bp, "pp"));
    g_assert_cmpfloat(num(obj(sp, "memory_per_gpu_GiB"), "activations"), <,
                      num(obj(plain, "memory_per_gpu_GiB"), "activations"));
    g_assert_cmpfloat(num(obj(sp, "time_breakdown_s"), "compute"), <, num(obj(plain, "time_breakdown_s"), "compute"));
    /* two collectives where there was one: more ops */
    g_assert_cmpfloat(num(obj(sp, "simulation"), "ops"), >, num(obj(plain, "simulation"), "ops"));
    cJSON_Delete(plain);
    cJSON_Delete(sp);
    g_free(sp_args);
    g_free(base);
  }
  cJSON *ideal = run_json("run --layers 8 --hidden 1024 --heads 16 --seq-len 512 --gpus 16 --tp 2 --pp 4 "
                          "--global-batch 32 --profile ideal --network analytic --sequence-parallel --format json");
  assert_rel(num(ideal, "bubble_fraction"), num(ideal, "analytic_bubble_fraction"), 1e-9);
  cJSON_Delete(ideal);
  Proc p = run_line(LLAMA70 " --sequence-parallel");
  g_assert_nonnull(strstr(p.out, " DDP, sequence parallel, fusion "));
  proc_clear(&p);
}

/* Why: the attention kernels follow the device: H100 runs FlashAttention-2
 * by default, A100 Megatron's kernels as SC21 did (flash when asked);
 * flash keeps no s x s tensor and is faster at long sequences; the
 * run says which kernels ran. */
static void test_attention(void) {
  const char *h100 = "run --model llama2-70b --cluster dgx-h100-superpod --gpus 64 --tp 8 --pp 4 --global-batch 32 "
                     "--network analytic --format json";
  cJSON *dflt = run_json(h100);
  g_assert_cmpstr(str(obj(dflt, "config"), "attention"), ==, "flash");
  char *args = g_strconcat(h100, " --attention unfused", NULL);
  cJSON *mega = run_json(args);
  g_free(args);
  g_assert_cmpstr(str(obj(mega, "config"), "attention"), ==, "unfused");
  g_assert_cmpfloat(num(dflt, "iteration_time_s"), <, num(mega, "iteration_time_s"));
  g_assert_cmpfloat(num(obj(dflt, "memory_per_gpu_GiB"), "activations"), <,
                    num(obj(mega, "memory_per_gpu_GiB"), "activations"));
  g_assert_cmpfloat(num(dflt, "tflops_per_gpu"), >, num(mega, "tflops_per_gpu"));
  cJSON_Delete(dflt);
  cJSON_Delete(mega);
  /* A100: Megatron's fused softmax by default (s = 2048 meets its rules),
   * its fp32 chain past 2048, flash when asked */
  cJSON *a = run_json("run --model gpt3-1b --gpus 8 --tp 2 --pp 2 --global-batch 8 --network analytic --format json");
  g_assert_cmpstr(str(obj(a, "config"), "attention"), ==, "fused");
  cJSON_Delete(a);
  a = run_json("run --model gpt3-1b --seq-len 4096 --gpus 8 --tp 2 --pp 2 --global-batch 8 --network analytic "
               "--format json");
  g_assert_cmpstr(str(obj(a, "config"), "attention"), ==, "unfused");
  cJSON_Delete(a);
  a = run_json("run --model gpt3-1b --gpus 8 --tp 2 --pp 2 --global-batch 8 --network analytic --attention flash "
               "--format json");
  g_assert_cmpstr(str(obj(a, "config"), "attention"), ==, "flash");
  cJSON_Delete(a);
}

/* Why: FP8 linear layers on H100 run faster with the same FLOPs; MFU and
 * HFU count against the FP8 peak, so they follow from the times and the
 * two peaks read from the profile; A100 and V100 refuse what their tensor
 * cores do not run. */
static void test_precision(void) {
  const char *base = "run --model llama3-8b --seq-len 4096 --cluster dgx-h100-superpod --gpus 64 --tp 4 --pp 2 "
                     "--global-batch 64 --network analytic --format json";
  cJSON *bf = run_json(base);
  char *args = g_strconcat(base, " --precision fp8", NULL);
  cJSON *f8 = run_json(args);
  g_free(args);
  g_assert_cmpstr(str(obj(bf, "config"), "precision"), ==, "bf16");
  g_assert_cmpstr(str(obj(f8, "config"), "precision"), ==, "fp8");
  double tb = num(bf, "iteration_time_s"), t8 = num(f8, "iteration_time_s");
  g_assert_cmpfloat(t8, <, tb);
  assert_rel(num(f8, "tflops_per_gpu") * t8, num(bf, "tflops_per_gpu") * tb, 1e-9);
  char *file = g_strconcat(str(obj(bf, "config"), "profile"), ".json", NULL); /* the cluster's default */
  char *path = g_build_filename(g_getenv("PTDSIM_DATA_DIR"), "calibrate", "profiles", file, NULL);
  g_free(file);
  char *text = slurp(path, NULL);
  cJSON *prof = cJSON_Parse(text);
  double peak16 = num(prof, "peak_tflops"), peak8 = num(prof, "peak_fp8_tflops");
  assert_rel(num(f8, "mfu_percent"), num(bf, "mfu_percent") * (tb / t8) * (peak16 / peak8), 1e-9);
  assert_rel(num(f8, "hfu_percent"), num(bf, "hfu_percent") * (tb / t8) * (peak16 / peak8), 1e-9);
  g_assert_cmpfloat(num(obj(f8, "memory_per_gpu_GiB"), "activations"), <,
                    num(obj(bf, "memory_per_gpu_GiB"), "activations"));
  g_assert_cmpfloat(num(obj(f8, "memory_per_gpu_GiB"), "weights"), >, num(obj(bf, "memory_per_gpu_GiB"), "weights"));
  cJSON_Delete(prof);
  g_free(text);
  g_free(path);
  cJSON_Delete(bf);
  cJSON_Delete(f8);
  cJSON *a = run_json("run --model gpt3-1b --gpus 8 --tp 2 --pp 2 --global-batch 8 --network analytic --format json");
  g_assert_cmpstr(str(obj(a, "config"), "precision"), ==, "fp16");
  cJSON_Delete(a);
}

/* Why: context parallelism (--cp) splits every sequence over cp ranks: the
 * data-parallel size becomes n / (t cp p), each rank keeps 1/cp of the
 * activations (FlashAttention's are linear in s), the distributed
 * optimizer shards over d x cp (the same shards as d cp replicas), the
 * tensor- and pipeline-parallel traffic is the same in total, and the ring
 * moves, per layer and microbatch, the keys and values of s/cp tokens
 * (4 b (s/cp) g d / t bytes per rank) cp - 1 times forward, cp - 1 times
 * with their gradients (twice the bytes) and once more home backward:
 * (3 cp - 2) hops' worth from each of the t cp ranks of each of the d
 * replicas.  The shortcut and --exact agree; with free communication the
 * bubble identity holds. */
static void test_context_parallel(void) {
  const char *nets[] = {"analytic", "flow"};
  for (guint n = 0; n < 2; n++) {
    char *base = g_strdup_printf("run --model llama3-8b --seq-len 8192 --cluster dgx-h100-superpod --gpus 32 --tp 2 "
                                 "--pp 2 --global-batch 16 --sequence-parallel --distributed-optimizer --recompute "
                                 "none --network %s --format json",
                                 nets[n]);
    cJSON *one = run_json(base);
    const cJSON *m1 = obj(one, "memory_per_gpu_GiB"), *b1 = obj(one, "bytes_per_iteration");
    g_assert_cmpfloat(num(obj(one, "config"), "cp"), ==, 1);
    g_assert_cmpfloat(num(b1, "cp"), ==, 0);
    for (guint cp = 2; cp <= 4; cp *= 2) {
      char *args = g_strdup_printf("%s --cp %u", base, cp);
      cJSON *j = run_json(args);
      const cJSON *c = obj(j, "config"), *m = obj(j, "memory_per_gpu_GiB"), *by = obj(j, "bytes_per_iteration");
      g_assert_cmpfloat(num(c, "cp"), ==, cp);
      g_assert_cmpfloat(num(c, "dp"), ==, num(c, "gpus") / (num(c, "tp") * cp * num(c, "pp")));
      assert_rel(num(m, "activations"), num(m1, "activations") / cp, REL);
      g_assert_cmpfloat(num(m, "optimizer"), ==, num(m1, "optimizer"));
      g_assert_cmpfloat(num(m, "weights"), ==, num(m1, "weights"));
      assert_rel(num(by, "tp"), num(b1, "tp"), REL);
      assert_rel(num(by, "pp"), num(b1, "pp"), REL);
      double hop = 4 * num(c, "micro_batch") * (num(c, "seq_len") / cp) * num(c, "query_groups") *
                   num(c, "kv_channels") / num(c, "tp");
      double want = num(c, "layers") * num(c, "microbatches") * num(c, "dp") * num(c, "tp") * cp * hop * (3.0 * cp - 2);
      assert_rel(num(by, "cp"), want, REL);
      if (n == 0) {
        char *exact = g_strdup_printf("%s --exact", args);
        Proc a = run_line(args), b = run_line(exact);
        g_assert_cmpint(a.status, ==, 0);
        g_assert_cmpstr(a.out, ==, b.out);
        proc_clear(&a);
        proc_clear(&b);
        g_free(exact);
      }
      cJSON_Delete(j);
      g_free(args);
    }
    cJSON_Delete(one);
    g_free(base);
  }
  cJSON *ideal = run_json("run --layers 8 --hidden 1024 --heads 16 --seq-len 4096 --gpus 32 --tp 2 --pp 4 --cp 2 "
                          "--global-batch 32 --profile ideal --attention flash --network analytic --format json");
  assert_rel(num(ideal, "bubble_fraction"), num(ideal, "analytic_bubble_fraction"), 1e-9);
  cJSON_Delete(ideal);
  Proc p = run_line("run --model llama3-8b --seq-len 8192 --cluster dgx-h100-superpod --gpus 32 --tp 2 --pp 2 --cp 2 "
                    "--global-batch 16 --network analytic");
  g_assert_nonnull(strstr(p.out, "t 2 x cp 2 x p 2 x d 4"));
  g_assert_nonnull(strstr(p.out, "each GPU holds 4096 of every sequence's 8192 tokens"));
  g_assert_nonnull(strstr(p.out, "cp ring "));
  proc_clear(&p);
}

/* Why: --tp-comm-overlap pipelines the sequence-parallel all-gathers and
 * reduce-scatters with their GEMMs: the same bytes move, the same compute
 * runs, less of the communication is exposed and the iteration is shorter;
 * --overlap-param-gather moves the distributed optimizer's all-gather
 * behind the next forward: the same bytes, less time waiting for them.
 * Both agree with --exact. */
static void test_overlaps(void) {
  const char *base = "run --model llama3-8b --cluster dgx-h100-superpod --gpus 32 --tp 4 --pp 2 --global-batch 32 "
                     "--sequence-parallel --distributed-optimizer --ddp torch --recompute selective --network analytic "
                     "--format json";
  char *ov = g_strconcat(base, " --tp-comm-overlap", NULL), *pg = g_strconcat(base, " --overlap-param-gather", NULL);
  cJSON *a = run_json(base), *b = run_json(ov), *c = run_json(pg);
  g_assert_true(flag_of(obj(b, "config"), "tp_comm_overlap"));
  g_assert_true(flag_of(obj(c, "config"), "overlap_param_gather"));
  assert_rel(num(obj(b, "bytes_per_iteration"), "tp"), num(obj(a, "bytes_per_iteration"), "tp"), REL);
  /* the same compute, a little slower where it runs beside the pipelined
   * communication, whose kernels hold SMs (nccl.collective_channels) */
  g_assert_cmpfloat(num(obj(b, "step_effects_s"), "contention"), >, 0);
  g_assert_cmpfloat(num(obj(b, "time_breakdown_s"), "compute"), >=, num(obj(a, "time_breakdown_s"), "compute"));
  /* by at most the whole layer's slowdown beside a collective (about 13% here: models/layer.h) */
  g_assert_cmpfloat(num(obj(b, "time_breakdown_s"), "compute"), <=, 1.15 * num(obj(a, "time_breakdown_s"), "compute"));
  g_assert_cmpfloat(num(obj(b, "time_breakdown_s"), "tp_comm"), <, num(obj(a, "time_breakdown_s"), "tp_comm") / 2);
  g_assert_cmpfloat(num(b, "iteration_time_s"), <, num(a, "iteration_time_s"));
  g_assert_cmpfloat(num(obj(c, "bytes_per_iteration"), "dp"), ==, num(obj(a, "bytes_per_iteration"), "dp"));
  /* the wait for parameters moves to the iteration's start, where it fills the pipeline's warm-up */
  g_assert_cmpfloat(num(obj(c, "time_breakdown_s"), "dp_comm") + num(obj(c, "time_breakdown_s"), "bubble"), <,
                    num(obj(a, "time_breakdown_s"), "dp_comm") + num(obj(a, "time_breakdown_s"), "bubble"));
  g_assert_cmpfloat(num(c, "iteration_time_s"), <, num(a, "iteration_time_s"));
  const char *both[] = {ov, pg};
  for (guint i = 0; i < 2; i++) {
    char *exact = g_strconcat(both[i], " --exact", NULL);
    Proc x = run_line(both[i]), y = run_line(exact);
    g_assert_cmpstr(x.out, ==, y.out);
    proc_clear(&x);
    proc_clear(&y);
    g_free(exact);
  }
  cJSON_Delete(a);
  cJSON_Delete(b);
  cJSON_Delete(c);
  g_free(ov);
  g_free(pg);
}

/* Why: plan tries context parallelism for long sequences (each rank keeping
 * at least 4096 tokens) and pins it with --cp; rows say their cp and
 * reproduce with the command they print. */
static void test_plan_cp(void) {
  cJSON *j = run_json("plan --model llama3-8b --cluster dgx-h100-superpod --gpus 16 --global-batch 16 --seq-len 16384 "
                      "--tp 2 --pp 1 --format json --top 1000");
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(j, "rows"), *row;
  guint seen[SEARCH_MAX_CP + 1] = {0}, s = 16384;
  cJSON_ArrayForEach(row, rows) {
    guint cp = (guint)num(row, "cp");
    g_assert_cmpuint(cp, >=, 1);
    g_assert_cmpuint(cp, <=, SEARCH_MAX_CP);
    seen[cp]++;
    g_assert_cmpfloat(num(row, "gpus"), ==, num(row, "tp") * cp * num(row, "pp") * num(row, "dp"));
  }
  /* every size that cuts the sequence into 2 cp chunks with enough tokens per rank (16 GPUs allow up to 8),
   * and no other */
  for (guint cp = 1; cp <= SEARCH_MAX_CP; cp++) {
    gboolean tried = cp == 1 || (s % (2 * cp) == 0 && s / cp >= SEARCH_MIN_CP_TOKENS && 2 * cp <= 16);
    g_test_message("cp %u: %u rows", cp, seen[cp]);
    g_assert_true(tried ? seen[cp] > 0 : seen[cp] == 0);
  }
  cJSON_Delete(j);
  j = run_json("plan --model llama3-8b --cluster dgx-h100-superpod --gpus 16 --global-batch 16 --seq-len 16384 --cp 4 "
               "--format json");
  row = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "rows"), 0);
  g_assert_cmpfloat(num(row, "cp"), ==, 4);
  char *cmd = g_strconcat(str(row, "command") + strlen("ptdsim "), " --format json", NULL);
  cJSON *r = run_json(cmd);
  g_assert_cmpfloat(num(r, "iteration_time_s"), ==, num(row, "iteration_time_s"));
  cJSON_Delete(r);
  g_free(cmd);
  cJSON_Delete(j);
}


#define M8 "run --layers 8 --hidden 1024 --heads 16 --seq-len 512 --global-batch 16 --network analytic"
static const CliBadCase bad_cases[] = {
    {"groups-over-tp", M8 " --num-query-groups 2 --gpus 16 --tp 4 --pp 2", "--num-query-groups 2 does not split over --tp 4"},
    {"groups-not-dividing-heads", M8 " --num-query-groups 3 --gpus 8 --tp 1", "--num-query-groups 3 does not divide"},
    {"groups-over-heads", M8 " --num-query-groups 32 --gpus 8 --tp 1", "--num-query-groups 32"},
    {"ffn-over-tp", M8 " --ffn-hidden 1001 --gpus 8 --tp 2", "does not split over --tp 2"},
    {"unknown-norm", M8 " --gpus 8 --norm batchnorm", "unknown --norm 'batchnorm'"},
    {"unknown-position", M8 " --gpus 8 --position-embedding alibi", "unknown --position-embedding 'alibi'"},
    {"head-width", "run --layers 8 --hidden 1000 --heads 16 --gpus 8 --global-batch 8", "--kv-channels"},
    {"groups-zero", M8 " --num-query-groups 0 --gpus 8", "--num-query-groups"},
    {"distributed-optimizer-zero", M8 " --gpus 8 --tp 1 --pp 1 --zero 1 --distributed-optimizer", "drop it with --zero"},
    {"distributed-optimizer-terapipe", "run --model gpt3-1b --cluster aws-p3-16xlarge --gpus 8 --tp 1 --pp 8 --dp 1 "
     "--global-batch 8 --schedule terapipe --distributed-optimizer", "drop it with --schedule terapipe"},
    {"selective-zero", M8 " --gpus 8 --tp 1 --pp 1 --zero 2 --recompute selective", "use full or none with --zero"},
    {"selective-terapipe", "run --model gpt3-1b --cluster aws-p3-16xlarge --gpus 8 --tp 1 --pp 8 --dp 1 "
     "--global-batch 8 --schedule terapipe --recompute selective", "use full or none with --schedule terapipe"},
    {"recompute-unknown", M8 " --gpus 8 --recompute some", "use full, selective, none, op, layer or modules"},
    {"sp-without-tp", M8 " --gpus 8 --tp 1 --sequence-parallel", "use it with --tp 2 or more"},
    {"sp-zero", M8 " --gpus 8 --tp 1 --pp 1 --zero 1 --sequence-parallel", "for PTD-P: drop it"},
    {"sp-no-scatter-gather", M8 " --gpus 8 --tp 2 --sequence-parallel --no-scatter-gather",
     "--no-scatter-gather does not apply with --sequence-parallel"},
    {"flash-on-v100", "run --model gpt3-1b --cluster aws-p3-16xlarge --gpus 8 --tp 8 --global-batch 8 --attention "
     "flash", "--attention flash needs FlashAttention-2's figures for v100-sxm2-16gb"},
    {"attention-terapipe", "run --model gpt3-1b --cluster aws-p3-16xlarge --gpus 8 --tp 1 --pp 8 --dp 1 "
     "--global-batch 8 --schedule terapipe --attention flash", "does not apply to --schedule terapipe"},
    {"attention-unknown", M8 " --gpus 8 --attention sparse", "unknown --attention 'sparse'"},
    {"fp8-on-a100", "run --model gpt3-1b --gpus 8 --global-batch 8 --precision fp8",
     "--precision fp8 is not a precision of a100-sxm4-80gb's tensor cores (it runs fp16, bf16)"},
    {"bf16-on-v100", "run --model gpt3-1b --cluster aws-p3-16xlarge --gpus 8 --tp 8 --global-batch 8 --precision bf16",
     "--precision bf16 is not a precision of v100-sxm2-16gb"},
    {"fp8-zero", "run --model gpt3-1b --cluster dgx-h100-superpod --gpus 8 --tp 1 --pp 1 --global-batch 8 --zero 1 "
     "--precision fp8", "drop it with --zero"},
    {"precision-unknown", M8 " --gpus 8 --precision int4", "unknown --precision 'int4'"},
    {"llama-groups-over-tp", "run --model llama3-8b --gpus 16 --tp 16 --global-batch 16", "--num-query-groups 8"},
    {"cp-not-splitting-seq", M8 " --gpus 24 --cp 3 --attention flash", "--cp 3 cannot split --seq-len 512"},
    {"cp-gpus", M8 " --gpus 8 --tp 2 --cp 2 --dp 4 --attention flash", "--tp 2 x --cp 2 x --pp 1 x --dp 4 = 16"},
    {"cp-not-flash", M8 " --gpus 8 --cp 2", "--cp 2 runs ring attention on FlashAttention's kernels"},
    {"cp-zero", M8 " --gpus 8 --tp 1 --pp 1 --cp 2 --zero 1", "drop it with --zero"},
    {"tp-overlap-without-sp", M8 " --gpus 8 --tp 2 --tp-comm-overlap", "add --sequence-parallel"},
    {"param-gather-without-dopt", M8 " --gpus 8 --ddp torch --overlap-param-gather", "add --distributed-optimizer"},
    {"param-gather-local-ddp", M8 " --gpus 8 --distributed-optimizer --overlap-param-gather", "add --ddp torch"},
};

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  g_test_add_func("/stack/llama-run", test_llama_run);
  g_test_add_func("/stack/shape-options", test_shape_options);
  g_test_add_func("/stack/report-text", test_report_text);
  g_test_add_func("/stack/model-flops", test_model_flops);
  g_test_add_func("/stack/sc21-rule", test_sc21_rule);
  g_test_add_func("/stack/sc21-report-unchanged", test_sc21_report_unchanged);
  g_test_add_func("/stack/models-verb", test_models_verb);
  g_test_add_func("/stack/distributed-optimizer", test_distributed_optimizer);
  g_test_add_func("/stack/selective-recompute", test_selective_recompute);
  g_test_add_func("/stack/sequence-parallel", test_sequence_parallel);
  g_test_add_func("/stack/attention", test_attention);
  g_test_add_func("/stack/precision", test_precision);
  g_test_add_func("/stack/context-parallel", test_context_parallel);
  g_test_add_func("/stack/overlaps", test_overlaps);
  g_test_add_func("/stack/plan-cp", test_plan_cp);
  for (guint i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
    char *path = g_strdup_printf("/stack/bad/%s", bad_cases[i].name);
    g_test_add_data_func(path, &bad_cases[i], cli_test_bad);
    g_free(path);
  }
  return g_test_run();
}
