// How far a 16-bit training step's parameter gradients are from exact ones, and what
// TANDEM_LINEAR_GRADIENTS=master (kernels/linear_gradients.h) changes in that.
//
// For each model shape (the configs' model sections, bench/model_shapes.h, with a CPU batch), one batch of
// random ids with padding and random labels goes through the TextClassifier's forward,
// cross entropy and backward in f64 compute (the reference: the same f32 master
// parameters, every activation and sum in f64), then in bf16 and f16 with the linears'
// gradients through casts (`cast`, PyTorch autocast's numerics: dw and db rounded to 16
// bits, then converted) and straight to the masters (`master`: one f32 rounding). Dropout
// is on: its masks depend on the positions only, so every run drops the same elements.
//
// Per run and parameter group (the linears' weights; the biases their backward sums;
// the rest: embeddings, layer norms, the biases the encoder's row ops sum), the relative
// error of each parameter's gradient, ||g - g_f64|| / ||g_f64|| (L2 over the tensor):
// the median and the largest over the group's tensors. The 16-bit forward's own roundings
// (activations, attention probabilities) are in every 16-bit run's error: `master` takes
// away only the last rounding of the gradients it forms, so the table says how much of a
// step's gradient error that rounding is. CPU only (f64 compute); the kernels' sums there
// are the GPU's to their summation order.
//
//   gradient_precision_bench [--config demo|small|optimized|imdb|all] [--batch N] [--seed S]
// (all: demo, small and optimized; a batch of 1024 tokens unless --batch)
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "bench/model_shapes.h"
#include "core/random.h"
#include "kernels/bias_gradient.h"
#include "kernels/cross_entropy.h"
#include "kernels/elementwise.h"
#include "kernels/linear_gradients.h"
#include "nn/transformer.h"

namespace tandem {
namespace {

// Tokens of a batch by default: a CPU run of the three shapes in about 12 s.
constexpr int64_t kTokens = 1024;

using Gradients = std::map<std::string, std::vector<double>>;

// One forward + backward of `model` on the batch in `compute`, with `where`'s linear gradients.
Gradients gradients(const nn::TextClassifier& model, const Tensor& ids, const Tensor& mask, const Tensor& labels,
                    DType compute, kernels::LinearGradients where) {
  kernels::set_linear_gradients_for_testing(where);
  nn::ForwardContext ctx;
  ctx.compute_dtype = compute;
  ctx.seed = 11;
  ctx.step = 1;
  Tensor logits = model.forward(ids, mask, ctx);
  kernels::cross_entropy(kernels::cast(logits, DType::F32), labels).backward();
  kernels::set_linear_gradients_for_testing(std::nullopt);
  Gradients g;
  for (const auto& [name, p] : model.named_parameters()) {
    g[name] = p.grad().to_double_vector();
    Tensor mutable_p = p;
    mutable_p.set_grad(Tensor());
  }
  return g;
}

double relative_error(const std::vector<double>& g, const std::vector<double>& exact) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < g.size(); ++i) {
    num += (g[i] - exact[i]) * (g[i] - exact[i]);
    den += exact[i] * exact[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Which group a parameter's gradient is in: out_proj's, linear1's and linear2's biases are summed by the
// encoder's row ops under TANDEM_BIAS_GRADIENT=row (`other`), by their linears under gemm.
const char* group_of(const std::string& name) {
  if (name.find("norm") != std::string::npos || name.starts_with("embed")) return "other";
  if (name.ends_with("weight")) return "linear weights";
  if (name.ends_with("in_proj_bias") || name == "head.bias" || kernels::bias_gradient() == kernels::BiasGradient::Gemm)
    return "linear-summed biases";
  return "other";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void run(const bench::ModelShape& s, int64_t batch, uint64_t seed) {
  nn::TextClassifier model(bench::classifier_config(s), seed);
  model.train(true);
  Tensor u = Tensor::empty({batch, s.seq});
  fill_uniform(u, seed + 1, 0, 3, static_cast<double>(s.vocab - 1));
  const Tensor ids = u.to(DType::I64);
  Tensor mask = Tensor::full({batch, s.seq}, 1.0, DType::U8);
  // The second half of every other row is padding.
  for (int64_t b = 1; b < batch; b += 2)
    mask.narrow(b, 1).reshape({s.seq}).view_range(s.seq / 2, {s.seq - s.seq / 2}).fill_(0);
  Tensor l = Tensor::empty({batch});
  fill_uniform(l, seed + 2, 0, 0, 3.999);
  const Tensor labels = l.to(DType::I64);

  const Gradients exact = gradients(model, ids, mask, labels, DType::F64, kernels::LinearGradients::Cast);
  for (DType t : {DType::BF16, DType::F16}) {
    for (kernels::LinearGradients where : {kernels::LinearGradients::Cast, kernels::LinearGradients::Master}) {
      const Gradients g = gradients(model, ids, mask, labels, t, where);
      std::map<std::string, std::vector<double>> errors;
      for (const auto& [name, e] : exact) errors[group_of(name)].push_back(relative_error(g.at(name), e));
      for (const char* group : {"linear weights", "linear-summed biases", "other"}) {
        const std::vector<double>& v = errors[group];
        fmt::print("{:<10} {:>5} {:<5} {:<7} {:<21} {:>7} {:>12.3e} {:>12.3e}\n", s.name, batch * s.seq,
                   dtype_name(t), kernels::linear_gradients_name(where), group, v.size(), median(v),
                   *std::max_element(v.begin(), v.end()));
      }
    }
  }
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  using namespace tandem;
  CLI::App app{"16-bit gradients against f64 ones: casts against master gradients"};
  std::string config = "all";
  int64_t batch = 0;
  uint64_t seed = 1;
  app.add_option("--config", config, "demo, small, optimized, imdb or all (the first three)")
      ->check(CLI::IsMember({"demo", "small", "optimized", "imdb", "all"}));
  app.add_option("--batch", batch, "override the batch")->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  app.add_option("--seed", seed, "parameters, ids and labels");
  CLI11_PARSE(app, argc, argv);
  try {
    fmt::print("# relative L2 error of each parameter's gradient against f64 compute, by group: median and max\n");
    fmt::print("# TANDEM_BIAS_GRADIENT={} (the biases the encoder's row ops sum are in `other` under row)\n",
               kernels::bias_gradient_name(kernels::bias_gradient()));
    fmt::print("{:<10} {:>5} {:<5} {:<7} {:<21} {:>7} {:>12} {:>12}\n", "config", "tok", "dtype", "grads", "group",
               "tensors", "median", "max");
    for (const auto& s : bench::kModelShapes)
      if ((config == "all" && std::string(s.name) != "imdb") || config == s.name)
        run(s, batch > 0 ? batch : std::max<int64_t>(1, kTokens / s.seq), seed);
  } catch (const std::exception& e) {
    fmt::print(stderr, "gradient_precision_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
