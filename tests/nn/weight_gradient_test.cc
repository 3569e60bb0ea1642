// Where a 16-bit forward's weight gradients become f32 (TANDEM_WEIGHT_GRADIENT,
// kernels/weight_gradient.h): the switch's parsing; linear with a master
// weight (kernels::LinearWeight) against linear with a cast of it, whose
// gradient comes back through the cast's backward: the same output, input and
// bias gradients bit for bit, and a weight gradient that is the same sum,
// rounded once to f32 (on the CPU, rounding it to the compute dtype gives the
// cast path's bits), and closer to an f64 sum of the same products; the
// classifier under `master` against `cast` (every parameter casting, each and
// batched), with one CastBackward fewer per weight and the gradients ready at
// the same places in the backward (what DDP's buckets see). On a GPU: the
// same comparisons, to the GEMM's summation order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/op_scope.h"
#include "core/tensor.h"
#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "kernels/parameter_casts.h"
#include "kernels/reduce.h"
#include "kernels/weight_gradient.h"
#include "nn/parameter_casts.h"
#include "nn/transformer.h"
#include "tests/testing/errors.h"
#include "tests/testing/forced_switch.h"
#include "tests/testing/gradcheck.h"
#include "tests/testing/require_gpu.h"

namespace tandem::nn {
namespace {

using kernels::LinearWeight;
using kernels::ParameterCastMode;
using kernels::WeightGradient;
using testing::ForcedSwitch;
using testing::random_tensor;

TEST(WeightGradientSwitch, IsCastUnlessSetAndNamesTheVariableAndValueOnABadValue) {
  EXPECT_EQ(kernels::parse_weight_gradient(nullptr), WeightGradient::Cast);
  EXPECT_EQ(kernels::parse_weight_gradient(""), WeightGradient::Cast);
  EXPECT_EQ(kernels::parse_weight_gradient("cast"), WeightGradient::Cast);
  EXPECT_EQ(kernels::parse_weight_gradient("master"), WeightGradient::Master);
  EXPECT_TRUE(testing::rejects_naming_variable_and_value(kernels::parse_weight_gradient, "TANDEM_WEIGHT_GRADIENT",
                                                         "f32"));
  EXPECT_STREQ(kernels::weight_gradient_name(WeightGradient::Master), "master");
}

// One linear's forward and backward, with the weight's gradient through a cast of the master
// (master_weight false) or straight to it: y, dx, db, and the master's gradient.
struct LinearRun {
  std::vector<double> y, dx, db, dw;
};

enum class Bias { Here, Deferred };

LinearRun run_linear(DType t, Device device, bool master_weight, Bias bias) {
  const int64_t rows = 37, in = 24, out = 20;  // rows: long enough for dw's sum to round
  Tensor x = random_tensor({rows, in}, 1, t, device).set_requires_grad(true);
  Tensor w = random_tensor({out, in}, 2, DType::F32, device).set_requires_grad(true);
  Tensor b = random_tensor({out}, 3, t, device).set_requires_grad(true);
  const Tensor dy = random_tensor({rows, out}, 4, t, device);
  LinearWeight weight = kernels::cast(w, t);
  if (master_weight) {
    const NoGradGuard no_history;
    weight = LinearWeight(kernels::cast(w, t), w);
  }
  Tensor y = bias == Bias::Here ? kernels::linear(x, weight, b) : kernels::linear_deferred_bias(x, weight, b);
  y.backward(dy);
  EXPECT_EQ(w.grad().dtype(), DType::F32);
  return {y.to_double_vector(), x.grad().to_double_vector(), b.grad().to_double_vector(),
          w.grad().to_double_vector()};
}

// Each value rounded to t, as a double.
std::vector<double> rounded_to(const std::vector<double>& v, DType t) {
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, DType::F64).to(t).to_double_vector();
}

// dw[o, i] = sum_r dy[r, o] x[r, i] in f64 of the same inputs as run_linear's.
std::vector<double> dw_in_f64(DType t) {
  const int64_t rows = 37, in = 24, out = 20;
  const std::vector<double> x = random_tensor({rows, in}, 1, t).to_double_vector();
  const std::vector<double> dy = random_tensor({rows, out}, 4, t).to_double_vector();
  std::vector<double> dw(static_cast<size_t>(out * in), 0.0);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i)
      for (int64_t r = 0; r < rows; ++r)
        dw[static_cast<size_t>(o * in + i)] += dy[static_cast<size_t>(r * out + o)] * x[static_cast<size_t>(r * in + i)];
  return dw;
}

double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

TEST(LinearMasterWeight, GivesTheCastPathsValuesAndItsWeightGradientBeforeTheRounding) {
  for (DType t : {DType::BF16, DType::F16}) {
    for (Bias bias : {Bias::Here, Bias::Deferred}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (bias == Bias::Here ? "" : ", deferred bias"));
      const LinearRun cast = run_linear(t, Device::cpu(), false, bias);
      const LinearRun master = run_linear(t, Device::cpu(), true, bias);
      EXPECT_EQ(master.y, cast.y);
      EXPECT_EQ(master.dx, cast.dx);
      EXPECT_EQ(master.db, cast.db);
      EXPECT_NE(master.dw, cast.dw) << "the master's gradient is not rounded to " << dtype_name(t);
      EXPECT_EQ(rounded_to(master.dw, t), cast.dw) << "one sum: rounded to the compute dtype, the cast path's bits";
      const std::vector<double> exact = dw_in_f64(t);
      EXPECT_LT(max_abs_difference(master.dw, exact), max_abs_difference(cast.dw, exact) / 16)
          << "an f32 rounding of the sum, not a 16-bit one";
    }
  }
}

TEST(LinearMasterWeight, InF64GivesTheCastPathsF32WeightGradientBitForBit) {
  // An f64 forward of f32 master weights (the gradient checks' precision): one f64 sum, rounded to
  // f32 by the GEMM's store or by the cast's backward, the same rounding.
  const LinearRun cast = run_linear(DType::F64, Device::cpu(), false, Bias::Here);
  const LinearRun master = run_linear(DType::F64, Device::cpu(), true, Bias::Here);
  EXPECT_EQ(master.y, cast.y);
  EXPECT_EQ(master.dx, cast.dx);
  EXPECT_EQ(master.dw, cast.dw);
}

TEST(LinearMasterWeight, RefusesValuesWithHistoryAMismatchedMasterOrA16BitMaster) {
  Tensor x = random_tensor({3, 4}, 1, DType::BF16);
  Tensor w = random_tensor({5, 4}, 2, DType::F32).set_requires_grad(true);
  const Tensor with_history = kernels::cast(w, DType::BF16);
  EXPECT_TRUE(testing::throws_error_containing([&] { kernels::linear(x, LinearWeight(with_history, w)); },
                                               "must have no autograd history"));
  Tensor values;
  {
    const NoGradGuard no_history;
    values = kernels::cast(w, DType::BF16);
  }
  const Tensor other_shape = Tensor::zeros({4, 5}).set_requires_grad(true);
  EXPECT_TRUE(testing::throws_error_containing([&] { kernels::linear(x, LinearWeight(values, other_shape)); },
                                               "must have the shape and device of the weight values"));
  const Tensor half_master = Tensor::zeros({5, 4}, DType::F16).set_requires_grad(true);
  EXPECT_TRUE(testing::throws_error_containing([&] { kernels::linear(x, LinearWeight(values, half_master)); },
                                               "must be f32"));
}

TEST(LinearMasterWeight, OnTheGpuMatchesTheCastPathToTheGemmsSummationOrder) {
  TANDEM_REQUIRE_GPU();
  for (DType t : {DType::BF16, DType::F16}) {
    for (Bias bias : {Bias::Here, Bias::Deferred}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (bias == Bias::Here ? "" : ", deferred bias"));
      const LinearRun cast = run_linear(t, Device::cuda(0), false, bias);
      const LinearRun master = run_linear(t, Device::cuda(0), true, bias);
      EXPECT_EQ(master.y, cast.y);
      EXPECT_EQ(master.dx, cast.dx);
      // cuBLAS may sum dw in another order for an f32 output than for a 16-bit one, and BGRADB's db
      // with it: the master's dw within an f32 rounding of the exact sum (far inside the cast path's
      // 16-bit one), db within a 16-bit rounding of the cast path's.
      const std::vector<double> exact = dw_in_f64(t);
      EXPECT_LT(max_abs_difference(master.dw, exact), max_abs_difference(cast.dw, exact) / 16);
      double db_size = 0.0;
      for (double v : cast.db) db_size = std::max(db_size, std::abs(v));
      EXPECT_LE(max_abs_difference(master.db, cast.db), db_size * (t == DType::BF16 ? 0x1p-7 : 0x1p-10));
    }
  }
}

TextClassifierConfig small_classifier() {
  TextClassifierConfig c;
  c.vocab_size = 50;
  c.d_model = 32;
  c.n_heads = 4;
  c.num_layers = 2;
  c.dim_feedforward = 64;
  c.max_seq_len = 16;
  c.num_classes = 3;
  c.dropout = 0.1;
  return c;
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
// weight gradients.
ClassifierRun run_classifier(const TextClassifier& model, DType compute, Device device, WeightGradient where) {
  const ForcedSwitch forced(kernels::set_weight_gradient_for_testing, where);
  ForwardContext ctx;
  ctx.compute_dtype = compute;
  ctx.seed = 7;
  ctx.step = 3;
  std::vector<int64_t> ids(18);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 7 + 3) % 50);
  std::vector<double> m(18, 1.0);
  for (int i = 14; i < 18; ++i) m[static_cast<size_t>(i)] = 0.0;
  const Tensor id = Tensor::from_vector(ids, {2, 9}).to(device);
  const Tensor mask = Tensor::from_vector(m, {2, 9}, DType::U8).to(device);
  ClassifierRun out;
  std::vector<std::pair<Tensor, uint64_t>> hooks;
  for (const auto& [name, p] : model.named_parameters()) {
    Tensor param = p;
    hooks.emplace_back(param, param.register_post_accumulate_grad_hook([&out, name = name](Tensor&) {
      out.ready.push_back(name);
    }));
  }
  Tensor logits = model.forward(id, mask, ctx);
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

// The linears' weights: the parameters whose gradients master mode forms in f32.
bool is_linear_weight(const std::string& name) {
  return name.ends_with("in_proj_weight") || name.ends_with("linear1.weight") ||
         name.ends_with("linear2.weight") || name.ends_with("out_proj.weight") || name == "head.weight";
}

// The module a parameter belongs to: its name without the last component.
std::string owner(const std::string& name) { return name.substr(0, name.rfind('.')); }

// Master against cast on `device`: `same_bits` (the CPU) asks that a master gradient rounded to the
// compute dtype be the cast path's bits; a GPU's GEMM may sum in another order for an f32 output, so
// there within a 16-bit rounding.
void expect_master_classifier_is_the_cast_one(Device device, bool same_bits) {
  for (ParameterCastMode casts : {ParameterCastMode::Each, ParameterCastMode::Batched}) {
    const ForcedSwitch forced_casts(kernels::set_parameter_casts_for_testing, casts);
    for (DType compute : {DType::BF16, DType::F16}) {
      SCOPED_TRACE(std::string(dtype_name(compute)) + ", " + kernels::parameter_casts_name(casts) + " on " +
                   device.str());
      TextClassifier model(small_classifier(), 21);
      model.to(device);
      model.train(true);
      const ClassifierRun cast = run_classifier(model, compute, device, WeightGradient::Cast);
      const ClassifierRun master = run_classifier(model, compute, device, WeightGradient::Master);
      EXPECT_EQ(master.logits, cast.logits);
      int weights = 0;
      for (const auto& [name, g] : cast.grads) {
        if (!is_linear_weight(name)) {
          EXPECT_EQ(master.grads.at(name), g) << name << ": not a linear's weight, the same bits";
          continue;
        }
        ++weights;
        EXPECT_NE(master.grads.at(name), g) << name << ": the master's gradient is not rounded to the compute dtype";
        if (same_bits) {
          EXPECT_EQ(rounded_to(master.grads.at(name), compute), g) << name;
        } else {
          const std::vector<double> rounded = rounded_to(master.grads.at(name), compute);
          for (size_t i = 0; i < g.size(); ++i)
            EXPECT_LE(std::abs(rounded[i] - g[i]), std::abs(g[i]) * (compute == DType::BF16 ? 0x1p-7 : 0x1p-10))
                << name << "[" << i << "]";
        }
      }
      EXPECT_EQ(weights, 2 * 4 + 1) << "per layer in_proj, out_proj, linear1 and linear2; the head";
      EXPECT_EQ(cast.backward_ops.at("CastBackward") - master.backward_ops.at("CastBackward"), weights)
          << "one cast backward fewer per weight";
      // Ready at the same places: each weight's gradient where its linear's backward ran, next to
      // (at most swapped with) the other gradients of its module.
      ASSERT_EQ(master.ready.size(), cast.ready.size());
      for (size_t i = 0; i < cast.ready.size(); ++i)
        EXPECT_EQ(owner(master.ready[i]), owner(cast.ready[i])) << "gradient " << i << " ready";
    }
  }
}

TEST(WeightGradientMaster, ClassifierGivesTheCastPathsValuesAndItsWeightGradientsBeforeTheRounding) {
  expect_master_classifier_is_the_cast_one(Device::cpu(), /*same_bits=*/true);
}

TEST(WeightGradientMaster, OnTheGpuClassifierGivesTheCastPathsValuesAndWeightGradients) {
  TANDEM_REQUIRE_GPU();
  expect_master_classifier_is_the_cast_one(Device::cuda(0), /*same_bits=*/false);
}

TEST(WeightGradientMaster, ChangesNothingInAnF32Forward) {
  // No casts in f32: the linears multiply by the master weights themselves.
  TextClassifier model(small_classifier(), 21);
  model.train(true);
  const ClassifierRun cast = run_classifier(model, DType::F32, Device::cpu(), WeightGradient::Cast);
  const ClassifierRun master = run_classifier(model, DType::F32, Device::cpu(), WeightGradient::Master);
  EXPECT_EQ(master.logits, cast.logits);
  EXPECT_EQ(master.grads, cast.grads);
  EXPECT_EQ(master.ready, cast.ready);
}

}  // namespace
}  // namespace tandem::nn
