/* ptdsim — a request checked against the cluster and made a plan (see
 * validate.h). */
#include "validate.h"

#include <math.h>
#include <string.h>

#include "../base/text.h"
#include "../base/units.h"
#include "moe.h"

#define FAIL(...)                                                                                                      \
  do {                                                                                                                 \
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, __VA_ARGS__);                                           \
    return FALSE;                                                                                                      \
  } while (0)

/* Upper bounds that keep every product below 2^53 and every count in range;
 * far beyond any real model or cluster. */
#define MAX_LAYERS 100000u
#define MAX_HIDDEN 1048576u
#define MAX_SEQ 1048576u
#define MAX_VOCAB 16777216u
#define MAX_GPUS 1048576u
#define MAX_BATCH 16777216u

static gboolean need(guint value, const char *flag, guint max, GError **error) {
  if (value == 0)
    FAIL("%s is missing or zero; give a whole number of at least 1", flag);
  if (value > max)
    FAIL("%s %u is too large (at most %u)", flag, value, max);
  return TRUE;
}

gboolean sim_slices_parse(const char *spec, SimPlanRequest *r, GError **error) {
  r->slices_given = TRUE;
  r->n_slices = 0;
  if (strcmp(spec, "auto") == 0) {
    r->slices_mode = SIM_SLICES_AUTO;
    return TRUE;
  }
  if (g_str_has_prefix(spec, "uniform:")) {
    const char *num = spec + strlen("uniform:");
    guint64 n = 0;
    if (!ptd_parse_whole(num, G_MAXUINT32, &n) || n < 1)
      FAIL("--slices '%.200s': uniform:N needs a whole number of slices N of at least 1 (decimal digits)", spec);
    r->slices_mode = SIM_SLICES_UNIFORM;
    r->n_slices = (guint)n;
    return TRUE;
  }
  char **parts = g_strsplit(spec, ",", -1);
  guint n = 0;
  gboolean ok = TRUE;
  for (guint i = 0; parts[i] && ok; i++) {
    guint64 v = 0;
    if (n >= SIM_MAX_SLICES) {
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "--slices lists more than %u slices", SIM_MAX_SLICES);
      ok = FALSE;
    } else if (!ptd_parse_whole(parts[i], G_MAXUINT32, &v)) {
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                  "--slices '%.200s': entry %u ('%.40s') is not a whole number (decimal digits); give auto, "
                  "uniform:N or token counts like 512,384,...",
                  spec, i + 1, parts[i]);
      ok = FALSE;
    } else if (v == 0) {
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                  "--slices '%.200s': slice %u has zero tokens; every slice needs at least one token", spec, i + 1);
      ok = FALSE;
    } else
      r->slice_len[n++] = (guint)v;
  }
  g_strfreev(parts);
  if (!ok)
    return FALSE;
  r->slices_mode = SIM_SLICES_LIST;
  r->n_slices = n;
  return TRUE;
}

char *sim_slices_text(const SimPlanRequest *r) {
  if (!r->slices_given)
    return NULL;
  if (r->slices_text)
    return g_strdup(r->slices_text);
  if (r->slices_mode == SIM_SLICES_AUTO)
    return g_strdup("auto");
  if (r->slices_mode == SIM_SLICES_UNIFORM)
    return g_strdup_printf("uniform:%u", r->n_slices);
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < r->n_slices && i < SIM_MAX_SLICES; i++)
    g_string_append_printf(s, "%s%u", i ? "," : "", r->slice_len[i]);
  return g_string_free(s, FALSE);
}

/* TeraPipe's slicing (--slices, parsed at the edge) against the sequence
 * and --granularity.  Runs before the rest of the plan is filled, so it
 * only touches the slicing fields. */
static gboolean check_slices(const SimPlanRequest *r, SimPlan *plan, GError **error) {
  guint L = r->model.seq_len;
  guint g = r->granularity ? r->granularity : 8;
  if (g > L || L % g)
    FAIL("--granularity %u does not divide the sequence length %u; use a divisor of it (TeraPipe uses 8)", g, L);
  plan->granularity = g;
  SimSlicesMode mode = r->slices_given ? r->slices_mode : SIM_SLICES_AUTO;
  if (mode == SIM_SLICES_AUTO) {
    /* The DP's cost tables hold a cell per (start, length) pair of granules:
     * memory and time grow with the square of their count. */
    if (L / g > SIM_MAX_DP_GRANULES)
      FAIL("--slices auto: a sequence of %u tokens in granules of %u is %u granules, more than the %u the slicing "
           "DP allows (its memory grows with their square, about 0.5 GB at %u); give a --granularity of at least %u "
           "that divides %u, or --slices uniform:N or explicit lengths",
           L, g, L / g, SIM_MAX_DP_GRANULES, SIM_MAX_DP_GRANULES, (L + SIM_MAX_DP_GRANULES - 1) / SIM_MAX_DP_GRANULES,
           L);
    plan->slices_mode = SIM_SLICES_AUTO;
    return TRUE;
  }
  if (mode == SIM_SLICES_UNIFORM) {
    guint64 n = r->n_slices;
    if (n < 1)
      FAIL("--slices uniform:0: uniform:N needs a whole number of slices N of at least 1 (decimal digits)");
    if (n > L / g)
      FAIL("--slices uniform:%" G_GUINT64_FORMAT " is more slices than the %u granules of %u tokens in a sequence of "
           "%u; use at most %u or a smaller --granularity",
           n, L / g, g, L, L / g);
    plan->slices_mode = SIM_SLICES_UNIFORM;
    plan->n_slices = (guint)n;
    return TRUE;
  }
  guint64 sum = 0;
  gboolean zero = FALSE;
  for (guint i = 0; i < r->n_slices && i < SIM_MAX_SLICES; i++) {
    sum += r->slice_len[i];
    zero = zero || r->slice_len[i] == 0;
  }
  if (r->n_slices < 1 || r->n_slices > SIM_MAX_SLICES || zero)
    FAIL("--slices lists %u slices, some of zero tokens; give 1 to %u slices of at least one token each",
         r->n_slices, SIM_MAX_SLICES);
  if (sum != L) {
    char *spec = sim_slices_text(r);
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--slices '%.200s' adds up to %" G_GUINT64_FORMAT " tokens, not the sequence length %u; make the "
                "slices sum to %u",
                spec, sum, L, L);
    g_free(spec);
    return FALSE;
  }
  plan->slices_mode = SIM_SLICES_LIST;
  plan->n_slices = r->n_slices;
  memcpy(plan->slice_len, r->slice_len, r->n_slices * sizeof r->slice_len[0]);
  return TRUE;
}

/* --- the pipeline split --- */

/* "--first-stage-layers 14 and --last-stage-layers 14": the end stages a
 * split gives. */
static gboolean slow_entry(const char *item, gboolean links, SimSlow *e) {
  const char *eq = strchr(item, '=');
  if (!eq)
    return FALSE;
  const char *p = item;
  e->kind = SIM_SLOW_RANK;
  if (g_str_has_prefix(p, "node:"))
    e->kind = SIM_SLOW_NODE, p += 5;
  else if (!links && g_str_has_prefix(p, "stage:"))
    e->kind = SIM_SLOW_STAGE, p += 6;
  else if (links && g_str_has_prefix(p, "rail:"))
    e->kind = SIM_SLOW_RAIL, p += 5;
  else if (links)
    return FALSE;
  char *index = g_strndup(p, (gsize)(eq - p));
  guint64 idx = 0;
  gboolean ok = ptd_parse_whole(index, G_MAXUINT32, &idx) && ptd_parse_real(eq + 1, &e->factor) &&
                e->factor <= 1 && (links ? e->factor >= 0 : e->factor > 0);
  g_free(index);
  e->index = (guint)idx;
  return ok;
}

gboolean sim_slow_parse(const char *text, gboolean links, SimSlow *out, guint *n, GError **error) {
  const char *opt = links ? "--slow-link" : "--slow";
  *n = 0;
  if (!text || !*text) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "%s needs a value, e.g. %s %s", opt, opt,
                links ? "rail:2=0" : "17=0.8");
    return FALSE;
  }
  guint entries = 1;
  for (const char *c = text; *c; c++)
    entries += *c == ',';
  if (entries > SIM_MAX_SLOW) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "%s has %u entries, more than %d; give at most %d (node:N and stage:S name many GPUs at once)", opt,
                entries, SIM_MAX_SLOW, SIM_MAX_SLOW);
    return FALSE;
  }
  char **items = g_strsplit(text, ",", -1);
  gboolean ok = TRUE;
  for (char **it = items; ok && *it; it++) {
    SimSlow e = {0};
    if (!(ok = slow_entry(*it, links, &e))) {
      char *echo = ptd_echo(*it, PTD_ECHO_MAX, FALSE);
      if (links)
        g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                    "--slow-link '%s' is not WHERE=FACTOR: WHERE is node:N or rail:R (N and R in decimal digits), "
                    "FACTOR a decimal number with 0 <= FACTOR <= 1; give e.g. --slow-link node:3=0.5 or rail:2=0",
                    echo);
      else
        g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                    "--slow '%s' is not WHO=FACTOR: WHO is RANK, node:N or stage:S (in decimal digits), FACTOR a "
                    "decimal number with 0 < FACTOR <= 1; give e.g. --slow 17=0.8, node:3=0.9 or stage:5=0.5",
                    echo);
      g_free(echo);
      break;
    }
    out[(*n)++] = e;
  }
  g_strfreev(items);
  return ok;
}

gboolean sim_stage_times_parse(const char *text, double ms[4], GError **error) {
  char **parts = g_strsplit(text ? text : "", ",", -1);
  gboolean ok = g_strv_length(parts) == 4;
  for (guint j = 0; ok && j < 4; j++)
    ok = ptd_parse_real(parts[j], &ms[j]) && ms[j] >= 0 && ms[j] <= 1e6 && (j == 3 || ms[j] > 0);
  g_strfreev(parts);
  if (!ok) {
    char *echo = ptd_echo(text, PTD_ECHO_MAX, FALSE);
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--stage-times '%s' is not F,B,W,COMM: four decimal numbers of ms per microbatch and stage (forward, "
                "input gradient, weight gradient, a pipeline hop), the first three above 0, all at most 1e6; give "
                "e.g. --stage-times 1.2,1.3,1.1,0.05",
                echo);
    g_free(echo);
  }
  return ok;
}

gboolean sim_gpu_speed_parse(const char *text, double *sigma, GError **error) {
  if (text && g_str_has_prefix(text, "lognormal:") && ptd_parse_real(text + 10, sigma) && *sigma >= 0 &&
      *sigma <= 2)
    return TRUE;
  char *echo = ptd_echo(text, PTD_ECHO_MAX, FALSE);
  g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
              "--gpu-speed '%s' is not lognormal:SIGMA with SIGMA a decimal number from 0 to 2; give e.g. "
              "--gpu-speed lognormal:0.02",
              echo);
  g_free(echo);
  return FALSE;
}

/* The entries' indexes against the run: a GPU, node, stage or rail it has. */
static gboolean slow_in_run(const SimSlow *list, guint n, gboolean links, const TopoCluster *cluster, guint gpus,
                            guint pp, GError **error) {
  for (guint i = 0; i < n; i++) {
    const SimSlow *e = &list[i];
    guint limit = gpus;
    const char *what = "GPU", *prefix = "";
    if (e->kind == SIM_SLOW_NODE) {
      guint gpn = links ? cluster->gpus_per_node : cluster->gpus_per_host; /* a link's node is its NVLink domain */
      limit = (gpus + gpn - 1) / gpn, what = "node", prefix = "node:";
    } else if (e->kind == SIM_SLOW_STAGE)
      limit = pp, what = "stage", prefix = "stage:";
    else if (e->kind == SIM_SLOW_RAIL)
      limit = MAX(cluster->net.nics_per_node, 1u), what = "rail", prefix = "rail:";
    if (e->index >= limit) {
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                  "%s %s%u names %s %u, outside the run's %u (0 to %u)", links ? "--slow-link" : "--slow", prefix,
                  e->index, what, e->index, limit, limit - 1);
      return FALSE;
    }
  }
  return TRUE;
}

/* A --slow or --slow-link list as its entries read ("node:3=0.5,rail:2=0"). */
static char *slow_text(const SimSlow *list, guint n) {
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < n; i++) {
    const SimSlow *e = &list[i];
    const char *prefix = e->kind == SIM_SLOW_NODE    ? "node:"
                         : e->kind == SIM_SLOW_STAGE ? "stage:"
                         : e->kind == SIM_SLOW_RAIL  ? "rail:"
                                                     : "";
    g_string_append_printf(s, "%s%s%u=%g", i ? "," : "", prefix, e->index, e->factor);
  }
  return g_string_free(s, FALSE);
}

static gboolean build_stragglers(const SimPlanRequest *r, const TopoCluster *cluster, SimPlan *plan, GError **error) {
  SimStragglers *st = &plan->stragglers;
  *st = r->stragglers; /* parsed at the edge; checked here against the run */
  st->seed = r->seed ? r->seed : 1;
  if (st->n_gpu > SIM_MAX_SLOW || st->n_link > SIM_MAX_SLOW || !(st->sigma >= 0 && st->sigma <= 2))
    FAIL("the stragglers hold more than %d entries or a --gpu-speed sigma outside 0 to 2", SIM_MAX_SLOW);
  for (guint i = 0; i < st->n_gpu + st->n_link; i++) {
    gboolean link = i >= st->n_gpu;
    const SimSlow *e = link ? &st->link[i - st->n_gpu] : &st->gpu[i];
    if (!(e->factor <= 1 && (link ? e->factor >= 0 : e->factor > 0)))
      FAIL("%s factor %g is outside %s; give a decimal number in that range", link ? "--slow-link" : "--slow",
           e->factor, link ? "0 <= FACTOR <= 1" : "0 < FACTOR <= 1");
  }
  if (!slow_in_run(st->gpu, st->n_gpu, FALSE, cluster, r->gpus, r->pp, error) ||
      !slow_in_run(st->link, st->n_link, TRUE, cluster, r->gpus, r->pp, error))
    return FALSE;
  if (st->n_link) {
    /* a node with every NIC down has no way out: nothing models traffic
     * that cannot leave it (a rail down shares the next rail's NIC) */
    guint nodes = (r->gpus + cluster->gpus_per_node - 1) / MAX(cluster->gpus_per_node, 1u);
    guint rails = MAX(cluster->net.nics_per_node, 1u);
    for (guint node = 0; node < nodes; node++) {
      gboolean up = FALSE;
      for (guint rail = 0; rail < rails && !up; rail++)
        up = sim_plan_nic_factor(plan, node, rail) > 0;
      if (!up) {
        char *text = slow_text(st->link, st->n_link);
        g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                    "--slow-link '%.200s' leaves node %u with none of its %u NICs up; keep at least one above 0 "
                    "(rail:R=0 takes one rail down, node:N=F slows a node's NICs)",
                    text, node, rails);
        g_free(text);
        return FALSE;
      }
    }
  }
  if (sim_plan_has_stragglers(plan) && (r->zero || !sim_schedule_info(plan->schedule)->passes))
    FAIL("--slow, --gpu-speed and --slow-link apply to tensor, pipeline and data parallel runs; drop them with "
         "--zero or TeraPipe");
  return TRUE;
}

/* "a, b or c": the words of the schedules whose row says `which`, joined
 * once per predicate (the two below) and kept. */
typedef gboolean (*RowTest)(const SimScheduleInfo *);
static gboolean is_chunked(const SimScheduleInfo *row) { return row->chunks == SIM_CHUNKS_ANY; }
static gboolean is_limited(const SimScheduleInfo *row) { return row->activation_limit; }
static const RowTest row_tests[] = {is_chunked, is_limited};
static const char *schedule_words_where(RowTest which) {
  static char *text[G_N_ELEMENTS(row_tests)];
  static gsize once = 0;
  if (g_once_init_enter(&once)) {
    guint n;
    const SimScheduleInfo *t = sim_schedule_table(&n);
    PtdWord *words = g_new0(PtdWord, n + 1);
    for (guint k = 0; k < G_N_ELEMENTS(row_tests); k++) {
      guint w = 0;
      for (guint i = 0; i < n; i++)
        if (t[i].word && row_tests[k](&t[i]))
          words[w++] = (PtdWord){t[i].name, (int)t[i].id};
      words[w] = (PtdWord){NULL, 0};
      text[k] = ptd_word_list(words);
    }
    g_free(words);
    g_once_init_leave(&once, 1);
  }
  for (guint k = 0; k < G_N_ELEMENTS(row_tests); k++)
    if (row_tests[k] == which)
      return text[k];
  g_return_val_if_reached("");
}

gboolean sim_plan_activation_limit_check(const SimScheduleInfo *row, gboolean limit_given, GError **error) {
  if (row->activation_limit && !limit_given)
    FAIL("--schedule %s finds a schedule within an activation-memory limit; give --activation-limit GiB (the "
         "activations a GPU may hold, e.g. 20)",
         row->name);
  return TRUE;
}

gboolean sim_plan_build(const SimPlanRequest *r, const TopoCluster *cluster, SimPlan *plan, GError **error) {
  memset(plan, 0, sizeof *plan);
  const ModelShape *m = &r->model;
  if (!need(m->layers, "--layers", MAX_LAYERS, error) || !need(m->hidden, "--hidden", MAX_HIDDEN, error) ||
      !need(m->heads, "--heads", MAX_HIDDEN, error) || !need(m->seq_len, "--seq-len", MAX_SEQ, error) ||
      !need(m->vocab, "--vocab", MAX_VOCAB, error) || !need(r->gpus, "--gpus", MAX_GPUS, error) ||
      !need(r->tp, "--tp", MAX_GPUS, error) || !need(r->pp, "--pp", MAX_GPUS, error) ||
      !need(r->global_batch, "--global-batch", MAX_BATCH, error) ||
      !need(r->micro_batch, "--micro-batch", MAX_BATCH, error))
    return FALSE;
  /* multi-token prediction runs as DeepSeek-V3's: an MoE layer per module */
  if (m->mtp && !model_is_moe(m))
    FAIL("multi-token prediction modules are modelled on mixture-of-experts models (DeepSeek-V3's), and this "
         "model has no experts; drop its MTP modules");
  if (!m->kv_channels && m->hidden % m->heads)
    FAIL("--hidden %u is not a multiple of --heads %u; pick sizes whose head dimension is whole, or give "
         "--kv-channels",
         m->hidden, m->heads);
  if (m->kv_channels > MAX_HIDDEN)
    FAIL("--kv-channels %u is more than %u", m->kv_channels, MAX_HIDDEN);
  if (m->ffn_hidden > 16 * MAX_HIDDEN)
    FAIL("--ffn-hidden %u is more than %u", m->ffn_hidden, 16 * MAX_HIDDEN);
  guint groups = model_groups(m);
  if (groups > m->heads || m->heads % groups)
    FAIL("--num-query-groups %u does not divide the %u attention heads; give a divisor of --heads (1 for "
         "multi-query attention)",
         groups, m->heads);
  if (r->tp > m->heads)
    FAIL("--tp %u is more tensor-parallel ranks than the model's %u attention heads; use --tp <= %u", r->tp, m->heads,
         m->heads);
  if (m->heads % r->tp)
    FAIL("--heads %u does not split evenly over --tp %u; use a tensor-parallel size that divides the heads", m->heads,
         r->tp);
  if (groups % r->tp)
    FAIL("--num-query-groups %u does not split over --tp %u (each tensor-parallel rank holds whole key/value "
         "groups); use a --tp that divides %u",
         groups, r->tp, groups);
  if (model_ffn(m) % r->tp)
    FAIL("the MLP's hidden size %u does not split over --tp %u; use a --tp that divides it, or another "
         "--ffn-hidden",
         model_ffn(m), r->tp);
  guint cp = r->cp ? r->cp : 1;
  if (cp > MAX_GPUS)
    FAIL("--cp %u is more than %u", cp, MAX_GPUS);
  if (cp > 1 && m->seq_len % (2 * cp))
    FAIL("--cp %u cannot split --seq-len %u: ring attention cuts the sequence into 2 x cp = %u equal chunks; use a "
         "--cp whose double divides the sequence length",
         cp, m->seq_len, 2 * cp);
  guint64 tp_pp = (guint64)r->tp * r->pp * cp;
  /* the model-parallel sizes as given, and their product's letters */
  char sizes[64];
  if (cp > 1)
    g_snprintf(sizes, sizeof sizes, "--tp %u x --cp %u x --pp %u", r->tp, cp, r->pp);
  else
    g_snprintf(sizes, sizeof sizes, "--tp %u x --pp %u", r->tp, r->pp);
  const char *letters = cp > 1 ? "t*cp*p" : "t*p";
  if (r->dp) {
    if (r->dp > MAX_GPUS || tp_pp * r->dp != r->gpus)
      FAIL("%s x --dp %u = %" G_GUINT64_FORMAT " is not --gpus %u; make %s*d equal the GPU count", sizes, r->dp,
           tp_pp * r->dp, r->gpus, letters);
  } else if (tp_pp > r->gpus || r->gpus % tp_pp)
    FAIL("--gpus %u is not a multiple of %s = %" G_GUINT64_FORMAT "; the data-parallel size d = n/(%s) must be whole",
         r->gpus, sizes, tp_pp, letters);
  guint dp = r->dp ? r->dp : (guint)(r->gpus / tp_pp);
  if (r->gpus > topo_cluster_gpus(cluster))
    FAIL("--gpus %u is more than cluster '%s' has (%u GPUs; --nodes N sizes it)", r->gpus, cluster->name,
         topo_cluster_gpus(cluster));
  {
    guint group = r->tp * cp, span = sim_place(cluster, group, r->gpus - 1) + 1;
    if (span > topo_cluster_gpus(cluster))
      FAIL("--gpus %u in tensor-parallel groups of %u, packed %u to an NVLink domain of %u GPUs, span %u GPUs, more "
           "than cluster '%s' has (%u); give fewer GPUs or more nodes (--nodes N)",
           r->gpus, group, cluster->gpus_per_node / group, cluster->gpus_per_node, span, cluster->name,
           topo_cluster_gpus(cluster));
  }
  /* a schedule that is no order of passes (TeraPipe's token pipeline) */
  gboolean own = r->schedule_given && !sim_schedule_info(r->schedule)->passes;
  if ((r->split.first || r->split.last || r->split.embedding || r->split.loss) && (r->zero || own))
    FAIL("%s split Megatron's pipeline, for PTD-P; drop them with %s%s%s",
         r->split.first || r->split.last ? "--first-stage-layers/--last-stage-layers"
                                         : "--account-for-embedding/--account-for-loss",
         r->zero ? "--zero" : "--schedule ", r->zero ? "" : sim_schedule_name(r->schedule),
         r->zero ? "" : " (whose cells hold equal layers)");
  if (own && m->layers % r->pp) /* TeraPipe's cells hold equal layers: no uneven split to suggest */
    FAIL("--layers %u do not divide into --pp %u stages; use a pipeline size that divides the layer count", m->layers,
         r->pp);
  const SimLayout *lay = NULL;
  if (r->layout) {
    if (r->zero || own)
      FAIL("--pipeline-model-parallel-layout splits Megatron's pipeline, for PTD-P; drop it with %s%s",
           r->zero ? "--zero" : "--schedule ", r->zero ? "" : sim_schedule_name(r->schedule));
    /* transformer_config.py: the layout replaces the other ways to split */
    if (r->split.first || r->split.last || r->split.embedding || r->split.loss)
      FAIL("give the pipeline split one way: --pipeline-model-parallel-layout, or --first-stage-layers/"
           "--last-stage-layers, or --account-for-embedding/--account-for-loss, as Megatron-Core requires");
    if (r->layers_per_chunk)
      FAIL("--pipeline-model-parallel-layout sets the layers of each model chunk; drop --layers-per-chunk");
    if (!(lay = sim_layout_parse(r->layout, error)))
      return FALSE;
    char *echo = ptd_echo(r->layout, PTD_ECHO_MAX, TRUE);
    gboolean ok = lay->layers == m->layers && lay->mtps == m->mtp;
    if (!ok)
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                  "--pipeline-model-parallel-layout '%s' holds %u transformer layers (t) and %u MTP modules (m), the "
                  "model %u and %u; write each of its layers once",
                  echo, lay->layers, lay->mtps, m->layers, m->mtp);
    g_free(echo);
    if (!ok)
      return FALSE;
  }
  guint split_first = 0, split_mid = 0, split_last = 0; /* the stage layers; the chunks are checked with the schedule */
  if (!lay && !sim_split_layers(&r->split, m->layers, r->pp, 1, &split_first, &split_mid, &split_last, error))
    return FALSE;
  guint64 per_step = (guint64)r->micro_batch * dp;
  if (r->global_batch % per_step)
    FAIL("--global-batch %u does not split into microbatches of %u over %u data-parallel replicas; make it a "
         "multiple of b*d = %" G_GUINT64_FORMAT,
         r->global_batch, r->micro_batch, dp, per_step);

  SimSchedule sched;
  if (!r->schedule_given)
    sched = sim_schedule_default(r->layers_per_chunk || r->chunks || (lay && lay->n > r->pp));
  else if (sim_schedule_info(r->schedule)->word)
    sched = r->schedule;
  else /* a request made by hand naming what --schedule cannot */
    FAIL("unknown --schedule '%s'; use %s", sim_schedule_name(r->schedule), sim_schedule_word_list());
  const SimScheduleInfo *row = sim_schedule_info(sched);
  if (!sim_plan_activation_limit_check(row, r->activation_limit_gib > 0, error))
    return FALSE;
  if (!row->activation_limit && r->activation_limit_gib > 0) {
    const char *limited = schedule_words_where(is_limited);
    FAIL("--activation-limit is %s's memory limit; add --schedule %s or drop it", limited, limited);
  }
  if (!(r->activation_limit_gib >= 0) || r->activation_limit_gib > 1e6)
    FAIL("--activation-limit must be a number of GiB above 0, e.g. 20");
  plan->activation_limit_gib = r->activation_limit_gib;
  if (r->schedule_file && r->schedule_given)
    FAIL("--schedule-file gives the schedule itself; drop --schedule %s", sim_schedule_name(r->schedule));
  if (r->schedule_file) {
    sched = SIM_SCHEDULE_FILE;
    row = sim_schedule_info(sched);
  }
  /* TeraPipe's own options and rules: the schedule whose row runs no
   * passes of ours (terapipe/ runs its token pipeline) */
  own = !row->passes;
  const char *tera = sim_schedule_name(SIM_SCHEDULE_TERAPIPE);
  char with[64]; /* "--schedule NAME", for "drop it with ..." */
  g_snprintf(with, sizeof with, "--schedule %s", row->name);
  if (sched != SIM_SCHEDULE_TERAPIPE && (r->slices_given || r->granularity))
    FAIL("--slices and --granularity need --schedule %s", tera);
  if (sched == SIM_SCHEDULE_TERAPIPE && !check_slices(r, plan, error))
    return FALSE;
  if (own && r->ddp_given && r->ddp != SIM_DDP_LOCAL)
    FAIL("%s all-reduces gradients after the flush; drop --ddp %s", with, ptd_word_of(sim_ddp_words, (int)r->ddp));
  if (own && r->no_symmetry)
    FAIL("--no-symmetry is not available with %s (one GPU per cell is simulated); drop it", with);
  plan->workload = r->workload_given ? r->workload : SIM_WORKLOAD_GPT;
  if (plan->workload == SIM_WORKLOAD_LAYERS && sched != SIM_SCHEDULE_TERAPIPE)
    FAIL("--workload layers is TeraPipe's benchmark workload; use it with --schedule %s", tera);
  if (r->zero > 3)
    FAIL("--zero %u is not a ZeRO stage; use 1 (optimizer state sharded), 2 (and gradients) or 3 (and parameters)",
         r->zero);
  if (r->zero && (r->tp > 1 || r->pp > 1))
    FAIL("--zero %u shards over data parallelism alone, as SC21 compares it; use --tp 1 --pp 1 (ZeRO combined with "
         "tensor or pipeline parallelism is not modelled)",
         r->zero);
  if (r->zero && r->schedule_given)
    FAIL("--zero %u accumulates microbatches one after another; drop --schedule", r->zero);
  if (r->zero && r->ddp_given)
    FAIL("--zero %u does its own gradient communication; drop --ddp", r->zero);
  plan->zero = r->zero;
  gboolean zk_given = r->zero_prefetch_bucket || r->zero_max_live || r->zero_reuse_distance || r->zero_persistence ||
                      r->zero_reduce_bucket || r->zero_contiguous_gradients || r->zero_trace_fixed;
  if (zk_given && r->zero != 3)
    FAIL("--zero-prefetch-bucket, --zero-max-live, --zero-reuse-distance, --zero-persistence, --zero-reduce-bucket and "
         "--zero-contiguous-gradients, --zero-trace-fixed are DeepSpeed's stage-3 settings; add --zero 3 or drop them");
  plan->zk = (SimZeroKnobs){
      .prefetch_bucket = r->zero_prefetch_bucket ? r->zero_prefetch_bucket : SIM_ZERO_DEFAULT_PREFETCH_BUCKET,
      .max_live = r->zero_max_live ? r->zero_max_live : SIM_ZERO_DEFAULT_MAX_LIVE,
      .max_reuse = r->zero_reuse_distance ? r->zero_reuse_distance : SIM_ZERO_DEFAULT_MAX_REUSE,
      .persistence = r->zero_persistence ? r->zero_persistence : SIM_ZERO_DEFAULT_PERSISTENCE,
      .reduce_bucket = r->zero_reduce_bucket ? r->zero_reduce_bucket : SIM_ZERO_DEFAULT_REDUCE_BUCKET,
      .contiguous = r->zero_contiguous_gradients,
      .trace_fixed = r->zero_trace_fixed};
  if (r->distributed_optimizer && (r->zero || own))
    FAIL("--distributed-optimizer is Megatron's sharding of the optimizer state for PTD-P; drop it with %s",
         r->zero ? "--zero (which shards the optimizer state its own way)" : with);
  plan->distributed_optimizer = r->distributed_optimizer;
  if (cp > 1 && (r->zero || own))
    FAIL("--cp is Megatron-Core's context parallelism, for PTD-P; drop it with %s", r->zero ? "--zero" : with);
  if (r->overlap_param_gather && (r->fsdp || r->hsdp))
    FAIL("%s gathers the parameters itself, layer by layer, overlapped with the forward; drop --overlap-param-gather "
         "(Megatron's distributed optimizer's)",
         r->hsdp ? "--hsdp" : "--fsdp");
  if (r->overlap_param_gather && !r->distributed_optimizer)
    FAIL("--overlap-param-gather overlaps the distributed optimizer's parameter all-gather with the next forward; "
         "add --distributed-optimizer");
  if (r->overlap_param_gather && (!r->ddp_given || r->ddp != SIM_DDP_TORCH))
    FAIL("--overlap-param-gather needs gradients reduced while the backward runs, as Megatron requires "
         "(--overlap-grad-reduce); add --ddp torch");
  plan->overlap_param_gather = r->overlap_param_gather;

  guint m_mb = (guint)(r->global_batch / per_step);
  guint v = 1;
  if (r->layers_per_chunk && r->chunks)
    FAIL("give either --layers-per-chunk or --chunks, not both");
  gboolean looped = row->chunks == SIM_CHUNKS_ANY;
  if (!looped && (r->layers_per_chunk || r->chunks))
    FAIL("--layers-per-chunk and --chunks need --schedule %s", schedule_words_where(is_chunked));
  gboolean split_ends = r->split.first || r->split.last, split_extra = r->split.embedding || r->split.loss;
  if (row->backward != SIM_BACKWARD_WHOLE) {
    const char *name = row->word ? row->name : "--schedule-file";
    if (r->pp < 2)
      FAIL("--schedule %s is a pipeline schedule; give --pp of at least 2", name);
    /* one chunk per stage in stage order (zb-h1, zb-h2) takes Megatron's
     * uneven splits as 1F1B does; the V, DualPipe's mirrored copies, more
     * chunks and a file's own placement are laid out on an even split */
    gboolean takes = row->split == SIM_SPLIT_ANY || (row->split == SIM_SPLIT_ACCOUNT && split_extra && !split_ends);
    if ((split_ends || split_extra) && !takes)
      FAIL("%s takes %s; write the split as --pipeline-model-parallel-layout (any schedule takes one)", name,
           row->split == SIM_SPLIT_ACCOUNT ? "of the split options only --account-for-embedding and --account-for-loss"
                                           : "none of --first-stage-layers, --last-stage-layers and --account-for-*");
    if (cp > 1 || r->tp_comm_overlap)
      FAIL("%s is not modelled with %s yet; drop it", name, cp > 1 ? "--cp" : "--tp-comm-overlap");
    if (r->overlap_param_gather)
      FAIL("%s is not modelled with --overlap-param-gather yet; drop it", name);
  }
  if (row->chunks == SIM_CHUNKS_TWO && lay)
    v = 2;
  else if (row->chunks == SIM_CHUNKS_TWO) {
    v = 2; /* V: virtual stages s and 2p-1-s; DualPipe: stage s and p-1-s, one per direction */
    guint parts = row->copies ? r->pp : 2 * r->pp;
    guint extras = (r->split.embedding ? 1 : 0) + (r->split.loss ? 1 : 0);
    if (!row->copies && extras) {
      if ((m->layers + extras) % parts)
        FAIL("--schedule %s with the embedding and loss counted as layers cuts %u + %u into %u equal parts; use a "
             "--pp whose double divides that",
             row->name, m->layers, extras, parts);
    } else if (m->layers % parts)
      FAIL("--schedule %s cuts the %u layers into %u equal parts; use a --pp whose %s divides the layer count",
           row->name, m->layers, parts, row->copies ? "value" : "double");
  }
  if (row->even_p_and_m && (r->pp % 2 || m_mb % 2 || m_mb < row->min_m_per_p * r->pp))
    FAIL("--schedule %s needs an even --pp and an even number of microbatches, at least %up = %u (it has %u); "
         "adjust --pp, --global-batch or --micro-batch",
         row->name, row->min_m_per_p, row->min_m_per_p * r->pp, m_mb);
  if (!row->even_p_and_m && m_mb < row->min_m_per_p * r->pp)
    FAIL("--schedule %s needs at least %up = %u microbatches (it has %u); raise --global-batch or lower "
         "--micro-batch",
         row->name, row->min_m_per_p, row->min_m_per_p * r->pp, m_mb);
  if (row->chunks == SIM_CHUNKS_TWO && !lay) {
    if (!row->copies &&
        !sim_split_layers(&r->split, m->layers, r->pp, v, &split_first, &split_mid, &split_last, error))
      return FALSE;
  }
  if (row->chunks == SIM_CHUNKS_FILE) {
    const SimScheduleFile *f = sim_schedule_file_load(r->schedule_file, r->pp, m_mb, error);
    if (!f)
      return FALSE;
    v = f->v;
    if (!lay && m->layers % (r->pp * v))
      FAIL("--schedule-file runs %u stages per rank, which do not divide the %u layers evenly; give a model whose "
           "layers divide into %u stages",
           v, m->layers, r->pp * v);
    plan->schedule_file = f;
    if (!lay && !sim_split_layers(&r->split, m->layers, r->pp, v, &split_first, &split_mid, &split_last, error))
      return FALSE;
  }
  if (looped) {
    if (r->pp < 2)
      FAIL("the interleaved schedule needs --pp of at least 2");
    if (r->layers_per_chunk) {
      /* Megatron derives v from --num-layers-per-virtual-pipeline-stage only
       * where every stage holds the same share (arguments.py asks for
       * --num-virtual-stages-per-pipeline-rank with uneven end stages) */
      if (split_ends)
        FAIL("with --first-stage-layers or --last-stage-layers give the model chunks per GPU as --chunks v (as "
             "Megatron asks for --num-virtual-stages-per-pipeline-rank), not --layers-per-chunk");
      if (split_mid % r->layers_per_chunk)
        FAIL("--layers-per-chunk %u does not divide the %u layers of each stage%s; pick a divisor",
             r->layers_per_chunk, split_mid, split_extra ? " (the embedding or loss counted as a layer)" : "");
      v = split_mid / r->layers_per_chunk;
    } else if (r->chunks)
      v = r->chunks;
    else if (lay)
      v = lay->n / r->pp;
    else
      FAIL("the interleaved schedule needs --layers-per-chunk L or --chunks v");
    if (!lay && !sim_split_layers(&r->split, m->layers, r->pp, v, &split_first, &split_mid, &split_last, error))
      return FALSE;
  }
  if (lay) {
    /* pipeline_parallel_layer_layout.py: as many pieces as the pipeline
     * runs virtual stages, the MTP modules in a rank's last one */
    guint route = row->copies ? r->pp : r->pp * v;
    char *echo = ptd_echo(r->layout, PTD_ECHO_MAX, TRUE);
    char want[160];
    if (row->copies)
      g_snprintf(want, sizeof want, "--schedule %s runs --pp %u pieces in each direction (rank s holds piece s and "
                 "piece p - 1 - s): list %u", row->name, r->pp, r->pp);
    else if (looped && !r->chunks)
      g_snprintf(want, sizeof want, "the interleaved schedule runs a whole number of virtual stages on each of --pp %u "
                 "ranks: list a multiple of %u", r->pp, r->pp);
    else if (v > 1)
      g_snprintf(want, sizeof want, "--pp %u ranks of %u model chunks run %u virtual stages: list %u", r->pp, v,
                 route, route);
    else
      g_snprintf(want, sizeof want, "--schedule %s runs one virtual stage on each of --pp %u ranks: list %u%s",
                 row->word ? row->name : "--schedule-file", r->pp, r->pp,
                 lay->n % r->pp == 0 && lay->n > r->pp ? ", or add --schedule interleaved" : "");
    gboolean ok = lay->n == route && v >= 1;
    if (!ok)
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                  "--pipeline-model-parallel-layout '%s' lists %u virtual stages; %s", echo, lay->n, want);
    if (ok && lay->mtps && !row->copies) {
      guint ms, mc;
      if (plan->schedule_file) {
        ms = plan->schedule_file->rank_of[lay->mtp_vs];
        mc = plan->schedule_file->chunk_of[lay->mtp_vs];
      } else
        row->place(r->pp, v, m_mb, lay->mtp_vs, 0, &ms, &mc);
      if (mc != v - 1) {
        ok = FALSE;
        g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                    "--pipeline-model-parallel-layout '%s' puts the MTP modules in model chunk %u of rank %u; "
                    "Megatron-Core keeps them in a rank's last (chunk %u)",
                    echo, mc, ms, v - 1);
      }
    }
    g_free(echo);
    if (!ok)
      return FALSE;
  }
  if (row->m_multiple_of_p) {
    if (m_mb % r->pp)
      FAIL("the interleaved schedule needs the %u microbatches per pipeline to be a multiple of --pp %u; adjust "
           "--global-batch or --micro-batch",
           m_mb, r->pp);
  }

  if (r->stage_times) {
    const double *t = r->stage_times_ms; /* parsed at the edge; a request made by hand checked here */
    for (guint j = 0; j < 4; j++)
      if (!(t[j] >= 0 && t[j] <= 1e6 && (j == 3 || t[j] > 0)))
        FAIL("--stage-times %g,%g,%g,%g is not F,B,W,COMM: four numbers of ms, the first three above 0, all at most "
             "1e6",
             t[0], t[1], t[2], t[3]);
    if (own || r->zero)
      FAIL("--stage-times times a pipeline's stages; drop it with %s", r->zero ? "--zero" : with);
    plan->stage_times = TRUE;
    plan->stage_f_s = t[0] * 1e-3;
    plan->stage_b_s = t[1] * 1e-3;
    plan->stage_w_s = t[2] * 1e-3;
    plan->stage_comm_s = t[3] * 1e-3;
  }

  plan->model = *m;
  plan->gpus = r->gpus;
  plan->tp = r->tp;
  plan->pp = r->pp;
  plan->dp = dp;
  plan->cp = cp;
  plan->global_batch = r->global_batch;
  plan->micro_batch = r->micro_batch;
  plan->microbatches = m_mb;
  plan->chunks = v;
  plan->schedule = sched;
  plan->split = r->split;
  plan->split_first = split_first;
  plan->split_mid = split_mid;
  plan->split_last = split_last;
  plan->split_embedding = r->split.embedding;
  plan->split_loss = r->split.loss;
  plan->layout = lay;

  plan->ddp = r->ddp_given ? r->ddp : SIM_DDP_LOCAL;
  ModelRecompute rc = r->recompute_given ? r->recompute : MODEL_RECOMPUTE_FULL;
  plan->recompute = rc == MODEL_RECOMPUTE_FULL;
  plan->selective = rc == MODEL_RECOMPUTE_SELECTIVE;
  if (plan->selective && (r->zero || own))
    FAIL("--recompute selective is Megatron's, for PTD-P; use full or none with %s", r->zero ? "--zero" : with);
  ModelFramework fw = r->framework_given ? r->framework : MODEL_FRAMEWORK_MEGATRON;
  gboolean own_policy = rc == MODEL_RECOMPUTE_OP || rc == MODEL_RECOMPUTE_LAYER || rc == MODEL_RECOMPUTE_MODULES;
  const char *rc_word = ptd_word_of(sim_recompute_words, (int)rc);
  if (own_policy && (r->zero || own))
    FAIL("--recompute %s is modelled for PTD-P and FSDP2 runs; use full or none with %s", rc_word,
         r->zero ? "--zero" : with);
  if (own_policy && rc != MODEL_RECOMPUTE_MODULES && model_is_moe(&r->model))
    FAIL("--recompute %s is not modelled for mixture-of-experts models yet; use modules, full, selective or none",
         rc_word);
  if (rc == MODEL_RECOMPUTE_OP && fw != MODEL_FRAMEWORK_EAGER)
    FAIL("--recompute op is torchtitan's per-op checkpointing of PyTorch's eager ops; add --framework eager");
  if (rc == MODEL_RECOMPUTE_MODULES && fw != MODEL_FRAMEWORK_MEGATRON)
    FAIL("--recompute modules is Megatron-Core's --recompute-modules; use it with --framework megatron, or use "
         "--recompute op or layer with eager");
  if (r->recompute_every && rc != MODEL_RECOMPUTE_LAYER)
    FAIL("--recompute-every applies to --recompute layer; add it or drop --recompute-every");
  if (r->recompute_modules_given && rc != MODEL_RECOMPUTE_MODULES)
    FAIL("--recompute-modules applies to --recompute modules; add it or drop --recompute-modules");
  if (rc == MODEL_RECOMPUTE_MODULES) { /* as transformer_config.py refuses them, and what would do nothing */
    guint mods = r->recompute_modules;
    const ModelShape *mm = &r->model;
    if ((mods & (MODEL_RC_MOE_ACT | MODEL_RC_MOE | MODEL_RC_SHARED_EXPERTS)) && !model_is_moe(mm))
      FAIL("--recompute-modules %s recomputes part of a mixture-of-experts layer and this model has no experts; use "
           "core_attn, mlp%s or layernorm",
           mods & MODEL_RC_MOE_ACT ? "moe_act" : mods & MODEL_RC_MOE ? "moe" : "shared_experts",
           model_is_mla(mm) ? ", mla_up_proj" : "");
    if ((mods & MODEL_RC_SHARED_EXPERTS) && mm->shared_ffn == 0)
      FAIL("--recompute-modules shared_experts: this model has no shared experts; drop it");
    if ((mods & MODEL_RC_MLA_UP_PROJ) && !model_is_mla(mm))
      FAIL("--recompute-modules mla_up_proj recomputes multi-head latent attention's up projections and this model "
           "has none; use core_attn or layernorm");
    gboolean dense = FALSE;
    for (guint i = 0; i < mm->layers && !dense; i++)
      dense = !model_layer_is_moe(mm, i);
    if ((mods & MODEL_RC_MLP) && !dense)
      FAIL("--recompute-modules mlp recomputes dense MLPs and every layer of this model is a mixture of experts; use "
           "moe, moe_act or shared_experts");
  }
  plan->ac = own_policy ? rc : MODEL_RECOMPUTE_NONE;
  plan->recompute_every = rc == MODEL_RECOMPUTE_LAYER ? (r->recompute_every ? r->recompute_every : 2) : 0;
  plan->recompute_modules =
      rc == MODEL_RECOMPUTE_MODULES ? (r->recompute_modules_given ? r->recompute_modules : MODEL_RC_CORE_ATTN) : 0;
  if (!(r->tokens >= 0) || !isfinite(r->tokens))
    FAIL("--tokens must be a positive number of training tokens");
  if (!r->network_given) /* the default: flows where the cluster describes its fabric and the schedule carries them */
    plan->flow_network = cluster->has_fabric && !own;
  else
    plan->flow_network = r->network == SIM_NETWORK_FLOW;
  plan->placement = r->placement_given ? r->placement : SIM_PLACEMENT_TP_DP_PP;
  if (plan->placement == SIM_PLACEMENT_MISALIGNED && r->gpus + cluster->gpus_per_node / 2 > topo_cluster_gpus(cluster))
    FAIL("--placement misaligned shifts the job by half a node, which needs %u more GPUs than cluster '%s' has; use "
         "fewer --gpus",
         cluster->gpus_per_node / 2, cluster->name);
  if (own && plan->flow_network)
    FAIL("--network flow is not available with %s yet; use --network analytic", with);
  if (own && r->placement_given)
    FAIL("%s places ranks as TeraPipe's code does (tensor, then pipeline, then data: tp-pp-dp); "
         "drop --placement",
         with);
  if (own && r->no_scatter_gather)
    FAIL("--no-scatter-gather does not apply to %s: one rank sends each hop whole and its group "
         "broadcasts it, as TeraPipe's code does; drop it",
         with);
  if (r->sequence_parallel && (r->tp < 2 || r->zero || own))
    FAIL("--sequence-parallel splits the sequence over the tensor-parallel ranks; %s",
         r->zero || own ? "it is Megatron's, for PTD-P: drop it"
                                                    : "use it with --tp 2 or more");
  if (r->sequence_parallel && r->no_scatter_gather)
    FAIL("--no-scatter-gather does not apply with --sequence-parallel (each rank sends its own s/t of the sequence); "
         "drop it");
  plan->sequence_parallel = r->sequence_parallel;
  if (r->tp_comm_overlap && !r->sequence_parallel)
    FAIL("--tp-comm-overlap pipelines the sequence-parallel all-gathers and reduce-scatters with their GEMMs "
         "(Transformer Engine's userbuffers); add --sequence-parallel");
  plan->tp_comm_overlap = r->tp_comm_overlap;
  double reserve = r->memory_reserve_given ? r->memory_reserve_gib : SIM_DEFAULT_MEMORY_RESERVE_GIB;
  if (!(reserve >= 0 && reserve <= 1024))
    FAIL("--memory-reserve %g GiB is outside 0 to 1024; give the GiB of GPU memory to keep back, e.g. 3", reserve);
  plan->memory_reserve_bytes = reserve * 1073741824.0;
  if (r->attention_given) {
    plan->attention = r->attention;
    if (own)
      FAIL("--attention does not apply to %s, which runs its own attention code; drop it", with);
    plan->attention_given = TRUE;
  }
  /* TeraPipe's code is PyTorch eager (test_transformer_terapipe.py) */
  plan->framework = r->framework_given ? r->framework : own ? MODEL_FRAMEWORK_EAGER : MODEL_FRAMEWORK_MEGATRON;
  if (!r->memory_reserve_given && !own && !r->zero &&
      (plan->framework == MODEL_FRAMEWORK_EAGER || plan->ac != MODEL_RECOMPUTE_NONE)) {
    /* the reserve from its mechanisms: the CUDA context, NCCL's buffers for
     * each communicator the rank is in (tensor, data or FSDP with the
     * context-parallel ranks, context, and the pipeline's two peers); the
     * caching allocator's rounding is counted with the activations */
    guint groups = (plan->tp > 1) + (plan->dp * plan->cp > 1) + (plan->cp > 1);
    plan->memory_context_bytes = SIM_CUDA_CONTEXT_GIB * 1073741824.0;
    plan->memory_nccl_bytes = groups * SIM_NCCL_COLL_CHANNELS * SIM_NCCL_CHANNEL_BYTES +
                              (plan->pp > 1 ? 2.0 * MAX(cluster->net.p2p_net_channels, 1u) * 4194304.0 : 0);
    plan->memory_reserve_bytes = plan->memory_context_bytes + plan->memory_nccl_bytes;
  }
  if (r->framework_given && own)
    FAIL("--framework does not apply to %s, which runs its own PyTorch eager code; drop it", with);
  if (r->cuda_graphs && r->host_op_given)
    FAIL("--cuda-graphs replays the kernels without host launches, which --host-op-us prices; give one of them");
  plan->host_op_s = r->cuda_graphs ? 0
                    : r->host_op_given ? r->host_op_us * 1e-6
                    : plan->framework == MODEL_FRAMEWORK_EAGER ? SIM_EAGER_HOST_OP_US * 1e-6
                                                               : 0;
  plan->clock = r->clock_given ? r->clock : SIM_CLOCK_SUSTAINED;
  if (r->power_limit_given && !(r->power_limit_W >= 1 && r->power_limit_W <= 1e5))
    FAIL("--power-limit %g W is outside 1 to 1e5; give the GPUs' board power cap in watts, e.g. 500", r->power_limit_W);
  plan->power_limit_W = r->power_limit_given ? r->power_limit_W : cluster->gpu_power_limit_W;
  plan->price_per_gpu_hour = r->price_per_gpu_hour > 0 ? r->price_per_gpu_hour : cluster->price_per_gpu_hour;
  if (r->precision_given) {
    plan->precision = r->precision;
    if (plan->precision == MODEL_PRECISION_FP8 && (own || r->zero))
      FAIL("--precision fp8 is Transformer Engine's, modelled for PTD-P; drop it with %s", r->zero ? "--zero" : with);
    plan->precision_given = TRUE;
  }
  /* no pipeline sends (TeraPipe sends its own way, ZeRO has no pipeline);
   * sequence parallelism sends each rank's shard, nothing to gather */
  plan->scatter_gather = !r->no_scatter_gather && !own && !r->zero && !r->sequence_parallel;
  plan->fusion = !r->no_fusion;
  plan->symmetry = !r->no_symmetry;
  plan->exact = r->exact;
  plan->allow_oom = r->allow_oom;
  plan->tokens = r->tokens;

  /* PyTorch FSDP2 as torchtitan applies it: fully_shard over the
   * data-parallel ranks (with context parallelism, d x cp of them: its
   * dp_shard_cp mesh), or HSDP, sharded within groups and replicated
   * across R of them (torchtitan's dp_replicate) */
  gboolean fsdp = r->fsdp || r->hsdp;
  if (!fsdp && (r->fsdp_reduce_dtype_given || r->fsdp_reshard_given))
    FAIL("--fsdp-reduce-dtype and --fsdp-reshard-after-forward are FSDP2's; add --fsdp or --hsdp R, or drop them");
  if (fsdp) {
    const char *name = r->hsdp ? "--hsdp" : "--fsdp";
    guint shards = dp * cp;
    if (r->zero)
      FAIL("%s and --zero are two ways to shard the same state; use one (--zero for DeepSpeed as SC21 ran it, %s for "
           "PyTorch FSDP2)",
           name, name);
    if (own)
      FAIL("%s is not modelled with %s; drop one", name, with);
    if (r->stage_times)
      FAIL("%s has nothing to shard under --stage-times (only the pipeline's passes run); drop one", name);
    if (row->chunks == SIM_CHUNKS_TWO || row->chunks == SIM_CHUNKS_FILE)
      FAIL("%s is not modelled with %s yet (a stage holding the first and the last chunk, or two copies, shards "
           "other parameters); drop one, or use zb-h1, zb-h2, zb-1p, zb-2p or interleaved-zb",
           name, row->word ? row->name : "--schedule-file");
    if (r->distributed_optimizer || r->overlap_param_gather)
      FAIL("%s shards the optimizer state and gathers the parameters itself; drop %s", name,
           r->distributed_optimizer ? "--distributed-optimizer" : "--overlap-param-gather");
    if (r->ddp_given)
      FAIL("%s reduce-scatters each layer's gradients as its backward ends; drop --ddp", name);
    if (shards < 2)
      FAIL("%s needs at least 2 data-parallel ranks to shard over (d x cp is %u); use more GPUs or a smaller --tp, --pp "
           "or --cp",
           name, shards);
    if (r->hsdp && (r->hsdp >= shards || shards % r->hsdp))
      FAIL("--hsdp %u must divide the %u data-parallel ranks (d x cp) into groups of at least 2; use a divisor of %u "
           "below it",
           r->hsdp, shards, shards);
    plan->fsdp = TRUE;
    plan->hsdp_replicas = r->hsdp ? r->hsdp : 1;
    plan->fsdp_reduce_fp32 = !r->fsdp_reduce_dtype_given || r->fsdp_reduce_dtype == SIM_REDUCE_FP32;
    /* torchtitan's default: reshard after forward unless pipelining
     * (torchtitan/models/llama3/infra/parallelize.py, apply_fsdp) */
    plan->reshard_after_forward = !r->fsdp_reshard_given || r->fsdp_reshard == SIM_RESHARD_DEFAULT
                                      ? r->pp == 1
                                      : r->fsdp_reshard == SIM_RESHARD_ALWAYS;
  }
  if (fsdp && model_is_moe(&r->model))
    FAIL("%s is not modelled for mixture-of-experts models; use the distributed optimizer (Megatron-Core's) instead",
         r->hsdp ? "--hsdp" : "--fsdp");
  if (!sim_moe_build(r, plan, error))
    return FALSE;

  /* A model chunk of no transformer layer (the embedding's or the loss's
   * alone) has no block to hang FSDP2's root gather and reduction on */
  if (plan->fsdp && !r->zero && !own)
    for (guint s = 0; s < r->pp; s++)
      for (guint c = 0; c < v; c++)
        if (sim_plan_chunk_layers(plan, s, c) == 0)
          FAIL("model chunk %u of stage %u holds no transformer layer, which FSDP2 is not modelled with; give every "
               "chunk a layer",
               c, s);
  /* Keep the task graph within what one process can hold. */
  double stage_items = 2.0 * m_mb * v;
  double per_layer = 6.0 + (cp > 1 ? 6.0 * cp : 0) + (r->tp_comm_overlap ? 8.0 * r->tp : 0) +
                     (model_is_moe(m) ? 8.0 : 0);
  double ops = stage_items * r->pp * (per_layer * ((double)m->layers / r->pp) / v + 4) *
               (plan->symmetry ? 1.0 : (double)r->tp * dp);
  if (ops > 60e6) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_TOO_BIG,
                "this configuration needs about %.0f million simulated ops, over the limit of 60 million%s",
                ops / 1e6, plan->symmetry ? "; use fewer microbatches" : "; drop --no-symmetry");
    return FALSE;
  }
  return build_stragglers(r, cluster, plan, error);
}

const ModelProfile *sim_request_clock_profile(const SimPlanRequest *r, const TopoCluster *cluster,
                                              const ModelProfile *profile, ModelProfile *scratch, GError **error) {
  if (r->clock_given && r->clock == SIM_CLOCK_BURST) { /* the boost clock, whatever the cap */
    *scratch = *profile;
    scratch->sustained_clock_ratio = 1;
    return scratch;
  }
  double cap = r->power_limit_given ? r->power_limit_W : cluster->gpu_power_limit_W;
  if (!(cap > 0))
    return profile;
  char *what = r->power_limit_given
                   ? g_strdup_printf("--power-limit %g W", cap)
                   : g_strdup_printf("cluster '%s' caps its GPUs at %g W (gpu_power_limit_W), which", cluster->name, cap);
  const char *drop = r->power_limit_given ? "drop --power-limit" : "drop gpu_power_limit_W from the cluster's file";
  gboolean ok = FALSE; /* (its range was checked where it was read: the option, the cluster's file) */
  if (!profile->has_power)
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "%s needs the device's power model, and profile '%s' has none (no \"power\" block); use a profile "
                "with one (ptdsim fit writes it from sustained measurements with clock and power samples), or %s",
                what, profile->name, drop);
  else if (!(cap > profile->power_idle_W && cap <= profile->power_rated_W))
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "%s is outside what profile '%s' models (above its idle %g W, at most its rated %g W: the cap its "
                "sustained clock was measured under); give a cap in that range",
                what, profile->name, profile->power_idle_W, profile->power_rated_W);
  else
    ok = TRUE;
  g_free(what);
  if (!ok)
    return NULL;
  *scratch = *profile;
  scratch->sustained_clock_ratio = model_power_clock_ratio(profile, cap);
  return scratch;
}

gboolean sim_recompute_modules_parse(const char *text, guint *bits, GError **error) {
  /* Megatron-Core's names (transformer_config.py, recompute_modules) */
  static const PtdWord names[] = {{"core_attn", MODEL_RC_CORE_ATTN},
                                  {"mlp", MODEL_RC_MLP},
                                  {"layernorm", MODEL_RC_LAYERNORM},
                                  {"moe_act", MODEL_RC_MOE_ACT},
                                  {"mla_up_proj", MODEL_RC_MLA_UP_PROJ},
                                  {"moe", MODEL_RC_MOE},
                                  {"shared_experts", MODEL_RC_SHARED_EXPERTS},
                                  {NULL, 0}};
  *bits = 0;
  if (strcmp(text, "none") == 0)
    return TRUE;
  gchar **parts = g_strsplit(text, ",", -1);
  gboolean ok = parts[0] != NULL;
  for (guint i = 0; ok && parts[i]; i++) {
    int v = 0;
    ok = ptd_word_value(names, parts[i], &v);
    if (ok)
      *bits |= (guint)v;
    else {
      char *echo = ptd_echo(parts[i], PTD_ECHO_MAX, FALSE);
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                  "--recompute-modules: unknown module '%s'; give a comma list of core_attn, mlp, layernorm, moe_act, "
                  "mla_up_proj, moe, shared_experts, or none",
                  echo);
      g_free(echo);
    }
  }
  if (ok && parts[0] == NULL)
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--recompute-modules is empty; give a comma list of core_attn, mlp, layernorm, moe_act, mla_up_proj, "
                "moe, shared_experts, or none");
  g_strfreev(parts);
  return ok;
}
