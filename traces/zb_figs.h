/* ptdsim — the zero-bubble paper's bubble rates (zb-bubbles): its
 * schedules run on the F, B, W and communication times it profiled. */
#pragma once

#include "figures.h"

/* Each row of traces/reference/zero-bubble.json's two tables run with
 * --stage-times under its schedules (1F1B, ZB-H1, ZB-H2, ZB-1P, ZB-2P; then
 * 1F1B, interleaved 1F1B, ZB-H1, ZB-H2, ZB-V), no recomputation, t = d = 1:
 * the simulated bubble rates beside the published ones, the largest
 * difference. */
gboolean trace_zb_bubbles(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
