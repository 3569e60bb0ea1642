// Throughput of the fused optimizer steps against the bytes they must move.
//
//   optim_bench [--device cpu|cuda] [--params 1e5,1e6,1e7,1e8] [--optim adamw,sgd] [--min-seconds T]
//
// For each parameter count N, the parameters are laid out like a 4-layer
// transformer encoder (12 tensors per layer: qkv, out, two feed-forward
// weights, their biases, two LayerNorms; width d = floor(sqrt(N / 48)), so
// the count is close to N). One step of fused AdamW must read p, g, m, v and
// write p, m, v: 28 bytes per parameter; SGD with momentum reads p, g, buf and
// writes p, buf: 20 bytes. The table gives the median time of one
// optimizer.step() (the whole Tensor-level call: host bookkeeping and every
// launch), the bandwidth that implies, and that bandwidth as a percentage of
// the device's measured copy bandwidth (dst.copy_(src) of 1 GiB: a
// device-to-device cudaMemcpyAsync on CUDA, memcpy on the CPU; read + write
// bytes counted).
// Each case runs 3 warm-up steps, then at least 5 timed steps and at least
// --min-seconds; GPU times come from CUDA events on the current stream.
// bench/pytorch/optim_bench.py prints the same table for torch.optim.AdamW.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/elapsed.h"
#include "core/parse_number.h"
#include "core/random.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "optim/adamw.h"
#include "optim/sgd.h"

namespace tandem::optim {
namespace {

struct Options {
  Device device = Device::cpu();
  std::vector<double> params = {1e5, 1e6, 1e7, 1e8};
  std::vector<std::string> optimizers = {"adamw", "sgd"};
  double min_seconds = 1.0;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    TANDEM_CHECK(i + 1 < argc, "optim_bench: option {} needs a value", a);
    const std::string v = argv[++i];
    if (a == "--device") {
      o.device = parse_device(v);
    } else if (a == "--params") {
      o.params.clear();
      for (const std::string& n : split(v)) {
        const std::optional<double> count = parse_double(n);
        TANDEM_CHECK(count && *count >= 1 && *count <= 1e10,
                     "optim_bench: --params takes parameter counts from 1 to 1e10, got '{}'", n);
        o.params.push_back(*count);
      }
    } else if (a == "--optim") {
      o.optimizers = split(v);
      for (const std::string& n : o.optimizers)
        TANDEM_CHECK(n == "adamw" || n == "sgd", "optim_bench: unknown optimizer '{}' (adamw, sgd)", n);
    } else if (a == "--min-seconds") {
      const std::optional<double> t = parse_double(v);
      TANDEM_CHECK(t && *t >= 0 && *t <= 3600, "optim_bench: --min-seconds must be 0 to 3600, got '{}'", v);
      o.min_seconds = *t;
    } else {
      TANDEM_FAIL("optim_bench: unknown option {} (--device, --params, --optim, --min-seconds)", a);
    }
  }
  // After every option, so that on a machine without a GPU a GPU command line is checked in full.
  TANDEM_CHECK(!o.device.is_cuda() || cuda::available(), "optim_bench: --device {}, but no CUDA device is available",
               o.device.str());
  return o;
}

// Median seconds of f over at least 5 calls and min_seconds, after 3 warm-up calls.
double median_seconds(const Options& o, const std::function<void()>& f) {
  for (int k = 0; k < 3; ++k) f();
  std::vector<double> times;
  double total = 0;
  while (times.size() < 5 || total < o.min_seconds) {
    double t;
    if (o.device.is_cuda()) {
      cuda::Stream s = cuda::current_stream(o.device.index);
      cuda::Event start(true), stop(true);
      start.record(s);
      f();
      stop.record(s);
      stop.synchronize();
      t = start.elapsed_ms(stop) / 1e3;
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      t = seconds_since(t0);
    }
    times.push_back(t);
    total += t;
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

// Read + write bytes per second of a large copy on the device.
double copy_bandwidth(const Options& o) {
  const int64_t n = int64_t{1} << 28;  // 1 GiB of f32: beyond any cache
  Tensor src = Tensor::full({n}, 1.0, DType::F32, o.device);
  Tensor dst = Tensor::empty({n}, DType::F32, o.device);
  const double s = median_seconds(o, [&] { dst.copy_(src); });
  return 2.0 * static_cast<double>(src.nbytes()) / s;
}

// Shapes of a 4-layer encoder with about n parameters.
std::vector<Shape> encoder_shapes(double n) {
  const auto d = static_cast<int64_t>(std::floor(std::sqrt(n / 48.0)));
  std::vector<Shape> shapes;
  for (int layer = 0; layer < 4; ++layer) {
    for (const Shape& s : std::vector<Shape>{{3 * d, d}, {3 * d}, {d, d}, {d}, {d}, {d},
                                             {4 * d, d}, {4 * d}, {d, 4 * d}, {d}, {d}, {d}})
      shapes.push_back(s);
  }
  return shapes;
}

void run(const Options& o) {
  const double ceiling = copy_bandwidth(o);
  fmt::print("device {}: copy bandwidth {:.1f} GB/s (read + write)\n\n", o.device.str(), ceiling / 1e9);
  fmt::print("| optimizer | params | tensors | MB moved/step | median ms | GB/s | % of copy |\n");
  fmt::print("|---|---:|---:|---:|---:|---:|---:|\n");
  for (double target : o.params) {
    std::vector<Tensor> params;
    int64_t count = 0;
    uint64_t seed = 0;
    for (const Shape& s : encoder_shapes(target)) {
      Tensor p = Tensor::empty(s, DType::F32, o.device);
      fill_normal(p, 1, seed++, 0.0, 0.02);
      p.set_requires_grad(true);
      Tensor g = Tensor::empty(s, DType::F32, o.device);
      fill_normal(g, 2, seed++, 0.0, 1e-3);
      p.set_grad(g);
      count += p.numel();
      params.push_back(p);
    }
    for (const std::string& name : o.optimizers) {
      std::unique_ptr<Optimizer> opt;
      double bytes_per_param;
      if (name == "adamw") {
        opt = std::make_unique<AdamW>(params, AdamWOptions{.lr = 1e-4});
        bytes_per_param = 28;
      } else {
        opt = std::make_unique<SGD>(params, SGDOptions{.lr = 1e-4, .momentum = 0.9});
        bytes_per_param = 20;
      }
      const double s = median_seconds(o, [&] { opt->step(); });
      const double bytes = bytes_per_param * static_cast<double>(count);
      fmt::print("| {} | {} | {} | {:.1f} | {:.3f} | {:.1f} | {:.0f}% |\n", name, count, params.size(), bytes / 1e6,
                 s * 1e3, bytes / s / 1e9, 100.0 * bytes / s / ceiling);
    }
  }
}

}  // namespace
}  // namespace tandem::optim

int main(int argc, char** argv) {
  try {
    tandem::optim::run(tandem::optim::parse(argc, argv));
  } catch (const std::exception& e) {
    fmt::print(stderr, "optim_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
