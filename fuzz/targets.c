/* ptdsim — the fuzz targets (see targets.h). */
#include "targets.h"

#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/jsonutil.h"
#include "../measure/measurements.h"
#include "../fit/fit.h"
#include "../fit/step.h"
#include "../measure/profiler.h"
#include "../replay/replay.h"
#include "../search/grid.h"
#include "../schedule/schedule.h"
#include "../traces/report.h"
#include "../traces/runner.h"
#include "../plan/validate.h"
#include "../models/modelfile.h"

static const char *const names[FUZZ_N_TARGETS] = {"cluster", "profile",  "measurements", "trace",      "sweep",
                                                   "trace-gz", "fit",     "schedule",     "slow",       "slow-link",
                                                   "stage-times", "profiler-trace", "replay",
                                                   "model"};

const char *fuzz_target_name(FuzzTarget t) { return t < FUZZ_N_TARGETS ? names[t] : NULL; }

gint fuzz_target_find(const char *name) {
  for (guint i = 0; i < FUZZ_N_TARGETS; i++)
    if (g_strcmp0(name, names[i]) == 0)
      return (gint)i;
  return -1;
}

const char *const *fuzz_target_seeds(FuzzTarget t) {
  static const char *const clusters[] = {"topologies/selene.json", "topologies/dgx-h100-superpod.json",
                                         "topologies/aws-p3-16xlarge.json", NULL};
  static const char *const profiles[] = {"calibrate/profiles/a100-sxm4-80gb.json",
                                         "calibrate/profiles/h100-sxm5-80gb.json",
                                         "calibrate/profiles/v100-sxm2-16gb.json", "calibrate/profiles/ideal.json",
                                         NULL};
  /* what GPUs measured and what was transcribed from publications */
  static const char *const measurements[] = {"calibrate/measurements/h100-sxm5-80gb-gemm-shards.json",
                                             "calibrate/measurements/h100-sxm5-80gb-sc21.json",
                                             "calibrate/measurements/h200-sxm-141gb-sc21.json",
                                             "calibrate/published/h100-flash-attention-fa3.json", NULL};
  /* the fit: those, and the project's own synthetic seed */
  static const char *const fit[] = {"calibrate/measurements/h100-sxm5-80gb-gemm-shards.json",
                                    "calibrate/measurements/h100-sxm5-80gb-sc21.json",
                                    "calibrate/measurements/h200-sxm-141gb-sc21.json",
                                    "calibrate/published/h100-flash-attention-fa3.json",
                                    "fuzz/seeds/measurements/synthetic-small.json", NULL};
  static const char *const profiler[] = {"calibrate/measurements/h100-step-trace-qwen-like-14b-l4.json.gz",
                                         "calibrate/measurements/h100-step-trace-llama70b-t4-shard-l4.json.gz", NULL};
  static const char *const none[] = {NULL};
  return t == FUZZ_CLUSTER        ? clusters
         : t == FUZZ_PROFILE      ? profiles
         : t == FUZZ_MEASUREMENTS ? measurements
         : t == FUZZ_FIT          ? fit
         : t == FUZZ_PROFILER_TRACE || t == FUZZ_REPLAY ? profiler
                                  : none;
}

void fuzz_init(void) { g_log_set_always_fatal(G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING | G_LOG_FATAL_MASK); }

/* A small run on the machine, checked; refusals (it does not fit the
 * cluster, ...) are fine. */
static void small_run(const TopoCluster *cluster, const ModelProfile *profile) {
  guint gpus = topo_cluster_gpus(cluster) >= 2 ? 2 : 1;
  SimPlanRequest req = {.model = {2, 256, 4, 128, 1024}, .gpus = gpus, .tp = 1, .pp = gpus, .global_batch = 4,
                        .micro_batch = 1, .allow_oom = TRUE, .tokens = 1e9};
  for (guint net = 0; net < (cluster->has_fabric ? 2u : 1u); net++) {
    req.network = net ? SIM_NETWORK_FLOW : SIM_NETWORK_ANALYTIC;
    req.network_given = TRUE;
    GError *error = NULL;
    cJSON *run = trace_run(&req, cluster, profile, NULL, 0, &error);
    /* trace_run refuses such a result itself; this checks that it does */
    if (run && !trace_run_json_check(run, &error)) {
      fprintf(stderr, "fuzz: trace_run returned a run it must refuse: %s\n", error->message);
      abort();
    }
    cJSON_Delete(run);
    g_clear_error(&error);
  }
}

static const TopoCluster *selene(void) {
  static TopoCluster *c;
  if (!c) {
    GError *error = NULL;
    c = topo_cluster_load("selene", &error);
    g_assert_no_error(error);
  }
  return c;
}

static const ModelProfile *a100(void) {
  static ModelProfile *p;
  if (!p) {
    GError *error = NULL;
    p = model_profile_load("a100-sxm4-80gb", &error);
    g_assert_no_error(error);
  }
  return p;
}

/* The input as a file, for the readers that take a path: in a private
 * folder of one per process, with the name `name`; removed again by
 * done_with_file after each input, so that nothing is left behind. */
static char *as_file(const guint8 *data, gsize size, const char *name) {
  static char *dir;
  if (!dir) {
    dir = g_dir_make_tmp("ptdsim-fuzz-XXXXXX", NULL);
    g_assert_nonnull(dir);
  } else
    g_assert_true(g_mkdir(dir, 0700) == 0); /* the same name again: it was removed with the last input */
  char *path = g_build_filename(dir, name, NULL);
  g_assert_true(g_file_set_contents(path, (const char *)data, (gssize)size, NULL));
  return path;
}

static void done_with_file(char *path) {
  char *dir = g_path_get_dirname(path);
  g_unlink(path);
  g_rmdir(dir); /* empty again: made anew for the next input */
  g_free(dir);
  g_free(path);
}

/* ptdsim fit on the measurements, with the A100's profile as the base: an
 * accepted fit must give a profile that loads (the fit once made a
 * bandwidth of 2e8 GB/s from the project's own seed). */
static void fit_check(const CalibMeasurements *m) {
  static ModelProfile *base;
  static cJSON *base_json;
  if (!base) {
    GError *error = NULL;
    char *path = ptd_data_resolve("calibrate/profiles", "a100-sxm4-80gb", "profile", &error);
    g_assert_no_error(error);
    base_json = ptd_json_load(path, &error);
    g_assert_no_error(error);
    base = model_profile_from_json(base_json, path, &error);
    g_assert_no_error(error);
    g_free(path);
  }
  CalibFitOptions fo = {.name = "fuzz", .measurements_path = "fuzz.json", .base = base, .base_json = base_json,
                        .max_iterations = 50};
  GError *error = NULL;
  cJSON *prof = calib_fit(m, &fo, &error);
  if (prof) {
    char *text = cJSON_Print(prof);
    cJSON *back = ptd_json_parse(text, strlen(text), "fitted.json", &error);
    ModelProfile *p = back ? model_profile_from_json(back, "fitted.json", &error) : NULL;
    if (!p) {
      fprintf(stderr, "fuzz: the fit made a profile that does not load: %s\n", error ? error->message : "?");
      abort();
    }
    model_profile_free(p);
    cJSON_Delete(back);
    cJSON_free(text);
    cJSON_Delete(prof);
  }
  g_clear_error(&error);
}

/* A schedule file (sim_schedule_file_parse) for p = 1 + data[0] % 8 ranks
 * and m = 1 + data[1] % 12 microbatches.  One it accepts has every pass of
 * every microbatch once, in order, and runs to the end: with one chunk per
 * rank, timed with equal passes, its longest stage span is finite and at
 * least a stage's work. */
static void schedule_file(const guint8 *data, gsize size) {
  if (size < 2)
    return;
  guint p = 1 + data[0] % 8, m = 1 + data[1] % 12;
  GError *error = NULL;
  SimScheduleFile *f = sim_schedule_file_parse((const char *)data + 2, size - 2, "fuzz.csv", p, m, &error);
  g_clear_error(&error);
  if (!f)
    return;
  guint passes = 0;
  for (guint r = 0; r < p; r++)
    passes += f->orders[r]->len;
  if (passes < 2 * p * f->v * m || passes > 3 * p * f->v * m) {
    fprintf(stderr, "fuzz: an accepted schedule has %u passes for %u stages of %u microbatches\n", passes, p * f->v, m);
    abort();
  }
  if (f->v == 1 && !f->splits) {
    double *t = g_new(double, 3 * (gsize)p);
    for (guint j = 0; j < 3 * p; j++)
      t[j] = 1;
    double span = sim_schedule_span(p, m, f->orders, t, t + p, t + 2 * p, 0);
    g_free(t);
    if (!(span >= 3.0 * m && span < 1e300)) {
      fprintf(stderr, "fuzz: an accepted schedule runs for %g (at least %u expected, and to the end)\n", span, 3 * m);
      abort();
    }
  }
  sim_schedule_file_free(f);
}

/* An option value (--slow, --slow-link, --stage-times) through its parser
 * and, where accepted, through a small run on Selene (16 GPUs: t 4, p 2,
 * d 2, two nodes; zb-h1 with --stage-times), which may refuse it (an index
 * outside the run, a node with no NIC up, an op too long) but must not
 * return a run with a number it should have refused. */
static void option_value(FuzzTarget t, const guint8 *data, gsize size) {
  char *text = g_strndup((const char *)data, MIN(size, FUZZ_VALUE_MAX));
  GError *error = NULL;
  SimSlow slow[SIM_MAX_SLOW];
  double ms[4];
  guint n;
  gboolean ok = t == FUZZ_STAGE_TIMES ? sim_stage_times_parse(text, ms, &error)
                                      : sim_slow_parse(text, t == FUZZ_SLOW_LINK, slow, &n, &error);
  g_clear_error(&error);
  if (ok) {
    SimPlanRequest req = {.model = {2, 256, 4, 128, 1024}, .gpus = 16, .tp = 4, .pp = 2, .global_batch = 4,
                          .micro_batch = 1, .allow_oom = TRUE, .network = SIM_NETWORK_ANALYTIC,
                          .network_given = TRUE};
    if (t == FUZZ_STAGE_TIMES)
      req.stage_times = TRUE, memcpy(req.stage_times_ms, ms, sizeof ms), req.stage_times_text = text,
      req.schedule = SIM_SCHEDULE_ZB_H1, req.schedule_given = TRUE;
    else if (t == FUZZ_SLOW)
      memcpy(req.stragglers.gpu, slow, n * sizeof *slow), req.stragglers.n_gpu = n;
    else
      memcpy(req.stragglers.link, slow, n * sizeof *slow), req.stragglers.n_link = n;
    cJSON *run = trace_run(&req, selene(), a100(), NULL, 0, &error);
    if (run && !trace_run_json_check(run, &error)) {
      fprintf(stderr, "fuzz: trace_run returned a run it must refuse: %s\n", error->message);
      abort();
    }
    cJSON_Delete(run);
    g_clear_error(&error);
  }
  g_free(text);
}

/* Every number under `j` finite and not negative, and no null. */
static gboolean numbers_ok(const cJSON *j) {
  if (cJSON_IsNull(j))
    return FALSE;
  if (cJSON_IsNumber(j))
    return isfinite(j->valuedouble) && j->valuedouble >= 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, j) {
    if (!numbers_ok(c))
      return FALSE;
  }
  return TRUE;
}

/* A torch.profiler trace, read from a file as fit --profiler-trace reads
 * it; an accepted one's figures must hold together: busy within the span,
 * the classes summing to the GPU's op time, no negative or non-finite
 * figure. */
static void profiler_trace(const guint8 *data, gsize size) {
  char *path = as_file(data, size, "step.json");
  GError *error = NULL;
  CalibProfTrace *t = calib_prof_load(path, &error);
  if (t) {
    CalibStepFigures f;
    calib_step_figures(t, &f);
    gint64 classes = 0;
    for (int c = 0; c < CALIB_STEP_N_CLASSES; c++)
      classes += f.class_ns[c];
    if (f.busy_ns < 0 || f.busy_ns > f.span_ns || classes != f.op_ns || f.busy_ns > f.op_ns ||
        f.host_wait_ns + f.other_idle_ns != f.span_ns - f.busy_ns || f.gap_median_ns < 0 || f.call_median_ns < 0) {
      fprintf(stderr, "fuzz: a profiler trace's figures do not hold together (span %" G_GINT64_FORMAT
                      " busy %" G_GINT64_FORMAT " op %" G_GINT64_FORMAT " classes %" G_GINT64_FORMAT ")\n",
              f.span_ns, f.busy_ns, f.op_ns, classes);
      abort();
    }
    cJSON *json = calib_step_json(t, &f);
    if (!numbers_ok(json)) {
      char *text = cJSON_PrintUnformatted(json);
      fprintf(stderr, "fuzz: a profiler trace's figures hold a negative or non-finite number: %s\n", text);
      abort();
    }
    cJSON_Delete(json);
  } else if (!error || strchr(error->message, '\n')) {
    fprintf(stderr, "fuzz: a refused profiler trace's message is not one line\n");
    abort();
  }
  calib_prof_free(t);
  g_clear_error(&error);
  done_with_file(path);
}

/* A torch.profiler trace replayed as `ptdsim replay` replays it, as
 * measured and under CUDA graphs: an accepted one's graph must hold
 * together (every GPU op within the step, the busy time within the GPU's
 * span), CUDA graphs (the same graph, no op longer) never slower, and its
 * report and timeline free of negative or non-finite numbers; a refusal is
 * one line. */
static void replay_trace(const guint8 *data, gsize size) {
  char *path = as_file(data, size, "step.json");
  GError *error = NULL;
  CalibProfTrace *t = calib_prof_load(path, &error);
  if (t) {
    ReplayOptions o = {FALSE, NULL, NULL}, og = {TRUE, NULL, NULL};
    ReplayResult r, rg;
    if (replay_run(t, &o, &r, &error)) {
      if (!replay_run(t, &og, &rg, &error)) {
        fprintf(stderr, "fuzz: a replayed trace is refused under CUDA graphs: %s\n", error->message);
        abort();
      }
      gboolean within = r.gpu_busy_ns >= 0 && r.gpu_busy_ns <= r.gpu_span_ns && r.gpu_first_ns >= 0 &&
                        r.gpu_first_ns + r.gpu_span_ns <= r.step_ns && rg.step_ns <= r.step_ns;
      for (guint g = 0; within && g < t->gpu->len; g++)
        within = r.gpu_start_ns[g] >= 0 && r.gpu_start_ns[g] <= r.step_ns;
      if (!within) {
        fprintf(stderr, "fuzz: a replay does not hold together (step %" G_GINT64_FORMAT " under CUDA graphs %"
                        G_GINT64_FORMAT ", GPU first %" G_GINT64_FORMAT " span %" G_GINT64_FORMAT " busy %"
                        G_GINT64_FORMAT ")\n", r.step_ns, rg.step_ns, r.gpu_first_ns, r.gpu_span_ns, r.gpu_busy_ns);
        abort();
      }
      cJSON *json = replay_chrome_trace(t, &r, replay_json(t, &o, &r));
      if (!numbers_ok(json)) {
        char *text = cJSON_PrintUnformatted(json);
        fprintf(stderr, "fuzz: a replay's report holds a negative or non-finite number: %s\n", text);
        abort();
      }
      cJSON_Delete(json);
      replay_result_clear(&r);
      replay_result_clear(&rg);
    }
  }
  if (!t || error) {
    if (!error || strchr(error->message, '\n')) {
      fprintf(stderr, "fuzz: a refused replay's message is not one line\n");
      abort();
    }
  }
  calib_prof_free(t);
  g_clear_error(&error);
  done_with_file(path);
}

/* A model file, read from memory as --model reads it after loading: a
 * refusal is one line; an accepted shape's counts are whole and its FLOPs
 * finite, and the plan validator takes it on one GPU or refuses it in one
 * line. */
static void model_file(cJSON *root) {
  GError *error = NULL;
  ModelShape m;
  if (!model_file_from_json(root, "fuzz.json", &m, &error)) {
    if (!error || strchr(error->message, '\n')) {
      fprintf(stderr, "fuzz: a refused model file's message is not one line\n");
      abort();
    }
    g_error_free(error);
    return;
  }
  guint64 all = model_param_count(&m), active = model_active_param_count(&m);
  double flops = model_model_flops_per_iteration(&m, 1);
  if (all == 0 || active == 0 || active > all || !(isfinite(flops) && flops > 0)) {
    fprintf(stderr, "fuzz: an accepted model has %" G_GUINT64_FORMAT " parameters (%" G_GUINT64_FORMAT
                    " active) and %g FLOPs per sequence\n",
            all, active, flops);
    abort();
  }
  SimPlanRequest req = {.model = m, .gpus = 1, .tp = 1, .pp = 1, .global_batch = 1, .micro_batch = 1,
                        .allow_oom = TRUE};
  SimPlan plan;
  if (!sim_plan_build(&req, selene(), &plan, &error) && (!error || strchr(error->message, '\n'))) {
    fprintf(stderr, "fuzz: the plan of an accepted model is refused without one line\n");
    abort();
  }
  g_clear_error(&error);
}

void fuzz_target_run(FuzzTarget t, const guint8 *data, gsize size) {
  GError *error = NULL;
  if (t == FUZZ_SCHEDULE) {
    schedule_file(data, size);
    return;
  }
  if (t == FUZZ_PROFILER_TRACE) {
    profiler_trace(data, size);
    return;
  }
  if (t == FUZZ_REPLAY) {
    replay_trace(data, size);
    return;
  }
  if (t == FUZZ_SLOW || t == FUZZ_SLOW_LINK || t == FUZZ_STAGE_TIMES) {
    option_value(t, data, size);
    return;
  }
  if (t == FUZZ_TRACE || t == FUZZ_TRACE_GZ || t == FUZZ_SWEEP) {
    char *path = as_file(data, size, t == FUZZ_TRACE_GZ ? "trace.json.gz" : "input.json");
    if (t == FUZZ_TRACE || t == FUZZ_TRACE_GZ) {
      cJSON *request = NULL, *run = trace_read(path, &request, NULL, &error);
      cJSON_Delete(run);
      cJSON_Delete(request);
    } else {
      SearchGrid *g = search_grid_new();
      if (search_grid_add_file(g, path, &error) && search_grid_prepare(g, &error))
        (void)search_grid_points(g);
      search_grid_free(g);
    }
    done_with_file(path);
    g_clear_error(&error);
    return;
  }
  /* the JSON readers parse from memory, as ptd_json_load does after reading */
  char *text = g_strndup((const char *)data, size);
  cJSON *root = ptd_json_parse(text, size, "fuzz.json", &error);
  g_free(text);
  if (root && t == FUZZ_CLUSTER) {
    TopoCluster *c = topo_cluster_from_json(root, "fuzz.json", &error); /* takes root */
    root = NULL;
    if (c)
      small_run(c, a100());
    topo_cluster_free(c);
  } else if (root && t == FUZZ_PROFILE) {
    ModelProfile *p = model_profile_from_json(root, "fuzz.json", &error);
    if (p)
      small_run(selene(), p);
    model_profile_free(p);
  } else if (root && t == FUZZ_MODEL) {
    model_file(root);
  } else if (root && (t == FUZZ_MEASUREMENTS || t == FUZZ_FIT)) {
    CalibMeasurements *m = calib_measurements_from_json(root, "fuzz.json", &error);
    if (m && t == FUZZ_FIT)
      fit_check(m);
    calib_measurements_free(m);
  }
  cJSON_Delete(root);
  g_clear_error(&error);
}
