/* ptdsim — a pipeline layout as Megatron-Core writes it
 * (--pipeline-model-parallel-layout; megatron/core/transformer/
 * pipeline_parallel_layer_layout.py): the pieces of the model in the order
 * a microbatch meets them, one per virtual stage, separated by '|'; each a
 * string of E (the embedding), t (a transformer layer), m (a multi-token
 * prediction module) and L (the loss); commas are cosmetic; (...)*N and x*N
 * repeat.  "Et*3|(tt|)*29,m|L" is DeepSeek-V3's 61 layers and its MTP
 * module on 16 stages of two virtual stages each.
 *
 * Megatron-Core places list entry k on pipeline rank k mod p, virtual stage
 * k / p (a loop); ptdsim places it where the schedule puts the k-th virtual
 * stage of a microbatch's route (the same for Megatron's schedules; the V of
 * zb-v and dualpipev; for DualPipe, whose two directions each pass the p
 * pieces, rank s holds piece s and piece p - 1 - s). */
#pragma once

#include <glib.h>

typedef struct {
  guint n;        /* the virtual stages listed */
  guint *t;       /* transformer layers of each */
  guint *mtp;     /* MTP modules of each */
  guint mtp_vs;   /* the virtual stage holding the MTP modules (G_MAXUINT: none) */
  guint layers;   /* the transformer layers in all */
  guint mtps;     /* the MTP modules in all */
  char *text;     /* as given */
} SimLayout;

/* The most layers (E, t, m and L together) a layout may unroll to. */
#define SIM_LAYOUT_MAX_ITEMS 100000

/* The layout written in `text`, parsed as Megatron-Core parses it (commas
 * removed, (...)*N then x*N unrolled once each, split at '|') and checked
 * by its rules that need no model or pipeline: one E and it first, one L and
 * it last, the MTP modules after every transformer layer and all in one
 * virtual stage; and ptdsim's: the embedding in the first virtual stage and
 * the loss in the last (Megatron-Core also takes empty virtual stages
 * before the embedding's or after the loss's, which run nothing).  The result is kept for the process (the same text gives
 * the same pointer).  NULL with a one-line error naming the rule. */
const SimLayout *sim_layout_parse(const char *text, GError **error);
/* The layout for `n` virtual stages holding t[k] transformer layers each,
 * the embedding in the first, the loss and `mtp` MTP modules in the last,
 * written compactly ("Et*3|(t*4|)*30,t*3L"); g_free it. */
char *sim_layout_write(const guint *t, guint n, guint mtp);
