/* ptdsim — a torch.profiler trace read (measure/profiler.c) and the figures
 * of its step (fit/step.c): exact on small hand-written traces, consistent
 * on the two shipped traces through the real binary, and every bad trace
 * refused with one line and no output file. */
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <zlib.h>

#include "../fit/step.h"
#include "../measure/profiler.h"
#include "cli_harness.h"
#include "test_tmp.h"

static char *tmp;

static char *in_tmp(const char *name) { return g_build_filename(tmp, name, NULL); }

/* One step, times in microseconds (see the figures in test_exact_figures):
 *   thread 10 launches K1 at 0 (5 long), K2 at 10 (4), K3 at 30 (6), the
 *   memset M4 at 40 (2), and calls cudaGetErrorString at 45 (launches
 *   nothing); thread 20 launches K5 at 12 (3).
 *   GPU: K1 gemm [8, 28] stream 7; K5 fill [16, 26] stream 8 (inside K1);
 *   K2 attention [28, 33.25]; idle 33.25..40, K3's launch returned at 36:
 *   the GPU waited for the host; K3 norm [40, 45]; idle 45..50, M4's launch
 *   returned at 42: not the host; M4 [50, 51]. */
static const char *const step_events =
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":10,\"ts\":0,\"dur\":6,"
    "\"args\":{\"External id\":17}},"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":10,\"ts\":0,\"dur\":5,"
    "\"args\":{\"correlation\":1,\"External id\":17}},"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":10,\"ts\":10,\"dur\":4,"
    "\"args\":{\"correlation\":2}},"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":10,\"ts\":30,\"dur\":6,"
    "\"args\":{\"correlation\":3}},"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaMemsetAsync\",\"pid\":1,\"tid\":10,\"ts\":40,\"dur\":2,"
    "\"args\":{\"correlation\":4}},"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaGetErrorString\",\"pid\":1,\"tid\":10,\"ts\":45,\"dur\":1,"
    "\"args\":{\"correlation\":9}},"
    "{\"ph\":\"X\",\"cat\":\"cuda_driver\",\"name\":\"cuLaunchKernelEx\",\"pid\":1,\"tid\":20,\"ts\":12,\"dur\":3,"
    "\"args\":{\"correlation\":5}},"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT\",\"pid\":0,\"tid\":7,"
    "\"ts\":8,\"dur\":20,\"args\":{\"stream\":7,\"correlation\":1}},"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"void at::native::vectorized_elementwise_kernel<4, "
    "at::native::FillFunctor<float>, std::array<char*, 1ul> >(int)\",\"pid\":0,\"tid\":8,\"ts\":16,\"dur\":10,"
    "\"args\":{\"stream\":8,\"correlation\":5}},"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16\","
    "\"pid\":0,\"tid\":7,\"ts\":28,\"dur\":5.25,\"args\":{\"stream\":7,\"correlation\":2}},"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"void at::native::(anonymous "
    "namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>\",\"pid\":0,\"tid\":7,\"ts\":40,\"dur\":5,"
    "\"args\":{\"stream\":7,\"correlation\":3}},"
    "{\"ph\":\"X\",\"cat\":\"gpu_memset\",\"name\":\"Memset (Device)\",\"pid\":0,\"tid\":7,\"ts\":50,\"dur\":1,"
    "\"args\":{\"stream\":7,\"correlation\":4}},"
    "{\"ph\":\"s\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":1,\"pid\":1,\"tid\":10,\"ts\":0},"
    "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"python3\"}},"
    "{\"ph\":\"X\",\"cat\":\"Trace\",\"name\":\"PyTorch Profiler (0)\",\"pid\":\"Spans\",\"tid\":\"PyTorch "
    "Profiler\",\"ts\":0,\"dur\":60}";

static char *step_text(void) {
  return g_strdup_printf("{\"schemaVersion\":1,\"deviceProperties\":[{\"name\":\"Test GPU\"}],\"traceEvents\":[%s]}",
                         step_events);
}

static void test_exact_figures(void) {
  char *text = step_text();
  GError *error = NULL;
  CalibProfTrace *t = calib_prof_parse(text, strlen(text), "step.json", &error);
  g_assert_no_error(error);
  g_assert_cmpuint(t->gpu->len, ==, 5);
  g_assert_cmpuint(t->api->len, ==, 6);
  g_assert_cmpuint(t->cpu->len, ==, 1);
  g_assert_true(t->has_window);
  g_assert_cmpint(t->window_dur_ns, ==, 60000);
  g_assert_cmpstr(t->device, ==, "Test GPU");
  /* the CPU op and the launch it made share their External id */
  g_assert_cmpint(g_array_index(t->cpu, CalibProfCpuOp, 0).external_id, ==, 17);
  g_assert_cmpint(g_array_index(t->api, CalibProfApi, 0).external_id, ==, 17);
  g_assert_cmpint(g_array_index(t->api, CalibProfApi, 1).external_id, ==, -1);
  CalibStepFigures f;
  calib_step_figures(t, &f);
  g_assert_cmpint(f.first_ns, ==, 8000);
  g_assert_cmpint(f.span_ns, ==, 43000);                    /* 8 .. 51 */
  g_assert_cmpint(f.busy_ns, ==, 20000 + 5250 + 5000 + 1000); /* K5 lies inside K1 */
  g_assert_cmpint(f.op_ns, ==, 20000 + 10000 + 5250 + 5000 + 1000);
  g_assert_cmpint(f.class_ns[CALIB_STEP_GEMM], ==, 20000);
  g_assert_cmpint(f.class_ns[CALIB_STEP_ATTENTION], ==, 5250);
  g_assert_cmpint(f.class_ns[CALIB_STEP_NORM], ==, 5000);
  g_assert_cmpint(f.class_ns[CALIB_STEP_FILL], ==, 10000 + 1000);
  g_assert_cmpuint(f.class_ops[CALIB_STEP_FILL], ==, 2);
  g_assert_cmpuint(f.kernels, ==, 4);
  g_assert_cmpuint(f.memsets, ==, 1);
  g_assert_cmpuint(f.streams, ==, 2);
  g_assert_cmpuint(f.launches, ==, 5); /* cudaGetErrorString launched nothing */
  g_assert_cmpuint(f.launch_threads, ==, 2);
  g_assert_cmpuint(f.gaps, ==, 3);               /* 10, 20, 10 on thread 10 */
  g_assert_cmpfloat(f.gap_median_ns, ==, 10000);
  g_assert_cmpfloat(f.call_median_ns, ==, 4000); /* of 5, 4, 6, 2, 3 */
  g_assert_cmpuint(f.host_waits, ==, 1);
  g_assert_cmpint(f.host_wait_ns, ==, 40000 - 33250);
  g_assert_cmpint(f.other_idle_ns, ==, 5000);
  cJSON *j = calib_step_json(t, &f);
  const cJSON *gpu = cJSON_GetObjectItemCaseSensitive(j, "gpu");
  g_assert_cmpfloat(cJSON_GetObjectItemCaseSensitive(gpu, "busy_us")->valuedouble, ==, 31.25);
  g_assert_cmpfloat(cJSON_GetObjectItemCaseSensitive(gpu, "idle_share")->valuedouble, ==, 1 - 31.25 / 43);
  const cJSON *fw = cJSON_GetObjectItemCaseSensitive(j, "framework_kernels");
  g_assert_cmpfloat(cJSON_GetObjectItemCaseSensitive(fw, "time_us")->valuedouble, ==, 16);
  cJSON_Delete(j);
  calib_prof_free(t);
  g_free(text);
}

/* An even number of gaps: the median is the mean of the middle two; one
 * launch thread with GPU ops back to back: no idle at all. */
static void test_median_even_and_no_idle(void) {
  const char *text =
      "{\"traceEvents\":["
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"tid\":1,\"ts\":0,\"dur\":1,\"args\":{\"correlation\":1}},"
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"tid\":1,\"ts\":2,\"dur\":3,\"args\":{\"correlation\":2}},"
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"tid\":1,\"ts\":7,\"dur\":1,\"args\":{\"correlation\":3}},"
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"tid\":1,\"ts\":13,\"dur\":1,\"args\":{\"correlation\":4}},"
      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"a\",\"ts\":20,\"dur\":1,\"args\":{\"stream\":7,\"correlation\":4}},"
      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"b\",\"ts\":21,\"dur\":2,\"args\":{\"stream\":7,\"correlation\":3}},"
      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"c\",\"ts\":10,\"dur\":10,\"args\":{\"stream\":7,\"correlation\":2}},"
      "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy DtoD\",\"ts\":5,\"dur\":5,\"args\":{\"stream\":7,\"correlation\":1}}]}";
  GError *error = NULL;
  CalibProfTrace *t = calib_prof_parse(text, strlen(text), "even.json", &error);
  g_assert_no_error(error);
  CalibStepFigures f;
  calib_step_figures(t, &f);
  g_assert_cmpint(f.span_ns, ==, 18000);
  g_assert_cmpint(f.busy_ns, ==, 18000);
  g_assert_cmpint(f.host_wait_ns + f.other_idle_ns, ==, 0);
  g_assert_cmpuint(f.gaps, ==, 3);                     /* 2, 5, 6 */
  g_assert_cmpfloat(f.gap_median_ns, ==, 5000);
  g_assert_cmpfloat(f.call_median_ns, ==, 1000);       /* 1, 1, 1, 3: mean of 1 and 1 */
  g_assert_cmpint(f.class_ns[CALIB_STEP_COPY], ==, 5000); /* the memcpy */
  g_assert_cmpint(f.class_ns[CALIB_STEP_OTHER], ==, 13000);
  g_assert_false(t->has_window);
  g_assert_null(t->device);
  calib_prof_free(t);
}

/* Kernel names of the shipped traces and of PyTorch's other kernels. */
static void test_classes(void) {
  static const struct {
    const char *name;
    CalibStepClass c;
  } cases[] = {
      {"nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_NTN", CALIB_STEP_GEMM},
      {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64", CALIB_STEP_GEMM},
      {"ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn", CALIB_STEP_GEMM},
      {"cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x128", CALIB_STEP_ATTENTION},
      {"void cudnn::fusion::fmha_reduce_head<true>(void const*, void*)", CALIB_STEP_ATTENTION},
      {"void cudnn::fusion::compute_dot_do_o_specialized<true, 128>(void const*)", CALIB_STEP_ATTENTION},
      {"void cudnn::fusion::convert_dq_to_16bits<true>(void const*, void*)", CALIB_STEP_ATTENTION},
      {"void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128> >(Flash_fwd_params)", CALIB_STEP_ATTENTION},
      {"void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<"
       "c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > >",
       CALIB_STEP_ELEMENTWISE},
      {"void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16> >",
       CALIB_STEP_ELEMENTWISE},
      {"void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::"
       "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}>",
       CALIB_STEP_COPY},
      {"void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda(at::"
       "TensorIteratorBase&)::{lambda()#2}>",
       CALIB_STEP_COPY},
      {"void at::native::vectorized_elementwise_kernel<8, at::native::FillFunctor<c10::BFloat16>, "
       "std::array<char*, 1ul> >",
       CALIB_STEP_FILL},
      {"void (anonymous namespace)::elementwise_kernel_with_index<int, at::native::arange_cuda_out>", CALIB_STEP_FILL},
      {"void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>", CALIB_STEP_REDUCTION},
      {"void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>",
       CALIB_STEP_REDUCTION},
      {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float> > >",
       CALIB_STEP_REDUCTION},
      {"void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>",
       CALIB_STEP_NORM},
      {"void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernelTemplate<c10::BFloat16, float>",
       CALIB_STEP_NORM},
      {"void at::native::(anonymous namespace)::CatArrayBatchedCopy_vectorized<at::native::(anonymous "
       "namespace)::OpaqueType<2u>, unsigned int, 3, 128, 1, 16, 8>",
       CALIB_STEP_INDEXING},
      {"void at::native::vectorized_gather_kernel<16, long>(char*, char*, long*, int)", CALIB_STEP_INDEXING},
      {"void at::native::(anonymous namespace)::compute_grad_weight<c10::BFloat16, long>(long const*)",
       CALIB_STEP_INDEXING},
      {"void at::native::index_elementwise_kernel<128, 4>", CALIB_STEP_INDEXING},
      {"void at_cuda_detail::cub::detail::radix_sort::DeviceRadixSortOnesweepKernel<at_cuda_detail::cub>",
       CALIB_STEP_OTHER},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    if (calib_step_class(CALIB_PROF_KERNEL, cases[i].name) != cases[i].c)
      g_test_message("%s: %s", cases[i].name, calib_step_class_name(calib_step_class(CALIB_PROF_KERNEL, cases[i].name)));
    g_assert_cmpstr(calib_step_class_name(calib_step_class(CALIB_PROF_KERNEL, cases[i].name)), ==,
                    calib_step_class_name(cases[i].c));
  }
  g_assert_cmpint(calib_step_class(CALIB_PROF_MEMSET, "nvjet_gemm"), ==, CALIB_STEP_FILL);
  g_assert_cmpint(calib_step_class(CALIB_PROF_MEMCPY, "Memcpy HtoD (Pinned -> Device)"), ==, CALIB_STEP_COPY);
}

/* The shipped traces through the real binary: the figures hold together
 * and the GPU's span lies within the profiler's own window. */
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
    char *line = g_strdup_printf("fit --profiler-trace %s --format json", path);
    cJSON *j = run_json(line);
    const cJSON *src = obj(j, "source"), *gpu = obj(j, "gpu"), *host = obj(j, "host");
    g_assert_cmpstr(str(src, "device"), ==, "NVIDIA H100 80GB HBM3");
    g_assert_cmpuint(strlen(str(src, "sha256")), ==, 64);
    double span = num(gpu, "span_us"), busy = num(gpu, "busy_us"), op = num(gpu, "op_time_us");
    double window = num(src, "profiler_window_us");
    g_assert_cmpfloat(busy, <=, span);
    g_assert_cmpfloat(busy, <=, op * (1 + 1e-12));
    g_assert_cmpfloat(span, <=, window);
    g_assert_cmpfloat(span, >=, 0.95 * window);
    double sum = 0, fw = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, arr(j, "classes")) {
      sum += num(r, "time_us");
      if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "framework")))
        fw += num(r, "time_us");
    }
    g_assert_cmpfloat(fabs(sum - op), <=, 1e-6 * op);
    g_assert_cmpfloat(fabs(fw - num(obj(j, "framework_kernels"), "time_us")), <=, 1e-6 * op);
    /* every kernel and memset of these traces has its launch */
    g_assert_cmpfloat(num(host, "launches"), ==, num(src, "kernels") + num(src, "memsets") + num(src, "memcpys"));
    g_assert_cmpfloat(num(host, "gpu_wait_us") + num(host, "other_idle_us"), <=, span - busy + 1e-6 * span);
    double measured = num(obj(steps, names[i]), "fwd_bwd_ms_median_of_5") * 1e3;
    g_test_message("%s: span %.3f ms (window %.3f ms, without the profiler %.3f ms: %+.1f%%), busy %.1f%%, "
                   "framework %.1f%% of GPU time, host per launch %.2f us, launch call %.2f us, GPU waited %.3f ms",
                   names[i], span / 1e3, window / 1e3, measured / 1e3, 100 * (span / measured - 1),
                   100 * busy / span, 100 * fw / op, num(host, "launch_gap_median_us"),
                   num(host, "launch_call_median_us"), num(host, "gpu_wait_us") / 1e3);
    /* text: deterministic, and -o writes what stdout shows */
    char *text_line = g_strdup_printf("fit --profiler-trace %s", path);
    Proc a = run_line(text_line), b = run_line(text_line);
    g_assert_cmpint(a.status, ==, 0);
    g_assert_cmpstr(a.out, ==, b.out);
    g_assert_nonnull(strstr(a.out, "GPU busy"));
    char *out = in_tmp("figures.txt");
    const char *argv[] = {"fit", "--profiler-trace", path, "-o", out, NULL};
    Proc c = run_argv(argv);
    g_assert_cmpint(c.status, ==, 0);
    g_assert_cmpstr(c.out, ==, "");
    gsize n = 0;
    char *written = slurp(out, &n);
    g_assert_cmpstr(written, ==, a.out);
    g_unlink(out);
    g_free(written);
    g_free(out);
    proc_clear(&a);
    proc_clear(&b);
    proc_clear(&c);
    g_free(text_line);
    cJSON_Delete(j);
    g_free(line);
    g_free(path);
    g_free(rel);
  }
  cJSON_Delete(steps);
  g_free(steps_text);
  g_free(steps_path);
}

#define K(corr, ts) "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":" #ts ",\"dur\":1,\"args\":{\"stream\":7,\"correlation\":" #corr "}}"
#define L(corr, ts) "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"tid\":1,\"ts\":" #ts ",\"dur\":1,\"args\":{\"correlation\":" #corr "}}"

static void test_bad(void) {
  static const struct {
    const char *file, *text, *mention;
  } cases[] = {
      {"not-json.json", "hello", "not valid JSON"},
      {"malformed.json", "{\"traceEvents\": [", "malformed JSON"},
      {"empty.json", "", "empty"},
      {"no-events.json", "{\"schemaVersion\": 1}", "no \"traceEvents\""},
      {"events-not-list.json", "{\"traceEvents\": 3}", "not a list"},
      {"no-gpu.json", "{\"traceEvents\": [" L(1, 0) "]}", "no GPU operation"},
      {"negative.json", "{\"traceEvents\": [{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":5,\"dur\":-1,"
                        "\"args\":{\"stream\":7,\"correlation\":1}}]}",
       "finite numbers"},
      {"too-long.json", "{\"traceEvents\": [{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":5,\"dur\":2e9,"
                        "\"args\":{\"stream\":7,\"correlation\":1}}]}",
       "finite numbers"},
      {"no-stream.json", "{\"traceEvents\": [{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":5,\"dur\":1}]}",
       "args.stream"},
      {"dup-launch.json", "{\"traceEvents\": [" L(1, 0) "," L(1, 2) "," K(1, 5) "]}", "on two CUDA calls"},
      {"dup-gpu.json", "{\"traceEvents\": [" L(1, 0) "," K(1, 5) "," K(1, 7) "]}", "on two GPU operations"},
      {"unlaunched.json", "{\"traceEvents\": [" L(1, 0) "," K(1, 5) "," K(2, 7) "]}", "no CUDA call that launched it"},
      {"bad-corr.json", "{\"traceEvents\": [{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":5,\"dur\":1,"
                        "\"args\":{\"stream\":7,\"correlation\":1.5}}]}",
       "correlation"},
  };
  char *out = in_tmp("out.txt");
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    char *path = in_tmp(cases[i].file);
    g_assert_true(g_file_set_contents(path, cases[i].text, -1, NULL));
    const char *argv[] = {"fit", "--profiler-trace", path, "-o", out, NULL};
    Proc p = run_argv(argv);
    g_test_message("%s: %s", cases[i].file, p.err);
    assert_one_line_error(&p, cases[i].mention);
    g_assert_nonnull(strstr(p.err, cases[i].file));
    g_assert_false(g_file_test(out, G_FILE_TEST_EXISTS));
    proc_clear(&p);
    g_unlink(path);
    g_free(path);
  }
  /* a gzip cut short, and a file that is not there */
  char *text = step_text();
  char *gz = in_tmp("cut.json.gz");
  write_gz(gz, text, 200);
  const char *argv[] = {"fit", "--profiler-trace", gz, "-o", out, "--format", "json", NULL};
  Proc p = run_argv(argv);
  assert_one_line_error(&p, "truncated");
  g_assert_false(g_file_test(out, G_FILE_TEST_EXISTS));
  proc_clear(&p);
  /* the whole gzip is read as the plain text is */
  write_gz(gz, text, 0);
  const char *argv_ok[] = {"fit", "--profiler-trace", gz, "--format", "json", NULL};
  p = run_argv(argv_ok);
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "\"busy_us\":\t31.25"));
  proc_clear(&p);
  g_unlink(gz);
  char *missing = in_tmp("missing.json");
  const char *argv_missing[] = {"fit", "--profiler-trace", missing, NULL};
  p = run_argv(argv_missing);
  assert_one_line_error(&p, "no such file");
  proc_clear(&p);
  static const char *const mixed[] = {"fit --profiler-trace x.json --compare y.json",
                                      "fit --profiler-trace x.json --dtype bf16", "fit --profiler-trace x.json y.json",
                                      "fit --profiler-trace x.json --profile h100-sxm5-80gb"};
  for (guint i = 0; i < G_N_ELEMENTS(mixed); i++) {
    p = run_line(mixed[i]);
    assert_one_line_error(&p, "--profiler-trace takes only -o and --format");
    proc_clear(&p);
  }
  p = run_line("fit --profiler-trace x.json --format yaml");
  assert_one_line_error(&p, "yaml");
  proc_clear(&p);
  g_free(missing);
  g_free(gz);
  g_free(text);
  g_free(out);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  tmp = test_tmp_dir("profiler");
  g_test_add_func("/profiler/exact-figures", test_exact_figures);
  g_test_add_func("/profiler/median-even-no-idle", test_median_even_and_no_idle);
  g_test_add_func("/profiler/classes", test_classes);
  g_test_add_func("/profiler/shipped-traces", test_shipped);
  g_test_add_func("/profiler/bad-traces", test_bad);
  int rc = g_test_run();
  test_rm_rf(tmp);
  g_free(tmp);
  return rc;
}
