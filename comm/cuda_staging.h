// How the ring backend moves CUDA tensors: through pinned host memory, on a
// comm stream of its own (one per device), so several ranks can share a GPU.
//
// mark_ready() runs on the issuing thread and records an event on the
// caller's current stream: the staging copies wait for it, which is what
// orders the collective after the work that produced the tensor. The copies
// then run on the comm stream and the comm thread waits for them (polling,
// bounded by a timeout). Only built with CUDA.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>

#include "core/tensor.h"

namespace tandem::comm {

class CudaStaging {
 public:
  CudaStaging() = default;
  ~CudaStaging();
  CudaStaging(const CudaStaging&) = delete;
  CudaStaging& operator=(const CudaStaging&) = delete;

  // An event recorded on the current stream of `device`, owned by the result.
  static std::shared_ptr<void> mark_ready(int device);

  // --- on the comm thread -----------------------------------------------------
  void wait_ready(const std::shared_ptr<void>& event, std::chrono::milliseconds timeout);
  // A pinned buffer of at least `bytes`, reused across ops (valid until the next call).
  char* host_buffer(size_t bytes);
  void to_host(const Tensor& t, void* host);         // t's bytes -> host, waits
  void to_device(const void* host, const Tensor& t);  // host -> t's bytes, waits

 private:
  void* stream(int device);
  std::map<int, void*> streams_;  // device -> cudaStream_t
  Tensor buffer_;
};

}  // namespace tandem::comm
