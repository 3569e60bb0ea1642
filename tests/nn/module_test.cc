#include <gtest/gtest.h>

#include "core/check.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"
#include "nn/linear.h"
#include "tests/testing/gradcheck.h"

namespace tandem::nn {
namespace {

class Block : public Module {
 public:
  explicit Block(Init& init) {
    fc1 = register_module("fc1", std::make_shared<Linear>(4, 3, true, init));
    fc2 = register_module("fc2", std::make_shared<Linear>(3, 2, false, init));
    scale = register_buffer("scale", Tensor::full({1}, 2.0));
  }
  std::shared_ptr<Linear> fc1, fc2;
  Tensor scale;
};

class Net : public Module {
 public:
  explicit Net(uint64_t seed) {
    Init init(seed);
    emb = register_parameter("emb", init.normal({5, 4}, 0, 1));
    for (int i = 0; i < 2; ++i) blocks.push_back(register_module("block" + std::to_string(i), std::make_shared<Block>(init)));
  }
  Tensor emb;
  std::vector<std::shared_ptr<Block>> blocks;
};

TEST(Module, ParameterNamesAreHierarchicalInRegistrationOrder) {
  Net net(1);
  std::vector<std::string> names;
  for (auto& [n, t] : net.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"emb", "block0.fc1.weight", "block0.fc1.bias", "block0.fc2.weight",
                                             "block1.fc1.weight", "block1.fc1.bias", "block1.fc2.weight"}));
  EXPECT_EQ(net.blocks[1]->fc1->weight().name(), "block1.fc1.weight");
  EXPECT_EQ(net.num_parameters(), 20 + 2 * (12 + 3 + 6));
  EXPECT_EQ(net.named_buffers().front().first, "block0.scale");
}

TEST(Module, EveryParameterRequiresGradAndIsF32) {
  Net net(1);
  for (auto& [n, t] : net.named_parameters()) {
    EXPECT_TRUE(t.requires_grad()) << n;
    EXPECT_EQ(t.dtype(), DType::F32) << n;
  }
}

TEST(Module, SameSeedGivesTheSameModelAndAnotherSeedDoesNot) {
  Net a(7), b(7), c(8);
  EXPECT_EQ(a.blocks[1]->fc2->weight().to_double_vector(), b.blocks[1]->fc2->weight().to_double_vector());
  EXPECT_NE(a.blocks[1]->fc2->weight().to_double_vector(), c.blocks[1]->fc2->weight().to_double_vector());
}

TEST(Module, LinearInitialisationIsBoundedByOneOverSqrtFanIn) {
  Init init(3);
  Linear fc(16, 64, true, init);
  for (double v : fc.weight().to_double_vector()) {
    EXPECT_LE(std::abs(v), 0.25);
  }
}

TEST(Module, StateDictRoundTripsThroughSafetensors) {
  Net a(1), b(2);
  std::string path = ::testing::TempDir() + "/module_test_state.safetensors";
  save_safetensors(path, a.state_dict());
  b.load_state_dict(load_safetensors(path));
  for (size_t i = 0; i < a.named_parameters().size(); ++i)
    EXPECT_EQ(a.named_parameters()[i].second.to_double_vector(), b.named_parameters()[i].second.to_double_vector());
}

TEST(Module, LoadingKeepsTheParameterTensorsIdentity) {
  Net a(1), b(2);
  Tensor w = b.blocks[0]->fc1->weight();
  b.load_state_dict(a.state_dict());
  EXPECT_TRUE(w.is_same(b.named_parameters()[1].second));
  EXPECT_EQ(w.to_double_vector(), a.blocks[0]->fc1->weight().to_double_vector());
}

TEST(Module, StrictLoadNamesTheMissingKey) {
  Net a(1);
  NamedTensors s = a.state_dict();
  s.tensors.erase(s.tensors.begin() + 2);
  try {
    a.load_state_dict(s);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing 'block0.fc1.bias'"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(a.load_state_dict(s, /*strict=*/false));
}

TEST(Module, StrictLoadNamesAnUnexpectedKey) {
  Net a(1);
  NamedTensors s = a.state_dict();
  s.tensors.emplace_back("block9.extra", Tensor::zeros({1}));
  try {
    a.load_state_dict(s);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unexpected 'block9.extra'"), std::string::npos) << e.what();
  }
}

TEST(Module, ShapeMismatchOnLoadNamesTheParameter) {
  Net a(1);
  NamedTensors s = a.state_dict();
  s.tensors[0].second = Tensor::zeros({4, 5});
  try {
    a.load_state_dict(s);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'emb'"), std::string::npos) << e.what();
  }
}

TEST(Module, TrainAndEvalPropagateToChildren) {
  Net a(1);
  a.train(false);
  EXPECT_FALSE(a.blocks[1]->fc2->is_training());
  a.train();
  EXPECT_TRUE(a.blocks[1]->fc2->is_training());
}

TEST(Module, LinearForwardInBf16GivesF32MasterGradients) {
  Init init(4);
  Linear fc(8, 3, true, init);
  ForwardContext ctx;
  ctx.compute_dtype = DType::BF16;
  Tensor x = testing::random_tensor({2, 8}, 5, DType::BF16);
  Tensor y = fc.forward(x, ctx);
  EXPECT_EQ(y.dtype(), DType::BF16);
  kernels::sum(kernels::cast(y, DType::F32)).backward();
  EXPECT_EQ(fc.weight().grad().dtype(), DType::F32);
  EXPECT_EQ(fc.bias().grad().to_double_vector(), (std::vector<double>{2, 2, 2}));
}

TEST(Module, ToMovesParametersKeepingTheirIdentity) {
  TANDEM_REQUIRE_GPU();
  Net a(1);
  Tensor w = a.blocks[0]->fc1->weight();
  std::vector<double> before = w.to_double_vector();
  a.to(Device::cuda(0));
  EXPECT_TRUE(w.device().is_cuda());
  EXPECT_TRUE(w.requires_grad());
  EXPECT_EQ(w.to_double_vector(), before);
}

}  // namespace
}  // namespace tandem::nn
