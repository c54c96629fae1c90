/* ptdsim-calibrate — where the FP8 scales, amaxes and scale inverses live
 * in device memory: one 16-byte slot each.
 *
 * cuBLASLt refuses an FP8 matmul whose A or B scale pointer
 * (CUBLASLT_MATMUL_DESC_A_SCALE_POINTER / B_SCALE_POINTER) is not 16-byte
 * aligned: cublasLtMatmul returns CUBLAS_STATUS_NOT_SUPPORTED although the
 * heuristic found an algorithm (measured on an H100 with cuBLASLt 13.1,
 * calibrate/measurements/fp8-scale-alignment.txt: a B scale 4 bytes after
 * the A scale fails, 16 or 64 bytes after it runs).  Transformer Engine
 * never meets this because each tensor's scale, amax and scale_inv are
 * separate tensors (torch allocations, 512-byte aligned).  Here they share
 * one device array, so every value gets its own 16-byte slot: the layouts
 * below, used by the GEMM room (gpu_gemmlt.cu) and the modern layer
 * (gpu_layer.cu), and checked without a GPU by tests/test_reference.c.
 *
 * Plain C, no CUDA: the unit tests include it too.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The alignment cuBLASLt needs of a scale pointer, and a slot's floats. */
#define CALIB_FP8_ALIGN 16
#define CALIB_FP8_SLOT_FLOATS (CALIB_FP8_ALIGN / sizeof(float))

/* NULL (no scale) or a multiple of 16 bytes. */
static inline int calib_fp8_aligned(const void *p) {
  return (uintptr_t)p % CALIB_FP8_ALIGN == 0;
}

/* The timed GEMM's two dequantization factors: A's slot, then B's. */
enum { CALIB_GEMMLT_SCALE_A, CALIB_GEMMLT_SCALE_B, CALIB_GEMMLT_N_SCALES };
static inline size_t calib_gemmlt_scale_offset(int which) {
  return (size_t)which * CALIB_FP8_SLOT_FLOATS;
}
#define CALIB_GEMMLT_SCALE_FLOATS (CALIB_GEMMLT_N_SCALES * CALIB_FP8_SLOT_FLOATS)

/* The modern layer's casts (gpu_layer.cu's C_LN1 .. C_DQKV): the forward's
 * four GEMM inputs and the backward's four output gradients. */
#define CALIB_LAYER_FP8_CASTS 8

/* A cast's three values, as Transformer Engine's delayed scaling keeps them:
 * the quantization scale, the running amax, and scale_inv = 1 / scale (the
 * factor cuBLASLt dequantizes with). */
typedef enum { CALIB_FP8_SCALE, CALIB_FP8_AMAX, CALIB_FP8_SCALE_INV, CALIB_FP8_N_KINDS } CalibFp8Kind;

/* The layer's float array: all scales (one slot per cast), all amaxes, all
 * scale inverses, then the weights' scale_inv.  Offsets are in floats from
 * the array's start, which must itself be 16-byte aligned (carve() puts it
 * at a multiple of 256 bytes). */
static inline size_t calib_layer_fp8_offset(CalibFp8Kind kind, unsigned cast) {
  return ((size_t)kind * CALIB_LAYER_FP8_CASTS + cast) * CALIB_FP8_SLOT_FLOATS;
}
static inline size_t calib_layer_fp8_weight_offset(void) {
  return (size_t)CALIB_FP8_N_KINDS * CALIB_LAYER_FP8_CASTS * CALIB_FP8_SLOT_FLOATS;
}
static inline size_t calib_layer_fp8_floats(void) {
  return calib_layer_fp8_weight_offset() + CALIB_FP8_SLOT_FLOATS;
}
