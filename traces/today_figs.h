/* ptdsim — figures of today's questions, beside the papers': which of
 * today's machines trains a model soonest (today-machines), and what
 * failures and checkpoints cost a run as the cluster grows
 * (today-runtime). */
#pragma once

#include "figures.h"

/* Llama 3 70B for 15T tokens on 1024 GPUs of each of today's built-in
 * machines, one recipe on all: days and GPU-hours without failures, and
 * with them (runtime/). */
gboolean trace_today_machines(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
/* Llama 3 405B for 15T tokens on 4096 to 32768 GPUs of the figure's cluster
 * (default dgx-h100-superpod), checkpointing every 10 min, 30 min, 2 h and
 * at Daly's optimum: days to train and effective training time. */
gboolean trace_today_runtime(TraceFigureContext *ctx, TraceFigureOut *out, GError **error);
