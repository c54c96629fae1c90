// ptdsim-calibrate — cuBLASLt GEMMs as Transformer Engine issues them: the
// internal C++ interface of gpu_gemmlt.cu, for the rooms that run such GEMMs
// untimed inside larger work (the modern layer, gpu_layer.cu).  The timed
// measurement itself is calib_gpu_gemmlt (gpu.h).  CUDA C++ only.
//
// Usage: one LtGemm per GEMM shape, created once on a cublasLt handle and a
// stream with a shared workspace (TE shares one per device and stream too):
//
//   LtGemm g;
//   rc = lt_gemm_create(&g, h, stream, ws, LT_WORKSPACE_BYTES, fp8, fast_accum,
//                       transa, transb, m, n, k, a_scale, b_scale, err, errlen);
//   ... store A and B for g.transa / g.transb (gemm_index.h) ...
//   rc = lt_gemm_run(&g, A, B, D, a_scale, b_scale, err, errlen);  // enqueued on stream
//   lt_gemm_destroy(&g);
#pragma once

#include <cublasLt.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "gpu_common.cuh"

// The workspace cuBLASLt may use, as Transformer Engine sizes it on Hopper:
// get_cublas_workspace_size_bytes() in TE's
// transformer_engine/pytorch/cpp_extensions/gemm.py returns 32 MiB (plus
// 1 KiB for NVFP4's scales and alignment, not used here) for compute
// capability 9.0 and later, 4 MiB before.  This harness offers 32 MiB on
// every GPU.
#define LT_WORKSPACE_BYTES ((size_t)32 << 20)

// The fill_kernel seeds of op(A) and op(B) in calib_gpu_gemmlt's measurement
// (and its CPU check), and in the sustained loop that repeats that GEMM on
// data of the same distribution.
#define LT_SEED_A 61
#define LT_SEED_B 62

// E4M3 in the pseudo-random data helpers of gpu_common.cuh (fill_kernel,
// host_value, to_f): round to nearest even, saturating to +-448, with the same
// cuda_fp8.h conversion on host and device.
template <> __host__ __device__ inline __nv_fp8_e4m3 from_f<__nv_fp8_e4m3>(float v) { return __nv_fp8_e4m3(v); }
__host__ __device__ static inline float to_f(__nv_fp8_e4m3 v) { return (float)v; }

// D[m x n] (bf16, column-major, ld m) = op(A)[m x k] op(B)[k x n], fp32
// accumulation.  Plain data; fields are read-only for callers.
struct LtGemm {
  int fp8;            // 1: E4M3 A and B with per-tensor scales; 0: bf16 A and B
  int fast_accum;     // fp8 only: CUBLASLT_MATMUL_DESC_FAST_ACCUM
  int transa, transb; // the layout cuBLASLt runs: store A and B for these
  int as_tn;          // 1 when fp8 runs TN in place of the layout asked for
  unsigned long long m, n, k;
  unsigned tile_m, tile_n; // the chosen algorithm's tile, 0 x 0 when undefined
  cublasLtHandle_t h;
  cudaStream_t s;
  void *workspace;
  size_t workspace_bytes;
  const float *a_scale, *b_scale; // the scale pointers the descriptor holds
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, d;
  cublasLtMatmulAlgo_t algo;
};

// Describes the GEMM and picks cuBLASLt's first heuristic algorithm for it.
// h, s and the workspace (256-byte aligned, workspace_bytes long) are the
// caller's and must outlive g.  fp8: a_scale and b_scale are device fp32
// per-tensor dequantization factors (TE's scale_inv: op(A) is a_scale times
// the stored E4M3 values); fast_accum as TE sets it (1 for the forward, 0 for
// the gradients); on GPUs whose cuBLASLt FP8 GEMMs take TN only (compute
// capability 8.9, 9.x and 12.x), a layout other than TN runs as TN with the
// same m, n, k: g->transa = 1, g->transb = 0, g->as_tn = 1, and A and B must
// be stored that way (TE keeps transposed FP8 copies of its operands for
// this).  Returns 0; CALIB_GPU_UNSUPPORTED with a one-line reason when the
// GPU has no FP8 tensor cores or cuBLASLt has no algorithm for the GEMM; 1
// on an error.  On a non-zero return g holds nothing to destroy.
int lt_gemm_create(LtGemm *g, cublasLtHandle_t h, cudaStream_t s, void *workspace, size_t workspace_bytes, int fp8,
                   int fast_accum, int transa, int transb, unsigned long long m, unsigned long long n,
                   unsigned long long k, const float *a_scale, const float *b_scale, char *err, size_t errlen);

// Enqueues D = op(A) op(B) on g's stream (D is bf16; A and B are E4M3 or
// bf16 as created).  A, B and D must be 256-byte aligned (cudaMalloc's
// alignment: the heuristic was asked for algorithms assuming it).  fp8: the
// scale pointers replace those of the descriptor when they differ (nullptr:
// keep them).  Not thread-safe for one g.
int lt_gemm_run(LtGemm *g, const void *A, const void *B, __nv_bfloat16 *D, const float *a_scale, const float *b_scale,
                char *err, size_t errlen);

// Releases the descriptors; safe on a zeroed or already destroyed g.
void lt_gemm_destroy(LtGemm *g);
