// AdamW and SGD against torch.optim.AdamW / torch.optim.SGD (single-tensor
// path, f32, CPU): the parameters after each of five steps and the final
// per-parameter state, for the cases of tests/fixtures/optim/{adamw,sgd}.json
// (two parameter groups with their own hyper-parameters, gradients missing at
// some steps).
//
// Tolerance: rtol 1e-6 + atol 1e-7. Both sides evaluate the same formulas in
// f32 in the same order; PyTorch's vectorised loops fuse some a*b+c into FMAs
// (lerp, add with alpha) and ours do not, a difference of about one ulp
// (6e-8 relative) per operation and step.
#include <gtest/gtest.h>

#include <memory>

#include "optim/adamw.h"
#include "optim/sgd.h"
#include "tests/optim/torch_fixture.h"

namespace tandem::optim {
namespace {

using nlohmann::json;
using testing::fixture_shape;
using testing::fixture_tensor;
using testing::matches_fixture;

constexpr double kRtol = 1e-6, kAtol = 1e-7;

std::vector<Tensor> initial_params(const json& c) {
  std::vector<Tensor> params;
  for (size_t i = 0; i < c["shapes"].size(); ++i)
    params.push_back(fixture_tensor(c["initial"][i], fixture_shape(c["shapes"][i])).set_requires_grad(true));
  return params;
}

std::unique_ptr<Optimizer> make_optimizer(const json& c, const std::vector<Tensor>& params) {
  auto members = [&](const json& g) {
    std::vector<Tensor> out;
    for (const auto& i : g["params"]) out.push_back(params[i.get<size_t>()]);
    return out;
  };
  if (c["optimizer"] == "adamw") {
    std::vector<AdamW::ParamGroup> groups;
    for (const auto& g : c["groups"])
      groups.push_back({members(g), {.lr = g["lr"], .betas = {g["betas"][0], g["betas"][1]}, .eps = g["eps"],
                                     .weight_decay = g["weight_decay"]}});
    return std::make_unique<AdamW>(groups);
  }
  std::vector<SGD::ParamGroup> groups;
  for (const auto& g : c["groups"])
    groups.push_back({members(g), {.lr = g["lr"], .momentum = g["momentum"], .dampening = g["dampening"],
                                   .weight_decay = g["weight_decay"], .nesterov = g["nesterov"]}});
  return std::make_unique<SGD>(groups);
}

// Runs every case of `file` and compares with PyTorch after each step.
void check_against_fixture(const std::string& file) {
  const json fixture = testing::load_optim_fixture(file);
  ASSERT_FALSE(fixture["cases"].empty());
  for (const json& c : fixture["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::vector<Tensor> params = initial_params(c);
    std::unique_ptr<Optimizer> opt = make_optimizer(c, params);
    for (size_t k = 0; k < c["steps"].size(); ++k) {
      const json& step = c["steps"][k];
      for (size_t i = 0; i < params.size(); ++i) {
        const json& g = step["grads"][i];
        params[i].set_grad(g.is_null() ? Tensor() : fixture_tensor(g, params[i].shape()));
      }
      opt->step();
      for (size_t i = 0; i < params.size(); ++i)
        EXPECT_TRUE(matches_fixture(params[i], step["params"][i], kRtol, kAtol)) << "step " << k << ", param " << i;
    }
    const Optimizer::StateDict state = opt->state_dict();
    size_t expected_entries = 0;
    for (const auto& [index, entries] : c["final_state"].items()) {
      for (const auto& [name, value] : entries.items()) {
        ++expected_entries;
        const std::string key = "state." + index + "." + name;
        ASSERT_TRUE(state.count(key)) << key;
        EXPECT_TRUE(matches_fixture(state.at(key), value, kRtol, kAtol)) << key;
      }
    }
    // SGD keeps a step count next to each momentum buffer, which PyTorch does not.
    size_t extra = 0;
    for (const auto& [key, t] : state) extra += key.ends_with(".step") && c["optimizer"] == "sgd";
    EXPECT_EQ(state.size() - extra, expected_entries);
  }
}

TEST(OptimizerFixture, AdamWMatchesPyTorchOverFiveSteps) { check_against_fixture("adamw.json"); }

TEST(OptimizerFixture, SgdMatchesPyTorchOverFiveSteps) { check_against_fixture("sgd.json"); }

}  // namespace
}  // namespace tandem::optim
