// The hot f32 CPU kernels, compiled once per instruction-set level.
//
// kernels/cpu/isa/kernels_impl.h is compiled three times (kernels_baseline.cc,
// kernels_avx2.cc with -mavx2 -mfma, kernels_avx512.cc with -mavx512f/dq/bw/vl),
// each into its own namespace and with its own renamed copy of Eigen, so no
// inline function built for a wider ISA can be picked by the linker for
// baseline code. cpu_kernels() is the table for core/cpu_isa.h's selected level;
// the op files (kernels/cpu/*_cpu.cc) call it for f32 and keep their plain
// reference loops for f64, f16 and bf16.
//
// All matrices are row-major with an explicit leading dimension (elements
// between the starts of two rows), so strided views such as one head's
// columns of a [B, S, 3 * H * Dh] qkv tensor are used in place, never copied.
// Kernels parallelise over the pool of core/thread_pool.h in blocks whose
// bounds depend only on the shape: results are bit-identical for any thread
// count (they may differ in the last bits between ISA levels: FMA contraction
// and vector reduction order).
#pragma once

#include <cstdint>

#include "core/cpu_isa.h"
#include "kernels/gelu_formula.h"

namespace tandem::kernels {

struct CpuKernels {
  CpuIsa isa;

  // C = alpha * op(A) op(B) + beta * C; op(A) is m x k, op(B) is k x n.
  // trans_a: A is stored k x m (lda >= m); trans_b: B is stored n x k (ldb >= k).
  // beta = 0 never reads C. Threaded over blocks of C's rows.
  void (*gemm)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

  // out[j] = sum over rows i of x[i, j], rows summed in order (bias gradients). x is [rows, cols], dense.
  void (*column_sum)(const float* x, int64_t rows, int64_t cols, float* out);

  // y = layer_norm(x) * w + b per row of [rows, dim]; mean and rstd per row (may be null).
  void (*layer_norm_forward)(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
                             int64_t rows, int64_t dim, float eps);
  // dx (may be null) per row; dw, db (may be null) as column sums in row order.
  void (*layer_norm_backward)(const float* dy, const float* x, const float* w, const float* mean, const float* rstd,
                              float* dx, float* dw, float* db, int64_t rows, int64_t dim);

  // y = gelu(x + bias) over [rows, dim] (bias may be null).
  void (*bias_gelu_forward)(const float* x, const float* bias, float* y, int64_t rows, int64_t dim,
                            GeluApproximation approx);
  // dx = dy * gelu'(x + bias) (dx may be null); dbias (may be null) = column sums of dx.
  void (*bias_gelu_backward)(const float* dy, const float* x, const float* bias, float* dx, float* dbias, int64_t rows,
                             int64_t dim, GeluApproximation approx);

  // out[w * nblocks + b] = word w of Philox block first_block + b of stream (seed, subsequence), b in
  // [0, nblocks): core/philox.h's philox_block, many blocks at a time, one plane per word (attention dropout).
  void (*philox_blocks)(uint64_t seed, uint64_t subsequence, uint64_t first_block, int64_t nblocks, uint32_t* out);

  // out[j] = scale if 16-bit uniform j of Philox stream (seed, subsequence) counted from block
  // first_block (slot j % 8 of block first_block + j / 8) is >= threshold, else 0; j in [0, n).
  // kernels/dropout_mask.h's rule, many blocks at a time.
  void (*dropout_factors)(uint64_t seed, uint64_t subsequence, uint64_t first_block, int64_t n, uint32_t threshold,
                          float scale, float* out);

  // Row softmax of scores [rows, cols] (leading dimension ld) in place, keys with
  // real[j] == 0 excluded; lse[i] = max + log(sum) (+inf and a zero row when no key is real).
  void (*masked_softmax_rows)(float* scores, int64_t ld, int64_t rows, int64_t cols, const uint8_t* real,
                              float* lse);
  // The same probabilities again from the saved lse: p = exp(score - lse[i]) for
  // real keys, 0 otherwise (and a zero row where lse[i] is +inf).
  void (*softmax_from_lse_rows)(float* scores, int64_t ld, int64_t rows, int64_t cols, const uint8_t* real,
                                const float* lse);
  // Softmax backward in place: dp <- p * (dp - sum_j p_ij dp_ij) per row.
  void (*softmax_backward_rows)(const float* p, float* dp, int64_t ld, int64_t rows, int64_t cols);
};

// The table for selected_cpu_isa().
const CpuKernels& cpu_kernels();
// The table for one level, or null when this CPU cannot run it (tests).
const CpuKernels* cpu_kernels_for(CpuIsa isa);

// Defined by the per-ISA translation units.
namespace cpu_baseline { const CpuKernels& kernels(); }
namespace cpu_avx2 { const CpuKernels& kernels(); }
namespace cpu_avx512 { const CpuKernels& kernels(); }

}  // namespace tandem::kernels
