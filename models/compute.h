/* ptdsim — compute cost of kernels on a device profile.
 *
 * GEMM ("tile and wave quantization"): cuBLAS splits C = A B (M x N, inner
 * dimension K) into output tiles of tm x tn, one thread block each, run in
 * waves over the SMs.  With T = batch * ceil(M/tm) * ceil(N/tn) tiles the
 * useful share of the launched work is
 *     q = (batch M N) / (ceil(T / SMs) * SMs * tm * tn),
 * and short inner loops waste time in prologue and epilogue, K / (K + k_half).
 * A tile also needs its operands: each step of its K loop brings tm + tn
 * rows of fp16 values from L2 into shared memory for 2 tm tn FLOPs, an
 * arithmetic intensity I = tm tn / (tm + tn) FLOP/byte, and all SMs together
 * draw at most B bytes/s from L2 (the profile's gemm.tile_bandwidth_GBps), so
 * a tile reaches at most the share f = min(1, I B / peak) of the peak rate
 * (a roofline per tile: 64 x 64 tiles on A100, I = 32, reach 74%; 128 x 128
 * tiles are compute-bound).
 * Time = launch + max(2 batch M N K / (peak * e_max * f * q * K/(K+k_half)),
 *                     bytes / achieved bandwidth), over the best tile.
 * Memory-bound kernels: launch + bytes / (HBM * efficiency).
 */
#pragma once

#include "profile.h"

typedef struct {
  guint64 batch, m, n, k;
} ModelGemm;

/* f of tile i of the profile (1 when the profile gives no tile bandwidth). */
double model_tile_efficiency(const ModelProfile *p, guint i);
/* Seconds for one (batched) fp16 GEMM. */
double model_gemm_time_s(const ModelProfile *p, const ModelGemm *g);
/* The same GEMM with FP8 operands (Transformer Engine on Hopper): at the
 * profile's FP8 peak, the same tiles and ceiling efficiency, 1-byte
 * operands (so a tile's operand intensity doubles) and a 2-byte output. */
double model_gemm_fp8_time_s(const ModelProfile *p, const ModelGemm *g);
/* The math part alone, over the best tile, at ceiling efficiency e_max (the
 * profile loader solves for e_max with it). */
double model_gemm_math_time_s(const ModelProfile *p, const ModelGemm *g, double e_max);
/* Achieved share of peak for that GEMM (flops / time / peak). */
double model_gemm_efficiency(const ModelProfile *p, const ModelGemm *g);
double model_gemm_flops(const ModelGemm *g);
/* Seconds for a memory-bound kernel moving `bytes` (read + written). */
double model_memop_time_s(const ModelProfile *p, double bytes);
