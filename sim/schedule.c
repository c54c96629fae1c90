/* ptdsim — pipeline schedule orders (see schedule.h). */
#include "schedule.h"

static void push(GArray *out, guint chunk, guint mb, gboolean fwd) {
  SimItem it = {mb, (guint16)chunk, (guint8)(fwd ? 1 : 0)};
  g_array_append_val(out, it);
}

/* Megatron-LM's get_model_chunk_id and the microbatch of the k-th pass. */
static guint chunk_of(guint k, guint p, guint v, gboolean forward) {
  guint c = (k % (p * v)) / p;
  return forward ? c : v - 1 - c;
}
static guint microbatch_of(guint k, guint p, guint v) { return (k / (p * v)) * p + k % p; }

void sim_schedule_order(SimSchedule schedule, guint p, guint m, guint v, guint stage, GArray *out) {
  g_array_set_size(out, 0);
  if (schedule == SIM_SCHEDULE_GPIPE) {
    for (guint j = 0; j < m; j++)
      push(out, 0, j, TRUE);
    for (guint j = 0; j < m; j++)
      push(out, 0, j, FALSE);
    return;
  }
  if (schedule == SIM_SCHEDULE_1F1B) {
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
    return;
  }
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
