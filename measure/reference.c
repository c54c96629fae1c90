/* ptdsim-calibrate — CPU references of the memory-bound kernels (see reference.h). */
#include "reference.h"

#include <math.h>
#include <string.h>

/* --- pseudo-random inputs --- */

uint32_t ref_mix(uint64_t x) {
  /* The splitmix64 finaliser (Steele, Lea and Flood, OOPSLA 2014), exactly
   * as gpu_common.cuh's mix: the high 32 bits of the mixed value. */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return (uint32_t)((x ^ (x >> 31)) >> 32);
}

float ref_urand(uint64_t seed, uint64_t i) {
  /* (float)u is rounded to nearest; the product by 2^-31 is exact, so the
   * device's fused multiply-add, if nvcc contracts it, gives the same float. */
  return (float)ref_mix(seed * 0x100000001b3ull + i) * (2.0f / 4294967296.0f) - 1.0f;
}

float ref_bf16(float v) {
  uint32_t b;
  memcpy(&b, &v, sizeof b);
  if ((b & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a (quiet) NaN */
    b |= 0x00400000u;
  else /* round the low 16 bits away, to nearest, ties to even */
    b += 0x7fffu + ((b >> 16) & 1u);
  b &= 0xffff0000u;
  memcpy(&v, &b, sizeof v);
  return v;
}

float ref_input_bf16(uint64_t seed, uint64_t i, float scale) {
  float v = scale * ref_urand(seed, i); /* one float multiply, as on the device */
  return ref_bf16(v);
}

/* --- op names --- */

static const char *const op_names[REF_N_OPS] = {
    "layernorm.fwd", "layernorm.bwd", "rmsnorm.fwd",          "rmsnorm.bwd", "bias_gelu.fwd",
    "bias_gelu.bwd", "swiglu.fwd",    "swiglu.bwd",           "bias_dropout_add.fwd",
    "rotary.fwd",    "rotary.bwd",    "fp8_cast",             "cross_entropy.fwd",
    "cross_entropy.bwd",
};

int ref_membound_op(const char *name) {
  for (int i = 0; name && i < REF_N_OPS; i++)
    if (strcmp(op_names[i], name) == 0)
      return i;
  return -1;
}

const char *ref_membound_op_name(int op) {
  return op >= 0 && op < REF_N_OPS ? op_names[op] : NULL;
}

/* --- norms --- */

void ref_layernorm_fwd(const double *x, const double *gamma, const double *beta, size_t n, double eps, double *y,
                       double *mean, double *rstd) {
  double mu = 0, var = 0;
  for (size_t i = 0; i < n; i++)
    mu += x[i];
  mu /= (double)n;
  for (size_t i = 0; i < n; i++)
    var += (x[i] - mu) * (x[i] - mu);
  var /= (double)n;
  double r = 1.0 / sqrt(var + eps);
  for (size_t i = 0; i < n; i++)
    y[i] = (x[i] - mu) * r * gamma[i] + beta[i];
  if (mean)
    *mean = mu;
  if (rstd)
    *rstd = r;
}

/* The backward of y = xhat gamma + beta with xhat = (x - mean) rstd:
 * dL/dxhat = g = dy gamma, and since xhat has zero mean and unit mean square
 * over the row, dx = rstd (g - mean(g) - xhat mean(g xhat)). */
void ref_layernorm_bwd(const double *x, const double *dy, const double *gamma, size_t n, double mean, double rstd,
                       double *dx, double *dgamma, double *dbeta) {
  double mg = 0, mgx = 0;
  for (size_t i = 0; i < n; i++) {
    double xhat = (x[i] - mean) * rstd, g = dy[i] * gamma[i];
    mg += g;
    mgx += g * xhat;
  }
  mg /= (double)n;
  mgx /= (double)n;
  for (size_t i = 0; i < n; i++) {
    double xhat = (x[i] - mean) * rstd;
    dx[i] = rstd * (dy[i] * gamma[i] - mg - xhat * mgx);
    if (dgamma)
      dgamma[i] += dy[i] * xhat;
    if (dbeta)
      dbeta[i] += dy[i];
  }
}

void ref_rmsnorm_fwd(const double *x, const double *gamma, size_t n, double eps, double *y, double *rstd) {
  double ms = 0;
  for (size_t i = 0; i < n; i++)
    ms += x[i] * x[i];
  ms /= (double)n;
  double r = 1.0 / sqrt(ms + eps);
  for (size_t i = 0; i < n; i++)
    y[i] = x[i] * r * gamma[i];
  if (rstd)
    *rstd = r;
}

/* y = xhat gamma, xhat = x rstd, rstd = (mean(x^2) + eps)^-1/2:
 * d rstd / dx_i = -rstd^3 x_i / n, so dx = rstd (g - xhat mean(g xhat)). */
void ref_rmsnorm_bwd(const double *x, const double *dy, const double *gamma, size_t n, double rstd, double *dx,
                     double *dgamma) {
  double mgx = 0;
  for (size_t i = 0; i < n; i++)
    mgx += dy[i] * gamma[i] * x[i] * rstd;
  mgx /= (double)n;
  for (size_t i = 0; i < n; i++) {
    double xhat = x[i] * rstd;
    dx[i] = rstd * (dy[i] * gamma[i] - xhat * mgx);
    if (dgamma)
      dgamma[i] += dy[i] * xhat;
  }
}

/* --- GeLU --- */

double ref_gelu(double x) {
  return 0.5 * x * (1.0 + tanh(0.79788456 * x * (1.0 + 0.044715 * x * x)));
}

double ref_gelu_grad(double x) {
  double t = tanh(0.79788456 * x * (1.0 + 0.044715 * x * x));
  return 0.5 * x * ((1.0 - t * t) * (0.79788456 + 0.1070322243 * x * x)) + 0.5 * (1.0 + t);
}

double ref_bias_gelu_fwd(double x, double bias) {
  return ref_gelu(x + bias);
}

double ref_bias_gelu_bwd(double dy, double x, double bias) {
  return ref_gelu_grad(x + bias) * dy;
}

/* --- SwiGLU --- */

static double sigmoid(double g) {
  return 1.0 / (1.0 + exp(-g));
}

double ref_silu(double g) {
  return g * sigmoid(g);
}

double ref_swiglu_fwd(double gate, double up) {
  return ref_silu(gate) * up;
}

void ref_swiglu_bwd(double dy, double gate, double up, double *dgate, double *dup) {
  double s = sigmoid(gate);
  *dgate = dy * up * s * (1.0 + gate * (1.0 - s));
  *dup = dy * gate * s;
}

/* --- dropout --- */

int ref_dropout_keep(uint64_t seed, uint64_t i) {
  return (ref_mix(seed * 31 + i) >> 8) >= REF_DROPOUT_KEEP_MIN;
}

double ref_bias_dropout_add(double x, double bias, double residual, int keep, double p) {
  return residual + (keep ? (x + bias) / (1.0 - p) : 0.0);
}

/* --- rotary --- */

void ref_rope_angles(double pos, size_t head_dim, double base, double *theta) {
  for (size_t j = 0; j < head_dim / 2; j++)
    theta[j] = pos * pow(base, -2.0 * (double)j / (double)head_dim);
}

void ref_rotary_fwd(const double *x, const double *theta, size_t head_dim, double *y) {
  size_t h = head_dim / 2;
  for (size_t j = 0; j < h; j++) {
    double c = cos(theta[j]), s = sin(theta[j]), x1 = x[j], x2 = x[j + h];
    y[j] = x1 * c - x2 * s;
    y[j + h] = x2 * c + x1 * s;
  }
}

void ref_rotary_bwd(const double *dy, const double *theta, size_t head_dim, double *dx) {
  size_t h = head_dim / 2;
  for (size_t j = 0; j < h; j++) {
    double c = cos(theta[j]), s = sin(theta[j]), d1 = dy[j], d2 = dy[j + h];
    dx[j] = d1 * c + d2 * s;
    dx[j + h] = d2 * c - d1 * s;
  }
}

/* --- E4M3 --- */

uint8_t ref_e4m3_from_double(double v) {
  if (isnan(v))
    return 0x7f;
  uint8_t sign = signbit(v) ? 0x80 : 0;
  double a = fabs(v);
  /* Saturation: everything from the largest finite value up, infinities too
   * (values in (448, 464] would round to 448 anyway, 464 being the midpoint
   * to the unrepresentable 480 whose code is the NaN). */
  if (a >= REF_E4M3_MAX)
    return sign | 0x7e;
  if (a == 0)
    return sign;
  /* a = f 2^e with f in [0.5, 1): the binade is [2^(e-1), 2^e); below the
   * smallest normal 2^-6 the spacing stays that of the first binade. */
  int e;
  frexp(a, &e);
  int E = e - 1 < -6 ? -6 : e - 1;
  /* 3 mantissa bits: spacing 2^(E-3).  a / spacing is exact (a power-of-two
   * scaling) and nearbyint rounds to nearest even in the default rounding
   * mode: an even integer m is an even mantissa. */
  double m = nearbyint(ldexp(a, 3 - E));
  if (m >= 16) { /* rounded up into the next binade */
    E += 1;
    m = 8;
  }
  if (m < 8) /* subnormal (E == -6), or zero */
    return sign | (uint8_t)m;
  return sign | (uint8_t)(((E + 7) << 3) | ((int)m - 8));
}

double ref_e4m3_to_double(uint8_t code) {
  int e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7)
    return NAN;
  double v = e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10); /* (1 + m/8) 2^(e-7) */
  return code & 0x80 ? -v : v;
}

double ref_fp8_scale(double amax, double fp8_max, int margin, double prev_scale) {
  if (!(amax > 0) || !isfinite(amax))
    return prev_scale;
  return fp8_max / amax / ldexp(1.0, margin);
}

double ref_amax(const double *x, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++)
    if (fabs(x[i]) > m)
      m = fabs(x[i]);
  return m;
}

uint8_t ref_fp8_quantize(double x, double scale) {
  return ref_e4m3_from_double(x * scale);
}

double ref_fp8_dequantize(uint8_t code, double scale) {
  return ref_e4m3_to_double(code) / scale;
}

/* --- cross entropy --- */

void ref_xent_fwd(const double *logits, size_t n, long long target, RefXentRow *out) {
  double mx = -INFINITY, s = 0;
  for (size_t j = 0; j < n; j++)
    mx = fmax(mx, logits[j]);
  for (size_t j = 0; j < n; j++)
    s += exp(logits[j] - mx);
  out->max = mx;
  out->sum_exp = s;
  out->loss = log(s);
  if (target >= 0 && (unsigned long long)target < n)
    out->loss -= logits[target] - mx;
}

void ref_xent_bwd(const double *logits, size_t n, long long target, const RefXentRow *st, double dloss, double *grad) {
  for (size_t j = 0; j < n; j++)
    grad[j] = dloss * (exp(logits[j] - st->max) / st->sum_exp - (target >= 0 && (size_t)target == j ? 1.0 : 0.0));
}
