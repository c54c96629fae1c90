/* ptdsim-calibrate — CPU references of the memory-bound kernels the
 * membound mode and the modern layer run (calibrate/gpu_membound.cu), in
 * plain C and double precision, so that the GPU results are checked against
 * code that is itself unit-tested (tests/test_reference.c).
 *
 * Conventions: a "row" is one token's vector (a norm's hidden vector, a
 * cross-entropy row of logits, one attention head for rotary); row functions
 * take `n` values.  Element functions take and return one value.  Nothing
 * here allocates, and every function is pure (no global state).  The header
 * is C and C++ (gpu_membound.cu calls it through extern "C").
 *
 * Sources of the formulas, cited at each group: Megatron-Core
 * (github.com/NVIDIA/Megatron-LM, megatron/core/...), Transformer Engine
 * (github.com/NVIDIA/TransformerEngine) and the OCP 8-bit floating point
 * specification.  No code is taken from them. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --- the harness's pseudo-random inputs, as gpu_common.cuh draws them ---
 *
 * C twins of gpu_common.cuh's `mix` (the splitmix64 finaliser, Steele, Lea
 * and Flood, OOPSLA 2014), `urand` and `host_value<__nv_bfloat16>`: the same
 * bits on the host as on the device, so a check can rebuild any input. */
uint32_t ref_mix(uint64_t x);
/* Uniform in [-1, 1): exactly gpu_common.cuh's urand(seed, i). */
float ref_urand(uint64_t seed, uint64_t i);
/* `v` rounded to bfloat16 (nearest, ties to even; overflow to infinity; NaN
 * stays NaN), as __float2bfloat16 does, returned widened to float. */
float ref_bf16(float v);
/* What fill_kernel<__nv_bfloat16>(p, n, seed, scale) writes at index i:
 * bf16(scale * urand(seed, i)). */
float ref_input_bf16(uint64_t seed, uint64_t i, float scale);

/* --- the op table's names (measurements.c's calib_membound_ops, same order) --- */
typedef enum {
  REF_OP_LAYERNORM_FWD,
  REF_OP_LAYERNORM_BWD,
  REF_OP_RMSNORM_FWD,
  REF_OP_RMSNORM_BWD,
  REF_OP_BIAS_GELU_FWD,
  REF_OP_BIAS_GELU_BWD,
  REF_OP_SWIGLU_FWD,
  REF_OP_SWIGLU_BWD,
  REF_OP_BIAS_DROPOUT_ADD_FWD,
  REF_OP_ROTARY_FWD,
  REF_OP_ROTARY_BWD,
  REF_OP_FP8_CAST,
  REF_OP_CROSS_ENTROPY_FWD,
  REF_OP_CROSS_ENTROPY_BWD,
  REF_N_OPS
} RefMemboundOp;
/* The op named `name` ("rmsnorm.fwd", ...), or -1. */
int ref_membound_op(const char *name);
/* The name of `op`, or NULL when out of range. */
const char *ref_membound_op_name(int op);

/* --- layernorm and RMSNorm ---
 *
 * eps: Megatron-Core's TransformerConfig.layernorm_epsilon, 1e-5, used "for
 * any LayerNorm/RMSNorm operations" (megatron/core/transformer/
 * transformer_config.py), which is also Transformer Engine's default for
 * LayerNorm and RMSNorm.  Statistics over the n values of the row, the
 * biased variance (divide by n), as torch.nn.LayerNorm and TE compute it. */
#define REF_NORM_EPS 1e-5

/* y = (x - mean) rstd gamma + beta, rstd = 1 / sqrt(var + eps); mean and
 * rstd (either may be NULL) are what the forward saves for the backward. */
void ref_layernorm_fwd(const double *x, const double *gamma, const double *beta, size_t n, double eps, double *y,
                       double *mean, double *rstd);
/* Given the forward's mean and rstd: with xhat = (x - mean) rstd and
 * g = dy gamma, dx = rstd (g - mean(g) - xhat mean(g xhat)); adds the row's
 * contributions dy xhat to dgamma and dy to dbeta (either may be NULL). */
void ref_layernorm_bwd(const double *x, const double *dy, const double *gamma, size_t n, double mean, double rstd,
                       double *dx, double *dgamma, double *dbeta);
/* y = x rstd gamma, rstd = 1 / sqrt(mean(x^2) + eps) (Zhang and Sennrich,
 * NeurIPS 2019; no mean subtraction, no beta); rstd may be NULL. */
void ref_rmsnorm_fwd(const double *x, const double *gamma, size_t n, double eps, double *y, double *rstd);
/* xhat = x rstd, g = dy gamma: dx = rstd (g - xhat mean(g xhat)); adds dy xhat
 * to dgamma (may be NULL). */
void ref_rmsnorm_bwd(const double *x, const double *dy, const double *gamma, size_t n, double rstd, double *dx,
                     double *dgamma);

/* --- GeLU, tanh form, and bias + GeLU ---
 *
 * Megatron's bias_gelu_fusion (megatron/core/fusions/fused_bias_gelu.py):
 *   gelu(x)  = 0.5 x (1 + tanh(0.79788456 x (1 + 0.044715 x^2)))
 *   gelu'(x) = 0.5 x (1 - t^2) (0.79788456 + 0.1070322243 x^2) + 0.5 (1 + t),
 *              t = tanh(0.79788456 x (1 + 0.044715 x^2)),
 * with its truncated constants (sqrt(2/pi) and 3 * 0.044715 * sqrt(2/pi)),
 * so the references agree with Megatron to the last digit; the bias is added
 * to the input before both. */
double ref_gelu(double x);
double ref_gelu_grad(double x);
double ref_bias_gelu_fwd(double x, double bias);
/* dx = gelu'(x + bias) dy (the bias gradient is the column sum of dx). */
double ref_bias_gelu_bwd(double dy, double x, double bias);

/* --- SwiGLU ---
 *
 * Megatron-Core's swiglu / swiglu_back (megatron/core/fusions/
 * fused_bias_swiglu.py): the fc1 output row [gate | up] (torch.chunk into
 * two halves), y = silu(gate) up, silu(g) = g sigmoid(g);
 *   dgate = dy up sigmoid(g) (1 + g (1 - sigmoid(g))),  dup = dy silu(g). */
double ref_silu(double g);
double ref_swiglu_fwd(double gate, double up);
void ref_swiglu_bwd(double dy, double gate, double up, double *dgate, double *dup);

/* --- bias + dropout + residual add ---
 *
 * Megatron-Core's bias_dropout_add (megatron/core/fusions/
 * fused_bias_dropout.py): y = residual + dropout(x + bias), dropout keeping
 * a fraction 1 - p and scaling kept values by 1 / (1 - p) (Srivastava et
 * al. 2014, inverted dropout as torch.nn.functional.dropout).  The keep mask
 * is this project's own, counter-based and deterministic: element i of a
 * tensor is kept iff the top 24 bits of mix(seed * 31 + i) are at least
 * ceil(p 2^24) -- the same decision gpu.cu's `keep` makes with its float
 * comparison -- so the host knows every element's fate. */
#define REF_DROPOUT_P 0.1
#define REF_DROPOUT_KEEP_MIN 1677722u /* ceil(0.1 * 2^24): keep iff (mix >> 8) >= this */
int ref_dropout_keep(uint64_t seed, uint64_t i);
/* residual + (keep ? (x + bias) / (1 - p) : 0). */
double ref_bias_dropout_add(double x, double bias, double residual, int keep, double p);

/* --- rotary position embedding, rotate-half form ---
 *
 * Megatron-Core's RotaryEmbedding and apply_rotary_pos_emb
 * (megatron/core/models/common/embeddings/rotary_pos_embedding.py and
 * rope_utils.py, rotary_interleaved False, the Llama form; Su et al. 2021):
 * inv_freq_j = base^(-2j/d) for j < d/2, base 10000 by default; the angle of
 * position p is theta_j = p inv_freq_j, repeated over both halves; with
 * x = [x1 | x2] (halves of the head), y = x cos + rotate_half(x) sin,
 * rotate_half(x) = [-x2 | x1]:
 *   y1_j = x1_j cos theta_j - x2_j sin theta_j
 *   y2_j = x2_j cos theta_j + x1_j sin theta_j
 * The backward is the transpose, a rotation by -theta. */
#define REF_ROPE_BASE 10000.0
/* theta[j] = pos base^(-2j/head_dim), j < head_dim / 2. */
void ref_rope_angles(double pos, size_t head_dim, double base, double *theta);
/* One head of head_dim (even) values; theta has head_dim / 2 angles. */
void ref_rotary_fwd(const double *x, const double *theta, size_t head_dim, double *y);
void ref_rotary_bwd(const double *dy, const double *theta, size_t head_dim, double *dx);

/* --- FP8 E4M3 ---
 *
 * OCP 8-bit Floating Point Specification (OFP8), revision 1.0, 2023 (and
 * Micikevicius et al., "FP8 Formats for Deep Learning", 2022): E4M3 is
 * S.EEEE.MMM, bias 7, no infinities, S.1111.111 the only NaN, so the largest
 * finite value is S.1111.110 = 1.75 x 2^8 = 448, the smallest normal 2^-6
 * and the subnormals m x 2^-9, m = 1..7.  Conversion as cuda_fp8.h's
 * __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3): round to nearest,
 * ties to even; magnitudes beyond 448 (infinities included) saturate to
 * +-448; NaN gives 0x7f; the sign of zero and of values that round to zero
 * is kept (0x80). */
#define REF_E4M3_MAX 448.0
uint8_t ref_e4m3_from_double(double v);
/* The value of a code; NaN for 0x7f and 0xff. */
double ref_e4m3_to_double(uint8_t code);
/* Per-tensor scaling as Transformer Engine's delayed scaling recipe
 * (transformer_engine/pytorch/fp8.py, _default_sf_compute): the new scale is
 * (fp8_max / amax) / 2^margin, or `prev_scale` when amax is 0 or not finite.
 * The quantized tensor is e4m3(x scale); its values are read back as
 * code_value / scale (TE's scale_inv). */
double ref_fp8_scale(double amax, double fp8_max, int margin, double prev_scale);
/* max |x_i| (NaN ignored; 0 for n = 0). */
double ref_amax(const double *x, size_t n);
uint8_t ref_fp8_quantize(double x, double scale);
double ref_fp8_dequantize(uint8_t code, double scale);

/* --- vocabulary-parallel cross entropy, one row of one shard ---
 *
 * Megatron-Core's VocabParallelCrossEntropy (megatron/core/tensor_parallel/
 * cross_entropy.py) on one tensor-parallel rank, without the all-reduces:
 * the shard holds logits of vocabulary ids [vocab_start, vocab_start + n);
 * `target` is the row's id relative to the shard's start (outside [0, n):
 * the target lives on another rank).  Statistics max = max_j x_j and
 * sum_exp = sum_j exp(x_j - max);
 *   loss = log(sum_exp) - (x_target - max)     (target in the shard)
 *   loss = log(sum_exp)                        (target elsewhere)
 * which, with one shard holding the whole vocabulary, is the cross entropy
 * -log softmax(x)_target.  The gradient (per unit of loss gradient) is
 * softmax(x)_j - [j == target]. */
typedef struct {
  double max, sum_exp, loss;
} RefXentRow;
void ref_xent_fwd(const double *logits, size_t n, long long target, RefXentRow *out);
/* grad_j = dloss (exp(x_j - max) / sum_exp - [j == target]), with the
 * forward's statistics. */
void ref_xent_bwd(const double *logits, size_t n, long long target, const RefXentRow *st, double dloss, double *grad);

#ifdef __cplusplus
}
#endif
