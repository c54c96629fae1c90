/* ptdsim-calibrate — runs the calibration plan on this node's GPUs and writes
 * a measurements file for `ptdsim fit` (format: doc/calibration.md).
 *
 * The shape of the harness follows nccl-tests: one driver (options, plan,
 * timing statistics, reporting: this file) and the GPU work behind a small
 * table of functions (gpu.cu).  --dry-run prints the plan and never touches
 * CUDA, so it runs on machines without a GPU.
 */
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"
#include "../measure/measurements.h"
#include "../measure/plan.h"

#define CALIB_MAX_CAPS 16

typedef struct {
  char *modes, *output, *shapes;
  gboolean dry_run, keep_going;
  gint64 hidden, heads, seq_len, micro_batch, tp, gpus, warmup, reps, device, nccl_max_bytes, sustained_s, overlap_ms;
  char *overlap_blocks; /* --overlap-blocks N1,N2,... (as given) */
  char *power_limit, *power_limits; /* --power-limit W, --power-limits W1,W2,... (as given) */
  guint n_caps;                     /* the sustained loops' power limits to set (0: the one in force) */
  double caps[CALIB_MAX_CAPS];
} Options;

/* --power-limit W or --power-limits W1,W2,...: watts, each 1 to 1e5, at
 * most CALIB_MAX_CAPS of them. */
static gboolean parse_caps(Options *o, GError **error) {
  if (o->power_limit && o->power_limits) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                "give --power-limit W (one loop) or --power-limits W1,W2,... (one loop each), not both");
    return FALSE;
  }
  const char *text = o->power_limit ? o->power_limit : o->power_limits;
  const char *flag = o->power_limit ? "--power-limit" : "--power-limits";
  if (!text)
    return TRUE;
  char **v = g_strsplit(text, ",", -1);
  gboolean ok = v[0] != NULL && (!o->power_limit || g_strv_length(v) == 1);
  for (char **w = v; ok && *w; w++) {
    char *end = NULL;
    double x = g_ascii_strtod(*w, &end);
    ok = o->n_caps < CALIB_MAX_CAPS && end != *w && *end == '\0' && x >= 1 && x <= 1e5;
    if (ok)
      o->caps[o->n_caps++] = x;
  }
  g_strfreev(v);
  if (!ok)
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                "%s '%s' is not %s watts from 1 to 1e5; give e.g. %s", flag, text,
                o->power_limit ? "a number of" : "a comma list of at most 16 numbers of",
                o->power_limit ? "--power-limit 500" : "--power-limits 700,600,500,400");
  return ok;
}

static gboolean check_modes(const char *modes, GError **error) {
  char **v = g_strsplit(modes, ",", -1);
  gboolean ok = v[0] != NULL;
  for (char **m = v; ok && *m; m++) {
    gboolean known = strcmp(*m, "all") == 0;
    for (guint i = 0; i < calib_n_modes; i++)
      known |= strcmp(*m, calib_modes[i]) == 0;
    if (!known) {
      g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                  "unknown mode '%s'; --mode takes a comma list of gemm, kernels, layer, nccl, membw, gemmlt, "
                  "attention, membound, modern, sustained, overlap, or all",
                  *m);
      ok = FALSE;
    }
  }
  g_strfreev(v);
  return ok;
}

static gboolean range(gint64 v, gint64 lo, gint64 hi, const char *flag, GError **error) {
  if (v >= lo && v <= hi)
    return TRUE;
  g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
              "%s %" G_GINT64_FORMAT " is out of range; give %" G_GINT64_FORMAT " to %" G_GINT64_FORMAT, flag, v, lo, hi);
  return FALSE;
}

/* Dense fp16/bf16 tensor-core FLOPs per clock per SM by architecture (NVIDIA
 * V100, A100 and H100 whitepapers: 125, 312 and 989 TFLOP/s dense at their
 * boost clocks). */
static double flops_per_clock_per_sm(const char *cc) {
  if (g_str_has_prefix(cc, "7.0"))
    return 1024;
  if (g_str_has_prefix(cc, "8.0"))
    return 2048;
  if (g_str_has_prefix(cc, "9.0"))
    return 4096;
  return 1024; /* consumer parts: fp32-accumulate rate */
}

static char *version3(int v, int major_div, int minor_div) {
  return g_strdup_printf("%d.%d.%d", v / major_div, (v % major_div) / minor_div, v % minor_div);
}

static void fill_device(CalibMeasurements *m, const CalibGpuInfo *g, int ranks) {
  CalibDevice *d = &m->device;
  d->name = g_strdup(g->name);
  d->compute_capability = g_strdup(g->compute_capability);
  d->sms = (guint)g->sms;
  d->sm_clock_MHz = g->sm_clock_MHz;
  d->memory_clock_MHz = g->memory_clock_MHz;
  d->memory_bus_bits = g->memory_bus_bits;
  d->memory_GiB = g->memory_GiB;
  d->hbm_GBps = 2.0 * g->memory_clock_MHz * 1e6 * g->memory_bus_bits / 8 / 1e9; /* double data rate */
  double fpc = flops_per_clock_per_sm(g->compute_capability);
  d->peak_tflops = fpc * g->sms * g->sm_clock_MHz * 1e6 / 1e12;
  d->peak_source = g_strdup_printf("%.0f dense fp16 FLOP/clock/SM (compute capability %s) x %d SMs x %.0f MHz max "
                                   "SM clock reported by the driver",
                                   fpc, g->compute_capability, g->sms, g->sm_clock_MHz);
  d->gpus = (guint)ranks;
  d->driver = g_strdup_printf("%d.%d", g->driver / 1000, (g->driver % 1000) / 10);
  d->cuda_runtime = g_strdup_printf("%d.%d", g->runtime / 1000, (g->runtime % 1000) / 10);
  d->cublas = version3(g->cublas, 10000, 100); /* cuBLAS: major*10000 + minor*100 + patch */
  d->cublaslt = version3(g->cublaslt, 10000, 100);
  d->nccl = version3(g->nccl, 10000, 100);      /* NCCL >= 2.9: major*10000 + minor*100 + patch */
  d->l2_MiB = g->l2_bytes / 1048576.0;
  if (g->cudnn)
    d->cudnn = version3(g->cudnn, 10000, 100); /* cuDNN 9: major*10000 + minor*100 + patch */
}

/* A GPU call's failure, named by its measurement (mode, dtype, op, shape:
 * the label its table row would have) so that a line in the "failures"
 * list or on stderr says which one failed. */
static gboolean gpu_failed(int rc, const char *err, const char *what, GError **error) {
  if (rc)
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID, "%s: %s", what, err);
  return rc == 0;
}

/* Under --keep-going a failed measurement is reported on stderr, recorded
 * in the file's "failures" list and skipped; otherwise it stops the run.
 * The table on stdout is flushed first, so that the line lands after the
 * rows before it when both streams go to one file or terminal. */
static gboolean keep(const Options *o, gboolean ok, CalibMeasurements *m, GError **error) {
  if (ok || !o->keep_going)
    return ok;
  fflush(stdout);
  fprintf(stderr, "ptdsim-calibrate: skipped (--keep-going): %s\n", (*error)->message);
  g_ptr_array_add(m->failures, g_strdup((*error)->message));
  g_clear_error(error);
  return TRUE;
}

/* A measurement the device or its libraries cannot run at all: said once
 * per mode on stdout and skipped, not a failure. */
static gboolean unsupported(int rc, const char *err, const char *mode, gboolean *said, CalibMeasurements *m) {
  if (rc != CALIB_GPU_UNSUPPORTED)
    return FALSE;
  if (!*said) {
    printf("  %s: skipped on this device: %s\n", mode, err);
    g_ptr_array_add(m->skipped, g_strdup_printf("%s: %s", mode, err));
  }
  *said = TRUE;
  return TRUE;
}

static CalibTime timed(CalibGpuTiming *t) {
  return calib_time_from_samples(t->samples_us, t->reps);
}

static void row(const char *what, const CalibTime *t, const char *extra) {
  printf("  %-44s %11.2f %10.2f %10.2f  %s\n", what, t->median_us, t->p10_us, t->p90_us, extra);
}

static CalibOverlap overlap_record(const char *with, const CalibGpuOverlap *g) {
  CalibOverlap x = {.m = CALIB_OVERLAP_M, .n = CALIB_OVERLAP_N, .k = CALIB_OVERLAP_K, .blocks = g->blocks,
                    .ranks = 1, .gemm_us = g->gemm_us, .gemm_beside_us = g->gemm_beside_us,
                    .moved_GBps = g->moved_GBps, .moved_beside_GBps = g->moved_beside_GBps};
  g_strlcpy(x.dtype, "bf16", sizeof x.dtype);
  g_strlcpy(x.with, with, sizeof x.with);
  return x;
}

/* The overlap mode: the holder runs (one per block count), then, on more
 * than one GPU, the all-reduce beside the GEMM. */
static gboolean run_overlap(const Options *o, const CalibPlan *plan, int dev, int ranks, CalibGpuTiming *t,
                            CalibMeasurements *m, GError **error) {
  const CalibPlanConfig *c = &plan->cfg;
  CalibGpuOverlap g[CALIB_MAX_OVERLAP_BLOCKS];
  char err[512] = "", label[128];
  printf("\noverlap: a bf16 %ux%ux%u GEMM alone and beside a holder of N blocks copying HBM to HBM (%.0f ms "
         "windows)\n  %6s %12s %12s %9s %12s %12s %12s %12s\n",
         CALIB_OVERLAP_M, CALIB_OVERLAP_N, CALIB_OVERLAP_K, c->overlap_window_s * 1e3, "blocks", "gemm us",
         "beside us", "slowdown", "holder GB/s", "beside GEMM", "copy us", "beside us");
  g_snprintf(label, sizeof label, "overlap bf16 %ux%ux%u beside a copy holder", CALIB_OVERLAP_M, CALIB_OVERLAP_N,
             CALIB_OVERLAP_K);
  gboolean ok = gpu_failed(calib_gpu_overlap(dev, CALIB_OVERLAP_M, CALIB_OVERLAP_N, CALIB_OVERLAP_K,
                                             c->overlap_blocks, c->n_overlap_blocks, CALIB_OVERLAP_HOLDER_BYTES,
                                             CALIB_OVERLAP_MEM_BYTES, c->overlap_window_s, CALIB_OVERLAP_OUTER,
                                             CALIB_OVERLAP_SETTLE_S, t, g,
                                             err, sizeof err),
                           err, label, error);
  for (guint i = 0; ok && i < c->n_overlap_blocks; i++) {
    CalibOverlap x = overlap_record("copy", &g[i]);
    x.bytes = CALIB_OVERLAP_HOLDER_BYTES;
    x.mem_bytes = CALIB_OVERLAP_MEM_BYTES;
    x.mem_us = g[i].mem_us;
    x.mem_beside_us = g[i].mem_beside_us;
    x.moved_beside_mem_GBps = g[i].moved_beside_mem_GBps;
    g_array_append_val(m->overlap, x);
    printf("  %6u %12.1f %12.1f %9.3f %12.1f %12.1f %12.1f %12.1f\n", x.blocks, x.gemm_us, x.gemm_beside_us,
           x.gemm_beside_us / x.gemm_us, x.moved_GBps, x.moved_beside_GBps, x.mem_us, x.mem_beside_us);
  }
  ok = keep(o, ok, m, error);
  if (ok && ranks > 1) {
    CalibGpuOverlap a;
    g_snprintf(label, sizeof label, "overlap bf16 %ux%ux%u beside an all-reduce on %d GPUs", CALIB_OVERLAP_M,
               CALIB_OVERLAP_N, CALIB_OVERLAP_K, ranks);
    ok = gpu_failed(calib_gpu_overlap_allreduce(ranks, CALIB_OVERLAP_M, CALIB_OVERLAP_N, CALIB_OVERLAP_K,
                                                CALIB_OVERLAP_ALLREDUCE_BYTES, c->overlap_window_s,
                                                CALIB_OVERLAP_OUTER, CALIB_OVERLAP_SETTLE_S, &a, err, sizeof err),
                    err, label, error);
    if (ok) {
      CalibOverlap x = overlap_record("all_reduce", &a);
      x.ranks = (guint)ranks;
      x.bytes = CALIB_OVERLAP_ALLREDUCE_BYTES;
      g_array_append_val(m->overlap, x);
      printf("  all-reduce of %.0f MiB on %d GPUs: GEMM %.1f us alone, %.1f us beside (x%.3f); bus bandwidth %.1f "
             "GB/s alone, %.1f GB/s beside the GEMM\n",
             x.bytes / 1048576, ranks, x.gemm_us, x.gemm_beside_us, x.gemm_beside_us / x.gemm_us, x.moved_GBps,
             x.moved_beside_GBps);
    }
    ok = keep(o, ok, m, error);
  } else if (ok)
    printf("  one GPU: the all-reduce beside the GEMM needs two and is skipped\n");
  return ok;
}

static gboolean run(const Options *o, const CalibPlan *plan, GError **error) {
  char err[512] = "";
  CalibGpuInfo info;
  int dev = (int)o->device;
  if (!gpu_failed(calib_gpu_info(dev, &info, err, sizeof err), err, "device", error)) {
    g_prefix_error(error, "no usable GPU (--dry-run shows the plan without one): ");
    return FALSE;
  }
  int ranks = o->gpus > 0 ? (int)o->gpus : info.gpus;
  CalibMeasurements *m = calib_measurements_new();
  fill_device(m, &info, ranks);
  m->tool = g_strdup("ptdsim-calibrate " PTDSIM_VERSION);
  m->host = g_strdup(g_get_host_name());
  GDateTime *now = g_date_time_new_now_utc();
  m->date = g_date_time_format_iso8601(now);
  g_date_time_unref(now);
  m->warmup = (guint)o->warmup;
  m->reps = (guint)o->reps;
  printf("%s: %s, %u SMs at %.0f MHz, %.1f GiB, peak %.1f TFLOP/s, HBM %.0f GB/s; driver %s, CUDA %s, cuBLAS %s, "
         "NCCL %s\n",
         m->host, m->device.name, m->device.sms, m->device.sm_clock_MHz, m->device.memory_GiB, m->device.peak_tflops,
         m->device.hbm_GBps, m->device.driver, m->device.cuda_runtime, m->device.cublas, m->device.nccl);
  printf("estimated wall time of this run: at most about %.0f s (see --dry-run for the assumptions)\n",
         calib_plan_estimate_s(plan, o->modes, (guint)o->warmup, (guint)o->reps, (guint)ranks));
  printf("  %-44s %11s %10s %10s\n", "what", "median us", "p10 us", "p90 us");
  double *samples = g_new(double, o->reps);
  CalibGpuTiming t = {(unsigned)o->warmup, (unsigned)o->reps, samples};
  gboolean ok = TRUE;
  char label[128], extra[64];
  for (int dt = 0; ok && dt < 2 && calib_plan_has_mode(o->modes, "gemm"); dt++)
    for (guint i = 0; ok && i < plan->gemm->len; i++) {
      const CalibPlanGemm *pg = &g_array_index(plan->gemm, CalibPlanGemm, i);
      g_snprintf(label, sizeof label, "gemm %s %s %s %" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT
                                       "x%" G_GUINT64_FORMAT, dt ? "bf16" : "fp16", pg->op, pg->layout, pg->batch,
                 pg->m, pg->n, pg->k);
      ok = gpu_failed(calib_gpu_gemm(dev, dt, pg->layout[0] == 'T', pg->layout[1] == 'T', pg->batch, pg->m, pg->n,
                                     pg->k, &t, err, sizeof err),
                      err, label, error);
      if (ok) {
        CalibGemm g = {.batch = pg->batch, .m = pg->m, .n = pg->n, .k = pg->k, .t = timed(&t)};
        g_strlcpy(g.dtype, dt ? "bf16" : "fp16", sizeof g.dtype);
        g_strlcpy(g.op, pg->op, sizeof g.op);
        g_strlcpy(g.layout, pg->layout, sizeof g.layout);
        g_array_append_val(m->gemm, g);
        g_snprintf(extra, sizeof extra, "%.1f TFLOP/s",
                   2.0 * (double)g.batch * (double)g.m * (double)g.n * (double)g.k / (g.t.median_us * 1e6));
        row(label, &g.t, extra);
      }
      ok = keep(o, ok, m, error);
    }
  for (guint i = 0; ok && calib_plan_has_mode(o->modes, "kernels") && i < plan->kernels->len; i++) {
    const CalibPlanKernel *pk = &g_array_index(plan->kernels, CalibPlanKernel, i);
    g_snprintf(label, sizeof label, "%s (%s) %" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT, pk->name,
               pk->fused ? "fused" : "unfused", pk->rows, pk->cols);
    ok = gpu_failed(
        calib_gpu_kernel(dev, pk->name, pk->fused, pk->rows, pk->cols, pk->seq, pk->head_dim, &t, err, sizeof err), err,
        label, error);
    if (ok) {
      CalibKernel k = {.fused = pk->fused, .rows = pk->rows, .cols = pk->cols, .bytes = pk->bytes,
                       .kernels = pk->kernels, .t = timed(&t)};
      g_strlcpy(k.name, pk->name, sizeof k.name);
      g_array_append_val(m->kernels, k);
      g_snprintf(extra, sizeof extra, "%.0f GB/s", k.bytes / (k.t.median_us * 1e3));
      row(label, &k.t, extra);
    }
    ok = keep(o, ok, m, error);
  }
  if (ok && calib_plan_has_mode(o->modes, "layer")) {
    double *s2 = g_new(double, o->reps), *s3 = g_new(double, o->reps);
    CalibGpuTiming tr = {(unsigned)o->warmup, (unsigned)o->reps, s2}, tb = {(unsigned)o->warmup, (unsigned)o->reps, s3};
    for (guint si = 0; ok && si < plan->cfg.n_shapes; si++) {
      const CalibLayerShape *c = &plan->cfg.shapes[si];
      if (!calib_shape_is_2021(c))
        continue; /* today's shapes: the modern mode */
      char shape[96];
      calib_layer_shape_label(c, shape, sizeof shape);
      double need = calib_plan_layer_bytes(c) / 1073741824.0;
      if (need > 0.9 * info.memory_GiB) {
        g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                    "layer %s needs %.1f GiB of GPU memory and the GPU has %.1f GiB; drop it from --shapes", shape,
                    need, info.memory_GiB);
        ok = keep(o, FALSE, m, error);
        continue;
      }
      g_snprintf(label, sizeof label, "layer fp16 %s", shape);
      ok = gpu_failed(calib_gpu_layer(dev, c->hidden, c->heads, c->seq, c->micro_batch, c->tp, &t, &tr, &tb, err,
                                      sizeof err),
                      err, label, error);
      if (ok) {
        CalibLayer l = {.hidden = c->hidden, .heads = c->heads, .seq = c->seq, .micro_batch = c->micro_batch,
                        .tp = c->tp, .fused = TRUE, .fwd = timed(&t), .bwd = timed(&tb), .has_recompute = TRUE,
                        .recompute = timed(&tr)};
        g_strlcpy(l.dtype, "fp16", sizeof l.dtype);
        g_array_append_val(m->layers, l);
        g_snprintf(label, sizeof label, "layer %s forward", shape);
        row(label, &l.fwd, "");
        g_snprintf(label, sizeof label, "layer %s recompute", shape);
        row(label, &l.recompute, "");
        g_snprintf(label, sizeof label, "layer %s backward", shape);
        row(label, &l.bwd, "");
      }
      ok = keep(o, ok, m, error);
    }
    g_free(s2);
    g_free(s3);
  }
  gboolean said = FALSE;
  for (int fp8 = 0; ok && fp8 < 2 && calib_plan_has_mode(o->modes, "gemmlt"); fp8++, said = FALSE)
    for (guint i = 0; ok && i < plan->gemmlt->len; i++) {
      const CalibPlanLtGemm *pg = &g_array_index(plan->gemmlt, CalibPlanLtGemm, i);
      unsigned tm = 0, tn = 0;
      g_snprintf(label, sizeof label, "gemmlt %s %s %s %" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT,
                 fp8 ? "fp8" : "bf16", pg->op, pg->layout, pg->m, pg->n, pg->k);
      int rc = calib_gpu_gemmlt(dev, fp8, pg->layout[0] == 'T', pg->layout[1] == 'T', pg->m, pg->n, pg->k, &tm, &tn, &t,
                                err, sizeof err);
      if (unsupported(rc, err, fp8 ? "gemmlt fp8" : "gemmlt bf16", &said, m))
        continue;
      ok = gpu_failed(rc, err, label, error);
      if (ok) {
        CalibGemm g = {.batch = 1, .m = pg->m, .n = pg->n, .k = pg->k, .tile_m = tm, .tile_n = tn, .t = timed(&t)};
        g_strlcpy(g.dtype, fp8 ? "fp8" : "bf16", sizeof g.dtype);
        g_strlcpy(g.op, pg->op, sizeof g.op);
        g_strlcpy(g.layout, pg->layout, sizeof g.layout);
        g_strlcpy(g.api, "cublaslt", sizeof g.api);
        g_array_append_val(m->gemm, g);
        g_snprintf(extra, sizeof extra, "%.1f TFLOP/s, tile %ux%u",
                   2.0 * (double)g.m * (double)g.n * (double)g.k / (g.t.median_us * 1e6), tm, tn);
        row(label, &g.t, extra);
      }
      ok = keep(o, ok, m, error);
    }
  if (ok && calib_plan_has_mode(o->modes, "attention")) {
    double *s2 = g_new(double, o->reps);
    CalibGpuTiming tb = {(unsigned)o->warmup, (unsigned)o->reps, s2};
    said = FALSE;
    for (guint i = 0; ok && i < plan->attention->len; i++) {
      const CalibPlanAttention *pa = &g_array_index(plan->attention, CalibPlanAttention, i);
      g_snprintf(label, sizeof label, "attention bf16 causal b=%" G_GUINT64_FORMAT " h=%" G_GUINT64_FORMAT
                                      " kv=%" G_GUINT64_FORMAT " s=%" G_GUINT64_FORMAT " d=%" G_GUINT64_FORMAT,
                 pa->batch, pa->heads, pa->kv_heads, pa->seq, pa->head_dim);
      int rc = calib_gpu_attention(dev, pa->batch, pa->heads, pa->kv_heads, pa->seq, pa->head_dim, 1, &t, &tb, err,
                                   sizeof err);
      if (unsupported(rc, err, "attention", &said, m))
        break; /* no SDPA at all: the rest would say the same */
      ok = gpu_failed(rc, err, label, error);
      if (ok) {
        CalibAttention a = {.causal = TRUE, .batch = pa->batch, .heads = pa->heads, .kv_heads = pa->kv_heads,
                            .seq = pa->seq, .head_dim = pa->head_dim, .has_fwd = TRUE, .has_bwd = TRUE,
                            .fwd = timed(&t), .bwd = timed(&tb)};
        g_strlcpy(a.impl, "cudnn-sdpa", sizeof a.impl);
        g_strlcpy(a.dtype, "bf16", sizeof a.dtype);
        g_array_append_val(m->attention, a);
        double flops = 2.0 * (double)a.batch * (double)a.heads * (double)a.seq * (double)a.seq * (double)a.head_dim;
        g_snprintf(label, sizeof label, "attention b=%" G_GUINT64_FORMAT " h=%" G_GUINT64_FORMAT " kv=%" G_GUINT64_FORMAT
                                        " s=%" G_GUINT64_FORMAT " d=%" G_GUINT64_FORMAT " forward",
                   a.batch, a.heads, a.kv_heads, a.seq, a.head_dim);
        g_snprintf(extra, sizeof extra, "%.1f TFLOP/s (causal)", flops / (a.fwd.median_us * 1e6));
        row(label, &a.fwd, extra);
        g_snprintf(label, sizeof label, "attention b=%" G_GUINT64_FORMAT " h=%" G_GUINT64_FORMAT " kv=%" G_GUINT64_FORMAT
                                        " s=%" G_GUINT64_FORMAT " d=%" G_GUINT64_FORMAT " backward",
                   a.batch, a.heads, a.kv_heads, a.seq, a.head_dim);
        g_snprintf(extra, sizeof extra, "%.1f TFLOP/s (causal)", 2.5 * flops / (a.bwd.median_us * 1e6));
        row(label, &a.bwd, extra);
      }
      ok = keep(o, ok, m, error);
    }
    g_free(s2);
  }
  for (guint i = 0; ok && calib_plan_has_mode(o->modes, "membound") && i < plan->membound->len; i++) {
    const CalibPlanMembound *pb = &g_array_index(plan->membound, CalibPlanMembound, i);
    g_snprintf(label, sizeof label, "%s %" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT, pb->op->name, pb->rows, pb->cols);
    ok = gpu_failed(calib_gpu_membound(dev, pb->op->name, pb->rows, pb->cols, &t, err, sizeof err), err, label,
                    error);
    if (ok) {
      CalibMembound b = {.rows = pb->rows, .cols = pb->cols,
                         .bytes = pb->op->bytes_per_elem * (double)pb->rows * (double)pb->cols, .t = timed(&t)};
      g_strlcpy(b.op, pb->op->name, sizeof b.op);
      g_array_append_val(m->membound, b);
      g_snprintf(extra, sizeof extra, "%.0f GB/s", b.bytes / (b.t.median_us * 1e3));
      row(label, &b.t, extra);
    }
    ok = keep(o, ok, m, error);
  }
  if (ok && calib_plan_has_mode(o->modes, "modern")) {
    double *s2 = g_new(double, o->reps), *s3 = g_new(double, o->reps);
    CalibGpuTiming tr = {(unsigned)o->warmup, (unsigned)o->reps, s2}, tb = {(unsigned)o->warmup, (unsigned)o->reps, s3};
    said = FALSE;
    for (guint i = 0; ok && i < plan->modern->len; i++) {
      const CalibPlanModern *pm = &g_array_index(plan->modern, CalibPlanModern, i);
      const CalibLayerShape *c = &plan->cfg.shapes[pm->shape];
      char shape[128];
      calib_layer_shape_label(c, shape, sizeof shape);
      double need = calib_plan_modern_bytes(c) / 1073741824.0;
      if (need > 0.9 * info.memory_GiB) {
        g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                    "modern layer %s needs %.1f GiB of GPU memory and the GPU has %.1f GiB; drop it from --shapes",
                    shape, need, info.memory_GiB);
        ok = keep(o, FALSE, m, error);
        continue;
      }
      CalibGpuLayer gl = {c->hidden, c->heads, calib_shape_kv_heads(c), calib_shape_ffn(c), c->seq, c->micro_batch,
                          c->tp, c->llama, pm->fp8, pm->sequence_parallel};
      g_snprintf(label, sizeof label, "modern %s %s", pm->fp8 ? "fp8" : "bf16", shape);
      int rc = calib_gpu_modern_layer(dev, &gl, &t, &tr, &tb, err, sizeof err);
      if (unsupported(rc, err, pm->fp8 ? "modern fp8" : "modern bf16", &said, m))
        continue;
      ok = gpu_failed(rc, err, label, error);
      if (ok) {
        CalibLayer l = {.hidden = c->hidden, .heads = c->heads, .seq = c->seq, .micro_batch = c->micro_batch,
                        .tp = c->tp, .kv_heads = c->kv_heads, .ffn = c->ffn, .llama = c->llama, .flash = TRUE,
                        .sequence_parallel = pm->sequence_parallel, .fused = TRUE, .fwd = timed(&t),
                        .bwd = timed(&tb), .has_recompute = TRUE, .recompute = timed(&tr)};
        g_strlcpy(l.dtype, pm->fp8 ? "fp8" : "bf16", sizeof l.dtype);
        g_array_append_val(m->layers, l);
        g_snprintf(label, sizeof label, "modern %s %s forward", shape, l.dtype);
        row(label, &l.fwd, "");
        g_snprintf(label, sizeof label, "modern %s %s recompute", shape, l.dtype);
        row(label, &l.recompute, "");
        g_snprintf(label, sizeof label, "modern %s %s backward", shape, l.dtype);
        row(label, &l.bwd, "");
      }
      ok = keep(o, ok, m, error);
    }
    g_free(s2);
    g_free(s3);
  }
  for (guint i = 0; ok && calib_plan_has_mode(o->modes, "membw") && i < plan->membw_bytes->len; i++) {
    double bytes = g_array_index(plan->membw_bytes, double, i);
    g_snprintf(label, sizeof label, "copy %.0f B", bytes);
    ok = gpu_failed(calib_gpu_copy(dev, bytes, &t, err, sizeof err), err, label, error);
    if (ok) {
      CalibMembw b = {.bytes = 2 * bytes, .t = timed(&t)};
      g_array_append_val(m->membw, b);
      g_snprintf(extra, sizeof extra, "%.0f GB/s moved", b.bytes / (b.t.median_us * 1e3));
      row(label, &b.t, extra);
    }
    ok = keep(o, ok, m, error);
  }
  if (ok && calib_plan_has_mode(o->modes, "nccl")) {
    const double *sizes = (const double *)plan->nccl_bytes->data;
    double max_bytes = sizes[plan->nccl_bytes->len - 1];
    guint counts[16], nr = calib_plan_nccl_ranks((guint)ranks, counts, G_N_ELEMENTS(counts));
    if (ranks == 1)
      printf("\n  one GPU: NCCL runs single-rank (all_reduce, all_gather, reduce_scatter are local copies, recorded "
             "with ranks 1 and busbw 0; ptdsim fit lists them as not fitted); sendrecv needs two GPUs and is skipped\n");
    for (guint ri = 0; ok && ri < nr; ri++) {
      guint group = counts[ri];
      g_snprintf(label, sizeof label, "nccl communicator of %u GPUs", group);
      ok = gpu_failed(calib_gpu_nccl_open((int)group, max_bytes, err, sizeof err), err, label, error);
      if (!ok) {
        ok = keep(o, ok, m, error);
        continue; /* nothing to measure on this group */
      }
      printf("\n  nccl-tests columns on %u GPUs:\n  %-15s %5s %12s %12s %10s %10s\n", group, "op", "ranks", "size (B)",
             "time (us)", "algbw", "busbw");
      for (int op = 0; ok && op < CALIB_N_COLL; op++) {
        if (op == CALIB_SENDRECV && ri + 1 != nr)
          continue; /* send/receive once, between GPUs 0 and 1 */
        guint n = op == CALIB_SENDRECV ? 2 : group;
        for (guint i = 0; ok && i < plan->nccl_bytes->len; i++) {
          if (!calib_plan_coll_fits((CalibCollOp)op, group, sizes[i]))
            continue;
          g_snprintf(label, sizeof label, "nccl %s %u ranks %.0f B", calib_coll_name((CalibCollOp)op), n, sizes[i]);
          ok = gpu_failed(calib_gpu_nccl(op, sizes[i], &t, err, sizeof err), err, label, error);
          if (ok) {
            CalibColl c = {(CalibCollOp)op, n, sizes[i], timed(&t)};
            g_array_append_val(m->coll, c);
            double algbw = c.bytes / (c.t.median_us * 1e3);
            printf("  %-15s %5u %12.0f %12.2f %10.2f %10.2f\n", calib_coll_name(c.op), c.ranks, c.bytes, c.t.median_us,
                   algbw, algbw * calib_busbw_factor(c.op, c.ranks));
          }
          ok = keep(o, ok, m, error);
        }
      }
      calib_gpu_nccl_close();
    }
  }
  /* one loop per power limit asked for (none: one at the limit in force) */
  for (guint cap = 0; ok && calib_plan_has_mode(o->modes, "sustained") && cap < MAX(o->n_caps, 1); cap++) {
    CalibSustained x = {.m = CALIB_SUSTAINED_M, .n = CALIB_SUSTAINED_N, .k = CALIB_SUSTAINED_K};
    g_strlcpy(x.dtype, "bf16", sizeof x.dtype);
    CalibGpuSustained gs = {.set_limit_W = o->n_caps ? o->caps[cap] : 0, .max_chunks = CALIB_MAX_SAMPLES,
                            .chunk_tflops = x.chunk_tflops, .clock_MHz = x.clock_MHz, .power_W = x.power_W};
    g_snprintf(label, sizeof label, "sustained bf16 %ux%ux%u", CALIB_SUSTAINED_M, CALIB_SUSTAINED_N,
               CALIB_SUSTAINED_K);
    if (o->n_caps)
      g_snprintf(label + strlen(label), sizeof label - strlen(label), " at %g W", o->caps[cap]);
    printf("\nsustained: the GEMM in a burst, then %.0f s of chunks of %u products", plan->cfg.sustained_s,
           CALIB_SUSTAINED_CHUNK);
    if (o->n_caps)
      printf(" under a %g W power limit (the previous one restored after)", o->caps[cap]);
    printf("\n");
    ok = gpu_failed(calib_gpu_sustained(dev, x.m, x.n, x.k, plan->cfg.sustained_s, CALIB_SUSTAINED_CHUNK, &t, &gs, err,
                                        sizeof err),
                    err, label, error);
    if (ok && gs.n_chunks == 0)
      ok = gpu_failed(1, "the loop timed no chunk", label, error);
    if (ok) {
      double flops = 2.0 * (double)x.m * (double)x.n * (double)x.k;
      CalibTime burst = timed(&t);
      x.burst_tflops = flops / (burst.median_us * 1e6);
      x.loop_s = gs.loop_s;
      x.power_limit_W = gs.power_limit_W;
      x.n_chunks = gs.n_chunks;
      x.n_clock = x.n_power = gs.n_samples;
      g_array_append_val(m->sustained, x);
      const CalibSustained *r = &g_array_index(m->sustained, CalibSustained, m->sustained->len - 1);
      g_snprintf(extra, sizeof extra, "burst %.1f TFLOP/s; settled %.1f over %.1f s (%u chunks)", r->burst_tflops,
                 calib_sustained_tflops(r), r->loop_s, r->n_chunks);
      row(label, &burst, extra);
      if (r->n_clock)
        printf("  SM clock %.0f MHz, board power %.0f W (the loop's second half), limit %.0f W\n",
               calib_sustained_clock_MHz(r), calib_sustained_power_W(r), r->power_limit_W);
      else
        printf("  no clock or power samples: the driver's NVML library (libnvidia-ml.so.1) did not load\n");
    }
    ok = keep(o, ok, m, error);
  }
  if (ok && calib_plan_has_mode(o->modes, "overlap"))
    ok = run_overlap(o, plan, dev, ranks, &t, m, error);
  g_free(samples);
  if (ok)
    ok = calib_measurements_save(m, o->output, error);
  if (ok)
    printf("\nwrote %s (fit it with: ptdsim fit %s -o PROFILE.json)\n", o->output, o->output);
  if (ok && m->failures->len > 0) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                "%u measurement%s failed (the first: %s); the others are in %s, the failures in its \"failures\" list",
                m->failures->len, m->failures->len == 1 ? "" : "s", (const char *)g_ptr_array_index(m->failures, 0),
                o->output);
    ok = FALSE;
  }
  calib_measurements_free(m);
  return ok;
}

int main(int argc, char **argv) {
  setlocale(LC_ALL, "C");
  /* The table goes out a line at a time, so that a line on stderr (a
   * skipped measurement, the GPU libraries' warnings) never lands inside a
   * row when both streams go to one file, as run-all.sh's log takes them. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  CalibPlanConfig dflt;
  calib_plan_config_default(&dflt);
  /* 0: not given (then the shape comes from --shapes, default sc21) */
  Options o = {.hidden = 0, .heads = 0, .seq_len = 0, .micro_batch = 0, .tp = 0, .gpus = 0, .warmup = 10, .reps = 50,
               .device = 0, .nccl_max_bytes = (gint64)dflt.nccl_max_bytes, .sustained_s = (gint64)dflt.sustained_s,
               .overlap_ms = (gint64)(dflt.overlap_window_s * 1e3)};
  GOptionEntry entries[] = {
      {"mode", 'm', 0, G_OPTION_ARG_STRING, &o.modes,
       "Comma list of gemm, kernels, layer, nccl, membw (the 2021 modes), gemmlt, attention, membound, modern "
       "(today's), sustained (a GEMM looped until the clock settles), overlap (a GEMM beside SM-holding copies and an "
       "all-reduce), or all (default)",
       "MODES"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &o.output, "Measurements file (default calibration.json)", "FILE"},
      {"dry-run", 'n', 0, G_OPTION_ARG_NONE, &o.dry_run, "Print the plan and exit; needs no GPU", NULL},
      {"keep-going", 'k', 0, G_OPTION_ARG_NONE, &o.keep_going,
       "Skip a failed measurement (reported, listed under \"failures\" in the file) instead of stopping; the exit "
       "status is still non-zero",
       NULL},
      {"shapes", 0, 0, G_OPTION_ARG_STRING, &o.shapes,
       "Layer shapes: a preset (sc21, the default: GPT-3 175B t=8, 1.7B t=1, 18.4B t=8, s=2048, b=1 and 4; "
       "gpt3-175b; gpt3: GPT-3 175B t=8 at s 2048 and 4096; llama3: Llama 3 8B, 70B and 405B at s=8192) or a comma "
       "list of HIDDEN:HEADS:SEQ:MICRO_BATCH:TP[:KV_HEADS:FFN:VOCAB:STYLE]",
       "SPEC"},
      {"hidden", 0, 0, G_OPTION_ARG_INT64, &o.hidden, "One layer shape instead of --shapes: hidden size h (default 12288)",
       "H"},
      {"heads", 0, 0, G_OPTION_ARG_INT64, &o.heads, "  ... attention heads a (default 96)", "A"},
      {"seq-len", 0, 0, G_OPTION_ARG_INT64, &o.seq_len, "  ... sequence length s (default 2048)", "S"},
      {"micro-batch", 0, 0, G_OPTION_ARG_INT64, &o.micro_batch, "  ... micro-batch b (default 1)", "B"},
      {"tp", 0, 0, G_OPTION_ARG_INT64, &o.tp, "  ... tensor-parallel size t of the shard shapes (default 8)", "T"},
      {"gpus", 0, 0, G_OPTION_ARG_INT64, &o.gpus, "GPUs for NCCL (default: all visible; 8 in --dry-run)", "N"},
      {"nccl-max-bytes", 0, 0, G_OPTION_ARG_INT64, &o.nccl_max_bytes, "Largest NCCL size (default 1 GiB)", "BYTES"},
      {"warmup", 0, 0, G_OPTION_ARG_INT64, &o.warmup, "Untimed runs before timing (default 10)", "N"},
      {"reps", 0, 0, G_OPTION_ARG_INT64, &o.reps, "Timed repetitions; the median is reported (default 50)", "N"},
      {"device", 0, 0, G_OPTION_ARG_INT64, &o.device, "GPU for the single-GPU modes (default 0)", "N"},
      {"sustained-seconds", 0, 0, G_OPTION_ARG_INT64, &o.sustained_s,
       "The sustained mode's loop, seconds (default 20)", "S"},
      {"power-limit", 0, 0, G_OPTION_ARG_STRING, &o.power_limit,
       "The sustained mode under this board power limit, watts: set through NVML (root only) before the loop, the "
       "previous limit restored after it, also on failure",
       "W"},
      {"power-limits", 0, 0, G_OPTION_ARG_STRING, &o.power_limits,
       "One sustained loop under each of these power limits (comma list of watts), for ptdsim fit's power curve",
       "W1,W2,..."},
      {"overlap-blocks", 0, 0, G_OPTION_ARG_STRING, &o.overlap_blocks,
       "The overlap mode's holder sizes: thread blocks (SMs held), one run each (default 4,8,16,24,32)", "N1,N2,..."},
      {"overlap-ms", 0, 0, G_OPTION_ARG_INT64, &o.overlap_ms,
       "The overlap mode's window: each timed interval lasts at least this long, ms (default 300)", "MS"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  GOptionContext *ctx = g_option_context_new("- measure GEMMs, kernels, a layer, NCCL and copies on this node");
  g_option_context_set_summary(
      ctx, "Runs what a training step runs on this node: today's (cuBLASLt GEMMs in bf16 and FP8 at one tensor-\n"
           "parallel rank's shapes, cuDNN's fused flash attention, memory-bound kernels as Megatron-Core and\n"
           "Transformer Engine write them, one whole modern layer) and 2021's (cuBLAS GEMMs in fp16 and bf16 over a\n"
           "layer's shapes and a quantization grid, Megatron's fused and unfused kernels, one whole layer), NCCL\n"
           "collectives (8 B .. 1 GiB) and device copies; checks each kernel against a CPU reference; times with\n"
           "CUDA events; writes a measurements JSON for ptdsim fit.");
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *error = NULL;
  gboolean ok = g_option_context_parse(ctx, &argc, &argv, &error);
  if (ok && argc > 1) {
    g_set_error(&error, CALIB_ERROR, CALIB_ERROR_INVALID, "unexpected argument '%s' (see --help)", argv[1]);
    ok = FALSE;
  }
  if (!o.modes)
    o.modes = g_strdup("all");
  if (!o.output)
    o.output = g_strdup("calibration.json");
  gboolean one_shape = o.hidden || o.heads || o.seq_len || o.micro_batch || o.tp;
  if (ok && one_shape && o.shapes) {
    g_set_error(&error, CALIB_ERROR, CALIB_ERROR_INVALID,
                "give either --shapes or --hidden/--heads/--seq-len/--micro-batch/--tp (one shape), not both");
    ok = FALSE;
  }
  if (one_shape) {
    o.hidden = o.hidden ? o.hidden : 12288, o.heads = o.heads ? o.heads : 96;
    o.seq_len = o.seq_len ? o.seq_len : 2048, o.micro_batch = o.micro_batch ? o.micro_batch : 1;
    o.tp = o.tp ? o.tp : 8;
  }
  ok = ok && check_modes(o.modes, &error) &&
       (!one_shape ||
        (range(o.hidden, 1, 65536, "--hidden", &error) && range(o.heads, 1, 65536, "--heads", &error) &&
         range(o.seq_len, 1, 65536, "--seq-len", &error) && range(o.micro_batch, 1, 64, "--micro-batch", &error) &&
         range(o.tp, 1, 64, "--tp", &error))) &&
       range(o.gpus, 0, 64, "--gpus", &error) && range(o.warmup, 0, 10000, "--warmup", &error) &&
       range(o.reps, 1, 100000, "--reps", &error) && range(o.device, 0, 64, "--device", &error) &&
       range(o.nccl_max_bytes, 8, 8ll << 30, "--nccl-max-bytes", &error) &&
       range(o.sustained_s, 1, 3600, "--sustained-seconds", &error) &&
       range(o.overlap_ms, 10, 10000, "--overlap-ms", &error) && parse_caps(&o, &error);
  if (ok && o.n_caps && !calib_plan_has_mode(o.modes, "sustained")) {
    g_set_error(&error, CALIB_ERROR, CALIB_ERROR_INVALID,
                "--power-limit and --power-limits apply to the sustained mode; add sustained to --mode");
    ok = FALSE;
  }
  if (ok && (o.overlap_blocks || o.overlap_ms != (gint64)(dflt.overlap_window_s * 1e3)) &&
      !calib_plan_has_mode(o.modes, "overlap")) {
    g_set_error(&error, CALIB_ERROR, CALIB_ERROR_INVALID,
                "--overlap-blocks and --overlap-ms apply to the overlap mode; add overlap to --mode");
    ok = FALSE;
  }
  CalibPlan *plan = NULL;
  if (ok) {
    CalibPlanConfig cfg = dflt;
    if (one_shape) {
      cfg.shapes[0] = (CalibLayerShape){.hidden = (guint)o.hidden, .heads = (guint)o.heads, .seq = (guint)o.seq_len,
                                        .micro_batch = (guint)o.micro_batch, .tp = (guint)o.tp};
      cfg.n_shapes = 1;
    } else if (o.shapes)
      ok = calib_plan_parse_shapes(o.shapes, &cfg, &error);
    cfg.gpus = o.gpus > 0 ? (guint)o.gpus : 8;
    cfg.nccl_max_bytes = (guint64)o.nccl_max_bytes;
    cfg.sustained_s = (double)o.sustained_s;
    cfg.overlap_window_s = (double)o.overlap_ms / 1e3;
    if (ok && o.overlap_blocks)
      ok = calib_plan_parse_blocks(o.overlap_blocks, &cfg, &error);
    ok = ok && (plan = calib_plan_new(&cfg, &error)) != NULL;
  }
  if (ok && o.dry_run) {
    GString *text = g_string_new(NULL);
    calib_plan_print(plan, o.modes, (guint)o.warmup, (guint)o.reps, text);
    fputs(text->str, stdout);
    if (o.n_caps && calib_plan_has_mode(o.modes, "sustained")) {
      printf("sustained: one loop under each power limit, set through NVML (root only) and restored after:");
      for (guint i = 0; i < o.n_caps; i++)
        printf(" %g W", o.caps[i]);
      printf("\n");
      if (o.n_caps > 1)
        printf("  (the estimate above counts one loop: each further limit adds its burst and %.0f s)\n",
               (double)o.sustained_s);
    }
    printf("\n--dry-run: nothing was run; without it the measurements go to %s\n", o.output);
    g_string_free(text, TRUE);
  } else if (ok)
    ok = run(&o, plan, &error);
  if (!ok) {
    fprintf(stderr, "ptdsim-calibrate: %s\n", error->message);
    g_error_free(error);
  }
  calib_plan_free(plan);
  g_free(o.modes);
  g_free(o.output);
  g_free(o.shapes);
  g_free(o.power_limit);
  g_free(o.power_limits);
  g_free(o.overlap_blocks);
  g_option_context_free(ctx);
  return ok ? 0 : 1;
}
