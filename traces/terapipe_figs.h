/* ptdsim — the TeraPipe paper's figures (Li et al., ICML 2021): figures 3,
 * 5, 6 and 7 on its ten evaluation settings (traces/reference/
 * terapipe-icml21.json), on the AWS p3.16xlarge cluster by default. */
#pragma once

#include "figures.h"

gboolean trace_terapipe_fig3(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
gboolean trace_terapipe_fig5(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
gboolean trace_terapipe_fig6(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
gboolean trace_terapipe_fig7(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);

/* The run request of TeraPipe setting `id` (1..10) with `slices` (auto,
 * uniform:N, ...) and batch slices of `micro_batch` sequences, as TeraPipe's
 * evaluation runs it: the layers workload (or `workload`, "gpt" for the
 * whole training step), no recomputation. */
gboolean trace_terapipe_setting(guint id, const char *slices, guint micro_batch, SimPlanRequest *req,
                                GError **error);
gboolean trace_terapipe_setting_as(guint id, const char *slices, guint micro_batch, const SimWorkload *workload,
                                   SimPlanRequest *req, GError **error);
