#include "profile/device_timer.h"

#include "core/elapsed.h"

namespace tandem::profile {

DeviceTimer::DeviceTimer(int device) : device_(device), pool_(std::make_shared<Pool>()) {
  cuda::Event probe(/*enable_timing=*/true);  // fails here, not at the first mark, without a GPU
  pool_->free.push_back(std::make_unique<cuda::Event>(std::move(probe)));
}

DeviceTimer::Mark DeviceTimer::mark() {
  std::unique_ptr<cuda::Event> event;
  {
    std::lock_guard<std::mutex> lock(pool_->mutex);
    if (!pool_->free.empty()) {
      event = std::move(pool_->free.back());
      pool_->free.pop_back();
    }
  }
  if (!event) event = std::make_unique<cuda::Event>(/*enable_timing=*/true);
  event->record(cuda::current_stream(device_));
  std::weak_ptr<Pool> pool = pool_;
  return Mark(event.release(), [pool](const cuda::Event* e) {
    std::unique_ptr<cuda::Event> owned(const_cast<cuda::Event*>(e));
    if (auto p = pool.lock()) {
      std::lock_guard<std::mutex> lock(p->mutex);
      p->free.push_back(std::move(owned));
    }
  });
}

std::optional<double> DeviceTimer::elapsed_ms(const Mark& a, const Mark& b) {
  if (!a || !b || !a->query() || !b->query()) return std::nullopt;
  return static_cast<double>(a->elapsed_ms(*b));
}

void DeviceTimer::anchor() {
  cuda::device_synchronize();
  const Clock::time_point before = Clock::now();
  Mark m = mark();
  m->synchronize();
  const Clock::time_point after = Clock::now();
  anchor_ = std::move(m);
  anchor_host_ = before + (after - before) / 2;
}

std::optional<DeviceTimer::Clock::time_point> DeviceTimer::host_time(const Mark& m) const {
  if (!anchor_) return std::nullopt;
  std::optional<double> ms = elapsed_ms(anchor_, m);
  if (!ms) return std::nullopt;
  return anchor_host_ + milliseconds_as_duration(*ms);
}

}  // namespace tandem::profile
