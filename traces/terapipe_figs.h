/* ptdsim — the TeraPipe paper's figures (Li et al., ICML 2021): figures 3,
 * 5, 6 and 7 on its ten evaluation settings (traces/reference/
 * terapipe-icml21.json), on the AWS p3.16xlarge cluster by default. */
#pragma once

#include "figures.h"

gboolean trace_terapipe_fig3(const TraceFigureContext *ctx, cJSON *json, GString *text, GError **error);
gboolean trace_terapipe_fig5(const TraceFigureContext *ctx, cJSON *json, GString *text, GError **error);
gboolean trace_terapipe_fig6(const TraceFigureContext *ctx, cJSON *json, GString *text, GError **error);
gboolean trace_terapipe_fig7(const TraceFigureContext *ctx, cJSON *json, GString *text, GError **error);

/* The cluster a figure runs on when none is given: aws-p3-16xlarge for the
 * TeraPipe figures, NULL (the program's default) for the others. */
const char *trace_figure_default_cluster(const char *figure_name);

/* The run request of TeraPipe setting `id` (1..10) with `slices` (auto,
 * uniform:N, ...) and batch slices of `micro_batch` sequences, as TeraPipe's
 * evaluation runs it: the layers workload (or `workload`, "gpt" for the
 * whole training step), no recomputation. */
gboolean trace_terapipe_setting(guint id, const char *slices, guint micro_batch, SimPlanRequest *req,
                                GError **error);
gboolean trace_terapipe_setting_as(guint id, const char *slices, guint micro_batch, const char *workload,
                                   SimPlanRequest *req, GError **error);
