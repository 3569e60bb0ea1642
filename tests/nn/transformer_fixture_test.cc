// The whole encoder layer and the whole classifier against PyTorch's own
// modules (fixtures from tests/fixtures/make_model_fixtures.py): outputs, loss
// and every parameter gradient, on the CPU in f32 and, where a GPU is present,
// on CUDA in f32 and bf16; and again with the bias gradients formed in the
// linears' backward (TANDEM_BIAS_GRADIENT=gemm).
//
// Tolerances: f32 differs from PyTorch only by summation order: 2e-5 absolute
// + 2e-4 relative. bf16 compute (f32 master weights, f32 softmax/layer-norm
// statistics and loss) keeps ~3 significant digits per op through two layers:
// 3e-2 absolute + 5e-2 relative on values of order 1.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <optional>

#include "core/safetensors.h"
#include "kernels/bias_gradient.h"
#include "kernels/cross_entropy.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"
#include "nn/transformer.h"
#include "tests/testing/gradcheck.h"

namespace tandem::nn {
namespace {

using testing::all_close;

struct Fixture {
  NamedTensors tensors;
  nlohmann::json config;
  const Tensor& at(const std::string& name) const {
    const Tensor* t = tensors.find(name);
    if (!t) throw std::runtime_error("fixture has no tensor " + name);
    return *t;
  }
  NamedTensors with_prefix(const std::string& prefix) const {
    NamedTensors out;
    for (const auto& [n, t] : tensors.tensors)
      if (n.rfind(prefix, 0) == 0) out.tensors.emplace_back(n.substr(prefix.size()), t);
    return out;
  }
};

Fixture load_fixture(const std::string& file) {
  Fixture f;
  f.tensors = load_safetensors(std::string(TANDEM_FIXTURES_DIR) + "/" + file);
  f.config = nlohmann::json::parse(f.tensors.metadata.at("config"));
  return f;
}

struct Tol {
  double atol, rtol;
};

Tol tolerance(DType t) { return t == DType::F32 ? Tol{2e-5, 2e-4} : Tol{3e-2, 5e-2}; }

void check_layer(const std::string& file, Device device, DType compute) {
  Fixture f = load_fixture(file);
  const auto& c = f.config;
  Init init(1);
  TransformerEncoderLayer layer(c["d_model"], c["n_heads"], c["dim_feedforward"], 0.0,
                                parse_activation(c["activation"]), c["norm_first"], init);
  layer.load_state_dict(f.with_prefix("param."));
  layer.to(device);
  ForwardContext ctx;
  ctx.compute_dtype = compute;
  Tensor x = f.at("input.x").to(device, compute).set_requires_grad(true);
  Tensor mask = f.at("input.mask").to(device);
  Tensor y = layer.forward(x, mask, ctx);
  Tensor loss = kernels::sum(kernels::mul(kernels::cast(y, DType::F32), f.at("input.r").to(device)));
  loss.backward();
  Tol tol = tolerance(compute);
  EXPECT_TRUE(all_close(y, f.at("output.y"), tol.atol, tol.rtol)) << file << " output";
  EXPECT_TRUE(all_close(x.grad(), f.at("grad.x"), tol.atol, tol.rtol)) << file << " grad of x";
  for (const auto& [name, p] : layer.named_parameters())
    EXPECT_TRUE(all_close(p.grad(), f.at("grad." + name), tol.atol, tol.rtol)) << file << " grad of " << name;
}

void check_classifier(const std::string& file, Device device, DType compute) {
  Fixture f = load_fixture(file);
  const auto& c = f.config;
  TextClassifierConfig cfg;
  cfg.vocab_size = c["vocab_size"];
  cfg.d_model = c["d_model"];
  cfg.n_heads = c["n_heads"];
  cfg.num_layers = c["num_layers"];
  cfg.dim_feedforward = c["dim_feedforward"];
  cfg.max_seq_len = c["max_seq_len"];
  cfg.num_classes = c["num_classes"];
  cfg.dropout = 0.0;
  cfg.activation = parse_activation(c["activation"]);
  cfg.pooling = parse_pooling(c["pooling"]);
  cfg.norm_first = c["norm_first"];
  TextClassifier model(cfg, 123);
  model.load_state_dict(f.with_prefix("param."));
  model.to(device);
  ForwardContext ctx;
  ctx.compute_dtype = compute;
  Tensor logits = model.forward(f.at("input.ids").to(device), f.at("input.mask").to(device), ctx);
  Tensor loss = kernels::cross_entropy(logits, f.at("input.labels").to(device), c["label_smoothing"].get<double>());
  loss.backward();
  Tol tol = tolerance(compute);
  EXPECT_TRUE(all_close(logits, f.at("output.logits"), tol.atol, tol.rtol)) << file << " logits";
  EXPECT_TRUE(all_close(loss, f.at("output.loss"), tol.atol, tol.rtol)) << file << " loss";
  for (const auto& [name, p] : model.named_parameters())
    EXPECT_TRUE(all_close(p.grad(), f.at("grad." + name), tol.atol, tol.rtol)) << file << " grad of " << name;
}

const char* kLayers[] = {"encoder_layer_post_relu.safetensors", "encoder_layer_post_gelu.safetensors",
                         "encoder_layer_pre_gelu.safetensors"};
const char* kClassifiers[] = {"text_classifier_post_mean_gelu.safetensors",
                              "text_classifier_pre_cls_relu.safetensors"};

TEST(PyTorchFixture, EncoderLayerMatchesOnCpu) {
  for (const char* f : kLayers) check_layer(f, Device::cpu(), DType::F32);
}

TEST(PyTorchFixture, ClassifierMatchesOnCpu) {
  for (const char* f : kClassifiers) check_classifier(f, Device::cpu(), DType::F32);
}

TEST(PyTorchFixture, ParameterNamesAreExactlyPyTorchs) {
  // load_state_dict is strict: a missing or extra name would throw.
  Fixture f = load_fixture(kClassifiers[0]);
  EXPECT_GT(f.with_prefix("param.").tensors.size(), 20u);
}

TEST(PyTorchFixture, EncoderLayerMatchesOnCudaF32) {
  TANDEM_REQUIRE_GPU();
  for (const char* f : kLayers) check_layer(f, Device::cuda(0), DType::F32);
}

TEST(PyTorchFixture, ClassifierMatchesOnCudaF32) {
  TANDEM_REQUIRE_GPU();
  for (const char* f : kClassifiers) check_classifier(f, Device::cuda(0), DType::F32);
}

TEST(PyTorchFixture, ClassifierMatchesOnCudaBf16) {
  TANDEM_REQUIRE_GPU();
  for (const char* f : kClassifiers) check_classifier(f, Device::cuda(0), DType::BF16);
}

TEST(PyTorchFixture, ClassifierInBf16OnCpuStaysCloseToPyTorchF32) {
  for (const char* f : kClassifiers) check_classifier(f, Device::cpu(), DType::BF16);
}

// TANDEM_BIAS_GRADIENT=gemm (kernels/bias_gradient.h): the deferred biases' gradients come from their
// linears' backward instead of the row ops', which PyTorch's modules must still agree with.
class BiasGradientInTheGemm : public ::testing::Test {
 protected:
  void SetUp() override { kernels::set_bias_gradient_for_testing(kernels::BiasGradient::Gemm); }
  void TearDown() override { kernels::set_bias_gradient_for_testing(std::nullopt); }
};

TEST_F(BiasGradientInTheGemm, EncoderLayerAndClassifierMatchPyTorchOnCpu) {
  for (const char* f : kLayers) check_layer(f, Device::cpu(), DType::F32);
  for (DType t : {DType::F32, DType::BF16})
    for (const char* f : kClassifiers) check_classifier(f, Device::cpu(), t);
}

TEST_F(BiasGradientInTheGemm, EncoderLayerAndClassifierMatchPyTorchOnCuda) {
  TANDEM_REQUIRE_GPU();
  for (const char* f : kLayers) check_layer(f, Device::cuda(0), DType::F32);
  for (DType t : {DType::F32, DType::BF16})
    for (const char* f : kClassifiers) check_classifier(f, Device::cuda(0), t);
}

}  // namespace
}  // namespace tandem::nn
