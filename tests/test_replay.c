/* ptdsim — a torch.profiler trace replayed on the engine (replay/): the
 * graph's rules exact on small hand-written traces, in-process; the two
 * shipped traces through the real binary against the span they cover and
 * the step time measured without the profiler; the what-ifs; and every bad
 * trace refused with one line and no output file. */
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <zlib.h>

#include "../replay/replay.h"
#include "cli_harness.h"
#include "test_tmp.h"

static char *tmp;

static char *in_tmp(const char *name) { return g_build_filename(tmp, name, NULL); }

/* Events, times in microseconds: a CUDA call on thread TID, and a GPU op
 * of kind CAT on STREAM. */
#define CALL(tid, name, corr, ts, dur)                                                                                \
  "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"" name "\",\"tid\":" #tid ",\"ts\":" #ts ",\"dur\":" #dur          \
  ",\"args\":{\"correlation\":" #corr "}}"
#define GPU(cat, name, stream, corr, ts, dur)                                                                          \
  "{\"ph\":\"X\",\"cat\":\"" cat "\",\"name\":\"" name "\",\"ts\":" #ts ",\"dur\":" #dur ",\"args\":{\"stream\":" #stream \
  ",\"correlation\":" #corr "}}"
#define KERNEL(stream, corr, ts, dur) GPU("kernel", "k", stream, corr, ts, dur)
#define TRACE(events) "{\"traceEvents\":[" events "]}"

/* Replays `text` with the options; asserts it is accepted. */
static CalibProfTrace *replayed(const char *text, const ReplayOptions *o, ReplayResult *r) {
  GError *error = NULL;
  CalibProfTrace *t = calib_prof_parse(text, strlen(text), "case.json", &error);
  g_assert_no_error(error);
  g_assert_true(replay_run(t, o, r, &error));
  g_assert_no_error(error);
  return t;
}

static gint64 step_of(const char *text, gboolean graphs) {
  ReplayOptions o = {graphs, NULL, NULL};
  ReplayResult r;
  CalibProfTrace *t = replayed(text, &o, &r);
  gint64 step = r.step_ns;
  replay_result_clear(&r);
  calib_prof_free(t);
  return step;
}

/* Two kernels on one stream: the second after its launch and after the
 * first.  Host: L1 [0, 2], 1 us of host time, L2 [3, 5]; K1 [2, 12]; K2
 * [12, 17]: the trace's own times. */
static const char *const two_kernels =
    TRACE(CALL(1, "cudaLaunchKernel", 1, 0, 2) "," CALL(1, "cudaLaunchKernel", 2, 3, 2) "," KERNEL(7, 1, 2, 10) ","
          KERNEL(7, 2, 12, 5));

static void test_two_kernels(void) {
  ReplayOptions o = {FALSE, NULL, NULL};
  ReplayResult r;
  CalibProfTrace *t = replayed(two_kernels, &o, &r);
  g_assert_cmpint(r.step_ns, ==, 17000);
  g_assert_cmpint(r.trace_span_ns, ==, 17000);
  g_assert_cmpint(r.gpu_start_ns[0], ==, 2000);
  g_assert_cmpint(r.gpu_start_ns[1], ==, 12000);
  g_assert_cmpint(r.gpu_busy_ns, ==, 15000);
  g_assert_cmpint(r.gpu_span_ns, ==, 15000);
  g_assert_cmpint(r.host_call_ns, ==, 4000);
  g_assert_cmpint(r.host_gap_ns, ==, 1000);
  g_assert_cmpuint(r.threads, ==, 1);
  g_assert_cmpuint(r.calls, ==, 2);
  /* the replayed timeline as a Chrome trace: the calls and the kernels at
   * their replayed times, named and tied as in the trace */
  cJSON *chrome = replay_chrome_trace(t, &r, NULL);
  const cJSON *e;
  double ts[4] = {-1, -1, -1, -1}, dur[4] = {-1, -1, -1, -1};
  guint k = 0;
  cJSON_ArrayForEach(e, arr(chrome, "traceEvents")) {
    if (strcmp(str(e, "ph"), "X") != 0)
      continue;
    g_assert_cmpuint(k, <, 4);
    ts[k] = num(e, "ts");
    dur[k++] = num(e, "dur");
  }
  g_assert_cmpuint(k, ==, 4);
  const double want_ts[] = {0, 3, 2, 12}, want_dur[] = {2, 2, 10, 5}; /* L1, L2, K1, K2 */
  for (guint i = 0; i < 4; i++) {
    g_assert_cmpfloat(ts[i], ==, want_ts[i]);
    g_assert_cmpfloat(dur[i], ==, want_dur[i]);
  }
  cJSON_Delete(chrome);
  replay_result_clear(&r);
  calib_prof_free(t);
  /* CUDA graphs: the launches cost nothing, the kernels run back to back */
  g_assert_cmpint(step_of(two_kernels, TRUE), ==, 15000);
}

/* A launch-bound chain: launches of 4 us every 10 us, kernels of 1 us, the
 * GPU idle between them; then a cudaDeviceSynchronize at 34 that returned
 * at 38, 2 us after the last kernel ended (36 in the trace).  Replayed:
 * kernel i runs [10 i + 4, 10 i + 5] (on its launch's return), the sync
 * waits for the last one (35) and takes its 2 us: 37. */
static const char *const chain =
    TRACE(CALL(1, "cudaLaunchKernel", 1, 0, 4) "," CALL(1, "cudaLaunchKernel", 2, 10, 4) ","
          CALL(1, "cudaLaunchKernel", 3, 20, 4) "," CALL(1, "cudaLaunchKernel", 4, 30, 4) ","
          CALL(1, "cudaDeviceSynchronize", 5, 34, 4) "," KERNEL(7, 1, 5, 1) "," KERNEL(7, 2, 15, 1) ","
          KERNEL(7, 3, 25, 1) "," KERNEL(7, 4, 35, 1));

static void test_launch_bound_chain(void) {
  ReplayOptions o = {FALSE, NULL, NULL};
  ReplayResult r;
  CalibProfTrace *t = replayed(chain, &o, &r);
  g_assert_cmpint(r.step_ns, ==, 37000);
  g_assert_cmpint(r.trace_span_ns, ==, 38000);
  for (guint i = 0; i < 4; i++)
    g_assert_cmpint(r.gpu_start_ns[i], ==, 10000 * (gint64)i + 4000);
  g_assert_cmpint(r.gpu_busy_ns, ==, 4000);
  g_assert_cmpuint(r.syncs, ==, 1);
  g_assert_cmpint(r.host_call_ns, ==, 4 * 4000 + 2000);
  replay_result_clear(&r);
  calib_prof_free(t);
  /* CUDA graphs: the four kernels back to back from 0, the sync's 2 us */
  g_assert_cmpint(step_of(chain, TRUE), ==, 6000);
}

/* A cross-stream wait: K1 on stream 7 [2, 22]; an event recorded, stream 8
 * made to wait for it, K2 launched on stream 8 at 7, which the trace shows
 * starting at 22, when K1 ended: replayed, K2 waits for K1 (without the
 * wait it would start at 9, on its launch's return). */
#define WAIT_CASE(k2_start)                                                                                           \
  TRACE(CALL(1, "cudaLaunchKernel", 1, 0, 2) "," CALL(1, "cudaEventRecord", 10, 3, 1) ","                             \
        CALL(1, "cudaStreamWaitEvent", 11, 5, 1) "," CALL(1, "cudaLaunchKernel", 2, 7, 2) "," KERNEL(7, 1, 2, 20)      \
        "," KERNEL(8, 2, k2_start, 3))

static void test_cross_stream_wait(void) {
  ReplayOptions o = {FALSE, NULL, NULL};
  ReplayResult r;
  CalibProfTrace *t = replayed(WAIT_CASE(22), &o, &r);
  g_assert_cmpint(r.step_ns, ==, 25000);
  g_assert_cmpint(r.gpu_start_ns[1], ==, 22000);
  g_assert_cmpuint(r.stream_waits, ==, 1);
  g_assert_cmpuint(r.waits_kept, ==, 1);
  g_assert_cmpuint(r.waits_dropped, ==, 0);
  replay_result_clear(&r);
  calib_prof_free(t);
  /* a trace where K2 ran beside K1 contradicts the wait: it is not kept */
  t = replayed(WAIT_CASE(10), &o, &r);
  g_assert_cmpuint(r.waits_kept, ==, 0);
  g_assert_cmpuint(r.waits_dropped, ==, 1);
  g_assert_cmpint(r.gpu_start_ns[1], ==, 9000);
  g_assert_cmpint(r.step_ns, ==, 22000);
  replay_result_clear(&r);
  calib_prof_free(t);
}

/* Two threads: thread 2 launches K2 at 5, 3 us after thread 1's launch
 * returned; thread 1 then synchronizes at 8, 2 us after thread 2's launch
 * returned, and the sync returns 1 us after K2 ends: replayed exactly as
 * traced. */
static const char *const two_threads =
    TRACE(CALL(1, "cudaLaunchKernel", 1, 0, 2) "," CALL(2, "cudaLaunchKernel", 2, 5, 1) ","
          CALL(1, "cudaDeviceSynchronize", 3, 8, 7) "," KERNEL(7, 1, 2, 10) "," KERNEL(7, 2, 12, 2));

static void test_threads_and_sync(void) {
  ReplayOptions o = {FALSE, NULL, NULL};
  ReplayResult r;
  CalibProfTrace *t = replayed(two_threads, &o, &r);
  g_assert_cmpint(r.step_ns, ==, 15000);
  g_assert_cmpint(r.trace_span_ns, ==, 15000);
  g_assert_cmpint(r.gpu_start_ns[1], ==, 12000);
  g_assert_cmpuint(r.threads, ==, 2);
  g_assert_cmpuint(r.thread_deps, ==, 2);
  replay_result_clear(&r);
  calib_prof_free(t);
  /* a blocking copy: launched at 4, on the stream after K1 [2, 12], it
   * returns at 16, 1 us after the copy [12, 15]; K3 launched at 17 */
  const char *copy =
      TRACE(CALL(1, "cudaLaunchKernel", 1, 0, 2) "," CALL(1, "cudaMemcpy", 2, 4, 12) ","
            CALL(1, "cudaLaunchKernel", 3, 17, 1) "," KERNEL(7, 1, 2, 10) "," GPU("gpu_memcpy", "Memcpy DtoH", 7, 2, 12, 3)
            "," KERNEL(7, 3, 18.5, 1));
  t = replayed(copy, &o, &r);
  g_assert_cmpuint(r.blocking, ==, 1);
  g_assert_cmpint(r.gpu_start_ns[1], ==, 12000);
  g_assert_cmpint(r.gpu_start_ns[2], ==, 18000);
  g_assert_cmpint(r.step_ns, ==, 19000);
  replay_result_clear(&r);
  calib_prof_free(t);
  /* a thread that launches nothing (a watchdog's event queries) is left out */
  const char *watchdog = TRACE(CALL(1, "cudaLaunchKernel", 1, 0, 2) "," CALL(9, "cudaEventQuery", 5, 1, 1) ","
                                                                       KERNEL(7, 1, 2, 10));
  t = replayed(watchdog, &o, &r);
  g_assert_cmpuint(r.threads, ==, 1);
  g_assert_cmpuint(r.threads_skipped, ==, 1);
  g_assert_cmpuint(r.calls_skipped, ==, 1);
  g_assert_cmpint(r.step_ns, ==, 12000);
  replay_result_clear(&r);
  calib_prof_free(t);
}

/* Another GPU: a GEMM, an attention kernel, an elementwise kernel, a memset
 * and a memcpy, each 10 us, back to back on one stream; each re-priced at
 * its class's ratio of the two profiles' rates, the memcpy kept. */
static void test_profile_reprice(void) {
  const char *text =
      TRACE(CALL(1, "cudaLaunchKernel", 1, 0, 1) "," CALL(1, "cudaLaunchKernel", 2, 1, 1) ","
            CALL(1, "cudaLaunchKernel", 3, 2, 1) "," CALL(1, "cudaMemsetAsync", 4, 3, 1) ","
            CALL(1, "cudaMemcpyAsync", 5, 4, 1) "," GPU("kernel", "nvjet_sm90_tst_128x256", 7, 1, 1, 10) ","
            GPU("kernel", "cudnn_generated_fort_native_sdpa_sm90_flash_fprop", 7, 2, 11, 10) ","
            GPU("kernel", "vectorized_elementwise_kernel", 7, 3, 21, 10) "," GPU("gpu_memset", "Memset (Device)", 7, 4,
                                                                                 31, 10) ","
            GPU("gpu_memcpy", "Memcpy DtoH", 7, 5, 41, 10));
  GError *error = NULL;
  ModelProfile *src = model_profile_load("h100-sxm5-80gb", &error);
  g_assert_no_error(error);
  ModelProfile *dst = model_profile_load("b200", &error);
  g_assert_no_error(error);
  ReplayOptions o = {FALSE, src, dst};
  ReplayResult r;
  CalibProfTrace *t = replayed(text, &o, &r);
  gint64 gemm = llround(10000 * src->peak_flops / dst->peak_flops);
  gint64 mem = llround(10000 * src->hbm_bytes_per_s / dst->hbm_bytes_per_s);
  g_assert_cmpint(gemm, <, 10000);
  g_assert_cmpint(mem, <, 10000);
  g_assert_cmpint(r.gpu_start_ns[0], ==, 1000);
  g_assert_cmpint(r.gpu_start_ns[1], ==, 1000 + gemm);
  g_assert_cmpint(r.gpu_start_ns[2], ==, 1000 + 2 * gemm);
  g_assert_cmpint(r.gpu_start_ns[3], ==, 1000 + 2 * gemm + mem);
  g_assert_cmpint(r.gpu_start_ns[4], ==, 1000 + 2 * gemm + 2 * mem);
  g_assert_cmpint(r.step_ns, ==, 1000 + 2 * gemm + 2 * mem + 10000);
  g_assert_cmpuint(r.repriced[REPLAY_RATE_GEMM], ==, 1);
  g_assert_cmpuint(r.repriced[REPLAY_RATE_ATTENTION], ==, 1);
  g_assert_cmpuint(r.repriced[REPLAY_RATE_MEMORY], ==, 2);
  cJSON *j = replay_json(t, &o, &r);
  const cJSON *p = obj(obj(j, "what_if"), "profile");
  g_assert_cmpstr(str(p, "target"), ==, "b200");
  g_assert_cmpfloat(num(obj(obj(p, "time_ratios"), "gemm"), "ratio"), ==, src->peak_flops / dst->peak_flops);
  cJSON_Delete(j);
  replay_result_clear(&r);
  calib_prof_free(t);
  /* the ideal profile has no rates */
  ModelProfile *ideal = model_profile_load("ideal", &error);
  g_assert_no_error(error);
  ReplayOptions bad = {FALSE, src, ideal};
  t = calib_prof_parse(text, strlen(text), "case.json", &error);
  g_assert_false(replay_run(t, &bad, &r, &error));
  g_assert_error(error, REPLAY_ERROR, REPLAY_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "ideal"));
  g_clear_error(&error);
  calib_prof_free(t);
  model_profile_free(ideal);
  model_profile_free(src);
  model_profile_free(dst);
}

/* The shipped traces through the real binary: the replayed step against
 * the span the trace covers (2%) and the step measured without the
 * profiler (5%, read from the measurements file); CUDA graphs never slower;
 * another GPU's figures; deterministic text, -o. */
static void test_shipped(void) {
  static const char *const names[] = {"qwen-like-14b-l4", "llama70b-t4-shard-l4"};
  char *steps_path = data_file("calibrate/measurements/h100-sustained-gemm-and-steps.json");
  gsize len = 0;
  char *steps_text = slurp(steps_path, &len);
  cJSON *steps = cJSON_Parse(steps_text);
  g_assert_nonnull(steps);
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    char *rel = g_strdup_printf("calibrate/measurements/h100-step-trace-%s.json.gz", names[i]);
    char *path = data_file(rel);
    char *line = g_strdup_printf("replay %s --format json", path);
    cJSON *j = run_json(line);
    g_assert_cmpstr(str(j, "format"), ==, REPLAY_FORMAT);
    const cJSON *src = obj(j, "source"), *rep = obj(j, "replay");
    double step = num(rep, "step_us"), span = num(src, "span_us"), busy = num(src, "gpu_busy_us");
    double measured = num(obj(steps, names[i]), "fwd_bwd_ms_median_of_5") * 1e3;
    g_test_message("%s: replayed %.3f ms, trace span %.3f ms (%+.2f%%), measured without the profiler %.3f ms "
                   "(%+.2f%%), the trace's GPU busy %.3f ms",
                   names[i], step / 1e3, span / 1e3, 100 * (step / span - 1), measured / 1e3,
                   100 * (step / measured - 1), busy / 1e3);
    g_assert_cmpfloat(fabs(step / span - 1), <=, 0.02);
    /* The replay keeps every kernel's measured time, so on one stream it
     * lasts at least the trace's GPU busy time.  Where that alone is more
     * than 5% above the step measured without the profiler (the trace's
     * kernels ran slower than in the measured steps), no faithful replay
     * can come within 5% of it: the check is then that the replay keeps
     * that bound. */
    g_assert_cmpfloat(step, >=, busy * (1 - 1e-9));
    if (busy <= 1.05 * measured)
      g_assert_cmpfloat(fabs(step / measured - 1), <=, 0.05);
    else
      g_test_message("%s: the trace's kernels alone take %.3f ms, %+.1f%% against the measured step", names[i],
                     busy / 1e3, 100 * (busy / measured - 1));
    g_assert_cmpstr(str(obj(j, "graph"), "replayed"), !=, "");
    const cJSON *said = arr(obj(j, "what_if"), "said");
    g_assert_true(cJSON_IsString(said->child) && g_str_has_prefix(said->child->valuestring, "none"));
    /* CUDA graphs: never slower */
    char *graphs = g_strdup_printf("replay %s --format json --cuda-graphs", path);
    cJSON *jg = run_json(graphs);
    double step_g = num(obj(jg, "replay"), "step_us");
    g_test_message("%s: --cuda-graphs %.3f ms", names[i], step_g / 1e3);
    g_assert_cmpfloat(step_g, <=, step);
    g_assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj(jg, "what_if"), "cuda_graphs")));
    /* another GPU whose rates are all at least the H100's: never slower */
    char *h200 = g_strdup_printf("replay %s --format json --profile h200-sxm-141gb-measured", path);
    cJSON *jh = run_json(h200);
    double step_h = num(obj(jh, "replay"), "step_us");
    g_test_message("%s: --profile h200-sxm-141gb-measured %.3f ms", names[i], step_h / 1e3);
    g_assert_cmpfloat(step_h, <=, step);
    g_assert_cmpstr(str(obj(obj(jh, "what_if"), "profile"), "source"), ==, "h100-sxm5-80gb-measured");
    /* the replayed timeline, written with --trace and replayed again: the
     * same step, and it covers exactly that span */
    char *chrome = in_tmp("replayed.json");
    const char *argv_trace[] = {"replay", path, "--trace", chrome, "--format", "json", NULL};
    Proc pt = run_argv(argv_trace);
    cJSON *jt = parse_json(&pt);
    g_assert_cmpfloat(num(obj(jt, "replay"), "step_us"), ==, step);
    char *again_line = g_strdup_printf("replay %s --format json", chrome);
    cJSON *again = run_json(again_line);
    g_assert_cmpfloat(num(obj(again, "replay"), "step_us"), ==, step);
    g_assert_cmpfloat(num(obj(again, "source"), "span_us"), ==, step);
    cJSON_Delete(again);
    g_free(again_line);
    cJSON_Delete(jt);
    proc_clear(&pt);
    g_unlink(chrome);
    g_free(chrome);
    /* text: deterministic, says what was replayed, -o writes what stdout shows */
    char *text_line = g_strdup_printf("replay %s --cuda-graphs", path);
    Proc a = run_line(text_line), b = run_line(text_line);
    g_assert_cmpint(a.status, ==, 0);
    g_assert_cmpstr(a.out, ==, b.out);
    g_assert_nonnull(strstr(a.out, "replayed step"));
    g_assert_nonnull(strstr(a.out, "what-if:  CUDA graphs"));
    char *out = in_tmp("replay.txt");
    const char *argv[] = {"replay", path, "--cuda-graphs", "-o", out, NULL};
    Proc c = run_argv(argv);
    g_assert_cmpint(c.status, ==, 0);
    g_assert_cmpstr(c.out, ==, "");
    char *written = slurp(out, &len);
    g_assert_cmpstr(written, ==, a.out);
    g_unlink(out);
    g_free(written);
    g_free(out);
    proc_clear(&a);
    proc_clear(&b);
    proc_clear(&c);
    g_free(text_line);
    cJSON_Delete(jh);
    g_free(h200);
    cJSON_Delete(jg);
    g_free(graphs);
    cJSON_Delete(j);
    g_free(line);
    g_free(path);
    g_free(rel);
  }
  cJSON_Delete(steps);
  g_free(steps_text);
  g_free(steps_path);
}

static void test_bad(void) {
  static const struct {
    const char *file, *text, *mention;
  } cases[] = {
      {"not-a-trace.json", "{\"schemaVersion\": 1}", "not a Chrome trace"},
      {"not-json.json", "hello", "not valid JSON"},
      {"no-kernels.json", TRACE(CALL(1, "cudaLaunchKernel", 1, 0, 1)), "no GPU operation"},
      {"no-correlation.json",
       TRACE(CALL(1, "cudaLaunchKernel", 1, 0, 1) "," KERNEL(7, 1, 2, 1) ","
             "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":5,\"dur\":1,\"args\":{\"stream\":7}}"),
       "no correlation id"},
      {"launch-missing.json", TRACE(CALL(1, "cudaLaunchKernel", 1, 0, 1) "," KERNEL(7, 1, 2, 1) "," KERNEL(7, 2, 4, 1)),
       "no CUDA call that launched it"},
      {"no-calls.json", TRACE(KERNEL(7, 1, 2, 1)), "no CUDA calls"},
      /* K2 launched at 10 but run at 1, before K1 on its stream, which the
       * sync at 3 waits for: no order can replay it */
      {"cycle.json",
       TRACE(CALL(1, "cudaLaunchKernel", 1, 0, 1) "," CALL(1, "cudaDeviceSynchronize", 3, 3, 1) ","
             CALL(1, "cudaLaunchKernel", 2, 10, 1) "," KERNEL(7, 2, 1, 1) "," KERNEL(7, 1, 5, 1)),
       "cannot be replayed"},
  };
  char *out = in_tmp("out.txt");
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    char *path = in_tmp(cases[i].file);
    g_assert_true(g_file_set_contents(path, cases[i].text, -1, NULL));
    const char *argv[] = {"replay", path, "-o", out, NULL};
    Proc p = run_argv(argv);
    g_test_message("%s: %s", cases[i].file, p.err);
    assert_one_line_error(&p, cases[i].mention);
    g_assert_nonnull(strstr(p.err, cases[i].file));
    g_assert_false(g_file_test(out, G_FILE_TEST_EXISTS));
    proc_clear(&p);
    g_unlink(path);
    g_free(path);
  }
  /* a gzip cut short; the whole one is replayed */
  char *gz = in_tmp("cut.json.gz");
  write_gz(gz, two_kernels, 40);
  const char *argv[] = {"replay", gz, "-o", out, NULL};
  Proc p = run_argv(argv);
  assert_one_line_error(&p, "truncated");
  g_assert_false(g_file_test(out, G_FILE_TEST_EXISTS));
  proc_clear(&p);
  write_gz(gz, two_kernels, 0);
  const char *argv_ok[] = {"replay", gz, "--format", "json", NULL};
  p = run_argv(argv_ok);
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "\"step_us\":\t17"));
  proc_clear(&p);
  g_unlink(gz);
  static const struct {
    const char *args, *mention;
  } lines[] = {
      {"replay", "give the trace"},
      {"replay a.json b.json", "give one trace"},
      {"replay x.json --format yaml", "yaml"},
      {"replay x.json --source-profile h100-sxm5-80gb", "only with --profile"},
      {"replay x.json --profile no-such-gpu", "no-such-gpu"},
      {"replay x.json --cuda-graphs --cuda-graphs", "cuda-graphs"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(lines); i++) {
    p = run_line(lines[i].args);
    assert_one_line_error(&p, lines[i].mention);
    proc_clear(&p);
  }
  g_free(gz);
  g_free(out);
}

/* Beyond the threads or streams a replay takes: refused, naming the cap. */
static void test_limits(void) {
  static const struct {
    guint threads, streams;
    const char *mention;
  } cases[] = {{REPLAY_MAX_THREADS + 1, 1, "host threads"}, {1, REPLAY_MAX_STREAMS + 1, "CUDA streams"}};
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    guint n = MAX(cases[c].threads, cases[c].streams);
    GString *s = g_string_new("{\"traceEvents\":[");
    for (guint i = 0; i < n; i++)
      g_string_append_printf(s,
                             "%s{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"tid\":%u,"
                             "\"ts\":%u,\"dur\":1,\"args\":{\"correlation\":%u}},"
                             "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":%u,\"dur\":1,"
                             "\"args\":{\"stream\":%u,\"correlation\":%u}}",
                             i ? "," : "", cases[c].threads > 1 ? i : 0, 2 * i, i, 2 * i + 1,
                             cases[c].streams > 1 ? i : 7, i);
    g_string_append(s, "]}");
    GError *error = NULL;
    CalibProfTrace *t = calib_prof_parse(s->str, s->len, "many.json", &error);
    g_assert_no_error(error);
    ReplayOptions o = {FALSE, NULL, NULL};
    ReplayResult r;
    g_assert_false(replay_run(t, &o, &r, &error));
    g_assert_error(error, REPLAY_ERROR, REPLAY_ERROR_INVALID);
    g_assert_nonnull(strstr(error->message, cases[c].mention));
    g_clear_error(&error);
    calib_prof_free(t);
    g_string_free(s, TRUE);
  }
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  tmp = test_tmp_dir("replay");
  g_test_add_func("/replay/two-kernels", test_two_kernels);
  g_test_add_func("/replay/launch-bound-chain", test_launch_bound_chain);
  g_test_add_func("/replay/cross-stream-wait", test_cross_stream_wait);
  g_test_add_func("/replay/threads-sync-copy", test_threads_and_sync);
  g_test_add_func("/replay/profile-reprice", test_profile_reprice);
  g_test_add_func("/replay/limits", test_limits);
  g_test_add_func("/replay/shipped-traces", test_shipped);
  g_test_add_func("/replay/bad-traces", test_bad);
  int rc = g_test_run();
  test_rm_rf(tmp);
  g_free(tmp);
  return rc;
}
