/* End-to-end tests of uneven pipeline stages (Megatron's first/last-stage
 * layers and its embedding and loss counted in the split) through the real
 * binary: Llama 3 405B's 126 layers on 8 and 9 stages, the report's
 * layers per stage, one-line errors whose suggestions run, plan's uneven
 * rows and their commands, a sweep's column and a trace read back.
 *
 * Expected layer counts are worked out here from Megatron's rules; no
 * timing is pasted from an output: the reference is always another run.
 */
#include <glib/gstdio.h>
#include <string.h>

#include "cli_harness.h"
#include "test_tmp.h"

static char *tmpdir;

#define L405 "run --model llama3-405b --cluster dgx-h100-superpod --global-batch 1024 --tp 8 --sequence-parallel " \
             "--distributed-optimizer"

/* The layers_per_stage array of a run's config (asserted present). */
static GArray *stage_layers(const cJSON *run) {
  const cJSON *per = arr(obj(run, "config"), "layers_per_stage");
  GArray *a = g_array_new(FALSE, FALSE, sizeof(guint));
  const cJSON *x;
  cJSON_ArrayForEach(x, per) {
    g_assert_true(cJSON_IsNumber(x));
    guint v = (guint)x->valuedouble;
    g_array_append_val(a, v);
  }
  return a;
}

/* Stage layers `first`, then `mid` on each middle stage, then `last`. */
static void assert_layers(const cJSON *run, guint p, guint first, guint mid, guint last) {
  GArray *a = stage_layers(run);
  g_assert_cmpuint(a->len, ==, p);
  guint sum = 0;
  for (guint s = 0; s < p; s++) {
    guint want = s == 0 ? first : s == p - 1 ? last : mid;
    g_assert_cmpuint(g_array_index(a, guint, s), ==, want);
    sum += g_array_index(a, guint, s);
  }
  g_assert_cmpuint(sum, ==, num(obj(run, "config"), "layers"));
  g_array_free(a, TRUE);
}

/* Why: Llama 3 405B's 126 layers do not divide by 8; Megatron runs them
 * with the embedding and the loss counted as a layer each, (126 + 2) / 8 =
 * 16 per stage less one on the first and the last, which the end-stage
 * options give too -- the same split must be the same simulation.  On 9
 * stages, ends of 7 leave 112 = 7 x 16 for the middle, and the GPU that
 * needs the most memory is then a middle one. */
static void test_llama405(void) {
  cJSON *a = run_json(L405 " --gpus 2048 --pp 8 --account-for-embedding --account-for-loss --format json");
  assert_layers(a, 8, 15, 16, 15);
  g_assert_null(cJSON_GetObjectItemCaseSensitive(obj(a, "config"), "layers_per_virtual_stage"));
  g_assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "fits_in_memory")));
  g_assert_cmpfloat(num(a, "iteration_time_s"), >, 0);
  cJSON *b = run_json(L405 " --gpus 2048 --pp 8 --first-stage-layers 15 --last-stage-layers 15 --format json");
  g_assert_true(cJSON_Compare(a, b, TRUE));
  cJSON_Delete(b);
  cJSON_Delete(a);

  cJSON *c = run_json(L405 " --gpus 1152 --pp 9 --first-stage-layers 7 --last-stage-layers 7 --format json");
  assert_layers(c, 9, 7, 16, 7);
  g_assert_cmpfloat(num(obj(c, "memory_per_gpu_GiB"), "stage"), ==, 1);
  cJSON_Delete(c);

  /* the text report says the split */
  Proc p = run_line(L405 " --gpus 2048 --pp 8 --account-for-embedding --account-for-loss");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "\nlayers     15 on stage 0, 16 on stages 1-6, 15 on stage 7 (an uneven split)\n"));
  proc_clear(&p);
}

/* Why: interleaved, the embedding (loss) is one layer of the first (last)
 * virtual stage only: 126 + 2 = 128 on 8 stages of 4 chunks is 4 layers a
 * chunk, 3 in virtual stage 0 and in virtual stage 31. */
static void test_interleaved(void) {
  cJSON *j = run_json(L405 " --gpus 2048 --pp 8 --chunks 4 --account-for-embedding --account-for-loss "
                      "--network analytic --format json");
  assert_layers(j, 8, 15, 16, 15);
  const cJSON *virt = arr(obj(j, "config"), "layers_per_virtual_stage");
  g_assert_cmpint(cJSON_GetArraySize(virt), ==, 32);
  for (int i = 0; i < 32; i++)
    g_assert_cmpfloat(cJSON_GetArrayItem(virt, i)->valuedouble, ==, i == 0 || i == 31 ? 3 : 4);
  cJSON_Delete(j);
}

/* Why: Megatron-Core builds a chunk of the embedding (the loss) alone where
 * the account-for split leaves one layer a chunk: 128 on 8 stages of 16
 * chunks, virtual stage 0 and 127 with no transformer layer (the DGX Cloud
 * 405B proxies' layout); it runs, and the shortcut agrees with --exact. */
static void test_empty_chunks(void) {
  const char *base = L405 " --gpus 2048 --pp 8 --chunks 16 --account-for-embedding --account-for-loss --network "
                          "analytic --allow-oom --format json";
  cJSON *j = run_json(base);
  const cJSON *virt = arr(obj(j, "config"), "layers_per_virtual_stage");
  g_assert_cmpint(cJSON_GetArraySize(virt), ==, 128);
  for (int i = 0; i < 128; i++)
    g_assert_cmpfloat(cJSON_GetArrayItem(virt, i)->valuedouble, ==, i == 0 || i == 127 ? 0 : 1);
  assert_layers(j, 8, 15, 16, 15);
  char *args = g_strconcat(base, " --exact", NULL);
  cJSON *e = run_json(args);
  g_assert_cmpfloat(num(j, "iteration_time_s"), ==, num(e, "iteration_time_s"));
  g_free(args);
  cJSON_Delete(e);
  cJSON_Delete(j);
}

/* Why: a split whose stages come out equal is the even split, whatever
 * options made it: the same run to the byte, no per-stage keys. */
static void test_even_is_even(void) {
  const char *base = "run --model gpt3-175b --gpus 1024 --tp 8 --pp 8 --global-batch 1536 --network analytic "
                     "--format json";
  cJSON *even = run_json(base);
  g_assert_null(cJSON_GetObjectItemCaseSensitive(obj(even, "config"), "layers_per_stage"));
  char *args = g_strconcat(base, " --first-stage-layers 12 --last-stage-layers 12", NULL);
  cJSON *given = run_json(args);
  g_assert_true(cJSON_Compare(even, given, TRUE));
  g_free(args);
  cJSON_Delete(given);
  cJSON_Delete(even);
}

/* The options after "e.g. " in a one-line error, up to " (". */
static char *example_of(const char *err) {
  const char *eg = strstr(err, "e.g. ");
  g_assert_nonnull(eg);
  eg += strlen("e.g. ");
  const char *end = strstr(eg, " (");
  g_assert_nonnull(end);
  return g_strndup(eg, (gsize)(end - eg));
}

/* Why: a layer count that does not divide, or end stages that leave the
 * middle a remainder, must say so in one line and name a split that does
 * work -- which must then run, with the stages it said. */
static void test_suggestions_run(void) {
  struct {
    const char *args, *needle;
    guint first, mid, last;
  } cases[] = {
      {L405 " --gpus 2048 --pp 8", "--layers 126 do not divide into --pp 8 stages", 15, 16, 15},
      {L405 " --gpus 2048 --pp 8 --first-stage-layers 14 --last-stage-layers 14",
       "126 layers with --first-stage-layers 14 and --last-stage-layers 14 leave 98 for 6 middle stages: not a "
       "whole number",
       15, 16, 15},
      {L405 " --gpus 2048 --pp 8 --account-for-embedding", "make 127, which do not divide into --pp 8", 15, 16, 15},
      {L405 " --gpus 1280 --pp 10", "--layers 126 do not divide into --pp 10 stages", 11, 13, 11},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    Proc p = run_line(cases[i].args);
    assert_one_line_error(&p, cases[i].needle);
    char *eg = example_of(p.err);
    /* run it in place of the split options the error was about */
    char *base = g_strdup(cases[i].args);
    char *cut = strstr(base, " --first-stage-layers");
    if (!cut)
      cut = strstr(base, " --account-for");
    if (cut)
      *cut = '\0';
    char *args = g_strdup_printf("%s %s --network analytic --format json", base, eg);
    cJSON *j = run_json(args);
    guint p_ = (guint)num(obj(j, "config"), "pp");
    assert_layers(j, p_, cases[i].first, cases[i].mid, cases[i].last);
    cJSON_Delete(j);
    g_free(args);
    g_free(base);
    g_free(eg);
    proc_clear(&p);
  }
}


#define R405 L405 " --gpus 2048 --pp 8"
static const CliBadCase bad_cases[] = {
    {"both-kinds", R405 " --first-stage-layers 15 --account-for-loss", "not both"},
    {"no-pipeline", L405 " --gpus 128 --pp 1 --account-for-loss", "use them with --pp 2 or more"},
    {"ends-no-pipeline", L405 " --gpus 128 --pp 1 --first-stage-layers 4", "use them with --pp 2 or more"},
    {"terapipe", "run --model gpt3-1b --cluster aws-p3-16xlarge --gpus 8 --tp 1 --pp 8 --dp 1 --global-batch 8 "
                 "--schedule terapipe --account-for-loss",
     "drop them with --schedule terapipe"},
    {"zero", "run --model gpt3-1b --gpus 8 --tp 1 --pp 1 --global-batch 8 --zero 1 --first-stage-layers 4",
     "drop them with --zero"},
    {"layers-per-chunk", R405 " --first-stage-layers 15 --last-stage-layers 15 --layers-per-chunk 4",
     "give the model chunks per GPU as --chunks v"},
    {"chunks-ends", R405 " --first-stage-layers 15 --last-stage-layers 15 --chunks 2",
     "--chunks 2 does not divide --first-stage-layers 15 and --last-stage-layers 15"},
    {"chunks-middle", "run --layers 26 --hidden 1024 --heads 16 --gpus 4 --pp 4 --global-batch 8 --chunks 2 "
                      "--first-stage-layers 4 --last-stage-layers 4",
     "--chunks 2 does not divide the 9 layers of each middle stage"},
    {"too-many", R405 " --first-stage-layers 200", "more than the model's 126 layers"},
    {"two-stages", L405 " --gpus 256 --pp 2 --first-stage-layers 60 --last-stage-layers 60", "must add up to 126"},
    {"middle-empty", R405 " --first-stage-layers 62 --last-stage-layers 62", "fewer than one each"},
    {"zero-layers", R405 " --first-stage-layers 0", "--first-stage-layers '0' is not a whole number"},
    {"repeated", R405 " --account-for-loss --account-for-loss", "account-for-loss"},
};

/* Why: TeraPipe's cells hold equal layers; its refusal of a pipeline size
 * that does not divide them must not suggest a split it would refuse. */
static void test_terapipe_no_hint(void) {
  Proc p = run_line("run --model gpt3-1b --cluster aws-p3-16xlarge --gpus 7 --tp 1 --pp 7 --dp 1 --global-batch 8 "
                    "--schedule terapipe");
  assert_one_line_error(&p, "--layers 24 do not divide into --pp 7 stages");
  g_assert_null(strstr(p.err, "--first-stage-layers"));
  g_assert_null(strstr(p.err, "--account-for"));
  proc_clear(&p);
}

/* Why: plan must find the splits Megatron users run when the layers do
 * not divide (126 layers on 8 and 16 stages), and every row's command --
 * with the split's options -- must be the very simulation of the row.
 * (Megatron's distributed optimizer pinned: FSDP2 rows, which rank near
 * these, hold no pipeline split.) */
static void test_plan(void) {
  cJSON *j = run_json("plan --model llama3-405b --cluster dgx-h100-superpod --gpus 2048 --global-batch 1024 --top 6 "
                      "--distributed-optimizer --format json");
  const cJSON *rows = arr(j, "rows");
  g_assert_cmpint(cJSON_GetArraySize(rows), ==, 6);
  guint uneven = 0;
  const cJSON *row;
  cJSON_ArrayForEach(row, rows) {
    const cJSON *per = cJSON_GetObjectItemCaseSensitive(row, "layers_per_stage");
    const char *cmd = str(row, "command");
    g_assert_true(g_str_has_prefix(cmd, "ptdsim run "));
    if (per) {
      uneven++;
      double sum = 0;
      const cJSON *x;
      cJSON_ArrayForEach(x, per) sum += x->valuedouble;
      g_assert_cmpfloat(sum, ==, 126);
      g_assert_cmpint(cJSON_GetArraySize(per), ==, (int)num(row, "pp"));
      g_assert_true(strstr(cmd, "--account-for-") || strstr(cmd, "--first-stage-layers"));
    }
    char *args = g_strconcat(cmd + strlen("ptdsim "), " --format json", NULL);
    cJSON *r = run_json(args);
    g_assert_cmpfloat(num(r, "iteration_time_s"), ==, num(row, "iteration_time_s"));
    g_assert_cmpfloat(num(r, "tflops_per_gpu"), ==, num(row, "tflops_per_gpu"));
    g_assert_cmpfloat(num(obj(r, "memory_per_gpu_GiB"), "total"), ==, num(row, "memory_per_gpu_GiB"));
    const cJSON *rper = cJSON_GetObjectItemCaseSensitive(obj(r, "config"), "layers_per_stage");
    g_assert_true(per ? cJSON_Compare(per, rper, TRUE) : rper == NULL);
    cJSON_Delete(r);
    g_free(args);
  }
  /* p divides 2048 / t: a power of two; 126 = 2 x 63 divides by none above 2, where 405B does not fit */
  g_assert_cmpuint(uneven, ==, 6);
  cJSON_Delete(j);

  /* the text table gains its layers column */
  Proc p = run_line("plan --model llama3-405b --cluster dgx-h100-superpod --gpus 2048 --global-batch 1024 --top 3");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, " layers "));
  g_assert_nonnull(strstr(p.out, " 15/16/15 "));
  proc_clear(&p);

  /* a split given pins every row to it: no ZeRO, only the p it fits */
  j = run_json("plan --layers 11 --hidden 1024 --heads 16 --seq-len 512 --gpus 16 --global-batch 16 --allow-fewer "
               "--account-for-loss --top 100000 --format json");
  guint seen[13] = {0};
  cJSON_ArrayForEach(row, arr(j, "rows")) {
    g_assert_cmpfloat(num(row, "zero"), ==, 0);
    guint p_ = (guint)num(row, "pp");
    g_assert_cmpuint(12 % p_, ==, 0); /* (11 + 1) divides by p */
    g_assert_cmpuint(p_, >=, 2);
    seen[p_] = 1;
    g_assert_nonnull(strstr(str(row, "command"), "--account-for-loss"));
  }
  g_assert_true(seen[2] && seen[3] && seen[4] && seen[6]); /* every p <= 11 that 12 divides, within 16 GPUs */
  cJSON_Delete(j);
}

/* Why: a sweep's rows carry run's JSON, the per-stage layers included, and
 * a split that does not come out whole is an invalid row with the reason. */
static void test_sweep(void) {
  char *out = g_build_filename(tmpdir, "sweep.csv", NULL);
  char *args = g_strdup_printf("sweep --layers 10 --hidden 1024 --heads 16 --seq-len 512 --gpus 4 --pp 4 "
                               "--global-batch 8 --first-stage-layers 1,2 --last-stage-layers 2 --network analytic "
                               "-o %s",
                               out);
  run_line_ok(args);
  gsize len;
  char *csv = slurp(out, &len);
  g_assert_nonnull(strstr(csv, ",config.layers_per_stage,"));
  g_assert_nonnull(strstr(csv, "leave 7 for 2 middle stages: not a whole number"));
  g_assert_nonnull(strstr(csv, "\"[2,3,3,2]\""));
  g_free(csv);
  g_free(args);
  g_unlink(out);
  g_free(out);
}

/* Why: a trace of an uneven run is read back to the same report (its
 * events checked against its result). */
static void test_trace(void) {
  char *trace = g_build_filename(tmpdir, "uneven.json.gz", NULL);
  char *args = g_strdup_printf("run --layers 10 --hidden 1024 --heads 16 --seq-len 512 --gpus 8 --tp 2 --pp 4 "
                               "--global-batch 8 --account-for-embedding --account-for-loss --trace %s",
                               trace);
  Proc a = run_line(args);
  g_assert_cmpint(a.status, ==, 0);
  char *rep = g_strdup_printf("report %s", trace);
  Proc b = run_line(rep);
  g_assert_cmpint(b.status, ==, 0);
  g_assert_cmpstr(a.out, ==, b.out);
  g_assert_nonnull(strstr(b.out, "2 on stage 0, 3 on stages 1-2, 2 on stage 3"));
  proc_clear(&a);
  proc_clear(&b);
  g_free(rep);
  g_free(args);
  g_unlink(trace);
  g_free(trace);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  GError *error = NULL;
  tmpdir = test_tmp_dir("ptdsim-stages");
  g_assert_no_error(error);
  g_test_add_func("/stages/llama405", test_llama405);
  g_test_add_func("/stages/interleaved", test_interleaved);
  g_test_add_func("/stages/even-is-even", test_even_is_even);
  g_test_add_func("/stages/empty-chunks", test_empty_chunks);
  g_test_add_func("/stages/suggestions-run", test_suggestions_run);
  g_test_add_func("/stages/terapipe-no-hint", test_terapipe_no_hint);
  for (guint i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
    char *path = g_strdup_printf("/stages/bad/%s", bad_cases[i].name);
    g_test_add_data_func(path, &bad_cases[i], cli_test_bad);
    g_free(path);
  }
  g_test_add_func("/stages/plan", test_plan);
  g_test_add_func("/stages/sweep", test_sweep);
  g_test_add_func("/stages/trace", test_trace);
  int rc = g_test_run();
  g_rmdir(tmpdir);
  g_free(tmpdir);
  return rc;
}
