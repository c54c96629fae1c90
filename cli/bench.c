/* ptdsim bench — the simulator's own speed.  Prints events per second,
 * CPU seconds per configuration and peak memory for the SC21 Table 1 rows,
 * then the speed targets: CPU seconds on one core for the 1T row (analytic
 * and flow network) and GPT-3 175B on 96 GPUs (analytic), and plan's
 * configurations per second for GPT-3 175B on 1024 GPUs.  --moe: DeepSeek-V3
 * with DualPipe and 1F1B on the flow network. */
#include <errno.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../base/text.h"
#include "../traces/figures.h"
#include "../models/slicing.h"
#include "../search/planner.h"
#include "../search/pool.h"
#include "../search/sweep.h"
#include "../traces/terapipe_figs.h"
#include "../terapipe/terapipe.h"
#include "cli.h"
#include "../ptdp/ptdp.h"
#include "../plan/validate.h"

/* CPU seconds of the calling thread: the runs timed here are
 * single-threaded, so this is their time on one core, whatever else the
 * machine is doing. */
static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The fastest of `repeat` runs of `req` (network overridden when given), in
 * CPU seconds; the result of the last in `r`. */
static gboolean time_run(const SimPlanRequest *req, const TopoCluster *cluster, const ModelProfile *profile,
                         guint repeat, SimResult *r, double *best, GError **error) {
  SimPlan plan;
  if (!sim_plan_build(req, cluster, &plan, error))
    return FALSE;
  *best = G_MAXDOUBLE;
  for (guint i = 0; i < repeat; i++) {
    double t0 = cpu_seconds();
    if (!sim_ptdp_run(&plan, profile, cluster, r, error))
      return FALSE;
    *best = MIN(*best, cpu_seconds() - t0);
  }
  return TRUE;
}

static double peak_rss_mib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0; /* Linux reports KiB */
}

/* Today's scale: Llama 3 70B (t 8, p 4, four microbatches per pipeline) on
 * a DGX H100 SuperPOD grown to 65,536, 131,072 and 262,144 GPUs, on the flow
 * network, each timed whole (cluster, link graph, routes, plan and run) on
 * one core.  Rows go up in size, so the process's peak RSS after a row is
 * that row's. */
static int bench_scale(void) {
  printf("%-44s %12s %10s %12s\n", "Llama 3 70B, flow network", "CPU s", "ops", "peak RSS MiB");
  for (guint nodes = 8192; nodes <= 32768; nodes *= 2) {
    GError *error = NULL;
    double t0 = cpu_seconds();
    TopoCluster *cluster = NULL;
    ModelProfile *profile = NULL;
    if (!cli_load_machine_sized("dgx-h100-superpod", nodes, NULL, &cluster, &profile, &error))
      return cli_fail(error);
    SimPlanRequest req = {.gpus = nodes * 8, .tp = 8, .pp = 4, .micro_batch = 1, .network = SIM_NETWORK_FLOW,
                          .network_given = TRUE, .distributed_optimizer = TRUE};
    req.global_batch = 4 * (req.gpus / 32);
    model_lookup("llama3-70b", &req.model);
    SimPlan plan;
    SimResult r;
    gboolean ok = sim_plan_build(&req, cluster, &plan, &error) && sim_ptdp_run(&plan, profile, cluster, &r, &error);
    double secs = cpu_seconds() - t0;
    topo_cluster_free(cluster);
    model_profile_free(profile);
    if (!ok)
      return cli_fail(error);
    char label[64];
    g_snprintf(label, sizeof label, "%u H100s (%u nodes), B %u", req.gpus, nodes, req.global_batch);
    printf("%-44s %12.3f %10" G_GUINT64_FORMAT " %12.0f\n", label, secs, r.ops, peak_rss_mib());
  }
  return 0;
}

/* TeraPipe figure 5: 10 settings, each a GPipe baseline (over its microbatch
 * sizes) and a TeraPipe run with the joint DP, on aws-p3-16xlarge. */
static double bench_fitted(guint len, guint start, gpointer data) { return model_slice_cost_eval(data, len, start); }

static int bench_terapipe(guint repeat) {
  GError *error = NULL;
  TopoCluster *cluster = NULL;
  ModelProfile *profile = NULL;
  const TraceFigure *fig = trace_figure_lookup("terapipe-fig5");
  if (!cli_load_machine(fig->default_cluster, NULL, &cluster, &profile, &error))
    return cli_fail(error);
  double best = G_MAXDOUBLE;
  int code = 0;
  for (guint i = 0; i < repeat && !code; i++) {
    TraceFigureContext ctx = {cluster, profile, NULL, NULL, TRACE_FIGURE_SIMULATE, NULL, fig->name, 0, NULL};
    TraceFigureOut out;
    trace_figure_out_init(&out, fig->name);
    gint64 t0 = g_get_monotonic_time();
    if (!fig->run(&ctx, &out, &error))
      code = cli_fail(error);
    best = MIN(best, (g_get_monotonic_time() - t0) * 1e-6);
    trace_figure_out_clear(&out);
  }
  /* The slicing DP alone at L = 2048 (setting 9's cell, one sequence), on
   * the paper's granularity of 8 tokens and on single tokens. */
  SimPlanRequest req;
  SimPlan plan;
  if (!code && (!trace_terapipe_setting(9, "auto", 1, &req, &error) || !sim_plan_build(&req, cluster, &plan, &error)))
    code = cli_fail(error);
  for (guint g = 8; !code && g >= 1; g = g == 8 ? 1 : 0) {
    ModelNet net = {.hw = cluster->net};
    ModelCell cell = {profile, &plan.model, &net, plan.tp, 1, plan.model.layers / plan.pp, TRUE, TRUE, TRUE, TRUE, {0}};
    ModelSliceCost cost;
    if (!model_slice_cost_fit(&cell, 1, plan.model.seq_len, g, &cost, &error)) {
      code = cli_fail(error);
      break;
    }
    double dp_best = G_MAXDOUBLE;
    ModelSlicing sl = {0};
    for (guint i = 0; i < repeat; i++) {
      model_slicing_clear(&sl);
      gint64 t0 = g_get_monotonic_time();
      model_token_dp(cost.n, plan.pp, 1e-4, bench_fitted, &cost, &sl);
      dp_best = MIN(dp_best, (g_get_monotonic_time() - t0) * 1e-6);
    }
    printf("slicing DP, L = %u, granularity %u (n = %u), K = %u: %.4f s, %u t_max candidates solved, %u slices\n",
           plan.model.seq_len, g, cost.n, plan.pp, dp_best, sl.candidates_solved, sl.n_slices);
    model_slicing_clear(&sl);
    model_slice_cost_clear(&cost);
  }
  /* What --slices auto runs on setting 9: the context fits and cell and hop
   * tables of every batch-slice size, then the joint DP (models/slicing.h). */
  for (guint g = 8; !code && g >= 1; g = g == 8 ? 1 : 0) {
    plan.granularity = g;
    double choose_best = G_MAXDOUBLE;
    SimTeraPipeSlicing sl = {0};
    for (guint i = 0; i < repeat && !code; i++) {
      sim_terapipe_slicing_clear(&sl);
      gint64 t0 = g_get_monotonic_time();
      if (!sim_terapipe_choose(&plan, profile, cluster, &sl, &error))
        code = cli_fail(error);
      choose_best = MIN(choose_best, (g_get_monotonic_time() - t0) * 1e-6);
    }
    if (!code)
      printf("--slices auto (refined DP + fits, batch slices of 1..%u sequences), L = %u, granularity %u, K = %u: "
             "%.4f s, %u slices\n",
             plan.global_batch / plan.dp, plan.model.seq_len, g, plan.pp, choose_best,
             sim_terapipe_slicing_count(&sl));
    sim_terapipe_slicing_clear(&sl);
  }
  if (!code)
    printf("terapipe-fig5: %.3f s for 10 settings (GPipe over every microbatch size that fits, TeraPipe with the "
           "joint DP), fastest of %u, peak RSS %.0f MiB\n",
           best, repeat, peak_rss_mib());
  topo_cluster_free(cluster);
  model_profile_free(profile);
  return code;
}

/* Every figure three ways: simulated with its pictures and data written to
 * DIR/gallery (what `figure --all -o` does), simulated keeping every trace
 * in DIR/traces, and rebuilt from those traces into DIR/rebuilt; times,
 * configurations, trace sizes, peak memory, and whether the rebuilt CSV is
 * the direct one to the byte. */
typedef enum { FIG_DIRECT, FIG_SAVE, FIG_FROM } FigMode;

static gboolean bench_one(const TraceFigure *fig, FigMode mode, const char *dir, double *seconds, guint *runs,
                          char **csv, GError **error) {
  TopoCluster *cluster = NULL;
  ModelProfile *profile = NULL;
  if (!cli_load_machine(fig->default_cluster, NULL, &cluster, &profile, error))
    return FALSE;
  char *traces = g_build_filename(dir, "traces", NULL);
  char *out_dir = g_build_filename(dir, mode == FIG_FROM ? "rebuilt" : "gallery", NULL);
  TraceFigureContext ctx = {cluster, profile, NULL, NULL, TRACE_FIGURE_SIMULATE, NULL, fig->name, 0, NULL};
  if (mode != FIG_DIRECT) {
    ctx.mode = mode == FIG_SAVE ? TRACE_FIGURE_SAVE_TRACES : TRACE_FIGURE_FROM_TRACES;
    ctx.trace_dir = traces;
  }
  TraceFigureOut out;
  trace_figure_out_init(&out, fig->name);
  char **written = NULL;
  gint64 t0 = g_get_monotonic_time();
  gboolean ok = (mode != FIG_SAVE || g_mkdir_with_parents(traces, 0777) == 0) && fig->run(&ctx, &out, error) &&
                (mode == FIG_SAVE || trace_figure_write(&out, fig->name, out_dir, &written, error));
  *seconds = (g_get_monotonic_time() - t0) * 1e-6;
  *runs = ctx.runs;
  *csv = ok && mode != FIG_SAVE ? trace_figure_csv(out.rows) : NULL;
  g_strfreev(written);
  trace_figure_out_clear(&out);
  g_free(traces);
  g_free(out_dir);
  topo_cluster_free(cluster);
  model_profile_free(profile);
  return ok;
}

/* Bytes of the files in `dir` whose names start with `prefix` ("" all). */
static guint64 dir_bytes(const char *dir, const char *prefix) {
  guint64 total = 0;
  GDir *d = g_dir_open(dir, 0, NULL);
  const char *n;
  while (d && (n = g_dir_read_name(d))) {
    if (!g_str_has_prefix(n, prefix))
      continue;
    char *path = g_build_filename(dir, n, NULL);
    GStatBuf st;
    if (g_stat(path, &st) == 0)
      total += (guint64)st.st_size;
    g_free(path);
  }
  if (d)
    g_dir_close(d);
  return total;
}

static int bench_figures(const char *dir) {
  GError *error = NULL;
  guint n;
  const TraceFigure *figs = trace_figures(&n);
  if (g_mkdir_with_parents(dir, 0777) != 0) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "cannot create --figures '%s': %s", dir,
                g_strerror(errno));
    return cli_fail(error);
  }
  double *secs = g_new0(double, 3 * n), total[3] = {0, 0, 0}, peak_direct = 0;
  guint *runs = g_new0(guint, n), configs = 0, identical = 0;
  char **direct_csv = g_new0(char *, n + 1);
  gboolean *same = g_new0(gboolean, n);
  int code = 0;
  for (FigMode mode = FIG_DIRECT; mode <= FIG_FROM && !code; mode++) {
    for (guint i = 0; i < n && !code; i++) {
      char *csv = NULL;
      guint r;
      if (!bench_one(&figs[i], mode, dir, &secs[mode * n + i], &r, &csv, &error)) {
        code = cli_fail(error);
        break;
      }
      total[mode] += secs[mode * n + i];
      if (mode == FIG_DIRECT) {
        runs[i] = r;
        configs += r;
        direct_csv[i] = csv;
      } else if (mode == FIG_FROM) {
        same[i] = strcmp(csv, direct_csv[i]) == 0;
        identical += same[i];
        g_free(csv);
      }
    }
    if (mode == FIG_DIRECT)
      peak_direct = peak_rss_mib();
  }
  char *traces = g_build_filename(dir, "traces", NULL);
  if (!code) {
    printf("%-18s %7s %10s %10s %10s %10s  %s\n", "figure", "configs", "direct s", "save s", "from s", "traces MB",
           "rebuilt CSV");
    for (guint i = 0; i < n; i++) {
      char *prefix = g_strdup_printf("%s.", figs[i].name);
      printf("%-18s %7u %10.2f %10.2f %10.2f %10.1f  %s\n", figs[i].name, runs[i], secs[i], secs[n + i],
             secs[2 * n + i], dir_bytes(traces, prefix) / 1e6, same[i] ? "identical" : "DIFFERENT");
      g_free(prefix);
    }
    printf("all %u figures, %u configurations: direct %.1f s (peak RSS %.0f MiB), saving traces %.1f s (%.0f MB), "
           "from traces %.1f s; rebuilt CSV identical for %u of %u (peak RSS %.0f MiB)\n",
           n, configs, total[FIG_DIRECT], peak_direct, total[FIG_SAVE], dir_bytes(traces, "") / 1e6, total[FIG_FROM],
           identical, n, peak_rss_mib());
    if (identical != n)
      code = 1;
  }
  g_free(traces);
  g_strfreev(direct_csv);
  g_free(secs);
  g_free(runs);
  g_free(same);
  return code;
}

/* --- sweeps: configurations per second on one core and on all --- */

typedef struct {
  const SearchGrid *grid;
  guint64 count[SEARCH_SWEEP_N_STATUS];
} SweepBench;

static gpointer bench_row(guint k, gpointer user) {
  SweepBench *b = user;
  SearchSweepStatus *st = g_new(SearchSweepStatus, 1);
  g_free(search_sweep_row(b->grid, k, SEARCH_SWEEP_CSV, st)); /* the row is made, as a sweep makes it */
  return st;
}

static gboolean bench_take(guint k, gpointer result, gpointer user) {
  (void)k;
  SweepBench *b = user;
  b->count[*(SearchSweepStatus *)result]++;
  g_free(result);
  return TRUE;
}

/* Runs a grid given as command-line words with `jobs` threads; prints the
 * rate. */
static gboolean bench_grid(const char *label, const char *words, guint jobs, GError **error) {
  SearchGrid *g = search_grid_new();
  char **w = g_strsplit(words, " ", -1);
  gboolean ok = TRUE;
  for (guint i = 0; ok && w[i]; i += 2) {
    gint id = search_option_find(w[i] + 2);
    ok = id >= 0 && search_grid_add_option(g, (SearchOptId)id, w[i + 1], error);
  }
  g_strfreev(w);
  ok = ok && search_grid_prepare(g, error);
  if (ok) {
    SweepBench b = {g, {0}};
    guint64 n = search_grid_points(g);
    SearchPool pool = {(guint)n, 0, 1, jobs, bench_row, bench_take, g_free, &b, NULL};
    gint64 t0 = g_get_monotonic_time();
    search_pool_run(&pool);
    double secs = (g_get_monotonic_time() - t0) * 1e-6;
    printf("%-34s %2u thread%s %7" G_GUINT64_FORMAT " configurations (%" G_GUINT64_FORMAT " ok, %" G_GUINT64_FORMAT
           " out of memory, %" G_GUINT64_FORMAT " invalid) in %7.2f s: %8.1f/s, %7.1f ok/s\n",
           label, jobs, jobs == 1 ? " " : "s", n, b.count[SEARCH_SWEEP_OK], b.count[SEARCH_SWEEP_OUT_OF_MEMORY],
           b.count[SEARCH_SWEEP_INVALID], secs, n / secs, b.count[SEARCH_SWEEP_OK] / secs);
  }
  search_grid_free(g);
  return ok;
}

static int bench_sweep(void) {
  GError *error = NULL;
  guint cores = search_pool_cores();
  TopoCluster *cluster = NULL;
  ModelProfile *profile = NULL;
  if (!cli_load_machine(NULL, NULL, &cluster, &profile, &error))
    return cli_fail(error);
  /* (a) plan's space for GPT-3 175B on 1024 GPUs, everything that fits simulated (no pruning) */
  SearchConfig cfg;
  search_config_init(&cfg);
  search_config_set(&cfg, SEARCH_OPT_MODEL, "gpt3-175b", NULL);
  search_config_set(&cfg, SEARCH_OPT_GPUS, "1024", NULL);
  search_config_set(&cfg, SEARCH_OPT_GLOBAL_BATCH, "1536", NULL);
  int code = 0;
  for (guint pass = 0; pass < 2 && !code; pass++) {
    guint jobs = pass ? cores : 1;
    SearchRequest req = {&cfg, FALSE, 0, jobs, FALSE, SEARCH_OBJECTIVE_TIME};
    SearchResult res;
    gint64 t0 = g_get_monotonic_time();
    if (!search_run(&req, profile, cluster, &res, &error)) {
      code = cli_fail(error);
      break;
    }
    double secs = (g_get_monotonic_time() - t0) * 1e-6;
    printf("%-34s %2u thread%s %7u candidates (%u simulated, %u out of memory) in %7.2f s: %8.1f/s, %7.1f "
           "simulated/s\n",
           "plan: gpt3-175b, 1024 GPUs, B 1536", jobs, jobs == 1 ? " " : "s", res.searched, res.simulated,
           res.out_of_memory, secs, res.searched / secs, res.simulated / secs);
    search_result_clear(&res);
  }
  search_config_clear(&cfg);
  /* (b) a 10,000-configuration grid, analytic network */
  static const char *grid = "--model gpt3-13b --gpus 64..1024x2 --tp 1,2,4,8 --pp 1,2,4,8,16 --micro-batch 1..16x2 "
                            "--global-batch 256..1280+256 --recompute full,none --seq-len 1024,2048 --network analytic";
  for (guint pass = 0; pass < 2 && !code; pass++)
    if (!bench_grid("sweep: 10,000 configurations", grid, pass ? cores : 1, &error))
      code = cli_fail(error);
  topo_cluster_free(cluster);
  model_profile_free(profile);
  return code;
}

/* Mixture of experts on the flow network: DeepSeek-V3's 64 layers on
 * 2048 H800s (t 1, p 16, ep 64, B 15360: 120 microbatches per pipeline),
 * DualPipe and 1F1B, each timed on one core (the fastest of `repeat`).
 * Every stage's token dispatch and combine is one all-to-all over its
 * expert-parallel groups, a plan per distinct all-to-all (stage, kind)
 * reused by every microbatch and layer. */
static int bench_moe(guint repeat) {
  GError *error = NULL;
  TopoCluster *cluster = NULL;
  ModelProfile *profile = NULL;
  if (!cli_load_machine("h800-cluster", NULL, &cluster, &profile, &error))
    return cli_fail(error);
  printf("%-52s %12s %10s %10s\n", "DeepSeek-V3, 2048 H800s, flow network (one core)", "CPU s", "target", "ops");
  static const char *schedules[] = {"dualpipe", "1f1b"};
  int code = 0;
  for (guint i = 0; i < G_N_ELEMENTS(schedules) && !code; i++) {
    static const char *const words[][2] = {{"model", "deepseek-v3"}, {"layers", "64"},       {"gpus", "2048"},
                                           {"tp", "1"},              {"pp", "16"},           {"ep", "64"},
                                           {"global-batch", "15360"}, {"recompute", "full"}, {"network", "flow"}};
    SearchConfig cfg;
    search_config_init(&cfg);
    gboolean ok = TRUE;
    for (guint w = 0; ok && w < G_N_ELEMENTS(words); w++)
      ok = search_config_set(&cfg, (SearchOptId)search_option_find(words[w][0]), words[w][1], &error);
    ok = ok && search_config_set(&cfg, SEARCH_OPT_DISTRIBUTED_OPTIMIZER, NULL, &error) &&
         search_config_set(&cfg, (SearchOptId)search_option_find("schedule"), schedules[i], &error);
    SimPlanRequest req;
    SimResult r;
    double best = 0;
    ok = ok && search_config_request(&cfg, &req, &error) && time_run(&req, cluster, profile, repeat, &r, &best, &error);
    if (ok) {
      char label[64];
      g_snprintf(label, sizeof label, "%s, t 1 p 16 ep 64, B 15360", schedules[i]);
      gboolean target = i == 0; /* DualPipe's: 30 s */
      printf("%-52s %12.3f %10s %10" G_GUINT64_FORMAT "%s\n", label, best, target ? "30.000" : "", r.ops,
             target && best > 30 ? "  over" : "");
    } else
      code = cli_fail(error);
    search_config_clear(&cfg);
  }
  topo_cluster_free(cluster);
  model_profile_free(profile);
  return code;
}

/* The speed targets, each in CPU seconds on one core (the fastest of
 * `repeat` runs), and plan's rate on one core. */
static gboolean bench_targets(const SimPlanRequest *one_t, const TopoCluster *cluster, const ModelProfile *profile,
                              guint repeat, GError **error) {
  if (!one_t->gpus) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "megatron-sc21.json: Table 1 has no 1T row");
    return FALSE;
  }
  printf("\n%-44s %12s %10s %10s\n", "speed targets (one core)", "CPU s", "target", "ops");
  static const SimNetwork nets[] = {SIM_NETWORK_ANALYTIC, SIM_NETWORK_FLOW};
  static const double limits[] = {0.03, 0.1};
  for (guint n = 0; n < 2; n++) {
    SimPlanRequest req = *one_t;
    req.network = nets[n];
    req.network_given = TRUE;
    SimResult r;
    double best;
    if (!time_run(&req, cluster, profile, repeat, &r, &best, error))
      return FALSE;
    char label[64];
    g_snprintf(label, sizeof label, "1T row (%u GPUs), %s network", one_t->gpus,
               ptd_word_of(sim_network_words, (int)nets[n]));
    printf("%-44s %12.4f %10.3f %10" G_GUINT64_FORMAT "%s\n", label, best, limits[n], r.ops,
           best <= limits[n] ? "" : "  over");
  }
  /* the cost against the microbatches: the 1T row with 4 and 16 times the
   * global batch (the steady state carries the extra periods, sim/steady.h) */
  for (guint n = 0; n < 2; n++)
    for (guint times = 4; times <= 16; times *= 4) {
      SimPlanRequest req = *one_t;
      req.network = nets[n];
      req.network_given = TRUE;
      req.global_batch *= times;
      SimResult r;
      SimPlan plan;
      double best;
      if (!sim_plan_build(&req, cluster, &plan, error) || !time_run(&req, cluster, profile, repeat, &r, &best, error))
        return FALSE;
      char label[64];
      g_snprintf(label, sizeof label, "1T row, B x %u (m %u), %s", times, plan.microbatches,
                 ptd_word_of(sim_network_words, (int)nets[n]));
      printf("%-44s %12.4f %10s %10" G_GUINT64_FORMAT "  %" G_GUINT64_FORMAT " periods in closed form\n", label, best,
             "", r.ops, r.steady_periods);
    }
  SimPlanRequest gpt3 = {.gpus = 96, .tp = 8, .pp = 12, .global_batch = 96, .micro_batch = 1,
                         .network = SIM_NETWORK_ANALYTIC, .network_given = TRUE};
  model_lookup("gpt3-175b", &gpt3.model);
  SimResult r;
  double best;
  if (!time_run(&gpt3, cluster, profile, MAX(repeat, 10), &r, &best, error))
    return FALSE;
  printf("%-44s %12.4f %10.3f %10" G_GUINT64_FORMAT "%s\n", "GPT-3 175B, 96 GPUs, B 96, analytic network", best,
         0.005, r.ops, best <= 0.005 ? "" : "  over");
  /* a model of today on today's machine: Llama 3 405B (126 layers, so 14
   * stages of 9) on a DGX H100 SuperPOD, with the distributed optimizer */
  TopoCluster *h100 = NULL;
  ModelProfile *h100_profile = NULL;
  if (!cli_load_machine("dgx-h100-superpod", NULL, &h100, &h100_profile, error))
    return FALSE;
  for (guint n = 0; n < 2; n++) {
    SimPlanRequest llama = {.gpus = 2016, .tp = 8, .pp = 14, .global_batch = 576, .micro_batch = 1,
                            .network = nets[n], .network_given = TRUE, .distributed_optimizer = TRUE};
    model_lookup("llama3-405b", &llama.model);
    if (!time_run(&llama, h100, h100_profile, repeat, &r, &best, error)) {
      topo_cluster_free(h100);
      model_profile_free(h100_profile);
      return FALSE;
    }
    char label[64];
    g_snprintf(label, sizeof label, "Llama 3 405B, 2016 H100s, %s network",
               ptd_word_of(sim_network_words, (int)nets[n]));
    printf("%-44s %12.4f %10s %10" G_GUINT64_FORMAT "  %.2f Mevents/s\n", label, best, "", r.ops,
           (double)r.events / best / 1e6);
  }
  topo_cluster_free(h100);
  model_profile_free(h100_profile);
  /* plan's space for GPT-3 175B on 1024 GPUs, everything that fits
   * simulated, on one thread */
  SearchConfig cfg;
  search_config_init(&cfg);
  search_config_set(&cfg, SEARCH_OPT_MODEL, "gpt3-175b", NULL);
  search_config_set(&cfg, SEARCH_OPT_GPUS, "1024", NULL);
  search_config_set(&cfg, SEARCH_OPT_GLOBAL_BATCH, "1536", NULL);
  SearchRequest req = {&cfg, FALSE, 0, 1, FALSE, SEARCH_OBJECTIVE_TIME};
  SearchResult res;
  double t0 = cpu_seconds();
  gboolean ok = search_run(&req, profile, cluster, &res, error);
  double secs = cpu_seconds() - t0;
  if (ok) {
    printf("%-44s %12.4f %10s %10s  %.0f configurations/s (%u candidates, %u simulated)\n",
           "plan: GPT-3 175B, 1024 GPUs, B 1536", secs, "", "", res.searched / secs, res.searched, res.simulated);
    search_result_clear(&res);
  }
  search_config_clear(&cfg);
  return ok;
}

int cli_bench(int argc, char **argv) {
  char *repeat_s = NULL;
  guint repeat = 3;
  gboolean terapipe = FALSE;
  char *network = NULL, *figures = NULL;
  gboolean sweep = FALSE, scale = FALSE, moe = FALSE;
  GOptionEntry entries[] = {{"repeat", 0, 0, G_OPTION_ARG_STRING, &repeat_s, "Runs per row; the fastest counts (default 3)", "N"},
                            {"terapipe", 0, 0, G_OPTION_ARG_NONE, &terapipe,
                             "Time the whole of figure terapipe-fig5 instead of SC21 Table 1", NULL},
                            {"network", 0, 0, G_OPTION_ARG_STRING, &network,
                             "flow (default, as for run) or analytic: the network model timed", "MODEL"},
                            {"scale", 0, 0, G_OPTION_ARG_NONE, &scale,
                             "Llama 3 70B on 65,536, 131,072 and 262,144 H100s: CPU seconds and peak memory", NULL},
                            {"moe", 0, 0, G_OPTION_ARG_NONE, &moe,
                             "DeepSeek-V3 with DualPipe and 1F1B on 2048 H800s, flow network: CPU seconds", NULL},
                            {"sweep", 0, 0, G_OPTION_ARG_NONE, &sweep,
                             "Configurations per second of sweeps and plan, on one core and on all of them", NULL},
                            {"figures", 0, 0, G_OPTION_ARG_FILENAME, &figures,
                             "Time every figure: simulated with its pictures written to DIR/gallery (figure --all -o), "
                             "saving its traces to DIR/traces, and rebuilt from them into DIR/rebuilt",
                             "DIR"},
                            {NULL, 0, 0, 0, NULL, NULL, NULL}};
  CliArgs args;
  cli_args_init(&args, "- the simulator's speed on SC21 Table 1");
  cli_args_add(&args, entries);
  GError *error = NULL;
  TopoCluster *cluster = NULL;
  ModelProfile *profile = NULL;
  cJSON *ref = NULL;
  int code = 0;
  if (!cli_args_parse(&args, &argc, &argv, &error))
    goto fail;
  if (!cli_count_or("--repeat", repeat_s, 1, 100, 3, &repeat, &error))
    goto fail;
  if (argc > 1) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unexpected argument '%s' (see ptdsim bench --help)",
                argv[1]);
    goto fail;
  }
  if (network && strcmp(network, "flow") != 0 && strcmp(network, "analytic") != 0) {
    char *echo = ptd_echo(network, PTD_ECHO_MAX, FALSE);
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unknown --network '%s'; use flow or analytic", echo);
    g_free(echo);
    goto fail;
  }
  if (terapipe) {
    code = bench_terapipe(repeat);
    goto done;
  }
  if (figures) {
    code = bench_figures(figures);
    goto done;
  }
  if (sweep) {
    code = bench_sweep();
    goto done;
  }
  if (scale) {
    code = bench_scale();
    goto done;
  }
  if (moe) {
    code = bench_moe(repeat_s ? repeat : 1); /* minutes at the default 3 */
    goto done;
  }
  if (!cli_load_machine(NULL, NULL, &cluster, &profile, &error) ||
      !(ref = trace_reference_load("megatron-sc21.json", &error)))
    goto fail;
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ref, "table1"), "rows");
  printf("%-8s %6s %10s %10s %12s %10s\n", "row", "gpus", "ops", "events", "CPU s", "Mevents/s");
  double total = 0, total_events = 0;
  SimPlanRequest one_t = {0}; /* the 1T row */
  double one_t_params = 0;
  const cJSON *row;
  int word = 0; /* --network, checked above */
  gboolean net_given = network && ptd_word_value(sim_network_words, network, &word);
  cJSON_ArrayForEach(row, rows) {
    SimPlanRequest req;
    if (!trace_table1_request(row, &req, &error))
      goto fail;
    req.network = (SimNetwork)word;
    req.network_given = net_given;
    SimResult r;
    double best;
    if (!time_run(&req, cluster, profile, repeat, &r, &best, &error))
      goto fail;
    char label[32];
    g_snprintf(label, sizeof label, "%.1fB", cJSON_GetArrayItem(row, 0)->valuedouble);
    printf("%-8s %6u %10" G_GUINT64_FORMAT " %10" G_GUINT64_FORMAT " %12.4f %10.2f\n", label, req.gpus, r.ops,
           r.events, best, r.events / best / 1e6);
    total += best;
    total_events += (double)r.events;
    if (cJSON_GetArrayItem(row, 0)->valuedouble > one_t_params) { /* the largest row: 1T */
      one_t = req;
      one_t_params = cJSON_GetArrayItem(row, 0)->valuedouble;
    }
  }
  printf("Table 1: %.3f CPU s for %d configurations (%.3f s per configuration), %.2f Mevents/s, peak RSS %.0f MiB\n",
         total, cJSON_GetArraySize(rows), total / cJSON_GetArraySize(rows), total_events / total / 1e6, peak_rss_mib());
  if (!bench_targets(&one_t, cluster, profile, repeat, &error))
    goto fail;
  goto done;
fail:
  code = cli_fail(error);
done:
  cJSON_Delete(ref);
  topo_cluster_free(cluster);
  model_profile_free(profile);
  cli_args_clear(&args);
  g_free(network);
  g_free(figures);
  g_free(repeat_s);
  return code;
}
