// ptdsim-calibrate — what every GPU room of the harness shares (gpu.cu,
// gpu_gemmlt.cu, gpu_attention.cu, gpu_membound.cu, gpu_layer.cu): the
// checked-call macros that record a one-line error and jump to the function's
// cleanup, pseudo-random data that host and device generate identically, and
// the CUDA-event timing loops with the GPU spin before each repetition.
// CUDA C++ only; included by .cu files.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>

#include "gpu.h"

static int fail(char *err, size_t n, const char *file, int line, const char *call, const char *why) {
  snprintf(err, n, "%s:%d: %s failed: %s", file, line, call, why);
  return 1;
}

static int failf(char *err, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
  return 1;
}

// Each macro records the failure and jumps to the function's cleanup.
#define CUDA_OK(call)                                                                                                \
  do {                                                                                                               \
    cudaError_t e_ = (call);                                                                                         \
    if (e_ != cudaSuccess) {                                                                                         \
      rc = fail(err, errlen, __FILE__, __LINE__, #call, cudaGetErrorString(e_));                                     \
      goto done;                                                                                                     \
    }                                                                                                                \
  } while (0)
#define CUBLAS_OK(call)                                                                                              \
  do {                                                                                                               \
    cublasStatus_t s_ = (call);                                                                                      \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                               \
      rc = fail(err, errlen, __FILE__, __LINE__, #call, cublasGetStatusString(s_));                                  \
      goto done;                                                                                                     \
    }                                                                                                                \
  } while (0)

// An NCCL call (in files that include nccl.h).
#define NCCL_OK(call)                                                                                                \
  do {                                                                                                               \
    ncclResult_t r_ = (call);                                                                                        \
    if (r_ != ncclSuccess) {                                                                                         \
      rc = fail(err, errlen, __FILE__, __LINE__, #call, ncclGetErrorString(r_));                                     \
      goto done;                                                                                                     \
    }                                                                                                                \
  } while (0)
#define CHECK_RC(expr)                                                                                               \
  do {                                                                                                               \
    if ((rc = (expr)) != 0)                                                                                          \
      goto done;                                                                                                     \
  } while (0)

// --- pseudo-random data, identical on host and device ---

__host__ __device__ static inline uint32_t mix(uint64_t x) {
  // splitmix64 finaliser (Steele, Lea and Flood, OOPSLA 2014)
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return (uint32_t)((x ^ (x >> 31)) >> 32);
}

// Uniform in [-1, 1).
__host__ __device__ static inline float urand(uint64_t seed, uint64_t i) {
  return (float)mix(seed * 0x100000001b3ull + i) * (2.0f / 4294967296.0f) - 1.0f;
}

template <class T> __host__ __device__ static inline T from_f(float v);
template <> __host__ __device__ inline __half from_f<__half>(float v) { return __float2half(v); }
template <> __host__ __device__ inline __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
__host__ __device__ static inline float to_f(__half v) { return __half2float(v); }
__host__ __device__ static inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T> __global__ void fill_kernel(T *p, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = from_f<T>(scale * urand(seed, i));
}

template <class T> static T host_value(uint64_t seed, size_t i, float scale) {
  return from_f<T>(scale * urand(seed, i));
}

static unsigned grid_for(size_t n) {
  size_t b = (n + 255) / 256;
  return (unsigned)std::min<size_t>(std::max<size_t>(b, 1), 65535u * 8);
}

// --- timing ---

// Keeps the GPU busy for `ns` nanoseconds (the global timer, independent of
// the SM clock).  Enqueued before the start event of every repetition, it
// lets the host enqueue the start event, the work and the stop event while
// the GPU is still spinning, so the interval is the GPU's time for the work
// alone, without the host's launch latency (a cuBLAS call costs several
// microseconds on the host, comparable to a small GEMM).  In training the
// host runs ahead of the GPU in the same way.
static __global__ void k_spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
#define SPIN_NS 500000ull        // before one GEMM, kernel, copy or collective
#define SPIN_LAYER_NS 4000000ull // before a layer pass (dozens of launches)

// Runs op() warmup times untimed, then reps times between CUDA events.
template <class F>
static int time_op(cudaStream_t s, CalibGpuTiming *t, F op, char *err, size_t errlen,
                   unsigned long long spin_ns = SPIN_NS) {
  int rc = 0;
  cudaEvent_t a = nullptr, b = nullptr;
  CUDA_OK(cudaEventCreate(&a));
  CUDA_OK(cudaEventCreate(&b));
  for (unsigned i = 0; i < t->warmup; i++)
    CHECK_RC(op());
  CUDA_OK(cudaStreamSynchronize(s));
  for (unsigned i = 0; i < t->reps; i++) {
    float ms = 0;
    k_spin<<<1, 1, 0, s>>>(spin_ns);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaEventRecord(a, s));
    CHECK_RC(op());
    CUDA_OK(cudaEventRecord(b, s));
    CUDA_OK(cudaEventSynchronize(b));
    CUDA_OK(cudaEventElapsedTime(&ms, a, b));
    t->samples_us[i] = ms * 1e3;
  }
done:
  if (a)
    cudaEventDestroy(a);
  if (b)
    cudaEventDestroy(b);
  return rc;
}

// Runs first() then second() warmup times untimed, then reps times with an
// event before, between and after: the recomputation forward of a layer
// followed by its backward, as Megatron runs them under full activation
// recomputation (Narayanan et al. SC21 section 3.5; Chen et al. 2016).
template <class F, class G>
static int time_pair(cudaStream_t s, CalibGpuTiming *t1, CalibGpuTiming *t2, F first, G second, char *err,
                     size_t errlen) {
  int rc = 0;
  cudaEvent_t a = nullptr, b = nullptr, c = nullptr;
  unsigned reps = std::min(t1->reps, t2->reps);
  CUDA_OK(cudaEventCreate(&a));
  CUDA_OK(cudaEventCreate(&b));
  CUDA_OK(cudaEventCreate(&c));
  for (unsigned i = 0; i < t1->warmup; i++) {
    CHECK_RC(first());
    CHECK_RC(second());
  }
  CUDA_OK(cudaStreamSynchronize(s));
  for (unsigned i = 0; i < reps; i++) {
    float ms1 = 0, ms2 = 0;
    k_spin<<<1, 1, 0, s>>>(2 * SPIN_LAYER_NS);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaEventRecord(a, s));
    CHECK_RC(first());
    CUDA_OK(cudaEventRecord(b, s));
    CHECK_RC(second());
    CUDA_OK(cudaEventRecord(c, s));
    CUDA_OK(cudaEventSynchronize(c));
    CUDA_OK(cudaEventElapsedTime(&ms1, a, b));
    CUDA_OK(cudaEventElapsedTime(&ms2, b, c));
    t1->samples_us[i] = ms1 * 1e3;
    t2->samples_us[i] = ms2 * 1e3;
  }
done:
  if (a)
    cudaEventDestroy(a);
  if (b)
    cudaEventDestroy(b);
  if (c)
    cudaEventDestroy(c);
  return rc;
}

