/* ptdsim — GEMM, flash-attention and memory-bound kernel times (formulas
 * in compute.h). */
#include "compute.h"

#include <math.h>
#include <string.h>

double model_gemm_flops(const ModelGemm *g) {
  return 2.0 * (double)g->batch * (double)g->m * (double)g->n * (double)g->k;
}

double model_gemm_bytes(const ModelGemm *g, double in_bytes, double out_bytes) {
  return (double)g->batch * (in_bytes * ((double)g->m * g->k + (double)g->k * g->n) + out_bytes * (double)g->m * g->n);
}

/* The FP8 GEMM model: its own block, or the 16-bit one. */
static const ModelGemmParams *gemm8(const ModelProfile *p) {
  return p->has_gemm_fp8 ? &p->gemm_fp8 : &p->gemm;
}

/* f of tile i at `peak` FLOP/s with operands of `bytes` each. */
static double tile_efficiency(const ModelGemmParams *q, guint i, double peak, double bytes) {
  if (q->tile_bytes_per_s <= 0)
    return 1;
  double tm = q->tile_m[i], tn = q->tile_n[i];
  double intensity = 2.0 * tm * tn / (bytes * (tm + tn)); /* FLOP per byte of operands */
  return fmin(1.0, intensity * q->tile_bytes_per_s / peak);
}

double model_tile_efficiency(const ModelProfile *p, guint i) {
  return tile_efficiency(&p->gemm, i, p->peak_flops, 2.0);
}

/* Time of the math alone at ceiling efficiency e_max, with tile `i`, at
 * `peak` with operands of `bytes`. */
static double tile_math_time_at(const ModelProfile *p, const ModelGemmParams *q, const ModelGemm *g, guint i,
                                double e_max, double peak, double bytes) {
  double tm = q->tile_m[i], tn = q->tile_n[i];
  double tiles = (double)g->batch * ceil((double)g->m / tm) * ceil((double)g->n / tn);
  double waves = ceil(tiles / (p->sms - p->sms_held)); /* each wave at the rate of the SMs it occupies */
  double launched = waves * p->sms * tm * tn;
  double useful = (double)g->batch * (double)g->m * (double)g->n;
  double q_share = useful / launched;
  double kf = (double)g->k / ((double)g->k + q->k_half);
  return model_gemm_flops(g) / (peak * e_max * tile_efficiency(q, i, peak, bytes) * q_share * kf);
}

/* The best tile's math time: the least of tile_math_time_at over the
 * tiles, the same number computed with what does not depend on the tile
 * computed once.  Each tile's time is the FLOPs over a rate; where every
 * rate is positive the least time is the FLOPs over the greatest rate
 * (a correctly rounded division is monotone in its divisor), one division
 * instead of one per tile. */
static double best_math(const ModelProfile *p, const ModelGemmParams *q, const ModelGemm *g, double e_max, double peak,
                        double bytes) {
  double flops = model_gemm_flops(g);
  double useful = (double)g->batch * (double)g->m * (double)g->n;
  double kf = (double)g->k / ((double)g->k + q->k_half);
  double rate[MODEL_PROFILE_MAX_TILES], top = 0;
  gboolean positive = TRUE;
  for (guint i = 0; i < q->n_tiles; i++) { /* tile_math_time_at's divisor */
    double tm = q->tile_m[i], tn = q->tile_n[i];
    double tiles = (double)g->batch * ceil((double)g->m / tm) * ceil((double)g->n / tn);
    double waves = ceil(tiles / (p->sms - p->sms_held));
    double launched = waves * p->sms * tm * tn;
    double q_share = useful / launched;
    rate[i] = peak * e_max * tile_efficiency(q, i, peak, bytes) * q_share * kf;
    positive = positive && rate[i] > 0;
    top = fmax(top, rate[i]);
  }
  if (q->n_tiles == 0)
    return INFINITY;
  if (positive && flops > 0)
    return flops / top;
  double best = INFINITY;
  for (guint i = 0; i < q->n_tiles; i++)
    best = fmin(best, flops / rate[i]);
  return best;
}

void model_gemm_best_tile(const ModelProfile *p, const ModelGemm *g, gboolean fp8, gboolean split_accumulation,
                          guint *tile_m, guint *tile_n) {
  const ModelGemmParams *q = fp8 ? gemm8(p) : &p->gemm;
  double peak = fp8 ? p->peak_fp8_flops * (split_accumulation ? p->gemm_fp8_split_accumulation : 1.0) : p->peak_flops;
  double best = INFINITY;
  *tile_m = *tile_n = 0;
  for (guint i = 0; i < q->n_tiles; i++) {
    double t = tile_math_time_at(p, q, g, i, 1.0, peak, fp8 ? 1.0 : 2.0);
    if (t < best)
      best = t, *tile_m = q->tile_m[i], *tile_n = q->tile_n[i];
  }
}

double model_gemm_math_time_s(const ModelProfile *p, const ModelGemm *g, double e_max) {
  return best_math(p, &p->gemm, g, e_max, p->peak_flops, 2.0);
}

double model_gemm_fp8_math_time_s(const ModelProfile *p, const ModelGemm *g) {
  return best_math(p, gemm8(p), g, 1.0, p->peak_fp8_flops, 1.0);
}

/* A GEMM with model `q` at `peak` with operands of `in_bytes` and an output
 * of `out_bytes` per element: launch + max(math over the best tile, bytes). */
static double gemm_time_at(const ModelProfile *p, const ModelGemmParams *q, const ModelGemm *g, double peak,
                           double in_bytes, double out_bytes) {
  if (g->batch == 0 || g->m == 0 || g->n == 0 || g->k == 0)
    return 0;
  double math = best_math(p, q, g, q->efficiency_max, peak, in_bytes) / p->sustained_clock_ratio;
  double mem = model_gemm_bytes(g, in_bytes, out_bytes) / (p->hbm_bytes_per_s * p->memory_efficiency * (1 - p->hbm_held));
  return p->kernel_launch_s + fmax(math, mem);
}

double model_gemm_time_s(const ModelProfile *p, const ModelGemm *g) {
  return gemm_time_at(p, &p->gemm, g, p->peak_flops, 2.0, 2.0);
}

double model_gemm_efficiency(const ModelProfile *p, const ModelGemm *g) {
  double t = model_gemm_time_s(p, g);
  return t > 0 ? model_gemm_flops(g) / t / p->peak_flops : 0;
}

double model_gemm_fp8_time_s(const ModelProfile *p, const ModelGemm *g, gboolean split_accumulation) {
  double peak = p->peak_fp8_flops * (split_accumulation ? p->gemm_fp8_split_accumulation : 1.0);
  return gemm_time_at(p, gemm8(p), g, peak, 1.0, 2.0);
}

/* --- memory-bound kernels --- */

static const char *mem_class_names[MODEL_MEM_N] = {"copy",    "norm",         "pointwise", "activation",
                                                    "softmax", "cross_entropy"};

const char *model_mem_class_name(ModelMemClass c) {
  return c < MODEL_MEM_N ? mem_class_names[c] : "?";
}

ModelMemClass model_mem_class_lookup(const char *name) {
  for (int i = 0; i < MODEL_MEM_N; i++)
    if (strcmp(name, mem_class_names[i]) == 0)
      return (ModelMemClass)i;
  return MODEL_MEM_N;
}

/* A fitted class surface: the class's gap plus the bytes at its L2 rate
 * when they fit in L2, its HBM rate otherwise. */
static double mem_class_time_s(const ModelProfile *p, const double *gap_s, const double *l2_bytes_per_s,
                               const double *hbm_bytes_per_s, ModelMemClass c, double bytes) {
  gboolean l2 = p->l2_bytes > 0 && bytes <= p->l2_bytes;
  double bw = l2 ? l2_bytes_per_s[c] : hbm_bytes_per_s[c] * (1 - p->hbm_held);
  return gap_s[c] + bytes / bw;
}

double model_mem_time_s(const ModelProfile *p, ModelMemClass c, double bytes) {
  if (bytes <= 0)
    return 0;
  if (!p->has_membound || c >= MODEL_MEM_N)
    return p->kernel_launch_s + bytes / (p->hbm_bytes_per_s * p->memory_efficiency * (1 - p->hbm_held));
  return mem_class_time_s(p, p->mem_gap_s, p->mem_l2_bytes_per_s, p->mem_hbm_bytes_per_s, c, bytes);
}

double model_mem_2021_time_s(const ModelProfile *p, ModelMemClass c, double bytes) {
  if (!p->has_membound_2021 || c >= MODEL_MEM_N || bytes <= 0)
    return model_mem_time_s(p, c, bytes);
  return mem_class_time_s(p, p->mem_2021_gap_s, p->mem_2021_l2_bytes_per_s, p->mem_2021_hbm_bytes_per_s, c, bytes);
}

double model_memop_time_s(const ModelProfile *p, double bytes) {
  return model_mem_time_s(p, MODEL_MEM_COPY, bytes);
}

/* --- flash attention as thread-block waves --- */

/* Sift-down insertion of a finishing time into a min-heap of `n`. */
static void heap_replace_top(double *h, guint n, double v) {
  guint i = 0;
  for (;;) {
    guint l = 2 * i + 1, r = l + 1, m = i;
    double mv = v;
    if (l < n && h[l] < mv)
      m = l, mv = h[l];
    if (r < n && h[r] < mv)
      m = r;
    if (m == i)
      break;
    h[i] = h[m];
    i = m;
  }
  h[i] = v;
}

/* Steps (tile_kv keys forward, tile_q queries backward) of block `i` of one
 * head: q queries at the end of kv positions, causal (a query sees the keys
 * up to its own position; kv - q earlier keys are context, seen whole). */
static guint64 block_steps(const ModelFlashPass *f, gboolean backward, gboolean causal, guint64 q, guint64 kv,
                           guint64 i) {
  if (!causal) /* every query sees every key */
    return backward ? (q + f->tile_q - 1) / f->tile_q : (kv + f->tile_kv - 1) / f->tile_kv;
  guint64 ctx = kv - q;
  if (!backward) { /* queries i tq .. min(q, (i+1) tq) - 1 see keys 0 .. ctx + their end */
    guint64 end = MIN(q, (i + 1) * f->tile_q);
    return (ctx + end + f->tile_kv - 1) / f->tile_kv;
  }
  /* keys i tkv ..: the queries at positions >= the block's first key */
  guint64 first = MAX(ctx, i * f->tile_kv);
  return (kv - first + f->tile_q - 1) / f->tile_q;
}

double model_flash_waves_time_s(const ModelProfile *p, gboolean backward, guint64 heads, guint64 q, guint64 kv,
                                guint64 d) {
  return model_flash_waves_time_any_s(p, backward, TRUE, heads, q, kv, d);
}

double model_flash_waves_time_any_s(const ModelProfile *p, gboolean backward, gboolean causal, guint64 heads,
                                    guint64 q, guint64 kv, guint64 d) {
  const ModelFlashPass *f = &p->flash[backward ? 1 : 0];
  if (heads == 0 || q == 0 || kv < q)
    return 0;
  guint64 own = backward ? kv : q, tile = backward ? f->tile_kv : f->tile_q;
  guint64 nb = (own + tile - 1) / tile; /* blocks of one head */
  guint all = (guint)MAX(1.0, p->sms * p->flash_ctas_per_sm); /* a slot's rate: the peak over all of them */
  guint slots = (guint)MAX(1.0, (p->sms - p->sms_held) * p->flash_ctas_per_sm); /* the slots blocks run in */
  double step_flops = 4.0 * f->tile_q * f->tile_kv * (double)d * (backward ? 2.5 : 1.0);
  double step = step_flops * all / (p->peak_flops * f->efficiency * p->sustained_clock_ratio);
  /* Blocks are dispatched in grid order, each head's with growing work (the
   * heaviest last, as FlashAttention-2's forward grid runs its query blocks;
   * the longest tail of the possible orders), to the first free slot. */
  double work = 0, last = 0;
  guint64 n = heads * nb;
  for (guint64 i = 0; i < nb; i++) {
    guint64 j = backward ? nb - 1 - i : i; /* backward: key blocks near the end see the fewest queries */
    double dur = f->cta_overhead_s + step * (double)block_steps(f, backward, causal, q, kv, j);
    work += dur;
    last = fmax(last, dur);
  }
  work *= (double)heads;
  double span;
  if (n <= slots)
    span = last; /* one wave: every block starts at once */
  else if (n <= 8ull * slots) {
    /* a few waves: the list schedule itself (on the stack for any
     * device's SM count; a larger slot count on the heap) */
    double stack[1024];
    double *h = slots <= G_N_ELEMENTS(stack) ? stack : g_new(double, slots);
    memset(h, 0, slots * sizeof *h);
    span = 0;
    for (guint64 b = 0; b < n; b++) {
      guint64 i = b % nb, j = backward ? nb - 1 - i : i;
      double end = h[0] + f->cta_overhead_s + step * (double)block_steps(f, backward, causal, q, kv, j);
      span = fmax(span, end);
      heap_replace_top(h, slots, end);
    }
    if (h != stack)
      g_free(h);
  } else
    span = (work - last) / slots + last; /* many waves: the slots stay balanced until the last, heaviest block */
  return p->kernel_launch_s + span;
}
