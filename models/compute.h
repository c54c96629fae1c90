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
 * profile's FP8 peak with 1-byte operands (so a tile's operand intensity
 * doubles) and a 2-byte output, over the gemm_fp8 block's tiles and ceiling
 * where the profile has one (else the 16-bit model's); with
 * split_accumulation (Transformer Engine's dgrad and wgrad GEMMs, which
 * promote partial sums to fp32) at the profile's share of that rate. */
double model_gemm_fp8_time_s(const ModelProfile *p, const ModelGemm *g, gboolean split_accumulation);
/* The tile the model's best time uses for this GEMM (16-bit, or FP8 with
 * or without split accumulation). */
void model_gemm_best_tile(const ModelProfile *p, const ModelGemm *g, gboolean fp8, gboolean split_accumulation,
                          guint *tile_m, guint *tile_n);
/* The FP8 math alone over the best tile at ceiling efficiency 1 (the
 * profile loader solves gemm_fp8's anchor with it). */
double model_gemm_fp8_math_time_s(const ModelProfile *p, const ModelGemm *g);
/* Flash attention's waves (a profile with attention.forward/backward
 * blocks): `heads` (b a / t) heads of q queries attending causally over kv
 * keys (kv - q of them earlier context), head size d.  The forward runs one
 * thread block per tile_q queries of a head, stepping over tile_kv keys up
 * to the diagonal; the backward one per tile_kv keys, stepping over the
 * tile_q queries that see them, at 2.5 times the work per step (the
 * forward's two GEMMs become five).  A step takes
 * 4 tile_q tile_kv d (x 2.5) / (peak x efficiency / slots) with slots =
 * SMs x ctas_per_sm, a block its cta_overhead plus its steps.  Blocks go in
 * grid order (each head's with growing work) to the first free slot: one
 * wave ends with the longest block; a few waves are list-scheduled exactly;
 * many waves take (W - L) / slots + L for total work W and last block L. */
double model_flash_waves_time_s(const ModelProfile *p, gboolean backward, guint64 heads, guint64 q, guint64 kv,
                                guint64 d);
/* The same, causal or not (every block then walks all of the other side:
 * published benchmarks measure both). */
double model_flash_waves_time_any_s(const ModelProfile *p, gboolean backward, gboolean causal, guint64 heads,
                                    guint64 q, guint64 kv, guint64 d);
/* The math part alone, over the best tile, at ceiling efficiency e_max (the
 * profile loader solves for e_max with it). */
double model_gemm_math_time_s(const ModelProfile *p, const ModelGemm *g, double e_max);
/* Achieved share of peak for that GEMM (flops / time / peak). */
double model_gemm_efficiency(const ModelProfile *p, const ModelGemm *g);
double model_gemm_flops(const ModelGemm *g);
/* Bytes a GEMM reads and writes: its operands at `in_bytes` and its output
 * at `out_bytes` per element. */
double model_gemm_bytes(const ModelGemm *g, double in_bytes, double out_bytes);
/* Seconds for a memory-bound kernel moving `bytes` (read + written), priced
 * as a copy (model_mem_time_s of MODEL_MEM_COPY). */
double model_memop_time_s(const ModelProfile *p, double bytes);
/* The same for a kernel of class `c`: on a profile with a fitted
 * "membound" block, t = gap_c + bytes / bw_c, with bw_c the class's
 * L2-resident bandwidth when the kernel's bytes fit in the L2 cache and its
 * HBM bandwidth otherwise; without one, every class at the profile's copy
 * bandwidth (HBM x memory_efficiency) after kernel_launch_us. */
double model_mem_time_s(const ModelProfile *p, ModelMemClass c, double bytes);
/* The same for Megatron's 2021 kernel of class `c` (the 2021 layer's):
 * the profile's "membound_2021" figures where it has them, else as
 * model_mem_time_s. */
double model_mem_2021_time_s(const ModelProfile *p, ModelMemClass c, double bytes);
const char *model_mem_class_name(ModelMemClass c);
/* The class named `name`, or MODEL_MEM_N. */
ModelMemClass model_mem_class_lookup(const char *name);
