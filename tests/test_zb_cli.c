/* End-to-end tests of the zero-bubble and DualPipe schedules, --stage-times,
 * --schedule-file and --dump-schedule through the real binary.
 *
 * Exact: on uniform stages with the times given (--stage-times F,B,W,0) the
 * bubble the simulator measures equals the papers' formulas, computed here:
 *   1F1B   (p-1)(T_F + T_B + T_W)        Qi et al. 2024, table 1
 *   ZB-H1  (p-1)(T_F + T_B - T_W)        ibid., section 3.1
 *   ZB-H2  (p-1)(T_F + T_B - 2 T_W)      ibid.
 *   ZB-V   0 where T_F = T_B = T_W       ibid., section 6
 *   interleaved 1F1B and interleaved ZB with v chunks: the same over v
 *   DualPipe (PP/2 - 1)(F&B + B - 3W)   deepseek-ai/DualPipe README, with
 *     DeepSeek's B the whole backward chunk (T_B + T_W in ZB's terms) and
 *     F&B = F + B (the pair's compute, one after the other); DualPipeV: the
 *     same over its 2p virtual stages, each chunk half a stage's time;
 * and the peak in-flight microbatches equal the papers' memory statements
 * (1F1B, ZB-H1 and ZB-V: p; ZB-H2: 2p-1; DualPipe: PP+1).  A built-in
 * schedule written out and read back runs the identical timeline; malformed
 * and deadlocking schedules are refused with one line naming rank and
 * action.  No number is pasted from a run.
 */
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "cli_harness.h"

static char *tmpdir;

#define BASE "run --model gpt3-1b --layers 48 --profile ideal --micro-batch 1 --format json"

typedef struct {
  double span, bubble, rate, peak, iteration;
} Sched;

static Sched run_sched(guint p, guint m, const char *schedule, const char *times, const char *extra) {
  char *line = g_strdup_printf(BASE " --gpus %u --pp %u --global-batch %u --schedule %s --stage-times %s%s%s", p, p, m,
                               schedule, times, extra ? " " : "", extra ? extra : "");
  cJSON *j = run_json(line);
  const cJSON *ps = obj(j, "pipeline_schedule");
  Sched s = {num(ps, "span_s"), num(ps, "bubble_s"), num(ps, "bubble_rate"), num(ps, "peak_inflight_microbatches"),
             num(j, "iteration_time_s")};
  cJSON_Delete(j);
  g_free(line);
  return s;
}

/* Times in ms, results in s: equal to 1 ns (the engine's integer clock). */
static void assert_ms(double got_s, double want_ms, const char *what) {
  if (fabs(got_s * 1e3 - want_ms) > 1e-6) {
    g_printerr("%s: %.9f ms, formula %.9f ms\n", what, got_s * 1e3, want_ms);
    g_assert_not_reached();
  }
}

/* A chunk's share of a time in ms, on the engine's integer nanoseconds. */
static double chunk_ms(double ms, guint v) { return (double)llround(ms * 1e6 / v) / 1e6; }

static const double times[][3] = {{1, 1, 1}, {2, 1, 1}, {1, 2, 1}, {1, 1, 0.5}, {1.5, 1.2, 0.7}};

static void test_formulas(void) {
  const guint ps[] = {2, 4, 8};
  for (guint a = 0; a < G_N_ELEMENTS(ps); a++)
    for (guint t = 0; t < G_N_ELEMENTS(times); t++) {
      guint p = ps[a], m = 3 * p;
      double F = times[t][0], B = times[t][1], W = times[t][2];
      char tt[64];
      g_snprintf(tt, sizeof tt, "%g,%g,%g,0", F, B, W);
      char what[128];
      g_snprintf(what, sizeof what, "1f1b p=%u %s", p, tt);
      Sched s = run_sched(p, m, "1f1b", tt, NULL);
      assert_ms(s.bubble, (p - 1) * (F + B + W), what);
      assert_ms(s.span, (p - 1) * (F + B + W) + m * (F + B + W), what);
      g_assert_cmpfloat(s.peak, ==, p);
      g_snprintf(what, sizeof what, "zb-h1 p=%u %s", p, tt);
      s = run_sched(p, m, "zb-h1", tt, NULL);
      assert_ms(s.bubble, (p - 1) * (F + B - W), what);
      g_assert_cmpfloat(s.peak, ==, p); /* 1F1B's memory */
      g_snprintf(what, sizeof what, "zb-h2 p=%u %s", p, tt);
      s = run_sched(p, m, "zb-h2", tt, NULL);
      assert_ms(s.bubble, (p - 1) * (F + B - 2 * W), what);
      g_assert_cmpfloat(s.peak, ==, 2 * p - 1);
      /* v chunks divide both bubbles by v, as SC21 section 2.2.2 has it for
       * 1F1B (each chunk's passes take 1/v of the stage's times) */
      for (guint v = 2; v <= 3; v++) {
        char ch[32];
        g_snprintf(ch, sizeof ch, "--chunks %u", v);
        g_snprintf(what, sizeof what, "interleaved-zb v=%u p=%u %s", v, p, tt);
        s = run_sched(p, m - m % p, "interleaved-zb", tt, ch);
        assert_ms(s.bubble, (p - 1) * (chunk_ms(F, v) + chunk_ms(B, v) - chunk_ms(W, v)), what);
        g_snprintf(what, sizeof what, "interleaved v=%u p=%u %s", v, p, tt);
        s = run_sched(p, m - m % p, "interleaved", tt, ch);
        assert_ms(s.bubble, (p - 1) * (chunk_ms(F, v) + chunk_ms(B + W, v)), what);
      }
      if (t == 0) { /* T_F = T_B = T_W */
        s = run_sched(p, m, "zb-v", tt, NULL);
        assert_ms(s.bubble, 0, "zb-v");
        g_assert_cmpfloat(s.peak, ==, p);
      }
    }
}

/* ZB's heuristic (zb-1p, zb-2p, zb-auto) within its memory limit: never
 * more in flight than the limit, never a longer stage span than the
 * handcrafted schedule of that memory (ZB-H1 at p, ZB-H2 at 2p - 1), so
 * zero bubble at equal times with 2p. */
static void test_heuristic(void) {
  for (guint t = 0; t < G_N_ELEMENTS(times); t++) {
    guint p = 4, m = 12;
    double F = times[t][0], B = times[t][1], W = times[t][2];
    char tt[64];
    g_snprintf(tt, sizeof tt, "%g,%g,%g,0", F, B, W);
    Sched one = run_sched(p, m, "zb-1p", tt, NULL), h1 = run_sched(p, m, "zb-h1", tt, NULL);
    g_assert_cmpfloat(one.peak, <=, p);
    g_assert_cmpfloat(one.span, <=, h1.span);
    Sched two = run_sched(p, m, "zb-2p", tt, NULL), h2 = run_sched(p, m, "zb-h2", tt, NULL);
    g_assert_cmpfloat(two.peak, <=, 2 * p);
    g_assert_cmpfloat(two.span, <=, h2.span);
    if (t == 0)
      assert_ms(two.bubble, 0, "zb-2p at equal times");
  }
  /* zb-auto: the limit in GiB becomes microbatches of the stage's
   * activations (1.12 GiB a microbatch here: 1.2 GiB holds one; below one,
   * the run is refused) */
  Sched tight = run_sched(4, 12, "zb-auto", "1,1,1,0", "--activation-limit 1.2");
  Sched loose = run_sched(4, 12, "zb-auto", "1,1,1,0", "--activation-limit 1000");
  g_assert_cmpfloat(tight.peak, <, loose.peak);
  g_assert_cmpfloat(tight.span, >=, loose.span);
  assert_ms(loose.bubble, 0, "zb-auto, memory to spare");
  Proc pr = run_line(BASE " --gpus 4 --pp 4 --global-batch 8 --schedule zb-auto");
  assert_one_line_error(&pr, "give --activation-limit");
  proc_clear(&pr);
  pr = run_line(BASE " --gpus 4 --pp 4 --global-batch 8 --schedule zb-h1 --activation-limit 3");
  assert_one_line_error(&pr, "--activation-limit is zb-auto's");
  proc_clear(&pr);
}

/* The ZB paper's bubble rates (its schedules on the F, B, W and
 * communication times it profiled, traces/reference/zero-bubble.json: the
 * ICLR table with ZB-1P and ZB-2P, the arXiv table with interleaved 1F1B
 * and ZB-V) through `figure zb-bubbles`: each within 0.01 of the published
 * rate, the acceptance the paper's reproduction is held to; every row of
 * both tables and every schedule present, in order; and a row the same as
 * `run` gives for it directly. */
static void test_paper_bubbles(void) {
  char *dir = g_build_filename(tmpdir, "zbfig", NULL);
  char *line = g_strdup_printf("figure zb-bubbles -o %s", dir);
  run_line_ok(line);
  char *path = g_build_filename(dir, "zb-bubbles.json", NULL);
  gsize len;
  char *text = slurp(path, &len);
  cJSON *fig = cJSON_Parse(text);
  g_assert_nonnull(fig);
  cJSON *ref = load_shipped("traces/reference", "zero-bubble");
  const cJSON *rows = arr(fig, "rows");
  static const char *const tables[] = {"bubble_rates", "v_bubble_rates"};
  guint k = 0;
  for (guint t = 0; t < G_N_ELEMENTS(tables); t++) {
    const cJSON *table = obj(ref, tables[t]), *want;
    guint n_sched = (guint)cJSON_GetArraySize(arr(table, "schedules"));
    cJSON_ArrayForEach(want, arr(table, "rows")) {
      for (guint j = 0; j < n_sched; j++, k++) {
        const cJSON *r = cJSON_GetArrayItem(rows, (int)k);
        g_assert_nonnull(r);
        g_assert_cmpstr(str(r, "table"), ==, tables[t]);
        g_assert_cmpstr(str(r, "schedule"), ==, cJSON_GetArrayItem(arr(table, "schedules"), (int)j)->valuestring);
        g_assert_cmpfloat(num(r, "microbatches"), ==, cJSON_GetArrayItem(want, 2)->valuedouble);
        double pub = cJSON_GetArrayItem(want, 10 + (int)j)->valuedouble;
        g_assert_cmpfloat(num(r, "published_bubble_rate"), ==, pub);
        if (fabs(num(r, "bubble_rate") - pub) > 0.01) {
          g_printerr("%s m %g %s: %.4f, published %.4f\n", str(r, "model"), num(r, "microbatches"),
                     str(r, "schedule"), num(r, "bubble_rate"), pub);
          g_assert_not_reached();
        }
      }
    }
  }
  g_assert_cmpuint((guint)cJSON_GetArraySize(rows), ==, k);
  /* the first setting under zb-2p, run directly */
  const cJSON *table = obj(ref, "bubble_rates"), *first = cJSON_GetArrayItem(arr(table, "rows"), 0);
  guint n_sched = (guint)cJSON_GetArraySize(arr(table, "schedules"));
  char times[96];
  g_snprintf(times, sizeof times, "%.17g,%.17g,%.17g,%.17g", cJSON_GetArrayItem(first, 6)->valuedouble,
             cJSON_GetArrayItem(first, 7)->valuedouble, cJSON_GetArrayItem(first, 8)->valuedouble,
             cJSON_GetArrayItem(first, 9)->valuedouble);
  char *direct = g_strdup_printf("run --layers %g --hidden %g --heads %g --seq-len 1024 --vocab 51200 --gpus %g "
                                 "--pp %g --global-batch %g --micro-batch 1 --recompute none --schedule zb-2p "
                                 "--stage-times %s --format json",
                                 cJSON_GetArrayItem(first, 5)->valuedouble, cJSON_GetArrayItem(first, 3)->valuedouble,
                                 cJSON_GetArrayItem(first, 4)->valuedouble, cJSON_GetArrayItem(first, 1)->valuedouble,
                                 cJSON_GetArrayItem(first, 1)->valuedouble, cJSON_GetArrayItem(first, 2)->valuedouble,
                                 times);
  cJSON *run = run_json(direct);
  const cJSON *zb2 = cJSON_GetArrayItem(rows, (int)n_sched - 1);
  g_assert_cmpstr(str(zb2, "schedule"), ==, "zb-2p");
  g_assert_cmpfloat(num(obj(run, "pipeline_schedule"), "bubble_rate"), ==, num(zb2, "bubble_rate"));
  cJSON_Delete(run);
  g_free(direct);
  cJSON_Delete(ref);
  cJSON_Delete(fig);
  g_free(text);
  g_free(path);
  g_free(line);
  g_free(dir);
}

static void test_dualpipe(void) {
  for (guint p = 2; p <= 8; p *= 2) {
    guint m = 4 * p;
    /* DualPipe: a chunk is a stage: F = 1, DeepSeek's B = I + W = 2, W = 1 */
    double F = 1, Bfull = 2, W = 1, FB = F + Bfull;
    Sched s = run_sched(p, m, "dualpipe", "1,1,1,0", NULL);
    assert_ms(s.bubble, (p / 2.0 - 1) * (FB + Bfull - 3 * W), "dualpipe");
    g_assert_cmpfloat(s.peak, ==, p + 1); /* PP + 1 */
    /* DualPipeV: 2p virtual stages, each chunk half the stage's times */
    F = 0.5, Bfull = 1, W = 0.5, FB = F + Bfull;
    s = run_sched(p, m, "dualpipev", "1,1,1,0", NULL);
    assert_ms(s.bubble, (2.0 * p / 2 - 1) * (FB + Bfull - 3 * W), "dualpipev");
  }
}

/* Each built-in schedule written out (--dump-schedule) and read back
 * (--schedule-file) runs the identical timeline, on the cost model too; the
 * file written again is the same bytes.  (A file runs as
 * torch.distributed.pipelining runs it, sends posted ahead; Megatron's
 * GPipe, 1F1B and interleaved 1F1B block on theirs under the cost model,
 * so those are compared with --stage-times, where none blocks.) */
static void test_roundtrip(void) {
  const char *scheds[] = {"zb-h1",         "zb-h2",         "zb-1p", "zb-2p",
                          "zb-v",          "dualpipev",     "interleaved-zb --chunks 2",
                          "1f1b --stage-times 1,2,1,0.1", "gpipe --stage-times 1,2,1,0.1",
                          "interleaved --chunks 2 --stage-times 1,2,1,0.1"};
  for (guint j = 0; j < G_N_ELEMENTS(scheds); j++) {
    char *csv = g_build_filename(tmpdir, "s.csv", NULL), *csv2 = g_build_filename(tmpdir, "s2.csv", NULL);
    const char *times = strstr(scheds[j], "--stage-times");
    char *cfg = g_strdup_printf("--model gpt3-1b --layers 48 --gpus 16 --tp 2 --pp 4 --global-batch 32 --micro-batch 1 "
                                "--recompute none --format json%s%s",
                                times ? " " : "", times ? times : "");
    char *name = times ? g_strndup(scheds[j], (gsize)(times - scheds[j] - 1)) : g_strdup(scheds[j]);
    char *a = g_strdup_printf("run %s --schedule %s --dump-schedule %s", cfg, name, csv);
    g_free(name);
    char *b = g_strdup_printf("run %s --schedule-file %s --dump-schedule %s", cfg, csv, csv2);
    cJSON *x = run_json(a), *y = run_json(b);
    g_assert_cmpfloat(num(x, "iteration_time_s"), ==, num(y, "iteration_time_s"));
    g_assert_cmpfloat(num(obj(x, "pipeline_schedule"), "bubble_s"), ==, num(obj(y, "pipeline_schedule"), "bubble_s"));
    g_assert_cmpfloat(num(obj(x, "memory_per_gpu_GiB"), "total"), ==, num(obj(y, "memory_per_gpu_GiB"), "total"));
    gsize la, lb;
    char *ta = slurp(csv, &la), *tb = slurp(csv2, &lb);
    g_assert_cmpstr(ta, ==, tb);
    g_free(ta);
    g_free(tb);
    cJSON_Delete(x);
    cJSON_Delete(y);
    g_free(a);
    g_free(b);
    g_free(cfg);
    g_free(csv);
    g_free(csv2);
  }
}

/* The symmetry shortcut stays exact under the new schedules: every GPU
 * simulated gives the same iteration, with Megatron's local DDP and torch
 * DDP (whose buckets wait for the last W). */
static void test_symmetry(void) {
  const char *scheds[] = {"zb-h1", "zb-v", "dualpipe", "dualpipev", "zb-2p"};
  for (guint j = 0; j < G_N_ELEMENTS(scheds); j++)
    for (guint torch = 0; torch < 2; torch++) {
      char *a = g_strdup_printf("run --model gpt3-1b --layers 16 --gpus 16 --tp 2 --pp 4 --global-batch 16 "
                                "--micro-batch 1 --network analytic --schedule %s%s --format json",
                                scheds[j], torch ? " --ddp torch" : "");
      char *b = g_strdup_printf("%s --no-symmetry", a);
      cJSON *x = run_json(a), *y = run_json(b);
      g_assert_cmpfloat(num(x, "iteration_time_s"), ==, num(y, "iteration_time_s"));
      cJSON_Delete(x);
      cJSON_Delete(y);
      g_free(a);
      g_free(b);
    }
}

/* A mixture-of-experts model under the split schedules: its expert layers'
 * backward runs whole in B (only the dense layers' weight gradients are
 * deferred), so the W items are lighter and the iteration still runs. */
static void test_moe(void) {
  const char *scheds[] = {"zb-h1", "zb-v", "zb-2p"};
  for (guint j = 0; j < G_N_ELEMENTS(scheds); j++) {
    char *a = g_strdup_printf("run --model mixtral-8x7b --cluster dgx-h100-superpod --gpus 64 --pp 4 --global-batch 64 "
                              "--ep 8 --recompute full --network analytic --schedule %s --format json",
                              scheds[j]);
    cJSON *x = run_json(a);
    g_assert_cmpfloat(num(obj(x, "pipeline_schedule"), "bubble_rate"), <, 1);
    g_assert_cmpfloat(num(x, "iteration_time_s"), >, 0);
    cJSON_Delete(x);
    g_free(a);
  }
}

/* DualPipe's F&B hides one microbatch's expert all-to-all behind the other's
 * computation: DualPipeV's order run as written (its pairs overlapped) is
 * faster than the same order with every pair split into an F then a B (the
 * dumped CSV with its OVERLAP_F_B cells taken apart), by no more than the
 * MoE communication there was to hide; on a dense model without tensor
 * parallelism there is nothing to hide and the two are equal. */
static void test_dualpipe_overlap(void) {
  const char *models[] = {"--model qwen3-30b-a3b --layers 8 --cluster dgx-h100-superpod --gpus 32 --pp 2 --ep 16 "
                          "--global-batch 64",
                          "--model gpt3-1b --layers 16 --gpus 4 --pp 4 --global-batch 16 --recompute none"};
  for (guint j = 0; j < G_N_ELEMENTS(models); j++) {
    char *csv = g_build_filename(tmpdir, "pairs.csv", NULL), *split = g_build_filename(tmpdir, "split.csv", NULL);
    char *a = g_strdup_printf("run %s --micro-batch 1 --network analytic --schedule dualpipev --dump-schedule %s "
                              "--format json",
                              models[j], csv);
    cJSON *x = run_json(a);
    gsize len;
    char *text = slurp(csv, &len);
    GRegex *pair = g_regex_new("\\(([^;]*);([^)]*)\\)OVERLAP_F_B", 0, 0, NULL);
    char *apart = g_regex_replace(pair, text, -1, 0, "\\1,\\2", 0, NULL);
    g_assert_cmpstr(apart, !=, text); /* there were pairs */
    g_file_set_contents(split, apart, -1, NULL);
    char *b = g_strdup_printf("run %s --micro-batch 1 --network analytic --schedule-file %s --format json", models[j],
                              split);
    cJSON *y = run_json(b);
    double together = num(x, "iteration_time_s"), alone = num(y, "iteration_time_s");
    if (j == 0) {
      g_assert_cmpfloat(together, <, alone);
      g_assert_cmpfloat(alone - together, <=, num(obj(x, "moe"), "comm_s"));
    } else
      g_assert_cmpfloat(together, ==, alone);
    cJSON_Delete(x);
    cJSON_Delete(y);
    g_regex_unref(pair);
    g_free(apart);
    g_free(text);
    g_free(a);
    g_free(b);
    g_free(csv);
    g_free(split);
  }
}

/* A schedule of one's own: 2 ranks, 2 microbatches, written by hand. */
typedef struct {
  const char *csv, *needle;
} Bad;

static const Bad bad[] = {
    {"0F0,0F1,0I0,0W0,0I1,0W1\n1F0,1I0,1F1,1I1,1W0,1W1\n", NULL}, /* valid: ZB-H1 of 2 ranks */
    {"0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n", NULL},                 /* valid: 1F1B */
    {"0F0,0F1,0I0,0W0,0I1,0W1\n", "has 1 rows"},
    {"0F0,0F1,0X0,0W0,0I1,0W1\n1F0,1I0,1W0,1F1,1I1,1W1\n", "rank 0, action 2: '0X0' is not an action"},
    {"0F0,0F1,0W0,0I0,0I1,0W1\n1F0,1I0,1W0,1F1,1I1,1W1\n", "rank 0, action 0W0 comes before its input gradient"},
    {"0F0,0I0,0F1,0W0,0I1,0W1\n1F0,1I0,1W0,1F1,1I1,1W1\n", NULL}, /* valid, if slower */
    {"0I0,0F0,0F1,0W0,0I1,0W1\n1F0,1I0,1W0,1F1,1I1,1W1\n", "rank 0, action 0I0 comes before its forward 0F0"},
    {"0F0,0F1,0I0,0W0,0I1\n1F0,1I0,1W0,1F1,1I1,1W1\n", "rank 0 misses 0W1"},
    {"0F0,0F1,0I1,0W1,0I0,0W0\n1F0,1F1,1I0,1W0,1I1,1W1\n", NULL}, /* valid: backwards in another order */
    {"0F0,0I0,0W0,0F1,0I1,0W1\n1F1,1I1,1W1,1F0,1I0,1W0\n", "deadlock"},
    {"0F0,0F1,0I0,0W0,0I1,0W1,1F0\n1F0,1I0,1W0,1F1,1I1,1W1\n", "rank 1, action 1F0: stage 1 already runs on rank 0"},
    {"0F0,0F1,0F2,0I0,0W0,0I1,0W1\n1F0,1I0,1W0,1F1,1I1,1W1\n", "microbatch 2 is past the 2 of the run"},
    {"0F0,0F0,0F1,0I0,0W0,0I1,0W1\n1F0,1I0,1W0,1F1,1I1,1W1\n", "rank 0, action 0F0 runs twice"},
    {"0F0,0F1,0B0,0I1,0W1\n1F0,1B0,1F1,1I1,1W1\n", NULL}, /* B and I/W mixed over microbatches: fine */
    {"0F0,0F1,0B0,0I0,0B1\n1F0,1B0,1F1,1B1\n", "either B or I and W"},
};

static void test_files(void) {
  char *path = g_build_filename(tmpdir, "mine.csv", NULL);
  for (guint j = 0; j < G_N_ELEMENTS(bad); j++) {
    g_assert_true(g_file_set_contents(path, bad[j].csv, -1, NULL));
    char *line = g_strdup_printf(BASE " --gpus 2 --pp 2 --global-batch 2 --stage-times 1,1,1,0 --schedule-file %s",
                                 path);
    Proc pr = run_line(line);
    if (bad[j].needle)
      assert_one_line_error(&pr, bad[j].needle);
    else {
      g_assert_cmpint(pr.status, ==, 0);
      g_assert_cmpstr(pr.err, ==, "");
    }
    proc_clear(&pr);
    g_free(line);
  }
  /* the hand-written ZB-H1 of 2 ranks runs as zb-h1 does */
  g_assert_true(g_file_set_contents(path, bad[0].csv, -1, NULL));
  char *line = g_strdup_printf(BASE " --gpus 2 --pp 2 --global-batch 2 --stage-times 1,2,1,0 --schedule-file %s", path);
  cJSON *mine = run_json(line);
  Sched zb = run_sched(2, 2, "zb-h1", "1,2,1,0", NULL);
  g_assert_cmpfloat(num(obj(mine, "pipeline_schedule"), "bubble_s"), ==, zb.bubble);
  assert_ms(zb.bubble, (2 - 1) * (1 + 2 - 1), "zb-h1 p=2 m=2");
  cJSON_Delete(mine);
  g_free(line);
  g_free(path);
}

static void test_bad_options(void) {
  const char *cases[][2] = {
      {BASE " --gpus 4 --pp 4 --global-batch 8 --stage-times 1,1,1", "is not F,B,W,COMM"},
      {BASE " --gpus 4 --pp 4 --global-batch 8 --stage-times 1,0,1,0", "is not F,B,W,COMM"},
      {BASE " --gpus 4 --pp 4 --global-batch 8 --stage-times 1,x,1,0", "is not F,B,W,COMM"},
      {BASE " --gpus 4 --pp 4 --global-batch 8 --schedule zb-x", "unknown --schedule 'zb-x'"},
      {BASE " --gpus 4 --pp 4 --global-batch 6 --schedule dualpipe", "at least 2p = 8"},
      {BASE " --gpus 4 --pp 4 --global-batch 6 --schedule dualpipev", "at least 2p = 8"},
      {BASE " --gpus 1 --pp 1 --global-batch 8 --schedule zb-h1", "--pp of at least 2"},
      {BASE " --gpus 4 --pp 4 --global-batch 8 --schedule-file /nonexistent.csv", "cannot be read"},
      {BASE " --gpus 4 --pp 4 --global-batch 8 --schedule zb-v --first-stage-layers 9", "write the split as --pipeline-model-parallel-layout"},
      {BASE " --gpus 4 --pp 4 --global-batch 8 --schedule dualpipe --dump-schedule /tmp/never.csv", "cannot write"},
  };
  for (guint j = 0; j < G_N_ELEMENTS(cases); j++) {
    Proc pr = run_line(cases[j][0]);
    assert_one_line_error(&pr, cases[j][1]);
    proc_clear(&pr);
  }
  /* a schedule file that exists (a file that does not is refused first) */
  char *file = g_build_filename(g_getenv("PTDSIM_DATA_DIR"), "fuzz", "seeds", "schedule", "1f1b-p4-m8.bin", NULL);
  char *line = g_strdup_printf(BASE " --gpus 4 --pp 4 --global-batch 8 --schedule zb-h1 --schedule-file %s", file);
  Proc pr = run_line(line);
  assert_one_line_error(&pr, "drop --schedule zb-h1");
  proc_clear(&pr);
  g_free(line);
  g_free(file);
}

/* The V padded as sail-sg pads it: with the embedding and the loss counted
 * as layers, the first and the last virtual stage -- both on stage 0 --
 * hold a layer fewer; a split that does not divide is refused. */
static void test_v_padding(void) {
  cJSON *j = run_json("run --layers 30 --hidden 1024 --heads 16 --seq-len 256 --profile ideal --gpus 8 --pp 8 "
                      "--micro-batch 1 --global-batch 24 --recompute none --schedule zb-v --account-for-embedding "
                      "--account-for-loss --format json");
  const cJSON *virt = arr(obj(j, "config"), "layers_per_virtual_stage");
  g_assert_cmpint(cJSON_GetArraySize(virt), ==, 16);
  for (int i = 0; i < 16; i++)
    g_assert_cmpfloat(cJSON_GetArrayItem(virt, i)->valuedouble, ==, i == 0 || i == 15 ? 1 : 2);
  g_assert_cmpfloat(cJSON_GetArrayItem(arr(obj(j, "config"), "layers_per_stage"), 0)->valuedouble, ==, 2);
  cJSON_Delete(j);
  Proc pr = run_line(BASE " --gpus 8 --pp 8 --global-batch 16 --schedule zb-v --account-for-embedding");
  assert_one_line_error(&pr, "do not divide into --pp 8 stages");
  proc_clear(&pr);
}

/* The text report names the zero-bubble rate; --stage-times is in the
 * config. */
static void test_report(void) {
  Proc pr = run_line("run --model gpt3-1b --layers 48 --profile ideal --gpus 4 --pp 4 --global-batch 8 "
                     "--micro-batch 1 --schedule zb-h1 --stage-times 1,1,1,0");
  g_assert_cmpint(pr.status, ==, 0);
  g_assert_nonnull(strstr(pr.out, "the zero-bubble paper's rate"));
  proc_clear(&pr);
  cJSON *j = run_json(BASE " --gpus 4 --pp 4 --global-batch 8 --schedule zb-h1 --stage-times 1,2,3,0.5");
  const cJSON *st = arr(obj(j, "config"), "stage_times_ms");
  g_assert_cmpint(cJSON_GetArraySize(st), ==, 4);
  g_assert_cmpfloat(cJSON_GetArrayItem(st, 2)->valuedouble, ==, 3);
  g_assert_cmpstr(str(obj(j, "config"), "schedule"), ==, "zb-h1");
  cJSON_Delete(j);
}

/* plan --schedule all searches the zero-bubble family and DualPipe beside
 * 1F1B and interleaved 1F1B; a row's command runs the same iteration; a
 * sweep over --schedule all runs each schedule's row. */
static void test_plan_sweep(void) {
  cJSON *j = run_json("plan --model gpt3-1b --gpus 16 --global-batch 32 --pp 4 --schedule all --top 1000 --format json");
  const cJSON *rows = arr(j, "rows"), *row;
  GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
  gboolean checked = FALSE;
  cJSON_ArrayForEach(row, rows) {
    const char *sch = str(row, "schedule");
    g_hash_table_add(seen, (gpointer)sch);
    if (!checked && strcmp(sch, "zb-v") == 0) { /* its command reproduces it */
      const char *cmd = str(row, "command");
      g_assert_true(g_str_has_prefix(cmd, "ptdsim "));
      char *line = g_strdup_printf("%s --format json", cmd + strlen("ptdsim "));
      cJSON *r = run_json(line);
      g_assert_cmpfloat(num(r, "iteration_time_s"), ==, num(row, "iteration_time_s"));
      cJSON_Delete(r);
      g_free(line);
      checked = TRUE;
    }
  }
  g_assert_true(checked);
  static const char *const want[] = {"1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "interleaved-zb", "dualpipe",
                                     "dualpipev"};
  for (guint i = 0; i < G_N_ELEMENTS(want); i++)
    if (!g_hash_table_contains(seen, want[i])) {
      g_printerr("plan --schedule all found no %s row\n", want[i]);
      g_assert_not_reached();
    }
  g_hash_table_unref(seen);
  cJSON_Delete(j);
  /* without --schedule, plan searches 1F1B and interleaved 1F1B as before */
  j = run_json("plan --model gpt3-1b --gpus 16 --global-batch 32 --pp 4 --top 1000 --format json");
  cJSON_ArrayForEach(row, arr(j, "rows")) {
    const char *sch = str(row, "schedule");
    g_assert_true(strcmp(sch, "1f1b") == 0 || strcmp(sch, "interleaved") == 0);
  }
  cJSON_Delete(j);
  Proc pr = run_line("sweep --model gpt3-1b --gpus 8 --pp 4 --global-batch 16 --schedule zb-h1,zb-v,dualpipev "
                     "--network analytic --stage-times 1,1,1,0;1,2,1,0.1");
  g_assert_cmpint(pr.status, ==, 0);
  char **lines = g_strsplit(pr.out, "\n", -1);
  g_assert_cmpuint(g_strv_length(lines), >=, 7);
  for (guint i = 1; i <= 6; i++)
    g_assert_nonnull(strstr(lines[i], ",ok,"));
  g_strfreev(lines);
  proc_clear(&pr);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  tmpdir = g_dir_make_tmp("ptdsim-zb-XXXXXX", NULL);
  g_test_add_func("/zb/formulas", test_formulas);
  g_test_add_func("/zb/dualpipe", test_dualpipe);
  g_test_add_func("/zb/heuristic", test_heuristic);
  g_test_add_func("/zb/paper-bubbles", test_paper_bubbles);
  g_test_add_func("/zb/roundtrip", test_roundtrip);
  g_test_add_func("/zb/symmetry", test_symmetry);
  g_test_add_func("/zb/moe", test_moe);
  g_test_add_func("/zb/dualpipe-overlap", test_dualpipe_overlap);
  g_test_add_func("/zb/files", test_files);
  g_test_add_func("/zb/bad-options", test_bad_options);
  g_test_add_func("/zb/report", test_report);
  g_test_add_func("/zb/v-padding", test_v_padding);
  g_test_add_func("/zb/plan-sweep", test_plan_sweep);
  int rc = g_test_run();
  char *cmd[] = {"rm", "-rf", tmpdir, NULL};
  g_spawn_sync(NULL, cmd, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, NULL, NULL);
  g_free(tmpdir);
  return rc;
}
