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
/* NCCL over the first `ranks` visible GPUs (ncclCommInitAll); op 0..3 as
 * CalibCollOp (send/receive between GPUs 0 and 1 only); bytes in nccl-tests'
 * convention; float elements. */
int calib_gpu_nccl_open(int ranks, double max_bytes, char *err, size_t errlen);
int calib_gpu_nccl(int op, double bytes, CalibGpuTiming *t, char *err, size_t errlen);
void calib_gpu_nccl_close(void);

#ifdef __cplusplus
}
#endif
