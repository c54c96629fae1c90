/* ptdsim — pipeline schedule orders (see schedule.h). */
#include "schedule.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/text.h"

G_DEFINE_QUARK(sim-schedule-error-quark, sim_schedule_error)

static void push_item(GArray *out, guint chunk, guint mb, gboolean fwd, SimGrad grad) {
  SimItem it = {mb, (guint16)chunk, (guint8)(fwd ? 1 : 0), (guint8)(fwd ? SIM_GRAD_ALL : grad), 0};
  g_array_append_val(out, it);
}
static void push(GArray *out, guint chunk, guint mb, gboolean fwd) { push_item(out, chunk, mb, fwd, SIM_GRAD_ALL); }

/* Megatron-LM's get_model_chunk_id and the microbatch of the k-th pass. */
static guint chunk_of(guint k, guint p, guint v, gboolean forward) {
  guint c = (k % (p * v)) / p;
  return forward ? c : v - 1 - c;
}
static guint microbatch_of(guint k, guint p, guint v) { return (k / (p * v)) * p + k % p; }

/* The W passes a stage owes, oldest first. */
typedef struct {
  GArray *chunk, *mb;
  guint head;
} WQueue;
static void wq_init(WQueue *q) {
  q->chunk = g_array_new(FALSE, FALSE, sizeof(guint));
  q->mb = g_array_new(FALSE, FALSE, sizeof(guint));
  q->head = 0;
}
static void wq_push(WQueue *q, guint c, guint mb) {
  g_array_append_val(q->chunk, c);
  g_array_append_val(q->mb, mb);
}
static gboolean wq_pop(WQueue *q, GArray *out) {
  if (q->head >= q->chunk->len)
    return FALSE;
  push_item(out, g_array_index(q->chunk, guint, q->head), g_array_index(q->mb, guint, q->head), FALSE,
            SIM_GRAD_WEIGHT);
  q->head++;
  return TRUE;
}
static void wq_free(WQueue *q) {
  g_array_free(q->chunk, TRUE);
  g_array_free(q->mb, TRUE);
}

/* ZB-H1 and its interleaved form (torch.distributed.pipelining,
 * ScheduleInterleavedZeroBubble: warm-up (v-1) p + p-s-1, chunks in rounds
 * of p microbatches, the k-th backward followed by the oldest W once k >= s). */
static void zb_interleaved(guint p, guint m, guint v, guint s, GArray *out) {
  guint round = MIN(p, m); /* microbatches per round */
  guint total = m * v;
  guint warmup = MIN((v - 1) * round + (p - s - 1), total);
  guint *fcount = g_new0(guint, v), *bcount = g_new0(guint, v);
  WQueue q;
  wq_init(&q);
  for (guint op = 0; op < total + warmup; op++) {
    if (op < total) { /* the warm-up's forwards, then the forward of each steady pair */
      guint c = (op / round) % v;
      push(out, c, fcount[c]++, TRUE);
    }
    if (op < warmup)
      continue;
    guint k = op - warmup, c = v - 1 - (k / round) % v, mb = bcount[c]++;
    push_item(out, c, mb, FALSE, SIM_GRAD_INPUT);
    wq_push(&q, c, mb);
    if (k >= s) /* stage s owes its first s weight passes */
      wq_pop(&q, out);
  }
  while (wq_pop(&q, out))
    ;
  wq_free(&q);
  g_free(fcount);
  g_free(bcount);
}

/* ZB's heuristic (Qi et al. 2024, section 3.3, in its simplest form): a
 * list schedule of the p stages with the given pass times, each stage,
 * when free, running the input gradient B if its input has come, else a
 * forward if its input has come and fewer than `limit` microbatches are in
 * flight (F run, W not yet), else a W it owes when the next B or F is at
 * least T_W away (or none can come before it: memory full); idle until then
 * otherwise.  The stage that can act first goes first (ties: the lower
 * stage).  Fills orders[s] (arrays of SimItem) for each stage. */
void sim_schedule_greedy(guint p, guint m, double tf, double tb, double tw, double tc, guint limit, GArray **orders) {
  double *f = g_new(double, p), *b = g_new(double, p), *w = g_new(double, p);
  for (guint r = 0; r < p; r++)
    f[r] = tf, b[r] = tb, w[r] = tw;
  sim_schedule_greedy_staged(p, m, f, b, w, tc, limit, TRUE, orders);
  g_free(f);
  g_free(b);
  g_free(w);
}

void sim_schedule_greedy_staged(guint p, guint m, const double *tf, const double *tb, const double *tw, double tc,
                                guint limit, gboolean wait_for_w, GArray **orders) {
  const double inf = 1e300;
  double *fdone = g_new(double, (gsize)p * m), *bdone = g_new(double, (gsize)p * m), *free_at = g_new0(double, p);
  guint *nf = g_new0(guint, p), *nb = g_new0(guint, p), *nw = g_new0(guint, p);
  for (gsize j = 0; j < (gsize)p * m; j++)
    fdone[j] = bdone[j] = inf;
  for (guint r = 0; r < p; r++)
    g_array_set_size(orders[r], 0);
  limit = MAX(limit, 1u);
  for (guint64 left = 3ull * p * m; left > 0; left--) {
    guint best = G_MAXUINT;
    char best_act = 0;
    double best_t = inf;
    for (guint r = 0; r < p; r++) {
      if (nw[r] == m)
        continue;
      double t = free_at[r], ta_f = inf, ta_b = inf;
      if (nf[r] < m && nf[r] - nw[r] < limit)
        ta_f = r == 0 ? 0 : fdone[(gsize)(r - 1) * m + nf[r]] + tc;
      if (nb[r] < nf[r])
        ta_b = r == p - 1 ? fdone[(gsize)r * m + nb[r]] : bdone[(gsize)(r + 1) * m + nb[r]] + tc;
      char act;
      double at;
      if (ta_b <= t) {
        act = 'B';
        at = t;
      } else if (ta_f <= t) {
        act = 'F';
        at = t;
      } else {
        double next = MIN(ta_b, ta_f);
        /* a W owed fills the wait if it fits in it (or always, without
         * wait_for_w; or when nothing else can come: memory full) */
        if (nw[r] < nb[r] && (next >= inf || !wait_for_w || next - t >= tw[r])) {
          act = 'W';
          at = t;
        } else if (next >= inf) {
          continue;
        } else {
          act = ta_b <= ta_f ? 'B' : 'F';
          at = next;
        }
      }
      if (at < best_t) {
        best = r;
        best_t = at;
        best_act = act;
      }
    }
    g_assert(best != G_MAXUINT); /* something can always run: a stage's owed W, or the chain's next pass */
    guint r = best;
    if (best_act == 'F') {
      guint j = nf[r]++;
      fdone[(gsize)r * m + j] = best_t + tf[r];
      free_at[r] = best_t + tf[r];
      push(orders[r], 0, j, TRUE);
    } else if (best_act == 'B') {
      guint k = nb[r]++;
      bdone[(gsize)r * m + k] = best_t + tb[r];
      free_at[r] = best_t + tb[r];
      push_item(orders[r], 0, k, FALSE, SIM_GRAD_INPUT);
    } else {
      push_item(orders[r], 0, nw[r]++, FALSE, SIM_GRAD_WEIGHT);
      free_at[r] = best_t + tw[r];
    }
  }
  g_free(fdone);
  g_free(bdone);
  g_free(free_at);
  g_free(nf);
  g_free(nb);
  g_free(nw);
}

double sim_schedule_span(guint p, guint m, GArray *const *orders, const double *tf, const double *tb, const double *tw,
                         double tc) {
  /* each stage runs its order; an F waits for the previous stage's F, a B
   * (or whole backward) for the next stage's, a W for nothing else */
  double *fdone = g_new(double, (gsize)p * m), *bdone = g_new(double, (gsize)p * m), *free_at = g_new0(double, p);
  double *first = g_new(double, p);
  guint *ptr = g_new0(guint, p);
  const double unset = -1;
  for (gsize j = 0; j < (gsize)p * m; j++)
    fdone[j] = bdone[j] = unset;
  for (guint r = 0; r < p; r++)
    first[r] = unset;
  for (gboolean progress = TRUE; progress;) {
    progress = FALSE;
    for (guint r = 0; r < p; r++)
      for (; ptr[r] < orders[r]->len; ptr[r]++) {
        SimItem it = g_array_index(orders[r], SimItem, ptr[r]);
        double ready = 0, dur;
        if (it.forward) {
          if (r > 0) {
            if (fdone[(gsize)(r - 1) * m + it.microbatch] < 0)
              break;
            ready = fdone[(gsize)(r - 1) * m + it.microbatch] + tc;
          }
          dur = tf[r];
        } else if (it.grad != SIM_GRAD_WEIGHT) {
          if (r + 1 < p) {
            if (bdone[(gsize)(r + 1) * m + it.microbatch] < 0)
              break;
            ready = bdone[(gsize)(r + 1) * m + it.microbatch] + tc;
          }
          dur = it.grad == SIM_GRAD_INPUT ? tb[r] : tb[r] + tw[r];
        } else
          dur = tw[r];
        double start = MAX(free_at[r], ready);
        if (first[r] < 0)
          first[r] = start;
        free_at[r] = start + dur;
        if (it.forward)
          fdone[(gsize)r * m + it.microbatch] = free_at[r];
        else if (it.grad != SIM_GRAD_WEIGHT)
          bdone[(gsize)r * m + it.microbatch] = free_at[r];
        progress = TRUE;
      }
  }
  double span = 0;
  for (guint r = 0; r < p; r++)
    span = ptr[r] < orders[r]->len ? 1e300 : MAX(span, free_at[r] - MAX(first[r], 0));
  g_free(fdone);
  g_free(bdone);
  g_free(free_at);
  g_free(first);
  g_free(ptr);
  return span;
}

/* Keeps `cand` in `orders` where its span beats *best (ties: the earlier). */
static void keep_shorter(guint p, guint m, GArray **cand, const double *tf, const double *tb, const double *tw,
                         double tc, double *best, GArray **orders) {
  double span = sim_schedule_span(p, m, cand, tf, tb, tw, tc);
  if (span >= *best)
    return;
  *best = span;
  for (guint r = 0; r < p; r++) {
    g_array_set_size(orders[r], 0);
    g_array_append_vals(orders[r], cand[r]->data, cand[r]->len);
  }
}

void sim_schedule_zb_auto(guint p, guint m, const double *tf, const double *tb, const double *tw, double tc,
                          double mem_f, double mem_w, guint limit, GArray **orders) {
  if (sim_schedule_zb_heuristic(p, m, tf, tb, tw, tc, mem_f, mem_w, limit, orders))
    return;
  /* none of its variants fits: the list heuristic waiting for W to fit and
   * not, ZB-H1 where p microbatches fit, ZB-H2 where 2p - 1 do */
  GArray **cand = g_new(GArray *, p);
  for (guint r = 0; r < p; r++)
    cand[r] = g_array_new(FALSE, FALSE, sizeof(SimItem));
  double best = 1e301;
  for (guint k = 0; k < 4; k++) {
    if (k < 2)
      sim_schedule_greedy_staged(p, m, tf, tb, tw, tc, limit, k == 0, cand);
    else if (limit >= (k == 2 ? p : 2 * p - 1))
      for (guint r = 0; r < p; r++)
        sim_schedule_order(k == 2 ? SIM_SCHEDULE_ZB_H1 : SIM_SCHEDULE_ZB_H2, p, m, 1, r, cand[r]);
    else
      continue;
    keep_shorter(p, m, cand, tf, tb, tw, tc, &best, orders);
  }
  for (guint r = 0; r < p; r++)
    g_array_free(cand[r], TRUE);
  g_free(cand);
}

/* ZB-H2: the heuristic's order for T_F = T_B = T_W, no communication time
 * and 2p - 1 microbatches in flight (see schedule.h). */
static void zb_h2(guint p, guint m, guint s, GArray *out) {
  GArray **all = g_new(GArray *, p);
  for (guint r = 0; r < p; r++)
    all[r] = g_array_new(FALSE, FALSE, sizeof(SimItem));
  sim_schedule_greedy(p, m, 1, 1, 1, 0, 2 * p - 1, all);
  g_array_append_vals(out, all[s]->data, all[s]->len);
  for (guint r = 0; r < p; r++)
    g_array_free(all[r], TRUE);
  g_free(all);
}

/* ZB-V (torch.distributed.pipelining, ScheduleZBVZeroBubble, after Qi et
 * al. section 6); microbatches are counted up to max(2p - 1, m) and those
 * past m dropped, as there. */
static void zb_v(guint p, guint m, guint s, GArray *out) {
  guint n = MAX(2 * p - 1, m), f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  GArray *all = g_array_new(FALSE, FALSE, sizeof(SimItem));
#define ZF(c, x) push(all, c, x++, TRUE)
#define ZB(c, x, g) push_item(all, c, x, FALSE, g)
  for (guint j = 0; j < 2 * (p - s) - 1; j++)
    ZF(0, f0);
  for (guint j = 0; j < s; j++) {
    ZF(1, f1);
    ZF(0, f0);
  }
  for (guint j = 0; j < p - s; j++) {
    ZF(1, f1);
    ZB(1, b1, SIM_GRAD_INPUT);
    ZB(1, b1, SIM_GRAD_WEIGHT);
    b1++;
  }
  while (f1 < f0 || f0 < n) {
    if (f0 < n)
      ZF(0, f0);
    ZB(0, b0, SIM_GRAD_INPUT);
    ZB(0, b0, SIM_GRAD_WEIGHT);
    b0++;
    ZF(1, f1);
    ZB(1, b1, SIM_GRAD_INPUT);
    ZB(1, b1, SIM_GRAD_WEIGHT);
    b1++;
  }
  guint w0 = b0, w1 = b1;
  for (guint j = 0; j < s; j++) {
    ZB(0, b0, SIM_GRAD_INPUT);
    b0++;
    ZB(1, b1, SIM_GRAD_INPUT);
    b1++;
  }
  for (guint j = 0; j < p - s; j++) {
    ZB(0, b0, SIM_GRAD_INPUT);
    b0++;
    ZB(0, w0, SIM_GRAD_WEIGHT);
    w0++;
  }
  for (; w1 < b1; w1++)
    ZB(1, w1, SIM_GRAD_WEIGHT);
  for (; w0 < b0; w0++)
    ZB(0, w0, SIM_GRAD_WEIGHT);
#undef ZF
#undef ZB
  for (guint j = 0; j < all->len; j++)
    if (g_array_index(all, SimItem, j).microbatch < m)
      g_array_append_val(out, g_array_index(all, SimItem, j));
  g_array_free(all, TRUE);
}

/* DualPipe's and DualPipeV's eight steps (deepseek-ai/DualPipe
 * dualpipe/dualpipe.py and dualpipev.py; torch's ScheduleDualPipeV).  `r`
 * is the rank within its half (DualPipe: min(s, p-1-s) of p/2 ranks;
 * DualPipeV: s of p), `n` the ranks of that half, `half` the microbatches
 * per direction (DualPipe) or all of them (DualPipeV).  Phase 0 and 1 are
 * the stage's two chunks (DualPipe swaps them in the second half of the
 * ranks: `swap`); `base[c]` the first microbatch of chunk c. */
typedef struct {
  GArray *out;
  WQueue q;
  guint f[2], b[2], base[2], swap;
} Dual;
static void dual_f(Dual *d, guint ph) {
  guint c = ph ^ d->swap;
  push(d->out, c, d->base[c] + d->f[c]++, TRUE);
}
static void dual_b(Dual *d, guint ph, gboolean zb) {
  guint c = ph ^ d->swap, mb = d->base[c] + d->b[c]++;
  push_item(d->out, c, mb, FALSE, zb ? SIM_GRAD_INPUT : SIM_GRAD_ALL);
  if (zb)
    wq_push(&d->q, c, mb);
}
/* F of phase `fph` overlapped with the whole B of phase `bph` (F&B). */
static void dual_fb(Dual *d, guint fph, guint bph, gboolean overlap) {
  dual_f(d, fph);
  g_array_index(d->out, SimItem, d->out->len - 1).paired = (guint8)overlap;
  dual_b(d, bph, FALSE);
}

static void dual_order(guint r, guint n, guint half, gboolean middle, Dual *d) {
  for (guint i = 0; i < (n - r - 1) * 2; i++) /* 1: F0 */
    dual_f(d, 0);
  for (guint i = 0; i < r + 1; i++) { /* 2: F0 F1 */
    dual_f(d, 0);
    dual_f(d, 1);
  }
  for (guint i = 0; i < n - r - 1; i++) { /* 3: B1 W F1, zero bubble */
    dual_b(d, 1, TRUE);
    wq_pop(&d->q, d->out);
    dual_f(d, 1);
  }
  for (guint i = 0; i < half - 2 * n + r + 1; i++) { /* 4: F0&B1 F1&B0 (the middle rank's first pair apart) */
    dual_fb(d, 0, 1, !(i == 0 && middle));
    dual_fb(d, 1, 0, TRUE);
  }
  for (guint i = 0; i < n - r - 1; i++) { /* 5: B1 F1&B0 */
    dual_b(d, 1, FALSE);
    dual_fb(d, 1, 0, TRUE);
  }
  gboolean zb = FALSE;
  guint step6 = r + 1;
  for (guint i = 0; i < step6; i++) { /* 6: B1 B0, the second half zero bubble */
    if (i == step6 / 2 && r % 2 == 1)
      zb = TRUE;
    dual_b(d, 1, zb);
    if (i == step6 / 2 && r % 2 == 0)
      zb = TRUE;
    dual_b(d, 0, zb);
  }
  for (guint i = 0; i < n - r - 1; i++) { /* 7: W B0 */
    wq_pop(&d->q, d->out);
    dual_b(d, 0, zb);
  }
  while (wq_pop(&d->q, d->out)) /* 8: the W owed */
    ;
}

static void dualpipe(guint p, guint m, guint s, gboolean v_shape, GArray *out) {
  Dual d = {.out = out};
  wq_init(&d.q);
  if (v_shape) {
    d.base[0] = d.base[1] = 0;
    dual_order(s, p, m, s == p - 1, &d);
  } else {
    guint n = p / 2, r = MIN(s, p - 1 - s);
    d.swap = s >= n;
    d.base[0] = 0;
    d.base[1] = m / 2;
    dual_order(r, n, m / 2, s == n - 1 || s == n, &d);
  }
  wq_free(&d.q);
}

/* --- the orders, one function each (the table's `order`) --- */

static void order_gpipe(guint p, guint m, guint v, guint stage, GArray *out) {
  (void)p, (void)v, (void)stage;
  for (guint j = 0; j < m; j++)
    push(out, 0, j, TRUE);
  for (guint j = 0; j < m; j++)
    push(out, 0, j, FALSE);
}

static void order_1f1b(guint p, guint m, guint v, guint stage, GArray *out) {
  (void)v;
  guint warmup = MIN(p - stage - 1, m);
  guint fwd = 0, bwd = 0;
  for (; fwd < warmup; fwd++)
    push(out, 0, fwd, TRUE);
  while (fwd < m) {
    push(out, 0, fwd++, TRUE);
    push(out, 0, bwd++, FALSE);
  }
  while (bwd < m)
    push(out, 0, bwd++, FALSE);
}

/* Megatron-LM's interleaved 1F1B (see schedule.h). */
static void order_interleaved(guint p, guint m, guint v, guint stage, GArray *out) {
  guint total = m * v;
  guint warmup = (m == p) ? total : MIN((p - stage - 1) * 2 + (v - 1) * p, total);
  guint remaining = total - warmup;
  for (guint k = 0; k < warmup; k++)
    push(out, chunk_of(k, p, v, TRUE), microbatch_of(k, p, v), TRUE);
  for (guint k = 0; k < remaining; k++) {
    guint f = k + warmup;
    push(out, chunk_of(f, p, v, TRUE), microbatch_of(f, p, v), TRUE);
    push(out, chunk_of(k, p, v, FALSE), microbatch_of(k, p, v), FALSE);
  }
  for (guint k = remaining; k < total; k++)
    push(out, chunk_of(k, p, v, FALSE), microbatch_of(k, p, v), FALSE);
}

static void order_zb_h1(guint p, guint m, guint v, guint stage, GArray *out) {
  (void)v;
  zb_interleaved(p, m, 1, stage, out);
}
static void order_interleaved_zb(guint p, guint m, guint v, guint stage, GArray *out) {
  zb_interleaved(p, m, v, stage, out);
}
static void order_zb_h2(guint p, guint m, guint v, guint stage, GArray *out) {
  (void)v;
  zb_h2(p, m, stage, out);
}
static void order_zb_v(guint p, guint m, guint v, guint stage, GArray *out) {
  (void)v;
  zb_v(p, m, stage, out);
}
static void order_dualpipe(guint p, guint m, guint v, guint stage, GArray *out) {
  (void)v;
  dualpipe(p, m, stage, FALSE, out);
}
static void order_dualpipev(guint p, guint m, guint v, guint stage, GArray *out) {
  (void)v;
  dualpipe(p, m, stage, TRUE, out);
}

/* --- the placements (the table's route_len, vstage and place) --- */

/* In a loop (Megatron's): chunk c of stage s is virtual stage c p + s. */
static guint loop_len(guint p, guint v) { return p * v; }
static guint loop_vstage(guint p, guint v, guint m, guint s, guint c, guint mb) {
  (void)v, (void)m, (void)mb;
  return c * p + s;
}
static void loop_place(guint p, guint v, guint m, guint vs, guint mb, guint *s, guint *c) {
  (void)v, (void)m, (void)mb;
  *s = vs % p;
  *c = vs / p;
}
/* In a V: stage s holds virtual stages s and 2p - 1 - s. */
static guint v_vstage(guint p, guint v, guint m, guint s, guint c, guint mb) {
  (void)v, (void)m, (void)mb;
  return c == 0 ? s : 2 * p - 1 - s;
}
static void v_place(guint p, guint v, guint m, guint vs, guint mb, guint *s, guint *c) {
  (void)v, (void)m, (void)mb;
  *c = vs >= p;
  *s = vs < p ? vs : 2 * p - 1 - vs;
}
/* DualPipe's two directions: the first m/2 microbatches run stage s's
 * chunk 0 as virtual stage s, the rest its chunk 1 as virtual stage
 * p - 1 - s; a microbatch passes p virtual stages. */
static guint two_way_len(guint p, guint v) {
  (void)v;
  return p;
}
static guint two_way_vstage(guint p, guint v, guint m, guint s, guint c, guint mb) {
  (void)v;
  if ((mb >= m / 2) != (c == 1))
    return G_MAXUINT;
  return c == 0 ? s : p - 1 - s;
}
static void two_way_place(guint p, guint v, guint m, guint vs, guint mb, guint *s, guint *c) {
  (void)v;
  *c = mb >= m / 2;
  *s = *c ? p - 1 - vs : vs;
}

/* --- the table --- */

#define LOOP .route_len = loop_len, .vstage = loop_vstage, .place = loop_place
#define V_SHAPE .route_len = loop_len, .vstage = v_vstage, .place = v_place
#define TWO_WAY .route_len = two_way_len, .vstage = two_way_vstage, .place = two_way_place

/* In the order `--schedule` lists its words; then what no word names. */
static const SimScheduleInfo schedules[] = {
    {.id = SIM_SCHEDULE_GPIPE, .name = "gpipe", .word = TRUE, .passes = TRUE, .order = order_gpipe, LOOP,
     .split = SIM_SPLIT_ANY, .search = SIM_SEARCH_NAMED, .search_rank = 2, .megatron_2021 = TRUE},
    {.id = SIM_SCHEDULE_1F1B, .name = "1f1b", .word = TRUE, .passes = TRUE, .order = order_1f1b, LOOP,
     .split = SIM_SPLIT_ANY, .search = SIM_SEARCH_DEFAULT, .search_rank = 1, .megatron_2021 = TRUE,
     .period = SIM_PERIOD_MICROBATCH},
    {.id = SIM_SCHEDULE_INTERLEAVED, .name = "interleaved", .word = TRUE, .passes = TRUE,
     .order = order_interleaved, LOOP, .chunks = SIM_CHUNKS_ANY, .split = SIM_SPLIT_ANY, .m_multiple_of_p = TRUE,
     .search = SIM_SEARCH_DEFAULT, .search_rank = 1, .megatron_2021 = TRUE, .period = SIM_PERIOD_ROUND},
    /* TeraPipe's token pipeline (terapipe/): no order of passes here */
    {.id = SIM_SCHEDULE_TERAPIPE, .name = "terapipe", .word = TRUE, LOOP, .split = SIM_SPLIT_ANY},
    {.id = SIM_SCHEDULE_ZB_H1, .name = "zb-h1", .word = TRUE, .passes = TRUE, .backward = SIM_BACKWARD_SPLIT,
     .order = order_zb_h1, LOOP, .split = SIM_SPLIT_ANY, .search = SIM_SEARCH_ALL, .search_rank = 3},
    {.id = SIM_SCHEDULE_ZB_H2, .name = "zb-h2", .word = TRUE, .passes = TRUE, .backward = SIM_BACKWARD_SPLIT,
     .order = order_zb_h2, LOOP, .split = SIM_SPLIT_ANY, .search = SIM_SEARCH_ALL, .search_rank = 4},
    {.id = SIM_SCHEDULE_INTERLEAVED_ZB, .name = "interleaved-zb", .word = TRUE, .passes = TRUE,
     .backward = SIM_BACKWARD_SPLIT, .order = order_interleaved_zb, LOOP, .chunks = SIM_CHUNKS_ANY,
     .split = SIM_SPLIT_EVEN, .m_multiple_of_p = TRUE, .search = SIM_SEARCH_ALL, .search_rank = 2},
    {.id = SIM_SCHEDULE_ZB_V, .name = "zb-v", .word = TRUE, .passes = TRUE, .backward = SIM_BACKWARD_SPLIT,
     .order = order_zb_v, V_SHAPE, .chunks = SIM_CHUNKS_TWO, .split = SIM_SPLIT_ACCOUNT, .search = SIM_SEARCH_ALL,
     .search_rank = 7},
    /* ZB's heuristic: the order comes from the stages' times (sim_schedule_zb_auto) */
    {.id = SIM_SCHEDULE_ZB_1P, .name = "zb-1p", .word = TRUE, .passes = TRUE, .backward = SIM_BACKWARD_SPLIT,
     .timed = TRUE, .limit_p = 1, LOOP, .split = SIM_SPLIT_ANY, .search = SIM_SEARCH_ALL, .search_rank = 5},
    {.id = SIM_SCHEDULE_ZB_2P, .name = "zb-2p", .word = TRUE, .passes = TRUE, .backward = SIM_BACKWARD_SPLIT,
     .timed = TRUE, .limit_p = 2, LOOP, .split = SIM_SPLIT_ANY, .search = SIM_SEARCH_ALL, .search_rank = 6},
    {.id = SIM_SCHEDULE_ZB_AUTO, .name = "zb-auto", .word = TRUE, .passes = TRUE, .backward = SIM_BACKWARD_SPLIT,
     .timed = TRUE, .activation_limit = TRUE, LOOP, .split = SIM_SPLIT_ANY},
    {.id = SIM_SCHEDULE_DUALPIPE, .name = "dualpipe", .word = TRUE, .passes = TRUE, .backward = SIM_BACKWARD_SPLIT,
     .order = order_dualpipe, TWO_WAY, .chunks = SIM_CHUNKS_TWO, .copies = TRUE, .paired = TRUE, .split = SIM_SPLIT_EVEN,
     .even_p_and_m = TRUE, .min_m_per_p = 2, .search = SIM_SEARCH_ALL, .search_rank = 9},
    {.id = SIM_SCHEDULE_DUALPIPEV, .name = "dualpipev", .word = TRUE, .passes = TRUE,
     .backward = SIM_BACKWARD_SPLIT, .order = order_dualpipev, V_SHAPE, .chunks = SIM_CHUNKS_TWO, .paired = TRUE,
     .split = SIM_SPLIT_ACCOUNT, .min_m_per_p = 2, .search = SIM_SEARCH_ALL, .search_rank = 8},
    /* --schedule-file: the user's orders and placement (SimScheduleFile) */
    {.id = SIM_SCHEDULE_FILE, .name = "file", .passes = TRUE, .backward = SIM_BACKWARD_FILE, LOOP,
     .chunks = SIM_CHUNKS_FILE, .split = SIM_SPLIT_EVEN},
};
#undef LOOP
#undef V_SHAPE
#undef TWO_WAY

const SimScheduleInfo *sim_schedule_table(guint *n) {
  *n = G_N_ELEMENTS(schedules);
  return schedules;
}

/* Every SimSchedule has one row: the rows by id, filled once, so that a
 * row costs one look-up on the per-item paths (route.c's placement). */
#define N_SCHEDULE_IDS (SIM_SCHEDULE_ZB_AUTO + 1)
G_STATIC_ASSERT(G_N_ELEMENTS(schedules) == N_SCHEDULE_IDS);

const SimScheduleInfo *sim_schedule_info(SimSchedule s) {
  static const SimScheduleInfo *by_id[N_SCHEDULE_IDS];
  static gsize done = 0;
  if (g_once_init_enter(&done)) {
    for (guint i = 0; i < G_N_ELEMENTS(schedules); i++) {
      g_assert((guint)schedules[i].id < N_SCHEDULE_IDS && !by_id[schedules[i].id]);
      by_id[schedules[i].id] = &schedules[i];
    }
    g_once_init_leave(&done, 1);
  }
  g_return_val_if_fail((guint)s < N_SCHEDULE_IDS, &schedules[1]);
  return by_id[s];
}

const SimScheduleInfo *sim_schedule_find(const char *name) {
  for (guint i = 0; name && i < G_N_ELEMENTS(schedules); i++)
    if (strcmp(schedules[i].name, name) == 0)
      return &schedules[i];
  return NULL;
}

SimSchedule sim_schedule_default(gboolean chunks_given) {
  for (guint i = 0; i < G_N_ELEMENTS(schedules); i++)
    if (schedules[i].search == SIM_SEARCH_DEFAULT && (schedules[i].chunks == SIM_CHUNKS_ANY) == !!chunks_given)
      return schedules[i].id;
  g_return_val_if_reached(SIM_SCHEDULE_1F1B);
}

const char *sim_schedule_name(SimSchedule s) { return sim_schedule_info(s)->name; }

gboolean sim_schedule_splits(SimSchedule s) { return sim_schedule_info(s)->backward == SIM_BACKWARD_SPLIT; }

const PtdWord *sim_schedule_words(void) {
  static PtdWord words[G_N_ELEMENTS(schedules) + 1];
  static gsize done = 0;
  if (g_once_init_enter(&done)) {
    guint n = 0;
    for (guint i = 0; i < G_N_ELEMENTS(schedules); i++)
      if (schedules[i].word)
        words[n++] = (PtdWord){schedules[i].name, (int)schedules[i].id};
    words[n] = (PtdWord){NULL, 0};
    g_once_init_leave(&done, 1);
  }
  return words;
}

const char *sim_schedule_word_list(void) {
  static char *text;
  static gsize done = 0;
  if (g_once_init_enter(&done)) {
    /* the schedules of passes, then the others ("a, b or c") */
    PtdWord w[G_N_ELEMENTS(schedules) + 1];
    guint n = 0;
    for (int passes = 1; passes >= 0; passes--)
      for (guint i = 0; i < G_N_ELEMENTS(schedules); i++)
        if (schedules[i].word && schedules[i].passes == passes)
          w[n++] = (PtdWord){schedules[i].name, (int)schedules[i].id};
    w[n] = (PtdWord){NULL, 0};
    text = ptd_word_list(w);
    g_once_init_leave(&done, 1);
  }
  return text;
}

void sim_schedule_order(SimSchedule schedule, guint p, guint m, guint v, guint stage, GArray *out) {
  g_array_set_size(out, 0);
  const SimScheduleInfo *row = sim_schedule_info(schedule);
  /* the heuristics take their orders from the stages' times
   * (sim_schedule_zb_auto), a file from itself: no formula here */
  g_return_if_fail(row->order);
  row->order(p, m, v, stage, out);
}

/* --- a user's schedule --- */

#define FFAIL(...)                                                                                                     \
  do {                                                                                                                 \
    g_set_error(error, SIM_SCHEDULE_ERROR, 0, __VA_ARGS__);                                                            \
    goto fail;                                                                                                         \
  } while (0)

void sim_schedule_file_free(SimScheduleFile *f) {
  if (!f)
    return;
  for (guint r = 0; f->orders && r < f->p; r++)
    if (f->orders[r])
      g_array_free(f->orders[r], TRUE);
  g_free(f->orders);
  g_free(f->stage_of);
  g_free(f->rank_of);
  g_free(f->chunk_of);
  g_free(f);
}

typedef struct {
  guint stage, mb;
  char kind;    /* F B I W */
  gboolean pair; /* a forward overlapped with the backward after it */
} Action;

/* "2F0": stage, kind, microbatch (all digits), nothing else. */
static gboolean parse_action(const char *cell, Action *a) {
  const char *q = cell;
  if (!g_ascii_isdigit(*q))
    return FALSE;
  guint64 st = 0, mb = 0;
  for (; g_ascii_isdigit(*q); q++)
    if ((st = st * 10 + (guint64)(*q - '0')) > 1000000)
      return FALSE;
  if (*q != 'F' && *q != 'B' && *q != 'I' && *q != 'W')
    return FALSE;
  a->kind = *q++;
  if (!g_ascii_isdigit(*q))
    return FALSE;
  for (; g_ascii_isdigit(*q); q++)
    if ((mb = mb * 10 + (guint64)(*q - '0')) > 100000000)
      return FALSE;
  if (*q)
    return FALSE;
  a->stage = (guint)st;
  a->mb = (guint)mb;
  return TRUE;
}

SimScheduleFile *sim_schedule_file_parse(const char *text, gsize len, const char *name, guint p, guint m,
                                         GError **error) {
  SimScheduleFile *f = g_new0(SimScheduleFile, 1);
  GPtrArray *rows = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
  guint *done = NULL, *pos_of = NULL;
  guint *ptr = NULL;
  f->p = p;
  f->m = m;
  if (memchr(text, '\0', len))
    FFAIL("%s: not a text file; give a CSV of actions such as 0F0,0I0,0W0, one row per rank", name);
  {
    /* read in place, line by line and cell by cell: a large file costs
     * one pass and no more memory than its actions */
    const char *stop = text + len;
    while (stop > text && g_ascii_isspace(stop[-1])) /* trailing blank lines */
      stop--;
    guint64 n_lines = stop > text;
    for (const char *q = text; q < stop && (q = memchr(q, '\n', (gsize)(stop - q))); q++)
      n_lines++;
    if (n_lines != p)
      FFAIL("%s has %" G_GUINT64_FORMAT " rows of actions; give one row per pipeline rank, %u for --pp %u", name,
            n_lines, p, p);
    const char *line = text;
    for (guint r = 0; r < p; r++) {
      const char *eol = memchr(line, '\n', (gsize)(stop - line));
      if (!eol)
        eol = stop;
      GArray *acts = g_array_new(FALSE, FALSE, sizeof(Action));
      g_ptr_array_add(rows, acts);
      /* the line without its surrounding white space (a \r too) */
      const char *a0 = line, *a1 = eol;
      while (a0 < a1 && g_ascii_isspace(*a0))
        a0++;
      while (a1 > a0 && g_ascii_isspace(a1[-1]))
        a1--;
      guint j = 0;
      for (const char *c0 = a0; a0 < a1 && c0 <= a1; j++) {
        const char *c1 = memchr(c0, ',', (gsize)(a1 - c0));
        if (!c1)
          c1 = a1;
        if (j >= SIM_SCHEDULE_MAX_CELLS)
          FFAIL("%s: rank %u has more than %u cells; give a schedule of fewer steps", name, r,
                SIM_SCHEDULE_MAX_CELLS);
        /* an action is a few bytes: a longer cell is not one (and is quoted in part) */
        char *cell_buf = g_strndup(c0, MIN((gsize)(c1 - c0), 256));
        char *cell = g_strstrip(cell_buf);
        gsize cl = strlen(cell);
        gboolean long_cell = (gsize)(c1 - c0) > 256;
        c0 = c1 + 1;
        if (cl >= 2 && cell[0] == '"' && cell[cl - 1] == '"') {
          cell[cl - 1] = '\0';
          cell++;
        }
        if (!*cell && !long_cell) {
          g_free(cell_buf);
          continue; /* idle */
        }
        Action a = {0}, b = {0};
        /* torch's overlapped pair, "(0F3;7B1)OVERLAP_F_B" (schedules.py, _Action.__repr__) */
        if (!long_cell && cell[0] == '(' && g_str_has_suffix(cell, ")OVERLAP_F_B")) {
          char *in = g_strndup(cell + 1, strlen(cell) - strlen("()OVERLAP_F_B"));
          char **two = g_strsplit(in, ";", -1);
          gboolean ok = g_strv_length(two) == 2 && parse_action(g_strstrip(two[0]), &a) &&
                        parse_action(g_strstrip(two[1]), &b) && a.kind == 'F' && (b.kind == 'B' || b.kind == 'I');
          g_strfreev(two);
          g_free(in);
          if (!ok) {
            char *echo = ptd_echo(cell, 40, FALSE);
            g_set_error(error, SIM_SCHEDULE_ERROR, 0,
                        "%s: rank %u, action %u: '%s' is not an overlapped pair; write (SF M;SB M)OVERLAP_F_B, a "
                        "forward then a backward (B or I)",
                        name, r, j, echo);
            g_free(echo);
            g_free(cell_buf);
            goto fail;
          }
          a.pair = TRUE;
          g_array_append_val(acts, a);
          g_array_append_val(acts, b);
          g_free(cell_buf);
          continue;
        }
        if (long_cell || !parse_action(cell, &a)) {
          char *echo = ptd_echo(cell, 40, FALSE);
          g_set_error(error, SIM_SCHEDULE_ERROR, 0,
                      "%s: rank %u, action %u: '%s' is not an action; write STAGE KIND MICROBATCH such as 2F0, "
                      "with KIND F, B, I or W",
                      name, r, j, echo);
          g_free(echo);
          g_free(cell_buf);
          goto fail;
        }
        g_free(cell_buf);
        g_array_append_val(acts, a);
      }
      line = eol + 1;
    }
  }
  /* stages: each on one rank, the same number per rank */
  guint n_stages = 0;
  for (guint r = 0; r < p; r++) {
    GArray *acts = g_ptr_array_index(rows, r);
    for (guint j = 0; j < acts->len; j++)
      n_stages = MAX(n_stages, g_array_index(acts, Action, j).stage + 1);
  }
  if (n_stages == 0 || n_stages % p)
    FFAIL("%s names stages 0..%u; give every rank the same number of stages, %u stages in all for some v", name,
          n_stages ? n_stages - 1 : 0, p);
  if (n_stages > 64 * p)
    FFAIL("%s names %u stages, more than 64 per rank; give fewer model chunks", name, n_stages);
  guint v = n_stages / p;
  f->v = v;
  f->rank_of = g_new(guint, n_stages);
  f->chunk_of = g_new(guint, n_stages);
  f->stage_of = g_new(guint, (gsize)p * v);
  for (guint vs = 0; vs < n_stages; vs++)
    f->rank_of[vs] = G_MAXUINT;
  for (guint r = 0; r < p; r++) {
    GArray *acts = g_ptr_array_index(rows, r);
    for (guint j = 0; j < acts->len; j++) {
      Action a = g_array_index(acts, Action, j);
      if (a.mb >= m)
        FFAIL("%s: rank %u, action %u%c%u: microbatch %u is past the %u of the run; number microbatches 0..%u", name, r,
              a.stage, a.kind, a.mb, a.mb, m, m - 1);
      if (f->rank_of[a.stage] == G_MAXUINT)
        f->rank_of[a.stage] = r;
      else if (f->rank_of[a.stage] != r)
        FFAIL("%s: rank %u, action %u%c%u: stage %u already runs on rank %u; keep each stage on one rank", name, r,
              a.stage, a.kind, a.mb, a.stage, f->rank_of[a.stage]);
    }
  }
  for (guint r = 0; r < p; r++) {
    guint c = 0;
    for (guint vs = 0; vs < n_stages; vs++)
      if (f->rank_of[vs] == r) {
        if (c == v)
          FFAIL("%s: rank %u runs more than %u stages; give every rank %u stages", name, r, v, v);
        f->chunk_of[vs] = c;
        f->stage_of[r * v + c++] = vs;
      }
    if (c != v)
      FFAIL("%s: rank %u runs %u stages; give every rank %u of the %u stages", name, r, c, v, n_stages);
  }
  /* per (stage, microbatch): F, B, I, W seen on its rank, in order */
  done = g_new0(guint, (gsize)n_stages * m);
  enum { SEEN_F = 1, SEEN_B = 2, SEEN_I = 4, SEEN_W = 8 };
  f->orders = g_new0(GArray *, p);
  for (guint r = 0; r < p; r++) {
    GArray *acts = g_ptr_array_index(rows, r);
    f->orders[r] = g_array_new(FALSE, FALSE, sizeof(SimItem));
    for (guint j = 0; j < acts->len; j++) {
      Action a = g_array_index(acts, Action, j);
      guint *d = &done[(gsize)a.stage * m + a.mb];
      guint bit = a.kind == 'F' ? SEEN_F : a.kind == 'B' ? SEEN_B : a.kind == 'I' ? SEEN_I : SEEN_W;
      if (*d & bit)
        FFAIL("%s: rank %u, action %u%c%u runs twice; give each pass of a microbatch once", name, r, a.stage, a.kind,
              a.mb);
      if (a.kind != 'F' && !(*d & SEEN_F))
        FFAIL("%s: rank %u, action %u%c%u comes before its forward %uF%u; put the forward first", name, r, a.stage,
              a.kind, a.mb, a.stage, a.mb);
      if ((a.kind == 'B' && (*d & (SEEN_I | SEEN_W))) || (a.kind == 'I' && (*d & SEEN_B)))
        FFAIL("%s: rank %u, action %u%c%u: a microbatch's backward is either B or I and W, not both", name, r, a.stage,
              a.kind, a.mb);
      if (a.kind == 'W' && !(*d & SEEN_I))
        FFAIL("%s: rank %u, action %uW%u comes before its input gradient %uI%u; put the I first", name, r, a.stage,
              a.mb, a.stage, a.mb);
      *d |= bit;
      SimItem it = {a.mb, (guint16)f->chunk_of[a.stage], a.kind == 'F',
                    (guint8)(a.kind == 'I' ? SIM_GRAD_INPUT : a.kind == 'W' ? SIM_GRAD_WEIGHT : SIM_GRAD_ALL),
                    (guint8)a.pair};
      f->splits = f->splits || a.kind == 'I';
      g_array_append_val(f->orders[r], it);
    }
  }
  for (guint vs = 0; vs < n_stages; vs++)
    for (guint mb = 0; mb < m; mb++) {
      guint d = done[(gsize)vs * m + mb];
      if (!(d & SEEN_F) || !((d & SEEN_B) || (d & SEEN_W)))
        FFAIL("%s: rank %u misses %u%c%u; every stage runs F and then B (or I and W) of each of the %u microbatches",
              name, f->rank_of[vs], vs, !(d & SEEN_F) ? 'F' : (d & SEEN_I) ? 'W' : 'B', mb, m);
    }
  /* no deadlock: run the ranks' lists, each action waiting for its
   * predecessor's (F on stage vs-1, B or I on stage vs+1, W on its own I) */
  enum { DONE_F = 1, DONE_BI = 2 };
  memset(done, 0, sizeof(guint) * (gsize)n_stages * m);
  ptr = g_new0(guint, p);
  for (gboolean progress = TRUE; progress;) {
    progress = FALSE;
    for (guint r = 0; r < p; r++)
      for (; ptr[r] < f->orders[r]->len; ptr[r]++) {
        SimItem it = g_array_index(f->orders[r], SimItem, ptr[r]);
        guint vs = f->stage_of[r * v + it.chunk];
        gboolean ready = TRUE;
        if (it.forward)
          ready = vs == 0 || (done[(gsize)(vs - 1) * m + it.microbatch] & DONE_F);
        else if (it.grad != SIM_GRAD_WEIGHT)
          ready = vs + 1 == n_stages || (done[(gsize)(vs + 1) * m + it.microbatch] & DONE_BI);
        if (!ready)
          break;
        done[(gsize)vs * m + it.microbatch] |= it.forward ? DONE_F : it.grad != SIM_GRAD_WEIGHT ? DONE_BI : 0;
        progress = TRUE;
      }
  }
  for (guint r = 0; r < p; r++)
    if (ptr[r] < f->orders[r]->len) {
      SimItem it = g_array_index(f->orders[r], SimItem, ptr[r]);
      guint vs = f->stage_of[r * v + it.chunk];
      FFAIL("%s: rank %u, action %u%c%u waits forever (deadlock): it needs %s%u of stage %u, which its rank reaches "
            "only after it; reorder the actions",
            name, r, vs, it.forward ? 'F' : it.grad == SIM_GRAD_INPUT ? 'I' : 'B', it.microbatch,
            it.forward ? "the forward of microbatch " : "the backward of microbatch ", it.microbatch,
            it.forward ? vs - 1 : vs + 1);
    }
  g_free(ptr);
  g_free(done);
  g_ptr_array_free(rows, TRUE);
  return f;
fail:
  g_free(ptr);
  g_free(done);
  g_free(pos_of);
  g_ptr_array_free(rows, TRUE);
  sim_schedule_file_free(f);
  return NULL;
}

const SimScheduleFile *sim_schedule_file_load(const char *path, guint p, guint m, GError **error) {
  static GMutex lock;
  static GHashTable *cache; /* "p:m:contents" -> SimScheduleFile, alive for the process */
  char *text = NULL;
  gsize len = 0;
  /* the file opened once, its size checked before a byte is read */
  char *echo = ptd_echo(path, PTD_ECHO_MAX, TRUE);
  int fd = g_open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0);
  struct stat st = {0};
  const char *why = fd < 0                   ? g_strerror(errno)
                    : fstat(fd, &st) != 0    ? g_strerror(errno)
                    : !S_ISREG(st.st_mode)   ? "not a regular file"
                    : st.st_size > (64 << 20) ? "larger than 64 MiB"
                                              : NULL;
  if (!why) {
    len = (gsize)st.st_size;
    text = g_malloc(len + 1);
    gsize got = 0;
    while (got < len) {
      ssize_t n = read(fd, text + got, len - got);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      got += (gsize)n;
    }
    text[got] = '\0';
    if (got != len)
      why = "it changed while being read";
  }
  if (fd >= 0)
    close(fd);
  if (why) {
    g_set_error(error, SIM_SCHEDULE_ERROR, 0,
                "--schedule-file '%s' cannot be read: %s; give the path of a CSV of per-rank actions (at most 64 MiB)",
                echo, why);
    g_free(echo);
    g_free(text);
    return NULL;
  }
  char *key = g_strdup_printf("%u:%u:%s", p, m, text);
  g_mutex_lock(&lock);
  if (!cache)
    cache = g_hash_table_new(g_str_hash, g_str_equal);
  SimScheduleFile *f = g_hash_table_lookup(cache, key);
  if (!f) {
    char *label = g_strdup_printf("--schedule-file %s", echo);
    f = sim_schedule_file_parse(text, len, label, p, m, error);
    g_free(label);
    if (f)
      g_hash_table_insert(cache, key, f);
    else
      g_free(key);
  } else
    g_free(key);
  g_mutex_unlock(&lock);
  g_free(text);
  g_free(echo);
  return f;
}
