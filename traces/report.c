/* ptdsim — run reports (see report.h). */
#include "report.h"

#include "../schedule/schedule.h"

#include <math.h>
#include <string.h>

#include "../base/text.h"
#include "../base/units.h"
#include "../terapipe/terapipe.h"
#include "../ptdp/ptdp.h"
#include "../plan/route.h"

#define GIB 1073741824.0

static cJSON *obj_add(cJSON *parent, const char *key) { return cJSON_AddObjectToObject(parent, key); }

/* The rank order: TeraPipe runs its own (tensor, then pipeline, then data:
 * terapipe/terapipe.c), PTD-P the --placement. */
static const char *placement_name(const SimPlan *pl) {
  if (pl->zero)
    return "dp"; /* one data-parallel rank per GPU, in GPU order */
  return pl->schedule == SIM_SCHEDULE_TERAPIPE ? "tp-pp-dp" : ptd_word_of(sim_placement_words, (int)pl->placement);
}

void trace_shape_json(cJSON *o, const ModelShape *m) {
  cJSON_AddNumberToObject(o, "layers", m->layers);
  cJSON_AddNumberToObject(o, "hidden", m->hidden);
  cJSON_AddNumberToObject(o, "heads", m->heads);
  cJSON_AddNumberToObject(o, "seq_len", m->seq_len);
  cJSON_AddNumberToObject(o, "vocab", m->vocab);
  cJSON_AddNumberToObject(o, "ffn_hidden", model_ffn(m));
  cJSON_AddNumberToObject(o, "query_groups", model_groups(m));
  cJSON_AddNumberToObject(o, "kv_channels", model_head_dim(m));
  cJSON_AddStringToObject(o, "mlp", m->mlp == MODEL_MLP_SWIGLU ? "swiglu" : "gelu");
  cJSON_AddStringToObject(o, "norm", m->norm == MODEL_NORM_RMSNORM ? "rmsnorm" : "layernorm");
  cJSON_AddStringToObject(o, "position_embedding", m->position == MODEL_POSITION_ROTARY ? "rope" : "learned");
  cJSON_AddBoolToObject(o, "tied_embeddings", !m->untied);
  cJSON_AddBoolToObject(o, "linear_bias", !m->no_bias);
  cJSON_AddNumberToObject(o, "parameters", (double)model_param_count(m));
  if (model_is_moe(m)) {
    cJSON_AddNumberToObject(o, "active_parameters", (double)model_active_param_count(m));
    cJSON_AddNumberToObject(o, "experts", m->experts);
    cJSON_AddNumberToObject(o, "moe_topk", m->topk);
    cJSON_AddNumberToObject(o, "moe_ffn_hidden", model_moe_ffn(m));
    cJSON_AddNumberToObject(o, "moe_shared_ffn_hidden", m->shared_ffn);
    cJSON_AddNumberToObject(o, "moe_layers", model_moe_layer_count(m));
  }
  if (model_is_mla(m)) {
    cJSON_AddNumberToObject(o, "q_lora_rank", m->q_lora);
    cJSON_AddNumberToObject(o, "kv_lora_rank", m->kv_lora);
    cJSON_AddNumberToObject(o, "qk_rope_head_dim", m->rope_dim);
    cJSON_AddNumberToObject(o, "v_head_dim", m->v_dim);
  }
  if (m->mtp)
    cJSON_AddNumberToObject(o, "mtp_layers", m->mtp);
}

cJSON *trace_result_json(const SimPlan *pl, const ModelProfile *profile, const TopoCluster *cluster,
                         const SimResult *r) {
  cJSON *o = cJSON_CreateObject();
  cJSON *cfg = obj_add(o, "config");
  trace_shape_json(cfg, &pl->model);
  cJSON_AddNumberToObject(cfg, "gpus", pl->gpus);
  cJSON_AddNumberToObject(cfg, "tp", pl->tp);
  cJSON_AddNumberToObject(cfg, "pp", pl->pp);
  cJSON_AddNumberToObject(cfg, "dp", pl->dp);
  cJSON_AddNumberToObject(cfg, "cp", sim_plan_cp(pl));
  cJSON_AddNumberToObject(cfg, "global_batch", pl->global_batch);
  cJSON_AddNumberToObject(cfg, "micro_batch", pl->micro_batch);
  cJSON_AddNumberToObject(cfg, "microbatches", pl->microbatches);
  cJSON_AddNumberToObject(cfg, "chunks", pl->chunks);
  if (!pl->zero && pl->schedule != SIM_SCHEDULE_TERAPIPE && (pl->layout || sim_plan_uneven(pl))) {
    /* the split in Megatron-Core's layout syntax: the one given, or the
     * split options written as one */
    char *layout = sim_plan_layout_text(pl);
    cJSON_AddStringToObject(cfg, "pipeline_layout", layout);
    g_free(layout);
  }
  if (!pl->zero && pl->schedule != SIM_SCHEDULE_TERAPIPE && sim_plan_uneven(pl)) {
    /* the uneven pipeline split: each stage's layers, and with model
     * chunks each virtual stage's (c p + s: chunk c of stage s) */
    cJSON *per = cJSON_AddArrayToObject(cfg, "layers_per_stage");
    for (guint s = 0; s < pl->pp; s++)
      cJSON_AddItemToArray(per, cJSON_CreateNumber(sim_plan_stage_layers(pl, s)));
    if (pl->chunks > 1) { /* in the route's order: c p + s, or the V's s then 2p-1-s */
      cJSON *virt = cJSON_AddArrayToObject(cfg, "layers_per_virtual_stage");
      for (guint vs = 0; vs < sim_plan_route_len(pl); vs++) {
        guint s, c;
        sim_plan_place(pl, vs, 0, &s, &c);
        cJSON_AddItemToArray(virt, cJSON_CreateNumber(sim_plan_chunk_layers(pl, s, c)));
      }
    }
  }
  /* ZeRO runs no pipeline: one stage accumulates its microbatches */
  cJSON_AddStringToObject(cfg, "schedule", pl->zero ? "zero" : sim_schedule_name(pl->schedule));
  cJSON_AddStringToObject(cfg, "recompute", sim_recompute_name(pl));
  if (pl->recompute_every)
    cJSON_AddNumberToObject(cfg, "recompute_every", pl->recompute_every);
  if (pl->ac == MODEL_RECOMPUTE_MODULES) {
    static const char *const names[] = {"core_attn", "mlp",         "layernorm",     "moe_act",
                                         "mla_up_proj", "moe", "shared_experts"};
    GString *list = g_string_new(NULL);
    for (guint i = 0; i < G_N_ELEMENTS(names); i++)
      if (pl->recompute_modules & (1u << i))
        g_string_append_printf(list, "%s%s", list->len ? "," : "", names[i]);
    cJSON_AddStringToObject(cfg, "recompute_modules", list->len ? list->str : "none");
    g_string_free(list, TRUE);
  }
  cJSON_AddStringToObject(cfg, "ddp", ptd_word_of(sim_ddp_words, (int)pl->ddp));
  cJSON_AddBoolToObject(cfg, "distributed_optimizer", pl->distributed_optimizer);
  cJSON_AddBoolToObject(cfg, "sequence_parallel", pl->sequence_parallel);
  cJSON_AddBoolToObject(cfg, "tp_comm_overlap", pl->tp_comm_overlap);
  cJSON_AddBoolToObject(cfg, "overlap_param_gather", pl->overlap_param_gather);
  cJSON_AddStringToObject(cfg, "attention", sim_plan_attention_ran(pl, profile));
  if (pl->framework != MODEL_FRAMEWORK_MEGATRON || pl->host_op_s > 0 || pl->clock != SIM_CLOCK_SUSTAINED) {
    /* the step as a framework runs it (written where it is not the default) */
    cJSON_AddStringToObject(cfg, "framework", ptd_word_of(sim_framework_words, (int)pl->framework));
    cJSON_AddNumberToObject(cfg, "host_op_us", pl->host_op_s * 1e6);
    cJSON_AddStringToObject(cfg, "clock", ptd_word_of(sim_clock_words, (int)pl->clock));
  }
  if (pl->power_limit_W > 0 && pl->clock == SIM_CLOCK_SUSTAINED && profile->has_power) {
    /* the GPUs' power cap and the clock it allows (the profile's power model) */
    cJSON_AddNumberToObject(cfg, "power_limit_W", pl->power_limit_W);
    cJSON_AddNumberToObject(cfg, "sm_clock_MHz", model_power_clock_MHz(profile, pl->power_limit_W));
    cJSON_AddNumberToObject(cfg, "gemm_clock_ratio", profile->sustained_clock_ratio);
  }
  cJSON_AddBoolToObject(cfg, "scatter_gather", pl->scatter_gather);
  cJSON_AddBoolToObject(cfg, "fusion", pl->fusion);
  cJSON_AddStringToObject(cfg, "precision", sim_precision_name(sim_plan_precision(pl, profile)));
  cJSON_AddStringToObject(cfg, "cluster", cluster->name);
  cJSON_AddStringToObject(cfg, "profile", profile->name);
  cJSON_AddStringToObject(cfg, "network", pl->flow_network ? "flow" : "analytic");
  cJSON_AddStringToObject(cfg, "placement", placement_name(pl));
  cJSON_AddStringToObject(cfg, "workload", pl->workload == SIM_WORKLOAD_LAYERS ? "layers" : "gpt");
  cJSON_AddNumberToObject(cfg, "zero", pl->zero);
  /* DeepSpeed's stage-3 settings (used with zero 3) */
  cJSON_AddNumberToObject(cfg, "zero_prefetch_bucket_size", (double)pl->zk.prefetch_bucket);
  cJSON_AddNumberToObject(cfg, "zero_max_live_parameters", (double)pl->zk.max_live);
  cJSON_AddNumberToObject(cfg, "zero_max_reuse_distance", (double)pl->zk.max_reuse);
  cJSON_AddNumberToObject(cfg, "zero_param_persistence_threshold", (double)pl->zk.persistence);
  cJSON_AddNumberToObject(cfg, "zero_reduce_bucket_size", (double)pl->zk.reduce_bucket);
  cJSON_AddBoolToObject(cfg, "zero_contiguous_gradients", pl->zk.contiguous);
  cJSON_AddBoolToObject(cfg, "zero_trace_fixed", pl->zk.trace_fixed);
  cJSON_AddBoolToObject(cfg, "fsdp", pl->fsdp);
  cJSON_AddNumberToObject(cfg, "hsdp_replicas", pl->fsdp ? pl->hsdp_replicas : 0);
  cJSON_AddStringToObject(cfg, "fsdp_reduce_dtype", pl->fsdp_reduce_fp32 ? "fp32" : "bf16");
  cJSON_AddBoolToObject(cfg, "fsdp_reshard_after_forward", pl->fsdp && pl->reshard_after_forward);
  if (model_is_moe(&pl->model)) {
    cJSON_AddNumberToObject(cfg, "ep", pl->ep);
    cJSON_AddNumberToObject(cfg, "expert_tp", pl->etp);
    cJSON_AddNumberToObject(cfg, "expert_dp", pl->edp);
    cJSON_AddStringToObject(cfg, "moe_token_dispatcher",
                            ptd_word_of(sim_dispatcher_words, (int)pl->moe_dispatcher));
    if (pl->moe_groups) { /* group-limited routing */
      cJSON_AddNumberToObject(cfg, "moe_router_num_groups", pl->moe_groups);
      cJSON_AddNumberToObject(cfg, "moe_router_group_topk", pl->moe_group_topk);
    }
    cJSON_AddNumberToObject(cfg, "moe_imbalance", pl->moe_imbalance);
    cJSON_AddNumberToObject(cfg, "moe_capacity_factor", pl->moe_capacity); /* 0: dropless */
    if (pl->moe_a2a_overlap) /* (only where given: older outputs keep their bytes) */
      cJSON_AddBoolToObject(cfg, "overlap_moe_expert_parallel_comm", TRUE);
  }
  if (pl->stage_times) { /* --stage-times: the times in place of the cost model's, ms */
    cJSON *st = cJSON_AddArrayToObject(cfg, "stage_times_ms");
    const double t[4] = {pl->stage_f_s, pl->stage_b_s, pl->stage_w_s, pl->stage_comm_s};
    for (guint j = 0; j < 4; j++)
      cJSON_AddItemToArray(st, cJSON_CreateNumber(t[j] * 1e3));
  }

  cJSON_AddNumberToObject(o, "iteration_time_s", r->iteration_time_s);
  /* --stage-times: the times are the user's, not the model's FLOPs on the
   * device, so no FLOP rate divides one by the other */
  if (!pl->stage_times) {
    cJSON_AddNumberToObject(o, "tflops_per_gpu", r->tflops_per_gpu);
    cJSON_AddNumberToObject(o, "hardware_tflops_per_gpu", r->hardware_tflops_per_gpu);
    cJSON_AddNumberToObject(o, "percent_of_peak", r->percent_of_peak);
    cJSON_AddNumberToObject(o, "mfu_percent", r->mfu_percent);
    cJSON_AddNumberToObject(o, "hfu_percent", r->hfu_percent);
    cJSON_AddNumberToObject(o, "model_tflops_per_gpu", r->model_tflops_per_gpu);
    cJSON_AddNumberToObject(o, "mfu", r->mfu);
  }
  cJSON_AddBoolToObject(o, "sc21_reproduction", sim_plan_is_sc21_reproduction(pl, profile));
  cJSON_AddNumberToObject(o, "tokens_per_s", r->tokens_per_s);
  cJSON_AddNumberToObject(o, "tokens_per_s_per_gpu", r->tokens_per_s / pl->gpus);
  if (pl->price_per_gpu_hour > 0 && r->tokens_per_s > 0) {
    /* what the GPUs' hours cost per million tokens at the steady pace */
    cJSON_AddNumberToObject(o, "price_per_gpu_hour", pl->price_per_gpu_hour);
    cJSON_AddNumberToObject(o, "cost_per_million_tokens",
                            sim_cost_per_million_tokens(pl->price_per_gpu_hour, pl->gpus, r->tokens_per_s));
  }
  if (!pl->stage_times)
    cJSON_AddNumberToObject(o, "aggregate_pflops", r->aggregate_pflops);
  cJSON_AddNumberToObject(o, "bubble_fraction", r->bubble_fraction);
  cJSON_AddNumberToObject(o, "analytic_bubble_fraction", r->analytic_bubble_fraction);
  if (!pl->zero && pl->schedule != SIM_SCHEDULE_TERAPIPE && pl->pp > 1) {
    /* the zero-bubble paper's measure of the schedule (plan.h) */
    cJSON *ps = obj_add(o, "pipeline_schedule");
    cJSON_AddNumberToObject(ps, "span_s", r->pipeline_span_s);
    cJSON_AddNumberToObject(ps, "bubble_s", r->bubble_s);
    cJSON_AddNumberToObject(ps, "bubble_rate", r->bubble_rate);
    cJSON_AddNumberToObject(ps, "peak_inflight_microbatches", r->peak_inflight_mbs);
    double *per = g_new0(double, pl->pp);
    sim_ptdp_inflight(pl, profile, per);
    cJSON *arr = cJSON_AddArrayToObject(ps, "peak_inflight_per_stage");
    for (guint s = 0; s < pl->pp; s++)
      cJSON_AddItemToArray(arr, cJSON_CreateNumber(per[s]));
    g_free(per);
  }
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
  cJSON_AddNumberToObject(by, "cp", r->bytes_cp); /* context parallelism's ring */
  cJSON_AddNumberToObject(by, "embedding", r->bytes_embedding); /* counted in dp too */
  cJSON *sh = obj_add(o, "sharded_per_gpu"); /* ZeRO-3 and FSDP2: per GPU per iteration */
  cJSON_AddNumberToObject(sh, "param_allgathers", (double)r->shard_gathers);
  cJSON_AddNumberToObject(sh, "param_allgather_bytes", r->shard_gather_bytes);
  cJSON_AddNumberToObject(sh, "grad_reductions", (double)r->shard_reductions);
  cJSON_AddNumberToObject(sh, "grad_reduction_bytes", r->shard_reduce_bytes);
  cJSON_AddNumberToObject(sh, "host_s", r->shard_host_s);
  if (model_is_moe(&pl->model)) {
    cJSON_AddNumberToObject(by, "ep", r->bytes_ep); /* the MoE token dispatch and combine */
    cJSON *moe = obj_add(o, "moe");
    cJSON_AddNumberToObject(moe, "comm_s", r->moe_comm_s);
    cJSON_AddNumberToObject(moe, "comm_fraction", r->iteration_time_s > 0 ? r->moe_comm_s / r->iteration_time_s : 0);
    cJSON_AddNumberToObject(moe, "dispatch_bytes_per_rank", r->moe_a2a_bytes_per_rank);
    if (pl->moe_dispatcher == SIM_DISPATCH_DEEPEP) { /* its InfiniBand and NVLink parts */
      cJSON_AddNumberToObject(moe, "dispatch_ib_bytes_per_rank", r->moe_ib_bytes_per_rank);
      cJSON_AddNumberToObject(moe, "dispatch_nvlink_bytes_per_rank", r->moe_nvl_bytes_per_rank);
    }
    cJSON_AddNumberToObject(moe, "tokens_per_expert", r->moe_expert_tokens);
  }
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
  cJSON_AddNumberToObject(mem, "reserve", pl->memory_reserve_bytes / GIB);
  /* the reserve's and the allocator's mechanisms, where counted */
  if (r->memory.allocator > 0)
    cJSON_AddNumberToObject(mem, "allocator_rounding", r->memory.allocator / GIB);
  if (pl->memory_context_bytes > 0)
    cJSON_AddNumberToObject(mem, "cuda_context", pl->memory_context_bytes / GIB);
  if (pl->memory_nccl_bytes > 0)
    cJSON_AddNumberToObject(mem, "nccl_buffers", pl->memory_nccl_bytes / GIB);
  cJSON_AddBoolToObject(o, "fits_in_memory", r->fits_in_memory);
  if (!r->fits_in_memory) {
    char *why = g_strdup_printf("stage %u needs %.1f GiB, more than the %.1f GiB usable of %s's %.0f GiB (%.1f GiB "
                                "kept back%s)",
                                r->memory_stage, r->memory.total / GIB, sim_plan_usable_bytes(pl, profile) / GIB,
                                profile->name, profile->memory_bytes / GIB, pl->memory_reserve_bytes / GIB,
                                pl->memory_context_bytes > 0 ? ": the CUDA context and NCCL's buffers" : ", --memory-reserve");
    cJSON_AddStringToObject(o, "memory_note", why);
    g_free(why);
  }
  if (pl->tokens > 0) {
    cJSON_AddNumberToObject(o, "tokens", pl->tokens);
    cJSON_AddNumberToObject(o, "training_days", r->training_days);
    cJSON_AddNumberToObject(o, "gpu_hours", r->gpu_hours);
    if (pl->price_per_gpu_hour > 0)
      cJSON_AddNumberToObject(o, "cost", r->gpu_hours * pl->price_per_gpu_hour);
  }
  cJSON *sim = obj_add(o, "simulation");
  cJSON_AddNumberToObject(sim, "ops", (double)r->ops);
  cJSON_AddNumberToObject(sim, "events", (double)r->events);
  cJSON_AddNumberToObject(sim, "simulated_gpus", r->simulated_gpus);
  cJSON_AddBoolToObject(sim, "symmetry", r->symmetric);
  if (r->symmetry_declined[0])
    cJSON_AddStringToObject(sim, "symmetry_declined", r->symmetry_declined);
  if (r->symmetry_approximate[0])
    cJSON_AddStringToObject(sim, "symmetry_approximate", r->symmetry_approximate);
  return o;
}

cJSON *trace_whole_run_json(const RtOptions *o, const RtResult *r) {
  cJSON *w = cJSON_CreateObject();
  cJSON_AddNumberToObject(w, "iterations", (double)r->iterations);
  cJSON_AddNumberToObject(w, "nodes", r->nodes);
  cJSON_AddNumberToObject(w, "switches", r->switches);
  cJSON *f = obj_add(w, "failures");
  cJSON_AddNumberToObject(f, "gpu_per_hour", o->gpu_rate);
  cJSON_AddNumberToObject(f, "node_per_hour", o->node_rate);
  cJSON_AddNumberToObject(f, "switch_per_hour", o->switch_rate);
  cJSON_AddNumberToObject(f, "cluster_per_hour", r->failures_per_hour);
  cJSON_AddNumberToObject(f, "mtbf_hours", r->mtbf_hours);
  cJSON_AddNumberToObject(f, "node_share", r->node_share);
  cJSON_AddStringToObject(f, "default_source",
                          "Llama 3 405B: 419 unexpected interruptions in 54 days on 16,384 H100s (arXiv:2407.21783, "
                          "section 3.3.4, Table 5)");
  cJSON *rs = obj_add(w, "restart");
  cJSON_AddNumberToObject(rs, "relaunch_s", o->restart_s);
  cJSON_AddNumberToObject(rs, "interruption_s", r->restart_s);
  if (o->spares >= 0) {
    cJSON_AddNumberToObject(rs, "spare_nodes", (double)o->spares);
    cJSON_AddNumberToObject(rs, "repair_hours", o->repair_s / 3600.0);
    cJSON_AddNumberToObject(rs, "spares_exhausted_probability", r->spares_exhausted_probability);
  } else
    cJSON_AddStringToObject(rs, "spare_nodes", "unlimited");
  cJSON *c = obj_add(w, "checkpoint");
  cJSON_AddStringToObject(c, "mode", o->async ? "async" : "sync");
  cJSON_AddNumberToObject(c, "bytes", r->checkpoint_bytes);
  cJSON_AddNumberToObject(c, "storage_GBps", o->storage_Bps / 1e9);
  cJSON_AddNumberToObject(c, "storage_node_GBps", o->storage_node_Bps / 1e9);
  cJSON_AddNumberToObject(c, "write_s", r->write_s);
  cJSON_AddNumberToObject(c, "read_s", r->read_s);
  cJSON_AddNumberToObject(c, "blocking_s", r->blocking_s);
  cJSON_AddNumberToObject(c, "young_interval_s", r->young_s);
  cJSON_AddNumberToObject(c, "daly_interval_s", r->daly_s);
  cJSON_AddStringToObject(c, "interval_from", r->every_given ? "--checkpoint-every" : "daly");
  cJSON_AddNumberToObject(c, "every_iterations", (double)r->every_iterations);
  cJSON *e = obj_add(w, "expected");
  cJSON_AddNumberToObject(e, "days", r->expected_days);
  cJSON_AddNumberToObject(e, "ideal_days", r->ideal_days);
  cJSON_AddNumberToObject(e, "gpu_hours", r->gpu_hours);
  cJSON_AddNumberToObject(e, "effective_training_time", r->effective_training_time);
  cJSON_AddNumberToObject(e, "interruptions", r->interruptions);
  cJSON_AddNumberToObject(e, "checkpoints", r->checkpoints);
  cJSON_AddNumberToObject(e, "lost_work_hours", r->lost_work_hours);
  cJSON_AddNumberToObject(e, "checkpoint_hours", r->checkpoint_hours);
  cJSON_AddNumberToObject(e, "restart_hours", r->restart_hours);
  cJSON_AddBoolToObject(e, "exact", r->exact);
  if (r->trials > 0) {
    cJSON *mc = obj_add(w, "monte_carlo");
    cJSON_AddNumberToObject(mc, "trials", r->trials);
    cJSON_AddNumberToObject(mc, "seed", (double)r->seed);
    cJSON_AddNumberToObject(mc, "mean_days", r->mc_mean_days);
    cJSON_AddNumberToObject(mc, "stderr_days", r->mc_stderr_days);
    cJSON_AddNumberToObject(mc, "median_days", r->mc_median_days);
    cJSON_AddNumberToObject(mc, "p90_days", r->mc_p90_days);
    cJSON_AddNumberToObject(mc, "interruptions", r->mc_interruptions);
  }
  return w;
}

static void line_s(GString *out, const char *what, double s, double total) {
  g_string_append_printf(out, "    %-12s %10.4f s  %5.1f%%\n", what, s, total > 0 ? 100.0 * s / total : 0);
}

/* --- the text report, from the run JSON --- */

/* While trace_report_check runs the text report: the first key it read
 * that the JSON lacks (or holds with another type), as "parent.key". */
static _Thread_local gboolean checking;
static _Thread_local char missing[96];

static void note_missing(const cJSON *o, const char *key) {
  if (checking && !missing[0])
    g_snprintf(missing, sizeof missing, "%s%s%s", o && o->string ? o->string : "", o && o->string ? "." : "", key);
}

static double num(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsNumber(v))
    note_missing(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : 0.0;
}

/* A number only some runs have (tokens: with --tokens). */
static double num_or_0(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : 0.0;
}

static guint count(const cJSON *o, const char *key) { return (guint)num(o, key); }

static guint count_at(const cJSON *array, int i) {
  const cJSON *v = cJSON_GetArrayItem(array, i);
  return cJSON_IsNumber(v) ? (guint)v->valuedouble : 0;
}

static const char *str(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsString(v) || !v->valuestring[0])
    note_missing(o, key);
  return cJSON_IsString(v) ? v->valuestring : "";
}

static gboolean flag(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsBool(v))
    note_missing(o, key);
  return cJSON_IsTrue(v);
}

static gboolean is(const cJSON *o, const char *key, const char *value) { return strcmp(str(o, key), value) == 0; }

void trace_slicing_from_json(const cJSON *tp, SimTeraPipeSlicing *s_out) {
  SimTeraPipeSlicing s;
  sim_terapipe_slicing_init(&s);
  const cJSON *batch = cJSON_GetObjectItemCaseSensitive(tp, "batch_slices");
  const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(tp, "token_slices");
  const cJSON *b, *row = cJSON_IsArray(tokens) ? tokens->child : NULL;
  cJSON_ArrayForEach(b, batch) {
    guint v = cJSON_IsNumber(b) ? (guint)b->valuedouble : 0;
    g_array_append_val(s.batch, v);
    GArray *t = g_array_new(FALSE, FALSE, sizeof(guint));
    const cJSON *x;
    cJSON_ArrayForEach(x, row) {
      guint len = cJSON_IsNumber(x) ? (guint)x->valuedouble : 0;
      g_array_append_val(t, len);
    }
    g_ptr_array_add(s.tokens, t);
    row = row ? row->next : NULL;
  }
  *s_out = s;
}

/* TeraPipe's slicing as the JSON holds it, in words (terapipe/terapipe.h). */
static void slicing_text(GString *out, const cJSON *tp) {
  SimTeraPipeSlicing s;
  trace_slicing_from_json(tp, &s);
  g_string_append(out, "slicing    ");
  sim_terapipe_slicing_describe(&s, FALSE, out);
  g_string_append_c(out, '\n');
  sim_terapipe_slicing_clear(&s);
  double predicted = num_or_0(tp, "dp_predicted_latency_s");
  if (predicted > 0)
    g_string_append_printf(out, "           by the DP (--slices auto): predicted %.4f s to the flush; context fit error "
                                "max %.2f%%, mean %.2f%%\n",
                           predicted, 100 * num(tp, "context_fit_max_rel_error"),
                           100 * num(tp, "context_fit_mean_rel_error"));
}

/* The shape trace_shape_json wrote, read back. */
static ModelShape shape_from_json(const cJSON *cfg) {
  return (ModelShape){.layers = count(cfg, "layers"),
                      .hidden = count(cfg, "hidden"),
                      .heads = count(cfg, "heads"),
                      .seq_len = count(cfg, "seq_len"),
                      .vocab = count(cfg, "vocab"),
                      .ffn_hidden = count(cfg, "ffn_hidden"),
                      .query_groups = count(cfg, "query_groups"),
                      .kv_channels = count(cfg, "kv_channels"),
                      .mlp = is(cfg, "mlp", "swiglu") ? MODEL_MLP_SWIGLU : MODEL_MLP_GELU,
                      .norm = is(cfg, "norm", "rmsnorm") ? MODEL_NORM_RMSNORM : MODEL_NORM_LAYERNORM,
                      .position = is(cfg, "position_embedding", "rope") ? MODEL_POSITION_ROTARY : MODEL_POSITION_LEARNED,
                      .untied = !flag(cfg, "tied_embeddings"),
                      .no_bias = !flag(cfg, "linear_bias")};
}

/* The second model line, for a shape other than Megatron's GPT
 * (model_is_gpt, the rule SC21 reproductions start from): what differs
 * from it. */
static void architecture_text(GString *out, const cJSON *cfg) {
  ModelShape m = shape_from_json(cfg);
  if (model_is_gpt(&m))
    return;
  guint a = m.heads, g = model_groups(&m), d = model_head_dim(&m), f = model_ffn(&m);
  gboolean swiglu = m.mlp == MODEL_MLP_SWIGLU, rms = m.norm == MODEL_NORM_RMSNORM;
  gboolean rope = m.position == MODEL_POSITION_ROTARY, tied = !m.untied, bias = !m.no_bias;
  g_string_append(out, "           ");
  if (cJSON_GetObjectItemCaseSensitive(cfg, "kv_lora_rank"))
    g_string_append_printf(out, "multi-head latent attention (query rank %u, key/value rank %u, rotary %u, value %u)",
                           count(cfg, "q_lora_rank"), count(cfg, "kv_lora_rank"), count(cfg, "qk_rope_head_dim"),
                           count(cfg, "v_head_dim"));
  else if (g == a)
    g_string_append_printf(out, "multi-head attention");
  else if (g == 1)
    g_string_append_printf(out, "multi-query attention");
  else
    g_string_append_printf(out, "grouped-query attention (%u key/value heads)", g);
  char mlp[64];
  guint dense = count(cfg, "layers") - (cJSON_GetObjectItemCaseSensitive(cfg, "moe_layers") ? count(cfg, "moe_layers") : 0);
  if (dense == 0) /* every layer's MLP is its experts (the experts line) */
    g_snprintf(mlp, sizeof mlp, "expert MLPs %s", swiglu ? "SwiGLU" : "GeLU");
  else if (dense < count(cfg, "layers"))
    g_snprintf(mlp, sizeof mlp, "MLP %u %s in the %u dense layers", f, swiglu ? "SwiGLU" : "GeLU", dense);
  else
    g_snprintf(mlp, sizeof mlp, "MLP %u %s", f, swiglu ? "SwiGLU" : "GeLU");
  g_string_append_printf(out, ", head dim %u; %s; %s; %s positions; %s logits; %s\n", d, mlp,
                         rms ? "RMSNorm" : "layernorm", rope ? "rotary" : "learned", tied ? "tied" : "untied",
                         bias ? "linear biases" : "no linear biases");
}

/* An uneven split's layers in words, equal neighbours together: "15 on
 * stage 0, 16 on stages 1-6, 15 on stage 7"; nothing where `per` is not
 * an array. */
static void stages_text(GString *out, const cJSON *per, const char *unit, const char *lead, const char *tail) {
  int n = cJSON_IsArray(per) ? cJSON_GetArraySize(per) : 0;
  if (n == 0)
    return;
  g_string_append(out, lead);
  for (int i = 0; i < n;) {
    guint v = count_at(per, i);
    int j = i;
    while (j + 1 < n && count_at(per, j + 1) == v)
      j++;
    if (j > i)
      g_string_append_printf(out, "%s%u on %ss %d-%d", i ? ", " : "", v, unit, i, j);
    else
      g_string_append_printf(out, "%s%u on %s %d", i ? ", " : "", v, unit, i);
    i = j + 1;
  }
  g_string_append_printf(out, "%s\n", tail);
}

/* The whole run in words, from its JSON object. */
static void whole_run_text(GString *out, const cJSON *w) {
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(w, "failures");
  const cJSON *rs = cJSON_GetObjectItemCaseSensitive(w, "restart");
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(w, "checkpoint");
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(w, "expected");
  const cJSON *mc = cJSON_GetObjectItemCaseSensitive(w, "monte_carlo");
  char a[32];
  g_string_append_printf(out, "whole run  %.1f days expected (%.1f without interruptions): effective training time "
                              "%.1f%%, %s GPU-hours",
                         num(e, "days"), num(e, "ideal_days"), 100 * num(e, "effective_training_time"),
                         ptd_format_count(num(e, "gpu_hours"), a, sizeof a));
  if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(e, "cost")))
    g_string_append_printf(out, ", $%s", ptd_format_count(num(e, "cost"), a, sizeof a));
  g_string_append_c(out, '\n');
  g_string_append_printf(out, "           %.0f interruptions (one every %.2f h on %u nodes and %u switches), each %.0f s "
                              "to restart and read back, plus the work since the checkpoint\n",
                         num(e, "interruptions"), num(f, "mtbf_hours"), count(w, "nodes"), count(w, "switches"),
                         num(rs, "interruption_s"));
  g_string_append_printf(out, "           lost %.1f h of work, %.1f h in restarts, %.1f h blocked by %.0f checkpoints\n",
                         num(e, "lost_work_hours"), num(e, "restart_hours"), num(e, "checkpoint_hours"),
                         num(e, "checkpoints"));
  gboolean async = strcmp(str(c, "mode"), "async") == 0;
  g_string_append_printf(out, "checkpoint %s %s every %u iterations (%s; Young %.0f s, Daly %.0f s of work): write "
                              "%.1f s, blocks %.1f s\n",
                         ptd_format_si(num(c, "bytes"), "B", a, sizeof a), async ? "snapshot" : "written",
                         count(c, "every_iterations"),
                         strcmp(str(c, "interval_from"), "daly") == 0 ? "Daly's optimum" : "as given",
                         num(c, "young_interval_s"), num(c, "daly_interval_s"), num(c, "write_s"),
                         num(c, "blocking_s"));
  if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(rs, "spare_nodes")))
    g_string_append_printf(out, "spares     %u hot spare nodes, %.0f h to repair: all in use %.2g of the time\n",
                           count(rs, "spare_nodes"), num(rs, "repair_hours"), num(rs, "spares_exhausted_probability"));
  if (mc)
    g_string_append_printf(out, "trials     %u Monte-Carlo runs (seed %.0f): median %.2f days, 90th percentile %.2f, "
                                "mean %.2f +- %.2f\n",
                           count(mc, "trials"), num(mc, "seed"), num(mc, "median_days"), num(mc, "p90_days"),
                           num(mc, "mean_days"), num(mc, "stderr_days"));
}

void trace_report_text(GString *out, const cJSON *run) {
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(run, "config");
  const cJSON *tp = cJSON_GetObjectItemCaseSensitive(run, "terapipe");
  gboolean tera = is(cfg, "schedule", "terapipe");
  const char *recompute = str(cfg, "recompute");
  const char *fusion = flag(cfg, "fusion") ? "on" : "off";
  guint p = count(cfg, "pp"), d = count(cfg, "dp"), zero = count(cfg, "zero");
  g_string_append_printf(out, "model      %u layers, hidden %u, %u heads, seq %u, vocab %u: %.2fB parameters\n",
                         count(cfg, "layers"), count(cfg, "hidden"), count(cfg, "heads"), count(cfg, "seq_len"),
                         count(cfg, "vocab"), num(cfg, "parameters") / 1e9);
  architecture_text(out, cfg);
  guint cp = count(cfg, "cp");
  char cps[32] = "";
  if (cp > 1)
    g_snprintf(cps, sizeof cps, " x cp %u", cp);
  g_string_append_printf(out, "parallel   %u GPUs = t %u%s x p %u x d %u on %s (%s, %s, %s attention)\n",
                         count(cfg, "gpus"), count(cfg, "tp"), cps, p, d, str(cfg, "cluster"), str(cfg, "profile"),
                         str(cfg, "precision"), str(cfg, "attention"));
  if (cJSON_GetObjectItemCaseSensitive(cfg, "ep")) {
    double cf = num(cfg, "moe_capacity_factor");
    char drop[48] = "dropless";
    if (cf > 0)
      g_snprintf(drop, sizeof drop, "capacity factor %.2f", cf);
    g_string_append_printf(out, "experts    %u routed experts of width %u, top %u, in %u of %u layers%s; per stage "
                                "expert-tp %u x ep %u x expert-dp %u;\n           %s dispatcher%s, imbalance %.2f, %s\n",
                           count(cfg, "experts"), count(cfg, "moe_ffn_hidden"), count(cfg, "moe_topk"),
                           count(cfg, "moe_layers"), count(cfg, "layers"),
                           num(cfg, "moe_shared_ffn_hidden") > 0 ? " (and shared experts)" : "",
                           count(cfg, "expert_tp"), count(cfg, "ep"), count(cfg, "expert_dp"),
                           str(cfg, "moe_token_dispatcher"),
                           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "overlap_moe_expert_parallel_comm"))
                               ? " (each all-to-all behind another microbatch's compute, combined 1F1B)"
                               : "",
                           num(cfg, "moe_imbalance"), drop);
    if (cJSON_GetObjectItemCaseSensitive(cfg, "moe_router_num_groups"))
      g_string_append_printf(out, "           group-limited routing: each token to experts of %u of %u groups\n",
                             count(cfg, "moe_router_group_topk"), count(cfg, "moe_router_num_groups"));
  }
  if (cp > 1)
    g_string_append_printf(out, "           context parallel: each GPU holds %u of every sequence's %u tokens, "
                                "attention as a ring over %u GPUs\n",
                           count(cfg, "seq_len") / cp, count(cfg, "seq_len"), cp);
  g_string_append_printf(out, "network    %s, placement %s\n",
                         is(cfg, "network", "flow") ? "flow (max-min fair flows on the cluster's links)"
                                                    : "analytic (alpha-beta per tier, no contention)",
                         zero ? "dp (one rank per GPU)" : str(cfg, "placement"));
  const cJSON *declined = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(run, "simulation"),
                                                           "symmetry_declined");
  if (cJSON_IsString(declined))
    g_string_append_printf(out, "           every GPU simulated: the symmetry shortcut would not be exact here (%s)\n",
                           declined->valuestring);
  const cJSON *approx = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(run, "simulation"),
                                                         "symmetry_approximate");
  if (cJSON_IsString(approx))
    g_string_append_printf(out, "           the symmetry shortcut may differ slightly here (%s)\n", approx->valuestring);
  guint B = count(cfg, "global_batch");
  if (tera)
    g_string_append_printf(out, "batch      %u sequences, %u per pipeline, in batch slices (slicing below)%s\n", B,
                           d ? B / d : 0, is(cfg, "workload", "layers") ? "; the layers alone (TeraPipe's benchmark)" : "");
  else if (zero)
    g_string_append_printf(out, "batch      %u sequences, microbatch %u on each GPU\n", B, count(cfg, "micro_batch"));
  else
    g_string_append_printf(out, "batch      %u sequences, microbatch %u, %u microbatch%s per pipeline\n", B,
                           count(cfg, "micro_batch"), count(cfg, "microbatches"),
                           count(cfg, "microbatches") == 1 ? "" : "es");
  stages_text(out, cJSON_GetObjectItemCaseSensitive(cfg, "layers_per_stage"), "stage", "layers     ",
              " (an uneven split)");
  /* where the route's virtual stages run, as the schedule places them */
  const SimScheduleInfo *placed = sim_schedule_find(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "schedule")));
  stages_text(out, cJSON_GetObjectItemCaseSensitive(cfg, "layers_per_virtual_stage"), "virtual stage",
              "           by model chunk: ",
              placed && placed->chunks == SIM_CHUNKS_TWO
                  ? (placed->copies ? " (stage s holds virtual stages s and p - 1 - s, one per direction)"
                                    : " (stage s holds virtual stages s and 2p - 1 - s)")
                  : " (chunk c of stage s is virtual stage c p + s)");
  if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cfg, "pipeline_layout")))
    g_string_append_printf(out, "           layout %s (Megatron-Core's --pipeline-model-parallel-layout)\n",
                           str(cfg, "pipeline_layout"));
  if (zero)
    g_string_append_printf(out,
                           "schedule   ZeRO stage %u over %u GPUs (%s sharded), %u microbatch%s accumulated, recompute "
                           "%s, fusion %s\n\n",
                           zero, d,
                           zero == 1   ? "optimizer state"
                           : zero == 2 ? "optimizer state and gradients"
                                       : "optimizer state, gradients and parameters",
                           count(cfg, "microbatches"), count(cfg, "microbatches") == 1 ? "" : "es",
                           recompute, fusion);
  else {
    g_string_append_printf(out, "schedule   %s", str(cfg, "schedule"));
    if (is(cfg, "schedule", "interleaved"))
      g_string_append_printf(out, " (%u chunks per GPU)", count(cfg, "chunks"));
    if (tera)
      g_string_append_printf(out, ", recompute %s, sends: one rank per hop, broadcast in the group, fusion %s\n\n",
                             recompute, fusion);
    else if (flag(cfg, "fsdp")) {
      guint R = count(cfg, "hsdp_replicas"), dpc = d * (cp ? cp : 1);
      g_string_append_printf(out, ", recompute %s, %s over %u GPUs%s", recompute, R > 1 ? "HSDP (FSDP2)" : "FSDP2",
                             R > 1 ? dpc / R : dpc, cp > 1 ? " (d x cp)" : "");
      if (R > 1)
        g_string_append_printf(out, ", replicated %u times", R);
      g_string_append_printf(out, ", gradients reduced in %s, parameters %s after forward, fusion %s\n\n",
                             str(cfg, "fsdp_reduce_dtype"),
                             flag(cfg, "fsdp_reshard_after_forward") ? "resharded" : "kept", fusion);
    } else
      g_string_append_printf(out, ", recompute %s, %s DDP%s%s, %s%s, fusion %s\n\n", recompute, str(cfg, "ddp"),
                             flag(cfg, "distributed_optimizer") ? " with the distributed optimizer" : "",
                             flag(cfg, "overlap_param_gather") ? " (parameter all-gather overlapped with the forward)"
                                                               : "",
                             flag(cfg, "sequence_parallel")  ? "sequence parallel"
                             : flag(cfg, "scatter_gather") ? "scatter/gather on"
                                                           : "scatter/gather off",
                             flag(cfg, "tp_comm_overlap") ? " (its communication pipelined with the GEMMs)" : "",
                             fusion);
  }
  double T = num(run, "iteration_time_s");
  g_string_append_printf(out, "iteration  %.4f s\n", T);
  gboolean fp8 = is(cfg, "precision", "fp8");
  /* SC21 reproductions (and traces written before the key existed) lead
   * with Eq. 3, as the paper reports; every other run with model FLOPs. */
  if (cJSON_GetObjectItemCaseSensitive(cfg, "stage_times_ms")) {
    g_string_append(out, "throughput none: --stage-times gives the stages' times, not the model's FLOPs on a device\n");
  } else if (!cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(run, "sc21_reproduction"))) {
    g_string_append_printf(out, "throughput %.1f TFLOP/s per GPU (%.1f%% of %s), %.1f PFLOP/s aggregate, by SC21's "
                                "Eq. 3\n           (which counts a recomputation forward whether or not one runs)\n",
                           num(run, "tflops_per_gpu"), num(run, "percent_of_peak"), fp8 ? "the 16-bit peak" : "peak",
                           num(run, "aggregate_pflops"));
    g_string_append_printf(out, "           %.1f TFLOP/s per GPU executed (hardware): HFU %.1f%% of %s\n",
                           num(run, "hardware_tflops_per_gpu"), num(run, "hfu_percent"), fp8 ? "the FP8 peak" : "peak");
    g_string_append_printf(out,
                           "           MFU %.1f%% of %s: the model's FLOPs (forward and backward, attention "
                           "included), no recomputation\n",
                           num(run, "mfu_percent"), fp8 ? "the FP8 peak" : "peak");
  } else {
    double model = num(run, "model_tflops_per_gpu");
    g_string_append_printf(out, "throughput %.1f TFLOP/s per GPU of model FLOPs: MFU %.1f%% of %s, %.1f PFLOP/s "
                                "aggregate\n           (the model's FLOPs: forward and backward, attention included, "
                                "no recomputation)\n",
                           model, 100 * num(run, "mfu"), fp8 ? "the FP8 peak" : "peak",
                           model * count(cfg, "gpus") / 1000);
    g_string_append_printf(out, "           %.1f TFLOP/s per GPU executed (hardware): HFU %.1f%% of %s\n",
                           num(run, "hardware_tflops_per_gpu"), num(run, "hfu_percent"), fp8 ? "the FP8 peak" : "peak");
    g_string_append_printf(out, "           %.1f TFLOP/s per GPU by SC21's Eq. 3 (%.1f%% of %s: it counts a "
                                "recomputation forward always)\n",
                           num(run, "tflops_per_gpu"), num(run, "percent_of_peak"), fp8 ? "the 16-bit peak" : "peak");
  }
  /* (a trace written before tokens_per_s_per_gpu: from the GPUs) */
  g_string_append_printf(out, "tokens     %.0f tokens/s, %.0f per GPU\n", num(run, "tokens_per_s"),
                         cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(run, "tokens_per_s_per_gpu"))
                             ? num(run, "tokens_per_s_per_gpu")
                             : num(run, "tokens_per_s") / count(cfg, "gpus"));
  if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(run, "cost_per_million_tokens")))
    g_string_append_printf(out, "cost       $%.2f per million tokens at $%.2f per GPU-hour\n",
                           num(run, "cost_per_million_tokens"), num(run, "price_per_gpu_hour"));
  double bubble = num(run, "bubble_fraction"), analytic = num(run, "analytic_bubble_fraction");
  const SimScheduleInfo *row = sim_schedule_find(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "schedule")));
  if (tera) {
    /* Token pipeline: M slices (all batch slices) on K = p cells. */
    guint M = count(tp, "token_slices_in_pipeline");
    g_string_append_printf(out, "bubble     %.4f measured (idle / busy), %.4f analytic (K-1)/M for M = %u token slices "
                                "on K = %u cells\n",
                           bubble, analytic, M, p);
    g_string_append_printf(out, "idle       %.4f measured (idle / flush), %.4f analytic (K-1)/(M+K-1)\n",
                           num(tp, "idle_fraction"), M > 0 ? (p - 1.0) / (M + p - 1.0) : 0);
  } else if (zero)
    g_string_append_printf(out, "bubble     none (no pipeline; time waiting for parameters counts as dp comm)\n");
  else
  {
    g_string_append_printf(out, "bubble     %.4f measured (idle / busy time of the busiest stage), %.4f analytic %s\n",
                           bubble, analytic,
                           row && row->chunks == SIM_CHUNKS_ANY ? "(p-1)/(v m)" : "(p-1)/m");
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(run, "pipeline_schedule");
    gboolean classic = row && row->backward == SIM_BACKWARD_WHOLE;
    if (ps && (!classic || cJSON_GetObjectItemCaseSensitive(cfg, "stage_times_ms")))
      g_string_append_printf(out,
                             "           %.4f of the longest stage span idle (the zero-bubble paper's rate): %.3f ms "
                             "of %.3f ms; peak %.2f microbatches in flight\n",
                             num(ps, "bubble_rate"), 1e3 * num(ps, "bubble_s"), 1e3 * num(ps, "span_s"),
                             num(ps, "peak_inflight_microbatches"));
  }
  g_string_append_printf(out, "time on the critical GPU (stage %u):\n", count(run, "critical_stage"));
  const cJSON *tb = cJSON_GetObjectItemCaseSensitive(run, "time_breakdown_s");
  const cJSON *by = cJSON_GetObjectItemCaseSensitive(run, "bytes_per_iteration");
  double bytes_tp = num(by, "tp"), bytes_pp = num(by, "pp"), bytes_dp = num(by, "dp"), emb = num(by, "embedding");
  line_s(out, "compute", num(tb, "compute"), T);
  line_s(out, cp > 1 ? "tp+cp comm" : "tp comm", num(tb, "tp_comm"), T);
  line_s(out, "pp comm", num(tb, "pp_comm"), T);
  /* Without data parallelism the only gradient all-reduce is the tied
   * embedding's, between the first and the last stage. */
  line_s(out, d > 1 || emb <= 0 ? "dp comm" : "embedding", num(tb, "dp_comm"), T);
  line_s(out, "optimizer", num(tb, "optimizer"), T);
  line_s(out, "bubble", num(tb, "bubble"), T);
  const cJSON *moe = cJSON_GetObjectItemCaseSensitive(run, "moe");
  if (moe) {
    char x[32], y[32];
    g_string_append_printf(out, "moe comm   %.4f s (%.1f%% of the iteration; in tp comm above where exposed): the "
                                "critical stage's token dispatch and combine,\n           each at its time alone; "
                                "%s in all, one dispatch sends %s off each rank; %.0f tokens per local expert\n",
                           num(moe, "comm_s"), 100 * num(moe, "comm_fraction"),
                           ptd_format_si(num(by, "ep"), "B", x, sizeof x),
                           ptd_format_si(num(moe, "dispatch_bytes_per_rank"), "B", y, sizeof y),
                           num(moe, "tokens_per_expert"));
    if (cJSON_GetObjectItemCaseSensitive(moe, "dispatch_ib_bytes_per_rank"))
      g_string_append_printf(out, "           DeepEP: of it %s across InfiniBand, %s forwarded over NVLink\n",
                             ptd_format_si(num(moe, "dispatch_ib_bytes_per_rank"), "B", x, sizeof x),
                             ptd_format_si(num(moe, "dispatch_nvlink_bytes_per_rank"), "B", y, sizeof y));
  }
  const cJSON *fx = cJSON_GetObjectItemCaseSensitive(run, "step_effects_s");
  if (fx) {
    const char *fw = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "framework"));
    const char *clock = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "clock"));
    double host = num_or_0(cfg, "host_op_us"), ck = num(fx, "clock"), mb = num(fx, "framework_kernels"),
           ho = num(fx, "host_launch"), co = num(fx, "contention");
    g_string_append_printf(out, "step       %s kernels, ",
                           g_strcmp0(fw, "eager") == 0 ? "PyTorch eager's" : "Megatron's");
    if (host > 0)
      g_string_append_printf(out, "the host %.1f us per launch", host);
    else
      g_string_append_printf(out, "launches free");
    g_string_append_printf(out, ", %s clock", clock ? clock : "sustained");
    const cJSON *cap = cJSON_GetObjectItemCaseSensitive(cfg, "power_limit_W");
    if (cap)
      g_string_append_printf(out, " under a %.0f W power cap (SM clock %.0f MHz, GEMMs at %.3f of their burst rate)",
                             cap->valuedouble, num(cfg, "sm_clock_MHz"), num(cfg, "gemm_clock_ratio"));
    g_string_append_printf(out,
                           "\n           what each adds to the iteration (the others kept): clock %.4f s (%.1f%%), the "
                           "framework's own kernels %.4f s (%.1f%%),\n           host launches %.4f s (%.1f%%), "
                           "collectives sharing the GPU %.4f s (%.1f%%)\n",
                           ck, T > 0 ? 100 * ck / T : 0, mb, T > 0 ? 100 * mb / T : 0, ho, T > 0 ? 100 * ho / T : 0, co,
                           T > 0 ? 100 * co / T : 0);
  }
  char a[32], b[32], c[32], e[32];
  g_string_append_printf(out, "traffic    tp %s, pp %s, ", ptd_format_si(bytes_tp, "B", a, sizeof a),
                         ptd_format_si(bytes_pp, "B", b, sizeof b));
  if (cp > 1) {
    char f[32];
    g_string_append_printf(out, "cp ring %s, ", ptd_format_si(num(by, "cp"), "B", f, sizeof f));
  }
  if (cJSON_GetObjectItemCaseSensitive(by, "ep")) { /* a mixture of experts' token dispatch and combine */
    char f[32];
    g_string_append_printf(out, "ep %s, ", ptd_format_si(num(by, "ep"), "B", f, sizeof f));
  }
  if (d > 1 && emb > 0)
    g_string_append_printf(out, "dp %s (%s of it the tied-embedding all-reduce) per iteration\n",
                           ptd_format_si(bytes_dp, "B", c, sizeof c), ptd_format_si(emb, "B", e, sizeof e));
  else if (d > 1 || bytes_dp <= 0)
    g_string_append_printf(out, "dp %s per iteration\n", ptd_format_si(bytes_dp, "B", c, sizeof c));
  else
    g_string_append_printf(out, "tied-embedding all-reduce %s per iteration (no data parallelism)\n",
                           ptd_format_si(bytes_dp, "B", c, sizeof c));
  const cJSON *sh = cJSON_GetObjectItemCaseSensitive(run, "sharded_per_gpu");
  if (num(sh, "param_allgathers") > 0 || num(sh, "grad_reductions") > 0)
    g_string_append_printf(out, "sharded    per GPU: %.0f parameter all-gathers (%s), %.0f gradient reductions (%s), host %.4f s\n",
                           num(sh, "param_allgathers"), ptd_format_si(num(sh, "param_allgather_bytes"), "B", a, sizeof a),
                           num(sh, "grad_reductions"), ptd_format_si(num(sh, "grad_reduction_bytes"), "B", b, sizeof b),
                           num(sh, "host_s"));
  const cJSON *bi = cJSON_GetObjectItemCaseSensitive(run, "bisection_bandwidth_GBps");
  g_string_append_printf(out, "bisection  pp %s, dp %s\n", ptd_format_si(num(bi, "pp") * 1e9, "B/s", a, sizeof a),
                         ptd_format_si(num(bi, "dp") * 1e9, "B/s", b, sizeof b));
  const cJSON *mem = cJSON_GetObjectItemCaseSensitive(run, "memory_per_gpu_GiB");
  g_string_append_printf(out,
                         "memory     %.1f GiB on stage %u (weights %.1f, gradients %.1f, optimizer %.1f, "
                         "activations %.1f): %s\n",
                         num(mem, "total"), count(mem, "stage"), num(mem, "weights"), num(mem, "gradients"),
                         num(mem, "optimizer"), num(mem, "activations"),
                         flag(run, "fits_in_memory") ? "fits" : "DOES NOT FIT");
  if (num_or_0(run, "tokens") > 0) {
    g_string_append_printf(out, "training   %s tokens in %.1f days, %s GPU-hours",
                           ptd_format_count(num(run, "tokens"), a, sizeof a), num(run, "training_days"),
                           ptd_format_count(num(run, "gpu_hours"), b, sizeof b));
    if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(run, "cost")))
      g_string_append_printf(out, ", $%s", ptd_format_count(num(run, "cost"), a, sizeof a));
    g_string_append_c(out, '\n');
  }
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(run, "stragglers");
  if (st) {
    g_string_append_printf(out, "stragglers GPU %u (node %u, stage %u) the slowest at %.3f of its speed%s; critical "
                                "stage %u\n",
                           count(st, "slowest_gpu"), count(st, "slowest_gpu_node"), count(st, "slowest_gpu_stage"),
                           num(st, "slowest_gpu_speed"), num(st, "slowest_link_factor") < 1 ? ", slow links" : "",
                           count(st, "critical_stage"));
    g_string_append_printf(out, "           cost %.4f s per iteration (%.2f%%) against %.4f s without them\n",
                           num(st, "cost_s"), 100 * num(st, "cost_fraction"), num(st, "iteration_time_s_without"));
  }
  const cJSON *whole = cJSON_GetObjectItemCaseSensitive(run, "whole_run");
  if (whole)
    whole_run_text(out, whole);
  if (tera)
    slicing_text(out, tp);
}

gboolean trace_report_check(const cJSON *run, GError **error) {
  if (!cJSON_IsObject(run) || !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(run, "config"))) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "its result has no config");
    return FALSE;
  }
  /* the shape's divisors first: the text divides by them (head dim = hidden / heads) */
  static const char *const whole[] = {"layers", "hidden", "heads", "seq_len", "vocab", "gpus", "global_batch"};
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(run, "config");
  for (gsize i = 0; i < G_N_ELEMENTS(whole); i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, whole[i]);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 1 && v->valuedouble <= G_MAXUINT32)) {
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                  "its result's config.%s is %s, where a run has a whole number of 1 or more: it is edited or "
                  "written by another version of ptdsim; write it again with ptdsim run --trace",
                  whole[i], v ? "not a positive number" : "missing");
      return FALSE;
    }
  }
  GString *scratch = g_string_new(NULL);
  checking = TRUE;
  missing[0] = '\0';
  trace_report_text(scratch, run);
  checking = FALSE;
  g_string_free(scratch, TRUE);
  if (missing[0]) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "its result lacks '%s' (or holds another type there): it is incomplete, edited, or written by another "
                "version of ptdsim; write it again with ptdsim run --trace",
                missing);
    return FALSE;
  }
  return trace_run_json_check(run, error);
}

/* The first number of `node` (recursively) that is negative, NaN, infinite
 * or null, its key path in `path`; FALSE when there is none. */
static gboolean find_bad_number(const cJSON *node, GString *path, double *value) {
  for (const cJSON *c = node->child; c; c = c->next) {
    gsize len = path->len;
    g_string_append_printf(path, "%s%s", path->len ? "." : "", c->string ? c->string : "[]");
    if (cJSON_IsNull(c) || (cJSON_IsNumber(c) && !(isfinite(c->valuedouble) && c->valuedouble >= 0))) {
      *value = cJSON_IsNull(c) ? NAN : c->valuedouble;
      return TRUE;
    }
    if (find_bad_number(c, path, value))
      return TRUE;
    g_string_truncate(path, len);
  }
  return FALSE;
}

gboolean trace_run_json_check(const cJSON *run, GError **error) {
  GString *path = g_string_new(NULL);
  double v = 0;
  gboolean bad = find_bad_number(run, path, &v);
  if (bad)
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "the simulated run reports %s = %g (iteration_time_s %g): the inputs are outside what ptdsim models; "
                "check the profile's and the cluster's numbers (doc/inputs.md)",
                path->str, v, cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(run, "iteration_time_s")));
  g_string_free(path, TRUE);
  return !bad;
}
