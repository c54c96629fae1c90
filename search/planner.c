/* ptdsim — configuration search for `ptdsim plan` (see search.h).
 *
 * The space is the one the SC21 paper explores by hand (Narayanan et al.,
 * section 3, "Performance Analysis of Parallelization Configurations"):
 * tensor parallelism t inside a node (t divides the GPUs per node and the
 * heads), pipeline parallelism p over whole layers (p divides the layers),
 * data parallelism d = n/(t p), microbatch b dividing B/d, 1F1B or the
 * interleaved schedule with v chunks (v divides l/p, m a multiple of p, as
 * Megatron requires), full or no activation recomputation, Megatron's local
 * DDP.  Memory is checked before simulating (a closed form over the
 * schedule's order), so configurations that cannot run cost almost nothing;
 * those that fit are simulated with the symmetry shortcut (one GPU per
 * tensor-parallel group and one replica).
 *
 * Pruning (keeps the best `keep` rows exact): every candidate that fits has
 * a lower bound on its simulated iteration time (ptdp_lower_bound: its
 * compute at the device's rates with the pipeline's fill and drain; ZeRO
 * and MoE: F_hw / (n peak), F_hw the executed FLOPs of Eq. 3, loosened by
 * PRUNE_SLACK against any FLOP the cost model might count differently).
 * They are visited by that bound, lowest first, in batches of PRUNED_BATCH:
 * a candidate whose bound is above the keep-th best time of the batches
 * already simulated cannot enter the list and is not simulated (nor is any
 * after it).  Each batch's survivors are simulated on every core
 * (search/pool.h): what is pruned depends on the batch size, not on the
 * threads.  Without `keep`, everything that fits is simulated in search
 * order, in batches of BATCH.  Rows are filed in search order either way,
 * and ranked in a total order at the end. */
#include "planner.h"

#include "../models/layer.h"
#include "../schedule/schedule.h"
#include "../zero/zero.h"
#include "pool.h"
#include "../ptdp/ptdp.h"
#include "../plan/validate.h"
#include "../plan/route.h"

#include <math.h>
#include <string.h>

static int cmp_double(double a, double b) { return a < b ? -1 : a > b ? 1 : 0; }
static int cmp_uint(guint a, guint b) { return a < b ? -1 : a > b ? 1 : 0; }

int search_row_cmp(const SearchRow *a, const SearchRow *b) {
  int c;
  if ((c = cmp_double(a->score, b->score)) || (c = cmp_double(a->iteration_time_s, b->iteration_time_s)) || (c = cmp_double(a->memory_GiB, b->memory_GiB)) ||
      (c = cmp_uint(a->gpus, b->gpus)) || (c = cmp_uint(a->tp, b->tp)) || (c = cmp_uint(a->pp, b->pp)) ||
      (c = cmp_uint(a->dp, b->dp)) || (c = cmp_uint(a->cp, b->cp)) || (c = cmp_uint(a->micro_batch, b->micro_batch)) ||
      (c = cmp_uint(a->schedule, b->schedule)) || (c = cmp_uint(a->chunks, b->chunks)) ||
      (c = cmp_uint(a->zero, b->zero)) || (c = cmp_uint(a->fsdp, b->fsdp)) ||
      (c = cmp_uint(a->recompute, b->recompute)) ||
      (c = cmp_uint(a->sequence_parallel, b->sequence_parallel)) ||
      (c = cmp_uint(a->distributed_optimizer, b->distributed_optimizer)) || (c = strcmp(a->attention, b->attention)) ||
      (c = cmp_uint(a->split.first, b->split.first)) || (c = cmp_uint(a->split.last, b->split.last)) ||
      (c = cmp_uint(a->split.embedding, b->split.embedding)) || (c = cmp_uint(a->ep, b->ep)) ||
      (c = cmp_uint(a->expert_tp, b->expert_tp)))
    return c;
  return cmp_uint(a->split.loss, b->split.loss);
}

static int row_cmp(const void *a, const void *b) { return search_row_cmp(a, b); }

/* The objective's value of a simulated row, and the least a candidate's
 * can be given its bound on the iteration time. */
static double objective_score(SearchObjective o, const SearchRow *r) {
  if (o == SEARCH_OBJECTIVE_TIME)
    return r->iteration_time_s;
  double gpu_s = (double)r->gpus * r->iteration_time_s;
  if (o == SEARCH_OBJECTIVE_COST && r->run_days > 0 && r->training_days > 0)
    return gpu_s * (r->run_days / r->training_days);
  return gpu_s;
}

static double objective_bound(SearchObjective o, const SearchRow *r) {
  return o == SEARCH_OBJECTIVE_TIME ? r->bound_s : (double)r->gpus * r->bound_s;
}


typedef struct {
  guint t, p, d, cp;
} Triple;

/* Most GPUs first, then t, p, d ascending: a fixed order. */
static int triple_cmp(const void *a, const void *b) {
  const Triple *x = a, *y = b;
  guint64 nx = (guint64)x->t * x->p * x->d * x->cp, ny = (guint64)y->t * y->p * y->d * y->cp;
  int c;
  if ((c = (nx < ny) - (nx > ny)) || (c = cmp_uint(x->t, y->t)) || (c = cmp_uint(x->p, y->p)) ||
      (c = cmp_uint(x->d, y->d)))
    return c;
  return cmp_uint(x->cp, y->cp);
}

#define PRUNE_SLACK 0.8
/* Candidates per batch: pruning uses the best times of earlier batches. */
#define BATCH 128u
/* The same when pruning: smaller, so that the threshold comes sooner. */
#define PRUNED_BATCH 32u

typedef struct {
  guint t, p, d, b, v, zero;
  guint cp;
  guint fsdp;           /* FSDP2: 0 none, 1 full sharding, R > 1 HSDP over R replicas */
  ModelRecompute recompute;
  SimSchedule schedule; /* 1f1b, interleaved or gpipe (ZeRO: ignored) */
  gboolean sp;          /* sequence parallelism (t > 1 only) */
  gboolean dist;        /* the distributed optimizer (d > 1 only) */
  gint attention;       /* a ModelAttention searched, or -1: as given, or the device's default */
  SimSplit split;       /* the pipeline split searched (all zero: even, or as given) */
  guint ep, etp;        /* MoE: the expert folding searched (0: a dense model) */
} Candidate;

typedef struct {
  const SearchRequest *req;
  const ModelProfile *profile;
  const TopoCluster *cluster;
  const char *network; /* the network every candidate runs on */
  gboolean split_given; /* the user's options pin the pipeline split */
  const SimLayout *layout; /* --pipeline-model-parallel-layout, parsed once; NULL: none */
  SearchResult *out;
  GArray *best; /* the `keep` smallest iteration times so far, ascending */
  SearchRow *wave; /* every candidate's row, in search order */
  guint *to_simulate; /* the rows of the batch being simulated */
  /* the schedules the planner tries (the table's search_rank order): of
   * one chunk or two (searched at v = 1), and of v chunks */
  const SimScheduleInfo *one[16], *looped[16];
  guint n_one, n_looped;
} Search;

static gint by_search_rank(gconstpointer a, gconstpointer b) {
  const SimScheduleInfo *x = *(const SimScheduleInfo *const *)a, *y = *(const SimScheduleInfo *const *)b;
  return x->search_rank < y->search_rank ? -1 : x->search_rank > y->search_rank;
}

/* The table's schedules the planner may try, in its order. */
static void search_schedules(Search *s) {
  guint n;
  const SimScheduleInfo *t = sim_schedule_table(&n);
  for (guint i = 0; i < n; i++) {
    if (t[i].search == SIM_SEARCH_NEVER)
      continue;
    if (t[i].chunks == SIM_CHUNKS_ANY) {
      g_assert(s->n_looped < G_N_ELEMENTS(s->looped));
      s->looped[s->n_looped++] = &t[i];
    } else {
      g_assert(s->n_one < G_N_ELEMENTS(s->one));
      s->one[s->n_one++] = &t[i];
    }
  }
  qsort(s->one, s->n_one, sizeof s->one[0], by_search_rank);
  qsort(s->looped, s->n_looped, sizeof s->looped[0], by_search_rank);
}

static const char *schedule_word(SimSchedule s) { return sim_schedule_name(s); }

const char *search_recompute_word(ModelRecompute r) {
  return ptd_word_of(sim_recompute_words, (int)r);
}

/* The candidate's options: the user's, with the searched ones set. */
static void candidate_config(const Search *s, const Candidate *c, SearchConfig *cfg) {
  search_config_copy(cfg, s->req->config);
  static const SearchOptId searched[] = {SEARCH_OPT_TP,       SEARCH_OPT_PP,     SEARCH_OPT_DP,
                                         SEARCH_OPT_GPUS,     SEARCH_OPT_MICRO_BATCH, SEARCH_OPT_SCHEDULE,
                                         SEARCH_OPT_CHUNKS,   SEARCH_OPT_LAYERS_PER_CHUNK,
                                         SEARCH_OPT_RECOMPUTE, SEARCH_OPT_ZERO, SEARCH_OPT_NETWORK,
                                         SEARCH_OPT_SEQUENCE_PARALLEL, SEARCH_OPT_DISTRIBUTED_OPTIMIZER,
                                         SEARCH_OPT_CP, SEARCH_OPT_FSDP, SEARCH_OPT_HSDP, SEARCH_OPT_EP,
                                         SEARCH_OPT_EXPERT_TP};
  for (guint i = 0; i < G_N_ELEMENTS(searched); i++)
    search_config_unset(cfg, searched[i]);
  char buf[16];
#define SET(id, v)                                                                                                     \
  do {                                                                                                                 \
    g_snprintf(buf, sizeof buf, "%u", (guint)(v));                                                                     \
    search_config_set(cfg, id, buf, NULL);                                                                             \
  } while (0)
  SET(SEARCH_OPT_GPUS, c->t * c->cp * c->p * c->d);
  SET(SEARCH_OPT_TP, c->t);
  if (c->cp > 1)
    SET(SEARCH_OPT_CP, c->cp);
  SET(SEARCH_OPT_PP, c->p);
  SET(SEARCH_OPT_DP, c->d);
  if (c->ep) {
    SET(SEARCH_OPT_EP, c->ep);
    SET(SEARCH_OPT_EXPERT_TP, c->etp);
  }
  SET(SEARCH_OPT_MICRO_BATCH, c->b);
  if (c->zero)
    SET(SEARCH_OPT_ZERO, c->zero);
  else {
    search_config_set(cfg, SEARCH_OPT_SCHEDULE, schedule_word(c->schedule), NULL);
    if (sim_schedule_info(c->schedule)->chunks == SIM_CHUNKS_ANY)
      SET(SEARCH_OPT_CHUNKS, c->v);
  }
  search_config_set(cfg, SEARCH_OPT_RECOMPUTE, search_recompute_word(c->recompute), NULL);
  if (c->sp)
    search_config_set(cfg, SEARCH_OPT_SEQUENCE_PARALLEL, NULL, NULL);
  if (c->dist)
    search_config_set(cfg, SEARCH_OPT_DISTRIBUTED_OPTIMIZER, NULL, NULL);
  if (c->fsdp == 1)
    search_config_set(cfg, SEARCH_OPT_FSDP, NULL, NULL);
  else if (c->fsdp > 1)
    SET(SEARCH_OPT_HSDP, c->fsdp);
  if (c->attention >= 0) {
    search_config_unset(cfg, SEARCH_OPT_ATTENTION);
    search_config_set(cfg, SEARCH_OPT_ATTENTION, c->attention == MODEL_ATTENTION_FLASH ? "flash" : "fused", NULL);
  }
  search_config_set(cfg, SEARCH_OPT_NETWORK, s->network, NULL);
  if (!s->split_given) {
    if (c->split.first)
      SET(SEARCH_OPT_FIRST_STAGE_LAYERS, c->split.first);
    if (c->split.last)
      SET(SEARCH_OPT_LAST_STAGE_LAYERS, c->split.last);
    if (c->split.embedding)
      search_config_set(cfg, SEARCH_OPT_ACCOUNT_EMBEDDING, NULL, NULL);
    if (c->split.loss)
      search_config_set(cfg, SEARCH_OPT_ACCOUNT_LOSS, NULL, NULL);
  }
#undef SET
}

/* A lower bound on the iteration time sim_ptdp_run gives the plan, or a
 * negative number where none is derived here (MoE layers, DualPipe's two
 * directions, a user's schedule file, --stage-times).  Every term is work
 * the simulator puts on a stage's compute stream, whose ops run one at a
 * time (sim/engine.c), at the durations ptdp/pass.c gives them (the
 * same models/ calls, sim_ptdp_run's: model_layer_cost_with,
 * model_embedding_cost, model_head_cost); stragglers only slow a stream.
 * Per microbatch, route position r (a model chunk on a stage) runs its
 * forward F_r, its input gradient B_r (with the recomputation forward) and
 * its weight gradient W_r.  For stage s, whose first position on the route
 * is r_s:
 *   - nothing runs on s before a microbatch's forward has passed positions
 *     0 .. r_s - 1 (head_s = sum of their F_r);
 *   - s then runs m (F + B + W) of its positions (busy_s);
 *   - the last input gradient at r_s comes after every F and B on s (each
 *     of them precedes that microbatch's B at r_s, and every other
 *     microbatch's B at r_s ended before it), and is followed by that
 *     microbatch's B at positions r_s - 1 .. 0 (tail_s): head_s + m (F + B)
 *     + tail_s, with W inside B where the schedule does not split it.
 * F and B count the tensor-parallel collectives between their compute where
 * sim_ptdp_run puts them in its chain on the analytic network, and the
 * stage's optimizer step follows all of it (head_s + busy_s + step), with
 * Megatron's local DDP after the data-parallel collectives around it.  This
 * is the pipeline's fill and drain ((m + p - 1)(F + B) for 1F1B on even
 * stages) at the device's own rates; the pipeline's transfers and what
 * else the network does only add to it.  Each op's
 * duration is rounded to the nanosecond: `slack` takes off one per op it
 * could be. */
static double ptdp_lower_bound(const SimPlan *pl, const ModelProfile *profile, const TopoCluster *cluster) {
  const SimScheduleInfo *row = sim_schedule_info(pl->schedule);
  /* not for two directions (copies), a file's placement or no passes */
  if (model_is_moe(&pl->model) || pl->stage_times || row->copies || row->chunks == SIM_CHUNKS_FILE || !row->passes)
    return -1;
  SimPassTimes pt;
  sim_ptdp_pass_times(pl, profile, &pt);
  /* the tensor-parallel collectives at a layer pass's two points (forward,
   * input gradient, recomputation forward), in the chain between its
   * compute: on the analytic network, not overlapped with GEMMs nor with
   * another item's compute (DualPipeV's pairs), and inside one NVLink
   * domain, as sim_ptdp_run times them there (a group Megatron's rank order
   * or dp-outermost packs whole: t cp fits a domain or t divides it) */
  double tp_s = 0;
  guint D = cluster->gpus_per_node, cp = sim_plan_cp(pl);
  ModelNet net = {.hw = cluster->net, .free_comm = profile->kind == MODEL_PROFILE_IDEAL, .measured = profile->coll,
                  .n_measured = profile->n_coll};
  if (pl->tp > 1 && !pl->tp_comm_overlap && !pl->flow_network && !row->paired &&
      pl->placement != SIM_PLACEMENT_MISALIGNED && (pl->tp * cp <= D || D % pl->tp == 0)) {
    double bytes = pt.tp_allreduce_bytes;
    tp_s = pl->sequence_parallel ? model_collective_time_s(&net, MODEL_COLL_REDUCESCATTER, bytes, pl->tp, 1, NULL) +
                                       model_collective_time_s(&net, MODEL_COLL_ALLGATHER, bytes, pl->tp, 1, NULL)
                                 : model_collective_time_s(&net, MODEL_COLL_ALLREDUCE, bytes, pl->tp, 1, NULL);
    tp_s *= 2;
  }
  gboolean split = sim_schedule_splits(pl->schedule);
  guint p = pl->pp, v = pl->chunks, route = sim_plan_route_len(pl), m = pl->microbatches;
  double *F = g_new0(double, route), *B = g_new0(double, route), *W = g_new0(double, route);
  guint *stage = g_new(guint, route), lmax = 0;
  for (guint r = 0; r < route; r++) {
    guint s, c;
    sim_plan_place(pl, r, 0, &s, &c);
    guint l = sim_plan_chunk_layers(pl, s, c);
    lmax = MAX(lmax, l);
    stage[r] = s;
    F[r] = l * (pt.layer_f + tp_s) + (r == 0 ? pt.emb_f : 0) + (r + 1 == route ? pt.head_f : 0);
    B[r] = l * (pt.layer_b + pt.layer_recompute + (pl->recompute ? 2 : 1) * tp_s) +
           (r + 1 == route ? pt.head_b - pt.head_w : 0);
    W[r] = l * pt.layer_w + (r + 1 == route ? pt.head_w : 0) + (r == 0 && l > 0 ? pt.emb_b : 0);
  }
  /* the optimizer's step on the compute stream after the stage's last item:
   * on the stage's parameters, or its 1/d shard (sim_ptdp_emit_dp_and_optimizer) */
  guint dpc = pl->dp * cp, shard = pl->fsdp ? dpc / MAX(pl->hsdp_replicas, 1u) : dpc;
  gboolean sharded = (pl->distributed_optimizer || pl->fsdp) && dpc > 1;
  /* before it, Megatron's local DDP reduces the gradients after the flush
   * (all-reduce, or reduce-scatter with the distributed optimizer), which
   * then all-gathers the parameters unless that overlaps the next forward:
   * on the analytic network, over the nodes tensor rank 0's group spans
   * (ranks tp-cp-dp-pp or dp outermost, packed by sim_place) */
  gboolean dp_chain = dpc > 1 && !pl->fsdp && pl->ddp == SIM_DDP_LOCAL && !pl->flow_network &&
                      pl->placement != SIM_PLACEMENT_MISALIGNED;
  double bound = 0;
  for (guint s = 0; s < p; s++) {
    guint64 params = model_stage_params(&pl->model, pl->tp, p, s, sim_plan_stage_layers(pl, s));
    double opt = model_optimizer_time_s(profile, sharded ? (params + shard - 1) / shard : params);
    if (dp_chain) {
      guint nodes = 0, last = G_MAXUINT;
      for (guint j = 0; j < dpc; j++) {
        guint c = j % cp, k = j / cp, tc = pl->tp * cp;
        guint rank = pl->tp * c + tc * (pl->placement == SIM_PLACEMENT_DP_OUTERMOST ? s + p * k : k + pl->dp * s);
        guint node = sim_place(cluster, tc, rank) / D;
        nodes += node != last;
        last = node;
      }
      opt += model_collective_time_s(&net, sharded ? MODEL_COLL_REDUCESCATTER : MODEL_COLL_ALLREDUCE, 2.0 * params,
                                     dpc, nodes, NULL);
      if (sharded && !pl->overlap_param_gather)
        opt += model_collective_time_s(&net, MODEL_COLL_ALLGATHER, 2.0 * params, dpc, nodes, NULL);
    }
    double head = 0, tail = 0, fb = 0, ww = 0;
    gboolean seen = FALSE;
    for (guint r = 0; r < route; r++) {
      if (stage[r] == s) {
        seen = TRUE;
        fb += F[r] + B[r];
        ww += W[r];
      } else if (!seen) {
        head += F[r];
        tail += B[r] + (split ? 0 : W[r]);
      }
    }
    double busy = head + m * (fb + ww) + opt, drained = head + m * (fb + (split ? 0 : ww)) + tail;
    bound = MAX(bound, MAX(busy, drained));
  }
  /* ops per item: up to 3 per layer, or the chunks of 4 overlapped GEMMs
   * and 2 cp ring steps each, and the ends: far fewer than 16 t + 8 cp + 8 */
  double slack = 1e-9 * (3.0 * m * v + route) * (lmax * (16.0 * pl->tp + 8.0 * sim_plan_cp(pl) + 8) + 8);
  g_free(F);
  g_free(B);
  g_free(W);
  g_free(stage);
  return MAX(0, bound - slack);
}

/* What a candidate is, before any simulation: its row, status and plan. */
static void classify(Search *s, const Candidate *c, SearchRow *row, SimPlan *plan) {
  memset(row, 0, sizeof *row);
  candidate_config(s, c, &row->config);
  *row = (SearchRow){.config = row->config, .gpus = c->t * c->cp * c->p * c->d, .tp = c->t, .pp = c->p, .dp = c->d,
                     .cp = c->cp,
                     .micro_batch = c->b, .chunks = c->v, .schedule = c->schedule, .zero = c->zero,
                     .fsdp = c->fsdp,
                     .recompute = c->recompute, .sequence_parallel = c->sp, .distributed_optimizer = c->dist,
                     .attention = "", .split = c->split, .ep = c->ep, .expert_tp = c->etp};
  SimPlanRequest r;
  GError *err = NULL;
  if (!search_config_request(&row->config, &r, &err) || !sim_plan_build(&r, s->cluster, plan, &err) ||
      !sim_plan_check_device(plan, s->profile, &err)) {
    row->status = SEARCH_ROW_INFEASIBLE;
    row->reason = g_strdup(err->message);
    g_error_free(err);
    return;
  }
  row->attention = sim_plan_attention_ran(plan, s->profile);
  row->price_per_gpu_hour = plan->price_per_gpu_hour;
  row->microbatches = plan->microbatches;
  row->chunks = plan->chunks;
  row->split = plan->split;
  row->uneven = !c->zero && sim_plan_uneven(plan);
  row->first_layers = sim_plan_stage_layers(plan, 0);
  row->mid_layers = plan->pp > 2 ? sim_plan_stage_layers(plan, 1) : 0;
  row->last_layers = sim_plan_stage_layers(plan, plan->pp - 1);
  row->stage_layers = g_new(guint, plan->pp);
  for (guint st = 0; st < plan->pp; st++)
    row->stage_layers[st] = sim_plan_stage_layers(plan, st);
  ModelMemory mem;
  guint stage;
  if (c->zero)
    sim_zero_memory(plan, s->profile, &mem);
  else
    sim_ptdp_memory(plan, s->profile, &mem, &stage);
  row->memory_GiB = mem.total / 1073741824.0;
  if (!(mem.total <= sim_plan_usable_bytes(plan, s->profile))) {
    row->status = SEARCH_ROW_OUT_OF_MEMORY;
    row->reason = g_strdup_printf("needs %.1f GiB of %.0f GiB", row->memory_GiB,
                                  sim_plan_usable_bytes(plan, s->profile) / 1073741824.0);
    return;
  }
  if (s->req->keep) {
    row->bound_s = c->zero ? -1 : ptdp_lower_bound(plan, s->profile, s->cluster);
    row->bound_flops = row->bound_s < 0;
    if (row->bound_flops)
      row->bound_s = PRUNE_SLACK * model_hardware_flops_per_iteration(&r.model, r.global_batch, c->recompute) /
                     ((double)r.gpus * s->profile->peak_flops);
  }
  row->status = SEARCH_ROW_RANKED;
}

/* Simulates wave row k (on any thread): fills its results, or marks it
 * infeasible with the simulator's reason. */
static gpointer simulate(guint k, gpointer user) {
  Search *s = user;
  SearchRow *row = &s->wave[s->to_simulate[k]];
  SimPlanRequest r;
  SimPlan *plan = g_new(SimPlan, 1); /* large: TeraPipe's slice table */
  SimResult res;
  GError *err = NULL;
  gboolean ok = search_config_request(&row->config, &r, &err) && sim_plan_build(&r, s->cluster, plan, &err) &&
                (row->zero ? sim_zero_run(plan, s->profile, s->cluster, &res, NULL, NULL, &err)
                           : sim_ptdp_run(plan, s->profile, s->cluster, &res, &err));
  if (ok && !(res.iteration_time_s > 0)) { /* its TFLOP/s would be infinite; trace_run refuses it the same */
    g_set_error(&err, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "the simulated iteration takes less than a nanosecond: the inputs are outside what ptdsim models; "
                "check the profile's numbers (doc/inputs.md)");
    ok = FALSE;
  }
  if (!ok) {
    row->status = SEARCH_ROW_INFEASIBLE;
    row->reason = g_strdup(err->message);
    g_error_free(err);
  } else {
    row->iteration_time_s = res.iteration_time_s;
    row->tflops_per_gpu = res.tflops_per_gpu;
    row->model_tflops_per_gpu = res.model_tflops_per_gpu;
    row->mfu = res.mfu;
    row->peak_tflops = sim_plan_peak_flops(plan, s->profile) / 1e12;
    row->precision = sim_precision_name(sim_plan_precision(plan, s->profile));
    row->sc21_reproduction = sim_plan_is_sc21_reproduction(plan, s->profile);
    row->memory_GiB = res.memory.total / 1073741824.0;
    row->training_days = res.training_days;
    row->tokens_per_s = (double)plan->global_batch * plan->model.seq_len / res.iteration_time_s;
    RtOptions rt;
    RtInput in = {.iteration_s = res.iteration_time_s,
                  .tokens_per_iteration = (double)plan->global_batch * plan->model.seq_len,
                  .tokens = plan->tokens,
                  .gpus = plan->gpus,
                  .gpus_per_node = s->cluster->gpus_per_host};
    RtResult whole;
    rt_checkpoint_bytes(plan, &res, &in.checkpoint_bytes, &in.rank_bytes);
    /* the options were checked before the search (search_run) */
    GError *rt_err = NULL;
    if (plan->tokens > 0 && search_config_runtime(&row->config, &rt, &rt_err) && rt_run(&in, &rt, &whole, &rt_err)) {
      row->run_days = whole.expected_days;
      row->effective_training_time = whole.effective_training_time;
    } else if (plan->tokens > 0) { /* the whole run cannot be priced (as run would refuse it): not ranked */
      row->status = SEARCH_ROW_INFEASIBLE;
      row->reason = g_strdup(rt_err ? rt_err->message : "the whole run cannot be priced");
    }
    g_clear_error(&rt_err);
    row->score = objective_score(s->req->objective, row);
  }
  g_free(plan);
  return row;
}

static gboolean simulated(guint k, gpointer result, gpointer user) {
  (void)k, (void)result, (void)user;
  return TRUE;
}

static void row_clear(SearchRow *r) {
  search_config_clear(&r->config);
  g_clear_pointer(&r->reason, g_free);
  g_clear_pointer(&r->stage_layers, g_free);
}

static void keep_time(Search *s, double t) {
  guint i = s->best->len;
  while (i > 0 && g_array_index(s->best, double, i - 1) > t)
    i--;
  if (i < s->req->keep)
    g_array_insert_val(s->best, i, t);
  if (s->best->len > s->req->keep)
    g_array_set_size(s->best, s->req->keep);
}

/* Candidate indices by bound, ties in search order (qsort_with_data). */
static gint by_bound(gconstpointer a, gconstpointer b, gpointer user) {
  const SearchRow *rows = user;
  guint i = *(const guint *)a, j = *(const guint *)b;
  int c = cmp_double(rows[i].bound_score, rows[j].bound_score);
  return c ? c : cmp_uint(i, j);
}

/* Every candidate classified in search order, those that fit visited by
 * their bound (with `keep`) in batches: a batch's candidates whose bound is
 * above the keep-th best time of the batches before are pruned, the rest
 * simulated on every core; then every row filed in search order. */
static void run_all(Search *s, const Candidate *cands, guint n_cands) {
  SimPlan *plan = g_new(SimPlan, 1);
  /* the rows kept, in search order: all but those out of memory (most of
   * a space), which are only counted unless --show-all lists them */
  GArray *kept = g_array_new(FALSE, FALSE, sizeof(SearchRow));
  GArray *fit = g_array_new(FALSE, FALSE, sizeof(guint));
  for (guint i = 0; i < n_cands; i++) {
    SearchRow row;
    classify(s, &cands[i], &row, plan);
    if (row.status == SEARCH_ROW_OUT_OF_MEMORY && !s->req->rejected) {
      s->out->searched++;
      s->out->out_of_memory++;
      row_clear(&row);
      continue;
    }
    if (row.status == SEARCH_ROW_RANKED)
      g_array_append_val(fit, kept->len);
    g_array_append_val(kept, row);
  }
  g_free(plan);
  guint n = kept->len, n_fit = fit->len, *order = (guint *)(gpointer)fit->data;
  SearchRow *rows = s->wave = (SearchRow *)(gpointer)kept->data;
  for (guint j = 0; j < n_fit; j++)
    rows[order[j]].bound_score = objective_bound(s->req->objective, &rows[order[j]]);
  if (s->req->keep)
    g_qsort_with_data(order, (gint)n_fit, sizeof *order, by_bound, rows);
  guint batch = s->req->keep ? PRUNED_BATCH : BATCH;
  s->to_simulate = g_new(guint, batch);
  for (guint at = 0; at < n_fit; at += batch) {
    guint n_sim = 0;
    double worst = s->req->keep && s->best->len >= s->req->keep ? g_array_index(s->best, double, s->best->len - 1)
                                                                  : INFINITY;
    for (guint j = at; j < MIN(at + batch, n_fit); j++) {
      SearchRow *row = &rows[order[j]];
      if (row->bound_score > worst) {
        row->status = SEARCH_ROW_PRUNED;
        if (s->req->objective == SEARCH_OBJECTIVE_TIME)
          row->reason = g_strdup_printf(row->bound_flops ? "at least %.4f s by its FLOPs at peak, slower than the %u best (%.4f s)"
                                                         : "at least %.4f s by its compute at the device's rates with the "
                                                           "pipeline's fill and drain, slower than the %u best (%.4f s)",
                                        row->bound_s, s->req->keep, worst);
        else
          row->reason = g_strdup_printf("at least %.1f GPU-seconds an iteration (%.4f s on %u GPUs), costlier than "
                                        "the %u best (%.1f)",
                                        row->bound_score, row->bound_s, row->gpus, s->req->keep, worst);
      } else
        s->to_simulate[n_sim++] = order[j];
    }
    SearchPool pool = {n_sim, 0, 1, s->req->jobs, simulate, simulated, NULL, s, NULL};
    search_pool_run(&pool);
    for (guint j = 0; j < n_sim && s->req->keep; j++)
      if (rows[s->to_simulate[j]].status == SEARCH_ROW_RANKED)
        keep_time(s, rows[s->to_simulate[j]].score);
  }
  for (guint i = 0; i < n; i++) {
    SearchRow *row = &rows[i];
    s->out->searched++;
    switch (row->status) {
    case SEARCH_ROW_RANKED:
      s->out->simulated++;
      g_array_append_val(s->out->rows, *row);
      continue; /* the row's strings now belong to out->rows */
    case SEARCH_ROW_OUT_OF_MEMORY:
      s->out->out_of_memory++;
      break;
    case SEARCH_ROW_INFEASIBLE:
      s->out->infeasible++;
      if (!s->out->first_infeasible)
        s->out->first_infeasible = g_strdup(row->reason);
      break;
    case SEARCH_ROW_PRUNED:
      s->out->pruned++;
      break;
    }
    if (s->req->rejected)
      g_array_append_val(s->out->rejected, *row);
    else
      row_clear(row);
  }
  g_array_free(fit, TRUE);
  g_free(s->to_simulate);
  g_array_free(kept, TRUE);
}

/* The values of a searched dimension: the pinned one, or those `ok`. */
static gboolean pinned(const SearchConfig *c, SearchOptId id, guint *v) {
  if (!c->given[id])
    return FALSE;
  *v = c->count[id];
  return TRUE;
}

/* The pipeline splits to try on p stages: the user's, where given and it
 * fits; else the even split where p divides the layers and the uneven ones
 * a Megatron user would try (sim_split_candidates). */
static guint splits_of(const Search *s, const SimPlanRequest *base, guint p, SimSplit *out) {
  guint f, mid, l;
  if (s->split_given) {
    out[0] = base->split;
    /* a layout's virtual stages: a multiple of p (sim_plan_build checks the rest) */
    if (s->req->config->given[SEARCH_OPT_PIPELINE_LAYOUT])
      return s->layout && s->layout->n % p == 0 ? 1 : 0;
    return sim_split_layers(&base->split, base->model.layers, p, 1, &f, &mid, &l, NULL) ? 1 : 0;
  }
  guint n = 0;
  if (base->model.layers % p == 0)
    out[n++] = (SimSplit){0};
  return n + sim_split_candidates(base->model.layers, p, out + n, SEARCH_MAX_SPLITS - n);
}

gboolean search_run(const SearchRequest *req, const ModelProfile *profile, const TopoCluster *cluster,
                    SearchResult *out, GError **error) {
  memset(out, 0, sizeof *out);
  out->rows = g_array_new(FALSE, FALSE, sizeof(SearchRow));
  out->rejected = g_array_new(FALSE, FALSE, sizeof(SearchRow));
  const SearchConfig *cfg = req->config;
  /* the options as given: the model, the GPUs, the batch and the split
   * (--schedule all is plan's word for every schedule, which no run takes) */
  SimPlanRequest base;
  SearchConfig plain;
  if (cfg->given[SEARCH_OPT_LOCAL_BATCH]) { /* its global batch would change with each candidate's d */
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--local-batch fixes the batch per data-parallel rank, whose number plan searches; give --global-batch");
    return FALSE;
  }
  search_config_copy(&plain, cfg);
  if (plain.text[SEARCH_OPT_SCHEDULE] && strcmp(plain.text[SEARCH_OPT_SCHEDULE], "all") == 0)
    search_config_unset(&plain, SEARCH_OPT_SCHEDULE);
  gboolean base_ok = search_config_request(&plain, &base, error);
  search_config_clear(&plain);
  /* its texts pointed into the copy; none is read below */
  base.slices_text = base.schedule_file = base.stage_times_text = base.layout = NULL;
  if (!base_ok)
    return FALSE;
  out->model = base.model;
  const ModelShape *m = &base.model;
  guint n = base.gpus, B = base.global_batch;
  if (n > topo_cluster_gpus(cluster)) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--gpus %u is more than cluster '%s' has (%u); give at most %u, or more nodes (--nodes N)", n,
                cluster->name, topo_cluster_gpus(cluster), topo_cluster_gpus(cluster));
    return FALSE;
  }
  const char *sched = cfg->text[SEARCH_OPT_SCHEDULE];
  if (sched && strcmp(sched, "terapipe") == 0) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "plan searches PTD-P and ZeRO; for TeraPipe, sweep its options: ptdsim sweep --schedule terapipe ...");
    return FALSE;
  }
  if (cfg->given[SEARCH_OPT_SLICES] || cfg->given[SEARCH_OPT_GRANULARITY]) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--slices and --granularity are TeraPipe's; plan searches PTD-P and ZeRO");
    return FALSE;
  }
  /* Analytic by default: thousands of candidates, each simulated once (and
   * measured collectives drive the analytic model only, as in `run`). */
  const char *network = cfg->text[SEARCH_OPT_NETWORK] ? cfg->text[SEARCH_OPT_NETWORK] : "analytic";
  /* every candidate's GEMMs at the clock the run asks for: --clock burst,
   * or the GPUs' power cap (--power-limit, the cluster's) */
  ModelProfile *clocked = g_new(ModelProfile, 1);
  const ModelProfile *run_profile = sim_request_clock_profile(&base, cluster, profile, clocked, error);
  if (!run_profile) {
    g_free(clocked);
    return FALSE;
  }
  Search *s = g_new0(Search, 1);
  s->req = req;
  s->profile = run_profile;
  s->cluster = cluster;
  s->network = network;
  s->split_given = cfg->given[SEARCH_OPT_FIRST_STAGE_LAYERS] || cfg->given[SEARCH_OPT_LAST_STAGE_LAYERS] ||
                   cfg->given[SEARCH_OPT_ACCOUNT_EMBEDDING] || cfg->given[SEARCH_OPT_ACCOUNT_LOSS] ||
                   cfg->given[SEARCH_OPT_PIPELINE_LAYOUT];
  s->layout = cfg->text[SEARCH_OPT_PIPELINE_LAYOUT] ? sim_layout_parse(cfg->text[SEARCH_OPT_PIPELINE_LAYOUT], NULL)
                                                      : NULL;
  s->out = out;
  s->best = g_array_new(FALSE, FALSE, sizeof(double));
  search_schedules(s);
  /* The (t, p, d) triples: t inside an NVLink domain (dividing it, or a
   * power of two packed whole into it: sim_place) and dividing the heads (hence
   * the hidden size), the key/value groups and the MLP width, p with a
   * split of the layers (splits_of), d dividing the batch; a pinned
   * size is taken as given (the plan checks say if it cannot run). */
  guint pin;
  GArray *tpd = g_array_new(FALSE, FALSE, sizeof(Triple));
  for (guint t = 1; t <= MAX(cluster->gpus_per_node, cfg->count[SEARCH_OPT_TP]); t++) {
    if (pinned(cfg, SEARCH_OPT_TP, &pin) ? t != pin
                                         : t > cluster->gpus_per_node || (cluster->gpus_per_node % t && (t & (t - 1))) || m->heads % t ||
                                               m->hidden % t || model_groups(m) % t || model_ffn(m) % t)
      continue;
    for (guint p = 1; p <= m->layers; p++) {
      SimSplit splits[SEARCH_MAX_SPLITS];
      if ((pinned(cfg, SEARCH_OPT_PP, &pin) ? p != pin : splits_of(s, &base, p, splits) == 0) || (guint64)t * p > n)
        continue;
      for (guint cp = 1; cp <= SEARCH_MAX_CP; cp++) {
        /* context parallelism: sizes that split the sequence into 2 cp
         * chunks of at least SEARCH_MIN_CP_TOKENS / 2 tokens each, or the
         * size --cp pins */
        if (pinned(cfg, SEARCH_OPT_CP, &pin) ? cp != pin
                                             : cp > 1 && (m->seq_len % (2 * cp) || m->seq_len / cp < SEARCH_MIN_CP_TOKENS))
          continue;
        for (guint d = 1; (guint64)t * cp * p * d <= n; d++) {
          if ((pinned(cfg, SEARCH_OPT_DP, &pin) ? d != pin : B % d != 0) ||
              (!req->allow_fewer && (guint64)t * cp * p * d != n))
            continue;
          Triple x = {t, p, d, cp};
          g_array_append_val(tpd, x);
        }
      }
    }
  }
  g_array_sort(tpd, triple_cmp);
  /* Per triple: b, then the schedule and v, then recompute; then ZeRO. */
  gboolean zero_ok = !sched && !cfg->given[SEARCH_OPT_FSDP] && !cfg->given[SEARCH_OPT_HSDP] && !cfg->given[SEARCH_OPT_DDP] && !cfg->given[SEARCH_OPT_CHUNKS] &&
                     !cfg->given[SEARCH_OPT_LAYERS_PER_CHUNK] && !cfg->given[SEARCH_OPT_DISTRIBUTED_OPTIMIZER] &&
                     !s->split_given;
  gboolean ptdp_ok = !cfg->given[SEARCH_OPT_ZERO];
  /* FSDP2 beside PTD-P: full sharding, and HSDP with shard groups of 8
   * (a node of ranks) where that leaves at least 2 replicas; --fsdp or
   * --hsdp R pins it */
  gboolean fsdp_given = cfg->given[SEARCH_OPT_FSDP] || cfg->given[SEARCH_OPT_HSDP];
  gboolean fsdp_ok = ptdp_ok && !cfg->given[SEARCH_OPT_DDP] && !cfg->given[SEARCH_OPT_DISTRIBUTED_OPTIMIZER] &&
                     !cfg->given[SEARCH_OPT_OVERLAP_PARAM_GATHER];
  /* the attention kernels to try: flash and Megatron's where the device has
   * flash's figures, else its default alone */
  gint attn[2] = {-1, -1};
  guint n_attn = 1;
  if (!cfg->given[SEARCH_OPT_ATTENTION] && profile->kind == MODEL_PROFILE_ANALYTIC &&
      profile->flash_forward_efficiency > 0 && profile->flash_backward_efficiency > 0) {
    attn[0] = MODEL_ATTENTION_FLASH;
    attn[1] = MODEL_ATTENTION_FUSED;
    n_attn = 2;
  }
  /* --tp-comm-overlap needs sequence parallelism, --overlap-param-gather
   * the distributed optimizer: given, they pin those on */
  gboolean need_sp = cfg->given[SEARCH_OPT_SEQUENCE_PARALLEL] || cfg->given[SEARCH_OPT_TP_COMM_OVERLAP];
  gboolean pg = cfg->given[SEARCH_OPT_OVERLAP_PARAM_GATHER];
  gboolean need_dist = cfg->given[SEARCH_OPT_DISTRIBUTED_OPTIMIZER] || pg;
  GArray *cands = g_array_new(FALSE, FALSE, sizeof(Candidate));
  gboolean moe = model_is_moe(m);
  if (moe) /* ZeRO is not modelled with MoE layers */
    zero_ok = FALSE;
  for (guint i = 0; i < tpd->len; i++) {
    Triple x = g_array_index(tpd, Triple, i);
    guint p = x.p, per_replica = MAX(1u, B / x.d);
    SimSplit splits[SEARCH_MAX_SPLITS];
    guint n_splits = splits_of(s, &base, p, splits);
    if (n_splits == 0) { /* a pinned p that no split fits: the plan checks say why */
      splits[0] = base.split;
      n_splits = 1;
    }
    for (guint si = 0; si < n_splits; si++)
    for (guint b = 1; b <= per_replica; b++) {
      /* the chunks divide the layers of each stage (the shares the split
       * gives: the plan checks refuse what they cannot take) */
      SimSplit split = splits[si];
      guint f_l = 0, lps = 0, l_l = 0;
      if (!sim_split_layers(&split, m->layers, p, 1, &f_l, &lps, &l_l, NULL))
        lps = MAX(1u, m->layers / p);
      gboolean ends = split.first || split.last;
      guint f_v, m_v, l_v; /* the same with v chunks */
      if (ends && p == 2)
        lps = f_l; /* no middle stage */
      if (pinned(cfg, SEARCH_OPT_MICRO_BATCH, &pin) ? b != pin : per_replica % b != 0)
        continue;
      guint mb = per_replica / b;
      /* full, selective, none: most memory saved first; the frameworks'
       * own policies only where --recompute pins one */
      static const ModelRecompute modes[] = {MODEL_RECOMPUTE_FULL, MODEL_RECOMPUTE_SELECTIVE, MODEL_RECOMPUTE_NONE,
                                             MODEL_RECOMPUTE_OP,   MODEL_RECOMPUTE_LAYER,     MODEL_RECOMPUTE_MODULES};
      for (guint mi = 0; mi < G_N_ELEMENTS(modes); mi++) {
        ModelRecompute rc = modes[mi];
        const char *want = cfg->text[SEARCH_OPT_RECOMPUTE];
        if (want ? strcmp(want, search_recompute_word(rc)) != 0 : mi >= 3)
          continue;
        /* a given layout's chunks: its pieces over p (the V's and DualPipe's
         * own placements are searched at v = 1) */
        const SimLayout *lay = s->layout;
        guint layout_v = lay ? lay->n / p : 0;
        for (guint v = 1; ptdp_ok && v <= MAX(lps, layout_v); v++) {
          /* v = 1: 1F1B (or GPipe, pinned); v >= 2: interleaved, which needs
           * p >= 2 and m a multiple of p. */
          if (lay ? (v != 1 && v != layout_v) || (v > 1 && (p < 2 || mb % p))
                  : lps % v || (v > 1 && (p < 2 || mb % p)) ||
                        (v > 1 && (ends || split.embedding || split.loss) &&
                         !sim_split_layers(&split, m->layers, p, v, &f_v, &m_v, &l_v, NULL)))
            continue;
          /* the schedules of v chunks: 1F1B (GPipe when pinned) or
           * interleaved 1F1B; with --schedule all, or one of them named,
           * the zero-bubble family and DualPipe too (whose V and two
           * directions set their own chunks: searched at v = 1) */
          const SimScheduleInfo *const *fam = v > 1 ? s->looped : s->one;
          guint n_fam = v > 1 ? s->n_looped : s->n_one;
          for (guint fi = 0; fi < n_fam; fi++) {
          SimSchedule sc = fam[fi]->id;
          gboolean all = sched && strcmp(sched, "all") == 0;
          if (!sched ? fam[fi]->search != SIM_SEARCH_DEFAULT
                     : all ? fam[fi]->search != SIM_SEARCH_ALL && fam[fi]->search != SIM_SEARCH_DEFAULT
                           : strcmp(sched, schedule_word(sc)) != 0)
            continue;
          if ((cfg->given[SEARCH_OPT_CHUNKS] && v != cfg->count[SEARCH_OPT_CHUNKS]) ||
              (cfg->given[SEARCH_OPT_LAYERS_PER_CHUNK] && (ends || v * cfg->count[SEARCH_OPT_LAYERS_PER_CHUNK] != lps)))
            continue;
          /* sequence parallelism where there is tensor parallelism, the
           * distributed optimizer where there is data parallelism: both
           * ways, or only on when given; and each attention kernel the
           * device runs, unless --attention is given */
          for (int sp = 0; sp <= 1; sp++)
            for (int dist = 0; dist <= 1; dist++)
              for (guint ai = 0; ai < n_attn; ai++) {
                if (sp ? x.t < 2 : (x.t > 1 && need_sp) || (x.t < 2 && cfg->given[SEARCH_OPT_TP_COMM_OVERLAP]))
                  continue;
                if (dist ? x.d * x.cp < 2 : (x.d * x.cp > 1 && need_dist) || (x.d * x.cp < 2 && pg))
                  continue;
                if (x.cp > 1 && n_attn > 1 && attn[ai] != MODEL_ATTENTION_FLASH)
                  continue; /* ring attention runs on FlashAttention's kernels */
                if (moe && x.t > 1 && !sp)
                  continue; /* Megatron-Core runs MoE with tensor parallelism only with sequence parallelism */
                Candidate c = {x.t, p, x.d, b, v, 0, x.cp, 0, rc, sc, sp, dist, attn[ai], s->split_given ? (SimSplit){0} : split,
                               0, 0};
                if (moe) {
                  /* MoE: every ep dividing the experts and, with expert-tp 1
                   * or t (Megatron-Core's default), the stage's t cp d ranks */
                  for (guint ep = 1; ep <= m->experts; ep++)
                    for (guint e = 0; e < 2; e++) {
                      guint etp = e ? x.t : 1, stage = x.t * x.cp * x.d;
                      if ((e && x.t == 1) || m->experts % ep || stage % (ep * etp) || model_moe_ffn(m) % etp ||
                          (pinned(cfg, SEARCH_OPT_EP, &pin) && ep != pin) ||
                          (pinned(cfg, SEARCH_OPT_EXPERT_TP, &pin) && etp != pin))
                        continue;
                      c.ep = ep;
                      c.etp = etp;
                      g_array_append_val(cands, c);
                    }
                  continue;
                }
                if (!fsdp_given)
                  g_array_append_val(cands, c);
                /* FSDP2 in place of the distributed optimizer, on 1F1B */
                guint dpc = x.d * x.cp;
                if (!fsdp_ok || dist || v > 1 || dpc < 2)
                  continue;
                guint Rs[2] = {1, dpc % 8 == 0 && dpc / 8 >= 2 ? dpc / 8 : 0};
                if (cfg->given[SEARCH_OPT_HSDP])
                  Rs[0] = cfg->count[SEARCH_OPT_HSDP], Rs[1] = 0;
                for (guint ri = 0; ri < 2; ri++) {
                  if (Rs[ri] == 0 || (ri == 1 && cfg->given[SEARCH_OPT_FSDP]) || Rs[ri] >= dpc || dpc % Rs[ri])
                    continue;
                  c.fsdp = Rs[ri];
                  g_array_append_val(cands, c);
                }
              }
          }
        }
        /* ZeRO data parallelism, without model parallelism (as SC21 runs it) */
        for (guint z = 1; zero_ok && si == 0 && rc != MODEL_RECOMPUTE_SELECTIVE && x.t == 1 && p == 1 && x.cp == 1 &&
                          x.d > 1 && z <= 3;
             z++) {
          if (cfg->given[SEARCH_OPT_ZERO] && z != cfg->count[SEARCH_OPT_ZERO])
            continue;
          Candidate c = {1, 1, x.d, b, 1, z, 1, 0, rc, SIM_SCHEDULE_1F1B, FALSE, FALSE, -1, {0}, 0, 0};
          g_array_append_val(cands, c);
        }
      }
    }
  }
  g_array_free(tpd, TRUE);
  run_all(s, (const Candidate *)(gpointer)cands->data, cands->len);
  g_array_free(cands, TRUE);
  g_array_free(s->best, TRUE);
  g_free(s);
  g_free(clocked);
  g_array_sort(out->rows, row_cmp);
  if (out->searched == 0) {
    GString *pins = g_string_new(NULL);
    for (guint i = 0; i < SEARCH_N_OPTIONS; i++) {
      static const SearchOptId pinnable[] = {SEARCH_OPT_TP,       SEARCH_OPT_PP,    SEARCH_OPT_DP,
                                             SEARCH_OPT_MICRO_BATCH, SEARCH_OPT_SCHEDULE, SEARCH_OPT_CHUNKS,
                                             SEARCH_OPT_LAYERS_PER_CHUNK, SEARCH_OPT_RECOMPUTE, SEARCH_OPT_ZERO,
                                             SEARCH_OPT_DDP, SEARCH_OPT_FIRST_STAGE_LAYERS,
                                             SEARCH_OPT_LAST_STAGE_LAYERS, SEARCH_OPT_ACCOUNT_EMBEDDING,
                                             SEARCH_OPT_ACCOUNT_LOSS, SEARCH_OPT_PIPELINE_LAYOUT};
      for (guint k = 0; k < G_N_ELEMENTS(pinnable); k++)
        if (pinnable[k] == i && cfg->given[i])
          g_string_append_printf(pins, "%s--%s", pins->len ? ", " : "", search_option((SearchOptId)i)->name);
    }
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "no candidate agrees with %s: a candidate needs t*p*d = %u GPUs%s with the layers split over p stages "
                "and d dividing the batch, b dividing the batch per replica, and v chunks dividing the layers per "
                "stage; change %s%s",
                pins->len ? pins->str : "the model and batch", n, req->allow_fewer ? " or fewer" : "",
                pins->len ? "the pinned options" : "--gpus or --global-batch",
                req->allow_fewer ? "" : " or add --allow-fewer");
    g_string_free(pins, TRUE);
    return FALSE;
  }
  if (out->rows->len == 0 && out->out_of_memory == 0 && out->first_infeasible) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "no configuration can run: all %u candidates are refused, the first because %s", out->searched,
                out->first_infeasible);
    return FALSE;
  }
  if (out->rows->len == 0) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_OOM,
                "no configuration fits: %u searched, %u out of memory, %u infeasible on %u GPUs%s; give more --gpus, "
                "a smaller --global-batch, a smaller model or fewer pinned options (--show-all lists why each was "
                "rejected)",
                out->searched, out->out_of_memory, out->infeasible, n, req->allow_fewer ? " or fewer" : "");
    return FALSE;
  }
  return TRUE;
}

void search_result_clear(SearchResult *r) {
  g_free(r->first_infeasible);
  GArray *lists[2] = {r->rows, r->rejected};
  for (guint l = 0; l < 2; l++)
    if (lists[l]) {
      for (guint i = 0; i < lists[l]->len; i++)
        row_clear(&g_array_index(lists[l], SearchRow, i));
      g_array_free(lists[l], TRUE);
    }
  memset(r, 0, sizeof *r);
}
