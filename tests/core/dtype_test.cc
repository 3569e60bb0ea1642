#include <gtest/gtest.h>

#include "core/check.h"
#include "core/device.h"
#include "core/dtype.h"

namespace tandem {
namespace {

TEST(DType, SizesMatchTheirStorage) {
  EXPECT_EQ(dtype_size(DType::F32), 4u);
  EXPECT_EQ(dtype_size(DType::F64), 8u);
  EXPECT_EQ(dtype_size(DType::F16), 2u);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::I32), 4u);
  EXPECT_EQ(dtype_size(DType::I64), 8u);
  EXPECT_EQ(dtype_size(DType::U8), 1u);
}

TEST(DType, NamesRoundTripThroughParse) {
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8})
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::BF16);
  EXPECT_EQ(parse_dtype("fp16"), DType::F16);
}

TEST(DType, UnknownNameIsAnErrorNamingIt) {
  try {
    parse_dtype("float8");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'float8'"), std::string::npos) << e.what();
  }
}

TEST(Device, ParsesCpuAndCudaIndices) {
  EXPECT_EQ(parse_device("cpu"), Device::cpu());
  EXPECT_EQ(parse_device("cuda"), Device::cuda(0));
  EXPECT_EQ(parse_device("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::cuda(2).str(), "cuda:2");
  EXPECT_THROW(parse_device("cuda:"), Error);
  EXPECT_THROW(parse_device("cuda:-1"), Error);
  EXPECT_THROW(parse_device("gpu"), Error);
}

TEST(Errors, CarryTheSourceFileAndLine) {
  try {
    TANDEM_CHECK(1 + 1 == 3, "arithmetic is {}", "broken");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind("tests/core/dtype_test.cc:", 0), 0u) << m;
    EXPECT_NE(m.find("arithmetic is broken"), std::string::npos) << m;
  }
}

TEST(Errors, NameTheirSourceBelowTheCheckoutInEveryLibraryFolder) {
  // The path the compiler saw depends on where the checkout lies; the message must not.
  for (std::string folder : {"core", "comm", "ddp", "train", "profile", "report", "apps"}) {
    try {
      throw_error(("/home/someone/src/tandem/" + folder + "/x.cc").c_str(), 7, "why");
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), folder + "/x.cc:7: why");
    }
  }
}

}  // namespace
}  // namespace tandem
