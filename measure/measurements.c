/* ptdsim — calibration measurements: JSON writer and validating reader. */
#include "measurements.h"

#include "../base/jsonutil.h"
#include "../base/outfile.h"
#include "../base/ranges.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK(calib-error-quark, calib_error)

static const char *coll_names[CALIB_N_COLL] = {"all_reduce", "all_gather", "reduce_scatter", "sendrecv"};

/* Bytes per element of rows x cols, bf16 (2 bytes) values, 1-byte masks
 * and FP8 outputs.  Sources: Megatron-Core's fused kernels and Transformer
 * Engine's (layernorm/rmsnorm forward and backward, bias_gelu_fusion,
 * bias_swiglu, bias_dropout_add_fused, apply_rotary_pos_emb,
 * cast_transpose with amax) and a one-pass vocab-parallel cross-entropy
 * with online softmax statistics (Milakov and Gimelshein 2018). */
const CalibMemboundOp calib_membound_ops[] = {
    {"layernorm.fwd", MODEL_MEM_NORM, 4, "reads x, writes y (cols: the hidden size)"},
    {"layernorm.bwd", MODEL_MEM_NORM, 6, "reads x and dy, writes dx; dgamma and dbeta as per-block partial sums"},
    {"rmsnorm.fwd", MODEL_MEM_NORM, 4, "reads x, writes y"},
    {"rmsnorm.bwd", MODEL_MEM_NORM, 6, "reads x and dy, writes dx; dgamma as per-block partial sums"},
    {"bias_gelu.fwd", MODEL_MEM_ACTIVATION, 4, "reads x, writes gelu(x + bias) (tanh form)"},
    {"bias_gelu.bwd", MODEL_MEM_ACTIVATION, 6, "reads dy and x, writes dx"},
    {"swiglu.fwd", MODEL_MEM_ACTIVATION, 6, "reads gate and up (2 cols), writes silu(gate) up (cols)"},
    {"swiglu.bwd", MODEL_MEM_ACTIVATION, 10, "reads dy, gate and up, writes dgate and dup"},
    {"bias_dropout_add.fwd", MODEL_MEM_POINTWISE, 7, "reads x and the residual, writes y and a 1-byte mask"},
    {"rotary.fwd", MODEL_MEM_POINTWISE, 4, "reads q or k (cols: heads x head_dim), writes it rotated (rotate-half)"},
    {"rotary.bwd", MODEL_MEM_POINTWISE, 4, "reads the gradient, writes it rotated back"},
    {"fp8_cast", MODEL_MEM_POINTWISE, 4, "reads bf16, writes E4M3 and its E4M3 transpose, reduces amax"},
    {"cross_entropy.fwd", MODEL_MEM_CROSS_ENTROPY, 2,
     "reads bf16 logits once (cols: the vocabulary shard), fp32 online max and sum of exponentials, writes a loss per row"},
    {"cross_entropy.bwd", MODEL_MEM_CROSS_ENTROPY, 4, "reads the logits, writes softmax minus one-hot, bf16"},
};
const guint calib_n_membound_ops = G_N_ELEMENTS(calib_membound_ops);

const CalibMemboundOp *calib_membound_op(const char *name) {
  for (guint i = 0; i < calib_n_membound_ops; i++)
    if (strcmp(calib_membound_ops[i].name, name) == 0)
      return &calib_membound_ops[i];
  return NULL;
}

ModelMemClass calib_kernel_class(const char *name, gboolean fused, guint kernels) {
  static const struct {
    const char *name;
    ModelMemClass cls;
  } kinds[] = {{"layernorm", MODEL_MEM_NORM},
               {"bias_gelu", MODEL_MEM_ACTIVATION},
               {"bias_dropout_add", MODEL_MEM_POINTWISE},
               {"scale_mask_softmax", MODEL_MEM_SOFTMAX}};
  for (guint i = 0; fused && kernels == 1 && i < G_N_ELEMENTS(kinds); i++)
    if (strcmp(name, kinds[i].name) == 0)
      return kinds[i].cls;
  return MODEL_MEM_N;
}

const char *calib_coll_name(CalibCollOp op) {
  return op < CALIB_N_COLL ? coll_names[op] : "?";
}

double calib_busbw_factor(CalibCollOp op, guint ranks) {
  double n = ranks;
  switch (op) {
  case CALIB_ALLREDUCE:
    return ranks > 1 ? 2.0 * (n - 1) / n : 0;
  case CALIB_ALLGATHER:
  case CALIB_REDUCESCATTER:
    return ranks > 1 ? (n - 1) / n : 0;
  case CALIB_SENDRECV:
  default:
    return 1;
  }
}

CalibMeasurements *calib_measurements_new(void) {
  CalibMeasurements *m = g_new0(CalibMeasurements, 1);
  m->gemm = g_array_new(FALSE, TRUE, sizeof(CalibGemm));
  m->membw = g_array_new(FALSE, TRUE, sizeof(CalibMembw));
  m->kernels = g_array_new(FALSE, TRUE, sizeof(CalibKernel));
  m->layers = g_array_new(FALSE, TRUE, sizeof(CalibLayer));
  m->coll = g_array_new(FALSE, TRUE, sizeof(CalibColl));
  m->attention = g_array_new(FALSE, TRUE, sizeof(CalibAttention));
  m->membound = g_array_new(FALSE, TRUE, sizeof(CalibMembound));
  m->sustained = g_array_new(FALSE, TRUE, sizeof(CalibSustained));
  m->overlap = g_array_new(FALSE, TRUE, sizeof(CalibOverlap));
  m->failures = g_ptr_array_new_with_free_func(g_free);
  m->skipped = g_ptr_array_new_with_free_func(g_free);
  return m;
}

void calib_measurements_free(CalibMeasurements *m) {
  if (!m)
    return;
  char **strs[] = {&m->tool, &m->host, &m->date, &m->synthetic, &m->source, &m->device.name, &m->device.compute_capability,
                   &m->device.peak_source, &m->device.driver, &m->device.cuda_runtime, &m->device.cublas,
                   &m->device.cublaslt, &m->device.nccl, &m->device.cudnn};
  for (guint i = 0; i < G_N_ELEMENTS(strs); i++)
    g_free(*strs[i]);
  g_array_free(m->gemm, TRUE);
  g_array_free(m->membw, TRUE);
  g_array_free(m->kernels, TRUE);
  g_array_free(m->layers, TRUE);
  g_array_free(m->coll, TRUE);
  g_array_free(m->attention, TRUE);
  g_array_free(m->membound, TRUE);
  g_array_free(m->sustained, TRUE);
  g_array_free(m->overlap, TRUE);
  g_ptr_array_free(m->failures, TRUE);
  g_ptr_array_free(m->skipped, TRUE);
  g_free(m);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Linear interpolation between order statistics (the common "type 7"
 * quantile). */
static double quantile(const double *sorted, guint n, double q) {
  double pos = q * (n - 1);
  guint lo = (guint)floor(pos);
  guint hi = lo + 1 < n ? lo + 1 : lo;
  return sorted[lo] + (pos - lo) * (sorted[hi] - sorted[lo]);
}

/* The median of the second half of n samples (the later half, with the
 * middle one when n is odd): n >= 1. */
static double second_half_median(const double *x, guint n) {
  guint from = n / 2, k = n - from;
  double *v = g_memdup2(x + from, sizeof *x * k);
  CalibTime t = calib_time_from_samples(v, k);
  g_free(v);
  return t.median_us;
}

double calib_sustained_tflops(const CalibSustained *s) { return second_half_median(s->chunk_tflops, s->n_chunks); }

double calib_sustained_clock_MHz(const CalibSustained *s) {
  return s->n_clock ? second_half_median(s->clock_MHz, s->n_clock) : 0;
}

double calib_sustained_power_W(const CalibSustained *s) {
  return s->n_power ? second_half_median(s->power_W, s->n_power) : 0;
}

CalibTime calib_time_from_samples(double *s, guint n) {
  CalibTime t = {0, 0, 0, 0, 0, n};
  if (n == 0)
    return t;
  qsort(s, n, sizeof *s, cmp_double);
  t.median_us = quantile(s, n, 0.5);
  t.min_us = s[0];
  t.max_us = s[n - 1];
  t.p10_us = quantile(s, n, 0.1);
  t.p90_us = quantile(s, n, 0.9);
  return t;
}

/* --- writing --- */

static void add_time(cJSON *o, const char *key, const CalibTime *t) {
  char name[48];
  g_snprintf(name, sizeof name, "%s_us", key);
  cJSON_AddNumberToObject(o, name, t->median_us);
  g_snprintf(name, sizeof name, "%s_spread_us", key);
  cJSON *s = cJSON_AddObjectToObject(o, name);
  cJSON_AddNumberToObject(s, "min", t->min_us);
  cJSON_AddNumberToObject(s, "p10", t->p10_us);
  cJSON_AddNumberToObject(s, "p90", t->p90_us);
  cJSON_AddNumberToObject(s, "max", t->max_us);
  cJSON_AddNumberToObject(s, "reps", t->reps);
}

static void add_str(cJSON *o, const char *key, const char *v) {
  cJSON_AddStringToObject(o, key, v ? v : "unknown");
}

cJSON *calib_measurements_to_json(const CalibMeasurements *m) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "format", CALIB_FORMAT);
  cJSON_AddNumberToObject(root, "version", CALIB_FORMAT_VERSION);
  add_str(root, "tool", m->tool);
  add_str(root, "host", m->host);
  add_str(root, "date", m->date);
  if (m->synthetic)
    cJSON_AddStringToObject(root, "synthetic", m->synthetic);
  if (m->source)
    cJSON_AddStringToObject(root, "source", m->source);
  if (m->skipped->len > 0) {
    cJSON *f = cJSON_AddArrayToObject(root, "skipped");
    for (guint i = 0; i < m->skipped->len; i++)
      cJSON_AddItemToArray(f, cJSON_CreateString(g_ptr_array_index(m->skipped, i)));
  }
  if (m->failures->len > 0) {
    cJSON *f = cJSON_AddArrayToObject(root, "failures");
    for (guint i = 0; i < m->failures->len; i++)
      cJSON_AddItemToArray(f, cJSON_CreateString(g_ptr_array_index(m->failures, i)));
  }
  cJSON *units = cJSON_AddObjectToObject(root, "units");
  cJSON_AddStringToObject(units, "time", "us");
  cJSON_AddStringToObject(units, "size", "bytes");
  cJSON *timing = cJSON_AddObjectToObject(root, "timing");
  cJSON_AddStringToObject(timing, "method", "CUDA events around each repetition, after warm-up, each repetition queued behind a GPU spin so the "
                          "host's launch latency is not timed; median reported");
  cJSON_AddNumberToObject(timing, "warmup", m->warmup);
  cJSON_AddNumberToObject(timing, "reps", m->reps);

  const CalibDevice *d = &m->device;
  cJSON *dev = cJSON_AddObjectToObject(root, "device");
  add_str(dev, "name", d->name);
  add_str(dev, "compute_capability", d->compute_capability);
  cJSON_AddNumberToObject(dev, "sms", d->sms);
  cJSON_AddNumberToObject(dev, "sm_clock_MHz", d->sm_clock_MHz);
  cJSON_AddNumberToObject(dev, "memory_clock_MHz", d->memory_clock_MHz);
  cJSON_AddNumberToObject(dev, "memory_bus_bits", d->memory_bus_bits);
  cJSON_AddNumberToObject(dev, "memory_GiB", d->memory_GiB);
  cJSON_AddNumberToObject(dev, "hbm_GBps", d->hbm_GBps);
  cJSON_AddNumberToObject(dev, "peak_tflops", d->peak_tflops);
  if (d->l2_MiB > 0)
    cJSON_AddNumberToObject(dev, "l2_MiB", d->l2_MiB);
  add_str(dev, "peak_source", d->peak_source);
  cJSON_AddNumberToObject(dev, "gpus", d->gpus);
  add_str(dev, "driver", d->driver);
  add_str(dev, "cuda_runtime", d->cuda_runtime);
  add_str(dev, "cublas", d->cublas);
  add_str(dev, "cublaslt", d->cublaslt);
  add_str(dev, "nccl", d->nccl);
  if (d->cudnn)
    add_str(dev, "cudnn", d->cudnn);

  cJSON *arr = cJSON_AddArrayToObject(root, "gemm");
  for (guint i = 0; i < m->gemm->len; i++) {
    const CalibGemm *g = &g_array_index(m->gemm, CalibGemm, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "dtype", g->dtype);
    cJSON_AddStringToObject(o, "op", g->op);
    cJSON_AddStringToObject(o, "layout", g->layout[0] ? g->layout : "NN");
    if (g->api[0] && strcmp(g->api, "cublas") != 0)
      cJSON_AddStringToObject(o, "api", g->api);
    if (g->tile_m && g->tile_n) {
      int tile[2] = {(int)g->tile_m, (int)g->tile_n};
      cJSON_AddItemToObject(o, "tile", cJSON_CreateIntArray(tile, 2));
    }
    cJSON_AddNumberToObject(o, "batch", (double)g->batch);
    cJSON_AddNumberToObject(o, "m", (double)g->m);
    cJSON_AddNumberToObject(o, "n", (double)g->n);
    cJSON_AddNumberToObject(o, "k", (double)g->k);
    add_time(o, "time", &g->t);
    cJSON_AddNumberToObject(o, "tflops",
                            2.0 * (double)g->batch * (double)g->m * (double)g->n * (double)g->k / (g->t.median_us * 1e6));
    cJSON_AddItemToArray(arr, o);
  }
  arr = cJSON_AddArrayToObject(root, "membw");
  for (guint i = 0; i < m->membw->len; i++) {
    const CalibMembw *b = &g_array_index(m->membw, CalibMembw, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kernel", "device-to-device copy");
    cJSON_AddNumberToObject(o, "bytes", b->bytes);
    add_time(o, "time", &b->t);
    cJSON_AddNumberToObject(o, "GBps", b->bytes / (b->t.median_us * 1e3));
    cJSON_AddItemToArray(arr, o);
  }
  arr = cJSON_AddArrayToObject(root, "kernels");
  for (guint i = 0; i < m->kernels->len; i++) {
    const CalibKernel *k = &g_array_index(m->kernels, CalibKernel, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", k->name);
    cJSON_AddBoolToObject(o, "fused", k->fused);
    cJSON_AddNumberToObject(o, "rows", (double)k->rows);
    cJSON_AddNumberToObject(o, "cols", (double)k->cols);
    cJSON_AddNumberToObject(o, "bytes", k->bytes);
    cJSON_AddNumberToObject(o, "kernels", k->kernels);
    add_time(o, "time", &k->t);
    cJSON_AddItemToArray(arr, o);
  }
  arr = cJSON_AddArrayToObject(root, "layer");
  for (guint i = 0; i < m->layers->len; i++) {
    const CalibLayer *l = &g_array_index(m->layers, CalibLayer, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "hidden", l->hidden);
    cJSON_AddNumberToObject(o, "heads", l->heads);
    cJSON_AddNumberToObject(o, "seq", l->seq);
    cJSON_AddNumberToObject(o, "micro_batch", l->micro_batch);
    cJSON_AddNumberToObject(o, "tp", l->tp);
    cJSON_AddBoolToObject(o, "fused", l->fused);
    if (l->llama || l->flash || l->kv_heads || l->ffn || l->sequence_parallel ||
        (l->dtype[0] && strcmp(l->dtype, "fp16") != 0)) {
      cJSON_AddNumberToObject(o, "kv_heads", l->kv_heads ? l->kv_heads : l->heads);
      cJSON_AddNumberToObject(o, "ffn", l->ffn ? l->ffn : 4 * l->hidden);
      cJSON_AddStringToObject(o, "style", l->llama ? "llama" : "gpt");
      cJSON_AddStringToObject(o, "dtype", l->dtype[0] ? l->dtype : "fp16");
      cJSON_AddStringToObject(o, "attention", l->flash ? "flash" : "megatron");
      cJSON_AddBoolToObject(o, "sequence_parallel", l->sequence_parallel);
    }
    add_time(o, "forward", &l->fwd);
    add_time(o, "backward", &l->bwd);
    if (l->has_recompute)
      add_time(o, "recompute", &l->recompute);
    cJSON_AddItemToArray(arr, o);
  }
  if (m->attention->len > 0) {
    arr = cJSON_AddArrayToObject(root, "attention");
    for (guint i = 0; i < m->attention->len; i++) {
      const CalibAttention *a = &g_array_index(m->attention, CalibAttention, i);
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "impl", a->impl);
      cJSON_AddStringToObject(o, "dtype", a->dtype);
      cJSON_AddBoolToObject(o, "causal", a->causal);
      cJSON_AddNumberToObject(o, "batch", (double)a->batch);
      cJSON_AddNumberToObject(o, "heads", (double)a->heads);
      cJSON_AddNumberToObject(o, "kv_heads", (double)a->kv_heads);
      cJSON_AddNumberToObject(o, "seq", (double)a->seq);
      cJSON_AddNumberToObject(o, "head_dim", (double)a->head_dim);
      if (a->has_fwd)
        add_time(o, "forward", &a->fwd);
      if (a->has_bwd)
        add_time(o, "backward", &a->bwd);
      cJSON_AddItemToArray(arr, o);
    }
  }
  if (m->membound->len > 0) {
    arr = cJSON_AddArrayToObject(root, "membound");
    for (guint i = 0; i < m->membound->len; i++) {
      const CalibMembound *b = &g_array_index(m->membound, CalibMembound, i);
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "op", b->op);
      cJSON_AddNumberToObject(o, "rows", (double)b->rows);
      cJSON_AddNumberToObject(o, "cols", (double)b->cols);
      cJSON_AddNumberToObject(o, "bytes", b->bytes);
      add_time(o, "time", &b->t);
      cJSON_AddNumberToObject(o, "GBps", b->bytes / (b->t.median_us * 1e3));
      cJSON_AddItemToArray(arr, o);
    }
  }
  if (m->sustained->len > 0) {
    arr = cJSON_AddArrayToObject(root, "sustained");
    for (guint i = 0; i < m->sustained->len; i++) {
      const CalibSustained *x = &g_array_index(m->sustained, CalibSustained, i);
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "op", "gemm");
      cJSON_AddStringToObject(o, "dtype", x->dtype);
      cJSON_AddNumberToObject(o, "m", (double)x->m);
      cJSON_AddNumberToObject(o, "n", (double)x->n);
      cJSON_AddNumberToObject(o, "k", (double)x->k);
      cJSON_AddNumberToObject(o, "burst_tflops", x->burst_tflops);
      cJSON_AddNumberToObject(o, "loop_s", x->loop_s);
      cJSON_AddItemToObject(o, "chunk_tflops", cJSON_CreateDoubleArray(x->chunk_tflops, (int)x->n_chunks));
      if (x->n_clock)
        cJSON_AddItemToObject(o, "clock_MHz", cJSON_CreateDoubleArray(x->clock_MHz, (int)x->n_clock));
      if (x->n_power)
        cJSON_AddItemToObject(o, "power_W", cJSON_CreateDoubleArray(x->power_W, (int)x->n_power));
      if (x->power_limit_W > 0)
        cJSON_AddNumberToObject(o, "power_limit_W", x->power_limit_W);
      cJSON_AddNumberToObject(o, "sustained_tflops", calib_sustained_tflops(x));
      cJSON_AddItemToArray(arr, o);
    }
  }
  if (m->overlap->len > 0) {
    arr = cJSON_AddArrayToObject(root, "overlap");
    for (guint i = 0; i < m->overlap->len; i++) {
      const CalibOverlap *x = &g_array_index(m->overlap, CalibOverlap, i);
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "dtype", x->dtype);
      cJSON_AddNumberToObject(o, "m", (double)x->m);
      cJSON_AddNumberToObject(o, "n", (double)x->n);
      cJSON_AddNumberToObject(o, "k", (double)x->k);
      cJSON_AddStringToObject(o, "with", x->with);
      if (strcmp(x->with, "copy") == 0)
        cJSON_AddNumberToObject(o, "blocks", x->blocks);
      else
        cJSON_AddNumberToObject(o, "ranks", x->ranks);
      cJSON_AddNumberToObject(o, "bytes", x->bytes);
      cJSON_AddNumberToObject(o, "gemm_us", x->gemm_us);
      cJSON_AddNumberToObject(o, "gemm_beside_us", x->gemm_beside_us);
      cJSON_AddNumberToObject(o, "moved_GBps", x->moved_GBps);
      cJSON_AddNumberToObject(o, "moved_beside_GBps", x->moved_beside_GBps);
      if (x->mem_bytes > 0) {
        cJSON_AddNumberToObject(o, "mem_bytes", x->mem_bytes);
        cJSON_AddNumberToObject(o, "mem_us", x->mem_us);
        cJSON_AddNumberToObject(o, "mem_beside_us", x->mem_beside_us);
        cJSON_AddNumberToObject(o, "moved_beside_mem_GBps", x->moved_beside_mem_GBps);
      }
      cJSON_AddItemToArray(arr, o);
    }
  }
  arr = cJSON_AddArrayToObject(root, "nccl");
  for (guint i = 0; i < m->coll->len; i++) {
    const CalibColl *c = &g_array_index(m->coll, CalibColl, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "op", calib_coll_name(c->op));
    cJSON_AddNumberToObject(o, "ranks", c->ranks);
    cJSON_AddNumberToObject(o, "bytes", c->bytes);
    add_time(o, "time", &c->t);
    double algbw = c->bytes / (c->t.median_us * 1e3);
    cJSON_AddNumberToObject(o, "algbw_GBps", algbw);
    cJSON_AddNumberToObject(o, "busbw_GBps", algbw * calib_busbw_factor(c->op, c->ranks));
    cJSON_AddItemToArray(arr, o);
  }
  return root;
}

gboolean calib_measurements_save(const CalibMeasurements *m, const char *path, GError **error) {
  cJSON *json = calib_measurements_to_json(m);
  char *text = cJSON_Print(json);
  cJSON_Delete(json);
  gboolean ok = ptd_write_file(path, "-o", NULL, text, strlen(text), error);
  cJSON_free(text);
  return ok;
}

/* --- reading --- */

typedef struct {
  const char *file;
  char where[64]; /* "gemm[3]" */
  GError **error;
} Reader;

static gboolean bad(Reader *r, const char *key, const char *why) {
  g_set_error(r->error, CALIB_ERROR, CALIB_ERROR_INVALID, "%s: %s%s'%s' %s", r->file, r->where, r->where[0] ? "." : "",
              key, why);
  return FALSE;
}

/* Checks the value `it` found under `key` (NULL: the key is absent) and
 * stores it in *out. */
static gboolean check_num(Reader *r, const cJSON *it, const char *key, const PtdRange *range, double *out) {
  if (!it)
    return bad(r, key, "is missing");
  if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
    return bad(r, key, "must be a number");
  if (range->whole && it->valuedouble != floor(it->valuedouble))
    return bad(r, key, "must be a whole number");
  GError *out_of_range = NULL;
  if (!ptd_range_check(it->valuedouble, range, r->file, key, &out_of_range)) {
    char text[64], why[160];
    g_error_free(out_of_range);
    ptd_range_text(range, text, sizeof text);
    g_snprintf(why, sizeof why, "is %g, outside %s; give a value in that range", it->valuedouble, text);
    return bad(r, key, why);
  }
  *out = it->valuedouble;
  return TRUE;
}

static gboolean get_num(Reader *r, const cJSON *o, const char *key, const PtdRange *range, double *out) {
  return check_num(r, cJSON_GetObjectItemCaseSensitive(o, key), key, range, out);
}

/* get_num for an optional key: *out keeps its default when the key is absent. */
static gboolean opt_num(Reader *r, const cJSON *o, const char *key, const PtdRange *range, double *out) {
  return !cJSON_GetObjectItemCaseSensitive(o, key) || get_num(r, o, key, range, out);
}

static gboolean get_count(Reader *r, const cJSON *o, const char *key, guint64 *out) {
  double v;
  if (!get_num(r, o, key, &ptd_range_count, &v))
    return FALSE;
  *out = (guint64)v;
  return TRUE;
}

static char *get_str(Reader *r, const cJSON *o, const char *key) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!it) {
    bad(r, key, "is missing");
    return NULL;
  }
  if (!cJSON_IsString(it) || !it->valuestring[0]) {
    bad(r, key, "must be a non-empty string");
    return NULL;
  }
  return it->valuestring;
}

static char *opt_str(const cJSON *o, const char *key) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(it) ? g_strdup(it->valuestring) : NULL;
}

/* A median time "KEY_us" and its optional spread. */
static gboolean get_time(Reader *r, const cJSON *o, const char *key, CalibTime *t) {
  char name[48];
  g_snprintf(name, sizeof name, "%s_us", key);
  if (!get_num(r, o, name, &ptd_range_time_us, &t->median_us))
    return FALSE;
  t->min_us = t->p10_us = t->p90_us = t->max_us = t->median_us;
  t->reps = 1;
  g_snprintf(name, sizeof name, "%s_spread_us", key);
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, name);
  if (s) {
    double v[4], reps;
    const char *k[4] = {"min", "p10", "p90", "max"};
    char where[64];
    memcpy(where, r->where, sizeof where);
    g_snprintf(r->where, sizeof r->where, "%s.%s", where, name);
    for (int i = 0; i < 4; i++)
      if (!get_num(r, s, k[i], &ptd_range_time_us, &v[i]))
        return FALSE;
    if (!get_num(r, s, "reps", &ptd_range_count, &reps))
      return FALSE;
    memcpy(r->where, where, sizeof where);
    t->min_us = v[0], t->p10_us = v[1], t->p90_us = v[2], t->max_us = v[3];
    t->reps = (guint)reps;
  }
  return TRUE;
}

static const cJSON *get_array(Reader *r, const cJSON *root, const char *key) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, key);
  if (!a) {
    bad(r, key, "is missing (give an empty list if that mode was not run)");
    return NULL;
  }
  if (!cJSON_IsArray(a)) {
    bad(r, key, "must be a list");
    return NULL;
  }
  return a;
}

static gboolean read_header(Reader *r, const cJSON *root, CalibMeasurements *m) {
  const char *fmt = get_str(r, root, "format");
  double version;
  if (!fmt)
    return FALSE;
  if (strcmp(fmt, CALIB_FORMAT) != 0)
    return bad(r, "format", "must be \"" CALIB_FORMAT "\" (is this a measurements file from ptdsim-calibrate?)");
  if (!get_num(r, root, "version", &ptd_range_count, &version))
    return FALSE;
  if (version != CALIB_FORMAT_VERSION)
    return bad(r, "version", "must be 1 (this ptdsim reads measurement format version 1)");
  const cJSON *units = cJSON_GetObjectItemCaseSensitive(root, "units");
  if (!cJSON_IsObject(units))
    return bad(r, "units", "is missing; it must be {\"time\": \"us\", \"size\": \"bytes\"}");
  const char *tu = get_str(r, units, "time"), *su = tu ? get_str(r, units, "size") : NULL;
  if (!su)
    return FALSE;
  if (strcmp(tu, "us") != 0) {
    g_set_error(r->error, CALIB_ERROR, CALIB_ERROR_INVALID,
                "%s: units.time is \"%s\"; measurements must be in microseconds (\"us\"): convert the file", r->file,
                tu);
    return FALSE;
  }
  if (strcmp(su, "bytes") != 0) {
    g_set_error(r->error, CALIB_ERROR, CALIB_ERROR_INVALID,
                "%s: units.size is \"%s\"; sizes must be in bytes (\"bytes\"): convert the file", r->file, su);
    return FALSE;
  }
  m->tool = opt_str(root, "tool");
  m->host = opt_str(root, "host");
  m->date = opt_str(root, "date");
  m->synthetic = opt_str(root, "synthetic");
  m->source = opt_str(root, "source");
  const cJSON *failed, *skipped;
  cJSON_ArrayForEach(skipped, cJSON_GetObjectItemCaseSensitive(root, "skipped")) {
    if (cJSON_IsString(skipped))
      g_ptr_array_add(m->skipped, g_strdup(skipped->valuestring));
  }
  cJSON_ArrayForEach(failed, cJSON_GetObjectItemCaseSensitive(root, "failures")) {
    if (cJSON_IsString(failed))
      g_ptr_array_add(m->failures, g_strdup(failed->valuestring));
  }
  const cJSON *timing = cJSON_GetObjectItemCaseSensitive(root, "timing");
  double warmup = 0, reps = 0;
  if (timing) {
    g_strlcpy(r->where, "timing", sizeof r->where);
    if (!opt_num(r, timing, "warmup", &ptd_range_repetitions, &warmup) ||
        !opt_num(r, timing, "reps", &ptd_range_repetitions, &reps))
      return FALSE;
    r->where[0] = 0;
  }
  m->warmup = (guint)warmup;
  m->reps = (guint)reps;

  const cJSON *dev = cJSON_GetObjectItemCaseSensitive(root, "device");
  if (!cJSON_IsObject(dev))
    return bad(r, "device", "is missing; it must describe the GPU measured");
  g_strlcpy(r->where, "device", sizeof r->where);
  CalibDevice *d = &m->device;
  const char *name = get_str(r, dev, "name");
  guint64 sms;
  if (!name || !get_count(r, dev, "sms", &sms) || !ptd_range_check((double)sms, &ptd_range_sms, r->file, "device.sms", r->error) || !get_num(r, dev, "peak_tflops", &ptd_range_tflops, &d->peak_tflops) ||
      !get_num(r, dev, "hbm_GBps", &ptd_range_bandwidth_GBps, &d->hbm_GBps) || !get_num(r, dev, "memory_GiB", &ptd_range_memory_GiB, &d->memory_GiB))
    return FALSE;
  d->name = g_strdup(name);
  d->sms = (guint)sms;
  double gpus = 1;
  if (!opt_num(r, dev, "sm_clock_MHz", &ptd_range_device_info, &d->sm_clock_MHz) ||
      !opt_num(r, dev, "memory_clock_MHz", &ptd_range_device_info, &d->memory_clock_MHz) ||
      !opt_num(r, dev, "memory_bus_bits", &ptd_range_device_info, &d->memory_bus_bits) ||
      !opt_num(r, dev, "gpus", &ptd_range_count, &gpus) || !opt_num(r, dev, "l2_MiB", &ptd_range_cache_MiB, &d->l2_MiB))
    return FALSE;
  d->gpus = (guint)gpus;
  d->compute_capability = opt_str(dev, "compute_capability");
  d->peak_source = opt_str(dev, "peak_source");
  d->driver = opt_str(dev, "driver");
  d->cuda_runtime = opt_str(dev, "cuda_runtime");
  d->cublas = opt_str(dev, "cublas");
  d->cublaslt = opt_str(dev, "cublaslt");
  d->nccl = opt_str(dev, "nccl");
  d->cudnn = opt_str(dev, "cudnn");
  r->where[0] = 0;
  return TRUE;
}

/* An optional word from `words` (NULL-terminated); *out is its index, 0
 * when the key is absent. */
static gboolean opt_word(Reader *r, const cJSON *o, const char *key, const char *const *words, int *out) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
  *out = 0;
  if (!it)
    return TRUE;
  for (int i = 0; cJSON_IsString(it) && words[i]; i++)
    if (strcmp(it->valuestring, words[i]) == 0) {
      *out = i;
      return TRUE;
    }
  GString *why = g_string_new("must be one of");
  for (int i = 0; words[i]; i++)
    g_string_append_printf(why, "%s \"%s\"", i ? "," : "", words[i]);
  gboolean ok = bad(r, key, why->str);
  g_string_free(why, TRUE);
  return ok;
}

static gboolean read_attention(Reader *r, const cJSON *o, CalibMeasurements *m) {
  CalibAttention a = {0};
  const char *impl = get_str(r, o, "impl"), *dtype = impl ? get_str(r, o, "dtype") : NULL;
  if (!dtype)
    return FALSE;
  if (strcmp(impl, "cudnn-sdpa") != 0)
    return bad(r, "impl", "must be \"cudnn-sdpa\" (cuDNN's fused flash attention, as ptdsim-calibrate measures it)");
  if (strcmp(dtype, "bf16") != 0 && strcmp(dtype, "fp16") != 0)
    return bad(r, "dtype", "must be \"bf16\" or \"fp16\"");
  const cJSON *causal = cJSON_GetObjectItemCaseSensitive(o, "causal");
  if (!cJSON_IsBool(causal))
    return bad(r, "causal", "must be true or false");
  if (!get_count(r, o, "batch", &a.batch) || !get_count(r, o, "heads", &a.heads) ||
      !get_count(r, o, "kv_heads", &a.kv_heads) || !get_count(r, o, "seq", &a.seq) ||
      !get_count(r, o, "head_dim", &a.head_dim))
    return FALSE;
  a.has_fwd = cJSON_GetObjectItemCaseSensitive(o, "forward_us") != NULL;
  a.has_bwd = cJSON_GetObjectItemCaseSensitive(o, "backward_us") != NULL;
  if (!a.has_fwd && !a.has_bwd)
    return bad(r, "forward_us", "is missing: an attention record needs forward_us, backward_us or both");
  if ((a.has_fwd && !get_time(r, o, "forward", &a.fwd)) || (a.has_bwd && !get_time(r, o, "backward", &a.bwd)))
    return FALSE;
  if (a.batch < 1 || a.heads < 1 || a.seq < 1 || a.head_dim < 1)
    return bad(r, "batch", "batch, heads, seq and head_dim must all be at least 1");
  if (a.kv_heads < 1 || a.heads % a.kv_heads)
    return bad(r, "kv_heads", "must be at least 1 and divide heads");
  g_strlcpy(a.impl, impl, sizeof a.impl);
  g_strlcpy(a.dtype, dtype, sizeof a.dtype);
  a.causal = cJSON_IsTrue(causal);
  g_array_append_val(m->attention, a);
  return TRUE;
}

static gboolean read_membound(Reader *r, const cJSON *o, CalibMeasurements *m) {
  CalibMembound b = {0};
  const char *op = get_str(r, o, "op");
  if (!op)
    return FALSE;
  const CalibMemboundOp *row = calib_membound_op(op);
  if (!row) {
    GString *why = g_string_new("must be one of the membound mode's kernels:");
    for (guint i = 0; i < calib_n_membound_ops; i++)
      g_string_append_printf(why, "%s %s", i ? "," : "", calib_membound_ops[i].name);
    gboolean ok = bad(r, "op", why->str);
    g_string_free(why, TRUE);
    return ok;
  }
  if (!get_count(r, o, "rows", &b.rows) || !get_count(r, o, "cols", &b.cols) ||
      !get_num(r, o, "bytes", &ptd_range_bytes, &b.bytes) || !get_time(r, o, "time", &b.t))
    return FALSE;
  double want = row->bytes_per_elem * (double)b.rows * (double)b.cols;
  if (b.rows < 1 || b.cols < 1 || fabs(b.bytes - want) > 1e-6 * want)
    return bad(r, "bytes", "must be rows x cols x the op's bytes per element (calib_membound_ops in measurements.c)");
  g_strlcpy(b.op, op, sizeof b.op);
  g_array_append_val(m->membound, b);
  return TRUE;
}

static gboolean read_gemm(Reader *r, const cJSON *o, CalibMeasurements *m) {
  CalibGemm g = {0};
  const char *dtype = get_str(r, o, "dtype"), *op;
  if (!dtype)
    return FALSE;
  if (strcmp(dtype, "fp16") != 0 && strcmp(dtype, "bf16") != 0 && strcmp(dtype, "fp8") != 0)
    return bad(r, "dtype", "must be \"fp16\", \"bf16\" or \"fp8\"");
  if (!(op = get_str(r, o, "op")) || !get_count(r, o, "batch", &g.batch) || !get_count(r, o, "m", &g.m) ||
      !get_count(r, o, "n", &g.n) || !get_count(r, o, "k", &g.k) || !get_time(r, o, "time", &g.t))
    return FALSE;
  const cJSON *lay = cJSON_GetObjectItemCaseSensitive(o, "layout");
  if (lay && !(cJSON_IsString(lay) && strlen(lay->valuestring) == 2 && strchr("NT", lay->valuestring[0]) &&
               strchr("NT", lay->valuestring[1])))
    return bad(r, "layout", "must be \"NN\", \"NT\", \"TN\" or \"TT\" (cuBLAS ops of A and B)");
  g_strlcpy(g.layout, lay ? lay->valuestring : "NN", sizeof g.layout);
  const cJSON *api = cJSON_GetObjectItemCaseSensitive(o, "api");
  if (api && !(cJSON_IsString(api) && (strcmp(api->valuestring, "cublas") == 0 || strcmp(api->valuestring, "cublaslt") == 0)))
    return bad(r, "api", "must be \"cublas\" or \"cublaslt\"");
  g_strlcpy(g.api, api ? api->valuestring : "cublas", sizeof g.api);
  if (strcmp(dtype, "fp8") == 0 && strcmp(g.api, "cublaslt") != 0)
    return bad(r, "dtype", "is \"fp8\", which only cuBLASLt runs; give \"api\": \"cublaslt\"");
  const cJSON *tile = cJSON_GetObjectItemCaseSensitive(o, "tile");
  if (tile) {
    const cJSON *a = cJSON_GetArrayItem(tile, 0), *b = cJSON_GetArrayItem(tile, 1);
    if (!cJSON_IsArray(tile) || cJSON_GetArraySize(tile) != 2 || !cJSON_IsNumber(a) || !cJSON_IsNumber(b) ||
        a->valuedouble < 1 || a->valuedouble > 4096 || b->valuedouble < 1 || b->valuedouble > 4096 ||
        a->valuedouble != floor(a->valuedouble) || b->valuedouble != floor(b->valuedouble))
      return bad(r, "tile", "must be [tile_m, tile_n], whole numbers from 1 to 4096");
    g.tile_m = (guint)a->valuedouble, g.tile_n = (guint)b->valuedouble;
  }
  g_strlcpy(g.dtype, dtype, sizeof g.dtype);
  g_strlcpy(g.op, op, sizeof g.op);
  g_array_append_val(m->gemm, g);
  return TRUE;
}

static gboolean read_membw(Reader *r, const cJSON *o, CalibMeasurements *m) {
  CalibMembw b = {0};
  if (!get_num(r, o, "bytes", &ptd_range_bytes, &b.bytes) || !get_time(r, o, "time", &b.t))
    return FALSE;
  g_array_append_val(m->membw, b);
  return TRUE;
}

/* A list of 1 .. CALIB_MAX_SAMPLES numbers in `range` (optional: *n = 0
 * when absent). */
static gboolean get_samples(Reader *r, const cJSON *o, const char *key, gboolean optional, const PtdRange *range,
                            double *out, guint *n) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key), *it;
  *n = 0;
  if (!a && optional)
    return TRUE;
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) < 1 || cJSON_GetArraySize(a) > CALIB_MAX_SAMPLES) {
    char why[96];
    g_snprintf(why, sizeof why, "must be a list of 1 to %u numbers", CALIB_MAX_SAMPLES);
    return bad(r, key, why);
  }
  char name[64];
  cJSON_ArrayForEach(it, a) {
    /* each sample checked as a key of its own, named by its index */
    g_snprintf(name, sizeof name, "%s[%u]", key, *n);
    if (!check_num(r, it, name, range, &out[*n]))
      return FALSE;
    (*n)++;
  }
  return TRUE;
}

static gboolean read_sustained(Reader *r, const cJSON *o, CalibMeasurements *m) {
  CalibSustained x = {0};
  const char *op = get_str(r, o, "op"), *dtype = op ? get_str(r, o, "dtype") : NULL;
  if (!dtype)
    return FALSE;
  if (strcmp(op, "gemm") != 0)
    return bad(r, "op", "must be \"gemm\" (a sustained loop of one GEMM)");
  if (strcmp(dtype, "bf16") != 0 && strcmp(dtype, "fp16") != 0)
    return bad(r, "dtype", "must be \"bf16\" or \"fp16\"");
  g_strlcpy(x.dtype, dtype, sizeof x.dtype);
  if (!get_count(r, o, "m", &x.m) || !get_count(r, o, "n", &x.n) || !get_count(r, o, "k", &x.k) ||
      !get_num(r, o, "burst_tflops", &ptd_range_tflops, &x.burst_tflops) ||
      !get_num(r, o, "loop_s", &ptd_range_seconds, &x.loop_s) ||
      !get_samples(r, o, "chunk_tflops", FALSE, &ptd_range_tflops, x.chunk_tflops, &x.n_chunks) ||
      !get_samples(r, o, "clock_MHz", TRUE, &ptd_range_device_info, x.clock_MHz, &x.n_clock) ||
      !get_samples(r, o, "power_W", TRUE, &ptd_range_power_W, x.power_W, &x.n_power) ||
      !opt_num(r, o, "power_limit_W", &ptd_range_power_W, &x.power_limit_W))
    return FALSE;
  g_array_append_val(m->sustained, x);
  return TRUE;
}

static gboolean read_overlap(Reader *r, const cJSON *o, CalibMeasurements *m) {
  CalibOverlap x = {.ranks = 1};
  const char *dtype = get_str(r, o, "dtype"), *with = dtype ? get_str(r, o, "with") : NULL;
  if (!with)
    return FALSE;
  if (strcmp(dtype, "bf16") != 0)
    return bad(r, "dtype", "must be \"bf16\" (the overlap mode's GEMM)");
  gboolean copy = strcmp(with, "copy") == 0;
  if (!copy && strcmp(with, "all_reduce") != 0)
    return bad(r, "with", "must be \"copy\" (the SM-holding copy kernel) or \"all_reduce\" (an NCCL all-reduce)");
  g_strlcpy(x.dtype, dtype, sizeof x.dtype);
  g_strlcpy(x.with, with, sizeof x.with);
  guint64 n = 0;
  if (!get_count(r, o, "m", &x.m) || !get_count(r, o, "n", &x.n) || !get_count(r, o, "k", &x.k) ||
      !get_count(r, o, copy ? "blocks" : "ranks", &n) ||
      !get_num(r, o, "bytes", &ptd_range_bytes, &x.bytes) ||
      !get_num(r, o, "gemm_us", &ptd_range_time_us, &x.gemm_us) ||
      !get_num(r, o, "gemm_beside_us", &ptd_range_time_us, &x.gemm_beside_us) ||
      !get_num(r, o, "moved_GBps", &ptd_range_bandwidth_GBps, &x.moved_GBps) ||
      !get_num(r, o, "moved_beside_GBps", &ptd_range_bandwidth_GBps, &x.moved_beside_GBps))
    return FALSE;
  if (copy && n >= m->device.sms)
    return bad(r, "blocks", "must be fewer than the device's SMs (the GEMM needs some)");
  if (!copy && n < 2)
    return bad(r, "ranks", "must be at least 2 (an all-reduce between GPUs)");
  if (copy) {
    x.blocks = (guint)n;
    if (!get_num(r, o, "mem_bytes", &ptd_range_bytes, &x.mem_bytes) ||
        !get_num(r, o, "mem_us", &ptd_range_time_us, &x.mem_us) ||
        !get_num(r, o, "mem_beside_us", &ptd_range_time_us, &x.mem_beside_us) ||
        !get_num(r, o, "moved_beside_mem_GBps", &ptd_range_bandwidth_GBps, &x.moved_beside_mem_GBps))
      return FALSE;
  } else
    x.ranks = (guint)n;
  g_array_append_val(m->overlap, x);
  return TRUE;
}

static gboolean read_kernel(Reader *r, const cJSON *o, CalibMeasurements *m) {
  CalibKernel k = {0};
  guint64 n;
  const char *name = get_str(r, o, "name");
  const cJSON *fused = cJSON_GetObjectItemCaseSensitive(o, "fused");
  if (!name)
    return FALSE;
  if (!cJSON_IsBool(fused))
    return bad(r, "fused", "must be true or false");
  if (!get_count(r, o, "rows", &k.rows) || !get_count(r, o, "cols", &k.cols) || !get_num(r, o, "bytes", &ptd_range_bytes, &k.bytes) ||
      !get_count(r, o, "kernels", &n) || !get_time(r, o, "time", &k.t))
    return FALSE;
  g_strlcpy(k.name, name, sizeof k.name);
  k.fused = cJSON_IsTrue(fused);
  k.kernels = (guint)n;
  g_array_append_val(m->kernels, k);
  return TRUE;
}

static gboolean read_layer(Reader *r, const cJSON *o, CalibMeasurements *m) {
  CalibLayer l = {0};
  guint64 v[5];
  const char *keys[5] = {"hidden", "heads", "seq", "micro_batch", "tp"};
  for (int i = 0; i < 5; i++)
    if (!get_count(r, o, keys[i], &v[i]))
      return FALSE;
  if (!get_time(r, o, "forward", &l.fwd) || !get_time(r, o, "backward", &l.bwd))
    return FALSE;
  l.has_recompute = cJSON_GetObjectItemCaseSensitive(o, "recompute_us") != NULL;
  if (l.has_recompute && !get_time(r, o, "recompute", &l.recompute))
    return FALSE;
  if (v[0] % v[1])
    return bad(r, "hidden", "must be a multiple of heads");
  if (v[1] % v[4])
    return bad(r, "heads", "must be a multiple of tp");
  l.hidden = (guint)v[0], l.heads = (guint)v[1], l.seq = (guint)v[2], l.micro_batch = (guint)v[3], l.tp = (guint)v[4];
  l.fused = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o, "fused"));
  guint64 kv = l.heads, ffn = 4ull * l.hidden;
  if ((cJSON_GetObjectItemCaseSensitive(o, "kv_heads") && !get_count(r, o, "kv_heads", &kv)) ||
      (cJSON_GetObjectItemCaseSensitive(o, "ffn") && !get_count(r, o, "ffn", &ffn)))
    return FALSE;
  if (kv < 1 || l.heads % kv || kv % l.tp)
    return bad(r, "kv_heads", "must divide heads and be a multiple of tp (each rank holds whole key/value groups)");
  if (ffn < 1 || ffn % l.tp)
    return bad(r, "ffn", "must be a multiple of tp");
  l.kv_heads = kv == l.heads ? 0 : (guint)kv;
  l.ffn = ffn == 4ull * l.hidden ? 0 : (guint)ffn;
  static const char *styles[] = {"gpt", "llama", NULL}, *dtypes[] = {"fp16", "bf16", "fp8", NULL},
                    *attn[] = {"megatron", "flash", NULL};
  int style = 0, dt = 0, at = 0;
  if (!opt_word(r, o, "style", styles, &style) || !opt_word(r, o, "dtype", dtypes, &dt) ||
      !opt_word(r, o, "attention", attn, &at))
    return FALSE;
  l.llama = style == 1;
  g_strlcpy(l.dtype, dtypes[dt], sizeof l.dtype);
  l.flash = at == 1;
  const cJSON *sp = cJSON_GetObjectItemCaseSensitive(o, "sequence_parallel");
  if (sp && !cJSON_IsBool(sp))
    return bad(r, "sequence_parallel", "must be true or false");
  l.sequence_parallel = cJSON_IsTrue(sp);
  g_array_append_val(m->layers, l);
  return TRUE;
}

static gboolean read_coll(Reader *r, const cJSON *o, CalibMeasurements *m) {
  CalibColl c = {0};
  const char *op = get_str(r, o, "op");
  guint64 ranks;
  if (!op)
    return FALSE;
  for (c.op = 0; c.op < CALIB_N_COLL && strcmp(op, coll_names[c.op]) != 0; c.op++)
    ;
  if (c.op == CALIB_N_COLL)
    return bad(r, "op", "must be all_reduce, all_gather, reduce_scatter or sendrecv");
  if (!get_count(r, o, "ranks", &ranks) || !get_num(r, o, "bytes", &ptd_range_bytes, &c.bytes) || !get_time(r, o, "time", &c.t))
    return FALSE;
  c.ranks = (guint)ranks;
  g_array_append_val(m->coll, c);
  return TRUE;
}

CalibMeasurements *calib_measurements_load(const char *path, GError **error) {
  cJSON *root = ptd_json_load(path, error);
  if (!root) {
    g_prefix_error(error, "cannot read measurements: ");
    return NULL;
  }
  CalibMeasurements *m = calib_measurements_from_json(root, path, error);
  cJSON_Delete(root);
  return m;
}

CalibMeasurements *calib_measurements_from_json(const cJSON *root, const char *path, GError **error) {
  Reader r = {.file = path, .error = error};
  CalibMeasurements *m = calib_measurements_new();
  static const struct {
    const char *key;
    gboolean (*read)(Reader *, const cJSON *, CalibMeasurements *);
    gboolean optional; /* lists the 2021 harness did not write */
  } lists[] = {{"gemm", read_gemm, FALSE},        {"membw", read_membw, FALSE},
               {"kernels", read_kernel, FALSE},   {"layer", read_layer, FALSE},
               {"nccl", read_coll, FALSE},        {"attention", read_attention, TRUE},
               {"membound", read_membound, TRUE}, {"sustained", read_sustained, TRUE},
               {"overlap", read_overlap, TRUE}};
  gboolean ok = read_header(&r, root, m);
  for (guint l = 0; ok && l < G_N_ELEMENTS(lists); l++) {
    if (lists[l].optional && !cJSON_GetObjectItemCaseSensitive(root, lists[l].key))
      continue;
    const cJSON *arr = get_array(&r, root, lists[l].key), *o;
    ok = arr != NULL;
    guint i = 0;
    cJSON_ArrayForEach(o, arr) {
      g_snprintf(r.where, sizeof r.where, "%s[%u]", lists[l].key, i++);
      if (!cJSON_IsObject(o)) {
        g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID, "%s: %s must be an object", path, r.where);
        ok = FALSE;
      }
      if (!ok || !lists[l].read(&r, o, m)) {
        ok = FALSE;
        break;
      }
    }
    r.where[0] = 0;
  }
  if (!ok) {
    calib_measurements_free(m);
    return NULL;
  }
  return m;
}

gboolean calib_measurements_merge(CalibMeasurements *into, const CalibMeasurements *from, const char *from_path,
                                  GError **error) {
  if (g_strcmp0(into->device.name, from->device.name) != 0 || into->device.sms != from->device.sms) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                "%s measured %s (%u SMs), not the %s (%u SMs) of the first file; fit one GPU's measurements at a time",
                from_path, from->device.name, from->device.sms, into->device.name, into->device.sms);
    return FALSE;
  }
  GArray *to[] = {into->gemm,     into->membw,     into->kernels,   into->layers, into->coll,
                  into->attention, into->membound, into->sustained, into->overlap};
  const GArray *src[] = {from->gemm,      from->membw,     from->kernels,   from->layers, from->coll,
                         from->attention, from->membound, from->sustained, from->overlap};
  for (guint i = 0; i < G_N_ELEMENTS(to); i++)
    g_array_append_vals(to[i], src[i]->data, src[i]->len);
  for (guint i = 0; i < from->failures->len; i++)
    g_ptr_array_add(into->failures, g_strdup(g_ptr_array_index(from->failures, i)));
  if (into->device.l2_MiB <= 0)
    into->device.l2_MiB = from->device.l2_MiB;
  return TRUE;
}
