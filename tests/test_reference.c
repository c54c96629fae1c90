/* ptdsim — tests of the CPU references of the memory-bound kernels
 * (measure/reference.c): the mathematics checked where it is exact
 * (normalised moments, identities, hand-derived roundings) and the backward
 * passes against central finite differences of the forwards; and where the
 * harness keeps its FP8 scales (calibrate/fp8_slots.h).  No GPU. */
#include <float.h>
#include <glib.h>
#include <math.h>
#include <string.h>

#include "../calibrate/fp8_slots.h"
#include "../measure/plan.h"
#include "../measure/reference.h"

/* A reproducible value in [lo, hi). */
static double rnd(uint64_t seed, uint64_t i, double lo, double hi) {
  return lo + (hi - lo) * 0.5 * (1.0 + ref_urand(seed, i));
}

static void assert_close(double got, double want, double tol) {
  if (!(fabs(got - want) <= tol))
    g_error("%.17g differs from %.17g by %.3g (tolerance %.3g)", got, want, fabs(got - want), tol);
}

/* --- the pseudo-random inputs --- */

static void test_mix_urand(void) {
  /* splitmix64 seeded with 0 yields 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4,
   * 0x06c45d188009454f (Steele et al.'s reference generator): the finaliser
   * of the states golden and 2 golden; mix returns the high halves. */
  g_assert_cmphex(ref_mix(0), ==, 0xe220a839u);
  g_assert_cmphex(ref_mix(0x9e3779b97f4a7c15ull), ==, 0x6e789e6au);
  g_assert_cmphex(ref_mix(2 * 0x9e3779b97f4a7c15ull), ==, 0x06c45d18u);
  /* urand: the formula, the range [-1, 1), and the mean and variance of a
   * uniform variable (1/3) within 5 standard errors. */
  double sum = 0, sum2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; i++) {
    float u = ref_urand(7, (uint64_t)i);
    g_assert_true(u == (float)ref_mix(7 * 0x100000001b3ull + (uint64_t)i) / 2147483648.0f - 1.0f);
    g_assert_true(u >= -1.0f && u < 1.0f);
    sum += u;
    sum2 += (double)u * u;
  }
  assert_close(sum / n, 0.0, 5 * sqrt(1.0 / 3 / n));
  assert_close(sum2 / n, 1.0 / 3, 5 * sqrt(4.0 / 45 / n));
  g_assert_true(ref_urand(1, 5) != ref_urand(2, 5));
}

static void test_bf16(void) {
  /* 8 significant bits: between 1 and 2 the spacing is 2^-7. */
  g_assert_true(ref_bf16(1.0f) == 1.0f);
  g_assert_true(ref_bf16(1.0f + 0x1p-8f) == 1.0f);                  /* tie: to the even 1 */
  g_assert_true(ref_bf16(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);    /* tie: to the even 1 + 2/128 */
  g_assert_true(ref_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f); /* above the midpoint */
  g_assert_true(ref_bf16(1.0f + 0x1p-8f - 0x1p-20f) == 1.0f);       /* below it */
  g_assert_true(ref_bf16(-1.0f - 0x1p-8f - 0x1p-20f) == -1.0f - 0x1p-7f);
  g_assert_true(ref_bf16(2.0f - 0x1p-9f) == 2.0f);                  /* rounds up into the next binade */
  g_assert_true(isinf(ref_bf16(FLT_MAX)) && ref_bf16(FLT_MAX) > 0); /* overflow */
  g_assert_true(isinf(ref_bf16(-INFINITY)));
  g_assert_true(isnan(ref_bf16(NAN)));
  g_assert_true(ref_bf16(-0.0f) == 0.0f && signbit(ref_bf16(-0.0f)));
  g_assert_true(ref_bf16(0x1p-133f) == 0x1p-133f); /* float subnormals with 7 bits survive */
  /* Idempotent, and an input is a rounded scaled urand. */
  for (uint64_t i = 0; i < 1000; i++) {
    float v = ref_input_bf16(3, i, 2.5f);
    g_assert_true(v == ref_bf16(2.5f * ref_urand(3, i)));
    g_assert_true(ref_bf16(v) == v);
    assert_close(v, 2.5f * ref_urand(3, i), fabs(v) * 0x1p-8);
  }
}

static void test_op_names(void) {
  g_assert_cmpuint(calib_n_membound_ops, ==, REF_N_OPS);
  for (guint i = 0; i < calib_n_membound_ops; i++) {
    g_assert_cmpint(ref_membound_op(calib_membound_ops[i].name), ==, (int)i);
    g_assert_cmpstr(ref_membound_op_name((int)i), ==, calib_membound_ops[i].name);
  }
  g_assert_cmpint(ref_membound_op("rmsnorm"), ==, -1);
  g_assert_cmpint(ref_membound_op(NULL), ==, -1);
  g_assert_null(ref_membound_op_name(REF_N_OPS));
  g_assert_null(ref_membound_op_name(-1));
}

/* --- norms --- */

#define N 37 /* a row length that is no power of two */

static void test_layernorm_forward(void) {
  double x[N], g1[N], b0[N], y[N], gamma[N], beta[N], y2[N], mean, rstd;
  for (int i = 0; i < N; i++) {
    x[i] = rnd(1, i, -3, 5);
    g1[i] = 1;
    b0[i] = 0;
    gamma[i] = rnd(2, i, 0.5, 1.5);
    beta[i] = rnd(3, i, -0.2, 0.2);
  }
  /* gamma 1, beta 0, eps 0: mean 0 and (biased) variance 1. */
  ref_layernorm_fwd(x, g1, b0, N, 0.0, y, &mean, &rstd);
  double m = 0, v = 0, mx = 0, vx = 0;
  for (int i = 0; i < N; i++) {
    m += y[i] / N;
    v += y[i] * y[i] / N;
    mx += x[i] / N;
  }
  for (int i = 0; i < N; i++)
    vx += (x[i] - mx) * (x[i] - mx) / N;
  assert_close(m, 0, 1e-14);
  assert_close(v, 1, 1e-13);
  assert_close(mean, mx, 1e-14);
  assert_close(rstd, 1 / sqrt(vx), 1e-13);
  /* With eps the variance is var / (var + eps). */
  ref_layernorm_fwd(x, g1, b0, N, REF_NORM_EPS, y, NULL, NULL);
  v = 0;
  for (int i = 0; i < N; i++)
    v += y[i] * y[i] / N;
  assert_close(v, vx / (vx + REF_NORM_EPS), 1e-13);
  /* The affine part, and invariance under x -> a x + b (eps 0). */
  ref_layernorm_fwd(x, gamma, beta, N, REF_NORM_EPS, y2, NULL, NULL);
  for (int i = 0; i < N; i++)
    assert_close(y2[i], y[i] * gamma[i] + beta[i], 1e-13);
  double xs[N];
  for (int i = 0; i < N; i++)
    xs[i] = 3.5 * x[i] - 7;
  ref_layernorm_fwd(x, gamma, beta, N, 0.0, y, NULL, NULL);
  ref_layernorm_fwd(xs, gamma, beta, N, 0.0, y2, NULL, NULL);
  for (int i = 0; i < N; i++)
    assert_close(y2[i], y[i], 1e-13);
}

static void test_rmsnorm_forward(void) {
  double x[N], g1[N], y[N], gamma[N], rstd;
  for (int i = 0; i < N; i++) {
    x[i] = -2.5;
    g1[i] = 1;
    gamma[i] = rnd(2, i, 0.5, 1.5);
  }
  /* A constant row c: rstd = 1 / sqrt(c^2 + eps), y = c rstd gamma. */
  ref_rmsnorm_fwd(x, gamma, N, REF_NORM_EPS, y, &rstd);
  assert_close(rstd, 1 / sqrt(6.25 + REF_NORM_EPS), 1e-15);
  for (int i = 0; i < N; i++)
    assert_close(y[i], -2.5 / sqrt(6.25 + REF_NORM_EPS) * gamma[i], 1e-15);
  ref_rmsnorm_fwd(x, gamma, N, 0.0, y, NULL);
  for (int i = 0; i < N; i++)
    assert_close(y[i], -gamma[i], 1e-15);
  /* Random row, gamma 1, eps 0: unit mean square; no centring (a shifted
   * row normalises differently); scale invariance. */
  for (int i = 0; i < N; i++)
    x[i] = rnd(4, i, -1, 3);
  ref_rmsnorm_fwd(x, g1, N, 0.0, y, NULL);
  double ms = 0, m = 0;
  for (int i = 0; i < N; i++) {
    ms += y[i] * y[i] / N;
    m += y[i] / N;
  }
  assert_close(ms, 1, 1e-13);
  g_assert_true(fabs(m) > 0.1); /* the mean is not removed */
  double xs[N], y2[N];
  for (int i = 0; i < N; i++)
    xs[i] = 0.01 * x[i];
  ref_rmsnorm_fwd(xs, g1, N, 0.0, y2, NULL);
  for (int i = 0; i < N; i++)
    assert_close(y2[i], y[i], 1e-13);
}

/* L = sum dy y(x, gamma, beta), the scalar whose gradient the backward gives. */
static double ln_loss(const double *x, const double *gamma, const double *beta, const double *dy, int rms) {
  double y[N], l = 0;
  if (rms)
    ref_rmsnorm_fwd(x, gamma, N, REF_NORM_EPS, y, NULL);
  else
    ref_layernorm_fwd(x, gamma, beta, N, REF_NORM_EPS, y, NULL, NULL);
  for (int i = 0; i < N; i++)
    l += dy[i] * y[i];
  return l;
}

/* Central differences, step h: error O(h^2 f''') plus rounding O(eps / h). */
static void check_norm_backward(int rms) {
  double x[N], gamma[N], beta[N], dy[N], dx[N], dgamma[N], dbeta[N], mean = 0, rstd, y[N];
  const double h = 1e-5;
  for (int i = 0; i < N; i++) {
    x[i] = rnd(5, i, -2, 3);
    gamma[i] = rnd(6, i, 0.5, 1.5);
    beta[i] = rnd(7, i, -0.5, 0.5);
    dy[i] = rnd(8, i, -1, 1);
    dgamma[i] = dbeta[i] = 0;
  }
  if (rms) {
    ref_rmsnorm_fwd(x, gamma, N, REF_NORM_EPS, y, &rstd);
    ref_rmsnorm_bwd(x, dy, gamma, N, rstd, dx, dgamma);
  } else {
    ref_layernorm_fwd(x, gamma, beta, N, REF_NORM_EPS, y, &mean, &rstd);
    ref_layernorm_bwd(x, dy, gamma, N, mean, rstd, dx, dgamma, dbeta);
  }
  for (int i = 0; i < N; i++) {
    double s = x[i];
    x[i] = s + h;
    double lp = ln_loss(x, gamma, beta, dy, rms);
    x[i] = s - h;
    double lm = ln_loss(x, gamma, beta, dy, rms);
    x[i] = s;
    assert_close(dx[i], (lp - lm) / (2 * h), 1e-7);
    s = gamma[i];
    gamma[i] = s + h;
    lp = ln_loss(x, gamma, beta, dy, rms);
    gamma[i] = s - h;
    lm = ln_loss(x, gamma, beta, dy, rms);
    gamma[i] = s;
    assert_close(dgamma[i], (lp - lm) / (2 * h), 1e-7);
    if (!rms) {
      s = beta[i];
      beta[i] = s + h;
      lp = ln_loss(x, gamma, beta, dy, rms);
      beta[i] = s - h;
      lm = ln_loss(x, gamma, beta, dy, rms);
      beta[i] = s;
      assert_close(dbeta[i], (lp - lm) / (2 * h), 1e-7);
    }
  }
  /* dgamma and dbeta accumulate: a second row adds its contribution. */
  double dg1 = dgamma[3], db1 = dbeta[3];
  if (rms)
    ref_rmsnorm_bwd(x, dy, gamma, N, rstd, dx, dgamma);
  else
    ref_layernorm_bwd(x, dy, gamma, N, mean, rstd, dx, dgamma, dbeta);
  assert_close(dgamma[3], 2 * dg1, 1e-15);
  if (!rms)
    assert_close(dbeta[3], 2 * db1, 1e-15);
  /* Layernorm's output does not change when a constant is added to the
   * row, so its input gradient sums to zero (exactly, eps or not). */
  if (!rms) {
    double s = 0;
    for (int i = 0; i < N; i++)
      s += dx[i];
    assert_close(s, 0, 1e-12);
  }
}

static void test_layernorm_backward(void) {
  check_norm_backward(0);
}

static void test_rmsnorm_backward(void) {
  check_norm_backward(1);
}

/* --- GeLU and SwiGLU --- */

/* f'(x) by Richardson-extrapolated central differences: error O(h^4), here
 * about 1e-12 with rounding, so that a derivative wrong in its sixth digit
 * fails. */
static double deriv(double (*f)(double, double), double x, double other) {
  const double h = 1e-3;
  double d1 = (f(x + h, other) - f(x - h, other)) / (2 * h);
  double d2 = (f(x + h / 2, other) - f(x - h / 2, other)) / h;
  return (4 * d2 - d1) / 3;
}

static double gelu2(double x, double bias) {
  return ref_bias_gelu_fwd(x, bias);
}
static double swiglu_gate(double g, double u) {
  return ref_swiglu_fwd(g, u);
}
static double swiglu_up(double u, double g) {
  return ref_swiglu_fwd(g, u);
}

static void test_gelu(void) {
  assert_close(ref_gelu(0), 0, 0);
  assert_close(ref_gelu_grad(0), 0.5, 1e-15);
  for (int i = 0; i <= 240; i++) {
    double x = -6 + 0.05 * i;
    /* gelu(x) - gelu(-x) = x exactly, for any odd inner function of tanh. */
    assert_close(ref_gelu(x) - ref_gelu(-x), x, 1e-14);
    /* The derivative against finite differences (Megatron's 0.1070322243
     * differs from 3 0.044715 0.79788456 by 4e-10, which moves gelu' by
     * less than 3e-10). */
    assert_close(ref_gelu_grad(x), deriv(gelu2, x, 0.0), 1e-9);
    /* The tanh form approximates x Phi(x) to a few 1e-4 (Hendrycks and
     * Gimpel 2016): a wrong constant would not. */
    assert_close(ref_gelu(x), 0.5 * x * (1 + erf(x / sqrt(2.0))), 1e-3);
    /* bias: the same function of x + bias. */
    assert_close(ref_bias_gelu_fwd(x, 0.25), ref_gelu(x + 0.25), 0);
    assert_close(ref_bias_gelu_bwd(-1.5, x, 0.25), -1.5 * ref_gelu_grad(x + 0.25), 1e-15);
  }
  /* Large |x|: identity and zero. */
  assert_close(ref_gelu(10), 10, 1e-12);
  assert_close(ref_gelu(-10), 0, 1e-12);
  assert_close(ref_gelu_grad(10), 1, 1e-12);
}

static void test_swiglu(void) {
  assert_close(ref_silu(0), 0, 0);
  for (int i = 0; i < 400; i++) {
    double g = rnd(9, i, -8, 8), u = rnd(10, i, -3, 3), dy = rnd(11, i, -2, 2), dg, du;
    assert_close(ref_silu(g), g / (1 + exp(-g)), 1e-15 * (1 + fabs(g)));
    assert_close(ref_swiglu_fwd(g, u), ref_silu(g) * u, 1e-15 * (1 + fabs(g * u)));
    ref_swiglu_bwd(dy, g, u, &dg, &du);
    assert_close(dg, dy * deriv(swiglu_gate, g, u), 1e-9);
    assert_close(du, dy * deriv(swiglu_up, u, g), 1e-9);
  }
  double dg, du;
  ref_swiglu_bwd(2, 0, 3, &dg, &du); /* silu'(0) = 1/2 */
  assert_close(dg, 3, 1e-15);
  assert_close(du, 0, 0);
}

/* --- dropout --- */

static void test_dropout(void) {
  g_assert_cmpuint(REF_DROPOUT_KEEP_MIN, ==, (guint)ceil(REF_DROPOUT_P * 16777216.0));
  const int n = 1000000;
  int kept = 0;
  for (int i = 0; i < n; i++) {
    int k = ref_dropout_keep(42, (uint64_t)i);
    /* The same decision as gpu.cu's float comparison with p = 0.1f. */
    g_assert_cmpint(k, ==, (ref_mix(42 * 31 + (uint64_t)i) >> 8) * (1.0f / 16777216.0f) >= 0.1f);
    kept += k;
  }
  /* Binomial(n, 0.9): within 5 standard deviations. */
  assert_close(kept, 0.9 * n, 5 * sqrt(n * 0.9 * 0.1));
  /* Masks differ between seeds, and agree for the same seed. */
  int differ = 0;
  for (int i = 0; i < 1000; i++) {
    differ += ref_dropout_keep(1, (uint64_t)i) != ref_dropout_keep(2, (uint64_t)i);
    g_assert_cmpint(ref_dropout_keep(1, (uint64_t)i), ==, ref_dropout_keep(1, (uint64_t)i));
  }
  g_assert_cmpint(differ, >, 100);
  assert_close(ref_bias_dropout_add(0.5, 0.4, -1, 1, 0.1), -1 + 0.9 / 0.9, 1e-15);
  assert_close(ref_bias_dropout_add(0.5, 0.4, -1, 0, 0.1), -1, 0);
}

/* --- rotary --- */

static void test_rotary(void) {
  enum { D = 128 };
  double theta[D / 2], x[D], y[D], back[D], k[D];
  /* The angles: position times base^(-2j/d). */
  ref_rope_angles(3, D, REF_ROPE_BASE, theta);
  assert_close(theta[0], 3, 0);
  assert_close(theta[32], 3 * 0.01, 1e-15); /* 10000^(-64/128) */
  assert_close(theta[D / 2 - 1], 3 * pow(10000, -126.0 / 128), 1e-17);
  for (int i = 0; i < D; i++) {
    x[i] = rnd(12, i, -1, 1);
    k[i] = rnd(13, i, -1, 1);
  }
  /* Position 0 is the identity. */
  ref_rope_angles(0, D, REF_ROPE_BASE, theta);
  ref_rotary_fwd(x, theta, D, y);
  for (int i = 0; i < D; i++)
    assert_close(y[i], x[i], 0);
  for (int pos = 1; pos < 5000; pos += 617) {
    ref_rope_angles(pos, D, REF_ROPE_BASE, theta);
    ref_rotary_fwd(x, theta, D, y);
    ref_rotary_bwd(y, theta, D, back);
    for (int j = 0; j < D / 2; j++) {
      /* Forward then backward is the identity; each pair (j, j + d/2) keeps its norm. */
      assert_close(back[j], x[j], 1e-14);
      assert_close(back[j + D / 2], x[j + D / 2], 1e-14);
      assert_close(y[j] * y[j] + y[j + D / 2] * y[j + D / 2], x[j] * x[j] + x[j + D / 2] * x[j + D / 2], 1e-14);
    }
    /* The rotate-half layout: the first angle turns (x_0, x_{d/2}). */
    assert_close(y[0], x[0] * cos(pos) - x[D / 2] * sin(pos), 1e-15);
    assert_close(y[D / 2], x[D / 2] * cos(pos) + x[0] * sin(pos), 1e-15);
    /* The backward is the transpose: <R x, k> = <x, R^T k>. */
    double rt[D], a = 0, b = 0;
    ref_rotary_bwd(k, theta, D, rt);
    for (int i = 0; i < D; i++) {
      a += y[i] * k[i];
      b += x[i] * rt[i];
    }
    assert_close(a, b, 1e-13);
  }
  /* Relative positions: <R(p) x, R(q) k> depends on p - q only. */
  double t1[D / 2], t2[D / 2], rx[D], rk[D], dot[2];
  for (int c = 0; c < 2; c++) {
    ref_rope_angles(100 + 1000 * c, D, REF_ROPE_BASE, t1);
    ref_rope_angles(37 + 1000 * c, D, REF_ROPE_BASE, t2);
    ref_rotary_fwd(x, t1, D, rx);
    ref_rotary_fwd(k, t2, D, rk);
    dot[c] = 0;
    for (int i = 0; i < D; i++)
      dot[c] += rx[i] * rk[i];
  }
  assert_close(dot[0], dot[1], 1e-11);
}

/* --- E4M3 --- */

static void test_e4m3_codes(void) {
  /* Hand-derived values of the OCP table. */
  assert_close(ref_e4m3_to_double(0x00), 0, 0);
  assert_close(ref_e4m3_to_double(0x01), 0x1p-9, 0);
  assert_close(ref_e4m3_to_double(0x07), 7 * 0x1p-9, 0);
  assert_close(ref_e4m3_to_double(0x08), 0x1p-6, 0);
  assert_close(ref_e4m3_to_double(0x38), 1, 0);
  assert_close(ref_e4m3_to_double(0x3c), 1.5, 0);
  assert_close(ref_e4m3_to_double(0x7d), 416, 0);
  assert_close(ref_e4m3_to_double(0x7e), 448, 0);
  assert_close(ref_e4m3_to_double(0xfe), -448, 0);
  assert_close(ref_e4m3_to_double(0xb8), -1, 0);
  g_assert_true(isnan(ref_e4m3_to_double(0x7f)) && isnan(ref_e4m3_to_double(0xff)));
  g_assert_true(ref_e4m3_to_double(0x80) == 0 && signbit(ref_e4m3_to_double(0x80)));
  /* Every code round-trips; the magnitudes increase with the code. */
  int nan = 0;
  for (int c = 0; c < 256; c++) {
    double v = ref_e4m3_to_double((uint8_t)c);
    if (isnan(v)) {
      nan++;
      g_assert_cmphex(ref_e4m3_from_double(v), ==, 0x7f);
      continue;
    }
    g_assert_cmphex(ref_e4m3_from_double(v), ==, c);
    if ((c & 0x7f) > 0)
      g_assert_true(fabs(v) > fabs(ref_e4m3_to_double((uint8_t)(c - 1))));
  }
  g_assert_cmpint(nan, ==, 2);
}

/* The nearest code by search, ties to the even code. */
static uint8_t nearest_e4m3(double v) {
  double a = fabs(v), best = INFINITY;
  int code = 0;
  for (int c = 0; c <= 0x7e; c++) {
    double d = fabs(ref_e4m3_to_double((uint8_t)c) - a);
    if (d < best || (d == best && !(c & 1))) {
      best = d;
      code = c;
    }
  }
  return (uint8_t)(code | (signbit(v) ? 0x80 : 0));
}

static void test_e4m3_rounding(void) {
  static const struct {
    double v;
    uint8_t code;
  } cases[] = {
      /* subnormals (spacing 2^-9) */
      {0x1p-10, 0x00},                   /* tie between 0 and 2^-9: to 0 */
      {0x1p-10 + 0x1p-30, 0x01},         /* just above: up */
      {1.5 * 0x1p-9, 0x02},              /* tie between codes 1 and 2: to 2 */
      {2.5 * 0x1p-9, 0x02},              /* tie between 2 and 3: to 2 */
      {7.5 * 0x1p-9, 0x08},              /* tie between the last subnormal and 2^-6 */
      {-0x1p-11, 0x80},                  /* rounds to a negative zero */
      /* normals: between 1 and 2 the spacing is 1/8 */
      {1 + 1.0 / 16, 0x38},              /* tie between 1 and 1.125: to 1 */
      {1 + 3.0 / 16, 0x3a},              /* tie between 1.125 and 1.25: to 1.25 */
      {1 + 1.0 / 16 + 1e-9, 0x39},
      {1 + 15.0 / 16, 0x40},             /* tie between 1.875 and 2: carries to 2 */
      {17, 0x58},                        /* tie between 16 and 18: to 16 */
      {19, 0x5a},                        /* tie between 18 and 20: to 20 */
      {-19, 0xda},
      {400, 0x7c},                       /* tie between 384 and 416: to 384 */
      {432, 0x7e},                       /* tie between 416 and 448: to 448 */
      /* saturation */
      {448, 0x7e},
      {449, 0x7e},
      {464, 0x7e},
      {465, 0x7e},
      {1e30, 0x7e},
      {INFINITY, 0x7e},
      {-INFINITY, 0xfe},
      {-1000, 0xfe},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    if (ref_e4m3_from_double(cases[i].v) != cases[i].code)
      g_error("e4m3(%.17g) = 0x%02x, want 0x%02x", cases[i].v, ref_e4m3_from_double(cases[i].v), cases[i].code);
  }
  g_assert_cmphex(ref_e4m3_from_double(NAN), ==, 0x7f);
  g_assert_cmphex(ref_e4m3_from_double(0.0), ==, 0x00);
  g_assert_cmphex(ref_e4m3_from_double(-0.0), ==, 0x80);
  /* Random values over the whole range (log-uniform magnitudes from 2^-12
   * to 2^9, both signs) and the exact midpoints of neighbouring codes,
   * against the nearest code found by search. */
  for (int i = 0; i < 20000; i++) {
    double v = ldexp(1.0, -12) * pow(2.0, 21.0 * 0.5 * (1 + ref_urand(14, i)));
    if (ref_urand(15, i) < 0)
      v = -v;
    if (ref_e4m3_from_double(v) != nearest_e4m3(v))
      g_error("e4m3(%.17g) = 0x%02x, nearest 0x%02x", v, ref_e4m3_from_double(v), nearest_e4m3(v));
  }
  for (int c = 0; c < 0x7e; c++) {
    double mid = 0.5 * (ref_e4m3_to_double((uint8_t)c) + ref_e4m3_to_double((uint8_t)(c + 1)));
    g_assert_cmphex(ref_e4m3_from_double(mid), ==, (c & 1) ? c + 1 : c);
    g_assert_cmphex(ref_e4m3_from_double(-mid), ==, 0x80 | ((c & 1) ? c + 1 : c));
  }
}

static void test_fp8_scale(void) {
  double x[64];
  for (int i = 0; i < 64; i++)
    x[i] = rnd(16, i, -3, 3);
  x[17] = -5.25;
  double amax = ref_amax(x, 64);
  assert_close(amax, 5.25, 0);
  double s = ref_fp8_scale(amax, REF_E4M3_MAX, 0, 1.0);
  assert_close(s, 448 / 5.25, 1e-15);
  assert_close(ref_fp8_scale(amax, REF_E4M3_MAX, 2, 1.0), 448 / 5.25 / 4, 1e-15);
  assert_close(ref_fp8_scale(0, REF_E4M3_MAX, 0, 3.0), 3.0, 0);
  assert_close(ref_fp8_scale(INFINITY, REF_E4M3_MAX, 0, 3.0), 3.0, 0);
  assert_close(ref_fp8_scale(NAN, REF_E4M3_MAX, 0, 3.0), 3.0, 0);
  /* The largest magnitude maps to the largest code; every value comes back
   * within half a spacing: 2^-4 relative for normals, 2^-10 / scale
   * absolute below. */
  g_assert_cmphex(ref_fp8_quantize(x[17], s), ==, 0xfe);
  for (int i = 0; i < 64; i++) {
    double back = ref_fp8_dequantize(ref_fp8_quantize(x[i], s), s);
    assert_close(back, x[i], fmax(fabs(x[i]) * 0x1p-4, 0x1p-10 / s));
  }
  double nanx[3] = {1, NAN, -2};
  assert_close(ref_amax(nanx, 3), 2, 0);
  assert_close(ref_amax(nanx, 0), 0, 0);
}

/* --- cross entropy --- */

static void test_cross_entropy(void) {
  enum { V = 53 };
  double z[V], grad[V], zs[V], fdz[V];
  const double h = 1e-6;
  for (int i = 0; i < V; i++)
    z[i] = rnd(17, i, -6, 6);
  for (long long t = 0; t < V; t += 13) {
    RefXentRow st, st2;
    ref_xent_fwd(z, V, t, &st);
    /* The loss is -log softmax(z)_t, computed naively here. */
    double s = 0, mx = -INFINITY;
    for (int i = 0; i < V; i++) {
      s += exp(z[i]);
      mx = fmax(mx, z[i]);
    }
    assert_close(st.max, mx, 0);
    assert_close(st.sum_exp, s * exp(-mx), 1e-13 * st.sum_exp);
    assert_close(st.loss, -log(exp(z[t]) / s), 1e-13);
    /* The gradient sums to zero and is the loss's finite difference. */
    ref_xent_bwd(z, V, t, &st, 1.0, grad);
    double sum = 0;
    for (int i = 0; i < V; i++) {
      sum += grad[i];
      memcpy(fdz, z, sizeof z);
      fdz[i] = z[i] + h;
      ref_xent_fwd(fdz, V, t, &st2);
      double lp = st2.loss;
      fdz[i] = z[i] - h;
      ref_xent_fwd(fdz, V, t, &st2);
      assert_close(grad[i], (lp - st2.loss) / (2 * h), 1e-8);
    }
    assert_close(sum, 0, 1e-14);
    g_assert_true(grad[t] < 0);
    /* dloss scales the gradient. */
    double g2[V];
    ref_xent_bwd(z, V, t, &st, -0.25, g2);
    for (int i = 0; i < V; i++)
      assert_close(g2[i], -0.25 * grad[i], 1e-16);
    /* Shift invariance, and no overflow for large logits. */
    for (int i = 0; i < V; i++)
      zs[i] = z[i] + 1000;
    ref_xent_fwd(zs, V, t, &st2);
    assert_close(st2.loss, st.loss, 1e-11);
    assert_close(st2.sum_exp, st.sum_exp, 1e-12);
  }
  /* A target on another rank: loss log(sum_exp), gradient the softmax. */
  RefXentRow st;
  ref_xent_fwd(z, V, -1, &st);
  assert_close(st.loss, log(st.sum_exp), 0);
  ref_xent_fwd(z, V, V, &st);
  assert_close(st.loss, log(st.sum_exp), 0);
  ref_xent_bwd(z, V, V, &st, 1.0, grad);
  double sum = 0;
  for (int i = 0; i < V; i++) {
    g_assert_true(grad[i] > 0);
    sum += grad[i];
  }
  assert_close(sum, 1, 1e-14);
}

/* --- the FP8 scales' slots (fp8_slots.h) --- */

/* Marks [off, off + slot) used in `used` (n floats) and checks that the slot
 * is 16-byte aligned from the array's start, inside it and shared with no
 * other value. */
static void take_slot(guint8 *used, size_t n, size_t off) {
  g_assert_cmpuint(off * sizeof(float) % 16, ==, 0);
  g_assert_cmpuint(off + CALIB_FP8_SLOT_FLOATS, <=, n);
  for (size_t j = 0; j < CALIB_FP8_SLOT_FLOATS; j++) {
    g_assert_false(used[off + j]);
    used[off + j] = 1;
  }
}

static void test_fp8_slots(void) {
  /* cuBLASLt refuses an FP8 scale pointer off a 16-byte boundary. */
  g_assert_cmpuint(CALIB_FP8_SLOT_FLOATS * sizeof(float), ==, 16);
  /* The modern layer: each cast's scale, amax and scale_inv, and the
   * weights' scale_inv, in slots of their own that fill the array. */
  const size_t n = calib_layer_fp8_floats();
  guint8 *used = g_new0(guint8, n);
  for (int kind = 0; kind < CALIB_FP8_N_KINDS; kind++)
    for (unsigned c = 0; c < CALIB_LAYER_FP8_CASTS; c++)
      take_slot(used, n, calib_layer_fp8_offset((CalibFp8Kind)kind, c));
  take_slot(used, n, calib_layer_fp8_weight_offset());
  for (size_t i = 0; i < n; i++)
    g_assert_true(used[i]);
  g_free(used);
  /* The timed GEMM: A's and B's scales. */
  guint8 gemm[CALIB_GEMMLT_SCALE_FLOATS] = {0};
  take_slot(gemm, CALIB_GEMMLT_SCALE_FLOATS, calib_gemmlt_scale_offset(CALIB_GEMMLT_SCALE_A));
  take_slot(gemm, CALIB_GEMMLT_SCALE_FLOATS, calib_gemmlt_scale_offset(CALIB_GEMMLT_SCALE_B));
  /* The check the GPU rooms make before any call: every slot of an array
   * at a 256-byte boundary (cudaMalloc's, and carve()'s for the layer)
   * passes; a pointer one float on, as `scales + 1` was, is refused; no
   * scale at all (a bf16 GEMM) passes. */
  static _Alignas(256) float arena[4 * CALIB_FP8_N_KINDS * CALIB_LAYER_FP8_CASTS + 16];
  g_assert_cmpuint(G_N_ELEMENTS(arena), >=, n);
  for (int kind = 0; kind < CALIB_FP8_N_KINDS; kind++)
    for (unsigned c = 0; c < CALIB_LAYER_FP8_CASTS; c++) {
      const size_t off = calib_layer_fp8_offset((CalibFp8Kind)kind, c);
      g_assert_true(calib_fp8_aligned(arena + off));
      for (size_t j = 1; j < CALIB_FP8_SLOT_FLOATS; j++)
        g_assert_false(calib_fp8_aligned(arena + off + j));
    }
  g_assert_true(calib_fp8_aligned(arena + calib_layer_fp8_weight_offset()));
  g_assert_true(calib_fp8_aligned(arena + calib_gemmlt_scale_offset(CALIB_GEMMLT_SCALE_B)));
  g_assert_false(calib_fp8_aligned(arena + 1));
  g_assert_true(calib_fp8_aligned(NULL));
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/reference/mix-urand", test_mix_urand);
  g_test_add_func("/reference/bf16", test_bf16);
  g_test_add_func("/reference/op-names", test_op_names);
  g_test_add_func("/reference/layernorm-forward", test_layernorm_forward);
  g_test_add_func("/reference/rmsnorm-forward", test_rmsnorm_forward);
  g_test_add_func("/reference/layernorm-backward", test_layernorm_backward);
  g_test_add_func("/reference/rmsnorm-backward", test_rmsnorm_backward);
  g_test_add_func("/reference/gelu", test_gelu);
  g_test_add_func("/reference/swiglu", test_swiglu);
  g_test_add_func("/reference/dropout", test_dropout);
  g_test_add_func("/reference/rotary", test_rotary);
  g_test_add_func("/reference/e4m3-codes", test_e4m3_codes);
  g_test_add_func("/reference/e4m3-rounding", test_e4m3_rounding);
  g_test_add_func("/reference/fp8-scale", test_fp8_scale);
  g_test_add_func("/reference/cross-entropy", test_cross_entropy);
  g_test_add_func("/reference/fp8-slots", test_fp8_slots);
  return g_test_run();
}
