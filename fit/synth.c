/* ptdsim — synthetic measurements: what a profile predicts for a
 * calibration plan, with seeded noise (see fit.h calib_synthesize). */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <string.h>

#include "../models/compute.h"
#include "fit.h"

typedef struct {
  gsl_rng *rng;
  double noise;
} Noise;

static CalibTime noisy(Noise *nz, double seconds) {
  double med = seconds * 1e6 * exp(nz->noise * gsl_ran_gaussian(nz->rng, 1.0));
  CalibTime t = {med, med * exp(-2.0 * nz->noise), med * exp(-1.28 * nz->noise), med * exp(1.28 * nz->noise),
                 med * exp(2.0 * nz->noise), 50};
  return t;
}

static void synth_gemms(CalibMeasurements *m, const ModelProfile *p, const CalibPlan *plan, Noise *nz) {
  for (int dt = 0; dt < 2; dt++)
    for (guint i = 0; i < plan->gemm->len; i++) {
      const CalibPlanGemm *pg = &g_array_index(plan->gemm, CalibPlanGemm, i);
      CalibGemm g = {.batch = pg->batch, .m = pg->m, .n = pg->n, .k = pg->k};
      g_strlcpy(g.dtype, dt ? "bf16" : "fp16", sizeof g.dtype);
      g_strlcpy(g.op, pg->op, sizeof g.op);
      g_strlcpy(g.layout, pg->layout, sizeof g.layout);
      g_strlcpy(g.api, "cublas", sizeof g.api);
      ModelGemm mg = {g.batch, g.m, g.n, g.k};
      g.t = noisy(nz, model_gemm_time_s(p, &mg));
      g_array_append_val(m->gemm, g);
    }
  /* cuBLASLt: bf16, and fp8 where the device runs it (the forward with fast
   * accumulation, the gradients with split accumulation); each records the
   * tile the model's best choice is, as cuBLASLt reports its own. */
  for (int fp8 = 0; fp8 < 2; fp8++) {
    if (fp8 && !model_profile_supports(p, "fp8"))
      continue;
    for (guint i = 0; i < plan->gemmlt->len; i++) {
      const CalibPlanLtGemm *pg = &g_array_index(plan->gemmlt, CalibPlanLtGemm, i);
      CalibGemm g = {.batch = 1, .m = pg->m, .n = pg->n, .k = pg->k};
      g_strlcpy(g.dtype, fp8 ? "fp8" : "bf16", sizeof g.dtype);
      g_strlcpy(g.op, pg->op, sizeof g.op);
      g_strlcpy(g.layout, pg->layout, sizeof g.layout);
      g_strlcpy(g.api, "cublaslt", sizeof g.api);
      ModelGemm mg = {1, g.m, g.n, g.k};
      gboolean split = fp8 && strcmp(g.layout, "TN") != 0;
      model_gemm_best_tile(p, &mg, fp8, split, &g.tile_m, &g.tile_n);
      g.t = noisy(nz, fp8 ? model_gemm_fp8_time_s(p, &mg, split) : model_gemm_time_s(p, &mg));
      g_array_append_val(m->gemm, g);
    }
  }
}

/* A sustained loop where the profile's tensor-core clock settles below its
 * burst clock (sustained_clock_ratio < 1): the plan's 16-bit
 * CALIB_SUSTAINED_M x N x K GEMM's burst rate at the burst profile, then
 * eight chunks at the profile's sustained clock, each with its own noise. */
static void synth_sustained(CalibMeasurements *m, const ModelProfile *burst, const ModelProfile *sustained,
                            const CalibPlan *plan, Noise *nz) {
  CalibSustained x = {.m = CALIB_SUSTAINED_M, .n = CALIB_SUSTAINED_N, .k = CALIB_SUSTAINED_K,
                      .loop_s = plan->cfg.sustained_s, .n_chunks = 8};
  g_strlcpy(x.dtype, "bf16", sizeof x.dtype);
  ModelGemm mg = {1, x.m, x.n, x.k};
  double flops = model_gemm_flops(&mg);
  x.burst_tflops = flops / (noisy(nz, model_gemm_time_s(burst, &mg)).median_us * 1e6);
  for (guint i = 0; i < x.n_chunks; i++)
    x.chunk_tflops[i] = flops / (noisy(nz, model_gemm_time_s(sustained, &mg)).median_us * 1e6);
  g_array_append_val(m->sustained, x);
}

CalibMeasurements *calib_synthesize(const ModelProfile *p, const ModelNet *net, const CalibPlan *plan, double noise,
                                    gulong seed) {
  /* what the harness would time: bursts, at the clocks before a power
   * limit pulls them down (sustained_clock_ratio 1) */
  const ModelProfile *sustained = p;
  ModelProfile burst = calib_profile_at_burst(p);
  p = &burst;
  CalibMeasurements *m = calib_measurements_new();
  Noise nz = {gsl_rng_alloc(gsl_rng_mt19937), noise};
  gsl_rng_set(nz.rng, seed);
  m->tool = g_strdup("ptdsim fit --synthesize");
  m->host = g_strdup("none (synthetic)");
  m->date = g_strdup("none (synthetic)");
  m->synthetic = g_strdup_printf("made from profile %s with relative noise %g, seed %lu", p->name ? p->name : "?",
                                 noise, seed);
  m->warmup = 10;
  m->reps = 50;
  CalibDevice *d = &m->device;
  d->name = g_strdup_printf("synthetic %s", p->name ? p->name : "device");
  d->sms = p->sms;
  d->peak_tflops = p->peak_flops / 1e12;
  d->hbm_GBps = p->hbm_bytes_per_s / 1e9;
  d->memory_GiB = p->memory_bytes / 1073741824.0;
  d->peak_source = g_strdup("the source profile's peak_tflops");
  guint ranks = plan->cfg.gpus;
  d->gpus = ranks;

  synth_gemms(m, p, plan, &nz);
  for (guint i = 0; i < plan->membw_bytes->len; i++) {
    CalibMembw b = {.bytes = 2 * g_array_index(plan->membw_bytes, double, i)};
    b.t = noisy(&nz, model_memop_time_s(p, b.bytes));
    g_array_append_val(m->membw, b);
  }
  for (guint i = 0; i < plan->kernels->len; i++) {
    const CalibPlanKernel *pk = &g_array_index(plan->kernels, CalibPlanKernel, i);
    if (strcmp(pk->name, "attention") == 0)
      continue; /* needs the GEMMs' shapes: only real runs measure it */
    CalibKernel k = {.fused = pk->fused, .rows = pk->rows, .cols = pk->cols, .bytes = pk->bytes, .kernels = pk->kernels};
    g_strlcpy(k.name, pk->name, sizeof k.name);
    /* a fused kernel at its class's surface; the unfused chains as that
     * many copies' gaps and the bytes at the copy bandwidth */
    ModelMemClass c = calib_kernel_class(pk->name, pk->fused, pk->kernels);
    double s = c != MODEL_MEM_N ? model_mem_2021_time_s(p, c, pk->bytes)
                                             : pk->kernels * model_memop_time_s(p, 1) + model_memop_time_s(p, pk->bytes) -
                                                   model_memop_time_s(p, 1);
    k.t = noisy(&nz, s);
    g_array_append_val(m->kernels, k);
  }
  for (guint i = 0; i < plan->membound->len; i++) {
    const CalibPlanMembound *pb = &g_array_index(plan->membound, CalibPlanMembound, i);
    CalibMembound b = {.rows = pb->rows, .cols = pb->cols,
                       .bytes = pb->op->bytes_per_elem * (double)pb->rows * (double)pb->cols};
    g_strlcpy(b.op, pb->op->name, sizeof b.op);
    b.t = noisy(&nz, model_mem_time_s(p, pb->op->cls, b.bytes));
    g_array_append_val(m->membound, b);
  }
  if (p->flash_waves)
    for (guint i = 0; i < plan->attention->len; i++) {
      const CalibPlanAttention *pa = &g_array_index(plan->attention, CalibPlanAttention, i);
      CalibAttention a = {.causal = TRUE, .has_fwd = TRUE, .has_bwd = TRUE, .batch = pa->batch, .heads = pa->heads, .kv_heads = pa->kv_heads,
                          .seq = pa->seq, .head_dim = pa->head_dim};
      g_strlcpy(a.impl, "cudnn-sdpa", sizeof a.impl);
      g_strlcpy(a.dtype, "bf16", sizeof a.dtype);
      a.fwd = noisy(&nz, model_flash_time_s(p, pa->batch * pa->heads, pa->seq, pa->seq, pa->head_dim, FALSE));
      a.bwd = noisy(&nz, model_flash_time_s(p, pa->batch * pa->heads, pa->seq, pa->seq, pa->head_dim, TRUE));
      g_array_append_val(m->attention, a);
    }
  /* Whole layers: the 2021 layer of each 2021 shape, and the modern layer
   * of each (bf16 and fp8 where the device runs it; flash attention where
   * the profile has it). */
  for (guint si = 0; si < plan->cfg.n_shapes; si++) {
    const CalibLayerShape *c = &plan->cfg.shapes[si];
    if (!calib_shape_is_2021(c))
      continue;
    CalibLayer l = {.hidden = c->hidden, .heads = c->heads, .seq = c->seq, .micro_batch = c->micro_batch, .tp = c->tp,
                    .fused = TRUE, .has_recompute = TRUE};
    g_strlcpy(l.dtype, "fp16", sizeof l.dtype);
    g_array_append_val(m->layers, l);
  }
  for (guint i = 0; i < plan->modern->len; i++) {
    const CalibPlanModern *pm = &g_array_index(plan->modern, CalibPlanModern, i);
    const CalibLayerShape *c = &plan->cfg.shapes[pm->shape];
    if (pm->fp8 && !model_profile_supports(p, "fp8"))
      continue;
    CalibLayer l = {.hidden = c->hidden, .heads = c->heads, .seq = c->seq, .micro_batch = c->micro_batch, .tp = c->tp,
                    .kv_heads = c->kv_heads, .ffn = c->ffn, .llama = c->llama, .flash = p->flash_forward_efficiency > 0,
                    .sequence_parallel = pm->sequence_parallel, .fused = TRUE, .has_recompute = TRUE};
    g_strlcpy(l.dtype, pm->fp8 ? "fp8" : "bf16", sizeof l.dtype);
    g_array_append_val(m->layers, l);
  }
  for (guint i = 0; i < m->layers->len; i++) {
    CalibLayer *l = &g_array_index(m->layers, CalibLayer, i);
    ModelLayerCost lc;
    calib_layer_predict(p, l, &lc);
    double fwd = lc.fwd.seg_s[0] + lc.fwd.seg_s[1] + lc.fwd.seg_s[2];
    l->fwd = noisy(&nz, fwd);
    l->recompute = noisy(&nz, fwd); /* the same work (models/layer.h) */
    l->bwd = noisy(&nz, lc.bwd.seg_s[0] + lc.bwd.seg_s[1] + lc.bwd.seg_s[2]);
  }

  /* The harness's order: each GPU count, each collective, each size;
   * send/receive once, between two GPUs. */
  guint counts[16], nr = calib_plan_nccl_ranks(ranks, counts, G_N_ELEMENTS(counts));
  for (guint ri = 0; ri < nr; ri++)
    for (int op = 0; op < CALIB_N_COLL; op++) {
      guint r = op == CALIB_SENDRECV ? 2 : counts[ri];
      if (op == CALIB_SENDRECV && ri + 1 != nr)
        continue;
      for (guint i = 0; i < plan->nccl_bytes->len; i++) {
        double bytes = g_array_index(plan->nccl_bytes, double, i);
        if (!calib_plan_coll_fits((CalibCollOp)op, op == CALIB_SENDRECV ? ranks : r, bytes))
          continue;
        double s = op == CALIB_SENDRECV ? model_p2p_time_s(net, bytes, TRUE)
                                        : model_collective_time_s(net, (ModelCollOp)op, bytes, r, 1, NULL);
        if (!(s > 0))
          continue; /* one rank: nothing moves, nothing to fit */
        CalibColl cc = {(CalibCollOp)op, r, bytes, noisy(&nz, s)};
        g_array_append_val(m->coll, cc);
      }
    }
  if (sustained->sustained_clock_ratio < 1)
    synth_sustained(m, p, sustained, plan, &nz);
  gsl_rng_free(nz.rng);
  return m;
}
