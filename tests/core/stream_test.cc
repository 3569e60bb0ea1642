#include <gtest/gtest.h>

#include <regex>
#include <thread>

#include "core/check.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "tests/testing/gradcheck.h"

namespace tandem {
namespace {

TEST(Streams, CreatingOneOnAMissingDeviceIsAClearError) {
  // Device index device_count() is one past the last: absent on every machine, GPU or not.
  try {
    cuda::Stream::create(cuda::device_count());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_TRUE(m.find("CUDA") != std::string::npos) << m;
  }
}

TEST(DeviceStart, NoDeviceMeansCpuOnly) {
  EXPECT_EQ(cuda::device_start_error(100, "cudaErrorNoDevice", "no CUDA-capable device is detected", 13000, 13000), "");
}

TEST(DeviceStart, NoDriverAtAllMeansCpuOnly) {
  EXPECT_EQ(cuda::device_start_error(35, "cudaErrorInsufficientDriver", "insufficient driver", 0, 13000), "");
}

TEST(DeviceStart, ADriverOlderThanTheRuntimeIsAnErrorNamingBothVersions) {
  const std::string m =
      cuda::device_start_error(35, "cudaErrorInsufficientDriver", "insufficient driver", 12080, 13000);
  EXPECT_NE(m.find("cudaErrorInsufficientDriver"), std::string::npos) << m;
  EXPECT_NE(m.find("driver supports CUDA 12.8"), std::string::npos) << m;
  EXPECT_NE(m.find("runtime is CUDA 13.0"), std::string::npos) << m;
  EXPECT_NE(m.find("update the driver"), std::string::npos) << m;
}

TEST(DeviceStart, ABrokenOrBusyDeviceIsAnError) {
  const std::string m = cuda::device_start_error(46, "cudaErrorDevicesUnavailable", "busy", 13000, 13000);
  EXPECT_NE(m.find("cudaErrorDevicesUnavailable (busy)"), std::string::npos) << m;
}

TEST(DeviceInfo, EachDeviceIsDescribedByNameMemoryComputeCapabilityAndMultiprocessors) {
  TANDEM_REQUIRE_GPU();
  const std::regex line(R"(.+, [0-9]+\.[0-9] GiB, compute capability [0-9]+\.[0-9]+, [0-9]+ multiprocessors, [0-9]+ MiB L2)");
  for (int d = 0; d < cuda::device_count(); ++d)
    EXPECT_TRUE(std::regex_match(cuda::device_description(d), line)) << cuda::device_description(d);
  EXPECT_TRUE(std::regex_match(cuda::cuda_versions(), std::regex(R"(driver [0-9]+\.[0-9]+, runtime [0-9]+\.[0-9]+)")))
      << cuda::cuda_versions();
}

TEST(Streams, GuardMakesAStreamCurrentForItsScope) {
  TANDEM_REQUIRE_GPU();
  cuda::Stream s = cuda::Stream::create(0);
  EXPECT_EQ(cuda::current_stream(0).handle(), nullptr);
  {
    cuda::StreamGuard g(s);
    EXPECT_EQ(cuda::current_stream(0).handle(), s.handle());
  }
  EXPECT_EQ(cuda::current_stream(0).handle(), nullptr);
}

TEST(DeviceGuard, AThreadThatNeverChoseADeviceKeepsTheGuardsDevice) {
  // Restoring "device 0" there would make a context on GPU 0 in every rank.
  TANDEM_REQUIRE_GPU();
  const int last = cuda::device_count() - 1;
  int chosen_inside = -2, chosen_after = -2, current_after = -2;
  std::thread([&] {
    EXPECT_EQ(cuda::chosen_device(), -1);
    {
      cuda::DeviceGuard guard(last);
      chosen_inside = cuda::chosen_device();
    }
    chosen_after = cuda::chosen_device();
    current_after = cuda::current_device();
  }).join();
  EXPECT_EQ(chosen_inside, last);
  EXPECT_EQ(chosen_after, -1);
  EXPECT_EQ(current_after, last);
}

TEST(DeviceGuard, RestoresTheDeviceAThreadChose) {
  TANDEM_REQUIRE_GPU();
  const int last = cuda::device_count() - 1;
  std::thread([&] {
    cuda::set_device(0);
    {
      cuda::DeviceGuard guard(last);
      EXPECT_EQ(cuda::current_device(), last);
    }
    EXPECT_EQ(cuda::current_device(), 0);
    EXPECT_EQ(cuda::chosen_device(), 0);
  }).join();
}

TEST(Streams, EventOrdersWorkAcrossStreams) {
  TANDEM_REQUIRE_GPU();
  cuda::Stream producer = cuda::Stream::create(0), consumer = cuda::Stream::create(0);
  Tensor t = Tensor::zeros({1 << 22}, DType::F32, Device::cuda(0));
  cuda::Event done;
  {
    cuda::StreamGuard g(producer);
    t.fill_(3);
    done.record(producer);
  }
  done.block(consumer);
  Tensor copy;
  {
    cuda::StreamGuard g(consumer);
    copy = t.to(Device::cpu());  // synchronises the consumer stream
  }
  EXPECT_EQ(copy.to_double_vector()[(1 << 22) - 1], 3.0);
}

TEST(Streams, TimingEventsMeasureElapsedTime) {
  TANDEM_REQUIRE_GPU();
  cuda::Stream s = cuda::Stream::create(0);
  cuda::Event a(true), b(true);
  a.record(s);
  {
    cuda::StreamGuard g(s);
    Tensor t = Tensor::zeros({1 << 24}, DType::F32, Device::cuda(0));
  }
  b.record(s);
  b.synchronize();
  EXPECT_TRUE(b.query());
  EXPECT_GE(a.elapsed_ms(b), 0.0f);
}

}  // namespace
}  // namespace tandem
