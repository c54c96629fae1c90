/* ptdsim fit — turn calibration measurements into a device profile, or make
 * synthetic measurements from a profile (--synthesize). */
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../calibrate/fit.h"
#include "../base/jsonutil.h"
#include "../base/outfile.h"
#include "cli.h"

typedef struct {
  char *output, *name, *tiles_from, *dtype, *synthesize, *cluster, *shapes, *compare, *profile, *format;
  /* whole numbers as given (NULL: not given), read strictly by cli_count */
  char *max_iterations, *seed, *gpus, *hidden, *heads, *seq_len, *micro_batch, *tp;
  double noise;
} FitOptions;

static gboolean fail_with(GError **error, const char *msg) {
  g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID, "%s", msg);
  return FALSE;
}

/* Writes `json` to `path` only once it is known to be loadable as a
 * profile: the check reads the temporary file next to `path`, so only the
 * output's folder needs to be writable.  `input` (the measurements) is
 * never overwritten. */
static gboolean write_profile(cJSON *json, const char *path, const char *input, GError **error) {
  const char *inputs[] = {input, NULL};
  PtdOutFile *out = ptd_out_open(path, "-o", inputs, error);
  if (!out)
    return FALSE;
  char *text = cJSON_Print(json);
  gboolean ok = ptd_out_write(out, text, strlen(text), error);
  cJSON_free(text);
  if (ok) {
    ModelProfile *check = model_profile_load(ptd_out_tmp_path(out), error);
    ok = check != NULL;
    if (!ok)
      g_prefix_error(error, "the fitted profile does not load (a bug; please report): ");
    model_profile_free(check);
  }
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

static void print_summary(const cJSON *profile, const char *path) {
  const cJSON *fit = cJSON_GetObjectItemCaseSensitive(profile, "fit");
  const cJSON *mem = cJSON_GetObjectItemCaseSensitive(fit, "memory"), *gemm = cJSON_GetObjectItemCaseSensitive(fit, "gemm");
  const cJSON *mp = cJSON_GetObjectItemCaseSensitive(mem, "parameters"), *gp = cJSON_GetObjectItemCaseSensitive(gemm, "parameters");
  printf("wrote %s\n", path);
  printf("%-28s %14s %12s %14s\n", "parameter", "value", "stderr", "rms rel. res.");
  printf("%-28s %14.4g %12.3g %13.2f%%\n", "kernel launch (us)", num_at(mp, "launch_us", "value"),
         num_at(mp, "launch_us", "stderr"), 100 * num_at(fit, "memory", "rms_relative_residual"));
  printf("%-28s %14.6g %12.3g\n", "memory bandwidth (GB/s)", num_at(mp, "bandwidth_GBps", "value"),
         num_at(mp, "bandwidth_GBps", "stderr"));
  printf("%-28s %14.5g %12.3g %13.2f%%\n", "GEMM efficiency_max", num_at(gp, "efficiency_max", "value"),
         num_at(gp, "efficiency_max", "stderr"), 100 * num_at(fit, "gemm", "rms_relative_residual"));
  printf("%-28s %14.5g %12.3g\n", "GEMM k_half", num_at(gp, "k_half", "value"), num_at(gp, "k_half", "stderr"));
  printf("%-28s %14.5g %12.3g\n", "GEMM tile_bandwidth_GBps", num_at(gp, "tile_bandwidth_GBps", "value"),
         num_at(gp, "tile_bandwidth_GBps", "stderr"));
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(fit, "collectives")) {
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(c, "ranges")) {
      char label[64];
      g_snprintf(label, sizeof label, "%s x%d [%g..%g B]", cJSON_GetObjectItemCaseSensitive(c, "op")->valuestring,
                 (int)num_at(c, "ranks", NULL), num_at(r, "min_bytes", NULL), num_at(r, "max_bytes", NULL));
      printf("%-28s alpha %6.3g us (±%.2g)  busbw %7.4g GB/s (±%.2g)  %5.2f%%\n", label, num_at(r, "alpha_us", "value"),
             num_at(r, "alpha_us", "stderr"), num_at(r, "busbw_GBps", "value"), num_at(r, "busbw_GBps", "stderr"),
             100 * num_at(r, "rms_relative_residual", NULL));
    }
  }
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
    cfg.shapes[0] = (CalibLayerShape){h, a, s, b, t};
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
      printf("wrote %s: %u GEMMs, %u copies, %u kernels, %u layers, %u collectives (synthetic, noise %g, seed %u)\n",
             o->output, m->gemm->len, m->membw->len, m->kernels->len, m->layers->len, m->coll->len, o->noise, seed);
    calib_measurements_free(m);
  }
  calib_plan_free(plan);
  topo_cluster_free(cluster);
  model_profile_free(profile);
  return ok;
}

static gboolean fit(const FitOptions *o, const char *input, GError **error) {
  if (o->dtype && strcmp(o->dtype, "fp16") != 0 && strcmp(o->dtype, "bf16") != 0)
    return fail_with(error, "--dtype must be fp16 or bf16");
  guint max_iterations;
  if (!cli_count_or("--max-iterations", o->max_iterations, 1, 100000, 200, &max_iterations, error))
    return FALSE;
  CalibMeasurements *m = calib_measurements_load(input, error);
  if (!m)
    return FALSE;
  ModelProfile *tiles = model_profile_load(o->tiles_from ? o->tiles_from : "a100-sxm4-80gb", error);
  gboolean ok = tiles != NULL;
  if (ok && tiles->kind != MODEL_PROFILE_ANALYTIC)
    ok = fail_with(error, "--tiles-from needs an analytic profile (one with gemm.tiles)");
  cJSON *json = NULL;
  if (ok) {
    char *base = g_path_get_basename(o->output);
    char *dot = strrchr(base, '.');
    if (dot && dot != base)
      *dot = 0;
    CalibFitOptions fo = {o->name ? o->name : base, input, tiles, o->dtype, max_iterations};
    json = calib_fit(m, &fo, error);
    ok = json && write_profile(json, o->output, input, error);
    g_free(base);
  }
  if (ok)
    print_summary(json, o->output);
  cJSON_Delete(json);
  model_profile_free(tiles);
  calib_measurements_free(m);
  return ok;
}

/* Predicted against measured: the layer table and the GEMM summary. */
static gboolean compare(const FitOptions *o, GError **error) {
  const char *dtype = o->dtype ? o->dtype : "fp16";
  if (strcmp(dtype, "fp16") != 0 && strcmp(dtype, "bf16") != 0)
    return fail_with(error, "--dtype must be fp16 or bf16");
  if (!o->profile)
    return fail_with(error, "--compare needs --profile NAME|FILE (the profile whose predictions to compare)");
  CliFormat format = CLI_TEXT;
  if (o->format && !cli_format(o->format, &format, error))
    return FALSE;
  CalibMeasurements *m = calib_measurements_load(o->compare, error);
  if (!m)
    return FALSE;
  ModelProfile *p = model_profile_load(o->profile, error);
  cJSON *json = p ? calib_compare(m, p, dtype, error) : NULL;
  if (json && format == CLI_JSON) {
    char *text = cJSON_PrintUnformatted(json);
    printf("%s\n", text);
    cJSON_free(text);
  } else if (json) {
    printf("%s (%s) against profile %s\n", o->compare, m->synthetic ? "synthetic" : m->device.name, p->name);
    printf("\nlayer compute time on one GPU (no all-reduce), measured median vs ptdsim's layer model:\n");
    printf("  %-34s %-10s %13s %13s %8s\n", "shape", "pass", "measured us", "predicted us", "error");
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(json, "layer")) {
      CalibLayerShape sh = {(guint)num_at(r, "hidden", NULL), (guint)num_at(r, "heads", NULL),
                            (guint)num_at(r, "seq", NULL), (guint)num_at(r, "micro_batch", NULL),
                            (guint)num_at(r, "tp", NULL)};
      char label[96];
      calib_layer_shape_label(&sh, label, sizeof label);
      printf("  %-34s %-10s %13.1f %13.1f %+7.1f%%\n", label, cJSON_GetObjectItemCaseSensitive(r, "pass")->valuestring,
             num_at(r, "measured_us", NULL), num_at(r, "predicted_us", NULL), 100 * num_at(r, "error", NULL));
    }
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(json, "layer_summary");
    printf("  %d rows: median |error| %.1f%%, max |error| %.1f%%\n", (int)num_at(ls, "rows", NULL),
           100 * num_at(ls, "median_abs_error", NULL), 100 * num_at(ls, "max_abs_error", NULL));
    printf("\nGEMM model vs measured GEMMs (%s), |predicted / measured - 1|:\n", dtype);
    printf("  %-12s %6s %9s %9s %9s  %s\n", "group", "GEMMs", "median", "p90", "max", "worst");
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(json, "gemm")) {
      printf("  %-12s %6d %8.1f%% %8.1f%% %8.1f%%  %s\n", cJSON_GetObjectItemCaseSensitive(r, "group")->valuestring,
             (int)num_at(r, "gemms", NULL), 100 * num_at(r, "median_abs_error", NULL),
             100 * num_at(r, "p90_abs_error", NULL), 100 * num_at(r, "max_abs_error", NULL),
             cJSON_GetObjectItemCaseSensitive(r, "worst")->valuestring);
    }
  }
  cJSON_Delete(json);
  model_profile_free(p);
  calib_measurements_free(m);
  return json != NULL;
}

int cli_fit(int argc, char **argv) {
  FitOptions o = {.noise = 0.02};
  GOptionEntry entries[] = {
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &o.output, "Write the profile (or, with --synthesize, the measurements) here",
       "FILE"},
      {"name", 0, 0, G_OPTION_ARG_STRING, &o.name, "Profile name (default: the output file's base name)", "NAME"},
      {"tiles-from", 0, 0, G_OPTION_ARG_STRING, &o.tiles_from,
       "Profile whose GEMM tile shapes the fitted model uses (default a100-sxm4-80gb)", "PROFILE"},
      {"dtype", 0, 0, G_OPTION_ARG_STRING, &o.dtype, "GEMM records to fit: fp16 (default) or bf16", "TYPE"},
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
       "Instead of fitting: print measured vs predicted layer times and GEMM errors for --profile", "MEASUREMENTS"},
      {"profile", 0, 0, G_OPTION_ARG_STRING, &o.profile, "--compare: the profile to predict with, " PTD_NAME_OR_PATH_HELP, "NAME|FILE"},
      {"format", 0, 0, G_OPTION_ARG_STRING, &o.format, "--compare: text (default) or json", "FMT"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  CliArgs args;
  cli_args_init(&args, "MEASUREMENTS.json -o PROFILE.json");
  g_option_context_set_summary(
      args.ctx, "Fits a device profile to the measurements ptdsim-calibrate wrote: kernel launch and memory bandwidth,\n"
           "the GEMM efficiency model (e_max, k_half), and alpha and bus bandwidth per NCCL collective, by GSL\n"
           "nonlinear least squares on relative residuals.  The profile records fitted values, standard errors,\n"
           "residuals and the measurements file; use it with ptdsim run --profile PROFILE.json.\n\n"
           "Examples:\n  ptdsim fit h100.json -o h100-fitted.json\n"
           "  ptdsim fit --synthesize a100-sxm4-80gb --noise 0.02 --seed 7 -o synthetic.json\n"
           "  ptdsim fit --compare h100.json --profile h100-fitted.json");
  cli_args_add(&args, entries);
  GError *error = NULL;
  gboolean ok = cli_args_parse(&args, &argc, &argv, &error);
  if (ok && o.compare && (o.synthesize || o.output || argc > 1))
    ok = fail_with(&error, "--compare takes no measurements argument, -o or --synthesize: ptdsim fit --compare "
                           "MEASUREMENTS.json --profile PROFILE");
  if (ok && o.compare)
    ok = compare(&o, &error);
  else if (ok && !o.output)
    ok = fail_with(&error, "-o FILE is required (where to write the result)");
  if (ok && !o.compare && o.synthesize && argc > 1) {
    g_set_error(&error, CALIB_ERROR, CALIB_ERROR_INVALID, "unexpected argument '%s' with --synthesize", argv[1]);
    ok = FALSE;
  }
  if (ok && !o.compare && !o.synthesize && argc != 2)
    ok = fail_with(&error, argc < 2 ? "give the measurements file: ptdsim fit MEASUREMENTS.json -o PROFILE.json"
                                    : "give exactly one measurements file");
  if (ok && !o.compare)
    ok = o.synthesize ? synthesize(&o, &error) : fit(&o, argv[1], &error);
  int code = ok ? 0 : cli_fail(error);
  char **strs[] = {&o.output, &o.name,    &o.tiles_from, &o.dtype, &o.synthesize, &o.cluster,     &o.shapes,
                   &o.compare, &o.profile, &o.format,     &o.seed,  &o.gpus,       &o.hidden,      &o.heads,
                   &o.seq_len, &o.tp,      &o.micro_batch, &o.max_iterations};
  for (guint i = 0; i < G_N_ELEMENTS(strs); i++)
    g_free(*strs[i]);
  cli_args_clear(&args);
  return code;
}
