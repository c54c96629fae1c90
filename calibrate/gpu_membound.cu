// ptdsim-calibrate — the memory-bound kernels of the membound mode, written
// as production frameworks write them (Megatron-Core's fused kernels and
// Transformer Engine's: one pass over the data, 16-byte vectorized loads and
// stores, fp32 arithmetic, bf16 tensors), each checked against reference.c
// on pseudo-random inputs before it is timed.  Launch functions:
// gpu_membound.cuh; the mathematics: reference.h.
//
// Design, per op:
//   norms            one group of threads per row (a block, or a warp of a
//                    4-row block for short rows) holding the row in
//                    registers as packed bf16; warp-shuffle then
//                    shared-memory reductions; the forward saves the fp32
//                    mean and rstd; the backward loops each row group over
//                    rows, accumulating its dgamma/dbeta columns in
//                    registers, writes one partial row per group, and a
//                    second kernel adds the partials (TE's ln_bwd layout);
//   element-wise     grid-stride over 16-byte chunks, the chunk's row and
//                    column tracked without a division per step;
//   dropout          the keep mask from the counter-based hash (no state),
//                    written as one 8-byte store per chunk;
//   rotary           one block per token: the token's cos/sin computed once
//                    into shared memory, then every head's pairs of chunks
//                    (j, j + d/2) rotated;
//   fp8_cast         64 x 128 tiles: 16-byte loads, 8-byte E4M3 stores of
//                    the cast, the tile's codes through shared memory and
//                    32-byte stores of the transpose, the block's amax
//                    reduced then one atomicMax per block;
//   cross entropy    one block per row, an online max and sum of
//                    exponentials per thread (Milakov and Gimelshein 2018)
//                    merged across the block; the backward element-wise from
//                    the saved statistics.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fp8_slots.h"
#include "gpu.h"
#include "gpu_common.cuh"
#include "gpu_membound.cuh"
#include "../measure/reference.h"

typedef __nv_bfloat16 bf16;

#define MB_THREADS 256
#define LOG2E 1.4426950408889634f
// The membound mode's conventions (the modern layer passes its own).
#define MB_HEAD_DIM 128 // Llama's and GPT-3's head size
#define MB_SEED 1234    // dropout

namespace { // this file's own helpers and kernels (internal linkage)

// --- 16-byte accesses ---

__device__ __forceinline__ uint4 ld16(const void *p) {
  return __ldg(reinterpret_cast<const uint4 *>(p));
}
__device__ __forceinline__ void st16(void *p, uint4 v) {
  *reinterpret_cast<uint4 *>(p) = v;
}
// Element 2k of a chunk is the low half of word k (little-endian); widening
// bf16 to fp32 is a shift.
__device__ __forceinline__ void unpack8(uint4 u, float *f) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    f[2 * k] = __uint_as_float(w[k] << 16);
    f[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
  }
}
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b); // a in the low half
  uint32_t w;
  memcpy(&w, &h, sizeof w);
  return w;
}
__device__ __forceinline__ uint4 pack8(const float *f) {
  return make_uint4(pack2(f[0], f[1]), pack2(f[2], f[3]), pack2(f[4], f[5]), pack2(f[6], f[7]));
}
__device__ __forceinline__ void load8(const bf16 *p, float *f) {
  unpack8(ld16(p), f);
}
// A bias chunk, or zeros without a bias.
__device__ __forceinline__ void load_bias(const bf16 *bias, size_t col_chunk, float *f) {
  if (bias) {
    load8(bias + col_chunk * 8, f);
  } else {
#pragma unroll
    for (int j = 0; j < 8; j++)
      f[j] = 0.f;
  }
}

// Grid-stride over the 16-byte chunks of a rows x cols tensor, with the
// chunk's row and column (in chunks) kept up to date by additions: one
// division per thread, not per chunk.
struct ChunkIter {
  size_t k, row, col, step, drow, dcol, cpr;
  __device__ explicit ChunkIter(size_t chunks_per_row) {
    cpr = chunks_per_row;
    k = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    step = (size_t)gridDim.x * blockDim.x;
    row = k / cpr;
    col = k % cpr;
    drow = step / cpr;
    dcol = step % cpr;
  }
  __device__ void next() {
    k += step;
    row += drow;
    col += dcol;
    if (col >= cpr) {
      col -= cpr;
      row++;
    }
  }
};

// Blocks for a grid-stride kernel: enough for one chunk per thread, at most
// 16 blocks of 256 per SM (a full H100 holds 8).
static unsigned ew_blocks(size_t chunks) {
  int dev = 0, sms = 132;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    sms = 132;
  return (unsigned)std::max<size_t>(1, std::min<size_t>((chunks + MB_THREADS - 1) / MB_THREADS, (size_t)sms * 16));
}

// --- reductions ---

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sums over the threads of one row group (threadIdx.x < blockDim.x, a
// multiple of 32; the group is threadIdx.y); every thread gets the sums.
// sh: 32 N floats per group.  Every thread of the block must call it.
template <int N> __device__ void row_sums(float (&v)[N], float *sh) {
#pragma unroll
  for (int n = 0; n < N; n++)
    v[n] = warp_sum(v[n]);
  if (blockDim.x == 32)
    return;
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  float *g = sh + threadIdx.y * 32 * N;
  if (lane == 0) {
#pragma unroll
    for (int n = 0; n < N; n++)
      g[n * 32 + warp] = v[n];
  }
  __syncthreads();
#pragma unroll
  for (int n = 0; n < N; n++)
    v[n] = warp_sum(lane < warps ? g[n * 32 + lane] : 0.f);
  __syncthreads(); // the next reduction reuses sh
}

// --- norms ---

// Launch shape of a norm kernel: vpt chunks of 8 per thread, tpr threads
// per row, rpb rows per block.
struct NormCfg {
  int vpt;
  unsigned tpr, rpb;
  size_t blocks, groups;
};

static bool norm_cfg(size_t rows, size_t cols, bool bwd, NormCfg *c) {
  const size_t chunks = cols / 8;
  // The fewest chunks per thread that keep a row within 256 threads (512
  // for the backward, whose registers hold x, dy and the column sums);
  // beyond, up to 1024 threads for the forward.
  const size_t pref = bwd ? 512 : 256, maxthreads = bwd ? 512 : 1024;
  const int vmax = bwd ? 4 : 8;
  int v = 1;
  while (v < vmax && (chunks + v - 1) / v > pref)
    v *= 2;
  size_t t = (chunks + v - 1) / v;
  if (t > maxthreads)
    return false;
  c->vpt = v;
  c->tpr = (unsigned)std::max<size_t>(32, (t + 31) / 32 * 32);
  c->rpb = std::max(1u, 128u / c->tpr);
  c->blocks = (rows + c->rpb - 1) / c->rpb;
  c->groups = c->blocks * c->rpb;
  return true;
}

// Up to 1024 threads per row only with 8 chunks per thread (norm_cfg).
template <int VPT, bool RMS>
__global__ void __launch_bounds__(VPT == 8 ? 1024 : 256)
    k_norm_fwd(const bf16 *__restrict__ x, const bf16 *__restrict__ gamma, const bf16 *__restrict__ beta,
               bf16 *__restrict__ y, float *__restrict__ mean_out, float *__restrict__ rstd_out, size_t rows,
               size_t cols, float eps) {
  extern __shared__ float sh[];
  const size_t row = (size_t)blockIdx.x * blockDim.y + threadIdx.y, chunks = cols / 8;
  const bool live = row < rows;
  const bf16 *xr = x + (live ? row : 0) * cols;
  uint4 v[VPT];
#pragma unroll
  for (int i = 0; i < VPT; i++) {
    const size_t c = threadIdx.x + (size_t)i * blockDim.x;
    v[i] = live && c < chunks ? ld16(xr + c * 8) : make_uint4(0u, 0u, 0u, 0u);
  }
  const float n = (float)cols;
  float mean = 0.f;
  if constexpr (!RMS) {
    float s[1] = {0.f};
#pragma unroll
    for (int i = 0; i < VPT; i++) {
      float f[8];
      unpack8(v[i], f);
#pragma unroll
      for (int j = 0; j < 8; j++)
        s[0] += f[j];
    }
    row_sums(s, sh);
    mean = s[0] / n;
  }
  // Two passes over the registers: the variance of x - mean, not
  // E[x^2] - mean^2, which cancels.
  float q[1] = {0.f};
#pragma unroll
  for (int i = 0; i < VPT; i++) {
    const size_t c = threadIdx.x + (size_t)i * blockDim.x;
    float f[8];
    unpack8(v[i], f);
    if (live && c < chunks) {
#pragma unroll
      for (int j = 0; j < 8; j++)
        q[0] += (f[j] - mean) * (f[j] - mean);
    }
  }
  row_sums(q, sh);
  const float rstd = rsqrtf(q[0] / n + eps);
  if (live && threadIdx.x == 0) {
    if constexpr (!RMS)
      mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
#pragma unroll
  for (int i = 0; i < VPT; i++) {
    const size_t c = threadIdx.x + (size_t)i * blockDim.x;
    if (!live || c >= chunks)
      continue;
    float f[8], g[8], b[8];
    unpack8(v[i], f);
    load8(gamma + c * 8, g);
    if constexpr (!RMS)
      load8(beta + c * 8, b);
#pragma unroll
    for (int j = 0; j < 8; j++)
      f[j] = RMS ? f[j] * rstd * g[j] : (f[j] - mean) * rstd * g[j] + b[j];
    st16(y + row * cols + c * 8, pack8(f));
  }
}

template <int VPT, bool RMS>
__global__ void __launch_bounds__(512)
    k_norm_bwd(const bf16 *__restrict__ x, const bf16 *__restrict__ dy, const float *__restrict__ mean,
               const float *__restrict__ rstd, const bf16 *__restrict__ gamma, bf16 *__restrict__ dx,
               float *__restrict__ part, size_t rows, size_t cols) {
  extern __shared__ float sh[];
  const size_t chunks = cols / 8, groups = (size_t)gridDim.x * blockDim.y;
  const size_t group = (size_t)blockIdx.x * blockDim.y + threadIdx.y;
  const float n = (float)cols;
  float dg[VPT][8], db[VPT][8];
#pragma unroll
  for (int i = 0; i < VPT; i++)
#pragma unroll
    for (int j = 0; j < 8; j++)
      dg[i][j] = db[i][j] = 0.f;
  // The loop bound depends on the block only: every thread reaches the
  // reductions' barriers the same number of times.
  for (size_t first = (size_t)blockIdx.x * blockDim.y; first < rows; first += groups) {
    const size_t row = first + threadIdx.y;
    const bool live = row < rows;
    uint4 xv[VPT], dv[VPT];
#pragma unroll
    for (int i = 0; i < VPT; i++) {
      const size_t c = threadIdx.x + (size_t)i * blockDim.x;
      const bool ok = live && c < chunks;
      xv[i] = ok ? ld16(x + row * cols + c * 8) : make_uint4(0u, 0u, 0u, 0u);
      dv[i] = ok ? ld16(dy + row * cols + c * 8) : make_uint4(0u, 0u, 0u, 0u);
    }
    const float mu = RMS || !live ? 0.f : mean[row], rs = live ? rstd[row] : 0.f;
    // sum g and sum g xhat over the row, g = dy gamma (dead lanes hold zeros).
    float s[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < VPT; i++) {
      const size_t c = threadIdx.x + (size_t)i * blockDim.x;
      if (!live || c >= chunks)
        continue;
      float f[8], d[8], g[8];
      unpack8(xv[i], f);
      unpack8(dv[i], d);
      load8(gamma + c * 8, g);
#pragma unroll
      for (int j = 0; j < 8; j++) {
        s[0] += d[j] * g[j];
        s[1] += d[j] * g[j] * ((f[j] - mu) * rs);
      }
    }
    row_sums(s, sh);
    const float m1 = RMS ? 0.f : s[0] / n, m2 = s[1] / n;
#pragma unroll
    for (int i = 0; i < VPT; i++) {
      const size_t c = threadIdx.x + (size_t)i * blockDim.x;
      if (!live || c >= chunks)
        continue;
      float f[8], d[8], g[8];
      unpack8(xv[i], f);
      unpack8(dv[i], d);
      load8(gamma + c * 8, g);
#pragma unroll
      for (int j = 0; j < 8; j++) {
        const float xhat = (f[j] - mu) * rs;
        dg[i][j] += d[j] * xhat;
        if constexpr (!RMS)
          db[i][j] += d[j];
        f[j] = rs * (d[j] * g[j] - m1 - xhat * m2);
      }
      st16(dx + row * cols + c * 8, pack8(f));
    }
  }
  // One partial row per row group: dgamma in part[0 .. groups), dbeta after.
#pragma unroll
  for (int i = 0; i < VPT; i++) {
    const size_t c = threadIdx.x + (size_t)i * blockDim.x;
    if (c >= chunks)
      continue;
    float4 *pg = reinterpret_cast<float4 *>(part + group * cols + c * 8);
    pg[0] = make_float4(dg[i][0], dg[i][1], dg[i][2], dg[i][3]);
    pg[1] = make_float4(dg[i][4], dg[i][5], dg[i][6], dg[i][7]);
    if constexpr (!RMS) {
      float4 *pb = reinterpret_cast<float4 *>(part + (groups + group) * cols + c * 8);
      pb[0] = make_float4(db[i][0], db[i][1], db[i][2], db[i][3]);
      pb[1] = make_float4(db[i][4], db[i][5], db[i][6], db[i][7]);
    }
  }
}

// out_{blockIdx.y}[c] = sum over groups of part[blockIdx.y][group][c]: 32
// columns by 8 group strides per block, coalesced along the columns.
__global__ void k_colsum(const float *__restrict__ part, size_t groups, size_t cols, float *__restrict__ out0,
                         float *__restrict__ out1) {
  __shared__ float sh[8][33];
  const size_t c = blockIdx.x * (size_t)32 + threadIdx.x;
  const float *p = part + (size_t)blockIdx.y * groups * cols;
  float s = 0.f;
  if (c < cols)
    for (size_t g = threadIdx.y; g < groups; g += 8)
      s += p[g * cols + c];
  sh[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int k = 1; k < 8; k++)
      s += sh[k][threadIdx.x];
    (blockIdx.y ? out1 : out0)[c] = s;
  }
}

template <bool RMS>
static cudaError_t norm_fwd(const bf16 *x, const bf16 *gamma, const bf16 *beta, bf16 *y, float *mean, float *rstd,
                            size_t rows, size_t cols, float eps, cudaStream_t s) {
  NormCfg c;
  if (mb_shape_error(RMS ? REF_OP_RMSNORM_FWD : REF_OP_LAYERNORM_FWD, rows, cols, MB_HEAD_DIM) ||
      !norm_cfg(rows, cols, false, &c))
    return cudaErrorInvalidValue;
  const dim3 block(c.tpr, c.rpb);
  const size_t smem = c.rpb * 32 * sizeof(float);
  switch (c.vpt) {
  case 1:
    k_norm_fwd<1, RMS><<<(unsigned)c.blocks, block, smem, s>>>(x, gamma, beta, y, mean, rstd, rows, cols, eps);
    break;
  case 2:
    k_norm_fwd<2, RMS><<<(unsigned)c.blocks, block, smem, s>>>(x, gamma, beta, y, mean, rstd, rows, cols, eps);
    break;
  case 4:
    k_norm_fwd<4, RMS><<<(unsigned)c.blocks, block, smem, s>>>(x, gamma, beta, y, mean, rstd, rows, cols, eps);
    break;
  default:
    k_norm_fwd<8, RMS><<<(unsigned)c.blocks, block, smem, s>>>(x, gamma, beta, y, mean, rstd, rows, cols, eps);
  }
  return cudaGetLastError();
}

} // namespace

cudaError_t mb_layernorm_fwd(const bf16 *x, const bf16 *gamma, const bf16 *beta, bf16 *y, float *mean, float *rstd,
                             size_t rows, size_t cols, float eps, cudaStream_t s) {
  return norm_fwd<false>(x, gamma, beta, y, mean, rstd, rows, cols, eps, s);
}

cudaError_t mb_rmsnorm_fwd(const bf16 *x, const bf16 *gamma, bf16 *y, float *rstd, size_t rows, size_t cols, float eps,
                           cudaStream_t s) {
  return norm_fwd<true>(x, gamma, nullptr, y, nullptr, rstd, rows, cols, eps, s);
}

namespace {

template <int VPT, bool RMS> static const void *norm_bwd_kernel() {
  return reinterpret_cast<const void *>(k_norm_bwd<VPT, RMS>);
}

// The backward's launch: as many row groups as fit on the device at once
// (each loops over rows), at most one per row.
template <bool RMS> static cudaError_t norm_bwd_cfg(size_t rows, size_t cols, NormCfg *c) {
  if (mb_shape_error(RMS ? REF_OP_RMSNORM_BWD : REF_OP_LAYERNORM_BWD, rows, cols, MB_HEAD_DIM) ||
      !norm_cfg(rows, cols, true, c))
    return cudaErrorInvalidValue;
  const void *k = c->vpt == 1 ? norm_bwd_kernel<1, RMS>() : c->vpt == 2 ? norm_bwd_kernel<2, RMS>()
                                                                        : norm_bwd_kernel<4, RMS>();
  int dev = 0, sms = 0, per_sm = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, (int)(c->tpr * c->rpb),
                                                      c->rpb * 64 * sizeof(float));
  if (e != cudaSuccess)
    return e;
  c->blocks = std::min(c->blocks, (size_t)std::max(1, sms * std::max(1, per_sm)));
  c->groups = c->blocks * c->rpb;
  return cudaSuccess;
}

} // namespace

cudaError_t mb_norm_bwd_workspace(size_t rows, size_t cols, int rms, size_t *bytes) {
  NormCfg c;
  cudaError_t e = rms ? norm_bwd_cfg<true>(rows, cols, &c) : norm_bwd_cfg<false>(rows, cols, &c);
  *bytes = e == cudaSuccess ? c.groups * cols * sizeof(float) * (rms ? 1 : 2) : 0;
  return e;
}

namespace {

template <bool RMS>
static cudaError_t norm_bwd(const bf16 *x, const bf16 *dy, const float *mean, const float *rstd, const bf16 *gamma,
                            bf16 *dx, float *dgamma, float *dbeta, void *workspace, size_t rows, size_t cols,
                            cudaStream_t s) {
  NormCfg c;
  cudaError_t e = norm_bwd_cfg<RMS>(rows, cols, &c);
  if (e != cudaSuccess)
    return e;
  float *part = static_cast<float *>(workspace);
  const dim3 block(c.tpr, c.rpb);
  const size_t smem = c.rpb * 64 * sizeof(float);
  switch (c.vpt) {
  case 1:
    k_norm_bwd<1, RMS><<<(unsigned)c.blocks, block, smem, s>>>(x, dy, mean, rstd, gamma, dx, part, rows, cols);
    break;
  case 2:
    k_norm_bwd<2, RMS><<<(unsigned)c.blocks, block, smem, s>>>(x, dy, mean, rstd, gamma, dx, part, rows, cols);
    break;
  default:
    k_norm_bwd<4, RMS><<<(unsigned)c.blocks, block, smem, s>>>(x, dy, mean, rstd, gamma, dx, part, rows, cols);
  }
  if ((e = cudaGetLastError()) != cudaSuccess)
    return e;
  k_colsum<<<dim3((unsigned)((cols + 31) / 32), RMS ? 1 : 2), dim3(32, 8), 0, s>>>(part, c.groups, cols, dgamma,
                                                                                 dbeta);
  return cudaGetLastError();
}

} // namespace

cudaError_t mb_layernorm_bwd(const bf16 *x, const bf16 *dy, const float *mean, const float *rstd, const bf16 *gamma,
                             bf16 *dx, float *dgamma, float *dbeta, void *workspace, size_t rows, size_t cols,
                             cudaStream_t s) {
  return norm_bwd<false>(x, dy, mean, rstd, gamma, dx, dgamma, dbeta, workspace, rows, cols, s);
}

cudaError_t mb_rmsnorm_bwd(const bf16 *x, const bf16 *dy, const float *rstd, const bf16 *gamma, bf16 *dx,
                           float *dgamma, void *workspace, size_t rows, size_t cols, cudaStream_t s) {
  return norm_bwd<true>(x, dy, nullptr, rstd, gamma, dx, dgamma, nullptr, workspace, rows, cols, s);
}

namespace {

// --- element-wise ---

// Megatron's bias_gelu_fusion in fp32, with its constants (reference.h).
__device__ __forceinline__ float gelu_f(float x) {
  return 0.5f * x * (1.f + tanhf(0.79788456f * x * (1.f + 0.044715f * x * x)));
}
__device__ __forceinline__ float gelu_grad_f(float x) {
  const float t = tanhf(0.79788456f * x * (1.f + 0.044715f * x * x));
  return 0.5f * x * ((1.f - t * t) * (0.79788456f + 0.1070322243f * x * x)) + 0.5f * (1.f + t);
}
__device__ __forceinline__ float sigmoid_f(float g) {
  return 1.f / (1.f + expf(-g));
}

__global__ void k_bias_gelu_fwd(const bf16 *__restrict__ x, const bf16 *__restrict__ bias, bf16 *__restrict__ y,
                                size_t chunks, size_t cpr) {
  for (ChunkIter it(cpr); it.k < chunks; it.next()) {
    float a[8], b[8];
    load8(x + it.k * 8, a);
    load_bias(bias, it.col, b);
#pragma unroll
    for (int j = 0; j < 8; j++)
      a[j] = gelu_f(a[j] + b[j]);
    st16(y + it.k * 8, pack8(a));
  }
}

__global__ void k_bias_gelu_bwd(const bf16 *__restrict__ dy, const bf16 *__restrict__ x,
                                const bf16 *__restrict__ bias, bf16 *__restrict__ dx, size_t chunks, size_t cpr) {
  for (ChunkIter it(cpr); it.k < chunks; it.next()) {
    float d[8], a[8], b[8];
    load8(dy + it.k * 8, d);
    load8(x + it.k * 8, a);
    load_bias(bias, it.col, b);
#pragma unroll
    for (int j = 0; j < 8; j++)
      d[j] *= gelu_grad_f(a[j] + b[j]);
    st16(dx + it.k * 8, pack8(d));
  }
}

// The fc1 row is [gate | up]: output chunk (row, col) reads chunk col of
// both halves of input row `row`.
__global__ void k_swiglu_fwd(const bf16 *__restrict__ in, bf16 *__restrict__ y, size_t chunks, size_t cpr) {
  const size_t cols = cpr * 8;
  for (ChunkIter it(cpr); it.k < chunks; it.next()) {
    const bf16 *g = in + it.row * 2 * cols + it.col * 8;
    float a[8], u[8];
    load8(g, a);
    load8(g + cols, u);
#pragma unroll
    for (int j = 0; j < 8; j++)
      a[j] = a[j] * sigmoid_f(a[j]) * u[j];
    st16(y + it.k * 8, pack8(a));
  }
}

__global__ void k_swiglu_bwd(const bf16 *__restrict__ dy, const bf16 *__restrict__ in, bf16 *__restrict__ din,
                             size_t chunks, size_t cpr) {
  const size_t cols = cpr * 8;
  for (ChunkIter it(cpr); it.k < chunks; it.next()) {
    const size_t off = it.row * 2 * cols + it.col * 8;
    float d[8], a[8], u[8];
    load8(dy + it.k * 8, d);
    load8(in + off, a);
    load8(in + off + cols, u);
#pragma unroll
    for (int j = 0; j < 8; j++) {
      const float sg = sigmoid_f(a[j]);
      const float dgate = d[j] * u[j] * sg * (1.f + a[j] * (1.f - sg));
      u[j] = d[j] * a[j] * sg; // dup
      a[j] = dgate;
    }
    st16(din + off, pack8(a));
    st16(din + off + cols, pack8(u));
  }
}

__device__ __forceinline__ bool keep_elem(uint64_t seed, uint64_t i) {
  return (mix(seed * 31 + i) >> 8) >= REF_DROPOUT_KEEP_MIN; // ref_dropout_keep
}

__global__ void k_bias_dropout_add(const bf16 *__restrict__ x, const bf16 *__restrict__ bias,
                                   const bf16 *__restrict__ res, bf16 *__restrict__ y, uint8_t *__restrict__ mask,
                                   size_t chunks, size_t cpr, uint64_t seed) {
  const float inv_keep = 1.f / (1.f - (float)REF_DROPOUT_P);
  for (ChunkIter it(cpr); it.k < chunks; it.next()) {
    float a[8], b[8], r[8];
    load8(x + it.k * 8, a);
    load_bias(bias, it.col, b);
    load8(res + it.k * 8, r);
    uint32_t m[2] = {0u, 0u};
#pragma unroll
    for (int j = 0; j < 8; j++) {
      const bool k = keep_elem(seed, it.k * 8 + j);
      m[j / 4] |= (uint32_t)k << (8 * (j % 4));
      a[j] = r[j] + (k ? (a[j] + b[j]) * inv_keep : 0.f);
    }
    st16(y + it.k * 8, pack8(a));
    *reinterpret_cast<uint2 *>(mask + it.k * 8) = make_uint2(m[0], m[1]);
  }
}

#define EW_LAUNCH(kernel, chunks, ...)                                                                                \
  do {                                                                                                               \
    kernel<<<ew_blocks(chunks), MB_THREADS, 0, s>>>(__VA_ARGS__);                                                    \
    return cudaGetLastError();                                                                                       \
  } while (0)

} // namespace

cudaError_t mb_bias_gelu_fwd(const bf16 *x, const bf16 *bias, bf16 *y, size_t rows, size_t cols, cudaStream_t s) {
  if (mb_shape_error(REF_OP_BIAS_GELU_FWD, rows, cols, MB_HEAD_DIM))
    return cudaErrorInvalidValue;
  EW_LAUNCH(k_bias_gelu_fwd, rows * cols / 8, x, bias, y, rows * cols / 8, cols / 8);
}

cudaError_t mb_bias_gelu_bwd(const bf16 *dy, const bf16 *x, const bf16 *bias, bf16 *dx, size_t rows, size_t cols,
                             cudaStream_t s) {
  if (mb_shape_error(REF_OP_BIAS_GELU_BWD, rows, cols, MB_HEAD_DIM))
    return cudaErrorInvalidValue;
  EW_LAUNCH(k_bias_gelu_bwd, rows * cols / 8, dy, x, bias, dx, rows * cols / 8, cols / 8);
}

cudaError_t mb_swiglu_fwd(const bf16 *in, bf16 *y, size_t rows, size_t cols, cudaStream_t s) {
  if (mb_shape_error(REF_OP_SWIGLU_FWD, rows, cols, MB_HEAD_DIM))
    return cudaErrorInvalidValue;
  EW_LAUNCH(k_swiglu_fwd, rows * cols / 8, in, y, rows * cols / 8, cols / 8);
}

cudaError_t mb_swiglu_bwd(const bf16 *dy, const bf16 *in, bf16 *din, size_t rows, size_t cols, cudaStream_t s) {
  if (mb_shape_error(REF_OP_SWIGLU_BWD, rows, cols, MB_HEAD_DIM))
    return cudaErrorInvalidValue;
  EW_LAUNCH(k_swiglu_bwd, rows * cols / 8, dy, in, din, rows * cols / 8, cols / 8);
}

cudaError_t mb_bias_dropout_add_fwd(const bf16 *x, const bf16 *bias, const bf16 *residual, bf16 *y, uint8_t *mask,
                                    size_t rows, size_t cols, uint64_t seed, cudaStream_t s) {
  if (mb_shape_error(REF_OP_BIAS_DROPOUT_ADD_FWD, rows, cols, MB_HEAD_DIM))
    return cudaErrorInvalidValue;
  EW_LAUNCH(k_bias_dropout_add, rows * cols / 8, x, bias, residual, y, mask, rows * cols / 8, cols / 8, seed);
}

// --- rotary ---

void mb_rope_inv_freq(size_t head_dim, double base, float *inv_freq) {
  // Megatron-Core computes 1 / base^(2j/d) in fp32; this is that value
  // correctly rounded to fp32 (within an ulp of torch's).
  for (size_t j = 0; j < head_dim / 2; j++)
    inv_freq[j] = (float)pow(base, -2.0 * (double)j / (double)head_dim);
}

namespace {

// One block per token.  sc: cos of the head_dim / 2 angles, then +-sin.
__global__ void k_rotary(const bf16 *__restrict__ x, const float *__restrict__ inv_freq, bf16 *__restrict__ y,
                         size_t cols, unsigned head_dim, size_t batch, float sign) {
  extern __shared__ float sc[];
  const size_t row = blockIdx.x;
  const unsigned hd2 = head_dim / 2, per_head = hd2 / 8, pairs = (unsigned)(cols / head_dim) * per_head;
  const float pos = (float)(row / batch);
  for (unsigned j = threadIdx.x; j < hd2; j += blockDim.x) {
    float sn, cs;
    sincosf(__fmul_rn(pos, inv_freq[j]), &sn, &cs); // the angle rounded once, as the host check rebuilds it
    sc[j] = cs;
    sc[hd2 + j] = sign * sn;
  }
  __syncthreads();
  for (unsigned p = threadIdx.x; p < pairs; p += blockDim.x) {
    const unsigned h = p / per_head, q = p % per_head;
    const size_t off = row * cols + (size_t)h * head_dim + q * 8;
    float a[8], b[8];
    load8(x + off, a);
    load8(x + off + hd2, b);
#pragma unroll
    for (int j = 0; j < 8; j++) {
      const float c = sc[q * 8 + j], sn = sc[hd2 + q * 8 + j], a0 = a[j];
      a[j] = a0 * c - b[j] * sn;
      b[j] = b[j] * c + a0 * sn;
    }
    st16(y + off, pack8(a));
    st16(y + off + hd2, pack8(b));
  }
}

} // namespace

cudaError_t mb_rotary(const bf16 *x, const float *inv_freq, bf16 *y, size_t rows, size_t cols, size_t head_dim,
                      size_t batch, int backward, cudaStream_t s) {
  if (mb_shape_error(backward ? REF_OP_ROTARY_BWD : REF_OP_ROTARY_FWD, rows, cols, head_dim) || batch == 0)
    return cudaErrorInvalidValue;
  const size_t pairs = cols / 16;
  const unsigned threads = (unsigned)std::min<size_t>(256, std::max<size_t>(64, (pairs + 31) / 32 * 32));
  k_rotary<<<(unsigned)rows, threads, head_dim * sizeof(float), s>>>(x, inv_freq, y, cols, (unsigned)head_dim, batch,
                                                                     backward ? -1.f : 1.f);
  return cudaGetLastError();
}

namespace {

// --- FP8 cast and transpose ---

#define F8_TR 64  // tile rows
#define F8_TC 128 // tile columns

__global__ void __launch_bounds__(256)
    k_fp8_cast_transpose(const bf16 *__restrict__ x, const float *__restrict__ scale_p, uint8_t *__restrict__ out,
                         uint8_t *__restrict__ out_t, float *__restrict__ amax, float *__restrict__ scale_inv,
                         size_t rows, size_t cols) {
  __shared__ uint2 tile[F8_TR][F8_TC / 8]; // the tile's E4M3 codes, row-major
  __shared__ float warp_max[8];
  const size_t r0 = (size_t)blockIdx.y * F8_TR, c0 = (size_t)blockIdx.x * F8_TC;
  const float scale = *scale_p;
  float m = 0.f;
  // Cast: 64 rows x 16 chunks, four chunks per thread, a warp covering two
  // rows of 256 contiguous bytes.
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const unsigned q = threadIdx.x + 256u * i, r = q / 16, cc = q % 16;
    const size_t gr = r0 + r, gc = c0 + cc * 8;
    uint2 codes = make_uint2(0u, 0u);
    if (gr < rows && gc < cols) {
      float f[8];
      load8(x + gr * cols + gc, f);
      uint32_t w[2];
#pragma unroll
      for (int k = 0; k < 2; k++) {
        const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(f[4 * k] * scale, f[4 * k + 1] * scale),
                                                     __NV_SATFINITE, __NV_E4M3);
        const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(f[4 * k + 2] * scale, f[4 * k + 3] * scale),
                                                     __NV_SATFINITE, __NV_E4M3);
        w[k] = lo | hi << 16; // element 4k in the lowest byte
      }
#pragma unroll
      for (int j = 0; j < 8; j++)
        m = fmaxf(m, fabsf(f[j]));
      codes = make_uint2(w[0], w[1]);
      *reinterpret_cast<uint2 *>(out + gr * cols + gc) = codes;
    }
    tile[r][cc] = codes;
  }
  __syncthreads();
  // Transpose: thread t writes column c0 + t % 128 of the tile, rows
  // 32 (t / 128) .. + 32, as two 16-byte stores (one 32-byte sector); a warp
  // reads 32 consecutive bytes of a tile row per step (no bank conflicts).
  const unsigned tc = threadIdx.x % F8_TC, hf = threadIdx.x / F8_TC;
  const size_t gc = c0 + tc;
  const uint8_t *tb = reinterpret_cast<const uint8_t *>(tile);
#pragma unroll
  for (int seg = 0; seg < 2; seg++) {
    const unsigned tr = hf * 32 + seg * 16;
    const size_t gr = r0 + tr;
    if (gc >= cols || gr >= rows) // rows is a multiple of 16: whole 16-row pieces
      continue;
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const uint8_t *p = tb + (size_t)(tr + 4 * k) * F8_TC + tc;
      w[k] = (uint32_t)p[0] | (uint32_t)p[F8_TC] << 8 | (uint32_t)p[2 * F8_TC] << 16 | (uint32_t)p[3 * F8_TC] << 24;
    }
    st16(out_t + gc * rows + gr, make_uint4(w[0], w[1], w[2], w[3]));
  }
  // amax: warp, then block, then one atomic per block.  Non-negative floats
  // order as their bit patterns, so an unsigned atomicMax is a float max.
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0)
    warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < 8; w++)
      m = fmaxf(m, warp_max[w]);
    atomicMax(reinterpret_cast<unsigned *>(amax), __float_as_uint(m));
    if (blockIdx.x == 0 && blockIdx.y == 0)
      *scale_inv = 1.f / scale;
  }
}

} // namespace

cudaError_t mb_fp8_cast_transpose(const bf16 *x, const float *scale, uint8_t *out, uint8_t *out_t, float *amax,
                                  float *scale_inv, size_t rows, size_t cols, cudaStream_t s) {
  if (mb_shape_error(REF_OP_FP8_CAST, rows, cols, MB_HEAD_DIM))
    return cudaErrorInvalidValue;
  // The scale inverse written here is a GEMM's scale pointer next: each of
  // the three in a 16-byte slot of its own (fp8_slots.h).
  if (!calib_fp8_aligned(scale) || !calib_fp8_aligned(amax) || !calib_fp8_aligned(scale_inv))
    return cudaErrorMisalignedAddress;
  const dim3 grid((unsigned)((cols + F8_TC - 1) / F8_TC), (unsigned)((rows + F8_TR - 1) / F8_TR));
  k_fp8_cast_transpose<<<grid, 256, 0, s>>>(x, scale, out, out_t, amax, scale_inv, rows, cols);
  return cudaGetLastError();
}

namespace {

// --- cross entropy ---

// (m, s) <- the statistics of the union: max and sum of exp(x - max).
__device__ __forceinline__ void lse_merge(float &m, float &s, float m2, float s2) {
  const float M = fmaxf(m, m2);
  if (M == -INFINITY) // both empty
    return;
  s = s * exp2f((m - M) * LOG2E) + s2 * exp2f((m2 - M) * LOG2E);
  m = M;
}

__global__ void __launch_bounds__(256)
    k_xent_fwd(const bf16 *__restrict__ logits, const int64_t *__restrict__ target, long long vocab_start,
               float *__restrict__ row_max, float *__restrict__ row_sum, float *__restrict__ loss, size_t cols) {
  __shared__ float shm[32], shs[32];
  const size_t row = blockIdx.x, chunks = cols / 8;
  const bf16 *xr = logits + row * cols;
  float m = -INFINITY, s = 0.f;
#pragma unroll 4
  for (size_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    float f[8];
    load8(xr + c * 8, f);
    float cm = f[0];
#pragma unroll
    for (int j = 1; j < 8; j++)
      cm = fmaxf(cm, f[j]);
    if (cm > m) { // rescale the running sum to the new maximum
      s *= exp2f((m - cm) * LOG2E);
      m = cm;
    }
#pragma unroll
    for (int j = 0; j < 8; j++)
      s += exp2f((f[j] - m) * LOG2E);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    lse_merge(m, s, m2, s2);
  }
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  if (lane == 0) {
    shm[warp] = m;
    shs[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    m = lane < warps ? shm[lane] : -INFINITY;
    s = lane < warps ? shs[lane] : 0.f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
      lse_merge(m, s, m2, s2);
    }
    if (lane == 0) {
      const long long t = (long long)target[row] - vocab_start;
      float l = logf(s);
      if (t >= 0 && t < (long long)cols)
        l -= __bfloat162float(xr[t]) - m;
      row_max[row] = m;
      row_sum[row] = s;
      loss[row] = l;
    }
  }
}

__global__ void k_xent_bwd(const bf16 *__restrict__ logits, const int64_t *__restrict__ target, long long vocab_start,
                           const float *__restrict__ row_max, const float *__restrict__ row_sum,
                           const float *__restrict__ dloss, bf16 *__restrict__ grad, size_t chunks, size_t cpr) {
  for (ChunkIter it(cpr); it.k < chunks; it.next()) {
    const float m = row_max[it.row], inv = 1.f / row_sum[it.row], dl = dloss ? dloss[it.row] : 1.f;
    const long long t = (long long)target[it.row] - vocab_start - (long long)(it.col * 8);
    float f[8];
    load8(logits + it.k * 8, f);
#pragma unroll
    for (int j = 0; j < 8; j++)
      f[j] = (exp2f((f[j] - m) * LOG2E) * inv - (t == j ? 1.f : 0.f)) * dl;
    st16(grad + it.k * 8, pack8(f));
  }
}

static unsigned xent_threads(size_t cols) {
  const size_t chunks = cols / 8;
  return chunks >= 1024 ? 256u : (unsigned)std::max<size_t>(32, (chunks / 4 + 31) / 32 * 32);
}

} // namespace

cudaError_t mb_xent_fwd(const bf16 *logits, const int64_t *target, long long vocab_start, float *row_max,
                        float *row_sum, float *loss, size_t rows, size_t cols, cudaStream_t s) {
  if (mb_shape_error(REF_OP_CROSS_ENTROPY_FWD, rows, cols, MB_HEAD_DIM))
    return cudaErrorInvalidValue;
  k_xent_fwd<<<(unsigned)rows, xent_threads(cols), 0, s>>>(logits, target, vocab_start, row_max, row_sum, loss, cols);
  return cudaGetLastError();
}

cudaError_t mb_xent_bwd(const bf16 *logits, const int64_t *target, long long vocab_start, const float *row_max,
                        const float *row_sum, const float *dloss, bf16 *grad, size_t rows, size_t cols,
                        cudaStream_t s) {
  if (mb_shape_error(REF_OP_CROSS_ENTROPY_BWD, rows, cols, MB_HEAD_DIM))
    return cudaErrorInvalidValue;
  EW_LAUNCH(k_xent_bwd, rows * cols / 8, logits, target, vocab_start, row_max, row_sum, dloss, grad, rows * cols / 8,
            cols / 8);
}

// --- shapes ---

const char *mb_shape_error(int op, size_t rows, size_t cols, size_t head_dim) {
  if (op < 0 || op >= REF_N_OPS)
    return "unknown op";
  if (rows == 0 || cols == 0)
    return "rows and cols must be positive";
  if (cols % 8)
    return "cols must be a multiple of 8 (16-byte accesses of 8 bf16 values)";
  if (rows > ((size_t)1 << 31) - 1 || cols > ((size_t)1 << 31) || rows * cols > ((size_t)1 << 40))
    return "the tensor is too large";
  switch (op) {
  case REF_OP_LAYERNORM_FWD:
  case REF_OP_RMSNORM_FWD:
    return cols > 65536 ? "norms keep a row in registers: cols must be at most 65536" : NULL;
  case REF_OP_LAYERNORM_BWD:
  case REF_OP_RMSNORM_BWD:
    return cols > 16384 ? "norm backwards keep a row in registers: cols must be at most 16384" : NULL;
  case REF_OP_ROTARY_FWD:
  case REF_OP_ROTARY_BWD:
    if (head_dim == 0 || head_dim % 16 || head_dim > 1024)
      return "rotary needs a head size that is a multiple of 16, at most 1024";
    return cols % head_dim ? "rotary needs cols to be a multiple of the head size" : NULL;
  case REF_OP_FP8_CAST:
    if (rows % 16 || cols % 16)
      return "fp8_cast needs rows and cols that are multiples of 16 (16-byte stores of the transpose)";
    return rows > (size_t)65535 * F8_TR ? "fp8_cast: too many rows for the tile grid" : NULL;
  default:
    return NULL;
  }
}

namespace {

// ===================== the membound mode: check, then time =====================

// A bf16 input as k_fill writes it: bf16(offset + scale urand(seed, i)).
struct Input {
  uint64_t seed;
  float scale, offset;
};

__global__ void k_fill(bf16 *p, size_t n, Input in) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = __float2bfloat16(__fadd_rn(__fmul_rn(in.scale, urand(in.seed, i)), in.offset));
}
// The same value on the host, through reference.c's C twins (scale urand is
// rounded to float, then the offset added, then bf16: as on the device,
// whose intrinsics forbid a fused multiply-add).
static double host_in(Input in, size_t i) {
  float v = in.scale * ref_urand(in.seed, i);
  v = v + in.offset;
  return ref_bf16(v);
}

__global__ void k_fill_rows(int64_t *target, float *dloss, size_t rows, size_t range) {
  for (size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x; r < rows; r += (size_t)gridDim.x * blockDim.x) {
    target[r] = (int64_t)(mix(0x7a11ull * 1000003ull + r) % range);
    dloss[r] = __fadd_rn(__fmul_rn(0.5f, urand(65, r)), 1.0f);
  }
}
static long long host_target(size_t r, size_t range) {
  return (long long)(ref_mix(0x7a11ull * 1000003ull + r) % range);
}
static double host_dloss(size_t r) {
  float v = 0.5f * ref_urand(65, r);
  return v + 1.0f;
}

// The inputs of the check (and of the timing).
static const Input IN_X = {51, 2.0f, 0.5f}; // norm inputs: a non-zero row mean
static const Input IN_DY = {54, 1.0f, 0.0f};
static const Input IN_GAMMA = {52, 0.5f, 1.0f};
static const Input IN_BETA = {53, 0.2f, 0.0f};
static const Input IN_BIAS = {56, 0.5f, 0.0f};
static const Input IN_ACT = {55, 3.0f, 0.0f};   // GeLU input, bias_dropout_add x
static const Input IN_GLU = {57, 4.0f, 0.0f};   // [gate | up]
static const Input IN_RES = {59, 1.0f, 0.0f};   // residual
static const Input IN_ROT = {60, 1.0f, 0.0f};   // q, k or their gradient
static const Input IN_CAST = {61, 4.0f, 0.0f};  // fp8_cast: |x| <= 4, and one planted -5
static const Input IN_LOGIT = {62, 8.0f, 0.0f}; // logits in [-8, 8)
#define CAST_SCALE 128.0f                        // a power of two: x scale is exact
#define CAST_PLANTED -5.0f                       // negative: amax takes magnitudes

// Every buffer any op uses; each op allocates its own.
struct MbBufs {
  bf16 *x = nullptr, *dy = nullptr, *y = nullptr, *dx = nullptr, *gamma = nullptr, *beta = nullptr, *bias = nullptr;
  float *mean = nullptr, *rstd = nullptr, *dgamma = nullptr, *dbeta = nullptr, *inv_freq = nullptr;
  float *scale = nullptr, *scale_inv = nullptr, *amax = nullptr, *rmax = nullptr, *rsum = nullptr;
  float *loss = nullptr, *dloss = nullptr;
  uint8_t *mask = nullptr, *f8 = nullptr, *f8t = nullptr;
  int64_t *target = nullptr;
  void *ws = nullptr;
  size_t groups = 0, planted = 0;
};

static void mb_free(MbBufs *b) {
  void *all[] = {b->x,     b->dy,        b->y,    b->dx,   b->gamma, b->beta, b->bias,  b->mean, b->rstd,
                 b->dgamma, b->dbeta,    b->inv_freq, b->scale, b->scale_inv, b->amax, b->rmax, b->rsum, b->loss,
                 b->dloss, b->mask,      b->f8,   b->f8t,  b->target, b->ws};
  for (void *p : all)
    cudaFree(p);
  *b = MbBufs();
}

// The op on its buffers.
static cudaError_t mb_run(int op, MbBufs *b, size_t rows, size_t cols, cudaStream_t s) {
  switch (op) {
  case REF_OP_LAYERNORM_FWD:
    return mb_layernorm_fwd(b->x, b->gamma, b->beta, b->y, b->mean, b->rstd, rows, cols, (float)REF_NORM_EPS, s);
  case REF_OP_LAYERNORM_BWD:
    return mb_layernorm_bwd(b->x, b->dy, b->mean, b->rstd, b->gamma, b->dx, b->dgamma, b->dbeta, b->ws, rows, cols, s);
  case REF_OP_RMSNORM_FWD:
    return mb_rmsnorm_fwd(b->x, b->gamma, b->y, b->rstd, rows, cols, (float)REF_NORM_EPS, s);
  case REF_OP_RMSNORM_BWD:
    return mb_rmsnorm_bwd(b->x, b->dy, b->rstd, b->gamma, b->dx, b->dgamma, b->ws, rows, cols, s);
  case REF_OP_BIAS_GELU_FWD:
    return mb_bias_gelu_fwd(b->x, b->bias, b->y, rows, cols, s);
  case REF_OP_BIAS_GELU_BWD:
    return mb_bias_gelu_bwd(b->dy, b->x, b->bias, b->dx, rows, cols, s);
  case REF_OP_SWIGLU_FWD:
    return mb_swiglu_fwd(b->x, b->y, rows, cols, s);
  case REF_OP_SWIGLU_BWD:
    return mb_swiglu_bwd(b->dy, b->x, b->dx, rows, cols, s);
  case REF_OP_BIAS_DROPOUT_ADD_FWD:
    return mb_bias_dropout_add_fwd(b->x, b->bias, b->dy, b->y, b->mask, rows, cols, MB_SEED, s);
  case REF_OP_ROTARY_FWD:
  case REF_OP_ROTARY_BWD:
    return mb_rotary(b->x, b->inv_freq, b->y, rows, cols, MB_HEAD_DIM, 1, op == REF_OP_ROTARY_BWD, s);
  case REF_OP_FP8_CAST:
    return mb_fp8_cast_transpose(b->x, b->scale, b->f8, b->f8t, b->amax, b->scale_inv, rows, cols, s);
  case REF_OP_CROSS_ENTROPY_FWD:
    return mb_xent_fwd(b->x, b->target, 0, b->rmax, b->rsum, b->loss, rows, cols, s);
  case REF_OP_CROSS_ENTROPY_BWD:
    return mb_xent_bwd(b->x, b->target, 0, b->rmax, b->rsum, b->dloss, b->dx, rows, cols, s);
  default:
    return cudaErrorInvalidValue;
  }
}

static int fill_in(bf16 *p, size_t n, Input in, cudaStream_t s, char *err, size_t errlen) {
  int rc = 0;
  k_fill<<<grid_for(n), 256, 0, s>>>(p, n, in);
  CUDA_OK(cudaGetLastError());
done:
  return rc;
}

// Allocates and fills op's buffers; the backwards also run their forward
// once (untimed) for its statistics.
static int mb_setup(int op, MbBufs *b, size_t rows, size_t cols, cudaStream_t s, char *err, size_t errlen) {
  int rc = 0;
  const size_t n = rows * cols, nb = n * sizeof(bf16), vb = cols * sizeof(bf16), rf = rows * sizeof(float);
  const bool norm = op <= REF_OP_RMSNORM_BWD, rms = op == REF_OP_RMSNORM_FWD || op == REF_OP_RMSNORM_BWD;
  const bool bwd = op == REF_OP_LAYERNORM_BWD || op == REF_OP_RMSNORM_BWD;
  if (norm) {
    CUDA_OK(cudaMalloc(&b->x, nb));
    CUDA_OK(cudaMalloc(&b->y, nb));
    CUDA_OK(cudaMalloc(&b->gamma, vb));
    CUDA_OK(cudaMalloc(&b->beta, vb));
    CUDA_OK(cudaMalloc(&b->mean, rf));
    CUDA_OK(cudaMalloc(&b->rstd, rf));
    CHECK_RC(fill_in(b->x, n, IN_X, s, err, errlen));
    CHECK_RC(fill_in(b->gamma, cols, IN_GAMMA, s, err, errlen));
    CHECK_RC(fill_in(b->beta, cols, IN_BETA, s, err, errlen));
    if (bwd) {
      size_t ws = 0;
      CUDA_OK(cudaMalloc(&b->dy, nb));
      CUDA_OK(cudaMalloc(&b->dx, nb));
      CUDA_OK(cudaMalloc(&b->dgamma, cols * sizeof(float)));
      CUDA_OK(cudaMalloc(&b->dbeta, cols * sizeof(float)));
      CUDA_OK(mb_norm_bwd_workspace(rows, cols, rms, &ws));
      CUDA_OK(cudaMalloc(&b->ws, ws));
      b->groups = ws / (cols * sizeof(float) * (rms ? 1 : 2));
      CHECK_RC(fill_in(b->dy, n, IN_DY, s, err, errlen));
      CUDA_OK(mb_run(rms ? REF_OP_RMSNORM_FWD : REF_OP_LAYERNORM_FWD, b, rows, cols, s));
    }
    return 0;
  }
  switch (op) {
  case REF_OP_BIAS_GELU_FWD:
  case REF_OP_BIAS_GELU_BWD:
    CUDA_OK(cudaMalloc(&b->x, nb));
    CUDA_OK(cudaMalloc(&b->bias, vb));
    CHECK_RC(fill_in(b->x, n, IN_ACT, s, err, errlen));
    CHECK_RC(fill_in(b->bias, cols, IN_BIAS, s, err, errlen));
    if (op == REF_OP_BIAS_GELU_FWD)
      CUDA_OK(cudaMalloc(&b->y, nb));
    else {
      CUDA_OK(cudaMalloc(&b->dy, nb));
      CUDA_OK(cudaMalloc(&b->dx, nb));
      CHECK_RC(fill_in(b->dy, n, IN_DY, s, err, errlen));
    }
    break;
  case REF_OP_SWIGLU_FWD:
  case REF_OP_SWIGLU_BWD:
    CUDA_OK(cudaMalloc(&b->x, 2 * nb));
    CHECK_RC(fill_in(b->x, 2 * n, IN_GLU, s, err, errlen));
    if (op == REF_OP_SWIGLU_FWD)
      CUDA_OK(cudaMalloc(&b->y, nb));
    else {
      CUDA_OK(cudaMalloc(&b->dy, nb));
      CUDA_OK(cudaMalloc(&b->dx, 2 * nb));
      CHECK_RC(fill_in(b->dy, n, IN_DY, s, err, errlen));
    }
    break;
  case REF_OP_BIAS_DROPOUT_ADD_FWD:
    CUDA_OK(cudaMalloc(&b->x, nb));
    CUDA_OK(cudaMalloc(&b->dy, nb)); // the residual
    CUDA_OK(cudaMalloc(&b->y, nb));
    CUDA_OK(cudaMalloc(&b->bias, vb));
    CUDA_OK(cudaMalloc(&b->mask, n));
    CHECK_RC(fill_in(b->x, n, IN_ACT, s, err, errlen));
    CHECK_RC(fill_in(b->dy, n, IN_RES, s, err, errlen));
    CHECK_RC(fill_in(b->bias, cols, IN_BIAS, s, err, errlen));
    break;
  case REF_OP_ROTARY_FWD:
  case REF_OP_ROTARY_BWD: {
    std::vector<float> inv(MB_HEAD_DIM / 2);
    mb_rope_inv_freq(MB_HEAD_DIM, REF_ROPE_BASE, inv.data());
    CUDA_OK(cudaMalloc(&b->x, nb));
    CUDA_OK(cudaMalloc(&b->y, nb));
    CUDA_OK(cudaMalloc(&b->inv_freq, inv.size() * sizeof(float)));
    CUDA_OK(cudaMemcpy(b->inv_freq, inv.data(), inv.size() * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_RC(fill_in(b->x, n, IN_ROT, s, err, errlen));
    break;
  }
  case REF_OP_FP8_CAST: {
    const float scale = CAST_SCALE, zero = 0.f;
    const bf16 planted = __float2bfloat16(CAST_PLANTED);
    CUDA_OK(cudaMalloc(&b->x, nb));
    CUDA_OK(cudaMalloc(&b->f8, n));
    CUDA_OK(cudaMalloc(&b->f8t, n));
    CUDA_OK(cudaMalloc(&b->scale, sizeof(float)));
    CUDA_OK(cudaMalloc(&b->scale_inv, sizeof(float)));
    CUDA_OK(cudaMalloc(&b->amax, sizeof(float)));
    CHECK_RC(fill_in(b->x, n, IN_CAST, s, err, errlen));
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaMemcpy(b->scale, &scale, sizeof scale, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(b->amax, &zero, sizeof zero, cudaMemcpyHostToDevice));
    // The tensor's largest magnitude, somewhere the check looks (row 1 of
    // the sampled rows, see check_rows): amax must find it.
    b->planted = (mix(901) % rows) * cols + mix(77) % cols;
    CUDA_OK(cudaMemcpy(b->x + b->planted, &planted, sizeof planted, cudaMemcpyHostToDevice));
    break;
  }
  case REF_OP_CROSS_ENTROPY_FWD:
  case REF_OP_CROSS_ENTROPY_BWD:
    CUDA_OK(cudaMalloc(&b->x, nb));
    CUDA_OK(cudaMalloc(&b->target, rows * sizeof(int64_t)));
    CUDA_OK(cudaMalloc(&b->dloss, rf));
    CUDA_OK(cudaMalloc(&b->rmax, rf));
    CUDA_OK(cudaMalloc(&b->rsum, rf));
    CUDA_OK(cudaMalloc(&b->loss, rf));
    CHECK_RC(fill_in(b->x, n, IN_LOGIT, s, err, errlen));
    // Targets over twice the shard: half of them on "another rank".
    k_fill_rows<<<grid_for(rows), 256, 0, s>>>(b->target, b->dloss, rows, 2 * cols);
    CUDA_OK(cudaGetLastError());
    if (op == REF_OP_CROSS_ENTROPY_BWD) {
      CUDA_OK(cudaMalloc(&b->dx, nb));
      CUDA_OK(mb_run(REF_OP_CROSS_ENTROPY_FWD, b, rows, cols, s));
    }
    break;
  default:
    return failf(err, errlen, "membound: op %d has no buffers", op);
  }
done:
  return rc;
}

// --- the check ---
//
// Tolerance of every bf16 output: |got - ref| <= 2^-8 |ref| + 2^-14 mag.
// The host rebuilds the very bf16 inputs, so what separates the GPU from
// the double-precision reference is (a) rounding the output to bf16, at
// most half an ulp, 2^-9 |value| (2^-8 leaves a factor 2), and (b) fp32
// arithmetic: a few ulps per operation, up to ~100 ulps (6e-6) of the
// terms' magnitude `mag` for the row reductions (sums of <= 64 terms per
// thread, then trees) and the transcendental functions; 2^-14 (6e-5) of
// mag bounds it with a wide margin, where an indexing or formula error
// moves the output by O(mag).  fp32 outputs (statistics, column sums) and
// exact ones (masks, E4M3 codes, amax) have their own bounds below.
static bool close_bf16(double got, double ref, double mag) {
  return fabs(got - ref) <= 0x1p-8 * fabs(ref) + 0x1p-14 * mag;
}

struct Check {
  const char *op;
  unsigned long long rows, cols;
  char *err;
  size_t errlen;
  // Records the first disagreement; returns non-zero then.
  int value(const char *what, size_t r, size_t c, double got, double ref, bool ok) const {
    if (ok)
      return 0;
    return failf(err, errlen, "membound %s %llux%llu disagrees with the CPU reference at %s[%zu,%zu]: %.9g vs %.9g", op,
                 rows, cols, what, r, c, got, ref);
  }
  int bf16v(const char *what, size_t r, size_t c, double got, double ref, double mag) const {
    return value(what, r, c, got, ref, close_bf16(got, ref, mag));
  }
};

static int get(void *dst, const void *src, size_t bytes, char *err, size_t errlen) {
  int rc = 0;
  CUDA_OK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
done:
  return rc;
}

static int get_bf16(std::vector<double> &dst, const bf16 *src, size_t n, char *err, size_t errlen) {
  std::vector<bf16> h(n);
  int rc = get(h.data(), src, n * sizeof(bf16), err, errlen);
  dst.resize(n);
  for (size_t i = 0; i < n; i++)
    dst[i] = to_f(h[i]);
  return rc;
}

// Row r of an input (width w, starting at column c0 of a row of `stride`).
static std::vector<double> in_row(Input in, size_t r, size_t stride, size_t c0, size_t w) {
  std::vector<double> v(w);
  for (size_t c = 0; c < w; c++)
    v[c] = host_in(in, r * stride + c0 + c);
  return v;
}

static int check_norm(int op, const MbBufs *b, const Check &k, size_t r, size_t cols) {
  char *err = k.err;
  size_t errlen = k.errlen;
  const bool rms = op == REF_OP_RMSNORM_FWD || op == REF_OP_RMSNORM_BWD;
  const bool bwd = op == REF_OP_LAYERNORM_BWD || op == REF_OP_RMSNORM_BWD;
  std::vector<double> x = in_row(IN_X, r, cols, 0, cols), gamma = in_row(IN_GAMMA, 0, 0, 0, cols);
  std::vector<double> beta = rms ? std::vector<double>(cols, 0.0) : in_row(IN_BETA, 0, 0, 0, cols);
  std::vector<double> ref(cols), got, dy;
  double mean = 0, rstd, absx = 0, mg = 0, mgx = 0;
  float dmean = 0, drstd = 0;
  int rc = 0;
  if (rms)
    ref_rmsnorm_fwd(x.data(), gamma.data(), cols, REF_NORM_EPS, ref.data(), &rstd);
  else
    ref_layernorm_fwd(x.data(), gamma.data(), beta.data(), cols, REF_NORM_EPS, ref.data(), &mean, &rstd);
  for (double v : x)
    absx += fabs(v) / cols;
  // The saved statistics: fp32 sums of <= 64 terms per thread, then two
  // 5-level trees (warp, block), so at most ~74 u (u = 2^-24) of mean |x|
  // (Higham's recursive-summation bound), then rsqrtf (2 ulps): 2^-16
  // (of mean |x| for the mean, of rstd for rstd) is 3 times that.
  if (!rms)
    CHECK_RC(get(&dmean, b->mean + r, sizeof dmean, err, errlen));
  CHECK_RC(get(&drstd, b->rstd + r, sizeof drstd, err, errlen));
  CHECK_RC(k.value("mean", r, 0, dmean, mean, fabs(dmean - mean) <= 0x1p-16 * absx));
  CHECK_RC(k.value("rstd", r, 0, drstd, rstd, fabs(drstd - rstd) <= 0x1p-16 * rstd));
  if (!bwd) {
    CHECK_RC(get_bf16(got, b->y + r * cols, cols, err, errlen));
    for (size_t c = 0; c < cols; c++) {
      const double xhat = (x[c] - mean) * rstd;
      // mag: the terms, plus the statistics' error carried by x - mean.
      CHECK_RC(k.bf16v("y", r, c, got[c], ref[c], fabs(xhat * gamma[c]) + fabs(beta[c]) + fabs(gamma[c])));
    }
    return 0;
  }
  // The backward against the statistics it read (checked above).
  dy = in_row(IN_DY, r, cols, 0, cols);
  if (rms)
    ref_rmsnorm_bwd(x.data(), dy.data(), gamma.data(), cols, drstd, ref.data(), NULL);
  else
    ref_layernorm_bwd(x.data(), dy.data(), gamma.data(), cols, dmean, drstd, ref.data(), NULL, NULL);
  for (size_t c = 0; c < cols; c++) {
    const double xhat = (x[c] - dmean) * drstd;
    mg += fabs(dy[c] * gamma[c]) / cols;
    mgx += fabs(dy[c] * gamma[c] * xhat) / cols;
  }
  CHECK_RC(get_bf16(got, b->dx + r * cols, cols, err, errlen));
  for (size_t c = 0; c < cols; c++) {
    const double xhat = (x[c] - dmean) * drstd;
    CHECK_RC(k.bf16v("dx", r, c, got[c], ref[c], drstd * (fabs(dy[c] * gamma[c]) + mg + fabs(xhat) * mgx)));
  }
done:
  return rc;
}

// dgamma and dbeta of 16 columns: sums over every row, with the device's
// statistics of each row.
static int check_norm_columns(int op, const MbBufs *b, const Check &k, size_t rows, size_t cols) {
  char *err = k.err;
  size_t errlen = k.errlen;
  const bool rms = op == REF_OP_RMSNORM_BWD;
  std::vector<float> mean(rows, 0.f), rstd(rows);
  int rc = 0;
  if (!rms)
    CHECK_RC(get(mean.data(), b->mean, rows * sizeof(float), err, errlen));
  CHECK_RC(get(rstd.data(), b->rstd, rows * sizeof(float), err, errlen));
  for (unsigned p = 0; p < 16; p++) {
    const size_t c = p == 0 ? 0 : p == 15 ? cols - 1 : mix(700 + p) % cols;
    double dg = 0, db = 0, ag = 0, ab = 0;
    for (size_t r = 0; r < rows; r++) {
      const double dy = host_in(IN_DY, r * cols + c), t = dy * (host_in(IN_X, r * cols + c) - mean[r]) * rstd[r];
      dg += t;
      ag += fabs(t);
      db += dy;
      ab += fabs(dy);
    }
    float got[2] = {0.f, 0.f};
    CHECK_RC(get(&got[0], b->dgamma + c, sizeof(float), err, errlen));
    if (!rms)
      CHECK_RC(get(&got[1], b->dbeta + c, sizeof(float), err, errlen));
    // fp32 recursive summation (Higham, Accuracy and Stability, 4.2):
    // |error| <= n u sum |terms| for n sequential additions, u = 2^-24:
    // ceil(rows / groups) per row group, groups / 8 + 8 in the column sum,
    // plus a few ulps per term; 2^-22 leaves a factor 4.
    const double n = (double)((rows + b->groups - 1) / b->groups + (b->groups + 7) / 8 + 16);
    CHECK_RC(k.value("dgamma", 0, c, got[0], dg, fabs(got[0] - dg) <= 0x1p-22 * n * ag));
    if (!rms)
      CHECK_RC(k.value("dbeta", 0, c, got[1], db, fabs(got[1] - db) <= 0x1p-22 * n * ab));
  }
done:
  return rc;
}

static int check_row(int op, const MbBufs *b, const Check &k, size_t r, size_t rows, size_t cols) {
  char *err = k.err;
  size_t errlen = k.errlen;
  std::vector<double> got, got2;
  int rc = 0;
  switch (op) {
  case REF_OP_LAYERNORM_FWD:
  case REF_OP_LAYERNORM_BWD:
  case REF_OP_RMSNORM_FWD:
  case REF_OP_RMSNORM_BWD:
    return check_norm(op, b, k, r, cols);
  case REF_OP_BIAS_GELU_FWD:
  case REF_OP_BIAS_GELU_BWD: {
    std::vector<double> x = in_row(IN_ACT, r, cols, 0, cols), bias = in_row(IN_BIAS, 0, 0, 0, cols);
    const bool bwd = op == REF_OP_BIAS_GELU_BWD;
    std::vector<double> dy = bwd ? in_row(IN_DY, r, cols, 0, cols) : std::vector<double>();
    CHECK_RC(get_bf16(got, bwd ? b->dx + r * cols : b->y + r * cols, cols, err, errlen));
    for (size_t c = 0; c < cols; c++) {
      const double v = x[c] + bias[c];
      if (bwd) // gelu' has terms up to ~|v|^3 e^(-v^2) and 1
        CHECK_RC(k.bf16v("dx", r, c, got[c], ref_bias_gelu_bwd(dy[c], x[c], bias[c]), fabs(dy[c]) * (1 + fabs(v))));
      else
        CHECK_RC(k.bf16v("y", r, c, got[c], ref_bias_gelu_fwd(x[c], bias[c]), 1 + fabs(v)));
    }
    break;
  }
  case REF_OP_SWIGLU_FWD:
  case REF_OP_SWIGLU_BWD: {
    std::vector<double> g = in_row(IN_GLU, r, 2 * cols, 0, cols), u = in_row(IN_GLU, r, 2 * cols, cols, cols);
    if (op == REF_OP_SWIGLU_FWD) {
      CHECK_RC(get_bf16(got, b->y + r * cols, cols, err, errlen));
      for (size_t c = 0; c < cols; c++)
        CHECK_RC(k.bf16v("y", r, c, got[c], ref_swiglu_fwd(g[c], u[c]), fabs(g[c] * u[c])));
    } else {
      std::vector<double> dy = in_row(IN_DY, r, cols, 0, cols);
      CHECK_RC(get_bf16(got, b->dx + r * 2 * cols, cols, err, errlen));
      CHECK_RC(get_bf16(got2, b->dx + r * 2 * cols + cols, cols, err, errlen));
      for (size_t c = 0; c < cols; c++) {
        double dg, du;
        ref_swiglu_bwd(dy[c], g[c], u[c], &dg, &du);
        CHECK_RC(k.bf16v("dgate", r, c, got[c], dg, fabs(dy[c] * u[c]) * (1 + fabs(g[c]))));
        CHECK_RC(k.bf16v("dup", r, c, got2[c], du, fabs(dy[c] * g[c])));
      }
    }
    break;
  }
  case REF_OP_BIAS_DROPOUT_ADD_FWD: {
    std::vector<double> x = in_row(IN_ACT, r, cols, 0, cols), bias = in_row(IN_BIAS, 0, 0, 0, cols);
    std::vector<double> res = in_row(IN_RES, r, cols, 0, cols);
    std::vector<uint8_t> mask(cols);
    CHECK_RC(get_bf16(got, b->y + r * cols, cols, err, errlen));
    CHECK_RC(get(mask.data(), b->mask + r * cols, cols, err, errlen));
    for (size_t c = 0; c < cols; c++) {
      const int keep = ref_dropout_keep(MB_SEED, r * cols + c);
      CHECK_RC(k.value("mask", r, c, mask[c], keep, mask[c] == keep));
      CHECK_RC(k.bf16v("y", r, c, got[c], ref_bias_dropout_add(x[c], bias[c], res[c], keep, REF_DROPOUT_P),
                       fabs(res[c]) + fabs(x[c] + bias[c]) / (1 - REF_DROPOUT_P)));
    }
    break;
  }
  case REF_OP_ROTARY_FWD:
  case REF_OP_ROTARY_BWD: {
    // The angles as the device forms them: the fp32 product of the position
    // and the fp32 inverse frequency; their cos and sin in double.
    const size_t d = MB_HEAD_DIM, h = d / 2;
    std::vector<float> inv(h);
    std::vector<double> theta(h), x = in_row(IN_ROT, r, cols, 0, cols), ref(cols);
    mb_rope_inv_freq(d, REF_ROPE_BASE, inv.data());
    for (size_t j = 0; j < h; j++)
      theta[j] = (float)r * inv[j];
    for (size_t hd = 0; hd < cols / d; hd++)
      (op == REF_OP_ROTARY_FWD ? ref_rotary_fwd : ref_rotary_bwd)(&x[hd * d], theta.data(), d, &ref[hd * d]);
    CHECK_RC(get_bf16(got, b->y + r * cols, cols, err, errlen));
    for (size_t c = 0; c < cols; c++) {
      const size_t pair = c % d < h ? c + h : c - h;
      CHECK_RC(k.bf16v("y", r, c, got[c], ref[c], fabs(x[c]) + fabs(x[pair])));
    }
    break;
  }
  case REF_OP_FP8_CAST: {
    // Exact: x scale is exact (a power-of-two scale), and the conversion is
    // round-to-nearest-even with saturation on both sides.  The transpose
    // holds the same codes; values are compared (so -0 equals +0).
    std::vector<uint8_t> f8(cols), f8t(cols);
    CHECK_RC(get(f8.data(), b->f8 + r * cols, cols, err, errlen));
    CUDA_OK(cudaMemcpy2D(f8t.data(), 1, b->f8t + r, rows, 1, cols, cudaMemcpyDeviceToHost));
    for (size_t c = 0; c < cols; c++) {
      const size_t i = r * cols + c;
      const double x = i == b->planted ? CAST_PLANTED : host_in(IN_CAST, i);
      const double want = ref_e4m3_to_double(ref_fp8_quantize(x, CAST_SCALE));
      const double g = ref_e4m3_to_double(f8[c]), gt = ref_e4m3_to_double(f8t[c]);
      CHECK_RC(k.value("cast", r, c, g, want, g == want));
      CHECK_RC(k.value("transpose", c, r, gt, want, gt == want));
    }
    break;
  }
  case REF_OP_CROSS_ENTROPY_FWD:
  case REF_OP_CROSS_ENTROPY_BWD: {
    std::vector<double> x = in_row(IN_LOGIT, r, cols, 0, cols), ref(cols);
    const long long t = host_target(r, 2 * cols);
    const long long local = t < (long long)cols ? t : -1;
    RefXentRow st, dev;
    float m = 0, s = 0, l = 0;
    ref_xent_fwd(x.data(), cols, local, &st);
    CHECK_RC(get(&m, b->rmax + r, sizeof m, err, errlen));
    CHECK_RC(get(&s, b->rsum + r, sizeof s, err, errlen));
    CHECK_RC(get(&l, b->loss + r, sizeof l, err, errlen));
    // The max is exact; the sum of exponentials carries fp32 rounding of
    // ~9 operations per chunk sequentially per thread (exp2f's 2 ulps, the
    // rescalings) and the merge tree: 2^-22 (n + 32) relative, n the
    // sequential count, is a factor 4 above it.  The loss adds log's
    // rounding and that of x_t - max.
    const double seq = 9.0 * ((cols / 8 + xent_threads(cols) - 1) / xent_threads(cols)) + 32;
    const double tol_s = 0x1p-22 * seq;
    CHECK_RC(k.value("max", r, 0, m, st.max, m == st.max));
    CHECK_RC(k.value("sum_exp", r, 0, s, st.sum_exp, fabs(s - st.sum_exp) <= tol_s * st.sum_exp));
    CHECK_RC(k.value("loss", r, 0, l, st.loss,
                     fabs(l - st.loss) <= tol_s + 0x1p-21 * (fabs(log(st.sum_exp)) + fabs(st.loss) + 1)));
    if (op == REF_OP_CROSS_ENTROPY_FWD)
      break;
    // The gradient from the statistics the kernel read (checked above).
    dev.max = m;
    dev.sum_exp = s;
    dev.loss = l;
    const double dl = host_dloss(r);
    ref_xent_bwd(x.data(), cols, local, &dev, dl, ref.data());
    CHECK_RC(get_bf16(got, b->dx + r * cols, cols, err, errlen));
    for (size_t c = 0; c < cols; c++)
      CHECK_RC(k.bf16v("grad", r, c, got[c], ref[c], fabs(dl) * (fabs(ref[c] / dl) + ((long long)c == local))));
    break;
  }
  default:
    return failf(err, errlen, "membound: op %d has no check", op);
  }
done:
  return rc;
}

// 16 rows: the first, the last and 14 drawn ones; the columns of the norm
// backwards; fp8_cast's amax and scale_inv.
static int mb_check(int op, const MbBufs *b, size_t rows, size_t cols, const Check &k) {
  char *err = k.err;
  size_t errlen = k.errlen;
  int rc = 0;
  for (unsigned p = 0; p < 16; p++) {
    const size_t r = p == 0 ? 0 : p == 15 ? rows - 1 : mix(900 + p) % rows;
    CHECK_RC(check_row(op, b, k, r, rows, cols));
  }
  if (op == REF_OP_LAYERNORM_BWD || op == REF_OP_RMSNORM_BWD)
    CHECK_RC(check_norm_columns(op, b, k, rows, cols));
  if (op == REF_OP_FP8_CAST) {
    float amax = 0, sinv = 0;
    CHECK_RC(get(&amax, b->amax, sizeof amax, err, errlen));
    CHECK_RC(get(&sinv, b->scale_inv, sizeof sinv, err, errlen));
    CHECK_RC(k.value("amax", 0, 0, amax, fabsf(CAST_PLANTED), amax == fabsf(CAST_PLANTED)));
    CHECK_RC(k.value("scale_inv", 0, 0, sinv, 1.0 / CAST_SCALE, sinv == 1.0f / CAST_SCALE));
  }
done:
  return rc;
}

// amax must cover every element, which one planted maximum checks only
// where it is planted: 32 more runs, each planting a larger magnitude
// (5.125, 5.25, ..., 9, alternating signs, exact in bf16) at a
// pseudo-random element, which must become the (accumulated) amax.  A
// reduction that drops a fraction f of the elements escapes with
// probability (1 - f)^32.
static int check_amax(MbBufs *b, size_t rows, size_t cols, cudaStream_t s, const Check &k) {
  char *err = k.err;
  size_t errlen = k.errlen;
  int rc = 0;
  for (unsigned trial = 0; trial < 32; trial++) {
    const float v = (trial % 2 ? -1.f : 1.f) * (5.125f + 0.125f * trial);
    const bf16 h = __float2bfloat16(v);
    const size_t at = (size_t)(((uint64_t)mix(3000 + trial) << 32 | mix(4000 + trial)) % (rows * cols));
    float amax = 0;
    CUDA_OK(cudaMemcpy(b->x + at, &h, sizeof h, cudaMemcpyHostToDevice));
    CUDA_OK(mb_run(REF_OP_FP8_CAST, b, rows, cols, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CHECK_RC(get(&amax, b->amax, sizeof amax, err, errlen));
    CHECK_RC(k.value("amax", at / cols, at % cols, amax, fabsf(v), amax == fabsf(v)));
  }
done:
  return rc;
}

// reference.c's twins of gpu_common.cuh's generator and of cuda_bf16.h's
// rounding agree here, or no check can be trusted.
static int twins_agree(char *err, size_t errlen) {
  for (uint64_t i = 0; i < 4096; i++) {
    const uint64_t key = i * 0x9e3779b97f4a7c15ull;
    const float u = urand(i % 7, key);
    if (ref_mix(key) != mix(key) || ref_urand(i % 7, key) != u ||
        ref_bf16(37.0f * u) != to_f(__float2bfloat16(37.0f * u)))
      return failf(err, errlen, "membound: reference.c's twins of mix/urand/bf16 disagree with CUDA's at %llu",
                   (unsigned long long)i);
  }
  return 0;
}

} // namespace

extern "C" int calib_gpu_membound(int device, const char *name, unsigned long long rows, unsigned long long cols,
                                  CalibGpuTiming *t, char *err, size_t errlen) {
  int rc = 0;
  const int op = ref_membound_op(name);
  cudaStream_t s = nullptr;
  MbBufs b;
  const Check k = {name, rows, cols, err, errlen};
  auto run = [&]() -> int {
    cudaError_t e = mb_run(op, &b, (size_t)rows, (size_t)cols, s);
    return e == cudaSuccess ? 0 : fail(err, errlen, __FILE__, __LINE__, name, cudaGetErrorString(e));
  };
  if (op < 0) {
    std::string names;
    for (int i = 0; i < REF_N_OPS; i++)
      names += std::string(i ? ", " : "") + ref_membound_op_name(i);
    return failf(err, errlen, "membound: unknown op '%s' (one of %s)", name ? name : "(null)", names.c_str());
  }
  if (const char *why = mb_shape_error(op, (size_t)rows, (size_t)cols, MB_HEAD_DIM))
    return failf(err, errlen, "membound %s %llux%llu: %s", name, rows, cols, why);
  CHECK_RC(twins_agree(err, errlen));
  CUDA_OK(cudaSetDevice(device));
  CUDA_OK(cudaStreamCreate(&s));
  CHECK_RC(mb_setup(op, &b, (size_t)rows, (size_t)cols, s, err, errlen));
  CHECK_RC(run());
  CUDA_OK(cudaStreamSynchronize(s));
  CHECK_RC(mb_check(op, &b, (size_t)rows, (size_t)cols, k));
  if (op == REF_OP_FP8_CAST)
    CHECK_RC(check_amax(&b, (size_t)rows, (size_t)cols, s, k));
  CHECK_RC(time_op(s, t, run, err, errlen));
done:
  mb_free(&b);
  if (s)
    cudaStreamDestroy(s);
  return rc;
}
