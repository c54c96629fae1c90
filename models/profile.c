/* ptdsim — device profile loading (see profile.h for the two kinds). */
#include "profile.h"

#include <math.h>
#include <string.h>

#include "compute.h"
#include "../base/jsonutil.h"
#include "../base/ranges.h"

G_DEFINE_QUARK(model-profile-error-quark, model_profile_error)

void model_profile_free(ModelProfile *p) {
  if (!p)
    return;
  g_free(p->name);
  g_free(p->path);
  g_free(p);
}

/* The tile list of GEMM block `key` ("gemm" or "gemm_fp8"). */
static gboolean load_tile_list(const cJSON *gemm, const char *key, const char *file, guint *n, guint *tm, guint *tn,
                               GError **error) {
  const cJSON *tiles = cJSON_GetObjectItemCaseSensitive(gemm, "tiles");
  *n = 0;
  if (!cJSON_IsArray(tiles) || cJSON_GetArraySize(tiles) < 1 || cJSON_GetArraySize(tiles) > MODEL_PROFILE_MAX_TILES) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: key '%s.tiles' must be a list of 1 to %d [tile_m, tile_n] pairs", file, key, MODEL_PROFILE_MAX_TILES);
    return FALSE;
  }
  const cJSON *t;
  cJSON_ArrayForEach(t, tiles) {
    const cJSON *a = cJSON_GetArrayItem(t, 0), *b = cJSON_GetArrayItem(t, 1);
    if (!cJSON_IsArray(t) || cJSON_GetArraySize(t) != 2 || !cJSON_IsNumber(a) || !cJSON_IsNumber(b) ||
        a->valuedouble < 1 || b->valuedouble < 1 || a->valuedouble > 4096 || b->valuedouble > 4096) {
      g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                  "%s: key '%s.tiles' entry %u must be [tile_m, tile_n] with both in 1..4096", file, key, *n);
      return FALSE;
    }
    tm[*n] = (guint)a->valuedouble;
    tn[*n] = (guint)b->valuedouble;
    (*n)++;
  }
  return TRUE;
}

static gboolean load_tiles(ModelProfile *p, const cJSON *gemm, const char *file, GError **error) {
  return load_tile_list(gemm, "gemm", file, &p->gemm.n_tiles, p->gemm.tile_m, p->gemm.tile_n, error);
}

static gboolean coll_invalid(GError **error, const char *file, guint i, const char *why) {
  g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "%s: collectives[%u] %s", file, i, why);
  return FALSE;
}

/* The optional "collectives" block written by ptdsim fit:
 * [{"op": "all_reduce", "ranks": 8, "ranges": [{"alpha_us", "busbw_GBps"}, ...]}]. */
static gboolean load_collectives(ModelProfile *p, const cJSON *root, const char *file, GError **error) {
  static const char *ops[] = {"all_reduce", "all_gather", "reduce_scatter", "sendrecv"};
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "collectives"), *c;
  if (!list)
    return TRUE;
  if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) > MODEL_PROFILE_MAX_COLL) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "%s: key 'collectives' must be a list of at most %d",
                file, MODEL_PROFILE_MAX_COLL);
    return FALSE;
  }
  cJSON_ArrayForEach(c, list) {
    guint i = p->n_coll;
    ModelCollFit *f = &p->coll[i];
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(c, "op"), *ranks = cJSON_GetObjectItemCaseSensitive(c, "ranks");
    const cJSON *ranges = cJSON_GetObjectItemCaseSensitive(c, "ranges"), *r;
    guint o = 0;
    while (cJSON_IsString(op) && o < G_N_ELEMENTS(ops) && strcmp(op->valuestring, ops[o]) != 0)
      o++;
    if (!cJSON_IsString(op) || o == G_N_ELEMENTS(ops))
      return coll_invalid(error, file, i, "'op' must be all_reduce, all_gather, reduce_scatter or sendrecv");
    if (!cJSON_IsNumber(ranks) || ranks->valuedouble < 1 || ranks->valuedouble > 1e6 ||
        ranks->valuedouble != (guint)ranks->valuedouble)
      return coll_invalid(error, file, i, "'ranks' must be a whole number of at least 1");
    if (!cJSON_IsArray(ranges) || cJSON_GetArraySize(ranges) < 1 || cJSON_GetArraySize(ranges) > MODEL_COLL_MAX_RANGES)
      return coll_invalid(error, file, i, "'ranges' must be a list of 1 or 2 {alpha_us, busbw_GBps}");
    f->op = (ModelCollOp)o;
    f->ranks = (guint)ranks->valuedouble;
    cJSON_ArrayForEach(r, ranges) {
      const cJSON *a = cJSON_GetObjectItemCaseSensitive(r, "alpha_us"), *b = cJSON_GetObjectItemCaseSensitive(r, "busbw_GBps");
      if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b))
        return coll_invalid(error, file, i, "ranges need numbers alpha_us and busbw_GBps");
      char *ka = g_strdup_printf("collectives[%u].ranges[%u].alpha_us", i, f->n_ranges);
      char *kb = g_strdup_printf("collectives[%u].ranges[%u].busbw_GBps", i, f->n_ranges);
      gboolean in = ptd_range_check(a->valuedouble, &ptd_range_latency_us, file, ka, error) &&
                    ptd_range_check(b->valuedouble, &ptd_range_bandwidth_GBps, file, kb, error);
      g_free(ka);
      g_free(kb);
      if (!in)
        return FALSE;
      f->alpha_s[f->n_ranges] = a->valuedouble * 1e-6;
      f->busbw[f->n_ranges] = b->valuedouble * 1e9;
      f->n_ranges++;
    }
    p->n_coll++;
  }
  return TRUE;
}

/* The optional "precisions" list (fp16, bf16, fp8; the first is the
 * default) and, with fp8, peak_fp8_tflops. */
static gboolean load_precisions(ModelProfile *p, const cJSON *root, const char *file, GError **error) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "precisions");
  if (!list) {
    p->n_precisions = 2;
    g_strlcpy(p->precisions[0], "fp16", sizeof p->precisions[0]);
    g_strlcpy(p->precisions[1], "bf16", sizeof p->precisions[1]);
    return TRUE;
  }
  const cJSON *w;
  gboolean ok = cJSON_IsArray(list) && cJSON_GetArraySize(list) >= 1 && cJSON_GetArraySize(list) <= 3;
  cJSON_ArrayForEach(w, list) {
    if (!ok)
      break;
    ok = cJSON_IsString(w) && (strcmp(w->valuestring, "fp16") == 0 || strcmp(w->valuestring, "bf16") == 0 ||
                               strcmp(w->valuestring, "fp8") == 0);
    for (guint i = 0; ok && i < p->n_precisions; i++)
      ok = strcmp(p->precisions[i], w->valuestring) != 0;
    if (ok)
      g_strlcpy(p->precisions[p->n_precisions++], w->valuestring, sizeof p->precisions[0]);
  }
  if (!ok) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: 'precisions' must list one to three of \"fp16\", \"bf16\", \"fp8\", each once", file);
    return FALSE;
  }
  if (!model_profile_supports(p, "fp8"))
    return TRUE;
  double fp8;
  if (!ptd_json_in(root, "peak_fp8_tflops", file, &ptd_range_tflops, &fp8, error))
    return FALSE;
  p->peak_fp8_flops = fp8 * 1e12;
  return TRUE;
}

/* The optional "attention" block: FlashAttention-2's forward and backward
 * shares of peak, and whether flash is the device's default. */
static gboolean load_attention(ModelProfile *p, const cJSON *root, const char *file, GError **error) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "attention");
  if (!a)
    return TRUE;
  if (!cJSON_IsObject(a)) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "%s: 'attention' must be an object", file);
    return FALSE;
  }
  /* The constant shares of peak (FlashAttention-2's published figures), or
   * the waves model below, which then stands for them. */
  gboolean waves = cJSON_GetObjectItemCaseSensitive(a, "forward") || cJSON_GetObjectItemCaseSensitive(a, "backward");
  if (!waves && (!ptd_json_in(root, "attention.flash_forward_efficiency", file, &ptd_range_efficiency,
                              &p->flash_forward_efficiency, error) ||
                 !ptd_json_in(root, "attention.flash_backward_efficiency", file, &ptd_range_efficiency,
                              &p->flash_backward_efficiency, error)))
    return FALSE;
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(a, "default");
  if (d && (!cJSON_IsString(d) || (strcmp(d->valuestring, "flash") != 0 && strcmp(d->valuestring, "megatron") != 0))) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: 'attention.default' must be \"flash\" or \"megatron\"", file);
    return FALSE;
  }
  p->flash_default = d && strcmp(d->valuestring, "flash") == 0;
  /* The waves model: both passes' blocks, or neither. */
  const cJSON *fw = cJSON_GetObjectItemCaseSensitive(a, "forward"), *bw = cJSON_GetObjectItemCaseSensitive(a, "backward");
  if (!fw && !bw)
    return TRUE;
  if (!cJSON_IsObject(fw) || !cJSON_IsObject(bw)) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: 'attention' needs both 'forward' and 'backward' objects for its waves model, or neither", file);
    return FALSE;
  }
  static const char *pass[2] = {"attention.forward", "attention.backward"};
  for (int i = 0; i < 2; i++) {
    char kq[64], kk[64], ke[64], ko[64];
    double tq, tk, us;
    g_snprintf(kq, sizeof kq, "%s.tile_q", pass[i]);
    g_snprintf(kk, sizeof kk, "%s.tile_kv", pass[i]);
    g_snprintf(ke, sizeof ke, "%s.efficiency", pass[i]);
    g_snprintf(ko, sizeof ko, "%s.cta_overhead_us", pass[i]);
    if (!ptd_json_in(root, kq, file, &ptd_range_tile, &tq, error) ||
        !ptd_json_in(root, kk, file, &ptd_range_tile, &tk, error) ||
        !ptd_json_in(root, ke, file, &ptd_range_efficiency, &p->flash[i].efficiency, error) ||
        !ptd_json_in(root, ko, file, &ptd_range_latency_us, &us, error))
      return FALSE;
    p->flash[i].tile_q = (guint)tq;
    p->flash[i].tile_kv = (guint)tk;
    p->flash[i].cta_overhead_s = us * 1e-6;
  }
  if (!ptd_json_in_or(root, "attention.ctas_per_sm", file, &ptd_range_ctas_per_sm, 1, &p->flash_ctas_per_sm, error))
    return FALSE;
  p->flash_waves = TRUE;
  p->flash_forward_efficiency = p->flash[0].efficiency;
  p->flash_backward_efficiency = p->flash[1].efficiency;
  return TRUE;
}

/* The optional "gemm_fp8" block: tiles, k_half, tile_bandwidth_GBps and
 * efficiency_max (fitted) or an anchor rate at the FP8 peak. */
static gboolean load_gemm_fp8(ModelProfile *p, const cJSON *root, const char *file, GError **error) {
  const cJSON *g = cJSON_GetObjectItemCaseSensitive(root, "gemm_fp8");
  if (!ptd_json_in_or(root, "gemm_fp8_split_accumulation", file, &ptd_range_efficiency, 1.0,
                      &p->gemm_fp8_split_accumulation, error))
    return FALSE;
  if (!g)
    return TRUE;
  ModelGemmParams *q = &p->gemm_fp8;
  double bw;
  if (!cJSON_IsObject(g) || !model_profile_supports(p, "fp8")) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: 'gemm_fp8' must be an object, in a profile whose 'precisions' include \"fp8\"", file);
    return FALSE;
  }
  if (!load_tile_list(g, "gemm_fp8", file, &q->n_tiles, q->tile_m, q->tile_n, error) ||
      !ptd_json_in(root, "gemm_fp8.k_half", file, &ptd_range_gemm_dim, &q->k_half, error) ||
      !ptd_json_in(root, "gemm_fp8.tile_bandwidth_GBps", file, &ptd_range_bandwidth_GBps, &bw, error))
    return FALSE;
  q->tile_bytes_per_s = bw * 1e9;
  p->has_gemm_fp8 = TRUE;
  if (cJSON_GetObjectItemCaseSensitive(g, "efficiency_max"))
    return ptd_json_in(root, "gemm_fp8.efficiency_max", file, &ptd_range_efficiency, &q->efficiency_max, error);
  double tflops, m, n, k;
  if (!ptd_json_in(root, "gemm_fp8.anchor.tflops", file, &ptd_range_tflops, &tflops, error) ||
      !ptd_json_in(root, "gemm_fp8.anchor.m", file, &ptd_range_gemm_dim, &m, error) ||
      !ptd_json_in(root, "gemm_fp8.anchor.n", file, &ptd_range_gemm_dim, &n, error) ||
      !ptd_json_in(root, "gemm_fp8.anchor.k", file, &ptd_range_gemm_dim, &k, error))
    return FALSE;
  ModelGemm an = {1, (guint64)m, (guint64)n, (guint64)k};
  double want = model_gemm_flops(&an) / (tflops * 1e12) - p->kernel_launch_s;
  q->efficiency_max = 1.0;
  double e_max = want > 0 ? model_gemm_fp8_math_time_s(p, &an) / want : 2;
  if (e_max > 1.0 || tflops * 1e12 > p->peak_fp8_flops) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: key 'gemm_fp8.anchor' asks for %.1f TFLOP/s, more than the tiling model allows at the FP8 peak "
                "%.1f",
                file, tflops, p->peak_fp8_flops / 1e12);
    return FALSE;
  }
  q->efficiency_max = e_max;
  return TRUE;
}

/* BLOCK.CLASS's gap (s) and HBM and L2 bandwidths (bytes/s; L2 defaults to
 * HBM's). */
static gboolean load_mem_class(const cJSON *root, const char *block, const char *cls, const char *file,
                               double *gap_s, double *hbm_bytes_per_s, double *l2_bytes_per_s, GError **error) {
  char kg[64], kh[64], kl[64];
  double gap, hbm, l2;
  g_snprintf(kg, sizeof kg, "%s.%s.gap_us", block, cls);
  g_snprintf(kh, sizeof kh, "%s.%s.hbm_GBps", block, cls);
  g_snprintf(kl, sizeof kl, "%s.%s.l2_GBps", block, cls);
  if (!ptd_json_in(root, kg, file, &ptd_range_latency_us, &gap, error) ||
      !ptd_json_in(root, kh, file, &ptd_range_bandwidth_GBps, &hbm, error) ||
      !ptd_json_in_or(root, kl, file, &ptd_range_bandwidth_GBps, hbm, &l2, error))
    return FALSE;
  *gap_s = gap * 1e-6;
  *hbm_bytes_per_s = hbm * 1e9;
  *l2_bytes_per_s = l2 * 1e9;
  return TRUE;
}

/* The optional "membound" block of a fitted profile: per class
 * {"gap_us", "hbm_GBps", "l2_GBps"}, with the L2's size "l2_MiB" beside it;
 * classes it does not name are priced as its "copy" class. */
static gboolean load_membound(ModelProfile *p, const cJSON *root, const char *file, GError **error) {
  double l2_mib;
  if (!ptd_json_in_or(root, "l2_MiB", file, &ptd_range_cache_MiB, 0, &l2_mib, error))
    return FALSE;
  p->l2_bytes = l2_mib * 1048576.0;
  const cJSON *mb = cJSON_GetObjectItemCaseSensitive(root, "membound");
  if (!mb)
    return TRUE;
  if (!cJSON_IsObject(mb) || !cJSON_GetObjectItemCaseSensitive(mb, "copy")) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: 'membound' must be an object with at least a \"copy\" class", file);
    return FALSE;
  }
  const cJSON *c;
  cJSON_ArrayForEach(c, mb) {
    if (model_mem_class_lookup(c->string) == MODEL_MEM_N) {
      g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                  "%s: 'membound.%s' is not a class; the classes are copy, norm, pointwise, activation, softmax, cross_entropy",
                  file, c->string);
      return FALSE;
    }
  }
  for (int i = 0; i < MODEL_MEM_N; i++) {
    const char *name = model_mem_class_name((ModelMemClass)i);
    int from = cJSON_GetObjectItemCaseSensitive(mb, name) ? i : MODEL_MEM_COPY;
    if (!load_mem_class(root, "membound", model_mem_class_name((ModelMemClass)from), file, &p->mem_gap_s[i],
                        &p->mem_hbm_bytes_per_s[i], &p->mem_l2_bytes_per_s[i], error))
      return FALSE;
  }
  p->has_membound = TRUE;
  return TRUE;
}

/* The optional "membound_2021" block: per class {"gap_us", "hbm_GBps",
 * "l2_GBps"} of Megatron's 2021 kernels, beside a "membound" block; a class
 * it does not name keeps membound's figures. */
static gboolean load_membound_2021(ModelProfile *p, const cJSON *root, const char *file, GError **error) {
  memcpy(p->mem_2021_gap_s, p->mem_gap_s, sizeof p->mem_gap_s);
  memcpy(p->mem_2021_hbm_bytes_per_s, p->mem_hbm_bytes_per_s, sizeof p->mem_hbm_bytes_per_s);
  memcpy(p->mem_2021_l2_bytes_per_s, p->mem_l2_bytes_per_s, sizeof p->mem_l2_bytes_per_s);
  const cJSON *mb = cJSON_GetObjectItemCaseSensitive(root, "membound_2021");
  if (!mb)
    return TRUE;
  if (!cJSON_IsObject(mb) || !p->has_membound) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: 'membound_2021' must be an object of classes, beside a 'membound' block", file);
    return FALSE;
  }
  const cJSON *c;
  cJSON_ArrayForEach(c, mb) {
    ModelMemClass i = model_mem_class_lookup(c->string);
    if (i == MODEL_MEM_N) {
      g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                  "%s: 'membound_2021.%s' is not a class; the classes are copy, norm, pointwise, activation, softmax, "
                  "cross_entropy",
                  file, c->string);
      return FALSE;
    }
    if (!load_mem_class(root, "membound_2021", c->string, file, &p->mem_2021_gap_s[i],
                        &p->mem_2021_hbm_bytes_per_s[i], &p->mem_2021_l2_bytes_per_s[i], error))
      return FALSE;
  }
  p->has_membound_2021 = TRUE;
  return TRUE;
}

/* The optional "overlap" block: {"sms_per_channel", "hbm_bytes_per_byte"},
 * both or neither. */
static gboolean load_overlap(ModelProfile *p, const cJSON *root, const char *file, GError **error) {
  const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "overlap");
  if (!o)
    return TRUE;
  if (!cJSON_IsObject(o)) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "%s: 'overlap' must be an object", file);
    return FALSE;
  }
  if (!ptd_json_in(root, "overlap.sms_per_channel", file, &ptd_range_overlap_sms, &p->overlap_sms_per_channel,
                   error) ||
      !ptd_json_in(root, "overlap.hbm_bytes_per_byte", file, &ptd_range_overlap_bytes,
                   &p->overlap_hbm_bytes_per_byte, error))
    return FALSE;
  p->has_overlap = TRUE;
  return TRUE;
}

void model_profile_overlap(const ModelProfile *p, double *sms_per_channel, double *hbm_bytes_per_byte) {
  *sms_per_channel = p->has_overlap ? p->overlap_sms_per_channel : MODEL_OVERLAP_SMS_PER_CHANNEL;
  *hbm_bytes_per_byte = p->has_overlap ? p->overlap_hbm_bytes_per_byte : MODEL_OVERLAP_HBM_BYTES_PER_BYTE;
}

/* The optional "power" block: {"rated_W", "idle_W", "boost_clock_MHz",
 * "sustained_clock_MHz", "exponent"} (see profile.h). */
static gboolean load_power(ModelProfile *p, const cJSON *root, const char *file, GError **error) {
  const cJSON *pw = cJSON_GetObjectItemCaseSensitive(root, "power");
  if (!pw)
    return TRUE;
  if (!cJSON_IsObject(pw)) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "%s: 'power' must be an object", file);
    return FALSE;
  }
  if (!ptd_json_in(root, "power.rated_W", file, &ptd_range_power_W, &p->power_rated_W, error) ||
      !ptd_json_in(root, "power.idle_W", file, &ptd_range_power_W, &p->power_idle_W, error) ||
      !ptd_json_in(root, "power.boost_clock_MHz", file, &ptd_range_clock_MHz, &p->power_boost_clock_MHz, error) ||
      !ptd_json_in(root, "power.sustained_clock_MHz", file, &ptd_range_clock_MHz, &p->power_sustained_clock_MHz,
                   error) ||
      !ptd_json_in(root, "power.exponent", file, &ptd_range_power_exponent, &p->power_exponent, error))
    return FALSE;
  if (!(p->power_idle_W < p->power_rated_W)) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: key 'power.idle_W' is %g, not below 'power.rated_W' (%g); give the board's idle power, under its "
                "rated cap",
                file, p->power_idle_W, p->power_rated_W);
    return FALSE;
  }
  if (p->power_sustained_clock_MHz > p->power_boost_clock_MHz) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: key 'power.sustained_clock_MHz' is %g, above 'power.boost_clock_MHz' (%g); give the settled clock, "
                "at most the boost clock",
                file, p->power_sustained_clock_MHz, p->power_boost_clock_MHz);
    return FALSE;
  }
  p->has_power = TRUE;
  return TRUE;
}

/* f(C) / sustained_clock_MHz, at most boost / sustained: P(f) = idle +
 * (rated - idle) (f / f_s)^e solved for f.  Exactly 1 at C = rated. */
static double power_clock_share(const ModelProfile *p, double cap_W) {
  double x = pow((cap_W - p->power_idle_W) / (p->power_rated_W - p->power_idle_W), 1.0 / p->power_exponent);
  return fmin(x, p->power_boost_clock_MHz / p->power_sustained_clock_MHz);
}

double model_power_clock_MHz(const ModelProfile *p, double cap_W) {
  return p->power_sustained_clock_MHz * power_clock_share(p, cap_W);
}

double model_power_clock_ratio(const ModelProfile *p, double cap_W) {
  return fmin(1.0, p->sustained_clock_ratio * power_clock_share(p, cap_W));
}

/* The ceiling efficiency e_max that makes the model reproduce the anchor
 * measurement (the best GEMM rate published for the device). */
static gboolean solve_anchor(ModelProfile *p, const cJSON *gemm, const char *file, GError **error) {
  if (cJSON_GetObjectItemCaseSensitive(gemm, "efficiency_max")) /* fitted by ptdsim fit */
    return ptd_json_in(gemm, "efficiency_max", file, &ptd_range_efficiency, &p->gemm.efficiency_max, error);
  const cJSON *anchor = ptd_json_object(gemm, "anchor", file, error);
  double tflops, m, n, k;
  if (!anchor || !ptd_json_in(gemm, "anchor.tflops", file, &ptd_range_tflops, &tflops, error) ||
      !ptd_json_in(gemm, "anchor.m", file, &ptd_range_gemm_dim, &m, error) ||
      !ptd_json_in(gemm, "anchor.n", file, &ptd_range_gemm_dim, &n, error) ||
      !ptd_json_in(gemm, "anchor.k", file, &ptd_range_gemm_dim, &k, error))
    return FALSE;
  ModelGemm g = {1, (guint64)m, (guint64)n, (guint64)k};
  double want = model_gemm_flops(&g) / (tflops * 1e12) - p->kernel_launch_s;
  double e_max = want > 0 ? model_gemm_math_time_s(p, &g, 1.0) / want : 2;
  if (e_max > 1.0 || tflops * 1e12 > p->peak_flops) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: key 'gemm.anchor' asks for %.1f TFLOP/s, more than the tiling model allows at peak %.1f", file,
                tflops, p->peak_flops / 1e12);
    return FALSE;
  }
  p->gemm.efficiency_max = e_max;
  return TRUE;
}

static gboolean load_body(ModelProfile *p, const cJSON *root, const char *file, GError **error) {
  const char *kind = ptd_json_string(root, "kind", file, error);
  if (!kind)
    return FALSE;
  double peak, mem_gib;
  if (!ptd_json_in(root, "peak_tflops", file, &ptd_range_tflops, &peak, error) ||
      !ptd_json_in(root, "memory_GiB", file, &ptd_range_memory_GiB, &mem_gib, error))
    return FALSE;
  p->peak_flops = peak * 1e12;
  p->memory_bytes = mem_gib * 1073741824.0;
  if (strcmp(kind, "ideal") == 0) {
    double ns;
    p->kind = MODEL_PROFILE_IDEAL;
    if (!ptd_json_in(root, "layer_forward_ns_per_token", file, &ptd_range_ns_per_token, &ns, error))
      return FALSE;
    p->ideal_layer_s_per_token = ns * 1e-9;
    return TRUE;
  }
  if (strcmp(kind, "analytic") != 0) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "%s: key 'kind' must be \"analytic\" or \"ideal\", not \"%s\"",
                file, kind);
    return FALSE;
  }
  p->kind = MODEL_PROFILE_ANALYTIC;
  double hbm, launch_us, sms;
  const cJSON *gemm;
  if (!ptd_json_in(root, "sms", file, &ptd_range_sms, &sms, error) ||
      !ptd_json_in(root, "hbm_GBps", file, &ptd_range_bandwidth_GBps, &hbm, error) ||
      !ptd_json_in(root, "memory_efficiency", file, &ptd_range_efficiency, &p->memory_efficiency, error) ||
      !ptd_json_in(root, "kernel_launch_us", file, &ptd_range_latency_us, &launch_us, error) ||
      !(gemm = ptd_json_object(root, "gemm", file, error)) || !load_tiles(p, gemm, file, error) ||
      !ptd_json_in(root, "gemm.k_half", file, &ptd_range_gemm_dim, &p->gemm.k_half, error))
    return FALSE;
  p->sms = (guint)sms;
  double tile_bw;
  if (!ptd_json_in(root, "gemm.tile_bandwidth_GBps", file, &ptd_range_bandwidth_GBps, &tile_bw, error))
    return FALSE;
  p->gemm.tile_bytes_per_s = tile_bw * 1e9;
  if (!ptd_json_in_or(root, "sustained_clock_ratio", file, &ptd_range_efficiency, 1.0, &p->sustained_clock_ratio,
                      error))
    return FALSE;
  p->hbm_bytes_per_s = hbm * 1e9;
  p->kernel_launch_s = launch_us * 1e-6;
  return solve_anchor(p, gemm, file, error) && load_collectives(p, root, file, error) &&
         load_attention(p, root, file, error) && load_precisions(p, root, file, error) &&
         load_gemm_fp8(p, root, file, error) && load_membound(p, root, file, error) &&
         load_membound_2021(p, root, file, error) && load_power(p, root, file, error) &&
         load_overlap(p, root, file, error);
}

gboolean model_profile_supports(const ModelProfile *p, const char *precision) {
  for (guint i = 0; i < p->n_precisions; i++)
    if (strcmp(p->precisions[i], precision) == 0)
      return TRUE;
  return FALSE;
}

ModelProfile *model_profile_from_json(const cJSON *root, const char *path, GError **error) {
  ModelProfile *p = g_new0(ModelProfile, 1);
  p->path = g_strdup(path);
  const char *name = ptd_json_string(root, "name", path, error);
  if (!name || !load_body(p, root, path, error)) {
    model_profile_free(p);
    return NULL;
  }
  p->name = g_strdup(name);
  return p;
}

ModelProfile *model_profile_load(const char *name_or_file, GError **error) {
  char *path = ptd_data_resolve("calibrate/profiles", name_or_file, "profile", error);
  if (!path)
    return NULL;
  cJSON *root = ptd_json_load(path, error);
  ModelProfile *p = root ? model_profile_from_json(root, path, error) : NULL;
  cJSON_Delete(root);
  g_free(path);
  return p;
}
