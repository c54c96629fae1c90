/* ptdsim — the calibration plan (see plan.h). */
#include "plan.h"

#include <string.h>

static const CalibLayerShape sc21_shapes[] = {
    /* GPT-3 175B (and Table 1's 145.6B row): h 12288, 96 heads, t = 8. */
    {12288, 96, 2048, 1, 8},
    {12288, 96, 2048, 4, 8},
    /* Table 1's 1.7B row: h 2304, 24 heads, t = 1. */
    {2304, 24, 2048, 1, 1},
    {2304, 24, 2048, 4, 1},
    /* Table 1's 18.4B row: h 6144, 48 heads, t = 8. */
    {6144, 48, 2048, 1, 8},
    {6144, 48, 2048, 4, 8},
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
}

void calib_layer_shape_label(const CalibLayerShape *s, char *buf, gsize len) {
  g_snprintf(buf, len, "h=%u a=%u s=%u b=%u t=%u", s->hidden, s->heads, s->seq, s->micro_batch, s->tp);
}

gboolean calib_plan_parse_shapes(const char *spec, CalibPlanConfig *cfg, GError **error) {
  if (strcmp(spec, "sc21") == 0) {
    memcpy(cfg->shapes, sc21_shapes, sizeof sc21_shapes);
    cfg->n_shapes = G_N_ELEMENTS(sc21_shapes);
    return TRUE;
  }
  if (strcmp(spec, "gpt3-175b") == 0) {
    cfg->shapes[0] = sc21_shapes[0];
    cfg->n_shapes = 1;
    return TRUE;
  }
  char **items = g_strsplit(spec, ",", -1);
  guint n = 0;
  gboolean ok = items[0] != NULL;
  for (char **it = items; ok && *it; it++) {
    char **f = g_strsplit(*it, ":", -1);
    guint64 v[5];
    ok = g_strv_length(f) == 5 && n < CALIB_MAX_SHAPES;
    for (int i = 0; ok && i < 5; i++)
      ok = g_ascii_string_to_unsigned(f[i], 10, 1, 65536, &v[i], NULL);
    g_strfreev(f);
    if (ok)
      cfg->shapes[n++] = (CalibLayerShape){(guint)v[0], (guint)v[1], (guint)v[2], (guint)v[3], (guint)v[4]};
    else
      g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                  "--shapes: '%s' is not a layer shape; give a preset (sc21, gpt3-175b) or up to %d comma-separated "
                  "HIDDEN:HEADS:SEQ:MICRO_BATCH:TP, e.g. 12288:96:2048:1:8,2304:24:2048:4:1",
                  *it, CALIB_MAX_SHAPES);
  }
  if (!items[0])
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID,
                "--shapes is empty; give a preset (sc21, gpt3-175b) or HIDDEN:HEADS:SEQ:MICRO_BATCH:TP,...");
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
  p->kernels = g_array_new(FALSE, TRUE, sizeof(CalibPlanKernel));
  p->membw_bytes = g_array_new(FALSE, TRUE, sizeof(double));
  p->nccl_bytes = g_array_new(FALSE, TRUE, sizeof(double));

  for (guint si = 0; si < c->n_shapes; si++) {
    const CalibLayerShape *sh = &c->shapes[si];
    guint64 h = sh->hidden, t = sh->tp, s = sh->seq, b = sh->micro_batch, a = sh->heads;
    guint64 tokens = b * s, hd = h / a, heads_local = a / t;
    guint first = p->gemm->len;
    add_fwd_bwd(p->gemm, "qkv", 1, tokens, 3 * h / t, h);
    add_fwd_bwd(p->gemm, "scores", b * heads_local, s, s, hd);
    add_fwd_bwd(p->gemm, "attn_v", b * heads_local, s, hd, s);
    add_fwd_bwd(p->gemm, "proj", 1, tokens, h, h / t);
    add_fwd_bwd(p->gemm, "fc1", 1, tokens, 4 * h / t, h);
    add_fwd_bwd(p->gemm, "fc2", 1, tokens, h, 4 * h / t);
    for (guint i = first; i < p->gemm->len; i++)
      g_array_index(p->gemm, CalibPlanGemm, i).shape = si;

    /* Element-wise kernels at the layer's shapes: bytes per element read and
     * written (fp16 values, 1-byte dropout masks). */
    guint64 ffn = 4 * h / t, srows = b * heads_local * s;
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
  {
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
  if (calib_plan_has_mode(modes, "layer"))
    for (guint si = 0; si < p->cfg.n_shapes; si++) {
      double fwd = shape_fwd_flops(p, si) / EST_GEMM_FLOPS + shape_fwd_bytes(&p->cfg.shapes[si]) / EST_MEM_BPS +
                   40 * EST_LAUNCH_S;
      /* forward; then recompute + backward (2x), each after its spin */
      total += 10 * EST_SETUP_S + runs * fwd + runs * 4 * fwd + reps * 3 * EST_SPIN_LAYER_S;
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
      if (g->shape == G_MAXUINT)
        g_strlcpy(sh, "-", sizeof sh);
      else
        g_snprintf(sh, sizeof sh, "%u", g->shape);
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
  if (calib_plan_has_mode(modes, "layer")) {
    g_string_append_printf(o, "\nlayer: each shape's whole layer (fused kernels, fp16, one GPU, no all-reduce): forward, "
                              "then recomputation forward and backward, timed separately\n");
    for (guint si = 0; si < c->n_shapes; si++) {
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
  g_string_append_printf(o, "\nestimated wall time: at most about %.0f s on one H100-class GPU (NCCL on %u GPU%s), "
                            "assuming at least %.0f TFLOP/s for GEMMs, %.0f GB/s for memory-bound work, %.0f GB/s "
                            "NCCL bus bandwidth, %.0f ms of set-up per measurement and the %.1f ms (layer: %.0f ms) "
                            "spin before each timed repetition\n",
                         calib_plan_estimate_s(p, modes, warmup, reps, c->gpus), c->gpus, c->gpus == 1 ? "" : "s",
                         EST_GEMM_FLOPS / 1e12, EST_MEM_BPS / 1e9, EST_BUSBW_BPS / 1e9, EST_SETUP_S * 1e3,
                         EST_SPIN_S * 1e3, EST_SPIN_LAYER_S * 1e3);
}
