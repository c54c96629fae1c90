// ptdsim-calibrate — the memory-bound kernels of gpu_membound.cu as launch
// functions, for the rooms that run them inside a layer (gpu_layer.cu).  No
// timing and no checks here: calib_gpu_membound checks every kernel against
// reference.c before it times it.  CUDA C++ only.
//
// Common rules:
//   - tensors are row-major bf16 (__nv_bfloat16) of rows x cols, accessed 16
//     bytes (8 values) at a time: cols must be a multiple of 8 and every
//     pointer 16-byte aligned (cudaMalloc's are); per-row statistics are
//     fp32, masks 1 byte a value, FP8 E4M3 one byte;
//   - each function enqueues its kernel(s) on `s` and returns
//     cudaErrorInvalidValue for a shape it cannot run (mb_shape_error says
//     why), otherwise cudaGetLastError() of the launch;
//   - a `bias` may be NULL (no bias: Llama's linear layers);
//   - inputs and outputs never alias.
// The mathematics of each is reference.h's, in fp32 with bf16 rounding of
// the outputs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "../measure/reference.h"

// One-line reason why op (a RefMemboundOp) cannot run on rows x
// cols (head_dim: rotary's head size), or NULL when it can.
const char *mb_shape_error(int op, size_t rows, size_t cols, size_t head_dim);

// --- norms: one row per group of threads, held in registers ---
// Forward: y = (x - mean) rstd gamma + beta (layernorm) or x rstd gamma
// (RMSNorm), saving the fp32 mean (layernorm) and rstd of each row for the
// backward.  cols <= 65536.
cudaError_t mb_layernorm_fwd(const __nv_bfloat16 *x, const __nv_bfloat16 *gamma, const __nv_bfloat16 *beta,
                             __nv_bfloat16 *y, float *mean, float *rstd, size_t rows, size_t cols, float eps,
                             cudaStream_t s);
cudaError_t mb_rmsnorm_fwd(const __nv_bfloat16 *x, const __nv_bfloat16 *gamma, __nv_bfloat16 *y, float *rstd,
                           size_t rows, size_t cols, float eps, cudaStream_t s);
// Backward (cols <= 16384): dx from x, dy and the forward's statistics; the
// fp32 dgamma (and dbeta) column sums through per-row-group partial sums in
// `workspace` (mb_norm_bwd_workspace bytes for this device and shape) and a
// second, small kernel that adds them up.
cudaError_t mb_norm_bwd_workspace(size_t rows, size_t cols, int rms, size_t *bytes);
cudaError_t mb_layernorm_bwd(const __nv_bfloat16 *x, const __nv_bfloat16 *dy, const float *mean, const float *rstd,
                             const __nv_bfloat16 *gamma, __nv_bfloat16 *dx, float *dgamma, float *dbeta,
                             void *workspace, size_t rows, size_t cols, cudaStream_t s);
cudaError_t mb_rmsnorm_bwd(const __nv_bfloat16 *x, const __nv_bfloat16 *dy, const float *rstd,
                           const __nv_bfloat16 *gamma, __nv_bfloat16 *dx, float *dgamma, void *workspace, size_t rows,
                           size_t cols, cudaStream_t s);

// --- element-wise ---
// y = gelu(x + bias), tanh form; dx = gelu'(x + bias) dy.  bias: cols values.
cudaError_t mb_bias_gelu_fwd(const __nv_bfloat16 *x, const __nv_bfloat16 *bias, __nv_bfloat16 *y, size_t rows,
                             size_t cols, cudaStream_t s);
cudaError_t mb_bias_gelu_bwd(const __nv_bfloat16 *dy, const __nv_bfloat16 *x, const __nv_bfloat16 *bias,
                             __nv_bfloat16 *dx, size_t rows, size_t cols, cudaStream_t s);
// in: rows x 2 cols, each row [gate | up] (Megatron's fc1 output); y: rows x
// cols = silu(gate) up; din: rows x 2 cols, [dgate | dup].
cudaError_t mb_swiglu_fwd(const __nv_bfloat16 *in, __nv_bfloat16 *y, size_t rows, size_t cols, cudaStream_t s);
cudaError_t mb_swiglu_bwd(const __nv_bfloat16 *dy, const __nv_bfloat16 *in, __nv_bfloat16 *din, size_t rows,
                          size_t cols, cudaStream_t s);
// y = residual + dropout(x + bias), p = REF_DROPOUT_P, and mask[i] = kept,
// the keep decision of element i being ref_dropout_keep(seed, i).
cudaError_t mb_bias_dropout_add_fwd(const __nv_bfloat16 *x, const __nv_bfloat16 *bias,
                                    const __nv_bfloat16 *residual, __nv_bfloat16 *y, uint8_t *mask, size_t rows,
                                    size_t cols, uint64_t seed, cudaStream_t s);

// --- rotary, rotate-half ---
// x: rows x cols with rows the tokens in Megatron-Core's [s, b] order (the
// position of row r is r / batch) and cols = heads x head_dim (head_dim a
// multiple of 16); inv_freq: head_dim / 2 device floats from
// mb_rope_inv_freq.  backward != 0 rotates by -theta (the gradient).
void mb_rope_inv_freq(size_t head_dim, double base, float *inv_freq /* host, head_dim / 2 */);
cudaError_t mb_rotary(const __nv_bfloat16 *x, const float *inv_freq, __nv_bfloat16 *y, size_t rows, size_t cols,
                      size_t head_dim, size_t batch, int backward, cudaStream_t s);

// --- FP8 cast with transpose, Transformer Engine's cast_transpose ---
// out = e4m3(x scale) (rows x cols) and out_t its transpose (cols x rows),
// *amax = max(*amax, max |x|) (atomic; zero it to start a new history
// entry), *scale_inv = 1 / scale; scale, amax, scale_inv: device floats,
// each 16-byte aligned (else cudaErrorMisalignedAddress, nothing launched).
// rows and cols multiples of 16.
cudaError_t mb_fp8_cast_transpose(const __nv_bfloat16 *x, const float *scale, uint8_t *out, uint8_t *out_t,
                                  float *amax, float *scale_inv, size_t rows, size_t cols, cudaStream_t s);

// --- vocabulary-parallel cross entropy, one shard ---
// logits: rows x cols, the shard holding vocabulary ids [vocab_start,
// vocab_start + cols); target: rows global ids.  Forward, one pass with the
// online max and sum of exponentials: row_max, row_sum (of exp(x - max)) and
// loss per row, fp32.  Backward: grad = dloss (softmax - one-hot), bf16,
// from the forward's statistics (dloss: rows floats, or NULL for 1).
cudaError_t mb_xent_fwd(const __nv_bfloat16 *logits, const int64_t *target, long long vocab_start, float *row_max,
                        float *row_sum, float *loss, size_t rows, size_t cols, cudaStream_t s);
cudaError_t mb_xent_bwd(const __nv_bfloat16 *logits, const int64_t *target, long long vocab_start,
                        const float *row_max, const float *row_sum, const float *dloss, __nv_bfloat16 *grad,
                        size_t rows, size_t cols, cudaStream_t s);
