/* ptdsim — sharded data parallelism end to end through the real binary
 * ($PTDSIM_BIN): DeepSpeed ZeRO-3 as SC21 ran it and PyTorch FSDP2 as
 * torchtitan runs it.  The collective counts, their bytes, the host work
 * and the memory per GPU are checked against formulas written here from
 * the model's shape (not against the engine's own arithmetic); the ring's
 * latency against NCCL's tuner formula; the refusals are one line. */
#include <cjson/cJSON.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "../models/comm.h"
#include "cli_harness.h"

#define GIB 1073741824.0

static double rel(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-300); }

static double kernel_launch_s(void) {
  cJSON *j = load_shipped("calibrate/profiles", "a100-sxm4-80gb");
  double s = num(j, "kernel_launch_us") * 1e-6;
  cJSON_Delete(j);
  return s;
}

/* GPT-3 1.3B (gpt3-1b): 24 layers, hidden 2048, sequence 2048, vocab
 * 51200, biases, layernorms, learned positions, tied logits. */
enum { L1B = 24, H1B = 2048, S1B = 2048, V1B = 51200 };
#define ZRUN "run --model gpt3-1b --gpus 16 --tp 1 --pp 1 --zero 3 --global-batch 32 --micro-batch 1 " \
             "--network analytic --format json"

/* GPT-3 1.3B's tensors under the persistence threshold: per layer the
 * four linears' biases (3h, h, 4h, h) and two layernorms' weights and
 * biases; the final layernorm's two. */
#define PERSIST_1B (8.0 * L1B + 2)
#define PERSIST_NUMEL_1B (13.0 * H1B * L1B + 2.0 * H1B)

/* Why: in the DeepSpeed release SC21 ran, every sub-module gathers each of
 * its tensors above the persistence threshold (1e5 elements) in its own
 * hook, for its forward, its recomputation and its backward (prefetch and
 * reuse never happen: the trace is one step off), and the embedding's and
 * the head's word embedding again.  Each backward ends by partitioning
 * every tensor, the persistent ones too (three eager ops each), so the
 * second microbatch's hooks gather each persistent tensor once; after the
 * step they are gathered back in one call whose host work is four eager
 * ops per tensor and rank.  The gradients of a bucket larger than the
 * model are all-reduced once per microbatch.  The counts, the bytes, the
 * host's ops and the bytes on the wire follow from the shape alone. */
static void test_zero3_counts(void) {
  cJSON *j = run_json(ZRUN " --zero-reduce-bucket 2000000000");
  const cJSON *sh = obj(j, "sharded_per_gpu");
  double h = H1B, word = (double)V1B * h, pos = (double)S1B * h, layer_w = 12.0 * h * h;
  double m = 2, d = 16, P = num(obj(j, "config"), "parameters"), k = kernel_launch_s();
  /* per microbatch: 4 weights x (forward, recompute, backward) per layer;
   * word + position for the embedding's forward and backward; the word
   * embedding for the head's forward and backward; the persistent tensors
   * in every microbatch but the first; one gather after the step */
  double sharded_hooks = m * (12 * L1B + 6), hooks = sharded_hooks + (m - 1) * PERSIST_1B;
  g_assert_cmpfloat(num(sh, "param_allgathers"), ==, hooks + 1);
  /* every persistent tensor's numel divides by d = 16: no padding */
  double gather = 2.0 * (3.0 * L1B * layer_w + 2 * (word + pos) + 2 * word);
  double persist = 2.0 * PERSIST_NUMEL_1B;
  g_assert_cmpfloat(rel(num(sh, "param_allgather_bytes"), m * gather + (m - 1) * persist + persist), <, 1e-12);
  g_assert_cmpfloat(num(sh, "grad_reductions"), ==, m);
  g_assert_cmpfloat(rel(num(sh, "grad_reduction_bytes"), m * 2 * P), <, 1e-12);
  /* a ring all-gather sends (d-1)/d of its buffer from each of d ranks, an
   * all-reduce twice that */
  double wire = (num(sh, "param_allgather_bytes") + 2 * num(sh, "grad_reduction_bytes")) * (d - 1);
  g_assert_cmpfloat(rel(num(obj(j, "bytes_per_iteration"), "dp"), wire), <, 1e-12);
  /* d narrow() views and d list copies per hook's gather; three ops per
   * release of a sharded tensor after its use, and of each persistent
   * tensor after each backward; after the step one buffer, d views, this
   * rank's narrow() and copy_() per tensor, d list copies, and per tensor
   * an empty() and four ops for each of the d ranks */
  double release = 3 * sharded_hooks + m * 3 * PERSIST_1B;
  double post = 1 + d + 2 * PERSIST_1B + d + PERSIST_1B + 4 * PERSIST_1B * d;
  g_assert_cmpfloat(rel(num(sh, "host_s"), (hooks * 2 * d + release + post) * k), <, 1e-9);
  cJSON_Delete(j);

  /* contiguous_gradients: one reduce-scatter per tensor, with its own
   * views and copies: per layer the four weights and four biases and two
   * layernorms' weights and biases; the word and position embeddings and
   * the final layernorm */
  j = run_json(ZRUN " --zero-contiguous-gradients");
  sh = obj(j, "sharded_per_gpu");
  g_assert_cmpfloat(num(sh, "grad_reductions"), ==, m * (12 * L1B + 4));
  g_assert_cmpfloat(rel(num(sh, "grad_reduction_bytes"), m * 2 * P), <, 1e-12);
  wire = (num(sh, "param_allgather_bytes") + num(sh, "grad_reduction_bytes")) * (d - 1);
  g_assert_cmpfloat(rel(num(obj(j, "bytes_per_iteration"), "dp"), wire), <, 1e-12);
  /* a reduce-scatter's d views are a view() and a narrow() each, and
   * PyTorch copies the d list entries into its flat input */
  double ops = hooks * 2 * d + num(sh, "grad_reductions") * 3 * d + release + post;
  g_assert_cmpfloat(rel(num(sh, "host_s"), ops * k), <, 1e-9);
  cJSON_Delete(j);
}

/* Why: with the trace fixed (later releases), a unit used again within
 * stage3_max_reuse_distance elements stays gathered: with a distance of 1
 * only the head's word embedding (forward to backward, nothing between)
 * and each layer's MLP-down weight (recomputation to backward) are kept,
 * so each layer's backward gathers three weights, not four; prefetching
 * changes when the gathers run, not how many, and makes the iteration
 * shorter. */
static void test_zero3_trace_fixed(void) {
  cJSON *a = run_json(ZRUN " --zero-trace-fixed --zero-reuse-distance 1");
  g_assert_cmpfloat(num(obj(a, "sharded_per_gpu"), "param_allgathers"), ==, 2 * (11 * L1B + 5) + PERSIST_1B + 1);
  cJSON *b = run_json(ZRUN);
  cJSON *c = run_json(ZRUN " --zero-trace-fixed --zero-reuse-distance 1 --zero-max-live 1");
  /* no prefetch when anything is gathered: the same gathers, none ahead */
  g_assert_cmpfloat(num(obj(c, "sharded_per_gpu"), "param_allgathers"), ==, 2 * (11 * L1B + 5) + PERSIST_1B + 1);
  g_assert_cmpfloat(num(a, "iteration_time_s"), <, num(c, "iteration_time_s"));
  g_assert_cmpfloat(num(a, "iteration_time_s"), <, num(b, "iteration_time_s"));
  cJSON_Delete(a);
  cJSON_Delete(b);
  cJSON_Delete(c);
}

/* Why: the memory of a ZeRO-3 GPU is its fp16 partitions, the tensors
 * under the persistence threshold whole, the most gathered at once (one
 * unit at a time in the 2021 release: the embedding's word and position
 * tables) with NCCL's flat copy of the largest gather, the gradient
 * partitions plus the bucket's whole gradients and their flattened copy,
 * and 12 bytes of optimizer state per parameter over d. */
static void test_zero3_memory(void) {
  cJSON *j = run_json(ZRUN " --zero-reduce-bucket 2000000000");
  const cJSON *mem = obj(j, "memory_per_gpu_GiB");
  double h = H1B, d = 16, P = num(obj(j, "config"), "parameters");
  double persistent = L1B * 13.0 * h + 2 * h; /* biases 3h + h + 4h + h, two layernorms 4h; the final one */
  double word = (double)V1B * h, pos = (double)S1B * h;
  g_assert_cmpfloat(rel(num(mem, "optimizer") * GIB, 12 * P / d), <, 1e-12);
  double weights = 2 * (P - persistent) / d + 2 * persistent + 2 * (word + pos) + 2 * word;
  g_assert_cmpfloat(rel(num(mem, "weights") * GIB, weights), <, 1e-12);
  g_assert_cmpfloat(rel(num(mem, "gradients") * GIB, 2 * P / d + 4 * P), <, 1e-12);
  cJSON_Delete(j);
}

/* Why: SC21's point.  At a fixed batch of one microbatch per GPU, doubling
 * the GPUs halves each GPU's compute but not its parameter traffic (every
 * GPU still gathers every parameter three times), and the host work of
 * every gather, the one after the step most, grows with the ranks: the
 * iteration stops halving, and PTD-P, whose traffic per GPU falls, pulls
 * ahead by more at each doubling. */
static void test_zero3_doubling(void) {
  const char *fmt = "run --model gpt3-175b --gpus %u --tp %u --pp %u --global-batch 1536 --micro-batch %u%s "
                    "--network analytic --format json";
  double zt[2], zhost[2], zgath[2], zn[2], ztf[2], ptf[2];
  for (guint x = 0; x < 2; x++) {
    guint n = 768 << x;
    char *a = g_strdup_printf(fmt, n, 1, 1, 2 >> x, " --zero 3");
    cJSON *j = run_json(a);
    zt[x] = num(j, "iteration_time_s");
    ztf[x] = num(j, "tflops_per_gpu");
    zhost[x] = num(obj(j, "sharded_per_gpu"), "host_s");
    zgath[x] = num(obj(j, "sharded_per_gpu"), "param_allgather_bytes");
    zn[x] = num(obj(j, "sharded_per_gpu"), "param_allgathers");
    cJSON_Delete(j);
    g_free(a);
    a = g_strdup_printf(fmt, n, 8, 12, 1, "");
    j = run_json(a);
    ptf[x] = num(j, "tflops_per_gpu");
    cJSON_Delete(j);
    g_free(a);
  }
  g_assert_cmpfloat(zgath[1], ==, zgath[0]);
  /* the host: 2n ops per hook's gather and 3 for its release (G of them,
   * the iteration's last gather being the one after the step); after the
   * step 1 + 2n + 3c + 4cn for the c = 96 x 8 + 2 persistent tensors (each
   * divides by n); 3c to release them after the backward: linear in n */
  double c = 96 * 8 + 2, k = kernel_launch_s();
  for (guint x = 0; x < 2; x++) {
    double n = 768 << x, G = zn[x] - 1;
    g_assert_cmpfloat(rel(zhost[x], k * ((2 * G + 2 + 4 * c) * n + 3 * G + 1 + 6 * c)), <, 1e-9);
  }
  /* the iteration stops falling: the host work and ring latency that grow
   * with the GPUs take the place of the compute that halves */
  g_assert_cmpfloat(zt[1], >, 0.9 * zt[0]);
  g_assert_cmpfloat(ptf[0], >, ztf[0]);
  g_assert_cmpfloat(ptf[1] / ztf[1], >, ptf[0] / ztf[0]);
}

/* Why: a ring all-gather over n ranks is n - 1 steps, each paying a hop's
 * latency (NCCL's tuner: the base, NVLink hops inside nodes, network hops
 * between them), so the time of a tiny collective grows with n exactly so. */
static void test_ring_latency(void) {
  ModelNet net = {0};
  net.hw.gpus_per_node = net.hw.nics_per_node = 8;
  net.hw.nvlink_busbw = 230e9;
  net.hw.nic_bw = 24e9;
  const double base[TOPO_N_PROTOS] = {3.6e-6, 10e-6, 8.4e-6}, nv[TOPO_N_PROTOS] = {0.47e-6, 1.9e-6, 3.4e-6},
               nh[TOPO_N_PROTOS] = {2.7e-6, 4e-6, 28e-6}, f[TOPO_N_PROTOS] = {0.25, 0.92, 1.0};
  for (int p = 0; p < TOPO_N_PROTOS; p++) {
    net.hw.ring_base[p] = base[p];
    net.hw.nvlink_hop[p] = nv[p];
    net.hw.net_hop[p] = nh[p];
    net.hw.proto_bw_factor[p] = f[p];
  }
  double last = 0;
  for (guint nodes = 2; nodes <= 512; nodes *= 2) {
    guint n = 8 * nodes;
    TopoProto proto;
    double t = model_collective_time_s(&net, MODEL_COLL_ALLGATHER, 8, n, nodes, &proto);
    g_assert_cmpint(proto, ==, TOPO_PROTO_LL); /* tiny: the lowest latency */
    double bw = fmin(230e9, 8 * 24e9) * f[0];
    double want = base[0] + (n - 1 - nodes) * nv[0] + nodes * nh[0] + 8.0 * (n - 1) / n / bw;
    g_assert_cmpfloat(rel(t, want), <, 1e-12);
    g_assert_cmpfloat(t, >, last);
    last = t;
  }
}

/* Llama 3 8B: 32 layers, hidden 4096, vocab 128256, untied logits, no
 * biases, RMSNorm; its root module (embedding, final norm, logits) is
 * 2 V h + h. */
enum { L8B = 32, H8B = 4096, V8B = 128256 };
#define FRUN "run --model llama3-8b --cluster dgx-h100-superpod --gpus 16 --global-batch 16 --micro-batch 1 " \
             "--network analytic --format json"

/* Why: FSDP2 gathers each block's bf16 parameters before its forward and,
 * resharded after forward, again before its backward (the root's once:
 * FSDP2 keeps the root gathered from forward to backward), and
 * reduce-scatters each block's gradients and the root's in the reduce
 * dtype; HSDP adds the all-reduce of each shard across the replicas.  The
 * state per GPU is 16 bytes a parameter over the shard group, the two
 * gathered blocks with the root in bf16, a block's bf16 gradient and its
 * fp32 copy. */
static void test_fsdp_counts_and_memory(void) {
  cJSON *j = run_json(FRUN " --fsdp");
  const cJSON *sh = obj(j, "sharded_per_gpu"), *mem = obj(j, "memory_per_gpu_GiB");
  double P = num(obj(j, "config"), "parameters"), root = 2.0 * V8B * H8B + H8B, Lp = (P - root) / L8B;
  g_assert_cmpfloat(num(sh, "param_allgathers"), ==, 2 * L8B);
  g_assert_cmpfloat(rel(num(sh, "param_allgather_bytes"), 2 * (2 * L8B * Lp + root)), <, 1e-12);
  g_assert_cmpfloat(num(sh, "grad_reductions"), ==, L8B + 1);
  g_assert_cmpfloat(rel(num(sh, "grad_reduction_bytes"), 4 * P), <, 1e-12);
  g_assert_cmpfloat(rel(num(mem, "optimizer") * GIB, 8 * P / 16), <, 1e-12);
  g_assert_cmpfloat(rel(num(mem, "weights") * GIB, 4 * P / 16 + 2 * (root + 2 * Lp)), <, 1e-12);
  g_assert_cmpfloat(rel(num(mem, "gradients") * GIB, 4 * P / 16 + 2 * Lp + 4 * Lp), <, 1e-12);
  g_assert_cmpstr(str(obj(j, "config"), "fsdp_reduce_dtype"), ==, "fp32");
  cJSON_Delete(j);

  j = run_json(FRUN " --fsdp --fsdp-reduce-dtype bf16 --fsdp-reshard-after-forward never");
  sh = obj(j, "sharded_per_gpu");
  mem = obj(j, "memory_per_gpu_GiB");
  g_assert_cmpfloat(num(sh, "param_allgathers"), ==, L8B);
  g_assert_cmpfloat(rel(num(sh, "param_allgather_bytes"), 2 * P), <, 1e-12);
  g_assert_cmpfloat(rel(num(sh, "grad_reduction_bytes"), 2 * P), <, 1e-12);
  g_assert_cmpfloat(rel(num(mem, "weights") * GIB, 4 * P / 16 + 2 * P), <, 1e-12);
  cJSON_Delete(j);

  j = run_json(FRUN " --hsdp 2");
  sh = obj(j, "sharded_per_gpu");
  mem = obj(j, "memory_per_gpu_GiB");
  g_assert_cmpfloat(num(sh, "grad_reductions"), ==, 2 * (L8B + 1));
  g_assert_cmpfloat(rel(num(sh, "grad_reduction_bytes"), 4 * P + 4 * P / 8), <, 1e-12);
  g_assert_cmpfloat(rel(num(mem, "optimizer") * GIB, 8 * P / 8), <, 1e-12);
  g_assert_cmpfloat(num(obj(j, "config"), "hsdp_replicas"), ==, 2);
  cJSON_Delete(j);
}

/* Why: FSDP2 composes with tensor and pipeline parallelism as torchtitan's
 * mesh does: with --tp 2 each GPU gathers its tensor-parallel shard of
 * each block over d ranks; with --pp 2 (parameters kept between
 * microbatches by default) each stage gathers its blocks once per step and
 * reduces them once, after the last microbatch. */
static void test_fsdp_composes(void) {
  cJSON *a = run_json(FRUN " --fsdp");
  cJSON *t = run_json(FRUN " --fsdp --tp 2");
  g_assert_cmpfloat(num(obj(t, "sharded_per_gpu"), "param_allgathers"), ==,
                    2 * 2 * L8B); /* two microbatches per step with d = 8 */
  /* 8 bytes of AdamW state per local parameter over d = 8: tensor
   * parallelism splits all but the RMSNorms' weights */
  double P = num(obj(a, "config"), "parameters"), norms = 2.0 * L8B * H8B + H8B;
  g_assert_cmpfloat(rel(num(obj(t, "memory_per_gpu_GiB"), "optimizer") * GIB, 8 * ((P - norms) / 2 + norms) / 8), <,
                    1e-12);
  cJSON *p = run_json(FRUN " --fsdp --pp 2");
  g_assert_cmpfloat(num(obj(p, "sharded_per_gpu"), "param_allgathers"), ==, L8B / 2);
  g_assert_cmpfloat(num(obj(p, "sharded_per_gpu"), "grad_reductions"), ==, L8B / 2 + 1);
  g_assert_false(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj(p, "config"), "fsdp_reshard_after_forward")));
  /* the zero-bubble schedules split each backward: the blocks are still
   * gathered once a step and reduced once, after the last microbatch's W
   * (its weight gradients) instead of its whole backward */
  static const char *const split[] = {"zb-h1", "zb-2p", "interleaved-zb --chunks 2"};
  for (guint j = 0; j < G_N_ELEMENTS(split); j++) {
    char *line = g_strdup_printf(FRUN " --fsdp --pp 2 --schedule %s", split[j]);
    cJSON *z = run_json(line);
    static const char *const keys[] = {"param_allgathers", "param_allgather_bytes", "grad_reductions",
                                       "grad_reduction_bytes"};
    for (guint q = 0; q < G_N_ELEMENTS(keys); q++)
      g_assert_cmpfloat(num(obj(z, "sharded_per_gpu"), keys[q]), ==, num(obj(p, "sharded_per_gpu"), keys[q]));
    g_assert_cmpfloat(num(z, "iteration_time_s"), >, 0);
    cJSON_Delete(z);
    g_free(line);
  }
  cJSON *c = run_json(FRUN " --fsdp --cp 2");
  /* with --cp 2 the shard group is d x cp = 16 ranks, and d = 8 runs two
   * microbatches per step, each gathering every block twice */
  g_assert_cmpfloat(num(obj(c, "sharded_per_gpu"), "param_allgathers"), ==, 2 * 2 * L8B);
  g_assert_cmpfloat(rel(num(obj(c, "memory_per_gpu_GiB"), "optimizer") * GIB, 8 * P / 16), <, 1e-12);
  cJSON_Delete(a);
  cJSON_Delete(t);
  cJSON_Delete(p);
  cJSON_Delete(c);
}

/* Why: plan must offer FSDP2 and HSDP beside PTD-P and give each row a
 * command that is the very simulation of the row; --hsdp pins it; a sweep
 * over --hsdp gives one row per replica count. */
static void test_plan_and_sweep(void) {
  cJSON *j = run_json("plan --model llama3-8b --cluster dgx-h100-superpod --gpus 16 --global-batch 16 --top 1000 "
                      "--format json");
  guint fsdp = 0, hsdp = 0, n = 0;
  const cJSON *row;
  cJSON_ArrayForEach(row, arr(j, "rows")) {
    fsdp += num(row, "fsdp") == 1;
    hsdp += num(row, "fsdp") > 1;
    if (num(row, "fsdp") > 0 && n++ < 3) {
      const char *cmd = str(row, "command");
      g_assert_nonnull(strstr(cmd, num(row, "fsdp") == 1 ? "--fsdp" : "--hsdp "));
      char *args = g_strconcat(cmd + strlen("ptdsim "), " --format json", NULL);
      cJSON *r = run_json(args);
      g_assert_cmpfloat(num(r, "iteration_time_s"), ==, num(row, "iteration_time_s"));
      g_assert_cmpfloat(num(obj(r, "memory_per_gpu_GiB"), "total"), ==, num(row, "memory_per_gpu_GiB"));
      cJSON_Delete(r);
      g_free(args);
    }
  }
  g_assert_cmpuint(fsdp, >, 0);
  g_assert_cmpuint(hsdp, >, 0); /* d = 16: two shard groups of 8 */
  cJSON_Delete(j);
  j = run_json("plan --model llama3-8b --cluster dgx-h100-superpod --gpus 16 --global-batch 16 --hsdp 2 --top 1000 "
               "--format json");
  cJSON_ArrayForEach(row, arr(j, "rows")) g_assert_cmpfloat(num(row, "fsdp"), ==, 2);
  g_assert_cmpint(cJSON_GetArraySize(arr(j, "rows")), >, 0);
  cJSON_Delete(j);

  char *path = g_build_filename(g_get_tmp_dir(), "ptdsim-sharded-sweep.jsonl", NULL);
  char *args = g_strdup_printf("sweep --model llama3-8b --cluster dgx-h100-superpod --gpus 16 --global-batch 16 "
                               "--hsdp 1,2,4 --network analytic --format jsonl -o %s",
                               path);
  Proc p = run_line(args);
  g_assert_cmpint(p.status, ==, 0);
  char *text = slurp(path, NULL);
  char **lines = g_strsplit(text, "\n", -1);
  guint rows = 0;
  for (char **l = lines; *l && **l; l++) {
    cJSON *r = cJSON_Parse(*l);
    g_assert_nonnull(r);
    if (cJSON_GetObjectItemCaseSensitive(r, "ptdsim_sweep")) { /* the file's first line: version and inputs */
      cJSON_Delete(r);
      continue;
    }
    g_assert_cmpstr(str(r, "status"), ==, "ok");
    g_assert_cmpfloat(num(obj(obj(r, "result"), "config"), "hsdp_replicas"), ==, (double)(1u << rows));
    rows++;
    cJSON_Delete(r);
  }
  g_assert_cmpuint(rows, ==, 3);
  g_strfreev(lines);
  g_free(text);
  proc_clear(&p);
  g_remove(path);
  g_free(path);
  g_free(args);
}

/* Why: impossible combinations are refused in one line that says what to
 * change. */
static void test_errors(void) {
  static const CliBadCase cases[] = {
      {NULL, "run --model gpt3-1b --gpus 16 --tp 1 --pp 1 --global-batch 16 --zero 3 --fsdp", "two ways to shard"},
      {NULL, "run --model llama3-8b --gpus 16 --global-batch 16 --hsdp 3", "--hsdp 3 must divide"},
      {NULL, "run --model llama3-8b --gpus 16 --global-batch 16 --hsdp 16", "--hsdp 16 must divide"},
      {NULL, "run --model llama3-8b --gpus 16 --global-batch 16 --fsdp-reduce-dtype bf16", "are FSDP2's"},
      {NULL, "run --model llama3-8b --gpus 16 --global-batch 16 --fsdp --fsdp-reduce-dtype fp64", "fp64"},
      {NULL, "run --model llama3-8b --gpus 16 --global-batch 16 --fsdp --distributed-optimizer", "drop --distributed-optimizer"},
      {NULL, "run --model llama3-8b --gpus 16 --global-batch 16 --fsdp --ddp torch", "drop --ddp"},
      {NULL, "run --model llama3-8b --gpus 16 --tp 8 --pp 2 --global-batch 16 --fsdp", "at least 2 data-parallel ranks"},
      {NULL, "run --model gpt3-1b --gpus 16 --global-batch 16 --zero-prefetch-bucket 5", "add --zero 3"},
      {NULL, "run --model llama3-8b --gpus 16 --global-batch 16 --fsdp --no-symmetry", "one GPU standing for its replicas"},
      {NULL, "run --model gpt3-1b --gpus 16 --tp 1 --pp 1 --global-batch 16 --zero 2 --zero-trace-fixed", "add --zero 3"},
      {NULL, "run --model llama3-8b --gpus 16 --pp 2 --global-batch 16 --fsdp --schedule zb-v", "not modelled with zb-v"},
      {NULL, "run --model llama3-8b --gpus 16 --pp 2 --global-batch 32 --fsdp --schedule dualpipev", "use zb-h1"},
      {NULL, "run --model llama3-8b --gpus 16 --pp 2 --global-batch 16 --fsdp --stage-times 1,1,1,0", "nothing to shard"},
  };
  cli_test_bad_each(cases, G_N_ELEMENTS(cases));
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  g_test_add_func("/sharded/zero3-counts", test_zero3_counts);
  g_test_add_func("/sharded/zero3-trace-fixed", test_zero3_trace_fixed);
  g_test_add_func("/sharded/zero3-memory", test_zero3_memory);
  g_test_add_func("/sharded/zero3-doubling", test_zero3_doubling);
  g_test_add_func("/sharded/ring-latency", test_ring_latency);
  g_test_add_func("/sharded/fsdp-counts-memory", test_fsdp_counts_and_memory);
  g_test_add_func("/sharded/fsdp-composes", test_fsdp_composes);
  g_test_add_func("/sharded/plan-and-sweep", test_plan_and_sweep);
  g_test_add_func("/sharded/errors", test_errors);
  return g_test_run();
}
