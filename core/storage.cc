#include "core/storage.h"

#include "core/allocator.h"
#include "core/check.h"

#if TANDEM_WITH_CUDA
#include "core/cuda_check.h"
#endif

namespace tandem {

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device, bool pinned) {
  std::shared_ptr<Storage> s(new Storage());
  s->nbytes_ = nbytes;
  s->device_ = device;
  if (device.is_cpu()) {
    if (pinned) {
      bool got_pinned = false;
      s->data_ = host_memory::allocate_pinned(nbytes, &got_pinned);
      s->kind_ = got_pinned ? Kind::PinnedHost : Kind::Host;
    } else {
      s->data_ = host_memory::allocate(nbytes);
      s->kind_ = Kind::Host;
    }
  } else {
    s->kind_ = Kind::Cuda;
    s->alloc_stream_ = cuda::current_stream(device.index);
    s->data_ = cuda_memory::allocate(device.index, nbytes, s->alloc_stream_.handle());
  }
  return s;
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, Device device, std::function<void()> release) {
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->kind_ = Kind::External;
  s->release_ = std::move(release);
  return s;
}

void Storage::record_stream(const cuda::Stream& stream) {
  if (kind_ != Kind::Cuda || stream == alloc_stream_) return;
  for (const auto& s : used_streams_)
    if (s == stream) return;
  used_streams_.push_back(stream);
}

Storage::~Storage() {
  switch (kind_) {
    case Kind::Host: host_memory::deallocate(data_, nbytes_); break;
    case Kind::PinnedHost: host_memory::deallocate_pinned(data_, nbytes_, true); break;
    case Kind::External:
      if (release_) release_();
      break;
    case Kind::Cuda:
#if TANDEM_WITH_CUDA
      // Order the free after the work other streams queued on this memory.
      for (const auto& s : used_streams_) {
        cudaEvent_t ev = nullptr;
        if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) == cudaSuccess) {
          cudaEventRecord(ev, static_cast<cudaStream_t>(s.handle()));
          cudaStreamWaitEvent(static_cast<cudaStream_t>(alloc_stream_.handle()), ev, 0);
          cudaEventDestroy(ev);
        }
      }
#endif
      cuda_memory::deallocate(device_.index, data_, nbytes_, alloc_stream_.handle());
      break;
  }
}

}  // namespace tandem
