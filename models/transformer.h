/* ptdsim — GPT transformer shapes, parameter and FLOP counts.
 *
 * Formulas from Narayanan et al., SC21, section 5.1 and appendix:
 *   parameters  P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h))              (Eq. 2)
 *   model FLOPs F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h))                (Eq. 3)
 * F counts forward, backward (2x forward) and one recomputation forward of
 * every transformer layer, and forward + backward of the logit layer.
 */
#pragma once

#include <glib.h>

typedef struct {
  guint layers;  /* l */
  guint hidden;  /* h */
  guint heads;   /* a */
  guint seq_len; /* s */
  guint vocab;   /* V */
} ModelShape;

/* Eq. 2, as an exact integer: 12 l h^2 + 13 l h + (V + s) h. */
guint64 model_param_count(const ModelShape *m);
/* Eq. 3 for a global batch of B sequences, in FLOPs. */
double model_flops_per_iteration(const ModelShape *m, guint64 global_batch);
/* FLOPs actually executed: Eq. 3 without the recomputation forward when
 * recomputation is off. */
double model_hardware_flops_per_iteration(const ModelShape *m, guint64 global_batch, gboolean recompute);
/* Forward FLOPs of one transformer layer for b sequences (all GEMMs):
 * 24 b s h^2 + 4 b s^2 h. */
double model_layer_forward_flops(const ModelShape *m, guint b);

/* Parameters of one transformer layer (weights and biases of QKV, projection,
 * two MLP GEMMs and two layernorms): 12 h^2 + 13 h. */
guint64 model_layer_param_count(const ModelShape *m);

/* Built-in model names (gpt3-1b ... megatron-1t); NULL-terminated list. */
const char *const *model_names(void);
gboolean model_lookup(const char *name, ModelShape *out);
