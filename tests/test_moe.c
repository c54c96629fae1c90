/* Mixture of experts: the built-in MoE models' parameter counts against
 * their released checkpoints, FLOPs with top-k routing, the all-to-all's
 * bytes, Megatron-Core's folded rank layout, the MoE memory formulas. */
#include <glib.h>
#include <math.h>

#include "../models/moe.h"
#include "../models/transformer.h"

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

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/moe/checkpoint-counts", test_checkpoint_counts);
  g_test_add_func("/moe/mla-params", test_mla_params);
  g_test_add_func("/moe/flops", test_moe_flops);
  return g_test_run();
}
