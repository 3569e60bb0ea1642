// The .npy writer: NumPy's format 1.0 byte for byte.
#include "apps/npy.h"

#include <gtest/gtest.h>

#include <cstring>

namespace tandem::apps {
namespace {

TEST(Npy, HeaderIsMagicVersionLengthAndAPaddedDict) {
  const int32_t data[6] = {1, 2, 3, 4, 5, 6};
  const std::string f = npy_bytes("<i4", {2, 3}, data, sizeof data);
  EXPECT_EQ(f.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(f[6], 1);
  EXPECT_EQ(f[7], 0);
  const size_t header_len = static_cast<unsigned char>(f[8]) | (static_cast<unsigned char>(f[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);  // data starts 64-byte aligned
  const std::string header = f.substr(10, header_len);
  EXPECT_EQ(header.rfind("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", 0), 0u) << header;
  EXPECT_EQ(header.back(), '\n');
  ASSERT_EQ(f.size(), 10 + header_len + sizeof data);
  EXPECT_EQ(std::memcmp(f.data() + 10 + header_len, data, sizeof data), 0);
}

TEST(Npy, OneDimensionalShapeKeepsItsTupleComma) {
  const int64_t v[3] = {7, 8, 9};
  EXPECT_NE(npy_bytes("<i8", {3}, v, sizeof v).find("'shape': (3,)"), std::string::npos);
}

}  // namespace
}  // namespace tandem::apps
