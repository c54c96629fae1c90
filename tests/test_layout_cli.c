/* End-to-end tests of --pipeline-model-parallel-layout through the real
 * binary: the split options are shorthands for layouts (the layout a split
 * prints runs the same simulation), every schedule takes a layout with
 * chunks of the embedding or the loss alone and its shortcut agrees with
 * --exact, the Zero Bubble paper's and the Llama 3 paper's layouts run, a
 * standalone MTP module sits where the layout puts it, plan and sweep carry
 * the layout, a trace reads back, and bad layouts get one line.
 *
 * No timing is pasted from an output: the reference is always another run.
 */
#include <glib/gstdio.h>
#include <string.h>

#include "cli_harness.h"
#include "test_tmp.h"

static char *tmpdir;

#define L8 "run --model llama3-8b --cluster dgx-h100-superpod --gpus 64 --tp 2 --pp 4 --global-batch 128 --format json"
#define OPT " --pipeline-model-parallel-layout "

/* The layers_per_stage array of a run's config, summed (asserted present). */
static guint layers_sum(const cJSON *run, guint *n) {
  const cJSON *x;
  guint sum = 0;
  *n = 0;
  cJSON_ArrayForEach(x, arr(obj(run, "config"), "layers_per_stage")) {
    sum += (guint)x->valuedouble;
    (*n)++;
  }
  return sum;
}

/* Why: the split options are shorthands: the layout a split's run prints
 * (config.pipeline_layout), given instead, is the same run to the byte. */
static void test_shorthands(void) {
  static const char *const splits[] = {
      L8 " --first-stage-layers 7 --last-stage-layers 7",
      L8 " --first-stage-layers 5",
      "run --model llama3-8b --layers 30 --cluster dgx-h100-superpod --gpus 64 --tp 2 --pp 4 --global-batch 128 "
      "--format json --account-for-embedding --account-for-loss --chunks 2",
      L8 " --account-for-loss --schedule zb-h1 --layers 31",
  };
  for (guint i = 0; i < G_N_ELEMENTS(splits); i++) {
    cJSON *a = run_json(splits[i]);
    const char *layout = str(obj(a, "config"), "pipeline_layout");
    /* the same command without its split options, with the layout */
    GString *cmd = g_string_new(NULL);
    char **words = g_strsplit(splits[i], " ", -1);
    for (guint w = 0; words[w]; w++) {
      if (g_str_has_prefix(words[w], "--first-stage") || g_str_has_prefix(words[w], "--last-stage") ||
          g_str_has_prefix(words[w], "--account-for") || strcmp(words[w], "--chunks") == 0) {
        if (!g_str_has_prefix(words[w], "--account-for"))
          w++; /* its value */
        continue;
      }
      g_string_append_printf(cmd, "%s%s", cmd->len ? " " : "", words[w]);
    }
    g_string_append_printf(cmd, OPT "%s", layout);
    cJSON *b = run_json(cmd->str);
    if (!cJSON_Compare(a, b, TRUE))
      g_error("'%s' and '%s' differ", splits[i], cmd->str);
    g_strfreev(words);
    g_string_free(cmd, TRUE);
    cJSON_Delete(a);
    cJSON_Delete(b);
  }
}

/* Why: an even layout written out is the even split: the same run as none
 * given but for the layout it reports. */
static void test_even(void) {
  cJSON *a = run_json(L8);
  cJSON *b = run_json(L8 OPT "Et*8|t*8|t*8|t*8L");
  g_assert_cmpstr(str(obj(b, "config"), "pipeline_layout"), ==, "Et*8|t*8|t*8|t*8L");
  cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(b, "config"), "pipeline_layout");
  g_assert_true(cJSON_Compare(a, b, TRUE));
  cJSON_Delete(a);
  cJSON_Delete(b);
}

typedef struct {
  const char *schedule, *layout, *extra;
  guint p, layers;
} SchedCase;

/* Why: every schedule takes a layout, chunks holding only the embedding
 * or only the loss included (the Zero Bubble paper's layouts: 1F1B-I with
 * one layer a chunk, ZB-V; DualPipe on an uneven split), and the
 * simulation's shortcuts agree with every op simulated. */
static void test_schedules(void) {
  static const SchedCase cases[] = {
      {"1f1b", "E|t*16|t*16|L", "", 4, 32},
      {"gpipe", "E|t*16|t*16|L", "", 4, 32},
      {"zb-h1", "E|t*16|t*16|L", "", 4, 32},
      {"zb-h2", "E|t*16|t*16|L", "", 4, 32},
      {"zb-2p", "E|t*16|t*16|L", "", 4, 32},
      {"interleaved", "E|(t*5|)*6,t*2L", "", 4, 32},
      {"interleaved-zb", "E|(t*5|)*6,t*2L", "", 4, 32},
      {"zb-v", "E|(t*5|)*6,t*2L", "", 4, 32},
      {"dualpipev", "E|(t*5|)*6,t*2L", "", 4, 32},
      {"dualpipe", "Et*7|t*9|t*9|t*7L", "", 4, 64}, /* each rank holds two pieces: the model twice */
      /* the Zero Bubble paper: one layer a chunk, the embedding and the loss chunks of their own */
      {"interleaved", "E|(t|)*14,L", " --layers 14", 4, 14},
      {"zb-v", "E|(t|)*6,L", " --layers 6", 4, 6},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    const SchedCase *c = &cases[i];
    char *cmd = g_strdup_printf(L8 " --schedule %s" OPT "%s%s", c->schedule, c->layout, c->extra);
    char *exact = g_strdup_printf("%s --exact", cmd);
    cJSON *a = run_json(cmd), *b = run_json(exact);
    guint n, sum = layers_sum(a, &n);
    if (sum != c->layers)
      g_error("%s: %u layers on the stages, not %u", cmd, sum, c->layers);
    g_assert_cmpuint(n, ==, c->p);
    g_assert_cmpfloat(num(a, "iteration_time_s"), >, 0);
    if (num(a, "iteration_time_s") != num(b, "iteration_time_s"))
      g_error("%s: %.9f s, --exact %.9f s", cmd, num(a, "iteration_time_s"), num(b, "iteration_time_s"));
    g_assert_cmpstr(str(obj(a, "config"), "pipeline_layout"), ==, c->layout);
    cJSON_Delete(a);
    cJSON_Delete(b);
    g_free(exact);
    g_free(cmd);
  }
}

/* Why: a layout moves work: DualPipe's rank s holds pieces s and p-1-s, so
 * an uneven layout that gives the end pieces fewer layers evens the ranks'
 * memory out against the even split, whose stage 0 carries the embedding
 * and the logits too. */
static void test_dualpipe_balance(void) {
  cJSON *even = run_json(L8 " --schedule dualpipe");
  cJSON *uneven = run_json(L8 " --schedule dualpipe" OPT "Et*7|t*9|t*9|t*7L");
  double me = num(obj(even, "memory_per_gpu_GiB"), "total"), mu = num(obj(uneven, "memory_per_gpu_GiB"), "total");
  g_assert_cmpfloat(num(obj(even, "memory_per_gpu_GiB"), "stage"), ==, 0);
  g_assert_cmpfloat(mu, <, me);
  guint n;
  layers_sum(uneven, &n);
  const cJSON *per = arr(obj(uneven, "config"), "layers_per_stage");
  for (guint s = 0; s < n; s++) /* 7 + 7 on the ends' rank, 9 + 9 inside */
    g_assert_cmpfloat(cJSON_GetArrayItem(per, (int)s)->valuedouble, ==, s == 0 || s == 3 ? 14 : 18);
  cJSON_Delete(even);
  cJSON_Delete(uneven);
}

/* Why: the Llama 3 paper's 405B split, 126 layers on 16 stages, one fewer
 * on the first and the last, interleaved: seven on the end stages, eight
 * on the rest. */
static void test_llama3_126(void) {
  cJSON *a = run_json("run --model llama3-405b --cluster dgx-h100-superpod --gpus 2048 --tp 8 --pp 16 "
                      "--global-batch 512 --sequence-parallel --distributed-optimizer --network analytic --allow-oom "
                      "--format json" OPT "Et*3|(t*4|)*30,t*3L");
  const cJSON *per = arr(obj(a, "config"), "layers_per_stage");
  for (int s = 0; s < 16; s++)
    g_assert_cmpfloat(cJSON_GetArrayItem(per, s)->valuedouble, ==, s == 0 || s == 15 ? 7 : 8);
  g_assert_cmpfloat(num(obj(a, "config"), "chunks"), ==, 2);
  g_assert_cmpstr(str(obj(a, "config"), "schedule"), ==, "interleaved");
  cJSON_Delete(a);
}

/* Why: Megatron-Core's standalone MTP: the module runs, and its parameters
 * live, in the virtual stage the layout gives it (here stage 2's last chunk,
 * which then needs the most memory), not with the loss. */
static void test_mtp(void) {
#define DS "run --model deepseek-v3 --cluster h800-cluster --layers 8 --gpus 64 --tp 1 --pp 4 --ep 16 --global-batch 64 " \
           "--network analytic --format json"
  cJSON *own = run_json(DS OPT "Et|tt|tt|t|t|t|m|L");
  cJSON *with = run_json(DS OPT "Et|tt|tt|t|t|t||mL");
  g_assert_cmpfloat(num(obj(own, "memory_per_gpu_GiB"), "stage"), ==, 2);
  g_assert_cmpfloat(num(obj(with, "memory_per_gpu_GiB"), "stage"), !=, 2);
  g_assert_cmpfloat(num(own, "iteration_time_s"), !=, num(with, "iteration_time_s"));
  cJSON_Delete(own);
  cJSON_Delete(with);
}

/* Why: plan keeps a given layout (its rows' commands carry it and run),
 * a sweep takes several separated by ';', and a trace reads back. */
static void test_plan_sweep_trace(void) {
  Proc p = run_line("plan --model llama3-8b --cluster dgx-h100-superpod --gpus 64 --global-batch 128 --top 3" OPT
                    "Et*7|(t*9|)*2,t*7L");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "--pipeline-model-parallel-layout 'Et*7|(t*9|)*2,t*7L'"));
  proc_clear(&p);

  char *csv = g_build_filename(tmpdir, "layouts.csv", NULL);
  char *cmd = g_strdup_printf("sweep --model llama3-8b --cluster dgx-h100-superpod --gpus 64 --tp 2 --pp 4 "
                              "--global-batch 128" OPT "Et*7|(t*9|)*2,t*7L;Et*8|t*8|t*8|t*8L -o %s",
                              csv);
  p = run_line(cmd);
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.err, "2 of 2 rows: 2 ok"));
  proc_clear(&p);
  g_unlink(csv);
  g_free(cmd);
  g_free(csv);

  char *trace = g_build_filename(tmpdir, "layout.json.gz", NULL);
  cmd = g_strdup_printf("run --layers 10 --hidden 1024 --heads 16 --seq-len 512 --gpus 8 --tp 2 --pp 4 "
                        "--global-batch 8" OPT "E|t*5|t*5|L --trace %s",
                        trace);
  Proc a = run_line(cmd);
  g_assert_cmpint(a.status, ==, 0);
  g_assert_nonnull(strstr(a.out, "layout E|t*5|t*5|L (Megatron-Core's --pipeline-model-parallel-layout)"));
  char *rep = g_strdup_printf("report %s", trace);
  Proc b = run_line(rep);
  g_assert_cmpint(b.status, ==, 0);
  g_assert_cmpstr(a.out, ==, b.out);
  proc_clear(&a);
  proc_clear(&b);
  g_free(rep);
  g_free(cmd);
  g_unlink(trace);
  g_free(trace);
}

static const CliBadCase bad_cases[] = {
    {"syntax", L8 OPT "Et*8|t*8|t*8|t*8Q", "'Q' is no layer"},
    {"count", L8 OPT "Et*8|t*8|t*8|t*9L", "holds 33 transformer layers (t)"},
    {"stages", L8 OPT "Et*8|t*8|t*16L", "lists 3 virtual stages"},
    {"with-split", L8 OPT "Et*8|t*8|t*8|t*8L --first-stage-layers 8", "give the pipeline split one way"},
    {"layers-per-chunk", L8 OPT "Et*4|(t*4|)*6,t*4L --layers-per-chunk 4", "drop --layers-per-chunk"},
    {"zero", "run --model gpt3-1b --gpus 8 --tp 1 --pp 1 --global-batch 8 --zero 1" OPT "Et*24L",
     "drop it with --zero"},
    {"terapipe", "run --model gpt3-1b --cluster aws-p3-16xlarge --gpus 8 --tp 1 --pp 8 --dp 1 --global-batch 8 "
                 "--schedule terapipe" OPT "Et*3|(t*3|)*6,t*3L",
     "drop it with --schedule terapipe"},
    {"dualpipe", L8 " --schedule dualpipe" OPT "E|(t*5|)*6,t*2L", "rank s holds piece s and piece p - 1 - s"},
    {"mtp-chunk", "run --model deepseek-v3 --cluster h800-cluster --layers 8 --gpus 64 --tp 1 --pp 4 --ep 16 "
                  "--global-batch 64" OPT "E|t*3|t|t*4m||||L",
     "keeps them in a rank's last"},
    {"empty-first", L8 OPT "|Et*8|t*8|t*8|t*8L", "empty virtual stage before E"},
};

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  tmpdir = test_tmp_dir("ptdsim-layout");
  g_test_add_func("/layout-cli/shorthands", test_shorthands);
  g_test_add_func("/layout-cli/even", test_even);
  g_test_add_func("/layout-cli/schedules", test_schedules);
  g_test_add_func("/layout-cli/dualpipe-balance", test_dualpipe_balance);
  g_test_add_func("/layout-cli/llama3-126", test_llama3_126);
  g_test_add_func("/layout-cli/mtp", test_mtp);
  g_test_add_func("/layout-cli/plan-sweep-trace", test_plan_sweep_trace);
  for (guint i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
    char *path = g_strdup_printf("/layout-cli/bad/%s", bad_cases[i].name);
    g_test_add_data_func(path, &bad_cases[i], cli_test_bad);
    g_free(path);
  }
  int rc = g_test_run();
  g_rmdir(tmpdir);
  g_free(tmpdir);
  return rc;
}
