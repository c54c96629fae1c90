/* ptdsim — calibration measurements: what ptdsim-calibrate measured on a GPU
 * (or what `ptdsim fit --synthesize` made up from a profile), in one JSON
 * format read by `ptdsim fit`.  doc/calibration.md describes the format.
 *
 * Units are fixed and declared in the file ("units": {"time": "us",
 * "size": "bytes"}) so that a file written in other units is rejected rather
 * than silently misread.
 */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>

#include "../models/profile.h"

#define CALIB_FORMAT "ptdsim-measurements"
#define CALIB_FORMAT_VERSION 1

/* Median and spread over the timed repetitions, microseconds. */
typedef struct {
  double median_us, min_us, p10_us, p90_us, max_us;
  guint reps;
} CalibTime;

typedef struct {
  char dtype[8];  /* "fp16", "bf16", or "fp8" (E4M3 inputs with per-tensor scales, bf16 output) */
  char op[32];    /* "qkv.fwd", "fc1.wgrad", "grid.k", "layout.qkv.fwd", "lt.qkv.fwd", "lt.grid.wave", ... */
  char layout[4]; /* cuBLAS ops of A and B: "NN", "NT", "TN", "TT" (optional when reading: "NN") */
  char api[12];   /* "cublas" (cublasGemmEx; optional when reading) or "cublaslt" */
  guint64 batch, m, n, k;
  guint tile_m, tile_n; /* the tile of the algorithm cuBLASLt chose ("tile": [m, n]); 0: not recorded */
  CalibTime t;
} CalibGemm;

/* A fused flash-attention kernel pair (cuDNN's SDPA): forward and backward
 * of batch x heads query heads over kv_heads key/value heads. */
typedef struct {
  char impl[16]; /* "cudnn-sdpa" */
  char dtype[8]; /* "bf16" */
  gboolean causal;
  guint64 batch, heads, kv_heads, seq, head_dim;
  /* The harness times both passes; published figures may give one
   * ("forward_us" or "backward_us" absent). */
  gboolean has_fwd, has_bwd;
  CalibTime fwd, bwd;
} CalibAttention;

/* The memory-bound kernels the membound mode measures, as production
 * frameworks write them (Megatron-Core and Transformer Engine: one pass,
 * 16-byte vectorized accesses), over a bf16 tensor of rows x cols: */
typedef struct {
  const char *name;  /* "rmsnorm.fwd", ... */
  ModelMemClass cls; /* the fitted class it belongs to */
  /* Bytes read and written per element of rows x cols (per-row and
   * per-column vectors such as gamma, the statistics or the loss are
   * neglected: they are one row or column against thousands). */
  double bytes_per_elem;
  const char *what;  /* what it reads and writes */
} CalibMemboundOp;

/* The table, in the harness's order. */
extern const CalibMemboundOp calib_membound_ops[];
extern const guint calib_n_membound_ops;
/* The row of `name`, or NULL. */
const CalibMemboundOp *calib_membound_op(const char *name);
/* The class of one of Megatron's 2021 kernels (the kernels records): a
 * fused one is one kernel of one class (layernorm: norm; bias+GeLU:
 * activation; bias+dropout+add: pointwise; scale-mask-softmax: softmax);
 * the unfused chains and attention run several, MODEL_MEM_N. */
ModelMemClass calib_kernel_class(const char *name, gboolean fused, guint kernels);

/* One memory-bound kernel as production frameworks write it: `op` names a
 * row of calib_membound_ops, which gives its class and bytes. */
typedef struct {
  char op[32];
  guint64 rows, cols;
  double bytes; /* read + written */
  CalibTime t;
} CalibMembound;

typedef struct {
  double bytes; /* read + written (a copy of S bytes moves 2 S) */
  CalibTime t;
} CalibMembw;

typedef struct {
  char name[32]; /* bias_gelu, bias_dropout_add, scale_mask_softmax, layernorm, attention */
  gboolean fused;
  guint64 rows, cols;
  double bytes;  /* bytes read + written by all its kernels */
  guint kernels; /* kernels launched */
  CalibTime t;
} CalibKernel;

typedef struct {
  guint hidden, heads, seq, micro_batch, tp;
  /* The modern layer's description (all optional when reading; absent: the
   * 2021 layer, GPT style in fp16 with Megatron's attention kernels). */
  guint kv_heads, ffn;   /* 0: heads, 4 hidden */
  gboolean llama;        /* "style": "llama" (RMSNorm, rotary, SwiGLU, no bias) or "gpt" */
  char dtype[8];         /* linear layers: "fp16", "bf16" or "fp8" */
  gboolean flash;        /* "attention": "flash" (cuDNN SDPA) or "megatron" */
  gboolean sequence_parallel;
  gboolean fused;
  CalibTime fwd, bwd;
  gboolean has_recompute; /* "recompute_us" present (optional when reading) */
  CalibTime recompute;    /* the recomputation forward just before the backward */
} CalibLayer;

/* A sustained loop of one GEMM: the rate a power-capped GPU settles at
 * under a long tensor-core load.  The rate of a short burst of
 * back-to-back products (as the gemm records are timed), then the rate of
 * each chunk of a loop of loop_s seconds, in order; the SM clock (MHz) and
 * board power (W) sampled during the loop, and the power limit in force
 * (0: not recorded). */
#define CALIB_MAX_SAMPLES 1024
typedef struct {
  char dtype[8]; /* "fp16", "bf16" */
  guint64 m, n, k;
  double burst_tflops, loop_s, power_limit_W;
  guint n_chunks, n_clock, n_power;
  double chunk_tflops[CALIB_MAX_SAMPLES], clock_MHz[CALIB_MAX_SAMPLES], power_W[CALIB_MAX_SAMPLES];
} CalibSustained;

/* The settled rate of a sustained loop: the median of its second half's
 * chunks (the first half holds the clock's fall from its burst value); the
 * medians of its second half's clock and power samples (0: none recorded).
 * Each over at least one sample. */
double calib_sustained_tflops(const CalibSustained *s);
double calib_sustained_clock_MHz(const CalibSustained *s);
double calib_sustained_power_W(const CalibSustained *s);

/* The overlap mode: a bf16 GEMM timed alone and beside work that holds
 * SMs and moves data as a collective's kernels do.  `with` "copy": a
 * holder kernel of `blocks` thread blocks (one per SM, as NCCL runs one
 * block per channel) copying a `bytes` buffer from HBM to HBM, over and
 * over; its rate `moved_GBps` is bytes copied per second (each read once and
 * written once).  Beside it, also a memory-bound probe (a streaming copy of
 * mem_bytes, read and written: 2 mem_bytes of traffic) timed alone and
 * beside the holder, with the holder's rate beside the probe.  `with`
 * "all_reduce": an NCCL all-reduce of `bytes` (nccl-tests' size) over
 * `ranks` GPUs, its rate the bus bandwidth; no probe (mem_bytes 0).  Times
 * in microseconds per GEMM product or per probe pass, rates in GB/s, each
 * the mean over a window of hundreds of milliseconds. */
typedef struct {
  char dtype[8]; /* "bf16" */
  guint64 m, n, k;
  char with[16]; /* "copy" or "all_reduce" */
  guint blocks;  /* copy: the holder's thread blocks */
  guint ranks;   /* all_reduce: its GPUs (copy: 1) */
  double bytes;
  double gemm_us, gemm_beside_us;
  double moved_GBps, moved_beside_GBps;
  double mem_bytes, mem_us, mem_beside_us, moved_beside_mem_GBps; /* copy only */
} CalibOverlap;

typedef enum { CALIB_ALLREDUCE, CALIB_ALLGATHER, CALIB_REDUCESCATTER, CALIB_SENDRECV, CALIB_N_COLL } CalibCollOp;

typedef struct {
  CalibCollOp op;
  guint ranks;
  double bytes; /* nccl-tests' size column */
  CalibTime t;
} CalibColl;

typedef struct {
  char *name;
  char *compute_capability;
  guint sms;
  double sm_clock_MHz, memory_clock_MHz, memory_bus_bits;
  double memory_GiB;
  double hbm_GBps;    /* theoretical: 2 * memory clock * bus width / 8 */
  double peak_tflops; /* dense fp16/bf16 tensor rate at sm_clock_MHz */
  double l2_MiB;      /* L2 cache (optional; 0: not recorded) */
  char *peak_source;
  guint gpus;         /* GPUs visible to the NCCL measurements */
  char *driver, *cuda_runtime, *cublas, *cublaslt, *nccl, *cudnn;
} CalibDevice;

typedef struct {
  char *tool, *host, *date;
  char *synthetic; /* NULL for a real measurement; else what it was made from */
  char *source;    /* published figures transcribed into this format: where they come from (NULL: measured) */
  CalibDevice device;
  guint warmup, reps;
  GArray *gemm;    /* CalibGemm */
  GArray *membw;   /* CalibMembw */
  GArray *kernels; /* CalibKernel */
  GArray *layers;  /* CalibLayer */
  GArray *coll;    /* CalibColl */
  GArray *attention; /* CalibAttention (optional list "attention") */
  GArray *membound;  /* CalibMembound (optional list "membound") */
  GArray *sustained; /* CalibSustained (optional list "sustained") */
  GArray *overlap;   /* CalibOverlap (optional list "overlap") */
  GPtrArray *failures; /* strings: measurements that failed under --keep-going (optional "failures" list) */
  GPtrArray *skipped;  /* strings: modes the device or its libraries cannot run (optional "skipped" list) */
} CalibMeasurements;

#define CALIB_ERROR (calib_error_quark())
GQuark calib_error_quark(void);
typedef enum { CALIB_ERROR_INVALID, CALIB_ERROR_TOO_FEW, CALIB_ERROR_NO_CONVERGENCE } CalibError;

CalibMeasurements *calib_measurements_new(void);
void calib_measurements_free(CalibMeasurements *m);
const char *calib_coll_name(CalibCollOp op);
/* nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md there). */
double calib_busbw_factor(CalibCollOp op, guint ranks);
/* Median, extremes and 10th/90th percentiles of `n` samples (sorted in place). */
CalibTime calib_time_from_samples(double *samples_us, guint n);

/* The JSON document (caller frees with cJSON_Delete). */
cJSON *calib_measurements_to_json(const CalibMeasurements *m);
/* Writes the JSON to `path` atomically (no partial file on failure). */
gboolean calib_measurements_save(const CalibMeasurements *m, const char *path, GError **error);
/* Reads and validates a file: one-line errors naming the file, the record and the key. */
CalibMeasurements *calib_measurements_load(const char *path, GError **error);
/* Appends the records of `from` (read from `from_path`) to `into`, which
 * must describe the same GPU (name and SMs): one GPU's measurements made
 * in several runs of the harness. */
gboolean calib_measurements_merge(CalibMeasurements *into, const CalibMeasurements *from, const char *from_path,
                                  GError **error);
/* The same, from a parsed file (`path` names it in errors). */
CalibMeasurements *calib_measurements_from_json(const cJSON *root, const char *path, GError **error);
