// ptdsim-calibrate — the modern-layer room: one whole transformer layer as
// Megatron-Core with Transformer Engine (TE) runs it on Hopper, at one
// tensor-parallel rank's shard, without the communication (interface:
// calib_gpu_modern_layer in gpu.h).
//
// What it measures and why.  The other modern rooms time the parts one at a
// time: cuBLASLt GEMMs (gpu_gemmlt.cu), cuDNN's flash attention
// (gpu_attention.cu), the memory-bound kernels (gpu_membound.cu).  The
// simulator adds such parts up along models/layer.c's kernel list; this room
// runs that list back to back on one stream, with the real tensors flowing
// from kernel to kernel, so that the sum can be checked end to end against a
// measured layer: the forward alone, then the recomputation forward and the
// backward after it (time_pair; Megatron's full activation recomputation),
// as calib_gpu_layer times the 2021 layer (gpu.cu).
//
// Shapes.  T = b s tokens; t the tensor-parallel size; per rank np = a / t
// query heads and ng = g / t key/value heads of d = h / a channels, the
// fused QKV width (np + 2 ng) d, the MLP width f / t (Llama: fc1 is
// h -> 2 f / t, [gate | up]).  With sequence parallelism the norms,
// dropouts and residual adds run on the rank's Tsp = T / t tokens; without,
// on all T.  The all-gathers and reduce-scatters (or all-reduces) are not
// run: a GEMM that would read a gathered tensor reads a full T-row buffer
// whose first Tsp rows this rank wrote (the other rows, another rank's, hold
// values from setup or from earlier kernels, all finite and O(1)), and a
// kernel after a reduce-scatter reads the first Tsp rows of the GEMM's
// T-row output.
//
// The kernel list (in order; [FP8] only with fp8; "mine" marks the few
// kernels written here, everything else is the other rooms' or a library's).
// Forward:
//   1  norm 1 (RMSNorm for Llama, LayerNorm for GPT) on Tsp rows
//   2  [FP8] cast + transpose of the QKV GEMM input (T x h) with amax
//   3  QKV GEMM, TN (m = (np + 2 ng) d, n = T, k = h)
//   4  (mine) QKV split into cuDNN's layout, rotary on Q and K for Llama --
//      the model's "rotary embedding of Q and K" slot
//   5  flash attention forward (cuDNN SDPA, causal, grouped-query)
//   6  (mine) context from cuDNN's [b, np, s, d] to [s, b, np d] -- the
//      model's "context to [s, b, h/t]" copy
//   7  [FP8] cast + transpose of the context (T x np d)
//   8  projection GEMM, TN (m = h, n = T, k = np d)
//   9  bias-dropout-add on Tsp rows (GPT: + bias; Llama: dropout-add, no bias)
//  10  norm 2 on Tsp rows
//  11  [FP8] cast + transpose (T x h)
//  12  fc1 GEMM, TN (m = f/t, or 2 f/t for Llama; n = T; k = h)
//  13  bias + GeLU (GPT) or SwiGLU (Llama) on T rows
//  14  [FP8] cast + transpose (T x f/t)
//  15  fc2 GEMM, TN (m = h, n = T, k = f/t)
//  16  bias-dropout-add on Tsp rows (GPT: + bias; Llama: no bias)
// Backward (the incoming gradient is a fixed random Tsp x h tensor):
//   1  (mine) dropout backward of 16: mask multiply, Tsp rows
//   2  [FP8] cast + transpose of the output gradient (T x h)
//   3  fc2 dgrad NN (m = f/t, n = T, k = h), then fc2 wgrad NT (m = f/t,
//      n = h, k = T)
//   4  bias + GeLU backward (GPT) or SwiGLU backward (Llama) on T rows
//   5  [FP8] cast + transpose (T x f/t, or 2 f/t)
//   6  fc1 dgrad NN, fc1 wgrad NT
//   7  norm 2 backward on Tsp rows (dx, and dgamma/dbeta through partial
//      column sums and a second small kernel)
//   8  (mine) residual gradient sum: norm 2's dx + the gradient arriving at
//      the residual
//   9  (mine) dropout backward of 9
//  10  [FP8] cast + transpose (T x h)
//  11  projection dgrad NN, projection wgrad NT
//  12  (mine) output gradient from [s, b, np d] to cuDNN's [b, np, s, d] --
//      the model's "context layout" copy
//  13  flash attention backward (cuDNN; its dot(dO, O) preprocessing and the
//      fp32 dQ accumulator's conversion are inside that one execution)
//  14  (mine) dQ, dK, dV back into the fused [s, b, QKV] gradient, rotary
//      backward (rotation by -theta) on dQ and dK for Llama -- the model's
//      "rotary embedding's gradient" slot
//  15  [FP8] cast + transpose (T x (np + 2 ng) d)
//  16  QKV dgrad NN, QKV wgrad NT
//  17  norm 1 backward on Tsp rows
//  18  (mine) residual gradient sum
// which is models/layer.c's forward() and backward() with flash, fused
// kernels, its rotary and SwiGLU branches, sequence parallelism and its FP8
// casts (one before every forward GEMM and every dgrad, none before a
// wgrad, which reads the casts' transposes), in the same order.
//
// The GEMMs are cuBLASLt's as TE calls them (LtGemm, gpu_gemmlt.cuh): the
// forward TN, dgrad NN and wgrad NT in column-major terms; FP8 (E4M3) with
// per-tensor scales, fast accumulation for the forward only (TE's
// _2X_ACC_FPROP = False, _2X_ACC_DGRAD = _2X_ACC_WGRAD = True,
// transformer_engine/pytorch/module/base.py), and on Hopper every FP8 GEMM
// as TN over the transposed copies that the cast + transpose kernels write
// (TE's CanonicalizeGemmInput, transformer_engine/common/gemm/
// cublaslt_gemm.cu).  The FP8 scales follow TE's delayed scaling
// (transformer_engine/pytorch/fp8.py, _default_sf_compute; reference.h's
// ref_fp8_scale): two untimed forward + backward passes record each cast's
// amax, and each tensor's scale is set to 448 / amax, margin 0; the amaxes
// keep accumulating afterwards (TE's once-per-step amax reduction and scale
// update are not part of a layer).
//
// Weights and gradients.  Every linear layer reads its weight from one
// shared buffer (bf16, or its FP8 codes with one scale), sized for the
// largest weight, as the 2021 layer shares one; every weight gradient is
// written to one other shared buffer, never read, so repetitions cannot
// feed gradients back into the weights.  In FP8 the dgrad reads the weight's
// transpose, which TE keeps as a second FP8 copy made when the weight is
// cast; here the same buffer stands for both (the values are random
// either way; the bytes read are the same).  The weight casts themselves
// run once per optimizer step in TE (cached across micro-batches) and are
// not in the layer.  Weights are uniform in +-0.02 (the 2021 layer's; about
// Megatron's init_method_std), inputs and the incoming gradient uniform in
// +-1, gammas 1 +- 0.1, betas and biases +-0.1, dropout p = 0.1 with fixed
// seeds, rotary base 10000 (reference.h).
//
// Not included: the tensor-parallel communication (all-gathers,
// reduce-scatters, all-reduces) and anything that overlaps it; the
// optimizer; the FP8 amax reduction and scale update; the embedding and the
// logit layer (their own rooms); the GPT linear biases' gradients (column
// sums of the bias-GeLU and dropout gradients, which models/layer.c counts
// only unfused) and the QKV GEMM's bias epilogue (GPT; LtGemm has no bias
// epilogue, and cuBLASLt adds it to the GEMM's output tile in registers).
//
// Where this differs from Megatron-Core with TE (and why):
// - Attention layout.  TE hands cuDNN Q, K, V and O in Megatron's [s, b, h, d]
//   order through strides (qkv_format "sbhd"), so Megatron-Core + TE runs no
//   copy of the context before the projection, nor of the output gradient
//   after it.  The Sdpa object (gpu_attention.cuh) takes contiguous
//   [b, h, s, d] tensors only, so this layer converts: kernels 4 and 6
//   forward, 12 and 14 backward.  Kernels 4 and 14 also apply the rotary
//   embedding (forward and backward) in the same pass, so the bytes moved
//   are close to TE's: for Llama-style grouped-query attention
//   Megatron-Core + TE runs, forward, a copy of Q when reshaping it
//   ([s, b, ng, np/ng d] -> [s, b, np, d] is not a view when ng > 1:
//   megatron/core/transformer/attention.py, get_query_key_value_tensors),
//   TE's fused RoPE on Q and on K (each writing a new contiguous tensor:
//   transformer_engine/pytorch/csrc/extensions/apply_rope.cpp), and a
//   contiguous copy of V (TE's get_qkv_layout finds no layout for a strided V
//   beside contiguous Q and K and calls .contiguous(): transformer_engine/
//   pytorch/attention/dot_product_attention/utils.py); backward, TE's RoPE
//   backward on dQ and dK and one torch.cat of dQ, dK and dV into the QKV
//   gradient (_SplitAlongDim.backward, transformer_engine/pytorch/attention/
//   dot_product_attention/backends.py, when the gradients are not views of
//   one buffer).  Forward this layer moves 4 (Nq + 2 Nkv) + 4 Nq bytes in 2
//   kernels where TE moves the same 8 Nq + 8 Nkv in 4 (4 Nq + 8 Nkv in 3
//   when the rank holds one key/value group, ng = 1, and the reshape of Q is
//   a view); backward 4 Nq + 4 (Nq + 2 Nkv) in 2 where TE moves
//   8 Nq + 12 Nkv in 3 (Nq, Nkv: elements of the Q and of the K shard).  For
//   GPT-style multi-head attention without rotary TE passes the fused QKV
//   tensor to cuDNN as it is ("sbh3d") and writes the gradient the same
//   way: no copies at all, where this layer still runs its four.
// - The GEMMs' outputs are bf16 with beta = 0.  With Megatron's default
//   gradient-accumulation fusion the wgrad GEMMs accumulate into the fp32
//   main_grad (TE's fuse_wgrad_accumulation: fp32 output, beta = 1), reading
//   and writing 4 bytes per weight element instead of writing 2; LtGemm has
//   no such mode.
// - The norms and the casts are separate kernels, as models/layer.c counts
//   them; TE's LayerNormLinear can write the norm's output in FP8 directly.
// - FP8 gradients are E4M3, not TE's E5M2 of the HYBRID format (the same
//   tensor-core rate; LtGemm and the cast take E4M3).
// - The dropout masks and seeds are fixed, so every repetition computes the
//   same values.
//
// The check, before any timing (the kernels themselves are checked in their
// own rooms; here the layer's plumbing and the kernels written here are):
// after one forward, (a) every element of the layer's output (Tsp x h) is
// finite and their RMS is between 0.25 and 50 (the input alone gives
// 1/sqrt(3); the two residual branches add to it); (b) 64 sampled output
// elements equal, to bf16 rounding, reference.h's bias-dropout-add of the
// GPU's own fc2 output, residual and bias, with the keep decision rebuilt on
// the host (and the mask byte agrees); (c) 32 sampled elements of the fc2
// GEMM's output match a double-precision dot product of the GPU's own fc2
// input row (bf16, or its FP8 codes and scale) with the weight rebuilt on
// the host, within gpu_gemmlt.cu's tolerances; (d) 16 sampled heads of
// kernel 4's output match reference.h's rotary of the GPU's QKV GEMM output
// (Q and K; V copied exactly); (e) 16 sampled heads of kernel 6's output
// equal cuDNN's output bit for bit.  Then backward kernel 1 is run alone
// and 32 sampled elements checked (mask multiply), then one backward: (f)
// every element of the input gradient (Tsp x h) is finite, RMS between 0.25
// and 1000; (g) 64 sampled elements equal the sum of their two inputs (the
// last kernel); (h) 16 sampled heads of kernel 14's output match
// reference.h's rotary backward of cuDNN's dQ, dK (dV copied exactly).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "fp8_slots.h"
#include "gpu.h"
#include "gpu_attention.cuh"
#include "gpu_common.cuh"
#include "gpu_gemmlt.cuh"
#include "gpu_membound.cuh"
#include "../measure/reference.h"

#ifndef PTDSIM_NO_CUDNN
#include <cudnn_graph.h>
#endif

typedef __nv_bfloat16 bf16;

namespace {

// --- conventions ---

#define LY_W_SCALE 0.02f        // weights uniform in +-0.02
#define LY_W8_MULT 448.0f       // FP8 weight codes: e4m3(448 u), read back times 0.02 / 448
#define LY_EPS ((float)REF_NORM_EPS)
#define LY_THREADS 256
#define LY_SEED_X 71      // layer input (Tsp x h)
#define LY_SEED_DY 72     // incoming gradient (Tsp x h)
#define LY_SEED_W 73      // weights
#define LY_SEED_GATHER 74 // the rows of the norms' T-row outputs that other ranks would send
#define LY_SEED_PARAM 75  // gammas, betas, biases (seeds 75 .. 81)
#define LY_SEED_DROP1 91  // dropout after the projection
#define LY_SEED_DROP2 92  // dropout after fc2

// The FP8 casts: their scale, amax and scale_inv live in one float array,
// each in a 16-byte slot of its own (fp8_slots.h: cuBLASLt refuses a scale
// pointer that is not 16-byte aligned): L.f8 holds the scales, the amaxes and
// the scale inverses of the C_N casts, then the weights' scale_inv.
enum { C_LN1, C_CTX, C_LN2, C_ACT, C_DFC2, C_DFC1, C_DPROJ, C_DQKV, C_N };
static_assert(C_N == CALIB_LAYER_FP8_CASTS, "fp8_slots.h sizes the layer's casts");

// The twelve GEMMs: forward (TN), then per linear layer dgrad (NN) and wgrad
// (NT) in backward order.
enum { G_QKV, G_PROJ, G_FC1, G_FC2, G_FC2_D, G_FC2_W, G_FC1_D, G_FC1_W, G_PROJ_D, G_PROJ_W, G_QKV_D, G_QKV_W, G_N };

struct Dims {
  size_t h, np, ng, qpg, d, qkv, npd, ffn, up, s, b, T, Tsp, tp, wmax;
  bool llama, fp8, sp;
};

// Device buffers, carved from one allocation (carve()).  Row-major; T-row
// tensors in Megatron's [s, b] token order.
struct Bufs {
  // Tsp x h: input, first residual sum, output, incoming gradient, the
  // residual gradient after norm 2, a norm backward's dx, the input gradient
  bf16 *x, *res1, *out, *dout, *dres1, *tmp, *dx;
  uint8_t *mask1, *mask2;   // Tsp x h, one byte each
  bf16 *ln1, *ln2;          // T x h: norm outputs (GEMM inputs, kept for the wgrads)
  bf16 *scr;                // T x h scratch: projection and fc2 outputs, then dy of fc2, dx of fc1, dy of
                            // the projection, dx of QKV, one after the other
  bf16 *mixed;              // T x qkv: the QKV GEMM's output, and backward the QKV gradient
  bf16 *qkvb, *dqkvb;       // Q, K, V (and dQ, dK, dV) in cuDNN's [b, heads, s, d], one after the other
  bf16 *o, *ctx, *dctx, *dob; // T x np d: cuDNN's output, the context [s, b, np d], its gradient, dO
  bf16 *fc1, *dfc1;         // T x up
  bf16 *act, *dact;         // T x ffn
  float *stats;             // b x np x s: cuDNN's log-sum-exp
  float *mean1, *rstd1, *mean2, *rstd2; // Tsp
  float *dgamma1, *dbeta1, *dgamma2, *dbeta2; // h
  float *inv_freq;          // d / 2
  float *f8;                // calib_layer_fp8_floats(): fp8_slots.h's layout
  bf16 *gamma1, *beta1, *gamma2, *beta2, *bproj, *b1, *b2;
  bf16 *w, *dw;             // the shared weight (bf16 runs) and weight-gradient buffers, wmax elements
  uint8_t *w8;              // the shared FP8 weight (FP8 runs)
  uint8_t *ln1_8, *ln1_8t, *ctx_8, *ctx_8t, *ln2_8, *ln2_8t, *act_8, *act_8t; // forward casts (kept)
  uint8_t *dy_8, *dy_8t;    // the backward's casts, one at a time
  void *norm_ws, *lt_ws;
};

struct Layer {
  Dims D{};
  Bufs B{};
  char label[160] = "";
  int sms = 132;
  size_t norm_ws_bytes = 0;
  cudaStream_t s = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudnnHandle_t dnn = nullptr;
  void *arena = nullptr;
  size_t arena_bytes = 0;
  Sdpa sdpa;
  LtGemm g[G_N] = {};
  std::vector<float> inv_freq; // host copy
  float *scale(int c) const { return B.f8 + calib_layer_fp8_offset(CALIB_FP8_SCALE, c); }
  float *amax(int c) const { return B.f8 + calib_layer_fp8_offset(CALIB_FP8_AMAX, c); }
  float *sinv(int c) const { return B.f8 + calib_layer_fp8_offset(CALIB_FP8_SCALE_INV, c); }
  float *wsinv() const { return B.f8 + calib_layer_fp8_weight_offset(); }
  bf16 *q() const { return B.qkvb; }
  bf16 *k() const { return B.qkvb + D.T * D.np * D.d; }
  bf16 *v() const { return B.qkvb + D.T * (D.np + D.ng) * D.d; }
  bf16 *dq() const { return B.dqkvb; }
  bf16 *dk() const { return B.dqkvb + D.T * D.np * D.d; }
  bf16 *dv() const { return B.dqkvb + D.T * (D.np + D.ng) * D.d; }
};

// Inside functions that return int: record and return.
#define LY_CUDA(call)                                                                                                \
  do {                                                                                                               \
    cudaError_t e_ = (call);                                                                                         \
    if (e_ != cudaSuccess)                                                                                           \
      return fail(err, errlen, __FILE__, __LINE__, #call, cudaGetErrorString(e_));                                   \
  } while (0)
#define LY_RC(expr)                                                                                                  \
  do {                                                                                                               \
    int r_ = (expr);                                                                                                 \
    if (r_)                                                                                                          \
      return r_;                                                                                                     \
  } while (0)

// --- the shape ---

int layer_dims(const CalibGpuLayer *l, Dims *D, char *label, size_t label_len, char *err, size_t errlen) {
  const unsigned g = l->kv_heads ? l->kv_heads : l->heads, f = l->ffn ? l->ffn : 4 * l->hidden;
  snprintf(label, label_len, "%s h=%u a=%u g=%u f=%u s=%u b=%u t=%u %s%s", l->llama ? "llama" : "gpt", l->hidden,
           l->heads, g, f, l->seq, l->micro_batch, l->tp, l->fp8 ? "fp8" : "bf16",
           l->sequence_parallel ? " sp" : "");
  if (!l->hidden || !l->heads || !l->seq || !l->micro_batch || !l->tp || !g || !f)
    return failf(err, errlen, "modern layer %s: every size must be positive", label);
  if (l->hidden % l->heads || l->heads % g || g % l->tp || f % l->tp)
    return failf(err, errlen,
                 "modern layer %s: h must be a multiple of a, a of g, and g and f of t (Megatron's shards)", label);
  D->h = l->hidden;
  D->d = l->hidden / l->heads;
  D->np = l->heads / l->tp;
  D->ng = g / l->tp;
  D->qpg = D->np / D->ng;
  D->qkv = (D->np + 2 * D->ng) * D->d;
  D->npd = D->np * D->d;
  D->ffn = f / l->tp;
  D->up = l->llama ? 2 * D->ffn : D->ffn;
  D->s = l->seq;
  D->b = l->micro_batch;
  D->T = D->s * D->b;
  D->tp = l->tp;
  D->llama = l->llama != 0;
  D->fp8 = l->fp8 != 0;
  D->sp = l->sequence_parallel != 0 && l->tp > 1;
  D->Tsp = D->sp ? D->T / D->tp : D->T;
  D->wmax = std::max({D->qkv * D->h, D->h * D->npd, D->up * D->h, D->h * D->ffn});
  if (D->sp && D->T % D->tp)
    return failf(err, errlen, "modern layer %s: sequence parallelism needs b s to be a multiple of t", label);
  if (D->d % 16)
    return failf(err, errlen,
                 "modern layer %s: the head size %zu must be a multiple of 16 (16-byte accesses of both rotary "
                 "halves)",
                 label, D->d);
  if (D->T > (size_t)INT32_MAX)
    return failf(err, errlen, "modern layer %s: too many tokens", label);
  // What the memory-bound kernels accept (gpu_membound.cuh).
  {
    const int norm_f = D->llama ? REF_OP_RMSNORM_FWD : REF_OP_LAYERNORM_FWD,
              norm_b = D->llama ? REF_OP_RMSNORM_BWD : REF_OP_LAYERNORM_BWD,
              act_f = D->llama ? REF_OP_SWIGLU_FWD : REF_OP_BIAS_GELU_FWD,
              act_b = D->llama ? REF_OP_SWIGLU_BWD : REF_OP_BIAS_GELU_BWD;
    const struct {
      int op;
      size_t rows, cols;
    } uses[] = {{norm_f, D->Tsp, D->h},          {norm_b, D->Tsp, D->h},  {REF_OP_BIAS_DROPOUT_ADD_FWD, D->Tsp, D->h},
                {act_f, D->T, D->ffn},           {act_b, D->T, D->ffn},   {REF_OP_FP8_CAST, D->T, D->h},
                {REF_OP_FP8_CAST, D->T, D->npd}, {REF_OP_FP8_CAST, D->T, D->ffn}, {REF_OP_FP8_CAST, D->T, D->up},
                {REF_OP_FP8_CAST, D->T, D->qkv}};
    for (const auto &u : uses) {
      if (u.op == REF_OP_FP8_CAST && !D->fp8)
        continue;
      const char *why = mb_shape_error(u.op, u.rows, u.cols, D->d);
      if (why) {
        failf(err, errlen, "modern layer %s: %s on %zu x %zu: %s", label, ref_membound_op_name(u.op), u.rows, u.cols,
              why);
        // FP8 needs widths that are multiples of 16 (TE pads; LtGemm says
        // unsupported for the same shapes): skipped, as the gemmlt room does.
        return u.op == REF_OP_FP8_CAST ? CALIB_GPU_UNSUPPORTED : 1;
      }
    }
  }
  return 0;
}

// --- the kernels written here ---

__device__ __forceinline__ void ld8(const bf16 *p, float *f) {
  const uint4 u = *reinterpret_cast<const uint4 *>(p);
  __nv_bfloat162 h2[4];
  memcpy(h2, &u, sizeof u);
#pragma unroll
  for (int k = 0; k < 4; k++) {
    const float2 t = __bfloat1622float2(h2[k]);
    f[2 * k] = t.x;
    f[2 * k + 1] = t.y;
  }
}
__device__ __forceinline__ void st8(bf16 *p, const float *f) {
  __nv_bfloat162 h2[4];
#pragma unroll
  for (int k = 0; k < 4; k++)
    h2[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
  uint4 u;
  memcpy(&u, h2, sizeof u);
  *reinterpret_cast<uint4 *>(p) = u;
}
__device__ __forceinline__ void cp8(bf16 *dst, const bf16 *src) {
  *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(src);
}

// bf16(offset + scale urand(seed, i)).
__global__ void k_fill_affine(bf16 *p, size_t n, uint64_t seed, float scale, float offset) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = __float2bfloat16(offset + scale * urand(seed, i));
}

struct QkvArgs {
  bf16 *mixed, *q, *k, *v;
  const float *inv_freq;
  size_t qkv, s, b;
  unsigned np, ng, qpg, d;
  int rotate;
  float sign; // +1: rotate by theta (forward); -1: by -theta (the gradient)
};

// Kernels 4 (TO_BHSD) and 14 (!TO_BHSD).  One block per token r (position
// r / b, Megatron's [s, b] order).  Each token's row of the fused QKV tensor
// is Megatron-Core's [ng, np/ng + 2, d] (get_query_key_value_tensors: per
// group its np/ng query heads, then its key and its value head); Q, K, V are
// cuDNN's [b, np or ng, s, d].  A thread moves one pair of 16-byte chunks
// (channels j .. j + 7 and j + d/2 .. j + d/2 + 7 of one head), rotating Q
// and K when `rotate`: reference.h's rotate-half form, y1 = x1 cos - x2 sin,
// y2 = x2 cos + x1 sin, the angle of channel j being position x inv_freq[j]
// rounded to fp32 once (as gpu_membound.cu's rotary).
template <bool TO_BHSD> __global__ void k_qkv_layout(QkvArgs a) {
  extern __shared__ float sc[]; // cos of the d/2 angles, then sign x sin
  const size_t r = blockIdx.x, si = r / a.b, bi = r % a.b;
  const unsigned hd2 = a.d / 2, cph = hd2 / 8, items = (a.np + 2 * a.ng) * cph;
  if (a.rotate) {
    for (unsigned j = threadIdx.x; j < hd2; j += blockDim.x) {
      float sn, cs;
      sincosf(__fmul_rn((float)si, a.inv_freq[j]), &sn, &cs);
      sc[j] = cs;
      sc[hd2 + j] = a.sign * sn;
    }
  }
  __syncthreads();
  for (unsigned p = threadIdx.x; p < items; p += blockDim.x) {
    const unsigned slot = p / cph, c = p % cph, grp = slot / (a.qpg + 2), j = slot % (a.qpg + 2);
    bf16 *head;
    if (j < a.qpg)
      head = a.q + ((bi * a.np + grp * a.qpg + j) * a.s + si) * a.d;
    else
      head = (j == a.qpg ? a.k : a.v) + ((bi * a.ng + grp) * a.s + si) * a.d;
    bf16 *row = a.mixed + r * a.qkv + (size_t)slot * a.d;
    const bf16 *src = TO_BHSD ? row : head;
    bf16 *dst = TO_BHSD ? head : row;
    const unsigned o1 = c * 8, o2 = hd2 + c * 8;
    if (a.rotate && j <= a.qpg) {
      float x1[8], x2[8];
      ld8(src + o1, x1);
      ld8(src + o2, x2);
#pragma unroll
      for (int e = 0; e < 8; e++) {
        const float cs = sc[o1 + e], sn = sc[hd2 + o1 + e], a1 = x1[e];
        x1[e] = a1 * cs - x2[e] * sn;
        x2[e] = x2[e] * cs + a1 * sn;
      }
      st8(dst + o1, x1);
      st8(dst + o2, x2);
    } else {
      cp8(dst + o1, src + o1);
      cp8(dst + o2, src + o2);
    }
  }
}

// Kernels 6 (!TO_BHSD: cuDNN's [b, nh, s, d] to [s, b, nh d]) and 12
// (TO_BHSD).  One block per token; a thread copies 16-byte chunks.
template <bool TO_BHSD>
__global__ void k_heads_layout(bf16 *sbhd, bf16 *bhsd, unsigned nh, unsigned d, size_t s, size_t b) {
  const size_t r = blockIdx.x, si = r / b, bi = r % b;
  const unsigned cph = d / 8, items = nh * cph;
  for (unsigned p = threadIdx.x; p < items; p += blockDim.x) {
    const unsigned hd = p / cph, c = p % cph;
    bf16 *x = sbhd + r * nh * d + (size_t)hd * d + c * 8;
    bf16 *y = bhsd + ((bi * nh + hd) * s + si) * d + c * 8;
    if (TO_BHSD)
      cp8(y, x);
    else
      cp8(x, y);
  }
}

// Backward kernels 1 and 9: dx = dy mask / (1 - p), Megatron-Core's
// bias_dropout_add backward (the gradient of dropout's inverted scaling; the
// residual's gradient is dy itself, no kernel).  n8: chunks of 8 values.
__global__ void k_dropout_bwd(const bf16 *__restrict__ dy, const uint8_t *__restrict__ mask, bf16 *__restrict__ dx,
                              size_t n8) {
  const float inv_keep = 1.f / (1.f - (float)REF_DROPOUT_P);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n8; i += (size_t)gridDim.x * blockDim.x) {
    float f[8];
    uint8_t m[8];
    ld8(dy + i * 8, f);
    const uint2 mw = *reinterpret_cast<const uint2 *>(mask + i * 8);
    memcpy(m, &mw, sizeof m);
#pragma unroll
    for (int e = 0; e < 8; e++)
      f[e] = m[e] ? f[e] * inv_keep : 0.f;
    st8(dx + i * 8, f);
  }
}

// Backward kernels 8 and 18: y = a + b (the residual branch's gradient sum
// that autograd runs after a norm's backward).
__global__ void k_add(const bf16 *__restrict__ a, const bf16 *__restrict__ b, bf16 *__restrict__ y, size_t n8) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n8; i += (size_t)gridDim.x * blockDim.x) {
    float fa[8], fb[8];
    ld8(a + i * 8, fa);
    ld8(b + i * 8, fb);
#pragma unroll
    for (int e = 0; e < 8; e++)
      fa[e] += fb[e];
    st8(y + i * 8, fa);
  }
}

unsigned ew_grid(const Layer &L, size_t n8) {
  return (unsigned)std::max<size_t>(1, std::min<size_t>((n8 + LY_THREADS - 1) / LY_THREADS, (size_t)L.sms * 16));
}

cudaError_t qkv_layout(const Layer &L, bool to_bhsd) {
  const Dims &D = L.D;
  QkvArgs a;
  a.mixed = L.B.mixed;
  a.q = to_bhsd ? L.q() : L.dq();
  a.k = to_bhsd ? L.k() : L.dk();
  a.v = to_bhsd ? L.v() : L.dv();
  a.inv_freq = L.B.inv_freq;
  a.qkv = D.qkv;
  a.s = D.s;
  a.b = D.b;
  a.np = (unsigned)D.np;
  a.ng = (unsigned)D.ng;
  a.qpg = (unsigned)D.qpg;
  a.d = (unsigned)D.d;
  a.rotate = D.llama;
  a.sign = to_bhsd ? 1.f : -1.f;
  const size_t items = (D.np + 2 * D.ng) * (D.d / 16);
  const unsigned threads = (unsigned)std::min<size_t>(LY_THREADS, std::max<size_t>(64, (items + 31) / 32 * 32));
  const size_t smem = D.llama ? D.d * sizeof(float) : 0;
  if (to_bhsd)
    k_qkv_layout<true><<<(unsigned)D.T, threads, smem, L.s>>>(a);
  else
    k_qkv_layout<false><<<(unsigned)D.T, threads, smem, L.s>>>(a);
  return cudaGetLastError();
}

cudaError_t heads_layout(const Layer &L, bf16 *sbhd, bf16 *bhsd, bool to_bhsd) {
  const Dims &D = L.D;
  const size_t items = D.np * (D.d / 8);
  const unsigned threads = (unsigned)std::min<size_t>(LY_THREADS, std::max<size_t>(64, (items + 31) / 32 * 32));
  if (to_bhsd)
    k_heads_layout<true><<<(unsigned)D.T, threads, 0, L.s>>>(sbhd, bhsd, (unsigned)D.np, (unsigned)D.d, D.s, D.b);
  else
    k_heads_layout<false><<<(unsigned)D.T, threads, 0, L.s>>>(sbhd, bhsd, (unsigned)D.np, (unsigned)D.d, D.s, D.b);
  return cudaGetLastError();
}

cudaError_t dropout_bwd(const Layer &L, const bf16 *dy, const uint8_t *mask, bf16 *dx) {
  const size_t n8 = L.D.Tsp * L.D.h / 8;
  k_dropout_bwd<<<ew_grid(L, n8), LY_THREADS, 0, L.s>>>(dy, mask, dx, n8);
  return cudaGetLastError();
}

cudaError_t add(const Layer &L, const bf16 *a, const bf16 *b, bf16 *y) {
  const size_t n8 = L.D.Tsp * L.D.h / 8;
  k_add<<<ew_grid(L, n8), LY_THREADS, 0, L.s>>>(a, b, y, n8);
  return cudaGetLastError();
}

// --- memory ---

// Lays the buffers out from `base` (0: only sizes them), each at a multiple
// of 256 bytes (cuBLASLt's alignment for A, B and D); returns the bytes.
size_t carve(Bufs *B, const Dims &D, size_t norm_ws_bytes, uintptr_t base) {
  uintptr_t at = base;
  auto take = [&at](size_t bytes) -> uintptr_t {
    const uintptr_t p = at;
    at += (bytes + 255) / 256 * 256;
    return p;
  };
  const size_t bh = D.Tsp * D.h, Th = D.T * D.h;
#define TAKE(field, type, n) B->field = reinterpret_cast<type *>(take((n) * sizeof(type)))
  TAKE(x, bf16, bh);
  TAKE(res1, bf16, bh);
  TAKE(out, bf16, bh);
  TAKE(dout, bf16, bh);
  TAKE(dres1, bf16, bh);
  TAKE(tmp, bf16, bh);
  TAKE(dx, bf16, bh);
  TAKE(mask1, uint8_t, bh);
  TAKE(mask2, uint8_t, bh);
  TAKE(ln1, bf16, Th);
  TAKE(ln2, bf16, Th);
  TAKE(scr, bf16, Th);
  TAKE(mixed, bf16, D.T * D.qkv);
  TAKE(qkvb, bf16, D.T * D.qkv);
  TAKE(dqkvb, bf16, D.T * D.qkv);
  TAKE(o, bf16, D.T * D.npd);
  TAKE(ctx, bf16, D.T * D.npd);
  TAKE(dctx, bf16, D.T * D.npd);
  TAKE(dob, bf16, D.T * D.npd);
  TAKE(fc1, bf16, D.T * D.up);
  TAKE(dfc1, bf16, D.T * D.up);
  TAKE(act, bf16, D.T * D.ffn);
  TAKE(dact, bf16, D.T * D.ffn);
  TAKE(stats, float, D.T * D.np);
  TAKE(mean1, float, D.Tsp);
  TAKE(rstd1, float, D.Tsp);
  TAKE(mean2, float, D.Tsp);
  TAKE(rstd2, float, D.Tsp);
  TAKE(dgamma1, float, D.h);
  TAKE(dbeta1, float, D.h);
  TAKE(dgamma2, float, D.h);
  TAKE(dbeta2, float, D.h);
  TAKE(inv_freq, float, D.d / 2);
  TAKE(f8, float, calib_layer_fp8_floats());
  TAKE(gamma1, bf16, D.h);
  TAKE(beta1, bf16, D.h);
  TAKE(gamma2, bf16, D.h);
  TAKE(beta2, bf16, D.h);
  TAKE(bproj, bf16, D.h);
  TAKE(b1, bf16, D.ffn);
  TAKE(b2, bf16, D.h);
  TAKE(dw, bf16, D.wmax);
  if (D.fp8) {
    const size_t dy_cols = std::max({D.h, D.up, D.qkv});
    B->w = nullptr;
    TAKE(w8, uint8_t, D.wmax);
    TAKE(ln1_8, uint8_t, Th);
    TAKE(ln1_8t, uint8_t, Th);
    TAKE(ctx_8, uint8_t, D.T * D.npd);
    TAKE(ctx_8t, uint8_t, D.T * D.npd);
    TAKE(ln2_8, uint8_t, Th);
    TAKE(ln2_8t, uint8_t, Th);
    TAKE(act_8, uint8_t, D.T * D.ffn);
    TAKE(act_8t, uint8_t, D.T * D.ffn);
    TAKE(dy_8, uint8_t, D.T * dy_cols);
    TAKE(dy_8t, uint8_t, D.T * dy_cols);
  } else {
    TAKE(w, bf16, D.wmax);
    B->w8 = B->ln1_8 = B->ln1_8t = B->ctx_8 = B->ctx_8t = B->ln2_8 = B->ln2_8t = B->act_8 = B->act_8t = B->dy_8 =
        B->dy_8t = nullptr;
  }
  TAKE(norm_ws, uint8_t, norm_ws_bytes);
  TAKE(lt_ws, uint8_t, LT_WORKSPACE_BYTES);
#undef TAKE
  return (size_t)(at - base);
}

// --- the passes ---

cudaError_t norm_fwd(const Layer &L, const bf16 *x, const bf16 *gamma, const bf16 *beta, bf16 *y, float *mean,
                     float *rstd) {
  const Dims &D = L.D;
  return D.llama ? mb_rmsnorm_fwd(x, gamma, y, rstd, D.Tsp, D.h, LY_EPS, L.s)
                 : mb_layernorm_fwd(x, gamma, beta, y, mean, rstd, D.Tsp, D.h, LY_EPS, L.s);
}

cudaError_t norm_bwd(const Layer &L, const bf16 *x, const bf16 *dy, const float *mean, const float *rstd,
                     const bf16 *gamma, bf16 *dx, float *dgamma, float *dbeta) {
  const Dims &D = L.D;
  return D.llama ? mb_rmsnorm_bwd(x, dy, rstd, gamma, dx, dgamma, L.B.norm_ws, D.Tsp, D.h, L.s)
                 : mb_layernorm_bwd(x, dy, mean, rstd, gamma, dx, dgamma, dbeta, L.B.norm_ws, D.Tsp, D.h, L.s);
}

// A linear layer's forward: [FP8: cast + transpose of its T x cols input,
// with amax] and its TN GEMM, y = x W^T.
int linear_fwd(Layer &L, int gi, int ci, const bf16 *x, size_t cols, uint8_t *x8, uint8_t *x8t, bf16 *y, char *err,
               size_t errlen) {
  if (!L.D.fp8)
    return lt_gemm_run(&L.g[gi], L.B.w, x, y, nullptr, nullptr, err, errlen);
  LY_CUDA(mb_fp8_cast_transpose(x, L.scale(ci), x8, x8t, L.amax(ci), L.sinv(ci), L.D.T, cols, L.s));
  return lt_gemm_run(&L.g[gi], L.B.w8, x8, y, L.wsinv(), L.sinv(ci), err, errlen);
}

// A linear layer's backward from its T x cols output gradient dy: [FP8: cast
// + transpose of dy], dgrad dx = dy W (NN; in FP8 TN over W's transposed
// copy), then wgrad dW = dy^T x (NT; in FP8 TN over the transposes of x, kept
// from its forward cast as x8t with scale index cx, and of dy).
int linear_bwd(Layer &L, int gd, int gw, int cdy, const bf16 *dy, size_t cols, bf16 *dx, const bf16 *x,
               const uint8_t *x8t, int cx, char *err, size_t errlen) {
  Bufs &B = L.B;
  if (!L.D.fp8) {
    LY_RC(lt_gemm_run(&L.g[gd], B.w, dy, dx, nullptr, nullptr, err, errlen));
    return lt_gemm_run(&L.g[gw], x, dy, B.dw, nullptr, nullptr, err, errlen);
  }
  LY_CUDA(mb_fp8_cast_transpose(dy, L.scale(cdy), B.dy_8, B.dy_8t, L.amax(cdy), L.sinv(cdy), L.D.T, cols, L.s));
  LY_RC(lt_gemm_run(&L.g[gd], B.w8, B.dy_8, dx, L.wsinv(), L.sinv(cdy), err, errlen));
  return lt_gemm_run(&L.g[gw], x8t, B.dy_8t, B.dw, L.sinv(cx), L.sinv(cdy), err, errlen);
}

int layer_forward(Layer &L, char *err, size_t errlen) {
  const Dims &D = L.D;
  Bufs &B = L.B;
  LY_CUDA(norm_fwd(L, B.x, B.gamma1, B.beta1, B.ln1, B.mean1, B.rstd1));
  LY_RC(linear_fwd(L, G_QKV, C_LN1, B.ln1, D.h, B.ln1_8, B.ln1_8t, B.mixed, err, errlen));
  LY_CUDA(qkv_layout(L, true));
  LY_RC(L.sdpa.forward(L.q(), L.k(), L.v(), B.o, B.stats, err, errlen));
  LY_CUDA(heads_layout(L, B.ctx, B.o, false));
  LY_RC(linear_fwd(L, G_PROJ, C_CTX, B.ctx, D.npd, B.ctx_8, B.ctx_8t, B.scr, err, errlen));
  LY_CUDA(mb_bias_dropout_add_fwd(B.scr, D.llama ? nullptr : B.bproj, B.x, B.res1, B.mask1, D.Tsp, D.h,
                                  LY_SEED_DROP1, L.s));
  LY_CUDA(norm_fwd(L, B.res1, B.gamma2, B.beta2, B.ln2, B.mean2, B.rstd2));
  LY_RC(linear_fwd(L, G_FC1, C_LN2, B.ln2, D.h, B.ln2_8, B.ln2_8t, B.fc1, err, errlen));
  if (D.llama)
    LY_CUDA(mb_swiglu_fwd(B.fc1, B.act, D.T, D.ffn, L.s));
  else
    LY_CUDA(mb_bias_gelu_fwd(B.fc1, B.b1, B.act, D.T, D.ffn, L.s));
  LY_RC(linear_fwd(L, G_FC2, C_ACT, B.act, D.ffn, B.act_8, B.act_8t, B.scr, err, errlen));
  LY_CUDA(mb_bias_dropout_add_fwd(B.scr, D.llama ? nullptr : B.b2, B.res1, B.out, B.mask2, D.Tsp, D.h, LY_SEED_DROP2,
                                  L.s));
  return 0;
}

int layer_backward(Layer &L, char *err, size_t errlen) {
  const Dims &D = L.D;
  Bufs &B = L.B;
  LY_CUDA(dropout_bwd(L, B.dout, B.mask2, B.scr)); // dy of fc2 (its first Tsp rows)
  LY_RC(linear_bwd(L, G_FC2_D, G_FC2_W, C_DFC2, B.scr, D.h, B.dact, B.act, B.act_8t, C_ACT, err, errlen));
  if (D.llama)
    LY_CUDA(mb_swiglu_bwd(B.dact, B.fc1, B.dfc1, D.T, D.ffn, L.s));
  else
    LY_CUDA(mb_bias_gelu_bwd(B.dact, B.fc1, B.b1, B.dfc1, D.T, D.ffn, L.s));
  LY_RC(linear_bwd(L, G_FC1_D, G_FC1_W, C_DFC1, B.dfc1, D.up, B.scr, B.ln2, B.ln2_8t, C_LN2, err, errlen));
  LY_CUDA(norm_bwd(L, B.res1, B.scr, B.mean2, B.rstd2, B.gamma2, B.tmp, B.dgamma2, B.dbeta2));
  LY_CUDA(add(L, B.tmp, B.dout, B.dres1));
  LY_CUDA(dropout_bwd(L, B.dres1, B.mask1, B.scr)); // dy of the projection
  LY_RC(linear_bwd(L, G_PROJ_D, G_PROJ_W, C_DPROJ, B.scr, D.h, B.dctx, B.ctx, B.ctx_8t, C_CTX, err, errlen));
  LY_CUDA(heads_layout(L, B.dctx, B.dob, true));
  LY_RC(L.sdpa.backward(L.q(), L.k(), L.v(), B.o, B.dob, B.stats, L.dq(), L.dk(), L.dv(), err, errlen));
  LY_CUDA(qkv_layout(L, false)); // into B.mixed: the QKV gradient
  LY_RC(linear_bwd(L, G_QKV_D, G_QKV_W, C_DQKV, B.mixed, D.qkv, B.scr, B.ln1, B.ln1_8t, C_LN1, err, errlen));
  LY_CUDA(norm_bwd(L, B.x, B.scr, B.mean1, B.rstd1, B.gamma1, B.tmp, B.dgamma1, B.dbeta1));
  LY_CUDA(add(L, B.tmp, B.dres1, B.dx));
  return 0;
}

// --- setup ---

int fill_bf16(const Layer &L, bf16 *p, size_t n, uint64_t seed, float scale, float offset, char *err,
              size_t errlen) {
  k_fill_affine<<<grid_for(n), 256, 0, L.s>>>(p, n, seed, scale, offset);
  LY_CUDA(cudaGetLastError());
  return 0;
}

int init_data(Layer &L, char *err, size_t errlen) {
  const Dims &D = L.D;
  Bufs &B = L.B;
  const size_t bh = D.Tsp * D.h, Th = D.T * D.h;
  // Everything NaN first (0xff bytes: bf16, fp32 and E4M3 NaN), so that an
  // output a kernel fails to write fails the check.
  LY_CUDA(cudaMemsetAsync(L.arena, 0xff, L.arena_bytes, L.s));
  LY_RC(fill_bf16(L, B.x, bh, LY_SEED_X, 1.f, 0.f, err, errlen));
  LY_RC(fill_bf16(L, B.dout, bh, LY_SEED_DY, 1.f, 0.f, err, errlen));
  // The norms write their first Tsp rows; the rest of each T-row buffer
  // stands for what the all-gather would bring from the other ranks.
  LY_RC(fill_bf16(L, B.ln1, Th, LY_SEED_GATHER, 1.f, 0.f, err, errlen));
  LY_RC(fill_bf16(L, B.ln2, Th, LY_SEED_GATHER + 1, 1.f, 0.f, err, errlen));
  LY_RC(fill_bf16(L, B.gamma1, D.h, LY_SEED_PARAM, 0.1f, 1.f, err, errlen));
  LY_RC(fill_bf16(L, B.gamma2, D.h, LY_SEED_PARAM + 1, 0.1f, 1.f, err, errlen));
  LY_RC(fill_bf16(L, B.beta1, D.h, LY_SEED_PARAM + 2, 0.1f, 0.f, err, errlen));
  LY_RC(fill_bf16(L, B.beta2, D.h, LY_SEED_PARAM + 3, 0.1f, 0.f, err, errlen));
  LY_RC(fill_bf16(L, B.bproj, D.h, LY_SEED_PARAM + 4, 0.1f, 0.f, err, errlen));
  LY_RC(fill_bf16(L, B.b1, D.ffn, LY_SEED_PARAM + 5, 0.1f, 0.f, err, errlen));
  LY_RC(fill_bf16(L, B.b2, D.h, LY_SEED_PARAM + 6, 0.1f, 0.f, err, errlen));
  if (D.fp8) {
    fill_kernel<__nv_fp8_e4m3><<<grid_for(D.wmax), 256, 0, L.s>>>(reinterpret_cast<__nv_fp8_e4m3 *>(B.w8), D.wmax,
                                                                  LY_SEED_W, LY_W8_MULT);
    LY_CUDA(cudaGetLastError());
  } else {
    fill_kernel<bf16><<<grid_for(D.wmax), 256, 0, L.s>>>(B.w, D.wmax, LY_SEED_W, LY_W_SCALE);
    LY_CUDA(cudaGetLastError());
  }
  {
    // scale 1, amax 0, scale_inv 1, the weights' scale_inv 0.02 / 448;
    // the slots' padding 0.
    std::vector<float> f8(calib_layer_fp8_floats(), 0.f);
    for (int c = 0; c < C_N; c++) {
      f8[calib_layer_fp8_offset(CALIB_FP8_SCALE, c)] = 1.f;
      f8[calib_layer_fp8_offset(CALIB_FP8_SCALE_INV, c)] = 1.f;
    }
    f8[calib_layer_fp8_weight_offset()] = LY_W_SCALE / LY_W8_MULT;
    L.inv_freq.assign(D.d / 2, 0.f);
    mb_rope_inv_freq(D.d, REF_ROPE_BASE, L.inv_freq.data());
    LY_CUDA(cudaMemcpyAsync(B.f8, f8.data(), f8.size() * sizeof(float), cudaMemcpyHostToDevice, L.s));
    LY_CUDA(cudaMemcpyAsync(B.inv_freq, L.inv_freq.data(), L.inv_freq.size() * sizeof(float),
                            cudaMemcpyHostToDevice, L.s));
    LY_CUDA(cudaStreamSynchronize(L.s)); // the host vectors go out of scope
  }
  return 0;
}

int create_gemms(Layer &L, char *err, size_t errlen) {
  const Dims &D = L.D;
  const float *ws = D.fp8 ? L.wsinv() : nullptr;
  auto si = [&L, &D](int c) -> const float * { return D.fp8 ? L.sinv(c) : nullptr; };
  const struct {
    int ta, tb;
    size_t m, n, k;
    const float *as, *bs;
  } spec[G_N] = {
      {1, 0, D.qkv, D.T, D.h, ws, si(C_LN1)},             // G_QKV
      {1, 0, D.h, D.T, D.npd, ws, si(C_CTX)},             // G_PROJ
      {1, 0, D.up, D.T, D.h, ws, si(C_LN2)},              // G_FC1
      {1, 0, D.h, D.T, D.ffn, ws, si(C_ACT)},             // G_FC2
      {0, 0, D.ffn, D.T, D.h, ws, si(C_DFC2)},            // G_FC2_D
      {0, 1, D.ffn, D.h, D.T, si(C_ACT), si(C_DFC2)},     // G_FC2_W
      {0, 0, D.h, D.T, D.up, ws, si(C_DFC1)},             // G_FC1_D
      {0, 1, D.h, D.up, D.T, si(C_LN2), si(C_DFC1)},      // G_FC1_W
      {0, 0, D.npd, D.T, D.h, ws, si(C_DPROJ)},           // G_PROJ_D
      {0, 1, D.npd, D.h, D.T, si(C_CTX), si(C_DPROJ)},    // G_PROJ_W
      {0, 0, D.h, D.T, D.qkv, ws, si(C_DQKV)},            // G_QKV_D
      {0, 1, D.h, D.qkv, D.T, si(C_LN1), si(C_DQKV)},     // G_QKV_W
  };
  for (int i = 0; i < G_N; i++)
    // Fast accumulation for the forward (TN) only, TE's default.
    LY_RC(lt_gemm_create(&L.g[i], L.lt, L.s, L.B.lt_ws, LT_WORKSPACE_BYTES, D.fp8, spec[i].ta && !spec[i].tb,
                         spec[i].ta, spec[i].tb, spec[i].m, spec[i].n, spec[i].k, spec[i].as, spec[i].bs, err,
                         errlen));
  return 0;
}

// Every scale, amax and scale inverse the casts and the GEMMs are handed
// sits on a 16-byte boundary (fp8_slots.h), checked before any of them is
// written or launched.
int check_fp8_slots(const Layer &L, char *err, size_t errlen) {
  for (int c = 0; c < C_N; c++)
    if (!calib_fp8_aligned(L.scale(c)) || !calib_fp8_aligned(L.amax(c)) || !calib_fp8_aligned(L.sinv(c)))
      return failf(err, errlen, "modern layer %s: the FP8 scales of cast %d are not 16-byte aligned (cuBLASLt refuses "
                   "such scale pointers); see fp8_slots.h", L.label, c);
  if (!calib_fp8_aligned(L.wsinv()))
    return failf(err, errlen, "modern layer %s: the weights' FP8 scale_inv is not 16-byte aligned (cuBLASLt refuses "
                 "such scale pointers); see fp8_slots.h", L.label);
  return 0;
}

// TE's delayed scaling, settled: forward + backward with the current scales,
// then scale = 448 / amax (margin 0) for every cast; twice, so that the
// second pass's amaxes come from tensors quantized with sensible scales.
int fp8_calibrate(Layer &L, char *err, size_t errlen) {
  for (int pass = 0; pass < 2; pass++) {
    // One slot per value: the amaxes (and the scales) are C_N slots apart
    // from the next cast's, each read and written as a whole array.
    const size_t slots = C_N * CALIB_FP8_SLOT_FLOATS;
    std::vector<float> am(slots), sc(slots);
    LY_CUDA(cudaMemsetAsync(L.amax(0), 0, slots * sizeof(float), L.s));
    LY_RC(layer_forward(L, err, errlen));
    LY_RC(layer_backward(L, err, errlen));
    LY_CUDA(cudaStreamSynchronize(L.s));
    LY_CUDA(cudaMemcpy(am.data(), L.amax(0), slots * sizeof(float), cudaMemcpyDeviceToHost));
    LY_CUDA(cudaMemcpy(sc.data(), L.scale(0), slots * sizeof(float), cudaMemcpyDeviceToHost));
    for (int c = 0; c < C_N; c++) {
      const size_t i = (size_t)c * CALIB_FP8_SLOT_FLOATS;
      sc[i] = (float)ref_fp8_scale(am[i], REF_E4M3_MAX, 0, sc[i]);
    }
    LY_CUDA(cudaMemcpy(L.scale(0), sc.data(), slots * sizeof(float), cudaMemcpyHostToDevice));
  }
  return 0;
}

// --- the check ---

int get(void *dst, const void *src, size_t bytes, char *err, size_t errlen) {
  LY_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  return 0;
}

int get_bf16(std::vector<double> &v, const bf16 *src, size_t n, char *err, size_t errlen) {
  std::vector<bf16> t(n);
  LY_RC(get(t.data(), src, n * sizeof(bf16), err, errlen));
  v.resize(n);
  for (size_t i = 0; i < n; i++)
    v[i] = to_f(t[i]);
  return 0;
}

int get1(double *v, const bf16 *src, char *err, size_t errlen) {
  bf16 t;
  LY_RC(get(&t, src, sizeof t, err, errlen));
  *v = to_f(t);
  return 0;
}

// Every value finite, their RMS in [lo, hi].
int check_whole(const Layer &L, const char *what, const bf16 *p, size_t n, double lo, double hi, char *err,
                size_t errlen) {
  std::vector<double> v;
  double ss = 0;
  LY_RC(get_bf16(v, p, n, err, errlen));
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(v[i]))
      return failf(err, errlen, "modern layer %s: %s element %zu is %g", L.label, what, i, v[i]);
    ss += v[i] * v[i];
  }
  const double rms = sqrt(ss / (double)n);
  if (!(rms >= lo && rms <= hi))
    return failf(err, errlen, "modern layer %s: %s has RMS %g, outside [%g, %g]", L.label, what, rms, lo, hi);
  return 0;
}

// The angles of position `pos` as the kernels compute them (fp32 product).
void host_angles(const Layer &L, size_t pos, std::vector<double> &theta) {
  theta.resize(L.D.d / 2);
  for (size_t j = 0; j < L.D.d / 2; j++)
    theta[j] = (double)((float)pos * L.inv_freq[j]);
}

// (d) and (h): `probes` heads of the fused QKV tensor `mixed` against Q, K,
// V (cuDNN's layout): forward, bhsd = rotary(mixed); backward,
// mixed = rotary^-1(bhsd); V copied exactly either way.
int check_qkv_layout(const Layer &L, bool forward, const bf16 *q, const bf16 *k, const bf16 *v, char *err,
                     size_t errlen) {
  const Dims &D = L.D;
  std::vector<double> mx, hd, theta, ref(D.d);
  for (unsigned probe = 0; probe < 16; probe++) {
    const size_t r = mix(7100 + probe) % D.T, slot = mix(7200 + probe) % (D.np + 2 * D.ng);
    const size_t si = r / D.b, bi = r % D.b, grp = slot / (D.qpg + 2), j = slot % (D.qpg + 2);
    const bf16 *head = j < D.qpg ? q + ((bi * D.np + grp * D.qpg + j) * D.s + si) * D.d
                                 : (j == D.qpg ? k : v) + ((bi * D.ng + grp) * D.s + si) * D.d;
    LY_RC(get_bf16(mx, L.B.mixed + r * D.qkv + slot * D.d, D.d, err, errlen));
    LY_RC(get_bf16(hd, head, D.d, err, errlen));
    const std::vector<double> &in = forward ? mx : hd, &got = forward ? hd : mx;
    const bool rotated = D.llama && j <= D.qpg;
    if (rotated) {
      host_angles(L, si, theta);
      if (forward)
        ref_rotary_fwd(in.data(), theta.data(), D.d, ref.data());
      else
        ref_rotary_bwd(in.data(), theta.data(), D.d, ref.data());
    } else {
      ref = in;
    }
    for (size_t e = 0; e < D.d; e++) {
      const size_t partner = e < D.d / 2 ? e + D.d / 2 : e - D.d / 2;
      // fp32 arithmetic, one bf16 rounding of the result (2^-9 relative)
      const double tol = rotated ? fabs(ref[e]) / 256 + 1e-5 * (fabs(in[e]) + fabs(in[partner])) : 0;
      if (!(fabs(got[e] - ref[e]) <= tol))
        return failf(err, errlen,
                     "modern layer %s: the %s of QKV into cuDNN's layout disagrees with the CPU at token %zu, "
                     "slot %zu, channel %zu: %g vs %g",
                     L.label, forward ? "split (and rotary)" : "gradient's merge (and rotary backward)", r, slot, e,
                     got[e], ref[e]);
    }
  }
  return 0;
}

int check_forward(Layer &L, char *err, size_t errlen) {
  const Dims &D = L.D;
  const Bufs &B = L.B;
  // (a) the whole output
  LY_RC(check_whole(L, "the forward's output", B.out, D.Tsp * D.h, 0.25, 50, err, errlen));
  // (b) the last kernel, bias-dropout-add, from the GPU's own inputs
  for (unsigned probe = 0; probe < 64; probe++) {
    const size_t r = mix(7300 + probe) % D.Tsp, c = mix(7400 + probe) % D.h, i = r * D.h + c;
    double f2, res, y, bias = 0;
    uint8_t m;
    LY_RC(get1(&f2, B.scr + i, err, errlen));
    LY_RC(get1(&res, B.res1 + i, err, errlen));
    LY_RC(get1(&y, B.out + i, err, errlen));
    if (!D.llama)
      LY_RC(get1(&bias, B.b2 + c, err, errlen));
    LY_RC(get(&m, B.mask2 + i, 1, err, errlen));
    const int keep = ref_dropout_keep(LY_SEED_DROP2, i);
    const double ref = ref_bias_dropout_add(f2, bias, res, keep, REF_DROPOUT_P);
    if (m != keep || !(fabs(y - ref) <= fabs(ref) / 256 + 1e-6))
      return failf(err, errlen,
                   "modern layer %s: the last dropout-add disagrees with the CPU at [%zu, %zu]: %g vs %g (mask %d, "
                   "keep %d)",
                   L.label, r, c, y, ref, m, keep);
  }
  // (c) the fc2 GEMM: y[r, c] = sum_k act[r, k] W2[c, k], W2 = the shared
  // weight's first h x ffn elements, row-major [h][ffn] (TN, gemm_index.h).
  {
    const double tol_mag = D.fp8 ? 1.0 / 512 : 1e-5; // gpu_gemmlt.cu: fast accumulation forward
    std::vector<double> a;
    std::vector<uint8_t> a8;
    float act_sinv = 1.f;
    if (D.fp8)
      LY_RC(get(&act_sinv, L.sinv(C_ACT), sizeof act_sinv, err, errlen));
    for (unsigned probe = 0; probe < 32; probe++) {
      const size_t r = mix(7500 + probe) % D.T, c = mix(7600 + probe) % D.h;
      double got, ref = 0, mag = 0;
      if (D.fp8) {
        a8.resize(D.ffn);
        LY_RC(get(a8.data(), B.act_8 + r * D.ffn, D.ffn, err, errlen));
      } else {
        LY_RC(get_bf16(a, B.act + r * D.ffn, D.ffn, err, errlen));
      }
      for (size_t kk = 0; kk < D.ffn; kk++) {
        const size_t wi = c * D.ffn + kk;
        const double x = D.fp8 ? ref_e4m3_to_double(a8[kk]) * act_sinv : a[kk];
        const double w = D.fp8 ? (double)to_f(host_value<__nv_fp8_e4m3>(LY_SEED_W, wi, LY_W8_MULT)) *
                                     (double)(LY_W_SCALE / LY_W8_MULT)
                               : (double)to_f(host_value<bf16>(LY_SEED_W, wi, LY_W_SCALE));
        ref += x * w;
        mag += fabs(x * w);
      }
      LY_RC(get1(&got, B.scr + r * D.h + c, err, errlen));
      if (!(fabs(got - ref) <= fabs(ref) / 128 + tol_mag * mag + 1e-3))
        return failf(err, errlen, "modern layer %s: the fc2 GEMM disagrees with the CPU at [%zu, %zu]: %g vs %g",
                     L.label, r, c, got, ref);
    }
  }
  // (d) kernel 4
  LY_RC(check_qkv_layout(L, true, L.q(), L.k(), L.v(), err, errlen));
  // (e) kernel 6: a copy
  for (unsigned probe = 0; probe < 16; probe++) {
    const size_t r = mix(7700 + probe) % D.T, hd = mix(7800 + probe) % D.np, si = r / D.b, bi = r % D.b;
    std::vector<bf16> x(D.d), y(D.d);
    LY_RC(get(x.data(), B.ctx + r * D.npd + hd * D.d, D.d * sizeof(bf16), err, errlen));
    LY_RC(get(y.data(), B.o + ((bi * D.np + hd) * D.s + si) * D.d, D.d * sizeof(bf16), err, errlen));
    if (memcmp(x.data(), y.data(), D.d * sizeof(bf16)))
      return failf(err, errlen, "modern layer %s: the context copy differs from cuDNN's output at token %zu, head %zu",
                   L.label, r, hd);
  }
  return 0;
}

// Backward kernel 1 alone: dy of fc2 = dout mask2 / (1 - p).
int check_dropout_bwd(Layer &L, char *err, size_t errlen) {
  const Dims &D = L.D;
  const Bufs &B = L.B;
  LY_CUDA(dropout_bwd(L, B.dout, B.mask2, B.scr));
  LY_CUDA(cudaStreamSynchronize(L.s));
  for (unsigned probe = 0; probe < 32; probe++) {
    const size_t i = mix(7900 + probe) % (D.Tsp * D.h);
    double dy, dx;
    uint8_t m;
    LY_RC(get1(&dy, B.dout + i, err, errlen));
    LY_RC(get1(&dx, B.scr + i, err, errlen));
    LY_RC(get(&m, B.mask2 + i, 1, err, errlen));
    const double ref = m ? dy / (1.0 - REF_DROPOUT_P) : 0.0;
    if (!(fabs(dx - ref) <= fabs(ref) / 256 + 1e-6))
      return failf(err, errlen, "modern layer %s: dropout backward disagrees with the CPU at %zu: %g vs %g", L.label, i,
                   dx, ref);
  }
  return 0;
}

int check_backward(Layer &L, char *err, size_t errlen) {
  const Dims &D = L.D;
  const Bufs &B = L.B;
  // (f) the whole input gradient
  LY_RC(check_whole(L, "the backward's input gradient", B.dx, D.Tsp * D.h, 0.25, 1000, err, errlen));
  // (g) the last kernel: dx = norm 1's dx + the residual gradient
  for (unsigned probe = 0; probe < 64; probe++) {
    const size_t i = mix(8100 + probe) % (D.Tsp * D.h);
    double a, b, y;
    LY_RC(get1(&a, B.tmp + i, err, errlen));
    LY_RC(get1(&b, B.dres1 + i, err, errlen));
    LY_RC(get1(&y, B.dx + i, err, errlen));
    if (!(fabs(y - (a + b)) <= fabs(a + b) / 256 + 1e-6))
      return failf(err, errlen, "modern layer %s: the last residual gradient sum disagrees at %zu: %g vs %g + %g",
                   L.label, i, y, a, b);
  }
  // (h) kernel 14
  return check_qkv_layout(L, false, L.dq(), L.dk(), L.dv(), err, errlen);
}

int layer_check(Layer &L, char *err, size_t errlen) {
  LY_RC(layer_forward(L, err, errlen));
  LY_CUDA(cudaStreamSynchronize(L.s));
  LY_RC(check_forward(L, err, errlen));
  LY_RC(check_dropout_bwd(L, err, errlen));
  LY_RC(layer_backward(L, err, errlen));
  LY_CUDA(cudaStreamSynchronize(L.s));
  return check_backward(L, err, errlen);
}

} // namespace

// --- the room ---

extern "C" int calib_gpu_modern_layer(int device, const CalibGpuLayer *l, CalibGpuTiming *fwd, CalibGpuTiming *rec,
                                      CalibGpuTiming *bwd, char *err, size_t errlen) {
  int rc = 0;
  Layer L;
  CHECK_RC(layer_dims(l, &L.D, L.label, sizeof L.label, err, errlen));
  CUDA_OK(cudaSetDevice(device));
  CUDA_OK(cudaDeviceGetAttribute(&L.sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_OK(cudaStreamCreate(&L.s));
  CUBLAS_OK(cublasLtCreate(&L.lt));
#ifndef PTDSIM_NO_CUDNN
  {
    // cuDNN that cannot run here at all (NOT_SUPPORTED statuses) means no
    // layer to measure, as in the attention room.
    const cudnnStatus_t st = cudnnCreate(&L.dnn);
    if (st != CUDNN_STATUS_SUCCESS) {
      L.dnn = nullptr;
      rc = CUDNN_STATUS_CATEGORY(st) == CUDNN_STATUS_NOT_SUPPORTED ? CALIB_GPU_UNSUPPORTED : 1;
      snprintf(err, errlen, "%s:%d: cudnnCreate failed: %s", __FILE__, __LINE__, cudnnGetErrorString(st));
      goto done;
    }
  }
#endif
  // CALIB_GPU_UNSUPPORTED from here (no cuDNN, no engine for the shape) and
  // from lt_gemm_create (no FP8) passes through with the room's reason.
  CHECK_RC(L.sdpa.init(L.dnn, L.s, (long long)L.D.b, (long long)L.D.np, (long long)L.D.ng, (long long)L.D.s,
                       (long long)L.D.d, true, err, errlen));
  CUDA_OK(mb_norm_bwd_workspace(L.D.Tsp, L.D.h, L.D.llama, &L.norm_ws_bytes));
  L.arena_bytes = carve(&L.B, L.D, L.norm_ws_bytes, 0);
  CUDA_OK(cudaMalloc(&L.arena, L.arena_bytes));
  carve(&L.B, L.D, L.norm_ws_bytes, (uintptr_t)L.arena);
  if (L.D.fp8)
    CHECK_RC(check_fp8_slots(L, err, errlen));
  CHECK_RC(init_data(L, err, errlen));
  CHECK_RC(create_gemms(L, err, errlen));
  if (L.D.fp8)
    CHECK_RC(fp8_calibrate(L, err, errlen));
  CHECK_RC(layer_check(L, err, errlen));
  {
    auto forward = [&]() -> int { return layer_forward(L, err, errlen); };
    auto backward = [&]() -> int { return layer_backward(L, err, errlen); };
    CHECK_RC(time_op(L.s, fwd, forward, err, errlen, SPIN_LAYER_NS));
    CHECK_RC(time_pair(L.s, rec, bwd, forward, backward, err, errlen));
  }
done:
  for (int i = 0; i < G_N; i++)
    lt_gemm_destroy(&L.g[i]);
  L.sdpa.destroy();
  if (L.arena)
    cudaFree(L.arena);
  if (L.lt)
    cublasLtDestroy(L.lt);
#ifndef PTDSIM_NO_CUDNN
  if (L.dnn)
    cudnnDestroy(L.dnn);
#endif
  if (L.s)
    cudaStreamDestroy(L.s);
  return rc;
}
