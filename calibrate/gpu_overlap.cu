// ptdsim-calibrate — the overlap mode: what a GEMM and a collective's
// kernels cost each other when they share one GPU (interface:
// calib_gpu_overlap and calib_gpu_overlap_allreduce in gpu.h).
//
// NCCL runs a collective as one kernel of one thread block per channel, each
// block on its own SM, moving data through HBM in a loop (its "simple"
// protocol: loads and stores of 16 bytes per thread, several in flight).
// The holder kernel here does what such a block does to the GPU without the
// network: each of its blocks copies its slice of a buffer from HBM to HBM,
// pass after pass.  The GEMM is timed alone and beside it; the holder's rate
// alone and beside the GEMM; and a streaming copy that fills the GPU (the
// memory-bound kernels of a layer) alone and beside the holder.
//
// Every interval is a CUDA-event interval of at least one window (hundreds
// of milliseconds).  A run beside another is timed inside it: the outer one
// is enqueued first, sized to `outer` windows at its rate alone, the inner
// one starts after the outer's start event, and a run whose inner interval
// does not end before the outer one is an error (then it was not beside it
// all along).  The copies are checked against their sources, the
// all-reduce's sums against the ranks' count; the GEMM is checked by
// calib_gpu_gemmlt, whose measurement is the burst.
#include <math.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"
#include "gpu_common.cuh"
#include "gpu_gemmlt.cuh"

// Records a one-line error and jumps to the function's cleanup.
#define OV_FAIL(...)                                                                                                 \
  do {                                                                                                               \
    rc = failf(err, errlen, __VA_ARGS__);                                                                            \
    goto done;                                                                                                       \
  } while (0)

// One block's threads and the 16-byte accesses each keeps in flight (NCCL's
// simple protocol runs up to 512 threads per channel and unrolls its copy
// loop: src/device/common_kernel.h).  A holder slice and a probe tile are
// whole multiples of OV_THREADS * OV_UNROLL accesses.
#define OV_THREADS 512
#define OV_UNROLL 4
#define OV_TILE ((size_t)OV_THREADS * OV_UNROLL) // int4 per tile

// One thread's share of a tile starting at `at`: OV_UNROLL 16-byte loads in
// flight, then their stores.
static __device__ __forceinline__ void ov_copy_tile(const int4 *src, int4 *dst, size_t at) {
  int4 v[OV_UNROLL];
#pragma unroll
  for (int u = 0; u < OV_UNROLL; u++)
    v[u] = src[at + (size_t)u * OV_THREADS];
#pragma unroll
  for (int u = 0; u < OV_UNROLL; u++)
    dst[at + (size_t)u * OV_THREADS] = v[u];
}

// Block b copies src[b per .. (b + 1) per) to dst, `passes` times; per is a
// multiple of OV_TILE.
static __global__ void ov_holder(const int4 *src, int4 *dst, size_t per, unsigned passes) {
  const int4 *s = src + blockIdx.x * per;
  int4 *d = dst + blockIdx.x * per;
  for (unsigned p = 0; p < passes; p++)
    for (size_t i = threadIdx.x; i < per; i += OV_TILE)
      ov_copy_tile(s, d, i);
}

// One pass of the probe: block b copies tile b (a grid of n / OV_TILE blocks).
static __global__ void ov_probe(const int4 *src, int4 *dst) {
  ov_copy_tile(src, dst, blockIdx.x * OV_TILE + threadIdx.x);
}

static __global__ void ov_count_diff(const int4 *a, const int4 *b, size_t n, unsigned long long *bad) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    if (a[i].x != b[i].x || a[i].y != b[i].y || a[i].z != b[i].z || a[i].w != b[i].w)
      atomicAdd(bad, 1ull);
}

static __global__ void ov_fill_ones(float *p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = 1.0f;
}

static __global__ void ov_count_not(const float *p, size_t n, float want, unsigned long long *bad) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    if (p[i] != want)
      atomicAdd(bad, 1ull);
}

// The elements of a (n int4) that differ from b's, on stream s.
static int count_diff(const int4 *a, const int4 *b, size_t n, unsigned long long *d_bad, cudaStream_t s,
                      unsigned long long *bad, char *err, size_t errlen) {
  int rc = 0;
  CUDA_OK(cudaMemsetAsync(d_bad, 0, sizeof *d_bad, s));
  ov_count_diff<<<grid_for(n), 256, 0, s>>>(a, b, n, d_bad);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaMemcpyAsync(bad, d_bad, sizeof *bad, cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaStreamSynchronize(s));
done:
  return rc;
}

// `work` (a callable enqueuing on stream s, returning 0 or 1 with err set)
// between two events; its interval in *ms.
template <class W>
static int timed(cudaStream_t s, cudaEvent_t *ev, W work, float *ms, char *err, size_t errlen) {
  int rc = 0;
  CUDA_OK(cudaEventRecord(ev[0], s));
  CHECK_RC(work());
  CUDA_OK(cudaEventRecord(ev[1], s));
  CUDA_OK(cudaEventSynchronize(ev[1]));
  CUDA_OK(cudaEventElapsedTime(ms, ev[0], ev[1]));
  if (!(*ms > 0 && isfinite(*ms)))
    return failf(err, errlen, "a timed interval read %g ms", (double)*ms);
done:
  return rc;
}

// `outer` on stream so, then `inner` on stream si from the outer's start
// on; both intervals (ms); an error unless the inner one ended before the
// outer one.  ev: four events.
template <class O, class I>
static int nested(cudaStream_t so, cudaStream_t si, cudaEvent_t *ev, O outer, I inner, float *outer_ms,
                  float *inner_ms, const char *what, char *err, size_t errlen) {
  int rc = 0;
  float tail = 0;
  CUDA_OK(cudaEventRecord(ev[0], so));
  CHECK_RC(outer());
  CUDA_OK(cudaEventRecord(ev[1], so));
  CUDA_OK(cudaStreamWaitEvent(si, ev[0], 0));
  CUDA_OK(cudaEventRecord(ev[2], si));
  CHECK_RC(inner());
  CUDA_OK(cudaEventRecord(ev[3], si));
  CUDA_OK(cudaEventSynchronize(ev[1]));
  CUDA_OK(cudaEventSynchronize(ev[3]));
  CUDA_OK(cudaEventElapsedTime(outer_ms, ev[0], ev[1]));
  CUDA_OK(cudaEventElapsedTime(inner_ms, ev[2], ev[3]));
  CUDA_OK(cudaEventElapsedTime(&tail, ev[3], ev[1]));
  if (!(*outer_ms > 0 && *inner_ms > 0 && isfinite(*outer_ms) && isfinite(*inner_ms)))
    return failf(err, errlen, "%s: a timed interval read %g ms / %g ms", what, (double)*outer_ms, (double)*inner_ms);
  if (!(tail > 0))
    return failf(err, errlen,
                 "%s: the inner run (%.1f ms) ended %.1f ms after the outer one (%.1f ms), so it did not run beside "
                 "it all along: the two streams did not run concurrently (CUDA_LAUNCH_BLOCKING, MPS or a debugger?) "
                 "or one slowed the other more than %.0fx",
                 what, (double)*inner_ms, -(double)tail, (double)*outer_ms, (double)(*outer_ms / *inner_ms));
done:
  return rc;
}

static unsigned count_for(double window_s, double each_s) {
  return (unsigned)fmax(1.0, ceil(window_s / each_s));
}

// The GEMM of the mode on its stream, with its operands (as the sustained
// loop runs it: calib_gpu_gemmlt's layout and seeds).
struct OvGemm {
  cublasLtHandle_t h;
  void *ws, *A, *B;
  __nv_bfloat16 *D;
  LtGemm g;
};

static int ov_gemm_open(OvGemm *x, cudaStream_t s, unsigned long long m, unsigned long long n, unsigned long long k,
                        char *err, size_t errlen) {
  int rc = 0;
  size_t na = (size_t)m * k, nb = (size_t)k * n, nd = (size_t)m * n;
  memset(x, 0, sizeof *x);
  CUBLAS_OK(cublasLtCreate(&x->h));
  CUDA_OK(cudaMalloc(&x->ws, LT_WORKSPACE_BYTES));
  CHECK_RC(lt_gemm_create(&x->g, x->h, s, x->ws, LT_WORKSPACE_BYTES, 0, 0, 1, 0, m, n, k, nullptr, nullptr, err,
                          errlen));
  CUDA_OK(cudaMalloc(&x->A, na * sizeof(__nv_bfloat16)));
  CUDA_OK(cudaMalloc(&x->B, nb * sizeof(__nv_bfloat16)));
  CUDA_OK(cudaMalloc(&x->D, nd * sizeof *x->D));
  fill_kernel<__nv_bfloat16><<<grid_for(na), 256, 0, s>>>((__nv_bfloat16 *)x->A, na, LT_SEED_A, 1.0f);
  fill_kernel<__nv_bfloat16><<<grid_for(nb), 256, 0, s>>>((__nv_bfloat16 *)x->B, nb, LT_SEED_B, 1.0f);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaStreamSynchronize(s));
done:
  return rc;
}

static int ov_gemm_run(OvGemm *x, unsigned products, char *err, size_t errlen) {
  int rc = 0;
  for (unsigned i = 0; i < products && rc == 0; i++)
    rc = lt_gemm_run(&x->g, x->A, x->B, x->D, nullptr, nullptr, err, errlen);
  return rc;
}

static void ov_gemm_close(OvGemm *x) {
  lt_gemm_destroy(&x->g);
  cudaFree(x->A);
  cudaFree(x->B);
  cudaFree(x->D);
  cudaFree(x->ws);
  if (x->h)
    cublasLtDestroy(x->h);
  memset(x, 0, sizeof *x);
}

// The GEMM's time per product over a window, alone on stream s (three
// products first give the count).
static int gemm_alone(OvGemm *x, cudaStream_t s, cudaEvent_t *ev, double window_s, unsigned *products, double *us,
                      char *err, size_t errlen) {
  int rc = 0;
  float ms = 0;
  CHECK_RC(timed(s, ev, [&] { return ov_gemm_run(x, 3, err, errlen); }, &ms, err, errlen));
  *products = count_for(window_s, ms * 1e-3 / 3);
  CHECK_RC(timed(s, ev, [&] { return ov_gemm_run(x, *products, err, errlen); }, &ms, err, errlen));
  *us = ms * 1e3 / *products;
done:
  return rc;
}

extern "C" int calib_gpu_overlap(int device, unsigned long long m, unsigned long long n, unsigned long long k,
                                 const unsigned *blocks, unsigned n_blocks, double holder_bytes, double mem_bytes,
                                 double window_s, unsigned outer, double settle_s, CalibGpuTiming *burst,
                                 CalibGpuOverlap *out, char *err, size_t errlen) {
  int rc = 0;
  unsigned tile_m = 0, tile_n = 0, products = 0, probes = 0;
  int sms = 0;
  cudaStream_t s_main = nullptr, s_side = nullptr;
  cudaEvent_t ev[4] = {nullptr, nullptr, nullptr, nullptr};
  OvGemm x;
  memset(&x, 0, sizeof x);
  int4 *hsrc = nullptr, *hdst = nullptr, *psrc = nullptr, *pdst = nullptr;
  unsigned long long *d_bad = nullptr, bad = 0;
  size_t h16 = (size_t)(holder_bytes / 16), p16 = (size_t)(mem_bytes / 16) / OV_TILE * OV_TILE;
  double gemm_us = 0;
  float ms = 0;
  CHECK_RC(calib_gpu_gemmlt(device, 0, 1, 0, m, n, k, &tile_m, &tile_n, burst, err, errlen));
  CUDA_OK(cudaSetDevice(device));
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  for (unsigned i = 0; i < n_blocks; i++)
    if (blocks[i] < 1 || (int)blocks[i] >= sms || h16 / blocks[i] < OV_TILE)
      return failf(err, errlen,
                   "--overlap-blocks %u: give 1 to %d blocks (this GPU has %d SMs and the GEMM needs some), each with "
                   "at least %zu bytes of the %.0f-byte holder buffer",
                   blocks[i], sms - 1, sms, OV_TILE * 16, holder_bytes);
  if (p16 == 0)
    return failf(err, errlen, "the probe's buffer (%.0f bytes) is smaller than one tile", mem_bytes);
  CUDA_OK(cudaStreamCreateWithFlags(&s_main, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&s_side, cudaStreamNonBlocking));
  for (int i = 0; i < 4; i++)
    CUDA_OK(cudaEventCreate(&ev[i]));
  CHECK_RC(ov_gemm_open(&x, s_main, m, n, k, err, errlen));
  CUDA_OK(cudaMalloc(&hsrc, h16 * sizeof *hsrc));
  CUDA_OK(cudaMalloc(&hdst, h16 * sizeof *hdst));
  CUDA_OK(cudaMalloc(&psrc, p16 * sizeof *psrc));
  CUDA_OK(cudaMalloc(&pdst, p16 * sizeof *pdst));
  CUDA_OK(cudaMalloc(&d_bad, sizeof *d_bad));
  fill_kernel<__nv_bfloat16><<<grid_for(h16 * 8), 256, 0, s_main>>>((__nv_bfloat16 *)hsrc, h16 * 8, 71, 1.0f);
  fill_kernel<__nv_bfloat16><<<grid_for(p16 * 8), 256, 0, s_main>>>((__nv_bfloat16 *)psrc, p16 * 8, 72, 1.0f);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaMemsetAsync(pdst, 0, p16 * sizeof *pdst, s_main));
  CUDA_OK(cudaStreamSynchronize(s_main));
  {
    auto probe = [&](unsigned passes) -> int {
      for (unsigned i = 0; i < passes; i++)
        ov_probe<<<(unsigned)(p16 / OV_TILE), OV_THREADS, 0, s_main>>>(psrc, pdst);
      return cudaGetLastError() == cudaSuccess ? 0 : failf(err, errlen, "the probe copy failed to launch");
    };
    // The GEMM looped until a power-capped clock settles (the H100's within
    // two seconds: calibrate/measurements/h100-sxm5-80gb-sustained.json),
    // so that a slowdown beside the holder is not the clock's fall.
    CHECK_RC(gemm_alone(&x, s_main, ev, window_s, &products, &gemm_us, err, errlen));
    CHECK_RC(timed(s_main, ev, [&] { return ov_gemm_run(&x, count_for(settle_s, gemm_us * 1e-6), err, errlen); },
                   &ms, err, errlen));
    // the probe checked once
    CHECK_RC(timed(s_main, ev, [&] { return probe(2); }, &ms, err, errlen));
    probes = count_for(window_s, ms * 1e-3 / 2);
    CHECK_RC(count_diff(psrc, pdst, p16, d_bad, s_main, &bad, err, errlen));
    if (bad)
      OV_FAIL("the probe copy left %llu of %zu 16-byte words wrong", bad, p16);
    for (unsigned b = 0; b < n_blocks; b++) {
      CalibGpuOverlap *o = &out[b];
      unsigned nb = blocks[b];
      size_t per = h16 / nb / OV_TILE * OV_TILE;
      double pass_bytes = (double)nb * per * 16;
      unsigned passes = 0;
      float outer_ms = 0, inner_ms = 0;
      char what[96];
      auto holder = [&](unsigned np) -> int {
        ov_holder<<<nb, OV_THREADS, 0, s_side>>>(hsrc, hdst, per, np);
        return cudaGetLastError() == cudaSuccess ? 0 : failf(err, errlen, "the holder kernel failed to launch");
      };
      memset(o, 0, sizeof *o);
      o->blocks = nb;
      // the GEMM and the probe alone, each over a window, just before they
      // run beside the holder (at the clock they will run at)
      CHECK_RC(gemm_alone(&x, s_main, ev, window_s, &products, &o->gemm_us, err, errlen));
      CHECK_RC(timed(s_main, ev, [&] { return probe(probes); }, &ms, err, errlen));
      o->mem_us = ms * 1e3 / probes;
      // the holder alone: one pass gives the count; its copy checked
      CUDA_OK(cudaMemsetAsync(hdst, 0, h16 * sizeof *hdst, s_side));
      CHECK_RC(timed(s_side, ev, [&] { return holder(1); }, &ms, err, errlen));
      passes = count_for(window_s, ms * 1e-3);
      CHECK_RC(timed(s_side, ev, [&] { return holder(passes); }, &ms, err, errlen));
      o->moved_GBps = pass_bytes * passes / (ms * 1e-3) / 1e9;
      CHECK_RC(count_diff(hsrc, hdst, (size_t)nb * per, d_bad, s_side, &bad, err, errlen));
      if (bad)
        OV_FAIL("the holder of %u blocks left %llu of %zu 16-byte words wrong", nb, bad,
                     (size_t)nb * per);
      // the holder inside the GEMM's run, then the GEMM inside the holder's
      snprintf(what, sizeof what, "the holder of %u blocks beside the GEMM", nb);
      CHECK_RC(nested(s_main, s_side, ev, [&] { return ov_gemm_run(&x, outer * products, err, errlen); },
                      [&] { return holder(passes); }, &outer_ms, &inner_ms, what, err, errlen));
      o->moved_beside_GBps = pass_bytes * passes / (inner_ms * 1e-3) / 1e9;
      snprintf(what, sizeof what, "the GEMM beside the holder of %u blocks", nb);
      CHECK_RC(nested(s_side, s_main, ev, [&] { return holder(outer * passes); },
                      [&] { return ov_gemm_run(&x, products, err, errlen); }, &outer_ms, &inner_ms, what, err,
                      errlen));
      o->gemm_beside_us = inner_ms * 1e3 / products;
      // the same with the probe in the GEMM's place
      snprintf(what, sizeof what, "the holder of %u blocks beside the probe copy", nb);
      CHECK_RC(nested(s_main, s_side, ev, [&] { return probe(outer * probes); }, [&] { return holder(passes); },
                      &outer_ms, &inner_ms, what, err, errlen));
      o->moved_beside_mem_GBps = pass_bytes * passes / (inner_ms * 1e-3) / 1e9;
      snprintf(what, sizeof what, "the probe copy beside the holder of %u blocks", nb);
      CHECK_RC(nested(s_side, s_main, ev, [&] { return holder(outer * passes); }, [&] { return probe(probes); },
                      &outer_ms, &inner_ms, what, err, errlen));
      o->mem_beside_us = inner_ms * 1e3 / probes;
    }
  }
done:
  ov_gemm_close(&x);
  cudaFree(hsrc);
  cudaFree(hdst);
  cudaFree(psrc);
  cudaFree(pdst);
  cudaFree(d_bad);
  for (int i = 0; i < 4; i++)
    if (ev[i])
      cudaEventDestroy(ev[i]);
  if (s_main)
    cudaStreamDestroy(s_main);
  if (s_side)
    cudaStreamDestroy(s_side);
  return rc;
}

#define OV_MAX_RANKS 64

// `times` all-reduces of count floats over the ranks, one NCCL group each;
// device 0 current after.
static int ov_reduce(int ranks, float **send, float **recv, size_t count, ncclComm_t *comms, cudaStream_t *streams,
                     unsigned times, char *err, size_t errlen) {
  int rc = 0;
  for (unsigned t = 0; t < times; t++) {
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < ranks; r++) {
      ncclResult_t e = ncclAllReduce(send[r], recv[r], count, ncclFloat, ncclSum, comms[r], streams[r]);
      if (e != ncclSuccess) {
        ncclGroupEnd();
        OV_FAIL("ncclAllReduce on rank %d of %d failed: %s", r, ranks, ncclGetErrorString(e));
      }
    }
    NCCL_OK(ncclGroupEnd());
  }
  CUDA_OK(cudaSetDevice(0));
done:
  return rc;
}

extern "C" int calib_gpu_overlap_allreduce(int ranks, unsigned long long m, unsigned long long n,
                                           unsigned long long k, double bytes, double window_s, unsigned outer,
                                           double settle_s, CalibGpuOverlap *out, char *err, size_t errlen) {
  int rc = 0, visible = 0;
  int devs[OV_MAX_RANKS];
  ncclComm_t comms[OV_MAX_RANKS];
  cudaStream_t streams[OV_MAX_RANKS], s_gemm = nullptr;
  float *send[OV_MAX_RANKS], *recv[OV_MAX_RANKS];
  cudaEvent_t ev[4] = {nullptr, nullptr, nullptr, nullptr};
  unsigned long long *d_bad = nullptr, bad = 0;
  size_t count = (size_t)(bytes / 4);
  unsigned products = 0, reduces = 0;
  float ms = 0, outer_ms = 0, inner_ms = 0;
  double busbw_factor = 2.0 * (ranks - 1) / ranks; // nccl-tests' all-reduce bus bandwidth
  OvGemm x;
  memset(&x, 0, sizeof x);
  memset(comms, 0, sizeof comms);
  memset(streams, 0, sizeof streams);
  memset(send, 0, sizeof send);
  memset(recv, 0, sizeof recv);
  memset(out, 0, sizeof *out);
  CUDA_OK(cudaGetDeviceCount(&visible));
  if (ranks < 2 || ranks > visible || ranks > OV_MAX_RANKS)
    return failf(err, errlen, "the all-reduce beside the GEMM needs 2 to %d GPUs; %d asked, %d visible", OV_MAX_RANKS,
                 ranks, visible);
  for (int r = 0; r < ranks; r++) {
    devs[r] = r;
    CUDA_OK(cudaSetDevice(r));
    CUDA_OK(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    CUDA_OK(cudaMalloc(&send[r], count * sizeof(float)));
    CUDA_OK(cudaMalloc(&recv[r], count * sizeof(float)));
    ov_fill_ones<<<grid_for(count), 256, 0, streams[r]>>>(send[r], count);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaStreamSynchronize(streams[r]));
  }
  NCCL_OK(ncclCommInitAll(comms, ranks, devs));
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaStreamCreateWithFlags(&s_gemm, cudaStreamNonBlocking));
  for (int i = 0; i < 4; i++)
    CUDA_OK(cudaEventCreate(&ev[i]));
  CUDA_OK(cudaMalloc(&d_bad, sizeof *d_bad));
  CHECK_RC(ov_gemm_open(&x, s_gemm, m, n, k, err, errlen));
  {
    auto reduce = [&](unsigned times) {
      return ov_reduce(ranks, send, recv, count, comms, streams, times, err, errlen);
    };
    // the GEMM on GPU 0 looped until its clock settles (as above); the
    // all-reduce alone, its sums checked
    CHECK_RC(gemm_alone(&x, s_gemm, ev, window_s, &products, &out->gemm_us, err, errlen));
    CHECK_RC(timed(s_gemm, ev,
                   [&] { return ov_gemm_run(&x, count_for(settle_s, out->gemm_us * 1e-6), err, errlen); }, &ms, err,
                   errlen));
    CHECK_RC(timed(streams[0], ev, [&] { return reduce(2); }, &ms, err, errlen));
    reduces = count_for(window_s, ms * 1e-3 / 2);
    CHECK_RC(timed(streams[0], ev, [&] { return reduce(reduces); }, &ms, err, errlen));
    out->moved_GBps = bytes * busbw_factor / (ms * 1e-3 / reduces) / 1e9;
    for (int r = 0; r < ranks; r++) {
      CUDA_OK(cudaSetDevice(r));
      CUDA_OK(cudaStreamSynchronize(streams[r]));
    }
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaMemsetAsync(d_bad, 0, sizeof *d_bad, streams[0]));
    ov_count_not<<<grid_for(count), 256, 0, streams[0]>>>(recv[0], count, (float)ranks, d_bad);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpyAsync(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost, streams[0]));
    CUDA_OK(cudaStreamSynchronize(streams[0]));
    if (bad)
      OV_FAIL("the all-reduce over %d GPUs left %llu of %zu sums wrong", ranks, bad, count);
    // the all-reduce inside the GEMM's run, then the GEMM inside the all-reduce's
    CHECK_RC(nested(s_gemm, streams[0], ev, [&] { return ov_gemm_run(&x, outer * products, err, errlen); },
                    [&] { return reduce(reduces); }, &outer_ms, &inner_ms, "the all-reduce beside the GEMM", err,
                    errlen));
    out->moved_beside_GBps = bytes * busbw_factor / (inner_ms * 1e-3 / reduces) / 1e9;
    // the GEMM alone again, just before it runs beside the all-reduce
    CHECK_RC(gemm_alone(&x, s_gemm, ev, window_s, &products, &out->gemm_us, err, errlen));
    CHECK_RC(nested(streams[0], s_gemm, ev, [&] { return reduce(outer * reduces); },
                    [&] { return ov_gemm_run(&x, products, err, errlen); }, &outer_ms, &inner_ms,
                    "the GEMM beside the all-reduce", err, errlen));
    out->gemm_beside_us = inner_ms * 1e3 / products;
    for (int r = 0; r < ranks; r++) {
      CUDA_OK(cudaSetDevice(r));
      CUDA_OK(cudaStreamSynchronize(streams[r]));
    }
  }
done:
  cudaSetDevice(0);
  ov_gemm_close(&x);
  cudaFree(d_bad);
  for (int i = 0; i < 4; i++)
    if (ev[i])
      cudaEventDestroy(ev[i]);
  if (s_gemm)
    cudaStreamDestroy(s_gemm);
  for (int r = 0; r < ranks && r < OV_MAX_RANKS; r++) {
    cudaSetDevice(r);
    if (comms[r])
      ncclCommDestroy(comms[r]);
    cudaFree(send[r]);
    cudaFree(recv[r]);
    if (streams[r])
      cudaStreamDestroy(streams[r]);
  }
  cudaSetDevice(0);
  return rc;
}
