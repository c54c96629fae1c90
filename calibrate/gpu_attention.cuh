// ptdsim-calibrate — cuDNN's fused flash attention (scaled dot-product
// attention, SDPA), forward and backward, as one reusable object: the
// attention room (gpu_attention.cu, which implements it and times it) and
// the modern-layer room (gpu_layer.cu, which runs it inside a layer) share
// it.  C++ only; no timing here.
//
//   Sdpa a;
//   rc = a.init(handle, stream, b, h, h_kv, s, d, causal, err, errlen);
//   rc = a.forward(q, k, v, o, stats, err, errlen);
//   rc = a.backward(q, k, v, o, dout, stats, dq, dk, dv, err, errlen);
//   a.destroy();
//
// init builds cuDNN's two operation graphs for the shape (the forward, with
// its softmax statistics, and the backward), picks each graph's first
// working engine from heuristics mode A, and allocates the one workspace
// both plans share.  It returns 0, CALIB_GPU_UNSUPPORTED (gpu.h) with a
// one-line reason where cuDNN has no engine for this GPU and shape or the
// harness was built without cuDNN (-DPTDSIM_NO_CUDNN), or 1 with a one-line
// error.  forward and backward enqueue one cuDNN execution each on `stream`
// and return 0 or 1 (with the failing call); they read and write only the
// pointers given and the object's workspace, so calls on one stream may
// follow each other freely, and the object may be reused for any pointers
// of the same shape.  destroy (also the destructor) releases everything and
// is safe on an empty, failed or already destroyed object; the cuDNN handle
// and the stream stay the caller's and must outlive the object's use.
//
// Layout: every tensor contiguous, row-major, device memory, bf16 unless
// said otherwise:
//   q, o, dout, dq   [b, h, s, d]
//   k, v, dk, dv     [b, h_kv, s, d]   h % h_kv == 0; query head i reads
//                                      kv head i / (h / h_kv) (grouped-query)
//   stats            fp32 [b, h, s, 1]: each query row's log-sum-exp
//                    (natural log) of its scaled, masked scores, written by
//                    forward and read by backward
// The scores are q k^T / sqrt(d); causal masks key j > query i (top-left
// diagonal, s_q = s_kv); no dropout, no bias; fp32 accumulation inside.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include <vector>

#ifndef PTDSIM_NO_CUDNN
#include <cudnn_graph.h>
#else
// cuDNN's own declaration of its handle type (cudnn_graph.h), so that callers
// compile unchanged when cuDNN is absent; init then says it is unsupported.
struct cudnnContext;
typedef struct cudnnContext *cudnnHandle_t;
#endif

#include "gpu.h"

struct Sdpa {
  long long b = 0, h = 0, h_kv = 0, s = 0, d = 0;
  bool causal = true;
  size_t workspace_bytes = 0; // the shared workspace (both plans and the backward's fp32 accumulators)

  Sdpa() = default;
  Sdpa(const Sdpa &) = delete;
  Sdpa &operator=(const Sdpa &) = delete;
  ~Sdpa() { destroy(); }

  int init(cudnnHandle_t handle, cudaStream_t stream, long long batch, long long heads, long long kv_heads,
           long long seq, long long head_dim, bool is_causal, char *err, size_t errlen);
  int forward(const __nv_bfloat16 *q, const __nv_bfloat16 *k, const __nv_bfloat16 *v, __nv_bfloat16 *o,
              float *stats, char *err, size_t errlen);
  int backward(const __nv_bfloat16 *q, const __nv_bfloat16 *k, const __nv_bfloat16 *v, const __nv_bfloat16 *o,
               const __nv_bfloat16 *dout, const float *stats, __nv_bfloat16 *dq, __nv_bfloat16 *dk,
               __nv_bfloat16 *dv, char *err, size_t errlen);
  void destroy();

  // --- internal (gpu_attention.cu) ---
  cudnnHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::vector<void *> descriptors_; // every cuDNN backend descriptor made, destroyed in reverse
  void *fwd_plan_ = nullptr, *bwd_plan_ = nullptr;
  void *workspace_ = nullptr;
  size_t dq_accum_offset_ = 0, softmax_sum_offset_ = 0, bwd_plan_offset_ = 0, dq_accum_bytes_ = 0;
  bool zero_dq_accum_ = false;                    // cuDNN before 9.6 wants dQ's accumulator zeroed
  float scale_ = 0, neg_inf_ = 0, one_ = 1;       // the graphs' by-value scalars (host memory)
};
