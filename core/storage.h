// A block of bytes on one device, shared by every tensor that views it.
//
// Storage owns its memory and frees it through the allocator it came from. It
// also carries the version counter that autograd uses to detect a tensor that
// was modified in place after being saved for backward (shared by all views, as
// in PyTorch), and, for CUDA memory, the streams that used it besides the one it
// was allocated on, so the stream-ordered free waits for them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/stream.h"

namespace tandem {

class Storage {
 public:
  enum class Kind : unsigned char { Host, PinnedHost, Cuda, External };

  // Allocates `nbytes` on `device`. CUDA memory is allocated on the current
  // stream of that device. `pinned` applies to CPU storage only.
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device, bool pinned = false);
  // Wraps memory owned by someone else (an mmap'd file, a caller's buffer); `release` runs at destruction.
  static std::shared_ptr<Storage> wrap(void* data, size_t nbytes, Device device, std::function<void()> release);

  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  Kind kind() const { return kind_; }
  bool pinned() const { return kind_ == Kind::PinnedHost; }

  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

  // Marks that `stream` (not the allocation stream) used this memory: the free
  // will be ordered after the work queued on it so far at free time.
  void record_stream(const cuda::Stream& stream);

 private:
  Storage() = default;

  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Kind kind_ = Kind::Host;
  cuda::Stream alloc_stream_;
  std::vector<cuda::Stream> used_streams_;
  std::function<void()> release_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace tandem
