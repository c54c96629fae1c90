/* ptdsim — the user's own files and names, end to end through the real
 * binary: a model from a Hugging Face config.json or ptdsim's model JSON;
 * Megatron-LM's option names; torchtitan's local batch. */
#include <string.h>

#include "../search/options.h"
#include "cli_harness.h"
#include "test_tmp.h"

static char *dir;

/* The whole JSON of a run, as text (asserted to succeed). */
static char *run_text(const char *args) {
  Proc p = run_line(args);
  if (p.status != 0)
    g_error("ptdsim %s failed: %s", args, p.err);
  char *out = g_strdup(p.out);
  proc_clear(&p);
  return out;
}

/* Each family's real config.json runs exactly as the built-in model of that
 * name: the same JSON, byte for byte (parameters, iteration, memory), with
 * the built-in's sequence length given (the file's default is its
 * max_position_embeddings). */
static void test_hf_same_run(void) {
  static const struct {
    const char *name, *seq, *layout;
  } cases[] = {
      {"llama3-8b", "8192", "--gpus 8 --tp 8"},
      {"llama3-70b", "8192", "--gpus 8 --tp 8"},
      {"llama3-405b", "8192", "--gpus 16 --tp 8 --pp 2"},
      {"qwen3-30b-a3b", "4096", "--gpus 8 --ep 8"},
      {"qwen3-235b-a22b", "4096", "--gpus 16 --ep 8 --pp 2"},
      {"mixtral-8x7b", "4096", "--gpus 8 --ep 8"},
      {"mixtral-8x22b", "4096", "--gpus 16 --ep 8 --tp 2 --sequence-parallel"},
      {"deepseek-v3", "4096", "--gpus 8 --ep 8"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    char *file = data_file("fuzz/seeds/model");
    char *a = g_strdup_printf("run --model %s %s --global-batch 16 --allow-oom --format json", cases[i].name,
                              cases[i].layout);
    char *b = g_strdup_printf("run --model %s/%s.json --seq-len %s %s --global-batch 16 --allow-oom --format json",
                              file, cases[i].name, cases[i].seq, cases[i].layout);
    char *ta = run_text(a), *tb = run_text(b);
    g_assert_nonnull(strstr(ta, "\"parameters\""));
    if (strcmp(ta, tb) != 0)
      g_error("%s: the config.json's run differs from the built-in's", cases[i].name);
    g_free(ta);
    g_free(tb);
    g_free(a);
    g_free(b);
    g_free(file);
  }
}

/* Without --seq-len the file's max_position_embeddings is the sequence
 * length; --seq-len and the other shape options override the file. */
static void test_hf_defaults_and_overrides(void) {
  char *file = data_file("fuzz/seeds/model/llama3-70b.json");
  char *args = g_strdup_printf("run --model %s --gpus 8 --tp 8 --global-batch 8 --allow-oom --format json", file);
  cJSON *j = run_json(args);
  g_assert_cmpfloat(num(obj(j, "config"), "seq_len"), ==, 131072);
  cJSON_Delete(j);
  g_free(args);
  args = g_strdup_printf("run --model %s --layers 40 --seq-len 2048 --gpus 8 --tp 8 --global-batch 8 --format json",
                         file);
  j = run_json(args);
  g_assert_cmpfloat(num(obj(j, "config"), "seq_len"), ==, 2048);
  g_assert_cmpfloat(num(obj(j, "config"), "layers"), ==, 40);
  cJSON_Delete(j);
  g_free(args);
  g_free(file);
}

/* A run's own JSON is a model file: fed back as --model, as a whole or as
 * its config block alone, it runs the same model (Qwen3's qk-norm and
 * DeepSeek-V3's router bias and dense prefix included). */
static void test_own_round_trip(void) {
  static const struct {
    const char *name, *layout;
  } models[] = {{"gpt3-1b", "--tp 8"}, {"llama3-8b", "--tp 8"}, {"qwen3-30b-a3b", "--ep 8"}, {"deepseek-v3", "--ep 8"}};
  for (guint i = 0; i < G_N_ELEMENTS(models); i++) {
    char *args = g_strdup_printf("run --model %s --gpus 8 %s --global-batch 16 --allow-oom --format json",
                                 models[i].name, models[i].layout);
    char *first = run_text(args);
    char *whole = g_build_filename(dir, "run.json", NULL), *block = g_build_filename(dir, "model.json", NULL);
    write_bytes(whole, first, -1);
    cJSON *j = cJSON_Parse(first), *cfg = cJSON_DetachItemFromObjectCaseSensitive(j, "config");
    /* the config block's shape keys alone (the layout's keys are not a model's) */
    cJSON *shape = cJSON_CreateObject(), *c;
    static const char *const keys[] = {"layers", "hidden", "heads", "seq_len", "vocab", "ffn_hidden", "query_groups",
                                       "kv_channels", "mlp", "norm", "position_embedding", "tied_embeddings",
                                       "linear_bias", "parameters", "active_parameters", "experts", "moe_topk",
                                       "moe_ffn_hidden", "moe_shared_ffn_hidden", "moe_layers", "q_lora_rank",
                                       "kv_lora_rank", "qk_rope_head_dim", "v_head_dim", "mtp_layers"};
    for (guint k = 0; k < G_N_ELEMENTS(keys); k++)
      if ((c = cJSON_GetObjectItemCaseSensitive(cfg, keys[k])))
        cJSON_AddItemToObject(shape, keys[k], cJSON_Duplicate(c, TRUE));
    char *text = cJSON_Print(shape);
    write_bytes(block, text, -1);
    for (guint form = 0; form < 2; form++) {
      char *again = g_strdup_printf("run --model %s --gpus 8 %s --global-batch 16 --allow-oom --format json",
                                    form ? block : whole, models[i].layout);
      char *second = run_text(again);
      if (strcmp(first, second) != 0)
        g_error("%s: its run's JSON as --model (%s) runs another model", models[i].name, form ? "config block" : "whole");
      g_free(second);
      g_free(again);
    }
    cJSON_free(text);
    cJSON_Delete(shape);
    cJSON_Delete(cfg);
    cJSON_Delete(j);
    g_free(whole);
    g_free(block);
    g_free(first);
    g_free(args);
  }
}

/* A bad model file is refused in one line naming it, exit 1, nothing on
 * stdout: not JSON, a missing field, a value out of range, an unknown
 * family; and in plan and sweep as in run. */
static void test_bad_files(void) {
  static const struct {
    const char *name, *text, *mention;
  } files[] = {
      {"notjson.json", "{\"layers\": 2,", "notjson.json"},
      {"missing.json", "{\"layers\": 2, \"hidden\": 1024}", "key 'heads' is missing"},
      {"range.json", "{\"layers\": 2, \"hidden\": 1024, \"heads\": 16, \"seq_len\": 0}", "key 'seq_len' is 0, outside"},
      {"family.json", "{\"model_type\": \"gpt_oss\", \"architectures\": [\"GptOssForCausalLM\"]}",
       "'gpt_oss', not a family ptdsim reads"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
    char *path = g_build_filename(dir, files[i].name, NULL);
    write_bytes(path, files[i].text, -1);
    const char *verbs[] = {"run --gpus 8 --global-batch 8", "plan --gpus 8 --global-batch 8",
                           "sweep --gpus 8 --global-batch 8 --tp 1,2"};
    for (guint v = 0; v < G_N_ELEMENTS(verbs); v++) {
      char *args = g_strdup_printf("%s --model %s", verbs[v], path);
      Proc p = run_line(args);
      assert_one_line_error(&p, files[i].mention);
      proc_clear(&p);
      g_free(args);
    }
    g_free(path);
  }
  /* a path that is not there, and a name that is not a built-in */
  Proc p = run_line("run --gpus 8 --global-batch 8 --model ./nowhere.json");
  assert_one_line_error(&p, "nowhere.json");
  proc_clear(&p);
  p = run_line("run --gpus 8 --global-batch 8 --model llama9");
  assert_one_line_error(&p, "unknown --model 'llama9'");
  g_assert_null(strstr(p.err, "./llama9"));
  proc_clear(&p);
  /* a name is a built-in's even where a file of that name is at hand: the
   * refusal says how to name the file */
  p = run_sh_in(dir, "cd \"$T\" && cp missing.json llama9 && \"$PTDSIM_BIN\" run --gpus 8 --global-batch 8 "
                     "--model llama9; rc=$?; rm -f llama9; exit $rc",
                30);
  assert_one_line_error(&p, "(for the file of that name, write ./llama9)");
  proc_clear(&p);
}

/* sweep takes model files among its values, beside built-in names. */
static void test_sweep_files(void) {
  char *file = data_file("fuzz/seeds/model/llama3-8b.json");
  char *args = g_strdup_printf("sweep --model llama3-8b,%s --seq-len 8192 --gpus 8 --tp 8 --global-batch 8 "
                               "--format jsonl",
                               file);
  Proc p = run_line(args);
  g_assert_cmpint(p.status, ==, 0);
  char **lines = g_strsplit(p.out, "\n", -1);
  guint rows = 0;
  double params[2] = {0, 0};
  for (char **l = lines; *l; l++) {
    cJSON *j = cJSON_Parse(*l);
    const cJSON *res = j ? cJSON_GetObjectItemCaseSensitive(j, "result") : NULL;
    const cJSON *cfg = res ? cJSON_GetObjectItemCaseSensitive(res, "config") : NULL;
    if (cfg && rows < 2)
      params[rows++] = num(cfg, "parameters");
    cJSON_Delete(j);
  }
  g_assert_cmpuint(rows, ==, 2);
  g_assert_cmpfloat(params[0], ==, params[1]);
  g_strfreev(lines);
  proc_clear(&p);
  g_free(args);
  g_free(file);
}


/* Each of Megatron-LM's names runs exactly as ptdsim's own: the same JSON,
 * byte for byte.  Every alias has its case here (a new alias without one
 * fails). */
static void test_alias_same_run(void) {
  static const char *const dense = "run --model gpt3-1b --gpus 8 --allow-oom --format json";
  static const char *const moe =
      "run --model mixtral-8x7b --layers 4 --seq-len 1024 --gpus 8 --allow-oom --format json";
  static const struct {
    const char *alias, *base, *rest, *own, *theirs;
  } cases[] = {
      {"tensor-model-parallel-size", NULL, NULL, "--tp 2", "--tensor-model-parallel-size 2"},
      {"pipeline-model-parallel-size", NULL, NULL, "--pp 2", "--pipeline-model-parallel-size 2"},
      {"context-parallel-size", NULL, "--attention flash", "--cp 2", "--context-parallel-size 2"},
      {"expert-model-parallel-size", moe, NULL, "--ep 8", "--expert-model-parallel-size 8"},
      {"expert-tensor-parallel-size", moe, "--ep 4", "--expert-tp 2", "--expert-tensor-parallel-size 2"},
      {"num-layers", NULL, NULL, "--layers 12", "--num-layers 12"},
      {"hidden-size", NULL, NULL, "--hidden 1024", "--hidden-size 1024"},
      {"num-attention-heads", NULL, NULL, "--heads 8", "--num-attention-heads 8"},
      {"ffn-hidden-size", NULL, NULL, "--ffn-hidden 4096", "--ffn-hidden-size 4096"},
      {"seq-length", NULL, NULL, "--seq-len 1024", "--seq-length 1024"},
      {"untie-embeddings-and-output-weights", NULL, NULL, "--untie-embeddings", "--untie-embeddings-and-output-weights"},
      {"disable-bias-linear", NULL, NULL, "--no-bias", "--disable-bias-linear"},
      {"global-batch-size", NULL, NULL, "--global-batch 32", "--global-batch-size 32"},
      {"micro-batch-size", NULL, NULL, "--micro-batch 2", "--micro-batch-size 2"},
      {"num-layers-per-virtual-pipeline-stage", NULL, "--pp 2", "--layers-per-chunk 3",
       "--num-layers-per-virtual-pipeline-stage 3"},
      {"num-virtual-stages-per-pipeline-rank", NULL, "--pp 2", "--chunks 2", "--num-virtual-stages-per-pipeline-rank 2"},
      {"decoder-first-pipeline-num-layers", NULL, "--pp 2", "--first-stage-layers 10",
       "--decoder-first-pipeline-num-layers 10"},
      {"decoder-last-pipeline-num-layers", NULL, "--pp 2", "--last-stage-layers 10",
       "--decoder-last-pipeline-num-layers 10"},
      {"account-for-embedding-in-pipeline-split", NULL, "--pp 2 --account-for-loss", "--account-for-embedding",
       "--account-for-embedding-in-pipeline-split"},
      {"account-for-loss-in-pipeline-split", NULL, "--pp 2 --account-for-embedding", "--account-for-loss",
       "--account-for-loss-in-pipeline-split"},
      {"fp8-format", NULL, "--profile h100-sxm5-80gb", "--precision fp8", "--fp8-format hybrid"},
      {"use-distributed-optimizer", NULL, NULL, "--distributed-optimizer", "--use-distributed-optimizer"},
      {"moe-token-dispatcher-type", moe, "--ep 8", "--moe-token-dispatcher allgather",
       "--moe-token-dispatcher-type allgather"},
  };
  for (const SearchAlias *a = search_aliases(); a->name; a++) {
    gboolean found = FALSE;
    for (guint i = 0; i < G_N_ELEMENTS(cases) && !found; i++)
      found = strcmp(cases[i].alias, a->name) == 0;
    if (!found)
      g_error("--%s has no case here", a->name);
  }
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    const char *batch = strstr(cases[i].own, "--global-batch") ? "" : "--global-batch 16";
    const char *base = cases[i].base ? cases[i].base : dense, *rest = cases[i].rest ? cases[i].rest : "";
    char *a = g_strjoin(" ", base, batch, rest, cases[i].own, NULL);
    char *b = g_strjoin(" ", base, batch, rest, cases[i].theirs, NULL);
    for (char *line = a; line; line = line == a ? b : NULL) { /* run_line splits on each space */
      char *two;
      while ((two = strstr(line, "  ")))
        memmove(two, two + 1, strlen(two));
    }
    char *ta = run_text(a), *tb = run_text(b);
    if (strcmp(ta, tb) != 0)
      g_error("--%s runs otherwise than %s", cases[i].alias, cases[i].own);
    g_free(ta);
    g_free(tb);
    g_free(a);
    g_free(b);
  }
}

#define SMALL "run --model gpt3-1b --gpus 8 --global-batch 16"
/* An option under both names is given twice; a name near an alias is
 * suggested the alias; an alias's words are its tool's. */
static const CliBadCase alias_bad[] = {
    {"alias-and-name", SMALL " --tp 2 --tensor-model-parallel-size 2",
     "--tp is given twice, as --tp and --tensor-model-parallel-size"},
    {"name-and-alias", SMALL " --num-layers 8 --layers 8", "--layers is given twice, as --num-layers and --layers"},
    {"alias-twice", SMALL " --seq-length 8 --seq-length 8", "--seq-len is given twice;"},
    {"fp8-format-and-precision", SMALL " --fp8-format e4m3 --precision bf16", "--precision is given twice"},
    {"suggests-alias", SMALL " --tensor-parallel-size 2", "did you mean --tensor-model-parallel-size?"},
    {"suggests-alias-prefix", SMALL " --fp8", "did you mean --fp8-format?"},
    {"suggests-alias-typo", SMALL " --num-atention-heads 8", "did you mean --num-attention-heads?"},
    {"fp8-format-word", SMALL " --fp8-format e5m2", "unknown --fp8-format 'e5m2'; use e4m3 or hybrid"},
    {"sweep-alias-and-name", "sweep --model gpt3-1b --gpus 8 --global-batch 16 --tp 1,2 --tensor-model-parallel-size 4",
     "--tp is given twice"},
    {"local-and-global", SMALL " --local-batch 2", "--local-batch and --global-batch are both given"},
    {"local-not-whole", "run --model gpt3-1b --gpus 8 --tp 3 --local-batch 2", "not a multiple of tp x pp x cp = 3"},
    {"local-in-plan", "plan --model gpt3-1b --gpus 8 --local-batch 2", "plan searches"},
};

/* torchtitan's local batch: the global batch is it times the
 * data-parallel size, the GPUs over tp x pp x cp, or --dp. */
static void test_local_batch(void) {
  char *a = run_text("run --model gpt3-1b --gpus 16 --tp 2 --pp 2 --global-batch 12 --allow-oom --format json");
  char *b = run_text("run --model gpt3-1b --gpus 16 --tp 2 --pp 2 --local-batch 3 --allow-oom --format json");
  g_assert_cmpstr(a, ==, b);
  g_free(a);
  g_free(b);
  a = run_text("run --model gpt3-1b --gpus 16 --cp 2 --attention flash --global-batch 16 --allow-oom --format json");
  b = run_text("run --model gpt3-1b --gpus 16 --cp 2 --attention flash --local-batch 2 --allow-oom --format json");
  g_assert_cmpstr(a, ==, b);
  g_free(a);
  g_free(b);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 77;
  dir = test_tmp_dir("ptdsim-userlang");
  g_test_add_func("/userlang/hf-same-run", test_hf_same_run);
  g_test_add_func("/userlang/hf-defaults-and-overrides", test_hf_defaults_and_overrides);
  g_test_add_func("/userlang/own-round-trip", test_own_round_trip);
  g_test_add_func("/userlang/bad-model-files", test_bad_files);
  g_test_add_func("/userlang/sweep-model-files", test_sweep_files);
  g_test_add_func("/userlang/alias-same-run", test_alias_same_run);
  for (guint i = 0; i < G_N_ELEMENTS(alias_bad); i++) {
    char *path = g_strdup_printf("/userlang/bad/%s", alias_bad[i].name);
    g_test_add_data_func(path, &alias_bad[i], cli_test_bad);
    g_free(path);
  }
  g_test_add_func("/userlang/local-batch", test_local_batch);
  int rc = g_test_run();
  test_rm_rf(dir);
  g_free(dir);
  return rc;
}
