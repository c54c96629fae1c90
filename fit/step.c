/* The figures of one step from a torch.profiler trace (see step.h). */
#include "step.h"

#include <string.h>

#include "../measure/measurements.h"

static const char *const class_names[CALIB_STEP_N_CLASSES] = {
    "gemm", "attention", "elementwise", "copy_cast", "fill_memset", "reduction_softmax", "norm",
    "concat_indexing", "other"};

const char *calib_step_class_name(CalibStepClass c) { return c < CALIB_STEP_N_CLASSES ? class_names[c] : "?"; }

static gboolean has_any(const char *name, const char *const *pats) {
  for (; *pats; pats++)
    if (strstr(name, *pats))
      return TRUE;
  return FALSE;
}

/* Kernel names, tried in this order (the first list a name matches wins):
 * - attention: cuDNN's fused SDPA kernels ("cudnn_generated_fort_native_sdpa_
 *   ..._flash_fprop/bprop"), its backward's helpers in cudnn::fusion
 *   (fmha_reduce_head, compute_dot_do_o_specialized, convert_dq_to_16bits),
 *   PyTorch's own flash and memory-efficient kernels (aten/src/ATen/native/
 *   transformers/cuda: "flash_fwd", "fmha_cutlassF"), FlashAttention's.
 * - gemm: cuBLAS/cuBLASLt (sm90 "nvjet_*" kernels of cuBLAS 12.4+, "*gemm*",
 *   "*xmma*", "cutlass*", "cublas*").
 * - norm: ATen's layer_norm.cu and its backward (vectorized_layer_norm_kernel,
 *   layer_norm_grad_input_kernel, GammaBetaBackwardCUDAKernel), RMSNorm,
 *   batch and group norm.
 * - reduction_softmax: ATen's SoftMax.cu (cunn_SoftMaxForward/Backward),
 *   Reduce.cuh's reduce_kernel, Loss.cu's nll_loss kernels, cross entropy.
 * - fill_memset: FillFunctor (Fill.cu), arange (RangeFactories.cu), memsets.
 * - concat_indexing: Shape.cu's CatArrayBatchedCopy, gather/scatter,
 *   indexing (Indexing.cu), the embedding's backward (EmbeddingBackwardKernel.cu:
 *   compute_grad_weight, sum_and_scatter, krn_partials_per_segment ...).
 * - copy_cast: Copy.cu's direct_copy_kernel_cuda, the dtype casts
 *   (bfloat16_copy_kernel_cuda), transposes, memcpys.
 * - elementwise: ATen's Loops.cuh (elementwise_kernel, vectorized_ and
 *   unrolled_elementwise_kernel) for the remaining functors (add, mul, neg,
 *   silu and their backward).
 * - other: the rest (cub's sorts and scans, for instance). */
static const char *const attention_pats[] = {"flash",  "fmha", "sdpa", "attention", "Attention",
                                             "cudnn::fusion::compute_dot_do_o", "cudnn::fusion::convert_dq", NULL};
static const char *const gemm_pats[] = {"gemm", "Gemm", "GEMM", "nvjet", "xmma", "cutlass", "cublas", NULL};
static const char *const norm_pats[] = {"layer_norm", "LayerNorm", "rms_norm", "RmsNorm", "RMSNorm",
                                        "GammaBetaBackward", "batch_norm", "BatchNorm", "group_norm", NULL};
static const char *const reduction_pats[] = {"softmax", "SoftMax", "Softmax", "reduce_kernel", "nll_loss",
                                             "cross_entropy", NULL};
static const char *const fill_pats[] = {"FillFunctor", "fill_kernel", "arange", NULL};
static const char *const indexing_pats[] = {"CatArrayBatchedCopy", "gather", "scatter", "index_", "Index",
                                            "embedding", "Embedding", "compute_grad_weight", "krn_partial",
                                            "partial_segment", NULL};
static const char *const copy_pats[] = {"copy_kernel", "transpose", "Transpose", NULL};
static const char *const elementwise_pats[] = {"elementwise_kernel", "Functor", "pointwise", NULL};

CalibStepClass calib_step_class(CalibProfGpuKind kind, const char *name) {
  if (kind == CALIB_PROF_MEMSET)
    return CALIB_STEP_FILL;
  if (kind == CALIB_PROF_MEMCPY)
    return CALIB_STEP_COPY;
  static const struct {
    const char *const *pats;
    CalibStepClass c;
  } order[] = {{attention_pats, CALIB_STEP_ATTENTION}, {gemm_pats, CALIB_STEP_GEMM},
               {norm_pats, CALIB_STEP_NORM},           {reduction_pats, CALIB_STEP_REDUCTION},
               {fill_pats, CALIB_STEP_FILL},           {indexing_pats, CALIB_STEP_INDEXING},
               {copy_pats, CALIB_STEP_COPY},           {elementwise_pats, CALIB_STEP_ELEMENTWISE}};
  for (guint i = 0; i < G_N_ELEMENTS(order); i++)
    if (has_any(name, order[i].pats))
      return order[i].c;
  return CALIB_STEP_OTHER;
}

void calib_step_figures(const CalibProfTrace *t, CalibStepFigures *f) {
  memset(f, 0, sizeof *f);
  GHashTable *streams = g_hash_table_new(g_int64_hash, g_int64_equal);
  /* t->gpu is sorted by start: sweep the union, and at each idle gap ask
   * whether the op that ends it was launched only after the GPU ran dry */
  gint64 end = 0;
  for (guint i = 0; i < t->gpu->len; i++) {
    const CalibProfGpuOp *g = &g_array_index(t->gpu, CalibProfGpuOp, i);
    g_hash_table_add(streams, (gpointer)&g->stream);
    f->kernels += g->kind == CALIB_PROF_KERNEL;
    f->memsets += g->kind == CALIB_PROF_MEMSET;
    f->memcpys += g->kind == CALIB_PROF_MEMCPY;
    CalibStepClass c = calib_step_class(g->kind, g->name);
    f->class_ns[c] += g->dur_ns;
    f->class_ops[c]++;
    f->op_ns += g->dur_ns;
    gint64 g_end = g->start_ns + g->dur_ns;
    if (i == 0) {
      f->first_ns = g->start_ns;
      f->busy_ns = g->dur_ns;
      end = g_end;
      continue;
    }
    if (g->start_ns > end) {
      gint64 idle = g->start_ns - end;
      const CalibProfApi *a = g->launch >= 0 ? &g_array_index(t->api, CalibProfApi, g->launch) : NULL;
      if (a && a->start_ns + a->dur_ns > end) {
        f->host_waits++;
        f->host_wait_ns += idle;
      } else
        f->other_idle_ns += idle;
      f->busy_ns += g->dur_ns;
      end = g_end;
    } else if (g_end > end) {
      f->busy_ns += g_end - end;
      end = g_end;
    }
  }
  f->span_ns = end - f->first_ns;
  f->streams = g_hash_table_size(streams);
  g_hash_table_destroy(streams);
  /* launches: t->api is sorted by thread and start */
  double *gaps = g_new(double, t->api->len + 1), *calls = g_new(double, t->api->len + 1);
  const CalibProfApi *prev = NULL;
  for (guint i = 0; i < t->api->len; i++) {
    const CalibProfApi *a = &g_array_index(t->api, CalibProfApi, i);
    if (!a->launched)
      continue;
    calls[f->launches++] = (double)a->dur_ns;
    if (prev && prev->tid == a->tid)
      gaps[f->gaps++] = (double)(a->start_ns - prev->start_ns);
    else
      f->launch_threads++;
    prev = a;
  }
  /* the medians: the middle value, or the mean of the two middle ones (0
   * when there is none) */
  f->gap_median_ns = calib_time_from_samples(gaps, f->gaps).median_us;
  f->call_median_ns = calib_time_from_samples(calls, f->launches).median_us;
  g_free(gaps);
  g_free(calls);
}

static cJSON *us(cJSON *obj, const char *key, double ns) { return cJSON_AddNumberToObject(obj, key, ns / 1000.0); }

cJSON *calib_step_source_json(cJSON *parent, const char *what, const CalibProfTrace *t, const CalibStepFigures *f) {
  cJSON *src = cJSON_AddObjectToObject(parent, "source");
  cJSON_AddStringToObject(src, "what", what);
  cJSON_AddStringToObject(src, "file", t->path);
  if (t->sha256)
    cJSON_AddStringToObject(src, "sha256", t->sha256);
  if (t->device)
    cJSON_AddStringToObject(src, "device", t->device);
  cJSON_AddNumberToObject(src, "kernels", f->kernels);
  cJSON_AddNumberToObject(src, "memsets", f->memsets);
  cJSON_AddNumberToObject(src, "memcpys", f->memcpys);
  cJSON_AddNumberToObject(src, "streams", f->streams);
  cJSON_AddNumberToObject(src, "cuda_calls", t->api->len);
  cJSON_AddNumberToObject(src, "cpu_ops", t->cpu->len);
  if (t->has_window)
    us(src, "profiler_window_us", (double)t->window_dur_ns);
  return src;
}

cJSON *calib_step_json(const CalibProfTrace *t, const CalibStepFigures *f) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "format", CALIB_STEP_FORMAT);
  cJSON *src =
      calib_step_source_json(j, "a torch.profiler trace of one step (export_chrome_trace's JSON)", t, f);
  cJSON_AddStringToObject(src, "classes_by",
                          "kernel-name patterns of PyTorch's ATen, cuBLAS and cuDNN kernels (doc/calibration.md)");
  double span = (double)f->span_ns;
  cJSON *gpu = cJSON_AddObjectToObject(j, "gpu");
  us(gpu, "span_us", span);
  us(gpu, "busy_us", (double)f->busy_ns);
  us(gpu, "idle_us", span - (double)f->busy_ns);
  cJSON_AddNumberToObject(gpu, "busy_share", span > 0 ? (double)f->busy_ns / span : 0);
  cJSON_AddNumberToObject(gpu, "idle_share", span > 0 ? 1 - (double)f->busy_ns / span : 0);
  us(gpu, "op_time_us", (double)f->op_ns);
  cJSON *classes = cJSON_AddArrayToObject(j, "classes");
  gint64 framework = 0;
  for (int c = 0; c < CALIB_STEP_N_CLASSES; c++) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "class", class_names[c]);
    cJSON_AddBoolToObject(r, "framework", c != CALIB_STEP_GEMM && c != CALIB_STEP_ATTENTION);
    cJSON_AddNumberToObject(r, "ops", f->class_ops[c]);
    us(r, "time_us", (double)f->class_ns[c]);
    cJSON_AddNumberToObject(r, "share", f->op_ns > 0 ? (double)f->class_ns[c] / (double)f->op_ns : 0);
    cJSON_AddItemToArray(classes, r);
    if (c != CALIB_STEP_GEMM && c != CALIB_STEP_ATTENTION)
      framework += f->class_ns[c];
  }
  cJSON *fw = cJSON_AddObjectToObject(j, "framework_kernels");
  us(fw, "time_us", (double)framework);
  cJSON_AddNumberToObject(fw, "share", f->op_ns > 0 ? (double)framework / (double)f->op_ns : 0);
  cJSON *host = cJSON_AddObjectToObject(j, "host");
  cJSON_AddNumberToObject(host, "launches", f->launches);
  cJSON_AddNumberToObject(host, "launch_threads", f->launch_threads);
  cJSON_AddNumberToObject(host, "gaps", f->gaps);
  us(host, "launch_gap_median_us", f->gap_median_ns);
  us(host, "launch_call_median_us", f->call_median_ns);
  cJSON_AddNumberToObject(host, "gpu_waits", f->host_waits);
  us(host, "gpu_wait_us", (double)f->host_wait_ns);
  cJSON_AddNumberToObject(host, "gpu_wait_share", span > 0 ? (double)f->host_wait_ns / span : 0);
  us(host, "other_idle_us", (double)f->other_idle_ns);
  return j;
}
