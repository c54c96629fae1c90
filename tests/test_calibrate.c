/* ptdsim — tests of calibration: the plan, measurement files (writing,
 * reading, rejecting bad ones), the GSL fitter (recovering known parameters
 * from synthetic measurements within their standard errors, reporting
 * non-convergence), fitted profiles in the simulator, and the `ptdsim fit`
 * and `ptdsim-calibrate --dry-run` command lines.  No GPU is needed. */
#include <cjson/cJSON.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "../fit/fit.h"
#include "../calibrate/gemm_index.h"
#include "../models/compute.h"
#include "../base/jsonutil.h"
#include "../plan/plan.h"
#include "../topologies/cluster.h"
#include "test_tmp.h"

static char *tmpdir;

static char *tmp_path(const char *name) {
  return g_build_filename(tmpdir, name, NULL);
}

static ModelProfile *load_profile(const char *name) {
  GError *error = NULL;
  ModelProfile *p = model_profile_load(name, &error);
  g_assert_no_error(error);
  return p;
}

static CalibPlan *default_plan(void) {
  CalibPlanConfig cfg;
  calib_plan_config_default(&cfg);
  GError *error = NULL;
  CalibPlan *plan = calib_plan_new(&cfg, &error);
  g_assert_no_error(error);
  return plan;
}

static guint default_plan_gemms(void) {
  CalibPlan *p = default_plan();
  guint n = p->gemm->len;
  calib_plan_free(p);
  return n;
}

/* Synthetic measurements of `profile_name` on Selene's node network. */
static CalibMeasurements *synth(const char *profile_name, double noise, gulong seed) {
  ModelProfile *p = load_profile(profile_name);
  GError *error = NULL;
  TopoCluster *c = topo_cluster_load("selene", &error);
  g_assert_no_error(error);
  ModelNet net = {.hw = c->net, .measured = p->coll, .n_measured = p->n_coll};
  CalibPlan *plan = default_plan();
  CalibMeasurements *m = calib_synthesize(p, &net, plan, noise, seed);
  calib_plan_free(plan);
  topo_cluster_free(c);
  model_profile_free(p);
  return m;
}

static cJSON *fit(const CalibMeasurements *m, guint max_iter, GError **error) {
  ModelProfile *tiles = load_profile("a100-sxm4-80gb");
  CalibFitOptions o = {.name = "fitted", .measurements_path = "synthetic.json", .tiles_from = tiles, .dtype = "fp16",
                       .max_iterations = max_iter};
  cJSON *j = calib_fit(m, &o, error);
  model_profile_free(tiles);
  return j;
}

static double param(const cJSON *profile, const char *block, const char *name, const char *field) {
  const cJSON *fitb = cJSON_GetObjectItemCaseSensitive(profile, "fit");
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(fitb, block);
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(b, "parameters"), name);
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, field);
  g_assert_true(cJSON_IsNumber(v));
  return v->valuedouble;
}

/* A memory-bound class's fitted parameter: fit.membound.CLASS.parameters. */
static double mparam(const cJSON *profile, const char *cls, const char *name, const char *fieldname) {
  const cJSON *mb = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(profile, "fit"), "membound");
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(mb, cls);
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(b, "parameters"), name);
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, fieldname);
  g_assert_true(cJSON_IsNumber(v));
  return v->valuedouble;
}

static double field(const cJSON *o, const char *key, const char *sub) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, key), sub);
  g_assert_true(cJSON_IsNumber(v));
  return v->valuedouble;
}

/* Writes a fitted profile JSON to a file and loads it. */
static ModelProfile *profile_from_json(const cJSON *json, const char *name) {
  char *path = tmp_path(name), *text = cJSON_Print(json);
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
  ModelProfile *p = load_profile(path);
  cJSON_free(text);
  g_free(path);
  return p;
}

/* --- the plan --- */

/* The sustained mode's plan in process (what --dry-run --mode sustained
 * prints, checked through the binary above where it is built): the loop's
 * seconds are in the printed plan and in the estimate, second for second,
 * and the other modes are not. */
static void test_plan_sustained(void) {
  static const double seconds[2] = {20, 100};
  double est_s[2];
  for (int i = 0; i < 2; i++) {
    CalibPlanConfig cfg;
    calib_plan_config_default(&cfg);
    cfg.sustained_s = seconds[i];
    GError *error = NULL;
    CalibPlan *plan = calib_plan_new(&cfg, &error);
    g_assert_no_error(error);
    GString *out = g_string_new(NULL);
    calib_plan_print(plan, "sustained", 10, 50, out);
    char *want = g_strdup_printf("then %.0f s of back-to-back chunks of %u products", seconds[i], CALIB_SUSTAINED_CHUNK);
    g_assert_nonnull(strstr(out->str, want));
    g_assert_null(strstr(out->str, "gemm:"));
    g_free(want);
    g_string_free(out, TRUE);
    est_s[i] = calib_plan_estimate_s(plan, "sustained", 10, 50, 1);
    g_assert_cmpfloat(est_s[i], >, seconds[i]);
    calib_plan_free(plan);
  }
  g_assert_cmpfloat_with_epsilon(est_s[1] - est_s[0], 80, 1e-9);
}

/* The overlap mode's plan in process: the block counts and the window are
 * in the printed plan, the all-reduce only with more than one GPU; the
 * estimate grows by the windows it counts, (1 + blocks x (3 + 4 outer))
 * of them on one GPU; a bad block list is refused in one line. */
static void test_plan_overlap(void) {
  static const double window_s[2] = {0.3, 1.3};
  double est_s[2];
  for (int i = 0; i < 2; i++) {
    CalibPlanConfig cfg;
    calib_plan_config_default(&cfg);
    cfg.overlap_window_s = window_s[i];
    cfg.gpus = i ? 1 : 8;
    GError *error = NULL;
    g_assert_true(calib_plan_parse_blocks("4,16", &cfg, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(cfg.n_overlap_blocks, ==, 2);
    CalibPlan *plan = calib_plan_new(&cfg, &error);
    g_assert_no_error(error);
    GString *out = g_string_new(NULL);
    calib_plan_print(plan, "overlap", 10, 50, out);
    char *want = g_strdup_printf("looped for 2 s for the clock to settle, then timed over a %.0f ms window alone and "
                                 "beside a holder kernel of 4, 16 thread blocks",
                                 window_s[i] * 1e3);
    g_assert_nonnull(strstr(out->str, want));
    g_assert_nonnull(strstr(out->str, i ? "the all-reduce runs need two GPUs" : "NCCL all-reduce of 256 MiB over 8"));
    g_assert_null(strstr(out->str, "gemm:"));
    g_free(want);
    g_string_free(out, TRUE);
    est_s[i] = calib_plan_estimate_s(plan, "overlap", 10, 50, 1);
    calib_plan_free(plan);
  }
  g_assert_cmpfloat_with_epsilon(est_s[1] - est_s[0], 1.0 * (1 + 2 * (3 + 4 * CALIB_OVERLAP_OUTER)), 1e-9);
  CalibPlanConfig cfg;
  calib_plan_config_default(&cfg);
  const char *bad[] = {"", "4,,8", "0", "4,x", "1025", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17"};
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    GError *error = NULL;
    g_assert_false(calib_plan_parse_blocks(bad[i], &cfg, &error));
    g_assert_error(error, CALIB_ERROR, CALIB_ERROR_INVALID);
    g_assert_nonnull(strstr(error->message, "--overlap-blocks"));
    g_assert_null(strchr(error->message, '\n'));
    g_error_free(error);
  }
  /* the default, untouched by a refused list */
  g_assert_cmpuint(cfg.n_overlap_blocks, ==, 5);
  g_assert_cmpuint(cfg.overlap_blocks[0], ==, 4);
}

/* The forward GEMMs of the plan's layer add up to Narayanan et al.'s
 * 24 b s h^2 + 4 b s^2 h per layer (SC21 Eq. 2's per-layer forward, before
 * the logit layer), divided by t; every backward pass is twice that. */
static void test_plan_layer_flops(void) {
  CalibPlanConfig cfg;
  calib_plan_config_default(&cfg);
  /* The default plan (the sc21 preset) and one odd shape. */
  CalibLayerShape odd = {.hidden = 4096, .heads = 32, .seq = 1024, .micro_batch = 2, .tp = 4};
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) {
      cfg.shapes[0] = odd;
      cfg.n_shapes = 1;
    }
    GError *error = NULL;
    CalibPlan *plan = calib_plan_new(&cfg, &error);
    g_assert_no_error(error);
    for (guint si = 0; si < cfg.n_shapes; si++) {
      double fwd = 0, dgrad = 0, wgrad = 0;
      for (guint i = 0; i < plan->gemm->len; i++) {
        const CalibPlanGemm *g = &g_array_index(plan->gemm, CalibPlanGemm, i);
        if (g->shape != si)
          continue;
        double f = 2.0 * g->batch * g->m * g->n * g->k;
        if (g_str_has_suffix(g->op, ".fwd"))
          fwd += f;
        else if (g_str_has_suffix(g->op, ".dgrad"))
          dgrad += f;
        else if (g_str_has_suffix(g->op, ".wgrad"))
          wgrad += f;
      }
      const CalibLayerShape *sh = &cfg.shapes[si];
      double b = sh->micro_batch, s = sh->seq, h = sh->hidden, t = sh->tp;
      g_assert_cmpfloat(fwd, ==, (24 * b * s * h * h + 4 * b * s * s * h) / t);
      g_assert_cmpfloat(dgrad, ==, fwd);
      g_assert_cmpfloat(wgrad, ==, fwd);
    }
    calib_plan_free(plan);
  }
  GError *error = NULL;
  cfg.shapes[0].tp = 3; /* 32 heads do not split over 3 */
  g_assert_null(calib_plan_new(&cfg, &error));
  g_assert_error(error, CALIB_ERROR, CALIB_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "--tp"));
  g_clear_error(&error);
}

/* The harness checks each GEMM at sampled outputs through gemm_index.h.
 * Build the stored operands from their definition (column-major: element
 * (r, c) of a matrix with R rows at r + c R; a transposed operand is stored
 * as the transpose of the logical one) and check that the index functions
 * find every logical element, that the leading dimension is the stored row
 * count, and that the product through them equals the logical product. */
static void test_gemm_index(void) {
  const size_t m = 5, n = 3, k = 4;
  double A[5][4], B[4][3];
  for (size_t i = 0; i < m; i++)
    for (size_t c = 0; c < k; c++)
      A[i][c] = 1 + (double)i * 10 + (double)c;
  for (size_t r = 0; r < k; r++)
    for (size_t j = 0; j < n; j++)
      B[r][j] = 100 + (double)r * 7 - (double)j * 3;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      double SA[20], SB[12];
      size_t ra = ta ? k : m, rb = tb ? n : k; /* stored rows */
      g_assert_cmpuint(calib_gemm_lda(ta, m, k), ==, ra);
      g_assert_cmpuint(calib_gemm_ldb(tb, k, n), ==, rb);
      for (size_t i = 0; i < m; i++)
        for (size_t c = 0; c < k; c++) {
          if (ta)
            SA[c + i * ra] = A[i][c]; /* stored k x m: row c, column i */
          else
            SA[i + c * ra] = A[i][c];
        }
      for (size_t r = 0; r < k; r++)
        for (size_t j = 0; j < n; j++) {
          if (tb)
            SB[j + r * rb] = B[r][j]; /* stored n x k: row j, column r */
          else
            SB[r + j * rb] = B[r][j];
        }
      for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
          double got = 0, want = 0;
          for (size_t c = 0; c < k; c++) {
            size_t ai = calib_gemm_a_index(ta, m, k, i, c), bi = calib_gemm_b_index(tb, k, n, c, j);
            g_assert_cmpuint(ai, <, m * k);
            g_assert_cmpuint(bi, <, k * n);
            g_assert_cmpfloat(SA[ai], ==, A[i][c]);
            g_assert_cmpfloat(SB[bi], ==, B[c][j]);
            got += SA[ai] * SB[bi];
            want += A[i][c] * B[c][j];
          }
          g_assert_cmpfloat(got, ==, want);
        }
    }
}

static void test_nccl_ranks(void) {
  guint r[16];
  g_assert_cmpuint(calib_plan_nccl_ranks(1, r, 16), ==, 1);
  g_assert_cmpuint(r[0], ==, 1);
  g_assert_cmpuint(calib_plan_nccl_ranks(8, r, 16), ==, 3);
  g_assert_cmpuint(r[0], ==, 2);
  g_assert_cmpuint(r[1], ==, 4);
  g_assert_cmpuint(r[2], ==, 8);
  g_assert_cmpuint(calib_plan_nccl_ranks(6, r, 16), ==, 3);
  g_assert_cmpuint(r[2], ==, 6);
}

static void test_coll_sizes(void) {
  g_assert_true(calib_plan_coll_fits(CALIB_ALLREDUCE, 8, 8));
  g_assert_false(calib_plan_coll_fits(CALIB_ALLGATHER, 8, 8)); /* 2 floats over 8 ranks */
  g_assert_true(calib_plan_coll_fits(CALIB_ALLGATHER, 8, 32));
  g_assert_false(calib_plan_coll_fits(CALIB_SENDRECV, 1, 1024));
  g_assert_cmpfloat(calib_busbw_factor(CALIB_ALLREDUCE, 8), ==, 2.0 * 7 / 8);
  g_assert_cmpfloat(calib_busbw_factor(CALIB_REDUCESCATTER, 4), ==, 3.0 / 4);
  g_assert_cmpfloat(calib_busbw_factor(CALIB_SENDRECV, 2), ==, 1);
}

static void test_time_statistics(void) {
  double s[] = {5, 1, 3, 2, 4};
  CalibTime t = calib_time_from_samples(s, 5);
  g_assert_cmpfloat(t.median_us, ==, 3);
  g_assert_cmpfloat(t.min_us, ==, 1);
  g_assert_cmpfloat(t.max_us, ==, 5);
  g_assert_cmpfloat_with_epsilon(t.p10_us, 1.4, 1e-12);
  g_assert_cmpfloat_with_epsilon(t.p90_us, 4.6, 1e-12);
  g_assert_cmpuint(t.reps, ==, 5);
}

/* --- measurement files --- */

static void test_measurements_round_trip(void) {
  CalibMeasurements *m = synth("a100-sxm4-80gb", 0.02, 3);
  g_ptr_array_add(m->failures, g_strdup("gpu.cu:1: a failure kept by --keep-going"));
  g_ptr_array_add(m->skipped, g_strdup("attention: cuDNN is not built in"));
  char *path = tmp_path("round-trip.json");
  GError *error = NULL;
  g_assert_true(calib_measurements_save(m, path, &error));
  CalibMeasurements *r = calib_measurements_load(path, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(r->gemm->len, ==, m->gemm->len);
  g_assert_cmpuint(r->membw->len, ==, m->membw->len);
  g_assert_cmpuint(r->kernels->len, ==, m->kernels->len);
  g_assert_cmpuint(r->layers->len, ==, m->layers->len);
  g_assert_cmpuint(r->coll->len, ==, m->coll->len);
  CalibPlan *plan = default_plan();
  g_assert_cmpuint(m->gemm->len, ==, 2 * default_plan_gemms() + plan->gemmlt->len); /* the A100 has no FP8 */
  g_assert_cmpuint(r->membound->len, ==, plan->membound->len);
  g_assert_cmpuint(r->attention->len, ==, 0); /* the A100 profile has no waves model to make them */
  calib_plan_free(plan);
  for (guint i = 0; i < m->gemm->len; i++) {
    const CalibGemm *a = &g_array_index(m->gemm, CalibGemm, i), *b = &g_array_index(r->gemm, CalibGemm, i);
    g_assert_cmpstr(a->op, ==, b->op);
    g_assert_cmpstr(a->layout, ==, b->layout);
    g_assert_cmpstr(a->api, ==, b->api);
    g_assert_cmpuint(a->tile_m, ==, b->tile_m);
    g_assert_cmpuint(a->tile_n, ==, b->tile_n);
    if (g_str_has_prefix(b->op, "lt."))
      g_assert_true(b->tile_m > 0 && strcmp(b->api, "cublaslt") == 0);
    else
      g_assert_cmpstr(b->layout, ==, g_str_has_prefix(b->op, "layout.") ? b->layout : "NN");
    g_assert_cmpuint(a->m * a->n * a->k * a->batch, ==, b->m * b->n * b->k * b->batch);
    /* cJSON prints 15 significant digits unless that reads back differently
     * by more than its epsilon comparison: equal to about 1e-15. */
    g_assert_cmpfloat_with_epsilon(a->t.median_us, b->t.median_us, 1e-13 * a->t.median_us);
    g_assert_cmpfloat_with_epsilon(a->t.p90_us, b->t.p90_us, 1e-13 * a->t.p90_us);
  }
  for (guint i = 0; i < m->coll->len; i++)
    g_assert_cmpint(g_array_index(m->coll, CalibColl, i).op, ==, g_array_index(r->coll, CalibColl, i).op);
  g_assert_cmpuint(r->device.sms, ==, 108);
  g_assert_nonnull(r->synthetic);
  g_assert_cmpuint(r->failures->len, ==, 1);
  g_assert_cmpstr(g_ptr_array_index(r->failures, 0), ==, "gpu.cu:1: a failure kept by --keep-going");
  g_assert_cmpuint(r->skipped->len, ==, 1);
  g_assert_cmpstr(g_ptr_array_index(r->skipped, 0), ==, "attention: cuDNN is not built in");
  for (guint i = 0; i < m->layers->len; i++) {
    const CalibLayer *a = &g_array_index(m->layers, CalibLayer, i), *b = &g_array_index(r->layers, CalibLayer, i);
    g_assert_true(b->has_recompute);
    g_assert_cmpfloat_with_epsilon(a->recompute.median_us, b->recompute.median_us, 1e-13 * a->recompute.median_us);
    g_assert_cmpstr(a->dtype, ==, b->dtype);
    g_assert_cmpint(a->flash, ==, b->flash);
    g_assert_cmpint(a->llama, ==, b->llama);
    g_assert_cmpint(a->sequence_parallel, ==, b->sequence_parallel);
  }
  /* the A100's sustained loop, with a clock and power series and a limit */
  g_assert_cmpuint(m->sustained->len, ==, 1);
  CalibSustained *ms = &g_array_index(m->sustained, CalibSustained, 0);
  ms->n_clock = ms->n_power = 3;
  for (guint i = 0; i < 3; i++)
    ms->clock_MHz[i] = 1410 - 100 * i, ms->power_W[i] = 400 - i;
  ms->power_limit_W = 400;
  g_assert_true(calib_measurements_save(m, path, &error));
  calib_measurements_free(r);
  r = calib_measurements_load(path, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(r->sustained->len, ==, 1);
  const CalibSustained *rs = &g_array_index(r->sustained, CalibSustained, 0);
  g_assert_cmpstr(rs->dtype, ==, "bf16");
  g_assert_cmpuint(rs->n_chunks, ==, ms->n_chunks);
  for (guint i = 0; i < rs->n_chunks; i++)
    g_assert_cmpfloat_with_epsilon(rs->chunk_tflops[i], ms->chunk_tflops[i], 1e-13 * ms->chunk_tflops[i]);
  g_assert_cmpfloat_with_epsilon(rs->burst_tflops, ms->burst_tflops, 1e-13 * ms->burst_tflops);
  g_assert_cmpfloat(rs->power_limit_W, ==, 400);
  /* the second half's medians: of 3 samples, the last two */
  g_assert_cmpfloat(calib_sustained_clock_MHz(rs), ==, 1260);
  g_assert_cmpfloat(calib_sustained_power_W(rs), ==, 398.5);
  for (guint i = 0; i < m->membound->len; i++) {
    const CalibMembound *a = &g_array_index(m->membound, CalibMembound, i), *b = &g_array_index(r->membound, CalibMembound, i);
    g_assert_cmpstr(a->op, ==, b->op);
    g_assert_cmpfloat(a->bytes, ==, b->bytes);
    g_assert_cmpfloat_with_epsilon(a->t.median_us, b->t.median_us, 1e-13 * a->t.median_us);
  }
  calib_measurements_free(r);
  calib_measurements_free(m);

  /* Today's records of a GPU with FP8 and the waves model: llama3 shapes on the H100. */
  ModelProfile *h = load_profile("h100-sxm5-80gb");
  CalibPlanConfig cfg;
  calib_plan_config_default(&cfg);
  g_assert_true(calib_plan_parse_shapes("llama3", &cfg, &error));
  plan = calib_plan_new(&cfg, &error);
  g_assert_no_error(error);
  TopoCluster *c = topo_cluster_load("dgx-h100-superpod", &error);
  g_assert_no_error(error);
  ModelNet net = {.hw = c->net};
  m = calib_synthesize(h, &net, plan, 0.01, 5);
  g_assert_true(calib_measurements_save(m, path, &error));
  r = calib_measurements_load(path, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(r->attention->len, ==, plan->attention->len);
  guint fp8 = 0, llama = 0;
  for (guint i = 0; i < r->gemm->len; i++)
    fp8 += strcmp(g_array_index(r->gemm, CalibGemm, i).dtype, "fp8") == 0;
  for (guint i = 0; i < r->layers->len; i++)
    llama += g_array_index(r->layers, CalibLayer, i).llama;
  g_assert_cmpuint(fp8, ==, plan->gemmlt->len);
  g_assert_cmpuint(llama, ==, 2 * plan->cfg.n_shapes); /* bf16 and fp8 of each of the four */
  for (guint i = 0; i < r->attention->len; i++) {
    const CalibAttention *a = &g_array_index(m->attention, CalibAttention, i), *b = &g_array_index(r->attention, CalibAttention, i);
    g_assert_true(b->causal && b->has_fwd && b->has_bwd);
    g_assert_cmpuint(a->heads * a->kv_heads * a->seq, ==, b->heads * b->kv_heads * b->seq);
    g_assert_cmpfloat_with_epsilon(a->bwd.median_us, b->bwd.median_us, 1e-13 * a->bwd.median_us);
  }
  calib_measurements_free(r);
  calib_measurements_free(m);
  calib_plan_free(plan);
  topo_cluster_free(c);
  model_profile_free(h);
  g_free(path);
}

/* A valid synthetic file, edited by `edit`, must be rejected with an error
 * containing `expect`. */
typedef void (*Edit)(cJSON *root);

static void expect_rejected(Edit edit, const char *expect, gint code) {
  CalibMeasurements *m = synth("a100-sxm4-80gb", 0.02, 1);
  cJSON *root = calib_measurements_to_json(m);
  edit(root);
  char *text = cJSON_Print(root), *path = tmp_path("bad.json");
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
  GError *error = NULL;
  CalibMeasurements *r = calib_measurements_load(path, &error);
  if (r) { /* valid as a file: then the fit must refuse it */
    cJSON *p = fit(r, 0, &error);
    g_assert_null(p);
    calib_measurements_free(r);
  }
  g_assert_nonnull(error);
  g_test_message("%s", error->message);
  g_assert_cmpint(error->code, ==, code);
  g_assert_nonnull(strstr(error->message, expect));
  g_assert_null(strchr(error->message, '\n'));
  g_error_free(error);
  cJSON_free(text);
  cJSON_Delete(root);
  calib_measurements_free(m);
  g_unlink(path);
  g_free(path);
}

static cJSON *item(cJSON *root, const char *list, int i) {
  return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, list), i);
}
static void edit_missing_m(cJSON *r) { cJSON_DeleteItemFromObject(item(r, "gemm", 4), "m"); }
static void edit_negative_time(cJSON *r) {
  cJSON_ReplaceItemInObject(item(r, "nccl", 2), "time_us", cJSON_CreateNumber(-3));
}
static void edit_units_ms(cJSON *r) {
  cJSON_ReplaceItemInObject(cJSON_GetObjectItemCaseSensitive(r, "units"), "time", cJSON_CreateString("ms"));
}
static void edit_no_units(cJSON *r) { cJSON_DeleteItemFromObject(r, "units"); }
static void edit_format(cJSON *r) { cJSON_ReplaceItemInObject(r, "format", cJSON_CreateString("nccl-tests")); }
static void edit_no_device_sms(cJSON *r) { cJSON_DeleteItemFromObject(cJSON_GetObjectItemCaseSensitive(r, "device"), "sms"); }
static void edit_string_bytes(cJSON *r) {
  cJSON_ReplaceItemInObject(item(r, "membw", 0), "bytes", cJSON_CreateString("4 KiB"));
}
static void edit_bad_op(cJSON *r) { cJSON_ReplaceItemInObject(item(r, "nccl", 0), "op", cJSON_CreateString("broadcast")); }
static void edit_two_copies(cJSON *r) {
  cJSON *l = cJSON_GetObjectItemCaseSensitive(r, "membw");
  while (cJSON_GetArraySize(l) > 2)
    cJSON_DeleteItemFromArray(l, 0);
}
static void edit_no_fp16(cJSON *r) {
  cJSON *l = cJSON_GetObjectItemCaseSensitive(r, "gemm"), *g;
  cJSON_ArrayForEach(g, l) cJSON_ReplaceItemInObject(g, "dtype", cJSON_CreateString("bf16"));
}
static void edit_no_gemm_list(cJSON *r) { cJSON_DeleteItemFromObject(r, "gemm"); }
static void edit_layer_tp(cJSON *r) { cJSON_ReplaceItemInObject(item(r, "layer", 2), "tp", cJSON_CreateNumber(5)); }
static void edit_layer_negative_recompute(cJSON *r) {
  cJSON_ReplaceItemInObject(item(r, "layer", 1), "recompute_us", cJSON_CreateNumber(-1));
}
static void edit_layer_no_backward(cJSON *r) { cJSON_DeleteItemFromObject(item(r, "layer", 0), "backward_us"); }
/* A sustained loop (the synthetic A100's: its clock settles below its
 * burst clock), malformed one way each. */
static void edit_sustained_op(cJSON *r) {
  cJSON_ReplaceItemInObject(item(r, "sustained", 0), "op", cJSON_CreateString("attention"));
}
static void edit_sustained_no_chunks(cJSON *r) { cJSON_DeleteItemFromObject(item(r, "sustained", 0), "chunk_tflops"); }
static void edit_sustained_negative_chunk(cJSON *r) {
  double c[2] = {700, -5};
  cJSON_ReplaceItemInObject(item(r, "sustained", 0), "chunk_tflops", cJSON_CreateDoubleArray(c, 2));
}
static void edit_sustained_power(cJSON *r) {
  double w[1] = {0.5};
  cJSON_AddItemToObject(item(r, "sustained", 0), "power_W", cJSON_CreateDoubleArray(w, 1));
}
/* Today's records, each malformed one way. */
static void edit_fp8_cublas(cJSON *r) {
  cJSON_ReplaceItemInObject(item(r, "gemm", 0), "dtype", cJSON_CreateString("fp8"));
}
static void edit_bad_tile(cJSON *r) {
  int t[2] = {0, 128};
  cJSON_AddItemToObject(item(r, "gemm", 1), "tile", cJSON_CreateIntArray(t, 2));
}
static void edit_bad_api(cJSON *r) { cJSON_AddStringToObject(item(r, "gemm", 1), "api", "rocblas"); }
static void edit_membound_op(cJSON *r) {
  cJSON_ReplaceItemInObject(item(r, "membound", 3), "op", cJSON_CreateString("layernorm.sideways"));
}
static void edit_membound_bytes(cJSON *r) {
  cJSON_ReplaceItemInObject(item(r, "membound", 2), "bytes", cJSON_CreateNumber(12345));
}
static cJSON *attention_record(void) {
  cJSON *a = cJSON_CreateObject();
  cJSON_AddStringToObject(a, "impl", "cudnn-sdpa");
  cJSON_AddStringToObject(a, "dtype", "bf16");
  cJSON_AddBoolToObject(a, "causal", TRUE);
  cJSON_AddNumberToObject(a, "batch", 1);
  cJSON_AddNumberToObject(a, "heads", 16);
  cJSON_AddNumberToObject(a, "kv_heads", 16);
  cJSON_AddNumberToObject(a, "seq", 4096);
  cJSON_AddNumberToObject(a, "head_dim", 128);
  cJSON_AddNumberToObject(a, "forward_us", 200);
  cJSON_AddNumberToObject(a, "backward_us", 500);
  return a;
}
static void add_attention(cJSON *r, cJSON *a) {
  cJSON *l = cJSON_AddArrayToObject(r, "attention");
  cJSON_AddItemToArray(l, a);
}
static void edit_attention_kv(cJSON *r) {
  cJSON *a = attention_record();
  cJSON_ReplaceItemInObject(a, "kv_heads", cJSON_CreateNumber(3));
  add_attention(r, a);
}
static void edit_attention_no_pass(cJSON *r) {
  cJSON *a = attention_record();
  cJSON_DeleteItemFromObject(a, "forward_us");
  cJSON_DeleteItemFromObject(a, "backward_us");
  add_attention(r, a);
}
static void edit_attention_impl(cJSON *r) {
  cJSON *a = attention_record();
  cJSON_ReplaceItemInObject(a, "impl", cJSON_CreateString("xformers"));
  add_attention(r, a);
}
static void edit_layer_style(cJSON *r) { cJSON_AddStringToObject(item(r, "layer", 0), "style", "mamba"); }
static void edit_layer_kv(cJSON *r) { cJSON_AddNumberToObject(item(r, "layer", 0), "kv_heads", 7); }

static void test_bad_files(void) {
  expect_rejected(edit_fp8_cublas, "gemm[0].'dtype' is \"fp8\", which only cuBLASLt runs", CALIB_ERROR_INVALID);
  expect_rejected(edit_bad_tile, "gemm[1].'tile' must be [tile_m, tile_n]", CALIB_ERROR_INVALID);
  expect_rejected(edit_bad_api, "gemm[1].'api' must be \"cublas\" or \"cublaslt\"", CALIB_ERROR_INVALID);
  expect_rejected(edit_membound_op, "membound[3].'op' must be one of the membound mode's kernels", CALIB_ERROR_INVALID);
  expect_rejected(edit_membound_bytes, "membound[2].'bytes' must be rows x cols", CALIB_ERROR_INVALID);
  expect_rejected(edit_attention_kv, "attention[0].'kv_heads' must be at least 1 and divide heads", CALIB_ERROR_INVALID);
  expect_rejected(edit_attention_no_pass, "attention[0].'forward_us' is missing", CALIB_ERROR_INVALID);
  expect_rejected(edit_attention_impl, "attention[0].'impl' must be \"cudnn-sdpa\"", CALIB_ERROR_INVALID);
  expect_rejected(edit_layer_style, "layer[0].'style' must be one of \"gpt\", \"llama\"", CALIB_ERROR_INVALID);
  expect_rejected(edit_layer_kv, "layer[0].'kv_heads' must divide heads", CALIB_ERROR_INVALID);
  expect_rejected(edit_missing_m, "gemm[4].'m' is missing", CALIB_ERROR_INVALID);
  expect_rejected(edit_negative_time, "nccl[2].'time_us' is -3", CALIB_ERROR_INVALID);
  expect_rejected(edit_units_ms, "microseconds", CALIB_ERROR_INVALID);
  expect_rejected(edit_no_units, "'units' is missing", CALIB_ERROR_INVALID);
  expect_rejected(edit_format, "ptdsim-measurements", CALIB_ERROR_INVALID);
  expect_rejected(edit_no_device_sms, "device.'sms' is missing", CALIB_ERROR_INVALID);
  expect_rejected(edit_string_bytes, "membw[0].'bytes' must be a number", CALIB_ERROR_INVALID);
  expect_rejected(edit_bad_op, "all_reduce, all_gather", CALIB_ERROR_INVALID);
  expect_rejected(edit_two_copies, "too few points for the memory bandwidth (membw) fit: 2 given", CALIB_ERROR_TOO_FEW);
  expect_rejected(edit_no_fp16, "have no fp16 GEMMs and there is no base profile", CALIB_ERROR_TOO_FEW);
  expect_rejected(edit_no_gemm_list, "'gemm' is missing", CALIB_ERROR_INVALID);
  expect_rejected(edit_layer_tp, "layer[2].'heads' must be a multiple of tp", CALIB_ERROR_INVALID);
  expect_rejected(edit_layer_negative_recompute, "layer[1].'recompute_us' is -1", CALIB_ERROR_INVALID);
  expect_rejected(edit_layer_no_backward, "layer[0].'backward_us' is missing", CALIB_ERROR_INVALID);
  expect_rejected(edit_sustained_op, "sustained[0].'op' must be \"gemm\"", CALIB_ERROR_INVALID);
  expect_rejected(edit_sustained_no_chunks, "sustained[0].'chunk_tflops' must be a list of 1 to 1024 numbers",
                  CALIB_ERROR_INVALID);
  expect_rejected(edit_sustained_negative_chunk, "sustained[0].'chunk_tflops[1]' is -5, outside", CALIB_ERROR_INVALID);
  expect_rejected(edit_sustained_power, "sustained[0].'power_W[0]' is 0.5, outside", CALIB_ERROR_INVALID);
}

/* --- the fitter --- */

/* --- the overlap mode --- */

/* One holder run of the overlap mode as the harness writes it. */
static cJSON *overlap_copy(double blocks, double gemm_us, double gemm_beside_us, double moved_GBps,
                           double moved_beside_GBps, double mem_us, double mem_beside_us, double beside_mem_GBps) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "dtype", "bf16");
  cJSON_AddNumberToObject(o, "m", CALIB_OVERLAP_M);
  cJSON_AddNumberToObject(o, "n", CALIB_OVERLAP_N);
  cJSON_AddNumberToObject(o, "k", CALIB_OVERLAP_K);
  cJSON_AddStringToObject(o, "with", "copy");
  cJSON_AddNumberToObject(o, "blocks", blocks);
  cJSON_AddNumberToObject(o, "bytes", CALIB_OVERLAP_HOLDER_BYTES);
  cJSON_AddNumberToObject(o, "gemm_us", gemm_us);
  cJSON_AddNumberToObject(o, "gemm_beside_us", gemm_beside_us);
  cJSON_AddNumberToObject(o, "moved_GBps", moved_GBps);
  cJSON_AddNumberToObject(o, "moved_beside_GBps", moved_beside_GBps);
  cJSON_AddNumberToObject(o, "mem_bytes", CALIB_OVERLAP_MEM_BYTES);
  cJSON_AddNumberToObject(o, "mem_us", mem_us);
  cJSON_AddNumberToObject(o, "mem_beside_us", mem_beside_us);
  cJSON_AddNumberToObject(o, "moved_beside_mem_GBps", beside_mem_GBps);
  return o;
}

/* The runs a device with `sms` SMs and copy rate `stream_GBps` (its
 * hbm_GBps x memory_efficiency) gives when a holder block takes k SMs from
 * the GEMM and displaces c bytes of HBM traffic per byte it moves (5 GB/s
 * per block), as fit/fit.c fit_overlap models them: the GEMM's rate lost,
 * 1 - t_alone / t_beside = k N / sms; the probe copy's, c x rate / stream.
 * With an all-reduce run, which adds to the fit record only. */
static cJSON *overlap_runs(double sms, double stream_GBps, double k, double c) {
  static const double blocks[] = {4, 8, 16, 24, 32};
  cJSON *l = cJSON_CreateArray();
  for (guint i = 0; i < G_N_ELEMENTS(blocks); i++) {
    double n = blocks[i], rate = 5 * n;
    cJSON_AddItemToArray(l, overlap_copy(n, 1500, 1500 / (1 - k * n / sms), rate, 0.9 * rate, 800,
                                         800 / (1 - c * rate / stream_GBps), 0.5 * rate));
  }
  cJSON *a = overlap_copy(0, 1500, 1650, 300, 250, 1, 1, 1);
  cJSON_ReplaceItemInObject(a, "with", cJSON_CreateString("all_reduce"));
  cJSON_DeleteItemFromObject(a, "blocks");
  cJSON_AddNumberToObject(a, "ranks", 8);
  static const char *copy_only[] = {"mem_bytes", "mem_us", "mem_beside_us", "moved_beside_mem_GBps"};
  for (guint i = 0; i < G_N_ELEMENTS(copy_only); i++)
    cJSON_DeleteItemFromObject(a, copy_only[i]);
  cJSON_AddItemToArray(l, a);
  return l;
}

/* Overlap runs made from known k and c (the fitted profile's own SMs and
 * copy rate) are read and written back unchanged, fitted back exactly (to
 * the six significant digits the profile keeps), written as the profile's "overlap" block with its
 * provenance, loaded back; the holder's and the all-reduce's slowdowns are
 * in the fit record only; measurements without runs keep the defaults. */
static void test_fit_overlap_exact(void) {
  CalibMeasurements *m = synth("a100-sxm4-80gb", 0, 1);
  GError *error = NULL;
  cJSON *p0 = fit(m, 0, &error);
  g_assert_no_error(error);
  g_assert_null(cJSON_GetObjectItemCaseSensitive(p0, "overlap"));
  ModelProfile *f0 = profile_from_json(p0, "overlap0.json");
  g_assert_false(f0->has_overlap);
  double k0, c0;
  model_profile_overlap(f0, &k0, &c0);
  g_assert_cmpfloat(k0, ==, MODEL_OVERLAP_SMS_PER_CHANNEL);
  g_assert_cmpfloat(c0, ==, MODEL_OVERLAP_HBM_BYTES_PER_BYTE);
  static const double kc[][2] = {{1.25, 2.5}, {0.75, 1.8}, {2, 3.25}};
  for (guint i = 0; i < G_N_ELEMENTS(kc); i++) {
    cJSON *root = calib_measurements_to_json(m);
    cJSON_AddItemToObject(root, "overlap",
                          overlap_runs(f0->sms, f0->hbm_bytes_per_s * f0->memory_efficiency / 1e9, kc[i][0], kc[i][1]));
    char *text = cJSON_Print(root), *path = tmp_path("overlap-meas.json");
    g_assert_true(g_file_set_contents(path, text, -1, NULL));
    CalibMeasurements *r = calib_measurements_load(path, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(r->overlap->len, ==, 6);
    /* written back as read */
    cJSON *back = calib_measurements_to_json(r);
    g_assert_true(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(back, "overlap"),
                                cJSON_GetObjectItemCaseSensitive(root, "overlap"), TRUE));
    cJSON_Delete(back);
    cJSON *p = fit(r, 0, &error);
    g_assert_no_error(error);
    const cJSON *ov = cJSON_GetObjectItemCaseSensitive(p, "overlap");
    g_assert_cmpfloat(field(p, "overlap", "sms_per_channel"), ==, kc[i][0]);
    g_assert_cmpfloat(field(p, "overlap", "hbm_bytes_per_byte"), ==, kc[i][1]);
    g_assert_cmpint(cJSON_GetArraySize(ov), ==, 2);
    const cJSON *prov = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "provenance"), "overlap");
    g_assert_true(cJSON_IsString(prov));
    g_assert_true(g_str_has_prefix(prov->valuestring, "measured: 5 runs of a bf16 7168x8192x8192 GEMM"));
    g_assert_cmpfloat(param(p, "overlap", "sms_per_channel", "value"), ==, kc[i][0]);
    g_assert_cmpfloat(param(p, "overlap", "sms_per_channel", "stderr"), <, 1e-9);
    /* the other direction: measured, in the fit record, per run */
    const cJSON *slow = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "fit"), "overlap"), "collective_slowdown");
    g_assert_cmpint(cJSON_GetArraySize(slow), ==, 6);
    g_assert_cmpfloat_with_epsilon(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(slow, 0), "beside_gemm")
                                       ->valuedouble,
                                   1 / 0.9, 1e-12);
    g_assert_cmpfloat_with_epsilon(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(slow, 5), "beside_gemm")
                                       ->valuedouble,
                                   300.0 / 250, 1e-12);
    ModelProfile *q = profile_from_json(p, "overlap1.json");
    g_assert_true(q->has_overlap);
    double k, c;
    model_profile_overlap(q, &k, &c);
    g_assert_cmpfloat(k, ==, kc[i][0]);
    g_assert_cmpfloat(c, ==, kc[i][1]);
    model_profile_free(q);
    cJSON_Delete(p);
    calib_measurements_free(r);
    g_unlink(path);
    g_free(path);
    cJSON_free(text);
    cJSON_Delete(root);
  }
  model_profile_free(f0);
  cJSON_Delete(p0);
  calib_measurements_free(m);
}

/* The contention factor of a plan uses the profile's SMs per channel and
 * HBM bytes per byte, exactly as model_layer_contention takes them; a
 * block giving the defaults prices exactly what no block does. */
static void test_overlap_contention(void) {
  GError *error = NULL;
  TopoCluster *cl = topo_cluster_load("dgx-h100-superpod", &error);
  g_assert_no_error(error);
  g_assert_cmpuint(cl->net.collective_channels, ==, 16);
  ModelProfile *h = load_profile("h100-sxm5-80gb");
  g_assert_false(h->has_overlap);
  SimPlan pl = {0};
  g_assert_true(model_lookup("llama3-70b", &pl.model));
  pl.micro_batch = 1;
  pl.fusion = TRUE;
  pl.cp = 1;
  ModelLayerOptions lo = sim_plan_layer_options(&pl, h);
  /* 8 tensor-parallel ranks x 4 data-parallel: the group spans nodes, at
   * the GPU's share of its node's NICs */
  double rate = cl->net.nic_bw * cl->net.nics_per_node / cl->net.gpus_per_node;
  double stream = h->hbm_bytes_per_s * h->memory_efficiency;
  double dflt = sim_plan_contention(&pl, h, cl, 8, 4, FALSE);
  g_assert_cmpfloat(dflt, ==, model_layer_contention(h, &pl.model, 8, 1, &lo, 16, 2 * rate / stream));
  g_assert_cmpfloat(dflt, >, 1);
  ModelProfile same = *h;
  same.has_overlap = TRUE;
  same.overlap_sms_per_channel = MODEL_OVERLAP_SMS_PER_CHANNEL;
  same.overlap_hbm_bytes_per_byte = MODEL_OVERLAP_HBM_BYTES_PER_BYTE;
  g_assert_cmpfloat(sim_plan_contention(&pl, &same, cl, 8, 4, FALSE), ==, dflt);
  /* k, c, and whether the factor is above the default's (+1) or below (-1) */
  static const double kc[][3] = {{1.5, 3, 1}, {0.5, 1, -1}, {2.25, 2, 1}, {1, 1, -1}};
  for (guint i = 0; i < G_N_ELEMENTS(kc); i++) {
    ModelProfile f = *h;
    f.has_overlap = TRUE;
    f.overlap_sms_per_channel = kc[i][0];
    f.overlap_hbm_bytes_per_byte = kc[i][1];
    double got = sim_plan_contention(&pl, &f, cl, 8, 4, FALSE);
    g_assert_cmpfloat(got, ==, model_layer_contention(&f, &pl.model, 8, 1, &lo, kc[i][0] * 16, kc[i][1] * rate / stream));
    /* more SMs or more bytes held: slower; fewer: faster */
    g_assert_cmpfloat((got - dflt) * kc[i][2], >, 0);
  }
  model_profile_free(h);
  topo_cluster_free(cl);
}

/* Without noise the fit returns the generating parameters (to the six
 * significant digits the profile keeps). */
static void test_fit_exact_without_noise(void) {
  ModelProfile *a = load_profile("a100-sxm4-80gb");
  CalibMeasurements *m = synth("a100-sxm4-80gb", 0, 1);
  GError *error = NULL;
  cJSON *p = fit(m, 0, &error);
  g_assert_no_error(error);
  /* every class of memory-bound kernel at the profile's one copy bandwidth (it has no membound block) */
  static const char *classes[] = {"copy", "norm", "pointwise", "activation", "softmax", "cross_entropy"};
  for (guint i = 0; i < G_N_ELEMENTS(classes); i++) {
    g_assert_cmpfloat_with_epsilon(mparam(p, classes[i], "gap_us", "value"), a->kernel_launch_s * 1e6, 1e-5);
    g_assert_cmpfloat_with_epsilon(mparam(p, classes[i], "hbm_GBps", "value"),
                                   a->hbm_bytes_per_s * a->memory_efficiency / 1e9, 1e-3);
  }
  /* the GEMMs timed in bursts give the burst efficiency; the sustained loop
   * (the profile's clock settles at 0.806 of its burst) gives the ratio */
  g_assert_cmpfloat_with_epsilon(param(p, "gemm", "efficiency_max", "value"), a->gemm.efficiency_max, 1e-7);
  g_assert_cmpfloat(a->sustained_clock_ratio, <, 1);
  g_assert_cmpfloat_with_epsilon(cJSON_GetObjectItemCaseSensitive(p, "sustained_clock_ratio")->valuedouble,
                                 a->sustained_clock_ratio, 1e-6);
  g_assert_cmpfloat_with_epsilon(param(p, "gemm", "k_half", "value"), a->gemm.k_half, 1e-5);
  g_assert_cmpfloat_with_epsilon(param(p, "gemm", "tile_bandwidth_GBps", "value"), a->gemm.tile_bytes_per_s / 1e9, 1e-3);
  cJSON_Delete(p);
  calib_measurements_free(m);
  model_profile_free(a);
}

/* The power block from sustained loops that sampled the clock under a
 * power limit.  One loop (the A100's synthetic one given clock and power
 * samples): rated_W its limit, the settled clock the median of its second
 * half's samples, the boost clock the device's, the cube law and the cited
 * idle share.  Loops at three limits on a known curve P(f) = 60 + (400 -
 * 60) (f / 1215)^2.5: exponent and idle fitted back; at two limits the
 * exponent alone (idle the cited share), through the lower loop's point.  The profile loads, and its ratio
 * at the rated cap is its sustained_clock_ratio. */
static void test_fit_power_block(void) {
  for (guint caps = 1; caps <= 3; caps++) {
    CalibMeasurements *m = synth("a100-sxm4-80gb", 0, 1);
    m->device.sm_clock_MHz = 1410;
    g_assert_cmpuint(m->sustained->len, ==, 1);
    CalibSustained *x = &g_array_index(m->sustained, CalibSustained, 0);
    x->power_limit_W = 400;
    x->n_clock = x->n_power = 10;
    for (guint i = 0; i < 10; i++) {
      x->clock_MHz[i] = i < 5 ? 1410 : i % 2 ? 1215 : 1185; /* second half: 1215 1185 1215 1185 1215 */
      x->power_W[i] = i < 5 ? 420 : 400;
    }
    CalibSustained base = *x;
    for (guint c = 1; c < caps; c++) {
      CalibSustained y = base;
      y.power_limit_W = c == 1 ? 250 : 150;
      double f = 1215 * pow((y.power_limit_W - 60) / 340.0, 1 / 2.5);
      for (guint i = 0; i < 10; i++) {
        y.clock_MHz[i] = f;
        y.power_W[i] = y.power_limit_W;
      }
      y.chunk_tflops[0] *= 0.5; /* a slower loop: not the rated cap's ratio */
      g_array_append_val(m->sustained, y);
    }
    GError *error = NULL;
    cJSON *p = fit(m, 0, &error);
    g_assert_no_error(error);
    const cJSON *pw = cJSON_GetObjectItemCaseSensitive(p, "power");
    g_assert_nonnull(pw);
    g_assert_cmpfloat(cJSON_GetObjectItemCaseSensitive(pw, "rated_W")->valuedouble, ==, 400);
    g_assert_cmpfloat(cJSON_GetObjectItemCaseSensitive(pw, "sustained_clock_MHz")->valuedouble, ==, 1215);
    g_assert_cmpfloat(cJSON_GetObjectItemCaseSensitive(pw, "boost_clock_MHz")->valuedouble, ==, 1410);
    double exponent = cJSON_GetObjectItemCaseSensitive(pw, "exponent")->valuedouble;
    double idle = cJSON_GetObjectItemCaseSensitive(pw, "idle_W")->valuedouble;
    const char *why = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "provenance"),
                                                       "power")->valuestring;
    g_test_message("%u limit(s): exponent %g, idle %g W; %s", caps, exponent, idle, why);
    if (caps == 1) {
      g_assert_cmpfloat(exponent, ==, 3);
      g_assert_cmpfloat(idle, ==, 48.8571); /* 85.5 / 700 of 400 W, six digits */
      g_assert_nonnull(strstr(why, "cube law"));
      g_assert_null(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "fit"), "power"));
    } else {
      g_assert_nonnull(strstr(why, "GSL"));
      g_assert_nonnull(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "fit"), "power"));
    }
    if (caps == 2) /* the rated loop's residual is 0 whatever the exponent: the other loop's point solved */
      g_assert_cmpfloat(fabs(exponent - log((250 - idle) / (400 - idle)) / log(1215 * pow(190 / 340.0, 1 / 2.5) / 1215)),
                        <, 1e-5 * exponent);
    if (caps == 3) { /* the curve the loops were made from */
      g_assert_cmpfloat(fabs(exponent - 2.5), <, 1e-5 * 2.5);
      g_assert_cmpfloat(fabs(idle - 60), <, 1e-5 * 60);
    }
    /* the ratio is the rated loop's alone, as with that loop by itself */
    ModelProfile *a = load_profile("a100-sxm4-80gb");
    g_assert_cmpfloat_with_epsilon(cJSON_GetObjectItemCaseSensitive(p, "sustained_clock_ratio")->valuedouble,
                                   a->sustained_clock_ratio, 1e-6);
    model_profile_free(a);
    ModelProfile *q = model_profile_from_json(p, "fitted.json", &error);
    g_assert_no_error(error);
    g_assert_true(q->has_power);
    g_assert_cmpfloat(model_power_clock_ratio(q, 400), ==, q->sustained_clock_ratio);
    g_assert_cmpfloat(model_power_clock_ratio(q, 300), <, q->sustained_clock_ratio);
    model_profile_free(q);
    cJSON_Delete(p);
    calib_measurements_free(m);
  }
}

/* Without clock samples or a power limit the fit writes no power block. */
static void test_fit_no_power_block(void) {
  CalibMeasurements *m = synth("a100-sxm4-80gb", 0, 1);
  GError *error = NULL;
  cJSON *p = fit(m, 0, &error);
  g_assert_no_error(error);
  g_assert_null(cJSON_GetObjectItemCaseSensitive(p, "power"));
  cJSON_Delete(p);
  calib_measurements_free(m);
}

static void assert_within(double fitted, double se, double truth, double sigmas, const char *what) {
  g_test_message("%s: fitted %.6g +- %.3g, truth %.6g (%.2f sigma)", what, fitted, se, truth, fabs(fitted - truth) / se);
  g_assert_cmpfloat(se, >, 0);
  g_assert_cmpfloat(fabs(fitted - truth), <=, sigmas * se);
}

/* With 2% noise, over several seeds, every fitted parameter lies within 4
 * of its standard errors of the value that generated the data. */
static void test_fit_recovers_within_stderr(void) {
  ModelProfile *a = load_profile("a100-sxm4-80gb");
  GError *error = NULL;
  TopoCluster *c = topo_cluster_load("selene", &error);
  g_assert_no_error(error);
  for (gulong seed = 1; seed <= 5; seed++) {
    CalibMeasurements *m = synth("a100-sxm4-80gb", 0.02, seed);
    cJSON *p = fit(m, 0, &error);
    g_assert_no_error(error);
    assert_within(mparam(p, "copy", "gap_us", "value"), mparam(p, "copy", "gap_us", "stderr"),
                  a->kernel_launch_s * 1e6, 4, "launch_us");
    assert_within(mparam(p, "copy", "hbm_GBps", "value"), mparam(p, "copy", "hbm_GBps", "stderr"),
                  a->hbm_bytes_per_s * a->memory_efficiency / 1e9, 4, "bandwidth_GBps");
    assert_within(param(p, "gemm", "efficiency_max", "value"), param(p, "gemm", "efficiency_max", "stderr"),
                  a->gemm.efficiency_max, 4, "efficiency_max");
    /* the ratio of the median of eight noisy chunks to one noisy burst:
     * within four of the burst's noise (the chunks' median is tighter) */
    assert_within(cJSON_GetObjectItemCaseSensitive(p, "sustained_clock_ratio")->valuedouble, 0.02 * a->sustained_clock_ratio,
                  a->sustained_clock_ratio, 4, "sustained_clock_ratio");
    assert_within(param(p, "gemm", "k_half", "value"), param(p, "gemm", "k_half", "stderr"), a->gemm.k_half, 4,
                  "k_half");
    assert_within(param(p, "gemm", "tile_bandwidth_GBps", "value"), param(p, "gemm", "tile_bandwidth_GBps", "stderr"),
                  a->gemm.tile_bytes_per_s / 1e9, 4, "tile_bandwidth_GBps");
    /* Send/receive is alpha-beta in the cluster model: one range, recovered. */
    const cJSON *f;
    gboolean seen = FALSE;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "fit"), "collectives")) {
      if (strcmp(cJSON_GetObjectItemCaseSensitive(f, "op")->valuestring, "sendrecv") != 0)
        continue;
      seen = TRUE;
      const cJSON *ranges = cJSON_GetObjectItemCaseSensitive(f, "ranges");
      g_assert_cmpint(cJSON_GetArraySize(ranges), ==, 1);
      const cJSON *r = cJSON_GetArrayItem(ranges, 0);
      assert_within(field(r, "alpha_us", "value"), field(r, "alpha_us", "stderr"), c->net.p2p_latency_intra * 1e6, 4,
                    "sendrecv alpha_us");
      assert_within(field(r, "busbw_GBps", "value"), field(r, "busbw_GBps", "stderr"), c->net.nvlink_p2p_bw / 1e9, 4,
                    "sendrecv busbw_GBps");
    }
    g_assert_true(seen);
    cJSON_Delete(p);
    calib_measurements_free(m);
  }
  topo_cluster_free(c);
  model_profile_free(a);
}

/* A fit that runs out of iterations is an error that says so. */
static void test_fit_not_converged(void) {
  CalibMeasurements *m = synth("a100-sxm4-80gb", 0.02, 1);
  GError *error = NULL;
  cJSON *p = fit(m, 1, &error);
  g_assert_null(p);
  g_assert_error(error, CALIB_ERROR, CALIB_ERROR_NO_CONVERGENCE);
  g_assert_nonnull(strstr(error->message, "did not converge"));
  g_error_free(error);
  calib_measurements_free(m);
}

/* profile -> synthetic measurements (2% noise) -> fit -> profile: the fitted
 * profile predicts every planned GEMM (at the burst clock) and copy like the original, to well
 * within the noise (rms of the relative differences under 1%); a second
 * round (fitted -> synthetic -> fit) reproduces the fitted collectives too. */
static void test_round_trip_predictions(void) {
  ModelProfile *a = load_profile("a100-sxm4-80gb");
  CalibMeasurements *m = synth("a100-sxm4-80gb", 0.02, 11);
  GError *error = NULL;
  cJSON *j = fit(m, 0, &error);
  g_assert_no_error(error);
  ModelProfile *b = profile_from_json(j, "fitted-1.json");
  CalibPlan *plan = default_plan();
  double sq = 0, worst = 0;
  /* the GEMM model at the burst clock, as its records were timed (the
   * sustained ratio's own round trip: fit-exact-without-noise,
   * fit-recovers-within-stderr) */
  ModelProfile ab = *a, bb = *b;
  ab.sustained_clock_ratio = bb.sustained_clock_ratio = 1;
  for (guint i = 0; i < plan->gemm->len; i++) {
    const CalibPlanGemm *pg = &g_array_index(plan->gemm, CalibPlanGemm, i);
    ModelGemm g = {pg->batch, pg->m, pg->n, pg->k};
    double r = model_gemm_time_s(&bb, &g) / model_gemm_time_s(&ab, &g) - 1;
    sq += r * r;
    worst = fmax(worst, fabs(r));
  }
  double rms = sqrt(sq / plan->gemm->len);
  g_test_message("GEMM predictions: rms %.3f%%, worst %.3f%%", 100 * rms, 100 * worst);
  g_assert_cmpfloat(rms, <, 0.01);
  g_assert_cmpfloat(worst, <, 0.04);
  for (double bytes = 4096; bytes <= 1e9; bytes *= 10) {
    double r = model_memop_time_s(b, bytes) / model_memop_time_s(a, bytes) - 1;
    g_assert_cmpfloat(fabs(r), <, 0.02);
  }
  g_assert_cmpuint(b->n_coll, ==, 3 * 3 + 1); /* 3 collectives on 2, 4, 8 GPUs; send/receive */

  /* Second round: b's own collectives are the truth now. */
  CalibMeasurements *m2 = synth(b->path, 0.02, 12);
  cJSON *j2 = fit(m2, 0, &error);
  g_assert_no_error(error);
  ModelProfile *c = profile_from_json(j2, "fitted-2.json");
  g_assert_cmpuint(c->n_coll, ==, b->n_coll);
  ModelNet nb = {.measured = b->coll, .n_measured = b->n_coll}, nc = {.measured = c->coll, .n_measured = c->n_coll};
  sq = 0;
  guint n = 0;
  for (guint i = 0; i < plan->nccl_bytes->len; i++) {
    double bytes = g_array_index(plan->nccl_bytes, double, i);
    for (int op = 0; op < 3; op++) {
      if (!calib_plan_coll_fits((CalibCollOp)op, 8, bytes))
        continue;
      double r = model_collective_time_s(&nc, (ModelCollOp)op, bytes, 8, 1, NULL) /
                     model_collective_time_s(&nb, (ModelCollOp)op, bytes, 8, 1, NULL) - 1;
      sq += r * r;
      n++;
    }
    double r = model_p2p_time_s(&nc, bytes, TRUE) / model_p2p_time_s(&nb, bytes, TRUE) - 1;
    sq += r * r;
    n++;
  }
  g_test_message("collective predictions: rms %.3f%% over %u sizes", 100 * sqrt(sq / n), n);
  g_assert_cmpfloat(sqrt(sq / n), <, 0.02);
  cJSON_Delete(j);
  cJSON_Delete(j2);
  model_profile_free(a);
  model_profile_free(b);
  model_profile_free(c);
  calib_measurements_free(m);
  calib_measurements_free(m2);
  calib_plan_free(plan);
}

/* A profile's collectives block replaces the intra-node model exactly where
 * it applies (same op, same ranks, one node) and nowhere else. */
static void test_measured_collectives_in_model(void) {
  const char *text = "{\"name\": \"t\", \"kind\": \"analytic\", \"peak_tflops\": 100, \"sms\": 100, \"memory_GiB\": 16,"
                     " \"hbm_GBps\": 1000, \"memory_efficiency\": 0.5, \"kernel_launch_us\": 2,"
                     " \"gemm\": {\"tiles\": [[128, 128]], \"k_half\": 32, \"tile_bandwidth_GBps\": 5000, \"efficiency_max\": 0.75},"
                     " \"collectives\": [{\"op\": \"all_reduce\", \"ranks\": 4, \"ranges\": ["
                     "   {\"alpha_us\": 10, \"busbw_GBps\": 50}, {\"alpha_us\": 40, \"busbw_GBps\": 200}]},"
                     "  {\"op\": \"sendrecv\", \"ranks\": 2, \"ranges\": [{\"alpha_us\": 5, \"busbw_GBps\": 100}]}]}";
  char *path = tmp_path("measured.json");
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
  ModelProfile *p = load_profile(path);
  g_assert_cmpfloat(p->gemm.efficiency_max, ==, 0.75);
  g_assert_cmpuint(p->n_coll, ==, 2);
  GError *error = NULL;
  TopoCluster *c = topo_cluster_load("selene", &error);
  g_assert_no_error(error);
  ModelNet net = {.hw = c->net, .measured = p->coll, .n_measured = p->n_coll};
  double bus_small = 1e4 * 1.5, bus_big = 1e9 * 1.5; /* all-reduce on 4: 2 * 3/4 */
  g_assert_cmpfloat_with_epsilon(model_collective_time_s(&net, MODEL_COLL_ALLREDUCE, 1e4, 4, 1, NULL),
                                 10e-6 + bus_small / 50e9, 1e-15);
  g_assert_cmpfloat_with_epsilon(model_collective_time_s(&net, MODEL_COLL_ALLREDUCE, 1e9, 4, 1, NULL),
                                 40e-6 + bus_big / 200e9, 1e-12);
  g_assert_cmpfloat_with_epsilon(model_p2p_time_s(&net, 1e6, TRUE), 5e-6 + 1e6 / 100e9, 1e-15);
  /* Not measured: 8 ranks, two nodes, or across nodes -> the cluster model. */
  ModelNet cluster_only = {.hw = c->net};
  g_assert_cmpfloat(model_collective_time_s(&net, MODEL_COLL_ALLREDUCE, 1e6, 8, 1, NULL), ==,
                    model_collective_time_s(&cluster_only, MODEL_COLL_ALLREDUCE, 1e6, 8, 1, NULL));
  g_assert_cmpfloat(model_collective_time_s(&net, MODEL_COLL_ALLREDUCE, 1e6, 4, 2, NULL), ==,
                    model_collective_time_s(&cluster_only, MODEL_COLL_ALLREDUCE, 1e6, 4, 2, NULL));
  g_assert_cmpfloat(model_p2p_time_s(&net, 1e6, FALSE), ==, model_p2p_time_s(&cluster_only, 1e6, FALSE));
  topo_cluster_free(c);
  model_profile_free(p);

  /* A malformed block is one clear error. */
  char *bad = g_strdup(text);
  char *at = strstr(bad, "\"busbw_GBps\": 50");
  memcpy(at, "\"busbw_GBps\": -5", 16);
  g_assert_true(g_file_set_contents(path, bad, -1, NULL));
  g_assert_null(model_profile_load(path, &error));
  g_assert_nonnull(strstr(error->message, "collectives[0]"));
  g_clear_error(&error);
  g_free(bad);
  g_unlink(path);
  g_free(path);
}

/* --- the command lines --- */

/* A one-GPU node: NCCL ran single-rank, so every
 * collective record has ranks 1 and sendrecv is absent.  The fit still
 * succeeds, lists the three groups as not fitted and writes no measured
 * collectives (the cluster's network model stays in charge). */
static void test_fit_single_rank(void) {
  CalibMeasurements *m = synth("a100-sxm4-80gb", 0.02, 4);
  g_array_set_size(m->coll, 0);
  m->device.gpus = 1;
  for (int op = 0; op < CALIB_SENDRECV; op++)
    for (double bytes = 8; bytes <= 1 << 30; bytes *= 2) {
      CalibColl c = {.op = (CalibCollOp)op, .ranks = 1, .bytes = bytes};
      c.t.median_us = c.t.min_us = c.t.p10_us = c.t.p90_us = c.t.max_us = 6 + bytes / 1.5e6;
      c.t.reps = 50;
      g_array_append_val(m->coll, c);
    }
  char *path = tmp_path("single-rank.json");
  GError *error = NULL;
  g_assert_true(calib_measurements_save(m, path, &error));
  CalibMeasurements *r = calib_measurements_load(path, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(r->coll->len, ==, 3 * 28);
  cJSON *p = fit(r, 0, &error);
  g_assert_no_error(error);
  g_assert_null(cJSON_GetObjectItemCaseSensitive(p, "collectives"));
  const cJSON *skipped = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "fit"),
                                                          "collectives_not_fitted");
  g_assert_cmpint(cJSON_GetArraySize(skipped), ==, 3);
  g_assert_nonnull(strstr(cJSON_GetArrayItem(skipped, 0)->valuestring, "one rank"));
  cJSON_Delete(p);
  calib_measurements_free(r);
  calib_measurements_free(m);
  g_unlink(path);
  g_free(path);
}

/* --- measured against predicted --- */

/* The synthesizer makes a 2021 layer record for every planned 2021 shape
 * (sc21's six by default) and a modern one per shape and precision the
 * device runs (bf16 on the A100), each with forward, recomputation and
 * backward times; without noise the recomputation is exactly the forward
 * (the same work). */
static void test_synth_layers(void) {
  CalibPlan *plan = default_plan();
  CalibMeasurements *m = synth("a100-sxm4-80gb", 0, 1);
  g_assert_cmpuint(plan->cfg.n_shapes, ==, 6);
  g_assert_cmpuint(m->layers->len, ==, 2 * plan->cfg.n_shapes);
  for (guint i = 0; i < m->layers->len; i++) {
    const CalibLayer *l = &g_array_index(m->layers, CalibLayer, i);
    const CalibLayerShape *sh = &plan->cfg.shapes[i % plan->cfg.n_shapes];
    g_assert_cmpuint(l->hidden, ==, sh->hidden);
    g_assert_cmpuint(l->heads, ==, sh->heads);
    g_assert_cmpuint(l->micro_batch, ==, sh->micro_batch);
    g_assert_cmpuint(l->tp, ==, sh->tp);
    g_assert_true(l->has_recompute);
    g_assert_cmpfloat(l->recompute.median_us, ==, l->fwd.median_us);
    g_assert_cmpfloat(l->bwd.median_us, >, l->fwd.median_us);
    /* the first six are the 2021 layer, the rest today's in bf16 with flash (the A100 profile has it) */
    g_assert_cmpstr(l->dtype, ==, i < 6 ? "fp16" : "bf16");
    g_assert_cmpint(l->flash, ==, i >= 6);
    g_assert_cmpint(l->sequence_parallel, ==, i >= 6 && sh->tp > 1);
  }
  /* 175B t=8, 1.7B t=1 and 18.4B t=8, each at micro-batch 1 and 4. */
  const guint hidden[] = {12288, 12288, 2304, 2304, 6144, 6144}, tp[] = {8, 8, 1, 1, 8, 8}, b[] = {1, 4, 1, 4, 1, 4};
  for (guint i = 0; i < 6; i++) {
    g_assert_cmpuint(plan->cfg.shapes[i].hidden, ==, hidden[i]);
    g_assert_cmpuint(plan->cfg.shapes[i].tp, ==, tp[i]);
    g_assert_cmpuint(plan->cfg.shapes[i].micro_batch, ==, b[i]);
  }
  /* The GEMMs of micro-batch 4 have four times the tokens of micro-batch 1. */
  guint64 m1 = 0, m4 = 0;
  for (guint i = 0; i < plan->gemm->len; i++) {
    const CalibPlanGemm *g = &g_array_index(plan->gemm, CalibPlanGemm, i);
    if (strcmp(g->op, "qkv.fwd") == 0 && g->shape == 0)
      m1 = g->m;
    if (strcmp(g->op, "qkv.fwd") == 0 && g->shape == 1)
      m4 = g->m;
  }
  g_assert_cmpuint(m4, ==, 4 * m1);
  calib_measurements_free(m);
  calib_plan_free(plan);
}

static double num(const cJSON *o, const char *key) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
  g_assert_true(cJSON_IsNumber(x));
  return x->valuedouble;
}

/* The class of `cls`/`what` in a comparison, or NULL. */
static const cJSON *compare_class(const cJSON *c, const char *cls, const char *what) {
  const cJSON *r;
  cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(c, "classes")) {
    if (strcmp(cJSON_GetObjectItemCaseSensitive(r, "class")->valuestring, cls) == 0 &&
        strcmp(cJSON_GetObjectItemCaseSensitive(r, "what")->valuestring, what) == 0)
      return r;
  }
  return NULL;
}

/* Measurements made from a profile compare with that profile with no error
 * at all, in every class; measurements with 2% noise, fitted, compare with
 * the fitted profile within a few times the noise; a profile without a GEMM
 * model is refused. */
static void test_compare(void) {
  ModelProfile *a = load_profile("a100-sxm4-80gb");
  CalibMeasurements *m = synth("a100-sxm4-80gb", 0, 1);
  GError *error = NULL;
  cJSON *c = calib_compare(m, a, &error);
  g_assert_no_error(error);
  const cJSON *r;
  int rows = 0, recompute = 0;
  cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(c, "layer")) {
    rows++;
    recompute += strcmp(cJSON_GetObjectItemCaseSensitive(r, "pass")->valuestring, "recompute") == 0;
    g_assert_cmpfloat(fabs(num(r, "error")), <, 1e-12);
    g_assert_cmpfloat(num(r, "predicted_us"), >, 0);
  }
  g_assert_cmpint(rows, ==, 36);
  g_assert_cmpint(recompute, ==, 12);
  int classes = 0;
  cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(c, "classes")) {
    classes++;
    g_assert_cmpfloat(num(r, "max_abs_error"), <, 1e-12);
  }
  /* fp16: all and five groups (no cuBLASLt fp16); bf16: all, six groups and
   * cuBLASLt; six memory classes; the sustained loop (the A100 profile's
   * clock settles below its burst clock); the layers */
  g_assert_cmpint(classes, ==, 6 + 7 + MODEL_MEM_N + 1 + 1);
  g_assert_cmpfloat(num(compare_class(c, "sustained gemm",
                                      "settled, at the sustained clock"),
                        "count"),
                    ==, 1);
  g_assert_cmpfloat(num(compare_class(c, "gemm fp16", "all"), "count"), ==, default_plan_gemms());
  g_assert_nonnull(compare_class(c, "membound", "cross_entropy"));
  cJSON_Delete(c);
  calib_measurements_free(m);

  m = synth("a100-sxm4-80gb", 0.02, 11);
  cJSON *pj = fit(m, 0, &error);
  g_assert_no_error(error);
  ModelProfile *f = profile_from_json(pj, "compare-fitted");
  c = calib_compare(m, f, &error);
  g_assert_no_error(error);
  cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(c, "layer")) {
    g_assert_cmpfloat(fabs(num(r, "error")), <, 5 * 0.02 + 0.02);
  }
  const cJSON *all = compare_class(c, "gemm fp16", "all");
  g_assert_cmpfloat(num(all, "median_abs_error"), <, 0.03);
  g_assert_cmpfloat(num(all, "median_abs_error"), >, 0); /* the noise is there */
  cJSON_Delete(c);
  cJSON_Delete(pj);
  model_profile_free(f);

  ModelProfile *ideal = load_profile("ideal");
  g_assert_null(calib_compare(m, ideal, &error));
  g_assert_error(error, CALIB_ERROR, CALIB_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "analytic"));
  g_clear_error(&error);
  model_profile_free(ideal);
  calib_measurements_free(m);
  model_profile_free(a);
}

/* --- today's parts of the fit --- */

/* Synthetic measurements of today's records (llama3 and gpt3 shapes) from
 * `gen`, fitted with the published H100 profile as the base. */
static cJSON *fit_today(const ModelProfile *gen, double noise, gulong seed, GError **error) {
  CalibPlanConfig cfg;
  calib_plan_config_default(&cfg);
  g_assert_true(calib_plan_parse_shapes("llama3", &cfg, error));
  CalibPlanConfig gpt;
  calib_plan_config_default(&gpt);
  g_assert_true(calib_plan_parse_shapes("gpt3", &gpt, error));
  for (guint i = 0; i < gpt.n_shapes; i++)
    cfg.shapes[cfg.n_shapes++] = gpt.shapes[i];
  cfg.gpus = 1;
  CalibPlan *plan = calib_plan_new(&cfg, error);
  g_assert_nonnull(plan);
  ModelNet net = {0};
  CalibMeasurements *m = calib_synthesize(gen, &net, plan, noise, seed);
  char *path = NULL;
  ModelProfile *base = NULL;
  cJSON *base_json = NULL;
  path = ptd_data_resolve("calibrate/profiles", "h100-sxm5-80gb", "profile", error);
  base_json = ptd_json_load(path, error);
  base = model_profile_from_json(base_json, path, error);
  g_assert_nonnull(base);
  CalibFitOptions o = {.name = "today", .measurements_path = "synthetic.json", .base = base, .base_json = base_json};
  cJSON *j = calib_fit(m, &o, error);
  model_profile_free(base);
  cJSON_Delete(base_json);
  g_free(path);
  calib_measurements_free(m);
  calib_plan_free(plan);
  return j;
}

/* The parameters of today's parts: per memory-bound class (gap, HBM, L2 where
 * both sides are measured), the bf16 and FP8 GEMM models with the FP8
 * gradient GEMMs' share, and the waves of each attention pass. */
typedef struct {
  const char *block, *name;
  double truth;
} Truth;

static guint today_truths(const ModelProfile *g, Truth *t) {
  guint n = 0;
  static const char *cls[] = {"norm", "pointwise", "activation", "cross_entropy"};
  for (guint i = 0; i < G_N_ELEMENTS(cls); i++) {
    ModelMemClass c = model_mem_class_lookup(cls[i]);
    t[n++] = (Truth){cls[i], "gap_us", g->mem_gap_s[c] * 1e6};
    t[n++] = (Truth){cls[i], "hbm_GBps", g->mem_hbm_bytes_per_s[c] / 1e9};
    t[n++] = (Truth){cls[i], "l2_GBps", g->mem_l2_bytes_per_s[c] / 1e9};
  }
  t[n++] = (Truth){"gemm", "efficiency_max", g->gemm.efficiency_max};
  t[n++] = (Truth){"gemm", "k_half", g->gemm.k_half};
  t[n++] = (Truth){"gemm", "tile_bandwidth_GBps", g->gemm.tile_bytes_per_s / 1e9};
  t[n++] = (Truth){"gemm_fp8", "efficiency_max", g->gemm_fp8.efficiency_max};
  t[n++] = (Truth){"gemm_fp8", "k_half", g->gemm_fp8.k_half};
  t[n++] = (Truth){"gemm_fp8", "split_accumulation", g->gemm_fp8_split_accumulation};
  t[n++] = (Truth){"attention_forward", "efficiency", g->flash[0].efficiency};
  t[n++] = (Truth){"attention_forward", "cta_overhead_us", g->flash[0].cta_overhead_s * 1e6};
  t[n++] = (Truth){"attention_backward", "efficiency", g->flash[1].efficiency};
  t[n++] = (Truth){"attention_backward", "cta_overhead_us", g->flash[1].cta_overhead_s * 1e6};
  return n;
}

static double today_param(const cJSON *profile, const char *block, const char *name, const char *what) {
  const cJSON *fitb = cJSON_GetObjectItemCaseSensitive(profile, "fit");
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(fitb, block);
  if (!b) /* a memory-bound class */
    return mparam(profile, block, name, what);
  return param(profile, block, name, what);
}

/* The generating profile: the measured H100's GEMM and memory-bound fits, an
 * FP8 model of its own (a ceiling and share that differ from the 16-bit
 * ones) and the published waves of flash attention. */
static ModelProfile *today_generator(void) {
  ModelProfile *g = load_profile("h100-sxm5-80gb-measured");
  g_assert_true(g->has_membound && g->flash_waves && g->has_gemm_fp8);
  g->gemm_fp8.efficiency_max = 0.71;
  g->gemm_fp8.k_half = 150;
  g->gemm_fp8_split_accumulation = 0.8;
  g->mem_l2_bytes_per_s[MODEL_MEM_CROSS_ENTROPY] = 1.7 * g->mem_hbm_bytes_per_s[MODEL_MEM_CROSS_ENTROPY];
  g->mem_gap_s[MODEL_MEM_ACTIVATION] = 2.5e-6; /* the measured fit's is 0 (a gap refitted at zero has no error bar) */
  return g;
}

/* Without noise the fit gives today's parameters back exactly (to the six
 * significant digits the profile keeps), the GEMM tiles being those the
 * synthesized cuBLASLt records report. */
static void test_fit_today_exact(void) {
  ModelProfile *g = today_generator();
  GError *error = NULL;
  cJSON *p = fit_today(g, 0, 1, &error);
  g_assert_no_error(error);
  Truth t[32];
  guint n = today_truths(g, t);
  for (guint i = 0; i < n; i++) {
    double v = today_param(p, t[i].block, t[i].name, "value");
    g_test_message("%s %s: %.8g (truth %.8g)", t[i].block, t[i].name, v, t[i].truth);
    g_assert_cmpfloat(fabs(v - t[i].truth), <=, 2e-5 * fabs(t[i].truth) + 1e-6); /* 1e-6: a gap of 0 us */
  }
  const cJSON *prov = cJSON_GetObjectItemCaseSensitive(p, "provenance");
  g_assert_nonnull(strstr(cJSON_GetObjectItemCaseSensitive(prov, "gemm")->valuestring, "cuBLASLt reported"));
  cJSON_Delete(p);
  model_profile_free(g);
}

/* With 2% noise, over three seeds, every one of today's parameters lies
 * within 4 of its standard errors of the value that generated the data. */
static void test_fit_today_within_stderr(void) {
  ModelProfile *g = today_generator();
  Truth t[32];
  guint n = today_truths(g, t);
  for (gulong seed = 1; seed <= 3; seed++) {
    GError *error = NULL;
    cJSON *p = fit_today(g, 0.02, seed, &error);
    g_assert_no_error(error);
    for (guint i = 0; i < n; i++) {
      char what[96];
      g_snprintf(what, sizeof what, "%s %s (seed %lu)", t[i].block, t[i].name, seed);
      assert_within(today_param(p, t[i].block, t[i].name, "value"), today_param(p, t[i].block, t[i].name, "stderr"),
                    t[i].truth, 4, what);
    }
    cJSON_Delete(p);
  }
  model_profile_free(g);
}

/* A file of one part alone (here: attention) gives a whole profile: the
 * attention fitted, everything else the base's, and the provenance says
 * which; without a base it is refused with one line. */
static void test_fit_part_with_base(void) {
  char *path = ptd_data_resolve("calibrate/published", "h100-flash-attention-fa3", "measurements", NULL);
  if (!path)
    path = g_build_filename(g_getenv("PTDSIM_DATA_DIR") ? g_getenv("PTDSIM_DATA_DIR") : "..", "calibrate", "published",
                            "h100-flash-attention-fa3.json", NULL);
  GError *error = NULL;
  CalibMeasurements *m = calib_measurements_load(path, &error);
  g_assert_no_error(error);
  g_assert_nonnull(m->source);
  CalibFitOptions none = {.name = "x", .measurements_path = path};
  g_assert_null(calib_fit(m, &none, &error));
  g_assert_error(error, CALIB_ERROR, CALIB_ERROR_TOO_FEW);
  g_clear_error(&error);
  char *bp = ptd_data_resolve("calibrate/profiles", "h100-sxm5-80gb", "profile", &error);
  cJSON *bj = ptd_json_load(bp, &error);
  ModelProfile *base = model_profile_from_json(bj, bp, &error);
  g_assert_no_error(error);
  CalibFitOptions o = {.name = "fa3", .measurements_path = path, .base = base, .base_json = bj};
  cJSON *p = calib_fit(m, &o, &error);
  g_assert_no_error(error);
  const cJSON *prov = cJSON_GetObjectItemCaseSensitive(p, "provenance");
  g_assert_true(g_str_has_prefix(cJSON_GetObjectItemCaseSensitive(prov, "gemm")->valuestring, "from the base profile"));
  g_assert_true(g_str_has_prefix(cJSON_GetObjectItemCaseSensitive(prov, "attention")->valuestring, "fitted"));
  g_assert_nonnull(cJSON_GetObjectItemCaseSensitive(prov, "source"));
  /* the base's GEMM model and memory figures, unchanged */
  ModelProfile *f = profile_from_json(p, "fa3.json");
  g_assert_cmpfloat(f->gemm.efficiency_max, ==, base->gemm.efficiency_max);
  g_assert_cmpfloat(f->memory_efficiency, ==, base->memory_efficiency);
  g_assert_true(f->flash_waves);
  /* every published point within 3% (the figures' rounding and the model) */
  cJSON *c = calib_compare(m, f, &error);
  g_assert_no_error(error);
  g_assert_cmpfloat(num(compare_class(c, "attention", "forward"), "max_abs_error"), <, 0.03);
  g_assert_cmpfloat(num(compare_class(c, "attention", "backward"), "max_abs_error"), <, 0.03);
  /* the shipped H100 profile's waves are this fit's */
  for (int pass = 0; pass < 2; pass++) {
    g_assert_cmpfloat(fabs(f->flash[pass].efficiency - base->flash[pass].efficiency), <=, 1e-6);
    g_assert_cmpfloat(fabs(f->flash[pass].cta_overhead_s - base->flash[pass].cta_overhead_s), <=, 1e-11);
  }
  cJSON_Delete(c);
  cJSON_Delete(p);
  cJSON_Delete(bj);
  model_profile_free(base);
  model_profile_free(f);
  calib_measurements_free(m);
  g_free(bp);
  g_free(path);
}

/* Why: a file that measures today's memory-bound classes but no copies
 * (the shipped llama3 runs), fitted over a base profile without classes,
 * once wrote a profile without the copy class, which no profile may lack:
 * the copy class comes from the base's launch gap and streaming bandwidth,
 * the measured classes keep their fits, and the profile loads. */
static void test_fit_classes_without_copies(void) {
  GError *error = NULL;
  char *path = ptd_data_resolve("calibrate/measurements", "h100-sxm5-80gb-llama3", "measurements", &error);
  g_assert_no_error(error);
  CalibMeasurements *m = calib_measurements_load(path, &error);
  g_assert_no_error(error);
  char *bp = ptd_data_resolve("calibrate/profiles", "h100-sxm5-80gb", "profile", &error);
  cJSON *bj = ptd_json_load(bp, &error);
  ModelProfile *base = model_profile_from_json(bj, bp, &error);
  g_assert_no_error(error);
  g_assert_false(base->has_membound);
  CalibFitOptions o = {.name = "llama3", .measurements_path = path, .base = base, .base_json = bj};
  cJSON *p = calib_fit(m, &o, &error);
  g_assert_no_error(error);
  ModelProfile *f = profile_from_json(p, "llama3.json");
  g_assert_true(f->has_membound);
  g_assert_cmpfloat(f->mem_gap_s[MODEL_MEM_COPY], ==, base->kernel_launch_s);
  g_assert_cmpfloat(fabs(f->mem_hbm_bytes_per_s[MODEL_MEM_COPY] / (base->hbm_bytes_per_s * base->memory_efficiency) - 1),
                    <, 1e-5);
  const cJSON *prov = cJSON_GetObjectItemCaseSensitive(p, "provenance");
  g_assert_nonnull(strstr(cJSON_GetObjectItemCaseSensitive(prov, "membound.copy")->valuestring, "no copies measured"));
  g_assert_true(g_str_has_prefix(cJSON_GetObjectItemCaseSensitive(prov, "membound.norm")->valuestring, "fitted"));
  g_assert_cmpfloat(f->mem_gap_s[MODEL_MEM_NORM], !=, f->mem_gap_s[MODEL_MEM_COPY]);
  cJSON_Delete(p);
  cJSON_Delete(bj);
  model_profile_free(base);
  model_profile_free(f);
  calib_measurements_free(m);
  g_free(bp);
  g_free(path);
}

typedef struct {
  int status;
  char *out, *err;
} Proc;

static Proc run(const char *bin, const char *args) {
  char **split = g_strsplit(args, " ", -1);
  GPtrArray *argv = g_ptr_array_new();
  g_ptr_array_add(argv, (gpointer)bin);
  for (char **a = split; *a; a++)
    g_ptr_array_add(argv, *a);
  g_ptr_array_add(argv, NULL);
  Proc p = {-1, NULL, NULL};
  int ws = 0;
  GError *error = NULL;
  g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &p.out, &p.err, &ws, &error));
  g_assert_no_error(error);
  if (g_spawn_check_wait_status(ws, &error))
    p.status = 0;
  else {
    p.status = error->domain == G_SPAWN_EXIT_ERROR ? error->code : -1;
    g_clear_error(&error);
  }
  g_ptr_array_free(argv, TRUE);
  g_strfreev(split);
  return p;
}

static void proc_clear(Proc *p) {
  g_free(p->out);
  g_free(p->err);
}

static void expect_one_line_error(Proc *p, const char *expect) {
  g_test_message("stderr: %s", p->err);
  g_assert_cmpint(p->status, ==, 1); /* an error, not a crash */
  g_assert_cmpstr(p->out, ==, "");
  g_assert_true(g_str_has_suffix(p->err, "\n"));
  guint lines = 0;
  for (const char *c = p->err; *c; c++)
    lines += *c == '\n';
  g_assert_cmpuint(lines, ==, 1);
  g_assert_nonnull(strstr(p->err, expect));
  proc_clear(p);
}

static double run_iteration_time(const char *bin, const char *profile) {
  char *args = g_strdup_printf("run --model gpt3-175b --gpus 96 --tp 8 --pp 12 --global-batch 96 --micro-batch 1 "
                               "--format json --profile %s", profile);
  Proc p = run(bin, args);
  g_assert_cmpint(p.status, ==, 0);
  cJSON *j = cJSON_Parse(p.out);
  g_assert_nonnull(j);
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "iteration_time_s");
  g_assert_true(cJSON_IsNumber(t));
  double v = t->valuedouble;
  cJSON_Delete(j);
  proc_clear(&p);
  g_free(args);
  return v;
}

/* Through the real binary: synthesize, fit, simulate with the fitted profile;
 * deterministic output; bad inputs rejected with one line and no file. */
static void test_cli_fit(void) {
  const char *bin = g_getenv("PTDSIM_BIN");
  if (!bin) {
    g_test_skip("PTDSIM_BIN is not set");
    return;
  }
  char *meas = tmp_path("cli-meas.json"), *prof = tmp_path("cli-prof.json"), *prof2 = tmp_path("cli-prof2.json");
  char *args = g_strdup_printf("fit --synthesize a100-sxm4-80gb --noise 0.02 --seed 5 -o %s", meas);
  Proc p = run(bin, args);
  g_assert_cmpint(p.status, ==, 0);
  proc_clear(&p);
  g_free(args);
  args = g_strdup_printf("fit %s -o %s", meas, prof);
  p = run(bin, args);
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "GEMM bf16 efficiency_max"));
  proc_clear(&p);
  g_free(args);
  args = g_strdup_printf("fit %s -o %s", meas, prof2);
  p = run(bin, args);
  g_assert_cmpint(p.status, ==, 0);
  proc_clear(&p);
  g_free(args);
  char *t1 = NULL, *t2 = NULL;
  g_assert_true(g_file_get_contents(prof, &t1, NULL, NULL));
  g_assert_true(g_file_get_contents(prof2, &t2, NULL, NULL));
  /* Same input, same bytes (apart from the name taken from the file name). */
  char *n1 = strstr(t1, "\"kind\""), *n2 = strstr(t2, "\"kind\"");
  g_assert_cmpstr(n1, ==, n2);
  g_assert_nonnull(strstr(t1, meas)); /* records its measurements file */
  g_free(t1);
  g_free(t2);

  /* The simulator uses it: a GPT-3 iteration within 3% of the original
   * profile's (the fitted GEMMs run at the sustained clock the original
   * profile assumes; the collectives come from the cluster model and are
   * refitted from 2%-noisy data). */
  double t_orig = run_iteration_time(bin, "a100-sxm4-80gb"), t_fit = run_iteration_time(bin, prof);
  g_test_message("iteration: original %.4f s, fitted %.4f s", t_orig, t_fit);
  g_assert_cmpfloat(fabs(t_fit / t_orig - 1), <, 0.03);

  /* The run really uses the profile's measured collectives: a profile whose
   * 8-GPU all-reduce is made 1 ms slower per call spends more time in
   * tensor-parallel communication than the fitted one. */
  cJSON *pj = NULL;
  {
    char *text = NULL;
    g_assert_true(g_file_get_contents(prof, &text, NULL, NULL));
    pj = cJSON_Parse(text);
    g_free(text);
  }
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(pj, "collectives")) {
    if (strcmp(cJSON_GetObjectItemCaseSensitive(c, "op")->valuestring, "all_reduce") != 0)
      continue;
    cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(c, "ranges")) {
      double a = cJSON_GetObjectItemCaseSensitive(r, "alpha_us")->valuedouble;
      cJSON_ReplaceItemInObject(r, "alpha_us", cJSON_CreateNumber(a + 1000));
    }
  }
  char *slow = tmp_path("cli-slow-allreduce.json"), *slow_text = cJSON_Print(pj);
  g_assert_true(g_file_set_contents(slow, slow_text, -1, NULL));
  double t_slow = run_iteration_time(bin, slow);
  g_test_message("iteration with a 1 ms slower all-reduce: %.4f s", t_slow);
  g_assert_cmpfloat(t_slow, >, t_fit + 1.0); /* thousands of tensor-parallel all-reduces per iteration */
  cJSON_free(slow_text);
  cJSON_Delete(pj);
  g_unlink(slow);
  g_free(slow);

  /* Synthetic files are deterministic in the seed. */
  char *again = tmp_path("cli-meas-again.json"), *other = tmp_path("cli-meas-other.json");
  args = g_strdup_printf("fit --synthesize a100-sxm4-80gb --noise 0.02 --seed 5 -o %s", again);
  p = run(bin, args);
  g_assert_cmpint(p.status, ==, 0);
  proc_clear(&p);
  g_free(args);
  args = g_strdup_printf("fit --synthesize a100-sxm4-80gb --noise 0.02 --seed 6 -o %s", other);
  p = run(bin, args);
  g_assert_cmpint(p.status, ==, 0);
  proc_clear(&p);
  g_free(args);
  char *m1 = NULL, *m2 = NULL, *m3 = NULL;
  g_assert_true(g_file_get_contents(meas, &m1, NULL, NULL));
  g_assert_true(g_file_get_contents(again, &m2, NULL, NULL));
  g_assert_true(g_file_get_contents(other, &m3, NULL, NULL));
  g_assert_cmpstr(m1, ==, m2);
  g_assert_cmpstr(m1, !=, m3);
  g_free(m1);
  g_free(m2);
  g_free(m3);
  g_unlink(again);
  g_unlink(other);
  g_free(again);
  g_free(other);

  /* Errors: one line, non-zero exit, no output file. */
  char *out = tmp_path("should-not-exist.json");
  args = g_strdup_printf("fit %s -o %s", "/nonexistent/meas.json", out);
  p = run(bin, args);
  expect_one_line_error(&p, "cannot read measurements");
  g_free(args);
  char *bad = tmp_path("cli-bad.json");
  g_assert_true(g_file_set_contents(bad, "{\"format\": \"ptdsim-measurements\", \"version\": 1, \"units\": "
                                         "{\"time\": \"ms\", \"size\": \"bytes\"}}", -1, NULL));
  args = g_strdup_printf("fit %s -o %s", bad, out);
  p = run(bin, args);
  expect_one_line_error(&p, "microseconds");
  g_free(args);
  args = g_strdup_printf("fit %s -o %s --max-iterations 1", meas, out);
  p = run(bin, args);
  expect_one_line_error(&p, "did not converge");
  g_free(args);
  args = g_strdup_printf("fit %s", meas);
  p = run(bin, args);
  expect_one_line_error(&p, "-o FILE is required");
  g_free(args);
  args = g_strdup_printf("fit --synthesize a100-sxm4-80gb --noise -1 -o %s", out);
  p = run(bin, args);
  expect_one_line_error(&p, "--noise");
  g_free(args);
  args = g_strdup_printf("fit --synthesize nosuch -o %s", out);
  p = run(bin, args);
  expect_one_line_error(&p, "no profile named 'nosuch'");
  g_free(args);
  g_assert_false(g_file_test(out, G_FILE_TEST_EXISTS));

  g_unlink(bad);
  g_unlink(meas);
  g_unlink(prof);
  g_unlink(prof2);
  g_free(bad);
  g_free(out);
  g_free(meas);
  g_free(prof);
  g_free(prof2);
}

/* ptdsim fit --compare through the binary: a table regenerable from a
 * measurements file, JSON that parses, and one-line errors. */
/* Through the real binary: measurements with overlap runs are fitted into
 * an "overlap" block (the summary prints it), --compare shows the overlap
 * class against the fitted profile and against one without the block;
 * malformed runs and runs that give no physical figure are refused in one
 * line, writing nothing and leaving an existing output file as it was. */
static void test_cli_overlap(void) {
  const char *bin = g_getenv("PTDSIM_BIN");
  if (!bin) {
    g_test_skip("PTDSIM_BIN is not set");
    return;
  }
  char *meas = tmp_path("ov-meas.json"), *prof = tmp_path("ov-prof.json"), *bad = tmp_path("ov-bad.json");
  char *args = g_strdup_printf("fit --synthesize a100-sxm4-80gb -o %s", meas);
  Proc p = run(bin, args);
  g_assert_cmpint(p.status, ==, 0);
  proc_clear(&p);
  g_free(args);
  char *text = NULL;
  g_assert_true(g_file_get_contents(meas, &text, NULL, NULL));
  cJSON *root = cJSON_Parse(text);
  g_free(text);
  ModelProfile *a = load_profile("a100-sxm4-80gb");
  cJSON_AddItemToObject(root, "overlap",
                        overlap_runs(a->sms, a->hbm_bytes_per_s * a->memory_efficiency / 1e9, 1.25, 2.5));
  text = cJSON_Print(root);
  g_assert_true(g_file_set_contents(meas, text, -1, NULL));
  cJSON_free(text);
  args = g_strdup_printf("fit %s -o %s", meas, prof);
  p = run(bin, args);
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "SMs per NCCL channel (overlap)"));
  g_assert_nonnull(strstr(p.out, "HBM bytes per byte moved (overlap)"));
  proc_clear(&p);
  g_free(args);
  ModelProfile *f = load_profile(prof);
  g_assert_true(f->has_overlap);
  g_assert_cmpfloat_with_epsilon(f->overlap_sms_per_channel, 1.25, 1e-12);
  model_profile_free(f);
  const char *against[] = {prof, "a100-sxm4-80gb"};
  for (guint i = 0; i < G_N_ELEMENTS(against); i++) {
    args = g_strdup_printf("fit --compare %s --profile %s --format json", meas, against[i]);
    p = run(bin, args);
    g_assert_cmpint(p.status, ==, 0);
    cJSON *j = cJSON_Parse(p.out);
    const cJSON *c;
    guint found = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(j, "classes")) {
      if (strcmp(cJSON_GetObjectItemCaseSensitive(c, "class")->valuestring, "overlap") != 0)
        continue;
      found++;
      g_assert_cmpfloat(cJSON_GetObjectItemCaseSensitive(c, "count")->valuedouble, ==, 5);
      const char *what = cJSON_GetObjectItemCaseSensitive(c, "what")->valuestring;
      g_assert_true(strcmp(what, "gemm beside the holder") == 0 || strcmp(what, "copy beside the holder") == 0);
    }
    g_assert_cmpuint(found, ==, 2);
    cJSON_Delete(j);
    proc_clear(&p);
    g_free(args);
  }
  model_profile_free(a);

  /* malformed runs, each one way, in the file's last copy run or its all-reduce run */
  static const struct {
    int item; /* 0: the first copy run, 5: the all-reduce run */
    const char *key, *value, *expect;
  } cases[] = {
      {0, "with", "\"nvlink\"", "overlap[0].'with' must be \"copy\""},
      {0, "dtype", "\"fp16\"", "overlap[0].'dtype' must be \"bf16\""},
      {0, "blocks", "108", "overlap[0].'blocks' must be fewer than the device's SMs"},
      {0, "gemm_beside_us", "-1", "overlap[0].'gemm_beside_us' is -1, outside"},
      {0, "mem_us", NULL, "overlap[0].'mem_us' is missing"},
      {0, "moved_GBps", "\"fast\"", "overlap[0].'moved_GBps' must be a number"},
      {5, "ranks", "1", "overlap[5].'ranks' must be at least 2"},
      {5, "bytes", NULL, "overlap[5].'bytes' is missing"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases) + 3; i++) {
    cJSON *r = cJSON_Duplicate(root, TRUE);
    cJSON *l = cJSON_GetObjectItemCaseSensitive(r, "overlap"), *o;
    const char *expect;
    if (i < G_N_ELEMENTS(cases)) {
      o = cJSON_GetArrayItem(l, cases[i].item);
      if (cases[i].value)
        cJSON_ReplaceItemInObjectCaseSensitive(o, cases[i].key, cJSON_Parse(cases[i].value));
      else
        cJSON_DeleteItemFromObjectCaseSensitive(o, cases[i].key);
      expect = cases[i].expect;
    } else if (i == G_N_ELEMENTS(cases)) { /* the GEMM no slower beside any holder */
      cJSON_ArrayForEach(o, l) cJSON_ReplaceItemInObjectCaseSensitive(o, "gemm_beside_us", cJSON_CreateNumber(1400));
      expect = "SMs taken per holder block";
    } else if (i == G_N_ELEMENTS(cases) + 1) { /* the probe no slower beside any holder */
      cJSON_ArrayForEach(o, l) if (cJSON_GetObjectItemCaseSensitive(o, "mem_beside_us")) /* the copy runs' */
          cJSON_ReplaceItemInObjectCaseSensitive(o, "mem_beside_us", cJSON_CreateNumber(700));
      expect = "HBM bytes displaced per byte the holder moves";
    } else {
      cJSON_ReplaceItemInObjectCaseSensitive(r, "overlap", cJSON_CreateString("none"));
      expect = "'overlap' must be a list";
    }
    text = cJSON_Print(r);
    g_assert_true(g_file_set_contents(bad, text, -1, NULL));
    cJSON_free(text);
    cJSON_Delete(r);
    char *before = NULL, *after = NULL;
    g_assert_true(g_file_get_contents(prof, &before, NULL, NULL));
    args = g_strdup_printf("fit %s -o %s", bad, prof);
    p = run(bin, args);
    expect_one_line_error(&p, expect);
    g_assert_true(g_file_get_contents(prof, &after, NULL, NULL));
    g_assert_cmpstr(before, ==, after);
    g_free(before);
    g_free(after);
    g_free(args);
  }
  cJSON_Delete(root);
  g_unlink(meas);
  g_unlink(prof);
  g_unlink(bad);
  g_free(meas);
  g_free(prof);
  g_free(bad);
}

static void test_cli_compare(void) {
  const char *bin = g_getenv("PTDSIM_BIN");
  if (!bin) {
    g_test_skip("PTDSIM_BIN is not set");
    return;
  }
  char *meas = tmp_path("cmp-meas.json"), *prof = tmp_path("cmp-prof.json");
  char *args = g_strdup_printf("fit --synthesize a100-sxm4-80gb --noise 0.02 --seed 9 -o %s", meas);
  Proc p = run(bin, args);
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "12 layers")); /* six 2021 layers and six of today's in bf16 */
  proc_clear(&p);
  g_free(args);
  args = g_strdup_printf("fit %s -o %s", meas, prof);
  p = run(bin, args);
  g_assert_cmpint(p.status, ==, 0);
  proc_clear(&p);
  g_free(args);
  args = g_strdup_printf("fit --compare %s --profile %s", meas, prof);
  p = run(bin, args);
  g_assert_cmpint(p.status, ==, 0);
  g_assert_cmpstr(p.err, ==, "");
  const char *want[] = {"h=12288 a=96 s=2048 b=1 t=8", "h=2304 a=24 s=2048 b=4 t=1", "h=6144 a=48 s=2048 b=4 t=8",
                        "recompute", "backward", "36 rows: median |error|", "grid.wave", "grid.k",
                        "gpt bf16 flash h=12288 a=96 g=96 s=2048 b=1 t=8 sp", "cublaslt", "cross_entropy"};
  for (guint i = 0; i < G_N_ELEMENTS(want); i++)
    g_assert_nonnull(strstr(p.out, want[i]));
  char *text = g_strdup(p.out);
  proc_clear(&p);
  p = run(bin, args); /* deterministic */
  g_assert_cmpstr(p.out, ==, text);
  g_free(text);
  proc_clear(&p);
  g_free(args);
  args = g_strdup_printf("fit --compare %s --profile %s --format json", meas, prof);
  p = run(bin, args);
  g_assert_cmpint(p.status, ==, 0);
  cJSON *j = cJSON_Parse(p.out);
  g_assert_nonnull(j);
  g_assert_cmpint(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "layer")), ==, 36);
  cJSON_Delete(j);
  proc_clear(&p);
  g_free(args);

  args = g_strdup_printf("fit --compare %s", meas);
  p = run(bin, args);
  expect_one_line_error(&p, "--profile");
  g_free(args);
  args = g_strdup_printf("fit --compare %s --profile ideal", meas);
  p = run(bin, args);
  expect_one_line_error(&p, "analytic");
  g_free(args);
  args = g_strdup_printf("fit --compare %s --profile %s -o %s", meas, prof, prof);
  p = run(bin, args);
  expect_one_line_error(&p, "--compare takes no");
  g_free(args);
  args = g_strdup_printf("fit --compare %s/nosuch.json --profile %s", tmpdir, prof);
  p = run(bin, args);
  expect_one_line_error(&p, "nosuch.json");
  g_free(args);
  args = g_strdup_printf("fit --compare %s --profile %s --dtype fp8", meas, prof);
  p = run(bin, args);
  expect_one_line_error(&p, "--dtype");
  g_free(args);
  args = g_strdup_printf("fit --synthesize a100-sxm4-80gb --shapes 1:2:3 -o %s", meas);
  p = run(bin, args);
  expect_one_line_error(&p, "HIDDEN:HEADS:SEQ:MICRO_BATCH:TP");
  g_free(args);
  args = g_strdup_printf("fit --synthesize a100-sxm4-80gb --shapes sc21 --hidden 4096 -o %s", meas);
  p = run(bin, args);
  expect_one_line_error(&p, "not both");
  g_free(args);
  /* --base and --check-facts: one-line errors */
  args = g_strdup_printf("fit %s --base nosuch -o %s/b.json", meas, tmpdir);
  p = run(bin, args);
  expect_one_line_error(&p, "--base: no profile named 'nosuch'");
  g_free(args);
  /* facts in the measurements format are checked as --compare checks them */
  args = g_strdup_printf("fit --check-facts %s --profile %s --format json", meas, prof);
  p = run(bin, args);
  g_assert_cmpint(p.status, ==, 0);
  g_free(args);
  args = g_strdup_printf("fit --compare %s --profile %s --format json", meas, prof);
  Proc pc = run(bin, args);
  g_assert_cmpint(pc.status, ==, 0);
  g_assert_cmpstr(p.out, ==, pc.out);
  proc_clear(&p);
  proc_clear(&pc);
  g_free(args);
  args = g_strdup_printf("fit --check-facts %s", meas);
  p = run(bin, args);
  expect_one_line_error(&p, "--check-facts needs --profile");
  g_free(args);
  args = g_strdup_printf("fit --check-facts %s --compare %s --profile %s", meas, meas, prof);
  p = run(bin, args);
  expect_one_line_error(&p, "not both");
  g_free(args);
  /* The committed PyTorch facts against the published H100 profile: every row, its kinds summed up,
   * the text table naming its floors */
  char *facts = g_build_filename(g_getenv("PTDSIM_DATA_DIR"), "calibrate", "measurements", "h100-kernels-pytorch.json",
                                 NULL);
  args = g_strdup_printf("fit --check-facts %s --profile h100-sxm5-80gb --format json", facts);
  p = run(bin, args);
  g_assert_cmpint(p.status, ==, 0);
  cJSON *fj = cJSON_Parse(p.out);
  g_assert_nonnull(fj);
  cJSON *fl = NULL;
  g_assert_true(g_file_get_contents(facts, &text, NULL, NULL));
  fl = cJSON_Parse(text);
  g_free(text);
  g_assert_nonnull(fl);
  /* a row per attention pass, per GEMM, per memory-bound kernel of the file */
  int want_rows = 2 * cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(fl, "attention")) +
                  cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(fl, "gemm")) +
                  cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(fl, "membound"));
  cJSON_Delete(fl);
  g_assert_cmpint(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(fj, "rows")), ==, want_rows);
  guint bounded = 0, kinds = 0;
  const cJSON *k;
  cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(fj, "summary")) {
    kinds++;
    bounded += (guint)num(k, "bounded");
    g_assert_cmpfloat(num(k, "median_abs_error"), >=, 0);
  }
  g_assert_cmpuint(kinds, ==, 7);
  g_assert_cmpuint(bounded, >, 0); /* short attention timings at the host floor */
  cJSON_Delete(fj);
  proc_clear(&p);
  g_free(args);
  args = g_strdup_printf("fit --check-facts %s --profile h100-sxm5-80gb", facts);
  p = run(bin, args);
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "host floor"));
  g_assert_nonnull(strstr(p.out, "gemm fp8 (split accumulation)"));
  g_assert_nonnull(strstr(p.out, " <="));
  proc_clear(&p);
  g_free(args);
  g_free(facts);
  args = g_strdup_printf("fit --synthesize a100-sxm4-80gb --shapes 4096:32:2048:2:4,2304:24:1024:1:1 -o %s", meas);
  p = run(bin, args);
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "4 layers"));
  proc_clear(&p);
  g_free(args);
  g_unlink(meas);
  g_unlink(prof);
  g_free(meas);
  g_free(prof);
}

/* The harness's --dry-run prints the plan and needs no GPU. */
static void test_calibrate_dry_run(void) {
  const char *bin = g_getenv("PTDSIM_CALIBRATE_BIN");
  if (!bin || !*bin) {
    g_test_skip("ptdsim-calibrate is not built here (no nvcc)");
    return;
  }
  Proc p = run(bin, "--dry-run");
  g_assert_cmpint(p.status, ==, 0);
  char *gemm_line = g_strdup_printf("gemm: %u shapes", default_plan_gemms());
  g_assert_nonnull(strstr(p.out, gemm_line));
  g_assert_nonnull(strstr(p.out, "nccl: all_reduce"));
  g_assert_nonnull(strstr(p.out, "membw:"));
  g_assert_nonnull(strstr(p.out, "layer:"));
  g_free(gemm_line);
  proc_clear(&p);
  p = run(bin, "--dry-run --mode nccl --gpus 4");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_null(strstr(p.out, "gemm:"));
  g_assert_nonnull(strstr(p.out, "on 2, 4 GPUs"));
  proc_clear(&p);
  p = run(bin, "--dry-run --mode gemm --heads 96 --tp 5");
  expect_one_line_error(&p, "--tp");
  p = run(bin, "--dry-run --mode tensor");
  expect_one_line_error(&p, "unknown mode 'tensor'");
  /* The default run: well under the device's 10-minute call limit. */
  p = run(bin, "--dry-run --gpus 1");
  g_assert_cmpint(p.status, ==, 0);
  const char *est = strstr(p.out, "estimated wall time: at most about ");
  g_assert_nonnull(est);
  double seconds = g_ascii_strtod(est + strlen("estimated wall time: at most about "), NULL);
  g_assert_cmpfloat(seconds, >, 10);
  g_assert_cmpfloat(seconds, <, 300);
  g_assert_nonnull(strstr(p.out, "single-rank"));
  g_assert_nonnull(strstr(p.out, "plan for 6 layer shapes"));
  g_assert_nonnull(strstr(p.out, "h=2304 a=24 s=2048 b=4 t=1"));
  proc_clear(&p);
  /* The sustained mode: its loop's seconds are in the plan and its estimate;
   * a loop of no time is refused. */
  double est_s[2];
  for (int i = 0; i < 2; i++) {
    p = run(bin, i ? "--dry-run --mode sustained --sustained-seconds 100" : "--dry-run --mode sustained");
    g_assert_cmpint(p.status, ==, 0);
    g_assert_nonnull(strstr(p.out, i ? "then 100 s of back-to-back chunks" : "then 20 s of back-to-back chunks"));
    g_assert_null(strstr(p.out, "gemm:"));
    est = strstr(p.out, "estimated wall time: at most about ");
    g_assert_nonnull(est);
    est_s[i] = g_ascii_strtod(est + strlen("estimated wall time: at most about "), NULL);
    proc_clear(&p);
  }
  g_assert_cmpfloat(fabs(est_s[1] - est_s[0] - 80), <=, 1); /* the estimate prints whole seconds */
  p = run(bin, "--dry-run --mode sustained --sustained-seconds 0");
  expect_one_line_error(&p, "--sustained-seconds 0 is out of range");
  /* power limits: one loop under each, set and restored (on a GPU, as root) */
  p = run(bin, "--dry-run --mode sustained --power-limits 700,500.5");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "one loop under each power limit, set through NVML (root only) and restored after: "
                                 "700 W 500.5 W"));
  proc_clear(&p);
  p = run(bin, "--dry-run --mode gemm --power-limit 500");
  expect_one_line_error(&p, "add sustained to --mode");
  p = run(bin, "--dry-run --mode gemm --overlap-blocks 8");
  expect_one_line_error(&p, "add overlap to --mode");
  p = run(bin, "--dry-run --mode sustained --overlap-ms 500");
  expect_one_line_error(&p, "add overlap to --mode");
  p = run(bin, "--dry-run --mode sustained --power-limit 500,400");
  expect_one_line_error(&p, "--power-limit '500,400' is not a number");
  p = run(bin, "--dry-run --mode sustained --power-limits 700,hot");
  expect_one_line_error(&p, "--power-limits '700,hot'");
  p = run(bin, "--dry-run --mode sustained --power-limits 0");
  expect_one_line_error(&p, "--power-limits '0'");
  p = run(bin, "--dry-run --mode sustained --power-limit 500 --power-limits 400");
  expect_one_line_error(&p, "not both");
  /* the overlap mode: its block counts and window as given */
  p = run(bin, "--dry-run --mode overlap --gpus 2 --overlap-blocks 8,24 --overlap-ms 500");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "a 500 ms window alone and beside a holder kernel of 8, 24 thread blocks"));
  g_assert_nonnull(strstr(p.out, "over 2 GPUs"));
  proc_clear(&p);
  p = run(bin, "--dry-run --mode overlap --overlap-blocks 8,x");
  expect_one_line_error(&p, "--overlap-blocks '8,x'");
  p = run(bin, "--dry-run --mode overlap --overlap-ms 5");
  expect_one_line_error(&p, "--overlap-ms 5 is out of range");
  p = run(bin, "--dry-run --mode layer --shapes 2304:24:2048:1:1,6144:48:2048:4:8");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "plan for 2 layer shapes"));
  g_assert_nonnull(strstr(p.out, "h=6144 a=48 s=2048 b=4 t=8"));
  proc_clear(&p);
  p = run(bin, "--dry-run --shapes 2304:24:2048:1");
  expect_one_line_error(&p, "--shapes");
  p = run(bin, "--dry-run --shapes sc21 --tp 2");
  expect_one_line_error(&p, "not both");
  p = run(bin, "--dry-run --shapes 2304:24:2048:1:5");
  expect_one_line_error(&p, "--tp");
  /* Today's modes over the presets: each listed, each preset under 5 minutes on one GPU. */
  static const char *presets[] = {"llama3", "gpt3"};
  for (guint i = 0; i < G_N_ELEMENTS(presets); i++) {
    char *a = g_strdup_printf("--dry-run --gpus 1 --mode gemmlt,attention,membound,modern --shapes %s", presets[i]);
    p = run(bin, a);
    g_free(a);
    g_assert_cmpint(p.status, ==, 0);
    CalibPlanConfig cfg;
    calib_plan_config_default(&cfg);
    g_assert_true(calib_plan_parse_shapes(presets[i], &cfg, NULL));
    CalibPlan *plan = calib_plan_new(&cfg, NULL);
    char *line = g_strdup_printf("gemmlt: %u GEMMs x {bf16, fp8", plan->gemmlt->len);
    g_assert_nonnull(strstr(p.out, line));
    g_free(line);
    line = g_strdup_printf("attention: %u configurations of cuDNN's fused flash attention", plan->attention->len);
    g_assert_nonnull(strstr(p.out, line));
    g_free(line);
    line = g_strdup_printf("membound: %u memory-bound kernels", plan->membound->len);
    g_assert_nonnull(strstr(p.out, line));
    g_free(line);
    g_assert_nonnull(strstr(p.out, "modern: each shape's whole layer"));
    g_assert_nonnull(strstr(p.out, " fp8 "));
    g_assert_null(strstr(p.out, "\ngemm:")); /* the 2021 modes not asked for */
    est = strstr(p.out, "estimated wall time: at most about ");
    g_assert_nonnull(est);
    seconds = g_ascii_strtod(est + strlen("estimated wall time: at most about "), NULL);
    g_test_message("%s: %.0f s", presets[i], seconds);
    g_assert_cmpfloat(seconds, <, 300);
    calib_plan_free(plan);
    proc_clear(&p);
  }
  p = run(bin, "--dry-run --shapes 8192:64:8192:1:8:3:28672:0:llama");
  expect_one_line_error(&p, "key/value heads");
  p = run(bin, "--dry-run --shapes 8192:64:8192:1:8:8:28672:0:mamba");
  expect_one_line_error(&p, "STYLE");
}

/* Two generations of memory-bound kernels in one file: measurements made
 * by a profile whose 2021 kernels run at other rates than today's
 * (membound_2021) give both back when fitted without noise, today's
 * classes from today's kernels alone, the 2021 ones apart. */
static void test_fit_two_generations(void) {
  ModelProfile *g = load_profile("h100-sxm5-80gb-measured");
  g_assert_true(g->has_membound_2021);
  CalibPlan *plan = default_plan();
  GError *error = NULL;
  TopoCluster *cl = topo_cluster_load("dgx-h100-superpod", &error);
  g_assert_no_error(error);
  ModelNet net = {.hw = cl->net};
  CalibMeasurements *m = calib_synthesize(g, &net, plan, 0, 1);
  topo_cluster_free(cl);
  char *bpath = ptd_data_resolve("calibrate/profiles", "h100-sxm5-80gb", "profile", &error);
  cJSON *base_json = ptd_json_load(bpath, &error);
  ModelProfile *base = model_profile_from_json(base_json, bpath, &error);
  g_assert_nonnull(base);
  CalibFitOptions o = {.name = "two", .measurements_path = "synthetic.json", .base = base, .base_json = base_json};
  cJSON *j = calib_fit(m, &o, &error);
  model_profile_free(base);
  cJSON_Delete(base_json);
  g_free(bpath);
  g_assert_no_error(error);
  const cJSON *f21 = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "fit"), "membound_2021");
  g_assert_nonnull(f21);
  static const char *cls[] = {"norm", "pointwise", "activation"};
  for (guint i = 0; i < G_N_ELEMENTS(cls); i++) {
    ModelMemClass c = model_mem_class_lookup(cls[i]);
    const cJSON *pm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(f21, cls[i]), "parameters");
    double hbm21 = field(pm, "hbm_GBps", "value"), hbm = mparam(j, cls[i], "hbm_GBps", "value");
    g_test_message("%s: today's %.6g GB/s (truth %.6g), 2021's %.6g (truth %.6g)", cls[i], hbm,
                   g->mem_hbm_bytes_per_s[c] / 1e9, hbm21, g->mem_2021_hbm_bytes_per_s[c] / 1e9);
    g_assert_cmpfloat(fabs(hbm - g->mem_hbm_bytes_per_s[c] / 1e9), <=, 2e-5 * g->mem_hbm_bytes_per_s[c] / 1e9);
    g_assert_cmpfloat(fabs(hbm21 - g->mem_2021_hbm_bytes_per_s[c] / 1e9), <=,
                      2e-5 * g->mem_2021_hbm_bytes_per_s[c] / 1e9);
    g_assert_cmpfloat(fabs(field(pm, "gap_us", "value") - g->mem_2021_gap_s[c] * 1e6), <=,
                      2e-5 * g->mem_2021_gap_s[c] * 1e6 + 1e-6);
  }
  /* the profile it writes loads, with both blocks */
  ModelProfile *back = model_profile_from_json(j, "two", &error);
  g_assert_no_error(error);
  g_assert_true(back->has_membound && back->has_membound_2021);
  model_profile_free(back);
  cJSON_Delete(j);
  calib_measurements_free(m);
  calib_plan_free(plan);
  model_profile_free(g);
}

/* The shipped measured profiles are what `ptdsim fit` makes of the committed
 * files (byte for byte: the fit is deterministic and its provenance dates
 * are the measurements'), and they reproduce those files: today's layers,
 * each GEMM dtype, flash attention, and PyTorch's FP8 GEMMs, an
 * independent source the fit never saw. */
static void test_shipped_measured_profiles(void) {
  static const struct {
    const char *profile, *base, *fitted[4], *today[2], *pytorch_fp8, *sustained;
  } gpus[] = {
      {"h100-sxm5-80gb-measured", "h100-sxm5-80gb",
       {"h100-sxm5-80gb-sc21-today.json", "h100-sxm5-80gb-llama3.json", "h100-sxm5-80gb-gpt3.json",
        "h100-sxm5-80gb-sustained.json"},
       {"h100-sxm5-80gb-llama3.json", "h100-sxm5-80gb-gpt3.json"}, "h100-fp8-gemms-pytorch.json",
       "h100-sxm5-80gb-sustained.json"},
      {"h200-sxm-141gb-measured", "h200-sxm-141gb",
       {"h200-sxm-141gb-sc21.json", "h200-sxm-141gb-llama3.json", "h200-sxm-141gb-gpt3.json", NULL},
       {"h200-sxm-141gb-llama3.json", "h200-sxm-141gb-gpt3.json"}, "h200-fp8-gemms-pytorch.json", NULL},
  };
  const char *bin = g_getenv("PTDSIM_BIN"), *data = g_getenv("PTDSIM_DATA_DIR");
  char *tmpdir = test_tmp_dir("ptdsim-shipped");
  for (guint g = 0; g < G_N_ELEMENTS(gpus); g++) {
    char *dir = g_build_filename(data, "calibrate", "measurements", NULL);
    char *out = g_build_filename(tmpdir, "refit.json", NULL);
    /* from the repository's root, as doc/calibration.md's commands run: the
     * profile names its measurements by the paths it was given */
    GString *files = g_string_new(NULL);
    for (guint f = 0; f < G_N_ELEMENTS(gpus[g].fitted) && gpus[g].fitted[f]; f++)
      g_string_append_printf(files, "calibrate/measurements/%s ", gpus[g].fitted[f]);
    char *args = g_strdup_printf("fit %s--base %s --name %s -o %s", files->str, gpus[g].base, gpus[g].profile, out);
    g_string_free(files, TRUE);
    char *cwd = g_get_current_dir();
    g_assert_cmpint(g_chdir(data), ==, 0);
    Proc p = run(bin, args);
    g_assert_cmpint(g_chdir(cwd), ==, 0);
    g_free(cwd);
    g_assert_cmpint(p.status, ==, 0);
    proc_clear(&p);
    char *shipped_path = g_strdup_printf("%s/calibrate/profiles/%s.json", data, gpus[g].profile);
    char *refit = NULL, *shipped = NULL;
    g_assert_true(g_file_get_contents(out, &refit, NULL, NULL));
    g_assert_true(g_file_get_contents(shipped_path, &shipped, NULL, NULL));
    g_assert_true(strcmp(refit, shipped) == 0); /* (not cmpstr: a profile is 100 KB) */
    g_free(refit);
    g_free(shipped);
    g_unlink(out);
    ModelProfile *prof = load_profile(gpus[g].profile);
    GError *error = NULL;
    for (guint f = 0; f < G_N_ELEMENTS(gpus[g].today); f++) {
      char *path = g_build_filename(dir, gpus[g].today[f], NULL);
      CalibMeasurements *m = calib_measurements_load(path, &error);
      g_assert_no_error(error);
      cJSON *c = calib_compare(m, prof, &error);
      g_assert_no_error(error);
      const cJSON *ls = cJSON_GetObjectItemCaseSensitive(c, "layer_summary");
      g_test_message("%s on %s: layers median %.2f%%, max %.2f%%", gpus[g].profile, gpus[g].today[f],
                     100 * num(ls, "median_abs_error"), 100 * num(ls, "max_abs_error"));
      g_assert_cmpfloat(num(ls, "rows"), >=, 18);
      g_assert_cmpfloat(num(ls, "median_abs_error"), <=, 0.03);
      g_assert_cmpfloat(num(ls, "max_abs_error"), <=, 0.10);
      g_assert_cmpfloat(num(compare_class(c, "gemm bf16", "all"), "median_abs_error"), <=, 0.03);
      g_assert_cmpfloat(num(compare_class(c, "gemm fp8", "forward (fast accumulation)"), "median_abs_error"), <=,
                        0.03);
      g_assert_cmpfloat(num(compare_class(c, "gemm fp8", "gradient (split accumulation)"), "median_abs_error"), <=,
                        0.03);
      g_assert_cmpfloat(num(compare_class(c, "attention", "forward"), "median_abs_error"), <=, 0.08);
      g_assert_cmpfloat(num(compare_class(c, "attention", "backward"), "median_abs_error"), <=, 0.08);
      cJSON_Delete(c);
      calib_measurements_free(m);
      g_free(path);
    }
    char *path = g_build_filename(dir, gpus[g].pytorch_fp8, NULL);
    CalibMeasurements *m = calib_measurements_load(path, &error);
    g_assert_no_error(error);
    cJSON *c = calib_compare(m, prof, &error);
    g_assert_no_error(error);
    const cJSON *fp8 = compare_class(c, "gemm fp8", "forward (fast accumulation)");
    g_test_message("%s on %s: FP8 GEMMs median %.2f%%", gpus[g].profile, gpus[g].pytorch_fp8,
                   100 * num(fp8, "median_abs_error"));
    g_assert_cmpfloat(num(fp8, "count"), ==, m->gemm->len);
    g_assert_cmpfloat(num(fp8, "median_abs_error"), <=, 0.05);
    cJSON_Delete(c);
    calib_measurements_free(m);
    g_free(path);
    if (gpus[g].sustained) {
      /* the profile's sustained clock is the loop's settled rate over the
       * profile's own burst rate for that GEMM, the launch gap left out; it
       * brings the settled rate nearer than the burst clock does */
      path = g_build_filename(dir, gpus[g].sustained, NULL);
      m = calib_measurements_load(path, &error);
      g_assert_no_error(error);
      const CalibSustained *x = &g_array_index(m->sustained, CalibSustained, 0);
      double flops = 2.0 * (double)x->m * (double)x->n * (double)x->k;
      ModelProfile burst = *prof;
      burst.sustained_clock_ratio = 1;
      ModelGemm mg = {1, x->m, x->n, x->k};
      double tb = model_gemm_time_s(&burst, &mg), ts = flops / (calib_sustained_tflops(x) * 1e12);
      g_assert_cmpfloat_with_epsilon(prof->sustained_clock_ratio,
                                     (tb - prof->kernel_launch_s) / (ts - prof->kernel_launch_s), 5e-6);
      c = calib_compare(m, prof, &error);
      g_assert_no_error(error);
      const cJSON *sus = compare_class(c, "sustained gemm", "settled, at the sustained clock");
      double at_burst = model_gemm_time_s(&burst, &mg) / ts - 1;
      g_test_message("%s on %s: settled rate %.1f%% off (%.1f%% at the burst clock)", gpus[g].profile,
                     gpus[g].sustained, 100 * num(sus, "max_abs_error"), 100 * fabs(at_burst));
      g_assert_cmpfloat(num(sus, "count"), ==, 1);
      g_assert_cmpfloat(num(sus, "max_abs_error"), <, fabs(at_burst));
      cJSON_Delete(c);
      calib_measurements_free(m);
      g_free(path);
    }
    model_profile_free(prof);
    g_free(args);
    g_free(out);
    g_free(shipped_path);
    g_free(dir);
  }
  test_rm_rf(tmpdir);
  g_free(tmpdir);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  GError *error = NULL;
  tmpdir = test_tmp_dir("ptdsim-test-calibrate");
  g_assert_no_error(error);
  g_test_add_func("/calibrate/plan-layer-flops", test_plan_layer_flops);
  g_test_add_func("/calibrate/collective-sizes", test_coll_sizes);
  g_test_add_func("/calibrate/nccl-ranks", test_nccl_ranks);
  g_test_add_func("/calibrate/time-statistics", test_time_statistics);
  g_test_add_func("/calibrate/measurements-round-trip", test_measurements_round_trip);
  g_test_add_func("/calibrate/bad-files", test_bad_files);
  g_test_add_func("/calibrate/fit-exact-without-noise", test_fit_exact_without_noise);
  g_test_add_func("/calibrate/fit-recovers-within-stderr", test_fit_recovers_within_stderr);
  g_test_add_func("/calibrate/fit-not-converged", test_fit_not_converged);
  g_test_add_func("/calibrate/round-trip-predictions", test_round_trip_predictions);
  g_test_add_func("/calibrate/measured-collectives-in-model", test_measured_collectives_in_model);
  g_test_add_func("/calibrate/cli-fit", test_cli_fit);
  g_test_add_func("/calibrate/calibrate-dry-run", test_calibrate_dry_run);
  g_test_add_func("/calibrate/plan-sustained", test_plan_sustained);
  g_test_add_func("/calibrate/plan-overlap", test_plan_overlap);
  g_test_add_func("/calibrate/fit-overlap-exact", test_fit_overlap_exact);
  g_test_add_func("/calibrate/overlap-contention", test_overlap_contention);
  g_test_add_func("/calibrate/cli-overlap", test_cli_overlap);
  g_test_add_func("/calibrate/fit-power-block", test_fit_power_block);
  g_test_add_func("/calibrate/fit-no-power-block", test_fit_no_power_block);
  g_test_add_func("/calibrate/gemm-index", test_gemm_index);
  g_test_add_func("/calibrate/fit-single-rank", test_fit_single_rank);
  g_test_add_func("/calibrate/synth-layers", test_synth_layers);
  g_test_add_func("/calibrate/compare", test_compare);
  g_test_add_func("/calibrate/fit-today-exact", test_fit_today_exact);
  g_test_add_func("/calibrate/fit-today-within-stderr", test_fit_today_within_stderr);
  g_test_add_func("/calibrate/fit-part-with-base", test_fit_part_with_base);
  g_test_add_func("/calibrate/cli-compare", test_cli_compare);
  g_test_add_func("/calibrate/shipped-measured-profiles", test_shipped_measured_profiles);
  g_test_add_func("/calibrate/fit-two-generations", test_fit_two_generations);
  g_test_add_func("/calibrate/fit-classes-without-copies", test_fit_classes_without_copies);
  int rc = g_test_run();
  GDir *d = g_dir_open(tmpdir, 0, NULL);
  const char *e;
  while (d && (e = g_dir_read_name(d))) {
    char *f = g_build_filename(tmpdir, e, NULL);
    g_unlink(f);
    g_free(f);
  }
  if (d)
    g_dir_close(d);
  g_rmdir(tmpdir);
  g_free(tmpdir);
  return rc;
}
