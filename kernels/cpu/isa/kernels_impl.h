// The hot f32 CPU kernels of cpu_kernels.h, written once and compiled once per
// instruction-set level. The including file (kernels_<isa>.cc) first defines
//   TANDEM_ISA_NS    the namespace of this copy (cpu_baseline, cpu_avx2, cpu_avx512)
//   TANDEM_ISA_ENUM  its CpuIsa value
//   Eigen            a renamed namespace (Eigen_avx2, ...) so this copy's Eigen
//                    templates are distinct symbols from every other copy's.
// Nothing here instantiates standard-library templates out of line (no
// containers: scratch memory is malloc'd), for the same reason: an inline
// function compiled with -mavx2 must never be chosen by the linker for code
// that runs on a baseline CPU.
//
// Vectorisation comes from Eigen (GEMM, array expressions with its vectorised
// exp/erf/tanh) and, for Philox, from intrinsics chosen by the level's macros.
#if !defined(TANDEM_ISA_NS) || !defined(TANDEM_ISA_ENUM)
#error "define TANDEM_ISA_NS and TANDEM_ISA_ENUM before including kernels_impl.h"
#endif

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "core/philox.h"
#include "core/thread_pool.h"
#include "kernels/cpu/isa/cpu_kernels.h"

namespace tandem::kernels::TANDEM_ISA_NS {

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using CMat = Eigen::Map<const RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
using MMat = Eigen::Map<RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
using CArr = Eigen::Map<const Eigen::ArrayXf>;
using MArr = Eigen::Map<Eigen::ArrayXf>;

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// Results must not depend on where a buffer happens to start: Eigen peels
// unaligned leading elements of a destination off its vector loop and
// computes them with scalar code (libm's exp instead of its polynomial, other
// FMA contraction), and its reductions start the vector part at the first
// aligned element. So in this file every reduction is fixed_sum (lanes fixed
// by the index), and every expression that is more than exact IEEE adds,
// multiplies or divides is evaluated into an owned, aligned Eigen array and
// then copied out. That makes the bits a function of the shape alone (a
// resumed run repeats an uninterrupted one exactly).

// sum_{j < n} f(j) in a fixed order: 16 lanes (j % 16) added pairwise, then the tail.
template <class F>
inline float fixed_sum(int64_t n, const F& f) {
  float acc[16] = {};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int l = 0; l < 16; ++l) acc[l] += f(j + l);
  float tail = 0.0f;
  for (; j < n; ++j) tail += f(j);
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0] + tail;
}

// Zeroed float scratch memory owned by one call, 64-byte aligned.
class Scratch {
 public:
  explicit Scratch(int64_t n) {
    const size_t bytes = (static_cast<size_t>(max64(n, 1)) * sizeof(float) + 63) / 64 * 64;
    p_ = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (!p_) throw std::bad_alloc();
    std::memset(p_, 0, bytes);
  }
  ~Scratch() { std::free(p_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  float* get() const { return p_; }

 private:
  float* p_;
};

// Rows per task of row-wise kernels: at least ~16 KiB of data, so a task
// outweighs the cost of handing it to another thread.
inline int64_t row_grain(int64_t dim) { return max64(1, 4096 / max64(dim, 1)); }

// Rows per partial sum of a column reduction. Fixed, so the order of the
// additions, and with it the bits, depend only on the shape.
constexpr int64_t kReduceRows = 64;

// ---------------------------------------------------------------- GEMM

// Rows of C per task: about 8 tasks for small m, 128 rows for large m (a
// multiple of 16, every ISA's register-block height). A function of m only.
inline int64_t gemm_block_rows(int64_t m) {
  int64_t b = (m + 7) / 8;
  b = (b + 15) / 16 * 16;
  return b < 32 ? 32 : (b > 128 ? 128 : b);
}

template <bool TA, bool TB>
void gemm_rows(int64_t r0, int64_t rows, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  MMat C(c + r0 * ldc, rows, n, Eigen::OuterStride<>(ldc));
  auto A = [&] {
    if constexpr (TA) return CMat(a + r0, k, rows, Eigen::OuterStride<>(lda)).transpose();
    else return CMat(a + r0 * lda, rows, k, Eigen::OuterStride<>(lda));
  }();
  auto B = [&] {
    if constexpr (TB) return CMat(b, n, k, Eigen::OuterStride<>(ldb)).transpose();
    else return CMat(b, k, n, Eigen::OuterStride<>(ldb));
  }();
  if (beta == 0.0f) {
    C.noalias() = alpha * A * B;
  } else {
    if (beta != 1.0f) C *= beta;
    C.noalias() += alpha * A * B;
  }
}

template <bool TA, bool TB>
void gemm_t(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
            float beta, float* c, int64_t ldc) {
  const int64_t block = gemm_block_rows(m);
  const int64_t blocks = (m + block - 1) / block;
  parallel_for(0, blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t r0 = i * block;
      gemm_rows<TA, TB>(r0, min64(block, m - r0), n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
  });
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // an empty sum: C = beta C
    for (int64_t i = 0; i < m; ++i) {
      MArr row(c + i * ldc, n);
      if (beta == 0.0f) row.setZero();
      else row *= beta;
    }
    return;
  }
  if (trans_a) {
    if (trans_b) gemm_t<true, true>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else gemm_t<true, false>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    if (trans_b) gemm_t<false, true>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else gemm_t<false, false>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

// ---------------------------------------------------------------- column sums

// Floats per block of partial sums: width rounded up to 64 bytes, so every block starts aligned.
inline int64_t partial_stride(int64_t width) { return (width + 15) / 16 * 16; }

// Runs row_fn(r, partial) for every row, where partial is the [width] sum
// buffer of the row's block of kReduceRows rows, in partials ([blocks,
// partial_stride(width)], zeroed), for reduce_blocks to add in order.
template <class RowFn>
void for_rows_with_partials(int64_t rows, int64_t width, float* partials, const RowFn& row_fn) {
  const int64_t blocks = (rows + kReduceRows - 1) / kReduceRows;
  parallel_for(0, blocks, max64(1, row_grain(width) / kReduceRows), [&](int64_t lo, int64_t hi) {
    for (int64_t blk = lo; blk < hi; ++blk) {
      float* partial = partials + blk * partial_stride(width);
      for (int64_t r = blk * kReduceRows; r < min64(rows, (blk + 1) * kReduceRows); ++r) row_fn(r, partial);
    }
  });
}

void reduce_blocks(const float* partials, int64_t blocks, int64_t width, float* out) {
  MArr o(out, width);
  o.setZero();
  for (int64_t blk = 0; blk < blocks; ++blk) o += CArr(partials + blk * partial_stride(width), width);
}

void column_sum(const float* x, int64_t rows, int64_t cols, float* out) {
  const int64_t blocks = (rows + kReduceRows - 1) / kReduceRows;
  Scratch partials(blocks * partial_stride(cols));
  for_rows_with_partials(rows, cols, partials.get(),
                         [&](int64_t r, float* partial) { MArr(partial, cols) += CArr(x + r * cols, cols); });
  reduce_blocks(partials.get(), blocks, cols, out);
}

// ---------------------------------------------------------------- layer norm

void layer_norm_forward(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
                        int64_t rows, int64_t dim, float eps) {
  const CArr W(w, dim), B(b, dim);
  parallel_for(0, rows, row_grain(dim), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float* xr = x + r * dim;
      const float mu = fixed_sum(dim, [&](int64_t j) { return xr[j]; }) / static_cast<float>(dim);
      const float var =
          fixed_sum(dim, [&](int64_t j) { return (xr[j] - mu) * (xr[j] - mu); }) / static_cast<float>(dim);
      const float rs = 1.0f / std::sqrt(var + eps);
      const Eigen::ArrayXf out = (CArr(xr, dim) - mu) * rs * W + B;
      MArr(y + r * dim, dim) = out;
      if (mean) mean[r] = mu;
      if (rstd) rstd[r] = rs;
    }
  });
}

void layer_norm_backward(const float* dy, const float* x, const float* w, const float* mean, const float* rstd,
                         float* dx, float* dw, float* db, int64_t rows, int64_t dim) {
  const CArr W(w, dim);
  const int64_t blocks = (rows + kReduceRows - 1) / kReduceRows;
  // Per block: dw partials in [0, dim), db partials in [dim, 2 dim).
  Scratch partials((dw || db) ? blocks * partial_stride(2 * dim) : 0);
  const float inv_dim = 1.0f / static_cast<float>(dim);
  for_rows_with_partials(rows, 2 * dim, partials.get(), [&](int64_t r, float* partial) {
    const float* gp = dy + r * dim;
    const float* xp = x + r * dim;
    const CArr g(gp, dim);
    const float mu = mean[r], rs = rstd[r];
    const Eigen::ArrayXf xhat = (CArr(xp, dim) - mu) * rs;
    if (dx) {
      const Eigen::ArrayXf gw = g * W;
      const float mg = fixed_sum(dim, [&](int64_t j) { return gw[j]; }) * inv_dim;
      const float mgx = fixed_sum(dim, [&](int64_t j) { return gw[j] * xhat[j]; }) * inv_dim;
      const Eigen::ArrayXf out = rs * (gw - mg - xhat * mgx);
      MArr(dx + r * dim, dim) = out;
    }
    if (dw || db) {
      MArr(partial, dim) += g * xhat;  // partial is 64-byte aligned
      MArr(partial + dim, dim) += g;   // an exact add wherever it starts
    }
  });
  if (dw || db) {
    Scratch sums(2 * dim);
    reduce_blocks(partials.get(), blocks, 2 * dim, sums.get());
    if (dw) std::memcpy(dw, sums.get(), static_cast<size_t>(dim) * sizeof(float));
    if (db) std::memcpy(db, sums.get() + dim, static_cast<size_t>(dim) * sizeof(float));
  }
}

// ---------------------------------------------------------------- GELU

constexpr float kSqrt1_2 = static_cast<float>(gelu_detail::kSqrt1_2);
constexpr float kInvSqrt2Pi = static_cast<float>(gelu_detail::kInvSqrt2Pi);
constexpr float kSqrt2OverPi = static_cast<float>(gelu_detail::kSqrt2OverPi);
constexpr float kCubic = static_cast<float>(gelu_detail::kCubic);

void bias_gelu_forward(const float* x, const float* bias, float* y, int64_t rows, int64_t dim,
                       GeluApproximation approx) {
  parallel_for(0, rows, row_grain(dim), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      Eigen::ArrayXf u = CArr(x + r * dim, dim);
      if (bias) u += CArr(bias, dim);
      Eigen::ArrayXf out(dim);
      if (approx == GeluApproximation::Tanh)
        out = 0.5f * u * (1.0f + (kSqrt2OverPi * (u + kCubic * u * u * u)).tanh());
      else
        out = 0.5f * u * (1.0f + (u * kSqrt1_2).erf());
      MArr(y + r * dim, dim) = out;
    }
  });
}

void bias_gelu_backward(const float* dy, const float* x, const float* bias, float* dx, float* dbias, int64_t rows,
                        int64_t dim, GeluApproximation approx) {
  const int64_t blocks = (rows + kReduceRows - 1) / kReduceRows;
  Scratch partials(dbias ? blocks * partial_stride(dim) : 0);
  for_rows_with_partials(rows, dim, partials.get(), [&](int64_t r, float* partial) {
    Eigen::ArrayXf u = CArr(x + r * dim, dim);
    if (bias) u += CArr(bias, dim);
    const CArr g(dy + r * dim, dim);
    Eigen::ArrayXf du(dim);
    if (approx == GeluApproximation::Tanh) {
      const Eigen::ArrayXf u2 = u * u;
      const Eigen::ArrayXf t = (kSqrt2OverPi * (u + kCubic * u2 * u)).tanh();
      du = g * (0.5f * (1.0f + t) + 0.5f * u * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * u2));
    } else {
      du = g * (0.5f * (1.0f + (u * kSqrt1_2).erf()) + u * kInvSqrt2Pi * (-0.5f * u * u).exp());
    }
    if (dx) MArr(dx + r * dim, dim) = du;
    if (dbias) MArr(partial, dim) += du;
  });
  if (dbias) reduce_blocks(partials.get(), blocks, dim, dbias);
}

// ---------------------------------------------------------------- dropout

// Philox4x32-10 on a vector of 32-bit lanes, one block per lane. Compilers do
// not vectorise the 32 x 32 -> 64-bit multiply's high half, so it is spelt
// with the multiply-even-lanes instruction every level has (pmuludq): even
// lanes directly, odd lanes shifted down, the halves blended back.
#if defined(__AVX512F__)
using VU = __m512i;
constexpr int kLanes = 16;
inline VU v_load(const uint32_t* p) { return _mm512_loadu_si512(p); }
inline void v_store(uint32_t* p, VU v) { _mm512_storeu_si512(p, v); }
inline VU v_set1(uint32_t x) { return _mm512_set1_epi32(static_cast<int>(x)); }
inline VU v_xor(VU a, VU b) { return _mm512_xor_si512(a, b); }
inline void v_mulhilo(VU a, VU m, VU& hi, VU& lo) {
  const VU even = _mm512_mul_epu32(a, m), odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}
#elif defined(__AVX2__)
using VU = __m256i;
constexpr int kLanes = 8;
inline VU v_load(const uint32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline void v_store(uint32_t* p, VU v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
inline VU v_set1(uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); }
inline VU v_xor(VU a, VU b) { return _mm256_xor_si256(a, b); }
inline void v_mulhilo(VU a, VU m, VU& hi, VU& lo) {
  const VU even = _mm256_mul_epu32(a, m), odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}
#elif defined(__SSE2__)
using VU = __m128i;
constexpr int kLanes = 4;
inline VU v_load(const uint32_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline void v_store(uint32_t* p, VU v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }
inline VU v_set1(uint32_t x) { return _mm_set1_epi32(static_cast<int>(x)); }
inline VU v_xor(VU a, VU b) { return _mm_xor_si128(a, b); }
inline void v_mulhilo(VU a, VU m, VU& hi, VU& lo) {
  const VU even = _mm_mul_epu32(a, m), odd = _mm_mul_epu32(_mm_srli_epi64(a, 32), m);
  const VU low_halves = _mm_set1_epi64x(0xFFFFFFFFll);
  lo = _mm_or_si128(_mm_and_si128(even, low_halves), _mm_slli_epi64(odd, 32));
  hi = _mm_or_si128(_mm_srli_epi64(even, 32), _mm_andnot_si128(low_halves, odd));
}
#else  // not x86: one lane, plain C++
using VU = uint32_t;
constexpr int kLanes = 1;
inline VU v_load(const uint32_t* p) { return *p; }
inline void v_store(uint32_t* p, VU v) { *p = v; }
inline VU v_set1(uint32_t x) { return x; }
inline VU v_xor(VU a, VU b) { return a ^ b; }
inline void v_mulhilo(VU a, VU m, VU& hi, VU& lo) { philox_detail::mulhilo(m, a, &hi, &lo); }
#endif

// Blocks first_block + l, l < kLanes, of stream (seed, subsequence): words[w][l] is word w of block l.
void philox_lanes(uint64_t seed, uint64_t subsequence, uint64_t first_block, uint32_t (&words)[4][kLanes]) {
  using namespace philox_detail;
  const VU m0 = v_set1(kM0), m1 = v_set1(kM1);
  alignas(64) uint32_t lo_ctr[kLanes], hi_ctr[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    const uint64_t block = first_block + static_cast<uint64_t>(l);
    lo_ctr[l] = static_cast<uint32_t>(block);
    hi_ctr[l] = static_cast<uint32_t>(block >> 32);
  }
  VU c0 = v_load(lo_ctr), c1 = v_load(hi_ctr);
  VU c2 = v_set1(static_cast<uint32_t>(subsequence)), c3 = v_set1(static_cast<uint32_t>(subsequence >> 32));
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    VU hi0, lo0, hi1, lo1;
    v_mulhilo(c0, m0, hi0, lo0);
    v_mulhilo(c2, m1, hi1, lo1);
    c0 = v_xor(v_xor(hi1, c1), v_set1(k0));
    c1 = lo1;
    c2 = v_xor(v_xor(hi0, c3), v_set1(k1));
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  v_store(words[0], c0);
  v_store(words[1], c1);
  v_store(words[2], c2);
  v_store(words[3], c3);
}

void philox_blocks(uint64_t seed, uint64_t subsequence, uint64_t first_block, int64_t nblocks, uint32_t* out) {
  alignas(64) uint32_t words[4][kLanes];
  for (int64_t b0 = 0; b0 < nblocks; b0 += kLanes) {
    philox_lanes(seed, subsequence, first_block + static_cast<uint64_t>(b0), words);
    const int64_t count = min64(kLanes, nblocks - b0);
    for (int64_t l = 0; l < count; ++l)
      for (int w = 0; w < 4; ++w) out[w * nblocks + b0 + l] = words[w][l];
  }
}

void dropout_factors(uint64_t seed, uint64_t subsequence, uint64_t first_block, int64_t n, uint32_t threshold,
                     float scale, float* out) {
  const int64_t nblocks = (n + 7) / 8;
  alignas(64) uint32_t words[4][kLanes];
  // Slot s of a block is half s % 2 of word s / 2: deciding a plane of kLanes
  // halves at a time vectorises; the element order (slot j % 8 of block j / 8)
  // is then one 8 x kLanes transpose per chunk.
  alignas(64) float plane[8][kLanes];
  for (int64_t b0 = 0; b0 < nblocks; b0 += kLanes) {
    philox_lanes(seed, subsequence, first_block + static_cast<uint64_t>(b0), words);
    for (int w = 0; w < 4; ++w)
      for (int b = 0; b < kLanes; ++b) {
        plane[2 * w][b] = (words[w][b] & 0xffffu) >= threshold ? scale : 0.0f;
        plane[2 * w + 1][b] = (words[w][b] >> 16) >= threshold ? scale : 0.0f;
      }
    const int64_t j0 = b0 * 8, count = min64(8 * kLanes, n - j0);
    if (count == 8 * kLanes) {
      for (int b = 0; b < kLanes; ++b)
        for (int k = 0; k < 8; ++k) out[j0 + 8 * b + k] = plane[k][b];
    } else {
      for (int64_t j = 0; j < count; ++j) out[j0 + j] = plane[j % 8][j / 8];
    }
  }
}

// ---------------------------------------------------------------- softmax

void masked_softmax_rows(float* scores, int64_t ld, int64_t rows, int64_t cols, const uint8_t* real, float* lse) {
  const float inf = std::numeric_limits<float>::infinity();
  Scratch keep(cols);
  bool any = real == nullptr;
  for (int64_t j = 0; j < cols; ++j) {
    keep.get()[j] = (real == nullptr || real[j]) ? 1.0f : 0.0f;
    any = any || real[j];
  }
  const CArr K(keep.get(), cols);
  for (int64_t i = 0; i < rows; ++i) {
    MArr row(scores + i * ld, cols);
    if (!any) {  // every key is padding: no distribution, output 0
      row.setZero();
      lse[i] = inf;
      continue;
    }
    const float m = real ? (K > 0.0f).select(row, -inf).maxCoeff() : row.maxCoeff();  // max: order-free
    Eigen::ArrayXf e(cols);
    if (real) e = (row - m).exp() * K;  // exp of a masked score may be tiny, never used: times 0
    else e = (row - m).exp();
    const float l = fixed_sum(cols, [&](int64_t j) { return e[j]; });
    row = e / l;
    lse[i] = m + std::log(l);
  }
}

void softmax_from_lse_rows(float* scores, int64_t ld, int64_t rows, int64_t cols, const uint8_t* real,
                           const float* lse) {
  const float inf = std::numeric_limits<float>::infinity();
  Scratch keep(cols);
  for (int64_t j = 0; j < cols; ++j) keep.get()[j] = (real == nullptr || real[j]) ? 1.0f : 0.0f;
  const CArr K(keep.get(), cols);
  for (int64_t i = 0; i < rows; ++i) {
    MArr row(scores + i * ld, cols);
    if (lse[i] == inf) {
      row.setZero();
      continue;
    }
    Eigen::ArrayXf e(cols);
    if (real) e = (row - lse[i]).exp() * K;
    else e = (row - lse[i]).exp();
    row = e;
  }
}

void softmax_backward_rows(const float* p, float* dp, int64_t ld, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    const CArr pr(p + i * ld, cols);
    MArr dr(dp + i * ld, cols);
    const float dot = fixed_sum(cols, [&](int64_t j) { return pr[j] * dr[j]; });
    dr = pr * (dr - dot);  // a product of a difference: no contraction, exact wherever it starts
  }
}

}  // namespace

const CpuKernels& kernels() {
  static const CpuKernels table{TANDEM_ISA_ENUM,      &gemm,
                                &column_sum,          &layer_norm_forward,
                                &layer_norm_backward, &bias_gelu_forward,
                                &bias_gelu_backward,  &philox_blocks,
                                &dropout_factors,     &masked_softmax_rows,
                                &softmax_from_lse_rows, &softmax_backward_rows};
  return table;
}

}  // namespace tandem::kernels::TANDEM_ISA_NS
