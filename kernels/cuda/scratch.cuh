// Temporary device memory for one op call: taken from the stream-ordered
// caching allocator on the op's stream and given back in stream order when the
// host object dies, so kernels queued before that still see it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "core/allocator.h"

namespace tandem::kernels {

class Scratch {
 public:
  Scratch(int device, size_t bytes, cudaStream_t stream) : device_(device), bytes_(bytes), stream_(stream) {
    if (bytes_) ptr_ = cuda_memory::allocate(device, bytes_, stream);
  }
  ~Scratch() {
    if (ptr_) cuda_memory::deallocate(device_, ptr_, bytes_, stream_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  int device_;
  size_t bytes_;
  cudaStream_t stream_;
  void* ptr_ = nullptr;
};

}  // namespace tandem::kernels
