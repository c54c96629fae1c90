/* ptdsim — pipeline schedule diagrams: a simulated timeline drawn as the
 * papers draw their schedules, one row per device, one box per pass of a
 * microbatch (or token slice).
 *
 *  - megatron-fig3: GPipe (Narayanan et al., SC21, figure 3);
 *  - megatron-fig4: 1F1B above interleaved 1F1B with two model chunks per
 *    device, on one time axis (SC21, figure 4);
 *  - terapipe-schedule: TeraPipe's token-level pipeline of one sequence
 *    (Li et al., ICML 2021);
 *  - schedules: 1F1B, ZB-H1, ZB-H2, ZB-V, DualPipeV and DualPipe with F, B
 *    and W apart (Qi et al., ICLR 2024; DeepSeek-V3).
 *
 * The boxes are read off the run's trace events (trace_figure_run_events),
 * so that --from-traces redraws the same picture from saved traces. */
#pragma once

#include "figures.h"

gboolean trace_megatron_fig3(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
gboolean trace_megatron_fig4(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
gboolean trace_schedules_figure(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
gboolean trace_terapipe_schedule(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
