/* ptdsim — figures of today's questions (see today_figs.h): which machine
 * trains a model soonest, and what failures and checkpoints cost a run as
 * the cluster grows.  Nothing here is a paper's figure: no published values
 * are drawn, and every number comes from the simulator and the whole-run
 * model (runtime/). */
#include "today_figs.h"

#include <math.h>
#include <string.h>

#include "../models/profile.h"
#include "../models/transformer.h"
#include "../topologies/cluster.h"

/* A member the run JSON always has (the run contract, doc/output.md). */
static double jnum(const cJSON *o, const char *path) {
  const cJSON *v = o;
  char **keys = g_strsplit(path, ".", -1);
  for (char **k = keys; *k && v; k++)
    v = cJSON_GetObjectItemCaseSensitive(v, *k);
  g_strfreev(keys);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void add_row_num(cJSON *row, const char *key, double v) { cJSON_AddNumberToObject(row, key, v); }

/* The whole run of a finished iteration (its run JSON, which holds
 * "whole_run") again under other options: the iteration, the tokens and the
 * checkpoint are the run's. */
static gboolean whole_run_at(const cJSON *run, const TopoCluster *c, const RtOptions *o, RtResult *r,
                             GError **error) {
  RtInput in = {.iteration_s = jnum(run, "iteration_time_s"),
                .tokens_per_iteration = jnum(run, "config.global_batch") * jnum(run, "config.seq_len"),
                .tokens = jnum(run, "tokens"),
                .gpus = (guint)jnum(run, "config.gpus"),
                .gpus_per_node = c->gpus_per_host,
                .checkpoint_bytes = jnum(run, "whole_run.checkpoint.bytes"),
                .rank_bytes = (jnum(run, "memory_per_gpu_GiB.weights") + jnum(run, "memory_per_gpu_GiB.optimizer")) *
                              1073741824.0};
  return rt_run(&in, o, r, error);
}

/* --- which machine: Llama 3 70B for 15T tokens on 1024 GPUs of each --- */

/* Today's built-in machines, each with its own GPU. */
static const char *const machines[] = {"dgx-h100-superpod", "dgx-h200", "dgx-b200", "gb200-nvl72",
                                       "h800-cluster",      "p5.48xlarge", "a3-mega", "nd-h100-v5"};
#define MACHINE_GPUS 1024u

/* The cluster, grown where its example size is below MACHINE_GPUS (whole
 * NVLink domains), and its own profile. */
static gboolean load_machine(const char *name, TopoCluster **c, ModelProfile **p, GError **error) {
  *p = NULL;
  if (!(*c = topo_cluster_load(name, error)))
    return FALSE;
  if (topo_cluster_gpus(*c) < MACHINE_GPUS) {
    guint domains = (MACHINE_GPUS + (*c)->gpus_per_node - 1) / (*c)->gpus_per_node;
    guint nodes = domains * ((*c)->gpus_per_node / (*c)->gpus_per_host);
    topo_cluster_free(*c);
    if (!(*c = topo_cluster_load_sized(name, nodes, error)))
      return FALSE;
  }
  if (!(*p = model_profile_load((*c)->gpu_profile, error))) {
    topo_cluster_free(*c);
    *c = NULL;
    return FALSE;
  }
  return TRUE;
}

gboolean trace_today_machines(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  SimPlanRequest req;
  memset(&req, 0, sizeof req);
  if (!model_lookup("llama3-70b", &req.model)) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "the built-in model llama3-70b is missing");
    return FALSE;
  }
  /* one recipe on every machine: Megatron-Core's Llama 3 70B layout (t 8,
   * p 4), 512 sequences of 8192 tokens (4M tokens) a step */
  req.gpus = MACHINE_GPUS, req.tp = 8, req.pp = 4, req.dp = MACHINE_GPUS / 32;
  req.global_batch = 512, req.micro_batch = 1;
  req.sequence_parallel = TRUE, req.distributed_optimizer = TRUE, req.recompute = MODEL_RECOMPUTE_SELECTIVE;
  req.recompute_given = TRUE;
  req.tokens = 15e12;
  trace_figure_network(ctx, &req);
  RtOptions rt;
  rt_options_default(&rt);
  const TopoCluster *c0 = ctx->cluster;
  const ModelProfile *p0 = ctx->profile;
  const RtOptions *rt0 = ctx->rt;
  guint n = G_N_ELEMENTS(machines);
  double ideal[G_N_ELEMENTS(machines)], expected[G_N_ELEMENTS(machines)];
  gboolean ok = TRUE;
  g_string_append_printf(out->text,
                         "Llama 3 70B for 15T tokens on %u GPUs of each machine: t 8, p 4, d 32, 512 sequences of "
                         "8192 tokens, selective recomputation, sequence parallel, distributed optimizer, bf16\n",
                         MACHINE_GPUS);
  g_string_append_printf(out->text, "%-18s %-23s %8s %6s %8s %9s %12s %9s %6s\n", "cluster", "profile", "iter s", "MFU",
                         "TFLOP/s", "days", "GPU-hours", "run days", "ETT");
  for (guint i = 0; ok && i < n; i++) {
    TopoCluster *c = NULL;
    ModelProfile *p = NULL;
    ok = load_machine(machines[i], &c, &p, error);
    cJSON *run = NULL;
    if (ok) {
      ctx->cluster = c, ctx->profile = p, ctx->rt = &rt;
      ok = (run = trace_figure_run(ctx, &req, error)) != NULL;
      ctx->cluster = c0, ctx->profile = p0, ctx->rt = rt0;
    }
    if (ok) {
      cJSON *row = cJSON_CreateObject();
      cJSON_AddStringToObject(row, "cluster", machines[i]);
      cJSON_AddStringToObject(row, "profile", p->name);
      add_row_num(row, "gpus", MACHINE_GPUS);
      add_row_num(row, "iteration_time_s", jnum(run, "iteration_time_s"));
      add_row_num(row, "mfu_percent", jnum(run, "mfu_percent"));
      add_row_num(row, "model_tflops_per_gpu", jnum(run, "model_tflops_per_gpu"));
      add_row_num(row, "training_days", ideal[i] = jnum(run, "training_days"));
      add_row_num(row, "gpu_hours", jnum(run, "gpu_hours"));
      add_row_num(row, "run_days", expected[i] = jnum(run, "whole_run.expected.days"));
      add_row_num(row, "run_gpu_hours", jnum(run, "whole_run.expected.gpu_hours"));
      add_row_num(row, "effective_training_time", jnum(run, "whole_run.expected.effective_training_time"));
      add_row_num(row, "memory_GiB", jnum(run, "memory_per_gpu_GiB.total"));
      cJSON_AddBoolToObject(row, "fits_in_memory", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(run, "fits_in_memory")));
      cJSON_AddItemToArray(out->rows, row);
      g_string_append_printf(out->text, "%-18s %-23s %8.3f %5.1f%% %8.1f %9.1f %12.0f %9.1f %5.1f%%\n", machines[i],
                             p->name, jnum(run, "iteration_time_s"), jnum(run, "mfu_percent"),
                             jnum(run, "model_tflops_per_gpu"), ideal[i], jnum(run, "gpu_hours"), expected[i],
                             100 * jnum(run, "whole_run.expected.effective_training_time"));
    }
    cJSON_Delete(run);
    topo_cluster_free(c);
    model_profile_free(p);
  }
  if (!ok)
    return FALSE;
  g_string_append(out->text, "days: 15T tokens at the simulated iteration time; run days: with failures at the Llama 3 "
                             "run's rates, restarts and checkpoints (doc/runtime.md); ETT: effective training time\n");
  cJSON_AddStringToObject(out->json, "source",
                          "ptdsim's built-in clusters and profiles (ptdsim clusters NAME: every number's source); "
                          "failure rates of the Llama 3 405B run (arXiv:2407.21783, Table 5)");
  out->plot = trace_plot_new(TRACE_PLOT_BARS, "Llama 3 70B, 15T tokens, on 1024 GPUs of each machine", "cluster",
                             "days to train");
  trace_plot_set_subtitle(out->plot, "t 8, p 4, d 32, 4M-token batches, bf16; the second bar with failures, "
                                     "restarts and checkpoints at the Llama 3 run's failure rates");
  trace_plot_set_categories(out->plot, machines, n);
  trace_plot_add_series(out->plot, "no failures", NULL, ideal, n);
  trace_plot_add_series(out->plot, "with failures and checkpoints", NULL, expected, n);
  return TRUE;
}

/* --- a run's real time: Llama 3 405B on 4k-32k H100s --- */

gboolean trace_today_runtime(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  static const guint sizes[] = {4096, 8192, 16384, 32768};
  /* checkpoint intervals: three given, and Daly's optimum (0) */
  static const double every_s[] = {600, 1800, 7200, 0};
  static const char *const every_name[] = {"every 10 min", "every 30 min", "every 2 h", "Daly's optimum"};
  guint n_sizes = G_N_ELEMENTS(sizes), n_every = G_N_ELEMENTS(every_s);
  SimPlanRequest req;
  memset(&req, 0, sizeof req);
  if (!model_lookup("llama3-405b", &req.model)) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "the built-in model llama3-405b is missing");
    return FALSE;
  }
  /* the Llama 3 405B layout of its report's first stage (t 8, p 16), 4096
   * sequences a step, its pipeline split with the embedding and the loss
   * counted as layers */
  req.tp = 8, req.pp = 16, req.global_batch = 4096, req.micro_batch = 1;
  req.split.embedding = req.split.loss = TRUE;
  req.sequence_parallel = TRUE, req.distributed_optimizer = TRUE, req.recompute = MODEL_RECOMPUTE_NONE;
  req.recompute_given = TRUE;
  req.tokens = 15e12;
  trace_figure_network(ctx, &req);
  RtOptions rt;
  rt_options_default(&rt);
  TopoCluster *c = topo_cluster_load_sized(ctx->cluster->path, sizes[n_sizes - 1] / ctx->cluster->gpus_per_host, error);
  if (!c)
    return FALSE;
  const TopoCluster *c0 = ctx->cluster;
  const RtOptions *rt0 = ctx->rt;
  double *days = g_new(double, n_sizes * n_every), *ett = g_new(double, n_sizes * n_every);
  double x[G_N_ELEMENTS(sizes)];
  gboolean ok = TRUE;
  g_string_append_printf(out->text,
                         "Llama 3 405B for 15T tokens on %s (%s): t 8, p 16, 4096 sequences of 8192 tokens a step; "
                         "failures at the Llama 3 run's rates, synchronous checkpoints\n",
                         ctx->cluster->name, ctx->profile->name);
  g_string_append_printf(out->text, "%6s %8s %8s %10s %10s  %-15s %9s %6s %13s\n", "gpus", "iter s", "MFU",
                         "ideal days", "MTBF h", "checkpoints", "run days", "ETT", "interruptions");
  for (guint i = 0; ok && i < n_sizes; i++) {
    req.gpus = sizes[i];
    req.dp = sizes[i] / (req.tp * req.pp);
    x[i] = sizes[i];
    ctx->cluster = c, ctx->rt = &rt;
    cJSON *run = trace_figure_run(ctx, &req, error);
    ctx->cluster = c0, ctx->rt = rt0;
    ok = run != NULL;
    for (guint j = 0; ok && j < n_every; j++) {
      RtOptions o = rt;
      o.every.seconds = every_s[j];
      RtResult r;
      ok = whole_run_at(run, c, &o, &r, error);
      if (!ok)
        break;
      days[j * n_sizes + i] = r.expected_days;
      ett[j * n_sizes + i] = r.effective_training_time;
      cJSON *row = cJSON_CreateObject();
      cJSON_AddStringToObject(row, "series", every_name[j]);
      add_row_num(row, "gpus", sizes[i]);
      add_row_num(row, "iteration_time_s", jnum(run, "iteration_time_s"));
      add_row_num(row, "mfu_percent", jnum(run, "mfu_percent"));
      add_row_num(row, "ideal_days", r.ideal_days);
      add_row_num(row, "mtbf_hours", r.mtbf_hours);
      add_row_num(row, "checkpoint_every_iterations", (double)r.every_iterations);
      add_row_num(row, "checkpoint_interval_s", (double)r.every_iterations * jnum(run, "iteration_time_s"));
      add_row_num(row, "run_days", r.expected_days);
      add_row_num(row, "effective_training_time", r.effective_training_time);
      add_row_num(row, "interruptions", r.interruptions);
      add_row_num(row, "gpu_hours", r.gpu_hours);
      cJSON_AddItemToArray(out->rows, row);
      g_string_append_printf(out->text, "%6u %8.2f %7.1f%% %10.1f %10.2f  %-15s %9.1f %5.1f%% %13.0f\n", sizes[i],
                             jnum(run, "iteration_time_s"), jnum(run, "mfu_percent"), r.ideal_days, r.mtbf_hours,
                             every_name[j], r.expected_days, 100 * r.effective_training_time, r.interruptions);
    }
    cJSON_Delete(run);
  }
  topo_cluster_free(c);
  if (ok)
    g_string_append(out->text, "run days: with failures at the Llama 3 run's rates, 600 s restarts and checkpoints "
                               "to 2 TB/s storage (doc/runtime.md); ETT: effective training time\n");
  if (ok) {
    cJSON_AddStringToObject(out->json, "source",
                            "failure rates of the Llama 3 405B run (arXiv:2407.21783, section 3.3.4, Table 5); the "
                            "whole-run model of doc/runtime.md; restart and storage figures its assumptions");
    out->plot = trace_plot_new(TRACE_PLOT_LINES, "Llama 3 405B, 15T tokens: days to train as the cluster grows",
                               "GPUs", "days, with failures, restarts and checkpoints");
    char *sub = g_strdup_printf("%s, t 8, p 16, 4096 x 8192-token batches; the Llama 3 run's failure rates, "
                                "600 s restarts, 2 TB/s storage",
                                ctx->cluster->name);
    trace_plot_set_subtitle(out->plot, sub);
    g_free(sub);
    trace_plot_set_x_log2(out->plot, TRUE);
    for (guint j = 0; j < n_every; j++)
      trace_plot_add_series(out->plot, every_name[j], x, days + j * n_sizes, n_sizes);
  }
  g_free(days);
  g_free(ett);
  return ok;
}
