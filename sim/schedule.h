/* ptdsim — pipeline schedules: the order in which one pipeline stage runs
 * its forward and backward passes.  Schedules decide order only; cost comes
 * from models/, time from the engine.
 *
 *  GPipe (Huang et al. 2019): all m forwards, then all m backwards.
 *  1F1B / PipeDream-Flush (Narayanan et al. 2021, SC21 section 2.2.1):
 *    stage s runs p-s-1 warm-up forwards, then alternates one forward and
 *    one backward, then drains the remaining backwards.
 *  Interleaved 1F1B (SC21 section 2.2.2): v model chunks per stage; the
 *    order of Megatron-LM's forward_backward_pipelining_with_interleaving:
 *    (p-s-1)*2 + (v-1)*p warm-up forwards (all of them when m == p), chunk
 *    of the k-th forward (k mod pv) / p, of the k-th backward v-1 minus that,
 *    microbatch (k / pv) * p + k mod p.
 */
#pragma once

#include <glib.h>

#include "plan.h"

typedef struct {
  guint32 microbatch;
  guint16 chunk;
  guint8 forward;
} SimItem;

/* Fills `out` (an array of SimItem) with stage `stage`'s order. */
void sim_schedule_order(SimSchedule schedule, guint p, guint m, guint v, guint stage, GArray *out);
