/* ptdsim — device profile loading (see profile.h for the two kinds). */
#include "profile.h"

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

static gboolean load_tiles(ModelProfile *p, const cJSON *gemm, const char *file, GError **error) {
  const cJSON *tiles = cJSON_GetObjectItemCaseSensitive(gemm, "tiles");
  if (!cJSON_IsArray(tiles) || cJSON_GetArraySize(tiles) < 1 || cJSON_GetArraySize(tiles) > MODEL_PROFILE_MAX_TILES) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: key 'gemm.tiles' must be a list of 1 to %d [tile_m, tile_n] pairs", file, MODEL_PROFILE_MAX_TILES);
    return FALSE;
  }
  const cJSON *t;
  cJSON_ArrayForEach(t, tiles) {
    const cJSON *a = cJSON_GetArrayItem(t, 0), *b = cJSON_GetArrayItem(t, 1);
    if (!cJSON_IsArray(t) || cJSON_GetArraySize(t) != 2 || !cJSON_IsNumber(a) || !cJSON_IsNumber(b) ||
        a->valuedouble < 1 || b->valuedouble < 1 || a->valuedouble > 4096 || b->valuedouble > 4096) {
      g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                  "%s: key 'gemm.tiles' entry %u must be [tile_m, tile_n] with both in 1..4096", file, p->n_tiles);
      return FALSE;
    }
    p->tile_m[p->n_tiles] = (guint)a->valuedouble;
    p->tile_n[p->n_tiles] = (guint)b->valuedouble;
    p->n_tiles++;
  }
  return TRUE;
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
  if (!ptd_json_in(root, "attention.flash_forward_efficiency", file, &ptd_range_efficiency,
                   &p->flash_forward_efficiency, error) ||
      !ptd_json_in(root, "attention.flash_backward_efficiency", file, &ptd_range_efficiency,
                   &p->flash_backward_efficiency, error))
    return FALSE;
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(a, "default");
  if (d && (!cJSON_IsString(d) || (strcmp(d->valuestring, "flash") != 0 && strcmp(d->valuestring, "megatron") != 0))) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s: 'attention.default' must be \"flash\" or \"megatron\"", file);
    return FALSE;
  }
  p->flash_default = d && strcmp(d->valuestring, "flash") == 0;
  return TRUE;
}

/* The ceiling efficiency e_max that makes the model reproduce the anchor
 * measurement (the best GEMM rate published for the device). */
static gboolean solve_anchor(ModelProfile *p, const cJSON *gemm, const char *file, GError **error) {
  if (cJSON_GetObjectItemCaseSensitive(gemm, "efficiency_max")) /* fitted by ptdsim fit */
    return ptd_json_in(gemm, "efficiency_max", file, &ptd_range_efficiency, &p->gemm_efficiency_max, error);
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
  p->gemm_efficiency_max = e_max;
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
      !ptd_json_in(root, "gemm.k_half", file, &ptd_range_gemm_dim, &p->gemm_k_half, error))
    return FALSE;
  p->sms = (guint)sms;
  double tile_bw;
  if (!ptd_json_in(root, "gemm.tile_bandwidth_GBps", file, &ptd_range_bandwidth_GBps, &tile_bw, error))
    return FALSE;
  p->gemm_tile_bytes_per_s = tile_bw * 1e9;
  if (!ptd_json_in_or(root, "sustained_clock_ratio", file, &ptd_range_efficiency, 1.0, &p->sustained_clock_ratio,
                      error))
    return FALSE;
  p->hbm_bytes_per_s = hbm * 1e9;
  p->kernel_launch_s = launch_us * 1e-6;
  return solve_anchor(p, gemm, file, error) && load_collectives(p, root, file, error) &&
         load_attention(p, root, file, error) && load_precisions(p, root, file, error);
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
