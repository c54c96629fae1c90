/* ptdsim — end-to-end tests of `ptdsim plan` through the real binary
 * ($PTDSIM_BIN): the ranked rows agree exactly with `ptdsim run` of the same
 * configuration, every row fits, rows are sorted, the search space is counted
 * exactly, JSON keys, determinism and errors.  No expected timings are
 * written here: the reference is always `ptdsim run`. */
#include <cjson/cJSON.h>
#include <glib.h>
#include <math.h>
#include <string.h>

#include "cli_harness.h"

/* Small enough to search in well under a second. */
#define TOY "--layers 8 --hidden 1024 --heads 16 --seq-len 512 --global-batch 16"
/* A budget where some candidates do not fit (a 16 GiB GPU). */
#define TIGHT "--model gpt3-1b --gpus 8 --global-batch 16 --profile v100-sxm2-16gb"

/* The `ptdsim run` line of a plan row (same model, same network). */
static char *run_args_of(const char *model, const cJSON *row, const char *extra) {
  GString *a = g_string_new(NULL);
  if (num(row, "zero") > 0)
    g_string_append_printf(a, "run %s --gpus %.0f --tp 1 --pp 1 --micro-batch %.0f --recompute %s --zero %.0f", model,
                           num(row, "gpus"), num(row, "micro_batch"), str(row, "recompute"), num(row, "zero"));
  else
    g_string_append_printf(a, "run %s --gpus %.0f --tp %.0f --pp %.0f --micro-batch %.0f --recompute %s%s "
                              "--schedule %s",
                           model, num(row, "gpus"), num(row, "tp"), num(row, "pp"), num(row, "micro_batch"),
                           str(row, "recompute"), num(row, "fsdp") > 0 ? "" : " --ddp local", str(row, "schedule"));
  if (strcmp(str(row, "schedule"), "interleaved") == 0)
    g_string_append_printf(a, " --chunks %.0f", num(row, "chunks"));
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "sequence_parallel")))
    g_string_append(a, " --sequence-parallel");
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "distributed_optimizer")))
    g_string_append(a, " --distributed-optimizer");
  if (num(row, "fsdp") == 1)
    g_string_append(a, " --fsdp");
  else if (num(row, "fsdp") > 1)
    g_string_append_printf(a, " --hsdp %.0f", num(row, "fsdp"));
  const cJSON *attn = cJSON_GetObjectItemCaseSensitive(row, "attention");
  if (num(row, "zero") == 0 && cJSON_IsString(attn))
    g_string_append_printf(a, " --attention %s", attn->valuestring);
  g_string_append_printf(a, " %s --format json", extra);
  return g_string_free(a, FALSE);
}

/* Why: a plan row must be the very simulation `run` does for that
 * configuration — same iteration time to the bit, same TFLOP/s and memory —
 * otherwise the ranking is of something other than what users then run. */
static void check_rows_against_run(const char *model, const char *plan_extra, const char *run_extra, guint n_check) {
  char *args = g_strdup_printf("plan %s %s --top 1000000 --format json", model, plan_extra);
  cJSON *j = run_json(args);
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(j, "rows");
  guint n = (guint)cJSON_GetArraySize(rows);
  g_assert_cmpuint(n, >, 0);
  /* the first few and the last few rows */
  for (guint i = 0; i < n; i++) {
    if (i >= n_check && i + n_check < n)
      continue;
    const cJSON *row = cJSON_GetArrayItem(rows, (int)i);
    char *ra = run_args_of(model, row, run_extra);
    cJSON *r = run_json(ra);
    g_assert_cmpfloat(num(r, "iteration_time_s"), ==, num(row, "iteration_time_s"));
    g_assert_cmpfloat(num(r, "tflops_per_gpu"), ==, num(row, "tflops_per_gpu"));
    g_assert_cmpfloat(num(r, "model_tflops_per_gpu"), ==, num(row, "model_tflops_per_gpu"));
    g_assert_cmpfloat(num(r, "mfu"), ==, num(row, "mfu"));
    g_assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "sc21_reproduction")) ==
                  cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "sc21_reproduction")));
    g_assert_cmpfloat(num(cJSON_GetObjectItemCaseSensitive(r, "memory_per_gpu_GiB"), "total"), ==,
                      num(row, "memory_per_gpu_GiB"));
    g_assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "fits_in_memory")));
    cJSON_Delete(r);
    g_free(ra);
  }
  cJSON_Delete(j);
  g_free(args);
}

static void test_matches_run(void) { check_rows_against_run(TOY, "--gpus 16", "--network analytic", 4); }

/* --network flow is passed through (a smaller batch: every candidate runs on the flows). */
static void test_matches_run_flow(void) {
  check_rows_against_run("--layers 8 --hidden 1024 --heads 16 --seq-len 512 --global-batch 4", "--gpus 4 --network flow",
                         "--network flow", 2);
}

/* The same for GPT-3 1B: ZeRO, PTD-P, and a GPU whose memory turns
 * candidates away. */
static void test_matches_run_gpt(void) {
  /* ZeRO rows reproduce too */
  cJSON *z = run_json("plan --model gpt3-1b --gpus 64 --global-batch 256 --zero 2 --top 3 --format json");
  g_assert_cmpfloat(num(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(z, "rows"), 0), "zero"), ==, 2);
  cJSON_Delete(z);
  check_rows_against_run("--model gpt3-1b", "--gpus 64 --global-batch 256 --zero 2",
                         "--global-batch 256 --network analytic", 3);
  check_rows_against_run("--model gpt3-1b", "--gpus 32 --global-batch 64", "--global-batch 64 --network analytic", 3);
  check_rows_against_run("--model gpt3-1b", "--gpus 8 --global-batch 16 --profile v100-sxm2-16gb",
                         "--global-batch 16 --profile v100-sxm2-16gb --network analytic", 3);
}

/* Why: rows are ranked by iteration time; the order must be total and the
 * counts must add up; every listed row fits the GPU (16 GiB here) and some
 * candidates do not. */
static void test_sorted_and_counted(void) {
  cJSON *j = run_json("plan " TIGHT " --top 1000000 --format json");
  const char *keys[] = {"searched", "simulated", "infeasible", "out_of_memory", "pruned", "ranked"};
  for (guint i = 0; i < G_N_ELEMENTS(keys); i++)
    g_assert_cmpfloat(num(j, keys[i]), >=, 0);
  g_assert_cmpfloat(num(j, "searched"), ==,
                    num(j, "simulated") + num(j, "infeasible") + num(j, "out_of_memory") + num(j, "pruned"));
  g_assert_cmpfloat(num(j, "out_of_memory"), >, 0);
  g_assert_cmpfloat(num(j, "pruned"), ==, 0); /* nothing is pruned when every row is wanted */
  g_assert_cmpstr(str(j, "network"), ==, "analytic");
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(j, "rows");
  g_assert_cmpfloat(cJSON_GetArraySize(rows), ==, num(j, "ranked"));
  g_assert_cmpfloat(num(j, "ranked"), ==, num(j, "simulated"));
  double prev = 0;
  const char *row_keys[] = {"gpus", "tp", "pp", "dp", "micro_batch", "microbatches", "chunks", "iteration_time_s",
                            "tflops_per_gpu", "tokens_per_s", "memory_per_gpu_GiB"};
  for (int i = 0; i < cJSON_GetArraySize(rows); i++) {
    const cJSON *row = cJSON_GetArrayItem(rows, i);
    for (guint k = 0; k < G_N_ELEMENTS(row_keys); k++)
      g_assert_cmpfloat(num(row, row_keys[k]), >, 0);
    g_assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "fits_in_memory")));
    g_assert_cmpfloat(num(row, "memory_per_gpu_GiB"), <=, 16.0);
    g_assert_cmpfloat(num(row, "gpus"), ==, 8);
    g_assert_cmpfloat(num(row, "tp") * num(row, "pp") * num(row, "dp"), ==, 8);
    g_assert_cmpfloat(num(row, "micro_batch") * num(row, "dp") * num(row, "microbatches"), ==, 16);
    g_assert_null(cJSON_GetObjectItemCaseSensitive(row, "training_days"));
    double t = num(row, "iteration_time_s");
    g_assert_cmpfloat(t, >=, prev);
    prev = t;
  }
  cJSON_Delete(j);

  /* --top K keeps the first K of the same ranking */
  cJSON *all = run_json("plan " TIGHT " --top 1000000 --format json");
  cJSON *few = run_json("plan " TIGHT " --top 3 --format json");
  const cJSON *fr = cJSON_GetObjectItemCaseSensitive(few, "rows");
  g_assert_cmpint(cJSON_GetArraySize(fr), ==, 3);
  for (int i = 0; i < 3; i++)
    g_assert_true(cJSON_Compare(cJSON_GetArrayItem(fr, i),
                                cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(all, "rows"), i), TRUE));
  cJSON_Delete(all);
  cJSON_Delete(few);
  /* the default is 10 */
  j = run_json("plan " TIGHT " --format json");
  g_assert_cmpint(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "rows")), ==, 10);
  cJSON_Delete(j);
}

/* The pipeline splits of `layers` on p stages the search tries, written
 * here from their definition (doc/planning.md): the even split where p
 * divides the layers; then, in this order, the embedding and the loss
 * counted as layers (both, then either) where (l + extras) / p is whole and
 * at least 2, and the end stages sharing r = l - (p - 2) ceil(l/p) (r/2
 * first, then the other way round when r is odd) where r >= 2; none whose
 * stage layers (first, middle, last) repeat an earlier one's.  For each, the
 * chunk counts v it takes: even, v divides l/p; embedding/loss, v divides
 * n = (l + extras)/p with n/v >= 2; end stages, v divides both ends and
 * the middle stages' share. */
typedef struct {
  guint first, mid, last; /* stage layers */
  guint n;                /* embedding/loss: the per-stage share with the extras; 0 otherwise */
} Split;

static guint splits_of(guint l, guint p, Split *out) {
  guint k = 0;
  if (l % p == 0)
    out[k++] = (Split){l / p, l / p, l / p, 0};
  if (p < 2 || l < p)
    return k;
  Split c[5];
  guint nc = 0;
  for (guint extras = 2; extras >= 1; extras--) {
    if ((l + extras) % p || (l + extras) / p < 2)
      continue;
    guint n = (l + extras) / p;
    if (extras == 2)
      c[nc++] = (Split){n - 1, n, n - 1, n};
    else {
      c[nc++] = (Split){n - 1, n, n, n}; /* the embedding */
      c[nc++] = (Split){n, n, n - 1, n}; /* the loss */
    }
  }
  guint share = (l + p - 1) / p;
  if ((p - 2) * share + 2 <= l) {
    guint r = l - (p - 2) * share;
    c[nc++] = (Split){r / 2, p > 2 ? share : 0, r - r / 2, 0};
    if (r % 2)
      c[nc++] = (Split){r - r / 2, p > 2 ? share : 0, r / 2, 0};
  }
  for (guint i = 0; i < nc; i++) {
    gboolean dup = FALSE;
    for (guint j = 0; j < k; j++)
      dup = dup || (out[j].first == c[i].first && (p == 2 || out[j].mid == c[i].mid) && out[j].last == c[i].last);
    if (!dup)
      out[k++] = c[i];
  }
  return k;
}

static gboolean split_takes(const Split *sp, guint l, guint p, guint v) {
  if (sp->n)
    return sp->n % v == 0 && sp->n / v >= 2;
  if (sp->first == sp->mid && sp->mid == sp->last && l % p == 0 && sp->first == l / p)
    return (l / p) % v == 0;
  return sp->first % v == 0 && sp->last % v == 0 && sp->mid % v == 0;
}

/* The search space, counted here independently from its definition: t
 * divides the GPUs per node (8 on Selene) and the heads, p has a split of
 * the layers (above), d = n/(t p) (or any d with t p d <= n when `fewer`)
 * dividing B, b dividing B/d, v = 1 (1F1B) or v >= 2 that the split takes
 * with p >= 2 and m a multiple of p (interleaved), and ZeRO stages 1-3
 * where t = p = 1 and d > 1, times two recompute settings; and FSDP2 on
 * 1F1B where d > 1 (full sharding, and HSDP with 8-rank shard groups
 * where d is a multiple of 8 with at least 2 groups). */
/* attn: the attention kernels searched (2 where the device has flash's
 * figures: flash and Megatron's; 1 otherwise). */
static guint count_space(guint layers, guint heads, guint n, guint B, gboolean fewer, guint attn) {
  guint count = 0;
  for (guint t = 1; t <= 8; t++)
    for (guint p = 1; p <= layers; p++) {
      Split splits[6];
      guint n_splits = splits_of(layers, p, splits);
      for (guint d = 1; d <= n; d++) {
        if (8 % t || heads % t || B % d || t * p * d > n || (!fewer && t * p * d != n))
          continue;
        for (guint si = 0; si < n_splits; si++)
          for (guint b = 1; b <= B / d; b++) {
            if ((B / d) % b)
              continue;
            guint m = B / d / b;
            for (guint v = 1; v <= layers; v++)
              if (split_takes(&splits[si], layers, p, v) && (v == 1 || (p >= 2 && m % p == 0)))
                /* recompute full, selective, none; sequence parallel or not;
                 * distributed optimizer or not; the attention kernels */
                count += 3 * (t > 1 ? 2 : 1) * (d > 1 ? 2 : 1) * attn +
                         (v == 1 && d > 1 ? 3 * (t > 1 ? 2 : 1) * attn * (d % 8 == 0 && d / 8 >= 2 ? 2 : 1) : 0);
            if (t == 1 && p == 1 && d > 1)
              count += 3 * 2; /* ZeRO stages, recompute full or none */
          }
      }
    }
  return count;
}

/* Why: "searched" is the size of the space the README defines; a search
 * that silently skips a family of configurations must fail here. */
static void test_space_size(void) {
  cJSON *j = run_json("plan " TOY " --gpus 16 --format json");
  g_assert_cmpfloat(num(j, "searched"), ==, count_space(8, 16, 16, 16, FALSE, 2));
  cJSON_Delete(j);
  j = run_json("plan " TOY " --gpus 16 --allow-fewer --top 1000000 --format json");
  g_assert_cmpfloat(num(j, "searched"), ==, count_space(8, 16, 16, 16, TRUE, 2));
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(j, "rows");
  gboolean fewer_seen = FALSE;
  for (int i = 0; i < cJSON_GetArraySize(rows); i++) {
    double g = num(cJSON_GetArrayItem(rows, i), "gpus");
    g_assert_cmpfloat(g, <=, 16);
    fewer_seen |= g < 16;
  }
  g_assert_true(fewer_seen);
  cJSON_Delete(j);
  j = run_json("plan " TIGHT " --format json");
  g_assert_cmpfloat(num(j, "searched"), ==, count_space(24, 16, 8, 16, FALSE, 1));
  cJSON_Delete(j);
}

/* Why: pruning by the lower bound must never change the best K rows:
 * --top K prints, byte for byte, the first K rows of the unpruned search,
 * and the pruning does fire, leaving most candidates unsimulated (else this
 * proves nothing, and --top saves nothing). */
static void test_pruning_exact(void) {
  const char *bases[] = {"plan --model gpt3-1b --gpus 16 --global-batch 16 --allow-fewer",
                         "plan " TOY " --gpus 16 --allow-fewer"};
  for (guint bi = 0; bi < G_N_ELEMENTS(bases); bi++) {
    char *all_args = g_strdup_printf("%s --top 1000000 --format json", bases[bi]);
    cJSON *all = run_json(all_args);
    g_assert_cmpfloat(num(all, "pruned"), ==, 0);
    const cJSON *ar = cJSON_GetObjectItemCaseSensitive(all, "rows");
    const guint ks[] = {1, 3, 10};
    for (guint i = 0; i < G_N_ELEMENTS(ks); i++) {
      char *args = g_strdup_printf("%s --top %u --format json", bases[bi], ks[i]);
      cJSON *few = run_json(args);
      g_assert_cmpfloat(num(few, "pruned"), >, 0);
      g_assert_cmpfloat(num(few, "simulated") * 2, <, num(all, "simulated"));
      g_assert_cmpfloat(num(few, "simulated") + num(few, "pruned"), ==, num(all, "simulated"));
      g_assert_cmpfloat(num(few, "searched"), ==, num(all, "searched"));
      g_assert_cmpfloat(num(few, "searched"), ==, num(few, "simulated") + num(few, "infeasible") +
                                                      num(few, "out_of_memory") + num(few, "pruned"));
      const cJSON *fr = cJSON_GetObjectItemCaseSensitive(few, "rows");
      g_assert_cmpint(cJSON_GetArraySize(fr), ==, (int)ks[i]);
      for (guint r = 0; r < ks[i]; r++) {
        char *x = cJSON_PrintUnformatted(cJSON_GetArrayItem(fr, (int)r)),
             *y = cJSON_PrintUnformatted(cJSON_GetArrayItem(ar, (int)r));
        g_assert_cmpstr(x, ==, y);
        cJSON_free(x);
        cJSON_free(y);
      }
      cJSON_Delete(few);
      g_free(args);
    }
    cJSON_Delete(all);
    g_free(all_args);
  }
}

/* Why: training days follow from the token budget and the iteration time
 * (tokens / (B s) iterations), and the ranking does not change with them. */
static void test_tokens(void) {
  cJSON *a = run_json("plan " TOY " --gpus 16 --tokens 1e9 --format json");
  cJSON *b = run_json("plan " TOY " --gpus 16 --format json");
  const cJSON *ra = cJSON_GetObjectItemCaseSensitive(a, "rows"), *rb = cJSON_GetObjectItemCaseSensitive(b, "rows");
  g_assert_cmpint(cJSON_GetArraySize(ra), ==, cJSON_GetArraySize(rb));
  for (int i = 0; i < cJSON_GetArraySize(ra); i++) {
    const cJSON *x = cJSON_GetArrayItem(ra, i), *y = cJSON_GetArrayItem(rb, i);
    g_assert_cmpfloat(num(x, "iteration_time_s"), ==, num(y, "iteration_time_s"));
    double t = num(x, "iteration_time_s");
    g_assert_cmpfloat_with_epsilon(num(x, "training_days") * 86400, 1e9 / (16.0 * 512) * t, 1e-9 * t * 1e9 / 8192);
    g_assert_cmpfloat_with_epsilon(num(x, "tokens_per_s"), 16.0 * 512 / t, 1e-9 * 8192 / t);
  }
  cJSON_Delete(a);
  cJSON_Delete(b);
}

/* Why: same inputs, byte-identical output (text and JSON). */
static void test_deterministic(void) {
  const char *lines[] = {"plan " TIGHT " --top 50", "plan " TIGHT " --top 50 --format json"};
  for (guint i = 0; i < G_N_ELEMENTS(lines); i++) {
    Proc a = run_line(lines[i]), b = run_line(lines[i]);
    g_assert_cmpint(a.status, ==, 0);
    g_assert_cmpstr(a.out, ==, b.out);
    proc_clear(&a);
    proc_clear(&b);
  }
  Proc t = run_line("plan " TIGHT " --top 2 --tokens 3e11");
  g_assert_cmpint(t.status, ==, 0);
  g_assert_nonnull(strstr(t.out, "days"));
  g_assert_nonnull(strstr(t.out, "out of memory"));
  g_assert_nonnull(strstr(t.out, "network analytic"));
  proc_clear(&t);
}

/* Why: every ranked row carries the `ptdsim run` command that reproduces
 * it, to the bit; the text output prints the same commands. */
static void test_commands_reproduce(void) {
  static const char *plans[] = {"plan " TIGHT " --top 4 --format json",
                                "plan --model gpt3-1b --gpus 64 --global-batch 256 --top 3 --format json",
                                "plan " TOY " --gpus 16 --network flow --no-fusion --top 3 --format json"};
  for (guint k = 0; k < G_N_ELEMENTS(plans); k++) {
    cJSON *j = run_json(plans[k]);
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(j, "rows")) {
      const char *cmd = str(row, "command");
      g_assert_true(g_str_has_prefix(cmd, "ptdsim run "));
      char *line = g_strdup_printf("%s --format json", cmd + strlen("ptdsim "));
      cJSON *r = run_json(line);
      g_assert_cmpfloat(num(r, "iteration_time_s"), ==, num(row, "iteration_time_s"));
      g_assert_cmpfloat(num(r, "tflops_per_gpu"), ==, num(row, "tflops_per_gpu"));
      cJSON_Delete(r);
      g_free(line);
    }
    cJSON_Delete(j);
  }
  Proc p = run_line("plan " TIGHT " --top 2");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "\nto reproduce a row:\n"));
  g_assert_nonnull(strstr(p.out, "\n   1  ptdsim run --model gpt3-1b --profile v100-sxm2-16gb --gpus 8 "));
  g_assert_nonnull(strstr(p.out, "\n   2  ptdsim run --model gpt3-1b --profile v100-sxm2-16gb --gpus 8 "));
  proc_clear(&p);
}

#define LLAMA3_70B_H100 "plan --model llama3-70b --cluster dgx-h100-superpod --gpus 512 --global-batch 512 --top 5"

/* Why: a plan for a model of today ranks by time to train and shows what a
 * reader of 2026 compares -- model TFLOP/s per GPU and MFU, never above the
 * GPU's peak -- not Eq. 3, which counts a recomputation forward that
 * these rows do not run; each row's figures are those of its `ptdsim
 * run`, and the reproducing commands write the budget as people do. */
static void test_headline_modern(void) {
  cJSON *j = run_json(LLAMA3_70B_H100 " --tokens 15e12 --format json");
  g_assert_cmpstr(str(j, "throughput"), ==, "model_tflops_per_gpu");
  const cJSON *rows = arr(j, "rows"), *row;
  g_assert_cmpint(cJSON_GetArraySize(rows), ==, 5);
  double days = 0, peak = 0;
  char *profile = NULL; /* the cluster's default profile, as the runs name it */
  cJSON_ArrayForEach(row, rows) {
    g_assert_false(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "sc21_reproduction")));
    g_assert_cmpfloat(num(row, "training_days"), >=, days); /* ranked by time to train */
    days = num(row, "training_days");
    const char *cmd = str(row, "command");
    g_assert_nonnull(strstr(cmd, " --tokens 15T"));
    g_assert_null(strstr(cmd, "15000000000000"));
    char *line = g_strdup_printf("%s --format json", cmd + strlen("ptdsim "));
    cJSON *r = run_json(line);
    g_assert_cmpfloat(num(r, "tokens"), ==, 15e12);
    g_assert_cmpfloat(num(r, "training_days"), ==, num(row, "training_days"));
    peak = profile_peak_tflops(r);
    g_free(profile);
    profile = g_strdup(str(obj(r, "config"), "profile"));
    g_assert_cmpstr(str(obj(r, "config"), "precision"), ==, "bf16");
    g_assert_cmpfloat(num(row, "model_tflops_per_gpu"), ==, num(r, "model_tflops_per_gpu"));
    g_assert_cmpfloat(num(row, "model_tflops_per_gpu"), >, 0);
    g_assert_cmpfloat(num(row, "model_tflops_per_gpu"), <=, peak);
    g_assert_cmpfloat(num(row, "model_tflops_per_gpu"), <, num(row, "tflops_per_gpu"));
    g_assert_cmpfloat_with_epsilon(num(row, "mfu"), num(row, "model_tflops_per_gpu") / peak, 1e-12);
    cJSON_Delete(r);
    g_free(line);
  }
  Proc p = run_line(LLAMA3_70B_H100 " --tokens 15e12");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, " iteration_s model_TFLOP/s    MFU   mem_GiB tok/s/GPU     days run_days    ETT\n"));
  g_assert_null(strstr(p.out, "Eq3"));
  row = cJSON_GetArrayItem(rows, 0);
  char *first = g_strdup_printf(" %11.4f %13.1f %5.1f%% %9.1f %9.0f %8.2f %8.2f %5.1f%%\n",
                                num(row, "iteration_time_s"), num(row, "model_tflops_per_gpu"), 100 * num(row, "mfu"),
                                num(row, "memory_per_gpu_GiB"), num(row, "tokens_per_s_per_gpu"),
                                num(row, "training_days"),
                                num(row, "whole_run_days"), 100 * num(row, "effective_training_time"));
  const char *rank1 = strstr(p.out, "\n   1 ");
  g_assert_nonnull(rank1);
  char *line1 = g_strndup(rank1 + 1, (gsize)(strchr(rank1 + 1, '\n') + 1 - (rank1 + 1)));
  g_assert_true(g_str_has_suffix(line1, first));
  g_free(line1);
  char *legend = g_strdup_printf("\nMFU: model_TFLOP/s over %s's bf16 peak, %.1f TFLOP/s\n", profile, peak);
  g_free(profile);
  g_assert_nonnull(strstr(p.out, legend));
  g_assert_nonnull(strstr(p.out, " --tokens 15T"));
  g_free(legend);
  g_free(first);
  proc_clear(&p);
  cJSON_Delete(j);
}

/* Why: where every row shown is an SC21 reproduction (Megatron's GPT on
 * the 2021 stack: here t = d = 1, so no sequence parallelism or
 * distributed optimizer, pinned to fused attention and full
 * recomputation), the table shows Eq. 3 as the paper reports it, labelled
 * so; one column never mixes the two kinds of TFLOP/s. */
static void test_headline_sc21(void) {
  const char *plan = "plan --model gpt3-1b --gpus 8 --global-batch 16 --tp 1 --dp 1 --attention fused --recompute full";
  char *json_args = g_strconcat(plan, " --format json", NULL);
  cJSON *j = run_json(json_args);
  g_assert_cmpstr(str(j, "throughput"), ==, "tflops_per_gpu");
  const cJSON *row;
  cJSON_ArrayForEach(row, arr(j, "rows")) g_assert_true(
      cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "sc21_reproduction")));
  Proc p = run_line(plan);
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, " iteration_s Eq3_TFLOP/s   mem_GiB tok/s/GPU\n"));
  g_assert_nonnull(strstr(p.out, "\nEq3_TFLOP/s: per GPU by SC21's Eq. 3, "));
  g_assert_null(strstr(p.out, "MFU"));
  row = cJSON_GetArrayItem(arr(j, "rows"), 0);
  char *first = g_strdup_printf(" %11.4f %11.1f %9.1f %9.0f\n", num(row, "iteration_time_s"),
                                num(row, "tflops_per_gpu"), num(row, "memory_per_gpu_GiB"),
                                num(row, "tokens_per_s_per_gpu"));
  g_assert_nonnull(strstr(p.out, first));
  g_free(first);
  proc_clear(&p);
  cJSON_Delete(j);
  /* the same search with flash attention too: every row in model FLOPs */
  j = run_json("plan --model gpt3-1b --gpus 8 --global-batch 16 --tp 1 --dp 1 --recompute full --format json");
  g_assert_cmpstr(str(j, "throughput"), ==, "model_tflops_per_gpu");
  cJSON_Delete(j);
  g_free(json_args);
}

/* Why: a configuration option pins the search to it: --tp 2 gives t = 2
 * rows only, --schedule interleaved interleaved rows only, --zero 2 ZeRO-2
 * rows only, --recompute none no recomputation. */
static void test_pins(void) {
  cJSON *j = run_json("plan --model gpt3-1b --gpus 32 --global-batch 64 --tp 2 --schedule interleaved "
                      "--recompute full --top 1000 --format json");
  cJSON *all = run_json("plan --model gpt3-1b --gpus 32 --global-batch 64 --top 100000 --format json");
  const cJSON *row;
  guint n = 0, want = 0;
  cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(j, "rows")) {
    g_assert_cmpfloat(num(row, "tp"), ==, 2);
    g_assert_cmpstr(str(row, "schedule"), ==, "interleaved");
    g_assert_cmpstr(str(row, "recompute"), ==, "full");
    n++;
  }
  /* exactly the unpinned search's rows that match */
  cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(all, "rows")) want +=
      num(row, "tp") == 2 && strcmp(str(row, "schedule"), "interleaved") == 0 && strcmp(str(row, "recompute"), "full") == 0;
  g_assert_cmpuint(n, ==, want);
  g_assert_cmpuint(n, >, 0);
  cJSON_Delete(j);
  cJSON_Delete(all);
  j = run_json("plan --model gpt3-1b --gpus 64 --global-batch 256 --zero 2 --recompute none --top 100 --format json");
  cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(j, "rows")) {
    g_assert_cmpfloat(num(row, "zero"), ==, 2);
    g_assert_cmpstr(str(row, "recompute"), ==, "none");
  }
  cJSON_Delete(j);
}

/* Why: --memory-reserve keeps memory back from the model: a candidate fits
 * when its memory is at most the GPU's less the reserve, and a larger
 * reserve turns more candidates away. */
static void test_memory_reserve(void) {
  char *path = g_build_filename(g_getenv("PTDSIM_DATA_DIR"), "calibrate", "profiles", "v100-sxm2-16gb.json", NULL);
  char *text = slurp(path, NULL);
  cJSON *prof = cJSON_Parse(text);
  double gib = num(prof, "memory_GiB"); /* TIGHT's GPU */
  cJSON_Delete(prof);
  g_free(text);
  g_free(path);
  guint oom_prev = 0;
  const double reserves[] = {0, 3, 6};
  for (guint i = 0; i < G_N_ELEMENTS(reserves); i++) {
    char *args = g_strdup_printf("plan " TIGHT " --memory-reserve %g --show-all --top 1000000 --format json",
                                 reserves[i]);
    cJSON *j = run_json(args);
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(j, "rows"))
      g_assert_cmpfloat(num(row, "memory_per_gpu_GiB"), <=, gib - reserves[i]);
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(j, "rejected"))
      if (strcmp(str(row, "status"), "out_of_memory") == 0)
        g_assert_cmpfloat(num(row, "memory_per_gpu_GiB"), >, gib - reserves[i]);
    guint oom = (guint)num(j, "out_of_memory");
    if (i > 0)
      g_assert_cmpuint(oom, >, oom_prev);
    oom_prev = oom;
    cJSON_Delete(j);
    g_free(args);
  }
  /* a run says how much it keeps back */
  cJSON *r = run_json("run --model gpt3-1b --gpus 8 --tp 2 --pp 2 --global-batch 8 --network analytic "
                      "--memory-reserve 2.5 --format json");
  g_assert_cmpfloat(num(obj(r, "memory_per_gpu_GiB"), "reserve"), ==, 2.5);
  cJSON_Delete(r);
  Proc p = run_line("run --model gpt3-1b --gpus 8 --tp 2 --pp 2 --global-batch 8 --memory-reserve lots");
  assert_one_line_error(&p, "--memory-reserve 'lots'");
  proc_clear(&p);
  p = run_line("run --model gpt3-1b --gpus 8 --tp 2 --pp 2 --global-batch 8 --memory-reserve -1");
  assert_one_line_error(&p, "--memory-reserve '-1'");
  proc_clear(&p);
}

/* Why: --show-all lists every candidate not ranked, each with its status
 * and a reason, and they add up with the ranked ones to what was searched. */
static void test_show_all(void) {
  cJSON *j = run_json("plan " TIGHT " --memory-reserve 0 --show-all --top 1000000 --format json");
  const cJSON *rej = cJSON_GetObjectItemCaseSensitive(j, "rejected"), *row;
  g_assert_cmpfloat(cJSON_GetArraySize(rej) + num(j, "ranked"), ==, num(j, "searched"));
  guint oom = 0;
  cJSON_ArrayForEach(row, rej) {
    const char *st = str(row, "status");
    g_assert_true(strlen(str(row, "reason")) > 0);
    if (strcmp(st, "out_of_memory") == 0) {
      oom++;
      g_assert_cmpfloat(num(row, "memory_per_gpu_GiB"), >, 16.0);
      g_assert_false(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "fits_in_memory")));
    }
  }
  g_assert_cmpfloat(oom, ==, num(j, "out_of_memory"));
  g_assert_cmpuint(oom, >, 0);
  cJSON_Delete(j);
  Proc p = run_line("plan " TIGHT " --show-all --top 2");
  g_assert_nonnull(strstr(p.out, "not ranked ("));
  g_assert_nonnull(strstr(p.out, "out_of_memory: needs "));
  proc_clear(&p);
}

/* Why: the ranking and the counts do not depend on the threads (what is
 * pruned included: several batches are simulated before pruning stops). */
static void test_jobs(void) {
  Proc a = run_line("plan --model gpt3-1b --gpus 32 --global-batch 64 --top 20 --jobs 1 --format json");
  Proc b = run_line("plan --model gpt3-1b --gpus 32 --global-batch 64 --top 20 --jobs 2 --format json");
  Proc c = run_line("plan --model gpt3-1b --gpus 32 --global-batch 64 --top 20 --jobs 5 --format json");
  g_assert_cmpint(a.status, ==, 0);
  cJSON *j = cJSON_Parse(a.out);
  g_assert_cmpfloat(num(j, "pruned"), >, 0);
  g_assert_cmpfloat(num(j, "simulated"), >, 32);
  cJSON_Delete(j);
  g_assert_cmpstr(a.out, ==, b.out);
  g_assert_cmpstr(a.out, ==, c.out);
  proc_clear(&a);
  proc_clear(&b);
  proc_clear(&c);
}

typedef struct {
  const char *args, *needle;
} Bad;

static const Bad bad_cases[] = {
    {"plan --gpus 8 --global-batch 16", "no model"},
    {"plan --model gpt3-1b --global-batch 16", "--gpus is required"},
    {"plan --model gpt3-1b --gpus 8", "--global-batch is required"},
    {"plan --model gpt3-175b --gpus 8 --global-batch 16", "no configuration fits"},
    {"plan --model gpt3-1b --gpus 8 --global-batch 16 --top 0", "--top"},
    {"plan --model gpt3-1b --gpus 8 --global-batch 16 --network carrier-pigeon", "--network"},
    {"plan --model gpt3-1b --gpus 8 --global-batch 16 --format xml", "--format"},
    {"plan --model gpt3-1b --gpus 100000 --global-batch 16", "more than cluster"},
    {"plan --model nosuch --gpus 8 --global-batch 16", "unknown --model"},
    {"plan --model gpt3-1b --gpus 8 --global-batch 16 extra", "unexpected argument"},
    {"plan --model gpt3-1b --gpus 8 --global-batch 16 --jobs 0", "--jobs '0' is out of range"},
    {"plan --model gpt3-1b --gpus 8 --global-batch 16 --top 010", "--top '010' is out of range"},
    {"plan --model gpt3-1b --gpus 8 --global-batch 16 --allow-oom", "--allow-oom belongs to run and sweep"},
    {"plan --model gpt3-1b --gpus 8 --global-batch 16 --schedule terapipe", "for TeraPipe, sweep"},
    {"plan --model gpt3-1b --gpus 8 --global-batch 16 --tp 3", "no candidate agrees with --tp"},
    {"plan --model gpt3-1b --gpus 8 --global-batch 16 --tp 08", "is not a whole number"},
};

/* Why: every bad input is one line on stderr, non-zero exit, no stdout. */
static void test_bad_input(gconstpointer data) {
  const Bad *b = data;
  Proc p = run_line(b->args);
  g_assert_cmpint(p.status, ==, 1); /* an error, not a crash */
  g_assert_cmpstr(p.out, ==, "");
  g_assert_nonnull(strstr(p.err, b->needle));
  g_assert_true(g_str_has_prefix(p.err, "ptdsim: "));
  g_assert_cmpint((int)(strchr(p.err, '\n') - p.err), ==, (int)strlen(p.err) - 1);
  proc_clear(&p);
}

static void test_help(void) {
  Proc p = run_line("plan --help");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "--allow-fewer"));
  g_assert_nonnull(strstr(p.out, "--top"));
  proc_clear(&p);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  g_test_add_func("/plan/matches-run", test_matches_run);
  g_test_add_func("/plan/matches-run-gpt", test_matches_run_gpt);
  g_test_add_func("/plan/matches-run-flow", test_matches_run_flow);
  g_test_add_func("/plan/sorted-and-counted", test_sorted_and_counted);
  g_test_add_func("/plan/space-size", test_space_size);
  g_test_add_func("/plan/pruning-exact", test_pruning_exact);
  g_test_add_func("/plan/tokens", test_tokens);
  g_test_add_func("/plan/deterministic", test_deterministic);
  for (guint i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
    char *path = g_strdup_printf("/plan/bad-input/%u", i);
    g_test_add_data_func(path, &bad_cases[i], test_bad_input);
    g_free(path);
  }
  g_test_add_func("/plan/help", test_help);
  g_test_add_func("/plan/commands-reproduce", test_commands_reproduce);
  g_test_add_func("/plan/headline-modern", test_headline_modern);
  g_test_add_func("/plan/headline-sc21", test_headline_sc21);
  g_test_add_func("/plan/pins", test_pins);
  g_test_add_func("/plan/show-all", test_show_all);
  g_test_add_func("/plan/memory-reserve", test_memory_reserve);
  g_test_add_func("/plan/jobs", test_jobs);
  return g_test_run();
}
