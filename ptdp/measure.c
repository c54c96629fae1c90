/* ptdsim — measuring a finished PTD-P timeline: the breakdown of the critical
 * GPU, the bubbles (SC21's and the zero-bubble paper's), the byte counts
 * and the bisection bandwidths, carried to the long run where a steady
 * state stood for it (build.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"

/* Splits [0, end] on one GPU into what it was doing (exposed.h). */
static void breakdown(const PtdpBuild *b, guint gpu, SimTime end, double out[SIM_N_CLS + 1]) {
  GArray *edges = sim_exposed_edges_new();
  for (guint kind = 0; kind < SIM_STREAM_KINDS; kind++) {
    guint n;
    const guint *ops = sim_engine_stream_ops(b->e, gpu * SIM_STREAM_KINDS + kind, &n);
    for (guint j = 0; j < n; j++) {
      SimTime tp = ptdp_tp_part_of(b, ops[j]);
      if (tp == 0) {
        sim_exposed_add_op(edges, b->e, ops[j]);
        continue;
      }
      /* A coarse op: its compute and its all-reduces cover it without a
       * gap, and only lower classes can overlap it, so the split inside it
       * does not change any class's exposed time. */
      SimTime a = sim_engine_op_start(b->e, ops[j]), z = sim_engine_op_end(b->e, ops[j]);
      sim_exposed_add(edges, a, z - tp, SIM_CLS_COMPUTE);
      sim_exposed_add(edges, z - tp, z, SIM_CLS_TP);
    }
  }
  sim_exposed_split_steady(edges, end, b->steady.k > 0 ? &b->steady : NULL, out);
  g_array_free(edges, TRUE);
}

/* Length of the union of the intervals of the selected ops. */
static double union_seconds(const PtdpBuild *b, GArray *ops) {
  const SimEngine *e = b->e;
  GArray *edges = sim_exposed_edges_new();
  for (guint j = 0; j < ops->len; j++) {
    guint op = g_array_index(ops, guint, j);
    sim_exposed_add(edges, sim_engine_op_start(e, op), sim_engine_op_end(e, op), 0);
  }
  double u[SIM_N_CLS + 1];
  sim_exposed_split_steady(edges, 0, b->steady.k > 0 ? &b->steady : NULL, u);
  g_array_free(edges, TRUE);
  return u[0];
}

/* A transfer's interval in a phase (sim_phased_bandwidth). */
typedef struct {
  int64_t start, end;
  guint phase;
} Span;

static int span_cmp(const void *a, const void *b) {
  const Span *x = a, *y = b;
  if (x->phase != y->phase)
    return x->phase < y->phase ? -1 : 1;
  return x->start < y->start ? -1 : x->start > y->start;
}

double sim_phased_bandwidth(guint n, const int64_t *start_ns, const int64_t *end_ns, const guint *phase,
                            const double *bytes, guint n_phases) {
  double *phase_bytes = g_new0(double, MAX(n_phases, 1));
  Span *sp = g_new(Span, MAX(n, 1));
  guint m = 0;
  for (guint i = 0; i < n; i++) {
    g_return_val_if_fail(phase[i] < n_phases, 0);
    phase_bytes[phase[i]] += bytes[i];
    if (end_ns[i] > start_ns[i])
      sp[m++] = (Span){start_ns[i], end_ns[i], phase[i]};
  }
  if (m > 1)
    qsort(sp, m, sizeof *sp, span_cmp);
  double rate = 0;
  for (guint i = 0; i < m;) {
    guint ph = sp[i].phase;
    int64_t total = 0, a = sp[i].start, z = sp[i].end;
    for (; i < m && sp[i].phase == ph; i++) {
      if (sp[i].start > z) { /* a gap: close the merged interval */
        total += z - a;
        a = sp[i].start;
      }
      z = MAX(z, sp[i].end);
    }
    total += z - a;
    rate += phase_bytes[ph] / ((double)total * 1e-9);
  }
  g_free(sp);
  g_free(phase_bytes);
  return rate;
}

/* The per-phase bandwidth of the selected data-parallel ops, phase = their
 * pipeline stage, op_bytes[j] the crossing bytes of sel[j]. */
static double stage_phased(const PtdpBuild *b, GArray *sel, const double *op_bytes) {
  guint n = sel->len;
  int64_t *a = g_new(int64_t, MAX(n, 1)), *z = g_new(int64_t, MAX(n, 1));
  guint *ph = g_new(guint, MAX(n, 1));
  for (guint j = 0; j < n; j++) {
    guint op = g_array_index(sel, guint, j);
    a[j] = sim_engine_op_start(b->e, op);
    z[j] = sim_engine_op_end(b->e, op);
    ph[j] = (sim_engine_op_streams(b->e, op)[0] / SIM_STREAM_KINDS) / (b->ts * b->ds);
  }
  double r = sim_phased_bandwidth(n, a, z, ph, op_bytes, b->p);
  g_free(a);
  g_free(z);
  g_free(ph);
  return r;
}

/* The effective bisection bandwidth of one traffic class, in bytes/s (SC21
 * section 5.9; defined in doc/output.md): for each direction of the cut,
 * the bytes its transfers move across it that way, over the time during
 * which those transfers are in flight -- the union of their intervals, or,
 * per phase (data-parallel: one phase per pipeline stage, whose all-reduces
 * run on disjoint nodes at staggered times), the sum over phases of each
 * phase's rate.  The busier direction is reported: a cut, like a link,
 * carries so much one way.  dir_bytes[2 j + d] are sel[j]'s bytes in
 * direction d (0: from the low side to the high side). */
static double bisection_rate(PtdpBuild *b, GArray *sel, const double *dir_bytes, gboolean phased) {
  const SimSteady *st = b->steady.k > 0 ? &b->steady : NULL;
  double best = 0;
  GArray *one = g_array_new(FALSE, FALSE, sizeof(guint));
  double *bytes = g_new(double, MAX(sel->len, 1));
  for (guint d = 0; d < 2; d++) {
    g_array_set_size(one, 0);
    for (guint j = 0; j < sel->len; j++)
      if (dir_bytes[2 * j + d] > 0) {
        bytes[one->len] = dir_bytes[2 * j + d];
        g_array_append_val(one, g_array_index(sel, guint, j));
      }
    double total, rate;
    if (!sim_steady_sum(st, b->e, (const guint *)(void *)one->data, bytes, NULL, one->len, &total))
      b->steady_failed = TRUE;
    if (phased) {
      /* the data-parallel phases run after the pipeline: none repeats */
      for (guint j = 0; j < one->len; j++)
        if (sim_steady_in_w0(st, sim_engine_op_start(b->e, g_array_index(one, guint, j))))
          b->steady_failed = TRUE;
      rate = stage_phased(b, one, bytes);
    } else {
      double secs = union_seconds(b, one);
      rate = secs > 0 ? total / secs : 0;
    }
    best = fmax(best, rate);
  }
  g_free(bytes);
  g_array_free(one, TRUE);
  return best;
}

/* The byte counts of the long run: each item's counts once per copy
 * (steady.h).  FALSE where the sums would depend on their order. */
static gboolean steady_bytes(PtdpBuild *b) {
  static const guint cats[] = {SIM_CAT_TP, SIM_CAT_CP, SIM_CAT_PP, SIM_CAT_EP};
  GArray *ops = g_array_new(FALSE, FALSE, sizeof(guint)), *vals = g_array_new(FALSE, FALSE, sizeof(double));
  GArray *counts = g_array_new(FALSE, FALSE, sizeof(guint));
  gboolean ok = TRUE;
  for (guint c = 0; c < G_N_ELEMENTS(cats) && ok; c++) {
    g_array_set_size(ops, 0);
    g_array_set_size(vals, 0);
    g_array_set_size(counts, 0);
    for (guint j = 0; j < b->adds->len; j++) {
      const PtdpAdd *a = &g_array_index(b->adds, PtdpAdd, j);
      if (a->cat != cats[c])
        continue;
      guint item = a->item & ~PTDP_STEADY_XFER;
      guint op = a->item == G_MAXUINT ? G_MAXUINT : a->item & PTDP_STEADY_XFER ? b->xfer_lo[item] : b->item_lo[item];
      g_array_append_val(ops, op);
      g_array_append_val(vals, a->bytes);
      g_array_append_val(counts, a->count);
    }
    ok = sim_steady_sum(&b->steady, b->e, (const guint *)(void *)ops->data, (const double *)(void *)vals->data,
                        (const guint *)(void *)counts->data, ops->len, &b->counts.bytes[cats[c]]);
  }
  g_array_free(counts, TRUE);
  g_array_free(ops, TRUE);
  g_array_free(vals, TRUE);
  return ok;
}

static int time_cmp(const void *a, const void *b) {
  const SimTime *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The zero-bubble paper's bubble (SimResult.bubble_s): the longest stage
 * span, from a stage's first pass's start to its last pass's end (compute
 * and the tensor-parallel communication that blocks it; not the optimizer
 * step), less the most busy time of a stage (Qi et al.'s m (T_F + T_B +
 * T_W) where the stages are equal).  With a steady state (1F1B and
 * interleaved only) every stage's span grows by k periods and its busy time
 * by k times its part in W1 (steady.h). */
static void zb_bubble(const PtdpBuild *b, SimResult *r) {
  const SimSteady *st = b->steady.k > 0 ? &b->steady : NULL;
  double best_span = -1, best_busy = 0;
  GArray *iv = g_array_new(FALSE, FALSE, sizeof(SimTime) * 2);
  for (guint s = 0; s < b->p; s++) {
    g_array_set_size(iv, 0);
    guint gpu = ptdp_gpu_of(b, 0, s, 0);
    for (guint kind = SIM_STREAM_COMPUTE; kind <= SIM_STREAM_TP; kind++) {
      guint n;
      const guint *ops = sim_engine_stream_ops(b->e, gpu * SIM_STREAM_KINDS + kind, &n);
      for (guint j = 0; j < n; j++) {
        const SimOpTag *t = sim_engine_op_tag(b->e, ops[j]);
        if (t->category == SIM_CAT_OPTIMIZER || t->category == SIM_CAT_DP)
          continue;
        SimTime x[2] = {sim_engine_op_start(b->e, ops[j]), sim_engine_op_end(b->e, ops[j])};
        g_array_append_val(iv, x);
      }
    }
    if (!iv->len)
      continue;
    qsort(iv->data, iv->len, sizeof(SimTime) * 2, time_cmp);
    SimTime *x = (SimTime *)(void *)iv->data, first = x[0], last = x[1], a = x[0], z = x[1], busy = 0, in_w1 = 0;
    for (guint j = 1; j <= iv->len; j++) {
      if (j == iv->len || x[2 * j] > z) { /* a merged interval ends: [a, z) */
        busy += z - a;
        if (st) {
          SimTime lo, hi;
          sim_steady_w1(st, a, z, &lo, &hi);
          in_w1 += hi > lo ? hi - lo : 0;
        }
        if (j == iv->len)
          break;
        a = x[2 * j];
      }
      z = MAX(z, x[2 * j + 1]);
      last = MAX(last, x[2 * j + 1]);
    }
    /* steady state: the union grows by k times its part in W1 (steady.h) */
    double span = (double)(last - first + (st ? (SimTime)st->k * st->period : 0));
    double work = (double)(busy + (st ? (SimTime)st->k * in_w1 : 0));
    best_span = MAX(best_span, span);
    best_busy = MAX(best_busy, work);
  }
  g_array_free(iv, TRUE);
  r->pipeline_span_s = best_span > 0 ? best_span * 1e-9 : 0;
  r->bubble_s = best_span > 0 ? (best_span - best_busy) * 1e-9 : 0;
  r->bubble_rate = best_span > 0 ? (best_span - best_busy) / best_span : 0;
}

/* Measures the timeline (of the plan's iteration: with a steady state, the
 * long run the short one stands for).  FALSE where a sum over ops cannot
 * be carried to the long run exactly (steady.h): simulate it all. */
gboolean sim_ptdp_measure(PtdpBuild *b, SimResult *r) {
  const SimPlan *pl = b->plan;
  const SimSteady *st = b->steady.k > 0 ? &b->steady : NULL;
  SimTime end_short = sim_engine_makespan(b->e);
  SimTime makespan = end_short + (st ? (SimTime)st->k * st->period : 0);
  r->iteration_time_s = (double)makespan * 1e-9;
  sim_plan_rates(pl, b->profile, r);
  /* (p-1)/m, over v for the looped schedules (SC21 section 2.2) */
  gboolean looped = sim_schedule_info(pl->schedule)->chunks == SIM_CHUNKS_ANY;
  r->analytic_bubble_fraction = (double)(b->p - 1) / ((looped ? (double)b->v : 1.0) * pl->microbatches);

  /* The pipeline's busy work per stage (compute and tensor-parallel
   * all-reduces, which block compute), and the flush: the end of the last
   * pass anywhere. */
  SimTime flush;
  double best_work;
  guint *stage_gpu = g_new(guint, b->p);
  for (guint s = 0; s < b->p; s++)
    stage_gpu[s] = ptdp_gpu_of(b, 0, s, 0);
  guint critical = sim_exposed_busiest_steady(b->e, stage_gpu, b->p, st, &best_work, &flush);
  g_free(stage_gpu);
  r->bubble_fraction = best_work > 0 ? ((double)flush - best_work) / best_work : 0;
  r->critical_stage = critical;
  zb_bubble(b, r);
  double parts[SIM_N_CLS + 1];
  breakdown(b, ptdp_gpu_of(b, 0, critical, 0), end_short, parts);
  r->breakdown = (SimBreakdown){parts[SIM_CLS_COMPUTE], parts[SIM_CLS_TP], parts[SIM_CLS_PP],
                                parts[SIM_CLS_DP],      parts[SIM_CLS_OPT], parts[SIM_N_CLS]};

  if (st && !steady_bytes(b))
    return FALSE;
  r->bytes_tp = b->counts.bytes[SIM_CAT_TP];
  r->bytes_cp = b->counts.bytes[SIM_CAT_CP];
  r->bytes_pp = b->counts.bytes[SIM_CAT_PP];
  r->bytes_dp = b->counts.bytes[SIM_CAT_DP];
  r->shard_gathers = b->counts.shard_gathers;
  r->shard_reductions = b->counts.shard_reductions;
  r->shard_gather_bytes = b->counts.shard_gather_bytes;
  r->shard_reduce_bytes = b->counts.shard_reduce_bytes;
  r->bytes_embedding = b->counts.bytes_embedding;
  r->bytes_ep = b->counts.bytes[SIM_CAT_EP];
  if (b->moe_layer) {
    /* the critical stage's MoE token communication, each transfer at its
     * time alone: per MoE layer and microbatch, forward, backward and the
     * recomputation forward */
    guint s = r->critical_stage, moe = 0;
    for (guint c = 0; c < b->v; c++)
      for (guint l = 0; l < ptdp_chunk_layers(b, s, c); l++)
        moe += b->moe_layer[(s * b->v + c) * b->lmax + l];
    gboolean deepep = pl->moe_dispatcher == SIM_DISPATCH_DEEPEP;
    SimTime fwd = 0, bwd = 0; /* (DeepEP's backward sends the dispatch's gradient as a combine: ptdp/moe.c) */
    for (guint kind = 0; kind < PTDP_MOE_N_COMM; kind++)
      if ((kind <= PTDP_MOE_COMBINE ? pl->ep : pl->etp) > 1) {
        fwd += b->moe_ns[s * PTDP_MOE_N_COMM + kind];
        bwd += b->moe_ns[s * PTDP_MOE_N_COMM + (deepep && kind == PTDP_MOE_DISPATCH ? PTDP_MOE_COMBINE : kind)];
      }
    r->moe_comm_s = deepep ? ((double)fwd * (pl->recompute ? 2 : 1) + (double)bwd) * 1e-9 * moe * pl->microbatches
                           : (double)fwd * 1e-9 * moe * pl->microbatches * (pl->recompute ? 3 : 2);
    r->moe_a2a_bytes_per_rank = deepep ? b->moe.dispatch_bytes /* across InfiniBand and over NVLink */
                                               : model_moe_a2a_wire_bytes(&pl->model, &(ModelMoeOptions){
                                                                                          .t = pl->tp,
                                                                                          .cp = b->cp,
                                                                                          .ep = pl->ep,
                                                                                          .b = pl->micro_batch});
    r->moe_ib_bytes_per_rank = deepep ? b->moe.ib_bytes_d : 0;
    r->moe_nvl_bytes_per_rank = deepep ? b->moe.nvl_bytes_d : 0;
    r->moe_expert_tokens = b->moe.expert_tokens;
  }

  /* Effective bisection bandwidth (bisection_rates): pipeline cut between
   * stages below p/2 and the rest, data-parallel cut between replicas below
   * d/2 and the rest; bytes counted in one direction. */
  GArray *sel = g_array_new(FALSE, FALSE, sizeof(guint));
  GArray *dir_bytes = g_array_new(FALSE, FALSE, sizeof(double) * 2);
  guint n_ops = sim_engine_n_ops(b->e);
  if (b->p > 1) {
    double per_rank = ptdp_pp_bytes_per_rank(pl);
    /* one simulated send stands for tp dp / (ts ds) ranks' sends */
    double per_op = per_rank * pl->tp * pl->dp / (b->ts * b->ds) * b->cp;
    for (guint op = 0; op < n_ops; op++) {
      const SimOpTag *t = sim_engine_op_tag(b->e, op);
      if (t->category != SIM_CAT_PP)
        continue;
      const guint *st = sim_engine_op_streams(b->e, op);
      guint from = (st[0] / SIM_STREAM_KINDS) / (b->ts * b->ds);
      guint to = sim_engine_op_n_streams(b->e, op) > 1 ? (st[1] / SIM_STREAM_KINDS) / (b->ts * b->ds)
                                                       : g_array_index(b->pp_to, guint, op) - 1;
      guint side_from = from >= b->p / 2, side_to = to >= b->p / 2;
      if (side_from == side_to)
        continue;
      double d[2] = {0, 0};
      d[side_from] = per_op;
      g_array_append_val(sel, op);
      g_array_append_val(dir_bytes, d);
    }
    r->bisection_pp_GBps = bisection_rate(b, sel, (const double *)(const void *)dir_bytes->data, FALSE) / 1e9;
  }
  if (pl->dp > 1) {
    g_array_set_size(sel, 0);
    g_array_set_size(dir_bytes, 0);
    for (guint op = 0; op < n_ops; op++) {
      const SimOpTag *t = sim_engine_op_tag(b->e, op);
      if (t->category != SIM_CAT_DP || t->layer == -2)
        continue;
      g_array_append_val(sel, op);
    }
    /* A ring all-reduce over the d replicas crosses the cut once each way,
     * 2 (d-1)/d of the fp16 gradients each way, in each of the t rings; a
     * stage's crossing bytes are shared evenly by its data-parallel ops. */
    double *stage_bytes = g_new0(double, b->p);
    guint *stage_ops = g_new0(guint, b->p);
    for (guint s = 0; s < b->p; s++)
      stage_bytes[s] = model_busbw_factor(MODEL_COLL_ALLREDUCE, b->dpc) * 2.0 *
                       model_stage_params(&pl->model, pl->tp, b->p, s, ptdp_stage_layers(b, s)) * pl->tp;
    for (guint j = 0; j < sel->len; j++)
      stage_ops[(sim_engine_op_streams(b->e, g_array_index(sel, guint, j))[0] / SIM_STREAM_KINDS) / (b->ts * b->ds)]++;
    for (guint j = 0; j < sel->len; j++) {
      guint s = (sim_engine_op_streams(b->e, g_array_index(sel, guint, j))[0] / SIM_STREAM_KINDS) / (b->ts * b->ds);
      double d[2] = {stage_bytes[s] / stage_ops[s], stage_bytes[s] / stage_ops[s]};
      g_array_append_val(dir_bytes, d);
    }
    r->bisection_dp_GBps = bisection_rate(b, sel, (const double *)(const void *)dir_bytes->data, TRUE) / 1e9;
    g_free(stage_bytes);
    g_free(stage_ops);
  }
  g_array_free(dir_bytes, TRUE);
  g_array_free(sel, TRUE);
  /* the ops of the fine task graph, whether coarse ops stood for them */
  guint64 more_ops = 0, extra = b->counts.logical_extra;
  if (st) { /* W0's ops k more times (steady.h) */
    more_ops = st->k * st->w0_ops;
    for (guint op = 0; op < n_ops; op++)
      if (sim_steady_in_w0(st, sim_engine_op_start(b->e, op)))
        extra += st->k * ptdp_extra_of(b, op);
  }
  r->ops = n_ops + more_ops + extra;
  r->events = sim_engine_n_events(b->e) + more_ops + extra;
  r->simulated_gpus = b->ts * b->p * b->ds;
  r->steady_periods = st ? st->k : 0;
  return !b->steady_failed;
}

/* Flow network: the same measure over the flows themselves -- the data
 * bytes of every ring edge, tree edge or send whose ends lie on opposite
 * sides (pipeline: stages below p/2 against the rest; data-parallel:
 * replicas below d/2 against the rest), per direction. */
void sim_ptdp_flow_bisection(PtdpBuild *b, SimResult *r) {
  GArray *sel = g_array_new(FALSE, FALSE, sizeof(guint));
  GArray *bytes = g_array_new(FALSE, FALSE, sizeof(double) * 2);
  for (int cls = 0; cls < 2; cls++) {
    g_array_set_size(sel, 0);
    g_array_set_size(bytes, 0);
    guint n_ops = sim_engine_n_ops(b->e);
    for (guint op = 0; op < n_ops; op++) {
      double copies;
      const NetCollPlan *plan = sim_netops_plan_of(b->flow->ops, op, &copies);
      const SimOpTag *t = sim_engine_op_tag(b->e, op);
      if (!plan || t->category != (cls == 0 ? SIM_CAT_PP : SIM_CAT_DP) || t->layer == -2)
        continue;
      double c[2] = {net_coll_plan_crossing_bytes(plan, 0) * copies, net_coll_plan_crossing_bytes(plan, 1) * copies};
      if (c[0] <= 0 && c[1] <= 0)
        continue;
      g_array_append_val(sel, op);
      g_array_append_val(bytes, c);
    }
    double gbps = bisection_rate(b, sel, (const double *)(const void *)bytes->data, cls == 1) / 1e9;
    if (cls == 0)
      r->bisection_pp_GBps = gbps;
    else
      r->bisection_dp_GBps = gbps;
  }
  g_array_free(sel, TRUE);
  g_array_free(bytes, TRUE);
}
