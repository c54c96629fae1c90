/* ptdsim — TeraPipe on the engine (see terapipe.h). */
#include "terapipe.h"

#include <math.h>
#include <string.h>

#include "../models/layer.h"
#include "../models/slicing.h"
#include "../sim/engine.h"
#include "../sim/exposed.h"
#include "../sim/tags.h"
#include "../taskgraph/timeline.h"


#define FAIL_INVALID(...)                                                                                              \
  do {                                                                                                                 \
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, __VA_ARGS__);                                           \
    return FALSE;                                                                                                      \
  } while (0)

static SimTime ns(double seconds) { return sim_time_ns(seconds); }

/* --- slicings --- */

void sim_terapipe_slicing_init(SimTeraPipeSlicing *s) {
  memset(s, 0, sizeof *s);
  s->batch = g_array_new(FALSE, FALSE, sizeof(guint));
  s->tokens = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
  s->fit_max_rel_error = s->fit_mean_rel_error = -1;
}

void sim_terapipe_slicing_clear(SimTeraPipeSlicing *s) {
  if (s->batch)
    g_array_free(s->batch, TRUE);
  if (s->tokens)
    g_ptr_array_free(s->tokens, TRUE);
  memset(s, 0, sizeof *s);
}

static void add_slice(SimTeraPipeSlicing *s, guint b, GArray *tokens) {
  g_array_append_val(s->batch, b);
  g_ptr_array_add(s->tokens, tokens);
}

void sim_terapipe_slicing_add_uniform(SimTeraPipeSlicing *s, guint b, guint seq_len, guint granularity, guint n) {
  guint units = seq_len / granularity;
  GArray *t = g_array_new(FALSE, FALSE, sizeof(guint));
  for (guint m = 0; m < n; m++) {
    guint len = (units / n + (m < units % n ? 1 : 0)) * granularity;
    g_array_append_val(t, len);
  }
  add_slice(s, b, t);
}

typedef struct {
  guint b, tokens, context;
  gboolean fwd;
} Item;

typedef struct {
  const SimPlan *pl;
  const TopoCluster *cluster;
  ModelNet net; /* the cluster's network; free with the ideal profile */
  SimEngine *e;
  guint p, n; /* stages, items per stage (2 x slices) */
  Item *items;
  guint *first, *last; /* [s * n + j] */
  double bytes_tp, bytes_pp, bytes_dp;
  double bytes_embedding; /* the tied-embedding all-reduce's part of bytes_dp */
  GArray *pieces;         /* traced runs: what each op is (timeline.h) */
} Build;

/* TeraPipe's rank order (mpu/initialize.py initialize_model_parallel):
 * tensor-parallel ranks fastest, then pipeline stages, then data-parallel
 * replicas, GPU = i + t (s + p k): consecutive stages share a node and the
 * replicas are spread across nodes. */
static guint gpu_of(const Build *b, guint i, guint k, guint s) {
  return sim_place(b->cluster, b->pl->tp, i + b->pl->tp * (s + b->pl->pp * k));
}

static guint node_of(const Build *b, guint i, guint k, guint s) {
  return gpu_of(b, i, k, s) / b->cluster->gpus_per_node;
}

/* Ranks on stage s's node (that of replica 0) that send to a different
 * node when stage s sends to stage d: one rank per replica sends (hop_parts),
 * the replicas at the same time, so those on one node share its NICs. */
static guint cross_senders(const Build *b, guint s, guint d) {
  guint home = node_of(b, 0, 0, s), count = 0;
  for (guint k = 0; k < b->pl->dp; k++)
    if (node_of(b, 0, k, s) == home && node_of(b, 0, k, d) != home)
      count++;
  return count;
}

static guint dp_nodes(const Build *b, guint s) {
  guint count = 0, last = G_MAXUINT;
  for (guint k = 0; k < b->pl->dp; k++) {
    guint node = node_of(b, 0, k, s);
    count += node != last;
    last = node;
  }
  return count;
}

static double p2p_time(const Build *b, double bytes, guint s, guint d) {
  const ModelNet *net = &b->net;
  if (net->free_comm || bytes <= 0)
    return 0;
  if (node_of(b, 0, 0, s) == node_of(b, 0, 0, d))
    return model_p2p_time_s(net, bytes, TRUE);
  /* A rank uses one NIC at most, and NCCL's channels for the peer
   * (model_p2p_net_rate); the node's NICs are shared by all its concurrently
   * sending ranks. */
  double bw = fmin(model_p2p_net_rate(&net->hw, bytes),
                   net->hw.nic_bw * net->hw.nics_per_node / MAX(1u, cross_senders(b, s, d)));
  return net->hw.p2p_latency_inter + bytes / bw;
}


/* The charge of one cell hop for a slice of `tokens` tokens of b sequences,
 * from stage s to stage d, as TeraPipe's code sends it
 * (test_transformer_terapipe.py): one rank of the sending tensor group
 * broadcasts the whole fp16 activation (or its gradient) to one rank of the
 * receiving group over a two-rank group, which then broadcasts it inside its
 * tensor group (dist.broadcast, synchronous on the compute stream).
 * emit_transfers charges exactly this. */
static void hop_parts(const Build *b, guint seqs, guint tokens, guint s, guint d, double *send_s, double *gather_s) {
  const SimPlan *pl = b->pl;
  double full = 2.0 * seqs * tokens * pl->model.hidden;
  *send_s = p2p_time(b, full, s, d);
  *gather_s = pl->tp > 1 ? model_collective_time_s(&b->net, MODEL_COLL_BROADCAST, full, pl->tp,
                                                   (pl->tp + b->cluster->gpus_per_node - 1) /
                                                       b->cluster->gpus_per_node,
                                                   NULL)
                         : 0;
}

/* Mean over the K - 1 boundaries of the forward plus the backward hop: the
 * h(i) of the DP's refined objective (models/slicing.h). */
static double mean_hop_s(const Build *b, guint seqs, guint tokens) {
  if (b->p < 2)
    return 0;
  double sum = 0, x, g;
  for (guint s = 0; s + 1 < b->p; s++) {
    hop_parts(b, seqs, tokens, s, s + 1, &x, &g);
    sum += x + g;
    hop_parts(b, seqs, tokens, s + 1, s, &x, &g);
    sum += x + g;
  }
  return sum / (b->p - 1);
}

/* The cost model of one cell of the plan (the middle stages' layers). */
static ModelCell plan_cell(const SimPlan *pl, const ModelProfile *profile, const ModelNet *net,
                           const TopoCluster *cluster) {
  ModelCell c = {profile, &pl->model, net, pl->tp, (pl->tp + cluster->gpus_per_node - 1) / cluster->gpus_per_node,
                 pl->model.layers / pl->pp, pl->recompute, pl->fusion, FALSE, TRUE,
                 (ModelLayerOptions){.fused = pl->fusion, .framework = pl->framework, .host_op_s = pl->host_op_s,
                                     .free_membound = pl->free_membound}};
  return c;
}

/* Parameters of one GPU of stage s: the layers' shard, plus the embedding
 * and logits with the GPT workload (TeraPipe's benchmark has neither). */
static guint64 stage_params(const SimPlan *pl, guint s) {
  guint lps = pl->model.layers / pl->pp;
  if (pl->workload == SIM_WORKLOAD_LAYERS)
    return lps * model_layer_local_params(&pl->model, pl->tp);
  return model_stage_params(&pl->model, pl->tp, pl->pp, s, lps);
}

static ModelNet plan_net(const ModelProfile *profile, const TopoCluster *cluster) {
  return (ModelNet){.hw = cluster->net, .free_comm = profile->kind == MODEL_PROFILE_IDEAL};
}

/* The DP's view of a cell (models/slicing.h): c from the fitted cost of the
 * last cell; u = c less the logits plus the embedding spread over the K - 1
 * cells, and h, which do not depend on the context, tabulated by length. */
typedef struct {
  ModelSliceCost cost;
  double *less; /* [n + 1]: u - c of a slice of k granules */
  double *hop;  /* [n + 1]: h of a slice of k granules */
} DpCost;

static double dp_last(guint len, guint start, gpointer data) {
  return model_slice_cost_eval(&((DpCost *)data)->cost, len, start);
}

static double dp_cell(guint len, guint start, gpointer data) {
  return dp_last(len, start, data) + ((DpCost *)data)->less[len];
}

static double dp_hop(guint len, guint start, gpointer data) {
  (void)start;
  return ((DpCost *)data)->hop[len];
}

/* The best uniform slicing under the joint objective J (models/slicing.h):
 * Bp / b equal batch slices of b sequences (b a divisor of Bp), each cut
 * into m token slices as sim_terapipe_slicing_add_uniform cuts them, for
 * every b and m.  Returns J and sets *b_out, *m_out. */
static double best_uniform(const ModelPipeCost *pcs, guint K, guint Bp, guint n, guint *b_out, guint *m_out) {
  double best = INFINITY;
  for (guint b = 1; b <= Bp; b++) {
    if (Bp % b)
      continue;
    const ModelPipeCost *pc = &pcs[b - 1];
    for (guint m = 1; m <= n; m++) {
      double sum = 0, dmax = 0;
      for (guint x = 0, start = 0; x < m; x++) {
        guint len = n / m + (x < n % m ? 1 : 0);
        sum += pc->last(len, start, pc->data);
        dmax = MAX(dmax, pc->cell(len, start, pc->data) + pc->hop(len, start, pc->data));
        start += len;
      }
      double J = (Bp / b) * sum + (K - 1.0) * dmax;
      if (J < best) {
        best = J;
        *b_out = b;
        *m_out = m;
      }
    }
  }
  return best;
}

gboolean sim_terapipe_choose(const SimPlan *pl, const ModelProfile *profile, const TopoCluster *cluster,
                             SimTeraPipeSlicing *out, GError **error) {
  sim_terapipe_slicing_init(out);
  Build hops = {.pl = pl, .cluster = cluster, .net = plan_net(profile, cluster), .p = pl->pp};
  ModelCell cell = plan_cell(pl, profile, &hops.net, cluster);
  /* The fitted t(i, j) is the last cell's, which adds the logits and the
   * loss; the others are derived from it (DpCost). */
  cell.head = pl->workload == SIM_WORKLOAD_GPT;
  guint L = pl->model.seq_len, g = pl->granularity, Bp = pl->global_batch / pl->dp;
  if (pl->slices_mode != SIM_SLICES_AUTO) {
    for (guint k = 0; k < Bp / pl->micro_batch; k++) {
      if (pl->slices_mode == SIM_SLICES_UNIFORM)
        sim_terapipe_slicing_add_uniform(out, pl->micro_batch, L, g, pl->n_slices);
      else {
        GArray *t = g_array_new(FALSE, FALSE, sizeof(guint));
        g_array_append_vals(t, pl->slice_len, pl->n_slices);
        add_slice(out, pl->micro_batch, t);
      }
    }
    return TRUE;
  }
  /* Joint batch and token slicing (section 3.4, the authors' planning()):
   * every batch-slice size's cost, then one search over t_max with the fill
   * charged once (models/slicing.h). */
  DpCost *dc = g_new0(DpCost, Bp);
  ModelPipeCost *pcs = g_new0(ModelPipeCost, Bp);
  double worst = 0, mean = 0;
  gboolean ok = TRUE;
  for (guint b = 1; ok && b <= Bp; b++) {
    DpCost *d = &dc[b - 1];
    ModelSliceCost *cost = &d->cost;
    if (!(ok = model_slice_cost_fit(&cell, b, L, g, cost, error)))
      break;
    worst = MAX(worst, cost->fit_max_rel_error);
    mean += cost->fit_mean_rel_error / Bp;
    d->less = g_new0(double, cost->n + 1);
    d->hop = g_new0(double, cost->n + 1);
    for (guint k = 1; k <= cost->n; k++) {
      ModelShape slice = pl->model;
      slice.seq_len = k * g;
      double hf = 0, hb = 0, ef = 0, eb = 0;
      if (pl->workload == SIM_WORKLOAD_GPT) {
        model_head_cost(profile, &slice, pl->tp, b, &hf, &hb);
        model_embedding_cost(profile, &slice, pl->tp, b, &ef, &eb);
      }
      d->less[k] = -(hf + hb) + (pl->pp > 1 ? (ef + eb) / (pl->pp - 1) : 0);
      d->hop[k] = mean_hop_s(&hops, b, k * g);
    }
    pcs[b - 1] = (ModelPipeCost){dp_last, dp_cell, dp_hop, NULL, d, FALSE};
  }
  if (ok) {
    GArray *sizes = g_array_new(FALSE, FALSE, sizeof(guint));
    GPtrArray *tok = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    ModelJointSlicing js;
    /* eps 0.1 ms, as the paper */
    model_joint_slicing(Bp, L / g, pl->pp, 1e-4, pcs, sizes, tok, &js);
    out->predicted_s = js.J;
    out->candidates_solved = js.candidates_solved;
    /* eps skips candidates, so the answer may lose to a uniform slicing
     * under J itself (where slice costs are flat, the host holding the GPU
     * back, many lie within eps); the uniform slicings are scored too and
     * the better answer is kept */
    guint ub = 1, um = 1;
    double uJ = best_uniform(pcs, pl->pp, Bp, L / g, &ub, &um);
    if (uJ < js.J) {
      g_array_set_size(sizes, 0);
      for (guint k = 0; k < Bp / ub; k++)
        sim_terapipe_slicing_add_uniform(out, ub, L, g, um);
      out->predicted_s = uJ;
    }
    for (guint k = 0; k < sizes->len; k++) {
      GArray *t = g_ptr_array_index(tok, k);
      for (guint m = 0; m < t->len; m++)
        g_array_index(t, guint, m) *= g;
      add_slice(out, g_array_index(sizes, guint, k), g_array_ref(t));
    }
    g_array_free(sizes, TRUE);
    g_ptr_array_free(tok, TRUE);
  }
  for (guint b = 0; b < Bp; b++) {
    model_slice_cost_clear(&dc[b].cost);
    g_free(dc[b].less);
    g_free(dc[b].hop);
  }
  g_free(dc);
  g_free(pcs);
  if (!ok) {
    sim_terapipe_slicing_clear(out);
    return FALSE;
  }
  out->fit_max_rel_error = worst;
  out->fit_mean_rel_error = mean;
  return TRUE;
}

void sim_terapipe_slicing_json(const SimTeraPipeSlicing *s, cJSON *into) {
  cJSON *batch = cJSON_AddArrayToObject(into, "batch_slices");
  cJSON *tokens = cJSON_AddArrayToObject(into, "token_slices");
  for (guint k = 0; k < s->batch->len; k++) {
    cJSON_AddItemToArray(batch, cJSON_CreateNumber(g_array_index(s->batch, guint, k)));
    GArray *t = g_ptr_array_index(s->tokens, k);
    cJSON *row = cJSON_CreateArray();
    for (guint m = 0; m < t->len; m++)
      cJSON_AddItemToArray(row, cJSON_CreateNumber(g_array_index(t, guint, m)));
    cJSON_AddItemToArray(tokens, row);
  }
  if (s->predicted_s > 0) {
    cJSON_AddNumberToObject(into, "dp_predicted_latency_s", s->predicted_s);
    cJSON_AddNumberToObject(into, "dp_candidates_solved", s->candidates_solved);
  }
  if (s->fit_max_rel_error >= 0) {
    cJSON_AddNumberToObject(into, "context_fit_max_rel_error", s->fit_max_rel_error);
    cJSON_AddNumberToObject(into, "context_fit_mean_rel_error", s->fit_mean_rel_error);
  }
}

static gboolean same_tokens(GArray *a, GArray *b) {
  return a->len == b->len && memcmp(a->data, b->data, a->len * sizeof(guint)) == 0;
}

void sim_terapipe_slicing_describe(const SimTeraPipeSlicing *s, gboolean brief, GString *out) {
  for (guint k = 0; k < s->batch->len;) {
    guint b = g_array_index(s->batch, guint, k), count = 1;
    GArray *t = g_ptr_array_index(s->tokens, k);
    while (k + count < s->batch->len && g_array_index(s->batch, guint, k + count) == b &&
           same_tokens(t, g_ptr_array_index(s->tokens, k + count)))
      count++;
    if (brief)
      g_string_append_printf(out, "%s%u x %u seq, %u slices", k ? " + " : "", count, b, t->len);
    else {
      g_string_append_printf(out, "%s%u batch slice%s of %u sequence%s, %u token slice%s%s: ", k ? "; " : "", count,
                             count == 1 ? "" : "s", b, b == 1 ? "" : "s", t->len, t->len == 1 ? "" : "s",
                             count == 1 ? "" : " each");
      for (guint q = 0; q < t->len;) {
        guint len = g_array_index(t, guint, q), run = 1;
        while (q + run < t->len && g_array_index(t, guint, q + run) == len)
          run++;
        g_string_append_printf(out, "%s%u x %u", q ? ", " : "", run, len);
        q += run;
      }
      g_string_append(out, " tokens");
    }
    k += count;
  }
}

guint sim_terapipe_slicing_count(const SimTeraPipeSlicing *s) {
  guint n = 0;
  for (guint k = 0; k < s->tokens->len; k++)
    n += ((GArray *)g_ptr_array_index(s->tokens, k))->len;
  return n;
}

/* --- the task graph --- */

static SimOpTag tag(guint cat, gboolean fwd, guint s, guint j) {
  return (SimOpTag){(guint16)cat, (guint16)(fwd ? SIM_PASS_FORWARD : SIM_PASS_BACKWARD), (gint32)s, 0, (gint32)j, -1};
}

typedef struct {
  double fwd, bwd, tp_fwd, tp_bwd;
} ItemCost;

static void emit_items(Build *b, const ModelCell *cell, const ModelProfile *profile) {
  const SimPlan *pl = b->pl;
  ItemCost *cost = g_new(ItemCost, b->n);
  for (guint j = 0; j < b->n; j++) {
    const Item *it = &b->items[j];
    ItemCost *c = &cost[j];
    model_cell_slice_time(cell, it->b, it->tokens, it->context, &c->fwd, &c->bwd, &c->tp_fwd, &c->tp_bwd);
    /* one all-reduce of 2 b i h bytes: every rank sends 2(t-1)/t of it */
    double per = 2.0 * it->b * it->tokens * pl->model.hidden * 2.0 * (pl->tp - 1) * pl->dp;
    double count = (it->fwd ? 2.0 : (pl->recompute ? 4.0 : 2.0)) * pl->model.layers;
    if (pl->tp > 1)
      b->bytes_tp += per * count;
  }
  for (guint s = 0; s < b->p; s++)
    for (guint j = 0; j < b->n; j++) {
      const Item *it = &b->items[j];
      ModelShape slice = pl->model;
      slice.seq_len = it->tokens; /* embedding and logits of this slice's tokens */
      double ef = 0, eb = 0, hf = 0, hb = 0;
      if (s == 0 && pl->workload == SIM_WORKLOAD_GPT)
        model_embedding_cost(profile, &slice, pl->tp, it->b, &ef, &eb);
      if (s == b->p - 1 && pl->workload == SIM_WORKLOAD_GPT)
        model_head_cost(profile, &slice, pl->tp, it->b, &hf, &hb);
      double comp = it->fwd ? cost[j].fwd + ef + hf : cost[j].bwd + eb + hb;
      double tp = it->fwd ? cost[j].tp_fwd : cost[j].tp_bwd;
      SimOpTag t = tag(SIM_CAT_COMPUTE, it->fwd, s, j);
      guint op = sim_engine_add_op1(b->e, ns(comp), s * SIM_STREAM_KINDS + SIM_STREAM_COMPUTE, &t);
      if (b->pieces) { /* the cell's layers, with the embedding before or the head after them */
        guint lps = pl->model.layers / b->p;
        double e_s = it->fwd ? ef : eb, h_s = it->fwd ? hf : hb, layers_s = it->fwd ? cost[j].fwd : cost[j].bwd;
        gboolean head_first = !it->fwd; /* backward runs the head first */
        if (head_first && h_s > 0)
          sim_timeline_piece(b->pieces, op, SIM_ACT_RUN, SIM_PART_HEAD, -1, 1, h_s);
        if (!head_first && e_s > 0)
          sim_timeline_piece(b->pieces, op, SIM_ACT_RUN, SIM_PART_EMBEDDING, -1, 1, e_s);
        sim_timeline_piece(b->pieces, op, SIM_ACT_RUN, SIM_PART_LAYERS, (gint)(s * lps), lps, layers_s);
        if (head_first && e_s > 0)
          sim_timeline_piece(b->pieces, op, SIM_ACT_RUN, SIM_PART_EMBEDDING, -1, 1, e_s);
        if (!head_first && h_s > 0)
          sim_timeline_piece(b->pieces, op, SIM_ACT_RUN, SIM_PART_HEAD, -1, 1, h_s);
      }
      if (j > 0)
        sim_engine_add_dep(b->e, b->last[s * b->n + j - 1], op);
      b->first[s * b->n + j] = b->last[s * b->n + j] = op;
      if (pl->tp > 1) {
        t.category = SIM_CAT_TP;
        guint ar = sim_engine_add_op1(b->e, ns(tp), s * SIM_STREAM_KINDS + SIM_STREAM_TP, &t);
        sim_engine_add_dep(b->e, op, ar);
        b->last[s * b->n + j] = ar;
      }
    }
  g_free(cost);
}

static void emit_transfers(Build *b) {
  const SimPlan *pl = b->pl;
  for (guint s = 0; s < b->p; s++)
    for (guint j = 0; j < b->n; j++) {
      const Item *it = &b->items[j];
      if ((it->fwd && s == b->p - 1) || (!it->fwd && s == 0))
        continue;
      guint d = it->fwd ? s + 1 : s - 1;
      double full = 2.0 * it->b * it->tokens * pl->model.hidden; /* fp16 activations or their gradient */
      double send_s, gather_s;
      hop_parts(b, it->b, it->tokens, s, d, &send_s, &gather_s);
      SimOpTag t = tag(SIM_CAT_PP, it->fwd, s, j);
      guint streams[2] = {s * SIM_STREAM_KINDS + SIM_STREAM_PP_SEND, d * SIM_STREAM_KINDS + SIM_STREAM_PP_RECV};
      guint64 pos[2] = {2ull * j, 2ull * j};
      guint x = sim_engine_add_op_at(b->e, ns(send_s), streams, pos, 2, &t);
      sim_engine_add_dep(b->e, b->last[s * b->n + j], x);
      /* The broadcast is synchronous on the sender's compute stream: its
       * next slice starts after the transfer. */
      if (j + 1 < b->n)
        sim_engine_add_dep(b->e, x, b->first[s * b->n + j + 1]);
      b->bytes_pp += full * pl->dp; /* one sender per replica */
      guint ready = x;
      if (pl->tp > 1) {
        /* the receiving rank broadcasts it to its tensor group (NVLink) */
        t.category = SIM_CAT_PP_GATHER;
        guint st = d * SIM_STREAM_KINDS + SIM_STREAM_PP_RECV;
        guint64 gp = 2ull * j + 1;
        ready = sim_engine_add_op_at(b->e, ns(gather_s), &st, &gp, 1, &t);
        sim_timeline_piece(b->pieces, ready, SIM_ACT_BROADCAST, SIM_PART_NONE, -1, 1, 0);
        sim_engine_add_dep(b->e, x, ready);
      }
      sim_engine_add_dep(b->e, ready, b->first[d * b->n + j]);
    }
}

static void emit_dp_and_optimizer(Build *b, const ModelProfile *profile) {
  const SimPlan *pl = b->pl;
  guint *gate = g_new(guint, b->p);
  for (guint s = 0; s < b->p; s++)
    gate[s] = G_MAXUINT;
  /* Tied word embeddings: first and last stage all-reduce their copies. */
  if (b->p > 1 && pl->workload == SIM_WORKLOAD_GPT) {
    double bytes = 2.0 * pl->model.vocab * pl->model.hidden / pl->tp;
    guint streams[2] = {0 * SIM_STREAM_KINDS + SIM_STREAM_DP, (b->p - 1) * SIM_STREAM_KINDS + SIM_STREAM_DP};
    gboolean same = node_of(b, 0, 0, 0) == node_of(b, 0, 0, b->p - 1);
    SimOpTag t = {SIM_CAT_DP, SIM_PASS_OTHER, 0, 0, 0, -2};
    guint op = sim_engine_add_op(
        b->e, ns(model_collective_time_s(&b->net, MODEL_COLL_ALLREDUCE, bytes, 2, same ? 1 : 2, NULL)),
        streams, 2, &t);
    sim_engine_add_dep(b->e, b->last[b->n - 1], op);
    sim_engine_add_dep(b->e, b->last[(b->p - 1) * b->n + b->n - 1], op);
    gate[0] = gate[b->p - 1] = op;
    b->bytes_dp += bytes * 2.0 * pl->dp * pl->tp;
    b->bytes_embedding = bytes * 2.0 * pl->dp * pl->tp;
  }
  for (guint s = 0; s < b->p; s++) {
    guint64 params = stage_params(pl, s);
    guint after = b->last[s * b->n + b->n - 1];
    SimOpTag t = {SIM_CAT_DP, SIM_PASS_OTHER, (gint32)s, 0, 0, -1};
    if (pl->dp > 1) {
      /* Gradients all-reduced once after the flush. */
      double bytes = 2.0 * params;
      double secs = model_collective_time_s(&b->net, MODEL_COLL_ALLREDUCE, bytes, pl->dp, dp_nodes(b, s), NULL);
      guint op = sim_engine_add_op1(b->e, ns(secs), s * SIM_STREAM_KINDS + SIM_STREAM_DP, &t);
      sim_engine_add_dep(b->e, after, op);
      after = op;
      b->bytes_dp += bytes * 2.0 * (pl->dp - 1) * pl->tp;
    }
    t.category = SIM_CAT_OPTIMIZER;
    guint opt = sim_engine_add_op1(b->e, ns(model_optimizer_time_s(profile, params)), s * SIM_STREAM_KINDS + SIM_STREAM_COMPUTE, &t);
    sim_engine_add_dep(b->e, after, opt);
    if (gate[s] != G_MAXUINT)
      sim_engine_add_dep(b->e, gate[s], opt);
  }
  g_free(gate);
}

/* --- measuring --- */

static void measure(Build *b, const ModelProfile *profile, guint total_slices, SimResult *r) {
  const SimPlan *pl = b->pl;
  SimTime makespan = sim_engine_makespan(b->e);
  r->iteration_time_s = (double)makespan * 1e-9;
  /* The layers workload has no logits: Eq. 3 without its vocabulary term. */
  sim_plan_rates(pl, profile, r);
  /* GPipe's and TeraPipe's textbook bubble: (K - 1) / M for M equal slices. */
  r->analytic_bubble_fraction = (double)(b->p - 1) / total_slices;
  r->token_slices = total_slices;

  SimTime flush;
  double best;
  guint critical = sim_exposed_busiest(b->e, NULL, b->p, &best, &flush);
  r->bubble_fraction = best > 0 ? ((double)flush - best) / best : 0;
  r->idle_fraction = flush > 0 ? ((double)flush - best) / (double)flush : 0;
  r->critical_stage = critical;
  GArray *edges = sim_exposed_edges_new();
  for (guint kind = 0; kind < SIM_STREAM_KINDS; kind++) {
    guint n;
    const guint *ops = sim_engine_stream_ops(b->e, critical * SIM_STREAM_KINDS + kind, &n);
    for (guint j = 0; j < n; j++)
      sim_exposed_add_op(edges, b->e, ops[j]);
  }
  double parts[SIM_N_CLS + 1];
  sim_exposed_split(edges, makespan, parts);
  r->breakdown = (SimBreakdown){parts[SIM_CLS_COMPUTE], parts[SIM_CLS_TP], parts[SIM_CLS_PP],
                                parts[SIM_CLS_DP],      parts[SIM_CLS_OPT], parts[SIM_N_CLS]};

  /* Effective bisection bandwidth, one direction of the cut (as PTD-P's,
   * ptdp/measure.c bisection_rate).  Pipeline: the sends between stages p/2-1
   * and p/2, each direction's bytes over the union of its sends' intervals,
   * the busier direction.  Data-parallel: a ring crosses the replica cut
   * once each way, 2 (d-1)/d of the gradients, over the time the gradient
   * all-reduces run. */
  r->bytes_tp = b->bytes_tp;
  r->bytes_pp = b->bytes_pp;
  r->bytes_dp = b->bytes_dp;
  r->bytes_embedding = b->bytes_embedding;
  if (b->p > 1) {
    guint lo = b->p / 2 - 1;
    for (guint dir = 0; dir < 2; dir++) {
      g_array_set_size(edges, 0);
      double cross = 0;
      guint from = dir == 0 ? lo : lo + 1, to = dir == 0 ? lo + 1 : lo;
      guint n;
      const guint *ops = sim_engine_stream_ops(b->e, from * SIM_STREAM_KINDS + SIM_STREAM_PP_SEND, &n);
      for (guint j = 0; j < n; j++) {
        const guint *st = sim_engine_op_streams(b->e, ops[j]);
        if (st[1] / SIM_STREAM_KINDS != to)
          continue;
        const Item *it = &b->items[sim_engine_op_tag(b->e, ops[j])->microbatch];
        cross += 2.0 * it->b * it->tokens * pl->model.hidden * pl->dp;
        sim_exposed_add_op(edges, b->e, ops[j]);
      }
      double u[SIM_N_CLS + 1];
      sim_exposed_split(edges, 0, u);
      if (u[SIM_CLS_PP] > 0)
        r->bisection_pp_GBps = fmax(r->bisection_pp_GBps, cross / u[SIM_CLS_PP] / 1e9);
    }
  }
  if (pl->dp > 1) {
    g_array_set_size(edges, 0);
    double grad = 0;
    for (guint s = 0; s < b->p; s++) {
      guint n;
      const guint *ops = sim_engine_stream_ops(b->e, s * SIM_STREAM_KINDS + SIM_STREAM_DP, &n);
      for (guint j = 0; j < n; j++)
        if (sim_engine_op_tag(b->e, ops[j])->layer == -1)
          sim_exposed_add_op(edges, b->e, ops[j]);
      grad += 2.0 * stage_params(pl, s) * pl->tp;
    }
    double u[SIM_N_CLS + 1];
    sim_exposed_split(edges, 0, u);
    double cross = model_busbw_factor(MODEL_COLL_ALLREDUCE, pl->dp) * grad;
    r->bisection_dp_GBps = u[SIM_CLS_DP] > 0 ? cross / u[SIM_CLS_DP] / 1e9 : 0;
  }
  g_array_free(edges, TRUE);
  r->ops = sim_engine_n_ops(b->e);
  r->events = sim_engine_n_events(b->e);
  r->simulated_gpus = b->p;
  r->symmetric = TRUE;
}

/* Memory of stage s as TeraPipe keeps it: the whole minibatch's activations
 * until the flush (all forwards run before any backward; TeraPipe's
 * benchmark does not recompute).  With --recompute full (ptdsim's option:
 * each cell checkpointed, which TeraPipe's code does not do), per layer the
 * attention keys and values of every token (the context later slices and the
 * recomputation need) and their accumulating gradients, 8 B s h / t bytes
 * for B sequences, plus each cell's fp16 input (2 B s h), plus one slice's
 * full activations while it is recomputed.  Without, every slice's full
 * activations: Korthikanti et al. 2022's s b h (10 + 24/t) + 5 a s^2 b / t
 * bytes per layer with the attention term over the slice's i (i + j). */
static void stage_memory(const SimPlan *pl, const SimTeraPipeSlicing *sl, guint s, ModelMemory *out) {
  const ModelShape *m = &pl->model;
  guint lps = m->layers / pl->pp;
  double P = (double)stage_params(pl, s);
  double h = m->hidden, a = m->heads, t = pl->tp, V = m->vocab;
  double tokens = 0, all = 0, worst = 0, worst_tokens = 0;
  for (guint k = 0; k < sl->batch->len; k++) {
    double b = g_array_index(sl->batch, guint, k);
    GArray *tk = g_ptr_array_index(sl->tokens, k);
    double ctx = 0;
    for (guint q = 0; q < tk->len; q++) {
      double i = g_array_index(tk, guint, q);
      double act = b * i * h * (10.0 + 24.0 / t) + 5.0 * a * b * i * (i + ctx) / t;
      all += act;
      worst = MAX(worst, act);
      worst_tokens = MAX(worst_tokens, b * i);
      tokens += b * i;
      ctx += i;
    }
  }
  double act;
  if (pl->recompute)
    act = lps * (8.0 * tokens * h / t) + 2.0 * tokens * h + lps * worst;
  else
    act = lps * (all + 4.0 * tokens * h / t);
  if (s == 0 && pl->workload == SIM_WORKLOAD_GPT)
    act += tokens * h; /* embedding dropout masks */
  if (s == pl->pp - 1 && pl->workload == SIM_WORKLOAD_GPT)
    act += 6.0 * worst_tokens * V / t; /* one slice's logits, fp16 and fp32 */
  out->weights = 2 * P;
  out->gradients = 2 * P;
  out->optimizer = 12 * P;
  out->activations = act;
  out->allocator = 0;
  out->total = out->weights + out->gradients + out->optimizer + act;
}

gboolean sim_terapipe_simulate(const SimPlan *pl, const ModelProfile *profile, const TopoCluster *cluster,
                               const SimTeraPipeSlicing *sl, SimResult *r, GError **error) {
  return sim_terapipe_simulate_observed(pl, profile, cluster, sl, r, NULL, NULL, error);
}

gboolean sim_terapipe_simulate_observed(const SimPlan *pl, const ModelProfile *profile, const TopoCluster *cluster,
                                        const SimTeraPipeSlicing *sl, SimResult *r, SimTimelineFn observe,
                                        gpointer data, GError **error) {
  memset(r, 0, sizeof *r);
  guint Bp = pl->global_batch / pl->dp, total = 0, seqs = 0;
  for (guint k = 0; k < sl->batch->len; k++) {
    GArray *tk = g_ptr_array_index(sl->tokens, k);
    guint sum = 0;
    for (guint q = 0; q < tk->len; q++)
      sum += g_array_index(tk, guint, q);
    if (sum != pl->model.seq_len || tk->len == 0)
      FAIL_INVALID("batch slice %u's token slices add up to %u, not the sequence length %u", k, sum,
                   pl->model.seq_len);
    seqs += g_array_index(sl->batch, guint, k);
    total += tk->len;
  }
  if (seqs != Bp)
    FAIL_INVALID("the batch slices hold %u sequences, not the %u of one pipeline (--global-batch / d)", seqs, Bp);
  if ((double)total * 2 * pl->pp * 3 > 60e6) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_TOO_BIG,
                "this slicing needs about %.0f million simulated ops, over the limit of 60 million; use fewer slices",
                total * 6.0 * pl->pp / 1e6);
    return FALSE;
  }
  for (guint s = 0; s < pl->pp; s++) {
    ModelMemory mm;
    stage_memory(pl, sl, s, &mm);
    if (mm.total > r->memory.total) {
      r->memory = mm;
      r->memory_stage = s;
    }
  }
  r->fits_in_memory = r->memory.total <= sim_plan_usable_bytes(pl, profile);
  if (!r->fits_in_memory && !pl->allow_oom) {
    const ModelMemory *mm = &r->memory;
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_OOM,
                "does not fit in memory: stage %u needs %.1f GiB of %.1f GiB usable (weights+gradients+optimizer %.1f, "
                "activations %.1f); use %sa larger --tp or --pp, a smaller --global-batch or more token slices "
                "(--allow-oom simulates it anyway)",
                r->memory_stage, mm->total / 1073741824.0, sim_plan_usable_bytes(pl, profile) / 1073741824.0,
                (mm->weights + mm->gradients + mm->optimizer) / 1073741824.0, mm->activations / 1073741824.0,
                pl->recompute ? "" : "--recompute full, ");
    return FALSE;
  }

  Build b = {.pl = pl, .cluster = cluster, .net = plan_net(profile, cluster), .p = pl->pp, .n = 2 * total};
  ModelCell cell = plan_cell(pl, profile, &b.net, cluster);
  b.items = g_new(Item, b.n);
  guint j = 0;
  for (guint k = 0; k < sl->batch->len; k++) {
    GArray *tk = g_ptr_array_index(sl->tokens, k);
    guint ctx = 0;
    for (guint q = 0; q < tk->len; q++) {
      guint len = g_array_index(tk, guint, q);
      b.items[j++] = (Item){g_array_index(sl->batch, guint, k), len, ctx, TRUE};
      ctx += len;
    }
  }
  for (guint q = 0; q < total; q++) { /* backward: the reverse order */
    b.items[total + q] = b.items[total - 1 - q];
    b.items[total + q].fwd = FALSE;
  }
  b.first = g_new(guint, (gsize)b.p * b.n);
  b.last = g_new(guint, (gsize)b.p * b.n);
  b.e = sim_engine_new();
  for (guint s = 0; s < b.p; s++)
    for (guint kind = 0; kind < SIM_STREAM_KINDS; kind++)
      sim_engine_add_stream(b.e, s);
  b.pieces = observe ? g_array_new(FALSE, FALSE, sizeof(SimTimelinePiece)) : NULL;
  emit_items(&b, &cell, profile);
  emit_transfers(&b);
  emit_dp_and_optimizer(&b, profile);
  gboolean ok = sim_engine_run(b.e, error);
  if (ok) {
    measure(&b, profile, total, r);
    if (observe) {
      /* One GPU per stage: stage s runs on the first GPU of its tensor-parallel group, replica 0. */
      guint *gpus = g_new(guint, b.p);
      for (guint s = 0; s < b.p; s++)
        gpus[s] = gpu_of(&b, 0, 0, s);
      SimTimeline tl = {b.e, pl, 1, 1, b.p, gpus, "slice", total, b.pieces, NULL, NULL};
      ok = observe(&tl, data, error);
      g_free(gpus);
    }
  }
  if (b.pieces)
    g_array_free(b.pieces, TRUE);
  sim_engine_free(b.e);
  g_free(b.items);
  g_free(b.first);
  g_free(b.last);
  return ok;
}
