/* ptdsim — PTD-P: builds the task graph of one Megatron-LM training
 * iteration (tensor, pipeline and data parallelism) on the engine, runs it,
 * and measures the timeline, in named phases (see "the phases of a run"),
 * built again without a shortcut the run showed did not hold.
 *
 * Streams per simulated GPU: compute, tensor-parallel communication,
 * pipeline send, pipeline receive, data-parallel communication.
 *
 * Symmetry: ranks that see the same node layout and speeds run identical
 * timelines, so by default one tensor rank per group and one replica (or
 * block of replicas whose flows meet) per class are simulated
 * (symmetry.c); the collectives keep their full group size in the
 * cost models.  --no-symmetry simulates every GPU, with collectives
 * occupying every member's stream.
 *
 * Placement (Megatron's order, ranks numbered tensor-parallel fastest, then
 * data-parallel, then pipeline): rank = i + t (k + d s) for tensor rank i,
 * replica k, stage s, so tensor-parallel groups sit inside a node, and
 * pipeline stages are the outermost blocks, across nodes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"

/* Stragglers: each simulated rank's compute stream runs at the slowest GPU
 * it stands for -- itself and its context-parallel peers (the ranks of its
 * class have the same speeds: sim_ptdp_classes).  The ranks' own
 * all-reduces and sends then wait for it as the schedule says. */
static void set_speeds(PtdpBuild *b) {
  for (guint s = 0; s < b->p; s++)
    for (guint k = 0; k < b->ds; k++)
      for (guint i = 0; i < b->ts; i++) {
        double f = sim_ptdp_rank_speed(b, i, s, ptdp_job_replica(b, k));
        if (f < 1)
          sim_engine_set_stream_speed(b->e, ptdp_stream_of(b, i, s, k, SIM_STREAM_COMPUTE), f);
      }
}

gboolean sim_ptdp_run(const SimPlan *pl, const ModelProfile *profile, const TopoCluster *cluster, SimResult *r,
                      GError **error) {
  return sim_ptdp_run_observed(pl, profile, cluster, r, NULL, NULL, error);
}

/* Hands the finished timeline to `observe` (the trace writer). */
static gboolean observe_timeline(const PtdpBuild *b, SimTimelineFn observe, gpointer data, GError **error) {
  guint n = b->ts * b->ds * b->p;
  guint *gpus = g_new(guint, n);
  for (guint s = 0; s < b->p; s++)
    for (guint k = 0; k < b->ds; k++)
      for (guint i = 0; i < b->ts; i++)
        gpus[ptdp_gpu_of(b, i, s, k)] = ptdp_gpu_of_rank(b, i, s, k);
  SimTimeline tl = {b->e, b->plan, b->ts, b->ds, b->p, gpus, "mb", 0, b->pieces, b->kmap, b->kweight};
  gboolean ok = observe(&tl, data, error);
  g_free(gpus);
  return ok;
}

static gboolean ptdp_run(const SimPlan *pl, const ModelProfile *profile, const TopoCluster *cluster, SimResult *r,
                         SimTimelineFn observe, gpointer data, GError **error);

/* Why more than one GPU per stage is simulated (sim_ptdp_classes), for a
 * message. */
static const char *several_why(const PtdpBuild *b) {
  if (!b->plan->symmetry)
    return "--no-symmetry";
  if (b->declined[0])
    return b->declined;
  return b->ts > 1 ? "its tensor-parallel ranks differ in layout or speed, or share NICs"
                   : "its replicas differ in node layout or speed, or share NICs";
}

gboolean sim_ptdp_run_observed(const SimPlan *pl, const ModelProfile *profile, const TopoCluster *cluster,
                               SimResult *r, SimTimelineFn observe, gpointer data, GError **error) {
  SimPlan *owned;
  if (!sim_ptdp_limit_check(pl, profile, error))
    return FALSE;
  gboolean ok = ptdp_run(sim_ptdp_with_limit(pl, profile, &owned), profile, cluster, r, observe, data, error);
  g_free(owned);
  return ok;
}

/* --- the phases of a run ---
 *
 * ptdp_run checks that the plan fits (check_memory), sets up what every
 * attempt shares (build_init, build_costs), then per attempt makes its
 * tables (build_tables), chooses coarse items (build_coarse), emits the ops
 * (build_graph), runs them (run_graph) and measures the timeline (measure).
 * The run itself can show that a shortcut taken while building did not
 * hold; then the graph is built again without it (Retry).  build_clear
 * frees what an attempt allocated and build_free everything the PtdpBuild
 * owns, on every path: success, error and retry. */

/* Why an attempt's graph is built again. */
typedef enum {
  RETRY_NONE,
  /* On the flow network a transfer inside a coarse op met another, so the
   * coarse op's fixed time was wrong (netops.h): build without coarse ops. */
  RETRY_FINE,
  /* The short run proved no steady state, a sum over its ops did not carry
   * to the long run, or it failed: simulate the whole iteration (whose run
   * says what is wrong, as it would have alone). */
  RETRY_WHOLE,
} Retry;

/* The layers of a chunk, on average. */
static double mean_layers_per_chunk(const SimPlan *pl) {
  return (double)pl->model.layers / (pl->pp * pl->chunks);
}

/* A table of n entries, each G_MAXUINT (none yet). */
static guint *new_unset(gsize n) {
  guint *t = g_new(guint, n);
  for (gsize j = 0; j < n; j++)
    t[j] = G_MAXUINT;
  return t;
}

/* The device holds the plan: its memory walked into r, or a one-line error
 * where it does not fit (unless --allow-oom or --stage-times). */
static gboolean check_memory(const SimPlan *pl, const ModelProfile *profile, SimResult *r, GError **error) {
  if (!sim_plan_check_device(pl, profile, error))
    return FALSE;
  sim_ptdp_memory_walk(pl, profile, &r->memory, &r->memory_stage, &r->peak_inflight_mbs);
  r->fits_in_memory = r->memory.total <= sim_plan_usable_bytes(pl, profile);
  if (!r->fits_in_memory && !pl->allow_oom && !pl->stage_times) {
    const ModelMemory *mm = &r->memory;
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_OOM,
                "does not fit in memory: stage %u needs %.1f GiB of %.1f GiB usable (weights+gradients+optimizer %.1f, "
                "activations %.1f); use %s%sa larger --tp or --pp, or a smaller --micro-batch "
                "(--allow-oom simulates it anyway)",
                r->memory_stage, mm->total / 1073741824.0, sim_plan_usable_bytes(pl, profile) / 1073741824.0,
                (mm->weights + mm->gradients + mm->optimizer) / 1073741824.0, mm->activations / 1073741824.0,
                pl->recompute ? "" : "--recompute full, ", model_is_moe(&pl->model) ? "a larger --ep, " : "");
    return FALSE;
  }
  return TRUE;
}

/* What every attempt shares, first: the sizes, the network, the simulated
 * ranks (the symmetry classes, told in r).  FALSE (a one-line error) where
 * the run needs one simulated GPU per stage (FSDP2, MoE layers) or a size
 * the engine can hold, and the classes do not give it. */
static gboolean build_init(PtdpBuild *b, SimResult *r, GError **error) {
  const SimPlan *pl = b->plan;
  const ModelProfile *profile = b->profile;
  b->net = (ModelNet){.hw = b->cluster->net,
                      .free_comm = profile->kind == MODEL_PROFILE_IDEAL,
                      /* collectives measured on the device, if the profile has them */
                      .measured = profile->coll,
                      .n_measured = profile->n_coll};
  b->ts = b->ds = 1;
  b->cp = sim_plan_cp(pl);
  b->dpc = pl->dp * b->cp;
  b->shard = pl->fsdp ? b->dpc / pl->hsdp_replicas : b->dpc;
  b->p = pl->pp;
  b->v = pl->chunks;
  sim_ptdp_classes(b);
  if (b->ts > 1 || b->ds > 1) {
    /* FSDP2's per-block collectives are issued once for the group, as the
     * symmetric simulation has them */
    if (pl->fsdp && pl->dp > 1) {
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                  "%s is simulated with one GPU standing for its replicas, which needs groups that fill whole nodes "
                  "in Megatron's rank order (here %s); drop --no-symmetry and --placement, or use sizes whose groups "
                  "fill nodes%s",
                  pl->hsdp_replicas > 1 ? "--hsdp" : "--fsdp", several_why(b),
                  pl->flow_network ? ", or --network analytic" : "");
      return FALSE;
    }
    /* Without the shortcut every GPU is simulated: check the size again. */
    double ops = 2.0 * pl->microbatches * b->v * b->p * (6.0 * mean_layers_per_chunk(pl) + 4) * b->ts * b->ds;
    if (pl->symmetry && ops > 60e6) {
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_TOO_BIG,
                  "--tp %u x --dp %u on %u-GPU nodes needs %u GPUs per stage simulated (%s), about %.0f million "
                  "ops, over the limit of 60 million; use sizes whose groups fill whole nodes%s",
                  pl->tp, pl->dp, b->cluster->gpus_per_node, b->ts * b->ds, several_why(b), ops / 1e6,
                  sim_plan_has_stragglers(pl) ? ", or fewer stragglers" : "");
      return FALSE;
    }
  }
  r->symmetric = b->ts * b->ds < pl->tp * pl->dp || pl->tp * pl->dp == 1;
  g_strlcpy(r->symmetry_declined, b->declined, sizeof r->symmetry_declined);
  g_strlcpy(r->symmetry_approximate, b->approximate, sizeof r->symmetry_approximate);
  if (model_is_moe(&pl->model) && (b->ts > 1 || b->ds > 1)) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "MoE layers are simulated one GPU per stage (the symmetry shortcut), which this run does not "
                "allow (%s); use sizes whose groups fill whole nodes%s",
                several_why(b), pl->symmetry && pl->flow_network ? ", or --network analytic" : "");
    return FALSE;
  }
  if (pl->moe_dispatcher == SIM_DISPATCH_DEEPEP && !(b->moe_ep_nodes = sim_ptdp_moe_check(b, error)))
    return FALSE;
  return TRUE;
}

/* What every attempt shares, then: the pipeline split, the costs of a
 * layer, an MoE layer, the embedding and the head (with DeepSeek-V3's
 * multi-token prediction), the backward split into B and W. */
static void build_costs(PtdpBuild *b) {
  const SimPlan *pl = b->plan;
  const ModelProfile *profile = b->profile;
  b->chunk_n = g_new(guint, (gsize)b->p * b->v);
  b->chunk_at = g_new(guint, (gsize)b->p * b->v);
  b->lmax = 0;
  for (guint s = 0; s < b->p; s++)
    for (guint c = 0; c < b->v; c++) {
      b->chunk_n[s * b->v + c] = sim_plan_chunk_layers(pl, s, c);
      b->chunk_at[s * b->v + c] = c ? b->chunk_at[s * b->v + c - 1] + b->chunk_n[s * b->v + c - 1] : 0;
      b->lmax = MAX(b->lmax, b->chunk_n[s * b->v + c]);
    }
  ModelLayerOptions lo = sim_plan_layer_options(pl, profile);
  model_layer_cost_with(profile, &pl->model, pl->tp, pl->micro_batch, &lo, &b->layer);
  if (model_is_moe(&pl->model)) {
    model_layer_attention_cost(profile, &pl->model, pl->tp, pl->micro_batch, &lo, &b->moe_attn);
    ModelMoeOptions mo = sim_moe_options(pl, profile);
    mo.ep_nodes = b->moe_ep_nodes;
    model_moe_cost(profile, &pl->model, &mo, &b->moe);
    /* DeepEP's kernels hold SMs while they run: that slows compute where
     * compute runs beside them, paired passes (DualPipe's F&B, the
     * combined 1F1B; sim_ptdp_overlap_pair) */
    if (pl->moe_dispatcher == SIM_DISPATCH_DEEPEP && (sim_schedule_info(pl->schedule)->paired || pl->moe_a2a_overlap))
      b->deepep_contention = sim_moe_deepep_contention(pl, profile, b->cluster, b->moe_ep_nodes);
    b->moe_layer = g_new0(guint8, (gsize)b->p * b->v * b->lmax);
    for (guint s = 0; s < b->p; s++)
      for (guint c = 0; c < b->v; c++)
        for (guint l = 0, first = sim_plan_chunk_first_layer(pl, s, c); l < b->chunk_n[s * b->v + c]; l++)
          b->moe_layer[(s * b->v + c) * b->lmax + l] = (guint8)model_layer_is_moe(&pl->model, first + l);
  }
  /* the collectives that run beside compute: gradients reduced during the
   * backward, parameters gathered ahead of the forward, sharded data
   * parallelism, tensor-parallel communication pipelined with its GEMMs */
  gboolean dp_beside = pl->ddp == SIM_DDP_TORCH || pl->overlap_param_gather || pl->fsdp;
  b->contention = MAX(sim_plan_contention(pl, profile, b->cluster, pl->tp, dp_beside ? b->dpc : 1,
                                          pl->tp > 1 && pl->tp_comm_overlap),
                      b->deepep_contention);
  ModelShape local = ptdp_rank_shape(pl);
  model_embedding_cost_with(profile, &local, pl->tp, pl->micro_batch, &lo, &b->emb_fwd, &b->emb_bwd);
  b->mtp_vs = G_MAXUINT;
  model_head_cost_with(profile, &local, pl->tp, pl->micro_batch, &lo, &b->head_fwd, &b->head_bwd);
  if (b->moe_layer && pl->model.mtp && profile->kind != MODEL_PROFILE_IDEAL) {
    /* DeepSeek-V3's multi-token prediction modules, in the virtual stage
     * that holds them (the last, with the loss, unless a layout says
     * otherwise): each the 2h -> h projection of the normed hidden states
     * and embeddings, an MoE layer (its compute and its token exchange,
     * sim_ptdp_emit_mtp) and its own logits and loss */
    guint64 bs = (guint64)pl->micro_batch * pl->model.seq_len / pl->tp, h = pl->model.hidden;
    ModelGemm eh = {1, bs, h, 2 * h}, eh_d = {1, bs, 2 * h, h}, eh_w = {1, 2 * h, h, bs};
    b->mtp_n = pl->model.mtp;
    b->mtp_vs = sim_plan_mtp_vstage(pl);
    b->mtp_proj_f = model_gemm_time_s(profile, &eh);
    b->mtp_proj_b = model_gemm_time_s(profile, &eh_d) + model_gemm_time_s(profile, &eh_w);
    b->mtp_head_f = b->head_fwd;
    b->mtp_head_b = b->head_bwd;
  }
  b->bwd_in = b->layer.bwd;
  b->layer_w = 0;
  for (guint j = 0; j < 3; j++) {
    b->bwd_in.seg_s[j] -= b->layer.bwd.wgrad_s[j];
    b->layer_w += b->layer.bwd.wgrad_s[j];
  }
  b->head_w = model_head_wgrad_s(profile, &local, pl->tp, pl->micro_batch);
  b->route = sim_plan_route_len(pl);
  b->blocking = !pl->stage_times && sim_schedule_info(pl->schedule)->megatron_2021;
}

/* Each stage's order of items for b->m microbatches, and where each item
 * sits in it. */
static void build_orders(PtdpBuild *b) {
  b->order = g_new0(GArray *, b->p);
  b->len = g_new0(guint, b->p);
  b->n_items = 0;
  for (guint s = 0; s < b->p; s++)
    b->order[s] = g_array_new(FALSE, FALSE, sizeof(SimItem));
  sim_ptdp_plan_orders(b->plan, b->profile, b->m, b->order);
  for (guint s = 0; s < b->p; s++) {
    b->len[s] = b->order[s]->len;
    b->n_items = MAX(b->n_items, b->len[s]);
  }
}

/* The collectives' times on the analytic network: each tensor-parallel
 * group's all-reduce (or reduce-scatter and all-gather), an MoE layer's
 * token communication, the rings' hops. */
static void build_analytic_times(PtdpBuild *b) {
  const SimPlan *pl = b->plan;
  b->tp_ns = g_new0(SimTime, (gsize)b->p * b->ds * 2);
  for (guint s = 0; s < b->p; s++)
    for (guint k = 0; k < b->ds; k++) {
      SimTime *d = &b->tp_ns[(s * b->ds + k) * 2];
      guint nodes = sim_ptdp_tp_group_nodes(b, s, k);
      double bytes = b->layer.tp_allreduce_bytes;
      ModelNet net = b->net;
      if (nodes > 1 && pl->stragglers.n_link) /* a ring across nodes runs at its slowest NIC (--slow-link) */
        net.hw.nic_bw *= sim_ptdp_tp_link_factor(b, s, k);
      if (pl->sequence_parallel) {
        d[0] = ptdp_ns(model_collective_time_s(&net, MODEL_COLL_REDUCESCATTER, bytes, pl->tp, nodes, NULL));
        d[1] = ptdp_ns(model_collective_time_s(&net, MODEL_COLL_ALLGATHER, bytes, pl->tp, nodes, NULL));
      } else
        d[0] = ptdp_ns(model_collective_time_s(&net, MODEL_COLL_ALLREDUCE, bytes, pl->tp, nodes, NULL));
    }
  b->moe_ns = g_new0(SimTime, (gsize)b->p * PTDP_MOE_N_COMM);
  b->moe_plans = new_unset((gsize)b->p * PTDP_MOE_N_COMM);
  for (guint s = 0; s < b->p && b->moe_layer; s++)
    for (guint kind = 0; kind < PTDP_MOE_N_COMM; kind++)
      b->moe_ns[s * PTDP_MOE_N_COMM + kind] = ptdp_ns(sim_ptdp_moe_analytic_s(b, s, kind));
  /* the rings' hops on the analytic network: a send to the next rank, all
   * at once, as long as the slowest (between nodes if the ring leaves one);
   * the overlapped tensor-parallel hops, 1/(t-1) of the collective each */
  b->hop_ns = g_new0(SimTime, (gsize)b->p * b->ds * 5);
  for (guint s = 0; s < b->p && (b->cp > 1 || pl->tp_comm_overlap); s++) /* only runs that have rings */
    for (guint k = 0; k < b->ds; k++) {
      SimTime *h = &b->hop_ns[(s * b->ds + k) * 5];
      gboolean same = TRUE;
      for (guint c = 1; c < b->cp; c++)
        same = same && ptdp_gpu_of_rank_c(b, 0, c, s, k) / b->cluster->gpus_per_node == ptdp_node_of_rank(b, 0, s, k);
      h[PTDP_HOP_KV] = h[PTDP_HOP_GRAD] = ptdp_ns(model_p2p_time_s(&b->net, b->layer.cp_hop_bytes, same));
      h[PTDP_HOP_KV_GRAD] = ptdp_ns(model_p2p_time_s(&b->net, 2 * b->layer.cp_hop_bytes, same));
      if (pl->tp_comm_overlap) {
        guint nodes = sim_ptdp_tp_group_nodes(b, s, k);
        double bytes = b->layer.tp_allreduce_bytes;
        h[PTDP_HOP_TP_GATHER] =
            ptdp_ns(model_collective_time_s(&b->net, MODEL_COLL_ALLGATHER, bytes, pl->tp, nodes, NULL) / (pl->tp - 1));
        h[PTDP_HOP_TP_SCATTER] = ptdp_ns(
            model_collective_time_s(&b->net, MODEL_COLL_REDUCESCATTER, bytes, pl->tp, nodes, NULL) / (pl->tp - 1));
      }
    }
}

/* The flow network (--network flow, on a cluster with a cost for
 * communication): its ops on the engine, and the bisection sides --
 * pipeline stages below p/2 against the rest, replicas below d/2 against
 * the rest.  FALSE (an error) where the cluster's fabric cannot carry it. */
static gboolean build_flow(PtdpBuild *b, GError **error) {
  const SimPlan *pl = b->plan;
  PtdpFlow *fc = b->flow = g_new0(PtdpFlow, 1);
  if (!(fc->ops = sim_netops_new_for(b->cluster, pl, b->e, error)))
    return FALSE;
  guint total = topo_cluster_gpus(b->cluster);
  fc->side_pp = g_malloc(total);
  fc->side_dp = g_malloc(total);
  memset(fc->side_pp, 2, total);
  memset(fc->side_dp, 2, total);
  for (guint s = 0; s < pl->pp; s++)
    for (guint k = 0; k < pl->dp; k++)
      for (guint c = 0; c < b->cp; c++)
        for (guint i = 0; i < pl->tp; i++) {
          guint g = ptdp_gpu_of_job_rank(b, i, c, s, k);
          fc->side_pp[g] = s < pl->pp / 2 ? 0 : 1;
          fc->side_dp[g] = k < pl->dp / 2 ? 0 : 1;
        }
  return TRUE;
}

/* Per stage: the position table (an item's index by chunk, microbatch and
 * slot) and the item that ends each chunk's last backward. */
static void build_positions(PtdpBuild *b) {
  b->position = g_new0(guint *, b->p);
  b->last_bwd = new_unset((gsize)b->p * b->v);
  for (guint s = 0; s < b->p; s++) {
    b->position[s] = new_unset((gsize)b->v * b->m * 3);
    for (guint j = 0; j < b->len[s]; j++) {
      SimItem it = g_array_index(b->order[s], SimItem, j);
      b->position[s][((guint64)it.chunk * b->m + it.microbatch) * 3 + ptdp_slot_of(it)] = j;
      if (!it.forward && it.grad != SIM_GRAD_INPUT)
        b->last_bwd[s * b->v + it.chunk] = j;
    }
  }
}

/* An attempt's tables for `short_m` microbatches (0: the plan's): the
 * orders, the analytic times, the engine and its streams (stragglers'
 * speeds set), the flow network, the tables the emission fills.  FALSE
 * (an error) where the flow network cannot be made. */
static gboolean build_tables(PtdpBuild *b, guint short_m, GError **error) {
  const SimPlan *pl = b->plan;
  /* what an attempt finds and counts starts afresh (build_clear frees the rest) */
  b->counts = (PtdpCounts){0};
  b->steady = (SimSteady){0};
  b->steady_failed = FALSE;
  b->cur_item = G_MAXUINT;
  b->m = short_m ? short_m : pl->microbatches;
  build_orders(b);
  build_analytic_times(b);
  b->e = sim_engine_new();
  if (pl->flow_network && !b->net.free_comm && !pl->stage_times && !build_flow(b, error))
    return FALSE;
  if (short_m) {
    gsize n = (gsize)b->ds * b->p * b->n_items;
    b->item_lo = g_new(guint, n);
    b->item_hi = g_new(guint, n);
    b->xfer_lo = g_new(guint, n);
    b->xfer_hi = g_new(guint, n);
    b->adds = g_array_new(FALSE, FALSE, sizeof(PtdpAdd));
    b->extra = g_array_new(FALSE, TRUE, sizeof(guint));
  }
  guint n_gpus = b->ts * b->p * b->ds;
  for (guint g = 0; g < n_gpus; g++)
    for (guint kind = 0; kind < SIM_STREAM_KINDS; kind++)
      sim_engine_add_stream(b->e, g);
  if (b->contention > 1) /* the collectives' kernels: NCCL's on the tensor- and data-parallel streams */
    for (guint g = 0; g < n_gpus; g++) {
      sim_engine_set_stream_holds_sms(b->e, g * SIM_STREAM_KINDS + SIM_STREAM_TP);
      sim_engine_set_stream_holds_sms(b->e, g * SIM_STREAM_KINDS + SIM_STREAM_DP);
    }
  if (sim_plan_has_stragglers(pl))
    set_speeds(b);

  build_positions(b);
  b->items = g_new0(PtdpItemOps, (gsize)b->ds * b->p * b->n_items * b->ts);
  b->grad_ready = g_new0(guint, (gsize)b->ds * b->p * b->v * b->lmax * b->ts);
  b->fsdp_rs = g_new(GArray *, (gsize)b->p * b->ts);
  for (guint j = 0; j < b->p * b->ts; j++)
    b->fsdp_rs[j] = g_array_new(FALSE, FALSE, sizeof(guint));
  b->pending = g_new0(double, b->ts);
  b->prev = g_new0(guint, b->ts);
  b->join = new_unset(b->ts);
  b->hop_plans = new_unset((gsize)b->p * b->ds * 5);
  b->tp_part = g_array_new(FALSE, TRUE, sizeof(SimTime));
  b->pp_to = g_array_new(FALSE, TRUE, sizeof(guint));
  b->tp_plans = new_unset((gsize)b->p * b->ds * 3);
  b->pp_plans = new_unset((gsize)b->ds * b->p * b->ts * 2);
  return TRUE;
}

/* Whether items are coarse (see sim_ptdp_emit_item): with fixed
 * all-reduces (the analytic network, or transfers fixed on the flow
 * network at their time alone -- `coarse_flow`, until one met another),
 * one rank per stage (the symmetry shortcut), no trace (which shows every
 * op).  On the flow network the collectives that coarse items sum are
 * fixed first. */
static void build_coarse(PtdpBuild *b, gboolean coarse_flow, gboolean traced) {
  const SimPlan *pl = b->plan;
  if (b->flow && !pl->exact) {
    sim_netops_fixing(b->flow->ops, TRUE);
    for (guint s = 0; s < b->p && pl->tp > 1; s++) /* what coarse items sum: the transfers' time alone */
      for (guint k = 0; k < b->ds; k++)
        for (guint j = 0; j < (pl->sequence_parallel ? 2u : 1u); j++) {
          NetCollOp op = !pl->sequence_parallel ? NET_OP_ALLREDUCE : j == 0 ? NET_OP_REDUCESCATTER : NET_OP_ALLGATHER;
          guint plan = sim_ptdp_tp_plan(b, s, k, op, b->layer.tp_allreduce_bytes);
          b->tp_ns[(s * b->ds + k) * 2 + j] = sim_netops_solo_ns(b->flow->ops, plan);
        }
    for (guint s = 0; s < b->p && b->moe_layer; s++)
      for (guint kind = 0; kind < PTDP_MOE_N_COMM; kind++)
        if ((kind <= PTDP_MOE_COMBINE ? pl->ep : pl->etp) > 1)
          b->moe_ns[s * PTDP_MOE_N_COMM + kind] = sim_netops_solo_ns(b->flow->ops, sim_ptdp_moe_plan(b, s, kind));
  }
  b->coarse = !pl->exact && (!b->flow || coarse_flow) && b->ts == 1 && !traced;
  if (pl->stragglers.n_gpu) /* a slow GPU stretches its compute, not the all-reduces inside a coarse op */
    b->coarse = FALSE;
  if (b->contention > 1) /* compute slows only while a collective runs beside it: each op on its own */
    b->coarse = FALSE;
  if (b->flow &&
      (b->cp > 1 || pl->tp_comm_overlap)) /* their rings' timing inside a coarse op is the analytic network's */
    b->coarse = FALSE;
  for (guint s = 0; s < b->p && b->coarse; s++) /* DualPipe's F&B interleave their ops (sim_ptdp_overlap_pair) */
    for (guint j = 0; j < b->len[s] && b->coarse; j++)
      b->coarse = !g_array_index(b->order[s], SimItem, j).paired;
}

/* The ops emitted: room reserved for the graph, the parameters' gathers
 * (--overlap-param-gather), every item of every stage and replica, their
 * transfers, the data-parallel collectives and the optimizer step. */
static void build_graph(PtdpBuild *b, gboolean traced) {
  const SimPlan *pl = b->plan;
  {
    /* Room for the graph, estimated from its shape: an item is one op, or
     * per layer and pass two compute ops on each rank and two all-reduces;
     * a transfer per rank and a gather per item. */
    double mean_lpc = mean_layers_per_chunk(pl);
    double passes = pl->recompute ? 1.5 : 1.0; /* forward 1, backward 1 or 2 */
    double item_ops = b->coarse ? 1 : 2.0 * passes * mean_lpc * (b->ts + 1) + 2;
    double item_slots = b->coarse ? 1 : 4.0 * passes * mean_lpc * b->ts + 2;
    double items = (double)b->ds * b->p * b->n_items;
    double ops = items * (item_ops + b->ts + 1), slots = items * (item_slots + 3.0 * b->ts);
    if (ops < 1e8 && slots < 1e8)
      sim_engine_reserve(b->e, (guint)ops, (guint)slots, (guint)(slots + items * b->ts));
  }
  if (traced) {
    b->pieces = g_array_new(FALSE, FALSE, sizeof(SimTimelinePiece));
    b->pending_pieces = g_array_new(FALSE, FALSE, sizeof(SimTimelinePiece));
  }

  if (pl->overlap_param_gather && b->dpc > 1)
    sim_ptdp_emit_param_gathers(b);
  for (guint k = 0; k < b->ds; k++)
    for (guint s = 0; s < b->p; s++)
      for (guint j = 0, before = 0; j < b->len[s]; j++) { /* before: where item j - 1's ops start */
        guint start = sim_engine_n_ops(b->e);
        sim_ptdp_emit_item(b, s, k, j);
        if (sim_ptdp_pairs_with_previous(b, s, j))
          sim_ptdp_overlap_pair(b, s, k, before, start, sim_engine_n_ops(b->e));
        before = start;
      }
  b->cur_item = G_MAXUINT;
  for (guint k = 0; k < b->ds; k++)
    for (guint s = 0; s < b->p; s++)
      for (guint j = 0; j < b->len[s]; j++)
        sim_ptdp_emit_transfers(b, s, k, j);
  guint *opt_gate = new_unset((gsize)b->ds * b->p * b->ts);
  for (guint s = 0; s < b->p && !pl->stage_times; s++) /* --stage-times: the pipeline alone */
    sim_ptdp_emit_dp_and_optimizer(b, s, opt_gate);
  g_free(opt_gate);
}

/* The engine runs the graph, on the flow network or the analytic one;
 * `*coarse_met`: a transfer inside a coarse op met another (RETRY_FINE). */
static gboolean run_graph(PtdpBuild *b, gboolean *coarse_met, GError **error) {
  *coarse_met = FALSE;
  if (!b->flow)
    return sim_engine_run(b->e, error);
  sim_netops_built(b->flow->ops);
  return sim_netops_run(b->flow->ops, coarse_met, error);
}

/* The finished timeline measured into r and handed to `observe`, with the
 * steady state found first where a short run stands for the plan's;
 * `*whole`: the short run cannot stand for it (RETRY_WHOLE). */
static gboolean measure(PtdpBuild *b, SimResult *r, gboolean short_run, SimTimelineFn observe, gpointer data,
                        gboolean *whole, GError **error) {
  *whole = short_run && !sim_ptdp_steady_find(b);
  if (*whole)
    return TRUE;
  *whole = !sim_ptdp_measure(b, r);
  if (b->flow)
    sim_ptdp_flow_bisection(b, r);
  *whole = *whole || b->steady_failed;
  return observe ? observe_timeline(b, observe, data, error) : TRUE;
}

/* Frees what an attempt allocated, leaving each of its pointers NULL (so
 * it serves a half-built attempt too); build_tables resets its counts. */
static void build_clear(PtdpBuild *b) {
  for (guint s = 0; b->order && s < b->p; s++)
    g_array_free(b->order[s], TRUE);
  for (guint s = 0; b->position && s < b->p; s++)
    g_free(b->position[s]);
  g_clear_pointer(&b->order, g_free);
  g_clear_pointer(&b->position, g_free);
  g_clear_pointer(&b->len, g_free);
  g_clear_pointer(&b->last_bwd, g_free);
  g_clear_pointer(&b->items, g_free);
  g_clear_pointer(&b->grad_ready, g_free);
  for (guint j = 0; b->fsdp_rs && j < b->p * b->ts; j++)
    g_array_free(b->fsdp_rs[j], TRUE);
  g_clear_pointer(&b->fsdp_rs, g_free);
  g_clear_pointer(&b->tp_ns, g_free);
  g_clear_pointer(&b->moe_ns, g_free);
  g_clear_pointer(&b->hop_ns, g_free);
  g_clear_pointer(&b->hop_plans, g_free);
  g_clear_pointer(&b->param_gather, g_free); /* allocated only with --overlap-param-gather */
  g_clear_pointer(&b->join, g_free);
  g_clear_pointer(&b->pending, g_free);
  g_clear_pointer(&b->prev, g_free);
  g_clear_pointer(&b->tp_part, g_array_unref);
  g_clear_pointer(&b->pp_to, g_array_unref);
  g_clear_pointer(&b->tp_plans, g_free);
  g_clear_pointer(&b->pp_plans, g_free);
  g_clear_pointer(&b->moe_plans, g_free);
  g_clear_pointer(&b->pieces, g_array_unref);
  g_clear_pointer(&b->pending_pieces, g_array_unref);
  g_clear_pointer(&b->e, sim_engine_free);
  if (b->flow) {
    sim_netops_free(b->flow->ops);
    g_free(b->flow->side_pp);
    g_free(b->flow->side_dp);
    g_clear_pointer(&b->flow, g_free);
  }
  g_clear_pointer(&b->item_lo, g_free);
  g_clear_pointer(&b->item_hi, g_free);
  g_clear_pointer(&b->xfer_lo, g_free);
  g_clear_pointer(&b->xfer_hi, g_free);
  g_clear_pointer(&b->adds, g_array_unref);
  g_clear_pointer(&b->extra, g_array_unref);
}

/* Frees everything the PtdpBuild owns. */
static void build_free(PtdpBuild *b) {
  build_clear(b);
  g_clear_pointer(&b->chunk_n, g_free);
  g_clear_pointer(&b->chunk_at, g_free);
  g_clear_pointer(&b->moe_layer, g_free);
  g_clear_pointer(&b->kmap, g_free);
  g_clear_pointer(&b->kweight, g_free);
}

static gboolean ptdp_run(const SimPlan *pl, const ModelProfile *profile, const TopoCluster *cluster, SimResult *r,
                         SimTimelineFn observe, gpointer data, GError **error) {
  memset(r, 0, sizeof *r);
  if (!check_memory(pl, profile, r, error))
    return FALSE;
  PtdpBuild b = {.plan = pl, .profile = profile, .cluster = cluster};
  gboolean ok = build_init(&b, r, error);
  if (ok)
    build_costs(&b);
  r->contention = ok ? b.contention : 1;
  /* The shortcuts the first attempt takes: a short run standing for the
   * plan's microbatches (the steady state, steady.h), and coarse items
   * whose transfers the flow network fixes at their time alone. */
  guint short_m = sim_ptdp_steady_short_m(pl, observe != NULL);
  gboolean coarse_flow = TRUE;
  while (ok) {
    Retry retry = RETRY_NONE;
    gboolean coarse_met = FALSE, whole = FALSE;
    ok = build_tables(&b, short_m, error);
    if (ok) {
      build_coarse(&b, coarse_flow, observe != NULL);
      build_graph(&b, observe != NULL);
      ok = run_graph(&b, &coarse_met, error);
      if (ok && !coarse_met)
        ok = measure(&b, r, short_m > 0, observe, data, &whole, error);
      if (!ok && short_m) { /* the whole iteration's run says what is wrong, as it would have alone */
        g_clear_error(error);
        ok = whole = TRUE;
      }
      retry = whole ? RETRY_WHOLE : coarse_met ? RETRY_FINE : RETRY_NONE;
    }
    build_clear(&b);
    if (retry == RETRY_NONE)
      break;
    if (retry == RETRY_WHOLE)
      short_m = 0;
    else
      coarse_flow = FALSE;
  }
  build_free(&b);
  return ok;
}
