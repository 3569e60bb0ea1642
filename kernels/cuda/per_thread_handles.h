// One library handle (cuBLAS, cuDNN) per thread and device, created on first
// use and destroyed when the thread ends. Why per thread: a handle holds the
// stream it was last set to and its workspace, so two threads sharing one
// would race on both (NVIDIA's guidance for both libraries); DDP ranks that
// share a process and the comm thread each get their own.
#pragma once

#include <array>

#include "core/check.h"

namespace tandem::kernels {

template <class Handle, auto Destroy>
class PerThreadHandles {
 public:
  PerThreadHandles() = default;
  PerThreadHandles(const PerThreadHandles&) = delete;
  PerThreadHandles& operator=(const PerThreadHandles&) = delete;
  ~PerThreadHandles() {
    for (Handle h : handles_)
      if (h) Destroy(h);
  }

  // The calling thread's slot for `device` (null until the caller creates the handle).
  Handle& slot(int device, const char* library) {
    TANDEM_CHECK(device >= 0 && device < static_cast<int>(handles_.size()), "{}: device index {} out of range",
                 library, device);
    return handles_[static_cast<size_t>(device)];
  }

 private:
  std::array<Handle, 64> handles_{};
};

}  // namespace tandem::kernels
