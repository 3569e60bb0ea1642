// The ops against numbers computed by PyTorch (tests/fixtures/make_ops_fixtures.py,
// committed JSON; no Python needed here). Inputs and expected values are f64;
// gradients are d(sum(out * dy))/d(input) for the stored dy. The f64 CPU path must
// agree to 1e-12; the f32 path (inputs rounded to f32) to f32 precision.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/layer_norm.h"
#include "kernels/pooling.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using nlohmann::json;
using testing::all_close;

json fixture(const std::string& name) {
  std::string path = std::string(TANDEM_FIXTURES_DIR) + "/ops_" + name + ".json";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return json::parse(in);
}

Tensor tensor(const json& values, const Shape& shape, DType t = DType::F64, bool grad = false) {
  Tensor x = Tensor::from_vector(values.get<std::vector<double>>(), shape, t);
  if (grad) x.set_requires_grad(true);
  return x;
}

Shape shape_of(const json& j) { return j.get<std::vector<int64_t>>(); }

constexpr double kTight = 1e-12;

TEST(TorchFixtures, LayerNormForwardAndBackward) {
  json f = fixture("layer_norm");
  const Shape s = shape_of(f["shape"]);
  const Shape p{s.back()};
  for (DType t : {DType::F64, DType::F32}) {
    const double tol = t == DType::F64 ? kTight : 2e-5;
    Tensor x = tensor(f["x"], s, t, true), w = tensor(f["weight"], p, t, true), b = tensor(f["bias"], p, t, true);
    Tensor y = layer_norm(x, w, b, f["eps"].get<double>());
    EXPECT_TRUE(all_close(y, tensor(f["y"], s), tol, tol)) << dtype_name(t);
    y.backward(tensor(f["dy"], s, t));
    EXPECT_TRUE(all_close(x.grad(), tensor(f["dx"], s), tol, tol)) << dtype_name(t);
    EXPECT_TRUE(all_close(w.grad(), tensor(f["dweight"], p), tol, tol)) << dtype_name(t);
    EXPECT_TRUE(all_close(b.grad(), tensor(f["dbias"], p), tol, tol)) << dtype_name(t);
  }
}

TEST(TorchFixtures, GeluExactAndTanh) {
  json f = fixture("gelu");
  const Shape s{static_cast<int64_t>(f["x"].size())};
  for (auto [mode, approx] : {std::pair{"none", GeluApproximation::None}, std::pair{"tanh", GeluApproximation::Tanh}}) {
    for (DType t : {DType::F64, DType::F32}) {
      const double tol = t == DType::F64 ? kTight : 1e-5;
      Tensor x = tensor(f["x"], s, t, true);
      Tensor y = gelu(x, approx);
      EXPECT_TRUE(all_close(y, tensor(f[mode]["y"], s), tol, tol)) << mode << " " << dtype_name(t);
      y.backward(tensor(f[mode]["dy"], s, t));
      EXPECT_TRUE(all_close(x.grad(), tensor(f[mode]["dx"], s), tol, tol)) << mode << " " << dtype_name(t);
    }
  }
}

TEST(TorchFixtures, BiasGeluMatchesGeluOfTheSum) {
  json f = fixture("bias_gelu");
  const Shape s = shape_of(f["shape"]);
  const Shape p{s.back()};
  Tensor x = tensor(f["x"], s, DType::F64, true), b = tensor(f["bias"], p, DType::F64, true);
  Tensor y = bias_gelu(x, b, GeluApproximation::Tanh);
  EXPECT_TRUE(all_close(y, tensor(f["y"], s), kTight, kTight));
  y.backward(tensor(f["dy"], s));
  EXPECT_TRUE(all_close(x.grad(), tensor(f["dx"], s), kTight, kTight));
  EXPECT_TRUE(all_close(b.grad(), tensor(f["dbias"], p), kTight, kTight));
}

TEST(TorchFixtures, CrossEntropyWithAndWithoutLabelSmoothing) {
  json f = fixture("cross_entropy");
  const Shape s = shape_of(f["shape"]);
  Tensor labels = Tensor::from_vector(f["labels"].get<std::vector<int64_t>>(), {s[0]});
  for (const json& c : f["cases"]) {
    for (DType t : {DType::F64, DType::F32}) {
      const double tol = t == DType::F64 ? kTight : 2e-6;
      Tensor z = tensor(f["logits"], s, t, true);
      Tensor loss = cross_entropy(z, labels, c["label_smoothing"].get<double>());
      EXPECT_NEAR(loss.item(), c["loss"].get<double>(), tol) << c["label_smoothing"] << " " << dtype_name(t);
      loss.backward();
      EXPECT_TRUE(all_close(z.grad(), tensor(c["dlogits"], s), tol, tol))
          << c["label_smoothing"] << " " << dtype_name(t);
    }
  }
}

TEST(TorchFixtures, EmbeddingTableGradients) {
  json f = fixture("embedding");
  const int64_t vocab = f["vocab"], positions = f["positions"], dim = f["dim"];
  auto id_rows = f["ids"].get<std::vector<std::vector<int64_t>>>();
  std::vector<int64_t> ids;
  for (const auto& r : id_rows) ids.insert(ids.end(), r.begin(), r.end());
  const int64_t batch = static_cast<int64_t>(id_rows.size()), seq = static_cast<int64_t>(id_rows[0].size());
  Tensor tok = tensor(f["tok"], {vocab, dim}, DType::F64, true), pos = tensor(f["pos"], {positions, dim}, DType::F64, true);
  Tensor out = embedding(Tensor::from_vector(ids, {batch, seq}), tok, pos);
  EXPECT_TRUE(all_close(out, tensor(f["out"], {batch, seq, dim}), kTight, kTight));
  out.backward(tensor(f["dy"], {batch, seq, dim}));
  EXPECT_TRUE(all_close(tok.grad(), tensor(f["dtok"], {vocab, dim}), kTight, kTight));
  EXPECT_TRUE(all_close(pos.grad(), tensor(f["dpos"], {positions, dim}), kTight, kTight));
}

TEST(TorchFixtures, MaskedMeanPoolWithPadding) {
  json f = fixture("masked_mean_pool");
  const Shape s = shape_of(f["shape"]);
  std::vector<int64_t> mask;
  for (const auto& r : f["mask"].get<std::vector<std::vector<int64_t>>>()) mask.insert(mask.end(), r.begin(), r.end());
  Tensor x = tensor(f["x"], s, DType::F64, true);
  Tensor y = masked_mean_pool(x, Tensor::from_vector(mask, {s[0], s[1]}, DType::U8));
  EXPECT_TRUE(all_close(y, tensor(f["y"], {s[0], s[2]}), kTight, kTight));
  y.backward(tensor(f["dy"], {s[0], s[2]}));
  EXPECT_TRUE(all_close(x.grad(), tensor(f["dx"], s), kTight, kTight));
}

}  // namespace
}  // namespace tandem::kernels
