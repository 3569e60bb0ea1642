#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/check.h"
#include "core/safetensors.h"
#include "tests/testing/gradcheck.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_st_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  void write_raw(const std::string& p, const std::string& header, const std::string& data) const {
    std::ofstream out(p, std::ios::binary);
    uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << data;
  }
  fs::path dir_;
};

bool message_has(const std::function<void()>& f, const std::string& text) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(e.what()).find(text) != std::string::npos;
  }
  return false;
}

TEST_F(Safetensors, RoundTripKeepsNamesOrderDtypesAndBits) {
  NamedTensors in;
  in.tensors.emplace_back("b.weight", testing::random_tensor({3, 5}, 1, DType::F32));
  in.tensors.emplace_back("a.bias", testing::random_tensor({7}, 2, DType::BF16));
  in.tensors.emplace_back("ids", Tensor::from_vector(std::vector<int64_t>{4, -1}, {2}));
  in.tensors.emplace_back("empty", Tensor::zeros({0, 3}, DType::F16));
  in.metadata["step"] = "12";
  save_safetensors(path("m.safetensors"), in);
  NamedTensors out = load_safetensors(path("m.safetensors"));
  ASSERT_EQ(out.tensors.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out.tensors[i].first, in.tensors[i].first);
    EXPECT_EQ(out.tensors[i].second.dtype(), in.tensors[i].second.dtype());
    EXPECT_EQ(out.tensors[i].second.to_double_vector(), in.tensors[i].second.to_double_vector());
  }
  EXPECT_EQ(out.metadata.at("step"), "12");
  EXPECT_FALSE(fs::exists(path("m.safetensors.tmp")));
}

TEST_F(Safetensors, ReadsAFileWrittenByPyTorchsSafetensorsPackage) {
  NamedTensors t = load_safetensors(TANDEM_FIXTURES_DIR "/tiny.safetensors");
  EXPECT_EQ(t.metadata.at("format"), "pt");
  ASSERT_NE(t.find("encoder.layers.0.linear1.weight"), nullptr);
  EXPECT_EQ(t.find("encoder.layers.0.linear1.weight")->shape(), (Shape{2, 3}));
  EXPECT_EQ(t.find("encoder.layers.0.linear1.weight")->to_double_vector(),
            (std::vector<double>{0, 0.25, 0.5, 0.75, 1, 1.25}));
  EXPECT_EQ(t.find("embed.bf16")->dtype(), DType::BF16);
  EXPECT_EQ(t.find("embed.bf16")->to_double_vector()[1], -2.5);
  EXPECT_EQ(t.find("half")->to_double_vector()[0], 65504.0);
  EXPECT_EQ(t.find("ids")->to_int_vector(), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(t.find("scalar")->dim(), 0);
  EXPECT_EQ(t.find("scalar")->item(), 3.5);
}

TEST_F(Safetensors, MissingFileIsAnErrorNamingIt) {
  EXPECT_TRUE(message_has([&] { load_safetensors(path("nope.safetensors")); }, "nope.safetensors"));
}

TEST_F(Safetensors, TruncatedFileIsAnError) {
  std::ofstream(path("t.safetensors"), std::ios::binary) << "abc";
  EXPECT_TRUE(message_has([&] { load_safetensors(path("t.safetensors")); }, "not a safetensors file"));
}

TEST_F(Safetensors, HeaderLongerThanTheFileIsAnError) {
  std::ofstream out(path("h.safetensors"), std::ios::binary);
  uint64_t n = 1000;
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << "{}";
  out.close();
  EXPECT_TRUE(message_has([&] { load_safetensors(path("h.safetensors")); }, "does not fit"));
}

TEST_F(Safetensors, GarbageJsonIsAnError) {
  write_raw(path("g.safetensors"), "{not json", "");
  EXPECT_TRUE(message_has([&] { load_safetensors(path("g.safetensors")); }, "invalid JSON"));
}

TEST_F(Safetensors, OffsetsOutsideTheDataAreAnErrorNamingTheTensor) {
  write_raw(path("o.safetensors"), R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "1234");
  EXPECT_TRUE(message_has([&] { load_safetensors(path("o.safetensors")); }, "'w'"));
}

TEST_F(Safetensors, SizeNotMatchingTheShapeIsAnError) {
  write_raw(path("s.safetensors"), R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "12345678");
  EXPECT_TRUE(message_has([&] { load_safetensors(path("s.safetensors")); }, "needs 12"));
}

TEST_F(Safetensors, UnknownDtypeIsAnError) {
  write_raw(path("d.safetensors"), R"({"w":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", "1");
  EXPECT_TRUE(message_has([&] { load_safetensors(path("d.safetensors")); }, "unsupported dtype"));
}

TEST_F(Safetensors, OverlappingTensorsAreAnError) {
  write_raw(path("v.safetensors"),
            R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})",
            "123");
  EXPECT_TRUE(message_has([&] { load_safetensors(path("v.safetensors")); }, "overlap"));
}

TEST_F(Safetensors, FailedWriteLeavesThePreviousFileIntact) {
  NamedTensors good;
  good.tensors.emplace_back("w", Tensor::full({2}, 1.0));
  save_safetensors(path("c.safetensors"), good);
  NamedTensors bad;
  bad.tensors.emplace_back("w", Tensor());  // undefined: the save fails before touching the file
  EXPECT_THROW(save_safetensors(path("c.safetensors"), bad), Error);
  EXPECT_EQ(load_safetensors(path("c.safetensors")).find("w")->to_double_vector(), (std::vector<double>{1, 1}));
}

}  // namespace
}  // namespace tandem
