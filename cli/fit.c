/* ptdsim fit — turn calibration measurements into a device profile, or make
 * synthetic measurements from a profile (--synthesize). */
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../fit/fit.h"
#include "../fit/step.h"
#include "../base/jsonutil.h"
#include "../base/outfile.h"
#include "cli.h"

typedef struct {
  char *output, *name, *tiles_from, *dtype, *synthesize, *cluster, *shapes, *compare, *profile, *format, *base,
      *check_facts, *profiler_trace;
  /* whole numbers as given (NULL: not given), read strictly by cli_count */
  char *max_iterations, *seed, *gpus, *hidden, *heads, *seq_len, *micro_batch, *tp;
  double noise;
} FitOptions;

static gboolean fail_with(GError **error, const char *msg) {
  g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID, "%s", msg);
  return FALSE;
}

/* Writes `json` to `path` only once it is known to be loadable as a
 * profile: the check reads back the very text written (from memory, so
 * only the output's folder needs to be writable, and an error names the
 * user's file, never the temporary one).  `input` (the measurements) is
 * never overwritten. */
static gboolean write_profile(cJSON *json, const char *path, const char *const *inputs, GError **error) {
  PtdOutFile *out = ptd_out_open(path, "-o", inputs, error);
  if (!out)
    return FALSE;
  char *text = cJSON_Print(json);
  gboolean ok = ptd_out_write(out, text, strlen(text), error);
  if (ok) {
    cJSON *back = ptd_json_parse(text, strlen(text), path, error);
    ModelProfile *check = back ? model_profile_from_json(back, path, error) : NULL;
    cJSON_Delete(back);
    ok = check != NULL;
    if (!ok)
      g_prefix_error(error, "the fitted profile does not load (a bug; please report): ");
    model_profile_free(check);
  }
  cJSON_free(text);
  if (!ok) {
    ptd_out_abort(out);
    return FALSE;
  }
  return ptd_out_commit(out, error);
}

static double num_at(const cJSON *o, const char *a, const char *b) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
  if (b)
    x = cJSON_GetObjectItemCaseSensitive(x, b);
  return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

static void print_param(const char *label, const cJSON *params, const char *key, const cJSON *rms_from) {
  double rms = num_at(rms_from, "rms_relative_residual", NULL);
  printf("%-34s %12.6g %11.3g", label, num_at(params, key, "value"), num_at(params, key, "stderr"));
  if (isfinite(rms))
    printf(" %12.2f%%", 100 * rms);
  printf("\n");
}

static void print_summary(const cJSON *profile, const char *path) {
  const cJSON *fit = cJSON_GetObjectItemCaseSensitive(profile, "fit");
  printf("wrote %s\n", path);
  printf("%-34s %12s %11s %13s\n", "parameter", "value", "stderr", "rms rel. res.");
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(fit, "membound")) {
    const cJSON *pm = cJSON_GetObjectItemCaseSensitive(c, "parameters");
    char label[64];
    g_snprintf(label, sizeof label, "%s: gap (us)", c->string);
    print_param(label, pm, "gap_us", c);
    g_snprintf(label, sizeof label, "%s: HBM bandwidth (GB/s)", c->string);
    print_param(label, pm, "hbm_GBps", NULL);
    g_snprintf(label, sizeof label, "%s: L2 bandwidth (GB/s)", c->string);
    print_param(label, pm, "l2_GBps", NULL);
  }
  static const char *gemms[] = {"gemm", "gemm_fp8"};
  for (guint i = 0; i < G_N_ELEMENTS(gemms); i++) {
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(fit, gemms[i]);
    if (!g)
      continue;
    const cJSON *gp = cJSON_GetObjectItemCaseSensitive(g, "parameters");
    char label[64];
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(g, "dtype");
    const char *name = i ? "FP8 GEMM" : "GEMM";
    g_snprintf(label, sizeof label, "%s%s%s efficiency_max", name, dt ? " " : "", dt ? dt->valuestring : "");
    print_param(label, gp, "efficiency_max", g);
    g_snprintf(label, sizeof label, "%s k_half", name);
    print_param(label, gp, "k_half", NULL);
    g_snprintf(label, sizeof label, "%s tile_bandwidth_GBps", name);
    print_param(label, gp, "tile_bandwidth_GBps", NULL);
    if (i && cJSON_GetObjectItemCaseSensitive(gp, "split_accumulation"))
      print_param("FP8 gradient GEMMs' share of rate", gp, "split_accumulation", NULL);
    printf("  tiles: %s\n", cJSON_GetObjectItemCaseSensitive(g, "tiles")->valuestring);
  }
  static const char *passes[] = {"attention_forward", "attention_backward"};
  for (guint i = 0; i < G_N_ELEMENTS(passes); i++) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(fit, passes[i]);
    if (!a)
      continue;
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(a, "parameters");
    char label[64];
    g_snprintf(label, sizeof label, "flash %s: share of peak", i ? "backward" : "forward");
    print_param(label, ap, "efficiency", a);
    g_snprintf(label, sizeof label, "flash %s: block overhead (us)", i ? "backward" : "forward");
    print_param(label, ap, "cta_overhead_us", NULL);
  }
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(fit, "collectives")) {
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(c, "ranges")) {
      char label[64];
      g_snprintf(label, sizeof label, "%s x%d [%g..%g B]", cJSON_GetObjectItemCaseSensitive(c, "op")->valuestring,
                 (int)num_at(c, "ranks", NULL), num_at(r, "min_bytes", NULL), num_at(r, "max_bytes", NULL));
      printf("%-34s alpha %6.3g us (±%.2g)  busbw %7.4g GB/s (±%.2g)  %5.2f%%\n", label, num_at(r, "alpha_us", "value"),
             num_at(r, "alpha_us", "stderr"), num_at(r, "busbw_GBps", "value"), num_at(r, "busbw_GBps", "stderr"),
             100 * num_at(r, "rms_relative_residual", NULL));
    }
  }
  const cJSON *prov_scr = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(profile, "provenance"),
                                                           "sustained_clock_ratio");
  if (cJSON_IsString(prov_scr) && g_str_has_prefix(prov_scr->valuestring, "measured"))
    printf("%-34s %12.6g   (%s)\n", "sustained clock ratio", num_at(profile, "sustained_clock_ratio", NULL),
           prov_scr->valuestring + strlen("measured: "));
  const cJSON *ov = cJSON_GetObjectItemCaseSensitive(fit, "overlap");
  const cJSON *ovp = cJSON_GetObjectItemCaseSensitive(ov, "parameters");
  if (ovp) {
    print_param("SMs per NCCL channel (overlap)", ovp, "sms_per_channel", NULL);
    print_param("HBM bytes per byte moved (overlap)", ovp, "hbm_bytes_per_byte", NULL);
  }
  const cJSON *pw = cJSON_GetObjectItemCaseSensitive(profile, "power");
  if (pw)
    printf("%-34s rated %g W, idle %g W, SM clock %g MHz settled (boost %g), exponent %g\n", "power model",
           num_at(pw, "rated_W", NULL), num_at(pw, "idle_W", NULL), num_at(pw, "sustained_clock_MHz", NULL),
           num_at(pw, "boost_clock_MHz", NULL), num_at(pw, "exponent", NULL));
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(fit, "collectives_not_fitted"))
    if (cJSON_IsString(c) && strstr(c->valuestring, "not determined"))
      printf("not fitted: %s\n", c->valuestring);
  /* What came from the base profile. */
  const cJSON *prov = cJSON_GetObjectItemCaseSensitive(profile, "provenance"), *e;
  GString *from_base = g_string_new(NULL);
  cJSON_ArrayForEach(e, prov) {
    if (cJSON_IsString(e) && g_str_has_prefix(e->valuestring, "from the base profile"))
      g_string_append_printf(from_base, "%s%s", from_base->len ? ", " : "", e->string);
  }
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(prov, "base");
  if (from_base->len)
    printf("not measured, from the base profile %s: %s\n", cJSON_IsString(b) ? b->valuestring : "?", from_base->str);
  g_string_free(from_base, TRUE);
}

/* The shipped profile of the measured device: --base's default. */
static const char *default_base(const CalibMeasurements *m) {
  static const struct {
    const char *in_name, *profile;
  } known[] = {{"H200", "h200-sxm-141gb"}, {"H100", "h100-sxm5-80gb"}, {"A100", "a100-sxm4-80gb"},
               {"V100", "v100-sxm2-16gb"}};
  const char *name = m->device.name ? m->device.name : "";
  if (g_str_has_prefix(name, "synthetic "))
    return name + strlen("synthetic ");
  for (guint i = 0; i < G_N_ELEMENTS(known); i++)
    if (strstr(name, known[i].in_name))
      return known[i].profile;
  return NULL;
}

static gboolean synthesize(const FitOptions *o, GError **error) {
  CalibPlanConfig cfg;
  calib_plan_config_default(&cfg);
  gboolean one_shape = o->hidden || o->heads || o->seq_len || o->micro_batch || o->tp;
  guint seed, gpus, h, a, s, b, t;
  if (one_shape && o->shapes)
    return fail_with(error, "give either --shapes or --hidden/--heads/--seq-len/--micro-batch/--tp (one shape), not both");
  if (!cli_count_or("--seed", o->seed, 0, G_MAXINT32, 1, &seed, error) ||
      !cli_count_or("--gpus", o->gpus, 1, 64, 8, &gpus, error) ||
      !cli_count_or("--hidden", o->hidden, 1, 65536, 12288, &h, error) ||
      !cli_count_or("--heads", o->heads, 1, 65536, 96, &a, error) ||
      !cli_count_or("--seq-len", o->seq_len, 1, 65536, 2048, &s, error) ||
      !cli_count_or("--micro-batch", o->micro_batch, 1, 64, 1, &b, error) ||
      !cli_count_or("--tp", o->tp, 1, 64, 8, &t, error))
    return FALSE;
  if (!(o->noise >= 0 && o->noise <= 1))
    return fail_with(error, "--noise must be a relative standard deviation from 0 to 1 (0.02 is 2%)");
  cfg.gpus = gpus;
  if (one_shape) {
    cfg.shapes[0] = (CalibLayerShape){.hidden = h, .heads = a, .seq = s, .micro_batch = b, .tp = t};
    cfg.n_shapes = 1;
  } else if (o->shapes && !calib_plan_parse_shapes(o->shapes, &cfg, error))
    return FALSE;
  TopoCluster *cluster = NULL;
  ModelProfile *profile = NULL;
  CalibPlan *plan = NULL;
  gboolean ok = cli_load_machine(o->cluster, o->synthesize, &cluster, &profile, error);
  if (ok && profile->kind != MODEL_PROFILE_ANALYTIC)
    ok = fail_with(error, "--synthesize needs an analytic device profile (not 'ideal')");
  if (ok && cfg.gpus > cluster->gpus_per_node) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID, "--gpus %u is more than the %u GPUs of a %s node", cfg.gpus,
                cluster->gpus_per_node, cluster->name);
    ok = FALSE;
  }
  if (ok)
    ok = (plan = calib_plan_new(&cfg, error)) != NULL;
  if (ok) {
    ModelNet net = {.hw = cluster->net, .measured = profile->coll, .n_measured = profile->n_coll};
    CalibMeasurements *m = calib_synthesize(profile, &net, plan, o->noise, (gulong)seed);
    ok = calib_measurements_save(m, o->output, error);
    if (ok)
      printf("wrote %s: %u GEMMs, %u copies, %u kernels, %u memory-bound kernels, %u attention pairs, %u layers, %u "
             "collectives (synthetic, noise %g, seed %u)\n",
             o->output, m->gemm->len, m->membw->len, m->kernels->len, m->membound->len, m->attention->len,
             m->layers->len, m->coll->len, o->noise, seed);
    calib_measurements_free(m);
  }
  calib_plan_free(plan);
  topo_cluster_free(cluster);
  model_profile_free(profile);
  return ok;
}

/* The measurements of every file, merged (one GPU's, from several runs). */
static CalibMeasurements *load_all(char **paths, int n, GError **error) {
  CalibMeasurements *m = calib_measurements_load(paths[0], error);
  for (int i = 1; m && i < n; i++) {
    CalibMeasurements *more = calib_measurements_load(paths[i], error);
    gboolean ok = more && calib_measurements_merge(m, more, paths[i], error);
    calib_measurements_free(more);
    if (!ok) {
      calib_measurements_free(m);
      m = NULL;
    }
  }
  return m;
}

static gboolean fit(const FitOptions *o, char **inputs, int n_inputs, GError **error) {
  if (o->dtype && strcmp(o->dtype, "fp16") != 0 && strcmp(o->dtype, "bf16") != 0)
    return fail_with(error, "--dtype must be fp16 or bf16");
  guint max_iterations;
  if (!cli_count_or("--max-iterations", o->max_iterations, 1, 100000, 200, &max_iterations, error))
    return FALSE;
  CalibMeasurements *m = load_all(inputs, n_inputs, error);
  if (!m)
    return FALSE;
  char *input = g_strjoinv(", ", inputs);
  ModelProfile *tiles = NULL, *base = NULL;
  cJSON *base_json = NULL;
  gboolean ok = TRUE;
  if (o->tiles_from) {
    ok = (tiles = model_profile_load(o->tiles_from, error)) != NULL;
    if (ok && tiles->kind != MODEL_PROFILE_ANALYTIC)
      ok = fail_with(error, "--tiles-from needs an analytic profile (one with gemm.tiles)");
  }
  const char *base_name = o->base ? o->base : default_base(m);
  if (ok && o->base && strcmp(o->base, "none") == 0)
    base_name = NULL;
  if (ok && base_name) {
    char *path = ptd_data_resolve("calibrate/profiles", base_name, "profile", error);
    ok = path && (base_json = ptd_json_load(path, error)) && (base = model_profile_from_json(base_json, path, error));
    if (!ok && !o->base) /* the default base must load; say which it was */
      g_prefix_error(error, "the base profile %s of %s (give another with --base, or --base none): ", base_name,
                     m->device.name);
    else if (!ok)
      g_prefix_error(error, "--base: ");
    g_free(path);
  }
  if (ok && base && base->kind != MODEL_PROFILE_ANALYTIC)
    ok = fail_with(error, "--base needs an analytic profile, not 'ideal'");
  cJSON *json = NULL;
  if (ok) {
    if (!base_name)
      printf("no base profile: the profile holds what the measurements give, and nothing else (no FP8, no flash "
             "attention unless measured)\n");
    char *name = g_path_get_basename(o->output);
    char *dot = strrchr(name, '.');
    if (dot && dot != name)
      *dot = 0;
    CalibFitOptions fo = {.name = o->name ? o->name : name, .measurements_path = input, .base = base,
                          .base_json = base_json, .tiles_from = tiles, .dtype = o->dtype,
                          .max_iterations = max_iterations};
    json = calib_fit(m, &fo, error);
    ok = json && write_profile(json, o->output, (const char *const *)inputs, error);
    g_free(name);
  }
  if (ok)
    print_summary(json, o->output);
  cJSON_Delete(json);
  cJSON_Delete(base_json);
  model_profile_free(base);
  model_profile_free(tiles);
  calib_measurements_free(m);
  g_free(input);
  return ok;
}

/* Predicted against measured: every class's errors, then the layers. */
static void print_compare(const cJSON *json, const char *path, const char *device, const char *profile) {
  printf("%s (%s) against profile %s\n", path, device, profile);
  printf("\nmeasured vs predicted by class, |predicted / measured - 1|:\n");
  printf("  %-24s %-30s %6s %8s %8s %8s  %s\n", "class", "what", "count", "median", "p90", "max", "worst");
  const cJSON *r;
  cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(json, "classes")) {
    printf("  %-24s %-30s %6d %7.1f%% %7.1f%% %7.1f%%  %s\n", cJSON_GetObjectItemCaseSensitive(r, "class")->valuestring,
           cJSON_GetObjectItemCaseSensitive(r, "what")->valuestring, (int)num_at(r, "count", NULL),
           100 * num_at(r, "median_abs_error", NULL), 100 * num_at(r, "p90_abs_error", NULL),
           100 * num_at(r, "max_abs_error", NULL), cJSON_GetObjectItemCaseSensitive(r, "worst")->valuestring);
  }
  const cJSON *layers = cJSON_GetObjectItemCaseSensitive(json, "layer");
  if (cJSON_GetArraySize(layers) == 0)
    return;
  printf("\nlayer compute time on one GPU (no communication), measured median vs ptdsim's layer model:\n");
  printf("  %-50s %-10s %12s %13s %8s\n", "layer", "pass", "measured us", "predicted us", "error");
  cJSON_ArrayForEach(r, layers) {
    printf("  %-50s %-10s %12.1f %13.1f %+7.1f%%\n", cJSON_GetObjectItemCaseSensitive(r, "label")->valuestring,
           cJSON_GetObjectItemCaseSensitive(r, "pass")->valuestring, num_at(r, "measured_us", NULL),
           num_at(r, "predicted_us", NULL), 100 * num_at(r, "error", NULL));
  }
  const cJSON *ls = cJSON_GetObjectItemCaseSensitive(json, "layer_summary");
  printf("  %d rows: median |error| %.1f%%, max |error| %.1f%%\n", (int)num_at(ls, "rows", NULL),
         100 * num_at(ls, "median_abs_error", NULL), 100 * num_at(ls, "max_abs_error", NULL));
}

static gboolean print_json(const cJSON *json) {
  char *text = cJSON_PrintUnformatted(json);
  printf("%s\n", text);
  cJSON_free(text);
  return TRUE;
}

static gboolean compare(const FitOptions *o, GError **error) {
  if (o->dtype)
    return fail_with(error, "--compare compares every dtype the file has; drop --dtype");
  if (!o->profile)
    return fail_with(error, "--compare needs --profile NAME|FILE (the profile whose predictions to compare)");
  CliFormat format = CLI_TEXT;
  if (o->format && !cli_format(o->format, &format, error))
    return FALSE;
  CalibMeasurements *m = calib_measurements_load(o->compare, error);
  if (!m)
    return FALSE;
  ModelProfile *p = model_profile_load(o->profile, error);
  cJSON *json = p ? calib_compare(m, p, error) : NULL;
  if (json && format == CLI_JSON)
    print_json(json);
  else if (json)
    print_compare(json, o->compare, m->synthetic ? "synthetic" : m->device.name, p->name);
  cJSON_Delete(json);
  model_profile_free(p);
  calib_measurements_free(m);
  return json != NULL;
}

/* Another tool's kernel facts against a profile. */
static gboolean check_facts(const FitOptions *o, GError **error) {
  if (!o->profile)
    return fail_with(error, "--check-facts needs --profile NAME|FILE (the profile whose predictions to check)");
  CliFormat format = CLI_TEXT;
  if (o->format && !cli_format(o->format, &format, error))
    return FALSE;
  cJSON *facts = ptd_json_load(o->check_facts, error);
  if (!facts)
    return FALSE;
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(facts, "format");
  if (cJSON_IsString(fmt) && strcmp(fmt->valuestring, CALIB_FORMAT) == 0) {
    /* Another tool's timings written in the measurements format (PyTorch's
     * FP8 GEMMs, say): checked record by record and class by class, as
     * --compare checks a harness file. */
    cJSON_Delete(facts);
    FitOptions c = *o;
    c.compare = o->check_facts;
    c.check_facts = NULL;
    return compare(&c, error);
  }
  ModelProfile *p = model_profile_load(o->profile, error);
  cJSON *json = p ? calib_check_facts(facts, o->check_facts, p, error) : NULL;
  if (json && format == CLI_JSON)
    print_json(json);
  else if (json) {
    printf("%s against profile %s\n", o->check_facts, p->name);
    printf("(a time at or below its pass's host floor, %.0f us forward and %.0f us backward for attention, is an "
           "upper bound: a prediction below it is consistent, marked '<=')\n\n",
           num_at(json, "attention_floor_forward_us", NULL), num_at(json, "attention_floor_backward_us", NULL));
    printf("  %-30s %-40s %12s %13s %8s\n", "kind", "what", "measured us", "predicted us", "error");
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(json, "rows")) {
      gboolean ub = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "upper_bound"));
      double meas = num_at(r, "measured_us", NULL), pred = num_at(r, "predicted_us", NULL);
      printf("  %-30s %-40s %12.1f %13.1f %+7.1f%%%s\n", cJSON_GetObjectItemCaseSensitive(r, "kind")->valuestring,
             cJSON_GetObjectItemCaseSensitive(r, "what")->valuestring, meas, pred, 100 * num_at(r, "error", NULL),
             ub ? (pred <= meas ? " <=" : " bound exceeded") : "");
    }
    printf("\n  %-30s %6s %8s %14s %10s  %s\n", "kind", "rows", "bounded", "median |error|", "max", "worst");
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(json, "summary")) {
      printf("  %-30s %6d %8d %13.1f%% %9.1f%%  %s\n", cJSON_GetObjectItemCaseSensitive(r, "kind")->valuestring,
             (int)num_at(r, "rows", NULL), (int)num_at(r, "bounded", NULL), 100 * num_at(r, "median_abs_error", NULL),
             100 * num_at(r, "max_abs_error", NULL), cJSON_GetObjectItemCaseSensitive(r, "worst")->valuestring);
    }
  }
  cJSON_Delete(json);
  cJSON_Delete(facts);
  model_profile_free(p);
  return json != NULL;
}

/* The figures of a step for people, from the JSON (so both say the same):
 * every number read is one calib_step_json always writes. */
static char *step_text(const cJSON *json) {
  GString *s = g_string_new(NULL);
  const cJSON *src = cJSON_GetObjectItemCaseSensitive(json, "source");
  const cJSON *gpu = cJSON_GetObjectItemCaseSensitive(json, "gpu");
  const cJSON *host = cJSON_GetObjectItemCaseSensitive(json, "host");
  const cJSON *dev = cJSON_GetObjectItemCaseSensitive(src, "device");
  const cJSON *sha = cJSON_GetObjectItemCaseSensitive(src, "sha256");
  g_string_append_printf(s, "profiler trace %s%s%s%s\n", cJSON_GetObjectItemCaseSensitive(src, "file")->valuestring,
                         cJSON_IsString(dev) ? " (" : "", cJSON_IsString(dev) ? dev->valuestring : "",
                         cJSON_IsString(dev) ? ")" : "");
  if (cJSON_IsString(sha))
    g_string_append_printf(s, "  sha256 %s\n", sha->valuestring);
  g_string_append_printf(s, "  %u kernels, %u memsets, %u memcpys on %u stream%s; %u CUDA calls, %u CPU ops\n\n",
                         (guint)num_at(src, "kernels", NULL), (guint)num_at(src, "memsets", NULL),
                         (guint)num_at(src, "memcpys", NULL),
                         (guint)num_at(src, "streams", NULL), num_at(src, "streams", NULL) == 1 ? "" : "s",
                         (guint)num_at(src, "cuda_calls", NULL), (guint)num_at(src, "cpu_ops", NULL));
  double span = num_at(gpu, "span_us", NULL);
  g_string_append_printf(s, "  GPU span          %10.3f ms  first GPU op's start to the last one's end", span / 1e3);
  if (cJSON_GetObjectItemCaseSensitive(src, "profiler_window_us"))
    g_string_append_printf(s, " (the profiler's window: %.3f ms)", num_at(src, "profiler_window_us", NULL) / 1e3);
  g_string_append_printf(s, "\n  GPU busy          %10.3f ms  %5.1f%% of the span (the union of the GPU's ops)\n",
                         num_at(gpu, "busy_us", NULL) / 1e3, 100 * num_at(gpu, "busy_share", NULL));
  g_string_append_printf(s, "  GPU idle          %10.3f ms  %5.1f%%\n", num_at(gpu, "idle_us", NULL) / 1e3,
                         100 * num_at(gpu, "idle_share", NULL));
  g_string_append_printf(s, "  GPU op time       %10.3f ms  the sum of the ops' durations\n\n",
                         num_at(gpu, "op_time_us", NULL) / 1e3);
  g_string_append_printf(s, "  %-20s %6s %12s %8s\n", "class", "ops", "time ms", "share");
  const cJSON *r;
  cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(json, "classes")) {
    g_string_append_printf(s, "  %-20s %6u %12.3f %7.1f%%\n", cJSON_GetObjectItemCaseSensitive(r, "class")->valuestring,
                           (guint)num_at(r, "ops", NULL), num_at(r, "time_us", NULL) / 1e3,
                           100 * num_at(r, "share", NULL));
  }
  const cJSON *fw = cJSON_GetObjectItemCaseSensitive(json, "framework_kernels");
  g_string_append_printf(s, "  %-20s %6s %12.3f %7.1f%%  (every class but gemm and attention)\n\n", "framework", "",
                         num_at(fw, "time_us", NULL) / 1e3, 100 * num_at(fw, "share", NULL));
  g_string_append_printf(s, "  launches          %10u  CUDA calls that launched a GPU op, on %u thread%s\n",
                         (guint)num_at(host, "launches", NULL), (guint)num_at(host, "launch_threads", NULL),
                         num_at(host, "launch_threads", NULL) == 1 ? "" : "s");
  g_string_append_printf(s, "  host per launch   %10.2f us  median start-to-start gap of consecutive launches on a thread\n",
                         num_at(host, "launch_gap_median_us", NULL));
  g_string_append_printf(s, "  launch call       %10.2f us  median duration of a launching call\n",
                         num_at(host, "launch_call_median_us", NULL));
  g_string_append_printf(s, "  GPU waited for host %8.3f ms  %5.1f%% of the span, before %u ops launched after the GPU "
                            "ran idle\n",
                         num_at(host, "gpu_wait_us", NULL) / 1e3, 100 * num_at(host, "gpu_wait_share", NULL),
                         (guint)num_at(host, "gpu_waits", NULL));
  g_string_append_printf(s, "  other idle        %10.3f ms  idle gaps whose op was launched before the GPU ran idle\n",
                         num_at(host, "other_idle_us", NULL) / 1e3);
  return g_string_free(s, FALSE);
}

/* The figures of one profiled step, printed or written to -o. */
static gboolean profiler_step(const FitOptions *o, GError **error) {
  CliFormat format = CLI_TEXT;
  if (o->format && !cli_format(o->format, &format, error))
    return FALSE;
  CalibProfTrace *t = calib_prof_load(o->profiler_trace, error);
  if (!t)
    return FALSE;
  CalibStepFigures f;
  calib_step_figures(t, &f);
  cJSON *json = calib_step_json(t, &f);
  calib_prof_free(t);
  char *text;
  if (format == CLI_JSON) {
    char *body = cJSON_Print(json);
    text = g_strconcat(body, "\n", NULL);
    cJSON_free(body);
  } else
    text = step_text(json);
  cJSON_Delete(json);
  gboolean ok = TRUE;
  if (o->output) {
    const char *inputs[] = {o->profiler_trace, NULL};
    PtdOutFile *out = ptd_out_open(o->output, "-o", inputs, error);
    ok = out && ptd_out_write(out, text, strlen(text), error) && ptd_out_commit(out, error);
    if (out && !ok)
      ptd_out_abort(out);
  } else
    fputs(text, stdout);
  g_free(text);
  return ok;
}

/* The modes that fit, synthesize, compare or check facts. */
static gboolean fit_modes(const FitOptions *o, int argc, char **argv, GError **error) {
  gboolean ok = TRUE;
  if (o->compare && (o->synthesize || o->output || argc > 1))
    ok = fail_with(error, "--compare takes no measurements argument, -o or --synthesize: ptdsim fit --compare "
                           "MEASUREMENTS.json --profile PROFILE");
  if (ok && o->check_facts && (o->synthesize || o->output || argc > 1))
    ok = fail_with(error, "--check-facts takes no measurements argument, -o or --synthesize: ptdsim fit "
                           "--check-facts FACTS.json --profile PROFILE");
  if (ok && o->check_facts)
    ok = check_facts(o, error);
  else if (ok && o->compare)
    ok = compare(o, error);
  else if (ok && !o->output)
    ok = fail_with(error, "-o FILE is required (where to write the result)");
  if (ok && !o->compare && !o->check_facts && o->synthesize && argc > 1) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID, "unexpected argument '%s' with --synthesize", argv[1]);
    ok = FALSE;
  }
  if (ok && !o->compare && !o->check_facts && !o->synthesize && argc < 2)
    ok = fail_with(error, "give the measurements file: ptdsim fit MEASUREMENTS.json [MORE.json ...] -o PROFILE.json");
  if (ok && !o->compare && !o->check_facts)
    ok = o->synthesize ? synthesize(o, error) : fit(o, argv + 1, argc - 1, error);
  return ok;
}

int cli_fit(int argc, char **argv) {
  FitOptions o = {.noise = 0.02};
  GOptionEntry entries[] = {
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &o.output, "Write the profile (or, with --synthesize, the measurements) here",
       "FILE"},
      {"name", 0, 0, G_OPTION_ARG_STRING, &o.name, "Profile name (default: the output file's base name)", "NAME"},
      {"base", 0, 0, G_OPTION_ARG_STRING, &o.base,
       "Profile whose values stand where the measurements have none, each said so in the provenance (default: the "
       "shipped profile of the measured GPU; none: no base), " PTD_NAME_OR_PATH_HELP,
       "NAME|FILE"},
      {"tiles-from", 0, 0, G_OPTION_ARG_STRING, &o.tiles_from,
       "Profile whose GEMM tile shapes the fitted model uses (default: the tiles cuBLASLt reported, else chosen from "
       "the device's candidates)",
       "PROFILE"},
      {"dtype", 0, 0, G_OPTION_ARG_STRING, &o.dtype, "16-bit GEMM records to fit: fp16 or bf16 (default bf16 where measured)",
       "TYPE"},
      {"max-iterations", 0, 0, G_OPTION_ARG_STRING, &o.max_iterations, "Iterations allowed per fit (default 200)", "N"},
      {"synthesize", 0, 0, G_OPTION_ARG_STRING, &o.synthesize,
       "Instead of fitting: write the measurements this profile predicts for the calibration plan, with noise",
       "PROFILE"},
      {"noise", 0, 0, G_OPTION_ARG_DOUBLE, &o.noise, "--synthesize: relative noise, lognormal sigma (default 0.02)", "S"},
      {"seed", 0, 0, G_OPTION_ARG_STRING, &o.seed, "--synthesize: random seed (default 1)", "N"},
      {"cluster", 0, 0, G_OPTION_ARG_STRING, &o.cluster,
       "--synthesize: cluster whose intra-node network gives the collectives, " PTD_NAME_OR_PATH_HELP " (default selene)",
       "NAME|FILE"},
      {"gpus", 0, 0, G_OPTION_ARG_STRING, &o.gpus, "--synthesize: GPUs of the NCCL sweep (default 8)", "N"},
      {"shapes", 0, 0, G_OPTION_ARG_STRING, &o.shapes,
       "--synthesize: layer shapes, as ptdsim-calibrate --shapes (default sc21)", "SPEC"},
      {"hidden", 0, 0, G_OPTION_ARG_STRING, &o.hidden, "--synthesize: one layer shape instead: hidden size (default 12288)",
       "H"},
      {"heads", 0, 0, G_OPTION_ARG_STRING, &o.heads, "--synthesize: attention heads (default 96)", "A"},
      {"seq-len", 0, 0, G_OPTION_ARG_STRING, &o.seq_len, "--synthesize: sequence length (default 2048)", "S"},
      {"micro-batch", 0, 0, G_OPTION_ARG_STRING, &o.micro_batch, "--synthesize: micro-batch (default 1)", "B"},
      {"tp", 0, 0, G_OPTION_ARG_STRING, &o.tp, "--synthesize: tensor-parallel size (default 8)", "T"},
      {"compare", 0, 0, G_OPTION_ARG_FILENAME, &o.compare,
       "Instead of fitting: measured vs predicted for --profile, every class (GEMMs per dtype, attention, memory-bound "
       "kernels, layers)",
       "MEASUREMENTS"},
      {"check-facts", 0, 0, G_OPTION_ARG_FILENAME, &o.check_facts,
       "Instead of fitting: another tool's kernel timings (attention, gemm, membound lists) against --profile", "FILE"},
      {"profile", 0, 0, G_OPTION_ARG_STRING, &o.profile, "--compare: the profile to predict with, " PTD_NAME_OR_PATH_HELP, "NAME|FILE"},
      {"profiler-trace", 0, 0, G_OPTION_ARG_FILENAME, &o.profiler_trace,
       "Instead of fitting: the figures of one step from a torch.profiler trace (export_chrome_trace's JSON, plain or "
       "gzip): GPU busy and idle, GPU time by class of kernel, launches, host cost per launch (-o FILE: written there)",
       "TRACE"},
      {"format", 0, 0, G_OPTION_ARG_STRING, &o.format, "--compare, --check-facts, --profiler-trace: text (default) or json",
       "FMT"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  CliArgs args;
  cli_args_init(&args, "MEASUREMENTS.json [MORE.json ...] -o PROFILE.json");
  g_option_context_set_summary(
      args.ctx, "Fits a whole device profile to the measurements ptdsim-calibrate wrote: memory-bound kernels per class\n"
           "(gap, HBM and L2 bandwidth), the GEMM model per dtype (bf16/fp16 and FP8: e_max, k_half, tile\n"
           "bandwidth over the device's tiles), flash attention's waves per pass, and alpha and bus bandwidth per\n"
           "NCCL collective, by GSL nonlinear least squares on relative residuals; what the file does not measure\n"
           "comes from --base, said so in the provenance.  The profile records fitted values, standard errors,\n"
           "residuals and the measurements file; use it with ptdsim run --profile PROFILE.json.\n\n"
           "Examples:\n  ptdsim fit h100.json -o h100-fitted.json\n"
           "  ptdsim fit --synthesize a100-sxm4-80gb --noise 0.02 --seed 7 -o synthetic.json\n"
           "  ptdsim fit --compare h100.json --profile h100-fitted.json\n"
           "  ptdsim fit --check-facts h100-kernels-pytorch.json --profile h100-fitted.json\n"
           "  ptdsim fit --profiler-trace step.json.gz --format json");
  cli_args_add(&args, entries);
  GError *error = NULL;
  gboolean ok = cli_args_parse(&args, &argc, &argv, &error);
  if (ok && o.compare && o.check_facts)
    ok = fail_with(&error, "give --compare or --check-facts, not both");
  if (ok && o.profiler_trace) {
    /* every option but -o and --format belongs to another mode */
    const char *other[] = {o.compare, o.check_facts, o.synthesize, o.profile, o.dtype, o.base, o.name, o.tiles_from,
                           o.cluster, o.shapes, o.max_iterations, o.seed, o.gpus, o.hidden, o.heads, o.seq_len,
                           o.micro_batch, o.tp};
    gboolean alone = argc <= 1;
    for (guint i = 0; i < G_N_ELEMENTS(other); i++)
      alone = alone && !other[i];
    ok = alone ? profiler_step(&o, &error)
               : fail_with(&error, "--profiler-trace takes only -o and --format: ptdsim fit --profiler-trace TRACE "
                                   "[--format json] [-o FILE]");
  } else if (ok)
    ok = fit_modes(&o, argc, argv, &error);
  int code = ok ? 0 : cli_fail(error);
  char **strs[] = {&o.output, &o.name,    &o.tiles_from, &o.dtype, &o.synthesize, &o.cluster,     &o.shapes,
                   &o.compare, &o.profile, &o.format,     &o.seed,  &o.gpus,       &o.hidden,      &o.heads,
                   &o.seq_len, &o.tp,      &o.micro_batch, &o.max_iterations, &o.base, &o.check_facts, &o.profiler_trace};
  for (guint i = 0; i < G_N_ELEMENTS(strs); i++)
    g_free(*strs[i]);
  cli_args_clear(&args);
  return code;
}
