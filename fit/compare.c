/* ptdsim — measured against predicted: a measurements file, or another
 * tool's kernel facts, against a profile (see fit.h calib_compare and
 * calib_check_facts). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../models/compute.h"
#include "fit.h"

static int cmp_abs(const void *a, const void *b) {
  double x = fabs(*(const double *)a), y = fabs(*(const double *)b);
  return (x > y) - (x < y);
}

/* Median and 90th percentile of |errors| (type-7 quantiles, as the
 * measurements' spreads), sorted in place by magnitude. */
static void abs_stats(double *e, guint n, double *median, double *p90, double *worst) {
  *median = *p90 = *worst = 0;
  if (n == 0)
    return;
  qsort(e, n, sizeof *e, cmp_abs);
  double pos = 0.5 * (n - 1), pos9 = 0.9 * (n - 1);
  guint lo = (guint)pos, lo9 = (guint)pos9;
  guint hi = MIN(lo + 1, n - 1), hi9 = MIN(lo9 + 1, n - 1);
  *median = fabs(e[lo]) + (pos - lo) * (fabs(e[hi]) - fabs(e[lo]));
  *p90 = fabs(e[lo9]) + (pos9 - lo9) * (fabs(e[hi9]) - fabs(e[lo9]));
  *worst = fabs(e[n - 1]);
}

/* One class of the comparison: its errors and the worst record's label. */
typedef struct {
  GArray *err;
  double worst;
  char worst_label[128];
} Class;

static void class_init(Class *c) {
  c->err = g_array_new(FALSE, FALSE, sizeof(double));
  c->worst = -1;
  c->worst_label[0] = 0;
}

static void class_add(Class *c, double measured_us, double predicted_us, const char *label) {
  double e = predicted_us / measured_us - 1;
  g_array_append_val(c->err, e);
  if (fabs(e) > c->worst) {
    c->worst = fabs(e);
    g_strlcpy(c->worst_label, label, sizeof c->worst_label);
  }
}

/* Appends the class's summary to `list` (nothing for an empty class) and
 * frees it. */
static void class_emit(cJSON *list, Class *c, const char *cls, const char *what) {
  if (c->err->len > 0) {
    double med, p90, worst;
    abs_stats((double *)c->err->data, c->err->len, &med, &p90, &worst);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "class", cls);
    cJSON_AddStringToObject(o, "what", what);
    cJSON_AddNumberToObject(o, "count", c->err->len);
    cJSON_AddNumberToObject(o, "median_abs_error", med);
    cJSON_AddNumberToObject(o, "p90_abs_error", p90);
    cJSON_AddNumberToObject(o, "max_abs_error", worst);
    cJSON_AddStringToObject(o, "worst", c->worst_label);
    cJSON_AddItemToArray(list, o);
  }
  g_array_free(c->err, TRUE);
}

static void gemm_label(const CalibGemm *g, char *buf, gsize len) {
  g_snprintf(buf, len, "%s %" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT " %s",
             g->op, g->batch, g->m, g->n, g->k, g->layout);
}

/* The GEMM group of a 16-bit record: the layers' own, each grid, the
 * layouts, cuBLASLt's. */
static const char *gemm_group(const CalibGemm *g) {
  if (strcmp(g->api, "cublaslt") == 0)
    return "cublaslt";
  if (g_str_has_prefix(g->op, "grid."))
    return g->op;
  return g_str_has_prefix(g->op, "layout.") ? "layout" : "layer";
}

static void compare_gemms(const CalibMeasurements *m, const ModelProfile *p, cJSON *list) {
  static const char *groups[] = {"all", "layer", "grid.square", "grid.wave", "grid.k", "layout", "cublaslt"};
  static const char *dtypes[] = {"fp16", "bf16"};
  char label[128], cls[32];
  for (guint d = 0; d < G_N_ELEMENTS(dtypes); d++)
    for (guint gi = 0; gi < G_N_ELEMENTS(groups); gi++) {
      Class c;
      class_init(&c);
      for (guint i = 0; i < m->gemm->len; i++) {
        const CalibGemm *g = &g_array_index(m->gemm, CalibGemm, i);
        if (strcmp(g->dtype, dtypes[d]) != 0 || (gi > 0 && strcmp(gemm_group(g), groups[gi]) != 0))
          continue;
        ModelGemm mg = {g->batch, g->m, g->n, g->k};
        gemm_label(g, label, sizeof label);
        class_add(&c, g->t.median_us, model_gemm_time_s(p, &mg) * 1e6, label);
      }
      g_snprintf(cls, sizeof cls, "gemm %s", dtypes[d]);
      class_emit(list, &c, cls, groups[gi]);
    }
  if (!model_profile_supports(p, "fp8"))
    return;
  for (int grad = 0; grad < 2; grad++) {
    Class c;
    class_init(&c);
    for (guint i = 0; i < m->gemm->len; i++) {
      const CalibGemm *g = &g_array_index(m->gemm, CalibGemm, i);
      if (strcmp(g->dtype, "fp8") != 0 || (strcmp(g->layout, "TN") != 0) != grad)
        continue;
      ModelGemm mg = {g->batch, g->m, g->n, g->k};
      gemm_label(g, label, sizeof label);
      class_add(&c, g->t.median_us, model_gemm_fp8_time_s(p, &mg, grad) * 1e6, label);
    }
    class_emit(list, &c, "gemm fp8", grad ? "gradient (split accumulation)" : "forward (fast accumulation)");
  }
}

static void compare_attention(const CalibMeasurements *m, const ModelProfile *p, cJSON *list) {
  if (!(p->flash_forward_efficiency > 0))
    return;
  char label[128];
  for (int pass = 0; pass < 2; pass++) {
    Class c;
    class_init(&c);
    for (guint i = 0; i < m->attention->len; i++) {
      const CalibAttention *a = &g_array_index(m->attention, CalibAttention, i);
      if ((!a->causal && !p->flash_waves) || !(pass ? a->has_bwd : a->has_fwd))
        continue; /* the constant shares of peak price causal attention only */
      g_snprintf(label, sizeof label, "b=%" G_GUINT64_FORMAT " heads=%" G_GUINT64_FORMAT " kv=%" G_GUINT64_FORMAT
                                      " s=%" G_GUINT64_FORMAT " d=%" G_GUINT64_FORMAT,
                 a->batch, a->heads, a->kv_heads, a->seq, a->head_dim);
      double us = (p->flash_waves ? model_flash_waves_time_any_s(p, pass == 1, a->causal, a->batch * a->heads, a->seq,
                                                                 a->seq, a->head_dim)
                                  : model_flash_time_s(p, a->batch * a->heads, a->seq, a->seq, a->head_dim, pass == 1)) *
                  1e6;
      if (!a->causal)
        g_strlcat(label, " non-causal", sizeof label);
      class_add(&c, pass ? a->bwd.median_us : a->fwd.median_us, us, label);
    }
    class_emit(list, &c, "attention", pass ? "backward" : "forward");
  }
}

static void compare_membound(const CalibMeasurements *m, const ModelProfile *p, cJSON *list) {
  char label[128];
  for (int cl = 0; cl < MODEL_MEM_N; cl++) {
    Class c;
    class_init(&c);
    if (cl == MODEL_MEM_COPY)
      for (guint i = 0; i < m->membw->len; i++) {
        const CalibMembw *b = &g_array_index(m->membw, CalibMembw, i);
        g_snprintf(label, sizeof label, "copy %.0f B moved", b->bytes);
        class_add(&c, b->t.median_us, model_memop_time_s(p, b->bytes) * 1e6, label);
      }
    for (guint i = 0; i < m->membound->len; i++) {
      const CalibMembound *b = &g_array_index(m->membound, CalibMembound, i);
      if ((int)calib_membound_op(b->op)->cls != cl)
        continue;
      g_snprintf(label, sizeof label, "%s %" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT, b->op, b->rows, b->cols);
      class_add(&c, b->t.median_us, model_mem_time_s(p, (ModelMemClass)cl, b->bytes) * 1e6, label);
    }
    for (guint i = 0; i < m->kernels->len; i++) {
      const CalibKernel *k = &g_array_index(m->kernels, CalibKernel, i);
      ModelMemClass kc = calib_kernel_class(k->name, k->fused, k->kernels);
      if ((int)kc != cl)
        continue;
      g_snprintf(label, sizeof label, "%s (fused, 2021) %" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT, k->name, k->rows,
                 k->cols);
      class_add(&c, k->t.median_us, model_mem_2021_time_s(p, kc, k->bytes) * 1e6, label);
    }
    class_emit(list, &c, "membound", model_mem_class_name((ModelMemClass)cl));
  }
}

/* Sustained loops: the settled rate against the profile's GEMM rate at its
 * sustained clock (p as given, sustained_clock_ratio applied). */
static void compare_sustained(const CalibMeasurements *m, const ModelProfile *p, cJSON *list) {
  Class c;
  class_init(&c);
  char label[128];
  for (guint i = 0; i < m->sustained->len; i++) {
    const CalibSustained *x = &g_array_index(m->sustained, CalibSustained, i);
    ModelGemm mg = {1, x->m, x->n, x->k};
    double flops = model_gemm_flops(&mg);
    g_snprintf(label, sizeof label, "sustained %s %" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT,
               x->dtype, x->m, x->n, x->k);
    class_add(&c, flops / (calib_sustained_tflops(x) * 1e12) * 1e6, model_gemm_time_s(p, &mg) * 1e6, label);
  }
  class_emit(list, &c, "sustained gemm", "settled, at the sustained clock");
}

/* The overlap mode's holder runs: the GEMM's and the probe copy's times
 * beside the holder against their measured times alone times the slowdown
 * the profile prices (its SMs per channel and HBM bytes per byte, or the
 * defaults: model_profile_overlap), so that the class judges the
 * contention model, not the GEMM model. */
static void compare_overlap(const CalibMeasurements *m, const ModelProfile *p, cJSON *list) {
  double k, c;
  model_profile_overlap(p, &k, &c);
  char label[128];
  for (int probe = 0; probe < 2; probe++) {
    Class cl;
    class_init(&cl);
    for (guint i = 0; i < m->overlap->len; i++) {
      const CalibOverlap *x = &g_array_index(m->overlap, CalibOverlap, i);
      if (strcmp(x->with, "copy") != 0 || k * x->blocks >= p->sms)
        continue;
      ModelProfile held = *p;
      held.sms_held = k * x->blocks;
      held.hbm_held = CLAMP(c * x->moved_GBps * 1e9 / (p->hbm_bytes_per_s * p->memory_efficiency), 0.0, 0.9);
      ModelGemm mg = {1, x->m, x->n, x->k};
      double ratio = probe ? model_mem_time_s(&held, MODEL_MEM_COPY, 2 * x->mem_bytes) /
                                 model_mem_time_s(p, MODEL_MEM_COPY, 2 * x->mem_bytes)
                           : model_gemm_time_s(&held, &mg) / model_gemm_time_s(p, &mg);
      g_snprintf(label, sizeof label, "%s beside %u blocks", probe ? "copy" : "gemm", x->blocks);
      class_add(&cl, probe ? x->mem_beside_us : x->gemm_beside_us, (probe ? x->mem_us : x->gemm_us) * ratio, label);
    }
    class_emit(list, &cl, "overlap",
               probe ? "copy beside the holder" : "gemm beside the holder");
  }
}

ModelProfile calib_profile_at_burst(const ModelProfile *p) {
  ModelProfile b = *p;
  b.sustained_clock_ratio = 1;
  return b;
}

void calib_layer_label(const CalibLayer *l, char *buf, gsize len) {
  if (!l->llama && !l->kv_heads && !l->ffn && !l->flash && strcmp(l->dtype, "fp16") == 0 && !l->sequence_parallel)
    g_snprintf(buf, len, "h=%u a=%u s=%u b=%u t=%u", l->hidden, l->heads, l->seq, l->micro_batch, l->tp);
  else
    g_snprintf(buf, len, "%s %s%s h=%u a=%u g=%u s=%u b=%u t=%u%s", l->llama ? "llama" : "gpt", l->dtype,
               l->flash ? " flash" : "", l->hidden, l->heads, l->kv_heads ? l->kv_heads : l->heads, l->seq,
               l->micro_batch, l->tp, l->sequence_parallel ? " sp" : "");
}

static void add_pass(cJSON *rows, const char *label, const char *pass, double measured_us, double predicted_us) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "label", label);
  cJSON_AddStringToObject(o, "pass", pass);
  cJSON_AddNumberToObject(o, "measured_us", measured_us);
  cJSON_AddNumberToObject(o, "predicted_us", predicted_us);
  cJSON_AddNumberToObject(o, "error", predicted_us / measured_us - 1);
  cJSON_AddItemToArray(rows, o);
}

cJSON *calib_compare(const CalibMeasurements *m, const ModelProfile *p, GError **error) {
  if (p->kind != MODEL_PROFILE_ANALYTIC) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                "--compare needs an analytic profile (one with a GEMM model), not '%s'", p->name ? p->name : "?");
    return NULL;
  }
  if (m->layers->len == 0 && m->gemm->len == 0 && m->attention->len == 0 && m->membound->len == 0 &&
      m->sustained->len == 0 && m->overlap->len == 0) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_TOO_FEW,
                "the measurements have no layer, gemm, attention, membound, sustained or overlap records to compare; run "
                "ptdsim-calibrate --mode gemmlt,attention,membound,modern");
    return NULL;
  }
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "profile", p->name ? p->name : "?");
  cJSON_AddStringToObject(root, "device", m->device.name);
  cJSON_AddStringToObject(root, "measured", m->synthetic ? m->synthetic : "measured by ptdsim-calibrate");
  cJSON *classes = cJSON_AddArrayToObject(root, "classes");
  const ModelProfile *sustained_p = p;
  ModelProfile burst = calib_profile_at_burst(p);
  p = &burst;
  compare_gemms(m, p, classes);
  compare_attention(m, p, classes);
  compare_membound(m, p, classes);
  compare_sustained(m, sustained_p, classes);
  compare_overlap(m, p, classes);
  cJSON *layers = cJSON_AddArrayToObject(root, "layer");
  Class all;
  class_init(&all);
  char label[128];
  for (guint i = 0; i < m->layers->len; i++) {
    const CalibLayer *l = &g_array_index(m->layers, CalibLayer, i);
    if (l->flash && !(p->flash_forward_efficiency > 0))
      continue; /* the profile cannot run flash attention */
    if (strcmp(l->dtype, "fp8") == 0 && !model_profile_supports(p, "fp8"))
      continue;
    ModelLayerCost c;
    calib_layer_predict(p, l, &c);
    double fwd = (c.fwd.seg_s[0] + c.fwd.seg_s[1] + c.fwd.seg_s[2]) * 1e6;
    double bwd = (c.bwd.seg_s[0] + c.bwd.seg_s[1] + c.bwd.seg_s[2]) * 1e6;
    calib_layer_label(l, label, sizeof label);
    add_pass(layers, label, "forward", l->fwd.median_us, fwd);
    add_pass(layers, label, "backward", l->bwd.median_us, bwd);
    class_add(&all, l->fwd.median_us, fwd, label);
    class_add(&all, l->bwd.median_us, bwd, label);
    if (l->has_recompute) {
      add_pass(layers, label, "recompute", l->recompute.median_us, fwd);
      class_add(&all, l->recompute.median_us, fwd, label);
    }
  }
  double med, p90, worst;
  guint rows = all.err->len;
  abs_stats((double *)all.err->data, all.err->len, &med, &p90, &worst);
  cJSON *ls = cJSON_AddObjectToObject(root, "layer_summary");
  cJSON_AddNumberToObject(ls, "rows", rows);
  cJSON_AddNumberToObject(ls, "median_abs_error", med);
  cJSON_AddNumberToObject(ls, "max_abs_error", worst);
  class_emit(classes, &all, "layer", "forward, backward, recompute");
  return root;
}

/* --- another tool's kernel facts --- */

static double fact_num(const cJSON *o, const char *key) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(x) && isfinite(x->valuedouble) ? x->valuedouble : NAN;
}

typedef struct {
  cJSON *rows;
  Class cls;
  guint bounded;
} Kind;

static void fact_row(Kind *k, const char *kind, const char *what, double measured_us, double predicted_us,
                     gboolean upper_bound) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "kind", kind);
  cJSON_AddStringToObject(o, "what", what);
  cJSON_AddNumberToObject(o, "measured_us", measured_us);
  cJSON_AddNumberToObject(o, "predicted_us", predicted_us);
  cJSON_AddNumberToObject(o, "error", predicted_us / measured_us - 1);
  cJSON_AddBoolToObject(o, "upper_bound", upper_bound);
  cJSON_AddItemToArray(k->rows, o);
  if (upper_bound && predicted_us <= measured_us)
    k->bounded++; /* consistent with a bound: not an error */
  else
    class_add(&k->cls, measured_us, predicted_us, what);
}

static gboolean bad_fact(GError **error, const char *path, const char *list, guint i, const char *why) {
  g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID, "%s: %s[%u] %s", path, list, i, why);
  return FALSE;
}

static void kind_emit(cJSON *summary, Kind *k, const char *kind) {
  guint n = k->cls.err->len;
  double med, p90, worst;
  abs_stats((double *)k->cls.err->data, n, &med, &p90, &worst);
  if (n + k->bounded > 0) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", kind);
    cJSON_AddNumberToObject(o, "rows", n + k->bounded);
    cJSON_AddNumberToObject(o, "bounded", k->bounded);
    cJSON_AddNumberToObject(o, "median_abs_error", med);
    cJSON_AddNumberToObject(o, "max_abs_error", worst);
    cJSON_AddStringToObject(o, "worst", k->cls.worst_label);
    cJSON_AddItemToArray(summary, o);
  }
  g_array_free(k->cls.err, TRUE);
}

cJSON *calib_check_facts(const cJSON *facts, const char *path, const ModelProfile *p, GError **error) {
  const cJSON *att = cJSON_GetObjectItemCaseSensitive(facts, "attention");
  const cJSON *gem = cJSON_GetObjectItemCaseSensitive(facts, "gemm");
  const cJSON *mb = cJSON_GetObjectItemCaseSensitive(facts, "membound");
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(facts, "format");
  if (cJSON_IsString(fmt) && strcmp(fmt->valuestring, CALIB_FORMAT) == 0) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                "%s is a ptdsim measurements file, not another tool's kernel facts; compare it with --compare", path);
    return NULL;
  }
  if (!cJSON_IsObject(facts) || (!cJSON_IsArray(att) && !cJSON_IsArray(gem) && !cJSON_IsArray(mb))) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                "%s: not a kernel-facts file (it needs an 'attention', 'gemm' or 'membound' list of timings)", path);
    return NULL;
  }
  if (p->kind != MODEL_PROFILE_ANALYTIC) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID, "--check-facts needs an analytic profile, not '%s'",
                p->name ? p->name : "?");
    return NULL;
  }
  ModelProfile burst = calib_profile_at_burst(p); /* another tool's timings are bursts too */
  p = &burst;
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "profile", p->name ? p->name : "?");
  cJSON_AddStringToObject(root, "facts", path);
  cJSON *rows = cJSON_AddArrayToObject(root, "rows"), *summary = cJSON_AddArrayToObject(root, "summary");
  enum { K_AF, K_AB, K_G16, K_G8, K_NORM, K_PW, K_ACT, K_N };
  static const char *kinds[K_N] = {"attention forward", "attention backward", "gemm bf16",
                                   "gemm fp8 (split accumulation)", "membound norm", "membound pointwise",
                                   "membound activation"};
  Kind k[K_N];
  for (int i = 0; i < K_N; i++) {
    k[i].rows = rows;
    k[i].bounded = 0;
    class_init(&k[i].cls);
  }
  gboolean ok = TRUE;
  char what[128];
  const cJSON *o;
  guint i = 0;
  /* The host floor of each attention pass: the largest time at the
   * shortest sequence. */
  double min_s = INFINITY, floor_us[2] = {0, 0};
  cJSON_ArrayForEach(o, att) min_s = fmin(min_s, fact_num(o, "s"));
  cJSON_ArrayForEach(o, att) {
    if (fact_num(o, "s") == min_s) {
      floor_us[0] = fmax(floor_us[0], fact_num(o, "fwd_s") * 1e6);
      floor_us[1] = fmax(floor_us[1], fact_num(o, "bwd_s") * 1e6);
    }
  }
  if (cJSON_IsArray(att) && !(p->flash_forward_efficiency > 0)) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                "profile %s has no flash attention model, so the attention facts cannot be checked",
                p->name ? p->name : "?");
    ok = FALSE;
  }
  cJSON_ArrayForEach(o, att) {
    if (!ok)
      break;
    double b = fact_num(o, "b"), h = fact_num(o, "heads"), s = fact_num(o, "s"), d = fact_num(o, "d");
    double tf = fact_num(o, "fwd_s") * 1e6, tb = fact_num(o, "bwd_s") * 1e6;
    if (!(b >= 1 && h >= 1 && s >= 1 && d >= 1 && tf > 0 && tb > 0 && b * h * s * d < 1e15)) {
      ok = bad_fact(error, path, "attention", i, "needs positive b, heads, s, d, fwd_s and bwd_s");
      break;
    }
    /* the key/value heads: a whole number that divides the heads (grouped-query attention) */
    double kv = fact_num(o, "kv_heads");
    if (!(kv >= 1 && kv <= h && kv == floor(kv) && fmod(h, kv) == 0)) {
      ok = bad_fact(error, path, "attention", i, "needs kv_heads, a whole number from 1 to heads that divides heads");
      break;
    }
    g_snprintf(what, sizeof what, "b=%.0f heads=%.0f kv=%.0f s=%.0f d=%.0f", b, h, kv, s, d);
    for (int pass = 0; pass < 2; pass++) {
      double us = model_flash_time_s(p, (guint64)(b * h), (guint64)s, (guint64)s, (guint64)d, pass == 1) * 1e6;
      double t = pass ? tb : tf;
      fact_row(&k[pass ? K_AB : K_AF], kinds[pass ? K_AB : K_AF], what, t, us, t <= floor_us[pass]);
    }
    i++;
  }
  i = 0;
  cJSON_ArrayForEach(o, gem) {
    if (!ok)
      break;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(o, "dtype");
    double mm = fact_num(o, "m"), n = fact_num(o, "n"), kk = fact_num(o, "k"), t = fact_num(o, "time_s") * 1e6;
    gboolean f8 = cJSON_IsString(dt) && strcmp(dt->valuestring, "fp8") == 0;
    if (!cJSON_IsString(dt) || (!f8 && strcmp(dt->valuestring, "bf16") != 0) || !(mm >= 1 && n >= 1 && kk >= 1 && t > 0) ||
        mm * n * kk > 1e18) {
      ok = bad_fact(error, path, "gemm", i, "needs dtype bf16 or fp8, positive m, n, k and time_s");
      break;
    }
    if (f8 && !model_profile_supports(p, "fp8")) {
      i++;
      continue;
    }
    ModelGemm g = {1, (guint64)mm, (guint64)n, (guint64)kk};
    g_snprintf(what, sizeof what, "%s %.0fx%.0fx%.0f", dt->valuestring, mm, n, kk);
    /* torch._scaled_mm runs without fast accumulation by default: the
     * split-accumulation rate */
    double us = (f8 ? model_gemm_fp8_time_s(p, &g, TRUE) : model_gemm_time_s(p, &g)) * 1e6;
    fact_row(&k[f8 ? K_G8 : K_G16], kinds[f8 ? K_G8 : K_G16], what, t, us, FALSE);
    i++;
  }
  i = 0;
  cJSON_ArrayForEach(o, mb) {
    if (!ok)
      break;
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(o, "op");
    double t = fact_num(o, "time_s") * 1e6, gbps = fact_num(o, "GBps");
    if (!cJSON_IsString(op) || !(t > 0 && gbps > 0 && gbps < 1e6)) {
      ok = bad_fact(error, path, "membound", i, "needs an op, a positive time_s and GBps");
      break;
    }
    /* norms by name; GeLU and SiLU activations; the rest element-wise */
    const char *name = op->valuestring;
    int kind = strstr(name, "norm") ? K_NORM : strstr(name, "gelu") || strstr(name, "silu") ? K_ACT : K_PW;
    ModelMemClass cls = kind == K_NORM ? MODEL_MEM_NORM : kind == K_ACT ? MODEL_MEM_ACTIVATION : MODEL_MEM_POINTWISE;
    /* the file's bytes: its bandwidth times its time */
    double bytes = gbps * 1e9 * t * 1e-6;
    g_snprintf(what, sizeof what, "%s %.0fx%.0f", name, fact_num(o, "rows"), fact_num(o, "cols"));
    fact_row(&k[kind], kinds[kind], what, t, model_mem_time_s(p, cls, bytes) * 1e6, FALSE);
    i++;
  }
  for (int j = 0; j < K_N; j++)
    kind_emit(summary, &k[j], kinds[j]);
  if (!ok) {
    cJSON_Delete(root);
    return NULL;
  }
  cJSON_AddNumberToObject(root, "attention_floor_forward_us", floor_us[0]);
  cJSON_AddNumberToObject(root, "attention_floor_backward_us", floor_us[1]);
  return root;
}
