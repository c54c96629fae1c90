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
 * Pruning (keeps the best `keep` rows exact): no GPU executes faster than its
 * peak, so an iteration takes at least F_hw / (n peak), F_hw the executed
 * FLOPs (Eq. 3, with or without the recomputation pass).  A candidate whose
 * bound, loosened by PRUNE_SLACK against any FLOP the cost model might count
 * differently from the formula, is above the keep-th best time found so far
 * cannot enter the list and is not simulated.  Largest GPU counts are tried
 * first so that the threshold is tight early; this matters with
 * --allow-fewer, where most candidates use a fraction of the budget. */
#include "planner.h"

#include "../sim/zero.h"

#include <math.h>
#include <string.h>

static int cmp_double(double a, double b) { return a < b ? -1 : a > b ? 1 : 0; }
static int cmp_uint(guint a, guint b) { return a < b ? -1 : a > b ? 1 : 0; }

int search_row_cmp(const SearchRow *a, const SearchRow *b) {
  int c;
  if ((c = cmp_double(a->iteration_time_s, b->iteration_time_s)) || (c = cmp_double(a->memory_GiB, b->memory_GiB)) ||
      (c = cmp_uint(a->gpus, b->gpus)) || (c = cmp_uint(a->tp, b->tp)) || (c = cmp_uint(a->pp, b->pp)) ||
      (c = cmp_uint(a->dp, b->dp)) || (c = cmp_uint(a->micro_batch, b->micro_batch)) ||
      (c = cmp_uint(a->schedule, b->schedule)) || (c = cmp_uint(a->chunks, b->chunks)) ||
      (c = cmp_uint(a->zero, b->zero)) || (c = cmp_uint(a->recompute, b->recompute)))
    return c;
  return 0;
}

static int row_cmp(const void *a, const void *b) { return search_row_cmp(a, b); }

typedef struct {
  guint t, p, d;
} Triple;

/* Most GPUs first, then t, p, d ascending: a fixed order. */
static int triple_cmp(const void *a, const void *b) {
  const Triple *x = a, *y = b;
  guint64 nx = (guint64)x->t * x->p * x->d, ny = (guint64)y->t * y->p * y->d;
  int c;
  if ((c = (nx < ny) - (nx > ny)) || (c = cmp_uint(x->t, y->t)) || (c = cmp_uint(x->p, y->p)))
    return c;
  return cmp_uint(x->d, y->d);
}

#define PRUNE_SLACK 0.8

typedef struct {
  const SearchRequest *req;
  GArray *best; /* the `keep` smallest iteration times so far, ascending */
  const ModelProfile *profile;
  const TopoCluster *cluster;
  SearchResult *out;
  SimPlan plan; /* reused: SimPlan is large (TeraPipe slice table) */
} Search;

/* One candidate: build, check memory, simulate.  Only a simulation error
 * that is not about the configuration (none expected) stops the search. */
static gboolean try_one(Search *s, guint t, guint p, guint d, guint b, guint v, guint zero, gboolean recompute,
                        GError **error) {
  SimPlanRequest r = s->req->base;
  r.gpus = t * p * d;
  r.tp = t;
  r.pp = p;
  r.dp = d;
  r.micro_batch = b;
  r.schedule = zero ? NULL : v > 1 ? "interleaved" : "1f1b";
  r.chunks = v > 1 ? v : 0;
  r.layers_per_chunk = 0;
  r.recompute = recompute ? "full" : "none";
  r.ddp = zero ? NULL : "local";
  r.zero = zero;
  r.allow_oom = FALSE;
  s->out->searched++;
  GError *err = NULL;
  if (!sim_plan_build(&r, s->cluster, &s->plan, &err)) {
    g_clear_error(&err);
    s->out->infeasible++;
    return TRUE;
  }
  ModelMemory mem;
  guint stage;
  if (zero)
    sim_zero_memory(&s->plan, &mem);
  else
    sim_ptdp_memory(&s->plan, &mem, &stage);
  if (!(mem.total <= s->profile->memory_bytes)) {
    s->out->out_of_memory++;
    return TRUE;
  }
  if (s->req->keep && s->best->len >= s->req->keep) {
    double bound = PRUNE_SLACK * model_hardware_flops_per_iteration(&r.model, r.global_batch, recompute) /
                   ((double)r.gpus * s->profile->peak_flops);
    if (bound > g_array_index(s->best, double, s->best->len - 1)) {
      s->out->pruned++;
      return TRUE;
    }
  }
  SimResult res;
  if (!(zero ? sim_zero_run(&s->plan, s->profile, s->cluster, &res, NULL, NULL, &err)
             : sim_ptdp_run(&s->plan, s->profile, s->cluster, &res, &err))) {
    if (g_error_matches(err, SIM_PLAN_ERROR, SIM_PLAN_ERROR_OOM) ||
        g_error_matches(err, SIM_PLAN_ERROR, SIM_PLAN_ERROR_TOO_BIG) ||
        g_error_matches(err, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID)) {
      g_clear_error(&err);
      s->out->infeasible++;
      return TRUE;
    }
    g_propagate_error(error, err);
    return FALSE;
  }
  s->out->simulated++;
  const SimPlan *pl = &s->plan;
  SearchRow row = {
      .gpus = pl->gpus,
      .tp = t,
      .pp = p,
      .dp = d,
      .micro_batch = b,
      .chunks = pl->chunks,
      .microbatches = pl->microbatches,
      .schedule = pl->schedule,
      .zero = zero,
      .recompute = pl->recompute,
      .iteration_time_s = res.iteration_time_s,
      .tflops_per_gpu = res.tflops_per_gpu,
      .memory_GiB = res.memory.total / 1073741824.0,
      .training_days = res.training_days,
      .tokens_per_s = (double)pl->global_batch * pl->model.seq_len / res.iteration_time_s,
  };
  g_array_append_val(s->out->rows, row);
  if (s->req->keep) {
    guint i = s->best->len;
    while (i > 0 && g_array_index(s->best, double, i - 1) > row.iteration_time_s)
      i--;
    if (i < s->req->keep)
      g_array_insert_val(s->best, i, row.iteration_time_s);
    if (s->best->len > s->req->keep)
      g_array_set_size(s->best, s->req->keep);
  }
  return TRUE;
}

gboolean search_run(const SearchRequest *req, const ModelProfile *profile, const TopoCluster *cluster,
                        SearchResult *out, GError **error) {
  memset(out, 0, sizeof *out);
  out->rows = g_array_new(FALSE, FALSE, sizeof(SearchRow));
  const ModelShape *m = &req->base.model;
  guint n = req->base.gpus, B = req->base.global_batch;
  if (n == 0 || B == 0 || m->layers == 0 || m->heads == 0) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "--gpus, --global-batch and a model are required");
    return FALSE;
  }
  if (n > topo_cluster_gpus(cluster)) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--gpus %u is more than cluster '%s' has (%u nodes x %u GPUs = %u); give at most %u", n,
                cluster->name, cluster->nodes, cluster->gpus_per_node, topo_cluster_gpus(cluster),
                topo_cluster_gpus(cluster));
    return FALSE;
  }
  Search *s = g_new0(Search, 1);
  s->req = req;
  s->profile = profile;
  s->cluster = cluster;
  s->out = out;
  /* The (t, p, d) triples: t inside a node and dividing the heads (hence
   * the hidden size), p dividing the layers, d dividing the batch. */
  GArray *tpd = g_array_new(FALSE, FALSE, sizeof(Triple));
  for (guint t = 1; t <= cluster->gpus_per_node; t++) {
    if (cluster->gpus_per_node % t || m->heads % t || m->hidden % t)
      continue;
    for (guint p = 1; p <= m->layers; p++) {
      if (m->layers % p || (guint64)t * p > n)
        continue;
      for (guint d = 1; (guint64)t * p * d <= n; d++) {
        if (B % d || (!req->allow_fewer && (guint64)t * p * d != n))
          continue;
        Triple x = {t, p, d};
        g_array_append_val(tpd, x);
      }
    }
  }
  g_array_sort(tpd, triple_cmp);
  s->best = g_array_new(FALSE, FALSE, sizeof(double));
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < tpd->len; i++) {
    Triple x = g_array_index(tpd, Triple, i);
    guint p = x.p, per_replica = B / x.d, lps = m->layers / p;
    for (guint b = 1; ok && b <= per_replica; b++) {
      if (per_replica % b)
        continue;
      guint mb = per_replica / b;
      for (guint v = 1; ok && v <= lps; v++) {
        /* v = 1: 1F1B; v >= 2: interleaved, which needs p >= 2 and m a multiple of p. */
        if (lps % v || (v > 1 && (p < 2 || mb % p)))
          continue;
        for (int rc = 1; ok && rc >= 0; rc--)
          ok = try_one(s, x.t, p, x.d, b, v, 0, rc, error);
      }
      /* ZeRO data parallelism, without model parallelism (as SC21 runs it) */
      for (guint z = 1; ok && x.t == 1 && p == 1 && x.d > 1 && z <= 3; z++)
        for (int rc = 1; ok && rc >= 0; rc--)
          ok = try_one(s, 1, 1, x.d, b, 1, z, rc, error);
    }
  }
  g_array_free(tpd, TRUE);
  g_array_free(s->best, TRUE);
  g_free(s);
  if (!ok)
    return FALSE;
  g_array_sort(out->rows, row_cmp);
  if (out->rows->len == 0) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_OOM,
                "no configuration fits: %u searched, %u out of memory, %u infeasible on %u GPUs%s; give more --gpus, "
                "a smaller --global-batch or a smaller model",
                out->searched, out->out_of_memory, out->infeasible, n, req->allow_fewer ? " or fewer" : "");
    return FALSE;
  }
  return TRUE;
}

void search_result_clear(SearchResult *r) {
  if (r->rows)
    g_array_free(r->rows, TRUE);
  memset(r, 0, sizeof *r);
}
