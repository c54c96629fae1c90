// ptdsim-calibrate — the attention room: cuDNN 9's fused flash attention
// (scaled dot-product attention, SDPA), forward and backward, causal, bf16,
// grouped-query heads (interface: gpu.h; the reusable object: gpu_attention.cuh).
//
// What it measures and why.  A transformer layer's attention on today's H100
// training step is not Megatron's 2021 chain of batched GEMMs and a fused
// softmax (calib_gpu_kernel's "attention"): Transformer Engine hands it to
// cuDNN's fused flash-attention kernels (FlashAttention-2, Dao 2023), which
// never write the s x s score matrix and whose cost therefore does not follow
// from GEMM and softmax rates.  This room times those kernels themselves: the
// forward (which also writes each row's softmax statistics) and the backward
// (given the forward's output and statistics), each on its own, for the
// shapes the plan asks for.
//
// How cuDNN is driven.  The cuDNN frontend (the header-only C++ library that
// Transformer Engine calls) is not a dependency here; this file builds the
// same two operation graphs with cuDNN's backend C API.  The graphs follow
// the frontend's composite SDPA nodes op for op (NVIDIA/cudnn-frontend v1.23,
// include/cudnn_frontend/node/scaled_dot_product_flash_attention.h:
// CompositeSDPANode::expand_node and CompositeSDPABackwardNode::expand_node;
// node/softmax.h: CompositeSoftmaxNode; node/diagonal_band_mask.h:
// CompositeDiagonalBandMaskNode; utils/attn_score_modifiers.h: causal_mask),
// which is the graph cuDNN's runtime-fusion engines are matched against;
// tensor types follow the frontend's context as Transformer Engine sets it
// (bf16 input/output, fp32 intermediates and compute).  With cuDNN 9.19 a
// causal mask still takes the frontend's composite path (its unified SDPA
// operation needs 9.21 for masks: node/sdpa_support_surface.h).  The ops,
// in order, are listed above build_forward and build_backward below.
// Checked without a GPU (cuDNN 9.19's deviceless mode, a described H100,
// heuristics with CUDNN_ATTR_ENGINEHEUR_DEVICEPROP): for causal shapes (MHA,
// GQA, MQA; d = 64, 96, 128, 256) both graphs, as cuDNN logs them when
// finalized, are descriptor for descriptor those frontend v1.23 builds, and
// heuristics offer the same engines (forward 2 and 1, backward 6 and 7).  Not
// causal, the frontend now emits cuDNN's single SDPA_FWD operation for the
// forward (engines 9 and 8, the same kernel configurations); this file keeps
// the composite graph there.
//
// Layout (gpu_attention.cuh): Q, O, dO, dQ [b, h, s, d]; K, V, dK, dV
// [b, h_kv, s, d] (BHSD, contiguous; query head i reads kv head
// i / (h / h_kv), the frontend's "b (hk g)" grouping); statistics fp32
// [b, h, s, 1].  Scale 1/sqrt(d); causal keeps key j <= query i; no dropout,
// no bias.
//
// The check, before any timing, on the measured shape: for 8 query rows
// (first and last positions, first and last batch and head, and pseudo-random
// ones) the CPU recomputes in double precision, from the same bf16 inputs
// read back from the GPU, the row's output O and its log-sum-exp (against the
// statistics), and the row's dQ; then for three key rows of one kv head it
// recomputes dK and dV, summing over every query row and query head that
// sees them (with the GPU's statistics and output, checked first, for each
// query row's softmax and D = rowsum(dO o O)).  Tolerances are derived where
// they are applied (check_outputs).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"
#include "gpu_attention.cuh"

#ifdef PTDSIM_NO_CUDNN

// Built without cuDNN 9 (calibrate/meson.build): the room says so and is
// skipped; the object refuses to initialise.

static int no_cudnn(char *err, size_t errlen) {
  snprintf(err, errlen, "ptdsim-calibrate was built without cuDNN 9 (not found next to nvcc): "
                        "no fused flash attention to measure");
  return CALIB_GPU_UNSUPPORTED;
}

extern "C" int calib_gpu_attention(int, unsigned long long, unsigned long long, unsigned long long,
                                   unsigned long long, unsigned long long, int, CalibGpuTiming *, CalibGpuTiming *,
                                   char *err, size_t errlen) {
  return no_cudnn(err, errlen);
}

int Sdpa::init(cudnnHandle_t, cudaStream_t, long long, long long, long long, long long, long long, bool, char *err,
               size_t errlen) {
  return no_cudnn(err, errlen);
}

int Sdpa::forward(const __nv_bfloat16 *, const __nv_bfloat16 *, const __nv_bfloat16 *, __nv_bfloat16 *, float *,
                  char *err, size_t errlen) {
  no_cudnn(err, errlen);
  return 1;
}

int Sdpa::backward(const __nv_bfloat16 *, const __nv_bfloat16 *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                   const __nv_bfloat16 *, const float *, __nv_bfloat16 *, __nv_bfloat16 *, __nv_bfloat16 *, char *err,
                   size_t errlen) {
  no_cudnn(err, errlen);
  return 1;
}

void Sdpa::destroy() {}

#else // cuDNN 9

#include <cudnn_graph.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

#include <algorithm>
#include <vector>

#include "gpu_common.cuh"

typedef __nv_bfloat16 bf16;

// A cuDNN call that failed: the call, cuDNN's status string and, where cuDNN
// 9 has one, its last error message (newlines folded, so that it stays one
// line).
static int cudnn_fail(char *err, size_t n, const char *file, int line, const char *call, cudnnStatus_t st) {
  char last[512] = "";
  cudnnGetLastErrorString(last, sizeof last);
  snprintf(err, n, "%s:%d: %s failed: %s%s%s", file, line, call, cudnnGetErrorString(st), last[0] ? ": " : "", last);
  for (char *c = err; *c; c++)
    if (*c == '\n' || *c == '\r')
      *c = ' ';
  return 1;
}

#define CUDNN_OK(call)                                                                                               \
  do {                                                                                                               \
    cudnnStatus_t st_ = (call);                                                                                      \
    if (st_ != CUDNN_STATUS_SUCCESS) {                                                                               \
      rc = cudnn_fail(err, errlen, __FILE__, __LINE__, #call, st_);                                                  \
      goto done;                                                                                                     \
    }                                                                                                                \
  } while (0)

namespace {

// Tensor unique ids: the graphs' non-virtual tensors (what a variant pack
// binds), then the virtual ones numbered from kVirtual.
enum : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kScale,
  kNegInf,
  kOne,
  kdO,
  kdQ,
  kdK,
  kdV,
  kSoftmaxSum,
  kdQAccum,
  kVirtual = 100
};

struct Dims {
  int64_t v[4];
};

// Builds backend descriptors, remembering each one (for destroy) and the
// first call that failed; after a failure every further call is skipped and
// returns null, so that a graph is written straight through and checked once.
class Builder {
public:
  explicit Builder(std::vector<void *> &owned) : owned_(owned) {}

  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  char call[160] = "";
  char last[512] = "";
  int line = 0;
  std::vector<cudnnBackendDescriptor_t> ops;

  bool ok() const { return status == CUDNN_STATUS_SUCCESS; }

  bool check(cudnnStatus_t st, const char *what, const char *detail, int ln) {
    if (ok() && st != CUDNN_STATUS_SUCCESS) {
      status = st;
      snprintf(call, sizeof call, "%s%s", what, detail);
      line = ln;
      keep_last_error();
    }
    return ok();
  }

  // cuDNN's last message (why it refused, engine by engine where heuristics
  // dropped every configuration), on one line.
  void keep_last_error() {
    cudnnGetLastErrorString(last, sizeof last);
    for (char *c = last; *c; c++)
      if (*c == '\n' || *c == '\r')
        *c = ' ';
  }

  cudnnBackendDescriptor_t create(cudnnBackendDescriptorType_t type, const char *what, int ln) {
    cudnnBackendDescriptor_t desc = nullptr;
    if (!ok())
      return nullptr;
    if (!check(cudnnBackendCreateDescriptor(type, &desc), "cudnnBackendCreateDescriptor", what, ln))
      return nullptr;
    owned_.push_back(desc);
    return desc;
  }

#define SET(desc, attr, type, count, ptr)                                                                            \
  (ok() && check(cudnnBackendSetAttribute((desc), (attr), (type), (count), (ptr)), "cudnnBackendSetAttribute",       \
                 "(" #attr ")", __LINE__))
#define FINALIZE(desc, what) (ok() && check(cudnnBackendFinalize(desc), "cudnnBackendFinalize", what, __LINE__))

  // A tensor (16-byte aligned, as the frontend's default).  By-value tensors
  // are scalars read from host memory at execution (the frontend's
  // pass-by-value tensors, expanded to the graph's four dimensions as its
  // Attributes::fill_from_context does).
  cudnnBackendDescriptor_t tensor(int64_t uid, const Dims &dim, const Dims &stride, cudnnDataType_t type,
                                  bool is_virtual, bool by_value = false) {
    cudnnBackendDescriptor_t t = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "(tensor)", __LINE__);
    int64_t alignment = 16;
    SET(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    SET(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim.v);
    SET(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride.v);
    SET(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    SET(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
    SET(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    if (by_value)
      SET(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    FINALIZE(t, "(tensor)");
    return ok() ? t : nullptr;
  }

  cudnnBackendDescriptor_t virt(const Dims &dim, const Dims &stride, cudnnDataType_t type) {
    return tensor(next_virtual_++, dim, stride, type, true);
  }

  // y = mode(x[, b[, t]]): b is the second operand, t the third (the
  // condition of BINARY_SELECT, which yields t ? x : b); axis only for
  // GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                 cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, cudnnDataType_t precision = CUDNN_DATA_FLOAT,
                 int64_t axis = -1) {
    cudnnBackendDescriptor_t pw = create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "(pointwise)", __LINE__);
    SET(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    SET(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision);
    if (mode == CUDNN_POINTWISE_GEN_INDEX)
      SET(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    FINALIZE(pw, "(pointwise)");
    cudnnBackendDescriptor_t op = create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "(pointwise op)", __LINE__);
    SET(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
    SET(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (b)
      SET(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    if (t)
      SET(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
    SET(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    FINALIZE(op, "(pointwise op)");
    if (ok())
      ops.push_back(op);
  }

  // c = a b over the last two dimensions, batched over the first two (b's
  // head count may divide a's: grouped-query attention); fp32 compute.
  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t mm = create(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "(matmul)", __LINE__);
    SET(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    FINALIZE(mm, "(matmul)");
    cudnnBackendDescriptor_t op = create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "(matmul op)", __LINE__);
    SET(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
    SET(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    SET(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
    SET(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm);
    FINALIZE(op, "(matmul op)");
    if (ok())
      ops.push_back(op);
  }

  // y = reduce(x) over the dimensions where y is smaller (to 1, or from h
  // query heads to h_kv groups); fp32 compute.
  void reduction(cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t red = create(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "(reduction)", __LINE__);
    SET(red, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
    SET(red, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    FINALIZE(red, "(reduction)");
    cudnnBackendDescriptor_t op = create(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "(reduction op)", __LINE__);
    SET(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    SET(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    SET(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &red);
    FINALIZE(op, "(reduction op)");
    if (ok())
      ops.push_back(op);
  }

  // y = x seen through y's dimensions and strides (a transpose, as a view).
  void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t op = create(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "(reshape op)", __LINE__);
    SET(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    SET(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    FINALIZE(op, "(reshape op)");
    if (ok())
      ops.push_back(op);
  }

  // The operation graph of every op added since the last graph, in order.
  cudnnBackendDescriptor_t graph(cudnnHandle_t handle) {
    cudnnBackendDescriptor_t g = create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "(operation graph)", __LINE__);
    SET(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    SET(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, (int64_t)ops.size(), ops.data());
    FINALIZE(g, "(operation graph)");
    ops.clear();
    return ok() ? g : nullptr;
  }

  // An execution plan for graph g: engine configurations from heuristics
  // mode A, in their order, the first that finalizes (as the frontend's
  // build_plans with its default policy, HEURISTICS_CHOICE); *none is set
  // when heuristics return nothing.
  cudnnBackendDescriptor_t plan(cudnnHandle_t handle, cudnnBackendDescriptor_t g, int64_t *workspace, bool *none) {
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    int64_t count = 0;
    *none = false;
    cudnnBackendDescriptor_t heur = create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "(engine heuristics)", __LINE__);
    SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g);
    SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    FINALIZE(heur, "(engine heuristics)");
    if (!ok() || !check(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                                 0, &count, nullptr),
                        "cudnnBackendGetAttribute", "(CUDNN_ATTR_ENGINEHEUR_RESULTS count)", __LINE__))
      return nullptr;
    if (count <= 0) {
      *none = true;
      keep_last_error();
      return nullptr;
    }
    std::vector<cudnnBackendDescriptor_t> configs((size_t)count);
    for (auto &c : configs)
      c = create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "(engine config)", __LINE__);
    if (!ok() || !check(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                                 count, &count, configs.data()),
                        "cudnnBackendGetAttribute", "(CUDNN_ATTR_ENGINEHEUR_RESULTS)", __LINE__))
      return nullptr;
    if (count <= 0) {
      *none = true;
      keep_last_error();
      return nullptr;
    }
    // Try each configuration; remember the first refusal for the message.
    cudnnStatus_t first = CUDNN_STATUS_SUCCESS;
    char first_last[512] = "";
    int first_line = 0;
    for (int64_t i = 0; i < count && (size_t)i < configs.size(); i++) {
      cudnnBackendDescriptor_t p = create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "(execution plan)", __LINE__);
      SET(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
      SET(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &configs[(size_t)i]);
      if (!ok())
        return nullptr;
      cudnnStatus_t st = cudnnBackendFinalize(p);
      if (st == CUDNN_STATUS_SUCCESS) {
        int64_t got = 0;
        check(cudnnBackendGetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got,
                                       workspace),
              "cudnnBackendGetAttribute", "(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)", __LINE__);
        return ok() ? p : nullptr;
      }
      if (first == CUDNN_STATUS_SUCCESS) {
        first = st;
        first_line = __LINE__;
        cudnnGetLastErrorString(first_last, sizeof first_last);
      }
    }
    check(first, "cudnnBackendFinalize", "(execution plan, every heuristic engine)", first_line);
    snprintf(last, sizeof last, "%s", first_last);
    for (char *c = last; *c; c++)
      if (*c == '\n' || *c == '\r')
        *c = ' ';
    return nullptr;
  }

#undef SET
#undef FINALIZE

private:
  std::vector<void *> &owned_;
  int64_t next_virtual_ = kVirtual;
};

struct Shape {
  int64_t b, h, hk, s, d;
  bool causal;
};

// The causal mask as the frontend writes it for cuDNN before 9.21 (top-left
// diagonal, right bound 0: CompositeDiagonalBandMaskNode): row and column
// indices of the scores (GEN_INDEX on axes 2 and 3, int32, computed in fp32
// as the frontend's context defaults), keep = row >= column (CMP_GE,
// boolean), y = keep ? x : -inf (BINARY_SELECT).
static cudnnBackendDescriptor_t causal_mask(Builder &g, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t neg_inf,
                                            const Dims &dim, const Dims &stride) {
  cudnnBackendDescriptor_t row = g.virt(dim, stride, CUDNN_DATA_INT32);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, nullptr, nullptr, row, CUDNN_DATA_FLOAT, 2);
  cudnnBackendDescriptor_t col = g.virt(dim, stride, CUDNN_DATA_INT32);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, nullptr, nullptr, col, CUDNN_DATA_FLOAT, 3);
  cudnnBackendDescriptor_t keep = g.virt(dim, stride, CUDNN_DATA_BOOLEAN);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, row, col, nullptr, keep, CUDNN_DATA_BOOLEAN);
  cudnnBackendDescriptor_t y = g.virt(dim, stride, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, x, neg_inf, keep, y);
  return y;
}

// The forward graph (CompositeSDPANode, CompositeSoftmaxNode):
//   S  = Q K^T               matmul; K enters as K^T [b, h_kv, d, s] by swapping
//                            its last two dimensions and strides (no copy)
//   S  = S * scale           pointwise MUL, by-value fp32 scalar 1/sqrt(d)
//   S  = causal(S)           GEN_INDEX x2, CMP_GE, BINARY_SELECT with -inf
//   M  = max_j S             reduction MAX      [b, h, s, 1]
//   E  = exp(S - M)          pointwise SUB, EXP
//   Z  = sum_j E             reduction ADD      [b, h, s, 1]
//   Stats = M + log Z        pointwise LOG, ADD (the non-virtual fp32 output)
//   P  = E / Z               pointwise DIV, typed bf16 (the frontend: "bmm2
//                            aType as i/o type")
//   O  = P V                 matmul, bf16 output
// Intermediates are virtual fp32 (the frontend's intermediate type) unless said.
static cudnnBackendDescriptor_t build_forward(Builder &g, cudnnHandle_t handle, const Shape &a) {
  const int64_t b = a.b, h = a.h, hk = a.hk, s = a.s, d = a.d;
  const Dims q_dim{{b, h, s, d}}, q_str{{h * s * d, s * d, d, 1}};
  const Dims kt_dim{{b, hk, d, s}}, kt_str{{hk * s * d, s * d, 1, d}};
  const Dims kv_dim{{b, hk, s, d}}, kv_str{{hk * s * d, s * d, d, 1}};
  const Dims ss_dim{{b, h, s, s}}, ss_str{{h * s * s, s * s, s, 1}};
  const Dims row_dim{{b, h, s, 1}}, row_str{{h * s, s, 1, 1}};
  const Dims unit{{1, 1, 1, 1}};
  cudnnBackendDescriptor_t Q = g.tensor(kQ, q_dim, q_str, CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t KT = g.tensor(kK, kt_dim, kt_str, CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t V = g.tensor(kV, kv_dim, kv_str, CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t O = g.tensor(kO, q_dim, q_str, CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t Stats = g.tensor(kStats, row_dim, row_str, CUDNN_DATA_FLOAT, false);
  cudnnBackendDescriptor_t Scale = g.tensor(kScale, unit, unit, CUDNN_DATA_FLOAT, false, true);

  cudnnBackendDescriptor_t S = g.virt(ss_dim, ss_str, CUDNN_DATA_FLOAT);
  g.matmul(Q, KT, S);
  cudnnBackendDescriptor_t scaled = g.virt(ss_dim, ss_str, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_MUL, S, Scale, nullptr, scaled);
  cudnnBackendDescriptor_t masked = scaled;
  if (a.causal) {
    cudnnBackendDescriptor_t NegInf = g.tensor(kNegInf, unit, unit, CUDNN_DATA_FLOAT, false, true);
    masked = causal_mask(g, scaled, NegInf, ss_dim, ss_str);
  }
  cudnnBackendDescriptor_t M = g.virt(row_dim, row_str, CUDNN_DATA_FLOAT);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, masked, M);
  cudnnBackendDescriptor_t shifted = g.virt(ss_dim, ss_str, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_SUB, masked, M, nullptr, shifted);
  cudnnBackendDescriptor_t E = g.virt(ss_dim, ss_str, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, nullptr, E);
  cudnnBackendDescriptor_t Z = g.virt(row_dim, row_str, CUDNN_DATA_FLOAT);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, E, Z);
  cudnnBackendDescriptor_t logZ = g.virt(row_dim, row_str, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_LOG, Z, nullptr, nullptr, logZ);
  g.pointwise(CUDNN_POINTWISE_ADD, M, logZ, nullptr, Stats);
  cudnnBackendDescriptor_t P = g.virt(ss_dim, ss_str, CUDNN_DATA_BFLOAT16);
  g.pointwise(CUDNN_POINTWISE_DIV, E, Z, nullptr, P);
  g.matmul(P, V, O);
  return g.graph(handle);
}

// The backward graph (CompositeSDPABackwardNode, no dropout, no bias, cuDNN
// 9: its dQ goes through an fp32 accumulator, "use_dp_workspace" off):
//   T  = dO * O              pointwise MUL [b, h, s, d] (the frontend's virtual
//                            strides, {h s d, s d, h d, 1}, kept as it writes them)
//   Dr = sum_d T             reduction ADD [b, h, s, 1]
//   D  = Dr * 1              pointwise MUL by a by-value 1 (the frontend's
//                            dropout-scale slot): "softmax_sum", non-virtual
//                            fp32 in the workspace
//   S  = Q K^T * scale       matmul, MUL (K^T and V^T as views, as the forward's K^T)
//   S  = S - Stats           pointwise SUB
//   S  = causal(S)           as the forward
//   P  = exp(S)              pointwise EXP
//   P^T = reshape(P)         [b, h, s_kv, s_q] view, bf16
//   dV = P^T dO              matmul (grouped-query: into a virtual bf16
//                            [b, h, s, d], then reduction ADD over each group
//                            of h / h_kv query heads into dV)
//   dP = dO V^T              matmul
//   dS = (dP - D) * P * scale  pointwise SUB, MUL, MUL
//   dS^T = reshape(dS)       view, bf16
//   dK = dS^T Q              matmul (grouped-query: as dV)
//   K  = reshape(K^T)        the [b, h_kv, s, d] view, fp32-typed virtual (the
//                            frontend leaves its type to the context)
//   dQacc = dS K             matmul into the non-virtual fp32 accumulator
//                            (workspace)
//   dQ = identity(dQacc)     pointwise IDENTITY, bf16 output
static cudnnBackendDescriptor_t build_backward(Builder &g, cudnnHandle_t handle, const Shape &a) {
  const int64_t b = a.b, h = a.h, hk = a.hk, s = a.s, d = a.d;
  const Dims q_dim{{b, h, s, d}}, q_str{{h * s * d, s * d, d, 1}};
  const Dims kt_dim{{b, hk, d, s}}, kt_str{{hk * s * d, s * d, 1, d}};
  const Dims kv_dim{{b, hk, s, d}}, kv_str{{hk * s * d, s * d, d, 1}};
  const Dims ss_dim{{b, h, s, s}}, ss_str{{h * s * s, s * s, s, 1}};
  const Dims sst_str{{h * s * s, s * s, 1, s}};
  const Dims row_dim{{b, h, s, 1}}, row_str{{h * s, s, 1, 1}};
  const Dims dot_str{{h * s * d, s * d, h * d, 1}};
  const Dims unit{{1, 1, 1, 1}};
  cudnnBackendDescriptor_t Q = g.tensor(kQ, q_dim, q_str, CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t KT = g.tensor(kK, kt_dim, kt_str, CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t VT = g.tensor(kV, kt_dim, kt_str, CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t O = g.tensor(kO, q_dim, q_str, CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t dO = g.tensor(kdO, q_dim, q_str, CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t Stats = g.tensor(kStats, row_dim, row_str, CUDNN_DATA_FLOAT, false);
  cudnnBackendDescriptor_t Scale = g.tensor(kScale, unit, unit, CUDNN_DATA_FLOAT, false, true);
  cudnnBackendDescriptor_t One = g.tensor(kOne, unit, unit, CUDNN_DATA_FLOAT, false, true);
  cudnnBackendDescriptor_t SoftmaxSum = g.tensor(kSoftmaxSum, row_dim, row_str, CUDNN_DATA_FLOAT, false);
  cudnnBackendDescriptor_t dQAccum = g.tensor(kdQAccum, q_dim, q_str, CUDNN_DATA_FLOAT, false);
  cudnnBackendDescriptor_t dQ = g.tensor(kdQ, q_dim, q_str, CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t dK = g.tensor(kdK, kv_dim, kv_str, CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t dV = g.tensor(kdV, kv_dim, kv_str, CUDNN_DATA_BFLOAT16, false);

  // D = rowsum(dO o O)
  cudnnBackendDescriptor_t dot = g.virt(q_dim, dot_str, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_MUL, dO, O, nullptr, dot);
  cudnnBackendDescriptor_t rowsum = g.virt(row_dim, row_str, CUDNN_DATA_FLOAT);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, dot, rowsum);
  g.pointwise(CUDNN_POINTWISE_MUL, rowsum, One, nullptr, SoftmaxSum);

  // P, recomputed from the statistics
  cudnnBackendDescriptor_t S = g.virt(ss_dim, ss_str, CUDNN_DATA_FLOAT);
  g.matmul(Q, KT, S);
  cudnnBackendDescriptor_t scaled = g.virt(ss_dim, ss_str, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_MUL, S, Scale, nullptr, scaled);
  cudnnBackendDescriptor_t shifted = g.virt(ss_dim, ss_str, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_SUB, scaled, Stats, nullptr, shifted);
  cudnnBackendDescriptor_t masked = shifted;
  if (a.causal) {
    cudnnBackendDescriptor_t NegInf = g.tensor(kNegInf, unit, unit, CUDNN_DATA_FLOAT, false, true);
    masked = causal_mask(g, shifted, NegInf, ss_dim, ss_str);
  }
  cudnnBackendDescriptor_t P = g.virt(ss_dim, ss_str, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_EXP, masked, nullptr, nullptr, P);

  // dV = P^T dO
  cudnnBackendDescriptor_t PT = g.virt(ss_dim, sst_str, CUDNN_DATA_BFLOAT16);
  g.reshape(P, PT);
  if (h == hk) {
    g.matmul(PT, dO, dV);
  } else {
    cudnnBackendDescriptor_t dVfull = g.virt(q_dim, q_str, CUDNN_DATA_BFLOAT16);
    g.matmul(PT, dO, dVfull);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, dVfull, dV);
  }

  // dS = P (dO V^T - D) scale
  cudnnBackendDescriptor_t dP = g.virt(ss_dim, ss_str, CUDNN_DATA_FLOAT);
  g.matmul(dO, VT, dP);
  cudnnBackendDescriptor_t centred = g.virt(ss_dim, ss_str, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_SUB, dP, SoftmaxSum, nullptr, centred);
  cudnnBackendDescriptor_t weighted = g.virt(ss_dim, ss_str, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_MUL, centred, P, nullptr, weighted);
  cudnnBackendDescriptor_t dS = g.virt(ss_dim, ss_str, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_MUL, weighted, Scale, nullptr, dS);

  // dK = dS^T Q
  cudnnBackendDescriptor_t dST = g.virt(ss_dim, sst_str, CUDNN_DATA_BFLOAT16);
  g.reshape(dS, dST);
  if (h == hk) {
    g.matmul(dST, Q, dK);
  } else {
    cudnnBackendDescriptor_t dKfull = g.virt(q_dim, q_str, CUDNN_DATA_BFLOAT16);
    g.matmul(dST, Q, dKfull);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, dKfull, dK);
  }

  // dQ = dS K, through the fp32 accumulator
  cudnnBackendDescriptor_t K = g.virt(kv_dim, kv_str, CUDNN_DATA_FLOAT);
  g.reshape(KT, K);
  g.matmul(dS, K, dQAccum);
  g.pointwise(CUDNN_POINTWISE_IDENTITY, dQAccum, nullptr, nullptr, dQ);
  return g.graph(handle);
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

} // namespace

// --- the object ---

int Sdpa::init(cudnnHandle_t handle, cudaStream_t stream, long long batch, long long heads, long long kv_heads,
               long long seq, long long head_dim, bool is_causal, char *err, size_t errlen) {
  int rc = 0, cc_major = 0, cc_minor = 0, dev = 0;
  const size_t version = cudnnGetVersion();
  cudnnBackendDescriptor_t fwd_graph = nullptr, bwd_graph = nullptr;
  int64_t fwd_ws = 0, bwd_ws = 0;
  bool none = false;
  const char *which = "forward";
  Shape shape{batch, heads, kv_heads, seq, head_dim, is_causal};
  Builder g(descriptors_);
  char what[200];

  destroy();
  b = batch, h = heads, h_kv = kv_heads, s = seq, d = head_dim, causal = is_causal;
  handle_ = handle, stream_ = stream;
  snprintf(what, sizeof what, "b=%lld h=%lld h_kv=%lld s=%lld d=%lld %s bf16", b, h, h_kv, s, d,
           causal ? "causal" : "non-causal");
  if (b <= 0 || h <= 0 || h_kv <= 0 || s <= 0 || d <= 0 || h % h_kv != 0)
    return failf(err, errlen, "attention %s: sizes must be positive and h a multiple of h_kv", what);
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_OK(cudaDeviceGetAttribute(&cc_minor, cudaDevAttrComputeCapabilityMinor, dev));
  if (version < 90000) {
    snprintf(err, errlen, "cuDNN %zu.%zu at run time: fused flash attention through the graph API needs cuDNN 9",
             version / 10000, version / 100 % 100);
    return CALIB_GPU_UNSUPPORTED;
  }
  // The support surface (frontend node/sdpa_support_surface.h; cuDNN's
  // Attention support matrix, docs.nvidia.com/deeplearning/cudnn/frontend/
  // latest/operations/Attention.html): SM80 or newer, head dimension a
  // multiple of 8 and at most 256 (Hopper; 128 for the backward on Ampere,
  // which cuDNN itself refuses below).
  if (cc_major < 8 || d % 8 != 0 || d > 256) {
    snprintf(err, errlen, "cuDNN has no fused flash attention for %s on sm_%d%d (needs sm_80+, d %% 8 == 0, d <= 256)",
             what, cc_major, cc_minor);
    return CALIB_GPU_UNSUPPORTED;
  }

  scale_ = (float)(1.0 / sqrt((double)d));
  // The masked scores' fill: -inf from cuDNN 9.10, the lowest float before
  // (utils/attn_score_modifiers.h: get_negative_inf_value).
  neg_inf_ = version < 91000 ? -FLT_MAX : -INFINITY;
  one_ = 1.0f;
  // Before cuDNN 9.6 the frontend zeroes dQ's fp32 accumulator before each
  // backward; from 9.6 cuDNN does (CompositeSDPABackwardNode::
  // collect_tensors_in_workspace_node).
  zero_dq_accum_ = version < 90600;

  fwd_graph = build_forward(g, handle, shape);
  if (fwd_graph)
    fwd_plan_ = g.plan(handle, fwd_graph, &fwd_ws, &none);
  if (fwd_plan_ && !none) {
    which = "backward";
    bwd_graph = build_backward(g, handle, shape);
    if (bwd_graph)
      bwd_plan_ = g.plan(handle, bwd_graph, &bwd_ws, &none);
  }
  if (none) {
    rc = CALIB_GPU_UNSUPPORTED;
    snprintf(err, errlen, "cuDNN %zu.%zu.%zu has no engine for the fused flash attention %s of %s on sm_%d%d "
                          "(heuristics mode A returned none%s%s)",
             version / 10000, version / 100 % 100, version % 100, which, what, cc_major, cc_minor,
             g.last[0] ? ": " : "", g.last);
    goto done;
  }
  if (!g.ok()) {
    // A refusal (any NOT_SUPPORTED status) anywhere in building, planning or
    // finalizing means no engine for this GPU and shape; anything else is an
    // error in the call.
    const bool refused = CUDNN_STATUS_CATEGORY(g.status) == CUDNN_STATUS_NOT_SUPPORTED;
    rc = refused ? CALIB_GPU_UNSUPPORTED : 1;
    snprintf(err, errlen, "%s fused flash attention %s of %s on sm_%d%d (cuDNN %zu.%zu.%zu): %s:%d: %s failed: %s%s%s",
             refused ? "cuDNN has no engine for the" : "building cuDNN's", which, what, cc_major, cc_minor,
             version / 10000, version / 100 % 100, version % 100, __FILE__, g.line, g.call,
             cudnnGetErrorString(g.status), g.last[0] ? ": " : "", g.last);
    goto done;
  }

  // One workspace: the backward's fp32 dQ accumulator and D ("softmax_sum"),
  // then cuDNN's own workspace after them, as the frontend lays out its
  // workspace (its tensors first, the engine's at fe_workspace_size); the
  // forward uses the same memory from the start.
  dq_accum_bytes_ = (size_t)(b * h * s * d) * sizeof(float);
  dq_accum_offset_ = 0;
  softmax_sum_offset_ = round_up(dq_accum_offset_ + dq_accum_bytes_, 256);
  bwd_plan_offset_ = round_up(softmax_sum_offset_ + (size_t)(b * h * s) * sizeof(float), 256);
  workspace_bytes = std::max<size_t>(round_up(bwd_plan_offset_ + (size_t)bwd_ws, 256), round_up((size_t)fwd_ws, 256));
  CUDA_OK(cudaMalloc(&workspace_, workspace_bytes));
done:
  if (rc)
    destroy();
  return rc;
}

void Sdpa::destroy() {
  for (auto it = descriptors_.rbegin(); it != descriptors_.rend(); ++it)
    cudnnBackendDestroyDescriptor(*it);
  descriptors_.clear();
  fwd_plan_ = bwd_plan_ = nullptr;
  if (workspace_)
    cudaFree(workspace_);
  workspace_ = nullptr;
  workspace_bytes = 0;
}

// One execution of plan with the tensors (uids[i] bound to ptrs[i]) and the
// workspace, on the object's stream; the variant pack is made and released
// around it (as the frontend does on each execute).
static int execute(cudnnHandle_t handle, cudaStream_t stream, void *plan, const int64_t *uids, void **ptrs, int n,
                   void *workspace, char *err, size_t errlen) {
  int rc = 0;
  cudnnBackendDescriptor_t pack = nullptr;
  if (!plan)
    return failf(err, errlen, "fused flash attention run before Sdpa::init succeeded");
  CUDNN_OK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
  CUDNN_OK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids));
  CUDNN_OK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs));
  CUDNN_OK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
  CUDNN_OK(cudnnBackendFinalize(pack));
  CUDNN_OK(cudnnSetStream(handle, stream));
  CUDNN_OK(cudnnBackendExecute(handle, plan, pack));
done:
  if (pack)
    cudnnBackendDestroyDescriptor(pack);
  return rc;
}

int Sdpa::forward(const bf16 *q, const bf16 *k, const bf16 *v, bf16 *o, float *stats, char *err, size_t errlen) {
  const int64_t uids[] = {kQ, kK, kV, kO, kStats, kScale, kNegInf};
  void *ptrs[] = {(void *)q, (void *)k, (void *)v, (void *)o, (void *)stats, (void *)&scale_, (void *)&neg_inf_};
  return execute(handle_, stream_, fwd_plan_, uids, ptrs, causal ? 7 : 6, workspace_, err, errlen);
}

int Sdpa::backward(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *o, const bf16 *dout, const float *stats,
                   bf16 *dq, bf16 *dk, bf16 *dv, char *err, size_t errlen) {
  int rc = 0;
  char *ws = (char *)workspace_;
  const int64_t uids[] = {kQ, kK, kV, kO, kdO, kStats, kdQ, kdK, kdV, kSoftmaxSum, kdQAccum, kScale, kOne, kNegInf};
  void *ptrs[] = {(void *)q,
                  (void *)k,
                  (void *)v,
                  (void *)o,
                  (void *)dout,
                  (void *)stats,
                  (void *)dq,
                  (void *)dk,
                  (void *)dv,
                  (void *)(ws + softmax_sum_offset_),
                  (void *)(ws + dq_accum_offset_),
                  (void *)&scale_,
                  (void *)&one_,
                  (void *)&neg_inf_};
  if (zero_dq_accum_ && workspace_)
    CUDA_OK(cudaMemsetAsync(ws + dq_accum_offset_, 0, dq_accum_bytes_, stream_));
  rc = execute(handle_, stream_, bwd_plan_, uids, ptrs, causal ? 14 : 13, ws ? ws + bwd_plan_offset_ : nullptr, err,
               errlen);
done:
  return rc;
}

// --- the room ---

namespace {

// Rows [r0, r1) of one head's [s, d] block of a contiguous BHSD tensor with
// `heads` heads, as host floats.
static int fetch_rows(const bf16 *dev, long long heads, long long s, long long d, long long bi, long long head,
                      long long r0, long long r1, std::vector<bf16> &stage, std::vector<float> &out, char *err,
                      size_t errlen) {
  int rc = 0;
  const size_t n = (size_t)((r1 - r0) * d), off = (size_t)(((bi * heads + head) * s + r0) * d);
  stage.resize(n);
  out.resize(n);
  CUDA_OK(cudaMemcpy(stage.data(), dev + off, n * sizeof(bf16), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i++)
    out[i] = to_f(stage[i]);
done:
  return rc;
}

static int fetch_stats(const float *dev, long long heads, long long s, long long bi, long long head, long long r0,
                       long long r1, std::vector<float> &out, char *err, size_t errlen) {
  int rc = 0;
  out.resize((size_t)(r1 - r0));
  CUDA_OK(cudaMemcpy(out.data(), dev + (size_t)((bi * heads + head) * s + r0), out.size() * sizeof(float),
                     cudaMemcpyDeviceToHost));
done:
  return rc;
}

// In double, with four independent partial sums (the check's time is in
// these; one dependent chain of additions would be latency-bound).
static double dot(const float *x, const float *y, long long n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  long long i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += (double)x[i] * (double)y[i];
    s1 += (double)x[i + 1] * (double)y[i + 1];
    s2 += (double)x[i + 2] * (double)y[i + 2];
    s3 += (double)x[i + 3] * (double)y[i + 3];
  }
  for (; i < n; i++)
    s0 += (double)x[i] * (double)y[i];
  return (s0 + s1) + (s2 + s3);
}

// Tolerances.  The GPU multiplies bf16 operands exactly and accumulates in
// fp32; what it rounds to bf16 on the way (unit roundoff u = 2^-8) is
//   - each output element (O, dQ, dK, dV): at most u |ref|;
//   - the second GEMM's left operand, P in O = P V and in dV = P^T dO, dS in
//     dQ = dS K and dK = dS^T Q (the graphs type them bf16): each term t_j of
//     the sum changes by at most u |t_j|, with errors that for this
//     pseudo-random data add like a random walk, of standard deviation at
//     most u sqrt(sum t_j^2) / sqrt(3); 8 u sqrt(sum t_j^2) is 14 of those;
//   - with grouped-query heads, possibly each query head's partial dK or dV
//     before the sum over its group (the graph's bf16 "full-head" tensors):
//     at most u |partial| each.
// fp32 effects (accumulation over s terms, exp, the fp32 scale) are orders
// smaller than the second term (a random walk of ~sqrt(s) 2^-24-relative
// steps); 1e-5 absolute covers them where a reference is itself ~0 (causal
// row 0's dQ, for one, is exactly 0: dP = D there).  So
//   tol = 2 u |ref| + 8 u sqrt(sum t^2) [+ 2 u sum |partials|] + 1e-5.
// The log-sum-exp is fp32 throughout (scores from exact products, an fp32
// sum of up to s exponentials): 2e-4 (1 + |lse|) is some ten times its
// random-walk error at s = 32768 and still far below what a wrong scale,
// mask or log base would move it.
struct Tol {
  static constexpr double u = 1.0 / 256;
  static double of(double ref, double sumsq, double partials = 0) {
    return 2 * u * fabs(ref) + 8 * u * sqrt(sumsq) + 2 * u * partials + 1e-5;
  }
};

} // namespace

// Checks the outputs of one forward and one backward (see the file comment).
// CPU cost: the 8 query rows are O(s d) each (their kv head's K and V read
// back once per head, 16 MiB at s = 32768, d = 128); the dK/dV rows read
// back Q, dO and O of every query head of their group over the query rows
// that see them and cost O(group rows d), bounded as described below.
// Measured (CPU time, host copies standing in for the device) at s = 32768:
// 0.1 to 0.3 s causal (d = 128 or 256, h = 32..64, h_kv = 1..32), 0.25 s
// non-causal at h = 32..64, h_kv = 8, 0.8 s non-causal at h = 64, h_kv = 1;
// plus up to ~0.3 GB of device-to-host copies.
static int check_outputs(const Shape &a, double scale, const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *o,
                         const bf16 *dout, const float *stats, const bf16 *dq, const bf16 *dk, const bf16 *dv,
                         char *err, size_t errlen) {
  int rc = 0;
  const long long B = a.b, H = a.h, HK = a.hk, S = a.s, D = a.d, group = a.h / a.hk;
  std::vector<bf16> stage;
  std::vector<float> K, V, qi, oi, doi, dqi, lse1, Qh, dOh, Oh, Lh, kj, vj, gpu;
  std::vector<double> sc, ref, sumsq, ref2, sumsq2, part, part2, pabs, pabs2;
  long long loaded_b = -1, loaded_g = -1, lo = 0, js[3] = {0, 0, 0};
  int nkeys = 3;
  const long long bk = B - 1, gk = HK - 1; // the kv head whose dK, dV rows are checked
  char shape[200];
  snprintf(shape, sizeof shape, "attention b=%lld h=%lld h_kv=%lld s=%lld d=%lld%s", B, H, HK, S, D,
           a.causal ? " causal" : "");
  ref.resize((size_t)D), sumsq.resize((size_t)D), ref2.resize((size_t)D), sumsq2.resize((size_t)D);

  // Query rows: O, the log-sum-exp, dQ.
  for (unsigned r = 0; r < 8; r++) {
    long long bi, hq, i;
    switch (r) {
    case 0: bi = 0, hq = 0, i = 0; break;
    case 1: bi = B - 1, hq = H - 1, i = S - 1; break;
    case 2: bi = 0, hq = H - 1, i = S - 1; break;
    case 3: bi = B - 1, hq = 0, i = S / 2; break;
    default:
      bi = (long long)(mix(7000 + r) % (uint64_t)B), hq = (long long)(mix(8000 + r) % (uint64_t)H),
      i = (long long)(mix(9000 + r) % (uint64_t)S);
    }
    const long long g = hq / group, n = a.causal ? i + 1 : S;
    if (bi != loaded_b || g != loaded_g) {
      CHECK_RC(fetch_rows(k, HK, S, D, bi, g, 0, S, stage, K, err, errlen));
      CHECK_RC(fetch_rows(v, HK, S, D, bi, g, 0, S, stage, V, err, errlen));
      loaded_b = bi, loaded_g = g;
    }
    CHECK_RC(fetch_rows(q, H, S, D, bi, hq, i, i + 1, stage, qi, err, errlen));
    CHECK_RC(fetch_rows(o, H, S, D, bi, hq, i, i + 1, stage, oi, err, errlen));
    CHECK_RC(fetch_rows(dout, H, S, D, bi, hq, i, i + 1, stage, doi, err, errlen));
    CHECK_RC(fetch_rows(dq, H, S, D, bi, hq, i, i + 1, stage, dqi, err, errlen));
    CHECK_RC(fetch_stats(stats, H, S, bi, hq, i, i + 1, lse1, err, errlen));

    // The forward, in double: scores, log-sum-exp, O.
    sc.resize((size_t)n);
    double m = -INFINITY, z = 0;
    for (long long j = 0; j < n; j++) {
      sc[(size_t)j] = scale * dot(qi.data(), &K[(size_t)(j * D)], D);
      m = std::max(m, sc[(size_t)j]);
    }
    for (long long j = 0; j < n; j++)
      z += exp(sc[(size_t)j] - m);
    const double lse = m + log(z), lse_tol = 2e-4 * (1 + fabs(lse));
    if (!(fabs(lse1[0] - lse) <= lse_tol)) {
      rc = failf(err, errlen, "%s: stats (log-sum-exp) [%lld,%lld,%lld] is %.7g on the GPU, %.7g on the CPU "
                              "(tolerance %.2g)",
                 shape, bi, hq, i, (double)lse1[0], lse, lse_tol);
      goto done;
    }
    std::fill(ref.begin(), ref.end(), 0.0), std::fill(sumsq.begin(), sumsq.end(), 0.0);
    for (long long j = 0; j < n; j++) {
      const double p = exp(sc[(size_t)j] - lse);
      const float *vr = &V[(size_t)(j * D)];
      for (long long c = 0; c < D; c++) {
        const double t = p * vr[c];
        ref[(size_t)c] += t, sumsq[(size_t)c] += t * t;
      }
    }
    for (long long c = 0; c < D; c++) {
      const double tol = Tol::of(ref[(size_t)c], sumsq[(size_t)c]);
      if (!(fabs(oi[(size_t)c] - ref[(size_t)c]) <= tol)) {
        rc = failf(err, errlen, "%s: O[%lld,%lld,%lld,%lld] is %.6g on the GPU, %.6g on the CPU (tolerance %.2g)",
                   shape, bi, hq, i, c, (double)oi[(size_t)c], ref[(size_t)c], tol);
        goto done;
      }
    }

    // dQ_i = scale sum_j P_ij (dO_i . v_j - D_i) k_j, with P from the GPU's
    // (just checked) statistics and D_i = dO_i . O_i from its output.
    const double Di = dot(doi.data(), oi.data(), D);
    std::fill(ref.begin(), ref.end(), 0.0), std::fill(sumsq.begin(), sumsq.end(), 0.0);
    for (long long j = 0; j < n; j++) {
      const double p = exp(sc[(size_t)j] - (double)lse1[0]);
      const double ds = p * (dot(doi.data(), &V[(size_t)(j * D)], D) - Di) * scale;
      const float *kr = &K[(size_t)(j * D)];
      for (long long c = 0; c < D; c++) {
        const double t = ds * kr[c];
        ref[(size_t)c] += t, sumsq[(size_t)c] += t * t;
      }
    }
    for (long long c = 0; c < D; c++) {
      const double tol = Tol::of(ref[(size_t)c], sumsq[(size_t)c]);
      if (!(fabs(dqi[(size_t)c] - ref[(size_t)c]) <= tol)) {
        rc = failf(err, errlen, "%s: dQ[%lld,%lld,%lld,%lld] is %.6g on the GPU, %.6g on the CPU (tolerance %.2g)",
                   shape, bi, hq, i, c, (double)dqi[(size_t)c], ref[(size_t)c], tol);
        goto done;
      }
    }
  }

  // Key rows of kv head (bk, gk): dK_j and dV_j sum over every query head of
  // the group and every query row i that sees key j (i >= j when causal).
  // The work is group x (query rows read) x d per key row, kept near 2^24:
  // causal, only the last `rows` query rows are read and the key rows taken
  // among them (the first of them sees all of them); non-causal, every key
  // row sees all s query rows, and past the budget one key row is checked
  // instead of three.
  {
    const long long budget = 1ll << 24, rows = std::max<long long>(1, budget / (group * D));
    if (a.causal && rows < S)
      lo = S - rows;
    if (!a.causal && group * S * D > budget)
      nkeys = 1;
    js[0] = lo, js[1] = S - 1, js[2] = lo + (long long)(mix(9100) % (uint64_t)(S - lo));
  }
  kj.resize((size_t)(3 * D)), vj.resize((size_t)(3 * D));
  for (int t = 0; t < nkeys; t++) {
    std::vector<float> row;
    CHECK_RC(fetch_rows(k, HK, S, D, bk, gk, js[t], js[t] + 1, stage, row, err, errlen));
    std::copy(row.begin(), row.end(), kj.begin() + t * D);
    CHECK_RC(fetch_rows(v, HK, S, D, bk, gk, js[t], js[t] + 1, stage, row, err, errlen));
    std::copy(row.begin(), row.end(), vj.begin() + t * D);
  }
  // ref/sumsq/pabs: dK; ref2/sumsq2/pabs2: dV; part, part2: one head's partials.
  ref.assign((size_t)(3 * D), 0.0), sumsq.assign((size_t)(3 * D), 0.0), pabs.assign((size_t)(3 * D), 0.0);
  ref2.assign((size_t)(3 * D), 0.0), sumsq2.assign((size_t)(3 * D), 0.0), pabs2.assign((size_t)(3 * D), 0.0);
  for (long long hq = gk * group; hq < (gk + 1) * group; hq++) {
    CHECK_RC(fetch_rows(q, H, S, D, bk, hq, lo, S, stage, Qh, err, errlen));
    CHECK_RC(fetch_rows(dout, H, S, D, bk, hq, lo, S, stage, dOh, err, errlen));
    CHECK_RC(fetch_rows(o, H, S, D, bk, hq, lo, S, stage, Oh, err, errlen));
    CHECK_RC(fetch_stats(stats, H, S, bk, hq, lo, S, Lh, err, errlen));
    part.assign((size_t)(3 * D), 0.0), part2.assign((size_t)(3 * D), 0.0);
    for (long long i = lo; i < S; i++) {
      const float *qr = &Qh[(size_t)((i - lo) * D)], *dor = &dOh[(size_t)((i - lo) * D)];
      const double Di = dot(dor, &Oh[(size_t)((i - lo) * D)], D);
      for (int t = 0; t < nkeys; t++) {
        if (a.causal && i < js[t])
          continue;
        const double p = exp(scale * dot(qr, &kj[(size_t)(t * D)], D) - (double)Lh[(size_t)(i - lo)]);
        const double ds = p * (dot(dor, &vj[(size_t)(t * D)], D) - Di) * scale;
        for (long long c = 0; c < D; c++) {
          const size_t e = (size_t)(t * D + c);
          const double tk = ds * qr[c], tv = p * dor[c];
          part[e] += tk, sumsq[e] += tk * tk;
          part2[e] += tv, sumsq2[e] += tv * tv;
        }
      }
    }
    for (size_t e = 0; e < part.size(); e++) {
      ref[e] += part[e], pabs[e] += fabs(part[e]);
      ref2[e] += part2[e], pabs2[e] += fabs(part2[e]);
    }
  }
  for (int t = 0; t < nkeys; t++) {
    for (int which = 0; which < 2; which++) {
      const std::vector<double> &rf = which ? ref2 : ref, &sq = which ? sumsq2 : sumsq, &pa = which ? pabs2 : pabs;
      CHECK_RC(fetch_rows(which ? dv : dk, HK, S, D, bk, gk, js[t], js[t] + 1, stage, gpu, err, errlen));
      for (long long c = 0; c < D; c++) {
        const size_t e = (size_t)(t * D + c);
        const double tol = Tol::of(rf[e], sq[e], group > 1 ? pa[e] : 0);
        if (!(fabs(gpu[(size_t)c] - rf[e]) <= tol)) {
          rc = failf(err, errlen, "%s: %s[%lld,%lld,%lld,%lld] is %.6g on the GPU, %.6g on the CPU (tolerance %.2g)",
                     shape, which ? "dV" : "dK", bk, gk, js[t], c, (double)gpu[(size_t)c], rf[e], tol);
          goto done;
        }
      }
    }
  }
done:
  return rc;
}

extern "C" int calib_gpu_attention(int device, unsigned long long batch, unsigned long long heads,
                                   unsigned long long kv_heads, unsigned long long seq, unsigned long long head_dim,
                                   int causal, CalibGpuTiming *fwd, CalibGpuTiming *bwd, char *err, size_t errlen) {
  int rc = 0;
  cudaStream_t stream = nullptr;
  cudnnHandle_t handle = nullptr;
  Sdpa sdpa;
  bf16 *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *dout = nullptr, *dq = nullptr, *dk = nullptr,
       *dv = nullptr;
  float *stats = nullptr;
  const size_t nq = (size_t)(batch * heads * seq * head_dim), nkv = (size_t)(batch * kv_heads * seq * head_dim),
               nst = (size_t)(batch * heads * seq);
  const Shape shape{(int64_t)batch, (int64_t)heads, (int64_t)kv_heads, (int64_t)seq, (int64_t)head_dim, causal != 0};
  auto run_fwd = [&]() -> int { return sdpa.forward(q, k, v, o, stats, err, errlen); };
  auto run_bwd = [&]() -> int { return sdpa.backward(q, k, v, o, dout, stats, dq, dk, dv, err, errlen); };

  if (!batch || !heads || !kv_heads || !seq || !head_dim || heads % kv_heads)
    return failf(err, errlen, "attention b=%llu h=%llu h_kv=%llu s=%llu d=%llu: sizes must be positive and h a "
                              "multiple of h_kv",
                 batch, heads, kv_heads, seq, head_dim);
  if (batch > (1ull << 31) || heads > (1ull << 31) || seq > (1ull << 31) || head_dim > (1ull << 31) ||
      (double)batch * heads * seq * head_dim > 9e18)
    return failf(err, errlen, "attention b=%llu h=%llu s=%llu d=%llu: too large", batch, heads, seq, head_dim);
  CUDA_OK(cudaSetDevice(device));
  CUDA_OK(cudaStreamCreate(&stream));
  {
    // cuDNN that cannot run here at all (a driver too old for it, a missing
    // sub-library: its NOT_SUPPORTED statuses) means no attention to measure.
    const cudnnStatus_t st = cudnnCreate(&handle);
    if (st != CUDNN_STATUS_SUCCESS && CUDNN_STATUS_CATEGORY(st) == CUDNN_STATUS_NOT_SUPPORTED) {
      cudnn_fail(err, errlen, __FILE__, __LINE__, "cudnnCreate", st);
      rc = CALIB_GPU_UNSUPPORTED;
      goto done;
    }
    CUDNN_OK(st);
  }
  CHECK_RC(sdpa.init(handle, stream, (long long)batch, (long long)heads, (long long)kv_heads, (long long)seq,
                     (long long)head_dim, causal != 0, err, errlen));
  CUDA_OK(cudaMalloc(&q, nq * sizeof(bf16)));
  CUDA_OK(cudaMalloc(&o, nq * sizeof(bf16)));
  CUDA_OK(cudaMalloc(&dout, nq * sizeof(bf16)));
  CUDA_OK(cudaMalloc(&dq, nq * sizeof(bf16)));
  CUDA_OK(cudaMalloc(&k, nkv * sizeof(bf16)));
  CUDA_OK(cudaMalloc(&v, nkv * sizeof(bf16)));
  CUDA_OK(cudaMalloc(&dk, nkv * sizeof(bf16)));
  CUDA_OK(cudaMalloc(&dv, nkv * sizeof(bf16)));
  CUDA_OK(cudaMalloc(&stats, nst * sizeof(float)));
  // Q twice as wide as K, V and dO (uniform in [-2, 2) against [-1, 1)):
  // scores of standard deviation 2/3 at any d, a softmax that is not flat,
  // so that a wrong scale or mask moves O well past the tolerances.
  fill_kernel<bf16><<<grid_for(nq), 256, 0, stream>>>(q, nq, 41, 2.0f);
  CUDA_OK(cudaGetLastError());
  fill_kernel<bf16><<<grid_for(nkv), 256, 0, stream>>>(k, nkv, 42, 1.0f);
  CUDA_OK(cudaGetLastError());
  fill_kernel<bf16><<<grid_for(nkv), 256, 0, stream>>>(v, nkv, 43, 1.0f);
  CUDA_OK(cudaGetLastError());
  fill_kernel<bf16><<<grid_for(nq), 256, 0, stream>>>(dout, nq, 44, 1.0f);
  CUDA_OK(cudaGetLastError());
  CHECK_RC(run_fwd());
  CHECK_RC(run_bwd());
  CUDA_OK(cudaStreamSynchronize(stream));
  CHECK_RC(check_outputs(shape, (double)sdpa.scale_, q, k, v, o, dout, stats, dq, dk, dv, err, errlen));
  CHECK_RC(time_op(stream, fwd, run_fwd, err, errlen));
  CHECK_RC(time_op(stream, bwd, run_bwd, err, errlen));
done:
  cudaFree(q);
  cudaFree(k);
  cudaFree(v);
  cudaFree(o);
  cudaFree(dout);
  cudaFree(dq);
  cudaFree(dk);
  cudaFree(dv);
  cudaFree(stats);
  sdpa.destroy();
  if (handle)
    cudnnDestroy(handle);
  if (stream)
    cudaStreamDestroy(stream);
  return rc;
}

#endif // PTDSIM_NO_CUDNN
