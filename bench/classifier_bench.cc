// Model benchmark: forward, and forward + backward, of the whole
// TextClassifier at the shapes users train (the configs' model sections), on
// the CPU and, when a GPU is present, CUDA, in f32 and bf16 compute.
//
// Reports per configuration: median time of a forward and of a forward +
// backward over a batch, samples/s and tokens/s, and the model FLOP rate from
// the standard count (6 * parameters-in-matmuls * tokens for forward +
// backward, plus attention's 12 * layers * S^2 * d_model per sequence), with
// autograd, allocation and every kernel included: what a training step costs
// before the optimizer and communication. CPU: steady_clock, 1 warm-up, >= 3
// runs (~2 s); CUDA: events after 3 warm-ups, 20 runs.
//
//   classifier_bench [--device cpu|cuda|all] [--config small|optimized|imdb|demo|all] [--batch N]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/elapsed.h"
#include "core/random.h"
#include "core/stream.h"
#include "bench/model_shapes.h"
#include "kernels/cross_entropy.h"
#include "nn/transformer.h"

namespace tandem {
namespace {

using Shape = bench::ModelShape;  // batch: per device; the CPU runs use a smaller batch

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double model_flops(const Shape& s, bool backward) {
  const double matmul_params = static_cast<double>(s.layers) * (4.0 * s.d_model * s.d_model + 2.0 * s.d_model * s.ffn);
  const double tokens = static_cast<double>(s.batch * s.seq);
  const double attn = 4.0 * s.layers * static_cast<double>(s.seq) * s.seq * s.d_model * s.batch;  // QK^T and PV, forward
  const double fwd = 2.0 * matmul_params * tokens + attn;
  return backward ? 3.0 * fwd : fwd;
}

template <class F>
double time_ms(Device device, F&& f) {
  std::vector<double> runs;
  if (device.is_cuda()) {
#if TANDEM_WITH_CUDA
    for (int i = 0; i < 3; ++i) f();
    for (int i = 0; i < 20; ++i) {
      cuda::Event a(true), b(true);
      auto s = cuda::current_stream(device.index);
      a.record(s);
      f();
      b.record(s);
      b.synchronize();
      runs.push_back(a.elapsed_ms(b));
    }
#endif
  } else {
    f();
    auto start = std::chrono::steady_clock::now();
    while (runs.size() < 3 || std::chrono::steady_clock::now() - start < std::chrono::seconds(2)) {
      auto t0 = std::chrono::steady_clock::now();
      f();
      runs.push_back(milliseconds_since(t0));
      if (runs.size() >= 50) break;
    }
  }
  return median(runs);
}

void run(const Shape& s, Device device, DType compute, int64_t batch_override) {
  Shape sh = s;
  if (batch_override > 0) sh.batch = batch_override;
  nn::TextClassifier model(bench::classifier_config(sh), 1);
  model.to(device);
  model.train(true);
  Tensor u = Tensor::empty({sh.batch, sh.seq});
  fill_uniform(u, 3, 0, 3, static_cast<double>(sh.vocab - 1));
  Tensor ids = u.to(DType::I64).to(device);
  Tensor mask = Tensor::full({sh.batch, sh.seq}, 1.0, DType::U8);
  // Realistic padding: the second half of every other row is padding.
  for (int64_t b = 1; b < sh.batch; b += 2) mask.narrow(b, 1).reshape({sh.seq}).view_range(sh.seq / 2, {sh.seq - sh.seq / 2}).fill_(0);
  mask = mask.to(device);
  Tensor labels = Tensor::zeros({sh.batch}, DType::I64, device);
  nn::ForwardContext ctx;
  ctx.compute_dtype = compute;
  const double fwd = time_ms(device, [&] {
    NoGradGuard no_grad;
    model.forward(ids, mask, ctx);
  });
  const double fwd_bwd = time_ms(device, [&] {
    kernels::cross_entropy(model.forward(ids, mask, ctx), labels).backward();
    for (auto& [n, p] : model.named_parameters()) p.set_grad(Tensor());
  });
  const double samples = static_cast<double>(sh.batch);
  fmt::print("{:<10} {:<6} {:<5} {:>5} {:>5} {:>9.2f} {:>11.2f} {:>10.0f} {:>11.0f} {:>9.1f} {:>9.1f}\n", sh.name,
             device.str(), dtype_name(compute), sh.batch, sh.seq, fwd, fwd_bwd, samples / (fwd_bwd / 1e3),
             samples * static_cast<double>(sh.seq) / (fwd_bwd / 1e3), model_flops(sh, false) / (fwd * 1e6),
             model_flops(sh, true) / (fwd_bwd * 1e6));
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  using namespace tandem;
  CLI::App app{"TextClassifier forward/backward benchmark"};
  std::string device = "all", config = "all";
  int64_t batch = 0;
  app.add_option("--device", device, "cpu, cuda or all")->check(CLI::IsMember({"cpu", "cuda", "all"}));
  app.add_option("--config", config, "demo, small, optimized, imdb or all")
      ->check(CLI::IsMember({"demo", "small", "optimized", "imdb", "all"}));
  app.add_option("--batch", batch, "override the per-device batch")->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  CLI11_PARSE(app, argc, argv);
  try {
    std::vector<Device> devices;
    if (device != "cuda") devices.push_back(Device::cpu());
    if (device != "cpu" && cuda::available()) devices.push_back(Device::cuda(0));
    if (device == "cuda" && devices.empty()) {
      fmt::print(stderr, "classifier_bench: --device cuda, but no CUDA device is available\n");
      return 1;
    }
    fmt::print("{:<10} {:<6} {:<5} {:>5} {:>5} {:>9} {:>11} {:>10} {:>11} {:>9} {:>9}\n", "config", "device", "dtype",
               "batch", "seq", "fwd ms", "fwd+bwd ms", "samples/s", "tokens/s", "fwd GF/s", "f+b GF/s");
    for (const Device& d : devices) {
      for (const auto& s : bench::kModelShapes) {
        if (config != "all" && config != s.name) continue;
        // On the CPU, the large configs run with a batch that keeps a run near a second.
        int64_t b = batch > 0 ? batch : (d.is_cpu() && s.seq * s.batch > 4096 ? std::max<int64_t>(1, 4096 / s.seq) : 0);
        for (DType t : {DType::F32, DType::BF16}) run(s, d, t, b);
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "classifier_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
