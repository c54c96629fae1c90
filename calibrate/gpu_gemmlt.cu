// ptdsim-calibrate — GEMMs through cuBLASLt as NVIDIA Transformer Engine
// issues them on Hopper (interface: calib_gpu_gemmlt in gpu.h; the internal
// LtGemm API in gpu_gemmlt.cuh).
//
// What this room measures and why: the three GEMMs of every Linear layer of
// a transformer trained with TE, at the shapes plan.c lists, in bf16 and in
// FP8.  Column-major, as cuBLASLt sees TE's row-major tensors (plan.c,
// add_linear): the forward y = x W^T runs TN (m = out, n = tokens,
// k = in), the input gradient dx = dy W runs NN (m = in, n = tokens,
// k = out) and the weight gradient dW = dy^T x runs NT (m = in, n = out,
// k = tokens).  The cuBLAS GEMMs of gpu.cu are the 2021 Megatron path; these
// are today's (cuBLASLt, FP8 tensor cores, TE's algorithm choice), so the
// simulator's GEMM model is fitted to what training runs now.
//
// Facts from Transformer Engine (github.com/NVIDIA/TransformerEngine,
// transformer_engine/common/gemm/cublaslt_gemm.cu, cublas_gemm() and
// CanonicalizeGemmInput(); read at commit d0067d0d):
// - compute type CUBLAS_COMPUTE_32F and scale type CUDA_R_32F for bf16 and
//   FP8 inputs; TRANSA / TRANSB set on the matmul descriptor; C is D's
//   buffer and layout with beta = 0 (no accumulation into the output);
//   epilogue CUBLASLT_EPILOGUE_DEFAULT when there is no bias or GeLU fusion
//   (a Linear with a bias adds CUBLASLT_EPILOGUE_BIAS, not measured here).
// - FP8 with per-tensor ("tensor scaling") recipes: FP8 A and B, their
//   scale inverses as CUBLASLT_MATMUL_DESC_A_SCALE_POINTER /
//   B_SCALE_POINTER, the scale mode CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F
//   (cuBLAS 12.8 and later), a bf16 output with no D scale or amax.  Both
//   are E4M3 here; TE's default format HYBRID
//   (transformer_engine/common/recipe/__init__.py) stores gradients in E5M2,
//   so its dgrad and wgrad GEMMs take one E5M2 operand (B, dy), at the same
//   FP8 tensor-core rate.
// - CUBLASLT_MATMUL_DESC_FAST_ACCUM = !use_split_accumulator for FP8.  TE's
//   defaults (transformer_engine/pytorch/module/base.py _2X_ACC_FPROP =
//   False, _2X_ACC_DGRAD = _2X_ACC_WGRAD = True; the same in the recipes'
//   MMParams, transformer_engine/common/recipe/__init__.py) turn fast
//   accumulation on for the forward GEMM only.  calib_gpu_gemmlt follows the
//   layout: TN (the forward) with fast accumulation, NN and NT (the
//   gradients) without.
// - FP8 on Hopper is TN only: nvte_is_non_tn_fp8_gemm_supported()
//   (transformer_engine/common/transformer_engine.cpp) is true only for
//   compute capability 10.x, 11.x and 13 and later; elsewhere
//   CanonicalizeGemmInput swaps a non-transposed A or a transposed B for its
//   "column-wise" copy (the transpose TE's cast_transpose writes) and runs
//   TN.  TE also requires lda and ldb to be multiples of 16 for FP8 ("Caller
//   must pad").
// - cublasLtMatmulAlgoGetHeuristic asked for one result with
//   CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES set to the workspace size, and
//   that first result is run; the workspace is 32 MiB on Hopper
//   (gpu_gemmlt.cuh, LT_WORKSPACE_BYTES).  TE also sets the minimum
//   alignment preferences to its pointers' alignment: 256 bytes for
//   cudaMalloc'd buffers, cuBLASLt's default, which is what is assumed here.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fp8_slots.h"
#include "gemm_index.h"
#include "gpu.h"
#include "gpu_common.cuh"
#include "gpu_gemmlt.cuh"

// --- the tile of an algorithm ---

// cublasLtMatmulTile_t of the installed cublasLt.h (cuBLAS 13.1, CUDA 13.0):
// CUBLASLT_MATMUL_TILE_<m>x<n> = 1, 2, ... in this order; 0 is
// CUBLASLT_MATMUL_TILE_UNDEFINED.  The values are part of cuBLASLt's ABI (new
// tiles are appended), so the table indexes by value; a tile id past its end
// (a newer library) reads as undefined.
// clang-format off
#define LT_TILES(X) \
  X(8,8) X(8,16) X(16,8) X(8,32) X(16,16) X(32,8) X(8,64) X(16,32) X(32,16) X(64,8) X(32,32) X(32,64) X(64,32) \
  X(32,128) X(64,64) X(128,32) X(64,128) X(128,64) X(64,256) X(128,128) X(256,64) X(64,512) X(128,256) X(256,128) \
  X(512,64) X(64,96) X(96,64) X(96,128) X(128,160) X(160,128) X(192,128) X(128,192) X(128,96) X(32,256) X(256,32) \
  X(8,128) X(8,192) X(8,256) X(8,320) X(8,384) X(8,448) X(8,512) X(8,576) X(8,640) X(8,704) X(8,768) X(16,64) \
  X(16,128) X(16,192) X(16,256) X(16,320) X(16,384) X(16,448) X(16,512) X(16,576) X(16,640) X(16,704) X(16,768) \
  X(24,64) X(24,128) X(24,192) X(24,256) X(24,320) X(24,384) X(24,448) X(24,512) X(24,576) X(24,640) X(24,704) \
  X(24,768) X(32,192) X(32,320) X(32,384) X(32,448) X(32,512) X(32,576) X(32,640) X(32,704) X(32,768) X(40,64) \
  X(40,128) X(40,192) X(40,256) X(40,320) X(40,384) X(40,448) X(40,512) X(40,576) X(40,640) X(40,704) X(40,768) \
  X(48,64) X(48,128) X(48,192) X(48,256) X(48,320) X(48,384) X(48,448) X(48,512) X(48,576) X(48,640) X(48,704) \
  X(48,768) X(56,64) X(56,128) X(56,192) X(56,256) X(56,320) X(56,384) X(56,448) X(56,512) X(56,576) X(56,640) \
  X(56,704) X(56,768) X(64,192) X(64,320) X(64,384) X(64,448) X(64,576) X(64,640) X(64,704) X(64,768) X(72,64) \
  X(72,128) X(72,192) X(72,256) X(72,320) X(72,384) X(72,448) X(72,512) X(72,576) X(72,640) X(80,64) X(80,128) \
  X(80,192) X(80,256) X(80,320) X(80,384) X(80,448) X(80,512) X(80,576) X(88,64) X(88,128) X(88,192) X(88,256) \
  X(88,320) X(88,384) X(88,448) X(88,512) X(96,192) X(96,256) X(96,320) X(96,384) X(96,448) X(96,512) X(104,64) \
  X(104,128) X(104,192) X(104,256) X(104,320) X(104,384) X(104,448) X(112,64) X(112,128) X(112,192) X(112,256) \
  X(112,320) X(112,384) X(120,64) X(120,128) X(120,192) X(120,256) X(120,320) X(120,384) X(128,320) X(128,384) \
  X(136,64) X(136,128) X(136,192) X(136,256) X(136,320) X(144,64) X(144,128) X(144,192) X(144,256) X(144,320) \
  X(152,64) X(152,128) X(152,192) X(152,256) X(152,320) X(160,64) X(160,192) X(160,256) X(168,64) X(168,128) \
  X(168,192) X(168,256) X(176,64) X(176,128) X(176,192) X(176,256) X(184,64) X(184,128) X(184,192) X(184,256) \
  X(192,64) X(192,192) X(192,256) X(200,64) X(200,128) X(200,192) X(208,64) X(208,128) X(208,192) X(216,64) \
  X(216,128) X(216,192) X(224,64) X(224,128) X(224,192) X(232,64) X(232,128) X(232,192) X(240,64) X(240,128) \
  X(240,192) X(248,64) X(248,128) X(248,192) X(256,192) X(264,64) X(264,128) X(272,64) X(272,128) X(280,64) \
  X(280,128) X(288,64) X(288,128) X(296,64) X(296,128) X(304,64) X(304,128) X(312,64) X(312,128) X(320,64) X(320,128) \
  X(328,64) X(328,128) X(336,64) X(336,128) X(344,64) X(344,128) X(352,64) X(352,128) X(360,64) X(360,128) X(368,64) \
  X(368,128) X(376,64) X(376,128) X(384,64) X(384,128) X(392,64) X(400,64) X(408,64) X(416,64) X(424,64) X(432,64) \
  X(440,64) X(448,64) X(456,64) X(464,64) X(472,64) X(480,64) X(488,64) X(496,64) X(504,64) X(520,64) X(528,64) \
  X(536,64) X(544,64) X(552,64) X(560,64) X(568,64) X(576,64) X(584,64) X(592,64) X(600,64) X(608,64) X(616,64) \
  X(624,64) X(632,64) X(640,64) X(648,64) X(656,64) X(664,64) X(672,64) X(680,64) X(688,64) X(696,64) X(704,64) \
  X(712,64) X(720,64) X(728,64) X(736,64) X(744,64) X(752,64) X(760,64) X(768,64) X(64,16) X(64,24) X(64,40) X(64,48) \
  X(64,56) X(64,72) X(64,80) X(64,88) X(64,104) X(64,112) X(64,120) X(64,136) X(64,144) X(64,152) X(64,160) X(64,168) \
  X(64,176) X(64,184) X(64,200) X(64,208) X(64,216) X(64,224) X(64,232) X(64,240) X(64,248) X(64,264) X(64,272) \
  X(64,280) X(64,288) X(64,296) X(64,304) X(64,312) X(64,328) X(64,336) X(64,344) X(64,352) X(64,360) X(64,368) \
  X(64,376) X(64,392) X(64,400) X(64,408) X(64,416) X(64,424) X(64,432) X(64,440) X(64,456) X(64,464) X(64,472) \
  X(64,480) X(64,488) X(64,496) X(64,504) X(64,520) X(64,528) X(64,536) X(64,544) X(64,552) X(64,560) X(64,568) \
  X(64,584) X(64,592) X(64,600) X(64,608) X(64,616) X(64,624) X(64,632) X(64,648) X(64,656) X(64,664) X(64,672) \
  X(64,680) X(64,688) X(64,696) X(64,712) X(64,720) X(64,728) X(64,736) X(64,744) X(64,752) X(64,760) X(128,8) \
  X(128,16) X(128,24) X(128,40) X(128,48) X(128,56) X(128,72) X(128,80) X(128,88) X(128,104) X(128,112) X(128,120) \
  X(128,136) X(128,144) X(128,152) X(128,168) X(128,176) X(128,184) X(128,200) X(128,208) X(128,216) X(128,224) \
  X(128,232) X(128,240) X(128,248) X(128,264) X(128,272) X(128,280) X(128,288) X(128,296) X(128,304) X(128,312) \
  X(128,328) X(128,336) X(128,344) X(128,352) X(128,360) X(128,368) X(128,376) X(128,392) X(128,400) X(128,408) \
  X(128,416) X(128,424) X(128,432) X(128,440) X(128,448) X(128,456) X(128,464) X(128,472) X(128,480) X(128,488) \
  X(128,496) X(128,504) X(128,512) X(192,8) X(192,16) X(192,24) X(192,32) X(192,40) X(192,48) X(192,56) X(192,72) \
  X(192,80) X(192,88) X(192,96) X(192,104) X(192,112) X(192,120) X(192,136) X(192,144) X(192,152) X(192,160) \
  X(192,168) X(192,176) X(192,184) X(192,200) X(192,208) X(192,216) X(192,224) X(192,232) X(192,240) X(192,248) \
  X(192,264) X(192,272) X(192,280) X(192,288) X(192,296) X(192,304) X(192,312) X(192,320) X(192,328) X(192,336) \
  X(256,8) X(256,16) X(256,24) X(256,40) X(256,48) X(256,56) X(256,72) X(256,80) X(256,88) X(256,96) X(256,104) \
  X(256,112) X(256,120) X(256,136) X(256,144) X(256,152) X(256,160) X(256,168) X(256,176) X(256,184) X(256,200) \
  X(256,208) X(256,216) X(256,224) X(256,232) X(256,240) X(256,248) X(256,256) X(320,8) X(320,16) X(320,24) X(320,32) \
  X(320,40) X(320,48) X(320,56) X(320,72) X(320,80) X(320,88) X(320,96) X(320,104) X(320,112) X(320,120) X(320,136) \
  X(320,144) X(320,152) X(320,160) X(320,168) X(320,176) X(320,184) X(320,192) X(320,200) X(384,8) X(384,16) \
  X(384,24) X(384,32) X(384,40) X(384,48) X(384,56) X(384,72) X(384,80) X(384,88) X(384,96) X(384,104) X(384,112) \
  X(384,120) X(384,136) X(384,144) X(384,152) X(384,160) X(384,168) X(448,8) X(448,16) X(448,24) X(448,32) X(448,40) \
  X(448,48) X(448,56) X(448,72) X(448,80) X(448,88) X(448,96) X(448,104) X(448,112) X(448,120) X(448,128) X(448,136) \
  X(448,144) X(512,8) X(512,16) X(512,24) X(512,32) X(512,40) X(512,48) X(512,56) X(512,72) X(512,80) X(512,88) \
  X(512,96) X(512,104) X(512,112) X(512,120) X(512,128) X(576,8) X(576,16) X(576,24) X(576,32) X(576,40) X(576,48) \
  X(576,56) X(576,72) X(576,80) X(576,88) X(576,96) X(576,104) X(576,112) X(640,8) X(640,16) X(640,24) X(640,32) \
  X(640,40) X(640,48) X(640,56) X(640,72) X(640,80) X(640,88) X(640,96) X(704,8) X(704,16) X(704,24) X(704,32) \
  X(704,40) X(704,48) X(704,56) X(704,72) X(704,80) X(704,88) X(768,8) X(768,16) X(768,24) X(768,32) X(768,40) \
  X(768,48) X(768,56) X(768,72) X(768,80) X(256,512) X(256,1024) X(512,512) X(512,1024)
// clang-format on
#define LT_TILE_DIMS(m, n) {m, n},
static constexpr unsigned short lt_tiles[][2] = {{0, 0}, LT_TILES(LT_TILE_DIMS)};
#define LT_N_TILES (sizeof lt_tiles / sizeof lt_tiles[0])
#if CUBLAS_VERSION >= 130100
// Every entry sits at its enumerator's value (by name: headers before
// cuBLAS 13.1 may lack the later names) ...
#define LT_TILE_CHECK(m, n)                                                                                            \
  static_assert(lt_tiles[CUBLASLT_MATMUL_TILE_##m##x##n][0] == m && lt_tiles[CUBLASLT_MATMUL_TILE_##m##x##n][1] == n,  \
                "lt_tiles is out of step with cublasLtMatmulTile_t");
LT_TILES(LT_TILE_CHECK)
#endif
#if CUBLAS_VERSION == 130100
// ... and, for the header it was written from, none is missing.
static_assert(LT_N_TILES == CUBLASLT_MATMUL_TILE_END, "lt_tiles misses tiles of cublasLtMatmulTile_t");
#endif

// --- LtGemm (gpu_gemmlt.cuh) ---

// nvte_is_non_tn_fp8_gemm_supported's complement, for a GPU with FP8.
static bool lt_fp8_tn_only(int cc) { return !((cc >= 100 && cc < 120) || cc >= 130); }

static const char *lt_dtype(int fp8) { return fp8 ? "fp8 (E4M3)" : "bf16"; }

// cublasLtMatmul refuses an FP8 GEMM whose A or B scale pointer is not
// 16-byte aligned ("the requested functionality is not supported", though
// the heuristic found an algorithm): said before any call, naming the cause.
static int lt_scale_misaligned(unsigned long long m, unsigned long long n, unsigned long long k, const float *a_scale,
                               const float *b_scale, char *err, size_t errlen) {
  return failf(err, errlen,
               "FP8 GEMM %llux%llux%llu: the %s scale pointer %p is not 16-byte aligned, which cuBLASLt refuses; give "
               "each scale a 16-byte slot of its own (fp8_slots.h)",
               m, n, k, calib_fp8_aligned(a_scale) ? "B" : "A", calib_fp8_aligned(a_scale) ? (const void *)b_scale
                                                                                            : (const void *)a_scale);
}

int lt_gemm_create(LtGemm *g, cublasLtHandle_t h, cudaStream_t s, void *workspace, size_t workspace_bytes, int fp8,
                   int fast_accum, int transa, int transb, unsigned long long m, unsigned long long n,
                   unsigned long long k, const float *a_scale, const float *b_scale, char *err, size_t errlen) {
  int rc = 0, dev = 0, major = 0, minor = 0, found = 0;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t res;
  cudaDataType_t in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  cublasOperation_t opa, opb;
  uint64_t ws = workspace_bytes;
  uint32_t tile = 0;
  size_t written = 0;
  cublasStatus_t st;
  memset(g, 0, sizeof *g);
  memset(&res, 0, sizeof res);
  g->fp8 = fp8 != 0;
  g->fast_accum = fp8 && fast_accum;
  g->transa = transa != 0;
  g->transb = transb != 0;
  g->m = m;
  g->n = n;
  g->k = k;
  g->h = h;
  g->s = s;
  g->workspace = workspace;
  g->workspace_bytes = workspace_bytes;
  if (!m || !n || !k)
    return failf(err, errlen, "cuBLASLt GEMM %llux%llux%llu: empty", m, n, k);
  if ((uintptr_t)workspace % 256)
    return failf(err, errlen, "cuBLASLt GEMM: the workspace is not 256-byte aligned");
  if (fp8 && (!calib_fp8_aligned(a_scale) || !calib_fp8_aligned(b_scale)))
    return lt_scale_misaligned(m, n, k, a_scale, b_scale, err, errlen);
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_OK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  if (fp8) {
    if (major * 10 + minor < 89) {
      rc = CALIB_GPU_UNSUPPORTED;
      failf(err, errlen, "FP8 GEMMs need compute capability 8.9 or later (FP8 tensor cores); this GPU is %d.%d", major,
            minor);
      goto done;
    }
    if (lt_fp8_tn_only(major * 10 + minor) && !(g->transa && !g->transb)) {
      g->transa = 1;
      g->transb = 0;
      g->as_tn = 1;
    }
    // lda and ldb, which TE requires to be multiples of 16 for FP8.
    if (calib_gemm_lda(g->transa, m, k) % 16 || calib_gemm_ldb(g->transb, k, n) % 16) {
      rc = CALIB_GPU_UNSUPPORTED;
      failf(err, errlen,
            "FP8 GEMM %llux%llux%llu %c%c: leading dimensions %zu and %zu must be multiples of 16 (TE pads)", m, n, k,
            g->transa ? 'T' : 'N', g->transb ? 'T' : 'N', calib_gemm_lda(g->transa, m, k),
            calib_gemm_ldb(g->transb, k, n));
      goto done;
    }
  }
  opa = g->transa ? CUBLAS_OP_T : CUBLAS_OP_N;
  opb = g->transb ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_OK(cublasLtMatmulDescCreate(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CUBLAS_OK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
  CUBLAS_OK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
  if (fp8) {
    const int8_t fast = (int8_t)g->fast_accum;
    CUBLAS_OK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    g->a_scale = a_scale;
    g->b_scale = b_scale;
    CUBLAS_OK(
        cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g->a_scale, sizeof g->a_scale));
    CUBLAS_OK(
        cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g->b_scale, sizeof g->b_scale));
#if CUBLAS_VERSION >= 120800
    {
      const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
      CUBLAS_OK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode));
      CUBLAS_OK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode));
    }
#endif
  }
  // Stored shapes (rows x cols, leading dimension) as gemm_index.h has them.
  CUBLAS_OK(cublasLtMatrixLayoutCreate(&g->a, in_type, g->transa ? k : m, g->transa ? m : k,
                                       (int64_t)calib_gemm_lda(g->transa, m, k)));
  CUBLAS_OK(cublasLtMatrixLayoutCreate(&g->b, in_type, g->transb ? n : k, g->transb ? k : n,
                                       (int64_t)calib_gemm_ldb(g->transb, k, n)));
  CUBLAS_OK(cublasLtMatrixLayoutCreate(&g->d, CUDA_R_16BF, m, n, (int64_t)m));
  CUBLAS_OK(cublasLtMatmulPreferenceCreate(&pref));
  CUBLAS_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  st = cublasLtMatmulAlgoGetHeuristic(h, g->op, g->a, g->b, g->d, g->d, pref, 1, &res, &found);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED ||
      (st == CUBLAS_STATUS_SUCCESS && (found < 1 || res.state != CUBLAS_STATUS_SUCCESS))) {
    rc = CALIB_GPU_UNSUPPORTED;
    failf(err, errlen, "cuBLASLt has no algorithm for the %s GEMM %llux%llux%llu %c%c on this GPU (%s)", lt_dtype(fp8),
          m, n, k, g->transa ? 'T' : 'N', g->transb ? 'T' : 'N',
          st != CUBLAS_STATUS_SUCCESS ? cublasGetStatusString(st)
          : found < 1                 ? "no heuristic result"
                                      : cublasGetStatusString(res.state));
    goto done;
  }
  CUBLAS_OK(st);
  g->algo = res.algo;
  CUBLAS_OK(cublasLtMatmulAlgoConfigGetAttribute(&g->algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &written));
  if (written == sizeof tile && tile < LT_N_TILES) {
    g->tile_m = lt_tiles[tile][0];
    g->tile_n = lt_tiles[tile][1];
  }
done:
  if (pref)
    cublasLtMatmulPreferenceDestroy(pref);
  if (rc)
    lt_gemm_destroy(g);
  return rc;
}

int lt_gemm_run(LtGemm *g, const void *A, const void *B, __nv_bfloat16 *D, const float *a_scale, const float *b_scale,
                char *err, size_t errlen) {
  int rc = 0;
  const float alpha = 1.0f, beta = 0.0f;
  if (((uintptr_t)A | (uintptr_t)B | (uintptr_t)D) % 256)
    return failf(err, errlen, "cuBLASLt GEMM %llux%llux%llu: A, B and D must be 256-byte aligned", g->m, g->n, g->k);
  if (g->fp8 && (!calib_fp8_aligned(a_scale) || !calib_fp8_aligned(b_scale)))
    return lt_scale_misaligned(g->m, g->n, g->k, a_scale, b_scale, err, errlen);
  if (g->fp8 && a_scale && a_scale != g->a_scale) {
    g->a_scale = a_scale;
    CUBLAS_OK(
        cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g->a_scale, sizeof g->a_scale));
  }
  if (g->fp8 && b_scale && b_scale != g->b_scale) {
    g->b_scale = b_scale;
    CUBLAS_OK(
        cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g->b_scale, sizeof g->b_scale));
  }
  // D = alpha op(A) op(B) + beta C with C = D and beta = 0, as TE calls it.
  CUBLAS_OK(cublasLtMatmul(g->h, g->op, &alpha, A, g->a, B, g->b, &beta, D, g->d, D, g->d, &g->algo, g->workspace,
                           g->workspace_bytes, g->s));
done:
  return rc;
}

void lt_gemm_destroy(LtGemm *g) {
  if (g->a)
    cublasLtMatrixLayoutDestroy(g->a);
  if (g->b)
    cublasLtMatrixLayoutDestroy(g->b);
  if (g->d)
    cublasLtMatrixLayoutDestroy(g->d);
  if (g->op)
    cublasLtMatmulDescDestroy(g->op);
  g->a = g->b = g->d = nullptr;
  g->op = nullptr;
}

// --- the measurement ---

// FP8 data: E4M3 of urand * LT_FP8_A (resp. B), so that the stored values
// use E4M3's normal range rather than its subnormals, with the per-tensor
// dequantization factors 1 / LT_FP8_A and 1 / LT_FP8_B (TE's scale_inv)
// bringing op(A) and op(B) back to [-1, 1).  Powers of two: the host and the
// device compute the same floats before rounding to E4M3, and the
// dequantized values are exact in double.
#define LT_FP8_A 16.0f
#define LT_FP8_B 4.0f

// op(A) or op(B) at storage offset idx, as the GPU reads it (dequantized).
static double lt_input(int fp8, uint64_t seed, size_t idx, float mult) {
  if (fp8)
    return (double)to_f(host_value<__nv_fp8_e4m3>(seed, idx, mult)) / mult;
  return to_f(host_value<__nv_bfloat16>(seed, idx, 1.0f));
}

extern "C" int calib_gpu_gemmlt(int device, int fp8, int transa, int transb, unsigned long long m, unsigned long long n,
                                unsigned long long k, unsigned *tile_m, unsigned *tile_n, CalibGpuTiming *t, char *err,
                                size_t errlen) {
  int rc = 0;
  cudaStream_t s = nullptr;
  cublasLtHandle_t h = nullptr;
  void *A = nullptr, *B = nullptr, *ws = nullptr;
  __nv_bfloat16 *D = nullptr;
  float *scales = nullptr;
  // A's and B's dequantization factors, each in its own 16-byte slot.
  float host_scales[CALIB_GEMMLT_SCALE_FLOATS] = {};
  host_scales[calib_gemmlt_scale_offset(CALIB_GEMMLT_SCALE_A)] = 1.0f / LT_FP8_A;
  host_scales[calib_gemmlt_scale_offset(CALIB_GEMMLT_SCALE_B)] = 1.0f / LT_FP8_B;
  size_t na = (size_t)m * k, nb = (size_t)k * n, nd = (size_t)m * n, esize = fp8 ? 1 : 2;
  LtGemm g;
  memset(&g, 0, sizeof g);
  // Tolerance of one output, on top of 2^-7 |ref| for the bf16 output
  // (round to nearest: 2^-9 relative, with margin) and 1e-3 absolute for
  // results near zero; in units of mag = sum |op(A) op(B)|, which bounds
  // every partial sum:
  // - bf16 inputs, fp32 accumulation: 1e-5 (gpu.cu's bound; fp32 rounding
  //   is 2^-24 per addition).
  // - FP8 without fast accumulation: cuBLASLt adds the tensor cores'
  //   partial sums over short K blocks into fp32.  Hopper's FP8 tensor cores
  //   keep about 14 bits of the accumulator (DeepSeek-AI, DeepSeek-V3
  //   Technical Report, 2024, section 3.3.2), so each block is off by at most
  //   about 2^-13 of its own magnitude: 2^-13 mag in all; 2^-11 leaves 4x.
  // - FP8 with fast accumulation: the whole K sum stays at that precision
  //   (DeepSeek-V3 measures errors near 2% of the result at K = 4096).
  //   With a truncation of up to 2^-13, one per 32-deep FP8 MMA step,
  //   biased the same way, the error is about (k / 32) 2^-14 |partial sum|,
  //   and a partial sum of these zero-mean products is about sqrt(k) / 3
  //   against mag = k / 4: below a third of 2^-9 mag up to k = 65536.  A
  //   wrong element or scale is off by about |ref| ~ sqrt(k) / 3, several
  //   times 2^-9 mag up to k = 65536, and 48 probes catch it.
  double tol_mag = 0;
  auto run = [&]() -> int { return lt_gemm_run(&g, A, B, D, nullptr, nullptr, err, errlen); };
  *tile_m = *tile_n = 0;
  CUDA_OK(cudaSetDevice(device));
  CUDA_OK(cudaStreamCreate(&s));
  CUBLAS_OK(cublasLtCreate(&h));
  CUDA_OK(cudaMalloc(&ws, LT_WORKSPACE_BYTES));
  if (fp8) {
    CUDA_OK(cudaMalloc(&scales, sizeof host_scales));
    CUDA_OK(cudaMemcpy(scales, host_scales, sizeof host_scales, cudaMemcpyHostToDevice));
  }
  // Fast accumulation for the forward (TN) only, as TE's defaults; the
  // layout asked for decides, even where FP8 then runs it as TN.
  CHECK_RC(lt_gemm_create(&g, h, s, ws, LT_WORKSPACE_BYTES, fp8, transa && !transb, transa, transb, m, n, k,
                          scales ? scales + calib_gemmlt_scale_offset(CALIB_GEMMLT_SCALE_A) : nullptr,
                          scales ? scales + calib_gemmlt_scale_offset(CALIB_GEMMLT_SCALE_B) : nullptr, err, errlen));
  *tile_m = g.tile_m;
  *tile_n = g.tile_n;
  tol_mag = !g.fp8 ? 1e-5 : g.fast_accum ? 1.0 / 512 : 1.0 / 2048;
  CUDA_OK(cudaMalloc(&A, na * esize));
  CUDA_OK(cudaMalloc(&B, nb * esize));
  CUDA_OK(cudaMalloc(&D, nd * sizeof *D));
  // A and B are filled in g's storage (TN where FP8 needs it): the same
  // element counts as the layout asked for.
  if (fp8) {
    fill_kernel<__nv_fp8_e4m3><<<grid_for(na), 256, 0, s>>>((__nv_fp8_e4m3 *)A, na, LT_SEED_A, LT_FP8_A);
    fill_kernel<__nv_fp8_e4m3><<<grid_for(nb), 256, 0, s>>>((__nv_fp8_e4m3 *)B, nb, LT_SEED_B, LT_FP8_B);
  } else {
    fill_kernel<__nv_bfloat16><<<grid_for(na), 256, 0, s>>>((__nv_bfloat16 *)A, na, LT_SEED_A, 1.0f);
    fill_kernel<__nv_bfloat16><<<grid_for(nb), 256, 0, s>>>((__nv_bfloat16 *)B, nb, LT_SEED_B, 1.0f);
  }
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaMemsetAsync(D, 0xff, nd * sizeof *D, s)); // NaN: an output left unwritten fails the check
  CHECK_RC(run());
  CUDA_OK(cudaStreamSynchronize(s));
  // Check 48 outputs against a double-precision CPU dot product of the
  // same rounded (for FP8: quantized, then scaled) inputs.
  for (unsigned probe = 0; probe < 48; probe++) {
    size_t i = mix(2000 + probe) % m, j = mix(3000 + probe) % n;
    double ref = 0, mag = 0, got, tol;
    __nv_bfloat16 d;
    for (size_t kk = 0; kk < k; kk++) {
      double a = lt_input(fp8, LT_SEED_A, calib_gemm_a_index(g.transa, m, k, i, kk), LT_FP8_A);
      double b = lt_input(fp8, LT_SEED_B, calib_gemm_b_index(g.transb, k, n, kk, j), LT_FP8_B);
      ref += a * b;
      mag += fabs(a * b);
    }
    CUDA_OK(cudaMemcpy(&d, D + i + j * m, sizeof d, cudaMemcpyDeviceToHost));
    got = to_f(d);
    tol = fabs(ref) / 128 + tol_mag * mag + 1e-3;
    if (!(fabs(got - ref) <= tol)) {
      rc = failf(err, errlen,
                 "cuBLASLt GEMM %llux%llux%llu %s %c%c%s disagrees with the CPU reference at [%zu,%zu]: %g vs %g", m, n,
                 k, lt_dtype(fp8), transa ? 'T' : 'N', transb ? 'T' : 'N', g.as_tn ? " (run as TN)" : "", i, j, got,
                 ref);
      goto done;
    }
  }
  CHECK_RC(time_op(s, t, run, err, errlen));
done:
  lt_gemm_destroy(&g);
  cudaFree(A);
  cudaFree(B);
  cudaFree(D);
  cudaFree(ws);
  cudaFree(scales);
  if (h)
    cublasLtDestroy(h);
  if (s)
    cudaStreamDestroy(s);
  return rc;
}
