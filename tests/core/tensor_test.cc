#include <gtest/gtest.h>

#include <cstring>
#include <iterator>
#include <limits>

#include "core/check.h"
#include "core/copy_kernels.h"
#include "core/half.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "tests/testing/gradcheck.h"

namespace tandem {
namespace {

TEST(Tensor, FromVectorKeepsValuesAndShape) {
  Tensor t = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 24u);
  EXPECT_EQ(t.to_double_vector(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST(Tensor, ZeroDimensionalTensorHoldsOneElement) {
  Tensor t = Tensor::full({}, 2.5);
  EXPECT_EQ(t.dim(), 0);
  EXPECT_EQ(t.numel(), 1);
  EXPECT_DOUBLE_EQ(t.item(), 2.5);
}

TEST(Tensor, EmptyShapesAreLegal) {
  Tensor t = Tensor::zeros({0, 5});
  EXPECT_EQ(t.numel(), 0);
  EXPECT_TRUE(t.to_double_vector().empty());
}

TEST(Tensor, NegativeExtentIsAnError) { EXPECT_THROW(Tensor::empty({2, -1}), Error); }

// 2^59 x 8 f32 elements are 2^64 bytes: wrapped, that was a 0-byte buffer the kernels wrote into.
TEST(Tensor, ElementCountThatOverflowsIsAnErrorNamingTheShape) {
  try {
    Tensor::empty({int64_t{1} << 59, int64_t{1} << 5});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shape [576460752303423488, 32] has more elements than an int64 can count"),
              std::string::npos)
        << e.what();
  }
}

TEST(Tensor, ByteCountThatOverflowsIsAnErrorNotAWrappedAllocation) {
  try {
    Tensor::empty({int64_t{1} << 59, 8}, DType::F32);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f32 [576460752303423488, 8] has more bytes than a size_t can count"),
              std::string::npos)
        << e.what();
  }
}

TEST(Tensor, HostMemoryIs64ByteAligned) {
  for (int64_t n : {1, 3, 17, 1000}) {
    Tensor t = Tensor::empty({n}, DType::U8);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64, 0u);
  }
}

TEST(Tensor, CopiesOfTheHandleShareState) {
  Tensor a = Tensor::zeros({3});
  Tensor b = a;
  b.set_requires_grad(true);
  EXPECT_TRUE(a.requires_grad());
  b.fill_(7);
  EXPECT_EQ(a.to_double_vector(), (std::vector<double>{7, 7, 7}));
}

TEST(TensorViews, NarrowSharesStorageAtAnOffset) {
  Tensor t = Tensor::from_vector(std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7}, {4, 2});
  Tensor rows = t.narrow(1, 2);
  EXPECT_EQ(rows.shape(), (Shape{2, 2}));
  EXPECT_EQ(rows.storage(), t.storage());
  EXPECT_EQ(rows.offset_bytes(), 2 * sizeof(float));
  EXPECT_EQ(rows.to_double_vector(), (std::vector<double>{2, 3, 4, 5}));
  rows.fill_(-1);
  EXPECT_EQ(t.to_double_vector(), (std::vector<double>{0, 1, -1, -1, -1, -1, 6, 7}));
}

TEST(TensorViews, ViewRangeLetsAGradientLiveInsideAFlatBuffer) {
  // The layout DDP uses for gradient_as_bucket_view: parameters' gradients as views of one bucket.
  Tensor bucket = Tensor::zeros({10});
  Tensor g1 = bucket.view_range(0, {2, 2});
  Tensor g2 = bucket.view_range(4, {6});
  g1.fill_(1);
  g2.fill_(2);
  EXPECT_EQ(bucket.to_double_vector(), (std::vector<double>{1, 1, 1, 1, 2, 2, 2, 2, 2, 2}));
  EXPECT_THROW(bucket.view_range(5, {6}), Error);  // past the end
}

TEST(TensorViews, ReshapeInfersOneExtent) {
  Tensor t = Tensor::zeros({2, 6});
  EXPECT_EQ(t.reshape({3, -1}).shape(), (Shape{3, 4}));
  EXPECT_THROW(t.reshape({5, -1}), Error);
  EXPECT_THROW(t.reshape({-1, -1}), Error);
  EXPECT_THROW(t.reshape({4, 4}), Error);
}

TEST(TensorViews, NarrowOutOfRangeIsAnError) {
  Tensor t = Tensor::zeros({4, 2});
  EXPECT_THROW(t.narrow(3, 2), Error);
  EXPECT_THROW(t.narrow(-1, 1), Error);
}

TEST(TensorViews, NarrowOfATensorThatRequiresGradIsRefused) {
  Tensor t = Tensor::zeros({4, 2}).set_requires_grad(true);
  EXPECT_THROW(t.narrow(0, 1), Error);
  EXPECT_NO_THROW(t.detach().narrow(0, 1));
}

TEST(TensorCopy, ConvertsBetweenDtypesWithRoundToNearestEven) {
  Tensor f = Tensor::from_vector(std::vector<float>{1.0f, 0.1f, -65520.0f, 3.0f}, {4});
  Tensor h = f.to(DType::F16);
  const Half* hp = h.data<Half>();
  EXPECT_EQ(hp[0].bits, 0x3C00);
  EXPECT_EQ(hp[1].bits, 0x2E66);
  EXPECT_EQ(hp[2].bits, 0xFC00);  // rounds to -inf
  Tensor b = f.to(DType::BF16);
  EXPECT_EQ(b.data<BFloat16>()[1].bits, 0x3DCD);
  EXPECT_EQ(b.to(DType::F32).to_double_vector()[3], 3.0);
}

TEST(TensorCopy, IntegerAndFloatConversions) {
  Tensor i = Tensor::from_vector(std::vector<int64_t>{-3, 0, 7}, {3});
  EXPECT_EQ(i.dtype(), DType::I64);
  EXPECT_EQ(i.to(DType::F32).to_double_vector(), (std::vector<double>{-3, 0, 7}));
  EXPECT_EQ(i.to(DType::I32).to_int_vector(), (std::vector<int64_t>{-3, 0, 7}));
  EXPECT_EQ(i.to(DType::U8).to(DType::I64).to_int_vector()[2], 7);
}

TEST(TensorCopy, CopyIntoAViewChangesOnlyThatView) {
  Tensor dst = Tensor::zeros({6});
  dst.view_range(2, {2}).copy_(Tensor::from_vector(std::vector<double>{5, 6}, {2}, DType::F64));
  EXPECT_EQ(dst.to_double_vector(), (std::vector<double>{0, 0, 5, 6, 0, 0}));
}

TEST(TensorCopy, SizeMismatchIsAnError) {
  Tensor dst = Tensor::zeros({3});
  EXPECT_THROW(dst.copy_(Tensor::zeros({4})), Error);
}

TEST(TensorCopy, DataOfTheWrongTypeIsAnError) {
  Tensor t = Tensor::zeros({2});
  EXPECT_THROW(t.data<double>(), Error);
  EXPECT_NO_THROW(t.data<float>());
}

TEST(TensorCopy, UndefinedTensorsGiveErrorsNotCrashes) {
  Tensor u;
  EXPECT_FALSE(u.defined());
  EXPECT_THROW(u.shape(), Error);
  EXPECT_THROW(u.to(DType::F64), Error);
  EXPECT_EQ(u.str(), "undefined");
}

TEST(TensorCuda, RoundTripThroughTheDeviceKeepsEveryDtype) {
  TANDEM_REQUIRE_GPU();
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8}) {
    Tensor h = Tensor::from_vector(std::vector<double>{0, 1, 2, 3, 100, 7}, {2, 3}, t);
    Tensor d = h.to(Device::cuda(0));
    EXPECT_TRUE(d.device().is_cuda());
    EXPECT_EQ(d.to(Device::cpu()).to_double_vector(), h.to_double_vector()) << dtype_name(t);
  }
}

TEST(TensorCuda, DeviceConversionsMatchHostConversionsBitForBit) {
  TANDEM_REQUIRE_GPU();
  Tensor src = testing::random_tensor({4097}, 3, DType::F32);
  for (DType t : {DType::F16, DType::BF16}) {
    Tensor host = src.to(t);
    Tensor dev = src.to(Device::cuda(0)).to(t).to(Device::cpu());
    std::vector<uint16_t> a(4097), b(4097);
    std::memcpy(a.data(), host.data_ptr(), host.nbytes());
    std::memcpy(b.data(), dev.data_ptr(), dev.nbytes());
    EXPECT_EQ(a, b) << dtype_name(t);
  }
}

// Raw bytes of a host tensor, for bit-for-bit comparisons (NaN payloads included).
std::vector<uint8_t> bytes_of(const Tensor& host) {
  std::vector<uint8_t> b(host.nbytes());
  if (!b.empty()) std::memcpy(b.data(), host.data_ptr(), b.size());
  return b;
}

bool is_float(DType t) { return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16; }

// Values that exercise rounding when both types are floats: a ramp with fractions, large and tiny
// magnitudes, inf, nan and f16 subnormals. Into an integer type, whole numbers 0..199 (exact in every
// dtype): float -> integer conversion of negative, huge or NaN values is undefined in C++ and differs
// between the host and the GPU.
Tensor conversion_source(int64_t n, DType from, DType to) {
  std::vector<double> v(static_cast<size_t>(n));
  const bool floats = is_float(from) && is_float(to);
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = floats ? (i % 7 - 3) * 1.3 + (i % 251) * 0.25 : static_cast<double>(i % 200);
  if (floats) {
    const double special[] = {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                              std::numeric_limits<double>::quiet_NaN(), 3e-6, -7e-8, 70000.0, 1e-40};
    for (size_t k = 0; k < std::size(special) && k < v.size(); ++k) v[v.size() - 1 - k] = special[k];
  }
  return Tensor::from_vector(v, {n}, DType::F64).to(from);
}

// Every vector width's main body and tail, and a view one element in (misaligned: the element path).
TEST(TensorCuda, EveryConversionMatchesTheHostBitForBitWithTailsAndMisalignedViews) {
  TANDEM_REQUIRE_GPU();
  const DType all[] = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8};
  for (DType from : all) {
    for (DType to : all) {
      for (int64_t n : {1, 7, 16, 17, 4099}) {
        Tensor src = conversion_source(n + 1, from, to);
        for (int64_t offset : {0, 1}) {
          Tensor part = src.view_range(offset, {n});
          Tensor expect = part.to(to);
          Tensor dev = part.to(Device::cuda(0));
          Tensor got = dev.to(to).to(Device::cpu());
          EXPECT_EQ(bytes_of(got), bytes_of(expect)) << dtype_name(from) << " -> " << dtype_name(to) << " n " << n
                                                     << " offset " << offset;
          // The same conversion from a device view at the offset (not a fresh, aligned copy).
          Tensor dev_whole = src.to(Device::cuda(0));
          Tensor got_view = dev_whole.view_range(offset, {n}).to(to).to(Device::cpu());
          EXPECT_EQ(bytes_of(got_view), bytes_of(expect)) << dtype_name(from) << " -> " << dtype_name(to) << " n " << n
                                                          << " view offset " << offset;
        }
      }
    }
  }
}

TEST(TensorCuda, FillWritesExactlyItsViewForEveryWidthAndTail) {
  TANDEM_REQUIRE_GPU();
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8}) {
    for (int64_t offset : {0, 1, 3}) {
      for (int64_t n : {1, 15, 33, 1000}) {
        Tensor d = Tensor::zeros({n + 8}, t, Device::cuda(0));
        d.view_range(offset, {n}).fill_(5);
        std::vector<double> expect(static_cast<size_t>(n + 8), 0.0);
        for (int64_t i = offset; i < offset + n; ++i) expect[static_cast<size_t>(i)] = 5;
        EXPECT_EQ(d.to(Device::cpu()).to_double_vector(), expect) << dtype_name(t) << " offset " << offset << " n " << n;
      }
    }
  }
}

#if TANDEM_WITH_CUDA
TEST(TensorCuda, AccumulateAddsLikeTheHostForEveryWidthAndTail) {
  TANDEM_REQUIRE_GPU();
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    for (int64_t offset : {0, 1}) {
      for (int64_t n : {1, 9, 4099}) {
        Tensor a = testing::random_tensor({n + 1}, 11, DType::F32).to(t);
        Tensor b = testing::random_tensor({n + 1}, 12, DType::F32).to(t);
        Tensor host = a.view_range(offset, {n}).clone();
        accumulate_host(host.data_ptr(), b.view_range(offset, {n}).data_ptr(), t, n);
        Tensor da = a.to(Device::cuda(0));
        Tensor db = b.to(Device::cuda(0));
        accumulate_cuda(da.view_range(offset, {n}).data_ptr(), db.view_range(offset, {n}).data_ptr(), t, n,
                        cuda::current_stream(0).handle());
        Tensor got = da.to(Device::cpu()).view_range(offset, {n}).clone();
        EXPECT_EQ(bytes_of(got), bytes_of(host)) << dtype_name(t) << " offset " << offset << " n " << n;
        // The element before the view is untouched.
        if (offset == 1) {
          EXPECT_EQ(da.to(Device::cpu()).to_double_vector()[0], a.to_double_vector()[0]);
        }
      }
    }
  }
}
#endif

TEST(TensorCuda, FillAndViewsOnTheDevice) {
  TANDEM_REQUIRE_GPU();
  Tensor d = Tensor::zeros({8}, DType::F32, Device::cuda(0));
  d.view_range(2, {3}).fill_(4);
  EXPECT_EQ(d.to_double_vector(), (std::vector<double>{0, 0, 4, 4, 4, 0, 0, 0}));
}

}  // namespace
}  // namespace tandem
