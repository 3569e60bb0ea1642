#include "comm/cuda_staging.h"

#include <thread>

#include "core/cuda_check.h"

namespace tandem::comm {

namespace {

void wait_stream(cudaStream_t s) { TANDEM_CUDA_CHECK(cudaStreamSynchronize(s)); }
}  // namespace

CudaStaging::~CudaStaging() {
  for (auto& [device, s] : streams_) {
    cuda::DeviceGuard scope(device);
    cudaStreamDestroy(static_cast<cudaStream_t>(s));
  }
}

std::shared_ptr<void> CudaStaging::mark_ready(int device) {
  cuda::DeviceGuard scope(device);
  cudaEvent_t e = nullptr;
  TANDEM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  std::shared_ptr<void> owned(e, [](void* p) { cudaEventDestroy(static_cast<cudaEvent_t>(p)); });
  TANDEM_CUDA_CHECK(cudaEventRecord(e, static_cast<cudaStream_t>(cuda::current_stream(device).handle())));
  return owned;
}

void CudaStaging::wait_ready(const std::shared_ptr<void>& event, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto e = static_cast<cudaEvent_t>(event.get());
  for (;;) {
    cudaError_t rc = cudaEventQuery(e);
    if (rc == cudaSuccess) return;
    if (rc != cudaErrorNotReady) TANDEM_CUDA_CHECK(rc);
    TANDEM_CHECK(std::chrono::steady_clock::now() < deadline,
                 "the stream that issued the collective did not reach it within {} ms", timeout.count());
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void* CudaStaging::stream(int device) {
  auto it = streams_.find(device);
  if (it != streams_.end()) return it->second;
  cuda::DeviceGuard scope(device);
  cudaStream_t s = nullptr;
  TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  streams_[device] = s;
  return s;
}

char* CudaStaging::host_buffer(size_t bytes) {
  if (!buffer_.defined() || buffer_.nbytes() < bytes)
    buffer_ = Tensor::empty({static_cast<int64_t>(bytes)}, DType::U8, Device::cpu(), /*pinned=*/true);
  return static_cast<char*>(buffer_.data_ptr());
}

void CudaStaging::to_host(const Tensor& t, void* host) {
  if (t.nbytes() == 0) return;
  int device = t.device().index;
  cuda::DeviceGuard scope(device);
  auto s = static_cast<cudaStream_t>(stream(device));
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(host, t.data_ptr(), t.nbytes(), cudaMemcpyDeviceToHost, s));
  wait_stream(s);
}

void CudaStaging::to_device(const void* host, const Tensor& t) {
  if (t.nbytes() == 0) return;
  int device = t.device().index;
  cuda::DeviceGuard scope(device);
  auto s = static_cast<cudaStream_t>(stream(device));
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(t.data_ptr(), host, t.nbytes(), cudaMemcpyHostToDevice, s));
  wait_stream(s);
}

}  // namespace tandem::comm
