// Where a 16-bit forward's linear parameter gradients become f32
// (TANDEM_LINEAR_GRADIENTS, kernels/linear_gradients.h): the switch's parsing;
// linear with master parameters (kernels::LinearParameter) against linear with
// casts of them, whose gradients come back through the casts' backward: the
// same output and input gradient bit for bit, and weight and bias gradients
// that are the same sums rounded once to f32 (on the CPU, rounding them to the
// compute dtype gives the cast path's bits) and closer to f64 sums of the same
// terms, and finite past f16's range where fp16's would be inf; the
// classifier under `master` against `cast` (each and batched casts; the
// encoder's biases summed by its row ops or by its linears), with one
// CastBackward fewer per such parameter and the gradients ready at the same
// places in the backward (what DDP's buckets see). On a GPU: the same
// comparisons, to the GEMM's summation order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/op_scope.h"
#include "core/tensor.h"
#include "kernels/bias_gradient.h"
#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "kernels/linear_gradients.h"
#include "kernels/parameter_casts.h"
#include "kernels/reduce.h"
#include "nn/parameter_casts.h"
#include "nn/transformer.h"
#include "tests/nn/small_classifier.h"
#include "tests/testing/errors.h"
#include "tests/testing/forced_switch.h"
#include "tests/testing/gradcheck.h"
#include "tests/testing/require_gpu.h"

namespace tandem::nn {
namespace {

using kernels::BiasGradient;
using kernels::LinearParameter;
using kernels::ParameterCastMode;
using kernels::LinearGradients;
using testing::ForcedSwitch;
using testing::random_tensor;

TEST(LinearGradientsSwitch, IsCastUnlessSetAndNamesTheVariableAndValueOnABadValue) {
  EXPECT_EQ(kernels::parse_linear_gradients(nullptr), LinearGradients::Cast);
  EXPECT_EQ(kernels::parse_linear_gradients(""), LinearGradients::Cast);
  EXPECT_EQ(kernels::parse_linear_gradients("cast"), LinearGradients::Cast);
  EXPECT_EQ(kernels::parse_linear_gradients("master"), LinearGradients::Master);
  EXPECT_TRUE(testing::rejects_naming_variable_and_value(kernels::parse_linear_gradients, "TANDEM_LINEAR_GRADIENTS",
                                                         "f32"));
  EXPECT_STREQ(kernels::linear_gradients_name(LinearGradients::Master), "master");
}

// One linear's forward and backward, with the weight's and bias's gradients through casts of their f32
// masters (master_parameters false) or straight to them: y, dx, and the masters' gradients.
struct LinearRun {
  std::vector<double> y, dx, dw, db;
};

enum class Bias { Here, Deferred };

LinearRun run_linear(DType t, Device device, bool master_parameters, Bias bias) {
  const int64_t rows = 37, in = 24, out = 20;  // rows: long enough for the sums to round
  Tensor x = random_tensor({rows, in}, 1, t, device).set_requires_grad(true);
  Tensor w = random_tensor({out, in}, 2, DType::F32, device).set_requires_grad(true);
  Tensor b = random_tensor({out}, 3, DType::F32, device).set_requires_grad(true);
  const Tensor dy = random_tensor({rows, out}, 4, t, device);
  LinearParameter weight = kernels::cast(w, t), bias_values = kernels::cast(b, t);
  if (master_parameters) {
    const NoGradGuard no_history;
    weight = LinearParameter(kernels::cast(w, t), w);
    bias_values = LinearParameter(kernels::cast(b, t), b);
  }
  Tensor y = bias == Bias::Here ? kernels::linear(x, weight, bias_values)
                                : kernels::linear_deferred_bias(x, weight, bias_values);
  y.backward(dy);
  EXPECT_EQ(w.grad().dtype(), DType::F32);
  EXPECT_EQ(b.grad().dtype(), DType::F32);
  return {y.to_double_vector(), x.grad().to_double_vector(), w.grad().to_double_vector(),
          b.grad().to_double_vector()};
}

// Each value rounded to t, as a double.
std::vector<double> rounded_to(const std::vector<double>& v, DType t) {
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, DType::F64).to(t).to_double_vector();
}

// dw[o, i] = sum_r dy[r, o] x[r, i] and db[o] = sum_r dy[r, o] in f64, of the same inputs as run_linear's.
struct ExactGradients {
  std::vector<double> dw, db;
};

ExactGradients gradients_in_f64(DType t) {
  const int64_t rows = 37, in = 24, out = 20;
  const std::vector<double> x = random_tensor({rows, in}, 1, t).to_double_vector();
  const std::vector<double> dy = random_tensor({rows, out}, 4, t).to_double_vector();
  ExactGradients g{std::vector<double>(static_cast<size_t>(out * in), 0.0),
                   std::vector<double>(static_cast<size_t>(out), 0.0)};
  for (int64_t o = 0; o < out; ++o)
    for (int64_t r = 0; r < rows; ++r) {
      const double d = dy[static_cast<size_t>(r * out + o)];
      g.db[static_cast<size_t>(o)] += d;
      for (int64_t i = 0; i < in; ++i) g.dw[static_cast<size_t>(o * in + i)] += d * x[static_cast<size_t>(r * in + i)];
    }
  return g;
}

double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

TEST(LinearMasterParameters, GiveTheCastPathsValuesAndTheirGradientsBeforeTheRounding) {
  for (DType t : {DType::BF16, DType::F16}) {
    for (Bias bias : {Bias::Here, Bias::Deferred}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (bias == Bias::Here ? "" : ", deferred bias"));
      const LinearRun cast = run_linear(t, Device::cpu(), false, bias);
      const LinearRun master = run_linear(t, Device::cpu(), true, bias);
      EXPECT_EQ(master.y, cast.y);
      EXPECT_EQ(master.dx, cast.dx);
      const ExactGradients exact = gradients_in_f64(t);
      for (const auto& [what, m, c, e] : {std::tuple{"dw", &master.dw, &cast.dw, &exact.dw},
                                          std::tuple{"db", &master.db, &cast.db, &exact.db}}) {
        EXPECT_NE(*m, *c) << what << ": the master's gradient is not rounded to " << dtype_name(t);
        EXPECT_EQ(rounded_to(*m, t), *c) << what << ": one sum; rounded to the compute dtype, the cast path's bits";
        EXPECT_LT(max_abs_difference(*m, *e), max_abs_difference(*c, *e) / 16)
            << what << ": an f32 rounding of the sum, not a 16-bit one";
      }
    }
  }
}

TEST(LinearMasterParameters, InF64GiveTheCastPathsF32GradientsBitForBit) {
  // An f64 forward of f32 masters (the gradient checks' precision): one f64 sum each, rounded to f32 by
  // the backward's store or by the cast's backward, the same rounding.
  const LinearRun cast = run_linear(DType::F64, Device::cpu(), false, Bias::Here);
  const LinearRun master = run_linear(DType::F64, Device::cpu(), true, Bias::Here);
  EXPECT_EQ(master.y, cast.y);
  EXPECT_EQ(master.dx, cast.dx);
  EXPECT_EQ(master.dw, cast.dw);
  EXPECT_EQ(master.db, cast.db);
}

TEST(LinearMasterParameters, KeepAWeightGradientBeyondF16sRangeFinite) {
  // What fp16 loss scaling sees: 37 products of 64 x 64 sum to 151552, past f16's 65504. The cast path's
  // dw overflows to inf in f16 (the scaler would skip the step); the master's f32 dw holds the sum.
  const int64_t rows = 37, in = 2, out = 3;
  const Tensor x = Tensor::full({rows, in}, 64.0, DType::F16), dy = Tensor::full({rows, out}, 64.0, DType::F16);
  auto dw = [&](bool master_weight) {
    Tensor w = Tensor::zeros({out, in}).set_requires_grad(true);
    LinearParameter weight = kernels::cast(w, DType::F16);
    if (master_weight) {
      const NoGradGuard no_history;
      weight = LinearParameter(kernels::cast(w, DType::F16), w);
    }
    kernels::linear(x, weight).backward(dy);
    return w.grad().to_double_vector();
  };
  for (double v : dw(false)) EXPECT_TRUE(std::isinf(v)) << v;
  for (double v : dw(true)) EXPECT_EQ(v, 151552.0);
}

TEST(LinearMasterParameters, RefuseValuesWithHistoryAMismatchedMasterOrA16BitMaster) {
  Tensor x = random_tensor({3, 4}, 1, DType::BF16);
  Tensor w = random_tensor({5, 4}, 2, DType::F32).set_requires_grad(true);
  Tensor b = random_tensor({5}, 3, DType::F32).set_requires_grad(true);
  Tensor values, bias_values;
  {
    const NoGradGuard no_history;
    values = kernels::cast(w, DType::BF16);
    bias_values = kernels::cast(b, DType::BF16);
  }
  const Tensor w_with_history = kernels::cast(w, DType::BF16), b_with_history = kernels::cast(b, DType::BF16);
  EXPECT_TRUE(testing::throws_error_containing([&] { kernels::linear(x, LinearParameter(w_with_history, w)); },
                                               "weight values"));
  EXPECT_TRUE(testing::throws_error_containing(
      [&] { kernels::linear(x, values, LinearParameter(b_with_history, b)); }, "bias values"));
  const Tensor other_shape = Tensor::zeros({4, 5}).set_requires_grad(true);
  EXPECT_TRUE(testing::throws_error_containing([&] { kernels::linear(x, LinearParameter(values, other_shape)); },
                                               "must have the shape and device of its values"));
  const Tensor half_master = Tensor::zeros({5}, DType::F16).set_requires_grad(true);
  EXPECT_TRUE(testing::throws_error_containing(
      [&] { kernels::linear(x, values, LinearParameter(bias_values, half_master)); }, "must be f32"));
}

TEST(LinearMasterParameters, OnTheGpuMatchTheCastPathToTheGemmsSummationOrder) {
  TANDEM_REQUIRE_GPU();
  for (DType t : {DType::BF16, DType::F16}) {
    for (Bias bias : {Bias::Here, Bias::Deferred}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (bias == Bias::Here ? "" : ", deferred bias"));
      const LinearRun cast = run_linear(t, Device::cuda(0), false, bias);
      const LinearRun master = run_linear(t, Device::cuda(0), true, bias);
      EXPECT_EQ(master.y, cast.y);
      EXPECT_EQ(master.dx, cast.dx);
      // cuBLAS may sum in another order for an f32 output than for a 16-bit one (and BGRADB's db with
      // it): each master gradient within an f32 rounding of the exact sum, far inside the cast path's
      // 16-bit one.
      const ExactGradients exact = gradients_in_f64(t);
      EXPECT_LT(max_abs_difference(master.dw, exact.dw), max_abs_difference(cast.dw, exact.dw) / 16) << "dw";
      EXPECT_LT(max_abs_difference(master.db, exact.db), max_abs_difference(cast.db, exact.db) / 16) << "db";
    }
  }
}

struct ClassifierRun {
  std::vector<double> logits;
  std::map<std::string, std::vector<double>> grads;
  std::vector<std::string> ready;  // parameter names in the order their gradients became complete
  std::map<std::string, int> backward_ops;
};

// Counts the backward's outermost op scopes by name.
class BackwardOpCounter final : public OpObserver {
 public:
  void begin(std::string_view name, bool backward) override {
    if (backward) ++counts[std::string(name)];
  }
  void end() noexcept override {}
  std::map<std::string, int> counts;
};

// A training-mode forward (dropout, padding) and backward of `model` in `compute`, with `where`'s
// linear gradients.
ClassifierRun run_classifier(const TextClassifier& model, DType compute, Device device, LinearGradients where) {
  const ForcedSwitch forced(kernels::set_linear_gradients_for_testing, where);
  ForwardContext ctx;
  ctx.compute_dtype = compute;
  ctx.seed = 7;
  ctx.step = 3;
  const testing::Batch batch = testing::padded_batch(device);
  ClassifierRun out;
  std::vector<std::pair<Tensor, uint64_t>> hooks;
  for (const auto& [name, p] : model.named_parameters()) {
    Tensor param = p;
    hooks.emplace_back(param, param.register_post_accumulate_grad_hook([&out, name = name](Tensor&) {
      out.ready.push_back(name);
    }));
  }
  Tensor logits = model.forward(batch.ids, batch.mask, ctx);
  const Tensor r = random_tensor({2, 3}, 5, DType::F32, device);
  Tensor loss = kernels::sum(kernels::mul(kernels::cast(logits, DType::F32), r));
  BackwardOpCounter counter;
  set_op_observer(&counter);
  loss.backward();
  set_op_observer(nullptr);
  out.backward_ops = counter.counts;
  for (auto& [param, handle] : hooks) param.remove_post_accumulate_grad_hook(handle);
  out.logits = logits.to_double_vector();
  for (const auto& [name, p] : model.named_parameters()) {
    out.grads[name] = p.grad().to_double_vector();
    Tensor mutable_p = p;
    mutable_p.set_grad(Tensor());
  }
  return out;
}

// The parameters whose gradients the linears' own backward forms, so that master mode forms them in
// f32: every linear's weight, the attention in-projections' and the head's biases, and with the
// encoder's other biases summed by their linears (TANDEM_BIAS_GRADIENT=gemm), every linear bias.
bool formed_by_a_linear(const std::string& name, BiasGradient biases) {
  const bool weight = name.ends_with("in_proj_weight") || name.ends_with(".weight");
  const bool layer_norm = name.find("norm") != std::string::npos, embedding = name.starts_with("embed");
  if (layer_norm || embedding) return false;
  if (weight || name.ends_with("in_proj_bias") || name == "head.bias") return true;
  return biases == BiasGradient::Gemm;  // out_proj's, linear1's and linear2's biases
}

// The module a parameter belongs to: its name without the last component.
std::string owner(const std::string& name) { return name.substr(0, name.rfind('.')); }

// Master against cast on `device`: `same_bits` (the CPU) asks that a master gradient rounded to the
// compute dtype be the cast path's bits; a GPU's GEMM may sum in another order for an f32 output, so
// there within a 16-bit rounding.
void expect_master_classifier_is_the_cast_one(Device device, bool same_bits) {
  for (BiasGradient biases : {BiasGradient::Row, BiasGradient::Gemm}) {
    const ForcedSwitch forced_biases(kernels::set_bias_gradient_for_testing, biases);
    for (ParameterCastMode casts : {ParameterCastMode::Each, ParameterCastMode::Batched}) {
      const ForcedSwitch forced_casts(kernels::set_parameter_casts_for_testing, casts);
      for (DType compute : {DType::BF16, DType::F16}) {
        SCOPED_TRACE(std::string(dtype_name(compute)) + ", " + kernels::parameter_casts_name(casts) + " casts, " +
                     kernels::bias_gradient_name(biases) + " biases on " + device.str());
        TextClassifier model(testing::small_classifier(), 21);
        model.to(device);
        model.train(true);
        const ClassifierRun cast = run_classifier(model, compute, device, LinearGradients::Cast);
        const ClassifierRun master = run_classifier(model, compute, device, LinearGradients::Master);
        EXPECT_EQ(master.logits, cast.logits);
        int formed = 0;
        for (const auto& [name, g] : cast.grads) {
          if (!formed_by_a_linear(name, biases)) {
            EXPECT_EQ(master.grads.at(name), g) << name << ": not formed by a linear, the same bits";
            continue;
          }
          ++formed;
          const std::vector<double> rounded = rounded_to(master.grads.at(name), compute);
          // A weight's gradient sums products, which 16 bits do not hold (a bias's may be exact: the
          // head's sums the batch's two rows).
          if (name.ends_with("weight"))
            EXPECT_NE(master.grads.at(name), g) << name << ": the master's gradient is not rounded to the compute dtype";
          if (same_bits) {
            EXPECT_EQ(rounded, g) << name;
          } else {
            for (size_t i = 0; i < g.size(); ++i)
              EXPECT_LE(std::abs(rounded[i] - g[i]), std::abs(g[i]) * (compute == DType::BF16 ? 0x1p-7 : 0x1p-10))
                  << name << "[" << i << "]";
          }
        }
        // Per layer in_proj, out_proj, linear1 and linear2's weights and in_proj's bias, the head's two;
        // with the row ops' biases summed by the linears, their three a layer.
        EXPECT_EQ(formed, 2 * 5 + 2 + (biases == BiasGradient::Gemm ? 2 * 3 : 0));
        EXPECT_EQ(cast.backward_ops.at("CastBackward") - master.backward_ops.at("CastBackward"), formed)
            << "one cast backward fewer per parameter";
        // Ready at the same places: each gradient where its linear's backward ran, next to (at most
        // swapped with) the other gradients of its module.
        ASSERT_EQ(master.ready.size(), cast.ready.size());
        for (size_t i = 0; i < cast.ready.size(); ++i)
          EXPECT_EQ(owner(master.ready[i]), owner(cast.ready[i])) << "gradient " << i << " ready";
      }
    }
  }
}

TEST(LinearGradientsMaster, ClassifierGivesTheCastPathsValuesAndItsLinearsGradientsBeforeTheRounding) {
  expect_master_classifier_is_the_cast_one(Device::cpu(), /*same_bits=*/true);
}

TEST(LinearGradientsMaster, OnTheGpuClassifierGivesTheCastPathsValuesAndItsLinearsGradients) {
  TANDEM_REQUIRE_GPU();
  expect_master_classifier_is_the_cast_one(Device::cuda(0), /*same_bits=*/false);
}

TEST(LinearGradientsMaster, ChangesNothingInAnF32Forward) {
  // No casts in f32: the linears multiply by the master parameters themselves.
  TextClassifier model(testing::small_classifier(), 21);
  model.train(true);
  const ClassifierRun cast = run_classifier(model, DType::F32, Device::cpu(), LinearGradients::Cast);
  const ClassifierRun master = run_classifier(model, DType::F32, Device::cpu(), LinearGradients::Master);
  EXPECT_EQ(master.logits, cast.logits);
  EXPECT_EQ(master.grads, cast.grads);
  EXPECT_EQ(master.ready, cast.ready);
}

}  // namespace
}  // namespace tandem::nn
