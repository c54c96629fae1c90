/* ptdsim — the fuzz targets (see targets.h). */
#include "targets.h"

#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../base/jsonutil.h"
#include "../calibrate/measurements.h"
#include "../search/grid.h"
#include "../traces/report.h"
#include "../traces/runner.h"

static const char *const names[FUZZ_N_TARGETS] = {"cluster", "profile", "measurements", "trace", "sweep"};

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
  static const char *const none[] = {NULL};
  return t == FUZZ_CLUSTER ? clusters : t == FUZZ_PROFILE ? profiles : none;
}

void fuzz_init(void) { g_log_set_always_fatal(G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING | G_LOG_FATAL_MASK); }

/* A small run on the machine, checked; refusals (it does not fit the
 * cluster, ...) are fine. */
static void small_run(const TopoCluster *cluster, const ModelProfile *profile) {
  guint gpus = topo_cluster_gpus(cluster) >= 2 ? 2 : 1;
  SimPlanRequest req = {.model = {2, 256, 4, 128, 1024}, .gpus = gpus, .tp = 1, .pp = gpus, .global_batch = 4,
                        .micro_batch = 1, .allow_oom = TRUE, .tokens = 1e9};
  for (guint net = 0; net < (cluster->has_fabric ? 2u : 1u); net++) {
    req.network = net ? "flow" : "analytic";
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

/* The input as a file, for the readers that take a path: one per process,
 * rewritten for each input. */
static const char *as_file(const guint8 *data, gsize size) {
  static char *path;
  if (!path) {
    int fd = g_file_open_tmp("ptdsim-fuzz-XXXXXX.json", &path, NULL);
    g_assert_cmpint(fd, >=, 0);
    close(fd);
  }
  g_assert_true(g_file_set_contents(path, (const char *)data, (gssize)size, NULL));
  return path;
}

void fuzz_target_run(FuzzTarget t, const guint8 *data, gsize size) {
  GError *error = NULL;
  if (t == FUZZ_TRACE || t == FUZZ_SWEEP) {
    const char *path = as_file(data, size);
    if (t == FUZZ_TRACE) {
      cJSON *request = NULL, *run = trace_read(path, &request, NULL, &error);
      cJSON_Delete(run);
      cJSON_Delete(request);
    } else {
      SearchGrid *g = search_grid_new();
      if (search_grid_add_file(g, path, &error) && search_grid_prepare(g, &error))
        (void)search_grid_points(g);
      search_grid_free(g);
    }
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
  } else if (root && t == FUZZ_MEASUREMENTS)
    calib_measurements_free(calib_measurements_from_json(root, "fuzz.json", &error));
  cJSON_Delete(root);
  g_clear_error(&error);
}
