/* ptdsim — TeraPipe's token slicing (Li et al., "TeraPipe: Token-Level
 * Pipeline Parallelism for Training Large-Scale Language Models", ICML 2021).
 *
 * Per-slice cost (section 3.3).  t(i, j) is the forward plus backward time
 * (plus the recomputation forward when on) of one pipeline cell -- its
 * layers at their tensor-parallel shard, with their tensor-parallel
 * all-reduces -- for a slice of i tokens of b sequences that attends over j
 * earlier tokens.  It comes from the same per-op models as everything else
 * (models/layer.c).  As in the paper, the DP does not call it directly: it
 * uses t(i, 0) for every slice length i on the granularity grid, plus a
 * context term fitted by linear least squares (GSL, weighted for relative
 * error) on a sample of (i, j):
 *     t(i, j) ~= t(i, 0) + a0 + a1 i + a2 j + a3 i j.
 * The fit's error against the direct cost is measured on a second grid.
 *
 * Slicing DP (section 3.4, Algorithm 1).  For M slices l_1..l_M of a
 * sequence of L tokens on K cells the latency is
 *     T = sum_m t(l_m, l_1 + ... + l_{m-1}) + (K - 1) max_m t(...)     (Eq. 5)
 * For a fixed bound t_max, S*(i) = min_k S*(i - k) + t(k, i - k) over slices
 * with t(k, i - k) <= t_max (O(n^2) for n = L / granularity positions), and
 * T* = min over t_max of S*(L) + (K - 1) t_max.  Candidates t_max are the
 * distinct slice costs, ascending; a candidate within eps of the last one
 * solved is skipped, and the search stops once K t_max >= the best T (an
 * optimum whose largest slice costs t_max has T >= K t_max).  With eps = 0
 * the answer is exact.
 *
 * ptdsim's refinement of t(i, j): cells and hops.  Eq. 5 treats the K cells
 * as equal and free to reach.  In ptdsim's cells the last one is slower (it
 * adds the logits and the loss: +35% for GPT3-175B at t = 4) and paces the
 * pipeline, and every slice crosses K - 1 cell boundaries whose sends (the
 * slice's activations forward, their gradient backward, the scatter/gather
 * all-gather) the simulator charges -- at 25 Gbit/s between AWS nodes, a
 * tenth of a cell's time.  So the DP takes three per-slice times: c (the
 * last cell, from the fitted t(i, j) above), u (any other cell: c without
 * the logits, the first cell's embedding spread over the K - 1 cells) and h
 * (the mean over the K - 1 boundaries of the forward plus backward hop, from
 * the same comm model as the schedule).  Candidates bound d = u + h; for
 * each, the DP minimises sum c (the pacing cell's busy time); each
 * candidate's slicing is scored either by Eq. 5 generalised,
 *     T = sum_m c_m + (K - 1) max_m (u_m + h_m),
 * or by the token pipeline's critical path (model_slicing_score, `path`),
 * which the simulator's timeline follows more closely: the longest path of
 * a flow shop of K - 1 cells and K - 1 hops before the last cell.  With
 * u = c and h = 0 and Eq. 5 scoring this is Algorithm 1 unchanged.
 *
 * Joint batch and token slicing (section 3.4), as the authors' planner does
 * it (latency_model.py planning(): the fill (K - 1) max t added once to the
 * summed slice times of all batch slices): batch slices b_1..b_D summing to
 * B, each with its token slicing, minimising
 *     J = sum_k sum_m c_{b_k}(slice) + (K - 1) max_{k,m} d_{b_k}(slice)
 * (d = u + h; Eq. 5 with the pipeline filled once per iteration, not once per
 * batch slice).  For a bound t_max on d: the token DP gives, for every size
 * b, the least sum of c with every d <= t_max, S_b(t_max); a knapsack over
 * the sizes gives the least sum; J(t_max) = knapsack + (K - 1) t_max, and the
 * answer is the least J over the candidates t_max (every d of every size,
 * ascending, eps-skipped as Algorithm 1; stopped once (K - 1) t_max plus the
 * unbounded knapsack reaches the best J).  With eps = 0 it is exact, and pure
 * batch slicing (one token slice per batch slice) is one of its answers.
 */
#pragma once

#include <glib.h>

#include "comm.h"
#include "layer.h"
#include "profile.h"
#include "transformer.h"

/* One pipeline cell as the cost model sees it. */
typedef struct {
  const ModelProfile *profile;
  const ModelShape *model;
  const ModelNet *net; /* tensor-parallel all-reduces; NULL: not counted */
  guint tp;            /* tensor-parallel size inside the cell */
  guint tp_nodes;      /* nodes the tensor-parallel group spans */
  guint layers;        /* layers per cell */
  gboolean recompute;  /* backward re-runs the forward first */
  gboolean fused;
  gboolean head;       /* the cell also runs the logit layer and loss (the last stage) */
  /* TeraPipe's per-slice backward (test_transformer_terapipe.py): each
   * slice's torch.autograd.grad is followed by w.grad += grad_w for every
   * weight tensor of the layer (a read-modify-write of its fp16 gradients,
   * 6 bytes per local parameter, one kernel per tensor: 12 per layer), and
   * the attention cache's backward clones the full-length K and V gradients
   * (transformer_models.py: grad_cache_output.clone()), b s h / t elements
   * each, read and written. */
  gboolean slice_grads;
  /* The framework that runs the slices: zero, Megatron's kernels (`fused`
   * for the softmax) with the per-slice gradient work above added; PyTorch
   * eager, TeraPipe's own layer with that work among its kernels and every
   * kernel behind the host (model_layer_slice_cost_with). */
  ModelLayerOptions layer;
} ModelCell;

/* Direct cost of one slice on one cell: forward and backward (the backward
 * includes the recomputation forward when on), compute and tensor-parallel
 * all-reduces.  Seconds.  `tp_s`, if not NULL, receives the all-reduce part
 * of fwd + bwd. */
void model_cell_slice_time(const ModelCell *c, guint b, guint tokens, guint context, double *fwd_s, double *bwd_s,
                           double *tp_fwd_s, double *tp_bwd_s);
double model_cell_slice_total_s(const ModelCell *c, guint b, guint tokens, guint context);

/* The fitted cost of slices of b sequences on the granularity grid. */
typedef struct {
  guint b, seq_len, granularity, n; /* n = seq_len / granularity positions */
  double *t0;                       /* [n + 1]: t(k g, 0), t0[0] = 0 */
  double *tend;                     /* [n + 1]: t(k g, L - k g), the slice ending the sequence; tend[0] = 0 */
  /* [n + 1]: the context term of a slice of k granules, alpha[k] + beta[k] j
   * (seconds, j in tokens); the paper's a0 + a1 i + a2 j + a3 i j is the
   * case of alpha and beta linear in i */
  double *alpha, *beta;
  double fit_max_rel_error;         /* against the direct cost on a check grid */
  double fit_mean_rel_error;
} ModelSliceCost;

#define MODEL_SLICING_ERROR (model_slicing_error_quark())
GQuark model_slicing_error_quark(void);
typedef enum { MODEL_SLICING_ERROR_INVALID, MODEL_SLICING_ERROR_FIT } ModelSlicingError;

gboolean model_slice_cost_fit(const ModelCell *c, guint b, guint seq_len, guint granularity, ModelSliceCost *out,
                              GError **error);
void model_slice_cost_clear(ModelSliceCost *c);
/* t for a slice of `len` granules starting at granule `start`: the direct
 * cost for the first slice of a sequence (t0) and the last (tend), the
 * fitted context term on t0 between them. */
double model_slice_cost_eval(const ModelSliceCost *c, guint len, guint start);

/* A slice cost on the grid: `len` granules starting after `start` granules. */
typedef double (*ModelSliceFn)(guint len, guint start, gpointer data);

typedef struct {
  double T;        /* Eq. 5 objective of the slicing, seconds */
  double t_max;    /* its largest slice cost */
  guint n_slices;
  guint *len;      /* [n_slices], in granules, in sequence order */
  guint candidates_solved; /* t_max values for which the O(n^2) DP ran */
} ModelSlicing;

/* The per-slice times of a token pipeline (above).  cell, hop: NULL for
 * c and 0. */
typedef struct {
  ModelSliceFn last; /* c: the pacing (last) cell, fwd + bwd */
  ModelSliceFn cell; /* u: every other cell */
  ModelSliceFn hop;  /* h: one cell boundary, fwd + bwd */
  ModelSliceFn share; /* the forward's share of c and u (NULL: fwd and bwd scored together) */
  gpointer data;
  gboolean path;     /* score candidates by the critical path, not Eq. 5 */
} ModelPipeCost;

/* Algorithm 1 over n positions on K cells.  eps_s = 0 gives the exact
 * optimum of Eq. 5; the paper uses 0.1 ms. */
void model_token_dp(guint n, guint K, double eps_s, ModelSliceFn fn, gpointer data, ModelSlicing *out);
/* The same search with ptdsim's refined cost; `t_max` is then the largest
 * u_m + h_m.  With Eq. 5 scoring it is exact.  With path scoring it returns
 * the best-scoring of the candidate slicings of two families -- Algorithm
 * 1's (each slice's d capped), and one that caps each slice's own term of
 * the critical path, (K - 1) d_m less the last cell's lead accumulated
 * before it (estimated per granule), so that early slices, which fill the
 * pipeline, may be shorter than late ones -- and the n uniform slicings.
 * A heuristic, but never worse under the path score than the slicing that
 * is optimal for Eq. 5 or than any uniform slicing. */
void model_token_dp_pipe(guint n, guint K, double eps_s, const ModelPipeCost *pc, ModelSlicing *out);
void model_slicing_clear(ModelSlicing *s);
/* The Eq. 5 objective of a given slicing, and its score under `pc`. */
double model_slicing_objective(const guint *len, guint n_slices, guint K, ModelSliceFn fn, gpointer data);
double model_slicing_score(const guint *len, guint n_slices, guint K, const ModelPipeCost *pc);

/* The joint slicing of B sequences of n positions on K cells; `per_b[b-1]`
 * gives the per-slice times of a batch slice of b sequences (its `last`,
 * `cell` and `hop`; `share` and `path` are not used).  Fills `batch`
 * (guint sizes, largest first) and `tokens` (one GArray of guint granule
 * lengths per batch slice, in sequence order), returns J. */
typedef struct {
  double J;        /* the objective of the answer, seconds */
  double t_max;    /* its largest d */
  guint candidates_solved;
} ModelJointSlicing;
void model_joint_slicing(guint B, guint n, guint K, double eps_s, const ModelPipeCost *per_b, GArray *batch,
                         GPtrArray *tokens, ModelJointSlicing *out);
