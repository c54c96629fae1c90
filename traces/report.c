/* ptdsim — run reports (see report.h). */
#include "report.h"

#include "../base/units.h"

#define GIB 1073741824.0

static cJSON *obj_add(cJSON *parent, const char *key) { return cJSON_AddObjectToObject(parent, key); }

/* The rank order: TeraPipe runs its own (tensor, then pipeline, then data:
 * sim/terapipe.c), PTD-P the --placement. */
static const char *placement_name(const SimPlan *pl) {
  static const char *placements[] = {"tp-dp-pp", "dp-outermost", "misaligned"};
  return pl->schedule == SIM_SCHEDULE_TERAPIPE ? "tp-pp-dp" : placements[pl->placement];
}

cJSON *trace_result_json(const SimPlan *pl, const ModelProfile *profile, const TopoCluster *cluster,
                         const SimResult *r) {
  cJSON *o = cJSON_CreateObject();
  cJSON *cfg = obj_add(o, "config");
  cJSON_AddNumberToObject(cfg, "layers", pl->model.layers);
  cJSON_AddNumberToObject(cfg, "hidden", pl->model.hidden);
  cJSON_AddNumberToObject(cfg, "heads", pl->model.heads);
  cJSON_AddNumberToObject(cfg, "seq_len", pl->model.seq_len);
  cJSON_AddNumberToObject(cfg, "vocab", pl->model.vocab);
  cJSON_AddNumberToObject(cfg, "parameters", (double)model_param_count(&pl->model));
  cJSON_AddNumberToObject(cfg, "gpus", pl->gpus);
  cJSON_AddNumberToObject(cfg, "tp", pl->tp);
  cJSON_AddNumberToObject(cfg, "pp", pl->pp);
  cJSON_AddNumberToObject(cfg, "dp", pl->dp);
  cJSON_AddNumberToObject(cfg, "global_batch", pl->global_batch);
  cJSON_AddNumberToObject(cfg, "micro_batch", pl->micro_batch);
  cJSON_AddNumberToObject(cfg, "microbatches", pl->microbatches);
  cJSON_AddNumberToObject(cfg, "chunks", pl->chunks);
  cJSON_AddStringToObject(cfg, "schedule", sim_schedule_name(pl->schedule));
  cJSON_AddStringToObject(cfg, "recompute", pl->recompute ? "full" : "none");
  cJSON_AddStringToObject(cfg, "ddp", pl->ddp == SIM_DDP_TORCH ? "torch" : "local");
  cJSON_AddBoolToObject(cfg, "scatter_gather", pl->scatter_gather);
  cJSON_AddBoolToObject(cfg, "fusion", pl->fusion);
  cJSON_AddStringToObject(cfg, "cluster", cluster->name);
  cJSON_AddStringToObject(cfg, "profile", profile->name);
  cJSON_AddStringToObject(cfg, "network", pl->flow_network ? "flow" : "analytic");
  cJSON_AddStringToObject(cfg, "placement", placement_name(pl));
  cJSON_AddStringToObject(cfg, "workload", pl->workload == SIM_WORKLOAD_LAYERS ? "layers" : "gpt");
  cJSON_AddNumberToObject(cfg, "zero", pl->zero);

  cJSON_AddNumberToObject(o, "iteration_time_s", r->iteration_time_s);
  cJSON_AddNumberToObject(o, "tflops_per_gpu", r->tflops_per_gpu);
  cJSON_AddNumberToObject(o, "hardware_tflops_per_gpu", r->hardware_tflops_per_gpu);
  cJSON_AddNumberToObject(o, "percent_of_peak", r->percent_of_peak);
  cJSON_AddNumberToObject(o, "aggregate_pflops", r->aggregate_pflops);
  cJSON_AddNumberToObject(o, "bubble_fraction", r->bubble_fraction);
  cJSON_AddNumberToObject(o, "analytic_bubble_fraction", r->analytic_bubble_fraction);
  cJSON *tb = obj_add(o, "time_breakdown_s");
  cJSON_AddNumberToObject(tb, "compute", r->breakdown.compute);
  cJSON_AddNumberToObject(tb, "tp_comm", r->breakdown.tp_comm);
  cJSON_AddNumberToObject(tb, "pp_comm", r->breakdown.pp_comm);
  cJSON_AddNumberToObject(tb, "dp_comm", r->breakdown.dp_comm);
  cJSON_AddNumberToObject(tb, "optimizer", r->breakdown.optimizer);
  cJSON_AddNumberToObject(tb, "bubble", r->breakdown.bubble);
  cJSON_AddNumberToObject(o, "critical_stage", r->critical_stage);
  cJSON *by = obj_add(o, "bytes_per_iteration");
  cJSON_AddNumberToObject(by, "tp", r->bytes_tp);
  cJSON_AddNumberToObject(by, "pp", r->bytes_pp);
  cJSON_AddNumberToObject(by, "dp", r->bytes_dp);
  cJSON_AddNumberToObject(by, "embedding", r->bytes_embedding); /* counted in dp too */
  cJSON *bi = obj_add(o, "bisection_bandwidth_GBps");
  cJSON_AddNumberToObject(bi, "pp", r->bisection_pp_GBps);
  cJSON_AddNumberToObject(bi, "dp", r->bisection_dp_GBps);
  cJSON *mem = obj_add(o, "memory_per_gpu_GiB");
  cJSON_AddNumberToObject(mem, "weights", r->memory.weights / GIB);
  cJSON_AddNumberToObject(mem, "gradients", r->memory.gradients / GIB);
  cJSON_AddNumberToObject(mem, "optimizer", r->memory.optimizer / GIB);
  cJSON_AddNumberToObject(mem, "activations", r->memory.activations / GIB);
  cJSON_AddNumberToObject(mem, "total", r->memory.total / GIB);
  cJSON_AddNumberToObject(mem, "stage", r->memory_stage);
  cJSON_AddBoolToObject(o, "fits_in_memory", r->fits_in_memory);
  if (!r->fits_in_memory) {
    char *why = g_strdup_printf("stage %u needs %.1f GiB, more than the %.0f GiB of %s", r->memory_stage,
                                r->memory.total / GIB, profile->memory_bytes / GIB, profile->name);
    cJSON_AddStringToObject(o, "memory_note", why);
    g_free(why);
  }
  if (pl->tokens > 0) {
    cJSON_AddNumberToObject(o, "tokens", pl->tokens);
    cJSON_AddNumberToObject(o, "training_days", r->training_days);
  }
  cJSON *sim = obj_add(o, "simulation");
  cJSON_AddNumberToObject(sim, "ops", (double)r->ops);
  cJSON_AddNumberToObject(sim, "events", (double)r->events);
  cJSON_AddNumberToObject(sim, "simulated_gpus", r->simulated_gpus);
  cJSON_AddBoolToObject(sim, "symmetry", r->symmetric);
  return o;
}

static void line_s(GString *out, const char *what, double s, double total) {
  g_string_append_printf(out, "    %-12s %10.4f s  %5.1f%%\n", what, s, total > 0 ? 100.0 * s / total : 0);
}

void trace_result_text(GString *out, const SimPlan *pl, const ModelProfile *profile, const TopoCluster *cluster,
                       const SimResult *r) {
  const ModelShape *m = &pl->model;
  g_string_append_printf(out, "model      %u layers, hidden %u, %u heads, seq %u, vocab %u: %.2fB parameters\n",
                         m->layers, m->hidden, m->heads, m->seq_len, m->vocab, model_param_count(m) / 1e9);
  g_string_append_printf(out, "parallel   %u GPUs = t %u x p %u x d %u on %s (%s)\n", pl->gpus, pl->tp, pl->pp, pl->dp,
                         cluster->name, profile->name);
  g_string_append_printf(out, "network    %s, placement %s\n",
                         pl->flow_network ? "flow (max-min fair flows on the cluster's links)"
                                          : "analytic (alpha-beta per tier, no contention)",
                         placement_name(pl));
  if (pl->schedule == SIM_SCHEDULE_TERAPIPE)
    g_string_append_printf(out, "batch      %u sequences, %u per pipeline, in batch slices (slicing below)%s\n",
                           pl->global_batch, pl->global_batch / pl->dp,
                           pl->workload == SIM_WORKLOAD_LAYERS ? "; the layers alone (TeraPipe's benchmark)" : "");
  else
    g_string_append_printf(out, "batch      %u sequences, microbatch %u, %u microbatches per pipeline\n",
                           pl->global_batch, pl->micro_batch, pl->microbatches);
  if (pl->zero) {
    g_string_append_printf(out,
                           "schedule   ZeRO stage %u over %u GPUs (%s sharded), %u microbatches accumulated, recompute "
                           "%s, fusion %s\n\n",
                           pl->zero, pl->dp,
                           pl->zero == 1   ? "optimizer state"
                           : pl->zero == 2 ? "optimizer state and gradients"
                                           : "optimizer state, gradients and parameters",
                           pl->microbatches, pl->recompute ? "full" : "none", pl->fusion ? "on" : "off");
    goto results;
  }
  g_string_append_printf(out, "schedule   %s", sim_schedule_name(pl->schedule));
  if (pl->schedule == SIM_SCHEDULE_INTERLEAVED)
    g_string_append_printf(out, " (%u chunks per GPU)", pl->chunks);
  if (pl->schedule == SIM_SCHEDULE_TERAPIPE)
    g_string_append_printf(out, ", recompute %s, sends: one rank per hop, broadcast in the group, fusion %s\n\n",
                           pl->recompute ? "full" : "none", pl->fusion ? "on" : "off");
  else
    g_string_append_printf(out, ", recompute %s, %s DDP, scatter/gather %s, fusion %s\n\n",
                           pl->recompute ? "full" : "none", pl->ddp == SIM_DDP_TORCH ? "torch" : "local",
                           pl->scatter_gather ? "on" : "off", pl->fusion ? "on" : "off");
results:
  g_string_append_printf(out, "iteration  %.4f s\n", r->iteration_time_s);
  g_string_append_printf(out, "throughput %.1f TFLOP/s per GPU (%.1f%% of peak), %.1f PFLOP/s aggregate\n",
                         r->tflops_per_gpu, r->percent_of_peak, r->aggregate_pflops);
  g_string_append_printf(out, "           %.1f TFLOP/s per GPU executed (hardware)\n", r->hardware_tflops_per_gpu);
  if (pl->schedule == SIM_SCHEDULE_TERAPIPE) {
    /* Token pipeline: M slices (all batch slices) on K = p cells. */
    double K = pl->pp, M = r->token_slices;
    g_string_append_printf(out, "bubble     %.4f measured (idle / busy), %.4f analytic (K-1)/M for M = %u token slices "
                                "on K = %u cells\n",
                           r->bubble_fraction, r->analytic_bubble_fraction, r->token_slices, pl->pp);
    g_string_append_printf(out, "idle       %.4f measured (idle / flush), %.4f analytic (K-1)/(M+K-1)\n",
                           r->idle_fraction, M > 0 ? (K - 1) / (M + K - 1) : 0);
  } else
    g_string_append_printf(out, "bubble     %.4f measured (idle / busy time of the busiest stage), %.4f analytic %s\n",
                           r->bubble_fraction, r->analytic_bubble_fraction,
                           pl->schedule == SIM_SCHEDULE_INTERLEAVED ? "(p-1)/(v m)" : "(p-1)/m");
  g_string_append_printf(out, "time on the critical GPU (stage %u):\n", r->critical_stage);
  double T = r->iteration_time_s;
  line_s(out, "compute", r->breakdown.compute, T);
  line_s(out, "tp comm", r->breakdown.tp_comm, T);
  line_s(out, "pp comm", r->breakdown.pp_comm, T);
  /* Without data parallelism the only gradient all-reduce is the tied
   * embedding's, between the first and the last stage. */
  line_s(out, pl->dp > 1 || r->bytes_embedding <= 0 ? "dp comm" : "embedding", r->breakdown.dp_comm, T);
  line_s(out, "optimizer", r->breakdown.optimizer, T);
  line_s(out, "bubble", r->breakdown.bubble, T);
  char a[32], b[32], c[32], d[32];
  g_string_append_printf(out, "traffic    tp %s, pp %s, ", ptd_format_si(r->bytes_tp, "B", a, sizeof a),
                         ptd_format_si(r->bytes_pp, "B", b, sizeof b));
  if (pl->dp > 1 && r->bytes_embedding > 0)
    g_string_append_printf(out, "dp %s (%s of it the tied-embedding all-reduce) per iteration\n",
                           ptd_format_si(r->bytes_dp, "B", c, sizeof c),
                           ptd_format_si(r->bytes_embedding, "B", d, sizeof d));
  else if (pl->dp > 1 || r->bytes_dp <= 0)
    g_string_append_printf(out, "dp %s per iteration\n", ptd_format_si(r->bytes_dp, "B", c, sizeof c));
  else
    g_string_append_printf(out, "tied-embedding all-reduce %s per iteration (no data parallelism)\n",
                           ptd_format_si(r->bytes_dp, "B", c, sizeof c));
  g_string_append_printf(out, "bisection  pp %s, dp %s\n", ptd_format_si(r->bisection_pp_GBps * 1e9, "B/s", a, sizeof a),
                         ptd_format_si(r->bisection_dp_GBps * 1e9, "B/s", b, sizeof b));
  g_string_append_printf(out,
                         "memory     %.1f GiB on stage %u (weights %.1f, gradients %.1f, optimizer %.1f, "
                         "activations %.1f): %s\n",
                         r->memory.total / GIB, r->memory_stage, r->memory.weights / GIB, r->memory.gradients / GIB,
                         r->memory.optimizer / GIB, r->memory.activations / GIB,
                         r->fits_in_memory ? "fits" : "DOES NOT FIT");
  if (pl->tokens > 0)
    g_string_append_printf(out, "training   %s tokens in %.1f days\n", ptd_format_count(pl->tokens, a, sizeof a),
                           r->training_days);
}
