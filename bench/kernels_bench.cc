// Kernel benchmark: every transformer op (and linear), forward and backward,
// on the CPU reference and, when a GPU is present, the CUDA kernels.
//
// For each kernel and size it prints the median time of many runs, the
// achieved bandwidth (bytes that must move: every input read once, every
// output written once) or FLOP rate (linear), and that as a percentage of a
// ceiling measured on the same machine first: memcpy bandwidth of buffers far
// larger than the last-level cache, and the FLOP rate of a large GEMM in the
// same dtype (on the CPU also register-only multiply-add loops: SSE2, what this
// build uses, and AVX-512 FMA, the machine's peak). The raw
// kernels are called on preallocated buffers (no autograd, no allocation).
// CPU: steady_clock around each run, 1 warm-up run, at least 3 runs (about 1 s). CUDA: events around each
// run on the current stream after 5 warm-up runs, 50 runs.
//
//   kernels_bench [--device cpu|cuda|all] [--rows N] [--d-model D] [--reps N]
//
// --rows is batch x sequence (a multiple of the sequence: 128 on the CPU, 512
// on a GPU); --d-model the width of the rows (default 768, BERT-base's; the
// feed-forward is 4x that). configs/ag_news_optimized.yaml trains at
// --rows 32768 --d-model 256, where a row is one warp of 16-bit vectors.
#include <fmt/format.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/copy_kernels.h"
#include "core/elapsed.h"
#include "core/parse_number.h"
#include "core/random.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "kernels/acc_dtype.h"
#include "kernels/cpu/bias_dropout_add_cpu.h"
#include "kernels/cpu/cross_entropy_cpu.h"
#include "kernels/cpu/embedding_cpu.h"
#include "kernels/cpu/gelu_cpu.h"
#include "kernels/cpu/layer_norm_cpu.h"
#include "kernels/cpu/linear_cpu.h"
#include "kernels/cpu/pooling_cpu.h"
#include "kernels/dropout_mask.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/bias_dropout_add_cuda.h"
#include "kernels/cuda/cross_entropy_cuda.h"
#include "kernels/cuda/embedding_cuda.h"
#include "kernels/cuda/gelu_cuda.h"
#include "kernels/cuda/layer_norm_cuda.h"
#include "kernels/cuda/linear_cuda.h"
#include "kernels/cuda/pooling_cuda.h"
#endif

namespace tandem::kernels {
namespace {

struct Options {
  std::string device = "all";
  int64_t rows = 0;  // 0: the device's default (CPU 8192 = 64 x 128 tokens, CUDA 16384 = 32 x 512)
  int64_t d_model = 768;
  int reps = 0;      // 0: CPU adaptive (>= 3 runs, ~1 s), CUDA 50
};

// Tokens per sequence of the embedding case: --rows must be a multiple of it.
int64_t sequence_length(bool gpu) { return gpu ? 512 : 128; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// --- timing ---------------------------------------------------------------

double time_cpu_ms(const std::function<void()>& f, int reps) {
  f();
  std::vector<double> t;
  double total = 0;
  for (int i = 0; reps > 0 ? i < reps : (i < 3 || (total < 1000.0 && i < 50)); ++i) {
    auto a = std::chrono::steady_clock::now();
    f();
    double ms = milliseconds_since(a);
    t.push_back(ms);
    total += ms;
  }
  return median(t);
}

double time_cuda_ms(const std::function<void()>& f, int reps) {
  cuda::Stream s = cuda::current_stream(0);
  for (int i = 0; i < 5; ++i) f();
  std::vector<cuda::Event> start, stop;
  for (int i = 0; i < reps; ++i) {
    start.emplace_back(true);
    stop.emplace_back(true);
    start.back().record(s);
    f();
    stop.back().record(s);
  }
  stop.back().synchronize();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) t.push_back(start[static_cast<size_t>(i)].elapsed_ms(stop[static_cast<size_t>(i)]));
  return median(t);
}

// --- ceilings -------------------------------------------------------------

struct Ceilings {
  double gbps = 0;                 // memcpy: (read + write) bytes per second / 1e9
  double gemm_tflops[3] = {0, 0, 0};  // by dtype: f32, bf16, f16
  double fma_tflops = 0;           // CPU register-only multiply-add loop, the build's instruction set (SSE2)
  double fma512_tflops = 0;        // the same with AVX-512 FMA, if the CPU has it: the machine's peak
};

int dtype_slot(DType t) { return t == DType::BF16 ? 1 : t == DType::F16 ? 2 : 0; }

double cpu_copy_gbps() {
  const size_t n = size_t{256} << 20;  // 256 MiB each way, 8x the 32 MiB L3
  std::vector<char> a(n, 1), b(n, 2);
  double ms = time_cpu_ms([&] { std::memcpy(b.data(), a.data(), n); }, 10);
  return 2.0 * static_cast<double>(n) / (ms * 1e6);
}

// 16 independent 4-wide multiply-add chains (what the build's baseline SSE2 code can issue).
double cpu_fma_tflops() {
  typedef float v4 __attribute__((vector_size(16)));
  const int64_t iters = 20'000'000;
  v4 acc[16];
  for (int k = 0; k < 16; ++k) acc[k] = v4{1.0f + k, 1.0f, 1.0f, 1.0f};
  const v4 m{0.999999f, 0.999999f, 0.999999f, 0.999999f}, a{1e-7f, 1e-7f, 1e-7f, 1e-7f};
  double ms = time_cpu_ms(
      [&] {
        for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
          for (int k = 0; k < 16; ++k) acc[k] = acc[k] * m + a;
      },
      3);
  float sink = 0;
  for (int k = 0; k < 16; ++k) sink += acc[k][0];
  if (sink == 12345.0f) fmt::print("");
  return 2.0 * 4 * 16 * static_cast<double>(iters) / (ms * 1e9);
}

#if defined(__x86_64__)
// 16 independent 16-wide fused multiply-add chains: what this CPU can do, though the
// build (baseline x86-64) does not use these instructions. Returns a sum so nothing is dead.
__attribute__((target("avx512f"))) float fma512_loop(int64_t iters) {
  __m512 acc[16];
  for (int k = 0; k < 16; ++k) acc[k] = _mm512_set1_ps(1.0f + static_cast<float>(k));
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) acc[k] = _mm512_fmadd_ps(acc[k], m, a);
  float lanes[16], sum = 0;
  for (int k = 0; k < 16; ++k) {
    _mm512_storeu_ps(lanes, acc[k]);
    sum += lanes[0];
  }
  return sum;
}

double cpu_fma512_tflops() {
  const int64_t iters = 10'000'000;
  volatile float sink = 0;
  double ms = time_cpu_ms([&] { sink = sink + fma512_loop(iters); }, 3);
  return 2.0 * 16 * 16 * static_cast<double>(iters) / (ms * 1e9);
}
#endif

// --- cases ----------------------------------------------------------------

struct Case {
  std::string op, shape, dir;
  double bytes = 0, flops = 0;
  std::function<void()> run;
};

struct Buffers {
  Device device;
  DType t;
  std::vector<Tensor> keep;
  void* f(const Shape& s, uint64_t seed, DType dt) {
    Tensor x = Tensor::empty(s, dt, device);
    fill_normal(x, seed, 0);
    keep.push_back(x);
    return x.data_ptr();
  }
  void* f(const Shape& s, uint64_t seed = 1) { return f(s, seed, t); }
  void* raw(const Shape& s, DType dt) {
    keep.push_back(Tensor::zeros(s, dt, device));
    return keep.back().data_ptr();
  }
};

// The cases of one device and dtype, and the buffers their closures point into.
struct Suite {
  std::vector<Tensor> buffers;
  std::vector<Case> cases;
};

Suite make_suite(Device dev, DType t, int64_t rows, int64_t d, int cuda_device) {
  const bool gpu = dev.is_cuda();
  const double es = static_cast<double>(dtype_size(t));
  const int64_t seq = sequence_length(gpu), batch = rows / seq, ffn = 4 * d, vocab = 30522, classes = 4;
  Buffers B{dev, t, {}};
  std::vector<Case> cases;
  const std::string rd = fmt::format("{}x{}", rows, d), rf = fmt::format("{}x{}", rows, ffn);
#if TANDEM_WITH_CUDA
  void* stream = gpu ? cuda::current_stream(cuda_device).handle() : nullptr;
#define ON(cpu_call, cuda_call) [=] { if (gpu) cuda_call; else cpu_call; }
#else
#define ON(cpu_call, cuda_call) [=] { cpu_call; }
#endif

  // embedding
  {
    std::vector<int64_t> idv;
    Tensor u = Tensor::empty({rows});
    fill_uniform(u, 7, 0, 0.0, static_cast<double>(vocab));
    for (double v : u.to_double_vector()) idv.push_back(static_cast<int64_t>(v));
    Tensor ids = Tensor::from_vector(idv, {batch, seq}, DType::I64, dev);
    B.keep.push_back(ids);
    void *pid = ids.data_ptr(), *tok = B.f({vocab, d}), *pos = B.f({seq, d}), *out = B.raw({rows, d}, t);
    void *dtok = B.raw({vocab, d}, t), *dpos = B.raw({seq, d}, t);
    const std::string sh = fmt::format("{}x{} V={} D={}", batch, seq, vocab, d);
    cases.push_back({"embedding", sh, "fwd", (2.0 * rows * d + seq * d) * es + rows * 8.0, 0,
                     ON(embedding_forward_cpu(pid, DType::I64, tok, pos, out, batch, seq, d, t),
                        embedding_forward_cuda(pid, DType::I64, tok, pos, out, batch, seq, d, vocab, t, stream))});
    cases.push_back({"embedding", sh, "bwd", (1.0 * rows * d + vocab * d + seq * d) * es + rows * 8.0, 0,
                     ON(embedding_backward_cpu(out, pid, DType::I64, dtok, dpos, batch, seq, d, vocab, seq, t),
                        embedding_backward_cuda(out, pid, DType::I64, dtok, dpos, batch, seq, d, vocab, seq, t,
                                                cuda_device, stream))});
    // The same with the last 85 % of every sequence id 0, as padding fills a batch of short texts
    // (AG News averages about 40 of 256 tokens): one id's segment spans most of the sorted ids.
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t s = seq * 15 / 100; s < seq; ++s) idv[static_cast<size_t>(b * seq + s)] = 0;
    Tensor padded = Tensor::from_vector(idv, {batch, seq}, DType::I64, dev);
    B.keep.push_back(padded);
    void* ppad = padded.data_ptr();
    cases.push_back({"embedding", sh + " 85% id 0", "bwd", (1.0 * rows * d + vocab * d + seq * d) * es + rows * 8.0, 0,
                     ON(embedding_backward_cpu(out, ppad, DType::I64, dtok, dpos, batch, seq, d, vocab, seq, t),
                        embedding_backward_cuda(out, ppad, DType::I64, dtok, dpos, batch, seq, d, vocab, seq, t,
                                                cuda_device, stream))});
  }
  // layer norm, f32 parameters (the mixed-precision setting)
  {
    void *x = B.f({rows, d}), *w = B.f({d}, 2, DType::F32), *b = B.f({d}, 3, DType::F32), *y = B.raw({rows, d}, t);
    void *mean = B.raw({rows}, DType::F32), *rstd = B.raw({rows}, DType::F32), *dx = B.raw({rows, d}, t);
    void *dw = B.raw({d}, DType::F32), *db = B.raw({d}, DType::F32);
    const double pb = 2.0 * d * 4;
    cases.push_back({"layer_norm", rd, "fwd", 2.0 * rows * d * es + pb + rows * 8.0, 0,
                     ON(layer_norm_forward_cpu(x, w, b, y, mean, rstd, rows, d, 1e-5, t, DType::F32),
                        layer_norm_forward_cuda(x, w, b, y, mean, rstd, rows, d, 1e-5, t, DType::F32, stream))});
    cases.push_back({"layer_norm", rd, "bwd", 3.0 * rows * d * es + 2 * pb + rows * 8.0, 0,
                     ON(layer_norm_backward_cpu(y, x, w, mean, rstd, dx, dw, db, rows, d, t, DType::F32),
                        layer_norm_backward_cuda(y, x, w, mean, rstd, dx, dw, db, rows, d, t, DType::F32, cuda_device,
                                                 stream))});
  }
  // GELU (both approximations) and bias + GELU on the feed-forward width
  {
    void *x = B.f({rows, ffn}), *b = B.f({ffn}, 4), *y = B.raw({rows, ffn}, t), *dx = B.raw({rows, ffn}, t);
    void* db = B.raw({ffn}, t);
    const int64_t n = rows * ffn;
    for (auto [name, a] : {std::pair{"gelu_erf", GeluApproximation::None}, std::pair{"gelu_tanh", GeluApproximation::Tanh}}) {
      cases.push_back({name, rf, "fwd", 2.0 * n * es, 0,
                       ON(gelu_forward_cpu(x, y, t, n, a), gelu_forward_cuda(x, y, t, n, a, stream))});
      cases.push_back({name, rf, "bwd", 3.0 * n * es, 0,
                       ON(gelu_backward_cpu(y, x, dx, t, n, a), gelu_backward_cuda(y, x, dx, t, n, a, stream))});
    }
    const auto a = GeluApproximation::Tanh;
    cases.push_back({"bias_gelu_tanh", rf, "fwd", 2.0 * n * es + ffn * es, 0,
                     ON(bias_gelu_forward_cpu(x, b, y, t, rows, ffn, a),
                        bias_gelu_forward_cuda(x, b, y, t, rows, ffn, a, stream))});
    cases.push_back({"bias_gelu_tanh", rf, "bwd", 3.0 * n * es + 2.0 * ffn * es, 0,
                     ON(bias_gelu_backward_cpu(y, x, b, dx, db, t, rows, ffn, a),
                        bias_gelu_backward_cuda(y, x, b, dx, db, t, rows, ffn, a, cuda_device, stream))});
    // dropout(bias_gelu(x)), p = 0.1, as the feed-forward block runs it: the two kernels each way
    // through a temporary h (TANDEM_GELU_DROPOUT=separate) and, on a GPU, the one fused kernel each
    // way (=fused, the default). Bytes are the fused op's (forward: read x, write y; backward: read
    // dy and x, write dx), so the two rows' percentages compare directly.
    void* h = B.raw({rows, ffn}, t);
    cases.push_back(
        {"bias_gelu_dropout_separate", rf, "fwd", 2.0 * n * es + ffn * es, 0,
         ON((bias_gelu_forward_cpu(x, b, h, t, rows, ffn, a),
             bias_dropout_add_forward_cpu(h, nullptr, nullptr, y, t, rows, ffn, 0.1f, 1, 2)),
            (bias_gelu_forward_cuda(x, b, h, t, rows, ffn, a, stream),
             bias_dropout_add_forward_cuda(h, nullptr, nullptr, y, t, rows, ffn, 0.1f, 1, 2, nullptr, stream)))});
    cases.push_back(
        {"bias_gelu_dropout_separate", rf, "bwd", 3.0 * n * es + 2.0 * ffn * es, 0,
         ON((bias_dropout_add_backward_cpu(y, h, nullptr, t, rows, ffn, 0.1f, 1, 2),
             bias_gelu_backward_cpu(h, x, b, dx, db, t, rows, ffn, a)),
            (bias_dropout_add_backward_cuda(y, h, nullptr, t, rows, ffn, 0.1f, 1, 2, nullptr, cuda_device, stream),
             bias_gelu_backward_cuda(h, x, b, dx, db, t, rows, ffn, a, cuda_device, stream)))});
#if TANDEM_WITH_CUDA
    if (gpu) {
      cases.push_back({"bias_gelu_dropout_fused", rf, "fwd", 2.0 * n * es + ffn * es, 0, [=] {
                         bias_gelu_dropout_forward_cuda(x, b, y, t, rows, ffn, a, 0.1f, 1, 2, nullptr, stream);
                       }});
      cases.push_back({"bias_gelu_dropout_fused", rf, "bwd", 3.0 * n * es + 2.0 * ffn * es, 0, [=] {
                         bias_gelu_dropout_backward_cuda(y, x, b, dx, db, t, rows, ffn, a, 0.1f, 1, 2, nullptr,
                                                         cuda_device, stream);
                       }});
      // TANDEM_DROPOUT_KEEP=saved: the forward also writes a keep byte per 8 elements, the backward
      // reads them instead of computing Philox blocks (bytes counted with the tensors').
      auto* keep = static_cast<uint8_t*>(B.raw({dropout_keep_bytes(n)}, DType::U8));
      cases.push_back({"bias_gelu_dropout_fused_saved", rf, "fwd", 2.0 * n * es + ffn * es + n / 8.0, 0, [=] {
                         bias_gelu_dropout_forward_cuda(x, b, y, t, rows, ffn, a, 0.1f, 1, 2, nullptr, stream, keep);
                       }});
      cases.push_back({"bias_gelu_dropout_fused_saved", rf, "bwd", 3.0 * n * es + 2.0 * ffn * es + n / 8.0, 0, [=] {
                         bias_gelu_dropout_backward_cuda(y, x, b, dx, db, t, rows, ffn, a, 0.1f, 1, 2, nullptr,
                                                         cuda_device, stream, keep);
                       }});
      // Without the bias gradient (the linear before forms it: TANDEM_BIAS_GRADIENT=gemm,
      // kernels/bias_gradient.h). Under gemm the rows walk; otherwise the column walk storing no sums.
      cases.push_back({"bias_gelu_dropout_fused_no_db", rf, "bwd", 3.0 * n * es + ffn * es, 0, [=] {
                         bias_gelu_dropout_backward_cuda(y, x, b, dx, nullptr, t, rows, ffn, a, 0.1f, 1, 2, nullptr,
                                                         cuda_device, stream);
                       }});
      cases.push_back({"bias_gelu_dropout_fused_saved_no_db", rf, "bwd", 3.0 * n * es + ffn * es + n / 8.0, 0, [=] {
                         bias_gelu_dropout_backward_cuda(y, x, b, dx, nullptr, t, rows, ffn, a, 0.1f, 1, 2, nullptr,
                                                         cuda_device, stream, keep);
                       }});
    }
#endif
  }
  // layer_norm(dropout(x + b) + residual), p = 0.1, as a post-norm sublayer ends: the two ops' kernels
  // each way through the sum s (TANDEM_ADD_LAYER_NORM=separate) and, on a GPU, the fused kernels
  // (=fused, the default). Bytes are the fused op's: forward read x and the residual, write s and y;
  // backward read dy and s, write ds and dx (the parameters' and statistics' bytes left out).
  {
    void *x = B.f({rows, d}), *b = B.f({d}, 7), *r = B.f({rows, d}, 8), *s = B.raw({rows, d}, t);
    void *w = B.f({d}, 9, DType::F32), *lb = B.f({d}, 10, DType::F32), *y = B.raw({rows, d}, t);
    void *mean = B.raw({rows}, DType::F32), *rstd = B.raw({rows}, DType::F32), *ds = B.raw({rows, d}, t);
    void *dx = B.raw({rows, d}, t), *db = B.raw({d}, t), *dw = B.raw({d}, DType::F32), *dlb = B.raw({d}, DType::F32);
    const double bytes = 4.0 * rows * d * es;
    cases.push_back(
        {"bias_dropout_add_layer_norm_separate", rd, "fwd", bytes, 0,
         ON((bias_dropout_add_forward_cpu(x, b, r, s, t, rows, d, 0.1f, 1, 2),
             layer_norm_forward_cpu(s, w, lb, y, mean, rstd, rows, d, 1e-5, t, DType::F32)),
            (bias_dropout_add_forward_cuda(x, b, r, s, t, rows, d, 0.1f, 1, 2, nullptr, stream),
             layer_norm_forward_cuda(s, w, lb, y, mean, rstd, rows, d, 1e-5, t, DType::F32, stream)))});
    cases.push_back(
        {"bias_dropout_add_layer_norm_separate", rd, "bwd", bytes, 0,
         ON((layer_norm_backward_cpu(y, s, w, mean, rstd, ds, dw, dlb, rows, d, t, DType::F32),
             bias_dropout_add_backward_cpu(ds, dx, db, t, rows, d, 0.1f, 1, 2)),
            (layer_norm_backward_cuda(y, s, w, mean, rstd, ds, dw, dlb, rows, d, t, DType::F32, cuda_device, stream),
             bias_dropout_add_backward_cuda(ds, dx, db, t, rows, d, 0.1f, 1, 2, nullptr, cuda_device, stream)))});
#if TANDEM_WITH_CUDA
    if (gpu) {
      cases.push_back({"bias_dropout_add_layer_norm_fused", rd, "fwd", bytes, 0, [=] {
                         bias_dropout_add_layer_norm_forward_cuda(x, b, r, s, 0.1f, 1, 2, nullptr, w, lb, y, mean, rstd,
                                                                  rows, d, 1e-5, t, DType::F32, stream);
                       }});
      cases.push_back({"bias_dropout_add_layer_norm_fused", rd, "bwd", bytes, 0, [=] {
                         bias_dropout_add_layer_norm_backward_cuda(y, s, w, mean, rstd, ds, dw, dlb, dx, db, 0.1f, 1, 2,
                                                                   nullptr, rows, d, t, DType::F32, cuda_device,
                                                                   stream);
                       }});
    }
#endif
  }
  // dropout(x + b) + residual, and dropout alone, p = 0.1
  {
    void *x = B.f({rows, d}), *b = B.f({d}, 5), *r = B.f({rows, d}, 6), *y = B.raw({rows, d}, t);
    void *dx = B.raw({rows, d}, t), *db = B.raw({d}, t);
    const int64_t n = rows * d;
    cases.push_back({"bias_dropout_add", rd, "fwd", 3.0 * n * es + d * es, 0,
                     ON(bias_dropout_add_forward_cpu(x, b, r, y, t, rows, d, 0.1f, 1, 2),
                        bias_dropout_add_forward_cuda(x, b, r, y, t, rows, d, 0.1f, 1, 2, nullptr, stream))});
    cases.push_back({"bias_dropout_add", rd, "bwd", 2.0 * n * es + d * es, 0,
                     ON(bias_dropout_add_backward_cpu(y, dx, db, t, rows, d, 0.1f, 1, 2),
                        bias_dropout_add_backward_cuda(y, dx, db, t, rows, d, 0.1f, 1, 2, nullptr, cuda_device, stream))});
    cases.push_back({"dropout", rd, "fwd", 2.0 * n * es, 0,
                     ON(bias_dropout_add_forward_cpu(x, nullptr, nullptr, y, t, rows, d, 0.1f, 1, 2),
                        bias_dropout_add_forward_cuda(x, nullptr, nullptr, y, t, rows, d, 0.1f, 1, 2, nullptr, stream))});
    cases.push_back({"dropout", rd, "bwd", 2.0 * n * es, 0,
                     ON(bias_dropout_add_backward_cpu(y, dx, nullptr, t, rows, d, 0.1f, 1, 2),
                        bias_dropout_add_backward_cuda(y, dx, nullptr, t, rows, d, 0.1f, 1, 2, nullptr, cuda_device, stream))});
  }
  // pooling: 90% real tokens
  {
    void *x = B.f({batch, seq, d}), *y = B.raw({batch, d}, t), *dx = B.raw({batch, seq, d}, t);
    void* count = B.raw({batch}, DType::F32);
    std::vector<int64_t> m;
    for (int64_t i = 0; i < rows; ++i) m.push_back(i % seq < seq * 9 / 10 ? 1 : 0);
    Tensor mask = Tensor::from_vector(m, {batch, seq}, DType::U8, dev);
    B.keep.push_back(mask);
    const auto* pm = mask.data<uint8_t>();
    const std::string sh = fmt::format("{}x{}x{}", batch, seq, d);
    cases.push_back({"masked_mean_pool", sh, "fwd", 0.9 * rows * d * es + rows + batch * d * es, 0,
                     ON(masked_mean_pool_forward_cpu(x, pm, y, count, t, batch, seq, d),
                        masked_mean_pool_forward_cuda(x, pm, y, count, t, batch, seq, d, cuda_device, stream))});
    cases.push_back({"masked_mean_pool", sh, "bwd", 1.0 * rows * d * es + rows + batch * d * es, 0,
                     ON(masked_mean_pool_backward_cpu(y, pm, count, dx, t, batch, seq, d),
                        masked_mean_pool_backward_cuda(y, pm, count, dx, t, batch, seq, d, stream))});
  }
  // cross-entropy: the classifier's [batch, 4] and a wide [rows / 4, 1000] one
  for (auto [n, c] : {std::pair{batch, classes}, std::pair{rows / 4, int64_t{1000}}}) {
    void *z = B.f({n, c}), *dz = B.raw({n, c}, acc_dtype(t)), *row_loss = B.raw({n}, DType::F32), *g = B.raw({1}, DType::F32);
    std::vector<int64_t> lv;
    for (int64_t i = 0; i < n; ++i) lv.push_back((i * 7) % c);
    Tensor labels = Tensor::from_vector(lv, {n}, DType::I64, dev);
    B.keep.push_back(labels);
    void* pl = labels.data_ptr();
    const std::string sh = fmt::format("{}x{}", n, c);
    // dlogits are f32 (read logits, write dlogits; backward reads them and writes dz).
    const double acc_es = static_cast<double>(dtype_size(acc_dtype(t)));
    cases.push_back({"cross_entropy", sh, "fwd", n * c * (es + acc_es) + n * 12.0, 0,
                     ON(cross_entropy_forward_cpu(z, pl, DType::I64, row_loss, dz, t, n, c, 0.1),
                        cross_entropy_forward_cuda(z, pl, DType::I64, row_loss, dz, t, n, c, 0.1, stream))});
    cases.push_back({"cross_entropy", sh, "bwd", n * c * (es + acc_es), 0,
                     ON(scale_by_scalar_cpu(dz, g, z, t, n * c), scale_by_scalar_cuda(dz, g, z, t, n * c, stream))});
  }
  // dtype conversion (the mixed-precision casts of parameters and activations) and gradient
  // accumulation (autograd's dst += src), on the feed-forward activation's size
  {
    const int64_t n = rows * ffn;
    void *x32 = B.f({n}, 8, DType::F32), *y = B.raw({n}, t), *x32_back = B.raw({n}, DType::F32);
    void *acc = B.f({n}, 9), *g = B.f({n}, 10);
    if (t != DType::F32) {
      cases.push_back({"convert", rf, "f32->" + std::string(dtype_name(t)), n * (4.0 + es), 0,
                       ON(convert_host(x32, DType::F32, y, t, n), convert_cuda(x32, DType::F32, y, t, n, stream))});
      cases.push_back({"convert", rf, std::string(dtype_name(t)) + "->f32", n * (es + 4.0), 0,
                       ON(convert_host(y, t, x32_back, DType::F32, n), convert_cuda(y, t, x32_back, DType::F32, n, stream))});
    }
    cases.push_back({"accumulate", rf, "dst+=src", 3.0 * n * es, 0,
                     ON(accumulate_host(acc, g, t, n), accumulate_cuda(acc, g, t, n, stream))});
  }
  // linear: the feed-forward up-projection [rows, d] x [4d, d]^T
  {
    void *x = B.f({rows, d}), *w = B.f({ffn, d}), *b = B.f({ffn}), *y = B.raw({rows, ffn}, t);
    void *dx = B.raw({rows, d}, t), *dw = B.raw({ffn, d}, t), *db = B.raw({ffn}, t);
    const double mnk = static_cast<double>(rows) * ffn * d;
    const std::string sh = fmt::format("{}x{}x{}", rows, ffn, d);
    cases.push_back({"linear", sh, "fwd", 0, 2 * mnk,
                     ON(linear_forward_cpu(x, w, b, y, rows, d, ffn, t),
                        linear_forward_cuda(x, w, b, y, rows, d, ffn, t, cuda_device, stream))});
    cases.push_back({"linear", sh, "bwd", 0, 4 * mnk,
                     ON(linear_backward_cpu(y, x, w, dx, dw, db, rows, d, ffn, t, t, t),
                        linear_backward_cuda(y, x, w, dx, dw, db, rows, d, ffn, t, t, t, cuda_device, stream))});
#if TANDEM_WITH_CUDA
    // The same backward with db asked of dw's GEMM (cuBLASLt's BGRADB unless TANDEM_CUBLASLT_EPILOGUES=0),
    // as for a bias the next op added (TANDEM_BIAS_GRADIENT=gemm): against the row above, what the
    // bias gradient costs the GEMM; against bias_gelu_dropout_fused - _no_db, what it saves there.
    if (gpu)
      cases.push_back({"linear_db_in_gemm", sh, "bwd", 0, 4 * mnk, [=] {
                         linear_backward_cuda(y, x, w, dx, dw, db, rows, d, ffn, t, t, t, cuda_device, stream, true);
                       }});
    // dw and db written in f32 for the master parameters (TANDEM_LINEAR_GRADIENTS=master,
    // kernels/linear_gradients.h): against `linear`'s backward, what the f32 outputs cost; they save the
    // cast backwards' passes.
    if (gpu && t != DType::F32) {
      void *dw32 = B.raw({ffn, d}, DType::F32), *db32 = B.raw({ffn}, DType::F32);
      cases.push_back({"linear_master_grads", sh, "bwd", 0, 4 * mnk, [=] {
                         linear_backward_cuda(y, x, w, dx, dw32, db32, rows, d, ffn, t, DType::F32, DType::F32,
                                              cuda_device, stream);
                       }});
    }
#endif
  }
#undef ON
  return Suite{std::move(B.keep), std::move(cases)};
}

double gemm_tflops(Device dev, DType t, int64_t n, int cuda_device, int reps) {
  Tensor a = Tensor::empty({n, n}, t, dev), b = Tensor::empty({n, n}, t, dev), c = Tensor::empty({n, n}, t, dev);
  fill_normal(a, 1, 0);
  fill_normal(b, 2, 0);
  double ms;
  if (dev.is_cpu()) {
    ms = time_cpu_ms([&] { linear_forward_cpu(a.data_ptr(), b.data_ptr(), nullptr, c.data_ptr(), n, n, n, t); }, reps);
  } else {
#if TANDEM_WITH_CUDA
    void* s = cuda::current_stream(cuda_device).handle();
    ms = time_cuda_ms(
        [&] { linear_forward_cuda(a.data_ptr(), b.data_ptr(), nullptr, c.data_ptr(), n, n, n, t, cuda_device, s); },
        reps);
#else
    ms = 0;
#endif
  }
  return 2.0 * n * n * n / (ms * 1e9);
}

#if TANDEM_WITH_CUDA
double cuda_copy_gbps(int reps) {
  const int64_t n = int64_t{1} << 30;  // 1 GiB each way
  Tensor a = Tensor::zeros({n}, DType::U8, Device::cuda(0)), b = Tensor::zeros({n}, DType::U8, Device::cuda(0));
  double ms = time_cuda_ms([&] { b.copy_(a); }, reps);
  return 2.0 * static_cast<double>(n) / (ms * 1e6);
}
#endif

void run_device(Device dev, const Options& o) {
  const bool gpu = dev.is_cuda();
  const int reps = o.reps ? o.reps : (gpu ? 50 : 0);
  const int64_t rows = o.rows ? o.rows : (gpu ? 16384 : 8192);
  TANDEM_CHECK(rows % sequence_length(gpu) == 0, "kernels_bench: --rows must be a multiple of {} on the {} (batch x sequence), got {}",
               sequence_length(gpu), gpu ? "GPU" : "CPU", rows);
  Ceilings ceil;
  std::vector<DType> types = gpu ? std::vector<DType>{DType::F32, DType::BF16} : std::vector<DType>{DType::F32};
  if (gpu) {
#if TANDEM_WITH_CUDA
    ceil.gbps = cuda_copy_gbps(20);
    for (DType t : types) ceil.gemm_tflops[dtype_slot(t)] = gemm_tflops(dev, t, 8192, 0, 20);
#endif
    fmt::print("\n## CUDA ceilings: device-to-device copy {:.0f} GB/s", ceil.gbps);
    for (DType t : types) fmt::print(", {} GEMM 8192^3 {:.1f} TFLOP/s", dtype_name(t), ceil.gemm_tflops[dtype_slot(t)]);
    fmt::print("\n");
  } else {
    ceil.gbps = cpu_copy_gbps();
    ceil.gemm_tflops[0] = gemm_tflops(dev, DType::F32, 1024, 0, 5);
    ceil.fma_tflops = cpu_fma_tflops();
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) ceil.fma512_tflops = cpu_fma512_tflops();
#endif
    fmt::print("\n## CPU ceilings (one thread): memcpy 256 MiB {:.1f} GB/s, f32 GEMM 1024^3 (Eigen, this build) "
               "{:.1f} GFLOP/s, SSE2 multiply-add loop (this build's instruction set) {:.1f} GFLOP/s, AVX-512 FMA "
               "loop (the machine's peak; 0 = no AVX-512) {:.1f} GFLOP/s. linear's % is of the largest.\n",
               ceil.gbps, ceil.gemm_tflops[0] * 1e3, ceil.fma_tflops * 1e3, ceil.fma512_tflops * 1e3);
  }
  fmt::print("\n| device | op | dtype | shape | dir | time (us) | achieved | % of ceiling |\n");
  fmt::print("|---|---|---|---|---|---:|---:|---:|\n");
  for (DType t : types) {
    Suite suite = make_suite(dev, t, rows, o.d_model, 0);
    for (const Case& c : suite.cases) {
      double ms = gpu ? time_cuda_ms(c.run, reps) : time_cpu_ms(c.run, reps);
      std::string achieved, pct;
      if (c.flops > 0) {
        double tf = c.flops / (ms * 1e9);
        double ref = gpu ? ceil.gemm_tflops[dtype_slot(t)]
                         : std::max({ceil.gemm_tflops[0], ceil.fma_tflops, ceil.fma512_tflops});
        achieved = gpu ? fmt::format("{:.1f} TFLOP/s", tf) : fmt::format("{:.1f} GFLOP/s", tf * 1e3);
        pct = fmt::format("{:.0f}%", 100.0 * tf / ref);
      } else {
        double gbps = c.bytes / (ms * 1e6);
        achieved = fmt::format("{:.1f} GB/s", gbps);
        pct = fmt::format("{:.0f}%", 100.0 * gbps / ceil.gbps);
      }
      fmt::print("| {} | {} | {} | {} | {} | {:.2f} | {} | {} |\n", gpu ? "cuda" : "cpu", c.op, dtype_name(t), c.shape,
                 c.dir, ms * 1e3, achieved, pct);
    }
  }
}

}  // namespace
}  // namespace tandem::kernels

int main(int argc, char** argv) {
  using namespace tandem;
  using namespace tandem::kernels;
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) {
        fmt::print(stderr, "kernels_bench: {} needs a value\n", a);
        std::exit(2);
      }
      return std::string(argv[++i]);
    };
    try {
      // A whole integer: std::stoll alone would read "10x" as 10.
      const auto integer = [&] {
        const std::string v = value();
        const std::optional<int64_t> x = parse_int64(v);
        if (!x) throw std::invalid_argument("'" + v + "' is not an integer");
        return *x;
      };
      if (a == "--device") {
        o.device = value();
        if (o.device != "cpu" && o.device != "cuda" && o.device != "all")
          throw std::invalid_argument("'" + o.device + "' is not cpu, cuda or all");
      } else if (a == "--rows") o.rows = integer();
      else if (a == "--d-model") o.d_model = integer();
      else if (a == "--reps") {
        const int64_t reps = integer();
        if (reps > 1 << 20) throw std::invalid_argument("more than 2^20 repetitions");
        o.reps = static_cast<int>(reps);
      }
      else {
        fmt::print(stderr, "usage: kernels_bench [--device cpu|cuda|all] [--rows N] [--d-model D] [--reps N]\n");
        return 2;
      }
      if (o.rows < 0 || o.d_model < 1 || o.reps < 0) throw std::invalid_argument("must be positive");
    } catch (const std::exception& e) {
      fmt::print(stderr, "kernels_bench: bad value for {}: {}\n", a, e.what());
      return 2;
    }
  }
  try {
    if (o.device == "cpu" || o.device == "all") run_device(Device::cpu(), o);
    // --device cuda asks for the GPU's rows: without a GPU that is an error; all notes it and goes on.
    if (o.device == "cuda" && !cuda::available()) {
      fmt::print(stderr, "kernels_bench: --device cuda, but no CUDA device is available\n");
      return 1;
    }
    if (o.device == "cuda" || o.device == "all") {
      if (cuda::available()) run_device(Device::cuda(0), o);
      else fmt::print("\n(no CUDA device: CUDA kernels not measured)\n");
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "kernels_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
