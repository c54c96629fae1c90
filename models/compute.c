/* ptdsim — GEMM and memory-bound kernel times (formulas in compute.h). */
#include "compute.h"

#include <math.h>

double model_gemm_flops(const ModelGemm *g) {
  return 2.0 * (double)g->batch * (double)g->m * (double)g->n * (double)g->k;
}

/* f of tile i at `peak` FLOP/s with operands of `bytes` each. */
static double tile_efficiency(const ModelProfile *p, guint i, double peak, double bytes) {
  if (p->gemm_tile_bytes_per_s <= 0)
    return 1;
  double tm = p->tile_m[i], tn = p->tile_n[i];
  double intensity = 2.0 * tm * tn / (bytes * (tm + tn)); /* FLOP per byte of operands */
  return fmin(1.0, intensity * p->gemm_tile_bytes_per_s / peak);
}

double model_tile_efficiency(const ModelProfile *p, guint i) { return tile_efficiency(p, i, p->peak_flops, 2.0); }

/* Time of the math alone at the ceiling efficiency, with tile `i`, at
 * `peak` with operands of `bytes`. */
static double tile_math_time_at(const ModelProfile *p, const ModelGemm *g, guint i, double e_max, double peak,
                                double bytes) {
  double tm = p->tile_m[i], tn = p->tile_n[i];
  double tiles = (double)g->batch * ceil((double)g->m / tm) * ceil((double)g->n / tn);
  double waves = ceil(tiles / p->sms);
  double launched = waves * p->sms * tm * tn;
  double useful = (double)g->batch * (double)g->m * (double)g->n;
  double q = useful / launched;
  double kf = (double)g->k / ((double)g->k + p->gemm_k_half);
  return model_gemm_flops(g) / (peak * e_max * tile_efficiency(p, i, peak, bytes) * q * kf);
}

/* Time of the math alone at the ceiling efficiency, with tile `i`, for
 * 16-bit operands at the profile's peak. */
static double tile_math_time(const ModelProfile *p, const ModelGemm *g, guint i, double e_max) {
  return tile_math_time_at(p, g, i, e_max, p->peak_flops, 2.0);
}

double model_gemm_math_time_s(const ModelProfile *p, const ModelGemm *g, double e_max) {
  double best = INFINITY;
  for (guint i = 0; i < p->n_tiles; i++)
    best = fmin(best, tile_math_time(p, g, i, e_max));
  return best;
}

/* A GEMM at `peak` with operands of `in_bytes` and an output of
 * `out_bytes` per element: launch + max(math over the best tile, bytes). */
static double gemm_time_at(const ModelProfile *p, const ModelGemm *g, double peak, double in_bytes, double out_bytes) {
  if (g->batch == 0 || g->m == 0 || g->n == 0 || g->k == 0)
    return 0;
  double best = INFINITY;
  for (guint i = 0; i < p->n_tiles; i++)
    best = fmin(best, tile_math_time_at(p, g, i, p->gemm_efficiency_max, peak, in_bytes));
  double math = best / p->sustained_clock_ratio;
  double bytes = (double)g->batch *
                 (in_bytes * ((double)g->m * g->k + (double)g->k * g->n) + out_bytes * (double)g->m * g->n);
  double mem = bytes / (p->hbm_bytes_per_s * p->memory_efficiency);
  return p->kernel_launch_s + fmax(math, mem);
}

double model_gemm_time_s(const ModelProfile *p, const ModelGemm *g) { return gemm_time_at(p, g, p->peak_flops, 2.0, 2.0); }

double model_gemm_efficiency(const ModelProfile *p, const ModelGemm *g) {
  double t = model_gemm_time_s(p, g);
  return t > 0 ? model_gemm_flops(g) / t / p->peak_flops : 0;
}

double model_memop_time_s(const ModelProfile *p, double bytes) {
  if (bytes <= 0)
    return 0;
  return p->kernel_launch_s + bytes / (p->hbm_bytes_per_s * p->memory_efficiency);
}

double model_gemm_fp8_time_s(const ModelProfile *p, const ModelGemm *g) {
  return gemm_time_at(p, g, p->peak_fp8_flops, 1.0, 2.0);
}
