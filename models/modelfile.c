/* ptdsim — a model's shape read from a file (see modelfile.h).
 *
 * The Hugging Face families, and where each field's meaning comes from
 * (huggingface/transformers, src/transformers/models/):
 *   llama/configuration_llama.py, modeling_llama.py: hidden_size,
 *     intermediate_size (the SwiGLU MLP's gate and up width), num_hidden_layers,
 *     num_attention_heads, num_key_value_heads (None: the heads), head_dim
 *     (None: hidden_size / heads), vocab_size, max_position_embeddings,
 *     tie_word_embeddings, rms_norm_eps (RMSNorm), attention_bias (q, k, v
 *     and o projections), mlp_bias, hidden_act (silu: SwiGLU), rope_*.
 *   qwen3/configuration_qwen3.py, modeling_qwen3.py: Llama's fields, head_dim
 *     (default 128), RMSNorm over each query and key head (q_norm, k_norm),
 *     use_sliding_window / sliding_window / layer_types.
 *   qwen3_moe/configuration_qwen3_moe.py, modeling_qwen3_moe.py: num_experts,
 *     num_experts_per_tok, moe_intermediate_size (one expert's width); layer i
 *     is sparse when i is not in mlp_only_layers and (i + 1) %
 *     decoder_sparse_step == 0; no shared experts.
 *   mixtral/configuration_mixtral.py, modeling_mixtral.py: num_local_experts
 *     experts of width intermediate_size, num_experts_per_tok per token, every
 *     layer; sliding_window (None: full attention).
 *   deepseek_v3/configuration_deepseek_v3.py, modeling_deepseek_v3.py:
 *     multi-head latent attention (q_lora_rank (None: no query
 *     down-projection), kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim,
 *     v_head_dim; num_key_value_heads unused); n_routed_experts of width
 *     moe_intermediate_size, n_shared_experts of that width together, layer i
 *     sparse when i >= first_k_dense_replace and i % moe_layer_freq == 0,
 *     num_experts_per_tok per token, the router's e_score_correction_bias
 *     (topk_method noaux_tc); num_nextn_predict_layers multi-token-prediction
 *     modules (DeepSeek-V3 technical report, section 2.2).  n_group and
 *     topk_group choose which experts a token may reach, not the shape:
 *     --moe-router-num-groups and --moe-router-group-topk set them. */
#include "modelfile.h"

#include <math.h>
#include <string.h>

#include "../base/jsonutil.h"
#include "../base/text.h"

/* The ranges of a model file's numbers: those plan/validate.c accepts. */
static const PtdRange r_layers = {1, 100000, FALSE, TRUE, "layers"};
static const PtdRange r_width = {1, 1048576, FALSE, TRUE, "elements"};
static const PtdRange r_width0 = {0, 1048576, FALSE, TRUE, "elements"};
static const PtdRange r_ffn = {1, 16777216, FALSE, TRUE, "elements"};
static const PtdRange r_heads = {1, 1048576, FALSE, TRUE, "heads"};
static const PtdRange r_seq = {1, 1048576, FALSE, TRUE, "tokens"};
static const PtdRange r_vocab = {1, 16777216, FALSE, TRUE, "tokens"};
static const PtdRange r_experts = {1, 1048576, FALSE, TRUE, "experts"};
static const PtdRange r_experts0 = {0, 1048576, FALSE, TRUE, "experts"};
static const PtdRange r_layers0 = {0, 100000, FALSE, TRUE, "layers"};
static const PtdRange r_params = {1, 1e18, FALSE, TRUE, "parameters"};

static gboolean fail(GError **error, const char *file, const char *key, const char *fmt, ...) G_GNUC_PRINTF(4, 5);
static gboolean fail(GError **error, const char *file, const char *key, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *why = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  if (key)
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "%s: key '%s' %s", file, key, why);
  else
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "%s: %s", file, why);
  g_free(why);
  return FALSE;
}

static const cJSON *item(const cJSON *o, const char *key) {
  const cJSON *i = cJSON_GetObjectItemCaseSensitive(o, key);
  return i && !cJSON_IsNull(i) ? i : NULL; /* Hugging Face writes null for "the default" */
}

/* A whole number at `key` in `range`; absent (or null): `dflt`, or an
 * error when `dflt` is G_MAXUINT (required). */
static gboolean whole(const cJSON *o, const char *key, const char *file, const PtdRange *range, guint dflt, guint *out,
                      GError **error) {
  if (!item(o, key)) {
    if (dflt == G_MAXUINT)
      return fail(error, file, key, "is missing; a model file gives it");
    *out = dflt;
    return TRUE;
  }
  double v;
  if (!ptd_json_in(o, key, file, range, &v, error))
    return FALSE;
  *out = (guint)v;
  return TRUE;
}

static gboolean boolean(const cJSON *o, const char *key, const char *file, gboolean dflt, gboolean *out,
                        GError **error) {
  const cJSON *i = item(o, key);
  if (!i) {
    *out = dflt;
    return TRUE;
  }
  if (!cJSON_IsBool(i))
    return fail(error, file, key, "must be true or false");
  *out = cJSON_IsTrue(i);
  return TRUE;
}

/* A word at `key` (absent: `dflt`), which must be one of `words` (NULL
 * terminated); its index in *out. */
static gboolean word(const cJSON *o, const char *key, const char *file, const char *const *words, guint dflt,
                     guint *out, GError **error) {
  const cJSON *i = item(o, key);
  if (!i) {
    *out = dflt;
    return TRUE;
  }
  GString *list = g_string_new(NULL);
  for (guint w = 0; words[w]; w++) {
    if (cJSON_IsString(i) && strcmp(i->valuestring, words[w]) == 0) {
      *out = w;
      g_string_free(list, TRUE);
      return TRUE;
    }
    g_string_append_printf(list, "%s%s", w ? ", " : "", words[w]);
  }
  fail(error, file, key, "must be one of %s", list->str);
  g_string_free(list, TRUE);
  return FALSE;
}

/* The optional fields at their defaults where they equal them (a file's
 * head_dim of h/a is the shape without one). */
static void normalise(ModelShape *m) {
  if (m->ffn_hidden == 4 * m->hidden)
    m->ffn_hidden = 0;
  if (m->query_groups == m->heads)
    m->query_groups = 0;
  if (m->kv_channels && m->hidden % m->heads == 0 && m->kv_channels == m->hidden / m->heads)
    m->kv_channels = 0;
}

/* The most weights one kind of matrix of a model file may add up to
 * (every layer's, every expert's): the counts stay exact in 64 bits. */
#define MAX_WEIGHTS 1e17

/* What every shape must hold before it is counted. */
static gboolean shape_check(const ModelShape *m, const char *file, GError **error) {
  double h = m->hidden, d = model_head_dim(m) + (double)m->rope_dim + m->v_dim, widest = MAX(model_ffn(m), m->shared_ffn);
  double sizes[] = {(double)m->layers * h * ((double)m->heads + 2.0 * model_groups(m)) * d,
                    (double)m->layers * h * widest * 3.0,
                    (double)m->layers * h * (double)m->experts * (3.0 * model_moe_ffn(m) + 1.0),
                    (double)m->layers * ((double)m->q_lora + m->kv_lora) * ((double)m->heads * d + h),
                    (double)m->vocab * h * 2.0 + (double)m->seq_len * h};
  for (guint i = 0; i < G_N_ELEMENTS(sizes); i++)
    if (sizes[i] > MAX_WEIGHTS)
      return fail(error, file, NULL, "the model has more than %g parameters, more than ptdsim counts", MAX_WEIGHTS);
  if (!m->kv_channels && m->hidden % m->heads)
    return fail(error, file, NULL,
                "the hidden size %u is not a multiple of the %u attention heads, and no head dimension is given",
                m->hidden, m->heads);
  guint g = model_groups(m);
  if (!model_is_mla(m) && (g > m->heads || m->heads % g))
    return fail(error, file, NULL, "the %u key/value heads do not divide the %u attention heads", g, m->heads);
  if (model_is_moe(m) && (m->topk < 1 || m->topk > m->experts))
    return fail(error, file, NULL, "each token's %u experts are not between 1 and the %u experts", m->topk,
                m->experts);
  if (model_is_moe(m) && model_moe_layer_count(m) == 0)
    return fail(error, file, NULL, "no layer is a mixture-of-experts layer (the first %u stay dense)",
                m->first_dense);
  return TRUE;
}

/* --- ptdsim's own model JSON --- */

static const char *const own_keys[] = {
    "layers", "hidden", "heads", "seq_len", "vocab", "ffn_hidden", "query_groups", "kv_channels", "mlp", "norm",
    "position_embedding", "tied_embeddings", "linear_bias", "parameters", "active_parameters", "experts", "moe_topk",
    "moe_ffn_hidden", "moe_shared_ffn_hidden", "moe_layers", "moe_layer_freq", "moe_first_dense", "router_bias",
    "qk_norm", "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim", "mtp_layers", NULL};

static gboolean own_model(const cJSON *o, const char *file, gboolean strict, ModelShape *m, GError **error) {
  if (strict) { /* a model file's own keys only: a misspelt one is not dropped */
    const cJSON *c;
    cJSON_ArrayForEach(c, o) {
      gboolean known = FALSE;
      for (guint k = 0; own_keys[k] && !known; k++)
        known = strcmp(own_keys[k], c->string) == 0;
      if (!known) {
        char *echo = ptd_echo(c->string, PTD_ECHO_MAX, FALSE); /* a key is the user's bytes: escaped */
        fail(error, file, echo,
             "is not a model key; a model file has layers, hidden, heads and the optional keys doc/usage.md lists (or "
             "is a Hugging Face config.json, with model_type)");
        g_free(echo);
        return FALSE;
      }
    }
  }
  static const char *const mlps[] = {"gelu", "swiglu", NULL}, *const norms[] = {"layernorm", "rmsnorm", NULL},
                           *const positions[] = {"learned", "rope", NULL};
  guint mlp, norm, position;
  gboolean tied, bias;
  memset(m, 0, sizeof *m);
  if (!whole(o, "layers", file, &r_layers, G_MAXUINT, &m->layers, error) ||
      !whole(o, "hidden", file, &r_width, G_MAXUINT, &m->hidden, error) ||
      !whole(o, "heads", file, &r_heads, G_MAXUINT, &m->heads, error) ||
      !whole(o, "seq_len", file, &r_seq, 2048, &m->seq_len, error) ||
      !whole(o, "vocab", file, &r_vocab, 51200, &m->vocab, error) ||
      !whole(o, "ffn_hidden", file, &r_ffn, 0, &m->ffn_hidden, error) ||
      !whole(o, "query_groups", file, &r_heads, 0, &m->query_groups, error) ||
      !whole(o, "kv_channels", file, &r_width, 0, &m->kv_channels, error) ||
      !word(o, "mlp", file, mlps, 0, &mlp, error) || !word(o, "norm", file, norms, 0, &norm, error) ||
      !word(o, "position_embedding", file, positions, 0, &position, error) ||
      !boolean(o, "tied_embeddings", file, TRUE, &tied, error) ||
      !boolean(o, "linear_bias", file, TRUE, &bias, error) ||
      !whole(o, "experts", file, &r_experts0, 0, &m->experts, error) ||
      !whole(o, "mtp_layers", file, &r_layers0, 0, &m->mtp, error))
    return FALSE;
  m->mlp = mlp ? MODEL_MLP_SWIGLU : MODEL_MLP_GELU;
  m->norm = norm ? MODEL_NORM_RMSNORM : MODEL_NORM_LAYERNORM;
  m->position = position ? MODEL_POSITION_ROTARY : MODEL_POSITION_LEARNED;
  m->untied = !tied;
  m->no_bias = !bias;
  static const char *const moe_keys[] = {"moe_topk", "moe_ffn_hidden", "moe_shared_ffn_hidden", "moe_layers",
                                         "moe_layer_freq", "moe_first_dense", "router_bias", "active_parameters"};
  if (!m->experts) {
    for (guint k = 0; k < G_N_ELEMENTS(moe_keys); k++)
      if (item(o, moe_keys[k]))
        return fail(error, file, moe_keys[k], "shapes mixture-of-experts layers, but 'experts' is not given");
  } else if (!whole(o, "moe_topk", file, &r_experts, G_MAXUINT, &m->topk, error) ||
             !whole(o, "moe_ffn_hidden", file, &r_ffn, 0, &m->moe_ffn, error) ||
             !whole(o, "moe_shared_ffn_hidden", file, &r_width0, 0, &m->shared_ffn, error) ||
             !whole(o, "moe_layer_freq", file, &r_layers, 1, &m->moe_freq, error) ||
             !whole(o, "moe_first_dense", file, &r_layers0, 0, &m->first_dense, error))
    return FALSE;
  if (m->moe_freq == 1)
    m->moe_freq = 0; /* every layer: the built-in shapes' way of saying it */
  if (item(o, "kv_lora_rank")) {
    if (!whole(o, "kv_lora_rank", file, &r_width, G_MAXUINT, &m->kv_lora, error) ||
        !whole(o, "q_lora_rank", file, &r_width0, 0, &m->q_lora, error) ||
        !whole(o, "qk_rope_head_dim", file, &r_width, G_MAXUINT, &m->rope_dim, error) ||
        !whole(o, "v_head_dim", file, &r_width, G_MAXUINT, &m->v_dim, error))
      return FALSE;
  } else {
    static const char *const mla_keys[] = {"q_lora_rank", "qk_rope_head_dim", "v_head_dim"};
    for (guint k = 0; k < G_N_ELEMENTS(mla_keys); k++)
      if (item(o, mla_keys[k]))
        return fail(error, file, mla_keys[k], "shapes latent attention, but 'kv_lora_rank' is not given");
  }
  gboolean has_qk = item(o, "qk_norm") != NULL, has_rb = item(o, "router_bias") != NULL;
  if (!boolean(o, "qk_norm", file, FALSE, &m->qk_norm, error) ||
      !boolean(o, "router_bias", file, FALSE, &m->router_bias, error))
    return FALSE;
  if (model_is_mla(m))
    m->query_groups = 0; /* latent attention has no key/value groups (the run writes the heads) */
  normalise(m);
  if (!shape_check(m, file, error))
    return FALSE;
  /* the counts a run writes: the MoE layers give the dense prefix where the
   * file does not; the parameters give the norms and biases a run's config
   * block does not name (qk_norm, router_bias) */
  if (m->experts && item(o, "moe_layers")) {
    guint want;
    if (!whole(o, "moe_layers", file, &r_layers, G_MAXUINT, &want, error))
      return FALSE;
    for (guint fd = 0; !item(o, "moe_first_dense") && fd < m->layers; fd++) {
      m->first_dense = fd;
      if (model_moe_layer_count(m) == want)
        break;
    }
    if (model_moe_layer_count(m) != want)
      return fail(error, file, "moe_layers", "is %u, but the shape read has %u mixture-of-experts layers", want,
                  model_moe_layer_count(m));
  }
  if (item(o, "parameters")) {
    double want;
    if (!ptd_json_in(o, "parameters", file, &r_params, &want, error))
      return FALSE;
    gboolean found = FALSE;
    for (guint combo = 0; combo < 4 && !found; combo++) {
      gboolean qk = combo & 1, rb = (combo & 2) != 0;
      if ((qk && has_qk) || (rb && (has_rb || !m->experts)))
        continue;
      ModelShape t = *m;
      t.qk_norm = m->qk_norm || qk;
      t.router_bias = m->router_bias || rb;
      if ((double)model_param_count(&t) == want) {
        *m = t;
        found = TRUE;
      }
    }
    if (!found)
      return fail(error, file, "parameters", "is %.0f, but the shape read has %" G_GUINT64_FORMAT " parameters", want,
                  model_param_count(m));
  }
  if (item(o, "active_parameters")) {
    double want;
    if (!ptd_json_in(o, "active_parameters", file, &r_params, &want, error))
      return FALSE;
    if ((double)model_active_param_count(m) != want)
      return fail(error, file, "active_parameters",
                  "is %.0f, but the shape read has %" G_GUINT64_FORMAT " parameters a token passes through", want,
                  model_active_param_count(m));
  }
  return TRUE;
}

/* --- Hugging Face config.json --- */

typedef enum { HF_LLAMA, HF_QWEN3, HF_QWEN3_MOE, HF_MIXTRAL, HF_DEEPSEEK_V3, HF_N } HfFamily;
static const struct {
  const char *model_type, *architecture;
} families[HF_N] = {{"llama", "LlamaForCausalLM"},
                    {"qwen3", "Qwen3ForCausalLM"},
                    {"qwen3_moe", "Qwen3MoeForCausalLM"},
                    {"mixtral", "MixtralForCausalLM"},
                    {"deepseek_v3", "DeepseekV3ForCausalLM"}};

static gboolean hf_family(const cJSON *o, const char *file, HfFamily *out, GError **error) {
  const cJSON *type = item(o, "model_type"), *archs = item(o, "architectures");
  gint by_type = -1, by_arch = -1;
  GString *known = g_string_new(NULL);
  for (guint f = 0; f < HF_N; f++)
    g_string_append_printf(known, "%s%s (%s)", f ? ", " : "", families[f].model_type, families[f].architecture);
  gboolean ok = TRUE;
  if (type && !cJSON_IsString(type))
    ok = fail(error, file, "model_type", "must be a string");
  else if (type) {
    for (guint f = 0; f < HF_N && by_type < 0; f++)
      if (strcmp(type->valuestring, families[f].model_type) == 0)
        by_type = (gint)f;
    if (by_type < 0) {
      char *echo = ptd_echo(type->valuestring, PTD_ECHO_MAX, FALSE);
      ok = fail(error, file, "model_type", "is '%s', not a family ptdsim reads: %s", echo, known->str);
      g_free(echo);
    }
  }
  if (ok && archs) {
    const cJSON *a = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
    if (!a || !cJSON_IsString(a) || cJSON_GetArraySize(archs) != 1)
      ok = fail(error, file, "architectures", "must be a list of one class name");
    else {
      for (guint f = 0; f < HF_N && by_arch < 0; f++)
        if (strcmp(a->valuestring, families[f].architecture) == 0)
          by_arch = (gint)f;
      if (by_arch < 0 || (by_type >= 0 && by_arch != by_type)) {
        char *echo = ptd_echo(a->valuestring, PTD_ECHO_MAX, FALSE);
        ok = fail(error, file, "architectures", "is ['%s'], not a class ptdsim reads%s: %s", echo,
                  by_arch >= 0 ? " with this model_type" : "", known->str);
        g_free(echo);
      }
    }
  }
  g_string_free(known, TRUE);
  if (!ok)
    return FALSE;
  *out = (HfFamily)(by_type >= 0 ? by_type : by_arch);
  return TRUE;
}

static gboolean hf_model(const cJSON *o, const char *file, ModelShape *m, GError **error) {
  HfFamily fam;
  if (!hf_family(o, file, &fam, error))
    return FALSE;
  memset(m, 0, sizeof *m);
  guint heads_kv, head_dim;
  if (!whole(o, "num_hidden_layers", file, &r_layers, G_MAXUINT, &m->layers, error) ||
      !whole(o, "hidden_size", file, &r_width, G_MAXUINT, &m->hidden, error) ||
      !whole(o, "num_attention_heads", file, &r_heads, G_MAXUINT, &m->heads, error) ||
      !whole(o, "vocab_size", file, &r_vocab, G_MAXUINT, &m->vocab, error) ||
      !whole(o, "max_position_embeddings", file, &r_seq, G_MAXUINT, &m->seq_len, error) ||
      !whole(o, "intermediate_size", file, &r_ffn, G_MAXUINT, &m->ffn_hidden, error) ||
      !whole(o, "num_key_value_heads", file, &r_heads, m->heads, &heads_kv, error))
    return FALSE;
  /* Qwen3's head_dim defaults to 128, the others' to hidden / heads */
  guint dflt_head = fam == HF_QWEN3 || fam == HF_QWEN3_MOE ? 128 : m->hidden / m->heads;
  if (fam != HF_DEEPSEEK_V3 && !item(o, "head_dim") && dflt_head == 0)
    return fail(error, file, "num_attention_heads", "is more than hidden_size, and no head_dim is given");
  if (fam != HF_DEEPSEEK_V3 && !whole(o, "head_dim", file, &r_width, dflt_head, &head_dim, error))
    return FALSE;
  /* the MLP: every family here gates with SiLU (SwiGLU) */
  const cJSON *act = item(o, "hidden_act");
  if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
    return fail(error, file, "hidden_act",
                "is not \"silu\": ptdsim models these families' gated MLP with SiLU (SwiGLU) only");
  m->mlp = MODEL_MLP_SWIGLU;
  m->norm = MODEL_NORM_RMSNORM; /* rms_norm_eps: the norm's epsilon, not its shape */
  m->position = MODEL_POSITION_ROTARY;
  gboolean tie, attn_bias, mlp_bias;
  if (!boolean(o, "tie_word_embeddings", file, FALSE, &tie, error) ||
      !boolean(o, "attention_bias", file, FALSE, &attn_bias, error) ||
      !boolean(o, "mlp_bias", file, FALSE, &mlp_bias, error))
    return FALSE;
  if (attn_bias != mlp_bias)
    return fail(error, file, attn_bias ? "attention_bias" : "mlp_bias",
                "is true while the %s layers have no biases; ptdsim gives every linear layer a bias or none",
                attn_bias ? "MLP's" : "attention's");
  m->untied = !tie;
  m->no_bias = !attn_bias;
  /* attention over a window changes the attention core ptdsim prices */
  gboolean sliding;
  if (!boolean(o, "use_sliding_window", file, FALSE, &sliding, error))
    return FALSE;
  if (sliding)
    return fail(error, file, "use_sliding_window", "is true; ptdsim models full causal attention only");
  if (fam == HF_MIXTRAL && item(o, "sliding_window"))
    return fail(error, file, "sliding_window", "is set; ptdsim models full causal attention only (null: full)");
  const cJSON *types = item(o, "layer_types"), *t;
  if (types) {
    if (!cJSON_IsArray(types))
      return fail(error, file, "layer_types", "must be a list");
    cJSON_ArrayForEach(t, types) {
      if (!cJSON_IsString(t) || strcmp(t->valuestring, "full_attention") != 0)
        return fail(error, file, "layer_types", "names a layer other than \"full_attention\"; ptdsim models full "
                                                "causal attention only");
    }
  }
  m->qk_norm = fam == HF_QWEN3 || fam == HF_QWEN3_MOE;
  if (fam != HF_DEEPSEEK_V3) {
    m->query_groups = heads_kv;
    m->kv_channels = head_dim;
  }
  switch (fam) {
  case HF_QWEN3_MOE: {
    guint step;
    if (!whole(o, "num_experts", file, &r_experts0, G_MAXUINT, &m->experts, error) ||
        !whole(o, "decoder_sparse_step", file, &r_layers, 1, &step, error))
      return FALSE;
    if (!m->experts)
      break;
    if (!whole(o, "num_experts_per_tok", file, &r_experts, G_MAXUINT, &m->topk, error) ||
        !whole(o, "moe_intermediate_size", file, &r_ffn, G_MAXUINT, &m->moe_ffn, error))
      return FALSE;
    if (step != 1)
      return fail(error, file, "decoder_sparse_step",
                  "is %u: sparse layers from the %u-th on; ptdsim places them after a dense prefix, every layer "
                  "or every n-th from it (use 1)",
                  step, step);
    /* mlp_only_layers: dense layers, which ptdsim takes as a prefix 0..k-1 */
    const cJSON *dense = item(o, "mlp_only_layers"), *d;
    if (dense && !cJSON_IsArray(dense))
      return fail(error, file, "mlp_only_layers", "must be a list of layer indices");
    guint k = 0;
    if (dense)
      cJSON_ArrayForEach(d, dense) {
        if (!cJSON_IsNumber(d) || d->valuedouble != k)
          return fail(error, file, "mlp_only_layers",
                      "is not the layers 0, 1, ..., k-1; ptdsim keeps only a first run of layers dense");
        k++;
      }
    m->first_dense = k;
    break;
  }
  case HF_MIXTRAL:
    if (!whole(o, "num_local_experts", file, &r_experts, G_MAXUINT, &m->experts, error) ||
        !whole(o, "num_experts_per_tok", file, &r_experts, G_MAXUINT, &m->topk, error))
      return FALSE;
    m->moe_ffn = m->ffn_hidden; /* each expert is the MLP of intermediate_size */
    break;
  case HF_DEEPSEEK_V3: {
    guint shared, freq;
    if (!whole(o, "n_routed_experts", file, &r_experts, G_MAXUINT, &m->experts, error) ||
        !whole(o, "num_experts_per_tok", file, &r_experts, G_MAXUINT, &m->topk, error) ||
        !whole(o, "moe_intermediate_size", file, &r_ffn, G_MAXUINT, &m->moe_ffn, error) ||
        !whole(o, "n_shared_experts", file, &r_experts0, G_MAXUINT, &shared, error) ||
        !whole(o, "first_k_dense_replace", file, &r_layers0, G_MAXUINT, &m->first_dense, error) ||
        !whole(o, "moe_layer_freq", file, &r_layers, 1, &freq, error) ||
        !whole(o, "kv_lora_rank", file, &r_width, G_MAXUINT, &m->kv_lora, error) ||
        !whole(o, "q_lora_rank", file, &r_width, 0, &m->q_lora, error) ||
        !whole(o, "qk_rope_head_dim", file, &r_width, G_MAXUINT, &m->rope_dim, error) ||
        !whole(o, "qk_nope_head_dim", file, &r_width, G_MAXUINT, &m->kv_channels, error) ||
        !whole(o, "v_head_dim", file, &r_width, G_MAXUINT, &m->v_dim, error) ||
        !whole(o, "num_nextn_predict_layers", file, &r_layers0, 0, &m->mtp, error))
      return FALSE;
    if ((guint64)shared * m->moe_ffn > r_ffn.hi)
      return fail(error, file, "n_shared_experts", "times moe_intermediate_size is more than %.0f", r_ffn.hi);
    m->shared_ffn = shared * m->moe_ffn;
    m->moe_freq = freq == 1 ? 0 : freq;
    const cJSON *method = item(o, "topk_method");
    m->router_bias = !method || (cJSON_IsString(method) && strcmp(method->valuestring, "noaux_tc") == 0);
    break;
  }
  default:
    break;
  }
  normalise(m);
  return shape_check(m, file, error);
}

gboolean model_file_from_json(const cJSON *root, const char *file, ModelShape *out, GError **error) {
  if (!cJSON_IsObject(root))
    return fail(error, file, NULL, "is not a JSON object");
  ModelShape m;
  gboolean ok;
  const cJSON *config = cJSON_GetObjectItemCaseSensitive(root, "config");
  if (item(root, "model_type") || item(root, "architectures"))
    ok = hf_model(root, file, &m, error);
  else if (config && cJSON_IsObject(config)) /* a run's whole JSON: its config block, beside the layout */
    ok = own_model(config, file, FALSE, &m, error);
  else
    ok = own_model(root, file, TRUE, &m, error);
  if (ok)
    *out = m;
  return ok;
}

gboolean model_file_read(const char *path, ModelShape *out, GError **error) {
  cJSON *root = ptd_json_load(path, error);
  if (!root)
    return FALSE;
  gboolean ok = model_file_from_json(root, path, out, error);
  cJSON_Delete(root);
  return ok;
}
