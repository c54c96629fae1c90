/* ptdsim — model files (models/modelfile.c): Hugging Face config.json files
 * against the built-in models of the same name, ptdsim's own model JSON
 * read back from what a run writes, and what a model file may not say. */
#include <string.h>

#include "../base/jsonutil.h"
#include "../models/modelfile.h"
#include "../traces/report.h"

/* Two shapes that ptdsim cannot tell apart: every value with its default
 * filled in (a file's head_dim of h/a is the shape without one). */
static void assert_same_shape(const ModelShape *a, const ModelShape *b) {
  g_assert_cmpuint(a->layers, ==, b->layers);
  g_assert_cmpuint(a->hidden, ==, b->hidden);
  g_assert_cmpuint(a->heads, ==, b->heads);
  g_assert_cmpuint(a->vocab, ==, b->vocab);
  g_assert_cmpuint(model_ffn(a), ==, model_ffn(b));
  g_assert_cmpuint(model_groups(a), ==, model_groups(b));
  g_assert_cmpuint(model_head_dim(a), ==, model_head_dim(b));
  g_assert_cmpint(a->mlp, ==, b->mlp);
  g_assert_cmpint(a->norm, ==, b->norm);
  g_assert_cmpint(a->position, ==, b->position);
  g_assert_cmpint(a->untied, ==, b->untied);
  g_assert_cmpint(a->no_bias, ==, b->no_bias);
  g_assert_cmpuint(a->experts, ==, b->experts);
  g_assert_cmpuint(a->topk, ==, b->topk);
  g_assert_cmpuint(model_moe_ffn(a), ==, model_moe_ffn(b));
  g_assert_cmpuint(a->shared_ffn, ==, b->shared_ffn);
  g_assert_cmpuint(MAX(a->moe_freq, 1u), ==, MAX(b->moe_freq, 1u));
  g_assert_cmpuint(a->first_dense, ==, b->first_dense);
  g_assert_cmpint(a->router_bias, ==, b->router_bias);
  g_assert_cmpint(a->qk_norm, ==, b->qk_norm);
  g_assert_cmpuint(a->q_lora, ==, b->q_lora);
  g_assert_cmpuint(a->kv_lora, ==, b->kv_lora);
  g_assert_cmpuint(a->rope_dim, ==, b->rope_dim);
  g_assert_cmpuint(a->v_dim, ==, b->v_dim);
  g_assert_cmpuint(a->mtp, ==, b->mtp);
  g_assert_cmpuint(model_param_count(a), ==, model_param_count(b));
  g_assert_cmpuint(model_active_param_count(a), ==, model_active_param_count(b));
}

/* The Hugging Face config.json of each family (fuzz/seeds/model/NAME.json)
 * and the built-in model NAME: the same shape, the same parameters; the
 * sequence length is the file's max_position_embeddings. */
static void test_hf_configs(void) {
  static const struct {
    const char *name;
    guint max_positions;
  } files[] = {{"llama3-8b", 8192},      {"llama3-70b", 131072},      {"llama3-405b", 131072},
               {"qwen3-30b-a3b", 40960}, {"qwen3-235b-a22b", 40960}, {"mixtral-8x7b", 32768},
               {"mixtral-8x22b", 65536}, {"deepseek-v3", 163840}};
  for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
    char *path = g_strdup_printf("%s/fuzz/seeds/model/%s.json", ptd_data_dir(), files[i].name);
    ModelShape file, named;
    GError *error = NULL;
    g_assert_true(model_file_read(path, &file, &error));
    g_assert_no_error(error);
    g_assert_true(model_lookup(files[i].name, &named));
    g_assert_cmpuint(file.seq_len, ==, files[i].max_positions);
    assert_same_shape(&file, &named);
    g_test_message("%s: %" G_GUINT64_FORMAT " parameters (%" G_GUINT64_FORMAT " active)", files[i].name,
                   model_param_count(&file), model_active_param_count(&file));
    g_free(path);
  }
}

/* What a run writes under "config" reads back as the model it ran, for
 * every built-in: as the run's whole JSON (config beside the layout) and
 * as the shape's keys alone; the norms and biases the config block does
 * not name (qk_norm, router_bias) come back from its parameter count. */
static void test_own_round_trip(void) {
  for (const char *const *n = model_names(); *n; n++) {
    ModelShape named, back;
    g_assert_true(model_lookup(*n, &named));
    cJSON *run = cJSON_CreateObject(), *cfg = cJSON_AddObjectToObject(run, "config");
    trace_shape_json(cfg, &named);
    cJSON_AddNumberToObject(cfg, "gpus", 8); /* the run's layout, which a model file ignores */
    GError *error = NULL;
    g_assert_true(model_file_from_json(run, "run.json", &back, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(back.seq_len, ==, named.seq_len);
    assert_same_shape(&back, &named);
    /* the shape's keys alone: a model file */
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "gpus");
    g_assert_true(model_file_from_json(cfg, "model.json", &back, &error));
    g_assert_no_error(error);
    assert_same_shape(&back, &named);
    cJSON_Delete(run);
  }
}

/* One line naming the file and what is wrong, for each kind of wrong. */
static void test_refusals(void) {
  static const struct {
    const char *json, *mention;
  } bad[] = {
      {"[1, 2]", "not a JSON object"},
      {"{\"hidden\": 1024, \"heads\": 16}", "key 'layers' is missing"},
      {"{\"layers\": 0, \"hidden\": 1024, \"heads\": 16}", "key 'layers' is 0, outside"},
      {"{\"layers\": 2.5, \"hidden\": 1024, \"heads\": 16}", "key 'layers' must be a whole number"},
      {"{\"layers\": 2, \"hidden\": 1024, \"heads\": 16, \"ffn_hiden\": 4096}", "key 'ffn_hiden' is not a model key"},
      {"{\"layers\": 2, \"hidden\": 1024, \"heads\": 16, \"mlp\": \"relu\"}", "key 'mlp' must be one of gelu, swiglu"},
      {"{\"layers\": 2, \"hidden\": 1024, \"heads\": 16, \"moe_topk\": 2}", "'experts' is not given"},
      {"{\"layers\": 2, \"hidden\": 1000, \"heads\": 16}", "not a multiple of the 16 attention heads"},
      {"{\"layers\": 2, \"hidden\": 1024, \"heads\": 16, \"query_groups\": 3}", "do not divide"},
      {"{\"layers\": 2, \"hidden\": 1024, \"heads\": 16, \"parameters\": 5}", "key 'parameters' is 5, but"},
      {"{\"layers\": 2, \"hidden\": 1024, \"heads\": 16, \"experts\": 4, \"moe_topk\": 5}", "between 1 and the 4"},
      {"{\"model_type\": \"gpt_oss\"}", "key 'model_type' is 'gpt_oss', not a family ptdsim reads"},
      {"{\"architectures\": [\"GPT2LMHeadModel\"]}", "not a class ptdsim reads"},
      {"{\"model_type\": \"llama\", \"architectures\": [\"MixtralForCausalLM\"]}", "with this model_type"},
      {"{\"model_type\": \"llama\", \"hidden_size\": 64}", "key 'num_hidden_layers' is missing"},
      {"{\"layers\": 100000, \"hidden\": 1048576, \"heads\": 16, \"experts\": 1048576, \"moe_topk\": 1, "
       "\"moe_ffn_hidden\": 16777216}",
       "more than 1e+17 parameters"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    GError *error = NULL;
    cJSON *j = cJSON_Parse(bad[i].json);
    g_assert_nonnull(j);
    ModelShape m;
    g_assert_false(model_file_from_json(j, "m.json", &m, &error));
    g_assert_nonnull(error);
    if (!strstr(error->message, bad[i].mention) || !g_str_has_prefix(error->message, "m.json: "))
      g_error("case %u: '%s' does not say '%s'", i, error->message, bad[i].mention);
    g_assert_null(strchr(error->message, '\n'));
    g_error_free(error);
    cJSON_Delete(j);
  }
}

/* The Hugging Face fields ptdsim cannot model change the shape: each is
 * refused on the real file it would change, never dropped. */
static void test_hf_refusals(void) {
  static const struct {
    const char *file, *key, *value, *mention;
  } bad[] = {
      {"llama3-8b", "hidden_act", "\"gelu\"", "key 'hidden_act' is not \"silu\""},
      {"llama3-8b", "attention_bias", "true", "key 'attention_bias' is true while the MLP's layers have no biases"},
      {"mixtral-8x7b", "sliding_window", "4096", "key 'sliding_window' is set"},
      {"qwen3-30b-a3b", "use_sliding_window", "true", "key 'use_sliding_window' is true"},
      {"qwen3-30b-a3b", "decoder_sparse_step", "2", "key 'decoder_sparse_step' is 2"},
      {"qwen3-30b-a3b", "mlp_only_layers", "[1, 5]", "key 'mlp_only_layers' is not the layers 0, 1"},
      {"qwen3-30b-a3b", "layer_types", "[\"sliding_attention\"]", "key 'layer_types' names a layer"},
      {"qwen3-30b-a3b", "num_experts_per_tok", "129", "between 1 and the 128 experts"},
      {"deepseek-v3", "kv_lora_rank", "-1", "key 'kv_lora_rank' is -1, outside"},
      {"deepseek-v3", "first_k_dense_replace", "61", "no layer is a mixture-of-experts layer"},
      {"llama3-70b", "num_key_value_heads", "7", "the 7 key/value heads do not divide the 64"},
      {"llama3-8b", "num_attention_heads", "8192", "key 'num_attention_heads' is more than hidden_size"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    char *path = g_strdup_printf("%s/fuzz/seeds/model/%s.json", ptd_data_dir(), bad[i].file);
    GError *error = NULL;
    cJSON *j = ptd_json_load(path, &error);
    g_assert_no_error(error);
    cJSON_DeleteItemFromObjectCaseSensitive(j, bad[i].key);
    cJSON_AddItemToObject(j, bad[i].key, cJSON_Parse(bad[i].value));
    ModelShape m;
    g_assert_false(model_file_from_json(j, "hf.json", &m, &error));
    if (!strstr(error->message, bad[i].mention))
      g_error("case %u: '%s' does not say '%s'", i, error->message, bad[i].mention);
    g_error_free(error);
    cJSON_Delete(j);
    g_free(path);
  }
}

/* A Qwen3 dense config: the Llama shape with qk-norm and Qwen3's default
 * head dimension, 128, where the file gives none. */
static void test_qwen3_dense(void) {
  cJSON *j = cJSON_Parse("{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"hidden_size\": "
                         "1024, \"intermediate_size\": 3072, \"num_hidden_layers\": 28, \"num_attention_heads\": 16, "
                         "\"num_key_value_heads\": 8, \"vocab_size\": 151936, \"max_position_embeddings\": 40960, "
                         "\"tie_word_embeddings\": true}");
  ModelShape m;
  GError *error = NULL;
  g_assert_true(model_file_from_json(j, "qwen3.json", &m, &error));
  g_assert_no_error(error);
  g_assert_true(m.qk_norm);
  g_assert_false(m.untied);
  g_assert_cmpuint(model_head_dim(&m), ==, 128);
  g_assert_cmpuint(model_groups(&m), ==, 8);
  g_assert_false(model_is_moe(&m));
  /* h (q + 2 kv) + q h, 3 h f, 2 norms and the two head norms of d; the
   * tied embedding and the final norm */
  guint64 h = 1024, q = 16 * 128, kv = 8 * 128, f = 3072;
  guint64 layer = h * (q + 2 * kv) + q * h + 3 * h * f + 2 * h + 2 * 128;
  g_assert_cmpuint(model_param_count(&m), ==, 28 * layer + 151936 * h + h);
  cJSON_Delete(j);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/modelfile/hf-configs-are-the-built-ins", test_hf_configs);
  g_test_add_func("/modelfile/own-round-trip", test_own_round_trip);
  g_test_add_func("/modelfile/refusals", test_refusals);
  g_test_add_func("/modelfile/hf-refusals", test_hf_refusals);
  g_test_add_func("/modelfile/qwen3-dense", test_qwen3_dense);
  return g_test_run();
}
