#include "kernels/cpu/attention_cpu.h"

#include <Eigen/Core>
#include <cmath>
#include <limits>
#include <vector>

#include "core/element.h"
#include "core/thread_pool.h"
#include "kernels/cpu/isa/cpu_kernels.h"

namespace tandem::kernels {

namespace {

template <class A>
using Mat = Eigen::Matrix<A, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class A>
using Col = Eigen::Matrix<A, Eigen::Dynamic, 1>;

enum Part : int64_t { kQ = 0, kK = 1, kV = 2 };

// Columns [col0, col0 + Dh) of batch row b of a [B, S, width] tensor, as an S x Dh matrix of acc_t.
template <class T>
Mat<acc_t<T>> gather(const T* base, const AttentionShape& s, int64_t b, int64_t width, int64_t col0) {
  Mat<acc_t<T>> m(s.seq, s.head_dim);
  for (int64_t i = 0; i < s.seq; ++i) {
    const T* row = base + (b * s.seq + i) * width + col0;
    for (int64_t c = 0; c < s.head_dim; ++c) m(i, c) = load(row[c]);
  }
  return m;
}

template <class T, class M>
void scatter(const M& m, T* base, const AttentionShape& s, int64_t b, int64_t width, int64_t col0) {
  for (int64_t i = 0; i < s.seq; ++i) {
    T* row = base + (b * s.seq + i) * width + col0;
    for (int64_t c = 0; c < s.head_dim; ++c) row[c] = store<T>(m(i, c));
  }
}

// The same factors under philox7x16 (kernels/attention_params.h), square by square: its 16
// Philox4x32-7 blocks, then each element's byte. Scalar code: the rule is there to draw a GPU's masks,
// and the CPU's Philox kernels (cpu/isa) compute ten rounds.
template <class A>
void write_dropout_factors_philox7(const AttentionShape& s, const AttentionDropout& d, int64_t bh, A* f) {
  const int64_t S = s.seq;
  const uint32_t threshold = attention_dropout_threshold(d);
  const A kept = attention_dropout_scale<A>(d);
  uint32_t keep16[16];
  for (int64_t i0 = 0; i0 < S; i0 += 16)
    for (int64_t j0 = 0; j0 < S; j0 += 16) {
      const uint64_t first = attention_dropout_block16(attention_dropout_group(bh, i0, j0, S));
      for (int b = 0; b < 16; ++b) keep16[b] = attention_keep16(d, first + static_cast<uint64_t>(b), threshold);
      for (int64_t i = i0; i < std::min(i0 + 16, S); ++i)
        for (int64_t j = j0; j < std::min(j0 + 16, S); ++j) {
          const uint64_t g = attention_dropout_group(bh, i, j, S);
          const int byte = 8 * attention_dropout_half(g) + attention_dropout_slot(i, j);
          f[i * S + j] = (keep16[attention_dropout_block16(g) - first] >> byte) & 1u ? kept : A(0);
        }
    }
}

// f[i * S + j] = keep(i, j) * scale for head bh, S x S row-major (kernels/attention_params.h), with the
// Philox words of each row of 16 x 16 squares from blocks(first_block, nblocks, planes): plane w holds word w
// of the row's consecutive blocks. By the definition, row r of square m reads blocks 32m + 4(r % 8) + q,
// q < 4, word r / 8 for columns 2q, 2q + 1 (low, high half) and word 2 + r / 8 for columns 8 + 2q, 9 + 2q:
// two runs of 4 consecutive words, so the loop over a row is loads, shifts and compares.
template <class A, class Blocks>
void write_dropout_factors(const AttentionShape& s, const AttentionDropout& d, int64_t bh, Blocks&& blocks, A* f) {
  if (d.rng == AttentionDropoutRng::Philox7x16) return write_dropout_factors_philox7(s, d, bh, f);
  const int64_t S = s.seq, squares = (S + 15) / 16, nblocks = squares * 32;
  const uint32_t threshold = dropout_threshold(d.p);
  const A kept = dropout_keep_scale<A>(threshold);
  std::vector<uint32_t> planes(static_cast<size_t>(4 * nblocks));
  A row16[16];
  for (int64_t i0 = 0; i0 < S; i0 += 16) {
    blocks(attention_dropout_group(bh, i0, 0, S), nblocks, planes.data());
    for (int64_t i = i0; i < std::min(i0 + 16, S); ++i) {
      const int64_t r = i - i0;
      const uint32_t* left = planes.data() + (r / 8) * nblocks + 4 * (r % 8);
      const uint32_t* right = planes.data() + (2 + r / 8) * nblocks + 4 * (r % 8);
      for (int64_t m = 0; m < squares; ++m) {
        const int64_t j0 = 16 * m, n = std::min<int64_t>(16, S - j0);
        A* out = n == 16 ? f + i * S + j0 : row16;
        for (int q = 0; q < 4; ++q) {
          const uint32_t a = left[32 * m + q], b = right[32 * m + q];
          out[2 * q] = (a & 0xffffu) >= threshold ? kept : A(0);
          out[2 * q + 1] = (a >> 16) >= threshold ? kept : A(0);
          out[8 + 2 * q] = (b & 0xffffu) >= threshold ? kept : A(0);
          out[9 + 2 * q] = (b >> 16) >= threshold ? kept : A(0);
        }
        if (n < 16) std::copy(row16, row16 + n, f + i * S + j0);
      }
    }
  }
}

// keep(i, j) * scale for head bh: what multiplies the probabilities. All ones without dropout.
template <class A>
Mat<A> dropout_factors(const AttentionShape& s, const AttentionDropout& d, int64_t bh) {
  Mat<A> f = Mat<A>::Ones(s.seq, s.seq);
  if (!d.active()) return f;
  write_dropout_factors<A>(
      s, d, bh,
      [&](uint64_t first, int64_t n, uint32_t* planes) {
        for (int64_t b = 0; b < n; ++b) {
          const Philox4 r = philox_block(d.seed, d.subsequence(), first + static_cast<uint64_t>(b));
          for (int w = 0; w < 4; ++w) planes[w * n + b] = r.v[w];
        }
      },
      f.data());
  return f;
}

std::vector<bool> real_keys(const uint8_t* mask, const AttentionShape& s, int64_t b) {
  std::vector<bool> real(static_cast<size_t>(s.seq), true);
  if (mask)
    for (int64_t j = 0; j < s.seq; ++j) real[static_cast<size_t>(j)] = mask[b * s.seq + j] != 0;
  return real;
}

template <class T>
void forward(const T* qkv, const uint8_t* mask, T* out, acc_t<T>* lse, const AttentionShape& s,
             const AttentionDropout& d) {
  using A = acc_t<T>;
  const int64_t H = s.heads, Dh = s.head_dim, S = s.seq, width = 3 * H * Dh;
  const A scale = A(1) / std::sqrt(A(Dh));
  const A inf = std::numeric_limits<A>::infinity();
  for (int64_t b = 0; b < s.batch; ++b) {
    const std::vector<bool> real = real_keys(mask, s, b);
    for (int64_t h = 0; h < H; ++h) {
      const int64_t bh = b * H + h;
      Mat<A> q = gather(qkv, s, b, width, (kQ * H + h) * Dh);
      Mat<A> k = gather(qkv, s, b, width, (kK * H + h) * Dh);
      Mat<A> v = gather(qkv, s, b, width, (kV * H + h) * Dh);
      Mat<A> p = (q * k.transpose()) * scale;
      for (int64_t i = 0; i < S; ++i) {
        A m = -inf;
        for (int64_t j = 0; j < S; ++j)
          if (real[static_cast<size_t>(j)]) m = std::max(m, p(i, j));
        if (m == -inf) {  // every key is padding: no distribution, output 0
          p.row(i).setZero();
          lse[bh * S + i] = inf;
          continue;
        }
        A l = 0;
        for (int64_t j = 0; j < S; ++j) {
          p(i, j) = real[static_cast<size_t>(j)] ? std::exp(p(i, j) - m) : A(0);
          l += p(i, j);
        }
        p.row(i) /= l;
        lse[bh * S + i] = m + std::log(l);
      }
      Mat<A> o = p.cwiseProduct(dropout_factors<A>(s, d, bh)) * v;
      scatter(o, out, s, b, H * Dh, h * Dh);
    }
  }
}

template <class T>
void backward(const T* qkv, const uint8_t* mask, const acc_t<T>* lse, const T* dout, T* dqkv, const AttentionShape& s,
              const AttentionDropout& d) {
  using A = acc_t<T>;
  const int64_t H = s.heads, Dh = s.head_dim, S = s.seq, width = 3 * H * Dh;
  const A scale = A(1) / std::sqrt(A(Dh));
  for (int64_t b = 0; b < s.batch; ++b) {
    const std::vector<bool> real = real_keys(mask, s, b);
    for (int64_t h = 0; h < H; ++h) {
      const int64_t bh = b * H + h;
      Mat<A> q = gather(qkv, s, b, width, (kQ * H + h) * Dh);
      Mat<A> k = gather(qkv, s, b, width, (kK * H + h) * Dh);
      Mat<A> v = gather(qkv, s, b, width, (kV * H + h) * Dh);
      Mat<A> dout_h = gather(dout, s, b, H * Dh, h * Dh);
      Mat<A> p = (q * k.transpose()) * scale;
      for (int64_t i = 0; i < S; ++i)
        for (int64_t j = 0; j < S; ++j)  // lse = +inf (no real key) gives 0 too
          p(i, j) = real[static_cast<size_t>(j)] ? std::exp(p(i, j) - lse[bh * S + i]) : A(0);
      const Mat<A> f = dropout_factors<A>(s, d, bh);
      const Mat<A> dp = (dout_h * v.transpose()).cwiseProduct(f);  // d loss / d softmax output
      const Mat<A> dv = p.cwiseProduct(f).transpose() * dout_h;
      const Col<A> rowdot = p.cwiseProduct(dp).rowwise().sum();
      const Mat<A> ds = p.cwiseProduct(dp.colwise() - rowdot);  // d loss / d scaled score
      scatter(Mat<A>((ds * k) * scale), dqkv, s, b, width, (kQ * H + h) * Dh);
      scatter(Mat<A>((ds.transpose() * q) * scale), dqkv, s, b, width, (kK * H + h) * Dh);
      scatter(dv, dqkv, s, b, width, (kV * H + h) * Dh);
    }
  }
}

// ---- f32: the selected ISA's kernels on strided views of qkv, threads over (batch, head).
// Each (b, h) is computed whole by one thread, so the bits do not depend on the thread count.

// Per-thread scores, dropout factors and score gradients, S x S each.
struct HeadScratch {
  explicit HeadScratch(int64_t seq) : p(static_cast<size_t>(seq * seq)), f(p.size()), dp(p.size()) {}
  std::vector<float> p, f, dp;
};

// f[i, j] = keep(i, j) * scale for head bh, the Philox blocks from the selected ISA's kernel.
void fill_dropout_factors(const CpuKernels& k, const AttentionShape& s, const AttentionDropout& d, int64_t bh,
                          float* f) {
  write_dropout_factors<float>(
      s, d, bh,
      [&](uint64_t first, int64_t n, uint32_t* planes) { k.philox_blocks(d.seed, d.subsequence(), first, n, planes); }, f);
}

void multiply_in_place(float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] *= b[i];
}

void forward_f32(const float* qkv, const uint8_t* mask, float* out, float* lse, const AttentionShape& s,
                 const AttentionDropout& d) {
  const CpuKernels& k = cpu_kernels();
  const int64_t H = s.heads, Dh = s.head_dim, S = s.seq, width = 3 * H * Dh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
  parallel_for(0, s.batch * H, 1, [&](int64_t lo, int64_t hi) {
    HeadScratch w(S);
    for (int64_t bh = lo; bh < hi; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const float* q = qkv + b * S * width + (kQ * H + h) * Dh;
      const float* kk = qkv + b * S * width + (kK * H + h) * Dh;
      const float* v = qkv + b * S * width + (kV * H + h) * Dh;
      float* p = w.p.data();
      k.gemm(false, true, S, S, Dh, scale, q, width, kk, width, 0.0f, p, S);
      k.masked_softmax_rows(p, S, S, S, mask ? mask + b * S : nullptr, lse + bh * S);
      if (d.active()) {
        fill_dropout_factors(k, s, d, bh, w.f.data());
        multiply_in_place(p, w.f.data(), S * S);
      }
      k.gemm(false, false, S, Dh, S, 1.0f, p, S, v, width, 0.0f, out + b * S * H * Dh + h * Dh, H * Dh);
    }
  });
}

void backward_f32(const float* qkv, const uint8_t* mask, const float* lse, const float* dout, float* dqkv,
                  const AttentionShape& s, const AttentionDropout& d) {
  const CpuKernels& k = cpu_kernels();
  const int64_t H = s.heads, Dh = s.head_dim, S = s.seq, width = 3 * H * Dh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
  parallel_for(0, s.batch * H, 1, [&](int64_t lo, int64_t hi) {
    HeadScratch w(S);
    for (int64_t bh = lo; bh < hi; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const int64_t base = b * S * width;
      const float* q = qkv + base + (kQ * H + h) * Dh;
      const float* kk = qkv + base + (kK * H + h) * Dh;
      const float* v = qkv + base + (kV * H + h) * Dh;
      const float* go = dout + b * S * H * Dh + h * Dh;
      float *p = w.p.data(), *f = w.f.data(), *dp = w.dp.data();
      // p: the softmax again, from the forward's lse.
      k.gemm(false, true, S, S, Dh, scale, q, width, kk, width, 0.0f, p, S);
      k.softmax_from_lse_rows(p, S, S, S, mask ? mask + b * S : nullptr, lse + bh * S);
      // dp = d loss / d softmax output = (dout v^T) * f.
      k.gemm(false, true, S, S, Dh, 1.0f, go, H * Dh, v, width, 0.0f, dp, S);
      if (d.active()) {
        fill_dropout_factors(k, s, d, bh, f);
        multiply_in_place(dp, f, S * S);
        multiply_in_place(f, p, S * S);  // f = p * f, the dropped probabilities, for dv
      }
      // dv = (p * f)^T dout.
      k.gemm(true, false, S, Dh, S, 1.0f, d.active() ? f : p, S, go, H * Dh, 0.0f, dqkv + base + (kV * H + h) * Dh,
             width);
      // ds = p * (dp - rowsum(p * dp)): d loss / d scaled score; dq = ds k * scale, dk = ds^T q * scale.
      k.softmax_backward_rows(p, dp, S, S, S);
      k.gemm(false, false, S, Dh, S, scale, dp, S, kk, width, 0.0f, dqkv + base + (kQ * H + h) * Dh, width);
      k.gemm(true, false, S, Dh, S, scale, dp, S, q, width, 0.0f, dqkv + base + (kK * H + h) * Dh, width);
    }
  });
}

}  // namespace

void attention_forward_cpu(const void* qkv, const uint8_t* mask, void* out, void* lse, const AttentionShape& s,
                           const AttentionDropout& d, DType t) {
  if (t == DType::F32) {
    forward_f32(static_cast<const float*>(qkv), mask, static_cast<float*>(out), static_cast<float*>(lse), s, d);
    return;
  }
  TANDEM_DISPATCH_FLOAT(t, "attention_forward_cpu", [&] {
    forward(static_cast<const scalar_t*>(qkv), mask, static_cast<scalar_t*>(out), static_cast<acc_t<scalar_t>*>(lse),
            s, d);
  });
}

void attention_backward_cpu(const void* qkv, const uint8_t* mask, const void* lse, const void* dout, void* dqkv,
                            const AttentionShape& s, const AttentionDropout& d, DType t) {
  if (t == DType::F32) {
    backward_f32(static_cast<const float*>(qkv), mask, static_cast<const float*>(lse), static_cast<const float*>(dout),
                 static_cast<float*>(dqkv), s, d);
    return;
  }
  TANDEM_DISPATCH_FLOAT(t, "attention_backward_cpu", [&] {
    backward(static_cast<const scalar_t*>(qkv), mask, static_cast<const acc_t<scalar_t>*>(lse),
             static_cast<const scalar_t*>(dout), static_cast<scalar_t*>(dqkv), s, d);
  });
}

}  // namespace tandem::kernels
