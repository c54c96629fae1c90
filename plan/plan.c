/* ptdsim — a plan's data: its pipeline split, stragglers, device choices
 * and rates (see plan.h). */
#include "plan.h"
#include "route.h"

#include <math.h>
#include <string.h>

#include "../base/text.h"
#include "../base/units.h"

G_DEFINE_QUARK(sim-plan-error-quark, sim_plan_error)

/* The options' words, in the order their help and messages list them. */
const PtdWord sim_ddp_words[] = {{"local", SIM_DDP_LOCAL}, {"torch", SIM_DDP_TORCH}, {NULL, 0}};
const PtdWord sim_recompute_words[] = {{"full", MODEL_RECOMPUTE_FULL},
                                       {"selective", MODEL_RECOMPUTE_SELECTIVE},
                                       {"none", MODEL_RECOMPUTE_NONE},
                                       {"op", MODEL_RECOMPUTE_OP},
                                       {"layer", MODEL_RECOMPUTE_LAYER},
                                       {"modules", MODEL_RECOMPUTE_MODULES},
                                       {NULL, 0}};
const PtdWord sim_network_words[] = {{"flow", SIM_NETWORK_FLOW}, {"analytic", SIM_NETWORK_ANALYTIC}, {NULL, 0}};
const PtdWord sim_placement_words[] = {{"tp-dp-pp", SIM_PLACEMENT_TP_DP_PP},
                                       {"dp-outermost", SIM_PLACEMENT_DP_OUTERMOST},
                                       {"misaligned", SIM_PLACEMENT_MISALIGNED},
                                       {NULL, 0}};
const PtdWord sim_workload_words[] = {{"gpt", SIM_WORKLOAD_GPT}, {"layers", SIM_WORKLOAD_LAYERS}, {NULL, 0}};
const PtdWord sim_reduce_dtype_words[] = {{"fp32", SIM_REDUCE_FP32}, {"bf16", SIM_REDUCE_BF16}, {NULL, 0}};
const PtdWord sim_reshard_words[] = {{"default", SIM_RESHARD_DEFAULT},
                                     {"always", SIM_RESHARD_ALWAYS},
                                     {"never", SIM_RESHARD_NEVER},
                                     {NULL, 0}};
const PtdWord sim_attention_words[] = {{"flash", MODEL_ATTENTION_FLASH},
                                       {"fused", MODEL_ATTENTION_FUSED},
                                       {"unfused", MODEL_ATTENTION_UNFUSED},
                                       {NULL, 0}};
const PtdWord sim_framework_words[] = {{"megatron", MODEL_FRAMEWORK_MEGATRON}, {"eager", MODEL_FRAMEWORK_EAGER}, {NULL, 0}};
const PtdWord sim_clock_words[] = {{"sustained", SIM_CLOCK_SUSTAINED}, {"burst", SIM_CLOCK_BURST}, {NULL, 0}};
const PtdWord sim_precision_words[] = {{"fp16", MODEL_PRECISION_FP16},
                                       {"bf16", MODEL_PRECISION_BF16},
                                       {"fp8", MODEL_PRECISION_FP8},
                                       {NULL, 0}};
const PtdWord sim_dispatcher_words[] = {{"alltoall", SIM_DISPATCH_ALLTOALL},
                                        {"allgather", SIM_DISPATCH_ALLGATHER},
                                        {"deepep", SIM_DISPATCH_DEEPEP},
                                        {NULL, 0}};

#define FAIL(...)                                                                                                      \
  do {                                                                                                                 \
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, __VA_ARGS__);                                           \
    return FALSE;                                                                                                      \
  } while (0)

static void ends_words(const SimSplit *sp, char *buf, gsize len) {
  if (sp->first && sp->last)
    g_snprintf(buf, len, "--first-stage-layers %u and --last-stage-layers %u", sp->first, sp->last);
  else if (sp->first)
    g_snprintf(buf, len, "--first-stage-layers %u", sp->first);
  else
    g_snprintf(buf, len, "--last-stage-layers %u", sp->last);
}

char *sim_split_options(const SimSplit *sp) {
  GString *s = g_string_new(NULL);
  if (sp->first)
    g_string_append_printf(s, "--first-stage-layers %u", sp->first);
  if (sp->last)
    g_string_append_printf(s, "%s--last-stage-layers %u", s->len ? " " : "", sp->last);
  if (sp->embedding)
    g_string_append_printf(s, "%s--account-for-embedding", s->len ? " " : "");
  if (sp->loss)
    g_string_append_printf(s, "%s--account-for-loss", s->len ? " " : "");
  return g_string_free(s, FALSE);
}

/* ", e.g. --account-for-embedding --account-for-loss (15 layers on the
 * first and last stage, 16 on the others)": the first uneven split that
 * fits `layers` on p stages, or "" where there is none. */
static void split_example(guint layers, guint p, char *buf, gsize len) {
  SimSplit c;
  guint f, mid, l;
  buf[0] = '\0';
  if (sim_split_candidates(layers, p, &c, 1) == 0 || !sim_split_layers(&c, layers, p, 1, &f, &mid, &l, NULL))
    return;
  f -= c.embedding;
  l -= c.loss;
  char *opts = sim_split_options(&c);
  if (p == 2)
    g_snprintf(buf, len, ", e.g. %s (%u layers on the first stage, %u on the last)", opts, f, l);
  else if (f == l)
    g_snprintf(buf, len, ", e.g. %s (%u layers on the first and last stage, %u on the others)", opts, f, mid);
  else
    g_snprintf(buf, len, ", e.g. %s (%u layers on the first stage, %u on the last, %u on the others)", opts, f, l,
               mid);
  g_free(opts);
}

gboolean sim_split_layers(const SimSplit *sp, guint layers, guint p, guint v, guint *first, guint *mid,
                          guint *last, GError **error) {
  gboolean ends = sp->first || sp->last, extra = sp->embedding || sp->loss;
  char eg[160];
  if (!ends && !extra) {
    if (layers % p) {
      split_example(layers, p, eg, sizeof eg);
      FAIL("--layers %u do not divide into --pp %u stages; use a pipeline size that divides the layer count, or "
           "split it unevenly with --first-stage-layers/--last-stage-layers or --account-for-embedding/"
           "--account-for-loss%s",
           layers, p, eg);
    }
    *first = *mid = *last = layers / p;
    if ((layers / p) % v)
      FAIL("--chunks %u does not divide the %u layers of each stage; pick a divisor", v, layers / p);
    return TRUE;
  }
  if (p < 2)
    FAIL("%s shape the end stages of a pipeline; use them with --pp 2 or more",
         ends ? "--first-stage-layers/--last-stage-layers" : "--account-for-embedding/--account-for-loss");
  /* Megatron-Core refuses the two together (TransformerConfig) */
  if (ends && extra)
    FAIL("give the end stages' layers (--first-stage-layers, --last-stage-layers) or count the embedding and the "
         "loss as layers (--account-for-embedding, --account-for-loss), not both, as Megatron requires");
  if (ends) {
    /* transformer_config.py: each end stage given holds that many layers,
     * the rest divide evenly over the stages left (a multiple of v each,
     * as do the ends); none left only where no stage is left */
    char given[96];
    ends_words(sp, given, sizeof given);
    if (sp->first > layers || sp->last > layers)
      FAIL("%s: more than the model's %u layers; give end stages that leave the others at least one layer each",
           given, layers);
    guint mids = p - (sp->first ? 1 : 0) - (sp->last ? 1 : 0);
    gint64 rest = (gint64)layers - sp->first - sp->last;
    if (mids == 0 && rest != 0)
      FAIL("%s make %" G_GINT64_FORMAT " layers, not the model's %u: with --pp 2 and both end stages given there is "
           "no middle stage, so they must add up to %u",
           given, (gint64)sp->first + sp->last, layers, layers);
    if (mids > 0 && rest < (gint64)mids)
      FAIL("%u layers with %s leave %" G_GINT64_FORMAT " for %u %s: fewer than one each; give the end stages fewer "
           "layers",
           layers, given, MAX(rest, 0), mids, mids == 1 ? "middle stage" : "middle stages");
    if (mids > 0 && rest % mids) {
      /* the nearest fix: the end stages take the remainder */
      guint r = (guint)(rest % mids);
      SimSplit fix = *sp;
      if (sp->first && sp->last) {
        fix.first += r / 2;
        fix.last += r - r / 2;
      } else if (sp->first)
        fix.first += r;
      else
        fix.last += r;
      char *opts = sim_split_options(&fix);
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                  "%u layers with %s leave %" G_GINT64_FORMAT " for %u middle stages: not a whole number; give end "
                  "stages that leave a multiple of %u, e.g. %s (%" G_GINT64_FORMAT " on each middle stage)",
                  layers, given, rest, mids, mids, opts, (rest - r) / mids);
      g_free(opts);
      return FALSE;
    }
    guint share = mids ? (guint)(rest / mids) : 0;
    *first = sp->first ? sp->first : share;
    *last = sp->last ? sp->last : share;
    *mid = share;
    if (v > 1) {
      if (sp->first % v || sp->last % v)
        FAIL("--chunks %u does not divide %s; give end stages whose layers are multiples of the chunks", v, given);
      if (share % v)
        FAIL("--chunks %u does not divide the %u layers of each middle stage that %s leave; pick a divisor, or other "
             "end stages",
             v, share, given);
    }
    return TRUE;
  }
  /* transformer_block.py: the embedding (the loss) counts as one layer of
   * the split, (layers + extras) / p per stage, v chunks each, and the
   * first (last) virtual stage builds one transformer layer fewer */
  const char *what = sp->embedding && sp->loss ? "the embedding and the loss counted as a layer each"
                     : sp->embedding             ? "the embedding counted as a layer"
                                                 : "the loss counted as a layer";
  guint total = layers + (sp->embedding ? 1 : 0) + (sp->loss ? 1 : 0);
  if (total % p) {
    split_example(layers, p, eg, sizeof eg);
    if (layers % p == 0)
      g_snprintf(eg, sizeof eg, ", or drop %s: %u layers divide evenly into %u stages",
                 sp->embedding && sp->loss ? "--account-for-embedding and --account-for-loss"
                 : sp->embedding          ? "--account-for-embedding"
                                          : "--account-for-loss",
                 layers, p);
    FAIL("%u layers with %s make %u, which do not divide into --pp %u stages; use a pipeline size that divides %u%s%s",
         layers, what, total, p, total, *eg && layers % p ? " or another split" : "", eg);
  }
  guint n = total / p;
  if (n % v)
    FAIL("--chunks %u does not divide the %u layers of each stage (%s); pick a divisor", v, n, what);
  /* n / v == 1: the first (last) chunk holds the embedding (the loss)
   * alone, as Megatron-Core builds it */
  *first = *mid = *last = n;
  return TRUE;
}

guint sim_split_candidates(guint layers, guint p, SimSplit *out, guint max) {
  if (p < 2 || layers < p)
    return 0;
  SimSplit c[5];
  guint nc = 0;
  if ((layers + 2) % p == 0)
    c[nc++] = (SimSplit){0, 0, TRUE, TRUE};
  if ((layers + 1) % p == 0) {
    c[nc++] = (SimSplit){0, 0, TRUE, FALSE};
    c[nc++] = (SimSplit){0, 0, FALSE, TRUE};
  }
  /* the middle stages hold ceil(layers / p), the end stages share the rest
   * (the lighter one first) */
  guint share = (layers + p - 1) / p;
  guint64 mids = (guint64)(p - 2) * share;
  if (mids + 2 <= layers) {
    guint r = (guint)(layers - mids);
    c[nc++] = (SimSplit){r / 2, r - r / 2, FALSE, FALSE};
    if (r % 2)
      c[nc++] = (SimSplit){r - r / 2, r / 2, FALSE, FALSE};
  }
  guint n = 0, seen[6][3];
  if (layers % p == 0) { /* the even split is no candidate */
    seen[0][0] = seen[0][1] = seen[0][2] = layers / p;
    n = 1;
  }
  guint kept = 0;
  for (guint i = 0; i < nc && kept < max; i++) {
    guint f, mid, l;
    if (!sim_split_layers(&c[i], layers, p, 1, &f, &mid, &l, NULL))
      continue;
    guint lay[3] = {f - c[i].embedding, mid, l - c[i].loss};
    if (!lay[0] || !lay[2]) /* a stage of the embedding or the loss alone: no candidate of the planner's */
      continue;
    if (p == 2)
      lay[1] = 0; /* no middle stage */
    gboolean dup = FALSE;
    for (guint j = 0; j < n && !dup; j++)
      dup = seen[j][0] == lay[0] && (p == 2 || seen[j][1] == lay[1]) && seen[j][2] == lay[2];
    if (dup)
      continue;
    memcpy(seen[n++], lay, sizeof lay);
    out[kept++] = c[i];
  }
  return kept;
}

guint sim_plan_chunk_vstage(const SimPlan *pl, guint s, guint c) {
  const SimScheduleInfo *row = sim_schedule_info(pl->schedule);
  if (row->copies) /* DualPipe: stage s of one direction, p-1-s of the other */
    return c == 0 ? s : pl->pp - 1 - s;
  return sim_plan_vstage(pl, s, c, 0);
}

guint sim_plan_mtp_vstage(const SimPlan *pl) {
  return pl->layout && pl->layout->mtps ? pl->layout->mtp_vs : sim_plan_route_len(pl) - 1;
}

double sim_cost_per_million_tokens(double price, guint gpus, double tokens_per_s) {
  return price * gpus / 3600.0 / tokens_per_s * 1e6;
}

guint sim_plan_chunk_mtp(const SimPlan *pl, guint s, guint c) {
  return pl->model.mtp && model_is_moe(&pl->model) && sim_plan_chunk_vstage(pl, s, c) == sim_plan_mtp_vstage(pl)
             ? pl->model.mtp
             : 0;
}

char *sim_plan_layout_text(const SimPlan *pl) {
  if (pl->layout)
    return g_strdup(pl->layout->text);
  guint n = sim_plan_route_len(pl);
  guint *t = g_new(guint, n);
  for (guint vs = 0; vs < n; vs++) {
    guint s, c;
    sim_plan_place(pl, vs, 0, &s, &c);
    t[vs] = sim_plan_chunk_layers(pl, s, c);
  }
  char *text = sim_layout_write(t, n, pl->model.mtp);
  g_free(t);
  return text;
}

guint sim_plan_chunk_layers(const SimPlan *pl, guint s, guint c) {
  if (pl->layout)
    return pl->layout->t[sim_plan_chunk_vstage(pl, s, c)];
  /* DualPipe: each chunk is a whole stage (s of one direction, p-1-s of the other) */
  const SimScheduleInfo *row = sim_schedule_info(pl->schedule);
  guint v = row->copies ? 1 : pl->chunks ? pl->chunks : 1;
  if (!pl->split_mid && !pl->split_first) /* a plan filled without a split: even */
    return pl->model.layers / (pl->pp * v);
  if (row->chunks == SIM_CHUNKS_TWO && !row->copies && (pl->split_embedding || pl->split_loss)) {
    /* the V: the embedding's chunk (virtual stage 0) and the loss's (virtual
     * stage 2p-1) are both on stage 0, each a layer short (sail-sg's
     * --allow-padding-num-layers with the V) */
    guint n = pl->split_mid / 2;
    if (s == 0 && c == 0 && pl->split_embedding)
      n--;
    if (s == 0 && c == 1 && pl->split_loss)
      n--;
    return n;
  }
  guint stage = s == 0 ? pl->split_first : s == pl->pp - 1 ? pl->split_last : pl->split_mid;
  guint n = stage / v;
  if (pl->split_embedding && s == 0 && c == 0)
    n--;
  if (pl->split_loss && s == pl->pp - 1 && c == v - 1)
    n--;
  return n;
}

guint sim_plan_chunk_first_layer(const SimPlan *pl, guint s, guint c) {
  /* the layers of the virtual stages a microbatch passes before this one
   * (Megatron-Core's layer numbering: with interleaving, chunk c of stage s
   * is virtual stage c p + s) */
  guint vs = sim_plan_chunk_vstage(pl, s, c), first = 0;
  for (guint k = 0; k < vs; k++) {
    guint ks, kc;
    sim_plan_place(pl, k, 0, &ks, &kc);
    first += sim_plan_chunk_layers(pl, ks, kc);
  }
  return first;
}

guint sim_plan_stage_layers(const SimPlan *pl, guint s) {
  guint n = 0, v = pl->chunks ? pl->chunks : 1;
  for (guint c = 0; c < v; c++)
    n += sim_plan_chunk_layers(pl, s, c);
  return n;
}

guint sim_plan_chunk_offset(const SimPlan *pl, guint s, guint c) {
  guint n = 0;
  for (guint j = 0; j < c; j++)
    n += sim_plan_chunk_layers(pl, s, j);
  return n;
}

gboolean sim_plan_uneven(const SimPlan *pl) {
  guint v = pl->chunks ? pl->chunks : 1, l0 = sim_plan_chunk_layers(pl, 0, 0);
  for (guint s = 0; s < pl->pp; s++)
    for (guint c = 0; c < v; c++)
      if (sim_plan_chunk_layers(pl, s, c) != l0)
        return TRUE;
  return FALSE;
}

guint sim_place(const TopoCluster *cluster, guint group, guint g) {
  guint D = cluster->gpus_per_node;
  if (group <= 1 || group > D || D % group == 0)
    return g;
  guint per = D / group, q = g / group;
  return (q / per) * D + (q % per) * group + g % group;
}

/* One "WHO=F" entry: RANK=F, node:N=F or stage:S=F (GPUs), node:N=F or
 * rail:R=F (links); the index in decimal digits, F a decimal number. */
gboolean sim_plan_has_stragglers(const SimPlan *plan) {
  const SimStragglers *st = &plan->stragglers;
  return st->n_gpu > 0 || st->n_link > 0 || st->sigma > 0;
}

/* SplitMix64 (Steele, Lea and Flood, OOPSLA 2014): a well-mixed 64-bit
 * hash, so that GPU g's draw depends only on (seed, g). */
static guint64 splitmix64(guint64 x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double sim_plan_gpu_speed(const SimPlan *plan, guint gpu, guint stage, guint gpus_per_node) {
  const SimStragglers *st = &plan->stragglers;
  double f = 1;
  for (guint i = 0; i < st->n_gpu; i++) {
    const SimSlow *e = &st->gpu[i];
    guint at = e->kind == SIM_SLOW_RANK ? gpu : e->kind == SIM_SLOW_NODE ? gpu / MAX(gpus_per_node, 1u) : stage;
    if (at == e->index)
      f = MIN(f, e->factor);
  }
  if (st->sigma > 0) { /* Box-Muller on two uniforms in (0, 1] */
    guint64 h1 = splitmix64(st->seed * 0x100000001b3ull ^ (2ull * gpu)), h2 = splitmix64(h1 ^ (2ull * gpu + 1));
    double u1 = ((double)(h1 >> 11) + 1) / 9007199254740992.0, u2 = (double)(h2 >> 11) / 9007199254740992.0;
    double z = sqrt(-2 * log(u1)) * cos(2 * G_PI * u2);
    f = MIN(f, MIN(1.0, exp(st->sigma * z)));
  }
  return f;
}

guint sim_plan_stage_of_gpu(const SimPlan *plan, guint gpu, guint gpus_per_node) {
  guint tc = plan->tp * sim_plan_cp(plan);
  switch (plan->placement) {
  case SIM_PLACEMENT_DP_OUTERMOST:
    return (gpu / tc) % plan->pp;
  case SIM_PLACEMENT_MISALIGNED:
    return ((gpu + plan->gpus - (gpus_per_node / 2) % plan->gpus) % plan->gpus) / (tc * plan->dp);
  default:
    return gpu / (tc * plan->dp);
  }
}

double sim_plan_nic_factor(const SimPlan *plan, guint node, guint rail) {
  const SimStragglers *st = &plan->stragglers;
  double f = 1;
  for (guint i = 0; i < st->n_link; i++) {
    const SimSlow *e = &st->link[i];
    if ((e->kind == SIM_SLOW_NODE && e->index == node) || (e->kind == SIM_SLOW_RAIL && e->index == rail))
      f = MIN(f, e->factor);
  }
  return f;
}

ModelAttention sim_plan_attention(const SimPlan *pl, const ModelProfile *profile) {
  if (pl->attention_given)
    return pl->attention;
  return profile->flash_default ? MODEL_ATTENTION_FLASH : MODEL_ATTENTION_FUSED;
}

const char *sim_precision_name(ModelPrecision p) {
  return p == MODEL_PRECISION_FP8 ? "fp8" : p == MODEL_PRECISION_BF16 ? "bf16" : "fp16";
}

ModelPrecision sim_plan_precision(const SimPlan *pl, const ModelProfile *profile) {
  if (pl->precision_given || profile->n_precisions == 0)
    return pl->precision_given ? pl->precision : MODEL_PRECISION_FP16;
  const char *first = profile->precisions[0];
  return strcmp(first, "fp8") == 0 ? MODEL_PRECISION_FP8 : strcmp(first, "bf16") == 0 ? MODEL_PRECISION_BF16
                                                                                        : MODEL_PRECISION_FP16;
}

double sim_plan_peak_flops(const SimPlan *pl, const ModelProfile *profile) {
  return sim_plan_precision(pl, profile) == MODEL_PRECISION_FP8 ? profile->peak_fp8_flops : profile->peak_flops;
}

const char *sim_plan_attention_ran(const SimPlan *pl, const ModelProfile *profile) {
  if (pl->schedule == SIM_SCHEDULE_TERAPIPE)
    return pl->fusion ? "fused" : "unfused";
  ModelLayerOptions lo = sim_plan_layer_options(pl, profile);
  if (lo.attention == MODEL_ATTENTION_FLASH)
    return "flash";
  return model_softmax_fp32(&pl->model, pl->tp, pl->micro_batch, &lo) ? "unfused" : "fused";
}

ModelLayerOptions sim_plan_layer_options(const SimPlan *pl, const ModelProfile *profile) {
  return (ModelLayerOptions){.fused = pl->fusion, .sequence_parallel = pl->sequence_parallel,
                             .attention = sim_plan_attention(pl, profile),
                             .fp8 = sim_plan_precision(pl, profile) == MODEL_PRECISION_FP8, .cp = sim_plan_cp(pl),
                             .framework = pl->framework, .host_op_s = pl->host_op_s,
                             .free_membound = pl->free_membound};
}

double sim_plan_contention(const SimPlan *pl, const ModelProfile *profile, const TopoCluster *cluster, guint tp,
                           guint group, gboolean tp_overlap) {
  const TopoNet *net = &cluster->net;
  /* NCCL's all-to-all beside the compute: paired passes (the combined
   * 1F1B, DualPipe's F&B); DeepEP's own kernels are priced apart
   * (plan/moe.h sim_moe_deepep_contention) */
  gboolean a2a = pl->ep > 1 && pl->moe_dispatcher != SIM_DISPATCH_DEEPEP &&
                 (pl->moe_a2a_overlap || sim_schedule_info(pl->schedule)->paired);
  if (pl->no_contention || net->collective_channels == 0 || (group <= 1 && !tp_overlap && !a2a))
    return 1;
  double rate = tp_overlap ? net->nvlink_busbw : 0;
  if (a2a) /* the all-to-all over the expert-parallel ranks, folded tp-fastest */
    rate = MAX(rate, (guint64)pl->etp * pl->ep <= cluster->gpus_per_node
                         ? net->nvlink_busbw
                         : net->nic_bw * net->nics_per_node / net->gpus_per_node);
  if (group > 1)
    rate = MAX(rate, (guint64)tp * group <= cluster->gpus_per_node
                         ? net->nvlink_busbw
                         : net->nic_bw * net->nics_per_node / net->gpus_per_node);
  double sms_per_channel, hbm_bytes_per_byte;
  model_profile_overlap(profile, &sms_per_channel, &hbm_bytes_per_byte);
  return sim_plan_contention_at(pl, profile, tp, sms_per_channel * net->collective_channels, rate);
}

double sim_plan_contention_at(const SimPlan *pl, const ModelProfile *profile, guint tp, double sms, double rate) {
  double sms_per_channel, hbm_bytes_per_byte;
  model_profile_overlap(profile, &sms_per_channel, &hbm_bytes_per_byte);
  ModelLayerOptions lo = sim_plan_layer_options(pl, profile);
  return model_layer_contention(profile, &pl->model, tp, pl->micro_batch, &lo, sms,
                                hbm_bytes_per_byte * rate / (profile->hbm_bytes_per_s * profile->memory_efficiency));
}

gboolean sim_plan_check_device(const SimPlan *pl, const ModelProfile *profile, GError **error) {
  const char *want = sim_precision_name(sim_plan_precision(pl, profile));
  if (profile->kind == MODEL_PROFILE_ANALYTIC && !model_profile_supports(profile, want)) {
    GString *has = g_string_new(NULL);
    for (guint i = 0; i < profile->n_precisions; i++)
      g_string_append_printf(has, "%s%s", i ? ", " : "", profile->precisions[i]);
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--precision %s is not a precision of %s's tensor cores (it runs %s); use one of those", want,
                profile->name, has->str);
    g_string_free(has, TRUE);
    return FALSE;
  }
  if (sim_plan_attention(pl, profile) == MODEL_ATTENTION_FLASH && profile->kind == MODEL_PROFILE_ANALYTIC &&
      !(profile->flash_forward_efficiency > 0 && profile->flash_backward_efficiency > 0)) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--attention flash needs FlashAttention-2's figures for %s (its profile has no "
                "attention.flash_forward_efficiency and attention.flash_backward_efficiency); use --attention fused or "
                "unfused, or add them to the profile",
                profile->name);
    return FALSE;
  }
  if (pl->cp > 1 && sim_plan_attention(pl, profile) != MODEL_ATTENTION_FLASH) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--cp %u runs ring attention on FlashAttention's kernels, and this run's attention is %s; add "
                "--attention flash",
                pl->cp, sim_plan_attention_ran(pl, profile));
    return FALSE;
  }
  return TRUE;
}

double sim_plan_usable_bytes(const SimPlan *pl, const ModelProfile *profile) {
  return profile->memory_bytes - pl->memory_reserve_bytes;
}

guint sim_plan_checkpointed_layers(const SimPlan *pl) {
  guint n = 0;
  for (guint s = 0; pl->ac == MODEL_RECOMPUTE_LAYER && pl->recompute_every && s < pl->pp; s++)
    n += sim_plan_stage_layers(pl, s) / pl->recompute_every;
  return n;
}

ModelRecompute sim_plan_recompute(const SimPlan *pl) {
  if (pl->ac != MODEL_RECOMPUTE_NONE)
    return pl->ac;
  return pl->recompute ? MODEL_RECOMPUTE_FULL : pl->selective ? MODEL_RECOMPUTE_SELECTIVE : MODEL_RECOMPUTE_NONE;
}

const char *sim_recompute_name(const SimPlan *pl) {
  if (pl->ac != MODEL_RECOMPUTE_NONE)
    return ptd_word_of(sim_recompute_words, (int)pl->ac);
  return pl->recompute ? "full" : pl->selective ? "selective" : "none";
}

gboolean sim_plan_is_sc21_reproduction(const SimPlan *pl, const ModelProfile *profile) {
  gboolean sc21_schedule = pl->zero || sim_schedule_info(pl->schedule)->megatron_2021;
  return model_is_gpt(&pl->model) && pl->workload == SIM_WORKLOAD_GPT && sc21_schedule && !pl->stage_times &&
         sim_plan_recompute(pl) != MODEL_RECOMPUTE_SELECTIVE && sim_plan_precision(pl, profile) != MODEL_PRECISION_FP8 &&
         sim_plan_attention(pl, profile) != MODEL_ATTENTION_FLASH && !pl->sequence_parallel &&
         !pl->distributed_optimizer && sim_plan_cp(pl) == 1 && !pl->tp_comm_overlap && !pl->overlap_param_gather;
}

void sim_plan_rates(const SimPlan *pl, const ModelProfile *profile, SimResult *r) {
  ModelShape counted = pl->model;
  if (pl->workload == SIM_WORKLOAD_LAYERS)
    counted.vocab = 0; /* no logit layer */
  double per_gpu = r->iteration_time_s * pl->gpus * 1e12;
  double F = model_flops_per_iteration(&counted, pl->global_batch);
  double Fhw = model_hardware_flops_per_iteration(&counted, pl->global_batch, sim_plan_recompute(pl)) +
               model_policy_recompute_flops(&counted, pl->global_batch, pl->ac, pl->recompute_modules,
                                            sim_plan_checkpointed_layers(pl));
  double Fmodel = model_model_flops_per_iteration(&counted, pl->global_batch);
  r->tflops_per_gpu = F / r->iteration_time_s / pl->gpus / 1e12;
  r->hardware_tflops_per_gpu = Fhw / r->iteration_time_s / pl->gpus / 1e12;
  double peak = sim_plan_peak_flops(pl, profile);
  r->percent_of_peak = 100.0 * r->tflops_per_gpu * 1e12 / profile->peak_flops;
  r->mfu_percent = 100.0 * (Fmodel / per_gpu) * 1e12 / peak;
  r->model_tflops_per_gpu = Fmodel / r->iteration_time_s / pl->gpus / 1e12;
  r->mfu = Fmodel / r->iteration_time_s / pl->gpus / peak;
  r->hfu_percent = 100.0 * r->hardware_tflops_per_gpu * 1e12 / peak;
  r->aggregate_pflops = r->tflops_per_gpu * pl->gpus / 1000.0;
  double tokens_per_iteration = (double)pl->global_batch * pl->model.seq_len;
  r->tokens_per_s = tokens_per_iteration / r->iteration_time_s;
  if (pl->tokens > 0) {
    r->training_days = pl->tokens / tokens_per_iteration * r->iteration_time_s / 86400.0;
    r->gpu_hours = r->training_days * 24.0 * pl->gpus;
  }
}
