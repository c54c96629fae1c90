/* ptdsim — the calibration plan (see plan.h). */
#include "plan.h"

#include <string.h>

#include "../models/compute.h"

#define GPT(h, a, s, b, t) {.hidden = h, .heads = a, .seq = s, .micro_batch = b, .tp = t}
static const CalibLayerShape sc21_shapes[] = {
    /* GPT-3 175B (and Table 1's 145.6B row): h 12288, 96 heads, t = 8. */
    GPT(12288, 96, 2048, 1, 8),
    GPT(12288, 96, 2048, 4, 8),
    /* Table 1's 1.7B row: h 2304, 24 heads, t = 1. */
    GPT(2304, 24, 2048, 1, 1),
    GPT(2304, 24, 2048, 4, 1),
    /* Table 1's 18.4B row: h 6144, 48 heads, t = 8. */
    GPT(6144, 48, 2048, 1, 8),
    GPT(6144, 48, 2048, 4, 8),
};

/* Today's shapes.  GPT-3 175B (Brown et al. 2020, table 2.1: h 12288, 96
 * heads, vocabulary 50257 padded to 51200 by Megatron) at t = 8 with
 * Megatron's s = 2048 and at s = 4096; Llama 3 8B, 70B and 405B (Llama
 * Team 2024, "The Llama 3 Herd of Models", table 3: h 4096/8192/16384,
 * 32/64/128 heads, 8 key/value heads, FFN 14336/28672/53248, vocabulary
 * 128256) at s = 8192 (and 70B at s = 4096, b = 2), 8B on one GPU and the
 * larger two at t = 8, as their training ran tensor parallelism inside a
 * node (section 3.3.2). */
#define LLAMA(h, a, f, s, b, t) \
  {.hidden = h, .heads = a, .seq = s, .micro_batch = b, .tp = t, .kv_heads = 8, .ffn = f, .vocab = 128256, .llama = TRUE}
static const CalibLayerShape gpt3_shapes[] = {
    {.hidden = 12288, .heads = 96, .seq = 2048, .micro_batch = 1, .tp = 8, .vocab = 51200},
    {.hidden = 12288, .heads = 96, .seq = 2048, .micro_batch = 2, .tp = 8, .vocab = 51200},
    {.hidden = 12288, .heads = 96, .seq = 4096, .micro_batch = 1, .tp = 8, .vocab = 51200},
};
static const CalibLayerShape llama3_shapes[] = {
    LLAMA(4096, 32, 14336, 8192, 1, 1),
    LLAMA(8192, 64, 28672, 8192, 1, 8),
    LLAMA(8192, 64, 28672, 4096, 2, 8),
    LLAMA(16384, 128, 53248, 8192, 1, 8),
};

static const struct {
  const char *name;
  const CalibLayerShape *shapes;
  guint n;
} presets[] = {
    {"sc21", sc21_shapes, G_N_ELEMENTS(sc21_shapes)},
    {"gpt3-175b", sc21_shapes, 1},
    {"gpt3", gpt3_shapes, G_N_ELEMENTS(gpt3_shapes)},
    {"llama3", llama3_shapes, G_N_ELEMENTS(llama3_shapes)},
};

void calib_plan_config_default(CalibPlanConfig *c) {
  memset(c, 0, sizeof *c);
  memcpy(c->shapes, sc21_shapes, sizeof sc21_shapes);
  c->n_shapes = G_N_ELEMENTS(sc21_shapes);
  c->gpus = 8;
  c->nccl_min_bytes = 8;
  c->nccl_max_bytes = 1ull << 30;
  c->membw_min_bytes = 4096;
  c->membw_max_bytes = 1ull << 30;
  /* long enough for a power-capped GPU's clock to settle: the H100's fell
   * within two seconds and held (calibrate/measurements/h100-sxm5-80gb-sustained.json) */
  c->sustained_s = 20;
  /* up to 32 channels, NCCL's default ceiling (NCCL_MAX_NCHANNELS 32,
   * src/include/device.h), in the steps a collective's channel count takes */
  static const guint blocks[] = {4, 8, 16, 24, 32};
  memcpy(c->overlap_blocks, blocks, sizeof blocks);
  c->n_overlap_blocks = G_N_ELEMENTS(blocks);
  c->overlap_window_s = 0.3;
}

gboolean calib_plan_parse_blocks(const char *spec, CalibPlanConfig *cfg, GError **error) {
  char **v = g_strsplit(spec, ",", -1);
  guint n = 0, got[CALIB_MAX_OVERLAP_BLOCKS];
  gboolean ok = v[0] != NULL;
  for (char **w = v; ok && *w; w++) {
    char *end = NULL;
    guint64 x = g_ascii_strtoull(*w, &end, 10);
    ok = n < CALIB_MAX_OVERLAP_BLOCKS && end != *w && *end == '\0' && x >= 1 && x <= 1024;
    if (ok)
      got[n++] = (guint)x;
  }
  g_strfreev(v);
  if (!ok) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                "--overlap-blocks '%s' is not a comma list of at most %u whole numbers from 1 to 1024; give e.g. "
                "--overlap-blocks 4,8,16,24,32",
                spec, CALIB_MAX_OVERLAP_BLOCKS);
    return FALSE;
  }
  memcpy(cfg->overlap_blocks, got, n * sizeof *got);
  cfg->n_overlap_blocks = n;
  return TRUE;
}

void calib_layer_shape_label(const CalibLayerShape *s, char *buf, gsize len) {
  if (calib_shape_is_2021(s))
    g_snprintf(buf, len, "h=%u a=%u s=%u b=%u t=%u", s->hidden, s->heads, s->seq, s->micro_batch, s->tp);
  else
    g_snprintf(buf, len, "%s h=%u a=%u g=%u f=%u s=%u b=%u t=%u", s->llama ? "llama" : "gpt", s->hidden, s->heads,
               calib_shape_kv_heads(s), calib_shape_ffn(s), s->seq, s->micro_batch, s->tp);
}

gboolean calib_shape_is_2021(const CalibLayerShape *s) {
  return !s->llama && !s->kv_heads && !s->ffn;
}

guint calib_shape_kv_heads(const CalibLayerShape *s) {
  return s->kv_heads ? s->kv_heads : s->heads;
}

guint calib_shape_ffn(const CalibLayerShape *s) {
  return s->ffn ? s->ffn : 4 * s->hidden;
}

#define SHAPES_HELP                                                                                              \
  "give a preset (sc21, gpt3-175b, gpt3, llama3) or up to 16 comma-separated HIDDEN:HEADS:SEQ:MICRO_BATCH:TP, "    \
  "optionally followed by :KV_HEADS:FFN:VOCAB:STYLE (STYLE gpt or llama; VOCAB 0: no logit GEMMs), e.g. "        \
  "12288:96:2048:1:8 or 8192:64:8192:1:8:8:28672:128256:llama"

/* One HIDDEN:HEADS:SEQ:MICRO_BATCH:TP[:KV_HEADS:FFN:VOCAB:STYLE]. */
static gboolean parse_shape(const char *item, CalibLayerShape *out) {
  char **f = g_strsplit(item, ":", -1);
  guint n = g_strv_length(f);
  guint64 v[8] = {0};
  gboolean ok = n == 5 || n == 9;
  for (guint i = 0; ok && i < MIN(n, 8u); i++)
    ok = g_ascii_string_to_unsigned(f[i], 10, i == 7 ? 0 : 1, i == 7 ? 1u << 20 : (i == 6 ? 1u << 20 : 65536), &v[i],
                                    NULL);
  if (ok && n == 9)
    ok = strcmp(f[8], "gpt") == 0 || strcmp(f[8], "llama") == 0;
  if (ok) {
    *out = (CalibLayerShape){.hidden = (guint)v[0], .heads = (guint)v[1], .seq = (guint)v[2],
                             .micro_batch = (guint)v[3], .tp = (guint)v[4]};
    if (n == 9) {
      out->kv_heads = v[5] == v[1] ? 0 : (guint)v[5];
      out->ffn = v[6] == 4 * v[0] ? 0 : (guint)v[6];
      out->vocab = (guint)v[7];
      out->llama = strcmp(f[8], "llama") == 0;
    }
  }
  g_strfreev(f);
  return ok;
}

gboolean calib_plan_parse_shapes(const char *spec, CalibPlanConfig *cfg, GError **error) {
  for (guint i = 0; i < G_N_ELEMENTS(presets); i++)
    if (strcmp(spec, presets[i].name) == 0) {
      memcpy(cfg->shapes, presets[i].shapes, presets[i].n * sizeof *cfg->shapes);
      cfg->n_shapes = presets[i].n;
      return TRUE;
    }
  char **items = g_strsplit(spec, ",", -1);
  guint n = 0;
  gboolean ok = items[0] != NULL;
  for (char **it = items; ok && *it; it++) {
    ok = n < CALIB_MAX_SHAPES && parse_shape(*it, &cfg->shapes[n]);
    if (ok)
      n++;
    else
      g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID, "--shapes: '%s' is not a layer shape; " SHAPES_HELP, *it);
  }
  if (!items[0])
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID, "--shapes is empty; " SHAPES_HELP);
  g_strfreev(items);
  if (ok)
    cfg->n_shapes = n;
  return ok;
}

/* Mirrors calib_gpu_layer's allocations: x, out (T h); w and dw (the largest
 * weight); big, big2 (the largest activation); qkv (T 3h/t); ctx (T h/t); and
 * three element-wise buffer sets (five fp16 arrays, a byte mask and three
 * per-column vectors) over T x h, T x 4h/t and the scores B s x s. */
double calib_plan_layer_bytes(const CalibLayerShape *s) {
  double h = s->hidden, t = s->tp, T = (double)s->micro_batch * s->seq, S = s->seq;
  double B = (double)s->micro_batch * (s->heads / s->tp), ffn = 4 * h / t;
  double wmax = MAX(3 * h / t * h, ffn * h);
  double actmax = MAX(MAX(T * ffn, T * 3 * h / t), MAX(B * S * S, T * h));
  double ew_h = 11 * T * h + 6 * h, ew_f = 11 * T * ffn + 6 * ffn, ew_s = 11 * B * S * S + 6 * S;
  return 2 * (2 * T * h + 2 * wmax + 2 * actmax + T * 3 * h / t + T * h / t) + ew_h + ew_f + ew_s;
}

static void add_gemm(GArray *a, const char *op, guint64 batch, guint64 m, guint64 n, guint64 k) {
  CalibPlanGemm g = {{0}, batch, m, n, k, G_MAXUINT, "NN"};
  g_strlcpy(g.op, op, sizeof g.op);
  g_array_append_val(a, g);
}

/* A forward GEMM C[M,N] = A[M,K] B[K,N] and its two backward GEMMs. */
static void add_fwd_bwd(GArray *a, const char *name, guint64 batch, guint64 m, guint64 n, guint64 k) {
  char op[32];
  g_snprintf(op, sizeof op, "%s.fwd", name);
  add_gemm(a, op, batch, m, n, k);
  g_snprintf(op, sizeof op, "%s.dgrad", name);
  add_gemm(a, op, batch, m, k, n);
  g_snprintf(op, sizeof op, "%s.wgrad", name);
  add_gemm(a, op, batch, k, n, m);
}

static gboolean check(gboolean ok, GError **error, const char *msg) {
  if (!ok)
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID, "%s", msg);
  return ok;
}

static gboolean check_shape(const CalibLayerShape *sh, GError **error) {
  char label[96], msg[256];
  calib_layer_shape_label(sh, label, sizeof label);
  const char *why = NULL;
  if (!(sh->hidden >= 1 && sh->heads >= 1 && sh->seq >= 1 && sh->micro_batch >= 1 && sh->tp >= 1))
    why = "--hidden, --heads, --seq-len, --micro-batch and --tp must all be at least 1";
  else if (sh->hidden % sh->heads)
    why = "--hidden must be a multiple of --heads";
  else if (sh->heads % sh->tp)
    why = "--heads must be a multiple of --tp (Megatron splits heads over t)";
  else if (!(sh->hidden <= 65536 && sh->seq <= 65536 && sh->micro_batch <= 64))
    why = "the layer shape is too large to calibrate on one GPU (hidden, seq <= 65536, micro-batch <= 64)";
  else if (sh->heads % calib_shape_kv_heads(sh) || calib_shape_kv_heads(sh) % sh->tp)
    why = "the key/value heads must divide the heads and be a multiple of --tp";
  else if (calib_shape_ffn(sh) % sh->tp || sh->vocab % sh->tp)
    why = "the MLP width and the vocabulary must be multiples of --tp";
  else if (calib_plan_layer_bytes(sh) > 256.0 * 1073741824.0)
    why = "the layer needs more than 256 GiB of GPU memory; use a smaller micro-batch or sequence";
  if (why) {
    g_snprintf(msg, sizeof msg, "layer shape %s: %s", label, why);
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID, "%s", msg);
  }
  return why == NULL;
}

static gboolean same_kernel(const CalibPlanKernel *a, const CalibPlanKernel *b) {
  return strcmp(a->name, b->name) == 0 && a->fused == b->fused && a->rows == b->rows && a->cols == b->cols &&
         a->seq == b->seq && a->head_dim == b->head_dim;
}

static void add_kernel(GArray *a, const char *name, gboolean fused, guint64 rows, guint64 cols, double bytes_per_elem,
                       guint kernels, guint64 seq, guint64 head_dim) {
  CalibPlanKernel k = {{0}, fused, rows, cols, bytes_per_elem * (double)rows * (double)cols, kernels, seq, head_dim};
  g_strlcpy(k.name, name, sizeof k.name);
  for (guint i = 0; i < a->len; i++)
    if (same_kernel(&g_array_index(a, CalibPlanKernel, i), &k))
      return; /* two shapes with the same element-wise work: measure it once */
  g_array_append_val(a, k);
}

/* --- today's lists: cuBLASLt GEMMs, flash attention, memory-bound kernels --- */

static void add_lt(CalibPlan *p, const char *op, const char *layout, guint64 m, guint64 n, guint64 k, guint shape) {
  for (guint i = 0; i < p->gemmlt->len; i++) {
    const CalibPlanLtGemm *g = &g_array_index(p->gemmlt, CalibPlanLtGemm, i);
    if (strcmp(g->op, op) == 0 && strcmp(g->layout, layout) == 0 && g->m == m && g->n == n && g->k == k)
      return; /* two shapes with the same GEMM: measure it once */
  }
  CalibPlanLtGemm g = {{0}, m, n, k, shape, {0}};
  g_strlcpy(g.op, op, sizeof g.op);
  g_strlcpy(g.layout, layout, sizeof g.layout);
  g_array_append_val(p->gemmlt, g);
}

/* The three GEMMs of a Linear layer of `in` -> `out` features over T tokens,
 * as Transformer Engine issues them to cuBLASLt (column-major): forward
 * y = x W^T as TN (m = out, n = T, k = in), input gradient dx = dy W as NN
 * (m = in, n = T, k = out), weight gradient dW = dy^T x as NT (m = in,
 * n = out, k = T). */
static void add_linear(CalibPlan *p, const char *name, guint64 in, guint64 out, guint64 T, guint shape) {
  char op[32];
  g_snprintf(op, sizeof op, "lt.%s.fwd", name);
  add_lt(p, op, "TN", out, T, in, shape);
  g_snprintf(op, sizeof op, "lt.%s.dgrad", name);
  add_lt(p, op, "NN", in, T, out, shape);
  g_snprintf(op, sizeof op, "lt.%s.wgrad", name);
  add_lt(p, op, "NT", in, out, T, shape);
}

/* One tensor-parallel rank's linear layers of shape `si` (heads / t,
 * MLP / t, vocabulary / t; the GEMMs see all b s tokens, gathered under
 * sequence parallelism). */
static void add_shape_lt(CalibPlan *p, guint si) {
  const CalibLayerShape *sh = &p->cfg.shapes[si];
  guint64 h = sh->hidden, t = sh->tp, a = sh->heads, d = h / a, g = calib_shape_kv_heads(sh);
  guint64 T = (guint64)sh->micro_batch * sh->seq, ffn = calib_shape_ffn(sh) / t;
  add_linear(p, "qkv", h, (a + 2 * g) * d / t, T, si);
  add_linear(p, "proj", a * d / t, h, T, si);
  add_linear(p, "fc1", h, sh->llama ? 2 * ffn : ffn, T, si);
  add_linear(p, "fc2", ffn, h, T, si);
  if (sh->vocab)
    add_linear(p, "logits", h, sh->vocab / t, T, si);
}

/* Tile and wave quantization and the K roll-off, forward layout. */
static void add_lt_grids(CalibPlan *p) {
  static const guint sq[] = {256, 512, 1000, 1024, 1536, 2048, 3000, 4096, 6144, 8192};
  for (guint i = 0; i < G_N_ELEMENTS(sq); i++)
    add_lt(p, "lt.grid.square", "TN", sq[i], sq[i], 4096, G_MAXUINT);
  for (guint64 n = 1024; n <= 4096; n += 256)
    add_lt(p, "lt.grid.wave", "TN", n, 4096, 4096, G_MAXUINT);
  for (guint64 k = 64; k <= 16384; k *= 4)
    add_lt(p, "lt.grid.k", "TN", 4096, 4096, k, G_MAXUINT);
}

static void add_attention(GArray *a, const CalibPlanAttention *x) {
  for (guint i = 0; i < a->len; i++)
    if (memcmp(&g_array_index(a, CalibPlanAttention, i), x, sizeof *x) == 0)
      return;
  g_array_append_val(a, *x);
}

/* Flash attention's waves: b = 1, head size 128, heads per rank 1 to 32
 * (one rank of a big model holds few) and sequences 1K to 16K, multi-head
 * and 4:1 grouped-query. */
static void add_attention_grid(CalibPlan *p) {
  static const guint64 heads[] = {1, 2, 4, 8, 16, 32};
  for (guint64 s = 1024; s <= 16384; s *= 2)
    for (guint i = 0; i < G_N_ELEMENTS(heads); i++) {
      CalibPlanAttention mha = {1, heads[i], heads[i], s, 128}, gqa = {1, heads[i], MAX(heads[i] / 4, 1), s, 128};
      add_attention(p->attention, &mha);
      add_attention(p->attention, &gqa);
    }
}

static void add_mb(CalibPlan *p, const char *name, guint64 rows, guint64 cols) {
  CalibPlanMembound b = {calib_membound_op(name), rows, cols};
  g_assert(b.op);
  for (guint i = 0; i < p->membound->len; i++) {
    const CalibPlanMembound *x = &g_array_index(p->membound, CalibPlanMembound, i);
    if (x->op == b.op && x->rows == rows && x->cols == cols)
      return;
  }
  g_array_append_val(p->membound, b);
}

/* The memory-bound kernels of one tensor-parallel rank's layer at shape
 * `sh`, at their widths: the norms, residual and dropout kernels over the
 * hidden size (s / t of the tokens under sequence parallelism where t > 1),
 * the MLP's activation over ffn / t, rotary over the rank's query and key
 * heads, the FP8 casts of the linear layers' inputs, the cross-entropy over
 * the vocabulary shard. */
static void add_shape_membound(CalibPlan *p, const CalibLayerShape *sh) {
  guint64 T = (guint64)sh->micro_batch * sh->seq, t = sh->tp, h = sh->hidden, d = h / sh->heads;
  guint64 Tsp = t > 1 ? T / t : T, ffn = calib_shape_ffn(sh) / t;
  const char *norm = sh->llama ? "rmsnorm" : "layernorm";
  char name[32];
  g_snprintf(name, sizeof name, "%s.fwd", norm);
  add_mb(p, name, Tsp, h);
  g_snprintf(name, sizeof name, "%s.bwd", norm);
  add_mb(p, name, Tsp, h);
  add_mb(p, "bias_dropout_add.fwd", Tsp, h);
  add_mb(p, sh->llama ? "swiglu.fwd" : "bias_gelu.fwd", T, ffn);
  add_mb(p, sh->llama ? "swiglu.bwd" : "bias_gelu.bwd", T, ffn);
  if (sh->llama) {
    add_mb(p, "rotary.fwd", T, (sh->heads + calib_shape_kv_heads(sh)) * d / t);
    add_mb(p, "rotary.bwd", T, (sh->heads + calib_shape_kv_heads(sh)) * d / t);
  }
  add_mb(p, "fp8_cast", T, h);
  add_mb(p, "fp8_cast", T, ffn);
  if (sh->vocab) {
    add_mb(p, "cross_entropy.fwd", T, sh->vocab / t);
    add_mb(p, "cross_entropy.bwd", T, sh->vocab / t);
  }
}

/* Every kernel over 4096 columns and 256 .. 65536 rows: 2 MiB per tensor,
 * inside the L2 of any GPU since the A100 (40 MB), to 512 MiB, far outside. */
static void add_membound_sweep(CalibPlan *p) {
  for (guint i = 0; i < calib_n_membound_ops; i++)
    for (guint64 rows = 256; rows <= 65536; rows *= 4)
      add_mb(p, calib_membound_ops[i].name, rows, 4096);
}

CalibPlan *calib_plan_new(const CalibPlanConfig *c, GError **error) {
  if (!check(c->n_shapes >= 1 && c->n_shapes <= CALIB_MAX_SHAPES, error, "give 1 to 16 layer shapes (--shapes)") ||
      !check(c->gpus >= 1 && c->gpus <= 64, error, "--gpus must be 1 to 64"))
    return NULL;
  for (guint i = 0; i < c->n_shapes; i++)
    if (!check_shape(&c->shapes[i], error))
      return NULL;
  if (!check(c->nccl_min_bytes >= 1 && c->nccl_min_bytes <= c->nccl_max_bytes && c->nccl_max_bytes <= (8ull << 30) &&
                 c->membw_min_bytes >= 1 && c->membw_min_bytes <= c->membw_max_bytes &&
                 c->membw_max_bytes <= (8ull << 30),
             error, "size ranges must satisfy 1 <= min <= max <= 8 GiB"))
    return NULL;
  CalibPlan *p = g_new0(CalibPlan, 1);
  p->cfg = *c;
  p->gemm = g_array_new(FALSE, TRUE, sizeof(CalibPlanGemm));
  p->gemmlt = g_array_new(FALSE, TRUE, sizeof(CalibPlanLtGemm));
  p->attention = g_array_new(FALSE, TRUE, sizeof(CalibPlanAttention));
  p->membound = g_array_new(FALSE, TRUE, sizeof(CalibPlanMembound));
  p->modern = g_array_new(FALSE, TRUE, sizeof(CalibPlanModern));
  p->kernels = g_array_new(FALSE, TRUE, sizeof(CalibPlanKernel));
  p->membw_bytes = g_array_new(FALSE, TRUE, sizeof(double));
  p->nccl_bytes = g_array_new(FALSE, TRUE, sizeof(double));

  for (guint si = 0; si < c->n_shapes; si++) {
    const CalibLayerShape *sh = &c->shapes[si];
    guint64 h = sh->hidden, t = sh->tp, s = sh->seq, b = sh->micro_batch, a = sh->heads;
    guint64 tokens = b * s, hd = h / a, heads_local = a / t, g = calib_shape_kv_heads(sh);
    guint64 qkv = (a + 2 * g) * hd / t, ffn = calib_shape_ffn(sh) / t, up = sh->llama ? 2 * ffn : ffn;
    add_shape_lt(p, si);
    add_shape_membound(p, sh);
    CalibPlanAttention at = {b, heads_local, g / t, s, hd};
    add_attention(p->attention, &at);
    for (int fp8 = 0; fp8 < 2; fp8++) {
      CalibPlanModern ml = {si, fp8, t > 1};
      g_array_append_val(p->modern, ml);
    }
    if (!calib_shape_is_2021(sh))
      continue; /* the 2021 modes measure Megatron's GPT layer of SC21 (cuBLAS GEMMs, its kernels, the layer) */
    guint first = p->gemm->len;
    add_fwd_bwd(p->gemm, "qkv", 1, tokens, qkv, h);
    add_fwd_bwd(p->gemm, "scores", b * heads_local, s, s, hd);
    add_fwd_bwd(p->gemm, "attn_v", b * heads_local, s, hd, s);
    add_fwd_bwd(p->gemm, "proj", 1, tokens, h, a * hd / t);
    add_fwd_bwd(p->gemm, "fc1", 1, tokens, up, h);
    add_fwd_bwd(p->gemm, "fc2", 1, tokens, h, ffn);
    for (guint i = first; i < p->gemm->len; i++)
      g_array_index(p->gemm, CalibPlanGemm, i).shape = si;

    /* Element-wise kernels at the layer's shapes: bytes per element read and
     * written (fp16 values, 1-byte dropout masks). */
    guint64 srows = b * heads_local * s;
    add_kernel(p->kernels, "bias_gelu", TRUE, tokens, ffn, 4, 1, s, hd);         /* read x, write y */
    add_kernel(p->kernels, "bias_gelu", FALSE, tokens, ffn, 8, 2, s, hd);        /* bias add, then GeLU */
    add_kernel(p->kernels, "bias_dropout_add", TRUE, tokens, h, 7, 1, s, hd);    /* x, residual -> y, mask */
    add_kernel(p->kernels, "bias_dropout_add", FALSE, tokens, h, 15, 3, s, hd);  /* add 4 + dropout 5 + add 6 */
    add_kernel(p->kernels, "scale_mask_softmax", TRUE, srows, s, 4, 1, s, hd);   /* causal, one pass per row */
    add_kernel(p->kernels, "scale_mask_softmax", FALSE, srows, s, 12, 3, s, hd); /* scale, mask, softmax */
    add_kernel(p->kernels, "layernorm", TRUE, tokens, h, 4, 1, s, hd);
    /* Attention, batched-GEMM path: scores GEMM + fused softmax + GEMM over values. */
    add_kernel(p->kernels, "attention", TRUE, srows, s, 4, 3, s, hd);
  }
  add_lt_grids(p);
  add_attention_grid(p);
  add_membound_sweep(p);
  /* Square sizes, including ones that are not tile multiples. */
  static const guint sq[] = {256, 384, 512, 640, 768, 1000, 1024, 1536, 2048, 3000, 4096, 6144, 8192};
  for (guint i = 0; i < G_N_ELEMENTS(sq); i++)
    add_gemm(p->gemm, "grid.square", 1, sq[i], sq[i], 4096);
  /* Wave quantization: N across multiples of the SM count's worth of tiles. */
  for (guint64 n = 1024; n <= 4096; n += 128)
    add_gemm(p->gemm, "grid.wave", 1, 2048, n, 2048);
  /* K roll-off. */
  for (guint64 k = 32; k <= 8192; k *= 2)
    add_gemm(p->gemm, "grid.k", 1, 4096, 4096, k);
  /* Layouts: every GEMM above runs as cuBLAS NN with m = tokens.  PyTorch
   * issues a Linear layer's three GEMMs (y = x W^T, dx = dy W, dW = dy^T x,
   * row-major tensors) as column-major TN (m = out, n = tokens, k = in), NN
   * (m = in, n = tokens, k = out) and NT (m = in, n = out, k = tokens): the
   * same FLOPs and operands, transposed.  The first shape's QKV and MLP
   * h->4h GEMMs run that way too, to measure what the layout costs. */
  if (calib_shape_is_2021(&c->shapes[0])) {
    const CalibLayerShape *sh = &c->shapes[0];
    guint64 T = (guint64)sh->micro_batch * sh->seq, h = sh->hidden, t = sh->tp;
    const struct {
      const char *name;
      guint64 in, out;
    } lin[] = {{"qkv", h, 3 * h / t}, {"fc1", h, 4 * h / t}};
    for (guint i = 0; i < G_N_ELEMENTS(lin); i++) {
      const char *lay[3] = {"TN", "NN", "NT"}, *pass[3] = {"fwd", "dgrad", "wgrad"};
      guint64 dims[3][3] = {{lin[i].out, T, lin[i].in}, {lin[i].in, T, lin[i].out}, {lin[i].in, lin[i].out, T}};
      for (int j = 0; j < 3; j++) {
        char op[32];
        g_snprintf(op, sizeof op, "layout.%s.%s", lin[i].name, pass[j]);
        add_gemm(p->gemm, op, 1, dims[j][0], dims[j][1], dims[j][2]);
        CalibPlanGemm *g = &g_array_index(p->gemm, CalibPlanGemm, p->gemm->len - 1);
        g_strlcpy(g->layout, lay[j], sizeof g->layout);
      }
    }
  }

  for (guint64 x = c->membw_min_bytes; x <= c->membw_max_bytes; x *= 4) {
    double d = (double)x;
    g_array_append_val(p->membw_bytes, d);
  }
  for (guint64 x = c->nccl_min_bytes; x <= c->nccl_max_bytes; x *= 2) {
    double d = (double)x;
    g_array_append_val(p->nccl_bytes, d);
  }
  return p;
}

void calib_plan_free(CalibPlan *p) {
  if (!p)
    return;
  g_array_free(p->gemm, TRUE);
  g_array_free(p->gemmlt, TRUE);
  g_array_free(p->attention, TRUE);
  g_array_free(p->membound, TRUE);
  g_array_free(p->modern, TRUE);
  g_array_free(p->kernels, TRUE);
  g_array_free(p->membw_bytes, TRUE);
  g_array_free(p->nccl_bytes, TRUE);
  g_free(p);
}

guint calib_plan_nccl_ranks(guint gpus, guint *out, guint max) {
  guint n = 0;
  if (gpus <= 1 && max > 0)
    out[n++] = 1;
  for (guint r = 2; r <= gpus && n < max; r *= 2)
    out[n++] = r;
  if (gpus > 1 && n < max && out[n - 1] != gpus)
    out[n++] = gpus;
  return n;
}

gboolean calib_plan_coll_fits(CalibCollOp op, guint ranks, double bytes) {
  guint64 n = (guint64)bytes;
  if (n % 4)
    return FALSE; /* float elements */
  if (op == CALIB_SENDRECV)
    return ranks >= 2;
  if (op == CALIB_ALLGATHER || op == CALIB_REDUCESCATTER)
    return n % (4ull * ranks) == 0;
  return TRUE;
}

const char *const calib_modes[] = {"gemm",      "kernels",  "layer",  "nccl",     "membw",
                                   "gemmlt",    "attention", "membound", "modern", "sustained", "overlap"};
const guint calib_n_modes = G_N_ELEMENTS(calib_modes);

gboolean calib_plan_has_mode(const char *modes, const char *mode) {
  char **v = g_strsplit(modes, ",", -1);
  gboolean found = FALSE;
  for (char **m = v; *m; m++)
    found |= strcmp(*m, mode) == 0 || strcmp(*m, "all") == 0;
  g_strfreev(v);
  return found;
}

/* --- the run-time estimate --- */

/* Deliberately slow rates for an H100-class GPU, so that the estimate is an
 * upper bound of a healthy run: a third of the dense fp16 peak for GEMMs,
 * a third of HBM3's bandwidth for element-wise work and copies, an NVLink
 * bus bandwidth far below NVLink4's, and a fixed cost per measurement for
 * cuBLAS handles, allocation, filling and the CPU check. */
#define EST_GEMM_FLOPS 300e12
#define EST_MEM_BPS 1e12
#define EST_BUSBW_BPS 50e9
#define EST_LAUNCH_S 5e-6
#define EST_SETUP_S 0.05
#define EST_NCCL_INIT_S 3.0
#define EST_CUDA_INIT_S 5.0
/* gpu.cu's spin before each timed repetition (SPIN_NS, SPIN_LAYER_NS). */
#define EST_SPIN_S 0.5e-3
#define EST_SPIN_LAYER_S 4e-3
/* Flash attention, slower than the GEMMs at short sequences and few heads;
 * each configuration's CPU check (a few rows, O(s d) each). */
#define EST_ATTN_FLOPS 100e12
#define EST_ATTN_CHECK_S 1.0

static double lt_flops(const CalibPlanLtGemm *g) {
  return 2.0 * (double)g->m * (double)g->n * (double)g->k;
}

/* Causal attention forward FLOPs (the QK^T and PV GEMMs on the tiles the
 * mask keeps, about half); the backward does 2.5 times that. */
static double attn_flops(const CalibPlanAttention *a) {
  return 2.0 * (double)a->batch * (double)a->heads * (double)a->seq * (double)a->seq * (double)a->head_dim;
}

/* One modern layer's forward: its linear GEMMs (QKV, projection, MLP up
 * and down at the rank's widths over b s tokens) and its attention. */
static double modern_fwd_flops(const CalibPlan *p, guint si) {
  const CalibLayerShape *sh = &p->cfg.shapes[si];
  double T = (double)sh->micro_batch * sh->seq, h = sh->hidden, t = sh->tp, d = h / sh->heads;
  double qkv = (sh->heads + 2.0 * calib_shape_kv_heads(sh)) * d / t, ffn = calib_shape_ffn(sh) / t;
  double up = sh->llama ? 2 * ffn : ffn;
  CalibPlanAttention a = {sh->micro_batch, sh->heads / sh->tp, calib_shape_kv_heads(sh) / sh->tp, sh->seq,
                          sh->hidden / sh->heads};
  return 2 * T * (h * qkv + sh->heads * d / t * h + h * up + ffn * h) + attn_flops(&a);
}

/* GPU memory of one modern layer at shape `sh` (calib_gpu_modern_layer's
 * buffers, bounded above): the rank's weights and their gradients (bf16,
 * plus FP8 copies), activations of every tensor the backward keeps, and
 * workspaces; the logits are not in the layer. */
double calib_plan_modern_bytes(const CalibLayerShape *sh) {
  double h = sh->hidden, t = sh->tp, T = (double)sh->micro_batch * sh->seq, d = h / sh->heads;
  double qkv = (sh->heads + 2.0 * calib_shape_kv_heads(sh)) * d / t, ffn = calib_shape_ffn(sh) / t;
  double up = sh->llama ? 2 * ffn : ffn;
  double weights = h * qkv + sh->heads * d / t * h + h * up + ffn * h;
  double acts = T * (6 * h + 2 * qkv + 2 * sh->heads * d / t + 3 * up + ffn);
  return 2 * 3 * weights + 2 * 2 * acts + 3 * 32.0 * 1048576;
}

static double gemm_flops(const CalibPlanGemm *g) {
  return 2.0 * (double)g->batch * (double)g->m * (double)g->n * (double)g->k;
}

/* Forward GEMM FLOPs of shape `si` (the layer's backward is twice that). */
static double shape_fwd_flops(const CalibPlan *p, guint si) {
  double f = 0;
  for (guint i = 0; i < p->gemm->len; i++) {
    const CalibPlanGemm *g = &g_array_index(p->gemm, CalibPlanGemm, i);
    if (g->shape == si && g_str_has_suffix(g->op, ".fwd"))
      f += gemm_flops(g);
  }
  return f;
}

/* Element-wise bytes of one forward pass of shape `sh` (the fused kernels of
 * the plan: two layernorms, bias+GeLU, two bias+dropout+adds, the softmax
 * and attention dropout over the scores). */
static double shape_fwd_bytes(const CalibLayerShape *sh) {
  double T = (double)sh->micro_batch * sh->seq, h = sh->hidden, ffn = 4.0 * h / sh->tp;
  double scores = (double)sh->micro_batch * (sh->heads / sh->tp) * (double)sh->seq * sh->seq;
  return 2 * 4 * T * h + 4 * T * ffn + 2 * 7 * T * h + 4 * scores + 5 * scores;
}

double calib_plan_estimate_s(const CalibPlan *p, const char *modes, guint warmup, guint reps, guint gpus) {
  double runs = warmup + reps + 1.0, total = EST_CUDA_INIT_S;
  if (calib_plan_has_mode(modes, "gemm"))
    for (guint i = 0; i < p->gemm->len; i++)
      total += 2 * (EST_SETUP_S + reps * EST_SPIN_S +
                    runs * (gemm_flops(&g_array_index(p->gemm, CalibPlanGemm, i)) / EST_GEMM_FLOPS + EST_LAUNCH_S));
  if (calib_plan_has_mode(modes, "kernels"))
    for (guint i = 0; i < p->kernels->len; i++) {
      const CalibPlanKernel *k = &g_array_index(p->kernels, CalibPlanKernel, i);
      double flops = strcmp(k->name, "attention") == 0 ? 4.0 * k->rows * k->cols * k->head_dim : 0;
      total += EST_SETUP_S + reps * EST_SPIN_S +
               runs * (k->bytes / EST_MEM_BPS + flops / EST_GEMM_FLOPS + k->kernels * EST_LAUNCH_S);
    }
  if (calib_plan_has_mode(modes, "gemmlt"))
    for (guint i = 0; i < p->gemmlt->len; i++)
      total += 2 * (EST_SETUP_S + reps * EST_SPIN_S +
                    runs * (lt_flops(&g_array_index(p->gemmlt, CalibPlanLtGemm, i)) / EST_GEMM_FLOPS + EST_LAUNCH_S));
  if (calib_plan_has_mode(modes, "attention"))
    for (guint i = 0; i < p->attention->len; i++) {
      double f = attn_flops(&g_array_index(p->attention, CalibPlanAttention, i));
      total += EST_SETUP_S + EST_ATTN_CHECK_S + 2 * reps * EST_SPIN_S + runs * (3.5 * f / EST_ATTN_FLOPS + 2 * EST_LAUNCH_S);
    }
  if (calib_plan_has_mode(modes, "membound"))
    for (guint i = 0; i < p->membound->len; i++) {
      const CalibPlanMembound *b = &g_array_index(p->membound, CalibPlanMembound, i);
      total += EST_SETUP_S + reps * EST_SPIN_S +
               runs * (b->op->bytes_per_elem * (double)b->rows * (double)b->cols / EST_MEM_BPS + EST_LAUNCH_S);
    }
  if (calib_plan_has_mode(modes, "modern"))
    for (guint i = 0; i < p->modern->len; i++) {
      guint si = g_array_index(p->modern, CalibPlanModern, i).shape;
      double fwd = modern_fwd_flops(p, si) / EST_GEMM_FLOPS + 40 * EST_LAUNCH_S;
      total += 10 * EST_SETUP_S + EST_ATTN_CHECK_S + runs * fwd + runs * 4 * fwd + reps * 3 * EST_SPIN_LAYER_S;
    }
  if (calib_plan_has_mode(modes, "layer"))
    for (guint si = 0; si < p->cfg.n_shapes; si++) {
      if (!calib_shape_is_2021(&p->cfg.shapes[si]))
        continue;
      double fwd = shape_fwd_flops(p, si) / EST_GEMM_FLOPS + shape_fwd_bytes(&p->cfg.shapes[si]) / EST_MEM_BPS +
                   40 * EST_LAUNCH_S;
      /* forward; then recompute + backward (2x), each after its spin */
      total += 10 * EST_SETUP_S + runs * fwd + runs * 4 * fwd + reps * 3 * EST_SPIN_LAYER_S;
    }
  if (calib_plan_has_mode(modes, "sustained")) /* the checked burst (as gemmlt), then the loop */
    total += EST_SETUP_S + reps * EST_SPIN_S +
             runs * 2.0 * CALIB_SUSTAINED_M * CALIB_SUSTAINED_N * CALIB_SUSTAINED_K / EST_GEMM_FLOPS +
             p->cfg.sustained_s;
  if (calib_plan_has_mode(modes, "overlap")) {
    /* the checked burst; the GEMM alone and looped until the clock
     * settles; per block count the GEMM, the probe and the holder alone (a
     * window each) and four nested runs (an outer of CALIB_OVERLAP_OUTER
     * windows each); on more than one GPU the GEMM alone twice, its settling
     * loop, the all-reduce alone and nested twice */
    double w = p->cfg.overlap_window_s, nested = 2.0 * CALIB_OVERLAP_OUTER * w;
    total += EST_SETUP_S + reps * EST_SPIN_S +
             runs * 2.0 * CALIB_OVERLAP_M * CALIB_OVERLAP_N * CALIB_OVERLAP_K / EST_GEMM_FLOPS + w +
             CALIB_OVERLAP_SETTLE_S + p->cfg.n_overlap_blocks * (EST_SETUP_S + 3 * w + 2 * nested);
    if (gpus > 1)
      total += EST_NCCL_INIT_S + CALIB_OVERLAP_SETTLE_S + 3 * w + nested;
  }
  if (calib_plan_has_mode(modes, "membw"))
    for (guint i = 0; i < p->membw_bytes->len; i++)
      total += EST_SETUP_S + reps * EST_SPIN_S + runs * 2 * g_array_index(p->membw_bytes, double, i) / EST_MEM_BPS;
  if (calib_plan_has_mode(modes, "nccl")) {
    guint counts[16], nr = calib_plan_nccl_ranks(gpus, counts, G_N_ELEMENTS(counts));
    for (guint ri = 0; ri < nr; ri++) {
      total += EST_NCCL_INIT_S;
      for (int op = 0; op < CALIB_N_COLL; op++)
        for (guint i = 0; i < p->nccl_bytes->len; i++) {
          double x = g_array_index(p->nccl_bytes, double, i);
          if ((op == CALIB_SENDRECV && ri + 1 != nr) || !calib_plan_coll_fits((CalibCollOp)op, counts[ri], x))
            continue;
          guint r = op == CALIB_SENDRECV ? 2 : counts[ri];
          double one = 30e-6 + x * calib_busbw_factor((CalibCollOp)op, r) / EST_BUSBW_BPS + 2 * x / EST_MEM_BPS;
          total += runs * one + reps * (30e-6 * r + EST_SPIN_S); /* plus each repetition's sync and spin */
        }
    }
  }
  return total;
}

/* A GEMM's shape index, "-" for the grids. */
static void shape_index_label(guint shape, char *buf, gsize len) {
  if (shape == G_MAXUINT)
    g_strlcpy(buf, "-", len);
  else
    g_snprintf(buf, len, "%u", shape);
}

void calib_plan_print(const CalibPlan *p, const char *modes, guint warmup, guint reps, GString *o) {
  const CalibPlanConfig *c = &p->cfg;
  char label[96];
  g_string_append_printf(o, "plan for %u layer shape%s; NCCL over %u GPU%s; %u warm-up runs and %u timed "
                            "repetitions per measurement\n",
                         c->n_shapes, c->n_shapes == 1 ? "" : "s", c->gpus, c->gpus == 1 ? "" : "s", warmup, reps);
  for (guint si = 0; si < c->n_shapes; si++) {
    calib_layer_shape_label(&c->shapes[si], label, sizeof label);
    g_string_append_printf(o, "  shape %u: %s\n", si, label);
  }
  if (calib_plan_has_mode(modes, "gemm")) {
    g_string_append_printf(o, "\ngemm: %u shapes x {fp16, bf16}, each checked against a CPU reference on sampled outputs\n",
                           p->gemm->len);
    g_string_append_printf(o, "  %-20s %5s %6s %6s %7s %7s %7s %10s\n", "op", "shape", "cuBLAS", "batch", "m", "n", "k",
                           "GFLOP");
    for (guint i = 0; i < p->gemm->len; i++) {
      const CalibPlanGemm *g = &g_array_index(p->gemm, CalibPlanGemm, i);
      char sh[16];
      shape_index_label(g->shape, sh, sizeof sh);
      g_string_append_printf(o, "  %-20s %5s %6s %6" G_GUINT64_FORMAT " %7" G_GUINT64_FORMAT " %7" G_GUINT64_FORMAT
                                " %7" G_GUINT64_FORMAT " %10.2f\n",
                             g->op, sh, g->layout, g->batch, g->m, g->n, g->k, gemm_flops(g) / 1e9);
    }
  }
  if (calib_plan_has_mode(modes, "kernels")) {
    g_string_append_printf(o, "\nkernels: %u, each checked against a CPU reference before timing\n", p->kernels->len);
    g_string_append_printf(o, "  %-20s %-7s %9s %7s %8s %12s\n", "name", "fused", "rows", "cols", "kernels", "MB moved");
    for (guint i = 0; i < p->kernels->len; i++) {
      const CalibPlanKernel *k = &g_array_index(p->kernels, CalibPlanKernel, i);
      g_string_append_printf(o, "  %-20s %-7s %9" G_GUINT64_FORMAT " %7" G_GUINT64_FORMAT " %8u %12.1f\n", k->name,
                             k->fused ? "yes" : "no", k->rows, k->cols, k->kernels, k->bytes / 1e6);
    }
  }
  if (calib_plan_has_mode(modes, "gemmlt")) {
    g_string_append_printf(o, "\ngemmlt: %u GEMMs x {bf16, fp8 (E4M3 in, bf16 out, per-tensor scales)} through "
                              "cuBLASLt as Transformer Engine calls it, one tensor-parallel rank's linear layers in "
                              "their three layouts and the quantization grids; each checked against a CPU reference "
                              "on sampled outputs, the chosen tile recorded\n",
                           p->gemmlt->len);
    g_string_append_printf(o, "  %-20s %5s %6s %7s %7s %7s %10s\n", "op", "shape", "layout", "m", "n", "k", "GFLOP");
    for (guint i = 0; i < p->gemmlt->len; i++) {
      const CalibPlanLtGemm *g = &g_array_index(p->gemmlt, CalibPlanLtGemm, i);
      char sh[16];
      shape_index_label(g->shape, sh, sizeof sh);
      g_string_append_printf(o, "  %-20s %5s %6s %7" G_GUINT64_FORMAT " %7" G_GUINT64_FORMAT " %7" G_GUINT64_FORMAT
                                " %10.2f\n",
                             g->op, sh, g->layout, g->m, g->n, g->k, lt_flops(g) / 1e9);
    }
  }
  if (calib_plan_has_mode(modes, "attention")) {
    g_string_append_printf(o, "\nattention: %u configurations of cuDNN's fused flash attention (SDPA), causal, bf16, "
                              "forward and backward timed apart; sampled rows checked against a CPU reference\n",
                           p->attention->len);
    g_string_append_printf(o, "  %6s %6s %9s %7s %9s %12s\n", "batch", "heads", "kv_heads", "seq", "head_dim",
                           "fwd GFLOP");
    for (guint i = 0; i < p->attention->len; i++) {
      const CalibPlanAttention *a = &g_array_index(p->attention, CalibPlanAttention, i);
      g_string_append_printf(o, "  %6" G_GUINT64_FORMAT " %6" G_GUINT64_FORMAT " %9" G_GUINT64_FORMAT " %7" G_GUINT64_FORMAT
                                " %9" G_GUINT64_FORMAT " %12.2f\n",
                             a->batch, a->heads, a->kv_heads, a->seq, a->head_dim, attn_flops(a) / 1e9);
    }
  }
  if (calib_plan_has_mode(modes, "membound")) {
    g_string_append_printf(o, "\nmembound: %u memory-bound kernels as production frameworks write them (16-byte "
                              "vectorized, one pass), bf16; each checked against a CPU reference\n",
                           p->membound->len);
    g_string_append_printf(o, "  %-22s %-14s %9s %7s %12s\n", "op", "class", "rows", "cols", "MB moved");
    for (guint i = 0; i < p->membound->len; i++) {
      const CalibPlanMembound *b = &g_array_index(p->membound, CalibPlanMembound, i);
      g_string_append_printf(o, "  %-22s %-14s %9" G_GUINT64_FORMAT " %7" G_GUINT64_FORMAT " %12.1f\n", b->op->name,
                             model_mem_class_name(b->op->cls), b->rows, b->cols,
                             b->op->bytes_per_elem * (double)b->rows * (double)b->cols / 1e6);
    }
  }
  if (calib_plan_has_mode(modes, "modern")) {
    g_string_append_printf(o, "\nmodern: each shape's whole layer as today's Megatron-Core runs it on one tensor-"
                              "parallel rank (cuBLASLt linear layers in bf16 and in FP8 with their casts, cuDNN flash "
                              "attention, no communication): forward, then recomputation forward and backward\n");
    for (guint i = 0; i < p->modern->len; i++) {
      const CalibPlanModern *ml = &g_array_index(p->modern, CalibPlanModern, i);
      calib_layer_shape_label(&c->shapes[ml->shape], label, sizeof label);
      g_string_append_printf(o, "  %-46s %-4s%s forward %8.1f GFLOP  GPU memory %5.1f GiB\n", label,
                             ml->fp8 ? "fp8" : "bf16", ml->sequence_parallel ? " sp" : "   ",
                             modern_fwd_flops(p, ml->shape) / 1e9,
                             calib_plan_modern_bytes(&c->shapes[ml->shape]) / 1073741824.0);
    }
  }
  if (calib_plan_has_mode(modes, "layer")) {
    g_string_append_printf(o, "\nlayer: each shape's whole layer (fused kernels, fp16, one GPU, no all-reduce): forward, "
                              "then recomputation forward and backward, timed separately\n");
    for (guint si = 0; si < c->n_shapes; si++) {
      if (!calib_shape_is_2021(&c->shapes[si]))
        continue;
      calib_layer_shape_label(&c->shapes[si], label, sizeof label);
      g_string_append_printf(o, "  %-34s forward %8.1f GFLOP  GPU memory %5.1f GiB\n", label,
                             shape_fwd_flops(p, si) / 1e9, calib_plan_layer_bytes(&c->shapes[si]) / 1073741824.0);
    }
  }
  if (calib_plan_has_mode(modes, "nccl")) {
    const double *x = (const double *)p->nccl_bytes->data;
    guint ranks[16], nr = calib_plan_nccl_ranks(c->gpus, ranks, G_N_ELEMENTS(ranks));
    GString *list = g_string_new(NULL);
    for (guint i = 0; i < nr; i++)
      g_string_append_printf(list, "%s%u", i ? ", " : "", ranks[i]);
    if (c->gpus >= 2)
      g_string_append_printf(o, "\nnccl: all_reduce, all_gather, reduce_scatter on %s GPUs and sendrecv between GPUs 0 "
                                "and 1 (one process, ncclCommInitAll), %u sizes %.0f B .. %.0f B (x2), float\n",
                             list->str, p->nccl_bytes->len, x[0], x[p->nccl_bytes->len - 1]);
    else
      g_string_append_printf(o, "\nnccl: one GPU, so all_reduce, all_gather, reduce_scatter run single-rank (recorded "
                                "with ranks 1: a local copy, busbw 0, not fitted) and sendrecv is skipped; %u sizes "
                                "%.0f B .. %.0f B (x2), float\n",
                             p->nccl_bytes->len, x[0], x[p->nccl_bytes->len - 1]);
    g_string_free(list, TRUE);
  }
  if (calib_plan_has_mode(modes, "membw")) {
    const double *x = (const double *)p->membw_bytes->data;
    g_string_append_printf(o, "\nmembw: device-to-device copies, %u sizes %.0f B .. %.0f B (x4)\n", p->membw_bytes->len,
                           x[0], x[p->membw_bytes->len - 1]);
  }
  if (calib_plan_has_mode(modes, "sustained"))
    g_string_append_printf(o, "\nsustained: a bf16 %ux%ux%u cuBLASLt GEMM, checked and timed as gemmlt times it (the "
                              "burst), then %.0f s of back-to-back chunks of %u products, each chunk's rate, with the SM "
                              "clock and board power read through NVML after each chunk where the driver's library "
                              "loads\n",
                           CALIB_SUSTAINED_M, CALIB_SUSTAINED_N, CALIB_SUSTAINED_K, c->sustained_s,
                           CALIB_SUSTAINED_CHUNK);
  if (calib_plan_has_mode(modes, "overlap")) {
    GString *b = g_string_new(NULL);
    for (guint i = 0; i < c->n_overlap_blocks; i++)
      g_string_append_printf(b, "%s%u", i ? ", " : "", c->overlap_blocks[i]);
    g_string_append_printf(o, "\noverlap: a bf16 %ux%ux%u cuBLASLt GEMM (TN), checked and timed as gemmlt times it, "
                              "looped for %.0f s for the clock to settle, then timed over a %.0f ms window alone and "
                              "beside a holder kernel of %s thread blocks (one "
                              "run each; one block per SM, as NCCL runs one per channel) copying a %.0f MiB buffer HBM "
                              "to HBM over and over; the holder's bytes/s alone and beside the GEMM; a %.0f MiB "
                              "streaming copy (memory-bound work) alone and beside the holder; each run beside another "
                              "timed inside an outer run of %u windows, and refused unless it lies inside it",
                           CALIB_OVERLAP_M, CALIB_OVERLAP_N, CALIB_OVERLAP_K, CALIB_OVERLAP_SETTLE_S,
                           c->overlap_window_s * 1e3, b->str,
                           CALIB_OVERLAP_HOLDER_BYTES / 1048576, CALIB_OVERLAP_MEM_BYTES / 1048576,
                           CALIB_OVERLAP_OUTER);
    if (c->gpus > 1)
      g_string_append_printf(o, "; then beside an NCCL all-reduce of %.0f MiB over %u GPUs (the GEMM on GPU 0), its "
                                "bus bandwidth alone and beside",
                             CALIB_OVERLAP_ALLREDUCE_BYTES / 1048576, c->gpus);
    else
      g_string_append_printf(o, "; the all-reduce runs need two GPUs and are skipped");
    g_string_append_printf(o, "\n");
    g_string_free(b, TRUE);
  }
  g_string_append_printf(o, "\nestimated wall time: at most about %.0f s on one H100-class GPU (NCCL on %u GPU%s), "
                            "assuming at least %.0f TFLOP/s for GEMMs, %.0f GB/s for memory-bound work, %.0f GB/s "
                            "NCCL bus bandwidth, %.0f ms of set-up per measurement and the %.1f ms (layer: %.0f ms) "
                            "spin before each timed repetition\n",
                         calib_plan_estimate_s(p, modes, warmup, reps, c->gpus), c->gpus, c->gpus == 1 ? "" : "s",
                         EST_GEMM_FLOPS / 1e12, EST_MEM_BPS / 1e9, EST_BUSBW_BPS / 1e9, EST_SETUP_S * 1e3,
                         EST_SPIN_S * 1e3, EST_SPIN_LAYER_S * 1e3);
}
