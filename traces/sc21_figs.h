/* ptdsim — the SC21 paper's performance figures (Narayanan et al.,
 * "Efficient Large-Scale Language Model Training on GPU Clusters Using
 * Megatron-LM", SC21): Table 2 and figures 6-8 and 10-18, on the
 * configurations of traces/reference/megatron-sc21.json. */
#pragma once

#include "figures.h"

gboolean trace_sc21_table2(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
gboolean trace_sc21_fig6(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
gboolean trace_sc21_fig7(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
gboolean trace_sc21_fig8(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
gboolean trace_sc21_fig10(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
gboolean trace_sc21_fig11(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
gboolean trace_sc21_fig12(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
gboolean trace_sc21_fig13(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
gboolean trace_sc21_fig14(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
gboolean trace_sc21_fig15(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
gboolean trace_sc21_fig16(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
gboolean trace_sc21_fig17(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
gboolean trace_sc21_fig18(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);

/* SC21 equation (1), as figure 8 reads it: the throughput of a pipeline of
 * p stages running a batch of `batch` sequences in microbatches of b, each
 * taking t_microbatch (forward and backward) on one stage:
 * batch / ((batch/b + p - 1) t_microbatch). */
double trace_sc21_eq1(double batch, double b, double p, double t_microbatch);
