/* ptdsim — where cuBLAS finds element (i, kk) of op(A) and (kk, j) of op(B)
 * in column-major storage, for C[m x n] = op(A)[m x k] op(B)[k x n]
 * (cuBLAS documentation, "cublas<t>gemm()": A is stored m x k with lda = m
 * when not transposed, k x m with lda = k when transposed; B likewise k x n
 * or n x k).  Shared by the harness's CPU check (gpu.cu) and its unit test,
 * so that the indexing the GPU results are checked with is itself tested.
 * Plain C, no CUDA. */
#pragma once

#include <stddef.h>

static inline size_t calib_gemm_lda(int transa, size_t m, size_t k) {
  return transa ? k : m;
}
static inline size_t calib_gemm_ldb(int transb, size_t k, size_t n) {
  return transb ? n : k;
}
/* Offset of op(A)[i, kk] in A. */
static inline size_t calib_gemm_a_index(int transa, size_t m, size_t k, size_t i, size_t kk) {
  return transa ? kk + i * k : i + kk * m;
}
/* Offset of op(B)[kk, j] in B. */
static inline size_t calib_gemm_b_index(int transb, size_t k, size_t n, size_t kk, size_t j) {
  return transb ? j + kk * n : kk + j * k;
}
