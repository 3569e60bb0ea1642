// f32 GEMM on the CPU at the training step's shapes: Tandem's per-ISA Eigen
// GEMM (kernels/cpu/isa/) against OpenBLAS's cblas_sgemm when the build found
// it (TANDEM_BENCH_OPENBLAS), one thread each by default, so the choice of
// GEMM library rests on a measurement (docs/results/cpu_speed.md).
//
// Shapes: the linear layers of configs/ag_news_small.yaml at batch 32 x 128
// tokens (forward x W^T, backward dy W and dy^T x) and one attention head's
// Q K^T and P V, as `linear` and `attention` call them. Median of >= 5 runs
// after a warm-up, GFLOP/s = 2 m n k / time.
//
//   cpu_gemm_bench [--threads N] [--reps N]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/parse_number.h"
#include "core/thread_pool.h"
#include "kernels/cpu/isa/cpu_kernels.h"

#if TANDEM_BENCH_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif

namespace {

using namespace tandem;
using namespace tandem::kernels;

struct Shape {
  const char* what;
  bool ta, tb;
  int64_t m, n, k;
};

template <class F>
double median_ms(F&& f, int reps) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 7;
  for (int i = 1; i < argc; i += 2) {
    const std::string option = argv[i];
    int* target = option == "--threads" ? &threads : option == "--reps" ? &reps : nullptr;
    const std::optional<int64_t> v = i + 1 < argc ? tandem::parse_int64(argv[i + 1]) : std::nullopt;
    if (target == nullptr || !v || *v < 1 || *v > 1024) {
      fmt::print(stderr, "cpu_gemm_bench: {}: usage: cpu_gemm_bench [--threads 1..1024] [--reps 1..1024]\n",
                 target == nullptr ? "unknown option " + option
                                   : fmt::format("{} needs a value from 1 to 1024, got '{}'", option,
                                                 i + 1 < argc ? argv[i + 1] : ""));
      return 2;
    }
    *target = static_cast<int>(*v);
  }
  set_intra_op_threads(threads);
#if TANDEM_BENCH_OPENBLAS
  openblas_set_num_threads(threads);
#endif
  const int64_t T = 32 * 128, D = 128, F = 256, S = 128, Dh = 32;
  const Shape shapes[] = {
      {"qkv proj fwd   x W^T", false, true, T, 3 * D, D},  {"qkv proj dx    dy W", false, false, T, D, 3 * D},
      {"qkv proj dW    dy^T x", true, false, 3 * D, D, T}, {"ffn1 fwd       x W^T", false, true, T, F, D},
      {"ffn2 fwd       x W^T", false, true, T, D, F},       {"ffn2 dW        dy^T x", true, false, D, F, T},
      {"attn scores    Q K^T", false, true, S, S, Dh},      {"attn output    P V", false, false, S, Dh, S},
  };
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> u(-1, 1);
  fmt::print("# f32 GEMM, {} thread(s), median of {} runs; GFLOP/s (time in us)\n", threads, reps);
  fmt::print("{:<24} {:>16}", "shape (m x n x k)", "");
  std::vector<const CpuKernels*> levels;
  for (CpuIsa isa : {CpuIsa::Baseline, CpuIsa::Avx2, CpuIsa::Avx512})
    if (const CpuKernels* k = cpu_kernels_for(isa)) {
      levels.push_back(k);
      fmt::print(" {:>20}", fmt::format("eigen {}", cpu_isa_name(isa)));
    }
#if TANDEM_BENCH_OPENBLAS
  fmt::print(" {:>20}", "openblas");
#endif
  fmt::print("\n");
  for (const Shape& s : shapes) {
    std::vector<float> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.k * s.n)),
        c(static_cast<size_t>(s.m * s.n));
    for (auto& x : a) x = u(gen);
    for (auto& x : b) x = u(gen);
    const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    const double flops = 2.0 * static_cast<double>(s.m * s.n * s.k);
    fmt::print("{:<24} {:>16}", s.what, fmt::format("{}x{}x{}", s.m, s.n, s.k));
    auto cell = [&](double ms) { fmt::print(" {:>20}", fmt::format("{:.1f} ({:.0f})", flops / ms / 1e6, ms * 1e3)); };
    for (const CpuKernels* k : levels)
      cell(median_ms([&] { k->gemm(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), s.n); },
                     reps));
#if TANDEM_BENCH_OPENBLAS
    cell(median_ms(
        [&] {
          cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans,
                      static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k), 1.0f, a.data(),
                      static_cast<int>(lda), b.data(), static_cast<int>(ldb), 0.0f, c.data(), static_cast<int>(s.n));
        },
        reps));
#endif
    fmt::print("\n");
  }
  return 0;
}
