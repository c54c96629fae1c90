/* ptdsim — the periodic steady state of a pipeline schedule, proved on a
 * short run and carried to a long one in closed form.
 *
 * Under 1F1B and interleaved 1F1B every stage repeats the same pattern of
 * items once the pipeline is full, so a run of m microbatches is, in its
 * middle, the same few microbatches over and over.  A builder runs the
 * graph of a shorter iteration (fewer microbatches, the same warm-up and
 * cool-down), names for each op its copy one period later (`next`: the same
 * op of the item one schedule period on, G_MAXUINT where there is none),
 * and asks sim_steady_prove whether the timeline repeats exactly around
 * some time tau.  Windows W-1 = [tau - P, tau), W0 = [tau, tau + P),
 * W1 = [tau + P, tau + 2P), classes by an op's start:
 *
 *   1. every op starting in W-1 or W0 has a copy one period on, on the same
 *      streams, starting and ending exactly P later; as many ops start in
 *      W0 and W1 as in W-1 and W0 (the copies are all of them);
 *   2. every predecessor (dependency or earlier op of a stream) of an op
 *      starting in W0 starts at or after tau - P; an op starting at or
 *      after tau + P with a predecessor from before tau (the last
 *      all-gather of the iteration's start before the first gradient
 *      reduction on a data-parallel stream) starts as another one, from tau
 *      on, ends;
 *   3. the copies of the predecessors of each op starting in W0 are the
 *      predecessors of its copy;
 *   4. every op starting before tau ends by tau + P, every op starting in
 *      W0 by tau + 2P;
 *   5. every op whose end the network decides (a transfer that met another
 *      on the flows) ends by tau - P or starts from tau + 2P on.
 *
 * An op's start is the latest end among its predecessors (the engine's
 * fixed-duration run; by 5 the windows hold no transfer the flows time, and
 * the flow solver works on differences of times, so what it does after
 * them is the same k P later), so by 1-3 and induction over periods, the graph with
 * k more periods (the builder's: the same items with k more microbatch
 * groups, each period's ops the copies of the one before) has the timeline
 * of the short run with W0's ops repeated k more times, P apart, and
 * everything from W1 on k P later.  By 4 the ops in flight at a time t of
 * the long run are those of the short run at t (before tau + P), at
 * t - j P inside W1 (between tau + P and tau + (k + 1) P), or at t - k P:
 * any measure of the timeline that adds up over time (a union of intervals,
 * exposed time by class) is the short run's plus k times its part in W1,
 * and sums over ops are the short run's with W0's ops counted k more times.
 * Anything the proof cannot show -- a period that is not yet steady,
 * transfers that meet on the flows within the windows -- leaves the caller
 * to simulate the whole iteration. */
#pragma once

#include "engine.h"

/* Periods of the schedule a short run has beyond its warm-up, in which
 * the window is sought. */
#define SIM_STEADY_PERIODS 4

typedef struct {
  guint64 k;           /* periods added to the short run (0: the run itself) */
  SimTime tau, period; /* W1 = [tau + period, tau + 2 period) */
  guint64 w0_ops;      /* ops starting in W0: one period's ops */
} SimSteady;

/* Checks conditions 1-5 on a finished run for `tau` and
 * `period`, with next[op] the op's copy one period on (G_MAXUINT: none) and
 * `same_kind` (NULL: always) saying whether an op and its copy do the same
 * work beyond their streams and times (tags, plans).  On success fills
 * `out` with k = 0. */
gboolean sim_steady_prove(const SimEngine *e, const guint *next, SimTime tau, SimTime period,
                          gboolean (*same_kind)(const SimEngine *e, guint op, guint copy, gpointer data),
                          gpointer data, SimSteady *out);

/* Whether op starts in W0 (one period's ops, repeated k more times). */
static inline gboolean sim_steady_in_w0(const SimSteady *st, SimTime start) {
  return st && st->k > 0 && start >= st->tau && start < st->tau + st->period;
}
/* The clip of [a, b) to W1 (empty: lo >= hi). */
void sim_steady_w1(const SimSteady *st, SimTime a, SimTime b, SimTime *lo, SimTime *hi);

/* The sum, added one after another in double precision from 0, of n
 * copies of x: exactly what a loop of n additions gives, in a few steps
 * per binade of the sum. */
double sim_steady_repeat_add(double x, guint64 n);

/* The sum, in the long run, of per-op values added one after another in
 * op order: vals[j], counts[j] times (NULL: once), for op ops[j] of the
 * short run (G_MAXUINT: an op that does not repeat), and W0's ops' values
 * k more times.  Exact where that sum does not depend on the order of the
 * additions (all values equal, or integers whose partial sums stay below
 * 2^53); otherwise returns FALSE.  With k = 0 (or st NULL), the plain sum in
 * order. */
gboolean sim_steady_sum(const SimSteady *st, const SimEngine *e, const guint *ops, const double *vals,
                        const guint *counts, guint n, double *sum);
