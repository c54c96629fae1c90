/* ptdsim — the calibration plan (see plan.h). */
#include "plan.h"

#include <string.h>

void calib_plan_config_default(CalibPlanConfig *c) {
  memset(c, 0, sizeof *c);
  c->hidden = 12288;
  c->heads = 96;
  c->seq = 2048;
  c->micro_batch = 1;
  c->tp = 8;
  c->gpus = 8;
  c->nccl_min_bytes = 8;
  c->nccl_max_bytes = 1ull << 30;
  c->membw_min_bytes = 4096;
  c->membw_max_bytes = 1ull << 30;
}

static void add_gemm(GArray *a, const char *op, guint64 batch, guint64 m, guint64 n, guint64 k) {
  CalibPlanGemm g = {{0}, batch, m, n, k};
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

static void add_kernel(GArray *a, const char *name, gboolean fused, guint64 rows, guint64 cols, double bytes_per_elem,
                       guint kernels) {
  CalibPlanKernel k = {{0}, fused, rows, cols, bytes_per_elem * (double)rows * (double)cols, kernels};
  g_strlcpy(k.name, name, sizeof k.name);
  g_array_append_val(a, k);
}

static gboolean check(gboolean ok, GError **error, const char *msg) {
  if (!ok)
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID, "%s", msg);
  return ok;
}

CalibPlan *calib_plan_new(const CalibPlanConfig *c, GError **error) {
  if (!check(c->hidden >= 1 && c->heads >= 1 && c->seq >= 1 && c->micro_batch >= 1 && c->tp >= 1 && c->gpus >= 1,
             error, "--hidden, --heads, --seq-len, --micro-batch, --tp and --gpus must all be at least 1") ||
      !check(c->hidden % c->heads == 0, error, "--hidden must be a multiple of --heads") ||
      !check(c->heads % c->tp == 0, error, "--heads must be a multiple of --tp (Megatron splits heads over t)") ||
      !check(c->hidden <= 65536 && c->seq <= 65536 && c->micro_batch <= 64 && c->gpus <= 64, error,
             "the layer shape is too large to calibrate on one GPU (hidden, seq <= 65536, micro-batch <= 64)") ||
      !check(c->nccl_min_bytes >= 1 && c->nccl_min_bytes <= c->nccl_max_bytes && c->nccl_max_bytes <= (8ull << 30) &&
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

  guint64 h = c->hidden, t = c->tp, s = c->seq, b = c->micro_batch, a = c->heads;
  guint64 tokens = b * s, hd = h / a, heads_local = a / t;
  add_fwd_bwd(p->gemm, "qkv", 1, tokens, 3 * h / t, h);
  add_fwd_bwd(p->gemm, "scores", b * heads_local, s, s, hd);
  add_fwd_bwd(p->gemm, "attn_v", b * heads_local, s, hd, s);
  add_fwd_bwd(p->gemm, "proj", 1, tokens, h, h / t);
  add_fwd_bwd(p->gemm, "fc1", 1, tokens, 4 * h / t, h);
  add_fwd_bwd(p->gemm, "fc2", 1, tokens, h, 4 * h / t);
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

  /* Element-wise kernels at the layer's shapes: bytes per element read and
   * written (fp16 values, 1-byte dropout masks). */
  guint64 ffn = 4 * h / t, srows = b * heads_local * s;
  add_kernel(p->kernels, "bias_gelu", TRUE, tokens, ffn, 4, 1);             /* read x, write y */
  add_kernel(p->kernels, "bias_gelu", FALSE, tokens, ffn, 8, 2);            /* bias add, then GeLU */
  add_kernel(p->kernels, "bias_dropout_add", TRUE, tokens, h, 7, 1);        /* x, residual -> y, mask */
  add_kernel(p->kernels, "bias_dropout_add", FALSE, tokens, h, 15, 3);      /* add 4 + dropout 5 + add 6 */
  add_kernel(p->kernels, "scale_mask_softmax", TRUE, srows, s, 4, 1);       /* causal, one pass per row */
  add_kernel(p->kernels, "scale_mask_softmax", FALSE, srows, s, 12, 3);     /* scale, mask, softmax */
  add_kernel(p->kernels, "layernorm", TRUE, tokens, h, 4, 1);
  /* Attention, batched-GEMM path: scores GEMM + fused softmax + GEMM over values. */
  add_kernel(p->kernels, "attention", TRUE, srows, s, 4, 3);

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

static gboolean has_mode(const char *modes, const char *mode) {
  char **v = g_strsplit(modes, ",", -1);
  gboolean found = FALSE;
  for (char **m = v; *m; m++)
    found |= strcmp(*m, mode) == 0 || strcmp(*m, "all") == 0;
  g_strfreev(v);
  return found;
}

void calib_plan_print(const CalibPlan *p, const char *modes, GString *o) {
  const CalibPlanConfig *c = &p->cfg;
  g_string_append_printf(o, "plan for layer hidden=%u heads=%u seq=%u micro-batch=%u tp=%u; NCCL over %u GPUs\n",
                         c->hidden, c->heads, c->seq, c->micro_batch, c->tp, c->gpus);
  if (has_mode(modes, "gemm")) {
    g_string_append_printf(o, "\ngemm: %u shapes x {fp16, bf16}, each checked against a CPU reference on sampled outputs\n",
                           p->gemm->len);
    g_string_append_printf(o, "  %-14s %6s %7s %7s %7s %10s\n", "op", "batch", "m", "n", "k", "GFLOP");
    for (guint i = 0; i < p->gemm->len; i++) {
      const CalibPlanGemm *g = &g_array_index(p->gemm, CalibPlanGemm, i);
      g_string_append_printf(o, "  %-14s %6" G_GUINT64_FORMAT " %7" G_GUINT64_FORMAT " %7" G_GUINT64_FORMAT
                                " %7" G_GUINT64_FORMAT " %10.2f\n",
                             g->op, g->batch, g->m, g->n, g->k,
                             2.0 * (double)g->batch * (double)g->m * (double)g->n * (double)g->k / 1e9);
    }
  }
  if (has_mode(modes, "kernels")) {
    g_string_append_printf(o, "\nkernels: %u, each checked against a CPU reference before timing\n", p->kernels->len);
    g_string_append_printf(o, "  %-20s %-7s %9s %7s %8s %12s\n", "name", "fused", "rows", "cols", "kernels", "MB moved");
    for (guint i = 0; i < p->kernels->len; i++) {
      const CalibPlanKernel *k = &g_array_index(p->kernels, CalibPlanKernel, i);
      g_string_append_printf(o, "  %-20s %-7s %9" G_GUINT64_FORMAT " %7" G_GUINT64_FORMAT " %8u %12.1f\n", k->name,
                             k->fused ? "yes" : "no", k->rows, k->cols, k->kernels, k->bytes / 1e6);
    }
  }
  if (has_mode(modes, "layer"))
    g_string_append_printf(o, "\nlayer: one transformer layer forward and backward (fused kernels), b=%u s=%u h=%u a=%u t=%u\n",
                           c->micro_batch, c->seq, c->hidden, c->heads, c->tp);
  if (has_mode(modes, "nccl")) {
    const double *x = (const double *)p->nccl_bytes->data;
    guint ranks[16], nr = calib_plan_nccl_ranks(c->gpus, ranks, G_N_ELEMENTS(ranks));
    GString *list = g_string_new(NULL);
    for (guint i = 0; i < nr; i++)
      g_string_append_printf(list, "%s%u", i ? ", " : "", ranks[i]);
    g_string_append_printf(o, "\nnccl: all_reduce, all_gather, reduce_scatter on %s GPUs and sendrecv between GPUs 0 "
                              "and 1 (one process, ncclCommInitAll), %u sizes %.0f B .. %.0f B (x2), float\n",
                           list->str, p->nccl_bytes->len, x[0], x[p->nccl_bytes->len - 1]);
    g_string_free(list, TRUE);
  }
  if (has_mode(modes, "membw")) {
    const double *x = (const double *)p->membw_bytes->data;
    g_string_append_printf(o, "\nmembw: device-to-device copies, %u sizes %.0f B .. %.0f B (x4)\n", p->membw_bytes->len,
                           x[0], x[p->membw_bytes->len - 1]);
  }
}
