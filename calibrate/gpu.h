/* ptdsim-calibrate — the GPU side (calibrate/gpu.cu, CUDA C with cuBLAS and
 * NCCL), behind a plain C interface so that the rest of the harness (options,
 * plan, statistics, JSON) is ordinary C built and tested everywhere.
 *
 * Every function returns 0 on success, or non-zero with a one-line message
 * (file, line, the failing call and the library's error string) in `err`.
 * Every CUDA, cuBLAS and NCCL call is checked.  Every kernel is checked
 * against a CPU reference on pseudo-random data before it is timed; times are
 * CUDA-event intervals, one per repetition, after `warmup` untimed runs, in
 * microseconds.
 */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  char name[256];
  char compute_capability[16];
  int sms;
  double sm_clock_MHz, memory_clock_MHz, memory_bus_bits, memory_GiB;
  int gpus; /* visible devices */
  int driver, runtime, cublas, cublaslt, nccl; /* version numbers as the libraries report them */
  int cudnn;                                    /* 0 where cuDNN is not built in */
  double l2_bytes;                              /* cudaDevAttrL2CacheSize */
} CalibGpuInfo;

typedef struct {
  unsigned warmup, reps;
  double *samples_us; /* reps entries */
} CalibGpuTiming;

int calib_gpu_info(int device, CalibGpuInfo *info, char *err, size_t errlen);
/* C = op(A) op(B), column-major, batch x (m x k) (k x n), op transposing
 * when transa / transb (storage and leading dimensions: gemm_index.h), fp16
 * or bf16 in and out, fp32 accumulation (cublasGemmStridedBatchedEx). */
int calib_gpu_gemm(int device, int bf16, int transa, int transb, unsigned long long batch, unsigned long long m,
                   unsigned long long n, unsigned long long k, CalibGpuTiming *t, char *err, size_t errlen);
/* Device-to-device copy of `bytes`. */
int calib_gpu_copy(int device, double bytes, CalibGpuTiming *t, char *err, size_t errlen);
/* One of bias_gelu, bias_dropout_add, scale_mask_softmax, layernorm (fused or
 * unfused) over rows x cols fp16; attention needs seq and head_dim: rows is
 * batch * seq, cols is seq. */
int calib_gpu_kernel(int device, const char *name, int fused, unsigned long long rows, unsigned long long cols,
                     unsigned long long seq, unsigned long long head_dim, CalibGpuTiming *t, char *err, size_t errlen);
/* One Megatron layer at the tensor-parallel shard (fp16, fused kernels, no
 * all-reduce): the forward alone, then the recomputation forward and the
 * backward that follows it, each its own interval (rec and bwd take
 * min(rec->reps, bwd->reps) samples). */
int calib_gpu_layer(int device, unsigned hidden, unsigned heads, unsigned seq, unsigned micro_batch, unsigned tp,
                    CalibGpuTiming *fwd, CalibGpuTiming *rec, CalibGpuTiming *bwd, char *err, size_t errlen);
/* Returned (with a one-line reason in `err`) when the device or the
 * installed libraries cannot run a measurement at all (no cuDNN, no FP8
 * tensor cores, no fused flash attention for this GPU): the driver skips the
 * mode and says so, rather than failing the run. */
#define CALIB_GPU_UNSUPPORTED 2

/* A GEMM through cuBLASLt as Transformer Engine calls it (gpu_gemmlt.cu):
 * C[m x n] = op(A)[m x k] op(B)[k x n], column-major (gemm_index.h), one
 * matrix (no batch), fp32 accumulation; fp8 = 0: bf16 inputs and output;
 * fp8 = 1: E4M3 inputs with per-tensor scale factors (A/B scale pointers,
 * device fp32) and a bf16 output.  The algorithm is cuBLASLt's first
 * heuristic choice with a 32 MiB workspace; *tile_m x *tile_n is its tile
 * (CUBLASLT_ALGO_CONFIG_TILE_ID), 0 x 0 when the library does not say. */
int calib_gpu_gemmlt(int device, int fp8, int transa, int transb, unsigned long long m, unsigned long long n,
                     unsigned long long k, unsigned *tile_m, unsigned *tile_n, CalibGpuTiming *t, char *err,
                     size_t errlen);
/* cuDNN 9's fused flash attention (SDPA through the graph API, as
 * Transformer Engine runs it on Hopper; gpu_attention.cu): bf16 Q of
 * batch x heads x seq x head_dim, K and V of kv_heads (grouped-query when
 * fewer), causal or not; the forward (with its softmax statistics) and the
 * backward each timed on its own.  CALIB_GPU_UNSUPPORTED where cuDNN or its
 * SDPA is missing for the device. */
int calib_gpu_attention(int device, unsigned long long batch, unsigned long long heads, unsigned long long kv_heads,
                        unsigned long long seq, unsigned long long head_dim, int causal, CalibGpuTiming *fwd,
                        CalibGpuTiming *bwd, char *err, size_t errlen);
/* One memory-bound kernel as production frameworks write it (16-byte
 * vectorized accesses, one pass; gpu_membound.cu): `op` is one of the names
 * of calib_membound_ops (measurements.h), over a bf16 rows x cols tensor (cols: the
 * row's width as that table defines it). */
int calib_gpu_membound(int device, const char *op, unsigned long long rows, unsigned long long cols,
                       CalibGpuTiming *t, char *err, size_t errlen);
/* One modern transformer layer at one tensor-parallel rank's shard, no
 * communication (gpu_layer.cu): GPT style (layernorm, bias, GeLU MLP) or
 * Llama style (RMSNorm, rotary, grouped-query attention, SwiGLU, no bias);
 * linear layers in bf16 or FP8 (cuBLASLt, with the casts), attention through
 * cuDNN's flash SDPA; sequence_parallel: the norms, dropouts and residuals on
 * seq / tp of the tokens.  The forward alone, then the recomputation forward
 * and the backward that follows it, as calib_gpu_layer times them. */
typedef struct {
  unsigned hidden, heads, kv_heads, ffn, seq, micro_batch, tp;
  int llama, fp8, sequence_parallel;
} CalibGpuLayer;
int calib_gpu_modern_layer(int device, const CalibGpuLayer *l, CalibGpuTiming *fwd, CalibGpuTiming *rec,
                           CalibGpuTiming *bwd, char *err, size_t errlen);
/* The sustained mode (gpu_sustained.cu): a bf16 m x n x k GEMM through
 * cuBLASLt in the forward's layout, checked and timed as calib_gpu_gemmlt
 * times it (`burst`), then run back to back for `seconds` in chunks of
 * `chunk` products, each chunk's rate in TFLOP/s, and the SM clock (MHz)
 * and board power (W) read through NVML after each chunk (none where the
 * driver's NVML library cannot be loaded), with the enforced power limit
 * (W; 0: unknown).  The caller gives arrays of max_chunks entries.  With
 * set_limit_W > 0 the board's power limit is set to it through NVML after
 * the burst and before the loop (nvmlDeviceSetPowerManagementLimit: root
 * only; refused, it is an error and nothing is changed) and the previous
 * limit restored when the loop ends, also when it fails. */
typedef struct {
  double set_limit_W;
  unsigned max_chunks;
  unsigned n_chunks, n_samples;
  double *chunk_tflops, *clock_MHz, *power_W;
  double loop_s, power_limit_W;
} CalibGpuSustained;
int calib_gpu_sustained(int device, unsigned long long m, unsigned long long n, unsigned long long k, double seconds,
                        unsigned chunk, CalibGpuTiming *burst, CalibGpuSustained *out, char *err, size_t errlen);
/* The overlap mode (gpu_overlap.cu): a bf16 m x n x k GEMM through
 * cuBLASLt in the forward's layout, checked and timed as calib_gpu_gemmlt
 * times it (`burst`), then timed over a window of at least window_s
 * seconds: alone, and beside a holder kernel of `blocks` thread blocks (one
 * SM each, as NCCL runs one block per channel) copying a holder_bytes
 * buffer from HBM to HBM over and over on a second stream; the holder's
 * rate alone and beside the GEMM; a memory-bound probe (a streaming copy
 * of mem_bytes filling the GPU) alone and beside the holder, with the
 * holder's rate beside it.  Each run beside another lies inside it: the
 * outer one is sized to CALIB_OVERLAP_OUTER windows (passed as `outer`) at
 * its rate alone, and an inner run that does not end inside it is an
 * error.  First the GEMM loops for settle_s seconds, so that a
 * power-capped clock has settled; each block count's GEMM and probe are
 * timed alone just before they run beside the holder.  The copies are
 * checked against their source. */
typedef struct {
  unsigned blocks;
  double gemm_us, gemm_beside_us;       /* per product */
  double moved_GBps, moved_beside_GBps; /* bytes copied per second (all-reduce: bus bandwidth) */
  double mem_us, mem_beside_us;         /* per probe pass */
  double moved_beside_mem_GBps;
} CalibGpuOverlap;
int calib_gpu_overlap(int device, unsigned long long m, unsigned long long n, unsigned long long k,
                      const unsigned *blocks, unsigned n_blocks, double holder_bytes, double mem_bytes,
                      double window_s, unsigned outer, double settle_s, CalibGpuTiming *burst,
                      CalibGpuOverlap *out, char *err, size_t errlen);
/* The same GEMM on GPU 0 alone and beside an NCCL all-reduce of `bytes`
 * (float, nccl-tests' size) over GPUs 0 .. ranks-1 (ncclCommInitAll, one
 * stream each), each nested in the other as above, after the GEMM's
 * settle_s loop; the all-reduce's bus bandwidth alone and beside the GEMM
 * in moved_GBps / moved_beside_GBps, its result checked.  out->blocks is
 * 0; the mem fields are 0. */
int calib_gpu_overlap_allreduce(int ranks, unsigned long long m, unsigned long long n, unsigned long long k,
                                double bytes, double window_s, unsigned outer, double settle_s,
                                CalibGpuOverlap *out, char *err, size_t errlen);
/* NCCL over the first `ranks` visible GPUs (ncclCommInitAll); op 0..3 as
 * CalibCollOp (send/receive between GPUs 0 and 1 only); bytes in nccl-tests'
 * convention; float elements. */
int calib_gpu_nccl_open(int ranks, double max_bytes, char *err, size_t errlen);
int calib_gpu_nccl(int op, double bytes, CalibGpuTiming *t, char *err, size_t errlen);
void calib_gpu_nccl_close(void);

#ifdef __cplusplus
}
#endif
