/* ptdsim — memory of a PTD-P plan: each stage's orders (ZB's heuristics
 * timed on the cost model) walked for the activations they hold, the
 * parameters, gradients and optimizer state; a microbatch's pass times,
 * --activation-limit's check, the schedule's CSV (build.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"

/* One layer's activations of one microbatch (*full) and what of them a
 * split backward keeps from B to W (*kept), in bytes; with full
 * recomputation the recomputed activations are all kept (B frees none). */
static void wgrad_share(const SimPlan *pl, const ModelProfile *profile, double *full, double *kept) {
  ModelLayerOptions lo = sim_plan_layer_options(pl, profile);
  ModelShape local = ptdp_rank_shape(pl);
  ModelMemoryRequest req = {.t = pl->tp,
                            .b = pl->micro_batch,
                            .fp32_softmax = model_softmax_fp32(&pl->model, pl->tp, pl->micro_batch, &lo),
                            .selective = pl->selective,
                            .sequence_parallel = pl->sequence_parallel,
                            .flash = lo.attention == MODEL_ATTENTION_FLASH,
                            .fp8 = lo.fp8};
  sim_ptdp_policy_request(pl, sim_plan_stage_layers(pl, 0), &req);
  *full = model_layer_held_bytes(&local, &req);
  *kept = pl->recompute || model_memory_op_list(&local, &req) ? *full : model_layer_wgrad_kept_bytes(&local, &req);
}

double sim_ptdp_policy_recompute_s(const SimPlan *pl, const ModelLayerCost *c) {
  if (pl->ac == MODEL_RECOMPUTE_OP)
    return c->fwd.op_sac_s;
  if (pl->ac != MODEL_RECOMPUTE_MODULES)
    return 0;
  guint r = pl->recompute_modules;
  return (r & MODEL_RC_CORE_ATTN ? c->core.seg_s[0] : 0) + (r & MODEL_RC_MLP ? c->fwd.mlp_s : 0) +
         (r & MODEL_RC_LAYERNORM ? c->fwd.norms_s : 0) + (r & MODEL_RC_MLA_UP_PROJ ? c->fwd.mla_up_s : 0);
}

double sim_ptdp_policy_recompute_moe_s(const SimPlan *pl, const ModelLayerCost *attn, const ModelMoeCost *moe) {
  if (pl->ac != MODEL_RECOMPUTE_MODULES)
    return 0;
  guint r = pl->recompute_modules;
  double s = sim_ptdp_policy_recompute_s(pl, attn); /* (an MoE layer's attention block has no dense MLP) */
  if (r & MODEL_RC_MOE) /* the block whole, the shared experts and the activation in it */
    return s + moe->fwd_route_s + moe->fwd_experts_s + moe->fwd_unpermute_s;
  return s + (r & MODEL_RC_SHARED_EXPERTS ? moe->fwd_shared_s : 0) + (r & MODEL_RC_MOE_ACT ? moe->fwd_act_s : 0);
}

gboolean sim_ptdp_layer_checkpointed(const SimPlan *pl, guint layer) {
  return pl->ac == MODEL_RECOMPUTE_LAYER && (layer + 1) % pl->recompute_every == 0;
}

void sim_ptdp_policy_request(const SimPlan *pl, guint stage_layers, ModelMemoryRequest *req) {
  req->eager = pl->framework == MODEL_FRAMEWORK_EAGER;
  req->ac = pl->ac;
  req->every = pl->recompute_every;
  req->modules = pl->recompute_modules;
  req->stage_layers = stage_layers;
}

/* Eager with a pipeline (torch.distributed.pipelining, December 2024):
 * each virtual stage keeps its output of every microbatch to the step's end
 * (output_chunks; the last one its logits), so the stage's peak is walked
 * again with them, a microbatch's layers (`layer` bytes a layer) held from
 * its F to its backward (`keep` of them to W where it is split, as
 * stage_memory walks them), its output from its F on: the moment the most is
 * held gives the layers in flight, the logits kept (the current one's
 * included) and the outputs; each virtual stage before the model's last
 * holds a gradient receive buffer per microbatch throughout. */
static void eager_pipeline_peak(const SimPlan *pl, GArray *order, guint s, gboolean last, double layer, double keep,
                                ModelMemoryRequest *req) {
  ModelShape loc = ptdp_rank_shape(pl);
  double sb = (double)loc.seq_len * pl->micro_batch;
  double out = 2.0 * sb * (pl->sequence_parallel ? loc.hidden / (double)pl->tp : loc.hidden);
  double logits = 2.0 * sb * (double)(loc.vocab / pl->tp);
  guint route = sim_plan_route_len(pl), stages = route / pl->pp;
  double held = 0, best = -1;
  guint lg = 0, outs = 0;
  for (guint j = 0; j < order->len; j++) {
    SimItem it = g_array_index(order, SimItem, j);
    double d = it.forward ? 1 : it.grad == SIM_GRAD_INPUT ? -(1 - keep) : it.grad == SIM_GRAD_WEIGHT ? -keep : -1;
    held += d * sim_plan_chunk_layers(pl, s, it.chunk);
    if (it.forward && sim_plan_vstage(pl, s, it.chunk, it.microbatch) == route - 1)
      lg++;
    else if (it.forward)
      outs++;
    double v = held * layer + lg * logits + outs * out;
    if (v > best) {
      best = v;
      req->inflight_layer_mbs = held;
      req->pipeline_logits = lg;
      req->pipeline_outputs = outs;
    }
  }
  if (last)
    req->pipeline_logits = MAX(req->pipeline_logits, 1u);
  req->pipeline_outputs += pl->microbatches * (stages - (last ? 1 : 0));
}

/* Memory of stage s: the peak number of (layer x microbatch) activations the
 * schedule holds, walked from its order. */
/* The stage's items run one after another on its compute stream, so its
 * order is its timeline: a microbatch's activations of a chunk are alive
 * from its F to its backward, or, where the backward is split, W's share
 * of them (wgrad_share) to its W and the rest to its B.  `*inflight` (may
 * be NULL): the peak in whole-stage microbatches. */
static void stage_memory(const SimPlan *pl, const ModelProfile *profile, GArray *order, guint s, ModelMemory *out,
                         double *inflight) {
  ModelLayerOptions lo = sim_plan_layer_options(pl, profile);
  guint p = pl->pp, layers = sim_plan_stage_layers(pl, s);
  /* the MTP modules of each chunk (an MoE layer's activations each, where
   * the chunk runs them) */
  guint nc = pl->chunks ? pl->chunks : 1, mtp_stage = 0;
  guint *mtp_c = g_new0(guint, nc);
  for (guint c = 0; c < nc; c++)
    mtp_stage += mtp_c[c] = sim_plan_chunk_mtp(pl, s, c);
  double held = 0, peak = 0, held_layers = 0, peak_layers = 0, mbs = 0, peak_mbs = 0, full, kept;
  wgrad_share(pl, profile, &full, &kept);
  double keep = full > 0 ? kept / full : 1;
  for (guint j = 0; j < order->len; j++) {
    SimItem it = g_array_index(order, SimItem, j);
    double d = it.forward ? 1 : it.grad == SIM_GRAD_INPUT ? -(1 - keep) : it.grad == SIM_GRAD_WEIGHT ? -keep : -1;
    held_layers += d * sim_plan_chunk_layers(pl, s, it.chunk);
    held += d * (sim_plan_chunk_layers(pl, s, it.chunk) + mtp_c[it.chunk]);
    if (it.chunk == 0 && it.grad != SIM_GRAD_INPUT) /* the embedding's output: to the microbatch's end */
      mbs += it.forward ? 1 : -1;
    peak = MAX(peak, held);
    peak_layers = MAX(peak_layers, held_layers);
    peak_mbs = MAX(peak_mbs, mbs);
  }
  g_free(mtp_c);
  if (inflight) { /* a microbatch passes route / p of the stage's v chunks (DualPipe's one of two) */
    double per = (double)sim_plan_route_len(pl) / p * layers / nc;
    *inflight = per > 0 ? peak_layers / per : 0;
  }
  ModelShape local = ptdp_rank_shape(pl);
  guint64 params = model_stage_params(&pl->model, pl->tp, p, s, layers);
  gboolean first = s == 0, last = s == p - 1;
  const SimScheduleInfo *row = sim_schedule_info(pl->schedule);
  if (row->copies) { /* two copies: stage s of one direction, p-1-s of the other */
    params = model_stage_params(&pl->model, pl->tp, p, s, sim_plan_chunk_layers(pl, s, 0)) +
             model_stage_params(&pl->model, pl->tp, p, p - 1 - s, sim_plan_chunk_layers(pl, s, 1));
    first = last = s == 0 || s == p - 1;
  } else if (!row->megatron_2021) {
    /* where the route puts the embedding (its first virtual stage) and the
     * logit layer (its last): the V's stage 0 holds both */
    guint s0, c0, sl, cl;
    sim_plan_place(pl, 0, 0, &s0, &c0);
    sim_plan_place(pl, sim_plan_route_len(pl) - 1, 0, &sl, &cl);
    first = s == s0;
    last = s == sl;
    guint64 head = model_stage_params(&pl->model, pl->tp, p, p - 1, 0);
    guint64 emb = model_stage_params(&pl->model, pl->tp, p, 0, 0);
    params = (guint64)layers * model_layer_local_params(&pl->model, pl->tp) + (first ? emb : 0) + (last ? head : 0);
  }
  ModelMemoryRequest req = {.t = pl->tp,
                            .b = pl->micro_batch,
                            .params = params,
                            .inflight_layer_mbs = peak,
                            .inflight_mbs = peak_mbs,
                            .recompute = pl->recompute,
                            .first_stage = first,
                            .last_stage = last,
                            .fp32_softmax = model_softmax_fp32(&pl->model, pl->tp, pl->micro_batch, &lo),
                            .optimizer_shards = pl->distributed_optimizer ? pl->dp * sim_plan_cp(pl) : 1,
                            .selective = pl->selective,
                            .sequence_parallel = pl->sequence_parallel,
                            .flash = lo.attention == MODEL_ATTENTION_FLASH,
                            .fp8 = lo.fp8,
                            .fp8_weight_params = (guint64)layers * model_layer_local_params(&pl->model, pl->tp)};
  sim_ptdp_policy_request(pl, layers, &req);
  if (req.eager && p > 1)
    eager_pipeline_peak(pl, order, s, last, model_layer_held_bytes(&local, &req), keep, &req);
  guint64 experts = 0;
  guint moe = 0;
  if (model_is_moe(&pl->model)) {
    req.params = sim_moe_stage_params(pl, s, &experts, &moe);
    /* FP8's weight copies: every linear layer of the stage, experts
     * included; not the embedding, the logits or the routers */
    const ModelShape *m = &pl->model;
    double routers = (double)moe * ((double)m->experts * m->hidden + (m->router_bias ? m->experts : 0));
    double outside = (double)params - (double)req.fp8_weight_params; /* the embedding and the logits */
    req.fp8_weight_params = (guint64)MAX(0.0, (double)req.params - outside - routers);
  }
  model_memory(&local, &req, out);
  if (moe) {
    /* the expert parameters' optimizer state over their expert-data-
     * parallel group; an MoE layer's activations in place of a dense MLP's
     * (models/moe.h); the dispatch's send and receive buffers */
    guint shards = pl->distributed_optimizer ? pl->dp * sim_plan_cp(pl) : 1;
    guint eshards = pl->distributed_optimizer ? pl->edp : 1;
    out->optimizer = 12.0 * (double)(req.params - experts) / shards + 12.0 * (double)experts / eshards;
    ModelMoeOptions mo = sim_moe_options(pl, profile);
    guint mods = pl->ac == MODEL_RECOMPUTE_MODULES ? pl->recompute_modules : 0;
    /* (with the mlp module the dense layer's held bytes have no MLP to replace) */
    double dense_mlp = model_dense_mlp_activation_bytes(&pl->model, pl->tp, pl->micro_batch, lo.fp8);
    double dense = mods & MODEL_RC_MLP ? 0 : dense_mlp;
    double delta = model_moe_activation_bytes(&pl->model, &mo, mods) - dense;
    double T = (double)pl->micro_batch * pl->model.seq_len / ((double)pl->tp * sim_plan_cp(pl));
    /* (at the moment the layers' peak is taken: eager_pipeline_peak's with
     * a pipeline under eager) */
    moe += mtp_stage; /* the MTP modules are MoE layers */
    out->activations += (pl->recompute ? MAX(delta, 0.0)
                                       : delta * req.inflight_layer_mbs * moe / MAX(layers + mtp_stage, 1u)) +
                        2.0 * T * pl->model.topk * pl->model.hidden * 2.0;
    if (mods) {
      /* the modules' working set, one layer's (model_memory counted a dense
       * layer's): an MoE layer's attention block's or its MLP block's, each
       * recomputed as its own backward comes */
      double dense_work = model_layer_modules_working_bytes(&local, &req);
      double attn_work = MAX(dense_work - (mods & MODEL_RC_MLP ? dense_mlp : 0), 0.0);
      double moe_work =
          model_moe_activation_bytes(&pl->model, &mo, 0) - model_moe_activation_bytes(&pl->model, &mo, mods);
      double work = MAX(moe < layers ? dense_work : 0, MAX(attn_work, moe_work));
      out->activations += work - dense_work;
    }
    out->total = out->weights + out->gradients + out->optimizer + out->activations + out->allocator;
  }
  if (pl->fsdp)
    sim_fsdp_state_memory(pl, s, out);
}

void sim_fsdp_state_memory(const SimPlan *pl, guint s, ModelMemory *out) {
  /* FSDP2 with torchtitan's mixed precision (fp32 model, bf16 param_dtype,
   * reduce_dtype fp32 or bf16) and AdamW: the fp32 parameters, gradients
   * and the two moments sharded over the shard group (16 bytes a
   * parameter); the bf16 gathered blocks (the one running and the one
   * prefetched, with the root's; without reshard_after_forward all of the
   * stage's from forward to backward); the bf16 unsharded gradients (a
   * block's, or the whole stage's while they accumulate over microbatches
   * reduced after the last: with an fp32 reduce_dtype FSDPParam's
   * to_accumulated_grad_if_needed upcasts them, so they accumulate in fp32)
   * and a block's fp32 copy for the reduction. */
  guint layers = sim_plan_stage_layers(pl, s);
  double shard = (double)pl->dp * sim_plan_cp(pl) / pl->hsdp_replicas;
  double Ps = (double)model_stage_params(&pl->model, pl->tp, pl->pp, s, layers);
  double Lp = (double)model_layer_local_params(&pl->model, pl->tp);
  double root = Ps - Lp * layers;
  out->optimizer = 8.0 * Ps / shard;
  out->weights = 4.0 * Ps / shard + 2.0 * (pl->reshard_after_forward ? root + MIN(2.0, (double)layers) * Lp : Ps);
  gboolean accumulate = pl->pp > 1 && pl->microbatches > 1; /* unsharded until the last microbatch */
  double acc = accumulate ? (pl->fsdp_reduce_fp32 ? 4.0 : 2.0) * Ps : 2.0 * Lp;
  out->gradients = 4.0 * Ps / shard + acc + (pl->fsdp_reduce_fp32 ? 4.0 * Lp : 0);
  out->total = out->weights + out->gradients + out->optimizer + out->activations + out->allocator;
}

static gboolean heuristic(const SimPlan *pl) { return sim_schedule_info(pl->schedule)->timed; }

void sim_ptdp_pass_times(const SimPlan *pl, const ModelProfile *profile, SimPassTimes *t) {
  ModelLayerOptions lo = sim_plan_layer_options(pl, profile);
  ModelLayerCost c;
  model_layer_cost_with(profile, &pl->model, pl->tp, pl->micro_batch, &lo, &c);
  ModelShape local = ptdp_rank_shape(pl);
  *t = (SimPassTimes){.tp_allreduce_bytes = c.tp_allreduce_bytes};
  model_embedding_cost_with(profile, &local, pl->tp, pl->micro_batch, &lo, &t->emb_f, &t->emb_b);
  model_head_cost_with(profile, &local, pl->tp, pl->micro_batch, &lo, &t->head_f, &t->head_b);
  t->head_w = model_head_wgrad_s(profile, &local, pl->tp, pl->micro_batch);
  for (guint j = 0; j < 3; j++) {
    t->layer_f += c.fwd.seg_s[j];
    t->layer_b += c.bwd.seg_s[j] - c.bwd.wgrad_s[j];
    t->layer_w += c.bwd.wgrad_s[j];
  }
  t->layer_recompute = pl->recompute ? t->layer_f : pl->selective ? c.core.seg_s[0] : 0;
  if (pl->ac == MODEL_RECOMPUTE_LAYER) /* the share of the layers checkpointed whole, on average */
    t->layer_recompute = t->layer_f * floor((double)sim_plan_stage_layers(pl, 0) / pl->recompute_every) /
                         MAX(sim_plan_stage_layers(pl, 0), 1u);
  else if (pl->ac != MODEL_RECOMPUTE_NONE)
    t->layer_recompute = sim_ptdp_policy_recompute_s(pl, &c);
}

/* Every stage's order for m microbatches.  ZB's heuristics order by each
 * stage's F, B and W: the --stage-times, else the cost model's compute
 * times on `profile` (its layers, the embedding and the logit layer; the
 * communication left to the engine). */
void sim_ptdp_plan_orders(const SimPlan *pl, const ModelProfile *profile, guint m, GArray **orders) {
  guint p = pl->pp;
  double *t = g_new0(double, 3 * (gsize)p), *tf = t, *tb = t + p, *tw = t + 2 * p, tc = 0;
  if (heuristic(pl) && pl->stage_times) {
    for (guint s = 0; s < p; s++)
      tf[s] = pl->stage_f_s, tb[s] = pl->stage_b_s, tw[s] = pl->stage_w_s;
    tc = pl->stage_comm_s;
  } else if (heuristic(pl)) {
    SimPassTimes pt;
    sim_ptdp_pass_times(pl, profile, &pt);
    double b = pt.layer_b + pt.layer_recompute;
    for (guint s = 0; s < p; s++) {
      double L = sim_plan_stage_layers(pl, s);
      tf[s] = L * pt.layer_f + (s == 0 ? pt.emb_f : 0) + (s == p - 1 ? pt.head_f : 0);
      tb[s] = L * b + (s == p - 1 ? pt.head_b - pt.head_w : 0);
      tw[s] = L * pt.layer_w + (s == 0 ? pt.emb_b : 0) + (s == p - 1 ? pt.head_w : 0);
    }
  }
  double full = 1, kept = 1;
  if (heuristic(pl))
    wgrad_share(pl, profile, &full, &kept);
  sim_plan_orders_timed(pl, m, tf, tb, tw, tc, full, kept, orders);
  g_free(t);
}

/* zb-auto: the plan with --activation-limit in microbatches (a stage's
 * activations of one microbatch, the most of any stage, into the limit;
 * at least 1).  Others: the plan itself.  *owned: what to free. */
/* The most activations one microbatch leaves on a stage, in bytes. */
static double activations_per_mb(const SimPlan *pl, const ModelProfile *profile) {
  GArray *one = g_array_new(FALSE, FALSE, sizeof(SimItem));
  double per_mb = 0;
  for (guint s = 0; s < pl->pp; s++) {
    g_array_set_size(one, 0);
    SimItem f = {0, 0, 1, SIM_GRAD_ALL, 0};
    g_array_append_val(one, f);
    ModelMemory mm;
    stage_memory(pl, profile, one, s, &mm, NULL);
    per_mb = MAX(per_mb, mm.activations);
  }
  g_array_free(one, TRUE);
  return per_mb;
}

gboolean sim_ptdp_limit_check(const SimPlan *pl, const ModelProfile *profile, GError **error) {
  if (!sim_schedule_info(pl->schedule)->activation_limit || pl->activation_limit_mbs)
    return TRUE;
  double per_mb = activations_per_mb(pl, profile);
  if (per_mb > 0 && pl->activation_limit_gib * 1073741824.0 < per_mb) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--activation-limit %g GiB is less than one microbatch's activations on a stage (%.3g GiB): no "
                "schedule keeps within it; give at least that much",
                pl->activation_limit_gib, per_mb / 1073741824.0);
    return FALSE;
  }
  return TRUE;
}

const SimPlan *sim_ptdp_with_limit(const SimPlan *pl, const ModelProfile *profile, SimPlan **owned) {
  *owned = NULL;
  if (!sim_schedule_info(pl->schedule)->activation_limit || pl->activation_limit_mbs)
    return pl;
  double per_mb = activations_per_mb(pl, profile);
  SimPlan *copy = g_new(SimPlan, 1);
  *copy = *pl;
  double n = per_mb > 0 ? floor(pl->activation_limit_gib * 1073741824.0 / per_mb) : 1e9;
  copy->activation_limit_mbs = (guint)CLAMP(n, 1.0, 1e9);
  *owned = copy;
  return copy;
}

/* Every stage's order for the plan's microbatches, zb-auto's limit
 * applied (*owned: what to free with orders_free). */
static GArray **orders_new(const SimPlan **pl, const ModelProfile *profile, SimPlan **owned) {
  *pl = sim_ptdp_with_limit(*pl, profile, owned);
  GArray **orders = g_new(GArray *, (*pl)->pp);
  for (guint s = 0; s < (*pl)->pp; s++)
    orders[s] = g_array_new(FALSE, FALSE, sizeof(SimItem));
  sim_ptdp_plan_orders(*pl, profile, (*pl)->microbatches, orders);
  return orders;
}

static void orders_free(GArray **orders, guint p, SimPlan *owned) {
  for (guint s = 0; s < p; s++)
    g_array_free(orders[s], TRUE);
  g_free(orders);
  g_free(owned);
}

/* The same, with the peak in-flight microbatches over the stages, and
 * (per_stage, may be NULL) each stage's. */
static void ptdp_memory_per(const SimPlan *pl, const ModelProfile *profile, ModelMemory *mem, guint *stage,
                            double *inflight, double *per_stage) {
  SimPlan *owned;
  GArray **orders = orders_new(&pl, profile, &owned);
  memset(mem, 0, sizeof *mem);
  *stage = 0;
  if (inflight)
    *inflight = 0;
  for (guint s = 0; s < pl->pp; s++) {
    ModelMemory m;
    double in = 0;
    GArray *order = orders[s];
    stage_memory(pl, profile, order, s, &m, &in);
    if (inflight)
      *inflight = MAX(*inflight, in);
    if (per_stage)
      per_stage[s] = in;
    if (m.total > mem->total) {
      *mem = m;
      *stage = s;
    }
  }
  orders_free(orders, pl->pp, owned);
}

void sim_ptdp_memory_walk(const SimPlan *pl, const ModelProfile *profile, ModelMemory *mem, guint *stage,
                          double *inflight) {
  ptdp_memory_per(pl, profile, mem, stage, inflight, NULL);
}

void sim_ptdp_memory(const SimPlan *pl, const ModelProfile *profile, ModelMemory *mem, guint *stage) {
  sim_ptdp_memory_walk(pl, profile, mem, stage, NULL);
}

void sim_ptdp_inflight(const SimPlan *pl, const ModelProfile *profile, double *per_stage) {
  ModelMemory mem;
  guint stage;
  ptdp_memory_per(pl, profile, &mem, &stage, NULL, per_stage);
}

char *sim_ptdp_schedule_csv(const SimPlan *pl, const ModelProfile *profile) {
  SimPlan *owned;
  GArray **orders = orders_new(&pl, profile, &owned);
  char *csv = sim_schedule_csv_orders(pl, orders);
  orders_free(orders, pl->pp, owned);
  return csv;
}
