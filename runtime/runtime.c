/* ptdsim — a whole training run's time (see runtime.h). */
#include "runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../models/memory.h"

G_DEFINE_QUARK(rt-error-quark, rt_error)

void rt_options_default(RtOptions *o) {
  *o = (RtOptions){.gpu_rate = RT_DEFAULT_GPU_RATE,
                   .node_rate = RT_DEFAULT_NODE_RATE,
                   .switch_rate = RT_DEFAULT_SWITCH_RATE,
                   .restart_s = RT_DEFAULT_RESTART_S,
                   .storage_node_Bps = RT_DEFAULT_STORAGE_NODE_GBPS * 1e9,
                   .storage_Bps = RT_DEFAULT_STORAGE_GBPS * 1e9,
                   .host_copy_Bps = RT_DEFAULT_HOST_COPY_GBPS * 1e9,
                   .spares = -1,
                   .repair_s = RT_DEFAULT_REPAIR_HOURS * 3600.0,
                   .seed = 1};
}

void rt_checkpoint_bytes(const SimPlan *plan, const SimResult *r, double *total, double *rank) {
  ModelMemoryRequest whole = {.t = 1, .b = 1, .params = model_param_count(&plan->model)};
  ModelMemory m;
  model_memory(&plan->model, &whole, &m);
  *total = m.weights + m.optimizer;
  *rank = r->memory.weights + r->memory.optimizer;
}

double rt_young_interval(double delta_s, double mtbf_s) { return sqrt(2.0 * delta_s * mtbf_s); }

/* Daly 2006, eq. 37: tau = sqrt(2 delta M) [1 + (1/3) sqrt(delta / (2M)) +
 * (1/9) delta / (2M)] - delta for delta < 2M, else M. */
double rt_daly_interval(double delta_s, double mtbf_s) {
  if (delta_s >= 2.0 * mtbf_s)
    return mtbf_s;
  double x = delta_s / (2.0 * mtbf_s);
  return sqrt(2.0 * delta_s * mtbf_s) * (1.0 + sqrt(x) / 3.0 + x / 9.0) - delta_s;
}

double rt_segment_expected_s(double L, double lambda, double R) {
  if (lambda <= 0)
    return L;
  return expm1(lambda * L) * (1.0 / lambda + R);
}

/* P(Poisson(mu) > k). */
static double poisson_tail(double mu, gint64 k) {
  double term = exp(-mu), cdf = term;
  for (gint64 i = 1; i <= k; i++) {
    term *= mu / (double)i;
    cdf += term;
  }
  return cdf >= 1 ? 0 : 1 - cdf;
}

/* The rule the Monte-Carlo and the analytic share: a segment's work and
 * its blocking time. */
typedef struct {
  double it, lambda, R_restart, repair, node_share, write, snapshot;
  gboolean async;
  guint64 N, k;
  gint64 spares;
} Rule;

static double segment_blocking(const Rule *u, double work) {
  if (!u->async)
    return u->write;
  return u->snapshot + (u->write > work ? u->write - work : 0); /* the next snapshot waits for the write */
}

/* Exponential draws from GLib's Mersenne Twister: the same seed gives the
 * same run on every machine. */
static double draw_exp(GRand *g, double lambda) { return -log1p(-g_rand_double(g)) / lambda; }

/* One run of the Monte-Carlo: its wall-clock seconds and interruptions. */
static double mc_trial(const Rule *u, GRand *g, double *interruptions) {
  double t = 0, n_int = 0;
  guint64 pos = 0, durable = 0;
  double lag = 0; /* seconds until the checkpoint at pos is on storage (async) */
  gint64 free_spares = u->spares;
  GArray *repairs = g_array_new(FALSE, FALSE, sizeof(double)); /* when each node in repair returns (wall clock) */
  while (pos < u->N) {
    guint64 end = MIN(pos + u->k, u->N);
    double work = (double)(end - pos) * u->it;
    double L = work + segment_blocking(u, work);
    double X = u->lambda > 0 ? draw_exp(g, u->lambda) : INFINITY;
    if (X >= L) {
      t += L;
      if (u->async) {
        durable = pos; /* the previous write finished inside the segment */
        lag = u->write;
      } else
        durable = end;
      pos = end;
      continue;
    }
    t += X;
    n_int++;
    if (u->async && X >= lag)
      durable = pos; /* the previous checkpoint's write had finished */
    pos = durable;
    lag = 0;
    double wait = 0;
    if (g_rand_double(g) < u->node_share && u->spares >= 0) {
      /* a node out: a spare takes its place; none free, the first repaired */
      for (guint i = 0; i < repairs->len;)
        if (g_array_index(repairs, double, i) <= t) {
          g_array_remove_index_fast(repairs, i);
          free_spares++;
        } else
          i++;
      double back = t + u->repair;
      if (free_spares > 0)
        free_spares--;
      else if (repairs->len == 0)
        wait = u->repair; /* no spares at all: the node itself */
      else {
        guint first = 0;
        for (guint i = 1; i < repairs->len; i++)
          if (g_array_index(repairs, double, i) < g_array_index(repairs, double, first))
            first = i;
        wait = g_array_index(repairs, double, first) - t;
        g_array_remove_index_fast(repairs, first); /* that node joins the job */
      }
      if (u->spares == 0)
        back = t; /* the node itself rejoins after the wait */
      else
        g_array_append_val(repairs, back);
    }
    t += u->R_restart + wait;
  }
  if (u->async)
    t += u->write; /* the last checkpoint on storage */
  g_array_free(repairs, TRUE);
  *interruptions = n_int;
  return t;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The q-quantile of sorted v (linear interpolation between order
 * statistics, Hyndman and Fan's type 7). */
static double quantile(const double *v, guint n, double q) {
  double h = (n - 1) * q;
  guint lo = (guint)floor(h);
  guint hi = MIN(lo + 1, n - 1);
  return v[lo] + (h - lo) * (v[hi] - v[lo]);
}

gboolean rt_run(const RtInput *in, const RtOptions *o, RtResult *out, GError **error) {
  memset(out, 0, sizeof *out);
  if (!(o->gpu_rate >= 0 && o->node_rate >= 0 && o->switch_rate >= 0)) {
    g_set_error(error, RT_ERROR, 0, "a failure rate below zero; give failures per hour of 0 or more (e.g. 1.3e-5)");
    return FALSE;
  }
  if (!(in->tokens > 0) || !(in->tokens_per_iteration > 0) || !(in->iteration_s > 0)) {
    g_set_error(error, RT_ERROR, 0, "the whole-run model needs a token budget; give --tokens (e.g. 15T)");
    return FALSE;
  }
  guint gpn = in->gpus_per_node ? in->gpus_per_node : 1;
  out->iterations = (guint64)ceil(in->tokens / in->tokens_per_iteration);
  out->nodes = (in->gpus + gpn - 1) / gpn;
  out->switches = (in->gpus + RT_GPUS_PER_SWITCH - 1) / RT_GPUS_PER_SWITCH;
  double per_hour = in->gpus * o->gpu_rate + out->nodes * o->node_rate + out->switches * o->switch_rate;
  out->failures_per_hour = per_hour;
  out->mtbf_hours = per_hour > 0 ? 1.0 / per_hour : 0;
  out->node_share = per_hour > 0 ? (in->gpus * o->gpu_rate + out->nodes * o->node_rate) / per_hour : 0;
  double lambda = per_hour / 3600.0;
  /* storage: every node writes its part, capped by the storage's aggregate */
  double wbw = MIN(out->nodes * o->storage_node_Bps, o->storage_Bps);
  out->checkpoint_bytes = in->checkpoint_bytes;
  out->write_s = in->checkpoint_bytes / wbw;
  out->read_s = out->write_s;
  double snapshot = in->rank_bytes / o->host_copy_Bps;
  double delta = o->async ? snapshot : out->write_s; /* what one checkpoint blocks, for the optimum */
  double M = lambda > 0 ? 1.0 / lambda : INFINITY;
  out->young_s = lambda > 0 ? rt_young_interval(delta, M) : 0;
  out->daly_s = lambda > 0 ? rt_daly_interval(delta, M) : 0;
  double it = in->iteration_s;
  guint64 k;
  if (o->every.iterations || o->every.seconds > 0) {
    if (o->every.seconds > 0 && o->every.seconds < it) {
      g_set_error(error, RT_ERROR, 0,
                  "--checkpoint-every %gs is shorter than one iteration (%.3g s); give at least one iteration",
                  o->every.seconds, it);
      return FALSE;
    }
    k = o->every.iterations ? o->every.iterations : (guint64)llround(o->every.seconds / it);
    if (k > out->iterations) {
      g_set_error(error, RT_ERROR, 0,
                  "--checkpoint-every is %" G_GUINT64_FORMAT " iterations, longer than the run's %" G_GUINT64_FORMAT
                  "; give a shorter interval",
                  k, out->iterations);
      return FALSE;
    }
    out->every_given = TRUE;
  } else if (lambda > 0)
    k = (guint64)MAX(1.0, llround(out->daly_s / it));
  else
    k = out->iterations; /* no failures: one checkpoint at the end */
  if (k == 0)
    k = 1;
  out->every_iterations = k;
  Rule u = {.it = it,
            .lambda = lambda,
            .R_restart = o->restart_s + out->read_s,
            .repair = o->repair_s,
            .node_share = out->node_share,
            .write = out->write_s,
            .snapshot = snapshot,
            .async = o->async,
            .N = out->iterations,
            .k = k,
            .spares = o->spares};
  /* an interruption's cost: the restart and read; with no spares the node's repair too */
  double R = u.R_restart + (o->spares == 0 ? out->node_share * o->repair_s : 0);
  out->restart_s = R;
  out->exact = !o->async && o->spares <= 0;
  if (o->spares > 0) /* nodes in repair at a time: M/G/inf, Poisson with mean rate x repair */
    out->spares_exhausted_probability = poisson_tail(lambda * out->node_share * o->repair_s, o->spares - 1);

  guint64 full = out->iterations / k, rest = out->iterations % k;
  double work_full = (double)k * it, work_rest = (double)rest * it;
  double L_full = work_full + segment_blocking(&u, work_full);
  double L_rest = rest ? work_rest + segment_blocking(&u, work_rest) : 0;
  /* async: the first-order cost of the write window, lambda x write x (the
   * work at risk, the segment) per segment */
  double R_seg = R + (o->async ? out->write_s : 0);
  double E = (double)full * rt_segment_expected_s(L_full, lambda, R_seg) +
             (rest ? rt_segment_expected_s(L_rest, lambda, R_seg) : 0) + (o->async ? out->write_s : 0);
  double interruptions = lambda > 0 ? (double)full * expm1(lambda * L_full) + (rest ? expm1(lambda * L_rest) : 0) : 0;
  double work = (double)out->iterations * it;
  double blocking = (double)full * (L_full - work_full) + (rest ? L_rest - work_rest : 0);
  out->blocking_s = segment_blocking(&u, work_full);
  out->checkpoints = (double)full + (rest ? 1 : 0);
  out->ideal_days = work / 86400.0;
  out->expected_days = E / 86400.0;
  out->gpu_hours = E / 3600.0 * in->gpus;
  out->effective_training_time = work / E;
  out->interruptions = interruptions;
  out->checkpoint_hours = blocking / 3600.0;
  out->restart_hours = interruptions * R / 3600.0;
  out->lost_work_hours = MAX(0.0, (E - work - blocking - interruptions * R) / 3600.0);

  out->trials = o->trials;
  out->seed = o->seed;
  if (o->trials > 0) {
    /* one generator per trial, seeded from (seed, trial): a trial's draws
     * do not depend on how many the others made */
    double *days = g_new(double, o->trials);
    double sum = 0, sum2 = 0, ints = 0;
    for (guint i = 0; i < o->trials; i++) {
      guint32 s[4] = {(guint32)o->seed, (guint32)(o->seed >> 32), i, 0x72756e74u};
      GRand *g = g_rand_new_with_seed_array(s, 4);
      double n_int;
      days[i] = mc_trial(&u, g, &n_int) / 86400.0;
      g_rand_free(g);
      sum += days[i];
      sum2 += days[i] * days[i];
      ints += n_int;
    }
    double n = o->trials, mean = sum / n;
    double var = n > 1 ? MAX(0.0, (sum2 - n * mean * mean) / (n - 1)) : 0;
    qsort(days, o->trials, sizeof *days, cmp_double);
    out->mc_mean_days = mean;
    out->mc_stderr_days = sqrt(var / n);
    out->mc_median_days = quantile(days, o->trials, 0.5);
    out->mc_p90_days = quantile(days, o->trials, 0.9);
    out->mc_interruptions = ints / n;
    g_free(days);
  }
  return TRUE;
}
