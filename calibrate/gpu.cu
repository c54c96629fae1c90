// ptdsim-calibrate — GPU side: cuBLAS GEMMs, Megatron's fused and unfused
// kernels written here in CUDA C, a whole layer, copies, and NCCL
// collectives (interface and conventions in gpu.h).
//
// Kernel formulas follow Megatron-LM (Shoeybi et al. 2019; the fused kernels
// of megatron/fused_kernels): GeLU in its tanh form, dropout with a kept
// fraction 1 - p scaled by 1/(1 - p), causal softmax masking the upper
// triangle, layernorm with eps 1e-5.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <nccl.h>
#ifndef PTDSIM_NO_CUDNN
#include <cudnn.h>
#endif
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "gemm_index.h"
#include "gpu.h"
#include "gpu_common.cuh"

// --- device information ---

extern "C" int calib_gpu_info(int device, CalibGpuInfo *info, char *err, size_t errlen) {
  int rc = 0, v = 0;
  cudaDeviceProp prop;
  memset(info, 0, sizeof *info);
  CUDA_OK(cudaGetDeviceCount(&info->gpus));
  if (device < 0 || device >= info->gpus)
    return failf(err, errlen, "--device %d does not exist (%d GPUs visible)", device, info->gpus);
  CUDA_OK(cudaSetDevice(device));
  CUDA_OK(cudaGetDeviceProperties(&prop, device));
  snprintf(info->name, sizeof info->name, "%s", prop.name);
  snprintf(info->compute_capability, sizeof info->compute_capability, "%d.%d", prop.major, prop.minor);
  info->sms = prop.multiProcessorCount;
  info->memory_GiB = (double)prop.totalGlobalMem / 1073741824.0;
  CUDA_OK(cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, device));
  info->sm_clock_MHz = v / 1e3;
  CUDA_OK(cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, device));
  info->memory_clock_MHz = v / 1e3;
  CUDA_OK(cudaDeviceGetAttribute(&v, cudaDevAttrGlobalMemoryBusWidth, device));
  info->memory_bus_bits = v;
  CUDA_OK(cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, device));
  info->l2_bytes = v;
#ifndef PTDSIM_NO_CUDNN
  info->cudnn = (int)cudnnGetVersion(); /* cuDNN 9: major * 10000 + minor * 100 + patch */
#endif
  CUDA_OK(cudaDriverGetVersion(&info->driver));
  CUDA_OK(cudaRuntimeGetVersion(&info->runtime));
  info->cublaslt = (int)cublasLtGetVersion();
  {
    cublasHandle_t h = nullptr;
    CUBLAS_OK(cublasCreate(&h));
    cublasStatus_t s = cublasGetVersion(h, &info->cublas);
    cublasDestroy(h);
    CUBLAS_OK(s);
  }
  NCCL_OK(ncclGetVersion(&info->nccl));
done:
  return rc;
}

// --- GEMM ---

template <class T>
static int gemm_run(int device, cudaDataType_t type, int transa, int transb, unsigned long long batch,
                    unsigned long long m, unsigned long long n, unsigned long long k, CalibGpuTiming *t, char *err,
                    size_t errlen) {
  int rc = 0;
  T *A = nullptr, *B = nullptr, *C = nullptr;
  cublasHandle_t h = nullptr;
  cudaStream_t s = nullptr;
  size_t na = batch * m * k, nb = batch * k * n, nc = batch * m * n;
  const float alpha = 1.0f, beta = 0.0f;
  const double eps_out = type == CUDA_R_16F ? 1.0 / 2048 : 1.0 / 256;
  auto run = [&]() -> int {
    cublasStatus_t st = cublasGemmStridedBatchedEx(
        h, transa ? CUBLAS_OP_T : CUBLAS_OP_N, transb ? CUBLAS_OP_T : CUBLAS_OP_N, (int)m, (int)n, (int)k, &alpha, A,
        type, (int)calib_gemm_lda(transa, m, k), (long long)(m * k), B, type, (int)calib_gemm_ldb(transb, k, n),
        (long long)(k * n), &beta, C, type, (int)m, (long long)(m * n), (int)batch, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT);
    return st == CUBLAS_STATUS_SUCCESS ? 0
                                       : fail(err, errlen, __FILE__, __LINE__, "cublasGemmStridedBatchedEx",
                                              cublasGetStatusString(st));
  };
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || batch > INT32_MAX)
    return failf(err, errlen, "GEMM %llux%llux%llux%llu is too large for cuBLAS's int sizes", batch, m, n, k);
  CUDA_OK(cudaSetDevice(device));
  CUDA_OK(cudaStreamCreate(&s));
  CUBLAS_OK(cublasCreate(&h));
  CUBLAS_OK(cublasSetStream(h, s));
  CUDA_OK(cudaMalloc(&A, na * sizeof(T)));
  CUDA_OK(cudaMalloc(&B, nb * sizeof(T)));
  CUDA_OK(cudaMalloc(&C, nc * sizeof(T)));
  fill_kernel<T><<<grid_for(na), 256, 0, s>>>(A, na, 11, 1.0f);
  CUDA_OK(cudaGetLastError());
  fill_kernel<T><<<grid_for(nb), 256, 0, s>>>(B, nb, 12, 1.0f);
  CUDA_OK(cudaGetLastError());
  CHECK_RC(run());
  CUDA_OK(cudaStreamSynchronize(s));
  // Check 48 output entries against a double-precision CPU dot product of
  // the same (rounded) inputs.
  for (unsigned probe = 0; probe < 48; probe++) {
    uint64_t r = mix(1000 + probe);
    size_t bi = r % batch, i = mix(2000 + probe) % m, j = mix(3000 + probe) % n;
    double ref = 0, mag = 0;
    for (size_t kk = 0; kk < k; kk++) {
      double a = to_f(host_value<T>(11, bi * m * k + calib_gemm_a_index(transa, m, k, i, kk), 1.0f));
      double b = to_f(host_value<T>(12, bi * k * n + calib_gemm_b_index(transb, k, n, kk, j), 1.0f));
      ref += a * b;
      mag += fabs(a * b);
    }
    T got;
    CUDA_OK(cudaMemcpy(&got, C + bi * m * n + i + j * m, sizeof(T), cudaMemcpyDeviceToHost));
    double g = to_f(got), tol = 2 * eps_out * fabs(ref) + 1e-5 * mag + 1e-3;
    if (!(fabs(g - ref) <= tol)) {
      rc = failf(err, errlen,
                 "GEMM %llux%llux%llux%llu %c%c (%s) disagrees with the CPU reference at [%zu,%zu,%zu]: %g vs %g",
                 batch, m, n, k, transa ? 'T' : 'N', transb ? 'T' : 'N', type == CUDA_R_16F ? "fp16" : "bf16", bi, i, j,
                 g, ref);
      goto done;
    }
  }
  CHECK_RC(time_op(s, t, run, err, errlen));
done:
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  if (h)
    cublasDestroy(h);
  if (s)
    cudaStreamDestroy(s);
  return rc;
}

extern "C" int calib_gpu_gemm(int device, int bf16, int transa, int transb, unsigned long long batch,
                              unsigned long long m, unsigned long long n, unsigned long long k, CalibGpuTiming *t,
                              char *err, size_t errlen) {
  return bf16 ? gemm_run<__nv_bfloat16>(device, CUDA_R_16BF, transa, transb, batch, m, n, k, t, err, errlen)
              : gemm_run<__half>(device, CUDA_R_16F, transa, transb, batch, m, n, k, t, err, errlen);
}

// --- copies ---

extern "C" int calib_gpu_copy(int device, double bytes, CalibGpuTiming *t, char *err, size_t errlen) {
  int rc = 0;
  size_t n = (size_t)bytes;
  unsigned char *a = nullptr, *b = nullptr;
  cudaStream_t s = nullptr;
  auto run = [&]() -> int {
    cudaError_t e = cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s);
    return e == cudaSuccess ? 0 : fail(err, errlen, __FILE__, __LINE__, "cudaMemcpyAsync", cudaGetErrorString(e));
  };
  CUDA_OK(cudaSetDevice(device));
  CUDA_OK(cudaStreamCreate(&s));
  CUDA_OK(cudaMalloc(&a, n));
  CUDA_OK(cudaMalloc(&b, n));
  fill_kernel<__half><<<grid_for(n / 2), 256, 0, s>>>((__half *)a, n / 2, 21, 1.0f);
  CUDA_OK(cudaGetLastError());
  CHECK_RC(run());
  CUDA_OK(cudaStreamSynchronize(s));
  for (unsigned probe = 0; probe < 16 && n >= 2; probe++) {
    size_t i = mix(probe) % (n / 2);
    __half got;
    CUDA_OK(cudaMemcpy(&got, (__half *)b + i, sizeof got, cudaMemcpyDeviceToHost));
    if (to_f(got) != to_f(host_value<__half>(21, i, 1.0f))) {
      rc = failf(err, errlen, "device-to-device copy of %zu bytes: element %zu differs from its source", n, i);
      goto done;
    }
  }
  CHECK_RC(time_op(s, t, run, err, errlen));
done:
  cudaFree(a);
  cudaFree(b);
  if (s)
    cudaStreamDestroy(s);
  return rc;
}

// --- Megatron's element-wise kernels, fused and unfused ---

#define DROPOUT_P 0.1f
#define LN_EPS 1e-5f

__host__ __device__ static inline float gelu(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456f * x * (1.0f + 0.044715f * x * x)));
}
__host__ __device__ static inline bool keep(uint64_t seed, size_t i) {
  return (mix(seed * 31 + i) >> 8) * (1.0f / 16777216.0f) >= DROPOUT_P;
}

__global__ void k_bias_gelu(const __half *x, const __half *bias, __half *y, size_t n, size_t cols) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = __float2half(gelu(__half2float(x[i]) + __half2float(bias[i % cols])));
}
__global__ void k_bias_add(const __half *x, const __half *bias, __half *y, size_t n, size_t cols) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = __float2half(__half2float(x[i]) + __half2float(bias[i % cols]));
}
__global__ void k_gelu(const __half *x, __half *y, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = __float2half(gelu(__half2float(x[i])));
}
__global__ void k_gelu_bwd(const __half *dy, const __half *x, __half *dx, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float v = __half2float(x[i]), t = tanhf(0.79788456f * v * (1.0f + 0.044715f * v * v));
    float d = 0.5f * (1 + t) + 0.5f * v * (1 - t * t) * 0.79788456f * (1 + 3 * 0.044715f * v * v);
    dx[i] = __float2half(d * __half2float(dy[i]));
  }
}
__global__ void k_bias_dropout_add(const __half *x, const __half *bias, const __half *res, __half *y, uint8_t *mask,
                                   size_t n, size_t cols, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    bool k = keep(seed, i);
    mask[i] = k;
    float v = (__half2float(x[i]) + __half2float(bias[i % cols])) * (k ? 1.0f / (1.0f - DROPOUT_P) : 0.0f);
    y[i] = __float2half(__half2float(res[i]) + v);
  }
}
__global__ void k_dropout(const __half *x, __half *y, uint8_t *mask, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    bool k = keep(seed, i);
    mask[i] = k;
    y[i] = __float2half(__half2float(x[i]) * (k ? 1.0f / (1.0f - DROPOUT_P) : 0.0f));
  }
}
__global__ void k_add(const __half *a, const __half *b, __half *y, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = __float2half(__half2float(a[i]) + __half2float(b[i]));
}
__global__ void k_scale(const __half *x, __half *y, size_t n, float s) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = __float2half(__half2float(x[i]) * s);
}
// Megatron's unfused path masks with a large negative value.
__global__ void k_causal_mask(const __half *x, __half *y, size_t n, size_t cols, size_t seq) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    size_t row = i / cols, c = i % cols;
    y[i] = c > row % seq ? __float2half(-10000.0f) : x[i];
  }
}

// Block-wide reduction of one float (blockDim.x == 256).
__device__ static float block_reduce(float v, bool is_max, float *shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      shared[threadIdx.x] = is_max ? fmaxf(shared[threadIdx.x], shared[threadIdx.x + s])
                                   : shared[threadIdx.x] + shared[threadIdx.x + s];
    __syncthreads();
  }
  float r = shared[0];
  __syncthreads();
  return r;
}

// One block per row.  causal: scale, mask columns after the row's query
// position (row % seq), softmax; otherwise a plain row softmax.
__global__ void k_softmax(const __half *x, __half *y, size_t cols, size_t seq, float scale, int causal) {
  __shared__ float sh[256];
  size_t row = blockIdx.x;
  const __half *xr = x + row * cols;
  __half *yr = y + row * cols;
  size_t last = causal ? row % seq : cols - 1;
  float mx = -INFINITY;
  for (size_t c = threadIdx.x; c <= last; c += blockDim.x)
    mx = fmaxf(mx, __half2float(xr[c]) * scale);
  mx = block_reduce(mx, true, sh);
  float sum = 0;
  for (size_t c = threadIdx.x; c <= last; c += blockDim.x)
    sum += __expf(__half2float(xr[c]) * scale - mx);
  sum = block_reduce(sum, false, sh);
  for (size_t c = threadIdx.x; c < cols; c += blockDim.x)
    yr[c] = __float2half(c <= last ? __expf(__half2float(xr[c]) * scale - mx) / sum : 0.0f);
}
// dx = y * (dy - sum(dy * y)) per row.
__global__ void k_softmax_bwd(const __half *y, const __half *dy, __half *dx, size_t cols) {
  __shared__ float sh[256];
  size_t row = blockIdx.x;
  float dot = 0;
  for (size_t c = threadIdx.x; c < cols; c += blockDim.x)
    dot += __half2float(y[row * cols + c]) * __half2float(dy[row * cols + c]);
  dot = block_reduce(dot, false, sh);
  for (size_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float yy = __half2float(y[row * cols + c]);
    dx[row * cols + c] = __float2half(yy * (__half2float(dy[row * cols + c]) - dot));
  }
}
__global__ void k_layernorm(const __half *x, const __half *gamma, const __half *beta, __half *y, size_t cols) {
  __shared__ float sh[256];
  size_t row = blockIdx.x;
  float s = 0;
  for (size_t c = threadIdx.x; c < cols; c += blockDim.x)
    s += __half2float(x[row * cols + c]);
  float mean = block_reduce(s, false, sh) / cols;
  float v = 0;
  for (size_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float d = __half2float(x[row * cols + c]) - mean;
    v += d * d;
  }
  float rstd = rsqrtf(block_reduce(v, false, sh) / cols + LN_EPS);
  for (size_t c = threadIdx.x; c < cols; c += blockDim.x)
    y[row * cols + c] = __float2half((__half2float(x[row * cols + c]) - mean) * rstd * __half2float(gamma[c]) +
                                     __half2float(beta[c]));
}

// Buffers for one element-wise kernel family.
typedef struct {
  __half *x, *bias, *res, *tmp, *tmp2, *y, *gamma, *beta;
  uint8_t *mask;
} EwBuf;

static void ew_free(EwBuf *b) {
  cudaFree(b->x);
  cudaFree(b->bias);
  cudaFree(b->res);
  cudaFree(b->tmp);
  cudaFree(b->tmp2);
  cudaFree(b->y);
  cudaFree(b->gamma);
  cudaFree(b->beta);
  cudaFree(b->mask);
  memset(b, 0, sizeof *b);
}

static int ew_alloc(EwBuf *b, size_t rows, size_t cols, cudaStream_t s, char *err, size_t errlen) {
  int rc = 0;
  size_t n = rows * cols;
  memset(b, 0, sizeof *b);
  CUDA_OK(cudaMalloc(&b->x, n * 2));
  CUDA_OK(cudaMalloc(&b->res, n * 2));
  CUDA_OK(cudaMalloc(&b->tmp, n * 2));
  CUDA_OK(cudaMalloc(&b->tmp2, n * 2));
  CUDA_OK(cudaMalloc(&b->y, n * 2));
  CUDA_OK(cudaMalloc(&b->mask, n));
  CUDA_OK(cudaMalloc(&b->bias, cols * 2));
  CUDA_OK(cudaMalloc(&b->gamma, cols * 2));
  CUDA_OK(cudaMalloc(&b->beta, cols * 2));
  fill_kernel<__half><<<grid_for(n), 256, 0, s>>>(b->x, n, 31, 2.0f);
  fill_kernel<__half><<<grid_for(n), 256, 0, s>>>(b->res, n, 32, 1.0f);
  fill_kernel<__half><<<grid_for(cols), 256, 0, s>>>(b->bias, cols, 33, 0.5f);
  fill_kernel<__half><<<grid_for(cols), 256, 0, s>>>(b->gamma, cols, 34, 1.0f);
  fill_kernel<__half><<<grid_for(cols), 256, 0, s>>>(b->beta, cols, 35, 0.1f);
  CUDA_OK(cudaGetLastError());
done:
  if (rc)
    ew_free(b);
  return rc;
}

// Launches one kernel family over rows x cols (seq: causal period).
static int ew_launch(const char *name, int fused, EwBuf *b, size_t rows, size_t cols, size_t seq, cudaStream_t s,
                     char *err, size_t errlen) {
  int rc = 0;
  size_t n = rows * cols;
  unsigned g = grid_for(n);
  float scale = 1.0f / sqrtf(128.0f);
  if (!strcmp(name, "bias_gelu")) {
    if (fused)
      k_bias_gelu<<<g, 256, 0, s>>>(b->x, b->bias, b->y, n, cols);
    else {
      k_bias_add<<<g, 256, 0, s>>>(b->x, b->bias, b->tmp, n, cols);
      k_gelu<<<g, 256, 0, s>>>(b->tmp, b->y, n);
    }
  } else if (!strcmp(name, "bias_dropout_add")) {
    if (fused)
      k_bias_dropout_add<<<g, 256, 0, s>>>(b->x, b->bias, b->res, b->y, b->mask, n, cols, 7);
    else {
      k_bias_add<<<g, 256, 0, s>>>(b->x, b->bias, b->tmp, n, cols);
      k_dropout<<<g, 256, 0, s>>>(b->tmp, b->tmp2, b->mask, n, 7);
      k_add<<<g, 256, 0, s>>>(b->res, b->tmp2, b->y, n);
    }
  } else if (!strcmp(name, "scale_mask_softmax")) {
    if (fused)
      k_softmax<<<(unsigned)rows, 256, 0, s>>>(b->x, b->y, cols, seq, scale, 1);
    else {
      k_scale<<<g, 256, 0, s>>>(b->x, b->tmp, n, scale);
      k_causal_mask<<<g, 256, 0, s>>>(b->tmp, b->tmp2, n, cols, seq);
      k_softmax<<<(unsigned)rows, 256, 0, s>>>(b->tmp2, b->y, cols, seq, 1.0f, 0);
    }
  } else if (!strcmp(name, "layernorm")) {
    k_layernorm<<<(unsigned)rows, 256, 0, s>>>(b->x, b->gamma, b->beta, b->y, cols);
  } else
    return failf(err, errlen, "unknown kernel '%s'", name);
  CUDA_OK(cudaGetLastError());
done:
  return rc;
}

// CPU reference of the same family on the same pseudo-random inputs.
static double ew_reference(const char *name, size_t row, size_t col, size_t cols, size_t seq) {
  size_t i = row * cols + col;
  auto X = [&](size_t j) { return (double)to_f(host_value<__half>(31, j, 2.0f)); };
  double bias = to_f(host_value<__half>(33, col, 0.5f));
  if (!strcmp(name, "bias_gelu"))
    return gelu((float)(X(i) + bias));
  if (!strcmp(name, "bias_dropout_add"))
    return to_f(host_value<__half>(32, i, 1.0f)) + (keep(7, i) ? (X(i) + bias) / (1.0 - DROPOUT_P) : 0.0);
  if (!strcmp(name, "scale_mask_softmax")) {
    double scale = 1.0 / sqrt(128.0), mx = -INFINITY, sum = 0;
    size_t last = row % seq;
    if (col > last)
      return 0;
    for (size_t c = 0; c <= last; c++)
      mx = fmax(mx, X(row * cols + c) * scale);
    for (size_t c = 0; c <= last; c++)
      sum += exp(X(row * cols + c) * scale - mx);
    return exp(X(i) * scale - mx) / sum;
  }
  // layernorm
  double mean = 0, var = 0;
  for (size_t c = 0; c < cols; c++)
    mean += X(row * cols + c);
  mean /= cols;
  for (size_t c = 0; c < cols; c++)
    var += (X(row * cols + c) - mean) * (X(row * cols + c) - mean);
  var /= cols;
  return (X(i) - mean) / sqrt(var + LN_EPS) * to_f(host_value<__half>(34, col, 1.0f)) +
         to_f(host_value<__half>(35, col, 0.1f));
}

// Checks a family, fused or not, on a small instance against the CPU.
static int ew_verify(const char *name, int fused, cudaStream_t s, char *err, size_t errlen) {
  int rc = 0;
  const size_t seq = 96, rows = 2 * seq, cols = 96 * 3; // not powers of two, on purpose
  size_t softmax_cols = !strcmp(name, "scale_mask_softmax") ? seq : cols;
  EwBuf b;
  std::vector<__half> out(rows * softmax_cols);
  CHECK_RC(ew_alloc(&b, rows, softmax_cols, s, err, errlen));
  CHECK_RC(ew_launch(name, fused, &b, rows, softmax_cols, seq, s, err, errlen));
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemcpy(out.data(), b.y, out.size() * 2, cudaMemcpyDeviceToHost));
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < softmax_cols; c += (r % 7) + 1) {
      double ref = ew_reference(name, r, c, softmax_cols, seq), got = to_f(out[r * softmax_cols + c]);
      if (!(fabs(got - ref) <= 4e-3 * fabs(ref) + 4e-3)) {
        rc = failf(err, errlen, "kernel %s (%s) disagrees with the CPU reference at [%zu,%zu]: %g vs %g", name,
                   fused ? "fused" : "unfused", r, c, got, ref);
        goto done;
      }
    }
done:
  ew_free(&b);
  return rc;
}

static int strided_gemm(cublasHandle_t h, const __half *A, const __half *B, __half *C, size_t batch, size_t m, size_t n,
                        size_t k, char *err, size_t errlen) {
  const float alpha = 1.0f, beta = 0.0f;
  cublasStatus_t st = cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)m, (int)n, (int)k, &alpha, A, CUDA_R_16F,
                                                 (int)m, (long long)(m * k), B, CUDA_R_16F, (int)k, (long long)(k * n),
                                                 &beta, C, CUDA_R_16F, (int)m, (long long)(m * n), (int)batch,
                                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return st == CUBLAS_STATUS_SUCCESS
             ? 0
             : fail(err, errlen, __FILE__, __LINE__, "cublasGemmStridedBatchedEx", cublasGetStatusString(st));
}

extern "C" int calib_gpu_kernel(int device, const char *name, int fused, unsigned long long rows,
                                unsigned long long cols, unsigned long long seq, unsigned long long head_dim,
                                CalibGpuTiming *t, char *err, size_t errlen) {
  int rc = 0;
  cudaStream_t s = nullptr;
  cublasHandle_t h = nullptr;
  __half *q = nullptr, *kv = nullptr, *ctx = nullptr;
  EwBuf b;
  memset(&b, 0, sizeof b);
  int attention = !strcmp(name, "attention");
  size_t batch = seq ? rows / seq : 0;
  CUDA_OK(cudaSetDevice(device));
  CUDA_OK(cudaStreamCreate(&s));
  if (!attention) {
    CHECK_RC(ew_verify(name, fused, s, err, errlen));
    CHECK_RC(ew_alloc(&b, rows, cols, s, err, errlen));
    auto run = [&]() { return ew_launch(name, fused, &b, rows, cols, seq, s, err, errlen); };
    CHECK_RC(time_op(s, t, run, err, errlen));
  } else {
    // Scores (batch x seq x seq from seq x d and d x seq), fused causal
    // softmax, then the context (seq x d); the parts are checked in the gemm
    // and kernels modes.
    if (!seq || !head_dim || rows % seq || cols != seq) {
      rc = failf(err, errlen, "attention needs rows to be a multiple of seq and cols equal to seq");
      goto done;
    }
    CHECK_RC(ew_verify("scale_mask_softmax", 1, s, err, errlen));
    CUBLAS_OK(cublasCreate(&h));
    CUBLAS_OK(cublasSetStream(h, s));
    CHECK_RC(ew_alloc(&b, rows, cols, s, err, errlen));
    CUDA_OK(cudaMalloc(&q, batch * seq * head_dim * 2));
    CUDA_OK(cudaMalloc(&kv, batch * seq * head_dim * 2));
    CUDA_OK(cudaMalloc(&ctx, batch * seq * head_dim * 2));
    fill_kernel<__half><<<grid_for(batch * seq * head_dim), 256, 0, s>>>(q, batch * seq * head_dim, 41, 1.0f);
    fill_kernel<__half><<<grid_for(batch * seq * head_dim), 256, 0, s>>>(kv, batch * seq * head_dim, 42, 1.0f);
    CUDA_OK(cudaGetLastError());
    auto run = [&]() -> int {
      int r = strided_gemm(h, q, kv, b.x, batch, seq, seq, head_dim, err, errlen);
      if (!r)
        r = ew_launch("scale_mask_softmax", 1, &b, rows, cols, seq, s, err, errlen);
      if (!r)
        r = strided_gemm(h, b.y, kv, ctx, batch, seq, head_dim, seq, err, errlen);
      return r;
    };
    CHECK_RC(time_op(s, t, run, err, errlen));
  }
done:
  ew_free(&b);
  cudaFree(q);
  cudaFree(kv);
  cudaFree(ctx);
  if (h)
    cublasDestroy(h);
  if (s)
    cudaStreamDestroy(s);
  return rc;
}

// --- one layer ---

extern "C" int calib_gpu_layer(int device, unsigned hidden, unsigned heads, unsigned seq, unsigned micro_batch,
                               unsigned tp, CalibGpuTiming *fwd, CalibGpuTiming *rec, CalibGpuTiming *bwd, char *err,
                               size_t errlen) {
  int rc = 0;
  cudaStream_t s = nullptr;
  cublasHandle_t h = nullptr;
  size_t hs = hidden, T = (size_t)micro_batch * seq, a = heads / tp, d = hidden / heads, ffn = 4 * hs / tp;
  size_t B = (size_t)micro_batch * a, S = seq;
  // Activations and weights, sized for the largest use of each.
  // w holds every weight (read), dw every weight gradient (written): the
  // gradients must not feed back into the weights, or repeated runs would
  // grow the values without bound.
  __half *x = nullptr, *w = nullptr, *dw = nullptr, *big = nullptr, *big2 = nullptr, *qkv = nullptr, *ctx = nullptr, *out = nullptr;
  EwBuf eh, ef, es; // element-wise buffers: T x h, T x ffn, scores
  memset(&eh, 0, sizeof eh);
  memset(&ef, 0, sizeof ef);
  memset(&es, 0, sizeof es);
  size_t wmax = std::max(3 * hs / tp * hs, ffn * hs);
  size_t actmax = std::max({T * ffn, T * 3 * hs / tp, B * S * S, T * hs});
  if (heads % tp || hidden % heads)
    return failf(err, errlen, "layer: heads must divide by tp and hidden by heads");
  CUDA_OK(cudaSetDevice(device));
  CUDA_OK(cudaStreamCreate(&s));
  CUBLAS_OK(cublasCreate(&h));
  CUBLAS_OK(cublasSetStream(h, s));
  CUDA_OK(cudaMalloc(&x, T * hs * 2));
  CUDA_OK(cudaMalloc(&w, wmax * 2));
  CUDA_OK(cudaMalloc(&dw, wmax * 2));
  CUDA_OK(cudaMalloc(&big, actmax * 2));
  CUDA_OK(cudaMalloc(&big2, actmax * 2));
  CUDA_OK(cudaMalloc(&qkv, T * 3 * hs / tp * 2));
  CUDA_OK(cudaMalloc(&ctx, T * hs / tp * 2));
  CUDA_OK(cudaMalloc(&out, T * hs * 2));
  fill_kernel<__half><<<grid_for(T * hs), 256, 0, s>>>(x, T * hs, 51, 1.0f);
  fill_kernel<__half><<<grid_for(wmax), 256, 0, s>>>(w, wmax, 52, 0.02f);
  CUDA_OK(cudaGetLastError());
  CHECK_RC(ew_alloc(&eh, T, hs, s, err, errlen));
  CHECK_RC(ew_alloc(&ef, T, ffn, s, err, errlen));
  CHECK_RC(ew_alloc(&es, B * S, S, s, err, errlen));
  {
    const char *fams[] = {"bias_gelu", "bias_dropout_add", "scale_mask_softmax", "layernorm"};
    for (const char *f : fams)
      CHECK_RC(ew_verify(f, 1, s, err, errlen));
  }
  {
    // The forward pass in Megatron's order (layer.h): shapes are the
    // tensor-parallel shard; weights are read from one shared buffer.
    auto forward = [&]() -> int {
      int r = 0;
#define STEP(e) \
  if (!r)       \
  r = (e)
      STEP(ew_launch("layernorm", 1, &eh, T, hs, S, s, err, errlen));
      STEP(strided_gemm(h, eh.y, w, qkv, 1, T, 3 * hs / tp, hs, err, errlen));
      STEP(strided_gemm(h, qkv, qkv, es.x, B, S, S, d, err, errlen));
      STEP(ew_launch("scale_mask_softmax", 1, &es, B * S, S, S, s, err, errlen));
      if (!r) {
        k_dropout<<<grid_for(B * S * S), 256, 0, s>>>(es.y, es.tmp, es.mask, B * S * S, 9); // attention dropout
        r = cudaGetLastError() != cudaSuccess ? failf(err, errlen, "attention dropout launch failed") : 0;
      }
      STEP(strided_gemm(h, es.tmp, qkv, ctx, B, S, d, S, err, errlen));
      STEP(strided_gemm(h, ctx, w, eh.x, 1, T, hs, hs / tp, err, errlen));
      STEP(ew_launch("bias_dropout_add", 1, &eh, T, hs, S, s, err, errlen));
      STEP(ew_launch("layernorm", 1, &eh, T, hs, S, s, err, errlen));
      STEP(strided_gemm(h, eh.y, w, ef.x, 1, T, ffn, hs, err, errlen));
      STEP(ew_launch("bias_gelu", 1, &ef, T, ffn, S, s, err, errlen));
      STEP(strided_gemm(h, ef.y, w, eh.x, 1, T, hs, ffn, err, errlen));
      STEP(ew_launch("bias_dropout_add", 1, &eh, T, hs, S, s, err, errlen));
      return r;
    };
    // The backward pass: two GEMMs per forward GEMM (input and weight
    // gradients, the shapes of plan.c), GeLU, dropout and softmax backward
    // kernels; layernorm backward is approximated by two layernorm-sized
    // passes (it reads x, dy and writes dx, plus a reduction for gamma/beta).
    auto backward = [&]() -> int {
      int r = 0;
      STEP(ew_launch("layernorm", 1, &eh, T, hs, S, s, err, errlen)); // dropout-add backward is a mask multiply
      STEP(strided_gemm(h, eh.y, w, ef.tmp, 1, T, ffn, hs, err, errlen)); // fc2 dgrad
      STEP(strided_gemm(h, ef.y, eh.y, dw, 1, ffn, hs, T, err, errlen));    // fc2 wgrad
      if (!r) {
        k_gelu_bwd<<<grid_for(T * ffn), 256, 0, s>>>(ef.tmp, ef.x, ef.tmp2, T * ffn);
        r = cudaGetLastError() != cudaSuccess ? failf(err, errlen, "gelu backward launch failed") : 0;
      }
      STEP(strided_gemm(h, ef.tmp2, w, eh.tmp, 1, T, hs, ffn, err, errlen)); // fc1 dgrad
      STEP(strided_gemm(h, eh.y, ef.tmp2, dw, 1, hs, ffn, T, err, errlen));   // fc1 wgrad
      STEP(ew_launch("layernorm", 1, &eh, T, hs, S, s, err, errlen));
      STEP(ew_launch("layernorm", 1, &eh, T, hs, S, s, err, errlen));
      STEP(strided_gemm(h, eh.y, w, ctx, 1, T, hs / tp, hs, err, errlen)); // proj dgrad
      STEP(strided_gemm(h, ctx, eh.y, dw, 1, hs / tp, hs, T, err, errlen)); // proj wgrad
      STEP(strided_gemm(h, ctx, qkv, es.tmp2, B, S, S, d, err, errlen));   // attn_v dgrad (scores grad)
      STEP(strided_gemm(h, es.tmp, ctx, big, B, S, d, S, err, errlen));    // attn_v wgrad (values grad)
      if (!r) {
        k_dropout<<<grid_for(B * S * S), 256, 0, s>>>(es.tmp2, es.tmp2, es.mask, B * S * S, 9);
        k_softmax_bwd<<<(unsigned)(B * S), 256, 0, s>>>(es.y, es.tmp2, es.x, S);
        r = cudaGetLastError() != cudaSuccess ? failf(err, errlen, "softmax backward launch failed") : 0;
      }
      STEP(strided_gemm(h, es.x, qkv, big2, B, S, d, S, err, errlen)); // scores dgrad (queries)
      STEP(strided_gemm(h, qkv, es.x, big, B, d, S, S, err, errlen));  // scores wgrad (keys)
      STEP(strided_gemm(h, qkv, w, eh.tmp2, 1, T, hs, 3 * hs / tp, err, errlen)); // qkv dgrad
      STEP(strided_gemm(h, eh.y, qkv, dw, 1, hs, 3 * hs / tp, T, err, errlen));    // qkv wgrad
      STEP(ew_launch("layernorm", 1, &eh, T, hs, S, s, err, errlen));
      STEP(ew_launch("layernorm", 1, &eh, T, hs, S, s, err, errlen));
#undef STEP
      return r;
    };
    CHECK_RC(time_op(s, fwd, forward, err, errlen, SPIN_LAYER_NS));
    CHECK_RC(time_pair(s, rec, bwd, forward, backward, err, errlen));
  }
done:
  ew_free(&eh);
  ew_free(&ef);
  ew_free(&es);
  cudaFree(x);
  cudaFree(w);
  cudaFree(dw);
  cudaFree(big);
  cudaFree(big2);
  cudaFree(qkv);
  cudaFree(ctx);
  cudaFree(out);
  if (h)
    cublasDestroy(h);
  if (s)
    cudaStreamDestroy(s);
  return rc;
}

// --- NCCL (one process, one communicator per GPU: ncclCommInitAll) ---

#define MAX_RANKS 64
static struct {
  int ranks;
  size_t max_bytes;
  ncclComm_t comms[MAX_RANKS];
  cudaStream_t streams[MAX_RANKS];
  float *send[MAX_RANKS], *recv[MAX_RANKS];
  cudaEvent_t start[MAX_RANKS], stop[MAX_RANKS];
} nc;

__global__ void fill_float(float *p, size_t n, float v) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = v;
}

extern "C" void calib_gpu_nccl_close(void) {
  for (int r = 0; r < nc.ranks; r++) {
    cudaSetDevice(r);
    if (nc.comms[r])
      ncclCommDestroy(nc.comms[r]);
    cudaFree(nc.send[r]);
    cudaFree(nc.recv[r]);
    if (nc.streams[r])
      cudaStreamDestroy(nc.streams[r]);
    if (nc.start[r])
      cudaEventDestroy(nc.start[r]);
    if (nc.stop[r])
      cudaEventDestroy(nc.stop[r]);
  }
  memset(&nc, 0, sizeof nc);
}

extern "C" int calib_gpu_nccl_open(int ranks, double max_bytes, char *err, size_t errlen) {
  int rc = 0, visible = 0;
  int devs[MAX_RANKS];
  CUDA_OK(cudaGetDeviceCount(&visible));
  if (ranks < 1 || ranks > visible || ranks > MAX_RANKS)
    return failf(err, errlen, "--gpus %d: %d GPUs are visible", ranks, visible);
  memset(&nc, 0, sizeof nc);
  nc.ranks = ranks;
  nc.max_bytes = (size_t)max_bytes;
  for (int r = 0; r < ranks; r++) {
    devs[r] = r;
    CUDA_OK(cudaSetDevice(r));
    CUDA_OK(cudaStreamCreate(&nc.streams[r]));
    CUDA_OK(cudaEventCreate(&nc.start[r]));
    CUDA_OK(cudaEventCreate(&nc.stop[r]));
    CUDA_OK(cudaMalloc(&nc.send[r], nc.max_bytes));
    CUDA_OK(cudaMalloc(&nc.recv[r], nc.max_bytes));
  }
  NCCL_OK(ncclCommInitAll(nc.comms, ranks, devs));
done:
  if (rc)
    calib_gpu_nccl_close();
  return rc;
}

// Ranks taking part in op: all of them, but send/receive is measured
// between GPUs 0 and 1 (the simulator's point-to-point transfer).
static int nccl_participants(int op) {
  return op == 3 ? std::min(nc.ranks, 2) : nc.ranks;
}

// Enqueues op on every participating rank, in one NCCL group.  sendrecv:
// rank r sends to r+1 and receives from r-1 (nccl-tests' sendrecv).
static int nccl_enqueue(int op, size_t count, char *err, size_t errlen) {
  int rc = 0, n = nccl_participants(op);
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < n; r++) {
    switch (op) {
    case 0:
      NCCL_OK(ncclAllReduce(nc.send[r], nc.recv[r], count, ncclFloat, ncclSum, nc.comms[r], nc.streams[r]));
      break;
    case 1:
      NCCL_OK(ncclAllGather(nc.send[r], nc.recv[r], count / n, ncclFloat, nc.comms[r], nc.streams[r]));
      break;
    case 2:
      NCCL_OK(ncclReduceScatter(nc.send[r], nc.recv[r], count / n, ncclFloat, ncclSum, nc.comms[r], nc.streams[r]));
      break;
    default:
      NCCL_OK(ncclSend(nc.send[r], count, ncclFloat, (r + 1) % n, nc.comms[r], nc.streams[r]));
      NCCL_OK(ncclRecv(nc.recv[r], count, ncclFloat, (r + n - 1) % n, nc.comms[r], nc.streams[r]));
    }
  }
  NCCL_OK(ncclGroupEnd());
done:
  if (rc)
    ncclGroupEnd();
  return rc;
}

// Every rank sends r + 1: checks sums, gathered pieces and received values.
static int nccl_verify(int op, size_t count, char *err, size_t errlen) {
  int rc = 0, n = nccl_participants(op);
  for (int r = 0; r < n; r++) {
    CUDA_OK(cudaSetDevice(r));
    fill_float<<<grid_for(count), 256, 0, nc.streams[r]>>>(nc.send[r], count, (float)(r + 1));
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaStreamSynchronize(nc.streams[r]));
  }
  CHECK_RC(nccl_enqueue(op, count, err, errlen));
  for (int r = 0; r < n; r++) {
    CUDA_OK(cudaSetDevice(r));
    CUDA_OK(cudaStreamSynchronize(nc.streams[r]));
    size_t out = op == 2 ? count / n : count;
    for (int probe = 0; probe < 8; probe++) {
      size_t i = mix(probe * 977 + r) % out;
      float got, want;
      CUDA_OK(cudaMemcpy(&got, nc.recv[r] + i, sizeof got, cudaMemcpyDeviceToHost));
      if (op == 0 || op == 2)
        want = n * (n + 1) / 2.0f;
      else if (op == 1)
        want = (float)(i / (count / n) + 1);
      else
        want = (float)((r + n - 1) % n + 1);
      if (got != want) {
        rc = failf(err, errlen, "NCCL op %d on %d ranks, %zu floats: rank %d element %zu is %g, expected %g", op, n, count,
                   r, i, got, want);
        goto done;
      }
    }
  }
done:
  return rc;
}

extern "C" int calib_gpu_nccl(int op, double bytes, CalibGpuTiming *t, char *err, size_t errlen) {
  int rc = 0, n = nccl_participants(op);
  size_t count = (size_t)bytes / sizeof(float);
  if (n < 2 && op == 3)
    return failf(err, errlen, "send/receive needs two GPUs");
  if ((size_t)bytes > nc.max_bytes || count == 0)
    return failf(err, errlen, "NCCL size %.0f B is outside the buffers (%zu B)", bytes, nc.max_bytes);
  CHECK_RC(nccl_verify(op, count, err, errlen));
  for (unsigned i = 0; i < t->warmup; i++)
    CHECK_RC(nccl_enqueue(op, count, err, errlen));
  for (unsigned rep = 0; rep < t->reps; rep++) {
    for (int r = 0; r < n; r++) {
      CUDA_OK(cudaSetDevice(r));
      CUDA_OK(cudaStreamSynchronize(nc.streams[r]));
    }
    // Then, back to back (the ranks' starts differ only by these few host
    // calls): each rank spins while the host enqueues the whole group.
    for (int r = 0; r < n; r++) {
      CUDA_OK(cudaSetDevice(r));
      k_spin<<<1, 1, 0, nc.streams[r]>>>(SPIN_NS);
      CUDA_OK(cudaGetLastError());
      CUDA_OK(cudaEventRecord(nc.start[r], nc.streams[r]));
    }
    CHECK_RC(nccl_enqueue(op, count, err, errlen));
    double worst = 0;
    for (int r = 0; r < n; r++) {
      float ms = 0;
      CUDA_OK(cudaSetDevice(r));
      CUDA_OK(cudaEventRecord(nc.stop[r], nc.streams[r]));
      CUDA_OK(cudaEventSynchronize(nc.stop[r]));
      CUDA_OK(cudaEventElapsedTime(&ms, nc.start[r], nc.stop[r]));
      worst = std::max(worst, (double)ms * 1e3);
    }
    t->samples_us[rep] = worst; // the collective ends when its slowest rank does
  }
done:
  return rc;
}
